"""`nox -s facts`: what the package index says that the data files lack. A recorded index (tests/facts_index/: PEP
691 pages and PEP 658 metadata files, shaped as PyPI serves them) in which CUDA 13.6, torch 2.16 and CPython 3.16
appear is served on loopback and read as the live one is; the toolkit entries the command wrote against PyPI are
checked against values read by hand off NVIDIA's wheels (unzip, ptxas --list-version, nvcc --list-gpu-code,
grep of crt/host_config.h), not against the command itself."""

from __future__ import annotations

import functools
import http.server
import io
import json
import os
import re
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from wheelfactory.cli import main
from wheelfactory.components import toolkit_table
from wheelfactory.errors import BadBytes
from wheelfactory.facts.index import wheels
from wheelfactory.facts.toolkits import NewToolkit, host_limits, measure, newest_isa, specifier
from wheelfactory.inputs import load_matrix
from wheelfactory.untrusted import index_pages
from wheelfactory.untrusted.ranges import RemoteFile, remote_metadata

from .conftest import REPO, Quiet, serving

RECORDED = Path(__file__).parent / "facts_index"
EXPECTED = RECORDED / "expected.diff"

# Read by hand on 2026-11-28 from PyPI's wheels (x86_64): `ptxas --list-version | tail -1` and
# `nvcc --list-gpu-code` of nvidia-cuda-nvcc, `grep -n "__GNUC__ >\|_MSC_VER >=" crt/host_config.h` of
# nvidia-cuda-crt (13.3.73: `#if __GNUC__ > 15`, 13.4.92 and 13.5.37: `> 16`; all `_MSC_VER >= 1960`).
BY_HAND = {
    "13.3": ("9.3", 15, "14.59", [75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121]),
    "13.4": ("9.4", 16, "14.59", [75, 80, 86, 87, 88, 89, 90, 100, 103, 107, 110, 120, 121]),
    "13.5": ("9.5", 16, "14.59", [75, 80, 86, 87, 88, 89, 90, 100, 103, 107, 110, 120, 121]),
}


def _changed(diff: str) -> list[str]:
    return [line for line in diff.splitlines() if line.startswith(("+", "-"))]


class PEP691(Quiet):
    """The recorded index: every page PEP 691 JSON, as PyPI answers an Accept of it."""

    def guess_type(self, path: str | object) -> str:
        return "application/octet-stream" if str(path).endswith((".metadata", ".whl")) else index_pages.PEP691


def _cibuildwheel(index: Path) -> None:
    """cibuildwheel 4.3.3's page and a wheel of it that also builds CPython 3.16 (its build-platforms.toml)."""
    (index / "files").mkdir(exist_ok=True)
    name = "cibuildwheel-4.3.3-py3-none-any.whl"
    lines = [
        f'  {{ identifier = "cp3{minor}-manylinux_{arch}", version = "3.{minor}" }},'
        for minor in (14, 15, 16)
        for arch in ("x86_64", "aarch64")
    ]
    with zipfile.ZipFile(index / "files" / name, "w") as whl:
        whl.writestr(
            "cibuildwheel/resources/build-platforms.toml",
            "[linux]\npython_configurations = [\n" + "\n".join(lines) + "\n]\n",
        )
    (index / "cibuildwheel").mkdir()
    entry = {"filename": name, "url": f"../../files/{name}", "size": 300, "yanked": False}
    page = {"meta": {"api-version": "1.1"}, "name": "cibuildwheel", "files": [entry]}
    (index / "cibuildwheel" / "index.html").write_text(json.dumps(page))


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    index = tmp_path / "index"
    shutil.copytree(RECORDED, index)
    _cibuildwheel(index)
    return index


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The checkout's data files, matrix and constraints, as the command reads and writes them."""
    copy = tmp_path / "root"
    shutil.copytree(REPO / "src/wheelfactory/data", copy / "src/wheelfactory/data")
    for name in ("matrix.yaml", "matrix-offline.yaml", "constraints.txt"):
        shutil.copy(REPO / name, copy / name)
    return copy


