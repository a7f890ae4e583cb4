"""A coverage page per torch release of the trains, beside its index page: for each distribution built against it,
every (Python, platform) cell of the matrix, and whether its wheel is there (built), is left out by the matrix (with
the exclusion's reason), by the recipe (its platforms) or by torch (no torch wheel for that Python there, as the
matrix's train records the index's), or was planned and is not there (missing) — so a user of
that torch reads whether a build exists for them before pip says it does not."""

from __future__ import annotations

import html
from pathlib import Path

from .. import host
from ..plan import Plan, Variant, WheelJob
from ..untrusted.trees import folder_inside
from .index_pages import INDEX_DIR

COVERAGE = "coverage.html"


def _status(plan: Plan, variant: Variant, jobs: list[WheelJob], python: str, platform: str, folder: Path) -> str:
    rule = next((r for r in plan.matrix.value.exclude if r.matches(python, variant.major, platform)), None)
    if rule is not None:
        return f"excluded: {rule.reason or 'matrix.yaml excludes it'}"
    if not variant.recipe.builds_on(platform):
        return "excluded: the recipe builds for other platforms"
    gap = variant.torch_gap(python, platform)
    if gap is not None:
        return f"excluded: {gap}"
    job = next((j for j in jobs if j.cell.platform == platform and python in j.cell.pythons), None)
    if job is None:
        return "missing: not in the plan"
    return "built" if any(folder.glob(job.wheel_glob)) else "missing"


def _rows(plan: Plan, variant: Variant, folder: Path) -> list[tuple[str, str, str]]:
    jobs = [job for job in plan.wheel_jobs() if job.build.variant is variant]
    return [
        (python, platform, _status(plan, variant, jobs, python, platform, folder))
        for platform in sorted(variant.cuda.platforms)
        for python in plan.matrix.value.python
    ]


def _page(title: str, sections: dict[str, list[tuple[str, str, str]]]) -> str:
    body = []
    for project, rows in sorted(sections.items()):
        cells = "\n".join(
            f"      <tr><td>{html.escape(p)}</td><td>{html.escape(pl)}</td><td>{html.escape(s)}</td></tr>"
            for p, pl, s in rows
        )
        body.append(
            f"    <h2>{html.escape(project)}</h2>\n    <table>\n      <tr><th>Python</th><th>platform</th>"
            f"<th>wheel</th></tr>\n{cells}\n    </table>"
        )
    return (
        f"<!DOCTYPE html>\n<html>\n  <head>\n    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n"
        f"    <h1>{html.escape(title)}</h1>\n" + "\n".join(body) + "\n  </body>\n</html>\n"
    )


def write_coverage_pages(folder: Path, plan: Plan) -> list[Path]:
    """<folder>/torch-index/<torch>/coverage.html for each torch release a variant is tied to: the pages written."""
    pages: dict[str, dict[str, list[tuple[str, str, str]]]] = {}
    for variant in plan.variants:
        if variant.locked_torch is not None:
            name = variant.locked_torch.index_name
            pages.setdefault(name, {})[variant.dist_name] = _rows(plan, variant, folder)
    written = []
    for name, sections in sorted(pages.items()):
        path = folder_inside(folder, INDEX_DIR, name) / COVERAGE  # through no link, as the index pages
        host.write_atomically(path, _page(f"wheels built against {name}: every cell of the matrix", sections))
        written.append(path)
    return written
