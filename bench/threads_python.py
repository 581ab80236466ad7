#!/usr/bin/env python3
"""bench/threads_python.py [--seconds S] [--actors K] [--label NAME]:
one ReplayBuffer shared by Python threads, the way a threaded Ape-X
trainer shares it: K actor threads (default 4) each loop over an
"environment step" (NumPy work that releases the GIL: a 64x128 by 128x128
matrix product per batch) and add_batch of 64 CartPole transitions; one
learner thread loops over sample(256) with IS weights, a NumPy "training
step" (a 256x128 by 128x128 product) and update. N = 10^6 slots, filled
first. Prints the learner's updates/s and the actors' transitions/s over
--seconds (default 10) of wall time.

Run it against two builds of the package to compare them (e.g. one that
holds the GIL in every call and one that releases it): the workload is
the same, only the package differs. NumPy's BLAS should run on one
thread (OPENBLAS_NUM_THREADS=1), so that the threads here are the only
parallelism.
"""
import argparse
import os
import threading
import time

import numpy as np

import per

ITEM = {"obs": (np.float32, 4), "action": np.int64, "reward": np.float32,
        "next_obs": (np.float32, 4), "done": np.float32}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--actors", type=int, default=4)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    n = 1_000_000
    rb = per.ReplayBuffer(n, ITEM, seed=1, beta_steps=10**9)
    rng = np.random.default_rng(1)
    chunk = np.zeros(65536, rb.dtype)
    chunk["obs"] = rng.standard_normal((65536, 4))
    for _ in range(n // 65536 + 1):
        rb.add_batch(chunk)
    w = rng.standard_normal((128, 128)).astype(np.float32)
    stop = threading.Event()
    added = [0] * a.actors
    updates = [0]

    def actor(k):
        r = np.random.default_rng(100 + k)
        batch = np.zeros(64, rb.dtype)
        x = r.standard_normal((64, 128)).astype(np.float32)
        while not stop.is_set():
            y = x @ w                      # the environment's work
            batch["obs"] = y[:, :4]
            batch["action"] = k
            rb.add_batch(batch)
            added[k] += 64

    def learner():
        x = rng.standard_normal((256, 128)).astype(np.float32)
        while not stop.is_set():
            s = rb.sample(256)
            y = (x * s["weights"][:, None]) @ w   # the training step
            rb.update(s["ids"], np.abs(y[:, 0]))
            updates[0] += 1

    ts = [threading.Thread(target=actor, args=(k,)) for k in range(a.actors)]
    ts.append(threading.Thread(target=learner))
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    time.sleep(a.seconds)
    stop.set()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    rb.check()
    print(f"{a.label or per.__version__}: {a.actors} actors + 1 learner, "
          f"{os.cpu_count()} cpus, {dt:.1f} s: learner {updates[0] / dt:8.1f} "
          f"updates/s, actors {sum(added) / dt:10.0f} transitions/s")


if __name__ == "__main__":
    main()
