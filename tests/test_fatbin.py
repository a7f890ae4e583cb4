"""The fatbin reader against NVIDIA's cuobjdump (from its pip wheel) on real device code: cuprobe's kernel module as
the factory builds it for CUDA 11.8, 12.4 and 13.0, and kernels this host's nvcc 13.0 compiles for the `a` and
`f` architectures, compressed and not. The same fatbin in a PE file (mingw) reads the same."""

from __future__ import annotations

import ast
import json
import shutil
import struct
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from wheelfactory.audit import audit_wheel
from wheelfactory.binaries.elf import DEVICE_CODE_SECTION, RELOCATABLE_DEVICE_CODE_SECTION, device_code_sections
from wheelfactory.binaries.fatbin import CONTAINER_MAGIC, read_fatbin_containers
from wheelfactory.binaries.wheelfile import pack, read_binaries, read_device_code, unpack
from wheelfactory.cli import main
from wheelfactory.components import toolkit_table
from wheelfactory.gpus import CodeSummary, minimum_driver, products_covered, runs_on
from wheelfactory.pipeline import existing
from wheelfactory.plan import copy_inputs, make_plan
from wheelfactory.platforms import linux
from wheelfactory.repair import record_gpu_code
from wheelfactory.toolkit.buildenv import gencode_flags

from .conftest import Built, matrix_for
from .cuobjdump import as_cuobjdump_names, listed, ptx_versions

KERNEL = "__global__ void scale(float a, float *x) { x[threadIdx.x] *= a; }\n"


def _device_module(built: Built, tmp_path: Path) -> Path:
    return next(unpack(built.wheel, tmp_path / "tree").rglob("_device.*.so"))


@pytest.mark.slow
@pytest.mark.parametrize("major", [11, 12, 13])
def test_the_reader_agrees_with_cuobjdump_on_the_factorys_builds(
    major: int, request: pytest.FixtureRequest, cuobjdump: Path, tmp_path: Path
) -> None:
    built: Built = request.getfixturevalue(f"built{major}")
    module = _device_module(built, tmp_path)
    entries = read_device_code(module, "linux")
    assert as_cuobjdump_names(entries) == listed(cuobjdump, module)
    assert [e.ptx_isa for e in entries if e.kind == "ptx"] == ptx_versions(cuobjdump, module)
    # ...which is the ISA toolkits.yaml says the release writes.
    release = toolkit_table().releases[built.variant.cuda.toolkit]
    assert {e.ptx_isa for e in entries if e.kind == "ptx"} == {release.ptx_isa_version}
    archs = built.variant.cuda_archs("linux-x86_64")
    # Compressed by default, SASS and PTX alike, and still read entry for entry.
    assert all(e.compressed for e in entries), [(e.name, e.compression) for e in entries]
    assert {e.arch for e in entries if e.kind == "sass"} == set(archs)
    assert [e.arch for e in entries if e.kind == "ptx"] == [max(archs)]
    # The report says what the wheel runs on.
    (reported,) = json.loads((built.root / "dist" / "report.json").read_text())["wheels"]
    isa = "{}.{}".format(*release.ptx_isa_version)
    floor = {11: "520.61.05", 12: "550.54.14", 13: "580.65.06"}[major]  # the PTX ISA's release's driver
    assert reported["gpu_code"] == {
        "sass": [f"sm_{a}" for a in archs],
        "ptx": [f"compute_{max(archs)} (ISA {isa})"],
        "ptx_isa": isa,
        "runs_on": runs_on(list(archs), [max(archs)]),
        # nvcc's own scheme for each release: NVIDIA's LZ scheme through 12.x, zstd from 13.0 on.
        "compression": ["zstd" if major >= 13 else "lz"],
        "device_code_bytes": sum(e.stored_bytes for e in entries),
        "products": products_covered(list(archs), [max(archs)], "linux-x86_64"),
        "minimum_driver": reported["gpu_code"]["minimum_driver"],
    }
    assert reported["gpu_code"]["minimum_driver"]["version"] == floor


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            ["-gencode=arch=compute_100f,code=[sm_100f,compute_100f]", "-gencode=arch=compute_120a,code=sm_120a"],
            {"sm_100f", "compute_100f", "sm_120a"},
        ),
        (["-Xfatbin=-compress-all", "-gencode=arch=compute_75,code=[sm_75,compute_75]"], {"sm_75", "compute_75"}),
        (["-Xfatbin=-compress=false", "-gencode=arch=compute_90a,code=compute_90a"], {"compute_90a"}),
    ],
    ids=["family-and-specific", "compressed", "plain"],
)
def test_the_reader_agrees_with_cuobjdump_on_every_kind_of_entry(
    options: list[str], expected: set[str], cuobjdump: Path, tmp_path: Path
) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.fail("needs nvcc 13 on PATH (the host's, from NVIDIA's pip wheels)")
    (tmp_path / "k.cu").write_text(KERNEL)
    library = tmp_path / "k.so"
    command = [nvcc, "-shared", "-Xcompiler", "-fPIC", *options, "-o", str(library), str(tmp_path / "k.cu")]
    subprocess.run(command, check=True)
    entries = read_device_code(library, "linux")
    assert {e.name for e in entries} == expected
    assert as_cuobjdump_names(entries) == listed(cuobjdump, library)
    assert [e.ptx_isa for e in entries if e.kind == "ptx"] == ptx_versions(cuobjdump, library)
    # An uncompressed cubin names the toolkit that made it.
    assert {e.toolkit for e in entries if e.kind == "sass" and not e.compressed} <= {"13.0"}


