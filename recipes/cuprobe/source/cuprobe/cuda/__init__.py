"""CUDA-facing submodules. `nccl` is optional (the `nccl` extra) and loads only when asked for.

`import cuprobe; cuprobe.cuda.nccl` and `from cuprobe.cuda import nccl` behave the same: both import the
module, and both raise the same ImportError, with the pip command that fixes it, when NCCL is absent.
"""

from __future__ import annotations

import importlib
from types import ModuleType

_LAZY = ("nccl",)


def __getattr__(name: str) -> ModuleType:
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
