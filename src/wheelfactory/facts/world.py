"""The facts the index holds that the data files lack, applied to those files: the diff `nox -s facts` prints,
`--write` writes and `--check` fails on. Each change carries where it was read; what no index page or wheel says
(a release's driver) is written as `to_fill` for a person."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version
from ruamel.yaml.comments import CommentedMap

from ..components import gpu_generations, platforms
from .cpython import cibuildwheel_pythons, pinned_cibuildwheel
from .data_files import DATA, MATRICES, DataFiles, add_under, flow, insert_newest_first, quoted
from .toolkits import DRIVER_SOURCE, NewToolkit, component_versions, measure, new_toolkits
from .torch import TorchRelease, torch_releases

NOT_MEASURED = "measured by `nox -s facts -- --write`"


@dataclass
class Findings:
    files: DataFiles
    sources: list[str] = field(default_factory=list)  # "what: where it was read"
    to_fill: list[str] = field(default_factory=list)  # what a person must add

    def diff(self) -> str:
        return "".join(
            "".join(
                difflib.unified_diff(self.files.before[p].splitlines(True), text.splitlines(True), f"a/{p}", f"b/{p}")
            )
            for p, text in sorted(self.files.changed().items())
        )


def _toolkit_entry(toolkit: NewToolkit, previous: dict[str, Any], archs: list[int] | None) -> CommentedMap:
    """The release's toolkits.yaml entry: what its wheels said, the defaults of the major's newest release kept
    (as far as its nvcc compiles them), the driver left for a person."""
    measured = toolkit.measured
    keep = [a for a in previous["cuda_archs"] if archs is None or a in archs]
    entry = CommentedMap(
        {
            "ptx_isa": quoted(measured.ptx_isa if measured else NOT_MEASURED),
            "to_fill": {"driver": quoted(DRIVER_SOURCE)},
            "cuda_archs": flow(keep),
        }
    )
    if "platform_archs" in previous:
        entry["platform_archs"] = CommentedMap(
            {p: flow([a for a in ds if archs is None or a in archs]) for p, ds in previous["platform_archs"].items()}
        )
    everywhere = set(toolkit.nvcc) >= {p for p in platforms()}
    entry["nvcc"] = flow(["pip"] if everywhere else ["redist"])
    entry["gcc"] = measured.gcc if measured else quoted(NOT_MEASURED)
    entry["msvc"] = quoted(measured.msvc if measured else NOT_MEASURED)
    return entry


def _add_toolkit(findings: Findings, toolkit: NewToolkit, nccl: str | None) -> None:
    files = findings.files
    releases = files[DATA / "toolkits.yaml"]["releases"]
    previous = releases[max((r for r in releases if r.startswith(f"{toolkit.major}.")), key=Version)]
    archs = toolkit.measured.archs if toolkit.measured else None
    sources = [*toolkit.sources, toolkit.measured.source if toolkit.measured else NOT_MEASURED]
    note = [
        "Read by `nox -s facts` from the index:",
        *sources,
        f"cuda_archs as {toolkit.major}'s newest release before",
    ]
    add_under(releases, toolkit.release, _toolkit_entry(toolkit, previous, archs))
    files.notes[DATA / "toolkits.yaml", f'  "{toolkit.release}":\n'] = note
    if archs is not None:
        add_under(files[DATA / "gpu_archs.yaml"], toolkit.release, flow(archs))
        files.notes[DATA / "gpu_archs.yaml", f'"{toolkit.release}": {list(archs)}\n'.replace("'", "")] = [
            f"{toolkit.release}  {toolkit.measured.source if toolkit.measured else NOT_MEASURED}"
        ]
    components = files[DATA / "cuda_components.yaml"]["components"]
    for name, spec in component_versions(toolkit, nccl).items():
        components[name]["majors"][toolkit.major]["versions"][quoted(toolkit.release)] = quoted(spec)
    findings.sources += [f"CUDA {toolkit.release}: {source}" for source in sources]
    findings.to_fill.append(f"CUDA {toolkit.release} driver (toolkits.yaml): {DRIVER_SOURCE}")
    unnamed = sorted(set(archs or []) - set(gpu_generations()))
    findings.to_fill += [f"sm_{arch}'s GPUs (gpus.yaml), first listed by CUDA {toolkit.release}" for arch in unnamed]


def _train(findings: Findings, index: str, known: set[str]) -> str | None:
    """Each CUDA major's torch train brought up to the index; the NCCL the newest torch pins (for new toolkits)."""
    nccl = None
    tag = next(p.cibw_arch for p in platforms().values() if p.os == "linux")
    read: dict[str, list[TorchRelease]] = {}  # oldest of a train -> the releases from it on
    for path in _matrices(findings.files.root):
        for cuda in findings.files[path]["cuda"]:
            train = cuda.get("torch")
            if not train:
                continue
            oldest = min((entry["release"] for entry in train), key=Version)
            for release in read.setdefault(oldest, torch_releases(index, oldest, tag)):
                nccl = nccl or release.nccl
                _train_entry(findings, path, cuda, release, known)
    return nccl


