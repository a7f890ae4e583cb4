"""Where a smoke container writes what it installs: its /smoke folder in memory (tmpfs) where that fits a share of
the memory the host has free, else the container's own layer.

Measured with LightGBM 4.7.0 on Python 3.10 and 3.13 (`bench/bench_real.py`, three pairs of runs taken in turn,
2026-11-28): in the container's layer (overlayfs on ext4) the smoke took 19.0–24.5 s and 29–39 CPU-seconds in its
container; in memory 13.7–16.3 s and 22–25. pip's installs into the layer spent most of their time in the kernel
(NumPy, SciPy and narwhals into a venv and a --target folder: 3.0–4.9 s, 0.9–2.9 s of it system time; in memory
2.5 s, 0.5). A volume of the engine's (ext4, no overlay) was no faster than the layer.
"""

from __future__ import annotations

from pathlib import Path

from ..untrusted import archives

SMOKE_ROOT = "/smoke"
# Temporary folders (pip's) go on the same file system as what they are moved to: pip moves a --target install
# into place, which across file systems is a copy.
SMOKE_TEMP = f"{SMOKE_ROOT}/tmp"

# At most this share of the memory free now is taken by what the smoke is estimated to write, and the folder may
# grow to twice that before it is full.
MEMORY_SHARE = 4


def estimated_bytes(wheel: Path, requirements: list[Path | None]) -> int:
    """What a smoke writes under /smoke at most, for one folder of requirements' wheels per Python: pip unpacks
    each requirement into a venv and a --target folder (the other venvs and the two-variants folder are hard links),
    the wheel into both and, with its stand-in (the same files under another name), into the two-variants folder;
    a compiled module is at most its source again."""
    wheel_bytes = archives.zip_unpacked_bytes(wheel)
    total = 0
    for folder in requirements:
        required = sum(archives.zip_unpacked_bytes(w) for w in sorted(folder.glob("*.whl"))) if folder else 0
        total += 2 * (2 * required + 4 * wheel_bytes)
    return total


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The memory this host has free for new work (MemAvailable), in bytes; None where it does not say."""
    try:
        lines = meminfo.read_text(encoding="ascii", errors="replace").splitlines()[:64]
    except OSError:
        return None
    for line in lines:
        name, _, value = line.partition(":")
        words = value.split()
        if name == "MemAvailable" and len(words) == 2 and words[0].isdigit() and words[1] == "kB":
            return int(words[0]) * 1024
    return None


def mount_options(estimate: int, available: int | None) -> list[str]:
    """The engine's options for /smoke: in memory where the estimate is within MEMORY_SHARE of the memory free,
    bounded at twice that share; else none (the container's layer)."""
    if available is None or estimate > available // MEMORY_SHARE:
        return []
    return ["--tmpfs", f"{SMOKE_ROOT}:exec,size={2 * (available // MEMORY_SHARE)}"]
