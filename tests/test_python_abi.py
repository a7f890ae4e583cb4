"""Wheels for every Python: a stable-ABI extension (cp310-abi3) and a CUDA library opened with ctypes at import
(py3-none, shaped like cufinufft). Each is built once per CUDA major and platform, audited (abi3audit for the
stable ABI), and smoke-tested on two Pythons in every layout."""

from __future__ import annotations

import dataclasses
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from wheelfactory.binaries.pythonabi import abi3audit, python_abi_problems
from wheelfactory.binaries.wheelfile import WheelName, metadata
from wheelfactory.build import _wheels_by_cell
from wheelfactory.errors import ToolFailure
from wheelfactory.pipeline import smoke_existing
from wheelfactory.plan import Cell
from wheelfactory.smoke.results import TierResult

from .conftest import Built, add_source, build_recipe, matrix_for

# The oldest Python of the matrix (the one an abi3 wheel is built with) and a newer one the offline image has.
PYTHONS = ("3.10", "3.13")


def _built(tmp_path_factory: pytest.TempPathFactory, build_image: str, source: str) -> Built:
    return build_recipe(
        tmp_path_factory.mktemp(source), 12, build_image, source, add=lambda root: add_source(root, source),
        pythons=PYTHONS,
    )  # fmt: skip


@pytest.fixture(scope="module")
def stablelib(tmp_path_factory: pytest.TempPathFactory, build_image: str) -> Built:
    return _built(tmp_path_factory, build_image, "stablelib")


@pytest.fixture(scope="module")
def ctlib(tmp_path_factory: pytest.TempPathFactory, build_image: str) -> Built:
    return _built(tmp_path_factory, build_image, "ctlib")


def _smoked_on(built: Built) -> dict[str | None, list[TierResult]]:
    by_python: dict[str | None, list[TierResult]] = {}
    for tier in built.record.smoke:
        by_python.setdefault(tier.python, []).append(tier)
    return by_python


def _check(tiers: list[TierResult], tier: int, starts: str) -> str:
    """The detail of the first check of `tier` (tier 2: in a venv) whose name starts with `starts`, which passed."""
    checks = [c for t in tiers if t.tier == tier and t.layout in (None, "venv") for c in t.checks
              if c.name.startswith(starts)]  # fmt: skip
    assert checks and checks[0].ok, checks
    check = checks[0]
    return check.detail


@pytest.mark.slow
@pytest.mark.docker
def test_a_stable_abi_wheel_is_built_once_and_smoke_tested_on_two_pythons(
    stablelib: Built, build_image: str, tmp_path: Path
) -> None:
    record = stablelib.record
    assert record.passed, record.why_not()
    name = WheelName.of(stablelib.wheel)
    assert (name.python_tag, name.abi) == ("cp310-abi3", "abi3")
    assert [p.name for p in (stablelib.root / "dist").glob("*.whl")] == [stablelib.wheel.name]
    smoked = _smoked_on(stablelib)
    assert set(smoked) == {*PYTHONS, None}  # None: tier 3, the metadata, once
    for python in PYTHONS:
        assert {t.layout for t in smoked[python] if t.tier == 2} == {"venv", "system-site-packages", "target"}
        assert all(t.passed for t in smoked[python]), [t.label for t in smoked[python] if not t.passed]
    # setup.py's python_requires=">=3.7" won over the rendered pyproject's; the repair made it the variant's.
    assert record.built.requires_python_was == ">=3.7"
    assert metadata(stablelib.wheel)["Requires-Python"] == ">=3.10"
    classifiers = metadata(stablelib.wheel).get_all("Classifier") or []
    assert {f"Programming Language :: Python :: {v}" for v in ("3.10", "3.11", "3.12", "3.13", "3.14")} <= set(
        classifiers
    )
    # abi3audit reads the module's symbols: PyModule_AddObjectRef joined the stable ABI in 3.10, so the same wheel
    # named for 3.9 (abi3audit takes the CPython from the file name) is refused, naming it; and an extension module
    # has no place in a py3-none wheel.
    claims_39 = tmp_path / stablelib.wheel.name.replace("-cp310-abi3-", "-cp39-abi3-")
    shutil.copy(stablelib.wheel, claims_39)
    (problem,) = abi3audit(claims_39)
    assert "_runtime.abi3.so: uses PyModule_AddObjectRef (3.10), newer than the wheel's CPython 3.9" in problem
    assert abi3audit(stablelib.wheel) == []
    as_py3 = dataclasses.replace(name, abi="none")
    # `nox -s smoke -- --python 3.12 WHEEL` smoke-tests the built wheel again, on that one Python it serves.
    (again,) = smoke_existing(stablelib.root, [stablelib.wheel], build_image, matrix_for(stablelib.root, build_image),
                              ["3.12"])  # fmt: skip
    assert again.passed and {t.python for t in again.smoke if t.tier != 3} == {"3.12"}, again.why_not()
    binaries = stablelib.record.built.binaries.values()  # as the repair read them
    problems = python_abi_problems(stablelib.wheel, as_py3, binaries)
    assert any("an extension module in a py3-none wheel" in p for p in problems), problems


