"""Bytes the factory did not write, broken or hostile, each built byte by byte here: every reader refuses them with
its own error (BadBytes) within one second and 256 MiB, every gate names the file, the member and the problem on
one line, and the statuses are the README's — bad input (2) or a gate's rejection (1) for what the user handed
in, a download failure (3) for what was fetched.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import struct
import tarfile
import time
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from wheelfactory import sources
from wheelfactory.audit import _check_elf, _Checker, _unreadable
from wheelfactory.binaries import elf
from wheelfactory.binaries.fatbin import read_fatbin
from wheelfactory.binaries.wheelcheck import check_wheel
from wheelfactory.binaries.wheelfile import WheelName, read_binary, unpack
from wheelfactory.cli import main
from wheelfactory.errors import BadBytes, ToolFailure
from wheelfactory.plan import make_plan
from wheelfactory.platforms.linux import manylinux_policy
from wheelfactory.smoke.nvidia import runtime_site
from wheelfactory.untrusted import archives, cache
from wheelfactory.untrusted.index_pages import PEP691
from wheelfactory.untrusted.shown import one_line
from wheelfactory.verify import verify

from . import elfbytes as eb
from .conftest import Quiet, served, serving
from .wheelbytes import JOB, SOURCE, host_library, make_wheel, record_line, wheel_files, write_zip

SECOND = 1.0
MEMORY = 256 << 20
WHEEL = "cuprobe_cuda12x-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
DESCRIBED = "Description-Content-Type: text/markdown\n\n# cuprobe\n"


def bounded(read: Callable[[], Any]) -> Any:
    """Run a reader: its result, or the BadBytes it raised, after checking it took at most a second and 256 MiB
    (Python's allocations, traced)."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        result: Any = read()
    except BadBytes as exc:
        result = exc
    finally:
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < SECOND, f"took {elapsed:.2f} s"
    assert peak < MEMORY, f"allocated {peak >> 20} MiB"
    return result


def _file(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------------------------------------- ELF


def _verneed(*, loop: str) -> bytes:
    """A .gnu.version_r with two entries; `loop` "entries": the second's vn_next leads back to the first;
    "aux": the first's one auxiliary entry leads back to its own entry."""
    table, at = eb.strings("libc.so.6", "libm.so.6", "GLIBC_2.2.5")
    entry = struct.Struct("<HHIII")
    aux = struct.Struct("<IHHII")
    back = (-32) & 0xFFFFFFFF
    aux_next, aux_count = ((-16) & 0xFFFFFFFF, 1000) if loop == "aux" else (0, 1)
    first = entry.pack(1, aux_count, at["libc.so.6"], 16, 32) + aux.pack(0, 0, 2, at["GLIBC_2.2.5"], aux_next)
    second = entry.pack(1, 1, at["libm.so.6"], 16, back if loop == "entries" else 0)
    second += aux.pack(0, 0, 3, at["GLIBC_2.2.5"], 0)
    return eb.elf64(
        [
            eb.Section(".dynstr", eb.SHT_STRTAB, table),
            eb.Section(".gnu.version_r", eb.SHT_GNU_VERNEED, first + second, link=1, info=1_000_000),
        ]
    )


def _zeros_deflated(size: int) -> bytes:
    """zlib's stream of `size` zero bytes, made a MiB at a time."""
    out = zlib.compressobj(1)
    chunk = bytes(1 << 20)
    return b"".join(out.compress(chunk) for _ in range(size >> 20)) + out.flush()


def _compressed_section(name: str, payload: bytes) -> bytes:
    return eb.elf64([eb.Section(name, eb.SHT_PROGBITS, payload, flags=eb.SHF_COMPRESSED)])


HOSTILE_ELF: dict[str, tuple[Callable[[], bytes], str]] = {
    "65535-dynsym-sections": (
        lambda: eb.elf64([eb.Section(".dynsym", eb.SHT_DYNSYM, entsize=24) for _ in range(65_533)]),
        "65535 sections, more than the 4096",
    ),
    "section-count-lies": (lambda: eb.elf64([], section_count=4000), "section table runs past the end"),
    "version-needs-loop": (lambda: _verneed(loop="entries"), "version-needs chain loops"),
    "version-aux-loop": (lambda: _verneed(loop="aux"), "version-needs chain loops"),
    "compressed-fatbin-claims-1-GiB": (
        lambda: _compressed_section(".nv_fatbin", eb.compressed(b"x" * 64, claimed=1 << 30)),
        "inflates to 1024 MiB, past the bound",
    ),
    "compressed-fatbin-bomb-claims-1-KiB": (
        lambda: _compressed_section(".nv_fatbin", struct.pack("<IIQQ", 1, 0, 1024, 1) + _zeros_deflated(512 << 20)),
        "inflates to other than the size it claims",
    ),
    "section-past-the-end": (
        lambda: eb.elf64([eb.Section(".nv_fatbin", eb.SHT_PROGBITS, b"x" * 16)])[:-200],
        "runs past the end of the file",
    ),
    "no-elf-header": (lambda: b"\x7fELF\x09", "no ELF header"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_ELF))
def test_a_hostile_elf_is_refused_within_bounds(case: str, tmp_path: Path) -> None:
    build, message = HOSTILE_ELF[case]
    path = _file(tmp_path, "hostile.so", build())
    for read in (elf.read_elf, elf.device_code_sections, elf.named_libraries):
        refused = bounded(lambda read=read: read(path))  # type: ignore[misc]
        if isinstance(refused, BadBytes):
            assert message in str(refused) and str(refused).startswith("hostile.so: "), refused
            assert "\n" not in str(refused)
    # At least the reader the case is about refused it; in a wheel, the audit rejects it, naming it.
    binary = bounded(lambda: read_binary(path, "pkg/hostile.so", "linux"))
    assert message in binary.unreadable
    assert _unreadable(binary).problems[0].startswith("cannot be read — hostile.so: ")


def test_a_compressed_rodata_in_a_cached_library_is_inflated_within_bounds(tmp_path: Path) -> None:
    honest = _file(tmp_path, "libhonest.so", _compressed_section(".rodata", eb.compressed(b"\0libcublasLt.so.12\0")))
    assert bounded(lambda: elf.named_libraries(honest)) == {"libcublasLt.so.12"}
    bomb = _file(tmp_path, "libbomb.so", _compressed_section(".rodata", eb.compressed(b"", claimed=1 << 34)))
    assert "past the bound" in str(bounded(lambda: elf.named_libraries(bomb)))


def test_a_needed_library_named_like_a_ci_command_is_kept_exactly_and_shown_on_one_line(
    project: Path, tmp_path: Path
) -> None:
    hostile = "libx.so\n::error::owned\n::add-mask::secret"
    table, at = eb.strings(hostile, "libc.so.6")
    needed = eb.dynamic([(1, at[hostile]), (1, at["libc.so.6"])])
    sections = [eb.Section(".dynstr", eb.SHT_STRTAB, table), eb.Section(".dynamic", eb.SHT_DYNAMIC, needed, link=1)]
    path = _file(tmp_path, "mod.so", eb.elf64(sections))
    binary = bounded(lambda: read_binary(path, "cuprobe/_flags.cpython-312-x86_64-linux-gnu.so", "linux"))
    assert binary.needed == (hostile, "libc.so.6")
    # The audit's own check and message, as the summary and the report get them.
    variant = next(v for v in make_plan(project, None, ["cuprobe"]).variants if v.major == 12)
    tag = "manylinux_2_28_x86_64"
    audit = _check_elf(binary, _Checker(variant, "linux-x86_64", set(), set()), manylinux_policy(tag), tag, "3.12")
    (problem,) = [p for p in audit.problems if "libx.so" in p]
    assert problem.startswith("needs 'libx.so\\n::error::owned\\n::add-mask::secret': not a manylinux")
    assert "\n" not in problem
    # The report keeps the exact value, JSON-escaped.
    assert json.loads(json.dumps(asdict(audit)))["needed"][0] == hostile
    # A wheel's own output quoted in a smoke failure cannot start a line of the summary either.
    assert one_line("smoke: import failed:\n::error::x") == "smoke: import failed:\\n::error::x"


# ---------------------------------------------------------------------------------------------- fatbin


HOSTILE_FATBIN: dict[str, tuple[bytes, str]] = {
    "container-header-0-size-0": (struct.pack("<IHHQ", 0xBA55ED50, 1, 0, 0), "claims a 0-byte header"),
    "entry-header-0": (
        eb.fatbin_container([struct.pack("<HHIQ", 2, 0x101, 0, 0) + bytes(48)]),
        "with a 0-byte header",
    ),
    "entry-past-its-container": (
        eb.fatbin_container([eb.fatbin_entry(2, 90, b"", header_size=64)[:-8] + b"zzzzzzzz"], size=80)[:-16],
        "runs past the section's end",
    ),
    "entry-payload-past-its-container": (
        eb.fatbin_container([eb.fatbin_entry(1, 90, b"ptx")[:8] + struct.pack("<Q", 1 << 40) + bytes(48)]),
        "runs past its container's end",
    ),
    "container-cut-short": (eb.fatbin_container([], size=1 << 30), "runs past the section's end"),
    "garbage-between-containers": (eb.fatbin_container([]) + b"garbage!" * 2, "no fatbin container at offset 0x10"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_FATBIN))
def test_a_hostile_fatbin_is_refused_within_bounds(case: str, tmp_path: Path) -> None:
    section, message = HOSTILE_FATBIN[case]
    refused = bounded(lambda: read_fatbin(section))
    assert isinstance(refused, BadBytes) and message in str(refused), refused
    # Inside a module, it is the audit's rejection (the wheel is bad), no longer a tool failure (exit 3).
    path = _file(tmp_path, "mod.so", eb.elf64([eb.Section(".nv_fatbin", eb.SHT_PROGBITS, section)]))
    binary = bounded(lambda: read_binary(path, "pkg/mod.so", "linux"))
    assert binary.unreadable.startswith("its device code cannot be read — ") and message in binary.unreadable


def test_a_cubins_compressed_note_says_nothing_of_its_maker_and_costs_nothing() -> None:
    note = eb.Section(".note.nv.tkinfo", eb.SHT_NOTE, eb.compressed(b"", claimed=1 << 40), flags=eb.SHF_COMPRESSED)
    cubin = eb.elf64([note], machine=190)
    entries = bounded(lambda: read_fatbin(eb.fatbin_container([eb.fatbin_entry(2, 90, cubin)])))
    assert [(e.name, e.toolkit) for e in entries] == [("sm_90", None)]


def test_an_empty_container_is_nvccs_own_and_read() -> None:
    section = eb.fatbin_container([]) + eb.fatbin_container([eb.fatbin_entry(1, 90, b".version 8.8")])
    assert [e.name for e in bounded(lambda: read_fatbin(section))] == ["compute_90"]


# ---------------------------------------------------------------------------------------------- PE


@pytest.mark.parametrize(
    "data",
    [b"MZ" + bytes(100), b"MZ" + bytes(58) + struct.pack("<I", 1 << 30), b"MZ" + bytes(58) + b"\x40\0\0\0PE\0\0"],
    ids=["no-pe-header", "pe-header-past-the-end", "truncated-coff"],
)
def test_a_broken_pe_is_refused(data: bytes, tmp_path: Path) -> None:
    path = _file(tmp_path, "mod.pyd", data)
    binary = bounded(lambda: read_binary(path, "pkg/mod.pyd", "windows"))
    assert binary.unreadable.startswith("mod.pyd: "), binary


# ---------------------------------------------------------------------------------------------- zips and wheels


def _stored(name: str, data: bytes, offset: int) -> tuple[bytes, bytes]:
    """A stored member's local record at `offset` and its central-directory entry."""
    crc = zlib.crc32(data)
    local = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, len(data), len(data), len(name), 0)
    central = struct.pack(
        "<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, crc, len(data), len(data), len(name),
        0, 0, 0, 0, 0, offset,
    )  # fmt: skip
    return local + name.encode() + data, central + name.encode()


def _overlapping_zip(path: Path) -> Path:
    """The trick of non-recursive zip bombs: member `b`'s local record lies inside member `a`'s data, so that the
    same bytes unpack twice."""
    inner, inner_central = _stored("b", b"payload" * 100, 30 + 1)
    outer, outer_central = _stored("a", inner, 0)
    centrals = outer_central + inner_central
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 2, 2, len(centrals), len(outer), 0)
    path.write_bytes(outer + centrals + end)
    return path


