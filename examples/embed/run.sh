#!/usr/bin/env bash
# Build router.c against an exported library and run it on standard input:
#   examples/embed/run.sh EXPORT_DIR < cases.txt
# EXPORT_DIR holds lib<name>.so, <name>.h and manifest.json (tensorcode export).
set -euo pipefail
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
    echo "usage: $0 EXPORT_DIR < cases.txt" >&2
    exit 2
fi
dir=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
libraries=("$dir"/lib*.so)
if [ ${#libraries[@]} -ne 1 ] || [ ! -f "${libraries[0]}" ]; then
    echo "$dir holds no single lib<name>.so: export one with tensorcode export" >&2
    exit 2
fi
name=$(basename "${libraries[0]}" .so)
name=${name#lib}
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
"${CC:-cc}" -O2 -std=c11 -I"$dir" -DTC_NAME="$name" -DTC_UPPER="${name^^}" \
    -DTC_HEADER="\"$name.h\"" "$here/router.c" -L"$dir" -l"$name" \
    -Wl,-rpath,"$dir" -o "$build/router"
"$build/router"
