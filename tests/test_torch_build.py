"""A real PyTorch CUDA extension through the whole factory: torchsort from its PyPI sdist, built against the matrix's
torch for CUDA 13 with the compiler cache on, twice.

Marked heavy, beside slow: each build installs torch and the NVIDIA wheels it pins (about 4 GB) and compiles for
every architecture of the variant, and the smoke layouts hold them too — some seventeen minutes on two cores, over
what CI can spend. `nox -s tests -- -m heavy` runs it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from wheelfactory.binaries.wheelfile import metadata
from wheelfactory.pytorch.index_pages import INDEX_DIR

from .conftest import SOURCES, Built, build_recipe

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.heavy]


def _add_torchsort(root: Path) -> None:
    (root / "recipes/torchsort").mkdir()
    shutil.copy(SOURCES / "torchsort.recipe.yaml", root / "recipes/torchsort/recipe.yaml")


@pytest.fixture(scope="module")
def torchsort_builds(tmp_path_factory: pytest.TempPathFactory, build_image: str) -> tuple[Built, Built]:
    """The same build twice, in two scratch projects, with a compiler cache of their own: the first starts it
    empty, the second finds the first's compiles there."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WHEELFACTORY_COMPILER_CACHE_DIR", str(tmp_path_factory.mktemp("compiler-cache")))
        first = build_recipe(tmp_path_factory.mktemp("torchsort1"), 13, build_image, "torchsort", add=_add_torchsort)
        second = build_recipe(tmp_path_factory.mktemp("torchsort2"), 13, build_image, "torchsort", add=_add_torchsort)
    return first, second


def test_torchsort_reaches_dist_built_against_the_matrix_torch(torchsort_builds: tuple[Built, Built]) -> None:
    built = torchsort_builds[0]
    assert built.record.passed, built.record.why_not()
    release = built.variant.torch.release  # type: ignore[union-attr]
    requires = metadata(built.wheel).get_all("Requires-Dist") or []
    assert f"torch=={release}.*" in requires
    with zipfile.ZipFile(built.wheel) as archive:
        names = archive.namelist()
        module = next(n for n in names if n.endswith("_cuda_variant.py"))
        assert f"TORCH = {release!r}" in archive.read(module).decode()
    assert not [n for n in names if "libc10" in n or "libtorch" in n], names  # torch's libraries are torch's
    entry = json.loads((built.root / "dist/report.json").read_text())["wheels"][0]
    assert entry["torch"]["release"] == release and entry["toolkit"]["release"] == entry["torch"]["cuda"]
    binaries = {b["member"].split("/")[-1].split(".")[0]: b for b in entry["binaries"]}
    for name in ("isotonic_cpu", "isotonic_cuda"):
        assert "libc10.so" in binaries[name]["needed"] and binaries[name]["providers"] == ["torch"]
        assert "$ORIGIN/../torch/lib" in binaries[name]["rpath"]
    assert "libcudart.so.13" in binaries["isotonic_cuda"]["needed"]
    assert "libcudart.so.13" not in binaries["isotonic_cpu"]["needed"]
    # Every tier but the first (torch does not import without NVIDIA's libraries): each layout, at torch's pins.
    tiers = {(t["tier"], t["layout"]) for t in entry["smoke"]}
    assert (1, None) not in tiers and {(2, "venv"), (2, "system-site-packages"), (2, "target"), (3, None)} <= tiers
    # cpp_extension's -ccbin $CC did not replace the factory's host compiler.
    assert "dropped -ccbin /opt/wheelfactory/cached/cc" in Path(entry["build_log"]).read_text()


def _compiler_cache(built: Built) -> dict[str, dict[str, int]]:
    entry = json.loads((built.root / "dist/report.json").read_text())["wheels"][0]
    by_language: dict[str, dict[str, int]] = entry["toolkit"]["compiler_cache"]["by_language"]
    return by_language


def test_a_second_build_takes_the_host_code_and_the_sass_from_the_cache(torchsort_builds: tuple[Built, Built]) -> None:
    # Without an isolated build environment, torch's headers have one path in every build: the C++ module and ptxas'
    # SASS for each architecture come from the cache the first build filled.
    first, second = (_compiler_cache(built) for built in torchsort_builds)
    assert all(counts["hits"] == 0 for counts in first.values()), first
    # Every miss of the first build was written to the cache, none failed (what the second build can find).
    totals = json.loads((torchsort_builds[0].root / "dist/report.json").read_text())["wheels"][0]["toolkit"]
    assert totals["compiler_cache"]["writes"] == totals["compiler_cache"]["misses"] > 0
    assert totals["compiler_cache"]["write_errors"] == 0
    archs = len(torchsort_builds[1].variant.cuda_archs("linux-x86_64"))
    assert second["C/C++"] == {"hits": 1, "misses": 0}, second
    assert second["CUBIN"] == {"hits": archs, "misses": 0}, second


def test_a_second_build_compiles_nothing_again(torchsort_builds: tuple[Built, Built]) -> None:
    # Not nvcc's front end, nor the PTX: every step hits, since the compiler cache's server writes to a file of its
    # own (SCCACHE_ERROR_LOG; docs/recipes.md).
    second = _compiler_cache(torchsort_builds[1])
    assert all(counts["misses"] == 0 for counts in second.values()), second


def test_the_torch_index_page_serves_the_built_wheel(torchsort_builds: tuple[Built, Built], tmp_path: Path) -> None:
    built = torchsort_builds[0]
    torch = built.variant.torch
    assert torch is not None
    index = built.root / "dist" / INDEX_DIR / f"torch{torch.release}-cu{torch.cuda.replace('.', '')}"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--isolated", "--dest", str(tmp_path),
         "--index-url", index.as_uri() + "/", "--python-version", "3.12", "--only-binary", ":all:",
         "--platform", built.record.built.name.platform_tag, "torchsort-cuda13x"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert [p.name for p in tmp_path.iterdir()] == [built.wheel.name]
