"""linux-aarch64 wheels built on this x86_64 host under QEMU user emulation (binfmt_misc): the offline arm64 image
(`nox -s image -- --arch aarch64`, as .ci/run builds it), NVIDIA's aarch64 (sbsa) wheels, nvcc for aarch64, the
repair, the audit and the three smoke tiers in arm64 containers. Nothing here is faked: emulation is the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from wheelfactory import host
from wheelfactory.audit import audit_wheel
from wheelfactory.binaries.wheelfile import WheelName, pack, unpack
from wheelfactory.cli import main
from wheelfactory.errors import ToolFailure
from wheelfactory.host import machine
from wheelfactory.image import await_build, interpreters
from wheelfactory.pipeline import BuildRequest, build, existing
from wheelfactory.plan import copy_inputs, make_plan

from .conftest import OFFLINE_IMAGE, OFFLINE_MATRIX, REPO, Built, local_image, unavailable

AARCH64_IMAGE = "manylinux-offline-aarch64:latest"


@pytest.fixture(scope="session")
def aarch64_image(docker: None) -> str:
    if machine() != "x86_64":
        pytest.skip("this host is not x86_64: its own image builds aarch64 natively")
    await_build(AARCH64_IMAGE)  # a `nox -s image -- --arch aarch64` still at work: the tests under QEMU come last
    if not local_image(AARCH64_IMAGE):
        unavailable(f"no {AARCH64_IMAGE} — build it with `nox -s image -- --arch aarch64`")
    return AARCH64_IMAGE


# Among CI's slowest (2026-11-26: 184 s, the setup of the test below): the one aarch64 build CI runs, under QEMU
# (cibuildwheel's container, nvcc's front end and the smoke's interpreters all emulated, some ten times slower than
# native); the smallest wheel that crosses every stage.
@pytest.fixture(scope="session")
def built_aarch64(tmp_path_factory: pytest.TempPathFactory, aarch64_image: str) -> Built:
    """cuprobe for CUDA 13 and the image's CPython, built for aarch64 under QEMU through the whole pipeline."""
    root = copy_inputs(REPO, tmp_path_factory.mktemp("aarch64") / "project")
    python = interpreters(aarch64_image)[-1]
    matrix = root / OFFLINE_MATRIX
    records = build(BuildRequest(root, 13, [python], ["cuprobe"], aarch64_image, None, matrix, arch="aarch64"))
    (record,) = records
    variant = next(v for v in make_plan(root, matrix, ["cuprobe"]).variants if v.major == 13)
    return Built(root, record, variant)


@pytest.mark.slow
def test_an_aarch64_wheel_is_built_repaired_audited_and_smoked_under_qemu(built_aarch64: Built) -> None:
    record = built_aarch64.record
    report = json.loads((built_aarch64.root / "dist" / "report.json").read_text())
    (entry,) = report["wheels"]
    assert record.passed, entry["rejected_because"]
    name = WheelName.of(built_aarch64.wheel)
    assert name.platform_tag == "manylinux_2_36_aarch64" and name.platform == "linux-aarch64"
    assert [(t.tier, t.layout, t.passed) for t in record.smoke] == [
        (1, None, True),
        (2, "venv", True),
        (2, "system-site-packages", True),
        (2, "target", True),
        (2, "venv", True),
        (1, "beside cuprobe-cuda12x", True),
        (3, None, True),
    ]
    binaries = {b["module"]: b for b in entry["binaries"]}
    # Every binary is an AArch64 ELF file, as binutils reads it too, and links the aarch64 loader.
    tree = unpack(built_aarch64.wheel, built_aarch64.root / "tree")
    for member, found in ((b["member"], b) for b in entry["binaries"]):
        assert found["machine"] == "aarch64"
        header = subprocess.run(["readelf", "-h", tree / member], capture_output=True, text=True, check=True).stdout
        assert "AArch64" in header, header
        assert "ld-linux-aarch64.so.1" in found["needed"] or not found["needed"]
    # The RPATHs point into NVIDIA's aarch64 wheels' folders, which pip lays out as on x86_64.
    assert binaries["cuprobe._blas"]["rpath"] == ["$ORIGIN/../nvidia/cu13/lib"]
    assert {"libcublas.so.13", "libcudart.so.13"} <= set(binaries["cuprobe._blas"]["needed"])
    assert binaries["cuprobe.cuda._nccl"]["rpath"] == ["$ORIGIN/../../nvidia/nccl/lib"]
    # nvcc for aarch64 compiled the kernel: SASS for each architecture, PTX for the newest.
    device = binaries["cuprobe._device"]["gpu_code"]
    assert {e["arch"] for e in device if e["kind"] == "sass"} == {
        f"sm_{a}" for a in built_aarch64.variant.cuda_archs("linux-aarch64")
    }
    # linux-aarch64's own defaults for CUDA 13 (SBSA wheels serve Jetson from JetPack 7 on): the report says so.
    products = entry["gpu_code"]["products"]
    assert products["Jetson Thor (sm_110)"] == "natively (sm_110)"
    assert products["Jetson Orin (sm_87)"] == "natively (sm_87)"
    assert products["DGX Spark (GB10) (sm_121)"] == "natively (sm_120)"
    assert products["GB300 (sm_103)"] == "natively (sm_100)"
    assert entry["toolkit"]["nvcc"]["version"].startswith("13.0.")  # asked of nvcc itself, under QEMU


