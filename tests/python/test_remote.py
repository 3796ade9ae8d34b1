"""replaydb.connect: a database that `replaydb serve` hosts, used from Python
as a local one is, by several processes at once (actors writing, a learner
sampling), over UCX on 127.0.0.1 with UCX_TLS=tcp and =sm,tcp. Every
server a test starts is stopped by it; every wait is bounded."""

import contextlib
import os
import pickle
import re
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import replaydb

ROOT = Path(__file__).resolve().parents[2]
TOOL = os.environ.get("REPLAYDB_TOOL", str(ROOT / "build" / "bin" / "replaydb"))

pytestmark = pytest.mark.skipif(not Path(TOOL).exists(),
                                reason=f"the replaydb tool is not built ({TOOL})")


class Server:
    """`replaydb serve DIR` on a free loopback port, its output collected."""

    def __init__(self, path, env):
        self.proc = subprocess.Popen(
            [TOOL, "serve", path, "--listen", "ucx://127.0.0.1:0", "--workers", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        self.output = ""
        self.address = self.wait_for(r"listening on (ucx://127\.0\.0\.1:\d+)", 30)
        if not self.address:
            self.proc.kill()
            self.proc.communicate()
            pytest.fail(f"no listening line:\n{self.output}")

    def wait_for(self, pattern, seconds):
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            found = re.search(pattern, self.output)
            if found:
                return found.group(1) if found.groups() else found.group(0)
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                self.output += chunk.decode(errors="replace")
        return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rest, _ = self.proc.communicate(timeout=60)
                self.output += rest.decode(errors="replace")
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()
        return self.proc.returncode


@contextlib.contextmanager
def _serving(db_path, settings):
    """`replaydb serve` of a fresh database with a prioritized table, this
    process's clients and the server under the UCX `settings` (restored
    after); yields the server and the server's environment."""
    env = dict(os.environ, **settings)
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)  # this process's clients read them as they connect
    with replaydb.open(db_path) as db:
        db.create_table("experience", {"obs": ("float32", (4,)), "reward": "float32"},
                        capacity_steps=4096, selector="prioritized", sequence_length=2)
    server = Server(db_path, env)
    try:
        yield server, env
    finally:
        code = server.stop()
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    assert code == 0, server.output
    assert "stopped; database checkpointed and closed" in server.output


@pytest.fixture(params=["tcp", "shm"])
def served(request, db_path):
    """A served database, reached with UCX_TLS=tcp, and with UCX_TLS=sm,tcp
    (shared memory: the transport sets UCX_MM_ERROR_HANDLING=y, which UCX
    1.13's sysv and posix transports need for our endpoints)."""
    tls = "tcp" if request.param == "tcp" else "sm,tcp"
    with _serving(db_path, {"UCX_TLS": tls}) as s:
        yield s


def test_a_connected_database_writes_samples_and_updates_as_a_local_one(served, rng, tmp_path):
    server, env = served
    db = replaydb.connect(server.address, client_name="pytest learner")
    assert db.path == server.address
    # The server names the connection's transports: shared memory where
    # UCX_TLS allows it (the default between processes of one host).
    lanes = server.wait_for(r"is 'pytest learner' \(over ([^)]*)\)", 10)
    assert lanes is not None, server.output
    assert ("memory" in lanes) == (env["UCX_TLS"] != "tcp"), lanes
    assert db.tables() == ["experience"]
    table = db["experience"]
    rows = rng.standard_normal((12, 4)).astype(np.float32)
    with table.writer() as w:
        for i, row in enumerate(rows):
            w.append({"obs": row, "reward": float(i)}, priority=1.0 + i)
        w.end()
    vw = table.vector_writer(3)
    for step in range(4):
        vw.append({"obs": np.full((3, 4), step, np.float32), "reward": np.arange(3, dtype=np.float32)})
    vw.end_many([0, 1, 2])
    vw.close()
    info = table.info()
    assert info["num_steps"] == 12 + 12
    table.seed(7)
    batch = table.sample(16, importance_beta=0.5, timeout=10)
    obs = np.asarray(batch["obs"])
    assert obs.shape == (16, 2, 4)
    # Every window of the single writer's trajectory is two consecutive rows.
    for item in range(16):
        if np.asarray(batch.mask)[item].all() and obs[item, 0, 0] not in (0, 1, 2, 3):
            first = np.flatnonzero((rows == obs[item, 0]).all(axis=1))
            assert first.size == 1 and np.array_equal(rows[first[0] + 1], obs[item, 1])
    updated, skipped = table.update_priorities(batch.item_keys, np.full(16, 5.0))
    assert skipped == 0 and updated == 16
    again = table.lookup(batch.item_keys)
    assert np.array_equal(np.asarray(again["obs"]), obs)
    assert server.wait_for(r"is 'pytest learner'", 10), server.output
    with pytest.raises(replaydb.NotFoundError, match="nope"):
        db.table("nope")
    # Deleting items runs on the server; maintenance calls run where the database is.
    unique = np.unique(np.asarray(batch.item_keys))
    before = table.info()["num_items"]
    assert table.delete(unique) == unique.size
    assert table.info()["num_items"] == before - unique.size
    assert table.delete(unique) == 0, "gone already: skipped"
    with pytest.raises(replaydb.NotSupportedError, match="ExportTable runs where the database is"):
        db.export_table("t", str(tmp_path / "exported"))
    db.close()


def test_samples_read_in_place_over_shared_memory(db_path, rng, monkeypatch):
    """With shared memory between the processes (the default; UCX 1.13
    needs UCX_MM_ERROR_HANDLING=y for it, which the transport sets), the
    learner reads its samples' windows straight from the server's memory
    (the server logs the grant): what the server's own gathered lookup of the
    same items gives, row for row what was written."""
    monkeypatch.delenv("UCX_MM_ERROR_HANDLING", raising=False)
    with _serving(db_path, {"UCX_TLS": "sm,tcp"}) as (server, _):
        db = replaydb.connect(server.address, client_name="pytest learner")
        # Rows of 16 KiB: batches large enough to be read in place (smaller
        # ones come by message, ConnectOptions::read_in_place_min_bytes).
        table = db.create_table("frames", {"obs": ("float32", (4096,)), "reward": "float32"},
                                capacity_steps=1024, selector="prioritized",
                                sequence_length=2)
        rows = rng.standard_normal((40, 4096)).astype(np.float32)
        with table.writer() as w:
            for i, row in enumerate(rows):
                w.append({"obs": row, "reward": float(i)}, priority=1.0 + i)
            w.end()
        for _ in range(5):
            batch = table.sample(32, timeout=10)
            obs = np.asarray(batch["obs"])
            mask = np.asarray(batch.mask)
            for item in range(32):
                first = np.flatnonzero((rows == obs[item, 0]).all(axis=1))
                assert first.size == 1, "a window that is no written row"
                if mask[item, 1]:
                    assert np.array_equal(rows[first[0] + 1], obs[item, 1])
                else:
                    assert first[0] == 39 and not obs[item, 1].any(), "padding is zero"
            again = table.lookup(batch.item_keys)
            assert np.array_equal(np.asarray(again["obs"]), obs)
        assert server.wait_for(r"reads table 'frames' in place", 10), server.output
        # read_in_place=False: the same samples, in the replies; the server
        # grants this connection nothing.
        by_message = replaydb.connect(server.address, client_name="pytest by message",
                                      read_in_place=False)
        other = by_message["frames"]
        for _ in range(3):
            batch = other.sample(32, timeout=10)
            again = table.lookup(batch.item_keys)
            assert np.array_equal(np.asarray(again["obs"]), np.asarray(batch["obs"]))
        connection = server.wait_for(r"connection (\d+) is 'pytest by message'", 10)
        assert connection, server.output
        server.wait_for(r"(?!)", 0.5)  # what else it logged meanwhile
        assert f"connection {connection} reads table" not in server.output, server.output
        assert len(re.findall(r"reads table 'frames' in place", server.output)) == 1
        by_message.close()
        db.close()


ACTOR = textwrap.dedent("""
    import sys, numpy as np, replaydb
    address, actor = sys.argv[1], int(sys.argv[2])
    db = replaydb.connect(address, client_name=f"actor {actor}")
    table = db["experience"]
    with table.writer() as w:
        for t in range(3):
            for s in range(10):
                w.append({"obs": np.full(4, actor, np.float32), "reward": float(s)})
            w.end()
    print("actor", actor, "done", flush=True)
""")


def test_four_actor_processes_and_a_learner_share_one_table(served):
    server, env = served
    env = dict(env, PYTHONPATH=str(ROOT / "python"))
    actors = [subprocess.Popen([sys.executable, "-c", ACTOR, server.address, str(a)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
              for a in range(4)]
    try:
        outputs = [a.communicate(timeout=120)[0].decode() for a in actors]
    finally:
        for a in actors:  # none left behind, whatever happened
            if a.poll() is None:
                a.kill()
                a.communicate()
    for a, out in zip(actors, outputs):
        assert a.returncode == 0, out
    db = replaydb.connect(server.address, client_name="learner")
    table = db["experience"]
    assert table.info()["num_steps"] == 4 * 3 * 10
    obs = np.asarray(table.sample(64, timeout=10)["obs"])
    assert set(np.unique(obs[:, 0, 0]).tolist()) <= {0.0, 1.0, 2.0, 3.0}
    db.close()


def test_a_dead_address_is_unavailable_within_the_timeout():
    start = time.monotonic()
    with pytest.raises(replaydb.UnavailableError):
        replaydb.connect("ucx://127.0.0.1:1", connect_timeout=5)
    assert time.monotonic() - start < 30
    with pytest.raises(replaydb.InvalidArgumentError, match="is not ucx://HOST:PORT"):
        replaydb.connect("ucx://127.0.0.1")
    for bad, message in [({"call_timeout": 0}, "ConnectOptions::call_timeout is 0 ms"),
                         ({"connect_timeout": -1}, "ConnectOptions::connect_timeout is -1000 ms"),
                         ({"heartbeat": -0.5}, "ConnectOptions::heartbeat is -500 ms; it must "
                                               "be 0 \\(none\\) or more"),
                         ({"read_in_place_min_bytes": -1}, "read_in_place_min_bytes is -1")]:
        with pytest.raises(replaydb.InvalidArgumentError, match=message):
            replaydb.connect("ucx://127.0.0.1:1", **bad)


def test_the_cluster_demo_runs_its_actors_and_learner():
    build = Path(TOOL).parents[1]
    done = subprocess.run(["bash", str(ROOT / "tools" / "cluster-demo.sh"), "--seconds", "1",
                           "--build", str(build.resolve())], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHON=sys.executable))
    assert done.returncode == 0, done.stdout + done.stderr
    for who in ("actor 0:", "actor 3:", "learner:", "server log:"):
        assert who in done.stdout, done.stdout
    assert "stopped; database checkpointed and closed" in done.stdout


@pytest.mark.skipif(not Path("/usr/bin/etcd").exists(),
                    reason="/usr/bin/etcd is not installed (Debian's etcd-server)")
def test_the_failover_demo_kills_the_primary_and_loses_nothing_acknowledged():
    build = Path(TOOL).parents[1]
    done = subprocess.run(["bash", str(ROOT / "tools" / "cluster-demo.sh"), "--failover",
                           "--build", str(build.resolve())], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHON=sys.executable))
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"elected: node [abc], [0-9.]+ s after the SIGKILL", done.stdout), done.stdout
    assert "resyncing from the primary" in done.stdout, done.stdout
    assert re.search(r"writer: [1-9][0-9]* trajectories acknowledged under replicated\(1\)",
                     done.stdout), done.stdout
    assert "acknowledged and lost: 0" in done.stdout, done.stdout


