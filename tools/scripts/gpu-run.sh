#!/usr/bin/env bash
# Runs every GPU test and benchmark from the bundle that tools/scripts/gpu-bundle.sh
# made, on the GPU machine, from the repository root:
#   bash .bundle/gpu-run.sh      (or: bash tools/scripts/gpu-run.sh)
# Steps, each logged in full under $OUT (or /tmp/replaydb-gpu-logs):
#   1. nvidia-smi -L
#   2. the GPU test suites (Gpu*, DevicePriorityTable*, TableDevice*,
#      TableGpu*, ColdTierGpu*, BlockGather*, DeviceMemory*, DeviceEvent*,
#      CApiGpu*, VectorTableGpu*, DrawStrategyGpu*, RemoteDBGpu*) plainly,
#   3. under compute-sanitizer --tool memcheck,
#   4. under compute-sanitizer --tool racecheck,
#   5. `replaydb bench --json --big --filter prio` (n = 1M, 10M, 100M; cpu and
#      gpu), when the tool has that bench,
#   6. tools/analysis/prio_baseline.py (PyTorch's multinomial and cumsum+searchsorted),
#   7. `replaydb bench --json --filter gather` (window gathers from device and
#      pinned memory against same-size copies) and
#   8. `replaydb bench --json --filter sample_to_host` (32 MiB batches into
#      host memory from a device and a pinned table, against the copy alone),
#      `--filter vector_sample` (4096 rows drawn on the device from a vector
#      table),
#      `replaydb bench --json --filter vector_insert` (4096 x 1 KiB from
#      device and host memory, into a vector table and into a table of one
#      trajectory per environment, with the write-ahead log off and on) and
#      `--filter device_append` (TrajectoryWriter Append and AppendMany of
#      host steps into a device table), when the tool has those benches,
#   9. tools/analysis/gather_baseline.py (PyTorch's index_select on the same rows,
#      eager and in a CUDA graph),
#  10. `replaydb bench --filter spill|reload|sample_rotating` (the cold tier,
#      host side: a larger, quieter host than the development machine),
#  11. the Python package's tests (tests/python: GPU tests with PyTorch, JAX
#      and CuPy, the example learner on the GPU) over the bundle's
#      libreplaydb.so, and `python3 -m replaydb.bench` (needs the repository
#      root as the working directory: python/ and tests/ travel with it), and
#      tools/analysis/python_sample_to_host.py (table.sample to host memory
#      through Python, a new batch per call),
#  12. `replaydb bench --json --filter insert/step_bytes|wal_append|recover|sample_scale`
#      (issue 37's host paths: logged inserts, log appends and recovery against
#      memcpy and disk ceilings, draws at 1M, 10M and 50M steps) on the GPU
#      machine's many-core host,
#  13. `replaydb bench --json --filter remote` (issue 33: a `replaydb serve`
#      process and the bench over tcp and shared memory, against ucx_perftest
#      from the bundle; issue 34's read replicas, remote_replica_*, and
#      replicated(1) appends, remote_replicated_append) on the
#      many-core host,
#  14. issue 38's several GPUs (step multigpu): tools/analysis/multi_gpu_bench.py
#      under torch.distributed.run with 1 rank and with one rank per GPU
#      (a table sharded over the GPUs, per-rank sample rates with the rows
#      crossing GPUs through peer memory and through NCCL, the peer gather
#      against cudaMemcpyPeer), then examples/ddp_learner.py on
#      every GPU,
# then prints the priority table (tools/analysis/prio_summary.py), the gather table
# (tools/analysis/gather_summary.py) and a short summary of the steps last. Exits
# non-zero when a step fails.
# Environment: GTEST_FILTER overrides the suites; REPLAYDB_STEPS picks steps
# by name, comma-separated, from tests,memcheck,racecheck,prio,gather,cold,python,host,
# remote,multigpu (default: all; prio covers 5 and 6, gather 7 to 9, cold 10, python 11,
# host 12, remote 13, multigpu 14),
# so a run can be split
# across calls that each have a time limit; REPLAYDB_SKIP_SANITIZERS=1
# drops memcheck and racecheck, REPLAYDB_SKIP_BENCH=1 the benches;
# REPLAYDB_STEP_TIMEOUT (seconds, default 900) bounds each step.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
if [ -x "$here/bin/replaydb_tests" ]; then
  bundle="$here"
