"""Torch extensions on LibTorch's stable ABI (recipe: torch_abi: stable, torch_target): one wheel per CUDA major that
runs on every torch from its target on.

The recipe is tests/sources/stableop's. The audit runs torch-abi-audit on real ELF files built here with g++, which
import the stable C shim or torch's C++ internals by the symbols a real extension would (their definitions are
torch's, so the files link against nothing of torch). The whole build of stableop, smoke-tested beside the oldest
and the newest torch, is in test_torch_stable_build.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from wheelfactory.binaries.torchabi import stable_abi_problems
from wheelfactory.binaries.wheelfile import pack, read_binaries
from wheelfactory.built import BuiltWheel
from wheelfactory.declared import torch_neighbours
from wheelfactory.errors import InputError, ToolFailure
from wheelfactory.plan import Cell, Variant, make_plan
from wheelfactory.platforms import linux, windows
from wheelfactory.render import render_plan
from wheelfactory.smoke.installs import torch_installs

from .conftest import OFFLINE_MATRIX, REPO, SOURCES, copy_inputs, torch_mismatch_said


@pytest.fixture
def stable_project(tmp_path: Path) -> Path:
    root = copy_inputs(REPO, tmp_path / "project")
    shutil.copytree(SOURCES / "stableop", root / "recipes/stableop/source")
    shutil.copy(SOURCES / "stableop.recipe.yaml", root / "recipes/stableop/recipe.yaml")
    return root


def _variant(root: Path) -> Variant:
    (variant,) = make_plan(root, root / OFFLINE_MATRIX, ["stableop"]).variants
    return variant


def test_a_stable_abi_build_compiles_against_the_matrix_torch_for_its_target_and_requires_every_later_torch(
    stable_project: Path,
) -> None:
    variant = _variant(stable_project)
    assert variant.torch is not None and variant.torch.release == "2.14" and variant.torch_target == "2.11"
    (rendered,) = render_plan(make_plan(stable_project, stable_project / OFFLINE_MATRIX, ["stableop"]), stable_project)
    pyproject = tomllib.loads(rendered.files["pyproject.toml"])
    # Built with the matrix's torch, whose headers know the target; the wheel takes any torch from the target on.
    assert "torch==2.14.*" in pyproject["tool"]["cibuildwheel"]["before-build"]
    assert "torch>=2.11" in pyproject["project"]["dependencies"]
    assert not [line for line in pyproject["project"]["dependencies"] if line.startswith("torch==")]
    module = rendered.files["_cuda_variant.py"]
    assert "TORCH = '2.14'" in module and "TORCH_OLDEST = '2.11'" in module
    # Every compile gets the target: nvcc's, setuptools' (CPPFLAGS), CMake's (CXXFLAGS), and on Windows cl.exe's.
    define = "-DTORCH_TARGET_VERSION=0x020b000000000000"
    env = linux.environment(variant, "linux-x86_64")
    assert define in env["NVCC_PREPEND_FLAGS"].split()
    assert env["CPPFLAGS"] == f"$CPPFLAGS {define}" and env["CXXFLAGS"] == f"$CXXFLAGS {define}"
    assert windows.Windows().environment(variant, "windows-x86_64")["CL"] == f"$CL {define}"


def test_a_stable_abi_wheel_is_left_out_only_where_no_torch_of_its_range_or_the_one_it_builds_with_has_a_wheel(
    stable_project: Path,
) -> None:
    """PyPI's torch 2.15 has no cp310 wheel, 2.11 to 2.14 no cp315 (the matrix train's `pythons`). stableop's abi3
    wheel is built with 3.10 against 2.14 and serves 3.10 to 3.15: 3.15 runs with 2.15. One wheel per Python
    (wheel_abi: cpython) needs the build's torch for each: 3.15 is left out, and says why."""
    (cell,) = _variant(stable_project).cells
    assert (cell.python, cell.pythons) == ("3.10", ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15"))
    # Smoke-tested beside the oldest torch a user of that Python has, and the newest pip takes.
    beside = {python: torch_neighbours(_variant(stable_project), python, "linux-x86_64") for python in cell.pythons}
    assert beside["3.10"] == ["torch==2.11.*", "torch>=2.11"] and beside["3.15"] == ["torch==2.15.*", "torch>=2.11"]
    recipe = stable_project / "recipes/stableop/recipe.yaml"
    recipe.write_text(recipe.read_text().replace("wheel_abi: abi3\n", ""))
    variant = _variant(stable_project)
    assert [c.python for c in variant.cells] == ["3.10", "3.11", "3.12", "3.13", "3.14"]
    assert variant.torch_gap("3.15", "linux-x86_64") == (
        "torch 2.14, which the build compiles against, has no wheel for CPython 3.15 on linux-x86_64 (PyPI)"
    )
    matrix = stable_project / OFFLINE_MATRIX
    text = re.sub(r"pythons: \[[^]]*\]", 'pythons: ["3.13"]', matrix.read_text())
    matrix.write_text(text)
    assert _variant(stable_project).torch_gap("3.12", "linux-x86_64") == (
        "no torch from 2.11 to 2.15 has a wheel for CPython 3.12 on linux-x86_64 (PyPI)"
    )


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ('torch: true\ntorch_abi: stable\ntorch_target: "2.8"', "torch 2.8 has no stable ABI (it came in 2.9)"),
        ('torch: true\ntorch_abi: stable\ntorch_target: "2.16"',
         "torch 2.16 is newer than every torch the build may compile against (the newest: CUDA 13's 2.15)"),
        ("torch: true\ntorch_abi: stable", 'name the oldest torch it runs on — add torch_target: e.g. "2.11"'),
        ('torch: true\ntorch_abi: release\ntorch_target: "2.11"',
         "only a stable-ABI build runs on a torch other than the one it is built with"),
        ('torch: false\ntorch_abi: stable\ntorch_target: "2.11"', "torch_abi: stable is for a build against torch"),
    ],
)  # fmt: skip
def test_a_stable_abi_recipe_names_a_target_the_build_can_compile_for(
    stable_project: Path, fields: str, said: str
) -> None:
    recipe = stable_project / "recipes/stableop/recipe.yaml"
    text = recipe.read_text().replace('torch: true\ntorch_abi: stable\ntorch_target: "2.11"\n', fields + "\n")
    recipe.write_text(text)
    with pytest.raises(InputError) as raised:
        _variant(stable_project)
    assert said in "\n".join(p.message for p in raised.value.problems)


