"""The checks of each tier (see the package's docstring), run in one call into the machine."""

from __future__ import annotations

import glob
import shlex
import sys
import time
from dataclasses import dataclass
from functools import cache

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from .. import host
from ..binaries.wheelfile import WheelMetadata, with_extras
from ..built import BuiltWheel
from ..components import NO_WHEEL, component_table, operating_system, toolkit_table
from ..declared import (
    CLASSIFIER_GPU,
    extras,
    installed_path,
    needed_components,
    nvidia_dependencies,
    site_packages,
    variant_module_name,
)
from ..inputs import DRIVER
from ..plan import Variant
from ..sbom.checks import sbom_problems
from ..sbom.compose import linked
from ..sources import source_identity
from .installs import install_checks, installs_without_nvidia
from .machines import Layout, Machine
from .results import Check, TierResult

# The modules of torch, whose own warnings a check of a wheel built against it lets pass (`python -W error` stays on
# for everything else).
TORCH_MODULES = r"torch(\..*)?\Z"


# Compiles a kernel with NVRTC to CUBIN, which needs no GPU: NVRTC opens its builtins then. Formatted with the
# package (imported first: its variant module loads what NVRTC needs and opens), a pattern of NVRTC's library file
# in the layout (the file the RPATH or the variant module loads) and the architecture.
NVRTC_COMPILE = """import ctypes, glob, {package}
nvrtc = ctypes.CDLL(sorted(glob.glob({library!r}, recursive=True))[0])
program = ctypes.c_void_p()
source = b'extern "C" __global__ void scale(float *x, float a) {{ x[threadIdx.x] *= a; }}'
assert nvrtc.nvrtcCreateProgram(ctypes.byref(program), source, b"scale.cu", 0, None, None) == 0
status = nvrtc.nvrtcCompileProgram(program, 1, (ctypes.c_char_p * 1)(b"-arch=sm_{arch}"))
size = ctypes.c_size_t()
nvrtc.nvrtcGetCUBINSize(program, ctypes.byref(size))
assert status == 0 and size.value > 0, f"NVRTC failed: status {{status}}, CUBIN of {{size.value}} bytes"
"""


# Loads a library the package says it opens itself (opens_cuda), from the layout, after importing the package.
OPENED = """import ctypes, glob, {package}
found = sorted(glob.glob({library!r}, recursive=True))
assert found, "no file matches {library}: the NVIDIA wheel the package opens is not where pip put it"
ctypes.CDLL(found[0])
"""


@dataclass(frozen=True)
class BinaryExpectation:
    """How one of the wheel's binaries behaves on import, from what it really links (DT_NEEDED / PE imports)."""

    statement: str  # `import pkg._mod`, or a ctypes load for a library that is named like a module
    error: str  # the exception a failed load raises: ImportError, or OSError from ctypes
    cuda: list[str]  # the CUDA libraries it links eagerly (the driver included)
    driver: bool  # one of them is the driver: no GPU-free machine can load it
    # A top-level module beside the package (one setup.py names without a package: causal_conv1d_cuda), which the
    # package imports: with CUDA installed it loads as it does there, once the package's import has loaded NVIDIA's
    # libraries from wherever the layout put them — its RPATH reaches only the site-packages it lies in, and a
    # --system-site-packages venv's NVIDIA wheels lie in the base's.
    package: str | None = None

    def check(
        self, *, cuda_installed: bool, site: str | None = None, pythonpath: str | None = None
    ) -> tuple[str, dict[str, object]]:
        fails = self.driver or (bool(self.cuda) and not cuda_installed)
        why = f" (links {', '.join(self.cuda)})" if fails else ""
        expect = self.error if fails else "ok"
        statement = f"import {self.package}; {self.statement}" if self.package and cuda_installed else self.statement
        return _expect(statement, expect, why=why, site=None if fails else site, pythonpath=pythonpath)


