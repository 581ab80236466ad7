"""per.cuda against per.ReplayBuffer and per.SumTree: the same calls give
the same bits (draws, weights, items, stale counts, checkpoints), on the
host backend (per._cuda_host: the kernels on the CPU under the test shim,
every launch checked by its race detector) and, where a GPU and per._cuda
are present, on the device.

tools/pytest.sh builds per._cuda_host and sets PER_NEED_CUDA_HOST=1, so
there a missing host backend fails instead of skipping; tools/gpu-check.sh
sets PER_NEED_CUDA=1 for the GPU backend likewise. Deterministic: every
random sequence has a fixed seed, nothing here is statistical."""
import functools
import os
import sys
import types

import numpy as np
import pytest

import per
import per.cuda as pc


def _backends():
    out = []
    if pc.host.available():
        out.append("host")
    elif os.environ.get("PER_NEED_CUDA_HOST") == "1":
        out.append("host")  # fails in the fixture: it must be there
    if pc.available() and pc.device_count() > 0:
        out.append("cuda")
    elif os.environ.get("PER_NEED_CUDA") == "1":
        out.append("cuda")
    return out or ["none"]


def needs_stream():
    """Whether a GPU call must name its stream: neither PyTorch nor CuPy
    imports, so no current stream to take (test_cuda_f32.py's too)."""
    for lib in ("torch", "cupy"):
        try:
            __import__(lib)
            return False
        except ImportError:
            pass
    return True


class _NS:
    """The backend's classes and its array moves."""

    def __init__(self, name):
        self.name = name
        if name == "host":
            ns = pc.host
            self.ReplayBuffer, self.SumTree = ns.ReplayBuffer, ns.SumTree
            self.dev, self.host = ns.to_device, ns.to_host
        else:
            self.ReplayBuffer, self.SumTree = pc.ReplayBuffer, pc.SumTree
            self.dev, self.host = pc.to_device, pc.to_host
            # a GPU call needs its stream named: PyTorch's current one
            # (CuPy's without it), else the legacy default stream, asked
            # for by every call
            if needs_stream():
                for name in ("ReplayBuffer", "SumTree", "dev", "host"):
                    setattr(self, name,
                            functools.partial(getattr(self, name), stream=1))

    def races(self):
        return pc.host.module.shim_races() if self.name == "host" else 0


@pytest.fixture(params=_backends())
def B(request):
    name = request.param
    if name == "none":
        pytest.skip("neither per._cuda_host nor a GPU with per._cuda here")
    if name == "host" and not pc.host.available():
        pytest.fail("PER_NEED_CUDA_HOST=1 but per._cuda_host is not installed")
    if name == "cuda" and not (pc.available() and pc.device_count() > 0):
        pytest.fail("PER_NEED_CUDA=1 but per._cuda or a GPU is missing: "
                    + pc.unavailable_reason())
    ns = _NS(name)
    r0 = ns.races()
    yield ns
    assert ns.races() == r0, "the shim saw threads of a launch conflict"


SPEC = {"obs": (np.float32, (3,)), "act": np.int64, "rew": np.float32,
        "done": np.bool_}


def _items(rng, n):
    return {"obs": rng.standard_normal((n, 3)).astype(np.float32),
            "act": rng.integers(0, 7, n).astype(np.int64),
            "rew": rng.standard_normal(n).astype(np.float32),
            "done": rng.random(n) < 0.2}


def _same_state(tmp_path, cpu, dev, tag):
    a, b = tmp_path / f"{tag}-cpu.per", tmp_path / f"{tag}-dev.per"
    cpu.save(a)
    dev.to_cpu().save(b)
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("alpha", [0.6, 0.0, 1.0])
def test_random_calls_bitwise(B, tmp_path, align, alpha):
    """Random add_batch / sample / update sequences, with episode ends,
    fixed betas, windows, distinct draws, duplicates and stale ids: every
    draw, weight, field and stale count equal, and the whole state
    after."""
    rng = np.random.default_rng(11 + int(align) + int(alpha * 10))
    kw = dict(alpha=alpha, beta_steps=50, seed=5, align=align)
    cpu = per.ReplayBuffer(40, SPEC, **kw)
    dev = B.ReplayBuffer(40, SPEC, max_batch=64, **kw)
    random_calls(B, rng, cpu, dev, tmp_path)


def random_calls(B, rng, cpu, dev, tmp_path):
    """test_random_calls_bitwise's calls on a CPU buffer and a device one
    made alike (test_cuda_f32.py's with float nodes too)."""
    for step in range(40):
        n = int(rng.integers(0, 25))
        it = _items(rng, n)
        ends = rng.choice([per.END_NONE, per.END_TERMINATED, per.END_TRUNCATED],
                          n, p=[0.8, 0.1, 0.1]).astype(np.uint8)
        cpu.add_batch(ends=ends, **it)
        dev.add_batch(ends=B.dev(ends), **{k: B.dev(v) for k, v in it.items()})
        if len(cpu) == 0:
            continue
        bs = int(rng.integers(1, 33))
        opts = {}
        if step % 3 == 1:
            opts["beta"] = float(rng.random())
        if step % 4 == 2:
            opts["window"] = int(rng.integers(1, 40))
        if step % 6 == 5:  # never with a window (step even there)
            opts["unique"] = True
            bs = min(bs, len(cpu))
        ref = cpu.sample(bs, **opts)
        got = dev.sample(bs, **opts)
        ids = B.host(got["ids"]).view(np.uint64)
        np.testing.assert_array_equal(ids, ref["ids"])
        assert B.host(got["weights"]).tobytes() == ref["weights"].tobytes()
        for name in SPEC:
            assert B.host(got[name]).tobytes() == np.ascontiguousarray(
                ref[name]).tobytes(), name
        # update some of them, duplicates included, after more adds
        k = int(rng.integers(0, bs + 1))
        pick = rng.integers(0, bs, k)
        uids = ids[pick]
        td = (rng.standard_normal(k) * 3).astype(np.float32)
        if step % 5 == 4:  # these go stale
            more = _items(rng, 30)
            cpu.add_batch(**more)
            dev.add_batch(**{k2: B.dev(v) for k2, v in more.items()})
        stale = dev.update(B.dev(uids.view(np.int64)), B.dev(td))
        assert int(B.host(stale)) == cpu.update(uids, td)
        dev.status()
        c = dev.counters()
        assert len(dev) == len(cpu) == c["size"]
        want = cpu.counters
        assert all(c[k] == want[k] for k in c), (c, want)
    _same_state(tmp_path, cpu, dev, "end")


