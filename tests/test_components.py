"""The component table, pinned to the facts verified against NVIDIA's wheels on the package index."""

from __future__ import annotations

import fnmatch

import pytest
from packaging.specifiers import SpecifierSet

from wheelfactory.components import component_table, gpu_generations, platforms, toolkit_table

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


def test_every_component_covers_exactly_the_known_releases_of_its_major() -> None:
    releases = toolkit_table().releases
    for name, component in component_table().components.items():
        for major, entry in component.majors.items():
            expected = {r for r in releases if r.startswith(f"{major}.")}
            assert set(entry.versions) == expected, (name, major)
            for toolkit, spec in entry.versions.items():
                SpecifierSet(spec)  # a valid specifier
                assert entry.floor(toolkit) in SpecifierSet(spec), (name, major, toolkit)


# Versions NVIDIA shipped with each release (its redistrib_<release>.json manifests), and the neighbours that
# belong to the next release: the build must take the first and never the second.
SHIPPED = [
    ("cudart", 12, "12.4", ["12.4.99", "12.4.127"], ["12.3.101", "12.5.39"]),
    ("cudart", 13, "13.0", ["13.0.48", "13.0.96"], ["13.1.80", "13.5.37"]),
    ("cublas", 13, "13.0", ["13.0.0.19", "13.0.2.14", "13.1.0.3"], ["13.1.1.3", "13.2.0.9"]),
    ("cufft", 12, "12.4", ["11.2.0.44", "11.2.1.3"], ["11.2.3.18", "11.0.12.1"]),
    ("cufft", 12, "12.9", ["11.4.0.6", "11.4.1.4"], ["11.3.3.83"]),
    ("cusolver", 12, "12.4", ["11.6.0.99", "11.6.1.9"], ["11.6.2.40", "11.5.4.101"]),
    ("cusparse", 13, "13.0", ["12.6.2.49", "12.6.3.3"], ["12.7.2.19"]),
    ("curand", 11, "11.8", ["10.3.0.86"], ["10.2.10.91"]),
    ("cccl", 12, "12.4", ["12.4.127.post1", "12.4.99"], ["12.5.39.post1"]),
]


@pytest.mark.parametrize(("component", "major", "toolkit", "inside", "outside"), SHIPPED)
def test_build_pins_admit_exactly_the_release(
    component: str, major: int, toolkit: str, inside: list[str], outside: list[str]
) -> None:
    entry = component_table().get(component, major)
    assert entry is not None
    spec = SpecifierSet(entry.build_requirement(toolkit).removeprefix(entry.distribution))
    assert all(spec.contains(v, prereleases=False) for v in inside), spec
    assert not any(spec.contains(v) for v in outside), spec


def test_driver_is_never_a_component_library() -> None:
    table = component_table()
    for major in (11, 12, 13):
        assert not any(fnmatch.fnmatch("libcuda.so.1", p) for p in table.all_libraries(major, "linux"))
        assert not any(fnmatch.fnmatch("nvcuda.dll", p) for p in table.all_libraries(major, "windows"))


def test_every_release_lists_its_architectures_and_the_defaults_are_among_them() -> None:
    table = toolkit_table()
    for release, settings in table.releases.items():
        assert settings.archs == tuple(sorted(set(settings.archs))), release
    for release, settings in table.releases.items():
        for platform, defaults in {"": settings.cuda_archs, **settings.platform_archs}.items():
            missing = set(defaults) - set(settings.archs)
            assert not missing, f"CUDA {release} {platform} defaults {sorted(missing)} are not in its list"
            assert defaults == tuple(sorted(defaults)), (release, platform)
        assert set(settings.platform_archs) <= set(platforms()), release
    assert 101 in table.releases["12.9"].archs and 101 not in table.releases["13.0"].archs  # renamed sm_110


def test_cuda_12_defaults_reach_blackwell_where_nvcc_does() -> None:
    """12.9's nvcc targets Blackwell: its defaults carry sm_100 and sm_120 as SASS, so Blackwell users on the
    R570 branch (CUDA 12.8's) need not JIT 12.9's compute_90 PTX, which their driver rejects."""
    releases = toolkit_table().releases
    assert {100, 120} <= set(releases["12.9"].cuda_archs) and max(releases["12.9"].cuda_archs) == 120
    assert {100, 120} <= set(releases["13.0"].cuda_archs)


def test_cuda_13_on_aarch64_adds_jetson_and_x86_64_keeps_the_release_defaults() -> None:
    """CUDA 13's SBSA wheels serve Jetson Thor (sm_110) and, from JetPack 7.2, Orin (sm_87): SASS runs only within
    its major and PTX only JITs upward, so only their own SASS reaches them. x86_64 and Windows are unchanged."""
    releases = toolkit_table().releases
    for name in ("13.0", "13.2"):
        release = releases[name]
        aarch64 = release.default_archs("linux-aarch64")
        assert set(aarch64) - set(release.cuda_archs) == {87, 110}
        assert release.default_archs("linux-x86_64") == release.default_archs("windows-amd64") == release.cuda_archs
    assert all(not r.platform_archs for name, r in releases.items() if not name.startswith("13."))


def test_every_default_architecture_has_a_generation_in_words() -> None:
    generations = gpu_generations()
    for settings in toolkit_table().releases.values():
        assert set(settings.archs) <= set(generations)
