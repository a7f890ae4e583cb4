"""matrix.yaml: CPython versions × CUDA majors × platforms, typed and checked."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from pydantic import Discriminator, Field, Tag

from ..components import component_table, cpython_range, operating_system, platforms, toolkit_table
from ..errors import InputError, Problem
from ..untrusted.shown import shown
from .references import hosted_runner_is_arm, image_problem, names_machine, runner_problem
from .validation import Loaded, Strict, VersionText, did_you_mean, display, validate
from .yamlsource import Loc, SourceMap

# The package index pip uses unless told otherwise.
PYPI = "https://pypi.org/simple/"


class PlatformSettings(Strict):
    runner: str = Field(min_length=1)  # the CI runner that builds
    smoke_runner: str | None = Field(default=None, min_length=1)  # a clean runner of another image that smokes
    image: str | None = Field(default=None, min_length=1)


def _pythons_shape(value: object) -> str:
    return "dict[platform]" if isinstance(value, dict) else "list[python]"


# `pythons` of a torch entry: one list, or a list per platform — a value is held to the shape it has (the tags are
# no place in the file: the error reader drops them), so a list's bad entry is not also "not a mapping".
TorchPythons = Annotated[
    Annotated[list[VersionText], Tag("list[python]")] | Annotated[dict[str, list[VersionText]], Tag("dict[platform]")],
    Discriminator(_pythons_shape),
]


class TorchRelease(Strict):
    """The torch that a major's PyTorch-extension recipes build against: torch.utils.cpp_extension ties a wheel to
    one torch release (its C++ ABI), not only to a CUDA major."""

    release: VersionText  # "2.11": the build takes torch==2.11.*, and the wheel requires the same
    cuda: VersionText  # torch.version.cuda of that build: the toolkit release the variant's build uses
    index: str = PYPI  # the PEP 503 index it comes from (PyTorch's own, for a build PyPI does not carry)
    # The CPythons its newest patch has wheels for (`nox -s facts` reads them off the index's file names): one list
    # where every platform of the major has the same, else one per platform; None: not read, every Python.
    pythons: TorchPythons | None = None

    def has_wheel(self, python: str, platform: str) -> bool:
        """Whether the index has a wheel of this torch for `python` on `platform` (as far as `pythons` says)."""
        if self.pythons is None:
            return True
        listed = self.pythons.get(platform, []) if isinstance(self.pythons, dict) else self.pythons
        return python in listed

    @property
    def index_shown(self) -> str:
        """Where its wheels were listed, for a reader: PyPI, or its index's URL."""
        return "PyPI" if self.index == PYPI else self.index

    @property
    def label(self) -> str:
        """pt215cu132: the local version label of a wheel built against it (as PyG and flash-attn spell theirs)."""
        return f"pt{self.release.replace('.', '')}cu{self.cuda.replace('.', '')}"

    @property
    def index_name(self) -> str:
        """torch2.15-cu132: its index page's folder, the torch release and its CUDA release as PyTorch spells its
        own indexes (cu132)."""
        return f"torch{self.release}-cu{self.cuda.replace('.', '')}"


def torch_gap(built_with: TorchRelease | None, run_with: list[TorchRelease], python: str, platform: str) -> str | None:
    """Why a wheel built against `built_with` (None: whatever) that runs with `run_with` is not made for `python` on
    `platform`: no torch it runs with, or none it is built against, has a wheel there; None where both have one."""
    if not run_with:
        return None
    newest = run_with[0]
    where = f"CPython {python} on {platform}"
    if not any(torch.has_wheel(python, platform) for torch in run_with):
        if len(run_with) == 1:
            return f"torch {newest.release} has no wheel for {where} ({newest.index_shown})"
        return (
            f"no torch from {run_with[-1].release} to {newest.release} has a wheel for {where} ({newest.index_shown})"
        )
    if built_with is not None and not built_with.has_wheel(python, platform):
        built = f"torch {built_with.release}, which the build compiles against,"
        return f"{built} has no wheel for {where} ({built_with.index_shown})"
    return None


class CudaEntry(Strict):
    major: int = Field(ge=1)
    toolkit: VersionText
    # The torch train: every torch release the major's PyTorch-extension recipes are built against, newest first.
    torch: list[TorchRelease] = []
    platforms: dict[str, PlatformSettings]
    not_built: dict[str, str] = {}  # platform -> the reason it is deliberately not built
    # What users install beside this major's wheels (PyTorch, CuPy, JAX built for it), as pip requirements: the
    # co-install check (`nox -s coinstall`) resolves each wheel together with each of them.
    neighbours: list[str] = []

    @property
    def coinstall_neighbours(self) -> list[str]:
        """The neighbours, and each torch the major's torch extensions are built for (`torch==R.*`): a user of any
        of them, or of the newest, must be able to install every wheel of the major."""
        built_for = [f"torch=={torch.release}.*" for torch in self.torch]
        return [*self.neighbours, *(line for line in built_for if line not in self.neighbours)]