def test_device_errors_change_nothing(B, tmp_path):
    """A NaN TD error, a bad end and an empty sample are reported by
    status() as the CPU reports them, and leave the state as it was."""
    cpu = per.ReplayBuffer(16, SPEC, seed=1)
    dev = B.ReplayBuffer(16, SPEC, max_batch=8, seed=1)
    dev.sample(4)
    with pytest.raises(per.Error) as e:
        dev.status()
    assert e.value.name == "PER_ERR_EMPTY" and "sample" in str(e.value)
    dev.status()  # cleared
    rng = np.random.default_rng(3)
    it = _items(rng, 6)
    cpu.add_batch(**it)
    dev.add_batch(**{k: B.dev(v) for k, v in it.items()})
    bad_ends = np.array([0, 0, 9], np.uint8)
    dev.add_batch(ends=B.dev(bad_ends), **{k: B.dev(v[:3]) for k, v in it.items()})
    ref, got = cpu.sample(4), dev.sample(4)
    ids = B.host(got["ids"]).view(np.uint64)
    np.testing.assert_array_equal(ids, ref["ids"])
    td = np.array([1, 2, np.nan, 4], np.float32)
    dev.update(B.dev(ids.view(np.int64)), B.dev(td))
    with pytest.raises(per.Error) as e:
        cpu.update(ids, td)
    assert e.value.name == "PER_ERR_NAN"
    # the first error since the last check: the bad end
    with pytest.raises(per.Error) as e:
        dev.status()
    assert e.value.name == "PER_ERR_ARG" and "add_batch" in str(e.value)
    assert "position 2" in str(e.value)
    dev.update(B.dev(ids.view(np.int64)), B.dev(td))
    with pytest.raises(per.Error) as e:
        dev.status(clear=False)
    assert e.value.name == "PER_ERR_NAN" and "update" in str(e.value)
    assert "position 2" in str(e.value)
    with pytest.raises(per.Error):  # kept: clear=False
        dev.status()
    dev.status()
    _same_state(tmp_path, cpu, dev, "after")


def test_unique(B, tmp_path):
    """Distinct draws: as per.ReplayBuffer's (alpha 0 too, whose swap
    permutation the device keeps), batch_size > max_unique refused on the
    host, too few items a device error that changes nothing."""
    rng = np.random.default_rng(8)
    for alpha in (0.6, 0.0):
        kw = dict(alpha=alpha, seed=4, max_unique=12)
        cpu = per.ReplayBuffer(30, SPEC, **kw)
        dev = B.ReplayBuffer(30, SPEC, max_batch=16, **kw)
        assert dev.max_unique == 12
        it = _items(rng, 10)
        cpu.add_batch(**it)
        dev.add_batch(**{k: B.dev(v) for k, v in it.items()})
        with pytest.raises(ValueError, match="max_unique 12"):
            dev.sample(13, unique=True)
        dev.sample(11, unique=True)
        with pytest.raises(per.Error) as e:
            dev.status()
        assert e.value.name == "PER_ERR_TOO_FEW" and "sample" in str(e.value)
        with pytest.raises(per.Error) as e:
            cpu.sample(11, unique=True)
        assert e.value.name == "PER_ERR_TOO_FEW"
        for bs in (10, 3, 7):
            ref, got = cpu.sample(bs, unique=True), dev.sample(bs, unique=True)
            ids = B.host(got["ids"]).view(np.uint64)
            np.testing.assert_array_equal(ids, ref["ids"])
            assert len(set(ids.tolist())) == bs
            assert B.host(got["weights"]).tobytes() == ref["weights"].tobytes()
        dev.status()
        _same_state(tmp_path, cpu, dev, f"unique-{alpha}")


