"""Provisioning from NVIDIA's wheels gives a working CUDA_HOME: CUDA 13's nvcc compiles a kernel with it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from wheelfactory.plan import copy_inputs, make_plan
from wheelfactory.provision import link_name, provision

from .conftest import REPO

RECIPE = """
name: kernels
version: "0.1.0"
import: kernels
source: {path: source}
cuda: [13]
components: [cudart, nvcc]
modules:
  kernels._k: [cudart]
"""


@pytest.mark.slow
def test_cuda13_nvcc_from_the_wheels_compiles_a_kernel(tmp_path: Path) -> None:
    root = copy_inputs(REPO, tmp_path / "project")
    (root / "recipes" / "kernels").mkdir()
    (root / "recipes" / "kernels" / "recipe.yaml").write_text(RECIPE)
    variant = next(v for v in make_plan(root, recipe_names=["kernels"]).variants)
    toolkit = provision(variant)
    nvcc = toolkit.prefix / "bin" / "nvcc"
    assert nvcc.is_symlink()
    (tmp_path / "k.cu").write_text(
        "#include <cuda_runtime.h>\n__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }\n"
        "int launch(float *x) { scale<<<1, 32>>>(x, 2.0f); return cudaGetLastError(); }\n"
    )
    # This host has a CUDA 13.0 toolkit of its own on PATH; the build puts the prefix's bin/ first, as here.
    env = {**os.environ, "PATH": f"{toolkit.prefix / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    compiled = subprocess.run(
        [
            str(nvcc),
            "-arch=sm_90",
            "-c",
            str(tmp_path / "k.cu"),
            "-o",
            str(tmp_path / "k.o"),
            f"-I{toolkit.prefix / 'include'}",
        ],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert compiled.returncode == 0, compiled.stderr
    assert (tmp_path / "k.o").stat().st_size > 0


@pytest.mark.parametrize(
    ("dll", "name"),
    [
        ("cudart64_110.dll", "cudart"),
        ("cublas64_12.dll", "cublas"),
        ("cublasLt64_13.dll", "cublasLt"),
        ("nvrtc64_120_0.dll", "nvrtc"),
        ("nvJitLink_130_0.dll", "nvJitLink"),
        ("curand64_10.dll", "curand"),
        ("nvrtc64_120_0.alt.dll", "nvrtc"),
    ],
)
def test_import_library_names_are_the_link_names(dll: str, name: str) -> None:
    assert link_name(dll) == name
