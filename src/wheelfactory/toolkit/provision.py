"""Provision a complete, relocatable CUDA_HOME of exactly the matrix's toolkit release, into a reusable cache.

Headers and libraries come from NVIDIA's pip wheels, pinned to the versions that release shipped (its
major.minor, never "latest"): the recipe's components, the toolkit every build gets (data/cuda_components.yaml's
`toolkit`), and what their headers include. nvcc comes from the release's pip wheel where NVIDIA ships one
(CUDA 13), else from NVIDIA's redistributable archives or Debian's packages (data/toolkits.yaml), which also add
the static runtime and driver stub that some wheels lack. A lock file names the wheels, so a warm run touches
no network.

The prefix is laid out as NVIDIA's toolkit is: bin/ (a real nvcc beside a relocatable nvcc.profile, and the
tools it runs), nvvm/ (cicc, libdevice), include/, and lib64/ (lib/x64 on Windows) with the link-time names no
wheel ships (libcudart.so, ...), the static libraries and stubs/libcuda.so — NVIDIA's where a source has it,
else generated from cuda.h's declarations. Every link is relative, so the prefix works at any path (in the
build container it is seen under /host). A prefix is built in a scratch folder beside its final place and
renamed there when complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path
from urllib.parse import quote

from packaging.utils import parse_wheel_filename

from .. import host
from ..binaries.wheelfile import unpack
from ..components import OS, Layout, NvccSource, component_table, operating_system, platforms, toolkit_table
from ..errors import ToolFailure, UserError, fetched
from ..plan import Variant
from ..platforms import platform_of
from ..progress import console, step
from ..untrusted import archives
from ..untrusted.cache import reusable, seal, sealed_sha256
from . import debian, redist
from .prefix import real_file, relative_link
from .runtime_needs import Need, check_needs, read_needs
from .wheels import pip_download as pip_download  # also the smoke's, which imports it from here


@dataclass(frozen=True)
class Artifact:
    """One file nvcc's source served: a wheel, one of NVIDIA's archives, a Debian package."""

    name: str  # nvidia-cuda-nvcc-cu12, cuda_nvcc, nvidia-cuda-toolkit
    version: str
    sha256: str
    purl: str  # pkg:pypi/..., pkg:generic/...?download_url=..., pkg:deb/debian/...

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "sha256": self.sha256, "purl": self.purl}


@dataclass(frozen=True)
class NvccOrigin:
    """Where the toolkit's nvcc (and what the wheels lack) came from."""

    source: NvccSource
    detail: str  # what served it, with versions
    overlay: Path | None = None  # files the source adds to the prefix (none for pip: its wheels are the site)
    artifacts: tuple[Artifact, ...] = ()  # each file that served it, with its sha256


@dataclass(frozen=True)
class Toolkit:
    major: int
    release: str  # the matrix's toolkit, e.g. "12.4"
    os: OS
    arch: str
    prefix: Path  # CUDA_HOME
    site: Path  # the unpacked wheels, as pip would lay them out in site-packages
    wheels: tuple[Path, ...]  # every wheel file, for offline installs in the smoke tiers
    nvcc: NvccOrigin
    nvcc_version: str  # what `nvcc --version` says (or the source's version where nvcc cannot run here)
    driver_stub: str  # where lib64/stubs/libcuda.so came from
    versions: dict[str, str] = field(default_factory=dict)  # distribution -> version, for every wheel
    downloaded: bool = False  # True when this call downloaded anything

    @property
    def wheel_dir(self) -> Path:
        return self.wheels[0].parent

    @property
    def lib_dir(self) -> Path:
        return self.prefix / operating_system(self.os).toolkit_lib_dir


def components_to_provision(variant: Variant) -> list[str]:
    """The toolkit every build gets, the recipe's components, and what their headers need to compile."""
    table = component_table()
    return table.build_closure([*table.toolkit, *variant.recipe.components, *variant.recipe.optional], variant.major)


def _pinned(components: list[str], variant: Variant, os_name: OS, arch: str) -> list[str]:
    """One requirement per distribution of those components that exist for this OS and machine (NCCL has no
    Windows wheel, nor an aarch64 one for CUDA 11), at exactly the versions the matrix's toolkit release
    shipped."""
    table = component_table()
    lines: dict[str, str] = {}
    for name in components:
        entry = table.get(name, variant.major)
        if entry is not None and entry.layout(os_name, arch) is not None:
            lines.setdefault(entry.distribution, entry.build_requirement(variant.cuda.toolkit))
    return sorted(lines.values())


