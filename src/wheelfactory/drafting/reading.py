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
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Generic, TypeVar

from packaging.utils import canonicalize_name

from ..errors import BadBytes
from ..source_metadata import pkg_info, setup_keywords, source_project, source_pyproject, source_requirements
from ..sources import PACKAGE_ROOTS, package_dir
from ..untrusted.shown import shown
from ..untrusted.trees import Lines, parse_python, parse_toml, read_inside, walk

T = TypeVar("T")
# Folders no package's own build files live in: tools' and builds' output, and the projects it vendors (whose
# CUDA options and targets are theirs: LightGBM's external_libs/nanoarrow has an option WITH_CUDA).
SKIPPED = frozenset(
    {".git", "build", "dist", "node_modules", "__pycache__", ".nox", ".tox", "venv", ".venv", "_deps"}
    | {"external", "external_libs", "extern", "third_party", "thirdparty", "3rdparty", "vendor", "vendored"}
)
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


def files_named(tree: Path, match: re.Pattern[str]) -> Iterator[Path]:
    """The files under `tree` whose name matches, shallowest first (a link among them too, which reading it then
    refuses and notes); no link is followed out of the tree."""
    for entry in walk(tree, lambda folder: folder.name in SKIPPED):
        if match.fullmatch(entry.name) and (entry.is_symlink() or entry.is_file()):
            yield entry


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
    return None


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
    return Guess(stated, "PKG-INFO Requires-Dist (setup()'s install_requires)") if stated else None


# Calls that load a shared library by path or name.
_LOADERS = re.compile(r"\b(CDLL|WinDLL|PyDLL|LoadLibrary|load_library)\s*\(")


def ctypes_at_import(source: SourceTree, package: str) -> Guess[bool] | None:
    """Whether `import package` loads a library with ctypes: a module-level call of a ctypes loader in the
    package's __init__.py or in a module of the package it imports at module level (followed as far as they go)."""
    tree = source.root
    folder = package_dir(tree, package)
    if folder is None:
        return None
    root = tree / folder
    queue, done = [root / "__init__.py"], set()
    while queue:
        path = queue.pop(0)
        if path in done or not path.is_file():
            continue
        done.add(path)
        module = source.python(path.relative_to(tree).as_posix())
        if module is None:
            continue
        for node in _module_level(module.body):
            if isinstance(node, ast.Import | ast.ImportFrom):
                queue += _own_modules(node, root, path, package)
            for inner in ast.walk(node):
                name = getattr(getattr(inner, "func", None), "attr", getattr(getattr(inner, "func", None), "id", ""))
                if isinstance(inner, ast.Call) and _LOADERS.match(f"{name}("):
                    where = f"{path.relative_to(tree)}:{inner.lineno}"
                    return Guess(
                        True,
                        f"{where} loads a library with ctypes when the package is imported",
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
