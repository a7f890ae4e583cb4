"""Every zip and tar the factory opens — wheels (the user's, its own, NVIDIA's), sdists, NVIDIA's archives —
goes through this one layer, and so does every download and index page: bounded in size and time whatever the
bytes claim, and refused whole (BadBytes naming the archive and the member) rather than repaired.

A zip is checked as a whole before any member is read: every name relative, inside, without `..`, backslashes
or NULs, and given once; each central-directory entry agreeing with its local header (name, method, sizes) and
no two entries sharing bytes; no encryption; the total it unpacks to within MAX_UNPACKED_BYTES and MAX_RATIO. A
tar's decompressed stream is capped the same way while it is read, so a bomb stops at the limit. Unpacking
writes nothing through a link and refuses links that lead outside. This is checked here, not left to tarfile's
`data` filter, whose link handling depends on the Python release (CVE-2025-4517).
"""

from __future__ import annotations

import bz2
import errno
import functools
import gzip
import hashlib
import http.client
import io
import itertools
import lzma
import os
import shutil
import stat
import struct
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from .. import host
from ..errors import BadBytes, NetworkFailure, ToolFailure
from .shown import shown

TIMEOUT_S = 60  # one network read
# What one archive may unpack to. NVIDIA's largest (nvcc with its tools) unpacks to a few hundred MB at a ratio
# near 4; sdists to far less. A small archive may compress as well as it likes, a large one not like a bomb.
MAX_UNPACKED_BYTES = 4 << 30
MAX_RATIO = 100
RATIO_FROM_BYTES = 64 << 20
# A download (an sdist, an NVIDIA archive, a .deb): the largest NVIDIA ships is under 2 GiB.
MAX_DOWNLOAD_BYTES = 4 << 30
DOWNLOAD_DEADLINE_S = 3600
# Answers that say "not now" rather than "no": request timeout, too many requests.
_TRANSIENT_HTTP = {408, 429}
_LOCAL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EACCES}
# An index page or a manifest: PyPI's largest project pages are a few MiB.
MAX_PAGE_BYTES = 64 << 20
PAGE_DEADLINE_S = 300
# One member read into memory (METADATA, WHEEL, RECORD, a variant module).
MAX_MEMBER_BYTES = 64 << 20
# A wheel's members: pip and PyPI see no real wheel with more.
MAX_MEMBERS = 100_000
# Threads that unpack a set of wheels side by side: enough to keep two to four cores and the disk busy.
UNPACK_WORKERS = 4
# Compression methods a wheel or an archive may use: stored, deflate, bzip2, lzma.
ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_MAGIC = b"PK\x03\x04"
_DATA_DESCRIPTOR = 0x8
_ENCRYPTED = 0x1


# ---------------------------------------------------------------------------------------------- network


def _read_bounded(
    response: IO[bytes], what: str, limit: int, deadline_s: float, sink: IO[bytes], digest: hashlib._Hash | None = None
) -> int:
    """Copy `response` into `sink` (and through `digest`), refusing more than `limit` bytes or a transfer slower
    than `deadline_s` in all (a server that drips one byte a minute never trips a per-read timeout)."""
    started, total = time.monotonic(), 0
    while block := response.read(1 << 20):
        total += len(block)
        if total > limit:
            raise BadBytes(f"{what}: more than {limit >> 20} MiB — refused (a page or file this large is not real)")
        if time.monotonic() - started > deadline_s:
            raise BadBytes(f"{what}: still arriving after {deadline_s:.0f} s — refused")
        sink.write(block)
        if digest is not None:
            digest.update(block)
    return total


