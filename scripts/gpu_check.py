"""The GPU tier: run a package's GPU checks on a machine with an NVIDIA GPU. Standard library only.

It runs without the factory installed, from a plain Python where the wheels are installed (machines with no
internet), as well as from `nox -s gpu-check -- WHEEL...`:

    python scripts/gpu_check.py --package cuprobe            # the package as installed in this Python
    python scripts/gpu_check.py --wheel dist/X.whl [...]     # each wheel in a fresh venv (its dependencies from pip)

The checks come from the package's `_cuda_variant.GPU_CHECKS`, rendered from the recipe's `gpu_checks`, after
`python -m pkg._cuda_variant` (which fails when a GPU here has no code in the wheel or the driver is too old). Each
runs in its own process with `skip(reason)` available; a fresh XDG_CACHE_HOME per invocation, so kernel caches
start empty. Exit status: 0 all passed (or skipped), 1 a check failed, 4 no GPU here (nothing was run).
"""

from __future__ import annotations

import argparse
import ctypes
import email.message
import email.parser
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

EXIT_FAILED = 1
EXIT_NO_GPU = 4
_EXIT_SKIP = 3

_PRELUDE = """
import sys
class _Skip(Exception):
    pass
def skip(reason):
    raise _Skip(reason)
def _run(code):
    try:
        exec(compile(code, "<gpu check>", "exec"), {"__name__": "__gpu_check__", "skip": skip})
    except _Skip as exc:
        print(f"skip: {exc}")
        sys.exit(%d)
    except ImportError as exc:
        if %r:
            print(f"skip: not installed here: {exc}")
            sys.exit(%d)
        raise
"""


def gpu_present() -> str | None:
    """None when the driver sees at least one GPU, else why not."""
    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        driver = ctypes.CDLL(name)
    except OSError:
        return f"no GPU: the CUDA driver ({name}) is not installed"
    if driver.cuInit(0) != 0:
        return "no GPU: the CUDA driver found no usable device (cuInit failed)"
    count, version = ctypes.c_int(), ctypes.c_int()
    driver.cuDeviceGetCount(ctypes.byref(count))
    driver.cuDriverGetVersion(ctypes.byref(version))
    if count.value == 0:
        return "no GPU: the CUDA driver sees no device"
    return None


def run_checks(package: str, allow_missing: bool, python: str = sys.executable) -> list[dict[str, object]]:
    listing = subprocess.run(
        [python, "-c", f"import json, {package}._cuda_variant as v; print(json.dumps(v.GPU_CHECKS))"],
        capture_output=True,
        text=True,
        check=False,
    )
    if listing.returncode != 0:
        raise SystemExit(f"cannot read the GPU checks of {package}: {listing.stderr.strip()[-500:]}")
    checks = json.loads(listing.stdout)
    results = [diagnostic(package, python)]
    with tempfile.TemporaryDirectory(prefix="gpu-check-cache-") as cache:
        env = {**os.environ, "XDG_CACHE_HOME": cache, "LOCALAPPDATA": cache}
        for name, code in checks:
            started = time.monotonic()
            script = (_PRELUDE % (_EXIT_SKIP, allow_missing, _EXIT_SKIP)) + f"\n_run({code!r})\n"
            run = subprocess.run(
                [python, "-c", script], capture_output=True, text=True, check=False, env=env, timeout=600
            )
            output = run.stdout.strip()
            if run.returncode == 0:
                status, detail = "pass", output
            elif run.returncode == _EXIT_SKIP:
                status, detail = "skip", output.splitlines()[-1].removeprefix("skip: ") if output else ""
            else:
                status, detail = "fail", (output + "\n" + run.stderr.strip()).strip()[-1500:]
            results.append(
                {"check": name, "status": status, "detail": detail, "seconds": round(time.monotonic() - started, 2)}
            )
            print(
                f"{status.upper():<4}  {name}" + "".join(f"\n      {line}" for line in detail.splitlines()), flush=True
            )
    return results


