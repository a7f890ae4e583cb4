"""A setup.py read the way it runs, never run: the environment variables it reads, directly or through its own
helper functions (deepspeed's `get_env_if_set("DS_BUILD_OPS", ...)`, two levels deep), and which of them turn its
CUDA build on by what they gate, not by their spelling — a variable whose value decides an `if` that adds an
extension (`ext_modules.append(...)`, a CUDAExtension, an op-builder's `builder()`), itself or through a function
that test calls, is set to build (`1`); one compared with "cuda" (deepspeed's `DS_ACCELERATOR`, read in the
accelerator package its setup.py imports) is set to "cuda". Also whether it builds against torch through an
op-builder of its own (`get_accelerator().build_extension()`, whose package imports torch.utils.cpp_extension)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from .reading import SourceTree

MAX_MODULES = 300  # files of the packages setup.py imports that are read
_BUILDS = re.compile(r"\bext_modules\.append\b|\bCUDAExtension\(|\.builder\(\)|\bext_modules\s*\+=")
_TORCH_BUILD = re.compile(r"\bcpp_extension\b|\bCUDAExtension\b|\bBuildExtension\b")


_LINK_FLAG = re.compile(r"""["']-l(\w+)["']""")
_DOWNLOADS = re.compile(r"\burlretrieve\b|\burlopen\b|\brequests\.get\b")


@dataclass
class SetupReading:
    reads: dict[str, int] = field(default_factory=dict)  # a variable setup.py reads -> the line of the first read
    switches: dict[str, tuple[str, str]] = field(default_factory=dict)  # variable -> (value, where)
    torch: str = ""  # where setup.py reaches torch.utils.cpp_extension through its own op-builder
    links: dict[str, str] = field(default_factory=dict)  # a -l flag of its op-builders' -> where
    downloads: str = ""  # where setup.py downloads while it builds
    prunes: list[str] = field(default_factory=list)  # op-builders that narrow their GPU architectures (filter_ccs)


def _constant(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _called(node: ast.AST) -> str:
    func = node.func if isinstance(node, ast.Call) else None
    return str(getattr(func, "attr", getattr(func, "id", ""))) if func is not None else ""


def _key_of_read(node: ast.AST, helpers: dict[str, int]) -> ast.AST | None:
    """The key an environment read reads (os.environ[k], .get(k), os.getenv(k), k in os.environ, helper(k))."""
    if isinstance(node, ast.Subscript) and "environ" in ast.unparse(node.value):
        return node.slice
    if isinstance(node, ast.Call) and node.args:
        callee = ast.unparse(node.func)
        if callee.endswith(("environ.get", "getenv")):
            return node.args[0]
        index = helpers.get(_called(node))
        if index is not None and index < len(node.args):
            return node.args[index]
    if isinstance(node, ast.Compare) and any(isinstance(o, ast.In | ast.NotIn) for o in node.ops):
        return node.left if any("environ" in ast.unparse(c) for c in node.comparators) else None
    return None


def _helpers(modules: list[ast.Module]) -> dict[str, int]:
    """Functions that read the variable their parameter names -> that parameter's position; a function passing its
    parameter on to one of them is one too (two levels)."""
    functions = [n for m in modules for n in ast.walk(m) if isinstance(n, ast.FunctionDef)]
    helpers: dict[str, int] = {}
    for _ in range(2):
        for function in functions:
            parameters = [a.arg for a in function.args.args]
            for node in ast.walk(function):
                key = _key_of_read(node, helpers)
                if isinstance(key, ast.Name) and key.id in parameters and function.name not in helpers:
                    helpers[function.name] = parameters.index(key.id) - (parameters[:1] == ["self"])
    return helpers


def _variable(node: ast.AST, helpers: dict[str, int]) -> str | None:
    """The variable an expression reads, wherever in it (`int(get_env_if_set("DS_BUILD_OPS", 0))`)."""
    for inner in ast.walk(node):
        name = _constant(_key_of_read(inner, helpers))
        if name and re.fullmatch(r"[A-Za-z_]\w*", name):
            return name
    return None


def _local_modules(source: SourceTree, setup: ast.Module) -> dict[str, ast.Module]:
    """The modules of the source's own packages that setup.py imports at module level (all their files), by
    path."""
    names = {
        (a.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
        for node in setup.body
        if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0)
        for a in (node.names if isinstance(node, ast.Import) else node.names[:1])
    }
    modules: dict[str, ast.Module] = {}
    for name in sorted(n for n in names if n and (source.root / n / "__init__.py").is_file()):
        for path in sorted((source.root / name).rglob("*.py"))[:MAX_MODULES]:
            relative = path.relative_to(source.root).as_posix()
            module = source.python(PurePosixPath(relative))
            if module is not None and len(modules) < MAX_MODULES:
                modules[relative] = module
    return modules


def read_setup(source: SourceTree, setup: ast.Module) -> SetupReading:
    local = _local_modules(source, setup)
    helpers = _helpers([setup, *local.values()])
    found = SetupReading()
    for node in ast.walk(setup):
        name = _constant(_key_of_read(node, helpers))
        if name and re.fullmatch(r"[A-Za-z_]\w*", name):
            found.reads.setdefault(name, getattr(node, "lineno", 0))
    _gated(setup, helpers, found)
    for module in [setup, *local.values()]:
        _compared_with_cuda(module, helpers, found)
    downloads = _DOWNLOADS.search(source.text("setup.py"))
    if downloads:
        found.downloads = f"setup.py:{source.text('setup.py').count(chr(10), 0, downloads.start()) + 1}"
    if "cmdclass" not in ast.unparse(setup) and "ext_modules" not in ast.unparse(setup):
        return found
    for path, module in local.items():  # the package's op-builders, which make setup.py's extensions
        found.prunes += [f"{path}:{method.lineno}" for method in _pruning(module)]
        text = source.text(path)
        if _TORCH_BUILD.search(text) and not found.torch:
            found.torch = (
                f"setup.py builds its extensions through its own op-builders ({path} uses torch.utils.cpp_extension)"
            )
        for match in _LINK_FLAG.finditer(text):
            found.links.setdefault(match[1], f"{path}:{text.count(chr(10), 0, match.start()) + 1}")
    return found


def _pruning(module: ast.Module) -> list[ast.FunctionDef]:
    """An op-builder's filter_ccs() that drops some of the architectures it is given: one that tests them (not
    the base class's, which returns them all)."""
    return [
        method
        for node in module.body
        if isinstance(node, ast.ClassDef)
        for method in node.body
        if isinstance(method, ast.FunctionDef) and method.name == "filter_ccs"
        and any(isinstance(n, ast.If) or getattr(n, "ifs", None) for n in ast.walk(method))
    ]  # fmt: skip


def _gated(setup: ast.Module, helpers: dict[str, int], found: SetupReading) -> None:
    """Variables whose value decides whether an extension is added."""
    assigned = {
        target.id: (variable, _through(node.value, helpers), _value_on(node.value))
        for node in ast.walk(setup)
        if isinstance(node, ast.Assign) and (variable := _variable(node.value, helpers))
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    functions = {n.name: n for n in ast.walk(setup) if isinstance(n, ast.FunctionDef)}
    for node in ast.walk(setup):
        if not isinstance(node, ast.If) or not _BUILDS.search("\n".join(ast.unparse(s) for s in node.body)):
            continue
        # What `not` negates turns the build off when set (CAUSAL_CONV1D_SKIP_CUDA_BUILD): no switch to set.
        negated = {id(n) for u in ast.walk(node.test) if isinstance(u, ast.UnaryOp) for n in ast.walk(u.operand)}
        tested = [n for n in ast.walk(node.test) if id(n) not in negated]
        tested += [inner for n in tested if _called(n) in functions for inner in ast.walk(functions[_called(n)])]
        for inner in tested:
            variable, helper, value = None, "", "1"
            if isinstance(inner, ast.Call | ast.Subscript):
                variable, helper, value = _variable(inner, helpers), _through(inner, helpers), _value_on(inner)
            if isinstance(inner, ast.Name) and inner.id in assigned:
                variable, helper, value = assigned[inner.id]
            if variable and variable not in found.switches:
                how = f" (read through {helper}())" if helper else ""
                where = f"setup.py:{node.lineno} adds its extensions where {variable} is set{how}"
                found.switches[variable] = (value, where)


def _value_on(node: ast.AST) -> str:
    """The value that makes a read true: the text it is compared with (`== "TRUE"`), else 1."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Compare) and isinstance(inner.ops[0], ast.Eq):
            literal = next((c for c in map(_constant, [inner.left, *inner.comparators]) if c), None)
            if literal:
                return literal
    return "1"


def _through(node: ast.AST, helpers: dict[str, int]) -> str:
    """The helper function an expression reads its variable through; empty for a direct read."""
    return next((_called(n) for n in ast.walk(node) if _called(n) in helpers), "")


def _compared_with_cuda(module: ast.Module, helpers: dict[str, int], found: SetupReading) -> None:
    """A variable compared with "cuda" (directly, or through the name it was read into): the value that picks
    the CUDA build."""
    names = {
        target.id: variable
        for node in ast.walk(module)
        if isinstance(node, ast.Assign) and (variable := _variable(node.value, helpers))
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(module):
        if not isinstance(node, ast.Compare) or not any(isinstance(o, ast.Eq) for o in node.ops):
            continue
        sides = [node.left, *node.comparators]
        literal = next((c for s in sides if (c := _constant(s)) and c.lower() == "cuda"), None)
        if literal is None:
            continue
        for side in sides:
            variable = names.get(side.id) if isinstance(side, ast.Name) else _variable(side, helpers)
            if variable and variable not in found.switches:
                where = f"line {node.lineno} of setup.py or a module of its own it imports: {variable} == {literal!r}"
                found.switches[variable] = (literal, where)
