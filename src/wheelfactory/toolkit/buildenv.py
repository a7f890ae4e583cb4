"""The environment a variant's build sees: a CUDA toolkit set up the way NVIDIA's devel images set it.

Build systems find CUDA in many ways — `$CUDA_HOME/bin/nvcc`, `nvcc` on PATH, CUDA_PATH, CMake's
FindCUDAToolkit / enable_language(CUDA) through CUDAToolkit_ROOT and CUDACXX — and all of them land on the
provisioned prefix. `-lcuda` resolves against lib64/stubs (LIBRARY_PATH) on a machine without a driver;
LD_LIBRARY_PATH serves configure steps that run a probe linked to libcudart (the audit still forbids any of it
in a wheel). nvcc (through its wrapper in the prefix) and CC/CXX go through the compiler cache. nvcc gets a
host compiler its release accepts through NVCC_PREPEND_FLAGS, which a package's own -ccbin overrides (CMake
gets the same through CUDAHOSTCXX), and -Xfatbin=-compress-all there too: compressed device code, whichever build
system runs nvcc. The GPU architectures come in the four forms builds read: CUDAARCHS and
CMAKE_CUDA_ARCHITECTURES (CMake's list), NVCC_GENCODE (nvcc's -gencode flags) and TORCH_CUDA_ARCH_LIST (torch's
cpp_extension).

This module holds the pieces every OS's build shares; each platform object (platforms/) puts its environment
together from them.
"""

from __future__ import annotations

import re

from ..inputs import PYPI
from ..plan import Variant
from ..pytorch.stable_abi import target_define

# Where the build container's prepare step (data/prepare-build.sh) puts the host compiler nvcc may use, and the
# default C/C++ compilers run through the compiler cache.
HOST_COMPILER_DIR = "/opt/wheelfactory/nvcc-host"
CACHED_COMPILER_DIR = "/opt/wheelfactory/cached"
# The provisioned prefix as the Linux build container sees it: cibuildwheel mounts the host's / at /host.
CONTAINER_PREFIX = "/host$WHEELFACTORY_CUDA_PREFIX"


# Where the staged tree holds the recipe's extra sources, a folder each; the Linux build container has the tree at
# /project (cibuildwheel's), a Windows build sets WHEELFACTORY_SOURCES to the staged folder itself.
EXTRA_SOURCES_DIR = ".wheelfactory/sources"
CONTAINER_SOURCES = f"/project/{EXTRA_SOURCES_DIR}"


# `$` that starts no variable reference: a command substitution `$(...)`, arithmetic, or a bare `$`.
_NO_VARIABLE = re.compile(r"\$(?![A-Za-z_{])")


def cibuildwheel_value(value: str) -> str:
    """`value` written for cibuildwheel's environment table, which reads each entry as NAME="value" in its
    shell-like syntax: the build gets exactly `value`, with `$NAME` / `${NAME}` references still expanded (the
    factory's variables build on each other) and nothing else — a quote cannot end the string, and `$(...)` or
    a backtick is text, not a command."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
    return _NO_VARIABLE.sub(r"\\$", escaped)


def cmake_architectures(archs: tuple[int, ...]) -> str:
    """70-real;80-real;90 — SASS for each, and PTX as well for the newest."""
    return ";".join(f"{arch}-real" if arch != archs[-1] else str(arch) for arch in archs)


def gencode_flags(archs: tuple[int, ...]) -> str:
    """nvcc's -gencode list for the same: SASS for each, and PTX as well for the newest. The PTX gets a flag of
    its own: nvcc 11 misreads the code=[sm_90,compute_90] form when it comes from NVCC_APPEND_FLAGS."""
    flags = [f"-gencode=arch=compute_{arch},code=sm_{arch}" for arch in archs]
    flags.append(f"-gencode=arch=compute_{archs[-1]},code=compute_{archs[-1]}")
    return " ".join(flags)


def torch_architectures(archs: tuple[int, ...]) -> str:
    """7.5;8.0;9.0+PTX — torch.utils.cpp_extension's TORCH_CUDA_ARCH_LIST: SASS for each, PTX for the newest."""
    return ";".join(f"{arch // 10}.{arch % 10}" + ("+PTX" if arch == archs[-1] else "") for arch in archs)


