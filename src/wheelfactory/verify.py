"""The release gate over all wheels of a run: exactly the wheels the plan promised, each one a wheel PyPI and pip
will take, with a true SBOM, under its size limit.

The build jobs run apart; this checks their union before anything is published: nothing missing, nothing extra,
each wheel checked as pip installs it (binaries.wheelcheck: name, zip, WHEEL, METADATA, RECORD), its SBOM there,
valid and agreeing with the wheel and naming the plan's source (sbom/checks.py), its tags exactly its job's (the
CPython and its ABI; the OS, machine and manylinux or Windows policy of the job's platform), its Name and Version
the plan's, `twine check --strict`, and each wheel under its recipe's size limit (PyPI's default
is 100 MiB per file, and each `pkg-cudaNNx` is a separate PyPI project with its own limit).

The plan comes from `nox -s plan` (a file the release workflow passes between jobs): it is validated like every
other input, each problem at its file:line:col with the job named, exit status 2.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Annotated, Literal

from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from . import host
from .binaries.wheelcheck import check_wheel
from .binaries.wheelfile import MIB, WheelAbi, WheelName, python_tag, read_binaries, unpack
from .components import platforms
from .cuda_held import no_cuda
from .errors import BadBytes, InputError, Problem
from .inputs import yamlsource
from .inputs.validation import VersionText, problems_from
from .pytorch.index_pages import INDEX_DIR, labelled_wheels
from .sbom.checks import sbom_problems
from .sources import SourceIdentity
from .untrusted.shown import shown


class PlannedSource(BaseModel):
    """The recipe's source as the plan pins it (sources.SourceIdentity)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    kind: Literal["sdist", "git", "path"]
    name: Annotated[str, Field(min_length=1)]
    pinned: Annotated[str, Field(min_length=1)]


class PlannedWheel(BaseModel):
    """What the gate reads of one wheel job of the plan (`nox -s plan`'s smoke.include entries)."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)
    id: Annotated[str, Field(min_length=1)]
    dist_name: Annotated[str, Field(min_length=1)]
    version: Annotated[str, Field(min_length=1)]
    python: VersionText
    abi: WheelAbi = "cpython"  # plans written before abi3 and py3-none wheels say none
    platform: str
    size_limit_mb: Annotated[int, Field(gt=0)]
    cuda: Annotated[int, Field(gt=0)]  # the CUDA major the wheel's name promises
    opens_cuda: list[str] = []  # the recipe's: CUDA libraries the package opens itself at run time
    # A wheel tied to one torch release: its local label and index page (torch-index/<torch_index>/<project>/),
    # and whether the plain version goes to PyPI too. Plans written before torch trains say none.
    torch_label: str | None = None
    torch_index: str | None = None
    on_pypi: bool = True
    # What the wheel's SBOM must name as its source; a plan without it cannot hold the SBOM to it.
    source: PlannedSource | None = None

    @field_validator("platform")
    @classmethod
    def _known_platform(cls, value: str) -> str:
        if value not in platforms():
            raise ValueError(f"{value!r} is none of {', '.join(sorted(platforms()))}")
        return value

    def keys(self) -> dict[tuple[str, str, str, str], str]:
        """Each file the job must yield, by (distribution, version, tag, platform) -> the folder it must lie in:
        "" for the plain version, torch-index/<index>/<project> for the labelled one."""
        project = str(canonicalize_name(self.dist_name))
        tag = python_tag(self.python, self.abi)
        found = {(project, self.version, tag, self.platform): ""} if self.on_pypi else {}
        if self.torch_label and self.torch_index:
            folder = f"{INDEX_DIR}/{self.torch_index}/{project}"
            found[(project, f"{self.version}+{self.torch_label}", tag, self.platform)] = folder
        return found


class _Smoke(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    include: list[PlannedWheel]


class _PlanFile(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    smoke: _Smoke


def load_plan(path: Path) -> list[PlannedWheel]:
    """The wheel jobs of a plan file, or InputError with every problem at its place, naming the job."""
    data, source, problems = yamlsource.load(path, str(path))
    if problems:
        raise InputError(problems)
    try:
        return _PlanFile.model_validate(data).smoke.include
    except ValidationError as exc:
        found = problems_from(exc, source)
    named = []
    for problem in found:
        job = _job_named(data, problem.message)
        named.append(Problem(problem.file, problem.line, problem.col, f"{job}{problem.message}"))
    raise InputError(named or [Problem(str(path), 1, 1, "not a plan from `nox -s plan` — regenerate it")])


def _job_named(data: object, message: str) -> str:
    """ "job ID: " for a problem inside smoke.include[N], where that job has an id."""
    if not message.startswith("smoke.include["):
        return ""
    index = int(message.removeprefix("smoke.include[").split("]", 1)[0])
    try:
        job_id = data["smoke"]["include"][index].get("id")  # type: ignore[index]
    except (TypeError, KeyError, IndexError, AttributeError):
        return ""
    return f"job {shown(job_id)}: " if isinstance(job_id, str) else ""


def _tag_problems(name: WheelName, job: PlannedWheel) -> list[str]:
    """The wheel's tags are exactly its job's: CPython X.Y with its own ABI, the stable ABI from X.Y, or py3-none
    (the platform, OS, machine and policy matched the job already: WheelName reads only manylinux or win_amd64
    tags, all of one platform)."""
    wanted = python_tag(job.python, job.abi)
    odd = sorted(str(t) for t in name.tags if f"{t.interpreter}-{t.abi}" != wanted)
    return [f"tagged {', '.join(odd)}, where job {job.id} builds {wanted}"] if odd else []


def _cuda_problems(wheel: Path, name: WheelName, job: PlannedWheel) -> list[str]:
    """The wheel holds CUDA (cuda_held): read again here, whatever the audit said of it before."""
    with tempfile.TemporaryDirectory() as scratch:
        try:
            binaries = read_binaries(unpack(wheel, Path(scratch)), name.os)
        except BadBytes:
            return []  # check_wheel reported why it cannot be unpacked
    missing = no_cuda(list(binaries.values()), job.cuda, name.os, job.opens_cuda)
    if missing is None:
        return []
    return [f"{missing}; its build left CUDA out — `nox -s build` names where the source's CUDA switch probably is"]


def _sbom_problems(wheel: Path, job: PlannedWheel) -> list[str]:
    """The wheel's SBOM: there, valid CycloneDX, agreeing with the wheel and naming the plan's source."""
    if job.source is None:
        return [f"{wheel.name}: job {job.id} of the plan names no source to hold its SBOM to — plan it again"]
    return sbom_problems(wheel, SourceIdentity(job.source.kind, job.source.name, job.source.pinned))


def wheels_in(folder: Path) -> list[Path]:
    """A release folder's wheels: those at its top, and the labelled ones on its torch index pages."""
    return sorted([*folder.glob("*.whl"), *labelled_wheels(folder)])


