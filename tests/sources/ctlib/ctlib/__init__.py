"""Opens its CUDA library with ctypes at import, as cufinufft does: without CUDA's runtime the import fails."""

import ctypes
import os

from packaging.version import Version

_library = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "libctlib.so"))


def fetched() -> str:
    """The dependency its CMake build fetched while it configured, and its version."""
    _library.ctlib_fetched.restype = ctypes.c_char_p
    return _library.ctlib_fetched().decode()


def runtime_version() -> int:
    return int(_library.ctlib_runtime_version())


def runtime_release() -> Version:
    """The CUDA runtime's release, 12.4 for 12040."""
    version = runtime_version()
    return Version(f"{version // 1000}.{version % 1000 // 10}")


def scale(values: list[float], factor: float) -> list[float]:
    array = (ctypes.c_float * len(values))(*values)
    status = _library.ctlib_scale(array, ctypes.c_float(factor), len(values))
    if status != 0:
        raise RuntimeError(f"ctlib_scale failed ({status})")
    return list(array)


def cuda_runtime_path() -> str:
    """Where the CUDA runtime this process uses was loaded from."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        return next(line.split()[-1] for line in maps if "libcudart.so" in line)
