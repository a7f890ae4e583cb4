"""Per-(torch, CUDA) package index pages for wheels built with torch.utils.cpp_extension.

Such a wheel is tied to the torch release it was compiled against, and a CUDA major's train names several
releases: one wheel each, all of one name, version and tag. PyPI holds one of them, the newest torch's, under the
plain version. So every build (that one too) is also written with a local version label, `1.2.3+pt215cu132`, under
<folder>/torch-index/torch<release>-cu<XY>/<project>/, beside a static PEP 503 page that lists it — for GitHub
Pages, or any static host that serves the folder whole. Users add the page with `--extra-index-url`, as they add
PyTorch's own (PyG and flash-attn publish theirs so). A wheel on LibTorch's stable ABI runs on every torch from its
target on: PyPI's one wheel serves them all, and it gets no label and no page.

The pages are written again, whole, from the labelled wheels in the folder (dist/ after a build; the verified
wheels of a release). Nothing read is trusted: a wheel must lie in the folder of a torch its distribution is built
against, carry that torch's label and require exactly that release; names are parsed before they become paths or
links, every text is HTML-escaped (`html.escape`), and each link's sha256 is the file's own. The folder is walked
and written through no link (untrusted/trees.py): a link in it stops the pages, so that none is written, and no
stale one removed, outside it.
"""

from __future__ import annotations

import html
import re
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from .. import host
from ..binaries.wheelfile import metadata, pack, requires_dist, unpack
from ..errors import BadBytes, UserError
from ..inputs import TorchRelease
from ..sbom.document import relabel
from ..untrusted.archives import sha256
from ..untrusted.shown import shown
from ..untrusted.trees import folder_inside, walk

INDEX_DIR = "torch-index"
PAGE = "index.html"
# The torch releases a distribution's variants are each tied to (Plan.locked_torches_of): none for one built
# without torch or on LibTorch's stable ABI.
TorchesOf = Callable[[str], list[TorchRelease]]


def index_page(torch: TorchRelease) -> str:
    """The folder of a torch's index page, relative to the folder of the wheels: torch-index/torch2.15-cu132/."""
    return f"{INDEX_DIR}/{torch.index_name}/"


def labelled_place(wheel_name: str, torch: TorchRelease) -> str:
    """Where the labelled copy of a wheel goes, relative to the folder that holds the wheel:
    torch-index/torch2.15-cu132/<project>/<name>-<version>+pt215cu132-<tags>.whl (a glob's `*` version too)."""
    name, version, rest = wheel_name.split("-", 2)
    return f"{index_page(torch)}{canonicalize_name(name)}/{name}-{version}+{torch.label}-{rest}"