def architectures(variant: Variant, platform: str) -> dict[str, str]:
    """The variables that name the GPU architectures of the variant's build on `platform`. Without its own,
    torch's cpp_extension would compile, on a machine without a GPU, for every architecture the installed torch
    was built for."""
    archs = variant.cuda_archs(platform)
    return {
        "CUDAARCHS": cmake_architectures(archs),
        "CMAKE_CUDA_ARCHITECTURES": cmake_architectures(archs),
        "NVCC_GENCODE": gencode_flags(archs),
        "TORCH_CUDA_ARCH_LIST": torch_architectures(archs),
    }


def defines(variant: Variant) -> list[str]:
    """The macros every compile of the build is given (C, C++ and CUDA): for a build on LibTorch's stable ABI, the
    torch release it targets (TORCH_TARGET_VERSION), with which torch's headers refuse what is newer or unstable."""
    target = variant.torch_target
    return [target_define(target)] if target else []


def nvcc_flags(variant: Variant) -> list[str]:
    """What every nvcc run of the build is given besides its host compiler (NVCC_PREPEND_FLAGS, which a package's
    own flags come after): compressed device code unless the recipe opts out, a host compiler newer than the
    release accepts where the recipe allows it, and the build's macros."""
    flags = ["-Xfatbin=-compress-all"] if variant.recipe.compress_device_code else []
    flags += ["-allow-unsupported-compiler"] if variant.recipe.allow_unsupported_compiler else []
    return flags + defines(variant)


def with_extra_sources(variant: Variant, sources: str | None) -> dict[str, str]:
    """The recipe's variables, and where it declares extra sources, what hands them to CMake instead of a download
    (`sources`: the folder holding them, as the build sees it; None where the build sets it): each as
    FETCHCONTENT_SOURCE_DIR_<NAME> and CPM_<NAME>_SOURCE, FetchContent fully disconnected, CPM's cache there too.
    They come first in CMAKE_ARGS, where scikit-build-core and setup.py CMake drivers read them; the recipe's own
    CMAKE_ARGS follow."""
    names = list(variant.recipe.extra_sources)
    own = dict(variant.environment)
    if not names:
        return own
    defines = ["-DFETCHCONTENT_FULLY_DISCONNECTED=ON"]
    for name in names:
        folder = f"$WHEELFACTORY_SOURCES/{name}"
        defines += [f"-DFETCHCONTENT_SOURCE_DIR_{name.upper()}={folder}", f"-DCPM_{name}_SOURCE={folder}"]
    recipe_args = own.pop("CMAKE_ARGS", None)
    return {
        **own,
        **({"WHEELFACTORY_SOURCES": sources} if sources else {}),
        "CPM_SOURCE_CACHE": "$WHEELFACTORY_SOURCES",
        "CMAKE_ARGS": " ".join([*defines, *([recipe_args] if recipe_args else [])]),
    }


def torch_index(variant: Variant) -> dict[str, str]:
    """For a build against torch from an index other than PyPI (PyTorch's own, for CUDA 12): that index, after the
    host's extra ones, for the build's pip."""
    torch = variant.torch
    if torch is None or torch.index.rstrip("/") == PYPI.rstrip("/"):
        return {}
    return {"PIP_EXTRA_INDEX_URL": f"$PIP_EXTRA_INDEX_URL {torch.index}"}


# The build tree's scripts that run in the Linux build container (copied from wheelfactory/data by the build).

# The build tree's scripts that run in the Linux build container (copied from wheelfactory/data by the build).
PREPARE_SCRIPT = ".wheelfactory/prepare-build.sh"
STATS_SCRIPT = ".wheelfactory/compiler-cache-stats.sh"
