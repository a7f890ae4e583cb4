"""The co-install check against the real thing: cuprobe's wheels as the factory built them, uploaded with twine to a
pypiserver on 127.0.0.1, resolved by pip beside the neighbours matrix.yaml names (PyTorch, CuPy, JAX) from the
public index — metadata only. Needs the public index (PyPI), as the release pipeline has it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wheelfactory.binaries.wheelfile import pack, unpack
from wheelfactory.cli import main
from wheelfactory.coinstall import conflict_of

from .conftest import REPO, Built

PIP_CONFLICT = """\
INFO: pip is looking at multiple versions of torch to determine which version is compatible with other requirements.
ERROR: Cannot install cuprobe-cuda13x==0.1.0 and torch==2.15.0 because these package versions have conflicting \
dependencies.

The conflict is caused by:
    cuprobe-cuda13x 0.1.0 depends on nvidia-cuda-runtime>=13.3
    cuda-toolkit[cudart] 13.2.2 depends on nvidia-cuda-runtime==13.2.86.*; sys_platform == "linux" and extra == "cudart"

To fix this you could try to:
1. loosen the range of package versions you've specified
"""


def test_the_requirements_pip_blames_are_read_without_their_markers() -> None:
    assert conflict_of(PIP_CONFLICT) == [
        "cuprobe-cuda13x 0.1.0 depends on nvidia-cuda-runtime>=13.3",
        "cuda-toolkit[cudart] 13.2.2 depends on nvidia-cuda-runtime==13.2.86.*",
    ]
    assert conflict_of("ERROR: No matching distribution found for torch") == []


def _dist(tmp_path: Path, *wheels: Path) -> Path:
    dist = tmp_path / "dist"
    dist.mkdir()
    for wheel in wheels:
        shutil.copy2(wheel, dist)
    return dist


# Among CI's slowest (2026-11-26: 28 s, and 141 s of setup: built12 and built13 are made here, conftest.py): pip's
# resolver against the public index for every pair of wheel and neighbour (torch, CuPy, JAX), metadata only.
@pytest.mark.slow
def test_cuprobe_resolves_beside_its_default_neighbours(
    built12: Built, built13: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both majors' wheels beside matrix.yaml's neighbours (as `nox -s coinstall -- dist/*.whl` runs it): every
    pair resolves, and the report records the neighbour's release and the NVIDIA versions chosen."""
    dist = _dist(tmp_path, built12.wheel, built13.wheel)
    assert main(["--root", str(REPO), "coinstall", str(dist)]) == 0, capsys.readouterr()
    entries = {e["wheel"]: e for e in json.loads((dist / "report.json").read_text())["wheels"]}
    beside13 = entries[built13.wheel.name]["coinstall"]
    assert set(beside13) == {"torch>=2.14", "cupy-cuda13x", "jax[cuda13]"}
    assert set(entries[built12.wheel.name]["coinstall"]) == {"cupy-cuda12x", "jax[cuda12]"}
    for neighbour in beside13.values():
        assert neighbour["resolved"] and neighbour["release"]
        # Our wheel's own floors are met: it requires the runtime, so the resolution holds it.
        assert neighbour["nvidia"]["nvidia-cuda-runtime"].startswith("13.")


# Among CI's slowest (2026-11-26: 26 s): pip's resolver against the public index, which backtracks through
# torch's releases before it gives up.
@pytest.mark.slow
def test_a_conflicting_floor_fails_naming_both_requirements(
    built13: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same wheel with a runtime floor above what PyPI's torch pins (through cuda-toolkit[cudart]): pip finds
    no resolution with that torch, and the check says which two requirements collide — rather than settling on
    an older torch built for CUDA 12."""
    tree = unpack(built13.wheel, tmp_path / "tree")
    metadata = next(tree.glob("*.dist-info")) / "METADATA"
    lines = metadata.read_text().splitlines()
    lines = [
        "Requires-Dist: nvidia-cuda-runtime>=13.3" if line.startswith("Requires-Dist: nvidia-cuda-runtime") else line
        for line in lines
    ]
    metadata.write_text("\n".join(lines) + "\n")
    (tmp_path / "out").mkdir()
    dist = _dist(tmp_path, pack(tree, tmp_path / "out"))
    assert main(["--root", str(REPO), "coinstall", str(dist)]) == 1
    said = capsys.readouterr().err
    line = next(x for x in said.splitlines() if "beside torch>=2.14" in x)
    assert "NO resolution" in line
    assert "cuprobe-cuda13x 0.1.0 depends on nvidia-cuda-runtime>=13.3" in line
    assert "depends on nvidia-cuda-runtime==13." in line.split("nvidia-cuda-runtime>=13.3", 1)[1]
    (entry,) = json.loads((dist / "report.json").read_text())["wheels"]
    assert not entry["coinstall"]["torch>=2.14"]["resolved"]
    assert len(entry["coinstall"]["torch>=2.14"]["conflict"]) == 2
    assert entry["coinstall"]["cupy-cuda13x"]["resolved"]  # CuPy pins nothing that collides


@pytest.mark.slow
def test_without_the_public_index_it_stops_and_says_so(
    built13: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")  # nothing listens on the discard port
    dist = _dist(tmp_path, built13.wheel)
    assert main(["--root", str(REPO), "coinstall", str(dist)]) == 3
    assert "the co-install check needs the public index http://127.0.0.1:9/simple/" in capsys.readouterr().err
    assert not (dist / "report.json").exists()
