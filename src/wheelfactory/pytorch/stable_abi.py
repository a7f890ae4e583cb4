"""LibTorch's stable ABI: what a build against it is given, and the torch releases a wheel built that way runs on.

An extension that keeps to the stable surface (torch/csrc/stable, torch/headeronly, the aoti_torch_* C shim) and is
compiled with TORCH_TARGET_VERSION set to a release runs on every torch from that release on: torch's headers then
refuse anything newer than the target, or outside the stable surface (the unstable headers #error).
"""

from __future__ import annotations

from packaging.version import Version

# The torch release the stable ABI came with: no older torch can be a target.
STABLE_ABI_SINCE = "2.9"


def target_version_macro(target: str) -> str:
    """TORCH_TARGET_VERSION's value for a "major.minor" release, as torch's headers compare it: the major in the top
    byte, the minor in the next (2.11 -> 0x020b000000000000)."""
    version = Version(target)
    return f"0x{version.major:02x}{version.minor:02x}000000000000"


def target_define(target: str) -> str:
    """The compiler flag that sets it."""
    return f"-DTORCH_TARGET_VERSION={target_version_macro(target)}"