def requirements(variant: Variant, os_name: OS, arch: str) -> list[str]:
    """What the toolkit is made of: the components to provision, pinned."""
    return _pinned(components_to_provision(variant), variant, os_name, arch)


def constraints(variant: Variant, os_name: OS, arch: str) -> list[str]:
    """Every NVIDIA distribution of the major at the toolkit's versions: NVIDIA's own Requires-Dist are unpinned
    (cuBLAS requires NVRTC, cuFFT nvJitLink), and what they bring in must be of the same release."""
    return _pinned(component_table().names(), variant, os_name, arch)


def download_wheels(
    reqs: list[str],
    os_name: OS,
    arch: str,
    dest: Path,
    pins: list[str] | None = None,
    lock: AbstractContextManager[object] | None = None,
) -> list[Path]:
    """NVIDIA's wheels (py3-none: one for every Python) for `reqs` on that platform, as `pip_download` gives."""
    options = ["--python-version", "3.12"]
    options += [arg for tag in platform_of(os_name).pip_platform_tags(arch) for arg in ("--platform", tag)]
    return pip_download(reqs, options, dest, f"downloading {', '.join(reqs)}", pins, lock)


# ---------------------------------------------------------------------------------------------- nvcc's source


def _nvcc_wheel(wheels: list[Path], variant: Variant) -> NvccOrigin:
    entry = component_table().get("nvcc", variant.major)
    assert entry is not None
    for wheel in wheels:
        name, version, _, _ = parse_wheel_filename(wheel.name)
        if name == entry.distribution:
            digest = sealed_sha256(wheel) or archives.sha256(wheel)  # checked against its seal, not read again
            served = Artifact(name, str(version), digest, f"pkg:pypi/{name}@{version}")
            return NvccOrigin("pip", f"{entry.distribution} {version} from the package index", None, (served,))
    raise ToolFailure(f"no {entry.distribution} wheel was provisioned for CUDA {variant.cuda.toolkit}")


def _overlay_from(source: NvccSource, release: str, os_name: OS, arch: str, platform: str, cache: Path) -> NvccOrigin:
    """What `source` adds to the prefix, fetched once into a cached overlay folder (built aside, in place when
    complete; toolkits of one release take turns at it)."""
    overlay = cache / "nvcc" / f"{release}-{platform}-{source}"
    origin_file = overlay / "origin.json"
    with host.cache_lock(f"nvcc-{overlay.name}"):
        # An overlay laid out before origins named their files' sha256 is laid out again (from cached downloads).
        if not reusable(overlay) or "artifacts" not in json.loads(origin_file.read_text()):
            with host.built_aside(overlay) as scratch:
                detail, served = _fill_overlay(scratch, source, release, os_name, arch, platform, cache)
                origin = {"source": source, "detail": detail, "artifacts": [a.as_json() for a in served]}
                (scratch / origin_file.name).write_text(json.dumps(origin, indent=1))
                seal(scratch)
    origin = json.loads(origin_file.read_text())
    return NvccOrigin(source, origin["detail"], overlay, tuple(Artifact(**a) for a in origin["artifacts"]))


