#!/usr/bin/env bash
# For each VMM call of bench-cold-path: user-space instructions and the data cache lines it misses
# (read and written) when every cache is empty, under callgrind's cache simulation with a 2 MiB
# last-level cache. Counts are the difference between 30 cycles and 10, over 20, so start-up
# cancels. The host backend's own work (its system calls' wrappers and its books) is included.
# Usage: bench/cold_lines.sh BUILD_DIR [FUNCTION...]
set -euo pipefail
dir=$1
shift
functions=("$@")
[ ${#functions[@]} -gt 0 ] ||
  functions=(hipMemAddressReserve hipMemCreate hipMemMap hipMemSetAccess hipMemUnmap hipMemRelease hipMemAddressFree)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
totals() {
  HIPXX_BACKEND=host valgrind --tool=callgrind --cache-sim=yes --LL=2097152,16,64 --toggle-collect="$1" \
    --callgrind-out-file="$work/out" "$dir/bench/bench-cold-path" "$2" >/dev/null 2>&1
  # Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
  sed -n 's/^summary: *//p;s/^totals: *//p' "$work/out" | head -n 1
}
printf '%-22s %12s %16s %16s\n' call instructions "lines read" "lines written"
for function in "${functions[@]}"; do
  read -r -a small <<<"$(totals "$function" 10)"
  read -r -a large <<<"$(totals "$function" 30)"
  per_call() { awk -v a="${small[$1]}" -v b="${large[$1]}" 'BEGIN { printf "%.1f", (b - a) / 20 }'; }
  printf '%-22s %12s %16s %16s\n' "$function" "$(per_call 0)" "$(per_call 7)" "$(per_call 8)"
done
