"""The fuzzing of the readers: every input a fuzz run ever found (tests/fuzz_cases/READER/) is refused cleanly
now, within a second and 256 MiB; and a short coverage-guided pass over every reader (`python -m fuzz`, what
`nox -s fuzz` runs) finds nothing new."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fuzz import targets

from .conftest import REPO
from .test_untrusted import bounded

CASES = sorted((REPO / "tests" / "fuzz_cases").glob("*/*"))
CI_SECONDS = 20  # a reader, one per CPU at a time: with the seeds, about two minutes on two cores


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_every_finding_is_refused_cleanly_now(case: Path) -> None:
    assert case.parent.name in targets.TARGETS
    bounded(lambda: targets.run(case.parent.name, case.read_bytes()))


# CI's slowest (2026-11-26: 95 s, six readers; the drafter's and the report's, since, make one more round of two on
# CI's two cores, some 25 s): each reader is fuzzed for CI_SECONDS, the time the issue that set it keeps; the
# readers run one per CPU at a time.
@pytest.mark.slow
def test_a_short_fuzzing_pass_over_every_reader_finds_nothing(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "fuzz", "--seconds", str(CI_SECONDS), "--workdir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    summary = ran.stdout.strip().splitlines()
    assert ran.returncode == 0, ran.stdout[-5000:] + ran.stderr[-2000:]
    assert summary[-1] == f"{len(targets.TARGETS)} passed, 0 failed", summary
    executions = [line for line in summary if " executions in " in line]
    assert len(executions) == len(targets.TARGETS) and all("coverage " in line for line in executions), summary
