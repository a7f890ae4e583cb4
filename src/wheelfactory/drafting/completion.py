"""`nox -s recipe -- --from-report dist/report.json --recipe NAME`: complete a recipe from what a first build's
binaries really link and carry, as the report records them (each binary's needed libraries, module name, device
code).

What the recipe does not yet allow is added, each addition commented with what it was read from; nothing the
recipe says is taken away (a library the report does not show may still be linked on another platform). The
recipe is rewritten with its comments and layout kept (ruamel.yaml's round trip), checked as `nox -s render`
checks it, and only then replaced; the change is returned as a unified diff.

The report is untrusted input like any other: a regular file read within a size bound and parsed within a depth
bound (untrusted/trees.py), its shape checked, every name from it shown escaped — in a comment through
`yaml_comment`, so that no name can end the comment's line and start keys of its own. The recipe is read and
written only through recipes/<name>/ with no link on the way, and checked before it is completed.
"""

from __future__ import annotations

import difflib
import fnmatch
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.utils import canonicalize_name
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from ..binaries.wheelfile import MIB, unvendored
from ..components import component_table, platforms
from ..errors import BadBytes, UserError
from ..inputs import DRIVER, load_matrix, load_recipe
from ..inputs.recipe import Recipe, most_specific
from ..untrusted.shown import shown, yaml_comment
from ..untrusted.trees import parse_json, read_file, read_inside
from .checking import checked_name, write_checked
from .known import provided_libraries_of, provider_of

MAX_REPORT = 64 * 1024 * 1024  # a report of thousands of wheels is a few MiB


@dataclass
class Linked:
    """What the report shows of the recipe's binaries, over all its wheels."""

    modules: dict[str, set[str]] = field(default_factory=dict)  # module -> what it links (components, driver, torch)
    libraries: dict[str, set[str]] = field(default_factory=dict)  # shared library file name -> what it links
    device_code: list[str] = field(default_factory=list)  # modules and library file names that carry kernels
    components: dict[str, str] = field(default_factory=dict)  # component -> the first binary seen linking it
    providers: set[str] = field(default_factory=set)
    wheels: list[str] = field(default_factory=list)
    # What a CUDA-eager import raised in tier 1, where it named no CUDA library (cufinufft's loader says "Could not
    # find cufinufft library in system path"): the text the recipe's smoke.cuda_import_error may give.
    import_error: str = ""
    largest: tuple[int, str] = (0, "")  # the largest wheel's size in bytes, and its name


def report_links(report: Path, name: str) -> Linked:
    """What `report` shows of the recipe `name`'s binaries (UserError for a report that is no factory's)."""
    return linked(_entries(report, name))


def _entries(report: Path, name: str) -> list[dict[str, Any]]:
    """The report's entries for the recipe's wheels (`name-cudaNNx`): a regular file within MAX_REPORT, JSON
    nested no deeper than Python reads (untrusted/trees.py)."""
    try:
        loaded = parse_json(read_file(report, MAX_REPORT), shown(str(report)))
    except BadBytes as exc:
        raise UserError(f"{exc} — give the report a build wrote (dist/report.json)") from None
    wheels = loaded.get("wheels") if isinstance(loaded, dict) else None
    if not isinstance(wheels, list):
        raise UserError(f"{shown(str(report))}: no `wheels` list — give the report a build wrote (dist/report.json)")
    own = re.compile(rf"{re.escape(str(canonicalize_name(name)))}-cuda\d+x")
    found = [
        entry
        for entry in wheels
        if isinstance(entry, dict)
        and isinstance(entry.get("dist_name"), str)
        and own.fullmatch(str(canonicalize_name(entry["dist_name"])))
    ]
    if not found:
        raise UserError(
            f"{shown(str(report))} has no wheel of {shown(name)} — build it first "
            f"(`nox -s build-cuda12 -- --recipe {shown(name)}`)"
        )
    return found


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def linked(entries: list[dict[str, Any]]) -> Linked:
    """What each binary of the recipe's wheels links and carries. A library a repair grafted into the wheel is not
    the package's own: a CUDA one among them names a component the recipe must declare (and the repair then
    leaves out)."""
    table, found = component_table(), Linked()
    for entry in entries:
        major, platform = entry.get("cuda"), entry.get("platform")
        if not isinstance(major, int) or not isinstance(platform, str) or platform not in platforms():
            raise UserError(f"report entry {shown(entry.get('wheel'))}: no CUDA major or known platform — refused")
        os_name = platforms()[platform].os
        found.wheels.append(str(entry.get("wheel")))
        found.import_error = found.import_error or _import_error(entry)
        size = entry.get("size_bytes")
        if isinstance(size, int) and not isinstance(size, bool) and size > found.largest[0]:
            found.largest = (size, str(entry.get("wheel")))
        binaries = entry.get("binaries")
        for binary in binaries if isinstance(binaries, list) else []:
            if not isinstance(binary, dict) or not isinstance(binary.get("member"), str):
                continue
            member, module = PurePosixPath(binary["member"]), binary.get("module")
            name = unvendored(member.name)
            grafted = module is None and member.parent.name.endswith(".libs")
            links: set[str] = set()
            for library in [name] if grafted else _strings(binary.get("needed")):
                library = unvendored(library)
                owner = table.owner_of(library, major, os_name, table.names())
                if owner is not None and table.components[owner].role == "runtime":
                    links.add(owner)
                    found.components.setdefault(owner, f"{member.name} links {library}")
                elif library.lower() == table.driver.on(os_name).lower():
                    links.add(DRIVER)
                elif (provider := provider_of(library)) is not None:
                    links.add(provider)
                    found.providers.add(provider)
            if grafted:
                continue
            own = str(module) if isinstance(module, str) else name
            (found.modules if isinstance(module, str) else found.libraries).setdefault(own, set()).update(links)
            if binary.get("device_code") is True and own not in found.device_code:
                found.device_code.append(own)
    return found