class Exclusion(Strict):
    python: VersionText | None = None
    cuda: int | None = None
    platform: str | None = None
    reason: str | None = None  # why, in words: what the coverage pages say of the cells it leaves out

    def matches(self, python: str, cuda: int, platform: str) -> bool:
        return (
            (self.python is None or self.python == python)
            and (self.cuda is None or self.cuda == cuda)
            and (self.platform is None or self.platform == platform)
        )


class Matrix(Strict):
    python: list[VersionText]
    cuda: list[CudaEntry]
    exclude: list[Exclusion] = []


def load_matrix(path: Path, root: Path) -> Loaded[Matrix]:
    loaded = validate(Matrix, path, display(path, root))
    problems = check_matrix(loaded.value, loaded.source)
    if problems:
        raise InputError(problems)
    return loaded


def requires_python(matrix: Matrix) -> SpecifierSet:
    lowest = min(matrix.python, key=lambda v: tuple(int(p) for p in v.split(".")))
    return SpecifierSet(f">={lowest}")


def check_matrix(matrix: Matrix, src: SourceMap) -> list[Problem]:
    problems = _check_pythons(matrix, src)
    if not matrix.cuda:
        problems.append(src.problem(("cuda",), "no CUDA majors — add at least one entry such as {major: 12, ...}"))
    majors: list[int] = []
    for i, entry in enumerate(matrix.cuda):
        if entry.major in majors:
            problems.append(src.problem(("cuda", i, "major"), f"CUDA {entry.major} has two entries — merge them"))
        majors.append(entry.major)
        problems += _check_cuda_entry(entry, ("cuda", i), src)
    problems += _check_exclusions(matrix, majors, src)
    if not problems and not any(
        not any(rule.matches(py, entry.major, plat) for rule in matrix.exclude)
        for py in matrix.python
        for entry in matrix.cuda
        for plat in entry.platforms
    ):
        problems.append(src.problem(("exclude",), "the exclusions leave nothing to build — remove some"))
    return problems


def _check_pythons(matrix: Matrix, src: SourceMap) -> list[Problem]:
    problems = []
    if not matrix.python:
        problems.append(src.problem(("python",), 'no Python versions — list at least one, e.g. ["3.12"]'))
    supported = cpython_range()
    for i, version in enumerate(matrix.python):
        if version in matrix.python[:i]:
            problems.append(src.problem(("python", i), f"Python {version} is listed twice — keep one"))
        elif version not in supported.releases():
            message = (
                f"Python {version} is not a CPython the factory builds ({supported.oldest} to {supported.newest}) — "
                "remove it, or raise the range in src/wheelfactory/data/cpython.yaml once cibuildwheel builds it"
            )
            problems.append(src.problem(("python", i), message))
    return problems


def _check_cuda_entry(entry: CudaEntry, at: Loc, src: SourceMap) -> list[Problem]:
    known_majors = sorted({m for c in component_table().components.values() for m in c.majors})
    if entry.major not in known_majors:
        return [
            src.problem(
                (*at, "major"),
                f"CUDA {entry.major} is not in the component table (known: {', '.join(map(str, known_majors))})"
                " — use a known major or add it to the table",
            )
        ]
    problems = _check_toolkit(entry, at, src)
    problems += _check_train(entry, (*at, "torch"), src)
    if not entry.platforms:
        problems.append(src.problem((*at, "platforms"), "no platforms — name at least one, e.g. linux-x86_64"))
    for name, settings in entry.platforms.items():
        problems += _check_platform(name, settings, (*at, "platforms", name), src)
    problems += _check_neighbours(entry, at, src)
    for name in entry.not_built:
        where: Loc = (*at, "not_built", name)
        if name not in platforms():
            problems.append(src.problem(where, f"unknown platform {name!r} — {_platform_hint(name)}", key=True))
        elif name in entry.platforms:
            problems.append(
                src.problem(
                    where,
                    f"{name} is both built and not built for CUDA {entry.major} — remove it from one of the two",
                    key=True,
                )
            )
    return problems


