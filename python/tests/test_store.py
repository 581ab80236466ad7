"""per.TrajectoryStore (per_store.h from Python) and seed 002's
per.TrajectoryReplayBuffer over it: the store draws exactly what a
per.ReplayBuffer of the same config fed the same samples draws (ids,
weights, sample values), whether the samples are in memory or read back
from disk, with the writer thread on or off, after evictions and
updates; refused calls change nothing; checkpoints exported elsewhere
load and draw identically; seed 002's flow (add rollouts, sample chunks,
checkpoint, load whole and sharded) runs as its documentation writes
it."""
import dataclasses
import gc
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import per

pytestmark = pytest.mark.skipif(not hasattr(per._per, "_Store"),
                                reason="per_store.h is POSIX only")

SPEC = {"obs": np.zeros(3, np.float32), "action": np.int64(0),
        "reward": np.float32(0), "done": np.bool_(False)}


def rollout(rng, T, B, base=0):
    """A rollout dict of [T, B, ...] arrays; obs[..., 0] numbers every
    sample (base + its index), so a drawn row names the sample it is."""
    n = np.arange(base, base + T * B, dtype=np.float32).reshape(T, B)
    obs = np.stack([n, rng.standard_normal((T, B), np.float32),
                    rng.standard_normal((T, B), np.float32)], axis=-1)
    return {"obs": obs, "action": rng.integers(0, 5, (T, B)),
            "reward": rng.standard_normal((T, B)).astype(np.float32),
            "done": rng.random((T, B)) < 0.2}


def records(dtype, r):
    """The rollout as the store keeps it: T * B records, sample t * B + b."""
    T, B = r["obs"].shape[:2]
    rec = np.zeros(T * B, dtype)
    for k in dtype.names:
        rec[k] = np.asarray(r[k]).reshape((T * B,) + dtype[k].shape)
    return rec


def same_batch(a, b, names):
    for k in tuple(names) + ("ids", "weights"):
        assert a[k].dtype == b[k].dtype, k
        assert np.array_equal(a[k], b[k]), k


# ---------------------------------------------------------------------------
# The store against per.ReplayBuffer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("cache_bytes", [0, 1 << 20])
@pytest.mark.parametrize("writer", [True, False])
def test_store_draws_what_a_replay_buffer_draws(tmp_path, cache_bytes, writer):
    cfg = dict(alpha=0.6, beta0=0.4, beta_steps=50, seed=7)
    st = per.TrajectoryStore(tmp_path / "st", SPEC, capacity=150,
                             cache_bytes=cache_bytes, staging_bytes=2048,
                             segment_bytes=4096, writer=writer, **cfg)
    rb = per.ReplayBuffer(150, st.dtype, **cfg)
    rng = np.random.default_rng(1)
    names = st.dtype.names
    base = 0
    for i in range(40):
        T, B = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        r = rollout(rng, T, B, base)
        base += T * B
        ends = rng.integers(0, 3, (T, B)) if i % 2 else None
        assert st.add_trajectories(r, ends=ends) == i
        rb.add(records(st.dtype, r), ends=None if ends is None else ends.reshape(-1))
        assert len(st) == len(rb)
        if i % 3 == 2:
            opts = [dict(), dict(unique=True), dict(beta=0.9),
                    dict(window=4, trajectories=True),
                    dict(window=20, trajectories=False)][i % 5]
            a = st.sample(12, **opts)
            b = rb.sample(12, **{"trajectories": True, **opts})
            same_batch(a, b, names)
            td = rng.standard_normal(12).astype(np.float32)
            assert st.update(a["ids"], td) == rb.update(b["ids"], td)
    assert base > 150 and len(st) == 150          # evicted, oldest first
    st.flush()                                    # everything on disk now
    for _ in range(3):
        same_batch(st.sample(32), rb.sample(32, trajectories=True), names)
    s = st.stats()
    assert s["added_trajectories"] == 40 and s["added_samples"] == base
    assert s["samples"] == 150 and s["staged_trajectories"] == 0
    assert s["segments"] >= 2                     # segment_bytes 4096
    if cache_bytes == 0:
        assert s["cache_misses"] > 0 and s["reads"] > 0   # read from disk
    st.check()
    st.close()


