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

The order of all this is written down in one place, `SmokeSchedule` below: a list of steps, each naming the steps it
waits for, which schedule.py runs, each step as soon as those are done. The wheel's METADATA is read once, here.
Each tier's checks run in one call into the machine (probe.py, run there as a script), each check as fresh as a new
interpreter. A layout the recipe declares unsupported (smoke.unsupported_layouts) is smoke-tested all the same and
reported, but does not keep the wheel out of dist/.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import host
from ..binaries.wheelfile import WheelMetadata, renamed, underscored
from ..built import BuiltWheel
from ..components import operating_system
from ..declared import torch_neighbours
from ..errors import UserError
from ..platforms import platform_of
from ..pytorch.install import TorchInstall
from . import schedule
from .installs import (
    download_requirements,
    install_checks,
    installs_without_nvidia,
    nvidia_met,
    shared_install,
    torch_installs,
)
from .machines import ContainerMachine, HostMachine, Layout, SmokeContainer
from .nvidia import NvidiaVersions, nvidia_wheels, runtime_site
from .results import Check, Steps, TierResult
from .sharing import Sharing, sharing
from .tiers import neighbour_name, nvrtc_decoys, tier1, tier2, tier3, two_variants, two_variants_installs

Done = Mapping[str, Any]  # what the steps a step waits for returned, by name


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
    image = built.image if machine_kind == "container" else None  # the clean machine: a container of it, or this host
    with tempfile.TemporaryDirectory(prefix="smoke-") as scratch:
        written = SmokeSchedule(built, WheelMetadata.read(wheel), image, Path(scratch), steps)
        try:
            done = schedule.run(written.steps(), steps)
        finally:
            written.close()
        return written.results(done)


@dataclass(frozen=True)
class _Installs:
    """The steps whose checks say how one Python's venvs, --target folder and two-variants folder were filled:
    of each, the one that did it (the others of the tuple returned None: pip's own, or taking another Python's)."""

    venvs: tuple[str, ...]
    target: tuple[str, ...]
    beside: tuple[str, ...]
    beside_in_first_layout: bool  # the two-variants check runs with the first layout's venv (torch), else the bare


@dataclass(frozen=True)
class _Fetched:
    """The steps that fetched what one torch's machines are made of."""

    torch: str  # what torch installs on each Python (none: no torch)
    floors: str  # NVIDIA's wheels at the floors
    newest: str  # ...and at the newest
    neighbour: str  # the stand-in of another variant
    requirements: dict[str, str]  # each Python's other requirements, downloaded


def _pins(torch: dict[str, TorchInstall], python: str) -> list[str]:
    """torch and its other requirements as pip resolved them on `python` (none: no torch)."""
    return torch[python].other_pins() if torch else []


def _filled_by(done: Done, names: tuple[str, ...]) -> list[Check]:
    return next(done[name] for name in names if done[name] is not None)


