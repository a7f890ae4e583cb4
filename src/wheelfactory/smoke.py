"""GPU-free smoke tiers (DESIGN.md §6), each wheel in fresh venvs on this machine.

1. The wheel alone (`--no-deps`), no CUDA anywhere: `import pkg` and the CUDA-free modules work under
   `python -W error`; CUDA-linked modules fail at their own import with ImportError; optional pieces raise
   ImportError carrying the pip command that fixes it.
2. The same venv plus the declared nvidia-* wheels (and the extras): every module imports, its CUDA libraries
   come from the venv's site-packages (RPATH at work, no LD_LIBRARY_PATH), the driver is not loaded, and the
   recipe's commands succeed.
3. Metadata: name, Requires-Dist on the right major's wheels, the GPU classifier, and `twine check --strict`.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from importlib.resources import as_file, files
from pathlib import Path, PurePosixPath
from typing import Protocol

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .audit import wheel_os, wheel_python
from .components import component_table
from .errors import UserError
from .gpu_check import wheel_extras, wheel_metadata, with_extras
from .image import container_engine
from .plan import Variant, cpython_tag
from .render import CLASSIFIER_GPU

PROBE_SOURCE = files("wheelfactory").joinpath("smoke_probe.py")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class TierResult:
    tier: int
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def as_json(self) -> dict[str, object]:
        return {**asdict(self), "passed": self.passed}


class Machine(Protocol):
    """Where the smoke tiers run: a clean, GPU-free machine holding the wheel and the CUDA wheels."""

    wheels: str  # directory holding the wheel under test
    cuda_wheels: str  # directory holding NVIDIA's wheels, for offline installs
    probe: str  # path of smoke_probe.py

    def base_python(self, version: str) -> str: ...

    def venv_python(self, venv: str) -> str: ...

    def run(self, argv: list[str], timeout: int = 600) -> subprocess.CompletedProcess[str]: ...

    def close(self) -> None: ...


class ContainerMachine:
    """Linux: a fresh container of the build image, with no network.

    The host may have CUDA installed (a toolkit in ld.so.conf, say), which would let a broken wheel pass tier 1;
    a container of the build image has none. The wheel and the provisioned CUDA wheels are mounted read-only.
    """

    wheels = "/smoke/wheels"
    cuda_wheels = "/smoke/cuda-wheels"
    probe = "/smoke/probe.py"
    venv_root = "/smoke/venv"

    def __init__(self, image: str, wheel_dir: Path, cuda_wheel_dir: Path) -> None:
        self.engine = container_engine()
        with as_file(PROBE_SOURCE) as probe:
            mounts = [
                f"{wheel_dir}:{self.wheels}:ro",
                f"{cuda_wheel_dir}:{self.cuda_wheels}:ro",
                f"{probe}:{self.probe}:ro",
            ]
            cmd = [self.engine, "run", "--detach", "--rm", "--network", "none"]
            cmd += [arg for mount in mounts for arg in ("--volume", mount)]
            started = subprocess.run([*cmd, image, "sleep", "infinity"], capture_output=True, text=True, check=False)
        if started.returncode != 0:
            raise UserError(f"cannot start a smoke container from {image}: {started.stderr.strip()}")
        self.container = started.stdout.strip()

    def base_python(self, version: str) -> str:
        tag = cpython_tag(version)
        return f"/opt/python/{tag}-{tag}/bin/python"

    def venv_python(self, venv: str) -> str:
        return f"{venv}/bin/python"

    def run(self, argv: list[str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.engine, "exec", "--workdir", "/tmp", self.container, *argv],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )

    def close(self) -> None:
        subprocess.run([self.engine, "rm", "--force", self.container], capture_output=True, check=False)


class HostMachine:
    """Windows: the runner itself (the release pipeline smokes on a clean runner of another image)."""

    def __init__(self, wheel_dir: Path, cuda_wheel_dir: Path) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="smoke-"))
        self.wheels, self.cuda_wheels = str(wheel_dir), str(cuda_wheel_dir)
        self.venv_root = str(self.scratch / "venv")
        self.probe = str(self.scratch / "smoke_probe.py")
        Path(self.probe).write_text(PROBE_SOURCE.read_text(encoding="utf-8"), encoding="utf-8")

    def base_python(self, version: str) -> str:
        launcher = shutil.which("py")
        if launcher:
            found = subprocess.run(
                [launcher, f"-{version}", "-c", "import sys; print(sys.executable)"],
                capture_output=True,
                text=True,
                check=False,
            )
            if found.returncode == 0:
                return found.stdout.strip()
        on_path = shutil.which(f"python{version}")
        if on_path:
            return on_path
        raise UserError(f"no Python {version} on this host to smoke-test its wheel — install it")

    def venv_python(self, venv: str) -> str:
        return str(Path(venv) / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python"))

    def run(self, argv: list[str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
        return subprocess.run(
            argv, capture_output=True, text=True, check=False, timeout=timeout, env=env, cwd=self.scratch
        )

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


class Venv:
    """A fresh virtual environment inside a Machine."""

    def __init__(self, machine: Machine, python_version: str, where: str) -> None:
        self.machine = machine
        created = machine.run([machine.base_python(python_version), "-m", "venv", where])
        if created.returncode != 0:
            raise UserError(
                f"cannot create a Python {python_version} venv in the smoke container: {created.stderr.strip()[-300:]}"
            )
        self.python = machine.venv_python(where)
        probe = machine.run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
        self.site = probe.stdout.strip()

    def install(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.machine.run(
            [self.python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", *args]
        )

    def probe(self, statement: str, expect: str, hint: str | None = None, site: bool = False) -> Check:
        spec = {"statement": statement, "expect": expect, "hint": hint, "site": self.site if site else None}
        run = self.machine.run([self.python, "-W", "error", "-I", self.machine.probe, json.dumps(spec)], timeout=300)
        label = f"{statement} → {'ImportError' if expect == 'import_error' else 'ok'}"
        if run.returncode != 0 or not run.stdout.strip():
            return Check(label, False, f"probe exited {run.returncode}: {run.stderr.strip()[-500:]}")
        outcome = json.loads(run.stdout.strip().splitlines()[-1])
        return Check(label, bool(outcome["ok"]), str(outcome["detail"]))

    def command(self, command: str) -> Check:
        argv = shlex.split(command)
        if argv and argv[0] == "python":
            argv[0] = self.python
        run = self.machine.run(argv, timeout=300)
        output = (run.stdout + run.stderr).strip()
        ok = run.returncode == 0 and "Traceback" not in output
        return Check(f"{command} (exit {run.returncode})", ok, output[-2000:])


def _modules(variant: Variant) -> tuple[list[str], list[str], list[str]]:
    """(CUDA-free, CUDA-linked required, CUDA-linked optional) extension modules of the recipe."""
    free, linked, optional = [], [], []
    for module, allowed in variant.recipe.modules.items():
        if not allowed:
            free.append(module)
        elif any(c in variant.recipe.optional for c in allowed):
            optional.append(module)
        else:
            linked.append(module)
    return free, linked, optional


def tier1(venv: Venv, wheel: Path, variant: Variant) -> TierResult:
    result = TierResult(1)
    installed = venv.install("--no-deps", str(PurePosixPath(venv.machine.wheels) / wheel.name))
    result.checks.append(
        Check("install the wheel alone (--no-deps)", installed.returncode == 0, installed.stderr.strip()[-500:])
    )
    if installed.returncode != 0:
        return result
    free, linked, optional = _modules(variant)
    for statement in variant.recipe.smoke.gpu_free or [f"import {variant.recipe.import_name}"]:
        result.checks.append(venv.probe(statement, "ok"))
    for module in free:
        result.checks.append(venv.probe(f"import {module}", "ok"))
    for module in [*linked, *optional]:
        result.checks.append(venv.probe(f"import {module}", "import_error"))
    for statement in variant.recipe.smoke.needs_optional:
        result.checks.append(venv.probe(statement, "import_error", hint="pip install"))
    return result


def tier2(venv: Venv, wheel: Path, variant: Variant) -> TierResult:
    result = TierResult(2)
    extras = wheel_extras(wheel)  # their markers leave out what a platform lacks (NCCL on Windows)
    target = with_extras(str(PurePosixPath(venv.machine.wheels) / wheel.name), extras)
    installed = venv.install("--find-links", venv.machine.cuda_wheels, target)
    result.checks.append(
        Check(
            f"install with its CUDA wheels ({', '.join(extras) or 'no extras'})",
            installed.returncode == 0,
            installed.stderr.strip()[-800:],
        )
    )
    if installed.returncode != 0:
        return result
    free, linked, optional = _modules(variant)
    for module in [*free, *linked, *optional]:
        result.checks.append(venv.probe(f"import {module}", "ok", site=True))
    for statement in [*variant.recipe.smoke.gpu_free, *variant.recipe.smoke.needs_optional]:
        result.checks.append(venv.probe(statement, "ok", site=True))
    for command in variant.recipe.smoke.with_cuda:
        result.checks.append(venv.command(command))
    return result


def tier3(wheel: Path, variant: Variant) -> TierResult:
    result = TierResult(3)
    metadata = wheel_metadata(wheel)
    result.checks.append(
        Check("name", canonicalize_name(metadata["Name"]) == canonicalize_name(variant.dist_name), metadata["Name"])
    )
    requires = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    expected = {
        component_table().get(c, variant.major).distribution  # type: ignore[union-attr]
        for c in variant.components(optional=False)
    }
    nvidia = {r.name for r in requires if r.name.startswith("nvidia-") and r.marker is None}
    result.checks.append(
        Check(
            f"Requires-Dist names exactly the CUDA {variant.major} wheels",
            nvidia == expected,
            ", ".join(sorted(nvidia)),
        )
    )
    classifiers = metadata.get_all("Classifier") or []
    gpu = CLASSIFIER_GPU.format(major=variant.major)
    shown = "; ".join(c for c in classifiers if "GPU" in c)
    result.checks.append(Check(f"classifier {gpu}", gpu in classifiers, shown))
    twine = subprocess.run(
        [sys.executable, "-m", "twine", "--no-color", "check", "--strict", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    result.checks.append(Check("twine check --strict", twine.returncode == 0, (twine.stdout + twine.stderr).strip()))
    return result


def smoke(wheel: Path, variant: Variant, cuda_wheel_dir: Path, image: str | None) -> list[TierResult]:
    """Tiers 1 and 2 on a clean machine (stopping at the first that fails), then tier 3.

    Linux wheels: a fresh container of `image`. Windows wheels: this host, which must be a Windows runner.
    """
    results = []
    machine: ContainerMachine | HostMachine
    if wheel_os(wheel) == "linux":
        if image is None:
            raise UserError(f"{wheel.name}: a Linux wheel is smoke-tested in a container — give an image")
        machine = ContainerMachine(image, wheel.parent.resolve(), cuda_wheel_dir.resolve())
    else:
        if sys.platform != "win32":
            raise UserError(f"{wheel.name}: Windows wheels are smoke-tested on Windows")
        machine = HostMachine(wheel.parent.resolve(), cuda_wheel_dir.resolve())
    try:
        venv = Venv(machine, wheel_python(wheel), machine.venv_root)
        for tier in (1, 2):
            started = time.monotonic()
            outcome = tier1(venv, wheel, variant) if tier == 1 else tier2(venv, wheel, variant)
            outcome.seconds = round(time.monotonic() - started, 1)
            results.append(outcome)
            if not outcome.passed:
                break
    finally:
        machine.close()
    started = time.monotonic()
    metadata = tier3(wheel, variant)
    metadata.seconds = round(time.monotonic() - started, 1)
    results.append(metadata)
    return results
