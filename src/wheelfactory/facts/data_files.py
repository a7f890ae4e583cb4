"""The data files a new fact changes — toolkits.yaml, gpu_archs.yaml, cuda_components.yaml, cpython.yaml and the
matrix — rewritten with their comments and layout kept (ruamel.yaml's round trip), each addition under a comment
naming where it was read."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

DATA = Path("src/wheelfactory/data")
MATRICES = (Path("matrix.yaml"), Path("matrix-offline.yaml"))


def _yaml() -> YAML:
    yaml = YAML()
    yaml.width, yaml.preserve_quotes = 4096, True
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def quoted(value: Any) -> Any:
    """Strings in double quotes, as the data files write versions ("3.10" must not read as 3.1)."""
    return DoubleQuotedScalarString(value) if isinstance(value, str) else value


def flow(items: list[Any] | dict[str, Any]) -> CommentedSeq | CommentedMap:
    """A list or mapping written on one line, as the data files write them."""
    made: CommentedSeq | CommentedMap = CommentedSeq(items) if isinstance(items, list) else CommentedMap(items)
    made.fa.set_flow_style()
    return made


def _last(mapping: CommentedMap) -> tuple[CommentedMap, Any]:
    """The innermost last key of a block mapping, which holds the comment that follows the mapping."""
    key = list(mapping)[-1]
    value = mapping[key]
    return _last(value) if isinstance(value, CommentedMap) and not value.fa.flow_style() else (mapping, key)


@dataclass
class DataFiles:
    """The files as read, and as the facts change them; `diff` compares the two."""

    root: Path
    loaded: dict[Path, Any] = field(default_factory=dict)
    before: dict[Path, str] = field(default_factory=dict)
    notes: dict[tuple[Path, str], list[str]] = field(default_factory=dict)  # (file, a line) -> comments above it

    def __getitem__(self, relative: Path) -> Any:
        if relative not in self.loaded:
            text = (self.root / relative).read_text(encoding="utf-8")
            self.before[relative], self.loaded[relative] = text, _yaml().load(text)
        return self.loaded[relative]

    def after(self) -> dict[Path, str]:
        """The text of each file read, as it now stands."""
        texts = {}
        for relative, data in self.loaded.items():
            out = io.StringIO()
            _yaml().dump(data, out)
            lines = out.getvalue().splitlines(keepends=True)
            for (path, line), comment in self.notes.items():
                if path == relative and line in lines:
                    at = lines.index(line)
                    indent = line[: len(line) - len(line.lstrip())]
                    lines[at:at] = [f"{indent}# {text}\n" for text in comment]
            texts[relative] = "".join(lines)
        return texts

    def changed(self) -> dict[Path, str]:
        return {path: text for path, text in self.after().items() if text != self.before[path]}


def add_under(mapping: CommentedMap, key: str, value: Any) -> None:
    """`key: value` added at the end of `mapping`; what followed the mapping (the next section's comment) still
    follows it."""
    holder, last = _last(mapping) if mapping else (mapping, None)
    trailing = holder.ca.items.pop(last, None) if last is not None else None
    mapping[quoted(key)] = value
    if trailing is not None:
        new_holder, new_last = _last(mapping)
        new_holder.ca.items[new_last] = trailing


def insert_newest_first(entries: CommentedSeq, value: Any, newer_than: Any) -> None:
    """`value` placed in a newest-first list before the first entry it is newer than (`newer_than(entry)`)."""
    position = next((i for i, entry in enumerate(entries) if newer_than(entry)), len(entries))
    entries.insert(position, value)
