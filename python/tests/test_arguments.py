"""Bad arguments and values: every refusal names the call and the argument
or field, says what is wrong with it (range, type or shape), and leaves
the structure as it was. Values go into item fields only where the
conversion is exact (ReplayBuffer.add's rule)."""

import numpy as np
import pytest

import per

ITEM = {"obs": (np.float32, 4), "action": np.int32, "reward": np.float32}


def state(buf, tmp_path):
    """Every byte of the buffer's state: its checkpoint file."""
    p = tmp_path / "state.per"
    buf.save(p)
    return p.read_bytes()


def filled(**kw):
    b = per.ReplayBuffer(16, ITEM, seed=1, **kw)
    g = np.arange(8)
    b.add(obs=np.zeros((8, 4), np.float32), action=g, reward=g * 0.5)
    return b


def refused(call, exc, *fragments):
    with pytest.raises(exc) as e:
        call()
    for f in fragments:
        assert f in str(e.value), (f, str(e.value))
    return str(e.value)


def test_integer_arguments_name_themselves(tmp_path):
    b = filled()
    before = state(b, tmp_path)
    for call, what, got in [
        (lambda: b.sample(-1), "ReplayBuffer.sample: batch_size", "got -1"),
        (lambda: b.sample(2, window=-3), "ReplayBuffer.sample: window", "got -3"),
        (lambda: b.sample(2**32), "ReplayBuffer.sample: batch_size", "got 4294967296"),
        (lambda: b.load_shard(tmp_path / "x.per", -1, 2),
         "ReplayBuffer.load_shard: rank", "got -1"),
    ]:
        refused(call, OverflowError, what + " must be in [0, 2^32)", got)
        assert state(b, tmp_path) == before
    refused(lambda: b.sample(1.5), TypeError,
            "ReplayBuffer.sample: batch_size must be an int, not float")
    refused(lambda: b.sample(2, beta="x"), TypeError, "ReplayBuffer.sample: beta")
    assert state(b, tmp_path) == before
    for kw, name, bits in [({"seed": -1}, "seed", 64),
                           ({"beta_steps": -1}, "beta_steps", 64),
                           ({"max_unique": -1}, "max_unique", 32),
                           ({"seq_len": -2}, "seq_len", 32),
                           ({"seq_stride": 2**32}, "seq_stride", 32)]:
        refused(lambda: per.ReplayBuffer(16, ITEM, **kw), OverflowError,
                f"ReplayBuffer: {name} must be in [0, 2^{bits}), got ")
    refused(lambda: per.ReplayBuffer(-1, ITEM), OverflowError,
            "ReplayBuffer: capacity must be in [0, 2^32), got -1")
    refused(lambda: per.ReplayBuffer(16, ITEM, alpha="x"), TypeError, "ReplayBuffer: alpha")
    t = per.SumTree(4)
    for call, what in [
        (lambda: per.SumTree(-1), "SumTree: capacity"),
        (lambda: t.set(-1, 1.0), "SumTree.set: i"),
        (lambda: t.get(-1), "SumTree.get: i"),
        (lambda: t.prefix(-1), "SumTree.prefix: i"),
        (lambda: t.set_range(-1, [1.0]), "SumTree.set_range: first"),
        (lambda: t.sample(-1, per.Rng(1)), "SumTree.sample: batch_size"),
        (lambda: t.sample_iid(-1, per.Rng(1)), "SumTree.sample_iid: k"),
        (lambda: per.UniformSampler(-1), "UniformSampler: capacity"),
        (lambda: per.UniformSampler(4).grow(-1), "UniformSampler.grow: n"),
        (lambda: per.UniformSampler(4).sample(-1, per.Rng(1)), "UniformSampler.sample: k"),
        (lambda: per.CategoricalSampler(-1), "CategoricalSampler: max_k"),
        (lambda: per.CategoricalSampler(4).sample(t, -1, per.Rng(1)),
         "CategoricalSampler.sample: k"),
        (lambda: per.Rng(1).below(-1), "Rng.below: n"),
        (lambda: per.NStep(-1, 0.5), "NStep: n"),
        (lambda: per.NStep(3, 0.5, obs_shape=-1), "NStep: obs_shape"),
        (lambda: per.config_default(-1, 4), "config_default: capacity"),
        (lambda: per.crc32c(b"", -1), "crc32c: crc"),
    ]:
        refused(call, OverflowError, what + " must be in [0, 2^32), got -1")
    refused(lambda: per.Rng(-1), OverflowError, "Rng: seed must be in [0, 2^64), got -1")
    refused(lambda: t.set(2.0, 1.0), TypeError, "SumTree.set: i must be an int, not float")
    assert t.nodes().tobytes() == per.SumTree(4).nodes().tobytes()


