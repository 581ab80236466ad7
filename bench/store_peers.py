#!/usr/bin/env python3
"""bench/store_peers.py [CSV] [--mib M] [--quick] [--dir DIR] [--reps R]
[--min-time S] [--fbx-write-mib W] [--fbx-each-mib E]: per.TrajectoryStore
against the replays on disk Python users reach for at that scale, on the
same data, in the same run.

Items: 64-byte transitions (obs and next_obs float32[6], action int32,
reward, done and discount float32) in rollouts of T x B = 128 x 8, and
28,224-byte frame stacks (stack uint8[84, 84, 4]) in rollouts of 8 x 4.
Each side holds a replay of --mib MiB (default 1024) of samples, whole
rollouts, full (nothing evicted), filled from the same 8 rollouts of
random values (normal floats, random bytes: they do not compress) cycled,
each side given them in its own container, made before any clock:
NumPy arrays [T, B, ...] for per, TensorDicts [T * B] for TorchRL, JAX
arrays [1, T * B, ...] for flashbax. Sides, each in a process of its own
(spawned; RSS is the side's):

  per       per.TrajectoryStore(DIR, spec, capacity, alpha=0.6, eps=1e-6),
            its writer thread and default cache_bytes (256 MiB, the newest
            trajectories) and staging_bytes (64 MiB)
  torchrl   ReplayBuffer(storage=LazyMemmapStorage(capacity, scratch_dir=
            DIR), sampler=PrioritizedSampler(capacity, 0.6, 0.4, eps=1e-6),
            batch_size=256), torch on one thread
  flashbax  flashbax.make_prioritised_item_buffer (priority_exponent 0.6)
            written into a flashbax.vault.Vault (tensorstore: zarr in an
            OCDBT store, gzip level 5, flashbax's default compression)

What each figure's clock (time.perf_counter, wall) holds:

  add       MB/s of sample bytes (n x item size, not what lands on disk:
            disk_mib says that) from the first add to the data written
            and fsynced. per: every add_trajectories(rollout), flush()
            (the staged trajectories written), then fsync of every file
            and directory under the store's directory. torchrl: every
            rb.extend(tensordict) (the first makes the memmap files; the
            sampler's max priority for the new indices), then the same
            fsync under scratch_dir (the memmap's dirty pages). flashbax:
            every jitted buffer.add(state, rollout) (XLA compilation done
            before the clock; state donated), vault.write(state) once the
            buffer holds --fbx-write-mib MiB (default 8) of new samples
            and after the last rollout, then the same fsync under the
            vault's directory. flashbax-each: the same with
            vault.write after every rollout, as per and torchrl take each
            rollout, over the first --fbx-each-mib MiB (default 16). Each
            write rewrites the zarr chunk it ends in (tensorstore picks
            chunks of about 4 MiB a field: 174,762 steps of a float32[6]
            field, 1,048,576 of a scalar one) and OCDBT keeps every
            version, so a write's cost grows through a chunk and starts
            over at the next: 16 MiB of 64-byte samples cover 1.5 chunks
            of the [6] fields but a quarter of the scalars', so the prefix
            if anything flatters it. disk: os.pwrite of 1 MiB blocks of
            the same number of bytes into one file, then fsync: the disk
            alone.
  sample    samples per second in batches of 256: one training step's
            replay calls with TD errors drawn before the clock (the same
            32 arrays for every side, cycled); per: sample(256, beta=0.4)
            (IS weights included) + update(ids, td); torchrl:
            rb.sample(return_info=True) (IS weights included) +
            update_priority(index, |td|); flashbax: a jitted sample
            (probabilities only: the IS weights (N p)^-0.4 / max computed
            in the same jit) + jitted set_priorities(state, indices,
            |td| + 1e-6) (state donated), blocked until ready. flashbax
            cannot sample a vault: vault.read() returns the whole vault
            (or a slice of it) as arrays in RAM, and the prioritised
            buffer samples those; its samples/s is sampling from RAM. per
            and torchrl sample their files (per: its cache, then pread;
            torchrl: the memmap), the page cache warm (the files were
            just written and this machine's RAM holds them).
  open      seconds to get a replay that samples from the files, the
            files' pages dropped from the page cache first (fdatasync,
            posix_fadvise DONTNEED): per: save_checkpoint() and close()
            (before the clock), then TrajectoryStore(DIR, ..., resume=
            True), which checks every trajectory's CRC-32C (reads all the
            data); flashbax: Vault(name, rel_dir, vault_uid) (open), read()
            (all of it into RAM), then a prioritised item buffer init()
            and jitted add() of what was read (every item its max
            priority; compiled before the clock). TorchRL has no such
            step for a LazyMemmapStorage's scratch_dir (its checkpoints
            are ReplayBuffer.dumps/loads): not measured.

Sampling: each side calibrated to loops of at least --min-time seconds
(default 0.5), then --reps rounds (default 7), each running every side's
loop once, the order rotating, so slow drifts of the machine fall on
every side alike; the median, min and max. After the rounds each side's
last batch is checked (256 indices inside the replay, weights in (0, 1],
the fields' shapes). RSS: VmRSS, its file-backed part (RssFile: memmap
pages; reclaimable) and VmHWM (the peak, reset per item size where the
kernel allows) of the side's process after sampling, and after imports
(base). The ratio column is how many times faster per is: per / peer for
MB/s and samples/s, peer / per for seconds.

Writes CSV (default bench/results/store_peers.csv) and beside it the
summary (CSV's name with .txt), and prints it. --quick: 8 MiB replays,
short loops: a smoke of every path; no figure means anything then. A side
whose packages do not import is left out and the run says so. DIR
(default store-peers.tmp under the current directory) must be on the disk
to measure; it is removed. Run it through bench/store.sh, which makes the
virtualenv (numpy, torchrl 0.14.1, flashbax, jax[cpu], this tree's per).
"""
import argparse
import contextlib
import csv
import io
import math
import multiprocessing as mp
import os
import platform
import shutil
import sys
import time
import traceback

