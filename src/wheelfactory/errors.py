"""Problems in a user's input, reported as `file:line:col: message` and exit status 2."""

from __future__ import annotations

from dataclasses import dataclass

EXIT_INPUT = 2
EXIT_TOOL = 3


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
