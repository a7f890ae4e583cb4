"""The torch train as the index has it: each torch minor from the oldest of a CUDA major's train on, the CUDA
release its newest patch's Linux wheel is built for (the `cuda-toolkit[…]==X.Y.Z` its METADATA pins) and the NCCL
it pins — read from the wheel's metadata, never from the wheel — and the CPythons that patch has wheels for on each
of the factory's platforms, read off the index's file names (their tags)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..components import platforms
from ..errors import BadBytes
from ..untrusted.shown import shown
from .index import Wheel, finals, metadata, wheels, where

TORCH = "torch"
META_PACKAGE = canonicalize_name("cuda-toolkit")


@dataclass(frozen=True)
class TorchRelease:
    release: str  # "2.12"
    newest: str  # its newest patch, "2.12.1"
    cuda: str | None  # the CUDA release it is built for, "13.0"; None: no cuda-toolkit pin (a CPU build)
    nccl: str | None  # "==2.30.7"
    source: str
    pythons: dict[str, list[str]]  # factory platform -> the CPythons ("3.13", oldest first) it has wheels for there
    pythons_source: str


def _pins(lines: list[str], filename: str) -> tuple[str | None, str | None]:
    cuda = nccl = None
    for line in lines:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            raise BadBytes(f"{shown(filename)}: Requires-Dist {shown(line)} is not PEP 508") from None
        pinned = [s.version for s in requirement.specifier if s.operator == "=="]
        name = canonicalize_name(requirement.name)
        if name == META_PACKAGE and pinned:
            version = Version(pinned[0].removesuffix(".*"))
            cuda = f"{version.major}.{version.minor}"
        elif name.startswith("nvidia-nccl-") and pinned:
            nccl = f"=={pinned[0]}"
    return cuda, nccl


def _platform_of(tag: str) -> str | None:
    """The factory platform a wheel tag's platform part is for (manylinux_2_28_x86_64 -> linux-x86_64), if any."""
    plain = re.sub(r"^manylinux(_\d+_\d+|2014|2010|1)_", "manylinux_", tag)
    return next((name for name, platform in platforms().items() if platform.identifier == plain), None)


def wheel_pythons(files: list[Wheel]) -> dict[str, list[str]]:
    """Factory platform -> the CPythons the files have a wheel for there, oldest first: a tag whose interpreter and
    ABI are both cpXY (a free-threaded build, cp314t, is another interpreter than the matrix's)."""
    found: dict[str, set[str]] = {}
    for tag in (tag for wheel in files for tag in wheel.tags):
        interpreter, abi, platform_tag = tag.split("-")
        platform = _platform_of(platform_tag)
        matched = re.fullmatch(r"cp3(\d+)", interpreter)
        if platform is not None and matched is not None and abi == interpreter:
            found.setdefault(platform, set()).add(f"3.{matched.group(1)}")
    return {name: sorted(pythons, key=Version) for name, pythons in sorted(found.items())}


def torch_releases(index: str, oldest: str, platform_tag: str) -> list[TorchRelease]:
    """Each torch minor from `oldest` on, newest first, read off a wheel of its newest patch for `platform_tag`'s
    machine (manylinux_…_x86_64)."""
    newest_patch: dict[str, Version] = {}
    for version in finals(wheels(index, TORCH)):
        minor = f"{version.major}.{version.minor}"
        if Version(minor) >= Version(oldest):
            newest_patch[minor] = max(version, newest_patch.get(minor, version))
    found = []
    releases = finals(wheels(index, TORCH))
    for minor, version in sorted(newest_patch.items(), key=lambda item: Version(item[0]), reverse=True):
        linux = [w for w in releases[version] if any(p.endswith(platform_tag) for p in w.platforms())]
        if not linux:
            continue
        # One whose metadata the index serves as a file of its own (PEP 658), where there is one: no range requests.
        wheel = max(linux, key=lambda w: (w.metadata_url is not None, w.filename))
        cuda, nccl = _pins(metadata(wheel).get_all("Requires-Dist") or [], wheel.filename)
        listed = f"the file names of torch {version}'s {len(releases[version])} wheels on the index"
        pythons = wheel_pythons(releases[version])
        found.append(TorchRelease(minor, str(version), cuda, nccl, where(wheel), pythons, listed))
    return found
