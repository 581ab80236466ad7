"""Batches without copies: align=True lays items out so that every field
of a batch is viewable through DLPack (PyTorch's from_dlpack/from_numpy
take the same strides), and sample(out=batch) draws into the memory of an
earlier batch, with the values a fresh call would give."""
import pickle

import numpy as np
import pytest

import per

ITEM = {"a": np.uint8, "x": (np.float32, 3), "k": np.int64}


def twin(**kw):
    bufs = [per.ReplayBuffer(40, ITEM, seed=2, **kw) for _ in range(2)]
    for rb in bufs:
        for t in range(60):
            rb.add(a=t % 7, x=[t, t + 1, t + 2], k=-t)
    return bufs


def test_align_makes_every_field_a_dlpack_view():
    packed, = twin()[:1]
    aligned = per.ReplayBuffer(40, ITEM, align=True)
    assert packed.dtype.itemsize == 21 and aligned.dtype.itemsize == 24
    aligned.add(a=1, x=[1, 2, 3], k=5)
    s = aligned.sample(4)
    for name in ITEM:
        v = np.from_dlpack(s[name])  # refused unless strides fit elements
        assert np.shares_memory(v, s.records)
        np.testing.assert_array_equal(v, s[name])
    with pytest.raises(BufferError):
        np.from_dlpack(packed.sample(4)["x"])
    # an explicit layout is used as given, or refused when not aligned
    with pytest.raises(ValueError, match="align=True"):
        per.ReplayBuffer(4, np.dtype([("a", np.uint8), ("x", np.float32)]),
                         align=True)
    b = pickle.loads(pickle.dumps(aligned))
    assert b.dtype == aligned.dtype


@pytest.mark.parametrize("opts", [{}, {"unique": True, "window": 30},
                                  {"episode_info": True}])
def test_out_reuses_memory(opts):
    a, b = twin()
    first = a.sample(8, **opts)
    b.sample(8, **opts)
    mem = {k: v.__array_interface__["data"][0] for k, v in first.items()}
    for _ in range(5):
        got = a.sample(8, out=first, **opts)
        want = b.sample(8, **opts)
        assert got is first
        assert {k: v.__array_interface__["data"][0] for k, v in got.items()} == mem
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        a.update(got["ids"], np.ones(8))
        b.update(want["ids"], np.ones(8))


def test_out_sequences_and_refusals():
    rb = per.ReplayBuffer(40, ITEM, seq_len=4, seq_stride=4)
    for t in range(40):
        rb.add(a=0, x=[t, 0, 0], k=t)
    s = rb.sample(3, sequences=True)
    assert s.records.shape == (3, 4) and s["mask"].dtype == np.bool_
    assert rb.sample(3, sequences=True, out=s) is s
    with pytest.raises(ValueError, match="needs \\(5, 4\\)"):
        rb.sample(5, sequences=True, out=s)
    with pytest.raises(ValueError, match="needs \\(3,\\)"):
        rb.sample(3, out=s)
    with pytest.raises(ValueError, match="lacks \\['end', 'trajectory'\\]"):
        rb.sample(3, sequences=True, episode_info=True, out=s)
    with pytest.raises(TypeError, match="must be a Batch"):
        rb.sample(3, sequences=True, out=dict(s))
    before = s.records.copy()
    with pytest.raises(per.Error, match="PER_ERR_TOO_FEW"):
        rb.sample(3, sequences=True, unique=True, window=1, out=s)
    np.testing.assert_array_equal(s.records, before)
