"""What the Windows audit and provisioning need from PE files, read with pefile (which bounds its own tables:
import and export counts, name lengths). Whatever way pefile or the file's strings break is BadBytes naming the
file."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pefile

from ..errors import BadBytes
from ..untrusted.shown import shown

# nvcc's device-code section, as a PE image's 8-character section names cut it (.nv_fatbin).
DEVICE_CODE_SECTION = ".nv_fatb"
# Where a DLL keeps the names it opens with LoadLibrary (string constants, narrow or wide).
NAME_SECTIONS = (".rdata",)
_DLL_NAME = re.compile(rb"(?<![\w.+-])[\w.+-]+\.dll(?![\w.+-])", re.IGNORECASE)
_WIDE_DLL_NAME = re.compile(rb"(?:[\w.+-]\x00)+\.\x00[dD]\x00[lL]\x00[lL]\x00")


@dataclass(frozen=True)
class PeInfo:
    imports: tuple[str, ...]  # DLLs loaded with the module (import table)
    delay_imports: tuple[str, ...]  # DLLs loaded at first call (delay-load table)
    device_code: bool = False
    python_inits: tuple[str, ...] = ()  # the PyInit_* functions it exports: what makes it a Python extension
    machine: str = ""  # AMD64, ARM64 (as a win_* wheel tag's machine is spelled), or the header's number


# IMAGE_FILE_HEADER.Machine
MACHINES = {0x8664: "AMD64", 0xAA64: "ARM64", 0x14C: "x86"}


@contextmanager
def _opened(path: Path) -> Iterator[pefile.PE]:
    """The PE file, its headers parsed (fast_load: no directory until asked for); every way its bytes break,
    there or in the block, is BadBytes."""
    try:
        pe = pefile.PE(str(path), fast_load=True)
    except (pefile.PEFormatError, OSError, ValueError, struct.error, IndexError, KeyError) as exc:
        raise BadBytes(f"{shown(path.name)}: not a PE file it can read ({shown(exc)})") from None
    try:
        yield pe
    except (pefile.PEFormatError, ValueError, struct.error, IndexError, KeyError, AttributeError, TypeError) as exc:
        raise BadBytes(f"{shown(path.name)}: its PE tables cannot be read ({shown(exc)})") from None
    finally:
        pe.close()


def _text(name: bytes) -> str:
    return name.decode("utf-8", errors="surrogateescape")


def read_pe(path: Path) -> PeInfo:
    with _opened(path) as pe:
        pe.parse_data_directories(
            directories=[
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"],
            ]
        )
        imports = tuple(_text(e.dll) for e in getattr(pe, "DIRECTORY_ENTRY_IMPORT", []))
        delayed = tuple(_text(e.dll) for e in getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", []))
        device_code = any(s.Name.rstrip(b"\0").decode(errors="replace") == DEVICE_CODE_SECTION for s in pe.sections)
        inits = tuple(n for n in _export_names(pe) if n.startswith("PyInit_"))
        machine = MACHINES.get(pe.FILE_HEADER.Machine, hex(pe.FILE_HEADER.Machine))
        return PeInfo(imports, delayed, device_code, inits, machine)


def device_code_sections(path: Path) -> list[bytes]:
    """The bytes of each device-code section, as the file holds them (its virtual size may pad it with zeros)."""
    with _opened(path) as pe:
        return [
            s.get_data()[: s.Misc_VirtualSize or None]
            for s in pe.sections
            if s.Name.rstrip(b"\0").decode(errors="replace") == DEVICE_CODE_SECTION
        ]


def exports(dll: Path) -> list[str]:
    """The names a DLL exports, in its export table's order (ordinal-only exports have no name to link)."""
    with _opened(dll) as pe:
        pe.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"]])
        return _export_names(pe)


def _export_names(pe: pefile.PE) -> list[str]:
    table = getattr(pe, "DIRECTORY_ENTRY_EXPORT", None)
    return [_text(s.name) for s in table.symbols if s.name] if table else []


def def_file(dll: Path) -> str:
    """A module-definition (.def) file for `dll`, from which lib.exe (or dlltool) makes an import library.

    Most NVIDIA wheels ship DLLs without the .lib a linker needs; the export table has everything required.
    """
    lines = [f"LIBRARY {dll.name}", "EXPORTS"]
    lines += [f"    {name}" for name in exports(dll)]
    return "\n".join(lines) + "\n"


def named_dlls(path: Path) -> frozenset[str]:
    """The DLL names a PE file carries as strings (narrow or UTF-16): those it imports, and those it opens by
    name at run time (LoadLibrary), which no import table lists."""
    with _opened(path) as pe:
        found: set[str] = set()
        for section in pe.sections:
            if section.Name.rstrip(b"\0").decode(errors="replace") in NAME_SECTIONS:
                data = section.get_data()
                found.update(m.decode() for m in _DLL_NAME.findall(data))
                found.update(m.decode("utf-16-le") for m in _WIDE_DLL_NAME.findall(data))
        return frozenset(found)
