"""Windows wheels, proven from Linux on real PE files.

mingw-w64 cross-builds real extension modules against import libraries that provisioning made from NVIDIA's
real Windows DLLs (downloaded from the index); the real delvewheel repairs the wheel; pefile audits it. What
cannot exist here is a Windows host: the DLL-path loader is exercised with `sys.platform` and
`os.add_dll_directory` stood in for. And NVIDIA's server, from which the Windows toolkits of CUDA 11 and 12 take
nvcc: their provisioning reads stand-in archives from a local mirror (real manifest, checksum and unpack code);
CUDA 13's nvcc.exe is the real one from its wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from wheelfactory.audit import WheelAudit, audit_wheel
from wheelfactory.binaries.pe import def_file, exports, read_pe
from wheelfactory.binaries.wheelfile import pack
from wheelfactory.build import inject_loader
from wheelfactory.built import BuiltWheel
from wheelfactory.cli import main
from wheelfactory.components import component_table, toolkit_table
from wheelfactory.declared import VARIANT_MODULE, excluded_libraries
from wheelfactory.plan import Cell, Variant, make_plan
from wheelfactory.render import render_plan
from wheelfactory.repair import read_binaries_of, repair
from wheelfactory.sbom.checks import read_sbom, sbom_problems
from wheelfactory.sbom.compose import linked
from wheelfactory.sbom.document import Grafted
from wheelfactory.sources import source_identity
from wheelfactory.toolkit.provision import Toolkit, provision

from .conftest import REPO, serve_redist_release, unavailable

pytestmark = pytest.mark.slow

MINGW = "x86_64-w64-mingw32-gcc"
DLLTOOL = "x86_64-w64-mingw32-dlltool"
# (cudart DLL, cuBLAS DLL, the DLL directories the loader must add) per CUDA major
LAYOUTS = {
    11: (
        "cudart64_110.dll",
        "cublas64_11.dll",
        ["nvidia/cuda_runtime/bin", "nvidia/cuda_nvrtc/bin", "nvidia/cublas/bin"],
    ),
    12: (
        "cudart64_12.dll",
        "cublas64_12.dll",
        ["nvidia/cuda_runtime/bin", "nvidia/cuda_nvrtc/bin", "nvidia/cublas/bin"],
    ),
    13: ("cudart64_13.dll", "cublas64_13.dll", ["nvidia/cu13/bin/x86_64"]),
}

BLAS_C = r"""
/* A real extension module: CUDA runtime, cuBLAS, a helper DLL and the Python DLL, as a CUDA wheel has. */
typedef struct PyModuleDef PyModuleDef;
typedef struct PyObject PyObject;
extern PyObject *PyModule_Create2(PyModuleDef *def, int api);
extern int cudaGetDeviceCount(int *count);
extern int cublasCreate_v2(void **handle);
extern int helper_value(void);
static char module_def[128];
__declspec(dllexport) PyObject *PyInit__blas(void) {
    int n = 0; void *h = 0;
    cudaGetDeviceCount(&n); cublasCreate_v2(&h);
    return helper_value() ? PyModule_Create2((PyModuleDef *)module_def, 1013) : 0;
}
"""

RUNTIME_C = r"""
extern int cudaGetDeviceCount(int *count);
__declspec(dllexport) void *PyInit__runtime(void) { int n = 0; return cudaGetDeviceCount(&n) ? 0 : (void *)1; }
"""

EAGER_DRIVER_C = r"""
/* A module that links the driver eagerly: `import` would fail on any machine without a GPU driver. */
extern int cuInit(unsigned int flags);
extern int cudaGetDeviceCount(int *count);
__declspec(dllexport) void *PyInit__runtime(void) {
    int n = 0;
    return cuInit(0) || cudaGetDeviceCount(&n) ? 0 : (void *)1;
}
"""
BLAS = ("_blas", BLAS_C, ["-lcudart", "-lcublas", "-lhelper", "-lpython312"])
RUNTIME = ("_runtime", RUNTIME_C, ["-lcudart"])
EAGER_RUNTIME = ("_runtime", EAGER_DRIVER_C, ["-lcudart", "-lnvcuda"])

RECIPE = """
name: winprobe
version: "0.1.0"
import: winprobe
source: {path: source}
components: [cudart, nvrtc, cublas]
optional: [nccl]
modules:
  winprobe._blas: [cublas, cudart]
  winprobe._runtime: [cudart]
