"""CycloneDX 1.6's strict JSON schema, checked as cyclonedx-python-lib checks it (its bundled schema, its registry
of the schemas that one names, its format checks), but for one keyword. jsonschema checks `uniqueItems` by
comparing every pair of items: the SBOM of a wheel of many files (CuPy: 2,446 components) took 8 s to check, and
every wheel's SBOM is checked twice (smoke tier 3, the release gate). Here the items are compared by a canonical
form in a set: the same verdict, in linear time."""

from __future__ import annotations

import functools
from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # jsonschema is imported where a document is checked: its import takes a second (a grammar
    # built for one of its format checks), and every run of the factory would pay it
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator


def canonical(value: object) -> Hashable:
    """A form two JSON values share exactly where jsonschema's `equal` holds: 1 and 1.0 alike, true and 1 not, an
    object by its members in any order, an array by its items in order."""
    if isinstance(value, bool) or value is None:
        return ("constant", value)
    if isinstance(value, dict):
        return ("object", frozenset((key, canonical(item)) for key, item in value.items()))
    if isinstance(value, list):
        return ("array", tuple(canonical(item) for item in value))
    if isinstance(value, str):
        return ("string", value)
    return ("number", value)  # int or float: 1 == 1.0, and they hash alike


def unique_items(validator: Any, unique: object, instance: object, schema: object) -> Iterator[ValidationError]:
    if unique and validator.is_type(instance, "array"):
        items = [canonical(item) for item in instance]  # type: ignore[attr-defined]
        if len(set(items)) != len(items):
            from jsonschema.exceptions import ValidationError

            yield ValidationError("has non-unique elements")  # the instance itself may be megabytes


@functools.cache
def strict_validator() -> Validator:
    """The library's validator of CycloneDX 1.6 (strict), its `uniqueItems` checked in linear time."""
    import jsonschema
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    library: Any = JsonStrictValidator(SchemaVersion.V1_6)._validator  # its schema, registry and format checker
    linear: Any = jsonschema.validators.extend(type(library), {"uniqueItems": unique_items})  # type: ignore[no-untyped-call]
    made: Validator = linear(library.schema, registry=library._registry, format_checker=library.format_checker)
    return made
