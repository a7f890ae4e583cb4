"""The CUDA wheels wherever pip put them: cuprobe's runtime module loads NVIDIA's libraries from a plain venv,
from the base under a --system-site-packages venv and from a `pip install --target` folder on PYTHONPATH — for
CUDA 11, 12 and 13 — in a smoke container that also holds a system CUDA, which must serve nothing and must not
hide a broken wheel."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from wheelfactory.binaries.wheelfile import WheelMetadata, metadata, pack, renamed, unpack
from wheelfactory.image import host_pythons, image_id, remove_replaced
from wheelfactory.pipeline import existing
from wheelfactory.smoke import smoke
from wheelfactory.smoke.installs import shared_install
from wheelfactory.smoke.machines import DECOY_CUDA, ContainerMachine, HostMachine, SmokeContainer, register_decoys
from wheelfactory.smoke.nvidia import nvidia_wheels, runtime_site
from wheelfactory.smoke.results import Steps, TierResult
from wheelfactory.smoke.sharing import differs_by_python
from wheelfactory.smoke.tiers import NVRTC_COMPILE, neighbour_name, tier1, tier2, two_variants
from wheelfactory.toolkit.provision import provision

from .conftest import Built, add_source, build_recipe

pytestmark = [pytest.mark.slow, pytest.mark.docker]
DECOY_IMAGE = "wheelfactory-test-system-cuda:latest"
SYSTEM_CUDA = "/usr/local/cuda/lib64"
CUDART = {11: "libcudart.so.11.0", 12: "libcudart.so.12", 13: "libcudart.so.13"}
NVRTC = {11: "libnvrtc.so.11.2", 12: "libnvrtc.so.12", 13: "libnvrtc.so.13"}
# Where each layout's nvidia/ is, as /proc/self/maps names it (the base interpreter may sit behind a link).
SITES = {
    ("venv", "floors"): "/smoke/3.12/cuda/lib/python3.12/site-packages/nvidia/",
    ("system-site-packages", "floors"): "/lib/python3.12/site-packages/nvidia/",
    ("target", "floors"): "/smoke/3.12/target/nvidia/",
    ("venv", "newest"): "/smoke/3.12/newest/lib/python3.12/site-packages/nvidia/",
}


@pytest.fixture(scope="session")
def decoy_image(
    build_image: str, built11: Built, built12: Built, built13: Built, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """The build image with a system CUDA: the runtime and NVRTC of all three majors, the same files NVIDIA's
    wheels carry, in /usr/local/cuda/lib64 and registered with ldconfig (as a CUDA toolkit install does)."""
    context = tmp_path_factory.mktemp("system-cuda")
    (context / "lib").mkdir()
    for built in (built11, built12, built13):
        lib64 = provision(built.variant).prefix / "lib64"
        for name in (CUDART[built.variant.major], NVRTC[built.variant.major]):
            shutil.copy(lib64 / name, context / "lib" / name)  # follows the symlink to the real file
    (context / "Dockerfile").write_text(
        f"FROM {build_image}\n"
        f"COPY lib/ {SYSTEM_CUDA}/\n"
        f"RUN echo {SYSTEM_CUDA} > /etc/ld.so.conf.d/cuda.conf && ldconfig\n"
    )
    replaced = image_id(DECOY_IMAGE)
    subprocess.run(["docker", "build", "--quiet", "-t", DECOY_IMAGE, str(context)], check=True, capture_output=True)
    remove_replaced(DECOY_IMAGE, replaced)
    return DECOY_IMAGE


def _layouts(tiers: list[TierResult]) -> dict[tuple[str, str], TierResult]:
    """Tier 2's results by (layout, versions of NVIDIA's wheels)."""
    return {(t.layout, t.versions): t for t in tiers if t.tier == 2 and t.layout and t.versions}


@pytest.mark.parametrize("major", [11, 12, 13])
def test_the_runtime_comes_from_the_pip_wheels_in_every_layout(
    major: int, request: pytest.FixtureRequest, decoy_image: str
) -> None:
    built: Built = request.getfixturevalue(f"built{major}")
    tiers = smoke(existing(built.wheel, built.variant, decoy_image))
    layouts = _layouts(tiers)
    assert all(t.passed for t in layouts.values()), [
        (t.label, c.name, c.detail) for t in tiers for c in t.checks if not c.ok
    ]
    # Tier 1 expects no CUDA anywhere; with a system CUDA its modules import, and it says which library served.
    tier1 = next(t for t in tiers if t.tier == 1)
    runtime1 = next(c for c in tier1.checks if c.name.startswith("import cuprobe._runtime"))
    assert not runtime1.ok and f"{SYSTEM_CUDA}/{CUDART[major]}" in runtime1.detail
    assert set(layouts) == set(SITES)
    for name, tier in layouts.items():
        runtime = next(c for c in tier.checks if c.name.startswith("import cuprobe._runtime"))
        # /proc/self/maps after the import: this major's runtime from this layout's nvidia/, and nothing from
        # elsewhere (outside the venv layout the variant module loaded every declared component at import).
        assert CUDART[major] in [Path(lib).name for lib in runtime.libraries], (name, runtime.libraries)
        assert all(SITES[name] in lib for lib in runtime.libraries), (name, runtime.libraries)
        assert name == ("venv", "floors") or not [lib for lib in runtime.libraries if "/smoke/3.12/cuda/" in lib]
        assert not [lib for lib in runtime.libraries if lib.startswith(SYSTEM_CUDA)]
        # NVRTC compiled a kernel while a decoy copy of its builtins was registered with ldconfig: the builtins
        # it opened by name are this layout's, as every other CUDA library mapped.
        compiled = next(c for c in tier.checks if c.name.startswith("NVRTC compiles a kernel to CUBIN"))
        builtins = [lib for lib in compiled.libraries if "libnvrtc-builtins" in lib]
        assert compiled.ok and builtins and all(SITES[name] in lib for lib in builtins), (name, compiled)
    # The diagnostic says where each library comes from and why: beside the package where pip put both in one
    # place (a venv, a --target folder), elsewhere on sys.path under a venv over a base that holds them.
    diagnostics = {
        name: next(c for c in tier.checks if c.name == "python -m cuprobe._cuda_variant").detail
        for name, tier in layouts.items()
    }
    layered = diagnostics["system-site-packages", "floors"]
    assert SITES["system-site-packages", "floors"] in layered
    assert "on sys.path, where the extensions' RPATH does not reach" in layered
    for name in (("venv", "floors"), ("target", "floors")):
        assert SITES[name] in diagnostics[name]
        assert "beside the package, where the extensions' RPATH reaches it" in diagnostics[name]
    assert not [d for d in diagnostics.values() if "Warning" in d]  # runpy's, for a module the package imported


def test_without_the_variant_module_nvrtc_opens_the_decoys_builtins(built13: Built, build_image: str) -> None:
    """Why the variant module loads NVRTC's builtins itself: CUDA 13's libnvrtc.so.13 has no RUNPATH and opens
    them by name, so loaded by full path from NVIDIA's wheel — but not through the package — it maps a system
    copy registered with ldconfig (the smoke's decoy)."""
    built = existing(built13.wheel, built13.variant, build_image)
    site = runtime_site(built.toolkit, nvidia_wheels(WheelMetadata.read(built.path), "floors"))
    script = (
        register_decoys(["/rt/nvidia/cu13/lib/libnvrtc-builtins.so.13.*"])
        + " && /opt/python/cp312-cp312/bin/python -c "
        + shlex.quote(
            NVRTC_COMPILE.format(package="os", library="/rt/nvidia/cu13/lib/libnvrtc.so.13", arch=90)
            + "print([l.split()[-1] for l in open('/proc/self/maps') if 'libnvrtc-builtins' in l][0])"
        )
    )
    run = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "-v", f"{site}:/rt:ro", build_image, "sh", "-c", script],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().startswith(f"{DECOY_CUDA}/libnvrtc-builtins.so.13."), run.stdout


