"""Every bad input in tests/bad_inputs/cases prints its exact file:line:col message, exits 2, writes nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from wheelfactory.cli import main

CASES = Path(__file__).parent / "bad_inputs"
EXPECTED: dict[str, list[str]] = yaml.safe_load((CASES / "expected.yaml").read_text(encoding="utf-8"))


def _install(case: Path, root: Path) -> None:
    target = root / "matrix.yaml" if case.stem.startswith("matrix-") else root / "recipes/cuprobe/recipe.yaml"
    shutil.copy(case, target)


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_corpus_is_large_and_fully_specified() -> None:
    cases = sorted(p.stem for p in (CASES / "cases").glob("*.yaml"))
    assert len(cases) >= 20
    assert cases == sorted(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("command", [["render"], ["plan"]])
def test_bad_input_is_reported_at_its_place(
    case: str, command: list[str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--root", str(project), "render"]) == 0
    before = _snapshot(project / "build")
    _install(CASES / "cases" / f"{case}.yaml", project)
    capsys.readouterr()

    status = main(["--root", str(project), *command])

    captured = capsys.readouterr()
    assert status == 2
    assert captured.err.splitlines() == EXPECTED[case]
    assert captured.out == ""
    assert _snapshot(project / "build") == before


def test_cli_process_exits_2_without_traceback(project: Path) -> None:
    _install(CASES / "cases" / "matrix-toolkit-number.yaml", project)
    result = subprocess.run(
        [sys.executable, "-m", "wheelfactory", "--root", str(project), "render"], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == EXPECTED["matrix-toolkit-number"]
    assert not (project / "build").exists()
