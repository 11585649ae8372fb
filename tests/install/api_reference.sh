#!/usr/bin/env bash
# ApiReferenceDoxygen: `cmake --build BUILD --target docs` writes the API reference, and each
# function the public headers declare is documented in it (named in the generated HTML).
set -euo pipefail
build=$1 src=$2
cmake --build "$build" --target docs > "$build/docs-build.log" 2>&1 || { tail -40 "$build/docs-build.log"; exit 1; }
html=$build/docs/api/html
[[ -f $html/index.html ]] || { echo "no $html/index.html"; exit 1; }
missing=0
for f in $(grep -ohE '^int (THUB_[A-Za-z_]+)\(' "$src"/include/tensorhub/tensorhub.h "$src"/include/tensorhub/tensorhub_mpi.h |
           sed -E 's/^int (THUB_[A-Za-z_]+)\(/\1/' | sort -u); do
  if ! grep -rqs -- ">$f<\|>$f()<\|$f(" "$html"; then
    echo "not in the reference: $f"
    missing=1
  fi
done
n=$(grep -ohE '^int THUB_[A-Za-z_]+\(' "$src"/include/tensorhub/tensorhub.h "$src"/include/tensorhub/tensorhub_mpi.h | sort -u | wc -l)
echo "API reference: $html/index.html, $n functions"
(( n > 30 )) || { echo "expected the header's functions, found $n"; exit 1; }
exit $missing
