"""The newest CPythons of the matrix, 3.14 and 3.15, through the whole pipeline in the build image: cuprobe's cpXY
wheel, and ctlib's one py3-none wheel smoke-tested under both. The offline image has them once `nox -s image` could
build them from Debian's source (cpython_build.py): on a host whose mirror serves no such tarball and whose cache
holds none, the image is made without them and these tests fail naming what it lacks.

Marked heavy: three builds in Docker, minutes each, over what CI's 30 minutes can spend. `nox -s tests -- -m heavy
tests/test_newest_cpythons.py` runs them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wheelfactory.binaries.wheelfile import cpython_tag

from .conftest import add_source, build_recipe

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.heavy]

NEWEST = ("3.14", "3.15")


@pytest.mark.parametrize("python", NEWEST)
def test_cuprobe_reaches_dist_for_the_newest_cpythons(tmp_path: Path, build_image: str, python: str) -> None:
    built = build_recipe(tmp_path, 13, build_image, pythons=(python,))
    tag = cpython_tag(python)
    assert f"-{tag}-{tag}-manylinux" in built.wheel.name and built.wheel.is_file()
    assert built.record.passed and {t.tier for t in built.record.smoke} == {1, 2, 3}


def test_a_py3_none_wheel_is_smoked_under_the_newest_cpythons(tmp_path: Path, build_image: str) -> None:
    # ctlib's smoke checks the CUDA 12 runtime it loads.
    built = build_recipe(
        tmp_path, 12, build_image, recipe="ctlib", add=lambda root: add_source(root, "ctlib"), pythons=NEWEST
    )
    assert "-py3-none-manylinux" in built.wheel.name and built.wheel.is_file()
    assert built.record.passed
    assert {t.python for t in built.record.smoke if t.python} == set(NEWEST)
