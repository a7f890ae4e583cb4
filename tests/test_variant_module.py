"""The variant module's answer on the user's machine: which GPUs the wheel's code runs on, whether this machine's
GPUs and driver meet it, and where to go when not.

This host has no GPU and no NVIDIA driver. The GPUs and the driver are the one thing stood in for here: the
module's `gpus`, `_driver_version` and `_nvrtc_version` are replaced in its namespace (what the CUDA driver API,
NVML and NVRTC would answer on a machine with a GPU); everything else is the rendered module as it ships. The
same module runs on real GPUs in docs/gpu.md.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from wheelfactory.plan import make_plan
from wheelfactory.render import render_plan


@pytest.fixture
def modules(project: Path, tmp_path: Path) -> dict[int, Path]:
    """cuprobe's rendered variant module per CUDA major, as a package's own `_cuda_variant.py`."""
    found = {}
    for rendered in render_plan(make_plan(project), project):
        if rendered.variant.recipe.name == "cuprobe":
            package = tmp_path / f"cuda{rendered.variant.major}" / "cuprobe"
            package.mkdir(parents=True)
            (package / "__init__.py").write_text("from . import _cuda_variant\n")
            (package / "_cuda_variant.py").write_text(rendered.files["_cuda_variant.py"])
            found[rendered.variant.major] = package / "_cuda_variant.py"
    return found


def _module(path: Path, gpus: list[tuple[int, str, int]], driver: str, cuda: tuple[int, int]) -> dict[str, Any]:
    namespace = runpy.run_path(str(path), run_name="cuprobe._cuda_variant")
    namespace["diagnose"].__globals__.update(
        gpus=lambda: (cuda, gpus, ""), _driver_version=lambda: driver, _nvrtc_version=lambda: None
    )
    return namespace


def _python(module: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """This host's Python, run beside the package that holds `module`, with nothing else on PYTHONPATH."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=module.parent.parent,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": ""},
    )


def test_a_gpu_the_wheel_has_no_code_for_is_sent_to_the_build_that_has(modules: dict[int, Path]) -> None:
    variant = _module(modules[12], [(0, "Tesla P100-PCIE-16GB", 60)], "550.54.14", (12, 4))
    lines, troubles = variant["diagnose"]()
    text = "\n".join(lines)
    assert troubles
    assert (
        "GPU 0: Tesla P100-PCIE-16GB, compute capability 6.0 (Pascal): NO code for it (no kernel image is "
        "available) — cuprobe-cuda11x carries sm_60" in text
    ), text


def test_gpus_that_run_natively_or_through_jit_and_a_driver_too_old(modules: dict[int, Path]) -> None:
    gpus = [(0, "NVIDIA H100 80GB HBM3", 90), (1, "NVIDIA GeForce RTX 5090", 120), (2, "NVIDIA GB10", 121)]
    variant = _module(modules[13], gpus, "580.95.05", (13, 0))
    lines, troubles = variant["diagnose"]()
    text = "\n".join(lines)
    assert not troubles, text
    assert "GPU 0: NVIDIA H100 80GB HBM3, compute capability 9.0 (Hopper): runs natively (SASS sm_90)" in text
    assert "GPU 2: NVIDIA GB10, compute capability 12.1 (Blackwell): runs natively (SASS sm_120)" in text
    assert "minimum driver: 580.65.06" in text and "Turing to Blackwell natively (sm_75–sm_120)" in text

    # CUDA 11's wheel on a Hopper GPU with a driver of CUDA 11.4: SASS for sm_90 needs only 450.80.02; an
    # Ada GPU runs sm_86 SASS; a driver older than the major's floor is named.
    variant = _module(modules[11], [(0, "NVIDIA L4", 89)], "450.51.06", (11, 0))
    lines, troubles = variant["diagnose"]()
    text = "\n".join(lines)
    assert troubles and "runs natively (SASS sm_86)" in text
    assert "the driver 450.51.06 is older than the 450.80.02 this needs — update the NVIDIA driver" in text


