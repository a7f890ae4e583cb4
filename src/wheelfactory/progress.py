"""Progress for long steps: a spinner while a step runs, then one line with its duration, drawn ✗ when it
failed (it raised, or its caller found it failed) and ✓ only when it did not."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console

console = Console(stderr=True, highlight=False, soft_wrap=True)


@dataclass
class Outcome:
    """What the caller found of a step that returned: a wheel that failed its smoke tiers, say."""

    failed: bool = False


@contextmanager
def step(what: str) -> Iterator[Outcome]:
    started = time.monotonic()
    outcome = Outcome()
    try:
        with console.status(what):
            yield outcome
    except BaseException:
        outcome.failed = True
        raise
    finally:
        mark = "[red]✗[/red]" if outcome.failed else "[green]✓[/green]"
        console.print(f"{mark} {what} ({time.monotonic() - started:.0f}s)")