elif [ -x "$here/../../.bundle/bin/replaydb_tests" ]; then
  bundle="$(cd "$here/../../.bundle" && pwd)"
else
  echo "gpu-run.sh: no bundle (bin/replaydb_tests) beside $here or in ../../.bundle;" \
       "run tools/scripts/gpu-bundle.sh first" >&2
  exit 2
fi
logs="${OUT:-/tmp/replaydb-gpu-logs}"
mkdir -p "$logs"

export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The bundled libstdc++/libgcc_s only where the machine's own are missing or
# too old for our binaries.
if ldd "$bundle/bin/replaydb_tests" "$bundle/bin/replaydb" 2>&1 | grep -q "not found"; then
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$bundle/lib/fallback"
  echo "gpu-run.sh: using the bundled libstdc++/libgcc_s"
fi
# The binaries link UCX (rdma/) for the network tier, which none of these
# steps uses: keep its memory hooks (libucm patches mmap and friends once
# loaded) out of the CUDA runtime's and compute-sanitizer's way.
export UCX_MEM_MMAP_HOOK_MODE=none
# UCX's transport modules travel in the bundle (the machine has no UCX), and
# the remote bench runs ucx_perftest from it.
[ -d "$bundle/lib/ucx" ] && export UCX_MODULE_DIR="$bundle/lib/ucx"
export PATH="$bundle/bin:$PATH"
tests="$bundle/bin/replaydb_tests"
tool="$bundle/bin/replaydb"
filter="${GTEST_FILTER:-Gpu*:DevicePriorityTable*:TableDevice*:TableGpu*:ColdTierGpu*:BlockGather*:DeviceMemory*:DeviceEvent*:CApiGpu*:VectorTableGpu*:DrawStrategyGpu*:RemoteDBGpu*:ShardedTableGpu*}"
unset GTEST_FILTER
# Under compute-sanitizer, leave out the test that provokes out-of-memory
# errors on purpose (the sanitizer reports every failed CUDA call).
case "$filter" in
  *-*) sanitized_filter="$filter:DeviceMemoryTest.FailuresNameTheBytesAndDevice" ;;
  *) sanitized_filter="$filter-DeviceMemoryTest.FailuresNameTheBytesAndDevice" ;;
esac

steps="${REPLAYDB_STEPS:-tests,memcheck,racecheck,prio,gather,cold,python,host,remote,multigpu}"
[ "${REPLAYDB_SKIP_SANITIZERS:-0}" = 1 ] && steps="$(echo "$steps" | sed 's/memcheck//; s/racecheck//')"
[ "${REPLAYDB_SKIP_BENCH:-0}" = 1 ] &&
  steps="$(echo "$steps" | sed 's/prio//; s/gather//; s/cold//; s/host//; s/remote//; s/multigpu//')"
