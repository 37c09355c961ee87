#!/usr/bin/env bash
# Runs the built test suite, the examples and hipxx-info on the CUDA backend of a machine with an
# NVIDIA GPU. The build comes from elsewhere (a build directory configured with -Dgpu_tests=true),
# so this needs no compiler: only the driver. Usage: scripts/run-on-gpu.sh BUILD_DIR [LOG_DIR]
set -uo pipefail
build=${1:?usage: run-on-gpu.sh BUILD_DIR [LOG_DIR]}
logs=${2:-$build/gpu-logs}
mkdir -p "$logs"
export HIPXX_BACKEND=cuda
# What tests/meson.build gives the multi-process tests: the peer executables they start.
export HIPXX_IPC_PEER=$build/tests/ipc_peer

passed=0
failed=0
run() {
  local name=$1
  shift
  if timeout "${HIPXX_TEST_TIMEOUT:-300}" "$@" >"$logs/$name.log" 2>&1; then
    passed=$((passed + 1))
    echo "PASS $name"
  else
    failed=$((failed + 1))
    echo "FAIL $name (exit $?)"
    tail -n 40 "$logs/$name.log"
  fi
}

export HIPXX_POOL_PEER=$build/tests/pool_peer
# What tests/meson.build gives test_rocr_stand_in: the stand-in libhsa-runtime64 and two GPU agents
# (the CUDA backend runs everything else; these name only what the ROCr backend would load).
export HIPXX_ROCR_LIBRARY=$build/tests/rocr/libhsa-runtime64.so.1
export HIPXX_STAND_IN_GPUS=2

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)

# Test cases that cannot run here are left out by their doctest suite, each for a stated reason; the
# counts of what was left out appear as "skipped" in each test's log. CI runs all of them on the host
# backend.
excluded=host-only
echo "leaving out suite host-only: tests of the host backend's own machinery (memfd, mprotect, /dev/shm)"
excluded+=,fork-child
echo "leaving out suite fork-child: the runtime used in a fork()ed child without exec, which CUDA forbids"
if [ "${gpus:-0}" -lt 3 ]; then
  excluded+=,devices-3
  echo "leaving out suite devices-3: needs three devices, this machine has ${gpus:-0}"
fi
if [ "${gpus:-0}" -lt 2 ]; then
  excluded+=,devices-2
  echo "leaving out suite devices-2: needs two devices, this machine has ${gpus:-0}"
fi

run hipxx-info "$build/tools/hipxx-info"
for test in "$build"/tests/test_*; do
  [ -x "$test" ] && [ -f "$test" ] || continue
  if grep -q doctest "$test"; then
    run "$(basename "$test")" "$test" --test-suite-exclude="$excluded"
  else
    run "$(basename "$test")" "$test"
  fi
done
run gpu-kernel-check "$build/tests/gpu/gpu-kernel-check"
run example-legacy-vmm "$build/examples/legacy_vmm"
run example-two-process-share "$build/examples/two_process_share"
run example-legacy-ipc "$build/examples/legacy_ipc"
run example-growable-array "$build/examples/growable_array"
run example-stream-pipeline "$build/examples/stream_pipeline"
echo "$passed passed, $failed failed"
