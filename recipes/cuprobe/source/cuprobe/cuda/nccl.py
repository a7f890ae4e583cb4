"""NCCL, the optional collective-communication library (Linux only; the `nccl` extra)."""

from .._loading import load

_nccl = load("cuprobe.cuda._nccl", "nccl")


def version() -> int:
    return _nccl.version()
