"""A real CUDA library opened with ctypes through the whole factory: cufinufft 2.4.1 from its PyPI sdist
(scikit-build-core and CMake build libcufinufft.so from relocatable device code; the package loads it at import),
one py3-none wheel for CUDA 12, smoke-tested on the oldest and the newest Python it serves.

Marked heavy, beside slow: it compiles cufinufft's spreading kernels for every architecture of CUDA 12.4, some
eight minutes on two cores, over what CI can spend. `nox -s tests -- -m heavy` runs it.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from wheelfactory.binaries.wheelfile import WheelName, metadata

from .conftest import SOURCES, Built, build_recipe

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.heavy]

PYTHONS = ("3.10", "3.13")


def _add_cufinufft(root: Path) -> None:
    (root / "recipes/cufinufft").mkdir()
    shutil.copy(SOURCES / "cufinufft.recipe.yaml", root / "recipes/cufinufft/recipe.yaml")


@pytest.fixture(scope="module")
def cufinufft12(tmp_path_factory: pytest.TempPathFactory, build_image: str) -> Built:
    root = tmp_path_factory.mktemp("cufinufft")
    return build_recipe(root, 12, build_image, "cufinufft", add=_add_cufinufft, pythons=PYTHONS)


def test_cufinufft_is_one_py3_none_wheel_linking_nvidias_runtime_and_cufft(cufinufft12: Built) -> None:
    record = cufinufft12.record
    assert record.passed, record.why_not()
    assert WheelName.of(cufinufft12.wheel).python_tag == "py3-none"
    assert [p.name for p in (cufinufft12.root / "dist").glob("*.whl")] == [cufinufft12.wheel.name]
    members = zipfile.ZipFile(cufinufft12.wheel).namelist()
    assert "cufinufft/libcufinufft.so" in members and not [m for m in members if ".cpython-" in m or ".abi3." in m]
    requires = metadata(cufinufft12.wheel).get_all("Requires-Dist") or []
    assert any(r.startswith("nvidia-cufft-cu12") for r in requires), requires
    entry = json.loads((cufinufft12.root / "dist/report.json").read_text())["wheels"][0]
    (library,) = entry["binaries"]
    assert {"libcudart.so.12", "libcufft.so.11"} <= set(library["needed"])
    assert library["rpath"] == ["$ORIGIN/../nvidia/cuda_runtime/lib", "$ORIGIN/../nvidia/cufft/lib"]
    # Relocatable device code: SASS for each architecture, device-linked; PTX for the newest only in each object's
    # fatbin, which the driver JIT-links.
    archs = cufinufft12.variant.cuda_archs("linux-x86_64")
    assert entry["gpu_code"]["sass"] == [f"sm_{a}" for a in archs]
    assert entry["gpu_code"]["ptx"] == [f"compute_{max(archs)} (ISA 8.4, JIT-linked from each object)"]
    # CMake handed nvcc the factory's own host compiler; the log says the CPM.cmake download went nowhere.
    assert "the build's own" not in entry["toolkit"]["host_compiler"]
    assert "Downloading CPM.cmake" in Path(entry["build_log"]).read_text()


def test_cufinufft_is_smoke_tested_on_the_oldest_and_the_newest_python(cufinufft12: Built) -> None:
    by_python: dict[str | None, list[str]] = {}
    for tier in cufinufft12.record.smoke:
        assert tier.passed, tier.label
        by_python.setdefault(tier.python, []).append(f"{tier.tier}/{tier.layout}")
    assert set(by_python) == {*PYTHONS, None}
    for python in PYTHONS:
        assert {"2/venv", "2/system-site-packages", "2/target"} <= set(by_python[python]), by_python[python]