@pytest.mark.parametrize("cross", [False, True])
def test_sequences(B, tmp_path, cross):
    """Sequence replay (R2D2) on the device: sequences samples (fields of
    shape (batch_size, seq_len), sequence ids, weights, masks), item and
    sequence updates, episode ends, windows, distinct draws, stale ids and
    an upload, as per.ReplayBuffer's, and the whole state after."""
    rng = np.random.default_rng(31 + int(cross))
    L, S = 6, 3
    kw = dict(alpha=0.7, beta_steps=30, seed=9, seq_len=L, seq_stride=S,
              seq_eta=0.8, cross_episodes=cross, weights_buffer_max=cross,
              max_unique=8)
    cpu = per.ReplayBuffer(48, SPEC, **kw)
    dev = B.ReplayBuffer(48, SPEC, max_batch=16, **kw)
    assert dev.seq_len == L
    dev.sample(2, sequences=True)  # nothing stored yet
    with pytest.raises(per.Error, match="PER_ERR_EMPTY"):
        dev.status()
    drawn = 0
    for step in range(30):
        n = int(rng.integers(0, 12))
        it = _items(rng, n)
        ends = rng.choice([per.END_NONE, per.END_TERMINATED], n,
                          p=[0.9, 0.1]).astype(np.uint8)
        cpu.add_batch(ends=ends, **it)
        dev.add_batch(ends=B.dev(ends), **{k: B.dev(v) for k, v in it.items()})
        bs = int(rng.integers(1, 9))
        opts = {}
        if step % 4 == 1:
            opts["window"] = int(rng.integers(1, 48))
        if step % 5 == 3:
            opts["unique"] = True
        try:
            ref = cpu.sample(bs, sequences=True, **opts)
        except per.Error as e:  # no complete sequence yet, too few
            dev.sample(bs, sequences=True, **opts)
            with pytest.raises(per.Error) as got_e:
                dev.status()
            assert got_e.value.name == e.name
            continue
        got = dev.sample(bs, sequences=True, **opts)
        ids = B.host(got["ids"]).view(np.uint64)
        np.testing.assert_array_equal(ids, ref["ids"])
        assert B.host(got["weights"]).tobytes() == ref["weights"].tobytes()
        np.testing.assert_array_equal(B.host(got["mask"]), ref["mask"])
        for name in SPEC:
            g = B.host(got[name])
            assert g.shape == ref[name].shape, name
            assert g.tobytes() == np.ascontiguousarray(ref[name]).tobytes(), name
        drawn += bs
        td = (rng.standard_normal((bs, L)) * 2).astype(np.float32)
        if step % 3 == 2:  # an item update of some of the steps
            slots = (ids & 0x7FFFFFFF).astype(np.int64)
            gens = ids >> np.uint64(32)
            uids = (slots.astype(np.uint64) | (gens << np.uint64(32)))
            stale = dev.update(B.dev(uids.view(np.int64)), B.dev(td[:, 0].copy()))
            assert int(B.host(stale)) == cpu.update(uids, td[:, 0])
        else:
            stale = dev.update_sequences(B.dev(ids.view(np.int64)), B.dev(td))
            assert int(B.host(stale)) == cpu.update_sequences(ids, td)
        dev.status()
    assert drawn > 60
    _same_state(tmp_path, cpu, dev, f"seq-{cross}")
    # a bad TD error: refused whole, with the sequence's position
    ref = cpu.sample(4, sequences=True)
    got = dev.sample(4, sequences=True)
    td = np.ones((4, L), np.float32)
    td[2, 1] = np.nan
    dev.update_sequences(B.dev(B.host(got["ids"]).view(np.int64)), B.dev(td))
    with pytest.raises(per.Error) as e:
        dev.status()
    assert e.value.name == "PER_ERR_NAN" and "position 2" in str(e.value)
    with pytest.raises(per.Error, match="PER_ERR_NAN"):
        cpu.update_sequences(ref["ids"], td)
    _same_state(tmp_path, cpu, dev, f"seq-refused-{cross}")
    # the CPU state uploaded into a fresh device buffer goes on the same
    other = B.ReplayBuffer(48, SPEC, max_batch=16, **kw)
    other.from_cpu(cpu)
    ref, got = cpu.sample(5, sequences=True), other.sample(5, sequences=True)
    np.testing.assert_array_equal(B.host(got["ids"]).view(np.uint64), ref["ids"])
    _same_state(tmp_path, cpu, other, f"seq-upload-{cross}")


