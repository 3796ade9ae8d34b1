#!/usr/bin/env bash
# Installs every Debian 12 package that building, testing and running the
# replaydb demo need. Idempotent: when everything is there it only checks
# (well under a second) and installs nothing. Run as root.
#   install-deps.sh          what building and the demo need
#   install-deps.sh --tests  that and what only the tests need (PyTorch, for
#                            replaydb.distributed's process-group tests)
#
# The CUDA toolkit is not a Debian package: where /usr/local/cuda/bin/nvcc
# exists the build adds the CUDA kernels, otherwise it builds the CPU paths.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config git
  # formats, storage, memory, network (see DESIGN.md, Dependencies)
  libflatbuffers-dev flatbuffers-compiler flatbuffers-compiler-dev
  nlohmann-json3-dev
  librocksdb-dev libzstd-dev liblz4-dev
  libhdf5-dev  # optional to the engine: the D4RL import (replaydb_d4rl), its tests, the tool's import-d4rl
  libjemalloc-dev
  libucx-dev  # rdma/: the network tier's transport
  libssl-dev  # rdma/: HMAC-SHA256 of its tokens (libcrypto)
  libcurl4-openssl-dev  # rdma/coord/: the etcd coordinator's HTTP/JSON calls
  ucx-utils   # ucx_perftest: the ceilings of `replaydb bench --filter remote`
  libreadline-dev
  # tests
  libgtest-dev libgmock-dev
  # the Python package's tests (tests/python) and its install check; matplotlib for
  # tools/analysis/plot_benchmarks.py (ctest analysis.plot_benchmarks)
  python3 python3-numpy python3-pytest python3-venv python3-pip python3-setuptools
  python3-matplotlib
  python3-dev  # Python.h: the package's per-batch calls in C (python/replaydb/_speedups.c)
)
if [ "${1:-}" = "--tests" ]; then
  # torch.distributed with gloo: tests/python/test_distributed.py's process groups
  PACKAGES+=(python3-torch)
  # etcd: the automatic failover's tests start their own (tests/rdma/etcd_test.cc)
  PACKAGES+=(etcd-server)
  # ip and iptables: the partition tests' network namespaces and the rules that
  # cut a node from etcd alone (tests/tools/failover_test.cc)
  PACKAGES+=(iproute2 iptables)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run this script as root" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
