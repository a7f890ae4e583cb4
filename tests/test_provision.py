"""Windows import libraries are named as linkers look for them (the toolkit itself: test_toolkit.py)."""

from __future__ import annotations

import pytest

from wheelfactory.toolkit.prefix import link_name


@pytest.mark.parametrize(
    ("dll", "name"),
    [
        ("cudart64_110.dll", "cudart"),
        ("cublas64_12.dll", "cublas"),
        ("cublasLt64_13.dll", "cublasLt"),
        ("nvrtc64_120_0.dll", "nvrtc"),
        ("nvJitLink_130_0.dll", "nvJitLink"),
        ("curand64_10.dll", "curand"),
        ("nvrtc64_120_0.alt.dll", "nvrtc"),
    ],
)
def test_import_library_names_are_the_link_names(dll: str, name: str) -> None:
    assert link_name(dll) == name
