"""New CUDA toolkit releases, read from NVIDIA's wheels on the index: the minors of the nvcc component's
distribution newer than the newest the toolkit table knows of its major, the platforms its wheels exist for, the
versions of each component that the `cuda-toolkit` meta-package's releases of that minor pin, and — from the nvcc
and crt wheels themselves, for `--write` — what the release's tools say of themselves:

  ptx_isa  the newest PTX ISA its ptxas reads (`ptxas --list-version`): the version its nvcc writes (13.0: 9.0 and
           13.2: 9.2, as read off their PTX in tests/test_fatbin.py and toolkits.yaml)
  archs    `nvcc --list-gpu-code`, plain sm_XY
  gcc/msvc the newest __GNUC__ and _MSC_VER that crt/host_config.h accepts

What no wheel says — the driver of the release's GA, which NVIDIA publishes in its release notes — is left for a
person (`to_fill`), never guessed."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..components import ComponentMajor, component_table, platforms, toolkit_table
from ..errors import BadBytes, ToolFailure
from ..host import machine
from ..untrusted import archives
from ..untrusted.shown import shown
from .index import Wheel, finals, metadata, wheels, where

META_PACKAGE = "cuda-toolkit"
MAX_SOURCE_BYTES = 1 << 20  # host_config.h is 11 KiB
DRIVER_SOURCE = (
    "NVIDIA's CUDA Toolkit Release Notes, 'CUDA Toolkit and Corresponding Driver Versions' (no wheel carries it)"
)


@dataclass
class Measured:
    """What the release's own tools and headers say, read from its Linux wheels of this host's machine."""

    ptx_isa: str
    archs: list[int]
    gcc: int
    msvc: str
    source: str


@dataclass
class NewToolkit:
    release: str  # "13.3"
    major: int
    index: str  # the index it was read from
    nvcc: dict[str, Wheel]  # factory platform -> the newest nvcc wheel of the release there
    versions: dict[str, str] = field(default_factory=dict)  # distribution -> the specifier its pins give
    sources: list[str] = field(default_factory=list)
    measured: Measured | None = None


def _platform_of(tag_platform: str) -> str | None:
    """The factory platform a wheel's platform tag is for (manylinux_2_17_x86_64 -> linux-x86_64)."""
    for name, platform in platforms().items():
        if tag_platform == platform.identifier or (
            platform.identifier.startswith("manylinux_")
            and tag_platform.startswith("manylinux")
            and tag_platform.endswith(f"_{platform.cibw_arch}")
        ):
            return name
    return None


def _minor(version: Version) -> str:
    return f"{version.major}.{version.minor}"


def new_toolkits(index: str) -> list[NewToolkit]:
    """Each release of each CUDA major with pip nvcc wheels, newer than the table's newest of that major."""
    known = toolkit_table().releases
    nvcc = component_table().components["nvcc"]
    found: list[NewToolkit] = []
    for major, entry in sorted(nvcc.majors.items()):
        newest = max(Version(r) for r in known if r.startswith(f"{major}."))
        by_minor: dict[str, dict[str, Wheel]] = {}
        for version, files in finals(wheels(index, entry.distribution)).items():
            if version.major != major or Version(_minor(version)) <= newest:
                continue
            for wheel in files:
                for tag in wheel.platforms():
                    if (platform := _platform_of(tag)) is not None:
                        by_minor.setdefault(_minor(version), {})[platform] = wheel  # the newest wins
        for release, nvccs in by_minor.items():
            toolkit = NewToolkit(release, major, index, nvccs)
            toolkit.sources.append(
                f"{entry.distribution} on {index}: " + ", ".join(f"{p} {w.version}" for p, w in sorted(nvccs.items()))
            )
            found.append(toolkit)
    if found:
        _read_pins(index, found)
    return found


def _pin(requirement: Requirement) -> Version | None:
    """The version a meta-package's requirement pins: `==X.*` / `==X`, or the floor of `>=X,<Y`."""
    for spec in requirement.specifier:
        if spec.operator in ("==", ">="):
            try:
                return Version(spec.version.removesuffix(".*"))
            except InvalidVersion:
                return None
    return None


def _read_pins(index: str, toolkits: list[NewToolkit]) -> None:
    """The specifier of each distribution for each new toolkit, from the pins of the `cuda-toolkit` releases of
    its minor, told apart from the pins of every other minor of its major (see `specifier`)."""
    pins: dict[str, dict[str, list[Version]]] = {}  # minor -> distribution -> versions pinned
    majors = {t.major for t in toolkits}
    for version, files in finals(wheels(index, META_PACKAGE)).items():
        if version.major not in majors:
            continue
        for toolkit in (t for t in toolkits if t.release == _minor(version)):
            toolkit.sources.append(f"{META_PACKAGE} {version}: {where(files[0])}")
        for line in metadata(files[0]).get_all("Requires-Dist") or []:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                raise BadBytes(f"{shown(files[0].filename)}: Requires-Dist {shown(line)} is not PEP 508") from None
            if (pinned := _pin(requirement)) is not None:
                name = canonicalize_name(requirement.name)
                pins.setdefault(_minor(version), {}).setdefault(name, []).append(pinned)
    for toolkit in toolkits:
        for distribution, versions in pins.get(toolkit.release, {}).items():
            others = [v for minor, of in pins.items() if minor != toolkit.release for v in of.get(distribution, [])]
            toolkit.versions[distribution] = specifier(toolkit.release, sorted(set(versions)), others)


