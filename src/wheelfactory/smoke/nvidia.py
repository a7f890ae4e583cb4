"""NVIDIA's wheels the smoke layouts hold with a wheel: those pip would install with it and all its extras,
at the floors its Requires-Dist admit or at the newest, laid out in the cache as a runtime site (each wheel unpacked
once, whichever sites hold it, and linked into them)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from functools import cache, partial
from pathlib import Path
from typing import Literal

from packaging.requirements import Requirement
from packaging.utils import InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from .. import host
from ..binaries.wheelfile import WheelMetadata, marker_environment, unpack
from ..components import OS
from ..errors import ToolFailure, fetched
from ..platforms import platform_of
from ..progress import step
from ..sources import index_urls, project_files
from ..toolkit.provision import Toolkit, download_wheels
from ..untrusted import archives
from ..untrusted.cache import SEAL, reusable, seal
from . import resolutions


def nvidia_requirements(
    wheel: WheelMetadata, requires_of: Callable[[NormalizedName], list[str] | None]
) -> Iterator[Requirement]:
    """Each NVIDIA requirement pip meets when it installs `wheel` with all its extras on the wheel's machine: the
    wheel's own, then those of each NVIDIA distribution they name (`requires_of(name)`: its Requires-Dist, asked
    once a distribution, after a requirement on it was yielded)."""
    environment = marker_environment(wheel.name)
    wanted_extras = ["", *wheel.extras]
    pending = wheel.requires_dist()
    followed: set[NormalizedName] = set()
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if not name.startswith("nvidia-"):
            continue  # the wheel's other requirements are not CUDA's
        if requirement.marker and not any(
            requirement.marker.evaluate({**environment, "extra": e}) for e in wanted_extras
        ):
            continue
        yield requirement
        if name not in followed:
            followed.add(name)
            pending += [Requirement(line) for line in requires_of(name) or []]


# Which versions of NVIDIA's wheels the smoke tier installs with a wheel: the lowest its Requires-Dist admit (what
# it promises to work with), and the newest (what a fresh `pip install` gets today).
NvidiaVersions = Literal["floors", "newest"]


def _lowest(requirement: Requirement, os_name: OS, arch: str) -> Version:
    """The lowest version of `requirement` with a wheel for this OS and machine on pip's indexes."""
    platforms = {*platform_of(os_name).pip_platform_tags(arch), "any"}
    found = []
    for index in index_urls():
        for file_name, _ in project_files(index, requirement.name):
            try:
                _, version, _, tags = parse_wheel_filename(file_name)
            except InvalidWheelFilename:
                continue  # an sdist, or a name pip would not take either
            if requirement.specifier.contains(version) and any(tag.platform in platforms for tag in tags):
                found.append(version)
    if not found:
        raise ToolFailure(f"no wheel of {requirement} for {os_name}-{arch} on {', '.join(index_urls())}")
    return min(found)


@cache
def _resolved(lines: tuple[str, ...], os_name: OS, arch: str, versions: NvidiaVersions) -> tuple[Path, ...]:
    """The NVIDIA wheels pip installs for `lines` (and for what they require), at the floors or the newest,
    downloaded into the cache's wheel folder: once a process, as every Python of a variant asks the same, and
    taken from an earlier run's resolution for an hour (resolutions.py)."""
    asked = ["nvidia", lines, os_name, arch, versions]
    with host.cache_lock("wheels"):
        found = resolutions.earlier(asked)
    if found is not None:
        return found
    constraints = None  # the newest: as pip resolves them
    if versions == "floors":
        constraints = [f"{Requirement(line).name}=={_lowest(Requirement(line), os_name, arch)}" for line in lines]
    with step(f"download NVIDIA's wheels at the {versions} of {', '.join(lines)}"):
        folder, lock = resolutions.wheel_folder(), host.cache_lock("wheels")
        found = tuple(download_wheels(list(lines), os_name, arch, folder, constraints, lock))
        resolutions.remember(asked, found)
    return found


def nvidia_wheels(
    wheel: WheelMetadata, versions: NvidiaVersions, pinned: dict[str, str] | None = None
) -> tuple[Path, ...]:
    """The NVIDIA wheels pip would install with `wheel` and all its extras, at the lowest versions its
    Requires-Dist admit or at the newest: what the smoke tiers' CUDA layouts hold. `pinned`: NVIDIA's wheels that
    another requirement pins exactly (torch's, name -> version): those at that version, whatever the floors."""
    name = wheel.name
    pinned = pinned or {}
    own = sorted(
        {
            f"{r.name}{r.specifier}"
            for r in nvidia_requirements(wheel, lambda _: None)
            if canonicalize_name(r.name) not in pinned
        }
    )
    lines = [*own, *(f"{distribution}=={version}" for distribution, version in sorted(pinned.items()))]
    return _resolved(tuple(lines), name.os, name.arch, versions) if lines else ()


def runtime_site(toolkit: Toolkit, wheels: tuple[Path, ...]) -> Path:
    """NVIDIA's `wheels` laid out in the cache as site-packages: what the smoke tiers' venvs reach. Each wheel is
    unpacked once (unpacked_once), whichever sets hold it — the floors and the newest share every wheel they hold
    at one version, and so do two wheels' smokes — and a set's site is made of hard links to those files, wheel
    after wheel, as pip writes them into one folder (a later wheel's file replacing an earlier one's)."""
    key = hashlib.sha256(json.dumps(sorted(w.name for w in wheels)).encode()).hexdigest()[:12]
    # Beside the toolkits, not inside one: a toolkit's folder is sealed as it was laid out.
    site = host.cache_dir() / "runtime" / f"{toolkit.site.parent.name}-{key}"
    with host.cache_lock(f"runtime-{toolkit.site.parent.name}-{key}"):
        if not reusable(site):
            # unpacked side by side (a cold CuPy set: fourteen wheels, 2.7 GB), then each folder found as made
            host.side_by_side((partial(unpacked_once, wheel) for wheel in wheels), archives.UNPACK_WORKERS)
            unpacked = [unpacked_once(wheel) for wheel in wheels]
            with host.built_aside(site) as scratch:
                for folder in unpacked:
                    _linked(folder, scratch)
                seal(scratch)
    return site


def unpacked_once(wheel: Path) -> Path:
    """One NVIDIA wheel unpacked into the cache, once: a folder every runtime site that holds it links from."""
    folder = host.cache_dir() / "runtime-wheels" / wheel.name.removesuffix(".whl")
    with host.cache_lock(f"runtime-wheel-{wheel.name}"):
        if not reusable(folder):
            with host.built_aside(folder) as scratch, fetched():
                unpack(wheel, scratch)
                seal(scratch)
    return folder


def _linked(unpacked: Path, site: Path) -> None:
    """Every file of an unpacked wheel (its seal aside) in `site` at the same place, as a hard link."""
    for path in sorted(unpacked.rglob("*")):
        relative = path.relative_to(unpacked)
        if relative == Path(SEAL):
            continue
        target = site / relative
        if path.is_dir():
            target.mkdir(exist_ok=True)
            continue
        target.unlink(missing_ok=True)
        host.link_or_copy(path, target)
