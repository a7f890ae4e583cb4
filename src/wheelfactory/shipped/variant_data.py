"""Typed example data of a variant module: what templates/cuda_variant.py.j2 renders for each variant, standing in
for it where the shipped code is linted, type-checked and tested on its own. None of it is shipped."""

from __future__ import annotations

from typing import Any

# A component's spec: its distribution, the components its libraries load at run time (needs), per OS its folder in
# site-packages, its library files and those it opens by name (or None: no wheel for the OS), and the Linux machines
# NVIDIA ships it for (machines; empty: every one).
Spec = dict[str, Any]

DIST_NAME: str = "example-cuda12x"
CUDA_MAJOR: int = 12
CUDA_TOOLKIT: str = "12.9"
TORCH: str | None = None
TORCH_OLDEST: str | None = None
TORCH_PAGES: dict[str, str] = {}
COMPONENTS: dict[str, Spec] = {
    "cudart": {
        "distribution": "nvidia-cuda-runtime-cu12",
        "needs": (),
        "linux": ("nvidia/cuda_runtime/lib", ("libcudart.so.12",), ()),
        "windows": ("nvidia/cuda_runtime/bin", ("cudart64_12.dll",), ()),
        "machines": (),
    },
}
OPTIONAL: dict[str, Spec] = {}
NEEDED: dict[str, Spec] = {}
NO_WHEEL: str = "{distribution} has no {where} wheel"
GPU_CODE: dict[str, Any] = {
    "sass": [75, 80, 90],
    "ptx": [90],
    "ptx_isa": "8.8",
    "minimum_driver": {"linux": "575.51.03", "windows": "576.02"},
    "sass_driver": {"linux": "525.60.13", "windows": "528.33"},
}
RUNS_ON: str = "runs on Turing (sm_75) and newer GPUs"
COVERS: dict[str, dict[str, str]] = {}
NARROWED: dict[str, dict[str, list[int]]] = {}
OTHER_VARIANTS: dict[str, dict[int, dict[str, Any]]] = {}
GENERATIONS: dict[int, str] = {75: "Turing", 80: "Ampere", 90: "Hopper"}
JETSON_PIP_WHEELS: int | None = None
JETPACK: dict[int, str] = {}
GPU_CHECKS: list[tuple[str, str]] = []
