"""The README's support table ("## What each buffer supports") against the
code: every cell is checked by calling the code it speaks for, so the
table cannot drift from what the headers and bindings accept.

How a cell is read: its first word is its claim, "yes" (the call is
accepted and does what the row says) or "no" (the code refuses it, or
the header declares nothing that does it); "—" makes no claim. The rest
of the cell is prose for the reader and is not checked. Every row of the
table must have a probe here and every probe a row, so a row cannot be
added, renamed or dropped without this file.

What answers for each column:
- per_buffer (per.h): per.ReplayBuffer, per.NStep and per.FrameBuffer,
  the Python package's bindings of per.h's own functions; the caller-
  memory row from per.h's declaration of per_buffer_init_mem.
- per_cuda_buffer (per_cuda.h): per.cuda.host, the per.cuda binding
  over per_cuda.cu's kernels compiled for the CPU (tools/pytest.sh builds
  it and sets PER_NEED_CUDA_HOST=1; elsewhere this column skips when it
  is missing); a device-side refusal counts when status() raises it.
  Rows about functions the header lacks (n-step, priorities at add time,
  frame stacks) from per_cuda.h's declarations.
- per_mpi (per_mpi.h): a C program that calls per_mpi.h on one rank,
  compiled by the C compiler (CC, else cc; the column skips without one)
  against a stand-in mpi.h for a world of one rank, written here: the
  collectives copy their one rank's data, which is what MPI does at one
  rank, so what per_mpi.h accepts or refuses (PER_ERR_ARG) is its own
  code's answer. Rows about functions the header lacks from per_mpi.h's
  declarations.
- per_store (per_store.h): per.TrajectoryStore, the binding of
  per_store.h's functions (its index is a per_buffer whose items are
  sample positions), each probe's store in a directory of its own under
  tmp_path, without the writer thread and with a small ring; the batches
  compared with a per.ReplayBuffer's are read from the segment files (the
  column skips where the build has no store: per_store.h is POSIX only). The
  sequence row from per_store_init's refusal (PER_ERR_ARG) of a config
  whose seq_len is not 0, asked through per._per._Store, as
  TrajectoryStore takes no sequence keywords (per_store_sample's refusal
  of PER_SAMPLE_SEQUENCES is not reachable from Python); rows about
  functions the header lacks (priorities at add time, n-step, caller
  memory, frame stacks, a function over sequences) from per_store.h's
  declarations.

Quick: one compile of per.h and per_mpi.h (about 2 s) and small buffers."""

import inspect
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import per

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"
COLUMNS = ("per_buffer", "per_cuda_buffer", "per_mpi", "per_store")

# Row label (the first cell, exactly as the README writes it) -> probe
# name, the same for every column; each column's probes are below.
ROWS = {
    "prioritized sampling with replacement": "replacement",
    "batches of one `per_buffer` given the same calls": "same_batches",
    "window of the newest items (`opts.window`)": "window",
    "window of the newest trajectories (`PER_SAMPLE_TRAJECTORIES`)": "trajectories",
    "distinct draws, without replacement (`PER_SAMPLE_UNIQUE`)": "unique",
    "sequences (`seq_len`, `PER_SAMPLE_SEQUENCES`, `update_seq`)": "sequences",
    "episode ends and trajectory ids": "ends",
    "beta schedule, fixed beta (`PER_SAMPLE_BETA`)": "beta",
    "IS weights over the batch's smallest leaf": "weights_batch",
    "IS weights over the buffer's smallest leaf (`PER_WEIGHTS_BUFFER_MAX`)": "weights_buffer",
    "new items at the largest leaf stored now (`PER_MAX_LIVE`)": "live_max",
    "priorities given at add time (`per_buffer_add_td`)": "add_td",
    "n-step returns (`per_nstep`)": "nstep",
    "stale ids skipped on update": "stale",
    "checkpoints": "checkpoints",
    "item ring in caller memory": "caller_memory",
    "frame stacks (`per_frames.h`)": "frames",
}


