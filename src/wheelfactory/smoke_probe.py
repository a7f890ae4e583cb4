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
"""

from __future__ import annotations

import builtins
import fnmatch
import json
import os
import sys
import traceback
from typing import Any

# subprocess and concurrent.futures are imported where used: each check's own interpreter needs neither, and it
# is started some fifty times per wheel.


def _mapped_paths() -> list[str]:
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            return sorted({line.split()[-1] for line in maps if "/" in line})
    except OSError:
        return []


def _cuda_mapped(spec: dict[str, Any]) -> list[str]:
    """The CUDA libraries this process mapped, by file name wherever they came from (a system CUDA, another
    major's)."""
    names = spec.get("cuda_libraries") or []
    return [p for p in _mapped_paths() if any(fnmatch.fnmatchcase(p.rsplit("/", 1)[-1], n) for n in names)]


def _one(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one statement in this process and judge it."""
    expected = None if spec["expect"] == "ok" else getattr(builtins, spec["expect"])
    try:
        exec(compile(spec["statement"], "<smoke>", "exec"), {"__name__": "__smoke__"})
    except BaseException as exc:  # what was not expected is a failure, with what it said
        message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        if expected is not None and isinstance(exc, expected):
            hint = spec.get("hint")
            return {"ok": hint is None or hint in str(exc), "detail": message}
        return {"ok": False, "detail": message}
    if expected is not None:
        mapped = _cuda_mapped(spec)
        found = f" — CUDA libraries were found: {mapped}" if mapped else ""
        return {"ok": False, "detail": f"ran, but {spec['expect']} was expected{found}", "libraries": mapped}
    result: dict[str, Any] = {"ok": True, "detail": "imported"}
    if spec.get("site"):
        # By file name, wherever it was mapped from: a system CUDA (or another major's) is caught too.
        cuda = _cuda_mapped(spec)
        driver = [p for p in cuda if p.rsplit("/", 1)[-1].startswith("libcuda.so")]
        site = os.path.realpath(spec["site"]) + "/"  # the maps name real paths; a site may sit behind a link
        outside = [p for p in cuda if not p.startswith(site)]
        result["libraries"] = cuda
        if driver:
            result.update(ok=False, detail=f"the driver was loaded at import: {driver}")
        elif outside:
            result.update(ok=False, detail=f"CUDA libraries loaded from outside {spec['site']}: {outside}")
    return result


def _isolated(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one check in a fresh interpreter and read its outcome."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "PYTHONPATH")}
    if spec.get("pythonpath"):
        env["PYTHONPATH"] = spec["pythonpath"]
    if "command" in spec:
        argv = [sys.executable if spec["command"][0] == "python" else spec["command"][0], *spec["command"][1:]]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
        output = (run.stdout + run.stderr).strip()
        ok = run.returncode == 0 and "Traceback" not in output
        return {"ok": ok, "detail": f"exit {run.returncode}: {output[-2000:]}"}
    isolation = "-s" if spec.get("pythonpath") else "-I"  # -I would ignore PYTHONPATH
    run = subprocess.run(
        [sys.executable, "-W", "error", isolation, __file__, "--one", json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    lines = run.stdout.strip().splitlines()
    if run.returncode != 0 or not lines:
        return {"ok": False, "detail": f"the check crashed (exit {run.returncode}): {run.stderr.strip()[-500:]}"}
    outcome: dict[str, Any] = json.loads(lines[-1])
    return outcome


def main() -> None:
    if sys.argv[1] == "--one":
        print(json.dumps(_one(json.loads(sys.argv[2]))))
        return
    from concurrent.futures import ThreadPoolExecutor

    # Each check is its own process: several at a time, the outcomes in the checks' order.
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        print(json.dumps(list(pool.map(_isolated, json.loads(sys.argv[1])))))


main()
