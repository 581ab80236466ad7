"""Bad arguments: every refusal names the call and the argument, says what
is wrong with it, and leaves the structure as it was."""

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
