"""One member of a wheel on an index, read without downloading the wheel: HTTP range requests for the zip's
directory and that member, within a budget of bytes whatever the server or the zip claims.

The index's PEP 658 metadata file is the first way to a wheel's METADATA; an index that serves none (a mirror,
a proxy) still answers ranges of the wheel itself. torch's wheels are about 500 MB; its METADATA, a few KiB, is
reached here with a few hundred KiB of requests. A server that ignores the range (200 with the whole file) is
refused at once, not read.
"""

from __future__ import annotations

import io
import urllib.error
import urllib.request
import zipfile
from typing import Any

from ..errors import BadBytes, ToolFailure
from .archives import PAGE_DEADLINE_S, TIMEOUT_S, Seekable, _read_bounded, read_member
from .shown import shown

# All the range requests for one member: a zip's central directory for torch (some 15,000 files) is about 2 MiB.
MAX_RANGE_BYTES = 32 << 20
# One request's span: zipfile reads in small steps; this many bytes are asked for at a time.
CHUNK_BYTES = 1 << 20


class RemoteFile(Seekable):
    """A seekable, read-only view of `url` (of `size` bytes, as the index lists it) through range requests."""

    def __init__(self, url: str, size: int) -> None:
        super().__init__()
        self.url, self.size, self.position, self.spent = url, size, 0, 0

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:  # a writable buffer (collections.abc.Buffer from 3.12)
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), self.size - self.position)
        if wanted <= 0:
            return 0
        self.spent += wanted
        if self.spent > MAX_RANGE_BYTES:
            raise BadBytes(f"{shown(self.url)}: more than {MAX_RANGE_BYTES >> 20} MiB of ranges for one member")
        last = self.position + wanted - 1
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={self.position}-{last}"})
        body = io.BytesIO()
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                if response.status != 206:
                    raise BadBytes(f"{shown(self.url)}: the server ignores range requests — not read whole")
                _read_bounded(response, shown(self.url), wanted, PAGE_DEADLINE_S, body)
        except (urllib.error.URLError, OSError) as exc:
            raise ToolFailure(f"cannot read {shown(self.url)}: {shown(getattr(exc, 'reason', exc))}") from None
        data = body.getvalue()
        if len(data) != wanted:
            raise BadBytes(f"{shown(self.url)}: {len(data)} bytes for a range of {wanted}")
        view[: len(data)] = data
        self.position += len(data)
        return len(data)


def remote_metadata(url: str, size: int, limit: int = 1 << 20) -> bytes:
    """The METADATA of the wheel at `url` (its one top-level `*.dist-info/METADATA`), read by ranges: at most
    `limit` bytes of it."""
    stream = io.BufferedReader(RemoteFile(url, size), buffer_size=CHUNK_BYTES)
    try:
        with zipfile.ZipFile(stream) as z:
            names = [n for n in z.namelist() if n.count("/") == 1 and n.split("/")[0].endswith(".dist-info")]
            found = [n for n in names if n.endswith("/METADATA")]
            if len(found) != 1:
                raise BadBytes(f"{shown(url)}: {len(found)} dist-info METADATA files, not one — refused")
            return read_member(z, found[0], limit)
    except (zipfile.BadZipFile, KeyError, EOFError, ValueError) as exc:
        raise BadBytes(f"{shown(url)}: no readable METADATA ({shown(exc)})") from None
