"""`nox -s recipe`: drafts from real PyPI sdists come out near the recipes written by hand for them, with every
difference listed here; a source the drafter cannot read says so and still gets what could be read; a recipe is
completed from a real build's report (cuprobe's, built by the session's fixture) to what its hand-written policies
allow, and a second completion changes nothing."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from wheelfactory.audit import audit_wheel
from wheelfactory.cli import main
from wheelfactory.cuda_held import switch_hint
from wheelfactory.drafting import SourceGiven, complete_recipe, draft_recipe
from wheelfactory.inputs import Recipe, SdistSource
from wheelfactory.inputs.recipe import most_specific
from wheelfactory.plan import make_plan
from wheelfactory.sources import sdists

from .conftest import REPO, SOURCES, Built, assert_keeps_source_requirements, matrix_for

REPORTS = Path(__file__).parent / "reports"

# Each real package's hand-written recipe, and how its draft differs from it: field -> (draft, recipe). What a
# field here says is what the draft's comments ask the user to decide, or what only a build shows.
CASES: dict[str, tuple[str, Path, dict[str, tuple[object, object]]]] = {
    "cufinufft": (
        "cufinufft==2.4.1",
        SOURCES / "cufinufft.recipe.yaml",
        {
            "cuda": (None, [12]),  # 2.4.1 predates CUDA 13, and 11.8 lacks an atomicAdd it uses: builds show it
            "platforms": (["linux-x86_64", "linux-aarch64"], ["linux-x86_64"]),  # its classifiers say Linux
        },
    ),
    "torchsort": (
        "torchsort==0.1.10",
        SOURCES / "torchsort.recipe.yaml",
        {"platforms": (None, ["linux-x86_64"])},  # torch's CUDA wheels: the recipe keeps to what was tried
    ),
    "pyvkfft": (
        "pyvkfft==2025.1.1",
        REPO / "recipes/pyvkfft/recipe.yaml",
        {
            "platforms": (None, ["linux-x86_64", "linux-aarch64"]),
            # setup.py picks its backends from VKFFT_BACKEND, which the draft's note names; and the sdist's
            # PKG-INFO was written where OpenCL was found, so it requires pyopencl.
            "environment": (["NVCC_APPEND_FLAGS"], ["NVCC_APPEND_FLAGS", "VKFFT_BACKEND"]),
            "dependencies": (["numpy", "psutil", "pyopencl"], ["numpy", "psutil"]),
        },
    ),
    "pycuda": (
        "pycuda==2026.1",
        REPO / "recipes/pycuda/recipe.yaml",
        {
            "platforms": (None, ["linux-x86_64", "linux-aarch64"]),
            # its libraries come from configure options (aksetup), not a literal: the report names cuRAND
            "components": ([], ["curand"]),
            # numpy, whose C API _driver is built against, is in no metadata of the sdist
            "dependencies": (
                ["pytools>=2011.2", "platformdirs>=2.2.0", "mako"],
                ["numpy", "pytools>=2011.2", "platformdirs>=2.2.0", "mako"],
            ),
        },
    ),
    "cuvec": (
        "cuvec==6.0.1",
        REPO / "recipes/cuvec/recipe.yaml",
        # its classifiers name Windows, where its CMake build needs Visual Studio's CUDA integration
        {"platforms": (["linux-x86_64", "linux-aarch64", "windows-amd64"], ["linux-x86_64", "linux-aarch64"])},
    ),
}


def _fields(recipe: Recipe) -> dict[str, object]:
    """What a draft can know before a build, in a form two recipes can be compared by."""
    return {
        "name": recipe.name,
        "version": recipe.version,
        "import": recipe.import_name,
        "packages": recipe.packages or [recipe.import_name],
        "source": recipe.source.model_dump(),
        "wheel_abi": recipe.wheel_abi,
        "torch": recipe.torch,
        "cuda": recipe.cuda,
        "platforms": recipe.platforms,
        "components": sorted(recipe.components),
        "provided_libraries": {k: v.dir for k, v in recipe.provided_libraries.items()},
        "environment": sorted(recipe.environment) if set(recipe.environment) != {"CMAKE_ARGS"} else recipe.environment,
        "dependencies": recipe.dependencies,
        "cuda_at_import": recipe.smoke.cuda_at_import,
    }


def _recipe(path: Path) -> Recipe:
    return Recipe.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def _files(folder: Path, files: dict[str, str]) -> Path:
    """A source tree made of `files` (relative path -> text) under `folder`."""
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def _bare_project(project: Path) -> Path:
    for recipe in (project / "recipes").iterdir():
        shutil.rmtree(recipe)
    return project


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_sdists_draft_comes_near_its_hand_written_recipe(project: Path, name: str) -> None:
    pin, written, differences = CASES[name]
    path, _ = draft_recipe(SourceGiven(sdist=pin), _bare_project(project))
    assert path == project / "recipes" / name / "recipe.yaml"
    drafted, hand = _fields(_recipe(path)), _fields(_recipe(written))
    found = {field: (drafted[field], hand[field]) for field in hand if drafted[field] != hand[field]}
    assert found == differences
    # The draft passes the recipe's checks as written: render accepts it, and its variants require all the source
    # declares.
    assert main(["--root", str(project), "render"]) == 0
    assert_keeps_source_requirements(project, name)


def test_each_guess_says_what_it_was_read_from(project: Path) -> None:
    path, notes = draft_recipe(SourceGiven(sdist="torchsort==0.1.10"), _bare_project(project))
    text = path.read_text(encoding="utf-8")
    assert "# setup.py:10 builds with torch.utils.cpp_extension" in text
    assert "# setup.py setup(packages=[...])\nimport: torchsort" in text
    assert "DECIDE: the CUDA majors it builds for" in text
    assert all(len(line) <= 120 for line in text.splitlines()), max(text.splitlines(), key=len)
    assert notes == [
        "setup.py reads TORCHSORT_VERSION_SUFFIX from the environment: set in `environment` those the CUDA build "
        "needs (the factory sets CUDA_HOME, CUDA_PATH and puts nvcc on PATH)"
    ]


def test_an_existing_recipe_is_never_overwritten(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (project / "recipes/cuprobe/recipe.yaml").read_bytes()
    assert main(["--root", str(project), "recipe", str(project / "recipes/cuprobe/source")]) == 2
    assert "recipes/cuprobe/recipe.yaml exists — `nox -s recipe -- --from-report" in capsys.readouterr().err
    assert (project / "recipes/cuprobe/recipe.yaml").read_bytes() == before
    assert main(["--root", str(project), "recipe", "pyvkfft==2025.1.1"]) == 2
    assert "recipes/pyvkfft/recipe.yaml exists" in capsys.readouterr().err


def test_a_source_it_cannot_read_says_so_and_still_gets_a_draft(project: Path) -> None:
    """A folder source whose setup.py does not parse: the name and version come from pyproject, the rest is what
    could be read, and the draft's first lines say what could not."""
    source = _files(
        project / "recipes/oddpkg/source",
        {
            "oddpkg/__init__.py": "import ctypes\n_lib = ctypes.CDLL('liboddpkg.so')\n",
            "pyproject.toml": '[project]\nname = "oddpkg"\nversion = "1.0"\n',
            "setup.py": "from setuptools import setup\nsetup(name='oddpkg',\n",
            "CMakeLists.txt": 'option(ODD_USE_CUDA "build the CUDA kernels" OFF)\n'
            "if(ODD_USE_CUDA)\n  enable_language(CUDA)\n  target_link_libraries(odd CUDA::cublas CUDA::cuda_driver)\n"
            "endif()\n",
        },
    )
    path, notes = draft_recipe(SourceGiven(folder=source), project)
    assert notes == ["setup.py:2: does not parse as Python ('(' was never closed) — nothing was read from it"]
    drafted = _recipe(path)
    assert drafted.source.model_dump() == {"path": "source"}
    assert (drafted.name, drafted.version, drafted.components) == ("oddpkg", "1.0", ["cublas"])
    assert drafted.environment == {"CMAKE_ARGS": "-DODD_USE_CUDA=ON"}
    assert drafted.smoke.cuda_at_import
    text = path.read_text(encoding="utf-8")
    assert "# NOTE: setup.py:2: does not parse as Python" in text
    assert (
        "CMakeLists.txt:4 target_link_libraries links the driver: the module that does gets `driver` in its list"
        in text
    )


