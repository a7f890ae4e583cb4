"""`nox -s recipe -- NAME==VERSION` (or `--git URL --rev COMMIT`, or a folder in recipes/<name>/): a first
recipe, drafted from what the source's files say (reading.py, cuda_build.py) through templates/recipe.yaml.j2, and
checked as `nox -s render` checks a recipe before it is written."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml

from ..errors import UserError
from ..inputs import GitSource
from ..sources import pin_sdist, source_tree
from ..templating import Filters, template_environment
from ..untrusted.shown import one_line, shown
from .checking import write_checked
from .cuda_build import CudaBuild, read_cuda_build
from .known import provided_libraries_of
from .reading import Guess, ctypes_at_import, identity, import_packages, requirements, wheel_abi

COMMENT_WIDTH = 116


@dataclass(frozen=True)
class SourceGiven:
    """What the user named: an sdist (`name` or `name==version`), a git commit, or a folder of the recipe's."""

    sdist: str = ""
    git: str = ""
    rev: str = ""
    folder: Path | None = None


def _comment(text: object) -> str:
    return one_line(str(text))


def _why(guess: Guess[Any]) -> str:
    decide = f" — DECIDE: {guess.decide}" if guess.decide else ""
    return _comment(f"{guess.read_from}{decide}")


def _block(text: object, first: str) -> str:
    """A comment wrapped to the recipe's width: `first` before its first line, as much room before the rest."""
    rest = re.sub(r"[^#\s]", " ", first)
    lines = textwrap.wrap(
        _comment(text),
        COMMENT_WIDTH,
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=False,
    )
    return "\n".join(lines) or first.rstrip()


def _yaml(value: object) -> str:
    dumped = yaml.safe_dump(value, default_flow_style=True, width=10**6, allow_unicode=False, sort_keys=False)
    return dumped.removesuffix("\n").removesuffix("\n...").strip()


def _template(root: Path) -> jinja2.Template:
    # Every value passes the yaml filter, every comment the comment, why or block filter.
    filters: Filters = {"yaml": _yaml, "comment": _comment, "why": _why, "block": _block}
    return template_environment(root, filters, trim=True).get_template("recipe.yaml.j2")


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
        _refuse_existing(recipe_dir / "recipe.yaml", root)
        relative = tree.relative_to(recipe_dir)
        return {"path": relative.as_posix()}, "a folder inside the recipe's folder", tree, f"the folder {relative}"
    if given.git:
        tree = source_tree(GitSource(git=given.git, rev=given.rev), root)
        return {"git": given.git, "rev": given.rev}, "the commit given", tree, f"{shown(given.git)} at {given.rev[:12]}"
    project, _, version = given.sdist.partition("==")
    pinned, sha256, tree = pin_sdist(project.strip(), version.strip() or None)
    where = "the sha256 of the archive the package index serves"
    return {"sdist": pinned, "sha256": sha256}, where, tree, f"its sdist {shown(pinned)}"


def draft_context(
    tree: Path, source: dict[str, str], source_read_from: str, origin: str
) -> tuple[str, dict[str, object], list[str]]:
    """(the recipe's name, what templates/recipe.yaml.j2 renders, the notes), read from the source tree."""
    found = identity(tree)
    if "name" not in found or "version" not in found:
        missing = " and ".join(f for f in ("name", "version") if f not in found)
        raise UserError(f"{origin}: its {missing} could not be read (no PKG-INFO, [project] or setup() literal)")
    packages = import_packages(tree, found["name"].value)
    if not packages.value:
        packages = Guess([found["name"].value.replace("-", "_")], "the project's name", "name the import package")
    build = read_cuda_build(tree)
    at_import = ctypes_at_import(tree, packages.value[0])
    environment = _environment(build)
    abi = wheel_abi(tree)
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
        "notes": build.notes,
        "first_major": 13 if build.torch else 12,
        "first_python": "3.12",
        # A wheel with extension modules: each may link no CUDA library until the report shows what it links.
        "modules": {} if abi is not None and abi.value == "none" else {"*": []},
    }
    return found["name"].value, context, build.notes


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


def _refuse_existing(target: Path, root: Path) -> None:
    if target.exists():
        name = target.parent.name
        raise UserError(
            f"{target.relative_to(root)} exists — `nox -s recipe -- --from-report dist/report.json --recipe {name}` "
            "completes it; delete it to draft afresh"
        )


def draft_recipe(given: SourceGiven, root: Path) -> tuple[Path, list[str]]:
    """Draft recipes/<name>/recipe.yaml; (its path, the notes the user must read). The draft is checked as
    `nox -s render` checks a recipe before it is put in place; an existing recipe is never overwritten."""
    source, read_from, tree, origin = _source(given, root)
    name, context, notes = draft_context(tree, source, read_from, origin)
    target = root / "recipes" / name / "recipe.yaml"
    _refuse_existing(target, root)
    text = _template(root).render(**context)
    write_checked(text, target.parent, root)
    return target, notes
