"""Windows: wheels built on the runner itself with the MSVC toolset nvcc accepts (or in a Windows build container
on a Windows Docker host), repaired by delvewheel, smoke-tested on the runner."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import ClassVar

from ..binaries.wheelfile import read_member
from ..components import OS, Layout, Platform, toolkit_table
from ..declared import VARIANT_MODULE, excluded_libraries
from ..plan import Variant
from ..toolkit import msvc
from ..toolkit.buildenv import (
    EXTRA_SOURCES_DIR,
    architectures,
    defines,
    nvcc_flags,
    torch_index,
    with_extra_sources,
)
from ..toolkit.prefix import driver_api, import_libraries, import_library
from .base import BuildPlatform, SmokeMachine

# Where the Windows build container sees the project and the factory's cache.
CONTAINER_PROJECT = "C:\\project"
CONTAINER_CACHE = "C:\\wheelfactory-cache"


def container_command(engine: str, image: str, root: Path, cache: Path, cuda: int, args: list[str]) -> list[str]:
    """The same build, run by nox inside a Windows build container (docker/windows/Dockerfile) on a Windows
    Docker host: the project and the factory's cache are mounted, so wheels land in the project's dist/ and
    downloads stay warm between runs."""
    command = [
        engine,
        "run",
        "--rm",
        "--volume",
        f"{root}:{CONTAINER_PROJECT}",
        "--volume",
        f"{cache}:{CONTAINER_CACHE}",
    ]
    command += ["--env", f"WHEELFACTORY_CACHE={CONTAINER_CACHE}"]
    command += ["--env", f"CIBW_CACHE_PATH={CONTAINER_CACHE}\\cibuildwheel"]  # the CPythons cibuildwheel fetches
    command += ["--workdir", CONTAINER_PROJECT, image]
    return [*command, "python", "-m", "nox", "-s", f"build-cuda{cuda}", "--", *args]


class Windows(BuildPlatform):
    os: ClassVar[OS] = "windows"
    smoke_machine: ClassVar[SmokeMachine] = "host"
    caches_compiles: ClassVar[bool] = False
    sets_rpath: ClassVar[bool] = False

    def loader_problems(self, wheel: Path, variant: Variant) -> list[str]:
        """Each package's variant module adds NVIDIA's DLL directories, imported before its extensions."""
        problems = []
        for package in variant.packages:
            folder = package.replace(".", "/")
            loader = read_member(wheel, f"{folder}/{VARIANT_MODULE}") or ""
            init = read_member(wheel, f"{folder}/__init__.py") or ""
            if "_add_dll_directories" not in loader:
                problems.append(
                    f"no DLL-path loader ({VARIANT_MODULE}) in {package}: its extensions cannot find NVIDIA's DLLs"
                )
            elif "_cuda_variant" not in init:
                problems.append(f"{folder}/__init__.py does not import {VARIANT_MODULE} before its extensions")
        return problems

    def pip_platform_tags(self, arch: str) -> list[str]:
        return ["win_amd64"]

    def environment(self, variant: Variant, platform: str) -> dict[str, str]:
        """On a Windows runner the prefix is a host path; nvcc finds cl.exe from the Visual Studio environment."""
        flags = " ".join(nvcc_flags(variant))
        return {
            "CUDA_HOME": "$WHEELFACTORY_CUDA_PREFIX",
            "CUDA_PATH": "$CUDA_HOME",
            "CUDAToolkit_ROOT": "$CUDA_HOME",
            "CUDACXX": "$CUDA_HOME/bin/nvcc.exe",
            "PATH": "$CUDA_HOME/bin;$PATH",
            **({"NVCC_PREPEND_FLAGS": flags} if flags else {}),
            # cl.exe reads its extra options from CL, whichever build system runs it.
            **({"CL": " ".join(["$CL", *macros])} if (macros := defines(variant)) else {}),
            **architectures(variant, platform),
            **torch_index(variant),
            **with_extra_sources(variant, None),
        }

    def repair_command(self, variant: Variant) -> str:
        """delvewheel repair that vendors ordinary DLLs but never nvcuda.dll or a declared CUDA DLL (';' on
        Windows)."""
        excluded = ";".join(excluded_libraries(variant, self.os))
        return f'delvewheel repair --exclude "{excluded}" -w {{dest_dir}} {{wheel}}'

    def repair_tool(self, log: str) -> str | None:
        """The delvewheel the build ran is the one beside the engine on this host (wheelfactory[build]'s)."""
        try:
            return f"delvewheel {metadata.version('delvewheel')}"
        except metadata.PackageNotFoundError:
            return None

    def build_run(
        self, variant: Variant, info: Platform, image: str | None, staged: Path
    ) -> tuple[dict[str, str], str | None]:
        """On the Windows host itself: the MSVC toolset this release's nvcc accepts, set up by vcvarsall.bat."""
        env = {"WHEELFACTORY_SOURCES": str((staged / EXTRA_SOURCES_DIR).resolve())}
        release = toolkit_table().releases[variant.cuda.toolkit]
        chosen = msvc.environment(variant.cuda.toolkit, release.msvc, variant.recipe.allow_unsupported_compiler)
        return {**env, **chosen.environment}, f"MSVC {chosen.toolset}"

    def nvcc_source_refused(self, source: str) -> str | None:
        return "Debian's packages are Linux only" if source == "debian" else None

    def lay_out_libraries(self, site: Path, layout: Layout, lib: Path) -> None:
        if layout.dll_dir:
            import_libraries(site, layout.dll_dir, layout.libraries, layout.import_libs, lib)

    def driver_stub(self, prefix: Path, arch: str) -> str:
        target = prefix / "lib/x64/cuda.lib"
        if target.is_file():
            return "cuda.lib from the CUDA runtime wheel"
        definition = prefix / "lib/x64/cuda.def"
        definition.write_text(
            "LIBRARY nvcuda.dll\nEXPORTS\n" + "".join(f"    {n}\n" for n in driver_api(prefix / "include/cuda.h"))
        )
        import_library(definition, target)
        return "cuda.lib generated from cuda.h's declarations"

    def finish_libraries(self, prefix: Path, lib: Path) -> None:
        pass  # its import libraries are complete as each component's were made

    def install_nvcc(self, prefix: Path, nvcc: Path) -> Path:
        return prefix / "bin"  # where it is: nvcc.exe reads the profile beside it


WINDOWS = Windows()
