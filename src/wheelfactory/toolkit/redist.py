"""NVIDIA's redistributable CUDA archives: a release's manifest, and each archive checked against its sha256.

`redistrib_<release>.json` names, per component and platform, the archive's path, size and sha256. The manifest
and the archives are cached; a warm run touches no network. An archive whose sha256 differs from the
manifest's is deleted and refused. WHEELFACTORY_CUDA_REDIST_URL points at a mirror (any URL urllib reads).
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .. import host
from ..components import Placement, toolkit_table
from ..errors import BadBytes, ToolFailure, fetched
from ..untrusted import archives
from ..untrusted.shown import shown


class Unreachable(Exception):
    """The manifest cannot be fetched from here: the caller may try another source."""


@dataclass(frozen=True)
class Archive:
    component: str  # cuda_nvcc
    version: str  # 12.4.131
    relative_path: str
    sha256: str
    url: str


def base_url() -> str:
    url = os.environ.get("WHEELFACTORY_CUDA_REDIST_URL") or toolkit_table().redist.url
    return url if url.endswith("/") else url + "/"


def manifest(release: str, cache: Path) -> dict[str, object]:
    """redistrib_<release>.json, from the cache or the redist URL."""
    name = f"redistrib_{release}.json"
    cached = cache / "redist" / name
    if not cached.is_file():
        try:
            body, _ = archives.read_page(base_url() + name)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Unreachable(f"{base_url()}{name}: {shown(reason)}") from None
        except BadBytes as exc:
            raise Unreachable(str(exc)) from None
        try:
            json.loads(body)
        except ValueError as exc:
            raise Unreachable(f"{base_url()}{name} is not a manifest ({shown(exc)})") from None
        host.write_atomically(cached, body)
    try:
        loaded = json.loads(cached.read_bytes())
    except (ValueError, RecursionError) as exc:
        cached.unlink()
        raise ToolFailure(f"{cached}: a cached manifest that is no JSON ({shown(exc)}) — deleted; run again") from None
    if not isinstance(loaded, dict):
        cached.unlink()
        raise ToolFailure(f"{cached}: a cached manifest that is no JSON object — deleted; run again")
    return loaded


def archive(release_manifest: dict[str, object], component: str, platform: str) -> Archive:
    entry = release_manifest.get(component)
    if not isinstance(entry, dict) or not isinstance(entry.get(platform), dict):
        label = shown(release_manifest.get("release_label", "?"))
        raise ToolFailure(f"NVIDIA's redistrib_{label}.json has no {component} archive for {platform}")
    files = entry[platform]
    fields = {key: files.get(key) for key in ("relative_path", "sha256")}
    if not all(isinstance(value, str) for value in fields.values()) or not isinstance(entry.get("version"), str):
        raise ToolFailure(f"NVIDIA's manifest entry for {component} on {platform} lacks its version, path or sha256")
    relative = str(fields["relative_path"])
    why = archives.member_problem(relative)
    if why:
        raise ToolFailure(f"NVIDIA's manifest names the archive {shown(relative)}, which {why}")
    return Archive(component, str(entry["version"]), relative, str(fields["sha256"]), base_url() + relative)


def fetch(item: Archive, cache: Path) -> Path:
    """The archive, downloaded once into the cache and checked against the manifest's sha256 every time."""
    target = cache / "redist" / PurePosixPath(item.relative_path)
    if not target.is_file():
        with fetched():
            archives.download(item.url, target)
    actual = archives.sha256(target)
    if actual != item.sha256:
        target.unlink()
        raise ToolFailure(
            f"{item.url} has sha256 {actual}, the manifest says {item.sha256} — the download was refused and "
            "deleted; if a mirror serves it, check the mirror"
        )
    return target


def place(unpacked: Path, placements: tuple[Placement, ...], overlay: Path) -> list[str]:
    """Copy the files the placements select from an unpacked archive into the overlay; returns what was placed."""
    placed = []
    files = sorted(p.relative_to(unpacked).as_posix() for p in unpacked.rglob("*") if p.is_file())
    for placement in placements:
        for rel in (f for f in files if placement.selects(f)):
            target = overlay / placement.to / PurePosixPath(rel).name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(unpacked / rel, target)
            placed.append(f"{placement.to}/{target.name}")
    return placed
