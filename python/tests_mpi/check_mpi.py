"""per.mpi under mpirun (tools/pympi.sh runs it at several world sizes).

    mpirun -np W python check_mpi.py            the checks below
    mpirun -np W python check_mpi.py save DIR   a checkpoint of known items
    mpirun -np W python check_mpi.py load DIR   that checkpoint, any W

Each check runs on every rank in the same order; a failed assertion on
any rank aborts the job (MPI.COMM_WORLD.Abort), so mpirun exits non-zero
and no rank waits for one that gave up. Nothing here is statistical:
every comparison is exact.
"""

import os
import sys
import tempfile
import traceback

import numpy as np
from mpi4py import MPI

import per
import per.mpi

comm = MPI.COMM_WORLD
me, W = comm.rank, comm.size
ITEM = {"rank": np.uint32, "slot": np.uint32, "tag": np.uint32, "x": (np.float32, 3)}
C = 64


def make(r, j, tag):
    return {"rank": r, "slot": j, "tag": tag, "x": np.array([r, j, tag], np.float32)}


def agree(flag):
    """Every rank's flag, so that a check fails everywhere or nowhere."""
    return all(comm.allgather(bool(flag)))


def equivalence():
    """Bit for bit one per.ReplayBuffer of W * C items (rank r's slot j is
    its slot r * C + j) when W is a power of two; batches to every root,
    beta fixed now and then, rank 0 adding between draws (stale ids), the
    learner updating. Other W: the same calls, checked for the law's
    invariants only (items match their ids, weights in (0, 1])."""
    kw = dict(alpha=0.7, beta0=0.3, beta_steps=20, eps=1e-3, seed=1234)
    m = per.mpi.ReplayBuffer(comm, C, ITEM, max_unique=C, **kw)
    exact = W & (W - 1) == 0
    big = per.ReplayBuffer(C * W, ITEM, max_unique=C * W, **kw)
    for tag in range(2):  # two passes: generation 2 everywhere
        for r in range(W):
            for j in range(C):
                it = make(r, j, tag)
                big.add(**it)
                if r == me:
                    m.add(**it)
    assert m.global_size() == C * W
    assert len(m) == C
    trng = np.random.default_rng(99)  # the same TD errors on every rank
    added0 = 0
    for rnd in range(48):
        B = (1, 7, 64, 200)[rnd % 4]
        root = rnd % (W + 1) - 1  # ALL, 0, 1, ...
        learner = rnd % W if root == per.mpi.ALL else root
        beta = 0.55 if rnd % 6 == 5 else None
        want = big.sample(B, beta=beta)
        got = m.sample(B, root=root, beta=beta)
        assert (got is not None) == (root in (per.mpi.ALL, me))
        if got is not None:
            ids = got["ids"]
            if exact:
                slot = (ids["id"] & 0xFFFFFFFF) + ids["rank"] * C
                assert np.array_equal(slot, want["ids"] & 0xFFFFFFFF), rnd
                assert np.array_equal(ids["id"] >> 32, want["ids"] >> 32), rnd
                assert got.records.tobytes() == want.records.tobytes(), rnd
                assert got["weights"].tobytes() == want["weights"].tobytes(), rnd
            else:
                assert np.array_equal(got["rank"], ids["rank"])
                assert np.array_equal(got["slot"], ids["id"] & 0xFFFFFFFF)
                w = got["weights"]
                assert np.all((w > 0) & (w <= 1)) and w.max() == 1
        assert m.step == big.step
        if rnd % 5 == 4 and added0 + 3 <= C:
            for j in range(3):
                it = make(0, added0 + j, 100 + rnd)
                big.add(**it)
                if me == 0:
                    m.add(**it)
            added0 += 3
        td = (trng.random(B) * 4 - 2) * (np.arange(B) % 9 != 3)
        stale_big = big.update(want["ids"], td)
        if me == learner:
            stale = m.update(got["ids"], td)
        else:
            stale = m.update([], [])
        if exact:
            assert stale == stale_big, (stale, stale_big)
    if exact:
        assert np.array_equal(m.priorities(), big.priorities()[me * C:(me + 1) * C])
    m.check()
    m.close()