# Relocatable device code (nvcc -rdc, CMake's CUDA_SEPARABLE_COMPILATION, as cufinufft builds): a kernel in one
# object calls a device function of another.
RDC_SOURCES = {
    "kernel.cu": "extern __device__ float twice(float v);\n"
    "__global__ void scale(float *x) { x[threadIdx.x] = twice(x[threadIdx.x]); }\n",
    "twice.cu": "__device__ float twice(float v) { return 2.0f * v; }\n",
}


def relocatable_library(nvcc: str, folder: Path, ptx_in: tuple[str, ...], archs: tuple[int, ...] = (75,)) -> Path:
    """A library linked from RDC objects, its device-linked code SASS for `archs` only; the objects named in
    `ptx_in` carry PTX of the newest of them too (in __nv_relfatbin, where nothing but the driver's JIT link reads
    it)."""
    objects = []
    for name, text in RDC_SOURCES.items():
        (folder / name).write_text(text)
        gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
        gencode += [f"-gencode=arch=compute_{max(archs)},code=compute_{max(archs)}"] if name in ptx_in else []
        objects.append(folder / name.replace(".cu", ".o"))
        command = [nvcc, "-rdc=true", "-Xcompiler", "-fPIC", *gencode, "-c", folder / name, "-o", objects[-1]]
        subprocess.run(command, check=True)
    library = folder / "librdc.so"
    linked = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    # nvcc device-links them (with its static runtime: without one it leaves them unlinked)
    subprocess.run([nvcc, "-shared", "-rdc=true", *linked, *objects, "-o", library], check=True)
    return library


