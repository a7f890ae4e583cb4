"""The Windows build container: its definition, the command that runs a build in it, and the CI job that builds
both. Windows containers cannot run on this Linux host, so this is checked statically; the workflow
(.github/workflows/windows-container.yml) builds the image and a wheel in it on a windows-2022 runner."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from dockerfile_parse import DockerfileParser

from wheelfactory.cli import main
from wheelfactory.components import toolkit_table
from wheelfactory.platforms.windows import container_command

from .conftest import REPO

DOCKERFILE = REPO / "docker" / "windows" / "Dockerfile"
# The Visual Studio component of each MSVC toolset the image installs (v143 is the current one, 14.4x).
TOOLSETS = {
    "Microsoft.VisualStudio.Component.VC.Tools.x86.x64": "14.44",
    "Microsoft.VisualStudio.Component.VC.14.29.16.11.x86.x64": "14.29",
}


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    return DockerfileParser(path=str(DOCKERFILE))


def test_the_image_is_the_runners_windows_with_a_shell_that_stops_on_errors(dockerfile: DockerfileParser) -> None:
    assert DOCKERFILE.read_text().startswith("# escape=`\n")  # Windows paths keep their backslashes
    # Server Core LTSC 2022: what windows-2022 runs, so the container may use process isolation there.
    assert dockerfile.baseimage == "mcr.microsoft.com/windows/servercore:ltsc2022"
    instructions = [i["instruction"] for i in dockerfile.structure if i["instruction"] != "COMMENT"]
    assert instructions[:2] == ["FROM", "SHELL"]
    for add in (i["value"] for i in dockerfile.structure if i["instruction"] == "ADD"):
        assert add.startswith("https://"), add
    assert not re.search(r":latest\b", DOCKERFILE.read_text())


def test_every_cuda_release_finds_an_msvc_toolset_its_nvcc_accepts(dockerfile: DockerfileParser) -> None:
    install = next(i["value"] for i in dockerfile.structure if "vs_buildtools.exe --quiet" in i["value"])
    components = set(re.findall(r"--add (\S+)", install))
    assert "Microsoft.VisualStudio.Workload.VCTools" in components
    installed = [version for component, version in TOOLSETS.items() if component in components]
    for name, release in toolkit_table().releases.items():
        newest = tuple(int(p) for p in release.msvc.split("."))
        assert any(tuple(int(p) for p in v.split(".")) <= newest for v in installed), name
    assert 'IF "%ERRORLEVEL%"=="3010" EXIT 0' in install  # "reboot required" is success in a container


def test_the_build_runs_by_nox_inside_with_the_project_and_cache_mounted() -> None:
    command = container_command(
        "docker",
        "wheelfactory-windows:ci",
        Path("D:/work/project"),
        Path("C:/Users/me/.cache/wheelfactory"),
        12,
        ["--python", "3.12", "--recipe", "cuprobe", "--platform", "windows"],
    )
    assert command == [
        "docker", "run", "--rm",
        "--volume", "D:/work/project:C:\\project",
        "--volume", "C:/Users/me/.cache/wheelfactory:C:\\wheelfactory-cache",
        "--env", "WHEELFACTORY_CACHE=C:\\wheelfactory-cache",
        "--env", "CIBW_CACHE_PATH=C:\\wheelfactory-cache\\cibuildwheel",
        "--workdir", "C:\\project",
        "wheelfactory-windows:ci",
        "python", "-m", "nox", "-s", "build-cuda12", "--",
        "--python", "3.12", "--recipe", "cuprobe", "--platform", "windows",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("platform", "message"),
    [
        ("linux", "--container is for Windows builds (--platform windows); Linux builds run in --image"),
        ("windows", "a Windows build container runs on a Windows Docker host — this one is not"),
    ],
)
def test_container_builds_say_where_they_run(platform: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["--root", str(REPO), "build", "--cuda", "12", "--platform", platform, "--container", "img"])
    assert status == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"


def test_the_ci_job_builds_the_image_and_a_wheel_in_it() -> None:
    workflow = yaml.load((REPO / ".github/workflows/windows-container.yml").read_text(), Loader=yaml.BaseLoader)
    job = workflow["jobs"]["container"]
    assert job["runs-on"] == "windows-2022"
    runs = [step.get("run", "") for step in job["steps"]]
    build = next(r for r in runs if r.startswith("docker build"))
    tag = build.split("-t ")[1].split()[0]
    assert build.endswith("docker/windows")
    assert any(r.startswith("nox -s build-cuda") and f"--platform windows --container {tag}" in r for r in runs)
