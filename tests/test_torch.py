"""Builds against torch (torch.utils.cpp_extension): the matrix's torch per CUDA major, the recipe's libraries
provided by a dependency, and the per-(torch, CUDA) index pages.

The repair and the audit run on real ELF files built here with gcc: a stand-in for torch's libc10.so and an
extension module linked to it, in a wheel whose metadata does or does not require torch. The index pages are read
by pip itself. The whole build of a real torch extension (torchsort, from its PyPI sdist) is in
test_upstream.py.
"""

from __future__ import annotations

import dataclasses
import html
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from wheelfactory import pipeline
from wheelfactory.audit import audit_wheel
from wheelfactory.binaries.wheelcheck import check_wheel
from wheelfactory.binaries.wheelfile import WheelName, compatible_platforms, pack
from wheelfactory.build import inject_loader
from wheelfactory.built import BuiltWheel
from wheelfactory.cli import main
from wheelfactory.declared import excluded_libraries
from wheelfactory.errors import BadBytes, InputError, ToolFailure, UserError
from wheelfactory.pipeline import BuildRequest
from wheelfactory.plan import Cell, Variant, make_plan
from wheelfactory.platforms import linux
from wheelfactory.pytorch.coverage import write_coverage_pages
from wheelfactory.pytorch.index_pages import INDEX_DIR, labelled_copy, write_torch_indexes
from wheelfactory.pytorch.install import _from_report, is_nvidia, torch_install
from wheelfactory.render import render_plan
from wheelfactory.repair import repair
from wheelfactory.report import WheelRecord
from wheelfactory.sbom.checks import read_sbom, sbom_problems
from wheelfactory.sbom.compose import linked
from wheelfactory.sbom.document import Required
from wheelfactory.sources import SourceIdentity, source_identity
from wheelfactory.toolkit.provision import NvccOrigin, Toolkit
from wheelfactory.verify import verify, wheels_in

from .conftest import OFFLINE_MATRIX, REPO, copy_inputs, torch_mismatch_said
from .wheelbytes import host_library, make_wheel

DESCRIBED = "Description-Content-Type: text/markdown\n\n# torchlike\n"

RECIPE = """\
name: torchlike
version: "1.0.0"
import: torchlike
source: {path: source}
torch: true
cuda: [13]
platforms: [linux-x86_64]
components: [cudart]
provided_libraries:
  torch: {dir: torch/lib, libraries: [libc10.so, "libtorch*.so"]}
modules:
  torchlike._ops: [cudart, torch]
"""
SOURCE_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61", "torch>=1.7.1"]
build-backend = "setuptools.build_meta"

