#!/usr/bin/env bash
# Consumers of an installed TensorHub, each configured or compiled against the prefix only:
#   consumers.sh install   BUILD PREFIX       cmake --install BUILD --prefix PREFIX, and check what it put
#   consumers.sh cmake     PREFIX SRC WORK    find_package(TensorHub 0.1) -> a C and a C++ program
#   consumers.sh pkgconfig PREFIX SRC WORK    gcc / g++ with `pkg-config --cflags --libs tensorhub`
#   consumers.sh mpi       PREFIX SRC WORK    mpicc with the pkg-config flags, mpirun -np 2 (skips without mpicc)
#   consumers.sh version   PREFIX SRC WORK FORTRAN MPI   what find_package accepts and refuses
# The programs find the library through an RPATH to PREFIX/lib; LD_LIBRARY_PATH is cleared,
# and each program checks that the libtensorhub.so it runs lies under PREFIX (where.h).
# Exit 77: skipped.
set -euo pipefail
mode=$1
shift
unset LD_LIBRARY_PATH TENSORHUB_REGISTRY PKG_CONFIG_PATH CMAKE_PREFIX_PATH
fail() { echo "FAIL: $*" >&2; exit 1; }

case $mode in
install)
  build=$1 prefix=$2
  rm -rf "$prefix"
  cmake --install "$build" --prefix "$prefix" > "$prefix.log" || { cat "$prefix.log"; fail "cmake --install"; }
  libdir=$(cd "$prefix" && ls -d lib*/libtensorhub.so | head -1 | xargs dirname)
  for f in include/tensorhub/tensorhub.h include/tensorhub/tensorhub.hpp \
           bin/tensorhub-registry bin/tensorhub-info bin/tensorhub-demo \
           "$libdir/libtensorhub.so" "$libdir/pkgconfig/tensorhub.pc" \
           "$libdir/cmake/TensorHub/TensorHubConfig.cmake" "$libdir/cmake/TensorHub/TensorHubConfigVersion.cmake" \
           "$libdir/cmake/TensorHub/TensorHubTargets.cmake"; do
    [ -e "$prefix/$f" ] || fail "the install has no $f"
  done
  soname=$(readelf -d "$prefix/$libdir/libtensorhub.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = libtensorhub.so.0 ] || fail "SONAME is '$soname', not libtensorhub.so.0"
  [ -e "$prefix/$libdir/$soname" ] || fail "no $soname in $libdir"
  # Only THUB_* is exported (the version script).
  others=$(nm -D --defined-only "$prefix/$libdir/libtensorhub.so" | awk '$2 ~ /^[TDBRVW]$/ && $3 !~ /^THUB_/ {print $3}' | grep -v '^TENSORHUB' || true)
  [ -z "$others" ] || fail "libtensorhub.so exports more than THUB_*: $others"
  # The installed demo finds the installed library through its RPATH ($ORIGIN/../lib).
  resolved=$(ldd "$prefix/bin/tensorhub-demo" | awk '$1 ~ /^libtensorhub\.so/ {print $3}')
  [ "$(readlink -f "$resolved")" = "$(readlink -f "$prefix/$libdir/$soname")" ] ||
    fail "the installed tensorhub-demo resolves libtensorhub to '$resolved'"
  "$prefix/bin/tensorhub-registry" --help > /dev/null || fail "tensorhub-registry --help"
  echo "installed into $prefix: headers, $soname, the three programs, the CMake package, tensorhub.pc"
  ;;
cmake)
  prefix=$1 src=$2 work=$3
  rm -rf "$work" && mkdir -p "$work"
  cmake -S "$src/consumer" -B "$work" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work.log" 2>&1 ||
    { cat "$work.log"; fail "configuring the consumer project"; }
  grep -q "TensorHub 0.1.0 from $(readlink -f "$prefix")" "$work.log" || grep -q "TensorHub 0.1.0 from $prefix" "$work.log" ||
    { cat "$work.log"; fail "find_package found a TensorHub outside $prefix"; }
  cmake --build "$work" > "$work.build.log" 2>&1 || { cat "$work.build.log"; fail "building the consumer project"; }
  "$work/consumer_c" "$prefix"
  "$work/consumer_cxx" "$prefix"
  ;;
pkgconfig)
  prefix=$1 src=$2 work=$3
  rm -rf "$work" && mkdir -p "$work"
  pcdir=$(dirname "$(ls "$prefix"/lib*/pkgconfig/tensorhub.pc | head -1)")
  export PKG_CONFIG_PATH=$pcdir
  [ "$(pkg-config --modversion tensorhub)" = 0.1.0 ] || fail "pkg-config --modversion"
  # The .pc finds its prefix from where it lies (installed with --prefix, it is still right).
  [ "$(readlink -f "$(pkg-config --variable=prefix tensorhub)")" = "$(readlink -f "$prefix")" ] ||
    fail "tensorhub.pc's prefix is $(pkg-config --variable=prefix tensorhub), not $prefix"
  libdir=$(pkg-config --variable=libdir tensorhub)
  # shellcheck disable=SC2046
  gcc -std=c99 -Wall -Wextra -Werror -o "$work/consumer_c" "$src/consumer/consumer.c" \
      $(pkg-config --cflags --libs tensorhub) -Wl,-rpath,"$libdir"
  # shellcheck disable=SC2046
  g++ -std=c++17 -Wall -Wextra -Werror -o "$work/consumer_cxx" "$src/consumer/consumer.cc" \
      $(pkg-config --cflags --libs tensorhub) -Wl,-rpath,"$libdir"
  "$work/consumer_c" "$prefix"
  "$work/consumer_cxx" "$prefix"
  ;;
mpi)
  prefix=$1 src=$2 work=$3
  command -v mpicc > /dev/null || { echo "SKIP: no mpicc"; exit 77; }
  command -v mpirun > /dev/null || { echo "SKIP: no mpirun"; exit 77; }
  rm -rf "$work" && mkdir -p "$work"
  export PKG_CONFIG_PATH
  PKG_CONFIG_PATH=$(dirname "$(ls "$prefix"/lib*/pkgconfig/tensorhub.pc | head -1)")
  libdir=$(pkg-config --variable=libdir tensorhub)
  # shellcheck disable=SC2046
  mpicc -Wall -Wextra -Werror -o "$work/consumer_mpi" "$src/consumer/consumer_mpi.c" \
      $(pkg-config --cflags --libs tensorhub) -Wl,-rpath,"$libdir"
  opts=(--oversubscribe)
  if [ "$(id -u)" = 0 ]; then
    opts+=(--allow-run-as-root)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  mpirun "${opts[@]}" -np 2 "$work/consumer_mpi" "$prefix"
  ;;
version)
  prefix=$1 src=$2 work=$3 fortran=$4 mpi=$5
  rm -rf "$work" && mkdir -p "$work"
  cmake -S "$src/version" -B "$work" -DCMAKE_PREFIX_PATH="$prefix" -DEXPECT_FORTRAN="$fortran" -DEXPECT_MPI="$mpi"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
