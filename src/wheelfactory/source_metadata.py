"""What a package's source says about itself, read as data and never run: setup()'s keywords (from setup.py's syntax
tree), the sdist's PKG-INFO (its long description, extras and their requirements), and its readme. Problems in the
source's files are reported at their own path, line and column (SourceText). The files are read through
untrusted/trees.py: inside the tree, through no link, bounded in size and in parse depth."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from packaging.metadata import parse_email
from packaging.requirements import InvalidRequirement, Requirement

from .errors import BadBytes, InputError, Problem
from .untrusted.trees import parse_python, parse_toml, read_inside


@dataclass(frozen=True)
class SourceText:
    """A text file of the package's source (its pyproject.toml, a requirements file), which problems of the
    source are reported against: the user can open it, and pins another release or names what it lacks."""

    shown: str  # relative to the project root when inside it, else its path in the cache
    text: str
    root: Path  # the project root, against which files beside it are shown

    @classmethod
    def read(cls, path: Path, root: Path) -> SourceText:
        shown = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError([Problem(shown, 1, 1, f"cannot read it: {exc.strerror}")]) from None
        try:
            return cls(shown, data.decode("utf-8"), root)
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            col = exc.start - data.rfind(b"\n", 0, exc.start)
            message = (
                f"byte 0x{data[exc.start]:02x} is not UTF-8 text — the source must be fixed, or another release pinned"
            )
            raise InputError([Problem(shown, line, col, message)]) from None

    def problem(self, near: str, message: str) -> Problem:
        """A problem at the first place `near` appears in the file (its start when nowhere)."""
        at = self.text.find(near) if near else -1
        if at < 0:
            return Problem(self.shown, 1, 1, message)
        return Problem(self.shown, self.text.count("\n", 0, at) + 1, at - self.text.rfind("\n", 0, at), message)


def setup_keywords(tree: Path) -> dict[str, ast.expr]:
    """The keywords of the source's setup() calls, read from setup.py without running it; none of a call whose
    `setup(**options)` hides what it gives."""
    try:
        module = parse_python(read_inside(tree, "setup.py") or b"", "setup.py")
    except BadBytes:
        return {}
    keywords: dict[str, ast.expr] = {}
    for node in ast.walk(module):
        if not isinstance(node, ast.Call) or getattr(node.func, "id", getattr(node.func, "attr", None)) != "setup":
            continue
        if all(k.arg is not None for k in node.keywords):
            keywords.update({str(k.arg): k.value for k in node.keywords})
    return keywords


def setup_py_fields(tree: Path) -> list[str]:
    """The [project] fields a setup.py-only source gives through setup() (data/setuptools_fields.yaml); only the
    always-accepted ones when that cannot be told."""
    table = yaml.safe_load(files("wheelfactory.data").joinpath("setuptools_fields.yaml").read_text("utf-8"))
    fields = [table["keywords"][k] for k in setup_keywords(tree) if k in table["keywords"]]
    return list(dict.fromkeys([*fields, *table["always"]]))


def setup_py_classifiers(tree: Path) -> list[str]:
    """The classifiers setup() gives as a literal list (the variant's [project] sets classifiers, so setuptools
    would drop setup()'s); none where they are computed."""
    given = setup_keywords(tree).get("classifiers")
    try:
        value = ast.literal_eval(given) if given is not None else []
    except ValueError:
        return []
    return [str(c) for c in value] if isinstance(value, list | tuple) else []


def source_pyproject(tree: Path) -> dict[str, Any]:
    """The source's pyproject.toml, parsed; empty where it has none or it does not parse (rendering reports that at
    its place)."""
    try:
        return parse_toml(read_inside(tree, "pyproject.toml") or b"", "pyproject.toml")
    except BadBytes:
        return {}


def source_project(tree: Path) -> dict[str, Any] | None:
    """The source's pyproject [project] table; None where it has none (or its pyproject does not parse)."""
    project = source_pyproject(tree).get("project")
    return project if isinstance(project, dict) else None


def source_build_requires(tree: Path) -> list[str] | None:
    """The source's pyproject [build-system] requires; None where it states none (or its pyproject does not
    parse)."""
    system = source_pyproject(tree).get("build-system")
    requires = system.get("requires") if isinstance(system, dict) else None
    return [str(line) for line in requires] if isinstance(requires, list) else None


def pkg_info(tree: Path) -> dict[str, Any]:
    """The raw fields of the sdist's PKG-INFO (none for a tree without one)."""
    try:
        raw, _ = parse_email(read_inside(tree, "PKG-INFO") or b"")
    except (BadBytes, ValueError):
        return {}
    return dict(raw)


@dataclass(frozen=True)
class Readme:
    text: str
    content_type: str  # text/markdown, text/x-rst or text/plain


_CONTENT_TYPES = {".md": "text/markdown", ".markdown": "text/markdown", ".rst": "text/x-rst"}


def _readme_file(tree: Path, name: str, content_type: str | None, root: Path) -> Readme | None:
    path = tree / name
    if not path.resolve().is_relative_to(tree.resolve()) or not path.is_file():
        return None  # a readme outside the tree is never read (nor one the source lacks)
    text = SourceText.read(path, root).text
    return Readme(text, content_type or _CONTENT_TYPES.get(PurePosixPath(name).suffix.lower(), "text/plain"))


def source_readme(tree: Path, project: dict[str, Any] | None, root: Path) -> Readme | None:
    """The source's own readme, as its metadata gives it: its pyproject's [project] readme (`project`: a file, or
    a text with its content type), else the sdist's PKG-INFO (setup()'s long_description, as setuptools wrote
    it; reStructuredText when it names no content type, as the metadata specification says)."""
    given = project.get("readme") if project else None
    if isinstance(given, str):
        return _readme_file(tree, given, None, root)
    if isinstance(given, dict):
        content_type = str(given.get("content-type", "")) or None
        if "text" in given:
            return Readme(str(given["text"]), content_type or "text/plain")
        return _readme_file(tree, str(given.get("file", "")), content_type, root) if "file" in given else None
    info = pkg_info(tree)
    description = str(info.get("description", "")).strip()
    if description and description != "UNKNOWN":
        content_type = str(info.get("description_content_type", "text/x-rst")).split(";")[0].strip()
        return Readme(description + "\n", content_type)
    return None


def _extra_lines(requirements: list[str], extra: str) -> list[str]:
    """The requirements of one extra, from PKG-INFO's Requires-Dist lines: those whose marker names it, with the
    `extra == ...` clause taken out (what remains of the marker stays)."""
    lines = []
    for line in requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        rest = _without_extra(str(req.marker), extra) if req.marker else None
        if rest is None:
            continue
        base = str(req).split(";", 1)[0].strip()
        lines.append(f"{base}; {rest}" if rest else base)
    return lines


def _without_extra(marker: str, extra: str) -> str | None:
    """What remains of a marker that names `extra` once that clause is taken out; None when it names another."""
    clause = f'extra == "{extra}"'
    if clause not in marker:
        return None
    for form in (f" and {clause}", f"{clause} and ", clause):
        marker = marker.replace(form, "")
    return marker.strip()


def source_requirements(tree: Path) -> list[str] | None:
    """The requirements the sdist's PKG-INFO states (its extras' left out); None where it states none (no
    PKG-INFO, or one without Requires-Dist)."""
    stated = [str(r) for r in pkg_info(tree).get("requires_dist", [])]
    return [line for line in stated if "extra ==" not in line] if stated else None


def setup_requirements(tree: Path) -> list[str] | None:
    """setup()'s install_requires where it is a literal (a list of lines, or one text of them, as setuptools takes
    it), read from the syntax tree and never run; None where setup() gives none or computes it."""
    given = setup_keywords(tree).get("install_requires")
    try:
        value = ast.literal_eval(given) if given is not None else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    lines = value.splitlines() if isinstance(value, str) else value
    if not isinstance(lines, list | tuple) or not all(isinstance(line, str) for line in lines):
        return None
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def egg_info_requirements(tree: Path) -> tuple[str, list[str]] | None:
    """(where, the requirements) of the sdist's `<name>.egg-info/requires.txt`, which setuptools writes from what
    setup() gave even where the PKG-INFO beside it has no Requires-Dist (metadata 2.1 of an older setuptools):
    the lines before any section, and those of a `[:marker]` section with its marker; an extra's sections left
    out. None where the sdist has none (or it cannot be read)."""
    folders = sorted(p.name for p in tree.glob("*.egg-info") if p.is_dir() and not p.is_symlink())
    for folder in folders[:1]:
        try:
            data = read_inside(tree, f"{folder}/requires.txt")
        except BadBytes:
            return None
        if data is None:
            return None
        lines, marker = [], ""
        for raw in data.decode("utf-8", errors="replace").splitlines():
            line = raw.strip()
            if line.startswith("["):
                extra, _, marker = line.strip("[]").partition(":")
                marker = marker if not extra else "\0"  # an extra's section: its lines are the extra's
            elif line and not line.startswith("#") and marker != "\0":
                lines.append(f"{line}; {marker}" if marker else line)
        return f"{folder}/requires.txt", lines
    return None


def declared_requirements(tree: Path) -> list[str] | None:
    """What the source's own build would declare it requires (its extras aside), where no [project] table says
    it: the sdist's PKG-INFO Requires-Dist, else its egg-info's requires.txt, else setup()'s literal
    install_requires (an sdist written by an older setuptools has the first empty); None where none says."""
    stated = source_requirements(tree)
    if stated is not None:
        return stated
    egg_info = egg_info_requirements(tree)
    return egg_info[1] if egg_info is not None else setup_requirements(tree)


def source_extras(tree: Path) -> dict[str, list[str]]:
    """The extras a setup.py-only source declares (setup()'s extras_require): from the sdist's PKG-INFO, where
    setuptools wrote them out with their requirements, else from setup() when it gives them as a literal mapping."""
    info = pkg_info(tree)
    names = [str(n) for n in info.get("provides_extra", [])]
    requirements = [str(r) for r in info.get("requires_dist", [])]
    if names and requirements:  # an older setuptools wrote the extras' names alone (nerfacc 0.5.3's PKG-INFO)
        return {name: _extra_lines(requirements, name) for name in names}
    given = setup_keywords(tree).get("extras_require")
    try:
        value = ast.literal_eval(given) if given is not None else {}
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): [str(v)] if isinstance(v, str) else [str(r) for r in v] for k, v in value.items()}
