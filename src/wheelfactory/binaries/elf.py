"""What the audit and the repair need from an ELF file, read with pyelftools."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from elftools.elf.sections import SymbolTableSection

ELF_MAGIC = b"\x7fELF"
# Where nvcc puts a module's device code (SASS and PTX): a binary without it carries no kernel of its own.
DEVICE_CODE_SECTION = ".nv_fatbin"
# The sections where a library keeps the names it opens with dlopen (string constants), and its DT_NEEDED.
NAME_SECTIONS = (".rodata", ".lrodata", ".dynstr")  # .lrodata: large read-only data (x86-64 medium model)
# e_machine as the wheel's platform tag spells the machine.
MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}
# A shared library's file name, whole: libnvJitLink.so.12, libnvrtc-builtins.so.13.0.
_LIBRARY_NAME = re.compile(rb"(?<![\w.+-])lib[\w.+-]*?\.so(?:\.\d+)*(?![\w.+-])")


@dataclass(frozen=True)
class ElfInfo:
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    # library -> symbol versions required from it, e.g. libc.so.6 -> {GLIBC_2.14}
    version_needs: dict[str, frozenset[str]] = field(default_factory=dict)
    device_code: bool = False
    python_inits: tuple[str, ...] = ()  # the PyInit_* functions it exports: what makes it a Python extension
    machine: str = ""  # x86_64, aarch64, or the e_machine pyelftools names (EM_386)


def is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == ELF_MAGIC


def read_elf(path: Path) -> ElfInfo:
    needed: list[str] = []
    rpath: list[str] = []
    runpath: list[str] = []
    version_needs: dict[str, frozenset[str]] = {}
    device_code = False
    python_inits: list[str] = []
    with path.open("rb") as f:
        elf = ELFFile(f)
        machine = MACHINES.get(elf["e_machine"], str(elf["e_machine"]))
        for section in elf.iter_sections():
            if section.name == DEVICE_CODE_SECTION:
                device_code = True
            elif section.name == ".dynsym" and isinstance(section, SymbolTableSection):
                python_inits += [
                    s.name
                    for s in section.iter_symbols()
                    if s.name.startswith("PyInit_") and s["st_shndx"] != "SHN_UNDEF"
                ]
            elif isinstance(section, DynamicSection):
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
    return ElfInfo(
        tuple(needed), tuple(rpath), tuple(runpath), version_needs, device_code, tuple(python_inits), machine
    )


def device_code_sections(path: Path) -> list[bytes]:
    """The bytes of the device-code section, where there is one."""
    with path.open("rb") as f:
        section = ELFFile(f).get_section_by_name(DEVICE_CODE_SECTION)
        return [section.data()] if section is not None and section["sh_type"] != "SHT_NOBITS" else []


def named_libraries(path: Path) -> frozenset[str]:
    """The shared-library file names an ELF file carries as strings: those it links, and those it opens by name
    at run time (dlopen), which no dynamic section lists."""
    found: set[str] = set()
    with path.open("rb") as f:
        elf = ELFFile(f)
        for name in NAME_SECTIONS:
            section = elf.get_section_by_name(name)
            if section is not None and section["sh_type"] != "SHT_NOBITS":
                found.update(m.decode() for m in _LIBRARY_NAME.findall(section.data()))
    return frozenset(found)
