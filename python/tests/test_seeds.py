"""per.seeds: the classes of seeds 000 and 001, checked against per's own
classes they stand on (per.SumTree, per.ReplayBuffer, per.NStep,
per.cuda.SumTree, per.cuda.ReplayBuffer) and against hand computations.

Seed 000 (_SumTree, PrioritizedNStepReplayBuffer) and CpuSumTree need
NumPy only: their tests run without PyTorch too (CI's wheel stage), where
sample hands out NumPy arrays instead of tensors. The other seed-001
classes need PyTorch: without it they skip, unless PER_NEED_TORCH=1 (CI's
torch stage), where a missing torch fails. GpuSumTree and GPUReplayPER
run on device "cpu" (per.cuda.host: the kernels on the CPU under the test
shim, whose race detector must see no conflict) and "cuda" (per.cuda on a
GPU), as test_cuda.py runs its backends: PER_NEED_CUDA_HOST=1 or
PER_NEED_CUDA=1 turn a missing backend into a failure.

Every random sequence has a fixed seed, so every test gives the same
result on every run. Three tests compare counts of draws with their
expectation; each states its tolerance and the chance that a correct
sampler would fail it for a seed picked at random."""
import dataclasses
import math
import os

import numpy as np
import pytest

import per
import per.cuda as pc
import per.seeds as ps
from per.seeds import (CpuSumTree, GpuCumsumSampler, GpuSumTree, GPUReplayPER,
                       PERBatch, PrioritizedNStepReplayBuffer, _SumTree)

MASK32 = 0xFFFFFFFF


def _torch():
    """PyTorch: skip without it, fail where PER_NEED_TORCH=1 wants it."""
    if os.environ.get("PER_NEED_TORCH") == "1":
        try:
            import torch
        except ImportError:
            pytest.fail("PER_NEED_TORCH=1 but torch is not installed")
        return torch
    return pytest.importorskip("torch")


def _torch_or_none():
    """PyTorch, or None where it is not installed (and not required)."""
    try:
        import torch
    except ImportError:
        assert os.environ.get("PER_NEED_TORCH") != "1", \
            "PER_NEED_TORCH=1 but torch is not installed"
        return None
    return torch


def _host(x):
    """An array a seed class handed out, as NumPy (tensors copied off)."""
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def fails(name, call, *args):
    """call(*args) raises per.Error with status `name`."""
    with pytest.raises(per.Error) as e:
        call(*args)
    assert e.value.name == name, e.value
    return e.value


# ---------------------------------------------------------------------------
# Seed 000: _SumTree
# ---------------------------------------------------------------------------


def _tree(values, capacity=None):
    t = _SumTree(capacity or len(values))
    for v in values:
        t.add(v)
    return t


def test_sumtree_total_and_get():
    """The seed's first two: the total, and get's leaves for 1, 2, 3, 4
    (prefix sums 1, 3, 6, 10), with the priority of the leaf."""
    t = _tree([1.0, 2.0, 3.0, 4.0])
    assert t.capacity == 4
    assert t.total == 10.0
    assert t.get(0.5) == (0, 1.0)
    assert t.get(2.5) == (1, 2.0)
    assert t.get(7.0) == (3, 4.0)
    assert t.get(0.0) == (0, 1.0)
    assert t.get(5.999) == (2, 3.0)


def test_sumtree_descent_differs_from_seed():
    """per's descent, the documented difference: s equal to a left sum
    goes right (the seed's goes left), and s >= total gives the last leaf
    with mass; a leaf of priority 0 is never returned."""
    t = _tree([1.0, 2.0, 3.0, 4.0])
    assert t.get(1.0) == (1, 2.0)  # the seed: slot 0
    assert t.get(3.0) == (2, 3.0)
    assert t.get(6.0) == (3, 4.0)
    assert t.get(10.0) == (3, 4.0)
    assert t.get(1e9) == (3, 4.0)
    z = _tree([1.0, 0.0, 2.0, 0.0])
    assert z.get(1.0) == (2, 2.0)  # the seed: slot 1, of priority 0
    assert z.get(3.0) == (2, 2.0)  # the seed: slot 3, of priority 0
    assert {z.get(s)[0] for s in np.linspace(0.0, 3.5, 141)} == {0, 2}


def test_sumtree_update_propagates():
    """update rewrites one leaf and the total follows."""
    t = _tree([1.0, 1.0, 1.0, 1.0])
    assert t.total == 4.0
    t.update(0, 5.0)
    assert t.total == 8.0
    assert t.get(4.9) == (0, 5.0) and t.get(5.0) == (1, 1.0)
    t.update(3, 0.0)
    assert t.total == 7.0 and t.get(100.0) == (2, 1.0)


def test_sumtree_circular_overwrite():
    """A 4th add to a capacity-3 tree writes slot 0 again."""
    t = _SumTree(3)
    assert [t.add(p) for p in (1.0, 2.0, 3.0)] == [0, 1, 2]
    assert t.add(10.0) == 0
    assert t.total == 15.0
    assert t.get(0.0) == (0, 10.0)
    assert t.add(0.5) == 1 and t.total == 13.5


def test_sumtree_refuses_bad_priorities():
    """NaN, infinite and negative priorities and an index past the end
    raise per.Error with nothing written: total, leaves, max_priority and
    the next add's slot stay as they were."""
    t = _tree([1.0, 2.0, 3.0, 4.0])
    t.update(1, 2.5)
    for name, call, args in [("PER_ERR_NAN", t.update, (0, float("nan"))),
                             ("PER_ERR_NEGATIVE", t.update, (2, -1.0)),
                             ("PER_ERR_INF", t.update, (3, float("inf"))),
                             ("PER_ERR_INDEX", t.update, (4, 1.0)),
                             ("PER_ERR_NAN", t.add, (float("nan"),)),
                             ("PER_ERR_NEGATIVE", t.add, (-0.5,))]:
        fails(name, call, *args)
        assert t.total == 10.5
        assert [t.get(s)[1] for s in (0.5, 1.5, 4.0, 7.0)] == [1.0, 2.5, 3.0, 4.0]
        assert t.max_priority == 4.0
    assert t.add(7.0) == 0  # the failed adds did not move the ring


def test_sumtree_max_priority():
    """max_priority: 1.0 at first (the seed's start value, even when
    smaller priorities come), then the largest ever written: it does not
    come down when that leaf is overwritten."""
    t = _SumTree(4)
    assert t.max_priority == 1.0
    t.add(0.25)
    assert t.max_priority == 1.0
    t.add(3.5)
    t.update(2, 2.0)
    assert t.max_priority == 3.5
    t.update(1, 0.1)
    assert t.max_priority == 3.5 and t.total == 0.25 + 0.1 + 2.0


# ---------------------------------------------------------------------------
# Seed 000: PrioritizedNStepReplayBuffer
# ---------------------------------------------------------------------------