def diagnostic(package: str, python: str) -> dict[str, object]:
    """`python -m pkg._cuda_variant` on this machine: it fails (exit 1) when a GPU here has no code in the wheel or
    the driver is older than the wheel needs, and says so; its output is kept either way."""
    started = time.monotonic()
    run = subprocess.run(
        [python, "-m", f"{package}._cuda_variant"], capture_output=True, text=True, check=False, timeout=300
    )
    status = "pass" if run.returncode == 0 else "fail"
    detail = (run.stdout + run.stderr).strip()[-3000:]
    name = f"python -m {package}._cuda_variant"
    torch = installed_torch(python)
    if torch:
        detail += f"\ntorch installed: {torch}"
    print(f"{status.upper():<4}  {name}" + "".join(f"\n      {line}" for line in detail.splitlines()), flush=True)
    seconds = round(time.monotonic() - started, 2)
    return {"check": name, "status": status, "detail": detail, "seconds": seconds, "torch": torch}


def installed_torch(python: str) -> str | None:
    """The version of the torch `python` has installed (None: none): which torch a torch extension's checks ran
    beside."""
    code = "import importlib.metadata as m; print(m.version('torch'))"
    run = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False, timeout=60)
    return (run.stdout.strip()[:100] or None) if run.returncode == 0 else None


# METADATA and the module list are all this reads of a wheel: a larger METADATA is no wheel the factory made.
MAX_METADATA_BYTES = 16 << 20


def _zip_names(wheel: Path) -> list[str]:
    """The wheel's member names; a file that is no readable zip stops the run with one line naming it."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            return archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as exc:
        raise SystemExit(f"{wheel.name}: not a readable wheel ({str(exc)!a})") from None


def _package_of(wheel: Path) -> str:
    for member in _zip_names(wheel):
        if member.endswith("/_cuda_variant.py") and ".data/" not in member:
            return member.rsplit("/", 1)[0].replace("/", ".")
    raise SystemExit(f"{wheel.name}: not built by the wheel factory (no _cuda_variant module)")


def wheel_metadata(wheel: Path) -> email.message.Message:
    found = [n for n in _zip_names(wheel) if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if len(found) != 1:
        raise SystemExit(f"{wheel.name}: {len(found)} METADATA files at its top, where a wheel has one")
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(found[0]) as stream:
            data = stream.read(MAX_METADATA_BYTES + 1)
        if len(data) > MAX_METADATA_BYTES:
            raise SystemExit(f"{wheel.name}: its METADATA is larger than {MAX_METADATA_BYTES >> 20} MiB")
        return email.parser.Parser().parsestr(data.decode("utf-8"))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise SystemExit(f"{wheel.name}: its METADATA cannot be read ({str(exc)!a})") from None


def wheel_extras(wheel: Path) -> list[str]:
    """The extras a wheel declares (Provides-Extra in its METADATA)."""
    return sorted(wheel_metadata(wheel).get_all("Provides-Extra") or [])


def with_extras(requirement: str, extras: list[str]) -> str:
    return f"{requirement}[{','.join(extras)}]" if extras else requirement


def check_wheel(wheel: Path, allow_missing: bool, pip_args: list[str]) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        venv = Path(scratch) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python"))
        # With its dependencies, a wheel comes with every extra it declares: the optional checks need them.
        target = str(wheel) if "--no-deps" in pip_args else with_extras(str(wheel), wheel_extras(wheel))
        installed = subprocess.run(
            [python, "-m", "pip", "install", "--quiet", *pip_args, target], capture_output=True, text=True, check=False
        )
        if installed.returncode != 0:
            raise SystemExit(f"installing {wheel.name} failed: {installed.stderr.strip()[-800:]}")
        return run_checks(_package_of(wheel), allow_missing, python)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--package", help="an installed package built by the factory (import name)")
    target.add_argument("--wheel", nargs="+", type=Path, help="wheels, each checked in a fresh venv")
    parser.add_argument("--pip-arg", action="append", default=[], help="passed to pip install (repeatable)")
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        help="skip, rather than fail, a check whose CUDA library is not installed here",
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)

    why_not = gpu_present()
    if why_not:
        print(why_not)
        return EXIT_NO_GPU
    report: dict[str, list[dict[str, object]]] = {}
    if args.package:
        report[args.package] = run_checks(args.package, args.allow_missing)
    else:
        for wheel in args.wheel:
            print(f"== {wheel.name}", flush=True)
            report[wheel.name] = check_wheel(wheel, args.allow_missing, args.pip_arg)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    statuses = [r["status"] for results in report.values() for r in results]
    print(f"{statuses.count('pass')} passed, {statuses.count('fail')} failed, {statuses.count('skip')} skipped")
    return EXIT_FAILED if "fail" in statuses else 0


if __name__ == "__main__":
    sys.exit(main())
