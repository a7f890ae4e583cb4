"""Build one variant's wheels with cibuildwheel, from a small staging copy of the recipe's source.

The staging copy carries the rendered pyproject.toml, the variant module and the build container's scripts;
cibuildwheel tars the whole directory into the container, so it must not be the repository root. In the
container the rendered repair command runs auditwheel with every CUDA library of the declared components
excluded. Each wheel comes out as a BuiltWheel (built.py), which the later stages take and add to.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from importlib.resources import files
from pathlib import Path

from . import host
from .binaries.wheelfile import WheelName
from .built import BuildRun, BuiltWheel
from .components import Platform, platforms
from .declared import VARIANT_MODULE, declared_problems
from .errors import ToolFailure, UserError
from .fetches import download_attempts, fetch_declarations
from .image import image_digest
from .plan import Cell, Variant
from .platforms import platform_of
from .progress import step
from .render import RenderedVariant
from .sources import NOT_SOURCE, extra_source_tree, package_dir, source_date_epoch, source_tree
from .toolkit.buildenv import EXTRA_SOURCES_DIR, PREPARE_SCRIPT, STATS_SCRIPT
from .toolkit.provision import Toolkit
from .untrusted.cache import SEAL
from .untrusted.shown import shown

# What the build container's prepare step (data/prepare-build.sh) says of nvcc's host compiler.
_HOST_COMPILER = re.compile(r"^wheelfactory: nvcc's host compiler is (?P<compiler>.+)$", re.MULTILINE)
_NO_HOST_COMPILER = re.compile(r"^wheelfactory: no host compiler for nvcc.*$", re.MULTILINE)
# What data/nvcc-wrapper.sh says of a -ccbin the build passes itself, which nvcc then uses instead.
_BUILD_HOST_COMPILER = re.compile(
    r"^wheelfactory: nvcc: the build's own host compiler (?P<compiler>.+?) \(", re.MULTILINE
)
# cibuildwheel's refusal of a pure-Python wheel: every extension was left out (a build script's silent fallback).
_PURE_WHEEL = "Build failed because a pure Python wheel was generated"


def server_log(stats: Path) -> Path:
    """Where the compiler cache's server writes its own output: beside the totals the build leaves at `stats`."""
    return stats.with_suffix(".log")


def compiler_cache_stats(path: Path) -> dict[str, object] | None:
    """Hits and misses per language from sccache's --show-stats JSON, and the entries it wrote (a miss whose entry
    was never written misses again next time), None when there is none."""
    try:
        stats = json.loads(path.read_text())["stats"]
    except (OSError, ValueError, KeyError):
        return None
    hits = stats.get("cache_hits", {}).get("counts", {})
    misses = stats.get("cache_misses", {}).get("counts", {})
    return {
        "hits": sum(hits.values()),
        "misses": sum(misses.values()),
        "by_language": {
            lang: {"hits": hits.get(lang, 0), "misses": misses.get(lang, 0)} for lang in sorted({*hits, *misses})
        },
        "not_cacheable": sum(stats.get("not_cached", {}).values()),
        "writes": stats.get("cache_writes", 0),
        "write_errors": stats.get("cache_write_errors", 0),
    }


def select_cells(variant: Variant, platform_name: str, pythons: list[str]) -> list[Cell]:
    available = [c for c in variant.cells if c.platform == platform_name]
    if not available:
        raise UserError(
            f"matrix.yaml builds no {variant.dist_name} wheel for {platform_name} — add the platform "
            f"to CUDA {variant.major}'s record"
        )
    if not pythons:
        return available
    pythons = list(dict.fromkeys(pythons))  # one given twice is asked once
    known = [p for c in available for p in c.pythons]
    unknown = [p for p in pythons if p not in known]
    if unknown:
        raise UserError(
            f"Python {', '.join(unknown)} is not built for {variant.dist_name} on {platform_name} "
            f"(matrix.yaml has {', '.join(known)}) — pick one of those or edit matrix.yaml"
        )
    # A wheel that serves several Pythons (abi3, py3-none) is built once, whichever of them are asked for.
    return [c for c in available if any(p in pythons for p in c.pythons)]


