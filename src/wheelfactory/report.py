"""The record of a run: dist/report.json (one entry per wheel, kept across runs) and a summary table."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.utils import parse_wheel_filename
from rich.table import Table

from . import host
from .audit import WheelAudit
from .binaries.fatbin import DeviceCode
from .built import BuiltWheel
from .components import install_layouts
from .declared import torch_requirement
from .gpus import CodeSummary, minimum_driver, products_covered
from .progress import console
from .pytorch.index_pages import index_page, labelled_place
from .smoke.results import Steps, TierResult
from .untrusted.shown import one_line

REPORT_NAME = "report.json"


@dataclass
class WheelRecord:
    """A wheel's whole story for the report: how it was built, and what the audit and the smoke tiers found."""

    built: BuiltWheel
    audit: WheelAudit | None = None
    smoke: list[TierResult] = field(default_factory=list)
    smoke_steps: Steps = field(default_factory=Steps)  # where the smoke's time went

    @property
    def places(self) -> list[str]:
        """Where in dist/ the wheel goes once it passed: its own name, unless it is tied to a torch release other
        than the newest of the train; and for one tied to a torch release, its labelled copy on that torch's
        index page."""
        variant, name = self.built.variant, self.built.path.name
        plain = [name] if variant.on_pypi else []
        locked = variant.locked_torch
        return [*plain, *([labelled_place(name, locked)] if locked else [])]

    @property
    def wheel(self) -> str:
        """The wheel's key in the report: where it goes in dist/ (under its plain name where it has one)."""
        return self.places[0]

    @property
    def passed(self) -> bool:
        return (
            self.audit is not None and self.audit.passed and bool(self.smoke) and all(t.acceptable for t in self.smoke)
        )

    def why_not(self) -> list[str]:
        reasons = [f"audit: {p}" for p in self.audit.all_problems()] if self.audit is not None else []
        for tier in self.smoke:
            if tier.unsupported is None:
                reasons += [f"smoke {tier.label}: {c.name}: {c.detail}" for c in tier.checks if not c.ok]
        return reasons

    def layout_hints(self) -> list[str]:
        """For each layout but the default (data/layouts.yaml's first: every package must work in a plain venv)
        whose tier 2 failed: how a package that truly cannot work there (one that opens its files from sys.prefix
        cannot from a --target folder) says so, where its failure alone would show only its own traceback."""
        declarable = list(install_layouts())[1:]
        failed = dict.fromkeys(
            tier.layout
            for tier in self.smoke
            if tier.tier == 2 and tier.layout in declarable and tier.unsupported is None and not tier.passed
        )
        return [
            f"{layout} (installed with {install_layouts()[layout].words()}) failed: if the package cannot work "
            f"there for its users either, declare it in its recipe — smoke: {{unsupported_layouts: {{{layout}: "
            "why}} — and the wheel is not kept out for it; the reason goes into its description"
            for layout in failed
            if layout is not None
        ]

    def unsupported_layouts(self) -> list[str]:
        """What became of each layout the recipe declares unsupported, a line each (its tier 2 runs all the
        same: one that passes may no longer need the declaration)."""
        lines = []
        for tier in self.smoke:
            if tier.unsupported is not None:
                outcome = "passes all the same — the declaration may be stale" if tier.passed else "fails, as declared"
                lines.append(f"{tier.label} is declared unsupported ({tier.unsupported}): it {outcome}")
        return lines

    def as_json(self) -> dict[str, object]:
        built, name = self.built, self.built.name
        audit = self.audit.as_json() if self.audit else None
        binaries = audit.pop("binaries") if audit else []
        return {
            "wheel": self.wheel,
            "dist_name": built.variant.dist_name,
            "cuda": built.variant.major,
            "python": name.python,
            "abi": name.abi,
            "pythons": list(built.cell.pythons),
            "platform": built.cell.platform,
            "tags": sorted(str(t) for t in parse_wheel_filename(built.path.name)[3]),
            "size_bytes": built.path.stat().st_size,
            "passed": self.passed,
            "binaries": binaries,
            "rpath_changes": [asdict(c) for c in built.rpath_changes],
            "requires_python_was": built.requires_python_was,
            "build_log": str(built.run.log) if built.run else "",
            "source_date_epoch": built.run.source_date_epoch if built.run else None,
            "toolkit": toolkit_json(built),
            "torch": torch_json(built),
            "gpu_code": gpu_code_json(built),
            "audit": audit,
            "layouts": layouts_json(built),
            "smoke": [t.as_json() for t in self.smoke],
            "timings_s": built.timings,
            "smoke_steps": self.smoke_steps.as_json(),
            "rejected_because": [] if self.passed else self.why_not(),
        }


def layouts_json(built: BuiltWheel) -> dict[str, dict[str, object]]:
    """Where pip may put the wheel (data/layouts.yaml), each supported or not, and why not."""
    declared = built.variant.recipe.smoke.unsupported_layouts
    return {
        name: {"description": layout.words(), "supported": name not in declared, "why_not": declared.get(name)}
        for name, layout in install_layouts().items()
    }


def toolkit_json(built: BuiltWheel) -> dict[str, object]:
    """What the wheel was built with: the toolkit release, nvcc and where it came from, every NVIDIA wheel's
    version, the GPU architectures, nvcc's host compiler and the compiler cache's hits."""
    toolkit, variant, run = built.toolkit, built.variant, built.run
    return {
        "release": toolkit.release,
        "nvcc": {
            "version": toolkit.nvcc_version,
            "source": toolkit.nvcc.source,
            "from": toolkit.nvcc.detail,
            "files": [artifact.as_json() for artifact in toolkit.nvcc.artifacts],
        },
        "driver_stub": toolkit.driver_stub,
        "components": toolkit.versions,
        "cuda_archs": list(variant.cuda_archs(built.cell.platform)),
        "host_compiler": run.host_compiler if run else None,
        "allow_unsupported_compiler": variant.recipe.allow_unsupported_compiler,
        "compiler_cache": run.compiler_cache if run else None,
    }


