"""The CUDA wheels wherever pip put them: cuprobe's runtime module loads NVIDIA's libraries from a plain venv,
from the base under a --system-site-packages venv and from a `pip install --target` folder on PYTHONPATH — for
CUDA 11, 12 and 13 — in a smoke container that also holds a system CUDA, which must serve nothing and must not
hide a broken wheel."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from wheelfactory.binaries.wheelfile import pack, unpack
from wheelfactory.image import host_pythons
from wheelfactory.pipeline import existing
from wheelfactory.smoke import (
    DECOY_CUDA,
    NVRTC_COMPILE,
    HostMachine,
    TierResult,
    register_decoys,
    smoke,
    tier1,
    tier2,
)
from wheelfactory.toolkit.provision import nvidia_wheels, provision, runtime_site

from .conftest import Built

pytestmark = [pytest.mark.slow, pytest.mark.docker]
DECOY_IMAGE = "wheelfactory-test-system-cuda:latest"
SYSTEM_CUDA = "/usr/local/cuda/lib64"
CUDART = {11: "libcudart.so.11.0", 12: "libcudart.so.12", 13: "libcudart.so.13"}
NVRTC = {11: "libnvrtc.so.11.2", 12: "libnvrtc.so.12", 13: "libnvrtc.so.13"}
# Where each layout's nvidia/ is, as /proc/self/maps names it (the base interpreter may sit behind a link).
SITES = {
    ("venv", "floors"): "/smoke/cuda/lib/python3.12/site-packages/nvidia/",
    ("system-site-packages", "floors"): "/lib/python3.12/site-packages/nvidia/",
    ("target", "floors"): "/smoke/target/nvidia/",
    ("venv", "newest"): "/smoke/newest/lib/python3.12/site-packages/nvidia/",
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
    subprocess.run(["docker", "build", "--quiet", "-t", DECOY_IMAGE, str(context)], check=True, capture_output=True)
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
        assert name == ("venv", "floors") or not [lib for lib in runtime.libraries if "/smoke/cuda/" in lib]
        assert not [lib for lib in runtime.libraries if lib.startswith(SYSTEM_CUDA)]
        # NVRTC compiled a kernel while a decoy copy of its builtins was registered with ldconfig: the builtins
        # it opened by name are this layout's, as every other CUDA library mapped.
        compiled = next(c for c in tier.checks if c.name.startswith("NVRTC compiles a kernel to CUBIN"))
        builtins = [lib for lib in compiled.libraries if "libnvrtc-builtins" in lib]
        assert compiled.ok and builtins and all(SITES[name] in lib for lib in builtins), (name, compiled)
    # The diagnostic says where each library comes from and why.
    target = next(c for c in layouts["target", "floors"].checks if c.name == "python -m cuprobe._cuda_variant")
    assert (
        "/smoke/target/nvidia/" in target.detail
        and "on sys.path, where the extensions' RPATH does not reach" in target.detail
    )
    venv = next(c for c in layouts["venv", "floors"].checks if c.name == "python -m cuprobe._cuda_variant")
    assert "beside the package, where the extensions' RPATH reaches it" in venv.detail
    assert "Warning" not in target.detail + venv.detail  # runpy's, for a module the package imported first


def test_without_the_variant_module_nvrtc_opens_the_decoys_builtins(built13: Built, build_image: str) -> None:
    """Why the variant module loads NVRTC's builtins itself: CUDA 13's libnvrtc.so.13 has no RUNPATH and opens
    them by name, so loaded by full path from NVIDIA's wheel — but not through the package — it maps a system
    copy registered with ldconfig (the smoke's decoy)."""
    built = existing(built13.wheel, built13.variant, build_image)
    site = runtime_site(built.toolkit, nvidia_wheels(built.path, "floors"))
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


def test_the_windows_smoke_machine_lays_out_real_installs(
    built12: Built, build_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # HostMachine is what a Windows runner smokes with: real venvs, and NVIDIA's wheels installed by pip into one
    # and with --target into a folder on PYTHONPATH. No Windows host exists here; its code is the same on Linux
    # but for the venv's Scripts\python.exe and the py launcher, so it runs here on this host's CPython 3.12 with
    # the Linux wheel (this host's own CUDA is 13: nothing of CUDA 12 is on its loader path).
    (python,) = [p for p in host_pythons() if p.version == "3.12"]
    monkeypatch.setenv("PATH", f"{python.prefix / 'bin'}{os.pathsep}{os.environ['PATH']}")  # as setup-python does
    built = existing(built12.wheel, built12.variant, build_image)
    nvidia = {versions: nvidia_wheels(built.path, versions) for versions in ("floors", "newest")}
    machine = HostMachine(built.path, nvidia, "3.12", None)
    try:
        bare, layouts = machine.create_venvs()
        tiers = [tier1(machine, bare, built), *(tier2(machine, layout, built) for layout in layouts)]
    finally:
        machine.close()
    assert all(t.passed for t in tiers), [(t.label, c.name, c.detail) for t in tiers for c in t.checks if not c.ok]
    assert [(t.layout, t.versions) for t in tiers] == [
        (None, None),
        ("venv", "floors"),
        ("target", "floors"),
        ("venv", "newest"),
    ]
    for tier, layout in zip(tiers[1:], layouts, strict=True):
        runtime = next(c for c in tier.checks if c.name.startswith("import cuprobe._runtime"))
        assert CUDART[12] in [Path(lib).name for lib in runtime.libraries]
        assert all(lib.startswith(str(Path(layout.site).resolve())) for lib in runtime.libraries), runtime.libraries
    assert not machine.scratch.exists()  # closed: nothing of the venvs is left on the runner
