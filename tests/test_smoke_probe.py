"""The smoke probe on this host's Python: each statement as fresh as a new interpreter, judged the same, whether
it runs in a child forked from a pristine interpreter (Linux) or in an interpreter of its own (Windows, which
cannot fork: here the probe runs with os.fork removed, the one thing that differs). Statements that begin by
importing a package are forked from a child that imported it: what each saw (outcome, every file mapped) is
compared with an interpreter of its own, on packages of several shapes, some not written for this test."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.resources import as_file
from pathlib import Path

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


def _probed(checks: list[dict[str, object]], *, fork: bool) -> list[dict[str, object]]:
    with as_file(PROBE_SOURCE) as probe:
        run = (
            "import os, runpy, sys\n"
            + ("" if fork else "del os.fork\n")
            + f"sys.argv = [{str(probe)!r}, {json.dumps(checks)!r}]\n"
            + f"runpy.run_path({str(probe)!r}, run_name='__main__')\n"
        )
        done = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, timeout=300, check=True)
    outcomes: list[dict[str, object]] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcomes


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
def test_each_statement_is_fresh_and_judged_alike_forked_or_spawned(fork: bool) -> None:
    outcomes = _probed(CHECKS, fork=fork)
    found = [(o["ok"], o["detail"]) for o in outcomes]
    for (ok, detail), (want_ok, want_detail), check in zip(found, EXPECTED, CHECKS, strict=True):
        assert ok is want_ok and detail.startswith(want_detail), (check, ok, detail)


# Packages written for the cases where importing first must not be shared, and one that records the process
# that imported it: the only state in which a child of the importer differs from a fresh interpreter.
SHAPES = {
    "pid_at_import": "import os\nPID = os.getpid()\n",
    "thread_at_import": "import os, threading, time\nPID = os.getpid()\n"
    "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n",
    "warns_at_import": "import warnings\nwarnings.warn('at import')\n",
    "fails_at_import": "raise ImportError('libcudart.so.13: cannot open shared object file')\n",
    "dies_at_import": "import os\nos.abort()\n",
    "ctypes_at_import": "import ctypes, ctypes.util\nZ = ctypes.CDLL(ctypes.util.find_library('z'))\n",
    "exits_loudly": "import atexit\natexit.register(print, 'bye')\n",
}


def test_statements_forked_after_their_first_import_see_what_a_fresh_interpreter_sees(tmp_path: Path) -> None:
    for name, source in SHAPES.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(source)
        (tmp_path / name / "sub.py").write_text("VALUE = 1\n")
    # Every file a statement mapped is reported: a site of "/" and every name counted as a CUDA library.
    seen_all = {"site": "/", "cuda_libraries": ["*"]}
    statements = [
        *(f"import {name}.sub" for name in SHAPES),
        *(f"from {name} import sub" for name in SHAPES),
        # Packages of this test environment, not written for it: compiled modules, C extensions of several kinds.
        "import pydantic_core._pydantic_core",
        "from yaml import CSafeLoader",
        "import markupsafe._speedups; import jinja2",
        "import email.parser, json",
        # A package that starts a thread at import is imported by each statement itself (a fork keeps one thread).
        "import thread_at_import, os; assert thread_at_import.PID == os.getpid()",
        "import thread_at_import; import threading; assert threading.active_count() == 2",
    ]
    checks = [{"statement": s, "expect": "ok", "pythonpath": str(tmp_path), **seen_all} for s in statements]
    forked, spawned = _probed(checks, fork=True), _probed(checks, fork=False)
    for check, one, other in zip(checks, forked, spawned, strict=True):
        assert (one["ok"], one["detail"]) == (other["ok"], other["detail"]), check["statement"]
        assert one.get("libraries") == other.get("libraries"), check["statement"]
    outcome = dict(zip(statements, forked, strict=True))
    assert all(outcome[s]["ok"] for s in statements[-6:]), [outcome[s]["detail"] for s in statements[-6:]]
    assert any("libz" in str(p) for p in outcome["import ctypes_at_import.sub"]["libraries"])  # type: ignore[attr-defined]
    assert str(outcome["import fails_at_import.sub"]["detail"]).startswith("ImportError: libcudart.so.13")
    assert str(outcome["import warns_at_import.sub"]["detail"]).startswith("UserWarning: at import")
    assert str(outcome["import dies_at_import.sub"]["detail"]).startswith("the check crashed")

    # The one difference by design, which shows the sharing took place: the importing process is the parent.
    pid = [
        {
            "statement": "import pid_at_import, os; assert pid_at_import.PID != os.getpid()",
            "expect": "ok",
            "pythonpath": str(tmp_path),
        },
    ]
    assert _probed(pid, fork=True)[0]["ok"] and not _probed(pid, fork=False)[0]["ok"]
