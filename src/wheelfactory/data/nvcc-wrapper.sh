#!/bin/sh
# wheelfactory: nvcc, run through the compiler cache when the build provides one ($WHEELFACTORY_SCCACHE).
# The real nvcc sits in ../libexec beside its nvcc.profile.
#
# nvcc names its temporary files tmpxft_<pid>_<counter>-... and one of those names ends up in the object it
# writes, so the same source compiled twice differs in a byte or two. After a successful run, that name in the
# output file is replaced by one of the same length derived from the output's own path: the same source then
# gives the same bytes, and different outputs keep different names.
real="$(dirname "$(readlink -f "$0")")/../libexec/nvcc"

# PyTorch's cpp_extension (and other builds) pass `-ccbin $CC`, and $CC is the factory's compiler-cache wrapper:
# nvcc would then run under sccache with sccache again as its host compiler, and past the host compiler the
# factory chose for this release (NVCC_PREPEND_FLAGS names it). Such a -ccbin is dropped; the factory's own choice
# (CMake hands on CUDAHOSTCXX) is kept quietly; any other is kept, and said: it replaces the factory's host
# compiler, and the report names it.
cached=/opt/wheelfactory/cached
chosen=/opt/wheelfactory/nvcc-host
held=""
for argument in "$@"; do
    shift
    option="" value=""
    if [ -n "$held" ]; then
        option="$held" value="$argument" held=""
    else
        case "$argument" in
            -ccbin | --compiler-bindir) held="$argument"; continue ;;
            -ccbin=* | --compiler-bindir=*) option="${argument%%=*}" value="${argument#*=}" ;;
            *) set -- "$@" "$argument"; continue ;;
        esac
    fi
    case "$value" in
        "$cached"/*) echo "wheelfactory: nvcc: dropped $option $value (the compiler cache's wrapper)" >&2; continue ;;
        "$chosen"/*) ;;
        *) echo "wheelfactory: nvcc: the build's own host compiler $value (its $option)" >&2 ;;
    esac
    set -- "$@" "$option" "$value"
done
[ -z "$held" ] || set -- "$@" "$held"
if [ -n "${WHEELFACTORY_SCCACHE:-}" ] && [ -f "$WHEELFACTORY_SCCACHE" ] && [ -x "$WHEELFACTORY_SCCACHE" ]; then
    set -- "$WHEELFACTORY_SCCACHE" "$real" "$@"
else
    set -- "$real" "$@"
fi
out=""
previous=""
for argument in "$@"; do
    case "$previous" in -o|--output-file) out="$argument" ;; esac
    case "$argument" in --output-file=*) out="${argument#--output-file=}" ;; -o?*) out="${argument#-o}" ;; esac
    previous="$argument"
done
"$@" || exit $?
if [ -n "$out" ] && [ -f "$out" ]; then
    name=$(printf '%08x' "$(printf '%s' "$out" | cksum | cut -d' ' -f1)")
    sed -i -E "s/tmpxft_[0-9a-f]{8}_[0-9a-f]{8}/tmpxft_${name}_00000000/g" "$out"
fi
