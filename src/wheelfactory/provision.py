"""Provision a CUDA toolkit for one major from NVIDIA's pip wheels, into a reusable cache.

The wheels a variant needs (its components, the header-only pieces their headers include, and whatever those
wheels require in turn) are downloaded once; a lock file names them, so a warm run touches no network. They are
unpacked as in site-packages and given a CUDA_HOME layout: merged headers in include/, and in lib/ relative
links to every shared library plus the unversioned `libX.so` link names that no wheel ships.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .components import OS, component_table
from .errors import UserError
from .pe import def_file
from .plan import Variant
from .progress import step
from .render import requirement
from .repair import unpack


def cache_dir() -> Path:
    return Path(os.environ.get("WHEELFACTORY_CACHE", Path.home() / ".cache" / "wheelfactory")).resolve()


@dataclass(frozen=True)
class Toolkit:
    major: int
    os: OS
    prefix: Path  # CUDA_HOME: include/, lib/, bin/
    site: Path  # the unpacked wheels, as pip would lay them out in site-packages
    wheels: tuple[Path, ...]  # every wheel file, for offline installs in the smoke tiers
    downloaded: bool  # False when the cache already held everything

    @property
    def wheel_dir(self) -> Path:
        return self.wheels[0].parent


def pip_platform_tags(os_name: OS, arch: str) -> list[str]:
    """Every platform tag NVIDIA's wheels use for this OS and architecture, newest glibc first."""
    if os_name == "windows":
        return ["win_amd64"]
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(28, 4, -1)]
    if arch == "x86_64":
        tags += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    else:
        tags += [f"manylinux2014_{arch}"]
    return tags


def requirements(variant: Variant, os_name: OS) -> list[str]:
    """Requirement lines for every component the build needs: declared, optional, and their headers' needs."""
    table = component_table()
    names = table.build_closure([*variant.recipe.components, *variant.recipe.optional], variant.major)
    lines: dict[str, str] = {}
    for name in names:
        entry = table.get(name, variant.major)
        if entry is None or entry.layout(os_name) is None:
            continue  # e.g. NCCL on Windows: optional, and absent there
        line = requirement(name, variant.major, variant.cuda.toolkit)
        lines.setdefault(entry.distribution, line)
    return sorted(lines.values())


def _download(reqs: list[str], os_name: OS, arch: str, dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--only-binary=:all:",
        "--dest",
        str(dest),
        "--python-version",
        "3.12",
        "--progress-bar",
        "off",
    ]
    for tag in pip_platform_tags(os_name, arch):
        cmd += ["--platform", tag]
    result = subprocess.run([*cmd, *reqs], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-10:])
        raise UserError(f"downloading the CUDA wheels failed ({' '.join(reqs)}):\n{tail}")
    # pip names each file it saved or found already there; that list is the closure it resolved.
    files = []
    for line in result.stdout.splitlines():
        for marker in ("Saved ", "File was already downloaded "):
            if line.strip().startswith(marker):
                files.append(dest / Path(line.strip()[len(marker) :]).name)
    if not files or not all(f.is_file() for f in files):
        raise UserError(f"pip download reported no usable files for {' '.join(reqs)}:\n{result.stdout[-2000:]}")
    return sorted(set(files))


def _relative_link(link: Path, target: Path) -> None:
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))


# cublas64_12.dll -> cublas, nvrtc64_120_0.dll -> nvrtc, nvJitLink_130_0.dll -> nvJitLink, cudart64_110.dll -> cudart
_DLL_LINK_NAME = re.compile(r"^(?P<stem>.+?)(?:64)?_\d+(?:_\d+)?(?:\.alt)?\.dll$", re.IGNORECASE)


def link_name(dll: str) -> str:
    """The name a linker is given (`cublas` for -lcublas / cublas.lib) for an NVIDIA DLL."""
    match = _DLL_LINK_NAME.match(dll)
    return match["stem"] if match else dll.removesuffix(".dll")


def _msvc_lib_exe() -> str | None:
    """lib.exe of the newest Visual Studio, found with vswhere (GitHub's Windows runners keep it off PATH)."""
    vswhere = Path(os.environ.get("PROGRAMFILES(X86)", r"C:\Program Files (x86)")) / (
        "Microsoft Visual Studio/Installer/vswhere.exe"
    )
    if sys.platform != "win32" or not vswhere.is_file():
        return None
    found = subprocess.run(
        [str(vswhere), "-latest", "-products", "*", "-find", r"VC\Tools\MSVC\**\bin\Hostx64\x64\lib.exe"],
        capture_output=True,
        text=True,
        check=False,
    )
    candidates = found.stdout.split()
    return candidates[-1] if candidates else None


