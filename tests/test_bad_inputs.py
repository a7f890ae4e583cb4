"""Every bad input in tests/bad_inputs/cases prints its exact file:line:col message, exits 2, writes nothing."""

from __future__ import annotations

import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from wheelfactory.cli import main

CASES = Path(__file__).parent / "bad_inputs"
# case -> its lines under both commands, or {render: [...]} for a problem only rendering meets (the source's own
# files, which planning does not read); a cli- case -> {status: ..., stderr: [...]} of its own command line.
EXPECTED: dict[str, Any] = yaml.safe_load((CASES / "expected.yaml").read_text(encoding="utf-8"))
# A cli- case is a folder laid over the project, with the command line to run in the file `command-line`.
COMMAND_LINE = "command-line"
FILE_CASES = sorted(c for c in EXPECTED if not c.startswith("cli-"))
COMMAND_LINE_CASES = sorted(c for c in EXPECTED if c.startswith("cli-"))


def _install(case: str, root: Path) -> None:
    """A case is a matrix.yaml or a recipe.yaml for recipes/cuprobe/, or a folder laid over the project (its links
    kept as links: a case may plant one)."""
    path = CASES / "cases" / case
    if path.is_dir():
        shutil.copytree(path, root, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(COMMAND_LINE))
        return
    file = path.with_suffix(".yaml")
    shutil.copy(file, root / "matrix.yaml" if case.startswith("matrix-") else root / "recipes/cuprobe/recipe.yaml")


def _expected(case: str, command: str) -> list[str] | None:
    expected = EXPECTED[case]
    return expected.get(command) if isinstance(expected, dict) else expected


def _snapshot(directory: Path, outside: str = "") -> dict[str, bytes]:
    """Every file under `directory` (outside its folder `outside`, where one is named) by its bytes, never read
    through a link: a link by its target."""
    return {
        str(p.relative_to(directory)): os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if (p.is_file() or p.is_symlink()) and not (outside and p.relative_to(directory).parts[0] in (outside, "build"))
    }


def test_corpus_is_large_and_fully_specified() -> None:
    cases = sorted(p.stem if p.is_file() else p.name for p in (CASES / "cases").iterdir())
    assert len(cases) >= 20
    assert cases == sorted(EXPECTED)


