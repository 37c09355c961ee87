#!/usr/bin/env bash
# What the README's "Installing" section promises: installed into a staging root, hipxx builds a C99
# program and a C++20 one with nothing but what `pkg-config hipxx` says (the compiler gets no path
# into this source tree), and they run against the installed library.
# Usage: consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

meson install -C "$build" --no-rebuild --quiet --destdir "$stage/root"
pc=$(find "$stage/root" -name hipxx.pc)
[ -n "$pc" ] || { echo "no hipxx.pc installed" >&2; exit 1; }
# The sysroot puts the staging root in front of the paths the file names, as installed under it.
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$stage/root
cflags=$(pkg-config --cflags hipxx)
libs=$(pkg-config --libs hipxx)
libdir=$(pkg-config --libs-only-L hipxx | sed 's/^ *-L//; s/ *$//')  # with the sysroot in front
echo "pkg-config: $cflags $libs"

cc -std=c99 -pedantic -Werror $cflags "$source/examples/legacy_vmm.c" $libs -o "$stage/legacy_vmm"
c++ -std=c++20 -Werror $cflags "$source/examples/growable_array.cpp" $libs -o "$stage/growable_array"

# Each program must load the installed library, not the build's.
for program in legacy_vmm growable_array; do
  loaded=$(LD_LIBRARY_PATH=$libdir ldd "$stage/$program" | awk '/libhipxx/ {print $3}')
  [ "$loaded" = "$libdir/libhipxx.so.0" ] || { echo "$program loads '$loaded'" >&2; exit 1; }
done
LD_LIBRARY_PATH=$libdir HIPXX_BACKEND=host "$stage/legacy_vmm"
LD_LIBRARY_PATH=$libdir HIPXX_BACKEND=host "$stage/growable_array" 64
