"""The SBOM as a document: the same facts give the same bytes and read back whole; what the schema or the factory's
shape refuses is refused, bounded and named on one line; and the release gate refuses a wheel whose SBOM is missing
or disagrees with it. (A real wheel's SBOM: tests/test_linux_build.py, tests/test_torch.py.)"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import jsonschema
import pytest
from auditwheel.sboms import create_sbom_for_wheel
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from wheelfactory.errors import BadBytes
from wheelfactory.sbom.checks import read_sbom, sbom_problems
from wheelfactory.sbom.compose import grafted_by_auditwheel, grafted_by_delvewheel
from wheelfactory.sbom.document import (
    MAX_SBOM_BYTES,
    Grafted,
    Required,
    RunsOn,
    SbomFacts,
    Tool,
    from_json,
    to_json,
    validated,
)
from wheelfactory.sbom.schema import unique_items
from wheelfactory.sources import SourceIdentity, folder_digest
from wheelfactory.verify import verify

from .wheelbytes import JOB, SOURCE, host_library, make_wheel, record_line, write_zip

WHEEL = "cuprobe_cuda12x-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
MODULE = "cuprobe/_runtime.cpython-312-x86_64-linux-gnu.so"
REQUIRES = (
    "Requires-Dist: nvidia-cuda-runtime-cu12<13,>=12.0\nRequires-Dist: nvidia-cublas-cu12<13,>=12.0\n"
    "Description-Content-Type: text/markdown\n\n# cuprobe\n"
)
FACTS = SbomFacts(
    name="cuprobe-cuda12x",
    version="0.1.0",
    epoch=1_700_000_000,
    source=SourceIdentity("sdist", "cuprobe==0.1.0", "a" * 64),
    files=((MODULE, "b" * 64), ("cuprobe/__init__.py", "c" * 64)),
    tools=(
        Tool("cuda-toolkit", "CUDA toolkit", "12.9"),
        Tool("nvcc-source", "cuda_nvcc", "12.9.86", "d" * 64, "pkg:generic/cuda_nvcc@12.9.86"),
        Tool("build-image", "manylinux-offline:latest", "sha256:" + "e" * 64),
    ),
    requires=(Required("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu12<13,>=12.0", "12.9.79", (MODULE,)),),
    runs_on=RunsOn("525.60.13", "CUDA 12.x minor version compatibility", ("sm_80", "sm_90"), ("compute_90",), "A100"),
    grafted=(Grafted("zlib1g", "1:1.2.13.dfsg-1", "pkg:deb/debian/zlib1g@1:1.2.13.dfsg-1", "auditwheel"),),
)


def test_the_same_facts_give_the_same_bytes_and_read_back_whole() -> None:
    written = to_json(FACTS)
    assert to_json(FACTS) == written
    document = validated(written, "sbom")
    assert document["specVersion"] == "1.6" and document["metadata"]["timestamp"] == "2023-11-14T22:13:20+00:00"
    assert document["metadata"]["component"]["purl"] == "pkg:pypi/cuprobe-cuda12x@0.1.0"
    facts = from_json(document, "sbom")
    assert facts == FACTS.__class__(**{**FACTS.__dict__, "files": tuple(sorted(FACTS.files))})
    # Another fact, another serial number; never a random one.
    other = to_json(SbomFacts(**{**FACTS.__dict__, "version": "0.1.1"}))
    assert json.loads(other)["serialNumber"] != document["serialNumber"]


def _edited(change: str) -> bytes:
    document = json.loads(to_json(FACTS))
    if change == "format":
        document["bomFormat"] = "SPDX"
    elif change == "spec":
        document["specVersion"] = "1.4"
    elif change == "hash":
        document["components"][1]["hashes"][0]["content"] = "not hex"
    elif change == "no-wheel":
        del document["metadata"]["component"]
    elif change == "twice":  # a component again, its members in another order
        document["components"].append(dict(reversed(document["components"][0].items())))
    elif change == "nan":
        document["version"] = float("nan")
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "not a CycloneDX 1.6 document"),
        (_edited("spec"), "not a CycloneDX 1.6 document"),
        (_edited("format"), "not valid CycloneDX 1.6: \"'SPDX' is not one of ['CycloneDX']\""),
        (_edited("hash"), "not valid CycloneDX 1.6: \"'not hex' does not match '^([a-fA-F0-9]{32}"),
        (_edited("no-wheel"), "no wheel component in its metadata"),
        (_edited("twice"), "not valid CycloneDX 1.6: has non-unique elements"),
        (_edited("nan"), "not JSON (NaN is no JSON value)"),
        (b" " * (MAX_SBOM_BYTES + 1), "more than the 8 MiB an SBOM may be"),
    ],
)
def test_what_is_not_a_valid_sbom_of_the_factory_s_shape_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(BadBytes) as refused:
        from_json(validated(data, "x.whl: sbom"), "x.whl: sbom")
    assert message in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "items",
    [
        [{"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}],
        [{"a": 1, "b": [1, 2]}, {"a": 1, "b": [2, 1]}],
        [1, 1.0],
        [True, 1],
        [False, 0, None, ""],
        [[True], [1]],
        [{"a": {"b": [1.0]}}, {"a": {"b": [1]}}],
        ["x", "x "],
        [[], {}],
    ],
)
def test_unique_items_in_linear_time_gives_jsonschema_s_own_verdict(items: list[object]) -> None:
    """The SBOM check's uniqueItems (sbom/schema.py) against jsonschema's pairwise one, on what tells them apart."""
    schema = {"uniqueItems": True}
    linear = jsonschema.validators.extend(jsonschema.Draft7Validator, {"uniqueItems": unique_items})(schema)
    assert linear.is_valid(items) == jsonschema.Draft7Validator(schema).is_valid(items)


def test_a_large_sbom_gets_the_library_s_own_verdict() -> None:
    """CuPy's shape: many files, each a component. The SBOM check gives the verdict of the library's validator (whose
    pairwise uniqueItems took 8 s on CuPy's 2,446), on the SBOM and on it with one component twice."""
    files = ((MODULE, "b" * 64), *((f"pkg/module_{i}.py", f"{i:064x}") for i in range(1000)))
    written = to_json(SbomFacts(**{**FACTS.__dict__, "files": files}))
    twice = json.loads(written)
    twice["components"].append(twice["components"][-1])
    library = JsonStrictValidator(SchemaVersion.V1_6)
    assert library.validate_str(written.decode()) is None
    assert len(validated(written, "sbom")["components"]) > 1000
    assert library.validate_str(json.dumps(twice)) is not None
    with pytest.raises(BadBytes, match="has non-unique elements"):
        validated(json.dumps(twice).encode(), "sbom")


def test_auditwheel_s_own_sbom_is_merged_and_one_it_did_not_write_is_refused(tmp_path: Path) -> None:
    """auditwheel's own SBOM of a library it grafts, written by auditwheel (its package named by this host's
    dpkg, as in a build image)."""
    sboms = tmp_path / "cuprobe_cuda12x-0.1.0.dist-info" / "sboms"
    sboms.mkdir(parents=True)
    library = Path("/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0")  # GCC's OpenMP runtime, which builds link
    written = create_sbom_for_wheel(WHEEL, [library])
    assert written is not None, f"dpkg names no package of {library}"
    (sboms / "auditwheel.cdx.json").write_text(json.dumps(written))
    (grafted,) = written["components"][1:]
    assert grafted_by_auditwheel(sboms.parent) == (
        Grafted("libgomp1", grafted["version"], grafted["purl"], "auditwheel"),
    )
    assert grafted["purl"].startswith("pkg:deb/")
    (sboms / "auditwheel.cdx.json").write_text('{"components": [{}, {"version": "1"}]}')
    with pytest.raises(BadBytes, match="not the CycloneDX auditwheel writes"):
        grafted_by_auditwheel(sboms.parent)


def test_delvewheel_s_dlls_are_the_grafted_ones_of_its_folder_or_of_its_renaming_at_the_top(tmp_path: Path) -> None:
    """The folder case is also held to a real delvewheel repair in tests/test_windows.py; here the layout delvewheel
    writes where a module sits at the wheel's top (its DLLs beside it, renamed), placed by hand."""
    tree = tmp_path / "tree"
    info = tree / "winprobe_cuda12x-0.1.0.dist-info"
    info.mkdir(parents=True)
    for name in ("_probe.cp312-win_amd64.pyd", "own.dll", f"helper-{'0a' * 16}.dll"):
        (tree / name).write_bytes(b"MZ")
    assert grafted_by_delvewheel(tree, info) == ()  # no DELVEWHEEL log: delvewheel did not repair it
    (info / "DELVEWHEEL").write_text("Version: 1.13.2\n")
    assert grafted_by_delvewheel(tree, info) == (Grafted("helper.dll", "", "", "delvewheel"),)
    libs = tree / "winprobe_cuda12x.libs"
    libs.mkdir()
    (libs / "msvcp140-0123456789abcdef0123456789abcdef.dll").write_bytes(b"MZ")
    (libs / "zlib.dll").write_bytes(b"MZ")  # delvewheel keeps some names (--no-mangle)
    (libs / "linked.dll").symlink_to(tree / "own.dll")
    assert grafted_by_delvewheel(tree, info) == (
        Grafted("msvcp140.dll", "", "", "delvewheel"),
        Grafted("zlib.dll", "", "", "delvewheel"),
    )


def _rewrite_sbom(wheel: Path, change: dict[str, object]) -> Path:
    """The wheel with its SBOM's facts changed, and RECORD written again for it: only the SBOM disagrees."""
    with zipfile.ZipFile(wheel) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    facts = read_sbom(wheel)[0]
    (sbom,) = [name for name in members if name.endswith("/sboms/wheelfactory.cdx.json")]
    members[sbom] = to_json(SbomFacts(**{**facts.__dict__, **change}))
    (record,) = [name for name in members if name.endswith(".dist-info/RECORD")]
    lines = [record_line(name, data) for name, data in members.items() if name != record]
    members[record] = ("\n".join([*lines, f"{record},,"]) + "\n").encode()
    return write_zip(wheel, members)


def test_the_gate_refuses_a_wheel_whose_sbom_is_missing_or_disagrees_naming_it(tmp_path: Path) -> None:
    files = {"cuprobe/__init__.py": b"", "cuprobe/libprobe.so": host_library("libcudart.so.12")}
    wheel = make_wheel(tmp_path, WHEEL, files, metadata=REQUIRES, source=SOURCE)
    assert verify([JOB], [wheel]) == []
    facts = read_sbom(wheel)[0]
    assert [r.name for r in facts.requires] == ["nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12"]

    _rewrite_sbom(wheel, {"requires": facts.requires[1:], "source": SourceIdentity("path", "source", "6" * 64)})
    assert verify([JOB], [wheel]) == [
        f"{WHEEL}: the SBOM names no nvidia-cublas-cu12, which Requires-Dist requires (nvidia-cublas-cu12<13,>=12.0)",
        f"{WHEEL}: the SBOM's source is path source pinned at {'6' * 64}, where the recipe's is path source pinned "
        f"at {'5' * 64}",
    ]
    # A file's hash, a requirement's range, and a string that would be a CI command, shown escaped on one line.
    lying = ((name, "0" * 64) for name, _ in facts.files)
    required = (Required("nvidia-cublas-cu12", "nvidia-cublas-cu12>=12.0\n::error::x", "", ()), *facts.requires[1:])
    _rewrite_sbom(wheel, {"files": tuple(lying), "requires": required})
    problems = verify([JOB], [wheel])
    assert all("\n" not in p and "\n::" not in p for p in problems), problems
    assert any("the SBOM gives cuprobe/__init__.py the sha256 0000" in p for p in problems), problems
    said = "the SBOM says 'nvidia-cublas-cu12>=12.0\\n::error::x' of nvidia-cublas-cu12, where Requires-Dist says "
    assert f"{WHEEL}: {said}nvidia-cublas-cu12<13,>=12.0" in problems

    bare = make_wheel(tmp_path, WHEEL, files, metadata=REQUIRES)
    assert verify([JOB], [bare]) == [
        f"{WHEEL}: no SBOM (cuprobe_cuda12x-0.1.0.dist-info/sboms/wheelfactory.cdx.json) — build it again"
    ]
    assert verify([{k: v for k, v in JOB.items() if k != "source"}], [wheel])[0].endswith(
        "names no source to hold its SBOM to — plan it again"
    )


def test_a_source_folder_s_hash_is_its_files_not_what_a_build_leaves_in_it(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    before = folder_digest(tmp_path)
    for left in ("build/lib/a.py", "pkg.egg-info/PKG-INFO", "pkg/__pycache__/a.pyc", ".git/HEAD"):
        (tmp_path / left).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / left).write_text("left by a build")
    assert folder_digest(tmp_path) == before
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    assert folder_digest(tmp_path) != before
    assert sbom_problems(tmp_path / "absent.whl")[0].startswith("absent.whl: ")


def _library_s_own_bytes(facts: SbomFacts, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """The SBOM as the library writes it unaided: its own Bom (a registered ref found by a scan), and a second
    document for the serial number the first one's content gives."""
    import uuid

    from cyclonedx.output.json import JsonV1Dot6

    from wheelfactory.sbom import document

    with monkeypatch.context() as patched:
        patched.setattr(document, "_indexed", lambda bom: bom)
        unnumbered = JsonV1Dot6(document._bom(facts, uuid.UUID(int=0))).output_as_string(indent=1)
        digest = hashlib.sha256(unnumbered.encode()).hexdigest()
        serial = uuid.uuid5(uuid.NAMESPACE_URL, f"{facts.purl}#{digest}")
        return (JsonV1Dot6(document._bom(facts, serial)).output_as_string(indent=1) + "\n").encode()


def test_the_sbom_of_many_files_is_the_library_s_own_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hundreds of files, some linking each NVIDIA wheel (one file two), a file named like the serial's key: the
    indexed registration and the serial put in place give the bytes the library gives unaided."""
    files = [(f"pkg/_mod{i:03d}.so", f"{i:064x}") for i in range(300)]
    files.append(('pkg/"serialNumber": "urn:uuid:00000000-0000-0000-0000-000000000000".txt', "f" * 64))
    requires = tuple(
        Required(name, f"{name}<13,>=12.0", "12.9.79", tuple(m for m, _ in files[i::7][:40]))
        for i, name in enumerate(("nvidia-cublas-cu12", "nvidia-cufft-cu12", "nvidia-cuda-runtime-cu12"))
    )
    facts = SbomFacts(**{**FACTS.__dict__, "files": tuple(sorted(files)), "requires": requires})
    written = to_json(facts)
    assert written == _library_s_own_bytes(facts, monkeypatch)
    assert validated(written, "sbom")["serialNumber"] != "urn:uuid:00000000-0000-0000-0000-000000000000"
