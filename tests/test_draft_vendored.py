"""tests/sources/vendlib, the hardest shapes of a source in small: scikit-build-core taking CMAKE_ARGS; its CUDA in a
vendored CMake project reached through add_subdirectory, behind a switch of its own (VENDKERN_CUDA, which no
USE_/WITH_ spelling finds) and with architectures of its own (VENDKERN_CUDA_ARCHS); cudart and cuBLAS linked, a
cuFFT link behind an OFF plugin and a CUDA::curand named in list(REMOVE_ITEM) that link nothing; its library opened
through two helper functions when the package is imported. Its draft is read here; test_drafting_build.py builds
it (heavy). Also the readers' smaller shapes, each from a few files."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import yaml

from wheelfactory.drafting import SourceGiven, draft_recipe
from wheelfactory.drafting.cmake_reading import parse_commands, read_cmake_chain
from wheelfactory.drafting.cuda_build import cuda_switches
from wheelfactory.drafting.reading import SourceTree
from wheelfactory.inputs import Recipe

from .conftest import SOURCES


def vendlib_project(project: Path) -> Path:
    """The project with vendlib's source where a drafted recipe keeps it (recipes/vendlib/source), no recipe yet."""
    shutil.copytree(SOURCES / "vendlib", project / "recipes/vendlib/source")
    return project / "recipes/vendlib/source"


