"""The GPU code in nvcc's fatbin sections (`.nv_fatbin` in ELF, `.nv_fatb` in PE; and in an ELF linked from
relocatable device code, `__nv_relfatbin`, each object's own), read without a GPU or NVIDIA's tools: for each
entry its kind (SASS, a cubin; or PTX), its architecture with the `a` (architecture-specific) or `f` (family)
suffix of CUDA 12.9+, the PTX ISA version of a PTX entry, and, where a cubin is stored uncompressed, the toolkit
release that made it (its `.note.nv.tkinfo`).

The section holds one or more fatbin containers, each a 16-byte header (magic 0xBA55ED50, version, header size,
size of what follows) and entries, each a header of its own then the payload. An entry's header says its kind
(1 PTX, 2 cubin), the payload's size, the ISA version of PTX (major.minor), the architecture number and flags:
compressed (0x2000 NVIDIA's LZ scheme, 0x8000 zstd), architecture-specific (0x100000), family (0x200000). The
tests check every field read here against `cuobjdump --list-elf --list-ptx` on binaries of CUDA 11.8, 12.4 and
13.0, and the PTX ISA version against the PTX text itself where it is stored plain.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ..errors import BadBytes
from .elf import elf_of

CONTAINER_MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, payload size
_ENTRY_FIELDS = struct.Struct("<IIHHI")  # at +16: -, -, ISA minor, ISA major, architecture
_ENTRY_FLAGS = struct.Struct("<Q")  # at +40
_ENTRY_MIN_HEADER = 48  # the fields above end there
KIND_PTX, KIND_CUBIN = 1, 2
LZ, ZSTD = 0x2000, 0x8000
ARCH_SPECIFIC, FAMILY = 0x100000, 0x200000
# "Cuda compilation tools, release 12.4, V12.4.131" in a cubin's .note.nv.tkinfo
_TOOLKIT = re.compile(rb"Cuda compilation tools, release (\d+\.\d+)")


class FatbinError(BadBytes):
    """The section is not the fatbin format this reader knows, or breaks its bounds."""


@dataclass(frozen=True)
class DeviceCode:
    kind: Literal["sass", "ptx"]
    arch: int  # 90 for sm_90 / compute_90
    suffix: Literal["", "a", "f"]  # architecture-specific, family-specific, or neither
    ptx_isa: tuple[int, int] | None  # PTX: its ISA version, (8, 4)
    compression: Literal["", "lz", "zstd"]  # how the payload is stored: plain, NVIDIA's LZ scheme, or zstd
    toolkit: str | None  # a cubin's maker, "12.4", where it is stored uncompressed
    stored_bytes: int = 0  # the entry as stored, header and payload
    # PTX of relocatable device code (nvcc -rdc), which the driver JIT-links for a GPU the linked code has no SASS
    # for: see jit_linkable_ptx
    jit_link: bool = False

    @property
    def name(self) -> str:
        return f"{'sm' if self.kind == 'sass' else 'compute'}_{self.arch}{self.suffix}"

    @property
    def compressed(self) -> bool:
        return bool(self.compression)

    def as_json(self) -> dict[str, object]:
        shown: dict[str, object] = {"kind": self.kind, "arch": self.name, "compressed": self.compressed}
        if self.compression:
            shown["compression"] = self.compression
        if self.ptx_isa:
            shown["ptx_isa"] = "{}.{}".format(*self.ptx_isa)
        if self.toolkit:
            shown["toolkit"] = self.toolkit
        if self.jit_link:
            shown["jit_link"] = True
        return shown


def read_fatbin(section: bytes) -> list[DeviceCode]:
    """Every entry of every container in a fatbin section, in order."""
    return [entry for container in read_fatbin_containers(section) for entry in container]


def read_fatbin_containers(section: bytes) -> list[tuple[DeviceCode, ...]]:
    """The entries of each container in a fatbin section, in order (in `__nv_relfatbin`, a container per object
    file). Every header's sizes are checked against the section before they are followed, and each step moves
    forward (a container header or an entry header shorter than its fields is refused), so the walk ends within
    len(section) / 8 steps whatever the bytes say."""
    found: list[tuple[DeviceCode, ...]] = []
    offset = 0
    while offset + _CONTAINER.size <= len(section):
        magic, _, header_size, size = _CONTAINER.unpack_from(section, offset)
        if magic != CONTAINER_MAGIC:
            if any(section[offset : offset + 8]):  # containers are padded apart with zeros
                raise FatbinError(f"no fatbin container at offset {offset:#x}")
            offset += 8
            continue
        if header_size < _CONTAINER.size:  # (an empty container, size 0, is nvcc's own: its header moves on)
            raise FatbinError(f"the container at {offset:#x} claims a {header_size}-byte header")
        entry, end = offset + header_size, offset + header_size + size
        if end > len(section):
            raise FatbinError(f"the container at {offset:#x} runs past the section's end")
        container = []
        while entry < end:
            code, entry = _entry(section, entry, end)
            container.append(code)
        found.append(tuple(container))
        offset = end
    return found


def jit_linkable_ptx(objects: Sequence[Sequence[DeviceCode]]) -> tuple[DeviceCode, ...]:
    """The PTX from which the driver can JIT-link relocatable device code (nvcc -rdc; the objects' fatbins in
    `__nv_relfatbin`) for a GPU the device-linked code has no SASS for: it compiles each object's PTX and links the
    results, so only an architecture whose PTX every object carries will do. One entry per such architecture,
    marked jit_link: the newest ISA among the objects' (the driver must read each), the bytes of them all."""
    ptx_of = [{(e.arch, e.suffix): e for e in entries if e.kind == "ptx"} for entries in objects if entries]
    common = set.intersection(*(set(found) for found in ptx_of)) if ptx_of else set()
    linkable = []
    for key in sorted(common):
        each = [found[key] for found in ptx_of]
        newest = max(each, key=lambda e: e.ptx_isa or (0, 0))
        linkable.append(replace(newest, stored_bytes=sum(e.stored_bytes for e in each), jit_link=True))
    return tuple(linkable)


