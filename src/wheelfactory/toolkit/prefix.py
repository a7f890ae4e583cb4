"""The files of a provisioned CUDA_HOME that no wheel ships as they are needed: relative links, real files where a
tool reads its neighbours, import libraries made from DLLs' export tables, and the driver's entry points read from
cuda.h for a stub. Shared by provision.py and the platforms' toolkit layouts (platforms/)."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from .. import host
from ..binaries.pe import def_file
from . import msvc


def relative_link(link: Path, target: Path) -> None:
    if link.is_symlink() or link.exists():
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    if os.name == "nt":  # symbolic links need a privilege Windows grants few accounts
        shutil.copy2(target, link)
    else:
        link.symlink_to(os.path.relpath(target, link.parent))


def real_file(path: Path) -> None:
    """Turn a link into a real file (a hard link where possible): nvcc reads the nvcc.profile beside its own path."""
    source = path.resolve()
    path.unlink()
    host.link_or_copy(source, path)


# cublas64_12.dll -> cublas, nvrtc64_120_0.dll -> nvrtc, nvJitLink_130_0.dll -> nvJitLink, cudart64_110.dll -> cudart
_DLL_LINK_NAME = re.compile(r"^(?P<stem>.+?)(?:64)?_\d+(?:_\d+)?(?:\.alt)?\.dll$", re.IGNORECASE)


def link_name(dll: str) -> str:
    """The name a linker is given (`cublas` for -lcublas / cublas.lib) for an NVIDIA DLL."""
    match = _DLL_LINK_NAME.match(dll)
    return match["stem"] if match else dll.removesuffix(".dll")


def _msvc_lib_exe() -> str | None:
    """lib.exe of the newest Visual Studio, found with vswhere (GitHub's Windows runners keep it off PATH)."""
    vswhere = msvc.vswhere()
    if sys.platform != "win32" or not vswhere.is_file():
        return None
    found = host.run(
        [vswhere, "-latest", "-products", "*", "-find", r"VC\Tools\MSVC\**\bin\Hostx64\x64\lib.exe"],
        "looking for Visual Studio's lib.exe",
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


def import_library(definition: Path, target: Path) -> None:
    tool = import_library_tool()
    if tool:
        cmd = [a.replace("{def}", str(definition)).replace("{lib}", str(target)) for a in tool]
        host.run(cmd, f"making the import library {target.name}")


def import_libraries(
    site: Path, layout_dll_dir: str, libraries: tuple[str, ...], shipped: tuple[str, ...], lib_dir: Path
) -> None:
    """Copy the .lib files a wheel ships; make the missing ones from the DLLs' export tables."""
    for rel in shipped:
        if (site / rel).is_file():
            shutil.copy2(site / rel, lib_dir / Path(rel).name)
    dll_dir = site / layout_dll_dir
    for pattern in libraries:
        for dll in sorted(dll_dir.glob(pattern)) if dll_dir.is_dir() else []:
            target = lib_dir / f"{link_name(dll.name)}.lib"
            if target.exists() or "builtins" in dll.name:
                continue
            definition = lib_dir / f"{link_name(dll.name)}.def"
            definition.write_text(def_file(dll), encoding="utf-8")
            import_library(definition, target)


# `CUresult CUDAAPI cuInit(`, `#define cuMemAlloc cuMemAlloc_v2`, `__CUDA_API_PTDS(cuMemcpyHtoD_v2)`
_DECLARED = re.compile(r"\b(cu[A-Z]\w*)\s*\(")


_RENAMED = re.compile(r"^\s*#\s*define\s+cu[A-Z]\w*\s+(cu[A-Z]\w*)\s*$", re.MULTILINE)


_PER_THREAD = re.compile(r"__CUDA_API_PT(DS|SZ)\((cu[A-Z]\w*)\)")


def driver_api(cuda_h: Path) -> list[str]:
    """Every driver entry point cuda.h names: plain, versioned (`_v2`) and per-thread-stream (`_ptds`, `_ptsz`)."""
    text = cuda_h.read_text(encoding="utf-8", errors="replace")
    names = set(_DECLARED.findall(text)) | set(_RENAMED.findall(text))
    for kind, name in _PER_THREAD.findall(text):
        names.update((name, f"{name}_pt{kind.lower()}"))
    return sorted(names)


def c_compiler_for(arch: str) -> str | None:
    if arch == host.machine():
        return shutil.which("cc") or shutil.which("gcc")
    return shutil.which(f"{arch}-linux-gnu-gcc")
