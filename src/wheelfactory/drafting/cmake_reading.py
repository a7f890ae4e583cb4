"""A source's CMake build read the way CMake runs it, never run: from the CMakeLists.txt the build configures
(scikit-build-core's `cmake.source-dir`; a setup.py that drives CMake; a source with no Python build of its own),
down its add_subdirectory and include chain — vendored trees too, since the build reaches them — each command
with the if() conditions around it.

- A switch is what a CUDA-enabling command (enable_language(CUDA), project(... CUDA), find_package(CUDAToolkit),
  check_language(CUDA)) is guarded by, whatever its spelling: an option or cache variable OFF by default
  (`-DX=ON`), or a variable compared with "cuda" (`-DCOMPUTE_BACKEND=cuda`). The project's own switches win over
  those of the subprojects it vendors (LightGBM's nanoarrow has CUDA options of its own).
- A CUDA library counts where target_link_libraries links it (a `CUDA::` target, FindCUDA's `${CUDA_x_LIBRARY}`,
  a bare link name, or a variable holding them), under conditions that hold once the switches are on; a target
  named in `list(REMOVE_ITEM ...)` or behind another OFF option is no link.
- Architectures the build sets itself: `CMAKE_CUDA_ARCHITECTURES` or a variable of its own (`*_CUDA_ARCHS`) —
  a cache variable (or one set only where undefined) takes the variant's through `-D`; one set plainly overrides
  any `-D`, so nvcc gets the variant's appended (`NVCC_APPEND_FLAGS`)."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ..errors import BadBytes
from ..untrusted.trees import inside
from .reading import SourceTree, table

MAX_FILES = 200  # CMake files followed in one chain
MAX_CHAIN_BYTES = 8 << 20  # their text, all told: a real chain (LightGBM's with nanoarrow) is under 200 KiB
MAX_COMMANDS = 200_000  # commands read from one file
MAX_ITEMS = 10_000  # link items of one command, variables expanded
_WORD = re.compile(r"[A-Za-z_]\w*")
_VARIABLE = re.compile(r"^\$\{(\w+)\}$")
_ENABLES_CUDA = {"enable_language", "project", "check_language"}
_COMMAND = re.compile(r"([A-Za-z_]\w*)[ \t]*\(")
_BRACKET_OPEN = re.compile(r"\[(=*)\[")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"?', re.DOTALL)
_UNQUOTED = re.compile(r'(?:[^\s()#"\\]|\\.)+')
_ARCH_VARIABLE = re.compile(r"\w*CUDA_ARCH\w*", re.IGNORECASE)
_OFF = {"OFF", "FALSE", "0", "NO", "N", "", "IGNORE", "NOTFOUND"}
_OPERATORS = {"AND", "OR", "NOT", "DEFINED", "(", ")", "COMMAND", "TARGET", "EXISTS", "POLICY", "TEST"}
_COMPARES = {"STREQUAL", "MATCHES", "EQUAL", "STRLESS", "STRGREATER", "VERSION_EQUAL", "IN_LIST"}


@dataclass(frozen=True)
class Command:
    """One CMake command as the build meets it: lowercased name, arguments, where, the conditions around it (each
    the if()'s arguments, with a leading NOT for an else branch) and how deep in the add_subdirectory chain."""

    name: str
    args: tuple[str, ...]
    where: str  # file:line
    conditions: tuple[tuple[str, ...], ...]
    depth: int
    in_function: bool


@dataclass
class CMakeBuild:
    """What the chain says: each with where it was read."""

    files: list[str] = field(default_factory=list)
    switches: dict[str, tuple[str, str]] = field(default_factory=dict)  # variable -> (value, where)
    links: dict[str, str] = field(default_factory=dict)  # link name (CUDA::x's x) -> where
    arch_args: dict[str, str] = field(default_factory=dict)  # -DVAR=$CMAKE_CUDA_ARCHITECTURES -> where
    append_gencode: str = ""  # where an architecture list no -D reaches is set
    shared_runtime: str = ""  # where CUDA_RUNTIME_LIBRARY Shared asks for libcudart.so


def _skip_bracket(text: str, i: int) -> int | None:
    """The end of a bracket argument or comment opening at i (`[[`, `[==[`), None where none opens there."""
    match = _BRACKET_OPEN.match(text, i)
    if not match:
        return None
    end = text.find(f"]{match[1]}]", match.end())
    return len(text) if end < 0 else end + len(match[1]) + 2


def _arguments(text: str, i: int) -> tuple[list[str], int]:
    """The arguments of a command whose `(` is at i, and the offset after its `)`: quoted, bracket and unquoted
    arguments, nested parentheses kept as tokens, comments dropped."""
    args: list[str] = []
    depth, i = 1, i + 1
    while i < len(text):
        char = text[i]
        if char in " \t\r\n":
            i += 1
        elif char == "#":
            i = _comment_end(text, i)
        elif char == '"':
            match = _QUOTED.match(text, i)
            assert match is not None  # a quote always starts one
            args.append(match[1])
            i = match.end()
        elif char == "[" and _skip_bracket(text, i) is not None:
            end = _skip_bracket(text, i) or len(text)
            args.append(text[i:end])
            i = end
        elif char in "()":
            depth += 1 if char == "(" else -1
            i += 1
            if depth == 0:
                return args, i
            args.append(char)
        else:
            match = _UNQUOTED.match(text, i)
            args.append(match[0] if match else char)
            i = match.end() if match else i + 1
    return args, i


def _comment_end(text: str, i: int) -> int:
    """The end of the comment opening at i: a bracket comment's close, else the line's end."""
    end = _skip_bracket(text, i + 1)
    if end is not None:
        return end
    line_end = text.find("\n", i)
    return len(text) if line_end < 0 else line_end


def parse_commands(text: str) -> list[tuple[str, list[str], int]]:
    """Every command of a CMake file: (lowercased name, arguments, line), in order; comments skipped. Linear in
    the text, whatever it holds: a word is looked at from its start only."""
    found: list[tuple[str, list[str], int]] = []
    i, line_starts = 0, [m.start() for m in re.finditer("\n", text)]
    while i < len(text) and len(found) < MAX_COMMANDS:
        if text[i] == "#":
            i = _comment_end(text, i)
            continue
        mid_word = i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")
        match = None if mid_word else _COMMAND.match(text, i)
        if not match:
            i += 1
            continue
        args, end = _arguments(text, match.end() - 1)
        found.append((match[1].lower(), args, 1 + bisect.bisect_left(line_starts, i)))
        i = end
    return found


def entry(source: SourceTree) -> str | None:
    """The CMakeLists.txt the build configures; None where the Python build runs no CMake (torch-scatter's
    setup.py builds with cpp_extension and never reads its CMakeLists)."""
    pyproject = source.toml("pyproject.toml")
    backend = str(table(pyproject, "build-system").get("build-backend", ""))
    if "scikit_build_core" in backend or "py_build_cmake" in backend or "cmake" in backend.lower():
        folder = table(pyproject, "tool", "scikit-build", "cmake").get("source-dir", ".")
        return (PurePosixPath(str(folder)) / "CMakeLists.txt").as_posix()
    setup = source.text("setup.py")
    if setup and source.python("setup.py") is not None:
        runs_cmake = re.search(r"""["']cmake["']|\bskbuild\b|CMakeExtension|CMakeBuild|cmake_build""", setup)
        return "CMakeLists.txt" if runs_cmake else None
    return "CMakeLists.txt"


@dataclass
class _Walk:
    source: SourceTree
    top: PurePosixPath  # the folder of the CMakeLists the build configures
    read: int = 0  # bytes of CMake read so far
    commands: list[Command] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)


