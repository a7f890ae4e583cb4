"""What the audit and the repair need from an ELF file, read within bounds whatever the file claims.

pyelftools parses the file header and knows each structure's layout (class and byte order); the walks over the
section table, the dynamic section, the version needs and the symbols are this module's, over the file mapped
read-only: every count and offset is checked against the file before it is used, every chain is walked at most
as many steps as the section has room for and never visits an entry twice, and a compressed section (SHF_COMPRESSED)
is inflated only up to MAX_INFLATED bytes. Anything past those bounds is refused with BadBytes.
"""

from __future__ import annotations

import mmap
import re
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.enums import ENUM_E_MACHINE

from ..errors import BadBytes
from ..untrusted.shown import shown

ELF_MAGIC = b"\x7fELF"
# Where nvcc puts a module's device code (SASS and PTX): a binary without it carries no kernel of its own.
DEVICE_CODE_SECTION = ".nv_fatbin"
# Each object's own fatbin in a library linked from relocatable device code (nvcc -rdc, CMake's
# CUDA_SEPARABLE_COMPILATION): what the driver JIT-links from where .nv_fatbin's device-linked code has no SASS
RELOCATABLE_DEVICE_CODE_SECTION = "__nv_relfatbin"
# The sections where a library keeps the names it opens with dlopen (string constants), and its DT_NEEDED.
NAME_SECTIONS = (".rodata", ".lrodata", ".dynstr")  # .lrodata: large read-only data (x86-64 medium model)
# e_machine as the wheel's platform tag spells the machine; pyelftools knows every machine's name.
MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}
_MACHINE_NAMES = {number: name for name, number in ENUM_E_MACHINE.items() if isinstance(number, int)}
# A shared library's file name, whole: libnvJitLink.so.12, libnvrtc-builtins.so.13.0.
_LIBRARY_NAME = re.compile(rb"(?<![\w.+-])lib[\w.+-]*?\.so(?:\.\d+)*(?![\w.+-])")

# Bounds no real binary comes near: NVIDIA's largest libraries have about 40 sections and a few hundred thousand
# dynamic symbols; names are short.
MAX_SECTIONS = 4096
MAX_SYMBOLS = 4_000_000
MAX_NAME = 4096
MAX_INFLATED = 256 << 20  # one compressed section, inflated
SHF_COMPRESSED = 0x800
ELFCOMPRESS_ZLIB = 1
SHT_NOBITS = 8
SHN_XINDEX = 0xFFFF
_SCAN_CHUNK = 8 << 20  # named_libraries reads large sections this much at a time
_SCAN_OVERLAP = 512  # longer than any library name


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


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


