"""What goes into a smoke machine besides NVIDIA's wheels: the wheel's other requirements, fetched here
beforehand, pip's installs into the venvs, and a stand-in of another variant of the wheel."""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from .. import host
from ..binaries.wheelfile import (
    WheelMetadata,
    compatible_platforms,
    cpython_tag,
    metadata_of,
)
from ..built import BuiltWheel
from ..components import component_table
from ..errors import ToolFailure
from ..progress import step
from ..pytorch.install import TorchInstall, torch_install
from ..toolkit.provision import pip_download
from . import resolutions
from .machines import ContainerMachine, Machine
from .nvidia import NvidiaVersions, nvidia_requirements
from .results import Check


def install_checks(machine: Machine, python: str, installs: list[list[str]]) -> list[Check]:
    """Each pip install in turn, as a check; the first that fails ends them."""
    checks = []
    for install in installs:
        installed = machine.install(python, *install)
        shown = " ".join(
            "the wheel" if a == machine.wheel else a
            for a in install
            if a not in ("--find-links", "--no-deps", machine.requirements)
        )
        checks.append(Check(f"install {shown}".strip(), installed.returncode == 0, host.tail(installed.stderr, 8)))
        if installed.returncode != 0:
            break
    return checks


def requirements(wheel: WheelMetadata, but_torch: bool = False) -> list[str]:
    """The wheel's own Requires-Dist (no extra's) that are not NVIDIA's wheels: what it needs besides CUDA; with
    `but_torch`, torch left out too (a wheel built against it gets torch's as pip resolved them: TorchInstall)."""
    return [
        str(requirement)
        for requirement in wheel.requires_dist(with_extras=False)
        if not requirement.name.startswith("nvidia-")
        and not (but_torch and canonicalize_name(requirement.name) == "torch")
    ]


def shared_install(machine: ContainerMachine, built: BuiltWheel, venv: str, copies: list[str]) -> list[Check]:
    """One install for every venv of a container: the wheel and its other requirements by pip into `venv`, then
    copied into `copies`. That the layouts' NVIDIA wheels meet the wheel's requirements (what pip's resolver
    would prove) is judged from their metadata here."""
    checks = nvidia_met(machine, built)
    checks += install_checks(machine, venv, installs_without_nvidia(machine, built))
    if all(c.ok for c in checks):
        copied = machine.copy_installed(venv, copies)
        what = f"the install copied into the other {len(copies)} venvs"
        checks.append(Check(what, copied.returncode == 0, host.tail(copied.stderr, 8)))
    return checks


def installs_without_nvidia(machine: Machine, built: BuiltWheel, target: str | None = None) -> list[list[str]]:
    """The installs of the wheel without its NVIDIA requirements: its other requirements, then the wheel; into
    the venv, or with `pip install --target` into `target`."""
    into = ["--target", target] if target else []
    installs = [[*into, "--no-deps", machine.wheel]]
    if not machine.requirements:
        return installs
    found = ["--find-links", machine.requirements]
    if target and machine.torch_pins:
        # pip --target sees nothing installed, so it would fetch torch's NVIDIA requirements, which the folder holds
        # already (the layout's): torch and its other requirements go in as pip resolved them, without theirs.
        installs.insert(0, [*into, *found, "--no-deps", *machine.torch_pins])
        others = requirements(machine.metadata, but_torch=True)
    else:
        others = requirements(machine.metadata)
    if others:
        installs.insert(0, [*into, *found, *others])
    return installs


