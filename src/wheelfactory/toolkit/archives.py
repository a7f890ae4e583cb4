"""Files fetched from the network (NVIDIA's archives, sdists): downloaded whole or not at all, their sha256,
and unpacked without letting a member write outside the target folder."""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from ..errors import ToolFailure

TIMEOUT_S = 60


def download(url: str, target: Path) -> Path:
    """`url` saved as `target`, through a partial file beside it: a failed or killed download leaves no
    `target` behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False) as partial:
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                shutil.copyfileobj(response, partial)
        except (urllib.error.URLError, OSError) as exc:
            Path(partial.name).unlink(missing_ok=True)
            raise ToolFailure(f"cannot download {url}: {getattr(exc, 'reason', exc)}") from None
    return Path(partial.name).replace(target)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# What one archive may unpack to. NVIDIA's largest (nvcc with its tools) unpacks to a few hundred MB at a ratio
# near 4; sdists to far less. A small archive may compress as well as it likes, a large one not like a bomb.
MAX_UNPACKED_BYTES = 4 << 30
MAX_RATIO = 100
RATIO_FROM_BYTES = 64 << 20


@dataclass(frozen=True)
class _Member:
    name: str
    kind: str  # "file", "dir" or "link" (symbolic); nothing else is unpacked
    size: int
    target: str = ""  # of a link
    executable: bool = False


def unpack(archive: Path, into: Path) -> Path:
    """Unpack a .zip or a tar archive (any compression) into `into`, or refuse it whole (ToolFailure naming the
    archive and the member) before anything lands: a member outside the folder, a hard link, a device, a
    symbolic link that leads (through any chain of links) outside it, a truncated or corrupt stream, or more
    unpacked bytes than MAX_UNPACKED_BYTES or MAX_RATIO allow. This is checked here, not left to tarfile's
    `data` filter, whose link handling depends on the Python release (CVE-2025-4517). Returns the archive's one
    top folder, as NVIDIA's archives and sdists have, else `into`."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                members = [
                    _Member(
                        i.filename,
                        "dir" if i.is_dir() else "file",
                        i.file_size,
                        "",
                        bool(i.external_attr >> 16 & 0o111),
                    )
                    for i in z.infolist()
                ]
                _check(archive, members)
                _write(archive, into, members, lambda name: z.open(name))
        else:
            with tarfile.open(archive) as t:
                found = t.getmembers()  # reads the whole stream: a truncated one fails here
                members = [_tar_member(archive, m) for m in found]
                _check(archive, members)
                by_name = {m.name: m for m in found}
                _write(archive, into, members, lambda name: _extracted(t, by_name[name]))
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError, OSError) as exc:
        raise ToolFailure(
            f"{archive.name}: cannot be read whole ({exc}) — the archive is corrupt or truncated"
        ) from None
    _check_links(archive, into)
    tops = list(into.iterdir())
    return tops[0] if len(tops) == 1 and tops[0].is_dir() else into


def _refused(archive: Path, member: str, why: str) -> ToolFailure:
    return ToolFailure(f"{archive.name}: member {member!r} {why} — the archive is refused")


def _tar_member(archive: Path, member: tarfile.TarInfo) -> _Member:
    if member.isreg() and not member.issparse():
        return _Member(member.name, "file", member.size, "", bool(member.mode & 0o111))
    if member.isdir():
        return _Member(member.name, "dir", 0)
    if member.issym():
        return _Member(member.name, "link", 0, member.linkname)
    if member.islnk():
        raise _refused(archive, member.name, f"is a hard link (to {member.linkname!r})")
    raise _refused(archive, member.name, "is no regular file, folder or symbolic link")


def _relative(archive: Path, name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or "\0" in name:
        raise _refused(archive, name, "would land outside the folder")
    return path


def _check(archive: Path, members: list[_Member]) -> None:
    """The listing alone: names, links' own targets, and the size the archive unpacks to."""
    total = 0
    for member in members:
        _relative(archive, member.name)
        if member.kind == "link" and (PurePosixPath(member.target).is_absolute() or not member.target):
            raise _refused(archive, member.name, f"links to {member.target!r}, outside the folder")
        total += member.size
    packed = max(archive.stat().st_size, 1)
    if total > MAX_UNPACKED_BYTES or (total > RATIO_FROM_BYTES and total > MAX_RATIO * packed):
        raise ToolFailure(
            f"{archive.name}: unpacks to {total / 2**20:.0f} MiB from {packed / 2**20:.1f} MiB, over the "
            f"{MAX_UNPACKED_BYTES >> 30} GiB or {MAX_RATIO}:1 an archive may — the archive is refused"
        )


def _extracted(tar: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    stream = tar.extractfile(member)
    assert stream is not None  # a regular member
    return stream


def _write(archive: Path, into: Path, members: list[_Member], open_member: Callable[[str], IO[bytes]]) -> None:
    """Folders and files first, links last: no file is ever written through a link of the archive's own."""
    root = Path(os.path.realpath(into))
    for member in members:
        path = root / PurePosixPath(member.name)
        if member.kind == "dir":
            path.mkdir(parents=True, exist_ok=True)
        elif member.kind == "file":
            path.parent.mkdir(parents=True, exist_ok=True)
            with open_member(member.name) as source, path.open("wb") as target:
                shutil.copyfileobj(source, target)
            path.chmod(0o755 if member.executable else 0o644)
    for member in members:
        if member.kind == "link":
            path = root / PurePosixPath(member.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            if Path(os.path.realpath(path.parent)) != path.parent:  # a folder of it is a link: refuse below
                raise _refused(archive, member.name, "goes through a link of the archive")
            path.symlink_to(member.target)


def _check_links(archive: Path, into: Path) -> None:
    """Every link, now that all are in place, resolves inside the folder, whatever chain it follows."""
    root = Path(os.path.realpath(into))
    for path in sorted(root.rglob("*")):
        if path.is_symlink() and not Path(os.path.realpath(path)).is_relative_to(root):
            raise _refused(
                archive, path.relative_to(root).as_posix(), f"links to {os.readlink(path)!r}, outside the folder"
            )
