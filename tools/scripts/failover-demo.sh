#!/usr/bin/env bash
# `tools/cluster-demo.sh --failover`: etcd and three `replaydb serve
# --coordinator` nodes on 127.0.0.1, a writer under acks replicated(1), the
# primary killed with SIGKILL, and the count of what was acknowledged and
# what came back. Arguments: the replaydb binary and a Python with NumPy (and
# REPLAYDB_LIBRARY, PYTHONPATH set by cluster-demo.sh).
set -euo pipefail
tool="$1"
python="$2"
etcd_bin=/usr/bin/etcd
[ -x "$etcd_bin" ] || {
  echo "cluster-demo: $etcd_bin is missing (Debian's etcd-server: tools/scripts/install-deps.sh --tests)" >&2
  exit 1
}
export UCX_MEM_MMAP_HOOK_MODE="${UCX_MEM_MMAP_HOOK_MODE:-none}"

free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

# Waits (at most 60 s) for a line matching $2 in file $1.
wait_for() {
  for _ in $(seq 1 600); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "cluster-demo: no '$2' in $1:" >&2
  cat "$1" >&2
  return 1
}

client=$(free_port)
peer=$(free_port)
"$etcd_bin" --name demo --data-dir "$work/etcd" \
  --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
  --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
  --initial-cluster "demo=http://127.0.0.1:$peer" > "$work/etcd.log" 2>&1 &
pids+=($!)
wait_for "$work/etcd.log" "ready to serve client requests"
cluster="etcd://127.0.0.1:$client/demo"
echo "etcd: 127.0.0.1:$client; cluster $cluster"

declare -A port pid
start_node() {
  "$tool" serve "$work/$1" --listen "ucx://127.0.0.1:${port[$1]}" --name "$1" \
    --coordinator "$cluster" --ttl-ms 2000 >> "$work/$1.log" 2>&1 &
  pid[$1]=$!
  pids+=($!)
}
for n in a b c; do
  port[$n]=$(free_port)
  start_node $n
done
for n in a b c; do wait_for "$work/$n.log" "listening on"; done
for n in a b c; do grep -h "listening on" "$work/$n.log" | sed "s/^/node $n: /"; done

# The writer: 1-8 step trajectories through the primary, connecting again
# through the coordinator after a failure; what was acknowledged goes to a file.
"$python" - "$cluster" "$work/acked.json" "$work/stop" > "$work/writer.log" 2>&1 <<'EOF' &
import json, os, sys, time, numpy as np, replaydb
cluster, out, stop = sys.argv[1], sys.argv[2], sys.argv[3]
acked, failures, table, db = {}, 0, None, None
rng = np.random.default_rng()
while not os.path.exists(stop):
    try:
        if table is None:
            db = replaydb.connect(cluster, client_name="demo writer", connect_timeout=1.0)
            table = db["experience"] if "experience" in db else db.create_table(
                "experience", {"obs": ("uint8", (64,)), "reward": "float32"},
                capacity_steps=1 << 18, acks="replicated(1)")
        steps = int(rng.integers(1, 9))
        with table.writer(timeout=5) as w:
            for _ in range(steps):
                w.append({"obs": rng.integers(0, 255, 64, dtype=np.uint8), "reward": 1.0})
            w.end()
            acked[w.trajectory_id] = steps
    except (replaydb.UnavailableError, replaydb.FailedPreconditionError,
            replaydb.DeadlineExceededError) as e:  # (the primary gone, fenced or not yet elected)
        failures += 1
        print(f"writer: {type(e).__name__}: {e}; connecting again", flush=True)
        table = db = None
        time.sleep(0.02)
json.dump({"acked": acked, "failures": failures}, open(out, "w"))
EOF
writer=$!
pids+=($writer)

# The node that serves as the primary now (none: empty).
primary() {
  for n in a b c; do
    if "$tool" "ucx://127.0.0.1:${port[$n]}" -c replication 2>/dev/null | grep -q "^role: primary"; then
      echo $n; return; fi
  done; }
sleep 3
old=$(primary)
echo "primary: node $old; killing it (SIGKILL) under the writer's load"
killed_at=$(date +%s.%N)
{ kill -KILL "${pid[$old]}"; wait "${pid[$old]}"; } 2>/dev/null || true
new=""
for _ in $(seq 1 300); do
  new=$(primary || true)
  [ -n "$new" ] && [ "$new" != "$old" ] && break
  sleep 0.05
done
elected_at=$(date +%s.%N)
echo "elected: node $new, $(echo "$elected_at - $killed_at" | bc) s after the SIGKILL"
grep -h "won the election\|promoted\|resyncing\|a replica of" "$work/$new.log" | tail -n 3 | sed "s/^/node $new: /"
sleep 3
echo "node $old comes back"
start_node "$old"
wait_for "$work/$old.log" "a replica of"
grep -h "resyncing\|moved\|copied\|a replica of" "$work/$old.log" | sed "s/^/node $old: /"
sleep 2
touch "$work/stop"
wait "$writer"

"$tool" "$cluster" --json -c "trajectories experience --limit 1000000" > "$work/held.json" || {
  echo "cluster-demo: the writer's log:" >&2; cat "$work/writer.log" >&2; exit 1; }
"$python" - "$work/acked.json" "$work/held.json" "$work/writer.log" <<'EOF'
import json, sys
acked = json.load(open(sys.argv[1]))
held = {t["id"]: t["length"] for t in json.load(open(sys.argv[2]))["trajectories"]}
lost = [i for i, n in acked["acked"].items() if held.get(int(i)) != n]
print(f"writer: {len(acked['acked'])} trajectories acknowledged under replicated(1), "
      f"{acked['failures']} calls failed during the failover (the writer connected again and "
      f"went on with a new trajectory)")
print(f"new primary: holds {len(held)} trajectories (a trajectory whose end failed may be "
      f"held unacknowledged); acknowledged and lost: {len(lost)}")
sys.exit(1 if lost else 0)
EOF