def test_exact_conversions_are_stored():
    b = per.ReplayBuffer(8, {"f": np.float32, "i": np.int32, "u": np.uint8,
                             "flag": np.bool_, "s": "S4", "x": (np.float64, 2)})
    b.add(f=0.1, i=2.0, u=np.int64(255), flag=1, s="ab", x=[2**53, True])
    b.add(f=np.int64(2**24), i=np.uint64(7), u=True, flag=np.float32(0.0),
          s=b"abcd", x=np.array([1.5, -0.0], np.float16))
    st = b.storage
    assert st["f"].tolist() == [np.float32(0.1), 2.0**24]     # rounded to nearest
    assert st["i"].tolist() == [2, 7] and st["u"].tolist() == [255, 1]
    assert st["flag"].tolist() == [True, False]
    assert st["s"].tolist() == [b"ab", b"abcd"]
    assert st["x"].tolist() == [[2.0**53, 1.0], [1.5, -0.0]]
    c = per.ReplayBuffer(4, {"f": np.float32})
    c.add(f=[np.nan, np.inf, -np.inf, 3.40282350e38])   # not finite stays; the last rounds
    assert np.isnan(c.storage["f"][0]) and c.storage["f"][1:3].tolist() == [np.inf, -np.inf]
    assert c.storage["f"][3] == np.float32(3.4028235e38)


@pytest.mark.parametrize("field,value,exc,fragment", [
    (np.int32, 2**40, ValueError, "1099511627776 is outside [-2147483648, 2147483647]"),
    (np.int32, 2**70, ValueError, "is outside [-2147483648, 2147483647]"),
    (np.uint8, -1, ValueError, "-1 is outside [0, 255]"),
    (np.uint64, np.int64(-1), ValueError, "-1 is outside [0, 18446744073709551615]"),
    (np.int64, np.uint64(2**63), ValueError, "9223372036854775808 is outside"),
    (np.int64, 2.0**63, ValueError, "9.223372036854776e+18 is outside"),
    (np.int32, 1.5, ValueError, "1.5 is not a whole number"),
    (np.int32, np.nan, ValueError, "nan is not a whole number"),
    (np.int32, np.inf, ValueError, "inf is not a whole number"),
    (np.int32, "1", TypeError, "U1 values do not convert to int32"),
    (np.float32, 1e300, ValueError, "1e+300 overflows float32"),
    (np.float32, -1e39, ValueError, "-1e+39 overflows float32"),
    (np.float32, 2**24 + 1, ValueError, "the integer 16777217 has no exact float32 value"),
    (np.float64, 2**53 + 1, ValueError, "has no exact float64 value"),
    (np.float16, 70000, ValueError, "the integer 70000 has no exact float16 value"),
    (np.float32, 1 + 1j, TypeError, "complex128 values do not convert to float32"),
    (np.float32, None, TypeError, "Python NoneType objects"),
    (np.bool_, 2, ValueError, "2 is neither 0 nor 1"),
    (np.bool_, np.nan, ValueError, "nan is neither 0 nor 1"),
    ("S4", "abcdef", ValueError, "'abcdef' does not convert to S4 unchanged"),
    ("S4", "\u00e9", ValueError, "ascii"),
    ("S4", 5, TypeError, "int64 values do not convert to S4"),
    ("M8[s]", np.datetime64(1500, "ms"), ValueError, "does not convert to M8[s]"),
])
def test_inexact_conversions_are_refused(tmp_path, field, value, exc, fragment):
    b = per.ReplayBuffer(8, {"v": field, "w": np.float32})
    b.add(v=np.zeros((), field), w=1.0)
    before = state(b, tmp_path)
    name = np.dtype(field).name if np.dtype(field).kind in "biufc" else np.dtype(field).str[1:]
    msg = refused(lambda: b.add(v=value, w=2.0), exc, "ReplayBuffer.add: field 'v'", fragment)
    assert f"({name})" in msg
    assert state(b, tmp_path) == before


