#!/usr/bin/env python3
"""bench/peers_cuda.py [--sizes N,N,...] [--batches B,B,...] [--add E]
[--steps S] [--reps R] [--unroll K] [--csv PATH] [--smoke]: per.cuda against the
prioritized replay buffers that GPU training loops use today, in one
process, on one GPU, in the same run.

The workload is one training step of a DQN learner on a full buffer of N
transitions (capacity N, CartPole's transition: obs and next_obs
float32[4], act int64, rew float32, done bool): add E new transitions
(--add, default 8) at the max priority, sample B of them with their IS
weights (alpha 0.6, beta 0.4 fixed, eps 1e-6), then give the B sampled
ones new priorities (|td| + eps)^alpha from TD errors. The TD errors are
computed on the device from the sample, td = rew - 0.5 * weight, the same
function for every contender, so no host data enters a step. Every
contender is filled with the same N transitions, every step adds the same
E; each keeps its buffer from one batch size to the next. Contenders:

  per.cuda        per.cuda.ReplayBuffer: add_batch(E fields) +
                  sample(B, beta=) (the five fields gathered, ids, weights
                  over the batch's max) + torch.sub into a fixed td tensor +
                  update(ids, td). The whole step is captured once in a CUDA
                  graph (torch.cuda.graph) and each step is one replay.
  torch graph     plain PyTorch on a flat priority array p (N,), float32
                  (--baseline-dtype float64 for doubles), captured in one
                  CUDA graph the same way: add = index_copy_ of the E items
                  at a ring position kept in a device tensor, p[pos] = the
                  max priority (a device scalar); sample = torch.cumsum(p)
                  over all N, u = (i + torch.rand) / B * total (stratified),
                  torch.searchsorted(cdf, u), gather the five fields, IS
                  weights (N P)^-beta over their max; update = p[idx] =
                  (|td| + eps)^alpha, the max priority raised.
  torchrl         torchrl.data.PrioritizedReplayBuffer over
                  LazyTensorStorage(N, device=cuda) (its default sampler for
                  a CUDA storage: the priority trees on the GPU in recent
                  TorchRL, on the CPU in older ones; the output says which):
                  extend(TensorDict of E) + sample(B, return_info=True) +
                  update_priority(index, |td|); its IS weights are
                  TorchRL's own (over the buffer's min priority). Not
                  captured: TorchRL does not offer this buffer's calls for
                  CUDA graphs, so each step is the calls themselves.
  flashbax        flashbax.make_prioritised_flat_buffer(N, add_batch_size=E,
                  sample_batch_size=B, device="gpu"): the whole step (add,
                  sample, IS weights from the sampled probabilities, td,
                  set_priorities) in one jax.jit with the state donated,
                  which is how a JAX learner runs it; the sampled fields,
                  indices and weights are outputs, so XLA computes them.
                  JAX's default 32-bit mode stores act as int32. The flat
                  buffer also pairs each sample with the next step's item
                  (its "second"), which nothing here reads.
  flashbax 3 jits the same buffer with add, sample (plus the weights and
                  td) and set_priorities each in its own jax.jit (add and
                  set_priorities donate the state): three dispatches a step.

--unroll K (default 1) puts K steps in each call where that can be done:
per.cuda's and the torch graph's graphs are captured over K steps, and
flashbax's jit runs K steps in a jax.lax.scan (every step's sample an
output), as a JAX learner that scans its training loop does; torchrl and
flashbax 3 jits are unchanged. The times stay per step.

torchrl and flashbax are left out, with a line that says why, when they do
not import (flashbax also when JAX has no GPU backend). JAX is told not to
preallocate GPU memory, so PyTorch and JAX share the device.

Timing: wall-clock time of a loop of steps from the first call to the
device being idle after the last (torch.cuda.synchronize, or
block_until_ready for JAX), so what is timed is the throughput a training
loop gets, launch overhead included. Each contender is first calibrated to
loops of at least --min-time seconds (default 0.2; --steps S fixes the
loop instead), which also warms it up (graphs captured and jit compiled
before); then --reps rounds (default 5) each run every contender's loop
once, the order rotating from round to round. Printed: the median
microseconds per step and peer / per.cuda (above 1: per.cuda is faster),
as a Markdown table; --csv PATH writes every figure. After the timing,
each contender's last sample is checked: B indices inside the buffer and
weights in (0, 1]; per.cuda's status() raises any device error. The
project's targets for this table (issue): per.cuda >= 10x torchrl,
>= 20x flashbax and faster than the torch graph at N >= 2^20.

--smoke runs tiny sizes and a few steps to check the plumbing: on a
machine without a GPU (or with --host) per.cuda.host (the CPU emulation,
built with -Csetup-args=-Dpython_cuda_host=true), PyTorch on the CPU
without graphs, and torchrl and flashbax on the CPU when they import; with
a GPU, the real thing at tiny sizes. Its times mean nothing.

Needs torch, numpy and per with per.cuda (pip install . where nvcc is on
PATH); torchrl + tensordict and jax + flashbax for those contenders.
"""
from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import time
import warnings