def _matrices(root: Path) -> list[Path]:
    """matrix.yaml and the offline matrix beside it, which must not drift from it but in its toolkits."""
    return [path for path in MATRICES if (root / path).is_file()]


def _train_entry(findings: Findings, path: Path, cuda: Any, release: TorchRelease, known: set[str]) -> None:
    if release.cuda is None or Version(release.cuda).major != cuda["major"]:
        return
    if release.cuda not in known:
        findings.to_fill.append(f"torch {release.newest} is built for CUDA {release.cuda}, which toolkits.yaml lacks")
        return
    train = cuda["torch"]
    current = next((entry for entry in train if entry["release"] == release.release), None)
    pythons = _train_pythons(release, list(cuda["platforms"]))
    read = [
        (f"torch {release.release} built for CUDA {release.cuda}", release.source),
        (f"torch {release.release}'s CPythons {_shown(pythons)}", release.pythons_source),
    ]
    if current is None:
        entry = flow({"release": quoted(release.release), "cuda": quoted(release.cuda), "pythons": pythons})
        insert_newest_first(train, entry, lambda e: Version(e["release"]) < Version(release.release))
    else:
        if current["cuda"] == release.cuda:
            read.pop(0)
        current["cuda"] = quoted(release.cuda)
        if _shown(current.get("pythons")) == _shown(pythons):
            read.pop()
        else:
            current["pythons"] = pythons
    findings.sources += [f"{what} ({path}): {where}" for what, where in read]


def _train_pythons(release: TorchRelease, built: list[str]) -> Any:
    """The train entry's `pythons`: one list where each of the major's platforms has the same, else one each."""
    each = {platform: flow([quoted(p) for p in release.pythons.get(platform, [])]) for platform in sorted(built)}
    lists = list(each.values())
    return lists[0] if all(listed == lists[0] for listed in lists) else flow(each)


def _shown(pythons: Any) -> str:
    """A `pythons` field as one line, to compare and to name (None: not recorded)."""
    if isinstance(pythons, dict):
        return "; ".join(f"{platform}: {', '.join(listed)}" for platform, listed in sorted(pythons.items()))
    return ", ".join(pythons) if pythons is not None else "not recorded"


def _pythons(findings: Findings, index: str, root: Path) -> None:
    version = pinned_cibuildwheel(root)
    built, source = cibuildwheel_pythons(index, version)
    cpython = findings.files[DATA / "cpython.yaml"]
    for python in [p for p in built if Version(p) > Version(cpython["newest"])]:
        cpython["newest"] = quoted(python)
        findings.sources.append(f"CPython {python} (cpython.yaml): {source} (cibuildwheel {version})")
    for path in _matrices(root):
        _matrix_pythons(findings, path, built, f"{source} (cibuildwheel {version})")


def _matrix_pythons(findings: Findings, path: Path, built: list[str], source: str) -> None:
    matrix = findings.files[path]
    for python in [p for p in built if Version(p) > Version(max(matrix["python"], key=Version))]:
        last = max(matrix["python"], key=Version)
        matrix["python"].append(quoted(python))
        # A CUDA major that skips the matrix's newest Python (its NVIDIA wheels stopped before it) skips this too.
        for rule in [r for r in matrix.get("exclude", []) if r.get("python") == last and "platform" not in r]:
            copied = {**rule, "python": quoted(python)}
            if "reason" in rule:  # "… predate CPython 3.15" says 3.16 of the copy
                copied["reason"] = quoted(rule["reason"].replace(f"CPython {last}", f"CPython {python}"))
            matrix["exclude"].append(flow(copied))
        findings.sources.append(f"CPython {python} ({path}): {source}")


def read(root: Path, index: str, *, measured: bool) -> Findings:
    """Everything the index says that the data files under `root` lack, applied in memory."""
    findings = Findings(DataFiles(root))
    releases = findings.files[DATA / "toolkits.yaml"]["releases"]
    findings.to_fill += [
        f"CUDA {name} {field} (toolkits.yaml, still): {where}"
        for name, release in releases.items()
        for field, where in release.get("to_fill", {}).items()
    ]
    toolkits = new_toolkits(index)
    known = set(releases) | {t.release for t in toolkits}
    nccl = _train(findings, index, known)
    for toolkit in toolkits:
        if measured:
            toolkit.measured = measure(toolkit)
        _add_toolkit(findings, toolkit, nccl)
    _pythons(findings, index, root)
    return findings
