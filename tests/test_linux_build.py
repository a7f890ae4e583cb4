"""Linux wheels end to end, for real: NVIDIA wheels from the index, cibuildwheel in the offline manylinux-compatible
image, auditwheel and patchelf, the ELF audit, and smoke tiers in fresh containers. And each gate must bite.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from wheelfactory.audit import audit_wheel
from wheelfactory.binaries.elf import read_elf
from wheelfactory.binaries.wheelcheck import check_wheel
from wheelfactory.binaries.wheelfile import WheelName, pack, unpack
from wheelfactory.cli import main
from wheelfactory.declared import nvidia_dependencies
from wheelfactory.errors import ToolFailure
from wheelfactory.image import interpreters
from wheelfactory.pipeline import BuildRequest, build, existing
from wheelfactory.plan import copy_inputs, make_plan
from wheelfactory.sbom.checks import read_sbom
from wheelfactory.sbom.document import to_json
from wheelfactory.smoke import smoke
from wheelfactory.sources import SourceIdentity, source_identity
from wheelfactory.toolkit.provision import provision
from wheelfactory.verify import verify

from .conftest import REPO, Built, build_recipe, matrix_for
from .wheelbytes import record_line, write_zip

pytestmark = [pytest.mark.slow, pytest.mark.docker]
CUDA_SONAME_PREFIXES = ("libcudart", "libcublas", "libnvrtc", "libnccl", "libcuda.")
MODULES = {"_flags", "_runtime", "_blas", "_nvrtc", "_device", "_nccl"}


def _binaries(wheel: Path, into: Path) -> dict[str, Path]:
    tree = unpack(wheel, into)
    return {p.name.split(".")[0]: p for p in tree.rglob("*.so")}


@pytest.mark.parametrize("major", [11, 12, 13])
def test_wheel_passes_audit_and_smoke_and_lands_in_dist(
    major: int, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    built: Built = request.getfixturevalue(f"built{major}")
    record = built.record
    assert record.passed, record.why_not()
    assert built.wheel.is_file()
    assert record.wheel.startswith(f"cuprobe_cuda{major}x-0.1.0-cp312-cp312-manylinux_")
    report = json.loads((built.root / "dist" / "report.json").read_text())["wheels"]
    assert [e["wheel"] for e in report] == [record.wheel] and report[0]["passed"]
    assert sorted(p.name for p in (built.root / "dist").iterdir()) == sorted([record.wheel, "report.json"])
    # Where the smoke's time went: each step timed, in the order they began, within the smoke's own time.
    steps = report[0]["smoke_steps"]
    names = [s["name"] for s in steps]
    for expected in ("start the container", "3.12: create the venvs", "3.12: pip install into /smoke/3.12/cuda"):
        assert expected in names, names
    assert any(n.startswith("3.12: copy the install into ") for n in names)
    assert any(n.startswith("3.12: probe /smoke/3.12/targeted (") for n in names)
    assert [s["started"] for s in steps] == sorted(s["started"] for s in steps)
    assert max(s["started"] + s["seconds"] for s in steps) <= report[0]["timings_s"]["smoke"] + 0.1

    binaries = _binaries(built.wheel, tmp_path)
    assert set(binaries) == MODULES
    for name, path in binaries.items():
        info = read_elf(path)
        assert "libcuda.so.1" not in info.needed, name
        assert all(entry.startswith("$ORIGIN") for entry in info.rpath), (name, info.rpath)
        assert not info.runpath, name
    flags = read_elf(binaries["_flags"])
    assert not [lib for lib in flags.needed if lib.startswith(CUDA_SONAME_PREFIXES)]
    runtime = read_elf(binaries["_runtime"])
    expected_dir = "nvidia/cu13/lib" if major == 13 else "nvidia/cuda_runtime/lib"
    assert runtime.rpath == (f"$ORIGIN/../{expected_dir}",)
    assert read_elf(binaries["_nccl"]).rpath[-1] == "$ORIGIN/../../nvidia/nccl/lib"
    # nvcc's module: device code for every architecture, the runtime linked dynamically.
    device = read_elf(binaries["_device"])
    assert any(lib.startswith("libcudart.so.") for lib in device.needed), device.needed
    fatbin = subprocess.run(["readelf", "-S", str(binaries["_device"])], capture_output=True, text=True, check=True)
    assert ".nv_fatbin" in fatbin.stdout

    tier2 = next(t for t in record.smoke if t.tier == 2)
    probe = next(c for c in tier2.checks if c.name.startswith("python -m cuprobe"))
    assert probe.ok and "cublas" in probe.detail and "no CUDA driver" in probe.detail
    tier1 = next(t for t in record.smoke if t.tier == 1)
    nccl = next(c for c in tier1.checks if c.name.startswith("from cuprobe.cuda import nccl"))
    assert f"pip install 'cuprobe-cuda{major}x[nccl]'" in nccl.detail

    # The report says what it was built with: exactly the matrix's toolkit, and where nvcc came from.
    toolkit = report[0]["toolkit"]
    release = built.variant.cuda.toolkit
    assert toolkit["release"] == release and toolkit["nvcc"]["version"].startswith(f"{release}.")
    assert toolkit["nvcc"]["source"] in ("pip", "redist", "debian") and toolkit["nvcc"]["from"]
    assert all(v.split(".")[0].isdigit() for v in toolkit["components"].values())
    assert toolkit["cuda_archs"] == list(built.variant.cuda_archs("linux-x86_64"))
    # CMake hands nvcc the factory's own choice (CUDAHOSTCXX) as -ccbin: that is no host compiler of the build's.
    assert toolkit["host_compiler"] and "GCC" in toolkit["host_compiler"]
    assert "the build's own" not in toolkit["host_compiler"]

    # The wheel's SBOM says the same, and what the wheel will load (docs/sbom.md); tier 3 held it to the wheel.
    tier3 = next(t for t in record.smoke if t.tier == 3)
    assert next(c for c in tier3.checks if c.name.startswith("the SBOM")).ok
    facts = read_sbom(built.wheel)[0]
    tools = {tool.role: tool for tool in facts.tools}
    assert tools["cuda-toolkit"].version == release and tools["nvcc"].version == toolkit["nvcc"]["version"]
    served = [tool for tool in facts.tools if tool.role == "nvcc-source"]
    assert served and sorted((s.name, s.version, s.sha256) for s in served) == sorted(
        (f["name"], f["version"], f["sha256"]) for f in toolkit["nvcc"]["files"]
    )
    assert all(len(s.sha256) == 64 and s.purl.startswith("pkg:") for s in served)
    assert tools["host-compiler"].name == toolkit["host_compiler"]
    assert tools["build-image"].version.startswith("sha256:")  # the offline image: its local ID
    assert tools["repair"].name == "auditwheel" and tools["repair"].version[0].isdigit()
    assert facts.source == source_identity(built.variant.recipe.source, built.variant.recipe_dir)
    required = {r.name: r for r in facts.requires if r.unconditional}
    assert set(required) == {str(canonicalize_name(Requirement(r).name)) for r in nvidia_dependencies(built.variant)}
    runtime_module = next(m for m in record.built.binaries if "/_runtime." in m)
    runtime = [name for name in required if "cuda-runtime" in name]
    assert [r.name for r in facts.requires if runtime_module in r.linked_by] == runtime
    assert facts.runs_on.minimum_driver == report[0]["gpu_code"]["minimum_driver"]["version"]


def test_without_as_needed_the_audit_rejects_the_overlinked_module(tmp_path: Path, build_image: str) -> None:
    # manylinux's gcc does not default to --as-needed; Debian's does, so force the old behaviour instead of the
    # factory's injected flag. setup.py hands every extension every CUDA library, as CuPy's build did.
    built = build_recipe(tmp_path, 12, build_image, LDFLAGS="-Wl,--no-as-needed")
    record = built.record
    assert not record.passed
    assert record.audit is not None
    flags = next(b for b in record.audit.binaries if b.module == "cuprobe._flags")
    assert any("libcublas.so.12" in p and "no CUDA library" in p for p in flags.problems), flags.problems
    assert not built.wheel.exists()
    entry = json.loads((built.root / "dist" / "report.json").read_text())["wheels"][0]
    assert not entry["passed"] and any("cuprobe._flags" in r or "_flags" in r for r in entry["rejected_because"])


def test_a_build_without_a_host_compiler_nvcc_accepts_stops_before_compiling(tmp_path: Path, build_image: str) -> None:
    # As if the image had only compilers newer than CUDA's limit: the prepare step names what is needed.
    with pytest.raises(
        ToolFailure, match=r"no host compiler for nvcc 12\.\d: it accepts GCC up to 7, .*install g\+\+-7"
    ):
        build_recipe(tmp_path, 12, build_image, WHEELFACTORY_GCC_MAX="7")
    log = (tmp_path / "project" / "build" / "logs" / "cuprobe-cuda12x-linux-x86_64.log").read_text()
    assert "nvcc -c src/device.cu" not in log


def test_a_grafted_libcudart_is_rejected(built12: Built, tmp_path: Path) -> None:
    variant = built12.variant
    toolkit = provision(variant)
    # Real auditwheel, told to exclude everything but the runtime, with the toolkit on the library path: it
    # grafts libcudart into the wheel, as a careless repair would.
    excludes = [
        arg
        for lib in ("libcublas.so.12", "libcublasLt.so.12", "libnvrtc.so.12", "libnccl.so.2")
        for arg in ("--exclude", lib)
    ]
    out = tmp_path / "grafted"
    env = {**os.environ, "LD_LIBRARY_PATH": str(toolkit.lib_dir)}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "auditwheel",
            "repair",
            "--only-plat",
            *excludes,
            "-w",
            str(out),
            str(built12.wheel),
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    grafted = next(out.glob("*.whl"))
    assert any("libcudart" in n for n in zipfile.ZipFile(grafted).namelist())

    audit = audit_wheel(existing(grafted, variant, built12.record.built.image))

    assert not audit.passed
    bundled = [b for b in audit.binaries if b.module is None and "libcudart" in b.member]
    assert bundled and any("a CUDA library is bundled" in p for p in bundled[0].problems), bundled


def test_a_module_linking_the_driver_is_rejected(built12: Built, tmp_path: Path) -> None:
    # A stand-in libcuda.so.1 and a real extension that links it eagerly, as a careless build would.
    (tmp_path / "cuda_stub.c").write_text("int cuInit(unsigned int flags) { return flags; }\n")
    (tmp_path / "flags.c").write_text("int cuInit(unsigned int); int cuprobe_touch(void) { return cuInit(0); }\n")
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcuda.so.1",
            "-o",
            str(tmp_path / "libcuda.so.1"),
            str(tmp_path / "cuda_stub.c"),
        ],
        check=True,
    )
    tree = unpack(built12.wheel, tmp_path / "tree")
    flags = next(tree.rglob("_flags.*.so"))
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-Wl,--no-as-needed",
            "-o",
            str(flags),
            str(tmp_path / "flags.c"),
            f"-L{tmp_path}",
            "-l:libcuda.so.1",
        ],
        check=True,
    )
    assert "libcuda.so.1" in read_elf(flags).needed
    (tmp_path / "out").mkdir()
    wheel = pack(tree, tmp_path / "out")

    audit = audit_wheel(existing(wheel, built12.variant, built12.record.built.image))

    problems = next(b for b in audit.binaries if b.module == "cuprobe._flags").problems
    assert any("links the driver libcuda.so.1" in p for p in problems), problems


def test_a_wrong_rpath_is_caught_by_smoke_tier_2(built12: Built, tmp_path: Path, build_image: str) -> None:
    variant = built12.variant
    tree = unpack(built12.wheel, tmp_path / "tree")
    runtime = next(tree.rglob("_runtime.*.so"))
    # Points at cuBLAS's directory instead of the runtime's: the audit would say so, but the smoke tier must
    # catch it on its own, by loading the module.
    subprocess.run(
        ["patchelf", "--force-rpath", "--set-rpath", "$ORIGIN/../nvidia/cublas/lib", str(runtime)], check=True
    )
    (tmp_path / "out").mkdir()
    wheel = pack(tree, tmp_path / "out")

    tiers = smoke(existing(wheel, variant, build_image))

    assert [(t.tier, t.layout, t.versions) for t in tiers] == [
        (1, None, None),
        (2, "venv", "floors"),
        (2, "system-site-packages", "floors"),
        (2, "target", "floors"),
        (2, "venv", "newest"),
        (1, "beside cuprobe-cuda13x", None),
        (3, None, None),
    ]
    assert tiers[0].passed and tiers[5].passed
    # The CUDA wheels beside the package — in a venv at the floors and the newest, and in the --target folder
    # that holds both — where the RPATH is what finds them.
    for beside in (tiers[1], tiers[3], tiers[4]):
        assert not beside.passed
        failed = [c for c in beside.checks if not c.ok]
        assert any(c.name.startswith("import cuprobe._runtime") and "libcudart.so.12" in c.detail for c in failed)
    # Where the CUDA wheels are not beside the package the RPATH never served: the variant module loads them.
    assert tiers[2].passed


def test_warm_provisioning_downloads_nothing(built12: Built) -> None:
    toolkit = provision(built12.variant)
    assert not toolkit.downloaded
    assert (toolkit.prefix / "include" / "cuda_runtime_api.h").is_file()
    assert (toolkit.prefix / "include" / "crt" / "host_config.h").is_file()
    assert (toolkit.prefix / "lib64" / "libcublas.so").resolve().name == "libcublas.so.12"


def test_an_image_that_cannot_be_pulled_names_the_offline_image(
    docker: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = copy_inputs(REPO, tmp_path / "project")
    status = main(
        [
            "--root",
            str(root),
            "build",
            "--cuda",
            "12",
            "--python",
            "3.12",
            "--image",
            "registry.invalid/wheelfactory/none:1",
        ]
    )
    assert status == 3  # the registry cannot be reached: a tool failure, not bad input
    err = capsys.readouterr().err
    assert "cannot pull the build image registry.invalid/wheelfactory/none:1" in err
    assert "nox -s image" in err and "--image manylinux-offline:latest" in err
    assert not (root / "dist").exists()


UNPULLABLE = "registry.invalid/wheelfactory/none:1"


def _holding_the_build_lock(image: str, seconds: float) -> subprocess.Popen[str]:
    """Another process of this host that holds `image`'s build lock for `seconds`, as `nox -s image` does while
    it builds; it prints a line once it holds it."""
    hold = (
        "import sys, time; from wheelfactory.image import _build_lock; lock = _build_lock(sys.argv[1]); "
        "lock.acquire(); print('held', flush=True); time.sleep(float(sys.argv[2]))"
    )
    holder = subprocess.Popen([sys.executable, "-c", hold, image, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_build_waits_for_another_process_building_its_image(
    docker: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An image that is not here yet, but that another process is building, is waited for instead of pulled at
    once (the pull then fails here, as no registry answers); one that takes too long is said to be stuck."""
    monkeypatch.setenv("WHEELFACTORY_CACHE", str(tmp_path / "cache"))
    root = copy_inputs(REPO, tmp_path / "project")
    command = ["--root", str(root), "build", "--cuda", "12", "--python", "3.12", "--image", UNPULLABLE]
    holder = _holding_the_build_lock(UNPULLABLE, 3)
    started = time.monotonic()
    assert main(command) == 3
    assert time.monotonic() - started >= 2.5 and holder.wait(timeout=10) == 0
    err = capsys.readouterr().err
    assert f"wait for another process's build of {UNPULLABLE}" in err and "cannot pull the build image" in err

    monkeypatch.setattr("wheelfactory.image.BUILD_WAIT_S", 1)
    holder = _holding_the_build_lock(UNPULLABLE, 30)
    try:
        assert main(command) == 3
    finally:
        holder.kill()
        holder.wait()
    assert f"another process has been building {UNPULLABLE} for over" in capsys.readouterr().err
    assert not (root / "dist").exists()