class SmokeSchedule:
    """One wheel's smoke, written down: `steps()` lists them in an order they may start in, each naming what it
    waits for. A wheel built against torch is smoke-tested beside each torch it must run with (a stable-ABI one:
    the oldest and the newest), one after the other: each brings NVIDIA's wheels of its own."""

    def __init__(self, built: BuiltWheel, wheel: WheelMetadata, image: str | None, scratch: Path, timings: Steps):
        self.built, self.wheel, self.image, self.scratch, self.timings = built, wheel, image, scratch, timings
        self.listed: list[schedule.Step] = []
        self.open: list[SmokeContainer | HostMachine] = []  # closed at the end, whatever happened
        torches: dict[tuple[int, str | None], tuple[str, ...]] = {}  # (its place, a torch line) -> the Pythons
        for python in built.smoke_pythons:
            for place, line in enumerate(torch_neighbours(built.variant, python, built.cell.platform) or [None]):
                torches[place, line] = (*torches.get((place, line), ()), python)
        self.lines = [(line, pythons) for (_, line), pythons in sorted(torches.items(), key=lambda item: item[0][0])]
        self.tiers: list[tuple[str, str, list[str]]] = []  # (the torch step, a Python, its tiers' steps)

    def add(self, name: str, run: Callable[[Done], Any], *after: str, timed: str | None = None) -> str:
        self.listed.append(schedule.Step(name, run, after, timed))
        return name

    def steps(self) -> list[schedule.Step]:
        self.add("tier 3", lambda _: tier3(self.built, self.wheel), timed="tier 3")  # while the machine starts
        neighbour = self.add(
            "a stand-in of another variant", lambda _: self._neighbour(), timed="a stand-in of another variant"
        )
        previous: tuple[str, ...] = ()
        for i, (line, pythons) in enumerate(self.lines):
            prefix = f"beside torch {i + 1}: " if len(self.lines) > 1 else ""
            (self.scratch / str(i)).mkdir()
            previous = (self._beside_torch(prefix, self.scratch / str(i), line, pythons, neighbour, previous),)
        return self.listed

    def close(self) -> None:
        while self.open:
            self.open.pop().close()

    def _closed(self, machine: SmokeContainer | HostMachine) -> None:
        self.open.remove(machine)
        machine.close()

    def results(self, done: Done) -> list[TierResult]:
        results = []
        for torch, python, names in self.tiers:
            found = [done[name] for name in names]
            beside: TorchInstall | None = next(iter(done[torch].values()), None)
            for result in found:
                if self.built.cell.abi != "cpython":  # the Python it ran on, where the wheel serves several
                    result.python = python
                if len(self.lines) > 1 and beside:
                    result.torch = beside.others["torch"]
            results += found
        return [*results, done["tier 3"]]

    def _standin(self) -> Path:
        """Where the stand-in of another variant is put once made: the wheel's own file name, the other variant's
        distribution in it (the version and tags pip accepted in the wheel's own). Its folder is made at once, so
        that a container can mount it before the stand-in is written (bind mounts show what comes later)."""
        distribution = underscored(neighbour_name(self.built.variant))
        folder = self.scratch / "standin"
        folder.mkdir(exist_ok=True)
        return folder / f"{distribution}-{self.wheel.path.name.split('-', 1)[1]}"

    def _neighbour(self) -> Path:
        """The stand-in, written beside its place and moved there whole: a container may already mount it."""
        (self.scratch / "neighbour").mkdir()
        made = renamed(self.wheel.path, neighbour_name(self.built.variant), self.scratch / "neighbour")
        return made.rename(self._standin())

    def _beside_torch(
        self,
        prefix: str,
        scratch: Path,
        line: str | None,
        pythons: tuple[str, ...],
        neighbour: str,
        after: tuple[str, ...],
    ) -> str:
        """The steps of tiers 1 and 2 on each of `pythons`, beside the torch that requirement `line` installs (None:
        no torch), its NVIDIA wheels in the layouts, once the steps `after` are done; the name of the last."""
        built, wheel = self.built, self.wheel
        torch = self.add(f"{prefix}what torch installs", lambda _: torch_installs(built, line, pythons), *after)

        def pinned(done: Done) -> dict[str, str] | None:
            beside: TorchInstall | None = next(iter(done[torch].values()), None)  # the same on each Python
            return beside.nvidia if beside else None

        floors = self.add(
            f"{prefix}NVIDIA's wheels at the floors",
            lambda done: nvidia_wheels(wheel, "floors", pinned(done)),
            torch,
            timed="NVIDIA's wheels at the floors",
        )
        newest = self.add(
            f"{prefix}NVIDIA's wheels at the newest",
            lambda done: nvidia_wheels(wheel, "newest", pinned(done)),
            torch,
            timed="NVIDIA's wheels at the newest",
        )
        # The resolutions go to the index side by side; only their downloads take turns (the wheel folder's lock).
        downloads = {python: self._download(prefix, scratch, python, torch) for python in pythons}
        fetched = _Fetched(torch, floors, newest, neighbour, downloads)
        if self.image is None:
            return self._on_this_host(prefix, fetched, torched=line is not None)
        return self._in_container(prefix, self.image, fetched, torched=line is not None)

    def _download(self, prefix: str, scratch: Path, python: str, torch: str) -> str:
        """The step that downloads one CPython's non-CUDA requirements for it."""

        def download(done: Done) -> Path | None:
            (scratch / f"requirements-{python}").mkdir()
            pins = _pins(done[torch], python)
            return download_requirements(self.wheel, python, scratch / f"requirements-{python}", pins)

        name = f"{python}: download the requirements"
        return self.add(f"{prefix}{name}", download, torch, timed=name)

    def _on_this_host(self, prefix: str, fetched: _Fetched, *, torched: bool) -> str:
        """Each Python's tiers on this host (Windows), a machine of its own each, beside the others; each tier runs
        pip itself."""
        ends = [self._on_host_python(prefix, fetched, python, torched) for python in fetched.requirements]
        return self.add(f"{prefix}the machines removed", lambda _: None, *ends)

    def _on_host_python(self, prefix: str, fetched: _Fetched, python: str, torched: bool) -> str:
        """One Python's machine on this host, and its tiers. A wheel built against torch has no tier 1, and its
        two-variants check runs with the first layout's venv, once that holds torch."""
        built, named = self.built, f"{prefix}{python}: "
        waits = (fetched.torch, fetched.floors, fetched.newest, fetched.neighbour, fetched.requirements[python])
        made = self.add(f"{named}make its machine", lambda done: self._host_machine(done, fetched, python), *waits)
        tiers = [] if torched else [self.add(f"{named}tier 1", lambda d: tier1(d[made][0], d[made][1], built), made)]
        layouts = [
            self.add(f"{named}tier 2 ({name}, {versions})", self._host_tier2(made, i), made)
            for i, (name, versions) in enumerate(HostMachine.LAYOUTS)
        ]
        tiers += layouts
        if torched:
            run = lambda d: two_variants(d[made][0], d[made][2][0].python, built)  # noqa: E731
            tiers.append(self.add(f"{named}two variants", run, made, layouts[0]))
        else:
            tiers.append(self.add(f"{named}two variants", lambda d: two_variants(d[made][0], d[made][1], built), made))
        self.tiers.append((fetched.torch, python, tiers))
        return self.add(f"{named}remove its machine", lambda d: self._closed(d[made][0]), made, *tiers)

    def _host_tier2(self, made: str, index: int) -> Callable[[Done], TierResult]:
        return lambda done: tier2(done[made][0], done[made][2][index], self.built)

    def _host_machine(self, done: Done, fetched: _Fetched, python: str) -> tuple[HostMachine, str, list[Any]]:
        nvidia: dict[NvidiaVersions, tuple[Path, ...]] = {
            "floors": done[fetched.floors],
            "newest": done[fetched.newest],
        }
        found, neighbour = done[fetched.requirements[python]], done[fetched.neighbour]
        machine = HostMachine(self.wheel, nvidia, python, found, neighbour, self.timings)
        self.open.append(machine)
        machine.torch_pins = _pins(done[fetched.torch], python)
        bare, layouts = machine.create_venvs()
        return machine, bare, layouts

    def _in_container(self, prefix: str, image: str, fetched: _Fetched, *, torched: bool) -> str:
        """Tiers 1 and 2 on each Python's machine in one container, beside each other: pip installs on the first,
        and on another Python only where it would not install the same files there (sharing.py)."""
        built = self.built
        runtimes = self.add(
            f"{prefix}lay out the runtime sites",  # NVIDIA's wheels, laid out once for every Python
            lambda d: {
                v: runtime_site(built.toolkit, d[s])
                for v, s in (("floors", fetched.floors), ("newest", fetched.newest))
            },
            fetched.floors,
            fetched.newest,
            timed="lay out the runtime sites",
        )
        start = self.add(
            f"{prefix}start the container",
            lambda done: self._container(done, image, fetched, runtimes),
            runtimes,
            fetched.torch,
            *fetched.requirements.values(),
        )
        first, *others = fetched.requirements
        venvs = {python: self._venvs(prefix, start, python) for python in fetched.requirements}
        installs = {first: self._pip_installs(prefix, start, fetched.neighbour, first, venvs[first], torched)}
        for python in others:
            installs[python] = self._taken(prefix, start, fetched, installs[first], first, python, venvs)
        tiers = [
            tier
            for python in fetched.requirements
            for tier in self._tiers(prefix, start, fetched.torch, python, venvs[python], installs[python], torched)
        ]
        return self.add(f"{prefix}stop the container", lambda d: self._closed(d[start]), start, *tiers)

    def _venvs(self, prefix: str, start: str, python: str) -> str:
        """The step that makes one Python's venvs in the container: the bare one's Python."""
        return self.add(
            f"{prefix}{python}: create the venvs", lambda d: d[start].machine(python).create_venvs()[0], start
        )

    def _container(self, done: Done, image: str, fetched: _Fetched, runtimes: str) -> SmokeContainer:
        found = {python: done[step] for python, step in fetched.requirements.items()}
        decoys = nvrtc_decoys(self.built.variant)
        container = SmokeContainer(image, self.wheel, done[runtimes], found, self._standin(), self.timings, decoys)
        self.open.append(container)
        for python in found:
            container.machine(python).torch_pins = _pins(done[fetched.torch], python)
        return container

    def _pip_installs(
        self,
        prefix: str,
        start: str,
        neighbour: str,
        python: str,
        venvs: str,
        torched: bool,
        taking: str | None = None,
    ) -> _Installs:
        """pip's runs on one Python's machine once its venvs are made: one into the first venv layout, copied into
        the other venvs; the requirements into the --target layout's folder (pip lays a wheel out differently
        there), hard-linked into the two-variants folder, then the wheel into the one and, once the stand-in of
        another variant (`neighbour`) is made, the two into the other (for a wheel built against torch, no
        requirements go there, and the two once the first venv holds torch too). With
        `taking` (the step that decided how this Python takes another's installs), each only where it does not."""
        built = self.built

        def unless(taken: Callable[[Sharing], bool], run: Callable[[ContainerMachine, str], list[Check]]) -> Any:
            def step(done: Done) -> list[Check] | None:
                shared = done[taking] if taking else None
                return None if shared is not None and taken(shared) else run(done[start].machine(python), done[venvs])

            return step

        waits = (start, venvs, *((taking,) if taking else ()))
        into_venvs = self.add(
            f"{prefix}{python}: install into the venvs", unless(lambda _: True, self._into_venvs), *waits
        )
        requirements = self.add(
            f"{prefix}{python}: install the requirements into the --target folder",
            unless(lambda shared: shared.folders, lambda machine, _: _target_requirements(machine, built)),
            *waits,
        )

        def seeded(done: Done) -> Check | None:
            installed: list[Check] | None = done[requirements]
            return None if installed is None or torched else _seeded(done[start].machine(python), installed)

        seed = self.add(
            f"{prefix}{python}: the requirements linked into the two-variants folder", seeded, start, requirements
        )

        def into_target(done: Done) -> list[Check] | None:
            installed: list[Check] | None = done[requirements]
            return None if installed is None else _target_wheel(done[start].machine(python), built, installed)

        # The wheel goes into the --target folder once its requirements are linked into the two-variants one.
        target = self.add(f"{prefix}{python}: install into the --target folder", into_target, start, requirements, seed)

        def two_folder(done: Done) -> list[Check] | None:
            shared = done[taking] if taking else None
            if shared is not None and shared.folders:
                return None
            return _two_variants_installed(done[start].machine(python), built, done[venvs], done[seed], torched)

        # torch (and NVIDIA's wheels) from the first venv
        beside_waits = (*waits, neighbour, seed, *((into_venvs,) if torched else ()))
        folder = self.add(f"{prefix}{python}: install the two variants", two_folder, *beside_waits)
        return _Installs((into_venvs,), (target,), (folder,), torched)

    def _into_venvs(self, machine: ContainerMachine, bare: str) -> list[Check]:
        first, *others = [layout for layout in machine.layouts if layout.name != "target"]
        return shared_install(machine, self.built, first.python, [bare, *(layout.python for layout in others)])

    def _taken(
        self,
        prefix: str,
        start: str,
        fetched: _Fetched,
        first_installs: _Installs,
        first: str,
        python: str,
        venvs: dict[str, str],
    ) -> _Installs:
        """What pip installed on `first`, taken by another Python's machine where pip would install the same there
        (sharing.py): its venvs get copies, and its tiers use the --target folders pip filled on `first` where no
        script or header is; else pip's own runs (_pip_installs)."""
        decided = self.add(
            f"{prefix}{python}: may it take the installs of {first}",
            lambda done: self._sharing(
                done[start], first, python, {p: done[s] for p, s in fetched.requirements.items()}
            ),
            start,
            venvs[first],
            venvs[python],
            *fetched.requirements.values(),
        )
        own = self._pip_installs(prefix, start, fetched.neighbour, python, venvs[python], False, decided)
        (first_venvs,) = first_installs.venvs
        copied = self.add(
            f"{prefix}{python}: the install of {first} copied",
            lambda d: (
                None
                if d[decided] is None
                else self._copied(d[start], first, python, d[decided], d[first_venvs], d[venvs[python]])
            ),
            start,
            decided,
            venvs[python],
            first_venvs,
        )
        where = f"filled by pip on Python {first}, where no wheel puts a script or a header"
        folders = []
        for what, (filled,) in (("--target", first_installs.target), ("two-variants", first_installs.beside)):
            folders.append(
                self.add(
                    f"{prefix}{python}: the {what} folder of {first} taken",
                    _taken_folder(decided, filled, f"the {what} folder {where}"),
                    decided,
                    filled,
                )
            )
        return _Installs((*own.venvs, copied), (*own.target, folders[0]), (*own.beside, folders[1]), False)

    def _sharing(
        self, container: SmokeContainer, first: str, python: str, found: dict[str, Path | None]
    ) -> Sharing | None:
        machine, first_machine = container.machine(python), container.machine(first)
        shared = sharing(self.wheel, first_machine, machine, found)
        if shared is not None and shared.folders:
            machine.take_folders(first_machine)
        return shared

    def _copied(
        self, container: SmokeContainer, first: str, python: str, shared: Sharing, first_checks: list[Check], bare: str
    ) -> list[Check]:
        """The first Python's install (once pip is done there) copied into the venvs of `python`'s machine."""
        machine, first_machine = container.machine(python), container.machine(first)
        venvs = [bare, *(layout.python for layout in machine.layouts if layout.name != "target")]
        checks = [*nvidia_met(machine, self.built), shared.check]
        if not all(c.ok for c in first_checks):
            return [*checks, Check(f"the install on Python {first}", False, "it failed there")]
        source = next(layout.python for layout in first_machine.layouts if layout.name != "target")
        copied = machine.copy_installed(source, venvs, first_machine)
        what = f"the install of Python {first} copied into the {len(venvs)} venvs"
        return [*checks, Check(what, copied.returncode == 0, host.tail(copied.stderr, 8))]

    def _tiers(
        self, prefix: str, start: str, torch: str, python: str, venvs: str, installs: _Installs, torched: bool
    ) -> list[str]:
        """Tiers 1 and 2, and the two-variants check, on one Python's machine, each once its installs are done. A
        wheel built against torch has no tier 1: PyPI's torch does not import without NVIDIA's libraries."""
        built = self.built

        def machine(done: Done) -> ContainerMachine:
            machine: ContainerMachine = done[start].machine(python)
            return machine

        tiers = (
            []
            if torched
            else [
                self.add(
                    f"{prefix}{python}: tier 1",
                    lambda d: tier1(machine(d), d[venvs], built, installed=_filled_by(d, installs.venvs)),
                    start,
                    venvs,
                    *installs.venvs,
                )
            ]
        )
        for i, (name, versions) in enumerate(ContainerMachine.LAYOUTS):
            filled = installs.target if name == "target" else installs.venvs
            run = self._container_tier2(start, python, i, filled)
            tiers.append(self.add(f"{prefix}{python}: tier 2 ({name}, {versions})", run, start, *filled))

        def beside(done: Done) -> TierResult:
            python = machine(done).layouts[0].python if installs.beside_in_first_layout else done[venvs]
            return two_variants(machine(done), python, built, installed=_filled_by(done, installs.beside))

        tiers.append(self.add(f"{prefix}{python}: two variants", beside, start, venvs, *installs.beside))
        self.tiers.append((torch, python, tiers))
        return tiers

    def _container_tier2(
        self, start: str, python: str, index: int, filled: tuple[str, ...]
    ) -> Callable[[Done], TierResult]:
        def run(done: Done) -> TierResult:
            machine = done[start].machine(python)
            return tier2(machine, machine.layouts[index], self.built, installed=_filled_by(done, filled))

        return run