def test_a_system_cuda_does_not_hide_a_broken_wheel(built12: Built, decoy_image: str, tmp_path: Path) -> None:
    # No RPATH on the runtime module: beside the package nothing points at NVIDIA's wheels, so the system's
    # loader finds the system CUDA — and the smoke must say so rather than pass.
    tree = unpack(built12.wheel, tmp_path / "tree")
    runtime = next(tree.rglob("_runtime.*.so"))
    subprocess.run(["patchelf", "--remove-rpath", str(runtime)], check=True)
    (tmp_path / "out").mkdir()
    wheel = pack(tree, tmp_path / "out")

    venv = _layouts(smoke(existing(wheel, built12.variant, decoy_image)))["venv", "floors"]

    assert not venv.passed
    failed = next(c for c in venv.checks if c.name.startswith("import cuprobe._runtime"))
    assert not failed.ok
    assert "CUDA libraries loaded from outside" in failed.detail and f"{SYSTEM_CUDA}/libcudart.so.12" in failed.detail


# Among CI's slowest (2026-11-26: 34 s): the Windows machine's layouts made for real on this host, each by pip
# (NVIDIA's wheels installed, not mounted), as a Windows runner makes them.
def test_the_windows_smoke_machine_lays_out_real_installs(
    built12: Built, build_image: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # HostMachine is what a Windows runner smokes with: real venvs, and NVIDIA's wheels installed by pip into one
    # and with --target into a folder on PYTHONPATH. No Windows host exists here; its code is the same on Linux
    # but for the venv's Scripts\python.exe and the py launcher, so it runs here on this host's CPython 3.12 with
    # the Linux wheel (this host's own CUDA is 13: nothing of CUDA 12 is on its loader path).
    (python,) = [p for p in host_pythons() if p.version == "3.12"]
    monkeypatch.setenv("PATH", f"{python.prefix / 'bin'}{os.pathsep}{os.environ['PATH']}")  # as setup-python does
    built = existing(built12.wheel, built12.variant, build_image)
    nvidia = {versions: nvidia_wheels(WheelMetadata.read(built.path), versions) for versions in ("floors", "newest")}
    neighbour = renamed(built.path, "cuprobe-cuda13x", tmp_path)
    machine = HostMachine(WheelMetadata.read(built.path), nvidia, "3.12", None, neighbour, Steps())
    try:
        bare, layouts = machine.create_venvs()
        tiers = [tier1(machine, bare, built), *(tier2(machine, layout, built) for layout in layouts)]
        tiers.append(two_variants(machine, bare, built))
    finally:
        machine.close()
    assert all(t.passed for t in tiers), [(t.label, c.name, c.detail) for t in tiers for c in t.checks if not c.ok]
    assert [(t.layout, t.versions) for t in tiers] == [
        (None, None),
        ("venv", "floors"),
        ("target", "floors"),
        ("venv", "newest"),
        ("beside cuprobe-cuda13x", None),
    ]
    for tier, layout in zip(tiers[1:], layouts, strict=False):
        runtime = next(c for c in tier.checks if c.name.startswith("import cuprobe._runtime"))
        assert CUDART[12] in [Path(lib).name for lib in runtime.libraries]
        assert all(lib.startswith(str(Path(layout.site).resolve())) for lib in runtime.libraries), runtime.libraries
    assert not machine.scratch.exists()  # closed: nothing of the venvs is left on the runner


@pytest.fixture(scope="module", params=[12, 13])
def datalib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, build_image: str) -> Built:
    """The CyFES-shaped source of tests/sources: its CUDA library is a data file, opened from sys.prefix."""
    major: int = request.param
    return build_recipe(tmp_path_factory.mktemp(f"datalib{major}"), major, build_image, "datalib", add=_add_datalib)


