"""The checks of a recipe that its types cannot say: each field against the matrix, the component table, the
source tree and the other fields; every problem at its place."""

from __future__ import annotations

import fnmatch
import keyword
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, get_args
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidName, canonicalize_name
from packaging.version import InvalidVersion, Version

from ..components import OS, component_table, install_layouts, operating_system, platforms, toolkit_table
from ..errors import InputError, Problem
from ..pytorch.stable_abi import STABLE_ABI_SINCE
from ..untrusted.shown import shown
from .matrix import Matrix
from .recipe import DRIVER, GitSource, PathSource, Recipe, SdistSource, UrlSource
from .references import commit_problem, git_url_problem
from .validation import MISSING_HINTS, Loaded, did_you_mean, display, validate_leniently
from .yamlsource import Loc, SourceMap

# A distribution name becomes folder and file names (build/variants/<name>-cudaNNx/, the wheel's file name).
MAX_NAME_LENGTH = 100


# PEP 517: `module` or `module:object`, each a dotted Python name.
_BACKEND_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)?$", re.ASCII)


# A distribution's name as PEP 508 spells it.
_DISTRIBUTION_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")


_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


_HEX_RE = re.compile(r"^[0-9a-f]+$")


_EXTRA_SOURCE_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$", re.ASCII)


_FILE_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", re.ASCII)


_PACKAGE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_MODULE_PATTERN_RE = re.compile(r"^[A-Za-z0-9_*?\[\]!]+(\.[A-Za-z0-9_*?\[\]!]+)*$")


# What the build environment gives every recipe: a recipe may refer to these, not set them.
RESERVED_ENVIRONMENT = frozenset({"CUDA_HOME", "CUDA_PATH", "CUDAToolkit_ROOT", "CUDACXX", "CUDAHOSTCXX"})


# Names Windows keeps for devices: no file or folder may have one, whatever its extension or case.
WINDOWS_DEVICE_NAMES = frozenset(
    {"con", "prn", "aux", "nul", *(f"{port}{n}" for port in ("com", "lpt") for n in [*"123456789", "¹", "²", "³"])}
)


def _is_import_name(name: str) -> bool:
    return bool(_MODULE_RE.match(name)) and not any(keyword.iskeyword(part) for part in name.split("."))


# What a required field stands in for while it failed validation: only checks that do not read it run then.
_STAND_INS: dict[str, object] = {
    "name": "recipe",
    "version": "0",
    "import": "recipe",
    "source": {"path": "."},
    "components": [],
    "modules": {},
}


def load_recipe(path: Path, root: Path, matrix: Matrix) -> Loaded[Recipe]:
    """The recipe at `path`, or InputError with every problem in it: its YAML's, its types', and those of every
    check whose fields validated."""
    checked = validate_leniently(Recipe, path, display(path, root), _STAND_INS)
    problems = list(checked.problems)
    if checked.value is not None:
        problems += check_recipe(checked.value, checked.source, matrix, path.parent, skip=checked.failed)
    if problems or checked.value is None:
        raise InputError(problems)
    return Loaded(checked.value, checked.source)


def check_recipe(
    recipe: Recipe, src: SourceMap, matrix: Matrix, recipe_dir: Path, skip: frozenset[str] = frozenset()
) -> list[Problem]:
    """Every check of a validated recipe whose fields all validated (`skip`: those that did not)."""
    majors = {entry.major: entry for entry in matrix.cuda}
    wanted = [m for m in (recipe.cuda if recipe.cuda is not None else list(majors)) if m in majors]
    built_platforms = {m: [p for p in majors[m].platforms if recipe.builds_on(p)] for m in wanted}
    # Where it builds for an OS that does not tell names apart by case (Windows: its variables, its file names).
    windows = any(
        p in platforms() and not operating_system(platforms()[p].os).case_sensitive_names
        for ps in built_platforms.values()
        for p in ps
    )
    checks: list[tuple[set[str], Callable[[], list[Problem]]]] = [
        ({"name"}, lambda: _check_name(recipe, src, recipe_dir)),
        ({"import", "version", "summary", "gpu_checks", "smoke"}, lambda: _check_identity(recipe, src)),
        ({"source"}, lambda: _check_source(recipe.source, src, recipe_dir)),
        ({"extra_sources"}, lambda: _check_extra_sources(recipe, src, recipe_dir)),
        ({"version", "source"}, lambda: _check_version_pin(recipe, src)),
        ({"dependencies", "build_requires", "build_backend"}, lambda: _check_requirements(recipe, src)),
        ({"cuda"}, lambda: _check_majors(recipe, src, majors)),
        ({"cuda", "torch"}, lambda: _check_torch(recipe, src, {m: majors[m] for m in wanted})),
        (
            {"cuda", "torch", "torch_abi", "torch_target"},
            lambda: _check_torch_abi(recipe, src, {m: majors[m] for m in wanted}),
        ),
        ({"provided_libraries"}, lambda: _check_provided_libraries(recipe, src)),
        ({"platforms"}, lambda: _check_platforms(recipe, src)),
        ({"cuda", "platforms", "torch"}, lambda: _check_cells(recipe, src, matrix, majors)),
        ({"cuda", "cuda_archs"}, lambda: _check_archs(recipe, src, {m: majors[m].toolkit for m in wanted})),
        (
            {"cuda", "cuda_archs", "device_code", "device_code_archs"},
            lambda: _check_device_code_archs(recipe, src, {m: (majors[m].toolkit, built_platforms[m]) for m in wanted}),
        ),
        ({"cuda", "platforms", "components", "optional"}, lambda: _check_components(recipe, src, built_platforms)),
        ({"import", "packages"}, lambda: _check_packages(recipe, src)),
        (
            {
                "import",
                "packages",
                "modules",
                "device_code",
                "device_code_archs",
                "shared_libraries",
                "components",
                "optional",
                "wheel_abi",
            },
            lambda: _check_modules(recipe, src),
        ),
        ({"shared_libraries", "components", "optional"}, lambda: _check_shared_libraries(recipe, src)),
        ({"modules", "shared_libraries", "device_code", "device_code_archs"}, lambda: _check_globs(recipe, src)),
        ({"smoke", "optional"}, lambda: _check_optional_statements(recipe, src)),
        ({"smoke"}, lambda: _check_cuda_import_error(recipe, src)),
        ({"cuda", "platforms", "dependencies", "environment"}, lambda: _check_per_major(recipe, src, wanted, windows)),
    ]
    if windows:
        fields = {"name", "import", "packages", "modules", "device_code", "source"}
        checks.append((fields, lambda: _check_windows_names(recipe, src)))
    return [problem for fields, check in checks if not fields & skip for problem in check()]


