"""matrix.yaml and recipes/<name>/recipe.yaml: typed models and strict validation.

Every problem is reported at its file:line:col with a hint, all of them at once, before anything is written.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Generic, TypeVar

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from . import yamlsource
from .components import ComponentTable, component_table, platforms, toolkit_table
from .errors import InputError, Problem
from .yamlsource import Loc, SourceMap

_VERSION_RE = re.compile(r"^\d+\.\d+$")
# PEP 508 names, as packaging validates them.
_DIST_NAME_RE = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_HEX_RE = re.compile(r"^[0-9a-f]+$")


def _version_text(value: object) -> object:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise PydanticCustomError("version_number", "expected a version string")
    if isinstance(value, str) and not _VERSION_RE.match(value):
        raise PydanticCustomError(
            "version_format", 'expected a version like "12.9" (major.minor), got {value!r}', {"value": value}
        )
    return value


VersionText = Annotated[str, BeforeValidator(_version_text)]


class Strict(BaseModel):
    """Unknown keys are errors (with a did-you-mean); numbers are never silently taken for text."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            allowed = sorted(f.alias or name for name, f in cls.model_fields.items())
            unknown = [k for k in data if k not in allowed]
            if unknown:
                raise PydanticCustomError("unknown_keys", "unknown keys {keys}", {"keys": unknown, "allowed": allowed})
        return data


# ---------------------------------------------------------------------------------------------- matrix.yaml


class PlatformSettings(Strict):
    runner: str = Field(min_length=1)  # the CI runner that builds
    smoke_runner: str | None = Field(default=None, min_length=1)  # a clean runner of another image that smokes
    image: str | None = Field(default=None, min_length=1)


class CudaEntry(Strict):
    major: int = Field(ge=1)
    toolkit: VersionText
    platforms: dict[str, PlatformSettings]
    not_built: dict[str, str] = {}  # platform -> the reason it is deliberately not built


class Exclusion(Strict):
    python: VersionText | None = None
    cuda: int | None = None
    platform: str | None = None

    def matches(self, python: str, cuda: int, platform: str) -> bool:
        return (
            (self.python is None or self.python == python)
            and (self.cuda is None or self.cuda == cuda)
            and (self.platform is None or self.platform == platform)
        )


class Matrix(Strict):
    python: list[VersionText]
    cuda: list[CudaEntry]
    exclude: list[Exclusion] = []


# ---------------------------------------------------------------------------------------------- recipe.yaml


class Source(Strict):
    path: str | None = None
    sdist: str | None = None
    sha256: str | None = None
    git: str | None = None
    rev: str | None = None


class Smoke(Strict):
    # Python statements that must run with no CUDA library installed (tier 1) and with them (tier 2).
    gpu_free: list[str] = []
    # Statements that raise ImportError naming the pip fix while optional components are absent (tier 1), and
    # run once they are installed (tier 2).
    needs_optional: list[str] = []
    # Commands that must succeed once the CUDA wheels are installed (tier 2).
    with_cuda: list[str] = []


class GpuCheck(Strict):
    name: str = Field(min_length=1)
    run: str = Field(min_length=1)  # Python run with the package installed on a GPU machine; may call skip(reason)


class Recipe(Strict):
    name: str
    version: str
    summary: str = ""
    import_name: str = Field(alias="import")
    source: Source
    cuda: list[int] | None = None  # CUDA majors this recipe supports; all of the matrix's when absent
    components: list[str]
    optional: list[str] = []
    modules: dict[str, list[str]]
    dependencies: list[str] = []
    # The variant's [build-system]; it replaces the source's own, so name what the build needs (e.g. Cython).
    build_requires: list[str] = ["setuptools>=77", "wheel"]
    build_backend: str = "setuptools.build_meta"
    size_limit_mb: int = Field(default=100, ge=1)
    # GPU architectures (sm_XY) to compile device code for, per CUDA major; data/toolkits.yaml has the defaults
    cuda_archs: dict[int, list[int]] = {}
    # let nvcc use a host compiler newer than its release accepts (-allow-unsupported-compiler); the report says so
    allow_unsupported_compiler: bool = False
    smoke: Smoke = Smoke()
    gpu_checks: list[GpuCheck] = []


# ---------------------------------------------------------------------------------------------- loading


