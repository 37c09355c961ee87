#!/usr/bin/env bash
# For each VMM call of bench-cold-path: user-space instructions and the data cache lines it misses
# (read and written) when every cache is empty, under callgrind's cache simulation with a 2 MiB
# last-level cache; first for the whole call, then for the books alone (less the host backend's
# own work: the largest inclusive cost of a hipxx::backend function inside the call, which holds
# the others it calls). Counts are the difference between 30 cycles and 10, over 20, so start-up
# cancels. Needs valgrind and python3. Usage: bench/cold_lines.sh BUILD_DIR [FUNCTION...]
set -euo pipefail
dir=$1
shift
functions=("$@")
[ ${#functions[@]} -gt 0 ] ||
  functions=(hipMemAddressReserve hipMemCreate hipMemMap hipMemSetAccess hipMemUnmap hipMemRelease hipMemAddressFree)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
profile() {
  HIPXX_BACKEND=host valgrind --tool=callgrind --cache-sim=yes --LL=2097152,16,64 --toggle-collect="$1" \
    --callgrind-out-file="$work/$2.out" "$dir/bench/bench-cold-path" "$2" >/dev/null 2>&1
  callgrind_annotate --inclusive=yes --threshold=100 --show=Ir,DLmr,DLmw "$work/$2.out" >"$work/$2.txt" 2>/dev/null
}
printf '%-22s %24s %24s\n' "" "whole call" "books alone"
printf '%-22s %8s %7s %8s %8s %7s %8s\n' call instr read written instr read written
for function in "${functions[@]}"; do
  profile "$function" 10
  profile "$function" 30
  python3 - "$work" "$function" <<'PYTHON'
import re, sys
work, function = sys.argv[1], sys.argv[2]
row = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+([\d,.]+)(?:\s+\([^)]*\))?\s+([\d,.]+)(?:\s+\([^)]*\))?\s+(\S.*)$")
def number(text):
    return 0 if text == "." else int(text.replace(",", ""))
def costs(cycles):
    total, backend = None, (0, 0, 0)
    for line in open(f"{work}/{cycles}.txt"):
        match = row.match(line)
        if not match:
            continue
        values = tuple(number(match.group(i)) for i in (1, 2, 3))
        name = match.group(4)
        if "PROGRAM TOTALS" in name:
            total = values
        elif "hipxx::backend::" in name and values[0] > backend[0]:
            backend = values
    return total, backend
(small_total, small_backend), (large_total, large_backend) = costs(10), costs(30)
whole = [(l - s) / 20 for l, s in zip(large_total, small_total)]
books = [w - (lb - sb) / 20 for w, lb, sb in zip(whole, large_backend, small_backend)]
print(f"{function:<22} {whole[0]:8.0f} {whole[1]:7.1f} {whole[2]:8.1f} {books[0]:8.0f} {books[1]:7.1f} {books[2]:8.1f}")
PYTHON
done
