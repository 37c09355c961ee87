#!/usr/bin/env bash
# User-space instructions per iteration of each bench-vmm-loop operation, under callgrind: the
# difference between a run of N+5000 iterations and one of N, divided by 5000, so start-up cancels.
# System calls count only their glibc wrappers. Usage: bench/instructions.sh BUILD_DIR [OPERATION...]
set -euo pipefail
dir=$1
shift
operations=("$@")
[ ${#operations[@]} -gt 0 ] || operations=(export-import export-import-raw reserve reserve-cxx reserve-raw)
count() {
  HIPXX_BACKEND=host valgrind --tool=callgrind --callgrind-out-file=/dev/null "$dir/bench/bench-vmm-loop" "$1" "$2" 2>&1 |
    sed -n 's/.*I *refs: *//p' | tr -d ','
}
for operation in "${operations[@]}"; do
  small=$(count "$operation" 1000)
  large=$(count "$operation" 6000)
  echo "$operation: $(((large - small) / 5000)) instructions per iteration"
done
