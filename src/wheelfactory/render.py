"""Render each Variant's pyproject.toml (metadata + cibuildwheel configuration) from templates/.

Output is deterministic: the same plan renders the same bytes. Everything is rendered in memory first and
written only when every variant rendered, so a failure leaves build/variants as it was.
"""

from __future__ import annotations

import json
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jinja2
from packaging.requirements import Requirement

from .buildenv import linux_environment, windows_environment
from .components import OS, component_table, platforms
from .plan import Plan, Variant

# The build tree's scripts that run in the Linux build container (copied from wheelfactory/data by the build).
PREPARE_SCRIPT = ".wheelfactory/prepare-build.sh"
STATS_SCRIPT = ".wheelfactory/compiler-cache-stats.sh"
# Written into the package at build time: what the variant needs from CUDA (and, on Windows, its DLL loader).
VARIANT_MODULE = "_cuda_variant.py"
CLASSIFIER_GPU = "Environment :: GPU :: NVIDIA CUDA :: {major}"


@dataclass(frozen=True)
class RenderedVariant:
    variant: Variant
    files: dict[str, str]  # relative path -> text


def requirement(name: str, major: int, toolkit: str) -> str:
    """The Requires-Dist line for component `name`: floor from the toolkit, capped below the next major.

    The cap matters for CUDA 13's unsuffixed names, which a future 14.x release would otherwise satisfy.
    """
    entry = component_table().get(name, major)
    assert entry is not None, f"{name} has no CUDA {major} entry"
    floor = entry.floor(toolkit)
    line = f"{entry.distribution}>={floor},<{floor.major + 1}"
    Requirement(line)  # the table must only ever yield valid requirements
    return line


def dependencies(variant: Variant) -> list[str]:
    lines: dict[str, str] = {}
    for name in variant.components(optional=False):
        line = requirement(name, variant.major, variant.cuda.toolkit)
        lines.setdefault(line.split(">=")[0], line)  # cublas and cublasLt share one distribution
    return sorted(lines.values()) + list(variant.recipe.dependencies)


def extras(variant: Variant) -> dict[str, list[str]]:
    result = {}
    for name in variant.components(optional=True):
        # An optional component without a wheel on some platform gets a marker, so pip skips it there.
        entry = component_table().get(name, variant.major)
        assert entry is not None
        line = requirement(name, variant.major, variant.cuda.toolkit)
        if entry.windows is None and "windows-amd64" in variant.platforms():
            line += ' ; sys_platform != "win32"'
        result[name.lower()] = [line]
    return result


def excluded_libraries(variant: Variant, os: OS) -> list[str]:
    """The driver and every library shipped by a distribution the recipe declares (cuBLAS brings cuBLASLt)."""
    table = component_table()
    declared = {
        entry.distribution
        for name in [*variant.recipe.components, *variant.recipe.optional]
        if (entry := table.get(name, variant.major))
    }
    excluded = [table.driver.linux if os == "linux" else table.driver.windows]
    for name in table.names():
        entry = table.get(name, variant.major)
        layout = entry.layout(os) if entry and entry.distribution in declared else None
        if layout:
            excluded.extend(p for p in layout.libraries if p not in excluded)
    return excluded


def _readme(variant: Variant) -> str:
    table = component_table()
    wheels = sorted({table.get(n, variant.major).distribution for n in variant.components(optional=False)})  # type: ignore[union-attr]
    lines = [
        f"# {variant.dist_name}",
        "",
        variant.recipe.summary or variant.recipe.name,
        "",
        f"This is the CUDA {variant.major}.x build of `{variant.recipe.name}` (built against CUDA "
        f"{variant.cuda.toolkit}). It carries no CUDA library: it loads them from NVIDIA's pip wheels "
        f"({', '.join(f'`{w}`' for w in wheels)}), which pip installs with it. Importing it needs no GPU.",
    ]
    optional = sorted(extras(variant))
    if optional:
        lines += ["", f"Optional: `pip install {variant.dist_name}[{','.join(optional)}]`."]
    return "\n".join(lines) + "\n"


def linux_repair_command(variant: Variant) -> str:
    """auditwheel repair that grafts ordinary libraries but never the driver or a declared CUDA library."""
    excludes = " ".join(f"--exclude {shlex.quote(p)}" for p in excluded_libraries(variant, "linux"))
    # Then the compiler cache's totals, for the report.
    return f"auditwheel repair --only-plat -w {{dest_dir}} {excludes} {{wheel}} && sh {{project}}/{STATS_SCRIPT}"


def windows_repair_command(variant: Variant) -> str:
    """delvewheel repair that vendors ordinary DLLs but never nvcuda.dll or a declared CUDA DLL (';' on Windows)."""
    return f'delvewheel repair --exclude "{";".join(excluded_libraries(variant, "windows"))}" -w {{dest_dir}} {{wheel}}'


