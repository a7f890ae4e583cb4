"""What a wheel's Python tag promises of its binaries, checked.

- cpXY-abi3: every extension module is built for the stable ABI (named `*.abi3.so`; on Windows it imports
  python3.dll, never python3X.dll), and uses nothing of the C API newer than the tag's CPython — abi3audit reads
  the symbols each module imports.
- py3-none: no extension module at all, and no binary links libpython or pythonXY.dll: one wheel for every
  Python can only hold libraries that no interpreter's ABI is baked into.
- cpXY-cpXY: nothing beyond what the audit checks already.

abi3audit reads bytes from the wheel, as every reader here does: it runs in its own process, bounded in time,
and what it says of a member is shown escaped.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from .. import host
from ..components import operating_system
from ..errors import ToolFailure
from ..untrusted.shown import shown
from .wheelfile import Binary, WheelName

ABI3AUDIT_TIMEOUT_S = 300
_LIBPYTHON = re.compile(r"^libpython3\.\d+[a-z]*\.so(\.[\d.]+)?$")
_PYTHON_DLL = re.compile(r"^python3\d+\.dll$", re.IGNORECASE)


def python_abi_problems(wheel: Path, name: WheelName, binaries: Iterable[Binary]) -> list[str]:
    """What in the wheel's binaries breaks the promise of its Python tag (none for a cpXY-cpXY wheel)."""
    if name.abi == "cpython":
        return []
    problems = []
    for binary in binaries:
        member = shown(binary.member)
        file_name = PurePosixPath(binary.member).name
        if name.abi == "none":
            if binary.importable:
                problems.append(
                    f"{member}: an extension module in a py3-none wheel — it works with one CPython only; say "
                    "wheel_abi: cpython (or abi3) in the recipe"
                )
            problems += [
                f"{member}: links {shown(lib)}, one CPython's library, yet the wheel is py3-none"
                for lib in binary.needed
                if _LIBPYTHON.match(lib) or _PYTHON_DLL.match(lib)
            ]
        elif binary.importable:
            infix = operating_system(name.os).stable_abi_infix
            if infix is not None and infix not in file_name:
                problems.append(
                    f"{member}: an extension module built for one CPython in a {name.python_tag} wheel — build it "
                    "with the limited API (Py_LIMITED_API, setuptools' py_limited_api)"
                )
            problems += [
                f"{member}: imports {shown(dll)}, one CPython's DLL; a stable-ABI module imports python3.dll"
                for dll in binary.needed
                if _PYTHON_DLL.match(dll)
            ]
    if name.abi == "abi3":
        problems += abi3audit(wheel)
    return problems


def abi3audit(wheel: Path) -> list[str]:
    """abi3audit's verdict on the wheel's stable-ABI modules: each symbol outside the stable ABI, and each part of
    it newer than the CPython the wheel's tag names (cp310-abi3: 3.10)."""
    command = [sys.executable, "-m", "abi3audit", "--strict", "--report", str(wheel)]
    done = host.run(command, f"abi3audit {wheel.name}", check=False, timeout=ABI3AUDIT_TIMEOUT_S)
    try:
        report = json.loads(done.stdout)
        results = [entry for spec in report["specs"].values() for entry in spec.get("wheel", [])]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ToolFailure(
            f"abi3audit {wheel.name}: no report (exit {done.returncode}): {host.tail(done.stdout + done.stderr, 6)}"
        ) from None
    problems = []
    for entry in results:
        module, result = shown(str(entry.get("name"))), entry.get("result") or {}
        symbols = sorted(str(s) for s in result.get("non_abi3_symbols") or [])
        if symbols:
            problems.append(f"{module}: uses {', '.join(map(shown, symbols))}, outside the stable ABI (abi3audit)")
        newer = result.get("future_abi3_objects") or {}
        if newer:
            listed = ", ".join(f"{shown(str(s))} ({shown(str(v))})" for s, v in sorted(newer.items()))
            baseline = shown(str(result.get("baseline")))
            problems.append(
                f"{module}: uses {listed}, newer than the wheel's CPython {baseline} (abi3audit) — keep to that "
                "CPython's stable ABI, or raise the oldest Python of the matrix"
            )
    if done.returncode != 0 and not problems:
        problems.append(f"abi3audit failed (exit {done.returncode}): {shown(host.tail(done.stderr, 4))}")
    return problems
