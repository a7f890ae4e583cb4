"""GPU-free smoke tiers, each wheel on a clean machine: a fresh container of its build image (Linux, no network),
or the runner itself (Windows).

Tiers 1 and 2 run side by side in their own venvs, tier 3 meanwhile on this machine; a wheel that serves several
Pythons (abi3, py3-none) gets tiers 1 and 2 on the oldest and the newest of them — each Python a machine of its own
in one container, the newest taking what pip installed on the oldest where pip would install the same files there
(sharing.py). What each binary must do
comes from what it really links (its DT_NEEDED or PE imports, as the repair read them), not from what the recipe
allows: a module that opens CUDA lazily must import without it.

1. A venv with the wheel and its non-CUDA requirements (fetched here from the index beforehand, as wheels for
   its Python and platform), no CUDA anywhere: `import pkg` and whatever links no CUDA library load under
   `python -W error`; what links one eagerly fails at its own load with ImportError (OSError for a library
   loaded with ctypes); optional pieces raise ImportError carrying the pip command that fixes it. A package
   that opens CUDA when imported (smoke.cuda_at_import) must fail that import cleanly, naming a CUDA library.
2. The wheel and its NVIDIA requirements (and its CUDA extras') laid out as pip lays them out in each layout of
   data/layouts.yaml — in the container NVIDIA's wheels come from the toolkit cache, mounted where pip would have
   put them rather than installed again — then the wheel itself: every binary loads, its CUDA libraries are the
   layout's (RPATH or the variant module at work, no LD_LIBRARY_PATH), the driver is not loaded, and the
   recipe's commands succeed. A binary that links the driver eagerly fails here too, and the check records the
   error it gives. Where the wheel uses NVRTC, a kernel is compiled to CUBIN (no GPU needed) while a decoy
   system copy of NVRTC's builtins is registered with ldconfig in the container: the builtins NVRTC opens must
   come from the layout's NVIDIA wheels all the same. What the recipe says the package opens itself (opens_cuda)
   is found where the layout's NVIDIA wheel put it and loads, with the package imported first.
   Beside it, the wheel and a stand-in of another variant (the same files under the other major's distribution
   name) installed into one folder, as a user may by mistake: the import warns, naming both, and `python -m
   pkg._cuda_variant` fails saying so — where tier 1 proves both silent with the wheel alone.
3. Metadata: name, Requires-Dist on the right major's wheels, the GPU classifier, and `twine check --strict`.

A wheel built against torch (pytorch/install.py) has no tier 1: PyPI's torch does not import without NVIDIA's
libraries. Its layouts hold NVIDIA's wheels at the versions torch pins (with the wheel's own other NVIDIA
requirements at their floors or the newest), torch and its other requirements come from the requirements folder as
pip resolved them, and its two-variants check runs with the first layout's venv. torch's own warnings do not fail
a check. A wheel on LibTorch's stable ABI gets tiers 1 and 2 twice: beside the oldest torch it targets and beside
the newest its requirement lets pip take, each with the NVIDIA wheels that torch pins.

Each tier's checks run in one call into the machine (probe.py, run there as a script), each check in a fresh
interpreter. A layout the recipe declares unsupported (smoke.unsupported_layouts) is smoke-tested all the same and
reported, but does not keep the wheel out of dist/.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import host
from ..built import BuiltWheel
from ..components import operating_system
from ..declared import torch_neighbours
from ..errors import UserError
from ..platforms import platform_of
from .installs import (
    download_requirements,
    install_checks,
    installs_without_nvidia,
    nvidia_met,
    shared_install,
    standin_variant,
    torch_installs,
)
from .machines import ContainerMachine, HostMachine, SmokeContainer
from .nvidia import NvidiaVersions, nvidia_wheels, runtime_site
from .results import Check, Steps, TierResult
from .sharing import Sharing, sharing
from .tiers import neighbour_name, nvrtc_decoys, tier1, tier2, tier3, two_variants, two_variants_installs


def smoke(built: BuiltWheel, steps: Steps | None = None) -> list[TierResult]:
    """Tiers 1 and 2 on a clean machine for each CPython the wheel is smoke-tested on (its own; the oldest and the
    newest of those an abi3 or py3-none wheel serves), tier 3 on this one meanwhile; each step timed into
    `steps`."""
    steps = steps or Steps()
    name, wheel = built.name, built.path.resolve()
    machine_kind, system = platform_of(name.os).smoke_machine, operating_system(name.os)
    if machine_kind == "container" and built.image is None:
        raise UserError(
            f"{wheel.name}: a {system.platform_system} wheel is smoke-tested in a container — give an image"
        )
    if machine_kind == "host" and sys.platform != system.sys_platform:
        raise UserError(
            f"{wheel.name}: a {system.platform_system} wheel is smoke-tested on {system.platform_system} — this host "
            "cannot"
        )
    pythons = built.smoke_pythons
    image = built.image if machine_kind == "container" else None  # the clean machine: a container of it, or this host
    # Each Python's machine beside the others' (a py3-none wheel's two take little more than one): the pool is
    # large enough that every install a tier waits for has a thread of its own.
    with tempfile.TemporaryDirectory(prefix="smoke-") as scratch, ThreadPoolExecutor(12 * len(pythons)) as pool:
        metadata_tier = pool.submit(_timed, steps, "tier 3", tier3, built)  # while the machine starts
        (Path(scratch) / "neighbour").mkdir()
        with steps.timed("a stand-in of another variant"):
            neighbour = standin_variant(wheel, neighbour_name(built.variant), Path(scratch) / "neighbour")
        # A wheel built against torch beside each torch it must run with (a stable-ABI one: the oldest and the
        # newest), one after the other: each brings NVIDIA's wheels of its own.
        torches: dict[tuple[int, str | None], tuple[str, ...]] = {}  # (its place, a torch line) -> the Pythons
        for python in pythons:
            for place, line in enumerate(torch_neighbours(built.variant, python, built.cell.platform) or [None]):
                torches[place, line] = (*torches.get((place, line), ()), python)
        results = []
        for i, ((_, line), beside) in enumerate(sorted(torches.items(), key=lambda item: item[0][0])):
            (Path(scratch) / str(i)).mkdir()
            clean = _Clean(image, wheel, neighbour, steps, Path(scratch) / str(i), pool)
            results += _beside_torch(built, line, beside, clean, labelled=len(torches) > 1)
        return [*results, metadata_tier.result()]


@dataclass(frozen=True)
class _Clean:
    """What each Python's clean machine is made of, whatever torch it holds."""

    image: str | None  # a container of it, or this host
    wheel: Path
    neighbour: Path
    steps: Steps
    scratch: Path
    pool: ThreadPoolExecutor  # where installs and tiers run, beside each other


