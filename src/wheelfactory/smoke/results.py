"""What a smoke tier found: its checks, each with what it saw; the report reads these."""

from __future__ import annotations

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
        where = ", ".join(part for part in (self.layout, self.versions, on) if part)
        return f"tier {self.tier}" + (f" ({where})" if where else "")

    def as_json(self) -> dict[str, object]:
        return {**asdict(self), "passed": self.passed}
