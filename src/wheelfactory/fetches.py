"""What a build fetches while it configures (CMake's FetchContent, CPM), read from outside the build: the
declarations in its source's CMake files, and the downloads its log says failed. Both are text the factory reads,
never runs; what they name is shown escaped.

The recipe's extra_sources hand the build what it would fetch (toolkit/buildenv.py says how); a build that still
tries to download is stopped with a message naming what it tried (build.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from .untrusted.shown import shown

# What git, curl, CMake and pip print when a download fails; FetchContent's own words for its download step (the
# name it was declared with); and what a CMake build prints when a script it fetched with file(DOWNLOAD), which
# fails without a word, is missing (CPM.cmake's first command).
_DOWNLOAD_FAILED = re.compile(
    r"could not resolve host|unable to access|failed to (?:connect|clone|download)|name or service not known|"
    r"temporary failure in name resolution|network is unreachable|couldn't connect",
    re.IGNORECASE,
)
_URL = re.compile(r"(?:https?|git|ssh)://[^\s'\"<>)]+")
_FETCH_STEP_FAILED = re.compile(r"(?:CMake|Build) step for (\S+) failed|could not find git for clone of (\S+)-populate")
_MISSING_CPM = re.compile(r'Unknown CMake command "(CPM\w+)"')
# FetchContent_Declare(name ... GIT_REPOSITORY url | URL url) and CPMAddPackage(NAME name ... GIT_REPOSITORY url)
_DECLARED = re.compile(
    r"(?:FetchContent_Declare\(\s*|CPMAddPackage\([^)]*?\bNAME\s+)([\w.-]+)[^)]*?\b(?:GIT_REPOSITORY|URL)\s+\"?([^\s\")]+)",
    re.IGNORECASE,
)
MAX_CMAKE_FILE_BYTES = 1 << 20


def fetch_declarations(tree: Path) -> dict[str, str]:
    """What the source's CMake files declare they fetch: {name, lowercased: URL} (the source's text is read, never
    run; files past a MiB are skipped)."""
    declared: dict[str, str] = {}
    for path in sorted([*tree.rglob("CMakeLists.txt"), *tree.rglob("*.cmake")]):
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_CMAKE_FILE_BYTES:
            for name, url in _DECLARED.findall(path.read_text(encoding="utf-8", errors="replace")):
                declared.setdefault(name.lower(), url)
    return declared


def download_attempts(log: str, declared: dict[str, str] | None = None) -> list[str]:
    """What the build tried to download and could not, as its log says (and, where FetchContent names only what it
    was declared as, the URL the source's CMake files give it): each once, escaped."""
    found = [
        url.rstrip("/.") for line in log.splitlines() if _DOWNLOAD_FAILED.search(line) for url in _URL.findall(line)
    ]
    for step_name, clone_name in _FETCH_STEP_FAILED.findall(log):
        name = step_name or clone_name
        found.append((declared or {}).get(name.lower(), f"{name} (FetchContent)").rstrip("/"))
    found += [
        f"CPM.cmake (its {command} is unknown: file(DOWNLOAD) of it failed quietly)"
        for command in _MISSING_CPM.findall(log)
    ]
    return [shown(item) for item in dict.fromkeys(found)]
