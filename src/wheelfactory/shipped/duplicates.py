"""The variant module's duplicate check: other installed distributions (another variant, the upstream package)
that provide the same package, said at import and by `python -m`."""

from __future__ import annotations

from .variant_data import DIST_NAME


# CODE_STARTS: every variant module holds what follows, as it stands.
def _normalized(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _provides(folder: str, kind: str, package: str) -> bool:
    """Whether the installed distribution whose metadata is `folder` put files in `package`: its RECORD (a
    .dist-info), or its top_level.txt (a legacy .egg-info)."""
    import os

    listing = "RECORD" if kind == "dist-info" else "top_level.txt"
    try:
        with open(os.path.join(folder, listing), encoding="utf-8", errors="replace") as text:
            lines = text.read()
    except OSError:
        return False
    if kind == "dist-info":
        return ("\n" + lines).find(f"\n{package}/") >= 0
    return package in lines.split()


def other_distributions() -> list[str]:
    """The other installed distributions — under any sys.path entry — whose files are this package's too: two
    variants of the package (pkg-cuda12x and pkg-cuda13x), or the upstream one beside ours. Whichever was
    installed last wrote the package's files, and uninstalling either takes them away from the other."""
    import os
    import sys

    package = (__spec__.name if __spec__ else __name__).split(".")[0]
    own, found = _normalized(DIST_NAME), {}
    for entry in dict.fromkeys(e for e in sys.path if isinstance(e, str)):
        base = entry or "."
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for folder in names:
            stem, _, kind = folder.rpartition(".")
            name = _normalized(stem.split("-")[0])
            if kind not in ("dist-info", "egg-info") or name == own or name in found:
                continue
            if _provides(os.path.join(base, folder), kind, package):
                found[name] = True
    return sorted(found)


def clash(others: list[str]) -> str:
    """What to tell a user who has `others` installed beside this distribution, in one sentence."""
    package = (__spec__.name if __spec__ else __name__).split(".")[0]
    every = " ".join([DIST_NAME, *others])
    return (
        f"{DIST_NAME} and {', '.join(others)} are installed together and provide the same package '{package}': the "
        f"files imported are whichever was installed last, and uninstalling one breaks the other — run "
        f"`pip uninstall -y {every}`, then `pip install` only the one for this machine's CUDA"
    )


def _warn_of_others() -> None:
    """At import, once: a warning naming the distributions that share this package, when there are any."""
    import warnings

    others = other_distributions()
    if others:
        warnings.warn(clash(others), UserWarning, stacklevel=2)