def _raw(buf, n, rng, action=None):
    """n push_raw calls of random (4,) states; returns the states."""
    states = rng.standard_normal((n, 4)).astype(np.float32)
    for i in range(n):
        a = float(i) if action is None else action(i)
        buf.push_raw(states[i], a, 0.5 * i, states[i] + 1, i % 7 == 6)
    return states


def test_buffer_push_raw_sample_types():
    """The seed's shapes test: push_raw, then sample's tuple: states and
    next_states (B, 4) float32, actions (B,) (a scalar action) float32,
    rewards and dones (B,) float32, indices an int64 NumPy array of slots
    in [0, len), weights (B,) float32 in (0, 1] with max exactly 1.
    Tensors on the default device where PyTorch is, NumPy arrays where it
    is not. The drawn rows are the items pushed to those slots."""
    torch = _torch_or_none()
    buf = PrioritizedNStepReplayBuffer(capacity=64, seed=3)
    assert len(buf) == 0 and buf.buffer is None
    states = _raw(buf, 40, np.random.default_rng(1))
    assert len(buf) == 40 and buf.buffer.added == 40
    out = buf.sample(32)
    assert len(out) == 7
    s, a, r, s2, d, idx, w = out
    assert isinstance(idx, np.ndarray) and idx.dtype == np.int64 and idx.shape == (32,)
    assert idx.min() >= 0 and idx.max() < 40
    for x in (s, a, r, s2, d, w):
        if torch is None:
            assert isinstance(x, np.ndarray)
        else:
            assert isinstance(x, torch.Tensor)
            want = "cuda" if torch.cuda.is_available() else "cpu"
            assert x.device.type == want
    s, a, r, s2, d, w = (_host(x) for x in (s, a, r, s2, d, w))
    for x, shape in ((s, (32, 4)), (s2, (32, 4)), (a, (32,)), (r, (32,)),
                     (d, (32,)), (w, (32,))):
        assert x.dtype == np.float32 and x.shape == shape
    np.testing.assert_array_equal(s, states[idx])
    np.testing.assert_array_equal(s2, states[idx] + 1)
    np.testing.assert_array_equal(a, idx.astype(np.float32))
    np.testing.assert_array_equal(r, (0.5 * idx).astype(np.float32))
    np.testing.assert_array_equal(d, (idx % 7 == 6).astype(np.float32))
    assert w.min() > 0 and w.max() == 1.0
    # vector actions keep their shape; device="cpu" puts tensors there,
    # and update_priorities takes tensors too
    vec = PrioritizedNStepReplayBuffer(capacity=8, seed=3, device="cpu")
    _raw(vec, 5, np.random.default_rng(2), action=lambda i: [i, -i, 2 * i])
    out = vec.sample(6)
    assert _host(out[1]).shape == (6, 3)
    if torch is not None:
        assert out[0].device.type == "cpu" and out[6].device.type == "cpu"
        vec.update_priorities(torch.tensor([4, 1]), torch.tensor([0.5, 2.0]))
        np.testing.assert_allclose(vec.buffer.priorities()[[4, 1]],
                                   [_leaf(0.5, 0.6, 1e-6), _leaf(2.0, 0.6, 1e-6)],
                                   rtol=1e-15, atol=0)
    with pytest.raises(ValueError, match="shape"):
        vec.push_raw(np.zeros(4), [1.0, 2.0], 0.0, np.zeros(4), False)
    with pytest.raises(ValueError, match="shape"):
        vec.push_raw(np.zeros(5), [1.0, 2.0, 3.0], 0.0, np.zeros(5), False)


def test_buffer_empty_raises():
    """sample and update_priorities on a buffer with nothing stored
    raise ValueError (before the first push, and for an n-step window
    that has emitted no item yet)."""
    buf = PrioritizedNStepReplayBuffer(capacity=8, n_steps=3)
    with pytest.raises(ValueError, match="empty"):
        buf.sample(4)
    with pytest.raises(ValueError, match="empty"):
        buf.update_priorities(np.array([0]), np.array([1.0]))
    buf.push(np.zeros(2), 0.0, 1.0, np.ones(2), False)  # no item yet (n = 3)
    assert len(buf) == 0
    with pytest.raises(ValueError, match="empty"):
        buf.sample(4)


def test_buffer_priorities_bias_sampling():
    """The seed's priority-bias test: slot 0 at TD error 100, the other 99
    at 0.01, alpha 1, beta fixed at 0.4, 200 samples of 8.

    Leaves: p0 = 100 + eps, p = float32(0.01) + eps (alpha 1: no pow),
    P(slot 0) = p0 / (p0 + 99 p) = 0.99020. Sampling is stratified: the
    8 strata of width T/8 each draw once; 8 P = 7.9216, so strata 0 .. 6
    lie inside slot 0's interval and always draw it, and stratum 7 draws
    it with probability q = 8 P - 7 = 0.9216. The count is 1400 +
    Binomial(200, q) (uniform replay would give about 16): always in
    [1400, 1600]; mean 1400 + 200 q = 1584.3, variance 200 q (1 - q) =
    14.46. Tolerance 25: by Bernstein's inequality a correct sampler
    leaves the band with probability <= 2 exp(-25^2 / (2 (14.46 + 25/3)))
    = 2.2e-6."""
    buf = PrioritizedNStepReplayBuffer(capacity=100, alpha=1.0, beta_start=0.4,
                                       beta_end=0.4, seed=7)
    _raw(buf, 100, np.random.default_rng(7))
    buf.update_priorities(np.array([0]), np.array([100.0]))
    buf.update_priorities(np.arange(1, 100), np.full(99, 0.01))
    pr = buf.buffer.priorities()
    assert pr[0] == 100.0 + 1e-6
    assert np.all(pr[1:] == float(np.float32(0.01)) + 1e-6)
    p = pr[0] / pr.sum()
    assert math.floor(8 * p) == 7
    q = 8 * p - 7
    counts = np.zeros(100, np.int64)
    for _ in range(200):
        out = buf.sample(8)
        np.add.at(counts, out[5], 1)
        assert buf.current_beta == 0.4
    assert counts.sum() == 1600
    assert 1400 <= counts[0] <= 1600
    assert abs(counts[0] - (1400 + 200 * q)) <= 25, (counts[0], 1400 + 200 * q)


def _ramp_buffer(n=64, alpha=0.6, **kw):
    """A buffer of n items with priorities rising (not in slot order)
    from TD errors 0.01 .. 5: returns it and the leaves."""
    buf = PrioritizedNStepReplayBuffer(capacity=n, alpha=alpha, seed=11, **kw)
    _raw(buf, n, np.random.default_rng(5))
    td = np.linspace(0.01, 5.0, n)[np.random.default_rng(6).permutation(n)]
    buf.update_priorities(np.arange(n), td)
    return buf, buf.buffer.priorities()


def _weights_of(leaves, beta):
    """IS weights (N P)^-beta over the batch's largest = (min / p)^beta."""
    return (leaves.min() / leaves) ** beta


