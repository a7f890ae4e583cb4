"""A project's files on the package index (PEP 691 JSON) and a wheel's metadata (PEP 658's file where the index
serves one, else the wheel's own METADATA by range requests): every page and file read within the untrusted
layer's bounds, and every name from it shown escaped."""

from __future__ import annotations

import email.parser
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message
from urllib.parse import urljoin, urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..errors import BadBytes, ToolFailure
from ..untrusted import archives
from ..untrusted.index_pages import PEP691, pep691_files
from ..untrusted.ranges import remote_metadata
from ..untrusted.shown import shown

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
    request = urllib.request.Request(url, headers={"Accept": PEP691})
    try:
        body, kind = archives.read_page(request)
    except (urllib.error.URLError, OSError) as exc:
        raise ToolFailure(f"cannot read {shown(url)}: {shown(getattr(exc, 'reason', exc))}") from None
    if kind != PEP691:
        raise ToolFailure(f"{shown(url)} answered {shown(kind)}, not PEP 691 JSON — is it a package index?")
    return body


def _wheel(entry: dict[str, object]) -> Wheel | None:
    """The wheel a PEP 691 file entry describes; None for an sdist, a yanked file or a name that is no wheel's."""
    name, url = str(entry["filename"]), str(entry["url"])
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
    return [wheel for entry in pep691_files(page, _get(page)) if (wheel := _wheel(entry)) is not None]


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
