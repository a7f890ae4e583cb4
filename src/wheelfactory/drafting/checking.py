"""A drafted or completed recipe is checked as `nox -s render` checks one before it replaces anything: what the
command writes, render accepts, and a recipe that fails leaves nothing behind."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..errors import InputError, UserError
from ..inputs import load_matrix, load_recipe
from ..untrusted.shown import shown


def write_checked(text: str, recipe_dir: Path, root: Path) -> Path:
    """Write `text` as recipe_dir/recipe.yaml once it passes the recipe's checks there (beside its source
    folder); ToolFailure naming the problems, and nothing written, when it does not."""
    matrix = load_matrix(root / "matrix.yaml", root)
    created = not recipe_dir.exists()
    recipe_dir.mkdir(parents=True, exist_ok=True)
    partial = recipe_dir / ".recipe.yaml.partial"
    partial.write_text(text, encoding="utf-8")
    try:
        load_recipe(partial, root, matrix.value)
    except InputError as exc:
        partial.unlink()
        if created:
            with contextlib.suppress(OSError):
                recipe_dir.rmdir()
        problems = "; ".join(p.message for p in exc.problems[:5])
        raise UserError(
            f"the recipe written for {shown(recipe_dir.name)} fails its checks, so none was written: {problems}"
        ) from None
    return partial.replace(recipe_dir / "recipe.yaml")
