"""A package index's project page, read as bytes the factory did not write: PEP 691 JSON or PEP 503 HTML.

The one reader of both for the build's sdist and NVIDIA-wheel lookups (sources.py) and for `nox -s facts`
(facts/index.py). The page's size and time are bounded where it is fetched (archives.read_page); here its
shape is checked: every file entry has a filename and a url, every link is a URL urllib can join to the page.
What is not is refused with BadBytes naming the page; the caller decides what that means.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin

from ..errors import BadBytes
from .shown import shown

PEP691 = "application/vnd.pypi.simple.v1+json"


def absolute(page: str, link: str) -> str:
    """`link` made absolute against the page; one urllib cannot parse (a bracket where no IPv6 host can be) refuses
    the page."""
    try:
        return urljoin(page, link)
    except ValueError as exc:
        raise BadBytes(f"{shown(page)} links {shown(link)}, which is no URL ({shown(exc)}) — refused") from None


def pep691_files(page: str, body: bytes) -> list[dict[str, object]]:
    """The file entries of a PEP 691 JSON page, each with a str `filename` and a str `url` made absolute against
    the page; the rest of an entry as the page gives it (untrusted: check each key's type before use)."""
    try:
        loaded = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise BadBytes(f"{shown(page)}: not a PEP 691 project page ({shown(exc)}) — refused") from None
    files = loaded.get("files") if isinstance(loaded, dict) else None
    if not isinstance(files, list) or not all(
        isinstance(f, dict) and isinstance(f.get("filename"), str) and isinstance(f.get("url"), str) for f in files
    ):
        raise BadBytes(f"{shown(page)}: a PEP 691 page whose files lack a filename or url — refused")
    return [{**entry, "url": absolute(page, entry["url"])} for entry in files]


class _Links(HTMLParser):
    """The href of every <a> of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.links.append(href)


def pep503_links(page: str, body: bytes) -> list[str]:
    """The absolute URL (fragment dropped) of every link of a PEP 503 HTML page."""
    parser = _Links()
    try:
        parser.feed(body.decode("utf-8", errors="replace"))
    except AssertionError as exc:  # html.parser's way of refusing some malformed markup (`<![` …)
        raise BadBytes(f"{shown(page)}: not an HTML project page ({shown(exc)}) — refused") from None
    return [absolute(page, urldefrag(href)[0]) for href in parser.links]
