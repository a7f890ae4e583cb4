"""Opens the vendored library when imported, through its helper: without CUDA's runtime the import fails."""

import ctypes

from ._loading import open_library

_library = open_library()


def has_cuda() -> bool:
    return bool(_library.vendkern_has_cuda())


def runtime_version() -> int:
    return int(_library.vendkern_runtime_version())


def affine(values: list[float], factor: float, shift: float) -> list[float]:
    array = (ctypes.c_float * len(values))(*values)
    status = _library.vendkern_affine(array, ctypes.c_float(factor), ctypes.c_float(shift), len(values))
    if status != 0:
        raise RuntimeError(f"vendkern_affine failed ({status})")
    return list(array)
