"""The one-command path on a real package, end to end and with no hand edit: cufinufft 2.4.1 drafted from its PyPI
sdist and built for CUDA 12 as drafted (the audit rejects it: the draft lets no binary link CUDA yet); completed
from that build's report and built again (the audit passes; tier 1 rejects it: its import without CUDA raises an
error that names no library); completed again from that report, which shows the error's text, and built into dist/.

tests/sources/vendlib, the hardest shapes in small (a vendored CMake project's own switch and architecture variable,
cudart and cuBLAS, a ctypes load through helpers), goes the same way: its draft's build is rejected for what its
library links, and the recipe completed from that build's report reaches dist/.

Heavy, beside slow: three builds of cufinufft's kernels, the first some seven minutes on two cores with an empty
compiler cache (the others take the cache's, a minute each, and smoke). torchsort's, against the matrix's torch
(gigabytes of wheels), two builds of five minutes. `nox -s tests -- -m heavy` runs them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from wheelfactory.drafting import SourceGiven, complete_recipe, draft_recipe
from wheelfactory.pipeline import BuildRequest, build
from wheelfactory.plan import copy_inputs

from .conftest import REPO, matrix_for
from .test_draft_vendored import vendlib_project

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.heavy]

# What cufinufft's import raises without CUDA.
IMPORT_ERROR = "Could not find cufinufft library in system path"


def _drafted(tmp_path: Path, pin: str, major: int, image: str) -> tuple[Path, Path, BuildRequest]:
    """(the project, the drafted recipe, the build of its cp312 wheel) for the sdist `pin`, the only recipe."""
    root = copy_inputs(REPO, tmp_path / "project")
    for recipe in (root / "recipes").iterdir():
        shutil.rmtree(recipe)
    path, _ = draft_recipe(SourceGiven(sdist=pin), root)
    name = path.parent.name
    return root, path, BuildRequest(root, major, ["3.12"], [name], image, None, matrix_for(root, image))


def test_cufinufft_from_a_draft_to_dist(tmp_path: Path, build_image: str) -> None:
    root, path, request = _drafted(tmp_path, "cufinufft==2.4.1", 12, build_image)

    (first,) = build(request)
    assert not first.passed
    assert first.why_not() == [
        f"audit: cufinufft/libcufinufft.so: needs {library} ({component}) but may link no CUDA library — link with "
        "-Wl,--as-needed or fix the recipe's module policy"
        for library, component in (("libcudart.so.12", "cudart"), ("libcufft.so.11", "cufft"))
    ]

    _, diff = complete_recipe(root / "dist/report.json", "cufinufft", root)
    assert "+  libcufinufft.so: [cudart, cufft]  # from the report: it links cudart, cufft" in diff
    completed = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert completed["shared_libraries"] == {"libcufinufft.so": ["cudart", "cufft"]}
    assert completed["device_code"] == ["libcufinufft.so"]

    (second,) = build(request)
    assert second.audit is not None and second.audit.passed
    assert second.why_not() == [
        "smoke tier 1 (Python 3.12): import cufinufft → ImportError|OSError naming libcudart.so.12 or libcufft.so.11: "
        f"ImportError: {IMPORT_ERROR}"
    ]
    complete_recipe(root / "dist/report.json", "cufinufft", root)
    assert yaml.safe_load(path.read_text(encoding="utf-8"))["smoke"]["cuda_import_error"] == IMPORT_ERROR

    (third,) = build(request)
    assert third.passed, third.why_not()
    assert [p.name for p in (root / "dist").glob("*.whl")] == [third.wheel]
    entry = next(e for e in json.loads((root / "dist/report.json").read_text())["wheels"] if e["passed"])
    assert entry["gpu_code"]["sass"]  # the variant's architectures, from the drafted CMAKE_ARGS


def test_torchsort_from_a_draft_to_dist(tmp_path: Path, build_image: str) -> None:
    """torchsort 0.1.10, a torch extension: the draft knows it builds against torch (and where torch's libraries
    are), its first build is rejected for what each module links, and the completed recipe's reaches dist/."""
    root, path, request = _drafted(tmp_path, "torchsort==0.1.10", 13, build_image)

    (first,) = build(request)
    assert first.audit is not None and not first.audit.passed
    complete_recipe(root / "dist/report.json", "torchsort", root)
    completed = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert completed["modules"] == {
        "*": [],
        "torchsort.isotonic_cpu": ["torch"],
        "torchsort.isotonic_cuda": ["cudart", "torch"],
    }
    assert completed["device_code"] == ["torchsort.isotonic_cuda"]

    (second,) = build(request)
    assert second.passed, second.why_not()
    assert [p.name for p in (root / "dist").glob("*.whl")] == [second.wheel]


def test_vendlib_from_a_draft_to_dist(tmp_path: Path, build_image: str) -> None:
    root = copy_inputs(REPO, tmp_path / "project")
    for recipe in (root / "recipes").iterdir():
        shutil.rmtree(recipe)
    path, _ = draft_recipe(SourceGiven(folder=vendlib_project(root)), root)
    request = BuildRequest(root, 12, ["3.12"], ["vendlib"], build_image, None, matrix_for(root, build_image))

    (first,) = build(request)
    assert first.audit is not None and not first.audit.passed
    assert any("vendlib/libvendkern.so: needs libcublas.so.12 (cublas)" in why for why in first.why_not())
    complete_recipe(root / "dist/report.json", "vendlib", root)
    completed = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert completed["shared_libraries"] == {"libvendkern.so": ["cublas", "cudart"]}
    assert completed["device_code"] == ["libvendkern.so"]

    (second,) = build(request)
    assert second.passed, second.why_not()
    assert [p.name for p in (root / "dist").glob("*.whl")] == [second.wheel]
    entry = next(e for e in json.loads((root / "dist/report.json").read_text())["wheels"] if e["passed"])
    # The variant's architectures, through the vendored project's own variable (its default is 75;80), PTX for the
    # newest.
    archs = second.built.variant.cuda_archs("linux-x86_64")  # the toolkit the build image's matrix names
    assert entry["gpu_code"]["sass"] == [f"sm_{a}" for a in archs]
    assert entry["gpu_code"]["ptx"][0].startswith(f"compute_{max(archs)} ")
