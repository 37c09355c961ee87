#!/usr/bin/env bash
set -u
out=${OUT:-/tmp/out}; res=$out/res; mkdir -p "$res/runs" "$res/logs"
date -u > "$res/when.txt"
HIPXX_TEST_TIMEOUT=120 scripts/run-on-gpu.sh build-gpu "$res/logs" > "$res/suite.txt" 2>&1
grep -h "test cases:" "$res"/logs/*.log | awk -F'|' '{split($2,a," "); split($3,b," "); p+=a[1]; f+=b[1]} END {print "cases passed", p, "failed", f}' >> "$res/suite.txt"
tail -2 "$res/suite.txt"
date -u >> "$res/when.txt"
export HIPXX_BACKEND=cuda
libs=(old mid new)
for r in $(seq -w 1 12); do
  for k in 0 1 2; do
    v=${libs[$(( (10#$r + k) % 3 ))]}
    lib=$PWD/build-gpu/lib-$v; [ $v = new ] && lib=$PWD/build-gpu/lib
    LD_LIBRARY_PATH=$lib build-gpu/bench/cuda/gpu-bench --json="$res/runs/$v-$r.json" > "$res/runs/$v-$r.txt" 2>&1
  done
done
date -u >> "$res/when.txt"
for v in old mid new; do
  lib=$PWD/build-gpu/lib-$v; [ $v = new ] && lib=$PWD/build-gpu/lib
  LD_LIBRARY_PATH=$lib build-gpu/probe/map-slots 400 > "$res/map-slots-$v.txt" 2>&1
done
date -u >> "$res/when.txt"
for v in old mid new; do echo "== $v"; python3 bench/cuda/runs_summary.py "$res"/runs/$v-*.json | grep -E "vmm/Mem(Map|Unmap|SetAccess)|placement/hip"; grep hipMemMap "$res/map-slots-$v.txt"; done
tar -C "$out" -czf "$out/res.tgz" res && rm -rf "$res"