def _check_opens_cuda(recipe: Recipe, src: SourceMap) -> list[Problem]:
    """What the package opens itself is one of its components (whose wheel it then requires) or the driver,
    named once."""
    declared = [*recipe.components, *recipe.optional, DRIVER]
    problems = []
    for i, name in enumerate(recipe.opens_cuda):
        if name in recipe.opens_cuda[:i]:
            problems.append(src.problem(("opens_cuda", i), f"{shown(name)} is listed twice — keep one"))
        elif name not in declared:
            known = component_table().names()
            hint = (
                "add it to components (or optional), whose wheel the package then requires"
                if name in known
                else did_you_mean(name, declared)
            )
            message = f"{shown(name, quoted=True)} is none of the recipe's components, nor driver — {hint}"
            problems.append(src.problem(("opens_cuda", i), message))
    return problems


def _check_majors(recipe: Recipe, src: SourceMap, majors: dict[int, Any]) -> list[Problem]:
    if recipe.cuda is not None and not recipe.cuda:
        return [src.problem(("cuda",), f"no CUDA majors — name some of {sorted(majors)}, or leave cuda out for all")]
    problems = []
    for i, major in enumerate(recipe.cuda or []):
        if major not in majors:
            has = ", ".join(map(str, majors))
            message = f"CUDA {major} is not in the matrix (it has {has}) — remove it or add it to matrix.yaml"
            problems.append(src.problem(("cuda", i), message))
        elif major in recipe.cuda[:i]:  # type: ignore[index]
            problems.append(src.problem(("cuda", i), f"CUDA {major} is listed twice — keep one"))
    return problems


def _check_torch(recipe: Recipe, src: SourceMap, built: dict[int, Any]) -> list[Problem]:
    """A recipe built against torch that names its majors needs a torch in each of their matrix records (one that
    names none is built for the majors that have one: _check_cells says when none has)."""
    if not recipe.torch or recipe.cuda is None:
        return []
    without = [major for major, entry in built.items() if not entry.torch]
    if not without:
        return []
    names = ", ".join(f"CUDA {m}" for m in without)
    keep = [m for m in built if m not in without]
    limit = f", or limit the recipe to cuda: {keep}" if keep else ""
    message = (
        f"the build needs torch, but matrix.yaml names no torch for {names} — add torch: [{{release, cuda}}] to "
        f"that record{limit}"
    )
    return [src.problem(("torch",), message)]


def _check_torch_abi(recipe: Recipe, src: SourceMap, built: dict[int, Any]) -> list[Problem]:
    """A stable-ABI build is a build against torch that names the oldest torch it runs on: one the stable ABI
    exists in (STABLE_ABI_SINCE), and no newer than the newest torch of each major's train (the build compiles
    against the oldest from the target on, whose headers must know it)."""
    if recipe.torch_abi == "release":
        if recipe.torch_target is None:
            return []
        message = "only a stable-ABI build runs on a torch other than the one it is built with — say torch_abi: stable"
        return [src.problem(("torch_target",), f"{message}, or remove torch_target")]
    if not recipe.torch:
        return [src.problem(("torch_abi",), "torch_abi: stable is for a build against torch — add torch: true")]
    if recipe.torch_target is None:
        return [src.problem(("torch_abi",), 'name the oldest torch it runs on — add torch_target: e.g. "2.11"')]
    target = Version(recipe.torch_target)
    if target < Version(STABLE_ABI_SINCE):
        message = f"torch {recipe.torch_target} has no stable ABI (it came in {STABLE_ABI_SINCE}) — target a later one"
        return [src.problem(("torch_target",), message)]
    newest = {m: e.torch[0].release for m, e in built.items() if e.torch}
    newer = [f"CUDA {m}'s {release}" for m, release in newest.items() if Version(release) < target]
    if newer:
        message = (
            f"torch {recipe.torch_target} is newer than every torch the build may compile against (the newest: "
            f"{', '.join(newer)}) — target that release or an older one, or add a newer one to matrix.yaml's train"
        )
        return [src.problem(("torch_target",), message)]
    return []


