"""Wheels as pip resolves them, fetched side by side: pip's resolver picks the files (`pip install --dry-run
--report`: each one's URL and the index's sha256; each wheel's METADATA read through a range request where the index
serves no metadata file, as PyPI serves none for NVIDIA's), and each file the cache does not hold yet is downloaded
once, DOWNLOAD_WORKERS at a time, through the archive layer's bounds (size, time,
a partial file renamed into place when whole), checked against the index's sha256 and sealed. A single `pip
download` fetches one file after another; NVIDIA's toolkit is a dozen wheels of up to 400 MiB.

A folder many processes share (the cache's) comes with its lock: held while files are written into it, one process
at a time, not while pip resolves, which only reads the index — the smoke's four resolutions (NVIDIA's wheels at
the floors and the newest, each Python's other requirements) go to the index side by side.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import tempfile
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from .. import host
from ..errors import ToolFailure
from ..untrusted import archives
from ..untrusted.cache import seal, sealed_sha256
from ..untrusted.shown import shown

DOWNLOAD_WORKERS = 4  # files fetched at once: a few connections fill the link without crowding the index
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SCHEMES = ("https", "http", "file")  # those pip fetches from: an index, a mirror, a local folder
# How pip says the network failed it, its own retries spent (pip >= 25.2 names the error; older ones do not): not
# the index's answer nor the requirements. An index page pip cannot fetch it only reports as "no versions".
_PIP_NETWORK_FAILURE = re.compile(
    r"^error: (?:connection-failed|connection-timeout|proxy-connection-failed|incomplete-download)$"
    r"|Connection broken|Read timed out|Max retries exceeded",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Resolved:
    """One file pip's resolver picked: where from, as what, and the sha256 the index gave for it (None where the
    index gave none, as a local folder of find-links does not)."""

    url: str
    filename: str
    sha256: str | None


def pip_download(
    reqs: list[str],
    options: list[str],
    dest: Path,
    what: str,
    pins: list[str] | None = None,
    lock: AbstractContextManager[object] | None = None,
) -> list[Path]:
    """The wheels pip resolves for `reqs` (and what they require, unless `options` say --no-deps) on the
    interpreter and platforms `options` name, constrained by `pins`: in `dest`, each sealed, under `lock` (the
    shared folder's). A file already there, intact and of the index's sha256, is kept."""
    dest.mkdir(parents=True, exist_ok=True)
    picked = resolve(reqs, options, what, pins)
    with lock or nullcontext():
        wanted = [r for r in picked if r.sha256 is None or sealed_sha256(dest / r.filename) != r.sha256]
        host.side_by_side((functools.partial(_fetch, r, dest) for r in wanted), DOWNLOAD_WORKERS)
    return sorted({dest / r.filename for r in picked})


def _fetch(resolved: Resolved, dest: Path) -> None:
    target = archives.download(resolved.url, dest / resolved.filename, resolved.sha256)
    seal(target, resolved.sha256)


def resolve(reqs: list[str], options: list[str], what: str, pins: list[str] | None = None) -> list[Resolved]:
    """What pip's resolver picks for `reqs` (binary wheels only; nothing installed here counts), read off its
    installation report."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--only-binary=:all:"]
        cmd += ["--quiet", "--report", str(report), "--progress-bar", "off", "--disable-pip-version-check", *options]
        # Without it pip downloads every wheel whole to read its METADATA (900 MB for cuBLAS and NCCL on aarch64),
        # and again here after it.
        cmd += ["--use-feature=fast-deps"]
        if pins:
            (Path(scratch) / "constraints.txt").write_text("\n".join(pins) + "\n")
            cmd += ["--constraint", str(Path(scratch) / "constraints.txt")]
        run = functools.partial(host.run, [*cmd, *reqs], what, network_failure=_PIP_NETWORK_FAILURE)
        host.over_network(run, what)
        try:
            installs = json.loads(report.read_text(encoding="utf-8"))["install"]
            picked = [_resolved(item["download_info"]) for item in installs]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ToolFailure(f"{what}: pip's report cannot be read ({shown(exc)})") from None
    if not picked:
        raise ToolFailure(f"{what}: pip resolved no files for {' '.join(reqs)}")
    return picked


def _resolved(info: dict[str, Any]) -> Resolved:
    """One entry of pip's report, its URL and hash from the index: a wheel file's, or refused."""
    url = info["url"]
    hashes = info.get("archive_info", {})
    digest = hashes.get("hashes", {}).get("sha256") if isinstance(hashes, dict) else None
    if not isinstance(url, str) or urlsplit(url).scheme not in _SCHEMES:
        raise ToolFailure(f"pip resolved {shown(url)}, which is no file an index serves")
    filename = unquote(PurePosixPath(urlsplit(url).path).name)
    if not filename.endswith(".whl") or archives.member_problem(filename) or "/" in filename:
        raise ToolFailure(f"pip resolved {shown(url)}, which names no wheel file")
    if digest is not None and not (isinstance(digest, str) and _SHA256.fullmatch(digest.lower())):
        raise ToolFailure(f"the index gives {shown(filename)} the sha256 {shown(digest)}, which is none")
    return Resolved(url, filename, digest.lower() if isinstance(digest, str) else None)
