"""Audit every binary of a wheel against the recipe's linking policy. Our gate, not auditwheel's tag.

Each binary may need only: the platform's system libraries (manylinux policy / Windows system DLLs and the
matching python3X.dll), libraries inside the wheel, the libraries of the components the recipe allows that
module, and those of the distributions its policy names among provided_libraries (torch's libc10.so), never
bundled, in a wheel that requires that distribution. The driver only where the module policy names `driver` (on
Windows a delay-loaded nvcuda.dll is lazy and fine). No CUDA library may be bundled. Linux: every RPATH entry
relative, DT_RPATH rather than RUNPATH, reaching each needed component (and provider), and symbol versions within
the platform tag. Windows: the DLL-path loader is in place.
The wheel must fit the recipe's size limit.

A module's policy is the most specific of the recipe's `modules` patterns that matches it; a shared library's,
its `shared_libraries` pattern (else no CUDA library). What a build script may quietly leave out is checked too:
every module the recipe names is in the wheel, every pattern matches one, the `device_code` modules carry a
fatbin section, and the wheel's version is the recipe's.

GPU code (each binary's fatbin, read by binaries.fatbin and listed in the report): no PTX of an ISA newer than the
matrix's toolkit release writes, no cubin a newer toolkit made, no architecture the release cannot target; a
`device_code` module has SASS for every architecture of the variant and PTX for the newest.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path, PurePosixPath

import yaml
from auditwheel.policy import Policy
from packaging.utils import canonicalize_name
from packaging.version import Version

from .binaries.fatbin import DeviceCode
from .binaries.pythonabi import python_abi_problems
from .binaries.torchabi import stable_abi_problems
from .binaries.wheelcheck import check_wheel
from .binaries.wheelfile import MIB, Binary, members, requires_dist, unvendored
from .built import BuiltWheel
from .components import component_table, platforms, toolkit_table
from .cuda_held import is_cuda_library, no_cuda, switch_hint
from .declared import declared_problems, needed_components, origin_entry, rpath_dirs
from .inputs import DRIVER
from .plan import Variant
from .platforms import platform_of
from .platforms.linux import manylinux_policy
from .untrusted.shown import shown

# The dynamic loader is in no policy's whitelist (auditwheel treats it apart), yet every glibc has it.
DYNAMIC_LOADERS = frozenset({"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"})


@dataclass
class BinaryAudit:
    member: str
    module: str | None  # dotted name for an extension module; None for a bundled library
    needed: list[str]
    rpath: list[str]
    runpath: list[str]
    components: list[str]
    device_code: bool = False
    providers: list[str] = field(default_factory=list)  # the distributions whose provided_libraries it links
    problems: list[str] = field(default_factory=list)
    gpu_code: list[dict[str, object]] = field(default_factory=list)  # each fatbin entry: SASS or PTX, arch, ISA
    machine: str = ""  # what its header says it runs on: x86_64, aarch64, AMD64


@dataclass
class WheelAudit:
    wheel: str
    platform_tag: str
    size_bytes: int
    binaries: list[BinaryAudit]
    problems: list[str]

    @property
    def passed(self) -> bool:
        return not self.problems and not any(b.problems for b in self.binaries)

    def all_problems(self) -> list[str]:
        return self.problems + [f"{shown(b.member)}: {p}" for b in self.binaries for p in b.problems]

    def as_json(self) -> dict[str, object]:
        return {**asdict(self), "passed": self.passed}


@cache
def windows_system_dlls() -> tuple[str, ...]:
    data = yaml.safe_load(files("wheelfactory.data").joinpath("windows_system_dlls.yaml").read_text("utf-8"))
    return tuple(p.lower() for p in data["dlls"])


class _Checker:
    """The checks that do not depend on the binary format."""

    def __init__(self, variant: Variant, platform: str, in_wheel: set[str], required: set[str]) -> None:
        self.variant = variant
        self.required = required  # the distributions the wheel's Requires-Dist names (canonical)
        self.platform = platform
        self.os = platforms()[platform].os
        self.arch = platforms()[platform].cibw_arch
        self.in_wheel = {n.lower() for n in in_wheel}
        self.table = component_table()

    def machine(self, audit: BinaryAudit) -> None:
        """A binary of another machine than the wheel's tag (a host compiler where a cross or emulated one was
        meant, a prebuilt file copied in) cannot load where pip installs the wheel."""
        if audit.machine != self.arch:
            audit.problems.append(
                f"is a binary for {audit.machine or 'an unknown machine'}, in a wheel for {self.arch} — build it "
                f"for {self.arch} (in that machine's image) or leave it out"
            )

    def allowed(self, audit: BinaryAudit) -> list[str]:
        """What the binary may link: its module's policy, or for a shared library the recipe's
        shared_libraries policy (none: no CUDA library)."""
        if self.variant.must_carry_device_code(_binary_name(audit)) and not audit.device_code:
            audit.problems.append(
                "carries no device code (no fatbin section), yet the recipe's device_code requires it: the build "
                "left CUDA out — look in the build log for CUDA or nvcc not being found"
            )
        if audit.module is None:
            name = _binary_name(audit)
            provider = self.variant.provider_of(name)
            if provider is not None:
                audit.problems.append(
                    f"is {shown(provider)}'s library, bundled in the wheel — it must come from {shown(provider)} "
                    "(the repair excludes what provided_libraries names: is the name right?)"
                )
                return []
            if is_cuda_library(name, self.variant.major, self.os):
                audit.problems.append(
                    "a CUDA library is bundled in the wheel — it must come from NVIDIA's wheels "
                    "(exclude it from the repair)"
                )
                return []
            return self.variant.library_policy(name) or []
        policy = self.variant.module_policy(audit.module)
        if policy is None:
            audit.problems.append(
                f"extension module {shown(audit.module)} matches none of the recipe's modules — declare what it may "
                'link (or give a "*" default)'
            )
            return []
        return policy

    def gpu_code(self, audit: BinaryAudit, entries: tuple[DeviceCode, ...]) -> None:
        """Judge the binary's GPU code against the matrix's toolkit release: nothing newer than it (a driver of
        that release rejects newer PTX: "compiled with an unsupported toolchain"), nothing it cannot target; and
        against the variant's architectures, or those the recipe's device_code_archs narrow it to: SASS for each,
        PTX for the newest, so that newer GPUs can JIT it (in a library linked from relocatable device code, PTX
        that every object carries does: the driver JIT-links it). Every binary that carries device code is held to
        that, named in device_code or not (a library nvcc built, shipped as a data file, runs on the same GPUs)."""
        release = self.variant.cuda.toolkit
        known = toolkit_table().releases[release]
        audit.gpu_code = [entry.as_json() for entry in entries]
        for entry in dict.fromkeys(entries):
            if entry.ptx_isa and entry.ptx_isa > known.ptx_isa_version:
                audit.problems.append(
                    f"carries PTX {entry.name} of ISA {entry.as_json()['ptx_isa']}, newer than CUDA {release}'s "
                    f"{known.ptx_isa}: a newer toolkit compiled it, and a driver of CUDA {release} rejects it — build "
                    "with the matrix's nvcc"
                )
            if entry.toolkit and Version(entry.toolkit) > Version(release):
                audit.problems.append(
                    f"carries {entry.name} made by CUDA {entry.toolkit}, newer than the matrix's {release} — build "
                    "with the matrix's nvcc"
                )
            if entry.arch not in known.archs:
                audit.problems.append(f"carries {entry.name}, which CUDA {release}'s nvcc cannot target")
        archs = self.variant.gpu_archs(_binary_name(audit), self.platform)
        if not archs or not entries:
            return
        whose = "the variant's" if archs == self.variant.cuda_archs(self.platform) else "its device_code_archs'"
        native = {entry.arch for entry in entries if entry.kind == "sass"}
        missing = [f"sm_{arch}" for arch in archs if arch not in native]
        if missing:
            audit.problems.append(
                f"has no SASS for {', '.join(missing)} of {whose} architectures "
                f"({', '.join(f'sm_{a}' for a in archs)}): those GPUs would find no kernel image — compile with "
                "$NVCC_GENCODE (or $CMAKE_CUDA_ARCHITECTURES), or narrow it on purpose in device_code_archs"
            )
        newest = max(archs)
        if not any(e.kind == "ptx" and e.arch == newest and not e.suffix for e in entries):
            audit.problems.append(
                f"has no PTX for compute_{newest}, the newest of {whose} architectures: GPUs newer than "
                f"sm_{newest} could not JIT it — compile with $NVCC_GENCODE, which adds it"
            )

    def dependency(self, audit: BinaryAudit, library: str, allowed: list[str], *, lazy: bool = False) -> bool:
        """Judge a CUDA, provided or in-wheel dependency; False when it is none, for the format's own rules."""
        table = self.table
        provider = self.variant.provider_of(unvendored(library))
        if provider is not None:
            self.provided(audit, library, provider, allowed)
            return True
        if library.lower() in self.in_wheel:
            return True
        driver = table.driver.on(self.os)
        if library.lower() == driver.lower():
            if DRIVER not in allowed and not lazy:
                audit.problems.append(
                    f"links the driver {shown(library)}: importing it fails on machines without a GPU "
                    "driver — open the driver lazily instead"
                )
            return True
        owner = table.owner_of(library, self.variant.major, self.os, list(table.components))
        if owner is not None:
            if owner not in allowed:
                policy = ", ".join(allowed) or "no CUDA library"
                audit.problems.append(
                    f"needs {shown(library)} ({owner}) but may link {policy} — link with -Wl,--as-needed "
                    "or fix the recipe's module policy"
                )
            return True
        if is_cuda_library(library, self.variant.major, self.os):
            audit.problems.append(f"needs CUDA library {shown(library)}, which no allowed component provides")
            return True
        return False

    def provided(self, audit: BinaryAudit, library: str, provider: str, allowed: list[str]) -> None:
        """A library another distribution provides (torch's libc10.so): linked as itself, by a binary whose
        policy names that distribution, in a wheel that requires it."""
        if provider not in audit.providers:
            audit.providers.append(provider)
        if library.lower() in self.in_wheel or unvendored(library) != library:
            audit.problems.append(
                f"needs {shown(library)}, a copy of {shown(provider)}'s library vendored into the wheel — it must "
                "come from the installed distribution"
            )
        if provider not in allowed:
            policy = ", ".join(allowed) or "nothing"
            audit.problems.append(
                f"needs {shown(library)} ({shown(provider)}'s) but may link {policy} — add {shown(provider)} to its "
                "policy in the recipe, or stop linking it"
            )
        if canonicalize_name(provider) not in self.required:
            audit.problems.append(
                f"needs {shown(library)} from {shown(provider)}, which the wheel does not require — add it to the "
                "recipe's dependencies"
            )


