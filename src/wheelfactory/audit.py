"""Audit every binary of a wheel against the recipe's linking policy (DESIGN.md §5). Our gate, not auditwheel's tag.

Each binary may need only: the platform's system libraries (manylinux policy / Windows system DLLs and the
matching python3X.dll), libraries inside the wheel, and the libraries of the components the recipe allows that
module. The driver only where the module policy names `driver` (on Windows a delay-loaded nvcuda.dll is lazy and
fine). No CUDA library may be bundled. Linux: every RPATH entry relative, DT_RPATH rather than RUNPATH, reaching
each needed component, and symbol versions within the platform tag. Windows: the DLL-path loader is in place.
The wheel must fit the recipe's size limit.
"""

from __future__ import annotations

import fnmatch
import re
import tempfile
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path

import yaml
from auditwheel.architecture import Architecture
from auditwheel.policy import Libc, Policy, WheelPolicies
from packaging.utils import parse_wheel_filename

from .components import OS, component_table
from .elf import is_elf, read_elf
from .pe import read_pe
from .plan import Variant
from .render import VARIANT_MODULE
from .repair import needed_components, origin_entry, unpack

DRIVER = "driver"  # the pseudo-component a module policy names to be allowed to link the driver
MIB = 1024 * 1024
# The dynamic loader is in no policy's whitelist (auditwheel treats it apart), yet every glibc has it.
DYNAMIC_LOADERS = frozenset({"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"})
# Repair tools rename what they vendor: libcudart.so.12 -> libcudart-256e6409.so.12 (auditwheel),
# cudart64_12.dll -> cudart64_12-<hash>.dll (delvewheel).
_VENDORED_NAME = re.compile(r"^(?P<stem>.+)-[0-9a-f]{8,}(?P<suffix>\.so.*|\.dll)$", re.IGNORECASE)


@dataclass
class BinaryAudit:
    member: str
    module: str | None  # dotted name for an extension module; None for a bundled library
    needed: list[str]
    rpath: list[str]
    runpath: list[str]
    components: list[str]
    problems: list[str] = field(default_factory=list)


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
        return self.problems + [f"{b.member}: {p}" for b in self.binaries for p in b.problems]

    def as_json(self) -> dict[str, object]:
        return {**asdict(self), "passed": self.passed}


def wheel_python(wheel: Path) -> str:
    """`3.12` for a cp312 wheel."""
    _, _, _, tags = parse_wheel_filename(wheel.name)
    interpreter = sorted(t.interpreter for t in tags)[0]
    return f"{interpreter[2]}.{interpreter[3:]}"


def wheel_os(wheel: Path) -> OS:
    return "windows" if _platform_tag(wheel).startswith("win") else "linux"


def module_name(member: str) -> str | None:
    """`pkg/sub/_mod.cpython-312-x86_64-linux-gnu.so` / `pkg/_mod.cp312-win_amd64.pyd` -> dotted name; None for a
    shared library or DLL."""
    path = Path(member)
    if path.parts[0].endswith(".data"):
        path = Path(*path.parts[2:])
    is_extension = ".cpython-" in path.name or ".abi3." in path.name or path.suffix == ".pyd"
    if path.parent.name.endswith(".libs") or not is_extension:
        return None
    return ".".join([*path.parent.parts, path.name.split(".")[0]])


def _platform_tag(wheel: Path) -> str:
    _, _, _, tags = parse_wheel_filename(wheel.name)
    return sorted({t.platform for t in tags})[-1]


def _policy(platform_tag: str) -> Policy | None:
    arch = "x86_64" if "x86_64" in platform_tag else platform_tag.rsplit("_", 1)[-1]
    try:
        return WheelPolicies(libc=Libc.GLIBC, arch=Architecture(arch)).get_policy_by_name(platform_tag)
    except (LookupError, ValueError):
        return None


@cache
def windows_system_dlls() -> tuple[str, ...]:
    data = yaml.safe_load(files("wheelfactory.data").joinpath("windows_system_dlls.yaml").read_text("utf-8"))
    return tuple(p.lower() for p in data["dlls"])