def binary_expectations(built: BuiltWheel) -> list[BinaryExpectation]:
    """One per extension module of the wheel (and per library named like one, which ctypes loads)."""
    variant, name = built.variant, built.name
    table = component_table()
    driver = table.driver.on(name.os).lower()
    packages = {variant.recipe.import_name.split(".")[0], *variant.recipe.packages}
    found = []
    for binary in sorted(built.binaries.values(), key=lambda b: b.member):
        if binary.module is None:
            continue
        eager = [
            library
            for library in binary.needed
            if library.lower() == driver or needed_components((library,), variant.major, name.os, variant.declared)
        ]
        if binary.importable:
            statement, error = f"import {binary.module}", "ImportError"
        else:
            path = installed_path(binary.member, name.python).relative_to(site_packages(name.python))
            # Wherever the layout put it: the first entry of sys.path that holds it, as an import would search.
            statement = (
                f"import ctypes, os, sys; ctypes.CDLL(next(p for p in (os.path.join(e, {str(path)!r}) "
                "for e in sys.path) if os.path.isfile(p)))"
            )
            error = "OSError"
        beside = binary.importable and binary.module.split(".")[0] not in packages
        package = variant.recipe.import_name if beside else None
        found.append(BinaryExpectation(statement, error, eager, any(lib.lower() == driver for lib in eager), package))
    return found


def _run_tier(
    result: TierResult,
    machine: Machine,
    python: str,
    installs: list[list[str]],
    named: list[tuple[str, dict[str, object]]],
    installed: list[Check] | None = None,
) -> TierResult:
    """The installs (or, `installed`, the checks of the shared install the venv holds a copy of), then the
    checks, all in one call into the machine."""
    started = time.monotonic()
    result.checks += installed if installed is not None else install_checks(machine, python, installs)
    if machine.torch_pins:  # torch warns of its own affairs at import (no NumPy, say): not the wheel's warnings
        named = [(name, {**spec, "warnings_not_ours": TORCH_MODULES}) for name, spec in named]
    if all(c.ok for c in result.checks):
        outcomes = machine.probe(python, [spec for _, spec in named])
        for (name, _), outcome in zip(named, outcomes, strict=True):
            mapped = outcome.get("libraries")
            libraries = [str(p) for p in mapped] if isinstance(mapped, list) else []
            result.checks.append(Check(name, bool(outcome["ok"]), str(outcome["detail"]), libraries))
    result.seconds = round(time.monotonic() - started, 1)
    return result


def _expect(statement: str, expect: str, why: str = "", **options: object) -> tuple[str, dict[str, object]]:
    """A check that `statement` runs (expect "ok") or raises the exception named (ImportError, OSError); with
    a site, every CUDA library mapped must come from under it."""
    spec = {"statement": statement, "expect": expect, **options, "cuda_libraries": cuda_library_names()}
    return f"{statement} → {expect}{why}", spec


@cache
def cuda_library_names() -> list[str]:
    """The file names (fnmatch patterns) of every CUDA library of every major, and the driver (Linux)."""
    table = component_table()
    majors = {m for component in table.components.values() for m in component.majors}
    return sorted({table.driver.linux, *(p for m in majors for p in table.all_libraries(m, "linux"))})


def tier1(machine: Machine, python: str, built: BuiltWheel, installed: list[Check] | None = None) -> TierResult:
    """The wheel and its non-CUDA requirements, no CUDA: what links no CUDA library imports, what links one
    eagerly fails at its own load with the error that says which, optional pieces name their pip fix. With
    `installed`, the shared install's checks: the venv holds a copy of it already."""
    smoke_spec = built.variant.recipe.smoke
    if smoke_spec.cuda_at_import:  # and so does `python -m pkg._cuda_variant`, which imports pkg first
        checks = [cuda_missing_at_import(built)]
    else:
        checks = [_expect(s, "ok") for s in smoke_spec.gpu_free or [f"import {built.variant.recipe.import_name}"]]
        checks.append(variant_module_alone(built))
    checks += [e.check(cuda_installed=False) for e in binary_expectations(built)]
    no_wheel = optional_without_wheel(built)
    hint = no_wheel or "pip install"
    checks += [_expect(s, "ImportError", hint=hint) for s in smoke_spec.needs_optional]
    return _run_tier(TierResult(1), machine, python, installs_without_nvidia(machine, built), checks, installed)