def _folder(wheel: Path) -> str:
    """Where a wheel lies, as keys() names it: "" or torch-index/<index>/<project>."""
    index, project = wheel.parent.parent, wheel.parent
    return f"{INDEX_DIR}/{index.name}/{project.name}" if index.parent.name == INDEX_DIR else ""


def verify(jobs: list[dict[str, object]] | list[PlannedWheel], wheels: list[Path]) -> list[str]:
    planned = [job if isinstance(job, PlannedWheel) else PlannedWheel.model_validate(job) for job in jobs]
    expected = {key: (job, folder) for job in planned for key, folder in job.keys().items()}
    problems: list[str] = []
    found: dict[tuple[str, str, str, str], Path] = {}
    for wheel in wheels:
        name, wheel_problems = check_wheel(wheel)
        problems += wheel_problems
        if name is None:
            continue
        key = (str(name.distribution), str(name.version), name.python_tag, name.platform)
        if key in found:
            problems.append(f"{wheel.name}: a second wheel for the same job as {found[key].name}")
        found[key] = wheel
        if key in expected:
            job, folder = expected[key]
            problems += [f"{wheel.name}: {p}" for p in [*_tag_problems(name, job), *_cuda_problems(wheel, name, job)]]
            problems += _sbom_problems(wheel, job)
            found_in = _folder(wheel)
            if found_in != folder:
                lies, wanted = (f"{f}/" if f else "the folder's top" for f in (found_in, folder))
                problems.append(f"{wheel.name}: lies in {lies}, where job {job.id} puts it in {wanted}")
    for key in sorted(expected.keys() - found.keys()):
        job, folder = expected[key]
        problems.append(f"missing: no wheel {key[0]} {key[1]} from job {job.id}{f' in {folder}/' if folder else ''}")
    for key in sorted(found.keys() - expected.keys()):
        problems.append(f"extra: {found[key].name} is not in the plan")
    for key, wheel in sorted(found.items()):
        if key in expected:
            limit = expected[key][0].size_limit_mb
            size = wheel.stat().st_size
            if size > limit * MIB:
                problems.append(f"{wheel.name}: {size / MIB:.1f} MiB, over its {limit} MiB limit")
    if wheels:
        twine = host.run(
            [sys.executable, "-m", "twine", "--no-color", "check", "--strict", *wheels], "twine", check=False
        )
        if twine.returncode != 0:
            output = (twine.stdout + twine.stderr).strip().splitlines()
            problems += [f"twine check --strict: {line}" for line in output if line.strip()] or ["twine check failed"]
    return problems
