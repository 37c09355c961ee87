#!/usr/bin/env bash
# Builds hipxx with profile-guided optimisation (GCC), in three steps:
#
#   scripts/pgo.sh instrument BUILD [MESON_OPTION...]
#       a release build in BUILD that records where its time goes (b_pgo=generate);
#   scripts/pgo.sh train BUILD [COMMAND...]
#       runs COMMAND (by default the build's test suite) with that build; each process adds its
#       counts to the profile, BUILD's .gcda files. With PGO_PROFILE_DIR set, the profile goes
#       there instead (GCOV_PREFIX), for a training run on another machine than the build's: carry
#       BUILD and the source tree there, train, and bring the directory back;
#   scripts/pgo.sh optimise BUILD [PROFILE_DIR]
#       takes the profile (from PROFILE_DIR if given), then rebuilds BUILD with it (b_pgo=use).
#
# Why: a VMM call that wraps a sub-microsecond driver call runs after that driver has pushed most of
# the library's code out of the caches, and each cold line of code costs a few nanoseconds. With a
# profile, GCC lays the paths that run out in a straight line and moves the rest (error handling,
# tree rebalancing) away, so a call touches fewer lines. Train where the build will run and on what
# it will do there: the profile's most frequent backend is the one the virtual calls are guessed
# for. On a GPU machine, for instance:
#   PGO_PROFILE_DIR=/tmp/profile scripts/pgo.sh train BUILD \
#     bash -c 'scripts/run-on-gpu.sh BUILD && BUILD/bench/cuda/gpu-bench'
set -euo pipefail

# Paths the caller gives are taken from where it stands; the script then works from the source tree.
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
self=$(absolute "$0")

usage() {
  sed -n '2,14p' "$self" >&2
  exit 64
}

[ $# -ge 2 ] || usage
step=$1
build=$(absolute "$2")
shift 2
[ -z "${PGO_PROFILE_DIR:-}" ] || PGO_PROFILE_DIR=$(absolute "$PGO_PROFILE_DIR")
[ "$step" != optimise ] || [ $# -eq 0 ] || set -- "$(absolute "$1")"
cd "$(dirname "$0")/.."

# The directory the profile files name (the build's absolute path when it was instrumented), so a
# training run elsewhere can strip it (GCOV_PREFIX_STRIP).
recorded_path() { cat "$build/pgo-build-path"; }

case $step in
  instrument)
    if [ -d "$build/meson-private" ]; then
      meson setup --wipe "$build" -Dbuildtype=release -Db_pgo=generate "$@"
    else
      meson setup "$build" -Dbuildtype=release -Db_pgo=generate "$@"
    fi
    find "$build" -name '*.gcda' -delete
    (cd "$build" && pwd -P) >"$build/pgo-build-path"
    meson compile -C "$build"
    ;;
  train)
    [ -f "$build/pgo-build-path" ] || { echo "pgo.sh: $build was not instrumented here" >&2; exit 1; }
    if [ -n "${PGO_PROFILE_DIR:-}" ]; then
      mkdir -p "$PGO_PROFILE_DIR"
      export GCOV_PREFIX=$PGO_PROFILE_DIR
      GCOV_PREFIX_STRIP=$(recorded_path | tr -cd / | wc -c)
      export GCOV_PREFIX_STRIP
    fi
    if [ $# -eq 0 ]; then set -- meson test -C "$build" --no-rebuild; fi
    "$@"
    ;;
  optimise)
    [ -f "$build/pgo-build-path" ] || { echo "pgo.sh: $build was not instrumented here" >&2; exit 1; }
    if [ $# -ge 1 ]; then
      (cd "$1" && find . -name '*.gcda' -print0) | while IFS= read -r -d '' file; do
        mkdir -p "$build/$(dirname "$file")"
        cp "$1/$file" "$build/$file"
      done
    fi
    found=$(find "$build" -name '*.gcda' | wc -l)
    [ "$found" -gt 0 ] || { echo "pgo.sh: no profile in $build: train first" >&2; exit 1; }
    echo "pgo.sh: $found profile files"
    meson configure "$build" -Db_pgo=use
    meson compile -C "$build"
    ;;
  *) usage ;;
esac
