"""Fetching a recipe's source: a pinned sdist from the package index, or a git commit; each checked against its pin."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from wheelfactory.errors import UserError
from wheelfactory.inputs import GitSource, PathSource, SdistSource
from wheelfactory.sources import source_tree

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
