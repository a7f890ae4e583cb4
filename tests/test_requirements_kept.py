"""Metadata the factory must never drop: every rendered variant requires all that its source's own build declares
(PKG-INFO, setup()'s install_requires, [project]), for each real recipe of the repository and of the tests, and for
nerfacc 0.5.3, whose PKG-INFO (metadata 2.1) names no requirement at all while its setup() lists them literally.
The drafted recipes are held to it where test_drafting renders them."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from wheelfactory.cli import main
from wheelfactory.plan import copy_inputs

from .conftest import REPO, SOURCES, add_source, assert_keeps_source_requirements

RECIPES = sorted(p.name for p in (REPO / "recipes").iterdir() if (p / "recipe.yaml").is_file())
# The tests' recipes: those with a source folder of their own, and those of an sdist.
TEST_SOURCES = sorted(p.name for p in SOURCES.iterdir() if p.is_dir())
TEST_SDISTS = sorted(
    p.name.removesuffix(".recipe.yaml")
    for p in SOURCES.glob("*.recipe.yaml")
    if p.name.removesuffix(".recipe.yaml") not in TEST_SOURCES
)

NERFACC_RECIPE = """name: nerfacc
version: "0.5.3"
import: nerfacc
source: {sdist: "nerfacc==0.5.3", sha256: 01850cbbd71b6aeab059cbfb695755f8b6604f3fdfe48c44925b4b97c0c324db}
platforms: [linux-x86_64]
torch: true
components: [cudart]
provided_libraries:
  torch: {dir: torch/lib, libraries: [libc10.so, libc10_cuda.so, libtorch.so, libtorch_cpu.so, libtorch_cuda.so]}
modules:
  "*": [cudart, torch]
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project with every recipe of the tests beside the repository's, and nerfacc's, rendered once."""
    project = copy_inputs(REPO, tmp_path_factory.mktemp("kept") / "project")
    for name in TEST_SOURCES:
        add_source(project, name)
    for name in TEST_SDISTS:
        (project / "recipes" / name).mkdir()
        shutil.copy(SOURCES / f"{name}.recipe.yaml", project / "recipes" / name / "recipe.yaml")
    (project / "recipes" / "nerfacc").mkdir()
    (project / "recipes" / "nerfacc" / "recipe.yaml").write_text(NERFACC_RECIPE)
    assert main(["--root", str(project), "render"]) == 0
    return project


@pytest.mark.parametrize("name", RECIPES)
def test_each_recipe_of_the_repository_keeps_its_sources_requirements(rendered: Path, name: str) -> None:
    assert_keeps_source_requirements(rendered, name)


@pytest.mark.parametrize("name", [*TEST_SOURCES, *TEST_SDISTS])
def test_each_recipe_of_the_tests_keeps_its_sources_requirements(rendered: Path, name: str) -> None:
    assert_keeps_source_requirements(rendered, name)


def test_nerfacc_requires_what_its_setup_call_lists_though_its_pkg_info_names_nothing(rendered: Path) -> None:
    variants = sorted((rendered / "build" / "variants").glob("nerfacc-cuda*"))
    assert variants
    for folder in variants:
        project_table = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
        dependencies = project_table["dependencies"]
        assert dependencies[0] == "rich>=12", dependencies
        # as its egg-info's requires.txt writes it (setuptools' own spelling of setup()'s literal)
        assert Requirement("typing_extensions; python_version<'3.8'") in map(Requirement, dependencies)
        assert [d for d in dependencies if d.startswith("torch")] == [
            d for d in dependencies if d.startswith("torch==")
        ]
        # Its extras too: PKG-INFO names `dev` and lists none of it; setup() does.
        assert "pytest==7.1.2" in project_table["optional-dependencies"]["dev"]
    assert_keeps_source_requirements(rendered, "nerfacc")
