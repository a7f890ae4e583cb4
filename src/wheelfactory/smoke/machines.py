"""Where tiers 1 and 2 run: a fresh container of the build image (Linux), or the runner itself (Windows)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from dataclasses import dataclass, replace
from importlib.resources import as_file, files
from pathlib import Path, PurePath
from typing import ClassVar, Protocol

from .. import host
from ..binaries.wheelfile import WheelMetadata, cpython_tag
from ..errors import ToolFailure
from .nvidia import NvidiaVersions
from .results import Steps
from .scratch import SMOKE_TEMP, available_memory, estimated_bytes, mount_options

PROBE_SOURCE = files("wheelfactory.smoke").joinpath("probe.py")
COPY_SOURCE = files("wheelfactory.smoke").joinpath("copier.py")


# Where a smoke container has the probe and the copier: a folder of their own, as a script's folder comes first on
# sys.path (a /smoke/copy.py shadowed the standard library's copy module, which torch imports).
TOOLS = "/smoke/tools"


# A smoke container is removed when its tiers are done; one whose run was killed ends by itself after this.
SMOKE_CONTAINER_LIFETIME_S = 3600


# Where a smoke container keeps its decoy system CUDA (registered with ldconfig).
DECOY_CUDA = "/opt/decoy-cuda/lib64"


def register_decoys(patterns: list[str]) -> str:
    """Shell: copy the files matching `patterns` (those that exist) into DECOY_CUDA and register that folder with
    ldconfig, as a CUDA toolkit install registers its own."""
    return (
        f'mkdir -p {DECOY_CUDA} && for f in {" ".join(patterns)}; do [ ! -e "$f" ] || cp "$f" {DECOY_CUDA}/ '
        f"|| exit 1; done && echo {DECOY_CUDA} > /etc/ld.so.conf.d/000-decoy-cuda.conf && ldconfig"
    )


@dataclass(frozen=True)
class Layout:
    """One way pip may have laid out the wheel and its CUDA wheels (data/layouts.yaml says it in words)."""

    name: str  # "venv": both in the venv; "system-site-packages": the wheel in a --system-site-packages venv,
    #            the CUDA wheels in its base; "target": both in a folder `pip install --target` filled, on PYTHONPATH
    python: str  # the venv's interpreter
    site: str  # the folder holding nvidia/: every CUDA library mapped must come from under it
    pythonpath: str | None = None  # "target": the folder, where the wheel is installed too
    versions: NvidiaVersions = "floors"  # the NVIDIA wheels it holds: at the Requires-Dist floors, or the newest


class Machine(Protocol):
    """Where tiers 1 and 2 run: a clean, GPU-free machine holding the wheel."""

    wheel: str  # the wheel under test, as this machine sees it
    metadata: WheelMetadata  # its METADATA, read once (on this host)
    requirements: str | None  # the folder of its non-CUDA requirements' wheels, as this machine sees it
    neighbour: str  # the stand-in of another variant of the wheel (wheelfile.renamed), as this machine sees it
    side_by_side: str  # a folder, absent until pip --target fills it with the wheel and its neighbour
    # For a wheel built against torch: torch and its other requirements as pip resolved them (name==version), which
    # the requirements folder holds; torch's NVIDIA ones are the layouts'.
    torch_pins: list[str]
    steps: Steps  # where each operation's time goes

    def create_venvs(self) -> tuple[str, list[Layout]]:
        """(a bare venv's Python, the layouts of the CUDA wheels, each with a venv of its own)."""
        ...

    def install(self, python: str, *args: str) -> subprocess.CompletedProcess[str]: ...

    def probe(self, python: str, checks: list[dict[str, object]]) -> list[dict[str, object]]: ...


class SmokeContainer:
    """Linux: one fresh container of the build image, with no network, for every Python a wheel is smoke-tested on
    (beside one torch); each Python's machine (`machine`) keeps its venvs under a folder of its own.

    The host may have CUDA installed (a toolkit in ld.so.conf, say), which would let a broken wheel pass tier 1;
    a container of the build image has none (a test puts one there, to show it masks nothing). The wheel, the
    runtime sites (NVIDIA's wheels unpacked, at the floors and the newest) and the probe are mounted read-only;
    a runtime site's nvidia/ is mounted where pip would have put it for each layout of each Python — the CUDA
    venv's site-packages, the base interpreter's (under a --system-site-packages venv) and a --target folder, at
    the floors; a second venv's, at the newest — with the distributions' metadata linked beside it.
    """

    def __init__(
        self,
        image: str,
        wheel: WheelMetadata,
        runtimes: dict[NvidiaVersions, Path],
        requirements: dict[str, Path | None],
        neighbour: Path,
        steps: Steps,
        decoys: tuple[str, ...] = (),
    ) -> None:
        self.engine = host.container_engine()
        self.steps, self.runtimes = steps, runtimes  # runtimes: on the host, the NVIDIA wheels the layouts mount
        self.metadata, self.wheel = wheel, f"/smoke/wheels/{wheel.path.name}"
        self.neighbour = f"/smoke/neighbour/{neighbour.name}"
        self.machines = {python: ContainerMachine(self, python, found) for python, found in requirements.items()}
        with as_file(PROBE_SOURCE) as probe, as_file(COPY_SOURCE) as copy:
            mounts = [f"{wheel.path.parent}:/smoke/wheels:ro", f"{probe}:{TOOLS}/wheelfactory_probe.py:ro"]
            mounts.append(f"{copy}:{TOOLS}/wheelfactory_copy.py:ro")
            mounts.append(f"{neighbour.parent}:/smoke/neighbour:ro")
            mounts += [f"{runtime}:/smoke/runtime/{versions}:ro" for versions, runtime in runtimes.items()]
            for machine, found in zip(self.machines.values(), requirements.values(), strict=True):
                mounts += [
                    f"{runtimes[layout.versions] / 'nvidia'}:{layout.site}/nvidia:ro"
                    for layout in machine.layouts
                    if (runtimes[layout.versions] / "nvidia").is_dir()
                ]
                if found:
                    mounts.append(f"{found}:{machine.requirements}:ro")
            command = [self.engine, "run", "--detach", "--rm", "--network", "none", "--env", f"TMPDIR={SMOKE_TEMP}"]
            estimate = estimated_bytes(wheel.path, list(requirements.values()))
            command += mount_options(estimate, available_memory())
            command += [arg for mount in mounts for arg in ("--volume", mount)]
            # The container's first process makes the temporary folder. A command that came before it would only
            # be slower: Python's tempfile passes over a TMPDIR that is not there.
            main = f"mkdir -p {SMOKE_TEMP} && exec sleep {SMOKE_CONTAINER_LIFETIME_S}"
            with steps.timed("start the container"):
                started = host.run([*command, image, "sh", "-c", main], f"starting a smoke container of {image}")
        self.container = started.stdout.strip()
        if decoys:
            patterns = [f"/smoke/runtime/{v}/nvidia/{p}" for v in runtimes for p in decoys]
            registered = self.exec("register the decoy system CUDA", ["sh", "-c", register_decoys(patterns)])
            if registered.returncode != 0:
                self.close()
                raise ToolFailure(f"cannot register the smoke's decoy system CUDA: {host.tail(registered.stderr)}")

    def machine(self, python: str) -> ContainerMachine:
        return self.machines[python]

    def exec(self, step: str, argv: list[str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
        with self.steps.timed(step):
            return host.run(
                [self.engine, "exec", "--workdir", "/tmp", self.container, *argv], "smoke", check=False, timeout=timeout
            )

    def close(self) -> None:
        # Killed, it is removed by the engine (--rm) without holding the smoke up.
        with self.steps.timed("stop the container"):
            host.run([self.engine, "kill", self.container], "stopping the smoke container", check=False)


class ContainerMachine:
    """One Python's machine in a smoke container: its venvs under /smoke/<python>/. One pip run into the first
    venv serves the others that install the wheel in a venv (`copy_installed`) — those of another Python too,
    where pip would install the same there (smoke/sharing.py); the --target folder gets a pip run of its own,
    whose layout differs."""

    # Its layouts (name, versions), in order: what the smoke's schedule names a tier 2 for.
    LAYOUTS: ClassVar = (
        ("venv", "floors"),
        ("system-site-packages", "floors"),
        ("target", "floors"),
        ("venv", "newest"),
    )

    def __init__(self, container: SmokeContainer, python: str, requirements: Path | None) -> None:
        self.container, self.python = container, python
        self.root = f"/smoke/{python}"
        self.wheel, self.neighbour, self.metadata = container.wheel, container.neighbour, container.metadata
        self.requirements = f"{self.root}/requirements" if requirements else None
        self.side_by_side = f"{self.root}/side-by-side"
        self.torch_pins: list[str] = []
        self.steps, self.runtimes = container.steps, container.runtimes
        # Once the venvs are made: the base interpreter's pip (pip-25.3) and its version (3.13.1).
        self.pip: str | None = None
        self.version: str | None = None
        prefix = f"/opt/python/{cpython_tag(python)}-{cpython_tag(python)}"
        self.base = f"{prefix}/bin/python"
        self.base_site = f"{prefix}/lib/python{python}/site-packages"
        self.site = f"lib/python{python}/site-packages"
        root = self.root
        self.layouts = [
            Layout("venv", f"{root}/cuda/bin/python", f"{root}/cuda/{self.site}"),
            Layout("system-site-packages", f"{root}/layered/bin/python", self.base_site),
            Layout("target", f"{root}/targeted/bin/python", f"{root}/target", f"{root}/target"),
            Layout("venv", f"{root}/newest/bin/python", f"{root}/newest/{self.site}", versions="newest"),
        ]

    def take_folders(self, other: ContainerMachine) -> None:
        """Run the --target layout's tier and the two-variants check in the folders pip filled on `other`'s Python
        (sharing.py: where pip fills them the same on each)."""
        (target,) = [layout for layout in other.layouts if layout.name == "target"]
        self.side_by_side = other.side_by_side
        self.layouts = [
            replace(layout, site=target.site, pythonpath=target.pythonpath) if layout.name == "target" else layout
            for layout in self.layouts
        ]

    def _exec(self, step: str, argv: list[str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
        return self.container.exec(f"{self.python}: {step}", argv, timeout)

    def create_venvs(self) -> tuple[str, list[Layout]]:
        # No pip in the venvs (creating them takes milliseconds): the base interpreter's pip installs into them.
        venv = f"{self.base} -m venv --without-pip"
        venvs = [f"{self.root}/bare", *(layout.python.removesuffix("/bin/python") for layout in self.layouts)]
        options = {f"{self.root}/layered": "--system-site-packages "}
        # The venvs at once (each is an interpreter start), then NVIDIA's distributions' metadata linked beside
        # nvidia/ in each layout's site; last, which pip and which CPython release the base interpreter is.
        link = " && ".join(f"link /smoke/runtime/{layout.versions} {layout.site}" for layout in self.layouts)
        script = (
            'link() { for entry in "$1"/*; do [ ! -e "$entry" ] || [ "${entry##*/}" = nvidia ] || '
            'ln -s "$entry" "$2/" || return 1; done; }; '
            + " ".join(f"{venv} {options.get(path, '')}{path} &" for path in venvs)
            + f" wait && for venv in {' '.join(venvs)}; do "
            '[ -x "$venv/bin/python" ] || { echo "no venv $venv" >&2; exit 1; }; done && '
            f"mkdir -p {self.root}/target && {link} && sed -n 's/^version *= *//p' {self.root}/bare/pyvenv.cfg && "
            f"cd {self.base_site} && echo pip-*.dist-info"
        )
        created = self._exec("create the venvs", ["sh", "-c", script])
        if created.returncode != 0:
            raise ToolFailure(f"cannot create the smoke venvs: {host.tail(created.stderr)}")
        # What the container said, taken only in the shapes a CPython release and a pip distribution have: anything
        # else leaves them unknown, and each Python gets pip's own runs.
        said = re.fullmatch(r"(3\.\d+\.\d+[a-z0-9]*)\n(pip-\d+(?:\.\d+)*)\.dist-info\n?", created.stdout)
        if said:
            self.version, self.pip = said.group(1), said.group(2)
        return f"{self.root}/bare/bin/python", self.layouts

    def install(self, python: str, *args: str) -> subprocess.CompletedProcess[str]:
        # The base interpreter's pip, run by the venv's own Python through pip's own runner (as `pip --python` does
        # after starting once more): it installs into that venv as a pip of its own would, at half the start-up
        # cost. The runner lets the venv import pip alone from the base site-packages; run as a folder, pip would
        # put that whole site on sys.path and take what the base interpreter has (packaging, say) as installed.
        # No byte-compiling: each check's interpreter compiles what it imports, as a fresh install's first use does.
        pip = [python, f"{self.base_site}/pip/__pip-runner__.py", "install", "--quiet", "--disable-pip-version-check"]
        return self._exec(f"pip install into {_venv(python)}", [*pip, "--no-index", "--no-compile", *args])

    def copy_installed(
        self, source: str, targets: list[str], source_machine: ContainerMachine | None = None
    ) -> subprocess.CompletedProcess[str]:
        """What pip installed into venv `source` (by its Python; of `source_machine`'s Python, else this one's),
        copied into this Python's venvs `targets` (by theirs) file by file as its RECORD says, scripts naming
        their own venv's interpreter: what a pip run into each would have written (copier.py)."""
        source_version = (source_machine or self).python
        what = f"copy the install into {len(targets)} venvs"
        if source_machine is not None:
            what = f"copy the install of Python {source_version} into {len(targets)} venvs"
        copier = [self.base, f"{TOOLS}/wheelfactory_copy.py", source_version, source, self.python, *targets]
        return self._exec(what, copier)

    def link_folder(self, source: str, target: str) -> subprocess.CompletedProcess[str]:
        """What pip put into the --target folder `source`, hard-linked into the new folder `target`: every entry
        but the layout's NVIDIA (its mount, and the metadata linked beside it: links, which pip never writes)."""
        each = 'for entry in * .[!.]* ..?*; do [ -e "$entry" ] || continue; '
        each += '[ -L "$entry" ] || [ "$entry" = nvidia ] || cp -al "$entry" "$0/" || exit 1; done'
        script = f"mkdir {shlex.quote(target)} && cd {shlex.quote(source)} && {each}"
        return self._exec(f"link {source} into {target}", ["sh", "-c", script, target])

    def probe(self, python: str, checks: list[dict[str, object]]) -> list[dict[str, object]]:
        probe = [python, f"{TOOLS}/wheelfactory_probe.py", json.dumps(checks)]
        return _outcomes(self._exec(f"probe {_venv(python)} ({len(checks)} checks)", probe), checks)


class HostMachine:
    """Windows: the runner itself (the release pipeline smokes on a clean runner of another image). The CUDA
    wheels are installed for real, at the floors into the CUDA venv and with `pip install --target` into a folder
    put on PYTHONPATH (tier 2 installs the wheel there the same way), and at the newest into a second venv; the
    --system-site-packages layout would install them into the runner's own Python, which a developer's machine
    must not get, so it is left to the Linux tiers."""

    LAYOUTS: ClassVar = (("venv", "floors"), ("target", "floors"), ("venv", "newest"))

    def __init__(
        self,
        wheel: WheelMetadata,
        nvidia: dict[NvidiaVersions, tuple[Path, ...]],
        python: str,
        requirements: Path | None,
        neighbour: Path,
        steps: Steps,
    ) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="smoke-"))
        self.metadata, self.wheel, self.nvidia, self.python_version = wheel, str(wheel.path), nvidia, python
        self.neighbour, self.side_by_side = str(neighbour), str(self.scratch / "side-by-side")
        self.torch_pins: list[str] = []
        self.steps, self.step_prefix = steps, f"{python}: "
        self.requirements = str(requirements) if requirements else None
        self.probe_path = self.scratch / "smoke_probe.py"
        self.probe_path.write_text(PROBE_SOURCE.read_text(encoding="utf-8"), encoding="utf-8")

    def _base_python(self) -> str:
        """The runner's CPython of the wheel's version: the py launcher's (Windows), else python3.X on PATH —
        the one that answers (a version manager's shim may stand on PATH for a Python it does not select)."""
        launcher = shutil.which("py")
        candidates = [[launcher, f"-{self.python_version}"]] if launcher else []
        on_path = shutil.which(f"python{self.python_version}")
        candidates += [[on_path]] if on_path else []
        for command in candidates:
            found = host.run([*command, "-c", "import sys; print(sys.executable)"], "finding Python", check=False)
            if found.returncode == 0:
                return found.stdout.strip()
        raise ToolFailure(f"no Python {self.python_version} on this host to smoke-test its wheel — install it")

    def _venv_python(self, venv: Path) -> str:
        # bin/python, or Scripts\\python.exe on Windows: this host's venv layout.
        scripts = sysconfig.get_path("scripts", "venv", vars={"base": str(venv)})
        return str(Path(scripts) / f"python{sysconfig.get_config_var('EXE') or ''}")

    def create_venvs(self) -> tuple[str, list[Layout]]:
        base = self._base_python()
        with self.steps.timed(f"{self.step_prefix}create the venvs"):
            for name in ("bare", "cuda", "targeted", "newest"):
                host.run([base, "-m", "venv", self.scratch / name], f"creating the {name} smoke venv")
        cuda, newest = self._venv_python(self.scratch / "cuda"), self._venv_python(self.scratch / "newest")
        target = self.scratch / "target"
        layouts = [
            Layout("venv", cuda, str(self.scratch / "cuda")),
            Layout("target", self._venv_python(self.scratch / "targeted"), str(target), str(target)),
            Layout("venv", newest, str(self.scratch / "newest"), versions="newest"),
        ]
        # NVIDIA's wheels, exactly those of the layout's versions, where pip puts them for each layout; tier 2
        # installs the wheel itself beside them.
        installs: list[tuple[str, list[str], NvidiaVersions]] = [
            (cuda, [], "floors"),
            (cuda, ["--target", str(target)], "floors"),
            (newest, [], "newest"),
        ]
        for python, destination, versions in installs:
            installed = self.install(python, *destination, *(str(w) for w in self.nvidia[versions]))
            if installed.returncode != 0:
                raise ToolFailure(
                    f"cannot install NVIDIA's wheels at the {versions} for the smoke tiers: "
                    f"{host.tail(installed.stderr, 8)}"
                )
        return self._venv_python(self.scratch / "bare"), layouts

    def install(self, python: str, *args: str) -> subprocess.CompletedProcess[str]:
        with self.steps.timed(f"{self.step_prefix}pip install into {_venv(python)}"):
            return host.run(
                [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", *args],
                "pip",
                check=False,
            )

    def probe(self, python: str, checks: list[dict[str, object]]) -> list[dict[str, object]]:
        with self.steps.timed(f"{self.step_prefix}probe {_venv(python)} ({len(checks)} checks)"):
            probed = host.run([python, self.probe_path, json.dumps(checks)], "smoke", check=False, timeout=900)
        return _outcomes(probed, checks)

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def _venv(python: str) -> str:
    """The venv of an interpreter's path (/smoke/cuda/bin/python -> /smoke/cuda), for a step's name."""
    return str(PurePath(python).parent.parent)


def _outcomes(run: subprocess.CompletedProcess[str], checks: list[dict[str, object]]) -> list[dict[str, object]]:
    lines = run.stdout.strip().splitlines()
    try:
        outcomes: list[dict[str, object]] = json.loads(lines[-1])
    except (IndexError, ValueError):
        reason = f"the probe failed (exit {run.returncode}): {host.tail(run.stdout + run.stderr, 8)}"
        return [{"ok": False, "detail": reason} for _ in checks]
    return outcomes
