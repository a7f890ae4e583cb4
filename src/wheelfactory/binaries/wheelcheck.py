"""A wheel checked the way pip installs it and PyPI accepts it, before anything else trusts it.

The file name, parsed with `packaging`, must be one CPython's wheel for one of the factory's platforms; the zip
must pass the archive layer (names, duplicates, headers, bombs); the one `.dist-info` folder must be the name's;
WHEEL must be version 1 with exactly the name's tags; METADATA's Name and Version must be the name's; and RECORD
must list every member but itself with the sha256 and size the member really has, and nothing that is not there.
"""

from __future__ import annotations

import base64
import csv
import email.parser
import hashlib
import io
import re
import zipfile
from pathlib import Path

from packaging.tags import parse_tag
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import BadBytes
from ..untrusted import archives
from ..untrusted.shown import shown
from .wheelfile import WheelName

# RECORD's own signature files, which pip leaves unlisted.
UNLISTED = ("RECORD", "RECORD.jws", "RECORD.p7s")


def check_wheel(wheel: Path) -> tuple[WheelName | None, list[str]]:
    """The wheel's name (None when it is not a wheel's name) and every problem found, each one line naming the
    wheel, the member and what is wrong."""
    try:
        name = WheelName.of(wheel)
    except BadBytes as exc:
        return None, [str(exc)]
    try:
        with archives.opened_zip(wheel) as (opened, members):
            files = [m.name for m in members if m.kind == "file"]
            return name, [f"{shown(wheel.name)}: {p}" for p in _problems(opened, files, name)]
    except BadBytes as exc:
        return name, [str(exc) if str(exc).startswith(shown(wheel.name)) else f"{shown(wheel.name)}: {exc}"]


def _problems(opened: zipfile.ZipFile, files: list[str], name: WheelName) -> list[str]:
    tops = {f.split("/", 1)[0] for f in files if "/" in f}
    info_dirs = sorted(t for t in tops if t.endswith(".dist-info"))
    if len(info_dirs) != 1:
        return [
            f"{len(info_dirs)} .dist-info folders at its top ({shown(', '.join(info_dirs))}), where a wheel has one"
        ]
    info = info_dirs[0]
    expected = f"{name.distribution}-{name.version}"
    stem = info.removesuffix(".dist-info")
    problems = []
    if "-" not in stem or canonicalize_name(stem.rsplit("-", 1)[0]) != name.distribution:
        problems.append(f"its metadata folder {shown(info)} is not {expected}.dist-info's (pip refuses it)")
    for member in ("WHEEL", "METADATA", "RECORD"):
        if f"{info}/{member}" not in files:
            problems.append(f"{info}/{member} is missing")
    if problems:
        return problems
    problems += _wheel_file(_text(opened, f"{info}/WHEEL"), name)
    problems += _metadata(_text(opened, f"{info}/METADATA"), name)
    problems += _record(opened, f"{info}/RECORD", files)
    return problems


def _text(opened: zipfile.ZipFile, member: str) -> str:
    try:
        return archives.read_member(opened, member).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadBytes(f"{shown(member)} is not UTF-8 text ({exc.reason})") from None


def _wheel_file(text: str, name: WheelName) -> list[str]:
    fields = email.parser.Parser().parsestr(text)
    problems = []
    version = fields.get("Wheel-Version", "")
    if not re.fullmatch(r"1\.\d+", version.strip()):
        problems.append(f"WHEEL says Wheel-Version {shown(version)}, where pip installs 1.x")
    try:
        tags = {tag for line in fields.get_all("Tag") or [] for tag in parse_tag(line.strip())}
    except ValueError:
        tags = set()
    if tags != set(name.tags):
        stated = ", ".join(sorted(str(t) for t in tags)) or "none"
        problems.append(f"WHEEL's Tag lines ({shown(stated)}) are not the file name's tags")
    if (fields.get("Root-Is-Purelib") or "").strip().lower() not in ("true", "false"):
        problems.append("WHEEL lacks Root-Is-Purelib: true or false")
    return problems


def _metadata(text: str, name: WheelName) -> list[str]:
    fields = email.parser.Parser().parsestr(text)
    problems = []
    if not fields.get("Metadata-Version"):
        problems.append("METADATA has no Metadata-Version")
    stated = fields.get("Name", "")
    if canonicalize_name(stated) != name.distribution:
        problems.append(f"METADATA's Name {shown(stated)} is not the file name's {name.distribution}")
    version = fields.get("Version", "")
    try:
        same = Version(version) == name.version
    except InvalidVersion:
        same = False
    if not same:
        problems.append(f"METADATA's Version {shown(version)} is not the file name's {name.version}")
    return problems


def _record(opened: zipfile.ZipFile, record: str, files: list[str]) -> list[str]:
    """Every member but RECORD's own files listed once with the sha256 and size it really has."""
    problems = []
    listed: dict[str, tuple[str, str]] = {}
    try:
        rows = list(csv.reader(io.StringIO(_text(opened, record))))
    except csv.Error as exc:
        return [f"RECORD is no CSV ({shown(exc)})"]
    for row in rows:
        if not row:
            continue
        if len(row) != 3:
            problems.append(f"RECORD has a line of {len(row)} fields: {shown(','.join(row))}")
            continue
        path, digest, size = row
        if path in listed:
            problems.append(f"RECORD lists {shown(path)} twice")
        listed[path] = (digest, size)
    present = set(files)
    for path in sorted(set(listed) - present):
        problems.append(f"RECORD lists {shown(path)}, which the wheel does not hold")
    unlisted = {f"{record.rsplit('/', 1)[0]}/{n}" for n in UNLISTED}
    for path in sorted(present - set(listed) - unlisted):
        problems.append(f"{shown(path)} is not in RECORD")
    for path in sorted(present & set(listed) - unlisted):
        digest, size = listed[path]
        problems += _hashed(opened, path, digest, size)
    return problems


def _hashed(opened: zipfile.ZipFile, path: str, digest: str, size: str) -> list[str]:
    algorithm, _, expected = digest.partition("=")
    if algorithm != "sha256" or not expected:
        return [f"RECORD gives {shown(path)} the hash {shown(digest) or 'none'}, where PyPI and pip want sha256"]
    actual = hashlib.sha256()
    length = 0
    with opened.open(path) as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            actual.update(block)
            length += len(block)
    problems = []
    if base64.urlsafe_b64encode(actual.digest()).rstrip(b"=").decode() != expected:
        problems.append(f"{shown(path)} does not have the sha256 RECORD gives it")
    if size != str(length):
        problems.append(f"{shown(path)} is {length} bytes, RECORD says {shown(size)}")
    return problems
