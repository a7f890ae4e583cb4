"""What a smoke tier found: its checks, each with what it saw; and where the smoke's time went. The report reads
these."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    libraries: list[str] = field(default_factory=list)  # the CUDA libraries mapped after it ran (Linux)


@dataclass
class TierResult:
    tier: int
    layout: str | None = None  # tier 2: where pip put the wheel and the CUDA wheels (see Layout)
    versions: str | None = None  # tier 2: which versions of them (NvidiaVersions)
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0
    unsupported: str | None = None  # tier 2: why the recipe declares the layout unsupported
    python: str | None = None  # the CPython it ran on, for a wheel that serves several (abi3, py3-none)
    torch: str | None = None  # the torch it ran beside, for a wheel smoke-tested beside several (stable ABI)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def acceptable(self) -> bool:
        """Whether the tier lets the wheel into dist/: it passed, or its layout is declared unsupported."""
        return self.passed or self.unsupported is not None

    @property
    def label(self) -> str:
        on = f"Python {self.python}" if self.python else None
        beside = f"torch {self.torch}" if self.torch else None
        where = ", ".join(part for part in (self.layout, self.versions, on, beside) if part)
        return f"tier {self.tier}" + (f" ({where})" if where else "")

    def as_json(self) -> dict[str, object]:
        return {**asdict(self), "passed": self.passed}


@dataclass(frozen=True)
class Step:
    name: str  # what ran: "3.12: pip install into /smoke/cuda", "newest NVIDIA wheels"
    started: float  # seconds after the smoke began
    seconds: float


class Steps:
    """The smoke's steps, each timed, from every thread that runs one: where its time goes (the report's
    smoke_steps, bench/bench_smoke.py's figures)."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self._steps: list[Step] = []
        self._lock = threading.Lock()

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            step = Step(name, round(started - self.began, 2), round(time.monotonic() - started, 2))
            with self._lock:
                self._steps.append(step)

    def as_json(self) -> list[dict[str, object]]:
        with self._lock:
            return [asdict(s) for s in sorted(self._steps, key=lambda s: s.started)]
