"""Rendering: metadata that packaging accepts, pinned to the committed (reviewed) build/variants files."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from trove_classifiers import classifiers as known_classifiers

from wheelfactory.cli import main

from .conftest import REPO

DISTS = ["cuprobe-cuda11x", "cuprobe-cuda12x", "cuprobe-cuda13x"]
NVIDIA = {
    11: {"nvidia-cuda-runtime-cu11", "nvidia-cuda-nvrtc-cu11", "nvidia-cublas-cu11"},
    12: {"nvidia-cuda-runtime-cu12", "nvidia-cuda-nvrtc-cu12", "nvidia-cublas-cu12"},
    13: {"nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cublas"},
}


@pytest.fixture
def rendered(project: Path) -> Path:
    assert main(["--root", str(project), "render"]) == 0
    return project / "build" / "variants"


def _pyproject(out: Path, dist: str) -> dict:  # type: ignore[type-arg]
    with (out / dist / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def test_renders_one_pyproject_per_cuda_major(rendered: Path) -> None:
    assert sorted(p.name for p in rendered.iterdir()) == DISTS


@pytest.mark.parametrize("dist", DISTS)
@pytest.mark.parametrize("name", ["pyproject.toml", "_cuda_variant.py"])
def test_matches_reviewed_golden_file(rendered: Path, dist: str, name: str) -> None:
    golden = REPO / "build" / "variants" / dist / name
    assert (rendered / dist / name).read_bytes() == golden.read_bytes()


@pytest.mark.parametrize("major", [11, 12, 13])
def test_metadata_is_valid_and_names_the_right_wheels(rendered: Path, major: int) -> None:
    project = _pyproject(rendered, f"cuprobe-cuda{major}x")["project"]
    assert canonicalize_name(project["name"]) == f"cuprobe-cuda{major}x"
    Version(project["version"])
    assert SpecifierSet(project["requires-python"]).contains("3.10")
    requirements = [Requirement(line) for line in project["dependencies"]]
    assert {r.name for r in requirements} == NVIDIA[major]
    for r in requirements:
        # Floor from the matrix's toolkit, and a cap so that no other library major is accepted.
        assert any(s.operator == ">=" for s in r.specifier) and any(s.operator == "<" for s in r.specifier)
    cudart = next(r for r in requirements if "runtime" in r.name)
    toolkit = {11: "11.8", 12: "12.9", 13: "13.0"}[major]
    assert cudart.specifier.contains(toolkit) and not cudart.specifier.contains(f"{major + 1}.0")
    nccl = [Requirement(line) for line in project["optional-dependencies"]["nccl"]]
    assert [r.name for r in nccl] == [f"nvidia-nccl-cu{major}"]
    assert f"Environment :: GPU :: NVIDIA CUDA :: {major}" in project["classifiers"]
    assert set(project["classifiers"]) <= known_classifiers


@pytest.mark.parametrize("major", [11, 12, 13])
def test_cibuildwheel_selectors_follow_the_matrix(rendered: Path, major: int) -> None:
    cibw = _pyproject(rendered, f"cuprobe-cuda{major}x")["tool"]["cibuildwheel"]
    pythons = ["310", "311", "312", "313"] + ([] if major == 11 else ["314"])  # matrix excludes 3.14 × CUDA 11
    platforms = ["manylinux_aarch64", "manylinux_x86_64"] + ([] if major == 11 else ["win_amd64"])
    assert sorted(cibw["build"]) == sorted(f"cp{p}-{plat}" for p in pythons for plat in platforms)
    repair = cibw["linux"]["repair-wheel-command"]
    assert "--exclude libcuda.so.1" in repair and "--only-plat" in repair
    assert cibw["linux"]["manylinux-x86_64-image"].startswith("quay.io/pypa/manylinux")


def test_rendering_twice_gives_identical_bytes(project: Path, rendered: Path) -> None:
    first = {p: p.read_bytes() for p in rendered.rglob("*.toml")}
    assert main(["--root", str(project), "render"]) == 0
    assert {p: p.read_bytes() for p in rendered.rglob("*.toml")} == first


def test_check_passes_when_fresh_and_fails_on_drift(project: Path, rendered: Path) -> None:
    assert main(["--root", str(project), "render", "--check"]) == 0
    matrix = project / "matrix.yaml"
    matrix.write_text(matrix.read_text().replace('toolkit: "12.9"', 'toolkit: "12.9"  # unchanged meaning'))
    assert main(["--root", str(project), "render", "--check"]) == 0
    recipe = project / "recipes/cuprobe/recipe.yaml"
    recipe.write_text(recipe.read_text().replace('version: "0.1.0"', 'version: "0.2.0"'))
    assert main(["--root", str(project), "render", "--check"]) == 1
    (rendered / "leftover-cuda9x").mkdir()
    (rendered / "leftover-cuda9x" / "pyproject.toml").write_text("")
    assert main(["--root", str(project), "render"]) == 0
    assert not (rendered / "leftover-cuda9x").exists()
    assert main(["--root", str(project), "render", "--check"]) == 0


def test_committed_variants_are_fresh() -> None:
    assert main(["--root", str(REPO), "render", "--check"]) == 0


def test_matrix_option_renders_another_matrix(project: Path, tmp_path: Path) -> None:
    other = tmp_path / "only12.yaml"
    other.write_text(
        'python: ["3.12"]\n'
        "cuda:\n"
        '  - {major: 12, toolkit: "12.9", platforms: {linux-x86_64: {runner: r, image: img:1}}}\n'
    )
    assert main(["--root", str(project), "render", "--matrix", str(other)]) == 0
    out = project / "build" / "variants"
    assert sorted(p.name for p in out.iterdir()) == ["cuprobe-cuda12x"]
    cibw = _pyproject(out, "cuprobe-cuda12x")["tool"]["cibuildwheel"]
    assert cibw["build"] == ["cp312-manylinux_x86_64"]
    assert cibw["linux"]["manylinux-x86_64-image"] == "img:1"
