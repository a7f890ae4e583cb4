"""Shared fixtures. Tests that need Docker fail under CI=true when it is missing, and skip elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from wheelfactory.plan import copy_inputs

REPO = Path(__file__).resolve().parent.parent


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
