"""What a torch extension built on LibTorch's stable ABI (recipe: torch_abi: stable) promises of its binaries, checked
by torch-abi-audit: every binary that uses torch keeps to the stable surface (the aoti_torch_* / torch_* C shim,
torch::stable, torch::headeronly) and needs no torch newer than the recipe's torch_target.

torch-abi-audit reads the symbols each binary imports (with nm) and knows the torch release that brought each shim
function. It reads bytes from the wheel, as every reader here does: it runs in its own process, bounded in time,
and what it says of a member is shown escaped. It reads ELF files only.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .. import host
from ..errors import ToolFailure
from ..untrusted.shown import shown
from .wheelfile import Binary, unpack

TORCH_ABI_AUDIT_TIMEOUT_S = 300
# A report of a wheel's few binaries is kilobytes; far more is not one.
_MAX_REPORT_BYTES = 16 * 1024 * 1024
# Symbols named in one problem; the report of torch-abi-audit has them all.
_SYMBOLS_SHOWN = 5


def stable_abi_problems(wheel: Path, target: str, binaries: Iterable[Binary]) -> list[str]:
    """What in the wheel's binaries leaves LibTorch's stable ABI, or needs a torch newer than `target`."""
    listed = [b for b in binaries if not b.unreadable]
    problems = [
        f"{shown(b.member)}: not an ELF file — torch-abi-audit cannot show it keeps to LibTorch's stable ABI"
        for b in listed
        if b.format != "elf"
    ]
    elf = [b.member for b in listed if b.format == "elf"]
    if not elf:
        return problems
    with tempfile.TemporaryDirectory(prefix="torch-abi-audit-") as scratch:
        tree = unpack(wheel, Path(scratch) / "wheel").resolve()
        verdicts = _verdicts(wheel.name, [tree / member for member in elf])
        for member in elf:
            found = verdicts.get(str(tree / member))
            if found is None:
                problems.append(f"{shown(member)}: torch-abi-audit did not report it")
            else:
                problems += _judged(shown(member), found, target)
    return problems


def _verdicts(wheel: str, paths: list[Path]) -> dict[str, dict[str, object]]:
    """torch-abi-audit's verdict on each file: its absolute path -> {torch: ..., error: ...}."""
    command = [sys.executable, "-m", "torch_abi_audit.cli", "--json", *map(str, paths)]
    done = host.run(command, f"torch-abi-audit {wheel}", check=False, timeout=TORCH_ABI_AUDIT_TIMEOUT_S)
    if len(done.stdout) > _MAX_REPORT_BYTES:
        raise ToolFailure(f"torch-abi-audit {wheel}: a report of {len(done.stdout)} bytes is not one of this wheel")
    try:
        report = json.loads(done.stdout)
        packages = report.get("packages", [report]) if isinstance(report, dict) else []
        entries = [e for p in packages for e in (*p.get("extensions", ()), *p.get("bundled_libs", ()))]
        return {str(e["path"]): e for e in entries if isinstance(e, dict)}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ToolFailure(
            f"torch-abi-audit {wheel}: no report (exit {done.returncode}): {host.tail(done.stdout + done.stderr, 6)}"
        ) from None


def _symbols(values: object) -> str:
    listed = sorted(str(v) for v in values) if isinstance(values, list) else []
    more = f" and {len(listed) - _SYMBOLS_SHOWN} more" if len(listed) > _SYMBOLS_SHOWN else ""
    return ", ".join(shown(s) for s in listed[:_SYMBOLS_SHOWN]) + more


def _judged(member: str, entry: dict[str, object], target: str) -> list[str]:
    """The problems of one binary in torch-abi-audit's verdict on it."""
    if entry.get("error"):
        return [f"{member}: torch-abi-audit could not read it: {shown(entry['error'])}"]
    torch = entry.get("torch")
    if not isinstance(torch, dict) or not torch.get("uses_torch"):
        return []  # it uses nothing of torch: nothing ties it to a torch release
    if not torch.get("stable"):
        return [
            f"{member}: uses {_symbols(torch.get('unstable_symbols'))}, outside LibTorch's stable ABI "
            "(torch-abi-audit) — keep to torch/csrc/stable and torch/headeronly, or build it for one torch release "
            "(torch_abi: release)"
        ]
    problems = []
    unknown = torch.get("unknown_shim_symbols")
    if unknown:
        problems.append(
            f"{member}: uses {_symbols(unknown)}, stable-ABI functions newer than torch-abi-audit knows — it cannot "
            f"show that torch {target} has them"
        )
    needs = torch.get("min_torch_version")
    try:
        newer = needs is not None and Version(str(needs)) > Version(target)
    except InvalidVersion:
        return [*problems, f"{member}: torch-abi-audit gives {shown(needs)} as the torch it needs, not a version"]
    if newer:
        problems.append(
            f"{member}: needs torch {shown(needs)} ({_symbols(torch.get('version_defining_symbols'))}), newer than "
            f"its torch_target {target} (torch-abi-audit) — raise torch_target, or keep to what torch {target} has"
        )
    return problems
