"""Smoke-test real wheels built before (CuPy's, cufinufft's, torchsort's, LightGBM's: built once and kept), and print
where the smoke's time goes and what it costs beside the package's own compile.

    python bench/bench_real.py [--wheels DIR] [--image manylinux-offline:latest] [--matrix matrix-offline.yaml]
                               [--runs 2] [--python 3.10 --python 3.13]

--python: the Pythons an abi3 or py3-none wheel is smoke-tested on (default: the oldest and the newest it serves,
which the offline image may lack; cufinufft's were built with 3.10 and 3.13), as `nox -s smoke -- --python` takes.

DIR (default: the factory's cache, `real-wheels/`) holds one folder per package, as a build left it:

    DIR/<name>/recipe.yaml     the recipe it was built from (../shared/recipes/ has CuPy's and LightGBM's)
    DIR/<name>/dist/*.whl      its wheels, and dist/report.json, the build's report

Each wheel is smoke-tested through the factory's own entry point (`nox -s smoke`'s: audited, then every tier and
layout), `--runs` times; the first run of the hour also resolves and downloads what the smoke installs. Printed per
wheel: the smoke's wall time each run and each step's start and duration (the report entry's `smoke_steps`, median
over the runs), then from the build's report each stage's time, the whole (their sum) over the compile (`build`),
and that ratio again with the smoke just measured (its fastest run) in place of the report's. The whole is what
the report times (provisioning, compile, repair, audit, smoke), not nox's start or the sdist's download. The
reports and wheels are read as untrusted: a report is read within a size bound, and only numbers are taken from
it; each wheel is checked as pip would install it before anything else (`smoke_existing`).

Keep the wheels: `nox -s build-cuda13 -- --recipe cupy ...` in a scratch clone with the recipe in recipes/cupy/,
then copy its dist/ and the recipe to DIR/cupy/ (docs/linux.md, "Benchmarks", has the commands and the figures).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from argparse import Namespace
from pathlib import Path

from benchlib import REPO, arguments, show

from wheelfactory import host
from wheelfactory.errors import BadBytes
from wheelfactory.pipeline import smoke_existing
from wheelfactory.plan import copy_inputs
from wheelfactory.report import REPORT_NAME
from wheelfactory.untrusted import trees
from wheelfactory.untrusted.shown import shown

STAGES = ("provision", "build", "repair", "audit", "smoke")  # the report's timings_s, in the order they run


def built_timings(report: Path, wheel: str) -> dict[str, float]:
    """The stages' seconds the build's report gives `wheel` (numbers only; nothing else is taken from it)."""
    document = trees.parse_json(trees.read_file(report, 64 << 20), shown(str(report)))
    entries = document.get("wheels") if isinstance(document, dict) else None
    entry = next((e for e in entries or [] if isinstance(e, dict) and e.get("wheel") == wheel), None)
    timings = entry.get("timings_s") if entry else None
    if not isinstance(timings, dict):
        raise BadBytes(f"{shown(str(report))}: no timings_s for {shown(wheel)}")
    return {k: float(v) for k, v in timings.items() if k in STAGES and isinstance(v, int | float) and v >= 0}


def smoked(root: Path, wheel: Path, args: Namespace) -> tuple[float, list[dict[str, object]], bool]:
    """One smoke of `wheel` through the factory: its wall time, its steps, whether every tier passed."""
    started = time.monotonic()
    (record,) = smoke_existing(root, [wheel], args.image, root / args.matrix, args.python)
    entry = record.as_json()
    steps = entry["smoke_steps"]
    assert isinstance(steps, list)
    return time.monotonic() - started, steps, record.passed


def step_figures(runs: list[list[dict[str, object]]]) -> list[tuple[str, str]]:
    """Each step's median start and duration over the runs (a step that ran several times in one run — once per
    layout — counts each time)."""
    times: dict[str, list[tuple[float, float]]] = {}
    for steps in runs:
        for step in steps:
            times.setdefault(str(step["name"]), []).append((float(str(step["started"])), float(str(step["seconds"]))))
    ordered = sorted(times.items(), key=lambda item: statistics.median(t[0] for t in item[1]))
    return [
        (
            f"    {name}",
            f"at {statistics.median(t[0] for t in ts):6.2f} s, {statistics.median(t[1] for t in ts):6.2f} s",
        )
        for name, ts in ordered
    ]


def cost_figures(timings: dict[str, float], smoke_now: float) -> list[tuple[str, str]]:
    compile_s = timings.get("build", 0.0)
    if compile_s <= 0:
        return [("  the build's report", "no compile time: whole / compile cannot be given")]
    whole = sum(timings.values())
    now = whole - timings.get("smoke", 0.0) + smoke_now
    stages = ", ".join(f"{k} {timings[k]:.1f}" for k in STAGES if k in timings)
    return [
        ("  the build's report (s)", stages),
        ("  whole / compile, as built", f"{whole:.1f} / {compile_s:.1f} s = {whole / compile_s:.2f}"),
        (
            "  whole / compile, with this smoke (its fastest run)",
            f"{now:.1f} / {compile_s:.1f} s = {now / compile_s:.2f}",
        ),
    ]


def bench_package(folder: Path, scratch: Path, args: Namespace) -> list[tuple[str, str]]:
    root = copy_inputs(REPO, scratch / folder.name)
    (root / "recipes" / folder.name).mkdir(parents=True, exist_ok=True)
    (root / "recipes" / folder.name / "recipe.yaml").write_bytes(trees.read_file(folder / "recipe.yaml"))
    figures = []
    for wheel in sorted((folder / "dist").glob("*.whl")):
        runs = [smoked(root, wheel, args) for _ in range(args.runs)]
        if not all(passed for _, _, passed in runs):
            raise SystemExit(f"{wheel.name}: a smoke run did not pass (its summary above says why)")
        walls = [wall for wall, _, _ in runs]
        figures.append((wheel.name, ""))
        figures.append(
            ("  smoke, each run (audit and warm provisioning included)", ", ".join(f"{w:.1f}" for w in walls) + " s")
        )
        figures.append(("  each step (median start, median duration)", ""))
        figures += step_figures([steps for _, steps, _ in runs])
        figures += cost_figures(built_timings(folder / "dist" / REPORT_NAME, wheel.name), min(walls))
    return figures


def main() -> int:
    args = arguments(paths=("wheels",), repeated=("python",), runs=2)
    kept = args.wheels or host.cache_dir() / "real-wheels"
    folders = sorted(p for p in kept.iterdir() if (p / "recipe.yaml").is_file()) if kept.is_dir() else []
    if not folders:
        print(f"no kept wheels in {kept}: see this script's docstring for how to keep them", file=sys.stderr)
        return 2
    figures = []
    with tempfile.TemporaryDirectory(prefix="bench-real-") as scratch:
        for folder in folders:
            figures += bench_package(folder, Path(scratch), args)
    show(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
