"""The release gate over all wheels of a run: exactly the wheels the plan promised, valid metadata, sizes.

The build jobs run apart; this checks their union before anything is published: nothing missing, nothing extra,
`twine check --strict`, and each wheel under its recipe's size limit (PyPI's default is 100 MiB per file, and
each `pkg-cudaNNx` is a separate PyPI project with its own limit).
"""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.utils import canonicalize_name

from . import host
from .binaries.wheelfile import WheelName
from .plan import cpython_tag

MIB = 1024 * 1024


def wheel_key(wheel: Path) -> tuple[str, str, str, str]:
    name = WheelName.of(wheel)
    return str(name.distribution), str(name.version), cpython_tag(name.python), name.platform


def verify(jobs: list[dict[str, object]], wheels: list[Path]) -> list[str]:
    problems: list[str] = []
    expected: dict[tuple[str, str, str, str], dict[str, object]] = {}
    for job in jobs:
        key = (
            str(canonicalize_name(str(job["dist_name"]))),
            str(job["version"]),
            cpython_tag(str(job["python"])),
            str(job["platform"]),
        )
        expected[key] = job
    found: dict[tuple[str, str, str, str], Path] = {}
    for wheel in wheels:
        key = wheel_key(wheel)
        if key in found:
            problems.append(f"{wheel.name}: a second wheel for the same job as {found[key].name}")
        found[key] = wheel
    for key in sorted(expected.keys() - found.keys()):
        problems.append(f"missing: no wheel from job {expected[key]['id']}")
    for key in sorted(found.keys() - expected.keys()):
        problems.append(f"extra: {found[key].name} is not in the plan")
    for key, wheel in sorted(found.items()):
        if key in expected:
            limit = int(str(expected[key]["size_limit_mb"]))
            size = wheel.stat().st_size
            if size > limit * MIB:
                problems.append(f"{wheel.name}: {size / MIB:.1f} MiB, over its {limit} MiB limit")
    if wheels:
        twine = host.run(
            [sys.executable, "-m", "twine", "--no-color", "check", "--strict", *wheels], "twine", check=False
        )
        if twine.returncode != 0:
            problems.append("twine check --strict failed:\n" + (twine.stdout + twine.stderr).strip())
    return problems
