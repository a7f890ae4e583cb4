"""What a user waits for, against plain cibuildwheel, and print the figures pair by pair.

    python bench/bench_user_command.py [--image manylinux-offline:latest] [--matrix matrix-offline.yaml] [--pairs 3]

Each pair times two whole processes, one after the other, on the same staged cuprobe: `python -m wheelfactory
build --cuda 13 --recipe cuprobe --python 3.12` (what `nox -s build-cuda13 -- --recipe cuprobe --python 3.12`
runs: provision, build, repair, audit, smoke) and `python -m cibuildwheel` of the same package with a hand-written
configuration (build and auditwheel repair; no audit, no smoke). Both warm: one untimed run of each first.
Goals (issue 39): the factory ≤ 12 s median, ≤ 1.5× plain. Every factory run must put its wheel in dist/.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import REPO, arguments, plain_cibuildwheel, show

from wheelfactory.plan import copy_inputs


def _timed(command: list[str], env: dict[str, str] | None, cwd: Path) -> float:
    started = time.monotonic()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.monotonic() - started


def main() -> int:
    args = arguments(pairs=3)
    with tempfile.TemporaryDirectory(prefix="bench-user-") as scratch_text:
        scratch = Path(scratch_text)
        root = copy_inputs(REPO, scratch / "project")
        factory = [sys.executable, "-m", "wheelfactory", "--root", str(root), "build", "--cuda", "13"]
        factory += ["--recipe", "cuprobe", "--python", "3.12", "--image", args.image, "--matrix", args.matrix]
        # This checkout's engine, whatever the interpreter has installed.
        ours = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        plain, env, folder = plain_cibuildwheel(root, 13, args.image, root / args.matrix, scratch)
        _timed(factory, ours, root)
        _timed(plain, env, folder)
        pairs = []
        for _ in range(args.pairs):
            shutil.rmtree(root / "dist", ignore_errors=True)
            pairs.append((_timed(factory, ours, root), _timed(plain, env, folder)))
            assert list((root / "dist").glob("*.whl")), "the factory's run put no wheel in dist/"
    figures = [
        (f"pair {i}: factory / plain cibuildwheel", f"{f:.1f} s / {p:.1f} s = {f / p:.2f}×")
        for i, (f, p) in enumerate(pairs, 1)
    ]
    factory_median = statistics.median(f for f, _ in pairs)
    plain_median = statistics.median(p for _, p in pairs)
    figures.append(
        (
            "median: factory / plain cibuildwheel",
            f"{factory_median:.1f} s / {plain_median:.1f} s = {factory_median / plain_median:.2f}×",
        )
    )
    show(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
