"""Windows import libraries are named as linkers look for them; NVIDIA's wheels fetched and unpacked side by side
end as they would one after another (the toolkit itself: test_toolkit.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from wheelfactory import host
from wheelfactory.binaries.wheelfile import unpack
from wheelfactory.plan import copy_inputs, make_plan
from wheelfactory.toolkit.prefix import link_name
from wheelfactory.toolkit.provision import download_wheels, requirements
from wheelfactory.untrusted import archives
from wheelfactory.untrusted.cache import reusable

from .conftest import REPO


@pytest.mark.parametrize(
    ("dll", "name"),
    [
        ("cudart64_110.dll", "cudart"),
        ("cublas64_12.dll", "cublas"),
        ("cublasLt64_13.dll", "cublasLt"),
        ("nvrtc64_120_0.dll", "nvrtc"),
        ("nvJitLink_130_0.dll", "nvJitLink"),
        ("curand64_10.dll", "curand"),
        ("nvrtc64_120_0.alt.dll", "nvrtc"),
    ],
)
def test_import_library_names_are_the_link_names(dll: str, name: str) -> None:
    assert link_name(dll) == name


# The toolkit's smallest wheels (a few MB): headers, libraries, a static library, all under nvidia/cu13/.
SMALL = {"nvidia-cuda-runtime", "nvidia-cuda-crt", "nvidia-cuda-profiler-api", "nvidia-nvtx"}


def _tree(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry under `root`: a file's mode and sha256, a link's target, a folder."""
    found = {}
    for path in sorted(root.rglob("*")):
        kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "file"
        digest = os.readlink(path) if kind == "link" else archives.sha256(path) if kind == "file" else ""
        found[path.relative_to(root).as_posix()] = (kind, path.lstat().st_mode, digest)
    return found


@pytest.mark.slow
def test_nvidia_wheels_unpacked_together_are_file_for_file_as_unpacked_one_after_another(tmp_path: Path) -> None:
    # CUDA 13's wheels share nvidia/cu13/ (include/, lib/, their __init__.py): NVIDIA's own, fetched as provisioning
    # fetches them (pip's resolver, the downloads side by side, each checked against the index's sha256).
    project = copy_inputs(REPO, tmp_path / "project")
    variant = next(v for v in make_plan(project, project / "matrix-offline.yaml").variants if v.major == 13)
    wanted = [r for r in requirements(variant, "linux", "x86_64") if Requirement(r).name in SMALL]
    with host.cache_lock("wheels"):
        wheels = download_wheels(wanted, "linux", "x86_64", host.cache_dir() / "wheels", ["nvidia-nvjitlink==13.0.88"])
    assert len(wheels) == len(SMALL) and all(reusable(w) for w in wheels)
    for wheel in wheels:
        unpack(wheel, tmp_path / "one-after-another")
    archives.unpack_together(wheels, tmp_path / "together")
    one_after_another = _tree(tmp_path / "one-after-another")
    assert _tree(tmp_path / "together") == one_after_another
    assert sum(kind == "file" for kind, _, _ in one_after_another.values()) > 150
