"""The one-command path on a real package, end to end and with no hand edit: cufinufft 2.4.1 drafted from its PyPI
sdist and built for CUDA 12 as drafted (the audit rejects it: the draft lets no binary link CUDA yet); completed
from that build's report and built again (the audit passes; tier 1 rejects it: its import without CUDA raises an
error that names no library); completed again from that report, which shows the error's text, and built into dist/.

tests/sources/vendlib, the hardest shapes in small (a vendored CMake project's own switch and architecture variable,
cudart and cuBLAS, a ctypes load through helpers), goes the same way: its draft's build is rejected for what its
library links, and the recipe completed from that build's report reaches dist/.

Heavy, beside slow: three builds of cufinufft's kernels, the first some seven minutes on two cores with an empty
compiler cache (the others take the cache's, a minute each, and smoke). torchsort's, against the matrix's torch
(gigabytes of wheels), two builds of five minutes. causal-conv1d's first build compiles its kernels for some twelve
GPU architectures. `nox -s tests -- -m heavy` runs them.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from wheelfactory.drafting import SourceGiven, complete_recipe, draft_recipe
from wheelfactory.pipeline import BuildRequest, build
from wheelfactory.plan import copy_inputs

from .conftest import REPO, matrix_for
from .test_draft_breadth import EXPECTATIONS
from .test_draft_vendored import vendlib_project

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.heavy]

# What cufinufft's import raises without CUDA.
IMPORT_ERROR = "Could not find cufinufft library in system path"


def _drafted(
    tmp_path: Path, pin: str, major: int, image: str, torch: list[str] | None = None
) -> tuple[Path, Path, BuildRequest]:
    """(the project, the drafted recipe, the build of its cp312 wheel) for the sdist `pin`, the only recipe; of a
    torch build, against the `torch` releases of the train only."""
    root = copy_inputs(REPO, tmp_path / "project")
    for recipe in (root / "recipes").iterdir():
        shutil.rmtree(recipe)
    path, _ = draft_recipe(SourceGiven(sdist=pin), root)
    name = path.parent.name
    matrix = matrix_for(root, image)
    return root, path, BuildRequest(root, major, ["3.12"], [name], image, None, matrix, torch=torch)


def _in_dist(root: Path) -> list[str]:
    """The wheels in dist/, where each lies: at its top, or (a build against a torch other than the train's
    newest) labelled on that torch's index page."""
    return sorted(str(p.relative_to(root / "dist")) for p in (root / "dist").rglob("*.whl"))


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
    assert _in_dist(root) == [third.wheel]
    entry = next(e for e in json.loads((root / "dist/report.json").read_text())["wheels"] if e["passed"])
    assert entry["gpu_code"]["sass"]  # the variant's architectures, from the drafted CMAKE_ARGS


def test_torchsort_from_a_draft_to_dist(tmp_path: Path, build_image: str) -> None:
    """torchsort 0.1.10, a torch extension: the draft knows it builds against torch (and where torch's libraries
    are), its first build is rejected for what each module links, and the completed recipe's reaches dist/."""
    # One torch of the train (its wheel is in the cache): the train's every release would be a build each.
    root, path, request = _drafted(tmp_path, "torchsort==0.1.10", 13, build_image, torch=["2.14"])

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
    assert _in_dist(root) == [second.wheel]


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
    assert _in_dist(root) == [second.wheel]
    entry = next(e for e in json.loads((root / "dist/report.json").read_text())["wheels"] if e["passed"])
    # The variant's architectures, through the vendored project's own variable (its default is 75;80), PTX for the
    # newest.
    archs = second.built.variant.cuda_archs("linux-x86_64")  # the toolkit the build image's matrix names
    assert entry["gpu_code"]["sass"] == [f"sm_{a}" for a in archs]
    assert entry["gpu_code"]["ptx"][0].startswith(f"compute_{max(archs)} ")


# causal-conv1d 1.7.0's setup.py:179-199 hard-codes `-gencode arch=compute_XX,code=sm_XX` (SASS, no PTX) for these
# with an nvcc of 13.0 or later; nvcc compiles them whatever the variant's architectures are.
CAUSAL_CONV1D_GENCODE = {75, 80, 87, 90, 100, 103, 110, 120, 121}

# Each DECIDE: of causal-conv1d's draft (a fragment of its line), the field it is about, the answer, and why. Every
# answer keeps the draft's proposal: the recipe built is the draft as written.
CAUSAL_CONV1D_DECIDED = [
    # No `cuda:`: all of the matrix's majors. A torch build is planned only where the matrix has a torch train to
    # build against (CUDA 13: PyPI's torch is built for it), so that is already the one major it builds for.
    ("DECIDE: the CUDA majors it builds for", "cuda", None),
    # Its one OS classifier (Unix). This test builds linux-x86_64 (the host); aarch64 is the user's to try.
    ("DECIDE: the first build tells whether each works", "platforms", ["linux-x86_64", "linux-aarch64"]),
    # Without it torch's cpp_extension drops TORCH_CUDA_ARCH_LIST (the flags name -gencode), and the variant's
    # architectures and PTX for the newest would be missing; narrowing the module to the hard-coded list instead
    # (device_code_archs) would leave newer GPUs with no PTX to JIT.
    ("DECIDE: nvcc appends the variant's to them", "NVCC_APPEND_FLAGS", "$NVCC_GENCODE"),
    # Without it bdist_wheel downloads a prebuilt wheel from GitHub; the build has no network and the URLError is
    # not caught (setup.py:330-347).
    ("DECIDE: forces the CUDA build", "CAUSAL_CONV1D_FORCE_BUILD", "TRUE"),
]


