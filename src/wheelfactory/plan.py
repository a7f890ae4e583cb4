"""matrix.yaml + recipes → the typed plan: one Variant per recipe × CUDA major, one Job per CI cell.

Only Python × platform is crossed; everything that travels with a CUDA major (toolkit, platforms and their
build settings) comes from its one matrix record.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from .binaries.wheelfile import WheelAbi, cpython_tag, python_tag
from .components import OS, component_table, operating_system, platforms, toolkit_table
from .errors import COMMAND_LINE, InputError, Problem
from .inputs import CudaEntry, Loaded, Matrix, Recipe, TorchRelease, load_matrix, load_recipe, requires_python
from .inputs.matrix import torch_gap
from .inputs.recipe import most_specific
from .pytorch.index_pages import labelled_place
from .sources import source_identity
from .untrusted.shown import shown


@dataclass(frozen=True)
class Cell:
    """One wheel to build: a CPython version on a platform. A wheel that serves several (abi3, py3-none) is built
    with the oldest of them, `python`, and `serves` lists them all."""

    python: str
    platform: str
    abi: WheelAbi = "cpython"
    serves: tuple[str, ...] = ()  # every CPython the wheel is for, oldest first; () for a cpython cell: its own

    @property
    def os(self) -> OS:
        return platforms()[self.platform].os

    @property
    def identifier(self) -> str:
        """cibuildwheel's build identifier, e.g. cp312-manylinux_x86_64."""
        return f"{cpython_tag(self.python)}-{platforms()[self.platform].identifier}"

    @property
    def pythons(self) -> tuple[str, ...]:
        """The CPythons the wheel is for."""
        return self.serves or (self.python,)

    @property
    def python_tag(self) -> str:
        """The Python part of the wheel's tag: cp312-cp312, cp310-abi3 or py3-none."""
        return python_tag(self.python, self.abi)

    def smoke_pythons(self, asked: list[str] | None = None) -> tuple[str, ...]:
        """The CPythons the smoke tiers install the wheel on: of those it serves, the ones asked for (--python),
        else the oldest and the newest."""
        chosen = [p for p in self.pythons if p in (asked or ())]
        return tuple(chosen) if chosen else tuple(dict.fromkeys((self.pythons[0], self.pythons[-1])))


