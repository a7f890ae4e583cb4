"""When one Python's installs serve another's machine in the same smoke container.

A wheel that serves several Pythons (abi3, py3-none) is smoke-tested on the oldest and the newest of them. pip
installs the same files on the newest as on the oldest when the same pip installs the same wheel files there — the
requirements pip resolved for each Python are the same wheels — and the wheel admits that Python (its
Requires-Python and its tags, which pip checks before anything else). Then the newest's venvs get a copy of the
oldest's install (copier.py: only the folders pip's scheme names for the version differ), and, where no wheel among
them installs a script (whose first line names the interpreter that ran pip) or a header (which pip puts under
include/site/python3.X/ even there), its tiers use the very --target folders pip filled on the oldest: nothing else
in such a folder depends on the Python that ran pip. Otherwise pip runs on each Python.
tests/test_layouts.py holds both against pip's own installs on the other Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import compatible_tags, cpython_tags

from ..binaries.wheelfile import WheelMetadata, members, read_member
from ..untrusted.shown import shown
from .machines import ContainerMachine
from .results import Check

# The sections of entry_points.txt from which pip writes a script into bin/.
SCRIPT_SECTIONS = ("[console_scripts]", "[gui_scripts]")


@dataclass(frozen=True)
class Sharing:
    """How another Python's machine takes the installs of the first Python's."""

    check: Check  # why pip would install the same files on it
    folders: bool  # the --target folders too: no wheel installed there writes a script or a header


def requirement_wheels(found: Path | None) -> list[Path]:
    """The wheels of a Python's requirements folder (download_requirements), by name."""
    return sorted(found.glob("*.whl"), key=lambda w: w.name) if found else []


def sharing(
    wheel: WheelMetadata, first: ContainerMachine, other: ContainerMachine, found: dict[str, Path | None]
) -> Sharing | None:
    """How `other` (its venvs made) may take what pip installed on `first`, or None where pip must run on it too."""
    ours, theirs = requirement_wheels(found[first.python]), requirement_wheels(found[other.python])
    if other.torch_pins or first.torch_pins or [w.name for w in ours] != [w.name for w in theirs]:
        return None
    if first.pip is None or first.pip != other.pip or other.version is None:
        return None
    name = wheel.name
    declared = wheel.fields.get("Requires-Python") or ""
    try:
        requires_python = SpecifierSet(declared)
    except InvalidSpecifier:
        return None  # pip refuses it on either Python: let it say so
    major, minor = (int(part) for part in other.python.split("."))
    platforms = sorted({tag.platform for tag in name.tags})
    supported = {
        *cpython_tags((major, minor), platforms=platforms),
        *compatible_tags((major, minor), f"cp{major}{minor}", platforms),
    }
    if not requires_python.contains(other.version, prereleases=True) or not name.tags & supported:
        return None
    listed = ", ".join(w.name for w in ours) or "none"
    check = Check(
        f"pip would install on Python {other.python} what it installed on Python {first.python}",
        True,
        f"the same {first.pip} and requirement wheels ({shown(listed)}); Requires-Python {shown(declared or 'none')} "
        f"and the tag {name.python_tag}-{name.platform_tag} admit CPython {other.version}",
    )
    return Sharing(check, not any(differs_by_python(w) for w in (wheel.path, *ours)))


def differs_by_python(wheel: Path) -> bool:
    """Whether pip's --target install of `wheel` depends on the Python that runs it: a script (one in its
    .data/scripts/, or an entry point of a console or GUI script), or a header (its .data/headers/)."""
    listed = members(wheel)
    data = {tuple(member.split("/")[1:2]) for member in listed if member.split("/")[0].endswith(".data")}
    if data & {("scripts",), ("headers",)}:
        return True
    for member in listed:
        if member.count("/") == 1 and member.endswith(".dist-info/entry_points.txt"):
            entry_points = read_member(wheel, member) or ""
            if any(line.strip() in SCRIPT_SECTIONS for line in entry_points.splitlines()):
                return True
    return False
