"""Runs inside a smoke machine with a venv's Python; standard library only.

    python wheelfactory_probe.py CHECKS     CHECKS: a JSON list; prints a JSON list of outcomes, one per check

Each check runs in its own fresh interpreter (`python -W error -I`), so one import cannot help another:
    {"statement": "...", "expect": "ok" or the exception it must raise ("ImportError", "ImportError|OSError"),
     "hint": text that exception must carry (a list: one of them), or null,
     "site": the directory every CUDA library loaded must come from, or null,
     "cuda_libraries": file-name patterns of CUDA's libraries (every major's, and the driver),
     "pythonpath": PYTHONPATH for the check (then `-s` instead of `-I`), or null,
     "warnings_not_ours": a regular expression of modules whose warnings are not the wheel's (torch's), or null}
    {"command": ["python", "-m", "pkg"], "pythonpath": ...,     a program that must exit 0 (or "exit") without a
     "exit": 0, "says": text or null, "silent_of": text or null}  traceback, its output saying "says" and not
                                                                  "silent_of"
An outcome: {"ok": bool, "detail": "...", "libraries": [mapped CUDA libraries]}.

The statements run first, the programs after them. pip installs without byte-compiling, so the first
interpreter to import a module compiles it and writes its .pyc: here that is always a statement's (`-W error`: a
SyntaxWarning in the package's source fails it every time, not only where no program beside it compiled that
module first), and the programs read what it wrote instead of each compiling the package again beside it
(LightGBM's NumPy and SciPy: about a second of CPU each time, once per venv instead of three times).

Statements are run some fifty times per wheel. Where the OS can fork (Linux), one interpreter is started per set of
flags (`-W error`, and `-I`, or `-s` with the checks' PYTHONPATH) and imports nothing beyond what Python loads
at start-up (marshal, os, sys, builtins); each statement runs in a child forked from it, which is as fresh as a
new interpreter of those flags — nothing imported, nothing loaded — at a twentieth of the start-up. Elsewhere
(Windows) each statement gets an interpreter of its own. Either way the checks go in, and what each saw (the
outcome, the files it mapped) comes out, in marshal's format; this process judges the mapped files.

Most statements begin by importing the wheel's package (`import pkg._mod`, `from pkg.sub import x`: Python
imports `pkg` first), and that import is most of their cost (a package that opens its CUDA libraries at import
maps hundreds of megabytes). Those of one package are forked from a child of the pristine interpreter that has
done exactly that first step, `import pkg`, with the statement's warning filters: each then starts where its own
run would have been after that step. Only where the step left a process that forks faithfully: it raised
nothing (-W error: warned nothing) and runs one thread (a fork keeps only the caller's; the thread pools libraries
start at import are held to one: ONE_THREAD). Otherwise, or if that child dies, the statements are forked from the
pristine interpreter as before. Statements that only import what that first step loaded (`import cupy._core.core`
after `import cupy`) would each look the modules up and report that same process: one of them runs, and the others
get its outcome.

Programs (`python -m pkg.mod`, `python -c "import pkg..."`) that begin by importing the same package are forked, in
the same way, from one interpreter of their plain flags that did what each would do first (`-m`: import runpy;
sys.path from the working folder; a bare __main__) and imported the package, where that import forks faithfully;
each child then runs its program and exits as an interpreter does. The one difference by design: while the package
is imported, sys.argv (and sys.orig_argv) hold none of a program's arguments. Other programs, and these where the
import cannot be shared, run in interpreters of their own.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys
from _collections_abc import Callable  # loaded at start-up, unlike collections.abc

if False:  # for the type checker only: this process imports nothing it need not
    from concurrent.futures import Executor


def _mapped_paths() -> list[str]:
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            return sorted({line.split()[-1] for line in maps if "/" in line})
    except OSError:
        return []


def _one(spec: dict[str, object]) -> dict[str, object]:
    """Run one statement in this process: what it raised (and whether that was the exception expected, with
    its hint), or the files it mapped."""
    expect = str(spec["expect"])
    if spec.get("warnings_not_ours"):
        import warnings  # already loaded by -W error

        warnings.filterwarnings("ignore", module=str(spec["warnings_not_ours"]))
    try:
        exec(compile(str(spec["statement"]), "<smoke>", "exec"), {"__name__": "__smoke__"})
    except BaseException as exc:  # what was not expected is a failure, with what it said
        import traceback  # only here: most checks raise nothing

        wanted = expect != "ok" and isinstance(exc, tuple(getattr(builtins, e) for e in expect.split("|")))
        message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        hint = spec.get("hint") or ""
        hints = [str(h) for h in hint] if isinstance(hint, list) else [str(hint)]
        return {"raised": message, "as_expected": wanted and any(h in str(exc) for h in hints)}
    return {"raised": None, "mapped": _mapped_paths()}


def _judged(spec: dict[str, object], seen: dict[str, object]) -> dict[str, object]:
    """The outcome of a check from what its interpreter saw: CUDA libraries by file name, wherever they were
    mapped from (a system CUDA, or another major's, is caught too)."""
    if "crashed" in seen:
        return {"ok": False, "detail": f"the check crashed: {seen['crashed']}"}
    if seen["raised"] is not None:
        return {"ok": bool(seen["as_expected"]), "detail": seen["raised"]}
    import fnmatch

    patterns = [str(p) for p in spec.get("cuda_libraries") or []]  # type: ignore[attr-defined]
    paths = [str(p) for p in seen["mapped"]]  # type: ignore[attr-defined]
    cuda = [p for p in paths if any(fnmatch.fnmatchcase(p.rsplit("/", 1)[-1], n) for n in patterns)]
    if spec["expect"] != "ok":
        found = f" — CUDA libraries were found: {cuda}" if cuda else ""
        return {"ok": False, "detail": f"ran, but {spec['expect']} was expected{found}", "libraries": cuda}
    if not spec.get("site"):
        return {"ok": True, "detail": "imported"}
    driver = [p for p in cuda if p.rsplit("/", 1)[-1].startswith("libcuda.so")]
    site = os.path.join(os.path.realpath(str(spec["site"])), "")  # the maps name real paths; a site may be a link
    outside = [p for p in cuda if not p.startswith(site)]
    if driver:
        return {"ok": False, "detail": f"the driver was loaded at import: {driver}", "libraries": cuda}
    if outside:
        return {
            "ok": False,
            "detail": f"CUDA libraries loaded from outside {spec['site']}: {outside}",
            "libraries": cuda,
        }
    return {"ok": True, "detail": "imported", "libraries": cuda}


# The thread pools that libraries start when imported (OpenBLAS's, which NumPy loads; OpenMP's; MKL's), kept to the
# thread that loads them: a process that imported such a package (CuPy imports NumPy) then still runs one thread and
# forks faithfully, and its statements share that import instead of each importing it again. Set for every check
# alike, forked or spawned: how many threads a pool starts changes no library loaded, nor where from.
ONE_THREAD = {
    name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
}


def _environment(pythonpath: object) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "PYTHONPATH")}
    env.update(ONE_THREAD)
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def _interpreter(pythonpath: object) -> list[str]:
    """The flags of a statement's interpreter: warnings are errors; isolated, but for PYTHONPATH when given."""
    return [sys.executable, "-W", "error", "-s" if pythonpath else "-I", __file__]  # -I would ignore PYTHONPATH


