"""The smoke probe on this host's Python: each statement as fresh as a new interpreter, judged the same, whether
it runs in a child forked from a pristine interpreter (Linux) or in an interpreter of its own (Windows, which
cannot fork: here the probe runs with os.fork removed, the one thing that differs). Statements that begin by
importing a package are forked from a child that imported it: what each saw (outcome, every file mapped) is
compared with an interpreter of its own, on packages of several shapes, some not written for this test."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
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


def _assert_alike(
    checks: list[dict[str, object]], forked: list[dict[str, object]], spawned: list[dict[str, object]]
) -> None:
    """Each check's outcome, forked and spawned: the same verdict, detail and CUDA libraries mapped."""
    for check, one, other in zip(checks, forked, spawned, strict=True):
        assert (one["ok"], one["detail"], one.get("libraries")) == (
            other["ok"],
            other["detail"],
            other.get("libraries"),
        ), check["statement"]


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
    "fails_at_import": "raise ImportError('libcudart.so.99: cannot open shared object file')\n",
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
    _assert_alike(checks, forked, spawned)
    outcome = dict(zip(statements, forked, strict=True))
    assert all(outcome[s]["ok"] for s in statements[-6:]), [outcome[s]["detail"] for s in statements[-6:]]
    assert any("libz" in str(p) for p in outcome["import ctypes_at_import.sub"]["libraries"])  # type: ignore[attr-defined]
    assert str(outcome["import fails_at_import.sub"]["detail"]).startswith("ImportError: libcudart.so.99")
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


LOADS_LIBZ = "import ctypes, ctypes.util\nZ = ctypes.CDLL(ctypes.util.find_library('z'))\n"


def test_statements_that_import_only_what_the_package_loaded_share_one_childs_outcome(tmp_path: Path) -> None:
    """`import pkg.sub` where `import pkg` loaded pkg.sub already: one child runs for all such statements of the
    package, and each reports what an interpreter of its own reports — even where that child dies at its exit, or a
    statement also imports what the package did not load."""
    exits = tmp_path / "exits.log"
    shapes = {
        "counts_exits": "import atexit, os\nfrom . import sub\n"
        f"atexit.register(lambda: open({str(exits)!r}, 'a').write(f'{{os.getpid()}}\\n'))\n",
        "dies_at_exit": "import atexit, os\nfrom . import sub\natexit.register(os.abort)\n",
        "loads_libz": "from . import sub\n",
    }
    for name, source in shapes.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(source)
        (tmp_path / name / "sub.py").write_text(LOADS_LIBZ)
        (tmp_path / name / "other.py").write_text("import json\n")
    statements = [
        *(f"import {name}.sub" for name in shapes for _ in range(3)),
        "import counts_exits.sub, counts_exits.other",  # other is not loaded by the package: a child of its own
        "import counts_exits.sub as sub",  # binds another name: a child of its own
        "import loads_libz.sub, json",
        "import loads_libz",
    ]
    seen_all = {"site": "/", "cuda_libraries": ["*"], "pythonpath": str(tmp_path)}
    checks = [{"statement": s, "expect": "ok", **seen_all} for s in statements]
    forked = _probed(checks, fork=True)
    exits_forked = exits.read_text().split()
    exits.unlink()
    spawned = _probed(checks, fork=False)
    _assert_alike(checks, forked, spawned)
    outcome = dict(zip(statements, forked, strict=True))
    assert outcome["import loads_libz.sub"]["ok"]
    assert any("libz" in str(p) for p in outcome["import loads_libz.sub"]["libraries"])  # type: ignore[attr-defined]
    assert str(outcome["import dies_at_exit.sub"]["detail"]).startswith("the check crashed")
    # Spawned, each of counts_exits' five statements exits in a process of its own; forked, its three that only
    # look up what the package loaded share one child, and the other two have one each.
    assert len(exits.read_text().split()) == 5 and len(exits_forked) == 3, (exits_forked, exits.read_text())


