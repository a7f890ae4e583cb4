"""Rendering: metadata that packaging accepts, pinned to the committed (reviewed) build/variants files."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from trove_classifiers import classifiers as known_classifiers

from wheelfactory.cli import main
from wheelfactory.declared import dependencies, extras
from wheelfactory.plan import make_plan
from wheelfactory.render import environment, setup_py_fields, template_context
from wheelfactory.sources import source_tree

from .conftest import REPO, SOURCES, add_multipkg

DISTS = [f"{recipe}-cuda{major}x" for recipe in ("cuprobe", "cuvec", "pycuda", "pyvkfft") for major in (11, 12, 13)]
GOLDEN = Path(__file__).parent / "golden"
NVIDIA = {
    11: {"nvidia-cuda-runtime-cu11", "nvidia-cuda-nvrtc-cu11", "nvidia-cublas-cu11"},
    12: {"nvidia-cuda-runtime-cu12", "nvidia-cuda-nvrtc-cu12", "nvidia-cublas-cu12"},
    13: {"nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cublas"},
}


@pytest.fixture
def rendered(project: Path) -> Path:
    assert main(["--root", str(project), "render"]) == 0
    return project / "build" / "variants"


def _pyproject(out: Path, dist: str) -> dict:  # type: ignore[type-arg]
    with (out / dist / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def test_renders_one_pyproject_per_recipe_and_cuda_major(rendered: Path) -> None:
    assert sorted(p.name for p in rendered.iterdir()) == DISTS


@pytest.mark.parametrize("dist", DISTS)
@pytest.mark.parametrize("name", ["pyproject.toml", "_cuda_variant.py"])
def test_matches_reviewed_golden_file(rendered: Path, dist: str, name: str) -> None:
    golden = REPO / "build" / "variants" / dist / name
    assert (rendered / dist / name).read_bytes() == golden.read_bytes()


@pytest.mark.parametrize("major", [11, 12, 13])
def test_metadata_is_valid_and_names_the_right_wheels(rendered: Path, major: int) -> None:
    project = _pyproject(rendered, f"cuprobe-cuda{major}x")["project"]
    assert canonicalize_name(project["name"]) == f"cuprobe-cuda{major}x"
    Version(project["version"])
    assert SpecifierSet(project["requires-python"]).contains("3.10")
    requirements = [Requirement(line) for line in project["dependencies"]]
    assert {r.name for r in requirements} == NVIDIA[major]
    for r in requirements:
        # Floor from the matrix's toolkit, and a cap so that no other library major is accepted.
        assert any(s.operator == ">=" for s in r.specifier) and any(s.operator == "<" for s in r.specifier)
    cudart = next(r for r in requirements if "runtime" in r.name)
    toolkit = {11: "11.8", 12: "12.9", 13: "13.0"}[major]
    assert cudart.specifier.contains(toolkit) and not cudart.specifier.contains(f"{major + 1}.0")
    nccl = [Requirement(line) for line in project["optional-dependencies"]["nccl"]]
    assert [r.name for r in nccl] == [f"nvidia-nccl-cu{major}"]
    assert f"Environment :: GPU :: NVIDIA CUDA :: {major}" in project["classifiers"]
    assert set(project["classifiers"]) <= known_classifiers


@pytest.mark.parametrize("major", [11, 12, 13])
def test_cibuildwheel_selectors_follow_the_matrix(rendered: Path, major: int) -> None:
    cibw = _pyproject(rendered, f"cuprobe-cuda{major}x")["tool"]["cibuildwheel"]
    pythons = ["310", "311", "312", "313"] + ([] if major == 11 else ["314", "315"])  # matrix: not 3.14+ × CUDA 11
    platforms = ["manylinux_aarch64", "manylinux_x86_64", "win_amd64"]
    assert sorted(cibw["build"]) == sorted(f"cp{p}-{plat}" for p in pythons for plat in platforms)
    repair = cibw["linux"]["repair-wheel-command"]
    assert "--exclude libcuda.so.1" in repair and "--only-plat" in repair
    assert cibw["linux"]["manylinux-x86_64-image"].startswith("quay.io/pypa/manylinux")


def test_rendering_twice_gives_identical_bytes(project: Path, rendered: Path) -> None:
    first = {p: p.read_bytes() for p in rendered.rglob("*.toml")}
    assert main(["--root", str(project), "render"]) == 0
    assert {p: p.read_bytes() for p in rendered.rglob("*.toml")} == first


def test_check_passes_when_fresh_and_fails_on_drift(project: Path, rendered: Path) -> None:
    assert main(["--root", str(project), "render", "--check"]) == 0
    matrix = project / "matrix.yaml"
    matrix.write_text(matrix.read_text().replace('toolkit: "12.9"', 'toolkit: "12.9"  # unchanged meaning'))
    assert main(["--root", str(project), "render", "--check"]) == 0
    recipe = project / "recipes/cuprobe/recipe.yaml"
    recipe.write_text(recipe.read_text().replace('version: "0.1.0"', 'version: "0.2.0"'))
    assert main(["--root", str(project), "render", "--check"]) == 1
    (rendered / "leftover-cuda9x").mkdir()
    (rendered / "leftover-cuda9x" / "pyproject.toml").write_text("")
    assert main(["--root", str(project), "render"]) == 0
    assert not (rendered / "leftover-cuda9x").exists()
    assert main(["--root", str(project), "render", "--check"]) == 0


def test_committed_variants_are_fresh() -> None:
    assert main(["--root", str(REPO), "render", "--check"]) == 0


def test_matrix_option_renders_another_matrix(project: Path, tmp_path: Path) -> None:
    other = tmp_path / "only12.yaml"
    other.write_text(
        'python: ["3.12"]\n'
        "cuda:\n"
        '  - {major: 12, toolkit: "12.9", platforms: {linux-x86_64: {runner: r, image: img:1}}}\n'
    )
    assert main(["--root", str(project), "render", "--matrix", str(other)]) == 0
    out = project / "build" / "variants"
    assert sorted(p.name for p in out.iterdir()) == [f"{r}-cuda12x" for r in ("cuprobe", "cuvec", "pycuda", "pyvkfft")]
    cibw = _pyproject(out, "cuprobe-cuda12x")["tool"]["cibuildwheel"]
    assert cibw["build"] == ["cp312-manylinux_x86_64"]
    assert cibw["linux"]["manylinux-x86_64-image"] == "img:1"


def _source_pyproject(recipe: str) -> dict:  # type: ignore[type-arg]
    """The pyproject.toml of a recipe's source as the sdist has it (fetched and unpacked, nothing run)."""
    variant = next(v for v in make_plan(REPO).variants if v.recipe.name == recipe)
    with (source_tree(variant.recipe.source, variant.recipe_dir) / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


@pytest.mark.parametrize("major", [11, 12, 13])
def test_a_scikit_build_core_variant_keeps_the_sources_build_configuration(rendered: Path, major: int) -> None:
    source = _source_pyproject("cuvec")
    variant = _pyproject(rendered, f"cuvec-cuda{major}x")
    assert variant["build-system"] == source["build-system"]
    # scikit-build-core would look for a package named after the project (cuvec_cuda13x): the variant names it.
    assert variant["tool"]["scikit-build"] == {
        **source["tool"]["scikit-build"],
        "wheel": {**source["tool"]["scikit-build"]["wheel"], "packages": ["cuvec"]},
    }
    assert variant["tool"]["setuptools_scm"] == source["tool"]["setuptools_scm"]
    for table in ("mypy", "pytest", "isort"):
        assert variant["tool"][table] == source["tool"][table]
    project = variant["project"]
    assert project["name"] == f"cuvec-cuda{major}x"
    assert project["dynamic"] == ["version"]  # setuptools-scm, from the sdist's PKG-INFO
    assert "version" not in project
    assert project["dependencies"] == source["project"]["dependencies"]  # cudart is static: no NVIDIA wheel
    assert project["optional-dependencies"] == source["project"]["optional-dependencies"]
    assert project["urls"] == source["project"]["urls"] and project["authors"] == source["project"]["authors"]
    classifiers = project["classifiers"]
    assert "License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)" in classifiers
    assert f"Environment :: GPU :: NVIDIA CUDA :: {major}" in classifiers
    assert "Programming Language :: Python :: 3.7" not in classifiers  # what the variant is, not the source
    assert "Operating System :: Microsoft :: Windows" not in classifiers  # the recipe builds Linux only
    assert [c for c in classifiers if c.startswith("Development Status")] == [
        "Development Status :: 5 - Production/Stable"
    ]
    assert set(classifiers) <= known_classifiers


def test_a_setup_py_only_source_gets_a_generated_pyproject(rendered: Path) -> None:
    variant = _pyproject(rendered, "pyvkfft-cuda13x")
    # The backend pip uses for such a source: setup.py imports its own package (from pyvkfft.version import ...).
    assert variant["build-system"]["build-backend"] == "setuptools.build_meta:__legacy__"
    project = variant["project"]
    assert project["version"] == "2025.1.1"
    # Exactly what its setup() call gives: setuptools refuses a dynamic field that setup.py does not set.
    assert project["dynamic"] == ["authors", "urls", "license", "scripts", "gui-scripts", "entry-points"]
    # Its own requirements, from PKG-INFO (the recipe drops pyopencl, which only an OpenCL build requires), then
    # NVIDIA's wheels.
    assert project["dependencies"] == ["numpy", "psutil", "nvidia-cuda-nvrtc>=13.0,<14"]


def test_the_classifiers_setup_py_gives_are_kept(rendered: Path) -> None:
    # A [project] that sets classifiers makes setuptools drop setup()'s: the variant carries them, with the
    # source's own Development Status rather than the factory's default, and its own build classifiers.
    classifiers = _pyproject(rendered, "pycuda-cuda12x")["project"]["classifiers"]
    assert "Development Status :: 5 - Production/Stable" in classifiers
    assert not [c for c in classifiers if c.startswith("Development Status :: 4")]
    assert {"Topic :: Scientific/Engineering :: Physics", "Programming Language :: C++"} <= set(classifiers)
    assert "Environment :: GPU :: NVIDIA CUDA :: 12" in classifiers
    pythons = [c for c in classifiers if c.startswith("Programming Language :: Python :: 3.")]
    assert pythons == [f"Programming Language :: Python :: 3.{minor}" for minor in range(10, 16)]


def test_a_setuptools_variant_matches_its_golden_file(project: Path) -> None:
    add_multipkg(project)
    assert main(["--root", str(project), "render"]) == 0
    rendered = project / "build/variants/multipkg-cuda12x/pyproject.toml"
    golden = GOLDEN / "multipkg-cuda12x.pyproject.toml"
    assert rendered.read_text() == golden.read_text(), f"review the change, then: cp {rendered} {golden}"
    variant = tomllib.loads(rendered.read_text())
    source = tomllib.loads((SOURCES / "multipkg/pyproject.toml").read_text())
    # setuptools finds the two packages only through the source's own configuration (CuPy's flat layout).
    assert variant["tool"]["setuptools"]["packages"] == source["tool"]["setuptools"]["packages"]
    assert variant["tool"]["setuptools_scm"] == source["tool"]["setuptools_scm"]
    project_table = variant["project"]
    assert project_table["dynamic"] == ["version"]  # dependencies are now the variant's own
    assert "dependencies" not in variant["tool"]["setuptools"].get("dynamic", {})
    assert project_table["dependencies"] == ["packaging>=21", "nvidia-cuda-runtime-cu12>=12.9,<13"]
    # ctk pulled CUDA 12's libraries through NVIDIA's meta-package: it now names the variant's own wheels.
    assert project_table["optional-dependencies"] == {"test": ["pytest"], "ctk": ["nvidia-cuda-runtime-cu12>=12.9,<13"]}
    assert project_table["license"] == "MIT"
    readme = project_table["readme"]
    assert readme["content-type"] == "text/markdown"
    assert readme["text"].startswith("> This is the CUDA 12.x build of `multipkg` (built against CUDA 12.9)")
    assert readme["text"].endswith("\n\n# multipkg\n\nA test source shaped like CuPy.\n")  # its README.md, whole


def _readme_warnings(readme: dict[str, str]) -> str | None:
    """What twine check --strict says of a long description (it renders it with readme_renderer): None when
    it renders without a warning."""
    import io

    import readme_renderer.markdown
    import readme_renderer.rst
    import readme_renderer.txt

    renderers = {"text/x-rst": readme_renderer.rst, "text/markdown": readme_renderer.markdown}
    warnings = io.StringIO()
    rendered = renderers.get(readme["content-type"], readme_renderer.txt).render(readme["text"], stream=warnings)
    return None if rendered is not None and not warnings.getvalue() else warnings.getvalue() or "did not render"


def test_every_rendered_readme_passes_twine_check_strict(project: Path) -> None:
    add_multipkg(project)
    assert main(["--root", str(project), "render"]) == 0
    out = project / "build" / "variants"
    found = {p.parent.name: tomllib.loads(p.read_text())["project"]["readme"] for p in out.glob("*/pyproject.toml")}
    assert len(found) == 15
    assert {dist: _readme_warnings(readme) for dist, readme in found.items()} == dict.fromkeys(found)


def test_an_rst_source_keeps_its_readme_with_the_variant_note(rendered: Path) -> None:
    readme = _pyproject(rendered, "pycuda-cuda13x")["project"]["readme"]
    assert readme["content-type"] == "text/x-rst"
    note, upstream = readme["text"].split("\n\n", 1)
    assert note.startswith("This is the CUDA 13.x build of ``pycuda`` (built against CUDA 13.0)")
    assert "``nvidia-curand``" in note
    assert upstream.startswith("PyCUDA: Pythonic Access to CUDA, with Arrays and Algorithms\n=====")
    assert "PyCUDA lets you access" in upstream


def test_the_variant_note_says_only_what_the_audit_holds_the_wheel_to(project: Path) -> None:
    """No NVIDIA wheel: it needs the driver alone (not "the runtime is linked in", which no check proves); what the
    package opens itself is named."""
    recipe = project / "recipes/cuprobe/recipe.yaml"
    recipe.write_text(
        recipe.read_text().replace("optional: [nccl]\n", "optional: [nccl]\nopens_cuda: [nvrtc, driver]\n")
    )
    assert main(["--root", str(project), "render"]) == 0
    rendered = project / "build" / "variants"
    cuvec = _pyproject(rendered, "cuvec-cuda12x")["project"]["readme"]["text"]
    assert "It carries no CUDA library: it requires none of NVIDIA's wheels, and needs only the NVIDIA driver." in cuvec
    assert "linked in" not in cuvec
    cuprobe = _pyproject(rendered, "cuprobe-cuda12x")["project"]["readme"]["text"]
    assert "It opens `nvrtc` and the NVIDIA driver itself when it needs them. Importing it needs no GPU." in cuprobe


def test_recipe_dependencies_swap_the_sources_per_major(project: Path) -> None:
    add_multipkg(project)
    recipe = project / "recipes/multipkg/recipe.yaml"
    recipe.write_text(
        recipe.read_text()
        + "dependencies:\n  - {12: cupy-cuda12x>=13, 13: cupy-cuda13x>=13.6}\n  - {11: numba<0.60}\n  - scipy\n"
    )
    variants = {v.major: v for v in make_plan(project).variants if v.recipe.name == "multipkg"}
    source = ["packaging>=21", "cupy-cuda12x>=12", "nvidia-cuda-runtime-cu12>=12", "numba"]
    assert dependencies(variants[13], source) == [
        "packaging>=21",
        "cupy-cuda13x>=13.6",
        "nvidia-cuda-runtime>=13.0,<14",
        "scipy",
    ]
    assert dependencies(variants[11], source) == [
        "packaging>=21",
        "numba<0.60",
        "nvidia-cuda-runtime-cu11>=11.8,<12",
        "scipy",
    ]


@pytest.mark.parametrize("major", [12, 13])
def test_what_nvidias_libraries_load_gets_a_floor_too(project: Path, major: int) -> None:
    """cuSPARSE and cuFFT load nvJitLink (linked, or opened by name), cuSOLVER cuBLAS and cuSPARSE as well: each
    gets a floor in Requires-Dist, and an optional component's extra brings its own companions."""
    add_multipkg(project)
    recipe = project / "recipes/multipkg/recipe.yaml"
    text = recipe.read_text().replace("components: [cudart]", "components: [cudart, cusparse, cufft]")
    recipe.write_text(text + "optional: [cusolver]\n")
    (variant,) = [v for v in make_plan(project).variants if v.recipe.name == "multipkg" and v.major == major]
    suffix = "-cu12" if major == 12 else ""
    floors = {canonicalize_name(r.name): r for r in map(Requirement, dependencies(variant))}
    jitlink = floors[canonicalize_name(f"nvidia-nvjitlink{suffix}")]
    assert jitlink.specifier == SpecifierSet(f">={variant.cuda.toolkit},<{major + 1}")
    if major == 13:  # cuFFT 13 opens NVRTC by name as well
        assert canonicalize_name("nvidia-cuda-nvrtc") in floors
    (solver,) = extras(variant).values()
    # cuSOLVER brings cuBLAS, and cuBLAS 12 NVRTC (13's comes with cuFFT already); the extra repeats nothing the
    # variant requires already (cuSPARSE, nvJitLink).
    brought = ["cublas", "cusolver"] + (["cuda-nvrtc"] if major == 12 else [])
    assert sorted(Requirement(line).name for line in solver) == sorted(f"nvidia-{n}{suffix}" for n in brought)


def test_setup_py_fields_follow_the_setup_call(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\n"
        "setup(name='x', author='A', maintainer_email='m@x', project_urls={'a': 'b'}, keywords=['k'])\n"
    )
    assert setup_py_fields(tmp_path) == [
        "authors",
        "maintainers",
        "urls",
        "keywords",
        "scripts",
        "gui-scripts",
        "entry-points",
    ]
    (tmp_path / "setup.py").write_text("import setuptools\noptions = dict(author='A')\nsetuptools.setup(**options)\n")
    assert setup_py_fields(tmp_path) == ["scripts", "gui-scripts", "entry-points"]  # hidden: only the safe ones


# Strings that would end a docstring, a string literal or a comment if pasted raw, and code that would run then.
HOSTILE = [
    'x"""+str(open("pwned-1","w"))+"""',
    "x'''+str(open('pwned-2','w'))+'''",
    'x\\"\nimport os; os.mkdir("pwned-3")\n#',
    "x\r\n__import__('os').mkdir('pwned-4')\u2028\x7f\x00",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_generated_code_runs_nothing_whatever_the_strings_it_carries(
    hostile: str, project: Path, tmp_path: Path
) -> None:
    """Every string the templates interpolate made hostile: the variant module imports (and runs as a script)
    creating nothing, and carries the strings unchanged; the pyproject is TOML that keeps them exactly."""
    plan = make_plan(project)
    variant = next(v for v in plan.variants if v.dist_name == "cuprobe-cuda12x")
    siblings = [v for v in plan.variants if v.recipe.name == "cuprobe" and v.major != 12]
    context = template_context(
        variant, hostile, project, source_tree(variant.recipe.source, variant.recipe_dir), siblings
    )
    context.update(
        recipe_file=hostile, dist_name=hostile, module_name=hostile, toolkit=hostile, gpu_checks=[(hostile, hostile)]
    )
    templates = environment(project)
    module = tmp_path / "variant_module.py"
    module.write_text(templates.get_template("cuda_variant.py.j2").render(context), encoding="utf-8")
    pyproject = templates.get_template("pyproject.toml.j2").render({**context, "version": "1.0"})

    run = subprocess.run(
        [sys.executable, "-c", "import variant_module as m; print(repr((m.DIST_NAME, m.CUDA_TOOLKIT, m.GPU_CHECKS)))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert run.returncode == 0, run.stderr
    assert ast.literal_eval(run.stdout) == (hostile, hostile, [(hostile, hostile)])
    subprocess.run([sys.executable, str(module)], cwd=tmp_path, capture_output=True, check=False)
    assert not list(tmp_path.glob("pwned*")) and not list(Path.cwd().glob("pwned*"))
    assert tomllib.loads(pyproject)["project"]["name"] == hostile


def test_a_recipe_folder_named_like_code_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = project / "recipes" / HOSTILE[0]
    shutil.copytree(project / "recipes" / "cuprobe", folder)
    assert main(["--root", str(project), "render"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"recipes/{HOSTILE[0]}/recipe.yaml:2:7: name: the recipe is named 'cuprobe' but its folder")
    assert not (project / "build").exists()


AWKWARD_VALUES = {
    "QUOTE_BREAKOUT": '-O2" CUDA_HOME="/tmp/x" PWN="$(touch pwned)',
    "CFLAGS": '-DNAME="x" -DPATH=\\"C:\\\\tmp\\" -O2',
    "DOLLARS": "costs $5, $(echo hi) and `id`; a lone $",
    "SPACES": "  two  spaces\tand a tab  ",
    "BACKSLASH_END": "ends with a backslash\\",
    "BUILDS_ON": "$NVCC_GENCODE -Xptxas -O3 ${CUDA_HOME}/include",
}


def test_environment_values_reach_the_build_exactly_through_cibuildwheels_parser(project: Path) -> None:
    from cibuildwheel.environment import parse_environment
    from cibuildwheel.options import EnvironmentFormat

    recipe = project / "recipes" / "cuprobe" / "recipe.yaml"
    entries = "".join(f"  {name}: {json.dumps(value)}\n" for name, value in AWKWARD_VALUES.items())
    recipe.write_text(recipe.read_text() + "environment:\n" + entries)
    assert main(["--root", str(project), "render"]) == 0
    table = _pyproject(project / "build" / "variants", "cuprobe-cuda12x")["tool"]["cibuildwheel"]["linux"][
        "environment"
    ]

    parsed = parse_environment(EnvironmentFormat().format_table(table))  # exactly what cibuildwheel does with it
    assert [a.name for a in parsed.assignments] == list(table)  # one assignment per entry: no quote broke out
    given = {"WHEELFACTORY_CUDA_PREFIX": "/cache/prefix", "PATH": "/usr/bin", "LDFLAGS": ""}
    seen = parsed.as_dictionary(prev_environment=given)
    assert seen["CUDA_HOME"] == "/host/cache/prefix"
    for name, value in AWKWARD_VALUES.items():
        if name != "BUILDS_ON":
            assert seen[name] == value, name
    assert seen["BUILDS_ON"] == f"{seen['NVCC_GENCODE']} -Xptxas -O3 /host/cache/prefix/include"
    assert "-gencode" in seen["NVCC_GENCODE"]


CUPY_RECIPE = """name: cupy
version: "14.2.0"
import: cupy
packages: [cupy, cupyx, cupy_backends]
source: {sdist: "cupy==14.2.0", sha256: cfed725e612178cfbdbf62f4a3a598b60edecbbca718c0d4580c21a16ae4a62c}
platforms: [linux-x86_64]
components: [cudart, nvrtc, cublas, cufft, curand, cusolver, cusparse]
modules:
  "*": [cudart, nvrtc, cublas, cufft, curand, cusolver, cusparse, driver]
"""


@pytest.mark.slow
def test_cupy_keeps_its_readme_dependencies_and_extras_that_setup_py_computes(project: Path) -> None:
    """CuPy's own sdist, unmodified: its [project] leaves readme, dependencies and extras to setup.py, and the
    variant takes them from the sdist's PKG-INFO."""
    (project / "recipes" / "cupy").mkdir()
    (project / "recipes" / "cupy" / "recipe.yaml").write_text(CUPY_RECIPE)
    assert main(["--root", str(project), "render"]) == 0
    variant = _pyproject(project / "build" / "variants", "cupy-cuda13x")["project"]
    assert variant["dependencies"][:2] == ["numpy<2.6,>=2.0", "cuda-pathfinder==1.*,>=1.3.4"]
    assert variant["optional-dependencies"] == {
        "all": ["scipy<1.18,>=1.14", "Cython!=3.2.6,>=3", "optuna>=2.0"],
        "test": ["packaging", "pytest>=7.2", "hypothesis<6.55.0,>=6.37.2", "mpmath"],
    }
    assert variant["dynamic"] == ["version"]
    readme = variant["readme"]
    assert readme["content-type"] == "text/x-rst" and _readme_warnings(readme) is None
    assert readme["text"].startswith("This is the CUDA 13.x build of ``cupy`` (built against CUDA 13.0)")
    assert "NumPy & SciPy for GPU" in readme["text"]


@pytest.mark.parametrize(("major", "aarch64_own"), [(12, False), (13, True)])
def test_each_platform_builds_for_its_own_default_architectures(rendered: Path, major: int, aarch64_own: bool) -> None:
    """cibuildwheel itself reads the rendered configuration for each build identifier: CUDA 13 on linux-aarch64
    also compiles for Jetson Orin (sm_87) and Thor (sm_110), with the recipe's variables evaluated after them;
    x86_64 keeps the release's defaults."""
    from cibuildwheel.environment import parse_environment
    from cibuildwheel.options import EnvironmentFormat, OptionsReader

    reader = OptionsReader(rendered / f"cuprobe-cuda{major}x" / "pyproject.toml", platform="linux", env={})
    seen = {}
    for machine in ("x86_64", "aarch64"):
        with reader.identifier(f"cp312-manylinux_{machine}"):
            text = reader.get("environment", option_format=EnvironmentFormat())
        values = parse_environment(text).as_dictionary(prev_environment={"PATH": "/usr/bin"})
        seen[machine] = values["NVCC_GENCODE"]
        torch = values["TORCH_CUDA_ARCH_LIST"].split(";")  # the same architectures, as cpp_extension reads them
        assert [t.removesuffix("+PTX") for t in torch] == [
            f"{int(g.split('sm_')[1]) // 10}.{int(g.split('sm_')[1]) % 10}" for g in seen[machine].split() if "sm_" in g
        ]
        assert torch[-1].endswith("+PTX") and not any(t.endswith("+PTX") for t in torch[:-1])
    assert "code=sm_110" not in seen["x86_64"] and "code=sm_87" not in seen["x86_64"]
    assert ("code=sm_110" in seen["aarch64"] and "code=sm_87" in seen["aarch64"]) == aarch64_own
    assert seen["x86_64"].endswith("code=compute_120") and seen["aarch64"].endswith("code=compute_120")


def test_a_top_level_module_is_named_whole_and_a_dotted_one_inside_the_package(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """causal-conv1d's `causal_conv1d_cuda` is an extension setup.py names without a package: a recipe names it
    whole; a dotted name outside the package is a mistake still."""
    recipe = project / "recipes" / "cuprobe" / "recipe.yaml"
    original = recipe.read_text()
    recipe.write_text(original.replace("  cuprobe._flags: []\n", "  cuprobe._flags: []\n  cuprobe_cuda: [cudart]\n"))
    assert main(["--root", str(project), "render"]) == 0
    recipe.write_text(original.replace("  cuprobe._flags: []\n", "  cuprobe_x.cuda: [cudart]\n"))
    assert main(["--root", str(project), "render"]) == 2
    assert "'cuprobe_x.cuda' is outside the package 'cuprobe'" in capsys.readouterr().err
