"""scale(x, alpha): x * alpha, by a custom op of LibTorch's stable ABI (CPU and CUDA kernels)."""

import torch

from . import _C  # noqa: F401  (importing it registers the op with torch's dispatcher)

__all__ = ["scale"]


def scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """A new float32 tensor: each element of `x` (float32, contiguous) times `alpha`, on `x`'s device."""
    return torch.ops.stableop.scale.default(x, alpha)
