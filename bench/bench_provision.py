"""Provisioning a toolkit that is already in the cache, as each `nox -s build-cudaNN` process pays it, and print the
figures: per CUDA major of cuprobe's recipe, the median and range of five fresh processes, each provisioning once.

    python bench/bench_provision.py [--matrix matrix-offline.yaml]

The first process of a major provisions cold or, with entries sealed by an older factory, reads every file once
and brings the seals up to date; it is run and not counted. A warm check reads no file whose size and time are
those it was sealed with (untrusted/cache.py).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from benchlib import REPO, arguments, show

ROUNDS = 5
PROVISION = """
import sys
from pathlib import Path
from wheelfactory.plan import make_plan
from wheelfactory.toolkit.provision import provision
root = Path(sys.argv[1])
variant = next(v for v in make_plan(root, root / sys.argv[2], ["cuprobe"]).variants if v.major == int(sys.argv[3]))
provision(variant)
"""


def once(matrix: str, major: int) -> float:
    started = time.perf_counter()
    command = [sys.executable, "-c", PROVISION, str(REPO), matrix, str(major)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"provisioning CUDA {major} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def main() -> None:
    args = arguments()
    figures = []
    for major in (11, 12, 13):
        once(args.matrix, major)  # cold, or seals brought up to date
        times = [once(args.matrix, major) for _ in range(ROUNDS)]
        figures.append(
            (
                f"provision CUDA {major}, warm, whole process",
                f"{statistics.median(times):.2f} s median ({min(times):.2f}–{max(times):.2f}), {ROUNDS} processes",
            )
        )
    show(figures)


if __name__ == "__main__":
    main()
