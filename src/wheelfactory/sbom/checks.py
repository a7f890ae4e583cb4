"""A wheel's SBOM read back (untrusted: bounded, validated) and held against the wheel: the wheel it names is this
one, its files are RECORD's, each NVIDIA wheel and torch it says the wheel requires is a Requires-Dist line and
every such line is in it; and, where the caller knows them, the source is the recipe's and the files that link
each distribution are those the audit read. Every disagreement is one line naming both sides."""

from __future__ import annotations

import base64
import csv
import email.parser
import io
import re
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..errors import BadBytes
from ..sources import SourceIdentity
from ..untrusted import archives
from ..untrusted.shown import shown
from .document import MAX_SBOM_BYTES, SBOM_NAME, SBOMS_DIR, UNLISTED, SbomFacts, from_json, validated


def _members(wheel: Path) -> tuple[str, dict[str, bytes]]:
    """The wheel's .dist-info folder, and its METADATA, RECORD and SBOM (bounded; absent ones left out)."""
    with archives.opened_zip(wheel) as (opened, listed):
        infos = sorted({m.name.split("/", 1)[0] for m in listed if re.fullmatch(r"[^/]+\.dist-info/.+", m.name)})
        if len(infos) != 1:
            raise BadBytes(f"{shown(wheel.name)}: {len(infos)} .dist-info folders at its top, where a wheel has one")
        names = {m.name for m in listed}
        wanted = {"METADATA": "METADATA", "RECORD": "RECORD", "SBOM": f"{SBOMS_DIR}/{SBOM_NAME}"}
        limit = archives.MAX_MEMBER_BYTES
        found = {
            key: archives.read_member(opened, f"{infos[0]}/{member}", MAX_SBOM_BYTES if key == "SBOM" else limit)
            for key, member in wanted.items()
            if f"{infos[0]}/{member}" in names
        }
    return infos[0], found


def read_sbom(wheel: Path) -> tuple[SbomFacts, str, dict[str, bytes]]:
    """The facts of the wheel's SBOM, its .dist-info folder and the members read beside it (METADATA, RECORD);
    BadBytes where it has none or one that is not valid CycloneDX 1.6 of the factory's shape."""
    info, found = _members(wheel)
    where = f"{shown(wheel.name)}: {shown(info)}/{SBOMS_DIR}/{SBOM_NAME}"
    if "SBOM" not in found:
        raise BadBytes(f"{shown(wheel.name)}: no SBOM ({shown(info)}/{SBOMS_DIR}/{SBOM_NAME}) — build it again")
    return from_json(validated(found["SBOM"], where), where), info, found


def _record(data: bytes, info: str) -> dict[str, str]:
    """RECORD's sha256 of each member, in hex, RECORD's own files and the SBOM left out."""
    hashes = {}
    skipped = {f"{info}/{name}" for name in UNLISTED}
    for row in csv.reader(io.StringIO(data.decode("utf-8", errors="replace"))):
        if len(row) == 3 and row[0] not in skipped and row[1].startswith("sha256="):
            digest = row[1].removeprefix("sha256=")
            try:
                hashes[row[0]] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
            except ValueError:
                hashes[row[0]] = shown(digest)
    return hashes


def _requirements(metadata: bytes) -> list[Requirement]:
    """The wheel's Requires-Dist lines of NVIDIA wheels and torch."""
    found = email.parser.Parser().parsestr(metadata.decode("utf-8", errors="replace"))
    lines = []
    for line in found.get_all("Requires-Dist") or []:
        try:
            parsed = Requirement(line)
        except InvalidRequirement:
            continue
        name = str(canonicalize_name(parsed.name))
        if name.startswith("nvidia-") or name == "torch":
            lines.append(parsed)
    return lines


def _same(line: str, wanted: Requirement) -> bool:
    try:
        said = Requirement(line)
    except InvalidRequirement:
        return False
    return (canonicalize_name(said.name), said.specifier, said.extras, str(said.marker)) == (
        canonicalize_name(wanted.name),
        wanted.specifier,
        wanted.extras,
        str(wanted.marker),
    )