[project]
name = "torchlike"
version = "1.0.0"
dependencies = ["torch>=1.7.1", "numpy"]
"""


@pytest.fixture
def torch_project(tmp_path: Path) -> Path:
    root = copy_inputs(REPO, tmp_path / "project")
    (root / "recipes/torchlike/source/torchlike").mkdir(parents=True)
    (root / "recipes/torchlike/source/torchlike/__init__.py").write_text("")
    (root / "recipes/torchlike/source/pyproject.toml").write_text(SOURCE_PYPROJECT)
    (root / "recipes/torchlike/recipe.yaml").write_text(RECIPE)
    return root


def _variant(root: Path, torch: str = "2.14") -> Variant:
    """torchlike's CUDA 13 variant built against `torch` (the offline matrix's train: 2.15, then 2.14)."""
    variants = make_plan(root, root / OFFLINE_MATRIX, ["torchlike"]).variants
    return next(v for v in variants if v.torch is not None and v.torch.release == torch)


def test_a_torch_build_is_one_variant_per_torch_of_the_train_each_with_its_toolkit_and_pins(
    torch_project: Path,
) -> None:
    plan = make_plan(torch_project, torch_project / OFFLINE_MATRIX, ["torchlike"])
    assert [(v.key, v.torch.release, v.cuda.toolkit, v.on_pypi) for v in plan.variants] == [  # type: ignore[union-attr]
        ("torchlike-cuda13x-torch2.15", "2.15", "13.2", True),
        ("torchlike-cuda13x-torch2.14", "2.14", "13.0", False),
        ("torchlike-cuda13x-torch2.13", "2.13", "13.0", False),
        ("torchlike-cuda13x-torch2.12", "2.12", "13.0", False),
        ("torchlike-cuda13x-torch2.11", "2.11", "13.0", False),
    ]
    releases = ("2.15", "2.14", "2.13", "2.12", "2.11")
    for rendered, release in zip(render_plan(plan, torch_project), releases, strict=True):
        pyproject = tomllib.loads(rendered.files["pyproject.toml"])
        # Whatever the sdist says (torch>=1.7.1 would take the newest torch, built for another CUDA): the train's.
        assert pyproject["build-system"]["requires"] == ["setuptools>=61", f"torch=={release}.*", "ninja"]
        dependencies = pyproject["project"]["dependencies"]
        assert dependencies[:2] == [f"torch=={release}.*", "numpy"] and "torch>=1.7.1" not in dependencies
        assert f"TORCH = '{release}'" in rendered.files["_cuda_variant.py"]
        assert (
            "TORCH_PAGES = {'2.15': 'torch-index/torch2.15-cu132/', '2.14': 'torch-index/torch2.14-cu130/', "
            "'2.13': 'torch-index/torch2.13-cu130/', '2.12': 'torch-index/torch2.12-cu130/', "
            "'2.11': 'torch-index/torch2.11-cu130/'}" in rendered.files["_cuda_variant.py"]
        )
    variant = _variant(torch_project)
    # torch's libraries are never grafted by auditwheel.
    assert {"libc10.so", "libtorch*.so"} <= set(excluded_libraries(variant, "linux"))
    assert "libc10.so" not in excluded_libraries(variant, "windows")
    # PyPI's torch needs no index of its own; PyTorch's comes after the host's extra ones.
    assert "PIP_EXTRA_INDEX_URL" not in linux.environment(variant, "linux-x86_64")
    assert variant.torch is not None
    elsewhere = variant.torch.model_copy(update={"index": "https://download.pytorch.org/whl/cu130"})
    moved = Variant(variant.recipe, variant.recipe_dir, variant.cuda, variant.cells, variant.requires_python, elsewhere)
    assert linux.environment(moved, "linux-x86_64")["PIP_EXTRA_INDEX_URL"] == (
        "$PIP_EXTRA_INDEX_URL https://download.pytorch.org/whl/cu130"
    )


def test_a_recipe_s_own_torch_requirement_gives_way_to_the_release_built_against(torch_project: Path) -> None:
    """A draft of a setup.py package lists its install_requires (causal-conv1d's plain `torch`): the wheel still
    requires the torch release it was built with, once."""
    recipe = torch_project / "recipes/torchlike/recipe.yaml"
    recipe.write_text(recipe.read_text() + 'dependencies: [torch, "numpy>=1"]\n')
    rendered = next(
        r
        for r in render_plan(make_plan(torch_project, torch_project / OFFLINE_MATRIX, ["torchlike"]), torch_project)
        if r.variant.key == "torchlike-cuda13x-torch2.14"
    )
    dependencies = tomllib.loads(rendered.files["pyproject.toml"])["project"]["dependencies"]
    assert [line for line in dependencies if line.startswith("torch")] == ["torch==2.14.*"]
    assert "numpy>=1" in dependencies


def test_a_torch_recipe_needs_a_torch_in_the_matrix_and_sane_provided_libraries(torch_project: Path) -> None:
    recipe = torch_project / "recipes/torchlike/recipe.yaml"
    recipe.write_text(
        RECIPE.replace("cuda: [13]", "cuda: [12, 13]").replace("dir: torch/lib", "dir: ../../etc")
        + "  torchlike._x: [libcudart]\n"
    )
    recipe.write_text(recipe.read_text().replace('"libtorch*.so"', '"libtorch*.so", "libcudart.so.13"'))
    with pytest.raises(InputError) as raised:
        _variant(torch_project)
    messages = "\n".join(p.message for p in raised.value.problems)
    assert "names no torch for CUDA 12" in messages and "limit the recipe to cuda: [13]" in messages
    assert "'../../etc' leaves site-packages" in messages
    assert "'libcudart.so.13' names a CUDA library" in messages


@pytest.mark.parametrize(
    ("train", "said"),
    [
        ('- {release: "2.14", cuda: "12.9", index: "http://x"}', ["torch's CUDA 12.9 is not a CUDA 13 release",
                                                                "is not an https:// URL"]),
        ('- {release: "2.14", cuda: "13.0"}\n      - {release: "2.15", cuda: "13.2"}',
         ["torch 2.15 is newer than 2.14 above it — list the train newest first"]),
        ('- {release: "2.14", cuda: "13.0"}\n      - {release: "2.14", cuda: "13.2"}',
         ["torch 2.14 is listed twice — keep one"]),
    ],
)  # fmt: skip
def test_the_torch_train_is_known_releases_of_its_major_newest_first(
    torch_project: Path, train: str, said: list[str]
) -> None:
    matrix = torch_project / OFFLINE_MATRIX
    ours = re.search(r'- \{release: "2\.15", .*\n *- \{release: "2\.14", .*', matrix.read_text())
    assert ours is not None
    matrix.write_text(matrix.read_text().replace(ours.group(0), train))
    with pytest.raises(InputError) as raised:
        _variant(torch_project)
    messages = "\n".join(p.message for p in raised.value.problems)
    assert all(message in messages for message in said), messages


def _gcc(*args: str | Path) -> None:
    subprocess.run(["gcc", *map(str, args)], check=True, capture_output=True)


def _wheel(variant: Variant, work: Path, requires_torch: bool, bundle: bool = False) -> Path:
    """A cp312 manylinux wheel of torchlike whose _ops module links a stand-in libc10.so (as auditwheel leaves
    it) and CUDA's runtime, with or without Requires-Dist: torch, and with or without a vendored copy of the
    library."""
    (work / "c10.c").write_text("int c10_value(void) { return 10; }\n")
    _gcc("-shared", "-fPIC", "-Wl,-soname,libc10.so", "-o", work / "libc10.so", work / "c10.c")
    _gcc("-shared", "-fPIC", "-Wl,-soname,libcudart.so.13", "-o", work / "libcudart.so.13", work / "c10.c")
    tree = work / "tree"
    package = tree / "torchlike"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (work / "ops.c").write_text("int c10_value(void);\nint ops(void) { return c10_value(); }\n")
    module = package / "_ops.cpython-312-x86_64-linux-gnu.so"
    _gcc(
        "-shared",
        "-fPIC",
        "-Wl,--no-as-needed",
        "-o",
        module,
        work / "ops.c",
        f"-L{work}",
        "-lc10",
        "-l:libcudart.so.13",
    )
    if bundle:
        (tree / "torchlike.libs").mkdir()
        shutil.copy(work / "libc10.so", tree / "torchlike.libs" / "libc10-0123abcd.so")
    info = tree / "torchlike_cuda13x-1.0.0.dist-info"
    info.mkdir()
    requires = f"Requires-Dist: torch=={variant.torch.release}.*\n" if requires_torch and variant.torch else ""
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: torchlike-cuda13x\nVersion: 1.0.0\nRequires-Python: >=3.10\n{requires}"
    )
    (info / "WHEEL").write_text(
        "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp312-cp312-manylinux_2_28_x86_64\n"
    )
    (work / "built").mkdir()
    return pack(tree, work / "built")


def _toolkit(variant: Variant, where: Path) -> Toolkit:
    """What the repair reads of a toolkit (what its SBOM names of it): none is provisioned for these wheels, built
    with gcc alone."""
    nvcc = NvccOrigin("pip", "nvidia-cuda-nvcc 13.0.88 from the package index", None, ())
    return Toolkit(13, variant.cuda.toolkit, "linux", "x86_64", where, where, (), nvcc, "13.0.88", "none")


def _repaired_audit(variant: Variant, wheel: Path, out: Path) -> tuple[BuiltWheel, list[str]]:
    built = BuiltWheel(variant, Cell("3.12", "linux-x86_64"), wheel, "image", _toolkit(variant, out), None)
    repair(built, out)
    return built, audit_wheel(built).all_problems()


def test_torch_libraries_are_reached_through_the_rpath_and_accepted_where_the_wheel_requires_torch(
    torch_project: Path, tmp_path: Path
) -> None:
    variant = _variant(torch_project)
    built, problems = _repaired_audit(variant, _wheel(variant, tmp_path, requires_torch=True), tmp_path / "out")
    assert problems == []
    ops = built.binaries["torchlike/_ops.cpython-312-x86_64-linux-gnu.so"]
    assert "libc10.so" in ops.needed
    assert ops.rpath == ("$ORIGIN/../nvidia/cu13/lib", "$ORIGIN/../torch/lib")  # read back from the repaired file
    audit = audit_wheel(built)
    assert [b.providers for b in audit.binaries] == [["torch"]]


def test_a_torch_wheel_s_sbom_names_its_torch_and_its_labelled_copy_keeps_it(
    torch_project: Path, tmp_path: Path
) -> None:
    variant = _variant(torch_project)
    assert variant.torch is not None
    built, problems = _repaired_audit(variant, _wheel(variant, tmp_path, requires_torch=True), tmp_path / "out")
    assert problems == []
    source = source_identity(variant.recipe.source, variant.recipe_dir)
    assert sbom_problems(built.path, source, linked(built, built.binaries)) == []
    facts = read_sbom(built.path)[0]
    ops = "torchlike/_ops.cpython-312-x86_64-linux-gnu.so"
    # Its module links CUDA's runtime, which torch's own requirements bring (the variant requires no NVIDIA wheel).
    assert facts.requires == (
        Required("nvidia-cuda-runtime", "", "", (ops,)),
        Required("torch", "torch==2.14.*", "2.14", (ops,)),
    )
    assert facts.source == source and source.kind == "path"
    # The copy labelled +pt214cu130 names its own version, files and torch; the gate takes it as it is.
    labelled = labelled_copy(built.path, variant.torch, tmp_path / "dist")
    copy = read_sbom(labelled)[0]
    assert (copy.version, copy.requires, copy.tools) == ("1.0.0+pt214cu130", facts.requires, facts.tools)
    assert {m for m, _ in copy.files} == {
        m.replace("-1.0.0.dist-info/", "-1.0.0+pt214cu130.dist-info/") for m, _ in facts.files
    }
    assert sbom_problems(labelled, source) == []
    job = next(j.as_json() for j in make_plan(torch_project, torch_project / OFFLINE_MATRIX, ["torchlike"]).wheel_jobs()
               if j.id == "torchlike-cuda13x-torch2.14-cp312-manylinux_x86_64")  # fmt: skip
    assert job["source"] == source.as_json()
    assert [p for p in verify([job], [labelled]) if "twine" not in p] == []


def test_torch_libraries_in_a_wheel_that_does_not_require_torch_are_refused(
    torch_project: Path, tmp_path: Path
) -> None:
    variant = _variant(torch_project)
    _, problems = _repaired_audit(variant, _wheel(variant, tmp_path, requires_torch=False), tmp_path / "out")
    assert problems == [
        "torchlike/_ops.cpython-312-x86_64-linux-gnu.so: needs libc10.so from torch, which the wheel does not "
        "require — add it to the recipe's dependencies"
    ]


def test_a_module_whose_policy_leaves_torch_out_and_a_vendored_copy_are_refused(
    torch_project: Path, tmp_path: Path
) -> None:
    recipe = torch_project / "recipes/torchlike/recipe.yaml"
    recipe.write_text(recipe.read_text().replace("torchlike._ops: [cudart, torch]", "torchlike._ops: [cudart]"))
    variant = _variant(torch_project)
    _, problems = _repaired_audit(variant, _wheel(variant, tmp_path, True, bundle=True), tmp_path / "out")
    assert problems == [
        "torchlike/_ops.cpython-312-x86_64-linux-gnu.so: needs libc10.so (torch's) but may link cudart — add torch "
        "to its policy in the recipe, or stop linking it",
        "torchlike.libs/libc10-0123abcd.so: is torch's library, bundled in the wheel — it must come from torch (the "
        "repair excludes what provided_libraries names: is the name right?)",
    ]


def _members(wheel: Path) -> dict[str, bytes]:
    """A wheel's files by name, its .dist-info folder's name left out, RECORD left out (it names that folder)."""
    with zipfile.ZipFile(wheel) as archive:
        return {
            name.split("/", 1)[1] if ".dist-info/" in name else name: archive.read(name)
            for name in archive.namelist()
            if not name.endswith("/RECORD")
        }


def test_each_torch_of_the_train_gets_a_labelled_copy_on_its_own_index_page_that_pip_reads(
    torch_project: Path, tmp_path: Path
) -> None:
    plan = make_plan(torch_project, torch_project / OFFLINE_MATRIX)
    dist = tmp_path / "dist"
    built = {}
    for release, label in (("2.15", "pt215cu132"), ("2.14", "pt214cu130")):
        (tmp_path / release).mkdir()
        variant = _variant(torch_project, release)
        assert variant.torch is not None
        wheel = _wheel(variant, tmp_path / release, requires_torch=True)
        labelled = labelled_copy(wheel, variant.torch, dist)
        assert labelled.relative_to(dist).as_posix() == (
            f"torch-index/torch{release}-cu{label[-3:]}/torchlike-cuda13x/"
            f"torchlike_cuda13x-1.0.0+{label}-cp312-cp312-manylinux_2_28_x86_64.whl"
        )
        # A wheel as pip and PyPI take it (RECORD, METADATA's Version, the name), of the very same files.
        name, problems = check_wheel(labelled)
        assert problems == [] and name is not None and str(name.version) == f"1.0.0+{label}"
        metadata = _members(labelled).pop("METADATA")
        assert metadata == _members(wheel)["METADATA"].replace(b"Version: 1.0.0", f"Version: 1.0.0+{label}".encode())
        assert {k: v for k, v in _members(labelled).items() if k != "METADATA"} == {
            k: v for k, v in _members(wheel).items() if k != "METADATA"
        }
        built[release] = labelled
    # Not indexed: a wheel at the folder's top (PyPI's), and one of a variant built without torch.
    (dist / "cuprobe_cuda13x-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"not read")
    assert write_torch_indexes(dist, plan.locked_torches_of) == ["torch2.14-cu130", "torch2.15-cu132"]
    for release, labelled in built.items():
        index = labelled.parent.parent
        assert sorted(p.name for p in index.iterdir()) == ["index.html", "torchlike-cuda13x"]
        page = (index / "torchlike-cuda13x" / "index.html").read_text()
        assert 'data-requires-python="&gt;=3.10"' in page and "#sha256=" in page
        fetched = tmp_path / f"fetched-{release}"
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--isolated", "--dest",
             str(fetched), "--index-url", index.as_uri() + "/", "--python-version", "3.12", "--only-binary", ":all:",
             "--platform", "manylinux_2_28_x86_64", "torchlike-cuda13x"],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        assert [p.read_bytes() for p in fetched.iterdir()] == [labelled.read_bytes()]
    # A torch's pages go with its wheels.
    built["2.14"].unlink()
    assert write_torch_indexes(dist, plan.locked_torches_of) == ["torch2.15-cu132"]
    assert [p.relative_to(dist).as_posix() for p in sorted(dist.rglob("index.html"))] == [
        "torch-index/torch2.15-cu132/index.html",
        "torch-index/torch2.15-cu132/torchlike-cuda13x/index.html",
    ]


def test_a_labelled_wheel_that_does_not_belong_on_its_page_stops_the_pages(torch_project: Path, tmp_path: Path) -> None:
    plan = make_plan(torch_project, torch_project / OFFLINE_MATRIX)
    variant = _variant(torch_project)
    assert variant.torch is not None
    dist = tmp_path / "dist"
    unpinned = labelled_copy(_wheel(variant, tmp_path, requires_torch=False), variant.torch, dist)
    with pytest.raises(UserError, match=r"does not require torch==2\.14\.\*, the torch it is built against"):
        write_torch_indexes(dist, plan.locked_torches_of)
    # The 2.14 build under 2.15's page.
    misplaced = dist / INDEX_DIR / "torch2.15-cu132" / "torchlike-cuda13x" / unpinned.name
    misplaced.parent.mkdir(parents=True)
    unpinned.rename(misplaced)
    with pytest.raises(UserError, match=r"is not labelled \+pt215cu132, the label of the wheels built against"):
        write_torch_indexes(dist, plan.locked_torches_of)
    assert not list(dist.rglob("index.html"))


def test_no_page_is_written_or_removed_through_a_link_in_the_folder(torch_project: Path, tmp_path: Path) -> None:
    """A link planted in dist/torch-index/ (to a folder of wheels elsewhere, to a folder with a page of its own):
    the pages stop before any is written, nothing outside is written or removed as a stale page, and no labelled
    copy is written through one."""
    plan = make_plan(torch_project, torch_project / OFFLINE_MATRIX)
    variant = _variant(torch_project)
    assert variant.torch is not None
    dist, outside = tmp_path / "dist", tmp_path / "outside"
    labelled = labelled_copy(_wheel(variant, tmp_path, requires_torch=True), variant.torch, dist)
    labelled.parent.rename(outside)
    labelled.parent.symlink_to(outside)  # torch2.14-cu130/torchlike-cuda13x -> a folder of wheels elsewhere
    (outside / "other").mkdir()
    (outside / "other" / "index.html").write_text("someone else's page")
    (dist / INDEX_DIR / "torch2.15-cu132").symlink_to(outside / "other")
    with pytest.raises(UserError, match=r"is a link, .* is a link — nothing is written through a link"):
        write_torch_indexes(dist, plan.locked_torches_of)
    assert sorted(p.name for p in outside.rglob("*")) == ["index.html", "other", labelled.name]
    assert (outside / "other" / "index.html").read_text() == "someone else's page"
    assert not list(dist.rglob("index.html"))
    (tmp_path / "again").mkdir()
    with pytest.raises(BadBytes, match=r"torch-index/torch2\.14-cu130/torchlike-cuda13x: a link"):
        labelled_copy(_wheel(variant, tmp_path / "again", requires_torch=True), variant.torch, dist)
    assert len(list(outside.glob("*.whl"))) == 1


def test_what_installing_torch_brings_is_resolved_by_pip_and_split_at_nvidias_wheels() -> None:
    name = WheelName.of(Path("torchlike_cuda13x-1.0.0-cp312-cp312-manylinux_2_28_x86_64.whl"))
    found = torch_install("torch==2.14.*", "3.12", name, compatible_platforms(name.platform_tag))
    assert found.others["torch"].startswith("2.14.")
    # torch 2.14 pins CUDA 13.0's wheels through NVIDIA's meta-package, and cuDNN beside them.
    assert found.nvidia["cuda-toolkit"].startswith("13.0.") and "nvidia-cudnn-cu13" in found.nvidia
    assert found.nvidia["nvidia-cuda-runtime"].startswith("13.0.")
    assert not [n for n in found.others if is_nvidia(n)]
    assert f"torch=={found.others['torch']}" in found.other_pins()


@pytest.mark.parametrize(
    "report",
    [
        '{"install": [{"metadata": {"name": "../../etc", "version": "1"}}]}',
        '{"install": [{"metadata": {"name": "torch", "version": "1; rm -rf /"}}]}',
        '{"install": [{"metadata": {"name": "numpy", "version": "2.0"}}]}',  # no torch in it
        '{"install": {"metadata": 1}}',
        "[" * 100,
    ],
)
def test_a_report_pip_would_not_write_is_refused(report: str) -> None:
    with pytest.raises(ToolFailure):
        _from_report(report, "torch==2.14.*")


@pytest.mark.parametrize(
    ("given", "passed", "said"),
    [
        # cpp_extension's `-ccbin $CC`, $CC being the compiler cache's wrapper: dropped, nvcc keeps the factory's.
        (["-ccbin", "/opt/wheelfactory/cached/cc"], [], "dropped -ccbin /opt/wheelfactory/cached/cc"),
        (["--compiler-bindir=/opt/wheelfactory/cached/c++"], [], "dropped --compiler-bindir /opt/wheelfactory/"),
        # The factory's own choice, as CMake hands on CUDAHOSTCXX: kept, and nothing said.
        (["-ccbin=/opt/wheelfactory/nvcc-host/g++"], ["-ccbin", "/opt/wheelfactory/nvcc-host/g++"], ""),
        # Any other replaces the factory's host compiler: kept, and said, for the report.
        (
            ["-ccbin", "/usr/bin/g++-11"],
            ["-ccbin", "/usr/bin/g++-11"],
            "own host compiler /usr/bin/g++-11 (its -ccbin)",
        ),
        (["-ccbin=/usr/bin/g++-11"], ["-ccbin", "/usr/bin/g++-11"], "own host compiler /usr/bin/g++-11 (its -ccbin)"),
    ],
)
def test_nvcc_drops_the_cache_wrappers_ccbin_keeps_the_factorys_and_names_any_other(
    tmp_path: Path, given: list[str], passed: list[str], said: str
) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "libexec").mkdir()
    wrapper = tmp_path / "bin" / "nvcc"
    shutil.copy(REPO / "src/wheelfactory/data/nvcc-wrapper.sh", wrapper)
    real = tmp_path / "libexec" / "nvcc"
    real.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    for script in (wrapper, real):
        script.chmod(0o755)
    done = subprocess.run(
        [wrapper, "-c", "x.cu", *given, "-O3"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.split() == ["-c", "x.cu", *passed, "-O3"]
    assert said in done.stderr if said else done.stderr == ""


OTHERS = "or a torch it is built for (2.15, 2.14, 2.13, 2.12, 2.11: each on its index page under torch-index/)"


@pytest.mark.parametrize(
    ("installed", "said"),
    [
        ("2.14.1+cu130", "None"),
        ("2.15.0", "torch 2.15.0 is installed, but torchlike-cuda13x was built against torch 2.14 — pip install "
         "'torch==2.14.*', or install the build for torch 2.15.0 from the project's index page "
         "torch-index/torch2.15-cu132/"),
        ("2.10.0", "torch 2.10.0 is installed, but torchlike-cuda13x was built against torch 2.14 — pip install "
         f"'torch==2.14.*', {OTHERS}"),
        (None, "torch is not installed: torchlike-cuda13x was built against torch 2.14 — pip install 'torch==2.14.*', "
         f"{OTHERS}"),
    ],
)  # fmt: skip
def test_the_variant_module_names_a_torch_other_than_the_one_it_was_built_against(
    torch_project: Path, tmp_path: Path, installed: str | None, said: str
) -> None:
    assert torch_mismatch_said(torch_project, "torchlike", installed, tmp_path, built_against="2.14") == said


def test_torch_index_command_writes_a_folders_pages_or_says_why_not(
    torch_project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    variant = _variant(torch_project)
    assert variant.torch is not None
    dist = tmp_path / "dist"
    labelled_copy(_wheel(variant, tmp_path, requires_torch=True), variant.torch, dist)
    command = ["--root", str(torch_project), "torch-index", "--matrix", str(torch_project / OFFLINE_MATRIX)]
    assert main([*command, str(dist)]) == 0
    assert (dist / INDEX_DIR / "torch2.14-cu130" / "torchlike-cuda13x" / "index.html").is_file()
    assert main([*command, str(tmp_path / "absent")]) == 2
    assert "no such folder" in capsys.readouterr().err


# The gate's cases below are told on three of the train's five: the newest (PyPI's), the next, the oldest.
TRIO = ("2.15", "2.14", "2.11")


def test_the_plan_has_a_job_per_torch_of_the_train_and_the_gate_takes_exactly_their_files(
    torch_project: Path, tmp_path: Path
) -> None:
    plan = make_plan(torch_project, torch_project / OFFLINE_MATRIX, ["torchlike"])
    builds = plan.as_json()["build"]["include"]
    assert [(job["id"], job["torch"], job["toolkit"], job["args"][:4]) for job in builds] == [
        ("torchlike-cuda13x-torch2.15-manylinux_x86_64", "2.15", "13.2", ["--recipe", "torchlike", "--torch", "2.15"]),
        ("torchlike-cuda13x-torch2.14-manylinux_x86_64", "2.14", "13.0", ["--recipe", "torchlike", "--torch", "2.14"]),
        ("torchlike-cuda13x-torch2.13-manylinux_x86_64", "2.13", "13.0", ["--recipe", "torchlike", "--torch", "2.13"]),
        ("torchlike-cuda13x-torch2.12-manylinux_x86_64", "2.12", "13.0", ["--recipe", "torchlike", "--torch", "2.12"]),
        ("torchlike-cuda13x-torch2.11-manylinux_x86_64", "2.11", "13.0", ["--recipe", "torchlike", "--torch", "2.11"]),
    ]
    jobs = plan.wheel_jobs()
    cp312 = [job.as_json() for job in jobs if job.cell.python == "3.12" and job.build.variant.torch.release in TRIO]
    assert [(job["id"], job["wheel_glob"], job["on_pypi"]) for job in cp312] == [
        ("torchlike-cuda13x-torch2.15-cp312-manylinux_x86_64",
         "torch-index/torch2.15-cu132/torchlike-cuda13x/torchlike_cuda13x-*+pt215cu132-cp312-cp312-manylinux*_x86_64.whl",
         True),
        ("torchlike-cuda13x-torch2.14-cp312-manylinux_x86_64",
         "torch-index/torch2.14-cu130/torchlike-cuda13x/torchlike_cuda13x-*+pt214cu130-cp312-cp312-manylinux*_x86_64.whl",
         False),
        ("torchlike-cuda13x-torch2.11-cp312-manylinux_x86_64",
         "torch-index/torch2.11-cu130/torchlike-cuda13x/torchlike_cuda13x-*+pt211cu130-cp312-cp312-manylinux*_x86_64.whl",
         False),
    ]  # fmt: skip
    # What the release holds for cp312: the 2.15 build under the plain name (PyPI's), each under its label.
    release = tmp_path / "release"
    release.mkdir()
    source = SourceIdentity(**cp312[0]["source"])  # type: ignore[arg-type]
    plain = make_wheel(
        release,
        "torchlike_cuda13x-1.0.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        {"torchlike/libop.so": host_library("libcudart.so.13")},
        metadata=DESCRIBED,
        source=source,
    )
    labelled = []
    for variant in plan.variants:
        assert variant.torch is not None
        if variant.torch.release in TRIO:
            labelled.append(labelled_copy(plain, variant.torch, release))
    assert verify(cp312, wheels_in(release)) == []
    # Without the 2.15 build's job, its files are extra: the plain one among them (PyPI gets only the newest's).
    assert verify(cp312[1:], wheels_in(release)) == [
        f"extra: {plain.name} is not in the plan",
        f"extra: {labelled[0].name} is not in the plan",
    ]
    # A labelled copy missing, or under another torch's page.
    labelled[1].unlink()
    assert verify(cp312, wheels_in(release)) == [
        "missing: no wheel torchlike-cuda13x 1.0.0+pt214cu130 from job torchlike-cuda13x-torch2.14-cp312-"
        "manylinux_x86_64 in torch-index/torch2.14-cu130/torchlike-cuda13x/"
    ]
    moved = release / "torch-index/torch2.14-cu130/torchlike-cuda13x" / labelled[0].name
    labelled[0].rename(moved)
    assert verify(cp312, wheels_in(release))[0] == (
        f"{moved.name}: lies in torch-index/torch2.14-cu130/torchlike-cuda13x/, where job "
        "torchlike-cuda13x-torch2.15-cp312-manylinux_x86_64 puts it in torch-index/torch2.15-cu132/torchlike-cuda13x/"
    )


def test_a_build_asks_for_a_torch_of_the_train_or_is_told_which_there_are(torch_project: Path) -> None:
    request = BuildRequest(torch_project, 13, ["3.12"], ["torchlike"], None, None, torch_project / OFFLINE_MATRIX)
    plan = make_plan(torch_project, torch_project / OFFLINE_MATRIX, ["torchlike"])
    assert [v.key for v in pipeline._variants(plan, request)] == [v.key for v in plan.variants]
    chosen = pipeline._variants(plan, dataclasses.replace(request, torch=["2.14"]))
    assert [v.key for v in chosen] == ["torchlike-cuda13x-torch2.14"]
    with pytest.raises(
        UserError, match=r"--torch 2\.10: the matrix's CUDA 13 torch train is 2\.15, 2\.14, 2\.13, 2\.12, 2\.11 — pick"
    ):
        pipeline._variants(plan, dataclasses.replace(request, torch=["2.10"]))


def test_the_report_keys_each_wheel_by_where_it_goes_in_dist(torch_project: Path, tmp_path: Path) -> None:
    for release, places in (
        ("2.15", ["torchlike_cuda13x-1.0.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                  "torch-index/torch2.15-cu132/torchlike-cuda13x/torchlike_cuda13x-1.0.0+pt215cu132-cp312-cp312-"
                  "manylinux_2_28_x86_64.whl"]),
        ("2.14", ["torch-index/torch2.14-cu130/torchlike-cuda13x/torchlike_cuda13x-1.0.0+pt214cu130-cp312-cp312-"
                  "manylinux_2_28_x86_64.whl"]),
    ):  # fmt: skip
        (tmp_path / release).mkdir()
        variant = _variant(torch_project, release)
        wheel = _wheel(variant, tmp_path / release, requires_torch=True)
        record = WheelRecord(BuiltWheel(variant, Cell("3.12", "linux-x86_64"), wheel, "image", None, None))  # type: ignore[arg-type]
        assert (record.places, record.wheel) == (places, places[0])


def test_a_build_of_another_recipe_keeps_the_pages_of_the_labelled_wheels_in_dist(
    torch_project: Path, tmp_path: Path
) -> None:
    variant = _variant(torch_project)
    assert variant.torch is not None
    dist = torch_project / "dist"
    labelled_copy(_wheel(variant, tmp_path, requires_torch=True), variant.torch, dist)
    request = BuildRequest(torch_project, 13, ["3.12"], ["cuprobe"], None, None, torch_project / OFFLINE_MATRIX)
    plan = make_plan(torch_project, torch_project / OFFLINE_MATRIX, ["cuprobe"])
    assert pipeline.index_pages(request, plan, dist) == ["torch2.14-cu130"]


def test_an_import_that_fails_beside_another_torch_names_the_page_of_the_build_for_it(
    torch_project: Path, tmp_path: Path
) -> None:
    """`python -m torchlike._cuda_variant` imports the package first, whose extension fails to load beside torch
    2.11 (torch's C++ symbols differ): the traceback is followed by the line that names the build for 2.11."""
    plan = make_plan(torch_project, torch_project / OFFLINE_MATRIX, ["torchlike"])
    rendered = next(r for r in render_plan(plan, torch_project) if r.variant.key == "torchlike-cuda13x-torch2.14")
    package = tmp_path / "site" / "torchlike"
    package.mkdir(parents=True)
    (package / "_cuda_variant.py").write_text(rendered.files["_cuda_variant.py"])
    (package / "__init__.py").write_text(
        "raise ImportError('_ops.so: undefined symbol: _ZN3c1019NotImplementedError')\n"
    )
    inject_loader(package / "__init__.py")
    info = tmp_path / "site" / "torch-2.11.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys, runpy; sys.path[:0] = [{str(tmp_path / 'site')!r}]; "
         "runpy.run_module('torchlike._cuda_variant', run_name='__main__')"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1 and "undefined symbol" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "torchlike-cuda13x: torch 2.11.0 is installed, but torchlike-cuda13x was built against torch 2.14 — pip "
        "install 'torch==2.14.*', or install the build for torch 2.11.0 from the project's index page "
        "torch-index/torch2.11-cu130/"
    )


def test_the_plan_says_what_each_recipe_costs(torch_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A torch recipe is one build per torch of the train and platform: `nox -s plan` says so, and how to build one."""
    plan = make_plan(torch_project, torch_project / OFFLINE_MATRIX, ["torchlike"])
    # Of the matrix's six Pythons, each torch has wheels for five (2.15: 3.11 to 3.15; 2.11 to 2.14: 3.10 to 3.14).
    assert {(job.variant.key, job.pythons) for job in plan.build_jobs()} == {
        (f"torchlike-cuda13x-torch{release}", pythons)
        for release, pythons in [("2.15", ("3.11", "3.12", "3.13", "3.14", "3.15"))]
        + [(r, ("3.10", "3.11", "3.12", "3.13", "3.14")) for r in ("2.14", "2.13", "2.12", "2.11")]
    }
    assert not [job for job in plan.wheel_jobs() if "torch2.15-cp310" in job.id or "torch2.14-cp315" in job.id]
    assert plan.costs() == {"torchlike": (5, 25, 5)}
    assert main(["--root", str(torch_project), "plan", "--matrix", str(torch_project / OFFLINE_MATRIX)]) == 0
    said = capsys.readouterr().err
    assert "torchlike: 5 build jobs" in said and "5 torch releases (`--torch RELEASE` builds one)" in said
    assert "cuprobe: 9 build jobs" in said


def _coverage_rows(page: Path) -> dict[tuple[str, str], str]:
    """(Python, platform) -> what a coverage page says of the cell, as its reader sees it."""
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td></tr>", page.read_text(encoding="utf-8"))
    return {(python, platform): html.unescape(status) for python, platform, status in rows}


def test_each_torch_has_a_coverage_page_naming_every_cell_built_excluded_or_missing(
    torch_project: Path, tmp_path: Path
) -> None:
    matrix_path = torch_project / OFFLINE_MATRIX
    matrix = yaml.safe_load(matrix_path.read_text(encoding="utf-8"))
    plan = make_plan(torch_project, matrix_path)
    dist = tmp_path / "dist"
    built = dist / "torch-index/torch2.15-cu132/torchlike-cuda13x"
    built.mkdir(parents=True)
    (built / "torchlike_cuda13x-1.0.0+pt215cu132-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"globbed only")
    pages = write_coverage_pages(dist, plan)
    assert [p.relative_to(dist).as_posix() for p in pages] == [
        f"torch-index/torch{release}/coverage.html"
        for release in ("2.11-cu130", "2.12-cu130", "2.13-cu130", "2.14-cu130", "2.15-cu132")
    ]
    rows = _coverage_rows(dist / "torch-index/torch2.15-cu132/coverage.html")
    assert len(rows) == len(matrix["python"]) * 3  # every Python × every platform of CUDA 13
    assert rows["3.12", "linux-x86_64"] == "built"
    assert rows["3.13", "linux-x86_64"] == "missing"
    # PyPI's torch 2.15.0 has no cp310 wheel, 2.14.1 no cp315 (the train's `pythons`): no job, and the page says so.
    assert rows["3.10", "linux-x86_64"] == "excluded: torch 2.15 has no wheel for CPython 3.10 on linux-x86_64 (PyPI)"
    assert rows["3.12", "windows-amd64"] == "excluded: the recipe builds for other platforms"
    older = _coverage_rows(dist / "torch-index/torch2.14-cu130/coverage.html")
    assert older["3.12", "linux-x86_64"] == "missing"
    assert older["3.15", "linux-x86_64"] == "excluded: torch 2.14 has no wheel for CPython 3.15 on linux-x86_64 (PyPI)"