def _check_provided_libraries(recipe: Recipe, src: SourceMap) -> list[Problem]:
    """Each provider a distribution name; its folder inside site-packages; its libraries file names that are not
    CUDA's (those come from NVIDIA's wheels, as components)."""
    table = component_table()
    majors = sorted({m for c in table.components.values() for m in c.majors})
    cuda = [p for major in majors for os in get_args(OS) for p in table.all_libraries(major, os)]
    problems = []
    for name, provided in recipe.provided_libraries.items():
        at: Loc = ("provided_libraries", name)
        problems += _not_a_distribution(name, at, src, "write the name pip installs, e.g. torch")
        folder = PurePosixPath(provided.dir)
        if "\\" in provided.dir or folder.is_absolute() or ".." in folder.parts or provided.dir.startswith("~"):
            message = f"{shown(provided.dir, quoted=True)} leaves site-packages — name a folder in it, e.g. torch/lib"
            problems.append(src.problem((*at, "dir"), message))
        for i, pattern in enumerate(provided.libraries):
            if not pattern or "/" in pattern or "\\" in pattern:
                message = f"{shown(pattern, quoted=True)}: give a file name pattern, no folders (libc10.so, c10.dll)"
                problems.append(src.problem((*at, "libraries", i), message))
            elif _overlaps(pattern, cuda):
                message = (
                    f"{shown(pattern, quoted=True)} names a CUDA library — it comes from NVIDIA's wheels: declare its "
                    "component instead"
                )
                problems.append(src.problem((*at, "libraries", i), message))
    return problems


def _check_cells(recipe: Recipe, src: SourceMap, matrix: Matrix, majors: dict[int, Any]) -> list[Problem]:
    """A recipe must build something: of the CUDA major × platform pairs it asks for, one at least that the
    matrix builds for some Python. When none is, every pair is named with the reason it is out."""
    reasons: list[str] = []
    for major in recipe.cuda if recipe.cuda is not None else list(majors):
        entry = majors.get(major)
        if entry is None:
            continue  # reported by _check_majors
        if recipe.torch and not entry.torch:
            reasons.append(f"CUDA {major}: matrix.yaml names no torch for it")
            continue
        asked = recipe.platforms if recipe.platforms is not None else list(entry.platforms)
        for platform in asked:
            if platform in entry.not_built:
                reasons.append(f"CUDA {major} × {platform}: not built ({entry.not_built[platform]})")
            elif platform not in entry.platforms:
                reasons.append(f"CUDA {major} × {platform}: the matrix does not build it")
            elif all(any(rule.matches(py, major, platform) for rule in matrix.exclude) for py in matrix.python):
                reasons.append(f"CUDA {major} × {platform}: excluded for every Python")
            else:
                return []
    if not reasons:
        return []  # nothing asked that the matrix has: _check_majors and _check_platforms say so
    at: Loc = ("cuda",) if recipe.cuda is not None else ("platforms",) if recipe.platforms is not None else ("name",)
    return [src.problem(at, f"nothing would be built — {'; '.join(reasons)}; ask for a pair the matrix builds")]


def _check_platforms(recipe: Recipe, src: SourceMap) -> list[Problem]:
    """Known platforms, once each (whether the matrix builds any of them is _check_cells')."""
    if recipe.platforms is None:
        return []
    if not recipe.platforms:
        return [src.problem(("platforms",), "no platforms — name at least one, e.g. [linux-x86_64]")]
    problems = []
    for i, name in enumerate(recipe.platforms):
        if name not in platforms():
            problems.append(
                src.problem(("platforms", i), f"unknown platform {name!r} — {did_you_mean(name, sorted(platforms()))}")
            )
        elif name in recipe.platforms[:i]:
            problems.append(src.problem(("platforms", i), f"{name} is listed twice — keep one"))
    return problems


def _check_name(recipe: Recipe, src: SourceMap, recipe_dir: Path) -> list[Problem]:
    """A distribution name by packaging's own rules, of a sane length, that names its folder (which `--recipe`
    and the plan's jobs use)."""
    name = recipe.name
    try:
        canonicalize_name(name, validate=True)
    except InvalidName:
        message = (
            f"{name!r} is not a valid distribution name — use ASCII letters, digits, '-', '_' and '.', starting and "
            "ending with a letter or digit"
        )
        return [src.problem(("name",), message)]
    if len(name) > MAX_NAME_LENGTH:
        return [src.problem(("name",), f"{len(name)} characters, over {MAX_NAME_LENGTH} — give a shorter name")]
    if re.search(r"[-_.]cuda\d+x?$", name, re.IGNORECASE):
        message = f"{name!r} already carries a CUDA suffix — give the base name; the factory appends -cuda<major>x"
        return [src.problem(("name",), message)]
    if recipe_dir.name != name:
        message = (
            f"the recipe is named {name!r} but its folder is recipes/{recipe_dir.name}/ — rename the folder to "
            f"recipes/{name}/ (the plan's --recipe names the folder)"
        )
        return [src.problem(("name",), message)]
    return []


def _check_identity(recipe: Recipe, src: SourceMap) -> list[Problem]:
    problems = []
    if not _is_import_name(recipe.import_name):
        message = f"{recipe.import_name!r} is not a Python module name (dotted identifiers, no keywords)"
        problems.append(src.problem(("import",), f"{message} — write the name `import` takes"))
    try:
        version = Version(recipe.version)
        if version.local is not None:
            message = (
                f"{recipe.version!r} has a local version (+{version.local}), which PyPI refuses — drop it; the "
                "distribution name says the CUDA major"
            )
            problems.append(src.problem(("version",), message))
    except InvalidVersion:
        problems.append(src.problem(("version",), f'{recipe.version!r} is not a valid version — write e.g. "1.2.0"'))
    if any(not c.isprintable() for c in recipe.summary):
        message = (
            "the summary is one line of printable text (Summary metadata) — remove line breaks and control characters"
        )
        problems.append(src.problem(("summary",), message))
    code: list[tuple[Loc, str, str]] = [
        (("gpu_checks", i, "run"), check.run, "check") for i, check in enumerate(recipe.gpu_checks)
    ]
    for group in ("gpu_free", "needs_optional"):
        code += [(("smoke", group, i), text, "statement") for i, text in enumerate(getattr(recipe.smoke, group))]
    for at, text, what in code:
        try:
            compile(text, ".".join(map(str, at)), "exec")
        except (SyntaxError, ValueError) as exc:
            detail = f"{exc.msg} (line {exc.lineno} of the {what})" if isinstance(exc, SyntaxError) else str(exc)
            problems.append(src.problem(at, f"not valid Python: {detail} — fix the code"))
    return problems + _check_layouts(recipe, src)


