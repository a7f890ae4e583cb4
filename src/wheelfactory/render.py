"""Render each Variant's pyproject.toml (metadata + cibuildwheel configuration) from templates/.

Output is deterministic: the same plan renders the same bytes. Everything is rendered in memory first and
written only when every variant rendered, so a failure leaves build/variants as it was.
"""

from __future__ import annotations

import shlex
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2
import tomlkit
import tomlkit.exceptions
import yaml
from filelock import FileLock
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from . import host
from .components import (
    NO_WHEEL,
    component_table,
    gpu_generations,
    install_layouts,
    operating_system,
    product_table,
    toolkit_table,
)
from .declared import (
    CLASSIFIER_GPU,
    VARIANT_MODULE,
    dependencies,
    extras,
    nvidia_dependencies,
    torch_build_requirement,
    torch_requirement,
    variant_extras,
    variant_module_name,
)
from .errors import InputError, Problem, UserError
from .gpus import code_facts, products_covered, runs_on
from .inputs import DRIVER
from .plan import Plan, Variant
from .platforms import PLATFORMS
from .pytorch.index_pages import index_page
from .source_metadata import (
    Readme,
    SourceText,
    declared_requirements,
    setup_py_classifiers,
    setup_py_fields,
    source_build_requires,
    source_extras,
    source_project,
    source_readme,
)
from .sources import package_dir, source_tree
from .templating import template_environment
from .untrusted.shown import shown

# Fields the variant sets itself, whatever the source's pyproject says.
VARIANT_FIELDS = ("name", "description", "readme", "requires-python", "classifiers")
# The factory's tables in a variant's pyproject.toml (the source's own, if any, are replaced).
FACTORY_TABLES = ("wheelfactory", "cibuildwheel")
# Classifiers that describe a build: the source's say what it claims, the variant's what this wheel is.
_BUILD_CLASSIFIERS = (
    "Programming Language :: Python :: 3.",
    "Environment :: GPU :: NVIDIA CUDA ::",
    "Operating System ::",
)
# Classifiers the variant gives only where the source has none of its own.
_SOURCE_CLASSIFIERS = ("Development Status ::",)


@dataclass(frozen=True)
class RenderedVariant:
    variant: Variant
    files: dict[str, str]  # relative path -> text


def build_requirements(variant: Variant, requires: list[str]) -> list[str]:
    """A [build-system] requires list made the variant's: for a build against torch, its torch line the matrix's
    release whatever the source says (`torch>=1.7` would take the newest, built for another CUDA), and ninja, which
    cpp_extension needs to compile in parallel."""
    pinned = torch_build_requirement(variant)
    if pinned is None:
        return requires
    kept = [line for line in requires if _requirement_name(line) != "torch"]
    has_ninja = any(_requirement_name(line) == "ninja" for line in kept)
    return [*kept, pinned, *([] if has_ninja else ["ninja"])]


def torch_pages(variant: Variant) -> dict[str, str]:
    """For a build tied to its torch release: each release of the major's torch train -> the index page its build
    is on (the variant module names the right one when another torch is installed)."""
    if variant.locked_torch is None:
        return {}
    return {torch.release: index_page(torch) for torch in variant.cuda.torch}


def _requirement_name(line: str) -> str | None:
    """A requirement's canonical name; None for a line that is none (the rewrite reports it at its place)."""
    try:
        return canonicalize_name(Requirement(line).name)
    except InvalidRequirement:
        return None


def before_build(variant: Variant, tree: Path) -> str | None:
    """For a build against torch: the command that installs its build requirements into the build's own Python
    (the build runs without an isolated environment, whose random path would be in every compile command: the
    compiler cache would never hit). None for other builds."""
    if variant.torch is None:
        return None
    source = source_build_requires(tree)
    requires = build_requirements(variant, source if source is not None else variant.recipe.build_requires)
    return "python -m pip install " + " ".join(shlex.quote(line) for line in requires)


