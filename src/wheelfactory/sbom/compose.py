"""The SBOM of a repaired wheel, written into its unpacked tree last, after every change the repair made: what the
wheel holds (each file's sha256, as RECORD will give it), what it was built from (the recipe's source), what built
it (the toolkit, nvcc and the files it came from, the host compiler, the image, cibuildwheel, the repair tool, the
factory), what it will load (each NVIDIA wheel and torch it requires, tied to the files that link them; the driver
its device code needs) and what the repair grafted (auditwheel's own SBOM, kept beside it and merged in; the DLLs
delvewheel vendored, read from where it puts them)."""

from __future__ import annotations

import email.parser
import json
import re
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..binaries.wheelfile import Binary
from ..built import BuiltWheel
from ..components import component_table
from ..declared import needed_components
from ..errors import BadBytes
from ..gpus import CodeSummary, minimum_driver
from ..sources import source_date_epoch, source_identity
from ..untrusted.shown import shown
from .document import (
    AUDITWHEEL_SBOM,
    MAX_SBOM_BYTES,
    SBOM_NAME,
    SBOMS_DIR,
    Grafted,
    Required,
    RunsOn,
    SbomFacts,
    Tool,
    to_json,
    tree_files,
)


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return ""


def build_tools(built: BuiltWheel) -> tuple[Tool, ...]:
    """What built the wheel: the toolkit, nvcc and each file it came from, cibuildwheel, the factory, the host
    compiler, the image (its digest) and the repair tool, each as the build says it."""
    toolkit, run = built.toolkit, built.run
    tools = [
        Tool("cuda-toolkit", "CUDA toolkit", toolkit.release),
        Tool("nvcc", f"nvcc ({toolkit.nvcc.source}: {toolkit.nvcc.detail})", toolkit.nvcc_version),
        *(Tool("nvcc-source", a.name, a.version, a.sha256, a.purl) for a in toolkit.nvcc.artifacts),
        Tool("build", "cibuildwheel", _version("cibuildwheel")),
        Tool("factory", "wheelfactory", _version("wheelfactory")),
    ]
    if run and run.host_compiler:
        tools.append(Tool("host-compiler", run.host_compiler))
    if built.image:
        tools.append(Tool("build-image", built.image, (run.image_digest or "") if run else ""))
    if run and run.repair_tool:
        name, _, version = run.repair_tool.partition(" ")
        tools.append(Tool("repair", name, version))
    return tuple(tools)


def linked(built: BuiltWheel, binaries: dict[str, Binary]) -> dict[str, list[str]]:
    """Distribution -> the wheel's files that link its libraries (an NVIDIA wheel's, or a provided_libraries
    distribution's such as torch): what the audit reads of each binary."""
    variant, table = built.variant, component_table()
    found: dict[str, list[str]] = {}
    for member, binary in sorted(binaries.items()):
        names = [
            entry.distribution
            for name in needed_components(binary.needed, variant.major, built.name.os, variant.declared)
            if (entry := table.get(name, variant.major)) is not None and entry.distribution
        ]
        names += [p for library in binary.needed if (p := variant.provider_of(library)) is not None]
        for name in dict.fromkeys(str(canonicalize_name(n)) for n in names):
            found.setdefault(name, []).append(member)
    return found


def required(requires_dist: list[str], built: BuiltWheel, links: dict[str, list[str]]) -> tuple[Required, ...]:
    """Each NVIDIA wheel and torch the wheel requires (its Requires-Dist lines without a marker) or links (an
    extra's, with its line), with the version the build had and the files that link it."""
    lines: dict[str, str] = {}
    for line in requires_dist:
        try:
            parsed = Requirement(line)
        except InvalidRequirement:
            continue
        name = str(canonicalize_name(parsed.name))
        if (name.startswith("nvidia-") or name == "torch") and (parsed.marker is None or name in links):
            lines.setdefault(name, line)
    versions = {str(canonicalize_name(k)): v for k, v in built.toolkit.versions.items()}
    if built.variant.torch is not None:
        versions["torch"] = built.variant.torch.release
    return tuple(
        Required(name, lines.get(name, ""), versions.get(name, ""), tuple(links.get(name, [])))
        for name in sorted({*lines, *links})
    )