@pytest.mark.parametrize(
    ("installed", "said"),
    [
        ("2.15.0", "None"),
        ("2.11.0+cu130", "None"),
        ("2.10.0", "torch 2.10.0 is installed, but stableop-cuda13x runs on torch 2.11 or newer — pip install "
         "'torch>=2.11'"),
        (None, "torch is not installed: stableop-cuda13x runs on torch 2.11 or newer — pip install 'torch>=2.11'"),
    ],
)  # fmt: skip
def test_the_variant_module_accepts_every_torch_from_the_target_on(
    stable_project: Path, tmp_path: Path, installed: str | None, said: str
) -> None:
    assert torch_mismatch_said(stable_project, "stableop", installed, tmp_path) == said


# What each test module imports of torch, as a real extension's would: the stable C shim (aoti_torch_*, torch_*, C
# linkage), a shim function torch 2.13 brought, or a C++ function of torch's internals (at::).
STABLE = """
#include <cstdint>
extern "C" int aoti_torch_get_device_type(void*, int32_t*);
extern "C" int aoti_torch_get_current_cuda_stream(int32_t, void**);
extern "C" int op(void* t) {
  int32_t d;
  void* s;
  return aoti_torch_get_current_cuda_stream(0, &s) + aoti_torch_get_device_type(t, &d);
}
"""
NEWER = """
extern "C" int aoti_torch_cpu_grid_sampler_3d(void*, void*, long, long, int, void**);
extern "C" int op(void* t) { void* r; return aoti_torch_cpu_grid_sampler_3d(t, t, 0, 0, 0, &r); }
"""
UNSTABLE = """
namespace at { struct Tensor; Tensor& zero_(Tensor&); }
extern "C" void* op(void* t) { return &at::zero_(*static_cast<at::Tensor*>(t)); }
"""
NO_TORCH = 'extern "C" int op(int x) { return x + 1; }\n'