# Tier 1's check of a CUDA-eager import ("import pkg → ImportError|OSError naming …"), and what it raised instead:
# ImportError or OSError itself (a subclass, ModuleNotFoundError say, is another failure), one printable line.
_EAGER_IMPORT = re.compile(r"import [\w.]+ → ImportError\|OSError\b")
_RAISED = re.compile(r"(?:ImportError|OSError): ([^\n]{1,200})")


def _import_error(entry: dict[str, Any]) -> str:
    smoke = entry.get("smoke")
    for tier in smoke if isinstance(smoke, list) else []:
        checks = tier.get("checks") if isinstance(tier, dict) and tier.get("tier") == 1 else None
        for check in checks if isinstance(checks, list) else []:
            if not isinstance(check, dict) or check.get("ok") is not False:
                continue
            name, detail = check.get("name"), check.get("detail")
            if isinstance(name, str) and isinstance(detail, str) and _EAGER_IMPORT.match(name):
                raised = _RAISED.fullmatch(detail.strip())
                if raised and raised[1].isprintable():
                    return raised[1]
    return ""


def _flow(values: list[str]) -> CommentedSeq:
    seq = CommentedSeq(values)
    seq.fa.set_flow_style()
    return seq


def _policies(data: CommentedMap, key: str) -> CommentedMap:
    policies = data.get(key)
    if not isinstance(policies, CommentedMap):
        policies = CommentedMap()
        data[key] = policies
    return policies


def _allow(policies: CommentedMap, name: str, links: set[str], what: str) -> None:
    """Let `name` link `links`: nothing when its policy already does, else its own entry with what it needs."""
    current = most_specific({str(k): [str(x) for x in v or []] for k, v in policies.items()}, name)
    if current is not None and links <= set(current):
        return
    wanted = sorted(links | set(current or []) if name in policies else links)
    policies.fa.set_block_style()  # an entry a line, each with its comment
    policies[name] = _flow(wanted)
    policies.yaml_add_eol_comment(
        yaml_comment(f"from the report: {what} links {', '.join(sorted(links)) or 'no CUDA library'}"), name
    )


