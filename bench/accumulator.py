#!/usr/bin/env python3
"""bench/accumulator.py CSV [--reps R] [--min-time S] [--c-csv FILE]:
per.TrajectoryAccumulator against the NumPy loop it replaces, on a
rollout at three timescales, in one process.

The example (T = 64):

  step        {"obs": float32 (T, 4), "reward": float32 (T,)}   buffered
  episode     {"return": float32 (1,), "length": float32 (1,)}  single
  final_step  {"obs": float32 (4,), "reward": int32 ()}         single

One rollout is T x add("step", {"obs": obs, "reward": reward}), then
add("episode", {"return": np.array([ret]), "length": np.array([T])}),
add("final_step", {"obs": obs, "reward": 1}) and build(). Sides:

  per           per.TrajectoryAccumulator(example)
  numpy_add     the same calls on a class holding preallocated arrays per
                timescale (np.zeros_like of the example's) and a slot
                counter per timescale: add() runs stored[k][s:s+1] = v for
                each leaf of a buffered timescale and stored[k][...] = v
                for a single-item one; build() sets the counters to 0 and
                returns the arrays. It checks nothing: a value of another
                dtype is cast by NumPy's rules, and an add past the
                capacity writes nothing.
  numpy_inline  the same arrays written by the rollout loop itself, no
                dicts and no add() call: obs[s:s+1] = o; reward[s:s+1] = r;
                s += 1, then the single-item leaves by [...] = v.

Variants (the episode's values are NumPy arrays in both, float64 and
int64 as np.array([ret]) and np.array([T]) make them, which per converts
into the float32 leaves in C):

  exact  obs a float32 array of 4, reward a Python float (what per copies
         in C without Python)
  loose  obs a list of 4 Python floats, reward a Python int (per converts
         these in Python, its slow path)

The inputs (16 rollouts of observations and rewards) are made before
the timing; every side cycles through the same ones. Timing: thread CPU
time (time.thread_time); each side and variant calibrated to loops of at
least --min-time seconds (default 0.2, the calibration is the warm-up),
then --reps rounds (default 7), each timing every side's loop once, in
the opposite order on odd rounds. The figure is the median round, in
environment steps per second (a rollout is T steps, its episode,
final_step and build calls included). After the timing each side runs
one more rollout from the same inputs and the built arrays are compared:
per's must equal the NumPy sides' (exit status 1 otherwise).

With --c-csv (the CSV of bench_traj, which bench/accumulator.sh runs
just before) the C accumulator's figures join the table and the CSV,
with the C / Python ratio against per's exact variant.

Writes CSV (columns name, variant, steps_per_s, steps_per_s_min,
steps_per_s_max, reps, ratio_vs_numpy, ratio_vs_python, what) and prints
the table. ratio_vs_numpy: the row's steps/s over numpy_add's in the
same variant (Python rows) or in the exact variant (C rows);
ratio_vs_python: over per's exact variant. Run from outside the source
tree so that the installed package is the one imported
(bench/accumulator.sh does).
"""
import argparse
import csv
import platform
import sys
import time

import numpy as np

import per

T = 64
OBS = 4
POOL_R = 16  # rollouts of inputs the loops cycle through


def example():
    return {"step": {"obs": np.zeros((T, OBS), np.float32),
                     "reward": np.zeros((T,), np.float32)},
            "episode": {"return": np.zeros((1,), np.float32),
                        "length": np.zeros((1,), np.float32)},
            "final_step": {"obs": np.zeros((OBS,), np.float32),
                           "reward": np.zeros((), np.int32)}}


def inputs(variant):
    """POOL_R rollouts: (observations, rewards, the return) each."""
    rng = np.random.default_rng(1)
    pool = []
    for _ in range(POOL_R):
        obs = rng.standard_normal((T, OBS)).astype(np.float32)
        if variant == "exact":
            o = [obs[t].copy() for t in range(T)]
            r = [float(x) for x in rng.random(T).astype(np.float32)]
        else:
            o = [[float(x) for x in obs[t]] for t in range(T)]
            r = [int(x) for x in rng.integers(0, 2, T)]
        pool.append((o, r, sum(r)))
    return pool