def _target_layout(machine: ContainerMachine) -> Layout:
    (target,) = [layout for layout in machine.layouts if layout.name == "target"]
    return target


def _target_requirements(machine: ContainerMachine, built: BuiltWheel) -> list[Check]:
    """pip's runs into the --target folder before the wheel's own: its other requirements (and torch's)."""
    target = _target_layout(machine)
    return install_checks(machine, target.python, installs_without_nvidia(machine, built, target.pythonpath)[:-1])


def _target_wheel(machine: ContainerMachine, built: BuiltWheel, installed: list[Check]) -> list[Check]:
    """The wheel into the --target folder after its requirements (`installed`: their checks), unless they failed."""
    target = _target_layout(machine)
    if not all(c.ok for c in installed):
        return installed
    wheel = installs_without_nvidia(machine, built, target.pythonpath)[-1:]
    return [*installed, *install_checks(machine, target.python, wheel)]


def _seeded(machine: ContainerMachine, installed: list[Check]) -> Check | None:
    """What pip put into the --target folder (`installed`: its runs), hard-linked into the two-variants folder:
    there the same pip run with the same wheels would write the same files (tests/test_layouts.py compares them).
    None where pip put nothing there or failed: the two-variants folder gets pip's own runs."""
    if not installed or not all(c.ok for c in installed):
        return None
    linked = machine.link_folder(_target_layout(machine).pythonpath or "", machine.side_by_side)
    what = "the requirements pip put in the --target folder, linked into the two-variants folder"
    return Check(what, linked.returncode == 0, host.tail(linked.stderr, 8))


