"""DQN with prioritized replay on CartPole-v1, everything on the GPU: a
batch of CartPoles stepped in PyTorch, the networks and Adam in PyTorch,
the replay in per.cuda.ReplayBuffer, and each training step one CUDA graph
(torch.cuda.graph), captured once and replayed.

One step (one graph replay):
    act     E CartPoles (Gymnasium's CartPole-v1 dynamics, in float64)
            act epsilon-greedily on the online network; finished episodes'
            returns go into a ring on the device, the envs restart;
    add     per.cuda.ReplayBuffer.add_batch: the E transitions, at the max
            priority;
    sample  B transitions with their ids and IS weights (beta annealed by
            the buffer on the device);
    learn   double DQN, Huber loss times the IS weights, Adam with the
            gradient norm clipped at 10, the target network by Polyak
            averaging (tau 0.005);
    update  per.cuda.ReplayBuffer.update: priorities from the TD errors.
Epsilon and every counter live on the device, so the graph never changes;
the host waits only to print progress every --every steps. The agent is
examples/gpu/gpu_dqn.cu's (4-64-64-2, one-step returns, Adam 5e-4, E = 8,
B = 128). Solved: the last 100 episodes average 475 (exit 0; exit 1 when
--steps runs out).

    python python/examples/gpu_dqn_cartpole.py [--seed S] [--steps N] ...

--host runs the same program on the CPU: PyTorch on the CPU and
per.cuda.host, the CPU emulation of per's kernels (built for tests with
-Csetup-args=-Dpython_cuda_host=true), without graphs; --smoke runs 3000
environment steps and checks the machinery (every call ran, no device
error, the replay downloads and passes its check), not the learning:
CI's torch stage (.ci/run) runs `--host --smoke`.

Needs torch, numpy and per with per.cuda (pip install . where nvcc is on
PATH).
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import per
import per.cuda as pc

SOLVED_AT = 475.0
WINDOW = 100
TORCH_DTYPE = {np.float32: torch.float32, np.int64: torch.int64, np.bool_: torch.bool}


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--envs", type=int, default=8, help="CartPoles per step")
    ap.add_argument("--batch", type=int, default=128, help="transitions per gradient step")
    ap.add_argument("--capacity", type=int, default=100_000)
    ap.add_argument("--steps", type=int, default=600_000, help="environment-step budget")
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--alpha", type=float, default=0.6)
    ap.add_argument("--every", type=int, default=20_000, help="steps between progress lines")
    ap.add_argument("--host", action="store_true",
                    help="the CPU: PyTorch on the CPU and per.cuda.host")
    ap.add_argument("--no-graph", action="store_true", help="run each step without a graph")
    ap.add_argument("--smoke", action="store_true", help="3000 steps: the machinery only")
    a = ap.parse_args(argv)
    if a.smoke:
        a.steps = min(a.steps, 3000)
    return a


class CartPoles:
    """E CartPole-v1 environments as float64 tensors (Gymnasium's Euler
    dynamics, thresholds and 500-step limit)."""

    G, MC, MP, LEN, FORCE, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    X_MAX, TH_MAX, LIMIT = 2.4, 12 * 2 * math.pi / 360, 500

    def __init__(self, E, device):
        self.s = torch.empty(E, 4, dtype=torch.float64, device=device).uniform_(-0.05, 0.05)
        self.steps = torch.zeros(E, dtype=torch.int64, device=device)
        self.ret = torch.zeros(E, dtype=torch.float32, device=device)

    def step(self, action):
        """Advance with action (E,) in {0, 1}; returns (next_obs, terminated,
        ended), then restarts the ended ones."""
        x, xd, th, thd = self.s.unbind(1)
        force = torch.where(action == 1, self.FORCE, -self.FORCE).double()
        c, s = torch.cos(th), torch.sin(th)
        total, pml = self.MC + self.MP, self.MP * self.LEN
        temp = (force + pml * thd * thd * s) / total
        thacc = (self.G * s - c * temp) / (self.LEN * (4.0 / 3.0 - self.MP * c * c / total))
        xacc = temp - pml * thacc * c / total
        nxt = torch.stack((x + self.TAU * xd, xd + self.TAU * xacc,
                           th + self.TAU * thd, thd + self.TAU * thacc), 1)
        self.steps += 1
        self.ret += 1.0
        term = (nxt[:, 0].abs() > self.X_MAX) | (nxt[:, 2].abs() > self.TH_MAX)
        ended = term | (self.steps >= self.LIMIT)
        fresh = torch.empty_like(nxt).uniform_(-0.05, 0.05)
        # in place: a captured graph reads and writes these same tensors
        self.s.copy_(torch.where(ended.unsqueeze(1), fresh, nxt))
        return nxt.float(), term, ended

    def restart(self, ended):
        self.steps.masked_fill_(ended, 0)
        self.ret.masked_fill_(ended, 0.0)


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 2))


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    if a.host:
        if not pc.host.available():
            print("--host needs per._cuda_host: pip install . "
                  "-Csetup-args=-Dpython_cuda_host=true", file=sys.stderr)
            return 2
        device, ns = torch.device("cpu"), pc.host
    else:
        if not pc.available():
            print(pc.unavailable_reason(), file=sys.stderr)
            return 2
        if not torch.cuda.is_available():
            print("no CUDA device (try --host)", file=sys.stderr)
            return 77
        device, ns = torch.device("cuda"), pc
    graphs = not (a.host or a.no_graph)
    torch.manual_seed(a.seed)
    E, B = a.envs, a.batch
    gamma, tau, learn_start, explore, eps_final = 0.99, 0.005, 1000, 10_000, 0.01

    item = {"obs": (np.float32, (4,)), "act": np.int64, "rew": np.float32,
            "next_obs": (np.float32, (4,)), "done": np.bool_}
    updates = max((a.steps - learn_start) // E, 1)
    buf = ns.ReplayBuffer(a.capacity, item, max_batch=max(B, E), alpha=a.alpha,
                          beta0=0.4, beta1=1.0, beta_steps=updates, seed=a.seed,
                          align=True)

    def static(shape, np_dtype):
        """A tensor at a fixed address that the buffer may read: device
        memory on the GPU, the emulation's "device memory" with --host."""
        if a.host:
            return torch.from_dlpack(pc.host.to_device(np.zeros(shape, np_dtype)))
        return torch.zeros(shape, dtype=TORCH_DTYPE[np_dtype], device=device)

    new = {"obs": static((E, 4), np.float32), "act": static(E, np.int64),
           "rew": static(E, np.float32), "next_obs": static((E, 4), np.float32),
           "done": static(E, np.bool_)}
    new["rew"].fill_(1.0)
    td_in = static(B, np.float32)

    net, target = mlp().to(device), mlp().to(device)
    target.load_state_dict(net.state_dict())
    opt = torch.optim.Adam(net.parameters(), lr=a.lr, capturable=graphs)
    params, tparams = list(net.parameters()), list(target.parameters())
    envs = CartPoles(E, device)
    obs = envs.s.float()
    t_env = torch.zeros((), dtype=torch.float64, device=device)  # env steps
    ring = torch.zeros(WINDOW + 1, device=device)  # returns; slot WINDOW: none
    episodes = torch.zeros((), dtype=torch.int64, device=device)
    state = {"obs": obs}

    def act_and_add():
        o = state["obs"]
        eps = torch.clamp(1.0 - (1.0 - eps_final) * t_env / explore, min=eps_final)
        with torch.no_grad():
            greedy = net(o).argmax(1)
        rand = torch.randint(0, 2, (E,), device=device)
        action = torch.where(torch.rand(E, device=device) < eps, rand, greedy)
        nxt, term, ended = envs.step(action)
        # finished episodes' returns into the ring, in env order
        k = torch.cumsum(ended.long(), 0) - 1
        slot = torch.where(ended, (episodes + k) % WINDOW, WINDOW)
        ring.scatter_(0, slot, envs.ret)
        episodes.add_(ended.long().sum())
        envs.restart(ended)
        t_env.add_(E)
        new["obs"].copy_(o)
        new["act"].copy_(action)
        new["next_obs"].copy_(nxt)
        new["done"].copy_(term)
        buf.add_batch(**new)
        o.copy_(envs.s.float())

    def learn():
        b = buf.sample(B)
        q = net(b["obs"]).gather(1, b["act"].unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            a2 = net(b["next_obs"]).argmax(1, keepdim=True)
            q2 = target(b["next_obs"]).gather(1, a2).squeeze(1)
            y = b["rew"] + gamma * (~b["done"]).float() * q2
        loss = (b["weights"] * F.smooth_l1_loss(q, y, reduction="none")).mean()
        opt.zero_grad(set_to_none=not graphs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0, foreach=True)
        opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(tparams, params, tau)
            td_in.copy_(q.detach() - y)
        buf.update(b["ids"], td_in)

    def train_step():
        act_and_add()
        learn()

    # fill: learn_start environment steps before any update
    while float(t_env) < learn_start:
        act_and_add()
    buf.status()
    step_fn = train_step
    if graphs:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm up cuBLAS and Adam's state
                train_step()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            train_step()
        step_fn = g.replay
    print(f"gpu_dqn_cartpole: {'host emulation' if a.host else torch.cuda.get_device_name()}"
          f", {'one CUDA graph per step' if graphs else 'no graph'}, E {E}, B {B}, "
          f"seed {a.seed}, per {per.__version__}", flush=True)

    t0, s0 = time.perf_counter(), float(t_env)
    steps, solved, avg = int(s0), False, float("nan")
    next_print = steps + a.every
    while steps < a.steps:
        step_fn()
        steps += E
        if steps >= next_print or steps >= a.steps:
            next_print += a.every
            buf.status()  # waits: the first device error would raise here
            n = int(episodes)
            avg = float(ring[:min(n, WINDOW)].mean()) if n else float("nan")
            rate = (float(t_env) - s0) / (time.perf_counter() - t0)
            print(f"step {steps:7d}  episodes {n:6d}  avg100 {avg:6.1f}  "
                  f"{rate:8.0f} env steps/s", flush=True)
            if n >= WINDOW and avg >= SOLVED_AT:
                solved = True
                break
    buf.status()
    cpu = buf.to_cpu()
    cpu.check()
    rate = (float(t_env) - s0) / (time.perf_counter() - t0)
    print(f"replay: {len(cpu)} transitions downloaded and checked; "
          f"{rate:.0f} env steps/s, {rate / E:.0f} updates/s")
    if a.smoke:
        if a.host and pc.host.module.shim_races():
            print("the emulation saw threads of a launch conflict")
            return 1
        print(f"smoke: {steps} steps, {int(episodes)} episodes, every call ran")
        return 0
    if solved:
        print(f"solved at {steps} environment steps: avg100 {avg:.1f}")
        return 0
    print(f"not solved in {a.steps} steps: avg100 {avg:.1f}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