def test_a_source_without_a_name_is_refused_naming_what_is_missing(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _files(project / "recipes/nameless/source", {"CMakeLists.txt": "project(x CUDA)\n"})
    assert main(["--root", str(project), "recipe", str(source)]) == 2
    assert "its name and version could not be read" in capsys.readouterr().err
    assert not (project / "recipes/nameless/recipe.yaml").exists()


def _strip_policies(recipe: Path) -> None:
    """cuprobe's recipe as a draft has it: no component, no module allowed anything, no device code."""
    data = yaml.safe_load(recipe.read_text(encoding="utf-8"))
    data.update(components=[], modules={"*": []}, device_code=[])
    recipe.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


@pytest.mark.slow
@pytest.mark.docker
def test_a_recipe_is_completed_from_a_real_builds_report(
    built12: Built, build_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = built12.root / "dist/report.json"
    project = _bare_project(shutil.copytree(built12.root, tmp_path / "project", symlinks=True, ignore=_no_dist))
    shutil.copytree(REPO / "recipes/cuprobe", project / "recipes/cuprobe", symlinks=True)
    _strip_policies(project / "recipes/cuprobe/recipe.yaml")
    path, diff = complete_recipe(report, "cuprobe", project)
    assert diff.startswith("--- recipes/cuprobe/recipe.yaml\n+++ completed\n")
    completed, hand = _recipe(path), _recipe(REPO / "recipes/cuprobe/recipe.yaml")
    entry = json.loads(report.read_text())["wheels"][0]
    modules = [b["module"] for b in entry["binaries"] if b["module"]]
    assert len(modules) == 6
    for module in modules:  # each is allowed what it links, within what the hand-written recipe allows it
        assert set(most_specific(completed.modules, module) or []) <= set(hand.modules[module]), module
    assert completed.modules["cuprobe._nvrtc"] == ["nvrtc"]  # the hand-written recipe also allows cudart
    assert sorted(completed.components) == sorted(hand.components)  # nccl stays optional
    assert completed.device_code == hand.device_code
    assert "# from the report: it links nvrtc" in path.read_text(encoding="utf-8")
    # The very wheel passes the audit against the completed recipe.
    variant = next(
        v for v in make_plan(project, matrix_for(project, build_image), ["cuprobe"]).variants if v.major == 12
    )
    audit = audit_wheel(dataclasses.replace(built12.record.built, variant=variant))
    assert audit.passed, audit.all_problems()
    # Again: nothing left to add.
    assert main(["--root", str(project), "recipe", "--from-report", str(report), "--recipe", "cuprobe"]) == 0
    assert "already allows everything the report shows" in capsys.readouterr().err


def _no_dist(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n in ("dist", "build")]


@pytest.mark.parametrize(
    ("report", "said"),
    [
        ("not json", "not JSON"),
        ('{"wheels": {}}', "no `wheels` list"),
        ('{"wheels": [{"wheel": "x.whl", "dist_name": "other-cuda12x"}]}', "has no wheel of cuprobe"),
        ('{"wheels": [{"wheel": "x\\u001b]8.whl", "dist_name": "cuprobe-cuda12x", "cuda": "12"}]}', "'x\\x1b]8.whl'"),
    ],
)
def test_a_report_that_is_not_one_is_refused(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], report: str, said: str
) -> None:
    path = tmp_path / "report.json"
    path.write_text(report)
    before = (project / "recipes/cuprobe/recipe.yaml").read_bytes()
    assert main(["--root", str(project), "recipe", "--from-report", str(path), "--recipe", "cuprobe"]) == 2
    assert said in capsys.readouterr().err
    assert (project / "recipes/cuprobe/recipe.yaml").read_bytes() == before


def test_the_template_renders_every_branch(project: Path) -> None:
    """A setup.py source with nvcc, a force switch and requirements only in PKG-INFO: the branches the real
    packages above leave out."""
    setup_py = """\
        import os
        from setuptools import setup, Extension
        FORCE = os.environ.get("FORCEPKG_FORCE_CUDA", "0") == "1"
        ext = Extension("forcepkg._k", sources=["k.cu"], libraries=["cufft", "curand_static"])
        nvcc = "nvcc"
        setup(name="forcepkg", packages=["forcepkg"], ext_modules=[ext])
        """
    source = _files(
        project / "recipes/forcepkg/source",
        {
            "forcepkg/__init__.py": "",
            "PKG-INFO": "Metadata-Version: 2.1\nName: forcepkg\nVersion: 2.0\nRequires-Dist: numpy\n",
            "setup.py": textwrap.dedent(setup_py),
        },
    )
    path, _ = draft_recipe(SourceGiven(folder=source), project)
    drafted = _recipe(path)
    assert drafted.environment == {"NVCC_APPEND_FLAGS": "$NVCC_GENCODE", "FORCEPKG_FORCE_CUDA": "1"}
    assert drafted.dependencies == ["numpy"]
    assert drafted.components == ["cufft"]
    assert drafted.modules == {"*": []}
    assert "curand also statically (setup.py:4 libraries=[...]): that one needs no wheel" in path.read_text()


def test_a_git_commit_is_drafted_pinned_to_that_commit(project: Path, tmp_path: Path) -> None:
    repository = _files(
        tmp_path / "gitpkg",
        {
            "src/gitpkg/__init__.py": "",
            "pyproject.toml": '[project]\nname = "gitpkg"\nversion = "0.3"\ndescription = "a package from git"\n'
            '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n',
            "CMakeLists.txt": "find_package(CUDAToolkit)\ntarget_link_libraries(k CUDA::cusparse)\n",
        },
    )
    git = ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repository)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    rev = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    url = repository.as_uri()
    assert main(["--root", str(project), "recipe", "--git", url, "--rev", rev]) == 0
    drafted = _recipe(project / "recipes/gitpkg/recipe.yaml")
    assert drafted.source.model_dump() == {"git": url, "rev": rev}
    assert (drafted.import_name, drafted.summary, drafted.components) == ("gitpkg", "a package from git", ["cusparse"])


