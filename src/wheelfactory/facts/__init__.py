"""What the package index says of the factory's world — CUDA toolkit releases, torch releases and the CUDA each
is built for, CPython releases — compared with the data files, as a diff with each fact's source
(`nox -s facts`)."""