def _resolve(folder: PurePosixPath, given: str, top: PurePosixPath) -> PurePosixPath | None:
    """A path argument relative to the current source folder (or the top one, for CMAKE_SOURCE_DIR and
    PROJECT_SOURCE_DIR: a vendored project's own project() aside); None where it names a variable this cannot
    know."""
    for prefix, base in (
        ("${CMAKE_CURRENT_SOURCE_DIR}", folder),
        ("${CMAKE_CURRENT_LIST_DIR}", folder),
        ("${PROJECT_SOURCE_DIR}", top),
        ("${CMAKE_SOURCE_DIR}", top),
    ):
        if given.startswith(prefix):
            given, folder = given.removeprefix(prefix).lstrip("/") or ".", base
    if "${" in given or given.startswith("/") or not given:
        return None
    parts: list[str] = list(folder.parts)
    for part in PurePosixPath(given).parts:
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part != ".":
            parts.append(part)
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def _follow(walk: _Walk, relative: PurePosixPath, depth: int, outer: tuple[tuple[str, ...], ...]) -> None:
    """The commands of one CMake file, then of what it includes or adds, in the order CMake meets them."""
    key = relative.as_posix()
    if key in walk.seen or len(walk.seen) >= MAX_FILES:
        return
    try:
        inside(walk.source.root, relative)
    except BadBytes as refused:
        walk.source.noted(refused)
        return
    text = walk.source.text(relative)
    if not text:
        return
    walk.read += len(text)
    if walk.read > MAX_CHAIN_BYTES:
        walk.source.noted(BadBytes(f"{key}: past the {MAX_CHAIN_BYTES >> 20} MiB of CMake files read in one chain"))
        return
    walk.seen.add(key)
    conditions: list[tuple[str, ...]] = []
    functions = 0
    for name, args, line in parse_commands(text):
        if name == "if":
            conditions.append(tuple(args))
        elif name in ("elseif", "else") and conditions:
            conditions[-1] = tuple(args) if name == "elseif" else ("NOT", "(", *conditions[-1], ")")
        elif name == "endif" and conditions:
            conditions.pop()
        elif name in ("function", "macro"):
            functions += 1
        elif name in ("endfunction", "endmacro"):
            functions = max(0, functions - 1)
        around = (*outer, *conditions)
        walk.commands.append(Command(name, tuple(args), f"{key}:{line}", around, depth, functions > 0))
        if name == "add_subdirectory" and args:
            target = _resolve(relative.parent, args[0], walk.top)
            if target is not None:
                _follow(walk, target / "CMakeLists.txt", depth + 1, around)
        elif name == "include" and args and args[0].endswith(".cmake"):
            target = _resolve(relative.parent, args[0], walk.top)
            if target is not None:
                _follow(walk, target, depth, around)


