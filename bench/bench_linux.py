"""Measure the Linux path and print the figures.

(a) cold against warm provisioning of the CUDA 12 toolkit (an empty cache of its own, pip's HTTP cache bypassed);
(b) `build-cuda12 --python 3.12`, warm, through the factory (build, repair, audit, smoke) against a plain
    cibuildwheel run of the same package in the same image with an equivalent hand-written configuration (build
    and auditwheel repair, no audit, no smoke) — goal: the factory within 1.5× — and the smoke tiers' share;
(c) the warm matrix of three CUDA majors × one Python: build-cuda11, 12 and 13 for cp312 — goal: ≤ 2 min;
(d) the factory's wheel size against what auditwheel makes when it may graft the CUDA libraries.
"Warm" is the factory's own cache (toolkits, compiler cache) as it is on this host; each warm figure follows
one untimed run that fills it.

Usage: python bench/bench_linux.py [--image manylinux-offline:latest] [--matrix matrix-offline.yaml]
(needs Docker; a few minutes)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchlib import REPO, arguments, plain_cibuildwheel, show

from wheelfactory.pipeline import BuildRequest, build
from wheelfactory.plan import copy_inputs, make_plan
from wheelfactory.report import WheelRecord
from wheelfactory.toolkit import provision as provisioning


@contextmanager
def _environment(**variables: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name)
            else:
                os.environ[name] = value


def _build(root: Path, major: int, image: str, matrix: Path) -> tuple[float, WheelRecord]:
    started = time.monotonic()
    (record,) = build(BuildRequest(root, major, ["3.12"], ["cuprobe"], image, None, matrix))
    assert record.passed, record.why_not()
    return time.monotonic() - started, record


def main() -> int:
    args = arguments()
    figures: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="wf-bench-") as scratch_text:
        scratch = Path(scratch_text)
        root = copy_inputs(REPO, scratch / "project")
        matrix = root / args.matrix
        variant = next(v for v in make_plan(root, matrix, ["cuprobe"]).variants if v.major == 12)

        # (a) cold provisioning into an empty cache of its own, then warm.
        with _environment(WHEELFACTORY_CACHE=str(scratch / "cold-cache"), PIP_NO_CACHE_DIR="1"):
            started = time.monotonic()
            toolkit = provisioning.provision(variant)
            cold = time.monotonic() - started
            started = time.monotonic()
            assert not provisioning.provision(variant).downloaded
            warm = time.monotonic() - started
        wheels_mb = sum(w.stat().st_size for w in toolkit.wheels) / 1e6
        figures.append(
            (
                f"provision CUDA {variant.cuda.toolkit}, cold",
                f"{cold:.1f} s ({wheels_mb:.0f} MB of wheels, {toolkit.nvcc.source} nvcc)",
            )
        )
        figures.append((f"provision CUDA {variant.cuda.toolkit}, warm (no network)", f"{warm:.2f} s"))

        # (b) the factory's whole job, warm, against plain cibuildwheel on the same staged package.
        _build(root, 12, args.image, matrix)  # fills the factory's caches
        factory, record = _build(root, 12, args.image, matrix)
        warm_toolkit = provisioning.provision(variant)
        command, env, folder = plain_cibuildwheel(root, 12, args.image, matrix, scratch)
        started = time.monotonic()
        subprocess.run(command, env=env, cwd=folder, check=True, capture_output=True)
        plain = time.monotonic() - started
        timings = record.built.timings
        figures.append(
            ("build-cuda12 --python 3.12, warm (factory)", f"{factory:.1f} s = {factory / plain:.2f}× plain")
        )
        figures.append(
            (
                "  of which build / repair / audit / smoke",
                " / ".join(f"{timings.get(k, 0):.1f}" for k in ("build", "repair", "audit", "smoke")) + " s",
            )
        )
        figures.append(("plain cibuildwheel, hand-written config, same image", f"{plain:.1f} s"))

        # (c) the warm matrix of three CUDA majors × one Python.
        for major in (11, 13):
            _build(root, major, args.image, matrix)  # fills the factory's caches
        seconds = {major: _build(root, major, args.image, matrix) for major in (11, 12, 13)}
        total = sum(s for s, _ in seconds.values())
        smokes = ", ".join(f"{r.built.timings['smoke']:.1f}" for _, r in seconds.values())
        figures.append(("3 CUDA majors × cp312, warm (build-cuda11, 12, 13)", f"{total:.0f} s"))
        figures.append(("  smoke per wheel (11, 12, 13)", f"{smokes} s"))

        # (d) size: the factory's wheel against auditwheel allowed to graft the CUDA libraries.
        wheel = root / "dist" / record.wheel
        env = {**os.environ, "LD_LIBRARY_PATH": str(warm_toolkit.lib_dir)}
        started = time.monotonic()
        graft = [sys.executable, "-m", "auditwheel", "repair", "-w", str(scratch / "grafted"), str(wheel)]
        subprocess.run(graft, env=env, check=True, capture_output=True)
        graft_s = time.monotonic() - started
        grafted = next((scratch / "grafted").glob("*.whl"))
        figures.append(("wheel size, factory (CUDA from NVIDIA's wheels)", f"{wheel.stat().st_size / 1e6:.3f} MB"))
        figures.append(
            (
                "wheel size, auditwheel grafting the CUDA libraries",
                f"{grafted.stat().st_size / 1e6:.1f} MB (repair took {graft_s:.0f} s)",
            )
        )

    show(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