def _fill_overlay(
    overlay: Path, source: NvccSource, release: str, os_name: OS, arch: str, platform: str, cache: Path
) -> tuple[str, list[Artifact]]:
    """Place `source`'s files in the overlay; returns what served them, with versions, and each file."""
    known = toolkit_table()
    settings = known.releases[release]
    if source == "redist":
        assert settings.redist is not None
        nvidia_platform = known.redist.platforms[platform]
        release_manifest = redist.manifest(settings.redist, cache)
        served = []
        for name, by_os in known.redist.archives.items():
            item = redist.archive(release_manifest, name, nvidia_platform)
            with step(f"download {item.component} {item.version} ({nvidia_platform}) from {redist.base_url()}"):
                path = redist.fetch(item, cache)
            with tempfile.TemporaryDirectory() as unpacked, fetched():
                redist.place(archives.unpack(path, Path(unpacked)), by_os[os_name], overlay)
            purl = f"pkg:generic/{item.component}@{item.version}?download_url={quote(item.url, safe='')}"
            served.append(Artifact(item.component, item.version, item.sha256, purl))
        listed = ", ".join(f"{a.name} {a.version}" for a in served)
        return f"NVIDIA redistrib_{settings.redist}.json: {listed}", served
    assert settings.debian is not None
    with step(f"download CUDA {release} from Debian {settings.debian.suite} (nvidia-cuda-toolkit, nvidia-cuda-dev)"):
        debs = debian.download(settings.debian, arch, cache)
    for package, deb in debs.items():
        with step(f"unpack {deb.name}"):
            debian.extract(deb, known.debian.packages[package], arch, overlay)
    served = []
    for package, deb in debs.items():
        version, deb_arch = deb.stem.split("_")[1:3]
        purl = f"pkg:deb/debian/{package}@{quote(version, safe='')}?arch={deb_arch}&distro={settings.debian.suite}"
        served.append(Artifact(package, version, archives.sha256(deb), purl))
    shown = ", ".join(f"{a.name} {a.version}" for a in served)
    return f"Debian {settings.debian.suite} non-free: {shown}", served


def nvcc_origin(variant: Variant, wheels: list[Path], os_name: OS, arch: str, platform: str) -> NvccOrigin:
    """The first of the release's nvcc sources that serves this host; WHEELFACTORY_NVCC_SOURCE picks one."""
    release = variant.cuda.toolkit
    sources = toolkit_table().releases[release].nvcc
    forced = os.environ.get("WHEELFACTORY_NVCC_SOURCE")
    if forced:
        if forced not in sources:
            raise UserError(
                f"WHEELFACTORY_NVCC_SOURCE={forced}, but CUDA {release}'s nvcc comes from {', '.join(sources)} — "
                "unset it or pick one of those"
            )
        sources = (forced,)
    cache = host.cache_dir()
    reasons = []
    for source in sources:
        if source == "pip":
            return _nvcc_wheel(wheels, variant)
        refused = platform_of(os_name).nvcc_source_refused(source)
        if refused:
            reasons.append(f"{source}: {refused}")
            continue
        try:
            return _overlay_from(source, release, os_name, arch, platform, cache)
        except (redist.Unreachable, debian.Unavailable) as exc:
            reasons.append(f"{source}: {exc}")
    raise ToolFailure(
        f"no source of nvcc {release} serves this host:\n  "
        + "\n  ".join(reasons)
        + "\n— on a host without NVIDIA's servers, use a toolkit that Debian packages (11.8, 12.4) or set "
        "WHEELFACTORY_CUDA_REDIST_URL to a mirror of NVIDIA's redistributable archives"
    )


# ---------------------------------------------------------------------------------------------- the driver stub


# ---------------------------------------------------------------------------------------------- the prefix