def _program_judged(spec: dict[str, object], status: int, output: str) -> dict[str, object]:
    """A program's outcome: the exit status expected (0 unless told), no traceback, and what it must say and must
    not."""
    output = output.strip()
    says, silent_of = spec.get("says"), spec.get("silent_of")
    ok = (
        status == spec.get("exit", 0)
        and "Traceback" not in output
        and (not says or str(says) in output)
        and (not silent_of or str(silent_of) not in output)
    )
    return {"ok": ok, "detail": f"exit {status}: {output[-2000:]}"}


def _command(spec: dict[str, object]) -> dict[str, object]:
    """Run a program (`python` is the venv's) in a process of its own and judge it."""
    import subprocess

    command = [str(a) for a in spec["command"]]  # type: ignore[attr-defined]
    argv = [sys.executable if command[0] == "python" else command[0], *command[1:]]
    program = subprocess.run(
        argv, capture_output=True, text=True, timeout=300, env=_environment(spec.get("pythonpath"))
    )
    return _program_judged(spec, program.returncode, program.stdout + program.stderr)


def _program_start(spec: dict[str, object]) -> tuple[str, str] | None:
    """(-m or -c, the package the program imports first) of `python -m pkg.mod ...` or `python -c "import pkg..."`;
    None for any other program, which runs in a process of its own."""
    command = [str(a) for a in spec["command"]]  # type: ignore[attr-defined]
    if len(command) < 3 or command[0] != "python" or command[1] not in ("-m", "-c"):
        return None
    root = command[2].split(".", 1)[0] if command[1] == "-m" else _first_imported(command[2])
    return (command[1], root) if root and root.isidentifier() else None


