"""The CUDA component table (data/cuda_components.yaml) as typed objects."""

from __future__ import annotations

import fnmatch
from functools import cache
from importlib.resources import files
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict

OS = Literal["linux", "windows"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Layout(_Frozen):
    """Where one component's files sit in site-packages on one OS."""

    lib_dir: str | None = None  # Linux shared libraries
    dll_dir: str | None = None  # Windows DLLs
    libraries: tuple[str, ...] = ()  # sonames / DLL names (fnmatch patterns)
    include_dirs: tuple[str, ...] = ()
    import_libs: tuple[str, ...] = ()
    tool_dirs: tuple[str, ...] = ()  # executables (nvcc, cicc, ...) that belong on PATH, ahead of any system CUDA

    @property
    def runtime_dir(self) -> str | None:
        return self.lib_dir or self.dll_dir


class ComponentMajor(_Frozen):
    distribution: str
    versions: dict[str, str]  # toolkit version -> version floor of this distribution
    linux: Layout | None = None
    windows: Layout | None = None

    def layout(self, os: OS) -> Layout | None:
        return self.linux if os == "linux" else self.windows


class Component(_Frozen):
    role: Literal["runtime", "build"]
    summary: str
    build_needs: tuple[str, ...] = ()
    majors: dict[int, ComponentMajor]


class Driver(_Frozen):
    linux: str
    windows: str


class ComponentTable(_Frozen):
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
    # Windows file names are case-insensitive; import tables spell DLL names as the linker was given them.
    if os == "windows":
        return fnmatch.fnmatchcase(library.lower(), pattern.lower())
    return fnmatch.fnmatchcase(library, pattern)


class Platform(_Frozen):
    os: OS
    cibw_arch: str
    identifier: str
    image_option: str | None = None


def _data(name: str) -> object:
    return yaml.safe_load(files("wheelfactory.data").joinpath(name).read_text(encoding="utf-8"))


@cache
def component_table() -> ComponentTable:
    return ComponentTable.model_validate(_data("cuda_components.yaml"))


@cache
def platforms() -> dict[str, Platform]:
    raw = _data("platforms.yaml")
    assert isinstance(raw, dict)
    return {name: Platform.model_validate(entry) for name, entry in raw.items()}