def test_one_bad_value_adds_nothing(tmp_path):
    b = filled()
    before = state(b, tmp_path)
    ok = {"obs": np.zeros((3, 4)), "action": [1, 2, 3], "reward": [0.0, 1.0, 2.0]}
    for field, values in [("action", [1, 2, 2**40]), ("action", [0.0, 1.0, 1.5]),
                          ("reward", [0.0, 1.0, 1e300]),
                          ("obs", [[0] * 4] * 2 + [[0, 0, 0, 1e39]])]:
        with pytest.raises(ValueError) as e:
            b.add_batch(**{**ok, field: values}, ends=per.END_TERMINATED)
        assert f"field {field!r}" in str(e.value)
        assert state(b, tmp_path) == before and len(b) == 8


def test_shapes_and_records(tmp_path):
    b = filled()
    before = state(b, tmp_path)
    refused(lambda: b.add_batch(obs=np.zeros(4), action=1, reward=0.5), ValueError,
            "ReplayBuffer.add_batch: field 'obs' has shape (4,), one item's",
            "(n, 4)")
    refused(lambda: b.add(obs=np.zeros(5), action=1, reward=0.5), ValueError,
            "ReplayBuffer.add: field 'obs' has shape (5,); one item's is (4,), a batch's (n, 4)")
    refused(lambda: b.add(obs=np.zeros((2, 4)), action=[1, 2, 3], reward=[0, 1]), ValueError,
            "field 'obs' holds a batch of 2, field 'action' a batch of 3")
    refused(lambda: b.add(obs=np.zeros(4), action=[1, 2], reward=0.0), ValueError,
            "field 'obs' holds one item, field 'action' a batch of 2")
    refused(lambda: b.add(np.zeros(2, [("x", "f4")])), TypeError,
            "records with the fields ['x'], the buffer's are ['obs', 'action', 'reward']")
    wide = np.zeros(2, [("reward", "f8"), ("obs", "f8", (4,)), ("action", "i8")])
    wide["action"] = [3, 2**40]
    refused(lambda: b.add(wide), ValueError, "field 'action' (int32): 1099511627776")
    plain = per.ReplayBuffer(4, (np.float32, 2))
    refused(lambda: plain.add(np.array([1e300, 1.0])), ValueError,
            "ReplayBuffer.add: item array (float32): 1e+300 overflows float32")
    refused(lambda: plain.add(np.zeros(3)), ValueError, "item array has shape (3,)")
    assert len(plain) == 0
    assert state(b, tmp_path) == before
    # records of another layout with the same fields: converted field by field
    wide["action"] = [3, 4]
    wide["reward"] = [0.25, 0.5]
    b.add(wide)
    assert b.storage["action"][8:].tolist() == [3, 4]
    assert b.storage["reward"][8:].tolist() == [0.25, 0.5]


def test_td_and_ids_shapes(tmp_path):
    b = filled()
    ids = b.sample(8)["ids"]
    before = state(b, tmp_path)
    refused(lambda: b.update(ids, np.ones((4, 2))), ValueError,
            "ReplayBuffer.update: td has shape (4, 2); 8 ids take td of shape (8,)")
    refused(lambda: b.update(ids, np.ones((8, 1))), ValueError, "td has shape (8, 1)")
    refused(lambda: b.update(ids, 1.0), ValueError, "td has shape ()")
    refused(lambda: b.update(ids.reshape(2, 4), np.ones(8)), ValueError,
            "ReplayBuffer.update: ids must be 1-D, got shape (2, 4)")
    refused(lambda: b.update(ids, ["a"] * 8), TypeError, "ReplayBuffer.update: td")
    assert state(b, tmp_path) == before
    s = per.ReplayBuffer(16, ITEM, seq_len=4, seq_stride=2, seed=2)
    g = np.arange(12)
    s.add(obs=np.zeros((12, 4)), action=g, reward=g)
    sids = s.sample(3, sequences=True)["ids"]
    before = state(s, tmp_path)
    refused(lambda: s.update_sequences(sids, np.ones(12)), ValueError,
            "ReplayBuffer.update_sequences: td has shape (12,); 3 ids take td of shape (3, 4)")
    refused(lambda: s.update_sequences(sids, np.ones((4, 3))), ValueError, "(3, 4)")
    assert state(s, tmp_path) == before
    assert s.update_sequences(sids, np.ones((3, 4))) == 0


