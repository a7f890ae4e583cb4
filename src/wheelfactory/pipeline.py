"""build-cudaNN: plan → render → (image) → provision → build → repair → audit → smoke → dist/ + report.

Each wheel travels as one BuiltWheel from cibuildwheel to dist/; only wheels that passed the audit and every
smoke tier are copied there. A rejected wheel stays out, with the reasons in dist/report.json and the summary.
What can be checked cheaply (the inputs, the build image's interpreters) is checked before anything is
downloaded or compiled.
"""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import host
from .audit import audit_wheel
from .binaries import wheelcheck
from .binaries.wheelfile import WheelName
from .build import run_cibuildwheel, select_cells
from .built import BuiltWheel
from .components import operating_system, platforms
from .errors import UserError
from .image import check_interpreters, ensure_image
from .plan import Cell, Plan, Variant, make_plan
from .platforms import platform_of
from .progress import console, step
from .pytorch.index_pages import describe, labelled_copy, write_torch_indexes
from .render import RenderedVariant, render_plan
from .repair import read_binaries_of, repair
from .report import WheelRecord, summary, write_report
from .smoke import smoke
from .toolkit.provision import compiler_cache, provision
from .untrusted.shown import one_line, shown


@dataclass(frozen=True)
class BuildRequest:
    root: Path
    cuda: int
    pythons: list[str]
    recipes: list[str]
    image: str | None
    platform: str | None  # "linux" | "windows"; None: this host's
    matrix: Path | None = None
    arch: str | None = None  # Linux: x86_64 | aarch64; None: this host's (another is emulated with QEMU)
    extra_env: dict[str, str] | None = None  # for tests that turn a gate's safeguard off
    compiler_cache: bool = True
    torch: list[str] | None = None  # of a torch train, the releases to build against (--torch); None: all


def _variants(plan: Plan, request: BuildRequest) -> list[Variant]:
    variants = [v for v in plan.variants if v.major == request.cuda]
    if not variants:
        majors = sorted({entry.major for entry in plan.matrix.value.cuda})
        raise UserError(
            f"matrix.yaml has no CUDA {request.cuda} record for these recipes (it has "
            f"{', '.join(map(str, majors))}) — add one or pick another session"
        )
    if request.torch is None:
        return variants
    train = [t.release for t in variants[0].cuda.torch]
    unknown = [release for release in request.torch if release not in train]
    if unknown:
        known = ", ".join(train) or "none"
        raise UserError(
            f"--torch {', '.join(unknown)}: the matrix's CUDA {request.cuda} torch train is {known} — pick one of those"
        )
    return [v for v in variants if v.locked_torch is None or v.locked_torch.release in request.torch]


def _target_platform(request: BuildRequest) -> str:
    """The matrix platform the wheels are for: this host's, or (Linux, --arch) another machine under QEMU."""
    here = host.platform_name()
    if here not in platforms():
        raise UserError(f"this host ({here}) is not a platform the factory builds for")
    host_os = platforms()[here].os
    if request.platform and request.platform != host_os:
        raise UserError(operating_system(request.platform).built_elsewhere)
    if request.arch is None or request.arch == platforms()[here].cibw_arch:
        return here
    if not operating_system(host_os).builds_in_image:
        raise UserError(f"--arch {request.arch}: only Linux builds run another machine's image (under QEMU)")
    return f"linux-{request.arch}"  # ensure_image checks that this host can emulate it


def check_wheel(built: BuiltWheel) -> WheelRecord:
    """Audit a repaired wheel, and smoke it when the audit passed (also `nox -s smoke` on existing wheels)."""
    record = WheelRecord(built)
    started = time.monotonic()
    record.audit = audit_wheel(built)
    built.timings["audit"] = round(time.monotonic() - started, 1)
    if record.audit.passed:
        started = time.monotonic()
        with step(f"smoke {built.path.name} (fresh venvs, no GPU)") as outcome:
            record.smoke = smoke(built, record.smoke_steps)
            outcome.failed = not all(t.acceptable for t in record.smoke)
        built.timings["smoke"] = round(time.monotonic() - started, 1)
    return record


