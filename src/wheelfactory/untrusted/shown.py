"""Strings taken from bytes the factory did not write, escaped for where they go: one helper per destination.

- a message or log line: `shown` (a value) and `one_line` (a message of ours with such values in it). A
  DT_NEEDED entry, a zip member's name or an index page's link may hold a newline, a control character or text
  that a CI log reads as a command (GitHub Actions takes a line starting with `::` as a workflow command, leading
  blanks ignored). Shown through `shown`, such a string is one quoted, escaped line; an ordinary one is left as it
  is, so messages stay readable.
- a YAML value (a drafted recipe's): `yaml_scalar`, PyYAML's emitter, which quotes what YAML would read as syntax.
- a YAML comment (a drafted or completed recipe's): `yaml_comment`, one line whatever the text holds.
- HTML (the torch index pages): the standard library's `html.escape`, quotes included.

The JSON report keeps the exact value (json escapes it)."""

from __future__ import annotations

import yaml

# How long a shown string may be: a name a thousand times longer says no more.
MAX_SHOWN = 200


def _plain(text: str) -> bool:
    return text.isprintable() and "::" not in text and "'" not in text and "\\" not in text and text.strip() == text


def shown(value: object, *, quoted: bool = False) -> str:
    """`value` as one safe line: unchanged (or in quotes, with `quoted`) when it is plain printable ASCII, else
    quoted with every control character, backslash and non-ASCII character escaped (`ascii`); cut to MAX_SHOWN
    characters."""
    text = value if isinstance(value, str) else str(value)
    cut = "…" if len(text) > MAX_SHOWN else ""
    text = text[:MAX_SHOWN]
    if text and _plain(text) and text.isascii():
        return (f"'{text}'" if quoted else text) + cut
    return ascii(text) + cut


def one_line(message: str) -> str:
    """A message (ours, with untrusted parts) made one line for a log: line breaks and control characters
    escaped, so that no part of it can start a line of its own."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in message)


def yaml_comment(text: object) -> str:
    """Text for a YAML comment, which runs to the end of its line: one line, with every line break escaped —
    YAML also breaks lines at U+0085, U+2028 and U+2029, none of them printable — so that nothing in it can start
    a line of keys after the comment."""
    return one_line(str(text))


class _OneLineDumper(yaml.SafeDumper):
    """PyYAML's safe emitter, writing a string that holds a line break or a control character double-quoted and
    escaped (its own choice, a quoted scalar folded over lines, would be safe but no longer one line)."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = None if value.isprintable() else '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_OneLineDumper.add_representer(str, _string)


def yaml_scalar(value: object) -> str:
    """`value` (a string, number, list or mapping of them) as YAML flow text on one line: quoted where YAML would
    read syntax in it (`: `, ` #`, `&`, `!!`, a leading `-` or `[`), control and non-ASCII characters escaped."""
    dumped = yaml.dump(
        value, Dumper=_OneLineDumper, default_flow_style=True, width=10**6, allow_unicode=False, sort_keys=False
    )
    return dumped.removesuffix("\n").removesuffix("\n...").strip()
