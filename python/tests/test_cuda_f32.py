"""per.cuda with float nodes (dtype=numpy.float32, nodes=numpy.float32:
per._cuda32, per._cuda_host32) against per.SumTree and per.ReplayBuffer
of float nodes: the same calls give the same bits, the state moves
between the two, and node types that differ are refused before anything
changes.

As test_cuda.py: on the host backend (per._cuda_host32, the kernels on
the CPU under its own test shim and race detector) and, where a GPU and
per._cuda32 are present, on the device; PER_NEED_CUDA_HOST=1 and
PER_NEED_CUDA=1 make a missing backend fail instead of skipping.
Deterministic: every random sequence has a fixed seed."""
import functools
import inspect
import os

import numpy as np
import pytest

import per
import per.cuda as pc
from test_cuda import SPEC, _items, from_cpu_then_alike, needs_stream, random_calls

F32 = np.float32


def _backends():
    out = []
    if pc.host.available(F32) or os.environ.get("PER_NEED_CUDA_HOST") == "1":
        out.append("host")  # missing: fails in the fixture
    if (pc.available(F32) and pc.device_count() > 0) or \
            os.environ.get("PER_NEED_CUDA") == "1":
        out.append("cuda")
    return out or ["none"]


class _NS:
    """The backend's classes made with float nodes, and its array moves
    (the host backend's arrays in per._cuda_host32's memory)."""

    def __init__(self, name):
        self.name = name
        if name == "host":
            ns = pc.host
            self.dev = functools.partial(ns.to_device, nodes=F32)
            self.host = ns.to_host
            kw = {}
        else:
            ns = pc
            self.dev, self.host = pc.to_device, pc.to_host
            kw = {}
            if needs_stream():
                kw = {"stream": 1}
                self.dev = functools.partial(self.dev, stream=1)
                self.host = functools.partial(self.host, stream=1)
        self.ReplayBuffer = functools.partial(ns.ReplayBuffer, nodes=F32, **kw)
        self.SumTree = functools.partial(ns.SumTree, dtype=F32, **kw)
        # the double classes of the same backend, for the mismatches
        self.ReplayBuffer64 = functools.partial(ns.ReplayBuffer, **kw)
        self.dev64 = ns.to_device if name == "host" else self.dev

    def races(self):
        if self.name != "host":
            return 0
        return (pc.host.module_of(F32).shim_races(),
                pc.host.module.shim_races())


@pytest.fixture(params=_backends())
def B(request):
    name = request.param
    if name == "none":
        pytest.skip("neither per._cuda_host32 nor a GPU with per._cuda32 here")
    if name == "host" and not pc.host.available(F32):
        pytest.fail("PER_NEED_CUDA_HOST=1 but per._cuda_host32 is not "
                    "installed")
    if name == "cuda" and not (pc.available(F32) and pc.device_count() > 0):
        pytest.fail("PER_NEED_CUDA=1 but per._cuda32 or a GPU is missing: "
                    + pc.unavailable_reason(F32))
    ns = _NS(name)
    r0 = ns.races()
    yield ns
    assert ns.races() == r0, "the shim saw threads of a launch conflict"


def _same_state(tmp_path, cpu, dev, tag):
    a, b = tmp_path / f"{tag}-cpu.per", tmp_path / f"{tag}-dev.per"
    cpu.save(a)
    down = dev.to_cpu()
    assert down.nodes == np.float32 and isinstance(down, per.ReplayBuffer)
    down.save(b)
    assert a.read_bytes() == b.read_bytes()


