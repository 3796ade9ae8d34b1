#!/usr/bin/env bash
# Builds replaydb for the GPU machine (sm_90) and bundles it into .bundle/:
#   tools/scripts/gpu-bundle.sh [BUILD_DIR]     (default: /tmp/replaydb-gpu-build)
#
# The GPU machine has CUDA 13, CMake, PyTorch and Python but none of our
# Debian libraries, so the bundle carries the binaries with every
# non-system shared library they load (found with ldd):
#   .bundle/bin/          replaydb_tests, replaydb, ucx_perftest (ucx-utils: the
#                         remote bench's ceilings)
#   .bundle/lib/ucx/      UCX's transport modules (cma, ib, rdmacm), found there
#                         through UCX_MODULE_DIR
#   .bundle/lib/          libreplaydb.so (the C API, which the Python package
#                         in python/ loads) and _speedups.abi3.so (its C calls), and
#                         jemalloc, flatbuffers, rocksdb, ucx, ... (whatever ldd lists)
#   .bundle/lib/fallback/ libstdc++ and libgcc_s, used there only when the
#                         machine's own are too old for our binaries (newer
#                         ones must win: compute-sanitizer loads its own
#                         libraries into the process)
#   .bundle/gpu-run.sh, .bundle/prio_baseline.py, .bundle/prio_summary.py,
#   .bundle/gather_baseline.py, .bundle/gather_summary.py
# glibc's own libraries (libc, libm, libpthread, libdl, librt, ld-linux) are
# never bundled: they must match the machine's kernel interface.
#
# Then, on the GPU machine, from the repository root: bash .bundle/gpu-run.sh
#
# The build is Release (-O3) with REPLAYDB_WERROR=OFF: GCC 12 at -O3 reports
# false positives (-Wrestrict inside libstdc++) that the default
# RelWithDebInfo build does not; warnings are policed by the normal builds.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo="$(pwd)"
build="${1:-${REPLAYDB_GPU_BUILD:-/tmp/replaydb-gpu-build}}"
bundle="$repo/.bundle"

case "$build" in
  "$repo"/build*) echo "gpu-bundle.sh: refusing to build in $build (the normal build folders)" >&2
                  exit 2 ;;
esac

echo "=== gpu-bundle: configure $build"
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  -DREPLAYDB_WERROR=OFF >"$build.configure.log" 2>&1 || {
  cat "$build.configure.log" >&2
  exit 1
}
if ! grep -q "replaydb: CUDA kernels ON" "$build.configure.log"; then
  echo "gpu-bundle.sh: CMake found no CUDA compiler; the bundle would hold no kernels" >&2
  exit 1
fi
echo "=== gpu-bundle: build"
cmake --build "$build" -j "$(nproc)" --target replaydb_tests replaydb_tool replaydb_shared

echo "=== gpu-bundle: collect into $bundle"
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib/fallback"
cp "$build/bin/replaydb_tests" "$build/bin/replaydb" "$bundle/bin/"
cp "$(command -v ucx_perftest)" "$bundle/bin/"
ucx_modules="$(dirname "$(readlink -f "$(ldconfig -p | awk '/libuct.so.0 / {print $NF; exit}')")")/ucx"
mkdir -p "$bundle/lib/ucx"
cp -L "$ucx_modules"/libuct_*.so.0 "$bundle/lib/ucx/"
# The shared library the Python package loads (python/ travels with the
# working tree): under its soname, and as libreplaydb.so for REPLAYDB_LIBRARY.
soname="$(objdump -p "$build/lib/libreplaydb.so" | awk '/SONAME/ {print $2}')"
cp -L "$build/lib/libreplaydb.so" "$bundle/lib/$soname"
ln -sf "$soname" "$bundle/lib/libreplaydb.so"
# The package's per-batch calls in C (stable ABI: any CPython >= 3.11 there),
# beside the library where the package looks for them.
if [ -f "$build/lib/_speedups.abi3.so" ]; then
  cp "$build/lib/_speedups.abi3.so" "$bundle/lib/"
else
  echo "gpu-bundle.sh: no _speedups.abi3.so (python3-dev missing?): Python uses ctypes there" >&2
fi

# Libraries every Linux machine has in a matching version: never bundled.
is_glibc() {
  case "$1" in
    linux-vdso.so.*|ld-linux*.so.*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*) return 0 ;;
  esac
  return 1
}
for bin in "$bundle"/bin/* "$bundle/lib/$soname"; do
  ldd "$bin" | while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$path" = "not" ]; then
      echo "gpu-bundle.sh: $bin needs $name, which is not found here" >&2
      exit 1
    fi
    is_glibc "$name" && continue
    case "$name" in
      libstdc++.so.*|libgcc_s.so.*) dest="$bundle/lib/fallback" ;;
      *) dest="$bundle/lib" ;;
    esac
    [ -e "$dest/$name" ] || cp -L "$path" "$dest/$name"
  done
done

cp tools/scripts/gpu-run.sh tools/analysis/prio_baseline.py tools/analysis/prio_summary.py tools/analysis/gather_baseline.py \
  tools/analysis/gather_summary.py "$bundle/"
echo "=== gpu-bundle: contents"
(cd "$bundle" && find . -type f | sort | xargs ls -l | awk '{printf "%10d  %s\n", $5, $9}')
size_kib=$(du -sk "$bundle" | cut -f1)
echo "=== gpu-bundle: $((size_kib / 1024)) MiB in $bundle"
# The device tool carries at most 64 MiB with the working tree: the bundle
# also travels packed (xz: about a quarter of its size), unpacked there.
packed="$(dirname "$bundle")/.bundle.tar.xz"
tar -C "$(dirname "$bundle")" -cJf "$packed" "$(basename "$bundle")"
echo "=== gpu-bundle: $(( $(stat -c %s "$packed") / 1024 / 1024 )) MiB packed in $packed"
echo "On the GPU machine, from the repository root: bash .bundle/gpu-run.sh" \
     "(carried packed: tar -xJf .bundle.tar.xz first)"
