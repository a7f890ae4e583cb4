"""What the factory needs to know of the machine it runs on — its platform, its cache, its container engine —
and the one way it runs other programs and reports their failure."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from filelock import FileLock

from .errors import NetworkFailure, ToolFailure
from .progress import console
from .untrusted.trees import write_new

MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
TAIL_LINES = 20
# The pauses before each new try of a transfer the network failed: a dropped link or a stalled mirror mostly
# recovers within a minute, and a build of many minutes should not end for it.
NETWORK_PAUSES_S = (5.0, 20.0, 60.0)

_T = TypeVar("_T")


def cache_dir() -> Path:
    """The reusable cache of toolkits, wheels and sources (WHEELFACTORY_CACHE moves it)."""
    return Path(os.environ.get("WHEELFACTORY_CACHE", Path.home() / ".cache" / "wheelfactory")).resolve()


def cache_lock(name: str) -> FileLock:
    """A lock over one entry of the cache (a toolkit, a source, the wheel downloads): builds that share the cache
    (two majors at once, two checkouts) take turns at it. The lock is the operating system's, so a killed build
    holds it no longer."""
    folder = cache_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(folder / f"{name}.lock")


def place(source: Path, target: Path, mode: int | None = None) -> None:
    """Copy `source` to `target` as one step: a copy beside the target, renamed over it, so that a killed run
    leaves the old file or the new one, never half of one."""
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)  # a link left there is removed, not copied through
    shutil.copyfile(source, partial)
    if mode is not None:
        partial.chmod(mode)
    os.replace(partial, target)


def write_atomically(target: Path, content: bytes | str) -> None:
    """Write `target` as one step, as `place` copies."""
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(write_new(target.with_name(f".{target.name}.partial"), content), target)


@contextmanager
def built_aside(target: Path) -> Iterator[Path]:
    """A scratch folder beside `target` to build it in, which becomes `target` (replacing what was there) only
    when the block ends without an error: a reader sees the old folder or the complete new one. What a killed
    run left beside it is cleared first; callers that share `target` hold its cache lock."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for leftover in target.parent.glob(f".{target.name}-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        scratch.chmod(0o755)  # mkdtemp makes it 0700: what is built here is for everyone to read
        yield scratch
        retired = target.with_name(f".{target.name}-retired")
        if target.exists():
            target.rename(retired)
        scratch.rename(target)
        shutil.rmtree(retired, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def remove_partials(folder: Path) -> None:
    """What a killed `place` left behind."""
    for leftover in folder.glob(".*.partial"):
        leftover.unlink(missing_ok=True)


def compiler_cache_dir() -> Path:
    """The compiler cache's objects (WHEELFACTORY_COMPILER_CACHE_DIR moves them, e.g. to a CI cache)."""
    chosen = os.environ.get("WHEELFACTORY_COMPILER_CACHE_DIR")
    return Path(chosen).resolve() if chosen else cache_dir() / "compiler-cache"


def machine() -> str:
    """This machine's architecture as Linux spells it: x86_64 or aarch64."""
    name = platform.machine().lower()
    return MACHINES.get(name, name)


def platform_name() -> str:
    """This host as a matrix platform: linux-x86_64, linux-aarch64 or windows-amd64."""
    if sys.platform == "win32":
        return "windows-amd64"
    return f"linux-{machine()}"


BINFMT = Path("/proc/sys/fs/binfmt_misc")
EMULATION_PACKAGES = "apt-get install qemu-user-static binfmt-support"


def ensure_emulation(arch: str) -> None:
    """Make sure this host runs `arch` programs through QEMU, in chroots and containers too: binfmt_misc
    mounted, qemu-ARCH registered with the F flag (the interpreter is opened once, at registration, so it need
    not exist inside the container). Registers it where that is missing and this process may (root)."""
    if arch == machine():
        return
    entry = BINFMT / f"qemu-{arch}"
    if not entry.is_file() and os.geteuid() == 0:
        if not (BINFMT / "register").exists():
            run(["mount", "-t", "binfmt_misc", "binfmt_misc", BINFMT], "mounting binfmt_misc", check=False)
        if shutil.which("update-binfmts"):
            run(["update-binfmts", "--enable", f"qemu-{arch}"], f"registering qemu-{arch}", check=False)
    if not entry.is_file():
        fix = f"as root: {EMULATION_PACKAGES}, then update-binfmts --enable qemu-{arch}"
        raise ToolFailure(f"this {machine()} host cannot run {arch} programs (no binfmt_misc entry {entry}) — {fix}")
    text = entry.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("enabled"):
        raise ToolFailure(f"{entry} is registered but disabled — as root: update-binfmts --enable qemu-{arch}")
    flags = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("flags:")), "")
    if "F" not in flags:
        raise ToolFailure(
            f"{entry} lacks the F flag, so containers cannot reach its interpreter — register the one of "
            f"qemu-user-static ({EMULATION_PACKAGES})"
        )


