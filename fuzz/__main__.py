"""`python -m fuzz [--reader NAME]... [--seconds N] [--jobs J] [--workdir DIR]`: fuzz each reader of untrusted
bytes for N seconds (coverage-guided, atheris), J readers at a time (default: one per CPU; each fuzzer is one
process on one core), starting from seeds built here and the corpus earlier runs kept. Prints, per reader, the
executions, the coverage reached and the findings; a finding (an exception other than the reader's own error, an
input over a second or 256 MiB) is copied into tests/fuzz_cases/READER/, where the tests replay it for ever after,
and the run exits 1."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fuzz import seeds
from fuzz.targets import TARGETS

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "fuzz_cases"
PER_INPUT_S = 1
_COVERAGE = re.compile(r"\bcov: (\d+) ft: (\d+) corp: (\d+)/")  # libFuzzer's status lines, the last is the latest
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.MULTILINE)


def fuzz_one(reader: str, seconds: int, workdir: Path) -> bool:
    """Fuzz one reader; whether it held (no finding)."""
    corpus, findings = workdir / "corpus" / reader, workdir / "findings" / reader
    for folder in (corpus, findings):
        folder.mkdir(parents=True, exist_ok=True)
    for old in findings.iterdir():
        old.unlink()
    command = [
        sys.executable, "-m", "fuzz.one", reader, str(corpus), str(workdir / "seeds" / reader),
        f"-max_total_time={seconds}", f"-timeout={PER_INPUT_S}", f"-artifact_prefix={findings}/",
        "-print_final_stats=1", "-close_fd_mask=1",
    ]  # fmt: skip
    scratch = {"WHEELFACTORY_FUZZ_SCRATCH": str(workdir / "scratch" / reader)}  # fuzz/targets.py says why
    ran = subprocess.run(
        command, cwd=ROOT, env={**os.environ, **scratch}, capture_output=True, text=True, errors="replace",
        timeout=seconds + 300,
    )  # fmt: skip
    stats = {key: int(value) for key, value in _STAT.findall(ran.stderr)}
    done = _COVERAGE.findall(ran.stderr)
    coverage = f"coverage {done[-1][0]} edges, {done[-1][1]} features, corpus {done[-1][2]} inputs" if done else ""
    # One print per reader: readers run side by side, and a reader's lines stay together.
    said = [
        f"{reader}: {stats.get('number_of_executed_units', 0)} executions in {seconds} s "
        f"({stats.get('average_exec_per_sec', 0)}/s), {coverage or 'no coverage line'}, "
        f"peak RSS {stats.get('peak_rss_mb', 0)} MiB"
    ]
    found = sorted(findings.iterdir())
    if ran.returncode == 0 and not found:
        print(said[0], flush=True)
        return True
    kept = CASES / reader
    kept.mkdir(parents=True, exist_ok=True)
    for finding in found:
        shutil.copy(finding, kept / finding.name)
        said.append(f"  finding: {finding.name}, kept as {kept.relative_to(ROOT) / finding.name}")
    said.append("  " + "\n  ".join(ran.stderr.strip().splitlines()[-25:]))
    print("\n".join(said), flush=True)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reader", action="append", choices=sorted(TARGETS), help="default: every reader")
    parser.add_argument("--seconds", type=int, default=60, help="per reader (default 60)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="readers at a time (default: CPUs)")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "fuzz", help="seeds, corpus, findings")
    args = parser.parse_args(argv)
    for reason in seeds.build(args.workdir / "seeds"):
        print(f"seeds left out — {reason}")
    readers = args.reader or sorted(TARGETS)
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        held = list(pool.map(lambda reader: fuzz_one(reader, args.seconds, args.workdir), readers))
    print(f"{held.count(True)} passed, {held.count(False)} failed")
    return 0 if all(held) else 1


if __name__ == "__main__":
    sys.exit(main())
