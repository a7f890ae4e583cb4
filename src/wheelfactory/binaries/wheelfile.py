"""All the factory knows of wheel files: their names and tags, unpacking and packing them, their metadata, and
the binaries inside them, each read once.
"""

from __future__ import annotations

import base64
import csv
import email.message
import email.parser
import hashlib
import io
import os
import re
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Literal

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .. import host
from ..components import OS, operating_system, platforms
from ..errors import BadBytes
from ..untrusted import archives
from ..untrusted.shown import shown
from . import elf, pe
from .elf import is_elf, read_elf
from .fatbin import DeviceCode, FatbinError, jit_linkable_ptx, read_fatbin, read_fatbin_containers
from .pe import read_pe

MIB = 1 << 20  # a wheel's size limit is given in MiB (recipe.size_limit_mb)

# The platform tags a wheel of a matrix platform may carry: manylinux (PEP 600 and its legacy aliases) for Linux,
# win_amd64 for Windows. Anything else (macOS, musllinux, linux_x86_64, another machine) is no wheel of ours.
_MANYLINUX = re.compile(r"^manylinux(?:_\d+_\d+|1|2010|2014)_(?P<arch>x86_64|aarch64)$")


def platform_of_tag(tag: str) -> tuple[OS, str] | None:
    """The OS and machine (as WheelName.arch spells it) a platform tag is for, where it is one of a matrix
    platform's tags; None for any other (macosx_…, musllinux_…, linux_x86_64, win32)."""
    if tag == "win_amd64":
        return "windows", "AMD64"
    match = _MANYLINUX.match(tag)
    return ("linux", match["arch"]) if match else None


# What a wheel's tag says of Python: one CPython's ABI, the stable ABI (abi3), or none (py3-none).
WheelAbi = Literal["cpython", "abi3", "none"]


@dataclass(frozen=True)
class WheelName:
    """What a wheel's file name says: cp312-cp312-manylinux_2_28_x86_64 → Python 3.12 on Linux x86_64;
    cp310-abi3-… → the stable ABI, CPython 3.10 and newer; py3-none-… → every Python 3 (no extension module)."""

    distribution: NormalizedName
    version: Version
    python: str  # the oldest CPython it serves: "3.12" (cp312, cp310-abi3 → "3.10"); "3" for py3-none
    platform_tag: str  # manylinux_2_28_x86_64, win_amd64
    os: OS
    arch: str  # x86_64, aarch64, AMD64 (as cibuildwheel and the platform table spell it)
    tags: frozenset[Tag] = frozenset()
    abi: WheelAbi = "cpython"

    @property
    def platform(self) -> str:
        """The matrix platform the wheel is for: linux-x86_64, linux-aarch64 or windows-amd64."""
        return next(name for name, p in platforms().items() if p.os == self.os and p.cibw_arch == self.arch)

    @property
    def python_tag(self) -> str:
        """The Python part of the file name's tag: cp312-cp312, cp310-abi3 or py3-none."""
        return python_tag(self.python, self.abi)

    @classmethod
    def of(cls, wheel: Path) -> WheelName:
        """The name parsed as pip parses it, and refused (BadBytes) unless it is one CPython's wheel (cpXY-cpXY),
        a stable-ABI wheel (cpXY-abi3) or a Python-independent one (py3-none), for one matrix platform: platform
        tags that all name the same OS and machine."""
        try:
            name, version, _, tags = parse_wheel_filename(wheel.name)
        except (InvalidWheelFilename, InvalidVersion) as exc:
            raise BadBytes(f"{shown(wheel.name)}: not a wheel's file name ({shown(exc)})") from None
        pythons = {(t.interpreter, t.abi) for t in tags}
        interpreter, abi = next(iter(pythons))
        if len(pythons) != 1 or not _python_tag_ok(interpreter, abi):
            shown_tags = ", ".join(sorted(f"{i}-{a}" for i, a in pythons))
            raise BadBytes(
                f"{shown(wheel.name)}: tagged for {shown(shown_tags)}, not one of cpXY-cpXY, cpXY-abi3 or py3-none"
            )
        platforms_of = {platform_of_tag(t.platform) for t in tags}
        if None in platforms_of or len(platforms_of) != 1:
            tags_shown = ", ".join(sorted(t.platform for t in tags))
            raise BadBytes(
                f"{shown(wheel.name)}: platform {shown(tags_shown)} is not one of the factory's "
                f"({', '.join(sorted(platforms()))}: manylinux or win_amd64)"
            )
        ((os_name, arch),) = platforms_of  # type: ignore[misc]
        python = "3" if abi == "none" else f"{interpreter[2]}.{interpreter[3:]}"
        wheel_abi: WheelAbi = "none" if abi == "none" else "abi3" if abi == "abi3" else "cpython"
        platform_tag = sorted({t.platform for t in tags})[-1]
        return cls(name, version, python, platform_tag, os_name, arch, frozenset(tags), wheel_abi)


