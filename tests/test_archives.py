"""Hostile and broken archives: refused whole, one line naming the archive and the member, nothing written outside
the unpack folder, and — fetched as a recipe's sdist through the command line — exit 3 with nothing completed in
the cache. These hold on any Python: the checks are the factory's, not tarfile's data filter (CVE-2025-4517)."""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelfactory.cli import main
from wheelfactory.errors import BadBytes
from wheelfactory.untrusted import archives

from .conftest import served

Build = Callable[[tarfile.TarFile], None]


def _add(tar: tarfile.TarFile, name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", link: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, len(data)
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def _path_max_chain(tar: tarfile.TarFile) -> None:
    """The shape of CVE-2025-4517's proof of concept: a chain of links whose resolved path passes PATH_MAX, so
    that a non-strict realpath stops checking, then a link through it and a file written through that link."""
    component = "d" * 247
    steps = "abcdefghijklmnop"
    path = "pkg-1.0"
    _add(tar, path, tarfile.DIRTYPE)
    for step in steps:
        _add(tar, f"{path}/{component}", tarfile.DIRTYPE)
        _add(tar, f"{path}/{step}", tarfile.SYMTYPE, link=component)
        path = f"{path}/{component}"
    long_link = "pkg-1.0/" + "/".join(steps) + "/" + "l" * 254
    _add(tar, long_link, tarfile.SYMTYPE, link="../" * len(steps))
    _add(tar, "pkg-1.0/escape", tarfile.SYMTYPE, link=long_link.removeprefix("pkg-1.0/") + "/../" * 3 + "outside")
    _add(tar, "pkg-1.0/escape", data=b"written outside\n")


def _relative_escape(tar: tarfile.TarFile) -> None:
    _add(tar, "pkg-1.0/setup.py", data=b"")
    _add(tar, "pkg-1.0/here", tarfile.SYMTYPE, link=".")
    _add(tar, "pkg-1.0/up", tarfile.SYMTYPE, link="here/../../../outside")


def _hard_link(tar: tarfile.TarFile) -> None:
    _add(tar, "pkg-1.0/setup.py", data=b"")
    _add(tar, "pkg-1.0/copy.py", tarfile.LNKTYPE, link="pkg-1.0/missing.py")


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def _bomb(tar: tarfile.TarFile) -> None:
    info = tarfile.TarInfo("pkg-1.0/zeros.bin")
    info.size = 256 << 20  # 256 MiB of zeros: about 250 KiB gzipped
    tar.addfile(info, io.BufferedReader(_Zeros(info.size)))


HOSTILE: dict[str, tuple[Build, str]] = {
    # The file is written through a link of the same name: refused as a member given twice before any link is made.
    "path-max-chain": (_path_max_chain, r"member 'pkg-1\.0/escape' is in the archive twice"),
    "link-chain-escape": (_relative_escape, r"member 'pkg-1\.0/up' links to 'here/\.\./\.\./\.\./outside', outside"),
    "hard-link": (_hard_link, r"member 'pkg-1\.0/copy\.py' is a hard link"),
    "bomb": (_bomb, r"unpacks to 256 MiB from 0\.2 MiB, over the 4 GiB or 100:1"),
}


def _archive(path: Path, build: Build) -> Path:
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        build(tar)
    return path


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_archive_is_refused_whole_and_writes_nothing_outside(case: str, tmp_path: Path) -> None:
    build, message = HOSTILE[case]
    archive = _archive(tmp_path / "pkg-1.0.tar.gz", build)
    into = tmp_path / "deep" / "er" / "unpacked"
    with pytest.raises(BadBytes, match=message) as refused:
        archives.unpack(archive, into)
    assert str(refused.value).startswith("pkg-1.0.tar.gz: ") and "\n" not in str(refused.value)
    outside = [p for p in tmp_path.rglob("*") if not p.is_relative_to(into) and p != archive]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in outside) == ["deep", "deep/er"]


def test_a_truncated_archive_is_refused(tmp_path: Path) -> None:
    whole = _archive(tmp_path / "whole.tar.gz", lambda tar: _add(tar, "pkg-1.0/a.txt", data=bytes(range(256)) * 4096))
    truncated = tmp_path / "pkg-1.0.tar.gz"
    truncated.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(BadBytes, match=r"^pkg-1\.0\.tar\.gz: cannot be read whole .* corrupt or truncated$"):
        archives.unpack(truncated, tmp_path / "unpacked")


