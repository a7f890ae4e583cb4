"""Files fetched from the network (NVIDIA's archives, sdists): downloaded whole or not at all, their sha256,
and unpacked without letting a member write outside the target folder."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

from .errors import ToolFailure

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


def unpack(archive: Path, into: Path) -> Path:
    """Unpack a .zip or a tar archive (any compression) into `into`, refusing members that would land outside
    it; returns its one top folder, as NVIDIA's archives and sdists have, else `into`."""
    into.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            for member in z.namelist():
                path = PurePosixPath(member)
                if path.is_absolute() or ".." in path.parts:
                    raise ToolFailure(f"{archive.name}: unsafe member {member!r} — refused")
            z.extractall(into)
    else:
        with tarfile.open(archive) as t:
            try:
                t.extractall(into, filter="data")
            except tarfile.FilterError as exc:
                raise ToolFailure(f"{archive.name}: {exc} — refused") from None
    tops = list(into.iterdir())
    return tops[0] if len(tops) == 1 and tops[0].is_dir() else into
