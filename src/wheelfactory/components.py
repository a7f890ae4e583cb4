"""The CUDA component table (data/cuda_components.yaml) as typed objects."""

from __future__ import annotations

import fnmatch
from functools import cache
from importlib.resources import files
from typing import Literal

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from pydantic import BaseModel, ConfigDict, Field, model_validator

OS = Literal["linux", "windows"]
# What a package's variant module says of a component NVIDIA ships no wheel of for the machine it runs on (`where`:
# "windows", "linux aarch64"), and what the smoke expects it to say.
NO_WHEEL = "{distribution} has no {where} wheel"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Layout(_Frozen):
    """Where one component's files sit in site-packages on one OS."""

    lib_dir: str | None = None  # Linux shared libraries
    dll_dir: str | None = None  # Windows DLLs
    libraries: tuple[str, ...] = ()  # sonames / DLL names (fnmatch patterns)
    opens: tuple[str, ...] = ()  # those of them the first opens by name at run time, from its own folder
    include_dirs: tuple[str, ...] = ()
    import_libs: tuple[str, ...] = ()
    # CUDA_HOME subdirectory -> site-packages directory whose files it holds (nvcc's bin/, nvvm/)
    prefix_dirs: dict[str, str] = {}
    machines: tuple[str, ...] = ()  # the machines NVIDIA ships this OS's wheel for; () = all of them

    @property
    def folder(self) -> str | None:
        """Its libraries' folder in site-packages: lib_dir on Linux, dll_dir on Windows (a layout is one OS's)."""
        return self.lib_dir or self.dll_dir

    def opened(self, library: str, os: OS) -> bool:
        return any(_matches(library, pattern, os) for pattern in self.opens)


class ComponentMajor(_Frozen):
    distribution: str
    # toolkit release -> the versions of this distribution NVIDIA shipped with it (a PEP 440 specifier)
    versions: dict[str, str]
    linux: Layout | None = None
    windows: Layout | None = None
    # The components whose libraries this one's load at run time, by DT_NEEDED / imports or by name (dlopen):
    # on any release and OS of the major. Provisioning checks it against NVIDIA's binaries (toolkit.runtime_needs).
    needs: tuple[str, ...] = ()

    def layout(self, os: OS, arch: str | None = None) -> Layout | None:
        """Where its files sit on `os`; None where NVIDIA ships no wheel of it (for that machine, given one)."""
        layout: Layout | None = getattr(self, os)
        if layout is not None and arch is not None and layout.machines and arch not in layout.machines:
            return None
        return layout

    def build_requirement(self, toolkit: str) -> str:
        """What a build against `toolkit` installs: exactly the versions of that release."""
        return f"{self.distribution}{self.versions[toolkit]}"

    def floor(self, toolkit: str) -> Version:
        """The lowest version the toolkit's specifier admits: the floor of Requires-Dist."""
        bounds = []
        for spec in SpecifierSet(self.versions[toolkit]):
            if spec.operator in ("==", ">=", "~=", "==="):
                bounds.append(Version(spec.version.removesuffix(".*")))
        assert bounds, f"{self.distribution}: {self.versions[toolkit]!r} names no lower bound"
        return min(bounds)


class Component(_Frozen):
    role: Literal["runtime", "build"]
    summary: str
    build_needs: tuple[str, ...] = ()
    majors: dict[int, ComponentMajor]


class Driver(_Frozen):
    linux: str
    windows: str

    def on(self, os: OS) -> str:
        """The driver's library on `os`."""
        name: str = getattr(self, os)
        return name


class ComponentTable(_Frozen):
    toolkit: tuple[str, ...]  # what every provisioned CUDA_HOME holds, whatever the recipe declares
    driver: Driver
    components: dict[str, Component]

    def names(self) -> list[str]:
        return sorted(self.components)

    def get(self, name: str, major: int) -> ComponentMajor | None:
        component = self.components.get(name)
        return component.majors.get(major) if component else None

    def build_closure(self, names: list[str], major: int) -> list[str]:
        """`names` plus every component their headers need to compile, in a stable order."""
        seen: list[str] = []
        pending = list(names)
        while pending:
            name = pending.pop(0)
            if name in seen or self.get(name, major) is None:
                continue
            seen.append(name)
            pending.extend(self.components[name].build_needs)
        return seen

    def runtime_closure(self, names: list[str], major: int) -> list[str]:
        """`names` plus every component their libraries load at run time, in a stable order."""
        seen: list[str] = []
        pending = list(names)
        while pending:
            name = pending.pop(0)
            entry = self.get(name, major)
            if name in seen or entry is None:
                continue
            seen.append(name)
            pending.extend(entry.needs)
        return seen

    @model_validator(mode="after")
    def _needs_exist(self) -> ComponentTable:
        for name, component in self.components.items():
            for major, entry in component.majors.items():
                unknown = [n for n in entry.needs if self.get(n, major) is None]
                if unknown:
                    raise ValueError(f"{name} needs {unknown}, which CUDA {major} does not have")
        return self

    def owner_of(self, library: str, major: int, os: OS, among: list[str]) -> str | None:
        """Which of the components `among` provides `library` (a soname or DLL name) under `major`."""
        for name in among:
            entry = self.get(name, major)
            layout = entry.layout(os) if entry else None
            if layout and any(_matches(library, pattern, os) for pattern in layout.libraries):
                return name
        return None

    def all_libraries(self, major: int, os: OS) -> list[str]:
        """Every CUDA library pattern of `major` on `os`, whichever component provides it."""
        patterns: list[str] = []
        for name in self.names():
            entry = self.get(name, major)
            layout = entry.layout(os) if entry else None
            if layout:
                patterns.extend(p for p in layout.libraries if p not in patterns)
        return patterns


