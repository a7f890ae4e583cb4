"""nox itself never stops on a broken matrix.yaml: the sessions are listed, those that need no matrix run, and those
that do let the engine name the problem at its place (exit 2)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import REPO

BROKEN: dict[str, Callable[[Path], None]] = {
    "not UTF-8": lambda path: path.write_bytes(b"\xe9"),
    "not YAML": lambda path: path.write_text("python: [3.12\n"),
    "empty": lambda path: path.write_text(""),
    "a directory": lambda path: path.mkdir(),
    "a link to nothing": lambda path: path.symlink_to(path.parent / "nowhere.yaml"),
    "missing": lambda path: None,
}


def _project(root: Path, *names: str) -> Path:
    for name in ("noxfile.py", "pyproject.toml", "constraints.txt", "src", *names):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
        else:
            shutil.copy2(source, root / name)
    return root


def _nox(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), *args], capture_output=True,
                          text=True, cwd=root, timeout=600)  # fmt: skip


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_nox_lists_every_session_whatever_matrix_yaml_is(kind: str, tmp_path: Path) -> None:
    root = _project(tmp_path)
    BROKEN[kind](root / "matrix.yaml")
    listed = _nox(root, "-l")
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    sessions = {line.split()[1] for line in listed.stdout.splitlines() if line.startswith(("* ", "- "))}
    assert {"tests", "lint", "image", "plan", "build-cuda11", "build-cuda12", "build-cuda13"} <= sessions


@pytest.mark.slow
def test_a_session_that_needs_the_matrix_names_its_problem(tmp_path: Path) -> None:
    root = _project(tmp_path, "recipes", "templates")
    BROKEN["not UTF-8"](root / "matrix.yaml")
    planned = _nox(root, "-s", "plan")
    assert planned.returncode == 2, planned.stderr[-2000:]
    assert "matrix.yaml:1:1: byte 0xe9 is not UTF-8 text — save the file as UTF-8" in planned.stderr
    assert "Traceback" not in planned.stderr
