"""Runs inside a smoke machine with a venv's Python; standard library only.

    python smoke_probe.py CHECKS     CHECKS: a JSON list; prints a JSON list of outcomes, one per check

Each check runs in its own fresh interpreter (`python -W error -I`), so one import cannot help another:
    {"statement": "...", "expect": "ok" or the exception it must raise ("ImportError", "OSError"),
     "hint": text that exception must carry, or null,
     "site": the directory every CUDA library loaded must come from, or null}
    {"command": ["python", "-m", "pkg"]}    a program that must exit 0 without a traceback
An outcome: {"ok": bool, "detail": "...", "libraries": [mapped CUDA libraries]}.
"""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def _mapped_paths() -> list[str]:
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            return sorted({line.split()[-1] for line in maps if "/" in line})
    except OSError:
        return []


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
        return {"ok": False, "detail": f"ran, but {spec['expect']} was expected"}
    result: dict[str, Any] = {"ok": True, "detail": "imported"}
    if spec.get("site"):
        paths = _mapped_paths()
        cuda = [p for p in paths if "/nvidia/" in p or "libcuda" in p.rsplit("/", 1)[-1]]
        driver = [p for p in paths if p.rsplit("/", 1)[-1].startswith("libcuda.so")]
        outside = [p for p in cuda if not p.startswith(spec["site"])]
        result["libraries"] = cuda
        if driver:
            result.update(ok=False, detail=f"the driver was loaded at import: {driver}")
        elif outside:
            result.update(ok=False, detail=f"CUDA libraries loaded from outside {spec['site']}: {outside}")
    return result


def _isolated(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one check in a fresh interpreter and read its outcome."""
    if "command" in spec:
        argv = [sys.executable if spec["command"][0] == "python" else spec["command"][0], *spec["command"][1:]]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        output = (run.stdout + run.stderr).strip()
        ok = run.returncode == 0 and "Traceback" not in output
        return {"ok": ok, "detail": f"exit {run.returncode}: {output[-2000:]}"}
    run = subprocess.run(
        [sys.executable, "-W", "error", "-I", __file__, "--one", json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"},
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
    # Each check is its own process: several at a time, the outcomes in the checks' order.
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        print(json.dumps(list(pool.map(_isolated, json.loads(sys.argv[1])))))


main()
