"""The libraries other distributions install that CUDA extensions link (data/provided_libraries.yaml)."""

from __future__ import annotations

import fnmatch
from functools import cache
from importlib.resources import files

import yaml


@cache
def _table() -> dict[str, dict[str, object]]:
    loaded = yaml.safe_load(files("wheelfactory.data").joinpath("provided_libraries.yaml").read_text("utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def provided_libraries_of(distribution: str) -> dict[str, object]:
    """A recipe's provided_libraries entry for `distribution`: {dir, libraries}."""
    entry = _table()[distribution]
    return {"dir": entry["dir"], "libraries": list(entry["libraries"])}  # type: ignore[call-overload]


def provider_of(library: str) -> str | None:
    """The distribution that installs `library` (a soname or DLL name), None for none the table knows."""
    for distribution, entry in _table().items():
        patterns = entry["libraries"]
        assert isinstance(patterns, list)
        if any(fnmatch.fnmatchcase(library.lower(), str(p).lower()) for p in patterns):
            return distribution
    return None