def import_library_tool() -> list[str] | None:
    """The command that turns X.def into X.lib: MSVC's lib.exe on Windows, mingw's dlltool elsewhere."""
    lib_exe = shutil.which("lib") or _msvc_lib_exe()
    if lib_exe:
        return [lib_exe, "/nologo", "/machine:x64", "/def:{def}", "/out:{lib}"]
    for dlltool in ("x86_64-w64-mingw32-dlltool", "dlltool"):
        if shutil.which(dlltool):
            return [dlltool, "-d", "{def}", "-l", "{lib}", "-m", "i386:x86-64"]
    return None


def _import_libraries(
    site: Path, layout_dll_dir: str, libraries: tuple[str, ...], shipped: tuple[str, ...], lib_dir: Path
) -> None:
    """Copy the .lib files a wheel ships; make the missing ones from the DLLs' export tables."""
    for rel in shipped:
        if (site / rel).is_file():
            shutil.copy2(site / rel, lib_dir / Path(rel).name)
    tool = import_library_tool()
    dll_dir = site / layout_dll_dir
    for pattern in libraries:
        for dll in sorted(dll_dir.glob(pattern)) if dll_dir.is_dir() else []:
            target = lib_dir / f"{link_name(dll.name)}.lib"
            if target.exists() or "builtins" in dll.name:
                continue
            definition = lib_dir / f"{link_name(dll.name)}.def"
            definition.write_text(def_file(dll), encoding="utf-8")
            if tool:
                cmd = [a.replace("{def}", str(definition)).replace("{lib}", str(target)) for a in tool]
                subprocess.run(cmd, check=True, capture_output=True)


def _lay_out_prefix(variant: Variant, os_name: OS, site: Path, prefix: Path) -> None:
    table = component_table()
    include = prefix / "include"
    lib = prefix / ("lib/x64" if os_name == "windows" else "lib")
    bin_dir = prefix / "bin"
    for directory in (include, lib, bin_dir):
        directory.mkdir(parents=True, exist_ok=True)
    names = table.build_closure([*variant.recipe.components, *variant.recipe.optional], variant.major)
    for name in names:
        entry = table.get(name, variant.major)
        layout = entry.layout(os_name) if entry else None
        if layout is None:
            continue
        for rel in layout.include_dirs:
            if (site / rel).is_dir():
                shutil.copytree(site / rel, include, dirs_exist_ok=True)
        if os_name == "windows":
            if layout.dll_dir:
                _import_libraries(site, layout.dll_dir, layout.libraries, layout.import_libs, lib)
            continue
        # Every tool is linked into bin/: nvcc runs cudafe++, cicc, ptxas... from PATH, and a system CUDA
        # toolkit earlier on PATH would otherwise lend its own, older ones.
        for rel in layout.tool_dirs:
            for tool in sorted((site / rel).iterdir()) if (site / rel).is_dir() else []:
                if tool.is_file() and os.access(tool, os.X_OK):
                    _relative_link(bin_dir / tool.name, tool)
        if layout.lib_dir and (site / layout.lib_dir).is_dir():
            for library in (site / layout.lib_dir).iterdir():
                if ".so" in library.name:
                    _relative_link(lib / library.name, library)
                    # No wheel ships the link-time name libX.so: make it, pointing at the soname file.
                    stem = library.name.split(".so")[0]
                    if library.name != f"{stem}.so" and not (lib / f"{stem}.so").exists():
                        _relative_link(lib / f"{stem}.so", library)


def provision(variant: Variant, os_name: OS = "linux", arch: str = "x86_64") -> Toolkit:
    reqs = requirements(variant, os_name)
    key = hashlib.sha256(json.dumps([reqs, os_name, arch]).encode()).hexdigest()[:16]
    root = cache_dir()
    wheel_dir = root / "wheels"
    lock = root / "locks" / f"cuda{variant.major}-{os_name}-{arch}-{key}.json"
    downloaded = False
    wheels: list[Path] = []
    if lock.is_file():
        wheels = [wheel_dir / name for name in json.loads(lock.read_text())["wheels"]]
    if not wheels or not all(w.is_file() for w in wheels):
        with step(f"download CUDA {variant.major} wheels: {', '.join(r.split('>')[0] for r in reqs)}"):
            wheels = _download(reqs, os_name, arch, wheel_dir)
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text(json.dumps({"requirements": reqs, "wheels": sorted(w.name for w in wheels)}, indent=1))
        downloaded = True
    toolkit_dir = root / "toolkits" / f"cuda{variant.major}-{os_name}-{arch}-{key}"
    site, prefix = toolkit_dir / "site", toolkit_dir / "prefix"
    if not (toolkit_dir / ".complete").is_file():
        with step(f"unpack the CUDA {variant.major} toolkit into {toolkit_dir}"):
            shutil.rmtree(toolkit_dir, ignore_errors=True)
            for wheel in wheels:
                unpack(wheel, site)
            _lay_out_prefix(variant, os_name, site, prefix)
            (toolkit_dir / ".complete").write_text("")
    return Toolkit(variant.major, os_name, prefix, site, tuple(sorted(wheels)), downloaded)
