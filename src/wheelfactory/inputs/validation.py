"""What matrix.yaml and recipe.yaml share: strict models, and validation errors turned into problems at their
file:line:col with a hint."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from ..errors import InputError, Problem
from . import yamlsource
from .references import COMMIT_HINT
from .yamlsource import Loc, SourceMap

_VERSION_RE = re.compile(r"^\d+\.\d+$")


def _version_text(value: object) -> object:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise PydanticCustomError("version_number", "expected a version string")
    if isinstance(value, str) and not _VERSION_RE.match(value):
        raise PydanticCustomError(
            "version_format", 'expected a version like "12.9" (major.minor), got {value}', {"value": repr(value)}
        )
    return value


VersionText = Annotated[str, BeforeValidator(_version_text)]


class Strict(BaseModel):
    """Unknown keys are errors (with a did-you-mean); numbers are never silently taken for text."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            allowed = sorted(f.alias or name for name, f in cls.model_fields.items())
            unknown = [k for k in data if k not in allowed]
            if unknown:
                raise PydanticCustomError("unknown_keys", "unknown keys {keys}", {"keys": unknown, "allowed": allowed})
        return data


T = TypeVar("T", bound=Strict)


@dataclass(frozen=True)
class Loaded(Generic[T]):
    value: T
    source: SourceMap


# What to say when a required key is missing, where a plain "add it" says too little.
MISSING_HINTS = {
    "sha256": "an sdist source needs sha256: the 64 lowercase hex digits of the archive",
    "rev": COMMIT_HINT,
}


# Errors of our own validators whose message already says what to do.
SELF_EXPLAINING = {"source_kind"}


def did_you_mean(word: str, choices: list[str]) -> str:
    """The choice `word` most likely meant, whatever its case (cuBLAS → cublas), else the choices."""
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1)
    return f"did you mean {by_lower[close[0]]!r}?" if close else f"expected one of: {', '.join(choices)}"


def _shown(value: object) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    return repr(value)


def _message(err: Any, loc: Loc, source: SourceMap) -> str:
    kind = err["type"]
    if kind == "version_number":
        version = source.number(loc) or str(err["input"])
        return f'expected a version string like "12.9", got the number {version} — quote it: "{version}"'
    if kind == "string_type" and (number := source.number(loc)) is not None:
        return f'expected text, got the number {number} — quote it: "{number}"'
    if kind in ("dict_type", "model_type"):
        return f"expected a mapping (key: value), got {_shown(err['input'])} — write it as a mapping"
    if kind == "list_type":
        return f"expected a list, got {_shown(err['input'])} — write it as [a, b] or one '- item' per line"
    if kind == "int_type":
        return f"expected a whole number, got {_shown(err['input'])} — write e.g. 12"
    if kind == "string_type":
        return f"expected text, got {_shown(err['input'])} — write a quoted string"
    if kind in SELF_EXPLAINING:
        return str(err["msg"])
    return f"{err['msg'][0].lower()}{err['msg'][1:]} — fix this value"


# How pydantic names the member of a union it tried (str | dict[int, str]): not a place in the file.
_UNION_MEMBER = re.compile(r"^(str|int|float|bool|list\[.*\]|dict\[.*\])$")


def problems_from(
    error: ValidationError,
    source: SourceMap,
    misspelt: frozenset[str] = frozenset(),
    set_aside: frozenset[str] = frozenset(),
) -> list[Problem]:
    """The problems of a validation error. A required key missing because it was misspelt (one of `misspelt`,
    reported as unknown already) or set aside after its value failed (`set_aside`) is not reported twice."""
    problems = []
    seen: set[Loc] = set()
    for err in error.errors():
        if err["type"] == "missing" and difflib.get_close_matches(str(err["loc"][-1]).lower(), misspelt, n=1):
            continue
        if err["type"] == "missing" and len(err["loc"]) == 1 and err["loc"][0] in set_aside:
            continue  # its value was reported and set aside
        loc: Loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or _UNION_MEMBER.match(p))))
        if loc in seen and err["type"] not in ("unknown_keys", "missing"):
            continue  # a value that fits no member of a union: the first member's complaint says enough
        seen.add(loc)
        if err["type"] == "unknown_keys":
            ctx = err["ctx"]
            for key in ctx["keys"]:
                problems.append(
                    source.problem(
                        (*loc, key), f"unknown key {key!r} — {did_you_mean(str(key), ctx['allowed'])}", key=True
                    )
                )
        elif err["type"] == "missing":
            parent, key = loc[:-1], loc[-1]
            problems.append(
                source.problem(parent, MISSING_HINTS.get(str(key), f"missing required key {key!r} — add it"))
            )
        else:
            problems.append(source.problem(loc, _message(err, loc, source)))
    return problems


