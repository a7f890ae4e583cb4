"""RPATH entries are computed from where each binary will be installed."""

from wheelfactory.declared import origin_entry


def test_rpath_is_relative_to_where_a_binary_is_installed() -> None:
    assert origin_entry("pkg/_blas.so", "nvidia/cublas/lib", "3.12") == "$ORIGIN/../nvidia/cublas/lib"
    assert origin_entry("pkg/sub/_x.so", "nvidia/cu13/lib", "3.12") == "$ORIGIN/../../nvidia/cu13/lib"
    # Binaries outside the package directory: <dist>.data/ platlib lands in site-packages, scripts in bin/.
    assert origin_entry("pkg-1.0.data/platlib/pkg/_x.so", "nvidia/cublas/lib", "3.12") == (
        "$ORIGIN/../nvidia/cublas/lib"
    )
    assert origin_entry("pkg-1.0.data/scripts/tool", "nvidia/cu13/lib", "3.12") == (
        "$ORIGIN/../lib/python3.12/site-packages/nvidia/cu13/lib"
    )
