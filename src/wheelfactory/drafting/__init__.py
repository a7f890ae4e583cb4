"""A recipe in one command: a draft read from the source's files (`nox -s recipe -- NAME==VERSION`), completed from
a first build's report (`nox -s recipe -- --from-report dist/report.json --recipe NAME`)."""

from .completion import complete_recipe
from .draft import SourceGiven, draft_recipe

__all__ = ["SourceGiven", "complete_recipe", "draft_recipe"]