def _requirement_problems(facts: SbomFacts, metadata: bytes) -> list[str]:
    """Every NVIDIA wheel and torch Requires-Dist requires without an extra is in the SBOM with that line; every
    line the SBOM gives (an extra's too) is one of Requires-Dist's."""
    lines = _requirements(metadata)
    unconditional = {str(canonicalize_name(r.name)): r for r in lines if r.marker is None}
    problems = []
    named = {r.name: r for r in facts.requires}
    for name, wanted in sorted(unconditional.items()):
        if name not in named:
            problems.append(f"the SBOM names no {name}, which Requires-Dist requires ({shown(str(wanted))})")
        elif not _same(named[name].requirement, wanted):
            problems.append(
                f"the SBOM says {shown(named[name].requirement)} of {name}, where Requires-Dist says "
                f"{shown(str(wanted))}"
            )
    for name, said in sorted(named.items()):
        if said.requirement and name not in unconditional and not any(_same(said.requirement, r) for r in lines):
            problems.append(f"the SBOM requires {shown(said.requirement)}, which Requires-Dist does not")
    return problems


def _file_problems(facts: SbomFacts, record: dict[str, str]) -> list[str]:
    listed = dict(facts.files)
    problems = [f"the SBOM lists {shown(m)}, which RECORD does not" for m in sorted(listed.keys() - record.keys())]
    problems += [f"the SBOM does not list {shown(m)}, which RECORD does" for m in sorted(record.keys() - listed.keys())]
    problems += [
        f"the SBOM gives {shown(m)} the sha256 {shown(listed[m])}, RECORD {record[m]}"
        for m in sorted(listed.keys() & record.keys())
        if listed[m] != record[m]
    ]
    return problems


def source_problems(facts: SbomFacts, source: SourceIdentity) -> list[str]:
    said = facts.source
    if (said.kind, said.name, said.pinned) == (source.kind, source.name, source.pinned):
        return []
    return [
        f"the SBOM's source is {shown(said.kind)} {shown(said.name)} pinned at {shown(said.pinned)}, where the "
        f"recipe's is {source.kind} {shown(source.name)} pinned at {source.pinned}"
    ]


def link_problems(facts: SbomFacts, links: dict[str, list[str]]) -> list[str]:
    """Each distribution's files that link it, as the SBOM says and as the audit read the binaries."""
    said = {r.name: list(r.linked_by) for r in facts.requires if r.linked_by}
    return [
        f"the SBOM says {shown(', '.join(said.get(name, [])) or 'no file')} link {shown(name)}, where the audit read "
        f"{shown(', '.join(links.get(name, [])) or 'none')}"
        for name in sorted(said.keys() | links.keys())
        if sorted(said.get(name, [])) != sorted(links.get(name, []))
    ]


def sbom_problems(
    wheel: Path, source: SourceIdentity | None = None, links: dict[str, list[str]] | None = None
) -> list[str]:
    """Where the wheel's SBOM is missing, invalid, or disagrees with the wheel (and with `source` and `links`,
    where given), one line each, starting with the wheel's name."""
    try:
        facts, info, found = read_sbom(wheel)
    except BadBytes as exc:
        return [str(exc)]
    problems = []
    metadata = found.get("METADATA", b"")
    said = email.parser.Parser().parsestr(metadata.decode("utf-8", errors="replace"))
    if (canonicalize_name(facts.name), facts.version) != (canonicalize_name(str(said["Name"])), str(said["Version"])):
        problems.append(
            f"the SBOM describes {shown(facts.name)} {shown(facts.version)}, where METADATA says "
            f"{shown(str(said['Name']))} {shown(str(said['Version']))}"
        )
    problems += _requirement_problems(facts, metadata)
    problems += _file_problems(facts, _record(found.get("RECORD", b""), info))
    problems += source_problems(facts, source) if source is not None else []
    problems += link_problems(facts, links) if links is not None else []
    return [f"{shown(wheel.name)}: {p}" for p in problems]
