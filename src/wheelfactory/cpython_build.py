"""CPython built from Debian's source inside the offline image's own root file system, for the releases this host
has no self-contained copy of (a CPython newer than pyenv's, on any fresh machine).

Debian's binary packages of a new CPython come only in sid, built against sid's glibc, which bookworm's root cannot
run; its source can be built anywhere. The build runs chrooted in the debootstrapped root, so the interpreter links
the root's own glibc 2.36 and libraries (libssl3, libffi8, …) whatever the host is (a host's newer glibc would
leave symbols bookworm lacks). It is built the way manylinux builds its interpreters: static libpython, no
ensurepip wheels of its own (the image script installs one pinned pip into every interpreter), at
/opt/_internal/cpython-X.Y.Z, linked from /opt/python/cpXY-cpXY.

The tarball is checked against the sha256 pinned in data/cpython_sources.yaml (read down Debian's signed chain),
and the installed prefix is kept in the factory cache, sealed, under a key of the tarball's hash, the configure
line, the Debian suite and the machine: the next image build copies it in within seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path

import yaml

from . import host
from .errors import ToolFailure
from .progress import console, step
from .untrusted import archives
from .untrusted.cache import SEAL, reusable, seal
from .untrusted.shown import shown

# Without optimizations (PGO would run the test suite: three times as long); ensurepip is left out because the
# image installs one pip into every interpreter.
CONFIGURE = ["--with-ensurepip=no", "--enable-ipv6", "--with-system-expat"]
# The -dev packages the root needs to build the standard library's extension modules against its own libraries.
BUILD_PACKAGES = [
    "pkg-config",
    "libssl-dev",
    "zlib1g-dev",
    "libffi-dev",
    "libbz2-dev",
    "liblzma-dev",
    "libzstd-dev",
    "libsqlite3-dev",
    "libreadline-dev",
    "libncurses-dev",
    "libgdbm-dev",
    "uuid-dev",
    "libexpat1-dev",
]
# A build takes minutes on 2 shared cores (docs/linux.md has the figures); one past this is taken for stuck.
BUILD_TIMEOUT_S = 45 * 60


@dataclass(frozen=True)
class CPythonSource:
    """One pinned source release: `series` "3.15", `version` "3.15.2", where Debian's mirror has it."""

    series: str
    version: str
    url: str
    sha256: str
    size: int

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]

    @property
    def prefix(self) -> Path:
        """Where the interpreter lives inside the image."""
        return Path("/opt/_internal") / f"cpython-{self.version}"


@cache
def cpython_sources() -> dict[str, CPythonSource]:
    data = yaml.safe_load(files("wheelfactory.data").joinpath("cpython_sources.yaml").read_text(encoding="utf-8"))
    return {
        series: CPythonSource(series, pin["version"], f"{data['mirror']}/{pin['path']}", pin["sha256"], pin["size"])
        for series, pin in data["sources"].items()
    }


def source_tarball(source: CPythonSource) -> Path:
    """The pinned tarball, from the cache or Debian's mirror, its sha256 checked either way. Where the mirror does
    not serve it, a copy placed in the cache by hand (with the same sha256) serves as well."""
    target = host.cache_dir() / "cpython-sources" / source.filename
    with host.cache_lock(f"cpython-source-{source.version}"):
        if target.is_file() and archives.sha256(target) != source.sha256:
            console.print(f"cache: {shown(str(target))}: not the pinned bytes — dropped, to be downloaded again")
            target.unlink()
        if not target.is_file():
            try:
                with step(f"download CPython {source.version}'s source from Debian ({source.size >> 20} MiB)"):
                    # Checked as it arrives: bytes of another sha256 never reach `target`.
                    archives.download(source.url, target, sha256=source.sha256)
            except ToolFailure as exc:
                raise ToolFailure(
                    f"{exc} — place {source.filename} (sha256 {source.sha256}) at {target} to build CPython "
                    f"{source.series} without the mirror"
                ) from None
    return target


def build_key(source: CPythonSource, suite: str, debian_arch: str) -> str:
    """What the built prefix depends on: the source's bytes, how it is configured, the root it links against."""
    recipe = json.dumps([source.sha256, str(source.prefix), CONFIGURE, BUILD_PACKAGES, suite, debian_arch])
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


def cached_build(source: CPythonSource, suite: str, debian_arch: str) -> Path:
    """Where the cache keeps the installed prefix of `source` built in `suite`'s root for `debian_arch`."""
    key = build_key(source, suite, debian_arch)
    return host.cache_dir() / "cpython-builds" / f"{source.version}-{debian_arch}-{key}"


def install_cpython(source: CPythonSource, rootfs: Path, suite: str, debian_arch: str) -> None:
    """CPython `source` installed at its prefix in `rootfs`: copied from the cache, else built there (chrooted)
    and kept in the cache."""
    entry = cached_build(source, suite, debian_arch)
    in_root = rootfs / source.prefix.relative_to("/")
    with host.cache_lock(f"cpython-build-{entry.name}"):
        if reusable(entry):
            with step(f"copy CPython {source.version} built before from the cache"):
                shutil.copytree(entry, in_root, symlinks=True, ignore=shutil.ignore_patterns(SEAL))
            return
        _build_in_root(source, source_tarball(source), rootfs)
        with step(f"keep CPython {source.version}'s build in the cache"), host.built_aside(entry) as scratch:
            shutil.copytree(in_root, scratch, symlinks=True, dirs_exist_ok=True)
        seal(entry)


def _build_in_root(source: CPythonSource, tarball: Path, rootfs: Path) -> None:
    work = rootfs / "tmp" / f"cpython-{source.version}"
    shutil.rmtree(work, ignore_errors=True)
    top = archives.unpack(tarball, work)
    jobs = len(os.sched_getaffinity(0))
    script = " && ".join(
        [
            f"cd /{top.relative_to(rootfs)}",
            f"./configure --prefix={source.prefix} {' '.join(CONFIGURE)}",
            f"make -j{jobs}",
            "make install",
        ]
    )
    try:
        with step(f"build CPython {source.version} from Debian's source in the image's root (minutes: cached after)"):
            host.run(
                ["nice", "-n", "10", "chroot", rootfs, "/bin/bash", "-c", script],
                f"building CPython {source.version}",
                timeout=BUILD_TIMEOUT_S,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