def _check_layouts(recipe: Recipe, src: SourceMap) -> list[Problem]:
    """Each layout declared unsupported is one the smoke knows, not the plain venv, and has a reason: one line
    its users read in the variant's description."""
    problems = []
    known = list(install_layouts())
    for name, why in recipe.smoke.unsupported_layouts.items():
        at: Loc = ("smoke", "unsupported_layouts", name)
        if name == "venv":
            message = (
                "every package must work in a plain venv, where pip installs it by default — fix the package, or "
                "declare only system-site-packages or target"
            )
            problems.append(src.problem(at, message, key=True))
        elif name not in known:
            problems.append(src.problem(at, f"unknown layout {name!r} — {did_you_mean(name, known[1:])}", key=True))
        if not why.strip() or any(not c.isprintable() for c in why):
            message = "the reason is one line of printable text its users read — say why the package fails there"
            problems.append(src.problem(at, message))
    return problems


def _check_version_pin(recipe: Recipe, src: SourceMap) -> list[Problem]:
    """An sdist's pin and the recipe's version name one release: the audit would refuse the wheel after the
    build otherwise."""
    pinned = _pinned_version(recipe.source.sdist) if isinstance(recipe.source, SdistSource) else None
    try:
        if pinned is None or pinned == Version(recipe.version):
            return []  # no sdist, or a pin that names no one release (reported as such)
    except InvalidVersion:
        return []  # reported as such
    message = f"{recipe.version!r} is not the sdist's version {str(pinned)!r} — give the version the sdist pins"
    return [src.problem(("version",), message)]


def _nvidia_wheels() -> dict[str, tuple[str, int]]:
    """NVIDIA's CUDA distributions (canonical name) -> (component, CUDA major)."""
    wheels: dict[str, tuple[str, int]] = {}
    for name, component in component_table().components.items():
        for major, entry in component.majors.items():
            wheels.setdefault(canonicalize_name(entry.distribution), (name, major))  # cublas before cublasLt
    return wheels


def _check_requirements(recipe: Recipe, src: SourceMap) -> list[Problem]:
    problems = []
    lines: list[tuple[Loc, str, bool]] = [
        (("build_requires", i), dep, False) for i, dep in enumerate(recipe.build_requires)
    ]
    for i, dep in enumerate(recipe.dependencies):
        per_major = dep.items() if isinstance(dep, dict) else [(None, dep)]
        lines += [
            (("dependencies", i) if major is None else ("dependencies", i, major), line, True)
            for major, line in per_major
        ]
    nvidia = _nvidia_wheels()
    build_names: set[str] = set()
    for at, line, published in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            reason = str(exc).splitlines()[0]  # packaging adds the line and a caret below
            message = f'{shown(line, quoted=True)} is not a valid requirement: {reason} — write e.g. "numpy>=1.24"'
            problems.append(src.problem(at, message))
            continue
        if not published:
            build_names.add(canonicalize_name(req.name))
            continue  # build requirements stay in the sdist's [build-system]; PyPI never sees them
        if req.url:
            message = (
                f"{req.name} @ {req.url} is a direct reference, which PyPI refuses in a wheel's metadata — "
                f'require a released version ("{req.name}>=…")'
            )
            problems.append(src.problem(at, message))
        elif canonicalize_name(req.name) in nvidia:
            component, major = nvidia[canonicalize_name(req.name)]
            message = (
                f"{req.name} is NVIDIA's CUDA {major} wheel of the component {component!r} — declare {component} in "
                "components (or optional): each variant then requires its own major's wheel"
            )
            problems.append(src.problem(at, message))
    if not _BACKEND_RE.match(recipe.build_backend):
        message = (
            f"{recipe.build_backend!r} is not a build backend — write module:object, e.g. "
            "setuptools.build_meta:__legacy__"
        )
        problems.append(src.problem(("build_backend",), message))
    elif recipe.build_backend.startswith("setuptools.") and "setuptools" not in build_names:
        message = f'{recipe.build_backend} is setuptools\'s backend; build_requires lacks it — add "setuptools>=77"'
        problems.append(src.problem(("build_requires",), message))
    return problems + _check_dropped(recipe, src)


def _not_a_distribution(name: str, at: Loc, src: SourceMap, hint: str) -> list[Problem]:
    """A key that must be a distribution's name, as PEP 508 spells it."""
    if _DISTRIBUTION_RE.match(name):
        return []
    return [src.problem(at, f"{shown(name, quoted=True)} is not a distribution name — {hint}", key=True)]