@dataclass(frozen=True)
class Variant:
    """One distribution: a recipe built against one CUDA major."""

    recipe: Recipe
    recipe_dir: Path
    cuda: CudaEntry
    cells: tuple[Cell, ...]
    requires_python: SpecifierSet
    torch: TorchRelease | None = None  # what the build compiles against, for a recipe built with cpp_extension

    @property
    def major(self) -> int:
        return self.cuda.major

    @property
    def torch_target(self) -> str | None:
        """For a build on LibTorch's stable ABI, the oldest torch it runs on (every newer one too); None for others."""
        stable = self.torch is not None and self.recipe.torch_abi == "stable"
        return self.recipe.torch_target if stable else None

    @property
    def torches_run_with(self) -> list[TorchRelease]:
        """The torch releases the wheel runs with, newest first: the one it is built against, or for a stable-ABI
        build every one of the train from its target on; none for a build without torch."""
        if self.torch is None:
            return []
        target = self.torch_target
        return [t for t in self.cuda.torch if Version(t.release) >= Version(target)] if target else [self.torch]

    def torch_gap(self, python: str, platform: str) -> str | None:
        """Why torch leaves out the variant's wheel for `python` on `platform`; None where it does not."""
        return torch_gap(self.torch, self.torches_run_with, python, platform)

    @property
    def locked_torch(self) -> TorchRelease | None:
        """The one torch release the wheel runs with (its C++ ABI's), for a build tied to it; None for others."""
        return None if self.torch_target else self.torch

    @property
    def on_pypi(self) -> bool:
        """Whether the wheel goes to PyPI under the plain version: every wheel but one tied to a torch release
        other than the newest of the major's train (PyPI holds one wheel per name, version and tag)."""
        return self.locked_torch is None or self.locked_torch == self.cuda.torch[0]

    @property
    def dist_name(self) -> str:
        return f"{self.recipe.name}-cuda{self.major}x"

    @property
    def key(self) -> str:
        """What tells the variant from the others of its distribution: the distribution's name, and for a build
        tied to one torch release that release (torchsort-cuda13x-torch2.14). Its build folders and jobs go by it."""
        locked = self.locked_torch
        return f"{self.dist_name}-torch{locked.release}" if locked else self.dist_name

    @property
    def packages(self) -> list[str]:
        """The import packages that get the variant module: the recipe's import package, then every other
        top-level package the wheel installs."""
        main = self.recipe.import_name
        return [main, *(p for p in self.recipe.packages if p != main.split(".")[0])]

    def module_policy(self, module: str) -> list[str] | None:
        """What a module may link: the most specific of the recipe's module patterns that matches it."""
        return most_specific(self.recipe.modules, module)

    def library_policy(self, file_name: str) -> list[str] | None:
        """What a shared library that is no extension module may link (the recipe's shared_libraries)."""
        return most_specific(self.recipe.shared_libraries, file_name)

    def provider_of(self, library: str) -> str | None:
        """The distribution whose provided_libraries name `library` (torch for libc10.so), None for none."""
        for distribution, provided in self.recipe.provided_libraries.items():
            if any(fnmatch.fnmatch(library.lower(), pattern.lower()) for pattern in provided.libraries):
                return distribution
        return None

    def must_carry_device_code(self, name: str) -> bool:
        """Whether the recipe's device_code names a binary (an extension module's dotted name, or a shared
        library's file name): the build must have put nvcc's device code in it."""
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.recipe.device_code)

    def gpu_archs(self, name: str, platform: str) -> tuple[int, ...]:
        """The architectures a binary that carries device code (named in device_code or not) must have SASS for
        on `platform`, the newest also as PTX: the variant's, or those of them the recipe's device_code_archs
        narrows it to."""
        archs = self.cuda_archs(platform)
        narrowed = most_specific(self.recipe.device_code_archs, name)
        return archs if narrowed is None else tuple(a for a in archs if a in narrowed)

    @property
    def environment(self) -> dict[str, str]:
        """The recipe's build variables for this major."""
        values = {}
        for name, value in self.recipe.environment.items():
            chosen = value.get(self.major) if isinstance(value, dict) else value
            if chosen is not None:
                values[name] = chosen
        return values

    @property
    def declared(self) -> list[str]:
        """Every component the recipe names, required and optional."""
        return [*self.recipe.components, *self.recipe.optional]

    def components(self, *, optional: bool) -> list[str]:
        """The recipe's runtime components (required, or optional) that exist for this major."""
        table = component_table()
        names = self.recipe.optional if optional else self.recipe.components
        return [n for n in names if table.components[n].role == "runtime" and table.get(n, self.major)]

    def runtime_closure(self, names: list[str]) -> list[str]:
        """`names` and every component their libraries load at run time (the table's `needs`): what a machine
        must have installed for them to load."""
        return component_table().runtime_closure(names, self.major)

    def platforms(self) -> list[str]:
        return sorted({cell.platform for cell in self.cells})

    def platforms_defaults_first(self) -> list[str]:
        """The platforms, those built for the release's default GPU architectures before those with their own
        (data/toolkits.yaml's platform_archs): what a rendered default is written for."""
        own = toolkit_table().releases[self.cuda.toolkit].platform_archs
        return sorted(self.platforms(), key=lambda name: (name in own, name))

    def cuda_archs(self, platform: str) -> tuple[int, ...]:
        """The GPU architectures device code is compiled for on `platform`: the recipe's for this major, else
        the toolkit release's default for that platform."""
        release = toolkit_table().releases[self.cuda.toolkit]
        return tuple(sorted(self.recipe.cuda_archs.get(self.major) or release.default_archs(platform)))


def variant_args(variant: Variant) -> tuple[str, ...]:
    """How a build command names a variant: its recipe, and for a build tied to one torch release, that release
    (the build session builds every torch of the train unless told one)."""
    locked = variant.locked_torch
    return ("--recipe", variant.recipe.name, *(("--torch", locked.release) if locked else ()))


def platform_args(platform: str) -> tuple[str, ...]:
    """How a build command names a matrix platform: its OS, and for Linux its machine (a native runner's own;
    elsewhere, QEMU's)."""
    info = platforms()[platform]
    return ("--platform", info.os, *(("--arch", info.cibw_arch) if operating_system(info.os).builds_in_image else ()))


