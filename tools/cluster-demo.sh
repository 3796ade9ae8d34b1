#!/usr/bin/env bash
# The multi-process picture on one machine: `replaydb serve` hosting one
# table, four actor processes writing trajectories into it and one learner
# process sampling from it, all over UCX on 127.0.0.1. Prints each process's
# rate, then stops the server (SIGTERM: it checkpoints and closes).
#
#   tools/cluster-demo.sh [--seconds S] [--actors N] [--step-bytes B] [--build DIR]
#   tools/cluster-demo.sh --failover [--build DIR]
#
# --failover: etcd (Debian's etcd-server) and three `replaydb serve
# --coordinator` nodes on 127.0.0.1; a writer streams trajectories under
# acks replicated(1) through whichever node is the primary; the primary is
# killed with SIGKILL, another is elected, the writer goes on through it, the
# killed node comes back as a replica; then the count of what was
# acknowledged and what the new primary holds (docs/replication.md,
# "Automatic failover").
#
# Needs a release build (tools/scripts/build.sh): DIR/bin/replaydb and
# DIR/lib/libreplaydb.so (DIR defaults to build/, relative to the
# repository), and Python 3 with NumPy ($PYTHON, default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=5
actors=4
step_bytes=4096
build=build
failover=0
while [ $# -gt 0 ]; do
  case "$1" in
    --failover) failover=1; shift ;;
    --seconds) seconds="$2"; shift 2 ;;
    --actors) actors="$2"; shift 2 ;;
    --step-bytes) step_bytes="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster-demo: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
tool="$build/bin/replaydb"
lib="$build/lib/libreplaydb.so"
for f in "$tool" "$lib"; do
  [ -e "$f" ] || { echo "cluster-demo: $f is missing: build first (tools/scripts/build.sh)" >&2; exit 1; }
done
python="${PYTHON:-/usr/bin/python3}"
case "$lib" in /*) ;; *) lib="$PWD/$lib" ;; esac  # (--build may be absolute)
export REPLAYDB_LIBRARY="$lib" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"

if [ "$failover" = 1 ]; then
  exec bash "$(dirname "$0")/scripts/failover-demo.sh" "$tool" "$python"
fi

work=$(mktemp -d)
log="$work/serve.log"
server=""
cleanup() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill -TERM "$server" 2>/dev/null || true
    for _ in $(seq 1 600); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$tool" serve "$work/db" --listen ucx://127.0.0.1:0 --workers 2 > "$log" 2>&1 &
server=$!
address=""
for _ in $(seq 1 300); do  # up to 30 s
  address=$(grep -o 'listening on ucx://127\.0\.0\.1:[0-9]*' "$log" | sed 's/listening on //' || true)
  [ -n "$address" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$address" ] || { echo "cluster-demo: the server did not start:" >&2; cat "$log" >&2; exit 1; }
echo "server: $address (database $work/db)"

"$python" - "$address" "$step_bytes" <<'EOF'
import sys, replaydb
address, step_bytes = sys.argv[1], int(sys.argv[2])
db = replaydb.connect(address, client_name="cluster-demo setup")
db.create_table("experience", {"obs": ("uint8", (step_bytes,)), "reward": "float32"},
                capacity_steps=1 << 16, sequence_length=8, selector="prioritized")
db.close()
EOF

actor_py='
import sys, time, numpy as np, replaydb
address, actor, seconds, step_bytes = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
db = replaydb.connect(address, client_name=f"actor {actor}")
table = db["experience"]
obs = np.full(step_bytes, actor, np.uint8)
steps = 0
start = time.monotonic()
with table.writer(timeout=30) as w:
    while time.monotonic() - start < seconds:
        for _ in range(64):
            w.append({"obs": obs, "reward": 1.0})
        w.end()
        steps += 64
elapsed = time.monotonic() - start
print(f"actor {actor}: {steps} steps in {elapsed:.1f} s, {steps / elapsed:,.0f} steps/s, "
      f"{steps * step_bytes / elapsed / 1e6:,.1f} MB/s", flush=True)
'
learner_py='
import sys, time, numpy as np, replaydb
address, seconds = sys.argv[1], float(sys.argv[2])
db = replaydb.connect(address, client_name="learner")
table = db["experience"]
table.sample(1, timeout=30)  # waits for the first item
batches, items = 0, 0
start = time.monotonic()
while time.monotonic() - start < seconds:
    batch = table.sample(256, timeout=30)
    table.update_priorities(batch.item_keys, np.random.rand(256) + 0.1)
    batches += 1
    items += 256
elapsed = time.monotonic() - start
held = table.info()["num_steps"]
print(f"learner: {batches} batches of 256 x 8 steps in {elapsed:.1f} s, {batches / elapsed:,.1f} "
      f"batches/s (sample + priority update), {held} steps held", flush=True)
'
pids=()
for a in $(seq 0 $((actors - 1))); do
  "$python" -c "$actor_py" "$address" "$a" "$seconds" "$step_bytes" &
  pids+=($!)
done
"$python" -c "$learner_py" "$address" "$seconds" &
pids+=($!)
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done

kill -TERM "$server"
for _ in $(seq 1 600); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
wait "$server" || status=1
server=""
grep -E "is '|ended|stopped" "$log" | sed 's/^/server log: /'
exit $status