def stage(rendered: RenderedVariant, build_root: Path) -> Path:
    """A fresh copy of the source with the rendered pyproject.toml, variant module and container scripts."""
    variant = rendered.variant
    source = source_tree(variant.recipe.source, variant.recipe_dir)
    target = build_root / "stage" / variant.key
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    (target / "pyproject.toml").write_text(rendered.files["pyproject.toml"], encoding="utf-8")
    # Every package gets the variant module, imported first: any of them may be imported before the others.
    for package in variant.packages:
        folder = package_dir(target, package)
        if folder is None:
            raise UserError(
                f"{variant.recipe.name}: the source has no package {package} (no {package.replace('.', '/')}/"
                "__init__.py) — fix the recipe's import or packages"
            )
        (target / folder / VARIANT_MODULE).write_text(rendered.files[VARIANT_MODULE], encoding="utf-8")
        inject_loader(target / folder / "__init__.py")
    # What the build would have downloaded while it configures, where the build environment says it is.
    for name, extra in variant.recipe.extra_sources.items():
        ignored = shutil.ignore_patterns(".complete", SEAL)
        shutil.copytree(extra_source_tree(extra, variant.recipe_dir), target / EXTRA_SOURCES_DIR / name, ignore=ignored)
    for script in (PREPARE_SCRIPT, STATS_SCRIPT):
        (target / script).parent.mkdir(exist_ok=True)
        (target / script).write_text(files("wheelfactory.data").joinpath(Path(script).name).read_text("utf-8"))
    return target


# Imported only when the file runs as a package's __init__: build scripts exec it bare to read its version
# (pycuda's setup.py does), where a relative import would fail.
LOADER_IMPORT = (
    'if globals().get("__package__"):  # wheelfactory: find the CUDA libraries before any extension loads\n'
    "    from . import _cuda_variant\n"
)


def inject_loader(init: Path) -> None:
    """Make the package import its variant module first: it finds NVIDIA's libraries wherever pip put them.

    The lines go after the module docstring and `from __future__` imports, which must stay first. Idempotent.
    """
    source = init.read_text(encoding="utf-8") if init.is_file() else ""
    if LOADER_IMPORT in source:
        return
    tree = ast.parse(source)
    line = 0
    for node in tree.body:
        is_docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node is tree.body[0]
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (is_docstring or is_future):
            break
        line = node.end_lineno or line
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    lines.insert(line, LOADER_IMPORT)
    init.write_text("".join(lines), encoding="utf-8")


# How a source is made to build the wheel its recipe's wheel_abi says.
_ABI_HINT = (
    "make the recipe's wheel_abi say what the source builds, or make the source build that (abi3: setuptools' "
    'py_limited_api, scikit-build-core\'s wheel.py-api = "cp310"; py3-none: wheel.py-api = "py3")'
)


def _wheels_by_cell(out: Path, cells: list[Cell], log: Path) -> dict[Cell, Path]:
    found: dict[Cell, Path] = {}
    for wheel in sorted(out.glob("*.whl")):
        name = WheelName.of(wheel)
        cell = next((c for c in cells if c.python_tag == name.python_tag), None)
        if cell is None:
            wanted = ", ".join(c.python_tag for c in cells)
            raise ToolFailure(
                f"cibuildwheel made {wheel.name} ({name.python_tag}), where the build asked for {wanted} — "
                f"{_ABI_HINT} (log: {log})"
            )
        found[cell] = wheel
    missing = [c.identifier for c in cells if c not in found]
    if missing:
        raise ToolFailure(f"cibuildwheel made no wheel for {', '.join(missing)} (log: {log})")
    return found


def _run_environment(
    variant: Variant,
    cells: list[Cell],
    toolkit: Toolkit,
    staged: Path,
    image: str | None,
    caching: tuple[Path, Path] | None,
) -> tuple[dict[str, str], str | None]:
    """The environment of the cibuildwheel run (`caching`: the compiler cache and where its totals go), and the host
    compiler the platform set up for nvcc, where it chose one."""
    info = platforms()[cells[0].platform]
    env = dict(os.environ)
    env.update(
        {
            "SOURCE_DATE_EPOCH": str(source_date_epoch(variant.recipe.source, variant.recipe_dir)),
            "CIBW_BUILD": " ".join(c.identifier for c in cells),
            f"CIBW_ARCHS_{info.os.upper()}": info.cibw_arch,
            "WHEELFACTORY_CUDA_PREFIX": str(toolkit.prefix),
            "WHEELFACTORY_COMPILER_CACHE": str(caching[0]) if caching else "",
            "WHEELFACTORY_COMPILER_CACHE_DIR": str(host.compiler_cache_dir()),
            "WHEELFACTORY_COMPILER_CACHE_STATS": str(caching[1].resolve()) if caching else "",
            # The compiler cache's server log, beside its totals.
            "WHEELFACTORY_COMPILER_CACHE_LOG": str(server_log(caching[1].resolve())) if caching else "",
        }
    )
    added, host_compiler = platform_of(info.os).build_run(variant, info, image, staged)
    return {**env, **added}, host_compiler