def variant_readme(variant: Variant, source: Readme | None) -> Readme:
    """The variant's long description: the source's own readme with a short note first, in the readme's own
    markup (Markdown, reStructuredText or plain text), saying which CUDA build this is and what it needs; a
    generated Markdown page for a source without one."""
    markup = source.content_type if source else "text/markdown"
    code = {"text/markdown": "`{}`", "text/x-rst": "``{}``"}.get(markup, "{}")
    wheels = sorted({Requirement(line).name for line in nvidia_dependencies(variant)})
    # Only what the audit holds every wheel of the recipe to: no CUDA library inside, those of its components from
    # NVIDIA's wheels, none but the driver without them; device code, a CUDA link or a declared opening of CUDA.
    where = (
        f"it loads them from NVIDIA's pip wheels ({', '.join(code.format(w) for w in wheels)}), which pip installs "
        "with it"
        if wheels
        else "it requires none of NVIDIA's wheels, and needs only the NVIDIA driver"
    )
    opens = ["the NVIDIA driver" if name == DRIVER else code.format(name) for name in variant.recipe.opens_cuda]
    listed = " and ".join([", ".join(opens[:-1]), opens[-1]] if len(opens) > 1 else opens)
    opened = f" It opens {listed} itself when it needs them." if opens else ""
    note = (
        f"This is the CUDA {variant.major}.x build of {code.format(variant.recipe.name)} (built against CUDA "
        f"{variant.cuda.toolkit}), published as {code.format(variant.dist_name)}. It carries no CUDA library: "
        f"{where}.{opened} Importing it needs no GPU."
    )
    if variant.torch:
        pinned = torch_requirement(variant)
        stable = " for LibTorch's stable ABI only," if variant.torch_target else ""
        note += (
            f" It is compiled against torch {variant.torch.release} (CUDA {variant.torch.cuda}){stable} and requires "
            f"{code.format(pinned)}."
        )
    optional = sorted(extras(variant))
    if optional:
        install = f"pip install {variant.dist_name}[{','.join(optional)}]"
        note += f" Optional: {code.format(install)}."
    note += layouts_note(variant, code)
    module = f"python -m {variant_module_name(variant)}"
    note += (
        f" What it was built from and will load (source, toolkit, nvcc's origin, compiler, NVIDIA wheels, driver) is "
        f"in its SBOM, {code.format('.dist-info/sboms/wheelfactory.cdx.json')} (CycloneDX); "
        f"{code.format(module + ' --sbom')} prints it."
    )
    if source is None:
        title = f"# {variant.dist_name}\n\n{variant.recipe.summary or variant.recipe.name}\n\n"
        return Readme(f"{title}{note}\n", "text/markdown")
    lead = f"> {note}" if markup == "text/markdown" else note
    return Readme(f"{lead}\n\n{source.text.lstrip()}", markup)


def layouts_note(variant: Variant, code: str) -> str:
    """Where pip may put the package and where not, and why not: only for a recipe that declares a layout
    unsupported (by default every layout the smoke tests is)."""
    declared = variant.recipe.smoke.unsupported_layouts
    if not declared:
        return ""
    layouts = install_layouts()
    works = "; ".join(layout.words(code) for name, layout in layouts.items() if name not in declared)
    fails = "; ".join(f"{layouts[name].words(code)} — {why}" for name, why in declared.items())
    return f" It works installed with {works}. It does not work installed with {fails}."


def merged_classifiers(source: list[str], variant: list[str]) -> list[str]:
    """The source's classifiers but those that describe a build, then the variant's: its build classifiers say
    what this wheel is, and its Development Status stands only where the source states none."""
    kept = [c for c in source if not c.startswith(_BUILD_CLASSIFIERS)]
    has_status = any(c.startswith(_SOURCE_CLASSIFIERS) for c in kept)
    added = [c for c in variant if not (has_status and c.startswith(_SOURCE_CLASSIFIERS))]
    return list(dict.fromkeys([*kept, *added]))