# want STEP: whether STEP is among the steps to run.
want() { case ",$steps," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

summary=()
failed=0
# step NAME LOGFILE NOTE-COMMAND -- COMMAND...: runs COMMAND, logs it, and
# adds a summary row whose note is NOTE-COMMAND's output on the log.
step() {
  local name="$1" log="$logs/$2" note_cmd="$3"
  shift 4
  echo
  echo "=== gpu-run: $name: $*"
  local start end rc
  start=$(date +%s.%N)
  timeout "${REPLAYDB_STEP_TIMEOUT:-900}" "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  end=$(date +%s.%N)
  local note
  note="$($note_cmd "$log" 2>/dev/null | tr '\n' ' ' | cut -c1-90)"
  local verdict=ok
  if [ "$rc" -ne 0 ]; then verdict="FAIL($rc)"; failed=1; fi
  summary+=("$(printf '%-22s %-9s %8.1f  %s' "$name" "$verdict" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$note")")
}

gtest_note() {
  local passed failed_n skipped
  passed=$(grep -oE '\[  PASSED  \] [0-9]+' "$1" | grep -oE '[0-9]+$' | tail -1)
  failed_n=$(grep -oE '\[  FAILED  \] [0-9]+ test' "$1" | grep -oE '[0-9]+' | tail -1)
  skipped=$(grep -oE '\[  SKIPPED \] [0-9]+' "$1" | grep -oE '[0-9]+$' | tail -1)
  echo "passed ${passed:-0}, failed ${failed_n:-0}, skipped ${skipped:-0}"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$1" | sed 's/\[  FAILED  \] //' | head -3
}
sanitizer_note() {
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$1" | tail -1 | sed 's/=========//'
  gtest_note "$1"
}
json_note() {
  local missed; missed=$(grep -c '"MISSED"' "$1" || true)
  echo "$(grep -c '^{' "$1" || true) results$([ "${missed:-0}" -gt 0 ] && echo ", $missed MISSED")"
}
cold_note() { grep -m1 -E '^(spill|reload|sample_rotating) ' "$1" | awk '{print $(NF-1), $NF}'; }
smi_note() { grep -m1 '^GPU' "$1" | cut -d'(' -f1; }
pytest_note() { grep -E '(passed|failed|skipped|error)' "$1" | tail -1; }

# bench_rows FORMAT FILE...: one line per JSON result of `replaydb bench
# --json` in FILEs (value, ceiling and ratio printed with FORMAT), with its
# target's verdict.
bench_rows() {
  python3 - "$@" <<'PY'
import json, sys
fmt = sys.argv[1]
def num(v):
    return "-" if v is None else format(v, fmt)
for path in sys.argv[2:]:
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        print(f"no results: {e}")
        continue
    for line in lines:
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        params = ",".join(f"{k}={v}" for k, v in r["params"].items())
        print(f"{r['bench']} {params}: {num(r['value'])} {r['unit']}  {r['ceiling_name']} "
              f"{num(r['ceiling'])}  ratio {num(r['ratio'])}  {r.get('target', '-')} "
              f"({r.get('target_text', 'no target')})")
PY
}

# python_env: the Python package from the working tree ($repo) over the bundle's library.
python_env() {
  export REPLAYDB_LIBRARY="$bundle/lib/libreplaydb.so" PYTHONPATH="$repo/python" \
    PYTHONUNBUFFERED=1
}

step "nvidia-smi" nvidia-smi.log smi_note -- nvidia-smi -L
want tests &&
  step "gpu tests" tests.log gtest_note -- "$tests" --gtest_filter="$filter" --gtest_color=no
want memcheck &&
  step "memcheck" memcheck.log sanitizer_note -- \
    compute-sanitizer --tool memcheck --leak-check full --error-exitcode 1 \
    "$tests" --gtest_filter="$sanitized_filter" --gtest_color=no
# Racecheck runs with launches blocking. Without, 3 of 7 full racecheck
# runs and 1 of 17 runs of TableGpuTest.VectorWriterAppendsFromDeviceMemory
# alone hung in cudaStreamSynchronize, inside the sanitizer (H200, CUDA
# 13.0, 2026-11-23; builds before and after that day's changes alike; the
# same tests have never hung outside the sanitizer); with, none of 26. Racecheck looks for shared-memory
# hazards inside a kernel, which blocking launches do not hide. Memcheck
# keeps asynchronous launches: a missing stream dependency can show there as
# an access to freed or reused memory. DeviceMicrosPerCall's timing test
# queues calls behind a held stream, which blocking launches cannot do (the
# host waits for the hold to end): it runs in the other two steps only.
want racecheck &&
  step "racecheck" racecheck.log sanitizer_note -- \
    env CUDA_LAUNCH_BLOCKING=1 compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$tests" --gtest_filter="$sanitized_filter:GpuTest.DeviceMicrosPerCallTimesTheDevicesPartOfACall" \
    --gtest_color=no
if want prio; then
  step "bench prio" bench.jsonl json_note -- "$tool" bench --json --big --filter prio
  command -v python3 >/dev/null &&
    step "torch baseline" baseline.jsonl json_note -- python3 "$bundle/prio_baseline.py"
fi
if want gather; then
  for bench in gather vector_insert device_append sample_to_host vector_sample; do
    step "bench $bench" "bench-$bench.jsonl" json_note -- "$tool" bench --json --filter "$bench"
  done
  command -v python3 >/dev/null &&
    step "torch gather baseline" gather-baseline.jsonl json_note -- \
      python3 "$bundle/gather_baseline.py"
fi
if want cold; then
  # The cold-tier benches need no GPU; they run here for a larger, quieter
  # host than the development machine.
  for bench in spill reload sample_rotating; do
    step "bench $bench" "bench-$bench.txt" cold_note -- "$tool" bench --filter "$bench"
  done
fi
if want host; then
  # Issue 37's host paths, on a host with more cores than the development
  # machine.
  for bench in insert/step_bytes wal_append recover sample_scale; do
    step "bench ${bench%%/*}" "bench-host-${bench%%/*}.jsonl" json_note -- \
      "$tool" bench --json --filter "$bench"
  done
fi
if want remote; then
  # Issue 33's remote rows (and issue 34's replica rows), on a host where
  # the servers, the clients and ucx_perftest need not share two cores.
  step "bench remote" bench-remote.jsonl json_note -- "$tool" bench --json --filter remote
fi
if want python; then
  # The Python package from the working tree over the bundle's
  # libreplaydb.so: its tests (GPU ones with PyTorch, JAX and CuPy; the
  # example learner on the GPU) and what Python adds to a sample.
  repo="$(pwd)"
  if [ -d "$repo/python/replaydb" ]; then
    python_env
    timeout_flag=()
    python3 -c "import pytest_timeout" 2>/dev/null && timeout_flag=(--timeout=240)
    step "python tests" python-tests.log pytest_note -- \
      python3 -m pytest -q -rs -p no:cacheprovider "${timeout_flag[@]}" "$repo/tests/python"
    step "python bench" python-bench.jsonl json_note -- python3 -m replaydb.bench --json
    step "python sample_to_host" python-sample-to-host.jsonl json_note -- \
      python3 "$repo/tools/analysis/python_sample_to_host.py"
  else
    echo "gpu-run.sh: no python/ here (run from the repository root); python steps skipped"
  fi
fi
if want multigpu; then
  # Issue 38: one shard per GPU, every rank sampling the whole table.
  repo="$(pwd)"
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  python_env
  rm -f "$logs/multi-gpu.jsonl"
  for world in 1 $([ "$gpus" -ge 2 ] && echo 2) $([ "$gpus" -ge 4 ] && echo 4); do
    step "multigpu bench x$world" "multi-gpu-$world.log" json_note -- \
      python3 -m torch.distributed.run --standalone --nproc_per_node "$world" \
      "$repo/tools/analysis/multi_gpu_bench.py" --json "$logs/multi-gpu.jsonl"
  done
  step "ddp_learner x$gpus" ddp-learner.log pytest_note -- \
    python3 -m torch.distributed.run --standalone --nproc_per_node "$gpus" \
    "$repo/examples/ddp_learner.py" --dir "$logs/ddp-replay" --iterations 300
fi

if want prio; then
  echo
  echo "=== gpu-run: priority tables, microseconds per call of 4096"
  python3 "$bundle/prio_summary.py" "$logs/bench.jsonl" "$logs/baseline.jsonl"
fi
if want gather; then
  echo
  echo "=== gpu-run: gathers (payload GB/s, batch 256), vector inserts and device appends"
  python3 "$bundle/gather_summary.py" "$logs/bench-gather.jsonl" \
    "$logs/bench-vector_insert.jsonl" "$logs/bench-device_append.jsonl" \
    "$logs/gather-baseline.jsonl"
  echo
  echo "=== gpu-run: samples to host memory (GB/s, fresh batch per call), vector-table device draws (us)"
  bench_rows .2f "$logs/bench-sample_to_host.jsonl" "$logs/bench-vector_sample.jsonl"
fi
if want cold; then
  echo
  echo "=== gpu-run: cold tier (host side)"
  for bench in spill reload sample_rotating; do
    grep -E -A1 "^$bench " "$logs/bench-$bench.txt" || true
  done
fi
if want python && [ -f "$logs/python-bench.jsonl" ]; then
  echo
  echo "=== gpu-run: what Python adds per call (python -m replaydb.bench; target <= 10 us)"
  python3 - "$logs/python-bench.jsonl" <<'PY' || true
import json
import sys

path = "nothing: no rows"
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    params = " ".join(f"{k}={v}" for k, v in r["params"].items())
    lo, hi = r["overhead_ci95_us"]
    print(f"{r['bench']:26s} {params}: python {r['value']} us, c_api {r['ceiling']} us; "
          f"adds {r['overhead_us']} us [95% CI {lo}, {hi}] (allowed {r['allowed_us']}): "
          f"{r['target']}")
    path = r.get("python_path", "ctypes")
print(f"(per-batch calls through the {path})")
PY
fi
if want host; then
  echo
  echo "=== gpu-run: host paths (issue 37)"
  bench_rows .3g "$logs"/bench-host-*.jsonl || true
fi
if want remote; then
  echo
  echo "=== gpu-run: remote access over UCX and read replicas (issues 33, 34; this host's CPUs, tcp and shared memory)"
  bench_rows .3g "$logs/bench-remote.jsonl" || true
fi
if want multigpu && [ -f "$logs/multi-gpu.jsonl" ]; then
  echo
  echo "=== gpu-run: several GPUs (issue 38; B=256, L=32, 4 KiB steps, prioritized)"
  python3 - "$logs/multi-gpu.jsonl" <<'PY' || true
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
one = {r["params"]["mode"]: r["value"] for r in rows
       if r["bench"] == "shard_sample" and r["params"]["world"] == 1}
for r in rows:
    p = r["params"]
    if r["bench"] == "shard_sample":
        base = one.get(p["mode"])
        weak = r["value"] / base if base else float("nan")
        verdict = "-" if p["world"] == 1 else ("met" if weak >= 0.9 else "MISSED")
        print(f"shard_sample mode={p['mode']:8s} world={p['world']} "
              f"{p.get('transfer', 'nccl'):4s}: {r['value']:9.0f} batches/s "
              f"per rank; local table.sample {r['ceiling']:9.0f} (ratio {r['ratio']:.2f}); "
              f"x world 1: {weak:.2f} {verdict} (>= 0.90)")
        if r.get("solo"):
            alone = r["value"] / r["solo"]
            print(f"    x one GPU alone in the same run ({r['solo']:.0f} batches/s per rank): "
                  f"{alone:.2f} {'met' if alone >= 0.9 else 'MISSED'} (>= 0.90)")
        if "nvlink_bound" in r and base:
            print(f"    NVLink bound of per_rank (peers' rows at cudaMemcpyPeer one way): "
                  f"{r['nvlink_bound']:.0f} batches/s per rank, x world 1: "
                  f"{r['nvlink_bound'] / base:.2f}")
    elif r["bench"] == "peer_gather":
        verdict = "met" if r["ratio"] >= 0.8 else "MISSED"
        print(f"peer_gather world={p['world']} B={p['batch']}: {r['value']:.1f} GB/s into the "
              f"peer's memory; {r['ceiling_name']} {r['ceiling']:.1f} GB/s; ratio "
              f"{r['ratio']:.2f} {verdict} (>= 0.80)")
    else:  # the NCCL path's all-to-all (transfer="nccl"): no target, for comparison
        print(f"peer_transfer world={p['world']} {p['bytes'] / 2**20:.0f} MiB: {r['value']:.1f} GB/s "
              f"per rank through NCCL; {r['ceiling_name']} {r['ceiling']:.1f} GB/s; ratio "
              f"{r['ratio']:.2f} (no target: the peer path moves the rows); {r.get('note', '')}")
PY
fi
echo
echo "=== gpu-run: summary (logs in $logs)"
printf '%-22s %-9s %8s  %s\n' step result seconds note
for row in "${summary[@]}"; do echo "$row"; done
exit "$failed"
