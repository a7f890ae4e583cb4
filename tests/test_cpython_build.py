"""CPython from Debian's source for the offline image: the tarball is taken only with its pinned sha256, from the
mirror or placed by hand in the cache, and a build is keyed by what it depends on. The build itself runs in
`nox -s image` (minutes per release: docs/linux.md has the figures), not here."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path, PurePosixPath

import pytest
import yaml

from wheelfactory.cpython_build import CPythonSource, build_key, cpython_sources, source_tarball
from wheelfactory.errors import BadBytes, ToolFailure
from wheelfactory.image import WANTED_PYTHONS, ImagePython, _link_python, _native_interpreters

ROOT = Path(__file__).resolve().parents[1]
CONTENT = b"not really a CPython tarball, but bytes with a known hash"


def _source(url: str, content: bytes = CONTENT) -> CPythonSource:
    return CPythonSource("3.99", "3.99.1", url, hashlib.sha256(content).hexdigest(), len(content))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WHEELFACTORY_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_pinned_tarball_is_downloaded_and_checked(tmp_path: Path, cache: Path) -> None:
    served = tmp_path / "python3.99_3.99.1.orig.tar.xz"
    served.write_bytes(CONTENT)
    got = source_tarball(_source(served.as_uri()))
    assert got == cache / "cpython-sources" / served.name
    assert got.read_bytes() == CONTENT


def test_a_mirror_serving_other_bytes_is_refused_and_leaves_nothing(tmp_path: Path, cache: Path) -> None:
    served = tmp_path / "python3.99_3.99.1.orig.tar.xz"
    served.write_bytes(b"other bytes under the pinned name")
    with pytest.raises(BadBytes, match="sha256"):
        source_tarball(_source(served.as_uri()))
    assert not (cache / "cpython-sources" / served.name).exists()


def test_a_tarball_placed_by_hand_serves_where_the_mirror_has_none(tmp_path: Path, cache: Path) -> None:
    source = _source((tmp_path / "absent" / "python3.99_3.99.1.orig.tar.xz").as_uri())
    with pytest.raises(ToolFailure) as failure:
        source_tarball(source)
    placed = cache / "cpython-sources" / source.filename
    assert f"place {source.filename} (sha256 {source.sha256}) at {placed}" in str(failure.value)
    placed.write_bytes(CONTENT)
    assert source_tarball(source) == placed


def test_a_cached_tarball_that_differs_from_its_pin_is_fetched_again(tmp_path: Path, cache: Path) -> None:
    served = tmp_path / "python3.99_3.99.1.orig.tar.xz"
    served.write_bytes(CONTENT)
    placed = cache / "cpython-sources" / served.name
    placed.parent.mkdir(parents=True)
    placed.write_bytes(b"truncated")
    assert source_tarball(_source(served.as_uri())).read_bytes() == CONTENT


def test_a_build_is_keyed_by_its_source_its_root_and_its_machine() -> None:
    source = _source("file:///nowhere")
    key = build_key(source, "bookworm", "amd64")
    assert key == build_key(source, "bookworm", "amd64")
    others = {
        build_key(replace(source, sha256="0" * 64), "bookworm", "amd64"),
        build_key(source, "trixie", "amd64"),
        build_key(source, "bookworm", "arm64"),
    }
    assert key not in others and len(others) == 3


def test_every_python_of_the_matrix_has_a_way_into_the_image() -> None:
    """Each of the matrix's CPythons is one the image wants, and each the host's pyenv has no copy of is pinned."""
    matrix = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    assert set(matrix["python"]) <= set(WANTED_PYTHONS)
    assert {"3.14", "3.15"} <= set(cpython_sources())
    for series, source in cpython_sources().items():
        assert source.version.startswith(series + ".")
        assert source.filename == f"python{series}_{source.version}.orig.tar.xz"
        assert len(source.sha256) == 64


def test_a_built_cpython_is_laid_out_as_manylinux_and_cibuildwheel_call_it(tmp_path: Path) -> None:
    """`make install` makes bin/python3.15 and bin/python3 only; cibuildwheel and the image's own probe call
    /opt/python/cp315-cp315/bin/python."""
    prefix = PurePosixPath("/opt/_internal/cpython-3.15.2")
    bin_dir = tmp_path / "rootfs" / prefix.relative_to("/") / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3.15").write_text("#!/bin/sh\n")
    _link_python(tmp_path / "rootfs", ImagePython("3.15", Path(prefix)))
    assert os.readlink(tmp_path / "rootfs/opt/python/cp315-cp315") == str(prefix)
    assert os.readlink(bin_dir / "python") == "python3.15"
    assert (bin_dir.parent / "lib/python3.15/site-packages").is_dir()


def test_without_building_the_image_leaves_out_what_the_cache_holds_no_build_of(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`nox -s image -- --no-cpython-build` (CI's): no tarball is fetched and nothing is built for a release the
    host lacks; it is left out, and said so."""
    chosen = _native_interpreters([], "amd64", build=False)
    assert chosen.built == []
    assert not (cache / "cpython-sources").exists()
    err = capsys.readouterr().err
    lacking = [v for v in WANTED_PYTHONS if v not in [p.version for p in chosen.copied]]
    for version in lacking:
        assert f"the image is made without CPython {version}: the cache holds no build of it" in err
