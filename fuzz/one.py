"""One reader under atheris: `python -m fuzz.one READER CORPUS SEEDS [libFuzzer flags]`. The readers and the
libraries they use (pyelftools, pefile, packaging, zipfile, tarfile) are instrumented for coverage; the
process's memory bound is 256 MiB over what it holds once they are loaded."""

from __future__ import annotations

import resource
import sys

import atheris

with atheris.instrument_imports():
    import tarfile  # noqa: F401  (instrumented: the readers go through them)
    import zipfile  # noqa: F401

    from fuzz import targets

MEMORY_MB = 256


def main() -> None:
    reader, corpus, seeds, *flags = sys.argv[1:]
    baseline_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    flags += [f"-rss_limit_mb={baseline_mb + MEMORY_MB}", f"-malloc_limit_mb={MEMORY_MB}"]
    atheris.Setup([sys.argv[0], *flags, corpus, seeds], lambda data: targets.run(reader, data))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