def emulation_environment(arch: str) -> dict[str, str] | None:
    """The environment that runs a dynamically linked Linux `arch` program here under QEMU: its loader and libc
    from the cross toolchain's root (Debian's gcc-ARCH-linux-gnu brings /usr/ARCH-linux-gnu). None where this
    host cannot."""
    root = Path(f"/usr/{arch}-linux-gnu")
    if not (BINFMT / f"qemu-{arch}").is_file() or not (root / "lib").is_dir():
        return None
    return {**os.environ, "QEMU_LD_PREFIX": str(root)}


def container_engine() -> str:
    for engine in ("docker", "podman"):
        if shutil.which(engine):
            return engine
    raise ToolFailure("neither docker nor podman is installed — install one (Debian: apt-get install docker.io)")


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last lines of a program's output: where its reason for failing is."""
    return "\n".join(text.strip().splitlines()[-lines:])


def run(
    command: Sequence[str | Path],
    what: str,
    *,
    check: bool = True,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    network_failure: re.Pattern[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a program, capturing its output as text. With `check`, a failure raises ToolFailure saying what was
    being done, the exit status and the end of the output — NetworkFailure where that output matches
    `network_failure` (how the program says the network failed it); without, the caller reads the result."""
    argv = [str(part) for part in command]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, check=False, cwd=cwd, env=env, timeout=timeout, errors="replace"
        )
    except FileNotFoundError:
        raise ToolFailure(f"{what}: {argv[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise ToolFailure(f"{what}: no answer from {Path(argv[0]).name} in {timeout:.0f} s") from None
    if check and done.returncode != 0:
        output = done.stdout + done.stderr
        failure = NetworkFailure if network_failure and network_failure.search(output) else ToolFailure
        raise failure(f"{what} failed (exit {done.returncode}):\n{tail(output)}")
    return done


def over_network(call: Callable[[], _T], what: str) -> _T:
    """call(), tried again after each of NETWORK_PAUSES_S while it raises NetworkFailure; the last failure is
    raised. Any other failure is raised at once."""
    for pause in (*NETWORK_PAUSES_S, None):
        try:
            return call()
        except NetworkFailure as exc:
            if pause is None:
                raise
            console.print(f"! {what}: {tail(str(exc), 1)} — again in {pause:.0f} s", markup=False)
            time.sleep(pause)
    raise AssertionError("unreachable: the last pause is None")


def side_by_side(calls: Iterable[Callable[[], object]], workers: int) -> None:
    """Run `calls` on `workers` threads, in their order; the first failure stops those not yet begun and is raised
    once the running ones have ended (nothing is left writing behind the caller's back)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        tasks = [pool.submit(call) for call in calls]
        try:
            for task in tasks:
                task.result()
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise


def link_or_copy(source: Path, dest: Path) -> None:
    """`dest` the same file as `source` (a hard link; a copy where they are on different file systems)."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)
