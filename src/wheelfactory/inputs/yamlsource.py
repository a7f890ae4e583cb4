"""YAML loading that remembers where every key and value came from.

PyYAML's composer keeps a mark for every node; we build plain data from the node tree ourselves so that we can
reject duplicate keys (PyYAML silently keeps the last) and report any later validation error at the exact
line and column of the offending key or value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError, Problem
from ..untrusted.shown import one_line

Loc = tuple[str | int, ...]

_FLOAT_TAG = "tag:yaml.org,2002:float"
_INT_TAG = "tag:yaml.org,2002:int"


@dataclass
class SourceMap:
    """Positions (1-based line, column) of the values and keys of one YAML file, by path."""

    file: Path
    values: dict[Loc, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Loc, tuple[int, int]] = field(default_factory=dict)
    numbers: dict[Loc, str] = field(default_factory=dict)  # source text of numeric scalars
    # Lists whose entries validation set aside (a list by where it is in the file -> each remaining entry's index
    # in the file): the checks that read the rest name each entry where it is written.
    renumbered: dict[Loc, list[int]] = field(default_factory=dict)

    def original(self, loc: Loc) -> Loc:
        """Where `loc`, a place in the data after entries were set aside, is in the file."""
        found: list[str | int] = []
        for part in loc:
            indices = self.renumbered.get(tuple(found))
            found.append(indices[part] if isinstance(part, int) and indices and 0 <= part < len(indices) else part)
        return tuple(found)

    def number(self, loc: Loc) -> str | None:
        """The source text of the number at `loc`, if a number is written there."""
        return self.numbers.get(self.original(loc))

    def position(self, loc: Loc, *, key: bool = False) -> tuple[int, int]:
        """The position of `loc`, or of its nearest ancestor that has one."""
        loc = self.original(loc)
        for end in range(len(loc), -1, -1):
            prefix = loc[:end]
            if key and end == len(loc) and prefix in self.keys:
                return self.keys[prefix]
            if prefix in self.values:
                return self.values[prefix]
        return (1, 1)

    def problem(self, loc: Loc, message: str, *, key: bool = False) -> Problem:
        line, col = self.position(loc, key=key)
        where = format_loc(self.original(loc))
        return Problem(str(self.file), line, col, f"{where}: {message}" if where else message)


def format_loc(loc: Loc) -> str:
    """Where a value is, as `cuda[0].platforms.linux-x86_64`; a key with a control character in it escaped, so
    that the message stays one line."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{one_line(part)}" if text else one_line(part)
    return text


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


# What an input file may hold. They are small by nature (a matrix, a recipe); the limits stop a hostile or
# broken file — a YAML "billion laughs" grows a few lines into billions of values — before it takes the machine.
MAX_BYTES = 1024 * 1024
MAX_ALIASES = 100
MAX_DEPTH = 50
MAX_VALUES = 100_000


class _Limit(Exception):
    def __init__(self, mark: Any, message: str) -> None:
        super().__init__(message)
        self.position: tuple[int, int] = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        self.message = message


class _LimitedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that counts aliases and nesting while it composes the node tree."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                message = f"more than {MAX_ALIASES} aliases (*{event.anchor}) — write the values out"
                raise _Limit(event.start_mark, message)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _Limit(event.start_mark, f"nested more than {MAX_DEPTH} levels deep — flatten it")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _read(path: Path, shown: Path) -> str:
    """The file's text: a regular, readable UTF-8 file of at most MAX_BYTES (else a problem at its line:col)."""

    def refuse(message: str, line: int = 1, col: int = 1) -> InputError:
        return InputError([Problem(str(shown), line, col, message)])

    if not path.exists() and not path.is_symlink():
        raise refuse("file not found — create it or pass the right path")
    if not path.is_file():
        kind = "a directory" if path.is_dir() else "a link to nothing" if path.is_symlink() else "not a regular file"
        raise refuse(f"{kind}, not a YAML file — put a regular file there")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise refuse(f"{size} bytes, over the {MAX_BYTES // 1024} KiB an input may have — is this the right file?")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise refuse(f"cannot read it: {exc.strerror} — check its permissions") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        start = data.rfind(b"\n", 0, exc.start) + 1
        col = len(data[start : exc.start].decode("utf-8", errors="replace")) + 1
        raise refuse(f"byte 0x{data[exc.start]:02x} is not UTF-8 text — save the file as UTF-8", line, col) from None


def _syntax_problem(exc: yaml.MarkedYAMLError, shown: Path) -> Problem:
    """Where a syntax error starts: for a token the scanner could not finish (an unclosed quote), where that
    token begins, not where the scanner gave up."""
    starts_earlier = isinstance(exc, yaml.scanner.ScannerError) and exc.context_mark is not None
    mark = exc.context_mark if starts_earlier else (exc.problem_mark or exc.context_mark)
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    what = exc.problem or exc.context or "invalid YAML"
    if starts_earlier and exc.context and exc.problem_mark:
        what = (
            f"{exc.context.removeprefix('while ')} that starts here: {exc.problem} (line {exc.problem_mark.line + 1})"
        )
    return Problem(str(shown), line, col, f"YAML syntax error: {what} — fix the YAML syntax")


def load(path: Path, display: str | None = None) -> tuple[Any, SourceMap, list[Problem]]:
    """Parse `path`, returning its data, a SourceMap and the problems that do not stop reading it (a duplicate
    key: its first value is kept, so that the rest of the file can still be checked). Raises InputError for
    unreadable files, syntax errors and files over the limits."""
    shown = Path(display) if display else path
    text = _read(path, shown)
    source = SourceMap(shown)
    loader = _LimitedLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, source, []
        problems: list[Problem] = []
        data = _build(root, (), source, problems, loader, [0])
    except yaml.MarkedYAMLError as exc:
        raise InputError([_syntax_problem(exc, shown)]) from None
    except _Limit as exc:
        line, col = exc.position
        raise InputError([Problem(str(shown), line, col, exc.message)]) from None
    finally:
        loader.dispose()
    return data, source, problems


def _build(
    node: yaml.Node, loc: Loc, source: SourceMap, problems: list[Problem], loader: yaml.SafeLoader, built: list[int]
) -> Any:
    built[0] += 1  # every value, aliased ones each time they are used: what the data would really hold
    if built[0] > MAX_VALUES:
        message = f"more than {MAX_VALUES} values once aliases are expanded — write the values out"
        raise _Limit(node.start_mark, message)
    source.values[loc] = _mark(node)
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        first_seen: dict[Any, tuple[int, int]] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int)):
                problems.append(source.problem(loc, f"keys must be plain strings, got {key_node.value!r}"))
                continue
            key_pos = _mark(key_node)
            if key in first_seen:
                line, _ = first_seen[key]
                problems.append(
                    Problem(
                        str(source.file),
                        *key_pos,
                        f"{format_loc((*loc, key))}: duplicate key {key!r} (first set on line {line}) — keep one",
                    )
                )
                continue
            first_seen[key] = key_pos
            source.keys[(*loc, key)] = key_pos
            result[key] = _build(value_node, (*loc, key), source, problems, loader, built)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*loc, i), source, problems, loader, built) for i, item in enumerate(node.value)]
    assert isinstance(node, yaml.ScalarNode)
    if node.tag in (_FLOAT_TAG, _INT_TAG):
        source.numbers[loc] = node.value
    return loader.construct_object(node, deep=True)
