"""What NVIDIA's libraries load at run time, read from their own binaries and wheels, and checked against the
`needs` of data/cuda_components.yaml when a toolkit is provisioned.

A component needs another when one of its libraries links one of the other's (DT_NEEDED, PE imports), names one
as a string it opens at run time (dlopen / LoadLibrary: libcufft opens libnvJitLink this way), or when its wheel's
Requires-Dist names the other's distribution. The table must list every such need: the variant's Requires-Dist
gives each one a floor, since NVIDIA's wheels name their companions unversioned (or not at all).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from ..binaries.elf import is_elf, named_libraries, read_elf
from ..binaries.pe import named_dlls, read_pe
from ..binaries.wheelfile import metadata
from ..components import OS, component_table, operating_system
from ..errors import ToolFailure

TABLE = "src/wheelfactory/data/cuda_components.yaml"


@dataclass(frozen=True)
class Need:
    component: str  # the component whose library (or wheel) needs the other
    needed: str  # the other component, or the component itself for a library of its own that it opens
    evidence: str  # what shows it: "libcusparse.so.12 links libnvJitLink.so.12"
    opened: str | None = None  # a library of its own component that it opens by name (NVRTC's builtins)


def _runtime_components(major: int, os: OS) -> list[str]:
    table = component_table()
    return [
        name
        for name in table.names()
        if table.components[name].role == "runtime" and (entry := table.get(name, major)) and entry.layout(os)
    ]


def _library_files(site: Path, component: str, major: int, os: OS) -> list[Path]:
    entry = component_table().get(component, major)
    layout = entry.layout(os) if entry else None
    folder = layout.folder if layout else None
    if layout is None or folder is None or not (site / folder).is_dir():
        return []
    return sorted({p for pattern in layout.libraries for p in (site / folder).glob(pattern) if not p.is_symlink()})


def _elf_needs(library: Path) -> tuple[set[str], frozenset[str]]:
    elf = is_elf(library)
    return (set(read_elf(library).needed) if elf else set()), (named_libraries(library) if elf else frozenset())


def _pe_needs(library: Path) -> tuple[set[str], frozenset[str]]:
    info = read_pe(library)
    return {*info.imports, *info.delay_imports}, named_dlls(library)


# Per binary format: what a library links, and what it opens by name.
_READ_NEEDS = {"elf": _elf_needs, "pe": _pe_needs}


def read_needs(site: Path, wheels: list[Path], major: int, os: OS) -> list[Need]:
    """Every need the unpacked wheels in `site` (and the wheels' metadata) show, for the components they hold."""
    table = component_table()
    runtime = _runtime_components(major, os)
    found: list[Need] = []
    for component in runtime:
        for library in _library_files(site, component, major, os):
            linked, named = _READ_NEEDS[operating_system(os).binary_format](library)
            for name in sorted(linked | named):
                owner = table.owner_of(name, major, os, runtime)
                if owner and owner != component:
                    how = "links" if name in linked else "opens by name"
                    found.append(Need(component, owner, f"{library.name} {how} {name}"))
                elif owner == component and name in named - linked and name.lower() != library.name.lower():
                    found.append(Need(component, component, f"{library.name} opens {name} by name", opened=name))
    by_distribution: dict[str, list[str]] = {}
    for component in runtime:
        entry = table.get(component, major)
        assert entry is not None
        by_distribution.setdefault(canonicalize_name(entry.distribution), []).append(component)
    for wheel in wheels:
        name, version, _, _ = parse_wheel_filename(wheel.name)
        for line in metadata(wheel).get_all("Requires-Dist") or []:
            required = by_distribution.get(canonicalize_name(Requirement(line).name), [])
            for component in by_distribution.get(name, []):
                found += [
                    Need(component, other, f"{name} {version} requires {line}")
                    for other in required
                    if other not in by_distribution.get(name, [])
                ]
    return found


def check_needs(found: list[Need], major: int, os: OS) -> None:
    """Stop when NVIDIA's binaries need a component the table's `needs` do not list (the variant's Requires-Dist
    would leave it without a floor), or open a library of their own that its `opens` do not list (the variant
    module would not load it from the component's folder)."""
    table = component_table()
    missing: dict[tuple[str, str], str] = {}
    unlisted: dict[tuple[str, str], str] = {}
    for need in found:
        entry = table.get(need.component, major)
        assert entry is not None
        layout = entry.layout(os)
        if need.opened is not None:
            if layout is None or not layout.opened(need.opened, os):
                unlisted.setdefault((need.component, need.opened), need.evidence)
        elif need.needed not in entry.needs:
            missing.setdefault((need.component, need.needed), need.evidence)
    if missing or unlisted:
        lines = [
            f"{component} needs {needed} under CUDA {major} ({evidence})"
            for (component, needed), evidence in sorted(missing.items())
        ]
        lines += [
            f"{component}'s {os} `opens` leave out {library} under CUDA {major} ({evidence})"
            for (component, library), evidence in sorted(unlisted.items())
        ]
        raise ToolFailure(
            f"{TABLE}: NVIDIA's {os} binaries need what the table's `needs` (or `opens`) leave out:\n  "
            + "\n  ".join(lines)
            + "\n— add each to that component's `needs` (or `opens`) for the major, so that the variant's "
            "Requires-Dist gives it a floor (and the variant module loads it from the component's folder)"
        )
