"""The facts a wheel's SBOM states, as CycloneDX 1.6 JSON written by cyclonedx-python-lib, and read back.

Written, the same facts give the same bytes: the time is SOURCE_DATE_EPOCH's, the serial number is derived from
the document's own content, every bom-ref is a name (never a random one), and the library sorts what it writes.
Read back, an SBOM is untrusted: bounded in size, validated against the library's bundled CycloneDX 1.6 schema
(offline), and refused (BadBytes) where it is not the shape the factory writes.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, Property, XsUri
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentScope, ComponentType
from cyclonedx.model.dependency import Dependable, Dependency
from cyclonedx.model.tool import ToolRepository
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..errors import BadBytes
from ..sources import SourceIdentity
from ..untrusted.shown import shown
from .schema import strict_validator

SBOM_NAME = "wheelfactory.cdx.json"
SBOMS_DIR = "sboms"  # PEP 770: <dist-info>/sboms/
AUDITWHEEL_SBOM = "auditwheel.cdx.json"
MAX_SBOM_BYTES = 8 << 20  # read whole; a wheel of 100,000 files is under 3 MiB of it
PREFIX = "wheelfactory:"  # the properties the factory names
WHEEL_REF = "wheel"
DRIVER_REF = "driver"
SOURCE_REF = "source"
_ZERO_SERIAL = f'"serialNumber": "{uuid.UUID(int=0).urn}"'


@dataclass(frozen=True)
class Tool:
    """What took part in the build: the toolkit, nvcc and each file it came from, the compiler, the image..."""

    role: str  # cuda-toolkit, nvcc, nvcc-source, host-compiler, build-image, build, repair, factory
    name: str
    version: str = ""
    sha256: str = ""
    purl: str = ""


@dataclass(frozen=True)
class Required:
    """A distribution the wheel loads from at run time: an NVIDIA wheel, or torch."""

    name: str  # canonical
    requirement: str  # its Requires-Dist line ("" for one linked but not required: an extra's)
    built_against: str  # the version the build had ("" where none)
    linked_by: tuple[str, ...]  # the wheel's files that link its libraries, sorted

    @property
    def unconditional(self) -> bool:
        """Whether every install of the wheel brings it (a Requires-Dist line without a marker)."""
        try:
            return bool(self.requirement) and Requirement(self.requirement).marker is None
        except InvalidRequirement:
            return False


@dataclass(frozen=True)
class RunsOn:
    """The driver and GPUs the wheel's device code runs on, as the report says it."""

    minimum_driver: str  # "" where the wheel carries no device code
    why: str
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    words: str


@dataclass(frozen=True)
class Grafted:
    """A library the repair grafted into the wheel, as the repair tool's own SBOM (auditwheel) or its folder of
    vendored DLLs (delvewheel) names it."""

    name: str
    version: str
    purl: str
    by: str  # auditwheel or delvewheel


@dataclass(frozen=True)
class SbomFacts:
    name: str  # the distribution, as METADATA spells it
    version: str
    epoch: int  # SOURCE_DATE_EPOCH: the document's time
    source: SourceIdentity
    files: tuple[tuple[str, str], ...]  # (member, sha256 hex), every file but RECORD and this SBOM, sorted
    tools: tuple[Tool, ...]
    requires: tuple[Required, ...]
    runs_on: RunsOn
    grafted: tuple[Grafted, ...] = ()

    @property
    def purl(self) -> str:
        return str(PackageURL("pypi", None, canonicalize_name(self.name), self.version))


# ---------------------------------------------------------------------------------------------- writing


# RECORD and its signatures are no part of what RECORD lists; nor is the SBOM, which lists the rest.
UNLISTED = ("RECORD", "RECORD.jws", "RECORD.p7s", f"{SBOMS_DIR}/{SBOM_NAME}")


def tree_files(tree: Path) -> tuple[tuple[str, str], ...]:
    """(member, sha256) of every file of an unpacked wheel that its SBOM lists, sorted."""
    (info,) = tree.glob("*.dist-info")
    skipped = {f"{info.name}/{name}" for name in UNLISTED}
    found = []
    for path in sorted(p for p in tree.rglob("*") if p.is_file()):
        member = path.relative_to(tree).as_posix()
        if member not in skipped:
            found.append((member, hashlib.sha256(path.read_bytes()).hexdigest()))
    return tuple(sorted(found))


