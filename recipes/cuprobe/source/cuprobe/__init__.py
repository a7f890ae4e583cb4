"""cuprobe: which CUDA libraries load, from where, and whether they compute.

Importing cuprobe never touches the driver, and loads no CUDA library where NVIDIA's wheels sit beside it: each
CUDA-linked piece loads at its own first use, and says what to install when its library is missing. (Where pip
put them elsewhere on sys.path, the variant module the factory generates loads them at import.)
"""

from . import cuda
from ._cuda_variant import CUDA_MAJOR, DIST_NAME
from ._loading import MissingCudaLibrary

__version__ = "0.1.0"
__all__ = ["CUDA_MAJOR", "DIST_NAME", "MissingCudaLibrary", "cuda"]
