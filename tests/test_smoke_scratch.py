"""Where a smoke container writes: /smoke in memory where what the smoke installs fits a share of the memory free,
else the container's own layer (smoke/scratch.py). The Docker tests of test_layouts.py run their smokes in memory
and check that /smoke is a tmpfs there."""

from __future__ import annotations

import zipfile
from pathlib import Path

from wheelfactory.smoke.scratch import MEMORY_SHARE, SMOKE_ROOT, available_memory, estimated_bytes, mount_options


def _wheel(path: Path, files: dict[str, int]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, size in files.items():
            archive.writestr(name, b"\0" * size)
    return path


def test_the_estimate_counts_each_install_pip_makes_of_what_the_wheels_unpack_to(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "pkg-1.0-py3-none-any.whl", {"pkg/__init__.py": 1000, "pkg/_core.so": 9000})
    folder = tmp_path / "requirements"
    folder.mkdir()
    _wheel(folder / "numpy-2.0-cp312-cp312-linux_x86_64.whl", {"numpy/__init__.py": 700, "numpy/core.so": 300})
    _wheel(folder / "six-1.0-py3-none-any.whl", {"six.py": 500})
    (folder / "notes.txt").write_text("not a wheel")
    # Per Python: the requirements into a venv and a --target folder, the wheel there and with its stand-in into
    # the two-variants folder; twice that for compiled modules.
    per_python = 2 * (2 * 1500 + 4 * 10000)
    assert estimated_bytes(wheel, [folder, None]) == per_python + 2 * 4 * 10000


def test_memory_is_taken_only_within_its_share_and_bounded(tmp_path: Path) -> None:
    free = 16 << 30
    assert mount_options(free // MEMORY_SHARE, free) == ["--tmpfs", f"{SMOKE_ROOT}:exec,size={2 * (free // 4)}"]
    assert mount_options(free // MEMORY_SHARE + 1, free) == []
    assert mount_options(1, None) == []


def test_the_free_memory_is_read_from_the_kernel_or_not_at_all(tmp_path: Path) -> None:
    here = available_memory()
    total = next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:"))
    assert here is not None and 0 < here <= int(total.split()[1]) * 1024
    said = tmp_path / "meminfo"
    for text in ("MemTotal: 100 kB\n", "MemAvailable: lots kB\n", "MemAvailable: 5 MB\n", "\0\xff" * 100):
        said.write_text(text, encoding="latin-1")
        assert available_memory(said) is None, text
    said.write_text("MemTotal: 100 kB\nMemAvailable:   2048 kB\n")
    assert available_memory(said) == 2 << 20
    assert available_memory(tmp_path / "absent") is None