def test_check_on_a_recorded_index_names_the_new_toolkit_torch_and_python(
    recorded: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(functools.partial(PEP691, directory=str(recorded))) as url:  # type: ignore[arg-type]
        status = main(["--root", str(root), "facts", "--check", "--index", url])
        said = capsys.readouterr()
    assert status == 1
    # The lines it adds and removes, file by file (the context around them moves with the data files' comments).
    assert _changed(said.out.replace(url, "INDEX/")) == _changed(EXPECTED.read_text(encoding="utf-8"))
    out = said.err
    assert (
        "read: torch 2.16 built for CUDA 13.4 (matrix.yaml): torch-2.16.0-cp313-cp313-manylinux_2_28_x86_64.whl "
        "METADATA (PEP 658)" in out
    )
    assert (
        "read: torch 2.16's CPythons 3.12, 3.13, 3.14, 3.15, 3.16 (matrix.yaml): the file names of torch 2.16.0's "
        "18 wheels on the index" in out
    )
    assert "to fill by a person: CUDA 13.6 driver (toolkits.yaml)" in out
    assert "run `nox -s facts -- --write`" in out
    # Nothing was written: --check only says.
    assert (root / "matrix.yaml").read_text() == (REPO / "matrix.yaml").read_text()


def _nothing_new(recorded: Path) -> None:
    """The recorded index without its CUDA 13.6, torch 2.16 and CPython 3.16."""
    text = (recorded / "nvidia-cuda-nvcc/index.html").read_text()
    (recorded / "nvidia-cuda-nvcc/index.html").write_text(text.replace("13.6.10", "13.5.37"))
    _torch_files(recorded, lambda name: "-2.16.0-" not in name)
    toml = recorded / "files/cibuildwheel-4.3.3-py3-none-any.whl"
    with zipfile.ZipFile(toml, "w") as whl:
        whl.writestr(
            "cibuildwheel/resources/build-platforms.toml", '"cp315-manylinux_x86_64" "cp315-manylinux_aarch64"'
        )


def test_the_data_files_are_not_behind_the_recorded_index_once_it_has_nothing_new(
    recorded: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _nothing_new(recorded)
    with serving(functools.partial(PEP691, directory=str(recorded))) as url:  # type: ignore[arg-type]
        assert main(["--root", str(root), "facts", "--check", "--index", url]) == 0
    assert "up to date" in capsys.readouterr().err


def _torch_files(index: Path, kept: Callable[[str], bool]) -> None:
    """The recorded torch page with only the files whose names `kept` keeps."""
    page = json.loads((index / "torch/index.html").read_text())
    page["files"] = [entry for entry in page["files"] if kept(entry["filename"])]
    (index / "torch/index.html").write_text(json.dumps(page))


def test_a_train_entry_whose_pythons_are_behind_the_index_is_reported_and_a_platform_that_differs_gets_its_own(
    recorded: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch 2.15.0's cp315 wheels are PyPI's (2026-11-28): a matrix that lists 2.15 without 3.15 is behind. With
    the aarch64 cp315 wheel gone from the index, the entry lists each platform's own."""
    _nothing_new(recorded)
    matrix = root / "matrix.yaml"
    recorded_train = '{release: "2.15", cuda: "13.2", pythons: ["3.11", "3.12", "3.13", "3.14", "3.15"]}'
    without = recorded_train.replace(', "3.15"]', "]")
    assert recorded_train in matrix.read_text()
    matrix.write_text(matrix.read_text().replace(recorded_train, without))
    with serving(functools.partial(PEP691, directory=str(recorded))) as url:  # type: ignore[arg-type]
        assert main(["--root", str(root), "facts", "--check", "--index", url]) == 1
        behind = capsys.readouterr()
        _torch_files(recorded, lambda name: name != "torch-2.15.0-cp315-cp315-manylinux_2_28_aarch64.whl")
        assert main(["--root", str(root), "facts", "--write", "--index", url]) == 0
    assert _changed(behind.out) == [
        "--- a/matrix.yaml",
        "+++ b/matrix.yaml",
        f"-      - {without}",
        f"+      - {recorded_train}",
    ]
    assert "read: torch 2.15's CPythons 3.11, 3.12, 3.13, 3.14, 3.15 (matrix.yaml): the file names of" in behind.err
    train = yaml.safe_load(matrix.read_text())["cuda"][2]["torch"]
    assert train[0]["pythons"] == {
        "linux-aarch64": ["3.11", "3.12", "3.13", "3.14"],
        "linux-x86_64": ["3.11", "3.12", "3.13", "3.14", "3.15"],
        "windows-amd64": ["3.11", "3.12", "3.13", "3.14", "3.15"],
    }
    assert train[1]["pythons"] == ["3.10", "3.11", "3.12", "3.13", "3.14"]  # 2.14: cp314t is no CPython 3.14 build
    torch = load_matrix(matrix, root).value.cuda[2].torch[0]  # what it wrote, the loader takes
    assert not torch.has_wheel("3.15", "linux-aarch64") and torch.has_wheel("3.15", "linux-x86_64")


def test_the_pin_rule_gives_the_versions_recorded_by_hand_for_13_2() -> None:
    """13.2's component versions were read by hand from cuda-toolkit 13.2.0 to 13.2.2 (cuda_components.yaml):
    the rule the command applies to their pins gives the same specifiers."""

    def spec(pins: tuple[str, ...], others: tuple[str, ...] = ()) -> str:
        return specifier("13.2", [Version(v) for v in pins], [Version(v) for v in others])

    assert spec(("13.3.0.5", "13.4.1.3"), ("13.1.0.3", "13.5.1.27")) == ">=13.3.0.5,<=13.4.1.3"
    assert spec(("12.7.9.17", "12.7.10.12"), ("12.8.1.7",)) == ">=12.7.9.17,<=12.7.10.12"
    assert spec(("12.2.0.37", "12.2.0.57"), ("12.0.0.15", "12.3.0.2")) == "==12.2.0.*"
    assert spec(("13.2.51", "13.2.86"), ("13.0.88", "13.3.73")) == "==13.2.*"
    # CCCL of toolkit 13.3 is 13.3.3.x, of 13.4 13.3.4.x (cuda-toolkit 13.3.1 and 13.4.3 on PyPI):
    assert specifier("13.3", [Version("13.3.3.3.1")], [Version("13.3.4.3.1")]) == "==13.3.3.*"


@pytest.mark.parametrize("release", sorted(BY_HAND))
def test_the_toolkits_the_command_wrote_hold_what_was_read_by_hand(release: str) -> None:
    ptx_isa, gcc, msvc, archs = BY_HAND[release]
    entry = toolkit_table().releases[release]
    assert (entry.ptx_isa, entry.gcc, entry.msvc, list(entry.archs)) == (ptx_isa, gcc, msvc, archs)
    assert entry.driver is None and "driver" in entry.to_fill  # NVIDIA's release notes say it, no wheel does


def test_the_readers_of_the_tools_output() -> None:
    assert newest_isa("9.3\n9.4\n") == "9.4"
    header = "#if __GNUC__ > 16\n#error\n#endif\n#if _MSC_VER < 1920 || _MSC_VER >= 1960\n"
    assert host_limits(header) == (16, "14.59")


@pytest.mark.slow
def test_measuring_the_real_13_5_wheels_gives_the_hand_read_values() -> None:
    """Downloads nvidia-cuda-nvcc and nvidia-cuda-crt 13.5.37 (about 48 MB) from PyPI and runs their tools."""
    pypi = "https://pypi.org/simple/"
    (nvcc,) = [w for w in wheels(pypi, "nvidia-cuda-nvcc") if str(w.version) == "13.5.37" and "x86_64" in w.filename]
    measured = measure(NewToolkit("13.5", 13, pypi, {"linux-x86_64": nvcc}))
    assert (measured.ptx_isa, measured.gcc, measured.msvc, measured.archs) == BY_HAND["13.5"]


def test_the_daily_workflow_reads_with_read_access_and_proposes_without_running_the_factory() -> None:
    workflow = yaml.load((REPO / ".github/workflows/facts.yml").read_text(), Loader=yaml.BaseLoader)
    assert "schedule" in workflow["on"]
    read, propose = workflow["jobs"]["read"], workflow["jobs"]["propose"]
    assert read["permissions"] == {"contents": "read"}
    assert any("nox -s facts -- --write" in step.get("run", "") for step in read["steps"])
    assert propose["permissions"] == {"contents": "write", "pull-requests": "write"}
    commands = [
        line.strip().split()[0]
        for step in propose["steps"]
        for line in step.get("run", "").splitlines()
        if line.strip()
    ]
    assert not {"nox", "python", "pip"} & set(commands), commands


class Ranges(http.server.BaseHTTPRequestHandler):
    """A file server that answers Range requests (206), as PyPI's file host does; `ignore` makes it send the
    whole file instead (200)."""

    body = b""
    ignore = False

    def do_GET(self) -> None:
        wanted = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if wanted is None or self.ignore:
            self.send_response(200)
            part = self.body
        else:
            start, end = int(wanted.group(1)), int(wanted.group(2))
            part = self.body[start : end + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(self.body)}")
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        self.wfile.write(part)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _big_wheel(tmp_path: Path) -> bytes:
    """A wheel of some 8 MiB (incompressible filler) whose METADATA is a few bytes."""
    path = tmp_path / "big-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr("big/filler.bin", os.urandom(8 << 20))
        whl.writestr("big-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: big\nVersion: 1.0\n")
    return path.read_bytes()


def test_a_wheels_metadata_is_read_by_ranges_never_the_wheel_and_a_server_that_ignores_them_is_refused(
    tmp_path: Path,
) -> None:
    body = _big_wheel(tmp_path)
    handler = type("Served", (Ranges,), {"body": body})
    with serving(handler) as url:
        file = RemoteFile(url + "big.whl", len(body))
        stream = io.BufferedReader(file, buffer_size=1 << 16)
        with zipfile.ZipFile(stream) as z:
            assert z.read("big-1.0.dist-info/METADATA").startswith(b"Metadata-Version")
        assert file.spent < 1 << 20  # the directory and one member, not the 8 MiB
        assert remote_metadata(url + "big.whl", len(body)).endswith(b"Version: 1.0\n")
    whole = type("Whole", (Ranges,), {"body": body, "ignore": True})
    with serving(whole) as url, pytest.raises(BadBytes, match="ignores range requests"):
        remote_metadata(url + "big.whl", len(body))


def test_a_page_linking_what_is_no_url_is_refused_naming_it(tmp_path: Path) -> None:
    """A bracket where no IPv6 host can be makes urllib raise ValueError: the page is refused, not a traceback."""
    page = {"files": [{"filename": "torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl", "url": "//[x/t.whl"}]}
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "index.html").write_text(json.dumps(page))
    handler = functools.partial(PEP691, directory=str(tmp_path))
    with serving(handler) as url, pytest.raises(BadBytes, match=r"links //\[x/t\.whl, which is no URL"):  # type: ignore[arg-type]
        wheels(url, "torch")