def test_rows_come_from_disk_and_memory_alike(tmp_path):
    """The same samples from a store with a cache and one without: the
    one without reads them from its segment files."""
    rng = np.random.default_rng(2)
    rolls = [rollout(rng, 4, 3, 12 * i) for i in range(10)]
    out = {}
    for cache in (0, 1 << 20):
        with per.TrajectoryStore(tmp_path / f"c{cache}", SPEC, capacity=1000,
                                 cache_bytes=cache, staging_bytes=512,
                                 writer=False, seed=3) as st:
            st.add_trajectories(rolls)
            st.flush()
            out[cache] = st.sample(64)
            hits, misses = st.stats()["cache_hits"], st.stats()["cache_misses"]
            assert (misses > 0) if cache == 0 else (misses == 0 and hits == 64)
    same_batch(out[0], out[1 << 20], SPEC)


def test_samples_are_assembled_from_the_fields(tmp_path):
    """add_trajectories hands the store each field's array and place
    (per_store_add_fill: the samples assembled in the staging area, one
    copy): a spec whose fields leave gaps (explicit offsets) stores them
    zeroed, on disk too, and every field comes back in place, also from
    non-contiguous and differently typed input."""
    dt = np.dtype({"names": ["a", "v", "w"],
                   "formats": ["u1", ("<f4", (3,)), "<i8"],
                   "offsets": [0, 4, 24], "itemsize": 40})
    T, B = 5, 3
    a = np.arange(T * B, dtype=np.uint8).reshape(T, B)
    v = np.arange(T * B * 6, dtype=np.float32).reshape(T, B, 6)[..., ::2]
    w = (np.arange(T * B, dtype=np.int32) * -7).reshape(T, B)   # int32 in
    with per.TrajectoryStore(tmp_path / "g", dt, capacity=100,
                             writer=False, seed=1) as st:
        st.add_trajectories({"a": a, "v": v, "w": w})
        st.save_checkpoint()
        b = st.sample(32)
        got = b["a"].astype(np.int64)
        np.testing.assert_array_equal(b["v"], v.reshape(T * B, 3)[got])
        np.testing.assert_array_equal(b["w"], w.reshape(-1)[got])
    seg = [n for n in os.listdir(tmp_path / "g") if n.startswith("seg-")]
    raw = (tmp_path / "g" / seg[0]).read_bytes()[128:128 + 40 * T * B]
    rec = np.frombuffer(raw, np.uint8).reshape(T * B, 40)
    assert not rec[:, 1:4].any() and not rec[:, 16:24].any()   # the gaps
    np.testing.assert_array_equal(rec[:, 0], a.reshape(-1))
    np.testing.assert_array_equal(
        rec[:, 24:32].copy().view("<i8").reshape(-1), w.reshape(-1))


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_refused_calls_change_nothing(tmp_path):
    rng = np.random.default_rng(3)
    one = (8 * (25 + 1) + 7) // 8 * 8   # a 4 x 2 rollout in staging
    st = per.TrajectoryStore(tmp_path / "st", SPEC, capacity=100,
                             staging_bytes=2 * one, writer=False,
                             alpha=0.5, seed=1)
    assert st.dtype.itemsize == 25
    good = rollout(rng, 4, 2)
    st.add_trajectories(good)
    before, n = st.stats(), len(st)

    def refused(exc, match, r, **kw):
        with pytest.raises(exc, match=match):
            st.add_trajectories(r, **kw)
        assert st.stats() == before and len(st) == n

    missing = {k: v for k, v in good.items() if k != "reward"}
    refused(ValueError, r"missing \['reward'\], unknown \[\]", missing)
    refused(ValueError, r"missing \[\], unknown \['extra'\]",
            {**good, "extra": good["reward"]})
    refused(ValueError, r"field 'obs' has shape \(4, 2, 4\); a rollout's is "
            r"\(T, B, 3\)", {**good, "obs": np.zeros((4, 2, 4), np.float32)})
    refused(ValueError, r"field 'obs' has \(T, B\) = \(3, 2\), field "
            r"'action' \(4, 2\)", {**good, "obs": good["obs"][:3]})
    refused(ValueError, r"field 'action' \(int64\): 1\.5 is not a whole",
            {**good, "action": np.full((4, 2), 1.5)})
    refused(TypeError, r"field 'reward' \(float32\): complex128",
            {**good, "reward": np.ones((4, 2), complex)})
    refused(ValueError, r"ends has shape \(4,\)", good, ends=np.zeros(4, int))
    with pytest.raises(per.Error, match="PER_ERR_ARG") as e:
        st.add_trajectories(good, ends=np.full((4, 2), 7))
    assert e.value.name == "PER_ERR_ARG" and st.stats() == before
    # a list is checked whole before the first is added
    refused(ValueError, r"rollout 1: keys do not match", [good, missing])
    # NaN td: per.Error, no priority changed
    b = st.sample(4)
    with pytest.raises(per.Error) as e:
        st.update(b["ids"], np.array([1, np.nan, 1, 1], np.float32))
    assert e.value.name == "PER_ERR_NAN"
    assert st.update(b["ids"], np.ones(4)) == 0
    # nowait with the staging area full: PER_ERR_BUSY, counted, nothing added
    st.add_trajectories(good)           # staging now holds both
    before, n = st.stats(), len(st)
    with pytest.raises(per.Error, match="PER_ERR_BUSY") as e:
        st.add_trajectories(good, nowait=True)
    assert e.value.name == "PER_ERR_BUSY"
    after = st.stats()
    assert after.pop("busy") == before.pop("busy") + 1
    assert after == before and len(st) == n
    st.add_trajectories(good)           # without nowait it writes itself
    assert st.stats()["written_trajectories"] >= 1
    st.check()
    st.close()