def test_buffer_is_weights_range_and_inverse_relation():
    """IS weights: float32 in (0, 1], exactly 1 for the batch's smallest
    priority, never larger for a larger priority (and the largest
    priority's strictly below 1), equal to (p_min / p)^beta within float32
    rounding (peri_weight: within 1 ulp)."""
    buf, leaves = _ramp_buffer(beta_start=0.5, beta_end=0.5)
    for _ in range(4):
        out = buf.sample(32)
        idx, w = out[5], _host(out[6])
        assert w.dtype == np.float32
        p = leaves[idx]
        assert w.min() > 0 and w.max() == 1.0
        assert np.all(w[p == p.min()] == 1.0)
        order = np.argsort(p, kind="stable")
        assert np.all(np.diff(w[order]) <= 0)
        assert w[np.argmax(p)] < 1.0
        np.testing.assert_allclose(w, _weights_of(p, 0.5), rtol=2.5e-7, atol=0)


def test_buffer_beta_anneals():
    """current_beta: beta_start before any sample, then beta_start +
    (beta_end - beta_start) k / steps after k samples, beta_end from
    beta_anneal_steps on, never decreasing; each sample's weights use the
    beta current_beta showed before it (per's schedule: the seed's k-th
    call used that of k + 1)."""
    buf, leaves = _ramp_buffer(beta_start=0.4, beta_end=1.0, beta_anneal_steps=5)
    fresh = PrioritizedNStepReplayBuffer(beta_start=0.25)
    assert fresh.current_beta == 0.25  # before the first push
    seen = []
    for k in range(9):
        beta = buf.current_beta
        assert beta == pytest.approx(0.4 + 0.6 * min(1.0, k / 5), abs=1e-15)
        seen.append(beta)
        out = buf.sample(16)
        np.testing.assert_allclose(_host(out[6]), _weights_of(leaves[out[5]], beta),
                                   rtol=2.5e-7, atol=0)
    assert seen[0] == 0.4 and seen[5:] == [1.0] * 4
    assert all(b1 <= b2 for b1, b2 in zip(seen, seen[1:]))


def _leaf(td, alpha, eps):
    """per's leaf for a TD error: (|float32(td)| + eps)^alpha in double."""
    return (abs(float(np.float32(td))) + eps) ** alpha


def test_buffer_update_priorities():
    """update_priorities gives the items in the slots per's leaves
    (|td| + eps)^alpha from the TD errors rounded to float32 (the last of
    duplicates wins); the others keep theirs. New items get the largest
    priority ever written (1.0 until a larger one), as in the seed."""
    eps = 1e-3
    for alpha in (0.6, 1.0):
        buf = PrioritizedNStepReplayBuffer(capacity=32, alpha=alpha, eps=eps, seed=2)
        _raw(buf, 20, np.random.default_rng(3))
        before = buf.buffer.priorities()
        assert np.all(before[:20] == 1.0) and np.all(before[20:] == 0.0)
        slots = np.array([3, 7, 3, 19, 0])
        td = np.array([0.5, -2.0, 1.1, 1e-3, 0.3])
        buf.update_priorities(slots, td)
        pr = buf.buffer.priorities()
        want = before.copy()
        for s, x in zip(slots, td):
            want[s] = _leaf(x, alpha, eps)
        rtol = 0 if alpha == 1.0 else 1e-15
        np.testing.assert_allclose(pr, want, rtol=rtol, atol=0)
        assert np.array_equal(pr == before, ~np.isin(np.arange(32), slots))
        buf.push_raw(np.zeros(4), 0.0, 0.0, np.zeros(4), False)  # slot 20
        assert buf.buffer.priorities()[20] == pytest.approx(_leaf(2.0, alpha, eps),
                                                           rel=rtol)
        buf.update_priorities([7], [0.0])
        buf.push_raw(np.zeros(4), 0.0, 0.0, np.zeros(4), False)  # slot 21: still
        assert buf.buffer.priorities()[21] == buf.buffer.priorities()[20]


def test_ids_of_slots_arithmetic():
    """per.seeds._ids_of_slots: slot | generation << 32, the generation
    counting a slot's writes 1 .. 2^32 - 1 and then 1 again (per.h), and
    the id `capacity` (which per refuses) for a slot not filled; NumPy
    and torch alike."""
    added = 3 * MASK32 + 1  # slot 0 written 2^32 times, slots 1, 2 2^32 - 1
    slots = np.array([0, 1, 2, 3, -1, 2 ** 32 + 1])
    want = np.array([1 << 32, 1 | (MASK32 << 32), 2 | (MASK32 << 32), 3, 3, 3],
                    np.uint64)
    got = ps._ids_of_slots(slots, added, 3, np)
    assert np.array_equal(got.view(np.uint64), want)
    got = ps._ids_of_slots(np.array([0, 1, 4]), 2, 5, np)
    assert np.array_equal(got, [1 << 32, 1 | 1 << 32, 5])
    torch = _torch_or_none()
    if torch is not None:
        got = ps._ids_of_slots(torch.as_tensor(slots), added, 3, torch)
        assert np.array_equal(got.numpy().view(np.uint64), want)


def test_buffer_ring_wrap_ids_and_updates():
    """Capacity 5, 13 pushes: the ids the module computes from slots
    (_ids_of_slots) are the ids per.ReplayBuffer.sample hands out for
    those slots (generations 3, 3, 3, 2, 2); sample's rows are the newest
    items; an update reaches the items in the slots, also after later
    pushes overwrote them (the seed's behaviour: the update goes to the
    slot's new item)."""
    buf = PrioritizedNStepReplayBuffer(capacity=5, alpha=1.0, eps=0.0, seed=4)
    for k in range(13):
        buf.push_raw(np.full(4, k, np.float32), float(k), 0.0, np.zeros(4), False)
    b = buf.buffer.sample(64)
    ids = b["ids"]
    slots = (ids & np.uint64(MASK32)).astype(np.int64)
    assert set(slots.tolist()) == set(range(5))
    got = ps._ids_of_slots(slots, buf.buffer.added, 5, np)
    np.testing.assert_array_equal(got.astype(np.uint64), ids)
    assert np.array_equal(ids >> np.uint64(32), np.where(slots < 3, 3, 2))
    newest = {k % 5: k for k in range(13)}
    out = buf.sample(20)
    np.testing.assert_array_equal(_host(out[0])[:, 0], [newest[s] for s in out[5]])
    buf.update_priorities(np.arange(5), [1.0, 2.0, 3.0, 4.0, 5.0])
    np.testing.assert_array_equal(buf.buffer.priorities(), [1.0, 2.0, 3.0, 4.0, 5.0])
    idx = buf.sample(5)[5]
    for k in range(13, 16):  # overwrite slots 3, 4, 0
        buf.push_raw(np.full(4, k, np.float32), float(k), 0.0, np.zeros(4), False)
    buf.update_priorities(idx, np.full(5, 9.0))
    assert set(np.flatnonzero(buf.buffer.priorities() == 9.0)) == set(idx.tolist())