def _add_datalib(root: Path) -> None:
    add_source(root, "datalib")


def test_a_library_shipped_as_a_data_file_works_where_the_recipe_says(datalib: Built) -> None:
    """It builds, audits (its library carries device code for every architecture, and its RPATH reaches NVIDIA's
    runtime from prefix/lib) and passes every tier in each layout it supports; in the one it declares unsupported
    (a --target folder: pip puts no data file under its lib/) it fails for real, and the report says so and why."""
    record = datalib.record
    assert record.passed, record.why_not()
    members = set(zipfile.ZipFile(datalib.wheel).namelist())
    data = f"{datalib.variant.dist_name.replace('-', '_')}-0.3.0.data"
    assert {f"{data}/data/lib/libdatalib.so", f"{data}/scripts/datalib-info", f"{data}/headers/datalib.h"} <= members
    library = next(b for b in record.audit.binaries if b.member.endswith("libdatalib.so")) if record.audit else None
    assert library is not None and library.device_code and library.components == ["cudart"]
    # Its setup.py hands nvcc `-ccbin $CC` as PyTorch's cpp_extension does, $CC being the compiler cache's wrapper:
    # nvcc under sccache with sccache as its host compiler failed; the factory's nvcc drops that -ccbin.
    assert record.built.run is not None
    log = record.built.run.log.read_text(errors="replace")
    assert "nvcc: dropped -ccbin /opt/wheelfactory/cached/cc" in log
    layouts = _layouts(record.smoke)
    assert set(layouts) == set(SITES)
    for name, tier in layouts.items():
        assert tier.passed == (name[0] != "target"), (name, [(c.name, c.detail) for c in tier.checks if not c.ok])
    target = layouts["target", "floors"]
    assert target.unsupported and "pip install --target puts no data file there" in target.unsupported
    failed = [c for c in target.checks if not c.ok]
    assert [c.name for c in failed] == datalib.variant.recipe.smoke.with_cuda  # the rest loads and imports
    assert all("datalib: library not found at /smoke/3.12/targeted/lib/libdatalib.so" in c.detail for c in failed)
    # The report and the variant's description say which layouts it works in, and why not the other.
    (reported,) = json.loads((datalib.root / "dist/report.json").read_text())["wheels"]
    assert {n: (v["supported"], v["why_not"]) for n, v in reported["layouts"].items()} == {
        "venv": (True, None),
        "system-site-packages": (True, None),
        "target": (False, target.unsupported),
    }
    description = metadata(datalib.wheel).get_payload()
    assert "It does not work installed with `pip install --target DIR` with DIR on PYTHONPATH" in description
    assert target.unsupported in description


