"""build-cudaNN: plan → render → provision → build → repair → audit → smoke → dist/ + report.

Each stage hands its value object to the next; only wheels that passed the audit and every smoke tier are
copied to dist/. A rejected wheel stays out, with the reasons in dist/report.json and the summary.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

from . import host
from .audit import audit_wheel, wheel_python
from .build import Built, ensure_image, run_cibuildwheel, select_cells
from .components import platforms
from .errors import UserError
from .plan import Cell, Plan, Variant, make_plan
from .progress import step
from .provision import Toolkit, compiler_cache, provision
from .render import RenderedVariant, render_plan
from .repair import set_rpaths
from .report import WheelRecord, summary, write_report
from .smoke import smoke


@dataclass(frozen=True)
class BuildRequest:
    root: Path
    cuda: int
    pythons: list[str]
    recipes: list[str]
    image: str | None
    platform: str | None  # "linux" | "windows"; None: this host's
    matrix: Path | None = None
    extra_env: dict[str, str] | None = None  # for tests that turn a gate's safeguard off
    compiler_cache: bool = True


def _variants(plan: Plan, cuda: int) -> list[Variant]:
    variants = [v for v in plan.variants if v.major == cuda]
    if not variants:
        majors = sorted({entry.major for entry in plan.matrix.value.cuda})
        raise UserError(
            f"matrix.yaml has no CUDA {cuda} record for these recipes (it has "
            f"{', '.join(map(str, majors))}) — add one or pick another session"
        )
    return variants


def check_wheel(wheel: Path, variant: Variant, cuda_wheel_dir: Path, image: str) -> WheelRecord:
    """Audit and smoke one repaired wheel (also used by `smoke` on existing wheels)."""
    _, _, _, tags = parse_wheel_filename(wheel.name)
    record = WheelRecord(
        wheel.name,
        variant.dist_name,
        variant.major,
        wheel_python(wheel),
        sorted(str(t) for t in tags),
        wheel.stat().st_size,
        None,
    )
    started = time.monotonic()
    with step(f"audit {wheel.name}"):
        record.audit = audit_wheel(wheel, variant)
    record.timings["audit"] = round(time.monotonic() - started, 1)
    if not record.audit.passed:
        return record
    started = time.monotonic()
    with step(f"smoke {wheel.name} (fresh venvs, no GPU)"):
        record.smoke = smoke(wheel, variant, cuda_wheel_dir, image or None)
    record.timings["smoke"] = round(time.monotonic() - started, 1)
    return record


def toolkit_record(toolkit: Toolkit, variant: Variant, built: Built) -> dict[str, object]:
    """What a wheel was built with, for the report: the toolkit release, nvcc and where it came from, every
    NVIDIA wheel's version, the GPU architectures, nvcc's host compiler and the compiler cache's hits."""
    return {
        "release": toolkit.release,
        "nvcc": {"version": toolkit.nvcc_version, "source": toolkit.nvcc.source, "from": toolkit.nvcc.detail},
        "driver_stub": toolkit.driver_stub,
        "components": toolkit.versions,
        "cuda_archs": list(variant.cuda_archs),
        "host_compiler": built.host_compiler,
        "allow_unsupported_compiler": variant.recipe.allow_unsupported_compiler,
        "compiler_cache": built.compiler_cache,
    }


def build(request: BuildRequest) -> list[WheelRecord]:
    plan = make_plan(request.root, request.matrix, request.recipes or None)
    variants = _variants(plan, request.cuda)
    here = host.platform_name()
    if here not in platforms():
        raise UserError(f"this host ({here}) is not a platform the factory builds for")
    host_os = platforms()[here].os
    if request.platform and request.platform != host_os:
        raise UserError(
            "Windows wheels are built on Windows (the release pipeline's Windows runners); on this "
            "Linux host use --platform linux"
            if request.platform == "windows"
            else "Linux wheels are built on a Linux host (in a manylinux container)"
        )
    rendered = {r.variant.dist_name: r for r in render_plan(plan, request.root)}
    build_root = request.root / "build"
    dist = request.root / "dist"
    records: list[WheelRecord] = []
    for variant in variants:
        cells = select_cells(variant, here, request.pythons)
        records += _build_variant(rendered[variant.dist_name], cells, request, build_root, dist)
    write_report(records, dist)
    summary(records)
    return records


def _build_variant(
    rendered: RenderedVariant, cells: list[Cell], request: BuildRequest, build_root: Path, dist: Path
) -> list[WheelRecord]:
    variant = rendered.variant
    image = request.image or variant.cuda.platforms[cells[0].platform].image
    if image:  # Linux: know that the build image can be had before downloading any CUDA wheel
        ensure_image(image)
    started = time.monotonic()
    toolkit = provision(variant, cells[0].os, platforms()[cells[0].platform].cibw_arch)
    provision_s = round(time.monotonic() - started, 1)
    cache = compiler_cache(cells[0].os, platforms()[cells[0].platform].cibw_arch) if request.compiler_cache else None
    built = run_cibuildwheel(rendered, cells, toolkit, build_root, request.image, request.extra_env, cache)
    records = []
    repaired_dir = build_root / "repaired" / variant.dist_name
    shutil.rmtree(repaired_dir, ignore_errors=True)
    declared = [*variant.recipe.components, *variant.recipe.optional]
    for wheel in built.wheels:
        started = time.monotonic()
        with step(f"set RPATHs in {wheel.name}"):
            repaired, changes = set_rpaths(wheel, repaired_dir, variant.major, declared, wheel_python(wheel))
        repair_s = round(time.monotonic() - started, 1)
        record = check_wheel(repaired, variant, toolkit.wheel_dir, built.image)
        record.rpath_changes = [{"member": c.member, "before": list(c.before), "after": list(c.after)} for c in changes]
        record.build_log = str(built.log)
        record.toolkit = toolkit_record(toolkit, variant, built)
        record.timings = {
            "provision": provision_s,
            "build": round(built.seconds / len(built.wheels), 1),
            "repair": repair_s,
            **record.timings,
        }
        (dist / wheel.name).unlink(missing_ok=True)
        if record.passed:
            dist.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repaired, dist / repaired.name)
        records.append(record)
    return records


def smoke_existing(root: Path, wheels: list[Path], image: str | None) -> list[WheelRecord]:
    """Re-run audit and smoke on wheels that were built before (`nox -s smoke -- WHEEL...`)."""
    plan = make_plan(root)
    by_name = {v.dist_name: v for v in plan.variants}
    records = []
    for wheel in wheels:
        if not wheel.is_file():
            raise UserError(f"{wheel}: no such wheel")
        name, _, _, _ = parse_wheel_filename(wheel.name)
        variant = next((v for dist, v in by_name.items() if canonicalize_name(dist) == name), None)
        if variant is None:
            raise UserError(f"{wheel.name}: no recipe × CUDA major in matrix.yaml renders {name}")
        platform_tag = sorted(t.platform for t in parse_wheel_filename(wheel.name)[3])[0]
        arch = "aarch64" if platform_tag.endswith("aarch64") else "x86_64"
        settings = variant.cuda.platforms.get(f"linux-{arch}")
        chosen = image or (settings.image if settings else None)
        if chosen is None:
            raise UserError(
                f"{wheel.name}: matrix.yaml names no linux-{arch} image for CUDA {variant.major} — pass --image"
            )
        ensure_image(chosen)
        toolkit = provision(variant, "linux", arch)
        records.append(check_wheel(wheel.resolve(), variant, toolkit.wheel_dir, chosen))
    summary(records)
    return records
