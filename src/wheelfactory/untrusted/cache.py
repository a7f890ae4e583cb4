"""The cache is read back, not trusted: what the factory puts there is sealed when written — a file's sha256 in
a `.sha256` file beside it, a folder's every file, link and folder in its `.sealed.json` — and checked against
the seal whenever it is reused. An entry that no longer matches (a truncated download, a file changed or added
by hand, a disk error) is dropped and made again by its owner; one that cannot be dropped stops the run with the
entry named and how to clear it.

An entry is checked once a process (a build reuses its toolkit for every Python): the first reuse hashes it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..errors import ToolFailure
from .archives import sha256
from .shown import shown

SEAL = ".sealed.json"
_checked: set[tuple[str, int]] = set()  # (entry, its seal's mtime) found intact in this process


def _listing(folder: Path) -> dict[str, list[object]]:
    """Every entry under `folder` but the seal: a file's size and sha256, a link's target, a folder."""
    found: dict[str, list[object]] = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if name == SEAL:
            continue
        if path.is_symlink():
            found[name] = ["link", os.readlink(path)]
        elif path.is_dir():
            found[name] = ["dir"]
        else:
            found[name] = ["file", path.stat().st_size, sha256(path)]
    return found


def seal(entry: Path) -> None:
    """Record what a complete cache entry (a file or a folder) holds, for `intact` to check on reuse."""
    if entry.is_dir():
        (entry / SEAL).write_text(json.dumps(_listing(entry), indent=0), encoding="utf-8")
        return
    recorded = entry.with_name(entry.name + ".sha256")
    # A seal written after the file's last change already says what it holds (pip, asked again, hands back the
    # wheels it checked and kept): hashing them again on every call would read gigabytes for nothing.
    if not recorded.is_file() or recorded.stat().st_mtime_ns < entry.stat().st_mtime_ns:
        recorded.write_text(sha256(entry), encoding="utf-8")


def intact(entry: Path) -> str | None:
    """None when the entry still holds what its seal says; else what differs (the first difference found), or
    that it has no seal (written by an older factory, or never finished)."""
    if entry.is_dir():
        sealed = entry / SEAL
        if not sealed.is_file():
            return "it has no seal"
        key = (str(entry), sealed.stat().st_mtime_ns)
        if key in _checked:
            return None
        try:
            recorded = json.loads(sealed.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return "its seal cannot be read"
        found = _listing(entry)
        if found != recorded:
            differs = sorted(set(found) ^ set(recorded)) or sorted(k for k in found if found[k] != recorded.get(k))
            return f"{shown(differs[0])} differs from what was written"
        _checked.add(key)
        return None
    recorded_file = entry.with_name(entry.name + ".sha256")
    if not entry.is_file() or not recorded_file.is_file():
        return "it has no seal"
    stat = entry.stat()
    key = (f"{entry}:{stat.st_size}:{stat.st_mtime_ns}", recorded_file.stat().st_mtime_ns)
    if key in _checked:
        return None
    if recorded_file.read_text(encoding="utf-8").strip() != sha256(entry):
        return "its sha256 differs"
    _checked.add(key)
    return None


def drop(entry: Path, why: str) -> None:
    """Remove an entry that failed its check, so its owner makes it again; stop (exit 3) if it cannot be removed."""
    from ..progress import console

    console.print(f"cache: {shown(str(entry))}: {why} — dropped, to be made again", markup=False)
    try:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink(missing_ok=True)
            entry.with_name(entry.name + ".sha256").unlink(missing_ok=True)
    except OSError as exc:
        raise ToolFailure(
            f"the cache entry {shown(str(entry))} does not match what was written ({why}) and cannot be removed "
            f"({shown(exc)}) — delete it by hand (rm -rf), or point WHEELFACTORY_CACHE elsewhere"
        ) from None


def reusable(entry: Path) -> bool:
    """Whether a cache entry exists and matches its seal; one that exists but does not is dropped."""
    if not (entry.is_dir() or entry.is_file()):
        return False
    why = intact(entry)
    if why is None:
        return True
    drop(entry, why)
    return False