def specifier(release: str, pins: list[Version], others: list[Version]) -> str:
    """The first of `==R.*` (R the release), `==a.b.c.*` (the parts all pins share) and `>=lowest,<=highest` that
    admits every pin of this release and none of another's (CCCL numbers itself 13.3.x for toolkits 13.3, 13.4
    and 13.5: `==13.3.*` would take 13.4's into 13.3's build)."""
    candidates = [f"=={release}.*"] if all(_minor(v) == release for v in pins) else []
    if len({v.release[:3] for v in pins}) == 1:
        candidates.append("==" + ".".join(str(part) for part in pins[0].release[:3]) + ".*")
    for candidate in candidates:
        if not any(SpecifierSet(candidate).contains(v, prereleases=True) for v in others):
            return candidate
    return f">={pins[0]},<={pins[-1]}"


def component_versions(toolkit: NewToolkit, nccl: str | None) -> dict[str, str]:
    """component name -> its specifier for the release, for each component of the toolkit's major: the meta-
    package's pins, NCCL (which it does not pin) from the torch train (`nccl`), else nothing."""
    table = component_table()
    found: dict[str, str] = {}
    for name, component in table.components.items():
        entry: ComponentMajor | None = component.majors.get(toolkit.major)
        if entry is None:
            continue
        spec = toolkit.versions.get(canonicalize_name(entry.distribution))
        if spec is None and name == "nccl":
            spec = nccl
        if spec is not None:
            found[name] = spec
    return found


def measure(toolkit: NewToolkit, cache: Path | None = None) -> Measured:
    """Run the release's nvcc and ptxas and read its host_config.h, from its wheels of this host's machine."""
    host = next((p for p, s in platforms().items() if s.os == "linux" and s.cibw_arch == machine()), None)
    wheel = toolkit.nvcc.get(host) if host else None
    nvcc_entry = component_table().get("nvcc", toolkit.major)
    crt_entry = component_table().get("crt", toolkit.major)
    if wheel is None or nvcc_entry is None or crt_entry is None or nvcc_entry.linux is None or crt_entry.linux is None:
        raise ToolFailure(f"CUDA {toolkit.release}: no nvcc wheel runs on this machine ({machine()}) — measure on one")
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        tree = Path(scratch)
        archives.unpack(archives.download(wheel.url, tree / wheel.filename), tree / "nvcc")
        crt = _crt_wheel(toolkit, wheel, crt_entry.distribution)
        archives.unpack(archives.download(crt.url, tree / crt.filename), tree / "crt")
        bin_dir = tree / "nvcc" / nvcc_entry.linux.prefix_dirs["bin"]
        header = tree / "crt" / crt_entry.linux.include_dirs[0] / "crt" / "host_config.h"
        isas = _run([bin_dir / "ptxas", "--list-version"])
        codes = _run([bin_dir / "nvcc", "--list-gpu-code"])
        if header.stat().st_size > MAX_SOURCE_BYTES:
            raise BadBytes(f"{crt.filename}: host_config.h over {MAX_SOURCE_BYTES >> 10} KiB — refused")
        gcc, msvc = host_limits(header.read_text(encoding="utf-8", errors="replace"))
    return Measured(
        ptx_isa=newest_isa(isas),
        archs=sorted({int(n) for n in re.findall(r"^sm_(\d+)$", codes, flags=re.MULTILINE)}),
        gcc=gcc,
        msvc=msvc,
        source=f"ptxas --list-version, nvcc --list-gpu-code of {wheel.filename}; crt/host_config.h of {crt.filename}",
    )


def _crt_wheel(toolkit: NewToolkit, nvcc: Wheel, distribution: str) -> Wheel:
    """The crt wheel of the same version and platform as the nvcc wheel measured."""
    for candidate in wheels(toolkit.index, distribution):
        if candidate.version == nvcc.version and candidate.platforms() & nvcc.platforms():
            return candidate
    raise ToolFailure(f"no {distribution} {nvcc.version} beside {shown(nvcc.filename)} on the index")


def _run(command: list[Path | str]) -> str:
    try:
        done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=120, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolFailure(f"{shown(Path(command[0]).name)} of the measured wheel failed: {shown(exc)}") from None
    return done.stdout


def newest_isa(listing: str) -> str:
    """The newest PTX ISA version `ptxas --list-version` prints (one "9.2" a line)."""
    versions = re.findall(r"^(\d+)\.(\d+)$", listing, flags=re.MULTILINE)
    if not versions:
        raise BadBytes(f"ptxas --list-version printed no ISA version: {shown(listing)}")
    major, minor = max((int(a), int(b)) for a, b in versions)
    return f"{major}.{minor}"


def host_limits(header: str) -> tuple[int, str]:
    """The newest GCC major and MSVC toolset that crt/host_config.h accepts: it refuses `__GNUC__ > N` and
    `_MSC_VER >= 19XY` (toolset 14.XY is _MSC_VER 19XY, so the newest accepted is 14.(XY-1))."""
    gcc = re.search(r"^#if __GNUC__ > (\d+)\s*$", header, flags=re.MULTILINE)
    msvc = re.search(r"^#if _MSC_VER < \d+ \|\| _MSC_VER >= 19(\d\d)\s*$", header, flags=re.MULTILINE)
    if gcc is None or msvc is None:
        raise BadBytes("crt/host_config.h: no __GNUC__ or _MSC_VER limit where NVIDIA's headers put them")
    return int(gcc.group(1)), f"14.{int(msvc.group(1)) - 1}"
