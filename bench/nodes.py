#!/usr/bin/env python3
"""bench/nodes.py CSV [--capacities N,N,...] [--reps R] [--min-time S]:
per.ReplayBuffer with float nodes (nodes=numpy.float32, per.h's PER_REAL
float) against double nodes (the default), in one run: memory per item
and the time of a training step.

The item is CartPole's transition, 44 bytes: obs float32 (4,), action
int32, reward float32, next_obs float32 (4,), done uint8 (+3 padding
bytes, aligned). A buffer of each capacity (default 2^17, 2^20, 2^22;
alpha 0.6, seed 1) is filled to capacity before anything is measured.

  memory  each node type in a fresh child process (this script, run
          again): VmRSS from /proc/self/status before the buffer is
          made and after it is filled, the difference over the capacity:
          bytes per item, items included (40 of them); the node type
          changes only the trees' part. Linux only; the fill's chunk
          arrays and the allocator's own pages count too, which weigh
          at small capacities: the difference of the two rows is the
          trees'.
  step    one training step of a DQN loop: add 4 items (add_batch),
          sample 256, update their 256 priorities from TD errors. Timing:
          thread CPU time (time.thread_time); each side calibrated to
          loops of at least --min-time seconds (default 0.2, the
          calibration is the warm-up), then --reps rounds (default 7),
          each timing both sides' loops, in the opposite order on odd
          rounds. The figure is the median round's microseconds per step
          (min and max beside it).

Before the timing, the two buffers (made with the same seed and filled
alike) must hold the same items and the same priorities (double's
rounded to float), and after one step each the same number of items:
both sides do the same work; exit status 1 otherwise.

Writes CSV (columns capacity, nodes, bytes_per_item, step_us,
step_us_min, step_us_max, reps, ratio_vs_double: float's figure over
double's, both columns) and prints the table. Run from outside the
source tree so that the installed package is the one imported
(bench/nodes.sh does).
"""
import argparse
import csv
import statistics
import subprocess
import sys
import time

import numpy as np

import per

ITEM = np.dtype([("obs", "<f4", (4,)), ("action", "<i4"), ("reward", "<f4"),
                 ("next_obs", "<f4", (4,)), ("done", "u1")], align=True)
NODES = {"double": np.float64, "float": np.float32}
ADD, BATCH = 4, 256


def items(n, start):
    rec = np.zeros(n, ITEM)
    g = np.arange(start, start + n, dtype=np.float32)
    rec["obs"] = g[:, None] * np.float32(0.01)
    rec["next_obs"] = rec["obs"] + np.float32(0.01)
    rec["action"] = np.arange(n) % 2
    rec["reward"] = 1.0
    rec["done"] = (np.arange(n) % 200) == 199
    return rec


def make(capacity, nodes, alpha=0.6):
    buf = per.ReplayBuffer(capacity, ITEM, nodes=NODES[nodes], alpha=alpha,
                           seed=1)
    for s in range(0, capacity, 65536):
        buf.add_batch(items(min(65536, capacity - s), s))
    return buf


def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def memory_child(capacity, nodes):
    before = rss()
    buf = make(capacity, nodes)
    after = rss()
    assert len(buf) == capacity
    print((after - before) / capacity)


def memory(capacity, nodes):
    out = subprocess.run([sys.executable, __file__, "--child-memory",
                          str(capacity), nodes], check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip())


class Side:
    def __init__(self, capacity, nodes):
        self.buf = make(capacity, nodes)
        self.rng = np.random.default_rng(2)
        self.td = [self.rng.standard_normal(BATCH).astype(np.float32)
                   for _ in range(16)]
        self.adds = [items(ADD, 10**6 + 4 * k) for k in range(16)]
        self.k = 0

    def loop(self, n):
        buf, td, adds = self.buf, self.td, self.adds
        t0 = time.thread_time()
        for _ in range(n):
            k = self.k = (self.k + 1) % 16
            buf.add_batch(adds[k])
            ids = buf.sample(BATCH)["ids"]
            buf.update(ids, td[k])
        return time.thread_time() - t0


def calibrate(side, min_time):
    n = 1
    while True:
        t = side.loop(n)
        if t >= min_time:
            return n
        n = max(n * 2, int(n * min_time / max(t, 1e-9) * 1.2))


def same_work(sides):
    a, b = sides["double"], sides["float"]
    if b.buf.nodes != np.float32 or a.buf.nodes != np.float64:
        return False
    if not np.array_equal(a.buf.storage, b.buf.storage):
        return False
    if not np.array_equal(a.buf.priorities().astype(np.float32),
                          b.buf.priorities()):
        return False
    a.loop(1)
    b.loop(1)
    return len(a.buf) == len(b.buf) and a.buf.added == b.buf.added


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--child-memory":
        memory_child(int(sys.argv[2]), sys.argv[3])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--capacities", default=f"{2**17},{2**20},{2**22}")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.2)
    a = ap.parse_args()
    caps = [int(c) for c in a.capacities.split(",")]
    rows = []
    print(f"per {per.__version__}; item {ITEM.itemsize} bytes; step: add {ADD}, "
          f"sample {BATCH}, update {BATCH}; thread CPU time, median of "
          f"{a.reps} rounds; capacities {caps}")
    print(f"{'capacity':>9} {'nodes':>6} {'bytes/item':>10} {'step us':>8} "
          f"{'(min':>7} {'max)':>7} {'vs double':>9}")
    for cap in caps:
        mem = {n: memory(cap, n) for n in NODES}
        sides = {n: Side(cap, n) for n in NODES}
        if not same_work(sides):
            print(f"capacity {cap}: the float and double buffers differ "
                  "in items, priorities or counts", file=sys.stderr)
            return 1
        loops = {n: calibrate(s, a.min_time) for n, s in sides.items()}
        times = {n: [] for n in NODES}
        order = list(NODES)
        for r in range(a.reps):
            for n in (order if r % 2 == 0 else order[::-1]):
                times[n].append(sides[n].loop(loops[n]) / loops[n] * 1e6)
        med = {n: statistics.median(times[n]) for n in NODES}
        for n in NODES:
            ratio = (f"{mem[n] / mem['double']:.3f} / "
                     f"{med[n] / med['double']:.3f}")
            rows.append({"capacity": cap, "nodes": n,
                         "bytes_per_item": f"{mem[n]:.1f}",
                         "step_us": f"{med[n]:.2f}",
                         "step_us_min": f"{min(times[n]):.2f}",
                         "step_us_max": f"{max(times[n]):.2f}",
                         "reps": a.reps, "ratio_vs_double": ratio})
            print(f"{cap:>9} {n:>6} {mem[n]:>10.1f} {med[n]:>8.2f} "
                  f"{min(times[n]):>7.2f} {max(times[n]):>7.2f} {ratio:>9}")
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