def arguments():
    """A rank's refused argument fails the call on every rank: that rank
    raises its own error, the others per.Error; the buffer then works."""
    m = per.mpi.ReplayBuffer(comm, 16, ITEM, seed=5)
    for j in range(16):
        m.add(**make(me, j, 0))
    bad = W - 1
    for call, exc in (
        (lambda: m.sample(-1 if me == bad else 4), OverflowError),
        (lambda: m.sample(4, root=W if me == bad else 0), ValueError),
        (lambda: m.update(np.zeros(3) if me == bad else [], []), TypeError),
        (lambda: m.update([[0, 0]] if me == bad else [], [1.0, 2.0] if me == bad else []),
         ValueError),
        (lambda: m.save(3 if me == bad else tempfile.gettempdir() + "/x"), TypeError),
    ):
        try:
            call()
            raise AssertionError("accepted")
        except per.Error as e:
            assert W > 1 and me != bad, e
            assert e.name == "PER_ERR_ARG" and f"rank {bad} refused" in str(e), e
        except exc:
            assert me == bad
    # the ranks disagree on B: per_mpi's own check, PER_ERR_ARG everywhere
    try:
        m.sample(4 + (me == bad and W > 1))
        assert W == 1
    except per.Error as e:
        assert e.name == "PER_ERR_ARG", e
    # a wrong id (a slot never written): PER_ERR_INDEX on every rank
    try:
        m.update([[63, 0]] if me == 0 else [], [1.0] if me == 0 else [])
        raise AssertionError("accepted")
    except per.Error as e:
        assert e.name == "PER_ERR_INDEX", e
    for name in ("clear", "update_sequences", "save_async", "load_shard"):
        try:
            getattr(m, name)(*([None] * {"clear": 0, "update_sequences": 2,
                                         "save_async": 1, "load_shard": 3}[name]))
            raise AssertionError(name)
        except TypeError:
            pass
    b = m.sample(8, root=per.mpi.ALL)
    assert b is not None and b.records.shape == (8,)
    assert "rank 0 of" in repr(m) or me != 0
    m.close()
    try:
        m.sample(1)
        raise AssertionError("closed")
    except RuntimeError:
        pass
    # different item dtypes: ValueError on every rank
    try:
        per.mpi.ReplayBuffer(comm, 8, np.float64 if me == bad and W > 1 else np.float32)
        assert W == 1
    except ValueError as e:
        assert "dtypes differ" in str(e)
    # live_max is per_mpi_init's PER_ERR_ARG on every rank
    try:
        per.mpi.ReplayBuffer(comm, 8, np.float32, live_max=True)
        raise AssertionError("live_max")
    except per.Error as e:
        assert e.name == "PER_ERR_ARG"


def checkpoint():
    """save, then load at the same world size: the next batches are those
    the saved buffer would have drawn, the ids still valid."""
    d = comm.bcast(tempfile.mkdtemp(prefix="per-mpi-") if me == 0 else None)
    path = os.path.join(d, "replay")
    m = per.mpi.ReplayBuffer(comm, 32, ITEM, seed=11, alpha=0.6)
    for j in range(32 - me):  # shards of different sizes
        m.add(**make(me, j, 7))
    first = m.sample(16, root=per.mpi.ALL)
    m.update(first["ids"][me::W], np.linspace(0.1, 3, 16)[me::W])
    m.save(path)
    a = [m.sample(16, root=per.mpi.ALL) for _ in range(3)]
    m.update(a[0]["ids"], np.full(16, 9.0) if me == 0 else np.zeros(16))
    m.load(path)
    b = [m.sample(16, root=per.mpi.ALL) for _ in range(3)]
    for x, y in zip(a, b):
        assert x.records.tobytes() == y.records.tobytes()
        assert x["ids"].tobytes() == y["ids"].tobytes()
        assert x["weights"].tobytes() == y["weights"].tobytes()
    assert m.layout == per.ReplayBuffer(4, ITEM).layout
    # a view of storage is alive on one rank: BufferError there, per.Error
    # elsewhere, nothing loaded anywhere
    before = m.priorities()
    view = m.storage if me == W - 1 else None
    try:
        m.load(path)
        raise AssertionError("loaded under a view")
    except BufferError:
        assert me == W - 1
    except per.Error:
        assert me != W - 1
    del view
    assert np.array_equal(before, m.priorities())
    m.close()
    comm.Barrier()
    if me == 0:
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        os.rmdir(d)


