"""Where the package finds its library: through two helpers, as real packages do (no CDLL at module level)."""

import ctypes
import os


def _library_path() -> str:
    return os.path.join(os.path.dirname(__file__), "libvendkern.so")


def _open(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path)


def open_library() -> ctypes.CDLL:
    return _open(_library_path())
