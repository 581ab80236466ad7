"""per.Trajectory: fields in any order, a rollout added in one call equal
to add_batch of the same records and ends, the once record, build's
copies, and refusals that name the field and change nothing."""
import numpy as np
import pytest

import per

STEP = {"obs": (np.float32, 2), "action": np.int64, "reward": np.float32}
ONCE = {"bootstrap": (np.float32, 2), "ret": np.float64}


def test_rollout_into_a_buffer():
    tr = per.Trajectory(8, STEP, ONCE)
    a = per.ReplayBuffer(50, tr.dtype, seed=3)
    b = per.ReplayBuffer(50, tr.dtype, seed=3)
    want = np.zeros(5, tr.dtype)
    for t in range(5):
        # the fields of a step arrive in any order, some a step late
        tr.add(obs=[t, -t])
        tr.add(action=t * 3)
        assert len(tr) == t  # reward still missing
        tr.add(reward=0.5 * t)
        assert len(tr) == t + 1
        want[t] = ((t, -t), t * 3, 0.5 * t)
    tr.end(per.END_TRUNCATED)
    tr.add(bootstrap=[9, 9], ret=1.25)
    out = tr.add_to(a)
    assert out["n"] == 5 and out["id"] == 0
    assert out["once"]["ret"] == 1.25
    np.testing.assert_array_equal(out["once"]["bootstrap"], [9, 9])
    ends = np.array([0, 0, 0, 0, per.END_TRUNCATED], np.uint8)
    b.add_batch(want, ends=ends)
    np.testing.assert_array_equal(a.storage, b.storage)
    assert a.counters == b.counters  # one trajectory each
    x, y = a.sample(6, episode_info=True), b.sample(6, episode_info=True)
    for k in x:
        np.testing.assert_array_equal(x[k], y[k])
    # the accumulator starts over; the once record is cleared
    assert len(tr) == 0 and tr.built == 1
    tr.add_step(obs=[1, 1], action=1, reward=1.0, end=per.END_TERMINATED)
    got = tr.build()
    assert got["id"] == 1 and len(got["steps"]) == 1
    assert got["ends"].tolist() == [per.END_TERMINATED]
    assert got["once"]["ret"] == 0.0
    rec = np.zeros((), tr.dtype)
    rec["action"] = 7
    tr.add_step(rec)
    assert tr.build()["steps"]["action"].tolist() == [7]


def test_refusals_change_nothing():
    tr = per.Trajectory(2, STEP)
    tr.add_step(obs=[0, 0], action=0, reward=0.0)
    tr.add_step(obs=[1, 1], action=1, reward=1.0)
    with pytest.raises(per.Error, match='PER_ERR_BATCH: per_traj_add: field "obs" is full'):
        tr.add(obs=[2, 2])
    with pytest.raises(ValueError, match="unknown field 'bogus'"):
        tr.add(bogus=1)
    with pytest.raises(ValueError, match="field 'obs' has shape"):
        per.Trajectory(2, STEP).add(obs=[1, 2, 3])
    with pytest.raises(ValueError, match="field 'action'"):
        per.Trajectory(2, STEP).add(action=1.5)  # not an exact int64
    # a refused value in a call adds none of the call's values
    t2 = per.Trajectory(4, STEP)
    with pytest.raises(ValueError):
        t2.add(action=1, obs=[1, 2, 3])
    assert t2.counts == (0, 0, 0)
    assert len(tr) == 2
    with pytest.raises(per.Error, match="PER_ERR_ARG"):
        tr.end(7)
    other = per.ReplayBuffer(10, {"x": np.float64})
    with pytest.raises(ValueError, match="items are 8 bytes"):
        tr.add_to(other)
    assert len(tr) == 2
    with pytest.raises(per.Error, match="PER_ERR_EMPTY"):
        per.Trajectory(2, STEP).add_to(per.ReplayBuffer(4, STEP))
    with pytest.raises(ValueError, match=r"unique across step and once .*\['a'\] in both"):
        per.Trajectory(2, {"a": np.float32}, {"a": np.float32})  # names clash
