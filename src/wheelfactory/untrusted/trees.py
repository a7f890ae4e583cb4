"""Folders the factory did not write — a source it drafts from (an sdist, a git checkout, a folder), a report, the
folder of the wheels its index pages list — read and written through one layer, as archives are:

- a file is read only when it is a regular file inside the tree, reached through no link, and only up to a cap
  whatever its size claims (a link to /dev/zero, a FIFO, a folder are refused, not read);
- what is parsed from it is bounded in depth: TOML (nested arrays and tables, dotted keys), Python (its syntax
  tree), JSON;
- a walk never follows a link, and looks at a bounded number of entries;
- a folder is written into only when no part of it below its root is a link, and a file is never written through
  one.

Every refusal is BadBytes naming the file; whoever asked decides what it means (a note in a draft, a bad input)."""

from __future__ import annotations

import ast
import bisect
import json
import os
import re
import stat
import tomllib
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import BadBytes
from .shown import one_line, shown

# A build file of a source: no real one comes near.
MAX_FILE_BYTES = 2 << 20
# How deep a parsed file may nest: a real pyproject's dotted keys or a setup.py's expressions stay under ten.
MAX_DEPTH = 100
# Entries looked at in one walk of a tree.
MAX_ENTRIES = 20_000


def _named(relative: str | PurePosixPath) -> str:
    return shown(PurePosixPath(relative).as_posix())


def inside(tree: Path, relative: str | PurePosixPath) -> Path:
    """tree/relative, once it was found to stay inside the tree and no part of it below the tree to be a link."""
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts or "\0" in str(pure) or "\\" in str(pure):
        raise BadBytes(f"{_named(relative)}: leads outside the folder")
    path = tree
    for part in pure.parts:
        path = path / part
        if path.is_symlink():
            raise BadBytes(f"{_named(relative)}: a link (to {shown(os.readlink(path), quoted=True)}), not followed")
    return path


def _read_open(fd: int, what: str, limit: int) -> bytes:
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise BadBytes(f"{what}: not a regular file")
        data = file.read(limit + 1)  # whatever its size claims (a device's is 0)
    if len(data) > limit:
        raise BadBytes(f"{what}: over {limit >> 20} MiB, more than a real one holds")
    return data


def read_inside(tree: Path, relative: str | PurePosixPath, limit: int = MAX_FILE_BYTES) -> bytes | None:
    """A file of the tree, whole, or None where the tree has none: BadBytes for one reached through a link, one
    that is no regular file, or one over `limit` bytes."""
    path = inside(tree, relative)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise BadBytes(f"{_named(relative)}: cannot be read ({shown(exc.strerror)})") from None
    return _read_open(fd, _named(relative), limit)


