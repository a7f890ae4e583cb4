"""What installing a torch release brings, as pip resolves it for a wheel's Python and platform.

PyPI's torch pins NVIDIA's wheels exactly (`cuda-toolkit[cublas,…]==13.0.2`, `nvidia-cudnn-cu13==9.…`) and does
not import without them. A wheel built against torch is smoke-tested beside it: the layouts hold NVIDIA's wheels at
torch's pins (where the wheel's own floors meet them: the joint floors), and torch itself with its other
requirements comes from the requirements folder, each at the version pip resolved here, without its NVIDIA ones.
pip resolves without downloading (`install --dry-run --report`), from the index pip is configured with.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .. import host
from ..binaries.wheelfile import WheelName, cpython_tag
from ..errors import ToolFailure
from ..progress import step
from ..untrusted.shown import shown

# NVIDIA's meta-package of the toolkit's wheels (torch requires it with extras, each extra pinning nvidia-* wheels).
TOOLKIT_META = "cuda-toolkit"
# pip's report of a torch install lists a few dozen distributions; far more is not a report of one.
_MAX_REPORT_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class TorchInstall:
    """The distributions pip installs for a torch requirement: NVIDIA's (their wheels hold CUDA's libraries, for the
    layouts) and the others (torch itself among them), each name -> version."""

    nvidia: dict[str, str]
    others: dict[str, str]

    def pins(self) -> list[str]:
        return [f"{name}=={version}" for name, version in sorted(self.nvidia.items())]

    def other_pins(self) -> list[str]:
        return [f"{name}=={version}" for name, version in sorted(self.others.items())]


def is_nvidia(name: str) -> bool:
    """Whether a distribution is one of NVIDIA's CUDA wheels (or their meta-package), which the layouts hold."""
    canonical = canonicalize_name(name)
    return canonical.startswith("nvidia-") or canonical == TOOLKIT_META


def torch_install(requirement: str, python: str, wheel: WheelName, platform_tags: list[str]) -> TorchInstall:
    """What pip installs for `requirement` (torch==2.14.*) on CPython `python` and the wheel's platform
    (`platform_tags`, the ones such a machine installs)."""
    with tempfile.TemporaryDirectory(prefix="torch-install-") as scratch:
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        command += ["--disable-pip-version-check", "--report", "-", "--target", scratch, "--only-binary", ":all:"]
        command += ["--python-version", python, "--implementation", "cp"]
        command += ["--abi", cpython_tag(python), "--abi", "abi3", "--abi", "none"]
        command += [arg for tag in platform_tags for arg in ("--platform", tag)]
        with step(f"resolve what installing {requirement} brings on Python {python} ({wheel.platform_tag})"):
            done = host.run([*command, requirement], f"pip resolving {requirement}", check=False)
    if done.returncode != 0:
        raise ToolFailure(f"cannot resolve {requirement} for Python {python}: {host.tail(done.stderr, 6)}")
    return _from_report(done.stdout, requirement)


def _from_report(report: str, requirement: str) -> TorchInstall:
    """The distributions of pip's installation report (JSON), each name checked and its version a version."""
    if len(report) > _MAX_REPORT_BYTES:
        raise ToolFailure(f"pip's report for {requirement} is {len(report)} bytes — not a report of one install")
    try:
        listed = json.loads(report)["install"]
        found = {str(item["metadata"]["name"]): str(item["metadata"]["version"]) for item in listed}
    except (ValueError, KeyError, TypeError):
        raise ToolFailure(f"pip's report for {requirement} is not one pip writes") from None
    nvidia: dict[str, str] = {}
    others: dict[str, str] = {}
    for name, version in found.items():
        try:
            Version(version)
            canonical = str(canonicalize_name(name, validate=True))
        except (InvalidVersion, ValueError):
            raise ToolFailure(f"pip's report for {requirement} names {shown(name)} {shown(version)}") from None
        (nvidia if is_nvidia(canonical) else others)[canonical] = version
    if "torch" not in others:
        raise ToolFailure(f"pip's resolution of {requirement} installs no torch")
    return TorchInstall(nvidia, others)
