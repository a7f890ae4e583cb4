"""Runs inside a smoke machine with a venv's Python; standard library only.

    python smoke_probe.py CHECKS     CHECKS: a JSON list; prints a JSON list of outcomes, one per check

Each check runs in its own fresh interpreter (`python -W error -I`), so one import cannot help another:
    {"statement": "...", "expect": "ok" or the exception it must raise ("ImportError", "OSError"),
     "hint": text that exception must carry, or null,
     "site": the directory every CUDA library loaded must come from, or null,
     "cuda_libraries": file-name patterns of CUDA's libraries (every major's, and the driver),
     "pythonpath": PYTHONPATH for the check (then `-s` instead of `-I`), or null}
    {"command": ["python", "-m", "pkg"], "pythonpath": ...}    a program that must exit 0 without a traceback
An outcome: {"ok": bool, "detail": "...", "libraries": [mapped CUDA libraries]}.

A check's interpreter is started some fifty times per wheel: it imports nothing that Python does not load at
start-up (marshal, os, sys, builtins). It gets its check on standard input and writes what it saw — the outcome
and the files it mapped — to a file, in marshal's format; this process judges the mapped files.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys


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
    try:
        exec(compile(str(spec["statement"]), "<smoke>", "exec"), {"__name__": "__smoke__"})
    except BaseException as exc:  # what was not expected is a failure, with what it said
        import traceback  # only here: most checks raise nothing

        wanted = expect != "ok" and isinstance(exc, getattr(builtins, expect))
        message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return {"raised": message, "as_expected": wanted and str(spec.get("hint") or "") in str(exc)}
    return {"raised": None, "mapped": _mapped_paths()}


def _judged(spec: dict[str, object], seen: dict[str, object]) -> dict[str, object]:
    """The outcome of a check from what its interpreter saw: CUDA libraries by file name, wherever they were
    mapped from (a system CUDA, or another major's, is caught too)."""
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
    site = os.path.realpath(str(spec["site"])) + "/"  # the maps name real paths; a site may sit behind a link
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


def _isolated(spec: dict[str, object], outcome_file: str) -> dict[str, object]:
    """Run one check in a fresh interpreter (which writes what it saw to `outcome_file`) and judge it."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "PYTHONPATH")}
    if spec.get("pythonpath"):
        env["PYTHONPATH"] = str(spec["pythonpath"])
    if "command" in spec:
        command = [str(a) for a in spec["command"]]  # type: ignore[attr-defined]
        argv = [sys.executable if command[0] == "python" else command[0], *command[1:]]
        program = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
        output = (program.stdout + program.stderr).strip()
        ok = program.returncode == 0 and "Traceback" not in output
        return {"ok": ok, "detail": f"exit {program.returncode}: {output[-2000:]}"}
    isolation = "-s" if spec.get("pythonpath") else "-I"  # -I would ignore PYTHONPATH
    run = subprocess.run(
        [sys.executable, "-W", "error", isolation, __file__, "--one", outcome_file],
        input=marshal.dumps(spec),
        capture_output=True,
        timeout=300,
        env=env,
    )
    try:
        with open(outcome_file, "rb") as written:
            seen = marshal.load(written)
    except (OSError, EOFError, ValueError, TypeError):
        stderr = run.stderr.decode(errors="replace").strip()
        return {"ok": False, "detail": f"the check crashed (exit {run.returncode}): {stderr[-500:]}"}
    return _judged(spec, seen)


def main() -> None:
    if sys.argv[1] == "--one":
        outcome = _one(marshal.loads(sys.stdin.buffer.read()))
        with open(sys.argv[2], "wb") as written:
            marshal.dump(outcome, written)
        return
    import json
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    checks = json.loads(sys.argv[1])
    # Each check is its own process: several at a time, the outcomes in the checks' order.
    with (
        tempfile.TemporaryDirectory(prefix="smoke-probe-") as scratch,
        ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool,
    ):
        files = [os.path.join(scratch, str(i)) for i in range(len(checks))]
        print(json.dumps(list(pool.map(_isolated, checks, files))))


main()