def test_tree_arrays_are_one_dimensional():
    t = per.SumTree(8)
    t.set(1, 2.0)
    before = t.nodes().tobytes()
    refused(lambda: t.set_batch([[0, 1], [2, 3]], [1.0] * 4), ValueError,
            "SumTree.set_batch: idx must be 1-D, got shape (2, 2)")
    refused(lambda: t.set_batch([0, 1], [[1.0], [1.0]]), ValueError,
            "SumTree.set_batch: val must be 1-D, got shape (2, 1)")
    refused(lambda: t.set_batch([0, 1], [1.0]), ValueError, "2 idx but 1 val")
    refused(lambda: t.build(np.ones((2, 4))), ValueError, "SumTree.build: val must be 1-D")
    refused(lambda: t.set_range(0, np.ones((2, 2))), ValueError, "SumTree.set_range: val")
    assert t.nodes().tobytes() == before


def test_nstep_values(tmp_path):
    a = per.NStep(3, 0.5, obs_shape=2)
    buf = per.ReplayBuffer(16, a.item_dtype)
    a.step(buf, [0, 0], 1, 1.0, [1, 1])
    a.save(tmp_path / "a.pern")
    pending = (tmp_path / "a.pern").read_bytes()
    before = state(buf, tmp_path)
    refused(lambda: a.step(buf, [0, 0], 1.5, 1.0, [1, 1]), ValueError,
            "NStep.step: action (int32): 1.5 is not a whole number")
    refused(lambda: a.step(buf, [0, 0], 1, 1e300, [1, 1]), ValueError,
            "NStep.step: reward (float32): 1e+300 overflows float32")
    refused(lambda: a.step(buf, [0, 1e40], 1, 1.0, [1, 1]), ValueError,
            "NStep.step: obs (float32): 1e+40 overflows float32")
    refused(lambda: a.step(buf, [0, 0, 0], 1, 1.0, [1, 1]), ValueError,
            "NStep.step: obs has shape (3,), the adder's is (2,)")
    refused(lambda: per.NStep(3, "x"), TypeError, "NStep: gamma")
    a.save(tmp_path / "a.pern")
    assert (tmp_path / "a.pern").read_bytes() == pending
    assert state(buf, tmp_path) == before


def test_c_refusals_name_the_field(tmp_path):
    """per.Error carries the buffer's own reason (per_buffer's b->error):
    the field or argument and its value, not only the status."""
    refused(lambda: per.ReplayBuffer(50, ITEM, max_unique=100), per.Error,
            "PER_ERR_ARG", "max_unique 100 > capacity 50", "(ReplayBuffer)")
    refused(lambda: per.ReplayBuffer(16, ITEM, seq_len=4), per.Error,
            "seq_len 4 needs seq_stride >= 1")
    refused(lambda: per.ReplayBuffer(16, ITEM, alpha=-1.0), per.Error,
            "PER_ERR_ARG: alpha is negative (ReplayBuffer)")
    b = filled()
    refused(lambda: b.sample(4, sequences=True), per.Error,
            "PER_SAMPLE_SEQUENCES on a buffer without sequences")
    refused(lambda: b.sample(10, unique=True, window=3), per.Error,
            "PER_ERR_TOO_FEW", "batch size B 10 > 3 eligible items")
    s = b.sample(4)
    td = np.ones(4, np.float32)
    td[2] = np.nan
    before = state(b, tmp_path)
    refused(lambda: b.update(s["ids"], td), per.Error, "td[2] is NaN",
            "(ReplayBuffer.update)")
    assert state(b, tmp_path) == before
    # a checkpoint of another capacity
    p = tmp_path / "b.per"
    b.save(p)
    other = per.ReplayBuffer(32, ITEM)
    refused(lambda: other.load(p), per.Error, "PER_ERR_MISMATCH",
            "the checkpoint's capacity 16, the buffer's 32")