def feed():
    """per.mpi.Feed: every rank but 0 sends 12 batches with TD errors to
    rank 0, which drains in the fixed order: its buffer is, bit for bit,
    one fed the same batches in that order (one per sender in turn);
    every batch once, nothing hangs at free."""
    f = per.mpi.Feed(comm, ITEM, dest=None if me == 0 else 0, max_items=16, slots=2)

    def batch(r, m):
        n = 1 + (r * 5 + m * 3) % 16
        recs = [make(r, m * 16 + j, m) for j in range(n)]
        fields = {k: np.array([x[k] for x in recs]) for k in ITEM}
        td = np.linspace(0.1, 2.0, n) * (r + 1) + m
        ends = (np.arange(n) == n - 1).astype(np.int64) * (m % 2)
        return fields, td, ends

    if me != 0:
        for m in range(12):
            fields, td, ends = batch(me, m)
            f.send(td=td, ends=ends, **fields)
        f.close()
        assert f.state["msgs"] == 12
        try:
            f.send(**batch(me, 0)[0])
            raise AssertionError("a send after close")
        except per.Error as e:
            assert e.name == "PER_ERR_ARG"
    else:
        buf = per.ReplayBuffer(4096, ITEM, alpha=0.6, seed=3)
        ref = per.ReplayBuffer(4096, ITEM, alpha=0.6, seed=3)
        assert f.state["senders"] == W - 1
        got = 0
        while not f.state["done"]:
            got += f.drain(buf, 5, ordered=True)
        for m in range(12):
            for r in range(1, W):
                fields, td, ends = batch(r, m)
                ref.add_batch(td=td, ends=ends, **fields)
        assert got == len(buf) == len(ref)
        assert buf.storage.tobytes() == ref.storage.tobytes()
        assert buf.priorities().tobytes() == ref.priorities().tobytes()
        assert f.state["rejected"] == 0
        try:
            f.drain(per.ReplayBuffer(8, np.float32))
            raise AssertionError("another dtype")
        except TypeError:
            pass
    f.free()


def readme():
    """docs/MPI.md's per.mpi block (the ```python block of its "## From
    Python: per.mpi" section) runs as it is."""
    import re
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                        "docs", "MPI.md")
    with open(path) as f:
        text = f.read()
    section = text.split("\n## From Python: per.mpi\n", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(found) == 1, len(found)
    exec(compile(found[0], path, "exec"), {})


def known(world):
    """The items of the save phase: rank r of `world` holds 20 + 3 r items,
    priorities set by one update."""
    return {r: [make(r, j, 5) for j in range(20 + 3 * r)] for r in range(world)}


def save(d):
    m = per.mpi.ReplayBuffer(comm, 64, ITEM, seed=21)
    for it in known(W)[me]:
        m.add(**it)
    b = m.sample(32, root=0)
    m.update(b["ids"] if me == 0 else [], np.arange(32) / 8.0 if me == 0 else [])
    m.save(os.path.join(d, "replay"))
    total = comm.allreduce(len(m))
    if me == 0:
        with open(os.path.join(d, "expect"), "w") as f:
            f.write(f"{W} {total} {m.step}\n")


def load(d):
    with open(os.path.join(d, "expect")) as f:
        saved_w, total, step = (int(x) for x in f.read().split())
    m = per.mpi.ReplayBuffer(comm, 64, ITEM, seed=99)
    m.load(os.path.join(d, "replay"))
    assert m.global_size() == total
    assert m.step == step
    # every saved item once, over the ranks: the saved shards at the same
    # world size, else blocks whose sizes differ by at most one
    recs = comm.allgather(m.storage.copy())
    sizes = [len(r) for r in recs]
    if W == saved_w:
        assert sizes == [len(its) for its in known(W).values()], sizes
    else:
        assert max(sizes) - min(sizes) <= 1, sizes
    got = sorted((int(r["rank"]), int(r["slot"])) for x in recs for r in x)
    want = sorted((r, j) for r, its in known(saved_w).items() for j in range(len(its)))
    assert got == want
    b = m.sample(64, root=per.mpi.ALL)
    assert np.all(b["weights"] > 0) and b["weights"].max() == 1
    m.update(b["ids"][me::W], np.ones(len(b["ids"][me::W])))


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "checks"
    try:
        if what == "save":
            save(sys.argv[2])
        elif what == "load":
            load(sys.argv[2])
        else:
            for check in (equivalence, arguments, checkpoint, feed, readme):
                check()
                assert agree(True)
                if me == 0:
                    print(f"ok {check.__name__} ({W} ranks)", flush=True)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        comm.Abort(1)
    if me == 0:
        print(f"per.mpi {what}: passed on {W} ranks", flush=True)


main()
