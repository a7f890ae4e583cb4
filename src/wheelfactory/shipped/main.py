"""What the variant module does when imported (loads CUDA, hooks the diagnostic, warns of duplicates) and when run
with `python -m` (says all of it). Last in every variant module."""

from __future__ import annotations

from .diagnostic import _point_at_diagnostic
from .duplicates import _warn_of_others
from .loader import _find_cuda, _own_site
from .variant_data import CUDA_MAJOR, CUDA_TOOLKIT, DIST_NAME, TORCH, TORCH_OLDEST

# CODE_STARTS: every variant module holds what follows, as it stands.
_find_cuda()
if __name__ != "__main__":
    _point_at_diagnostic()
    _warn_of_others()

if __name__ == "__main__":
    import sys as _sys

    if _sys.argv[1:] == ["--sbom"]:  # the wheel's SBOM (PEP 770), as the factory wrote it
        from importlib import metadata as _metadata

        try:
            _files = _metadata.distribution(DIST_NAME).files or []
        except _metadata.PackageNotFoundError:
            _files = []
        _sbom = [f for f in _files if f.as_posix().endswith(".dist-info/sboms/wheelfactory.cdx.json")]
        if not _sbom:
            _sys.exit(f"{DIST_NAME}: no SBOM among its installed files (.dist-info/sboms/wheelfactory.cdx.json)")
        print(_sbom[0].read_text(encoding="utf-8"), end="")
        _sys.exit(0)
    # `python -m pkg._cuda_variant` runs a second copy of this module: the package's own copy did the loading.
    _loader = _sys.modules.get(__spec__.name if __spec__ else "", _sys.modules[__name__])
    _against = f", torch {TORCH}" if TORCH else ""
    _against += f", stable ABI: torch {TORCH_OLDEST} or newer" if TORCH_OLDEST else ""
    print(f"{DIST_NAME}: built for CUDA {CUDA_MAJOR}.x (toolkit {CUDA_TOOLKIT}{_against}); package in {_own_site()}")
    for _component, _library, _path, _why in _loader.report():
        print(f"  {_component:<10} {_library:<22} {_path or '(not found)'}")
        print(f"  {'':<10} {_why}")
    _lines, _troubles = _loader.diagnose()
    _torch = _loader.torch_mismatch()
    if _torch:
        _lines.append(_torch)
    _others = _loader.other_distributions()
    if _others:
        _lines.append("installed together: " + _loader.clash(_others))
    print("\n".join(_lines))
    _sys.exit(1 if _troubles or _torch or _others else 0)
