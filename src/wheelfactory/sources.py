"""Fetch a recipe's source: the in-tree folder, a pinned sdist from the package index, or a git commit.

Fetching is a download, never a build: the sdist is found on the index's project page (PEP 691 JSON, or the
PEP 503 HTML page), downloaded as a file, checked against the recipe's sha256 and unpacked safely — nothing of
the package runs outside the build container (pip download would prepare its metadata by running its build
backend here). The index is pip's: PIP_INDEX_URL and PIP_EXTRA_INDEX_URL, else pip's configuration, else PyPI.

Fetched sources are kept in the cache, keyed by what pins them (the sdist's sha256, the commit), and are checked
against that pin every time they are fetched: a changed archive or a moved commit is an error, not a rebuild.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urljoin, urlsplit

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_sdist_filename
from packaging.version import Version

from . import host
from .errors import ToolFailure, UserError, fetched
from .host import cache_dir
from .inputs import GitSource, PathSource, SdistSource, Source, UrlSource
from .inputs.matrix import PYPI
from .inputs.recipe import ExtraSource
from .progress import step
from .untrusted import archives
from .untrusted.cache import reusable, seal
from .untrusted.index_pages import PEP691, pep503_links, pep691_files
from .untrusted.shown import shown
from .untrusted.trees import walk

# What of a source folder is no part of the source: what a build or git leaves in it. The build's staged copy
# leaves it out, and so does the folder's content hash.
NOT_SOURCE = ("build", "dist", "*.egg-info", "__pycache__", ".git", ".complete")


@dataclass(frozen=True)
class SourceIdentity:
    """What pins a recipe's source, as the wheel's SBOM names it."""

    kind: str  # "sdist", "git" or "path"
    name: str  # the sdist's "name==1.2.3", the git URL, or the folder (relative to the recipe's)
    pinned: str  # the sdist's sha256, the commit, or the folder's content hash (folder_digest)

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "pinned": self.pinned}


def source_identity(source: Source, recipe_dir: Path) -> SourceIdentity:
    if isinstance(source, SdistSource):
        return SourceIdentity("sdist", source.sdist, source.sha256)
    if isinstance(source, GitSource):
        return SourceIdentity("git", source.git, source.rev)
    return SourceIdentity("path", source.path, folder_digest(source_tree(source, recipe_dir)))


def folder_digest(tree: Path) -> str:
    """The sha256 of a source folder's content: each file's path (relative, POSIX) and sha256, one line each in
    path order, leaving out what is no part of the source (NOT_SOURCE); a link counts as its target's text."""
    lines = []
    for path in sorted(tree.rglob("*")):
        relative = path.relative_to(tree)
        if any(fnmatch.fnmatch(part, pattern) for part in relative.parts for pattern in NOT_SOURCE):
            continue
        if path.is_symlink():
            digest = hashlib.sha256(os.readlink(path).encode()).hexdigest()
        elif path.is_file():
            digest = archives.sha256(path)
        else:
            continue
        lines.append(f"{relative.as_posix()}\0{digest}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


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


def extra_source_tree(source: ExtraSource, recipe_dir: Path) -> Path:
    """The folder an extra source is handed to the build as: its tree, or for a URL the folder holding its file."""
    if isinstance(source, UrlSource):
        with host.cache_lock(f"url-{source.sha256}"):
            return _fetch_url(source)
    return source_tree(source, recipe_dir)


def _fetch_url(source: UrlSource) -> Path:
    folder = cache_dir() / "sources" / f"url-{source.sha256}-{source.saved_as}"
    if reusable(folder):
        return folder
    with tempfile.TemporaryDirectory() as scratch, step(f"download {shown(source.url)}"):
        with fetched():
            saved = archives.download(source.url, Path(scratch) / source.saved_as)
        actual = archives.sha256(saved)
        if actual != source.sha256:
            raise UserError(
                f"{shown(source.url)} has sha256 {actual}, the recipe pins {source.sha256} — if the new file is "
                "trusted, put its sha256 in the recipe"
            )
        with host.built_aside(folder) as building:
            shutil.copy2(saved, building / source.saved_as)
            seal(building)
    return folder


def source_date_epoch(source: Source, recipe_dir: Path) -> int:
    """The time the source was made, for SOURCE_DATE_EPOCH: every timestamp of a wheel is this one, so that the
    same source builds the same bytes. A git source: its commit's time. An sdist: its PKG-INFO's time in the
    archive. A source in the recipe's folder: the last commit that touched it, or without git its newest file."""
    tree = source_tree(source, recipe_dir)
    if isinstance(source, SdistSource) and (tree / "PKG-INFO").is_file():
        return int((tree / "PKG-INFO").stat().st_mtime)
    folder = tree if not isinstance(source, PathSource) else recipe_dir
    logged = host.run(["git", "-C", str(folder), "log", "-1", "--format=%ct", "--", "."], "git log", check=False)
    if logged.returncode == 0 and logged.stdout.strip().isdigit():
        return int(logged.stdout.strip())
    return max((int(p.stat().st_mtime) for p in tree.rglob("*") if p.is_file() and not p.is_symlink()), default=0)


def index_urls() -> list[str]:
    """The package indexes pip would use, in its order."""
    primary = os.environ.get("PIP_INDEX_URL")
    if not primary:
        configured = host.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"], "pip", check=False)
        primary = configured.stdout.strip() if configured.returncode == 0 else ""
    extra = os.environ.get("PIP_EXTRA_INDEX_URL", "").split()
    return [url if url.endswith("/") else url + "/" for url in [primary or PYPI, *extra]]


def project_files(index: str, project: str) -> list[tuple[str, str]]:
    """(file name, absolute URL) of every file on the index's page for `project`. The page is read within the
    archive layer's bounds; a page that is not the format it says (a PEP 691 file without `url`, a name with a
    folder in it) is refused as a download failure, naming the page."""
    page = urljoin(index, f"{canonicalize_name(project)}/")
    request = urllib.request.Request(page, headers={"Accept": f"{PEP691}, text/html;q=0.1"})
    try:
        with fetched():
            body, kind = archives.read_page(request)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []  # not on this index: the next one may have it, as pip reads them
        raise ToolFailure(f"cannot read {shown(page)}: {shown(exc.reason)}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ToolFailure(f"cannot read {shown(page)}: {shown(getattr(exc, 'reason', exc))}") from None
    return parse_project_page(page, body, kind)


def parse_project_page(page: str, body: bytes, kind: str) -> list[tuple[str, str]]:
    """(file name, absolute URL) of each file a project page lists: PEP 691 JSON, else PEP 503 HTML. A page that
    is not the format it says is refused as a download failure (ToolFailure naming the page)."""
    with fetched():
        if kind == PEP691:
            files = [(str(entry["filename"]), str(entry["url"])) for entry in pep691_files(page, body)]
        else:
            # Links that name no file (a folder, another page) are passed over, as pip passes them.
            files = [
                (PurePosixPath(urlsplit(url).path).name, url)
                for url in pep503_links(page, body)
                if PurePosixPath(urlsplit(url).path).name
            ]
    for name, url in files:
        if "/" in name or "\\" in name or urlsplit(url).scheme not in ("http", "https", "file"):
            raise ToolFailure(f"{shown(page)} lists {shown(name)} at {shown(url)}, which no index serves — refused")
    return files


def _find_sdist(requirement: str) -> tuple[str, str]:
    """(file name, URL) of the sdist of `name==version` on the first index that has it."""
    pinned = Requirement(requirement)
    version = next(iter(pinned.specifier)).version
    for found, name, url in sdists(pinned.name):
        if str(found) == version:
            return name, url
    raise ToolFailure(f"no sdist of {requirement} on {', '.join(index_urls())} — check the name and version")


def sdists(project: str) -> list[tuple[Version, str, str]]:
    """(version, file name, URL) of every sdist of `project` on pip's indexes, the first index's first."""
    found = []
    for index in index_urls():
        for name, url in project_files(index, project):
            try:
                named, version = parse_sdist_filename(name)
            except ValueError:
                continue  # a wheel, or something else
            if named == canonicalize_name(project):
                found.append((version, name, url))
    return found


def pin_sdist(project: str, version: str | None) -> tuple[str, str, Path]:
    """An sdist pinned as a recipe pins it: ("name==version", the sha256 of the archive the index serves, its
    unpacked tree in the cache). Without a version, the newest final release that has an sdist."""
    offered = sdists(project)
    if version is None:
        finals = [v for v, _, _ in offered if not v.is_prerelease and not v.is_devrelease]
        if not finals:
            raise ToolFailure(f"no sdist of a final release of {shown(project)} on {', '.join(index_urls())}")
        version = str(max(finals))
    match = next(((name, url) for v, name, url in offered if str(v) == version), None)
    if match is None:
        raise ToolFailure(f"no sdist of {shown(project)}=={shown(version)} on {', '.join(index_urls())}")
    name, url = match
    with tempfile.TemporaryDirectory() as scratch, step(f"download the sdist {shown(name)}"):
        with fetched():
            archive = archives.download(url, Path(scratch) / name)
        sha256 = archives.sha256(archive)
        with host.cache_lock(f"sdist-{sha256}"):
            tree = cache_dir() / "sources" / f"sdist-{sha256}"
            if not reusable(tree):
                _unpack_into(archive, name, tree)
    return f"{project}=={version}", sha256, tree


def _sdist(requirement: str, sha256: str) -> Path:
    with host.cache_lock(f"sdist-{sha256}"):
        return _fetch_sdist(requirement, sha256)


def _fetch_sdist(requirement: str, sha256: str) -> Path:
    tree = cache_dir() / "sources" / f"sdist-{sha256}"
    if reusable(tree):
        return tree
    name, url = _find_sdist(requirement)
    with tempfile.TemporaryDirectory() as scratch, step(f"download the sdist {name}"):
        with fetched():
            archive = archives.download(url, Path(scratch) / name)
        actual = archives.sha256(archive)
        if actual != sha256:
            raise UserError(
                f"{name} has sha256 {actual}, the recipe pins {sha256} — if the new archive is trusted, put its "
                "sha256 in the recipe"
            )
        _unpack_into(archive, name, tree)
    return tree


def _unpack_into(archive: Path, name: str, tree: Path) -> None:
    """Unpack a downloaded sdist whose sha256 names `tree` into that cache folder, sealed."""
    with tempfile.TemporaryDirectory() as scratch:
        with fetched():
            root = archives.unpack(archive, Path(scratch) / "unpacked")
        with host.built_aside(tree) as building:
            try:
                shutil.copytree(root, building, symlinks=True, dirs_exist_ok=True)
            except shutil.Error as exc:  # unpack checked every member: this is the disk, not the archive
                raise ToolFailure(f"{name}: cannot copy the unpacked source into the cache: {exc}") from None
            (building / ".complete").write_text(name)
            seal(building)


def _git(url: str, rev: str) -> Path:
    with host.cache_lock(f"git-{rev}"):
        return _fetch_git(url, rev)


def _fetch_git(url: str, rev: str) -> Path:
    tree = cache_dir() / "sources" / f"git-{rev}"
    if not (tree / ".complete").is_file():
        with step(f"clone {url} at {rev[:12]}"), host.built_aside(tree) as building:
            for cmd in (
                ["git", "clone", "--quiet", "--no-checkout", "--", url, str(building)],
                ["git", "-C", str(building), "checkout", "--quiet", "--detach", rev],
            ):
                done = host.run(cmd, f"fetching {url} at {rev}", check=False)
                if done.returncode != 0:
                    raise ToolFailure(f"cannot fetch {url} at {rev}: {host.tail(done.stderr, 8)}")
            (building / ".complete").write_text(rev)
    head = host.run(["git", "-C", str(tree), "rev-parse", "HEAD"], "reading the checkout's commit", check=False)
    if head.stdout.strip() != rev:
        raise UserError(f"{url}: the checkout is at {head.stdout.strip()}, not at the recipe's rev {rev}")
    return tree


# Where projects keep an import package, in the order scikit-build-core and hatchling look.
PACKAGE_ROOTS = ("src", "python", ".")


def package_dir(tree: Path, package: str) -> Path | None:
    """The folder (relative to `tree`) of the import package `package` ("pkg" or "pkg.sub") in a source tree:
    under src/, python/ or the root, else the shallowest one anywhere (among the first trees.MAX_ENTRIES entries);
    None when the source has none."""
    parts = package.split(".")
    for base in PACKAGE_ROOTS:
        candidate = tree.joinpath(base, *parts)
        if (candidate / "__init__.py").is_file():
            return candidate.relative_to(tree)
    # The tree's entries, shallowest first and in name order, as many as trees.walk looks at.
    for entry in walk(tree):
        relative = entry.relative_to(tree)
        named = entry.name == "__init__.py" and relative.parts[:-1][-len(parts) :] == tuple(parts)
        if named and entry.is_file() and not entry.is_symlink():
            return relative.parent
    return None
