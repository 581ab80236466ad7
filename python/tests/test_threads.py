"""Buffers shared by Python threads: every call holds the buffer's lock and
the long ones release the GIL, so threads adding while another samples and
updates leave a valid buffer holding exactly what was added; save_async
writes, from a thread of its own, the file save would have written."""
import threading

import numpy as np
import pytest

import per


def test_adders_and_a_learner():
    rb = per.ReplayBuffer(5000, {"x": np.float32, "who": np.uint8}, seed=1)
    rb.add(x=0.0, who=9)
    per_thread, threads = 3000, 4
    errors = []

    def actor(k):
        try:
            for i in range(per_thread // 50):
                rb.add_batch(x=np.arange(50, dtype=np.float32) + 50 * i,
                             who=np.full(50, k, np.uint8))
        except Exception as e:  # reported below
            errors.append(e)

    stop = threading.Event()
    draws = [0]

    def learner():
        try:
            while not stop.is_set():
                s = rb.sample(32)
                rb.update(s["ids"], np.abs(s["x"]) % 7)
                draws[0] += 1
        except Exception as e:
            errors.append(e)

    ts = [threading.Thread(target=actor, args=(k,)) for k in range(threads)]
    lt = threading.Thread(target=learner)
    lt.start()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    stop.set()
    lt.join()
    assert not errors
    assert draws[0] > 0
    rb.check()
    assert rb.added == 1 + threads * per_thread
    counts = np.bincount(rb.storage["who"], minlength=10)
    # the last 5000 of 12001 adds: every actor's batches are whole
    assert counts[:threads].sum() + counts[9] == 5000
    assert all(c % 50 == 0 for c in counts[:threads])


def test_save_async_writes_what_save_writes(tmp_path):
    rb = per.ReplayBuffer(100, {"x": np.float64}, seed=2)
    rb.add_batch(x=np.arange(70.0))
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    fut = rb.save_async(a)
    rb.save(b)  # same state: nothing changed since the snapshot
    assert fut.result(timeout=60) is None
    assert a.read_bytes() == b.read_bytes()
    # changes after the call are not in the file
    fut = rb.save_async(a)
    rb.add(x=-1.0)
    fut.result(timeout=60)
    assert a.read_bytes() == b.read_bytes()


def test_save_async_reports_failure(tmp_path):
    rb = per.ReplayBuffer(10, {"x": np.float64})
    fut = rb.save_async(tmp_path / "no" / "such" / "dir.bin")
    with pytest.raises(per.Error, match="PER_ERR_IO"):
        fut.result(timeout=60)
