"""`nox -s recipe -- NAME==VERSION` (or `--git URL --rev COMMIT`, or a folder in recipes/<name>/): a first
recipe, drafted from what the source's files say (reading.py, cuda_build.py) through templates/recipe.yaml.j2, and
checked as `nox -s render` checks a recipe before it is written."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from packaging.utils import canonicalize_name

from ..errors import UserError
from ..inputs import GitSource
from ..inputs.references import commit_problem, git_url_problem
from ..sources import pin_sdist, source_tree
from ..templating import Filters, template_environment
from ..untrusted.shown import shown, yaml_comment, yaml_scalar
from .checking import checked_name, write_checked
from .cuda_build import CudaBuild, read_cuda_build
from .known import provided_libraries_of
from .reading import Guess, SourceTree, ctypes_at_import, identity, import_packages, requirements, wheel_abi

COMMENT_WIDTH = 116


@dataclass(frozen=True)
class SourceGiven:
    """What the user named: an sdist (`name` or `name==version`), a git commit, or a folder of the recipe's."""

    sdist: str = ""
    git: str = ""
    rev: str = ""
    folder: Path | None = None


def _why(guess: Guess[Any]) -> str:
    decide = f" — DECIDE: {guess.decide}" if guess.decide else ""
    return yaml_comment(f"{guess.read_from}{decide}")


def _block(text: object, first: str) -> str:
    """A comment wrapped to the recipe's width: `first` before its first line, as much room before the rest."""
    rest = re.sub(r"[^#\s]", " ", first)
    lines = textwrap.wrap(
        yaml_comment(text),
        COMMENT_WIDTH,
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=False,
    )
    return "\n".join(lines) or first.rstrip()


@cache
def _template(root: Path) -> jinja2.Template:
    # Every value passes the yaml filter (yaml_scalar), every comment the comment, why or block filter
    # (yaml_comment).
    filters: Filters = {"yaml": yaml_scalar, "comment": yaml_comment, "why": _why, "block": _block}
    return template_environment(root, filters, trim=True).get_template("recipe.yaml.j2")


def rendered_draft(root: Path, context: dict[str, object]) -> str:
    """templates/recipe.yaml.j2 rendered from a draft's context, compiled once a process."""
    return _template(root).render(**context)


def _source(given: SourceGiven, root: Path) -> tuple[dict[str, str], str, Path, str]:
    """(the recipe's source field, what pinned it, the unpacked tree, where it came from in words)."""
    if given.folder is not None:
        tree = given.folder.resolve()
        recipes = (root / "recipes").resolve()
        if not tree.is_dir() or not tree.is_relative_to(recipes) or len(tree.relative_to(recipes).parts) < 2:
            raise UserError(
                f"{shown(str(given.folder))}: a source folder must lie inside the recipe's folder, "
                "recipes/<name>/<folder> — move it there, or give its sdist (NAME==VERSION) or git commit"
            )
        recipe_dir = recipes / tree.relative_to(recipes).parts[0]
        _refuse_existing(recipe_dir.name, root)
        relative = tree.relative_to(recipe_dir)
        return {"path": relative.as_posix()}, "a folder inside the recipe's folder", tree, f"the folder {relative}"
    if given.git:
        _check_git(given)
        tree = source_tree(GitSource(git=given.git, rev=given.rev), root)
        return {"git": given.git, "rev": given.rev}, "the commit given", tree, f"{shown(given.git)} at {given.rev[:12]}"
    project, _, version = given.sdist.partition("==")
    pinned, sha256, tree = pin_sdist(checked_name(project.strip(), "the sdist's name"), version.strip() or None)
    where = "the sha256 of the archive the package index serves"
    return {"sdist": pinned, "sha256": sha256}, where, tree, f"its sdist {shown(pinned)}"


def _check_git(given: SourceGiven) -> None:
    """--git and --rev, checked as a recipe's git source is, before git sees them."""
    why = git_url_problem(given.git)
    if why:
        raise UserError(f"--git {shown(given.git)}: {why} — e.g. https://github.com/owner/repo.git")
    why = commit_problem(given.rev)
    if why:
        raise UserError(f"--rev {shown(given.rev)}: {why}")


