"""Measure laying out a wheel's smoke runtime sites, cold: NVIDIA's wheels at the floors and at the newest, each set
unpacked whole into a site of its own (as the smoke did before), against each wheel unpacked once and hard-linked
into every site that holds it (smoke/nvidia.py: runtime_site). Each run starts from an empty cache folder (the
NVIDIA wheels themselves come from the real cache, resolved as the smoke resolves them); both ways seal what they
wrote, as the cache does.

All the sets of all the wheels given are laid out into one cache, as the smokes of one build (of several wheels)
lay them out.

Usage: python bench/bench_runtime_sites.py WHEEL... [--runs 3]   (wheels the factory built: their Requires-Dist)
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from benchlib import show

from wheelfactory.binaries.wheelfile import WheelMetadata, unpack
from wheelfactory.smoke.nvidia import nvidia_wheels, runtime_site
from wheelfactory.untrusted.cache import seal


def _each_set_whole(sets: list[tuple[Path, ...]], cache: Path) -> None:
    for number, wheels in enumerate(sets):
        site = cache / "whole" / str(number)
        site.mkdir(parents=True)
        for wheel in wheels:
            unpack(wheel, site)
        seal(site)


def _each_wheel_once(sets: list[tuple[Path, ...]], cache: Path) -> None:
    os.environ["WHEELFACTORY_CACHE"] = str(cache)
    try:
        for wheels in sets:
            runtime_site(SimpleNamespace(site=cache / "toolkit" / "site"), wheels)  # type: ignore[arg-type]
    finally:
        del os.environ["WHEELFACTORY_CACHE"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sets = []
    for wheel in args.wheels:
        read = WheelMetadata.read(wheel)
        sets += [nvidia_wheels(read, "floors"), nvidia_wheels(read, "newest")]
    distinct = {w for wheels in sets for w in wheels}
    held = sum(len(wheels) for wheels in sets)
    size = sum(w.stat().st_size for w in distinct) / 1e6
    times: dict[str, list[float]] = {"each set whole": [], "each wheel once, linked": []}
    for _ in range(args.runs):
        for way, lay_out in (("each set whole", _each_set_whole), ("each wheel once, linked", _each_wheel_once)):
            with tempfile.TemporaryDirectory(prefix="bench-sites-") as scratch:
                started = time.monotonic()
                lay_out(sets, Path(scratch))
                times[way].append(time.monotonic() - started)
    names = ", ".join(w.name for w in args.wheels)
    figures = [(f"the runtime sites of {names}: {len(sets)} sets, {held} NVIDIA wheels, {len(distinct)} distinct", "")]
    figures.append(("  the distinct wheels", f"{size:.0f} MB"))
    for way, seconds in times.items():
        each = ", ".join(f"{s:.1f}" for s in seconds)
        figures.append((f"  {way}, median of {args.runs}", f"{statistics.median(seconds):.1f} s ({each})"))
    show(figures)


if __name__ == "__main__":
    main()
