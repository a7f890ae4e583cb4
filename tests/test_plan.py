"""`plan` prints the CI job matrix: one job per Python × CUDA × platform cell left after exclusions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from wheelfactory.cli import main
from wheelfactory.components import toolkit_table
from wheelfactory.plan import make_plan

from .conftest import REPO


def _expansion(matrix: dict) -> int:  # type: ignore[type-arg]
    """Count the cells the matrix promises, independently of the engine."""
    count = 0
    for entry in matrix["cuda"]:
        for platform in entry["platforms"]:
            for python in matrix["python"]:
                cell = {"python": python, "cuda": entry["major"], "platform": platform}
                if not any(all(cell[k] == v for k, v in rule.items()) for rule in matrix.get("exclude", [])):
                    count += 1
    return count


def _plan(project: Path, capsys: pytest.CaptureFixture[str]) -> list[dict]:  # type: ignore[type-arg]
    capsys.readouterr()
    assert main(["--root", str(project), "plan"]) == 0
    jobs: list[dict] = json.loads(capsys.readouterr().out)["include"]  # type: ignore[type-arg]
    return jobs


def test_job_count_equals_matrix_expansion(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = _plan(project, capsys)
    matrix = yaml.safe_load((project / "matrix.yaml").read_text())
    assert len(jobs) == _expansion(matrix) == 5 * 3 * 2 + 4 * 2  # 11: no Windows, no 3.14
    assert len({job["id"] for job in jobs}) == len(jobs)


def test_exclusions_shrink_the_plan(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix_path = project / "matrix.yaml"
    matrix = yaml.safe_load(matrix_path.read_text())
    matrix["exclude"].append({"platform": "linux-aarch64", "python": "3.10"})
    matrix_path.write_text(yaml.safe_dump(matrix))
    jobs = _plan(project, capsys)
    assert len(jobs) == _expansion(matrix) == 38 - 3


def test_each_job_names_runner_session_and_arguments(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = _plan(project, capsys)
    job = next(j for j in jobs if j["id"] == "cuprobe-cuda12x-cp312-win_amd64")
    assert job["runner"] == "windows-2022"
    assert job["session"] == "build-cuda12"
    assert job["args"] == ["--recipe", "cuprobe", "--python", "3.12", "--platform", "windows"]
    assert job["command"] == "nox -s build-cuda12 -- --recipe cuprobe --python 3.12 --platform windows"
    arm = next(j for j in jobs if j["id"] == "cuprobe-cuda13x-cp314-manylinux_aarch64")
    assert arm["runner"] == "ubuntu-24.04-arm"


def test_the_offline_matrix_is_the_matrix_with_offline_toolkits() -> None:
    # matrix-offline.yaml must not drift from matrix.yaml: only the toolkit releases may differ, and each of its
    # releases must have an nvcc source that reaches no NVIDIA server.
    project, offline = (yaml.safe_load((REPO / name).read_text()) for name in ("matrix.yaml", "matrix-offline.yaml"))
    for record in (*project["cuda"], *offline["cuda"]):
        record.pop("toolkit")
    assert offline == project
    for variant in make_plan(REPO, REPO / "matrix-offline.yaml").variants:
        assert set(toolkit_table().releases[variant.cuda.toolkit].nvcc) & {"pip", "debian"}, variant.cuda.toolkit
