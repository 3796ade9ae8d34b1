#!/usr/bin/env python3
"""A complete DQN learner on a prioritized replaydb table.

The environment, CartPole (a pole balanced on a cart, the classic control task),
is written here in PyTorch and runs vectorised: --envs copies step at once on
the learner's device. Transitions go into a prioritized replaydb table from
device tensors with no host copy (on a GPU: the table's hot tier and its
priorities live in GPU memory); batches come back as PyTorch tensors through
DLPack with no copy; TD errors go back as priorities, from the device.

Every --checkpoint-every iterations the learner takes a database checkpoint
and saves its network and optimizer next to it (written to a temporary file,
then renamed: the file is always a whole checkpoint). Killed at any point (try
--kill-after N), it resumes with exactly this:
  - the network, optimizer and iteration of the last checkpoint;
  - on the host, the replay as it was when the process stopped: every
    transition appended before the kill (the table is logged, and the log
    replays what came after the checkpoint), so up to --checkpoint-every
    iterations of transitions more than at the network's checkpoint. They are
    kept: DQN learns off-policy, from older policies' transitions as much as
    from the current one's;
  - on a GPU, the replay of the same checkpoint as the network: a table in
    device memory is not logged by default (TableLogging::kDefault keeps the
    device-only append path), so it is durable as of its checkpoints.
It prints both counts when it resumes.

    python3 examples/dqn_learner.py --dir /tmp/dqn              # GPU if there is one
    python3 examples/dqn_learner.py --dir /tmp/dqn --device cpu

It prints a line per evaluation: iteration, environment steps, replay size and
the greedy policy's mean return (CartPole's best is 500).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import replaydb  # noqa: E402


class CartPole:
    """CartPole-v1's dynamics (Barto, Sutton and Anderson 1983), for `n`
    environments at once as tensors on `device`. An episode ends when the pole
    falls past 12 degrees or the cart leaves [-2.4, 2.4] (terminal), or after 500
    steps (truncated)."""

    def __init__(self, n: int, device: torch.device, generator: torch.Generator):
        self.n = n
        self.device = device
        self.gen = generator
        self.state = torch.zeros(n, 4, device=device)
        self.steps = torch.zeros(n, dtype=torch.int64, device=device)
        self.reset(torch.ones(n, dtype=torch.bool, device=device))

    def reset(self, which: torch.Tensor) -> None:
        fresh = (torch.rand(self.n, 4, generator=self.gen, device=self.device) - 0.5) * 0.1
        self.state = torch.where(which[:, None], fresh, self.state)
        self.steps = torch.where(which, torch.zeros_like(self.steps), self.steps)

    def step(self, action: torch.Tensor):
        """Returns (next_state, reward, terminal, truncated); does not reset."""
        x, x_dot, theta, theta_dot = self.state.unbind(1)
        force = torch.where(action == 1, 10.0, -10.0)
        cos, sin = torch.cos(theta), torch.sin(theta)
        total_mass, pole_mass_length = 1.1, 0.05
        temp = (force + pole_mass_length * theta_dot**2 * sin) / total_mass
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / total_mass))
        x_acc = temp - pole_mass_length * theta_acc * cos / total_mass
        tau = 0.02
        x = x + tau * x_dot
        x_dot = x_dot + tau * x_acc
        theta = theta + tau * theta_dot
        theta_dot = theta_dot + tau * theta_acc
        self.state = torch.stack([x, x_dot, theta, theta_dot], 1)
        self.steps += 1
        terminal = (x.abs() > 2.4) | (theta.abs() > 12 * 2 * math.pi / 360)
        truncated = (self.steps >= 500) & ~terminal
        reward = torch.ones(self.n, device=self.device)
        return self.state, reward, terminal, truncated


def q_network() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                         nn.Linear(128, 2))


@torch.no_grad()
def evaluate(net: nn.Module, device: torch.device, episodes: int, seed: int) -> float:
    """Mean return of the greedy policy over `episodes` fresh episodes."""
    gen = torch.Generator(device=device).manual_seed(seed)
    env = CartPole(episodes, device, gen)
    returns = torch.zeros(episodes, device=device)
    alive = torch.ones(episodes, dtype=torch.bool, device=device)
    for _ in range(500):
        action = net(env.state).argmax(1)
        _, reward, terminal, truncated = env.step(action)
        returns += reward * alive
        alive &= ~(terminal | truncated)
        if not alive.any():
            break
    return float(returns.mean())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True, help="directory of the database and the network")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--envs", type=int, default=32)
    p.add_argument("--iterations", type=int, default=3000)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--capacity", type=int, default=100_000, help="replay capacity in steps")
    p.add_argument("--learning-starts", type=int, default=1000, help="transitions first")
    p.add_argument("--checkpoint-every", type=int, default=500)
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--kill-after", type=int, default=0,
                   help="SIGKILL this process at this iteration (to try resuming)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    torch.manual_seed(args.seed)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    net_path = Path(args.dir) / "learner.pt"

    db = replaydb.open(str(Path(args.dir) / "replay"))
    if "transitions" in db:
        table = db["transitions"]
    else:
        table = db.create_table(
            "transitions",
            {"obs": (torch.float32, (4,)), "action": torch.int64, "reward": torch.float32,
             "next_obs": (torch.float32, (4,)), "terminal": torch.float32},
            capacity_steps=args.capacity, selector="prioritized", priority_exponent=0.6,
            # On a GPU the hot tier and the priorities live in its memory.
            placement=f"device:{device.index or 0}" if on_gpu else "host",
            priority_device=(device.index or 0) if on_gpu else None,
            rate_limiter=replaydb.RateLimiter.min_size(args.learning_starts))

    net, target = q_network().to(device), q_network().to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    start = 0
    if net_path.exists():
        saved = torch.load(net_path, map_location=device)
        net.load_state_dict(saved["net"])
        optimizer.load_state_dict(saved["optimizer"])
        start = saved["iteration"]
        now = table.info()["num_items"]
        print(f"resumed at iteration {start} (the network's checkpoint) with {now} "
              f"transitions in replay: {saved['replay_items']} at the checkpoint, "
              f"{now - saved['replay_items']} more written after it, until the process "
              "stopped", flush=True)
    target.load_state_dict(net.state_dict())

    gen = torch.Generator(device=device).manual_seed(args.seed + start)
    env = CartPole(args.envs, device, gen)
    writer = table.vector_writer(args.envs)
    env_steps = 0
    t0 = time.time()
    print(f"iteration {start}: greedy return {evaluate(net, device, 64, 7):.1f}", flush=True)
    for it in range(start + 1, args.iterations + 1):
        # Act: epsilon-greedy over the vector of environments.
        epsilon = max(0.05, 1.0 - it / (0.3 * args.iterations))
        with torch.no_grad():
            greedy = net(env.state).argmax(1)
        explore = torch.rand(args.envs, generator=gen, device=device) < epsilon
        action = torch.where(explore, torch.randint(0, 2, (args.envs,), generator=gen,
                                                    device=device), greedy)
        obs = env.state
        next_obs, reward, terminal, truncated = env.step(action)
        # One transition per environment, straight from these tensors.
        writer.append({"obs": obs.contiguous(), "action": action.contiguous(),
                       "reward": reward, "next_obs": next_obs.contiguous(),
                       "terminal": terminal.float()})
        env_steps += args.envs
        done = terminal | truncated
        if done.any():
            # One call per reason for all environments that finished.
            writer.end_many(terminal, "terminal")
            writer.end_many(truncated & ~terminal, "truncated")
            env.reset(done)

        # Learn: prioritized sample, double-DQN target, Huber loss, new priorities.
        if table.info()["num_items"] >= args.learning_starts:
            beta = min(1.0, 0.4 + 0.6 * it / args.iterations)
            batch = table.sample(args.batch, device=args.device if on_gpu else "cpu",
                                 importance_beta=beta)
            t = {name: torch.from_dlpack(batch[name]).to(device)
                 for name in ("obs", "action", "reward", "next_obs", "terminal")}
            weights = torch.from_dlpack(batch.weights).to(device, torch.float32)
            s, a = t["obs"][:, 0], t["action"][:, 0]
            with torch.no_grad():
                best = net(t["next_obs"][:, 0]).argmax(1, keepdim=True)
                bootstrap = target(t["next_obs"][:, 0]).gather(1, best).squeeze(1)
                y = t["reward"][:, 0] + 0.99 * (1 - t["terminal"][:, 0]) * bootstrap
            q = net(s).gather(1, a[:, None]).squeeze(1)
            td = y - q
            loss = (weights * nn.functional.smooth_l1_loss(q, y, reduction="none")).mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 10.0)
            optimizer.step()
            # New priorities for the drawn keys, read where they are (on a GPU:
            # from device memory, no host copy).
            table.update_priorities(batch.item_keys, (td.detach().abs() + 1e-3).float())
            with torch.no_grad():
                for p_t, p in zip(target.parameters(), net.parameters()):
                    p_t.mul_(0.99).add_(0.01 * p)

        if it % args.checkpoint_every == 0:
            db.checkpoint()
            tmp = net_path.with_suffix(".tmp")
            torch.save({"net": net.state_dict(), "optimizer": optimizer.state_dict(),
                        "iteration": it, "replay_items": table.info()["num_items"]}, tmp)
            os.replace(tmp, net_path)
        if it % args.eval_every == 0 or it == args.iterations:
            print(f"iteration {it}: env steps {env_steps}, replay {table.info()['num_items']}, "
                  f"greedy return {evaluate(net, device, 64, 7):.1f}, "
                  f"{time.time() - t0:.1f} s", flush=True)
        if args.kill_after and it == args.kill_after:
            print(f"killing myself at iteration {it}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    writer.close()
    db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