def test_buffer_bad_slots_refused():
    """A slot not filled (>= len), negative or past 2^32, or a float
    index, raises (ValueError, TypeError) and changes nothing, not even
    the batch's good slots."""
    buf = PrioritizedNStepReplayBuffer(capacity=8, seed=1)
    _raw(buf, 5, np.random.default_rng(0))
    before = buf.buffer.priorities()
    for bad in ([1, 5], [-1, 2], [2 ** 32 + 1, 0], [7]):
        with pytest.raises(ValueError, match="not a filled slot"):
            buf.update_priorities(np.array(bad), np.full(len(bad), 3.0))
        assert np.array_equal(buf.buffer.priorities(), before)
    with pytest.raises(TypeError, match="integers"):
        buf.update_priorities(np.array([1.0]), np.array([3.0]))
    with pytest.raises(per.Error) as e:
        buf.update_priorities(np.array([1, 2]), np.array([3.0, np.nan]))
    assert e.value.name == "PER_ERR_NAN"
    assert np.array_equal(buf.buffer.priorities(), before)


def test_buffer_push_nstep():
    """push through per.NStep (n 3, gamma 0.9): a 5-step episode ending in
    done gives 5 items, rewards summed with gamma over up to 3 steps
    (fewer at the end), the state 3 steps ahead (or the last), done set
    where the window reaches the episode's end; no item spans episodes:
    the next episode emits its first item at its third step."""
    buf = PrioritizedNStepReplayBuffer(capacity=50, n_steps=3, gamma=0.9, seed=1)
    S = np.arange(20, dtype=np.float32).reshape(10, 2)
    r = [1.0, 2.0, 4.0, 8.0, 16.0]
    sizes = []
    for t in range(5):
        buf.push(S[t], [float(t)], r[t], S[t + 1], t == 4)
        sizes.append(len(buf))
    assert sizes == [0, 0, 1, 2, 5]
    st = buf.buffer.storage
    want_r = [1 + 0.9 * 2 + 0.81 * 4, 2 + 0.9 * 4 + 0.81 * 8, 4 + 0.9 * 8 + 0.81 * 16,
              8 + 0.9 * 16, 16.0]
    np.testing.assert_allclose(st["reward"], want_r, rtol=1e-6)
    np.testing.assert_allclose(st["discount"], [0.729, 0.729, 0.729, 0.81, 0.9], rtol=1e-6)
    np.testing.assert_array_equal(st["done"], [0, 0, 1, 1, 1])
    np.testing.assert_array_equal(st["obs"], S[:5])
    np.testing.assert_array_equal(st["action"][:, 0], np.arange(5))
    np.testing.assert_array_equal(st["next_obs"], S[[3, 4, 5, 5, 5]])
    buf.push(S[6], [6.0], 100.0, S[7], False)
    buf.push(S[7], [7.0], 200.0, S[8], 0.0)
    assert len(buf) == 5
    buf.push(S[8], [8.0], 300.0, S[9], False)
    assert len(buf) == 6
    last = buf.buffer.storage[5]
    assert last["reward"] == pytest.approx(100 + 0.9 * 200 + 0.81 * 300, rel=1e-6)
    assert last["done"] == 0 and np.array_equal(last["next_obs"], S[9])
    # sample's dones and rewards are those items'
    out = buf.sample(12)
    st = buf.buffer.storage
    np.testing.assert_array_equal(_host(out[4]), st["done"][out[5]].astype(np.float32))
    np.testing.assert_array_equal(_host(out[2]), st["reward"][out[5]])


def test_buffer_bitwise_as_per(tmp_path):
    """A PrioritizedNStepReplayBuffer and a per.ReplayBuffer fed by
    per.NStep, made with the same config and seed and given the same
    pushes (n-step and raw) and updates: every sample's indices, weights
    and fields equal bit for bit, and the whole state after."""
    n, gamma = 3, 0.95
    cfg = dict(alpha=0.7, eps=1e-4, seed=42)
    mine = PrioritizedNStepReplayBuffer(capacity=16, n_steps=n, gamma=gamma,
                                        beta_start=0.3, beta_end=0.9,
                                        beta_anneal_steps=7, **cfg)
    adder = per.NStep(n, gamma, obs_shape=(4,), obs_dtype=np.float32,
                      action_shape=(2,), action_dtype=np.float32)
    ref = per.ReplayBuffer(16, adder.item_dtype, beta0=0.3, beta1=0.9, beta_steps=7,
                           **cfg)
    rng = np.random.default_rng(21)
    for step in range(40):
        for _ in range(int(rng.integers(1, 4))):
            s, s2 = rng.standard_normal((2, 4)).astype(np.float32)
            a = rng.standard_normal(2).astype(np.float32)
            r = float(np.float32(rng.standard_normal()))
            done = bool(rng.random() < 0.15)
            if step % 5 == 3:
                mine.push_raw(s, a, r, s2, done)
                ref.add(obs=s, action=a, reward=np.float32(r),
                        discount=np.float32(gamma ** n), done=int(done), next_obs=s2)
            else:
                mine.push(s, a, r, s2, done)
                adder.step(ref, s, a, r, s2, done)
        assert len(mine) == len(ref)
        if len(ref) == 0:
            continue
        assert mine.current_beta == ref.beta
        got, want = mine.sample(6), ref.sample(6)
        assert np.array_equal(got[5], (want["ids"] & np.uint64(MASK32)).astype(np.int64))
        assert _host(got[6]).tobytes() == want["weights"].tobytes()
        for x, name in zip(got[:4], ("obs", "action", "reward", "next_obs")):
            assert _host(x).tobytes() == np.ascontiguousarray(want[name]).tobytes(), name
        np.testing.assert_array_equal(_host(got[4]), want["done"].astype(np.float32))
        td = (rng.standard_normal(6) * 2).astype(np.float32)
        mine.update_priorities(got[5], td)
        assert ref.update(want["ids"], td) == 0
    assert np.array_equal(mine.buffer.priorities(), ref.priorities())
    mine.buffer.save(tmp_path / "mine.per")
    ref.save(tmp_path / "ref.per")
    assert (tmp_path / "mine.per").read_bytes() == (tmp_path / "ref.per").read_bytes()


# ---------------------------------------------------------------------------
# Seed 001: CpuSumTree (NumPy only)
# ---------------------------------------------------------------------------


def _dup_updates(rng, cap, n):
    """n (index, float32 priority) updates with duplicates, and the leaves
    they leave (the last of duplicates wins)."""
    idx = rng.integers(0, cap, n)
    p = rng.random(n).astype(np.float32)
    leaves = np.zeros(cap)
    for i, v in zip(idx.tolist(), p.tolist()):
        leaves[i] = v
    return idx, p, leaves


def _check_nodes(nodes, cap):
    """per's layout and its invariants, exactly: node 0 is 0, padding
    leaves are 0, node i == node 2i + node 2i+1 for every internal i."""
    L = nodes.shape[0] // 2
    assert L >= cap and L & (L - 1) == 0 and L < 2 * cap
    assert nodes[0] == 0.0 and np.all(nodes[L + cap:] == 0.0)
    i = np.arange(1, L)
    assert np.array_equal(nodes[i], nodes[2 * i] + nodes[2 * i + 1])