def template_context(
    variant: Variant, matrix_file: str, root: Path, tree: Path, siblings: list[Variant]
) -> dict[str, object]:
    """What the templates render for a variant; `siblings`, the recipe's variants of the other CUDA majors."""
    # Each OS's [tool.cibuildwheel.<os>] table (None: the variant builds nothing for it), and its classifier.
    tables: dict[str, object] = {os: platform.cibuildwheel_options(variant) for os, platform in PLATFORMS.items()}
    pythons = sorted({p for c in variant.cells for p in c.pythons}, key=lambda v: tuple(int(p) for p in v.split(".")))
    classifiers = [
        "Development Status :: 4 - Beta",
        CLASSIFIER_GPU.format(major=variant.major),
        "Programming Language :: Python :: 3",
        *(f"Programming Language :: Python :: {v}" for v in pythons),
    ]
    classifiers += [operating_system(os).classifier for os in PLATFORMS if tables[os] is not None]
    classifiers = merged_classifiers(setup_py_classifiers(tree), classifiers)
    project = source_project(tree)
    readme = variant_readme(variant, source_readme(tree, project, root))
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
        "build_requires": build_requirements(variant, variant.recipe.build_requires),
        "build_backend": variant.recipe.build_backend,
        "before_build": before_build(variant, tree),
        "description": f"{variant.recipe.summary or variant.recipe.name} (CUDA {variant.major}.x build)",
        "readme": readme.text,
        "readme_type": readme.content_type,
        "major": variant.major,
        "toolkit": variant.cuda.toolkit,
        "torch": variant.torch.release if variant.torch else None,
        "torch_oldest": variant.torch_target,
        "torch_pages": torch_pages(variant),
        "requires_python": str(variant.requires_python),
        "dependencies": dependencies(variant, _setup_requirements(variant, tree, root) if project is None else None),
        # A source without a [project] table gives its extras through setup(): the variant states them (its static
        # optional-dependencies would make setuptools drop setup()'s).
        "extras": variant_extras(variant, source_extras(tree) if project is None else {}),
        "classifiers": classifiers,
        "identifiers": [cell.identifier for cell in variant.cells],
        **tables,
        # What setup.py keeps providing when the source has no [project] table of its own.
        "dynamic": setup_py_fields(tree),
        "gpu_checks": [(check.name, check.run) for check in variant.recipe.gpu_checks],
        "module_name": variant_module_name(variant),
        "components": _component_specs(variant, variant.components(optional=False)),
        "optional": _component_specs(variant, variant.components(optional=True)),
        "no_wheel": NO_WHEEL,
        "needed": _component_specs(
            variant, [n for n in variant.runtime_closure(variant.declared) if n not in variant.declared]
        ),
        **gpu_code_context(variant, siblings),
    }


def _setup_requirements(variant: Variant, tree: Path, root: Path) -> list[str]:
    """The requirements a source without a [project] table declares (declared_requirements), each a valid
    requirement, else InputError at its place in setup.py; those the recipe drops left out. The variant states
    them all: its static list would make setuptools drop setup()'s."""
    lines = declared_requirements(tree) or []
    if (tree / "setup.py").is_file():
        _check_requirements(SourceText.read(tree / "setup.py", root), [(line, line) for line in lines])
    return _kept(variant, lines, root)


def _kept(variant: Variant, lines: list[str], root: Path) -> list[str]:
    """The source's requirements but those the recipe drops (dropped_requirements); a drop that names none of them
    is stale, and refused at its place in the recipe."""
    dropped = {canonicalize_name(name) for name in variant.recipe.dropped_requirements}
    named = {canonicalize_name(Requirement(line).name) for line in lines}
    stale = [name for name in variant.recipe.dropped_requirements if canonicalize_name(name) not in named]
    if stale:
        recipe = SourceText.read(variant.recipe_dir / "recipe.yaml", root)
        message = "the source does not require {} — remove it from dropped_requirements"
        raise InputError([recipe.problem(f"{name}:", message.format(shown(name))) for name in stale])
    return [line for line in lines if canonicalize_name(Requirement(line).name) not in dropped]


def environment(root: Path) -> jinja2.Environment:
    return template_environment(
        root,
        {
            # A TOML value (string, array) or key, written by tomlkit with every escape TOML needs.
            "toml": lambda value: tomlkit.item(value).as_string(),
            "tomlkey": lambda value: tomlkit.key(str(value)).as_string(),
            # A Python literal of strings, numbers, tuples, dicts and None: repr is exact and deterministic for them.
            "pyrepr": repr,
            # Text inside a Python docstring or a comment (TOML or Python): one line, backslashes, quotes, line
            # breaks and anything not ASCII escaped, so that it can end neither the string nor the comment.
            "inert": lambda value: str(value).encode("unicode_escape").decode("ascii").replace('"', '\\"'),
        },
    )