# Programs of a package, run as `python -m` or `-c` would run them: what they print, how they end.
PROGRAMS = {
    "__init__.py": LOADS_LIBZ + "import os\nPID = os.getpid()\n",
    "says.py": "import sys\nprint('argv', sys.argv[1:], sys.argv[0].endswith('says.py'), repr(sys.path[0]))\n"
    "print(sys.orig_argv[1:] if hasattr(sys, 'orig_argv') else '')\n"
    "import __main__\nprint(__name__, sorted(k for k in vars(__main__) if not k.startswith('__')))\n",
    "fails.py": "def deeper():\n    raise ValueError('no device')\ndeeper()\n",
    "exits.py": "import sys\nsys.exit(int(sys.argv[1]) if sys.argv[1:] else 'a message, then status 1')\n",
    "joins.py": "import threading, time\n"
    "threading.Thread(target=lambda: (time.sleep(0.2), print('the thread ended'))).start()\n",
    "at_exit.py": "import atexit\natexit.register(print, 'bye')\nprint('hello')\n",
    "dies.py": "import os\nos.abort()\n",
}
# Packages whose import a process cannot share with programs: each program then runs in an interpreter of its own.
UNSHARED = {
    "warns": "import warnings\nwarnings.warn('at import')\n",
    "threads": "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n",
    "fails": "raise ImportError('libcudart.so.99: cannot open shared object file')\n",
    "prints": "print('imported')\n",
}


def test_programs_forked_after_their_packages_import_end_as_interpreters_of_their_own(tmp_path: Path) -> None:
    """Programs that start by importing one package (`python -m pkg.mod`, `python -c "import pkg..."`) run in
    children of one interpreter that imported it: each says, prints and exits what an interpreter of its own does,
    on programs written to tell them apart (arguments, sys.path, __main__, tracebacks, SystemExit, threads, exit
    handlers, a crash) and on packages whose import cannot be shared (each then runs on its own)."""
    (tmp_path / "pkg").mkdir()
    for name, source in PROGRAMS.items():
        (tmp_path / "pkg" / name).write_text(source)
    for name, source in UNSHARED.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(source)
        (tmp_path / name / "run.py").write_text("print('ran')\n")
    programs = [
        ["python", "-m", "pkg.says", "one", "--two"],
        ["python", "-m", "pkg.says"],
        ["python", "-c", "import pkg.says", "three"],
        ["python", "-c", "import pkg, sys; print(repr(sys.path[0]), sys.argv, pkg.Z is not None)", "four"],
        ["python", "-c", "from pkg import Z; x = 1; import __main__; print(sorted(vars(__main__)))"],
        ["python", "-m", "pkg.fails"],
        ["python", "-c", "import pkg; pkg.missing"],
        ["python", "-m", "pkg.exits", "3"],
        ["python", "-m", "pkg.exits", "0"],
        ["python", "-m", "pkg.exits"],
        ["python", "-m", "pkg.joins"],
        ["python", "-m", "pkg.at_exit"],
        ["python", "-m", "pkg.dies"],
        ["python", "-m", "pkg.absent"],
        *(["python", "-m", f"{name}.run"] for name in UNSHARED),
        *(["python", "-c", f"import {name}"] for name in UNSHARED),
    ]
    checks: list[dict[str, object]] = [{"command": c, "pythonpath": str(tmp_path)} for c in programs]
    forked, spawned = _probed(checks, fork=True), _probed(checks, fork=False)
    for check, one, other in zip(checks, forked, spawned, strict=True):
        assert (one["ok"], one["detail"]) == (other["ok"], other["detail"]), check["command"]
    details = [str(o["detail"]) for o in forked]
    assert details[0].startswith("exit 0: argv ['one', '--two'] True") and "'pkg', 'says', 'one'" not in details[0]
    assert "Traceback" in details[5] and "ValueError: no device" in details[5]
    assert details[7].startswith("exit 3") and details[8].startswith("exit 0") and details[9].startswith("exit 1")
    assert "the thread ended" in details[10] and details[11] == "exit 0: hello\nbye"
    assert details[12].startswith("exit -6")

    # The one difference by design, which shows the sharing took place: the importing process is the parent.
    pid = [{"command": ["python", "-c", "import pkg, os; print(pkg.PID != os.getpid())"], "pythonpath": str(tmp_path)}]
    assert _probed(pid, fork=True)[0]["detail"] == "exit 0: True"
    assert _probed(pid, fork=False)[0]["detail"] == "exit 0: False"