def _binary_name(audit: BinaryAudit) -> str:
    """What the recipe calls a binary: an extension module by its dotted name, a shared library by its file name
    (without the suffix a repair vendoring it adds)."""
    return audit.module or unvendored(Path(audit.member).name)


def _check_elf(binary: Binary, checker: _Checker, policy: Policy | None, platform_tag: str, python: str) -> BinaryAudit:
    major = checker.variant.major
    audit = BinaryAudit(
        binary.member,
        binary.module,
        list(binary.needed),
        list(binary.rpath),
        list(binary.runpath),
        needed_components(binary.needed, major, "linux", checker.variant.declared),
        binary.device_code,
        machine=binary.machine,
    )
    checker.machine(audit)
    allowed = checker.allowed(audit)
    checker.gpu_code(audit, binary.fatbin)
    whitelist = policy.whitelist if policy else frozenset()
    for library in binary.needed:
        if library in DYNAMIC_LOADERS or checker.dependency(audit, library, allowed):
            continue
        if library not in whitelist:
            audit.problems.append(
                f"needs {shown(library)}: not a manylinux system library, not in the wheel, not a declared CUDA "
                "component"
            )
    if binary.runpath:
        audit.problems.append(
            f"uses DT_RUNPATH {shown(':'.join(binary.runpath))}; needs DT_RPATH so that the libraries it loads find "
            "theirs too"
        )
    for entry in [*binary.rpath, *binary.runpath]:
        if not entry.startswith("$ORIGIN"):
            audit.problems.append(
                f"RPATH entry {shown(entry)} is absolute or host-specific — it must be $ORIGIN-relative"
            )
    for name, site_dir in rpath_dirs(checker.variant, binary.needed).items():
        expected = origin_entry(binary.member, site_dir, python)
        if expected not in binary.rpath:
            audit.problems.append(f"RPATH lacks {expected} for {shown(name)}")
    symbol_versions = policy.symbol_versions if policy else {}
    for library, versions in binary.version_needs.items():
        for version in sorted(versions):
            namespace, _, number = version.partition("_")  # GLIBC_2.34 -> GLIBC, 2.34
            if namespace in symbol_versions and number not in symbol_versions[namespace]:
                audit.problems.append(f"needs {shown(version)} from {shown(library)}, newer than {platform_tag} allows")
    return audit