class _Elf:
    """One ELF file, mapped, with its section table read and checked against the file."""

    def __init__(self, data: mmap.mmap | bytes, label: str) -> None:
        self.data = data
        self.label = label
        self.size = len(data)
        ident = bytes(data[:16])
        if len(ident) < 16 or ident[:4] != ELF_MAGIC or ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise self.refused("no ELF header it can read")
        self.is64 = ident[4] == 2
        self.order = "<" if ident[5] == 1 else ">"
        header = struct.Struct(self.order + ("HHIQQQIHHHHHH" if self.is64 else "HHIIIIIHHHHHH"))
        if self.size < 16 + header.size:
            raise self.refused("its ELF header is cut short")
        fields = header.unpack_from(data, 16)
        machine, shoff, shentsize, shnum, shstrndx = fields[1], fields[5], fields[10], fields[11], fields[12]
        self.machine = MACHINES.get(_MACHINE_NAMES.get(machine, ""), _MACHINE_NAMES.get(machine, str(machine)))
        self.sections = self._section_table(shoff, shentsize, shnum, shstrndx)
        self._by_name: dict[str, _Section] = {}
        for section in self.sections:
            self._by_name.setdefault(section.name, section)

    def refused(self, why: str) -> BadBytes:
        return BadBytes(f"{shown(self.label)}: {why}")

    def _section_table(self, offset: int, entry_size: int, count: int, names_at: int) -> list[_Section]:
        if offset == 0:
            return []
        layout = struct.Struct(self.order + ("IIQQQQIIQQ" if self.is64 else "IIIIIIIIII"))
        if entry_size != layout.size:
            raise self.refused(f"its section headers are {entry_size} bytes, not {layout.size}")
        raw = self._headers(offset, max(count, 1), layout)
        if count == 0:  # more than 0xff00 sections: the count is in the first header's sh_size
            count = raw[0][5]
        if names_at == SHN_XINDEX:
            names_at = raw[0][6]
        raw = self._headers(offset, count, layout)
        if not 0 <= names_at < count:
            raise self.refused(f"its section names are in section {names_at}, of {count}")
        sections = [self._section("", *fields[1:]) for fields in raw]
        table = sections[names_at]
        names = self.bytes_of(table) if table.type != SHT_NOBITS else b""
        return [self._section(self.string(names, fields[0], "section name"), *fields[1:]) for fields in raw]

    def _headers(self, offset: int, count: int, layout: struct.Struct) -> list[tuple[int, ...]]:
        if count > MAX_SECTIONS:
            raise self.refused(f"{count} sections, more than the {MAX_SECTIONS} any real binary has")
        end = offset + count * layout.size
        if end > self.size:
            raise self.refused("its section table runs past the end of the file")
        return [layout.unpack_from(self.data, offset + i * layout.size) for i in range(count)]

    def _section(
        self, name: str, kind: int, flags: int, _addr: int, offset: int, size: int, link: int, info: int, _a: int,
        entsize: int,
    ) -> _Section:  # fmt: skip
        if kind != SHT_NOBITS and offset + size > self.size:
            raise self.refused(f"section {shown(name) or '#'} runs past the end of the file")
        return _Section(name, kind, flags, offset, size, link, info, entsize)

    def string(self, table: bytes | memoryview, at: int, what: str) -> str:
        """The NUL-terminated string at `at` of a string table, at most MAX_NAME bytes long."""
        if not 0 <= at < len(table):
            raise self.refused(f"a {what} points outside its string table")
        end = bytes(table[at : at + MAX_NAME + 1]).find(b"\0")
        if end < 0:
            raise self.refused(f"a {what} has no end within {MAX_NAME} bytes")
        return bytes(table[at : at + end]).decode("utf-8", errors="surrogateescape")

    def section(self, name: str) -> _Section | None:
        return self._by_name.get(name)

    def bytes_of(self, section: _Section) -> bytes:
        """A section's contents, inflated (up to MAX_INFLATED) when it is compressed."""
        if section.type == SHT_NOBITS:
            return b""
        raw = self.data[section.offset : section.offset + section.size]
        if not section.flags & SHF_COMPRESSED:
            return bytes(raw)
        header = struct.Struct(self.order + ("IIQQ" if self.is64 else "III"))
        if len(raw) < header.size:
            raise self.refused(f"compressed section {shown(section.name)} has no compression header")
        kind, *rest = header.unpack_from(raw)
        claimed = rest[1] if self.is64 else rest[0]
        if kind != ELFCOMPRESS_ZLIB:
            raise self.refused(f"section {shown(section.name)} is compressed with method {kind}, not zlib")
        if claimed > MAX_INFLATED:
            raise self.refused(f"section {shown(section.name)} inflates to {claimed >> 20} MiB, past the bound")
        inflater = zlib.decompressobj()
        try:  # never more than it claims, plus one byte to catch the lie
            inflated = inflater.decompress(bytes(raw[header.size :]), claimed + 1)
        except zlib.error as exc:
            raise self.refused(f"section {shown(section.name)} does not inflate ({shown(exc)})") from None
        if len(inflated) != claimed or inflater.unconsumed_tail:
            raise self.refused(f"section {shown(section.name)} inflates to other than the size it claims")
        return inflated

    def table(self, section: _Section, layout: struct.Struct, limit: int) -> list[tuple[int, ...]]:
        """A section's fixed-size entries."""
        if section.entsize not in (0, layout.size):
            raise self.refused(f"section {shown(section.name)} has {section.entsize}-byte entries")
        data = self.bytes_of(section)
        count = len(data) // layout.size
        if count > limit:
            raise self.refused(f"section {shown(section.name)} has {count} entries, past the bound of {limit}")
        return list(layout.iter_unpack(data[: count * layout.size]))

    def linked_strings(self, section: _Section) -> bytes:
        if not 0 <= section.link < len(self.sections):
            raise self.refused(f"section {shown(section.name)} names no string table")
        return self.bytes_of(self.sections[section.link])


@contextmanager
def _opened(path: Path) -> Iterator[_Elf]:
    try:
        with path.open("rb") as f:
            if path.stat().st_size == 0:
                raise BadBytes(f"{shown(path.name)}: an empty file")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                yield _Elf(data, path.name)
    except (OSError, ValueError) as exc:
        raise BadBytes(f"{shown(path.name)}: cannot be read ({shown(exc)})") from None


def elf_of(data: bytes, label: str) -> _Elf:
    """An ELF held in memory (a cubin inside a fatbin), with the same bounds."""
    return _Elf(data, label)


def is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == ELF_MAGIC


DT_NULL, DT_NEEDED, DT_RPATH, DT_RUNPATH = 0, 1, 15, 29
SHT_DYNSYM, SHT_DYNAMIC, SHT_GNU_VERNEED = 11, 6, 0x6FFFFFFE


