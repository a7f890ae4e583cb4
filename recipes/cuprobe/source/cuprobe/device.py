"""Device code compiled by nvcc when the wheel was built: a SAXPY kernel run on device 0."""

from ._loading import load

_device = load("cuprobe._device", "cudart")


def saxpy(a: float, x: list[float], y: list[float]) -> list[float]:
    """a*x + y, computed on the GPU by the kernel in src/device.cu."""
    return _device.saxpy(a, x, y)


def built_for() -> tuple[int, int]:
    """The CUDA runtime version the kernel was compiled against, as (major, minor)."""
    version = _device.built_for()
    return version // 1000, version % 1000 // 10
