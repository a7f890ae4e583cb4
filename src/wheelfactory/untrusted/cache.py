"""The cache is read back, not trusted: what the factory puts there is sealed when written — a file's sha256 in
a `.sha256` file beside it, a folder's every file, link and folder in its `.sealed.json` — and checked against
the seal whenever it is reused. An entry that no longer matches (a truncated download, a file changed or added
by hand, a disk error) is dropped and made again by its owner; one that cannot be dropped stops the run with the
entry named and how to clear it.

An entry is checked once a process (a build reuses its toolkit for every Python). A seal records each file's size
and modification time beside its sha256, and the check hashes only the files whose size or time changed since (as
git's index does): a file edited, truncated or replaced gets a new time. A file whose time is not older than its
seal is hashed all the same — written in the same clock tick as the seal, a change could keep the time (git calls
such entries racy). What this does not catch is a same-size change whose writer set the old time back by hand.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import ToolFailure
from .archives import sha256
from .shown import shown

SEAL = ".sealed.json"
HASH_WORKERS = 4  # files hashed at once while a new entry is sealed
_checked: set[tuple[str, int]] = set()  # (entry, its seal's mtime) found intact in this process


def _file_record(path: Path, recorded: object, sealed_at: int) -> list[object]:
    """["file", size, mtime_ns, sha256]: the recorded one where the file's size and time are those it was sealed
    with and older than the seal, else read afresh."""
    return _recorded(path.stat(), recorded, sealed_at) or _fresh_record(path)


def _recorded(stat: os.stat_result, recorded: object, sealed_at: int) -> list[object] | None:
    if (
        isinstance(recorded, list)
        and len(recorded) == 4
        and recorded[1:3] == [stat.st_size, stat.st_mtime_ns]
        and stat.st_mtime_ns < sealed_at
    ):
        return recorded
    return None


def _fresh_record(path: Path) -> list[object]:
    stat = path.stat()
    return ["file", stat.st_size, stat.st_mtime_ns, sha256(path)]


def _entries(folder: Path) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every entry under `folder`, by its name relative to it, through no link: scandir's entries know whether they
    are links or folders without a call each (a toolkit has thousands)."""
    pending = [(folder, "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                yield prefix + entry.name, entry
                if entry.is_dir(follow_symlinks=False):
                    pending.append((Path(entry.path), f"{prefix}{entry.name}/"))


def _listing(folder: Path, recorded: dict[str, object] | None = None, sealed_at: int = 0) -> dict[str, list[object]]:
    """Every entry under `folder` but the seal: a file's size, time and sha256, a link's target, a folder. The files
    to read afresh (a new entry's: a toolkit is gigabytes) are hashed HASH_WORKERS at a time (hashing leaves
    Python's lock)."""
    found: dict[str, list[object]] = {}
    unread: dict[str, Path] = {}
    for name, entry in sorted(_entries(folder), key=lambda item: item[0]):
        if name == SEAL:
            continue
        if entry.is_symlink():
            found[name] = ["link", os.readlink(entry.path)]
        elif entry.is_dir(follow_symlinks=False):
            found[name] = ["dir"]
        elif (
            record := _recorded(entry.stat(follow_symlinks=False), (recorded or {}).get(name), sealed_at)
        ) is not None:
            found[name] = record
        else:
            found[name], unread[name] = [], Path(entry.path)  # its place in the listing's order, filled below
    if unread:
        with ThreadPoolExecutor(max_workers=HASH_WORKERS) as pool:
            found.update(zip(unread, pool.map(_fresh_record, unread.values()), strict=True))
    return found


def _content(record: object) -> object:
    """What a listing's record says of the content: a file's size and sha256, not its time (a file touched but
    unchanged is the same file)."""
    if isinstance(record, list) and record[:1] == ["file"]:
        return [record[0], record[1], record[-1]]
    return record


def seal(entry: Path, sha256: str | None = None) -> None:
    """Record what a complete cache entry (a file or a folder) holds, for `intact` to check on reuse. `sha256`: a
    file's, computed as it was written (a download's), not read again."""
    if entry.is_dir():
        _write_seal(entry / SEAL, json.dumps(_listing(entry), indent=0))
        return
    recorded = entry.with_name(entry.name + ".sha256")
    if sha256 is not None:
        stat = entry.stat()
        _write_seal(recorded, _file_seal(["file", stat.st_size, stat.st_mtime_ns, sha256]))
    # A seal written after the file's last change already says what it holds (pip, asked again, hands back the
    # wheels it checked and kept): hashing them again on every call would read gigabytes for nothing.
    elif not recorded.is_file() or recorded.stat().st_mtime_ns < entry.stat().st_mtime_ns:
        _write_seal(recorded, _file_seal(_file_record(entry, None, 0)))


def sealed_sha256(entry: Path) -> str | None:
    """The sha256 a cached file holds, once found to match its seal (`reusable`); None where it is absent or was
    dropped."""
    if not reusable(entry):
        return None
    return entry.with_name(entry.name + ".sha256").read_text(encoding="utf-8").split()[0]


def intact(entry: Path) -> str | None:
    """None when the entry still holds what its seal says; else what differs (the first difference found), or
    that it has no seal (written by an older factory, or never finished)."""
    if entry.is_dir():
        return _folder_intact(entry)
    recorded_file = entry.with_name(entry.name + ".sha256")
    if not entry.is_file() or not recorded_file.is_file():
        return "it has no seal"
    stat, sealed_at = entry.stat(), recorded_file.stat().st_mtime_ns
    key = (f"{entry}:{stat.st_size}:{stat.st_mtime_ns}", sealed_at)
    if key in _checked:
        return None
    try:
        digest, *sized = recorded_file.read_text(encoding="utf-8").split()
    except (OSError, ValueError, UnicodeDecodeError):
        return "its seal cannot be read"
    record = ["file", *(int(n) for n in sized if n.isdigit()), digest]
    found = _file_record(entry, record, sealed_at)
    if found[-1] != digest:
        return "its sha256 differs"
    if found != record:  # hashed afresh and found the same: the seal says so with today's times
        _write_seal(recorded_file, _file_seal(found))
    _checked.add((key[0], recorded_file.stat().st_mtime_ns))
    return None


def _folder_intact(entry: Path) -> str | None:
    sealed = entry / SEAL
    if not sealed.is_file():
        return "it has no seal"
    key = (str(entry), sealed.stat().st_mtime_ns)
    if key in _checked:
        return None
    try:
        recorded = json.loads(sealed.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return "its seal cannot be read"
    if not isinstance(recorded, dict):
        return "its seal cannot be read"
    listing = _listing(entry, recorded, key[1])
    found = {k: _content(v) for k, v in listing.items()}
    written = {k: _content(v) for k, v in recorded.items()}
    if found != written:
        differs = sorted(set(found) ^ set(written)) or sorted(k for k in found if found[k] != written.get(k))
        return f"{shown(differs[0])} differs from what was written"
    if listing != recorded:  # hashed afresh and found the same: the seal says so with today's times
        _write_seal(sealed, json.dumps(listing, indent=0))
    _checked.add((str(entry), sealed.stat().st_mtime_ns))
    return None


def _write_seal(path: Path, text: str) -> None:
    """A seal replaced whole: a process reading it meanwhile sees the old one or the new. The new one is written
    beside the entry, never inside a sealed folder, where a process checking it would find a file it did not seal."""
    entry = path.parent if path.name == SEAL else path
    partial = entry.with_name(f".{entry.name}.seal-{os.getpid()}")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def _file_seal(record: list[object]) -> str:
    """A single file's seal: its sha256, size and time."""
    _, size, mtime_ns, digest = record
    return f"{digest} {size} {mtime_ns}"


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
