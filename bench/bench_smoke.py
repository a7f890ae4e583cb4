"""Measure the GPU-free smoke tiers of one wheel, warm, and print the figures.

Builds cuprobe-cuda12x for cp312 once (untimed: it fills the caches), then runs the smoke tiers on that wheel
several times — tiers 1, 2 (all three layouts) and 3, exactly as `build-cuda12` runs them — and prints the
median wall time per wheel (goal: ≤ 5 s on a 2-core host), each tier's median, and each step's (the container's
start, the venvs, each pip run, the copy, each probe, the downloads before): when it began and how long it took.
Every run must pass.

Then a py3-none wheel (tests/sources/ctlib: a CUDA library opened with ctypes at import, one wheel for every
Python), built once for CUDA 12: its smoke on one Python (3.12) against its smoke on the two it is smoke-tested on
by default (the oldest and the newest it serves; here 3.10 and 3.13, the newest the offline image has), run by run
(goal: ≤ 1.6×), and in how many runs the newest took what pip installed on the oldest (smoke/sharing.py).

Usage: python bench/bench_smoke.py [--image manylinux-offline:latest] [--matrix matrix-offline.yaml] [--runs 5]
(needs Docker; about three minutes, most of it ctlib's first build)
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from argparse import Namespace
from pathlib import Path

from benchlib import REPO, arguments, show

from wheelfactory.built import BuiltWheel
from wheelfactory.pipeline import BuildRequest, build
from wheelfactory.plan import copy_inputs
from wheelfactory.smoke import smoke
from wheelfactory.smoke.results import Steps


def _timed_smoke(built: BuiltWheel) -> tuple[float, bool]:
    """The smoke's wall time, and whether another Python took the first one's installs (smoke/sharing.py)."""
    started = time.monotonic()
    results = smoke(built)
    if not all(r.passed for r in results):
        raise SystemExit(f"a smoke run failed: {[r.label for r in results if not r.passed]}")
    took = any(c.name.startswith("pip would install on Python") for r in results for c in r.checks)
    return time.monotonic() - started, took


def _one_and_two_pythons(root: Path, args: Namespace) -> list[tuple[str, str]]:
    """The py3-none wheel's smoke on 3.12 alone, then on its default two, one after the other, `args.runs` times."""
    shutil.copytree(REPO / "tests/sources/ctlib", root / "recipes/ctlib/source")
    shutil.copy(REPO / "tests/sources/ctlib.recipe.yaml", root / "recipes/ctlib/recipe.yaml")
    # The matrix's oldest Python and the newest the offline image has (it has no 3.14).
    pythons = ["3.10", "3.13"]
    (record,) = build(BuildRequest(root, 12, pythons, ["ctlib"], args.image, "linux", root / args.matrix))
    if not record.passed:
        raise SystemExit(f"the py3-none wheel did not pass: {record.why_not()}")
    built = record.built
    both = built.smoke_pythons
    pairs, taken = [], []
    for _ in range(args.runs):
        built.asked_pythons = ("3.12",)
        one, _ = _timed_smoke(built)
        built.asked_pythons = both
        two, took = _timed_smoke(built)
        pairs.append((one, two))
        taken.append(took)
    figures = [
        (f"  run {i}: {' and '.join(both)} / 3.12 alone", f"{two:.1f} s / {one:.1f} s = {two / one:.2f}×")
        for i, (one, two) in enumerate(pairs, 1)
    ]
    one, two = statistics.median(o for o, _ in pairs), statistics.median(t for _, t in pairs)
    return [
        (f"py3-none wheel ({built.path.name}), median of {args.runs}", ""),
        *figures,
        (f"  median: {' and '.join(both)} / 3.12 alone", f"{two:.1f} s / {one:.1f} s = {two / one:.2f}×"),
        (
            f"  {both[-1]} took the installs of {both[0]} (the same pip, the same files)",
            f"{sum(taken)} of {len(taken)} runs",
        ),
    ]


def main() -> int:
    args = arguments(runs=5)
    with tempfile.TemporaryDirectory(prefix="bench-smoke-") as scratch:
        root = copy_inputs(REPO, Path(scratch) / "project")
        request = BuildRequest(root, 12, ["3.12"], ["cuprobe"], args.image, "linux", root / args.matrix)
        (record,) = build(request)
        if not record.passed:
            print(f"the wheel did not pass: {record.why_not()}", file=sys.stderr)
            return 1
        totals: list[float] = []
        tiers: dict[str, list[float]] = {}
        steps: dict[str, list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            started = time.monotonic()
            timed = Steps()
            results = smoke(record.built, timed)
            totals.append(time.monotonic() - started)
            for step in timed.as_json():
                steps.setdefault(str(step["name"]), []).append((float(step["started"]), float(step["seconds"])))
            if not all(r.passed for r in results):
                print(f"a smoke run failed: {[r.label for r in results if not r.passed]}", file=sys.stderr)
                return 1
            for result in results:
                tiers.setdefault(result.label, []).append(result.seconds)
        py3_none = _one_and_two_pythons(root, args)
    figures = [
        (f"smoke per wheel, cuprobe-cuda12x cp312, median of {args.runs}", f"{statistics.median(totals):.1f} s"),
        ("  each run", ", ".join(f"{t:.1f}" for t in totals) + " s"),
    ]
    figures += [(f"  {label} (median)", f"{statistics.median(seconds):.1f} s") for label, seconds in tiers.items()]
    figures.append(("each step (median start after the smoke began, median duration)", ""))
    for name, times in sorted(steps.items(), key=lambda item: statistics.median(t[0] for t in item[1])):
        begun, took = statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)
        figures.append((f"  {name}", f"at {begun:5.2f} s, {took:5.2f} s"))
    show(figures + py3_none)
    return 0


if __name__ == "__main__":
    sys.exit(main())
