"""The CUDA driver, opened at first use through ctypes and never linked, so `import cuprobe` needs no GPU."""

from __future__ import annotations

import ctypes
import functools
import sys

LIBRARY = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


class NoDriver(RuntimeError):
    """No CUDA driver on this machine."""


@functools.cache
def driver() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(LIBRARY)
    except OSError as exc:
        raise NoDriver(f"no CUDA driver ({LIBRARY} not found: no GPU, or its driver is not installed)") from exc
    check(lib.cuInit(0), "cuInit")
    return lib


def check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed with CUDA driver error {status}")


def version() -> int:
    value = ctypes.c_int()
    check(driver().cuDriverGetVersion(ctypes.byref(value)), "cuDriverGetVersion")
    return value.value


def device_count() -> int:
    value = ctypes.c_int()
    check(driver().cuDeviceGetCount(ctypes.byref(value)), "cuDeviceGetCount")
    return value.value


def compute_capability(ordinal: int = 0) -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    device = ctypes.c_int()
    lib = driver()
    check(lib.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
    check(lib.cuDeviceGetAttribute(ctypes.byref(major), 75, device), "cuDeviceGetAttribute")
    check(lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, device), "cuDeviceGetAttribute")
    return major.value, minor.value


def device_name(ordinal: int = 0) -> str:
    device = ctypes.c_int()
    buffer = ctypes.create_string_buffer(256)
    lib = driver()
    check(lib.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
    check(lib.cuDeviceGetName(buffer, 256, device), "cuDeviceGetName")
    return buffer.value.decode()
