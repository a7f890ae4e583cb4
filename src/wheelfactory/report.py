"""The record of a run: dist/report.json (one entry per wheel, kept across runs) and a summary table."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from rich.table import Table

from .audit import WheelAudit
from .progress import console
from .smoke import TierResult

REPORT_NAME = "report.json"


@dataclass
class WheelRecord:
    wheel: str
    dist_name: str
    cuda: int
    python: str
    tags: list[str]
    size_bytes: int
    audit: WheelAudit | None
    smoke: list[TierResult] = field(default_factory=list)
    rpath_changes: list[dict[str, object]] = field(default_factory=list)  # what the repair did to each binary
    build_log: str = ""
    toolkit: dict[str, object] = field(default_factory=dict)  # what it was built with: nvcc, versions, archs
    timings: dict[str, float] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return (
            not self.reasons
            and self.audit is not None
            and self.audit.passed
            and bool(self.smoke)
            and all(t.passed for t in self.smoke)
        )

    def why_not(self) -> list[str]:
        reasons = list(self.reasons)
        if self.audit is not None:
            reasons += [f"audit: {p}" for p in self.audit.all_problems()]
        for tier in self.smoke:
            reasons += [f"smoke tier {tier.tier}: {c.name}: {c.detail}" for c in tier.checks if not c.ok]
        return reasons

    def as_json(self) -> dict[str, object]:
        audit = self.audit.as_json() if self.audit else None
        binaries = audit.pop("binaries") if audit else []
        return {
            "wheel": self.wheel,
            "dist_name": self.dist_name,
            "cuda": self.cuda,
            "python": self.python,
            "tags": self.tags,
            "size_bytes": self.size_bytes,
            "passed": self.passed,
            "binaries": binaries,
            "rpath_changes": self.rpath_changes,
            "build_log": self.build_log,
            "toolkit": self.toolkit,
            "audit": audit,
            "smoke": [t.as_json() for t in self.smoke],
            "timings_s": self.timings,
            "rejected_because": [] if self.passed else self.why_not(),
        }


def write_report(records: list[WheelRecord], dist: Path) -> Path:
    """Merge this run's records into dist/report.json, replacing earlier entries for the same wheels."""
    dist.mkdir(parents=True, exist_ok=True)
    path = dist / REPORT_NAME
    entries: dict[str, object] = {}
    if path.is_file():
        try:
            entries = {e["wheel"]: e for e in json.loads(path.read_text())["wheels"]}
        except (ValueError, KeyError, TypeError):
            entries = {}
    for record in records:
        entries[record.wheel] = record.as_json()
    partial = path.with_suffix(".json.tmp")
    partial.write_text(json.dumps({"wheels": [entries[k] for k in sorted(entries)]}, indent=2) + "\n")
    partial.replace(path)
    return path


def summary(records: list[WheelRecord]) -> None:
    table = Table(title="wheelfactory", show_lines=False)
    table.add_column("wheel", overflow="fold")
    for column in ("size", "audit", "smoke 1/2/3", "time", "result"):
        table.add_column(column, no_wrap=True)
    for r in records:
        tiers = {t.tier: t for t in r.smoke}
        smoke = "/".join(("pass" if tiers[n].passed else "FAIL") if n in tiers else "—" for n in (1, 2, 3))
        audit = "—" if r.audit is None else ("pass" if r.audit.passed else "FAIL")
        result = "[green]in dist/[/green]" if r.passed else "[red]rejected[/red]"
        table.add_row(r.wheel, f"{r.size_bytes / 1e6:.2f} MB", audit, smoke, f"{sum(r.timings.values()):.0f}s", result)
    console.print(table)
    for r in records:
        if not r.passed:
            console.print(f"[red]{r.wheel}[/red] was kept out of dist/:")
            for reason in r.why_not()[:20]:
                console.print(f"  - {reason}", markup=False)