def test_a_name_alone_drafts_its_newest_final_release(project: Path) -> None:
    newest = max(v for v, _, _ in sdists("cuvec") if not v.is_prerelease and not v.is_devrelease)
    assert main(["--root", str(_bare_project(project)), "recipe", "cuvec"]) == 0
    assert _recipe(project / "recipes/cuvec/recipe.yaml").source.model_dump()["sdist"] == f"cuvec=={newest}"


def test_a_drafted_recipe_completed_from_a_recorded_report_is_the_hand_written_one(project: Path) -> None:
    """tests/reports/cufinufft-2.4.1-cuda12.json is the report of a real build of cufinufft's draft, completed once
    (test_drafting_build.py makes it again): its library links cudart and cuFFT, and tier 1 shows what its import
    raises without CUDA. Completing the draft from it gives what the recipe written by hand says."""
    path, _ = draft_recipe(SourceGiven(sdist="cufinufft==2.4.1"), _bare_project(project))
    _, diff = complete_recipe(REPORTS / "cufinufft-2.4.1-cuda12.json", "cufinufft", project)
    assert "+  cuda_import_error: Could not find cufinufft library in system path  # from the report" in diff
    completed, hand = _recipe(path), _recipe(SOURCES / "cufinufft.recipe.yaml")
    assert completed.shared_libraries == hand.shared_libraries
    assert completed.device_code == hand.device_code
    assert completed.smoke.cuda_import_error == hand.smoke.cuda_import_error
    assert completed.modules == hand.modules == {}
    assert "size_limit_mb" not in diff  # 13 MiB: within the limit


