"""What pip resolved for the smoke, remembered for an hour: the wheels it chose for one request (NVIDIA's at the
floors or the newest; a wheel's other requirements for one Python), reused by every wheel and run that asks the
same of the same indexes while each of those wheels is still in the cache as it was sealed. The index's newest may
move within the hour: `--refresh` asks again."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from .. import host
from ..sources import index_urls
from ..untrusted.cache import reusable

RESOLUTION_TTL_S = 3600
MAX_RESOLUTION_BYTES = 64 * 1024
_refresh = False


def resolve_afresh() -> None:
    """Resolve against the index again in this process, not from an earlier run's resolution."""
    global _refresh
    _refresh = True


def wheel_folder() -> Path:
    """Where the resolved wheels are kept: the cache's, sealed as pip downloaded them."""
    return host.cache_dir() / "wheels"


def _record(asked: object) -> Path:
    text = json.dumps([asked, index_urls()])
    return host.cache_dir() / "resolutions" / f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.json"


def earlier(asked: object) -> tuple[Path, ...] | None:
    """The wheels an earlier resolution of `asked` named, where it is under an hour old and each of them is still
    in the cache as it was sealed; None otherwise (the record read as untrusted: bounded, its shape checked)."""
    record, folder = _record(asked), wheel_folder()
    try:
        if _refresh or record.stat().st_size > MAX_RESOLUTION_BYTES:
            return None
        loaded = json.loads(record.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    at, names = (loaded.get("at"), loaded.get("wheels")) if isinstance(loaded, dict) else (None, None)
    if not isinstance(at, int | float) or not 0 <= time.time() - at < RESOLUTION_TTL_S or not isinstance(names, list):
        return None
    found = []
    for name in names:
        if not isinstance(name, str) or Path(name).name != name or not name.endswith(".whl"):
            return None
        if not reusable(folder / name):
            return None
        found.append(folder / name)
    return tuple(found) or None


def remember(asked: object, found: tuple[Path, ...]) -> None:
    """Record that `asked` resolved to `found` (wheels of the cache's folder), now."""
    record = _record(asked)
    record.parent.mkdir(parents=True, exist_ok=True)
    partial = record.with_name(f".{record.name}.{os.getpid()}")
    partial.write_text(json.dumps({"at": time.time(), "asked": asked, "wheels": [w.name for w in found]}))
    partial.replace(record)