def _programs_forked(specs: list[dict[str, object]], folder: str) -> list[dict[str, object]] | None:
    """Run programs that start the same way (`_program_start`), each in a child of one interpreter that did that
    start (`--programs`), and judge them; None where that interpreter found it could not serve them faithfully."""
    import subprocess

    pythonpath = specs[0].get("pythonpath")
    run = subprocess.run(
        [sys.executable, __file__, "--programs", folder],
        input=marshal.dumps(specs),
        capture_output=True,
        timeout=300 * len(specs),
        env=_environment(pythonpath),
    )
    if run.returncode != 0:
        return None
    outcomes = []
    for index, spec in enumerate(specs):
        with open(f"{folder}/{index}.status", encoding="utf-8") as status:
            code = int(status.read())
        output = ""
        for stream in ("out", "err"):  # as a pipe's text is read: the locale's encoding, universal newlines
            try:
                with open(f"{folder}/{index}.{stream}", errors="replace") as written:
                    output += written.read()
            except OSError:  # the child died before it opened it
                pass
        outcomes.append(_program_judged(spec, code, output))
    return outcomes


def _exit_status(code: object) -> int:
    """The exit status an interpreter gives SystemExit(code), printing what is not a number as it does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _as_interpreter(run: str, mode: str) -> int:
    """Run the program `run` (a module's name, or code) as `python -m` or `-c` would in this process, then exit as
    the interpreter does: its exit status, a traceback for an exception it did not catch (without this function's
    frame), its threads joined, its exit handlers run, its output flushed (120 if that fails)."""
    import atexit  # built in, loaded at start-up

    try:
        if mode == "-m":
            sys.modules["runpy"]._run_module_as_main(run)
        else:
            exec(compile(run, "<string>", "exec"), sys.modules["__main__"].__dict__)
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    except BaseException as exc:
        trace = exc.__traceback__.tb_next if exc.__traceback__ else None
        sys.excepthook(type(exc), exc.with_traceback(trace), trace)
        status = 1
    if "threading" in sys.modules:
        sys.modules["threading"]._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = 120
    return status


def _serve_programs(folder: str) -> None:
    """The programs on standard input, which start the same way, each in a child of this interpreter (plain flags,
    as theirs), after it did what each would do first: `python -m` imports runpy; sys.path starts with the working
    folder (-m) or "" (-c); __main__ is a bare module; the package is imported. The one difference: the program's
    arguments are put in sys.argv (and sys.orig_argv) after that import, not before. Exits 3 without running any
    where that import raised, wrote anything, or left more than one thread (a fork keeps only the caller's): they
    are each run in an interpreter of their own instead. A child writes its output to N.out and N.err; this
    process its exit status to N.status."""
    specs: list[dict[str, object]] = marshal.loads(sys.stdin.buffer.read())
    commands = [[str(a) for a in spec["command"]] for spec in specs]  # type: ignore[attr-defined]
    mode, root = _program_start(specs[0]) or ("", "")
    if mode == "-m":
        __import__("runpy")
    sys.path[0] = os.getcwd() if mode == "-m" else ""
    bare = type(sys)("__main__")
    bare.__dict__.update(__builtins__=builtins, __loader__=builtins.__loader__, __annotations__={})
    sys.modules["__main__"] = bare
    sys.argv = [mode]
    _redirected(f"{folder}/import.log")
    try:
        __import__(root)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        os._exit(3)
    if os.path.getsize(f"{folder}/import.log") or len(os.listdir("/proc/self/task")) != 1:
        os._exit(3)

    def run(index: int) -> int:
        for fd, path in ((1, f"{folder}/{index}.out"), (2, f"{folder}/{index}.err")):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        sys.argv = [mode, *commands[index][3:]]
        if hasattr(sys, "orig_argv"):
            sys.orig_argv = [sys.executable, *commands[index][1:]]
        return _as_interpreter(commands[index][2], mode)

    _in_children(list(range(len(commands))), folder, run)


def _seen(outcome_file: str, log: str) -> dict[str, object]:
    """What a statement's process wrote, or why it wrote nothing."""
    try:
        with open(outcome_file, "rb") as written:
            seen: dict[str, object] = marshal.load(written)
            return seen
    except (OSError, EOFError, ValueError, TypeError):
        return {"crashed": log.strip()[-500:]}


def _spawned(spec: dict[str, object], outcome_file: str) -> dict[str, object]:
    """Run one statement in an interpreter of its own."""
    import subprocess

    run = subprocess.run(
        [*_interpreter(spec.get("pythonpath")), "--one", outcome_file],
        input=marshal.dumps(spec),
        capture_output=True,
        timeout=300,
        env=_environment(spec.get("pythonpath")),
    )
    return _seen(outcome_file, f"exit {run.returncode}: {run.stderr.decode(errors='replace')}")


def _forked(specs: list[dict[str, object]], folder: str) -> list[dict[str, object]]:
    """Run statements of one PYTHONPATH, each in a child of one pristine interpreter of their flags."""
    import subprocess

    pythonpath = specs[0].get("pythonpath")
    run = subprocess.run(
        [*_interpreter(pythonpath), "--fork", folder],
        input=marshal.dumps(specs),
        capture_output=True,
        timeout=300 * len(specs),
        env=_environment(pythonpath),
    )
    trouble = run.stderr.decode(errors="replace") if run.returncode else ""
    return [_seen(f"{folder}/{i}", trouble or _log(f"{folder}/{i}")) for i in range(len(specs))]


def _log(child: str) -> str:
    """How a forked statement's process ended, as `_spawned` tells it: its exit status, then its output."""
    try:
        with open(f"{child}.status", encoding="utf-8") as status, open(f"{child}.log", errors="replace") as log:
            return f"exit {status.read()}: {log.read()}"
    except OSError:
        return ""


def _run_and_write(spec: dict[str, object], outcome_file: str) -> None:
    """Run one statement, then what it registered to run at exit (as an interpreter's exit would), and only
    then write what it saw: a process that dies on the way writes nothing, and is judged crashed."""
    import atexit  # built in: loaded at start-up with the interpreter

    outcome = _one(spec)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    with open(outcome_file, "wb") as written:
        marshal.dump(outcome, written)


def _redirected(log_file: str) -> None:
    log = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)


def _in_children(indices: list[int], folder: str, run: Callable[[int], int]) -> None:
    """`run(N)` for each N of `indices` in a child of this process, some at a time, the child exiting with what it
    returns; this process writes each child's exit status to `folder`/N.status."""
    running: dict[int, int] = {}

    def reap() -> None:
        child, status = os.wait()
        with open(f"{folder}/{running.pop(child)}.status", "w", encoding="utf-8") as written:
            written.write(str(os.waitstatus_to_exitcode(status)))

    for index in indices:
        if len(running) >= max(2, os.cpu_count() or 1):
            reap()
        child = os.fork()
        if child == 0:
            os._exit(run(index))
        running[child] = index
    while running:
        reap()


def _fork_all(specs: list[dict[str, object]], indices: list[int], folder: str) -> None:
    """Each statement of `indices` in a child of this process: a child writes what it saw to `folder`/N once its
    exit handlers ran (nothing, if it crashed), its output to N.log."""

    def run(index: int) -> int:
        _redirected(f"{folder}/{index}.log")
        _run_and_write(specs[index], f"{folder}/{index}")
        return 0

    _in_children(indices, folder, run)


def _first_imported(statement: str) -> str | None:
    """The top-level package a statement imports before anything else (`import a.b, c` or `from a.b import x`:
    `a`), or None. String operations only: this process must stay as pristine as its children."""
    words = statement.split(None, 2)
    if len(words) < 2 or words[0] not in ("import", "from"):
        return None
    root = words[1].split(";", 1)[0].split(",", 1)[0].split(".", 1)[0]
    return root if root.isidentifier() else None


def _forks_faithfully(root: str, spec: dict[str, object]) -> bool:
    """Import `root` here as a statement's own first step would (its warning filters, -W error): True if that
    raised nothing and left this process one thread."""
    if spec.get("warnings_not_ours"):
        import warnings  # already loaded by -W error

        warnings.filterwarnings("ignore", module=str(spec["warnings_not_ours"]))
    try:
        exec(compile(f"import {root}", "<smoke>", "exec"), {"__name__": "__smoke__"})
        return len(os.listdir("/proc/self/task")) == 1
    except BaseException:  # the statements will meet it themselves, each from the pristine interpreter
        return False


def _imports_only_loaded(statement: str) -> bool:
    """Whether `statement` is `import a.b[, c.d]` of modules this process has loaded: run in a child of it, it only
    looks them up in sys.modules and binds a name, which changes nothing the child then reports. String operations
    only, as in `_first_imported`."""
    words = statement.strip().split(None, 1)
    if len(words) != 2 or words[0] != "import":
        return False
    names = [name.strip() for name in words[1].split(",")]
    return all(
        name and all(part.isidentifier() for part in name.split(".")) and sys.modules.get(name) is not None
        for name in names
    )


def _copy_outcome(folder: str, source: int, target: int) -> None:
    """What the child of statement `source` left (outcome, output, exit status), as statement `target`'s."""
    for suffix in ("", ".log", ".status"):
        try:
            with open(f"{folder}/{source}{suffix}", "rb") as left:
                data = left.read()
        except OSError:  # the child died before writing its outcome: so does the copy
            continue
        with open(f"{folder}/{target}{suffix}", "wb") as written:
            written.write(data)


def _fork_after_import(specs: list[dict[str, object]], indices: list[int], folder: str) -> None:
    """Run the statements of `indices` from this process, which imported the package they begin with. Those that
    only import modules that import loaded (most of CuPy's 66: its package imports them itself) would each start
    from this same state, do nothing but look them up, and report the same: one child runs for them all, and the
    others get its outcome. Each of the rest gets a child of its own."""
    loaded = [i for i in indices if _imports_only_loaded(str(specs[i]["statement"]))]
    _fork_all(specs, [i for i in indices if i not in loaded[1:]], folder)
    for index in loaded[1:]:
        _copy_outcome(folder, loaded[0], index)


def _fork_each(folder: str) -> None:
    """The statements on standard input, each in a child: forked from a child that imported the package they
    begin by importing, where that forks faithfully; from this pristine interpreter otherwise."""
    specs: list[dict[str, object]] = marshal.loads(sys.stdin.buffer.read())
    groups: dict[tuple[str, object], list[int]] = {}
    pristine = []
    for index, spec in enumerate(specs):
        root = _first_imported(str(spec["statement"]))
        if root is None:
            pristine.append(index)
        else:
            groups.setdefault((root, spec.get("warnings_not_ours")), []).append(index)
    for number, ((root, _), indices) in enumerate(groups.items()):
        child = os.fork()
        if child == 0:
            _redirected(f"{folder}/import-{number}.log")
            if _forks_faithfully(root, specs[indices[0]]):
                _fork_after_import(specs, indices, folder)
                os._exit(0)
            os._exit(1)
        if os.waitpid(child, 0)[1] != 0:
            pristine += indices
    _fork_all(specs, sorted(pristine), folder)


def _programs_run(checks: list[dict[str, object]], scratch: str, pool: Executor) -> dict[int, dict[str, object]]:
    """Each program among `checks`, judged: those that start alike (`_program_start`) forked from one interpreter
    where the OS can fork and that interpreter serves them faithfully, each of the others in an interpreter of its
    own."""
    programs = [i for i, c in enumerate(checks) if "command" in c]
    alike: dict[tuple[object, ...], list[int]] = {}
    for i in programs if hasattr(os, "fork") else []:
        start = _program_start(checks[i])
        if start:
            alike.setdefault((checks[i].get("pythonpath"), *start), []).append(i)
    forked = []
    for group, indices in enumerate(alike.values()):
        os.mkdir(folder := os.path.join(scratch, f"programs-{group}"))
        forked.append((indices, pool.submit(_programs_forked, [checks[i] for i in indices], folder)))
    shared = {i for indices in alike.values() for i in indices}
    spawned = {i: pool.submit(_command, checks[i]) for i in programs if i not in shared}
    judged: dict[int, dict[str, object]] = {}
    for indices, future in forked:
        outcomes = future.result()
        if outcomes is None:  # not served faithfully: each in an interpreter of its own
            spawned.update((i, pool.submit(_command, checks[i])) for i in indices)
        else:
            judged.update(zip(indices, outcomes, strict=True))
    judged.update((i, future.result()) for i, future in spawned.items())
    return judged


def main() -> None:
    if sys.argv[1] == "--one":
        _run_and_write(marshal.loads(sys.stdin.buffer.read()), sys.argv[2])
        return
    if sys.argv[1] == "--fork":
        _fork_each(sys.argv[2])
        return
    if sys.argv[1] == "--programs":
        _serve_programs(sys.argv[2])
        return
    import json
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    checks = json.loads(sys.argv[1])
    outcomes: dict[int, dict[str, object]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="smoke-probe-") as scratch,
        ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool,
    ):
        statements = [i for i, c in enumerate(checks) if "command" not in c]
        if hasattr(os, "fork"):
            by_pythonpath: dict[object, list[int]] = {}
            for i in statements:
                by_pythonpath.setdefault(checks[i].get("pythonpath"), []).append(i)
            for group, indices in enumerate(by_pythonpath.values()):
                os.mkdir(folder := os.path.join(scratch, str(group)))
                seen = _forked([checks[i] for i in indices], folder)
                outcomes.update((i, _judged(checks[i], s)) for i, s in zip(indices, seen, strict=True))
        else:
            spawned = {i: pool.submit(_spawned, checks[i], os.path.join(scratch, str(i))) for i in statements}
            outcomes.update((i, _judged(checks[i], future.result())) for i, future in spawned.items())
        outcomes.update(_programs_run(checks, scratch, pool))
    print(json.dumps([outcomes[i] for i in range(len(checks))]))


main()