def labelled_copy(wheel: Path, torch: TorchRelease, folder: Path) -> Path:
    """Write the wheel again with its version's local label (`+pt215cu132`) into its place under
    <folder>/torch-index/: the same files, its .dist-info and .data folders renamed, METADATA's Version and
    RECORD written for the new version (wheel's own packer), its SBOM for the new version and files (it still
    names the torch the wheel was built against)."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=f".{INDEX_DIR}-") as scratch:
        return _labelled_copy(wheel, torch, folder, Path(scratch))


def _labelled_copy(wheel: Path, torch: TorchRelease, folder: Path, scratch: Path) -> Path:
    tree = unpack(wheel, scratch / "tree")
    prefix, version = wheel.name.split("-", 2)[:2]  # the file name's own spelling of both
    labelled = f"{version}+{torch.label}"
    for suffix in (".dist-info", ".data"):
        found = [p for p in tree.iterdir() if p.is_dir() and p.suffix == suffix]
        if len(found) > 1:
            raise BadBytes(f"{shown(wheel.name)}: {len(found)} {suffix} folders at its top, where a wheel has one")
        for path in found:
            path.rename(tree / f"{prefix}-{labelled}{suffix}")
    info = tree / f"{prefix}-{labelled}.dist-info"
    if not (info / "METADATA").is_file():
        raise BadBytes(f"{shown(wheel.name)}: no .dist-info/METADATA at its top")
    text = (info / "METADATA").read_text(encoding="utf-8")
    head, blank, body = text.partition("\n\n")
    head, count = re.subn(r"(?m)^Version: .*$", f"Version: {labelled}", head, count=1)
    if count != 1:
        raise BadBytes(f"{shown(wheel.name)}: its METADATA names no Version")
    (info / "METADATA").write_text(head + blank + body, encoding="utf-8")
    relabel(tree, labelled, lambda member: _renamed(member, f"{prefix}-{version}", f"{prefix}-{labelled}"))
    packed = pack(tree, scratch)
    place = PurePosixPath(labelled_place(wheel.name, torch))
    if packed.name != place.name:  # wheel's packer names the file from what the tree says
        raise BadBytes(f"{shown(wheel.name)}: labelled, it packed as {shown(packed.name)}, not {shown(place.name)}")
    target = folder_inside(folder, *place.parent.parts) / place.name  # through no link the folder holds
    host.place(packed, target)
    return target


def _renamed(member: str, old: str, new: str) -> str:
    """A member's path once its wheel's .dist-info and .data folders are named for another version."""
    top, slash, rest = member.partition("/")
    for suffix in (".dist-info", ".data"):
        if top == f"{old}{suffix}":
            return f"{new}{suffix}{slash}{rest}"
    return member


def _requires(wheel: Path, torch: TorchRelease) -> bool:
    """Whether the wheel's metadata requires exactly `torch`'s release, as the factory writes it."""
    wanted = f"=={torch.release}.*"
    return any(
        canonicalize_name(r.name) == "torch" and str(r.specifier) == wanted and r.marker is None
        for r in requires_dist(wheel)
    )


def _checked(wheel: Path, torches_of: TorchesOf) -> str | None:
    """Why a wheel under torch-index/<index>/<project>/ does not belong there; None when it does."""
    try:
        project, version, _, _ = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename:
        return "is no wheel's name"
    index, folder = wheel.parent.parent.name, wheel.parent.name
    torches = torches_of(project)
    torch = next((t for t in torches if t.index_name == index), None)
    if torch is None or folder != canonicalize_name(project):
        built = ", ".join(t.index_name for t in torches) or "no torch it is tied to"
        return f"lies in {index}/{folder}/, where its distribution is built against {built}"
    if version.local != torch.label:
        return f"is not labelled +{torch.label}, the label of the wheels built against {index}"
    try:
        required = _requires(wheel, torch)
    except BadBytes as exc:
        return str(exc)
    return None if required else f"does not require torch=={torch.release}.*, the torch it is built against"


def _page(title: str, links: list[str]) -> str:
    body = "\n".join(f"    {link}<br/>" for link in links)
    return (
        '<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.0">\n'
        f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n{body}\n  </body>\n</html>\n"
    )


def _file_link(wheel: Path) -> str:
    requires = metadata(wheel).get("Requires-Python")
    attribute = f' data-requires-python="{html.escape(requires, quote=True)}"' if requires else ""
    href = f"{quote(wheel.name)}#sha256={sha256(wheel)}"
    return f'<a href="{html.escape(href, quote=True)}"{attribute}>{html.escape(wheel.name)}</a>'


def _listing(folder: Path) -> tuple[list[Path], list[Path], list[str]]:
    """(the wheels under <folder>/torch-index/<index>/<project>/, the pages there, what lies there that no page
    may be read or written through: a link anywhere, the folder's own included). Links are never followed."""
    root = folder / INDEX_DIR
    if root.is_symlink():
        return [], [], [f"{INDEX_DIR} is a link"]
    wheels, pages, links = [], [], []
    for entry in walk(root):
        depth = len(entry.relative_to(root).parts)
        if entry.is_symlink():
            links.append(f"{shown(entry.relative_to(folder).as_posix())} is a link")
        elif depth == 3 and entry.suffix == ".whl" and entry.is_file():
            wheels.append(entry)
        elif depth in (2, 3) and entry.name == PAGE and entry.is_file():
            pages.append(entry)
    return sorted(wheels), pages, links


def labelled_wheels(folder: Path) -> list[Path]:
    """The wheels under <folder>/torch-index/<index>/<project>/, plain files reached through no link."""
    return _listing(folder)[0]


def write_torch_indexes(folder: Path, torches_of: TorchesOf) -> list[str]:
    """Write the pages of <folder>/torch-index/ again from the labelled wheels there (`torches_of`: the torch
    releases a distribution is built against): the index names written. A wheel that does not belong where it
    lies, or a link in the folder (which a page would be written, or a stale one removed, through), stops it
    before any page is written."""
    wheels, pages, links = _listing(folder)
    problems = [f"{shown(w.relative_to(folder).as_posix())} {why}" for w in wheels if (why := _checked(w, torches_of))]
    if links:
        problems.append(f"{', '.join(links)} — nothing is written through a link: remove it")
    if problems:
        raise UserError("\n".join(problems) + "\n— build them again, or remove them from the folder")
    indexes: dict[str, dict[str, list[Path]]] = {}
    for wheel in wheels:
        indexes.setdefault(wheel.parent.parent.name, {}).setdefault(wheel.parent.name, []).append(wheel)
    written: set[Path] = set()
    for name, projects in sorted(indexes.items()):
        root = folder / INDEX_DIR / name
        links = [f'<a href="{quote(project)}/">{html.escape(project)}</a>' for project in sorted(projects)]
        host.write_atomically(root / PAGE, _page(f"wheels built against {name}", links))
        written.add(root / PAGE)
        for project, found in projects.items():
            page = _page(f"Links for {project}", [_file_link(w) for w in found])
            host.write_atomically(root / project / PAGE, page)
            written.add(root / project / PAGE)
    for stale in pages:
        if stale not in written:
            stale.unlink()  # the page of wheels no longer there
    return sorted(indexes)


def describe(folder: Path, names: list[str]) -> str:
    return ", ".join(f"{folder / INDEX_DIR / name}/" for name in names)