def _two_variants_installed(
    machine: ContainerMachine, built: BuiltWheel, bare: str, linked: Check | None, torched: bool
) -> list[Check]:
    """The two-variants folder filled: where its requirements are linked in (`linked`), the wheel and its
    neighbour by the --target folder's pip; else pip's runs of them all, by the bare venv's (torch's: the first)."""
    installs = two_variants_installs(machine, built)
    if linked is not None:  # a failed link ends it, as a failed pip run ends the runs after it
        wheels = install_checks(machine, _target_layout(machine).python, installs[-1:]) if linked.ok else []
        return [linked, *wheels]
    return install_checks(machine, machine.layouts[0].python if torched else bare, installs)


def _taken_folder(decided: str, filled: str, what: str) -> Callable[[Done], list[Check] | None]:
    """A step that takes a folder another Python's pip filled (`filled`: that pip run), where `decided` says so."""

    def take(done: Done) -> list[Check] | None:
        shared: Sharing | None = done[decided]
        return _filled(done[filled], what, shared) if shared and shared.folders else None

    return take


def _filled(installed: list[Check], what: str, shared: Sharing) -> list[Check]:
    """The checks of a folder another Python's pip filled: whether it did."""
    done = all(c.ok for c in installed)
    return [shared.check, Check(what, done, "" if done else "pip failed there")]
