"""Import a CUDA-linked extension, turning a missing CUDA library into an actionable ImportError."""

from __future__ import annotations

import importlib
from types import ModuleType

from ._cuda_variant import COMPONENTS, DIST_NAME, OPTIONAL, no_wheel


class MissingCudaLibrary(ImportError):
    """A CUDA library this module links is not installed (or not found)."""


def load(module: str, component: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        why_not = no_wheel(component)
        if why_not:  # an optional part NVIDIA gives this machine nothing for: built without it, no pip fix
            message = f"{module} needs {component}, and {why_not}: {DIST_NAME} has no {module} here"
            raise MissingCudaLibrary(message) from exc
        if component in OPTIONAL:
            distribution = OPTIONAL[component]["distribution"]
            fix = f"pip install '{DIST_NAME}[{component}]'"
        else:
            distribution = COMPONENTS[component]["distribution"]
            fix = f"pip install {distribution}  (installing {DIST_NAME} with its dependencies brings it)"
        raise MissingCudaLibrary(
            f"{module} needs {component} from {distribution}, which could not be loaded ({exc}). Fix: {fix}"
        ) from exc