def _component_specs(variant: Variant, names: list[str]) -> dict[str, dict[str, object]]:
    """What the variant module needs of each component: its distribution, the components its libraries load at
    run time (`needs`), per OS its folder in site-packages, its library files (the component's own first) and
    those of them it opens by name (`opens`), and the Linux machines NVIDIA ships it for (`machines`)."""
    table = component_table()
    specs: dict[str, dict[str, object]] = {}
    for name in names:
        entry = table.get(name, variant.major)
        assert entry is not None
        linux, windows = entry.linux, entry.windows
        specs[name] = {
            "distribution": entry.distribution,
            "needs": tuple(n for n in variant.runtime_closure([name]) if n != name),
            "linux": (linux.lib_dir, linux.libraries, linux.opens) if linux and linux.lib_dir else None,
            "windows": (windows.dll_dir, windows.libraries, windows.opens) if windows and windows.dll_dir else None,
            "machines": linux.machines if linux else (),
        }
    return specs


def gpu_code_context(variant: Variant, siblings: list[Variant]) -> dict[str, object]:
    """What the variant module says of the GPUs the build serves: the device code planned (the repair writes what
    the wheel's binaries really carry in its place), the oldest driver per OS, the GPU products it covers, and the
    same for the recipe's other CUDA majors, so that a GPU this variant has no code for is pointed at one that
    has — per platform, whose default architectures may differ."""

    def planned(v: Variant, platform: str) -> dict[str, object]:
        release = toolkit_table().releases[v.cuda.toolkit]
        archs = list(v.cuda_archs(platform))
        facts = code_facts(v.major, archs, archs[-1:], release.ptx_isa_version)
        return {"dist_name": v.dist_name, "toolkit": v.cuda.toolkit, **facts}

    names = variant.platforms_defaults_first()
    first = variant.cuda_archs(names[0])
    return {
        "gpu_code": planned(variant, names[0]),
        "narrowed": {
            name: {
                pattern: [a for a in variant.cuda_archs(name) if a in kept]
                for pattern, kept in variant.recipe.device_code_archs.items()
            }
            for name in names
        },
        "other_variants": {
            name: {v.major: planned(v, name) for v in siblings if name in v.platforms()} for name in names
        },
        "covers": {
            name: products_covered(list(variant.cuda_archs(name)), list(variant.cuda_archs(name)[-1:]), name)
            for name in names
        },
        "jetson": product_table().jetson.pip_wheels.get(variant.major),
        "jetpack": product_table().jetson.jetpack,
        "generations": {arch: generation for arch, (generation, _) in sorted(gpu_generations().items())},
        "runs_on": runs_on(list(first), list(first[-1:])),
    }


# The variant module's code, in the order every module holds it after its data: each part is a module of
# wheelfactory.shipped, shipped from the line after its CODE_STARTS marker.
VARIANT_CODE_PARTS = ("loader.py", "diagnostic.py", "duplicates.py", "main.py")
CODE_STARTS = "# CODE_STARTS: "


@cache
def variant_code() -> str:
    """What every variant module holds after its data: the shipped parts, two blank lines before each."""
    parts = []
    for name in VARIANT_CODE_PARTS:
        text = files("wheelfactory.shipped").joinpath(name).read_text(encoding="utf-8")
        parts.append(text[text.index("\n", text.index(CODE_STARTS)) + 1 :].lstrip("\n"))
    return "".join(f"\n\n{part}" for part in parts)


def render_plan(plan: Plan, root: Path) -> list[RenderedVariant]:
    env = environment(root)
    template = env.get_template("pyproject.toml.j2")
    matrix_file = plan.matrix.source.file.as_posix()
    variant_module = env.get_template("cuda_variant.py.j2")
    rendered = []
    for variant in plan.variants:
        tree = source_tree(variant.recipe.source, variant.recipe_dir)
        siblings = [v for v in plan.variants if v.recipe.name == variant.recipe.name and v.major != variant.major]
        context = template_context(variant, matrix_file, root, tree, siblings)
        generated = template.render(context)
        source = tree / "pyproject.toml"
        pyproject = _rewrite(SourceText.read(source, root), generated, variant, tree) if source.is_file() else generated
        rendered.append(
            RenderedVariant(
                variant, {"pyproject.toml": pyproject, VARIANT_MODULE: variant_module.render(context) + variant_code()}
            )
        )
    return rendered


@cache
def _package_lists() -> dict[str, list[str]]:
    """Build backend -> the key path of its package list (data/build_backends.yaml)."""
    table: dict[str, list[str]] = yaml.safe_load(
        files("wheelfactory.data").joinpath("build_backends.yaml").read_text("utf-8")
    )
    return table