# A stand-in CUDA runtime (named as the real one is), built twice: once where the layout's NVIDIA wheel puts it,
# once elsewhere (a system CUDA, say). Each copy says where it is. Its soname is no real release's, which a system
# CUDA on the host running the tests (in ld.so.conf) would answer.
CUDART = "const char *cudart_where(void) { return WHERE; }\n"
# An extension module that calls into what it links when imported (so the link is real, and needed).
MODULE = """#include <Python.h>
const char *cudart_where(void);
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{name}(void) {{
    PyObject *m = PyModule_Create(&module);
    if (m) PyModule_AddStringConstant(m, "WHERE", cudart_where());
    return m;
}}
"""


def _gcc(*args: str) -> None:
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,--no-as-needed", *args], check=True, capture_output=True)


def _cuda_package(root: Path) -> tuple[Path, Path]:
    """A package `pkg` laid out in `root`/site as pip lays out a wheel beside NVIDIA's (real ELF, built by gcc):
    `_early` links the CUDA runtime from elsewhere (an absolute RPATH, to a copy outside the site); `_late` the
    layout's (RPATH $ORIGIN/../nvidia/cu13/lib); `_broken` a library nowhere to be found; `_ctypes` (Python) opens
    the runtime by its bare name at import, which only an earlier load in the same process would satisfy.
    (the site, the copy elsewhere)"""
    site, elsewhere, src = root / "site", root / "elsewhere", root / "src"
    for folder in (site / "nvidia/cu13/lib", site / "pkg", elsewhere, src):
        folder.mkdir(parents=True)
    (src / "cudart.c").write_text(CUDART)
    for where, folder in (("layout", site / "nvidia/cu13/lib"), ("elsewhere", elsewhere)):
        _gcc(
            f'-DWHERE="{where}"',
            "-Wl,-soname,libcudart.so.99",
            "-o",
            str(folder / "libcudart.so.99"),
            str(src / "cudart.c"),
        )
    (src / "missing.c").write_text("int missing(void) { return 0; }\n")
    _gcc("-Wl,-soname,libmissing.so.1", "-o", str(src / "libmissing.so.1"), str(src / "missing.c"))
    include, suffix = sysconfig.get_paths()["include"], sysconfig.get_config_var("EXT_SUFFIX")
    links = {
        "_early": [f"-L{elsewhere}", "-l:libcudart.so.99", f"-Wl,-rpath,{elsewhere}"],
        "_late": [f"-L{elsewhere}", "-l:libcudart.so.99", "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib"],
        "_broken": [
            f"-L{elsewhere}",
            "-l:libcudart.so.99",
            f"-L{src}",
            "-l:libmissing.so.1",
            "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib",
        ],
    }
    for name, link in links.items():
        (src / f"{name}.c").write_text(MODULE.format(name=name))
        _gcc(
            f"-I{include}",
            "-Wl,--disable-new-dtags",
            "-o",
            str(site / "pkg" / f"{name}{suffix}"),
            str(src / f"{name}.c"),
            *link,
        )
    (site / "pkg/__init__.py").write_text("")
    (site / "pkg/_ctypes.py").write_text("import ctypes\nRUNTIME = ctypes.CDLL('libcudart.so.99')\n")
    return site, elsewhere


def test_each_check_loads_what_a_fresh_interpreter_would_on_real_cuda_binaries(tmp_path: Path) -> None:
    """The fork server against an interpreter of its own per check, on binaries built to tell them apart: what one
    check loaded (from elsewhere, or from the layout) must not serve the next; a failed load must not hide the next;
    a library opened by name with ctypes at import finds only what a fresh process finds."""
    site, elsewhere = _cuda_package(tmp_path)
    spec = {"expect": "ok", "site": str(site), "pythonpath": str(site), "cuda_libraries": ["libcudart.so.*"]}
    statements = [
        "import pkg._early",  # maps the runtime from elsewhere: fails, naming it
        "import pkg._late",  # after it: maps the layout's only
        "import pkg._broken",  # fails to load
        "import pkg._late; assert pkg._late.WHERE == 'layout'",  # after it: loads all the same
        "import pkg._ctypes",  # after _late loaded the runtime: still not found by name
        "import pkg._early, pkg._late",  # both in one process: the soname loaded first serves the second
    ]
    checks = [{"statement": s, **spec} for s in statements]
    forked, spawned = _probed(checks, fork=True), _probed(checks, fork=False)
    _assert_alike(checks, forked, spawned)
    outcome = dict(zip(statements, forked, strict=True))
    early = outcome["import pkg._early"]
    assert not early["ok"] and str(elsewhere) in str(early["detail"]), early
    for late in ("import pkg._late", "import pkg._late; assert pkg._late.WHERE == 'layout'"):
        assert outcome[late]["ok"] and outcome[late]["libraries"] == [str(site / "nvidia/cu13/lib/libcudart.so.99")]
    broken = outcome["import pkg._broken"]
    assert not broken["ok"] and "libmissing.so.1" in str(broken["detail"]), broken
    assert not outcome["import pkg._ctypes"]["ok"] and "OSError" in str(outcome["import pkg._ctypes"]["detail"])
    # What the binaries tell apart: in one process, _late is served the runtime _early loaded from elsewhere.
    shared = outcome["import pkg._early, pkg._late"]
    assert not shared["ok"] and shared["libraries"] == [str(elsewhere / "libcudart.so.99")], shared


