#!/usr/bin/env bash
# What including hipxx costs at compile time: the wall time to compile a translation unit that only
# includes a header, against an empty one, with the same compiler and flags (C++20, -O2).
#
# Usage: bench/include_cost.sh [source root] [compiler and flags...]
#   defaults: the repository this script is in, and ${CXX:-c++}. Runs each case RUNS times (default 5)
#   and prints the median. Also available as `ninja -C <build> include-cost` when configured with
#   -Dbench=true.
set -euo pipefail

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
shift || true
if [ "$#" -gt 0 ]; then compiler=("$@"); else compiler=(${CXX:-c++}); fi
runs=${RUNS:-5}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A case is a name and the line(s) its translation unit holds.
cases=(
  "empty|"
  "<hip/hip_runtime_api.h>|#include <hip/hip_runtime_api.h>"
  "<hipxx/error.hpp>|#include <hipxx/error.hpp>"
  "<hipxx/device.hpp>|#include <hipxx/device.hpp>"
  "<hipxx/virtual_range.hpp>|#include <hipxx/virtual_range.hpp>"
  "<hipxx/mapping.hpp>|#include <hipxx/mapping.hpp>"
  "<hipxx/fd_passing.hpp>|#include <hipxx/fd_passing.hpp>"
  "<hipxx/growable_array.hpp>|#include <hipxx/growable_array.hpp>"
  "<hipxx/hipxx.hpp>|#include <hipxx/hipxx.hpp>"
  "for scale: <boost/outcome.hpp>|#include <boost/outcome.hpp>"
  "for scale: <range/v3/all.hpp>|#include <range/v3/all.hpp>"
  "for scale: <vector> <string> <memory>|#include <vector>
#include <string>
#include <memory>"
)

now_ns() { date +%s%N; }

median_ms() {
  local source=$1 times=() start end
  for ((i = 0; i < runs; i++)); do
    start=$(now_ns)
    "${compiler[@]}" -std=c++20 -O2 -I"$root/include" -c "$source" -o "$work/out.o"
    end=$(now_ns)
    times+=($(((end - start) / 1000000)))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p"
}

echo "compiler: ${compiler[*]} ($("${compiler[0]}" --version | head -n1))"
echo "median of $runs compiles, -std=c++20 -O2"
printf '%-40s %10s %12s\n' "translation unit includes" "ms" "over empty"
baseline=
for entry in "${cases[@]}"; do
  name=${entry%%|*}
  body=${entry#*|}
  printf '%s\n' "$body" > "$work/tu.cpp"
  ms=$(median_ms "$work/tu.cpp")
  [ -z "$baseline" ] && baseline=$ms
  printf '%-40s %10d %+12d\n' "$name" "$ms" "$((ms - baseline))"
done