"""


@pytest.fixture(scope="module")
def tools() -> None:
    missing = [t for t in (MINGW, DLLTOOL) if shutil.which(t) is None]
    if missing:
        unavailable(f"needs mingw-w64 ({', '.join(missing)}): apt-get install gcc-mingw-w64-x86-64")


# Among CI's slowest (2026-11-26: 41 s, the setup of the first delvewheel test): each major's Windows toolkit
# provisioned for real — NVIDIA's CUDA 13 wheels from PyPI, 11 and 12 from a local mirror of NVIDIA's archives —
# into a cache of its own, so nothing of the Linux tests' cache stands in for it.
@pytest.fixture(scope="module")
def toolkits(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Toolkit]]:
    """Each major's Windows toolkit, provisioned into a cache of its own from a local mirror of NVIDIA's archives."""
    mirror = tmp_path_factory.mktemp("redist")
    for major in (11, 12):
        release = toolkit_table().releases[_variant(project, major).cuda.toolkit].redist
        assert release is not None
        serve_redist_release(mirror, release, f"{release[:-2]}.99", platform="windows-x86_64")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WHEELFACTORY_CUDA_REDIST_URL", mirror.as_uri() + "/")
        patch.setenv("WHEELFACTORY_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield {major: provision(_variant(project, major), "windows", "AMD64") for major in (11, 12, 13)}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("win") / "project"
    (root / "recipes" / "winprobe" / "source" / "winprobe").mkdir(parents=True)
    shutil.copy(REPO / "matrix.yaml", root / "matrix.yaml")
    shutil.copytree(REPO / "templates", root / "templates")
    (root / "recipes" / "winprobe" / "recipe.yaml").write_text(RECIPE)
    return root


def _variant(project: Path, major: int) -> Variant:
    return next(v for v in make_plan(project).variants if v.major == major)


def _import_lib_for(dll_name: str, work: Path) -> Path:
    """An import library for a DLL that is not CUDA's (python312.dll, nvcuda.dll), from a .def."""
    symbols = {"python312.dll": ["PyModule_Create2"], "nvcuda.dll": ["cuInit"]}[dll_name]
    definition = work / f"{dll_name}.def"
    definition.write_text(f"LIBRARY {dll_name}\nEXPORTS\n" + "".join(f"    {s}\n" for s in symbols))
    library = work / f"lib{dll_name.removesuffix('.dll')}.a"
    subprocess.run([DLLTOOL, "-d", str(definition), "-l", str(library), "-m", "i386:x86-64"], check=True)
    return library


def _helper_dll(work: Path) -> Path:
    (work / "helper.c").write_text("__declspec(dllexport) int helper_value(void) { return 42; }\n")
    helper_dir = work / "helper"
    helper_dir.mkdir(exist_ok=True)
    subprocess.run(
        [
            MINGW,
            "-shared",
            "-static-libgcc",
            "-o",
            str(helper_dir / "helper.dll"),
            str(work / "helper.c"),
            f"-Wl,--out-implib,{work / 'libhelper.a'}",
        ],
        check=True,
    )
    return helper_dir