def _tree(machine: ContainerMachine, prefixes: list[str]) -> dict[str, dict[str, str]]:
    """Every file and link under each venv prefix or folder (but NVIDIA's mounted nvidia/): its mode and content's
    hash, or where it links to."""
    walk = (
        "import hashlib, json, os, sys\n"
        "trees = {}\n"
        "for prefix in sys.argv[1:]:\n"
        "    tree = trees[prefix] = {}\n"
        "    for folder, dirs, files in os.walk(prefix):\n"
        "        dirs[:] = [d for d in dirs if not (d == 'nvidia' and folder.endswith('site-packages'))]\n"
        "        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(folder, d)))]:\n"
        "            path = os.path.join(folder, name)\n"
        "            key = os.path.relpath(path, prefix)\n"
        "            if os.path.islink(path):\n"
        "                tree[key] = 'link to ' + os.readlink(path)\n"
        "            else:\n"
        "                digest = hashlib.sha256(open(path, 'rb').read()).hexdigest()\n"
        "                tree[key] = oct(os.stat(path).st_mode) + ' ' + digest\n"
        "print(json.dumps(trees))\n"
    )
    command = [machine.container.engine, "exec", machine.container.container, machine.base, "-c", walk, *prefixes]
    listed = subprocess.run(command, capture_output=True, text=True, check=True)
    trees: dict[str, dict[str, str]] = json.loads(listed.stdout)
    return trees


def _differ(one: dict[str, str], other: dict[str, str]) -> list[str]:
    return sorted(k for k in one.keys() | other.keys() if one.get(k) != other.get(k))


