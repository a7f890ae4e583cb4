"""Shaped like CyFES: nvcc builds a CUDA library that ships as a data file (<dist>.data/data/lib/), opened at run
time from sys.prefix/lib with ctypes; a CUDA-free extension module, a script, a console script and a header
ride along. The library is compiled with $CUDA_HOME/bin/nvcc and the flags in DATALIB_NVCC_FLAGS, and with
`-ccbin $CC` as PyTorch's cpp_extension passes it (where the build sets CC)."""

import os
import shlex
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

LIBRARY = os.path.join("build", "native", "libdatalib.so")


class BuildWithNvcc(build_py):
    def run(self) -> None:
        os.makedirs(os.path.dirname(LIBRARY), exist_ok=True)
        nvcc = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
        flags = shlex.split(os.environ.get("DATALIB_NVCC_FLAGS", ""))
        host = ["-ccbin", os.environ["CC"]] if os.environ.get("CC") else []
        command = [nvcc, *host, "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", *flags, "-o", LIBRARY]
        subprocess.check_call([*command, "src/kernels.cu"])
        super().run()


setup(
    name="datalib",
    version="0.3.0",
    description="A CUDA library shipped as a data file",
    packages=["datalib"],
    ext_modules=[Extension("datalib._host", ["src/host.c"])],
    data_files=[("lib", [LIBRARY])],
    headers=["src/datalib.h"],
    scripts=["scripts/datalib-info"],
    entry_points={"console_scripts": ["datalib-version = datalib:main"]},
    cmdclass={"build_py": BuildWithNvcc},
)