def test_update_refuses_sequence_ids(tmp_path):
    """ids from a sequence sample go to update_sequences; update refuses
    them instead of updating each sequence's first step."""
    b = per.ReplayBuffer(16, ITEM, seq_len=4, seq_stride=2, seed=2)
    g = np.arange(16)
    b.add(obs=np.zeros((16, 4), np.float32), action=g, reward=g * 0.5)
    s = b.sample(3, sequences=True)
    before = state(b, tmp_path)
    refused(lambda: b.update(s["ids"], np.ones(3, np.float32)), per.Error,
            "PER_ERR_ARG", "ids[0] is a sequence's id",
            "(ReplayBuffer.update)")
    assert state(b, tmp_path) == before
    assert b.update_sequences(s["ids"], np.ones((3, 4), np.float32)) == 0


def test_checkpoints_know_the_dtype(tmp_path):
    """A checkpoint keeps the items' dtype: a buffer of another dtype of
    the same item size refuses it; from_file rebuilds the buffer (capacity,
    config, dtype) from the file alone."""
    b = filled(alpha=0.7, seq_len=4, seq_stride=2)
    b.update(b.sample(4)["ids"], np.array([0.5, 2.0, 1.0, 3.0], np.float32))
    p = tmp_path / "b.per"
    b.save(p)
    same_size = {"obs": (np.int32, 4), "action": np.float32, "reward": np.int32}
    other = per.ReplayBuffer(16, same_size, seq_len=4, seq_stride=2)
    assert other.dtype.itemsize == b.dtype.itemsize
    refused(lambda: other.load(p), per.Error, "PER_ERR_MISMATCH",
            "the checkpoint's layout", "is not the buffer's")
    c = per.ReplayBuffer.from_file(p)
    assert c.dtype == b.dtype and c.layout == b.layout
    assert c.config == b.config and c.size == b.size
    assert np.array_equal(c.priorities(), b.priorities())
    s1, s2 = b.sample(5), c.sample(5)
    for k in s1:
        assert np.array_equal(s1[k], s2[k]), k
    # the header alone
    info = per._per.ckpt_info(str(p))
    assert info["version"] == 3 and info["size"] == 8
    assert info["layout"] == b.layout and info["alpha"] == 0.7


def test_from_file_without_a_layout(tmp_path):
    """A file that names no dtype (C, or per before 0.4) needs item=."""
    b = filled()
    b._set_layout("")
    p = tmp_path / "c.per"
    b.save(p)
    refused(lambda: per.ReplayBuffer.from_file(p), ValueError,
            "names no item layout", "pass item=")
    refused(lambda: per.ReplayBuffer.from_file(p, {"x": np.float64}),
            ValueError, "item= is 8 bytes, the file's items are 24")
    c = per.ReplayBuffer.from_file(p, ITEM)
    assert c.size == 8
    assert c.layout == per.ReplayBuffer(4, ITEM).layout  # keeps its own


def test_long_dtypes_are_named_by_digest(tmp_path):
    """A dtype whose text is longer than a checkpoint keeps is named by
    its digest: still compared on load."""
    wide = {f"field_{i:03d}": np.float32 for i in range(60)}
    b = per.ReplayBuffer(4, wide)
    assert b.layout.startswith("numpy-sha256:")
    p = tmp_path / "w.per"
    b.save(p)
    refused(lambda: per.ReplayBuffer.from_file(p), ValueError, "digest")
    assert per.ReplayBuffer.from_file(p, wide).size == 0


def test_td_beyond_float32_is_named_not_inf():
    """A finite TD error too large for C's float is a ValueError naming the
    entry, before anything changes; an infinite one is still C's
    PER_ERR_INF."""
    b = per.ReplayBuffer(8, np.float32, seed=1)
    b.add_batch(np.arange(4, dtype=np.float32))
    ids = b.sample(3)["ids"]
    before = b.priorities()
    with pytest.raises(ValueError, match=r"ReplayBuffer.update: td\[1\] \(float32\): "
                                         r"1e\+39 overflows float32"):
        b.update(ids, [1.0, 1e39, 2.0])
    with pytest.raises(ValueError, match=r"add_batch: td\[0\] \(float32\): "
                                         r"-1e\+300 overflows"):
        b.add_batch(np.zeros(1, np.float32), td=[-1e300])
    assert b.priorities().tobytes() == before.tobytes() and b.added == 4
    with pytest.raises(per.Error, match="PER_ERR_INF"):
        b.update(ids, [1.0, np.inf, 2.0])