# before anything imports jax: let PyTorch and JAX share the GPU
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import per  # noqa: E402
import per.cuda as pc  # noqa: E402

ALPHA, BETA, EPS = 0.6, 0.4, 1e-6
ITEM = {"obs": (np.float32, (4,)), "act": np.int64, "rew": np.float32,
        "next_obs": (np.float32, (4,)), "done": np.bool_}
FILL_CHUNK = 1 << 16


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", help="buffer sizes N, capacity and filled before "
                    f"timing (default {1 << 20},{1 << 22}; --smoke 4096)")
    ap.add_argument("--batches", help="batch sizes B (default 256,1024; --smoke 32,128)")
    ap.add_argument("--add", type=int, default=8, help="transitions added per step (E)")
    ap.add_argument("--steps", type=int, default=0,
                    help="steps per timed loop (default: calibrated to --min-time)")
    ap.add_argument("--min-time", type=float, default=0.2,
                    help="seconds per calibrated loop")
    ap.add_argument("--reps", type=int, help="timed rounds (default 5; --smoke 1)")
    ap.add_argument("--baseline-dtype", choices=("float32", "float64"), default="float32",
                    help="the torch graph's priority array")
    ap.add_argument("--only", default="",
                    help="comma-separated contenders to run (per.cuda always runs)")
    ap.add_argument("--unroll", type=int, default=1,
                    help="steps per graph replay / per jit call (lax.scan) for "
                    "per.cuda, the torch graph and flashbax (default 1)")
    ap.add_argument("--no-graph", action="store_true",
                    help="run per.cuda and the torch baseline without CUDA graphs")
    ap.add_argument("--host", action="store_true",
                    help="per.cuda.host and PyTorch on the CPU (slow; for checks)")
    ap.add_argument("--csv", help="write the figures to this CSV file")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes and a few steps: the plumbing only")
    a = ap.parse_args(argv)
    if a.smoke:
        a.sizes = a.sizes or "4096"
        a.batches = a.batches or "32,128"
        a.reps = a.reps or 1
        a.steps = a.steps or 4
    a.sizes = a.sizes or f"{1 << 20},{1 << 22}"
    a.batches = a.batches or "256,1024"
    a.reps = a.reps or 5
    a.sizes = [int(x) for x in a.sizes.split(",") if x]
    a.batches = [int(x) for x in a.batches.split(",") if x]
    if a.add < 1 or a.unroll < 1 or min(a.batches) < 1 or any(
            n < 2 * a.add or n < max(a.batches) or n % a.add for n in a.sizes):
        ap.error("need E >= 1, B >= 1, and each N a multiple of E, N >= max(2 E, B)")
    return a


def version(dist):
    try:
        from importlib.metadata import version as v
        return v(dist)
    except Exception:  # noqa: BLE001 - a version is only printed
        return "?"


