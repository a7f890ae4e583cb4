"""GPU-free smoke tiers, each wheel on a clean machine: a fresh container of its build image (Linux, no network),
or the runner itself (Windows).

Tiers 1 and 2 run side by side in their own venvs, tier 3 meanwhile on this machine.

1. A venv with the wheel alone (`--no-deps`), no CUDA anywhere: `import pkg` and the CUDA-free modules work under
   `python -W error`; CUDA-linked modules fail at their own import with ImportError; optional pieces raise
   ImportError carrying the pip command that fixes it.
2. A venv holding the wheel's NVIDIA requirements (and its extras') laid out as pip would — in the container
   they come from the toolkit cache, mounted at the venv's site-packages/nvidia rather than installed again —
   then the wheel itself: every module imports, its CUDA libraries are the venv's (RPATH at work, no
   LD_LIBRARY_PATH), the driver is not loaded, and the recipe's commands succeed.
3. Metadata: name, Requires-Dist on the right major's wheels, the GPU classifier, and `twine check --strict`.

Each tier's checks run in one call into the machine (data/../smoke_probe.py), each check in a fresh interpreter.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from importlib.resources import as_file, files
from pathlib import Path
from typing import Protocol

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from . import host
from .built import BuiltWheel
from .components import component_table
from .errors import ToolFailure, UserError
from .plan import Variant, cpython_tag
from .provision import runtime_site
from .render import CLASSIFIER_GPU
from .wheelfile import extras, metadata, with_extras

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
    """Where tiers 1 and 2 run: a clean, GPU-free machine holding the wheel."""

    wheel: str  # the wheel under test, as this machine sees it

    def create_venvs(self) -> tuple[str, str]:
        """(a bare venv's Python, the CUDA venv's Python)."""
        ...

    def site(self) -> str:
        """The CUDA venv's site-packages: where every CUDA library loaded in tier 2 must come from."""
        ...

    def install(self, python: str, *args: str) -> subprocess.CompletedProcess[str]: ...

    def probe(self, python: str, checks: list[dict[str, object]]) -> list[dict[str, object]]: ...

    def close(self) -> None: ...


