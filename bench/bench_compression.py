"""Measure compressed device code (the factory's default, -Xfatbin=-compress-all) against nvcc's own default, and
print the figures.

1. cuprobe's CUDA 13 wheel for cp312, built through the whole pipeline twice (Docker, the offline image): with
   the recipe as it is, and with `compress_device_code: false`. Figures: the wheel's size and its device code's
   bytes as stored (the report's gpu_code.device_code_bytes).
2. A package with many kernels: CuPy's cupy/random/cupy_distributions.cu (its PyPI sdist, pinned by sha256,
   through the factory's own source fetcher; cuRAND's headers from NVIDIA's wheel of CUDA 13.0) compiled by this
   host's nvcc 13.0 for the release's default architectures with the flags each build would get. Figures: the
   .nv_fatbin section, the shared object, the shared object deflated as a wheel stores it, the compile time.

Usage: PATH=.nox/tests/bin:$PATH .nox/tests/bin/python bench/bench_compression.py [--image manylinux-offline:latest]
[--matrix matrix-offline.yaml] (needs Docker, nvcc 13 and the engine's tools — patchelf — on PATH; about five
minutes on two cores)
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from benchlib import REPO, arguments, show

from wheelfactory.binaries.wheelfile import read_device_code, unpack
from wheelfactory.components import component_table, toolkit_table
from wheelfactory.inputs import SdistSource
from wheelfactory.pipeline import BuildRequest, build
from wheelfactory.plan import copy_inputs, make_plan
from wheelfactory.sources import source_tree
from wheelfactory.toolkit.buildenv import gencode_flags, nvcc_flags

CUPY = SdistSource(sdist="cupy==14.2.0", sha256="cfed725e612178cfbdbf62f4a3a598b60edecbbca718c0d4580c21a16ae4a62c")
KERNELS = "cupy/random/cupy_distributions.cu"


def _cuprobe(args: object, scratch: Path) -> list[tuple[str, str]]:
    figures, sizes = [], {}
    for label, compressed in (("compressed (default)", True), ("nvcc's default", False)):
        root = copy_inputs(REPO, scratch / f"cuprobe-{compressed}")
        recipe = root / "recipes" / "cuprobe" / "recipe.yaml"
        recipe.write_text(recipe.read_text() + f"compress_device_code: {str(compressed).lower()}\n")
        request = BuildRequest(root, 13, ["3.12"], ["cuprobe"], args.image, None, root / args.matrix)  # type: ignore[attr-defined]
        (record,) = build(dataclasses.replace(request, compiler_cache=False))
        assert record.passed, record.why_not()
        (entry,) = json.loads((root / "dist" / "report.json").read_text())["wheels"]
        sizes[compressed] = entry["size_bytes"], entry["gpu_code"]["device_code_bytes"]
        figures.append(
            (
                f"cuprobe-cuda13x cp312 wheel, {label}",
                f"{sizes[compressed][0]:>10,} bytes; device code "
                f"{sizes[compressed][1]:>9,} bytes ({', '.join(entry['gpu_code']['compression'])})",
            )
        )
    figures.append(
        (
            "cuprobe ratio (compressed / nvcc's default)",
            f"wheel {sizes[True][0] / sizes[False][0]:.2f}x, device code {sizes[True][1] / sizes[False][1]:.2f}x",
        )
    )
    return figures


def _curand_headers(scratch: Path) -> Path:
    entry = component_table().get("curand", 13)
    assert entry is not None
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest"]
    command += [str(scratch), "--python-version", "3.12"]
    command += [a for tag in ("manylinux_2_27_x86_64", "manylinux_2_28_x86_64") for a in ("--platform", tag)]
    subprocess.run([*command, entry.build_requirement("13.0")], check=True)
    site = unpack(next(scratch.glob("nvidia_curand-*.whl")), scratch / "curand")
    return site / "nvidia" / "cu13" / "include"


def _many_kernels(scratch: Path) -> list[tuple[str, str]]:
    nvcc = shutil.which("nvcc")
    assert nvcc, "needs nvcc 13 on PATH"
    source = source_tree(CUPY, scratch) / KERNELS
    include = _curand_headers(scratch)
    variant = next(v for v in make_plan(REPO).variants if v.recipe.name == "cuprobe" and v.major == 13)
    archs = toolkit_table().releases["13.0"].default_archs("linux-x86_64")
    figures, found = [], {}
    for label, compressed in (("compressed (default)", True), ("nvcc's default", False)):
        chosen = dataclasses.replace(
            variant, recipe=variant.recipe.model_copy(update={"compress_device_code": compressed})
        )
        library = scratch / f"kernels-{compressed}.so"
        command = [nvcc, *nvcc_flags(chosen), *gencode_flags(archs).split(), f"-I{include}", "-shared"]
        started = time.monotonic()
        subprocess.run([*command, "-Xcompiler", "-fPIC", "-o", str(library), str(source)], check=True)
        seconds = time.monotonic() - started
        entries = read_device_code(library, "linux")
        stored = sum(e.stored_bytes for e in entries)
        deflated = len(zlib.compress(library.read_bytes(), 6))  # a wheel's members are deflated at level 6
        found[compressed] = stored, library.stat().st_size, deflated
        figures.append(
            (
                f"CuPy {KERNELS}, {label}",
                f"device code {stored:>10,} bytes; .so {found[compressed][1]:>10,}; "
                f"in a wheel {deflated:>10,}; {seconds:5.1f} s to compile ({len(entries)} entries)",
            )
        )
    figures.append(
        (
            "CuPy ratio (compressed / nvcc's default)",
            f"device code {found[True][0] / found[False][0]:.2f}x, "
            f"installed .so {found[True][1] / found[False][1]:.2f}x, "
            f"in a wheel {found[True][2] / found[False][2]:.2f}x",
        )
    )
    return figures


def main() -> int:
    args = arguments()
    with tempfile.TemporaryDirectory(prefix="wf-bench-compression-") as scratch_text:
        scratch = Path(scratch_text)
        figures = _many_kernels(scratch)
        figures += _cuprobe(args, scratch)
    show(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
