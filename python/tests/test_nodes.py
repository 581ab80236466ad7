"""Float nodes from Python: SumTree(dtype=numpy.float32),
CategoricalSampler(dtype=...), ReplayBuffer(nodes=...) and
FrameBuffer(nodes=...) build on per.h's float trees (per._per32): arrays
of that dtype in and out, the checks and errors of the double classes,
the same public class for isinstance, pickling, checkpoints that name
their node type, and one NStep, Trajectory or TrajectoryAccumulator
feeding buffers of either type. Bit-for-bit equality with C's float
build is test_c_bitwise.py's."""
import copy
import pickle

import numpy as np
import pytest

import per

ITEM = {"obs": (np.float32, 3), "action": np.int32}


def items(n, start=0):
    g = np.arange(start, start + n)
    return {"obs": np.stack([g, g + 0.5, g + 0.25], axis=1).astype(np.float32),
            "action": (g % 5).astype(np.int32)}


def test_tree_of_float_nodes():
    t = per.SumTree(10, dtype=np.float32)
    assert isinstance(t, per.SumTree) and t.dtype == np.float32
    assert per.SumTree(10).dtype == np.float64
    t.set_batch([0, 1, 2], [0.1, 2, 3.5])
    v = t.values()
    assert v.dtype == np.float32 and v[0] == np.float32(0.1)
    assert t.nodes().dtype == np.float32 and t.nodes().shape == (32,)
    # the root is the float sum: 0.1f + 2 + 3.5 rounded in float, not the
    # double sum of the rounded leaves converted once
    assert t.total == float((np.float32(0.1) + np.float32(2)) + np.float32(3.5))
    assert t.total != 0.1 + 2 + 3.5
    idx, val = t.sample(6, per.Rng(1))
    assert val.dtype == np.float32 and set(idx) <= {0, 1, 2}
    t.check()


def test_float_tree_refusals_change_nothing():
    t = per.SumTree(4, dtype=np.float32)
    t.build([1, 2, 3, 4])
    before = t.nodes()
    # float's leaf limit is 1e28; a double that does not fit a float is
    # refused by the tree (set) or by the conversion (arrays)
    for bad in (1e29, 1e300):
        with pytest.raises(per.Error, match="PER_ERR_RANGE"):
            t.set(0, bad)
    with pytest.raises(per.Error, match="PER_ERR_NEGATIVE"):
        t.set(0, -1e300)
    with pytest.raises(ValueError, match="float32"):
        t.set_batch([0], [1e300])
    with pytest.raises(per.Error, match="PER_ERR_NAN"):
        t.set_batch([0], [np.nan])
    np.testing.assert_array_equal(t.nodes(), before)


def test_node_type_arguments():
    for bad in (np.float16, np.int32, "f8x", object):
        with pytest.raises(TypeError, match="float64.*float32"):
            per.SumTree(4, dtype=bad)
        with pytest.raises(TypeError, match="float64.*float32"):
            per.ReplayBuffer(4, ITEM, nodes=bad)
    # spellings numpy takes for the two types
    assert per.SumTree(4, dtype="float32").dtype == np.float32
    assert per.ReplayBuffer(4, ITEM, nodes="f8").nodes == np.float64

    # a subclass is over per._per's type: double nodes only, said so
    class Mine(per.ReplayBuffer):
        pass

    assert Mine(4, ITEM).nodes == np.float64
    with pytest.raises(TypeError, match="subclass"):
        Mine(4, ITEM, nodes=np.float32)


def test_categorical_sampler_takes_its_own_node_type():
    t32, t64 = per.SumTree(8, dtype=np.float32), per.SumTree(8)
    t32.build(np.arange(1, 9))
    t64.build(np.arange(1, 9))
    c32 = per.CategoricalSampler(4, dtype=np.float32)
    assert isinstance(c32, per.CategoricalSampler)
    idx, val = c32.sample(t32, 4, per.Rng(2))
    assert len(set(idx.tolist())) == 4 and val.dtype == np.float32
    with pytest.raises(TypeError, match="float32"):
        per.CategoricalSampler(4).sample(t32, 2, per.Rng(2))
    with pytest.raises(TypeError, match="float64"):
        c32.sample(t64, 2, per.Rng(2))


def test_buffer_of_float_nodes():
    b = per.ReplayBuffer(64, ITEM, nodes=np.float32, seed=5, alpha=0.7)
    assert isinstance(b, per.ReplayBuffer)
    assert b.nodes == np.float32 and b.dtype.names == ("obs", "action")
    assert "nodes=float32" in repr(b)
    b.add_batch(**items(40))
    s = b.sample(16)
    assert s["weights"].dtype == np.float32 and s["ids"].dtype == np.uint64
    b.update(s["ids"], np.linspace(-2, 2, 16, dtype=np.float32))
    pr = b.priorities()
    assert pr.dtype == np.float32 and pr.shape == (64,)
    # (|td| + eps)^alpha in double, rounded to float once (per.h's rule)
    ids = s["ids"][-1:]
    b.update(ids, np.float32([2.0]))
    slot = int(ids[0]) % 64
    assert pr.dtype == b.priorities().dtype
    assert b.priorities()[slot] == np.float32((2.0 + 1e-6) ** 0.7)
    b.check()