def _check_dropped(recipe: Recipe, src: SourceMap) -> list[Problem]:
    """Each dropped requirement a distribution name the recipe does not require itself, with its reason."""
    required = set()
    for dep in recipe.dependencies:
        for line in dep.values() if isinstance(dep, dict) else [dep]:
            try:
                required.add(canonicalize_name(Requirement(line).name))
            except InvalidRequirement:
                continue  # _check_requirements says so
    problems = []
    for name, why in recipe.dropped_requirements.items():
        at: Loc = ("dropped_requirements", name)
        misnamed = _not_a_distribution(name, at, src, "write the name the source requires")
        problems += misnamed
        if not misnamed and canonicalize_name(name) in required:
            message = f"{name} is in the recipe's dependencies too — keep it there, or drop it, not both"
            problems.append(src.problem(at, message, key=True))
        if not why.strip() or any(not c.isprintable() for c in why):
            message = "the reason is one line of printable text — say why the variant's build would not require it"
            problems.append(src.problem(at, message))
    return problems


def _check_packages(recipe: Recipe, src: SourceMap) -> list[Problem]:
    problems = []
    for i, package in enumerate(recipe.packages):
        if not _PACKAGE_RE.match(package):
            problems.append(src.problem(("packages", i), f"{package!r} is not a top-level package name (no dots)"))
        elif not _is_import_name(package):
            problems.append(src.problem(("packages", i), f"{package!r} is a Python keyword — no package has that name"))
    if recipe.packages and recipe.import_name.split(".")[0] not in recipe.packages:
        message = f"packages does not name the import package {recipe.import_name.split('.')[0]!r} — add it"
        problems.append(src.problem(("packages",), message))
    return problems


def _check_pattern(pattern: str, packages: list[str], at: Loc, src: SourceMap) -> list[Problem]:
    """A module name or pattern: dotted, with fnmatch wildcards, inside one of the recipe's packages — or one
    top-level module, named whole (an extension setup.py names without a package: causal-conv1d's
    causal_conv1d_cuda; the audit says so where the wheel has no such module)."""
    if not _MODULE_PATTERN_RE.match(pattern) or "\\" in pattern:
        return [src.problem(at, f"{pattern!r} is not a dotted module name or pattern (e.g. pkg._core.*)", key=True)]
    literal = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
    if literal == pattern and "." not in pattern:
        return []
    inside = any(literal.startswith(p + ".") or pattern == p for p in packages) or any(
        p.startswith(literal) for p in packages
    )
    if not inside:
        where = (
            f"the package {packages[0]!r}" if len(packages) == 1 else f"the packages {', '.join(map(repr, packages))}"
        )
        return [src.problem(at, f"{pattern!r} is outside {where} — name it {packages[0]}.<...>", key=True)]
    return []


def _check_shared_libraries(recipe: Recipe, src: SourceMap) -> list[Problem]:
    problems = []
    for pattern, allowed in recipe.shared_libraries.items():
        if not pattern or "/" in pattern or "\\" in pattern:
            problems.append(
                src.problem(
                    ("shared_libraries", pattern),
                    f"{pattern!r}: give a file name pattern, no folders (libfoo*.so*, foo*.dll)",
                    key=True,
                )
            )
        problems += _check_allowed(recipe, allowed, ("shared_libraries", pattern), pattern, src)
    return problems


def _reserved(name: str, windows: bool) -> str | None:
    """The factory's variable that `name` would set, if any: on Windows, whatever its case."""
    fold = str.upper if windows else str
    match = next((r for r in RESERVED_ENVIRONMENT if fold(r) == fold(name)), None)
    if match is None and fold(name).startswith(fold("WHEELFACTORY_")):
        match = name if not windows else name.upper()
    return match


def _check_per_major(recipe: Recipe, src: SourceMap, built: list[int], windows: bool) -> list[Problem]:
    """Per-major values name only majors the recipe builds; environment names are variable names the factory
    leaves to the recipe (where it builds for Windows, whose variables ignore case, in any case)."""
    problems = []
    unbuilt = f"is not built for this recipe (it builds {', '.join(map(str, built))}) — remove it"
    for i, dep in enumerate(recipe.dependencies):
        for major in dep if isinstance(dep, dict) else ():
            if major not in built:
                problems.append(src.problem(("dependencies", i, major), f"CUDA {major} {unbuilt}", key=True))
    for name, value in recipe.environment.items():
        at: Loc = ("environment", name)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            message = f"{shown(name, quoted=True)} is not an environment variable name — letters, digits and '_'"
            problems.append(src.problem(at, message, key=True))
        elif (reserved := _reserved(name, windows)) is not None:
            also = f" (Windows does not tell {name} from {reserved})" if reserved != name else ""
            message = f"the factory sets {reserved}{also} — use another variable (a value may refer to ${reserved})"
            problems.append(src.problem(at, message, key=True))
        for major in value if isinstance(value, dict) else ():
            if major not in built:
                problems.append(src.problem((*at, major), f"CUDA {major} {unbuilt}", key=True))
        for where, text in value.items() if isinstance(value, dict) else [(None, value)]:
            # A tab is a blank like a space (cibuildwheel passes it through exactly); nothing else unprintable is.
            control = next((c for c in text if not c.isprintable() and c != "\t"), None)
            if control is not None:
                message = (
                    f"the value holds the control character {control!r} — a build variable is one line of "
                    "printable text (spaces and tabs allowed)"
                )
                problems.append(src.problem(at if where is None else (*at, where), message))
    return problems


