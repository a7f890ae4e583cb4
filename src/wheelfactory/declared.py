"""What a variant's wheel declares, which every stage after the render reads: its Requires-Dist and extras, the
libraries its repair must never graft, where pip installs its files (and so where its RPATH must point), the
variant module's name, and which of the recipe's modules it must hold.

It sits below the stages: render writes it into the pyproject, build checks the wheel it made against it, repair
points RPATHs by it, audit and smoke hold the wheel to it — none of them asks another stage.
"""

from __future__ import annotations

import fnmatch
import posixpath
from pathlib import PurePosixPath

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .components import OS, ComponentMajor, component_table, operating_system, platforms
from .inputs import DRIVER
from .plan import Variant

# Written into the package at build time: what the variant needs from CUDA (and, on Windows, its DLL loader).
VARIANT_MODULE = "_cuda_variant.py"
CLASSIFIER_GPU = "Environment :: GPU :: NVIDIA CUDA :: {major}"


# What the wheel requires.


def requirement(name: str, major: int, toolkit: str) -> str:
    """The Requires-Dist line for component `name`: floor from the toolkit, capped below the next major.

    The cap matters for CUDA 13's unsuffixed names, which a future 14.x release would otherwise satisfy.
    """
    entry = component_table().get(name, major)
    assert entry is not None, f"{name} has no CUDA {major} entry"
    floor = entry.floor(toolkit)
    line = f"{entry.distribution}>={floor},<{floor.major + 1}"
    Requirement(line)  # the table must only ever yield valid requirements
    return line


def nvidia_dependencies(variant: Variant, names: list[str] | None = None) -> list[str]:
    """The Requires-Dist lines of the recipe's components (or of `names`) and of every component their libraries
    load at run time — nvJitLink under cuSPARSE, say — each with its floor: NVIDIA's wheels name their companions
    unversioned, and pip keeps an older one that is already installed."""
    chosen = variant.components(optional=False) if names is None else names
    lines: dict[str, str] = {}
    for name in variant.runtime_closure(chosen):
        line = requirement(name, variant.major, variant.cuda.toolkit)
        lines.setdefault(line.split(">=")[0], line)  # cublas and cublasLt share one distribution
    return sorted(lines.values())


# NVIDIA's meta-package of the whole toolkit (`cuda-toolkit[cublas,...]==12.*`): a source's pin of it is another
# major's CUDA wheels, as the nvidia-* ones are.
_TOOLKIT_META = "cuda-toolkit"


def _swapped(
    variant: Variant, lines: list[str], entries: list[tuple[set[str], str | None]]
) -> tuple[list[str], set[int], bool]:
    """The source's requirement lines with the recipe's swaps applied and NVIDIA's CUDA wheels left out: (what is
    kept, the recipe entries used, whether an NVIDIA wheel was left out).

    A recipe entry replaces each source requirement that names it, in any major's spelling ({12: cupy-cuda12x,
    13: cupy-cuda13x} replaces cupy-cuda12x with this major's); an entry with nothing for this major drops it.
    """
    table = component_table()
    nvidia = {
        canonicalize_name(entry.distribution)
        for component in table.components.values()
        for entry in component.majors.values()
    } | {_TOOLKIT_META}
    kept: list[str] = []
    used: set[int] = set()
    dropped_nvidia = False
    for line in lines:
        name = canonicalize_name(Requirement(line).name)
        if name in nvidia:
            dropped_nvidia = True
            continue
        index = next((i for i, (names, _) in enumerate(entries) if name in names), None)
        if index is None:
            kept.append(line)
        elif index not in used:
            used.add(index)
            replacement = entries[index][1]
            kept += [replacement] if replacement else []
    return kept, used, dropped_nvidia


def torch_build_requirement(variant: Variant) -> str | None:
    """What the build installs of torch, for a build against it: the matrix's release, any patch of it."""
    return f"torch=={variant.torch.release}.*" if variant.torch else None


def torch_requirement(variant: Variant) -> str | None:
    """What the wheel requires of torch, for a build against it: the release it was built with (cpp_extension ties
    the wheel to that release's C++ ABI), or for a stable-ABI build every torch from the one it targets on."""
    target = variant.torch_target
    return f"torch>={target}" if target else torch_build_requirement(variant)