import numpy as np

ALPHA, BETA, EPS = 0.6, 0.4, 1e-6
BATCH = 256
N_TD = 32   # TD-error arrays, cycled
POOL = 8    # distinct rollouts, cycled
MiB = 1 << 20

KINDS = {
    "64B": {"isz": 64, "T": 128, "B": 8, "fields": {
        "obs": ("float32", (6,)), "next_obs": ("float32", (6,)),
        "action": ("int32", ()), "reward": ("float32", ()),
        "done": ("float32", ()), "discount": ("float32", ())}},
    "28KB": {"isz": 28224, "T": 8, "B": 4, "fields": {
        "stack": ("uint8", (84, 84, 4))}},
}
SIDES = ("per", "torchrl", "flashbax")


# ---------------------------------------------------------------- helpers

def proc_status():
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                    out[k] = int(v.split()[0]) / 1024  # MiB
    except OSError:
        pass
    return out


def reset_hwm():
    try:  # "5" resets VmHWM (Linux >= 4.0); harmless where refused
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def fsync_tree(root):
    """fsync every file and directory under root (the directories last,
    so that new entries are durable)."""
    dirs = []
    for d, _, files in os.walk(root):
        dirs.append(d)
        for name in files:
            fd = os.open(os.path.join(d, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for d in reversed(dirs):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def drop_pages(root):
    """Every file under root out of the page cache (synced first)."""
    for d, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(d, name), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def disk_bytes(root):
    total = 0
    for d, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(d, name)).st_blocks * 512
            except OSError:
                pass
    return total


def pool_of(kind, seed=1):
    """POOL rollouts [T, B, ...] of random values, the same for every
    side (each worker makes them from the same seed)."""
    k = KINDS[kind]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(POOL):
        r = {}
        for name, (dt, shape) in k["fields"].items():
            full = (k["T"], k["B"]) + shape
            if name == "stack":
                r[name] = rng.integers(0, 256, full, dtype=np.uint8)
            elif name == "action":
                r[name] = rng.integers(0, 18, full, dtype=np.int32)
            elif name == "done":
                r[name] = (rng.random(full) < 0.01).astype(np.float32)
            elif name == "discount":
                r[name] = np.full(full, 0.99, np.float32)
            else:
                r[name] = rng.standard_normal(full, dtype=np.float32)
        out.append(r)
    return out


def tds_of(seed=2):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(BATCH).astype(np.float32) for _ in range(N_TD)]


