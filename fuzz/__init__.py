"""Fuzzing the readers of untrusted bytes (`nox -s fuzz`): coverage-guided with atheris (libFuzzer), one process a
reader, seeded with real binaries built here and the hostile cases the tests write byte by byte."""
