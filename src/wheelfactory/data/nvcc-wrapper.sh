#!/bin/sh
# wheelfactory: nvcc, run through the compiler cache when the build provides one ($WHEELFACTORY_SCCACHE).
# The real nvcc sits in ../libexec beside its nvcc.profile.
real="$(dirname "$(readlink -f "$0")")/../libexec/nvcc"
if [ -n "${WHEELFACTORY_SCCACHE:-}" ] && [ -f "$WHEELFACTORY_SCCACHE" ] && [ -x "$WHEELFACTORY_SCCACHE" ]; then
    exec "$WHEELFACTORY_SCCACHE" "$real" "$@"
fi
exec "$real" "$@"