def _lay_out_prefix(variant: Variant, os_name: OS, site: Path, prefix: Path, origin: NvccOrigin) -> None:
    include = prefix / "include"
    platform = platform_of(os_name)
    lib = prefix / operating_system(os_name).toolkit_lib_dir
    for directory in (include, lib, prefix / "bin"):
        directory.mkdir(parents=True, exist_ok=True)
    layouts = [layout for name in components_to_provision(variant) if (layout := _layout(name, variant, os_name))]
    # Each header folder copied once (CUDA 13's components share nvidia/cu13/include), in the order of its last
    # mention: where folders hold the same file, the one copied last wins, as when each was copied every time.
    include_dirs = list(reversed(dict.fromkeys(rel for layout in reversed(layouts) for rel in layout.include_dirs)))
    for rel in include_dirs:
        if (site / rel).is_dir():
            shutil.copytree(site / rel, include, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__init__.py"))
    for layout in layouts:
        for to, rel in layout.prefix_dirs.items():
            for item in sorted((site / rel).rglob("*")) if (site / rel).is_dir() else []:
                if item.is_file() and item.name != "__init__.py":
                    relative_link(prefix / to / item.relative_to(site / rel), item)
        platform.lay_out_libraries(site, layout, lib)
    if origin.overlay is not None:
        for item in sorted(origin.overlay.rglob("*")):
            if item.is_file() and item.name != "origin.json":
                relative_link(prefix / item.relative_to(origin.overlay), item)
    platform.finish_libraries(prefix, lib)
    _install_nvcc(prefix, os_name, origin)


def _layout(component: str, variant: Variant, os_name: OS) -> Layout | None:
    entry = component_table().get(component, variant.major)
    return entry.layout(os_name) if entry else None


def _install_nvcc(prefix: Path, os_name: OS, origin: NvccOrigin) -> None:
    """A real nvcc beside the relocatable nvcc.profile (nvcc reads the profile beside its own path), where the
    platform puts it."""
    nvcc = prefix / "bin" / f"nvcc{operating_system(os_name).executable_suffix}"
    if not (nvcc.is_symlink() or nvcc.exists()):
        raise ToolFailure(f"{origin.detail}: no nvcc among its files")
    home = platform_of(os_name).install_nvcc(prefix, nvcc)
    real_file(home / nvcc.name)
    for profile in (prefix / "bin" / "nvcc.profile", home / "nvcc.profile"):
        if profile.is_symlink() or profile.exists():
            profile.unlink()
    profile_text = files("wheelfactory.data").joinpath(f"nvcc.profile.{os_name}").read_text(encoding="utf-8")
    (home / "nvcc.profile").write_text(profile_text)


def nvcc_version(prefix: Path, os_name: OS, arch: str) -> str | None:
    """`nvcc --version`'s V12.4.131 as "12.4.131"; None where nvcc cannot run on this host (natively, or
    another Linux machine's under QEMU)."""
    here = platforms().get(host.platform_name())
    if here is None or here.os != os_name:
        return None
    environment = None
    if here.cibw_arch != arch:
        environment = host.emulation_environment(arch)
        if environment is None:
            return None
    ran = host.run([prefix / "bin" / "nvcc", "--version"], "running the provisioned nvcc", env=environment)
    match = re.search(r"\bV(\d+\.\d+\.\d+)", ran.stdout)
    if match is None:
        raise ToolFailure(f"the provisioned nvcc does not say its version:\n{host.tail(ran.stdout)}")
    return match[1]


def _listed_wheels(listing: Path) -> list[str]:
    """The wheel files a toolkit's listing names: plain file names, or none when the listing is not one."""
    try:
        names = json.loads(listing.read_text(encoding="utf-8"))["wheels"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    ok = isinstance(names, list) and all(isinstance(n, str) and archives.member_problem(n) is None for n in names)
    return names if ok and all("/" not in n for n in names) else []


def compiler_cache(os_name: OS, arch: str) -> Path | None:
    """The compiler cache's executable for builds on this platform (Linux), fetched once into the cache."""
    if not platform_of(os_name).caches_compiles:
        return None
    tool = toolkit_table().compiler_cache
    home = host.cache_dir() / "tools" / f"{tool.distribution}-{tool.version}-{os_name}-{arch}"
    executable = home / tool.executable
    if not reusable(executable):
        with tempfile.TemporaryDirectory() as scratch, step(f"download {tool.distribution} {tool.version}"), fetched():
            (wheel,) = download_wheels([f"{tool.distribution}=={tool.version}"], os_name, arch, Path(scratch))
            found = next(unpack(wheel, Path(scratch) / "tree").glob(f"*.data/scripts/{tool.executable}"))
            home.mkdir(parents=True, exist_ok=True)
            host.place(found, executable, mode=0o755)
            seal(executable)
    return executable


def provision(variant: Variant, os_name: OS = "linux", arch: str = "x86_64") -> Toolkit:
    """The toolkit of `variant`'s release for that OS and arch, provisioned once into the cache. Builds sharing
    the cache take turns (a lock per toolkit); what a killed one left half-done is cleared by the next."""
    reqs = requirements(variant, os_name, arch)
    shape = [reqs, constraints(variant, os_name, arch), os_name, arch, _layout_files()]
    key = hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:16]
    with host.cache_lock(f"toolkit-cuda{variant.cuda.toolkit}-{os_name}-{arch}-{key}"):
        return _provision(variant, os_name, arch, reqs, key)


# The files of the factory's own that the prefix is laid out with: a change to one lays a toolkit out anew.
LAYOUT_FILES = ("nvcc-wrapper.sh", "nvcc.profile.linux", "nvcc.profile.windows")


def _layout_files() -> str:
    data = files("wheelfactory.data")
    return hashlib.sha256(b"".join(data.joinpath(name).read_bytes() for name in LAYOUT_FILES)).hexdigest()[:16]


def _toolkit_wheels(variant: Variant, os_name: OS, arch: str, reqs: list[str], key: str) -> tuple[list[Path], bool]:
    """The wheels the toolkit is made of, as its listing in the cache names them, or downloaded (and listed) where
    any is missing or differs from its seal; and whether they were downloaded."""
    release = variant.cuda.toolkit
    root = host.cache_dir()
    wheel_dir = root / "wheels"
    listing = root / "locks" / f"cuda{release}-{os_name}-{arch}-{key}.json"  # the wheels this toolkit is made of
    wheels: list[Path] = []
    if listing.is_file():
        wheels = [wheel_dir / name for name in _listed_wheels(listing)]
    # Each wheel is checked against the sha256 recorded when it was downloaded: pip, asked again, re-downloads a
    # dropped one (and checks a reused one against the index's hash itself).
    if wheels and all(reusable(w) for w in wheels):
        return wheels, False
    names = ", ".join(r.split("=")[0].rstrip("<>!~") for r in reqs)
    # One process at a time writes into the shared wheel folder.
    with step(f"download CUDA {release} wheels: {names}"):
        pins = constraints(variant, os_name, arch)
        wheels = download_wheels(reqs, os_name, arch, wheel_dir, pins, host.cache_lock("wheels"))
    host.write_atomically(
        listing, json.dumps({"requirements": reqs, "wheels": sorted(w.name for w in wheels)}, indent=1)
    )
    return wheels, True


def _provision(variant: Variant, os_name: OS, arch: str, reqs: list[str], key: str) -> Toolkit:
    release = variant.cuda.toolkit
    platform = next(name for name, p in platforms().items() if p.os == os_name and p.cibw_arch == arch)
    root = host.cache_dir()
    wheels, downloaded = _toolkit_wheels(variant, os_name, arch, reqs, key)
    origin = nvcc_origin(variant, wheels, os_name, arch, platform)
    versions = {str(parse_wheel_filename(w.name)[0]): str(parse_wheel_filename(w.name)[1]) for w in wheels}
    toolkit_dir = root / "toolkits" / f"cuda{release}-{os_name}-{arch}-{origin.source}-{key}"
    site, prefix = toolkit_dir / "site", toolkit_dir / "prefix"
    record = toolkit_dir / "toolkit.json"
    if not reusable(toolkit_dir):
        with host.built_aside(toolkit_dir) as scratch:  # under the toolkit's lock
            with step(f"lay out the CUDA {release} toolkit ({origin.source} nvcc) in {toolkit_dir}"), fetched():
                archives.unpack_together(wheels, scratch / "site")
                _lay_out_prefix(variant, os_name, scratch / "site", scratch / "prefix", origin)
                stub = platform_of(os_name).driver_stub(scratch / "prefix", arch)
                # Run where it was laid out: the relative links resolve the same at either place.
                found = nvcc_version(scratch / "prefix", os_name, arch)
            if found is not None and not found.startswith(f"{release}."):
                raise ToolFailure(f"{origin.detail} gave nvcc {found}, but the matrix names CUDA {release}")
            (scratch / "toolkit.json").write_text(
                json.dumps({"nvcc_version": found or "(not run on this host)", "driver_stub": stub}, indent=1)
            )
            needs = read_needs(scratch / "site", wheels, variant.major, os_name)
            (scratch / "runtime_needs.json").write_text(json.dumps([asdict(need) for need in needs], indent=1))
            seal(scratch)
    facts = json.loads(record.read_text())
    needs = [Need(**need) for need in json.loads((toolkit_dir / "runtime_needs.json").read_text())]
    check_needs(needs, variant.major, os_name)
    console.print(f"CUDA {release}: nvcc {facts['nvcc_version']} ({origin.detail})")
    return Toolkit(
        variant.major,
        release,
        os_name,
        arch,
        prefix,
        site,
        tuple(sorted(wheels)),
        origin,
        facts["nvcc_version"],
        facts["driver_stub"],
        versions,
        downloaded,
    )