def test_nvrtc_newer_than_the_driver_is_warned_of(modules: dict[int, Path]) -> None:
    variant = _module(modules[12], [(0, "NVIDIA A100-SXM4-80GB", 80)], "550.54.14", (12, 4))
    variant["diagnose"].__globals__["_nvrtc_version"] = lambda: ((12, 9), "/site/nvidia/cuda_nvrtc/lib/libnvrtc.so.12")
    lines, troubles = variant["diagnose"]()
    text = "\n".join(lines)
    assert "NVRTC 12.9 (/site/nvidia/cuda_nvrtc/lib/libnvrtc.so.12); the driver supports CUDA 12.4" in text
    assert "warning: NVRTC 12.9 is newer than the driver: PTX it writes is rejected" in text
    assert not troubles  # a warning: code compiled to CUBIN (as cuprobe's) runs


def test_without_a_driver_the_diagnostic_says_so_and_exits_0(modules: dict[int, Path]) -> None:
    """This host, as it is: no driver. The module runs as `python -m`, exit 0 (nothing here cannot run it)."""
    run = _python(modules[13], "-m", "cuprobe._cuda_variant")
    assert run.returncode == 0, run.stderr
    assert "driver: no NVIDIA driver here (libcuda.so.1 not found)" in run.stdout
    assert "GPU code: SASS sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120; PTX compute_120 (ISA 9.0)" in run.stdout


@pytest.mark.parametrize(
    "error",
    [
        "CUDA error: no kernel image is available for execution on the device",
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with an unsupported toolchain.",
        "CUDA driver version is insufficient for CUDA runtime version",
    ],
)
def test_the_three_failures_point_at_the_diagnostic_without_hiding_the_error(
    error: str, modules: dict[int, Path]
) -> None:
    run = _python(modules[12], "-c", f"import cuprobe\nraise RuntimeError({error!r})")
    assert run.returncode == 1
    assert f"RuntimeError: {error}" in run.stderr  # the traceback, as Python prints it
    assert run.stderr.rstrip().endswith(
        "cuprobe-cuda12x: `python -m cuprobe._cuda_variant` says which GPUs and drivers this wheel supports"
    )
    other = _python(modules[12], "-c", "import cuprobe\nraise RuntimeError('something else')")
    assert "_cuda_variant" not in other.stderr


