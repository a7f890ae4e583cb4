"""Measure what QEMU emulation costs: the same cuprobe wheel built for x86_64 (natively) and for aarch64 (under
QEMU user emulation, in the arm64 offline image), and print each stage's time and the ratio.

Both builds take CPython 3.11 (the one the arm64 image has), the same CUDA major, and no compiler cache, so the
compiler really runs; the toolkits are provisioned once, untimed, first. Why the release pipeline builds aarch64
on native Arm runners (ubuntu-24.04-arm) instead: these figures.

Usage: python bench/bench_aarch64.py [--cuda 13] [--matrix matrix-offline.yaml]
(needs Docker, both offline images and QEMU's binfmt entry: `nox -s image` and `nox -s image -- --arch aarch64`;
about ten minutes)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchlib import REPO, show

from wheelfactory.pipeline import BuildRequest, build
from wheelfactory.plan import copy_inputs, make_plan
from wheelfactory.toolkit.provision import provision

IMAGES = {"x86_64": "manylinux-offline:latest", "aarch64": "manylinux-offline-aarch64:latest"}
PYTHON = "3.11"
STAGES = ("build", "repair", "audit", "smoke")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", type=int, default=13)
    parser.add_argument("--matrix", default="matrix-offline.yaml", help="relative to the project")
    args = parser.parse_args()
    figures: list[tuple[str, str]] = []
    totals: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        root = copy_inputs(REPO, Path(scratch) / "project")
        matrix = root / args.matrix
        variant = next(v for v in make_plan(root, matrix, ["cuprobe"]).variants if v.major == args.cuda)
        for arch in IMAGES:
            provision(variant, "linux", arch)  # warm, untimed
        for arch, image in IMAGES.items():
            request = BuildRequest(
                root, args.cuda, [PYTHON], ["cuprobe"], image, None, matrix, arch=arch, compiler_cache=False
            )
            started = time.monotonic()
            (record,) = build(request)
            totals[arch] = time.monotonic() - started
            assert record.passed, record.why_not()
            timings = record.built.timings
            stages = ", ".join(f"{stage} {timings[stage]:.0f} s" for stage in STAGES if stage in timings)
            figures.append((f"{arch} cuprobe-cuda{args.cuda}x cp311", f"{totals[arch]:.0f} s ({stages})"))
    figures.append(("aarch64 under QEMU / x86_64", f"{totals['aarch64'] / totals['x86_64']:.1f}×"))
    show(figures)


if __name__ == "__main__":
    main()
