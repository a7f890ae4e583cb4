"""Wheels written byte by byte in a test: a sound one (WHEEL, METADATA and RECORD as pip writes them), and the
same with one thing broken, for the gates and readers to refuse."""

from __future__ import annotations

import base64
import functools
import hashlib
import subprocess
import tempfile
import warnings
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from wheelfactory.sbom.document import SBOM_NAME, SBOMS_DIR, Required, RunsOn, SbomFacts, to_json
from wheelfactory.sources import SourceIdentity

# The source a hand-made wheel's SBOM names, and the plan jobs of the tests that give one.
SOURCE = SourceIdentity("path", "source", "5" * 64)
# The plan's job of a cp312 cuprobe wheel from SOURCE.
JOB = {
    "id": "cuprobe-cuda12x-cp312-manylinux_x86_64",
    "dist_name": "cuprobe-cuda12x",
    "version": "0.1.0",
    "python": "3.12",
    "platform": "linux-x86_64",
    "size_limit_mb": 100,
    "cuda": 12,
    "source": SOURCE.as_json(),
}


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def sbom(name: str, version: str, members: dict[str, bytes], source: SourceIdentity) -> bytes:
    """The SBOM the factory would write of a wheel holding `members` (METADATA among them) from `source`: its
    files, the NVIDIA wheels and torch its METADATA requires, no device code, nothing that built it."""
    metadata = next(data for member, data in members.items() if member.endswith(".dist-info/METADATA")).decode()
    lines = [line.removeprefix("Requires-Dist: ") for line in metadata.splitlines() if line.startswith("Requires-")]
    required = [
        Required(str(canonicalize_name(r.name)), str(r), "", ())
        for r in map(Requirement, lines)
        if (r.name.startswith("nvidia-") or r.name == "torch") and r.marker is None
    ]
    files = tuple(sorted((member, hashlib.sha256(data).hexdigest()) for member, data in members.items()))
    no_code = RunsOn("", "carries no device code", (), (), "")
    return to_json(SbomFacts(name, version, 0, source, files, (), tuple(required), no_code))


def wheel_files(
    file_name: str,
    files: dict[str, bytes] | None = None,
    *,
    metadata: str = "",
    wheel: str = "",
    source: SourceIdentity | None = None,
) -> dict[str, bytes]:
    """The members of a sound wheel called `file_name` holding `files`: its .dist-info with METADATA (the name's
    Name and Version, plus `metadata` lines), WHEEL (the name's tags, or `wheel` as given), with `source` the SBOM
    the factory writes, and a true RECORD."""
    name, version, _, tags = parse_wheel_filename(file_name)
    info = f"{file_name.split('-')[0]}-{version}.dist-info"
    members = dict(files or {})
    members[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{metadata}".encode()
    tag_lines = "".join(f"Tag: {tag}\n" for tag in sorted(str(t) for t in tags))
    members[f"{info}/WHEEL"] = (
        wheel or f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n{tag_lines}"
    ).encode()
    if source is not None:
        members[f"{info}/{SBOMS_DIR}/{SBOM_NAME}"] = sbom(name, str(version), members, source)
    record = [record_line(member, data) for member, data in members.items()] + [f"{info}/RECORD,,"]
    members[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    return members


def write_zip(path: Path, members: dict[str, bytes] | list[tuple[str, bytes]]) -> Path:
    """A zip of exactly these members, in this order (a list may name one twice)."""
    items = members.items() if isinstance(members, dict) else members
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Duplicate name": what some cases are for
        for member, data in items:
            archive.writestr(member, data)
    return path


def make_wheel(
    directory: Path, file_name: str, files: dict[str, bytes] | None = None, **options: str | SourceIdentity
) -> Path:
    return write_zip(directory / file_name, wheel_files(file_name, files, **options))


@functools.cache
def host_library(needed: str | None = None) -> bytes:
    """A shared library the host's gcc builds (x86-64 ELF): linking `needed`, a stand-in built beside it under that
    soname (libcudart.so.12: what a CUDA wheel's library links), or nothing but libc (a CPU build)."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / "stub.c").write_text("int stand_in(void) { return 1; }\n")
        (folder / "lib.c").write_text(
            f"int stand_in(void); int touch(void) {{ return {'stand_in()' if needed else '0'}; }}\n"
        )
        link: list[str] = []
        if needed:
            stub = [
                "gcc",
                "-shared",
                "-fPIC",
                f"-Wl,-soname,{needed}",
                "-o",
                str(folder / needed),
                str(folder / "stub.c"),
            ]
            subprocess.run(stub, check=True)
            link = ["-Wl,--no-as-needed", f"-L{folder}", f"-l:{needed}"]
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-o", str(folder / "lib.so"), str(folder / "lib.c"), *link], check=True
        )
        return (folder / "lib.so").read_bytes()