@dataclass(frozen=True)
class BuildJob:
    """One CI build job: every Python of a variant on one platform, in one cibuildwheel run (one toolkit, one
    container, one compiler cache)."""

    variant: Variant
    platform: str
    runner: str
    pythons: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.variant.key}-{platforms()[self.platform].identifier}"

    @property
    def session(self) -> str:
        return f"build-cuda{self.variant.major}"

    @property
    def args(self) -> tuple[str, ...]:
        pythons = tuple(arg for python in self.pythons for arg in ("--python", python))
        return (*variant_args(self.variant), *pythons, *platform_args(self.platform))

    @property
    def command(self) -> str:
        return " ".join(["nox", "-s", self.session, "--", *self.args])

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "runner": self.runner,
            "session": self.session,
            "args": list(self.args),
            "command": self.command,
            "recipe": self.variant.recipe.name,
            "dist_name": self.variant.dist_name,
            "cuda": self.variant.major,
            "toolkit": self.variant.cuda.toolkit,
            "torch": self.variant.torch.release if self.variant.torch else None,
            "platform": self.platform,
            "pythons": list(self.pythons),
        }


@dataclass(frozen=True)
class WheelJob:
    """One wheel of a build job: smoke-tested on its own clean runner, and rebuilt alone by its command."""

    build: BuildJob
    cell: Cell
    smoke_runner: str

    @property
    def id(self) -> str:
        return f"{self.build.variant.key}-{self.cell.identifier}"

    @property
    def args(self) -> tuple[str, ...]:
        pythons = (arg for python in self.cell.smoke_pythons() for arg in ("--python", python))
        return (*variant_args(self.build.variant), *pythons, *platform_args(self.cell.platform))

    @property
    def command(self) -> str:
        return " ".join(["nox", "-s", self.build.session, "--", *self.args])

    @property
    def wheel_glob(self) -> str:
        """The wheel's path under dist/, with * for what the build decides (version, manylinux level): a wheel
        tied to one torch release, under its local label on that torch's index page."""
        variant = self.build.variant
        dist = variant.dist_name.replace("-", "_")
        platform = platforms()[self.cell.platform].identifier.replace("manylinux_", "manylinux*_")
        plain = f"{dist}-*-{self.cell.python_tag}-{platform}.whl"
        return labelled_place(plain, variant.locked_torch) if variant.locked_torch else plain

    def as_json(self) -> dict[str, object]:
        variant = self.build.variant
        return {
            "id": self.id,
            "build_job": self.build.id,
            "smoke_runner": self.smoke_runner,
            "session": self.build.session,
            "args": list(self.args),
            "command": self.command,
            "wheel_glob": self.wheel_glob,
            "recipe": variant.recipe.name,
            "dist_name": variant.dist_name,
            "version": variant.recipe.version,
            # A wheel tied to one torch release: the label it also carries on that torch's index page, and
            # whether its plain version goes to PyPI (the train's newest torch only).
            "torch_label": variant.locked_torch.label if variant.locked_torch else None,
            "torch_index": variant.locked_torch.index_name if variant.locked_torch else None,
            "on_pypi": variant.on_pypi,
            "size_limit_mb": variant.recipe.size_limit_mb,
            # What the wheel's SBOM must name as its source (the release gate holds it to this).
            "source": source_identity(variant.recipe.source, variant.recipe_dir).as_json(),
            "cuda": variant.major,
            "opens_cuda": list(variant.recipe.opens_cuda),
            "python": self.cell.python,
            "pythons": list(self.cell.pythons),
            # What the smoke runner's setup-python installs: the Pythons the wheel is smoke-tested on (a Windows
            # runner runs them itself), then the engine's, which is the default (the last).
            "setup_python": "\n".join(dict.fromkeys([*self.cell.smoke_pythons(), ENGINE_PYTHON])),
            "abi": self.cell.abi,
            "platform": self.cell.platform,
        }


# The CPython the CI jobs run the factory with (actions/setup-python in .github/workflows).
ENGINE_PYTHON = "3.12"
# The platform of the optional GPU job's runner (a repository variable names its label): the wheels it checks.
GPU_PLATFORM = "linux-x86_64"