def version(name):
    try:
        from importlib.metadata import version as v
        return v(name)
    except Exception:  # noqa: BLE001 - a version is only printed
        return "?"


# ---------------------------------------------------------------- sides
# Each side: setup(kind, cfg) builds nothing timed; add() -> dict;
# step(i) one training step; check() -> (ok, why); info() -> dict;
# drop() closes and removes its files.


class PerSide:
    name = "per"

    def __init__(self):
        import per
        self.per = per
        self.st = None

    def versions(self):
        return {"per": version("per-replay")}

    def setup(self, kind, cfg):
        k = KINDS[kind]
        self.kind, self.cfg = kind, cfg
        self.dir = os.path.join(cfg["root"], f"per-{kind}")
        self.spec = {n: np.zeros(s, dt) for n, (dt, s) in k["fields"].items()}
        self.pool = pool_of(kind)
        self.tds = tds_of()
        self.st = self.per.TrajectoryStore(self.dir, self.spec,
                                           capacity=cfg["cap"], alpha=ALPHA,
                                           eps=EPS, seed=1)

    def add(self):
        st, pool, r = self.st, self.pool, self.cfg["rollouts"]
        t0 = time.perf_counter()
        for i in range(r):
            st.add_trajectories(pool[i % POOL])
        st.flush()
        fsync_tree(self.dir)
        secs = time.perf_counter() - t0
        s = st.stats()
        return {"secs": secs, "disk": disk_bytes(self.dir),
                "note": f"{s['written_trajectories']} trajectories written, "
                        f"{s['waits']} adds waited"}

    def prepare(self):
        self.s0 = self.st.stats()
        self.step(0)

    def step(self, i):
        s = self.st.sample(BATCH, beta=BETA)
        self.st.update(s["ids"], self.tds[i % N_TD])
        self.last = s

    def check(self):
        s, k = self.last, KINDS[self.kind]
        w = s["weights"]
        shapes = all(s[n].shape == (BATCH,) + sh
                     for n, (_, sh) in k["fields"].items())
        ok = (len(s["ids"]) == BATCH and shapes and bool(np.all(w > 0))
              and bool(np.all(w <= 1 + 1e-6)))
        return ok, "ids, fields or weights"

    def info(self):
        s = self.st.stats()
        hits = s["cache_hits"] - self.s0["cache_hits"]
        miss = s["cache_misses"] - self.s0["cache_misses"]
        return {"hits": hits / max(hits + miss, 1)}

    def open(self):
        """Checkpoint, close, drop the pages, then time a resume."""
        self.st.save_checkpoint()
        self.st.close()
        drop_pages(self.dir)
        t0 = time.perf_counter()
        self.st = self.per.TrajectoryStore(self.dir, self.spec,
                                           capacity=self.cfg["cap"],
                                           alpha=ALPHA, eps=EPS, seed=1,
                                           resume=True)
        secs = time.perf_counter() - t0
        n = len(self.st)
        return {"secs": secs, "note": f"resumed {n} samples, CRC-32C checked"}

    def drop(self):
        if self.st is not None:
            self.st.close()
            self.st = None
        shutil.rmtree(self.dir, ignore_errors=True)


