#!/bin/sh
# Written by wheelfactory into the build tree; runs in the Linux build container after each wheel's repair.
# Leaves the compiler cache's running totals where the host reads them ($WHEELFACTORY_COMPILER_CACHE_STATS,
# a host path seen under /host); the last wheel's are the run's.
set -eu
if [ -n "${WHEELFACTORY_SCCACHE:-}" ] && [ -f "$WHEELFACTORY_SCCACHE" ] && [ -n "${WHEELFACTORY_COMPILER_CACHE_STATS:-}" ]; then
    "$WHEELFACTORY_SCCACHE" --show-stats --stats-format=json >"/host$WHEELFACTORY_COMPILER_CACHE_STATS"
fi