class NumpyAccumulator:
    """The accumulator as plain NumPy: preallocated arrays and a slot
    counter per timescale, stored[k][s:s+1] = v per leaf."""

    def __init__(self, ex):
        self.stored = {name: {k: np.zeros_like(v) for k, v in leaves.items()}
                       for name, leaves in ex.items()}
        self.single = {name: any(v.ndim == 0 for v in leaves.values())
                       or all(v.shape[0] == 1 for v in leaves.values())
                       for name, leaves in ex.items()}
        self.slot = {name: 0 for name in ex}

    def add(self, name, values):
        stored = self.stored[name]
        if self.single[name]:
            for k, v in values.items():
                stored[k][...] = v
        else:
            s = self.slot[name]
            for k, v in values.items():
                stored[k][s:s + 1] = v
            self.slot[name] = s + 1

    def build(self):
        for name in self.slot:
            self.slot[name] = 0
        return self.stored


def rollout_add(acc, roll):
    """The three-timescale rollout through add(name, dict) and build()."""
    obs, rew, ret = roll
    for t in range(T):
        acc.add("step", {"obs": obs[t], "reward": rew[t]})
    acc.add("episode", {"return": np.array([ret]), "length": np.array([T])})
    acc.add("final_step", {"obs": obs[-1], "reward": 1})
    return acc.build()


def rollout_inline(acc, roll):
    """The same rollout writing acc's arrays in the loop."""
    obs, rew, ret = roll
    st = acc.stored
    o_a, r_a = st["step"]["obs"], st["step"]["reward"]
    s = 0
    for t in range(T):
        o_a[s:s + 1] = obs[t]
        r_a[s:s + 1] = rew[t]
        s += 1
    st["episode"]["return"][...] = np.array([ret])
    st["episode"]["length"][...] = np.array([T])
    st["final_step"]["obs"][...] = obs[-1]
    st["final_step"]["reward"][...] = 1
    return st


SIDES = ("per", "numpy_add", "numpy_inline")


def make(side):
    if side == "per":
        return per.TrajectoryAccumulator(example()), rollout_add
    if side == "numpy_add":
        return NumpyAccumulator(example()), rollout_add
    return NumpyAccumulator(example()), rollout_inline


def loop(acc, fn, pool, iters, j0=0):
    t0 = time.thread_time()
    for i in range(iters):
        fn(acc, pool[(j0 + i) % POOL_R])
    return time.thread_time() - t0


def calibrate(acc, fn, pool, min_time):
    iters = 1
    while True:  # doubles as the warm-up
        t = loop(acc, fn, pool, iters)
        if t >= min_time:
            return iters
        iters = max(iters * 2, int(iters * min_time * 1.2 / max(t, 1e-6)) + 1)


def same(a, b):
    """The built trees a (per's) and b (a NumPy side's) hold the same
    values, the same dtypes and shapes."""
    for name, leaves in b.items():
        for k, v in leaves.items():
            x = np.asarray(a[name][k])
            if x.dtype != v.dtype or x.shape != v.shape or not np.array_equal(x, v):
                return f"{name}/{k}"
    return ""


def c_rows(path):
    """bench_traj's CSV (bench_common.h's columns) as rows of ours."""
    out = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            reps = int(r["reps"])
            for who, ns, lo, hi, label in (
                    ("c_per_traj", "per_ns", "per_min", "per_max", r["per_name"]),
                    ("c_plain", "base_ns", "base_min", "base_max", r["base_name"])):
                if float(r[ns]) <= 0:
                    continue
                out.append({"name": who, "variant": r["op"],
                            "steps_per_s": 1e9 / float(r[ns]),
                            "steps_per_s_min": 1e9 / float(r[hi]),
                            "steps_per_s_max": 1e9 / float(r[lo]),
                            "reps": reps, "what": f"C, {label}, T = {r['n']}"})
    return out