def _python_tag_ok(interpreter: str, abi: str) -> bool:
    if abi == "none":
        return interpreter == "py3"
    return re.fullmatch(r"cp3\d+", interpreter) is not None and abi in (interpreter, "abi3")


def cpython_tag(version: str) -> str:
    """`cp312` for "3.12"."""
    return "cp" + version.replace(".", "")


def python_tag(python: str, abi: WheelAbi) -> str:
    """The Python part of a wheel's tag: cp312-cp312, cp310-abi3 (the stable ABI from 3.10) or py3-none."""
    if abi == "none":
        return "py3-none"
    return f"{cpython_tag(python)}-{'abi3' if abi == 'abi3' else cpython_tag(python)}"


def unpack(wheel: Path, into: Path) -> Path:
    """Extract a wheel through the archive layer (its limits and refusals), keeping whether files are
    executable."""
    archives.unpack(wheel, into)
    return into


def pack(tree: Path, out_dir: Path, epoch: int | None = None) -> Path:
    """Zip an unpacked wheel again, its RECORD regenerated (wheel's own packer: entries in sorted order, every
    timestamp SOURCE_DATE_EPOCH when given)."""
    before = set(out_dir.glob("*.whl"))
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)} if epoch is not None else None
    command: list[str | Path] = [sys.executable, "-m", "wheel", "pack", "--dest-dir", out_dir, tree]
    host.run(command, f"repacking {tree.name}", env=env)
    created = set(out_dir.glob("*.whl")) - before
    return created.pop() if created else next(iter(sorted(out_dir.glob("*.whl"))))


def renamed(wheel: Path, distribution: str, into: Path) -> Path:
    """A copy of `wheel` in the folder `into` under the distribution name `distribution` (its file name too): the
    same files, its .dist-info folder renamed, METADATA's Name and RECORD its own. Each member is streamed across
    and stored uncompressed: re-deflating a CuPy wheel took 17 s, storing it one (the copy is installed here,
    never published)."""
    with archives.opened_zip(wheel) as (archive, listed):
        infos = [m.name.split("/", 1)[0] for m in listed if m.name.split("/", 1)[0].endswith(".dist-info")]
        if len(set(infos)) != 1:
            raise BadBytes(f"{shown(wheel.name)}: {len(set(infos))} .dist-info folders, where a wheel has one")
        info = infos[0]
        renamed_info = f"{underscored(distribution)}-{info.split('-', 1)[1]}"
        record: list[list[str]] = []
        target = into / f"{underscored(distribution)}-{wheel.name.split('-', 1)[1]}"
        with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as out:
            for member in listed:
                if member.kind != "file" or member.name == f"{info}/RECORD":
                    continue
                name = renamed_info + member.name[len(info) :] if member.name.startswith(f"{info}/") else member.name
                source = archive.getinfo(member.name)
                placed = zipfile.ZipInfo(name, source.date_time)
                placed.external_attr = source.external_attr
                digest = hashlib.sha256()
                with out.open(placed, "w", force_zip64=True) as written:
                    if name == f"{renamed_info}/METADATA":
                        text = _text(wheel, member.name, archives.read_member(archive, member.name))
                        data = re.sub(r"(?m)^Name: .*$", f"Name: {distribution}", text, count=1).encode("utf-8")
                        written.write(data)
                        digest.update(data)
                    else:
                        with archive.open(source) as stream:
                            while chunk := stream.read(1 << 20):
                                written.write(chunk)
                                digest.update(chunk)
                record.append([name, _record_hash(digest.digest()), str(placed.file_size)])
            rows = io.StringIO(newline="")
            csv.writer(rows, lineterminator="\n").writerows([*record, [f"{renamed_info}/RECORD", "", ""]])
            out.writestr(f"{renamed_info}/RECORD", rows.getvalue())
    return target


def underscored(distribution: str) -> str:
    """A distribution's name as a wheel's file and .dist-info folder spell it."""
    return canonicalize_name(distribution).replace("-", "_")


