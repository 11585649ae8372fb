#!/usr/bin/env bash
# installed_consumer.sh BUILD PREFIX INCLUDEDIR LIBDIR FC PROGRAM.f90: install BUILD into
# PREFIX (a scratch folder in the build tree), then compile PROGRAM.f90 with the Fortran
# compiler alone against the installed module and libraries, as a user would:
#   FC -I<prefix>/include/tensorhub/fortran prog.f90 -L<prefix>/lib -ltensorhub_fortran -ltensorhub
# and run it (it checks what it replicates and exits non-zero on a failure).
set -euo pipefail
build=$1 prefix=$2 incdir=$3 libdir=$4 fc=$5 program=$6
rm -rf "$prefix"
mkdir -p "$prefix"
cmake --install "$build" --prefix "$prefix" > "$prefix.install.log"
mod="$prefix/$incdir/tensorhub/fortran/tensorhub.mod"
[ -f "$mod" ] || { echo "not installed: $mod"; exit 1; }
lib="$prefix/$libdir"
[ -e "$lib/libtensorhub_fortran.so" ] || { echo "not installed: $lib/libtensorhub_fortran.so"; exit 1; }
cd "$prefix"
"$fc" -Wall -Wextra -Werror -I"$prefix/$incdir/tensorhub/fortran" -o consumer "$program" \
  -L"$lib" -ltensorhub_fortran -ltensorhub -Wl,-rpath,"$lib"
# nothing of the build tree may be needed: no TENSORHUB_REGISTRY either (embedded registry)
env -u TENSORHUB_REGISTRY ./consumer
