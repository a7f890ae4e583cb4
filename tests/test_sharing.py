"""When the newest Python's smoke machine takes what pip installed on the oldest's (smoke/sharing.py): only where
the same pip would install the same wheel files there, and the --target folders only where none of them writes a
script. The machines are stand-ins holding what a real one learns making its venvs (its pip, its CPython release);
test_layouts.py holds the copy and the folders against pip's own installs on the other Python."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from wheelfactory.binaries.wheelfile import WheelMetadata
from wheelfactory.smoke.sharing import differs_by_python, sharing

from .wheelbytes import make_wheel

PLATFORM = "manylinux_2_28_x86_64"


def _machine(python: str, version: str, pip: str | None = "pip-25.3", torch_pins: list[str] | None = None) -> Any:
    return SimpleNamespace(python=python, version=version, pip=pip, torch_pins=torch_pins or [])


def _requirements(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        make_wheel(folder, name)
    return folder


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    return make_wheel(
        tmp_path,
        f"ctlib_cuda12x-0.5.0-py3-none-{PLATFORM}.whl",
        {"ctlib/__init__.py": b""},
        metadata="Requires-Python: >=3.9\n",
    )


def test_the_same_requirement_wheels_and_pip_share_the_venvs_and_the_folders(tmp_path: Path, wheel: Path) -> None:
    requirements = _requirements(tmp_path / "r", "packaging-26.4-py3-none-any.whl")
    found: dict[str, Path | None] = {"3.10": requirements, "3.13": requirements}
    shared = sharing(WheelMetadata.read(wheel), _machine("3.10", "3.10.13"), _machine("3.13", "3.13.0"), found)
    assert shared is not None and shared.folders
    assert shared.check.ok
    assert "pip-25.3" in shared.check.detail and "packaging-26.4-py3-none-any.whl" in shared.check.detail
    assert "py3-none-manylinux_2_28_x86_64 admit CPython 3.13.0" in shared.check.detail


@pytest.mark.parametrize(
    ("first", "other", "found_other", "why"),
    [
        (
            _machine("3.10", "3.10.13"),
            _machine("3.13", "3.13.0"),
            ["numpy-2.2.0-cp313-cp313-linux_x86_64.whl"],
            "files",
        ),
        (_machine("3.10", "3.10.13"), _machine("3.13", "3.13.0", pip="pip-24.2"), None, "another pip"),
        (_machine("3.10", "3.10.13", pip=None), _machine("3.13", "3.13.0", pip=None), None, "pip unknown"),
        (_machine("3.10", "3.10.13"), _machine("3.13", "3.13.0", torch_pins=["torch==2.11.0"]), None, "torch"),
    ],
)
def test_anything_else_installs_with_pip_on_each_python(
    tmp_path: Path, wheel: Path, first: Any, other: Any, found_other: list[str] | None, why: str
) -> None:
    ours = _requirements(tmp_path / "ours", "packaging-26.4-py3-none-any.whl")
    theirs = _requirements(tmp_path / "theirs", *found_other) if found_other else ours
    assert sharing(WheelMetadata.read(wheel), first, other, {first.python: ours, other.python: theirs}) is None, why


def test_a_wheel_that_does_not_admit_the_python_installs_with_pip_there_which_refuses_it(tmp_path: Path) -> None:
    """pip checks Requires-Python against the interpreter's own release, and the tags against what it supports."""
    capped = make_wheel(tmp_path, f"a-1.0-py3-none-{PLATFORM}.whl", metadata="Requires-Python: >=3.9,<3.13\n")
    found: dict[str, Path | None] = {"3.10": None, "3.13": None}
    assert sharing(WheelMetadata.read(capped), _machine("3.10", "3.10.13"), _machine("3.13", "3.13.0"), found) is None
    patch = make_wheel(tmp_path, f"b-1.0-py3-none-{PLATFORM}.whl", metadata="Requires-Python: <3.13.1\n")
    assert sharing(WheelMetadata.read(patch), _machine("3.10", "3.10.13"), _machine("3.13", "3.13.5"), found) is None
    assert (
        sharing(WheelMetadata.read(patch), _machine("3.10", "3.10.13"), _machine("3.13", "3.13.0"), found) is not None
    )
    abi3 = make_wheel(tmp_path, f"c-1.0-cp311-abi3-{PLATFORM}.whl")
    found = {"3.10": None, "3.11": None, "3.12": None, "3.13": None}
    assert sharing(WheelMetadata.read(abi3), _machine("3.12", "3.12.1"), _machine("3.10", "3.10.13"), found) is None
    assert sharing(WheelMetadata.read(abi3), _machine("3.11", "3.11.7"), _machine("3.13", "3.13.0"), found) is not None


def test_a_wheel_that_writes_a_script_or_a_header_shares_its_venvs_but_not_its_folders(
    tmp_path: Path, wheel: Path
) -> None:
    for folder in ("s", "h", "e", "p"):
        (tmp_path / folder).mkdir()
    scripts = make_wheel(tmp_path / "s", "tool-1.0-py3-none-any.whl", {"tool-1.0.data/scripts/tool": b"#!python\n"})
    header = make_wheel(tmp_path / "h", "hdr-1.0-py3-none-any.whl", {"hdr-1.0.data/headers/hdr.h": b"int f();\n"})
    entry = make_wheel(
        tmp_path / "e",
        "cli-1.0-py3-none-any.whl",
        {"cli-1.0.dist-info/entry_points.txt": b"[console_scripts]\ncli = cli:main\n"},
    )
    plugin = make_wheel(
        tmp_path / "p",
        "plugin-1.0-py3-none-any.whl",
        {"plugin-1.0.dist-info/entry_points.txt": b"[pytest11]\nplugin = plugin\n"},
    )
    assert differs_by_python(scripts) and differs_by_python(header) and differs_by_python(entry)
    assert not differs_by_python(plugin) and not differs_by_python(wheel)
    for requirement in (scripts, header, entry):
        found: dict[str, Path | None] = {"3.10": requirement.parent, "3.13": requirement.parent}
        shared = sharing(WheelMetadata.read(wheel), _machine("3.10", "3.10.13"), _machine("3.13", "3.13.0"), found)
        assert shared is not None and not shared.folders, requirement.name
    found = {"3.10": plugin.parent, "3.13": plugin.parent}
    shared = sharing(WheelMetadata.read(wheel), _machine("3.10", "3.10.13"), _machine("3.13", "3.13.0"), found)
    assert shared is not None and shared.folders