def _check_components(recipe: Recipe, src: SourceMap, platforms_of: dict[int, Any]) -> list[Problem]:
    """Each declared component exists, once, for every major built; required ones on every platform built."""
    table = component_table()
    problems: list[Problem] = []
    declared: list[str] = []
    for group in ("components", "optional"):
        for i, name in enumerate(getattr(recipe, group)):
            at: Loc = (group, i)
            if name in declared:
                problems.append(src.problem(at, f"component {name!r} is declared twice — keep one"))
                continue
            declared.append(name)
            component = table.components.get(name)
            if component is None and name == DRIVER:
                message = (
                    "the driver is no component (it comes with the GPU, not from pip) — name it in a module's policy"
                )
                problems.append(src.problem(at, message))
                continue
            if component is None:
                problems.append(
                    src.problem(at, f"unknown CUDA component {name!r} — {did_you_mean(name, table.names())}")
                )
                continue
            if component.role == "build" and group == "optional":
                message = (
                    f"{name} only provides headers or tools; it cannot be optional at run time — move it to components"
                )
                problems.append(src.problem(at, message))
            for major, built_platforms in platforms_of.items():
                entry = component.majors.get(major)
                if entry is None:
                    others = ", ".join(str(m) for m in platforms_of if m != major)
                    message = (
                        f"{name} does not exist for CUDA {major} — limit the recipe with cuda: [{others}] "
                        "or drop the component"
                    )
                    problems.append(src.problem(at, message))
                    continue
                without = [
                    platform
                    for platform in (built_platforms if group == "components" else ())
                    if (known := platforms().get(platform)) and entry.layout(known.os, known.cibw_arch) is None
                ]
                if without:
                    message = (
                        f"{name} has no {' or '.join(without)} wheel for CUDA {major} — make it optional, "
                        "or leave those platforms out of the recipe's platforms"
                    )
                    problems.append(src.problem(at, message))
    return problems + _check_opens_cuda(recipe, src)