@dataclass(frozen=True)
class GpuJob:
    """One wheel's GPU checks on a runner with an NVIDIA GPU: installed with its declared dependencies in a fresh
    venv, the recipe's gpu_checks and the variant module's diagnostic run (`nox -s gpu-check`)."""

    wheel: WheelJob

    @property
    def id(self) -> str:
        return f"gpu-{self.wheel.id}"

    @property
    def command(self) -> str:
        return f"nox -s gpu-check -- dist/{self.wheel.wheel_glob}"

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "build_job": self.wheel.build.id,
            "command": self.command,
            "wheel_glob": self.wheel.wheel_glob,
            "dist_name": self.wheel.build.variant.dist_name,
            "cuda": self.wheel.build.variant.major,
            "python": self.wheel.cell.python,
            "platform": self.wheel.cell.platform,
        }


@dataclass(frozen=True)
class Plan:
    matrix: Loaded[Matrix]
    variants: tuple[Variant, ...]

    def locked_torches_of(self, distribution: str) -> list[TorchRelease]:
        """The torch releases a distribution (`torchsort-cuda13x`) is built against, one variant each, where each
        wheel runs with its own only; none for one built without torch, or on LibTorch's stable ABI."""
        wanted = canonicalize_name(distribution)
        return [
            v.locked_torch
            for v in self.variants
            if canonicalize_name(v.dist_name) == wanted and v.locked_torch is not None
        ]

    def variant_of(self, distribution: str, version: str) -> Variant | None:
        """The variant that made a wheel of a distribution and version: of a torch train's, the one whose label
        the version carries (`0.1.10+pt214cu130`), or without a label the one whose wheel PyPI gets."""
        wanted = canonicalize_name(distribution)
        label = Version(version).local
        for variant in self.variants:
            if canonicalize_name(variant.dist_name) != wanted:
                continue
            locked = variant.locked_torch
            if (locked.label == label) if locked and label else variant.on_pypi:
                return variant
        return None

    def build_jobs(self) -> list[BuildJob]:
        jobs = []
        for variant in self.variants:
            for platform in variant.platforms():
                settings = variant.cuda.platforms[platform]
                # A wheel for several Pythons is asked for by those its smoke tiers take: its oldest and newest.
                cells = [c for c in variant.cells if c.platform == platform]
                pythons = tuple(dict.fromkeys(p for c in cells for p in c.smoke_pythons()))
                jobs.append(BuildJob(variant, platform, settings.runner, pythons))
        return jobs

    def wheel_jobs(self) -> list[WheelJob]:
        jobs = []
        for build in self.build_jobs():
            settings = build.variant.cuda.platforms[build.platform]
            for cell in build.variant.cells:
                if cell.platform == build.platform:
                    jobs.append(WheelJob(build, cell, settings.smoke_runner or settings.runner))
        return jobs

    def gpu_jobs(self) -> list[GpuJob]:
        return [GpuJob(job) for job in self.wheel_jobs() if job.cell.platform == GPU_PLATFORM]

    def as_json(self) -> dict[str, dict[str, list[dict[str, object]]]]:
        """Three GitHub Actions matrices: the build jobs, the wheels they make (one smoke job each), and the
        wheels the optional GPU job checks (one job each, where a GPU runner is configured)."""
        return {
            "build": {"include": [job.as_json() for job in self.build_jobs()]},
            "smoke": {"include": [job.as_json() for job in self.wheel_jobs()]},
            "gpu": {"include": [job.as_json() for job in self.gpu_jobs()]},
        }

    def costs(self) -> dict[str, tuple[int, int, int]]:
        """recipe -> (its build jobs, the wheels they make, the torch releases it is built against: one variant,
        so one `build-cudaNN` run per platform, each; 0 for a recipe built without torch or on its stable ABI)."""
        counts: dict[str, tuple[int, int, int]] = {}
        for job in self.build_jobs():
            builds, wheels, _ = counts.get(job.variant.recipe.name, (0, 0, 0))
            torches = {
                v.locked_torch.release for v in self.variants if v.recipe == job.variant.recipe and v.locked_torch
            }
            cells = sum(1 for c in job.variant.cells if c.platform == job.platform)
            counts[job.variant.recipe.name] = (builds + 1, wheels + cells, len(torches))
        return counts

    def command_of(self, job_id: str) -> str | None:
        """The command that reproduces a build job, a single wheel or a wheel's GPU checks, by its id."""
        jobs: list[BuildJob | WheelJob | GpuJob] = [*self.build_jobs(), *self.wheel_jobs(), *self.gpu_jobs()]
        return next((job.command for job in jobs if job.id == job_id), None)


