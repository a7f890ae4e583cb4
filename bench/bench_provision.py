"""Provisioning a toolkit, as each `nox -s build-cudaNN` process pays it, and print the figures: per CUDA major of a
recipe's component set, the median and range of fresh processes, each provisioning once.

    python bench/bench_provision.py [--matrix matrix-offline.yaml]
    python bench/bench_provision.py --recipe-file ../shared/recipes/cupy.recipe.yaml [--cold 3] [--major 13]

Without --recipe-file: cuprobe's toolkits, warm, on the machine's own cache; the first process of a major
provisions cold there or brings seals made by an older factory up to date, and is not counted.

With --recipe-file (CuPy's: fourteen NVIDIA wheels), cold and warm: each cold process gets an empty cache of its
own (WHEELFACTORY_CACHE), so pip resolves the wheels, each is downloaded from the index pip is configured with and
checked against the index's sha256, and the toolkit is laid out and sealed; then five warm processes on the last
cold one's cache. A warm check reads no file whose size and time are those it was sealed with (untrusted/cache.py).
Cold figures depend on the link to the index and on the disk: compare runs made on one machine, one after the other.
Each figure twice: the whole process (Python's start, the engine's import and the plan too) and the provision() call.
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

from benchlib import REPO, arguments, show

ROUNDS = 5
PROVISION = """
import sys, time
from pathlib import Path
from wheelfactory.plan import make_plan
from wheelfactory.toolkit.provision import provision
root = Path(sys.argv[1])
variant = next(v for v in make_plan(root, root / sys.argv[2], [sys.argv[4]]).variants if v.major == int(sys.argv[3]))
started = time.perf_counter()
provision(variant)
print(f"provision() {time.perf_counter() - started}")
"""


def once(root: Path, matrix: str, recipe: str, major: int, cache: Path | None = None) -> tuple[float, float]:
    """One process provisioning: its whole time (Python's start, the engine's import, the plan) and the call's."""
    started = time.perf_counter()
    command = [sys.executable, "-c", PROVISION, str(root), matrix, str(major), recipe]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    if cache is not None:
        env["WHEELFACTORY_CACHE"] = str(cache)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"provisioning CUDA {major} failed:\n{done.stderr[-3000:]}")
    call = float(done.stdout.rsplit("provision() ", 1)[1])
    return time.perf_counter() - started, call


def figures_of(what: str, runs: list[tuple[float, float]]) -> list[tuple[str, str]]:
    def spread(times: list[float]) -> str:
        return f"{statistics.median(times):.2f} s median ({min(times):.2f}–{max(times):.2f})"

    return [
        (f"{what}, whole process", f"{spread([w for w, _ in runs])}, {len(runs)} processes"),
        (f"{what}, the provision() call", spread([c for _, c in runs])),
    ]


def project_with(recipe_file: Path, scratch: Path) -> tuple[Path, str]:
    """A scratch copy of the project's inputs that holds the recipe of `recipe_file`: its root and the recipe's
    name."""
    from wheelfactory.plan import copy_inputs

    root = copy_inputs(REPO, scratch / "project")
    name = next(line.split(":", 1)[1].strip() for line in recipe_file.read_text().splitlines() if line[:5] == "name:")
    (root / "recipes" / name).mkdir(parents=True, exist_ok=True)
    shutil.copy(recipe_file, root / "recipes" / name / "recipe.yaml")
    return root, name


def cold_and_warm(root: Path, matrix: str, recipe: str, major: int, colds: int, scratch: Path) -> list[tuple[str, str]]:
    cache = scratch / f"cache-{major}"
    cold = []
    for _ in range(colds):
        shutil.rmtree(cache, ignore_errors=True)
        cold.append(once(root, matrix, recipe, major, cache))
    warm = [once(root, matrix, recipe, major, cache) for _ in range(ROUNDS)]
    shutil.rmtree(cache)  # gigabytes: gone before the next major's
    return [
        *figures_of(f"provision {recipe} CUDA {major}, cold (an empty cache)", cold),
        *figures_of(f"provision {recipe} CUDA {major}, warm", warm),
    ]


def main() -> None:
    from wheelfactory.plan import make_plan

    args = arguments(paths=("recipe-file",), cold=1, major=0)
    figures = []
    with tempfile.TemporaryDirectory(prefix="bench-provision-") as scratch:
        if args.recipe_file is None:
            for major in [args.major] if args.major else [11, 12, 13]:
                once(REPO, args.matrix, "cuprobe", major)  # cold, or seals brought up to date
                runs = [once(REPO, args.matrix, "cuprobe", major) for _ in range(ROUNDS)]
                figures += figures_of(f"provision cuprobe CUDA {major}, warm", runs)
        else:
            root, recipe = project_with(args.recipe_file.resolve(), Path(scratch))
            majors = sorted({v.major for v in make_plan(root, root / args.matrix, [recipe]).variants})
            for major in [args.major] if args.major else majors:
                figures += cold_and_warm(root, args.matrix, recipe, major, args.cold, Path(scratch))
    show(figures)


if __name__ == "__main__":
    main()
