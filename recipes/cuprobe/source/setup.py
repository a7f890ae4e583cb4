"""Builds cuprobe's extensions against the CUDA toolkit at $CUDA_HOME (include/, lib64/).

Like CuPy's build once did, every extension is handed every CUDA library, including `_flags`, which uses none:
only `-Wl,--as-needed` keeps such a module free of CUDA dependencies. The factory injects that flag.

`.cu` sources are compiled by $CUDA_HOME/bin/nvcc for the architectures in CUDAARCHS (CMake's syntax, e.g.
"80-real;90": SASS for 80, SASS and PTX for 90) and linked into their extension with the CUDA runtime.
"""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

cuda_home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
include = cuda_home / "include"
if not (include / "cuda_runtime_api.h").is_file():
    sys.exit(f"cuprobe: no CUDA headers under {include} — set CUDA_HOME to a CUDA toolkit")

windows = sys.platform == "win32"
library_dirs = [str(cuda_home / ("lib/x64" if windows else "lib64"))]
every_cuda_library = ["cudart", "cublas", "nvrtc"]


def gencode(cmake_archs: str) -> list[str]:
    flags = []
    for item in filter(None, cmake_archs.split(";")):
        arch, _, kind = item.partition("-")  # CMake's: 80-real SASS only, 80-virtual PTX only, 80 both
        codes = {"real": [f"sm_{arch}"], "virtual": [f"compute_{arch}"]}.get(kind, [f"sm_{arch}", f"compute_{arch}"])
        flags.append(f"-gencode=arch=compute_{arch},code=[{','.join(codes)}]")
    return flags


class BuildWithNvcc(build_ext):
    """Compiles each extension's .cu sources with nvcc, then builds the extension as usual around them."""

    def build_extension(self, ext: Extension) -> None:
        device_sources = [s for s in ext.sources if s.endswith(".cu")]
        ext.sources = [s for s in ext.sources if not s.endswith(".cu")]
        nvcc = cuda_home / "bin" / ("nvcc.exe" if windows else "nvcc")
        host_flags = ["-Xcompiler", "/MD"] if windows else ["-Xcompiler", "-fPIC"]
        for source in device_sources:
            obj = Path(self.build_temp) / (Path(source).stem + (".obj" if windows else ".o"))
            obj.parent.mkdir(parents=True, exist_ok=True)
            command = [str(nvcc), "-c", source, "-o", str(obj), "-O2", *host_flags]
            command += gencode(os.environ.get("CUDAARCHS", "75"))
            print(" ".join(command), flush=True)
            subprocess.check_call(command)
            ext.extra_objects.append(str(obj))
        super().build_extension(ext)


def extension(name: str, *sources: str) -> Extension:
    return Extension(
        name,
        [f"src/{source}" for source in sources],
        include_dirs=[str(include)],
        library_dirs=library_dirs,
        libraries=list(every_cuda_library),
    )


extensions = [
    extension("cuprobe._flags", "flags.c"),
    extension("cuprobe._runtime", "runtime.c"),
    extension("cuprobe._blas", "blas.c"),
    extension("cuprobe._nvrtc", "nvrtc.c"),
    extension("cuprobe._device", "device_module.c", "device.cu"),
]
if not windows:
    extensions[-1].libraries.append("stdc++")  # nvcc's host code may call into the C++ runtime
# NCCL is optional: built where its headers were provisioned (it has no Windows wheel).
if (include / "nccl.h").is_file() and not windows:
    nccl = extension("cuprobe.cuda._nccl", "nccl.c")
    nccl.libraries.append("nccl")
    extensions.append(nccl)

setup(ext_modules=extensions, packages=["cuprobe", "cuprobe.cuda"], cmdclass={"build_ext": BuildWithNvcc})
