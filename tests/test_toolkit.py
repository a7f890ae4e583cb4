"""The provisioned CUDA_HOME: exactly the matrix's toolkit, and a working nvcc for CUDA 11, 12 and 13.

Real NVIDIA wheels from the index, real nvcc (Debian's packaging of NVIDIA's binaries where no wheel has one),
compiled in the build image the way builds see the toolkit: a plain nvcc call and a CMake project with
enable_language(CUDA). NVIDIA's redistributable archives cannot be reached from here: that path runs its real
code (manifest, download, sha256 check, unpack, layout) against archives served from a local directory.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from packaging.specifiers import SpecifierSet

from wheelfactory.binaries.elf import read_elf
from wheelfactory.components import DebianRelease, component_table, toolkit_table
from wheelfactory.errors import ToolFailure
from wheelfactory.host import cache_dir
from wheelfactory.plan import Variant, copy_inputs, make_plan
from wheelfactory.platforms import linux
from wheelfactory.toolkit import redist
from wheelfactory.toolkit.debian import download
from wheelfactory.toolkit.prefix import driver_api
from wheelfactory.toolkit.provision import Toolkit, components_to_provision, provision

from .conftest import REPO, matrix_for, serve_redist_release, served

pytestmark = pytest.mark.slow

KERNEL = r"""
#include <cuda_runtime.h>
#include <cuda.h>
#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>
#include <cstdio>
__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }
extern "C" int launch(float *x) {
    CUdevice device;
    cuDeviceGet(&device, 0);
    nvtxRangePushA("scale");
    scale<<<1, 32>>>(x, 2.0f);
    nvtxRangePop();
    return cudaGetLastError();
}
int main() { int n = 0; printf("%d\n", cudaGetDeviceCount(&n)); return 0; }
"""

CMAKE_PROJECT = """
cmake_minimum_required(VERSION 3.18)
project(probe LANGUAGES CXX CUDA)
find_package(CUDAToolkit REQUIRED)
add_library(kernels SHARED kernel.cu)
target_link_libraries(kernels PRIVATE CUDA::cudart CUDA::cuda_driver)
add_executable(static_probe kernel.cu)
target_link_libraries(static_probe PRIVATE CUDA::cudart_static CUDA::cuda_driver)
message(STATUS "found CUDA ${CUDAToolkit_VERSION} at ${CUDAToolkit_LIBRARY_ROOT}")
"""

RECIPE = """
name: kernels
version: "0.1.0"
import: kernels
source: {path: source}
components: [cudart]
modules:
  kernels._k: [cudart]
