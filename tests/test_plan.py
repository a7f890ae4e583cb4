"""`plan` prints the CI job matrix: one job per Python × CUDA × platform cell left after exclusions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from wheelfactory.cli import main
from wheelfactory.components import toolkit_table
from wheelfactory.plan import make_plan

from .conftest import REPO, SOURCES, add_source


def _expansion(matrix: dict, platforms: list[str] | None = None) -> int:  # type: ignore[type-arg]
    """Count the cells the matrix promises (on `platforms` only, when given), independently of the engine."""
    count = 0
    for entry in matrix["cuda"]:
        for platform in entry["platforms"]:
            if platforms is not None and platform not in platforms:
                continue
            for python in matrix["python"]:
                cell = {"python": python, "cuda": entry["major"], "platform": platform}
                rules = [{k: v for k, v in rule.items() if k != "reason"} for rule in matrix.get("exclude", [])]
                if not any(all(cell[k] == v for k, v in rule.items()) for rule in rules):
                    count += 1
    return count


def _by_recipe(jobs: list[dict]) -> dict[str, int]:  # type: ignore[type-arg]
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job["recipe"]] = counts.get(job["recipe"], 0) + 1
    return counts


# What each recipe builds on: cuprobe everywhere, the upstream packages on Linux (their recipes say why).
LINUX = ["linux-x86_64", "linux-aarch64"]
RECIPE_PLATFORMS: dict[str, list[str] | None] = {"cuprobe": None, "cuvec": LINUX, "pycuda": LINUX, "pyvkfft": LINUX}


def _plan(project: Path, capsys: pytest.CaptureFixture[str], kind: str = "smoke") -> list[dict]:  # type: ignore[type-arg]
    capsys.readouterr()
    assert main(["--root", str(project), "plan"]) == 0
    jobs: list[dict] = json.loads(capsys.readouterr().out)[kind]["include"]  # type: ignore[type-arg]
    return jobs


def test_one_wheel_per_matrix_cell(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheels = _plan(project, capsys)
    matrix = yaml.safe_load((project / "matrix.yaml").read_text())
    expected = {name: _expansion(matrix, platforms) for name, platforms in RECIPE_PLATFORMS.items()}
    assert expected == {
        "cuprobe": 6 * 3 * 2 + 4 * 3,  # 3.14 and 3.15 × CUDA 11 excluded
        "cuvec": 6 * 2 * 2 + 4 * 2,  # Linux only
        "pycuda": 32,
        "pyvkfft": 32,
    }
    assert _by_recipe(wheels) == expected
    assert len({job["id"] for job in wheels}) == len(wheels)


def test_one_build_job_per_cuda_major_and_platform(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    builds = _plan(project, capsys, "build")
    platforms = {
        11: ["manylinux_x86_64", "manylinux_aarch64", "win_amd64"],
        12: ["manylinux_x86_64", "manylinux_aarch64", "win_amd64"],
        13: ["manylinux_x86_64", "manylinux_aarch64", "win_amd64"],
    }
    expected = [f"cuprobe-cuda{major}x-{platform}" for major, names in platforms.items() for platform in names]
    expected += [
        f"{recipe}-cuda{major}x-{platform}"
        for recipe in ("cuvec", "pycuda", "pyvkfft")
        for major in platforms
        for platform in ("manylinux_x86_64", "manylinux_aarch64")
    ]
    assert sorted(job["id"] for job in builds) == sorted(expected)
    wheels = _plan(project, capsys)
    for build in builds:
        mine = [w for w in wheels if w["build_job"] == build["id"]]
        assert sorted(w["python"] for w in mine) == sorted(build["pythons"])


def test_exclusions_shrink_the_plan(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix_path = project / "matrix.yaml"
    matrix = yaml.safe_load(matrix_path.read_text())
    matrix["exclude"].append({"platform": "linux-aarch64", "python": "3.10"})
    matrix_path.write_text(yaml.safe_dump(matrix))
    jobs = _plan(project, capsys)
    assert _by_recipe(jobs) == {"cuprobe": 48 - 3, "cuvec": 32 - 3, "pycuda": 32 - 3, "pyvkfft": 32 - 3}
    assert _by_recipe(jobs) == {name: _expansion(matrix, platforms) for name, platforms in RECIPE_PLATFORMS.items()}


def test_each_job_names_runner_session_and_arguments(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    builds = {job["id"]: job for job in _plan(project, capsys, "build")}
    windows = builds["cuprobe-cuda12x-win_amd64"]
    assert windows["runner"] == "windows-2022" and windows["session"] == "build-cuda12"
    pythons = [arg for p in ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15") for arg in ("--python", p)]
    assert windows["args"] == ["--recipe", "cuprobe", *pythons, "--platform", "windows"]
    assert builds["cuprobe-cuda13x-manylinux_aarch64"]["runner"] == "ubuntu-24.04-arm"
    wheel = next(j for j in _plan(project, capsys) if j["id"] == "cuprobe-cuda12x-cp312-win_amd64")
    assert wheel["smoke_runner"] == "windows-2025" and wheel["build_job"] == "cuprobe-cuda12x-win_amd64"
    assert wheel["command"] == "nox -s build-cuda12 -- --recipe cuprobe --python 3.12 --platform windows"
    assert wheel["wheel_glob"] == "cuprobe_cuda12x-*-cp312-cp312-win_amd64.whl"
    assert wheel["setup_python"] == "3.12"
    oldest = next(j for j in _plan(project, capsys) if j["id"] == "cuprobe-cuda12x-cp310-win_amd64")
    assert oldest["setup_python"] == "3.10\n3.12"  # the wheel's Python for its smoke tiers, the factory's for nox


def test_the_offline_matrix_is_the_matrix_with_offline_toolkits() -> None:
    # matrix-offline.yaml must not drift from matrix.yaml: only the toolkit releases may differ, and each of its
    # releases must have an nvcc source that reaches no NVIDIA server.
    project, offline = (yaml.safe_load((REPO / name).read_text()) for name in ("matrix.yaml", "matrix-offline.yaml"))
    for record in (*project["cuda"], *offline["cuda"]):
        record.pop("toolkit")
    assert offline == project
    for variant in make_plan(REPO, REPO / "matrix-offline.yaml").variants:
        assert set(toolkit_table().releases[variant.cuda.toolkit].nvcc) & {"pip", "debian"}, variant.cuda.toolkit


@pytest.mark.parametrize(("source", "tag"), [("stablelib", "cp310-abi3"), ("ctlib", "py3-none")])
def test_a_wheel_for_every_python_is_one_job_per_major_and_platform(
    project: Path, capsys: pytest.CaptureFixture[str], source: str, tag: str
) -> None:
    add_source(project, source)
    recipe_path = project / f"recipes/{source}/recipe.yaml"
    recipe_path.write_text(recipe_path.read_text().replace("platforms: [linux-x86_64]\n", ""))
    matrix = yaml.safe_load((project / "matrix.yaml").read_text())
    wheels = [job for job in _plan(project, capsys) if job["recipe"] == source]
    expected = {(entry["major"], platform) for entry in matrix["cuda"] for platform in entry["platforms"]}
    assert sorted((job["cuda"], job["platform"]) for job in wheels) == sorted(expected)
    excluded = [(rule["python"], rule["cuda"]) for rule in matrix["exclude"]]
    served = {entry["major"]: [p for p in matrix["python"] if (p, entry["major"]) not in excluded]
              for entry in matrix["cuda"]}  # fmt: skip
    for job in wheels:
        assert job["python"] == "3.10" and job["pythons"] == served[job["cuda"]], job
        assert f"-{tag}-" in job["wheel_glob"], job["wheel_glob"]
        # Its smoke tiers take the oldest and the newest Python it serves: both are asked for.
        asked = f"--python 3.10 --python {served[job['cuda']][-1]} "
        assert job["command"].endswith(asked + " ".join(_platform_args(job["platform"]))), job["command"]
        # The smoke runner gets both, and the factory's own Python last (setup-python's default).
        assert job["setup_python"].split("\n") == ["3.10", served[job["cuda"]][-1], "3.12"]
    builds = [job for job in _plan(project, capsys, "build") if job["recipe"] == source]
    assert sorted(job["pythons"] for job in builds) == sorted(["3.10", served[c][-1]] for c, _ in expected)


def test_a_real_library_opened_with_ctypes_is_one_job_per_major_it_supports(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cufinufft's recipe (its PyPI sdist; tests/test_cufinufft_build.py builds it): CUDA 12 on Linux x86_64, its
    platforms, where the plan has a CUDA 12 with that platform — one py3-none wheel, whatever the matrix's
    Pythons."""
    (project / "recipes/cufinufft").mkdir()
    shutil.copy(SOURCES / "cufinufft.recipe.yaml", project / "recipes/cufinufft/recipe.yaml")
    jobs = [job for job in _plan(project, capsys) if job["recipe"] == "cufinufft"]
    assert [(job["cuda"], job["platform"]) for job in jobs] == [(12, "linux-x86_64")]
    assert all("-py3-none-" in job["wheel_glob"] and job["python"] == "3.10" for job in jobs), jobs
    builds = [job for job in _plan(project, capsys, "build") if job["recipe"] == "cufinufft"]
    assert len(builds) == 1


def _platform_args(platform: str) -> list[str]:
    return {"linux-x86_64": ["--platform", "linux", "--arch", "x86_64"],
            "linux-aarch64": ["--platform", "linux", "--arch", "aarch64"],
            "windows-amd64": ["--platform", "windows"]}[platform]  # fmt: skip
