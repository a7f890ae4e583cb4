"""A CUDA library that ships as a data file beside the interpreter, opened on first use from sys.prefix (as CyFES
opens its own)."""

import ctypes
import os
import sys

from . import _host

LIBRARY = os.path.join(sys.prefix, "lib", _host.library_name())


def library() -> ctypes.CDLL:
    if not os.path.isfile(LIBRARY):
        raise ImportError(f"datalib: library not found at {LIBRARY} — reinstall datalib with pip")
    return ctypes.CDLL(LIBRARY)


def runtime_version() -> int:
    return library().datalib_runtime_version()


def cuda_runtime_path() -> str:
    """Where the CUDA runtime this process uses was loaded from."""
    library()
    with open("/proc/self/maps", encoding="utf-8") as maps:
        return next(line.split()[-1] for line in maps if "libcudart.so" in line)


def main() -> None:
    print(f"CUDA runtime {runtime_version()} from {cuda_runtime_path()}")