def table():
    """{row label: [cell per column]} of the README's support table."""
    text = README.read_text(encoding="utf-8")
    assert "\n## What each buffer supports\n" in text, \
        "README.md has no '## What each buffer supports' section"
    section = text.split("\n## What each buffer supports\n", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    for name, cell in zip(COLUMNS, head[1:]):
        assert f"`{name}`" in cell, f"column {cell!r} is not {name}"
    assert len(head) == 1 + len(COLUMNS), head
    rows = {}
    for ln in lines[2:]:
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        assert len(cells) == 1 + len(COLUMNS), ln
        rows[cells[0]] = cells[1:]
    return rows


def claim(cell):
    """True for "yes...", False for "no...", None for "—"."""
    word = re.match(r"[^\s,:;(/]*", cell).group(0).strip("`*")
    if word in ("—", "-"):
        return None
    assert word in ("yes", "no"), f"a cell must start with yes, no or —: {cell!r}"
    return word == "yes"


def declares(header, pattern):
    """Whether the header declares a function whose name matches pattern
    (a public declaration: PERDEF or PER_CUDA_DEF, then the name and "(")."""
    text = (ROOT / header).read_text(encoding="utf-8")
    return re.search(r"(?:PERDEF|PER_CUDA_DEF)\b[^;{]*?\b(" + pattern + r")\s*\(",
                     text) is not None


def params(header, name):
    """The parameter list of `name`'s declaration in header."""
    text = (ROOT / header).read_text(encoding="utf-8")
    m = re.search(r"(?:PERDEF|PER_CUDA_DEF)\b[^;{]*?\b" + name + r"\s*\(([^;]*?)\)\s*;",
                  text, re.S)
    assert m, f"{header} does not declare {name}"
    return m.group(1)


def refused(f, status="PER_ERR_ARG"):
    """True when f() raises per.Error with that status: the C code's
    refusal, not a Python argument error."""
    try:
        f()
    except per.Error as e:
        assert e.name == status, e
        return True
    return False


ITEM = {"obs": (np.float32, 2), "act": np.int64, "rew": np.float32}


def _items(n, k=0):
    return {"obs": (np.arange(n)[:, None] + np.full((n, 2), k)).astype(np.float32),
            "act": np.arange(n, dtype=np.int64) % 3,
            "rew": np.linspace(0, 1, n, dtype=np.float32)}


def _ends(n):
    e = np.zeros(n, np.uint8)
    e[4::5] = per.END_TERMINATED
    return e


# -- per_buffer: per.ReplayBuffer ---------------------------------------------


def _cpu(**kw):
    b = per.ReplayBuffer(64, ITEM, seed=3, **kw)
    b.add_batch(**_items(40), ends=_ends(40))
    return b


def cpu_probes(tmp_path):
    p = {}
    b = _cpu()
    s = b.sample(64)                        # 64 draws of 40 items: repeats
    p["replacement"] = s["weights"].max() == 1 and len(set(s["ids"].tolist())) < 64
    p["same_batches"] = None
    got = _cpu().sample(16, window=5)["ids"] & 0xFFFFFFFF
    p["window"] = set(got.tolist()) <= set(range(35, 40))
    t = _cpu()
    t.add_batch(**_items(3))                # one trajectory: slots 40, 41, 42
    got = t.sample(8, window=1, trajectories=True)["ids"] & 0xFFFFFFFF
    p["trajectories"] = set(got.tolist()) <= {40, 41, 42}
    u = _cpu(max_unique=32).sample(32, unique=True)["ids"]
    p["unique"] = len(set(u.tolist())) == 32 and refused(
        lambda: _cpu(max_unique=32).sample(33, unique=True), "PER_ERR_BATCH")
    q = _cpu(seq_len=4, seq_stride=4)
    sq = q.sample(4, sequences=True)
    p["sequences"] = sq["obs"].shape == (4, 4, 2) and \
        q.update_sequences(sq["ids"], np.ones((4, 4), np.float32)) == 0
    e = b.sample(16, episode_info=True)
    p["ends"] = set(e["end"].tolist()) <= {per.END_NONE, per.END_TERMINATED} and \
        bool((e["trajectory"] == e["trajectory"][0]).all())
    p["beta"] = bool((b.sample(8, beta=0.0)["weights"] == 1).all())
    p["weights_batch"] = b.sample(8)["weights"].max() == 1
    # one leaf made the buffer's smallest (td 0), then almost never drawn:
    # over the buffer's smallest leaf the batch's largest weight is below
    # 1 (over the batch's it is 1, seed fixed)
    w = _cpu(weights_buffer_max=True)
    w.update(np.array([w.sample(1)["ids"][0]], np.uint64), [0.0])
    p["weights_buffer"] = w.sample(8)["weights"].max() < 1
    p["live_max"] = len(_cpu(live_max=True).sample(4)["ids"]) == 4
    a = per.ReplayBuffer(8, ITEM, seed=3)
    a.add_batch(**_items(2), td=np.array([0.5, 2.0], np.float32))
    p["add_td"] = np.allclose(a.priorities()[:2], (np.array([0.5, 2.0]) + 1e-6) ** 0.6)
    n = per.NStep(3, 0.99, (2,), np.float32)
    nb = per.ReplayBuffer(16, n.item_dtype, seed=1)
    for k in range(5):
        n.step(nb, np.zeros(2), 0, 1.0, np.ones(2), terminated=k == 4)
    p["nstep"] = len(nb) == 5
    st = _cpu()
    ids = st.sample(8)["ids"]
    st.add_batch(**_items(64))
    p["stale"] = st.update(ids, np.ones(8, np.float32)) == 8
    c = _cpu()
    c.save(tmp_path / "cpu.per")
    f = c.save_async(tmp_path / "cpu2.per")
    f.result()
    c2 = per.ReplayBuffer.from_file(tmp_path / "cpu.per")
    p["checkpoints"] = (c2.sample(8)["ids"] == c.sample(8)["ids"]).all() and \
        (tmp_path / "cpu2.per").read_bytes() == (tmp_path / "cpu.per").read_bytes()
    p["caller_memory"] = declares("per.h", "per_buffer_init_mem")
    fb = per.FrameBuffer(64, (4, 4), np.uint8, stack=2, n=1)
    for k in range(10):
        fb.step(np.full((4, 4), k, np.uint8), 0, 1.0, np.full((4, 4), k + 1, np.uint8),
                False, False)
    p["frames"] = fb.sample(4)["obs"].shape == (4, 2, 4, 4)
    return p


# -- per_cuda_buffer: per.cuda.host ------------------------------------------


def cuda_probes(tmp_path):
    import per.cuda as pc
    if not pc.host.available():
        if os.environ.get("PER_NEED_CUDA_HOST") == "1":
            pytest.fail("PER_NEED_CUDA_HOST=1 but per._cuda_host is not installed")
        pytest.skip("per._cuda_host is not installed")
    H = pc.host

    def dev(seed=3, n=40, **kw):
        b = H.ReplayBuffer(64, ITEM, seed=seed, max_batch=64, **kw)
        b.add_batch(**{k: H.to_device(v) for k, v in _items(n).items()},
                    ends=H.to_device(_ends(n)))
        return b

    def host(a):
        return H.to_host(a)

    def works(make, draw):
        """draw(buffer) ran and the device found nothing wrong."""
        b = make()
        out = draw(b)
        b.status()
        return out

    p = {}
    b = dev()
    s = b.sample(64)                        # 64 draws of 40 items: repeats
    b.status()
    p["replacement"] = host(s["weights"]).max() == 1 and \
        len(set(host(s["ids"]).tolist())) < 64
    b, cpu = dev(), _cpu()                  # the same config, seed and adds
    same = True
    for kw in ({}, {"window": 7}, {"beta": 0.5}):
        r, g = cpu.sample(8, **kw), b.sample(8, **kw)
        b.status()
        same &= host(g["ids"]).view(np.uint64).tolist() == r["ids"].tolist()
        same &= host(g["weights"]).tobytes() == r["weights"].tobytes()
        same &= host(g["obs"]).tobytes() == np.ascontiguousarray(r["obs"]).tobytes()
    p["same_batches"] = bool(same)
    got = host(works(dev, lambda d: d.sample(16, window=5))["ids"]).view(np.uint64)
    p["window"] = set((got & 0xFFFFFFFF).tolist()) <= set(range(35, 40))
    p["trajectories"] = len(host(works(
        dev, lambda d: d.sample(8, window=1, trajectories=True))["ids"])) == 8
    u = host(works(lambda: dev(max_unique=32), lambda d: d.sample(32, unique=True))["ids"])
    p["unique"] = len(set(u.tolist())) == 32
    q = dev(seq_len=4, seq_stride=4)
    sq = q.sample(4, sequences=True)
    q.status()
    q.update_sequences(sq["ids"], H.to_device(np.ones((4, 4), np.float32)))
    q.status()
    p["sequences"] = tuple(host(sq["obs"]).shape) == (4, 4, 2)
    # the ends and trajectory ids stored: the downloaded state is the CPU's
    dev(n=40).to_cpu().save(tmp_path / "ends-dev.per")
    _cpu().save(tmp_path / "ends-cpu.per")
    p["ends"] = (tmp_path / "ends-dev.per").read_bytes() == \
        (tmp_path / "ends-cpu.per").read_bytes()
    p["beta"] = bool((host(works(dev, lambda d: d.sample(8, beta=0.0))["weights"]) == 1)
                     .all())
    p["weights_batch"] = host(works(dev, lambda d: d.sample(8))["weights"]).max() == 1
    wb = dev(weights_buffer_max=True)       # as the CPU probe: one leaf at td 0
    one = H.to_device(host(wb.sample(1)["ids"]).copy())
    wb.update(one, H.to_device(np.zeros(1, np.float32)))
    wb.status()
    p["weights_buffer"] = host(works(lambda: wb, lambda d: d.sample(8))["weights"]).max() < 1
    # per.cuda.ReplayBuffer refuses live_max itself; ask per_cuda_buffer_init_mem
    mod = H.module
    bk = pc._Backend(mod, "per.cuda")
    d0 = bk.device_of(None)
    cfg = per.config.c_config("probe", per.config.REPLAY_KEYS, {"live_max": True},
                              {"capacity": 64, "item_size": 16})
    _, status, _ = mod._Buffer(cfg, 16, 0, d0, bk.stream_of(None, d0))
    p["live_max"] = status == per._per.PER_OK
    assert status in (per._per.PER_OK, per._per.PER_ERR_ARG), status
    p["add_td"] = declares("per_cuda.h", r"per_cuda_buffer_add\w*") and any(
        "td" in params("per_cuda.h", name)
        for name in re.findall(r"PER_CUDA_DEF[^;]*?\b(per_cuda_buffer_add\w*)\s*\(",
                               (ROOT / "per_cuda.h").read_text()))
    p["nstep"] = declares("per_cuda.h", r"\w*nstep\w*") or \
        "per_cuda" in params("per.h", "per_nstep_step")
    st = dev()
    ids = st.sample(8)["ids"]
    ids = H.to_device(host(ids).copy())
    st.add_batch(**{k: H.to_device(v) for k, v in _items(64).items()})
    stale = st.update(ids, H.to_device(np.ones(8, np.float32)))
    st.status()
    p["stale"] = int(host(stale)) == 8
    c = dev()
    c.to_cpu().save(tmp_path / "dev.per")
    c2 = H.ReplayBuffer(64, ITEM, seed=99, max_batch=64)
    c2.from_cpu(per.ReplayBuffer.from_file(tmp_path / "dev.per"))
    c2.to_cpu().save(tmp_path / "dev2.per")
    p["checkpoints"] = (tmp_path / "dev.per").read_bytes() == \
        (tmp_path / "dev2.per").read_bytes()
    p["caller_memory"] = declares("per_cuda.h", "per_cuda_buffer_init_mem")
    p["frames"] = declares("per_cuda.h", r"\w*frames\w*")
    return p


# -- per_mpi: per_mpi.h on one rank ----------------------------------------------

# mpi.h for a world of one rank: what per_mpi.h calls, each collective a
# copy of the rank's own data (point-to-point calls are the feed's, which
# needs two ranks: not called here).
FAKE_MPI = r"""
#ifndef FAKE_MPI_H
#define FAKE_MPI_H
#include <stdlib.h>
#include <string.h>
typedef int MPI_Comm;
typedef int MPI_Datatype; /* its size in bytes */
typedef int MPI_Op;
typedef int MPI_Request;
typedef struct { int MPI_SOURCE, MPI_TAG, MPI_ERROR; } MPI_Status;
#define MPI_COMM_WORLD 1
#define MPI_BYTE 1
#define MPI_INT ((int)sizeof(int))
#define MPI_INT32_T 4
#define MPI_UINT32_T 4
#define MPI_INT64_T 8
#define MPI_UINT64_T 8
#define MPI_MAX 1
#define MPI_SUM 2
#define MPI_IN_PLACE ((void *)1)
#define MPI_STATUS_IGNORE ((MPI_Status *)0)
#define MPI_REQUEST_NULL 0
static int MPI_Comm_dup(MPI_Comm c, MPI_Comm *n) { *n = c; return 0; }
static int MPI_Comm_free(MPI_Comm *c) { *c = 0; return 0; }
static int MPI_Comm_rank(MPI_Comm c, int *r) { (void)c; *r = 0; return 0; }
static int MPI_Comm_size(MPI_Comm c, int *w) { (void)c; *w = 1; return 0; }
static int MPI_Type_contiguous(int n, MPI_Datatype t, MPI_Datatype *o) { *o = n * t; return 0; }
static int MPI_Type_commit(MPI_Datatype *t) { (void)t; return 0; }
static int MPI_Type_free(MPI_Datatype *t) { (void)t; return 0; }
static void fake_copy(void *to, const void *from, size_t n) {
  if (from != MPI_IN_PLACE && n) memmove(to, from, n);
}
static int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c) {
  (void)o; (void)c; fake_copy(r, s, (size_t)n * t); return 0;
}
static int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn,
                         MPI_Datatype rt, MPI_Comm c) {
  (void)rn; (void)rt; (void)c; fake_copy(r, s, (size_t)sn * st); return 0;
}
static int MPI_Allgatherv(const void *s, int sn, MPI_Datatype st, void *r, const int *rn,
                          const int *rd, MPI_Datatype rt, MPI_Comm c) {
  (void)rn; (void)c; fake_copy((char *)r + (size_t)rd[0] * rt, s, (size_t)sn * st); return 0;
}
static int MPI_Gatherv(const void *s, int sn, MPI_Datatype st, void *r, const int *rn,
                       const int *rd, MPI_Datatype rt, int root, MPI_Comm c) {
  (void)rn; (void)root; (void)c;
  if (r) fake_copy((char *)r + (size_t)rd[0] * rt, s, (size_t)sn * st);
  return 0;
}
static int MPI_Alltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn,
                        MPI_Datatype rt, MPI_Comm c) {
  (void)rn; (void)rt; (void)c; fake_copy(r, s, (size_t)sn * st); return 0;
}
static int MPI_Alltoallv(const void *s, const int *sn, const int *sd, MPI_Datatype st,
                         void *r, const int *rn, const int *rd, MPI_Datatype rt, MPI_Comm c) {
  (void)rn; (void)c;
  fake_copy((char *)r + (size_t)rd[0] * rt, (const char *)s + (size_t)sd[0] * st,
            (size_t)sn[0] * st);
  return 0;
}
static int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  (void)b; (void)n; (void)t; (void)root; (void)c; return 0;
}
static int MPI_Send(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c) {
  (void)b; (void)n; (void)t; (void)d; (void)g; (void)c; abort();
}
static int MPI_Isend(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c,
                     MPI_Request *q) {
  (void)b; (void)n; (void)t; (void)d; (void)g; (void)c; (void)q; abort();
}
static int MPI_Irecv(void *b, int n, MPI_Datatype t, int s, int g, MPI_Comm c,
                     MPI_Request *q) {
  (void)b; (void)n; (void)t; (void)s; (void)g; (void)c; (void)q; abort();
}
static int MPI_Test(MPI_Request *q, int *done, MPI_Status *s) {
  (void)q; (void)done; (void)s; abort();
}
static int MPI_Wait(MPI_Request *q, MPI_Status *s) { (void)q; (void)s; abort(); }
#endif
"""

MPI_PROBES = r"""
#include <stdio.h>
#include <string.h>
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_MPI_IMPLEMENTATION
#include "per_mpi.h"

PER_NSTEP_ITEM(nitem, float, 2, int32_t, 1);

static float items[128];
static uint8_t ends[128];

static void say(const char *probe, int yes) { printf("%s %s\n", probe, yes ? "yes" : "no"); }

/* A one-rank replay of capacity 64 holding 40 items (ends every 5th). */
static per_status make(per_mpi *m, uint32_t flags, uint32_t seq_len) {
  per_config cfg = per_config_default(64, sizeof(float));
  per_status s;
  cfg.seed = 3;
  cfg.flags = flags;
  cfg.seq_len = seq_len;
  cfg.seq_stride = seq_len;
  s = per_mpi_init(m, MPI_COMM_WORLD, &cfg, NULL);
  if (s == PER_OK) s = per_buffer_add_steps(&m->shard, items, 40, ends);
  return s;
}

static per_status draw(per_mpi *m, uint32_t flags, uint32_t window, double beta) {
  per_sample_opts o;
  per_mpi_id ids[8];
  float w[8];
  static unsigned char out[8 * sizeof(nitem)];
  memset(&o, 0, sizeof o);
  o.flags = flags;
  o.window = window;
  o.beta = beta;
  return per_mpi_sample(m, 8, 0, &o, out, ids, w);
}

int main(int argc, char **argv) {
  per_mpi m;
  per_buffer b;
  per_config cfg = per_config_default(64, sizeof(float));
  per_mpi_id ids[8];
  uint64_t bids[8];
  float w[8], bw[8], out[8], bout[8], td[8];
  uint32_t i, stale = 0;
  int same, yes;
  char path[4096];
  (void)argc;
  for (i = 0; i < 128; ++i) {
    items[i] = (float)i;
    ends[i] = i % 5 == 4 ? PER_END_TERMINATED : PER_END_NONE;
  }
  /* the batches of one per_buffer given the same config and adds */
  cfg.seed = 3;
  yes = make(&m, 0, 0) == PER_OK && per_buffer_init(&b, &cfg, NULL) == PER_OK &&
        per_buffer_add_steps(&b, items, 40, ends) == PER_OK;
  same = yes;
  for (i = 0; yes && i < 3; ++i) {
    uint32_t k;
    same = same && per_mpi_sample(&m, 8, 0, NULL, out, ids, w) == PER_OK &&
           per_buffer_sample(&b, 8, NULL, bout, bids, bw) == PER_OK &&
           !memcmp(w, bw, sizeof w) && !memcmp(out, bout, sizeof out);
    for (k = 0; k < 8; ++k) same = same && ids[k].id == bids[k] && ids[k].rank == 0;
  }
  say("same_batches", same);
  per_buffer_free(&b);
  say("replacement", per_mpi_sample(&m, 8, 0, NULL, out, ids, w) == PER_OK);
  say("window", draw(&m, 0, 5, 0) == PER_OK);
  say("trajectories", draw(&m, PER_SAMPLE_TRAJECTORIES, 1, 0) == PER_OK);
  say("unique", draw(&m, PER_SAMPLE_UNIQUE, 0, 0) == PER_OK);
  say("beta", draw(&m, PER_SAMPLE_BETA, 0, 0.5) == PER_OK);
  say("weights_batch", per_mpi_sample(&m, 8, 0, NULL, out, ids, w) == PER_OK);
  say("ends", per_buffer_add_steps(&m.shard, items, 10, ends) == PER_OK &&
                  m.shard.ends[(m.shard.pos + 63) % 64] == PER_END_TERMINATED &&
                  draw(&m, 0, 0, 0) == PER_OK);
  for (i = 0; i < 8; ++i) td[i] = 3.0f;
  say("add_td", per_buffer_add_td(&m.shard, items, 8, NULL, td) == PER_OK &&
                    draw(&m, 0, 0, 0) == PER_OK);
  /* stale: every drawn item overwritten before the update */
  yes = per_mpi_sample(&m, 8, 0, NULL, out, ids, w) == PER_OK &&
        per_buffer_add_batch(&m.shard, items, 64) == PER_OK &&
        per_mpi_update(&m, ids, td, 8, &stale) == PER_OK;
  say("stale", yes && stale == 8);
  snprintf(path, sizeof path, "%s/replay", argv[1]);
  say("checkpoints", per_mpi_save(&m, path) == PER_OK && per_mpi_load(&m, path) == PER_OK &&
                         per_mpi_size(&m) == 64);
  per_mpi_free(&m);

  yes = make(&m, PER_WEIGHTS_BUFFER_MAX, 0) == PER_OK && draw(&m, 0, 0, 0) == PER_OK;
  say("weights_buffer", yes);
  per_mpi_free(&m);
  say("live_max", make(&m, PER_MAX_LIVE, 0) == PER_OK);
  per_mpi_free(&m);
  say("sequences", make(&m, 0, 4) == PER_OK &&
                       draw(&m, PER_SAMPLE_SEQUENCES, 0, 0) == PER_OK);
  per_mpi_free(&m);
  {
    per_nstep a;
    per_nstep_config nc = {3, 0.99f, 2 * sizeof(float), sizeof(int32_t)};
    float obs[2] = {0, 0}, next[2] = {1, 1};
    int32_t act = 0;
    cfg = per_config_default(16, sizeof(nitem));
    yes = per_mpi_init(&m, MPI_COMM_WORLD, &cfg, NULL) == PER_OK &&
          per_nstep_init(&a, &nc, NULL) == PER_OK;
    for (i = 0; yes && i < 5; ++i)
      yes = per_nstep_step(&a, &m.shard, obs, &act, 1.0f, next, i == 4, 0) == PER_OK;
    say("nstep", yes && per_mpi_size(&m) == 5 && draw(&m, 0, 0, 0) == PER_OK);
    per_nstep_free(&a);
    per_mpi_free(&m);
  }
  return 0;
}
"""


def mpi_probes(tmp_path):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for per_mpi.h's probes")
    (tmp_path / "mpi.h").write_text(FAKE_MPI)
    (tmp_path / "probes.c").write_text(MPI_PROBES)
    exe = tmp_path / "probes"
    subprocess.run(cc.split() + ["-std=c99", "-O0", "-I", str(tmp_path), "-I", str(ROOT),
                                 str(tmp_path / "probes.c"), "-o", str(exe), "-lm"],
                   check=True)
    out = subprocess.run([str(exe), str(tmp_path)], check=True, capture_output=True,
                         text=True).stdout
    p = {k: v == "yes" for k, v in (ln.split() for ln in out.splitlines())}
    p["caller_memory"] = declares("per_mpi.h", r"per_mpi\w*_mem")
    p["frames"] = declares("per_mpi.h", r"\w*frames\w*")
    return p


# -- per_store: per.TrajectoryStore ------------------------------------------------

STORE_SPEC = {"obs": np.zeros(2, np.float32), "act": np.int64(0), "rew": np.float32(0)}


def _rollout(k, T=5, B=2):
    """A rollout dict of [T, B, ...] arrays; obs numbers its samples from k."""
    n = np.arange(k, k + T * B, dtype=np.float32).reshape(T, B)
    return {"obs": np.stack([n, n], axis=-1), "act": (np.arange(T * B) % 3).reshape(T, B),
            "rew": n / 100}


def _rollout_ends(T=5, B=2):
    """Every environment's last step terminated."""
    e = np.zeros((T, B), np.uint8)
    e[T - 1] = per.END_TERMINATED
    return e


def _records(dtype, r):
    """The rollout as the store keeps it: T * B records, sample t * B + b."""
    T, B = r["obs"].shape[:2]
    rec = np.zeros(T * B, dtype)
    for k in dtype.names:
        rec[k] = np.asarray(r[k]).reshape((T * B,) + dtype[k].shape)
    return rec


def store_probes(tmp_path):
    if not hasattr(per._per, "_Store"):
        pytest.skip("per_store.h is POSIX only: this build has no store")
    opened = []

    def new(name, n=4, **kw):
        """A store of capacity 64 in tmp_path/name holding n trajectories
        of 5 steps of 2 environments (40 samples for n = 4), a ring of 4
        KiB and no writer thread (adds write when staging is full)."""
        s = per.TrajectoryStore(tmp_path / name, STORE_SPEC, capacity=64,
                                **{"cache_bytes": 1 << 12, "staging_bytes": 1 << 12,
                                   "segment_bytes": 4096, "writer": False,
                                   "seed": 3, **kw})
        opened.append(s)
        for i in range(n):
            s.add_trajectories(_rollout(10 * i), ends=_rollout_ends())
        return s

    try:
        return _store_probes(tmp_path, new)
    finally:
        for s in opened:
            s.close()


def _store_probes(tmp_path, new):
    p = {}
    b = new("replacement")
    s = b.sample(64)                        # 64 draws of 40 samples: repeats
    p["replacement"] = s["weights"].max() == 1 and len(set(s["ids"].tolist())) < 64
    # a per_buffer of the same config given each trajectory as one add;
    # no cache and room for 2 trajectories staged: the others are read
    # back from the segment file
    st = new("same", n=0, cache_bytes=0, staging_bytes=512)
    rb = per.ReplayBuffer(64, st.dtype, seed=3)
    for i in range(6):
        r = _rollout(10 * i)
        st.add_trajectories(r, ends=_rollout_ends())
        rb.add(_records(st.dtype, r), ends=_rollout_ends().reshape(-1))
    st.flush()
    same = len(st) == len(rb)
    for kw in ({}, {"window": 7, "trajectories": False}, {"window": 2, "trajectories": True},
               {"beta": 0.5}, {"unique": True}):
        a, c = st.sample(8, **kw), rb.sample(8, **kw)
        for k in STORE_SPEC.keys() | {"ids", "weights"}:
            same &= a[k].dtype == c[k].dtype and np.array_equal(a[k], c[k])
        ids = a["ids"]
        td = np.linspace(0.1, 2, 8, dtype=np.float32)
        same &= st.update(ids, td) == rb.update(ids, td)
    p["same_batches"] = bool(same) and st.stats()["cache_misses"] > 0
    got = new("window").sample(16, window=5, trajectories=False)["ids"] & 0xFFFFFFFF
    p["window"] = set(got.tolist()) <= set(range(35, 40))
    got = new("trajectories").sample(16, window=1, trajectories=True)["ids"] & 0xFFFFFFFF
    p["trajectories"] = set(got.tolist()) <= set(range(30, 40))    # the 4th add
    u = new("unique", max_unique=32).sample(32, unique=True)["ids"]
    p["unique"] = len(set(u.tolist())) == 32 and refused(
        lambda: new("unique2", max_unique=32).sample(33, unique=True), "PER_ERR_BATCH")
    # TrajectoryStore takes no sequence keywords: per_store_init is asked
    # through the binding it calls, with per_config's seq_len
    cfg = per.config.c_config("probe", per.config.REPLAY_KEYS,
                              {"seq_len": 4, "seq_stride": 4},
                              {"capacity": 64, "item_size": 20})

    def seq_store():
        per._per._Store(str(tmp_path / "sequences"), cfg).close()

    p["sequences"] = not refused(seq_store) or \
        declares("per_store.h", r"per_store\w*seq\w*")
    # ends: env 0 ends at step 1, env 1 at step 4 of 6: the longest
    # episode is 5 steps (6 without ends); ids 0, 1, ... in add order
    e = new("ends", n=0)
    ends = np.zeros((6, 2), np.uint8)
    ends[1, 0], ends[4, 1] = per.END_TERMINATED, per.END_TRUNCATED
    ids = [e.add_trajectories(_rollout(0, 6, 2)),
           e.add_trajectories(_rollout(12, 6, 2), ends=ends)]
    t0, t1 = e.trajectory(0), e.trajectory(1)
    p["ends"] = ids == [0, 1] and t1["shape"] == (6, 2) and \
        t0["max_episode_length"] == 6 and t1["max_episode_length"] == 5 and \
        refused(lambda: e.add_trajectories(_rollout(0, 6, 2), ends=np.full((6, 2), 7)))
    p["beta"] = bool((b.sample(8, beta=0.0)["weights"] == 1).all())
    p["weights_batch"] = b.sample(8)["weights"].max() == 1
    w = new("weights_buffer", weights_buffer_max=True)  # as the per_buffer probe
    w.update(w.sample(1)["ids"], [0.0])
    p["weights_buffer"] = w.sample(8)["weights"].max() < 1
    # every leaf lowered to one value, then a trajectory added: at the
    # largest leaf stored now it gets that value, so every weight is 1
    # (at the largest ever, 1.0, its samples would be drawn more)
    lm = new("live_max", live_max=True)
    every = lm.sample(40, unique=True)["ids"]
    lm.update(every, np.full(40, 0.1, np.float32))
    lm.add_trajectories(_rollout(40))
    p["live_max"] = len(set(every.tolist())) == 40 and \
        bool((lm.sample(16, beta=1.0)["weights"] == 1).all())
    adds = re.findall(r"PERDEF[^;]*?\b(per_store_add\w*)\s*\(",
                      (ROOT / "per_store.h").read_text())
    p["add_td"] = any(re.search(r"\btd", params("per_store.h", name)) for name in adds) or \
        "td" in inspect.signature(per.TrajectoryStore.add_trajectories).parameters
    p["nstep"] = declares("per_store.h", r"\w*nstep\w*") or \
        "per_store" in params("per.h", "per_nstep_step")
    sl = new("stale")
    ids = sl.sample(8)["ids"]
    sl.add_trajectories(_rollout(100, 32, 2))             # 64 new samples: all evicted
    p["stale"] = sl.update(ids, np.ones(8, np.float32)) == 8
    c = new("checkpoints")
    c.save_checkpoint()
    whole = new("whole", n=0)
    whole.load_checkpoint(tmp_path / "checkpoints")
    x, y = c.sample(16), whole.sample(16)
    half = new("half", n=0)
    half.load_checkpoint(tmp_path / "checkpoints", rank=1, world_size=2)
    odd = half.sample(16)["obs"][:, 0] // 10              # trajectories 1 and 3
    p["checkpoints"] = (tmp_path / "checkpoints" / "index.bin").exists() and \
        all(np.array_equal(x[k], y[k]) for k in x) and \
        len(half) == 20 and set(odd.tolist()) <= {1, 3}
    p["caller_memory"] = declares("per_store.h", r"per_store\w*_mem")
    p["frames"] = declares("per_store.h", r"\w*frames\w*")
    return p


# -- the table ------------------------------------------------------------------


def test_every_row_has_a_probe():
    rows = table()
    assert set(rows) == set(ROWS), (
        f"rows without a probe: {sorted(set(rows) - set(ROWS))}; "
        f"probes without a row: {sorted(set(ROWS) - set(rows))}")


def _check(column, probes):
    rows = table()
    col = COLUMNS.index(column)
    wrong = []
    for label, probe in ROWS.items():
        said = claim(rows[label][col])
        if said is None:
            continue
        got = probes[probe]
        if bool(got) != said:
            wrong.append(f"{label!r}: the table says {'yes' if said else 'no'}, "
                         f"the code {'accepts' if got else 'refuses'} ({probe})")
    assert not wrong, f"{column}:\n" + "\n".join(wrong)


def test_per_buffer_column(tmp_path):
    _check("per_buffer", cpu_probes(tmp_path))


def test_per_cuda_buffer_column(tmp_path):
    _check("per_cuda_buffer", cuda_probes(tmp_path))


def test_per_mpi_column(tmp_path):
    _check("per_mpi", mpi_probes(tmp_path))


def test_per_store_column(tmp_path):
    _check("per_store", store_probes(tmp_path))
