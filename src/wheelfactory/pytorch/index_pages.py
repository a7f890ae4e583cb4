"""Per-(torch, CUDA) package index pages for wheels built with torch.utils.cpp_extension.

Such a wheel is tied to the torch release it was compiled against, and PyPI holds one wheel per name, version and
tag, with no local versions (`+cu130torch2.11`). So beside the PyPI upload, each torch release × CUDA release the
wheels in dist/ were built for gets a static PEP 503 index under dist/torch-index/torch<release>-cu<XY>/ — for
GitHub Pages, or any static host that serves dist/ whole: its links lead to the wheels in dist/, three folders up.
Users add it with `--extra-index-url`, as they add PyTorch's own.

The pages are written again, whole, from dist/report.json and the wheels in dist/ after each build: only a wheel that
passed, whose file is in dist/, with a torch the report names. Nothing read is trusted: every name is checked
before it becomes a path or a link, every text is escaped, and each link's sha256 is the file's own.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from urllib.parse import quote

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ..binaries.wheelfile import metadata
from ..errors import BadBytes
from ..report import REPORT_NAME
from ..untrusted.shown import shown

INDEX_DIR = "torch-index"
_RELEASE = re.compile(r"^[0-9]{1,3}\.[0-9]{1,3}$")
# What one report may list: far more than any matrix builds.
_MAX_ENTRIES = 10_000


def index_name(release: str, cuda: str) -> str:
    """torch2.11-cu130: the torch release and its CUDA release as PyTorch spells its own indexes (cu130)."""
    return f"torch{release}-cu{cuda.replace('.', '')}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _indexed(dist: Path) -> dict[str, dict[str, list[Path]]]:
    """index name -> project (canonical) -> its wheels in dist/, from the report's entries that qualify."""
    try:
        entries = json.loads((dist / REPORT_NAME).read_text(encoding="utf-8"))["wheels"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    found: dict[str, dict[str, list[Path]]] = defaultdict(lambda: defaultdict(list))
    for entry in entries[:_MAX_ENTRIES] if isinstance(entries, list) else []:
        torch = entry.get("torch") if isinstance(entry, dict) else None
        if not isinstance(torch, dict) or entry.get("passed") is not True:
            continue
        wheel, release, cuda = entry.get("wheel"), torch.get("release"), torch.get("cuda")
        if not all(isinstance(v, str) for v in (wheel, release, cuda)):
            continue
        assert isinstance(wheel, str) and isinstance(release, str) and isinstance(cuda, str)
        if not (_RELEASE.match(release) and _RELEASE.match(cuda)) or "/" in wheel or "\\" in wheel:
            continue
        try:
            project = canonicalize_name(parse_wheel_filename(wheel)[0])
        except InvalidWheelFilename:
            continue
        path = dist / wheel
        if path.is_file() and not path.is_symlink():
            found[index_name(release, cuda)][project].append(path)
    return found


def _page(title: str, links: list[str]) -> str:
    body = "\n".join(f"    {link}<br/>" for link in links)
    return (
        '<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.0">\n'
        f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n{body}\n  </body>\n</html>\n"
    )


def _file_link(wheel: Path) -> str:
    try:
        requires = metadata(wheel).get("Requires-Python")
    except BadBytes:
        requires = None
    attribute = f' data-requires-python="{html.escape(requires, quote=True)}"' if requires else ""
    href = f"../../../{quote(wheel.name)}#sha256={_sha256(wheel)}"
    return f'<a href="{html.escape(href, quote=True)}"{attribute}>{html.escape(wheel.name)}</a>'


def write_torch_indexes(dist: Path) -> list[str]:
    """Write dist/torch-index/ again from dist/ as it is now: the index names written (none: the folder removed)."""
    indexes = _indexed(dist)
    target = dist / INDEX_DIR
    if not indexes:
        shutil.rmtree(target, ignore_errors=True)
        return []
    with tempfile.TemporaryDirectory(dir=dist, prefix=f".{INDEX_DIR}-") as scratch:
        staged = Path(scratch) / INDEX_DIR
        for name, projects in sorted(indexes.items()):
            root = staged / name
            root.mkdir(parents=True)
            links = [f'<a href="{quote(project)}/">{html.escape(project)}</a>' for project in sorted(projects)]
            (root / "index.html").write_text(_page(f"wheels built against {name}", links), encoding="utf-8")
            for project, wheels in projects.items():
                (root / project).mkdir()
                page = _page(f"Links for {project}", [_file_link(w) for w in sorted(wheels)])
                (root / project / "index.html").write_text(page, encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        staged.rename(target)
    return sorted(indexes)


def describe(names: list[str]) -> str:
    return ", ".join(f"{INDEX_DIR}/{shown(name)}/" for name in names)
