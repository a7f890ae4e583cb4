"""Kernels compiled at run time by NVRTC, to CUBIN for the device's own architecture, cached on disk.

CUBIN rather than PTX: a newer NVRTC's PTX may be too new for an older driver to JIT. The cache key holds the
kernel source, the architecture, and the NVRTC and driver versions, so an upgrade of either recompiles.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import struct
import sys
from pathlib import Path

from . import _driver
from ._loading import load

_nvrtc = load("cuprobe._nvrtc", "nvrtc")

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def cache_dir() -> Path:
    if "CUPROBE_CACHE_DIR" in os.environ:
        return Path(os.environ["CUPROBE_CACHE_DIR"])
    base = os.environ.get("LOCALAPPDATA") if sys.platform == "win32" else os.environ.get("XDG_CACHE_HOME")
    return Path(base or Path.home() / ".cache") / "cuprobe" / "kernels"


def nvrtc_version() -> tuple[int, int]:
    major, minor = _nvrtc.version()
    return major, minor


def cubin(source: str, name: str, arch: str) -> tuple[bytes, bool]:
    """(CUBIN, whether it came from the disk cache)."""
    nvrtc_major, nvrtc_minor = nvrtc_version()
    key_text = f"{arch}|nvrtc {nvrtc_major}.{nvrtc_minor}|driver {_driver.version()}|{source}"
    path = cache_dir() / f"{name}-{arch}-{hashlib.sha256(key_text.encode()).hexdigest()[:24]}.cubin"
    if path.is_file():
        return path.read_bytes(), True
    image = _nvrtc.compile(source, name, arch)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_bytes(image)
    partial.replace(path)
    return image, False


def saxpy(a: float, x: list[float], y: list[float], device: int = 0) -> tuple[list[float], bool]:
    """a * x + y on the GPU; returns (result, whether the kernel came from the disk cache)."""
    lib = _driver.driver()
    cc_major, cc_minor = _driver.compute_capability(device)
    image, cached = cubin(SAXPY, "saxpy", f"sm_{cc_major}{cc_minor}")
    check = _driver.check
    ptr = ctypes.c_void_p
    lib.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(ptr), ctypes.c_int]
    lib.cuCtxSetCurrent.argtypes = [ptr]
    lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ptr), ctypes.c_char_p]
    lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(ptr), ptr, ctypes.c_char_p]
    lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ptr, ctypes.c_size_t]
    lib.cuMemcpyDtoH_v2.argtypes = [ptr, ctypes.c_uint64, ctypes.c_size_t]
    lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
    lib.cuLaunchKernel.argtypes = [ptr, *[ctypes.c_uint] * 6, ctypes.c_uint, ptr,
                                   ctypes.POINTER(ptr), ctypes.POINTER(ptr)]
    lib.cuModuleUnload.argtypes = [ptr]

    context, module, function = ptr(), ptr(), ptr()
    check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    check(lib.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    check(lib.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
    check(lib.cuModuleGetFunction(ctypes.byref(function), module, b"saxpy"), "cuModuleGetFunction")
    n = len(x)
    size = 4 * n
    d_x, d_y = ctypes.c_uint64(), ctypes.c_uint64()
    host_x = (ctypes.c_float * n)(*x)
    host_y = (ctypes.c_float * n)(*y)
    try:
        check(lib.cuMemAlloc_v2(ctypes.byref(d_x), size), "cuMemAlloc")
        check(lib.cuMemAlloc_v2(ctypes.byref(d_y), size), "cuMemAlloc")
        check(lib.cuMemcpyHtoD_v2(d_x, ctypes.cast(host_x, ptr), size), "cuMemcpyHtoD")
        check(lib.cuMemcpyHtoD_v2(d_y, ctypes.cast(host_y, ptr), size), "cuMemcpyHtoD")
        a_arg, n_arg = ctypes.c_float(a), ctypes.c_int(n)
        params = (ptr * 4)(*(ctypes.cast(ctypes.pointer(v), ptr) for v in (a_arg, d_x, d_y, n_arg)))
        threads = 128
        blocks = (n + threads - 1) // threads
        check(lib.cuLaunchKernel(function, blocks, 1, 1, threads, 1, 1, 0, None, params, None), "cuLaunchKernel")
        check(lib.cuCtxSynchronize(), "cuCtxSynchronize")
        check(lib.cuMemcpyDtoH_v2(ctypes.cast(host_y, ptr), d_y, size), "cuMemcpyDtoH")
    finally:
        lib.cuMemFree_v2(d_x)
        lib.cuMemFree_v2(d_y)
        lib.cuModuleUnload(module)
    return list(struct.unpack(f"{n}f", bytes(host_y))), cached