def _windows_wheel(
    project: Path, variant: Variant, toolkit: Toolkit, work: Path, modules: list[tuple[str, str, list[str]]]
) -> Path:
    """A cp312 win_amd64 wheel of winprobe with real PE extension modules, as cibuildwheel would leave it."""
    rendered = next(r for r in render_plan(make_plan(project), project) if r.variant.dist_name == variant.dist_name)
    tree = work / "tree"
    package = tree / "winprobe"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""winprobe."""\n')
    (package / VARIANT_MODULE).write_text(rendered.files[VARIANT_MODULE])
    inject_loader(package / "__init__.py")
    # CUDA 12+ ship an MSVC cudart.lib (in 13 a static loader built with /guard:cf that mingw cannot link): make
    # the runtime's import library from the real DLL's exports, as provisioning does for the DLLs without one.
    runtime_dll = next(toolkit.site.rglob(LAYOUTS[variant.major][0]))
    (work / "cudart.def").write_text(def_file(runtime_dll))
    subprocess.run(
        [DLLTOOL, "-d", str(work / "cudart.def"), "-l", str(work / "libcudart.a"), "-m", "i386:x86-64"], check=True
    )
    libs = [f"-L{work}", f"-L{toolkit.prefix / 'lib' / 'x64'}"]
    for module, source, link in modules:
        (work / f"{module}.c").write_text(source)
        subprocess.run(
            [
                MINGW,
                "-shared",
                "-static-libgcc",
                "-o",
                str(package / f"{module}.cp312-win_amd64.pyd"),
                str(work / f"{module}.c"),
                *libs,
                *link,
            ],
            check=True,
        )
    dist_info = tree / f"{variant.dist_name.replace('-', '_')}-0.1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {variant.dist_name}\nVersion: 0.1.0\n")
    (dist_info / "WHEEL").write_text(
        "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp312-cp312-win_amd64\n"
    )
    out = work / "built"
    out.mkdir()
    return pack(tree, out)


def _audit(wheel: Path, variant: Variant, toolkit: Toolkit) -> WheelAudit:
    """The audit of a repaired cp312 win_amd64 wheel, its binaries read as they are."""
    built = BuiltWheel(variant, Cell("3.12", "windows-amd64"), wheel, None, toolkit, None)
    read_binaries_of(built)
    return audit_wheel(built)


def _delvewheel(wheel: Path, variant: Variant, helper_dir: Path, work: Path) -> Path:
    # delvewheel separates DLL names with ':' when it runs on Linux (';' on Windows, as the rendered command has).
    excluded = ":".join(excluded_libraries(variant, "windows"))
    out = work / "repaired"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "delvewheel",
            "repair",
            "--exclude",
            excluded,
            "--add-path",
            str(helper_dir),
            "-w",
            str(out),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    return next(out.glob("*.whl"))


@pytest.mark.parametrize("major", [11, 12, 13])
def test_delvewheel_vendors_the_helper_but_no_cuda_dll_and_the_loader_is_right(
    major: int,
    project: Path,
    toolkits: dict[int, Toolkit],
    tmp_path: Path,
    tools: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    variant = _variant(project, major)
    toolkit = toolkits[major]
    helper_dir = _helper_dll(tmp_path)
    _import_lib_for("python312.dll", tmp_path)
    wheel = _windows_wheel(project, variant, toolkit, tmp_path, [BLAS, RUNTIME])
    cudart, cublas, loader_dirs = LAYOUTS[major]
    blas = read_pe(next((tmp_path / "tree").rglob("_blas*.pyd")))
    assert {cudart, cublas, "helper.dll", "python312.dll"} <= set(blas.imports)

    repaired = _delvewheel(wheel, variant, helper_dir, tmp_path)

    names = zipfile.ZipFile(repaired).namelist()
    assert any(Path(n).name.startswith("helper") and n.endswith(".dll") for n in names), names
    assert not [n for n in names if "cudart" in n.lower() or "cublas" in n.lower() or "nvcuda" in n.lower()]
    audit = _audit(repaired, variant, toolkit)
    assert audit.passed, audit.all_problems()

    # The SBOM the repair writes of a PE wheel: each module tied to the NVIDIA wheels its import table names.
    built = BuiltWheel(variant, Cell("3.12", "windows-amd64"), repaired, None, toolkit, None)
    repair(built, tmp_path / "with-sbom")
    source = source_identity(variant.recipe.source, variant.recipe_dir)
    assert sbom_problems(built.path, source, linked(built, built.binaries)) == []
    blas_module = next(m for m in built.binaries if "/_blas" in m)
    wheels = {component_table().get(name, major).distribution for name in ("cudart", "cublas")}  # type: ignore[union-attr]
    assert {r.name for r in read_sbom(built.path)[0].requires if blas_module in r.linked_by} == wheels
    assert read_sbom(built.path)[0].grafted == (Grafted("helper.dll", "", "", "delvewheel"),)

    # The loader, run as on Windows: sys.platform and os.add_dll_directory stand in for a Windows host. First
    # with NVIDIA's DLLs beside the package, then with them in another sys.path entry (pip install --target).
    site = tmp_path / "site-packages"
    with zipfile.ZipFile(repaired) as archive:
        archive.extractall(site)
    target = tmp_path / "target"
    for name in variant.components(optional=False):
        layout = component_table().get(name, major).windows  # type: ignore[union-attr]
        assert layout is not None and layout.dll_dir
        for root in (site, target):
            (root / layout.dll_dir).mkdir(parents=True, exist_ok=True)
            (root / layout.dll_dir / layout.libraries[0]).write_bytes(b"")
    (tmp_path / "cuda_path" / "bin").mkdir(parents=True)
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "cuda_path"))
    code = (site / "winprobe" / VARIANT_MODULE).read_text()
    cuda_path_bin = str(tmp_path / "cuda_path" / "bin")
    for root, sys_path in ((site, [str(site)]), (target, [str(target), str(site)])):
        if root == target:
            shutil.rmtree(site / "nvidia")
        monkeypatch.setattr(sys, "path", sys_path)
        added: list[str] = []
        monkeypatch.setattr(os, "add_dll_directory", lambda d, added=added: added.append(d) or d, raising=False)
        loader = types.ModuleType("winprobe._cuda_variant")
        loader.__file__ = str(site / "winprobe" / VARIANT_MODULE)
        exec(compile(code, loader.__file__, "exec"), loader.__dict__)
        expected = [str(root.joinpath(*rel.split("/"))) for rel in loader_dirs] + [cuda_path_bin]
        assert added == expected
        loader.__dict__["_find_cuda"]()  # idempotent
        assert added == expected
    assert "from . import _cuda_variant" in (site / "winprobe" / "__init__.py").read_text()


def test_a_module_importing_nvcuda_eagerly_is_rejected(
    project: Path, toolkits: dict[int, Toolkit], tmp_path: Path, tools: None
) -> None:
    variant = _variant(project, 12)
    toolkit = toolkits[12]
    helper_dir = _helper_dll(tmp_path)
    _import_lib_for("python312.dll", tmp_path)
    _import_lib_for("nvcuda.dll", tmp_path)
    wheel = _windows_wheel(project, variant, toolkit, tmp_path, [BLAS, EAGER_RUNTIME])
    repaired = _delvewheel(wheel, variant, helper_dir, tmp_path)

    audit = _audit(repaired, variant, toolkit)

    runtime = next(b for b in audit.binaries if b.module == "winprobe._runtime")
    assert any("links the driver nvcuda.dll" in p for p in runtime.problems), runtime.problems
    assert not audit.passed


@pytest.mark.parametrize(
    ("major", "dll", "expected"), [(11, "cudart64_110.dll", "cudaMalloc"), (12, "cublas64_12.dll", "cublasCreate_v2")]
)
def test_def_file_lists_the_real_dlls_exports(
    major: int, dll: str, expected: str, toolkits: dict[int, Toolkit], tmp_path: Path, tools: None
) -> None:
    toolkit = toolkits[major]
    path = next(toolkit.site.rglob(dll))
    text = def_file(path)
    lines = text.splitlines()
    assert lines[:2] == [f"LIBRARY {dll}", "EXPORTS"]
    listed = [line.strip() for line in lines[2:]]
    assert listed == exports(path) and len(listed) > 100 and expected in listed
    # The proof that it is usable: mingw's dlltool makes an import library from it, and a program links with it.
    (tmp_path / "x.def").write_text(text)
    subprocess.run(
        [DLLTOOL, "-d", str(tmp_path / "x.def"), "-l", str(tmp_path / "libx.a"), "-m", "i386:x86-64"], check=True
    )
    (tmp_path / "use.c").write_text(f"extern int {expected}(void *); int main(void) {{ return {expected}(0); }}\n")
    subprocess.run(
        [MINGW, "-o", str(tmp_path / "use.exe"), str(tmp_path / "use.c"), f"-L{tmp_path}", "-lx"], check=True
    )
    assert dll in read_pe(tmp_path / "use.exe").imports


@pytest.mark.parametrize("major", [11, 12, 13])
def test_cibuildwheel_prints_exactly_the_matrix_windows_identifiers(major: int) -> None:
    variant = next(v for v in make_plan(REPO).variants if v.major == major)
    expected = sorted(c.identifier for c in variant.cells if c.platform == "windows-amd64")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIBW_")}
    printed = subprocess.run(
        [sys.executable, "-m", "cibuildwheel", "--print-build-identifiers", "--platform", "windows"],
        cwd=REPO / "build" / "variants" / variant.dist_name,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert sorted(printed.stdout.split()) == expected
    assert expected  # every CUDA major is built for Windows (matrix.yaml), CUDA 11 with the 14.29 toolset


def test_windows_build_on_linux_explains_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(REPO), "build", "--cuda", "12", "--platform", "windows"]) == 2
    assert "Windows wheels are built on Windows" in capsys.readouterr().err


@pytest.mark.parametrize("major", [11, 12, 13])
def test_the_windows_cuda_home_is_laid_out_as_nvidias(major: int, toolkits: dict[int, Toolkit]) -> None:
    toolkit = toolkits[major]
    prefix = toolkit.prefix
    nvcc = prefix / "bin" / "nvcc.exe"
    assert nvcc.is_file() and not nvcc.is_symlink()  # nvcc reads the nvcc.profile beside its own path
    assert "/LIBPATH:$(TOP)/lib/x64" in (prefix / "bin" / "nvcc.profile").read_text()
    assert (prefix / "nvvm" / "bin" / "cicc.exe").exists() and (prefix / "bin" / "crt" / "link.stub").exists()
    for library in ("cudart.lib", "cudart_static.lib", "cuda.lib", "cublas.lib", "nvrtc.lib"):
        assert (prefix / "lib" / "x64" / library).is_file(), library
    assert (prefix / "include" / "cuda_runtime.h").is_file() and (prefix / "include" / "nvtx3").is_dir()
    assert toolkit.nvcc.source == ("pip" if major == 13 else "redist")
    assert toolkit.nvcc_version == "(not run on this host)"  # a Windows nvcc.exe does not run on Linux