def test_a_wheel_over_the_size_limit_gets_a_limit_to_decide_on(project: Path, tmp_path: Path) -> None:
    """causal-conv1d's wheel for twelve GPU architectures was 242 MiB, over PyPI's default of 100: the completion
    proposes the limit that lets it through, as a DECIDE: (PyPI must have raised the project's limit)."""
    path, _ = draft_recipe(SourceGiven(sdist="cufinufft==2.4.1"), _bare_project(project))
    report = json.loads((REPORTS / "cufinufft-2.4.1-cuda12.json").read_text(encoding="utf-8"))
    report["wheels"][0]["size_bytes"] = 242 * 2**20 + 1
    (tmp_path / "report.json").write_text(json.dumps(report), encoding="utf-8")
    _, diff = complete_recipe(tmp_path / "report.json", "cufinufft", project)
    wheel = report["wheels"][0]["wheel"]
    assert f"+size_limit_mb: 243 # DECIDE: from the report: {wheel} is 242.0 MiB, over the 100 MiB limit" in diff
    assert _recipe(path).size_limit_mb == 243


def test_what_a_source_says_cannot_break_the_drafts_yaml(project: Path) -> None:
    """Names and values read from the source are YAML values, escaped; in comments, one escaped line."""
    source = _files(
        project / "recipes/evil/source",
        {
            "evil/__init__.py": "",
            "pyproject.toml": '[project]\nname = "evil"\nversion = "1.0"\ndescription = "x\\u001b[31m: y # z"\n'
            '[tool.cibuildwheel.environment]\nEVIL_FLAGS = "-O2 ::error::x # not a comment"\n'
            '[tool.cibuildwheel]\nconfig-settings = {"cmake.define.EVIL_MODE" = "a\'b"}\n',
        },
    )
    path, _ = draft_recipe(SourceGiven(folder=source), project)
    drafted = _recipe(path)
    assert drafted.summary == ""  # not one printable line: the recipe's checks would refuse it
    assert drafted.environment == {"CMAKE_ARGS": "-DEVIL_MODE=a'b", "EVIL_FLAGS": "-O2 ::error::x # not a comment"}
    assert "\x1b" not in path.read_text(encoding="utf-8")