def download(url: str, target: Path, sha256: str | None = None) -> Path:
    """`url` saved as `target`, through a partial file beside it: a failed, oversized or killed download, or one
    whose bytes are not of the `sha256` the index named, leaves no `target` behind. A connection the network drops
    is picked up again (host.over_network); a network failure that lasts is a ToolFailure, a body past the bounds
    or of another sha256 BadBytes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False) as partial:
        transfer = _Transfer(url, partial)
        try:
            host.over_network(transfer.go_on, f"downloading {shown(target.name)}")
            if sha256 is not None and transfer.digest.hexdigest() != sha256.lower():
                raise BadBytes(f"{shown(url)}: its sha256 is {transfer.digest.hexdigest()}, not the {shown(sha256)} "
                               "the index names — refused")  # fmt: skip
        except (ToolFailure, BadBytes):
            Path(partial.name).unlink(missing_ok=True)
            raise
    return Path(partial.name).replace(target)


@dataclass
class _Transfer:
    """One download into `sink`, each new try taking up where the last connection dropped (an HTTP range request)
    where the server serves ranges, else from the start; bounded in size and time over all its tries."""

    url: str
    sink: IO[bytes]
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)
    started: float = field(default_factory=time.monotonic)

    def go_on(self) -> None:
        received = self.sink.tell()
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={received}-"} if received else {})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                if received and not _continues(response, received):
                    self._start_over()
                    if response.status not in (200, None):  # None: a file: URL, read whole
                        raise NetworkFailure(f"cannot download {shown(self.url)}: the server sent another range")
                left_s = DOWNLOAD_DEADLINE_S - (time.monotonic() - self.started)
                limit = MAX_DOWNLOAD_BYTES - self.sink.tell()
                _read_bounded(response, shown(self.url), limit, left_s, self.sink, self.digest)
                # http.client ends a body the connection cut short without a word; the length it still awaited
                # says so (None where no Content-Length was sent).
                if short := getattr(response, "length", None):
                    raise NetworkFailure(f"cannot download {shown(self.url)}: the connection closed {short} bytes "
                                         "short")  # fmt: skip
        except urllib.error.HTTPError as exc:
            failure = NetworkFailure if exc.code in _TRANSIENT_HTTP or exc.code >= 500 else ToolFailure
            raise failure(f"cannot download {shown(self.url)}: HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            # A full or read-only disk is no network's doing: another try would meet it again.
            failure = ToolFailure if getattr(exc, "errno", None) in _LOCAL_ERRNOS else NetworkFailure
            raise failure(f"cannot download {shown(self.url)}: {shown(reason)}") from None

    def _start_over(self) -> None:
        self.sink.seek(0)
        self.sink.truncate()
        self.digest = hashlib.sha256()


def _continues(response: http.client.HTTPResponse, offset: int) -> bool:
    """Whether `response` is the rest of the file from `offset` (a 206 whose Content-Range begins there)."""
    content_range = response.headers.get("Content-Range", "")
    return response.status == 206 and content_range.startswith(f"bytes {offset}-")


def read_page(request: urllib.request.Request | str) -> tuple[bytes, str]:
    """An index page or manifest, whole, and its content type: at most MAX_PAGE_BYTES within PAGE_DEADLINE_S.
    urllib's errors pass through for the caller to name (a 404 means "not on this index")."""
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        body = io.BytesIO()
        url = request.full_url if isinstance(request, urllib.request.Request) else request
        _read_bounded(response, shown(url), MAX_PAGE_BYTES, PAGE_DEADLINE_S, body)
        return body.getvalue(), response.headers.get_content_type()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------- members


@dataclass(frozen=True)
class _Member:
    name: str
    kind: str  # "file", "dir" or "link" (symbolic); nothing else is unpacked
    size: int
    target: str = ""  # of a link
    mode: int = 0o644


def _refused(archive: Path, member: str, why: str) -> BadBytes:
    return BadBytes(f"{shown(archive.name)}: member {shown(member, quoted=True)} {why} — the archive is refused")


def member_problem(name: str) -> str | None:
    """Why `name` cannot be a member's name, or None: it must be relative, stay inside, and mean the same path
    on every system."""
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or "\0" in name:
        return "would land outside the folder"
    if "\\" in name:
        return "has a backslash in its name, a folder separator on Windows"
    if len(name) > 4096 or any(len(part) > 255 for part in path.parts):
        return "has a name longer than a file system takes"
    return None


def _check(archive: Path, members: list[_Member]) -> None:
    """The listing alone: names, each once; links' own targets; the size the archive unpacks to."""
    total = 0
    seen: set[str] = set()
    for member in members:
        why = member_problem(member.name)
        if why:
            raise _refused(archive, member.name, why)
        key = member.name.rstrip("/")
        if key in seen:
            raise _refused(archive, member.name, "is in the archive twice (which one a tool takes differs)")
        seen.add(key)
        if member.kind == "link" and (PurePosixPath(member.target).is_absolute() or not member.target):
            raise _refused(archive, member.name, f"links to {shown(member.target, quoted=True)}, outside the folder")
        total += member.size
    _check_total(archive, total)