def _record_hash(sha256: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(sha256).rstrip(b"=").decode("ascii")


def members(wheel: Path) -> list[str]:
    return sorted(name for name in archives.zip_names(wheel) if not name.endswith("/"))


def read_member(wheel: Path, member: str) -> str | None:
    """The text of one file in the wheel, or None when it has no such file."""
    with archives.opened_zip(wheel) as (archive, listed):
        if member not in {m.name for m in listed}:
            return None
        return _text(wheel, member, archives.read_member(archive, member))


def _text(wheel: Path, member: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadBytes(f"{shown(wheel.name)}: {shown(member)} is not UTF-8 text ({exc.reason})") from None


def metadata(wheel: Path) -> email.message.Message:
    """The wheel's METADATA: of its one `.dist-info` folder at the top."""
    with archives.opened_zip(wheel) as (archive, listed):
        found = [m.name for m in listed if re.fullmatch(r"[^/]+\.dist-info/METADATA", m.name)]
        if len(found) != 1:
            raise BadBytes(
                f"{shown(wheel.name)}: {len(found)} .dist-info/METADATA files at its top, where a wheel has one"
            )
        return email.parser.Parser().parsestr(_text(wheel, found[0], archives.read_member(archive, found[0])))


def requires_dist(wheel: Path, *, with_extras: bool = True) -> list[Requirement]:
    """The wheel's Requires-Dist, parsed; without `with_extras`, only what it requires whichever extras are asked
    for. A line that is no requirement is left out (check_wheel reports it)."""
    return WheelMetadata.read(wheel).requires_dist(with_extras=with_extras)


@dataclass(frozen=True)
class WheelMetadata:
    """A wheel's METADATA, read once, for whoever asks it several things (the smoke)."""

    path: Path
    fields: email.message.Message

    @classmethod
    def read(cls, wheel: Path) -> WheelMetadata:
        return cls(wheel, metadata(wheel))

    @property
    def name(self) -> WheelName:
        return WheelName.of(self.path)

    @property
    def extras(self) -> list[str]:
        """The extras it declares (Provides-Extra)."""
        return sorted(self.fields.get_all("Provides-Extra") or [])

    def requires_dist(self, *, with_extras: bool = True) -> list[Requirement]:
        """As requires_dist() says."""
        found = []
        for line in self.fields.get_all("Requires-Dist") or []:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            if with_extras or requirement.marker is None or "extra" not in str(requirement.marker):
                found.append(requirement)
        return found


def marker_environment(name: WheelName) -> dict[str, str]:
    """The environment markers of the machine a wheel installs on (its OS, machine and Python: the oldest it
    serves; this one's for a py3-none wheel, which names none)."""
    python = {"python_version": name.python, "python_full_version": f"{name.python}.0"} if name.abi != "none" else {}
    return {
        **{key: str(value) for key, value in default_environment().items()},
        "sys_platform": operating_system(name.os).sys_platform,
        "platform_system": operating_system(name.os).platform_system,
        "platform_machine": name.arch,
        **python,
    }


def metadata_of(path: Path) -> email.message.Message:
    """An installed distribution's METADATA file, read."""
    return email.parser.Parser().parsestr(path.read_text(encoding="utf-8"))


def extras(wheel: Path) -> list[str]:
    """The extras a wheel declares (Provides-Extra in its METADATA)."""
    return WheelMetadata.read(wheel).extras


def with_extras(requirement: str, names: list[str]) -> str:
    return f"{requirement}[{','.join(names)}]" if names else requirement


# ---------------------------------------------------------------------------------------------- binaries


@dataclass(frozen=True)
class Binary:
    """What a wheel's ELF or PE file needs, as read once from the wheel (and updated by the RPATH repair)."""

    member: str
    format: Literal["elf", "pe"]
    needed: tuple[str, ...]  # DT_NEEDED, or the PE import table
    lazy: tuple[str, ...] = ()  # the PE delay-load table: loaded at first call
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    version_needs: dict[str, frozenset[str]] = field(default_factory=dict)  # ELF: library -> symbol versions
    device_code: bool = False  # carries nvcc's device code (a fatbin section)
    python_inits: tuple[str, ...] = ()  # the PyInit_* functions it exports
    fatbin: tuple[DeviceCode, ...] = ()  # what that device code holds (with the PTX it can JIT-link from)
    machine: str = ""  # what its header says it runs on, spelled as WheelName.arch
    unreadable: str = ""  # why the file could not be read within the readers' bounds (then nothing else is known)

    @property
    def module(self) -> str | None:
        """The dotted name its file name gives it (pkg/_mod.cpython-312-….so -> pkg._mod); None for a library."""
        return module_name(self.member)

    @property
    def importable(self) -> bool:
        """A Python extension module: named like one and exporting its PyInit function (a library loaded with
        ctypes may be named like a module, yet `import` cannot load it)."""
        module = self.module
        return module is not None and f"PyInit_{module.rsplit('.', 1)[-1]}" in self.python_inits

    def with_rpath(self, rpath: tuple[str, ...]) -> Binary:
        return replace(self, rpath=rpath, runpath=())


def module_name(member: str) -> str | None:
    """`pkg/sub/_mod.cpython-312-x86_64-linux-gnu.so` / `pkg/_mod.cp312-win_amd64.pyd` -> dotted name; None for a
    shared library or DLL."""
    path = PurePosixPath(member)
    if path.parts[0].endswith(".data"):
        path = PurePosixPath(*path.parts[2:])
    is_extension = ".cpython-" in path.name or ".abi3." in path.name or path.suffix == ".pyd"
    if path.parent.name.endswith(".libs") or not is_extension:
        return None
    return ".".join([*path.parent.parts, path.name.split(".")[0]])


def _read_elf(path: Path, member: str) -> Binary:
    info = read_elf(path)
    return Binary(
        member,
        "elf",
        info.needed,
        (),
        info.rpath,
        info.runpath,
        info.version_needs,
        info.device_code,
        info.python_inits,
        _device_code(path, "elf") if info.device_code else (),
        info.machine,
    )


def _read_pe(path: Path, member: str) -> Binary:
    found = read_pe(path)
    return Binary(
        member,
        "pe",
        found.imports,
        found.delay_imports,
        device_code=found.device_code,
        python_inits=found.python_inits,
        fatbin=_device_code(path, "pe") if found.device_code else (),
        machine=found.machine,
    )


@dataclass(frozen=True)
class _Format:
    """How a binary format is read: whether a file is one, its reader, its fatbin sections, and those of its
    relocatable device code."""

    recognizes: Callable[[Path], bool]
    read: Callable[[Path, str], Binary]
    sections: Callable[[Path], list[bytes]]
    relocatable: Callable[[Path], list[bytes]]


_FORMATS = {
    "elf": _Format(
        is_elf,
        _read_elf,
        elf.device_code_sections,
        lambda path: elf.device_code_sections(path, elf.RELOCATABLE_DEVICE_CODE_SECTION),
    ),
    # A PE file is one by its name (the OS's binary_suffixes); where it keeps relocatable device code is not known.
    "pe": _Format(lambda _: True, _read_pe, pe.device_code_sections, lambda _: []),
}


def read_binary(path: Path, member: str, os_name: OS) -> Binary | None:
    """The binary at `path` (wheel member `member`) read, or None when it is no binary of the wheel's OS. One
    that cannot be read within the readers' bounds comes back `unreadable`, for the audit to reject."""
    facts = operating_system(os_name)
    binary_format = _FORMATS[facts.binary_format]
    named_so = not facts.binary_suffixes or path.suffix.lower() in facts.binary_suffixes
    if not (named_so and binary_format.recognizes(path)):
        return None
    try:
        return binary_format.read(path, member)
    except BadBytes as exc:
        return Binary(member, facts.binary_format, (), unreadable=str(exc))


def read_device_code(path: Path, os_name: OS) -> tuple[DeviceCode, ...]:
    """Every entry of the binary's fatbin section(s), then the PTX its relocatable device code can be JIT-linked
    from (ELF only: where a PE image keeps relocatable device code is not known here). Read for a wheel's binaries
    only (NVIDIA's libraries carry hundreds of megabytes of it, which nothing here needs)."""
    return _device_code(path, operating_system(os_name).binary_format)


def _device_code(path: Path, binary_format: str) -> tuple[DeviceCode, ...]:
    sections = _FORMATS[binary_format].sections(path)
    relocatable = _FORMATS[binary_format].relocatable(path)
    try:
        linked = [entry for section in sections for entry in read_fatbin(section)]
        objects = [entries for section in relocatable for entries in read_fatbin_containers(section)]
        return (*linked, *jit_linkable_ptx(objects))
    except FatbinError as exc:
        raise BadBytes(f"its device code cannot be read — {exc}") from None


def read_binaries(tree: Path, os_name: OS) -> dict[str, Binary]:
    """Every binary of an unpacked wheel, by member."""
    found = {}
    for path in sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()):
        member = path.relative_to(tree).as_posix()
        binary = read_binary(path, member, os_name)
        if binary is not None:
            found[member] = binary
    return found


def compatible_platforms(platform_tag: str) -> list[str]:
    """The platform tags a machine of `platform_tag` installs: manylinux_2_28_x86_64 takes every older manylinux
    (pip's --platform does not widen a manylinux_2_X tag by itself)."""
    match = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform_tag)
    if match is None:
        return [platform_tag]
    glibc, arch = int(match[1]), match[2]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags = []
    for minor in range(glibc, 4, -1):
        tags.append(f"manylinux_2_{minor}_{arch}")
        if minor in legacy:
            tags.append(f"{legacy[minor]}_{arch}")
    return tags


# Repair tools rename what they vendor: libcudart.so.12 -> libcudart-256e6409.so.12 (auditwheel),
# cudart64_12.dll -> cudart64_12-<hash>.dll (delvewheel).
_VENDORED_NAME = re.compile(r"^(?P<stem>.+)-[0-9a-f]{8,}(?P<suffix>\.so.*|\.dll)$", re.IGNORECASE)


def unvendored(name: str) -> str:
    """A library's name before a repair tool renamed it to vendor it (the name itself when it did not)."""
    match = _VENDORED_NAME.match(name)
    return match["stem"] + match["suffix"] if match else name