def read_elf(path: Path) -> ElfInfo:
    """What the audit and the repair need of an ELF file; BadBytes when the file is no ELF it can read within
    the bounds."""
    with _opened(path) as elf:
        needed: list[str] = []
        rpath: list[str] = []
        runpath: list[str] = []
        version_needs: dict[str, frozenset[str]] = {}
        python_inits: list[str] = []
        for section in elf.sections:
            if section.type == SHT_DYNAMIC:
                strings = elf.linked_strings(section)
                layout = struct.Struct(elf.order + ("qQ" if elf.is64 else "iI"))
                for tag, value in elf.table(section, layout, MAX_SYMBOLS):
                    if tag == DT_NULL:
                        break
                    if tag == DT_NEEDED:
                        needed.append(elf.string(strings, value, "DT_NEEDED"))
                    elif tag in (DT_RPATH, DT_RUNPATH):
                        paths = [p for p in elf.string(strings, value, "search path").split(":") if p]
                        (rpath if tag == DT_RPATH else runpath).extend(paths)
            elif section.type == SHT_DYNSYM:
                python_inits += _python_inits(elf, section)
            elif section.type == SHT_GNU_VERNEED:
                version_needs.update(_version_needs(elf, section))
        return ElfInfo(
            tuple(needed),
            tuple(rpath),
            tuple(runpath),
            version_needs,
            elf.section(DEVICE_CODE_SECTION) is not None,
            tuple(python_inits),
            elf.machine,
        )


def _python_inits(elf: _Elf, section: _Section) -> list[str]:
    """The defined PyInit_* symbols of the dynamic symbol table."""
    strings = elf.linked_strings(section)
    if b"PyInit_" not in strings:
        return []
    layout = struct.Struct(elf.order + ("IBBHQQ" if elf.is64 else "IIIBBH"))
    found = []
    for entry in elf.table(section, layout, MAX_SYMBOLS):
        name_at, defined_in = entry[0], entry[3] if elf.is64 else entry[5]
        if defined_in != 0 and strings[name_at : name_at + 7] == b"PyInit_":
            found.append(elf.string(strings, name_at, "symbol name"))
    return found


def _version_needs(elf: _Elf, section: _Section) -> dict[str, frozenset[str]]:
    """The version-needs chain (library -> symbol versions): at most as many steps as the section has room for,
    never the same entry twice."""
    data = elf.bytes_of(section)
    strings = elf.linked_strings(section)
    verneed = struct.Struct(elf.order + "HHIII")  # version, count, file, aux, next
    vernaux = struct.Struct(elf.order + "IHHII")  # hash, flags, other, name, next
    steps = len(data) // 8  # every entry takes at least 16 bytes: twice that many steps is ample
    visited: set[int] = set()
    found: dict[str, frozenset[str]] = {}
    at = 0
    for _ in range(min(section.info, len(data) // verneed.size)):
        if at in visited or at + verneed.size > len(data):
            raise elf.refused("its version-needs chain loops or leaves its section")
        visited.add(at)
        _, count, file_at, aux, following = verneed.unpack_from(data, at)
        versions = set()
        here = at + aux
        for _ in range(count):
            steps -= 1
            if here in visited or here + vernaux.size > len(data) or steps < 0:
                raise elf.refused("its version-needs chain loops or leaves its section")
            visited.add(here)
            _, _, _, name_at, step = vernaux.unpack_from(data, here)
            versions.add(elf.string(strings, name_at, "symbol version"))
            if step == 0:
                break
            here += step
        found[elf.string(strings, file_at, "version-needs file")] = frozenset(versions)
        if following == 0:
            break
        at += following
    return found


def device_code_sections(path: Path, name: str = DEVICE_CODE_SECTION) -> list[bytes]:
    """The bytes of the device-code section `name`, where there is one (inflated where compressed, within
    bounds)."""
    with _opened(path) as elf:
        section = elf.section(name)
        return [elf.bytes_of(section)] if section is not None and section.type != SHT_NOBITS else []


def named_libraries(path: Path) -> frozenset[str]:
    """The shared-library file names an ELF file carries as strings: those it links, and those it opens by name
    at run time (dlopen), which no dynamic section lists. Large sections are read a chunk at a time."""
    found: set[str] = set()
    with _opened(path) as elf:
        for name in NAME_SECTIONS:
            section = elf.section(name)
            if section is None or section.type == SHT_NOBITS:
                continue
            if section.flags & SHF_COMPRESSED:
                found.update(m.decode() for m in _LIBRARY_NAME.findall(elf.bytes_of(section)))
                continue
            for start in range(section.offset, section.offset + section.size, _SCAN_CHUNK):
                end = min(start + _SCAN_CHUNK + _SCAN_OVERLAP, section.offset + section.size)
                found.update(m.decode() for m in _LIBRARY_NAME.findall(elf.data[start:end]))
    return frozenset(found)