def unclosed_class(pattern: str) -> int | None:
    """Where a `[` opens a character class that no `]` closes (fnmatch would read it as a plain `[`, which no
    module or file name has), or None."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "[":
            end = i + 1
            end += pattern[end : end + 1] == "!"
            end += pattern[end : end + 1] == "]"  # a `]` first in the class is one of its characters
            close = pattern.find("]", end)
            if close < 0:
                return i
            i = close
        i += 1
    return None


def _check_globs(recipe: Recipe, src: SourceMap) -> list[Problem]:
    """Every pattern a binary is named by is a pattern fnmatch reads as meant."""
    patterns: list[tuple[Loc, str, bool]] = [
        *((("modules", p), p, True) for p in recipe.modules),
        *((("shared_libraries", p), p, True) for p in recipe.shared_libraries),
        *((("device_code_archs", p), p, True) for p in recipe.device_code_archs),
        *((("device_code", i), p, False) for i, p in enumerate(recipe.device_code)),
    ]
    problems = []
    for at, pattern, key in patterns:
        column = unclosed_class(pattern)
        if column is not None:
            message = (
                f"{pattern!r}: the '[' at character {column + 1} opens a set of characters no ']' closes — close it "
                "(pkg._mod[ab]), or drop it: no module or file name holds '['"
            )
            problems.append(src.problem(at, message, key=key))
    return problems


def _check_cuda_import_error(recipe: Recipe, src: SourceMap) -> list[Problem]:
    """The text an import without CUDA fails with is one printable line, and only for a CUDA-eager import."""
    text = recipe.smoke.cuda_import_error
    if not text:
        return []
    if not recipe.smoke.cuda_at_import:
        message = "only a package that opens CUDA when imported fails its import without it — set cuda_at_import"
        return [src.problem(("smoke", "cuda_import_error"), message)]
    if not text.strip() or any(not c.isprintable() for c in text):
        message = "the text its ImportError carries, one line of printable text — copy it from the error"
        return [src.problem(("smoke", "cuda_import_error"), message)]
    return []


def _check_optional_statements(recipe: Recipe, src: SourceMap) -> list[Problem]:
    """needs_optional statements fail while optional components are absent: there must be some."""
    if recipe.smoke.needs_optional and not recipe.optional:
        message = (
            "the recipe declares no optional component, so nothing can be absent for these statements — declare "
            "the components they need in optional, or move the statements to gpu_free"
        )
        return [src.problem(("smoke", "needs_optional"), message)]
    return []


def _check_windows_names(recipe: Recipe, src: SourceMap) -> list[Problem]:
    """No package, module or folder named as a Windows device (aux, con, nul, com1…, with any extension, in any
    case): such a file cannot exist on Windows, so the source cannot even be checked out there."""
    names: list[tuple[Loc, str, bool, str]] = [
        (("name",), recipe.name, False, "the recipe's folder"),
        (("import",), recipe.import_name, False, "a package"),
        *((("packages", i), p, False, "a package") for i, p in enumerate(recipe.packages)),
        *((("modules", m), m, True, "a module") for m in recipe.modules),
        *((("device_code", i), p, False, "a module") for i, p in enumerate(recipe.device_code)),
    ]
    if isinstance(recipe.source, PathSource):
        names.append((("source", "path"), recipe.source.path, False, "a folder"))
    problems = []
    for at, value, key, what in names:
        parts = re.split(r"[./\\]", value)
        reserved = next((p for p in parts if p.split(".")[0].lower() in WINDOWS_DEVICE_NAMES), None)
        if reserved is not None:
            message = (
                f"{reserved!r} ({what}) is a device name on Windows, which no file or folder may have there — "
                "rename it, or leave Windows out of the recipe's platforms"
            )
            problems.append(src.problem(at, message, key=key))
    return problems


def _check_modules(recipe: Recipe, src: SourceMap) -> list[Problem]:
    packages = list(dict.fromkeys([recipe.import_name.split(".")[0], *recipe.packages]))
    problems = []
    if not recipe.modules and recipe.wheel_abi != "none":
        message = (
            "no modules — list each extension module and the components it may link ([] for none); a package "
            "with no extension module says wheel_abi: none"
        )
        problems.append(src.problem(("modules",), message))
    if recipe.modules and recipe.wheel_abi == "none":
        listed = ", ".join(recipe.modules)
        message = (
            f"a py3-none wheel (wheel_abi: none) has no extension module, yet modules lists {listed} — move a "
            "library opened with ctypes to shared_libraries, or say wheel_abi: cpython or abi3"
        )
        problems.append(src.problem(("modules",), message))
    valid_import = _is_import_name(recipe.import_name)  # else "outside the package" would only repeat it
    for module, allowed in recipe.modules.items():
        if valid_import:
            problems += _check_pattern(module, packages, ("modules", module), src)
        problems += _check_allowed(recipe, allowed, ("modules", module), module, src)
    for i, pattern in enumerate(recipe.device_code if valid_import else []):
        if _overlaps(pattern, list(recipe.shared_libraries)):
            continue  # a shared library's file name, not a module
        outside = [
            src.problem(("device_code", i), p.message.split(": ", 1)[-1])
            for p in _check_pattern(pattern, packages, ("device_code", i), src)
        ]
        declared = list(recipe.modules)
        if not outside and not _overlaps(pattern, declared):
            hint = did_you_mean(pattern, declared) if declared else "declare it in modules (or shared_libraries)"
            message = f"{pattern!r} matches no module in modules and no library in shared_libraries — {hint}"
            outside.append(src.problem(("device_code", i), message))
        problems += outside
    # The audit holds every binary with device code to the architectures, so any declared one may be narrowed.
    binaries = [*recipe.modules, *recipe.shared_libraries, *recipe.device_code]
    for pattern in recipe.device_code_archs:
        if not _overlaps(pattern, binaries):
            hint = did_you_mean(pattern, binaries) if binaries else "declare it in shared_libraries"
            message = (
                f"{pattern!r} names no binary of modules, shared_libraries or device_code: it would narrow "
                f"nothing — {hint}"
            )
            problems.append(src.problem(("device_code_archs", pattern), message, key=True))
    return problems


def _overlaps(pattern: str, others: list[str]) -> bool:
    """Whether a pattern and one of `others` (names or patterns) match each other."""
    return any(fnmatch.fnmatchcase(o, pattern) or fnmatch.fnmatchcase(pattern, o) for o in others)


def _check_device_code_archs(recipe: Recipe, src: SourceMap, builds: dict[int, tuple[str, list[str]]]) -> list[Problem]:
    """A narrowed binary keeps at least one of the architectures of each major and platform built (their
    defaults may differ per platform)."""
    problems = []
    for pattern, archs in recipe.device_code_archs.items():
        for major, (release, built_on) in builds.items():
            known = toolkit_table().releases.get(release)
            choices = {tuple(recipe.cuda_archs[major])} if major in recipe.cuda_archs else set()
            if not choices and known is not None:
                choices = {known.default_archs(platform) for platform in built_on}
            # One problem per major: the shortest list it misses says it.
            missed = [c for c in sorted(choices, key=lambda c: (len(c), c)) if not set(archs) & set(c)]
            if missed:
                listed = ", ".join(f"sm_{a}" for a in missed[0])
                message = f"keeps none of CUDA {major}'s architectures ({listed}) — list at least one of them"
                problems.append(src.problem(("device_code_archs", pattern), message))
    return problems


def _check_allowed(recipe: Recipe, allowed: list[str], at: Loc, what: str, src: SourceMap) -> list[Problem]:
    """What a module or library may link: declared components, or the driver."""
    table = component_table()
    declared = [*recipe.components, *recipe.optional]
    runtime_names = sorted(n for n, c in table.components.items() if c.role == "runtime")
    problems = []
    for i, name in enumerate(allowed):
        if name == DRIVER:  # may link libcuda.so.1 / nvcuda.dll eagerly; import then needs a GPU driver
            continue
        if name in recipe.provided_libraries and name not in table.components:
            continue
        if name not in declared:
            hint = (
                "add it to components or optional"
                if name in runtime_names
                else did_you_mean(name, declared or runtime_names)
            )
            problems.append(
                src.problem((*at, i), f"{what} may link {name!r}, which the recipe does not declare — {hint}")
            )
        elif name in table.components and table.components[name].role == "build":
            problems.append(src.problem((*at, i), f"{name} has no library to link — remove it"))
    return problems


def _check_archs(recipe: Recipe, src: SourceMap, toolkits: dict[int, str]) -> list[Problem]:
    problems = []
    for major, archs in recipe.cuda_archs.items():
        if major not in toolkits:
            message = (
                f"CUDA {major} is not built for this recipe (it builds {', '.join(map(str, toolkits))}) — remove it"
            )
            problems.append(src.problem(("cuda_archs", major), message, key=True))
            continue
        if not archs:
            problems.append(src.problem(("cuda_archs", major), "no architectures — list some, e.g. [80, 90]"))
        release = toolkit_table().releases.get(toolkits[major])
        for i, arch in enumerate(archs):
            at: Loc = ("cuda_archs", major, i)
            text = src.number(at) or str(arch)
            if re.match(r"^0[0-7]*[0-7]$|^0o", text):
                message = (
                    f"{text} is read by YAML as the octal number {arch} (sm_{arch}) — write it without the leading 0"
                )
                problems.append(src.problem(at, message))
            elif arch in archs[:i]:
                problems.append(src.problem(at, f"sm_{arch} is listed twice — keep one"))
            elif release and arch not in release.archs:
                listed = ", ".join(f"sm_{a}" for a in release.archs)
                message = (
                    f"nvcc {toolkits[major]} cannot compile for sm_{arch} (it has {listed}) — drop it or change the "
                    "matrix's toolkit"
                )
                problems.append(src.problem(at, message))
    return problems


def _check_source(
    source: PathSource | SdistSource | GitSource | UrlSource, src: SourceMap, recipe_dir: Path, where: Loc = ("source",)
) -> list[Problem]:
    """The checks of the recipe's source, or of one of its extra sources (`where`: its place in the recipe)."""
    if isinstance(source, UrlSource):
        hint = "a url source needs sha256: the 64 lowercase hex digits of the file"
        return _url_problems(source, src, where) + _hex_pin(source.sha256, "sha256", 64, src, where, hint)
    if isinstance(source, PathSource):
        pure = PurePosixPath(source.path.replace("\\", "/"))
        at: Loc = (*where, "path")
        if pure.is_absolute() or re.match(r"^[A-Za-z]:", source.path):
            message = f"{source.path!r} is absolute — give a path relative to the recipe's folder"
            return [src.problem(at, message)]
        if "\\" in source.path:
            message = f"{source.path!r} is written with '\\' — write {str(pure)!r}: '/' is read the same on every OS"
            return [src.problem(at, message)]
        if ".." in pure.parts:
            message = f"{source.path!r} leaves the recipe's folder — keep the source inside it"
            return [src.problem(at, message)]
        folder = recipe_dir / pure
        if not folder.exists():
            return [
                src.problem(at, f"{source.path!r} does not exist in {recipe_dir.name}/ — create it or fix the path")
            ]
        if not folder.is_dir():
            return [src.problem(at, f"{source.path!r} is not a folder — give the folder that holds the source")]
        if not folder.resolve().is_relative_to(recipe_dir.resolve()):
            message = (
                f"{source.path!r} leads outside the recipe's folder (to {folder.resolve()}) through a link — "
                "copy the source in"
            )
            return [src.problem(at, message)]
        return []
    if isinstance(source, SdistSource):
        return _sdist_pin_problems(source.sdist, src, where) + _hex_pin(source.sha256, "sha256", 64, src, where)
    problems = []
    why = git_url_problem(source.git)
    if why:
        problems.append(src.problem((*where, "git"), f"{source.git!r}: {why} — e.g. https://github.com/owner/repo.git"))
    why = commit_problem(source.rev)
    return problems + ([src.problem((*where, "rev"), why)] if why else [])