def test_a_served_table_pickles_and_forks_by_connecting_again(served):
    server, env = served
    db = replaydb.connect(server.address, client_name="parent")
    table = db["experience"]
    with table.writer() as w:
        for i in range(6):
            w.append({"obs": np.full(4, i, np.float32), "reward": 1.0})
        w.end()
    # Unpickled: connected again, the same table.
    again = pickle.loads(pickle.dumps(table))
    assert again.name == "experience" and again.info()["num_steps"] == 6
    assert pickle.loads(pickle.dumps(db)).tables() == ["experience"]
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(table.writer())
    # A process started fresh unpickles the table and samples it over a
    # connection of its own; a fork is refused, saying what to do instead.
    child = subprocess.run(
        [sys.executable, "-c", "import pickle, sys, numpy as np, replaydb; "
         "t = pickle.loads(sys.stdin.buffer.read()); "
         "print(np.asarray(t.sample(4, timeout=10)['obs']).shape, t.info()['num_steps'])"],
        input=pickle.dumps(table), capture_output=True, timeout=120,
        env=dict(env, PYTHONPATH=str(ROOT / "python")))
    assert child.returncode == 0, child.stderr.decode()
    assert child.stdout.decode().strip() == "(4, 2, 4) 6"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            table.sample(1)
            os.write(write, b"no error")
        except replaydb.FailedPreconditionError as e:
            os.write(write, str(e).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    message = os.read(read, 2000).decode()
    os.close(read)
    assert "UCX's state does not survive a fork" in message, message
    assert "'spawn'" in message
    assert table.info()["num_steps"] == 6
    db.close()


def test_a_sharded_table_over_two_servers_is_one_table(tmp_path, rng):
    """replaydb.connect("A+B"): one table over two servers (docs/sharding.md),
    through the same Table calls; keys name their shard in their top 8 bits."""
    servers = [Server(str(tmp_path / f"shard{s}"), dict(os.environ, UCX_TLS="tcp")) for s in range(2)]
    try:
        os.environ["UCX_TLS"] = "tcp"
        address = "+".join(s.address for s in servers)
        db = replaydb.connect(address, client_name="sharded learner")
        assert db.path == address
        table = db.create_table("experience", {"obs": ("float32", (4,)), "reward": "float32"},
                                capacity_steps=4096, selector="prioritized")
        assert db.tables() == ["experience"]
        rows = rng.standard_normal((24, 4)).astype(np.float32)
        with table.writer() as w:
            for t in range(6):
                for i in range(4):
                    w.append({"obs": rows[t * 4 + i], "reward": float(t)}, priority=1.0)
                w.end()
        assert table.info()["num_steps"] == 24
        batch = table.sample(64, importance_beta=0.5, timeout=10)
        keys = np.asarray(batch.item_keys)
        assert set((keys >> np.uint64(56)).tolist()) <= {0, 1}
        updated, skipped = table.update_priorities(
            keys, np.where((keys >> np.uint64(56)) == 1, 10.0, 1.0))
        assert skipped == 0 and updated == 64
        looked = table.lookup(keys)
        assert np.array_equal(np.asarray(looked["obs"]), np.asarray(batch["obs"]))
        assert len(table.sample(8, stratified=True).item_keys) == 8
        # A FIFO table over both: the steps come back in the order written
        # (the servers' item clocks tick each millisecond).
        queue = db.create_table("q", {"obs": ("float32", (4,))}, capacity_steps=64,
                                block_steps=1, selector="fifo", max_times_sampled=1)
        with queue.writer() as w:
            for i in range(8):
                w.append({"obs": rows[i]})
                w.end()  # trajectories round the shards
                time.sleep(0.002)
        queued = queue.sample(8, timeout=10)
        assert np.array_equal(np.asarray(queued["obs"]).reshape(8, 4), rows[:8])
        assert set((np.asarray(queued.item_keys) >> np.uint64(56)).tolist()) == {0, 1}
        # A max heap over both: each draw the highest priority of any shard.
        heap = db.create_table("heap", {"obs": ("float32", (4,))}, capacity_steps=64,
                               block_steps=1, selector="max_heap", max_times_sampled=1)
        prios = rng.permutation(8).astype(float) + 1.0
        with heap.writer() as w:
            for i, p in enumerate(prios):
                w.append({"obs": rows[i]}, priority=p)
                w.end()  # trajectories round the shards
        drawn = heap.sample(5, timeout=10)
        assert np.asarray(drawn.priorities).tolist() == [8.0, 7.0, 6.0, 5.0, 4.0]
        assert set((np.asarray(drawn.item_keys) >> np.uint64(56)).tolist()) == {0, 1}
        # Shard 1 down: a sample raises, naming it, unless the connection
        # skips unavailable shards; then it draws from shard 0 alone.
        skipping = replaydb.connect(address, skip_unavailable_shards=True).table("experience")
        servers[1].proc.kill()
        servers[1].proc.wait()
        with pytest.raises(replaydb.UnavailableError, match="shard 1"):
            for _ in range(100):  # until the connection has seen it (5 s at most)
                table.sample(64, timeout=10)
                time.sleep(0.05)
        for _ in range(100):
            try:
                batch = skipping.sample(64, importance_beta=0.5, timeout=10)
                break
            except replaydb.UnavailableError:  # its own connection saw it first
                time.sleep(0.05)
        keys = np.asarray(batch.item_keys)
        assert set((keys >> np.uint64(56)).tolist()) == {0}
        # Shard 0's 12 items, each of priority 1: chances of 1/12.
        assert skipping.mass() == (12.0, 12)
        assert np.allclose(np.asarray(batch.probabilities), 1 / 12)
        db.close()
    finally:
        os.environ.pop("UCX_TLS", None)
        assert servers[0].stop() == 0, servers[0].output
        assert servers[1].stop() in (0, -signal.SIGKILL), servers[1].output  # killed above