def test_release_gate_wants_exactly_the_planned_wheels(built12: Built, tmp_path: Path) -> None:
    wheel = built12.wheel
    jobs = [job.as_json() for job in make_plan(built12.root).wheel_jobs()]
    ours = [job for job in jobs if job["id"] == "cuprobe-cuda12x-cp312-manylinux_x86_64"]
    assert verify(ours, [wheel]) == []

    problems = verify(jobs, [wheel])
    assert len(problems) == len(jobs) - 1 and all(p.startswith("missing: no wheel ") for p in problems)

    other = ours[0] | {"dist_name": "cuprobe-cuda13x"}
    assert verify([other], [wheel]) == [
        "missing: no wheel cuprobe-cuda13x 0.1.0 from job cuprobe-cuda12x-cp312-manylinux_x86_64",
        f"extra: {wheel.name} is not in the plan",
    ]
    # The wheel as pip and PyPI see it: the factory's own build passes every check of the gate.
    assert check_wheel(wheel) == (WheelName.of(wheel), [])

    # Its SBOM edited, RECORD written again for it: only the SBOM disagrees, and the gate names how.
    edited = tmp_path / "edited" / wheel.name
    edited.parent.mkdir()
    facts = read_sbom(wheel)[0]
    dropped = facts.requires[0]
    pinned = SourceIdentity(facts.source.kind, facts.source.name, "0" * 64)
    with zipfile.ZipFile(wheel) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    (sbom,) = [name for name in members if name.endswith("/sboms/wheelfactory.cdx.json")]
    members[sbom] = to_json(dataclasses.replace(facts, requires=facts.requires[1:], source=pinned))
    (record,) = [name for name in members if name.endswith(".dist-info/RECORD")]
    lines = [record_line(name, data) for name, data in members.items() if name != record]
    members[record] = ("\n".join([*lines, f"{record},,"]) + "\n").encode()
    write_zip(edited, members)
    assert check_wheel(edited)[1] == []
    assert verify(ours, [edited]) == [
        f"{wheel.name}: the SBOM names no {dropped.name}, which Requires-Dist requires ({dropped.requirement})",
        f"{wheel.name}: the SBOM's source is path source pinned at {'0' * 64}, where the recipe's is path source "
        f"pinned at {facts.source.pinned}",
    ]


