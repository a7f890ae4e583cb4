"""The smoke probe on this host's Python: each statement as fresh as a new interpreter, judged the same, whether
it runs in a child forked from a pristine interpreter (Linux) or in an interpreter of its own (Windows, which
cannot fork: here the probe runs with os.fork removed, the one thing that differs)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.resources import as_file

import pytest

from wheelfactory.smoke.machines import PROBE_SOURCE

CHECKS = [
    {"statement": "import email.parser", "expect": "ok"},
    # Nothing of the check before: a check's imports cannot help another's.
    {"statement": "import sys; assert 'email.parser' not in sys.modules, 'leaked'", "expect": "ok"},
    {"statement": "import no_such_module_here", "expect": "ImportError", "hint": "no_such_module_here"},
    {"statement": "import no_such_module_here", "expect": "ImportError", "hint": "pip install"},
    {"statement": "pass", "expect": "ImportError"},
    {"statement": "import warnings; warnings.warn('careful')", "expect": "ok"},  # -W error: a failure
    {"statement": "import os; os.abort()", "expect": "ok"},  # the process dies
    {"statement": "import atexit, os; atexit.register(os.abort)", "expect": "ok"},  # ...at its exit
    {"command": ["python", "-c", "print('fine')"]},
    {"command": ["python", "-c", "raise SystemExit(3)"]},
]
EXPECTED = [
    (True, "imported"),
    (True, "imported"),
    (True, "ModuleNotFoundError: No module named 'no_such_module_here'"),
    (False, "ModuleNotFoundError: No module named 'no_such_module_here'"),
    (False, "ran, but ImportError was expected"),
    (False, "UserWarning: careful"),
    (False, "the check crashed"),
    (False, "the check crashed"),
    (True, "exit 0: fine"),
    (False, "exit 3: "),
]


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
def test_each_statement_is_fresh_and_judged_alike_forked_or_spawned(fork: bool) -> None:
    with as_file(PROBE_SOURCE) as probe:
        run = (
            "import os, runpy, sys\n"
            + ("" if fork else "del os.fork\n")
            + f"sys.argv = [{str(probe)!r}, {json.dumps(CHECKS)!r}]\n"
            + f"runpy.run_path({str(probe)!r}, run_name='__main__')\n"
        )
        done = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, timeout=120, check=True)
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    found = [(o["ok"], o["detail"]) for o in outcomes]
    for (ok, detail), (want_ok, want_detail), check in zip(found, EXPECTED, CHECKS, strict=True):
        assert ok is want_ok and detail.startswith(want_detail), (check, ok, detail)