def test_sum_tree(B):
    """per.cuda.SumTree(dtype=float32) against per.SumTree(dtype=float32):
    the nodes after batches of sets (duplicates: the last wins), the total
    and the leaves, stratified draws with the seed's stream, find's leaves
    and values, all float32 and bit for bit; device errors as the double
    tree's."""
    rng = np.random.default_rng(17)
    cap = 37
    t = per.SumTree(cap, dtype=F32)
    d = B.SumTree(cap, max_batch=64, seed=13)
    assert d.dtype == np.float32 and d.real == np.float32
    r = per.Rng(13)
    for _ in range(12):
        n = int(rng.integers(1, 40))
        idx = rng.integers(0, cap, n).astype(np.int32)
        # values a double could hold that a float rounds: the tree's sums
        # are float ones
        p = (rng.random(n) * 5).astype(np.float32)
        t.set_batch(idx, p)
        d.set_batch(B.dev(idx), B.dev(p))
        nodes = t.nodes()
        assert nodes.dtype == np.float32
        got = B.host(d.nodes)
        assert got.dtype == np.float32 and got.tobytes() == nodes.tobytes()
        total = B.host(d.total)
        assert total.dtype == np.float32 and total.tobytes() == nodes[1:2].tobytes()
        leaves = B.host(d.leaf_values)
        assert leaves.dtype == np.float32
        assert leaves.tobytes() == t.values().tobytes()
        i_ref, v_ref = t.sample(20, r)
        i_got, v_got = d.sample(20)
        np.testing.assert_array_equal(B.host(i_got), i_ref)
        v_got = B.host(v_got)
        assert v_got.dtype == np.float32 and v_got.tobytes() == v_ref.tobytes()
        # find: per.SumTree.find's leaves (u >= total: the last with mass)
        u = np.concatenate([rng.random(30) * nodes[1],
                            [0.0, nodes[1], 2 * nodes[1]]]).astype(np.float32)
        i_got, v_got = d.find(B.dev(u))
        want = np.array([t.find(float(x)) for x in u], np.int64)
        np.testing.assert_array_equal(B.host(i_got), want)
        assert B.host(v_got).tobytes() == t.values(want).tobytes()
    d.status()
    d.find(B.dev(np.array([1.0, -1.0, np.nan], np.float32)))
    with pytest.raises(per.Error) as e:
        d.status()
    assert e.value.name == "PER_ERR_NEGATIVE" and "position 1" in str(e.value)
    d.set_batch(B.dev(np.array([0, cap], np.int32)),
                B.dev(np.array([1.0, 1.0], np.float32)))
    with pytest.raises(per.Error) as e:
        d.status()
    assert e.value.name == "PER_ERR_INDEX" and "position 1" in str(e.value)
    assert B.host(d.nodes).tobytes() == t.nodes().tobytes()  # unchanged
    # the values are the tree's dtype: float64 refused, as the double
    # tree refuses float32
    with pytest.raises(TypeError, match="p is float64"):
        d.set_batch(B.dev(np.array([0], np.int32)), B.dev(np.array([1.0])))
    with pytest.raises(TypeError, match="u is float64"):
        d.find(B.dev(np.array([0.5])))
    d.status()


def test_sum_tree_dtype_argument(B):
    """dtype takes float64 (the default, None too) and float32 however
    named; anything else is a TypeError naming both."""
    ns = pc.host if B.name == "host" else pc
    assert inspect.signature(ns.SumTree).parameters["dtype"].default is np.float64
    for name in (np.float32, "float32", np.dtype("<f4")):
        assert B.SumTree(4, max_batch=4, dtype=name).dtype == np.float32
    if pc.host.available() if B.name == "host" else pc.available():
        for name in (None, np.float64, "f8"):
            assert B.SumTree(4, max_batch=4, dtype=name).dtype == np.float64
    for bad in (np.float16, np.int32, "float128", object):
        with pytest.raises(TypeError, match=r"per.cuda.SumTree: dtype must be "
                                            r"numpy.float64 \(double nodes\) or "
                                            r"numpy.float32 \(float nodes\)"):
            B.SumTree(4, max_batch=4, dtype=bad)


@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("alpha", [0.6, 0.0, 1.0])
def test_random_calls_bitwise(B, tmp_path, align, alpha):
    """test_cuda.py's test of the same name with float nodes on both sides:
    random add_batch / sample / update sequences, with episode ends, fixed
    betas, windows, distinct draws, duplicates and stale ids; every draw,
    weight, field, stale count and counter equal, and the whole state
    after."""
    rng = np.random.default_rng(11 + int(align) + int(alpha * 10))
    kw = dict(alpha=alpha, beta_steps=50, seed=5, align=align)
    cpu = per.ReplayBuffer(40, SPEC, nodes=F32, **kw)
    dev = B.ReplayBuffer(40, SPEC, max_batch=64, **kw)
    assert dev.nodes == np.float32 and dev.dtype == cpu.dtype
    assert "nodes=float32" in repr(dev)
    random_calls(B, rng, cpu, dev, tmp_path)
    assert dev.to_cpu().nodes == np.float32


def test_float_and_double_differ(B):
    """The float buffer's weights are those of the float CPU buffer, not
    the double one's: over a thousand priorities that a float rounds, some
    weights of the two node types differ (so the bitwise tests here tell
    the node types apart)."""
    rng = np.random.default_rng(21)
    kw = dict(alpha=0.7, seed=3)
    item = {"x": np.float32}
    c32 = per.ReplayBuffer(1024, item, nodes=F32, **kw)
    c64 = per.ReplayBuffer(1024, item, **kw)
    dev = B.ReplayBuffer(1024, item, max_batch=1000, **kw)
    x = rng.random(1000).astype(np.float32)
    for c in (c32, c64):
        c.add_batch(x=x)
    dev.add_batch(x=B.dev(x))
    ids = [c.sample(256)["ids"] for c in (c32, c64)]
    dev.sample(256)
    np.testing.assert_array_equal(ids[0], ids[1])  # all priorities alike yet
    td = (rng.random(256) * 3 + 0.1).astype(np.float32)
    for c in (c32, c64):
        c.update(ids[0], td)
    dev.update(B.dev(ids[0].view(np.int64)), B.dev(td))
    differ = 0
    for _ in range(3):
        r32, r64, got = c32.sample(256), c64.sample(256), dev.sample(256)
        w = B.host(got["weights"])
        assert w.tobytes() == r32["weights"].tobytes()
        differ += int((w != r64["weights"]).sum())
    assert differ > 0
    dev.status()


