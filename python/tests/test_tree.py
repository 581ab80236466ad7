"""per.SumTree, per.Rng and the samplers: the C contract through Python."""

import numpy as np
import pytest

import per


def fails(name, call, *args):
    """call(*args) raises per.Error with status `name`."""
    with pytest.raises(per.Error) as e:
        call(*args)
    assert e.value.name == name
    return e.value


def test_set_get_total_prefix_find():
    t = per.SumTree(5)
    assert (t.capacity, t.leaves, len(t)) == (5, 8, 5)
    for i, v in enumerate([1.0, 2.0, 0.0, 4.0, 0.5]):
        t.set(i, v)
    assert t.total == 7.5
    assert [t.get(i) for i in range(5)] == [1.0, 2.0, 0.0, 4.0, 0.5]
    assert t.prefix(0) == 0.0 and t.prefix(2) == 3.0 and t.prefix(99) == 7.5
    assert [t.find(u) for u in (0.0, 0.999, 1.0, 2.999, 3.0, 6.999, 7.0, 7.5, 100.0)] == \
        [0, 0, 1, 1, 3, 3, 4, 4, 4]
    t.check()
    nodes = t.nodes()
    assert nodes.shape == (16,) and nodes[1] == 7.5 and nodes[0] == 0.0
    assert list(nodes[8:13]) == [1.0, 2.0, 0.0, 4.0, 0.5]


def test_batch_calls_match_single_sets_bitwise():
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 1000, 5000)
    val = rng.random(5000) * 10.0 ** rng.integers(-30, 30, 5000)
    a, b = per.SumTree(1000), per.SumTree(1000)
    a.set_batch(idx, val)                    # int64 indices converted
    for i, v in zip(idx, val):
        b.set(int(i), float(v))
    assert a.nodes().tobytes() == b.nodes().tobytes()
    c = per.SumTree(1000)
    c.set_range(10, val[:500])
    d = per.SumTree(1000)
    for j in range(500):
        d.set(10 + j, float(val[j]))
    assert c.nodes().tobytes() == d.nodes().tobytes()
    e = per.SumTree(1000)
    e.build(val[:700])
    assert np.array_equal(e.values(), np.concatenate([val[:700], np.zeros(300)]))
    assert np.array_equal(a.values(idx[:10]), np.array([a.get(int(i)) for i in idx[:10]]))


@pytest.mark.parametrize("v,name", [(float("nan"), "PER_ERR_NAN"), (float("inf"), "PER_ERR_INF"),
                                    (-1.0, "PER_ERR_NEGATIVE"), (1e300, "PER_ERR_RANGE")])
def test_bad_values_raise_and_change_nothing(v, name):
    t = per.SumTree(8)
    t.set_batch(np.arange(8), np.arange(8.0))
    before = t.nodes().tobytes()
    with pytest.raises(per.Error) as e:
        t.set(3, v)
    assert e.value.name == name and e.value.status == getattr(per._per, name)
    assert name in str(e.value)
    with pytest.raises(per.Error) as e:
        t.set_batch([0, 1, 2], [5.0, v, 6.0])   # validated first: 0 stays
    assert e.value.name == name
    assert t.nodes().tobytes() == before


def test_bad_indices_raise_and_change_nothing():
    t = per.SumTree(8)
    t.set(0, 1.0)
    before = t.nodes().tobytes()
    for call in (lambda: t.set(8, 1.0), lambda: t.get(8),
                 lambda: t.set_batch([1, 8], [1.0, 1.0]),
                 lambda: t.set_batch([1, 2**32 + 1], [1.0, 1.0]),   # would wrap to 1
                 lambda: t.set_batch([-1], [1.0]),
                 lambda: t.set_range(5, [1.0] * 4)):
        fails("PER_ERR_INDEX", call)
    with pytest.raises(ValueError):
        t.set_batch([1, 2], [1.0])
    with pytest.raises(TypeError):
        t.set_batch(["a"], [1.0])
    assert t.nodes().tobytes() == before