def _unvendored(name: str) -> str:
    match = _VENDORED_NAME.match(name)
    return match["stem"] + match["suffix"] if match else name


def _is_cuda(library: str, major: int, os_name: OS) -> bool:
    table = component_table()
    library = _unvendored(library).lower()
    driver = table.driver.linux if os_name == "linux" else table.driver.windows
    patterns = [*table.all_libraries(major, os_name), driver]
    return any(fnmatch.fnmatch(library, p.lower()) for p in patterns)


class _Checker:
    """The checks that do not depend on the binary format."""

    def __init__(self, variant: Variant, os_name: OS, in_wheel: set[str]) -> None:
        self.variant = variant
        self.os = os_name
        self.in_wheel = {n.lower() for n in in_wheel}
        self.table = component_table()
        self.declared = [*variant.recipe.components, *variant.recipe.optional]

    def allowed(self, audit: BinaryAudit) -> list[str]:
        if audit.module is None:
            if _is_cuda(Path(audit.member).name, self.variant.major, self.os):
                audit.problems.append(
                    "a CUDA library is bundled in the wheel — it must come from NVIDIA's wheels "
                    "(exclude it from the repair)"
                )
            return []
        if audit.module not in self.variant.recipe.modules:
            audit.problems.append(
                f"extension module {audit.module} is not in the recipe's modules — declare what it may link"
            )
            return []
        return self.variant.recipe.modules[audit.module]

    def dependency(self, audit: BinaryAudit, library: str, allowed: list[str], *, lazy: bool = False) -> bool:
        """Judge a CUDA (or in-wheel) dependency; False when it is neither, for the format's own rules."""
        table = self.table
        if library.lower() in self.in_wheel:
            return True
        driver = table.driver.linux if self.os == "linux" else table.driver.windows
        if library.lower() == driver.lower():
            if DRIVER not in allowed and not lazy:
                audit.problems.append(
                    f"links the driver {library}: importing it fails on machines without a GPU "
                    "driver — open the driver lazily instead"
                )
            return True
        owner = table.owner_of(library, self.variant.major, self.os, list(table.components))
        if owner is not None:
            if owner not in allowed:
                policy = ", ".join(allowed) or "no CUDA library"
                audit.problems.append(
                    f"needs {library} ({owner}) but may link {policy} — link with -Wl,--as-needed "
                    "or fix the recipe's module policy"
                )
            return True
        if _is_cuda(library, self.variant.major, self.os):
            audit.problems.append(f"needs CUDA library {library}, which no allowed component provides")
            return True
        return False


def _check_elf(
    path: Path, member: str, checker: _Checker, policy: Policy | None, platform_tag: str, python: str
) -> BinaryAudit:
    info = read_elf(path)
    major = checker.variant.major
    audit = BinaryAudit(
        member,
        module_name(member),
        list(info.needed),
        list(info.rpath),
        list(info.runpath),
        needed_components(info.needed, major, "linux", checker.declared),
    )
    allowed = checker.allowed(audit)
    whitelist = policy.whitelist if policy else frozenset()
    for library in info.needed:
        if library in DYNAMIC_LOADERS or checker.dependency(audit, library, allowed):
            continue
        if library not in whitelist:
            audit.problems.append(
                f"needs {library}: not a manylinux system library, not in the wheel, not a declared CUDA component"
            )
    if info.runpath:
        audit.problems.append(
            f"uses DT_RUNPATH {':'.join(info.runpath)}; needs DT_RPATH so that the libraries it loads find theirs too"
        )
    for entry in [*info.rpath, *info.runpath]:
        if not entry.startswith("$ORIGIN"):
            audit.problems.append(f"RPATH entry {entry!r} is absolute or host-specific — it must be $ORIGIN-relative")
    for name in audit.components:
        component = checker.table.get(name, major)
        if component and component.linux and component.linux.lib_dir:
            expected = origin_entry(member, component.linux.lib_dir, python)
            if expected not in info.rpath:
                audit.problems.append(f"RPATH lacks {expected} for {name}")
    symbol_versions = policy.symbol_versions if policy else {}
    for library, versions in info.version_needs.items():
        for version in sorted(versions):
            namespace, _, number = version.partition("_")  # GLIBC_2.34 -> GLIBC, 2.34
            if namespace in symbol_versions and number not in symbol_versions[namespace]:
                audit.problems.append(f"needs {version} from {library}, newer than {platform_tag} allows")
    return audit