def _matches(library: str, pattern: str, os: OS) -> bool:
    if operating_system(os).case_sensitive_names:
        return fnmatch.fnmatchcase(library, pattern)
    return fnmatch.fnmatchcase(library.lower(), pattern.lower())


class Platform(_Frozen):
    os: OS
    cibw_arch: str
    identifier: str
    image_option: str | None = None
    machine_words: tuple[str, ...]  # how image names and runner labels name this machine


NvccSource = Literal["pip", "redist", "debian"]


class Placement(_Frozen):
    """Files of an archive or package that go into a directory of the CUDA_HOME."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    to: str
    pattern: str = Field(alias="from")

    def selects(self, path: str, **fields: str) -> bool:
        """Whether `path` (relative, POSIX) matches the pattern part by part: `*` never crosses a `/`."""
        wanted = self.pattern.format(**fields).split("/")
        parts = path.removeprefix("./").split("/")
        return len(parts) == len(wanted) and all(fnmatch.fnmatchcase(p, w) for p, w in zip(parts, wanted, strict=True))


class DebianRelease(_Frozen):
    suite: str
    packages: dict[str, str]  # package -> the version prefix it must carry (upstream version and '~' release)


class DriverVersions(_Frozen):
    """An NVIDIA driver version per OS, "580.65.06"."""

    linux: str
    windows: str

    def on(self, os: OS) -> str:
        version: str = getattr(self, os)
        return version


class ToolkitRelease(_Frozen):
    nvcc: tuple[NvccSource, ...]  # where nvcc comes from, in order of preference
    redist: str | None = None  # the release label of NVIDIA's redistributable archives, e.g. 12.4.1
    debian: DebianRelease | None = None
    gcc: int  # the newest GCC major this release's nvcc accepts as host compiler
    msvc: str  # the newest MSVC toolset (14.XY) this release's nvcc accepts
    archs: tuple[int, ...]  # every sm_XY this release's nvcc compiles for (data/gpu_archs.yaml)
    ptx_isa: str  # the PTX ISA version its nvcc writes, "8.4"
    # The oldest driver of its GA: what its PTX needs to JIT. NVIDIA's release notes say it, no wheel does: a
    # release that `nox -s facts` added carries it in `to_fill` until a person writes it here.
    driver: DriverVersions | None = None
    to_fill: dict[str, str] = {}  # field -> where a person reads it
    cuda_archs: tuple[int, ...]  # default GPU architectures of a variant built with it
    platform_archs: dict[str, tuple[int, ...]] = {}  # a platform's own defaults, where its GPUs differ

    @model_validator(mode="after")
    def _driver_given_or_to_fill(self) -> ToolkitRelease:
        if (self.driver is None) != ("driver" in self.to_fill):
            raise ValueError("a release gives its driver, or names it in to_fill (and not both)")
        return self

    def default_archs(self, platform: str) -> tuple[int, ...]:
        """The GPU architectures a variant is built for on `platform` when its recipe names none."""
        return self.platform_archs.get(platform, self.cuda_archs)

    @property
    def ptx_isa_version(self) -> tuple[int, int]:
        major, minor = self.ptx_isa.split(".")
        return int(major), int(minor)


class RedistSettings(_Frozen):
    url: str
    platforms: dict[str, str]  # factory platform -> NVIDIA's platform key in the manifest
    archives: dict[str, dict[OS, tuple[Placement, ...]]]


class DebianSettings(_Frozen):
    mirror: str
    keyring: str
    arch: dict[str, str]  # machine -> Debian architecture
    multiarch: dict[str, str]  # machine -> multiarch triplet, for {multiarch} in patterns
    packages: dict[str, tuple[Placement, ...]]


class Tool(_Frozen):
    """A build tool that comes as a wheel from the package index."""

    distribution: str
    version: str
    executable: str  # its file under <name>-<version>.data/scripts/


class ZstdDriver(DriverVersions):
    release: str  # the first release whose nvcc writes zstd-compressed device code


class ToolkitTable(_Frozen):
    releases: dict[str, ToolkitRelease]
    minor_version_drivers: dict[int, DriverVersions]  # the oldest driver that runs any release of a major
    zstd_driver: ZstdDriver  # the oldest driver that reads zstd-compressed device code
    compiler_cache: Tool
    redist: RedistSettings
    debian: DebianSettings


def _data(name: str) -> object:
    return yaml.safe_load(files("wheelfactory.data").joinpath(name).read_text(encoding="utf-8"))


@cache
def component_table() -> ComponentTable:
    return ComponentTable.model_validate(_data("cuda_components.yaml"))


@cache
def toolkit_table() -> ToolkitTable:
    data = _data("toolkits.yaml")
    archs = _data("gpu_archs.yaml")
    assert isinstance(data, dict) and isinstance(archs, dict)
    for release, settings in data["releases"].items():
        settings["archs"] = archs[release]  # a release without its list is a KeyError here, at first use
    return ToolkitTable.model_validate(data)


@cache
def gpu_generations() -> dict[int, tuple[str, str]]:
    """sm_XY -> (generation, example GPUs), from data/gpus.yaml."""
    raw = _data("gpus.yaml")
    assert isinstance(raw, dict)
    return {int(arch): (str(generation), str(examples)) for arch, (generation, examples) in raw.items()}


class Product(_Frozen):
    name: str
    arch: int  # sm_XY as XY
    platforms: tuple[str, ...]  # the matrix platforms its machines are


class JetsonFacts(_Frozen):
    jetpack: dict[int, str]  # L4T major -> the JetPack release it belongs to
    pip_wheels: dict[int, int | None]  # CUDA major -> the oldest L4T major where NVIDIA's pip wheels run, or none


class ProductTable(_Frozen):
    products: tuple[Product, ...]
    jetson: JetsonFacts


@cache
def product_table() -> ProductTable:
    """The GPUs users name, by architecture and platform, and what NVIDIA's pip wheels need on a Jetson
    (data/products.yaml)."""
    return ProductTable.model_validate(_data("products.yaml"))


class InstallLayout(BaseModel):
    """Where pip puts a wheel and its CUDA wheels, in words: the command, then where it puts them."""

    install: str
    where: str

    def words(self, code: str = "{}") -> str:
        """The layout in a sentence; `code` formats the command (Markdown's `{}`, say)."""
        return f"{code.format(self.install)} {self.where}"


@cache
def install_layouts() -> dict[str, InstallLayout]:
    """The layouts the smoke installs a wheel in, by name, from data/layouts.yaml."""
    raw = _data("layouts.yaml")
    assert isinstance(raw, dict)
    return {str(name): InstallLayout.model_validate(words) for name, words in raw.items()}


class OperatingSystem(_Frozen):
    """What differs between the OSes the factory builds for, as facts (data/operating_systems.yaml); what each one
    does differently is its object in platforms/."""

    builds_in_image: bool
    built_elsewhere: str  # what a user who asks for its wheels on another OS's host is told
    binary_format: Literal["elf", "pe"]
    stable_abi_infix: str | None
    binary_suffixes: tuple[str, ...]  # what its binaries are named (lower case); () = any file of its format
    case_sensitive_names: bool
    sys_platform: str
    platform_system: str
    classifier: str
    included_by: tuple[str, ...]  # classifiers of another branch that name it too (Unix: Linux)
    toolkit_lib_dir: str
    executable_suffix: str
    no_wheel_marker: str  # formatted with the machine (cibuildwheel's arch)
    no_wheel_where: str  # likewise


@cache
def operating_system(os: OS) -> OperatingSystem:
    raw = _data("operating_systems.yaml")
    assert isinstance(raw, dict)
    return OperatingSystem.model_validate(raw[os])


@cache
def platforms() -> dict[str, Platform]:
    raw = _data("platforms.yaml")
    assert isinstance(raw, dict)
    return {name: Platform.model_validate(entry) for name, entry in raw.items()}


class CPythonRange(_Frozen):
    oldest: str
    newest: str

    def releases(self) -> list[str]:
        """Every 3.X from oldest to newest."""
        low, high = (int(v.split(".")[1]) for v in (self.oldest, self.newest))
        return [f"3.{minor}" for minor in range(low, high + 1)]


@cache
def cpython_range() -> CPythonRange:
    return CPythonRange.model_validate(_data("cpython.yaml"))
