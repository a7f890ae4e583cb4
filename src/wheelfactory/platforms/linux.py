"""Linux: wheels built in a manylinux container (another machine's under QEMU), repaired by auditwheel, smoke-tested
in a fresh container of the build image."""

from __future__ import annotations

import re
import shlex
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from .. import host
from ..components import OS, Layout, Platform, platforms, toolkit_table
from ..declared import excluded_libraries
from ..errors import ToolFailure
from ..plan import Variant
from ..toolkit.buildenv import (
    CACHED_COMPILER_DIR,
    CONTAINER_PREFIX,
    CONTAINER_SOURCES,
    HOST_COMPILER_DIR,
    PREPARE_SCRIPT,
    STATS_SCRIPT,
    architectures,
    cibuildwheel_value,
    defines,
    nvcc_flags,
    torch_index,
    with_extra_sources,
)
from ..toolkit.prefix import c_compiler_for, driver_api, relative_link
from .base import BuildPlatform, SmokeMachine

if TYPE_CHECKING:
    from auditwheel.policy import Policy


def environment(
    variant: Variant, platform: str, prefix: str = CONTAINER_PREFIX, host_compiler_dir: str = HOST_COMPILER_DIR
) -> dict[str, str]:
    """The variables of the build on `platform`, in the order they may refer to each other; values are shell
    words for cibuildwheel."""
    release = toolkit_table().releases[variant.cuda.toolkit]
    return {
        "CUDA_HOME": prefix,
        "CUDA_PATH": "$CUDA_HOME",
        "CUDAToolkit_ROOT": "$CUDA_HOME",
        "CUDACXX": "$CUDA_HOME/bin/nvcc",
        "PATH": "$CUDA_HOME/bin:$PATH",
        "LIBRARY_PATH": "$CUDA_HOME/lib64/stubs",
        "LD_LIBRARY_PATH": "$CUDA_HOME/lib64",
        # The prepare step picks the host compiler for nvcc from these.
        "WHEELFACTORY_CUDA_TOOLKIT": variant.cuda.toolkit,
        "WHEELFACTORY_GCC_MAX": str(release.gcc),
        "WHEELFACTORY_ALLOW_UNSUPPORTED_COMPILER": "1" if variant.recipe.allow_unsupported_compiler else "0",
        "NVCC_PREPEND_FLAGS": " ".join([f"-ccbin {host_compiler_dir}/g++", *nvcc_flags(variant)]),
        "CUDAHOSTCXX": f"{host_compiler_dir}/g++",
        **architectures(variant, platform),
        # The compiler cache (the host's, empty when the build runs without one): nvcc's wrapper and CC/CXX use it.
        "WHEELFACTORY_SCCACHE": "/host$WHEELFACTORY_COMPILER_CACHE",
        "SCCACHE_DIR": "/host$WHEELFACTORY_COMPILER_CACHE_DIR",
        # Its server's own output goes to a file of the build's logs. Left on the build's output, the key of nvcc's
        # whole compile came out different in the next build's container (torchsort, 2026-11-26): its front end and
        # PTX missed, where with this file every step hit (docs/recipes.md).
        "SCCACHE_ERROR_LOG": "/host$WHEELFACTORY_COMPILER_CACHE_LOG",
        # Its server stops itself after 600 s without a new request, compiles still running (sccache issue #204):
        # their clients then compile again from the start, locally and uncached (causal-conv1d's nvcc runs of
        # twelve architectures, 2026-11-28). It lives as long as the build's container.
        "SCCACHE_IDLE_TIMEOUT": "0",
        "CC": f"{CACHED_COMPILER_DIR}/cc",
        "CXX": f"{CACHED_COMPILER_DIR}/c++",
        # manylinux's gcc does not default to --as-needed; without it a module is handed every CUDA library.
        "LDFLAGS": "-Wl,--as-needed",
        # The build's macros for C and C++ compiles: setuptools reads CPPFLAGS, CMake CXXFLAGS (nvcc has them above).
        **{name: " ".join([f"${name}", *macros]) for name in ("CPPFLAGS", "CXXFLAGS") if (macros := defines(variant))},
        **torch_index(variant),
        # Last, so that they may build on the factory's ("$LDFLAGS -Wl,...", "$NVCC_GENCODE").
        **with_extra_sources(variant, CONTAINER_SOURCES),
    }


@cache
def manylinux_policy(platform_tag: str) -> Policy | None:
    """auditwheel's policy of a manylinux platform tag (None for any other tag), looked up once a tag: the tag check
    and the audit of each ELF file both ask."""
    # auditwheel comes with the build's extra (wheelfactory[build]): render, plan and image run without it.
    from auditwheel.architecture import Architecture
    from auditwheel.policy import Libc, WheelPolicies

    arch = "x86_64" if "x86_64" in platform_tag else platform_tag.rsplit("_", 1)[-1]
    try:
        return WheelPolicies(libc=Libc.GLIBC, arch=Architecture(arch)).get_policy_by_name(platform_tag)
    except (LookupError, ValueError):
        return None


# What `auditwheel --version` says, first in every repair: "auditwheel 6.8.2 installed at ... (python 3.12)".
_AUDITWHEEL_VERSION = re.compile(r"^auditwheel (\S+) installed at", re.MULTILINE)


