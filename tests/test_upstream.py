"""Other people's packages through the whole factory, built unmodified: cuvec (scikit-build-core, CMake, SWIG and
pybind11, version from setuptools-scm) and pyvkfft (setup.py, nvcc, NVRTC and the driver) from their PyPI sdists,
and a setuptools source shaped like CuPy (tests/sources/multipkg). Each also shows the gate that stops the
broken build its own build script lets through silently.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from wheelfactory.binaries.wheelfile import metadata, unpack
from wheelfactory.errors import ToolFailure

from .conftest import Built, add_multipkg, build_recipe
from .cuobjdump import as_cuobjdump_names, listed, ptx_versions

pytestmark = [pytest.mark.slow, pytest.mark.docker]
CUDA_LIBRARIES = ("libcudart", "libnvrtc", "libcublas", "libcuda.")


def _checks(built: Built, tier: int) -> dict[str, tuple[bool, str]]:
    result = next(t for t in built.record.smoke if t.tier == tier)
    return {check.name: (check.ok, check.detail) for check in result.checks}


def _members(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


# Among CI's slowest (2026-11-26: 66 s, the setup of its first test): cuvec from its sdist, a CMake build with
# nvcc for every architecture of CUDA 13, shared by the tests of it below.
@pytest.fixture(scope="session")
def cuvec13(tmp_path_factory: pytest.TempPathFactory, build_image: str) -> Built:
    return build_recipe(tmp_path_factory.mktemp("cuvec13"), 13, build_image, "cuvec")


def test_cuvec_reaches_dist_with_its_device_code(cuvec13: Built) -> None:
    record = cuvec13.record
    assert record.passed, record.why_not()
    wheel = cuvec13.wheel
    assert wheel.is_file() and wheel.name.startswith("cuvec_cuda13x-6.0.1-cp312-cp312-manylinux")
    found = metadata(wheel)
    assert found["Version"] == "6.0.1"  # setuptools-scm, from the sdist's PKG-INFO
    assert not [r for r in found.get_all("Requires-Dist") or [] if r.startswith("nvidia-")]  # cudart is static
    binaries = {b.module: b for b in record.built.binaries.values() if b.module}
    assert set(binaries) == {
        "cuvec.cuvec_cpython",
        "cuvec.cuvec_pybind11",
        "cuvec._cuvec_swig",
        "cuvec.example_cpython",
        "cuvec.example_pybind11",
        "cuvec._example_swig",
    }
    for module in ("cuvec.example_cpython", "cuvec.example_pybind11", "cuvec._example_swig"):
        assert binaries[module].device_code, module  # the recipe's device_code
    for binary in binaries.values():
        assert not [n for n in binary.needed if n.startswith(CUDA_LIBRARIES)], binary.member
    assert not [m for m in _members(wheel) if Path(m).name.startswith(CUDA_LIBRARIES)]
    assert "cuvec/_cuda_variant.py" in _members(wheel)
    # Its modules load the CUDA runtime statically and the driver when first used: they import with no CUDA at all.
    tier1 = _checks(cuvec13, 1)
    for module in binaries:
        assert tier1[f"import {module} → ok"][0], module
    build_log = record.built.run.log.read_text() if record.built.run else ""
    assert "Could not find CUDA" not in build_log


def test_the_fatbin_reader_agrees_with_cuobjdump_on_cuvecs_modules(
    cuvec13: Built, cuobjdump: Path, tmp_path: Path
) -> None:
    """Every binary of cuvec's wheel that carries device code (CMake's CUDA support compiled it, not the factory's
    flags), read by the reader and by NVIDIA's cuobjdump; and the report's answer for the wheel."""
    tree = unpack(cuvec13.wheel, tmp_path / "tree")
    with_code = [b for b in cuvec13.record.built.binaries.values() if b.fatbin]
    assert {"cuvec.example_cpython", "cuvec.example_pybind11", "cuvec._example_swig"} <= {b.module for b in with_code}
    for binary in with_code:
        path = tree / binary.member
        assert as_cuobjdump_names(binary.fatbin) == listed(cuobjdump, path), binary.member
        assert [e.ptx_isa for e in binary.fatbin if e.kind == "ptx"] == ptx_versions(cuobjdump, path)
    (reported,) = json.loads((cuvec13.root / "dist" / "report.json").read_text())["wheels"]
    gpu = reported["gpu_code"]
    assert gpu["sass"] == [f"sm_{a}" for a in (75, 80, 86, 89, 90, 100, 120)] and gpu["ptx_isa"] == "9.0"
    assert gpu["minimum_driver"]["version"] == "580.65.06" and "Turing to Blackwell" in gpu["runs_on"]


# Among CI's slowest (2026-11-26: 19 s): a second cuvec build, with CUDA hidden from its CMake, which the audit
# must keep out of dist/; its C++ comes from the compiler cache the first filled.
def test_a_cpu_only_cuvec_is_kept_out_of_dist(tmp_path: Path, build_image: str) -> None:
    # Its CMakeLists falls back to a CPU-only build, with a warning and nothing more, when CMake finds no CUDA.
    # The toolkit hidden from find_package(CUDAToolkit) makes that happen here.
    hidden = "-DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCMAKE_CUDA_ARCHITECTURES=$CMAKE_CUDA_ARCHITECTURES"
    built = build_recipe(tmp_path, 13, build_image, "cuvec", CMAKE_ARGS=hidden)
    assert built.record.built.run is not None
    assert "Could not find CUDA: using CPU" in built.record.built.run.log.read_text()
    assert not built.record.passed
    problems = built.record.audit.all_problems() if built.record.audit else []
    for module in ("example_cpython", "example_pybind11", "_example_swig"):
        assert any(f"cuvec/{module}." in p and "carries no device code" in p for p in problems), problems
    assert not list((built.root / "dist").glob("*.whl"))


# Among CI's slowest (2026-11-26: 32 s): pyvkfft built from its sdist, whose modules link the driver.
def test_pyvkfft_reaches_dist_and_says_what_needs_the_driver(tmp_path: Path, build_image: str, cuobjdump: Path) -> None:
    built = build_recipe(tmp_path, 12, build_image, "pyvkfft")
    record = built.record
    assert record.passed, record.why_not()
    (library,) = record.built.binaries.values()
    assert library.module == "pyvkfft._vkfft_cuda"
    assert not library.importable  # a ctypes library named like a module: no PyInit__vkfft_cuda
    assert "libcuda.so.1" in library.needed and any(n.startswith("libnvrtc.so.12") for n in library.needed)
    assert library.rpath == ("$ORIGIN/../nvidia/cuda_nvrtc/lib",)
    found = metadata(built.wheel)
    requires = found.get_all("Requires-Dist") or []
    doc = ["nbsphinx", "nbsphinx-link", "sphinx", "sphinx-argparse", "sphinx-rtd-theme"]
    assert sorted(requires) == sorted(
        ["numpy", "nvidia-cuda-nvrtc-cu12<13,>=12.4", "psutil", *(f'{r}; extra == "doc"' for r in doc)]
    )
    # setup()'s extras_require and long_description (its README.rst) reach the wheel, with the variant's note.
    assert found.get_all("Provides-Extra") == ["doc"]
    assert found["Description-Content-Type"] == "text/x-rst"
    description = found.get_payload()
    assert description.startswith("This is the CUDA 12.x build of ``pyvkfft`` (built against CUDA 12.4)")
    assert "pyvkfft - python interface to the CUDA and OpenCL backends of VkFFT" in description
    # Without CUDA the library fails on NVRTC; with NVIDIA's wheels, on the driver no GPU-free machine has.
    load = next(name for name in _checks(built, 1) if "ctypes.CDLL" in name)
    assert "→ OSError (links" in load
    assert "libnvrtc.so.12" in _checks(built, 1)[load][1]
    assert "libcuda.so.1: cannot open shared object file" in _checks(built, 2)[load][1]
    assert _checks(built, 1)["import pyvkfft → ok"][0]
    # Its FFT kernels are compiled by NVRTC at run time; the library nvcc built carries device code of its own,
    # for the factory's architectures, which the reader and cuobjdump list alike.
    (reported,) = json.loads((built.root / "dist" / "report.json").read_text())["wheels"]
    assert reported["gpu_code"]["sass"] == [f"sm_{a}" for a in (70, 75, 80, 86, 89, 90)]
    assert reported["gpu_code"]["minimum_driver"] == {
        "version": "550.54.14",
        "why": "PTX ISA 8.4 needs the driver of CUDA 12.4",
    }
    path = unpack(built.wheel, tmp_path / "tree") / library.member
    assert as_cuobjdump_names(library.fatbin) == listed(cuobjdump, path)
    assert [e.ptx_isa for e in library.fatbin if e.kind == "ptx"] == ptx_versions(cuobjdump, path)


def test_pyvkfft_built_without_nvcc_is_kept_out_of_dist(tmp_path: Path, build_image: str) -> None:
    # Its setup.py looks for nvcc in $CUDA_PATH/bin, $CUDA_HOME/bin and on PATH; finding none, it warns and
    # builds the wheel without its CUDA library (a bare except). Here that leaves no extension at all, and
    # cibuildwheel refuses the pure-Python wheel before the audit sees it; the audit's declared-module check is
    # still what the failure says.
    with pytest.raises(ToolFailure) as failure:
        build_recipe(tmp_path, 13, build_image, "pyvkfft", CUDA_HOME="/nonexistent/cuda", CUDA_PATH="$CUDA_HOME")
    message = str(failure.value)
    assert message.startswith("pyvkfft-cuda13x: the build made a wheel without any extension: declared module")
    assert "declared module pyvkfft._vkfft_cuda is missing from the wheel — the build left it out" in message
    log = Path(message.rsplit("(log: ", 1)[1].rstrip(")"))
    assert "Skipping pyvkfft.cuda module installation" in log.read_text()
    assert not list((tmp_path / "project/dist").glob("*.whl"))


def test_a_setuptools_source_with_two_packages(tmp_path: Path, build_image: str) -> None:
    built = build_recipe(tmp_path, 13, build_image, "multipkg", add=add_multipkg)
    assert built.record.passed, built.record.why_not()
    members = _members(built.wheel)
    # The flat layout's two packages, found through the source's own [tool.setuptools.packages.find]; each
    # imports the variant module first.
    for package in ("multipkg", "multipkgx"):
        assert f"{package}/_cuda_variant.py" in members
        with zipfile.ZipFile(built.wheel) as archive:
            assert "from . import _cuda_variant" in archive.read(f"{package}/__init__.py").decode()
    assert not [m for m in members if m.startswith("tools/")]
    found = metadata(built.wheel)
    assert found["Version"] == "1.4.0"
    assert sorted(found.get_all("Requires-Dist") or []) == [
        "nvidia-cuda-runtime<14,>=13.0",
        # The source's ctk extra pulled CUDA 12's libraries through NVIDIA's meta-package: here, CUDA 13's.
        'nvidia-cuda-runtime<14,>=13.0; extra == "ctk"',
        "packaging>=21",
        'pytest; extra == "test"',
    ]
    assert found.get_all("Provides-Extra") == ["test", "ctk"]
    assert found["Description-Content-Type"] == "text/markdown"
    assert found.get_payload().endswith("\n\n# multipkg\n\nA test source shaped like CuPy.\n")
    tier1 = _checks(built, 1)
    assert tier1["import multipkg._flags → ok"][0]
    assert next(ok for name, (ok, _) in tier1.items() if name.startswith("import multipkgx._runtime → ImportError"))


# CI's second slowest (2026-11-28: 164 s): a real upstream build from its sdist, pycuda's C++ and the subset of
# Boost it bundles (Python, thread, system), 45 translation units; the one setup.py-only source with a configure step.
# Heavy since the SBOM, the CUDA check and four more issues' tests brought CI past its 30 minutes: cuvec and pyvkfft
# still take real sdists to dist/ there, and test_stage.py holds the bare exec of the package's __init__.py.
@pytest.mark.heavy
def test_pycuda_reaches_dist_though_its_setup_py_runs_its_init_bare(tmp_path: Path, build_image: str) -> None:
    # setup.py execs pycuda/__init__.py in an empty dict for its version: the variant module's import that the
    # factory adds there must not run then (a relative import without __package__ fails), and must on import.
    built = build_recipe(tmp_path, 12, build_image, "pycuda")
    record = built.record
    assert record.passed, record.why_not()
    driver = next(b for b in record.built.binaries.values() if b.module == "pycuda._driver")
    assert {"libcuda.so.1", "libcurand.so.10"} <= set(driver.needed)
    assert driver.rpath == ("$ORIGIN/../nvidia/curand/lib",)
    assert metadata(built.wheel)["Version"] == "2026.1"
    # No GPU here: the driver module fails on libcuda.so.1 alone once cuRAND is installed; the package imports.
    ok, detail = next(v for name, v in _checks(built, 2).items() if name.startswith("import pycuda._driver"))
    assert ok and "libcuda.so.1: cannot open shared object file" in detail
