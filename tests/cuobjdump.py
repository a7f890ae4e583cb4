"""NVIDIA's cuobjdump, from its pip wheel, and what it lists of a binary's device code: what the fatbin reader's
answers are checked against."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from wheelfactory.binaries.fatbin import DeviceCode
from wheelfactory.binaries.wheelfile import unpack

CUOBJDUMP = "nvidia-cuda-cuobjdump==13.2.86"
# A listed entry: "ELF file    3: device.3.sm_100a.cubin", "PTX file    1: device.1.sm_90.ptx"
_LISTED = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\w+)\.(?:cubin|ptx)$")


@pytest.fixture(scope="session")
def cuobjdump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("cuobjdump")
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest"]
    command += [str(where), "--platform", "manylinux_2_17_x86_64", "--python-version", "3.12", CUOBJDUMP]
    subprocess.run(command, check=True)
    tool = next(unpack(next(where.glob("*.whl")), where / "site").rglob("bin/cuobjdump"))
    tool.chmod(0o755)
    return tool


def listed(cuobjdump: Path, binary: Path, *, every_fatbin: bool = False) -> list[tuple[str, str]]:
    """(kind, name) of each entry, as cuobjdump lists them: cubins by their architecture (an `f` cubin as the
    plain one), PTX by the architecture it targets; with every_fatbin, the relocatable objects' too."""
    command = [cuobjdump, "--list-elf", "--list-ptx", *(["--all-fatbin"] if every_fatbin else []), binary]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = []
    for line in done.stdout.splitlines():
        match = _LISTED.match(line.strip())
        assert match, line
        found.append(("sass" if match[1] == "ELF" else "ptx", match[2]))
    return found


def as_cuobjdump_names(entries: tuple[DeviceCode, ...]) -> list[tuple[str, str]]:
    return [(e.kind, f"sm_{e.arch}{e.suffix if e.kind == 'ptx' or e.suffix == 'a' else ''}") for e in entries]


def ptx_versions(cuobjdump: Path, binary: Path) -> list[tuple[int, int]]:
    """The `.version` line of each PTX entry's text, as cuobjdump decompresses it."""
    done = subprocess.run([cuobjdump, "--dump-ptx", binary], capture_output=True, text=True, check=True)
    return [(int(a), int(b)) for a, b in re.findall(r"^\.version (\d+)\.(\d+)$", done.stdout, re.MULTILINE)]
