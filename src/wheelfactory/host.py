"""What the factory needs to know of the machine it runs on: its platform, and where its cache lives."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def cache_dir() -> Path:
    """The reusable cache of toolkits, wheels and sources (WHEELFACTORY_CACHE moves it)."""
    return Path(os.environ.get("WHEELFACTORY_CACHE", Path.home() / ".cache" / "wheelfactory")).resolve()


def compiler_cache_dir() -> Path:
    """The compiler cache's objects (WHEELFACTORY_COMPILER_CACHE_DIR moves them, e.g. to a CI cache)."""
    chosen = os.environ.get("WHEELFACTORY_COMPILER_CACHE_DIR")
    return Path(chosen).resolve() if chosen else cache_dir() / "compiler-cache"


def machine() -> str:
    """This machine's architecture as Linux spells it: x86_64 or aarch64."""
    name = platform.machine().lower()
    return _MACHINES.get(name, name)


def platform_name() -> str:
    """This host as a matrix platform: linux-x86_64, linux-aarch64 or windows-amd64."""
    if sys.platform == "win32":
        return "windows-amd64"
    return f"linux-{machine()}"
