"""Builds cuprobe's extensions against the CUDA toolkit at $CUDA_HOME (include/, lib/).

Like CuPy's build once did, every extension is handed every CUDA library, including `_flags`, which uses none:
only `-Wl,--as-needed` keeps such a module free of CUDA dependencies. The factory injects that flag.
"""

import os
import sys
from pathlib import Path

from setuptools import Extension, setup

cuda_home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
include = cuda_home / "include"
if not (include / "cuda_runtime_api.h").is_file():
    sys.exit(f"cuprobe: no CUDA headers under {include} — set CUDA_HOME to a CUDA toolkit")

windows = sys.platform == "win32"
library_dirs = [str(cuda_home / ("lib/x64" if windows else "lib"))]
every_cuda_library = ["cudart", "cublas", "nvrtc"]


def extension(name: str, source: str) -> Extension:
    return Extension(
        name,
        [f"src/{source}"],
        include_dirs=[str(include)],
        library_dirs=library_dirs,
        libraries=list(every_cuda_library),
    )


extensions = [
    extension("cuprobe._flags", "flags.c"),
    extension("cuprobe._runtime", "runtime.c"),
    extension("cuprobe._blas", "blas.c"),
    extension("cuprobe._nvrtc", "nvrtc.c"),
]
# NCCL is optional: built where its headers were provisioned (it has no Windows wheel).
if (include / "nccl.h").is_file() and not windows:
    nccl = extension("cuprobe.cuda._nccl", "nccl.c")
    nccl.libraries.append("nccl")
    extensions.append(nccl)

setup(ext_modules=extensions, packages=["cuprobe", "cuprobe.cuda"])
