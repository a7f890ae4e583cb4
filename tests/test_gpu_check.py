"""The GPU tier where there is no GPU: it says so and exits with its own status, before touching anything."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

SCRIPT = REPO / "scripts" / "gpu_check.py"
# A standalone script (standard library only), not part of the engine: loaded from its file.
_spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
assert _spec is not None and _spec.loader is not None
gpu_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_check)


def _no_gpu_here() -> None:
    if gpu_check.gpu_present() is None:
        pytest.skip("this machine has a GPU; the no-GPU path cannot be shown here")


def test_standalone_script_reports_no_gpu_with_its_own_status() -> None:
    _no_gpu_here()
    # -I: no site-packages of the user, no PYTHONPATH — the script needs only the standard library.
    result = subprocess.run(
        [sys.executable, "-I", str(SCRIPT), "--package", "cuprobe"], capture_output=True, text=True, check=False
    )
    assert result.returncode == gpu_check.EXIT_NO_GPU == 4
    assert result.stdout.startswith("no GPU: ")
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_nox_session_reports_no_gpu_with_its_own_status(tmp_path: Path) -> None:
    _no_gpu_here()
    # The GPU is looked for before any wheel is installed, so no wheel is needed to show it.
    result = subprocess.run(
        [sys.executable, "-m", "nox", "-s", "gpu-check", "--", str(tmp_path / "any.whl")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 4, result.stdout + result.stderr
    assert "no GPU: " in result.stdout


@pytest.mark.parametrize("dist", ["cuprobe-cuda11x", "cuprobe-cuda12x", "cuprobe-cuda13x"])
def test_rendered_gpu_checks_are_the_recipes(dist: str) -> None:
    namespace: dict[str, object] = {"__file__": "x"}
    exec(compile((REPO / "build/variants" / dist / "_cuda_variant.py").read_text(), dist, "exec"), namespace)
    checks = namespace["GPU_CHECKS"]
    assert isinstance(checks, list)
    assert [name for name, _ in checks] == [
        "device query",
        "NVRTC saxpy against the host",
        "NVRTC saxpy again, from the on-disk kernel cache",
        "nvcc-compiled SAXPY kernel against the host",
        "SGEMM through cuBLAS against the host",
        "NCCL module availability",
    ]
    for name, code in checks:
        compile(code, name, "exec")