def read_file(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """A file the user named (a report), whole: BadBytes unless it is a regular file of at most `limit` bytes (a
    link the user made may lead to it; never to a device or a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise BadBytes(f"{shown(str(path))}: cannot be read ({shown(exc.strerror)})") from None
    return _read_open(fd, shown(str(path)), limit)


# ---------------------------------------------------------------------------------------------- parsing


def _utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BadBytes(f"{what}: byte 0x{data[exc.start]:02x} on line {line} is not UTF-8 text") from None


# TOML's strings and comments, whose dots and brackets are text: taken out before dotted keys are counted. A string
# left open runs to its line's end (to the text's, for a multi-line one): each character is looked at once, where
# a retry at every quote inside it would take the square of the line (tomllib stops at such a string anyway).
_TOML_TEXT = re.compile(
    r'"""[\s\S]*?(?:"""|\Z)|\'\'\'[\s\S]*?(?:\'\'\'|\Z)|"(?:[^"\\\n]|\\.)*+(?:"|\\|$)|\'[^\'\n]*+(?:\'|$)|#[^\n]*',
    re.MULTILINE,
)
_TOML_KEY_END = re.compile(r"[=,\n\[\]{}]")


def parse_toml(data: bytes, what: str) -> dict[str, Any]:
    """A TOML document: BadBytes naming `what` for one that is not UTF-8 or not TOML, or nests deeper than
    MAX_DEPTH — a dotted key of more parts (tomllib's time grows with the square of them) or arrays and tables
    deeper than Python's recursion."""
    text = _utf8(data, what)
    parts = max((key.count(".") + 1 for key in _TOML_KEY_END.split(_TOML_TEXT.sub("", text))), default=0)
    if parts > MAX_DEPTH:
        raise BadBytes(f"{what}: a dotted key of {parts} parts, over the {MAX_DEPTH} read")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadBytes(f"{what}: not TOML ({one_line(str(exc))})") from None
    except RecursionError:
        raise BadBytes(f"{what}: nested deeper than it can be read") from None


def _depth(module: ast.AST) -> int:
    deepest, stack = 0, [(module, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            break
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def parse_python(data: bytes | str, what: str) -> ast.Module:
    """A Python module's syntax tree, never run: BadBytes naming `what` for one that does not parse, or whose tree
    nests deeper than MAX_DEPTH (which what reads the tree, ast's own helpers, could not walk)."""
    try:
        with warnings.catch_warnings():  # its invalid escapes are the source's, not a warning of ours
            warnings.simplefilter("ignore")
            module = ast.parse(data)
    except SyntaxError as exc:
        raise BadBytes(f"{what}:{exc.lineno or 1}: does not parse as Python ({one_line(exc.msg)})") from None
    except (ValueError, MemoryError, RecursionError):
        raise BadBytes(f"{what}: does not parse as Python (nested too deep, or a NUL byte)") from None
    if _depth(module) > MAX_DEPTH:
        raise BadBytes(f"{what}: nested deeper than the {MAX_DEPTH} levels read")
    return module


def parse_json(data: bytes, what: str) -> object:
    """A JSON document: BadBytes naming `what` for one that is not JSON or nests deeper than Python's recursion."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise BadBytes(f"{what}: not JSON, or nested deeper than it can be read") from None


class Lines:
    """The line numbers of a text's offsets, its line starts found once: a scan's every match is placed in
    logarithmic time (counting newlines from the start for each would make a scan quadratic)."""

    def __init__(self, text: str) -> None:
        self.starts = [0, *(m.end() for m in re.finditer("\n", text))]

    def of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)


# ---------------------------------------------------------------------------------------------- walking, writing


def walk(tree: Path, skipped: Callable[[Path], bool] = lambda _: False, limit: int = MAX_ENTRIES) -> Iterator[Path]:
    """Every entry under `tree`, shallowest first and in name order, at most `limit` looked at: a link is given,
    never followed; a folder `skipped` is given and not entered."""
    seen, level = 0, [tree]
    while level and seen < limit:
        following: list[Path] = []
        for folder in level:
            try:
                entries = sorted(folder.iterdir())
            except OSError:
                continue
            for entry in entries[: limit - seen]:
                seen += 1
                yield entry
                if entry.is_dir() and not entry.is_symlink() and not skipped(entry):
                    following.append(entry)
        level = following


def folder_inside(root: Path, *parts: str) -> Path:
    """root/parts…, made where missing: BadBytes where a part is no plain name (a separator, `..`) or an existing
    part is a link or no folder — what is written there then stays under root."""
    path = root
    for part in parts:
        if part in ("", ".", "..") or "/" in part or "\\" in part or "\0" in part:
            raise BadBytes(f"{shown(part, quoted=True)}: not a plain folder name — nothing written")
        path = path / part
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            what = "a link" if path.is_symlink() else "no folder"
            raise BadBytes(f"{shown(path.relative_to(root).as_posix())}: {what} — nothing is written through it")
        path.mkdir(exist_ok=True)
    return path


def write_new(path: Path, content: bytes | str) -> Path:
    """Write `path` afresh: what was there (a file, a planted link) is removed, never written through."""
    path.unlink(missing_ok=True)
    with path.open("xb") as file:  # O_EXCL: fails rather than follow a link put there since
        file.write(content.encode("utf-8") if isinstance(content, str) else content)
    return path