def torch_json(built: BuiltWheel) -> dict[str, object] | None:
    """The torch a wheel built with torch.utils.cpp_extension was compiled against and requires (and for one on
    LibTorch's stable ABI, the oldest it targets); None for others."""
    torch = built.variant.torch
    if torch is None:
        return None
    return {
        "release": torch.release,
        "cuda": torch.cuda,
        "index": torch.index,
        # For a wheel tied to its torch release: its local label and the index page its labelled copy is on.
        "label": torch.label if built.variant.locked_torch else None,
        "index_page": index_page(torch) if built.variant.locked_torch else None,
        "requires": torch_requirement(built.variant),
        "abi": built.variant.recipe.torch_abi,
        "target": built.variant.torch_target,
    }


def _ptx_named(entry: DeviceCode) -> str:
    """compute_90 (ISA 8.4), and where it is relocatable device code's, that the driver JIT-links it."""
    linked = ", JIT-linked from each object" if entry.jit_link else ""
    return f"{entry.name} (ISA {entry.as_json()['ptx_isa']}{linked})"


def gpu_code_json(built: BuiltWheel) -> dict[str, object]:
    """What GPU code the wheel carries, over all its binaries: the SASS architectures (GPUs that run it natively)
    and the PTX ones with their ISA versions (what newer GPUs JIT), each sorted by architecture; the GPUs that
    means in words, and the oldest NVIDIA driver that runs it."""
    entries = {entry for binary in built.binaries.values() for entry in binary.fatbin}
    ordered = sorted(entries, key=lambda e: (e.arch, e.suffix))
    summary = CodeSummary.of(entries)
    isas = [summary.newest_isa] if summary.newest_isa else []
    floor = minimum_driver(built.variant.major, isas, built.name.os, summary.zstd)
    return {
        "sass": list(dict.fromkeys(e.name for e in ordered if e.kind == "sass")),
        "ptx": list(dict.fromkeys(_ptx_named(e) for e in ordered if e.kind == "ptx")),
        "ptx_isa": "{}.{}".format(*summary.newest_isa) if summary.newest_isa else None,
        "runs_on": summary.runs_on,
        # Every entry's bytes as stored, and how they are stored (device code is compressed unless the recipe
        # says compress_device_code: false).
        "device_code_bytes": summary.stored_bytes,
        "compression": sorted({e.compression or "none" for e in entries}),
        "products": products_covered(summary.sass, summary.ptx, built.cell.platform),
        "minimum_driver": {"version": floor.version, "why": floor.why},
    }


def write_report(records: list[WheelRecord], dist: Path) -> Path:
    """Merge this run's records into dist/report.json, replacing earlier entries for the same wheels."""

    def replace_entries(entries: dict[str, dict[str, object]]) -> None:
        entries.update((record.wheel, record.as_json()) for record in records)

    return _update_report(dist, replace_entries)


def record_coinstall(dist: Path, found: dict[str, dict[str, object]]) -> Path:
    """Each wheel's co-install results (wheel -> neighbour -> resolution) into its entry of dist/report.json."""

    def add(entries: dict[str, dict[str, object]]) -> None:
        for wheel, neighbours in found.items():
            entries.setdefault(wheel, {"wheel": wheel})["coinstall"] = neighbours

    return _update_report(dist, add)


def _update_report(dist: Path, update: Callable[[dict[str, dict[str, object]]], None]) -> Path:
    """dist/report.json's entries (by wheel) changed by `update`. Runs writing to one dist/ at once take turns;
    the file is replaced whole, never rewritten in place; one that is not the report's shape starts afresh."""
    dist.mkdir(parents=True, exist_ok=True)
    path = dist / REPORT_NAME
    # The lock lives with the cache's other locks: dist/ holds the wheels and the report, nothing else.
    with host.cache_lock(f"report-{hashlib.sha256(str(dist.resolve()).encode()).hexdigest()[:16]}"):
        return _rewrite(path, update)


def _rewrite(path: Path, update: Callable[[dict[str, dict[str, object]]], None]) -> Path:
    entries: dict[str, dict[str, object]] = {}
    if path.is_file():
        try:
            entries = {e["wheel"]: e for e in json.loads(path.read_text())["wheels"]}
        except (ValueError, KeyError, TypeError):
            entries = {}
    update(entries)
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
        # Tier 2 runs once per layout: it passes when every layout the recipe supports passed.
        tiers = {n: [t for t in r.smoke if t.tier == n] for n in (1, 2, 3)}
        smoke = "/".join(("pass" if all(t.acceptable for t in ts) else "FAIL") if ts else "—" for ts in tiers.values())
        audit = "—" if r.audit is None else ("pass" if r.audit.passed else "FAIL")
        result = "[green]in dist/[/green]" if r.passed else "[red]rejected[/red]"
        size = r.built.path.stat().st_size / 1e6
        table.add_row(r.wheel, f"{size:.2f} MB", audit, smoke, f"{sum(r.built.timings.values()):.0f}s", result)
    console.print(table)
    for r in records:
        for line in r.unsupported_layouts():
            console.print(f"{r.wheel}: {one_line(line)}", markup=False)
        if not r.passed:
            console.print(f"[red]{r.wheel}[/red] was kept out of dist/:")
            for reason in r.why_not()[:20]:
                # One line each: a reason quotes what a wheel's own code printed (a smoke failure's output).
                console.print(f"  - {one_line(reason)}", markup=False)
            for hint in r.layout_hints():
                console.print(f"  {hint}", markup=False)
