"""Measure what each smoke check's isolation costs: the fork server against an interpreter of its own per check.

Builds cuprobe-cuda12x for cp312 and the py3-none ctlib (tests/sources/ctlib: a CUDA library opened with ctypes
at import; smoke-tested on 3.10 and 3.13) once each (untimed), then smoke-tests each wheel as `build-cuda12` does,
every call into the probe, once the smoke has its outcomes, run again twice in the smoke's container: as the smoke
runs it (where the OS forks: one
pristine interpreter per set of flags, each check a child of it, those that begin by importing the package forked
from a child that imported it once), and with each check in an interpreter of its own that imports everything
again (as the probe runs where the OS cannot fork — Windows — and as every check ran before). The two must reach
the same outcome on every check (verdict, detail, every CUDA library mapped); the figures are those two runs' wall
times, statements only (a program runs the same either way), one call at a time (the smoke probes its
layouts side by side), per layout (a probe call: one venv's checks) and per statement.

Last, on an interpreter of this host that has NumPy (--numpy-python; default: this one): statements importing a
package that imports NumPy (as CuPy does; OpenBLAS starts a thread pool at import, which the probe holds to one
thread so that the package is imported once for them), forked against each in its own interpreter.

Usage: python bench/bench_probe.py [--image manylinux-offline:latest] [--matrix matrix-offline.yaml] [--runs 3]
                                   [--numpy-python python3]
(needs Docker; a few minutes, most of it the two builds when the caches are cold)
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from argparse import Namespace
from importlib.resources import as_file
from pathlib import Path

from benchlib import REPO, arguments, show

from wheelfactory.built import BuiltWheel
from wheelfactory.pipeline import BuildRequest, build
from wheelfactory.plan import copy_inputs
from wheelfactory.smoke import machines, smoke
from wheelfactory.smoke.machines import PROBE_SOURCE, TOOLS, ContainerMachine

# The probe with os.fork taken away: each check in an interpreter of its own (the probe's own other path).
EACH_ITS_OWN = (
    "import os, runpy, sys; del os.fork; sys.argv[0] = {probe!r}; runpy.run_path({probe!r}, run_name='__main__')"
)

# (the probe call's name, how many statements it ran, seconds forked, seconds each in its own interpreter)
Timed = tuple[str, int, float, float]


def _probing_both_ways(timed: list[Timed]) -> None:
    """Every probe call of the smoke, once the smoke has its outcomes, run again both ways, statements only (a
    program, such as `python -m pkg._cuda_variant`, runs the same either way), one call at a time (the smoke probes
    its layouts side by side: timed so, each call would be timed against the others), outcomes compared."""
    smokes_probe, one_at_a_time = ContainerMachine.probe, threading.Lock()

    def probe(self: ContainerMachine, python: str, checks: list[dict[str, object]]) -> list[dict[str, object]]:
        outcomes = smokes_probe(self, python, checks)
        statements = [c for c in checks if "command" not in c]
        if not statements:
            return outcomes
        with one_at_a_time:
            started = time.monotonic()
            forked = smokes_probe(self, python, statements)
            middle = time.monotonic()
            own_command = [python, "-c", EACH_ITS_OWN.format(probe=f"{TOOLS}/wheelfactory_probe.py")]
            ran = self._exec("probe, each check in its own interpreter", [*own_command, json.dumps(statements)])
            own = machines._outcomes(ran, statements)
            ended = time.monotonic()
        for check, one, other in zip(statements, forked, own, strict=True):
            seen = [(o["ok"], o["detail"], o.get("libraries")) for o in (one, other)]
            if seen[0] != seen[1]:
                raise SystemExit(f"forked and in its own interpreter differ: {check}: {seen}")
        # A venv's calls: a tier's, and the two-variants check's, which runs with the bare venv (tier 1's) too.
        where = f"{self.python}: {machines._venv(python)}, {len(statements)} statements"
        timed.append((where, len(statements), middle - started, ended - middle))
        return outcomes

    ContainerMachine.probe = probe  # type: ignore[method-assign]


def _numpy_user(scratch: Path, python: str, statements: int = 20) -> list[tuple[str, str]]:
    """A package that imports NumPy (whose OpenBLAS starts a thread pool at import, as under CuPy), `statements`
    statements importing it, through the probe on interpreter `python`: forked, and each in its own interpreter."""
    has_numpy = subprocess.run([python, "-c", "import numpy"], capture_output=True, check=False).returncode == 0
    if not has_numpy:
        return [("a package that imports NumPy", f"not measured: no NumPy in {python} (--numpy-python)")]
    (scratch / "uses_numpy").mkdir()
    (scratch / "uses_numpy/__init__.py").write_text("import os, numpy\nPID = os.getpid()\n")
    (scratch / "uses_numpy/sub.py").write_text("")
    check = {"statement": "import uses_numpy.sub, os; assert uses_numpy.PID != os.getpid()", "expect": "ok"}
    checks = json.dumps([{**check, "pythonpath": str(scratch)}] * statements)
    seconds, shared = {}, {}
    with as_file(PROBE_SOURCE) as probe:
        for way, command in (("forked", [str(probe)]), ("own", ["-c", EACH_ITS_OWN.format(probe=str(probe))])):
            started = time.monotonic()
            ran = subprocess.run([python, *command, checks], capture_output=True, text=True, check=True)
            seconds[way] = time.monotonic() - started
            shared[way] = all(o["ok"] for o in json.loads(ran.stdout.splitlines()[-1]))
    return [
        (
            f"a package that imports NumPy, {statements} statements: forked / each in its own interpreter",
            f"{seconds['forked']:5.2f} s / {seconds['own']:5.2f} s = {seconds['own'] / seconds['forked']:4.1f}×",
        ),
        (
            "  imported once, in the process they fork from (forked; each in its own)",
            f"{shared['forked']}; {shared['own']}",
        ),
    ]


def _built(root: Path, recipe: str, pythons: list[str], args: Namespace) -> BuiltWheel:
    (record,) = build(BuildRequest(root, 12, pythons, [recipe], args.image, "linux", root / args.matrix))
    if not record.passed:
        raise SystemExit(f"{recipe}'s wheel did not pass: {record.why_not()}")
    return record.built


def main() -> int:
    args = arguments({"numpy-python": sys.executable}, runs=3)
    timed: list[Timed] = []
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as scratch:
        root = copy_inputs(REPO, Path(scratch) / "project")
        shutil.copytree(REPO / "tests/sources/ctlib", root / "recipes/ctlib/source")
        shutil.copy(REPO / "tests/sources/ctlib.recipe.yaml", root / "recipes/ctlib/recipe.yaml")
        wheels = [_built(root, "cuprobe", ["3.12"], args), _built(root, "ctlib", ["3.10", "3.13"], args)]
        _probing_both_ways(timed)
        for built in wheels:
            for _ in range(args.runs):
                if not all(r.passed for r in smoke(built)):
                    raise SystemExit(f"a smoke of {built.path.name} failed")
        names = [built.path.name for built in wheels]
        numpy_user = _numpy_user(Path(scratch), args.numpy_python)
    calls: dict[str, list[Timed]] = {}
    for call in timed:
        calls.setdefault(call[0], []).append(call)
    figures = [(f"each probe call (a layout's checks), median of {args.runs} smoke runs of {', '.join(names)}", "")]
    figures.append(("  Python: venv, statements: forked / each in its own interpreter = saved per statement", ""))
    for where, runs in calls.items():
        n = runs[0][1]
        forked, own = statistics.median(r[2] for r in runs), statistics.median(r[3] for r in runs)
        per_check = (own - forked) / n * 1000 if n else 0.0
        figures.append((f"  {where}", f"{forked:5.2f} s / {own:5.2f} s = {own / forked:4.1f}×, {per_check:4.0f} ms"))
    forked_all = sum(statistics.median(r[2] for r in runs) for runs in calls.values())
    own_all = sum(statistics.median(r[3] for r in runs) for runs in calls.values())
    statements = sum(runs[0][1] for runs in calls.values())
    figures.append(
        (
            f"  all {len(calls)} calls, {statements} statements",
            f"{forked_all:5.2f} s / {own_all:5.2f} s = {own_all / forked_all:4.1f}×",
        )
    )
    show(figures + numpy_user)
    return 0


if __name__ == "__main__":
    sys.exit(main())