def torch_neighbours(variant: Variant, python: str, platform: str) -> list[str]:
    """The torch installs a wheel built against torch is smoke-tested beside on `python` and `platform`: the
    release it requires, or for a stable-ABI build the oldest of its range with a wheel there (torch 2.11 has none
    for CPython 3.15: 2.15 is the oldest a user of 3.15 has) and the newest its requirement lets pip take."""
    required = torch_requirement(variant)
    if required is None:
        return []
    oldest = next((t for t in reversed(variant.torches_run_with) if t.has_wheel(python, platform)), None)
    return [f"torch=={oldest.release}.*", required] if variant.torch_target and oldest else [required]


def _recipe_entries(variant: Variant) -> list[tuple[set[str], str | None]]:
    """Each recipe dependency: every name it is spelt with, and its line for this major (None: none); first, for
    a build against torch, the torch release it was built with."""
    pinned = torch_requirement(variant)
    entries: list[tuple[set[str], str | None]] = [({"torch"}, pinned)] if pinned else []
    for dep in variant.recipe.dependencies:
        spellings = list(dep.values()) if isinstance(dep, dict) else [dep]
        line = dep.get(variant.major) if isinstance(dep, dict) else dep
        names = {str(canonicalize_name(Requirement(s).name)) for s in spellings}
        if pinned and names == {"torch"}:
            continue  # the release it was built with is what the wheel requires (a drafted setup.py's plain `torch`)
        entries.append((names, line))
    return entries


def dependencies(variant: Variant, source: list[str] | None = None) -> list[str]:
    """The variant's Requires-Dist: the source's own requirements (its pyproject's), with the recipe's swapped
    in, then the NVIDIA wheels of this major, then the recipe's other requirements. The source's NVIDIA CUDA
    wheels, of whatever major, give way to the variant's own."""
    entries = _recipe_entries(variant)
    kept, used, _ = _swapped(variant, source or [], entries)
    others = [line for i, (_, line) in enumerate(entries) if i not in used and line]
    return [*kept, *nvidia_dependencies(variant), *others]


def variant_extras(variant: Variant, source: dict[str, list[str]]) -> dict[str, list[str]]:
    """The source's extras made the variant's: the recipe's swaps applied inside each, NVIDIA's CUDA wheels of
    any major left out. An extra that only pulled NVIDIA's wheels (CuPy's `ctk`, the toolkit for this major)
    becomes the variant's own NVIDIA requirements, so that `pip install pkg-cuda12x[ctk]` still means "with
    CUDA 12's libraries"; the variant's optional components come last and win a name they share."""
    result: dict[str, list[str]] = {}
    entries = _recipe_entries(variant)
    for extra, lines in source.items():
        kept, _, dropped_nvidia = _swapped(variant, lines, entries)
        if dropped_nvidia and not kept:
            kept = nvidia_dependencies(variant)
        if kept:
            result[extra] = kept
    return {**result, **extras(variant)}


def extras(variant: Variant) -> dict[str, list[str]]:
    """An extra per optional component: its wheel, and those of what it loads that the variant does not
    require already."""
    result = {}
    required = set(nvidia_dependencies(variant))
    for name in variant.components(optional=True):
        entry = component_table().get(name, variant.major)
        assert entry is not None
        marker = _where_a_wheel_exists(entry, variant)
        lines = [line + marker for line in nvidia_dependencies(variant, [name]) if line not in required]
        result[name.lower()] = lines
    return result


def _where_a_wheel_exists(entry: ComponentMajor, variant: Variant) -> str:
    """An optional component without a wheel on some of the variant's platforms (NCCL: none for Windows, none
    for aarch64 in CUDA 11) gets a marker, so pip skips it there."""
    conditions = []
    for platform in variant.platforms():
        info = platforms()[platform]
        if entry.layout(info.os, info.cibw_arch) is None:
            conditions.append(operating_system(info.os).no_wheel_marker.format(arch=info.cibw_arch))
    return " ; " + " and ".join(dict.fromkeys(conditions)) if conditions else ""


