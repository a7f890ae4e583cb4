"""A real PyTorch CUDA extension through the whole factory: torchsort from its PyPI sdist, built against the matrix's
CUDA 13 torch train (2.15 with CUDA 13.2, 2.14 with 13.0) into dist/ and its index pages, and against torch 2.14
twice with the compiler cache on.

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
from wheelfactory.pipeline import BuildRequest, build
from wheelfactory.plan import copy_inputs, make_plan
from wheelfactory.pytorch.index_pages import INDEX_DIR
from wheelfactory.report import WheelRecord
from wheelfactory.sbom.checks import read_sbom
from wheelfactory.verify import verify, wheels_in

from .conftest import REPO, SOURCES, Built, build_recipe, matrix_for

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.heavy]


def _add_torchsort(root: Path) -> None:
    (root / "recipes/torchsort").mkdir()
    shutil.copy(SOURCES / "torchsort.recipe.yaml", root / "recipes/torchsort/recipe.yaml")


@pytest.fixture(scope="module")
def torchsort_builds(tmp_path_factory: pytest.TempPathFactory, build_image: str) -> tuple[Built, Built]:
    """The same build twice (against the train's torch 2.14), in two scratch projects, with a compiler cache of
    their own: the first starts it empty, the second finds the first's compiles there."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WHEELFACTORY_COMPILER_CACHE_DIR", str(tmp_path_factory.mktemp("compiler-cache")))
        built = [
            build_recipe(
                tmp_path_factory.mktemp(f"torchsort{n}"), 13, build_image, "torchsort", _add_torchsort, torch="2.14"
            )
            for n in (1, 2)
        ]
    return built[0], built[1]


@pytest.fixture(scope="module")
def torchsort_train(tmp_path_factory: pytest.TempPathFactory, build_image: str) -> tuple[Path, list[WheelRecord]]:
    """One build of the CUDA 13 torch train's newest two, as `nox -s build-cuda13 -- --recipe torchsort --torch 2.15
    --torch 2.14` runs it: torch 2.15 with CUDA 13.2's toolkit, then torch 2.14 with 13.0's."""
    root = copy_inputs(REPO, tmp_path_factory.mktemp("train") / "project")
    _add_torchsort(root)
    matrix = matrix_for(root, build_image)
    request = BuildRequest(root, 13, ["3.12"], ["torchsort"], build_image, None, matrix, torch=["2.15", "2.14"])
    return root, build(request)


def test_the_train_builds_a_wheel_per_torch_and_dist_holds_the_newests_plain_and_each_labelled(
    torchsort_train: tuple[Path, list[WheelRecord]],
) -> None:
    root, records = torchsort_train
    assert [(r.built.variant.key, r.built.toolkit.release) for r in records] == [
        ("torchsort-cuda13x-torch2.15", "13.2"),
        ("torchsort-cuda13x-torch2.14", "13.0"),
    ]
    for record in records:
        assert record.passed, record.why_not()
        tiers = {(t.tier, t.layout) for t in record.smoke}
        assert {(2, "venv"), (2, "system-site-packages"), (2, "target"), (3, None)} <= tiers
    dist = root / "dist"
    name = records[0].built.path.name
    assert [p.relative_to(dist).as_posix() for p in sorted(dist.rglob("*.whl"))] == [
        f"torch-index/torch2.14-cu130/torchsort-cuda13x/{name.replace('-0.1.10-', '-0.1.10+pt214cu130-')}",
        f"torch-index/torch2.15-cu132/torchsort-cuda13x/{name.replace('-0.1.10-', '-0.1.10+pt215cu132-')}",
        name,
    ]
    assert (dist / name).read_bytes() == records[0].built.path.read_bytes()  # PyPI's is the 2.15 build
    for path in dist.rglob("*.whl"):
        release = "2.14" if "pt214" in path.name else "2.15"
        assert f"torch=={release}.*" in (metadata(path).get_all("Requires-Dist") or [])
        # Its SBOM names that torch, the files that link it, and the toolkit it was built with (docs/sbom.md).
        facts = read_sbom(path)[0]
        (torch,) = [r for r in facts.requires if r.name == "torch"]
        assert (torch.requirement, torch.built_against) == (f"torch=={release}.*", release) and torch.linked_by
        toolkit = next(t for t in facts.tools if t.role == "cuda-toolkit")
        assert toolkit.version == ("13.0" if release == "2.14" else "13.2")
    # The plan's jobs for it, and the gate over exactly these files.
    plan = make_plan(root, matrix_for(root, "unused"), ["torchsort"])
    jobs = [j.as_json() for j in plan.wheel_jobs() if j.cell.python == "3.12" and j.cell.platform == "linux-x86_64"]
    assert [j["build_job"] for j in jobs] == [
        "torchsort-cuda13x-torch2.15-manylinux_x86_64",
        "torchsort-cuda13x-torch2.14-manylinux_x86_64",
        "torchsort-cuda13x-torch2.11-manylinux_x86_64",
    ]
    assert verify(jobs[:2], wheels_in(dist)) == []
    report = {e["wheel"]: e for e in json.loads((dist / "report.json").read_text())["wheels"]}
    assert {e["torch"]["release"]: e["torch"]["index_page"] for e in report.values()} == {
        "2.15": "torch-index/torch2.15-cu132/",
        "2.14": "torch-index/torch2.14-cu130/",
    }


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


# Not fixed: nvcc's whole compile (its front end, cicc's PTX) misses in the second build, where the C++ module and
# ptxas' SASS hit (the test above). It passed in one session's run with the server's log file set and failed in the
# next (2026-11-26: 9 misses of 17, as without it); docs/recipes.md has the evidence. Not strict: it can pass.
@pytest.mark.xfail(strict=False, reason="sccache's key of torchsort's nvcc compile changes between builds")
def test_a_second_build_compiles_nothing_again(torchsort_builds: tuple[Built, Built]) -> None:
    second = _compiler_cache(torchsort_builds[1])
    assert all(counts["misses"] == 0 for counts in second.values()), second


def test_the_torch_index_page_serves_the_built_wheel(torchsort_builds: tuple[Built, Built], tmp_path: Path) -> None:
    built = torchsort_builds[0]
    torch = built.variant.torch
    assert torch is not None
    index = built.root / "dist" / INDEX_DIR / torch.index_name
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--isolated", "--dest", str(tmp_path),
         "--index-url", index.as_uri() + "/", "--python-version", "3.12", "--only-binary", ":all:",
         "--platform", built.record.built.name.platform_tag, "torchsort-cuda13x"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert [p.name for p in tmp_path.iterdir()] == [built.wheel.name.replace("-0.1.10-", f"-0.1.10+{torch.label}-")]