CXX_RECIPE = """
name: cxxprobe
version: "0.1.0"
import: cxxprobe
source: {path: source}
components: [cudart]
opens_cuda: [cudart]
modules:
  cxxprobe._text: []
smoke:
  gpu_free: ["import cxxprobe._text; assert cxxprobe._text.cube_roots('8 27') == '2 3'"]
"""

CXX_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

static std::string cube_roots(const std::string &text) {
    std::istringstream in(text);
    std::vector<double> values;
    for (double v; in >> v;) values.push_back(std::cbrt(v));
    if (values.empty()) throw std::invalid_argument("no numbers");
    std::ostringstream out;
    for (size_t i = 0; i < values.size(); i++) out << (i ? " " : "") << values[i];
    return out.str();
}

static PyObject *py_cube_roots(PyObject *, PyObject *args) {
    const char *text;
    if (!PyArg_ParseTuple(args, "s", &text)) return nullptr;
    try {
        return PyUnicode_FromString(cube_roots(text).c_str());
    } catch (const std::exception &e) {
        PyErr_SetString(PyExc_ValueError, e.what());
        return nullptr;
    }
}

static PyMethodDef methods[] = {{"cube_roots", py_cube_roots, METH_VARARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cxxprobe._text", nullptr, -1, methods};
PyMODINIT_FUNC PyInit__text(void) { return PyModule_Create(&module); }
"""


# The package's setup.py reads its CUDA switch, which the recipe leaves off (as a draft that missed it would); its
# own code opens CUDA's runtime itself, when asked — what the recipe may declare instead.
CXX_SETUP = """import os
from setuptools import Extension, setup
cuda = os.environ.get("CXXPROBE_FORCE_CUDA", "0")  # 1: also build the kernels (not in this stand-in)
ext = Extension("cxxprobe._text", ["text.cpp"], language="c++", define_macros=[("CXXPROBE_CUDA", cuda)])
setup(packages=["cxxprobe"], ext_modules=[ext])
"""
CXX_INIT = """import ctypes


def runtime():
    return ctypes.CDLL("libcudart.so.13")
"""


def test_a_cxx_extension_builds_and_repairs_in_the_build_image_and_holds_cuda_only_as_declared(
    tmp_path: Path, build_image: str
) -> None:
    # libstdc++ (streams, exceptions) and libm: the symbol versions a C++ package needs must fit the image's tag.
    root = copy_inputs(REPO, tmp_path / "project")
    recipe = root / "recipes" / "cxxprobe"
    (recipe / "source" / "cxxprobe").mkdir(parents=True)
    (recipe / "recipe.yaml").write_text(CXX_RECIPE)
    (recipe / "source" / "cxxprobe" / "__init__.py").write_text(CXX_INIT)
    (recipe / "source" / "text.cpp").write_text(CXX_SOURCE)
    (recipe / "source" / "setup.py").write_text(CXX_SETUP)
    matrix = matrix_for(root, build_image)

    (record,) = build(BuildRequest(root, 13, ["3.12"], ["cxxprobe"], build_image, None, matrix))

    # Declared as what it is, a package that opens CUDA's runtime itself (whose wheel it then requires), it passes
    # the audit, and its smoke loads that runtime from NVIDIA's wheel in every layout.
    assert record.passed, record.why_not()
    opened = [c for tier in record.smoke for c in tier.checks if c.name.startswith("cudart, which the package opens")]
    assert opened and all(c.ok for c in opened), opened
    tag = (
        subprocess.run(
            ["docker", "run", "--rm", build_image, "sh", "-c", "echo $AUDITWHEEL_PLAT"], capture_output=True, text=True
        ).stdout.strip()
        or "manylinux_2_28_x86_64"
    )
    assert record.wheel.endswith(f"-cp312-cp312-{tag}.whl"), record.wheel
    assert record.audit is not None
    (module,) = [b for b in record.audit.binaries if b.module == "cxxprobe._text"]
    assert "libstdc++.so.6" in module.needed and not module.problems
    # Without that declaration, the very wheel is what a draft that missed the CUDA switch builds: a CPU build under
    # a CUDA name, refused, saying what was looked for and which switch the source reads.
    (recipe / "recipe.yaml").write_text(CXX_RECIPE.replace("opens_cuda: [cudart]\n", ""))
    variant = next(v for v in make_plan(root, matrix, ["cxxprobe"]).variants if v.major == 13)
    assert audit_wheel(dataclasses.replace(record.built, variant=variant)).problems == [
        "holds no CUDA: none of its 1 binaries carries device code (a fatbin section) or links a CUDA 13 library or "
        "the driver (libcuda.so.1), and the recipe declares no CUDA library that the package opens itself "
        "(opens_cuda) — a CPU build under a CUDA name is never shipped; the build left CUDA out: turn its CUDA switch "
        "on in the recipe's environment — the source reads CXXPROBE_FORCE_CUDA=1 (setup.py:3 reads "
        "CXXPROBE_FORCE_CUDA)"
    ]


def test_an_image_without_a_wanted_python_stops_before_any_download(
    build_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The README's offline recipe without --python: matrix.yaml wants CPython 3.14 and 3.15, which the offline
    # image lacks where Debian's mirror served no source to build them from. That is known in seconds, before CUDA
    # is downloaded.
    offered = interpreters(build_image)
    wanted = ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15"]
    if set(wanted) <= set(offered):
        pytest.skip(f"{build_image} has every CPython the matrix wants")
    root = copy_inputs(REPO, tmp_path / "project")
    monkeypatch.setenv("WHEELFACTORY_CACHE", str(tmp_path / "cache"))
    started = time.monotonic()

    status = main(["--root", str(root), "build", "--cuda", "13", "--image", build_image])

    seconds = time.monotonic() - started
    err = capsys.readouterr().err
    missing = [p for p in wanted if p not in offered]
    assert status == 2 and seconds < 5, (status, seconds)
    assert f"{build_image} has no CPython {', '.join(missing)}" in err
    usable = " ".join(f"--python {p}" for p in wanted if p in offered)
    assert f"pass {usable}" in err
    assert not (tmp_path / "cache").exists() and not (root / "dist").exists()