def _identity(tree: Path, origin: str) -> dict[str, Guess[str]]:
    """The source's name and version (and summary), the name one a recipe's folder can carry."""
    found = identity(tree)
    if "name" not in found or "version" not in found:
        missing = " and ".join(f for f in ("name", "version") if f not in found)
        raise UserError(f"{origin}: its {missing} could not be read (no PKG-INFO, [project] or setup() literal)")
    checked_name(found["name"].value, f"{origin}: the name read from {found['name'].read_from},")
    return found


def draft_context(
    tree: Path, source: dict[str, str], source_read_from: str, origin: str
) -> tuple[str, dict[str, object], list[str]]:
    """(the recipe's name, what templates/recipe.yaml.j2 renders, the notes), read from the source tree."""
    files = SourceTree(tree)
    # The metadata's readers (source_metadata.py) pass over a file they cannot read or parse: the notes name it.
    files.toml("pyproject.toml")
    files.data("PKG-INFO")
    found = _identity(tree, origin)
    packages = import_packages(files, found["name"].value)
    if not packages.value:
        packages = Guess([found["name"].value.replace("-", "_")], "the project's name", "name the import package")
    build = read_cuda_build(files)
    at_import = ctypes_at_import(files, packages.value[0])
    environment = _environment(build)
    abi = wheel_abi(files)
    context = {
        "origin": origin,
        "name": found["name"],
        "version": found["version"],
        "summary": found.get("summary"),
        "packages": packages,
        "source": source,
        "source_read_from": source_read_from,
        "wheel_abi": abi,
        "torch": build.torch,
        "platforms": build.platforms,
        "components": _components(build),
        "static": build.static,
        "provided": _provided(build),
        "driver": build.driver,
        "environment": environment,
        "dependencies": requirements(tree),
        "cuda_at_import": at_import,
        "notes": [*files.notes, *build.notes],
        "first_major": 13 if build.torch else 12,
        "first_python": "3.12",
        # A wheel with extension modules: each may link no CUDA library until the report shows what it links.
        "modules": {} if abi is not None and abi.value == "none" else {"*": []},
    }
    return found["name"].value, context, [*files.notes, *build.notes]


def _components(build: CudaBuild) -> dict[str, str]:
    components = dict(build.components)
    if build.torch and "cudart" not in components:
        components["cudart"] = "torch.utils.cpp_extension's CUDAExtension links the CUDA runtime"
    return components


def _provided(build: CudaBuild) -> Guess[dict[str, object]] | None:
    if not build.torch:
        return None
    return Guess({"torch": provided_libraries_of("torch")}, build.torch.read_from)


def _environment(build: CudaBuild) -> dict[str, Guess[str]]:
    """The build's variables: CMake's definitions joined into CMAKE_ARGS (which scikit-build-core and most
    setup.py CMake drivers pass on), then the rest."""
    environment: dict[str, Guess[str]] = {}
    if build.cmake_args:
        value = " ".join(dict.fromkeys(g.value for g in build.cmake_args))
        why = "; ".join(f"{g.value.split('=')[0]}: {g.read_from} ({g.decide})" for g in build.cmake_args)
        environment["CMAKE_ARGS"] = Guess(value, why)
    environment.update(build.environment)
    return environment


def _refuse_existing(name: str, root: Path) -> None:
    """One recipe a distribution: none is drafted where recipes/ has one of a name PyPI folds to the same."""
    recipes = root / "recipes"
    for folder in sorted(recipes.iterdir()) if recipes.is_dir() else []:
        recipe = folder / "recipe.yaml"
        if canonicalize_name(folder.name) == canonicalize_name(name) and (recipe.exists() or recipe.is_symlink()):
            same = "" if folder.name == name else f" (of {shown(name)}: names compare as PyPI folds them)"
            raise UserError(
                f"recipes/{shown(folder.name)}/recipe.yaml exists{same} — `nox -s recipe -- --from-report "
                f"dist/report.json --recipe {shown(folder.name)}` completes it; delete it to draft afresh"
            )


def draft_recipe(given: SourceGiven, root: Path) -> tuple[Path, list[str]]:
    """Draft recipes/<name>/recipe.yaml; (its path, the notes the user must read). The draft is checked as
    `nox -s render` checks a recipe before it is put in place; an existing recipe is never overwritten, nor one
    drafted beside it under another spelling of its name."""
    source, read_from, tree, origin = _source(given, root)
    name, context, notes = draft_context(tree, source, read_from, origin)
    _refuse_existing(name, root)
    return write_checked(rendered_draft(root, context), name, root), notes
