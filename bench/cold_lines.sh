#!/usr/bin/env bash
# For each VMM call of bench-cold-path: user-space instructions and the data cache lines it misses
# (read and written) when every cache is empty, under callgrind's cache simulation with a 2 MiB
# last-level cache; first for the whole call, then for the books alone (less the host backend's
# own work: the largest inclusive cost of a hipxx::backend function inside the call, which holds
# the others it calls). Counts are the difference between 30 cycles and 10, over 20, so start-up
# cancels. Last, the distinct 64-byte lines of libhipxx's code that the call executes (over all 30
# calls, which take the same path): after a driver call each is as likely to be cold as the data
# (on the H100 a cold line of code cost 1-3 ns, one of data 1.5-3 ns: bench/RESULTS.md). Needs
# valgrind and python3.
# Usage: bench/cold_lines.sh BUILD_DIR [FUNCTION...]
set -euo pipefail
dir=$1
shift
functions=("$@")
[ ${#functions[@]} -gt 0 ] ||
  functions=(hipMemAddressReserve hipMemCreate hipMemMap hipMemSetAccess hipMemUnmap hipMemRelease hipMemAddressFree)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
profile() {
  HIPXX_BACKEND=host valgrind --tool=callgrind --cache-sim=yes --LL=2097152,16,64 --dump-instr=yes --toggle-collect="$1" \
    --callgrind-out-file="$work/$2.out" "$dir/bench/bench-cold-path" "$2" >/dev/null 2>&1
  callgrind_annotate --inclusive=yes --threshold=100 --show=Ir,DLmr,DLmw "$work/$2.out" >"$work/$2.txt" 2>/dev/null
}
printf '%-22s %24s %24s %10s\n' "" "whole call" "books alone" "libhipxx"
printf '%-22s %8s %7s %8s %8s %7s %8s %10s\n' call instr read written instr read written "code lines"
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
def code_lines(cycles):
    # Object names are compressed: "ob=(N) NAME" the first time, "ob=(N)" after; "cob=" names the
    # callee's object. Cost lines start with an instruction address: absolute (0x...), relative to
    # the one before (+N, -N) or the same (*); the line after "calls=" is the calling instruction.
    in_library = {}
    def library(text):
        match = re.match(r"\((\d+)\)(?: (.*))?", text)
        if match.group(2) is not None:
            in_library[match.group(1)] = "libhipxx" in match.group(2)
        return in_library[match.group(1)]
    lines, current, address = set(), False, 0
    position = re.compile(r"^(0x[0-9a-f]+|[+-]\d+|\*)\s")
    for line in open(f"{work}/{cycles}.out"):
        if line.startswith("ob="):
            current = library(line.strip()[3:])
        elif line.startswith("cob="):
            library(line.strip()[4:])
        elif match := position.match(line):
            token = match.group(1)
            if token.startswith("0x"):
                address = int(token, 16)
            elif token != "*":
                address += int(token)
            if current:
                lines.add(address >> 6)
    return len(lines)
print(f"{function:<22} {whole[0]:8.0f} {whole[1]:7.1f} {whole[2]:8.1f} {books[0]:8.0f} {books[1]:7.1f} {books[2]:8.1f} {code_lines(30):10d}")
PYTHON
done