def test_to_cpu_from_cpu_round_trip(B, tmp_path):
    """from_cpu takes a float CPU buffer's whole state and the two go on
    alike; to_cpu gives a float per.ReplayBuffer whose checkpoint loads
    back (from_file picks float nodes from it) into another device
    buffer."""
    rng = np.random.default_rng(6)
    cpu = per.ReplayBuffer(50, SPEC, nodes=F32, seed=9, alpha=0.7)
    dev = B.ReplayBuffer(50, SPEC, max_batch=32, seed=0, alpha=0.1)
    from_cpu_then_alike(B, rng, cpu, dev, tmp_path)
    path = tmp_path / "ck.per"
    down = dev.to_cpu()
    assert down.nodes == np.float32 and down.dtype == cpu.dtype
    np.testing.assert_array_equal(down.priorities(), cpu.priorities())
    assert down.priorities().dtype == np.float32
    down.save(path)
    back = per.ReplayBuffer.from_file(path, SPEC)
    assert back.nodes == np.float32
    dev2 = B.ReplayBuffer(50, SPEC, max_batch=32)
    dev2.from_cpu(back)
    _same_state(tmp_path, cpu, dev2, "ckpt")
    ref, got = cpu.sample(16), dev2.sample(16)
    np.testing.assert_array_equal(B.host(got["ids"]).view(np.uint64), ref["ids"])


def test_node_type_mismatch_refused(B, tmp_path):
    """A float device buffer refuses a double per.ReplayBuffer, and a double
    one a float per.ReplayBuffer, naming both node types, before anything
    changes (either side); the extension itself refuses the other
    module's buffer too. nodes other than float64 and float32 are
    refused naming both."""
    rng = np.random.default_rng(9)
    it = _items(rng, 12)
    dev = B.ReplayBuffer(32, SPEC, max_batch=16, seed=2)
    dev.add_batch(**{k: B.dev(v) for k, v in it.items()})
    c64 = per.ReplayBuffer(32, SPEC, seed=5)
    c64.add_batch(**_items(rng, 5))
    before_dev = tmp_path / "dev.per"
    dev.to_cpu().save(before_dev)
    before_cpu = tmp_path / "cpu.per"
    c64.save(before_cpu)
    with pytest.raises(TypeError, match="the CPU buffer has float64 nodes, "
                                        "this one float32"):
        dev.from_cpu(c64)
    with pytest.raises(TypeError, match="float32 nodes"):
        dev._h.upload(c64, dev._st(None))
    with pytest.raises(TypeError, match="float32 nodes"):
        dev._h.download(c64, dev._st(None))
    after = tmp_path / "after.per"
    dev.to_cpu().save(after)
    assert after.read_bytes() == before_dev.read_bytes()
    c64.save(after)
    assert after.read_bytes() == before_cpu.read_bytes()
    # the reverse: a double device buffer and a float CPU one
    if (pc.host.available() if B.name == "host" else pc.available()):
        d64 = B.ReplayBuffer64(32, SPEC, max_batch=16, seed=2)
        assert d64.nodes == np.float64 and "nodes" not in repr(d64)
        d64.add_batch(**{k: B.dev64(v) for k, v in it.items()})
        assert d64.to_cpu().nodes == np.float64
        c32 = per.ReplayBuffer(32, SPEC, nodes=F32, seed=5)
        c32.add_batch(**_items(rng, 5))
        before = tmp_path / "d64.per"
        d64.to_cpu().save(before)
        c32.save(before_cpu)
        with pytest.raises(TypeError, match="the CPU buffer has float32 nodes, "
                                            "this one float64"):
            d64.from_cpu(c32)
        with pytest.raises(TypeError, match="float64 nodes"):
            d64._h.upload(c32, d64._st(None))
        d64.to_cpu().save(after)
        assert after.read_bytes() == before.read_bytes()
        c32.save(after)
        assert after.read_bytes() == before_cpu.read_bytes()
        d64.status()
    for bad in (np.float16, np.int64, "f2"):
        with pytest.raises(TypeError, match=r"per.cuda.ReplayBuffer: nodes must "
                                            r"be numpy.float64 \(double nodes\) "
                                            r"or numpy.float32 \(float nodes\)"):
            B.ReplayBuffer(16, SPEC, max_batch=8, nodes=bad)
    dev.status()