def _context(variant: Variant, matrix_file: str, root: Path) -> dict[str, object]:
    by_os: dict[str, list[str]] = {"linux": [], "windows": []}
    for name in variant.platforms():
        by_os[platforms()[name].os].append(name)
    linux = None
    if by_os["linux"]:
        images = {}
        for name in by_os["linux"]:
            option = platforms()[name].image_option
            image = variant.cuda.platforms[name].image
            if option and image:
                images[option] = image
        linux = {
            "archs": [platforms()[n].cibw_arch for n in by_os["linux"]],
            "images": images,
            "repair": linux_repair_command(variant),
            "environment": linux_environment(variant),
            "before_all": f"sh {{project}}/{PREPARE_SCRIPT}",
        }
    windows = None
    if by_os["windows"]:
        windows = {
            "archs": [platforms()[n].cibw_arch for n in by_os["windows"]],
            "repair": windows_repair_command(variant),
            "environment": windows_environment(variant),
        }
    pythons = sorted({c.python for c in variant.cells}, key=lambda v: tuple(int(p) for p in v.split(".")))
    classifiers = [
        "Development Status :: 4 - Beta",
        CLASSIFIER_GPU.format(major=variant.major),
        "Programming Language :: Python :: 3",
        *(f"Programming Language :: Python :: {v}" for v in pythons),
    ]
    if by_os["linux"]:
        classifiers.append("Operating System :: POSIX :: Linux")
    if by_os["windows"]:
        classifiers.append("Operating System :: Microsoft :: Windows")
    recipe_file = (variant.recipe_dir / "recipe.yaml").resolve()
    try:
        recipe_shown = str(recipe_file.relative_to(root.resolve()))
    except ValueError:
        recipe_shown = recipe_file.name
    return {
        "matrix_file": matrix_file,
        "recipe_file": recipe_shown,
        "recipe_name": variant.recipe.name,
        "dist_name": variant.dist_name,
        "version": variant.recipe.version,
        "build_requires": variant.recipe.build_requires,
        "build_backend": variant.recipe.build_backend,
        "description": f"{variant.recipe.summary or variant.recipe.name} (CUDA {variant.major}.x build)",
        "readme": _readme(variant),
        "major": variant.major,
        "toolkit": variant.cuda.toolkit,
        "requires_python": str(variant.requires_python),
        "dependencies": dependencies(variant),
        "extras": extras(variant),
        "classifiers": classifiers,
        "identifiers": [cell.identifier for cell in variant.cells],
        "linux": linux,
        "windows": windows,
        "package_depth": len(variant.recipe.import_name.split(".")),
        "gpu_checks": [(check.name, check.run) for check in variant.recipe.gpu_checks],
        "components": _component_specs(variant, optional=False),
        "optional": _component_specs(variant, optional=True),
    }


def environment(root: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(root / "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    # JSON strings and arrays are valid TOML basic strings and inline arrays.
    env.filters["toml"] = lambda value: json.dumps(value, ensure_ascii=False)
    env.filters["pytuple"] = _python_tuple
    return env


def _python_tuple(values: tuple[object, ...]) -> str:
    """A Python tuple literal (None stays None; strings are JSON-quoted, which Python reads as well)."""
    items = ["None" if v is None else _python_tuple(v) if isinstance(v, tuple) else json.dumps(v) for v in values]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _component_specs(variant: Variant, *, optional: bool) -> dict[str, tuple[object, ...]]:
    specs: dict[str, tuple[object, ...]] = {}
    for name in variant.components(optional=optional):
        entry = component_table().get(name, variant.major)
        assert entry is not None
        linux, windows = entry.linux, entry.windows
        specs[name] = (
            entry.distribution,
            linux.lib_dir if linux else None,
            windows.dll_dir if windows else None,
            tuple(linux.libraries) if linux else (),
        )
    return specs


def render_plan(plan: Plan, root: Path) -> list[RenderedVariant]:
    env = environment(root)
    template = env.get_template("pyproject.toml.j2")
    matrix_file = plan.matrix.source.file.as_posix()
    variant_module = env.get_template("cuda_variant.py.j2")
    rendered = []
    for variant in plan.variants:
        context = _context(variant, matrix_file, root)
        rendered.append(
            RenderedVariant(
                variant,
                {
                    "pyproject.toml": template.render(context),
                    VARIANT_MODULE: variant_module.render(context),
                },
            )
        )
    return rendered


def stale_files(rendered: list[RenderedVariant], out_dir: Path) -> list[str]:
    """Paths under out_dir that differ from, are missing from, or are extra to the rendered output."""
    expected = {f"{r.variant.dist_name}/{name}": text for r in rendered for name, text in r.files.items()}
    actual = (
        {p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file()} if out_dir.is_dir() else set()
    )
    stale = sorted(rel for rel in actual - expected.keys())
    for rel, text in sorted(expected.items()):
        path = out_dir / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(rel)
    return sorted(stale)


def write(rendered: list[RenderedVariant], out_dir: Path) -> None:
    """Replace out_dir with exactly the rendered files, all or nothing."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".variants-", dir=out_dir.parent))
    try:
        for r in rendered:
            for name, text in r.files.items():
                path = staging / r.variant.dist_name / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8", newline="\n")
        old = out_dir.with_name(out_dir.name + ".old")
        if out_dir.exists():
            out_dir.rename(old)
        staging.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
