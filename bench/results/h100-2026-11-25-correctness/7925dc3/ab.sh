#!/usr/bin/env bash
# A/B of the event rows: the library of 86bd6b1 (old) and the current one (new), alternately.
export HIPXX_BACKEND=cuda
for round in $(seq 1 12); do
  echo "new $(build-gpu/bench/cuda/gpu-bench --only=event 2>&1 | grep -E '^\| event/' | awk -F'|' '{printf "%s %s %s;", $3, $4, $5}')"
  echo "old $(LD_LIBRARY_PATH=$PWD/build-gpu/old-lib build-gpu/bench/cuda/gpu-bench --only=event 2>&1 | grep -E '^\| event/' | awk -F'|' '{printf "%s %s %s;", $3, $4, $5}')"
done