def test_arguments_and_specs(tmp_path):
    with pytest.raises(TypeError, match="unexpected keyword argument 'seq_len'"):
        per.TrajectoryStore(tmp_path / "a", SPEC, capacity=10, seq_len=4)
    with pytest.raises(TypeError, match="structured dtype"):
        per.TrajectoryStore(tmp_path / "a", np.float32, capacity=10)
    with pytest.raises(ValueError, match="taken by sample"):
        per.TrajectoryStore(tmp_path / "a", {"ids": np.zeros(2)}, capacity=10)
    with pytest.raises(per.Error, match="PER_ERR_ARG"):   # staging_bytes < 8
        per.TrajectoryStore(tmp_path / "a", SPEC, capacity=10, staging_bytes=4)
    dt = np.dtype([("x", np.float64, (2,)), ("y", np.uint8)])
    with per.TrajectoryStore(tmp_path / "b", dt, capacity=10) as st:
        assert st.dtype == dt and st.spec == {"x": (np.dtype(np.float64), (2,)),
                                              "y": (np.dtype(np.uint8), ())}
        with pytest.raises(per.Error, match="PER_ERR_ARG"):   # T * B > capacity
            st.add_trajectories({"x": np.zeros((4, 3, 2)), "y": np.zeros((4, 3))})
        # lists of numbers and bool ends; max_episode_length from the ends
        i = st.add_trajectories({"x": [[[1, 2]], [[3, 4]], [[5, 6]]],
                                 "y": [[1], [2], [3]]},
                                ends=[[False], [True], [False]])
        t = st.trajectory(i)
        assert t["shape"] == (3, 1) and t["num_samples"] == 3
        assert t["max_episode_length"] == 2 and t["live"] == 3
        with pytest.raises(per.Error, match="no stored trajectory has id 5"):
            st.trajectory(5)
        st.save_checkpoint()
    # a dict spec is packed, in its order
    with per.TrajectoryStore(tmp_path / "c", {"a": np.uint8(0),
                                              "b": np.zeros(2, np.float64)},
                             capacity=10) as st:
        assert st.dtype.itemsize == 17 and st.dtype.names == ("a", "b")
    with pytest.raises(per.Error, match="PER_ERR_IO.*holds a store"):
        per.TrajectoryStore(tmp_path / "b", dt, capacity=10)   # not resumed


def test_closed_store_refuses_every_call(tmp_path):
    rng = np.random.default_rng(4)
    st = per.TrajectoryStore(tmp_path / "st", SPEC, capacity=50)
    st.add_trajectories(rollout(rng, 2, 2))
    st.close()
    assert st.closed
    st.close()                                   # again: nothing
    for call in (lambda: st.add_trajectories(rollout(rng, 2, 2)),
                 lambda: st.sample(2), lambda: st.update([1], [1.0]),
                 lambda: st.save_checkpoint(), lambda: st.flush(),
                 lambda: st.load_checkpoint(tmp_path / "st"), lambda: len(st),
                 lambda: st.stats(), lambda: st.trajectory(0),
                 lambda: st.check()):
        with pytest.raises(ValueError, match="the store is closed"):
            call()
    assert "closed" in repr(st)
    # garbage collection closes a store whose writer runs
    st2 = per.TrajectoryStore(tmp_path / "st2", SPEC, capacity=50)
    st2.add_trajectories(rollout(rng, 2, 2))
    threads = list(st2._threads)
    del st2
    gc.collect()
    assert not any(t.is_alive() for t in threads)


