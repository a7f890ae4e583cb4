"""Builds that download while they configure: the recipe's extra_sources hand CMake (FetchContent, CPM) what it
would fetch, and a build that still tries to download is stopped with a message naming what it tried."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from wheelfactory.errors import ToolFailure
from wheelfactory.fetches import download_attempts, fetch_declarations
from wheelfactory.pipeline import BuildRequest, build
from wheelfactory.plan import Variant, copy_inputs, make_plan
from wheelfactory.toolkit.buildenv import with_extra_sources

from .conftest import REPO, add_source, matrix_for

# A CMake project that fetches a dependency at configure time, as cufinufft fetches CCCL (with git, from GitHub).
FETCHING = """cmake_minimum_required(VERSION 3.24)
project(fetching LANGUAGES C)
include(FetchContent)
FetchContent_Declare(Dep-One GIT_REPOSITORY https://github.com/example-org/dep-one.git GIT_TAG v1.0)
FetchContent_MakeAvailable(Dep-One)
file(READ "${dep-one_SOURCE_DIR}/VERSION" version)
message(STATUS "dep-one ${version}")
"""

# What CPM-based builds do first (cufinufft's cmake/setupCPM.cmake): file(DOWNLOAD) fails without a word offline.
CPM_FIRST = """file(DOWNLOAD https://github.com/cpm-cmake/CPM.cmake/releases/download/v0.42.0/CPM.cmake ${DEST})
include(${DEST})
CPMAddPackage(NAME CCCL GIT_REPOSITORY https://github.com/NVIDIA/cccl.git GIT_TAG v3.0.2)
"""


def _variant_with(project: Path, extra_sources: str, cmake_args: str | None) -> Variant:
    add_source(project, "ctlib")
    recipe = project / "recipes/ctlib/recipe.yaml"
    text = re.sub(r"(?m)^extra_sources:\n(  .*\n)+", "", recipe.read_text())
    text = text.replace("source: {path: source}\n", f"source: {{path: source}}\n{extra_sources}")
    if cmake_args is not None:
        text += f"environment:\n  CMAKE_ARGS: {cmake_args}\n"
    recipe.write_text(text)
    (project / "recipes/ctlib/dep").mkdir()
    return next(v for v in make_plan(project, None, ["ctlib"]).variants if v.major == 12)


def _cmake(source: Path, build_dir: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["cmake", "-S", source, "-B", build_dir, *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_variables_hand_cmake_each_extra_source_and_it_configures_offline(project: Path, tmp_path: Path) -> None:
    variant = _variant_with(project, "extra_sources:\n  Dep-One: {path: dep}\n", "-DMY_OPTION=ON")
    sources = tmp_path / "sources"
    env = with_extra_sources(variant, str(sources))
    folder = "$WHEELFACTORY_SOURCES/Dep-One"
    assert env["CMAKE_ARGS"] == (
        f"-DFETCHCONTENT_FULLY_DISCONNECTED=ON -DFETCHCONTENT_SOURCE_DIR_DEP-ONE={folder} "
        f"-DCPM_Dep-One_SOURCE={folder} -DMY_OPTION=ON"  # the recipe's own CMAKE_ARGS come after
    )
    assert env["CPM_SOURCE_CACHE"] == "$WHEELFACTORY_SOURCES" and env["WHEELFACTORY_SOURCES"] == str(sources)
    # Real CMake, with those arguments as the build's shell expands them: the dependency comes from the folder.
    (sources / "Dep-One").mkdir(parents=True)
    (sources / "Dep-One/VERSION").write_text("1.0-local")
    (tmp_path / "fetching").mkdir()
    (tmp_path / "fetching/CMakeLists.txt").write_text(FETCHING)
    args = env["CMAKE_ARGS"].replace("$WHEELFACTORY_SOURCES", str(sources)).split()
    configured = _cmake(tmp_path / "fetching", tmp_path / "build", args)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    assert "-- dep-one 1.0-local" in configured.stdout
    # A recipe without extra sources leaves CMAKE_ARGS to itself.
    plain = next(v for v in make_plan(REPO, None, ["cuvec"]).variants if v.major == 12)
    assert with_extra_sources(plain, "x") == plain.environment


def test_what_a_build_tried_to_download_is_named_from_its_log(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project/CMakeLists.txt").write_text(FETCHING)
    fetching = _cmake(tmp_path / "project", tmp_path / "build", [])  # no network here: git cannot clone
    assert fetching.returncode != 0
    # git names the URL; FetchContent only what it was declared as, which the source's CMake files resolve to it.
    declared = fetch_declarations(tmp_path / "project")
    assert declared == {"dep-one": "https://github.com/example-org/dep-one.git"}
    assert download_attempts(fetching.stdout + fetching.stderr, declared) == [
        "https://github.com/example-org/dep-one.git"
    ]
    # An image without git says no more than the declared name.
    assert download_attempts("CMake Error: CMake step for Dep-One failed: 1", declared) == [
        "https://github.com/example-org/dep-one.git"
    ]
    (tmp_path / "cpm.cmake").write_text(CPM_FIRST)
    cpm = subprocess.run(
        ["cmake", f"-DDEST={tmp_path / 'CPM.cmake'}", "-P", tmp_path / "cpm.cmake"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert download_attempts(cpm.stdout + cpm.stderr) == [
        "CPM.cmake (its CPMAddPackage is unknown: file(DOWNLOAD) of it failed quietly)"
    ]
    # What the log says is shown escaped, quoted: a URL cannot pass for a CI command in the message.
    assert download_attempts("fatal: unable to access 'https://x.invalid/%0A::error::x': Could not resolve host") == [
        "'https://x.invalid/%0A::error::x'"
    ]


@pytest.mark.slow
@pytest.mark.docker
def test_a_build_that_downloads_what_the_recipe_does_not_declare_is_stopped_naming_it(
    tmp_path: Path, build_image: str
) -> None:
    root = copy_inputs(REPO, tmp_path / "project")
    add_source(root, "ctlib")
    recipe = root / "recipes/ctlib/recipe.yaml"
    recipe.write_text(re.sub(r"(?m)^extra_sources:\n(  .*\n)+", "", recipe.read_text()))
    matrix = matrix_for(root, build_image)
    with pytest.raises(ToolFailure) as stopped:
        build(BuildRequest(root, 12, ["3.10"], ["ctlib"], build_image, None, matrix))
    message = str(stopped.value)
    assert "the build tried to download https://github.com/pybind/pybind11.git" in message
    assert "extra_sources" in message
    assert not list(root.glob("dist/*.whl"))