def relabel(tree: Path, version: str, renamed: Callable[[str], str]) -> None:
    """The SBOM of an unpacked wheel given another version (a torch train's labelled copy: its .dist-info and
    .data folders renamed by `renamed`, METADATA's Version changed) written for it: its version, its files and
    their sha256 now, the files that link each distribution under their new names. A wheel without an SBOM
    stays without one (the release gate refuses both)."""
    (info,) = tree.glob("*.dist-info")
    path = info / SBOMS_DIR / SBOM_NAME
    if not path.is_file():
        return
    where = f"{shown(info.name)}/{SBOMS_DIR}/{SBOM_NAME}"
    facts = from_json(validated(path.read_bytes(), where), where)
    requires = tuple(replace(r, linked_by=tuple(sorted(map(renamed, r.linked_by)))) for r in facts.requires)
    path.write_bytes(to_json(replace(facts, version=version, files=tree_files(tree), requires=requires)))


def _properties(**values: str) -> list[Property]:
    return [Property(name=f"{PREFIX}{key.replace('_', '-')}", value=value) for key, value in values.items() if value]


def _hashes(sha256: str, sha1: str = "") -> list[HashType]:
    found = [HashType(alg=HashAlgorithm.SHA_256, content=sha256)] if sha256 else []
    return found + ([HashType(alg=HashAlgorithm.SHA_1, content=sha1)] if sha1 else [])


def _purl(text: str) -> PackageURL | None:
    return PackageURL.from_string(text) if text else None


def _source(source: SourceIdentity) -> Component:
    """The source: an sdist (its purl and sha256), a git commit (the URL, the commit as SHA-1), or the recipe's
    folder (its content hash)."""
    purl, references, sha1, sha256 = None, [], "", ""
    if source.kind == "sdist":
        project, _, version = source.name.partition("==")
        purl = PackageURL("pypi", None, canonicalize_name(project), version, {"type": "sdist"})
        sha256 = source.pinned
    elif source.kind == "git":
        references = [ExternalReference(type=ExternalReferenceType.VCS, url=XsUri(source.name))]
        sha1 = source.pinned
    else:
        sha256 = source.pinned
    return Component(
        type=ComponentType.LIBRARY if source.kind == "sdist" else ComponentType.FILE,
        name=source.name,
        version=source.pinned if source.kind == "git" else None,
        bom_ref=SOURCE_REF,
        purl=purl,
        hashes=_hashes(sha256, sha1),
        external_references=references,
        properties=_properties(role="source", source_kind=source.kind),
    )


def _tool(tool: Tool) -> Component:
    return Component(
        type=ComponentType.CONTAINER if tool.role == "build-image" else ComponentType.APPLICATION,
        name=tool.name,
        version=tool.version or None,
        bom_ref=f"tool:{tool.role}:{tool.name}",
        purl=_purl(tool.purl),
        hashes=_hashes(tool.sha256),
        properties=_properties(role=tool.role),
    )


def _required(required: Required) -> Component:
    return Component(
        name=required.name,
        bom_ref=f"requires:{required.name}",
        purl=PackageURL("pypi", None, required.name),
        scope=ComponentScope.REQUIRED if required.unconditional else ComponentScope.OPTIONAL,
        properties=_properties(role="requires", requirement=required.requirement, built_against=required.built_against),
    )


def _driver(runs_on: RunsOn) -> Component:
    return Component(
        type=ComponentType.DEVICE_DRIVER,
        name="NVIDIA driver",
        bom_ref=DRIVER_REF,
        properties=_properties(
            role="driver",
            minimum_driver=runs_on.minimum_driver,
            minimum_driver_why=runs_on.why,
            sass=" ".join(runs_on.sass),
            ptx=" ".join(runs_on.ptx),
            runs_on=runs_on.words,
        ),
    )


def _grafted(grafted: Grafted) -> Component:
    return Component(
        name=grafted.name,
        version=grafted.version or None,
        bom_ref=f"grafted:{grafted.purl or grafted.name}",
        purl=_purl(grafted.purl),
        properties=_properties(role="grafted", grafted_by=grafted.by),
    )