T = TypeVar("T", bound="Strict")


@dataclass(frozen=True)
class Loaded(Generic[T]):
    value: T
    source: SourceMap


def _problems_from(error: ValidationError, source: SourceMap) -> list[Problem]:
    problems = []
    for err in error.errors():
        loc: Loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        kind = err["type"]
        ctx = err.get("ctx") or {}
        if kind == "unknown_keys":
            for key in ctx["keys"]:
                close = difflib.get_close_matches(str(key), ctx["allowed"], n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"expected one of: {', '.join(ctx['allowed'])}"
                problems.append(source.problem((*loc, key), f"unknown key {key!r} — {hint}", key=True))
            continue
        if kind == "version_number":
            text = source.numbers.get(loc, str(err["input"]))
            message = f'expected a version string like "12.9", got the number {text} — quote it: "{text}"'
        elif kind == "missing":
            parent, key = loc[:-1], loc[-1]
            problems.append(source.problem(parent, f"missing required key {key!r} — add it"))
            continue
        elif kind == "string_type" and loc in source.numbers:
            text = source.numbers[loc]
            message = f'expected text, got the number {text} — quote it: "{text}"'
        elif kind in ("dict_type", "model_type"):
            message = f"expected a mapping (key: value), got {_shown(err['input'])} — write it as a mapping"
        elif kind == "list_type":
            message = f"expected a list, got {_shown(err['input'])} — write it as [a, b] or one '- item' per line"
        elif kind == "int_type":
            message = f"expected a whole number, got {_shown(err['input'])} — write e.g. 12"
        elif kind == "string_type":
            message = f"expected text, got {_shown(err['input'])} — write a quoted string"
        else:
            message = f"{err['msg'][0].lower()}{err['msg'][1:]} — fix this value"
        problems.append(source.problem(loc, message))
    return problems


def _shown(value: object) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    return repr(value)


def _validate(model: type[T], path: Path, display: str) -> Loaded[T]:
    data, source = yamlsource.load(path, display)
    if data is None:
        raise InputError([Problem(display, 1, 1, "the file is empty — see docs/ for its format")])
    try:
        return Loaded(model.model_validate(data), source)
    except ValidationError as exc:
        raise InputError(_problems_from(exc, source)) from None


def load_matrix(path: Path, root: Path) -> Loaded[Matrix]:
    loaded = _validate(Matrix, path, _display(path, root))
    problems = check_matrix(loaded.value, loaded.source, component_table())
    if problems:
        raise InputError(problems)
    return loaded


def load_recipe(path: Path, root: Path, matrix: Matrix) -> Loaded[Recipe]:
    loaded = _validate(Recipe, path, _display(path, root))
    problems = check_recipe(loaded.value, loaded.source, matrix, component_table())
    if problems:
        raise InputError(problems)
    return loaded


def _display(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------------------------- semantics


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f"did you mean {close[0]!r}?" if close else f"expected one of: {', '.join(choices)}"


def check_matrix(matrix: Matrix, src: SourceMap, table: ComponentTable) -> list[Problem]:
    problems: list[Problem] = []
    known_platforms = sorted(platforms())
    known_majors = sorted({m for c in table.components.values() for m in c.majors})
    if not matrix.python:
        problems.append(src.problem(("python",), 'no Python versions — list at least one, e.g. ["3.12"]'))
    if not matrix.cuda:
        problems.append(src.problem(("cuda",), "no CUDA majors — add at least one entry such as {major: 12, ...}"))
    for i, version in enumerate(matrix.python):
        if version in matrix.python[:i]:
            problems.append(src.problem(("python", i), f"Python {version} is listed twice — keep one"))
    seen_majors: list[int] = []
    for i, entry in enumerate(matrix.cuda):
        at: Loc = ("cuda", i)
        if entry.major in seen_majors:
            problems.append(src.problem((*at, "major"), f"CUDA {entry.major} has two entries — merge them"))
        seen_majors.append(entry.major)
        if entry.major not in known_majors:
            problems.append(
                src.problem(
                    (*at, "major"),
                    f"CUDA {entry.major} is not in the component table (known: {', '.join(map(str, known_majors))})"
                    " — use a known major or add it to the table",
                )
            )
            continue
        if not entry.toolkit.startswith(f"{entry.major}."):
            problems.append(
                src.problem(
                    (*at, "toolkit"),
                    f'toolkit {entry.toolkit} is not a CUDA {entry.major} release — write "{entry.major}.x"',
                )
            )
        else:
            known = sorted(v for v in toolkit_table().releases if v.startswith(f"{entry.major}."))
            if entry.toolkit not in known:
                problems.append(
                    src.problem(
                        (*at, "toolkit"),
                        f"toolkit {entry.toolkit} is not a release the factory knows (known for CUDA "
                        f"{entry.major}: {', '.join(known)}) — use one of those, or add the release to "
                        "data/toolkits.yaml and its component versions to data/cuda_components.yaml",
                    )
                )
        if not entry.platforms:
            problems.append(src.problem((*at, "platforms"), "no platforms — name at least one, e.g. linux-x86_64"))
        for name, settings in entry.platforms.items():
            if name not in known_platforms:
                problems.append(
                    src.problem(
                        (*at, "platforms", name),
                        f"unknown platform {name!r} — {_did_you_mean(name, known_platforms)}",
                        key=True,
                    )
                )
                continue
            is_linux = platforms()[name].os == "linux"
            if is_linux and settings.image is None:
                problems.append(
                    src.problem(
                        (*at, "platforms", name),
                        "a Linux platform needs an image — add "
                        "image: quay.io/pypa/manylinux_2_28_x86_64 (or the aarch64 one)",
                    )
                )
            if not is_linux and settings.image is not None:
                problems.append(
                    src.problem(
                        (*at, "platforms", name, "image"),
                        "Windows builds run on the runner, not in an image — remove image",
                    )
                )
        for name in entry.not_built:
            if name not in known_platforms:
                problems.append(
                    src.problem(
                        (*at, "not_built", name),
                        f"unknown platform {name!r} — {_did_you_mean(name, known_platforms)}",
                        key=True,
                    )
                )
            elif name in entry.platforms:
                problems.append(
                    src.problem(
                        (*at, "not_built", name),
                        f"{name} is both built and not built for CUDA {entry.major} — remove it from one of the two",
                        key=True,
                    )
                )
    for i, rule in enumerate(matrix.exclude):
        at = ("exclude", i)
        if rule.python is None and rule.cuda is None and rule.platform is None:
            problems.append(
                src.problem(at, "an empty exclusion would exclude everything — name python, cuda or platform")
            )
        if rule.python is not None and rule.python not in matrix.python:
            problems.append(
                src.problem(
                    (*at, "python"),
                    f"Python {rule.python} is not in the matrix — remove this exclusion or fix the version",
                )
            )
        if rule.cuda is not None and rule.cuda not in seen_majors:
            problems.append(
                src.problem(
                    (*at, "cuda"), f"CUDA {rule.cuda} is not in the matrix — remove this exclusion or fix the major"
                )
            )
        if rule.platform is not None and rule.platform not in known_platforms:
            problems.append(
                src.problem(
                    (*at, "platform"),
                    f"unknown platform {rule.platform!r} — {_did_you_mean(rule.platform, known_platforms)}",
                )
            )
    if not problems and not any(
        not any(rule.matches(py, entry.major, plat) for rule in matrix.exclude)
        for py in matrix.python
        for entry in matrix.cuda
        for plat in entry.platforms
    ):
        problems.append(src.problem(("exclude",), "the exclusions leave nothing to build — remove some"))
    return problems


def check_recipe(recipe: Recipe, src: SourceMap, matrix: Matrix, table: ComponentTable) -> list[Problem]:
    problems: list[Problem] = []
    runtime_names = sorted(n for n, c in table.components.items() if c.role == "runtime")

    if not _DIST_NAME_RE.match(recipe.name):
        problems.append(
            src.problem(
                ("name",),
                f"{recipe.name!r} is not a valid distribution name — use letters, "
                "digits, '-', '_' and '.', starting and ending with a letter or digit",
            )
        )
    elif re.search(r"[-_.]cuda\d+x?$", recipe.name, re.IGNORECASE):
        problems.append(
            src.problem(
                ("name",),
                f"{recipe.name!r} already carries a CUDA suffix — give the base "
                "name; the factory appends -cuda<major>x",
            )
        )
    if not _MODULE_RE.match(recipe.import_name):
        problems.append(src.problem(("import",), f"{recipe.import_name!r} is not a Python module name"))

    problems.extend(_check_source(recipe.source, src))
    for i, check in enumerate(recipe.gpu_checks):
        try:
            compile(check.run, f"gpu_checks[{i}]", "exec")
        except SyntaxError as exc:
            problems.append(
                src.problem(
                    ("gpu_checks", i, "run"),
                    f"not valid Python: {exc.msg} (line {exc.lineno} of the check) — fix the code",
                )
            )

    try:
        Version(recipe.version)
    except InvalidVersion:
        problems.append(src.problem(("version",), f'{recipe.version!r} is not a valid version — write e.g. "1.2.0"'))
    for key in ("dependencies", "build_requires"):
        for i, dep in enumerate(getattr(recipe, key)):
            try:
                Requirement(dep)
            except InvalidRequirement as exc:
                problems.append(src.problem((key, i), f'not a valid requirement: {exc} — write e.g. "numpy>=1.24"'))

    majors = {entry.major: entry for entry in matrix.cuda}
    if recipe.cuda is not None:
        for i, major in enumerate(recipe.cuda):
            if major not in majors:
                problems.append(
                    src.problem(
                        ("cuda", i),
                        f"CUDA {major} is not in the matrix (it has "
                        f"{', '.join(map(str, majors))}) — remove it or add it to matrix.yaml",
                    )
                )
    wanted = [m for m in (recipe.cuda if recipe.cuda is not None else list(majors)) if m in majors]
    problems.extend(_check_archs(recipe, src, {m: majors[m].toolkit for m in wanted}))

    declared: list[str] = []
    for group in ("components", "optional"):
        for i, name in enumerate(getattr(recipe, group)):
            at: Loc = (group, i)
            if name in declared:
                problems.append(src.problem(at, f"component {name!r} is declared twice — keep one"))
                continue
            declared.append(name)
            component = table.components.get(name)
            if component is None:
                problems.append(
                    src.problem(at, f"unknown CUDA component {name!r} — {_did_you_mean(name, table.names())}")
                )
                continue
            for major in wanted:
                entry = component.majors.get(major)
                if entry is None:
                    problems.append(
                        src.problem(
                            at,
                            f"{name} does not exist for CUDA {major} — limit the recipe "
                            f"with cuda: [{', '.join(str(m) for m in wanted if m != major)}] "
                            "or drop the component",
                        )
                    )
                    continue
                if group == "optional":
                    continue
                for platform in majors[major].platforms:
                    os = platforms()[platform].os if platform in platforms() else None
                    if os is not None and entry.layout(os) is None:
                        problems.append(
                            src.problem(
                                at,
                                f"{name} has no {platform} wheel for CUDA {major} — make it "
                                f"optional, or list {platform} under not_built in matrix.yaml",
                            )
                        )
            if component.role == "build" and group == "optional":
                problems.append(
                    src.problem(
                        at,
                        f"{name} only provides headers or tools; it cannot be optional at "
                        "run time — move it to components",
                    )
                )

    if not recipe.modules:
        problems.append(
            src.problem(
                ("modules",), "no modules — list each extension module and the components it may link ([] for none)"
            )
        )
    for module, allowed in recipe.modules.items():
        if not _MODULE_RE.match(module):
            problems.append(src.problem(("modules", module), f"{module!r} is not a dotted module name", key=True))
        elif module != recipe.import_name and not module.startswith(recipe.import_name + "."):
            problems.append(
                src.problem(
                    ("modules", module),
                    f"{module!r} is outside the package {recipe.import_name!r} — name it {recipe.import_name}.<...>",
                    key=True,
                )
            )
        for i, name in enumerate(allowed):
            if name == "driver":  # may link libcuda.so.1 / nvcuda.dll eagerly; import then needs a GPU driver
                continue
            if name not in declared:
                hint = (
                    "add it to components or optional"
                    if name in runtime_names
                    else _did_you_mean(name, declared or runtime_names)
                )
                problems.append(
                    src.problem(
                        ("modules", module, i),
                        f"{module} may link {name!r}, which the recipe does not declare — {hint}",
                    )
                )
            elif table.components[name].role == "build":
                problems.append(src.problem(("modules", module, i), f"{name} has no library to link — remove it"))
    return problems


def _check_archs(recipe: Recipe, src: SourceMap, toolkits: dict[int, str]) -> list[Problem]:
    problems = []
    for major, archs in recipe.cuda_archs.items():
        if major not in toolkits:
            problems.append(
                src.problem(
                    ("cuda_archs", major),
                    f"CUDA {major} is not built for this recipe (it builds "
                    f"{', '.join(map(str, toolkits))}) — remove it",
                    key=True,
                )
            )
            continue
        if not archs:
            problems.append(src.problem(("cuda_archs", major), "no architectures — list some, e.g. [80, 90]"))
        release = toolkit_table().releases.get(toolkits[major])
        for i, arch in enumerate(archs):
            if arch in archs[:i]:
                problems.append(src.problem(("cuda_archs", major, i), f"sm_{arch} is listed twice — keep one"))
            elif release and not release.archs[0] <= arch <= release.archs[1]:
                low, high = release.archs
                problems.append(
                    src.problem(
                        ("cuda_archs", major, i),
                        f"nvcc {toolkits[major]} cannot compile for sm_{arch} (it covers sm_{low} to sm_{high}) — "
                        "drop it or change the matrix's toolkit",
                    )
                )
    return problems


def _check_source(source: Source, src: SourceMap) -> list[Problem]:
    given = [k for k in ("path", "sdist", "git") if getattr(source, k) is not None]
    at: Loc = ("source",)
    if len(given) != 1:
        return [
            src.problem(
                at,
                "give exactly one of path, sdist or git — e.g. {path: source}"
                if not given
                else f"give only one of {', '.join(given)}",
            )
        ]
    problems = []
    if source.path is not None:
        pure = PurePosixPath(source.path.replace("\\", "/"))
        if pure.is_absolute() or re.match(r"^[A-Za-z]:", source.path):
            problems.append(
                src.problem((*at, "path"), f"{source.path!r} is absolute — give a path relative to the recipe's folder")
            )
        elif ".." in pure.parts:
            problems.append(
                src.problem((*at, "path"), f"{source.path!r} leaves the recipe's folder — keep the source inside it")
            )
        for key in ("sha256", "rev"):
            if getattr(source, key) is not None:
                problems.append(
                    src.problem(
                        (*at, key),
                        f"{key} belongs to {'sdist' if key == 'sha256' else 'git'} sources — remove it",
                        key=True,
                    )
                )
    elif source.sdist is not None:
        try:
            req = Requirement(source.sdist)
            pinned = [s for s in req.specifier if s.operator == "=="]
            if len(pinned) != 1 or len(req.specifier) != 1:
                raise InvalidSpecifier
        except (InvalidRequirement, InvalidSpecifier):
            problems.append(src.problem((*at, "sdist"), f'{source.sdist!r} is not pinned — write "name==1.2.3"'))
        problems += _hex_pin(
            source, "sha256", 64, "an sdist source needs sha256: the 64 lowercase hex digits of the archive", src
        )
        if source.rev is not None:
            problems.append(src.problem((*at, "rev"), "rev belongs to git sources — remove it", key=True))
    else:
        assert source.git is not None
        if not re.match(r"^(https://|ssh://|git@|file://)", source.git):
            problems.append(src.problem((*at, "git"), f"{source.git!r} is not a git URL — use https://…"))
        problems += _hex_pin(
            source, "rev", 40, "a git source needs rev: a full 40-digit commit SHA (tags and branches move)", src
        )
        if source.sha256 is not None:
            problems.append(src.problem((*at, "sha256"), "sha256 belongs to sdist sources — remove it", key=True))
    return problems


def _hex_pin(source: Source, key: str, digits: int, message: str, src: SourceMap) -> list[Problem]:
    """A hash or commit that pins a source: exactly `digits` lowercase hex digits."""
    value = getattr(source, key)
    if value is not None and len(value) == digits and _HEX_RE.match(value):
        return []
    return [src.problem(("source", key) if value else ("source",), message)]


def requires_python(matrix: Matrix) -> SpecifierSet:
    lowest = min(matrix.python, key=lambda v: tuple(int(p) for p in v.split(".")))
    return SpecifierSet(f">={lowest}")