def _check_extra_sources(recipe: Recipe, src: SourceMap, recipe_dir: Path) -> list[Problem]:
    problems = []
    for name, source in recipe.extra_sources.items():
        if not _EXTRA_SOURCE_NAME_RE.match(name):
            message = (
                f"{shown(name)} is not a name CMake and a folder can both carry — use letters, digits and '_' (and "
                "'-' or '.' after the first), as in FetchContent_Declare(NAME ...)"
            )
            problems.append(src.problem(("extra_sources", name), message))
        problems += _check_source(source, src, recipe_dir, ("extra_sources", name))
    folded = [n.upper() for n in recipe.extra_sources]
    for name in recipe.extra_sources:
        if folded.count(name.upper()) > 1:
            message = f"{shown(name)} differs from another extra source's name only in case — FetchContent folds it"
            problems.append(src.problem(("extra_sources", name), message))
    return problems


def _pinned_version(pin: str) -> Version | None:
    """The one release `name==version` names, exactly: None for anything a resolver would choose among."""
    try:
        req = Requirement(pin)
        specifiers = list(req.specifier)
        exact = len(specifiers) == 1 and specifiers[0].operator == "==" and "*" not in specifiers[0].version
        return Version(specifiers[0].version) if exact and not (req.url or req.extras or req.marker) else None
    except (InvalidRequirement, InvalidVersion):
        return None


def _sdist_pin_problems(pin: str, src: SourceMap, where: Loc = ("source",)) -> list[Problem]:
    if _pinned_version(pin) is None:
        return [src.problem((*where, "sdist"), f'{pin!r} is not pinned to one release — write "name==1.2.3"')]
    return []


def _hex_pin(
    value: str, key: str, digits: int, src: SourceMap, where: Loc = ("source",), hint: str | None = None
) -> list[Problem]:
    """A hash or commit that pins a source: exactly `digits` lowercase hex digits."""
    if len(value) == digits and _HEX_RE.match(value):
        return []
    return [src.problem((*where, key), hint or MISSING_HINTS[key])]


def _url_problems(source: UrlSource, src: SourceMap, where: Loc) -> list[Problem]:
    """An https URL, and a plain file name to save it as."""
    problems = []
    parts = urlsplit(source.url)
    if parts.scheme != "https" or not parts.hostname or parts.username or parts.password:
        message = f"{shown(source.url)} is not an https:// URL with a host — e.g. https://example.org/dep-1.0.tar.gz"
        problems.append(src.problem((*where, "url"), message))
    name = source.saved_as
    if not name or name in (".", "..") or not _FILE_NAME_RE.match(name):
        message = f"{shown(name)} is no plain file name — give `file: name.ext` (letters, digits, '.', '_', '-')"
        problems.append(src.problem((*where, "file" if source.file else "url"), message))
    return problems