def validate(model: type[T], path: Path, display: str) -> Loaded[T]:
    """The file as `model`, or InputError with every problem its YAML and its types have."""
    checked = validate_leniently(model, path, display, {})
    if checked.problems or checked.value is None:
        raise InputError(checked.problems)
    return Loaded(checked.value, checked.source)


@dataclass(frozen=True)
class Checked(Generic[T]):
    """A file validated as far as it goes: `failed` names the top-level fields that did not validate (each has
    its default or a stand-in in `value`), so that checks reading only the others can still speak."""

    value: T | None  # None when even the stand-ins cannot make a model of it (it is no mapping at all)
    source: SourceMap
    problems: list[Problem]
    failed: frozenset[str]


def validate_leniently(model: type[T], path: Path, display: str, stand_ins: dict[str, object]) -> Checked[T]:
    """Validate `path` as `model`, reporting every problem at once: a duplicate key keeps its first value, and a
    field that fails is set aside (its default, or its value in `stand_ins` when it has none) and the rest
    validated again, so that one bad field hides nothing else; an entry of a list that fails is set aside alone,
    so that the checks of the list's other entries still speak (the source map names them where they are)."""
    data, source, problems = yamlsource.load(path, display)
    if data is None:
        return Checked(
            None, source, [Problem(display, 1, 1, "the file is empty — see docs/ for its format")], frozenset()
        )
    failed: set[str] = set()
    model_keys = {f.alias or name for name, f in model.model_fields.items()}
    for _ in range(len(model.model_fields) + 2):  # each pass sets aside at least one more field
        try:
            return Checked(model.model_validate(data), source, problems, frozenset(failed))
        except ValidationError as exc:
            misspelt = frozenset(k.lower() for k in failed if k not in model_keys)
            problems += [p for p in problems_from(exc, source, misspelt, frozenset(failed)) if p not in problems]
            if _set_aside_entries(data, exc, source):
                continue
            newly = _failed_fields(exc, model)
            if not isinstance(data, dict) or not newly - failed:
                break
            failed |= newly
            data = {k: v for k, v in data.items() if k not in failed}
            data.update({k: v for k, v in stand_ins.items() if k in failed})
    return Checked(None, source, problems, frozenset(failed))


def _set_aside_entries(data: object, error: ValidationError, source: SourceMap) -> bool:
    """Remove from `data` each list entry an error is about (the innermost list on its path), renumbering the
    list in `source`; False when some error is about no list entry, so that whole fields must be set aside."""
    entries: dict[Loc, set[int]] = {}
    for err in error.errors():
        container: object = data
        path: list[str | int] = []
        entry: tuple[Loc, int] | None = None
        for part in err["loc"]:
            if isinstance(container, list) and isinstance(part, int) and 0 <= part < len(container):
                entry = (tuple(path), part)
                container = container[part]
            elif isinstance(container, dict) and part in container:
                container = container[part]
            elif isinstance(part, str) and ("[" in part or _UNION_MEMBER.match(part)):
                continue  # the member of a union pydantic tried: no place in the data
            else:
                break
            path.append(part)
        if entry is None or not entry[0]:
            return False
        entries.setdefault(entry[0], set()).add(entry[1])
    # An entry inside one that goes anyway is not removed on its own; the innermost lists go first, so that the
    # indices on the path to each are still the ones the errors name.
    inside = [w for w in entries if any(w[:n] in entries and w[n] in entries[w[:n]] for n in range(len(w)))]
    for where in inside:
        del entries[where]
    for where, indices in sorted(entries.items(), key=lambda item: -len(item[0])):
        container = data
        for part in where:
            container = container[part]  # type: ignore[index]
        assert isinstance(container, list)
        key = source.original(where)
        kept = source.renumbered.get(key, list(range(len(container))))
        for index in sorted(indices, reverse=True):
            del container[index]
            del kept[index]
        source.renumbered[key] = kept
    return True


def _failed_fields(error: ValidationError, model: type[BaseModel]) -> set[str]:
    """The top-level keys a validation error is about (unknown keys included)."""
    keys: set[str] = set()
    for err in error.errors():
        if err["type"] == "unknown_keys" and not err["loc"]:
            keys.update(str(k) for k in err["ctx"]["keys"])
        elif err["loc"]:
            keys.add(str(err["loc"][0]))
    aliases = {name: f.alias or name for name, f in model.model_fields.items()}
    return {aliases.get(k, k) for k in keys}


def display(path: Path, root: Path) -> str:
    """How a file is named in messages: relative to the project root when inside it (the file itself named, not
    where a link would lead)."""
    for inside, top in ((path.absolute(), root.absolute()), (path.parent.resolve() / path.name, root.resolve())):
        try:
            return str(inside.relative_to(top))
        except ValueError:
            continue
    return str(path)