def _bomb_wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("pkg/zeros.bin", "w") as member:
            for _ in range(200):
                member.write(bytes(1 << 20))
        for name, data in wheel_files(path.name).items():
            archive.writestr(name, data)
    return path


def _corrupt_deflate(wheel: Path) -> Path:
    """A member whose deflate stream is damaged in the middle (zlib.error when it is read)."""
    data = bytearray(wheel.read_bytes())
    at = data.find(b"pkg/a.py") + len("pkg/a.py") + 2
    data[at : at + 4] = b"\xff\xff\xff\xff"
    wheel.write_bytes(bytes(data))
    return wheel


HOSTILE_ZIPS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "dotdot-member": (lambda p: make_wheel(p.parent, p.name, {"../evil.py": b"x"}), "'../evil.py' would land outside"),
    "absolute-member": (lambda p: make_wheel(p.parent, p.name, {"/etc/evil": b"x"}), "'/etc/evil' would land outside"),
    "backslash-member": (lambda p: make_wheel(p.parent, p.name, {"pkg\\evil.py": b"x"}), "has a backslash"),
    "duplicate-member": (
        lambda p: write_zip(p, [("pkg/a.py", b"1"), *wheel_files(p.name, {"pkg/a.py": b"2"}).items()]),
        "'pkg/a.py' is in the archive twice",
    ),
    "overlapping-members": (_overlapping_zip, "shares its bytes with"),
    "bomb": (_bomb_wheel, "unpacks to 200 MiB from 0.2 MiB"),
    "corrupt-deflate-stream": (
        lambda p: _corrupt_deflate(make_wheel(p.parent, p.name, {"pkg/a.py": b"a" * 4096})),
        "not a readable zip",
    ),
    "not-a-zip": (lambda p: _file(p.parent, p.name, b"PK\x03\x04 but nothing else"), "not a readable zip"),
    "truncated": (lambda p: _file(p.parent, p.name, make_wheel(p.parent, p.name).read_bytes()[:-40]), "not a readable"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_ZIPS))