INPUTS = ("matrix.yaml", "matrix-offline.yaml", "recipes", "templates")


def copy_inputs(root: Path, target: Path) -> Path:
    """A copy of a project's inputs (matrix, recipes, templates) at `target`, to build or render elsewhere."""
    target.mkdir(parents=True, exist_ok=True)
    for name in INPUTS:
        if (root / name).is_dir():
            shutil.copytree(root / name, target / name, ignore=shutil.ignore_patterns("build", "*.egg-info"))
        else:
            shutil.copy2(root / name, target / name)
    return target


def recipe_paths(root: Path) -> list[Path]:
    """recipes/<name>/recipe.yaml of every recipe folder, whatever it is: a directory or a link to nothing there
    is reported by the loader, not skipped. A folder without one is an error of its own (see make_plan)."""
    folder = root / "recipes"
    if not folder.is_dir():
        return []
    return sorted(d / "recipe.yaml" for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))


def _without_recipe(paths: list[Path], root: Path) -> list[Problem]:
    problems = []
    for path in paths:
        if not path.exists() and not path.is_symlink():
            shown = path.parent.relative_to(root).as_posix()
            others = sorted(p.name for p in path.parent.iterdir() if p.suffix in (".yaml", ".yml"))
            hint = f" (it has {', '.join(others)})" if others else ""
            message = f"no recipe.yaml{hint} — add one, or move the folder out of recipes/"
            problems.append(Problem(f"{shown}/", 1, 1, message))
    return problems


def make_plan(
    root: Path, matrix_path: Path | None = None, recipe_names: list[str] | None = None, pythons: list[str] | None = None
) -> Plan:
    """Validate every input and expand it: the files, and what the command line asks of them (`recipe_names`,
    `pythons`; a value given twice counts once). Raises InputError listing every problem found, the command
    line's with the files'."""
    try:
        matrix = load_matrix(matrix_path or root / "matrix.yaml", root)
    except InputError as exc:
        raise InputError([*exc.problems, *_python_problems(pythons or [], None, "")]) from None
    problems = _python_problems(pythons or [], matrix.value.python, str(matrix.source.file))
    paths = recipe_paths(root)
    if recipe_names:
        by_name = {p.parent.name: p for p in paths}
        missing = [n for n in dict.fromkeys(recipe_names) if n not in by_name]
        if missing:
            known = ", ".join(sorted(by_name)) or "none"
            message = f"no recipe named {', '.join(missing)} (known: {known}) — create recipes/<name>/recipe.yaml"
            raise InputError([*problems, Problem(COMMAND_LINE, 1, 1, f"--recipe: {message} or fix the name")])
        paths = [by_name[n] for n in dict.fromkeys(recipe_names)]
    if not paths:
        raise InputError([*problems, Problem("recipes", 1, 1, "no recipes found — add recipes/<name>/recipe.yaml")])
    problems += _without_recipe(paths, root)
    paths = [p for p in paths if p.exists() or p.is_symlink()]
    loaded: list[tuple[Loaded[Recipe], Path]] = []
    for path in paths:
        try:
            loaded.append((load_recipe(path, root, matrix.value), path.parent))
        except InputError as exc:
            problems.extend(exc.problems)
    problems += _same_names(loaded)
    if problems:
        raise InputError(problems)
    return Plan(matrix, tuple(_variants(matrix.value, [(r.value, folder) for r, folder in loaded])))


