"""The variant module's diagnostic: which GPUs the wheel's code runs on, what this machine's GPUs and driver are,
and a line after an uncaught CUDA error that points at it."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from .loader import FOUND, _mapped, _platform, _system, no_wheel, torch_mismatch
from .variant_data import (
    COMPONENTS,
    COVERS,
    CUDA_MAJOR,
    DIST_NAME,
    GENERATIONS,
    GPU_CODE,
    JETPACK,
    JETSON_PIP_WHEELS,
    NARROWED,
    OPTIONAL,
    OTHER_VARIANTS,
    RUNS_ON,
)

# CODE_STARTS: every variant module holds what follows, as it stands.
# Per OS: the driver's library, and NVML's.
_DRIVER = {"windows": "nvcuda.dll", "linux": "libcuda.so.1"}
_NVML = {"windows": "nvml.dll", "linux": "libnvidia-ml.so.1"}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def _driver_version() -> str | None:
    """The NVIDIA driver's version, "580.95.05" (NVML, else the Linux kernel module's), or None."""
    import ctypes
    import re

    try:
        nvml = ctypes.CDLL(_NVML[_system()])
        if nvml.nvmlInit_v2() == 0:
            text = ctypes.create_string_buffer(96)
            status = nvml.nvmlSystemGetDriverVersion(text, 96)
            nvml.nvmlShutdown()
            if status == 0:
                return text.value.decode()
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as version:
            found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9.]+)", version.read())
    except OSError:
        return None
    return found.group(1) if found else None


def gpus() -> tuple[tuple[int, int] | None, list[tuple[int, str, int]], str]:
    """(the driver's CUDA version (major, minor) or None, [(index, name, sm_XY as XY)], why none) from the
    driver API, which needs no toolkit."""
    import ctypes

    name = _DRIVER[_system()]
    try:
        driver = ctypes.CDLL(name)
    except OSError:
        return None, [], f"no NVIDIA driver here ({name} not found)"
    version = ctypes.c_int()
    driver.cuDriverGetVersion(ctypes.byref(version))
    cuda = (version.value // 1000, version.value % 1000 // 10)
    status = driver.cuInit(0)
    if status != 0:
        return cuda, [], f"the driver found no usable GPU (cuInit returned {status})"
    count = ctypes.c_int()
    driver.cuDeviceGetCount(ctypes.byref(count))
    found = []
    for index in range(count.value):
        device, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        text = ctypes.create_string_buffer(256)
        driver.cuDeviceGet(ctypes.byref(device), index)
        driver.cuDeviceGetName(text, 256, device)
        driver.cuDeviceGetAttribute(ctypes.byref(major), 75, device)  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        driver.cuDeviceGetAttribute(ctypes.byref(minor), 76, device)  # ..._MINOR
        found.append((index, text.value.decode(errors="replace"), major.value * 10 + minor.value))
    return cuda, found, "" if found else "the driver sees no GPU"


def code_for(arch: int, code: dict[str, Any]) -> tuple[str, int] | None:
    """How a GPU of architecture `arch` runs `code` (GPU_CODE's shape): ("sass", sm_XY) natively — SASS runs on
    later minors of its major —, ("ptx", compute_XY) through the driver's JIT, or None: no kernel image."""
    native = [sm for sm in code["sass"] if sm // 10 == arch // 10 and sm <= arch]
    if native:
        return "sass", max(native)
    jit = [ptx for ptx in code["ptx"] if ptx <= arch]
    return ("ptx", max(jit)) if jit else None


def _nvrtc_version() -> tuple[tuple[int, int], str] | None:
    """(NVRTC's version (major, minor), its file) as this process loaded it, or None."""
    import ctypes

    spec = {**COMPONENTS, **OPTIONAL}.get("nvrtc")
    system = _system()
    if not spec or no_wheel("nvrtc"):
        return None
    library = spec[system][1][0]
    try:
        nvrtc = ctypes.CDLL(FOUND.get(library, (library,))[0])
    except OSError:
        return None
    major, minor = ctypes.c_int(), ctypes.c_int()
    if nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
        return None
    return (major.value, minor.value), _mapped(library) or FOUND.get(library, (library,))[0]


def _other_builds_for(arch: int) -> list[str]:
    """What the recipe's builds for the other CUDA majors carry for a GPU of architecture `arch`, in words."""
    found = []
    for other in OTHER_VARIANTS.get(_platform(), {}).values():
        how = code_for(arch, other)
        if how:
            found.append(f"{other['dist_name']} carries {'sm' if how[0] == 'sass' else 'compute'}_{how[1]}")
    return found


def _tegra() -> tuple[tuple[int, int], str] | None:
    """On a Jetson: (the L4T release (major, minor) from /etc/nv_tegra_release, the board's model), else None."""
    import re

    try:
        with open("/etc/nv_tegra_release", encoding="utf-8", errors="replace") as release:
            found = re.search(r"R(\d+)[^\n]*?REVISION:\s*(\d+)", release.read(4096))
    except OSError:
        return None
    try:
        with open("/proc/device-tree/model", encoding="utf-8", errors="replace") as model:
            board = model.read(256).strip("\0\n ")
    except OSError:
        board = "a Jetson"
    return ((int(found.group(1)), int(found.group(2))) if found else (0, 0)), board


def _jetson_says(l4t: tuple[int, int], board: str) -> tuple[bool, str]:
    """(whether NVIDIA's pip wheels of this CUDA major run on this Jetson, one line saying so)."""
    release = f"L4T R{l4t[0]}.{l4t[1]}" if l4t[0] else "an unknown L4T release"
    jetpack = JETPACK.get(l4t[0])
    head = f"Jetson: {board}, {release}" + (f" ({jetpack})" if jetpack else "")
    if JETSON_PIP_WHEELS is None:
        return False, (
            f"{head}: NVIDIA's CUDA {CUDA_MAJOR} pip wheels, built for SBSA servers, do not run on a Jetson — use "
            "the CUDA of JetPack with a build made for it, or JetPack 7 with this package's CUDA 13 variant"
        )
    if l4t[0] < JETSON_PIP_WHEELS:
        needed = JETPACK.get(JETSON_PIP_WHEELS, f"L4T R{JETSON_PIP_WHEELS}")
        return False, (
            f"{head}: NVIDIA's CUDA {CUDA_MAJOR} pip wheels need {needed} (L4T R{JETSON_PIP_WHEELS} or later) on a "
            f"Jetson — upgrade JetPack, or use the CUDA of this JetPack with a build made for it"
        )
    return True, f"{head}: NVIDIA's CUDA {CUDA_MAJOR} pip wheels run on this JetPack"


def _names(archs: list[int], prefix: str = "sm") -> str:
    return " ".join(f"{prefix}_{a}" for a in archs) or "none"


def _code_lines(system: str) -> list[str]:
    """What GPU code the wheel carries, which GPUs of this machine's platform it covers, and the driver it needs."""
    code = GPU_CODE
    if code["sass"] or code["ptx"]:
        lines = [
            f"GPU code: SASS {_names(code['sass'])}; PTX {_names(code['ptx'], 'compute')}"
            + (f" (ISA {code['ptx_isa']})" if code["ptx_isa"] else ""),
            f"  {RUNS_ON}",
        ]
    else:
        lines = ["GPU code: none in the wheel's binaries (what runs on the GPU is compiled at run time)"]
    narrowed = NARROWED.get(_platform(), {})
    lines += [f"  {pattern}: only {_names(archs)} (narrowed on purpose)" for pattern, archs in narrowed.items()]
    covered = COVERS.get(_platform(), {})
    if covered:
        lines.append(f"GPUs of {_platform()} machines:")
        lines += [f"  {product}: {how}" for product, how in covered.items()]
    lines.append(
        f"minimum driver: {code['minimum_driver'][system]} ({code['sass_driver'][system]} where SASS serves the GPU)"
    )
    return lines


def diagnose() -> tuple[list[str], bool]:
    """Lines saying what GPU code this wheel carries, what this machine has, and whether they meet; and whether
    something here cannot run it (a GPU without code, a driver too old)."""
    system, code = _system(), GPU_CODE
    compiled = bool(code["sass"] or code["ptx"])
    narrowed = NARROWED.get(_platform(), {})
    lines = _code_lines(system)
    driver = _driver_version()
    cuda, found, why_none = gpus()
    troubles = False
    tegra = _tegra()
    if tegra:
        served, line = _jetson_says(*tegra)
        lines.append(line)
        troubles = troubles or not served
    if cuda is None:
        lines.append(f"driver: {why_none}")
    else:
        lines.append(f"driver: {driver or 'version unknown'}, CUDA {cuda[0]}.{cuda[1]}")
    for index, name, arch in found:
        generation = GENERATIONS.get(arch, "")
        head = f"GPU {index}: {name}, compute capability {arch // 10}.{arch % 10}"
        head += f" ({generation})" if generation else ""
        if not compiled:
            lines.append(head)
            continue
        how = code_for(arch, code)
        if how is None:
            troubles = True
            others = _other_builds_for(arch)
            advice = "; ".join(others) if others else f"rebuild with sm_{arch} in the recipe's cuda_archs"
            lines.append(f"{head}: NO code for it (no kernel image is available) — {advice}")
            continue
        needed = code["sass_driver" if how[0] == "sass" else "minimum_driver"][system]
        kind = "natively (SASS sm_" if how[0] == "sass" else "through the driver's JIT (PTX compute_"
        lines.append(f"{head}: runs {kind}{how[1]})")
        if driver and _version(driver) < _version(needed):
            troubles = True
            lines.append(f"  the driver {driver} is older than the {needed} this needs — update the NVIDIA driver")
        for pattern, archs in narrowed.items():
            if code_for(arch, {"sass": archs, "ptx": archs[-1:]}) is None:
                lines.append(f"  {pattern} has no code for it (built only for {_names(archs)})")
    nvrtc = _nvrtc_version()
    if nvrtc and cuda:
        (major, minor), path = nvrtc
        lines.append(f"NVRTC {major}.{minor} ({path}); the driver supports CUDA {cuda[0]}.{cuda[1]}")
        if (major, minor) > cuda:
            lines.append(
                f"  warning: NVRTC {major}.{minor} is newer than the driver: PTX it writes is rejected "
                '("the provided PTX was compiled with an unsupported toolchain"). Code compiled to CUBIN '
                f"(nvrtcGetCUBIN, -arch=sm_XY) runs; or install NVRTC {cuda[0]}.{cuda[1]}, or update the driver"
            )
    return lines, troubles


# The three failures of CUDA code on a user's machine that this module explains in advance.
_CUDA_FAILURES = ("no kernel image is available", "unsupported toolchain", "driver version is insufficient")


def _point_at_diagnostic() -> None:
    """Chain sys.excepthook: after the usual traceback of an uncaught error that is one of those three, one line
    sends the user here; after an import error of a package built against one torch release beside another torch
    (its extensions miss torch's C++ symbols), one line says which torch it needs and where its build for the
    installed one is. The error itself is untouched."""
    import sys

    previous = sys.excepthook
    if getattr(previous, "_wheelfactory_module", None) == __name__:
        return

    def excepthook(kind: type[BaseException], value: BaseException, traceback: TracebackType | None) -> None:
        previous(kind, value, traceback)
        if any(text in str(value).lower() for text in _CUDA_FAILURES):
            print(
                f"{DIST_NAME}: `python -m {__name__}` says which GPUs and drivers this wheel supports", file=sys.stderr
            )
        mismatch = torch_mismatch() if isinstance(value, ImportError) else None
        if mismatch:
            print(f"{DIST_NAME}: {mismatch}", file=sys.stderr)

    excepthook._wheelfactory_module = __name__  # type: ignore[attr-defined]
    sys.excepthook = excepthook