def check_wheels(wheels: list[BuiltWheel]) -> list[WheelRecord]:
    """Audit and smoke several wheels, as many at once as the cores allow (each smoke is its own machine)."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(wheels), (os.cpu_count() or 1)))) as pool:
        return list(pool.map(check_wheel, wheels))


def build(request: BuildRequest) -> list[WheelRecord]:
    plan = make_plan(request.root, request.matrix, request.recipes or None, request.pythons)
    here = _target_platform(request)
    jobs: list[tuple[Variant, list[Cell], str | None]] = []
    for variant in _variants(plan, request):
        cells = select_cells(variant, here, request.pythons)
        image = request.image or variant.cuda.platforms[here].image
        jobs.append((variant, cells, image))
    # Before anything is downloaded or compiled: every image can be had and offers every Python asked for
    # (each image looked at once, however many recipes build in it).
    wanted: dict[str, list[str]] = {}
    for _, cells, image in jobs:
        if image:
            pythons = wanted.setdefault(image, [])
            asked = (p for cell in cells for p in (cell.python, *cell.smoke_pythons(request.pythons)))
            pythons += [p for p in dict.fromkeys(asked) if p not in pythons]
    for image, pythons in wanted.items():
        ensure_image(image, platforms()[here].cibw_arch)
        check_interpreters(image, pythons)
    rendered = {r.variant.key: r for r in render_plan(plan, request.root)}
    dist = request.root / "dist"
    if dist.is_dir():
        host.remove_partials(dist)  # what a killed run was copying
    records: list[WheelRecord] = []
    for variant, cells, image in jobs:
        records += _build_variant(rendered[variant.key], cells, image, request, dist)
    write_report(records, dist)
    summary(records)
    indexes = index_pages(request, plan, dist)
    if indexes:
        console.print(f"index pages of the wheels built against torch: {describe(dist, indexes)}", markup=False)
    return records


def index_pages(request: BuildRequest, plan: Plan, dist: Path) -> list[str]:
    """Write dist/'s torch index pages again: they list every labelled wheel there, those of the recipes this run
    did not build too (the project's plan judges each)."""
    whole = make_plan(request.root, request.matrix) if request.recipes else plan
    return write_torch_indexes(dist, whole.locked_torches_of)


def _build_variant(
    rendered: RenderedVariant, cells: list[Cell], image: str | None, request: BuildRequest, dist: Path
) -> list[WheelRecord]:
    variant = rendered.variant
    build_root = request.root / "build"
    arch = platforms()[cells[0].platform].cibw_arch
    started = time.monotonic()
    toolkit = provision(variant, cells[0].os, arch)
    provision_s = round(time.monotonic() - started, 1)
    cache = compiler_cache(cells[0].os, arch) if request.compiler_cache else None
    wheels = run_cibuildwheel(rendered, cells, toolkit, build_root, image, request.extra_env, cache)
    for built in wheels:
        built.asked_pythons = tuple(request.pythons)
    repaired_dir = build_root / "repaired" / variant.key
    shutil.rmtree(repaired_dir, ignore_errors=True)
    for built in wheels:
        started = time.monotonic()
        with step(f"repair {built.path.name}: read its binaries, set their RPATHs"):
            repair(built, repaired_dir)
        built.timings = {"provision": provision_s, **built.timings, "repair": round(time.monotonic() - started, 1)}
    records = check_wheels(wheels)
    # The report first, then each wheel that passed, placed whole: a run killed at any moment leaves in dist/
    # only wheels the report says passed. A wheel tied to one torch release also goes, labelled, on that torch's
    # index page; only the train's newest torch's goes under the plain name.
    write_report(records, dist)
    for record in records:
        for place in record.places:
            (dist / place).unlink(missing_ok=True)
        if not record.passed:
            continue
        if variant.on_pypi:
            host.place(record.built.path, dist / record.built.path.name)
        if variant.locked_torch:
            labelled_copy(record.built.path, variant.locked_torch, dist)
    return records


def existing(
    wheel: Path, variant: Variant, image: str | None, matrix_name: str = "matrix.yaml", pythons: tuple[str, ...] = ()
) -> BuiltWheel:
    """A wheel built before, as the audit and the smoke tiers take it: its binaries read as they are (this checks
    a wheel, it does not repair it), its toolkit provisioned for the smoke tiers, which take the Pythons asked
    for (`pythons`, of those the wheel serves) — the image is asked for them before anything is provisioned."""
    name = WheelName.of(wheel)
    cell = next((c for c in variant.cells if (c.python_tag, c.platform) == (name.python_tag, name.platform)), None)
    if cell is None:
        made = ", ".join(sorted({c.python_tag for c in variant.cells if c.platform == name.platform})) or "none"
        raise UserError(
            f"{wheel.name}: {matrix_name} and the recipe build no {name.python_tag} wheel for {name.platform} "
            f"(they build {made})"
        )
    chosen = image or variant.cuda.platforms[name.platform].image
    if operating_system(name.os).builds_in_image:
        if chosen is None:
            message = f"{matrix_name} names no {name.platform} image for CUDA {variant.major} — pass --image"
            raise UserError(f"{wheel.name}: {message}")
        ensure_image(chosen, name.arch)
        if cell.abi != "cpython":  # Pythons beyond the one the wheel's name gives, which its build image has
            check_interpreters(chosen, list(cell.smoke_pythons(list(pythons))))
    built = BuiltWheel(variant, cell, wheel.resolve(), chosen, provision(variant, name.os, name.arch), None)
    built.asked_pythons = pythons
    read_binaries_of(built)
    return built


def smoke_existing(
    root: Path, wheels: list[Path], image: str | None, matrix: Path | None = None, pythons: list[str] | None = None
) -> list[WheelRecord]:
    """Audit and smoke wheels that were built before (`nox -s smoke -- WHEEL...`). Each wheel is opened and
    checked as pip would install it first, before anything is provisioned or downloaded: a file that is no sound
    wheel is refused in a moment (exit 2), every problem of every wheel at once."""
    problems = []
    for wheel in wheels:
        if not wheel.is_file():
            problems.append(f"{shown(str(wheel))}: no such wheel")
            continue
        problems += wheelcheck.check_wheel(wheel)[1]
    if problems:
        raise UserError("\n".join(one_line(p) for p in problems))
    plan = make_plan(root, matrix)
    matrix_name = str(plan.matrix.source.file)
    builts = []
    here = platforms().get(host.platform_name())
    for wheel in wheels:
        name = WheelName.of(wheel)
        variant = plan.variant_of(name.distribution, str(name.version))
        if variant is None:
            raise UserError(
                f"{wheel.name}: no recipe × CUDA major (× torch) in {matrix_name} renders "
                f"{name.distribution} {name.version}"
            )
        if platform_of(name.os).smoke_machine == "host" and (here is None or here.os != name.os):
            system = operating_system(name.os).platform_system
            this = f"{operating_system(here.os).platform_system} " if here else ""
            raise UserError(f"{wheel.name}: a {system} wheel is smoke-tested on {system} — this {this}host cannot")
        builts.append(existing(wheel, variant, image, matrix_name, tuple(pythons or ())))
    records = check_wheels(builts)
    summary(records)
    return records