class Linux(BuildPlatform):
    os: ClassVar[OS] = "linux"
    smoke_machine: ClassVar[SmokeMachine] = "container"
    caches_compiles: ClassVar[bool] = True
    sets_rpath: ClassVar[bool] = True

    def tag_problems(self, platform_tag: str) -> list[str]:
        if manylinux_policy(platform_tag) is None:
            return [f"platform tag {platform_tag} is not a manylinux tag — the repair did not run"]
        return []

    def pip_platform_tags(self, arch: str) -> list[str]:
        tags = [f"manylinux_2_{minor}_{arch}" for minor in range(28, 4, -1)]
        if arch == "x86_64":
            tags += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
        else:
            tags += [f"manylinux2014_{arch}"]
        return tags

    def environment(self, variant: Variant, platform: str) -> dict[str, str]:
        return environment(variant, platform)

    def repair_command(self, variant: Variant) -> str:
        """auditwheel repair that grafts ordinary libraries but never the driver or a declared CUDA library."""
        excludes = " ".join(f"--exclude {shlex.quote(p)}" for p in excluded_libraries(variant, self.os))
        # Its version first, for the SBOM (the image's auditwheel, not this host's); then the compiler cache's
        # totals, for the report.
        repair = f"auditwheel repair --only-plat -w {{dest_dir}} {excludes} {{wheel}}"
        return f"auditwheel --version && {repair} && sh {{project}}/{STATS_SCRIPT}"

    def repair_tool(self, log: str) -> str | None:
        said = sorted(set(_AUDITWHEEL_VERSION.findall(log)))
        return f"auditwheel {', '.join(said)}" if said else None

    def more_cibuildwheel_options(self, variant: Variant, names: list[str]) -> dict[str, object]:
        images = {}
        for name in names:
            option = platforms()[name].image_option
            image = variant.cuda.platforms[name].image
            if option and image:
                images[option] = image
        first, *others = [name for name in variant.platforms_defaults_first() if name in names]
        return {
            "images": images,
            "before_all": f"sh {{project}}/{PREPARE_SCRIPT}",
            # A platform whose GPU architectures differ gets them (and the recipe's variables, which may build on
            # them) again, appended to the environment for its builds.
            "overrides": {
                f"*-{platforms()[name].identifier}": {
                    k: cibuildwheel_value(v) for k, v in {**architectures(variant, name), **variant.environment}.items()
                }
                for name in others
                if variant.cuda_archs(name) != variant.cuda_archs(first)
            },
        }

    def build_run(
        self, variant: Variant, info: Platform, image: str | None, staged: Path
    ) -> tuple[dict[str, str], str | None]:
        assert image is not None and info.image_option is not None
        env = {"CIBW_CONTAINER_ENGINE": host.container_engine()}
        env["CIBW_" + info.image_option.upper().replace("-", "_")] = image
        return env, None  # the prepare step says which host compiler it chose, in the log

    def lay_out_libraries(self, site: Path, layout: Layout, lib: Path) -> None:
        if layout.lib_dir and (site / layout.lib_dir).is_dir():
            for library in sorted((site / layout.lib_dir).iterdir()):
                if library.is_file() and library.name != "__init__.py":
                    relative_link(lib / library.name, library)

    def finish_libraries(self, prefix: Path, lib: Path) -> None:
        # No wheel ships the link-time name libX.so: make it, pointing at the soname file.
        for library in sorted(lib.glob("*.so.*")):
            stem = library.name.split(".so")[0]
            if not (lib / f"{stem}.so").exists():
                relative_link(lib / f"{stem}.so", library)
        (prefix / "lib").symlink_to("lib64")  # some builds look in $CUDA_HOME/lib

    def driver_stub(self, prefix: Path, arch: str) -> str:
        stub = prefix / "lib64/stubs/libcuda.so"
        if stub.is_file():
            return "NVIDIA's stubs/libcuda.so from the nvcc source"
        compiler = c_compiler_for(arch)
        if compiler is None:
            raise ToolFailure(
                f"no C compiler for {arch} on this host to generate the driver stub — install {arch}-linux-gnu-gcc"
            )
        source = prefix / "lib64/stubs/libcuda_stub.c"
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(
            "/* Generated by wheelfactory from cuda.h: link-time stand-ins only; the real driver serves at run time. "
            "*/\n" + "".join(f"void {name}(void) {{}}\n" for name in driver_api(prefix / "include/cuda.h"))
        )
        host.run(
            [compiler, "-shared", "-fPIC", "-nostdlib", "-Wl,-soname,libcuda.so.1", "-o", stub, source],
            "compiling the driver stub",
        )
        source.unlink()
        return "stubs/libcuda.so generated from cuda.h's declarations (soname libcuda.so.1)"

    def install_nvcc(self, prefix: Path, nvcc: Path) -> Path:
        """The real nvcc lives in libexec/, and bin/nvcc is a small script that runs it through the compiler cache
        when the build provides one — every way a build calls nvcc ($CUDA_HOME/bin/nvcc, PATH, CUDACXX) goes
        through it."""
        home = prefix / "libexec"
        home.mkdir(exist_ok=True)
        nvcc.rename(home / "nvcc")
        (home / "crt").symlink_to("../bin/crt")  # nvcc finds crt/link.stub beside itself
        nvcc.write_text(files("wheelfactory.data").joinpath("nvcc-wrapper.sh").read_text(encoding="utf-8"))
        nvcc.chmod(0o755)
        return home


LINUX = Linux()