class TorchrlSide:
    name = "torchrl"

    def __init__(self):
        import logging
        import torch
        from tensordict import TensorDict
        from torchrl.data import (LazyMemmapStorage, PrioritizedSampler,
                                  ReplayBuffer)
        torch.set_num_threads(1)
        logging.getLogger("torchrl").setLevel(logging.WARNING)
        self.torch, self.TensorDict = torch, TensorDict
        self.LMS, self.PS, self.RB = LazyMemmapStorage, PrioritizedSampler, ReplayBuffer
        self.rb = None

    def versions(self):
        return {"torchrl": version("torchrl"), "torch": version("torch"),
                "tensordict": version("tensordict")}

    def setup(self, kind, cfg):
        k = KINDS[kind]
        torch = self.torch
        self.kind, self.cfg = kind, cfg
        self.dir = os.path.join(cfg["root"], f"torchrl-{kind}")
        n = k["T"] * k["B"]
        self.pool = [self.TensorDict(
            {f: torch.from_numpy(v.reshape((n,) + v.shape[2:]))
             for f, v in r.items()}, batch_size=[n]) for r in pool_of(kind)]
        self.tds = [torch.from_numpy(np.abs(t)) for t in tds_of()]
        cap = cfg["cap"]
        self.rb = self.RB(storage=self.LMS(cap, scratch_dir=self.dir),
                          sampler=self.PS(cap, alpha=ALPHA, beta=BETA, eps=EPS),
                          batch_size=BATCH)

    def add(self):
        rb, pool, r = self.rb, self.pool, self.cfg["rollouts"]
        t0 = time.perf_counter()
        for i in range(r):
            rb.extend(pool[i % POOL])
        fsync_tree(self.dir)
        secs = time.perf_counter() - t0
        return {"secs": secs, "disk": disk_bytes(self.dir),
                "note": f"{len(rb)} samples"}

    def prepare(self):
        self.step(0)

    def step(self, i):
        s, info = self.rb.sample(return_info=True)
        self.rb.update_priority(info["index"], self.tds[i % N_TD])
        self.last = (s, info)

    def check(self):
        s, info = self.last
        k = KINDS[self.kind]
        idx = np.asarray(info["index"])
        w = np.asarray(info["priority_weight"], dtype=np.float64)
        shapes = all(tuple(s[n].shape) == (BATCH,) + sh
                     for n, (_, sh) in k["fields"].items())
        ok = (len(idx) == BATCH and bool(np.all(idx < self.cfg["cap"]))
              and shapes and bool(np.all(w > 0)) and bool(np.all(w <= 1 + 1e-6)))
        return ok, "index, fields or weights"

    def info(self):
        return {}

    def open(self):
        return None

    def drop(self):
        self.rb = None
        import gc
        gc.collect()
        shutil.rmtree(self.dir, ignore_errors=True)