def _alike(by_copy: dict[str, dict[str, str]], by_pip: dict[str, dict[str, str]], python: str, built: Built) -> None:
    """Each venv's tree the same by copy as by pip, and holding what pip puts outside site-packages: datalib's
    library under the prefix's lib/, its scripts, its header under include/site/python<version>/."""
    for prefix, files in by_pip.items():
        assert not _differ(by_copy[prefix], files), prefix
        assert {"lib/libdatalib.so", "bin/datalib-info", "bin/datalib-version"} <= files.keys(), prefix
        assert f"include/site/python{python}/{built.variant.dist_name}/datalib.h" in files, prefix


def test_the_shared_install_copies_exactly_what_pip_installs(datalib: Built) -> None:
    """One pip run, copied into the other venvs of the smoke, against a pip run into each: identical trees, file
    for file (mode and bytes) — the package, the library pip put under the prefix's lib/, the header under
    include/, the scripts in bin/ naming their own venv's interpreter, and RECORD saying so."""
    built = datalib.record.built
    runtimes = {
        v: runtime_site(built.toolkit, nvidia_wheels(WheelMetadata.read(built.path), v)) for v in ("floors", "newest")
    }
    copied = SmokeContainer(
        built.image or "", WheelMetadata.read(built.path), runtimes, {"3.12": None}, built.path, Steps()
    )
    installed = SmokeContainer(
        built.image or "", WheelMetadata.read(built.path), runtimes, {"3.12": None}, built.path, Steps()
    )
    try:
        machine, by_pip_machine = copied.machine("3.12"), installed.machine("3.12")
        bare, layouts = machine.create_venvs()
        first, *others = [layout.python for layout in layouts if layout.name != "target"]
        checks = shared_install(machine, built, first, [bare, *others])
        assert all(c.ok for c in checks), checks
        by_pip_machine.create_venvs()
        for python in [first, bare, *others]:
            done = by_pip_machine.install(python, "--no-deps", by_pip_machine.wheel)
            assert done.returncode == 0, done.stderr
        prefixes = [python.removesuffix("/bin/python") for python in [first, bare, *others]]
        by_copy, by_pip = _tree(machine, prefixes), _tree(by_pip_machine, prefixes)
        # a module is one file linked into every venv; a script is each venv's own
        files = [f"{prefixes[0]}/lib/python3.12/site-packages/datalib/__init__.py", f"{prefixes[0]}/bin/datalib-info"]
        links = copied.exec("count the links", ["stat", "-c", "%h", *files])
    finally:
        copied.close()
        installed.close()
    assert links.stdout.split() == [str(len(prefixes)), "1"], links
    _alike(by_copy, by_pip, "3.12", datalib)
    for prefix, files in by_pip.items():
        for script in ("bin/datalib-info", "bin/datalib-version"):  # pip wrote each venv's own interpreter
            assert by_copy[prefix][script].startswith("0o100755"), (prefix, script)
        assert not [p for p in prefixes if p != prefix and by_copy[p]["bin/datalib-info"] == files["bin/datalib-info"]]