def variant_module_alone(built: BuiltWheel, pythonpath: str | None = None) -> tuple[str, dict[str, object]]:
    """`python -m pkg._cuda_variant` answers, and says nothing of another distribution: the wheel is alone."""
    module = variant_module_name(built.variant)
    return (
        f"python -m {module} → exit 0, no other distribution provides the package",
        {"command": ["python", "-m", module], "silent_of": "installed together", "pythonpath": pythonpath},
    )


def cuda_missing_at_import(built: BuiltWheel) -> tuple[str, dict[str, object]]:
    """A package that opens CUDA when imported (smoke.cuda_at_import), on a machine without CUDA: the import fails
    cleanly — ImportError, or OSError from ctypes — naming one of the CUDA libraries its binaries link, or saying
    what the recipe says it says where it names none (smoke.cuda_import_error)."""
    said = built.variant.recipe.smoke.cuda_import_error
    linked = sorted(
        {
            library
            for binary in built.binaries.values()
            for library in binary.needed
            if needed_components((library,), built.variant.major, built.name.os, built.variant.declared)
        }
    )
    hint = [said] if said else linked
    why = f" saying {said!r}" if said else f" naming {' or '.join(linked)}" if linked else ""
    return _expect(f"import {built.variant.recipe.import_name}", "ImportError|OSError", why=why, hint=hint or None)


def neighbour_name(variant: Variant) -> str:
    """The distribution a user most likely installs beside this variant: the recipe's variant for another CUDA
    major (the newest other one the recipe names, or the factory knows where it names none), or the upstream
    package's own name where the recipe is for one major only."""
    majors = variant.recipe.cuda or sorted(toolkit_table().minor_version_drivers)
    others = [m for m in majors if m != variant.major]
    # as pip and the variant module name it (PEP 503): causal_conv1d's is causal-conv1d-cuda12x
    return canonicalize_name(f"{variant.recipe.name}-cuda{max(others)}x" if others else variant.recipe.name)


def two_variants_installs(machine: Machine, built: BuiltWheel) -> list[list[str]]:
    """The installs that put the wheel and a stand-in of another variant into one folder (machine.side_by_side)."""
    if machine.torch_pins:  # torch (and NVIDIA's wheels) come from the venv that runs it: only the two go in the folder
        return [["--target", machine.side_by_side, "--no-deps", machine.wheel, machine.neighbour]]
    installs = installs_without_nvidia(machine, built, machine.side_by_side)
    installs[-1].append(machine.neighbour)
    return installs


def two_variants(machine: Machine, python: str, built: BuiltWheel, installed: list[Check] | None = None) -> TierResult:
    """The wheel and a stand-in of another variant installed into one place, as a user may by mistake: the
    import warns once, naming both distributions, and the variant module's diagnostic fails saying so. (Alone,
    in tiers 1 and 2, the import is silent: their interpreters turn any warning into an error.) With `installed`,
    the checks of the installs that filled the folder already."""
    other = neighbour_name(built.variant)
    module, folder = variant_module_name(built.variant), machine.side_by_side
    # The warning comes first, before anything the package loads: even one that opens CUDA at import gives it.
    checks = [_expect(f"import {built.variant.recipe.import_name}", "UserWarning", hint=other, pythonpath=folder)]
    if not built.variant.recipe.smoke.cuda_at_import:  # else `python -m` dies importing the package, CUDA-less
        checks.append(
            (
                f"python -m {module} → exit 1, naming {other}",
                {"command": ["python", "-m", module], "pythonpath": folder, "exit": 1, "says": other},
            )
        )
    result = TierResult(1, f"beside {other}")
    return _run_tier(result, machine, python, two_variants_installs(machine, built), checks, installed)


def optional_without_wheel(built: BuiltWheel) -> str | None:
    """Where NVIDIA ships no wheel of any of the recipe's optional components for the wheel's OS and machine
    (NCCL: Windows; aarch64 in CUDA 11), the words the variant module's no_wheel() says it with; else None. Its
    needs_optional statements must then raise ImportError saying so, with its extras installed too: no pip
    install can bring the part."""
    table = component_table()
    name = built.name
    optional = [table.get(c, built.variant.major) for c in built.variant.recipe.optional]
    if not optional or any(e is not None and e.layout(name.os, name.arch) is not None for e in optional):
        return None
    where = operating_system(name.os).no_wheel_where.format(arch=name.arch)
    return NO_WHEEL.format(distribution="", where=where).strip()  # whichever distribution it names


