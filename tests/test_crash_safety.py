"""Interrupted and concurrent runs, and reproducible bytes — real builds of cuprobe, killed with SIGKILL.

A build killed at any stage leaves in dist/ only complete wheels that the report says passed, and the next run
recovers without cleaning up by hand; two builds of different majors share one cache (and one dist/); and the
same source, matrix, recipe and toolkit give the same bytes, whatever the compiler cache holds.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelfactory.plan import copy_inputs
from wheelfactory.sbom.document import validated

from .conftest import REPO, Built, matrix_for

pytestmark = [pytest.mark.slow, pytest.mark.docker]
REAL_CACHE = Path(os.environ.get("WHEELFACTORY_CACHE", Path.home() / ".cache" / "wheelfactory"))


def _command(root: Path, major: int, image: str) -> list[str]:
    matrix = matrix_for(root, image)
    return [
        sys.executable, "-m", "wheelfactory", "--root", str(root), "build", "--cuda", str(major),
        "--python", "3.12", "--recipe", "cuprobe", "--image", image, "--matrix", str(matrix),
    ]  # fmt: skip


def _cache_without_toolkits(tmp: Path) -> Path:
    """A cache holding what the real one downloaded (hard links), but no toolkit laid out: provisioning runs."""
    cache = tmp / "cache"
    cache.mkdir()
    for name in ("wheels", "locks", "nvcc", "redist", "debian", "tools", "sources"):
        if (REAL_CACHE / name).is_dir():
            subprocess.run(["cp", "-al", str(REAL_CACHE / name), str(cache / name)], check=True)
    for lock in (cache / "locks").glob("*.lock"):
        lock.unlink()
    return cache


def _containers() -> set[str]:
    listed = subprocess.run(["docker", "ps", "-aq"], capture_output=True, text=True, check=True)
    return set(listed.stdout.split())


def _killed_when(command: list[str], env: dict[str, str], ready: Callable[[], bool], what: str) -> None:
    """Run the build, and kill it and everything it started (SIGKILL) once `ready` says it reached the stage."""
    before = _containers()
    process = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 900
    try:
        while not ready():
            assert process.poll() is None, f"the build ended before {what}"
            assert time.monotonic() < deadline, f"the build never reached {what}"
            time.sleep(0.1)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        leftover = _containers() - before  # what the killed docker clients left running
        if leftover:
            subprocess.run(["docker", "rm", "--force", *leftover], capture_output=True, check=False)


def _record(wheel: Path) -> None:
    """The wheel is whole: a readable zip whose every file matches its RECORD line."""
    with zipfile.ZipFile(wheel) as archive:
        assert archive.testzip() is None
        record = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        for line in archive.read(record).decode().splitlines():
            name, digest, _ = line.rsplit(",", 2)
            if digest:
                algorithm, _, expected = digest.partition("=")
                actual = base64.urlsafe_b64encode(hashlib.new(algorithm, archive.read(name)).digest()).rstrip(b"=")
                assert actual.decode() == expected, name


def _only_verified_wheels(dist: Path) -> list[Path]:
    wheels = sorted(dist.glob("*.whl")) if dist.is_dir() else []
    passed = set()
    if wheels:
        entries = json.loads((dist / "report.json").read_text())["wheels"]
        passed = {e["wheel"] for e in entries if e["passed"]}
    for wheel in wheels:
        assert wheel.name in passed, f"{wheel.name} is in dist/ without a passing report entry"
        _record(wheel)
    return wheels


# Among CI's slowest (2026-11-26: 48 s): a build killed at each stage in turn and run again, every run a real one.
def test_a_build_killed_at_any_stage_leaves_only_verified_wheels_and_the_next_run_recovers(
    tmp_path: Path, build_image: str, built13: Built
) -> None:
    # built13 filled the cache with the CUDA 13 downloads, which the scratch cache links to.
    root = copy_inputs(REPO, tmp_path / "project")
    cache = _cache_without_toolkits(tmp_path)
    env = {**os.environ, "WHEELFACTORY_CACHE": str(cache)}
    command = _command(root, 13, build_image)
    dist, logs = root / "dist", root / "build" / "logs"
    toolkits = cache / "toolkits"
    stages: list[tuple[str, Callable[[], bool]]] = [
        ("laying out the toolkit", lambda: any(toolkits.glob(".cuda13.0-*"))),
        ("cibuildwheel", lambda: "Building cp312" in _text(logs / "cuprobe-cuda13x-linux-x86_64.log")),
        ("the smoke tiers", lambda: any((root / "build" / "repaired").rglob("*.whl"))),
        ("placing the wheel in dist/", lambda: (dist / "report.json").is_file()),
    ]
    for what, ready in stages:
        _killed_when(command, env, ready, what)
        _only_verified_wheels(dist)
        assert not [p for p in toolkits.glob("cuda13.0-*") if not (p / "toolkit.json").is_file()], what

    finished = subprocess.run(command, env=env, capture_output=True, text=True, check=False)

    assert finished.returncode == 0, finished.stderr[-3000:]
    (wheel,) = _only_verified_wheels(dist)
    assert wheel.name.startswith("cuprobe_cuda13x-0.1.0-cp312-cp312-")
    assert not list(dist.glob(".*.partial")) and not list(toolkits.glob(".cuda13.0-*"))


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""


# Among CI's slowest (2026-11-26: 41 s): two whole builds at once, two processes on one cache.
def test_two_majors_build_at_once_against_one_cache(
    tmp_path: Path, build_image: str, built12: Built, built13: Built
) -> None:
    root = copy_inputs(REPO, tmp_path / "project")
    env = {**os.environ, "WHEELFACTORY_CACHE": str(_cache_without_toolkits(tmp_path))}
    builds = [subprocess.Popen(_command(root, major, build_image), env=env, stderr=subprocess.PIPE, text=True)
              for major in (12, 13)]  # fmt: skip
    outcomes = [(build.wait(timeout=1800), build.stderr.read() if build.stderr else "") for build in builds]
    assert [status for status, _ in outcomes] == [0, 0], [err[-2000:] for _, err in outcomes]
    wheels = _only_verified_wheels(root / "dist")
    assert sorted(w.name.split("-")[0] for w in wheels) == ["cuprobe_cuda12x", "cuprobe_cuda13x"]
    entries = json.loads((root / "dist" / "report.json").read_text())["wheels"]
    assert len(entries) == 2  # both runs' entries: neither overwrote the other's


# Among CI's slowest (2026-11-26: 17 s): two builds, one with an empty compiler cache, whose bytes must match.
def test_the_same_inputs_give_the_same_bytes_cold_or_warm(tmp_path: Path, build_image: str, built12: Built) -> None:
    # Two checkouts, the first built with an empty compiler cache, the second with the cache the first filled.
    compiler_cache = tmp_path / "compiler-cache"
    digests, epochs = [], []
    for name in ("first", "second"):
        root = copy_inputs(REPO, tmp_path / name)
        env = {**os.environ, "WHEELFACTORY_COMPILER_CACHE_DIR": str(compiler_cache)}
        built = subprocess.run(_command(root, 12, build_image), env=env, capture_output=True, text=True, check=False)
        assert built.returncode == 0, built.stderr[-3000:]
        (wheel,) = (root / "dist").glob("*.whl")
        digests.append(hashlib.sha256(wheel.read_bytes()).hexdigest())
        (entry,) = json.loads((root / "dist" / "report.json").read_text())["wheels"]
        epochs.append(entry["source_date_epoch"])
        with zipfile.ZipFile(wheel) as archive:
            stamps = {info.date_time for info in archive.infolist()}
            # The SBOM is among the bytes compared: its time is SOURCE_DATE_EPOCH's, its serial its content's.
            (sbom,) = [n for n in archive.namelist() if n.endswith(".dist-info/sboms/wheelfactory.cdx.json")]
            document = validated(archive.read(sbom), sbom)
        epoch = time.gmtime(entry["source_date_epoch"])
        assert document["metadata"]["timestamp"] == time.strftime("%Y-%m-%dT%H:%M:%S+00:00", epoch)
        assert stamps == {(*epoch[:5], epoch[5] - epoch[5] % 2)}, stamps  # a zip's clock ticks in 2 s
    assert digests[0] == digests[1]
    assert epochs[0] == epochs[1] and isinstance(epochs[0], int)