def apply(data: CommentedMap, found: Linked) -> None:
    """The recipe's data with what the report shows added."""
    declared = {str(c) for c in [*data.get("components", []), *data.get("optional", [])]}
    components = data.get("components")
    if not isinstance(components, CommentedSeq):
        components = _flow([])
        data["components"] = components
    for component in sorted(set(found.components) - declared):
        components.append(component)
    if set(found.components) - declared:
        added = "; ".join(f"{c}: {found.components[c]}" for c in sorted(set(found.components) - declared))
        data.yaml_add_eol_comment(yaml_comment(f"from the report: {added}"), "components")
    modules = _policies(data, "modules")
    for module, links in sorted(found.modules.items()):
        if links:
            _allow(modules, module, links, "it")
    policies = {str(k): list(v or []) for k, v in modules.items()}
    if any(not links and most_specific(policies, module) is None for module, links in found.modules.items()):
        _allow(modules, "*", set(), "every other module")
    libraries = {name: links for name, links in found.libraries.items() if links or name in found.device_code}
    if libraries:
        shared = _policies(data, "shared_libraries")
        for name, links in sorted(libraries.items()):
            _allow(shared, name, links, "it")
    for provider in sorted(found.providers):
        provided = _policies(data, "provided_libraries")
        if provider not in provided:
            provided[provider] = provided_libraries_of(provider)
    _complete_smoke(data, found)
    _complete_size(data, found)
    device_code = data.get("device_code")
    if not isinstance(device_code, CommentedSeq):
        device_code = _flow([])
    new = [n for n in found.device_code if not any(fnmatch.fnmatchcase(n, str(p)) for p in device_code)]
    if new:
        device_code.extend(sorted(new))
        data["device_code"] = device_code
        data.yaml_add_eol_comment("from the report: these carry device code, so a build must keep it", "device_code")


def _complete_smoke(data: CommentedMap, found: Linked) -> None:
    """A CUDA-eager import whose error names no library: the text it raised, for tier 1 to expect."""
    smoke = data.get("smoke")
    if not found.import_error or not isinstance(smoke, CommentedMap) or smoke.get("cuda_at_import") is not True:
        return
    if not smoke.get("cuda_import_error"):
        smoke["cuda_import_error"] = found.import_error
        smoke.yaml_add_eol_comment(
            "from the report: tier 1's import raised this, naming no CUDA library — check that it says CUDA is missing",
            "cuda_import_error",
        )


def _complete_size(data: CommentedMap, found: Linked) -> None:
    """A wheel over the recipe's size limit: the limit that lets it through, for the user to decide — PyPI takes a
    file over its default of 100 MiB only once it raised the project's limit."""
    size, wheel = found.largest
    limit = data.get("size_limit_mb", Recipe.model_fields["size_limit_mb"].default)
    if not isinstance(limit, int) or size <= limit * MIB:
        return
    data["size_limit_mb"] = math.ceil(size / MIB)
    data.yaml_add_eol_comment(
        yaml_comment(
            f"DECIDE: from the report: {wheel} is {size / MIB:.1f} MiB, over the {limit} MiB limit — keep this once "
            "PyPI raised the project's limit (or publish elsewhere), else narrow cuda_archs"
        ),
        "size_limit_mb",
    )


def _yaml() -> YAML:
    yaml = YAML()  # round trip: comments, order and flow style kept
    yaml.preserve_quotes = True
    yaml.width = 120
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def completed(before: str, found: Linked) -> str:
    """A recipe's text (one that passed the recipe's checks) with what the report shows added, its comments and
    layout kept."""
    yaml = _yaml()
    data = yaml.load(before)
    if not isinstance(data, CommentedMap):
        raise UserError("the recipe is not a mapping — fix it, or draft it afresh")
    apply(data, found)
    written = io.StringIO()
    yaml.dump(data, written)
    return written.getvalue()


def _recipe_text(name: str, root: Path) -> str:
    """recipes/<name>/recipe.yaml, reached through no link, once it passes the recipe's checks (what the
    completion then reads of it has the shape they hold it to)."""
    relative = f"recipes/{checked_name(name, '--recipe')}/recipe.yaml"
    try:
        data = read_inside(root, relative)
        text = data.decode("utf-8") if data is not None else None
    except (BadBytes, UnicodeDecodeError) as exc:
        raise UserError(f"{relative}: cannot read it ({exc}) — draft it afresh") from None
    if text is None:
        raise UserError(f"{relative}: no such recipe — draft it first (`nox -s recipe -- NAME==VERSION`)")
    load_recipe(root / relative, root, load_matrix(root / "matrix.yaml", root).value)
    return text


def complete_recipe(report: Path, name: str, root: Path) -> tuple[Path, str]:
    """Complete recipes/<name>/recipe.yaml from `report`; (its path, the unified diff of the change, empty when
    the recipe already allowed everything the report shows)."""
    before = _recipe_text(name, root)
    path = root / "recipes" / name / "recipe.yaml"
    after = completed(before, report_links(report, name))
    if after == before:
        return path, ""
    write_checked(after, name, root)
    diff = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), str(path.relative_to(root)), "completed"
    )
    return path, "".join(diff)