def download_requirements(wheel: WheelMetadata, python: str, into: Path, torch_pins: list[str]) -> Path | None:
    """The wheels of `wheel`'s non-CUDA requirements for CPython `python` and the wheel's platform, as pip resolves
    them from its index (the smoke machine has no network), in `into`; None when it has none. For a wheel built
    against torch (`torch_pins`: torch and its other requirements, as pip resolved them), those without their
    dependencies: what torch requires of NVIDIA is the layouts'. Resolved once an hour (resolutions.py), kept in the
    cache, and linked into `into` (copied, across file systems)."""
    lines = requirements(wheel, but_torch=bool(torch_pins))
    if not lines and not torch_pins:
        return None
    name = wheel.name
    tag = cpython_tag(python)
    options = ["--python-version", python, "--implementation", "cp", "--abi", tag, "--abi", "abi3", "--abi", "none"]
    options += [arg for platform in compatible_platforms(name.platform_tag) for arg in ("--platform", platform)]
    downloads: list[tuple[list[str], list[str]]] = [([], lines)] if lines else []
    if torch_pins:
        downloads.append((["--no-deps"], torch_pins))
    into.mkdir(parents=True, exist_ok=True)
    for more, listed in downloads:
        asked = ["requirements", listed, [*options, *more]]
        with host.cache_lock("wheels"):
            found = resolutions.earlier(asked)
        if found is None:
            what = f"download the requirements of {wheel.path.name}: {', '.join(listed)}"
            with step(what):
                folder, lock = resolutions.wheel_folder(), host.cache_lock("wheels")
                found = tuple(pip_download(listed, [*options, *more], folder, what, lock=lock))
                resolutions.remember(asked, found)
        for downloaded in found:
            if not (into / downloaded.name).exists():  # a wheel both lists resolved to is the same cached file
                host.link_or_copy(downloaded, into / downloaded.name)
    return into


def nvidia_met(machine: ContainerMachine, built: BuiltWheel) -> list[Check]:
    """Whether the NVIDIA wheels the machine's layouts mount, at each set of versions, meet the wheel's
    requirements (requirements_met)."""
    return [requirements_met(machine.metadata, runtime, versions) for versions, runtime in machine.runtimes.items()]


def requirements_met(wheel: WheelMetadata, runtime: Path, versions: NvidiaVersions) -> Check:
    """Each NVIDIA requirement of the wheel (with all its extras) and of theirs, met by the version of that
    distribution in `runtime` (the layouts' NVIDIA wheels at those versions), as pip's resolver would judge."""
    installed = {canonicalize_name(m["Name"]): m for m in map(metadata_of, runtime.glob("*.dist-info/METADATA"))}
    unmet, met = [], set()
    for requirement in nvidia_requirements(
        wheel, lambda name: installed[name].get_all("Requires-Dist") if name in installed else None
    ):
        found = installed.get(canonicalize_name(requirement.name))
        if found is None or not requirement.specifier.contains(found["Version"], prereleases=True):
            unmet.append(f"{requirement} (the layouts have {found['Version'] if found else 'none'})")
        else:
            met.add(f"{found['Name']} {found['Version']}")
    detail = "unmet: " + "; ".join(unmet) if unmet else ", ".join(sorted(met))
    return Check(f"the NVIDIA requirements are met at the {versions}", not unmet, detail)


def torch_installs(built: BuiltWheel, line: str | None, pythons: tuple[str, ...]) -> dict[str, TorchInstall]:
    """What installing the torch requirement `line` brings on each of `pythons` (none for None: a wheel not built
    against torch). The layouts are shared by those Pythons: torch must pin the same NVIDIA wheels on each, and they
    must be the wheel's CUDA major's (a torch built for another CUDA cannot hold the wheel's CUDA libraries)."""
    if line is None:
        return {}
    tags = compatible_platforms(built.name.platform_tag)
    found = {python: torch_install(line, python, built.name, tags) for python in pythons}
    pins = {tuple(install.pins()) for install in found.values()}
    if len(pins) > 1:
        raise ToolFailure(
            f"{built.path.name}: {line} pins other NVIDIA wheels on Python {' than on '.join(found)} — smoke-test "
            "those Pythons one at a time (--python)"
        )
    install, major = next(iter(found.values())), built.variant.major
    # The CUDA runtime's distribution, by any major's name: its version is the CUDA release torch was built with.
    runtimes = {str(canonicalize_name(m.distribution)) for m in component_table().components["cudart"].majors.values()}
    for name, version in install.nvidia.items():
        if name in runtimes and Version(version).major != major:
            fix = "raise torch_target to" if built.variant.torch_target else "name in matrix.yaml"
            raise ToolFailure(
                f"{built.path.name}: {line} installs torch {install.others['torch']}, built for CUDA "
                f"{Version(version).major} ({name}=={version}), not CUDA {major} — {fix} a torch built for CUDA {major}"
            )
    return found
