"""What a source's build does with CUDA, read as text and never run: the CUDA libraries it links (CMake's
`CUDA::` targets, setup.py's `libraries=`, the exclusions of its own repair command), whether it compiles against
torch, the switches that turn CUDA on (a CMake `option` defaulting OFF, the source's own cibuildwheel settings,
which the factory's replace), the architectures it would pick over the variant's, and what its setup.py reads from
the environment."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, get_args

from ..components import OS, component_table, operating_system, platforms
from ..inputs.recipe_checks import RESERVED_ENVIRONMENT
from ..source_metadata import pkg_info, source_build_requires, source_project, source_pyproject
from ..untrusted.shown import shown
from ..untrusted.trees import Lines, walk
from .cmake_reading import read_cmake_chain
from .reading import Guess, SourceTree, table
from .setup_reading import read_setup

_HARD_CODED_ARCHS = re.compile(r"-gencode|--generate-code|arch=compute_\d+|-arch[= ]sm_\d+|CUDA_ARCHITECTURES\s+\d")
_LINK_FLAG = re.compile(r"""["']-l(\w+)["']""")
_EXCLUDE = re.compile(r"--exclude[= ]+([^\s\"']+)")
# What a build against torch's C++ API shows in setup.py.
_TORCH_BUILD = re.compile(r"\bcpp_extension\b|\bCUDAExtension\b|\bBuildExtension\b")
# A variable a setup.py reads that forces its CUDA build (FORCE_CUDA, TORCH_SCATTER_FORCE_CUDA... _FORCE_BUILD).
_FORCES_CUDA = re.compile(r"FORCE_(CUDA|BUILD)$|^FORCE_CUDA$")
# What a draft's comment says of a variable that turns the source's CUDA build on (the no-CUDA gate names them).
_SWITCH_DECISIONS = ("turns its CUDA build on", "forces the CUDA build")
# CMake's and the link line's names for the driver, which no component is.
DRIVER_NAMES = frozenset({"cuda", "cuda_driver"})
# Variables a setup.py reads whose values the factory gives (CUDA_HOME and its kin) or cibuildwheel does.
FACTORY_GIVES = frozenset({*RESERVED_ENVIRONMENT, "CUDAHOME", "CUDA_ROOT", "CIBUILDWHEEL", "PATH"})


@dataclass
class CudaBuild:
    """What the build's files say, each with where it was read."""

    torch: Guess[bool] | None = None
    components: dict[str, str] = field(default_factory=dict)  # component -> where its library is linked
    static: dict[str, str] = field(default_factory=dict)  # a statically linked CUDA library -> where
    driver: str = ""  # where the driver is linked, if it is
    cmake_args: list[Guess[str]] = field(default_factory=list)  # -DNAME=VALUE, each with why
    environment: dict[str, Guess[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the user must look at; no field says it
    platforms: Guess[list[str]] | None = None


@cache
def link_names() -> dict[str, str]:
    """A CUDA library's link name (cufft, cublasLt; lowercased) -> its component, from the component table's Linux
    sonames (libcufft.so.11 -> cufft) of every major."""
    table_ = component_table()
    names: dict[str, str] = {}
    for name in table_.names():
        if table_.components[name].role != "runtime":
            continue
        for major in table_.components[name].majors:
            entry = table_.get(name, major)
            layout = entry.layout("linux") if entry else None
            for library in layout.libraries if layout else ():
                match = re.match(r"lib([\w-]+?)\.so", library)
                if match:
                    names.setdefault(match[1].lower(), name)
    return names


def _link(found: CudaBuild, name: str, where: str) -> None:
    """Record one linked library by its link name, if it is a CUDA one."""
    base = name.lower()
    static = base.endswith("_static")
    base = base.removesuffix("_static")
    if base in DRIVER_NAMES:
        found.driver = found.driver or where
        return
    component = link_names().get(base)
    if component is None:
        return
    if static:
        found.static.setdefault(component, where)
    else:
        found.components.setdefault(component, where)


def read_cuda_build(source: SourceTree) -> CudaBuild:
    found = CudaBuild()
    _not_source(source.root, found)
    _read_cmake(source, found)
    _read_setup_py(source, found)
    _read_own_cibuildwheel(source.root, found)
    found.torch = _torch(source) or found.torch
    found.platforms = _platforms(source.root)
    return found


_PREBUILT = re.compile(r".+\.(so(\.\d+)*|dll|dylib|pyd)")
_COMPILED = re.compile(r".+\.(cu|cuh|c|cc|cpp|cxx)")


def _not_source(tree: Path, found: CudaBuild) -> None:
    """An sdist that carries binaries built elsewhere: the build may ship them, and where it holds nothing a
    compiler reads, it cannot make its CUDA code at all (bitsandbytes 0.42.0's sdist holds 21 prebuilt libraries and
    no source). A pure Python source, which holds neither, is told nothing."""
    prebuilt, compiled = [], 0
    for entry in walk(tree, lambda folder: folder.name in (".git", "__pycache__")):
        if _PREBUILT.fullmatch(entry.name) and not entry.is_symlink():
            prebuilt.append(entry.relative_to(tree).as_posix())
        compiled += bool(_COMPILED.fullmatch(entry.name))
    if not prebuilt:
        return
    names = ", ".join(shown(p) for p in prebuilt[:3]) + (f" and {len(prebuilt) - 3} more" if prebuilt[3:] else "")
    if compiled:
        found.notes.append(
            f"the source carries {len(prebuilt)} prebuilt binaries ({names}) beside its source: check that the "
            "wheel's are the ones its build makes (the audit reads each binary's device code)"
        )
    else:
        found.notes.append(
            f"the source carries {len(prebuilt)} prebuilt binaries ({names}) and no compiled source (.cu, .c, "
            ".cpp): nothing in it builds CUDA code — draft from the repository instead: `nox -s recipe -- --git "
            "URL --rev COMMIT`"
        )


def cuda_switches(tree: Path) -> dict[str, str]:
    """The switches a draft turns the source's CUDA build on with -> how it sets each and where it was read: what
    a build that left CUDA out most likely missed."""
    found = read_cuda_build(SourceTree(tree))
    switches = {
        g.value[2:].split("=")[0]: f"CMAKE_ARGS {g.value} ({g.read_from})"
        for g in found.cmake_args
        if " is guarded by " in g.read_from
    }
    switches |= {
        n: f"{n}={g.value} ({g.read_from})" for n, g in found.environment.items() if g.decide in _SWITCH_DECISIONS
    }
    return switches


def _shown_path(tree: Path, path: Path) -> str:
    return str(path.relative_to(tree))


def _defined_by_source(tree: Path) -> set[str]:
    """The CMake variables the source's own pyproject defines for its build (scikit-build-core's cmake.define,
    -D in cmake.args): a switch it already turns on needs no recipe."""
    settings = table(source_pyproject(tree), "tool", "scikit-build", "cmake")
    defined = set(settings.get("define", {})) if isinstance(settings.get("define"), dict) else set()
    for arg in settings.get("args", []) if isinstance(settings.get("args"), list) else []:
        match = re.match(r"-D(\w+)", str(arg))
        if match:
            defined.add(match[1])
    return defined


def _read_cmake(source: SourceTree, found: CudaBuild) -> None:
    """The CMake build as the source's build runs it (cmake_reading.py): its switches, links, architectures."""
    chain = read_cmake_chain(source)
    if chain is None:
        return
    defined = _defined_by_source(source.root)
    for name, (value, where) in chain.switches.items():
        if name not in defined:
            why = "the CUDA build is off by default" if value == "ON" else f"CUDA is built where it is {value}"
            found.cmake_args.append(Guess(f"-D{name}={value}", f"{where} is guarded by {name}", why))
    for name, where in chain.links.items():
        _link(found, name, where)
    if chain.shared_runtime and "cudart" not in found.components:
        found.components["cudart"] = f"{chain.shared_runtime} CUDA_RUNTIME_LIBRARY Shared"
    for arg, where in chain.arch_args.items():
        if arg.split("=")[0][2:] not in defined:
            found.cmake_args.append(Guess(arg, where, "else it picks its own GPUs"))
    if chain.append_gencode:
        found.environment["NVCC_APPEND_FLAGS"] = Guess(
            "$NVCC_GENCODE", chain.append_gencode, "nvcc appends the variant's architectures to its own"
        )
    for file in chain.files:
        text = source.text(file)
        _hard_coded(found, text, Lines(text), file)


def _gencode(found: CudaBuild, text: str, lines: Lines) -> None:
    """nvcc gets the variant's architectures appended where setup.py gives it none (nvcc's default GPU alone) or
    hard-codes its own -gencode under torch: cpp_extension then leaves out TORCH_CUDA_ARCH_LIST's."""
    compiles_cuda = "nvcc" in text and re.search(r"\.cu['\"]", text) is not None
    hard_coded = _HARD_CODED_ARCHS.search(text)
    torch = _TORCH_BUILD.search(text)
    if compiles_cuda and not torch and not hard_coded:
        where = "setup.py compiles .cu files with nvcc and names no GPU architecture"
        found.environment["NVCC_APPEND_FLAGS"] = Guess("$NVCC_GENCODE", where, "else nvcc's default GPU alone")
    elif torch and hard_coded:
        where = (
            f"setup.py:{lines.of(hard_coded.start())} hard-codes nvcc's GPU architectures, so "
            "torch.utils.cpp_extension leaves out TORCH_CUDA_ARCH_LIST's"
        )
        found.environment["NVCC_APPEND_FLAGS"] = Guess("$NVCC_GENCODE", where, "nvcc appends the variant's to them")
    else:
        _hard_coded(found, text, lines, "setup.py")


def _hard_coded(found: CudaBuild, text: str, lines: Lines, shown: str) -> None:
    match = _HARD_CODED_ARCHS.search(text)
    if match and "NVCC_APPEND_FLAGS" not in found.environment:
        found.notes.append(
            f"{shown}:{lines.of(match.start())} names GPU architectures itself: the audit holds every binary "
            "to the variant's (SASS for each, PTX for the newest) — pass the factory's ($NVCC_GENCODE, "
            "$CMAKE_CUDA_ARCHITECTURES) if the build lets you, or narrow a binary on purpose in device_code_archs"
        )


def _read_setup_py(source: SourceTree, found: CudaBuild) -> None:
    module = source.python("setup.py")
    if module is None:
        return
    text = source.text("setup.py")
    lines = Lines(text)
    for node in ast.walk(module):
        if isinstance(node, ast.keyword) and node.arg == "libraries" and isinstance(node.value, ast.List | ast.Tuple):
            for element in node.value.elts:
                if isinstance(element, ast.Constant) and isinstance(element.value, str):
                    _link(found, element.value, f"setup.py:{element.lineno} libraries=[...]")
    for match in _LINK_FLAG.finditer(text):
        _link(found, match[1], f"setup.py:{lines.of(match.start())}")
    _gencode(found, text, lines)
    setup = read_setup(source, module)
    for name, (value, where) in setup.switches.items():
        if name not in FACTORY_GIVES:
            found.environment.setdefault(name, Guess(value, where, _SWITCH_DECISIONS[0]))
    if setup.torch and found.torch is None:
        found.torch = Guess(True, setup.torch)
    for name, where in setup.links.items():
        _link(found, name, where)
    if setup.prunes:
        found.notes.append(
            f"{', '.join(setup.prunes[:3])} filter_ccs() narrow the GPU architectures an op-builder compiles for "
            "(of TORCH_CUDA_ARCH_LIST): give its module device_code_archs, which the first build's audit names"
        )
    if setup.downloads:
        found.notes.append(
            f"{setup.downloads} downloads while it builds (a prebuilt wheel, say): the factory's build has no "
            "network — set the variable that makes it build instead (a *_FORCE_BUILD), or declare the download in "
            "extra_sources"
        )
    reads = setup.reads
    source_lines = text.split("\n")
    for name, line in reads.items():
        if _FORCES_CUDA.search(name) and name not in found.environment:
            # On the line that reads it: `FORCE = os.environ.get("PKG_FORCE_CUDA", "0") == "TRUE"`.
            after = source_lines[line - 1].partition(name)[2] if 0 < line <= len(source_lines) else ""
            value = "TRUE" if re.search(r"==\s*['\"]TRUE['\"]", after) else "1"
            found.environment[name] = Guess(value, f"setup.py:{line} reads {name}", _SWITCH_DECISIONS[1])
    others = [n for n in reads if n not in FACTORY_GIVES and n not in found.environment]
    if others:
        found.notes.append(
            f"setup.py reads {', '.join(others)} from the environment: set in `environment` those the CUDA build "
            "needs (the factory sets CUDA_HOME, CUDA_PATH and puts nvcc on PATH)"
        )


def _read_own_cibuildwheel(tree: Path, found: CudaBuild) -> None:
    """The source's [tool.cibuildwheel]: the factory's replaces it in the variant's pyproject, so what it sets
    for the build must move into the recipe."""
    own = table(source_pyproject(tree), "tool", "cibuildwheel")
    settings = own.get("config-settings", {})
    if isinstance(settings, dict):
        for key, value in settings.items():
            name = str(key).removeprefix("cmake.define.")
            if name == str(key) or "CMAKE_CUDA_ARCHITECTURES" in name:
                continue  # not a CMake definition; the architectures are the factory's
            where = f"pyproject.toml [tool.cibuildwheel] config-settings {name}"
            found.cmake_args.append(Guess(f"-D{name}={value}", where, "the factory's cibuildwheel table replaces it"))
    for section in (own, table(own, "linux")):
        environment = section.get("environment", {})
        for name, value in environment.items() if isinstance(environment, dict) else ():
            if str(name) not in FACTORY_GIVES and str(name) not in found.environment:
                where = "pyproject.toml [tool.cibuildwheel] environment"
                found.environment[str(name)] = Guess(str(value), where, "the factory's cibuildwheel table replaces it")
        for command in _strings(section.get("repair-wheel-command")):
            for match in _EXCLUDE.finditer(command):
                for library in match[1].split(";"):
                    _excluded(found, library)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []


def _excluded(found: CudaBuild, library: str) -> None:
    """A library the source's own repair command leaves out of its wheel: one of NVIDIA's is a component."""
    table_ = component_table()
    majors = sorted({major for component in table_.components.values() for major in component.majors})
    for os_name in get_args(OS):
        for major in majors:
            owner = table_.owner_of(library, major, os_name, table_.names())
            if owner is not None:
                where = "pyproject.toml [tool.cibuildwheel] repair-wheel-command excludes it"
                found.components.setdefault(owner, where)
                return


def _torch(source: SourceTree) -> Guess[bool] | None:
    text = source.text("setup.py")
    match = _TORCH_BUILD.search(text)
    if match:
        return Guess(True, f"setup.py:{Lines(text).of(match.start())} builds with torch.utils.cpp_extension")
    requires = source_build_requires(source.root) or []
    if any(re.match(r"torch\b", line.strip()) for line in requires):
        return Guess(True, "pyproject.toml [build-system] requires torch")
    return None


def _platforms(tree: Path) -> Guess[list[str]] | None:
    """The platforms whose operating system the source's classifiers name, where they name any: a classifier
    names an OS by its own or by one that contains it ("Operating System :: POSIX" names Linux)."""
    project = source_project(tree) or {}
    given = project.get("classifiers") or pkg_info(tree).get("classifiers")
    classifiers = [c for c in given if isinstance(c, str)] if isinstance(given, list) else []
    systems = [c for c in classifiers if c.startswith("Operating System ::")]
    if not systems or any("OS Independent" in c for c in systems):
        return None
    named = [
        name
        for name, platform in platforms().items()
        if any(
            operating_system(platform.os).classifier.startswith(c)
            or c.startswith(operating_system(platform.os).classifier)
            or c in operating_system(platform.os).included_by
            for c in systems
        )
    ]
    if not named:
        return None
    return Guess(named, "the source's Operating System classifiers", "the first build tells whether each works")