def tier2(machine: Machine, layout: Layout, built: BuiltWheel, installed: list[Check] | None = None) -> TierResult:
    """The wheel with NVIDIA's wheels (laid out as `layout` says) and its other requirements: every binary loads,
    with its CUDA libraries from that layout, unless it links the driver (which no GPU-free machine has). With
    `installed`, the shared install's checks: the venv holds a copy of it already."""
    smoke_spec = built.variant.recipe.smoke
    site, pythonpath = layout.site, layout.pythonpath
    imported = f"import {built.variant.recipe.import_name}"
    checks = [_expect(imported, "ok", site=site, pythonpath=pythonpath)]
    if smoke_spec.cuda_at_import:  # tier 1 could not run it: the package does not import without CUDA
        checks.append(variant_module_alone(built, pythonpath))
    checks += [e.check(cuda_installed=True, site=site, pythonpath=pythonpath) for e in binary_expectations(built)]
    checks += [_expect(s, "ok", site=site, pythonpath=pythonpath) for s in smoke_spec.gpu_free if s != imported]
    no_wheel = optional_without_wheel(built)
    checks += [
        _expect(s, "ImportError", hint=no_wheel, site=site, pythonpath=pythonpath)
        if no_wheel
        else _expect(s, "ok", site=site, pythonpath=pythonpath)
        for s in smoke_spec.needs_optional
    ]
    checks += [
        (command, {"command": shlex.split(command), "pythonpath": layout.pythonpath})
        for command in smoke_spec.with_cuda
    ]
    checks += nvrtc_compile(built, site, pythonpath)
    checks += opened_cuda(built, site, pythonpath)
    checks.append(sbom_printed(built, pythonpath))
    if layout.name == "target":  # into the folder beside the CUDA wheels, where pip cannot check them
        installs = installs_without_nvidia(machine, built, layout.pythonpath)
    else:
        # Its NVIDIA requirements are in place already; pip checks them and installs the rest, with the extras of
        # its optional CUDA components (not the source's own extras, such as dev or doc).
        found = ["--find-links", machine.requirements] if machine.requirements else []
        installs = [[*found, with_extras(machine.wheel, sorted(extras(built.variant)))]]
    unsupported = smoke_spec.unsupported_layouts.get(layout.name)
    result = TierResult(2, layout.name, layout.versions, unsupported=unsupported)
    return _run_tier(result, machine, layout.python, installs, checks, installed)


def _library_in(built: BuiltWheel, component: str, site: str) -> str | None:
    """A glob of the component's (first) library under `site`, where NVIDIA's wheel puts it; None where NVIDIA
    ships no wheel of it for the wheel's OS and machine."""
    entry = component_table().get(component, built.variant.major)
    layout = entry.layout(built.name.os, built.name.arch) if entry else None
    return None if layout is None else f"{glob.escape(site)}/**/{layout.folder}/{layout.libraries[0]}"


def sbom_printed(built: BuiltWheel, pythonpath: str | None) -> tuple[str, dict[str, object]]:
    """`python -m pkg._cuda_variant --sbom` prints the installed wheel's SBOM, the wheel's own (a program beside
    the statements: it costs the tier no time of its own)."""
    command = f"python -m {variant_module_name(built.variant)} --sbom"
    says = f'"purl": "pkg:pypi/{canonicalize_name(built.variant.dist_name)}@'
    return command, {"command": shlex.split(command), "pythonpath": pythonpath, "says": says}


def nvrtc_compile(built: BuiltWheel, site: str, pythonpath: str | None) -> list[tuple[str, dict[str, object]]]:
    """Where the wheel uses NVRTC (or a component it needs does): a kernel compiled to CUBIN after importing the
    package, with every CUDA library mapped — NVRTC's builtins, opened by name, included — from under `site`."""
    variant = built.variant
    if "nvrtc" not in variant.runtime_closure(variant.components(optional=False)):
        return []
    library = _library_in(built, "nvrtc", site)
    if library is None:
        return []
    arch = max(variant.cuda_archs(built.cell.platform))
    statement = NVRTC_COMPILE.format(package=variant.recipe.import_name, library=library, arch=arch)
    _, spec = _expect(statement, "ok", site=site, pythonpath=pythonpath)
    return [(f"NVRTC compiles a kernel to CUBIN for sm_{arch}, its builtins from this layout → ok", spec)]