def excluded_libraries(variant: Variant, os: OS) -> list[str]:
    """The driver, every library shipped by a distribution the recipe declares (cuBLAS brings cuBLASLt), and
    those its provided_libraries come from another dependency (torch's)."""
    table, os_facts = component_table(), operating_system(os)
    declared = {
        entry.distribution
        for name in [*variant.recipe.components, *variant.recipe.optional]
        if (entry := table.get(name, variant.major))
    }
    excluded = [table.driver.on(os)]
    for name in table.names():
        entry = table.get(name, variant.major)
        layout = entry.layout(os) if entry and entry.distribution in declared else None
        if layout:
            excluded.extend(p for p in layout.libraries if p not in excluded)
    for provided in variant.recipe.provided_libraries.values():
        excluded.extend(
            p for p in provided.libraries if is_dll(p) == (os_facts.binary_format == "pe") and p not in excluded
        )
    return excluded


def is_dll(name: str) -> bool:
    """Whether a library name (or pattern) is a Windows DLL's rather than a Linux soname."""
    return name.lower().endswith(".dll")


def variant_module_name(variant: Variant) -> str:
    """The variant module's dotted name in the import package: what `python -m` runs."""
    return f"{variant.recipe.import_name}.{VARIANT_MODULE.removesuffix('.py')}"


# Where pip installs the wheel's files, and so where its RPATH entries lead. A wheel's `<dist>.data/<key>/` files
# land here, relative to an environment's prefix (POSIX layout).
DATA_DIRS = {"purelib": "{site}", "platlib": "{site}", "scripts": "bin", "data": ".", "headers": "include"}


def site_packages(python: str) -> PurePosixPath:
    return PurePosixPath(f"lib/python{python}/site-packages")


def installed_path(member: str, python: str) -> PurePosixPath:
    """Where wheel member `member` is installed, relative to the environment prefix."""
    site = site_packages(python)
    parts = PurePosixPath(member).parts
    if len(parts) >= 3 and parts[0].endswith(".data") and parts[1] in DATA_DIRS:
        base = DATA_DIRS[parts[1]].format(site=site)
        return PurePosixPath(base).joinpath(*parts[2:])
    return site.joinpath(*parts)


def origin_entry(member: str, site_dir: str, python: str) -> str:
    """The $ORIGIN-relative RPATH entry from member's installed location to site-packages/site_dir."""
    here = installed_path(member, python).parent
    return "$ORIGIN/" + posixpath.relpath(site_packages(python) / site_dir, here)


def needed_components(needed: tuple[str, ...], major: int, os_name: OS, declared: list[str]) -> list[str]:
    table = component_table()
    found = []
    for library in needed:
        owner = table.owner_of(library, major, os_name, declared)
        if owner and owner not in found:
            found.append(owner)
    return found


def rpath_dirs(variant: Variant, needed: tuple[str, ...]) -> dict[str, str]:
    """What a binary needing `needed` must reach: each CUDA component it links, and each distribution whose
    provided_libraries it links (torch), -> that one's folder in site-packages."""
    table = component_table()
    dirs: dict[str, str] = {}
    for name in needed_components(needed, variant.major, "linux", variant.declared):
        entry = table.get(name, variant.major)
        if entry and entry.linux and entry.linux.lib_dir:
            dirs[name] = entry.linux.lib_dir
    for library in needed:
        provider = variant.provider_of(library)
        if provider is not None:
            dirs.setdefault(provider, variant.recipe.provided_libraries[provider].dir)
    return dirs


# What the wheel must hold.


def _is_pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


def declared_problems(variant: Variant, present: set[str], os_name: OS, arch: str, libraries: set[str]) -> list[str]:
    """Each module the recipe names is in the wheel, each pattern matches one, and each device_code pattern a
    module or a shared library (`libraries`: their file names): a build that quietly left a part out (no nvcc
    found, a CPU-only fallback) does not pass. Not where the module's components have no wheel for this OS and
    machine (the recipe makes them optional there)."""
    table = component_table()
    problems = []
    for name, allowed in variant.recipe.modules.items():
        unavailable = [
            c
            for c in allowed
            if c != DRIVER and ((e := table.get(c, variant.major)) is None or e.layout(os_name, arch) is None)
        ]
        if unavailable:
            continue
        if not _is_pattern(name) and name not in present:
            problems.append(f"declared module {name} is missing from the wheel — the build left it out")
        elif _is_pattern(name) and not any(fnmatch.fnmatchcase(m, name) for m in present):
            problems.append(f"no extension module matches the recipe's {name!r} — the build left them out")
    for pattern in variant.recipe.device_code:
        if not any(fnmatch.fnmatchcase(m, pattern) for m in present | libraries):
            problems.append(
                f"no extension module or shared library matches device_code {pattern!r} — the build left it out"
            )
    return problems
