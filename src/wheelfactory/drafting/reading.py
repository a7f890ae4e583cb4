"""What a source says of itself as a Python package, read as text and syntax trees and never run: its name,
version and summary, its import packages, the wheel tag its build asks for, its requirements, and whether
importing it opens a library with ctypes.

Every answer is a Guess that names where it was read, for the draft's comment. The source is untrusted: its files
are read through untrusted/trees.py (regular files inside it, within a size bound, parsed within a depth bound), a
walk within a count and never through a link, and what is quoted from them is escaped where it is shown.
"""

from __future__ import annotations

import ast
import configparser
import dataclasses
import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Generic, TypeVar

from packaging.utils import canonicalize_name

from ..errors import BadBytes
from ..source_metadata import (
    egg_info_requirements,
    pkg_info,
    setup_keywords,
    setup_requirements,
    source_project,
    source_pyproject,
    source_requirements,
)
from ..sources import PACKAGE_ROOTS, package_dir
from ..untrusted.shown import shown
from ..untrusted.trees import Lines, inside, parse_python, parse_toml, read_inside

T = TypeVar("T")
NOT_PACKAGES = frozenset({"test", "tests", "testing", "doc", "docs", "example", "examples", "benchmarks", "bench"})


@dataclass(frozen=True)
class Guess(Generic[T]):
    value: T
    read_from: str  # where in the source it was read: "setup.py:42", "pyproject.toml [tool.scikit-build]"
    decide: str = ""  # what the user must still decide, said in the draft's comment


@dataclass
class SourceTree:
    """A source's files, read through the bounded, link-refusing layer (untrusted/trees.py). A file that cannot
    be read or parsed is named once in `notes` — the draft's first lines and the terminal say it — never skipped
    without a word."""

    root: Path
    notes: list[str] = dataclasses.field(default_factory=list)

    def noted(self, refused: BadBytes) -> None:
        note = f"{refused} — nothing was read from it"
        if note not in self.notes:
            self.notes.append(note)

    def data(self, relative: str | PurePosixPath) -> bytes:
        """The file's bytes; empty where the source has none or it was refused (and noted)."""
        try:
            return read_inside(self.root, relative) or b""
        except BadBytes as refused:
            self.noted(refused)
            return b""

    def text(self, relative: str | PurePosixPath) -> str:
        return self.data(relative).decode("utf-8", errors="replace")

    def python(self, relative: str | PurePosixPath) -> ast.Module | None:
        """The file's syntax tree; None where the source has none or it does not parse (noted)."""
        data = self.data(relative)
        try:
            return parse_python(data, PurePosixPath(relative).as_posix()) if data else None
        except BadBytes as refused:
            self.noted(refused)
            return None

    def toml(self, relative: str) -> dict[str, Any]:
        """The file parsed; empty where the source has none or it is not TOML (noted)."""
        data = self.data(relative)
        try:
            return parse_toml(data, relative) if data else {}
        except BadBytes as refused:
            self.noted(refused)
            return {}