def _defaults(commands: list[Command]) -> dict[str, str]:
    """Options and cache variables -> their default value (uppercased)."""
    defaults: dict[str, str] = {}
    for command in commands:
        if command.name == "option" and command.args:
            defaults.setdefault(command.args[0], (command.args[2] if len(command.args) > 2 else "OFF").upper())
        elif command.name == "cmake_dependent_option" and len(command.args) > 2:
            defaults.setdefault(command.args[0], command.args[2].upper())
        elif command.name == "set" and "CACHE" in command.args[1:]:
            value = command.args[1] if command.args.index("CACHE") > 1 else ""
            defaults.setdefault(command.args[0], value.upper())
    return defaults


def _operands(condition: tuple[str, ...]) -> list[tuple[str, bool, str | None]]:
    """The variables an if() tests: (name, negated, the literal it is compared with)."""
    found: list[tuple[str, bool, str | None]] = []
    negated = False
    for i, token in enumerate(condition):
        if token == "NOT":
            negated = not negated
            continue
        # DEFINED X asks whether X is set at all, not what it holds; a compared value is no variable tested.
        if token in _OPERATORS or token in _COMPARES or (i and condition[i - 1] in {*_COMPARES, "DEFINED"}):
            negated = negated if token == "(" else False
            continue
        name = _VARIABLE.match(token)
        variable = name[1] if name else token
        if _WORD.fullmatch(variable):
            compared = condition[i + 2] if i + 2 < len(condition) and condition[i + 1] in _COMPARES else None
            found.append((variable, negated, compared))
        negated = False
    return found


def _enables_cuda(command: Command) -> bool:
    if command.name in _ENABLES_CUDA:
        return "CUDA" in command.args[(1 if command.name == "project" else 0) :]
    return command.name == "find_package" and bool(command.args) and command.args[0] in ("CUDAToolkit", "CUDA")


def _gate_shown(gate: Command) -> str:
    """Where a CUDA-enabling command is and what it is, in words of ours (its arguments are the source's)."""
    what = f"find_package({gate.args[0]})" if gate.name == "find_package" else f"{gate.name}(... CUDA)"
    return f"{gate.where} {what}"


def _switches(commands: list[Command], defaults: dict[str, str]) -> dict[str, tuple[str, str]]:
    """What turns CUDA on, from the shallowest level of the chain that enables CUDA at all."""
    gates = [c for c in commands if _enables_cuda(c)]
    if not gates:
        return {}
    shallowest = min(c.depth for c in gates)
    switches: dict[str, tuple[str, str]] = {}
    for gate in (c for c in gates if c.depth == shallowest):
        for condition in gate.conditions:
            for variable, negated, compared in _operands(condition):
                if negated or variable.startswith("CMAKE_") or variable in switches:
                    continue
                if compared is not None and "cuda" in compared.lower():
                    switches[variable] = (compared, _gate_shown(gate))
                elif compared is None and defaults.get(variable, "ON") in _OFF:
                    switches[variable] = ("ON", _gate_shown(gate))
    return switches


def _holds(command: Command, defaults: dict[str, str], switches: dict[str, tuple[str, str]]) -> bool:
    """Whether the command runs once the switches are on: no condition around it tests an option left OFF."""
    for condition in command.conditions:
        for variable, negated, compared in _operands(condition):
            on = variable in switches or defaults.get(variable, "ON") not in _OFF
            if compared is None and variable in defaults and on == negated:
                return False
            if compared is not None and variable in switches and switches[variable][0] != compared and not negated:
                return False
    return True