WHAT = {"per": "per.TrajectoryAccumulator add + build",
        "numpy_add": "NumPy arrays, add(name, dict) + build",
        "numpy_inline": "NumPy arrays written in the loop"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="where the CSV goes")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--c-csv", help="bench_traj's CSV, to fold in")
    a = ap.parse_args()
    rows = []
    print(f"per {getattr(per, '__version__', '?')}, python "
          f"{platform.python_version()}, numpy {np.__version__}; T = {T}; "
          f"reps {a.reps}, min time {a.min_time} s; thread CPU time; "
          "steps/s of whole rollouts (median, min-max)", flush=True)
    for variant in ("exact", "loose"):
        pool = inputs(variant)
        built = {s: make(s) for s in SIDES}
        iters = {s: calibrate(acc, fn, pool, a.min_time)
                 for s, (acc, fn) in built.items()}
        times = {s: [] for s in SIDES}
        for r in range(a.reps):
            order = SIDES if r % 2 == 0 else SIDES[::-1]
            for s in order:
                acc, fn = built[s]
                t = loop(acc, fn, pool, iters[s], r)
                times[s].append(iters[s] * T / t)
        trees = {s: fn(acc, pool[3]) for s, (acc, fn) in built.items()}
        for s in SIDES[1:]:
            bad = same(trees["per"], trees[s])
            if bad:
                sys.stderr.write(f"accumulator: per's {bad} differs from "
                                 f"{s}'s ({variant})\n")
                return 1
        for s in SIDES:
            v = sorted(times[s])
            rows.append({"name": s, "variant": variant,
                         "steps_per_s": v[len(v) // 2],
                         "steps_per_s_min": v[0], "steps_per_s_max": v[-1],
                         "reps": a.reps, "what": WHAT[s]})
    if a.c_csv:
        rows += c_rows(a.c_csv)
    py = {(r["name"], r["variant"]): r["steps_per_s"] for r in rows}
    for r in rows:
        c = r["name"].startswith("c_")
        base = py[("numpy_add", "exact" if c else r["variant"])]
        r["ratio_vs_numpy"] = r["steps_per_s"] / base
        r["ratio_vs_python"] = r["steps_per_s"] / py[("per", "exact")]
    print(f"{'side':<13} {'variant':<8} {'steps/s':>12} {'(min-max)':>23} "
          f"{'/ numpy_add':>12} {'/ per exact':>12}")
    for r in rows:
        print(f"{r['name']:<13} {r['variant']:<8} {r['steps_per_s']:>12,.0f} "
              f"{'(' + format(r['steps_per_s_min'], ',.0f') + '-' + format(r['steps_per_s_max'], ',.0f') + ')':>23} "
              f"{r['ratio_vs_numpy']:>11.2f}x {r['ratio_vs_python']:>11.2f}x")
    per_inline = py[("per", "exact")] / py[("numpy_inline", "exact")]
    print(f"per / numpy_inline: {per_inline:.2f}x (exact), "
          f"{py[('per', 'loose')] / py[('numpy_inline', 'loose')]:.2f}x (loose)")
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["name", "variant", "steps_per_s",
                                          "steps_per_s_min", "steps_per_s_max",
                                          "reps", "ratio_vs_numpy",
                                          "ratio_vs_python", "what"])
        w.writeheader()
        for r in rows:
            w.writerow({**r, **{k: f"{r[k]:.1f}" for k in
                                ("steps_per_s", "steps_per_s_min", "steps_per_s_max")},
                        **{k: f"{r[k]:.4f}" for k in
                           ("ratio_vs_numpy", "ratio_vs_python")}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