def _entry(section: bytes, at: int, end: int) -> tuple[DeviceCode, int]:
    """The entry at `at` of a container ending at `end`, and where the next one starts."""
    if at + _ENTRY_MIN_HEADER > end:
        raise FatbinError(f"an entry at {at:#x} is cut short by its container's end")
    kind, _, header_size, payload_size = _ENTRY.unpack_from(section, at)
    if kind not in (KIND_PTX, KIND_CUBIN) or header_size < _ENTRY_MIN_HEADER:
        raise FatbinError(f"an entry of kind {kind} with a {header_size}-byte header at {at:#x}")
    following = at + header_size + payload_size
    if following > end:
        raise FatbinError(f"the entry at {at:#x} runs past its container's end")
    _, _, minor, major, arch = _ENTRY_FIELDS.unpack_from(section, at + 16)
    (flags,) = _ENTRY_FLAGS.unpack_from(section, at + 40)
    suffix: Literal["", "a", "f"] = "a" if flags & ARCH_SPECIFIC else "f" if flags & FAMILY else ""
    compression: Literal["", "lz", "zstd"] = "zstd" if flags & ZSTD else "lz" if flags & LZ else ""
    stored = following - at
    if kind == KIND_PTX:
        return DeviceCode("ptx", arch, suffix, (major, minor), compression, None, stored), following
    payload = section[at + header_size : following]
    toolkit = None if compression else _cubin_toolkit(payload)
    return DeviceCode("sass", arch, suffix, None, compression, toolkit, stored), following


def _cubin_toolkit(cubin: bytes) -> str | None:
    """The release of the toolkit that made a cubin, from its .note.nv.tkinfo (CUDA 12 on; older ones have none).
    A cubin this cannot read within the ELF reader's bounds says nothing of its maker."""
    try:
        elf = elf_of(cubin, "cubin")
        note = elf.section(".note.nv.tkinfo")
        match = _TOOLKIT.search(elf.bytes_of(note)) if note is not None else None
    except BadBytes:
        return None
    return match[1].decode() if match else None
