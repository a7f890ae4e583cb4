"""What the audit and the repair need from an ELF file, read with pyelftools."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class ElfInfo:
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    # library -> symbol versions required from it, e.g. libc.so.6 -> {GLIBC_2.14}
    version_needs: dict[str, frozenset[str]] = field(default_factory=dict)


def is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == ELF_MAGIC


def read_elf(path: Path) -> ElfInfo:
    needed: list[str] = []
    rpath: list[str] = []
    runpath: list[str] = []
    version_needs: dict[str, frozenset[str]] = {}
    with path.open("rb") as f:
        elf = ELFFile(f)
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    # pyelftools sets these attributes per tag kind, so its stubs do not know them.
                    kind = tag.entry.d_tag
                    if kind == "DT_NEEDED":
                        needed.append(tag.needed)  # type: ignore[attr-defined]
                    elif kind == "DT_RPATH":
                        rpath.extend(p for p in tag.rpath.split(":") if p)  # type: ignore[attr-defined]
                    elif kind == "DT_RUNPATH":
                        runpath.extend(p for p in tag.runpath.split(":") if p)  # type: ignore[attr-defined]
            elif isinstance(section, GNUVerNeedSection):
                for verneed, auxiliaries in section.iter_versions():
                    version_needs[str(verneed.name)] = frozenset(str(aux.name) for aux in auxiliaries)
    return ElfInfo(tuple(needed), tuple(rpath), tuple(runpath), version_needs)
