"""The smoke's runtime sites (NVIDIA's wheels at the floors and at the newest): each wheel unpacked once whichever
sites hold it, each site made of links to those files — and each site, file for file, what pip installs from the
same wheels into one folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from wheelfactory.smoke.nvidia import runtime_site, unpacked_once
from wheelfactory.untrusted import cache
from wheelfactory.untrusted.cache import SEAL

from .wheelbytes import host_library, make_wheel

# What pip writes of its own into a distribution's .dist-info (and RECORD, which it rewrites to name them): not the
# wheel's files.
PIPS_OWN = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"}


def _nvidia_wheel(folder: Path, name: str, version: str, library: str) -> Path:
    """A CUDA 13 NVIDIA wheel as NVIDIA lays it out: its library (real ELF) under nvidia/cu13/lib, which every
    such wheel shares, and the namespace's __init__.py, which several ship."""
    files = {f"nvidia/cu13/lib/{library}": host_library(), "nvidia/__init__.py": b"", "nvidia/cu13/__init__.py": b""}
    distribution = name.replace("-", "_")
    return make_wheel(folder, f"{distribution}-{version}-py3-none-manylinux_2_27_x86_64.whl", files)


def _tree(root: Path, *, pips_own: bool) -> dict[str, bytes]:
    """Every file under `root` by its place, with its bytes; the cache's seal and, unless asked, pip's own left
    out."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file()
        and path.name != SEAL
        and (pips_own or not (path.parent.name.endswith(".dist-info") and path.name in PIPS_OWN))
    }


def test_each_nvidia_wheel_is_laid_out_once_and_each_site_is_what_pip_installs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHEELFACTORY_CACHE", str(tmp_path / "cache"))
    (tmp_path / "wheels").mkdir()
    runtime = _nvidia_wheel(tmp_path / "wheels", "nvidia-cuda-runtime", "13.0.96", "libcudart.so.13")
    floors = (runtime, _nvidia_wheel(tmp_path / "wheels", "nvidia-cublas", "13.0.0.19", "libcublas.so.13"))
    newest = (runtime, _nvidia_wheel(tmp_path / "wheels", "nvidia-cublas", "13.1.0.3", "libcublas.so.13"))
    toolkit = SimpleNamespace(site=tmp_path / "toolkit-13.0" / "site")
    sites = {versions: runtime_site(toolkit, wheels) for versions, wheels in (("floors", floors), ("newest", newest))}  # type: ignore[arg-type]
    assert sites["floors"] != sites["newest"]

    # The runtime both sets hold at one version is one file on disk, in both sites and where it was unpacked.
    library = "nvidia/cu13/lib/libcudart.so.13"
    inodes = {os.stat(place / library).st_ino for place in (*sites.values(), unpacked_once(runtime))}
    assert len(inodes) == 1
    cublas = {os.stat(site / "nvidia/cu13/lib/libcublas.so.13").st_ino for site in sites.values()}
    assert len(cublas) == 2  # two versions: two files

    for versions, wheels in (("floors", floors), ("newest", newest)):
        installed = tmp_path / f"pip-{versions}"
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-compile"]
        subprocess.run([*pip, "--target", str(installed), *map(str, wheels)], check=True, capture_output=True)
        ours, pips = _tree(sites[versions], pips_own=True), _tree(installed, pips_own=False)
        assert ours.keys() - pips.keys() == {
            f"{w.name.split('-')[0]}-{w.name.split('-')[1]}.dist-info/RECORD" for w in wheels
        }
        assert {place: ours[place] for place in pips} == pips, versions
        for place in pips:  # executable where pip made it so, and no more
            assert os.access(sites[versions] / place, os.X_OK) == os.access(installed / place, os.X_OK), place

    # Asked again, a site is reused as it is. A file changed in one (a hard link: in every site that holds it, and
    # where it was unpacked) fails each one's seal: each is laid out again when asked, from the wheel unpacked again.
    assert runtime_site(toolkit, floors) == sites["floors"]  # type: ignore[arg-type]
    (sites["floors"] / library).write_bytes(b"changed")
    cache._checked.clear()  # as a later run finds them: this one found them intact already
    for versions, wheels in (("floors", floors), ("newest", newest)):
        assert (runtime_site(toolkit, wheels) / library).read_bytes() == host_library(), versions  # type: ignore[arg-type]