def test_a_hostile_wheel_is_refused_whole_and_nothing_is_written_outside(case: str, tmp_path: Path) -> None:
    build, message = HOSTILE_ZIPS[case]
    (tmp_path / "in").mkdir()
    wheel = build(tmp_path / "in" / WHEEL)
    into = tmp_path / "out" / "tree"
    refused = bounded(lambda: unpack(wheel, into))
    assert isinstance(refused, BadBytes) and message in str(refused), refused
    assert str(refused).startswith(WHEEL) and "\n" not in str(refused)
    assert not [p for p in into.rglob("*") if p.is_file()]
    assert not (tmp_path / "evil.py").exists() and not Path("/etc/evil").exists()
    # The gate names it too; so does the NVIDIA-wheel path, as a download failure.
    assert any(message in p for p in check_wheel(wheel)[1])
    site = SimpleNamespace(site=tmp_path / "toolkit" / "site")
    with pytest.raises(ToolFailure, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        runtime_site(site, (wheel,))  # type: ignore[arg-type]


def test_an_encrypted_member_is_refused(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, WHEEL, {"pkg/a.py": b"x"})
    data = bytearray(wheel.read_bytes())
    for magic, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(magic)
        data[at + flag_at] |= 1
    wheel.write_bytes(bytes(data))
    assert "is encrypted" in str(bounded(lambda: unpack(wheel, tmp_path / "out")))


# ---------------------------------------------------------------------------------------------- the release gate


def _sound(tmp_path: Path, file_name: str = WHEEL, **options: str) -> Path:
    """A wheel every check of the gate takes: its library links CUDA 12's runtime."""
    (tmp_path / "w").mkdir(exist_ok=True)
    files = {"cuprobe/__init__.py": b"", "cuprobe/libprobe.so": host_library("libcudart.so.12")}
    return make_wheel(tmp_path / "w", file_name, files, metadata=DESCRIBED, source=SOURCE, **options)


def _rewritten(wheel: Path, change: Callable[[dict[str, bytes]], None]) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    change(members)
    return write_zip(wheel, members)


def _lying_record(members: dict[str, bytes]) -> None:
    members["cuprobe/__init__.py"] = b"import os  # changed after RECORD was written\n"


def _unlisted(members: dict[str, bytes]) -> None:
    members["cuprobe/extra.py"] = b""


def _other_version(members: dict[str, bytes]) -> None:
    info = "cuprobe_cuda12x-0.1.0.dist-info"
    members[f"{info}/METADATA"] = members[f"{info}/METADATA"].replace(b"Version: 0.1.0", b"Version: 0.2.0")
    record = [record_line(n, d) for n, d in members.items() if not n.endswith("RECORD")] + [f"{info}/RECORD,,"]
    members[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()


GATE_CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "macos-tag": (
        lambda t: _sound(t, WHEEL.replace("manylinux_2_28_x86_64", "macosx_11_0_x86_64")),
        "platform macosx_11_0_x86_64 is not one of the factory's",
    ),
    "musllinux-tag": (
        lambda t: _sound(t, WHEEL.replace("manylinux_2_28", "musllinux_1_2")),
        "platform musllinux_1_2_x86_64 is not one of the factory's",
    ),
    "other-machine": (
        lambda t: _sound(t, WHEEL.replace("x86_64", "aarch64")),
        "extra: cuprobe_cuda12x-0.1.0-cp312-cp312-manylinux_2_28_aarch64.whl is not in the plan",
    ),
    "abi3": (
        lambda t: _sound(t, WHEEL.replace("cp312-cp312", "cp312-abi3")),
        "extra: cuprobe_cuda12x-0.1.0-cp312-abi3-manylinux_2_28_x86_64.whl is not in the plan",
    ),
    "no-abi": (lambda t: _sound(t, WHEEL.replace("cp312-cp312", "cp312-none")), "tagged for cp312-none, not one of"),
    "lying-record": (lambda t: _rewritten(_sound(t), _lying_record), "does not have the sha256 RECORD gives it"),
    "unlisted-member": (lambda t: _rewritten(_sound(t), _unlisted), "cuprobe/extra.py is not in RECORD"),
    "wheel-tag-disagrees": (
        lambda t: _sound(
            t, wheel="Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_28_x86_64\n"
        ),
        "WHEEL's Tag lines (cp311-cp311-manylinux_2_28_x86_64) are not the file name's tags",
    ),
    "metadata-version-differs": (
        lambda t: _rewritten(_sound(t), _other_version),
        "METADATA's Version 0.2.0 is not the file name's 0.1.0",
    ),
    "dotdot-member": (
        lambda t: make_wheel(t, WHEEL, {"../x.py": b""}, metadata=DESCRIBED),
        "member '../x.py' would land outside",
    ),
    "duplicate-member": (
        lambda t: write_zip(t / WHEEL, [("cuprobe/a.py", b""), *wheel_files(WHEEL, {"cuprobe/a.py": b""}).items()]),
        "'cuprobe/a.py' is in the archive twice",
    ),
    "not-a-wheel-name": (lambda t: _file(t, "cuprobe.whl", b""), "not a wheel's file name"),
}


def test_the_gate_passes_a_sound_wheel(tmp_path: Path) -> None:
    assert verify([JOB], [_sound(tmp_path)]) == []


@pytest.mark.parametrize(("abi", "tag"), [("abi3", "cp310-abi3"), ("none", "py3-none")])
def test_the_gate_passes_one_wheel_for_every_python_where_the_plan_says_so(abi: str, tag: str, tmp_path: Path) -> None:
    job = {**JOB, "python": "3.10", "abi": abi, "pythons": ["3.10", "3.11"]}
    wheel = _sound(tmp_path, WHEEL.replace("cp312-cp312", tag))
    assert verify([job], [wheel]) == []
    # The same job's wheel for one CPython is not it: one missing, one extra.
    problems = verify([job], [_sound(tmp_path, WHEEL.replace("cp312-cp312", "cp310-cp310"))])
    assert [p.split(":")[0] for p in problems] == ["missing", "extra"], problems


def test_the_gate_holds_each_wheel_to_its_size_limit(tmp_path: Path) -> None:
    files = {"cuprobe/data.bin": os.urandom(3 << 19), "cuprobe/libprobe.so": host_library("libcudart.so.12")}
    wheel = make_wheel(tmp_path, WHEEL, files, metadata=DESCRIBED, source=SOURCE)
    assert verify([{**JOB, "size_limit_mb": 1}], [wheel]) == [f"{WHEEL}: 1.5 MiB, over its 1 MiB limit"]


def test_the_gate_refuses_a_cuda_wheel_without_cuda_unless_the_package_opens_it_itself(tmp_path: Path) -> None:
    """A CPU build under a CUDA name (its library links libc alone, as a build that missed the CUDA switch makes
    it), read again at the gate whatever the audit said; one whose package opens CUDA itself, so declared, passes."""
    cpu = make_wheel(
        tmp_path,
        WHEEL,
        {"cuprobe/__init__.py": b"", "cuprobe/libprobe.so": host_library()},
        metadata=DESCRIBED,
        source=SOURCE,
    )
    (problem,) = verify([JOB], [cpu])
    assert problem.startswith(
        f"{WHEEL}: holds no CUDA: none of its 1 binaries carries device code (a fatbin section) or links a CUDA 12 "
        "library or the driver (libcuda.so.1), and the recipe declares no CUDA library that the package opens "
        "itself (opens_cuda) — a CPU build under a CUDA name is never shipped; its build left CUDA out"
    ), problem
    assert verify([{**JOB, "opens_cuda": ["nvrtc"]}], [cpu]) == []
    # CUDA 12's runtime is no CUDA of a CUDA 13 wheel.
    assert "holds no CUDA" in verify([{**JOB, "cuda": 13}], [_sound(tmp_path)])[0]


@pytest.mark.parametrize("case", sorted(GATE_CASES))
def test_the_gate_rejects_a_wheel_pip_or_pypi_would_not_take(case: str, tmp_path: Path) -> None:
    build, message = GATE_CASES[case]
    wheel = build(tmp_path)
    problems = verify([JOB], [wheel])
    assert any(message in p for p in problems), problems
    assert all("\n" not in p for p in problems)


def test_a_malformed_plan_exits_2_naming_the_plan_and_the_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = {k: v for k, v in JOB.items() if k != "version"}
    sized = {**JOB, "id": "cuprobe-cuda12x-cp313-manylinux_x86_64", "python": "3.13", "size_limit_mb": "100 MiB"}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"build": {"include": []}, "smoke": {"include": [missing, sized]}}, indent=2))
    status = main(["verify", "--plan", str(plan), str(_sound(tmp_path))])
    lines = capsys.readouterr().err.splitlines()
    assert status == 2
    assert any(
        line.startswith(f"{plan}:") and "job cuprobe-cuda12x-cp312-manylinux_x86_64:" in line and "'version'" in line
        for line in lines
    ), lines
    assert any(
        "job cuprobe-cuda12x-cp313-manylinux_x86_64: smoke.include[1].size_limit_mb: expected a whole number" in line
        for line in lines
    ), lines
    plan.write_text("[1, 2]")
    assert main(["verify", "--plan", str(plan), str(tmp_path)]) == 2


