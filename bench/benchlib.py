"""What the benchmarks share: the engine from this checkout, their arguments, and printing their figures."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", default="manylinux-offline:latest")
    parser.add_argument("--matrix", default="matrix-offline.yaml", help="relative to the project")
    return parser.parse_args()


def show(figures: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in figures)
    for key, value in figures:
        print(f"{key:<{width}}  {value}")
