#!/usr/bin/env bash
# installed_cmake_consumer.sh BUILD PREFIX FC PROGRAM.f90: install BUILD into PREFIX (a
# scratch folder in the build tree), then configure, build and run the Fortran-only CMake
# project cmake_consumer/ against it (find_package(TensorHub COMPONENTS Fortran)). Exits 77
# (skipped) when the install has no CMake package.
set -euo pipefail
build=$1 prefix=$2 fc=$3 program=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$prefix" "$prefix.build"
mkdir -p "$prefix"
cmake --install "$build" --prefix "$prefix" > "$prefix.install.log"
if ! compgen -G "$prefix/lib*/cmake/TensorHub/TensorHubConfig.cmake" > /dev/null &&
   ! compgen -G "$prefix/lib/*/cmake/TensorHub/TensorHubConfig.cmake" > /dev/null; then
  echo "skipped: this build installs no TensorHubConfig.cmake"
  exit 77
fi
cmake -S "$here/cmake_consumer" -B "$prefix.build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_Fortran_COMPILER="$fc" -DCONSUMER_SOURCE="$program" > "$prefix.configure.log" ||
  { cat "$prefix.configure.log"; exit 1; }
cmake --build "$prefix.build" > "$prefix.build.log" || { cat "$prefix.build.log"; exit 1; }
env -u TENSORHUB_REGISTRY "$prefix.build/consumer"