def _unreadable(binary: Binary) -> BinaryAudit:
    """A binary the readers refused: nothing it needs or carries is known, so it cannot pass."""
    audit = BinaryAudit(binary.member, binary.module, [], [], [], [])
    audit.problems.append(f"cannot be read — {binary.unreadable}; a binary the audit cannot read is not shipped")
    return audit


def _check_pe(binary: Binary, checker: _Checker, python: str) -> BinaryAudit:
    major = checker.variant.major
    audit = BinaryAudit(
        binary.member,
        binary.module,
        [*binary.needed, *binary.lazy],
        [],
        [],
        needed_components((*binary.needed, *binary.lazy), major, "windows", checker.variant.declared),
        binary.device_code,
        machine=binary.machine,
    )
    checker.machine(audit)
    allowed = checker.allowed(audit)
    checker.gpu_code(audit, binary.fatbin)
    python_dll = f"python{python.replace('.', '')}.dll"
    system = windows_system_dlls()
    for dll, lazy in [*((d, False) for d in binary.needed), *((d, True) for d in binary.lazy)]:
        lower = dll.lower()
        if re.fullmatch(r"python3\d*\.dll", lower):
            if lower not in (python_dll, "python3.dll"):
                audit.problems.append(f"imports {shown(dll)}, but the wheel is for Python {python} ({python_dll})")
            continue
        if checker.dependency(audit, dll, allowed, lazy=lazy):
            continue
        if not any(fnmatch.fnmatch(lower, pattern) for pattern in system):
            audit.problems.append(
                f"imports {shown(dll)}: not a Windows system DLL, not in the wheel, not a declared CUDA "
                "component — delvewheel should have vendored it"
            )
    return audit