@pytest.mark.parametrize("dt", [None, np.float64])
def test_cpu_tree(dt):
    """CpuSumTree: per.SumTree's nodes under the same updates (duplicates:
    the last wins), float32 nodes as the seed's unless asked for float64,
    the node invariants for every internal node, the root the leaves'
    sum, sample(u) per.SumTree.find's leaves (per's descent: a leaf of
    priority 0 never comes out; u >= total gives the last leaf with mass);
    tree a copy; refused updates change nothing."""
    rng = np.random.default_rng(8)
    want = np.float32 if dt is None else dt
    for cap in (1000, 1024, 3):
        t = CpuSumTree(cap) if dt is None else CpuSumTree(cap, dtype=dt)
        idx, p, leaves = _dup_updates(rng, cap, 5 * cap)
        t.update(idx, p)
        ref = per.SumTree(cap, dtype=want)
        ref.set_batch(idx, p)
        nodes = t.tree
        assert nodes.dtype == want and nodes.shape == (2 * t.L,)
        assert np.array_equal(nodes, ref.nodes())
        assert np.array_equal(nodes[t.L:t.L + cap], leaves)
        _check_nodes(nodes, cap)
        # float32 sums of up to 1024 leaves in [0, 1): relative error
        # under 2^-24 per level, 11 levels
        assert t.total == nodes[1] == pytest.approx(
            math.fsum(leaves), rel=1e-5 if want == np.float32 else 1e-12)
        u = np.concatenate([rng.random(200) * t.total, [0.0, t.total, 2 * t.total]])
        got = t.sample(u)
        assert got.dtype == np.int64
        assert np.array_equal(got, [ref.find(float(x)) for x in u])
        assert np.all(leaves[got] > 0)
    t = CpuSumTree(3)
    assert t.L == 4
    t.update(np.array([0, 1, 2]), np.array([1.0, 0.0, 2.0], np.float32))
    assert t.sample(np.array([0.0, 0.5, 1.0, 2.9, 3.0, 50.0])).tolist() == [0, 0, 2, 2, 2, 2]
    t.tree[1] = 99.0  # a copy
    assert t.total == 3.0
    before = t.tree
    for i, v, name in ((3, 1.0, "PER_ERR_INDEX"), (0, np.nan, "PER_ERR_NAN"),
                       (1, -2.0, "PER_ERR_NEGATIVE")):
        fails(name, t.update, np.array([1, i]), np.array([5.0, v]))
        assert np.array_equal(t.tree, before)


# ---------------------------------------------------------------------------
# Seed 001 on the backends: GpuSumTree, GPUReplayPER
# ---------------------------------------------------------------------------


def _devices():
    out = []
    if pc.host.available() or os.environ.get("PER_NEED_CUDA_HOST") == "1":
        out.append("cpu")  # fails in the fixture when it is not there
    if (pc.available() and pc.device_count() > 0) or os.environ.get("PER_NEED_CUDA") == "1":
        out.append("cuda")
    return out or ["none"]


class _Dev:
    """A device the seed-001 classes take ("cpu": per.cuda.host, "cuda":
    per.cuda), and tensors on it."""

    def __init__(self, name, torch):
        self.name, self.torch = name, torch
        self.device = (torch.device("cpu") if name == "cpu" else
                       torch.device("cuda", torch.cuda.current_device()))

    def t(self, a):
        """A tensor on the device with a's values and dtype."""
        return self.torch.as_tensor(np.asarray(a), device=self.device)

    def races(self):
        return pc.host.module.shim_races() if self.name == "cpu" else 0


@pytest.fixture(params=_devices())
def D(request):
    name = request.param
    if name == "none":
        pytest.skip("neither per._cuda_host nor a GPU with per._cuda here")
    torch = _torch()
    if name == "cpu" and not pc.host.available():
        pytest.fail("PER_NEED_CUDA_HOST=1 but per._cuda_host is not installed")
    if name == "cuda" and not (pc.available() and pc.device_count() > 0
                               and torch.cuda.is_available()):
        pytest.fail("PER_NEED_CUDA=1 but per._cuda, a GPU or torch's CUDA is missing: "
                    + pc.unavailable_reason())
    dev = _Dev(name, torch)
    r0 = dev.races()
    yield dev
    assert dev.races() == r0, "the shim saw threads of a launch conflict"


@pytest.mark.parametrize("max_batch,dt", [(1024, None), (65536, None),
                                          (1024, np.float64)])
def test_gpu_tree_updates_as_per(D, max_batch, dt):
    """5000 random updates with duplicates on a 1024-leaf GpuSumTree (in
    5 batches with max_batch 1024): the root is the leaves' sum (the
    seed's test), and, stronger, every node is per.SumTree's of the same
    node type (float32 as the seed's, or float64 when asked) after
    set_batch of the same updates (last duplicate wins) bit for bit, so
    node i == node 2i + node 2i+1 for every internal i. leaf_values,
    leaf_priorities, total and total_priority read those nodes;
    update_coalesced is update."""
    torch = D.torch
    cap = 1024
    want = np.float32 if dt is None else dt
    kw = {} if dt is None else {"dtype": dt}
    # float32 sums of 1024 leaves in [0, 1): under 2^-24 per level, 11
    # levels; float64 the same in 2^-53
    rel = 1e-5 if want == np.float32 else 1e-12
    t = GpuSumTree(cap, D.name, max_batch=max_batch, **kw)
    assert (t.capacity, t.L, t.max_batch) == (cap, 1024, max_batch)
    assert t.tree.dtype == (torch.float32 if want == np.float32 else torch.float64)
    assert t.tree.shape == (2048,)
    assert t.tree.device.type == D.device.type
    idx, p, leaves = _dup_updates(np.random.default_rng(9), cap, 5000)
    t.update(D.t(idx), D.t(p))
    t.check()
    ref = per.SumTree(cap, dtype=want)
    ref.set_batch(idx, p)
    nodes = _host(t.tree)
    assert nodes.tobytes() == ref.nodes().tobytes()
    _check_nodes(nodes, cap)
    assert np.array_equal(_host(t.leaf_values()), leaves)
    total = float(t.total)
    assert total == float(t.total_priority()) == nodes[1]
    assert total == pytest.approx(math.fsum(leaves), rel=rel)
    assert float(t.leaf_values().sum()) == pytest.approx(total, rel=rel)
    some = np.array([0, 5, 1023, 5, 77])
    assert np.array_equal(_host(t.leaf_priorities(D.t(some))), leaves[some])
    c = GpuSumTree(cap, D.name, max_batch=max_batch, **kw)
    c.update_coalesced(D.t(idx), D.t(p))
    assert _host(c.tree).tobytes() == nodes.tobytes()
    # padding leaves of a capacity that is not a power of two stay 0
    odd = GpuSumTree(1000, D.name, max_batch=max_batch, **kw)
    i2, p2, _ = _dup_updates(np.random.default_rng(10), 1000, 3000)
    odd.update(D.t(i2), D.t(p2))
    ref2 = per.SumTree(1000, dtype=want)
    ref2.set_batch(i2, p2)
    assert _host(odd.tree).tobytes() == ref2.nodes().tobytes()
    _check_nodes(_host(odd.tree), 1000)


