"""Builds against torch (torch.utils.cpp_extension): the matrix's torch per CUDA major, the recipe's libraries
provided by a dependency, and the per-(torch, CUDA) index pages.

The repair and the audit run on real ELF files built here with gcc: a stand-in for torch's libc10.so and an
extension module linked to it, in a wheel whose metadata does or does not require torch. The index pages are read
by pip itself. The whole build of a real torch extension (torchsort, from its PyPI sdist) is in
test_upstream.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from wheelfactory.audit import audit_wheel
from wheelfactory.binaries.wheelfile import WheelName, compatible_platforms, pack
from wheelfactory.built import BuiltWheel
from wheelfactory.cli import main
from wheelfactory.declared import excluded_libraries
from wheelfactory.errors import InputError, ToolFailure, UserError
from wheelfactory.plan import Cell, Variant, make_plan
from wheelfactory.platforms import linux
from wheelfactory.pytorch.index_pages import INDEX_DIR, write_torch_indexes
from wheelfactory.pytorch.install import _from_report, is_nvidia, torch_install
from wheelfactory.render import render_plan
from wheelfactory.repair import repair

from .conftest import OFFLINE_MATRIX, REPO, copy_inputs, torch_mismatch_said

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
  torchlike._ops: [torch]
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


def _variant(root: Path) -> Variant:
    return make_plan(root, root / OFFLINE_MATRIX, ["torchlike"]).variants[0]


def test_a_torch_build_takes_the_matrix_torch_its_toolkit_and_pins_both_build_and_wheel(torch_project: Path) -> None:
    variant = _variant(torch_project)
    assert variant.torch is not None and (variant.torch.release, variant.torch.cuda) == ("2.14", "13.0")
    assert variant.cuda.toolkit == variant.torch.cuda
    (rendered,) = render_plan(make_plan(torch_project, torch_project / OFFLINE_MATRIX, ["torchlike"]), torch_project)
    pyproject = tomllib.loads(rendered.files["pyproject.toml"])
    # Whatever the sdist says (torch>=1.7.1 would take the newest torch, built for another CUDA): the matrix's.
    assert pyproject["build-system"]["requires"] == ["setuptools>=61", "torch==2.14.*", "ninja"]
    dependencies = pyproject["project"]["dependencies"]
    assert dependencies[:2] == ["torch==2.14.*", "numpy"] and "torch>=1.7.1" not in dependencies
    assert "TORCH = '2.14'" in rendered.files["_cuda_variant.py"]
    # torch's libraries are never grafted by auditwheel.
    assert {"libc10.so", "libtorch*.so"} <= set(excluded_libraries(variant, "linux"))
    assert "libc10.so" not in excluded_libraries(variant, "windows")
    # PyPI's torch needs no index of its own; PyTorch's comes after the host's extra ones.
    assert "PIP_EXTRA_INDEX_URL" not in linux.environment(variant, "linux-x86_64")
    other = variant.cuda.model_copy(
        update={"torch": variant.cuda.torch.model_copy(update={"index": "https://download.pytorch.org/whl/cu130"})}  # type: ignore[union-attr]
    )
    moved = Variant(variant.recipe, variant.recipe_dir, other, variant.cells, variant.requires_python)
    assert linux.environment(moved, "linux-x86_64")["PIP_EXTRA_INDEX_URL"] == (
        "$PIP_EXTRA_INDEX_URL https://download.pytorch.org/whl/cu130"
    )


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


def test_the_matrix_torch_must_be_a_known_release_of_its_major(torch_project: Path) -> None:
    matrix = torch_project / OFFLINE_MATRIX
    wrong = 'torch: {release: "2.14", cuda: "12.9", index: "http://x"}'
    matrix.write_text(matrix.read_text().replace('torch: {release: "2.14", cuda: "13.0"}', wrong))
    with pytest.raises(InputError) as raised:
        _variant(torch_project)
    messages = "\n".join(p.message for p in raised.value.problems)
    assert "torch's CUDA 12.9 is not a CUDA 13 release" in messages
    assert "is not an https:// URL" in messages


def _gcc(*args: str | Path) -> None:
    subprocess.run(["gcc", *map(str, args)], check=True, capture_output=True)


def _wheel(variant: Variant, work: Path, requires_torch: bool, bundle: bool = False) -> Path:
    """A cp312 manylinux wheel of torchlike whose _ops module links a stand-in libc10.so (as auditwheel leaves
    it), with or without Requires-Dist: torch, and with or without a vendored copy of the library."""
    (work / "c10.c").write_text("int c10_value(void) { return 10; }\n")
    _gcc("-shared", "-fPIC", "-Wl,-soname,libc10.so", "-o", work / "libc10.so", work / "c10.c")
    tree = work / "tree"
    package = tree / "torchlike"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (work / "ops.c").write_text("int c10_value(void);\nint ops(void) { return c10_value(); }\n")
    module = package / "_ops.cpython-312-x86_64-linux-gnu.so"
    _gcc("-shared", "-fPIC", "-Wl,--no-as-needed", "-o", module, work / "ops.c", f"-L{work}", "-lc10")
    if bundle:
        (tree / "torchlike.libs").mkdir()
        shutil.copy(work / "libc10.so", tree / "torchlike.libs" / "libc10-0123abcd.so")
    info = tree / "torchlike_cuda13x-1.0.0.dist-info"
    info.mkdir()
    requires = "Requires-Dist: torch==2.14.*\n" if requires_torch else ""
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: torchlike-cuda13x\nVersion: 1.0.0\nRequires-Python: >=3.10\n{requires}"
    )
    (info / "WHEEL").write_text(
        "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp312-cp312-manylinux_2_28_x86_64\n"
    )
    (work / "built").mkdir()
    return pack(tree, work / "built")


def _repaired_audit(variant: Variant, wheel: Path, out: Path) -> tuple[BuiltWheel, list[str]]:
    built = BuiltWheel(variant, Cell("3.12", "linux-x86_64"), wheel, "image", None, None)  # type: ignore[arg-type]
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
    assert ops.rpath == ("$ORIGIN/../torch/lib",)  # read back from the repaired wheel's file
    audit = audit_wheel(built)
    assert [b.providers for b in audit.binaries] == [["torch"]]


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
    recipe.write_text(recipe.read_text().replace("torchlike._ops: [torch]", "torchlike._ops: []"))
    variant = _variant(torch_project)
    _, problems = _repaired_audit(variant, _wheel(variant, tmp_path, True, bundle=True), tmp_path / "out")
    assert problems == [
        "torchlike/_ops.cpython-312-x86_64-linux-gnu.so: needs libc10.so (torch's) but may link nothing — add torch "
        "to its policy in the recipe, or stop linking it",
        "torchlike.libs/libc10-0123abcd.so: is torch's library, bundled in the wheel — it must come from torch (the "
        "repair excludes what provided_libraries names: is the name right?)",
    ]


def test_the_torch_index_page_serves_the_wheel_to_pip(torch_project: Path, tmp_path: Path) -> None:
    plan = make_plan(torch_project, torch_project / OFFLINE_MATRIX)
    (tmp_path / "work").mkdir()
    wheel = _wheel(_variant(torch_project), tmp_path / "work", requires_torch=True)
    dist = tmp_path / "dist"
    dist.mkdir()
    shutil.copy(wheel, dist / wheel.name)
    # Not indexed: a wheel of a variant built without torch, and a file that is no wheel's name.
    (dist / "cuprobe_cuda13x-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"not read")
    (dist / "not-a-wheel.whl").write_bytes(b"")
    assert write_torch_indexes(dist, plan.locked_torch_of) == ["torch2.14-cu130"]
    index = dist / INDEX_DIR / "torch2.14-cu130"
    assert sorted(p.name for p in index.iterdir()) == ["index.html", "torchlike-cuda13x"]
    page = (index / "torchlike-cuda13x" / "index.html").read_text()
    assert 'data-requires-python="&gt;=3.10"' in page and "#sha256=" in page
    fetched = tmp_path / "fetched"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--isolated", "--dest", str(fetched),
         "--index-url", index.as_uri() + "/", "--python-version", "3.12", "--only-binary", ":all:",
         "--platform", "manylinux_2_28_x86_64", "torchlike-cuda13x"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert [p.name for p in fetched.iterdir()] == [wheel.name]
    # Once no wheel qualifies, the pages go.
    (dist / wheel.name).unlink()
    assert write_torch_indexes(dist, plan.locked_torch_of) == [] and not (dist / INDEX_DIR).exists()


def test_a_wheel_that_does_not_require_its_variants_torch_gets_no_page(torch_project: Path, tmp_path: Path) -> None:
    plan = make_plan(torch_project, torch_project / OFFLINE_MATRIX)
    wheel = _wheel(_variant(torch_project), tmp_path, requires_torch=False)
    with pytest.raises(UserError, match=r"does not require torch==2\.14\.\*, the torch its variant is built against"):
        write_torch_indexes(wheel.parent, plan.locked_torch_of)
    assert not (wheel.parent / INDEX_DIR).exists()


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


@pytest.mark.parametrize(
    ("installed", "said"),
    [
        ("2.14.1+cu130", "None"),
        ("2.13.0", "torch 2.13.0 is installed, but torchlike-cuda13x was built against torch 2.14 — pip install "
         "'torch==2.14.*'"),
        (None, "torch is not installed: torchlike-cuda13x was built against torch 2.14 — pip install 'torch==2.14.*'"),
    ],
)  # fmt: skip
def test_the_variant_module_names_a_torch_other_than_the_one_it_was_built_against(
    torch_project: Path, tmp_path: Path, installed: str | None, said: str
) -> None:
    assert torch_mismatch_said(torch_project, "torchlike", installed, tmp_path) == said


def test_torch_index_command_writes_a_folders_pages_or_says_why_not(
    torch_project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _wheel(_variant(torch_project), tmp_path, requires_torch=True)
    command = ["--root", str(torch_project), "torch-index", "--matrix", str(torch_project / OFFLINE_MATRIX)]
    assert main([*command, str(wheel.parent)]) == 0
    assert (wheel.parent / INDEX_DIR / "torch2.14-cu130" / "torchlike-cuda13x" / "index.html").is_file()
    assert main([*command, str(tmp_path / "absent")]) == 2
    assert "no such folder" in capsys.readouterr().err