def _beside_torch(
    built: BuiltWheel, line: str | None, pythons: tuple[str, ...], clean: _Clean, *, labelled: bool
) -> list[TierResult]:
    """Tiers 1 and 2 on each of `pythons`, beside the torch that requirement `line` installs (None: no torch), its
    NVIDIA wheels in the layouts; with `labelled`, each result names that torch."""
    steps = clean.steps
    torch = torch_installs(built, line, pythons)
    beside = next(iter(torch.values()), None)  # the same on each Python (torch_installs holds it to that)
    pinned = beside.nvidia if beside else None
    nvidia: dict[NvidiaVersions, tuple[Path, ...]] = {}
    for versions in ("floors", "newest"):
        with steps.timed(f"NVIDIA's wheels at the {versions}"):
            nvidia[versions] = nvidia_wheels(clean.wheel, versions, pinned)
    pins = {python: torch[python].other_pins() if torch else [] for python in pythons}
    downloads = {python: clean.pool.submit(_requirements, clean, python, pins[python]) for python in pythons}
    found = {python: download.result() for python, download in downloads.items()}
    if clean.image is None:
        results = _on_this_host(built, clean, nvidia, found, pins)
    else:
        # The layouts' NVIDIA wheels, laid out once for every Python, in one container for all of them.
        with steps.timed("lay out the runtime sites"):
            runtimes = {v: runtime_site(built.toolkit, w) for v, w in nvidia.items()}
        container = SmokeContainer(
            clean.image, clean.wheel, runtimes, found, clean.neighbour, steps, nvrtc_decoys(built.variant)
        )
        try:
            results = _in_container(built, container, found, pins, clean.pool)
        finally:
            container.close()
    if labelled and beside:
        for result in results:
            result.torch = beside.others["torch"]
    return results


def _requirements(clean: _Clean, python: str, torch_pins: list[str]) -> Path | None:
    """One CPython's non-CUDA requirements, downloaded for it."""
    (clean.scratch / f"requirements-{python}").mkdir()
    with clean.steps.timed(f"{python}: download the requirements"):
        return download_requirements(clean.wheel, python, clean.scratch / f"requirements-{python}", torch_pins)