def opened_cuda(built: BuiltWheel, site: str, pythonpath: str | None) -> list[tuple[str, dict[str, object]]]:
    """What the recipe says the package opens itself (opens_cuda), as far as a machine without a GPU can tell:
    with the package imported, each component's library is found where NVIDIA's wheel puts it in this layout, and
    loads (with what it needs, all from under `site`). The driver is no GPU-free machine's to open."""
    checks = []
    for component in built.variant.recipe.opens_cuda:
        library = None if component == DRIVER else _library_in(built, component, site)
        if library is None:
            continue
        statement = OPENED.format(package=built.variant.recipe.import_name, library=library)
        _, spec = _expect(statement, "ok", site=site, pythonpath=pythonpath)
        checks.append((f"{component}, which the package opens itself, loads from this layout → ok", spec))
    return checks


def nvrtc_decoys(variant: Variant) -> tuple[str, ...]:
    """NVRTC's builtins under a runtime site's nvidia/ (patterns), for the decoy system copy."""
    entry = component_table().get("nvrtc", variant.major)
    layout = entry.linux if entry else None
    if layout is None or layout.lib_dir is None or "nvrtc" not in variant.runtime_closure(variant.declared):
        return ()
    folder = layout.lib_dir.removeprefix("nvidia/")
    return tuple(f"{folder}/{pattern}" for pattern in layout.opens)


def sbom_check(built: BuiltWheel) -> Check:
    """The wheel's SBOM: valid CycloneDX 1.6 (the library's bundled schema, offline), agreeing with the wheel (its
    Requires-Dist, RECORD), naming the recipe's source and, for each NVIDIA wheel and torch, the files the audit saw
    link it."""
    variant = built.variant
    source = source_identity(variant.recipe.source, variant.recipe_dir)
    problems = sbom_problems(built.path, source, linked(built, built.binaries))
    return Check("the SBOM is valid and agrees with the wheel", not problems, "\n".join(problems))


def tier3(built: BuiltWheel, read: WheelMetadata) -> TierResult:
    """The wheel's metadata (`read`: its METADATA, read once) and its SBOM."""
    wheel, variant = built.path, built.variant
    result = TierResult(3)
    started = time.monotonic()
    found = read.fields
    result.checks.append(
        Check("name", canonicalize_name(found["Name"]) == canonicalize_name(variant.dist_name), found["Name"])
    )
    requires = [Requirement(r) for r in found.get_all("Requires-Dist") or []]
    expected = {canonicalize_name(Requirement(line).name) for line in nvidia_dependencies(variant)}
    nvidia = {canonicalize_name(r.name) for r in requires if r.name.startswith("nvidia-") and r.marker is None}
    result.checks.append(
        Check(
            f"Requires-Dist names exactly the CUDA {variant.major} wheels",
            nvidia == expected,
            ", ".join(sorted(nvidia)),
        )
    )
    # What the rendered pyproject says; a setup.py's python_requires that won over it would let pip install the
    # wheel on Pythons the matrix never smoke-tested.
    declared = found.get("Requires-Python")
    result.checks.append(
        Check(
            f"Requires-Python is the variant's {variant.requires_python}",
            declared is not None and SpecifierSet(declared) == variant.requires_python,
            declared or "none",
        )
    )
    classifiers = found.get_all("Classifier") or []
    gpu = CLASSIFIER_GPU.format(major=variant.major)
    result.checks.append(
        Check(f"classifier {gpu}", gpu in classifiers, "; ".join(c for c in classifiers if "GPU" in c))
    )
    twine = host.run(
        [sys.executable, "-m", "twine", "--no-color", "check", "--strict", wheel], "twine check", check=False
    )
    result.checks.append(Check("twine check --strict", twine.returncode == 0, (twine.stdout + twine.stderr).strip()))
    result.checks.append(sbom_check(built))
    result.seconds = round(time.monotonic() - started, 1)
    return result