def _indexed(bom: Bom) -> Bom:
    """`bom`, its dependencies registered through an index of their refs. The library finds a registered ref by a
    scan of every dependency, and its output registers each component once more (Bom.validate): a CuPy wheel's
    4,900 files took 7 s to write. The same dependencies are registered (tests/test_sbom.py holds the document to
    the library's own bytes). On the instance: the library writes only what its own Bom class declares."""
    library_s = bom.register_dependency
    by_ref: dict[str, Dependency] = {}
    seen = [0, 0]  # the id and the length of the dependencies by_ref was made from

    def index() -> dict[str, Dependency]:
        """Each registered dependency by its ref, made again where the dependencies changed other than here."""
        if seen != [id(bom.dependencies), len(bom.dependencies)]:
            by_ref.clear()
            by_ref.update((str(d.ref.value), d) for d in bom.dependencies if d.ref.value is not None)
            seen[:] = [id(bom.dependencies), len(bom.dependencies)]
        return by_ref

    def register(target: Dependable, depends_on: Iterable[Dependable] | None = None) -> None:
        if target.bom_ref.value is None:  # a ref without a value equals no other: the library's own scan
            library_s(target, depends_on)
            return
        listed = list(depends_on or ())
        found = index().get(target.bom_ref.value)
        if found is None:  # made whole before it joins the sorted set, as the library does
            found = Dependency(ref=target.bom_ref, dependencies=[Dependency(ref=d.bom_ref) for d in listed])
            bom.dependencies.add(found)
            by_ref[target.bom_ref.value] = found
            seen[1] = len(bom.dependencies)
        else:
            found.dependencies.update(Dependency(ref=d.bom_ref) for d in listed)
        for dependency in listed:
            register(dependency)

    bom.register_dependency = register  # type: ignore[method-assign]
    return bom


def _bom(facts: SbomFacts, serial: uuid.UUID | None) -> Bom:
    wheel = Component(
        name=facts.name,
        version=facts.version,
        bom_ref=WHEEL_REF,
        purl=PackageURL.from_string(facts.purl),
        properties=_properties(role="wheel"),
    )
    files = {
        member: Component(
            type=ComponentType.FILE,
            name=member,
            bom_ref=f"file:{member}",
            hashes=_hashes(sha256),
            properties=_properties(role="file"),
        )
        for member, sha256 in facts.files
    }
    required = {r.name: _required(r) for r in facts.requires}
    grafted = [_grafted(g) for g in facts.grafted]
    driver = _driver(facts.runs_on)
    bom = Bom(
        metadata=BomMetaData(
            timestamp=datetime.fromtimestamp(facts.epoch, UTC),
            tools=ToolRepository(components=[_tool(tool) for tool in facts.tools]),
            component=wheel,
        ),
        components=[_source(facts.source), *files.values(), *required.values(), driver, *grafted],
        serial_number=serial,
    )
    _indexed(bom)
    bom.register_dependency(wheel, [*files.values(), *required.values(), driver, *grafted])
    for r in facts.requires:
        for member in r.linked_by:
            bom.register_dependency(files[member], [required[r.name]])
    return bom


def to_json(facts: SbomFacts) -> bytes:
    """The SBOM's bytes: the same facts, the same bytes. Its serial number is a UUID of its own content: written
    with the zero UUID, then that one's place given the UUID of what was written (the one thing a second document
    would change; JSON escapes every quote inside a string, so the key and its value appear once, as the
    document's own)."""
    unnumbered = JsonV1Dot6(_bom(facts, uuid.UUID(int=0))).output_as_string(indent=1)
    serial = uuid.uuid5(uuid.NAMESPACE_URL, f"{facts.purl}#{hashlib.sha256(unnumbered.encode()).hexdigest()}")
    if unnumbered.count(_ZERO_SERIAL) != 1:
        raise AssertionError('the library wrote the serial number other than as `"serialNumber": "urn:uuid:…"`')
    return (unnumbered.replace(_ZERO_SERIAL, f'"serialNumber": "{serial.urn}"') + "\n").encode()


# ---------------------------------------------------------------------------------------------- reading


def validated(data: bytes, where: str) -> dict[str, object]:
    """An SBOM's JSON, checked: bounded, UTF-8, CycloneDX 1.6 by the library's bundled schema."""
    if len(data) > MAX_SBOM_BYTES:
        raise BadBytes(f"{where}: {len(data) >> 20} MiB, more than the {MAX_SBOM_BYTES >> 20} MiB an SBOM may be")
    try:
        document = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BadBytes(f"{where}: not JSON ({shown(exc)})") from None
    if not isinstance(document, dict) or document.get("specVersion") != "1.6":
        raise BadBytes(f"{where}: not a CycloneDX 1.6 document")
    try:
        error = next(strict_validator().iter_errors(document), None)
    except RecursionError:
        raise BadBytes(f"{where}: nested deeper than it can be checked") from None
    if error is not None:
        raise BadBytes(f"{where}: not valid CycloneDX 1.6: {shown(error.message)}")
    return document


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is no JSON value")