# Starts a thread when imported, as OpenBLAS does when NumPy loads it, unless its thread count is held to one.
POOL = """#include <Python.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void *idle(void *arg) { for (;;) pause(); return arg; }
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "blaslike", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_blaslike(void) {
    const char *threads = getenv("OPENBLAS_NUM_THREADS");
    pthread_t worker;
    if (!threads || strcmp(threads, "1") != 0) pthread_create(&worker, NULL, idle, NULL);
    PyObject *m = PyModule_Create(&module);
    if (m) PyModule_AddIntConstant(m, "PID", getpid());
    return m;
}
"""


def test_a_package_whose_import_starts_a_thread_pool_is_imported_once_for_its_checks(tmp_path: Path) -> None:
    """A package that loads a library starting a thread pool at import (CuPy: NumPy, OpenBLAS) is imported once, in
    the process its checks fork from, with the pool held to one thread (ONE_THREAD)."""
    (tmp_path / "uses_blas").mkdir()
    (tmp_path / "pool.c").write_text(POOL)
    include, suffix = sysconfig.get_paths()["include"], sysconfig.get_config_var("EXT_SUFFIX")
    _gcc(f"-I{include}", "-pthread", "-o", str(tmp_path / "uses_blas" / f"blaslike{suffix}"), str(tmp_path / "pool.c"))
    (tmp_path / "uses_blas/__init__.py").write_text("from . import blaslike\n")
    (tmp_path / "uses_blas/sub.py").write_text("")
    shared = "import uses_blas.sub, os; assert uses_blas.blaslike.PID != os.getpid(), 'imported again'"
    checks = [{"statement": shared, "expect": "ok", "pythonpath": str(tmp_path)}]
    (forked,) = _probed(checks, fork=True)
    assert forked["ok"], forked["detail"]
    threads = "import uses_blas, threading, os; assert len(os.listdir('/proc/self/task')) == 1"
    assert all(o["ok"] for o in _probed([{**checks[0], "statement": threads}] * 2, fork=True))


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
def test_a_tiers_programs_start_once_its_statements_are_done(tmp_path: Path, fork: bool) -> None:
    """The first import of a package is a statement's (`-W error`), whichever the checks list first: it compiles the
    package's modules, and the programs after it read what it wrote (forked, both from one interpreter that
    imported the package once)."""
    (tmp_path / "ordered").mkdir()
    log = tmp_path / "imports.log"
    (tmp_path / "ordered/__init__.py").write_text(
        f"import sys\nwith open({str(log)!r}, 'a') as log:\n"
        "    log.write(('statement' if 'error' in sys.warnoptions else 'program') + '\\n')\n"
    )
    path = str(tmp_path)
    checks: list[dict[str, object]] = [
        {"command": ["python", "-c", "import ordered"], "pythonpath": path},
        {"command": ["python", "-c", "import ordered"], "pythonpath": path},
        {"statement": "import ordered", "expect": "ok", "pythonpath": path},
    ]
    assert all(o["ok"] for o in _probed(checks, fork=fork))
    seen = log.read_text().split()
    programs = 1 if fork else 2
    assert seen[0] == "statement" and seen.count("program") == programs
    assert seen[-programs:] == ["program"] * programs