def _check_neighbours(entry: CudaEntry, at: Loc, src: SourceMap) -> list[Problem]:
    """Each neighbour a requirement pip can resolve from an index: valid, no direct reference, named once."""
    problems, seen = [], set()
    for i, line in enumerate(entry.neighbours):
        where: Loc = (*at, "neighbours", i)
        try:
            requirement = Requirement(line)
        except InvalidRequirement as exc:
            reason = str(exc).splitlines()[0]
            message = f'{shown(line, quoted=True)} is not a valid requirement: {reason} — write e.g. "torch>=2.10"'
            problems.append(src.problem(where, message))
            continue
        name = canonicalize_name(requirement.name)
        if requirement.url:
            message = f'{requirement.name} @ … is a direct reference — name a release on the index ("{name}")'
            problems.append(src.problem(where, message))
        elif name in seen:
            problems.append(src.problem(where, f"{requirement.name} is named twice — keep one"))
        seen.add(name)
    return problems


def _check_toolkit(entry: CudaEntry, at: Loc, src: SourceMap) -> list[Problem]:
    if not entry.toolkit.startswith(f"{entry.major}."):
        message = f'toolkit {entry.toolkit} is not a CUDA {entry.major} release — write "{entry.major}.x"'
        return [src.problem((*at, "toolkit"), message)]
    known = sorted(v for v in toolkit_table().releases if v.startswith(f"{entry.major}."))
    if entry.toolkit in known:
        to_fill = toolkit_table().releases[entry.toolkit].to_fill
        if not to_fill:
            return []
        message = (
            f"toolkit {entry.toolkit}'s {', '.join(to_fill)} is still to fill in data/toolkits.yaml — read it from "
            f"{'; '.join(to_fill.values())} and write it there (the factory never guesses it)"
        )
        return [src.problem((*at, "toolkit"), message)]
    return [
        src.problem(
            (*at, "toolkit"),
            f"toolkit {entry.toolkit} is not a release the factory knows (known for CUDA "
            f"{entry.major}: {', '.join(known)}) — use one of those, or add the release to "
            "data/toolkits.yaml and its component versions to data/cuda_components.yaml",
        )
    ]


def _check_train(entry: CudaEntry, at: Loc, src: SourceMap) -> list[Problem]:
    """Each torch a release of its own, newest first (the first is the one whose builds PyPI gets)."""
    problems, train = [], entry.torch
    for i, torch in enumerate(train):
        problems += _check_torch(torch, entry.major, set(entry.platforms), (*at, i), src)
        earlier = [t.release for t in train[:i]]
        if torch.release in earlier:
            problems.append(src.problem((*at, i, "release"), f"torch {torch.release} is listed twice — keep one"))
        elif earlier and Version(torch.release) > Version(earlier[-1]):
            message = f"torch {torch.release} is newer than {earlier[-1]} above it — list the train newest first"
            problems.append(src.problem((*at, i, "release"), message))
    return problems


def _check_torch(torch: TorchRelease, major: int, built: set[str], at: Loc, src: SourceMap) -> list[Problem]:
    problems = []
    known = sorted(v for v in toolkit_table().releases if v.startswith(f"{major}."))
    if torch.cuda not in known:
        message = (
            f"torch's CUDA {shown(torch.cuda)} is not a CUDA {major} release the factory knows ({', '.join(known)}) "
            "— write torch.version.cuda of that torch build, or add the release to data/toolkits.yaml"
        )
        problems.append(src.problem((*at, "cuda"), message))
    if not torch.index.startswith("https://") or any(c.isspace() for c in torch.index):
        message = f"torch index {shown(torch.index)} is not an https:// URL — write the index's simple/ URL"
        problems.append(src.problem((*at, "index"), message))
    return problems + _check_torch_pythons(torch, built, (*at, "pythons"), src)


def _check_torch_pythons(torch: TorchRelease, built: set[str], at: Loc, src: SourceMap) -> list[Problem]:
    """`pythons`: each CPython once, oldest first; per platform, the major's platforms only."""
    if torch.pythons is None:
        return []
    lists: dict[Loc, list[str]] = (
        {(*at, name): listed for name, listed in torch.pythons.items()}
        if isinstance(torch.pythons, dict)
        else {at: torch.pythons}
    )
    problems = [
        src.problem(at, f"lists no {name} — add the CPythons torch has wheels for there")
        for name in sorted(built - set(torch.pythons))
        if isinstance(torch.pythons, dict)
    ]
    for where, listed in lists.items():
        if where != at and where[-1] not in built:
            others = ", ".join(sorted(built))
            message = f"{where[-1]!r} is not a platform of this CUDA major ({others}) — fix or remove it"
            problems.append(src.problem(where, message, key=True))
        if not listed:
            message = "no CPython — list those torch has wheels for, or run `nox -s facts -- --write`"
            problems.append(src.problem(where, message))
        for i, python in enumerate(listed):
            if python in listed[:i]:
                problems.append(src.problem((*where, i), f"CPython {python} is listed twice — keep one"))
            elif i and Version(python) < Version(listed[i - 1]):
                message = f"CPython {python} is older than {listed[i - 1]} before it — list them oldest first"
                problems.append(src.problem((*where, i), message))
    return problems