def test_empty_and_capacity_errors():
    fails("PER_ERR_CAPACITY", lambda: per.SumTree(0))
    with pytest.raises(OverflowError):
        per.SumTree(-1)
    t = per.SumTree(4)
    fails("PER_ERR_EMPTY", lambda: t.find(0.0))
    fails("PER_ERR_EMPTY", lambda: t.sample(4, per.Rng(1)))
    t.set(1, 1.0)
    fails("PER_ERR_NAN", lambda: t.find(float("nan")))
    fails("PER_ERR_BATCH", lambda: t.sample(0, per.Rng(1)))


def test_rng_streams_and_state():
    a, b = per.Rng(7), per.Rng(7)
    xs = [a.u32() for _ in range(10)]
    assert xs == [b.u32() for _ in range(10)]
    assert xs != [per.Rng(8).u32() for _ in range(10)]
    st = a.state
    ys = [a.random() for _ in range(5)]
    assert all(0.0 <= y < 1.0 for y in ys)
    a.state = st
    assert ys == [a.random() for _ in range(5)]
    assert all(0 <= a.below(3) < 3 for _ in range(100))
    assert (a.seed, per.Rng().seed) == (7, 0)
    with pytest.raises(ValueError):
        a.state = b"short"


def test_stratified_sample_one_per_stratum():
    t = per.SumTree(100)
    t.build(np.ones(100))
    rng = per.Rng(5)
    c0 = rng.counter
    idx, val = t.sample(10, rng)
    # stratum i covers leaves [10 i, 10 i + 10) of equal mass
    assert list(idx // 10) == list(range(10))
    assert np.all(val == 1.0) and rng.counter == c0 + 10


def test_iid_law_chi_square():
    # leaves 1..8: 80000 draws, chi-square with 7 degrees of freedom;
    # 24.32 is its 0.999 quantile (false-failure probability 1e-3, seed
    # fixed so the outcome is too).
    t = per.SumTree(8)
    w = np.arange(1.0, 9.0)
    t.build(w)
    idx, _ = t.sample_iid(80000, per.Rng(11))
    counts = np.bincount(idx, minlength=8)
    expect = 80000 * w / w.sum()
    chi2 = float(((counts - expect) ** 2 / expect).sum())
    assert chi2 < 24.32


def test_categorical_without_replacement():
    t = per.SumTree(50)
    vals = np.linspace(0.0, 5.0, 50)   # leaf 0 is 0: never drawn
    t.build(vals)
    before = t.nodes().tobytes()
    cat = per.CategoricalSampler(64)
    idx, val = cat.sample(t, 49, per.Rng(2))
    assert len(set(idx.tolist())) == 49 and 0 not in idx
    assert np.array_equal(val, vals[idx])
    assert t.nodes().tobytes() == before
    fails("PER_ERR_TOO_FEW", lambda: cat.sample(t, 50, per.Rng(2)))
    assert t.nodes().tobytes() == before
    fails("PER_ERR_BATCH", lambda: cat.sample(t, 65, per.Rng(2)))


def test_uniform_sampler():
    s = per.UniformSampler(100)
    fails("PER_ERR_EMPTY", lambda: s.sample(1, per.Rng(0)))
    s.grow(40)
    out = s.sample(40, per.Rng(0))
    assert sorted(out.tolist()) == list(range(40))
    fails("PER_ERR_ARG", lambda: s.grow(10))
    fails("PER_ERR_BATCH", lambda: s.sample(41, per.Rng(0)))
    assert s.n == 40 and s.capacity == 100


def test_status_names():
    assert per.status_name(0) == "PER_OK"
    assert per.status_name(per._per.PER_ERR_CHECKSUM) == "PER_ERR_CHECKSUM"
    assert per.crc32c(b"123456789") == 0xE3069283


def test_numpy_integers_are_indices():
    t = per.SumTree(4)
    t.set(np.int64(2), np.float32(1.5))
    assert t.get(np.uint8(2)) == 1.5 and t.find(np.float64(0.5)) == 2
    with pytest.raises(TypeError):
        t.set(2.0, 1.0)
    with pytest.raises(OverflowError):
        t.get(2**32)
