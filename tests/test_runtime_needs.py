"""What NVIDIA's libraries load at run time, read from their real wheels, against the table's `needs`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from wheelfactory import host
from wheelfactory.binaries.pe import named_dlls
from wheelfactory.binaries.wheelfile import unpack
from wheelfactory.components import ComponentTable, component_table
from wheelfactory.errors import ToolFailure
from wheelfactory.toolkit import runtime_needs
from wheelfactory.toolkit.runtime_needs import check_needs, read_needs

# The companions the issue names (nvJitLink under cuSPARSE and cuFFT, cuBLAS and cuSPARSE under cuSOLVER, NVRTC's
# builtins), per major: small wheels, no cuBLAS (600 MB) among them.
RELEASES = {11: "11.8", 12: "12.4", 13: "13.0"}
COMPONENTS = ("cusparse", "cufft", "cusolver", "nvrtc")


@pytest.fixture(scope="module", params=sorted(RELEASES))
def unpacked(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path, list[Path]]:
    """(major, a site-packages holding COMPONENTS' wheels at the release's versions, those wheels). The wheels are
    downloaded without their dependencies into the factory's wheel cache, as provisioning keeps them."""
    major = request.param
    entries = [component_table().get(c, major) for c in COMPONENTS]
    wanted = {canonicalize_name(e.distribution): SpecifierSet(e.versions[RELEASES[major]]) for e in entries if e}
    cache = host.cache_dir() / "wheels"
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest"]
    command += [str(cache), "--python-version", "3.12", "--platform", "manylinux_2_27_x86_64"]
    command += ["--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64"]
    with host.cache_lock("wheels"):
        subprocess.run([*command, *(f"{name}{spec}" for name, spec in wanted.items())], check=True)
    newest: dict[str, tuple[Version, Path]] = {}
    for wheel in cache.glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        if name in wanted and version in wanted[name] and version > newest.get(name, (Version("0"), wheel))[0]:
            newest[name] = (version, wheel)
    assert newest.keys() == wanted.keys()
    site = tmp_path_factory.mktemp(f"site{major}")
    for _, wheel in newest.values():
        unpack(wheel, site)
    return major, site, [wheel for _, wheel in newest.values()]


@pytest.mark.slow
def test_the_tables_needs_cover_what_nvidias_binaries_load(unpacked: tuple[int, Path, list[Path]]) -> None:
    major, site, wheels = unpacked
    found = read_needs(site, wheels, major, "linux")
    check_needs(found, major, "linux")  # the table is complete for these
    seen = {(n.component, n.needed) for n in found}
    if major >= 12:
        assert ("cusparse", "nvjitlink") in seen and ("cusolver", "cusparse") in seen
        # libcufft links no nvJitLink: it opens it by name, which only its strings show.
        (cufft,) = [
            n for n in found if n.component == "cufft" and n.needed == "nvjitlink" and "libcufft." in n.evidence
        ]
        assert "opens by name libnvJitLink.so." in cufft.evidence
    else:
        assert not any(n.needed == "nvjitlink" for n in found), "CUDA 11 has no nvJitLink"
        assert ("cusolver", "cublas") in seen
    # NVRTC opens its builtins by name, from its own wheel: what the variant module loads beside it.
    builtins = {n.opened for n in found if n.component == "nvrtc" and n.opened}
    assert any(name.startswith(f"libnvrtc-builtins.so.{major}.") for name in builtins if name), builtins


@pytest.mark.slow
@pytest.mark.parametrize("unpacked", [13], indirect=True)
def test_a_table_whose_opens_leave_nvrtcs_builtins_out_stops_provisioning(
    unpacked: tuple[int, Path, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    major, site, wheels = unpacked
    data = component_table().model_dump()
    data["components"]["nvrtc"]["majors"][major]["linux"]["opens"] = ("libnvrtc-builtins.so.13.*",)
    monkeypatch.setattr(runtime_needs, "component_table", lambda: ComponentTable.model_validate(data))
    with pytest.raises(ToolFailure) as failure:
        check_needs(read_needs(site, wheels, major, "linux"), major, "linux")
    # 13.0's wheel carries an .alt NVRTC whose own builtins the table must name too.
    assert (
        "nvrtc's linux `opens` leave out libnvrtc-builtins.alt.so.13.0 under CUDA 13 "
        "(libnvrtc.alt.so.13 opens libnvrtc-builtins.alt.so.13.0 by name)" in str(failure.value)
    )


@pytest.mark.slow
@pytest.mark.parametrize("unpacked", [12, 13], indirect=True)  # CUDA 11's cuSPARSE needs nothing
def test_a_table_that_leaves_a_need_out_stops_provisioning(
    unpacked: tuple[int, Path, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    major, site, wheels = unpacked
    data = component_table().model_dump()
    data["components"]["cusparse"]["majors"][major]["needs"] = ()
    monkeypatch.setattr(runtime_needs, "component_table", lambda: ComponentTable.model_validate(data))
    with pytest.raises(ToolFailure) as failure:
        check_needs(read_needs(site, wheels, major, "linux"), major, "linux")
    assert f"cusparse needs nvjitlink under CUDA {major} (libcusparse.so.12 links libnvJitLink.so.{major})" in str(
        failure.value
    )


def test_a_dll_opened_by_name_is_read_from_its_strings(tmp_path: Path) -> None:
    """A real PE DLL (mingw) that opens one DLL by a narrow name and one by a wide name, importing neither."""
    compiler = "x86_64-w64-mingw32-gcc"
    if shutil.which(compiler) is None:
        pytest.fail("needs mingw-w64: apt-get install gcc-mingw-w64-x86-64")
    source = tmp_path / "opener.c"
    source.write_text(
        "#include <windows.h>\n"
        '__declspec(dllexport) void *open_both(void) { LoadLibraryA("cublasLt64_13.dll");'
        ' return LoadLibraryW(L"nvJitLink_130_0.dll"); }\n'
    )
    dll = tmp_path / "opener.dll"
    subprocess.run([compiler, "-shared", "-o", str(dll), str(source)], check=True)
    assert {"cublasLt64_13.dll", "nvJitLink_130_0.dll"} <= named_dlls(dll)