def _files(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def _draft(project: Path, source: Path) -> Recipe:
    path, _ = draft_recipe(SourceGiven(folder=source), project)
    return Recipe.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def test_vendlibs_draft_reads_its_build_the_way_it_runs(project: Path) -> None:
    source = vendlib_project(project)
    assert list(cuda_switches(source)) == ["VENDKERN_CUDA"]
    drafted = _draft(project, source)
    assert (drafted.name, drafted.import_name, drafted.wheel_abi) == ("vendlib", "vendlib", "none")
    assert sorted(drafted.components) == ["cublas", "cudart"]  # not cufft (plugin OFF), not curand (REMOVE_ITEM)
    assert drafted.environment == {"CMAKE_ARGS": "-DVENDKERN_CUDA=ON -DVENDKERN_CUDA_ARCHS=$CMAKE_CUDA_ARCHITECTURES"}
    assert drafted.smoke.cuda_at_import
    text = (project / "recipes/vendlib/recipe.yaml").read_text(encoding="utf-8")
    assert "third_party/vendkern/CMakeLists.txt:13 enable_language(... CUDA) is guarded by VENDKERN_CUDA" in text
    assert "vendlib/__init__.py:7 loads a library with ctypes through open_library()" in text


def test_a_cmakelists_the_python_build_never_runs_is_not_read(project: Path) -> None:
    """torch-scatter's shape: setup.py builds with cpp_extension; its CMakeLists (for the C++ library) has a
    WITH_CUDA option that the wheel's build never sees."""
    source = _files(
        project / "recipes/scatterish/source",
        {
            "scatterish/__init__.py": "",
            "setup.py": "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
            "setup(name='scatterish', version='1.0', packages=['scatterish'])\n",
            "CMakeLists.txt": 'option(WITH_CUDA "CUDA" OFF)\nif(WITH_CUDA)\n  enable_language(CUDA)\nendif()\n',
        },
    )
    drafted = _draft(project, source)
    assert drafted.torch and "CMAKE_ARGS" not in drafted.environment


def test_a_switch_is_taken_by_what_it_gates_and_the_projects_own_wins(project: Path) -> None:
    """COMPUTE_BACKEND=cuda guards enable_language(CUDA) at the top; a vendored project's own CUDA option (as
    LightGBM's nanoarrow has) is not the project's switch."""
    source = _files(
        project / "recipes/backendish/source",
        {
            "backendish/__init__.py": "",
            "pyproject.toml": '[build-system]\nbuild-backend = "scikit_build_core.build"\n'
            '[project]\nname = "backendish"\nversion = "1.0"\n',
            "CMakeLists.txt": 'set(COMPUTE_BACKEND "cpu" CACHE STRING "cpu or cuda")\n'
            "add_subdirectory(external/arrowish)\n"
            'if(${COMPUTE_BACKEND} STREQUAL "cuda")\n  enable_language(CUDA)\n'
            "  target_link_libraries(b PRIVATE CUDA::cusparse)\nendif()\n",
            "external/arrowish/CMakeLists.txt": 'option(ARROWISH_WITH_CUDA "x" OFF)\n'
            "if(ARROWISH_WITH_CUDA)\n  find_package(CUDAToolkit)\n"
            "  target_link_libraries(a CUDA::cuda_driver)\nendif()\n",
        },
    )
    drafted = _draft(project, source)
    assert drafted.environment == {"CMAKE_ARGS": "-DCOMPUTE_BACKEND=cuda"}
    assert drafted.components == ["cusparse"]


def test_environment_switches_are_read_through_helpers_and_by_what_they_gate(project: Path) -> None:
    """deepspeed's shape: DS_BUILD_OPS read through get_env_if_set() decides whether ops are added to ext_modules
    (through op_enabled()); DS_ACCELERATOR, read in a package setup.py imports, is compared with "cuda"; the
    build_ext comes from that package's op-builder, which uses cpp_extension; find_packages(include=...) says
    which folders the wheel installs."""
    source = _files(
        project / "recipes/opsish/source",
        {
            "opsish/__init__.py": "",
            "accel/__init__.py": "from .real import get_accelerator\n",
            "accel/real.py": "import os\n\ndef get_accelerator():\n    name = os.environ['OPS_ACCELERATOR']\n"
            "    if name == 'cuda':\n        from torch.utils.cpp_extension import BuildExtension\n"
            "        return BuildExtension\n",
            "setup.py": "import os\nfrom setuptools import setup, find_packages\nfrom accel import get_accelerator\n\n"
            "def get_env_if_set(key, default=''):\n    return os.environ.get(key, None) or default\n\n"
            "BUILD_DEFAULT = int(get_env_if_set('OPS_BUILD_ALL', 0))\n\n"
            "def op_enabled(name):\n    return int(get_env_if_set(name, BUILD_DEFAULT))\n\n"
            "ext_modules = []\nfor op in ['a']:\n    if op_enabled(op):\n        ext_modules.append(op)\n"
            "setup(name='opsish', version='1.0', packages=find_packages(include=['opsish', 'opsish.*']),\n"
            "      ext_modules=ext_modules, cmdclass={'build_ext': get_accelerator()})\n",
        },
    )
    drafted = _draft(project, source)
    assert drafted.environment == {"OPS_BUILD_ALL": "1", "OPS_ACCELERATOR": "cuda"}
    # What the no-CUDA gate names for a build that left them out.
    assert sorted(cuda_switches(source)) == ["OPS_ACCELERATOR", "OPS_BUILD_ALL"]
    assert drafted.torch
    assert (drafted.import_name, drafted.packages) == ("opsish", [])


def test_cmake_commands_are_read_whatever_the_text_holds() -> None:
    text = '#[[ a bracket\ncomment(x) ]]\nset(A "x;y" # c\n  [[raw)]])\nfoo_bar (B)\nif(NOT DEFINED C)\n'
    assert parse_commands(text) == [
        ("set", ["A", "x;y", "[[raw)]]"], 3),
        ("foo_bar", ["B"], 5),
        ("if", ["NOT", "DEFINED", "C"], 6),
    ]
    assert parse_commands("set(A [==[x]]y]==] b)\nf(c)") == [("set", ["A", "[==[x]]y]==]", "b"], 1), ("f", ["c"], 2)]
    # An open quote or parenthesis runs to the end; a long word is looked at once.
    assert [c[0] for c in parse_commands("x" * 100_000 + "(" + '"' * 3)] == ["x" * 100_000]
    assert parse_commands("a" * 100_000) == []


def test_the_cmake_chain_stays_inside_the_source(project: Path, tmp_path: Path) -> None:
    """An add_subdirectory leading out of the source is not followed, nor one through a link (noted); a
    find_packages(where=...) outside finds nothing."""
    outside = _files(
        tmp_path / "outside", {"CMakeLists.txt": "enable_language(CUDA)\ntarget_link_libraries(x cufft)\n"}
    )
    source = _files(
        project / "recipes/escaping/source",
        {
            "escaping/__init__.py": "",
            "pyproject.toml": '[build-system]\nbuild-backend = "scikit_build_core.build"\n'
            '[project]\nname = "escaping"\nversion = "1.0"\n',
            "CMakeLists.txt": f"add_subdirectory({outside})\nadd_subdirectory(../../../outside)\n"
            "add_subdirectory(linked)\n",
        },
    )
    (source / "linked").symlink_to(outside)
    path, notes = draft_recipe(SourceGiven(folder=source), project)
    drafted = Recipe.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    assert drafted.components == [] and "CMAKE_ARGS" not in drafted.environment
    assert notes == [f"linked/CMakeLists.txt: a link (to '{outside}'), not followed — nothing was read from it"]


def test_link_variables_are_expanded_within_a_bound(tmp_path: Path) -> None:
    """Variables each naming the one before a thousand times: a billion items if multiplied out, a bounded few
    here; the target a command links to (here named `cuda`) is no library it links."""
    cmake = "set(V0 CUDA::cublas)\n" + "".join(f"set(V{i + 1} " + f"${{V{i}}} " * 1000 + ")\n" for i in range(6))
    cmake += "target_link_libraries(cuda ${V3})\n"
    (tmp_path / "CMakeLists.txt").write_text(cmake)
    started = time.monotonic()
    chain = read_cmake_chain(SourceTree(tmp_path))
    assert time.monotonic() - started < 2
    assert chain is not None and list(chain.links) == ["cublas"]
