"""What GPUs and drivers a set of device code serves, in words and in driver versions: for the report and the
variant module, from data/gpus.yaml and data/toolkits.yaml.

SASS for sm_XY runs on GPUs of compute capability X.Y and later minors of the same X (sm_80 code runs on sm_86);
an `a`/`f` variant only on its own architecture (`f`: its family). PTX for compute_XY is compiled by the driver
for any GPU of capability XY or newer, if the driver knows the PTX's ISA: PTX needs the driver of the release
that wrote it, SASS only the major's minor-version-compatibility floor.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import get_args

from packaging.version import Version

from .binaries.fatbin import DeviceCode
from .components import OS, gpu_generations, product_table, toolkit_table


def generation(arch: int) -> str:
    """The GPU generation of an architecture number, or "sm_XY" where the table does not know it."""
    known = gpu_generations().get(arch)
    return known[0] if known else f"sm_{arch}"


def runs_on(sass: list[int], ptx: list[int]) -> str:
    """In words: the generations that run the SASS natively, and what the PTX lets newer GPUs JIT."""
    if not sass and not ptx:
        return "no compiled GPU code (what runs on the GPU is compiled at run time)"
    parts = []
    if sass:
        low, high = generation(min(sass)), generation(max(sass))
        span = low if low == high else f"{low} to {high}"
        parts.append(f"{span} natively (sm_{min(sass)}–sm_{max(sass)})" if len(sass) > 1 else f"{span} natively")
    if ptx:
        newest = max(ptx)
        newer = "newer GPUs" if sass else f"{generation(newest)} and newer GPUs"
        parts.append(f"{newer} via JIT of compute_{newest}")
    else:
        parts.append("nothing newer (no PTX)")
    return "; ".join(parts)


def how_it_runs(arch: int, sass: list[int], ptx: list[int]) -> str:
    """How a GPU of architecture `arch` runs code of those SASS and PTX architectures, in words: natively (the
    newest SASS of its own major no newer than it), by JIT (the newest PTX no newer than it), or not at all."""
    native = [sm for sm in sass if sm // 10 == arch // 10 and sm <= arch]
    if native:
        return f"natively (sm_{max(native)})"
    jit = [compute for compute in ptx if compute <= arch]
    return f"by JIT of compute_{max(jit)}" if jit else "not at all (no kernel image)"


def products_covered(sass: list[int], ptx: list[int], platform: str) -> dict[str, str]:
    """Each GPU product of `platform` (data/products.yaml) -> how code of those architectures runs on it."""
    return {
        f"{p.name} (sm_{p.arch})": how_it_runs(p.arch, sass, ptx)
        for p in product_table().products
        if platform in p.platforms
    }


@dataclass(frozen=True)
class DriverFloor:
    version: str
    why: str


def minimum_driver(major: int, ptx_isas: list[tuple[int, int]], os: OS, zstd: bool = False) -> DriverFloor:
    """The oldest driver that runs the code: the major's minor-version floor, raised to the driver of the release
    whose PTX ISA is the newest carried (a driver older than that rejects the PTX: "unsupported toolchain"), and
    to the driver that reads zstd-compressed device code where the code is stored so."""
    table = toolkit_table()
    floor = DriverFloor(table.minor_version_drivers[major].on(os), f"CUDA {major}.x minor version compatibility")
    if zstd and Version(table.zstd_driver.on(os)) > Version(floor.version):
        release = table.zstd_driver.release
        floor = DriverFloor(table.zstd_driver.on(os), f"zstd-compressed device code needs the driver of CUDA {release}")
    if not ptx_isas:
        return floor
    newest = max(ptx_isas)
    # The first release whose nvcc writes this ISA or a newer one: its driver reads the PTX.
    # A release whose driver is still to fill is passed over: a matrix cannot name it (inputs/matrix.py), so the
    # audit refuses PTX newer than a release whose driver is known.
    readers = sorted(
        (r.ptx_isa_version, name)
        for name, r in table.releases.items()
        if r.ptx_isa_version >= newest and r.driver is not None
    )
    if not readers:
        return floor
    name = readers[0][1]
    known = table.releases[name].driver
    assert known is not None
    driver = known.on(os)
    if Version(driver) <= Version(floor.version):
        return floor
    return DriverFloor(driver, f"PTX ISA {newest[0]}.{newest[1]} needs the driver of CUDA {name}")


@dataclass(frozen=True)
class CodeSummary:
    """A wheel's GPU code over all its binaries: the plain SASS architectures, the PTX ones, the newest PTX ISA,
    whether any entry is stored zstd-compressed, and the bytes of device code as stored (compressed or not)."""

    sass: list[int]
    ptx: list[int]
    newest_isa: tuple[int, int] | None
    zstd: bool = False
    stored_bytes: int = 0

    @classmethod
    def of(cls, entries: Iterable[DeviceCode]) -> CodeSummary:
        found = list(entries)
        isas = sorted({e.ptx_isa for e in found if e.kind == "ptx" and e.ptx_isa})
        return cls(
            sorted({e.arch for e in found if e.kind == "sass" and not e.suffix}),
            sorted({e.arch for e in found if e.kind == "ptx"}),
            isas[-1] if isas else None,
            any(e.compression == "zstd" for e in found),
            sum(e.stored_bytes for e in found),
        )

    @property
    def runs_on(self) -> str:
        return runs_on(self.sass, self.ptx)


def code_facts(
    major: int, sass: list[int], ptx: list[int], ptx_isa: tuple[int, int] | None, zstd: bool = False
) -> dict[str, object]:
    """What the variant module says of a wheel's GPU code: the plain SASS and PTX architectures, the newest PTX
    ISA, and per OS the oldest driver that runs it (`sass_driver`: where SASS serves the GPU, no JIT) — zstd-
    compressed code (`zstd`) raising both where its driver is newer."""
    isas = [ptx_isa] if ptx_isa else []
    return {
        "sass": sorted(set(sass)),
        "ptx": sorted(set(ptx)),
        "ptx_isa": "{}.{}".format(*ptx_isa) if ptx_isa else None,
        "minimum_driver": {os: minimum_driver(major, isas, os, zstd).version for os in get_args(OS)},
        "sass_driver": {os: minimum_driver(major, [], os, zstd).version for os in get_args(OS)},
    }
