"""The GPU code in nvcc's fatbin section (`.nv_fatbin` in ELF, `.nv_fatb` in PE), read without a GPU or NVIDIA's
tools: for each entry its kind (SASS, a cubin; or PTX), its architecture with the `a` (architecture-specific)
or `f` (family) suffix of CUDA 12.9+, the PTX ISA version of a PTX entry, and, where a cubin is stored
uncompressed, the toolkit release that made it (its `.note.nv.tkinfo`).

The section holds one or more fatbin containers, each a 16-byte header (magic 0xBA55ED50, version, header size,
size of what follows) and entries, each a header of its own then the payload. An entry's header says its kind
(1 PTX, 2 cubin), the payload's size, the ISA version of PTX (major.minor), the architecture number and flags:
compressed (0x2000 NVIDIA's LZ scheme, 0x8000 zstd), architecture-specific (0x100000), family (0x200000). The
tests check every field read here against `cuobjdump --list-elf --list-ptx` on binaries of CUDA 11.8, 12.4 and
13.0, and the PTX ISA version against the PTX text itself where it is stored plain.
"""

from __future__ import annotations

import io
import re
import struct
from dataclasses import dataclass
from typing import Literal

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

CONTAINER_MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, payload size
_ENTRY_FIELDS = struct.Struct("<IIHHI")  # at +16: -, -, ISA minor, ISA major, architecture
_ENTRY_FLAGS = struct.Struct("<Q")  # at +40
KIND_PTX, KIND_CUBIN = 1, 2
COMPRESSED = 0x2000 | 0x8000
ARCH_SPECIFIC, FAMILY = 0x100000, 0x200000
# "Cuda compilation tools, release 12.4, V12.4.131" in a cubin's .note.nv.tkinfo
_TOOLKIT = re.compile(rb"Cuda compilation tools, release (\d+\.\d+)")


class FatbinError(ValueError):
    """The section is not the fatbin format this reader knows."""


@dataclass(frozen=True)
class DeviceCode:
    kind: Literal["sass", "ptx"]
    arch: int  # 90 for sm_90 / compute_90
    suffix: Literal["", "a", "f"]  # architecture-specific, family-specific, or neither
    ptx_isa: tuple[int, int] | None  # PTX: its ISA version, (8, 4)
    compressed: bool
    toolkit: str | None  # a cubin's maker, "12.4", where it is stored uncompressed

    @property
    def name(self) -> str:
        return f"{'sm' if self.kind == 'sass' else 'compute'}_{self.arch}{self.suffix}"

    def as_json(self) -> dict[str, object]:
        shown: dict[str, object] = {"kind": self.kind, "arch": self.name, "compressed": self.compressed}
        if self.ptx_isa:
            shown["ptx_isa"] = "{}.{}".format(*self.ptx_isa)
        if self.toolkit:
            shown["toolkit"] = self.toolkit
        return shown


def read_fatbin(section: bytes) -> list[DeviceCode]:
    """Every entry of every container in a fatbin section, in order."""
    found: list[DeviceCode] = []
    offset = 0
    while offset + _CONTAINER.size <= len(section):
        magic, _, header_size, size = _CONTAINER.unpack_from(section, offset)
        if magic != CONTAINER_MAGIC:
            if any(section[offset : offset + 8]):  # containers are padded apart with zeros
                raise FatbinError(f"no fatbin container at offset {offset:#x}")
            offset += 8
            continue
        entry, end = offset + header_size, offset + header_size + size
        if end > len(section):
            raise FatbinError(f"the container at {offset:#x} runs past the section's end")
        while entry < end:
            found.append(_entry(section, entry))
            _, _, entry_header, payload = _ENTRY.unpack_from(section, entry)
            entry += entry_header + payload
        offset = end
    return found


def _entry(section: bytes, at: int) -> DeviceCode:
    kind, _, header_size, payload_size = _ENTRY.unpack_from(section, at)
    if kind not in (KIND_PTX, KIND_CUBIN) or header_size < 48:
        raise FatbinError(f"an entry of kind {kind} with a {header_size}-byte header at {at:#x}")
    _, _, minor, major, arch = _ENTRY_FIELDS.unpack_from(section, at + 16)
    (flags,) = _ENTRY_FLAGS.unpack_from(section, at + 40)
    suffix: Literal["", "a", "f"] = "a" if flags & ARCH_SPECIFIC else "f" if flags & FAMILY else ""
    compressed = bool(flags & COMPRESSED)
    payload = section[at + header_size : at + header_size + payload_size]
    if kind == KIND_PTX:
        return DeviceCode("ptx", arch, suffix, (major, minor), compressed, None)
    return DeviceCode("sass", arch, suffix, None, compressed, None if compressed else _cubin_toolkit(payload))


def _cubin_toolkit(cubin: bytes) -> str | None:
    """The release of the toolkit that made a cubin, from its .note.nv.tkinfo (CUDA 12 on; older ones have none)."""
    try:
        note = ELFFile(io.BytesIO(cubin)).get_section_by_name(".note.nv.tkinfo")
    except (ELFError, struct.error):
        return None
    match = _TOOLKIT.search(note.data()) if note is not None else None
    return match[1].decode() if match else None
