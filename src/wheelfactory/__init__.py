"""Multi-CUDA wheel factory: one source tree, one wheel per CUDA major, proven before it ships."""

__version__ = "0.1.0"
