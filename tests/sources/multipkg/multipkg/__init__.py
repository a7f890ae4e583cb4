"""multipkg: the CUDA-free package."""

from ._version import __version__

__all__ = ["__version__"]