def test_an_ordinary_archive_keeps_its_links_and_modes(tmp_path: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo("pkg-1.0/bin/tool")
        info.size, info.mode = 3, 0o755
        tar.addfile(info, io.BytesIO(b"#!\n"))
        _add(tar, "pkg-1.0/lib/libx.so.1", data=b"elf")
        _add(tar, "pkg-1.0/lib/libx.so", tarfile.SYMTYPE, link="libx.so.1")

    top = archives.unpack(_archive(tmp_path / "pkg-1.0.tar.gz", build), tmp_path / "unpacked")
    assert top.name == "pkg-1.0"
    assert (top / "bin/tool").stat().st_mode & 0o777 == 0o755
    assert (top / "lib/libx.so").is_symlink() and (top / "lib/libx.so").read_bytes() == b"elf"


def test_a_zip_that_escapes_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "pkg-1.0.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("pkg-1.0/../../outside.txt", "x")
    with pytest.raises(BadBytes, match=r"member 'pkg-1\.0/\.\./\.\./outside\.txt' would land outside"):
        archives.unpack(archive, tmp_path / "unpacked")
    assert not (tmp_path.parent / "outside.txt").exists()


@pytest.mark.parametrize("case", ["path-max-chain", "hard-link", "truncated"])
def test_a_hostile_sdist_stops_render_with_exit_3_and_completes_nothing(
    case: str, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("WHEELFACTORY_CACHE", str(cache))
    index = tmp_path / "index"
    (index / "simple" / "pkg").mkdir(parents=True)
    archive = index / "simple" / "pkg" / "pkg-1.0.tar.gz"
    if case == "truncated":
        whole = _archive(tmp_path / "whole.tar.gz", lambda tar: _add(tar, "pkg-1.0/a", data=bytes(range(256)) * 4096))
        archive.write_bytes(whole.read_bytes()[:-2000])
    else:
        _archive(archive, HOSTILE[case][0])
    (index / "simple" / "pkg" / "index.html").write_text('<a href="pkg-1.0.tar.gz">pkg-1.0.tar.gz</a>\n')
    sha256 = hashlib.sha256(archive.read_bytes()).hexdigest()
    shutil.rmtree(project / "recipes")  # this recipe alone: the others' sdists are not on this index
    recipe = project / "recipes" / "pkg" / "recipe.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text(
        f'name: pkg\nversion: "1.0"\nimport: pkg\nsource: {{sdist: "pkg==1.0", sha256: "{sha256}"}}\n'
        "components: [cudart]\nmodules:\n  pkg._x: [cudart]\n"
    )
    with served(index) as url:
        monkeypatch.setenv("PIP_INDEX_URL", url + "simple/")
        capsys.readouterr()
        status = main(["--root", str(project), "render", "--check"])
    lines = capsys.readouterr().err.splitlines()
    assert status == 3
    errors = [line for line in lines if not line.startswith("✗ download")]  # the step's progress line
    assert len(errors) == 1 and errors[0].startswith("error: pkg-1.0.tar.gz: "), lines
    assert not list(cache.rglob(".complete"))
    assert not list(tmp_path.rglob("outside"))


def test_a_download_of_another_sha256_than_the_index_names_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    served_dir = tmp_path / "index"
    served_dir.mkdir()
    (served_dir / "pkg-1.0-py3-none-any.whl").write_bytes(b"the bytes the index did not hash")
    target = tmp_path / "cache" / "pkg-1.0-py3-none-any.whl"
    with served(served_dir) as url:
        with pytest.raises(BadBytes, match="not the 0000"):
            archives.download(url + "pkg-1.0-py3-none-any.whl", target, sha256="0" * 64)
        assert not any((tmp_path / "cache").iterdir())
        digest = hashlib.sha256(b"the bytes the index did not hash").hexdigest()
        assert archives.download(url + "pkg-1.0-py3-none-any.whl", target, sha256=digest.upper()) == target


def test_a_refused_zip_among_those_unpacked_together_takes_back_everything(tmp_path: Path) -> None:
    good = tmp_path / "good-1.0-py3-none-any.whl"
    with zipfile.ZipFile(good, "w") as z:
        for n in range(20):
            z.writestr(f"good/file{n}.txt", b"x" * 1000 * n)
    bad = tmp_path / "bad-1.0-py3-none-any.whl"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("bad/ok.txt", b"fine")
        z.writestr("../outside.txt", b"escapes")
    into = tmp_path / "site"
    with pytest.raises(BadBytes, match=r"outside\.txt"):
        archives.unpack_together([good, bad], into)
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and p.parent != tmp_path]
    # A member whose bytes break only as they inflate (its CRC) is refused after the others began to land.
    corrupt = tmp_path / "corrupt-1.0-py3-none-any.whl"
    with zipfile.ZipFile(corrupt, "w", zipfile.ZIP_STORED) as z:
        z.writestr("corrupt/data.bin", b"A" * 4096)
    data = bytearray(corrupt.read_bytes())
    data[data.index(b"A" * 64) + 100] = ord("B")
    corrupt.write_bytes(bytes(data))
    with pytest.raises(BadBytes, match=r"corrupt-1\.0"):
        archives.unpack_together([good, corrupt], into)
    assert not [p for p in into.rglob("*") if p.is_file()]


def test_zips_unpacked_together_end_as_unpacked_one_after_another_where_they_share_a_path(tmp_path: Path) -> None:
    first, second = tmp_path / "a-1.0-py3-none-any.whl", tmp_path / "b-1.0-py3-none-any.whl"
    with zipfile.ZipFile(first, "w") as z:
        z.writestr("shared/__init__.py", b"first")
        z.writestr(zipfile.ZipInfo("shared/tool"), b"#!/bin/sh\n")
        z.getinfo("shared/tool").external_attr = 0o755 << 16
        z.writestr("a/only.txt", b"a")
    with zipfile.ZipFile(second, "w") as z:
        z.writestr("shared/__init__.py", b"second")
        z.writestr("shared/", b"")
    archives.unpack_together([first, second], tmp_path / "together")
    for wheel in (first, second):
        archives.unpack(wheel, tmp_path / "one-after-another")
    for name in ("shared/__init__.py", "shared/tool", "a/only.txt"):
        together, one = tmp_path / "together" / name, tmp_path / "one-after-another" / name
        assert (together.read_bytes(), together.stat().st_mode) == (one.read_bytes(), one.stat().st_mode)
    assert (tmp_path / "together" / "shared" / "__init__.py").read_bytes() == b"second"
