"""Fetching a recipe's source: a pinned sdist from the package index, or a git commit; each checked against its pin."""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from wheelfactory.errors import ToolFailure, UserError
from wheelfactory.inputs import GitSource, PathSource, SdistSource
from wheelfactory.sources import source_tree

from .conftest import served

SIX_SHA256 = "1e61c37477a1626458e36f7b1d82aa5c9b094fa4802892072e49de9c60c4c926"  # six-1.16.0.tar.gz on PyPI


@pytest.fixture(autouse=True)
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WHEELFACTORY_CACHE", str(tmp_path / "cache"))


@pytest.mark.slow
def test_pinned_sdist_is_downloaded_checked_and_unpacked(tmp_path: Path) -> None:
    tree = source_tree(SdistSource(sdist="six==1.16.0", sha256=SIX_SHA256), tmp_path)
    assert (tree / "setup.py").is_file() and (tree / "six.py").is_file()
    assert source_tree(SdistSource(sdist="six==1.16.0", sha256=SIX_SHA256), tmp_path) == tree  # from the cache


@pytest.mark.slow
def test_an_sdist_that_does_not_match_its_pin_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=f"has sha256 {SIX_SHA256}, the recipe pins 0000"):
        source_tree(SdistSource(sdist="six==1.16.0", sha256="0" * 64), tmp_path)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_git_source_is_checked_out_at_its_commit(tmp_path: Path) -> None:
    repo = tmp_path / "upstream"
    repo.mkdir()
    _git(repo, "init", "--quiet")
    (repo / "setup.py").write_text("# first\n")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "first")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "setup.py").write_text("# second\n")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-am", "second")

    tree = source_tree(GitSource(git=repo.as_uri(), rev=first), tmp_path)

    assert (tree / "setup.py").read_text() == "# first\n"
    with pytest.raises(UserError, match="cannot fetch"):
        source_tree(GitSource(git=repo.as_uri(), rev="f" * 40), tmp_path)


def test_in_tree_source_must_exist(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is not a directory"):
        source_tree(PathSource(path="missing"), tmp_path)


def _sdist(path: Path, members: dict[str, str]) -> str:
    with tarfile.open(path, "w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_sdist_is_fetched_as_a_file_and_nothing_of_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A package whose build backend would leave a marker and fail, as a hostile or broken sdist's would:
    # fetching it must neither run its setup.py nor prepare its metadata (pip download would).
    marker = tmp_path / "setup-py-ran"
    setup_py = f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit('this sdist must not be built here')\n"
    index = tmp_path / "index"
    (index / "simple" / "trap-pkg").mkdir(parents=True)
    (index / "files").mkdir()
    sha256 = _sdist(
        index / "files" / "trap_pkg-1.0.tar.gz",
        {
            "trap_pkg-1.0/setup.py": setup_py,
            "trap_pkg-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: trap-pkg\nVersion: 1.0\n",
        },
    )
    (index / "simple" / "trap-pkg" / "index.html").write_text(
        '<a href="../../files/trap_pkg-0.9.tar.gz#sha256=00">trap_pkg-0.9.tar.gz</a>\n'
        f'<a href="../../files/trap_pkg-1.0.tar.gz#sha256={sha256}">trap_pkg-1.0.tar.gz</a>\n'
    )
    with served(index) as url:
        monkeypatch.setenv("PIP_INDEX_URL", url + "simple/")
        tree = source_tree(SdistSource(sdist="trap-pkg==1.0", sha256=sha256), tmp_path)
    assert (tree / "setup.py").read_text() == setup_py and (tree / ".complete").is_file()
    assert not marker.exists()


def test_an_sdist_that_would_write_outside_its_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "index"
    (index / "simple" / "escape").mkdir(parents=True)
    sha256 = _sdist(index / "simple" / "escape" / "escape-1.0.tar.gz", {"../../outside.txt": "x"})
    (index / "simple" / "escape" / "index.html").write_text('<a href="escape-1.0.tar.gz">escape-1.0.tar.gz</a>\n')
    with served(index) as url, pytest.raises(ToolFailure, match=r"escape-1\.0\.tar\.gz: .*outside.* — the archive is"):
        monkeypatch.setenv("PIP_INDEX_URL", url + "simple/")
        source_tree(SdistSource(sdist="escape==1.0", sha256=sha256), tmp_path)
    assert not (tmp_path / "outside.txt").exists()


def test_a_project_one_index_lacks_is_taken_from_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As pip reads PIP_INDEX_URL then PIP_EXTRA_INDEX_URL: a private index without the project (404) is no error.
    private, public = tmp_path / "private", tmp_path / "public"
    (private / "simple").mkdir(parents=True)
    (public / "simple" / "found").mkdir(parents=True)
    sha256 = _sdist(public / "simple" / "found" / "found-1.0.tar.gz", {"found-1.0/setup.py": "# found\n"})
    (public / "simple" / "found" / "index.html").write_text('<a href="found-1.0.tar.gz">found-1.0.tar.gz</a>\n')
    with served(private) as first, served(public) as second:
        monkeypatch.setenv("PIP_INDEX_URL", first + "simple/")
        monkeypatch.setenv("PIP_EXTRA_INDEX_URL", second + "simple/")
        tree = source_tree(SdistSource(sdist="found==1.0", sha256=sha256), tmp_path)
    assert (tree / "setup.py").read_text() == "# found\n"