def _platform_hint(name: str) -> str:
    return did_you_mean(name, sorted(platforms()))


def _check_platform(name: str, settings: PlatformSettings, at: Loc, src: SourceMap) -> list[Problem]:
    if name not in platforms():
        return [src.problem(at, f"unknown platform {name!r} — {_platform_hint(name)}", key=True)]
    platform = platforms()[name]
    is_linux = operating_system(platform.os).builds_in_image
    problems = []
    if is_linux and settings.image is None:
        message = "a Linux platform needs an image — add image: quay.io/pypa/manylinux_2_28_x86_64 (or the aarch64 one)"
        problems.append(src.problem(at, message))
    if not is_linux and settings.image is not None:
        problems.append(src.problem((*at, "image"), "Windows builds run on the runner, not in an image — remove image"))
    elif settings.image is not None:
        why = image_problem(settings.image)
        if why:
            problems.append(src.problem((*at, "image"), f"{settings.image!r}: {why} — fix the image"))
    # What names another machine of the same OS (an x86_64 image or runner for linux-aarch64) would build for it.
    other_words = tuple(
        w
        for other in platforms().values()
        if other.os == platform.os and other.cibw_arch != platform.cibw_arch
        for w in other.machine_words
        if w not in platform.machine_words
    )
    arm = "arm" in platform.machine_words
    for key in ("runner", "smoke_runner", "image"):
        value = getattr(settings, key)
        if value is None or (key == "image" and not is_linux):
            continue
        why = runner_problem(value) if key != "image" else None
        if why:
            problems.append(src.problem((*at, key), f"{value!r}: {why} — fix the label"))
            continue
        other = names_machine(value, other_words)
        hosted_arm = hosted_runner_is_arm(value) if key != "image" else None
        if other or (hosted_arm is not None and hosted_arm != arm):
            what = f"names {other}" if other else f"is a GitHub-hosted {'Arm' if hosted_arm else 'x86_64'} runner"
            message = f"{value!r} {what}, but {name} needs {platform.cibw_arch} — name a {key} for {platform.cibw_arch}"
            problems.append(src.problem((*at, key), message))
    return problems


def _check_exclusions(matrix: Matrix, majors: list[int], src: SourceMap) -> list[Problem]:
    problems = []
    for i, rule in enumerate(matrix.exclude):
        at: Loc = ("exclude", i)
        if rule.python is None and rule.cuda is None and rule.platform is None:
            problems.append(
                src.problem(at, "an empty exclusion would exclude everything — name python, cuda or platform")
            )
        if rule.python is not None and rule.python not in matrix.python:
            message = f"Python {rule.python} is not in the matrix — remove this exclusion or fix the version"
            problems.append(src.problem((*at, "python"), message))
        if rule.cuda is not None and rule.cuda not in majors:
            message = f"CUDA {rule.cuda} is not in the matrix — remove this exclusion or fix the major"
            problems.append(src.problem((*at, "cuda"), message))
        if rule.platform is not None and rule.platform not in platforms():
            message = f"unknown platform {rule.platform!r} — {_platform_hint(rule.platform)}"
            problems.append(src.problem((*at, "platform"), message))
    if problems:
        return problems
    cells = [(py, entry.major, plat) for entry in matrix.cuda for plat in entry.platforms for py in matrix.python]
    for i, rule in enumerate(matrix.exclude):
        if not any(rule.matches(*cell) for cell in cells):
            problems.append(src.problem(("exclude", i), _no_cell(rule, cells)))
    return problems


def _no_cell(rule: Exclusion, cells: list[tuple[str, int, str]]) -> str:
    """What an exclusion that matches no cell could have meant: the cells it matches with one field left out."""
    given = {k: v for k, v in (("python", rule.python), ("cuda", rule.cuda), ("platform", rule.platform)) if v}
    near: list[str] = []
    for left_out in given:
        relaxed = Exclusion.model_validate({k: v for k, v in given.items() if k != left_out})
        near += [f"{py} × CUDA {major} × {plat}" for py, major, plat in cells if relaxed.matches(py, major, plat)]
    unique = list(dict.fromkeys(near))
    shown = ", ".join(unique[:4]) + (", ..." if len(unique) > 4 else "")
    meant = f" — did you mean one of: {shown}?" if near else " — remove it"
    return f"this exclusion matches no cell of the matrix{meant}"
