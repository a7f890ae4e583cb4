"""The stand-in of another variant (smoke's two-variants check) is the wheel renamed by streaming its members
into a new zip, stored: pip must install from it what it installs from the wheel itself, but for the name."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from wheelfactory.binaries.wheelfile import renamed
from wheelfactory.errors import BadBytes

from .wheelbytes import host_library, make_wheel, wheel_files, write_zip

NAME = "shaped_cuda13x-1.0-py3-none-any.whl"

# A package shape the renaming was not written for: a library opened with ctypes, data files, a script pip
# rewrites, an executable bit, a name with a comma (quoted in RECORD).
FILES = {
    "shaped/__init__.py": b"import ctypes, os\nLIB = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib.so'))\n",
    "shaped/lib.so": host_library(),
    "shaped/tool.sh": b"#!/bin/sh\necho tool\n",
    "shaped/a,b.txt": b"comma\n",
    "shaped_cuda13x-1.0.data/data/share/shaped/table.csv": b"x,y\n1,2\n",
    "shaped_cuda13x-1.0.data/scripts/shaped-run": b"#!python\nimport shaped\n",
}


def _installed(wheel: Path, into: Path) -> dict[str, tuple[bytes, int]]:
    """What pip installs of `wheel` with --target: each file's bytes and mode, but for what names the wheel's own
    file (RECORD, direct_url.json) and the distribution's name (the .dist-info folder, METADATA's Name)."""
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(into)]
    subprocess.run([*command, str(wheel)], check=True)
    installed = {}
    for path in sorted(into.rglob("*")):
        if path.is_file() and path.name not in ("RECORD", "direct_url.json"):
            name = re.sub(r"^shaped_cuda1\dx-", "shaped_cudaNNx-", str(path.relative_to(into)))
            data = re.sub(rb"(?m)^Name: .*$", b"Name: -", path.read_bytes()) if name.endswith("/METADATA") else None
            installed[name] = (data or path.read_bytes(), path.stat().st_mode)
    return installed


def test_a_renamed_wheel_installs_as_the_wheel_itself_does(tmp_path: Path) -> None:
    members = wheel_files(NAME, FILES)
    wheel = tmp_path / NAME
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            info = zipfile.ZipInfo(member, (2024, 1, 2, 3, 4, 6))
            info.external_attr = (stat.S_IFREG | (0o755 if member.endswith((".sh", "shaped-run")) else 0o644)) << 16
            archive.writestr(info, data)
    (tmp_path / "renamed").mkdir()
    made = renamed(wheel, "shaped-cuda12x", tmp_path / "renamed")

    assert made.name == "shaped_cuda12x-1.0-py3-none-any.whl"
    # wheel's own reader checks every member against RECORD as it unpacks
    subprocess.run(
        [sys.executable, "-m", "wheel", "unpack", "--dest", str(tmp_path / "checked"), str(made)], check=True
    )
    assert _installed(made, tmp_path / "again") == _installed(wheel, tmp_path / "original")
    metadata = (tmp_path / "again/shaped_cuda12x-1.0.dist-info/METADATA").read_text()
    assert "\nName: shaped-cuda12x\n" in metadata
    assert os.access(tmp_path / "again/shaped/tool.sh", os.X_OK)
    loaded = subprocess.run(
        [sys.executable, "-c", "import shaped; print(shaped.LIB.touch())"],
        env={**os.environ, "PYTHONPATH": str(tmp_path / "again")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout == "0\n"


def test_a_wheel_of_two_dist_info_folders_is_not_renamed(tmp_path: Path) -> None:
    members = wheel_files(NAME, FILES)
    members["other-1.0.dist-info/METADATA"] = b"Name: other\n"
    wheel = write_zip(tmp_path / NAME, members)
    with pytest.raises(BadBytes, match=r"2 \.dist-info folders"):
        renamed(wheel, "shaped-cuda12x", tmp_path)
    assert list(tmp_path.iterdir()) == [wheel]


def test_the_copy_is_stored_and_the_original_left_alone(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, NAME, FILES)
    before = wheel.read_bytes()
    (tmp_path / "out").mkdir()
    made = renamed(wheel, "shaped-cuda12x", tmp_path / "out")
    assert {i.compress_type for i in zipfile.ZipFile(made).infolist()} == {zipfile.ZIP_STORED}
    assert wheel.read_bytes() == before
