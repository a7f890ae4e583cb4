"""A project's files on the package index (PEP 691 JSON) and a wheel's metadata (PEP 658's file where the index
serves one, else the wheel's own METADATA by range requests): every page and file read within the untrusted
layer's bounds, and every name from it shown escaped."""

from __future__ import annotations

import email.parser
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message
from urllib.parse import urljoin, urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..errors import BadBytes, ToolFailure
from ..untrusted import archives
from ..untrusted.ranges import remote_metadata
from ..untrusted.shown import shown

ACCEPT = "application/vnd.pypi.simple.v1+json"
MAX_METADATA_BYTES = 1 << 20  # torch's METADATA is 36 KiB


@dataclass(frozen=True)
class Wheel:
    """One wheel file a project page lists."""

    filename: str
    url: str
    version: Version
    tags: frozenset[str]  # "cp312-cp312-manylinux_2_28_x86_64", one per tag the name compresses
    size: int | None
    metadata_url: str | None  # PEP 658's file, where the index declares one

    def platforms(self) -> set[str]:
        return {tag.rsplit("-", 1)[1] for tag in self.tags}


def _get(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": ACCEPT})
    try:
        body, kind = archives.read_page(request)
    except (urllib.error.URLError, OSError) as exc:
        raise ToolFailure(f"cannot read {shown(url)}: {shown(getattr(exc, 'reason', exc))}") from None
    if kind != ACCEPT:
        raise ToolFailure(f"{shown(url)} answered {shown(kind)}, not PEP 691 JSON — is it a package index?")
    return body


def _wheel(page: str, entry: object) -> Wheel | None:
    """The wheel an entry of a PEP 691 page describes; None for an sdist, a yanked file or a name that is no
    wheel's. An entry without its filename or url is refused (BadBytes naming the page)."""
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("filename"), str)
        or not isinstance(entry.get("url"), str)
    ):
        raise BadBytes(f"{shown(page)}: a file entry without a filename or url — refused")
    try:
        name, url = entry["filename"], urljoin(page, entry["url"])
    except ValueError as exc:  # a bracket where no IPv6 host can be
        raise BadBytes(f"{shown(page)} links {shown(entry['url'])}, which is no URL ({shown(exc)}) — refused") from None
    if entry.get("yanked") or not name.endswith(".whl") or urlsplit(url).scheme not in ("https", "http", "file"):
        return None
    try:
        _, version, _, tags = parse_wheel_filename(name)
    except InvalidWheelFilename:
        return None
    declared = entry.get("core-metadata") or entry.get("data-dist-info-metadata")
    size = entry.get("size")
    return Wheel(
        filename=name,
        url=url,
        version=version,
        tags=frozenset(str(t) for t in tags),
        size=size if isinstance(size, int) and size > 0 else None,
        metadata_url=url + ".metadata" if declared else None,
    )


def wheels(index: str, project: str) -> list[Wheel]:
    """Every wheel of `project` on `index` (final or pre-release, never yanked), as its PEP 691 page lists them."""
    page = urljoin(index, f"{canonicalize_name(project)}/")
    try:
        loaded = json.loads(_get(page))
    except (ValueError, RecursionError) as exc:
        raise BadBytes(f"{shown(page)}: not a PEP 691 project page ({shown(exc)}) — refused") from None
    files = loaded.get("files") if isinstance(loaded, dict) else None
    if not isinstance(files, list):
        raise BadBytes(f"{shown(page)}: a PEP 691 page without its files — refused")
    return [wheel for entry in files if (wheel := _wheel(page, entry)) is not None]


def finals(found: list[Wheel]) -> dict[Version, list[Wheel]]:
    """The wheels of each final release, oldest release first."""
    releases: dict[Version, list[Wheel]] = {}
    for wheel in sorted(found, key=lambda w: w.version):
        if not wheel.version.is_prerelease and not wheel.version.is_devrelease:
            releases.setdefault(wheel.version, []).append(wheel)
    return releases


def metadata(wheel: Wheel) -> Message:
    """The wheel's core metadata: PEP 658's file where the index serves one, else its METADATA by ranges."""
    if wheel.metadata_url is not None:
        try:
            body, _ = archives.read_page(wheel.metadata_url)
        except (urllib.error.URLError, OSError) as exc:
            raise ToolFailure(
                f"cannot read {shown(wheel.metadata_url)}: {shown(getattr(exc, 'reason', exc))}"
            ) from None
    elif wheel.size is not None:
        body = remote_metadata(wheel.url, wheel.size, MAX_METADATA_BYTES)
    else:
        raise BadBytes(f"{shown(wheel.url)}: the index gives neither its metadata file nor its size — not read")
    if len(body) > MAX_METADATA_BYTES:
        raise BadBytes(f"{shown(wheel.filename)}: metadata over {MAX_METADATA_BYTES >> 10} KiB — refused")
    return email.parser.BytesParser().parsebytes(body)


def where(wheel: Wheel) -> str:
    """How a fact read from this wheel's metadata is sourced, for the diff's notes."""
    return f"{wheel.filename} METADATA ({'PEP 658' if wheel.metadata_url else 'range requests on the wheel'})"