class ContainerMachine:
    """Linux: a fresh container of the build image, with no network.

    The host may have CUDA installed (a toolkit in ld.so.conf, say), which would let a broken wheel pass tier 1;
    a container of the build image has none. The wheel, the toolkit's runtime site and the probe are mounted
    read-only; the runtime site's nvidia/ is mounted where pip would have put it in the CUDA venv.
    """

    def __init__(self, image: str, wheel: Path, runtime: Path, python: str) -> None:
        self.engine = host.container_engine()
        self.python_version = python
        self.wheel = f"/smoke/wheels/{wheel.name}"
        self.base = f"/opt/python/{cpython_tag(python)}-{cpython_tag(python)}/bin/python"
        self.cuda_venv = "/smoke/cuda"
        with as_file(PROBE_SOURCE) as probe:
            mounts = [f"{wheel.parent}:/smoke/wheels:ro", f"{runtime}:/smoke/runtime:ro", f"{probe}:/smoke/probe.py:ro"]
            if (runtime / "nvidia").is_dir():
                mounts.append(f"{runtime / 'nvidia'}:{self.site()}/nvidia:ro")
            command = [self.engine, "run", "--detach", "--rm", "--network", "none"]
            command += [arg for mount in mounts for arg in ("--volume", mount)]
            started = host.run([*command, image, "sleep", "infinity"], f"starting a smoke container of {image}")
        self.container = started.stdout.strip()

    def site(self) -> str:
        return f"{self.cuda_venv}/lib/python{self.python_version}/site-packages"

    def _exec(self, argv: list[str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
        return host.run(
            [self.engine, "exec", "--workdir", "/tmp", self.container, *argv], "smoke", check=False, timeout=timeout
        )

    def create_venvs(self) -> tuple[str, str]:
        # No pip in the venvs (creating them takes milliseconds): the base interpreter's pip installs into them.
        script = (
            f"{self.base} -m venv --without-pip /smoke/bare && {self.base} -m venv --without-pip {self.cuda_venv} && "
            f'for entry in /smoke/runtime/*; do [ "${{entry##*/}}" = nvidia ] || ln -s "$entry" {self.site()}/; done'
        )
        created = self._exec(["sh", "-c", script])
        if created.returncode != 0:
            raise ToolFailure(f"cannot create the smoke venvs: {host.tail(created.stderr)}")
        return "/smoke/bare/bin/python", f"{self.cuda_venv}/bin/python"

    def install(self, python: str, *args: str) -> subprocess.CompletedProcess[str]:
        pip = [self.base, "-m", "pip", "--python", python, "install", "--quiet", "--disable-pip-version-check"]
        return self._exec([*pip, "--no-index", *args])

    def probe(self, python: str, checks: list[dict[str, object]]) -> list[dict[str, object]]:
        return _outcomes(self._exec([python, "/smoke/probe.py", json.dumps(checks)]), checks)

    def close(self) -> None:
        host.run([self.engine, "rm", "--force", self.container], "removing the smoke container", check=False)


class HostMachine:
    """Windows: the runner itself (the release pipeline smokes on a clean runner of another image)."""

    def __init__(self, wheel: Path, cuda_wheels: Path, python: str) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="smoke-"))
        self.wheel, self.cuda_wheels, self.python_version = str(wheel), cuda_wheels, python
        self.probe_path = self.scratch / "smoke_probe.py"
        self.probe_path.write_text(PROBE_SOURCE.read_text(encoding="utf-8"), encoding="utf-8")

    def _base_python(self) -> str:
        launcher = shutil.which("py")
        if launcher:
            found = host.run(
                [launcher, f"-{self.python_version}", "-c", "import sys; print(sys.executable)"], "py", check=False
            )
            if found.returncode == 0:
                return found.stdout.strip()
        on_path = shutil.which(f"python{self.python_version}")
        if on_path:
            return on_path
        raise UserError(f"no Python {self.python_version} on this host to smoke-test its wheel — install it")

    def _venv_python(self, venv: Path) -> str:
        return str(venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python"))

    def create_venvs(self) -> tuple[str, str]:
        base = self._base_python()
        for name in ("bare", "cuda"):
            host.run([base, "-m", "venv", self.scratch / name], f"creating the {name} smoke venv")
        cuda = self._venv_python(self.scratch / "cuda")
        # Here the NVIDIA wheels are installed for real: the runner is thrown away after the job.
        self.install(cuda, "--find-links", str(self.cuda_wheels), with_extras(self.wheel, extras(Path(self.wheel))))
        return self._venv_python(self.scratch / "bare"), cuda

    def site(self) -> str:
        return str(self.scratch / "cuda")

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


def _run_tier(
    tier: int, machine: Machine, python: str, install: list[str], named: list[tuple[str, dict[str, object]]]
) -> TierResult:
    result = TierResult(tier)
    started = time.monotonic()
    installed = machine.install(python, *install)
    result.checks.append(
        Check(
            f"install {' '.join(a for a in install if not a.startswith('/smoke'))}".strip(),
            installed.returncode == 0,
            host.tail(installed.stderr, 8),
        )
    )
    if installed.returncode == 0:
        outcomes = machine.probe(python, [spec for _, spec in named])
        for (name, _), outcome in zip(named, outcomes, strict=True):
            result.checks.append(Check(name, bool(outcome["ok"]), str(outcome["detail"])))
    result.seconds = round(time.monotonic() - started, 1)
    return result


def _expect(statement: str, expect: str, **options: object) -> tuple[str, dict[str, object]]:
    label = f"{statement} → {'ImportError' if expect == 'import_error' else 'ok'}"
    return label, {"statement": statement, "expect": expect, **options}


def tier1(machine: Machine, python: str, variant: Variant) -> TierResult:
    free, linked, optional = _modules(variant)
    checks = [_expect(s, "ok") for s in variant.recipe.smoke.gpu_free or [f"import {variant.recipe.import_name}"]]
    checks += [_expect(f"import {m}", "ok") for m in free]
    checks += [_expect(f"import {m}", "import_error") for m in [*linked, *optional]]
    checks += [_expect(s, "import_error", hint="pip install") for s in variant.recipe.smoke.needs_optional]
    return _run_tier(1, machine, python, ["--no-deps", machine.wheel], checks)


def tier2(machine: Machine, python: str, wheel: Path, variant: Variant) -> TierResult:
    free, linked, optional = _modules(variant)
    site = machine.site()
    checks = [_expect(f"import {m}", "ok", site=site) for m in [*free, *linked, *optional]]
    checks += [
        _expect(s, "ok", site=site) for s in [*variant.recipe.smoke.gpu_free, *variant.recipe.smoke.needs_optional]
    ]
    checks += [(command, {"command": shlex.split(command)}) for command in variant.recipe.smoke.with_cuda]
    # Its NVIDIA requirements are in place already; pip checks them and installs the wheel alone.
    return _run_tier(2, machine, python, [with_extras(machine.wheel, extras(wheel))], checks)


def tier3(wheel: Path, variant: Variant) -> TierResult:
    result = TierResult(3)
    started = time.monotonic()
    found = metadata(wheel)
    result.checks.append(
        Check("name", canonicalize_name(found["Name"]) == canonicalize_name(variant.dist_name), found["Name"])
    )
    requires = [Requirement(r) for r in found.get_all("Requires-Dist") or []]
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


def smoke(built: BuiltWheel) -> list[TierResult]:
    """Tiers 1 and 2 on a clean machine, tier 3 on this one: all three at once (their venvs are apart)."""
    name, wheel = built.name, built.path.resolve()
    machine: Machine
    if name.os == "linux":
        if built.image is None:
            raise UserError(f"{wheel.name}: a Linux wheel is smoke-tested in a container — give an image")
        machine = ContainerMachine(built.image, wheel, runtime_site(built.toolkit, wheel), name.python)
    else:
        if sys.platform != "win32":
            raise UserError(f"{wheel.name}: a Windows wheel is smoke-tested on Windows — this host cannot")
        machine = HostMachine(wheel, built.toolkit.wheel_dir, name.python)
    with ThreadPoolExecutor(max_workers=3) as pool:
        metadata_tier = pool.submit(tier3, wheel, built.variant)
        try:
            bare, cuda = machine.create_venvs()
            tiers = [
                pool.submit(tier1, machine, bare, built.variant),
                pool.submit(tier2, machine, cuda, wheel, built.variant),
            ]
            results = [tier.result() for tier in tiers]
        finally:
            machine.close()
        return [*results, metadata_tier.result()]