def _stable_wheel(work: Path, modules: dict[str, str]) -> Path:
    """A cp310-abi3 manylinux wheel of stableop with one module per entry (name -> C++ source), each a real ELF
    file that leaves its imports undefined, as a module linked against torch's libraries does."""
    tree = work / "tree"
    package = tree / "stableop"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name, code in modules.items():
        (work / f"{name}.cpp").write_text(code)
        target = package / f"{name}.abi3.so"
        subprocess.run(["g++", "-shared", "-fPIC", "-o", target, work / f"{name}.cpp"], check=True, capture_output=True)
    info = tree / "stableop_cuda13x-0.3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: stableop-cuda13x\nVersion: 0.3.0\n")
    (info / "WHEEL").write_text(
        "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp310-abi3-manylinux_2_28_x86_64\n"
    )
    (work / "built").mkdir()
    return pack(tree, work / "built")


def test_torch_abi_audit_passes_the_stable_shim_and_names_what_leaves_it_or_needs_a_newer_torch(
    tmp_path: Path,
) -> None:
    wheel = _stable_wheel(tmp_path, {"_stable": STABLE, "_newer": NEWER, "_unstable": UNSTABLE, "_plain": NO_TORCH})
    binaries = read_binaries(tmp_path / "tree", "linux").values()
    problems = stable_abi_problems(wheel, "2.11", binaries)
    assert problems == [
        "stableop/_newer.abi3.so: needs torch 2.13.0 (aoti_torch_cpu_grid_sampler_3d), newer than its torch_target "
        "2.11 (torch-abi-audit) — raise torch_target, or keep to what torch 2.11 has",
        # A symbol with "::" is shown quoted: CI reads a line that starts with it as a command.
        "stableop/_unstable.abi3.so: uses 'at::zero_(at::Tensor&)', outside LibTorch's stable ABI (torch-abi-audit) — "
        "keep to torch/csrc/stable and torch/headeronly, or build it for one torch release (torch_abi: release)",
    ]
    # Targeting the torch that brought the newer function, only the module outside the stable ABI is refused.
    assert [p.split(":")[0] for p in stable_abi_problems(wheel, "2.13", binaries)] == ["stableop/_unstable.abi3.so"]


def test_a_torch_built_for_another_cuda_major_is_refused_by_name(stable_project: Path, tmp_path: Path) -> None:
    # pip resolves for real (metadata only): PyPI's torch 2.10 is built for CUDA 12.8 (2.11 on for CUDA 13). Among
    # CI's 15 slowest (23 s, 2026-11-26): the resolution reads torch's and its NVIDIA wheels' metadata from the
    # index — the refusal rests on what pip really resolves, so it is not stubbed.
    wheel = _stable_wheel(tmp_path, {"_C": STABLE})
    built = BuiltWheel(_variant(stable_project), Cell("3.10", "linux-x86_64"), wheel, "image", None, None)  # type: ignore[arg-type]
    with pytest.raises(ToolFailure) as raised:
        torch_installs(built, "torch==2.10.*", ("3.12",))
    said = str(raised.value)
    assert "torch==2.10.* installs torch 2.10." in said and ", built for CUDA 12 (nvidia-cuda-runtime-cu12==12." in said
    assert said.endswith("not CUDA 13 — raise torch_target to a torch built for CUDA 13")
