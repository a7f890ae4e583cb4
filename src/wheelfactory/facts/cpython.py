"""The CPython releases the pinned cibuildwheel builds for the factory's Linux platforms: its build identifiers
(cp315-manylinux_x86_64), read from its own wheel on the index (resources/build-platforms.toml)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from packaging.version import Version

from ..components import platforms
from ..errors import UserError
from ..untrusted import archives
from .index import wheels

CIBUILDWHEEL = "cibuildwheel"
PLATFORMS_FILE = "cibuildwheel/resources/build-platforms.toml"


def pinned_cibuildwheel(root: Path) -> str:
    """The cibuildwheel version constraints.txt pins."""
    found = re.search(r"^cibuildwheel==([\w.]+)\s*$", (root / "constraints.txt").read_text("utf-8"), re.MULTILINE)
    if found is None:
        raise UserError(f"{root / 'constraints.txt'}: no cibuildwheel==VERSION line — pin the one the factory uses")
    return found.group(1)


def cibuildwheel_pythons(index: str, version: str) -> tuple[list[str], str]:
    """The CPython releases ("3.15") that cibuildwheel `version` builds on every Linux platform of the factory
    (free-threaded builds aside), oldest first, and where that was read."""
    wheel = next((w for w in wheels(index, CIBUILDWHEEL) if str(w.version) == version), None)
    if wheel is None:
        raise UserError(f"cibuildwheel {version} (constraints.txt) is not on {index}")
    with tempfile.TemporaryDirectory() as scratch:
        path = archives.download(wheel.url, Path(scratch) / wheel.filename)
        with archives.opened_zip(path) as (z, _):
            text = archives.read_member(z, PLATFORMS_FILE, 1 << 20).decode("utf-8", errors="replace")
    identifiers = set(re.findall(r'identifier = "cp(\d)(\d+)-([\w]+)"', text))
    linux = [p.identifier for p in platforms().values() if p.identifier.startswith("manylinux_")]
    pythons = {
        f"{major}.{minor}"
        for major, minor, _ in identifiers
        if all((major, minor, identifier) in identifiers for identifier in linux)
    }
    return sorted(pythons, key=Version), f"{PLATFORMS_FILE} of {wheel.filename}"
