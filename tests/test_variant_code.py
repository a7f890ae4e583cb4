"""The variant module's code on its own (src/wheelfactory/shipped/, run with its example data): what its functions
decide, and that every wheel's module is exactly a variant's rendered data followed by that code.
test_variant_module.py runs the rendered modules as they ship."""

from __future__ import annotations

import json
import runpy
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from wheelfactory.plan import make_plan
from wheelfactory.render import environment, render_plan, template_context, variant_code
from wheelfactory.sources import source_tree

SHIPPED = files("wheelfactory.shipped")


def _after_marker(name: str) -> str:
    """What a part of the shipped code ships: its text from the line after CODE_STARTS."""
    text = SHIPPED.joinpath(name).read_text(encoding="utf-8")
    return text[text.index("\n", text.index("# CODE_STARTS: ")) + 1 :].lstrip("\n")


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """The code after its example data, one module as a wheel's, run as a package's variant module is imported (it
    hooks the excepthook and looks for CUDA: this process gets its own back afterwards)."""
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    path = tmp_path / "_cuda_variant.py"
    path.write_text(SHIPPED.joinpath("variant_data.py").read_text(encoding="utf-8") + variant_code(), encoding="utf-8")
    return runpy.run_path(str(path), run_name="example._cuda_variant")


@pytest.mark.parametrize(
    ("arch", "expected"),
    [
        (90, ("sass", 90)),  # its own SASS
        (86, ("sass", 80)),  # SASS runs on later minors of its major
        (100, ("ptx", 90)),  # a newer major: only the PTX, through the driver's JIT
        (70, None),  # older than anything it carries: no kernel image
    ],
)
def test_how_a_gpu_runs_the_code(module: dict[str, Any], arch: int, expected: tuple[str, int] | None) -> None:
    assert module["code_for"](arch, {"sass": [75, 80, 90], "ptx": [90]}) == expected


def test_a_component_without_a_wheel_here_is_said_so(module: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    spec = module["COMPONENTS"]["cudart"]
    assert module["no_wheel"]("cudart") is None
    monkeypatch.setitem(spec, "machines", ("ppc64le",))
    assert (
        module["no_wheel"]("cudart")
        == f"nvidia-cuda-runtime-cu12 has no linux {module['_platform']().split('-')[1]} wheel"
    )


def test_the_users_of_two_variants_are_told_to_keep_one(module: dict[str, Any]) -> None:
    said = module["clash"](["example-cuda13x"])
    assert said.startswith("example-cuda12x and example-cuda13x are installed together")
    assert "pip uninstall -y example-cuda12x example-cuda13x" in said


def test_each_variant_module_is_its_rendered_data_then_this_code_byte_for_byte(project: Path) -> None:
    plan = make_plan(project)
    template = environment(project).get_template("cuda_variant.py.j2")
    shipped = "\n\n".join(_after_marker(name) for name in ("loader.py", "diagnostic.py", "duplicates.py", "main.py"))
    for rendered in render_plan(plan, project):
        variant = rendered.variant
        siblings = [v for v in plan.variants if v.recipe.name == variant.recipe.name and v.major != variant.major]
        context = template_context(
            variant, "matrix.yaml", project, source_tree(variant.recipe.source, variant.recipe_dir), siblings
        )
        data = template.render(context)
        assert rendered.files["_cuda_variant.py"] == f"{data}\n\n{shipped}"
        assert variant_code() == f"\n\n{shipped}"
        # The example data, typed for mypy, never reach a wheel.
        assert "example-cuda12x" not in rendered.files["_cuda_variant.py"]


def test_importing_the_module_loads_the_components_library_from_another_sys_path_entry(tmp_path: Path) -> None:
    """The import itself does the loading: a real shared library (built here, named as cudart's) in a site on
    sys.path that is not the package's own is loaded by its full path and mapped into the process."""
    library = tmp_path / "site" / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12"
    library.parent.mkdir(parents=True)
    (tmp_path / "stub.c").write_text("int cudart_stand_in(void) { return 12; }\n")
    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler, "a C compiler builds the stand-in library"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", library, tmp_path / "stub.c"], check=True)
    package = tmp_path / "own" / "example"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import _cuda_variant\n")
    data = SHIPPED.joinpath("variant_data.py").read_text(encoding="utf-8")
    (package / "_cuda_variant.py").write_text(data + variant_code(), encoding="utf-8")
    probe = (
        "import example._cuda_variant as m, json\n"
        "maps = open('/proc/self/maps').read()\n"
        "print(json.dumps([m.FOUND.get('libcudart.so.12', [''])[0], maps.count('libcudart.so.12') > 0]))"
    )
    ran = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path[:0] = {[str(package.parent), str(library.parents[3])]!r}\n{probe}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    found, mapped = json.loads(ran.stdout)
    assert (found, mapped) == (str(library), True)