def test_an_optional_part_with_no_wheel_for_this_machine_is_said_so(
    modules: dict[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The machine is stood in for (this host is x86_64): NVIDIA ships no nvidia-nccl-cu11 for aarch64, so there the
    # module names that instead of a pip fix, and loads nothing for it. The aarch64 build under QEMU shows the same.
    variant = runpy.run_path(str(modules[11]), run_name="cuprobe._cuda_variant")
    assert variant["no_wheel"]("nccl") is None
    monkeypatch.setattr("platform.machine", lambda: "aarch64")
    assert variant["no_wheel"]("nccl") == "nvidia-nccl-cu11 has no linux aarch64 wheel"
    assert variant["no_wheel"]("cudart") is None
    rows = {component: why for component, _, _, why in variant["report"]() if component}
    assert rows["nccl"] == "nvidia-nccl-cu11 has no linux aarch64 wheel"


def _installed(site: Path, name: str, files: list[str]) -> None:
    """Metadata of an installed distribution as pip writes it: <name>-<version>.dist-info with its RECORD."""
    info = site / f"{name.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in [*files, f"{info.name}/RECORD"]))


def test_two_distributions_of_one_package_are_named_at_import_and_by_the_diagnostic(
    modules: dict[int, Path],
) -> None:
    """Beside the package: its own metadata, another variant's (whose RECORD holds the package's files too), a
    legacy egg-info of the upstream package (top_level.txt), and a neighbour whose name only begins alike."""
    site = modules[12].parent.parent
    _installed(site, "cuprobe-cuda12x", ["cuprobe/__init__.py", "cuprobe/_cuda_variant.py"])
    _installed(site, "cuprobe-extras", ["cuprobe_extras/__init__.py"])
    alone = _python(modules[12], "-W", "error", "-c", "import cuprobe")
    diagnostic = _python(modules[12], "-m", "cuprobe._cuda_variant")
    assert alone.returncode == 0 and not alone.stderr, alone.stderr
    assert diagnostic.returncode == 0 and "installed together" not in diagnostic.stdout

    _installed(site, "cuprobe-cuda13x", ["cuprobe/__init__.py", "cuprobe/_cuda_variant.py"])
    (site / "cuprobe-0.9-py3.12.egg-info").mkdir()
    (site / "cuprobe-0.9-py3.12.egg-info" / "top_level.txt").write_text("cuprobe\n")
    warned = _python(modules[12], "-c", "import cuprobe")
    assert warned.returncode == 0
    assert warned.stderr.count("UserWarning") == 1, warned.stderr
    assert (
        "cuprobe-cuda12x and cuprobe, cuprobe-cuda13x are installed together and provide the same package "
        "'cuprobe'" in warned.stderr
    )
    assert "pip uninstall -y cuprobe-cuda12x cuprobe cuprobe-cuda13x" in warned.stderr
    assert "cuprobe-extras" not in warned.stderr
    strict = _python(modules[12], "-W", "error", "-c", "import cuprobe")
    assert strict.returncode == 1 and "UserWarning: cuprobe-cuda12x and cuprobe" in strict.stderr
    diagnostic = _python(modules[12], "-m", "cuprobe._cuda_variant")
    assert diagnostic.returncode == 1
    assert "installed together: cuprobe-cuda12x and cuprobe, cuprobe-cuda13x" in diagnostic.stdout


def test_a_jetson_is_recognised_and_told_whether_nvidia_pip_wheels_run_on_it(modules: dict[int, Path]) -> None:
    """The board and its L4T release stand in for /etc/nv_tegra_release and the device tree: CUDA 12's pip
    wheels run on no Jetson, CUDA 13's need JetPack 7 (L4T R38)."""
    thor = (0, "NVIDIA Jetson AGX Thor", 110)
    for major, l4t, served, words in [
        (12, (36, 4), False, "NVIDIA's CUDA 12 pip wheels, built for SBSA servers, do not run on a Jetson"),
        (13, (36, 4), False, "NVIDIA's CUDA 13 pip wheels need JetPack 7 (L4T R38 or later) on a Jetson"),
        (13, (38, 2), True, "NVIDIA's CUDA 13 pip wheels run on this JetPack"),
    ]:
        variant = _module(modules[major], [thor], "580.00", (13, 0))
        variant["diagnose"].__globals__["_tegra"] = lambda l4t=l4t: (l4t, "NVIDIA Jetson AGX Thor Developer Kit")
        lines, troubles = variant["diagnose"]()
        jetson = next(line for line in lines if line.startswith("Jetson: "))
        assert jetson.startswith("Jetson: NVIDIA Jetson AGX Thor Developer Kit, L4T R{}.{}".format(*l4t)), jetson
        assert words in jetson
        if not served:
            assert troubles


def test_the_products_of_each_platform_are_named_with_how_they_run(modules: dict[int, Path]) -> None:
    """The planned code of cuprobe for CUDA 13: on linux-aarch64 Thor and Orin natively, DGX Spark through sm_120
    SASS, GB300 through sm_100; on x86_64, B300 through sm_100 and no product left without code."""
    namespace = runpy.run_path(str(modules[13]), run_name="cuprobe._cuda_variant")
    aarch64, x86_64 = namespace["COVERS"]["linux-aarch64"], namespace["COVERS"]["linux-x86_64"]
    assert aarch64["Jetson Thor (sm_110)"] == "natively (sm_110)"
    assert aarch64["Jetson Orin (sm_87)"] == "natively (sm_87)"
    assert aarch64["DGX Spark (GB10) (sm_121)"] == "natively (sm_120)"
    assert aarch64["GB300 (sm_103)"] == "natively (sm_100)"
    assert x86_64["B300 (sm_103)"] == "natively (sm_100)"
    assert "Jetson Thor (sm_110)" not in x86_64
    assert x86_64["Tesla V100 (sm_70)"] == "not at all (no kernel image)"  # CUDA 13 has no sm_70
    namespace["diagnose"].__globals__["_platform"] = lambda: "linux-aarch64"
    lines, _ = namespace["diagnose"]()
    assert "GPUs of linux-aarch64 machines:" in lines and "  Jetson Thor (sm_110): natively (sm_110)" in lines
    # CUDA 12's defaults are the same on both: Thor (sm_101 then) is not among them.
    covers12 = runpy.run_path(str(modules[12]), run_name="cuprobe._cuda_variant")["COVERS"]
    assert covers12["linux-aarch64"]["Jetson Thor (sm_110)"] == "not at all (no kernel image)"