def table(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    """A nested table of a parsed TOML document ({} where any level is missing or not a table)."""
    for key in keys:
        inner = data.get(key)
        data = inner if isinstance(inner, dict) else {}
    return data


def _literal(node: ast.expr | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def identity(tree: Path) -> dict[str, Guess[str]]:
    """name, version and summary: the sdist's PKG-INFO, else pyproject's [project], else setup()'s literals. A
    value that is not one line of printable text is passed over (the recipe's checks would refuse it)."""
    info = pkg_info(tree)
    project = source_project(tree) or {}
    keywords = setup_keywords(tree)
    found: dict[str, Guess[str]] = {}
    for field, key in (("name", "name"), ("version", "version"), ("summary", "description")):
        offered = [
            (info.get(field), "PKG-INFO"),
            (project.get(key), f"pyproject.toml [project] {key}"),
            (_literal(keywords.get(key)), f"setup.py setup({key}=...)"),
        ]
        for value, where in offered:
            if isinstance(value, str) and value.strip() and value != "UNKNOWN" and value.isprintable():
                found[field] = Guess(value, where)
                break
    return found


def _top_level(names: object) -> list[str]:
    if not isinstance(names, list | tuple):
        return []
    return list(dict.fromkeys(str(n).split(".")[0] for n in names if isinstance(n, str) and n))


def _declared_packages(source: SourceTree) -> Guess[list[str]] | None:
    """The import packages the build configuration names: scikit-build-core's or hatchling's wheel.packages (a
    folder each; its last part is the import name), setuptools' packages or py_modules (pyproject, setup.cfg,
    setup()'s literal)."""
    tree = source.root
    data = source_pyproject(tree)
    skbuild = table(data, "tool", "scikit-build", "wheel").get("packages")
    if isinstance(skbuild, list) and skbuild:
        names = [str(p).rstrip("/").rsplit("/", 1)[-1] for p in skbuild]
        return Guess(names, "pyproject.toml [tool.scikit-build] wheel.packages")
    hatch = table(data, "tool", "hatch", "build", "targets", "wheel").get("packages")
    if isinstance(hatch, list) and hatch:
        names = [str(p).rstrip("/").rsplit("/", 1)[-1] for p in hatch]
        return Guess(names, "pyproject.toml [tool.hatch.build.targets.wheel] packages")
    setuptools = table(data, "tool", "setuptools")
    for key in ("packages", "py-modules"):
        if _top_level(setuptools.get(key)):
            return Guess(_top_level(setuptools.get(key)), f"pyproject.toml [tool.setuptools] {key}")
    config = configparser.ConfigParser(interpolation=None)
    try:
        config.read_string(source.text("setup.cfg"))
    except configparser.Error as exc:
        source.noted(BadBytes(f"setup.cfg: not an INI file ({shown(exc.message)})"))
        config = configparser.ConfigParser(interpolation=None)
    for key in ("packages", "py_modules"):
        listed = config.get("options", key, fallback="").split()
        if listed and not listed[0].startswith("find"):
            return Guess(_top_level(listed), f"setup.cfg [options] {key}")
    keywords = setup_keywords(tree)
    for key in ("packages", "py_modules"):
        if _top_level(_literal(keywords.get(key))):
            return Guess(_top_level(_literal(keywords.get(key))), f"setup.py setup({key}=[...])")
    return _found_packages(tree, keywords.get("packages"))


def _found_packages(tree: Path, given: ast.expr | None) -> Guess[list[str]] | None:
    """setup(packages=find_packages(where=..., include=[...], exclude=[...])) as setuptools finds them: the
    top-level folders with an __init__.py that an include pattern (all, by default) and no exclude pattern match;
    None where its arguments are not literals."""
    if not isinstance(given, ast.Call) or not ast.unparse(given.func).endswith("find_packages"):
        return None
    arguments = dict(zip(("where", "exclude", "include"), given.args, strict=False))
    arguments.update({k.arg: k.value for k in given.keywords if k.arg})
    where, include, exclude = (_literal(arguments.get(k)) for k in ("where", "include", "exclude"))
    if not isinstance(where, str | None) or not isinstance(include, list | tuple | None):
        return None
    if not isinstance(exclude, list | tuple | None):
        return None
    try:
        base = inside(tree, where or ".")  # never a folder outside the source, nor one reached through a link
    except BadBytes:
        return None
    folders = [d.name for d in sorted(base.iterdir()) if d.is_dir() and not d.is_symlink()] if base.is_dir() else []
    found = [
        name
        for name in folders
        if (base / name / "__init__.py").is_file()
        and any(fnmatch.fnmatchcase(name, str(p)) for p in (include or ["*"]))
        and not any(fnmatch.fnmatchcase(name, str(p)) for p in (exclude or []))
    ]
    shown_call = "find_packages(" + ", ".join(f"{k}=..." for k in arguments) + ")"
    return Guess(found, f"setup.py setup(packages={shown_call}), as setuptools finds them") if found else None


def import_packages(source: SourceTree, name: str) -> Guess[list[str]]:
    """The top-level import packages the wheel installs, the one named like the project first."""
    tree = source.root
    declared = _declared_packages(source)
    if declared is None:
        found = [
            d.name
            for base in PACKAGE_ROOTS
            if (tree / base).is_dir()
            for d in sorted((tree / base).iterdir())
            if d.is_dir() and not d.is_symlink() and (d / "__init__.py").is_file() and d.name not in NOT_PACKAGES
        ]
        where = "the folders with an __init__.py under " + ", ".join(f"{b}/" for b in PACKAGE_ROOTS[:-1]) + " and /"
        declared = Guess(list(dict.fromkeys(found)), where, "check that these are the packages the wheel installs")
    own = str(canonicalize_name(name)).replace("-", "_")
    ordered = sorted(declared.value, key=lambda n: (n.lower() != own, declared.value.index(n)))
    return Guess(ordered, declared.read_from, declared.decide)


def wheel_abi(source: SourceTree) -> Guess[str] | None:
    """What the source asks its wheel's tag to say of Python: none (py3-none: no extension module) or abi3."""
    api = table(source_pyproject(source.root), "tool", "scikit-build", "wheel").get("py-api")
    if isinstance(api, str) and api.startswith("py3"):
        return Guess("none", "pyproject.toml [tool.scikit-build] wheel.py-api")
    if isinstance(api, str) and api.startswith("cp3"):
        return Guess("abi3", "pyproject.toml [tool.scikit-build] wheel.py-api")
    for file in ("setup.py", "setup.cfg"):
        text = source.text(file)
        match = re.search(r"py_limited_api\s*[=:]\s*(True|['\"]?cp3\d+)", text)
        if match:
            return Guess("abi3", f"{file}:{Lines(text).of(match.start())} py_limited_api")
    return None


def requirements(tree: Path) -> Guess[list[str]] | None:
    """A source without a [project] table (setup.py alone) states its requirements only in setup(): the variant's
    pyproject then says them only if the recipe does. The sdist's PKG-INFO has what setup() gave."""
    if source_project(tree) is not None:
        return None
    stated = source_requirements(tree)
    if stated:
        return Guess(stated, "PKG-INFO Requires-Dist (setup()'s install_requires)")
    egg_info = egg_info_requirements(tree)
    if egg_info is not None and egg_info[1]:
        return Guess(egg_info[1], f"{egg_info[0]} (setup()'s install_requires; PKG-INFO has no Requires-Dist)")
    literal = setup_requirements(tree)
    return Guess(literal, "setup.py setup(install_requires=[...])") if literal else None


# Calls that load a shared library by path or name.
_LOADERS = re.compile(r"\b(CDLL|WinDLL|PyDLL|LoadLibrary|load_library)\s*\(")


def _called(node: ast.AST) -> str:
    """The name a call calls (`f`, `x.f` -> f); empty for anything else."""
    func = getattr(node, "func", None) if isinstance(node, ast.Call) else None
    return str(getattr(func, "attr", getattr(func, "id", "")))


def _imported_modules(source: SourceTree, package: str) -> list[tuple[Path, ast.Module]]:
    """The modules of the package that `import package` runs: its __init__.py and what it imports of its own at
    module level, followed as far as they go."""
    tree = source.root
    folder = package_dir(tree, package)
    if folder is None:
        return []
    root = tree / folder
    queue, done, modules = [root / "__init__.py"], set(), []
    while queue:
        path = queue.pop(0)
        if path in done or not path.is_file():
            continue
        done.add(path)
        module = source.python(path.relative_to(tree).as_posix())
        if module is None:
            continue
        modules.append((path, module))
        for node in _module_level(module.body):
            if isinstance(node, ast.Import | ast.ImportFrom):
                queue += _own_modules(node, root, path, package)
    return modules


def _loading_functions(source: SourceTree, modules: list[tuple[Path, ast.Module]]) -> set[str]:
    """The package's own functions that load a library with ctypes, themselves or through another of them (two
    levels of helpers: `_load()` calling `_find_and_open(name)` calling CDLL). Only a module whose text names a
    loader, or a function found so far, is walked."""
    texts = [(source.text(path.relative_to(source.root).as_posix()), module) for path, module in modules]
    loading: set[str] = set()
    wanted = _LOADERS
    for _ in range(3):
        found = {
            f.name
            for text, module in texts
            if wanted.search(text)
            for f in ast.walk(module)
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            and any(_LOADERS.match(f"{c}(") or c in loading for c in map(_called, ast.walk(f)))
        }
        if found <= loading:
            break
        loading |= found
        wanted = re.compile(r"\b(" + "|".join(map(re.escape, sorted(loading))) + r")\s*\(")
    return loading


def ctypes_at_import(source: SourceTree, package: str) -> Guess[bool] | None:
    """Whether `import package` loads a library with ctypes: a call run at module level, in the package's
    __init__.py or a module of its own it imports, of a ctypes loader or of one of the package's functions that
    calls one (through up to two more)."""
    modules = _imported_modules(source, package)
    loading = _loading_functions(source, modules)
    for path, module in modules:
        for node in _module_level(module.body):
            for inner in ast.walk(node):
                name = _called(inner)
                if isinstance(inner, ast.Call) and "torch.ops" in ast.unparse(inner.func):
                    continue  # torch's own loader of an extension's operators, which torch's smoke covers
                if name and (_LOADERS.match(f"{name}(") or name in loading):
                    how = "a library with ctypes" if name not in loading else f"a library with ctypes through {name}()"
                    return Guess(
                        True,
                        f"{path.relative_to(source.root)}:{getattr(inner, 'lineno', 0)} loads {how} when the package "
                        "is imported",
                        "if that library links no CUDA library, set this false",
                    )
    return None


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements run when a module is imported: its body and the branches of its if/try, not its functions'
    or classes' bodies."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(node, ast.If | ast.Try | ast.With):
            inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            inner += [s for handler in getattr(node, "handlers", []) for s in handler.body]
            yield from _module_level(inner)
            continue
        yield node


def _own_modules(node: ast.Import | ast.ImportFrom, root: Path, path: Path, package: str) -> list[Path]:
    """The files of the package's own modules an import statement names."""
    if isinstance(node, ast.Import):
        dotted = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            here = path.parent.relative_to(root).parts
            parent = list(here[: len(here) - node.level + 1])
            base = ".".join([package, *parent, *([base] if base else [])])
        dotted = [base, *(f"{base}.{a.name}" for a in node.names)]
    files = []
    for name in dotted:
        parts = name.split(".")
        if parts[0] != package:
            continue
        target = root.joinpath(*parts[1:])
        files += [target.with_suffix(".py"), target / "__init__.py"] if parts[1:] else [root / "__init__.py"]
    return files
