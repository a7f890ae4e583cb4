"""ELF files and fatbins written byte by byte in a test: exactly the headers, sections and chains a case needs,
honest or lying, for the readers to take or refuse."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

SHT_PROGBITS, SHT_STRTAB, SHT_DYNAMIC, SHT_NOTE, SHT_DYNSYM = 1, 3, 6, 7, 11
SHT_GNU_VERNEED = 0x6FFFFFFE
SHF_ALLOC, SHF_COMPRESSED = 0x2, 0x800
EM_X86_64 = 62


@dataclass
class Section:
    name: str
    type: int
    data: bytes = b""
    flags: int = 0
    link: int = 0  # index in the file's section table (0 is the null section; the first given is 1)
    info: int = 0
    entsize: int = 0


def elf64(sections: list[Section], *, machine: int = EM_X86_64, section_count: int | None = None) -> bytes:
    """A little-endian ELF64 shared object with these sections (after the null one) and a .shstrtab; its header
    claims `section_count` sections when given (a lie the table may not back)."""
    names = [b"\0"]
    name_at: dict[str, int] = {}
    size = 1
    for section in [*sections, Section(".shstrtab", SHT_STRTAB)]:
        if section.name not in name_at:
            name_at[section.name] = size
            names.append(section.name.encode() + b"\0")
            size += len(names[-1])
    table = b"".join(names)
    body, placed, at = [], [], 64
    for data in [*(s.data for s in sections), table]:
        placed.append(at)
        body.append(data + bytes(-len(data) % 8))
        at += len(body[-1])
    table_at = at
    headers = [bytes(64)]  # the null section
    for index, section in enumerate(sections):
        headers.append(
            struct.pack(
                "<IIQQQQIIQQ",
                name_at[section.name],
                section.type,
                section.flags,
                0,
                placed[index],
                len(section.data),
                section.link,
                section.info,
                8,
                section.entsize,
            )
        )
    headers.append(
        struct.pack("<IIQQQQIIQQ", name_at[".shstrtab"], SHT_STRTAB, 0, 0, placed[-1], len(table), 0, 0, 1, 0)
    )
    count = len(sections) + 2
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, machine, 1, 0, 0, table_at, 0, 64, 56, 0, 64,
        count if section_count is None else section_count, count - 1,
    )  # fmt: skip
    return header + b"".join(body) + b"".join(headers)


def compressed(data: bytes, claimed: int | None = None) -> bytes:
    """A section's bytes as SHF_COMPRESSED holds them: an Elf64_Chdr (zlib, the size it says it inflates to) and
    the zlib stream."""
    return struct.pack("<IIQQ", 1, 0, len(data) if claimed is None else claimed, 1) + zlib.compress(data, 9)


def strings(*names: str) -> tuple[bytes, dict[str, int]]:
    """A string table holding `names`, and where each one starts."""
    table, at = b"\0", {}
    for name in names:
        at[name] = len(table)
        table += name.encode("utf-8", errors="surrogateescape") + b"\0"
    return table, at


def dynamic(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack("<qQ", tag, value) for tag, value in [*entries, (0, 0)])


def fatbin_container(entries: list[bytes], header_size: int = 16, size: int | None = None) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, header_size, len(body) if size is None else size) + body


def fatbin_entry(kind: int, arch: int, payload: bytes, flags: int = 0, header_size: int = 64) -> bytes:
    """One fatbin entry: kind 1 PTX or 2 cubin, for sm_/compute_`arch`."""
    header = struct.pack("<HHIQ", kind, 0x101, header_size, len(payload))
    header += struct.pack("<IIHHI", 0, 0, 4, 8, arch) + bytes(8) + struct.pack("<Q", flags)
    return header + bytes(header_size - len(header)) + payload
