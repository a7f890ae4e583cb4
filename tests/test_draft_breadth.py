"""The drafter's breadth, measured: `nox -s recipe` drafts seven real CUDA packages no recipe of this repository was
written for, from their PyPI sdists, and each field of each draft is held to a hand-checked expectation
(tests/data/draft_expectations/, written from reading each sdist's sources, never from the drafter's output; its
README says how). Where the drafter does not meet one, the case is an expected failure whose reason names the gap
(strict: a drafter that learns it makes the case fail until the mark goes) — the expectation is never bent to
the draft.

Each package is drafted once (the sdists come from the package index into the cache, as the other tests' do);
the fields compared are those a draft can know before a build. `modules`, `device_code` and
`device_code_archs` are what the completion from a first build's report arrives at (docs/recipes.md): of those,
a draft must leave every module linking nothing and carrying no device code yet (so that the first build's audit
says what each really does); their expectations are held to the completion where a heavy test builds the package
(test_drafting_build.py: causal-conv1d)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from wheelfactory.drafting import SourceGiven, draft_recipe
from wheelfactory.inputs import Recipe
from wheelfactory.plan import copy_inputs

from .conftest import REPO

EXPECTATIONS = Path(__file__).parent / "data" / "draft_expectations"
PACKAGES = sorted(p.stem for p in EXPECTATIONS.glob("*.yaml"))

# What each must_note finding is called in the draft's NOTE:, DECIDE: and comment lines.
NOTED = {
    "prebuilt_binaries": "prebuilt binaries",
    "no_compiled_source": "no compiled source",
    "hard_coded_gencode": "hard-codes nvcc's GPU architectures",
    "downloads_prebuilt_wheel": "downloads while it builds",
    "op_builder": "op-builders",
    "env_through_helper": "read through get_env_if_set()",
    "prunes_archs": "filter_ccs",
}
COMPLETION_FIELDS = ("modules", "device_code", "device_code_archs")

# (package, field) -> the gap, where the drafter does not meet the expectation.
GAPS: dict[tuple[str, str], str] = {
    ("bitsandbytes", "smoke"): "the draft follows the ctypes load through CUDASetup's helpers to import time, but "
    "cannot tell that without a GPU it opens libbitsandbytes_cpu.so, which links no CUDA (its DECIDE asks)",
    ("deepspeed", "environment"): "the draft does not see that the cutlass and ragged-device op-builders import "
    "deepspeed-kernels, which no requirement names (DS_BUILD_CUTLASS_OPS=0, DS_BUILD_RAGGED_DEVICE_OPS=0)",
}


@dataclass(frozen=True)
class Drafted:
    recipe: Recipe
    text: str  # the draft as written: its comments, NOTE: and DECIDE: lines
    notes: list[str]


def _expected(package: str) -> dict[str, Any]:
    loaded = yaml.safe_load((EXPECTATIONS / f"{package}.yaml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


class Drafts:
    """Each package drafted once, when a case first asks, into one scratch project (pytest's, so a passing run
    leaves nothing behind)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for recipe in (root / "recipes").iterdir():
            shutil.rmtree(recipe)
        self.done: dict[str, Drafted] = {}

    def __getitem__(self, package: str) -> Drafted:
        if package not in self.done:
            sdist = _expected(package)["sdist"]
            given = SourceGiven(sdist=f"{sdist['distribution']}=={sdist['version']}")
            path, notes = draft_recipe(given, self.root)
            text = path.read_text(encoding="utf-8")
            self.done[package] = Drafted(Recipe.model_validate(yaml.safe_load(text)), text, notes)
        return self.done[package]


@pytest.fixture(scope="module")
def drafts(tmp_path_factory: pytest.TempPathFactory) -> Drafts:
    return Drafts(copy_inputs(REPO, tmp_path_factory.mktemp("breadth") / "project"))


def _requirements(lines: list[str] | None) -> list[str]:
    return sorted(str(Requirement(line)) for line in lines or [])


def _drafted_value(recipe: Recipe, field: str) -> object:
    """A draft's field in the expectations' form (a requirement as packaging writes it, a name PEP 503-folded)."""
    values: dict[str, object] = {
        "name": canonicalize_name(recipe.name),
        "version": recipe.version,
        "summary": recipe.summary,
        "platforms": recipe.platforms,
        "import": recipe.import_name,
        "packages": recipe.packages or [recipe.import_name],
        "source": recipe.source.model_dump(),
        "wheel_abi": recipe.wheel_abi,
        "torch": recipe.torch,
        "components": sorted(recipe.components),
        "modules": {k: sorted(v) for k, v in recipe.modules.items()},
        "device_code": sorted(recipe.device_code),
        "device_code_archs": recipe.device_code_archs,
        "environment": dict(recipe.environment),
        "dependencies": _requirements([d for d in recipe.dependencies if isinstance(d, str)]),
        "opens_cuda": sorted(recipe.opens_cuda),
        "smoke": {"cuda_at_import": recipe.smoke.cuda_at_import},
    }
    return values[field]


def _expected_value(expected: object, field: str) -> object:
    if field == "name":
        return canonicalize_name(str(expected))
    if field in ("components", "device_code", "opens_cuda"):
        return sorted(expected or [])  # type: ignore[call-overload]
    if field == "modules":
        return {k: sorted(v) for k, v in (expected or {}).items()}  # type: ignore[union-attr]
    if field == "dependencies":
        return _requirements(expected)  # type: ignore[arg-type]
    if field in ("environment", "device_code_archs"):
        return {str(k): v if isinstance(v, list) else str(v) for k, v in (expected or {}).items()}  # type: ignore[union-attr]
    return expected


def _cases() -> list[Any]:
    cases = []
    for package in PACKAGES:
        expected = _expected(package)
        checks = [*expected["recipe"], *(f"note:{n}" for n in expected.get("must_note") or [])]
        checks += [f"not:{field}" for field in expected.get("not_expected") or {}]
        for check in checks:
            gap = GAPS.get((package, check))
            marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
            cases.append(pytest.param(package, check, id=f"{package}-{check}", marks=marks))
    return cases


@pytest.mark.parametrize(("package", "check"), _cases())
def test_a_real_sdists_draft_holds_to_its_hand_checked_expectation(drafts: Drafts, package: str, check: str) -> None:
    expected, drafted = _expected(package), drafts[package]
    kind, _, field = check.rpartition(":")
    if kind == "note":
        assert NOTED[field] in " ".join(drafted.text.split()), f"the draft does not say {NOTED[field]!r}"
    elif kind == "not":
        value = _drafted_value(drafted.recipe, field)
        unwanted = expected["not_expected"][field]
        assert not set(unwanted) & set(value), f"{field}: {value}"  # type: ignore[call-overload]
    elif field in COMPLETION_FIELDS:  # left to the first build's report, whatever the package holds
        left = {"modules": {} if drafted.recipe.wheel_abi == "none" else {"*": []}, "device_code": []}
        assert _drafted_value(drafted.recipe, field) == left.get(field, {})
    else:
        assert _drafted_value(drafted.recipe, field) == _expected_value(expected["recipe"][field], field)
