"""CUDA runtime: versions and devices."""

from ._loading import load

_runtime = load("cuprobe._runtime", "cudart")


def versions() -> dict[str, int]:
    """{'runtime': 12090, 'driver': 0 when no driver is installed}."""
    return _runtime.versions()


def devices() -> dict[str, object]:
    """{'count': N, 'error': None or the runtime's reason, 'devices': [...]}."""
    return _runtime.devices()