def _failure(variant: Variant, info: Platform, staged: Path, log: Path, exit_status: int) -> ToolFailure:
    """Why cibuildwheel failed, as its log tells: no host compiler nvcc accepts, a wheel without its extensions, a
    download the build tried, or else the log's end."""
    text = log.read_text(encoding="utf-8", errors="replace")
    no_compiler = _NO_HOST_COMPILER.search(text)
    if no_compiler:
        return ToolFailure(f"{no_compiler[0].removeprefix('wheelfactory: ')} (log: {log})")
    if _PURE_WHEEL in text:
        # cibuildwheel refuses the wheel before the audit could: the audit's verdict on it is still the reason.
        missing = "; ".join(declared_problems(variant, set(), info.os, info.cibw_arch, set()))
        return ToolFailure(f"{variant.dist_name}: the build made a wheel without any extension: {missing} (log: {log})")
    tried = download_attempts(text, fetch_declarations(staged))
    if tried:
        return ToolFailure(
            f"cibuildwheel failed for {variant.dist_name}: the build tried to download {', '.join(tried)} — "
            "a build must not need the network: declare each in the recipe's extra_sources, pinned by "
            f"sha256 or commit (docs/recipes.md) (log: {log})"
        )
    return ToolFailure(
        f"cibuildwheel failed for {variant.dist_name} (exit {exit_status}); log: {log}\n{host.tail(text)}"
    )


def _host_compiler(log: Path, chosen_here: str | None) -> str | None:
    """nvcc's host compiler, as the build's log says: the one the prepare step chose (else the platform's,
    `chosen_here`), or the build's own -ccbin where nvcc ran with one."""
    text = log.read_text(encoding="utf-8", errors="replace")
    chosen = _HOST_COMPILER.search(text)
    host_compiler = chosen["compiler"] if chosen else chosen_here
    own = sorted({found["compiler"] for found in _BUILD_HOST_COMPILER.finditer(text)})
    if own:  # nvcc ran with the build's own -ccbin: that is the compiler it used
        return f"{', '.join(shown(c) for c in own)} (the build's own -ccbin; the factory chose {host_compiler})"
    return host_compiler


def run_cibuildwheel(
    rendered: RenderedVariant,
    cells: list[Cell],
    toolkit: Toolkit,
    build_root: Path,
    image: str | None,
    extra_env: dict[str, str] | None = None,
    compiler_cache: Path | None = None,
) -> list[BuiltWheel]:
    """Build the wheels of `cells` (all of one platform) in one cibuildwheel run."""
    variant = rendered.variant
    platform_name = cells[0].platform
    info = platforms()[platform_name]
    staged = stage(rendered, build_root)
    out = build_root / "wheelhouse" / variant.key
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    logs = build_root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{variant.key}-{platform_name}.log"
    stats = logs / f"{variant.key}-{platform_name}-compiler-cache.json"
    stats.unlink(missing_ok=True)
    server_log(stats).unlink(missing_ok=True)
    caching = (compiler_cache, stats) if compiler_cache else None
    env, chosen_here = _run_environment(variant, cells, toolkit, staged, image, caching)
    env.update(extra_env or {})
    # cibuildwheel wants the package inside its working directory, and tars that whole directory.
    cmd = [sys.executable, "-m", "cibuildwheel", "--platform", info.os, "--output-dir", str(out.resolve()), "."]
    started = time.monotonic()
    with step(f"cibuildwheel {variant.key} {' '.join(c.identifier for c in cells)} (log: {log})"):
        with log.open("w", encoding="utf-8") as sink:
            result = subprocess.run(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=staged, check=False)
        if result.returncode != 0:
            raise _failure(variant, info, staged, log, result.returncode)
    run = BuildRun(
        log,
        time.monotonic() - started,
        _host_compiler(log, chosen_here),
        compiler_cache_stats(stats) if compiler_cache else None,
        int(env["SOURCE_DATE_EPOCH"]),
        platform_of(info.os).repair_tool(log.read_text(encoding="utf-8", errors="replace")),
        image_digest(image) if image else None,
    )
    per_wheel = round(run.seconds / len(cells), 1)
    return [
        BuiltWheel(variant, cell, path, image, toolkit, run, timings={"build": per_wheel})
        for cell, path in _wheels_by_cell(out, cells, log).items()
    ]
