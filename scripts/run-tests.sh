#!/usr/bin/env bash
# Builds hipxx and runs its whole test suite four times: a normal build (benchmarks compiled too), the
# same build with the host backend's stand-in device queues, a build with AddressSanitizer and
# UndefinedBehaviorSanitizer, and one with ThreadSanitizer (whose stream, event and pool suites run
# once more on the stand-in queues). The normal and ASan+UBSan builds also run the runtime's tests on
# the ROCr backend over the stand-in libhsa-runtime64 (suite 'rocr'); TSan runs a few of those. On a fresh Debian 12 machine run it as root: it first installs
# whatever build dependency is missing with apt-get.
#
# The last line is "N passed, N failed", meson's counts over all runs, for CI to read. The exit
# status is non-zero when anything failed, including a build.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(meson ninja-build g++ pkg-config libboost-dev librange-v3-dev doctest-dev libbenchmark-dev
          python3 ca-certificates dpkg-dev)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else echo "run-tests.sh: need root to run: $*" >&2; return 1
  fi
}

install_missing() {
  if ! command -v dpkg-query >/dev/null; then
    echo "run-tests.sh: not a Debian system; assuming ${packages[*]} are installed" >&2
    return 0
  fi
  local missing=() package
  for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "==> installing ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  fi
}

# meson setup, starting over where the directory exists already.
setup() {
  local dir=$1
  shift
  if [ -d "$dir/meson-private" ]; then
    meson setup --wipe "$dir" "$@"
  else
    rm -rf "$dir"
    meson setup "$dir" "$@"
  fi
}

failed_builds=0
logs=()

# Configures, builds and tests one build directory; a failed build counts as one failure.
run_suite() {
  local name=$1 dir=$2
  shift 2
  echo
  echo "==> $name: configure and build ($dir)"
  if ! setup "$dir" "$@" || ! meson compile -C "$dir"; then
    echo "==> $name: BUILD FAILED"
    failed_builds=$((failed_builds + 1))
    return 0
  fi
  echo "==> $name: test"
  # The exit status is read from the test log below, with everything else.
  ${TEST_WRAPPER:-} meson test -C "$dir" --print-errorlogs ${MESON_TEST_ARGS:-} || true
  logs+=("$dir/meson-logs/testlog.json")
}

install_missing

# Many tests wait (for another process, a timeout, a stream's thread) more than they compute: the
# unsanitized runs take twice as many at once as there are cores. The sanitizer runs are bound by
# computation and keep meson's default of one per core.
plain_parallel="--num-processes $(($(nproc) * 2))"

MESON_TEST_ARGS=$plain_parallel run_suite "plain build" build-tests -Dtests=true -Dbench=true

# The same build again with the host backend's stand-in device queues (HIPXX_HOST_QUEUES=1): the
# runtime's device-queue path, which the CUDA backend takes on a GPU, under the whole suite.
if [ -f build-tests/build.ninja ]; then
  echo
  echo "==> plain build, device queues: test"
  HIPXX_HOST_QUEUES=1 meson test -C build-tests --print-errorlogs --logbase queues --no-suite rocr \
    $plain_parallel || true
  logs+=("build-tests/meson-logs/queues.json")
fi

# Sanitizers: stop at the first report, with a stack, and let leaks fail the test too. Built at -O0
# (buildtype=debug): sanitizer builds at -O2 take five times longer to compile, which on two cores
# is most of the time budget. For the same reason their runtime library is a unity build
# (-Dunity_library=true: half the library's compile time); the plain build above compiles each
# source alone, so a source that leans on another's includes still fails there.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:halt_on_error=1:detect_leaks=1:print_summary=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1:print_summary=1}
MESON_TEST_ARGS="--timeout-multiplier=3" \
  run_suite "ASan+UBSan build" build-asan -Dbuildtype=debug -Dtests=true -Dbench=false -Dunity_library=true \
    -Db_sanitize=address,undefined

# ThreadSanitizer: every test again, for the runtime's threads (stream workers, pool and IPC brokers).
# TSan's shadow memory needs the fixed layout that some kernels' address randomisation breaks ("unexpected
# memory mapping"), so the tests run with randomisation off where the machine lets us turn it off.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
tsan_wrapper=""
if setarch "$(uname -m)" -R true 2>/dev/null; then tsan_wrapper="setarch $(uname -m) -R"; fi
TEST_WRAPPER=$tsan_wrapper MESON_TEST_ARGS="--timeout-multiplier=4 --no-suite rocr" \
  run_suite "TSan build" build-tsan -Dbuildtype=debug -Dtests=true -Dbench=false -Dunity_library=true \
    -Db_sanitize=thread

# The stream, event and pool suites once more under TSan, on the stand-in device queues: their
# threads (a queue's, the stream's, the application's) meet through progress words and gates.
if [ -f build-tsan/build.ninja ]; then
  echo
  echo "==> TSan build, device queues: stream, event and pool tests"
  HIPXX_HOST_QUEUES=1 $tsan_wrapper meson test -C build-tsan --print-errorlogs --logbase tsan-queues \
    --timeout-multiplier=4 streams events pools cpp_streams cpp_pools || true
  logs+=("build-tsan/meson-logs/tsan-queues.json")
  # The ROCr backend's suites under TSan where its threads meet the stand-in's copy and signal-handler
  # threads through the device queues' signals (the whole 'rocr' suite runs in the plain and
  # ASan+UBSan builds; all of it here would pass CI's time budget).
  echo
  echo "==> TSan build, ROCr backend on the stand-in: concurrency, stream, event, pool and memory tests"
  $tsan_wrapper meson test -C build-tsan --print-errorlogs --logbase tsan-rocr --timeout-multiplier=4 \
    rocr-concurrency rocr-streams rocr-events rocr-pools rocr-memory || true
  logs+=("build-tsan/meson-logs/tsan-rocr.json")
fi

python3 - "$failed_builds" "${logs[@]}" <<'PY'
import json
import sys

passed = failed = skipped = 0
failed += int(sys.argv[1])  # builds that never got to run their tests
for path in sys.argv[2:]:
    try:
        with open(path, encoding="utf-8") as log:
            tests = [json.loads(line) for line in log if line.strip()]
    except (OSError, ValueError) as error:
        print(f"cannot read {path}: {error}")
        failed += 1
        continue
    for test in tests:
        result = test["result"]
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
            # CI may keep only the output's tail: name each failure here, with the end of its output.
            print(f"FAILED: {test['name']} ({result}, {test.get('duration', 0):.1f} s) in {path}")
            for line in (test.get("stdout") or "").splitlines()[-40:]:
                print(f"    {line}")
if skipped:
    print(f"({skipped} skipped)")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