# ---------------------------------------------------------------------------------------------- order and messages


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("notes.whl", b"hello", "not a wheel's file name"),
        (WHEEL, b"not a zip at all", "not a readable zip"),
        (WHEEL, b"", "not a readable zip"),
    ],
)
def test_a_non_wheel_handed_to_smoke_is_refused_at_once_with_nothing_downloaded(
    name: str,
    data: bytes,
    message: str,
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("WHEELFACTORY_CACHE", str(cache_dir))
    wheel = _file(tmp_path, name, data)
    started = time.monotonic()
    status = main(["--root", str(project), "smoke", str(wheel)])
    assert time.monotonic() - started < SECOND
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not cache_dir.exists() or not any(p.is_file() for p in cache_dir.rglob("*"))


def test_a_wheel_name_the_factory_cannot_place_is_bad_bytes() -> None:
    for name in ("x.whl", "pkg-1.0-py3-none-any.whl", "pkg-1.0-cp312-cp312-macosx_11_0_arm64.whl"):
        with pytest.raises(BadBytes):
            WheelName.of(Path(name))
    assert WheelName.of(Path(WHEEL)).platform == "linux-x86_64"


# ---------------------------------------------------------------------------------------------- index pages


def _index(pages: dict[str, tuple[str, bytes | Callable[[Any], None]]]) -> AbstractContextManager[str]:
    """An index on loopback: each path answers with its content type and body (or writes its own body)."""

    class Handler(Quiet):
        def do_GET(self) -> None:
            kind, body = pages.get(self.path, ("text/plain", b""))
            self.send_response(200 if self.path in pages else 404)
            self.send_header("Content-Type", kind)
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the reader stopped at its bound
                body(self.wfile) if callable(body) else self.wfile.write(body)

    return serving(Handler)


def _endless(out: io.BufferedIOBase) -> None:
    block = b"<a href='x'>x</a>" * 4096
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # bounded, as every test's server is: it stops by itself
        out.write(block)


PAGES: dict[str, tuple[str, bytes | Callable[[Any], None], str]] = {
    "no-url": (PEP691, json.dumps({"files": [{"filename": "pkg-1.0.tar.gz"}]}).encode(), "lack a filename or url"),
    "files-not-a-list": (PEP691, json.dumps({"files": "pkg-1.0.tar.gz"}).encode(), "lack a filename or url"),
    "not-json": (PEP691, b"{", "not a PEP 691 project page"),
    "deep-json": (PEP691, b"[" * 100_000 + b"]" * 100_000, "not a PEP 691 project page"),
    "name-with-a-folder": (
        PEP691,
        json.dumps({"files": [{"filename": "../pkg-1.0.tar.gz", "url": "x"}]}).encode(),
        "which no index serves",
    ),
    "endless": ("text/html", _endless, "more than 64 MiB"),
}


@pytest.mark.parametrize("case", sorted(PAGES))
def test_a_hostile_index_page_is_a_download_failure_within_bounds(case: str) -> None:
    kind, body, message = PAGES[case]
    with _index({"/simple/pkg/": (kind, body)}) as index:
        tracemalloc.start()
        started = time.monotonic()
        with pytest.raises(ToolFailure) as refused:
            sources.project_files(index + "simple/", "pkg")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.monotonic() - started < 5 and peak < MEMORY  # loopback moves 64 MiB in well under a second here
    assert message in str(refused.value) and "\n" not in str(refused.value), refused.value


# ---------------------------------------------------------------------------------------------- the cache


def test_a_cache_entry_that_changed_is_dropped_and_one_that_is_whole_kept(tmp_path: Path) -> None:
    folder = tmp_path / "entry"
    (folder / "lib").mkdir(parents=True)
    (folder / "lib" / "libx.so.1").write_bytes(b"library")
    (folder / "lib" / "libx.so").symlink_to("libx.so.1")
    cache.seal(folder)
    assert cache.reusable(folder)
    (folder / "lib" / "libx.so.1").write_bytes(b"librarz")
    cache._checked.clear()  # a later process
    assert not cache.reusable(folder) and not folder.exists()

    wheel = make_wheel(tmp_path, WHEEL)
    cache.seal(wheel)
    assert cache.reusable(wheel)
    wheel.write_bytes(wheel.read_bytes()[:-10])  # a truncated download
    assert not cache.reusable(wheel) and not wheel.exists()
    unsealed = make_wheel(tmp_path, WHEEL)  # written by an older factory: no seal, made again
    assert cache.intact(unsealed) == "it has no seal"


def _aged(folder: Path, seconds: int = 60) -> None:
    """Every file under `folder` made a minute older: written before its seal, as a cache entry's files are."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_file() and not path.is_symlink():
            stat = path.stat()
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns - seconds * 10**9))


def test_an_entry_unchanged_since_its_seal_is_checked_without_reading_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "entry"
    (folder / "lib").mkdir(parents=True)
    (folder / "lib" / "libx.so.1").write_bytes(b"library" * 1000)
    wheel = make_wheel(tmp_path, WHEEL)
    _aged(tmp_path)
    cache.seal(folder)
    cache.seal(wheel)
    hashed: list[Path] = []
    monkeypatch.setattr(cache, "sha256", lambda path: hashed.append(path) or archives.sha256(path))
    cache._checked.clear()  # a later process
    assert cache.intact(folder) is None and cache.intact(wheel) is None
    assert hashed == []
    # Touched, not changed: read again, found the same, and the seal says so with the new time.
    os.utime(folder / "lib" / "libx.so.1")
    cache._checked.clear()
    assert cache.intact(folder) is None and hashed == [folder / "lib" / "libx.so.1"]
    cache._checked.clear()
    assert cache.intact(folder) is None and len(hashed) == 1


def test_a_change_in_the_clock_tick_of_the_seal_is_found(tmp_path: Path) -> None:
    """A file whose time is not older than its seal is read, whatever its size and time say: written in the tick
    the seal was, a same-size change keeps the time (git's racy entries)."""
    folder = tmp_path / "entry"
    folder.mkdir()
    library = folder / "libx.so.1"
    library.write_bytes(b"library")
    cache.seal(folder)
    written = library.stat().st_mtime_ns
    os.utime(folder / cache.SEAL, ns=(written, written))  # the seal in the same tick
    library.write_bytes(b"librarz")
    os.utime(library, ns=(written, written))
    cache._checked.clear()
    assert cache.intact(folder) == "libx.so.1 differs from what was written"


def test_a_seal_of_an_older_factory_is_still_checked_and_brought_up_to_date(tmp_path: Path) -> None:
    folder = tmp_path / "entry"
    folder.mkdir()
    (folder / "libx.so.1").write_bytes(b"library")
    sha = hashlib.sha256(b"library").hexdigest()
    (folder / cache.SEAL).write_text(json.dumps({"libx.so.1": ["file", 7, sha]}))  # size and sha256, no time
    cache._checked.clear()
    assert cache.intact(folder) is None
    assert json.loads((folder / cache.SEAL).read_text())["libx.so.1"][::3] == ["file", sha]
    (folder / cache.SEAL).write_text(json.dumps({"libx.so.1": ["file", 7, "0" * 64]}))
    cache._checked.clear()
    assert cache.intact(folder) == "libx.so.1 differs from what was written"


def test_a_cached_sdist_tree_changed_by_hand_is_fetched_again(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WHEELFACTORY_CACHE", str(tmp_path / "cache"))
    index = tmp_path / "index" / "simple" / "pkg"
    index.mkdir(parents=True)
    archive = index / "pkg-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("pkg-1.0/setup.py")
        info.size = 6
        tar.addfile(info, io.BytesIO(b"# real"))
    (index / "index.html").write_text('<a href="pkg-1.0.tar.gz">pkg-1.0.tar.gz</a>\n')
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    with served(tmp_path / "index") as url:
        monkeypatch.setenv("PIP_INDEX_URL", url + "simple/")
        tree = sources._sdist("pkg==1.0", sha)
        (tree / "setup.py").write_text("import os; os.system('evil')")
        cache._checked.clear()
        again = sources._sdist("pkg==1.0", sha)
    assert again == tree and (tree / "setup.py").read_text() == "# real"
    assert "setup.py differs from what was written — dropped, to be made again" in capsys.readouterr().err
