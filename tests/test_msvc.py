"""The MSVC toolset a Windows build runs with: the newest installed one the CUDA release's nvcc accepts, set up by
vcvarsall.bat. A Visual Studio installation cannot exist on this Linux host: its folder tree is made here, and
cmd.exe's output is given as text."""

from __future__ import annotations

from pathlib import Path

import pytest

from wheelfactory.components import toolkit_table
from wheelfactory.errors import UserError
from wheelfactory.toolkit import msvc


def _visual_studio(tmp_path: Path, toolsets: list[str]) -> Path:
    installation = tmp_path / "BuildTools"
    for toolset in toolsets:
        (installation / "VC" / "Tools" / "MSVC" / toolset / "bin").mkdir(parents=True)
    (installation / "VC" / "Tools" / "MSVC" / "not-a-toolset").mkdir()
    return installation


@pytest.mark.parametrize(
    ("release", "chosen"),
    [("11.8", "14.29.30133"), ("12.4", "14.44.35207"), ("12.9", "14.44.35207"), ("13.0", "14.44.35207")],
)
def test_the_newest_msvc_toolset_the_release_accepts_is_chosen(tmp_path: Path, release: str, chosen: str) -> None:
    installation = _visual_studio(tmp_path, ["14.44.35207", "14.29.30133", "14.39.33519"])
    available = msvc.toolsets(installation)
    assert available == ["14.29.30133", "14.39.33519", "14.44.35207"]
    newest = toolkit_table().releases[release].msvc
    if release == "11.8":
        available.remove("14.39.33519")  # windows-2022 carries 14.29 beside its current toolset
    assert msvc.choose(available, newest, release, False, installation) == chosen


def test_without_an_accepted_toolset_the_build_stops_or_takes_the_recipes_opt_in(tmp_path: Path) -> None:
    installation = _visual_studio(tmp_path, ["14.44.35207"])
    with pytest.raises(UserError, match=r"nvcc 11\.8 accepts MSVC toolsets up to 14\.39; .* has 14\.44\.35207"):
        msvc.choose(msvc.toolsets(installation), "14.39", "11.8", False, installation)
    assert msvc.choose(msvc.toolsets(installation), "14.39", "11.8", True, installation) == "14.44.35207"


def test_vcvarsall_sets_up_the_chosen_toolset() -> None:
    command = msvc.vcvars_command(Path(r"C:\BuildTools"), "14.29.30133")
    assert command == [
        "cmd.exe",
        "/d",
        "/c",
        r'call "C:\BuildTools\VC\Auxiliary\Build\vcvarsall.bat" x64 -vcvars_ver=14.29 >nul && set',
    ]
    output = "INCLUDE=C:\\VC\\include;C:\\SDK\\include\nPath=C:\\VC\\bin\\Hostx64\\x64;C:\\Windows\n=C:=C:\\work\n"
    assert msvc.parse_set(output) == {
        "INCLUDE": "C:\\VC\\include;C:\\SDK\\include",
        "Path": "C:\\VC\\bin\\Hostx64\\x64;C:\\Windows",
    }


def test_a_host_without_visual_studio_is_told_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PROGRAMFILES(X86)", str(tmp_path))  # no vswhere.exe there
    with pytest.raises(UserError, match="no Visual Studio with the C\\+\\+ build tools on this host"):
        msvc.environment("11.8", "14.39", False)