def runs_on(built: BuiltWheel, binaries: dict[str, Binary]) -> RunsOn:
    entries = [entry for binary in binaries.values() for entry in binary.fatbin]
    summary = CodeSummary.of(entries)
    if not entries:
        return RunsOn("", "carries no device code", (), (), "")
    floor = minimum_driver(built.variant.major, [summary.newest_isa] if summary.newest_isa else [], built.name.os)
    return RunsOn(
        floor.version,
        floor.why,
        tuple(f"sm_{a}" for a in summary.sass),
        tuple(f"compute_{a}" for a in summary.ptx),
        summary.runs_on,
    )


def grafted_by_auditwheel(info: Path) -> tuple[Grafted, ...]:
    """What auditwheel's own SBOM (written where it grafted libraries it could name) says it grafted: its
    components but the wheel's (its first)."""
    path = info / SBOMS_DIR / AUDITWHEEL_SBOM
    if not path.is_file():
        return ()
    if path.stat().st_size > MAX_SBOM_BYTES:
        raise BadBytes(f"{shown(path.name)}: more than {MAX_SBOM_BYTES >> 20} MiB")
    try:
        components = json.loads(path.read_bytes())["components"][1:]
        return tuple(
            Grafted(str(c["name"]), str(c.get("version", "")), str(c.get("purl", "")), "auditwheel") for c in components
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadBytes(f"{shown(path.name)}: not the CycloneDX auditwheel writes ({shown(exc)})") from None


# delvewheel's own traces: its log in the .dist-info (first line "Version: X"), the folder it vendors DLLs into
# (`<distribution>` and its default --lib-sdir, which the factory's repair command keeps), and the name it gives a
# DLL it renames: a 32-digit hash of its content before the extension.
DELVEWHEEL_LOG = "DELVEWHEEL"
DELVEWHEEL_LIBS = ".libs"
_DELVEWHEEL_RENAMED = re.compile(r"(?P<stem>.+)-[0-9a-f]{32}(?P<extension>\.dll)", re.IGNORECASE)


def grafted_by_delvewheel(tree: Path, info: Path) -> tuple[Grafted, ...]:
    """The DLLs delvewheel vendored, where its log says it repaired the wheel: every DLL of its folder
    `<distribution>.libs/`, or, where it had to put them beside a module at the wheel's top, the DLLs there that
    carry its renaming; each by the name it had before."""
    if not (info / DELVEWHEEL_LOG).is_file():
        return ()
    folder = tree / (info.name.removesuffix(".dist-info").rsplit("-", 1)[0] + DELVEWHEEL_LIBS)
    in_folder = folder.is_dir() and not folder.is_symlink()
    grafted = []
    for dll in sorted((folder if in_folder else tree).glob("*.[dD][lL][lL]")):
        renamed = _DELVEWHEEL_RENAMED.fullmatch(dll.name)
        if dll.is_file() and not dll.is_symlink() and (in_folder or renamed):
            name = renamed["stem"] + renamed["extension"] if renamed else dll.name
            grafted.append(Grafted(name, "", "", "delvewheel"))
    return tuple(grafted)


def write_sbom(tree: Path, built: BuiltWheel, binaries: dict[str, Binary]) -> Path:
    """Write the wheel's SBOM into its unpacked tree (every other change made): <dist-info>/sboms/."""
    (info,) = tree.glob("*.dist-info")
    found = email.parser.Parser().parsestr((info / "METADATA").read_text(encoding="utf-8"))
    variant, run = built.variant, built.run
    epoch = run.source_date_epoch if run and run.source_date_epoch is not None else None
    facts = SbomFacts(
        name=str(found["Name"]),
        version=str(found["Version"]),
        epoch=epoch if epoch is not None else source_date_epoch(variant.recipe.source, variant.recipe_dir),
        source=source_identity(variant.recipe.source, variant.recipe_dir),
        files=tree_files(tree),
        tools=build_tools(built),
        requires=required(found.get_all("Requires-Dist") or [], built, linked(built, binaries)),
        runs_on=runs_on(built, binaries),
        grafted=grafted_by_auditwheel(info) + grafted_by_delvewheel(tree, info),
    )
    target = info / SBOMS_DIR / SBOM_NAME
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(to_json(facts))
    return target
