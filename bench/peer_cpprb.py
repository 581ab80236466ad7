#!/usr/bin/env python3
"""bench/peer_cpprb.py [RESULTS_DIR]: time cpprb's PrioritizedReplayBuffer
training step (sample B with IS weights + update_priorities of B) on a full
buffer of N one-float items, N in {2^16, 10^6, 2^24}, B = 1024, and print it
beside per.h's buffer cycle (bench_tree --op cycle) from RESULTS_DIR/
tree_double.csv when that file exists. Writes RESULTS_DIR/peer_cpprb.csv.

Run it through bench/peer_cpprb.sh (makes a virtualenv with cpprb from
PyPI). Each figure: median of 5 timed loops of >= 0.2 s, thread CPU time
(time.thread_time), like bench_tree --cpu-clock. The Python calls are part
of what a cpprb user pays; the TD errors are drawn before the timing.
"""
import csv
import os
import sys
import time

import numpy as np
from cpprb import PrioritizedReplayBuffer

SIZES = [1 << 16, 1000000, 1 << 24]
B = 1024


def measure(rb, tds, reps=5, min_time=0.2):
    state = {"j": 0}

    def loop(iters):
        t0 = time.thread_time()
        for _ in range(iters):
            s = rb.sample(B, beta=0.4)
            rb.update_priorities(s["indexes"], tds[state["j"]])
            state["j"] = (state["j"] + 1) % len(tds)
        return time.thread_time() - t0

    iters = 1
    while True:  # calibration, doubles as warm-up
        t = loop(iters)
        if t >= min_time:
            break
        iters = max(iters * 2, int(iters * min_time * 1.1 / max(t, 1e-6)) + 1)
    times = sorted(loop(iters) / (iters * B) * 1e9 for _ in range(reps))
    return times[len(times) // 2], times[0], times[-1]


def per_cycle(res):
    path = os.path.join(res, "tree_double.csv")
    out = {}
    if os.path.exists(path):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["op"] == "cycle" and int(r["b"]) == B:
                    out[int(r["n"])] = float(r["per_ns"])
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    res = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "results")
    os.makedirs(res, exist_ok=True)
    per = per_cycle(res)
    rng = np.random.default_rng(1)
    rows = []
    print(f"cpprb PrioritizedReplayBuffer: sample {B} + update_priorities, "
          "ns per item (thread CPU time)")
    print(f"{'N':>10} {'cpprb':>10} {'min-max':>17} {'per.h cycle':>12} "
          f"{'cpprb/per.h':>12}")
    for n in SIZES:
        rb = PrioritizedReplayBuffer(n, {"obs": {"shape": 1}}, alpha=0.6,
                                     eps=1e-6)
        chunk = 1 << 16
        for i in range(0, n, chunk):
            rb.add(obs=np.zeros((min(chunk, n - i), 1), dtype=np.float32))
        tds = [rng.random(B, dtype=np.float64) for _ in range(64)]
        med, lo, hi = measure(rb, tds)
        p = per.get(n)
        ratio = f"{med / p:.2f}x" if p else "-"
        print(f"{n:>10} {med:>10.1f} {lo:>8.1f}-{hi:<8.1f} "
              f"{(f'{p:.1f}' if p else '-'):>12} {ratio:>12}")
        rows.append({"n": n, "b": B, "cpprb_ns": f"{med:.2f}",
                     "cpprb_min": f"{lo:.2f}", "cpprb_max": f"{hi:.2f}",
                     "per_cycle_ns": f"{p:.2f}" if p else ""})
        del rb
    with open(os.path.join(res, "peer_cpprb.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