def read_cmake_chain(source: SourceTree) -> CMakeBuild | None:
    """The CMake build as the source's build runs it; None where the build runs none."""
    first = entry(source)
    if first is None:
        return None
    walk = _Walk(source, PurePosixPath(first).parent)
    _follow(walk, PurePosixPath(first), 0, ())
    found = CMakeBuild(files=sorted(walk.seen))
    defaults = _defaults(walk.commands)
    found.switches = _switches(walk.commands, defaults)
    running = [c for c in walk.commands if _holds(c, defaults, found.switches)]
    _links(running, found)
    _architectures(running, defaults, found)
    return found


def _links(commands: list[Command], found: CMakeBuild) -> None:
    held: dict[str, list[str]] = {}  # a variable -> the link items set() or list(APPEND) put in it
    for command in commands:
        if command.name == "set" and command.args:
            held[command.args[0]] = list(command.args[1:])
        elif command.name == "list" and len(command.args) > 2 and command.args[0] == "APPEND":
            held.setdefault(command.args[1], []).extend(command.args[2:])
        elif command.name in ("target_link_libraries", "link_libraries"):
            linked = command.args[1:] if command.name == "target_link_libraries" else command.args  # not the target
            for item in _expanded(linked, held):
                for name in _link_names(item):
                    found.links.setdefault(name, f"{command.where} {command.name}")
        elif _asks_shared_runtime(command):
            found.shared_runtime = found.shared_runtime or command.where


def _asks_shared_runtime(command: Command) -> bool:
    """CUDA_RUNTIME_LIBRARY Shared (a target's) or CMAKE_CUDA_RUNTIME_LIBRARY Shared: libcudart.so, not the static
    runtime CMake links by default."""
    if command.name == "set_target_properties":
        return _property(command.args, "CUDA_RUNTIME_LIBRARY") == "SHARED"
    return command.name == "set" and command.args[:2] == ("CMAKE_CUDA_RUNTIME_LIBRARY", "Shared")


def _expanded(args: tuple[str, ...], held: dict[str, list[str]]) -> list[str]:
    """The link items of a command, variables holding them expanded (four levels deep, MAX_ITEMS at most: a
    variable named a thousand times in one that is named a thousand times is not multiplied out)."""
    items: list[str] = []
    pending = [(arg, 0) for arg in reversed(args)]
    while pending and len(items) < MAX_ITEMS:
        arg, depth = pending.pop()
        variable = _VARIABLE.match(arg)
        if variable and variable[1] in held and depth < 4:
            pending += [(item, depth + 1) for item in reversed(held[variable[1]])][: MAX_ITEMS - len(items)]
        else:
            items += arg.split(";")
    return items


def _link_names(item: str) -> list[str]:
    """The link names an item of target_link_libraries names: CUDA::x, FindCUDA's ${CUDA_x_LIBRARY}, -lx or x."""
    target = re.fullmatch(r"CUDA::(\w+)", item) or re.fullmatch(r"\$\{CUDA_(\w+?)_LIBRAR(?:Y|IES)\}", item)
    if target:
        return [target[1]]
    bare = re.fullmatch(r"(?:-l)?(\w+)", item)
    return [bare[1]] if bare and bare[1] not in ("PRIVATE", "PUBLIC", "INTERFACE") else []


def _property(args: tuple[str, ...], name: str) -> str:
    return args[args.index(name) + 1].upper() if name in args[:-1] else ""


def _architectures(commands: list[Command], defaults: dict[str, str], found: CMakeBuild) -> None:
    """Where the build sets its own GPU architectures, and how the variant's reach them."""
    reaching = {
        m[1]
        for c in commands
        if c.name == "set_target_properties" or c.args[:1] == ("CMAKE_CUDA_ARCHITECTURES",)
        for arg in c.args
        for m in re.finditer(r"\$\{(\w+)\}", arg)
    }
    for command in commands:
        if command.name != "set" or len(command.args) < 2 or not _ARCH_VARIABLE.fullmatch(command.args[0]):
            continue
        variable = command.args[0]
        own = variable != "CMAKE_CUDA_ARCHITECTURES"
        if own and variable not in reaching:
            continue
        guarded = command.in_function or any("DEFINED" in c or variable in c for c in command.conditions)
        if "CACHE" in command.args or variable in defaults or guarded:
            found.arch_args.setdefault(f"-D{variable}=$CMAKE_CUDA_ARCHITECTURES", f"{command.where} sets {variable}")
        else:
            found.append_gencode = found.append_gencode or f"{command.where} sets {variable}, which no -D overrides"