# ---------------------------------------------------------------------------
# The writer thread, threads
# ---------------------------------------------------------------------------


def test_writer_thread_writes_in_the_background(tmp_path):
    rng = np.random.default_rng(5)
    with per.TrajectoryStore(tmp_path / "st", SPEC, capacity=10_000,
                             staging_bytes=4096, seed=2) as st:
        for i in range(30):
            st.add_trajectories(rollout(rng, 8, 4, 32 * i))
        deadline = time.monotonic() + 10
        while st.stats()["staged_trajectories"] and time.monotonic() < deadline:
            time.sleep(0.001)
        s = st.stats()
        assert s["staged_trajectories"] == 0 and s["written_trajectories"] == 30
        assert st.writer_error is None
        st.check()                               # stops the writer, restarts it
        assert any(t.is_alive() for t in st._threads)
        st.add_trajectories(rollout(rng, 8, 4))
        st.save_checkpoint()
        assert st.stats()["staged_trajectories"] == 0


def test_threads_share_a_store(tmp_path):
    rng = np.random.default_rng(6)
    st = per.TrajectoryStore(tmp_path / "st", SPEC, capacity=400,
                             staging_bytes=2048, cache_bytes=1024, seed=4,
                             alpha=0.6)
    st.add_trajectories(rollout(rng, 2, 2))
    errors = []
    stop = threading.Event()

    def actor(k):
        try:
            r = np.random.default_rng(k)
            for _ in range(40):
                st.add_trajectories(rollout(r, 3, 2))
        except Exception as e:  # reported below
            errors.append(e)

    def learner():
        try:
            while not stop.is_set():
                b = st.sample(16)
                st.update(b["ids"], np.abs(b["reward"]) + 0.1)
        except Exception as e:
            errors.append(e)

    actors = [threading.Thread(target=actor, args=(k,)) for k in range(3)]
    lt = threading.Thread(target=learner)
    lt.start()
    for t in actors:
        t.start()
    for t in actors:
        t.join()
    stop.set()
    lt.join()
    assert not errors
    assert st.stats()["added_samples"] == 4 + 3 * 40 * 6
    st.check()
    st.close()