def _python_problems(pythons: list[str], known: list[str] | None, matrix: str) -> list[Problem]:
    """Each --python is a CPython version the matrix (file `matrix`) builds (`known`; None: it did not load)."""
    problems = []
    for python in dict.fromkeys(pythons):
        if not re.fullmatch(r"3\.\d{1,2}", python):
            message = f"--python {shown(python)}: not a CPython version — write it as 3.12 (major.minor)"
        elif known is not None and python not in known:
            listed = ", ".join(known)
            message = f"--python {python}: {matrix} builds {listed} — pick one of those or edit {matrix}"
        else:
            continue
        problems.append(Problem(COMMAND_LINE, 1, 1, message))
    return problems


def _same_names(loaded: list[tuple[Loaded[Recipe], Path]]) -> list[Problem]:
    """Two recipes may not make the same distribution: each names the other."""
    by_name: dict[str, list[Loaded[Recipe]]] = {}
    for recipe, _ in loaded:
        by_name.setdefault(canonicalize_name(recipe.value.name), []).append(recipe)
    problems = []
    for same in by_name.values():
        for recipe in same if len(same) > 1 else ():
            others = ", ".join(str(o.source.file) for o in same if o is not recipe)
            message = f"{recipe.value.name!r} is also the name of {others} — give each recipe its own name"
            problems.append(recipe.source.problem(("name",), message))
    return problems


def _variants(matrix: Matrix, recipes: list[tuple[Recipe, Path]]) -> list[Variant]:
    variants = []
    spec = requires_python(matrix)
    for recipe, recipe_dir in recipes:
        for entry in matrix.cuda:
            if recipe.cuda is not None and entry.major not in recipe.cuda:
                continue
            if recipe.torch and not entry.torch:
                continue  # a build against torch needs the major's torch (the recipe check stops one that asks)
            for torch in _torches(recipe, entry):
                variant = Variant(recipe, recipe_dir, _built_with(entry, torch), (), spec, torch)
                cells = _cells(matrix, variant)
                if cells:
                    variants.append(dataclasses.replace(variant, cells=tuple(cells)))
    return variants


def _cells(matrix: Matrix, variant: Variant) -> list[Cell]:
    """The variant's wheels: each Python × platform of its major that the matrix keeps, the recipe builds on, and
    torch has wheels for (to build with, and to run with)."""
    cells: list[Cell] = []
    for platform in sorted(variant.cuda.platforms):
        if not variant.recipe.builds_on(platform):
            continue
        kept = [
            python
            for python in matrix.python
            if not any(rule.matches(python, variant.major, platform) for rule in matrix.exclude)
        ]
        if variant.recipe.wheel_abi == "cpython":
            cells += [Cell(python, platform) for python in kept if variant.torch_gap(python, platform) is None]
            continue
        # One wheel for them all, built with the oldest that the build's torch has a wheel for.
        run_with = variant.torches_run_with
        runs = sorted((p for p in kept if torch_gap(None, run_with, p, platform) is None), key=_version_key)
        built = next((python for python in runs if variant.torch_gap(python, platform) is None), None)
        if built is not None:
            serves = tuple(python for python in runs if _version_key(python) >= _version_key(built))
            cells.append(Cell(built, platform, variant.recipe.wheel_abi, serves))
    return cells


def _torches(recipe: Recipe, entry: CudaEntry) -> list[TorchRelease | None]:
    """What each of the recipe's variants of a major compiles against: nothing, for a build without torch; each
    release of the train, for one tied to a torch release; for a stable-ABI build, one torch: the newest of the
    train built with the CUDA release of the oldest from its target on — newest headers (TORCH_TARGET_VERSION keeps
    to the target's API), and a toolkit no newer than the oldest torch of the range brings."""
    if not recipe.torch:
        return [None]
    if recipe.torch_abi != "stable" or recipe.torch_target is None:
        return list(entry.torch)
    target = Version(recipe.torch_target)
    oldest = next(t for t in reversed(entry.torch) if Version(t.release) >= target)
    return [next(t for t in entry.torch if t.cuda == oldest.cuda)]


def _built_with(entry: CudaEntry, torch: TorchRelease | None) -> CudaEntry:
    """The major's record as a build uses it: a build against torch takes the toolkit that torch was built with
    (cpp_extension refuses an nvcc of another major, and a newer minor's device code needs a newer driver than
    torch's own)."""
    return entry.model_copy(update={"toolkit": torch.cuda}) if torch else entry


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