def _rewrite(source: SourceText, generated: str, variant: Variant, tree: Path) -> str:
    """The source's own pyproject.toml made the variant's: every table kept ([build-system], [tool.*]), [project]
    rewritten where the variant differs (name, description, readme, requires-python, classifiers, dependencies
    and extras, and `dynamic` without what is now set), and [tool.cibuildwheel] and [tool.wheelfactory] the
    factory's. A source without a [project] table gets the generated one (setup.py provides the rest). Where the
    build backend would find the packages by the project's name, the variant lists them."""
    ours = tomlkit.parse(generated)
    try:
        doc = tomlkit.parse(source.text)
    except tomlkit.exceptions.ParseError as exc:
        reason = str(exc).split(" at line ")[0]
        message = f"not TOML: {reason} — the source must be fixed, or another release pinned"
        raise InputError([Problem(source.shown, exc.line, exc.col + 1, message)]) from None  # tomlkit counts from 0
    header = generated.split("\n\n", 1)[0]  # the template's "generated, do not edit" lines
    if "build-system" not in doc:
        doc["build-system"] = ours["build-system"]
    elif variant.torch is not None:
        requires = [str(line) for line in doc["build-system"].get("requires", [])]
        _check_requirements(source, [(line, line) for line in requires])
        doc["build-system"]["requires"] = _multiline(build_requirements(variant, requires))
    if "project" not in doc:
        doc["project"] = ours["project"]
    else:
        _rewrite_project(doc["project"], ours["project"], variant, doc, tree, source)
    for name in FACTORY_TABLES:
        doc.get("tool", {}).pop(name, None)
    _list_packages(doc, variant, tree)
    note = "# The source's own pyproject.toml, rewritten for this variant: its other tables are kept as they are."
    # The factory's tables come last, as the template renders them, where a reviewer finds them.
    factory = generated[generated.index(f"[tool.{FACTORY_TABLES[0]}]") :]
    text = f"{header}\n{note}\n\n{tomlkit.dumps(doc).strip()}\n\n{factory}"
    tomllib.loads(text)  # a rewrite that is no longer TOML is a bug here, not the build's problem
    return text


def _rewrite_project(project: Any, ours: Any, variant: Variant, doc: Any, tree: Path, pyproject: SourceText) -> None:
    """[project] made the variant's. A field the variant sets leaves `dynamic`; where the source computed its
    requirements (setuptools' `file` directive), they are read here so that none is lost."""
    dynamic = [str(field) for field in project.get("dynamic", [])]
    computed = doc.get("tool", {}).get("setuptools", {}).get("dynamic", {})
    source_deps = [str(d) for d in project.get("dependencies", [])]
    _check_requirements(pyproject, [(line, line) for line in source_deps])
    if "dependencies" in dynamic:
        stated = declared_requirements(tree)
        source_deps += _computed_requirements(
            tree, computed.get("dependencies"), "dependencies", variant, pyproject, stated
        )
    extras_now: dict[str, list[str]] = {}
    if "optional-dependencies" in dynamic:
        # setup() computes them where no directive names them (CuPy): the sdist's PKG-INFO says what it gave.
        stated_extras = source_extras(tree)
        directives = computed.get("optional-dependencies") or dict.fromkeys(stated_extras)
        for extra, directive in directives.items():
            stated = stated_extras.get(str(extra))
            extras_now[str(extra)] = _computed_requirements(
                tree, directive, f"extra {extra}", variant, pyproject, stated
            )
    extras_now.update({str(k): [str(r) for r in v] for k, v in project.get("optional-dependencies", {}).items()})
    extras_now = variant_extras(variant, extras_now)
    source_classifiers = [str(c) for c in project.get("classifiers", [])]
    for key in VARIANT_FIELDS:
        project[key] = ours[key]
    project["classifiers"] = _multiline(merged_classifiers(source_classifiers, [str(c) for c in ours["classifiers"]]))
    project["dependencies"] = _multiline(dependencies(variant, _kept(variant, source_deps, pyproject.root)))
    if extras_now:
        extras_table = project.setdefault("optional-dependencies", tomlkit.table())
        for extra in [e for e in extras_table if e not in extras_now]:
            del extras_table[extra]  # an extra that pulled only what the variant leaves out
        for extra, lines in extras_now.items():
            extras_table[extra] = lines
    else:
        project.pop("optional-dependencies", None)
    now_set = {*VARIANT_FIELDS, "dependencies", "optional-dependencies"}
    for field in now_set:
        computed.pop(field, None)  # setuptools' directive for a field that is no longer dynamic
    setuptools_table = doc.get("tool", {}).get("setuptools", {})
    if "dynamic" in setuptools_table and not setuptools_table["dynamic"]:
        del setuptools_table["dynamic"]
    if dynamic:
        project["dynamic"] = [field for field in dynamic if field not in now_set]
        if not project["dynamic"]:
            del project["dynamic"]


