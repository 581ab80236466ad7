#!/usr/bin/env python3
"""bench/peers_frames.py [RESULTS_DIR] [--n N] [--batch B] [--reps R]
[--min-time S]: pixel replay from Python, per.FrameBuffer against the
frame-compressing buffers Python users run today.

Transitions are Atari's after the usual preprocessing: 84x84 uint8
frames stacked 4 deep, an int64 action, a float32 reward, a done flag;
episodes of 1000 steps. Sides:

  per    per.FrameBuffer (each frame once; PER, alpha 0.6): step(), then
         sample(B) -> obs, next_obs (B, 4, 84, 84), action, reward,
         discount, done, ids, IS weights
  cpprb  cpprb.PrioritizedReplayBuffer with next_of="obs" and
         stack_compress="obs" (obs (84, 84, 4), the stack last as it
         requires; on_episode_end() at each end): add(), then
         sample(B, beta=0.4) -> obs, next_obs, act, rew, done, weights,
         indexes
  sb3    stable_baselines3's ReplayBuffer(optimize_memory_usage=True):
         uniform (SB3 has no PER), obs (4, 84, 84) stored once a step;
         add(), then sample(B) (torch tensors on the CPU)

A side whose package does not import is left out and said so.

memory: each side in a fresh subprocess: the resident set (VmRSS) after
holding --n transitions (default 100000) minus before the buffer was
made, per transition; also the add time per step over the fill.
sample: the three sides in one process, full buffers of --n transitions,
thread CPU time, each side calibrated to loops of --min-time seconds
(default 0.2), --reps rounds (default 7) rotating the order; the median
microseconds per batch of --batch (default 32).

Writes RESULTS_DIR/peers_frames.{csv,txt} (default bench/results).
"""
import argparse
import csv
import os
import platform
import subprocess
import sys
import time

import numpy as np

W, K, EP = 84, 4, 1000


def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def frames_source(n_pool=64, seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n_pool, W, W), dtype=np.uint8)


class PerSide:
    name = "per"

    def __init__(self, n):
        import per
        self.rb = per.FrameBuffer(n, (W, W), np.uint8, stack=K, seed=1)
        self.last = None

    def add(self, t, pool):
        f, nf = pool[t % len(pool)], pool[(t + 1) % len(pool)]
        end = t % EP == EP - 1
        self.rb.step(f, t % 6, 1.0, nf, end, False)

    def sample(self, B):
        return self.rb.sample(B)


class CpprbSide:
    name = "cpprb"

    def __init__(self, n):
        import cpprb
        self.rb = cpprb.PrioritizedReplayBuffer(
            n, {"obs": {"shape": (W, W, K), "dtype": np.uint8},
                "act": {"dtype": np.int64}, "rew": {}, "done": {}},
            next_of="obs", stack_compress="obs", alpha=0.6)
        self.stack = None

    def add(self, t, pool):
        f, nf = pool[t % len(pool)], pool[(t + 1) % len(pool)]
        if self.stack is None:
            self.stack = np.stack([f] * K, axis=-1)
        nxt = np.concatenate([self.stack[..., 1:], nf[..., None]], axis=-1)
        end = t % EP == EP - 1
        self.rb.add(obs=self.stack, act=t % 6, rew=1.0, next_obs=nxt,
                    done=float(end))
        self.stack = nxt
        if end:
            self.rb.on_episode_end()
            self.stack = None

    def sample(self, B):
        return self.rb.sample(B, beta=0.4)


class Sb3Side:
    name = "sb3"

    def __init__(self, n):
        import gymnasium as gym
        import torch
        from stable_baselines3.common.buffers import ReplayBuffer
        torch.set_num_threads(1)
        obs_space = gym.spaces.Box(0, 255, (K, W, W), np.uint8)
        self.rb = ReplayBuffer(n, obs_space, gym.spaces.Discrete(6), "cpu",
                               optimize_memory_usage=True,
                               handle_timeout_termination=False)
        self.stack = None

    def add(self, t, pool):
        f, nf = pool[t % len(pool)], pool[(t + 1) % len(pool)]
        if self.stack is None:
            self.stack = np.stack([f] * K)
        nxt = np.concatenate([self.stack[1:], nf[None]])
        end = t % EP == EP - 1
        self.rb.add(self.stack[None], nxt[None], np.array([t % 6]),
                    np.array([1.0], np.float32), np.array([end]), [{}])
        self.stack = None if end else nxt

    def sample(self, B):
        return self.rb.sample(B)


