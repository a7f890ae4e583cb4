"""Strings taken from bytes the factory did not write, shown in messages and logs.

A DT_NEEDED entry, a zip member's name or an index page's link may hold a newline, a control character or text
that a CI log reads as a command (GitHub Actions takes a line starting with `::` as a workflow command, leading
blanks ignored). Shown through `shown`, such a string is one quoted, escaped line; an ordinary one is left as it
is, so messages stay readable. The JSON report keeps the exact value (json escapes it)."""

from __future__ import annotations

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