def test_gpu_tree_sample_as_per(D):
    """GpuSumTree.sample: per.SumTree.sample with per.Rng(seed)'s leaves,
    the draw counter going on from call to call; a batch larger than
    max_batch is drawn max_batch at a time (so it is per's draws of
    max_batch, max_batch, ... items). int64 on the tree's device; a leaf
    of priority 0 never comes out."""
    torch = D.torch
    cap = 300
    rng = np.random.default_rng(12)
    p = rng.random(cap) * (rng.random(cap) < 0.7)  # about 30% zeros
    t = GpuSumTree(cap, D.name, max_batch=64, seed=17)
    t.update(D.t(np.arange(cap)), D.t(p))
    ref = per.SumTree(cap, dtype=np.float32)  # the seed's node type
    ref.set_batch(np.arange(cap), p)
    r = per.Rng(17)
    for B in (50, 64, 1, 150, 64):
        got = t.sample(B)
        assert got.dtype == torch.int64 and got.shape == (B,)
        assert got.device.type == D.device.type
        parts = [ref.sample(min(64, B - a), r)[0] for a in range(0, B, 64)]
        want = np.concatenate(parts).astype(np.int64)
        assert np.array_equal(_host(got), want), B
        assert np.all(p[want] > 0)


def test_gpu_tree_sampling_distribution(D):
    """The seed's distribution test: priorities 1 .. 128, 200000 draws
    (4 batches of max_batch 65536 at most): the L1 distance of the
    histogram to p / sum is below the seed's 0.10, and each leaf's count
    is within 3 per batch of its expectation. That holds for every
    random draw (false-failure probability 0): a stratified batch of n
    draws has n strata of width total / n, each drawing once; leaf k's
    interval (n p_k strata long) meets at most ceil(n p_k) + 1 strata and
    holds at least floor(n p_k) - 1 whole ones, so its count is within 2
    of n p_k; the 3rd is slack for the rounding of u at the edges. (Hence
    L1 <= 128 * 12 / 200000 = 0.0077.)"""
    cap, N = 128, 200_000
    t = GpuSumTree(cap, D.name)
    p = np.arange(1.0, cap + 1)
    t.update(D.t(np.arange(cap)), D.t(p))
    got = _host(t.sample(N))
    assert got.min() >= 0 and got.max() < cap
    hist = np.bincount(got, minlength=cap)
    target = p / p.sum()
    assert np.abs(hist / N - target).sum() < 0.10
    batches = [min(t.max_batch, N - a) for a in range(0, N, t.max_batch)]
    assert len(batches) == 4
    assert np.all(np.abs(hist - N * target) <= 3 * len(batches))


def test_gpu_tree_refusals(D):
    """An all-zero tree: sample raises RuntimeError. An index out of range
    (capacity, -1, 2^32 + 3, which int32 would wrap to 3) or a NaN,
    infinite or negative priority: the whole update is refused, check()
    (and the next sample) raises per.Error, the tree is unchanged, and the
    error is cleared once reported. Mismatched lengths and float indices
    raise at the call."""
    t = GpuSumTree(16, D.name, max_batch=8)
    with pytest.raises(RuntimeError, match="total priority is 0"):
        t.sample(4)
    t.update(D.t(np.arange(16)), D.t(np.arange(1.0, 17.0)))
    t.check()
    before = _host(t.tree).tobytes()
    for idx, val, name in (([2, 16], [5.0, 5.0], "PER_ERR_INDEX"),
                           ([2, -1], [5.0, 5.0], "PER_ERR_INDEX"),
                           ([2, 2 ** 32 + 3], [5.0, 5.0], "PER_ERR_INDEX"),
                           ([2, 3], [5.0, float("nan")], "PER_ERR_NAN"),
                           ([2, 3], [5.0, float("inf")], "PER_ERR_INF"),
                           ([2, 3], [5.0, -1.0], "PER_ERR_NEGATIVE")):
        t.update(D.t(np.array(idx, np.int64)), D.t(np.array(val)))
        fails(name, t.check)
        assert _host(t.tree).tobytes() == before, (idx, val)
        t.check()  # reported once
        t.update(D.t(np.array(idx, np.int64)), D.t(np.array(val)))
        fails(name, t.sample, 4)
        assert _host(t.tree).tobytes() == before
    with pytest.raises(ValueError):
        t.update(D.t(np.array([1, 2])), D.t(np.array([1.0])))
    with pytest.raises(TypeError, match="integers"):
        t.update(D.t(np.array([1.5])), D.t(np.array([1.0])))
    with pytest.raises(TypeError, match="integers"):
        t.update(D.t(np.array([True])), D.t(np.array([1.0])))
    assert _host(t.tree).tobytes() == before
    t.update(D.t(np.array([3])), D.t(np.array([0.5])))
    t.check()
    assert _host(t.leaf_values())[3] == 0.5


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_cumsum_sampler(device):
    """GpuCumsumSampler (plain PyTorch): 50000 stratified draws (torch's
    generator, seeded) over 100 slots of priorities k mod 7: all in range,
    int64, never a slot of priority 0, each slot's count near N p_k.
    Tolerance 8 sqrt(N p_k) + 4 per slot: its count is a sum of N
    independent Bernoulli draws (one per stratum) of variance <= N p_k,
    so by Bernstein's inequality a correct sampler leaves the band with
    probability <= 2 exp(-t^2 / (2 (N p_k + t / 3))) < 1e-12 per slot
    (N p_k >= 169), < 1e-10 for the 85 slots with mass together."""
    torch = _torch()
    if device == "cuda" and not torch.cuda.is_available():
        if os.environ.get("PER_NEED_CUDA") == "1":
            pytest.fail("PER_NEED_CUDA=1 but torch has no CUDA device")
        pytest.skip("torch has no CUDA device")
    cap, N = 100, 50_000
    s = GpuCumsumSampler(cap, device)
    assert s.priorities.dtype == torch.float32 and s.priorities.shape == (cap,)
    p = (np.arange(cap) % 7).astype(np.float32)
    s.update(torch.arange(cap, device=device), torch.as_tensor(p, device=device))
    with torch.random.fork_rng(devices=[] if device == "cpu" else None):
        torch.manual_seed(1234)
        got = s.sample(N)
    assert got.dtype == torch.int64 and got.shape == (N,)
    got = _host(got)
    assert got.min() >= 0 and got.max() < cap
    hist = np.bincount(got, minlength=cap)
    assert np.all(hist[p == 0] == 0)
    expect = N * p / p.sum()
    assert np.all(np.abs(hist - expect) <= 8 * np.sqrt(expect) + 4)


def test_perbatch_fields():
    """PERBatch has the seed's fields in the seed's order."""
    assert [f.name for f in dataclasses.fields(PERBatch)] == [
        "obs", "act", "rew", "next_obs", "done", "weights", "indices"]


