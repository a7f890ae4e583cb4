"""Audit every binary of a wheel against the recipe's linking policy (DESIGN.md §5). Our gate, not auditwheel's tag.

Linux: DT_NEEDED of each binary ⊆ manylinux system libraries ∪ libraries inside the wheel ∪ libraries of the
components the recipe allows that module; no driver unless declared; no CUDA library inside the wheel; every
RPATH entry relative ($ORIGIN), DT_RPATH rather than RUNPATH, and reaching each needed component; the symbol
versions fit the platform tag; the wheel fits the size limit.
"""

from __future__ import annotations

import fnmatch
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from auditwheel.architecture import Architecture
from auditwheel.policy import Libc, Policy, WheelPolicies
from packaging.utils import parse_wheel_filename

from .components import component_table
from .elf import is_elf, read_elf
from .plan import Variant
from .repair import needed_components, origin_entry, unpack

DRIVER = "driver"  # the pseudo-component a module policy names to be allowed to link the driver
MIB = 1024 * 1024
# The dynamic loader is in no policy's whitelist (auditwheel treats it apart), yet every glibc has it.
DYNAMIC_LOADERS = frozenset({"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"})
# auditwheel renames what it grafts: libcudart.so.12 -> libcudart-256e6409.so.12
_GRAFTED_NAME = re.compile(r"^(?P<stem>.+)-[0-9a-f]{8}(?P<suffix>\.so.*)$")


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


def module_name(member: str) -> str | None:
    """`pkg/sub/_mod.cpython-312-x86_64-linux-gnu.so` -> `pkg.sub._mod`; None for shared libraries."""
    path = Path(member)
    if path.parts[0].endswith(".data"):
        path = Path(*path.parts[2:])
    stem = path.name.split(".")[0]
    is_extension = ".cpython-" in path.name or ".abi3." in path.name or path.name.endswith(".pyd")
    if path.parent.name.endswith(".libs") or (path.name.startswith("lib") and not is_extension):
        return None
    return ".".join([*path.parent.parts, stem])


def wheel_python(wheel: Path) -> str:
    """`3.12` for a cp312 wheel."""
    _, _, _, tags = parse_wheel_filename(wheel.name)
    interpreter = sorted(t.interpreter for t in tags)[0]
    return f"{interpreter[2]}.{interpreter[3:]}"


def _platform_tag(wheel: Path) -> str:
    _, _, _, tags = parse_wheel_filename(wheel.name)
    platforms = sorted({t.platform for t in tags})
    return platforms[-1]


def _policy(platform_tag: str) -> Policy | None:
    arch = platform_tag.rsplit("_", 1)[-1] if "x86_64" not in platform_tag else "x86_64"
    try:
        policies = WheelPolicies(libc=Libc.GLIBC, arch=Architecture(arch))
        return policies.get_policy_by_name(platform_tag)
    except (LookupError, ValueError):
        return None


def _is_cuda(library: str, major: int) -> bool:
    table = component_table()
    grafted = _GRAFTED_NAME.match(library)
    if grafted:
        library = grafted["stem"] + grafted["suffix"]
    patterns = [*table.all_libraries(major, "linux"), table.driver.linux]
    return any(fnmatch.fnmatch(library, p) for p in patterns)


def audit_linux_wheel(wheel: Path, variant: Variant) -> WheelAudit:
    table = component_table()
    major = variant.major
    recipe = variant.recipe
    declared = [*recipe.components, *recipe.optional]
    size = wheel.stat().st_size
    platform_tag = _platform_tag(wheel)
    python = wheel_python(wheel)
    problems: list[str] = []
    limit = recipe.size_limit_mb * MIB
    if size > limit:
        problems.append(f"wheel is {size / MIB:.1f} MiB, over the {recipe.size_limit_mb} MiB limit")
    policy = _policy(platform_tag)
    if policy is None:
        problems.append(f"platform tag {platform_tag} is not a manylinux tag — the repair did not run")
    binaries: list[BinaryAudit] = []
    with tempfile.TemporaryDirectory() as scratch:
        tree = unpack(wheel, Path(scratch))
        members = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())
        in_wheel = {Path(m).name for m in members}
        for member in members:
            path = tree / member
            if not is_elf(path):
                continue
            info = read_elf(path)
            module = module_name(member)
            audit = BinaryAudit(
                member,
                module,
                list(info.needed),
                list(info.rpath),
                list(info.runpath),
                needed_components(info.needed, major, "linux", declared),
            )
            binaries.append(audit)
            if module is None:
                if _is_cuda(Path(member).name, major) or (info.soname and _is_cuda(info.soname, major)):
                    audit.problems.append(
                        "a CUDA library is bundled in the wheel — it must come from NVIDIA's "
                        "wheels (exclude it from auditwheel repair)"
                    )
                allowed: list[str] = []
            elif module not in recipe.modules:
                audit.problems.append(
                    f"extension module {module} is not in the recipe's modules — declare what it may link"
                )
                allowed = []
            else:
                allowed = recipe.modules[module]
            whitelist: frozenset[str] = policy.whitelist if policy else frozenset()
            for library in info.needed:
                if library in in_wheel or library in DYNAMIC_LOADERS:
                    continue
                if library == table.driver.linux:
                    if DRIVER not in allowed:
                        audit.problems.append(
                            f"links the driver {library}: `import` fails on machines without a "
                            "GPU — open it lazily (dlopen) instead"
                        )
                    continue
                owner = table.owner_of(library, major, "linux", list(table.components))
                if owner is not None:
                    if owner not in allowed:
                        policy_text = ", ".join(allowed) or "no CUDA library"
                        audit.problems.append(
                            f"needs {library} ({owner}) but may link {policy_text} — link with "
                            "-Wl,--as-needed or fix the recipe's module policy"
                        )
                    continue
                if _is_cuda(library, major):
                    audit.problems.append(f"needs CUDA library {library}, which no allowed component provides")
                elif library not in whitelist:
                    audit.problems.append(
                        f"needs {library}: not a manylinux system library, not in the wheel, "
                        "not a declared CUDA component"
                    )
            if info.runpath:
                audit.problems.append(
                    f"uses DT_RUNPATH {':'.join(info.runpath)}; needs DT_RPATH so that the "
                    "libraries it loads find theirs too"
                )
            for entry in [*info.rpath, *info.runpath]:
                if not entry.startswith("$ORIGIN"):
                    audit.problems.append(
                        f"RPATH entry {entry!r} is absolute or host-specific — it must be $ORIGIN-relative"
                    )
            for name in audit.components:
                component = table.get(name, major)
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
        present = {b.module for b in binaries if b.module}
        for module, allowed_components in recipe.modules.items():
            unavailable = [
                c for c in allowed_components if c != DRIVER and ((e := table.get(c, major)) is None or e.linux is None)
            ]
            if module not in present and not unavailable:
                problems.append(f"declared module {module} is missing from the wheel")
    return WheelAudit(wheel.name, platform_tag, size, binaries, problems)