def test_signature_and_attributes():
    """per.cuda.ReplayBuffer shows nodes (default None: float64) beside
    per.ReplayBuffer's keywords; .nodes is the node type, .dtype the
    item's."""
    for cls in (pc.ReplayBuffer, pc.host.ReplayBuffer):
        p = inspect.signature(cls).parameters["nodes"]
        assert p.default is None and p.kind == p.KEYWORD_ONLY
    assert inspect.signature(per.ReplayBuffer).parameters["nodes"].default is None
    if not pc.host.available(F32):
        pytest.skip("per._cuda_host32 is not installed")
    b = pc.host.ReplayBuffer(16, SPEC, max_batch=8, nodes="float32")
    assert b.nodes == np.float32 and b.dtype == np.dtype(
        [("obs", "<f4", (3,)), ("act", "<i8"), ("rew", "<f4"), ("done", "?")])


def test_host_memory_per_node_type():
    """The host backend's two extensions emulate device memory of their own:
    an array of one is refused by the other's objects, naming the
    to_device call that makes it; to_host reads either."""
    if not (pc.host.available() and pc.host.available(F32)):
        if os.environ.get("PER_NEED_CUDA_HOST") == "1":
            pytest.fail("PER_NEED_CUDA_HOST=1 but per._cuda_host or "
                        "per._cuda_host32 is not installed")
        pytest.skip("per._cuda_host and per._cuda_host32 are needed")
    H = pc.host
    x = np.arange(4, dtype=np.float32)
    a64, a32 = H.to_device(x), H.to_device(x, nodes=F32)
    assert H.module.on_device(a64.ptr, 16) and not H.module.on_device(a32.ptr, 16)
    m32 = H.module_of(F32)
    assert m32.on_device(a32.ptr, 16) and not m32.on_device(a64.ptr, 16)
    assert H.to_host(a64).tolist() == H.to_host(a32).tolist() == x.tolist()
    b32 = H.ReplayBuffer(8, {"x": np.float32}, max_batch=4, nodes=F32)
    with pytest.raises(ValueError, match=r"memory for float64 nodes.*"
                                         r"to_device\(\.\.\., nodes=numpy.float32\)"):
        b32.add_batch(x=a64)
    b64 = H.ReplayBuffer(8, {"x": np.float32}, max_batch=4)
    with pytest.raises(ValueError, match=r"memory for float32 nodes.*"
                                         r"to_device\(\.\.\., nodes=numpy.float64\)"):
        b64.add_batch(x=a32)
    with pytest.raises(ValueError, match="not in the host backend's device memory"):
        H.to_host(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="nodes must be numpy.float64"):
        H.to_device(x, nodes=np.float16)
    b32.add_batch(x=a32)
    b64.add_batch(x=a64)
    for b in (b32, b64):
        assert sorted(H.to_host(b.sample(4)["x"]).tolist())[0] >= 0.0
        b.status()


def test_missing_float_module_named(monkeypatch):
    """Without per._cuda32 or per._cuda_host32, a float request raises an
    ImportError naming the missing module, and available(float32) is
    False; the double classes are unaffected."""
    real = pc._importlib.import_module

    def refuse(name, *a):
        if name.endswith(("._cuda32", "._cuda_host32")):
            raise ImportError(f"No module named {name!r}")
        return real(name, *a)

    monkeypatch.setattr(pc._importlib, "import_module", refuse)
    monkeypatch.setattr(pc, "_float_mods", {})
    assert not pc.available(F32) and not pc.host.available(F32)
    assert "per._cuda32" in pc.unavailable_reason(F32)
    with pytest.raises(ImportError, match="float32 nodes need the extension "
                                          "per._cuda_host32"):
        pc.host.SumTree(4, dtype=F32)
    with pytest.raises(ImportError, match="per._cuda_host32"):
        pc.host.ReplayBuffer(8, SPEC, nodes=F32)
    with pytest.raises(ImportError, match="per._cuda_host32"):
        pc.host.to_device(np.zeros(2, np.float32), nodes=F32)
    with pytest.raises(ImportError, match="float32 nodes need the extension "
                                          "per._cuda32"):
        pc.ReplayBuffer(8, SPEC, nodes=F32, stream=1)
    with pytest.raises(ImportError, match="per._cuda32"):
        pc.SumTree(4, dtype=F32, stream=1)
    if pc.host.available():
        assert pc.host.SumTree(4, max_batch=4).dtype == np.float64