def test_gpu_replay_sample_shapes(D):
    """The seed's shapes test: capacity 1024, obs (4,), 200 adds, a batch
    of 64: shapes, dtypes (obs float32, act and indices int64, rew, done
    and weights float32), on the device, indices in [0, 1024) (in fact
    [0, 200)), weights in (0, 1] with max 1, and the rows those added."""
    torch = D.torch
    buf = GPUReplayPER(capacity=1024, obs_shape=(4,), device=D.name)
    g = torch.Generator().manual_seed(0)
    obs = torch.randn(200, 4, generator=g)
    nxt = torch.randn(200, 4, generator=g)
    for i in range(200):
        buf.add(obs[i], i % 2, 1.0, nxt[i], i % 10 == 9)
    assert len(buf) == 200
    b = buf.sample(batch_size=64, step=0)
    assert isinstance(b, PERBatch)
    for name, shape, dt in (("obs", (64, 4), torch.float32),
                            ("next_obs", (64, 4), torch.float32),
                            ("act", (64,), torch.int64), ("rew", (64,), torch.float32),
                            ("done", (64,), torch.float32),
                            ("weights", (64,), torch.float32),
                            ("indices", (64,), torch.int64)):
        x = getattr(b, name)
        assert x.shape == shape and x.dtype == dt, name
        assert x.device.type == D.device.type, name
    idx = _host(b.indices)
    assert idx.min() >= 0 and idx.max() < 200
    w = _host(b.weights)
    assert w.min() > 0.0 and w.max() == 1.0
    assert np.array_equal(_host(b.obs), obs.numpy()[idx])
    assert np.array_equal(_host(b.next_obs), nxt.numpy()[idx])
    assert np.array_equal(_host(b.act), idx % 2)
    assert np.array_equal(_host(b.rew), np.ones(64, np.float32))
    assert np.array_equal(_host(b.done), (idx % 10 == 9).astype(np.float32))


def test_gpu_replay_update_priorities(D):
    """The seed's update test, checked: after update_priorities with a
    batch's indices and random TD errors, the buffer's leaves are
    (|td| + eps)^alpha (float32 TD errors, the last of duplicates wins)
    and the others still 1.0; an update longer than max_batch goes in
    order, so the last duplicate wins across its chunks too; new items
    get the largest priority ever written."""
    torch = D.torch
    alpha, eps = 0.6, 1e-6
    buf = GPUReplayPER(capacity=256, obs_shape=(4,), device=D.name, max_batch=32)
    for _ in range(100):
        buf.add(torch.zeros(4), 0, 0.0, torch.zeros(4), False)
    b = buf.sample(batch_size=32, step=10)
    td = torch.randn(32, generator=torch.Generator().manual_seed(4))
    buf.update_priorities(b.indices, td.to(D.device))
    buf.check()
    pr = buf.buffer.to_cpu().priorities()
    # float leaves (the seed's node type): per.h's priority in double,
    # rounded to float once
    want = np.zeros(256, np.float32)
    want[:100] = 1.0
    for s, x in zip(_host(b.indices).tolist(), td.numpy().tolist()):
        want[s] = _leaf(x, alpha, eps)
    np.testing.assert_allclose(pr, want, rtol=1e-15, atol=0)
    top = want.max()  # the largest leaf ever written
    # 80 updates (3 chunks of max_batch 32), duplicates across chunks
    rng = np.random.default_rng(5)
    slots = rng.integers(0, 100, 80)
    td2 = rng.standard_normal(80).astype(np.float32)
    buf.update_priorities(D.t(slots), D.t(td2))
    buf.check()
    for s, x in zip(slots.tolist(), td2.tolist()):
        want[s] = _leaf(x, alpha, eps)
    np.testing.assert_allclose(buf.buffer.to_cpu().priorities(), want, rtol=1e-15, atol=0)
    top = max(top, want.max())
    buf.add(torch.zeros(4), 0, 0.0, torch.zeros(4), False)  # slot 100
    buf.sample(4, step=0)
    assert buf.buffer.to_cpu().priorities()[100] == top


def test_gpu_replay_float_indices_refused(D):
    """Float indices are refused (TypeError) with nothing written, as
    PrioritizedNStepReplayBuffer.update_priorities and GpuSumTree.update
    refuse them, instead of being truncated to another slot."""
    buf = GPUReplayPER(8, (2,), D.name, max_batch=8)
    for _ in range(5):
        buf.add(np.zeros(2), 0, 0.0, np.zeros(2), False)
    buf.sample(2, step=0)
    with pytest.raises(TypeError):
        buf.update_priorities(D.t(np.array([2.7])), D.t(np.array([3.0], np.float32)))
    with pytest.raises(TypeError):
        buf.update_priorities(D.t(np.array([True])), D.t(np.array([3.0], np.float32)))
    buf.check()
    assert np.array_equal(buf.buffer.to_cpu().priorities(), [1.0] * 5 + [0.0] * 3)


def _item_dtype(shape, obs_dtype=np.float32):
    return np.dtype([("obs", obs_dtype, shape), ("act", np.int64), ("rew", np.float32),
                     ("next_obs", obs_dtype, shape), ("done", np.float32)], align=True)


def test_gpu_replay_beta_schedule_bitwise(D, tmp_path):
    """sample(batch_size, step, beta_steps) uses the seed's schedule,
    beta0 + (1 - beta0) min(1, step / beta_steps) with beta_steps
    defaulting to beta_anneal_steps: its draws, weights and rows are
    those of a per.ReplayBuffer given the same adds (in the same batches:
    max_batch at a time and the rest at sample) and sample(beta=...), bit
    for bit, and so is the whole state after the same updates."""
    torch = D.torch
    kw = dict(alpha=0.7, beta0=0.3, eps=1e-6)
    buf = GPUReplayPER(64, (3,), D.name, beta_anneal_steps=1000, max_batch=16,
                       seed=9, **kw)
    dt = _item_dtype((3,))
    assert buf.buffer.dtype == dt
    assert buf.buffer.nodes == np.float32  # the seed's node type
    ref = per.ReplayBuffer(64, dt, align=True, beta1=1.0, beta_steps=1000, seed=9,
                           nodes=np.float32, **kw)
    rng = np.random.default_rng(13)

    def items(n):
        it = np.zeros(n, dt)
        it["obs"] = rng.standard_normal((n, 3))
        it["next_obs"] = rng.standard_normal((n, 3))
        it["act"] = rng.integers(0, 5, n)
        it["rew"] = rng.standard_normal(n)
        it["done"] = rng.random(n) < 0.1
        return it

    def add(it):
        for r in it:
            buf.add(torch.from_numpy(r["obs"].copy()), int(r["act"]), float(r["rew"]),
                    r["next_obs"], float(r["done"]))

    first = items(40)
    add(first)
    for a in (0, 16, 32):  # flushed at 16 and 32 adds, the rest at sample
        ref.add_batch(first[a:a + 16])
    schedule = [(0, None), (250, None), (500, None), (999, None), (1000, None),
                (5000, None), (50, 100), (100, 100), (7, 10)]
    for k, (step, steps) in enumerate(schedule):
        beta = buf.beta(step, steps)
        want_beta = 0.3 + 0.7 * min(1.0, step / (steps or 1000))
        assert beta == pytest.approx(want_beta, abs=1e-15)
        got = buf.sample(16, step) if steps is None else buf.sample(16, step, steps)
        want = ref.sample(16, beta=beta)
        assert np.array_equal(_host(got.indices),
                              (want["ids"] & np.uint64(MASK32)).astype(np.int64))
        assert _host(got.weights).tobytes() == want["weights"].tobytes()
        for f in ("obs", "act", "rew", "next_obs", "done"):
            assert _host(getattr(got, f)).tobytes() == np.ascontiguousarray(
                want[f]).tobytes(), f
        if beta == 1.0:
            p = ref.priorities()[_host(got.indices)]
            np.testing.assert_allclose(_host(got.weights), p.min() / p, rtol=2.5e-7)
        td = rng.standard_normal(16).astype(np.float32)
        buf.update_priorities(got.indices, D.t(td))
        assert ref.update(want["ids"], td) == 0
        if k == 3:  # more adds, staged until the next sample
            more = items(5)
            add(more)
            ref.add_batch(more)
    buf.check()
    buf.buffer.to_cpu().save(tmp_path / "dev.per")
    ref.save(tmp_path / "ref.per")
    assert (tmp_path / "dev.per").read_bytes() == (tmp_path / "ref.per").read_bytes()


