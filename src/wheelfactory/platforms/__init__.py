"""One object per operating system the factory builds for, as cibuildwheel keeps one module per platform: what each
does its own way — the build's environment and the cibuildwheel options around it, the repair command, how the
build runs (in a container, or on the host), the CUDA_HOME's layout, and which machine the smoke tiers use.

This is where Linux and Windows are told apart: the stages ask the platform object of the wheel or build at hand
(`platform_of`) and compare no OS names; the facts that differ (binary format, library names, environment markers)
are data/operating_systems.yaml's, read by components.operating_system. Adding an OS (a musllinux, say) is one more
module here and its entry there. The objects sit below the stages and import none of them.
"""

from __future__ import annotations

from ..components import OS
from .base import BuildPlatform
from .linux import LINUX
from .windows import WINDOWS

PLATFORMS: dict[OS, BuildPlatform] = {platform.os: platform for platform in (LINUX, WINDOWS)}


def platform_of(os: OS) -> BuildPlatform:
    """The platform object of an OS."""
    return PLATFORMS[os]