def _check_total(archive: Path, total: int) -> None:
    packed = max(archive.stat().st_size, 1)
    if total > MAX_UNPACKED_BYTES or (total > RATIO_FROM_BYTES and total > MAX_RATIO * packed):
        raise BadBytes(
            f"{shown(archive.name)}: unpacks to {total / 2**20:.0f} MiB from {packed / 2**20:.1f} MiB, over the "
            f"{MAX_UNPACKED_BYTES >> 30} GiB or {MAX_RATIO}:1 an archive may — the archive is refused"
        )


# ---------------------------------------------------------------------------------------------- zip


def _zip_members(archive: Path, z: zipfile.ZipFile) -> list[_Member]:
    """The zip's members, once the central directory was found to agree with the local headers: each name read
    the same in both, no entry encrypted or compressed in a way pip cannot read, no two entries overlapping (the
    trick of non-recursive zip bombs), sizes matching where the local header gives them."""
    infos = z.infolist()
    if len(infos) > MAX_MEMBERS:
        raise BadBytes(f"{shown(archive.name)}: {len(infos)} members, more than {MAX_MEMBERS} — the archive is refused")
    size = archive.stat().st_size
    spans = sorted(_span(archive, z, info, size) for info in infos)
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        if start < end:
            raise _refused(archive, second, f"shares its bytes with {shown(first)}")
    return [
        _Member(
            i.filename,
            "dir" if i.is_dir() else "file",
            i.file_size,
            "",
            0o755 if (i.external_attr >> 16) & 0o111 else 0o644,
        )
        for i in infos
    ]


def _span(archive: Path, z: zipfile.ZipFile, info: zipfile.ZipInfo, size: int) -> tuple[int, int, str]:
    """Where a member's local header and data lie, once they agree with its central-directory entry."""
    if info.orig_filename != info.filename:
        raise _refused(archive, info.orig_filename, "has a NUL or a separator zip rewrites in its name")
    if info.flag_bits & _ENCRYPTED:
        raise _refused(archive, info.filename, "is encrypted")
    if info.compress_type not in ZIP_METHODS:
        raise _refused(archive, info.filename, f"uses compression method {info.compress_type}")
    fp = z.fp
    assert fp is not None
    fp.seek(info.header_offset)
    header = fp.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size:
        raise _refused(archive, info.filename, "has no local header where the central directory says")
    magic, _, flags, method, _, _, crc, packed, unpacked, name_length, extra_length = _LOCAL_HEADER.unpack(header)
    local_name = fp.read(name_length)
    central_name = info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437", errors="replace")
    if magic != _LOCAL_MAGIC or local_name != central_name or method != info.compress_type:
        raise _refused(archive, info.filename, "has a local header that disagrees with the central directory")
    stated = not flags & _DATA_DESCRIPTOR and 0xFFFFFFFF not in (packed, unpacked)
    if stated and (crc, packed, unpacked) != (info.CRC, info.compress_size, info.file_size):
        raise _refused(archive, info.filename, "has sizes or a CRC that differ between its two headers")
    end = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length + info.compress_size
    if end > size:
        raise _refused(archive, info.filename, "runs past the end of the file")
    return info.header_offset, end, info.filename


# zipfile's own errors, and what its decompressors and struct raise on odd input.
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error, lzma.LZMAError, OSError, ValueError,
               NotImplementedError, struct.error, RuntimeError)  # fmt: skip


@contextmanager
def opened_zip(archive: Path) -> Iterator[tuple[zipfile.ZipFile, list[_Member]]]:
    """The zip, open, and its members, once its structure was checked whole (_zip_members, _check); any way the
    bytes break while it is used is BadBytes naming it."""
    try:
        with zipfile.ZipFile(archive) as z:
            members = _zip_members(archive, z)
            _check(archive, members)
            yield z, members
    except _ZIP_ERRORS as exc:
        raise _unreadable_zip(archive, exc) from None


def _unreadable_zip(archive: Path, exc: BaseException) -> BadBytes:
    return BadBytes(f"{shown(archive.name)}: not a readable zip ({shown(exc)}) — it is corrupt, truncated or no zip")


def zip_unpacked_bytes(archive: Path) -> int:
    """The bytes a checked zip's files unpack to."""
    with opened_zip(archive) as (_, members):
        return sum(member.size for member in members)


def zip_names(archive: Path) -> list[str]:
    """The names of a checked zip's members, in the archive's order (folders included)."""
    with opened_zip(archive) as (_, members):
        return [member.name for member in members]