def _check_pe(path: Path, member: str, checker: _Checker, python: str) -> BinaryAudit:
    info = read_pe(path)
    major = checker.variant.major
    audit = BinaryAudit(
        member,
        module_name(member),
        [*info.imports, *info.delay_imports],
        [],
        [],
        needed_components((*info.imports, *info.delay_imports), major, "windows", checker.declared),
    )
    allowed = checker.allowed(audit)
    python_dll = f"python{python.replace('.', '')}.dll"
    system = windows_system_dlls()
    for dll, lazy in [*((d, False) for d in info.imports), *((d, True) for d in info.delay_imports)]:
        lower = dll.lower()
        if re.fullmatch(r"python3\d*\.dll", lower):
            if lower not in (python_dll, "python3.dll"):
                audit.problems.append(f"imports {dll}, but the wheel is for Python {python} ({python_dll})")
            continue
        if checker.dependency(audit, dll, allowed, lazy=lazy):
            continue
        if not any(fnmatch.fnmatch(lower, pattern) for pattern in system):
            audit.problems.append(
                f"imports {dll}: not a Windows system DLL, not in the wheel, not a declared CUDA "
                "component — delvewheel should have vendored it"
            )
    return audit


def _loader_problems(tree: Path, variant: Variant) -> list[str]:
    package = tree.joinpath(*variant.recipe.import_name.split("."))
    loader = package / VARIANT_MODULE
    init = package / "__init__.py"
    if not loader.is_file() or "_add_cuda_dll_directories" not in loader.read_text(encoding="utf-8"):
        return [
            f"no DLL-path loader ({VARIANT_MODULE}) in {variant.recipe.import_name}: extensions cannot find "
            "NVIDIA's DLLs"
        ]
    if not init.is_file() or "_cuda_variant" not in init.read_text(encoding="utf-8"):
        return [f"{variant.recipe.import_name}/__init__.py does not import {VARIANT_MODULE} before its extensions"]
    return []


def audit_wheel(wheel: Path, variant: Variant) -> WheelAudit:
    recipe = variant.recipe
    os_name = wheel_os(wheel)
    size = wheel.stat().st_size
    platform_tag = _platform_tag(wheel)
    python = wheel_python(wheel)
    problems: list[str] = []
    if size > recipe.size_limit_mb * MIB:
        problems.append(f"wheel is {size / MIB:.1f} MiB, over the {recipe.size_limit_mb} MiB limit")
    policy = _policy(platform_tag) if os_name == "linux" else None
    if os_name == "linux" and policy is None:
        problems.append(f"platform tag {platform_tag} is not a manylinux tag — the repair did not run")
    binaries: list[BinaryAudit] = []
    with tempfile.TemporaryDirectory() as scratch:
        tree = unpack(wheel, Path(scratch))
        members = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())
        checker = _Checker(variant, os_name, {Path(m).name for m in members})
        for member in members:
            path = tree / member
            if os_name == "linux" and is_elf(path):
                binaries.append(_check_elf(path, member, checker, policy, platform_tag, python))
            elif os_name == "windows" and path.suffix.lower() in (".pyd", ".dll"):
                binaries.append(_check_pe(path, member, checker, python))
        if os_name == "windows":
            problems += _loader_problems(tree, variant)
        present = {b.module for b in binaries if b.module}
        for module, allowed in recipe.modules.items():
            unavailable = [
                c
                for c in allowed
                if c != DRIVER and ((e := checker.table.get(c, variant.major)) is None or e.layout(os_name) is None)
            ]
            if module not in present and not unavailable:
                problems.append(f"declared module {module} is missing from the wheel")
    return WheelAudit(wheel.name, platform_tag, size, binaries, problems)
