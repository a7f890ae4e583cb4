"""cuBLAS: a small SGEMM, checked against the host by callers that have a GPU."""

from collections.abc import Sequence

from ._loading import load

_blas = load("cuprobe._blas", "cublas")


def version() -> int:
    return _blas.version()


def sgemm(m: int, n: int, k: int, a: Sequence[float], b: Sequence[float]) -> list[float]:
    """Row-major C = A (m x k) @ B (k x n), computed on the GPU."""
    return _blas.sgemm(m, n, k, list(a), list(b))


def sgemm_host(m: int, n: int, k: int, a: Sequence[float], b: Sequence[float]) -> list[float]:
    return [sum(a[i * k + p] * b[p * n + j] for p in range(k)) for i in range(m) for j in range(n)]