def _list(value: object) -> list[dict[str, object]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _text(component: dict[str, object], key: str) -> str:
    value = component.get(key)
    return value if isinstance(value, str) else ""


def _property(component: dict[str, object], key: str) -> str:
    name = f"{PREFIX}{key}"
    found = [_text(p, "value") for p in _list(component.get("properties")) if p.get("name") == name]
    return found[0] if found else ""


def _hash(component: dict[str, object], alg: str) -> str:
    return next((_text(h, "content") for h in _list(component.get("hashes")) if h.get("alg") == alg), "")


def _role(component: dict[str, object]) -> str:
    return _property(component, "role")


def _read_source(components: list[dict[str, object]], where: str) -> SourceIdentity:
    found = [c for c in components if _role(c) == "source"]
    if len(found) != 1:
        raise BadBytes(f"{where}: {len(found)} source components, where the factory writes one")
    source = found[0]
    kind = _property(source, "source-kind")
    pinned = _hash(source, "SHA-1" if kind == "git" else "SHA-256")
    return SourceIdentity(kind, _text(source, "name"), pinned)


def _dependencies(document: dict[str, object]) -> dict[str, list[str]]:
    return {
        _text(d, "ref"): [r for r in d.get("dependsOn", []) if isinstance(r, str)]  # type: ignore[attr-defined]
        for d in _list(document.get("dependencies"))
        if isinstance(d.get("dependsOn", []), list)
    }


def from_json(document: dict[str, object], where: str) -> SbomFacts:
    """The facts of a validated SBOM (validated()), or BadBytes where it is not the factory's shape."""
    metadata = document.get("metadata")
    wheel = metadata.get("component") if isinstance(metadata, dict) else None
    if not isinstance(metadata, dict) or not isinstance(wheel, dict) or _role(wheel) != "wheel":
        raise BadBytes(f"{where}: no wheel component in its metadata — not an SBOM the factory wrote")
    components = _list(document.get("components"))
    tools = _list(metadata["tools"].get("components")) if isinstance(metadata.get("tools"), dict) else []
    linked: dict[str, list[str]] = {}
    for ref, targets in _dependencies(document).items():
        for target in targets:
            if ref.startswith("file:") and target.startswith("requires:"):
                linked.setdefault(target.removeprefix("requires:"), []).append(ref.removeprefix("file:"))
    drivers = [c for c in components if _role(c) == "driver"] or [{}]
    timestamp = _text(metadata, "timestamp")
    try:
        epoch = int(datetime.fromisoformat(timestamp).timestamp())
    except ValueError:
        raise BadBytes(f"{where}: its timestamp {shown(timestamp)} is no time") from None
    return SbomFacts(
        name=_text(wheel, "name"),
        version=_text(wheel, "version"),
        epoch=epoch,
        source=_read_source(components, where),
        files=tuple(sorted((_text(c, "name"), _hash(c, "SHA-256")) for c in components if _role(c) == "file")),
        tools=tuple(
            Tool(_role(t), _text(t, "name"), _text(t, "version"), _hash(t, "SHA-256"), _text(t, "purl")) for t in tools
        ),
        requires=tuple(
            Required(
                _text(c, "name"),
                _property(c, "requirement"),
                _property(c, "built-against"),
                tuple(sorted(linked.get(_text(c, "name"), []))),
            )
            for c in components
            if _role(c) == "requires"
        ),
        runs_on=RunsOn(
            _property(drivers[0], "minimum-driver"),
            _property(drivers[0], "minimum-driver-why"),
            tuple(_property(drivers[0], "sass").split()),
            tuple(_property(drivers[0], "ptx").split()),
            _property(drivers[0], "runs-on"),
        ),
        grafted=tuple(
            Grafted(_text(c, "name"), _text(c, "version"), _text(c, "purl"), _property(c, "grafted-by"))
            for c in components
            if _role(c) == "grafted"
        ),
    )
