"""What the benchmarks share: the engine from this checkout, their arguments, and printing their figures."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

# cuprobe's variant built by cibuildwheel alone, configured by hand as a project without the factory would: the
# toolkit's CUDA_HOME, the variant's architectures, auditwheel told to leave CUDA out; no audit, no smoke.
HAND_WRITTEN = """
[build-system]
requires = ["setuptools>=77", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "cuprobe-cuda{major}x"
version = "0.1.0"
requires-python = ">=3.10"

[tool.cibuildwheel]
build = "cp312-manylinux_x86_64"
environment-pass = ["WHEELFACTORY_CUDA_PREFIX"]

[tool.cibuildwheel.linux]
manylinux-x86_64-image = "{image}"
environment = {{ CUDA_HOME = "/host$WHEELFACTORY_CUDA_PREFIX", CUDAARCHS = "{archs}", LDFLAGS = "-Wl,--as-needed" }}
repair-wheel-command = "auditwheel repair -w {{dest_dir}} {excludes} {{wheel}}"
"""
EXCLUDES = ["libcuda.so.1", "libcudart.so.{major}", "libcublas*.so.{major}", "libnvrtc*.so.{major}*", "libnccl.so.2"]


def plain_cibuildwheel(
    root: Path, major: int, image: str, matrix: Path, scratch: Path
) -> tuple[list[str], dict[str, str], Path]:
    """(command, environment, folder) of a plain cibuildwheel run of cuprobe's CUDA `major` variant, staged from
    the factory's rendering of it with the hand-written configuration, against the factory's warm toolkit."""
    from wheelfactory.build import stage
    from wheelfactory.plan import make_plan
    from wheelfactory.render import render_plan
    from wheelfactory.toolkit import provision as provisioning
    from wheelfactory.toolkit.buildenv import cmake_architectures

    rendered = next(r for r in render_plan(make_plan(root, matrix, ["cuprobe"]), root) if r.variant.major == major)
    variant = rendered.variant
    folder = stage(rendered, scratch / f"plain-{major}")
    (folder / "pyproject.toml").write_text(
        HAND_WRITTEN.format(
            major=major,
            image=image,
            excludes=" ".join(f"--exclude '{e.format(major=major)}'" for e in EXCLUDES),
            archs=cmake_architectures(variant.cuda_archs("linux-x86_64")),
        )
    )
    env = {**os.environ, "WHEELFACTORY_CUDA_PREFIX": str(provisioning.provision(variant).prefix)}
    output = scratch / f"plain-{major}-out"
    command = [sys.executable, "-m", "cibuildwheel", "--platform", "linux", "--output-dir", str(output), "."]
    return command, env, folder


def arguments(
    options: dict[str, str] | None = None, paths: tuple[str, ...] = (), repeated: tuple[str, ...] = (), **counts: int
) -> argparse.Namespace:
    """--image and --matrix, `--NAME VALUE` for each of `options` (name: its default), `--NAME PATH` for each of
    `paths`, `--NAME VALUE` (repeatable, a list) for each of `repeated`, and `--NAME N` for each count the benchmark
    repeats (runs=5: --runs, default 5)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", default="manylinux-offline:latest")
    parser.add_argument("--matrix", default="matrix-offline.yaml", help="relative to the project")
    for name, default in (options or {}).items():
        parser.add_argument(f"--{name}", default=default)
    for name in paths:
        parser.add_argument(f"--{name}", type=Path)
    for name in repeated:
        parser.add_argument(f"--{name}", action="append", default=[])
    for name, default in counts.items():
        parser.add_argument(f"--{name}", type=int, default=default)
    return parser.parse_args()


def show(figures: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in figures)
    for key, value in figures:
        print(f"{key:<{width}}  {value}")
