"""The MSVC a Windows build runs with: the newest installed toolset the CUDA release's nvcc accepts, in the
environment vcvarsall.bat sets up for it.

nvcc needs cl.exe on PATH with the INCLUDE and LIB of the same toolset: a cl.exe of one toolset with another's
STL headers fails. CUDA 11.8's host_config.h rejects the current toolset of windows-2022 (14.4x) but accepts the
14.29 (VS 2019) toolset that image also carries; `vcvarsall.bat x64 -vcvars_ver=14.29` sets that one up, and
DISTUTILS_USE_SDK makes setuptools compile host code with the same cl.exe instead of looking for its own.
Visual Studio is found through vswhere, as its own tools find it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath

from .. import host
from ..errors import ToolFailure, UserError

_TOOLSET = re.compile(r"^(\d+)\.(\d+)\.\d+$")


@dataclass(frozen=True)
class Msvc:
    toolset: str  # e.g. 14.29.30133
    environment: dict[str, str]  # what vcvarsall.bat set, and DISTUTILS_USE_SDK


def vswhere() -> Path:
    program_files = os.environ.get(
        "PROGRAMFILES(X86)",  # Windows environment names ignore case
        r"C:\Program Files (x86)",
    )
    return Path(program_files) / "Microsoft Visual Studio" / "Installer" / "vswhere.exe"


def installation() -> Path:
    """The newest Visual Studio (or Build Tools) with the x64 C++ tools."""
    command = [str(vswhere()), "-latest", "-products", "*", "-requires"]
    command += ["Microsoft.VisualStudio.Component.VC.Tools.x86.x64", "-property", "installationPath"]
    try:
        found = host.run(command, "looking for Visual Studio", check=False).stdout.strip()
    except ToolFailure:  # no vswhere.exe: no Visual Studio Installer ever ran here
        found = ""
    if not found:
        raise ToolFailure(
            "no Visual Studio with the C++ build tools on this host — install Build Tools 2022 with "
            '"Desktop development with C++" (and the MSVC v142 14.29 toolset for CUDA 11)'
        )
    return Path(found)


def toolsets(installation: Path) -> list[str]:
    """The MSVC toolsets installed (VC/Tools/MSVC/<version>), oldest first."""
    folder = installation / "VC" / "Tools" / "MSVC"
    found = [p.name for p in folder.iterdir() if p.is_dir() and _TOOLSET.match(p.name)] if folder.is_dir() else []
    return sorted(found, key=lambda name: tuple(int(part) for part in name.split(".")))


def _major_minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def choose(available: list[str], newest: str, release: str, allow_unsupported: bool, where: Path) -> str:
    """The newest toolset nvcc accepts; the newest of all when the recipe allows an unsupported compiler."""
    accepted = [t for t in available if _major_minor(t) <= _major_minor(newest)]
    if accepted:
        return accepted[-1]
    if allow_unsupported and available:
        return available[-1]
    raise UserError(
        f"nvcc {release} accepts MSVC toolsets up to {newest}; {where} has {', '.join(available) or 'none'} — "
        "add an older toolset in the Visual Studio Installer (MSVC v142, 14.29, for CUDA 11), or set "
        "allow_unsupported_compiler in the recipe"
    )


def vcvars_command(installation: Path, toolset: str) -> list[str]:
    """cmd.exe running vcvarsall.bat for that toolset, then printing the environment it made."""
    script = PureWindowsPath(installation, "VC", "Auxiliary", "Build", "vcvarsall.bat")
    version = ".".join(toolset.split(".")[:2])
    return ["cmd.exe", "/d", "/c", f'call "{script}" x64 -vcvars_ver={version} >nul && set']


def parse_set(output: str) -> dict[str, str]:
    """NAME=value lines, as cmd's `set` prints them."""
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line and not line.startswith("="))


def environment(release: str, newest: str, allow_unsupported: bool) -> Msvc:
    """The environment of the newest installed toolset CUDA `release`'s nvcc accepts (`newest` or older)."""
    where = installation()
    toolset = choose(toolsets(where), newest, release, allow_unsupported, where)
    ran = host.run(vcvars_command(where, toolset), f"setting up MSVC {toolset}", check=False)
    values = parse_set(ran.stdout)
    if ran.returncode != 0 or "INCLUDE" not in values:
        raise ToolFailure(f"vcvarsall.bat for MSVC {toolset} failed: {(ran.stdout + ran.stderr).strip()[-800:]}")
    return Msvc(toolset, {**values, "DISTUTILS_USE_SDK": "1", "MSSdk": "1"})