def test_argument_errors(B):
    """What the host can see is refused at once, naming the field."""
    dev = B.ReplayBuffer(16, SPEC, max_batch=8)
    rng = np.random.default_rng(4)
    it = {k: B.dev(v) for k, v in _items(rng, 4).items()}
    bad = dict(it, act=B.dev(np.zeros(4, np.int32)))
    with pytest.raises(TypeError, match="'act' is int32, the item stores int64"):
        dev.add_batch(**bad)
    bad = dict(it, obs=B.dev(np.zeros((4, 2), np.float32)))
    with pytest.raises(ValueError, match=r"'obs' has shape \(4, 2\)"):
        dev.add_batch(**bad)
    bad = dict(it, rew=B.dev(np.zeros(3, np.float32)))
    with pytest.raises(ValueError, match="'rew' has shape"):
        dev.add_batch(**bad)
    with pytest.raises(ValueError, match="missing \\['done'\\]"):
        dev.add_batch(**{k: v for k, v in it.items() if k != "done"})
    big = {k: B.dev(v) for k, v in _items(rng, 9).items()}
    with pytest.raises(ValueError, match="more than max_batch 8"):
        dev.add_batch(**big)
    with pytest.raises(ValueError, match="batch_size must be in"):
        dev.sample(9)
    with pytest.raises(ValueError, match="batch_size must be in"):
        dev.sample(0)
    with pytest.raises(TypeError, match="ids"):
        dev.update(np.zeros(2, np.int64) if B.name == "cuda" else [1, 2],
                   B.dev(np.zeros(2, np.float32)))
    with pytest.raises(TypeError, match="td is float64"):
        dev.update(B.dev(np.zeros(2, np.int64)), B.dev(np.zeros(2)))
    with pytest.raises(ValueError, match="live_max is not on the device"):
        B.ReplayBuffer(16, SPEC, live_max=True)
    with pytest.raises(ValueError, match="max_batch \\* seq_len"):
        B.ReplayBuffer(16, SPEC, seq_len=4, seq_stride=4,
                       max_batch=0x400000 // 4 + 1)  # PER_CUDA_MAX_BATCH
    with pytest.raises(per.Error, match="seq_stride"):
        B.ReplayBuffer(16, SPEC, seq_len=4, seq_stride=3)
    with pytest.raises(ValueError, match="sequences needs a buffer made with"):
        dev.sample(2, sequences=True)
    with pytest.raises(ValueError, match="seq_len > 0 only"):
        dev.update_sequences(B.dev(np.zeros(2, np.int64)),
                             B.dev(np.zeros((2, 1), np.float32)))
    with pytest.raises(ValueError, match="max_batch"):
        B.ReplayBuffer(16, SPEC, max_batch=0)
    with pytest.raises(per.Error, match="PER_ERR_CAPACITY"):
        B.ReplayBuffer(0, SPEC)
    if B.name == "host":
        # host memory that is not the backend's "device memory"
        with pytest.raises(ValueError, match="to_device"):
            dev.add_batch(**dict(it, rew=np.zeros(4, np.float32)))
    # a refused call enqueued nothing
    dev.sample(2)
    with pytest.raises(per.Error, match="PER_ERR_EMPTY"):
        dev.status()


def test_strided_rows_and_whole_items(B, tmp_path):
    """Fields may be strided along the batch (rows contiguous); whole
    items may come as a (n, item_size) uint8 array."""
    rng = np.random.default_rng(5)
    cpu = per.ReplayBuffer(32, SPEC, seed=2, align=True)
    dev = B.ReplayBuffer(32, SPEC, max_batch=16, seed=2, align=True)
    it = _items(rng, 10)
    wide = np.zeros((10, 5), np.float32)
    wide[:, 1:4] = it["obs"]
    d_wide = B.dev(wide)
    # a strided view of device memory: rows 1:4 of each 5-wide row
    arr = pc.host.module if B.name == "host" else pc._module()
    b = pc._Backend(arr, "t")
    info = b.array(d_wide, "wide", 0 if B.name == "host" else dev.device, 0)
    strided = b.view(d_wide, info.ptr + 4, dev.device, np.dtype("<f4"), (10, 3), (5, 1))
    cpu.add_batch(**it)
    dev.add_batch(**dict({k: B.dev(v) for k, v in it.items()}, obs=strided))
    rec = np.zeros(6, cpu.dtype)
    rec["obs"] = rng.standard_normal((6, 3))
    rec["act"] = np.arange(6)
    cpu.add_batch(rec)
    dev.add_batch(B.dev(rec.view(np.uint8).reshape(6, cpu.dtype.itemsize)))
    _same_state(tmp_path, cpu, dev, "s")


def from_cpu_then_alike(B, rng, cpu, dev, tmp_path):
    """test_from_cpu_then_alike's calls: cpu filled and updated, its state
    taken by dev (from_cpu), then the same adds, samples (ids and weights
    equal) and updates on both, and their states equal after
    (test_cuda_f32.py's with float nodes too)."""
    for _ in range(5):
        cpu.add_batch(**_items(rng, 13))
        got = cpu.sample(8)
        cpu.update(got["ids"], rng.random(8).astype(np.float32))
    dev.from_cpu(cpu)
    _same_state(tmp_path, cpu, dev, "up")
    for _ in range(5):
        it = _items(rng, 7)
        cpu.add_batch(**it)
        dev.add_batch(**{k: B.dev(v) for k, v in it.items()})
        ref, got = cpu.sample(16), dev.sample(16)
        ids = B.host(got["ids"]).view(np.uint64)
        np.testing.assert_array_equal(ids, ref["ids"])
        assert B.host(got["weights"]).tobytes() == ref["weights"].tobytes()
        td = rng.standard_normal(16).astype(np.float32)
        cpu.update(ids, td)
        dev.update(B.dev(ids.view(np.int64)), B.dev(td))
    dev.status()
    _same_state(tmp_path, cpu, dev, "later")


def test_from_cpu_then_alike(B, tmp_path):
    """from_cpu takes a CPU buffer's whole state; the two go on alike."""
    rng = np.random.default_rng(6)
    cpu = per.ReplayBuffer(50, SPEC, seed=9, alpha=0.7)
    dev = B.ReplayBuffer(50, SPEC, max_batch=32, seed=0, alpha=0.1)
    from_cpu_then_alike(B, rng, cpu, dev, tmp_path)
    other = per.ReplayBuffer(50, {"x": np.float32})
    with pytest.raises(ValueError, match="items are"):
        dev.from_cpu(other)
    # a loaded copy: the round trip through a checkpoint
    path = tmp_path / "ck.per"
    dev.to_cpu().save(path)
    back = per.ReplayBuffer.from_file(path, SPEC)
    dev2 = B.ReplayBuffer(50, SPEC, max_batch=32)
    dev2.from_cpu(back)
    _same_state(tmp_path, cpu, dev2, "ckpt")


def _descend(nodes, L, u):
    """per.h's per_tree_descend, step for step, in doubles."""
    k = 1
    while k < L:
        left = nodes[2 * k]
        if left > 0 and (u < left or not nodes[2 * k + 1] > 0):
            k = 2 * k
        else:
            u -= left
            k = 2 * k + 1
    return k - L


def test_sum_tree(B):
    """per.cuda.SumTree against per.SumTree: nodes after batches of sets
    (duplicates: the last wins), stratified draws with the seed's stream,
    and find's leaves against per_tree_descend's."""
    rng = np.random.default_rng(7)
    cap = 37
    t = per.SumTree(cap)
    d = B.SumTree(cap, max_batch=64, seed=13)
    r = per.Rng(13)
    for _ in range(12):
        n = int(rng.integers(1, 40))
        idx = rng.integers(0, cap, n).astype(np.int32)
        p = rng.random(n) * 5
        t.set_batch(idx, p)
        d.set_batch(B.dev(idx), B.dev(p))
        assert B.host(d.nodes).tobytes() == t.nodes().tobytes()
        assert float(B.host(d.total)) == t.nodes()[1]
        i_ref, v_ref = t.sample(20, r)
        i_got, v_got = d.sample(20)
        np.testing.assert_array_equal(B.host(i_got), i_ref)
        assert B.host(v_got).tobytes() == np.asarray(v_ref, np.float64).tobytes()
        # find: the leaves of given prefix masses, per_tree_descend's
        nodes, L = t.nodes(), d.leaves
        total = float(nodes[1])
        u = np.concatenate([rng.random(30) * total, [0.0, total, 2 * total]])
        i_got, v_got = d.find(B.dev(u))
        want = [_descend(nodes, L, float(x)) for x in u]
        np.testing.assert_array_equal(B.host(i_got), want)
        np.testing.assert_array_equal(B.host(v_got), nodes[L + np.array(want)])
    d.status()
    d.find(B.dev(np.array([1.0, -1.0, np.nan])))
    with pytest.raises(per.Error) as e:
        d.status()
    assert e.value.name == "PER_ERR_NEGATIVE" and "find" in str(e.value)
    assert "position 1" in str(e.value)
    d.set_batch(B.dev(np.array([0, cap], np.int32)), B.dev(np.array([1.0, 1.0])))
    with pytest.raises(per.Error) as e:
        d.status()
    assert e.value.name == "PER_ERR_INDEX" and "position 1" in str(e.value)
    assert B.host(d.nodes).tobytes() == t.nodes().tobytes()  # unchanged
    np.testing.assert_array_equal(B.host(d.leaf_values), t.values())
    e2 = B.SumTree(4, max_batch=4)
    e2.sample(2)
    with pytest.raises(per.Error, match="PER_ERR_EMPTY"):
        e2.status()


def test_views_and_dlpack(B):
    """sample's views are the same memory every call of one size; they are
    DLPack producers (NumPy takes the host backend's)."""
    dev = B.ReplayBuffer(8, {"x": np.float32}, max_batch=4, align=True,
                         wrap=lambda a: a)  # the DeviceArrays themselves
    dev.add_batch(x=B.dev(np.arange(4, dtype=np.float32)))
    a = dev.sample(4)
    b = dev.sample(4)
    assert a["x"].ptr == b["x"].ptr and a["ids"].ptr == b["ids"].ptr
    assert a["ids"].typestr == "<i8" and a["weights"].typestr == "<f4"
    assert a["x"].shape == (4,) and "DeviceArray" in repr(a["x"])
    dev_type, _ = a["x"].__dlpack_device__()
    if B.name == "host":
        assert dev_type == 1
        x = np.from_dlpack(a["x"])
        assert set(x.tolist()) <= {0.0, 1.0, 2.0, 3.0}
        assert np.asarray(a["x"]).ctypes.data == a["x"].ptr
    else:
        assert dev_type == 2
        assert a["x"].__cuda_array_interface__["data"][0] == a["x"].ptr


def test_graph_capture(B, tmp_path):
    """A whole step (sample, then update with the sampled ids and TD errors
    written to fixed device memory before each replay) captured once and
    replayed, against the CPU doing each step's calls: the shim's capture
    on the host backend, torch.cuda.graph on a GPU."""
    rng = np.random.default_rng(8)
    cpu = per.ReplayBuffer(64, SPEC, seed=3, beta_steps=10)
    it = _items(rng, 40)
    cpu.add_batch(**it)
    if B.name == "host":
        mod = pc.host.module
        dev = B.ReplayBuffer(64, SPEC, max_batch=40, seed=3, beta_steps=10,
                             wrap=lambda a: a)
        dev.add_batch(**{k: B.dev(v) for k, v in it.items()})
        td_dev = B.dev(np.zeros(16, np.float32))
        assert mod.capture_begin(0) == 0
        out = dev.sample(16)
        stale = dev.update(out["ids"], td_dev)
        graph = mod.capture_end(0)
        assert not isinstance(graph, int), "the capture broke"

        def replay(td):
            assert mod.copy(td_dev.ptr, td.ctypes.data, td.nbytes, 0, 0, 0) == 0
            assert mod.replay(graph) == 0
    else:
        torch = pytest.importorskip("torch")
        dev = B.ReplayBuffer(64, SPEC, max_batch=40, seed=3, beta_steps=10,
                             wrap=torch.from_dlpack)
        dev.add_batch(**{k: B.dev(v) for k, v in it.items()})
        td_dev = torch.zeros(16, dtype=torch.float32, device=f"cuda:{dev.device}")
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = dev.sample(16)
            stale = dev.update(out["ids"], td_dev)

        def replay(td):
            td_dev.copy_(torch.from_numpy(td))
            g.replay()
            torch.cuda.synchronize()
    for _ in range(25):
        td = rng.standard_normal(16).astype(np.float32)
        replay(td)
        ref = cpu.sample(16)
        np.testing.assert_array_equal(B.host(out["ids"]).view(np.uint64), ref["ids"])
        assert B.host(out["weights"]).tobytes() == ref["weights"].tobytes()
        assert int(B.host(stale)) == cpu.update(ref["ids"], td)
    dev.status()
    _same_state(tmp_path, cpu, dev, "graph")


def test_cupy_and_jax_arrays(B, tmp_path):
    """CuPy and JAX device arrays in (JAX through __dlpack__ or its
    __cuda_array_interface__), CuPy arrays out (wrap=cupy.from_dlpack):
    the same draws as per.ReplayBuffer. GPU only, where they import."""
    if B.name != "cuda":
        pytest.skip("CuPy and JAX arrays live on a GPU")
    cupy = pytest.importorskip("cupy")
    jnp = pytest.importorskip("jax.numpy")
    rng = np.random.default_rng(13)
    cpu = per.ReplayBuffer(64, SPEC, seed=6, align=True)
    dev = B.ReplayBuffer(64, SPEC, max_batch=32, seed=6, align=True,
                         wrap=cupy.from_dlpack)
    for k in range(6):
        it = _items(rng, 12)
        cpu.add_batch(**it)
        if k % 2:
            dev.add_batch(**{n: cupy.asarray(v) for n, v in it.items()})
        else:  # JAX keeps 32-bit integers unless x64 is on: act from CuPy
            dev.add_batch(**{n: cupy.asarray(v) if n == "act" else jnp.asarray(v)
                             for n, v in it.items()})
        ref, got = cpu.sample(16), dev.sample(16)
        assert isinstance(got["obs"], cupy.ndarray)
        np.testing.assert_array_equal(cupy.asnumpy(got["ids"]).view(np.uint64),
                                      ref["ids"])
        np.testing.assert_array_equal(cupy.asnumpy(got["obs"]), ref["obs"])
        td = rng.standard_normal(16).astype(np.float32)
        dev.update(got["ids"], cupy.asarray(td))
        cpu.update(ref["ids"], td)
    dev.status()
    _same_state(tmp_path, cpu, dev, "cupy-jax")


def test_thread_orders(B, tmp_path):
    """The host backend's launches give the same bits with their threads
    run forwards, backwards and shuffled."""
    if B.name != "host":
        pytest.skip("thread orders are the host backend's")
    files = []
    for order in range(3):
        pc.host.module.shim_order(order)
        try:
            rng = np.random.default_rng(9)
            dev = B.ReplayBuffer(30, SPEC, max_batch=32, seed=4)
            for _ in range(10):
                dev.add_batch(**{k: B.dev(v) for k, v in _items(rng, 9).items()})
                got = dev.sample(12)
                td = rng.standard_normal(12).astype(np.float32)
                dev.update(got["ids"], B.dev(td))
            dev.status()
            p = tmp_path / f"o{order}.per"
            dev.to_cpu().save(p)
            files.append(p.read_bytes())
        finally:
            pc.host.module.shim_order(0)
    assert files[0] == files[1] == files[2]


def test_unavailable_message():
    """Without per._cuda, per.cuda imports and says how to get it."""
    if pc.available():
        assert pc.unavailable_reason() == ""
        return
    assert "nvcc" in pc.unavailable_reason()
    with pytest.raises(ImportError, match="nvcc"):
        pc.ReplayBuffer(8, {"x": np.float32})


def test_torch_tensors(B, tmp_path):
    """PyTorch tensors in and out: sample's views are torch tensors (the
    default wrap once torch is imported), inputs are taken through
    __cuda_array_interface__ (GPU) or __dlpack__ (host), and the draws
    are still per.ReplayBuffer's. Needs torch (CI's torch stage sets
    PER_NEED_TORCH=1)."""
    if os.environ.get("PER_NEED_TORCH") == "1":
        import torch
    else:
        torch = pytest.importorskip("torch")
    if B.name == "host":
        def tens(a):  # a torch view of the emulation's "device memory"
            return torch.from_dlpack(pc.host.to_device(a))
    else:
        def tens(a):
            return torch.as_tensor(a, device=f"cuda:{torch.cuda.current_device()}")
    rng = np.random.default_rng(12)
    cpu = per.ReplayBuffer(64, SPEC, seed=8, align=True)
    dev = B.ReplayBuffer(64, SPEC, max_batch=32, seed=8, align=True)
    for _ in range(6):
        it = _items(rng, 10)
        cpu.add_batch(**it)
        dev.add_batch(**{k: tens(v) for k, v in it.items()})
        ref, got = cpu.sample(16), dev.sample(16)
        assert isinstance(got["obs"], torch.Tensor) and got["obs"].shape == (16, 3)
        assert got["ids"].dtype == torch.int64 and got["weights"].dtype == torch.float32
        assert got["done"].dtype == torch.bool
        np.testing.assert_array_equal(got["ids"].cpu().numpy().view(np.uint64), ref["ids"])
        np.testing.assert_array_equal(got["obs"].cpu().numpy(), ref["obs"])
        td = (got["rew"] - 0.5).contiguous()  # computed by torch from the views
        if B.name == "host":
            td = tens(td.numpy())
        stale = dev.update(got["ids"], td)
        assert int(stale) == cpu.update(ref["ids"], (ref["rew"] - np.float32(0.5)))
    dev.status()
    _same_state(tmp_path, cpu, dev, "torch")


# -- streams ---------------------------------------------------------------

class _Interface:
    """An array as a producer hands it out: its interface dict (iface,
    __cuda_array_interface__ or, for the host backend,
    __array_interface__) with the given keys added ("stream"), keeping
    base alive."""

    def __init__(self, iface, d, base=None, **keys):
        setattr(self, iface, dict(d, **keys))
        self.base = base


class _DLPackOnly:
    """A tensor behind __dlpack__ alone (as JAX hands arrays over), noting
    the streams it is asked to order its work before."""

    def __init__(self, t):
        self.t, self.asked = t, []

    def __dlpack__(self, stream=None, **kw):
        self.asked.append(stream)
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def _ns(**kw):
    return types.SimpleNamespace(**kw)


def test_stream_named_or_refused(monkeypatch):
    """A GPU call's stream: as given (an int handle, 0 and 1 the legacy
    default stream, 2 the per-thread one; .cuda_stream; .ptr), else
    PyTorch's current one, else CuPy's, else refused: the legacy default
    stream is never taken unasked. The host backend has no streams: None
    is 0 there, with or without a framework."""
    for lib in ("torch", "cupy"):
        monkeypatch.delitem(sys.modules, lib, raising=False)
    b = pc._Backend(_ns(backend="cuda", device_count=lambda: 1), "per.cuda.t")
    with pytest.raises(ValueError, match="per.cuda.t: no stream given and "
                                         "neither PyTorch nor CuPy is imported"):
        b.stream_of(None, 0)
    # where no GPU is at all, the call is let through to name the CUDA error
    none = pc._Backend(_ns(backend="cuda", device_count=lambda: 0), "per.cuda.t")
    assert none.stream_of(None, 0) == 0
    assert [b.stream_of(s, 0) for s in (0, 1, 2, np.uint64(77))] == [0, 1, 2, 77]
    assert b.stream_of(_ns(cuda_stream=5), 0) == 5
    assert b.stream_of(_ns(ptr=6), 0) == 6
    for bad in (True, "5", 1.0, _ns(ptr=None)):
        with pytest.raises(TypeError, match="stream must be an int handle"):
            b.stream_of(bad, 0)
    with pytest.raises(ValueError, match="negative"):
        b.stream_of(-1, 0)
    h = pc._Backend(_ns(backend="host"), "per.cuda.t")
    assert h.stream_of(None, 0) == 0
    monkeypatch.setitem(sys.modules, "cupy", _ns(cuda=_ns(
        get_current_stream=lambda: _ns(ptr=31))))
    assert b.stream_of(None, 0) == 31
    monkeypatch.setitem(sys.modules, "torch", _ns(cuda=_ns(
        current_stream=lambda d: _ns(cuda_stream=40 + d))))
    assert b.stream_of(None, 2) == 42  # PyTorch's before CuPy's
    assert b.stream_of(9, 2) == 9 and h.stream_of(None, 0) == 0
    if pc.available() and pc.device_count() > 0:
        for lib in ("torch", "cupy"):
            monkeypatch.delitem(sys.modules, lib)
        with pytest.raises(ValueError, match="no stream given"):
            pc.ReplayBuffer(8, {"x": np.float32})
        with pytest.raises(ValueError, match="no stream given"):
            pc.to_device(np.zeros(2, np.float32))
        dev = pc.ReplayBuffer(8, {"x": np.float32}, stream=1, wrap=lambda a: a)
        dev.add_batch(x=pc.to_device(np.ones(2, np.float32), stream=1))
        assert pc.to_host(dev.sample(2)["x"], stream=1).tolist() == [1.0, 1.0]


def test_interface_stream_read(monkeypatch):
    """__cuda_array_interface__'s "stream" (version 3) is read and checked:
    None or absent, nothing to wait for; 0 refused, as the interface
    disallows it; a stream other than the call's is waited for once per
    call (1 and the call's 0 are the same, the legacy default stream).
    __dlpack__ is given the call's stream (1 for the legacy 0), and its
    producer orders itself. Against a stand-in extension: no GPU needed."""
    waits, asked = [], []

    def dlpack_info(a, stream):
        asked.append(stream)
        return (4096, 2, 0, 2, 32, 1, (4,), None)

    mod = _ns(backend="cuda", dlpack_info=dlpack_info,
              stream_wait=lambda d, p, s: waits.append((d, p, s)) or 0)
    b = pc._Backend(mod, "per.cuda.t")
    cai = {"data": (4096, False), "shape": (4,), "typestr": "<f4", "version": 3}

    def arr(**keys):
        return b.array(_Interface("__cuda_array_interface__", cai, **keys),
                       "x", 0, 9)

    assert arr().stream is None and arr(stream=None).stream is None
    assert arr(stream=5).stream == 5 and arr(stream=1).stream == 1
    with pytest.raises(ValueError, match="stream 0, which the interface disallows"):
        arr(stream=0)
    with pytest.raises(ValueError, match="negative"):
        arr(stream=-2)
    for bad in (True, "5", 5.0):
        with pytest.raises(TypeError, match="stream must be an int or None"):
            arr(stream=bad)
    five, one, nine, none = (arr(stream=s) for s in (5, 1, 9, None))
    b.after("t", 0, 9, five, five, one, nine, none)
    assert waits == [(0, 5, 9), (0, 1, 9)]
    del waits[:]
    b.after("t", 0, 0, five, one, none)  # 0: the legacy default stream, 1
    b.after("t", 0, 1, five, one)
    assert waits == [(0, 5, 0), (0, 5, 1)]

    class DL:
        def __dlpack__(self, stream=None):
            raise AssertionError("dlpack_info asks")

    for st in (1234, 0, 1, 2):
        assert b.array(DL(), "x", 0, st).stream is None
    assert asked == [1234, 1, 1, 2]


def test_producer_streams_waited_for(B):
    """An input whose interface dict names its producer's stream (the host
    backend reads it from __array_interface__ as the GPU reads
    __cuda_array_interface__) makes the call's stream wait for it: once
    per other stream, only for a call that is accepted; the call's own
    stream, None or no stream: no wait; stream 0 refused. The extension
    counts the waits (stream_waits); the results are the producer's
    data."""
    mod = pc.host.module if B.name == "host" else pc._module()
    iface = "__array_interface__" if B.name == "host" else "__cuda_array_interface__"
    if B.name == "host":
        p, q, own = 5, 6, 0  # the host backend's streams are names
    else:
        torch = pytest.importorskip("torch")
        keep = [torch.cuda.Stream() for _ in range(3)]
        p, q, own = (s.cuda_stream for s in keep)

    def made(a, **keys):
        x = B.dev(a)
        return _Interface(iface, getattr(x, iface), base=x, **keys)

    def waits():
        return mod.stream_waits() - w0

    x, y = np.arange(4, dtype=np.float32), np.arange(4, dtype=np.int32)
    ends = np.zeros(4, np.uint8)
    dev = B.ReplayBuffer(16, {"x": np.float32, "y": np.int32}, max_batch=8,
                         seed=1, stream=own, wrap=lambda a: a)
    w0 = mod.stream_waits()
    dev.add_batch(x=made(x, stream=p), y=made(y, stream=p),
                  ends=made(ends, stream=q))
    assert waits() == 2
    dev.add_batch(x=made(x, stream=own or 1), y=made(y, stream=None),
                  ends=made(ends))
    dev.add_batch(x=made(x, stream=p), y=made(y, stream=p), stream=p)
    assert waits() == 2
    with pytest.raises(ValueError, match="disallows"):
        dev.add_batch(x=made(x, stream=0), y=made(y))
    with pytest.raises(ValueError, match="'y' has shape"):
        dev.add_batch(x=made(x, stream=p), y=made(y[:3], stream=p))
    with pytest.raises(TypeError, match="td is float64"):
        dev.update(made(np.zeros(2, np.int64), stream=q),
                   made(np.zeros(2), stream=q))
    assert waits() == 2  # refused calls enqueue no wait
    got = dev.sample(8)
    assert set(B.host(got["x"]).tolist()) <= {0.0, 1.0, 2.0, 3.0}
    ids = B.host(got["ids"])
    assert int(B.host(dev.update(made(ids, stream=q),
                                 made(np.ones(8, np.float32), stream=q)))) == 0
    assert waits() == 3
    dev.status()
    t = B.SumTree(8, max_batch=8, stream=own, wrap=lambda a: a)
    t.set_batch(made(np.array([0, 2], np.int32), stream=p),
                made(np.array([1.0, 2.0]), stream=q))
    assert waits() == 5
    idx, _ = t.find(made(np.array([0.5, 2.5]), stream=p))
    assert waits() == 6
    assert B.host(idx).tolist() == [0, 2]
    t.status()
    assert B.host(made(x, stream=p)).tolist() == x.tolist()  # to_host
    assert waits() == 7


def test_slow_producer_stream(B):
    """GPU: a tensor written on stream A after a long kernel
    (torch.cuda._sleep), handed to a call on stream B with A named (the
    "stream" of its __cuda_array_interface__, or __dlpack__ while A is
    PyTorch's current stream): the call reads what A wrote, since B waits
    for A on the device."""
    if B.name != "cuda":
        pytest.skip("a GPU's streams")
    torch = pytest.importorskip("torch")
    mod = pc._module()
    dev = B.ReplayBuffer(64, {"x": np.float32}, max_batch=32, seed=1,
                         wrap=lambda a: a)
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    # every kernel below launched once first (a first launch loads its
    # module, which may wait for the device)
    with torch.cuda.stream(a):
        torch.cuda._sleep(1)
        x = torch.zeros(32, device=f"cuda:{dev.device}").fill_(1.0)
    torch.cuda.synchronize()
    dev.add_batch(x=x, stream=b)
    pc.to_host(dev.sample(32, stream=b)["x"], stream=b)
    for k, how in enumerate(("cai", "dlpack")):
        torch.cuda.synchronize()
        w0 = mod.stream_waits()
        with torch.cuda.stream(a):
            x = torch.zeros(32, device=f"cuda:{dev.device}")
            torch.cuda._sleep(100_000_000)  # clock cycles: tens of ms
            x.fill_(7.0 + k)
            if how == "cai":
                arg = _Interface("__cuda_array_interface__",
                                 x.__cuda_array_interface__, base=x,
                                 stream=a.cuda_stream)
            else:
                arg = _DLPackOnly(x)
            dev.clear(stream=b)
            dev.add_batch(x=arg, stream=b)
        got = pc.to_host(dev.sample(32, stream=b)["x"], stream=b)
        assert got.tolist() == [7.0 + k] * 32, how
        assert mod.stream_waits() - w0 == (how == "cai")
        if how == "dlpack":
            assert arg.asked == [b.cuda_stream]
    dev.status(stream=b)


def test_producer_stream_in_a_capture(B):
    """GPU: inside torch.cuda.graph, an input named on a stream outside the
    capture is waited for as an external event (the capture holds), and
    one written on a stream the capture forked is joined back into the
    capture stream by the call's wait (without it the capture would end
    unjoined); each replay adds what was captured."""
    if B.name != "cuda":
        pytest.skip("a GPU's graphs")
    torch = pytest.importorskip("torch")
    mod = pc._module()
    dev = B.ReplayBuffer(64, {"x": np.float32}, max_batch=16, seed=2,
                         wrap=lambda a: a)
    cuda = f"cuda:{dev.device}"
    outside, side = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(outside):
        x = torch.full((8,), 3.0, device=cuda)
    outside.synchronize()
    cai = "__cuda_array_interface__"
    w0 = mod.stream_waits()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        dev.add_batch(x=_Interface(cai, x.__cuda_array_interface__, base=x,
                                   stream=outside.cuda_stream))
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = x * 2
        dev.add_batch(x=_Interface(cai, y.__cuda_array_interface__, base=y,
                                   stream=side.cuda_stream))
    assert mod.stream_waits() - w0 == 2
    for _ in range(2):
        g.replay()
    torch.cuda.synchronize()
    dev.status()
    assert dev.counters()["size"] == 32
    got = pc.to_host(dev.sample(16)["x"])
    assert set(got.tolist()) == {3.0, 6.0}
    dev.status()
