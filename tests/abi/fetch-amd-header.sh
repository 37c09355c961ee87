#!/bin/sh
# Usage: fetch-amd-header.sh OUTDIR
#
# Puts a real AMD HIP header next to the build: downloads Debian's
# libamdhip64-dev package into OUTDIR with `apt-get download` and unpacks it
# into OUTDIR/root with `dpkg-deb -x`. Nothing is installed on the system.
# Prints the include directory (OUTDIR/root/usr/include) on success.
# Exits non-zero with a loud message when the package cannot be obtained:
# the ABI test must fail, never skip, when its reference is missing.
set -eu

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi

mkdir -p "$1"
out=$(cd "$1" && pwd)
pkg=libamdhip64-dev
inc="$out/root/usr/include"

# Already unpacked by an earlier run: reuse it.
if [ -f "$inc/hip/hip_runtime_api.h" ]; then
  echo "$inc"
  exit 0
fi

cd "$out"
rm -f ${pkg}_*.deb
log=download.log

fail() {
  echo "" >&2
  echo "*** abi test: cannot obtain the AMD reference header ($pkg) ***" >&2
  echo "*** $1" >&2
  [ -f "$log" ] && sed 's/^/    apt: /' "$log" >&2
  echo "*** The ABI comparison needs Debian's $pkg package (apt-get download);" >&2
  echo "*** check network access to the Debian archive and run 'apt-get update'." >&2
  exit 1
}

command -v apt-get >/dev/null 2>&1 || fail "apt-get not found"
command -v dpkg-deb >/dev/null 2>&1 || fail "dpkg-deb not found"

if ! apt-get download "$pkg" >"$log" 2>&1; then
  # A machine whose package lists were never fetched cannot resolve the name.
  # Refreshing the lists (not installing anything) is enough, and only root
  # may do it.
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >>"$log" 2>&1 || true
    apt-get download "$pkg" >>"$log" 2>&1 || fail "apt-get download $pkg failed"
  else
    fail "apt-get download $pkg failed"
  fi
fi

deb=$(ls ${pkg}_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || fail "apt-get reported success but no .deb was written"

rm -rf root.tmp
dpkg-deb -x "$deb" root.tmp || fail "dpkg-deb -x $deb failed"
[ -f root.tmp/usr/include/hip/hip_runtime_api.h ] ||
  fail "$deb has no usr/include/hip/hip_runtime_api.h"
dpkg-deb -f "$deb" Version >version.txt 2>/dev/null || true
rm -rf root
mv root.tmp root
echo "$inc"
