#!/usr/bin/env bash
# Configures and builds one flavour of replaydb.
#   tools/build.sh [release|asan|tsan]   (default: release)
# Output folders: build/ (release), build-asan/, build-tsan/. Binaries land
# in <folder>/bin: replaydb (the tool) and replaydb_tests.
set -euo pipefail
cd "$(dirname "$0")/.."

flavour="${1:-release}"
case "$flavour" in
  release) dir=build; flags=() ;;
  # Sanitizer builds leave the CUDA kernels out: no GPU runs them here and
  # the CUDA runtime confuses AddressSanitizer's shadow memory.
  asan) dir=build-asan; flags=(-DREPLAYDB_ASAN=ON -DREPLAYDB_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug) ;;
  tsan) dir=build-tsan; flags=(-DREPLAYDB_TSAN=ON -DREPLAYDB_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  *) echo "build.sh: unknown flavour '$flavour' (release, asan or tsan)" >&2; exit 2 ;;
esac

cmake -S . -B "$dir" -G Ninja "${flags[@]}" >"$dir.configure.log" 2>&1 || {
  cat "$dir.configure.log" >&2
  exit 1
}
cmake --build "$dir" -j "$(nproc)"