@pytest.mark.slow
@pytest.mark.docker
def test_a_library_opened_with_ctypes_is_one_py3_none_wheel_that_needs_cuda_at_import(ctlib: Built) -> None:
    record = ctlib.record
    assert record.passed, record.why_not()
    name = WheelName.of(ctlib.wheel)
    assert name.python_tag == "py3-none"
    members = set(zipfile.ZipFile(ctlib.wheel).namelist())
    assert "ctlib/libctlib.so" in members and not any(m.endswith((".abi3.so", ".pyd")) or ".cpython-" in m
                                                       for m in members)  # fmt: skip
    (library,) = [b for b in record.audit.binaries if b.member == "ctlib/libctlib.so"] if record.audit else [None]
    assert library is not None and library.rpath == ["$ORIGIN/../nvidia/cuda_runtime/lib"] and library.device_code
    # CMake hands nvcc the factory's own host compiler (CUDAHOSTCXX) as -ccbin: the report names it as the factory's.
    (entry,) = json.loads((ctlib.root / "dist" / "report.json").read_text())["wheels"]
    assert "GCC" in entry["toolkit"]["host_compiler"] and "the build's own" not in entry["toolkit"]["host_compiler"]
    smoked = _smoked_on(ctlib)
    for python in PYTHONS:
        assert all(t.passed for t in smoked[python]), [t.label for t in smoked[python] if not t.passed]
        # Without CUDA the import fails cleanly, naming the runtime; with NVIDIA's wheels it imports from them.
        assert "libcudart.so.12" in _check(smoked[python], 1, "import ctlib → ImportError|OSError")
        assert _check(smoked[python], 2, "import ctlib → ok") == "imported"
        assert "cudart" in _check(smoked[python], 2, "python -m ctlib._cuda_variant")
    # 3.13 took what pip installed on 3.10 (smoke/sharing.py): the same pip and requirement wheels (packaging), and
    # ctlib writes no script or header, so the --target folders too; 3.10's tiers name pip's own runs.
    took = "pip would install on Python 3.13 what it installed on Python 3.10"
    assert all(any(c.name == took and c.ok for c in t.checks) for t in smoked["3.13"]), smoked["3.13"]
    assert not [c for t in smoked["3.10"] for c in t.checks if c.name == took]
    assert any(c.name.startswith("install --target /smoke/3.10/target") for t in smoked["3.10"] for c in t.checks)


def test_a_wheel_of_another_abi_than_the_recipe_says_is_refused_with_the_fix(tmp_path: Path) -> None:
    cell = Cell("3.10", "linux-x86_64", "abi3", ("3.10", "3.11"))
    (tmp_path / "stablelib_cuda12x-2.0.0-cp310-cp310-manylinux_2_28_x86_64.whl").touch()
    with pytest.raises(ToolFailure) as refused:
        _wheels_by_cell(tmp_path, [cell], tmp_path / "build.log")
    message = str(refused.value)
    assert "(cp310-cp310), where the build asked for cp310-abi3" in message and "py_limited_api" in message
