#!/bin/sh
# Written by wheelfactory into the build tree; cibuildwheel runs it once in the Linux build container, before
# any wheel is built (before-all).
#
# 1. The compiler cache: $cached/{cc,c++} (where CC and CXX point) run the image's default compilers through
#    sccache when the build provides it ($WHEELFACTORY_SCCACHE), and plainly otherwise.
# 2. nvcc refuses a host compiler newer than its release supports (crt/host_config.h): CUDA 11.8 takes GCC up
#    to 11, 12.4 up to 13. Pick the newest GCC the image has (or can install) within $WHEELFACTORY_GCC_MAX and
#    put it at $out/{gcc,g++}, where NVCC_PREPEND_FLAGS (-ccbin) and CUDAHOSTCXX point; or stop here, before
#    anything compiles, naming the compiler this CUDA release needs.
set -eu

max=${WHEELFACTORY_GCC_MAX:?the build environment sets it}
toolkit=${WHEELFACTORY_CUDA_TOOLKIT:-?}
out=/opt/wheelfactory/nvcc-host
cached=/opt/wheelfactory/cached

wrap() {  # wrap NAME COMPILER: $cached/NAME runs COMPILER, through the cache when there is one
    mkdir -p "$cached"
    {
        echo '#!/bin/sh'
        echo 'if [ -n "${WHEELFACTORY_SCCACHE:-}" ] && [ -f "$WHEELFACTORY_SCCACHE" ] && [ -x "$WHEELFACTORY_SCCACHE" ]; then'
        echo "    exec \"\$WHEELFACTORY_SCCACHE\" $2 \"\$@\""
        echo 'fi'
        echo "exec $2 \"\$@\""
    } >"$cached/$1"
    chmod 755 "$cached/$1"
}
wrap cc "$(command -v gcc)"
wrap c++ "$(command -v g++)"

gcc_major() {
    "$1" -dumpfullversion -dumpversion 2>/dev/null | cut -d. -f1
}

use() {  # use G++ GCC: point $out at them if GCC's major is within the limit
    found=$(command -v "$1" 2>/dev/null) || return 1
    version=$(gcc_major "$found") || return 1
    [ -n "$version" ] || return 1
    if [ "${WHEELFACTORY_ALLOW_UNSUPPORTED_COMPILER:-0}" != 1 ] && [ "$version" -gt "$max" ]; then
        return 1
    fi
    mkdir -p "$out"
    printf '#!/bin/sh\nexec %s "$@"\n' "$found" >"$out/g++"
    printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v "$2")" >"$out/gcc"
    chmod 755 "$out/g++" "$out/gcc"
    echo "wheelfactory: nvcc's host compiler is $found (GCC $version; CUDA $toolkit accepts GCC up to $max)"
    exit 0
}

use g++ gcc || true
n=$max
while [ "$n" -ge 8 ]; do
    use "/opt/rh/gcc-toolset-$n/root/usr/bin/g++" "/opt/rh/gcc-toolset-$n/root/usr/bin/gcc" || true
    use "g++-$n" "gcc-$n" || true
    n=$((n - 1))
done
# manylinux images (AlmaLinux) install older toolsets on demand.
if command -v dnf >/dev/null 2>&1; then
    n=$max
    while [ "$n" -ge 8 ]; do
        if dnf install -y -q "gcc-toolset-$n-gcc-c++" >/dev/null 2>&1; then
            use "/opt/rh/gcc-toolset-$n/root/usr/bin/g++" "/opt/rh/gcc-toolset-$n/root/usr/bin/gcc" || true
        fi
        n=$((n - 1))
    done
fi
echo "wheelfactory: no host compiler for nvcc $toolkit: it accepts GCC up to $max, this image has GCC" \
    "$(gcc_major g++ || echo none) — install g++-$max (Debian) or gcc-toolset-$max (manylinux) in the image," \
    "or set allow_unsupported_compiler: true in the recipe" >&2
exit 1
