"""Debian non-free's CUDA packages, for hosts that reach Debian's mirror but not NVIDIA's.

Debian repackages NVIDIA's own binaries (nvidia-cuda-toolkit: nvcc and its tools; nvidia-cuda-dev: the static
runtime and the driver stub). They are downloaded with apt from a private package list — the system's apt
sources and state are never touched — checked by apt against Debian's signed index, and unpacked with
dpkg-deb: only the files the placements select, never installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from .. import host
from ..components import DebianRelease, Placement, toolkit_table
from ..errors import ToolFailure, fetched
from ..untrusted import archives
from ..untrusted.cache import reusable, seal
from ..untrusted.shown import shown


class Unavailable(Exception):
    """This host cannot use Debian's packages (no apt, no keyring, no mirror): the caller may try another source."""


def _apt_options(root: Path, arch: str) -> list[str]:
    options = {
        "Dir::Etc::sourcelist": root / "sources.list",
        "Dir::Etc::sourceparts": "-",
        "Dir::State::Lists": root / "lists",
        "Dir::State::status": root / "status",
        "Dir::Cache": root / "cache",
        "APT::Architecture": arch,
        "APT::Architectures": arch,
        "Debug::NoLocking": "1",
    }
    if os.geteuid() == 0:  # as root, apt would hand the download to the _apt user, who cannot write here
        options["APT::Sandbox::User"] = "root"
    return [arg for key, value in options.items() for arg in ("-o", f"{key}={value}")]


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    done = host.run(cmd, cmd[0], check=False, cwd=cwd)
    if done.returncode != 0:
        raise Unavailable(
            f"`{cmd[0]} … {cmd[-1]}` failed (exit {done.returncode}):\n{host.tail(done.stdout + done.stderr, 8)}"
        )
    return done.stdout


def download(release: DebianRelease, machine: str, cache: Path) -> dict[str, Path]:
    """The release's packages as .deb files in the cache (package -> file), each at the pinned upstream version."""
    settings = toolkit_table().debian
    missing = [tool for tool in ("apt-get", "apt-cache", "dpkg-deb") if shutil.which(tool) is None]
    if missing:
        raise Unavailable(f"{', '.join(missing)} not found: this is not a Debian or Ubuntu host")
    if not Path(settings.keyring).is_file():
        raise Unavailable(
            f"Debian's archive keyring {settings.keyring} is missing — apt-get install debian-archive-keyring"
        )
    arch = settings.arch.get(machine)
    if arch is None:
        raise Unavailable(f"Debian builds no CUDA packages for {machine}")
    root = cache / "debian" / f"{release.suite}-{arch}"
    debs = root / "debs"
    wanted = {
        package: sorted(debs.glob(f"{package}_{prefix}*_{arch}.deb")) for package, prefix in release.packages.items()
    }
    if all(wanted.values()) and all(reusable(files[-1]) for files in wanted.values()):
        return {package: files[-1] for package, files in wanted.items()}
    for directory in (root / "lists" / "partial", root / "cache" / "archives" / "partial", debs):
        directory.mkdir(parents=True, exist_ok=True)
    (root / "status").touch()
    (root / "sources.list").write_text(
        f"deb [arch={arch} signed-by={settings.keyring}] {settings.mirror} {release.suite} main contrib non-free\n"
    )
    options = _apt_options(root, arch)
    _run(["apt-get", "-q", *options, "update"])
    found = {}
    for package, prefix in release.packages.items():
        listed = _run(["apt-cache", *options, "show", "--no-all-versions", package])
        version = next(
            (line.split(":", 1)[1].strip() for line in listed.splitlines() if line.startswith("Version:")), ""
        )
        if not version.startswith(prefix):
            raise ToolFailure(
                f"Debian {release.suite} offers {package} {version or '(none)'}, not the {prefix}* that this toolkit "
                "release needs — update data/toolkits.yaml if the new package is the same CUDA release"
            )
        _run(["apt-get", "-q", *options, "download", f"{package}={version}"], cwd=debs)
        found[package] = next(iter(sorted(debs.glob(f"{package}_*_{arch}.deb"))))
        seal(found[package])  # apt checked it against Debian's signed index; later runs check it against this
    return found


def extract(deb: Path, placements: tuple[Placement, ...], machine: str, overlay: Path) -> list[str]:
    """Copy the package's files that the placements select into the overlay; returns what was placed."""
    multiarch = toolkit_table().debian.multiarch[machine]
    placed = []
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE) as tar_stream:
        assert tar_stream.stdout is not None
        stream = archives.capped_tar_stream(tar_stream.stdout, deb)
        with fetched(), tarfile.open(fileobj=stream, mode="r|") as archive:
            for member in archive:
                placement = next((p for p in placements if p.selects(member.name, multiarch=multiarch)), None)
                if placement is None or not member.isfile():
                    continue
                why = archives.member_problem(member.name.removeprefix("./"))
                if why:
                    raise ToolFailure(f"{deb.name}: member {shown(member.name)} {why} — the package is refused")
                source = archive.extractfile(member)
                assert source is not None
                target = overlay / placement.to / Path(member.name).name
                target.parent.mkdir(parents=True, exist_ok=True)
                with target.open("wb") as out:
                    shutil.copyfileobj(source, out)
                target.chmod(member.mode & 0o755 | 0o644)
                placed.append(f"{placement.to}/{target.name}")
    if tar_stream.returncode != 0:
        raise ToolFailure(f"dpkg-deb could not read {deb} (exit {tar_stream.returncode}) — delete it and run again")
    return placed
