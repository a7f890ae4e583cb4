"""GPU-free smoke tiers, each wheel on a clean machine: a fresh container of its build image (Linux, no network),
or the runner itself (Windows).

Tiers 1 and 2 run side by side in their own venvs, tier 3 meanwhile on this machine; a wheel that serves several
Pythons (abi3, py3-none) gets tiers 1 and 2 on the oldest and the newest of them. What each binary must do
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
   come from the layout's NVIDIA wheels all the same.
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

from ..built import BuiltWheel
from ..components import operating_system
from ..declared import torch_neighbours
from ..errors import UserError
from ..platforms import platform_of
from ..pytorch.install import TorchInstall
from .installs import download_requirements, shared_install, standin_variant, torch_installs
from .machines import ContainerMachine, HostMachine, Machine
from .nvidia import NvidiaVersions, nvidia_wheels, runtime_site
from .results import Check, Steps, TierResult
from .tiers import neighbour_name, nvrtc_decoys, tier1, tier2, tier3, two_variants


def _once_installed(installing: Future[list[Check]], run: Callable[..., TierResult], *args: object) -> TierResult:
    """`run(*args)` on a venv that holds a copy of the shared install, once it is there."""
    return run(*args, installed=installing.result())


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
    with tempfile.TemporaryDirectory(prefix="smoke-") as scratch, ThreadPoolExecutor(8 * len(pythons)) as pool:
        metadata_tier = pool.submit(_timed, steps, "tier 3", tier3, wheel, built.variant)  # while the machine starts
        (Path(scratch) / "neighbour").mkdir()
        with steps.timed("a stand-in of another variant"):
            neighbour = standin_variant(wheel, neighbour_name(built.variant), Path(scratch) / "neighbour")
        # A wheel built against torch beside each torch it must run with (a stable-ABI one: the oldest and the
        # newest), one after the other: each brings NVIDIA's wheels of its own.
        torches: list[str | None] = list(torch_neighbours(built.variant)) or [None]
        results = []
        for i, line in enumerate(torches):
            (Path(scratch) / str(i)).mkdir()
            clean = _Clean(image, wheel, neighbour, steps, Path(scratch) / str(i))
            results += _beside_torch(built, line, pythons, clean, pool, labelled=len(torches) > 1)
        return [*results, metadata_tier.result()]


def _beside_torch(
    built: BuiltWheel,
    line: str | None,
    pythons: tuple[str, ...],
    clean: _Clean,
    pool: ThreadPoolExecutor,
    *,
    labelled: bool,
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
    # The layouts' NVIDIA wheels, laid out once for every Python the wheel is smoke-tested on.
    with steps.timed("lay out the runtime sites"):
        runtimes = {v: runtime_site(built.toolkit, w) for v, w in nvidia.items()} if clean.image else {}
    decoys = nvrtc_decoys(built.variant) if clean.image else ()
    machines = _Machines(runtimes, nvidia, decoys)
    with ThreadPoolExecutor(len(pythons)) as each_python:
        on_pythons = [each_python.submit(_on_python, built, python, clean, machines, torch, pool) for python in pythons]
        results = [result for on_python in on_pythons for result in on_python.result()]
    if labelled and beside:
        for result in results:
            result.torch = beside.others["torch"]
    return results


@dataclass(frozen=True)
class _Clean:
    """What each Python's clean machine is made of, whatever torch it holds."""

    image: str | None  # a container of it, or this host
    wheel: Path
    neighbour: Path
    steps: Steps
    scratch: Path


@dataclass(frozen=True)
class _Machines:
    """What the clean machines beside one torch (or none) hold of NVIDIA's wheels."""

    runtimes: dict[NvidiaVersions, Path]  # laid out for a container's layouts to mount
    nvidia: dict[NvidiaVersions, tuple[Path, ...]]  # the wheels themselves, for a host's pip to install
    decoys: tuple[str, ...]


def _on_python(
    built: BuiltWheel,
    python: str,
    clean: _Clean,
    machines: _Machines,
    torch: dict[str, TorchInstall],
    pool: ThreadPoolExecutor,
) -> list[TierResult]:
    """Tiers 1 and 2 on one CPython's clean machine, its requirements downloaded for it first."""
    (clean.scratch / f"requirements-{python}").mkdir()
    torch_pins = torch[python].other_pins() if torch else []
    with clean.steps.timed(f"{python}: download the requirements"):
        found = download_requirements(clean.wheel, python, clean.scratch / f"requirements-{python}", torch_pins)
    machine: Machine
    if clean.image is not None:
        machine = ContainerMachine(
            clean.image, clean.wheel, machines.runtimes, python, found, clean.neighbour, clean.steps, machines.decoys
        )
    else:
        machine = HostMachine(clean.wheel, machines.nvidia, python, found, clean.neighbour, clean.steps)
    machine.torch_pins = torch_pins
    on_python = _smoke_on(built, machine, pool)
    if built.cell.abi != "cpython":  # the wheel serves several: say which one each ran on
        for result in on_python:
            result.python = python
    return on_python


def _timed(steps: Steps, name: str, run: Callable[..., TierResult], *args: object) -> TierResult:
    with steps.timed(name):
        return run(*args)


def _after(first: Future[Any], run: Callable[..., TierResult], *args: object) -> TierResult:
    """`run(*args)` once `first` is done (a venv it fills is what `run` uses)."""
    first.result()
    return run(*args)


def _smoke_on(built: BuiltWheel, machine: Machine, pool: ThreadPoolExecutor) -> list[TierResult]:
    """Tiers 1 and 2, and the two-variants check, on one CPython's clean machine (closed when they are done). A
    wheel built against torch has no tier 1: PyPI's torch does not import without NVIDIA's libraries, so its
    two-variants check runs with the first layout's venv, once that holds torch."""
    with_torch = bool(machine.torch_pins)
    try:
        bare, layouts = machine.create_venvs()
        if isinstance(machine, ContainerMachine):
            # One pip run serves every venv that holds the wheel: the first layout's, copied into the others; the
            # --target folder gets its own (pip lays a wheel out differently there).
            first, *others = [layout for layout in layouts if layout.name != "target"]
            copies = [bare, *(layout.python for layout in others)]
            installing = pool.submit(shared_install, machine, built, first.python, copies)
            tiers = [] if with_torch else [pool.submit(_once_installed, installing, tier1, machine, bare, built)]
            tiers += [
                pool.submit(tier2, machine, lay, built)
                if lay.name == "target"
                else pool.submit(_once_installed, installing, tier2, machine, lay, built)
                for lay in layouts
            ]
            holding_torch: Future[Any] = installing
        else:
            tiers = [] if with_torch else [pool.submit(tier1, machine, bare, built)]
            layout_tiers = [pool.submit(tier2, machine, layout, built) for layout in layouts]
            tiers += layout_tiers
            first, holding_torch = layouts[0], layout_tiers[0]
        if with_torch:
            tiers.append(pool.submit(_after, holding_torch, two_variants, machine, first.python, built))
        else:
            tiers.append(pool.submit(two_variants, machine, bare, built))
        return [tier.result() for tier in tiers]
    finally:
        machine.close()