def test_lightgbms_draft_turns_its_cuda_build_on_and_leaves_its_vendored_projects_alone(project: Path) -> None:
    """LightGBM 4.7.0, which the drafter was not written for: scikit-build-core and CMake with `USE_CUDA` OFF by
    default, architectures of its own unless CMAKE_CUDA_ARCHITECTURES is defined, a library opened with ctypes at
    import, and vendored projects (external_libs/) with CUDA options of their own."""
    path, notes = draft_recipe(SourceGiven(sdist="lightgbm==4.7.0"), _bare_project(project))
    drafted = _recipe(path)
    assert drafted.environment == {"CMAKE_ARGS": "-DUSE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$CMAKE_CUDA_ARCHITECTURES"}
    assert (drafted.wheel_abi, drafted.smoke.cuda_at_import, drafted.import_name) == ("none", True, "lightgbm")
    # Its classifiers say POSIX and Windows (and macOS, which the factory does not build for).
    assert drafted.platforms == ["linux-x86_64", "linux-aarch64", "windows-amd64"]
    assert [n.split(" names GPU")[0] for n in notes] == ["cmake/Utils.cmake:20"]


def test_what_a_recipes_patterns_already_allow_is_not_added_again(project: Path) -> None:
    path, _ = draft_recipe(SourceGiven(sdist="cufinufft==2.4.1"), _bare_project(project))
    with path.open("a", encoding="utf-8") as recipe:
        recipe.write('shared_libraries: {"libcufi*.so": [cudart, cufft]}\ndevice_code: ["libcufi*.so"]\n')
    _, diff = complete_recipe(REPORTS / "cufinufft-2.4.1-cuda12.json", "cufinufft", project)
    assert [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")] == [
        "+  cuda_import_error: Could not find cufinufft library in system path  # from the report: tier 1's import "
        "raised this, naming no CUDA library — check that it says CUDA is missing"
    ]


def test_a_wheel_without_cuda_is_told_the_switch_the_source_reads(tmp_path: Path) -> None:
    """What the audit says of a CPU build under a CUDA name: the switch a draft would set (LightGBM's USE_CUDA,
    OFF by default), unless the recipe sets it already — then where to look."""
    source = SdistSource(
        sdist="lightgbm==4.7.0", sha256="f8e20f682c9aabd000bcf4a7ed8aa6f473c1adfecccae34ec24e823d156f4af0"
    )
    hint = switch_hint(source, tmp_path, ["MY_JOBS 4"])
    assert hint.endswith(
        "the source reads CMAKE_ARGS -DUSE_CUDA=ON "
        "(CMakeLists.txt:178 find_package(CUDAToolkit) is guarded by USE_CUDA)"
    )
    set_already = switch_hint(source, tmp_path, ["CMAKE_ARGS -DUSE_CUDA=ON"])
    assert "find what turns its CUDA build on" in set_already and "USE_CUDA" not in set_already