class Env:
    """Where the contenders run: the GPU (graphs unless --no-graph) or the
    CPU (per.cuda.host and PyTorch on the CPU)."""

    def __init__(self, a):
        self.host = a.host or not (pc.available() and torch.cuda.is_available()
                                   and pc.device_count() > 0)
        self.ns = pc.host if self.host else pc
        self.device = torch.device("cpu" if self.host else "cuda")
        self.graphs = not (self.host or a.no_graph)
        self.E = a.add
        self.K = a.unroll
        self.pdtype = torch.float64 if a.baseline_dtype == "float64" else torch.float32

    def sync(self):
        if not self.host:
            torch.cuda.synchronize()

    def per_tensor(self, arr):
        """A torch tensor per.cuda may read: device memory on the GPU, the
        emulation's "device memory" on the host."""
        if self.host:
            return torch.from_dlpack(pc.host.to_device(np.ascontiguousarray(arr)))
        return torch.from_numpy(np.ascontiguousarray(arr)).to(self.device)

    def tensor(self, arr):
        return torch.from_numpy(np.ascontiguousarray(arr)).to(self.device)


def capture(fn):
    """fn warmed up on a side stream, then captured once: (graph, fn's
    result during the capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    torch.cuda.synchronize()
    return g, out


def transitions(rng, n):
    """n CartPole-like transitions, the same for every contender."""
    return {
        "obs": rng.standard_normal((n, 4), dtype=np.float32),
        "act": rng.integers(0, 2, n, dtype=np.int64),
        "rew": rng.uniform(-1.0, 1.0, n).astype(np.float32),
        "next_obs": rng.standard_normal((n, 4), dtype=np.float32),
        "done": rng.random(n) < 0.05,
    }


def td_of(rew, weights):
    """The TD errors every contender feeds back: a function of the sample
    computed on the device (the learner's loss stands in for it)."""
    return rew - 0.5 * weights


def unrolled(step, K):
    """K steps as one call (one graph, once captured)."""
    if K == 1:
        return step

    def steps():
        for _ in range(K):
            out = step()
        return out
    return steps


# -- the contenders: prepare(b) makes the step for batch size b, run(k) runs
# about k steps (whole calls of K steps where a call is K steps), waits for
# the device and returns how many it ran, last() gives the latest sample's
# (slots, weights) as NumPy for the check


class PerCuda:
    name = "per.cuda"
    dist = "per-replay"

    def __init__(self, env, n, data, new, bmax, seed):
        self.env, self.n = env, n
        self.buf = env.ns.ReplayBuffer(n, ITEM, max_batch=max(bmax, env.E),
                                       alpha=ALPHA, beta0=BETA, beta1=BETA, eps=EPS,
                                       seed=seed, align=True)
        dev = {k: env.per_tensor(v) for k, v in data.items()}
        step = self.buf.max_batch
        for i in range(0, n, step):
            self.buf.add_batch(**{k: v[i:i + step] for k, v in dev.items()})
        del dev
        self.buf.status()
        self.new = {k: env.per_tensor(v) for k, v in new.items()}
        self.td = env.per_tensor(np.zeros(self.buf.max_batch, np.float32))
        self.out = None
        self.fn = None

    def prepare(self, b):
        buf, new, td = self.buf, self.new, self.td[:b]

        def step():
            buf.add_batch(**new)
            s = buf.sample(b, beta=BETA)
            torch.sub(s["rew"], s["weights"], alpha=0.5, out=td)
            buf.update(s["ids"], td)
            return s

        steps = unrolled(step, self.env.K)
        if self.env.graphs:
            g, self.out = capture(steps)
            self.fn = g.replay
        else:
            self.out = steps()
            self.fn = steps
        self.run(1)
        self.buf.status()

    def run(self, k):
        fn, K = self.fn, self.env.K
        calls = max(1, -(-k // K))
        for _ in range(calls):
            fn()
        if self.env.host:
            self.buf.synchronize()
        else:
            self.env.sync()
        return calls * K

    def last(self):
        self.buf.status()
        ids = self.out["ids"].cpu().numpy()
        return ids & 0xFFFFFFFF, self.out["weights"].cpu().numpy()

    def done(self):
        self.buf.status()
        if self.env.host:
            cpu = self.buf.to_cpu()
            cpu.check()
            if len(cpu) != self.n:
                raise RuntimeError(f"per.cuda holds {len(cpu)} items, not {self.n}")
        self.fn = None


class TorchGraph:
    name = "torch graph"
    dist = "torch"

    def __init__(self, env, n, data, new, bmax, seed):
        self.env, self.n, dev = env, n, env.device
        self.store = {k: env.tensor(v) for k, v in data.items()}
        self.new = {k: env.tensor(v) for k, v in new.items()}
        self.p = torch.ones(n, dtype=env.pdtype, device=dev)  # (|td| + eps)^alpha
        self.maxp = torch.ones((), dtype=env.pdtype, device=dev)
        self.pos = torch.zeros((), dtype=torch.int64, device=dev)
        self.ar_e = torch.arange(env.E, dtype=torch.int64, device=dev)
        torch.manual_seed(seed)
        self.out = None
        self.fn = None
        self.g = None

    def prepare(self, b):
        n, E, dev, dt = self.n, self.env.E, self.env.device, self.env.pdtype
        store, new, p, maxp, pos, ar_e = (self.store, self.new, self.p, self.maxp,
                                          self.pos, self.ar_e)
        ar_b = torch.arange(b, dtype=dt, device=dev)

        def step():
            # add: E items at the ring position, at the max priority
            slot = (pos + ar_e).remainder_(n)
            for k, v in store.items():
                v.index_copy_(0, slot, new[k])
            p.index_put_((slot,), maxp)
            pos.add_(E).remainder_(n)
            # sample: cumsum over all N, B stratified binary searches
            cdf = torch.cumsum(p, 0)
            total = cdf[-1]
            u = (ar_b + torch.rand(b, dtype=dt, device=dev)) * (total / b)
            idx = torch.searchsorted(cdf, u, right=True).clamp_(max=n - 1)
            batch = {k: v[idx] for k, v in store.items()}
            w = (p[idx] * (n / total)).pow_(-BETA)
            w = (w / w.max()).float()
            # update
            newp = (td_of(batch["rew"], w).abs() + EPS).pow_(ALPHA)
            p.index_put_((idx,), newp.to(dt))
            torch.maximum(maxp, newp.max().to(dt), out=maxp)
            return idx, w, batch

        steps = unrolled(step, self.env.K)
        if self.env.graphs:
            self.g, self.out = capture(steps)
            self.fn = self.g.replay
        else:
            self.out = steps()
            self.fn = None
            self._steps = steps
        self.run(1)

    def run(self, k):
        K = self.env.K
        calls = max(1, -(-k // K))
        if self.fn is not None:
            fn = self.fn
            for _ in range(calls):
                fn()
        else:
            steps = self._steps
            for _ in range(calls):
                self.out = steps()
        self.env.sync()
        return calls * K

    def last(self):
        idx, w, _ = self.out
        return idx.cpu().numpy(), w.cpu().numpy()

    def done(self):
        self.fn = self.g = self.out = None


class TorchRL:
    name = "torchrl"
    dist = "torchrl"

    def __init__(self, env, n, data, new, bmax, seed):
        import logging
        from tensordict import TensorDict
        from torchrl.data import LazyTensorStorage, PrioritizedReplayBuffer
        logging.getLogger("torchrl").setLevel(logging.WARNING)
        self.env, self.n, dev = env, n, env.device
        torch.manual_seed(seed)
        self.rb = PrioritizedReplayBuffer(alpha=ALPHA, beta=BETA, eps=EPS,
                                          storage=LazyTensorStorage(n, device=dev))
        for i in range(0, n, FILL_CHUNK):
            c = {k: env.tensor(v[i:i + FILL_CHUNK]) for k, v in data.items()}
            m = len(c["rew"])
            self.rb.extend(TensorDict(c, batch_size=[m], device=dev))
        self.new = TensorDict({k: env.tensor(v) for k, v in new.items()},
                              batch_size=[env.E], device=dev)
        sampler = getattr(self.rb, "sampler", None)
        if sampler is None:
            sampler = getattr(self.rb, "_sampler", None)
        tree_dev = getattr(sampler, "device", None)
        self.trees = str(tree_dev) if tree_dev is not None else "?"
        env.sync()
        self.out = None

    def prepare(self, b):
        rb, new, dev = self.rb, self.new, self.env.device

        def step():
            rb.extend(new)
            s, info = rb.sample(b, return_info=True)
            w = torch.as_tensor(info["priority_weight"], device=dev)
            rb.update_priority(info["index"], td_of(s["rew"], w).abs())
            return info

        self._step = step
        self.run(1)

    def run(self, k):
        step = self._step
        for _ in range(k):
            self.out = step()
        self.env.sync()
        return k

    def last(self):
        info = self.out
        return (torch.as_tensor(info["index"]).cpu().numpy(),
                torch.as_tensor(info["priority_weight"]).cpu().numpy())

    def done(self):
        self.out = None


class Flashbax:
    """One jit per step; Flashbax3 below: one jit per call. They share
    the buffer's state (self.shared)."""
    name = "flashbax"
    dist = "flashbax"
    fused = True

    def __init__(self, env, n, data, new, bmax, seed, shared=None):
        import jax
        import jax.numpy as jnp
        import flashbax as fbx
        self.jax, self.jnp, self.fbx = jax, jnp, fbx
        self.env, self.n, E = env, n, env.E
        self.fdev = "cpu" if jax.default_backend() == "cpu" else "gpu"
        self.new = {k: jnp.asarray(v) for k, v in new.items()}
        if shared is not None:
            self.shared = shared
            return
        # filling: the same layout (E rows of N / E steps) through a buffer
        # that takes sequences, a chunk of steps per call
        T = n // E
        fill = fbx.make_prioritised_flat_buffer(
            max_length=n, min_length=E, sample_batch_size=bmax, add_sequences=True,
            add_batch_size=E, priority_exponent=ALPHA, device=self.fdev)
        state = fill.init({k: jnp.asarray(v[0]) for k, v in data.items()})
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*donated.*")
            add = jax.jit(fill.add, donate_argnums=0)
            rows = {k: v.reshape((E, T) + v.shape[1:]) for k, v in data.items()}
            step = max(1, min(T, FILL_CHUNK // E))
            for t in range(0, T, step):
                state = add(state, {k: jnp.asarray(v[:, t:t + step]) for k, v in rows.items()})
        jax.block_until_ready(state)
        self.shared = {"state": state, "key": jax.random.PRNGKey(seed)}

    def _buffer(self, b):
        return self.fbx.make_prioritised_flat_buffer(
            max_length=self.n, min_length=self.env.E, sample_batch_size=b,
            add_sequences=False, add_batch_size=self.env.E, priority_exponent=ALPHA,
            device=self.fdev)

    def _sample_part(self, buf, n):
        jax, jnp = self.jax, self.jnp

        def sample(state, key):
            key, sub = jax.random.split(key)
            s = buf.sample(state, sub)
            first = s.experience.first
            # P(i): normalised in flashbax 0.1.3+ ("probabilities"), p^alpha
            # before ("priorities"); the weights over their max are the same
            prob = s.probabilities if hasattr(s, "probabilities") else s.priorities
            w = (n * prob.astype(jnp.float32)) ** -BETA
            w = w / jnp.max(w)
            pri = jnp.abs(td_of(first["rew"], w)) + EPS
            return key, first, s.indices, w, pri
        return sample

    def prepare(self, b):
        jax = self.jax
        buf = self._buffer(b)
        sample = self._sample_part(buf, self.n)
        self.K = self.env.K if self.fused else 1
        if self.fused:
            def step(state, key, new):
                state = buf.add(state, new)
                key, first, idx, w, pri = sample(state, key)
                state = buf.set_priorities(state, idx, pri)
                return state, key, (first, idx, w)

            def steps(state, key, new):
                # K steps in one call; every step's sample is an output
                def body(carry, _):
                    state, key, out = step(*carry, new)
                    return (state, key), out
                return jax.lax.scan(body, (state, key), None, length=self.K)

            if self.K == 1:
                fn = jax.jit(step, donate_argnums=0)

                def run_one(state, key):
                    return fn(state, key, self.new)
            else:
                fn = jax.jit(steps, donate_argnums=0)

                def run_one(state, key):
                    (state, key), outs = fn(state, key, self.new)
                    return state, key, outs
        else:
            add = jax.jit(buf.add, donate_argnums=0)
            samp = jax.jit(sample)
            setp = jax.jit(buf.set_priorities, donate_argnums=0)

            def run_one(state, key):
                state = add(state, self.new)
                key, first, idx, w, pri = samp(state, key)
                return setp(state, idx, pri), key, (first, idx, w)
        self._one = run_one
        self.run(1)

    def run(self, k):
        one, sh, K = self._one, self.shared, self.K
        calls = max(1, -(-k // K))
        state, key, out = sh["state"], sh["key"], None
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*donated.*")
            for _ in range(calls):
                state, key, out = one(state, key)
        self.jax.block_until_ready((state, out))
        sh["state"], sh["key"] = state, key
        self.out = out
        return calls * K

    def last(self):
        _, idx, w = self.out
        if self.K > 1:  # stacked: every step's sample
            idx, w = idx[-1], w[-1]
        return np.asarray(idx), np.asarray(w)

    def done(self):
        self.out = self._one = None


class Flashbax3(Flashbax):
    name = "flashbax 3 jits"
    fused = False


def available(env, only):
    """The contenders that can run here, and a line for each left out."""
    out, missing = [PerCuda], []
    want = set(x.strip() for x in only.split(",") if x.strip())

    def wanted(cls):
        return not want or cls.name in want

    if wanted(TorchGraph):
        out.append(TorchGraph)
    if wanted(TorchRL):
        try:
            import tensordict  # noqa: F401
            import torchrl.data  # noqa: F401
            out.append(TorchRL)
        except Exception as e:  # noqa: BLE001 - any import failure leaves it out
            missing.append(f"torchrl ({type(e).__name__}: {e})")
    if wanted(Flashbax) or wanted(Flashbax3):
        try:
            import flashbax  # noqa: F401
            import jax
            if not env.host and jax.default_backend() not in ("gpu", "cuda", "rocm"):
                raise RuntimeError(f"JAX has no GPU backend here (it runs on "
                                   f"{jax.default_backend()})")
            out += [c for c in (Flashbax, Flashbax3) if wanted(c)]
        except Exception as e:  # noqa: BLE001
            missing.append(f"flashbax ({type(e).__name__}: {e})")
    return out, missing


def calibrate(side, min_time):
    """Steps per loop for at least min_time seconds (warms up too)."""
    iters = 1
    while True:
        t0 = time.perf_counter()
        ran = side.run(iters)
        t = time.perf_counter() - t0
        if t >= min_time:
            return ran
        iters = max(ran * 2, int(ran * min_time * 1.2 / max(t, 1e-6)) + 1)


def header(env, classes, missing, a):
    lines = []
    if env.host:
        lines.append("device: CPU (per.cuda.host emulation, PyTorch on the CPU, no "
                     "graphs): plumbing only, the times mean nothing")
    else:
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        lines.append(f"GPU: {p.name}, {p.total_memory / 2**30:.0f} GiB, "
                     f"CUDA {torch.version.cuda}, {'graphs' if env.graphs else 'no graphs'}")
    vers = [f"python {platform.python_version()}", f"torch {torch.__version__}",
            f"per {per.__version__} ({'per._cuda_host' if env.host else 'per._cuda'})"]
    names = [c.name for c in classes]
    if "torchrl" in names:
        vers.append(f"torchrl {version('torchrl')} (tensordict {version('tensordict')})")
    if "flashbax" in names or "flashbax 3 jits" in names:
        import jax
        vers.append(f"jax {jax.__version__} ({jax.default_backend()}), "
                    f"flashbax {version('flashbax')}")
    lines.append(", ".join(vers))
    lines.append(f"step: add E = {env.E} + sample B with IS weights + update B "
                 f"(alpha {ALPHA}, beta {BETA}); torch graph priorities "
                 f"{str(env.pdtype).replace('torch.', '')}; "
                 + (f"{a.steps} steps a loop" if a.steps else
                    f"loops of >= {a.min_time} s") + f", {a.reps} rounds, median"
                 + (f"; {env.K} steps a graph / jit call" if env.K > 1 else ""))
    for m in missing:
        lines.append(f"left out: {m}")
    return lines


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    env = Env(a)
    if env.host and not (a.smoke or a.host):
        why = (pc.unavailable_reason() or "no CUDA device").rstrip(".")
        print(f"peers_cuda: {why}.\n--smoke or --host run on the CPU", file=sys.stderr)
        return 77
    if env.host and not pc.host.available():
        print("peers_cuda: no GPU here, and per.cuda.host is not built (pip install . "
              "-Csetup-args=-Dpython_cuda_host=true)", file=sys.stderr)
        return 2
    classes, missing = available(env, a.only)
    for line in header(env, classes, missing, a):
        print(line, flush=True)
    devname = ("cpu (host emulation)" if env.host else
               torch.cuda.get_device_name(torch.cuda.current_device()))
    rng = np.random.default_rng(a.seed)
    new = transitions(rng, env.E)
    bmax = max(a.batches)
    rows = []
    table = []
    names = [c.name for c in classes]
    for n in a.sizes:
        data = transitions(rng, n)
        t0 = time.perf_counter()
        sides = []
        for cls in classes:
            if cls is Flashbax3 and any(isinstance(s, Flashbax) for s in sides):
                shared = next(s for s in sides if isinstance(s, Flashbax)).shared
                sides.append(cls(env, n, data, new, bmax, a.seed, shared=shared))
            else:
                sides.append(cls(env, n, data, new, bmax, a.seed))
        trees = [s.trees for s in sides if isinstance(s, TorchRL)]
        print(f"N = {n}: filled in {time.perf_counter() - t0:.1f} s"
              + (f"; torchrl's priority trees on {trees[0]}" if trees else ""), flush=True)
        del data
        for b in a.batches:
            for s in sides:
                s.prepare(b)
            if a.steps:
                iters = {s.name: a.steps for s in sides}
                for s in sides:
                    s.run(a.steps)  # warm-up
            else:
                iters = {s.name: calibrate(s, a.min_time) for s in sides}
            times = {s.name: [] for s in sides}
            ran = {}
            for r in range(a.reps):
                for k in range(len(sides)):
                    s = sides[(r + k) % len(sides)]
                    t0 = time.perf_counter()
                    ran[s.name] = s.run(iters[s.name])
                    times[s.name].append((time.perf_counter() - t0) / ran[s.name] * 1e6)
            for s in sides:
                slots, w = s.last()
                if not (len(slots) == b and np.all(slots >= 0) and np.all(slots < n)
                        and len(w) == b and np.all(w > 0) and np.all(w <= 1 + 1e-5)):
                    print(f"peers_cuda: {s.name} returned a bad batch at N = {n}, "
                          f"B = {b}", file=sys.stderr)
                    return 1
            med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
            ref = med[PerCuda.name]
            table.append((n, b, med))
            for s in sides:
                v = times[s.name]
                rows.append({"N": n, "B": b, "E": env.E, "contender": s.name,
                             "version": version(s.dist), "device": devname,
                             "us_med": f"{med[s.name]:.3f}", "us_min": f"{min(v):.3f}",
                             "us_max": f"{max(v):.3f}", "steps": ran[s.name],
                             "reps": a.reps, "ratio": f"{med[s.name] / ref:.3f}"})
            print(f"N = {n}, B = {b}: " + ", ".join(
                f"{k} {med[k]:.1f} us" for k in names), flush=True)
        for s in sides:
            s.done()
        del sides
        if not env.host:
            torch.cuda.empty_cache()

    print()
    print("| N | B | " + " | ".join(f"{k} µs" for k in names) + " |")
    print("|---:|---:|" + "---:|" * len(names))
    for n, b, med in table:
        ref = med[PerCuda.name]
        cells = [f"{ref:.1f}"] + [f"{med[k]:.1f} ({med[k] / ref:.1f}×)"
                                  for k in names[1:]]
        print(f"| {n} | {b} | " + " | ".join(cells) + " |")
    print()
    print("µs per step (add E + sample B + update B); (×): the contender's time "
          "over per.cuda's, above 1: per.cuda is faster")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    if a.smoke:
        print(f"smoke: {len(names)} contenders ran, {len(table)} rows, every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
