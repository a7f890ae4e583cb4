"""What the report tells a user whose wheel a smoke layout rejected: a package that truly cannot work in a layout
(CyFES opens its library from sys.prefix, which a `pip install --target` folder has none of) fails tier 2 there
with its own traceback; the report adds how the recipe declares that layout unsupported, naming it."""

from __future__ import annotations

from types import SimpleNamespace

from wheelfactory.report import WheelRecord
from wheelfactory.smoke.results import Check, TierResult


def _tier2(layout: str, ok: bool, unsupported: str | None = None) -> TierResult:
    detail = "" if ok else "Traceback (most recent call last): ... FileNotFoundError: /usr/lib/libcyfes.so"
    return TierResult(2, layout, "floors", [Check("import cyfes → ok", ok, detail)], unsupported=unsupported)


def _record(*tiers: TierResult) -> WheelRecord:
    return WheelRecord(SimpleNamespace(), smoke=list(tiers))  # type: ignore[arg-type]  # only the tiers are read


def test_a_layout_that_failed_is_named_with_how_to_declare_it_unsupported() -> None:
    record = _record(_tier2("venv", True), _tier2("target", False), _tier2("system-site-packages", True))
    (hint,) = record.layout_hints()
    assert hint.startswith("target (installed with pip install --target DIR with DIR on PYTHONPATH")
    assert "smoke: {unsupported_layouts: {target: why}}" in hint
    # The failure itself is still the reason the wheel is kept out.
    assert record.why_not() == [f"smoke {record.smoke[1].label}: import cyfes → ok: {record.smoke[1].checks[0].detail}"]


def test_no_hint_for_the_plain_venv_nor_a_layout_already_declared() -> None:
    """Every package must work in a plain venv (the recipe cannot declare it); a declared layout is reported as such."""
    record = _record(_tier2("venv", False), _tier2("target", False, unsupported="opens its library from sys.prefix"))
    assert record.layout_hints() == []
    assert record.unsupported_layouts() == [
        "tier 2 (target, floors) is declared unsupported (opens its library from sys.prefix): it fails, as declared"
    ]


def test_one_hint_per_layout_whatever_the_versions_and_pythons() -> None:
    record = _record(_tier2("target", False), _tier2("target", False))
    assert len(record.layout_hints()) == 1
