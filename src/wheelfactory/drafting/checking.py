"""A drafted or completed recipe is checked as `nox -s render` checks one before it replaces anything: what the
command writes, render accepts, and a recipe that fails leaves nothing behind. It is written only into
recipes/<name>/ with no link on the way (untrusted/trees.py), under its name as a folder carries it."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from packaging.utils import InvalidName, canonicalize_name

from ..errors import InputError, UserError
from ..inputs import load_matrix, load_recipe
from ..untrusted.shown import shown
from ..untrusted.trees import folder_inside, write_new


def checked_name(name: str, what: str) -> str:
    """`name`, once it is a distribution name — and so a plain folder name, no separator or `..` in it."""
    try:
        canonicalize_name(name, validate=True)
    except InvalidName:
        raise UserError(
            f"{what} {shown(name, quoted=True)} is no distribution name (letters, digits, '-', '_' and '.', starting "
            "and ending with a letter or digit) — nothing was written"
        ) from None
    return name


def write_checked(text: str, name: str, root: Path) -> Path:
    """Write `text` as recipes/<name>/recipe.yaml once it passes the recipe's checks there (beside its source
    folder); UserError naming the problems, and nothing written, when it does not."""
    matrix = load_matrix(root / "matrix.yaml", root)
    created = not (root / "recipes" / checked_name(name, "the recipe's name")).exists()
    recipe_dir = folder_inside(root, "recipes", name)
    partial = write_new(recipe_dir / ".recipe.yaml.partial", text)
    try:
        load_recipe(partial, root, matrix.value)
    except InputError as exc:
        partial.unlink()
        if created:
            with contextlib.suppress(OSError):
                recipe_dir.rmdir()
        problems = "; ".join(p.message for p in exc.problems[:5])
        raise UserError(
            f"the recipe written for {shown(name)} fails its checks, so none was written: {problems}"
        ) from None
    target = recipe_dir / "recipe.yaml"
    os.replace(partial, target)  # a link put at recipe.yaml is replaced, never written through
    return target
