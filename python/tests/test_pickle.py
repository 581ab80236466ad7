"""ReplayBuffer's Python conveniences: pickle, copy and deepcopy through
the checkpoint bytes (a copy goes on exactly as the original), repr,
clear(), the episode end and trajectory id of each drawn item, and item
fields that would collide with sample()'s own outputs."""
import copy
import pickle

import numpy as np
import pytest

import per

ITEM = {"obs": (np.float32, 3), "action": np.int32}


def filled(**kw):
    rb = per.ReplayBuffer(50, ITEM, seed=4, **kw)
    rng = np.random.default_rng(0)
    for t in range(80):
        end = per.END_TERMINATED if t % 9 == 8 else per.END_NONE
        rb.add(obs=rng.random(3), action=t, ends=[end])
    s = rb.sample(10)
    rb.update(s["ids"], rng.random(10))
    return rb


def same_future(a, b, calls=5):
    for k in range(calls):
        x, y = a.sample(8), b.sample(8)
        for key in x:
            np.testing.assert_array_equal(x[key], y[key], err_msg=key)
        td = np.full(8, 0.1 * (k + 1), np.float32)
        assert a.update(x["ids"], td) == b.update(y["ids"], td)
        a.add(obs=[k, k, k], action=k)
        b.add(obs=[k, k, k], action=k)


@pytest.mark.parametrize("kw", [{}, {"alpha": 0.0}, {"weights_buffer_max": True},
                                {"seq_len": 5, "seq_stride": 5, "live_max": True}])
def test_pickle_round_trip(kw):
    a = filled(**kw)
    b = pickle.loads(pickle.dumps(a))
    assert type(b) is per.ReplayBuffer
    assert b.config == a.config and b.dtype == a.dtype and len(b) == len(a)
    assert b.layout == a.layout
    np.testing.assert_array_equal(b.priorities(), a.priorities())
    same_future(a, b)


def test_copies_are_independent():
    a = filled()
    for b in (copy.copy(a), copy.deepcopy(a)):
        before = a.priorities()
        b.update(b.sample(4)["ids"], np.full(4, 50.0))
        np.testing.assert_array_equal(a.priorities(), before)
        assert not np.array_equal(b.priorities(), before)


def test_repr_says_what_it_is():
    r = repr(filled(seq_len=5, seq_stride=5))
    assert r.startswith("per.ReplayBuffer(capacity=50, size=50, item=")
    assert "alpha=0.6" in r and "seq_len=5" in r and "seed=4" in r


def test_clear_is_a_new_buffer():
    a = filled()
    a.clear()
    assert len(a) == 0 and a.added == 0 and a.step == 0
    with pytest.raises(per.Error, match="PER_ERR_EMPTY"):
        a.sample(1)
    b = per.ReplayBuffer(50, ITEM, seed=4)
    for t in range(20):
        a.add(obs=[t, 0, 0], action=t)
        b.add(obs=[t, 0, 0], action=t)
    same_future(a, b)
    view = a.storage
    with pytest.raises(BufferError):
        a.clear()
    del view
    a.clear()


def test_episode_info():
    rb = per.ReplayBuffer(40, ITEM, seed=1, seq_len=4, seq_stride=2,
                          cross_episodes=True)
    ends = np.zeros(30, np.uint8)
    ends[[6, 13, 29]] = [per.END_TERMINATED, per.END_TRUNCATED, per.END_TERMINATED]
    # three add calls: three trajectories
    rb.add_batch(obs=np.zeros((10, 3)), action=np.arange(10), ends=ends[:10])
    rb.add_batch(obs=np.zeros((10, 3)), action=np.arange(10, 20), ends=ends[10:20])
    rb.add_batch(obs=np.zeros((10, 3)), action=np.arange(20, 30), ends=ends[20:])
    s = rb.sample(16, episode_info=True)
    np.testing.assert_array_equal(s["end"], ends[s["action"]])
    np.testing.assert_array_equal(s["trajectory"], s["action"] // 10)
    q = rb.sample(6, sequences=True, episode_info=True)
    assert q["end"].shape == q["action"].shape == (6, 4)
    np.testing.assert_array_equal(q["end"], ends[q["action"]])
    np.testing.assert_array_equal(q["trajectory"], q["action"] // 10)
    assert "end" not in rb.sample(2)


@pytest.mark.parametrize("name", ["ids", "weights", "mask", "end", "trajectory"])
def test_field_names_taken_by_sample(name):
    with pytest.raises(ValueError, match=f"field name '{name}' is taken"):
        per.ReplayBuffer(10, {name: np.float32, "x": np.int32})
