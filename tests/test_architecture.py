"""The engine's shape, read from its source (ast): the stages stand side by side, nothing imports in a circle, and
what decides Linux or Windows lives in the platform objects. These are the rules docs/architecture.md draws."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src"
PACKAGE = SRC / "wheelfactory"
# The stages; each may import what sits below the stages, not another stage.
STAGES = ("render", "build", "repair", "audit", "smoke")
# The exceptions the architecture names: build reads what render made.
ALLOWED = {("build", "render")}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """Every module `path` imports (anywhere in it, a function's body too), with its line."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            yield target, node.lineno
            # `from . import host`: the names may be modules themselves.
            yield from ((f"{target}.{alias.name}", node.lineno) for alias in node.names)


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {
        name: {target for target, _ in _imports(path) if target in modules and target != name}
        for name, path in modules.items()
    }


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def test_no_stage_imports_another_stage() -> None:
    crossings = sorted(
        f"{module} imports {target}"
        for module, targets in _graph().items()
        for target in targets
        if (here := _stage(module)) and (there := _stage(target)) and here != there and (here, there) not in ALLOWED
    )
    assert crossings == []


def test_nothing_imports_in_a_circle() -> None:
    graph = _graph()
    circles = []
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done

    def walk(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            # A package imports its own modules to re-export them: that is not a circle back into it.
            if target.startswith(f"{module}."):
                continue
            if state.get(target) == 1:
                circles.append(" → ".join([*path[path.index(target) :], target]))
            elif target not in state:
                walk(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module, [module])
    assert circles == []


@pytest.mark.parametrize("stage", STAGES)
def test_the_walk_finds_each_stage(stage: str) -> None:
    """The rule above holds only if the walk sees the stages at all."""
    assert any(_stage(module) == stage for module in _graph())