@pytest.mark.parametrize("case", FILE_CASES)
@pytest.mark.parametrize("command", ["render", "plan"])
def test_bad_input_is_reported_at_its_place(
    case: str, command: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = _expected(case, command)
    assert main(["--root", str(project), "render"]) == 0
    before = _snapshot(project / "build")
    _install(case, project)
    capsys.readouterr()

    status = main(["--root", str(project), command])

    captured = capsys.readouterr()
    if expected is None:  # a problem of the source, which planning does not read
        assert status == 0, captured.err
        return
    assert status == 2
    assert captured.err.splitlines() == expected
    assert captured.out == ""
    assert _snapshot(project / "build") == before


@pytest.mark.parametrize("case", COMMAND_LINE_CASES)
def test_bad_command_line_is_reported_with_the_rest(
    case: str,
    project: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The options' problems with the files' (a value given twice counts once), and a step that failed drawn
    failed. An expected line ending in `…` is the start of the line (what follows is the engine's own words);
    durations are left out. The command runs in the project (its paths are the project's); nothing is made
    beside it, and a case's files outside recipes/ stay as the case laid them."""
    argv = shlex.split((CASES / "cases" / case / COMMAND_LINE).read_text(encoding="utf-8"))
    if "--image" in argv:
        request.getfixturevalue("docker")  # the engine is asked for the image
    _install(case, project)
    monkeypatch.chdir(project)
    beside = sorted(project.parent.iterdir())
    laid = _snapshot(project, outside="recipes")
    capsys.readouterr()

    status = main(["--root", str(project), *argv])

    captured = capsys.readouterr()
    lines = [re.sub(r" \(\d+s\)$", "", line) for line in captured.err.splitlines()]
    expected: list[str] = EXPECTED[case]["stderr"]
    assert (status, len(lines)) == (EXPECTED[case]["status"], len(expected)), captured.err
    for line, wanted in zip(lines, expected, strict=True):
        assert line.startswith(wanted[:-1]) if wanted.endswith("…") else line == wanted
    assert not (project / "dist").exists()
    assert sorted(project.parent.iterdir()) == beside
    assert _snapshot(project, outside="recipes") == laid


def test_cli_process_exits_2_without_traceback(project: Path) -> None:
    _install("matrix-toolkit-number", project)
    result = subprocess.run(
        [sys.executable, "-m", "wheelfactory", "--root", str(project), "render"], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == EXPECTED["matrix-toolkit-number"]
    assert not (project / "build").exists()


# Bad inputs that are not YAML text: made here, as a file tree cannot hold them.


def _plan_errors(project: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    capsys.readouterr()
    assert main(["--root", str(project), "plan"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err.splitlines()


def test_a_file_over_the_size_limit_is_refused_before_parsing(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = project / "matrix.yaml"
    matrix.write_text(matrix.read_text() + "#" + "x" * (1024 * 1024) + "\n")
    (line,) = _plan_errors(project, capsys)
    assert line.startswith("matrix.yaml:1:1: ") and "over the 1024 KiB an input may have" in line


@pytest.mark.parametrize("kind", ["directory", "dangling link"])
def test_a_recipe_that_is_no_regular_file_is_named(
    kind: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = project / "recipes" / "broken" / "recipe.yaml"
    recipe.parent.mkdir()
    if kind == "directory":
        recipe.mkdir()
    else:
        recipe.symlink_to(project / "nowhere.yaml")
    (line,) = _plan_errors(project, capsys)
    what = "a directory" if kind == "directory" else "a link to nothing"
    assert line == f"recipes/broken/recipe.yaml:1:1: {what}, not a YAML file — put a regular file there"


def test_a_source_path_that_leads_outside_through_a_link_is_refused(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "elsewhere"
    shutil.copytree(project / "recipes" / "cuprobe" / "source", outside)
    shutil.rmtree(project / "recipes" / "cuprobe" / "source")
    (project / "recipes" / "cuprobe" / "source").symlink_to(outside)
    (line,) = _plan_errors(project, capsys)
    assert line.startswith("recipes/cuprobe/recipe.yaml:6:16: source.path: 'source' leads outside the recipe's folder")


def test_two_recipes_of_one_name_name_each_other(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Each folder is named as its recipe; the names differ only as PyPI folds them, so they are one distribution.
    copy = project / "recipes" / "CuProbe"
    shutil.copytree(project / "recipes" / "cuprobe", copy)
    recipe = copy / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("name: cuprobe", "name: CuProbe"))
    lines = _plan_errors(project, capsys)
    assert lines == [
        "recipes/CuProbe/recipe.yaml:2:7: name: 'CuProbe' is also the name of recipes/cuprobe/recipe.yaml — "
        "give each recipe its own name",
        "recipes/cuprobe/recipe.yaml:2:7: name: 'cuprobe' is also the name of recipes/CuProbe/recipe.yaml — "
        "give each recipe its own name",
    ]


def test_rendered_files_are_readable_by_everyone(project: Path) -> None:
    assert main(["--root", str(project), "render"]) == 0
    out = project / "build" / "variants"
    assert out.stat().st_mode & 0o777 == 0o755
    assert all(p.stat().st_mode & 0o004 for p in out.rglob("*"))


# Fuzzing: random mutations of the real matrix and recipe must give exit 2 with file:line:col, or succeed —
# never a traceback, never a hang. Seeded, so that a failure reproduces; bounded in time.
FUZZ_SEED = 20261122
FUZZ_CASES = 300
FUZZ_SECONDS = 90
TOKENS = [":", "- ", "[", "]", "{", "}", "&a ", "*a", '"', "'", "\t", "#", "!!python/object ", "~", "3.1", "12", "\\"]
# Whole values a careless or hostile user writes: each reaches a check of its own.
VALUES = [
    "070",
    "101",
    "[]",
    "nvidia-cuda-runtime-cu12>=12",
    '"pkg @ git+https://example.org/pkg.git"',
    '"cuprobe==1.2.*"',
    '"ssh://-oProxyCommand=x/y"',
    '"1.2.0+cu12"',
    '"a\\nb"',
    "\u212aelvin",
    "x" * 120,
    "bin\\core*.dll",
    '"image $(touch x)"',
    '"runner; rm -rf ~"',
    "quay.io/pypa/manylinux_2_28_x86_64",
    "ubuntu-24.04-arm",
    '"import ("',
    "setuptools.build_meta;x",
    "cuprobe._devic",
]
FUZZ_RECIPE = CASES / "fuzz-recipe.yaml"
PROBLEM_LINE = re.compile(r"^[^\s:][^:]*:\d+:\d+: \S")


def _mutate(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    operation = rng.randrange(8) if rng.random() < 0.5 else 7  # half of them replace a value
    i = rng.randrange(len(lines))
    if operation == 0:
        del lines[i]
    elif operation == 1:
        lines.insert(i, lines[rng.randrange(len(lines))])
    elif operation == 2:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif operation == 3 and lines[i]:
        at = rng.randrange(len(lines[i]))
        lines[i] = lines[i][:at] + rng.choice(TOKENS).encode() + lines[i][at + 1 :]
    elif operation == 4:
        lines[i] = lines[i] + bytes([rng.randrange(128, 256)])  # not UTF-8
    elif operation == 5:
        lines = lines[: rng.randrange(len(lines) + 1)]  # truncated
    elif operation == 6:
        lines[i] = b" " * rng.randrange(1, 6) + lines[i]  # indentation
    else:  # a value replaced: the text after a key's ": ", a list's "- " or a flow list's "[" / ", " — the line's
        # last, or half the time any of them (a flow mapping's first values too)
        starts = [m.end() for m in re.finditer(rb": |- |\[|, ", lines[i])]
        at = (starts[-1] if rng.randrange(2) else rng.choice(starts)) if starts else -1
        if at >= 0:
            end = min((p for p in (lines[i].find(c, at) for c in (b",", b"]", b"}")) if p >= 0), default=len(lines[i]))
            lines[i] = lines[i][:at] + rng.choice(VALUES).encode() + lines[i][end:]
    return b"\n".join(lines)


# The fields whose checks the fuzzing must reach (a problem reported at them), per target.
FUZZ_REACHES = {
    "matrix.yaml": {"python", "cuda", "exclude", "image", "runner", "smoke_runner"},
    "recipes/cuprobe/recipe.yaml": {"name", "version", "source", "modules", "components", "smoke"},
    "fuzz-recipe": {
        "cuda_archs", "dependencies", "source", "name", "version", "summary", "build_backend", "device_code",
        "shared_libraries", "smoke", "cuda", "platforms", "environment", "packages",
    },
}  # fmt: skip
_FIELD = re.compile(r"^[^:]+:\d+:\d+: cuda\[\d+\]\.platforms\.[^.]+\.(\w+):|^[^:]+:\d+:\d+: ([A-Za-z_]+)[.\[:]")


def test_the_fuzz_recipe_is_valid(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(FUZZ_RECIPE, project / "recipes/cuprobe/recipe.yaml")
    assert main(["--root", str(project), "plan"]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("target", sorted(FUZZ_REACHES))
def test_fuzzed_inputs_give_a_position_or_succeed(
    target: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(f"{FUZZ_SEED}-{target}")
    if target == "fuzz-recipe":
        path = project / "recipes/cuprobe/recipe.yaml"
        path.write_bytes(FUZZ_RECIPE.read_bytes())
    else:
        path = project / target
    original = path.read_bytes()
    reached: set[str] = set()
    started = time.monotonic()
    outcomes = {0: 0, 2: 0}
    for case in range(FUZZ_CASES):
        if time.monotonic() - started > FUZZ_SECONDS:
            break
        mutated = original
        for _ in range(rng.randrange(1, 4)):
            mutated = _mutate(mutated, rng)
        path.write_bytes(mutated)
        capsys.readouterr()
        status = main(["--root", str(project), "plan"])  # an exception here fails the test with its traceback
        captured = capsys.readouterr()
        assert status in outcomes, (case, status, captured.err)
        outcomes[status] += 1
        if status == 2:
            lines = captured.err.splitlines()
            assert lines and all(PROBLEM_LINE.match(line) for line in lines), (case, mutated, captured.err)
            reached.update(next(g for g in m.groups() if g) for line in lines if (m := _FIELD.match(line)))
    assert outcomes[2] > 0  # the mutations do break things, and are reported
    assert FUZZ_REACHES[target] <= reached, f"never reached: {sorted(FUZZ_REACHES[target] - reached)}"


@pytest.mark.parametrize("command", ["build --cuda 12", "smoke dist/x.whl"])
def test_an_image_that_is_no_image_reference_stops_at_the_command_line(
    command: str, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--root", str(project), *command.split(), "--image", f"quay.io/x $(touch {tmp_path}/pwned)"])
    assert stopped.value.code == 2
    (*_, line) = capsys.readouterr().err.splitlines()
    assert line.endswith("argument --image: 'quay.io/x $(touch " + str(tmp_path) + "/pwned)': not a container image "
                         "reference (registry/name:tag or name@sha256:…, lowercase name, no spaces)")  # fmt: skip
    assert not (tmp_path / "pwned").exists()