IO_ERROR = textwrap.dedent("""
    import resource, sys, time
    import numpy as np
    import per
    st = per.TrajectoryStore(sys.argv[1], {"x": np.zeros(64, np.float32)},
                             capacity=1000, staging_bytes=1 << 20)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, hard))  # EFBIG past it
    for i in range(10):
        st.add_trajectories({"x": np.full((4, 2, 64), i, np.float32)})
    t0 = time.monotonic()
    while st.writer_error is None and time.monotonic() - t0 < 10:
        time.sleep(0.001)
    e = st.writer_error
    assert isinstance(e, per.Error) and e.name == "PER_ERR_IO", e
    assert "File too large" in str(e) and "seg-" in str(e), e
    staged = st.stats()["staged_trajectories"]
    assert 0 < staged < 10 and len(st) == 80
    for call in (st.flush, st.save_checkpoint):
        try:
            call()
        except per.Error as f:
            assert f.name == "PER_ERR_IO", f
        else:
            raise AssertionError("no error")
    assert st.stats()["staged_trajectories"] == staged   # nothing lost
    assert sorted(set(st.sample(200)["x"][:, 0])) == list(range(10))
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    st.save_checkpoint()                                 # now it goes through
    assert st.stats()["written_trajectories"] == 10
    st.check()
    st.close()
    print("ok")
""")


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE")
def test_io_errors_are_reported_and_recoverable(tmp_path):
    """A write that fails (EFBIG past RLIMIT_FSIZE, in a process of its
    own) stops the writer thread with a per.Error naming the file; flush
    and save_checkpoint report it, the store keeps every trajectory, and
    once writes go through again the checkpoint is complete."""
    r = subprocess.run([sys.executable, "-c", IO_ERROR, str(tmp_path / "st")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


# ---------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------


def test_trajectory_index_json_follows_the_checkpoints(tmp_path):
    """trajectory_index.json, edited in place by each checkpoint (rows of
    evicted trajectories blanked, live counts rewritten, rows appended),
    stays one JSON object whose rows are the stored trajectories, with
    their live counts; metadata.json has the counters."""
    rng = np.random.default_rng(3)
    st = per.TrajectoryStore(tmp_path / "st", SPEC, capacity=50,
                             segment_bytes=4096, alpha=0.6, seed=2)
    added, partial = 0, False
    for round in range(25):
        for _ in range(1 + round % 3):
            T = 1 + int(rng.integers(0, 4))
            st.add_trajectories(rollout(rng, T, 2, added))
            added += T * 2
        st.update(st.sample(8)["ids"], rng.random(8))
        st.save_checkpoint()
        with open(tmp_path / "st" / "trajectory_index.json") as f:
            doc = json.load(f)
        rows = doc["trajectories"]
        n = st.stats()["added_trajectories"]
        stored = []
        for i in range(n):
            try:
                stored.append(st.trajectory(i))
            except per.Error:
                pass
        partial = partial or stored[0]["live"] < stored[0]["num_samples"]
        assert [r["trajectory_id"] for r in rows] == [t["id"] for t in stored]
        assert [r["live_samples"] for r in rows] == [t["live"] for t in stored]
        with open(tmp_path / "st" / "metadata.json") as f:
            meta = json.load(f)
        assert meta["total_samples"] == added and meta["size"] == len(st)
    assert partial and stored[0]["id"] > 0   # evictions, and a partial one
    st.close()


def test_exported_checkpoint_loads_and_draws_identically(tmp_path, monkeypatch):
    rng = np.random.default_rng(7)
    cfg = dict(alpha=0.7, seed=9)
    st = per.TrajectoryStore(tmp_path / "st", SPEC, capacity=60,
                             segment_bytes=4096, **cfg)
    for i in range(12):
        st.add_trajectories(rollout(rng, 3, 2, 6 * i))
    b = st.sample(8)
    st.update(b["ids"], rng.random(8))
    st.save_checkpoint(tmp_path / "export")
    names = sorted(os.listdir(tmp_path / "export"))
    assert {"index.bin", "metadata.json", "trajectory_index.json"} <= set(names)
    segs = [n for n in names if n.startswith("seg-")]
    assert segs and all(os.path.samefile(tmp_path / "st" / n,
                                         tmp_path / "export" / n) for n in segs)
    other = per.TrajectoryStore(tmp_path / "other", SPEC, capacity=60,
                                segment_bytes=4096, **cfg)
    other.load_checkpoint(tmp_path / "export")
    assert len(other) == len(st) and other.stats()["added_trajectories"] == 12
    for _ in range(3):
        same_batch(st.sample(16), other.sample(16), SPEC)
    # the export is a store of its own: resumed where it is
    with per.TrajectoryStore(tmp_path / "export", SPEC, capacity=60,
                             resume=True, **cfg) as again:
        assert len(again) == len(st)
        again.check()
    # a later export into the same directory replaces the earlier one
    for i in range(12, 30):
        st.add_trajectories(rollout(rng, 3, 2, 6 * i))
    st.save_checkpoint(tmp_path / "export")
    # that checkpoint was a record in index.log, index.bin kept: the
    # export names the log's segments and copies the log
    assert (tmp_path / "export" / "index.log").stat().st_size > 64
    seg_now = {n for n in os.listdir(tmp_path / "st") if n.startswith("seg-")}
    assert {n for n in os.listdir(tmp_path / "export")
            if n.startswith("seg-")} <= seg_now
    third = per.TrajectoryStore(tmp_path / "third", SPEC, capacity=60, **cfg)
    third.load_checkpoint(tmp_path / "export", quick=True)
    same_batch(st.sample(16), third.sample(16), SPEC)
    # across file systems (no hard links): copies, as good
    def no_link(a, b):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_link)
    st.save_checkpoint(tmp_path / "copied")
    st.save_checkpoint(tmp_path / "copied")      # again: the copies refreshed
    segs = [n for n in os.listdir(tmp_path / "copied") if n.startswith("seg-")]
    assert segs and not any(os.path.samefile(tmp_path / "st" / n,
                                             tmp_path / "copied" / n)
                            for n in segs)
    fourth = per.TrajectoryStore(tmp_path / "fourth", SPEC, capacity=60, **cfg)
    fourth.load_checkpoint(tmp_path / "copied")
    same_batch(st.sample(16), fourth.sample(16), SPEC)
    fourth.close()
    # refused: a checkpoint of another dtype
    odd = per.TrajectoryStore(tmp_path / "odd", {"x": np.zeros(4, np.float32),
                                                 "y": np.int64(0),
                                                 "z": np.float32(0),
                                                 "w": np.bool_(0)},
                              capacity=60, **cfg)
    with pytest.raises(per.Error, match="PER_ERR_MISMATCH"):
        odd.load_checkpoint(tmp_path / "export")
    for s in (st, other, third, odd):
        s.close()


# ---------------------------------------------------------------------------
# Seed 002: TrajectoryReplayBuffer
# ---------------------------------------------------------------------------


def seed_rollouts(rng, k, T=5, B=4, first=0):
    out = []
    for i in range(k):
        n = T * B
        idx = np.arange((first + i) * n, (first + i + 1) * n).reshape(T, B)
        out.append({"obs": np.concatenate(
                        [idx[..., None].astype(np.float32),
                         rng.standard_normal((T, B, 5)).astype(np.float32)], -1),
                    "actions": rng.integers(0, 7, (T, B, 2)).astype(np.int32),
                    "rewards": rng.standard_normal((T, B)).astype(np.float32),
                    "dones": rng.random((T, B)) < 0.1})
    return out


def test_seed_002_flow(tmp_path):
    rng = np.random.default_rng(8)
    buf = per.TrajectoryReplayBuffer(seed=1234, storage_dir=tmp_path / "buf",
                                     enable_cache=True, cache_size=2,
                                     storage_format="pt", sample_window_size=0,
                                     save_trajectories=True, capacity=400)
    rolls = seed_rollouts(rng, 6)
    assert buf.add_trajectories(rolls[:4]) == [0, 1, 2, 3]
    assert buf.add_trajectories(rolls[4:]) == [4, 5]
    assert (buf.size, buf.total_samples, buf.trajectory_counter, len(buf)) == \
        (6, 120, 6, 120)
    batch = buf.sample(num_chunks=32)
    assert set(batch) == {"obs", "actions", "rewards", "dones"}
    assert batch["obs"].shape == (32, 6) and batch["obs"].dtype == np.float32
    assert batch["actions"].shape == (32, 2) and batch["actions"].dtype == np.int32
    assert batch["rewards"].shape == (32,) and batch["dones"].dtype == np.bool_
    # every drawn row is a row of an added rollout (obs[0] numbers it)
    flat = {k: np.concatenate([r[k].reshape((-1,) + r[k].shape[2:])
                               for r in rolls]) for k in rolls[0]}
    for j in range(32):
        row = int(batch["obs"][j, 0])
        for k in flat:
            assert np.array_equal(batch[k][j], flat[k][row]), (k, row)
    # windowed: only the newest trajectories
    buf.sample_window_size = 2
    w = buf.sample(64)
    assert (w["obs"][:, 0] >= 80).all()
    buf.sample_window_size = 0
    # checkpoint, a fresh buffer loads it: the same next draws
    buf.save_checkpoint(tmp_path / "ckpt")
    # (its capacity, not given, is the checkpoint's)
    fresh = per.TrajectoryReplayBuffer(seed=1234, storage_dir=tmp_path / "fresh",
                                       cache_size=2)
    fresh.load_checkpoint(tmp_path / "ckpt")
    assert (fresh.size, fresh.total_samples, fresh.trajectory_counter,
            len(fresh)) == (buf.size, buf.total_samples,
                            buf.trajectory_counter, len(buf))
    for _ in range(3):
        a, ia, wa = buf.sample(16, with_info=True)
        b, ib, wb = fresh.sample(16, with_info=True)
        assert np.array_equal(ia, ib) and np.array_equal(wa, wb)
        for k in a:
            assert np.array_equal(a[k], b[k])
    # sharded loads: every trajectory once, the global counters kept
    shards = []
    for rank in range(2):
        s = per.TrajectoryReplayBuffer(seed=1234, storage_dir=tmp_path / f"r{rank}",
                                       capacity=300)   # a shard's may differ
        s.load_checkpoint(tmp_path / "ckpt", is_distributed=True,
                          local_rank=rank, world_size=2)
        assert s.total_samples == 120 and s.trajectory_counter == 6
        shards.append(s)
    assert sum(s.size for s in shards) == 6 and sum(len(s) for s in shards) == 120
    for tid in range(6):
        held = []
        for s in shards:
            try:
                s.store.trajectory(tid)
                held.append(s)
            except per.Error:
                pass
        assert len(held) == 1 and held[0] is shards[tid % 2]
    d = shards[1].sample(40)
    assert all(int(x) // 20 % 2 == 1 for x in d["obs"][:, 0])   # its own only
    # storage_dir holding a store: resumed as seed 002 reloads its metadata
    buf.close()
    again = per.TrajectoryReplayBuffer(seed=1234, storage_dir=tmp_path / "buf")
    assert again.trajectory_counter == 6 and again.size == 6
    assert again.store.capacity == 400
    for s in [again, fresh] + shards:
        s.close()


@dataclasses.dataclass
class Traj:
    """RLinf's Trajectory, in small: arrays, nested dicts of arrays, and
    attributes that are not data."""
    rewards: object = None
    actions: object = None
    curr_obs: object = None
    prev_logprobs: object = None
    max_episode_length: int = 0
    model_weights_id: str = ""


def test_seed_002_objects_options_and_priorities(tmp_path):
    rng = np.random.default_rng(9)
    with pytest.raises(ValueError, match="storage_format"):
        per.TrajectoryReplayBuffer(storage_format="npz")
    buf = per.TrajectoryReplayBuffer(seed=None, save_trajectories=False,
                                     storage_dir=tmp_path / "unused",
                                     capacity=200, alpha=0.6, writer=False)
    tmp = buf.storage_dir
    assert os.path.isdir(tmp) and not os.path.exists(tmp_path / "unused")

    def traj(T, B):
        return Traj(rewards=rng.standard_normal((T, B)).astype(np.float32),
                    actions=rng.integers(0, 3, (T, B, 1)),
                    curr_obs={"rgb": rng.integers(0, 255, (T, B, 2, 2),
                                                  dtype=np.uint8),
                              "state": np.zeros((T, B, 3))},
                    max_episode_length=T, model_weights_id="abc")

    assert buf.add_trajectories([traj(4, 2), traj(2, 3)]) == [0, 1]
    batch, ids, w = buf.sample(8, with_info=True)
    assert set(batch) == {"rewards", "actions", "curr_obs"}
    assert set(batch["curr_obs"]) == {"rgb", "state"}
    assert batch["curr_obs"]["rgb"].shape == (8, 2, 2)
    assert ids.dtype == np.uint64 and w.dtype == np.float32
    assert buf.update(ids, np.linspace(0.1, 3, 8)) == 0
    with pytest.raises(ValueError, match=r"missing \['curr_obs/state'\]"):
        t = traj(2, 2)
        t.curr_obs = {"rgb": t.curr_obs["rgb"]}
        buf.add_trajectories([t])
    with pytest.raises(RuntimeError, match="save_trajectories=False"):
        buf.save_checkpoint(tmp_path / "ckpt")
    with pytest.raises(TypeError, match="list of trajectories"):
        buf.add_trajectories({"rewards": np.zeros((2, 2))})
    buf.close()
    assert not os.path.exists(tmp)               # the temporary directory
    empty = per.TrajectoryReplayBuffer()
    with pytest.raises(per.Error, match="PER_ERR_EMPTY"):
        empty.sample(4)
    with pytest.raises(RuntimeError, match="nothing was added"):
        empty.save_checkpoint(tmp_path / "x")
    empty.close()


def test_seed_002_torch_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    with per.TrajectoryReplayBuffer(storage_dir=tmp_path / "t", capacity=100) as buf:
        buf.add_trajectories([{"obs": torch.zeros(3, 2, 4),
                               "rewards": np.ones((3, 2), np.float32)}])
        b = buf.sample(5)
        assert isinstance(b["obs"], torch.Tensor) and b["obs"].shape == (5, 4)
        assert isinstance(b["rewards"], np.ndarray)