def read_member(z: zipfile.ZipFile, name: str, limit: int = MAX_MEMBER_BYTES) -> bytes:
    """One member of an open, checked zip, read into memory: refused past `limit` bytes whatever it claims."""
    info = z.getinfo(name)
    if info.file_size > limit:
        raise BadBytes(
            f"member {shown(name)} is {info.file_size >> 20} MiB, more than the {limit >> 20} MiB read whole"
        )
    with z.open(info) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise BadBytes(f"member {shown(name)} inflates past {limit >> 20} MiB")
    return data


# ---------------------------------------------------------------------------------------------- tar


class Seekable(io.RawIOBase):
    """A read-only stream that keeps its own position: what zipfile and tarfile need of one."""

    position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position


class _Capped(Seekable):
    """A decompressing stream that stops at the limit an archive may unpack to: a bomb is refused at the cap,
    not after it has filled the disk or the hours."""

    def __init__(self, inner: IO[bytes] | io.BufferedIOBase, archive: Path) -> None:
        self.inner = inner
        self.archive = archive
        self.packed = max(archive.stat().st_size, 1)
        self.position = 0

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.position = self.inner.seek(offset, whence)
        self._bounded()
        return self.position

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(len(buffer))
        buffer[: len(data)] = data
        self.position += len(data)
        self._bounded()
        return len(data)

    def _bounded(self) -> None:
        if self.position > MAX_UNPACKED_BYTES or (
            self.position > RATIO_FROM_BYTES and self.position > MAX_RATIO * self.packed
        ):
            _check_total(self.archive, self.position)


def _decompressed(archive: Path) -> io.BufferedIOBase:
    """The archive's tar stream, decompressed by its magic number (gzip, bzip2, xz) or as it is."""
    with archive.open("rb") as f:
        magic = f.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(archive, "rb")
    if magic.startswith(b"BZh"):
        return bz2.open(archive, "rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.open(archive, "rb")
    return archive.open("rb")


def _tar_member(archive: Path, member: tarfile.TarInfo) -> _Member:
    if member.isreg() and not member.issparse():
        return _Member(member.name, "file", member.size, "", 0o755 if member.mode & 0o111 else 0o644)
    if member.isdir():
        return _Member(member.name, "dir", 0)
    if member.issym():
        return _Member(member.name, "link", 0, member.linkname)
    if member.islnk():
        raise _refused(archive, member.name, f"is a hard link (to {shown(member.linkname, quoted=True)})")
    raise _refused(archive, member.name, "is no regular file, folder or symbolic link")


# ---------------------------------------------------------------------------------------------- unpacking


def unpack(archive: Path, into: Path) -> Path:
    """Unpack a zip (a wheel, a .zip) or a tar archive (any compression) into `into`, or refuse it whole
    (BadBytes naming the archive and the member): a member outside the folder, given twice, a hard link, a device,
    a symbolic link that leads (through any chain of links) outside it, a truncated or corrupt stream, or more
    unpacked bytes than MAX_UNPACKED_BYTES or MAX_RATIO allow. What the listing shows is refused before anything
    lands; what shows only as the bytes are read (a damaged stream) takes back what this call wrote. Files keep
    whether they are executable. Returns the archive's one top folder, as NVIDIA's archives and sdists have, else
    `into`."""
    into.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        _unpack(archive, into, written)
        _check_links(archive, into)
    except BadBytes:
        for path in reversed(written):
            if path.is_symlink() or path.is_file():
                path.unlink()
        raise
    tops = list(into.iterdir())
    return tops[0] if len(tops) == 1 and tops[0].is_dir() else into


def _unpack(archive: Path, into: Path, written: list[Path]) -> None:
    with archive.open("rb") as f:
        magic = f.read(4)
    if magic == _LOCAL_MAGIC or archive.suffix in (".whl", ".zip"):
        with opened_zip(archive) as (z, members):
            _write(archive, into, members, lambda name: z.open(name), written)
        return
    try:
        with _decompressed(archive) as stream, tarfile.open(fileobj=_capped(stream, archive), mode="r:") as t:
            found = t.getmembers()  # reads the whole stream, capped: a truncated one fails here
            members = [_tar_member(archive, m) for m in found]
            _check(archive, members)
            by_name = {m.name: m for m in found}
            _write(archive, into, members, lambda name: _extracted(t, by_name[name]), written)
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError, ValueError) as exc:
        raise BadBytes(
            f"{shown(archive.name)}: cannot be read whole ({shown(exc)}) — the archive is corrupt or truncated"
        ) from None