def test_one_pythons_install_serves_another_exactly_as_pip_installs_there(datalib: Built, tmp_path: Path) -> None:
    """What pip installed on CPython 3.10, copied into 3.13's venvs (sharing.py), against pip's own installs on 3.13:
    identical trees — the package, the library under the prefix's lib/, the header pip puts under
    include/site/python3.13/, the scripts naming their own venv's interpreter, and a requirement from PyPI with a
    console script of its own (wheel's). datalib's wheel is retagged py3-none for it (a wheel that serves both);
    the image's one pip runs on each. A --target folder, filled by pip on each Python, differs only in the
    console script, the header (under include/site/python3.X/ there too) and the RECORDs that list them:
    sharing.py shares one only where no wheel writes a script or a header."""
    built = datalib.record.built
    shutil.copy(built.path, tmp_path / built.path.name)
    retag = [sys.executable, "-m", "wheel", "tags", "--remove", "--python-tag", "py3", "--abi-tag", "none"]
    retagged = subprocess.run([*retag, tmp_path / built.path.name], capture_output=True, text=True, check=True)
    wheel = tmp_path / retagged.stdout.strip().splitlines()[-1]
    requirements = tmp_path / "requirements"
    download = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", requirements]
    subprocess.run([*download, "wheel==0.45.1"], check=True)
    assert differs_by_python(wheel) and differs_by_python(next(requirements.glob("wheel-*.whl")))
    runtimes = {
        v: runtime_site(built.toolkit, nvidia_wheels(WheelMetadata.read(built.path), v)) for v in ("floors", "newest")
    }
    found: dict[str, Path | None] = {"3.10": requirements, "3.13": requirements}
    copied = SmokeContainer(built.image or "", WheelMetadata.read(wheel), runtimes, found, wheel, Steps())
    installed = SmokeContainer(built.image or "", WheelMetadata.read(wheel), runtimes, found, wheel, Steps())

    def install(machine: ContainerMachine, python: str, *into: str) -> None:
        for args in (["--find-links", str(machine.requirements), "wheel"], ["--no-deps", machine.wheel]):
            done = machine.install(python, *into, *args)
            assert done.returncode == 0, done.stderr

    try:
        oldest, newest, by_pip_machine = copied.machine("3.10"), copied.machine("3.13"), installed.machine("3.13")
        where = copied.exec("the file system of /smoke", ["stat", "--file-system", "--format", "%T", "/smoke"])
        assert where.stdout.strip() == "tmpfs", where  # a small smoke's folders are in memory (smoke/scratch.py)
        oldest_bare, _ = oldest.create_venvs()
        bare, layouts = newest.create_venvs()
        by_pip_machine.create_venvs()
        assert oldest.pip == newest.pip and oldest.pip is not None  # the premise: one pip in the image
        source = next(layout.python for layout in oldest.layouts if layout.name == "venv")
        install(oldest, source)
        venvs = [bare, *(layout.python for layout in layouts if layout.name != "target")]
        copy = newest.copy_installed(source, venvs, oldest)
        assert copy.returncode == 0, copy.stderr
        for python in venvs:
            install(by_pip_machine, python)
        prefixes = [python.removesuffix("/bin/python") for python in venvs]
        by_copy, by_pip = _tree(newest, prefixes), _tree(by_pip_machine, prefixes)
        # --target folders filled by pip on each Python (not the layouts' own, which hold NVIDIA's mount).
        install(oldest, oldest_bare, "--target", "/tmp/target-3.10")
        install(newest, bare, "--target", "/tmp/target-3.13")
        folders = _tree(newest, ["/tmp/target-3.10", "/tmp/target-3.13"])
    finally:
        copied.close()
        installed.close()
    _alike(by_copy, by_pip, "3.13", datalib)
    for prefix, files in by_pip.items():  # and wheel's, from PyPI, with its console script
        assert {"bin/wheel", "lib/python3.13/site-packages/wheel/__init__.py"} <= files.keys(), prefix
    differ = _differ(folders["/tmp/target-3.10"], folders["/tmp/target-3.13"])
    header = f"{datalib.variant.dist_name}/datalib.h"
    assert {"bin/wheel", f"include/site/python3.10/{header}", f"include/site/python3.13/{header}"} <= set(differ)
    assert all(path.startswith(("bin/", "include/site/")) or path.endswith("/RECORD") for path in differ), differ


