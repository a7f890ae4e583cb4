"""Fetch a recipe's source: the in-tree folder, a pinned sdist from the package index, or a git commit.

Fetched sources are kept in the cache, keyed by what pins them (the sdist's sha256, the commit), and are checked
against that pin every time they are fetched: a changed archive or a moved commit is an error, not a rebuild.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from .errors import UserError
from .host import cache_dir
from .inputs import PathSource, SdistSource, Source
from .progress import step


def source_tree(source: Source, recipe_dir: Path) -> Path:
    """The directory holding the recipe's source tree, fetched into the cache when it is remote."""
    if isinstance(source, PathSource):
        tree = recipe_dir / source.path
        if not tree.is_dir():
            raise UserError(f"{recipe_dir / 'recipe.yaml'}: source path {source.path!r} is not a directory")
        return tree
    if isinstance(source, SdistSource):
        return _sdist(source.sdist, source.sha256)
    return _git(source.git, source.rev)


def _sdist(requirement: str, sha256: str) -> Path:
    tree = cache_dir() / "sources" / f"sdist-{sha256}"
    if (tree / ".complete").is_file():
        return tree
    with tempfile.TemporaryDirectory() as scratch, step(f"download the sdist {requirement}"):
        fetched = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--dest",
                scratch,
                requirement,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        archives = sorted(Path(scratch).iterdir())
        if fetched.returncode != 0 or len(archives) != 1:
            raise UserError(f"cannot download the sdist {requirement}: {fetched.stderr.strip()[-500:]}")
        archive = archives[0]
        actual = hashlib.sha256(archive.read_bytes()).hexdigest()
        if actual != sha256:
            raise UserError(
                f"{archive.name} has sha256 {actual}, the recipe pins {sha256} — if the new archive "
                "is trusted, put its sha256 in the recipe"
            )
        unpacked = Path(scratch) / "unpacked"
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                z.extractall(unpacked)
        else:
            with tarfile.open(archive) as t:
                t.extractall(unpacked, filter="data")
        tops = list(unpacked.iterdir())
        root = tops[0] if len(tops) == 1 and tops[0].is_dir() else unpacked  # sdists hold one name-version/ dir
        shutil.rmtree(tree, ignore_errors=True)
        tree.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(root, tree)
        (tree / ".complete").write_text(archive.name)
    return tree


def _git(url: str, rev: str) -> Path:
    tree = cache_dir() / "sources" / f"git-{rev}"
    if not (tree / ".complete").is_file():
        shutil.rmtree(tree, ignore_errors=True)
        tree.parent.mkdir(parents=True, exist_ok=True)
        with step(f"clone {url} at {rev[:12]}"):
            for cmd in (
                ["git", "clone", "--quiet", "--no-checkout", url, str(tree)],
                ["git", "-C", str(tree), "checkout", "--quiet", "--detach", rev],
            ):
                done = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    shutil.rmtree(tree, ignore_errors=True)
                    raise UserError(f"cannot fetch {url} at {rev}: {done.stderr.strip()[-500:]}")
        (tree / ".complete").write_text(rev)
    head = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    if head.stdout.strip() != rev:
        raise UserError(f"{url}: the checkout is at {head.stdout.strip()}, not at the recipe's rev {rev}")
    return tree