def _on_this_host(
    built: BuiltWheel,
    clean: _Clean,
    nvidia: dict[NvidiaVersions, tuple[Path, ...]],
    found: dict[str, Path | None],
    pins: dict[str, list[str]],
) -> list[TierResult]:
    """Each Python's tiers on this host (Windows), a machine of its own each, beside the others; each tier runs
    pip itself."""

    def on_python(python: str) -> list[TierResult]:
        machine = HostMachine(clean.wheel, nvidia, python, found[python], clean.neighbour, clean.steps)
        machine.torch_pins = pins[python]
        try:
            bare, layouts = machine.create_venvs()
            tiers = [] if machine.torch_pins else [clean.pool.submit(tier1, machine, bare, built)]
            layout_tiers = [clean.pool.submit(tier2, machine, layout, built) for layout in layouts]
            tiers += layout_tiers
            if machine.torch_pins:  # its two-variants check runs with the first layout's venv, once that holds torch
                tiers.append(
                    clean.pool.submit(_after, layout_tiers[0], two_variants, machine, layouts[0].python, built)
                )
            else:
                tiers.append(clean.pool.submit(two_variants, machine, bare, built))
            return _on(built, python, [tier.result() for tier in tiers])
        finally:
            machine.close()

    with ThreadPoolExecutor(len(found)) as each_python:
        return [result for run in list(each_python.map(on_python, found)) for result in run]


@dataclass(frozen=True)
class _Installed:
    """The installs on one Python's machine, each the future of its checks, and the venvs they fill."""

    bare: str  # tier 1's venv (by its Python)
    venvs: Future[list[Check]]  # the wheel and its requirements, in every venv of the machine
    target: Future[list[Check]]  # the same in the --target layout's folder
    beside: Future[list[Check]]  # the two-variants folder
    beside_python: str  # the Python that runs the two-variants check


def _in_container(
    built: BuiltWheel,
    container: SmokeContainer,
    found: dict[str, Path | None],
    pins: dict[str, list[str]],
    pool: ThreadPoolExecutor,
) -> list[TierResult]:
    """Tiers 1 and 2 on each Python's machine in the container, beside each other: pip installs on the first, and
    on another Python only where it would not install the same files there (sharing.py)."""
    machines = [container.machine(python) for python in found]
    for machine in machines:
        machine.torch_pins = pins[machine.python]
    first, *others = machines
    first_installed = pool.submit(lambda: _pip_installs(built, first, pool, first.create_venvs()[0]))

    def on_other(machine: ContainerMachine) -> list[TierResult]:
        bare, _ = machine.create_venvs()
        taken = first_installed.result()
        shared = sharing(built.path, first, machine, found)
        if shared is None:
            installed = _pip_installs(built, machine, pool, bare)
        else:
            installed = _taken(built, machine, first, taken, shared, pool, bare)
        return _tiers(built, machine, installed, pool)

    with ThreadPoolExecutor(len(machines)) as each_python:
        runs = [each_python.submit(lambda: _tiers(built, first, first_installed.result(), pool))]
        runs += [each_python.submit(on_other, machine) for machine in others]
        return [result for run in runs for result in run.result()]


def _pip_installs(built: BuiltWheel, machine: ContainerMachine, pool: ThreadPoolExecutor, bare: str) -> _Installed:
    """pip's runs on one Python's machine, its venvs made (`bare`: tier 1's): one into the first venv layout, copied
    into the other venvs; the folders' own (_folders)."""
    first, *others = [layout for layout in machine.layouts if layout.name != "target"]
    copies = [bare, *(layout.python for layout in others)]
    installing = pool.submit(shared_install, machine, built, first.python, copies)
    return _folders(built, machine, pool, bare, installing)


