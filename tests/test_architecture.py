"""The engine's shape, read from its source (ast): the stages stand side by side, nothing imports in a circle, and
what decides Linux or Windows lives in the platform objects. These are the rules docs/architecture.md draws."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
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


# An OS or platform name compared: `== "windows"`, `!= "linux"`, `sys.platform == "win32"`, `"linux" == os`.
_OS_NAMES = r'"(linux|windows|win32|darwin)(-[a-z0-9_]+)?"'
_COMPARED = re.compile(rf"(==|!=)\s*{_OS_NAMES}|{_OS_NAMES}\s*(==|!=)|\.startswith\(\s*{_OS_NAMES}")
# Where Linux and Windows are told apart by design: the platform objects (and the data files, which are not code).
PLATFORMS = PACKAGE / "platforms"


def test_os_names_are_compared_only_in_the_platform_objects() -> None:
    """Elsewhere only what must ask this very machine (sys.platform for its own tools, the shipped code on the
    user's machine), at most ten places."""
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.is_relative_to(PLATFORMS)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _COMPARED.search(line)
    ]
    assert len(found) <= 10, "\n".join(found)


def test_the_comparisons_are_found_where_they_are() -> None:
    """The search above sees each way of writing one."""
    for line in ('if name.os == "windows":', 'x = "linux" != y', 'sys.platform.startswith("linux")', 'a != "win32"'):
        assert _COMPARED.search(line), line
    assert not _COMPARED.search('layout = getattr(self, os)  # "linux" or "windows"')


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    return (node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef))


def test_modules_functions_and_templates_stay_short() -> None:
    """No module over 600 lines outside inputs/ (the recipe's checks are one list), no function over 60, no
    template over 150: a longer one is cut into named steps."""
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > 600 and not path.is_relative_to(PACKAGE / "inputs"):
            too_long.append(f"{path.relative_to(SRC)}: {lines} lines")
        for function in _functions(ast.parse(text)):
            length = (function.end_lineno or function.lineno) - function.lineno + 1
            if length > 60:
                too_long.append(f"{path.relative_to(SRC)}:{function.lineno}: {function.name}, {length} lines")
    for template in sorted((SRC.parent / "templates").glob("*.j2")):
        lines = len(template.read_text(encoding="utf-8").splitlines())
        if lines > 150:
            too_long.append(f"{template.name}: {lines} lines")
    assert too_long == []


# The build's extra (wheelfactory[build]): nox's render, plan, image and recipe sessions install the engine without it.
BUILD_TOOLS = ("auditwheel", "cibuildwheel", "delvewheel", "abi3audit", "pypiserver", "twine")
# A report of one wheel of cuprobe that shows no binary: completing the recipe from it changes nothing.
EMPTY_REPORT = {"wheels": [{"wheel": "w.whl", "dist_name": "cuprobe-cuda12x", "cuda": 12, "platform": "linux-x86_64"}]}


@pytest.mark.parametrize(
    "command",
    [
        ["render"],
        ["plan", "--compact"],
        ["image", "--help"],
        ["recipe", "--from-report", "r.json", "--recipe", "cuprobe"],
    ],
)
def test_the_commands_of_the_light_sessions_need_no_build_tools(project: Path, command: list[str]) -> None:
    """Each runs with the build's tools unimportable, as in a venv without the extra (CI's first step is `nox -s
    image`)."""
    (project / "r.json").write_text(json.dumps(EMPTY_REPORT))
    command = [str(project / c) if c == "r.json" else c for c in command]
    code = (
        f"import sys; sys.modules.update(dict.fromkeys({BUILD_TOOLS!r}))\n"
        "from wheelfactory.cli import main\n"
        f"raise SystemExit(main(['--root', {str(project)!r}, *{command!r}]))"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]


def test_the_architecture_page_names_every_module_and_data_file() -> None:
    """docs/architecture.md is the map: a module or data file it does not name is one a reader cannot find."""
    page = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    unnamed = [
        str(path.relative_to(PACKAGE))
        for path in sorted([*PACKAGE.rglob("*.py"), *(PACKAGE / "data").iterdir()])
        if path.name != "__init__.py" and f"`{path.name}" not in page and str(path.relative_to(PACKAGE)) not in page
    ]
    assert unnamed == []