def _answer_decides(path: Path) -> None:
    """Hold each of the draft's DECIDE: lines to its one answer above, and its field to that answer."""
    text = path.read_text(encoding="utf-8")
    # (the header's "DECIDE: marks what only you can tell" explains the mark; it asks nothing)
    asked = [line for line in text.splitlines() if "DECIDE:" in line and "DECIDE: marks" not in line]
    answered = [[fragment for fragment, _, _ in CAUSAL_CONV1D_DECIDED if fragment in line] for line in asked]
    assert [len(fragments) for fragments in answered] == [1] * len(asked), asked
    assert sorted(f for (f,) in answered) == sorted(fragment for fragment, _, _ in CAUSAL_CONV1D_DECIDED)
    drafted = yaml.safe_load(text)
    fields = {**drafted, **drafted.get("environment", {})}
    assert {field: fields.get(field) for _, field, _ in CAUSAL_CONV1D_DECIDED} == {
        field: answer for _, field, answer in CAUSAL_CONV1D_DECIDED
    }


def test_causal_conv1d_from_a_draft_to_dist(tmp_path: Path, build_image: str) -> None:
    """causal-conv1d 1.7.0, a torch extension that hard-codes its GPU architectures: its draft, with each DECIDE:
    answered (and nothing else touched), is built for CUDA 13 against one torch of the train (2.14) for CPython
    3.12; the first build is rejected for what its module links, the recipe completed from that build's report
    reaches dist/, and the module carries the variant's architectures beside the hard-coded ones. Its wheel of
    twelve architectures (242 MiB, 2026-11-28) is over PyPI's default of 100 MiB: the completion's DECIDE: on the
    limit is answered by keeping it (this test publishes nothing)."""
    # Not narrowed to one GPU architecture: nvcc compiles the nine hard-coded ones whatever the variant's are, so
    # narrowing (the recipe's cuda_archs, the factory's only way, and a hand edit beyond the DECIDE: lines) would
    # spare two of its twelve targets, and [90], hard-coded too, could not show that NVCC_APPEND_FLAGS works.
    root, path, request = _drafted(tmp_path, "causal-conv1d==1.7.0", 13, build_image, torch=["2.14"])
    name = path.parent.name
    _answer_decides(path)

    (first,) = build(request)
    assert first.audit is not None and not first.audit.passed
    # What the draft cannot know, and nothing else: the module links the CUDA runtime and torch's libraries, and
    # the wheel's size.
    why_not = first.why_not()
    sized = [why for why in why_not if why.startswith("audit: wheel is ")]
    assert len(sized) == 1 and "over the recipe's size_limit_mb of 100 MiB" in sized[0], why_not
    assert why_not != sized and all(
        re.fullmatch(
            r"audit: causal_conv1d_cuda[^:]*: needs \S+ \(\S+\) but may link (no CUDA library|nothing) — .*", why
        )
        for why in why_not
        if why not in sized
    ), why_not
    complete_recipe(root / "dist/report.json", name, root)
    text = path.read_text(encoding="utf-8")
    completed = yaml.safe_load(text)
    (limit,) = [line for line in text.splitlines() if line.startswith("size_limit_mb:")]
    assert "DECIDE: from the report:" in limit and completed["size_limit_mb"] > 100
    # the completion reaches what was written by hand from the sources (test_draft_breadth's expectations)
    expected = yaml.safe_load((EXPECTATIONS / "causal-conv1d.yaml").read_text(encoding="utf-8"))["recipe"]
    assert completed["modules"] == {"*": [], **expected["modules"]}
    assert completed["device_code"] == expected["device_code"]

    (second,) = build(request)
    assert second.passed, second.why_not()
    assert _in_dist(root) == [second.wheel]
    entry = next(e for e in json.loads((root / "dist/report.json").read_text())["wheels"] if e["passed"])
    # SASS for each of the variant's architectures and PTX for the newest, which only NVCC_APPEND_FLAGS brings
    # (sm_86, sm_89 and compute_120 are none of the hard-coded); beside them the hard-coded ones, which the audit
    # accepts as CUDA 13.0's nvcc can target each.
    archs = second.built.variant.cuda_archs("linux-x86_64")
    assert set(archs) - CAUSAL_CONV1D_GENCODE
    assert entry["gpu_code"]["sass"] == [f"sm_{a}" for a in sorted(set(archs) | CAUSAL_CONV1D_GENCODE)]
    assert [ptx.split()[0] for ptx in entry["gpu_code"]["ptx"]] == [f"compute_{max(archs)}"]