def test_float_buffer_pickles_and_checkpoints(tmp_path):
    b = per.ReplayBuffer(32, ITEM, nodes=np.float32, seed=7)
    b.add_batch(**items(20))
    b.update(b.sample(8)["ids"], np.arange(8, dtype=np.float32))
    for c in (pickle.loads(pickle.dumps(b)), copy.deepcopy(b)):
        assert isinstance(c, per.ReplayBuffer) and c.nodes == np.float32
        np.testing.assert_array_equal(c.priorities(), b.priorities())
        x, y = c.sample(8), copy.deepcopy(b).sample(8)
        np.testing.assert_array_equal(x["ids"], y["ids"])
    path = tmp_path / "b.per"
    b.save(path)
    assert per._per.ckpt_info(str(path))["real_bytes"] == 4
    f = per.ReplayBuffer.from_file(path)
    assert f.nodes == np.float32
    np.testing.assert_array_equal(f.priorities(), b.priorities())
    d = per.ReplayBuffer(32, ITEM, seed=7)
    d.add_batch(**items(3))
    with pytest.raises(per.Error, match="PER_ERR_MISMATCH"):
        d.load(path)
    assert len(d) == 3


@pytest.mark.parametrize("nodes", [np.float64, np.float32])
def test_one_adder_feeds_either_node_type(nodes):
    """NStep, Trajectory and TrajectoryAccumulator are per._per's; the
    buffer may be per._per32's: the same items land either way."""
    b = per.ReplayBuffer(64, per.NStep(2, 0.5, obs_shape=3).item_dtype,
                         nodes=nodes)
    ref = per.ReplayBuffer(64, b.dtype)
    for buf in (b, ref):
        a = per.NStep(2, 0.5, obs_shape=3)
        for t in range(9):
            a.step(buf, np.full(3, t, np.float32), t % 2, float(t),
                   np.full(3, t + 1, np.float32), terminated=t == 8)
    assert len(b) == len(ref) == 9
    np.testing.assert_array_equal(b.storage, ref.storage)

    t = per.Trajectory(8, ITEM)
    tb = per.ReplayBuffer(16, t.dtype, nodes=nodes)
    for k in range(5):
        t.add(**{n: v[k] for n, v in items(5).items()})
    t.end(per.END_TERMINATED)
    assert t.add_to(tb)["n"] == 5 and len(tb) == 5
    np.testing.assert_array_equal(tb.storage[:5]["obs"], items(5)["obs"])

    # a buffered timescale of 4 steps
    acc = per.TrajectoryAccumulator({"step": {"x": np.zeros((4, 2), np.float32)}})
    for k in range(4):
        acc.add("step", {"x": np.full(2, k, np.float32)})
    ab = per.ReplayBuffer(8, acc.timescales["step"]["dtype"], nodes=nodes)
    assert acc.add_to(ab, "step")["n"] == 4 and len(ab) == 4
    np.testing.assert_array_equal(ab.storage[:4]["x"][:, 0], np.arange(4))


def test_adders_refuse_what_is_not_a_buffer():
    t = per.Trajectory(4, ITEM)
    t.add(**{n: v[0] for n, v in items(1).items()})
    with pytest.raises(TypeError, match="per.ReplayBuffer"):
        t._add_to(per.SumTree(4, dtype=np.float32), None)
    a = per.NStep(1, 0.5, obs_shape=3)
    with pytest.raises(TypeError, match="per.ReplayBuffer"):
        a.step(per.SumTree(4), np.zeros(3), 0, 0.0, np.zeros(3))
    # items of another size: refused, nothing added
    b = per.ReplayBuffer(8, {"y": np.float64}, nodes=np.float32)
    with pytest.raises(ValueError, match="bytes"):
        t.add_to(b)
    assert len(b) == 0


def test_frame_buffer_of_float_nodes(tmp_path):
    fb = per.FrameBuffer(50, (3, 3), stack=2, nodes=np.float32, seed=1)
    assert isinstance(fb, per.FrameBuffer) and fb.nodes == np.float32
    for t in range(30):
        fb.step(np.full((3, 3), t, np.uint8), t % 3, 1.0,
                np.full((3, 3), t + 1, np.uint8), t % 10 == 9)
    s = fb.sample(8)
    assert fb.update(s["ids"], np.ones(8, np.float32)) == 0
    path = tmp_path / "f.per"
    fb.save(path)
    back = per.FrameBuffer(50, (3, 3), stack=2, nodes=np.float32, seed=1)
    back.load(path)
    np.testing.assert_array_equal(back.sample(8)["ids"], fb.sample(8)["ids"])
    d = per.FrameBuffer(50, (3, 3), stack=2, seed=1)
    with pytest.raises(per.Error):
        d.load(path)
    assert len(d) == 0
