"""Runs inside a smoke container with its base Python; standard library only.

    python wheelfactory_copy.py SOURCE_VERSION SOURCE_PYTHON TARGET_VERSION TARGET_PYTHON...

Copies what pip installed into one venv (SOURCE_PYTHON's, a CPython SOURCE_VERSION such as 3.10) into other venvs
(of CPython TARGET_VERSION), as pip would have installed it there: one pip run serves every venv of the smoke. A
file pip writes the same into every venv is hard-linked, not copied: the same bytes and mode, one inode (nothing
the smoke runs writes into an installed file).
Where the versions differ, what pip puts under a folder named for the version (lib/python3.10/site-packages,
include/site/python3.10) goes under the target's; the caller has made sure pip would install the same files on
both (smoke/sharing.py).

Every distribution pip installed (a *.dist-info folder that is not a link: NVIDIA's are linked in from the
runtime site) is copied file by file as its RECORD lists them, wherever pip put each: site-packages, the prefix's
data folders, bin/, include/. pip writes the venv's own interpreter into the scripts it installs (a `#!python`
line rewritten, a console script generated): in a copy that line names the target's interpreter, and the
script's RECORD line its hash and size, as pip would write them. Anything else that names the source venv is
refused rather than copied wrong. Exits 1 with the reason on standard error.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import shutil
import sys

# A script's first line is read to this length at most: pip's shebang is an interpreter's path.
SHEBANG_LIMIT = 4096


class CannotCopy(Exception):
    pass


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _prefix(python: str) -> str:
    return os.path.dirname(os.path.dirname(python))


def _script(path: str, source_python: str, target_python: str) -> bytes | None:
    """The script at `path` with the target's interpreter where pip wrote the source's; None if it names none."""
    with open(path, "rb") as script:
        first = script.readline(SHEBANG_LIMIT)
        shebang = b"#!" + os.fsencode(source_python)
        if not first.startswith(shebang) or first[len(shebang) : len(shebang) + 1] not in (b"\n", b"\r", b" "):
            if os.fsencode(_prefix(source_python)) in first:
                raise CannotCopy(f"{path}: its first line names the source venv in a form pip's shebang never has")
            return None
        return b"#!" + os.fsencode(target_python) + first[len(shebang) :] + script.read()


def _linked(found: str, placed: str) -> None:
    """`placed` made the file `found` is: a hard link (the same bytes and mode, at no cost — a CuPy took seconds
    to copy three times), or a copy where the file system cannot link."""
    try:
        os.link(found, placed)
    except OSError:
        shutil.copyfile(found, placed)


def _site(version: str) -> str:
    return os.path.join("lib", f"python{version}", "site-packages")


def _versioned(version: str) -> tuple[str, ...]:
    """The folders, relative to a venv's prefix, that pip's scheme names for the CPython version."""
    return (os.path.join("lib", f"python{version}"), os.path.join("include", "site", f"python{version}"))


def _placed(relative: str, source_version: str, target_version: str) -> str:
    """Where a file at `relative` (to the source venv's prefix) goes in the target venv."""
    for source, target in zip(_versioned(source_version), _versioned(target_version), strict=True):
        if relative.startswith(source + os.sep):
            return target + relative[len(source) :]
    return relative


def copy_distribution(
    dist_info: str, source_version: str, source_python: str, target_version: str, targets: list[str]
) -> None:
    source_prefix = _prefix(source_python)
    source_site = os.path.join(source_prefix, _site(source_version))
    with open(os.path.join(dist_info, "RECORD"), "rb") as record:
        text = record.read().decode("utf-8")
    newline = "\r\n" if "\r\n" in text else "\n"
    rows = list(csv.reader(io.StringIO(text, newline="")))
    record_path = _placed(
        os.path.relpath(os.path.join(dist_info, "RECORD"), source_prefix), source_version, target_version
    )
    for target_python in targets:
        target_prefix = _prefix(target_python)
        target_site = os.path.join(target_prefix, _site(target_version))
        written = []
        for row in rows:
            if not row:
                continue
            found = os.path.normpath(os.path.join(source_site, row[0]))
            if os.path.isabs(row[0]) or not found.startswith(source_prefix + os.sep) or not os.path.isfile(found):
                raise CannotCopy(f"RECORD of {os.path.basename(dist_info)} lists {row[0]!r}, not a file of the venv")
            relative = _placed(os.path.relpath(found, source_prefix), source_version, target_version)
            placed = os.path.join(target_prefix, relative)
            os.makedirs(os.path.dirname(placed), exist_ok=True)
            if target_version != source_version:  # RECORD names each file relative to site-packages, as pip does
                row = [os.path.relpath(placed, target_site), *row[1:]]
            if relative == record_path:
                written.append(row)
                continue
            rewritten = _script(found, source_python, target_python) if relative.startswith("bin" + os.sep) else None
            if rewritten is None:
                _linked(found, placed)
            else:
                with open(placed, "wb") as script:
                    script.write(rewritten)
                row = [row[0], _record_hash(rewritten), str(len(rewritten))]
            shutil.copymode(found, placed)
            written.append(row)
        buffer = io.StringIO(newline="")
        csv.writer(buffer, lineterminator=newline).writerows(written)
        placed_record = os.path.join(target_prefix, record_path)
        with open(placed_record, "wb") as record:
            record.write(buffer.getvalue().encode("utf-8"))
        shutil.copymode(os.path.join(dist_info, "RECORD"), placed_record)


def main(argv: list[str]) -> int:
    source_version, source_python, target_version, targets = argv[1], argv[2], argv[3], argv[4:]
    source_site = os.path.join(_prefix(source_python), _site(source_version))
    try:
        for entry in sorted(os.listdir(source_site)):
            dist_info = os.path.join(source_site, entry)
            if entry.endswith(".dist-info") and not os.path.islink(dist_info):
                copy_distribution(dist_info, source_version, source_python, target_version, targets)
    except (CannotCopy, OSError, ValueError, csv.Error) as exc:
        print(f"cannot copy the install: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
