"""The staging copy's package imports its variant module first, and stays a file that build scripts can read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from wheelfactory.build import inject_loader
from wheelfactory.declared import VARIANT_MODULE

INIT = '''"""A package whose setup.py reads its version by running this file, as pycuda's does."""
from __future__ import annotations

VERSION_TEXT = "2026.1"
'''


def test_the_loader_is_imported_by_the_package_and_skipped_when_a_build_script_execs_the_file(tmp_path: Path) -> None:
    package = tmp_path / "probe"
    package.mkdir()
    (package / "__init__.py").write_text(INIT)
    (package / VARIANT_MODULE).write_text("LOADED = True\n")
    inject_loader(package / "__init__.py")
    inject_loader(package / "__init__.py")
    text = (package / "__init__.py").read_text()
    assert text.count("from . import _cuda_variant") == 1
    assert text.index("from __future__") < text.index("_cuda_variant") < text.index("VERSION_TEXT")

    # pycuda's setup.py: exec(compile(open("pycuda/__init__.py").read(), ...), ver_dic) with an empty dict.
    version: dict[str, object] = {}
    exec(compile(text, str(package / "__init__.py"), "exec"), version)
    assert version["VERSION_TEXT"] == "2026.1" and "_cuda_variant" not in version

    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import probe, sys; print(probe._cuda_variant.LOADED, 'probe._cuda_variant' in sys.modules)",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert imported.stdout.split() == ["True", "True"]
