"""The project's Jinja2 templates (templates/): one environment for every file rendered from them, each adding the
filters of what it writes. Nothing a template interpolates is pasted raw: every value goes through the filter of
where it lands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2

Filters = dict[str, Callable[..., Any]]


def template_environment(root: Path, filters: Filters, *, trim: bool = False) -> jinja2.Environment:
    """The templates under root/templates, strict about undefined names; `trim` drops the line a block tag stands
    on (for templates whose lines are mostly conditional)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(root / "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=trim,
        lstrip_blocks=trim,
        autoescape=False,  # not HTML: each template's filters escape for the file it writes
    )
    env.filters.update(filters)
    return env
