"""The user's inputs, matrix.yaml and recipes/<name>/recipe.yaml: typed models and strict validation.

Every problem is reported at its file:line:col with a hint, all of them at once, before anything is written.
"""

from .matrix import PYPI, CudaEntry, Exclusion, Matrix, PlatformSettings, TorchRelease, load_matrix, requires_python
from .recipe import (
    DRIVER,
    GitSource,
    GpuCheck,
    PathSource,
    ProvidedLibraries,
    Recipe,
    SdistSource,
    Smoke,
    Source,
    UrlSource,
)
from .recipe_checks import load_recipe
from .validation import Loaded

__all__ = [
    "DRIVER",
    "PYPI",
    "CudaEntry",
    "Exclusion",
    "GitSource",
    "GpuCheck",
    "Loaded",
    "Matrix",
    "PathSource",
    "PlatformSettings",
    "ProvidedLibraries",
    "Recipe",
    "SdistSource",
    "Smoke",
    "Source",
    "TorchRelease",
    "UrlSource",
    "load_matrix",
    "load_recipe",
    "requires_python",
]
