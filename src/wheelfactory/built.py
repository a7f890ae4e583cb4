"""The value that flows from build to dist/: one wheel, what it is, where it came from, and what each stage
(repair, audit, smoke) learned of it. docs/architecture.md has the picture."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .binaries.wheelfile import Binary, WheelName
from .plan import Cell, Variant
from .toolkit.provision import Toolkit


@dataclass(frozen=True)
class RpathChange:
    member: str
    before: tuple[str, ...]
    after: tuple[str, ...]


@dataclass(frozen=True)
class BuildRun:
    """One cibuildwheel run: all the selected Pythons of a variant on one platform."""

    log: Path
    seconds: float
    host_compiler: str | None  # nvcc's host compiler, as the build container chose it (Linux)
    compiler_cache: dict[str, object] | None  # the cache's hits and misses over the run; None without one
    source_date_epoch: int | None = None  # every timestamp in the wheels (SOURCE_DATE_EPOCH)
    repair_tool: str | None = None  # "auditwheel 6.8.2", as the build ran it
    image_digest: str | None = None  # the build image's registry digest or local ID (image.image_digest)


@dataclass
class BuiltWheel:
    """One wheel on its way from cibuildwheel to dist/: what it is, where it came from, and what each stage
    learned of it."""

    variant: Variant
    cell: Cell
    path: Path  # the file as it is now: as built, then as repaired
    image: str | None  # the Linux build image, which is also the smoke tiers' clean machine; None on Windows
    toolkit: Toolkit
    run: BuildRun | None  # None for a wheel built before (`nox -s smoke`)
    binaries: dict[str, Binary] = field(default_factory=dict)  # every ELF/PE file, read once
    rpath_changes: list[RpathChange] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    # The repair's: what the build's Requires-Python said where it was not the variant's ("" for nothing)
    requires_python_was: str | None = None
    asked_pythons: tuple[str, ...] = ()  # --python: which of the Pythons a wheel serves the smoke tiers take

    @property
    def smoke_pythons(self) -> tuple[str, ...]:
        """The CPythons the smoke tiers install it on: its own, or for a wheel that serves several (abi3,
        py3-none) those asked for, else the oldest and the newest."""
        return self.cell.smoke_pythons(list(self.asked_pythons))

    @property
    def name(self) -> WheelName:
        return WheelName.of(self.path)
