#!/usr/bin/env bash
# Builds the map probes against a hipxx build's library, on a machine with the CUDA toolkit's
# headers and driver stub (they call the driver directly, beside hipxx). The probes find the
# library through an rpath relative to themselves: OUT_DIR/../lib, so put them in a folder beside
# the build's lib (for example BUILD/probe) or pass the library's folder in LD_LIBRARY_PATH.
# Usage: bench/cuda/probes/build.sh BUILD_DIR [OUT_DIR] (OUT_DIR defaults to BUILD_DIR/probe)
set -euo pipefail
build=${1:?usage: build.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/probe}
cuda=${CUDA_HOME:-/usr/local/cuda}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
mkdir -p "$out"
for probe in cold_code map_gap map_neighbours map_slots callback_latency enqueue_cost wait_event_pipeline stream_depth; do
  g++ -std=c++20 -O2 -Wall -Wextra -I"$cuda/include" -I"$root/include" "$here/$probe.cpp" -o "$out/${probe//_/-}" \
    -L"$cuda/lib64/stubs" -lcuda -L"$build/lib" -lhipxx -Wl,-rpath,'$ORIGIN/../lib'
done
echo "built in $out: cold-code map-gap map-neighbours map-slots callback-latency enqueue-cost wait-event-pipeline stream-depth"
