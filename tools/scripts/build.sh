#!/usr/bin/env bash
# Configures and builds one flavour of replaydb.
#   tools/scripts/build.sh [release|asan|tsan|fuzz]   (default: release)
# Output folders: build/ (release), build-asan/, build-tsan/, build-fuzz/.
# Binaries land in <folder>/bin: replaydb (the tool) and replaydb_tests, and
# for fuzz the libFuzzer targets (*_fuzz); `ctest -R fuzz` in build-fuzz/
# fuzzes each for 30 s.
set -euo pipefail
cd "$(dirname "$0")/../.."

flavour="${1:-release}"
case "$flavour" in
  release) dir=build; flags=() ;;
  # Sanitizer builds leave the CUDA kernels out: no GPU runs them here and
  # the CUDA runtime confuses AddressSanitizer's shadow memory.
  asan) dir=build-asan; flags=(-DREPLAYDB_ASAN=ON -DREPLAYDB_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug) ;;
  tsan) dir=build-tsan; flags=(-DREPLAYDB_TSAN=ON -DREPLAYDB_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  # libFuzzer needs clang; the whole tree is built with it (with ASan+UBSan).
  fuzz) dir=build-fuzz; export CC=clang CXX=clang++
        # -Werror off: clang warns where g++ does not (e.g. -Wunused-private-field
        # in include/replaydb/device.h); wal/ and tests/fuzz/ build warning-free.
        flags=(-DREPLAYDB_FUZZ=ON -DREPLAYDB_WERROR=OFF -DREPLAYDB_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  *) echo "build.sh: unknown flavour '$flavour' (release, asan, tsan or fuzz)" >&2; exit 2 ;;
esac

cmake -S . -B "$dir" -G Ninja "${flags[@]}" >"$dir.configure.log" 2>&1 || {
  cat "$dir.configure.log" >&2
  exit 1
}
cmake --build "$dir" -j "$(nproc)"
