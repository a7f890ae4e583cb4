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
a check.

Each tier's checks run in one call into the machine (data/../smoke_probe.py), each check in a fresh interpreter.
A layout the recipe declares unsupported (smoke.unsupported_layouts) is smoke-tested all the same and reported,
but does not keep the wheel out of dist/.
"""

from __future__ import annotations

import glob
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any, Protocol

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from . import host
from .binaries.wheelfile import (
    WheelName,
    compatible_platforms,
    cpython_tag,
    metadata,
    metadata_of,
    pack,
    requires_dist,
    unpack,
    with_extras,
)
from .built import BuiltWheel
from .components import NO_WHEEL, component_table, toolkit_table
from .declared import (
    CLASSIFIER_GPU,
    extras,
    installed_path,
    needed_components,
    nvidia_dependencies,
    site_packages,
    torch_requirement,
    variant_module_name,
)
from .errors import ToolFailure, UserError
from .plan import Variant
from .progress import step
from .pytorch.install import TorchInstall, torch_install
from .toolkit.provision import NvidiaVersions, nvidia_requirements, nvidia_wheels, runtime_site

PROBE_SOURCE = files("wheelfactory").joinpath("smoke_probe.py")
COPY_SOURCE = files("wheelfactory").joinpath("smoke_copy.py")
# Where a smoke container has the probe and the copier: a folder of their own, as a script's folder comes first on
# sys.path (a /smoke/copy.py shadowed the standard library's copy module, which torch imports).
TOOLS = "/smoke/tools"
# The modules of torch, whose own warnings a check of a wheel built against it lets pass (`python -W error` stays on
# for everything else).
TORCH_MODULES = r"torch(\..*)?\Z"
# A smoke container is removed when its tiers are done; one whose run was killed ends by itself after this.
SMOKE_CONTAINER_LIFETIME_S = 3600
# Where a smoke container keeps its decoy system CUDA (registered with ldconfig).
DECOY_CUDA = "/opt/decoy-cuda/lib64"
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


def register_decoys(patterns: list[str]) -> str:
    """Shell: copy the files matching `patterns` (those that exist) into DECOY_CUDA and register that folder with
    ldconfig, as a CUDA toolkit install registers its own."""
    return (
        f'mkdir -p {DECOY_CUDA} && for f in {" ".join(patterns)}; do [ ! -e "$f" ] || cp "$f" {DECOY_CUDA}/ '
        f"|| exit 1; done && echo {DECOY_CUDA} > /etc/ld.so.conf.d/000-decoy-cuda.conf && ldconfig"
    )


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    libraries: list[str] = field(default_factory=list)  # the CUDA libraries mapped after it ran (Linux)


@dataclass
class TierResult:
    tier: int
    layout: str | None = None  # tier 2: where pip put the wheel and the CUDA wheels (see Layout)
    versions: str | None = None  # tier 2: which versions of them (NvidiaVersions)
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0
    unsupported: str | None = None  # tier 2: why the recipe declares the layout unsupported
    python: str | None = None  # the CPython it ran on, for a wheel that serves several (abi3, py3-none)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def acceptable(self) -> bool:
        """Whether the tier lets the wheel into dist/: it passed, or its layout is declared unsupported."""
        return self.passed or self.unsupported is not None

    @property
    def label(self) -> str:
        on = f"Python {self.python}" if self.python else None
        where = ", ".join(part for part in (self.layout, self.versions, on) if part)
        return f"tier {self.tier}" + (f" ({where})" if where else "")

    def as_json(self) -> dict[str, object]:
        return {**asdict(self), "passed": self.passed}


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
    requirements: str | None  # the folder of its non-CUDA requirements' wheels, as this machine sees it
    neighbour: str  # the stand-in of another variant of the wheel (standin_variant), as this machine sees it
    side_by_side: str  # a folder, absent until pip --target fills it with the wheel and its neighbour
    # For a wheel built against torch: torch and its other requirements as pip resolved them (name==version), which
    # the requirements folder holds; torch's NVIDIA ones are the layouts'.
    torch_pins: list[str]

    def create_venvs(self) -> tuple[str, list[Layout]]:
        """(a bare venv's Python, the layouts of the CUDA wheels, each with a venv of its own)."""
        ...

    def install(self, python: str, *args: str) -> subprocess.CompletedProcess[str]: ...

    def probe(self, python: str, checks: list[dict[str, object]]) -> list[dict[str, object]]: ...

    def close(self) -> None: ...


class ContainerMachine:
    """Linux: a fresh container of the build image, with no network.

    The host may have CUDA installed (a toolkit in ld.so.conf, say), which would let a broken wheel pass tier 1;
    a container of the build image has none (a test puts one there, to show it masks nothing). The wheel, the
    runtime sites (NVIDIA's wheels unpacked, at the floors and the newest) and the probe are mounted read-only;
    a runtime site's nvidia/ is mounted where pip would have put it for each layout — the CUDA venv's
    site-packages, the base interpreter's (under a --system-site-packages venv) and a --target folder, at the
    floors; a second venv's, at the newest — with the distributions' metadata linked beside it. One pip run into
    the first venv serves the others that install the wheel in a venv (`copy_installed`); the --target folder
    gets a pip run of its own, whose layout differs.
    """

    def __init__(
        self,
        image: str,
        wheel: Path,
        runtimes: dict[NvidiaVersions, Path],
        python: str,
        requirements: Path | None,
        neighbour: Path,
        decoys: tuple[str, ...] = (),
    ) -> None:
        self.engine = host.container_engine()
        # Files of the runtime sites (patterns under their nvidia/) copied into a system folder registered with
        # ldconfig, as a CUDA toolkit install registers its own: what the system's loader would find first.
        self.decoys = decoys
        self.wheel = f"/smoke/wheels/{wheel.name}"
        self.requirements = "/smoke/requirements" if requirements else None
        self.neighbour, self.side_by_side = f"/smoke/neighbour/{neighbour.name}", "/smoke/side-by-side"
        self.torch_pins: list[str] = []
        self.runtimes = runtimes  # on the host: the NVIDIA wheels the layouts mount
        prefix = f"/opt/python/{cpython_tag(python)}-{cpython_tag(python)}"
        self.base, self.python = f"{prefix}/bin/python", python
        self.base_site = f"{prefix}/lib/python{python}/site-packages"
        site = f"lib/python{python}/site-packages"
        self.layouts = [
            Layout("venv", "/smoke/cuda/bin/python", f"/smoke/cuda/{site}"),
            Layout("system-site-packages", "/smoke/layered/bin/python", self.base_site),
            Layout("target", "/smoke/targeted/bin/python", "/smoke/target", "/smoke/target"),
            Layout("venv", "/smoke/newest/bin/python", f"/smoke/newest/{site}", versions="newest"),
        ]
        with as_file(PROBE_SOURCE) as probe, as_file(COPY_SOURCE) as copy:
            mounts = [f"{wheel.parent}:/smoke/wheels:ro", f"{probe}:{TOOLS}/wheelfactory_probe.py:ro"]
            mounts.append(f"{copy}:{TOOLS}/wheelfactory_copy.py:ro")
            mounts.append(f"{neighbour.parent}:/smoke/neighbour:ro")
            mounts += [f"{runtime}:/smoke/runtime/{versions}:ro" for versions, runtime in runtimes.items()]
            mounts += [
                f"{runtimes[layout.versions] / 'nvidia'}:{layout.site}/nvidia:ro"
                for layout in self.layouts
                if (runtimes[layout.versions] / "nvidia").is_dir()
            ]
            if requirements:
                mounts.append(f"{requirements}:{self.requirements}:ro")
            command = [self.engine, "run", "--detach", "--rm", "--network", "none"]
            command += [arg for mount in mounts for arg in ("--volume", mount)]
            started = host.run(
                [*command, image, "sleep", str(SMOKE_CONTAINER_LIFETIME_S)], f"starting a smoke container of {image}"
            )
        self.container = started.stdout.strip()

    def _exec(self, argv: list[str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
        return host.run(
            [self.engine, "exec", "--workdir", "/tmp", self.container, *argv], "smoke", check=False, timeout=timeout
        )

    def create_venvs(self) -> tuple[str, list[Layout]]:
        # No pip in the venvs (creating them takes milliseconds): the base interpreter's pip installs into them.
        venv = f"{self.base} -m venv --without-pip"
        venvs = ["/smoke/bare", *(layout.python.removesuffix("/bin/python") for layout in self.layouts)]
        options = {"/smoke/layered": "--system-site-packages "}
        # The venvs at once (each is an interpreter start), then NVIDIA's distributions' metadata linked beside
        # nvidia/ in each layout's site.
        link = " && ".join(f"link /smoke/runtime/{layout.versions} {layout.site}" for layout in self.layouts)
        script = (
            'link() { for entry in "$1"/*; do [ ! -e "$entry" ] || [ "${entry##*/}" = nvidia ] || '
            'ln -s "$entry" "$2/" || return 1; done; }; '
            + " ".join(f"{venv} {options.get(path, '')}{path} &" for path in venvs)
            + f" wait && for venv in {' '.join(venvs)}; do "
            '[ -x "$venv/bin/python" ] || { echo "no venv $venv" >&2; exit 1; }; done && '
            f"mkdir -p /smoke/target && {link}"
        )
        if self.decoys:
            script += " && " + register_decoys(
                [f"/smoke/runtime/{v}/nvidia/{p}" for v in self.runtimes for p in self.decoys]
            )
        created = self._exec(["sh", "-c", script])
        if created.returncode != 0:
            raise ToolFailure(f"cannot create the smoke venvs: {host.tail(created.stderr)}")
        return "/smoke/bare/bin/python", self.layouts

    def install(self, python: str, *args: str) -> subprocess.CompletedProcess[str]:
        # The base interpreter's pip, run by the venv's own Python through pip's own runner (as `pip --python` does
        # after starting once more): it installs into that venv as a pip of its own would, at half the start-up
        # cost. The runner lets the venv import pip alone from the base site-packages; run as a folder, pip would
        # put that whole site on sys.path and take what the base interpreter has (packaging, say) as installed.
        # No byte-compiling: each check's interpreter compiles what it imports, as a fresh install's first use does.
        pip = [python, f"{self.base_site}/pip/__pip-runner__.py", "install", "--quiet", "--disable-pip-version-check"]
        return self._exec([*pip, "--no-index", "--no-compile", *args])

    def copy_installed(self, source: str, targets: list[str]) -> subprocess.CompletedProcess[str]:
        """What pip installed into venv `source` (by its Python), copied into the venvs `targets` (by theirs)
        file by file as its RECORD says, scripts naming their own venv's interpreter: what a pip run into each
        would have written (smoke_copy.py)."""
        return self._exec(
            [self.base, f"{TOOLS}/wheelfactory_copy.py", f"lib/python{self.python}/site-packages", source, *targets]
        )

    def probe(self, python: str, checks: list[dict[str, object]]) -> list[dict[str, object]]:
        return _outcomes(self._exec([python, f"{TOOLS}/wheelfactory_probe.py", json.dumps(checks)]), checks)

    def close(self) -> None:
        # Killed, it is removed by the engine (--rm) without holding the smoke up.
        host.run([self.engine, "kill", self.container], "stopping the smoke container", check=False)


class HostMachine:
    """Windows: the runner itself (the release pipeline smokes on a clean runner of another image). The CUDA
    wheels are installed for real, at the floors into the CUDA venv and with `pip install --target` into a folder
    put on PYTHONPATH (tier 2 installs the wheel there the same way), and at the newest into a second venv; the
    --system-site-packages layout would install them into the runner's own Python, which a developer's machine
    must not get, so it is left to the Linux tiers."""

    def __init__(
        self,
        wheel: Path,
        nvidia: dict[NvidiaVersions, tuple[Path, ...]],
        python: str,
        requirements: Path | None,
        neighbour: Path,
    ) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="smoke-"))
        self.wheel, self.nvidia, self.python_version = str(wheel), nvidia, python
        self.neighbour, self.side_by_side = str(neighbour), str(self.scratch / "side-by-side")
        self.torch_pins: list[str] = []
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
        return str(venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python"))

    def create_venvs(self) -> tuple[str, list[Layout]]:
        base = self._base_python()
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
        return host.run(
            [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", *args],
            "pip",
            check=False,
        )

    def probe(self, python: str, checks: list[dict[str, object]]) -> list[dict[str, object]]:
        return _outcomes(
            host.run([python, self.probe_path, json.dumps(checks)], "smoke", check=False, timeout=900), checks
        )

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def _outcomes(run: subprocess.CompletedProcess[str], checks: list[dict[str, object]]) -> list[dict[str, object]]:
    lines = run.stdout.strip().splitlines()
    try:
        outcomes: list[dict[str, object]] = json.loads(lines[-1])
    except (IndexError, ValueError):
        reason = f"the probe failed (exit {run.returncode}): {host.tail(run.stdout + run.stderr, 8)}"
        return [{"ok": False, "detail": reason} for _ in checks]
    return outcomes


@dataclass(frozen=True)
class BinaryExpectation:
    """How one of the wheel's binaries behaves on import, from what it really links (DT_NEEDED / PE imports)."""

    statement: str  # `import pkg._mod`, or a ctypes load for a library that is named like a module
    error: str  # the exception a failed load raises: ImportError, or OSError from ctypes
    cuda: list[str]  # the CUDA libraries it links eagerly (the driver included)
    driver: bool  # one of them is the driver: no GPU-free machine can load it

    def check(
        self, *, cuda_installed: bool, site: str | None = None, pythonpath: str | None = None
    ) -> tuple[str, dict[str, object]]:
        fails = self.driver or (bool(self.cuda) and not cuda_installed)
        why = f" (links {', '.join(self.cuda)})" if fails else ""
        expect = self.error if fails else "ok"
        return _expect(self.statement, expect, why=why, site=None if fails else site, pythonpath=pythonpath)


def binary_expectations(built: BuiltWheel) -> list[BinaryExpectation]:
    """One per extension module of the wheel (and per library named like one, which ctypes loads)."""
    variant, name = built.variant, built.name
    table = component_table()
    driver = (table.driver.linux if name.os == "linux" else table.driver.windows).lower()
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
        found.append(BinaryExpectation(statement, error, eager, any(lib.lower() == driver for lib in eager)))
    return found


def _install(machine: Machine, python: str, installs: list[list[str]]) -> list[Check]:
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
    result.checks += installed if installed is not None else _install(machine, python, installs)
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


def requirements(wheel: Path, but_torch: bool = False) -> list[str]:
    """The wheel's own Requires-Dist (no extra's) that are not NVIDIA's wheels: what it needs besides CUDA; with
    `but_torch`, torch left out too (a wheel built against it gets torch's as pip resolved them: TorchInstall)."""
    return [
        str(requirement)
        for requirement in requires_dist(wheel, with_extras=False)
        if not requirement.name.startswith("nvidia-")
        and not (but_torch and canonicalize_name(requirement.name) == "torch")
    ]


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
    return _run_tier(TierResult(1), machine, python, _alone(machine, built), checks, installed)


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
    return f"{variant.recipe.name}-cuda{max(others)}x" if others else variant.recipe.name


def standin_variant(wheel: Path, name: str, into: Path) -> Path:
    """A copy of `wheel` under the distribution name `name` — the same files, metadata of its own — in `into`:
    what pip leaves behind when a user installs two variants of one package."""
    tree = unpack(wheel, into / "tree")
    (info,) = tree.glob("*.dist-info")
    renamed = info.with_name(f"{canonicalize_name(name).replace('-', '_')}-{info.name.split('-', 1)[1]}")
    info.rename(renamed)
    text = (renamed / "METADATA").read_text(encoding="utf-8")
    (renamed / "METADATA").write_text(re.sub(r"(?m)^Name: .*$", f"Name: {name}", text, count=1), encoding="utf-8")
    (into / "wheel").mkdir()
    return pack(tree, into / "wheel")


def two_variants(machine: Machine, python: str, built: BuiltWheel) -> TierResult:
    """The wheel and a stand-in of another variant installed into one place, as a user may by mistake: the
    import warns once, naming both distributions, and the variant module's diagnostic fails saying so. (Alone,
    in tiers 1 and 2, the import is silent: their interpreters turn any warning into an error.)"""
    other = neighbour_name(built.variant)
    if machine.torch_pins:  # torch (and NVIDIA's wheels) come from `python`'s venv: only the two go in the folder
        installs = [["--target", machine.side_by_side, "--no-deps", machine.wheel, machine.neighbour]]
    else:
        installs = _alone(machine, built, machine.side_by_side)
        installs[-1].append(machine.neighbour)
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
    return _run_tier(TierResult(1, f"beside {other}"), machine, python, installs, checks)


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
    where = "windows" if name.os == "windows" else f"linux {name.arch}"
    return NO_WHEEL.format(distribution="", where=where).strip()  # whichever distribution it names


def shared_install(machine: ContainerMachine, built: BuiltWheel, venv: str, copies: list[str]) -> list[Check]:
    """One install for every venv of a container: the wheel and its other requirements by pip into `venv`, then
    copied into `copies`. That the layouts' NVIDIA wheels meet the wheel's requirements (what pip's resolver
    would prove) is judged from their metadata here."""
    checks = [requirements_met(built.path, runtime, versions) for versions, runtime in machine.runtimes.items()]
    checks += _install(machine, venv, _alone(machine, built))
    if all(c.ok for c in checks):
        copied = machine.copy_installed(venv, copies)
        what = f"the install copied into the other {len(copies)} venvs"
        checks.append(Check(what, copied.returncode == 0, host.tail(copied.stderr, 8)))
    return checks


def _alone(machine: Machine, built: BuiltWheel, target: str | None = None) -> list[list[str]]:
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
        others = requirements(built.path, but_torch=True)
    else:
        others = requirements(built.path)
    if others:
        installs.insert(0, [*into, *found, *others])
    return installs


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
    if layout.name == "target":  # into the folder beside the CUDA wheels, where pip cannot check them
        installs = _alone(machine, built, layout.pythonpath)
    else:
        # Its NVIDIA requirements are in place already; pip checks them and installs the rest, with the extras of
        # its optional CUDA components (not the source's own extras, such as dev or doc).
        found = ["--find-links", machine.requirements] if machine.requirements else []
        installs = [[*found, with_extras(machine.wheel, sorted(extras(built.variant)))]]
    unsupported = smoke_spec.unsupported_layouts.get(layout.name)
    result = TierResult(2, layout.name, layout.versions, unsupported=unsupported)
    return _run_tier(result, machine, layout.python, installs, checks, installed)


def nvrtc_compile(built: BuiltWheel, site: str, pythonpath: str | None) -> list[tuple[str, dict[str, object]]]:
    """Where the wheel uses NVRTC (or a component it needs does): a kernel compiled to CUBIN after importing the
    package, with every CUDA library mapped — NVRTC's builtins, opened by name, included — from under `site`."""
    variant = built.variant
    if "nvrtc" not in variant.runtime_closure(variant.components(optional=False)):
        return []
    entry = component_table().get("nvrtc", variant.major)
    layout = entry.layout(built.name.os, built.name.arch) if entry else None
    if layout is None:
        return []
    arch = max(variant.cuda_archs(built.cell.platform))
    folder = layout.lib_dir if built.name.os == "linux" else layout.dll_dir
    library = f"{glob.escape(site)}/**/{folder}/{layout.libraries[0]}"
    statement = NVRTC_COMPILE.format(package=variant.recipe.import_name, library=library, arch=arch)
    _, spec = _expect(statement, "ok", site=site, pythonpath=pythonpath)
    return [(f"NVRTC compiles a kernel to CUBIN for sm_{arch}, its builtins from this layout → ok", spec)]


def nvrtc_decoys(variant: Variant) -> tuple[str, ...]:
    """NVRTC's builtins under a runtime site's nvidia/ (patterns), for the decoy system copy."""
    entry = component_table().get("nvrtc", variant.major)
    layout = entry.linux if entry else None
    if layout is None or layout.lib_dir is None or "nvrtc" not in variant.runtime_closure(variant.declared):
        return ()
    folder = layout.lib_dir.removeprefix("nvidia/")
    return tuple(f"{folder}/{pattern}" for pattern in layout.opens)


def tier3(wheel: Path, variant: Variant) -> TierResult:
    result = TierResult(3)
    started = time.monotonic()
    found = metadata(wheel)
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
    result.seconds = round(time.monotonic() - started, 1)
    return result


def download_requirements(wheel: Path, python: str, into: Path, torch_pins: list[str]) -> Path | None:
    """The wheels of `wheel`'s non-CUDA requirements for CPython `python` and the wheel's platform, fetched here
    from pip's index (the smoke machine has no network); None when it has none. For a wheel built against torch
    (`torch_pins`: torch and its other requirements, as pip resolved them), those without their dependencies: what
    torch requires of NVIDIA is the layouts'."""
    lines = requirements(wheel, but_torch=bool(torch_pins))
    if not lines and not torch_pins:
        return None
    name = WheelName.of(wheel)
    tag = cpython_tag(python)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--dest", str(into)]
    command += ["--only-binary", ":all:", "--python-version", python, "--implementation", "cp"]
    command += ["--abi", tag, "--abi", "abi3", "--abi", "none"]
    command += [arg for platform in compatible_platforms(name.platform_tag) for arg in ("--platform", platform)]
    downloads: list[tuple[list[str], list[str]]] = [([], lines)] if lines else []
    if torch_pins:
        downloads.append((["--no-deps"], torch_pins))
    for options, listed in downloads:
        with step(f"download the requirements of {wheel.name}: {', '.join(listed)}"):
            done = host.run([*command, *options, *listed], "pip download", check=False)
            if done.returncode != 0:
                raise ToolFailure(
                    f"{wheel.name}: cannot download its requirements {', '.join(listed)} for the smoke tiers — "
                    f"{host.tail(done.stderr, 6)}"
                )
    return into


def requirements_met(wheel: Path, runtime: Path, versions: NvidiaVersions) -> Check:
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


def _once_installed(installing: Future[list[Check]], run: Callable[..., TierResult], *args: object) -> TierResult:
    """`run(*args)` on a venv that holds a copy of the shared install, once it is there."""
    return run(*args, installed=installing.result())


def smoke(built: BuiltWheel) -> list[TierResult]:
    """Tiers 1 and 2 on a clean machine for each CPython the wheel is smoke-tested on (its own; the oldest and the
    newest of those an abi3 or py3-none wheel serves), tier 3 on this one meanwhile."""
    name, wheel = built.name, built.path.resolve()
    if name.os == "linux" and built.image is None:
        raise UserError(f"{wheel.name}: a Linux wheel is smoke-tested in a container — give an image")
    if name.os == "windows" and sys.platform != "win32":
        raise UserError(f"{wheel.name}: a Windows wheel is smoke-tested on Windows — this host cannot")
    pythons = built.smoke_pythons
    torch = torch_installs(built, pythons)
    pinned = next(iter(torch.values())).nvidia if torch else None
    nvidia: dict[NvidiaVersions, tuple[Path, ...]] = {v: nvidia_wheels(wheel, v, pinned) for v in ("floors", "newest")}
    # The layouts' NVIDIA wheels, laid out once for every Python the wheel is smoke-tested on.
    image = built.image if name.os == "linux" else None  # the clean machine: a container of it, else this host
    runtimes = {v: runtime_site(built.toolkit, wheels) for v, wheels in nvidia.items()} if image else {}
    decoys = nvrtc_decoys(built.variant) if image else ()
    with tempfile.TemporaryDirectory(prefix="smoke-") as scratch, ThreadPoolExecutor(8) as pool:
        metadata_tier = pool.submit(tier3, wheel, built.variant)  # while the machine starts
        (Path(scratch) / "neighbour").mkdir()
        neighbour = standin_variant(wheel, neighbour_name(built.variant), Path(scratch) / "neighbour")
        results = []
        for python in pythons:
            (Path(scratch) / f"requirements-{python}").mkdir()
            torch_pins = torch[python].other_pins() if torch else []
            found = download_requirements(wheel, python, Path(scratch) / f"requirements-{python}", torch_pins)
            machine: Machine
            if image is not None:
                machine = ContainerMachine(image, wheel, runtimes, python, found, neighbour, decoys)
            else:
                machine = HostMachine(wheel, nvidia, python, found, neighbour)
            machine.torch_pins = torch_pins
            on_python = _smoke_on(built, machine, pool)
            if built.cell.abi != "cpython":  # the wheel serves several: say which one each ran on
                for result in on_python:
                    result.python = python
            results += on_python
        return [*results, metadata_tier.result()]


def torch_installs(built: BuiltWheel, pythons: tuple[str, ...]) -> dict[str, TorchInstall]:
    """For a wheel built against torch, what installing its torch brings on each of `pythons` (none for others).
    The layouts are shared by those Pythons: torch must pin the same NVIDIA wheels on each."""
    line = torch_requirement(built.variant)
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
    return found


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
