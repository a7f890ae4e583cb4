"""The component table, pinned to the facts verified against NVIDIA's wheels on the package index."""

from __future__ import annotations

import fnmatch

import pytest

from wheelfactory.components import component_table

# (component, major) -> distribution, Linux lib dir, a soname, Windows DLL dir, a DLL name; None = no wheel.
VERIFIED = {
    ("cudart", 11): (
        "nvidia-cuda-runtime-cu11",
        "nvidia/cuda_runtime/lib",
        "libcudart.so.11.0",
        "nvidia/cuda_runtime/bin",
        "cudart64_110.dll",
    ),
    ("cudart", 12): (
        "nvidia-cuda-runtime-cu12",
        "nvidia/cuda_runtime/lib",
        "libcudart.so.12",
        "nvidia/cuda_runtime/bin",
        "cudart64_12.dll",
    ),
    ("cudart", 13): (
        "nvidia-cuda-runtime",
        "nvidia/cu13/lib",
        "libcudart.so.13",
        "nvidia/cu13/bin/x86_64",
        "cudart64_13.dll",
    ),
    ("nvrtc", 11): (
        "nvidia-cuda-nvrtc-cu11",
        "nvidia/cuda_nvrtc/lib",
        "libnvrtc.so.11.2",
        "nvidia/cuda_nvrtc/bin",
        "nvrtc64_112_0.dll",
    ),
    ("nvrtc", 12): (
        "nvidia-cuda-nvrtc-cu12",
        "nvidia/cuda_nvrtc/lib",
        "libnvrtc.so.12",
        "nvidia/cuda_nvrtc/bin",
        "nvrtc64_120_0.dll",
    ),
    ("nvrtc", 13): (
        "nvidia-cuda-nvrtc",
        "nvidia/cu13/lib",
        "libnvrtc.so.13",
        "nvidia/cu13/bin/x86_64",
        "nvrtc64_130_0.dll",
    ),
    ("cublas", 11): (
        "nvidia-cublas-cu11",
        "nvidia/cublas/lib",
        "libcublas.so.11",
        "nvidia/cublas/bin",
        "cublas64_11.dll",
    ),
    ("cublas", 12): (
        "nvidia-cublas-cu12",
        "nvidia/cublas/lib",
        "libcublas.so.12",
        "nvidia/cublas/bin",
        "cublas64_12.dll",
    ),
    ("cublas", 13): (
        "nvidia-cublas",
        "nvidia/cu13/lib",
        "libcublas.so.13",
        "nvidia/cu13/bin/x86_64",
        "cublas64_13.dll",
    ),
    ("nccl", 11): ("nvidia-nccl-cu11", "nvidia/nccl/lib", "libnccl.so.2", None, None),
    ("nccl", 12): ("nvidia-nccl-cu12", "nvidia/nccl/lib", "libnccl.so.2", None, None),
    ("nccl", 13): ("nvidia-nccl-cu13", "nvidia/nccl/lib", "libnccl.so.2", None, None),
}

# Builtins carry the installed minor; the table matches them by pattern.
NVRTC_BUILTINS = {
    11: ("libnvrtc-builtins.so.11.8", "nvrtc-builtins64_118.dll"),
    12: ("libnvrtc-builtins.so.12.9", "nvrtc-builtins64_129.dll"),
    13: ("libnvrtc-builtins.so.13.5", "nvrtc-builtins64_135.dll"),
}


@pytest.mark.parametrize(("component", "major"), sorted(VERIFIED))
def test_entry_matches_verified_facts(component: str, major: int) -> None:
    distribution, lib_dir, soname, dll_dir, dll = VERIFIED[component, major]
    entry = component_table().get(component, major)
    assert entry is not None
    assert entry.distribution == distribution
    assert entry.linux is not None
    assert entry.linux.lib_dir == lib_dir
    assert soname in entry.linux.libraries
    if dll_dir is None:
        assert entry.windows is None
    else:
        assert entry.windows is not None
        assert entry.windows.dll_dir == dll_dir
        assert dll in entry.windows.libraries


@pytest.mark.parametrize("major", [11, 12, 13])
def test_nvrtc_builtins_match_by_pattern(major: int) -> None:
    table = component_table()
    soname, dll = NVRTC_BUILTINS[major]
    assert table.owner_of(soname, major, "linux", ["cudart", "nvrtc"]) == "nvrtc"
    assert table.owner_of(dll, major, "windows", ["cudart", "nvrtc"]) == "nvrtc"


def test_nvjitlink_does_not_exist_for_cuda_11() -> None:
    assert component_table().get("nvjitlink", 11) is None


def test_cuda_13_components_share_one_prefix_except_nccl() -> None:
    table = component_table()
    for name in ("cudart", "nvrtc", "cublas", "cufft", "curand", "cusolver", "cusparse", "nvjitlink"):
        entry = table.get(name, 13)
        assert entry is not None and entry.linux is not None
        assert entry.linux.lib_dir == "nvidia/cu13/lib", name
        assert not entry.distribution.endswith("-cu13"), name
    nccl = table.get("nccl", 13)
    assert nccl is not None and nccl.linux is not None and nccl.linux.lib_dir == "nvidia/nccl/lib"


def test_every_toolkit_floor_names_every_runtime_component() -> None:
    table = component_table()
    for name, component in table.components.items():
        for major, entry in component.majors.items():
            assert entry.versions, (name, major)
            assert all(toolkit.startswith(f"{major}.") for toolkit in entry.versions), (name, major)


def test_driver_is_never_a_component_library() -> None:
    table = component_table()
    for major in (11, 12, 13):
        assert not any(fnmatch.fnmatch("libcuda.so.1", p) for p in table.all_libraries(major, "linux"))
        assert not any(fnmatch.fnmatch("nvcuda.dll", p) for p in table.all_libraries(major, "windows"))
