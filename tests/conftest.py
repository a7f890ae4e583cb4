"""Shared fixtures. Tests that need Docker fail under CI=true when it is missing, and skip elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from wheelfactory.plan import copy_inputs, make_plan

REPO = Path(__file__).resolve().parent.parent
OFFLINE_IMAGE = "manylinux-offline:latest"
# The matrix whose toolkits have an nvcc source this host reaches (Debian's packages); with the real manylinux
# images (a host that reaches their registry and NVIDIA's servers) the project's own matrix.yaml is built.
OFFLINE_MATRIX = "matrix-offline.yaml"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A scratch copy of the project's inputs: matrix.yaml, recipes/ and templates/."""
    return copy_inputs(REPO, tmp_path / "project")


def docker_available() -> str | None:
    """None when a Docker engine answers, else why not."""
    if shutil.which("docker") is None:
        return "the docker client is not installed"
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"no Docker engine answers: {probe.stderr.strip()[:200]}"
    return None


@pytest.fixture(scope="session")
def docker() -> None:
    why = docker_available()
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"Docker is required under CI=true: {why}")
    pytest.skip(f"needs Docker: {why}")


def _local(image: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False).returncode == 0


@pytest.fixture(scope="session")
def build_image(docker: None) -> str:
    """The build image: WHEELFACTORY_TEST_IMAGE, else the offline one when built (`nox -s image`, as CI here
    does), else the matrix's manylinux image pulled from its registry."""
    image = os.environ.get("WHEELFACTORY_TEST_IMAGE")
    if image is None:
        if _local(OFFLINE_IMAGE):
            return OFFLINE_IMAGE
        image = next(v for v in make_plan(REPO).variants if v.major == 12).cuda.platforms["linux-x86_64"].image
        assert image is not None
    if not _local(image) and subprocess.run(["docker", "pull", image], capture_output=True, check=False).returncode:
        message = f"the build image {image} cannot be had — run `nox -s image` first on a host without registry access"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return image


def matrix_for(root: Path, image: str) -> Path:
    """The matrix a test builds with `image`: toolkits with an offline nvcc source in the offline image."""
    return root / (OFFLINE_MATRIX if image == OFFLINE_IMAGE else "matrix.yaml")