"""


def _variant(root: Path, major: int, matrix: Path) -> Variant:
    return next(v for v in make_plan(root, matrix).variants if v.major == major)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_inputs(REPO, tmp_path_factory.mktemp("toolkit") / "project")
    (root / "recipes" / "kernels" / "source").mkdir(parents=True)
    (root / "recipes" / "kernels" / "recipe.yaml").write_text(RECIPE)
    return root


@pytest.fixture(scope="module")
def toolkits(project: Path, build_image: str) -> dict[int, tuple[Variant, Toolkit]]:
    matrix = matrix_for(project, build_image)
    found = {}
    for major in (11, 12, 13):
        variant = next(v for v in make_plan(project, matrix, ["kernels"]).variants if v.major == major)
        found[major] = (variant, provision(variant))
    return found


@pytest.mark.parametrize("major", [11, 12, 13])
def test_the_build_toolkit_is_exactly_the_matrix_release(
    major: int, toolkits: dict[int, tuple[Variant, Toolkit]]
) -> None:
    variant, toolkit = toolkits[major]
    release = variant.cuda.toolkit
    assert toolkit.release == release
    assert toolkit.nvcc_version.startswith(f"{release}."), toolkit.nvcc_version
    table = component_table()
    expected = {
        entry.distribution: SpecifierSet(entry.versions[release])
        for name in components_to_provision(variant)
        if (entry := table.get(name, major)) is not None
    }
    assert set(toolkit.versions) == set(expected)
    for distribution, version in toolkit.versions.items():
        assert expected[distribution].contains(version, prereleases=True), (distribution, version)
    # The index has newer minors of the runtime for every major than the matrix names (no drift to them).
    runtime = table.get("cudart", major)
    assert runtime is not None and toolkit.versions[runtime.distribution].startswith(f"{release}.")


@pytest.mark.docker
@pytest.mark.parametrize("major", [11, 12, 13])
def test_nvcc_and_cmake_compile_device_code_with_the_prefix(
    major: int, toolkits: dict[int, tuple[Variant, Toolkit]], build_image: str, tmp_path: Path
) -> None:
    variant, toolkit = toolkits[major]
    (tmp_path / "kernel.cu").write_text(KERNEL)
    (tmp_path / "CMakeLists.txt").write_text(CMAKE_PROJECT)
    # The very environment the rendered build configuration gives cibuildwheel, with the host seen at /host.
    environment = linux.environment(variant, "linux-x86_64", prefix=f"/host{toolkit.prefix}")
    environment["WHEELFACTORY_COMPILER_CACHE"] = ""
    environment["WHEELFACTORY_COMPILER_CACHE_DIR"] = ""
    exports = "\n".join(f'export {k}="{v}"' for k, v in environment.items())  # in order: later ones refer back
    script = f"""
        set -e
        {exports}
        sh /host{REPO}/src/wheelfactory/data/prepare-build.sh
        cd /host{tmp_path}
        nvcc --version | tail -2
        nvcc $NVCC_GENCODE -shared -Xcompiler -fPIC --cudart shared kernel.cu -o libplain.so -lcuda
        "$CUDA_HOME/bin/nvcc" -arch=sm_{variant.cuda_archs("linux-x86_64")[-1]} kernel.cu -o static_plain -lcuda
        cmake -S . -B /tmp/cmake-build
        cmake --build /tmp/cmake-build
        cp /tmp/cmake-build/libkernels.so /tmp/cmake-build/static_probe .
    """
    ran = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "-v", "/:/host", build_image, "bash", "-c", script],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert f"release {variant.cuda.toolkit}" in ran.stdout
    assert f"found CUDA {toolkit.nvcc_version}" in ran.stdout
    cudart = next(lib for lib in component_table().get("cudart", major).linux.libraries)  # type: ignore[union-attr]
    for shared in ("libplain.so", "libkernels.so"):
        needed = read_elf(tmp_path / shared).needed
        assert cudart in needed and "libcuda.so.1" in needed, (shared, needed)
    for static in ("static_plain", "static_probe"):
        needed = read_elf(tmp_path / static).needed
        assert "libcuda.so.1" in needed and not any(lib.startswith("libcudart") for lib in needed), needed
    host_compiler = next(line for line in ran.stdout.splitlines() if "nvcc's host compiler" in line)
    gcc = int(host_compiler.split("(GCC ")[1].split(";")[0])
    assert gcc <= toolkit_table().releases[variant.cuda.toolkit].gcc


def test_the_driver_stub_is_generated_from_cuda_h_where_no_source_has_one(
    toolkits: dict[int, tuple[Variant, Toolkit]],
) -> None:
    _, toolkit = toolkits[13]  # CUDA 13's nvcc comes from its pip wheel, which has no stub
    assert "generated from cuda.h" in toolkit.driver_stub
    stub = toolkit.prefix / "lib64" / "stubs" / "libcuda.so"
    with stub.open("rb") as f:
        elf = ELFFile(f)
        dynamic = elf.get_section_by_name(".dynamic")
        sonames = [tag.soname for tag in dynamic.iter_tags() if tag.entry.d_tag == "DT_SONAME"]
        exported = {s.name for s in elf.get_section_by_name(".dynsym").iter_symbols()}
    assert sonames == ["libcuda.so.1"]
    # plain, versioned and per-thread-default-stream entry points, as cuda.h's macros name them
    assert {"cuInit", "cuMemAlloc_v2", "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds", "cuLaunchKernel_ptsz"} <= exported
    assert set(driver_api(toolkit.prefix / "include" / "cuda.h")) <= exported


# ---------------------------------------------------------------------------------------------- NVIDIA's archives


@pytest.fixture
def local_redist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory served over HTTP on loopback, as WHEELFACTORY_CUDA_REDIST_URL; an empty factory cache."""
    directory = tmp_path / "served"
    directory.mkdir()
    with served(directory) as url:
        monkeypatch.setenv("WHEELFACTORY_CUDA_REDIST_URL", url)
        monkeypatch.setenv("WHEELFACTORY_CACHE", str(tmp_path / "cache"))
        yield directory


def _cuda12_variant(project: Path, toolkit: str) -> Variant:
    matrix = project / "only12.yaml"
    matrix.write_text(
        f'python: ["3.12"]\ncuda:\n  - {{major: 12, toolkit: "{toolkit}", '
        "platforms: {linux-x86_64: {runner: r, image: i}}}\n"
    )
    return next(v for v in make_plan(project, matrix, ["kernels"]).variants)