@pytest.mark.slow
def test_an_x86_64_binary_in_an_aarch64_wheel_is_rejected(built_aarch64: Built, tmp_path: Path) -> None:
    # The host's own gcc, where the emulated image's was meant: the file is x86_64 whatever the wheel's tag says.
    tree = unpack(built_aarch64.wheel, tmp_path / "tree")
    flags = next(tree.rglob("_flags.*.so"))
    (tmp_path / "flags.c").write_text("int cuprobe_touch(void) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", flags, tmp_path / "flags.c"], check=True)
    (tmp_path / "out").mkdir()
    wheel = pack(tree, tmp_path / "out")

    audit = audit_wheel(existing(wheel, built_aarch64.variant, AARCH64_IMAGE))

    problems = next(b for b in audit.binaries if b.module == "cuprobe._flags").problems
    assert any("is a binary for x86_64, in a wheel for aarch64" in p for p in problems), problems


@pytest.mark.slow
def test_an_image_of_another_machine_is_refused_before_anything_is_built(
    aarch64_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not local_image(OFFLINE_IMAGE):
        unavailable(f"no {OFFLINE_IMAGE} — build it with `nox -s image`")
    root = copy_inputs(REPO, tmp_path / "project")
    common = [
        "--root",
        str(root),
        "build",
        "--cuda",
        "13",
        "--recipe",
        "cuprobe",
        "--matrix",
        str(root / OFFLINE_MATRIX),
    ]

    status = main([*common, "--arch", "aarch64", "--image", OFFLINE_IMAGE])

    assert status == 2
    err = capsys.readouterr().err
    assert f"{OFFLINE_IMAGE} is an image of x86_64, but these wheels are for aarch64" in err
    assert f"--image {AARCH64_IMAGE}" in err
    assert main([*common, "--image", aarch64_image]) == 2
    assert f"{aarch64_image} is an image of aarch64, but these wheels are for x86_64" in capsys.readouterr().err
    assert not (root / "dist").exists() and not (root / "build" / "stage").exists()


@pytest.mark.slow
def test_the_aarch64_image_offers_only_the_interpreters_it_has(aarch64_image: str) -> None:
    # cibuildwheel's utility path /opt/python/cp39-cp39 is Debian's 3.11: it is no build interpreter.
    assert interpreters(aarch64_image) == ["3.11"]


QEMU_ENTRY = "interpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: {flags}\noffset 0\n"


@pytest.mark.parametrize(
    ("entry", "root", "expected"),
    [
        (None, False, "no binfmt_misc entry"),  # and not root: nothing it may register
        ("disabled\n" + QEMU_ENTRY.format(flags="PF"), True, "is registered but disabled"),
        ("enabled\n" + QEMU_ENTRY.format(flags="P"), True, "lacks the F flag"),
    ],
)
def test_a_host_that_cannot_emulate_aarch64_is_told_how_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str | None, root: bool, expected: str
) -> None:
    # Another host's binfmt_misc stands in here (this one emulates aarch64 as CI set it up): its entry missing,
    # disabled, or registered without F (its interpreter then unreachable from containers).
    (tmp_path / "register").touch()
    if entry is not None:
        (tmp_path / "qemu-aarch64").write_text(entry)
    monkeypatch.setattr(host, "BINFMT", tmp_path)
    monkeypatch.setattr(host, "machine", lambda: "x86_64")
    monkeypatch.setattr(os, "geteuid", lambda: 0 if root else 1000)

    with pytest.raises(ToolFailure) as failure:
        host.ensure_emulation("aarch64")

    assert expected in str(failure.value)
    assert "qemu-user-static" in str(failure.value) or "update-binfmts --enable qemu-aarch64" in str(failure.value)


def test_the_same_machine_needs_no_emulation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "BINFMT", tmp_path)  # empty: nothing registered, nothing needed
    host.ensure_emulation(host.machine())
