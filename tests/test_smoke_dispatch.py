"""Which machine smoke-tests a wheel: a Linux wheel a fresh container of its build image, a Windows wheel the
Windows host itself, and a Linux host asked to smoke a Windows wheel says it cannot.

A Windows host cannot exist here: sys.platform stands in for one, and the machines are replaced by recorders, so
that only the choice — which machine, with which toolkit, image and wheel — is under test. (The machines
themselves run for real in test_linux_build.py and test_layouts.py.)
"""

from __future__ import annotations

import json
import sys
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest

from wheelfactory import pipeline, smoke
from wheelfactory.binaries.wheelfile import WheelMetadata, WheelName
from wheelfactory.built import BuiltWheel
from wheelfactory.errors import UserError
from wheelfactory.plan import Variant, make_plan
from wheelfactory.smoke import installs, nvidia, resolutions, schedule
from wheelfactory.smoke.installs import download_requirements, requirements_met
from wheelfactory.smoke.machines import Layout
from wheelfactory.smoke.results import Steps
from wheelfactory.smoke.tiers import optional_without_wheel

from .wheelbytes import make_wheel


def _wheel(directory: Path, platform_tag: str) -> Path:
    """A wheel with nothing but its metadata: enough for the machines' choice."""
    return make_wheel(
        directory,
        f"cuprobe_cuda12x-0.1.0-cp312-cp312-{platform_tag}.whl",
        metadata="Requires-Dist: nvidia-cuda-runtime-cu12<13,>=12.9\n",
    )


def _variant(project: Path) -> Variant:
    return next(v for v in make_plan(project, None, ["cuprobe"]).variants if v.major == 12)


class Recorder:
    """Stands in for a machine, or the container of every Python's machine: records how it was made, and has no
    venv to offer."""

    made: ClassVar[list[tuple[object, ...]]] = []
    LAYOUTS: ClassVar = (("venv", "floors"),)  # what the smoke's schedule names a tier 2 for

    def __init__(self, *args: object) -> None:
        Recorder.made.append(args)

    def create_venvs(self) -> tuple[str, list[Layout]]:
        raise RuntimeError("recorded")

    def machine(self, python: str) -> Recorder:
        raise RuntimeError("recorded")

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _record(monkeypatch: pytest.MonkeyPatch) -> None:
    Recorder.made = []
    monkeypatch.setattr(smoke, "SmokeContainer", Recorder)
    monkeypatch.setattr(smoke, "HostMachine", Recorder)
    # NVIDIA's wheels at each set of versions, and their runtime site, stand in by name.
    monkeypatch.setattr(smoke, "nvidia_wheels", lambda wheel, versions, pinned: (Path(f"/{versions}.whl"),))
    monkeypatch.setattr(smoke, "runtime_site", lambda toolkit, wheels: Path("/runtime", wheels[0].stem))


def _built(variant: Variant, wheel: Path, image: str | None) -> BuiltWheel:
    name = WheelName.of(wheel)
    cell = next(c for c in variant.cells if c.python == name.python and c.platform == name.platform)
    toolkit = SimpleNamespace(wheel_dir=Path(f"/toolkits/{name.os}/wheels"))
    return BuiltWheel(variant, cell, wheel, image, toolkit, None)  # type: ignore[arg-type]


