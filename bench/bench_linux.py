"""Measure the Linux path and print the figures.

(a) `build-cuda12 --python 3.12` through the factory against a plain cibuildwheel run of the same package in the
    same image with an equivalent hand-written configuration (build + auditwheel repair, no audit, no smoke);
(b) cold against warm provisioning of the CUDA 12 toolkit;
(c) the factory's wheel size against what auditwheel makes when it may graft the CUDA libraries.

Usage: python bench/bench_linux.py [--image manylinux-offline:latest] [--matrix matrix-offline.yaml]
(needs Docker; a few minutes)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from wheelfactory import provision as provisioning  # noqa: E402
from wheelfactory.build import stage  # noqa: E402
from wheelfactory.buildenv import cmake_architectures  # noqa: E402
from wheelfactory.pipeline import BuildRequest, build  # noqa: E402
from wheelfactory.plan import copy_inputs, make_plan  # noqa: E402
from wheelfactory.render import render_plan  # noqa: E402

HAND_WRITTEN = """
[build-system]
requires = ["setuptools>=77", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "cuprobe-cuda12x"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = [
    "nvidia-cuda-runtime-cu12>=12.9,<13",
    "nvidia-cuda-nvrtc-cu12>=12.9,<13",
    "nvidia-cublas-cu12>=12.9,<13",
]

[tool.cibuildwheel]
build = "cp312-manylinux_x86_64"
environment-pass = ["WHEELFACTORY_CUDA_PREFIX"]

[tool.cibuildwheel.linux]
manylinux-x86_64-image = "{image}"
environment = {{ CUDA_HOME = "/host$WHEELFACTORY_CUDA_PREFIX", CUDAARCHS = "{archs}", LDFLAGS = "-Wl,--as-needed" }}
repair-wheel-command = "auditwheel repair -w {{dest_dir}} {excludes} {{wheel}}"
"""
EXCLUDES = ["libcuda.so.1", "libcudart.so.12", "libcublas*.so.12", "libnvrtc*.so.12*", "libnccl.so.2"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", default="manylinux-offline:latest")
    parser.add_argument("--matrix", default="matrix-offline.yaml", help="relative to the project")
    args = parser.parse_args()
    figures: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="wf-bench-") as scratch_text:
        scratch = Path(scratch_text)
        root = copy_inputs(REPO, scratch / "project")
        matrix = root / args.matrix
        variant = next(v for v in make_plan(root, matrix).variants if v.major == 12)

        # (b) cold provisioning into an empty cache, then warm.
        # Cold: an empty factory cache, and pip's own HTTP cache bypassed, so every wheel comes from the index.
        os.environ["WHEELFACTORY_CACHE"] = str(scratch / "cold-cache")
        os.environ["PIP_NO_CACHE_DIR"] = "1"
        started = time.monotonic()
        toolkit = provisioning.provision(variant)
        cold = time.monotonic() - started
        del os.environ["PIP_NO_CACHE_DIR"]
        started = time.monotonic()
        warm_toolkit = provisioning.provision(variant)
        warm = time.monotonic() - started
        assert not warm_toolkit.downloaded
        wheels_mb = sum(w.stat().st_size for w in toolkit.wheels) / 1e6
        figures.append(("provision CUDA 12, cold (download + unpack)", f"{cold:.1f} s ({wheels_mb:.0f} MB of wheels)"))
        figures.append(("provision CUDA 12, warm (no network)", f"{warm:.2f} s"))

        # (a) the factory's whole job against plain cibuildwheel on the same staged package.
        started = time.monotonic()
        records = build(BuildRequest(root, 12, ["3.12"], [], args.image, None, matrix))
        factory = time.monotonic() - started
        assert records and records[0].passed, records[0].why_not() if records else "no wheel"
        rendered = next(r for r in render_plan(make_plan(root, matrix), root) if r.variant.major == 12)
        plain_stage = stage(rendered, scratch / "plain")
        (plain_stage / "pyproject.toml").write_text(
            HAND_WRITTEN.format(
                image=args.image,
                excludes=" ".join(f"--exclude '{e}'" for e in EXCLUDES),
                archs=cmake_architectures(variant.cuda_archs),
            )
        )
        env = {**os.environ, "WHEELFACTORY_CUDA_PREFIX": str(toolkit.prefix)}
        started = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "cibuildwheel",
                "--platform",
                "linux",
                "--output-dir",
                str(scratch / "plain-out"),
                ".",
            ],
            env=env,
            cwd=plain_stage,
            check=True,
            capture_output=True,
        )
        plain = time.monotonic() - started
        timings = records[0].built.timings
        figures.append(("build-cuda12 --python 3.12 (factory: build, repair, audit, smoke)", f"{factory:.1f} s"))
        figures.append(
            (
                "  of which build / repair / audit / smoke",
                " / ".join(f"{timings.get(k, 0):.1f}" for k in ("build", "repair", "audit", "smoke")) + " s",
            )
        )
        figures.append(("plain cibuildwheel, hand-written config, same image", f"{plain:.1f} s"))

        # (c) size: the factory's wheel against auditwheel allowed to graft the CUDA libraries.
        wheel = root / "dist" / records[0].wheel
        env = {**os.environ, "LD_LIBRARY_PATH": str(toolkit.lib_dir)}
        started = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "auditwheel",
                "repair",
                "-w",
                str(scratch / "grafted"),
                str(wheel),
            ],
            env=env,
            check=True,
            capture_output=True,
        )
        graft_s = time.monotonic() - started
        grafted = next((scratch / "grafted").glob("*.whl"))
        figures.append(("wheel size, factory (CUDA from NVIDIA's wheels)", f"{wheel.stat().st_size / 1e6:.3f} MB"))
        figures.append(
            (
                "wheel size, auditwheel grafting the CUDA libraries",
                f"{grafted.stat().st_size / 1e6:.1f} MB (repair took {graft_s:.0f} s)",
            )
        )

    width = max(len(k) for k, _ in figures)
    for key, value in figures:
        print(f"{key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