SIDES = {"per": PerSide, "cpprb": CpprbSide, "sb3": Sb3Side}


IMPORTS = {"per": ["per"], "cpprb": ["cpprb"],
           "sb3": ["torch", "gymnasium", "stable_baselines3.common.buffers"]}


def memory_child(side, n):
    pool = frames_source()
    for mod in IMPORTS[side]:  # the packages' own memory is not the buffer's
        __import__(mod)
    before = rss()
    s = SIDES[side](n)
    t0 = time.perf_counter()
    for t in range(n + n // 10):
        s.add(t, pool)
    dt = time.perf_counter() - t0
    s.sample(32)
    print(f"{(rss() - before) / n:.1f} {dt / (n + n // 10) * 1e6:.2f}")


def available():
    out, missing = [], []
    for name, mod in (("per", "per"), ("cpprb", "cpprb"),
                      ("sb3", "stable_baselines3")):
        try:
            __import__(mod)
            out.append(name)
        except ImportError:
            missing.append(name)
    return out, missing


def calibrate(fn, min_time):
    k = 1
    while True:
        t0 = time.thread_time()
        for _ in range(k):
            fn()
        if time.thread_time() - t0 >= min_time:
            return k
        k *= 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="?", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--memory-child", nargs=2, metavar=("SIDE", "N"))
    a = ap.parse_args()
    if a.memory_child:
        memory_child(a.memory_child[0], int(a.memory_child[1]))
        return
    sides, missing = available()
    lines = [f"peers_frames: N = {a.n}, {W}x{W} uint8 frames, stack {K}, "
             f"episodes of {EP}, batch {a.batch}",
             f"python {platform.python_version()}, {platform.machine()}, "
             f"{os.cpu_count()} cpus"]
    if missing:
        lines.append("left out (not installed): " + ", ".join(missing))
    rows = []
    frame = W * W
    lines.append(f"{'side':6} {'bytes/transition':>17} {'x frame':>8} "
                 f"{'add us/step':>12}")
    for name in sides:
        r = subprocess.run([sys.executable, os.path.abspath(__file__),
                            "--memory-child", name, str(a.n)],
                           capture_output=True, text=True, check=True)
        per_t, add_us = (float(x) for x in r.stdout.split()[-2:])
        lines.append(f"{name:6} {per_t:17.0f} {per_t / frame:8.2f} {add_us:12.2f}")
        rows.append({"op": "memory", "side": name, "value": f"{per_t:.1f}",
                     "unit": "bytes/transition"})
        rows.append({"op": "add", "side": name, "value": f"{add_us:.3f}",
                     "unit": "us/step"})
    # sample: every side full, in one process
    pool = frames_source()
    objs = {}
    for name in sides:
        s = SIDES[name](a.n)
        for t in range(a.n + a.n // 10):
            s.add(t, pool)
        objs[name] = s
    fns = {name: (lambda s=s: s.sample(a.batch)) for name, s in objs.items()}
    iters = {name: calibrate(fn, a.min_time) for name, fn in fns.items()}
    times = {name: [] for name in fns}
    order = list(fns)
    for rep in range(a.reps):
        for name in order[rep % len(order):] + order[:rep % len(order)]:
            t0 = time.thread_time()
            for _ in range(iters[name]):
                fns[name]()
            times[name].append((time.thread_time() - t0) / iters[name] * 1e6)
    base = np.median(times["per"]) if "per" in times else None
    lines.append(f"{'side':6} {'us/batch':>10} {'min-max':>17} {'side/per':>9}")
    for name, ts in times.items():
        med = float(np.median(ts))
        ratio = med / base if base else float("nan")
        lines.append(f"{name:6} {med:10.1f} {min(ts):8.1f}-{max(ts):8.1f} "
                     f"{ratio:9.2f}")
        rows.append({"op": "sample", "side": name, "value": f"{med:.2f}",
                     "unit": f"us/batch of {a.batch}"})
    text = "\n".join(lines)
    print(text)
    os.makedirs(a.results, exist_ok=True)
    with open(os.path.join(a.results, "peers_frames.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(a.results, "peers_frames.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, ["op", "side", "value", "unit"])
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