def test_gpu_replay_staged_adds_and_ring(D):
    """Adds are gathered on the host and written max_batch at a time and
    at sample: len (and pos) count the staged ones, the buffer only the
    written ones. Capacity 8, max_batch 8, 30 adds: sample's rows are the
    newest item of each slot, update_priorities reaches those items, and
    an update after 8 more adds (one written batch) reaches the slots'
    new items (the seed's behaviour)."""
    torch = D.torch
    alpha, eps = 0.6, 1e-6
    buf = GPUReplayPER(8, (2,), D.name, max_batch=8)
    assert len(buf) == 0 and buf.pos == 0
    for k in range(3):
        buf.add(np.array([k, k + 0.5], np.float32), k, float(k), np.zeros(2), False)
    assert len(buf) == 3 and buf.pos == 3 and len(buf.buffer) == 0
    for k in range(3, 30):
        buf.add(np.array([k, k + 0.5], np.float32), k, float(k), np.zeros(2), k % 5 == 4)
    assert len(buf) == 8 and buf.pos == 30 % 8
    assert buf.buffer.counters()["added"] == 24  # 3 batches of 8 written, 6 staged
    b = buf.sample(8, step=0)
    assert buf.buffer.counters()["added"] == 30
    newest = {k % 8: k for k in range(30)}
    idx = _host(b.indices)
    items = np.array([newest[s] for s in idx])
    assert np.array_equal(_host(b.obs)[:, 0], items.astype(np.float32))
    assert np.array_equal(_host(b.act), items)
    assert np.array_equal(_host(b.rew), items.astype(np.float32))
    assert np.array_equal(_host(b.done), (items % 5 == 4).astype(np.float32))
    td = np.arange(1.0, 9.0, dtype=np.float32)
    buf.update_priorities(D.t(np.arange(8)), D.t(td))
    buf.check()
    # float leaves (the seed's node type): rounded to float once
    want = np.array([_leaf(x, alpha, eps) for x in td], np.float32)
    np.testing.assert_allclose(buf.buffer.to_cpu().priorities(), want, rtol=1e-15, atol=0)
    b = buf.sample(4, step=0)
    for k in range(30, 38):  # 8 more: one written batch, every slot anew
        buf.add(np.array([k, k], np.float32), k, 0.0, np.zeros(2), False)
    assert buf.buffer.counters()["added"] == 38
    buf.update_priorities(b.indices, torch.full((4,), 0.25, device=D.device))
    buf.check()
    pr = buf.buffer.to_cpu().priorities()
    drawn = set(_host(b.indices).tolist())
    assert set(np.flatnonzero(pr == _leaf(0.25, alpha, eps)).tolist()) == drawn


def test_gpu_replay_refusals(D):
    """A NaN or infinite TD error, or a slot never filled (past len,
    negative, or 2^32 + 3), is refused as a whole: check() (and the next
    sample) raises per.Error, and the priorities are unchanged.
    Mismatched lengths raise ValueError at the call; an empty buffer's
    sample raises RuntimeError."""
    empty = GPUReplayPER(8, (2,), D.name)
    with pytest.raises(RuntimeError, match="empty"):
        empty.sample(4, step=0)
    buf = GPUReplayPER(8, (2,), D.name, max_batch=8)
    for k in range(5):
        buf.add(np.full(2, k, np.float32), k, 0.0, np.zeros(2), False)
    buf.sample(4, step=0)
    before = buf.buffer.to_cpu().priorities()
    for slots, td, name in (([1, 2], [1.0, np.nan], "PER_ERR_NAN"),
                            ([1, 2], [np.inf, 1.0], "PER_ERR_INF"),
                            ([1, 5], [1.0, 1.0], "PER_ERR_INDEX"),
                            ([1, -1], [1.0, 1.0], "PER_ERR_INDEX"),
                            ([1, 2 ** 32 + 3], [1.0, 1.0], "PER_ERR_INDEX")):
        args = (D.t(np.array(slots, np.int64)), D.t(np.array(td, np.float32)))
        buf.update_priorities(*args)
        fails(name, buf.check)
        assert np.array_equal(buf.buffer.to_cpu().priorities(), before), slots
        buf.check()
        buf.update_priorities(*args)
        fails(name, buf.sample, 4, 0)
    with pytest.raises(ValueError):
        buf.update_priorities(D.t(np.array([1, 2])), D.t(np.array([1.0], np.float32)))
    assert np.array_equal(buf.buffer.to_cpu().priorities(), before)


def test_gpu_replay_uint8_obs(D):
    """dtype_obs=torch.uint8: observations stored and drawn as uint8, all
    256 values kept, from NumPy arrays and tensors alike."""
    torch = D.torch
    buf = GPUReplayPER(16, (3,), D.name, dtype_obs=torch.uint8, max_batch=8)
    assert buf.buffer.dtype == _item_dtype((3,), np.uint8)
    vals = np.array([[0, 1, 2], [127, 128, 255], [7, 200, 13]], np.uint8)
    for k, v in enumerate(vals):
        o = v if k % 2 else torch.from_numpy(v)
        buf.add(o, k, 0.0, torch.from_numpy(255 - v), k == 2)
    b = buf.sample(8, step=3)
    assert b.obs.dtype == torch.uint8 and b.next_obs.dtype == torch.uint8
    idx = _host(b.indices)
    assert np.array_equal(_host(b.obs), vals[idx])
    assert np.array_equal(_host(b.next_obs), 255 - vals[idx])
