"""python -m cuprobe: which CUDA libraries load and from where, driver and runtime versions, and the devices.

Exit status 0 when every required CUDA library loaded (a missing GPU or driver is reported, not an error),
1 when a required library could not be loaded. Never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from . import CUDA_MAJOR, DIST_NAME, __version__, _driver
from ._cuda_variant import COMPONENTS, CUDA_TOOLKIT, FOUND, OPTIONAL


def _loaded_from(libraries: tuple[str, ...]) -> str:
    """Where the process mapped the first of `libraries` from (Linux); '' elsewhere."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "/" in line}
    except OSError:
        return ""
    stems = [lib.split(".so")[0] + ".so" for lib in libraries]
    for path in sorted(paths):
        name = path.rsplit("/", 1)[-1]
        if any(name.startswith(stem) for stem in stems):
            return path
    return ""


def _runtime() -> str:
    from . import runtime

    v = runtime.versions()["runtime"]
    return f"{v // 1000}.{v % 1000 // 10}"


def _blas() -> str:
    from . import blas

    v = blas.version()
    return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"


def _nvrtc() -> str:
    from . import kernels

    return "{}.{}".format(*kernels.nvrtc_version())


def _nccl() -> str:
    from .cuda import nccl

    v = nccl.version()
    return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"


PROBES: dict[str, Callable[[], str]] = {"cudart": _runtime, "cublas": _blas, "nvrtc": _nvrtc, "nccl": _nccl}


def main() -> int:
    print(f"cuprobe {__version__} — {DIST_NAME}, built for CUDA {CUDA_MAJOR}.x (toolkit {CUDA_TOOLKIT})")
    print("\nCUDA libraries:")
    missing_required = []
    for component, probe in PROBES.items():
        spec = COMPONENTS.get(component) or OPTIONAL.get(component)
        if spec is None:
            continue
        kind = "optional" if component in OPTIONAL else "required"
        try:
            version = probe()
        except ImportError as exc:
            print(f"  {component:<7} not loaded ({kind}): {exc}")
            if kind == "required":
                missing_required.append(component)
            continue
        libraries = spec["linux"][1] if spec["linux"] else ()
        where = _loaded_from(libraries)
        print(f"  {component:<7} {version:<10} {where or 'loaded'}")
        # Why from there: the variant module's search (beside the package, or another sys.path entry).
        why = FOUND.get(libraries[0], (None, ""))[1] if libraries else ""
        if where and not why:
            why = "not from a pip wheel: the system's loader found it"
        if why:
            print(f"  {'':<7} {'':<10} {why}")

    print("\nDevice code:")
    try:
        from . import device

        major, minor = device.built_for()
        print(f"  cuprobe._device: kernels compiled by nvcc against CUDA {major}.{minor}")
    except ImportError as exc:
        print(f"  not loaded: {exc}")

    print("\nDriver:")
    try:
        v = _driver.version()
        print(f"  {_driver.LIBRARY} {v // 1000}.{v % 1000 // 10} ({_loaded_from((_driver.LIBRARY,)) or 'loaded'})")
    except (_driver.NoDriver, RuntimeError) as exc:
        print(f"  {exc}")

    print("\nDevices:")
    if "cudart" in missing_required:
        print("  unknown: the CUDA runtime did not load")
    else:
        from . import runtime

        found = runtime.devices()
        if found["error"]:
            print(f"  none: {found['error']}")
        for device in found["devices"]:  # type: ignore[union-attr]
            total = device["total_bytes"] / 2**30
            print(f"  [{device['index']}] {device['name']} (sm_{device['major']}{device['minor']}, {total:.0f} GiB)")
    if missing_required:
        print(f"\nMissing required CUDA libraries: {', '.join(missing_required)} — pip install {DIST_NAME}")
        return 1
    return 0


sys.exit(main())
