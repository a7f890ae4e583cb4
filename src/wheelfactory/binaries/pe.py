"""What the Windows audit and provisioning need from PE files, read with pefile."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pefile

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


def read_pe(path: Path) -> PeInfo:
    pe = pefile.PE(str(path), fast_load=True)
    try:
        pe.parse_data_directories(
            directories=[
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"],
            ]
        )
        imports = tuple(e.dll.decode() for e in getattr(pe, "DIRECTORY_ENTRY_IMPORT", []))
        delayed = tuple(e.dll.decode() for e in getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", []))
        device_code = any(s.Name.rstrip(b"\0").decode(errors="replace") == DEVICE_CODE_SECTION for s in pe.sections)
        inits = tuple(n for n in _export_names(pe) if n.startswith("PyInit_"))
        machine = MACHINES.get(pe.FILE_HEADER.Machine, hex(pe.FILE_HEADER.Machine))
        return PeInfo(imports, delayed, device_code, inits, machine)
    finally:
        pe.close()


def device_code_sections(path: Path) -> list[bytes]:
    """The bytes of each device-code section, as the file holds them (its virtual size may pad it with zeros)."""
    pe = pefile.PE(str(path), fast_load=True)
    try:
        return [
            s.get_data()[: s.Misc_VirtualSize or None]
            for s in pe.sections
            if s.Name.rstrip(b"\0").decode(errors="replace") == DEVICE_CODE_SECTION
        ]
    finally:
        pe.close()


def exports(dll: Path) -> list[str]:
    """The names a DLL exports, in its export table's order (ordinal-only exports have no name to link)."""
    pe = pefile.PE(str(dll), fast_load=True)
    try:
        pe.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"]])
        return _export_names(pe)
    finally:
        pe.close()


def _export_names(pe: pefile.PE) -> list[str]:
    table = getattr(pe, "DIRECTORY_ENTRY_EXPORT", None)
    return [s.name.decode() for s in table.symbols if s.name] if table else []


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
    pe = pefile.PE(str(path), fast_load=True)
    try:
        found: set[str] = set()
        for section in pe.sections:
            if section.Name.rstrip(b"\0").decode(errors="replace") in NAME_SECTIONS:
                data = section.get_data()
                found.update(m.decode() for m in _DLL_NAME.findall(data))
                found.update(m.decode("utf-16-le") for m in _WIDE_DLL_NAME.findall(data))
        return frozenset(found)
    finally:
        pe.close()
