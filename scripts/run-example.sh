#!/usr/bin/env bash
# Builds hipxx and runs the growable-array example on the host backend (no GPU needed), after
# hipxx-info has said which backend and devices it found. On a fresh Debian 12 machine run it as
# root: it first installs whatever build dependency is missing with apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(meson ninja-build g++ pkg-config libboost-dev python3 ca-certificates)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else echo "run-example.sh: need root to run: $*" >&2; return 1
  fi
}

if command -v dpkg-query >/dev/null; then
  missing=()
  for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "==> installing ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  fi
fi

if [ -d build-example/meson-private ]; then
  meson setup --reconfigure build-example -Dtests=false
else
  meson setup build-example -Dtests=false
fi
meson compile -C build-example

export HIPXX_BACKEND=${HIPXX_BACKEND:-host}
echo
echo "==> build-example/tools/hipxx-info"
./build-example/tools/hipxx-info
echo
echo "==> build-example/examples/growable_array $*"
./build-example/examples/growable_array "$@"
