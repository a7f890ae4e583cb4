"""One fuzz target a reader: the bytes go to the reader as a file or in memory, and the reader may only take them
or refuse them with the factory's own error (BadBytes; ToolFailure for a fetched index page; UserError for what
the drafter and the completion read). Anything else it
raises is a finding, and so is an input that takes over a second or 256 MiB (libFuzzer's -timeout and
-rss_limit_mb, set by the driver)."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

from wheelfactory.binaries import elf, pe
from wheelfactory.binaries.fatbin import read_fatbin
from wheelfactory.binaries.wheelcheck import check_wheel
from wheelfactory.drafting.completion import completed, report_links
from wheelfactory.drafting.draft import draft_context, rendered_draft
from wheelfactory.errors import BadBytes, ToolFailure, UserError
from wheelfactory.sources import parse_project_page
from wheelfactory.untrusted import archives

# A fuzzing process gets its scratch folder from the driver, in the driver's work folder: libFuzzer ends it with C's
# exit(), past Python's clean-up, so a folder of its own would stay in /tmp. Elsewhere (the tests' replay of the
# kept cases) it is a temporary one, removed at exit.
_GIVEN = os.environ.get("WHEELFACTORY_FUZZ_SCRATCH")
SCRATCH = Path(_GIVEN) if _GIVEN else Path(tempfile.mkdtemp(prefix="wheelfactory-fuzz-"))
if _GIVEN:
    SCRATCH.mkdir(parents=True, exist_ok=True)
else:
    atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)
WHEEL_NAME = "pkg_cuda12x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
ROOT = Path(__file__).resolve().parent.parent  # its templates/ render the drafts
# The files of a source the drafter reads; a source input's first byte picks the one the rest of it becomes.
SOURCE_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "PKG-INFO", "CMakeLists.txt", "fuzzpkg/__init__.py")
SOURCE_NAMED = b"Metadata-Version: 2.1\nName: fuzzpkg\nVersion: 1.0\n"
# A recipe as a draft leaves it, which a report input completes.
RECIPE = """name: fuzzpkg
version: "1.0"
import: fuzzpkg
source: {path: source}
components: [cudart]  # a comment the completion keeps
modules:
  "*": []
smoke: {cuda_at_import: true}
"""
# The keys a draft or a completion may write: one more is a name from the input that escaped its comment or value.
RECIPE_KEYS = {
    "name", "version", "summary", "import", "packages", "source", "wheel_abi", "torch", "platforms", "components",
    "provided_libraries", "modules", "shared_libraries", "device_code", "environment", "dependencies", "smoke",
}  # fmt: skip


def _as_file(data: bytes, name: str) -> Path:
    path = SCRATCH / name
    path.write_bytes(data)
    return path


def _unpacked(path: Path) -> None:
    into = SCRATCH / "unpacked"
    try:
        archives.unpack(path, into)
    finally:
        shutil.rmtree(into, ignore_errors=True)


def wheel(data: bytes) -> None:
    """A wheel: checked as the gate checks it, and unpacked."""
    path = _as_file(data, WHEEL_NAME)
    check_wheel(path)
    _unpacked(path)


def tar(data: bytes) -> None:
    """An sdist or NVIDIA archive: unpacked."""
    _unpacked(_as_file(data, "pkg-1.0.tar.gz"))


def _binary(
    path: Path, read: Callable[[Path], object], names: Callable[[Path], object], sections: Callable[[Path], list[bytes]]
) -> None:
    read(path)
    names(path)
    for section in sections(path):
        read_fatbin(section)


def elf_file(data: bytes) -> None:
    """An ELF binary: what the audit and provisioning read of it, and its fatbin."""
    _binary(_as_file(data, "mod.so"), elf.read_elf, elf.named_libraries, elf.device_code_sections)


def fatbin(data: bytes) -> None:
    read_fatbin(data)


def pe_file(data: bytes) -> None:
    """A PE binary: what the audit and provisioning read of it, and its fatbin."""
    _binary(_as_file(data, "mod.pyd"), pe.read_pe, pe.named_dlls, pe.device_code_sections)


def index_page(data: bytes) -> None:
    """A package index's project page: the first byte picks JSON (PEP 691) or HTML (PEP 503)."""
    kind = "application/vnd.pypi.simple.v1+json" if data[:1] in (b"{", b"[") else "text/html"
    parse_project_page("https://index.invalid/simple/pkg/", data, kind)


def _keys_kept(text: str) -> None:
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict) and set(loaded) <= RECIPE_KEYS, f"a recipe's keys escaped: {sorted(loaded)}"


def source(data: bytes) -> None:
    """A source tree the drafter reads: the input is one of its files (the first byte picks which), beside a
    PKG-INFO that names it; the draft rendered from it must be YAML with only a recipe's keys."""
    tree = SCRATCH / "source"
    shutil.rmtree(tree, ignore_errors=True)
    (tree / "fuzzpkg").mkdir(parents=True)
    (tree / "PKG-INFO").write_bytes(SOURCE_NAMED)
    (tree / SOURCE_FILES[data[0] % len(SOURCE_FILES)] if data else tree / "setup.py").write_bytes(data[1:])
    _, context, _ = draft_context(tree, {"path": "source"}, "a folder", "the fuzzed source")
    _keys_kept(rendered_draft(ROOT, context))


def report(data: bytes) -> None:
    """A build's report.json, read as the completion reads it and applied to a drafted recipe: the completed
    recipe must be YAML with only a recipe's keys."""
    _keys_kept(completed(RECIPE, report_links(_as_file(data, "report.json"), "fuzzpkg")))


TARGETS: dict[str, tuple[Callable[[bytes], None], tuple[type[Exception], ...]]] = {
    "wheel": (wheel, (BadBytes,)),
    "tar": (tar, (BadBytes,)),
    "elf": (elf_file, (BadBytes,)),
    "fatbin": (fatbin, (BadBytes,)),
    "pe": (pe_file, (BadBytes,)),
    "index": (index_page, (ToolFailure,)),
    "source": (source, (UserError,)),
    "report": (report, (UserError,)),
}


def run(reader: str, data: bytes) -> None:
    """One input through one reader: its own errors are answers, anything else propagates (a finding)."""
    target, allowed = TARGETS[reader]
    with contextlib.suppress(*allowed):
        target(data)
