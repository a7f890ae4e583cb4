"""Progress for long steps: a spinner while a step runs, then one line with its duration."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

console = Console(stderr=True, highlight=False, soft_wrap=True)


@contextmanager
def step(what: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        with console.status(what):
            yield
    except BaseException:
        console.print(f"[red]✗[/red] {what} ({time.monotonic() - started:.0f}s)")
        raise
    console.print(f"[green]✓[/green] {what} ({time.monotonic() - started:.0f}s)")
