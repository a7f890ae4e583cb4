"""A torch extension on LibTorch's stable ABI through the whole factory: tests/sources/stableop, a custom op with a
CPU and a CUDA kernel, built against the matrix's torch for CUDA 13 targeting torch 2.11, audited by
torch-abi-audit, and smoke-tested beside the oldest torch it targets and the newest PyPI has.

Marked heavy, beside slow: the build installs torch (half a gigabyte), and the smoke installs two more torch
releases with the NVIDIA wheels each pins (CUDA 13.0's and 13.2's, gigabytes) — over what CI can spend.
`nox -s tests -- -m heavy` runs it.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from wheelfactory.binaries.wheelfile import compatible_platforms, metadata
from wheelfactory.pytorch.install import torch_install

from .conftest import SOURCES, Built, build_recipe

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.heavy]


def _add_stableop(root: Path) -> None:
    shutil.copytree(SOURCES / "stableop", root / "recipes/stableop/source")
    shutil.copy(SOURCES / "stableop.recipe.yaml", root / "recipes/stableop/recipe.yaml")


@pytest.fixture(scope="module")
def stableop(tmp_path_factory: pytest.TempPathFactory, build_image: str) -> Built:
    return build_recipe(tmp_path_factory.mktemp("stableop"), 13, build_image, "stableop", add=_add_stableop)


def test_one_abi3_wheel_requires_every_torch_from_its_target_on(stableop: Built) -> None:
    assert stableop.record.passed, stableop.record.why_not()
    assert stableop.wheel.name.startswith("stableop_cuda13x-0.3.0-cp310-abi3-manylinux_")
    requires = metadata(stableop.wheel).get_all("Requires-Dist") or []
    assert "torch>=2.11" in requires and not [r for r in requires if r.startswith("torch==")]
    with zipfile.ZipFile(stableop.wheel) as archive:
        module = next(n for n in archive.namelist() if n.endswith("_cuda_variant.py"))
        assert "TORCH_OLDEST = '2.11'" in archive.read(module).decode()
    entry = json.loads((stableop.root / "dist/report.json").read_text())["wheels"][0]
    assert entry["torch"] == {**entry["torch"], "abi": "stable", "target": "2.11", "requires": "torch>=2.11"}
    (binary,) = entry["binaries"]
    assert binary["providers"] == ["torch"] and "libcudart.so.13" in binary["needed"]


def test_the_smoke_ran_beside_the_oldest_torch_of_its_range_and_the_newest(stableop: Built) -> None:
    entry = json.loads((stableop.root / "dist/report.json").read_text())["wheels"][0]
    beside = {tier["torch"] for tier in entry["smoke"] if tier["tier"] == 2}
    oldest, newest = sorted(beside, key=Version)
    # The newest is what pip takes for torch>=2.11 here (PyPI's newest, unless pip's configuration caps it).
    name = stableop.record.built.name
    resolved = torch_install("torch>=2.11", "3.12", name, compatible_platforms(name.platform_tag)).others["torch"]
    assert Version(oldest).release[:2] == (2, 11) and newest == resolved and Version(newest) > Version(oldest)
    for torch in (oldest, newest):
        layouts = {t["layout"] for t in entry["smoke"] if t["tier"] == 2 and t["torch"] == torch and t["passed"]}
        assert {"venv", "system-site-packages", "target"} <= layouts, (torch, layouts)
