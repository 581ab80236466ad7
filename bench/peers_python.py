#!/usr/bin/env python3
"""bench/peers_python.py [RESULTS_DIR] [--reps R] [--sizes N,N,...]
[--batches B,B,...] [--min-time S]: per's Python package against the
prioritized replay buffers Python users run today, in one process.

The workload is one training step of a DQN learner, timed per batch of B:
sample B transitions with IS weights (beta = 0.4, fixed), then give the
sampled ids their new priorities from B TD errors (alpha = 0.6,
eps = 1e-6). The transition is CartPole's (obs and next_obs float32[4],
action int64, reward float32, done float32), the buffer is full (N items
added first, with the same values for every buffer) and the TD errors are
drawn before the timing, the same arrays for every buffer. Sides:

  per      per.ReplayBuffer: sample(B, beta=) + update(ids, td)
  cpprb    cpprb.PrioritizedReplayBuffer: sample(B, beta=) +
           update_priorities(indexes, |td|)
  torchrl  torchrl.data.PrioritizedReplayBuffer over a LazyTensorStorage:
           sample(B, return_info=True) + update_priority(index, |td|),
           torch on one thread (torch.set_num_threads(1))

A side whose package does not import is left out and said so. Timing:
thread CPU time (time.thread_time), each side calibrated to loops of at
least --min-time seconds (default 0.2); then --reps rounds (default 7),
each running every side's loop once, the order rotating from round to
round, so slow drifts of the machine fall on every side alike. Printed:
the median microseconds per batch, min-max, and peer / per (how many times
faster per is). After the timing each side's last sample is checked: B
indices inside the buffer and weights in (0, 1].

Writes RESULTS_DIR/peers_python.{csv,txt} and peers_python_machine.txt
(default bench/results) and prints the table; bench/report.py turns them
into bench/README.md's Python section. Run it through
bench/peers_python.sh, which makes the virtualenv.
"""
import argparse
import csv
import os
import platform
import sys
import time

import numpy as np

ALPHA, BETA, EPS = 0.6, 0.4, 1e-6
OBS = 4
N_TD = 32  # TD arrays cycled through per side


def transitions(rng, n):
    """The same n transitions for every side, as plain arrays."""
    return {
        "obs": rng.standard_normal((n, OBS), dtype=np.float32),
        "action": rng.integers(0, 2, n, dtype=np.int64),
        "reward": np.ones(n, np.float32),
        "next_obs": rng.standard_normal((n, OBS), dtype=np.float32),
        "done": (rng.random(n) < 0.05).astype(np.float32),
    }


CHUNK = 1 << 16


def chunks(data, n):
    for i in range(0, n, CHUNK):
        yield {k: v[i:i + CHUNK] for k, v in data.items()}


# -- the sides: each make() returns (step(b, td) -> sample, check(sample, b, n))


def make_per(n, data):
    import per
    rb = per.ReplayBuffer(n, {"obs": ("f4", OBS), "action": "i8", "reward": "f4",
                              "next_obs": ("f4", OBS), "done": "f4"},
                          alpha=ALPHA, eps=EPS, seed=1)
    for c in chunks(data, n):
        rb.add(c)

    def step(b, td):
        s = rb.sample(b, beta=BETA)
        rb.update(s["ids"], td)
        return s

    def check(s, b):
        slots = s["ids"] & 0xFFFFFFFF
        return (len(s["ids"]) == b and bool(np.all(slots < n))
                and len(s["obs"]) == b, s["weights"])
    return rb, step, check


def make_cpprb(n, data):
    from cpprb import PrioritizedReplayBuffer
    rb = PrioritizedReplayBuffer(n, {"obs": {"shape": OBS}, "action": {"dtype": np.int64},
                                     "reward": {}, "next_obs": {"shape": OBS},
                                     "done": {}}, alpha=ALPHA, eps=EPS)
    for c in chunks(data, n):
        rb.add(**c)

    def step(b, td):
        s = rb.sample(b, beta=BETA)
        rb.update_priorities(s["indexes"], np.abs(td))
        return s

    def check(s, b):
        idx = np.asarray(s["indexes"])
        return (len(idx) == b and bool(np.all(idx < n)) and len(s["obs"]) == b,
                np.asarray(s["weights"]))
    return rb, step, check


def make_torchrl(n, data):
    import logging
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, PrioritizedReplayBuffer
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)  # no line per storage
    rb = PrioritizedReplayBuffer(alpha=ALPHA, beta=BETA, eps=EPS,
                                 storage=LazyTensorStorage(n))
    for c in chunks(data, n):
        m = len(c["reward"])
        rb.extend(TensorDict({k: torch.from_numpy(np.ascontiguousarray(v))
                              for k, v in c.items()}, batch_size=[m]))

    def step(b, td):
        s, info = rb.sample(b, return_info=True)
        rb.update_priority(info["index"], torch.from_numpy(np.abs(td)))
        return s, info

    def check(s, b):
        td, info = s
        idx = np.asarray(info["index"])
        return (len(idx) == b and bool(np.all(idx < n)) and td.batch_size[0] == b,
                np.asarray(info["priority_weight"], dtype=np.float64))
    return rb, step, check


