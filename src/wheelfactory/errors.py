"""Problems in a user's input, reported as `file:line:col: message` and exit status 2."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

EXIT_INPUT = 2
EXIT_TOOL = 3
# Where a problem of the command line's options is said to be, as a file's are at file:line:col.
COMMAND_LINE = "command line"


@dataclass(frozen=True, order=True)
class Problem:
    file: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.message}"


class InputError(Exception):
    """One or more problems in a user's input; nothing has been written."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class UserError(Exception):
    """A failure the user can act on that is not tied to a place in an input file."""


class ToolFailure(UserError):
    """A tool, a download or a build step failed (exit status 3); the message says which and where its log is."""


class NetworkFailure(ToolFailure):
    """The network failed a transfer (a dropped connection, a timeout, a server's 5xx): worth another try, unlike
    an answer such as 404 or bytes that are wrong."""


class BadBytes(Exception):
    """Bytes the factory did not write (a wheel, an archive, an ELF, PE or fatbin, an index page, a cache entry)
    are malformed, hostile, or past one of the bounds every reader keeps. The one error the readers raise: whoever
    asked for the bytes decides what it means — a wheel the user gave is bad input or a gate's rejection, fetched
    content a download failure (`fetched`)."""


@contextmanager
def fetched() -> Iterator[None]:
    """Within the block, bytes that came from the network or the cache are refused as a download failure (exit 3)."""
    try:
        yield
    except BadBytes as exc:
        raise ToolFailure(str(exc)) from None