def test_nvcc_from_nvidias_archives_is_checked_unpacked_and_laid_out(local_redist: Path, project: Path) -> None:
    release = toolkit_table().releases["12.9"].redist
    assert release is not None
    serve_redist_release(local_redist, release, "12.9.86")

    toolkit = provision(_cuda12_variant(project, "12.9"))

    assert toolkit.nvcc.source == "redist"
    assert toolkit.nvcc.detail == f"NVIDIA redistrib_{release}.json: cuda_nvcc 12.9.86, cuda_cudart 12.9.86"
    assert toolkit.nvcc_version == "12.9.86"  # the archive's nvcc ran, through the prefix's wrapper
    prefix = toolkit.prefix
    assert (prefix / "libexec" / "nvcc").is_file() and not (prefix / "libexec" / "nvcc").is_symlink()
    assert (prefix / "libexec" / "nvcc.profile").read_text().startswith("# Written by wheelfactory")
    assert (prefix / "bin" / "crt" / "link.stub").resolve().read_text() == "stub"
    assert (prefix / "nvvm" / "bin" / "cicc").resolve().read_text() == "cicc"
    assert (prefix / "lib64" / "libcudart_static.a").is_file()
    assert toolkit.driver_stub == "NVIDIA's stubs/libcuda.so from the nvcc source"
    # Headers are the wheels', not the archive's.
    assert "the wheels' headers" not in (prefix / "include" / "crt" / "host_config.h").read_text()
    # The archives are cached: with the server gone, provisioning again needs nothing from it.
    shutil.rmtree(local_redist)
    assert provision(_cuda12_variant(project, "12.9")).nvcc_version == "12.9.86"


def test_an_archive_that_does_not_match_the_manifest_is_refused(local_redist: Path) -> None:
    serve_redist_release(local_redist, "12.9.1", "12.9.86", sha256_of_nvcc="0" * 64)
    manifest = redist.manifest("12.9.1", cache_dir())
    item = redist.archive(manifest, "cuda_nvcc", "linux-x86_64")

    with pytest.raises(
        ToolFailure, match=r"has sha256 [0-9a-f]{64}, the manifest says 0{64} — the download was refused"
    ):
        redist.fetch(item, cache_dir())

    assert not (cache_dir() / "redist" / item.relative_path).exists()


def test_an_nvcc_of_another_release_is_refused(local_redist: Path, project: Path) -> None:
    release = toolkit_table().releases["12.9"].redist
    assert release is not None
    serve_redist_release(local_redist, release, "12.8.93")
    with pytest.raises(ToolFailure, match=r"gave nvcc 12\.8\.93, but the matrix names CUDA 12\.9"):
        provision(_cuda12_variant(project, "12.9"))


def test_no_reachable_nvcc_source_says_what_was_tried(
    project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WHEELFACTORY_CUDA_REDIST_URL", "http://127.0.0.1:9/")  # the discard port: refused
    monkeypatch.setenv("WHEELFACTORY_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ToolFailure, match=r"no source of nvcc 12.9 serves this host:\n  redist: http://127.0.0.1:9/"):
        provision(_cuda12_variant(project, "12.9"))


# ---------------------------------------------------------------------------------------------- Debian


def test_a_debian_package_of_another_release_is_refused(tmp_path: Path) -> None:
    wrong = DebianRelease(suite="trixie", packages={"nvidia-cuda-toolkit": "12.3.107~"})
    with pytest.raises(
        ToolFailure, match=r"Debian trixie offers nvidia-cuda-toolkit 12\.4\.131~.*not the 12\.3\.107~\*"
    ):
        download(wrong, "x86_64", tmp_path)
    assert not list((tmp_path / "debian").rglob("*.deb"))


# ---------------------------------------------------------------------------------------------- host compiler


@pytest.mark.docker
@pytest.mark.parametrize(
    ("limit", "allow", "chosen"),
    [("11", "0", "/g++-11 (GCC 11;"), ("15", "0", "/g++ (GCC 12;"), ("9", "1", "/g++ (GCC 12;")],
)
def test_the_prepare_step_picks_a_host_compiler_within_the_release_limit(
    build_image: str, limit: str, allow: str, chosen: str
) -> None:
    if build_image != "manylinux-offline:latest":
        pytest.skip("the compilers asserted here are those of the offline image (GCC 12 and 11)")
    settings = {"WHEELFACTORY_GCC_MAX": limit, "WHEELFACTORY_CUDA_TOOLKIT": "11.8"}
    settings["WHEELFACTORY_ALLOW_UNSUPPORTED_COMPILER"] = allow
    script = "sh /repo/src/wheelfactory/data/prepare-build.sh && /opt/wheelfactory/nvcc-host/g++ -dumpversion"
    ran = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "-v", f"{REPO}:/repo:ro"]
        + [arg for name, value in settings.items() for arg in ("-e", f"{name}={value}")]
        + [build_image, "sh", "-c", script],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert "nvcc's host compiler is " in ran.stdout and chosen in ran.stdout, ran.stdout
    assert ran.stdout.strip().splitlines()[-1].split(".")[0] == chosen.split("GCC ")[1].rstrip(";")
