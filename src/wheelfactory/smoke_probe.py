"""Runs inside a smoke venv with that venv's Python; standard library only.

Usage: python -W error smoke_probe.py SPEC, SPEC being JSON: {"statement": "...", "expect": "ok"|"import_error",
"hint": text the ImportError must carry or null, "site": site-packages to hold every CUDA library loaded, or null}.
Prints one JSON line: {"ok": bool, "detail": "..."}.
"""

import json
import sys
import traceback


def _mapped_paths() -> list[str]:
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            return sorted({line.split()[-1] for line in maps if "/" in line})
    except OSError:
        return []


def main() -> None:
    spec = json.loads(sys.argv[1])
    result = {"ok": False, "detail": ""}
    try:
        exec(compile(spec["statement"], "<smoke>", "exec"), {"__name__": "__smoke__"})
    except ImportError as exc:
        message = f"{type(exc).__name__}: {exc}"
        if spec.get("expect") == "import_error":
            hint = spec.get("hint")
            result = {"ok": hint is None or hint in str(exc), "detail": message}
        else:
            result = {"ok": False, "detail": message}
    except BaseException as exc:  # anything but ImportError is a failure, whatever was expected
        result = {"ok": False, "detail": "".join(traceback.format_exception_only(type(exc), exc)).strip()}
    else:
        result = {
            "ok": spec.get("expect") != "import_error",
            "detail": "imported" if spec.get("expect") != "import_error" else "expected ImportError",
        }
        if spec.get("site"):
            paths = _mapped_paths()
            cuda = [p for p in paths if "/nvidia/" in p or "libcuda" in p.rsplit("/", 1)[-1]]
            driver = [p for p in paths if p.rsplit("/", 1)[-1].startswith("libcuda.so")]
            outside = [p for p in cuda if not p.startswith(spec["site"])]
            result["libraries"] = cuda
            if driver:
                result = {**result, "ok": False, "detail": f"the driver was loaded at import: {driver}"}
            elif outside:
                result = {**result, "ok": False, "detail": f"CUDA libraries loaded from outside the venv: {outside}"}
    print(json.dumps(result))


main()
