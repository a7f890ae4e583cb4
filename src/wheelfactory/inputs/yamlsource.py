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

    def position(self, loc: Loc, *, key: bool = False) -> tuple[int, int]:
        """The position of `loc`, or of its nearest ancestor that has one."""
        for end in range(len(loc), -1, -1):
            prefix = loc[:end]
            if key and end == len(loc) and prefix in self.keys:
                return self.keys[prefix]
            if prefix in self.values:
                return self.values[prefix]
        return (1, 1)

    def problem(self, loc: Loc, message: str, *, key: bool = False) -> Problem:
        line, col = self.position(loc, key=key)
        where = format_loc(loc)
        return Problem(str(self.file), line, col, f"{where}: {message}" if where else message)


def format_loc(loc: Loc) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def load(path: Path, display: str | None = None) -> tuple[Any, SourceMap]:
    """Parse `path`, returning its data and a SourceMap. Raises InputError for syntax errors and duplicates."""
    shown = Path(display) if display else path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError([Problem(str(shown), 1, 1, "file not found — create it or pass the right path")]) from None
    except UnicodeDecodeError as exc:
        raise InputError([Problem(str(shown), 1, exc.start + 1, "not UTF-8 text — save the file as UTF-8")]) from None
    source = SourceMap(shown)
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = exc.problem or exc.context or "invalid YAML"
        raise InputError([Problem(str(shown), line, col, f"YAML syntax error: {what} — fix the YAML syntax")]) from None
    if root is None:
        return None, source
    problems: list[Problem] = []
    data = _build(root, (), source, problems, loader)
    loader.dispose()
    if problems:
        raise InputError(problems)
    return data, source


def _build(node: yaml.Node, loc: Loc, source: SourceMap, problems: list[Problem], loader: yaml.SafeLoader) -> Any:
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
            result[key] = _build(value_node, (*loc, key), source, problems, loader)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*loc, i), source, problems, loader) for i, item in enumerate(node.value)]
    assert isinstance(node, yaml.ScalarNode)
    if node.tag in (_FLOAT_TAG, _INT_TAG):
        source.numbers[loc] = node.value
    return loader.construct_object(node, deep=True)
