"""Each wheel's SBOM (PEP 770: `<dist-info>/sboms/wheelfactory.cdx.json`, CycloneDX 1.6 JSON): `document.py` (the
facts it states, written and read back with cyclonedx-python-lib, validated against its bundled schema),
`compose.py` (the facts of a repaired wheel), `checks.py` (an SBOM read back against its wheel and its recipe).
docs/sbom.md says what it holds and how to read it."""
