"""What compressed device code costs when a GPU first loads it, and print the figures.

    python bench/bench_load_time.py prepare DIR   here: fatbins of cuprobe's kernel and of CuPy's many kernels
                                                   (cupy/random/cupy_distributions.cu), by this host's nvcc 13.0 for
                                                   the release's default architectures, compressed (the factory's
                                                   default) and as nvcc stores them by default
    python bench/bench_load_time.py measure DIR   on a GPU machine (standard library only): each fatbin loaded into a
                                                   context with cuModuleLoadData, every kernel at once
                                                   (CUDA_MODULE_LOADING=EAGER: the cost a first launch pays, here
                                                   paid up front), 20 times; the median and the range

The driver picks the GPU's own SASS entry and inflates it where it is compressed: the difference between the two
fatbins of one source is the price of compression at load time. The driver library's path is printed: a copy
other than the machine's driver would make the figures meaningless.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = 20


def prepare(out: Path) -> None:
    import dataclasses

    # The engine, and the same sources as the size figures, only here: `measure` runs where neither is installed.
    from bench_compression import CUPY, KERNELS, _curand_headers
    from benchlib import REPO

    from wheelfactory.components import toolkit_table
    from wheelfactory.plan import make_plan
    from wheelfactory.sources import source_tree
    from wheelfactory.toolkit.buildenv import gencode_flags, nvcc_flags

    nvcc = shutil.which("nvcc")
    assert nvcc, "needs nvcc 13 on PATH"
    out.mkdir(parents=True, exist_ok=True)
    variant = next(v for v in make_plan(REPO).variants if v.recipe.name == "cuprobe" and v.major == 13)
    archs = toolkit_table().releases["13.0"].default_archs("linux-x86_64")
    with tempfile.TemporaryDirectory(prefix="wf-bench-load-") as scratch_text:
        scratch = Path(scratch_text)
        sources = {
            "cuprobe": (REPO / "recipes" / "cuprobe" / "source" / "src" / "device.cu", []),
            "cupy-distributions": (source_tree(CUPY, scratch) / KERNELS, [f"-I{_curand_headers(scratch)}"]),
        }
        for name, (source, includes) in sources.items():
            for label, compressed in (("compressed", True), ("plain", False)):
                recipe = variant.recipe.model_copy(update={"compress_device_code": compressed})
                flags = nvcc_flags(dataclasses.replace(variant, recipe=recipe))
                target = out / f"{name}.{label}.fatbin"
                command = [nvcc, "-fatbin", *flags, *gencode_flags(archs).split(), *includes, "-o", str(target)]
                subprocess.run([*command, str(source)], check=True)
                print(f"{target.name}: {target.stat().st_size:,} bytes")


def _driver() -> ctypes.CDLL:
    driver = ctypes.CDLL("libcuda.so.1")
    with open("/proc/self/maps", encoding="utf-8") as maps:
        paths = sorted({line.split()[-1] for line in maps if "libcuda.so" in line})
    print(f"driver library: {', '.join(paths)}")
    return driver


def measure(folder: Path) -> None:
    os.environ["CUDA_MODULE_LOADING"] = "EAGER"  # read by the driver at cuInit
    driver = _driver()

    def check(status: int, what: str) -> None:
        if status != 0:
            raise SystemExit(f"{what} failed: CUDA error {status}")

    check(driver.cuInit(0), "cuInit")
    device, context = ctypes.c_int(), ctypes.c_void_p()
    check(driver.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    name = ctypes.create_string_buffer(256)
    driver.cuDeviceGetName(name, 256, device)
    version = ctypes.c_int()
    driver.cuDriverGetVersion(ctypes.byref(version))
    print(f"GPU 0: {name.value.decode()}; driver CUDA {version.value // 1000}.{version.value % 1000 // 10}")
    check(driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    figures = []
    for fatbin in sorted(folder.glob("*.fatbin")):
        image = fatbin.read_bytes()
        times = []
        for _ in range(ROUNDS + 1):  # the first warms the driver's own code paths, not counted
            module = ctypes.c_void_p()
            started = time.perf_counter()
            check(driver.cuModuleLoadData(ctypes.byref(module), image), f"loading {fatbin.name}")
            check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
            times.append((time.perf_counter() - started) * 1000)
            check(driver.cuModuleUnload(module), "cuModuleUnload")
        times = times[1:]
        figures.append(
            f"{fatbin.name:<42} {len(image):>11,} bytes  load {statistics.median(times):7.2f} ms "
            f"(median of {ROUNDS}; {min(times):.2f}-{max(times):.2f})"
        )
    print("\n".join(figures))


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in ("prepare", "measure"):
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "prepare":
        prepare(Path(sys.argv[2]))
    else:
        measure(Path(sys.argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