def _computed_requirements(
    tree: Path, directive: Any, what: str, variant: Variant, pyproject: SourceText, stated: list[str] | None
) -> list[str]:
    """The requirement lines of a dynamic field: a setuptools `{file = ...}` directive's (blank lines, comments
    and pip options left out), else what the sdist's PKG-INFO states setup() gave (`stated`). Only files of the
    source tree are read: a directive that leads out of it (`../../etc/hostname`, or a link) would put the build
    host's files into published metadata."""
    files_given = directive.get("file") if isinstance(directive, dict) else None
    if files_given is None:
        if stated is not None:
            return stated
        if variant.recipe.dependencies:
            return []  # the recipe names them
        raise UserError(
            f"{variant.recipe.name}: the source's pyproject.toml computes its {what} in a way the factory cannot "
            "read — name them in the recipe's dependencies"
        )
    lines = []
    for name in [files_given] if isinstance(files_given, str) else files_given:
        path = tree / str(name)
        if not path.resolve().is_relative_to(tree.resolve()):
            message = (
                f"the {what} file {str(name)!r} is outside the source tree — refused: only the source's own files "
                "are read"
            )
            raise InputError([pyproject.problem(str(name), message)])
        if not path.is_file():
            message = (
                f"the {what} file {str(name)!r} is not in the source — name the requirements in the recipe's "
                "dependencies"
            )
            raise InputError([pyproject.problem(str(name), message)])
        requirements = SourceText.read(path, pyproject.root)
        kept = []
        for raw in requirements.text.splitlines():
            line = raw.split(" #", 1)[0].strip()
            if line and not line.startswith(("#", "-")):
                kept.append((line, raw))
        _check_requirements(requirements, kept)
        lines += [line for line, _ in kept]
    return lines


def _check_requirements(file: SourceText, lines: list[tuple[str, str]]) -> None:
    """Every (requirement, its text in `file`) is a valid requirement, else InputError at its place."""
    problems = []
    for line, raw in lines:
        try:
            Requirement(line)
        except InvalidRequirement as exc:
            reason = str(exc).splitlines()[0]
            message = (
                f"{shown(line, quoted=True)} is not a valid requirement: {reason} — the source must be fixed, or the "
                "recipe's dependencies name it"
            )
            problems.append(file.problem(raw, message))
    if problems:
        raise InputError(problems)


def _multiline(values: list[str]) -> Any:
    array = tomlkit.array()
    array.extend(values)
    return array.multiline(True)


def _list_packages(doc: Any, variant: Variant, tree: Path) -> None:
    key = _package_lists().get(str(doc["build-system"].get("build-backend", "")))
    if key is None:
        return
    table = doc
    for part in key[:-1]:
        table = table.setdefault(part, tomlkit.table(is_super_table=True))
    if key[-1] in table:  # the source lists its packages already
        return
    folders = []
    for package in {p.split(".")[0]: None for p in variant.packages}:
        folder = package_dir(tree, package)
        if folder is None:
            raise UserError(
                f"{variant.recipe.name}: the source has no package {package} (no {package}/__init__.py) — fix the "
                "recipe's import or packages"
            )
        folders.append(folder.as_posix())
    table[key[-1]] = folders


def stale_files(rendered: list[RenderedVariant], out_dir: Path) -> list[str]:
    """Paths under out_dir that differ from, are missing from, or are extra to the rendered output."""
    expected = {f"{r.variant.key}/{name}": text for r in rendered for name, text in r.files.items()}
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
    """Replace out_dir with exactly the rendered files, all or nothing (one writer at a time)."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(out_dir.with_name(f".{out_dir.name}.lock")), host.built_aside(out_dir) as staging:
        for r in rendered:
            for name, text in r.files.items():
                path = staging / r.variant.key / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8", newline="\n")