def test_a_windows_wheel_is_smoked_on_the_windows_host(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    wheel = _wheel(tmp_path, "win_amd64")
    with pytest.raises(RuntimeError, match="recorded"):
        smoke.smoke(_built(_variant(project), wheel, None))
    (made,) = Recorder.made
    # The host itself, with NVIDIA's wheels at the floors and the newest, installed for real; and a stand-in of
    # the other variant, for the two-variants check.
    nvidia = {"floors": (Path("/floors.whl"),), "newest": (Path("/newest.whl"),)}
    assert made[0].path == wheel.resolve() and made[1:4] == (nvidia, "3.12", None)
    assert made[4].name == "cuprobe_cuda13x-0.1.0-cp312-cp312-win_amd64.whl"
    assert isinstance(made[5], Steps)


def test_a_linux_wheel_is_smoked_in_a_container_of_its_image(project: Path, tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "manylinux_2_28_x86_64")
    with pytest.raises(RuntimeError, match="recorded"):
        smoke.smoke(_built(_variant(project), wheel, "quay.io/pypa/manylinux_2_28_x86_64"))
    (made,) = Recorder.made
    runtimes = {"floors": Path("/runtime/floors"), "newest": Path("/runtime/newest")}
    # cuprobe uses NVRTC: its builtins under each runtime's nvidia/ become the container's decoy system copy.
    decoys = ("cuda_nvrtc/lib/libnvrtc-builtins.so.12.*", "cuda_nvrtc/lib/libnvrtc-builtins.alt.so.12.*")
    image = "quay.io/pypa/manylinux_2_28_x86_64"
    # One container for every Python the wheel is smoke-tested on, with each one's requirements (here: none).
    assert made[1].path == wheel.resolve()  # its METADATA, read once
    assert (made[0], *made[2:4], *made[6:]) == (image, runtimes, {"3.12": None}, decoys)
    assert made[4].name == "cuprobe_cuda13x-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert isinstance(made[5], Steps)  # the smoke's steps, which the container times its own into


def test_a_linux_host_says_it_cannot_smoke_a_windows_wheel(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    wheel = _wheel(tmp_path, "win_amd64")
    with pytest.raises(UserError, match="a Windows wheel is smoke-tested on Windows — this host cannot"):
        smoke.smoke(_built(_variant(project), wheel, None))
    monkeypatch.setattr(pipeline.host, "platform_name", lambda: "linux-x86_64")
    with pytest.raises(UserError, match="a Windows wheel is smoke-tested on Windows — this Linux host cannot"):
        pipeline.smoke_existing(project, [wheel], None)
    assert Recorder.made == []


@pytest.mark.parametrize(
    ("platform_tag", "os_name", "arch", "image"),
    [
        ("win_amd64", "windows", "AMD64", None),
        ("manylinux_2_28_x86_64", "linux", "x86_64", "quay.io/pypa/manylinux_2_28_x86_64"),
        ("manylinux_2_28_aarch64", "linux", "aarch64", "quay.io/pypa/manylinux_2_28_aarch64"),
    ],
)
def test_an_existing_wheel_gets_the_toolkit_and_image_of_its_platform(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    platform_tag: str,
    os_name: str,
    arch: str,
    image: str | None,
) -> None:
    provisioned: list[tuple[str, str]] = []
    pulled: list[tuple[str, str]] = []
    monkeypatch.setattr(pipeline, "provision", lambda variant, os, arch: provisioned.append((os, arch)) or "toolkit")
    monkeypatch.setattr(pipeline, "ensure_image", lambda image, arch: pulled.append((image, arch)))
    monkeypatch.setattr(pipeline, "read_binaries_of", lambda built: None)
    built = pipeline.existing(_wheel(tmp_path, platform_tag), _variant(project), None)
    assert provisioned == [(os_name, arch)]
    assert built.image == image and pulled == ([(image, arch)] if image else [])


def _dist_info(runtime: Path, name: str, version: str, *requires: str) -> None:
    info = runtime / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = [f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    (info / "METADATA").write_text("Metadata-Version: 2.1\n" + "\n".join(lines) + "\n")


@pytest.mark.parametrize(("nccl", "met"), [("2.27.7", True), ("2.21.5", False)])
def test_the_layouts_nvidia_wheels_are_judged_against_requires_dist(nccl: str, met: bool, tmp_path: Path) -> None:
    """What pip's resolver would prove in the container, judged from the runtime site's metadata: the wheel's
    NVIDIA requirements, its extras' (nccl), and those NVIDIA's own wheels name (cuBLAS's NVRTC)."""
    wheel = tmp_path / "pkg_cuda12x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(
            "pkg_cuda12x-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: pkg-cuda12x\nVersion: 1.0\nRequires-Dist: numpy\n"
            "Requires-Dist: nvidia-cublas-cu12<13,>=12.9\nProvides-Extra: nccl\n"
            'Requires-Dist: nvidia-nccl-cu12<3,>=2.26; extra == "nccl"\n',
        )
    runtime = tmp_path / "runtime"
    _dist_info(runtime, "nvidia-cublas-cu12", "12.9.1.4", "nvidia-cuda-nvrtc-cu12")
    _dist_info(runtime, "nvidia-cuda-nvrtc-cu12", "12.9.86")
    _dist_info(runtime, "nvidia-nccl-cu12", nccl)

    check = requirements_met(WheelMetadata.read(wheel), runtime, "floors")

    assert check.ok is met
    if met:
        assert check.detail == "nvidia-cublas-cu12 12.9.1.4, nvidia-cuda-nvrtc-cu12 12.9.86, nvidia-nccl-cu12 2.27.7"
    else:
        assert check.detail == 'unmet: nvidia-nccl-cu12<3,>=2.26; extra == "nccl" (the layouts have 2.21.5)'


@pytest.mark.parametrize(
    ("major", "platform_tag", "expected"),
    [
        (11, "manylinux_2_28_aarch64", "has no linux aarch64 wheel"),  # no nvidia-nccl-cu11 for aarch64
        (11, "manylinux_2_28_x86_64", None),
        (12, "manylinux_2_28_aarch64", None),
        (13, "win_amd64", "has no windows wheel"),  # NCCL has no Windows wheel in any major
    ],
)
def test_optional_parts_nvidia_ships_nothing_for_are_expected_missing_with_the_reason(
    project: Path, tmp_path: Path, major: int, platform_tag: str, expected: str | None
) -> None:
    # cuprobe's one optional component is NCCL: where it has no wheel, its needs_optional statements must raise
    # ImportError in every tier with the variant module's reason, not a pip fix that cannot help.
    variant = next(v for v in make_plan(project, None, ["cuprobe"]).variants if v.major == major)
    built = _built(variant, _wheel(tmp_path, platform_tag), None)

    assert optional_without_wheel(built) == expected


class _Asked(Exception):
    """The index or pip was asked."""


def _ask(*args: object, **kwargs: object) -> None:
    raise _Asked


@pytest.mark.slow  # downloads NVIDIA's CUDA 12 runtime wheels (a few MB)
def test_the_nvidia_wheels_resolution_is_reused_for_an_hour_and_asked_again_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later run takes the wheels an earlier one resolved, without the index, while they are under an hour old
    and still in the cache as sealed; after that, when one of them changed, or with --refresh, pip resolves
    again."""
    monkeypatch.setenv("WHEELFACTORY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(resolutions, "_refresh", False)  # and so back after resolve_afresh()
    wheel = _wheel(tmp_path, "manylinux_2_28_x86_64")
    nvidia._resolved.cache_clear()
    fresh = {v: nvidia.nvidia_wheels(WheelMetadata.read(wheel), v) for v in ("floors", "newest")}
    assert all(fresh.values()) and fresh["floors"] != fresh["newest"]
    nvidia._resolved.cache_clear()  # a later process
    monkeypatch.setattr(nvidia, "download_wheels", _ask)
    monkeypatch.setattr(nvidia, "project_files", _ask)
    assert {v: nvidia.nvidia_wheels(WheelMetadata.read(wheel), v) for v in ("floors", "newest")} == fresh

    records = sorted((tmp_path / "cache" / "resolutions").glob("*.json"))
    assert len(records) == 2
    for change in ("an hour later", "a wheel changed", "--refresh"):
        nvidia._resolved.cache_clear()
        if change == "an hour later":
            for record in records:
                earlier = json.loads(record.read_text())
                record.write_text(json.dumps({**earlier, "at": earlier["at"] - resolutions.RESOLUTION_TTL_S - 1}))
        elif change == "a wheel changed":
            for record in records:  # back within the hour, but the newest wheel is not what was sealed
                record.write_text(json.dumps({**json.loads(record.read_text()), "at": time.time()}))
            fresh["newest"][0].write_bytes(b"truncated")
        else:
            resolutions.resolve_afresh()
        with pytest.raises(_Asked):
            nvidia.nvidia_wheels(WheelMetadata.read(wheel), "newest")


@pytest.mark.slow  # downloads a small wheel from PyPI
def test_the_other_requirements_are_resolved_once_an_hour_for_each_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wheel's non-CUDA requirements for one Python: pip resolves them once; a later run gets the same wheels
    in its folder without the index; another Python, or --refresh, asks again."""
    monkeypatch.setenv("WHEELFACTORY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(resolutions, "_refresh", False)
    wheel = make_wheel(
        tmp_path,
        "ctlib_cuda12x-0.5.0-py3-none-manylinux_2_28_x86_64.whl",
        metadata="Requires-Dist: packaging==24.2\nRequires-Dist: nvidia-cuda-runtime-cu12<13,>=12.9\n",
    )
    first = download_requirements(WheelMetadata.read(wheel), "3.12", tmp_path / "first", [])
    assert first is not None and sorted(p.name for p in first.iterdir()) == ["packaging-24.2-py3-none-any.whl"]
    # A wheel built against torch: its own requirements, then torch's pins, which may name the same wheel.
    both = download_requirements(WheelMetadata.read(wheel), "3.12", tmp_path / "both", ["packaging==24.2"])
    assert both is not None and sorted(p.name for p in both.iterdir()) == ["packaging-24.2-py3-none-any.whl"]
    monkeypatch.setattr(installs, "pip_download", _ask)
    again = download_requirements(WheelMetadata.read(wheel), "3.12", tmp_path / "again", [])
    assert again is not None
    assert [p.read_bytes() for p in again.iterdir()] == [p.read_bytes() for p in first.iterdir()]
    with pytest.raises(_Asked):
        download_requirements(WheelMetadata.read(wheel), "3.11", tmp_path / "other", [])
    resolutions.resolve_afresh()
    with pytest.raises(_Asked):
        download_requirements(WheelMetadata.read(wheel), "3.12", tmp_path / "refreshed", [])


def test_the_smokes_order_is_written_down_each_step_naming_what_it_waits_for(project: Path, tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "manylinux_2_28_x86_64")
    (tmp_path / "scratch").mkdir()
    image = "quay.io/pypa/manylinux_2_28_x86_64"
    written = smoke.SmokeSchedule(
        _built(_variant(project), wheel, image), WheelMetadata.read(wheel), image, tmp_path / "scratch", Steps()
    )
    waits = {step.name: set(step.after) for step in schedule.ordered(written.steps())}
    assert waits["tier 3"] == set()  # on this host, beside everything else
    assert waits["lay out the runtime sites"] == {"NVIDIA's wheels at the floors", "NVIDIA's wheels at the newest"}
    # pip's resolutions go to the index side by side (only their downloads take the wheel folder's lock in turn)
    for resolution in (
        "NVIDIA's wheels at the floors",
        "NVIDIA's wheels at the newest",
        "3.12: download the requirements",
    ):
        assert waits[resolution] == {"what torch installs"}
    # The stand-in of another variant is mounted as a folder it will be written into: only its install waits for it.
    fetched = {"lay out the runtime sites", "what torch installs"}
    assert waits["start the container"] == {*fetched, "3.12: download the requirements"}
    venvs = {"start the container", "3.12: create the venvs"}
    # pip into the first venv (copied into the others), and the requirements into the --target folder, side by
    # side; those linked into the two-variants folder before the wheel goes into either; each tier once the
    # install it uses is done.
    requirements, linked = "3.12: install the requirements into the --target folder", "3.12: the requirements linked"
    for install in ("3.12: install into the venvs", requirements):
        assert waits[install] == venvs
    assert waits[f"{linked} into the two-variants folder"] == {"start the container", requirements}
    linked += " into the two-variants folder"
    assert waits["3.12: install into the --target folder"] == {"start the container", requirements, linked}
    assert waits["3.12: install the two variants"] == {*venvs, "a stand-in of another variant", linked}
    assert waits["3.12: tier 1"] == {*venvs, "3.12: install into the venvs"}
    for layout in ("venv, floors", "system-site-packages, floors", "venv, newest"):
        assert waits[f"3.12: tier 2 ({layout})"] == {"start the container", "3.12: install into the venvs"}
    assert waits["3.12: tier 2 (target, floors)"] == {"start the container", "3.12: install into the --target folder"}
    assert waits["3.12: two variants"] == {*venvs, "3.12: install the two variants"}
    tiers = {name for name in waits if name.startswith("3.12: tier") or name == "3.12: two variants"}
    assert waits["stop the container"] == {"start the container", *tiers}