@pytest.mark.parametrize(
    ("ptx_in", "jit_link"),
    [(("kernel.cu", "twice.cu"), ["compute_75"]), (("kernel.cu",), []), ((), [])],
    ids=["every-object", "one-object", "none"],
)
def test_relocatable_device_code_can_be_jit_linked_from_ptx_every_object_carries(
    ptx_in: tuple[str, ...], jit_link: list[str], cuobjdump: Path, tmp_path: Path
) -> None:
    """The device-linked code has sm_75 SASS only; measured on an H200 (sm_90, driver 580) with such libraries:
    with compute_75 PTX in every object the kernel ran, the driver JIT-linking it; without, "named symbol not
    found". One object without PTX leaves nothing to link from."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.fail("needs nvcc 13 on PATH (the host's, from NVIDIA's pip wheels)")
    library = relocatable_library(nvcc, tmp_path, ptx_in)
    entries = read_device_code(library, "linux")
    assert [(e.kind, e.name) for e in entries if not e.jit_link] == [("sass", "sm_75")]
    assert [e.name for e in entries if e.jit_link] == jit_link
    # Each object's entries, read container by container, are what cuobjdump lists of every fatbin section.
    objects = read_fatbin_containers(device_code_sections(library, RELOCATABLE_DEVICE_CODE_SECTION)[0])
    assert [sorted(e.kind for e in entries) for entries in objects] == [
        ["ptx", "sass"] if name in ptx_in else ["sass"] for name in RDC_SOURCES
    ]
    every = [e for e in entries if not e.jit_link] + [e for entries in objects for e in entries]
    assert sorted(as_cuobjdump_names(tuple(every))) == sorted(listed(cuobjdump, library, every_fatbin=True))
    if jit_link:
        (ptx,) = [e for e in entries if e.jit_link]
        assert ptx.stored_bytes == sum(e.stored_bytes for entries in objects for e in entries if e.kind == "ptx")
        assert ptx.as_json()["jit_link"] is True


def test_device_code_is_compressed_by_default_and_read_all_the_same(project: Path, tmp_path: Path) -> None:
    """This host's nvcc 13.0 run with the NVCC_PREPEND_FLAGS the build gets (and a recipe's opt-out): every entry
    compressed (zstd, 13.0's scheme) and every architecture still read; the opt-out leaves SASS plain."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.fail("needs nvcc 13 on PATH (the host's, from NVIDIA's pip wheels)")
    variant = next(v for v in make_plan(project).variants if v.recipe.name == "cuprobe" and v.major == 13)
    plain = replace(variant, recipe=variant.recipe.model_copy(update={"compress_device_code": False}))
    (tmp_path / "k.cu").write_text(KERNEL + "__global__ void add(float *x, float y) { x[threadIdx.x] += y; }\n")
    found = {}
    for name, chosen in (("compressed", variant), ("plain", plain)):
        flags = linux.environment(chosen, "linux-x86_64")["NVCC_PREPEND_FLAGS"].split()
        flags = [f for f in flags if f != "-ccbin" and not f.startswith("/opt/")]  # the container's host compiler
        library = tmp_path / f"{name}.so"
        gencode = gencode_flags(chosen.cuda_archs("linux-x86_64")).split()
        command = [nvcc, *flags, *gencode, "-shared", "-Xcompiler", "-fPIC", "-o", library, tmp_path / "k.cu"]
        subprocess.run(command, check=True)
        found[name] = read_device_code(library, "linux")
    compressed, stored = found["compressed"], found["plain"]
    assert [(e.kind, e.arch) for e in compressed] == [(e.kind, e.arch) for e in stored]
    assert {e.compression for e in compressed} == {"zstd"}
    assert {e.compression for e in stored if e.kind == "sass"} == {""}
    assert sum(e.stored_bytes for e in compressed) < sum(e.stored_bytes for e in stored) / 2
    # zstd needs CUDA 12.8's driver: no change for CUDA 13 (its floor reads it), a raised floor for CUDA 12.
    summary = CodeSummary.of(compressed)
    assert summary.zstd and minimum_driver(13, [], "linux", zstd=True).version == "580.65.06"
    raised = minimum_driver(12, [], "linux", zstd=True)
    assert (raised.version, raised.why) == ("570.26", "zstd-compressed device code needs the driver of CUDA 12.8")
    assert minimum_driver(12, [], "linux").version == "525.60.13"


def test_a_pe_files_fatbin_reads_as_the_elf_one(tmp_path: Path) -> None:
    """No nvcc for Windows here: the fatbin nvcc made for Linux, put into a real PE DLL's .nv_fatb section (the
    name a PE image cuts .nv_fatbin to) by mingw's objcopy, reads entry for entry as in the ELF file."""
    nvcc, mingw = shutil.which("nvcc"), "x86_64-w64-mingw32"
    if nvcc is None or shutil.which(f"{mingw}-gcc") is None:
        pytest.fail("needs nvcc 13 on PATH and mingw-w64 (apt-get install gcc-mingw-w64-x86-64)")
    (tmp_path / "k.cu").write_text(KERNEL)
    elf = tmp_path / "k.so"
    options = ["-gencode=arch=compute_80,code=[sm_80,compute_80]", "-gencode=arch=compute_90a,code=sm_90a"]
    subprocess.run(
        [nvcc, "-shared", "-Xcompiler", "-fPIC", *options, "-o", str(elf), str(tmp_path / "k.cu")], check=True
    )
    section = tmp_path / "fatbin.bin"
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", str(elf), str(section)], check=True)
    (tmp_path / "dll.c").write_text("__declspec(dllexport) int answer(void) { return 42; }\n")
    dll = tmp_path / "k.dll"
    subprocess.run([f"{mingw}-gcc", "-shared", "-o", str(dll), str(tmp_path / "dll.c")], check=True)
    subprocess.run(
        [
            f"{mingw}-objcopy",
            "--add-section",
            f".nv_fatb={section}",
            "--set-section-flags",
            ".nv_fatb=contents,alloc,load,readonly,data",
            str(dll),
        ],
        check=True,
    )
    in_pe = read_device_code(dll, "windows")
    assert in_pe == read_device_code(elf, "linux")
    assert {e.name for e in in_pe} == {"sm_80", "compute_80", "sm_90a"}


def _with_ptx_isa(module: Path, isa: tuple[int, int]) -> None:
    """Rewrite, in place, the ISA version every PTX entry of the module's fatbin says: a module as a newer
    toolkit's nvcc would have made it (the field the driver reads; the PTX text is left as it is)."""
    with module.open("rb") as f:
        section = ELFFile(f).get_section_by_name(DEVICE_CODE_SECTION)
        start, size = section["sh_offset"], section["sh_size"]
    data = bytearray(module.read_bytes())
    offset = start
    while offset < start + size:
        magic, _, header, length = struct.unpack_from("<IHHQ", data, offset)
        if magic != CONTAINER_MAGIC:
            offset += 8
            continue
        entry = offset + header
        while entry < offset + header + length:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            if kind == 1:
                struct.pack_into("<HH", data, entry + 24, isa[1], isa[0])
            entry += entry_header + payload
        offset += header + length
    module.write_bytes(bytes(data))


@pytest.mark.slow
def test_ptx_newer_than_the_matrixs_toolkit_is_rejected(built12: Built, tmp_path: Path, build_image: str) -> None:
    tree = unpack(built12.wheel, tmp_path / "tree")
    module = next(tree.rglob("_device.*.so"))
    _with_ptx_isa(module, (9, 0))  # what CUDA 13.0's nvcc writes, in a wheel of the matrix's CUDA 12.4
    (tmp_path / "out").mkdir()
    wheel = pack(tree, tmp_path / "out")
    matrix = matrix_for(built12.root, build_image)
    status = main(["--root", str(built12.root), "smoke", str(wheel), "--image", build_image, "--matrix", str(matrix)])
    assert status == 1
    audit = audit_wheel(existing(wheel, built12.variant, build_image))
    (problem,) = [p for p in audit.all_problems() if "ISA" in p]
    assert problem.startswith(str(module.relative_to(tree))), problem
    assert "PTX compute_90 of ISA 9.0, newer than CUDA 12.4's 8.4" in problem


@pytest.mark.slow
def test_an_architecture_the_module_lacks_is_rejected_by_name(built12: Built, tmp_path: Path, build_image: str) -> None:
    """The recipe asks for sm_87 (which CUDA 12.4 targets) beside the defaults; the module was built without it."""
    root = copy_inputs(built12.root, tmp_path / "project")
    recipe = root / "recipes/cuprobe/recipe.yaml"
    recipe.write_text(recipe.read_text() + "cuda_archs: {12: [70, 75, 80, 86, 87, 89, 90]}\n")
    variant = next(v for v in make_plan(root, matrix_for(root, build_image), ["cuprobe"]).variants if v.major == 12)
    audit = audit_wheel(existing(built12.wheel, variant, build_image))
    (problem,) = audit.all_problems()
    assert "_device" in problem and "has no SASS for sm_87 of the variant's architectures" in problem
    # What the module does carry is in the report.
    (device,) = [b for b in audit.binaries if b.gpu_code]
    assert {entry["arch"] for entry in device.gpu_code} == {f"sm_{a}" for a in (70, 75, 80, 86, 89, 90)} | {
        "compute_90"
    }


@pytest.mark.slow
def test_an_undeclared_library_with_device_code_is_held_to_the_variants_architectures(
    built13: Built, tmp_path: Path, build_image: str
) -> None:
    """A library nvcc built, shipped as a data file (as CyFES ships its own) and named nowhere in the recipe, with
    SASS and PTX for sm_80 only: it cannot run on the variant's Turing GPUs, and the audit says so by name. The
    same library built with every architecture of the variant passes."""
    nvcc = shutil.which("nvcc")  # the host's 13.0: the matrix's toolkit for CUDA 13
    if nvcc is None:
        pytest.fail("needs nvcc 13 on PATH (the host's, from NVIDIA's pip wheels)")
    (tmp_path / "k.cu").write_text(KERNEL)
    archs = built13.variant.cuda_archs("linux-x86_64")

    def audited_with(built_library: Path) -> list[str]:
        scratch = Path(tempfile.mkdtemp(dir=tmp_path))
        tree = unpack(built13.wheel, scratch / "tree")
        data = next(tree.glob("*.dist-info")).name.replace(".dist-info", ".data")
        library = tree / data / "data" / "lib" / "libkernels.so"
        library.parent.mkdir(parents=True)
        shutil.copy(built_library, library)
        (scratch / "out").mkdir()
        wheel = pack(tree, scratch / "out")
        return audit_wheel(existing(wheel, built13.variant, build_image)).all_problems()

    def audited(*gencode: str) -> list[str]:
        library = Path(tempfile.mkdtemp(dir=tmp_path)) / "libkernels.so"
        command = [nvcc, "-shared", "-Xcompiler", "-fPIC", *gencode, "-o", str(library), str(tmp_path / "k.cu")]
        subprocess.run([*command, "-cudart", "none"], check=True)
        return audited_with(library)

    sass, ptx = audited("-gencode=arch=compute_80,code=[sm_80,compute_80]")
    missing = ", ".join(f"sm_{a}" for a in archs if a != 80)
    library = f"{built13.variant.dist_name.replace('-', '_')}-0.1.0.data/data/lib/libkernels.so"
    assert sass.startswith(f"{library}: has no SASS for {missing} of the variant's architectures"), sass
    assert ptx.startswith(f"{library}: has no PTX for compute_{max(archs)}"), ptx
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    assert audited(*gencode, f"-gencode=arch=compute_{max(archs)},code=compute_{max(archs)}") == []
    # Linked from relocatable device code, its PTX only in each object's fatbin, which the driver JIT-links: it
    # passes too (the report marks that PTX jit_link); with PTX in one object of two, nothing can be linked.
    for ptx_in, problems in ((tuple(RDC_SOURCES), 0), (("kernel.cu",), 1)):
        folder = tmp_path / f"rdc{len(ptx_in)}"
        folder.mkdir()
        rdc = relocatable_library(nvcc, folder, ptx_in, archs)
        found = audited_with(rdc)
        assert len(found) == problems and all(f"has no PTX for compute_{max(archs)}" in p for p in found), found


@pytest.mark.slow
def test_a_narrowed_module_passes_where_the_recipe_says_so(built12: Built, tmp_path: Path, build_image: str) -> None:
    """The same wheel, sm_87 asked of the variant, but the kernel module narrowed on purpose to sm_80 and sm_90."""
    root = copy_inputs(built12.root, tmp_path / "project")
    recipe = root / "recipes/cuprobe/recipe.yaml"
    recipe.write_text(
        recipe.read_text() + "cuda_archs: {12: [70, 75, 80, 86, 87, 89, 90]}\n"
        "device_code_archs: {cuprobe._device: [80, 90]}\n"
    )
    variant = next(v for v in make_plan(root, matrix_for(root, build_image), ["cuprobe"]).variants if v.major == 12)
    assert variant.gpu_archs("cuprobe._device", "linux-x86_64") == (80, 90)
    audit = audit_wheel(existing(built12.wheel, variant, build_image))
    assert audit.passed, audit.all_problems()


@pytest.mark.slow
def test_the_variant_module_carries_what_the_binaries_do(built12: Built, tmp_path: Path, build_image: str) -> None:
    """The repair writes the wheel's real GPU code into its variant module: the factory's build carries what was
    planned; a wheel whose kernels hold only sm_80 SASS (entries of the real fatbin, the rest left out) says so."""
    tree = unpack(built12.wheel, tmp_path / "tree")
    (line,) = [x for x in (tree / "cuprobe/_cuda_variant.py").read_text().splitlines() if x.startswith("GPU_CODE =")]
    code = ast.literal_eval(line.removeprefix("GPU_CODE ="))
    assert (code["sass"], code["ptx"], code["ptx_isa"]) == ([70, 75, 80, 86, 89, 90], [90], "8.4")
    assert code["minimum_driver"] == {"linux": "550.54.14", "windows": "551.61"}

    binaries = read_binaries(tree, "linux")
    narrowed = {
        member: replace(binary, fatbin=tuple(e for e in binary.fatbin if e.name == "sm_80"))
        for member, binary in binaries.items()
    }
    built = existing(built12.wheel, built12.variant, build_image)
    assert record_gpu_code(tree, narrowed, built)
    text = (tree / "cuprobe/_cuda_variant.py").read_text()
    assert "'sass': [80], 'ptx': [], 'ptx_isa': None" in text
    assert "RUNS_ON = 'Ampere natively; nothing newer (no PTX)'" in text
