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
  if timeout 300 "$@" >"$logs/$name.log" 2>&1; then
    passed=$((passed + 1))
    echo "PASS $name"
  else
    failed=$((failed + 1))
    echo "FAIL $name (exit $?)"
    tail -n 40 "$logs/$name.log"
  fi
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
run hipxx-info "$build/tools/hipxx-info"
for test in "$build"/tests/test_*; do
  [ -x "$test" ] && [ -f "$test" ] && run "$(basename "$test")" "$test"
done
run gpu-kernel-check "$build/tests/gpu/gpu-kernel-check"
run example-legacy-vmm "$build/examples/legacy_vmm"
run example-two-process-share "$build/examples/two_process_share"
run example-growable-array "$build/examples/growable_array"
echo "$passed passed, $failed failed"