def _extracted(tar: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    stream = tar.extractfile(member)
    assert stream is not None  # a regular member
    return stream


def _write(
    archive: Path, into: Path, members: list[_Member], open_member: Callable[[str], IO[bytes]], written: list[Path]
) -> None:
    """Folders and files first, links last: no file is ever written through a link of the archive's own. Each
    file and link is noted in `written` before it is made."""
    root = Path(os.path.realpath(into))
    for member in members:
        path = root / PurePosixPath(member.name)
        if member.kind == "dir":
            path.mkdir(parents=True, exist_ok=True)
        elif member.kind == "file":
            _write_file(path, member, open_member, written)
    for member in members:
        if member.kind == "link":
            path = root / PurePosixPath(member.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            if Path(os.path.realpath(path.parent)) != path.parent:  # a folder of it is a link: refuse below
                raise _refused(archive, member.name, "goes through a link of the archive")
            written.append(path)
            path.symlink_to(member.target)


def _write_file(path: Path, member: _Member, open_member: Callable[[str], IO[bytes]], written: list[Path]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    written.append(path)
    with open_member(member.name) as source, path.open("wb") as target:
        shutil.copyfileobj(source, target)
    path.chmod(member.mode | stat.S_IRUSR | stat.S_IWUSR)


def unpack_together(wheels: list[Path], into: Path, workers: int = UNPACK_WORKERS) -> None:
    """Zips (wheels) unpacked into one folder as `unpack` unpacks them one after another — a path several hold
    ends as the last one's — but each path written once, by `workers` threads (inflating and writing leave
    Python's lock), the largest members first. Every zip is checked whole before anything lands; a refusal or a
    failed write takes back everything this call wrote. A zip's members are files and folders (_zip_members): no
    link to check afterwards."""
    into.mkdir(parents=True, exist_ok=True)
    root = Path(os.path.realpath(into))
    written: list[Path] = []
    with ExitStack() as opened:
        chosen: dict[str, tuple[Path, zipfile.ZipFile, _Member]] = {}
        for wheel in wheels:
            z, members = opened.enter_context(opened_zip(wheel))
            chosen.update((member.name.rstrip("/"), (wheel, z, member)) for member in members)
        files = sorted((e for e in chosen.values() if e[2].kind == "file"), key=lambda e: -e[2].size)
        try:
            for _, _, member in chosen.values():
                if member.kind == "dir":
                    (root / PurePosixPath(member.name)).mkdir(parents=True, exist_ok=True)
            writes = (functools.partial(_write_zip_member, wheel, z, m, root, written) for wheel, z, m in files)
            host.side_by_side(writes, workers)
        except BaseException:
            for path in reversed(written):
                if path.is_symlink() or path.is_file():
                    path.unlink()
            raise


def _write_zip_member(wheel: Path, z: zipfile.ZipFile, member: _Member, root: Path, written: list[Path]) -> None:
    """One member of a checked zip written under `root` (zipfile serialises the reads of one open zip itself, so
    threads may share it); the zip's breakage named as opened_zip names it."""
    try:
        _write_file(root / PurePosixPath(member.name), member, z.open, written)
    except _ZIP_ERRORS as exc:
        raise _unreadable_zip(wheel, exc) from None


def _check_links(archive: Path, into: Path) -> None:
    """Every link, now that all are in place, resolves inside the folder, whatever chain it follows."""
    root = Path(os.path.realpath(into))
    for path in sorted(root.rglob("*")):
        if path.is_symlink() and not Path(os.path.realpath(path)).is_relative_to(root):
            raise _refused(
                archive,
                path.relative_to(root).as_posix(),
                f"links to {shown(os.readlink(path), quoted=True)}, outside the folder",
            )


def _capped(stream: IO[bytes] | io.BufferedIOBase, archive: Path) -> IO[bytes]:
    return io.BufferedReader(_Capped(stream, archive), 1 << 20)


def capped_tar_stream(stream: IO[bytes], label: Path) -> IO[bytes]:
    """A tar stream read from a pipe (dpkg-deb's), capped as an archive's is (`label`: the file it comes from)."""
    return _capped(stream, label)
