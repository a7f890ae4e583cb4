"""What a platform object answers: the questions whose answers differ by operating system."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar, Literal

from ..components import OS, Layout, Platform, platforms
from ..plan import Variant
from ..toolkit.buildenv import cibuildwheel_value

SmokeMachine = Literal["container", "host"]


class BuildPlatform(ABC):
    """What one operating system does its own way (see the module's docstring)."""

    os: ClassVar[OS]
    # Where tiers 1 and 2 run: a fresh container of the build image, or the host itself.
    smoke_machine: ClassVar[SmokeMachine]
    # Whether its builds go through the compiler cache.
    caches_compiles: ClassVar[bool]
    # Whether the repair points each binary's RPATH at NVIDIA's wheels (else its loader adds DLL directories).
    sets_rpath: ClassVar[bool]

    def names(self, variant: Variant) -> list[str]:
        """The variant's matrix platforms of this OS, in the matrix's order."""
        return [name for name in variant.platforms() if platforms()[name].os == self.os]

    @abstractmethod
    def pip_platform_tags(self, arch: str) -> list[str]:
        """Every platform tag NVIDIA's wheels use for this OS and architecture, newest first."""

    # ---------------------------------------------------------------------------------------------- the build

    def tag_problems(self, platform_tag: str) -> list[str]:
        """What is wrong with a repaired wheel's platform tag."""
        return []

    def loader_problems(self, wheel: Path, variant: Variant) -> list[str]:
        """What the repaired wheel lacks of what finds NVIDIA's libraries at import, beyond its RPATHs."""
        return []

    @abstractmethod
    def environment(self, variant: Variant, platform: str) -> dict[str, str]:
        """The variables of the variant's build on matrix platform `platform`, in the order they may refer to each
        other; values are shell words for cibuildwheel."""

    @abstractmethod
    def repair_command(self, variant: Variant) -> str:
        """cibuildwheel's repair-wheel-command: the OS's repair tool, grafting nothing of CUDA's or the driver's."""

    @abstractmethod
    def repair_tool(self, log: str) -> str | None:
        """The repair tool and its version ("auditwheel 6.8.2"), as the build's log (its text) or this host says."""

    def cibuildwheel_options(self, variant: Variant) -> dict[str, object] | None:
        """The variant's [tool.cibuildwheel.<os>] table, as templates/pyproject.toml.j2 renders it; None where the
        variant builds nothing for this OS."""
        names = self.names(variant)
        if not names:
            return None
        # The environment of the first in the matrix's default order; the others' tables override what differs.
        first = next(name for name in variant.platforms_defaults_first() if name in names)
        return {
            "archs": [platforms()[n].cibw_arch for n in names],
            "repair": self.repair_command(variant),
            "environment": {k: cibuildwheel_value(v) for k, v in self.environment(variant, first).items()},
            **self.more_cibuildwheel_options(variant, names),
        }

    def more_cibuildwheel_options(self, variant: Variant, names: list[str]) -> dict[str, object]:
        """What this OS's table holds besides archs, repair and environment."""
        return {}

    @abstractmethod
    def build_run(
        self, variant: Variant, info: Platform, image: str | None, staged: Path
    ) -> tuple[dict[str, str], str | None]:
        """What a cibuildwheel run on this OS adds to its environment, and the host compiler it sets up for nvcc
        where the OS decides it here (None where the build's own log says)."""

    # ---------------------------------------------------------------------------------------------- the toolkit

    def nvcc_source_refused(self, source: str) -> str | None:
        """Why nvcc cannot come from `source` on this OS; None where it can."""
        return None

    @abstractmethod
    def lay_out_libraries(self, site: Path, layout: Layout, lib: Path) -> None:
        """A component's libraries put where the CUDA_HOME's linker looks (`lib`), from the unpacked wheels."""

    @abstractmethod
    def finish_libraries(self, prefix: Path, lib: Path) -> None:
        """What the CUDA_HOME's library folder needs once every component is in it."""

    @abstractmethod
    def driver_stub(self, prefix: Path, arch: str) -> str:
        """What a build links -lcuda against without a driver, made in `prefix`; says where it came from."""

    @abstractmethod
    def install_nvcc(self, prefix: Path, nvcc: Path) -> Path:
        """Put the real nvcc (`nvcc`, bin/'s) where it runs beside its profile; the folder it is in."""