def _folders(
    built: BuiltWheel, machine: ContainerMachine, pool: ThreadPoolExecutor, bare: str, installing: Future[list[Check]]
) -> _Installed:
    """pip's runs into the --target layout's folder (pip lays a wheel out differently there) and the two-variants
    folder, beside `installing`, the install that fills the machine's venvs."""
    layouts = machine.layouts
    (target,) = [layout for layout in layouts if layout.name == "target"]
    targeting = pool.submit(
        install_checks, machine, target.python, installs_without_nvidia(machine, built, target.pythonpath)
    )
    beside_installs = two_variants_installs(machine, built)
    if machine.torch_pins:  # torch (and NVIDIA's wheels) come from the first venv: the folder waits for it
        first = next(layout for layout in layouts if layout.name != "target")
        beside = pool.submit(_after, installing, install_checks, machine, first.python, beside_installs)
        return _Installed(bare, installing, targeting, beside, first.python)
    beside = pool.submit(install_checks, machine, bare, beside_installs)
    return _Installed(bare, installing, targeting, beside, bare)


def _taken(
    built: BuiltWheel,
    machine: ContainerMachine,
    first: ContainerMachine,
    taken: _Installed,
    shared: Sharing,
    pool: ThreadPoolExecutor,
    bare: str,
) -> _Installed:
    """What pip installed on `first`, taken by another Python's machine where pip would install the same there:
    its venvs get copies, and its tiers use the --target folders pip filled on `first` where no script or header is
    (else pip fills its own)."""
    venvs = [bare, *(layout.python for layout in machine.layouts if layout.name != "target")]
    copying = pool.submit(_copied, built, machine, first, taken, shared, venvs)
    if not shared.folders:
        return _folders(built, machine, pool, bare, copying)
    machine.take_folders(first)
    where = f"filled by pip on Python {first.python}, where no wheel puts a script or a header"
    targeting = pool.submit(_filled, taken.target, f"the --target folder {where}", shared)
    beside = pool.submit(_filled, taken.beside, f"the two-variants folder {where}", shared)
    return _Installed(bare, copying, targeting, beside, bare)


def _copied(
    built: BuiltWheel,
    machine: ContainerMachine,
    first: ContainerMachine,
    taken: _Installed,
    shared: Sharing,
    venvs: list[str],
) -> list[Check]:
    """The first Python's install (once pip is done there) copied into `venvs` of `machine`'s Python."""
    checks = [*nvidia_met(machine, built), shared.check]
    if not all(c.ok for c in taken.venvs.result()):
        return [*checks, Check(f"the install on Python {first.python}", False, "it failed there")]
    source = next(layout.python for layout in first.layouts if layout.name != "target")
    copied = machine.copy_installed(source, venvs, first)
    what = f"the install of Python {first.python} copied into the {len(venvs)} venvs"
    return [*checks, Check(what, copied.returncode == 0, host.tail(copied.stderr, 8))]


def _filled(installing: Future[list[Check]], what: str, shared: Sharing) -> list[Check]:
    """The checks of a folder another Python's pip filled: whether it did."""
    done = all(c.ok for c in installing.result())
    return [shared.check, Check(what, done, "" if done else "pip failed there")]


def _tiers(
    built: BuiltWheel, machine: ContainerMachine, installed: _Installed, pool: ThreadPoolExecutor
) -> list[TierResult]:
    """Tiers 1 and 2, and the two-variants check, on one Python's machine, each once its installs are done. A wheel
    built against torch has no tier 1: PyPI's torch does not import without NVIDIA's libraries."""
    tiers = [] if machine.torch_pins else [pool.submit(_once, installed.venvs, tier1, machine, installed.bare, built)]
    tiers += [
        pool.submit(
            _once, installed.target if layout.name == "target" else installed.venvs, tier2, machine, layout, built
        )
        for layout in machine.layouts
    ]
    tiers.append(pool.submit(_once, installed.beside, two_variants, machine, installed.beside_python, built))
    return _on(built, machine.python, [tier.result() for tier in tiers])


def _on(built: BuiltWheel, python: str, results: list[TierResult]) -> list[TierResult]:
    """`results`, each saying the Python it ran on where the wheel serves several (abi3, py3-none)."""
    if built.cell.abi != "cpython":
        for result in results:
            result.python = python
    return results


def _once(installing: Future[list[Check]], run: Callable[..., TierResult], *args: object) -> TierResult:
    """`run(*args)` on what the install fills, once it is there, with its checks."""
    return run(*args, installed=installing.result())


def _timed(steps: Steps, name: str, run: Callable[..., TierResult], *args: object) -> TierResult:
    with steps.timed(name):
        return run(*args)


def _after(first: Future[Any], run: Callable[..., Any], *args: object) -> Any:
    """`run(*args)` once `first` is done (a venv it fills is what `run` uses)."""
    first.result()
    return run(*args)