def _cuda_held(built: BuiltWheel) -> list[str]:
    """A `-cudaNNx` wheel holds CUDA (cuda_held), else its build most likely missed the source's CUDA switch."""
    variant = built.variant
    missing = no_cuda(list(built.binaries.values()), variant.major, built.name.os, variant.recipe.opens_cuda)
    if missing is None:
        return []
    given = [f"{name} {value}" for name, value in variant.environment.items()]
    return [f"{missing}; {switch_hint(variant.recipe.source, variant.recipe_dir, given)}"]


def audit_wheel(built: BuiltWheel) -> WheelAudit:
    """Check the wheel as pip and PyPI would (its own wheels are read back, not trusted), and every binary the
    repair read against the recipe's policy."""
    variant, name = built.variant, built.name
    size = built.path.stat().st_size
    problems: list[str] = [p.removeprefix(f"{shown(built.path.name)}: ") for p in check_wheel(built.path)[1]]
    if size > variant.recipe.size_limit_mb * MIB:
        problems.append(
            f"wheel is {size / MIB:.1f} MiB, over the recipe's size_limit_mb of {variant.recipe.size_limit_mb} MiB "
            "(100: PyPI's default for a file) — narrow cuda_archs, or raise size_limit_mb once PyPI raised the "
            "project's limit (`nox -s recipe -- --from-report` proposes it)"
        )
    platform = platform_of(name.os)
    problems += platform.tag_problems(name.platform_tag)
    policy = manylinux_policy(name.platform_tag)
    in_wheel = {PurePosixPath(m).name for m in members(built.path)}
    required = {str(canonicalize_name(r.name)) for r in requires_dist(built.path, with_extras=False)}
    checker = _Checker(variant, name.platform, in_wheel, required)
    binaries = [
        _unreadable(b)
        if b.unreadable
        else _check_elf(b, checker, policy, name.platform_tag, name.python)
        if b.format == "elf"
        else _check_pe(b, checker, name.python)
        for b in built.binaries.values()
    ]
    problems += platform.loader_problems(built.path, variant)
    problems += python_abi_problems(built.path, name, built.binaries.values())
    if variant.torch_target:
        problems += stable_abi_problems(built.path, variant.torch_target, built.binaries.values())
    modules = {b.module for b in binaries if b.module}
    libraries = {_binary_name(b) for b in binaries if not b.module}
    problems += declared_problems(variant, modules, name.os, name.arch, libraries)
    problems += _cuda_held(built)
    # A wheel tied to one torch release may also be its labelled copy, as its index page holds it.
    locked = variant.locked_torch
    versions = [variant.recipe.version, *([f"{variant.recipe.version}+{locked.label}"] if locked else [])]
    if name.version not in {Version(v) for v in versions}:
        problems.append(
            f"the build made version {name.version}, the recipe says {' or '.join(versions)} — make the recipe's "
            "version the source's"
        )
    return WheelAudit(built.path.name, name.platform_tag, size, binaries, problems)
