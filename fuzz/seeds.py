"""The seeds each reader's fuzzing starts from: real binaries built here (gcc's ELF extension module and library,
nvcc's fatbin, mingw's PE DLL, a wheel and an sdist), the test sources' build files and a real build's report, and
the byte-built cases of the tests. A tool this host lacks
(nvcc, mingw) is said, and its seeds are left out."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from tests import elfbytes as eb
from tests.wheelbytes import make_wheel

REPO = Path(__file__).resolve().parent.parent
SOURCES = REPO / "tests" / "sources"

EXTENSION = r"""
#include <math.h>
#include <stdio.h>
void *PyInit__mod(void) { printf("%f", cos(1.0)); return 0; }
const char *opened = "libcublasLt.so.12";
"""
KERNEL = "__global__ void scale(float a, float *x) { x[threadIdx.x] *= a; }\n"


def _run(command: list[str], cwd: Path) -> bool:
    return subprocess.run(command, cwd=cwd, capture_output=True, check=False).returncode == 0


def build(into: Path) -> list[str]:
    """Write each reader's seeds under `into/READER/`; returns what could not be built here, and why."""
    missing = []
    folders = {name: into / name for name in ("wheel", "tar", "elf", "fatbin", "pe", "index", "source", "report")}
    for folder in folders.values():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        (scratch / "mod.c").write_text(EXTENSION)
        if _run(["cc", "-shared", "-fPIC", "-Wl,--no-as-needed", "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib",
                 "-o", "mod.so", "mod.c", "-lm"], scratch):  # fmt: skip
            shutil.copy(scratch / "mod.so", folders["elf"] / "gcc-extension.so")
        else:
            missing.append("elf: no C compiler (cc)")
        nvcc = shutil.which("nvcc")
        if nvcc:
            (scratch / "k.cu").write_text(KERNEL)
            archs = ["-gencode=arch=compute_80,code=[sm_80,compute_80]", "-gencode=arch=compute_90a,code=sm_90a"]
            if _run([nvcc, "-shared", "-Xcompiler", "-fPIC", *archs, "-o", "k.so", "k.cu"], scratch):
                shutil.copy(scratch / "k.so", folders["elf"] / "nvcc-kernels.so")
                _run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", "k.so", "k.fatbin"], scratch)
                shutil.copy(scratch / "k.fatbin", folders["fatbin"] / "nvcc.fatbin")
        else:
            missing.append("elf, fatbin: no nvcc on PATH (NVIDIA's fatbins left out)")
        mingw = shutil.which("x86_64-w64-mingw32-gcc")
        if mingw:
            (scratch / "dll.c").write_text(
                "#include <windows.h>\n__declspec(dllexport) void *PyInit__mod(void) "
                '{ return LoadLibraryA("cublas64_12.dll"); }\n'
            )
            if _run([mingw, "-shared", "-o", "mod.pyd", "dll.c"], scratch):
                shutil.copy(scratch / "mod.pyd", folders["pe"] / "mingw.pyd")
        else:
            missing.append("pe: no mingw-w64 (apt-get install gcc-mingw-w64-x86-64)")
        wheel_name = "pkg_cuda12x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
        members = {"pkg/__init__.py": b"from . import _mod\n"}
        if (folders["elf"] / "gcc-extension.so").is_file():
            members["pkg/_mod.cpython-312-x86_64-linux-gnu.so"] = (folders["elf"] / "gcc-extension.so").read_bytes()
        shutil.copy(make_wheel(scratch, wheel_name, members), folders["wheel"] / "sound.whl")
    _byte_built(folders)
    return missing


def _byte_built(folders: dict[str, Path]) -> None:
    rpath = "$ORIGIN/../nvidia/cuda_runtime/lib"
    table, at = eb.strings("libc.so.6", "libcudart.so.12", rpath)
    needed = eb.dynamic([(1, at["libc.so.6"]), (1, at["libcudart.so.12"]), (15, at[rpath])])
    rodata = eb.compressed(b"\0libnvrtc.so.12\0")
    sections = [
        eb.Section(".dynstr", eb.SHT_STRTAB, table),
        eb.Section(".dynamic", eb.SHT_DYNAMIC, needed, link=1),
        eb.Section(".rodata", eb.SHT_PROGBITS, rodata, flags=eb.SHF_COMPRESSED),
    ]
    (folders["elf"] / "dynamic.so").write_bytes(eb.elf64(sections))
    cubin = eb.elf64([eb.Section(".note.nv.tkinfo", eb.SHT_NOTE, b"Cuda compilation tools, release 12.4, V12.4.131")])
    entries = [eb.fatbin_entry(2, 90, cubin), eb.fatbin_entry(1, 90, b".version 8.4\n.target sm_90\n")]
    (folders["fatbin"] / "byte-built.fatbin").write_bytes(eb.fatbin_container([]) + eb.fatbin_container(entries))
    sdist = io.BytesIO()
    with tarfile.open(fileobj=sdist, mode="w:gz") as tar:
        for name, data in (("pkg-1.0/setup.py", b"from setuptools import setup\nsetup()\n"), ("pkg-1.0/PKG-INFO", b"")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("pkg-1.0/link")
        link.type, link.linkname = tarfile.SYMTYPE, "setup.py"
        tar.addfile(link)
    (folders["tar"] / "sdist.tar.gz").write_bytes(sdist.getvalue())
    files = [{"filename": "pkg-1.0.tar.gz", "url": "../../files/pkg-1.0.tar.gz", "hashes": {"sha256": "0" * 64}}]
    (folders["index"] / "pep691.json").write_text(json.dumps({"meta": {"api-version": "1.1"}, "files": files}))
    (folders["index"] / "pep503.html").write_text(
        '<html><a href="../../files/pkg-1.0.tar.gz#sha256=00">pkg-1.0.tar.gz</a>'
    )
    _drafting(folders)


def _drafting(folders: dict[str, Path]) -> None:
    """The drafter's files (each after the byte that picks it: fuzz/targets.py's SOURCE_FILES) from the test
    sources, and a report of a real build, its wheels renamed as the fuzzed recipe's."""
    for picked, path in (
        (0, SOURCES / "ctlib" / "pyproject.toml"),
        (0, SOURCES / "multipkg" / "pyproject.toml"),
        (1, REPO / "recipes" / "cuprobe" / "source" / "setup.py"),
        (1, SOURCES / "datalib" / "setup.py"),
        (3, SOURCES / "multipkg" / "PKG-INFO"),
        (4, SOURCES / "ctlib" / "CMakeLists.txt"),
    ):
        (folders["source"] / f"{picked}-{path.parent.name}-{path.name}").write_bytes(
            bytes([picked]) + path.read_bytes()
        )
    (folders["source"] / "2-setup.cfg").write_bytes(b"\x02[options]\npackages = fuzzpkg\n")
    init = b"\x05import ctypes\nfrom . import _k\n_lib = ctypes.CDLL('libfuzz.so')\n"
    (folders["source"] / "5-init.py").write_bytes(init)
    report = (REPO / "tests" / "reports" / "cufinufft-2.4.1-cuda12.json").read_text(encoding="utf-8")
    (folders["report"] / "cufinufft.json").write_text(report.replace("cufinufft-cuda", "fuzzpkg-cuda"))
