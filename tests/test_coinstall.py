"""The co-install check against the real thing: cuprobe's wheels as the factory built them, uploaded with twine to a
pypiserver on 127.0.0.1, resolved by pip beside the neighbours matrix.yaml names (PyTorch, CuPy, JAX) from the
public index — metadata only. Needs the public index (PyPI), as the release pipeline has it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from packaging.utils import canonicalize_name

from wheelfactory.binaries.wheelfile import pack, unpack
from wheelfactory.cli import main
from wheelfactory.coinstall import _requirement_on, check, conflict_of
from wheelfactory.plan import make_plan

from .conftest import REPO, Built
from .wheelbytes import make_wheel

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


def test_what_a_wheel_would_move_is_its_own_requirement_the_release_misses(tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path,
        "torchext_cuda13x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        metadata="Requires-Dist: torch==2.14.*\nRequires-Dist: Torch<2; sys_platform == 'win32'\n"
        "Requires-Dist: torch<2.14; extra == 'old'\n",
    )
    torch = canonicalize_name("torch")
    assert str(_requirement_on(wheel, torch, "2.15.0")) == "torch==2.14.*"
    assert _requirement_on(wheel, torch, "2.14.1") is None  # the Windows line and the extra's do not apply here
    assert _requirement_on(wheel, canonicalize_name("cupy-cuda13x"), "14.0.0") is None


def test_each_torch_a_major_builds_for_is_a_neighbour_too() -> None:
    cuda = {v.major: v.cuda for v in make_plan(REPO).variants}
    assert cuda[13].coinstall_neighbours == [
        "torch>=2.14",
        "cupy-cuda13x",
        "jax[cuda13]",
        "torch==2.15.*",
        "torch==2.14.*",
        "torch==2.13.*",
        "torch==2.12.*",
        "torch==2.11.*",
    ]
    assert cuda[12].coinstall_neighbours == ["cupy-cuda12x", "jax[cuda12]"]


def _rewritten(wheel: Path, tmp_path: Path, line_of: Callable[[str], str]) -> Path:
    """The wheel with each line of its METADATA replaced by `line_of(line)`, packed again."""
    tree = unpack(wheel, tmp_path / "tree")
    metadata = next(tree.glob("*.dist-info")) / "METADATA"
    metadata.write_text("\n".join(line_of(line) for line in metadata.read_text().splitlines()) + "\n")
    (tmp_path / "out").mkdir()
    return pack(tree, tmp_path / "out")


def _dist(tmp_path: Path, *wheels: Path) -> Path:
    dist = tmp_path / "dist"
    dist.mkdir()
    for wheel in wheels:
        shutil.copy2(wheel, dist)
    return dist


def _train_of(tmp_path: Path, releases: list[str]) -> Path:
    """matrix.yaml with its CUDA 13 torch train narrowed to `releases`. Each torch of the train is one more pip
    resolution against the public index in CI's 30 minutes: the ends of the train and each CUDA release it is built
    for are resolved here (2.12 and 2.13 pin the same cuda-toolkit 13.0.x as 2.14 and 2.11), and the neighbour list
    that names every torch of the train is checked above without the network."""
    matrix = yaml.safe_load((REPO / "matrix.yaml").read_text(encoding="utf-8"))
    for cuda in matrix["cuda"]:
        if cuda.get("torch"):
            cuda["torch"] = [entry for entry in cuda["torch"] if entry["release"] in releases]
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix), encoding="utf-8")
    return path


# Among CI's slowest (2026-11-26: 42 s, and 124 s of setup: built12 and built13 are made here, conftest.py): pip's
# resolver against the public index for every pair of wheel and neighbour (torch, CuPy, JAX), metadata only.
@pytest.mark.slow
def test_cuprobe_resolves_beside_its_default_neighbours(
    built12: Built, built13: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both majors' wheels beside matrix.yaml's neighbours (as `nox -s coinstall -- dist/*.whl` runs it): every
    pair resolves, and the report records the neighbour's release and the NVIDIA versions chosen."""
    dist = _dist(tmp_path, built12.wheel, built13.wheel)
    matrix = _train_of(tmp_path, ["2.15", "2.14", "2.11"])
    assert main(["--root", str(REPO), "coinstall", "--matrix", str(matrix), str(dist)]) == 0, capsys.readouterr()
    entries = {e["wheel"]: e for e in json.loads((dist / "report.json").read_text())["wheels"]}
    beside13 = entries[built13.wheel.name]["coinstall"]
    # The matrix's neighbours, and each torch of the train its CUDA 13 torch extensions are built for.
    assert set(beside13) == {
        "torch>=2.14",
        "torch==2.15.*",
        "torch==2.14.*",
        "torch==2.11.*",
        "cupy-cuda13x",
        "jax[cuda13]",
    }
    assert set(entries[built12.wheel.name]["coinstall"]) == {"cupy-cuda12x", "jax[cuda12]"}
    for neighbour in beside13.values():
        assert neighbour["resolved"] and neighbour["release"]
        # Our wheel's own floors are met: it requires the runtime, so the resolution holds it.
        assert neighbour["nvidia"]["nvidia-cuda-runtime"].startswith("13.")


# Among CI's slowest (2026-11-26: 32 s): pip's resolver against the public index, which backtracks through
# torch's releases before it gives up.
@pytest.mark.slow
def test_a_conflicting_floor_fails_naming_both_requirements(
    built13: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same wheel with a runtime floor above what PyPI's torch pins (through cuda-toolkit[cudart]): pip finds
    no resolution with that torch, and the check says which two requirements collide — rather than settling on
    an older torch built for CUDA 12."""
    runtime, floor = "Requires-Dist: nvidia-cuda-runtime", "Requires-Dist: nvidia-cuda-runtime>=13.3"
    dist = _dist(
        tmp_path, _rewritten(built13.wheel, tmp_path, lambda line: floor if line.startswith(runtime) else line)
    )
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


# Among CI's slowest (33 s here, 2026-11-26): pip's resolver reads torch's releases before it says no, as above.
@pytest.mark.slow
def test_a_wheel_tied_to_an_older_torch_is_named_as_moving_the_users_torch(tmp_path: Path, built13: Built) -> None:
    """A wheel that requires the matrix's torch (2.14, as a torch extension built against it does) beside the
    newest torch of PyPI (2.15 today): installing it would take a 2.15 user's torch down, and the check says so,
    naming the requirement; beside the torch it was built for it resolves. (Its two torch neighbours alone: the
    whole command is the test above.)"""
    runtime, tied = "Requires-Dist: nvidia-cuda-runtime", "Requires-Dist: torch==2.14.*"
    wheel = _rewritten(built13.wheel, tmp_path, lambda line: f"{line}\n{tied}" if line.startswith(runtime) else line)
    newest, built_for = check({wheel: ["torch>=2.14", "torch==2.14.*"]})
    assert not newest.ok and newest.release and not newest.release.startswith("2.14.")
    assert newest.error.startswith(
        f"cuprobe-cuda13x 0.1.0 requires torch==2.14.*: installing it would move a user's torch {newest.release} — "
    )
    assert built_for.ok and built_for.release and built_for.release.startswith("2.14.")