class FlashbaxSide:
    name = "flashbax"

    def __init__(self):
        import jax
        import jax.numpy as jnp
        import flashbax as fbx
        from flashbax.vault import Vault
        self.jax, self.jnp, self.fbx, self.Vault = jax, jnp, fbx, Vault
        self.state = None

    def versions(self):
        return {"flashbax": version("flashbax"), "jax": version("jax"),
                "tensorstore": version("tensorstore")}

    def setup(self, kind, cfg):
        jax, jnp = self.jax, self.jnp
        k = KINDS[kind]
        self.kind, self.cfg = kind, cfg
        self.n = n = k["T"] * k["B"]
        self.rel = os.path.join(cfg["root"], f"flashbax-{kind}")
        self.item = {f: jnp.zeros(s, dt) for f, (dt, s) in k["fields"].items()}
        self.pool = [{f: jnp.asarray(v.reshape((1, n) + v.shape[2:]))
                      for f, v in r.items()} for r in pool_of(kind)]
        jax.block_until_ready(self.pool)
        self.tds = [jnp.asarray(np.abs(t) + EPS) for t in tds_of()]
        rb = k["isz"] * n
        self.w = max(1, min(cfg["rollouts"],
                            math.ceil(cfg["fbx_write_mib"] * MiB / rb)))
        self.each = max(1, min(cfg["rollouts"], int(cfg["fbx_each_mib"] * MiB // rb)))

    def _writer(self, w):
        """A prioritised item buffer holding 2 w rollouts and its jitted,
        donating add, compiled (on a throwaway state)."""
        fbx, jax = self.fbx, self.jax
        buf = fbx.make_prioritised_item_buffer(
            max_length=2 * w * self.n, min_length=1, sample_batch_size=1,
            add_sequences=True, add_batches=True, priority_exponent=ALPHA)
        add = jax.jit(buf.add, donate_argnums=0)
        jax.block_until_ready(add(buf.init(self.item), self.pool[0]))
        return buf, add

    def _fill(self, uid, w, rollouts):
        buf, add = self._writer(w)
        state = buf.init(self.item)
        jax = self.jax
        jax.block_until_ready(state)
        with contextlib.redirect_stdout(io.StringIO()):
            vault = self.Vault("vault", experience_structure=state.experience,
                               rel_dir=self.rel, vault_uid=uid)
        path = os.path.join(self.rel, "vault", uid)
        pool = self.pool
        t0 = time.perf_counter()
        for i in range(rollouts):
            state = add(state, pool[i % POOL])
            if (i + 1) % w == 0 or i + 1 == rollouts:
                vault.write(state)
        fsync_tree(path)
        secs = time.perf_counter() - t0
        return secs, vault, path

    def add(self):
        secs, self.vault, path = self._fill("main", self.w, self.cfg["rollouts"])
        return {"secs": secs, "disk": disk_bytes(path),
                "note": f"vault.write every {self.w} rollouts "
                        f"({self.w * self.n * KINDS[self.kind]['isz'] / MiB:.1f} MiB)"}

    def add_each(self):
        secs, _, path = self._fill("each", 1, self.each)
        d = disk_bytes(path)
        shutil.rmtree(path, ignore_errors=True)
        return {"secs": secs, "disk": d, "rollouts": self.each,
                "note": f"vault.write after every rollout, the first "
                        f"{self.each} rollouts"}

    def open(self):
        """Drop the vault's pages, then time open + read + a prioritised
        buffer holding what was read."""
        jax, fbx = self.jax, self.fbx
        cap = self.cfg["cap"]
        sb = fbx.make_prioritised_item_buffer(
            max_length=cap, min_length=1, sample_batch_size=BATCH,
            add_sequences=True, add_batches=True, priority_exponent=ALPHA)
        shapes = {f: jax.ShapeDtypeStruct((1, cap) + x.shape, x.dtype)
                  for f, x in self.item.items()}
        st_shape = jax.eval_shape(sb.init, self.item)
        add = jax.jit(sb.add, donate_argnums=0).lower(st_shape, shapes).compile()
        self.vault = None
        path = os.path.join(self.rel, "vault", "main")
        drop_pages(path)
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            vault = self.Vault("vault", rel_dir=self.rel, vault_uid="main")
        got = vault.read()
        exp = {f: got.experience[f] for f in self.item}
        state = add(sb.init(self.item), exp)
        jax.block_until_ready(state)
        secs = time.perf_counter() - t0
        del got, exp
        self.sb, self.state = sb, state
        n_read = int(vault.vault_index)
        return {"secs": secs,
                "note": f"read {n_read} samples into RAM, then a "
                        "prioritised item buffer of them"}

    def prepare(self):
        jax, jnp, sb = self.jax, self.jnp, self.sb
        cap = self.cfg["cap"]
        key = jax.random.PRNGKey(1)

        def sample(state, i):
            s = sb.sample(state, jax.random.fold_in(key, i))
            w = (cap * s.probabilities) ** -BETA
            return s.experience, s.indices, w / jnp.max(w)
        self.sample = jax.jit(sample)
        self.setp = jax.jit(sb.set_priorities, donate_argnums=0)
        self.step(0)

    def step(self, i):
        exp, idx, w = self.sample(self.state, i)
        self.state = self.setp(self.state, idx, self.tds[i % N_TD])
        self.jax.block_until_ready((exp, w, self.state))
        self.last = (exp, idx, w)

    def check(self):
        exp, idx, w = self.last
        k = KINDS[self.kind]
        idx, w = np.asarray(idx), np.asarray(w, dtype=np.float64)
        shapes = all(tuple(exp[n].shape) == (BATCH,) + sh
                     for n, (_, sh) in k["fields"].items())
        ok = (len(idx) == BATCH and bool(np.all(idx < self.cfg["cap"]))
              and shapes and bool(np.all(w > 0)) and bool(np.all(w <= 1 + 1e-6)))
        return ok, "indices, fields or weights"

    def info(self):
        return {}

    def drop(self):
        self.state = self.vault = None
        shutil.rmtree(self.rel, ignore_errors=True)


CLASSES = {"per": PerSide, "torchrl": TorchrlSide, "flashbax": FlashbaxSide}


def serve(conn, side):
    """A side's process: answers the parent's commands, one at a time."""
    try:
        obj = CLASSES[side]()
    except Exception as e:  # noqa: BLE001 - any import failure leaves it out
        conn.send(("missing", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ok", {"versions": obj.versions(), "status": proc_status()}))
    while True:
        cmd, arg = conn.recv()
        try:
            if cmd == "quit":
                obj.drop()
                conn.send(("ok", None))
                return
            if cmd == "setup":
                reset_hwm()
                obj.setup(*arg)
                out = None
            elif cmd == "loop":
                iters, j0 = arg
                t0 = time.perf_counter()
                for i in range(iters):
                    obj.step(j0 + i)
                out = time.perf_counter() - t0
            elif cmd == "calibrate":
                iters = 1
                while True:  # doubles as the warm-up
                    t0 = time.perf_counter()
                    for i in range(iters):
                        obj.step(i)
                    t = time.perf_counter() - t0
                    if t >= arg:
                        break
                    iters = max(iters * 2, int(iters * arg * 1.2 / max(t, 1e-6)) + 1)
                out = iters
            elif cmd == "status":
                out = proc_status()
            else:
                out = getattr(obj, cmd)()
            conn.send(("ok", out))
        except Exception:  # noqa: BLE001 - reported to the parent
            conn.send(("error", traceback.format_exc()))


# ---------------------------------------------------------------- parent

class Worker:
    def __init__(self, side):
        ctx = mp.get_context("spawn")
        self.side = side
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child, side), daemon=True)
        self.proc.start()
        child.close()

    def greet(self):
        """Wait for the side's imports: whether they failed."""
        kind, val = self.conn.recv()
        self.missing = val if kind == "missing" else None
        self.hello = val if kind == "ok" else None
        return self.missing

    def call(self, cmd, arg=None):
        self.conn.send((cmd, arg))
        kind, val = self.conn.recv()
        if kind != "ok":
            raise RuntimeError(f"{self.side} {cmd}: {val}")
        return val

    def close(self):
        try:
            self.call("quit")
        except Exception:  # noqa: BLE001 - best effort
            pass
        self.proc.join(30)


LOG = []


def say(line=""):
    print(line, flush=True)
    LOG.append(line)


def disk_mbs(root, nbytes):
    path = os.path.join(root, "seq.tmp")
    block = np.random.default_rng(3).integers(0, 256, MiB, dtype=np.uint8).tobytes()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        off = 0
        while off < nbytes:
            k = min(MiB, nbytes - off)
            os.pwrite(fd, block[:k], off)
            off += k
        os.fsync(fd)
        t = time.perf_counter() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    return nbytes / t / 1e6


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
    ap.add_argument("csv", nargs="?",
                    default=os.path.join(here, "results", "store_peers.csv"))
    ap.add_argument("--mib", type=float, default=1024)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dir", default="store-peers.tmp")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--fbx-write-mib", type=float, default=8)
    ap.add_argument("--fbx-each-mib", type=float, default=16)
    a = ap.parse_args()
    if a.quick:
        a.mib, a.reps, a.min_time = 8, 3, 0.02
        a.fbx_write_mib, a.fbx_each_mib = 2, 0.25
    csv_path = os.path.abspath(a.csv)
    os.makedirs(os.path.dirname(csv_path), exist_ok=True)
    root = os.path.abspath(a.dir)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    st = os.statvfs(root)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    workers, missing = [], []
    started_workers = [Worker(side) for side in SIDES]  # imports overlap
    for w in started_workers:
        side = w.side
        if w.greet():
            if side == "per":
                sys.stderr.write(f"store_peers: per does not import: {w.missing}\n")
                return 2
            missing.append(f"{side} ({w.missing})")
            w.proc.join(30)
        else:
            workers.append(w)
    names = [w.side for w in workers]
    vers = {}
    for w in workers:
        vers.update(w.hello["versions"])
    base = {w.side: w.hello["status"].get("VmRSS", 0) for w in workers}
    ver_of = {"per": vers.get("per", "?"), "torchrl": vers.get("torchrl", "?"),
              "flashbax": vers.get("flashbax", "?"),
              "flashbax-each": vers.get("flashbax", "?"), "disk": "-"}

    say(f"store_peers: {a.mib:g} MiB replays in {root} "
        f"({st.f_bavail * st.f_frsize / 2**30:.0f} GiB free), batches of "
        f"{BATCH}, alpha {ALPHA}, beta {BETA}; reps {a.reps}, min time "
        f"{a.min_time} s{'; QUICK: no figure means anything' if a.quick else ''}")
    say(f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs; python "
        f"{platform.python_version()}, numpy {np.__version__}; load average "
        f"before: {load}; measured {started}; per: git "
        f"{os.environ.get('PER_GIT', '?')}")
    say("sides: " + ", ".join(f"{k} {v}" for k, v in vers.items()))
    for m in missing:
        say(f"left out: {m}")
    if "flashbax" in names:
        say("flashbax samples what vault.read() put in RAM: a vault has no "
            "sampling of its own (read() returns all of it, or a slice)")

    rows = []

    def row(what, kind, side, value, lo="", hi="", unit="", ratio="",
            nbytes="", disk="", status=None, note=""):
        k = KINDS[kind]
        s = status or {}
        rows.append({
            "what": what, "item": kind, "item_bytes": k["isz"], "side": side,
            "version": ver_of.get(side, "?"), "data_bytes": nbytes,
            "value": f"{value:.6g}", "lo": lo if lo == "" else f"{lo:.6g}",
            "hi": hi if hi == "" else f"{hi:.6g}", "unit": unit,
            "per_ratio": ratio if ratio == "" else f"{ratio:.4g}",
            "disk_mib": disk if disk == "" else f"{disk / MiB:.1f}",
            "rss_mib": f"{s['VmRSS']:.0f}" if "VmRSS" in s else "",
            "rss_file_mib": f"{s['RssFile']:.0f}" if "RssFile" in s else "",
            "hwm_mib": f"{s['VmHWM']:.0f}" if "VmHWM" in s else "",
            "base_mib": (f"{base[side.split('-')[0]]:.0f}"
                         if side.split("-")[0] in base else ""),
            "note": note.replace(",", ";")})

    bad = 0
    try:
        for kind, k in KINDS.items():
            n = k["T"] * k["B"]
            rollouts = max(1, int(a.mib * MiB // (k["isz"] * n)))
            cap = rollouts * n
            nbytes = cap * k["isz"]
            cfg = {"root": root, "cap": cap, "rollouts": rollouts,
                   "fbx_write_mib": a.fbx_write_mib,
                   "fbx_each_mib": a.fbx_each_mib}
            say()
            say(f"== {kind}: {cap} samples of {k['isz']} bytes "
                f"({nbytes / MiB:.1f} MiB), {rollouts} rollouts of "
                f"{k['T']} x {k['B']}")
            for w in workers:
                w.call("setup", (kind, cfg))
            dmbs = disk_mbs(root, nbytes)
            adds = {}
            for w in workers:
                r = w.call("add")
                r["status"] = w.call("status")
                adds[w.side] = (nbytes / r["secs"] / 1e6, r)
            if "flashbax" in names:
                fw = workers[names.index("flashbax")]
                r = fw.call("add_each")
                r["status"] = fw.call("status")
                adds["flashbax-each"] = (r["rollouts"] * n * k["isz"] / r["secs"] / 1e6, r)
            per_mbs = adds["per"][0]
            say(f"add (MB/s of samples until written and fsynced; the disk "
                f"alone {dmbs:.1f} MB/s):")
            for side, (mbs, r) in adds.items():
                ratio = per_mbs / mbs
                rs = "" if side == "per" else f"per/{side} {ratio:.2f}x"
                say(f"  {side:<14} {mbs:9.1f} MB/s {r['secs']:8.2f} s  disk "
                    f"{r['disk'] / MiB:7.1f} MiB  RSS "
                    f"{r['status'].get('VmRSS', 0) if 'status' in r else 0:5.0f} "
                    f"MiB  {rs:<24} [{r['note']}]")
                nb = nbytes if side != "flashbax-each" else r["rollouts"] * n * k["isz"]
                row("add", kind, side, mbs, unit="MB/s", ratio=ratio, nbytes=nb,
                    disk=r["disk"], status=r.get("status"), note=r["note"])
            say(f"  {'disk':<14} {dmbs:9.1f} MB/s  per/disk {per_mbs / dmbs:.2f}")
            row("add", kind, "disk", dmbs, unit="MB/s", ratio=per_mbs / dmbs,
                nbytes=nbytes, note="os.pwrite of 1 MiB blocks, then fsync")

            opens = {}
            if "flashbax" in names:  # it samples what it reads
                opens["flashbax"] = workers[names.index("flashbax")].call("open")

            for w in workers:
                w.call("prepare")
            iters = {w.side: w.call("calibrate", a.min_time) for w in workers}
            times = {s: [] for s in names}
            for rnd in range(a.reps):
                for j in range(len(workers)):
                    w = workers[(rnd + j) % len(workers)]
                    t = w.call("loop", (iters[w.side], 1000 * (rnd + 1)))
                    times[w.side].append(iters[w.side] * BATCH / t)
            for w in workers:
                ok, why = w.call("check")
                if not ok:
                    sys.stderr.write(f"store_peers: {w.side} returned a bad batch "
                                     f"({why}) at {kind}\n")
                    bad = 1
            status = {w.side: w.call("status") for w in workers}
            info = {w.side: w.call("info") for w in workers}
            med = {s: sorted(v)[len(v) // 2] for s, v in times.items()}
            say("sample (samples/s, batches of 256: sample + priority update; "
                "median (min-max)):")
            for s in names:
                ratio = med["per"] / med[s]
                extra = ""
                if s == "per":
                    extra = f"; {100 * info[s]['hits']:.0f} % cache hits"
                if s == "flashbax":
                    extra = "; from RAM (vault.read)"
                st_ = status[s]
                rs = "" if s == "per" else f"per/{s} {ratio:.2f}x"
                say(f"  {s:<14} {med[s]:11.0f} ({min(times[s]):.0f}-"
                    f"{max(times[s]):.0f})  {rs:<22} RSS "
                    f"{st_.get('VmRSS', 0):.0f} MiB ({st_.get('RssFile', 0):.0f} "
                    f"file-backed), peak {st_.get('VmHWM', 0):.0f}, base "
                    f"{base[s]:.0f}{extra}")
                row("sample", kind, s, med[s], lo=min(times[s]), hi=max(times[s]),
                    unit="samples/s", ratio=ratio, nbytes=nbytes, status=st_,
                    note=(f"{100 * info[s]['hits']:.1f} % cache hits" if s == "per"
                          else "from RAM (vault.read)" if s == "flashbax" else
                          "memmap"))

            opens["per"] = workers[0].call("open")
            say("open (seconds to a replay that samples, the files' pages "
                "dropped first):")
            for s in ("per", "flashbax"):
                if s not in opens:
                    continue
                ratio = opens[s]["secs"] / opens["per"]["secs"]
                rs = "" if s == "per" else f"{s}/per {ratio:.2f}x"
                say(f"  {s:<14} {opens[s]['secs']:9.3f} s  {rs:<22} "
                    f"[{opens[s]['note']}]")
                row("open", kind, s, opens[s]["secs"], unit="s", ratio=ratio,
                    nbytes=nbytes, note=opens[s]["note"])
            for w in workers:
                w.call("drop")
    finally:
        for w in workers:
            w.close()
        shutil.rmtree(root, ignore_errors=True)

    with open(csv_path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        wr.writeheader()
        wr.writerows(rows)
    txt = os.path.splitext(csv_path)[0] + ".txt"
    with open(txt, "w") as f:
        f.write("\n".join(LOG) + "\n")
    print(f"wrote {csv_path}, {txt}")
    if bad:
        sys.stderr.write("store_peers: FAILED: a side returned a bad batch\n")
    return bad


if __name__ == "__main__":
    sys.exit(main())