def test_the_two_variants_folder_seeded_from_the_target_folder_is_what_pip_writes_there(
    datalib: Built, tmp_path: Path
) -> None:
    """The requirements pip put in the --target folder (beside the layout's NVIDIA mount and the metadata linked
    beside it), hard-linked into the two-variants folder, then the wheel and a stand-in of another variant by pip:
    the same tree, file for file, as pip's own two runs into that folder — a requirement from PyPI with a console
    script (wheel's), datalib's module and header (its scripts not: pip's second run into a folder whose bin/ the
    first made leaves them out, either way) — and nothing of NVIDIA's."""
    built = datalib.record.built
    requirements = tmp_path / "requirements"
    download = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", requirements]
    subprocess.run([*download, "wheel==0.45.1"], check=True)
    (tmp_path / "standin").mkdir()
    standin = renamed(built.path, neighbour_name(built.variant), tmp_path / "standin")
    runtimes = {
        v: runtime_site(built.toolkit, nvidia_wheels(WheelMetadata.read(built.path), v)) for v in ("floors", "newest")
    }
    found: dict[str, Path | None] = {"3.12": requirements}
    seeded = SmokeContainer(built.image or "", WheelMetadata.read(built.path), runtimes, found, standin, Steps())
    by_pip = SmokeContainer(built.image or "", WheelMetadata.read(built.path), runtimes, found, standin, Steps())

    def install(machine: ContainerMachine, *args: str) -> None:
        target = next(layout for layout in machine.layouts if layout.name == "target")
        done = machine.install(target.python, *args)
        assert done.returncode == 0, done.stderr

    try:
        machine, pip_machine = seeded.machine("3.12"), by_pip.machine("3.12")
        machine.create_venvs()
        pip_machine.create_venvs()
        folder, both = machine.side_by_side, ["--no-deps", machine.wheel, machine.neighbour]
        (target,) = [layout.pythonpath for layout in machine.layouts if layout.name == "target"]
        assert target is not None
        install(machine, "--target", target, "--find-links", str(machine.requirements), "wheel")
        linked = machine.link_folder(target, folder)
        assert linked.returncode == 0, linked.stderr
        install(machine, "--target", folder, *both)
        install(pip_machine, "--target", folder, "--find-links", str(machine.requirements), "wheel")
        install(pip_machine, "--target", folder, *both)
        by_link, by_pip_tree = _tree(machine, [folder])[folder], _tree(pip_machine, [folder])[folder]
        counted = seeded.exec("count the links", ["stat", "-c", "%h", f"{folder}/wheel/__init__.py"])
    finally:
        seeded.close()
        by_pip.close()
    assert not _differ(by_link, by_pip_tree)
    header = f"include/site/python3.12/{built.variant.dist_name}/datalib.h"
    assert {"bin/wheel", "wheel/__init__.py", "datalib/__init__.py", header} <= by_link.keys()
    assert not [path for path in by_link if path.startswith("nvidia")]
    assert counted.stdout.split() == ["2"]  # the --target folder's file, not a copy


def test_two_real_variants_in_one_venv_are_named_and_either_alone_is_silent(
    built12: Built, built13: Built, tmp_path: Path
) -> None:
    """cuprobe-cuda12x and cuprobe-cuda13x installed by pip into one venv of this host, as a user may: the import
    warns once naming both, the diagnostic fails saying so; each alone in a venv of its own says nothing."""
    (python,) = [p for p in host_pythons() if p.version == "3.12"]

    def venv(name: str, *wheels: Path) -> Path:
        subprocess.run([python.prefix / "bin" / "python3", "-m", "venv", tmp_path / name], check=True)
        pip = [tmp_path / name / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", *wheels]
        subprocess.run(pip, check=True)
        return tmp_path / name / "bin" / "python"

    def run(interpreter: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([interpreter, *args], capture_output=True, text=True, check=False, cwd=tmp_path)

    both = venv("both", built12.wheel, built13.wheel)
    imported = run(both, "-c", "import cuprobe")
    assert imported.returncode == 0 and imported.stderr.count("UserWarning") == 1, imported.stderr
    for name in ("cuprobe-cuda12x", "cuprobe-cuda13x"):
        assert name in imported.stderr
    diagnostic = run(both, "-m", "cuprobe._cuda_variant")
    assert diagnostic.returncode == 1 and "installed together: " in diagnostic.stdout, diagnostic.stdout
    for built in (built12, built13):
        alone = venv(f"alone{built.variant.major}", built.wheel)
        assert not run(alone, "-W", "error", "-c", "import cuprobe").stderr
        assert "installed together" not in run(alone, "-m", "cuprobe._cuda_variant").stdout
