"""Per-(torch, CUDA) package index pages for wheels built with torch.utils.cpp_extension.

Such a wheel is tied to the torch release it was compiled against, and PyPI holds one wheel per name, version and
tag, with no local versions (`+cu130torch2.14`). So beside the PyPI upload, each torch release × CUDA release the
wheels of a folder were built for gets a static PEP 503 index under <folder>/torch-index/torch<release>-cu<XY>/ —
for GitHub Pages, or any static host that serves the folder whole: its links lead to the wheels, three folders up.
Users add it with `--extra-index-url`, as they add PyTorch's own. A wheel on LibTorch's stable ABI runs on every torch
from its target on: PyPI's one wheel serves them all, and it gets no page.

The pages are written again, whole, from the wheels in the folder (dist/ after a build; the verified wheels of a
release): which torch a wheel was built against is its variant's (the plan's), and the wheel must require exactly
that release. Nothing read is trusted: names are parsed before they become paths or links, every text is escaped,
and each link's sha256 is the file's own.
"""

from __future__ import annotations

import html
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ..binaries.wheelfile import metadata, requires_dist
from ..errors import BadBytes, UserError
from ..inputs import TorchRelease
from ..untrusted.archives import sha256
from ..untrusted.shown import shown

INDEX_DIR = "torch-index"
# The one torch a distribution's variant runs with (Plan.locked_torch_of), None for one built without torch or on
# LibTorch's stable ABI: those need no index page per torch.
TorchOf = Callable[[str], TorchRelease | None]


def index_name(torch: TorchRelease) -> str:
    """torch2.14-cu130: the torch release and its CUDA release as PyTorch spells its own indexes (cu130)."""
    return f"torch{torch.release}-cu{torch.cuda.replace('.', '')}"


def _requires(wheel: Path, torch: TorchRelease) -> bool:
    """Whether the wheel's metadata requires exactly `torch`'s release, as the factory writes it."""
    wanted = f"=={torch.release}.*"
    return any(
        canonicalize_name(r.name) == "torch" and str(r.specifier) == wanted and r.marker is None
        for r in requires_dist(wheel)
    )


def _indexed(folder: Path, torch_of: TorchOf) -> dict[str, dict[str, list[Path]]]:
    """index name -> project -> its wheels in `folder`: those whose variant is built against torch."""
    found: dict[str, dict[str, list[Path]]] = defaultdict(lambda: defaultdict(list))
    for wheel in sorted(folder.glob("*.whl")):
        if not wheel.is_file() or wheel.is_symlink():
            continue
        try:
            project = canonicalize_name(parse_wheel_filename(wheel.name)[0])
        except InvalidWheelFilename:
            continue
        torch = torch_of(project)
        if torch is None:
            continue
        try:
            required = _requires(wheel, torch)
        except BadBytes as exc:
            raise UserError(f"{shown(wheel.name)}: {exc}") from None
        if not required:
            raise UserError(
                f"{shown(wheel.name)} does not require torch=={torch.release}.*, the torch its variant is built "
                "against — it was not built by this matrix: build it again"
            )
        found[index_name(torch)][str(project)].append(wheel)
    return found


def _page(title: str, links: list[str]) -> str:
    body = "\n".join(f"    {link}<br/>" for link in links)
    return (
        '<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.0">\n'
        f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n{body}\n  </body>\n</html>\n"
    )


def _file_link(wheel: Path) -> str:
    requires = metadata(wheel).get("Requires-Python")
    attribute = f' data-requires-python="{html.escape(requires, quote=True)}"' if requires else ""
    href = f"../../../{quote(wheel.name)}#sha256={sha256(wheel)}"
    return f'<a href="{html.escape(href, quote=True)}"{attribute}>{html.escape(wheel.name)}</a>'


def write_torch_indexes(folder: Path, torch_of: TorchOf) -> list[str]:
    """Write <folder>/torch-index/ again from the wheels in `folder` (`torch_of`: the one torch a distribution's
    variant runs with, None for one that is not tied to one): the index names written; with none, the folder goes."""
    indexes = _indexed(folder, torch_of)
    target = folder / INDEX_DIR
    if not indexes:
        shutil.rmtree(target, ignore_errors=True)
        return []
    with tempfile.TemporaryDirectory(dir=folder, prefix=f".{INDEX_DIR}-") as scratch:
        staged = Path(scratch) / INDEX_DIR
        for name, projects in sorted(indexes.items()):
            root = staged / name
            root.mkdir(parents=True)
            links = [f'<a href="{quote(project)}/">{html.escape(project)}</a>' for project in sorted(projects)]
            (root / "index.html").write_text(_page(f"wheels built against {name}", links), encoding="utf-8")
            for project, wheels in projects.items():
                (root / project).mkdir()
                page = _page(f"Links for {project}", [_file_link(w) for w in wheels])
                (root / project / "index.html").write_text(page, encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        staged.rename(target)
    return sorted(indexes)


def describe(folder: Path, names: list[str]) -> str:
    return ", ".join(f"{folder / INDEX_DIR / name}/" for name in names)