SIDES = (("per", make_per), ("cpprb", make_cpprb), ("torchrl", make_torchrl))


def version(name):
    try:
        from importlib.metadata import version as v
        return v(name)
    except Exception:  # noqa: BLE001 - a version is only printed
        return "?"


def available():
    out, missing = [], []
    for name, make in SIDES:
        try:
            __import__({"per": "per", "cpprb": "cpprb", "torchrl": "torchrl.data"}[name])
            out.append((name, make))
        except Exception as e:  # noqa: BLE001 - any import failure leaves the side out
            if name == "per":
                raise
            missing.append(f"{name} ({type(e).__name__}: {e})")
    return out, missing


LOG = []


def say(line):
    """Print a line of the table and keep it for peers_python.txt."""
    print(line, flush=True)
    LOG.append(line)


def loop(step, b, tds, iters, j0=0):
    t0 = time.thread_time()
    s = None
    for i in range(iters):
        s = step(b, tds[(j0 + i) % len(tds)])
    return time.thread_time() - t0, s


def calibrate(step, b, tds, min_time):
    iters = 1
    while True:  # doubles as the warm-up
        t, _ = loop(step, b, tds, iters)
        if t >= min_time:
            return iters
        iters = max(iters * 2, int(iters * min_time * 1.2 / max(t, 1e-6)) + 1)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="?", default=os.path.join(here, "results"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--sizes", default=f"{1 << 16},{10**6},{1 << 24}")
    ap.add_argument("--batches", default="256,1024")
    ap.add_argument("--min-time", type=float, default=0.2)
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    batches = [int(x) for x in a.batches.split(",")]
    os.makedirs(a.results, exist_ok=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    sides, missing = available()
    names = [s for s, _ in sides]
    vers = {"per": version("per-replay"), "cpprb": version("cpprb"),
            "torchrl": version("torchrl")}
    if "torchrl" in names:
        vers["torch"] = version("torch")
    say("sides: " + ", ".join(f"{s} {vers[s]}" for s in names)
          + (f"; torch {vers['torch']}" if "torch" in vers else ""))
    for m in missing:
        say(f"left out: {m}")
    say(f"python {platform.python_version()}, numpy {np.__version__}; "
          f"reps {a.reps}, min time {a.min_time} s; us per batch "
          "(sample B with IS weights + priority update), thread CPU time")
    head = f"{'N':>9} {'B':>5} " + " ".join(f"{s:>20}" for s in names) + "".join(
        f" {s + '/per':>12}" for s in names if s != "per")
    say(head)
    rng = np.random.default_rng(1)
    rows = []
    for n in sizes:
        data = transitions(rng, n)
        built = [(s, make(n, data)) for s, make in sides]
        for b in batches:
            tds = [rng.standard_normal(b).astype(np.float32) for _ in range(N_TD)]
            iters = {s: calibrate(step, b, tds, a.min_time) for s, (_, step, _) in built}
            times = {s: [] for s in names}
            last = {}
            for r in range(a.reps):
                for k in range(len(built)):
                    s, (_, step, _) = built[(r + k) % len(built)]
                    t, last[s] = loop(step, b, tds, iters[s], r)
                    times[s].append(t / iters[s] * 1e6)
            for s, (_, _, check) in built:
                ok, w = check(last[s], b)
                if not ok or not (np.all(w > 0) and np.all(w <= 1 + 1e-6)):
                    sys.stderr.write(f"peers_python: {s} returned a bad batch at "
                                     f"N = {n}, B = {b}\n")
                    return 1
            med = {s: sorted(v)[len(v) // 2] for s, v in times.items()}
            line = f"{n:>9} {b:>5} "
            line += " ".join(f"{med[s]:>8.1f} ({min(times[s]):.1f}-{max(times[s]):.1f})"
                             .rjust(20) for s in names)
            line += "".join(f" {med[s] / med['per']:>11.2f}x" for s in names if s != "per")
            say(line)
            for s in names:
                rows.append({"n": n, "b": b, "side": s, "version": vers[s],
                             "us_med": f"{med[s]:.3f}", "us_min": f"{min(times[s]):.3f}",
                             "us_max": f"{max(times[s]):.3f}",
                             "per_us": f"{med['per']:.3f}"})
        del built, data
    with open(os.path.join(a.results, "peers_python.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    machine = [f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs",
               f"python {platform.python_version()}, numpy {np.__version__}",
               "sides: " + ", ".join(f"{s} {vers[s]}" for s in names)
               + (f" (torch {vers['torch']}, one thread)" if "torch" in vers else ""),
               f"per: git {os.environ.get('PER_GIT', '?')}",
               "measured: " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               f"load average before: {load}",
               f"arguments: --reps {a.reps} --min-time {a.min_time}"]
    machine += [f"left out: {m}" for m in missing]
    with open(os.path.join(a.results, "peers_python_machine.txt"), "w") as f:
        f.write("\n".join(machine) + "\n")
    with open(os.path.join(a.results, "peers_python.txt"), "w") as f:
        f.write("\n".join(LOG) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
