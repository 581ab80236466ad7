"""per.ReplayBuffer and per.NStep: the C contract through Python, bad
input raising with nothing changed, checkpoints."""

import numpy as np
import pytest

import per

ITEM = {"obs": (np.float32, 3), "action": np.int32, "reward": np.float32}


def state(buf, tmp_path):
    """Every byte of the buffer's state: its checkpoint file."""
    p = tmp_path / "state.per"
    buf.save(p)
    return p.read_bytes()


def filled(n=50, **kw):
    b = per.ReplayBuffer(64, ITEM, seed=3, **kw)
    g = np.arange(n)
    b.add(obs=np.stack([g, g + 1, g + 2], 1), action=g % 4, reward=g * 0.5)
    return b


def test_defaults_are_the_c_defaults():
    for cap in (1, 1000, 100_000):
        b = per.ReplayBuffer(cap, ITEM)
        want = per.config_default(cap, b.dtype.itemsize)
        assert b.config == want
    # 0 is a value like any other: alpha = 0 is uniform replay
    assert per.ReplayBuffer(10, ITEM, alpha=0.0).config["alpha"] == 0.0


def test_add_forms_and_storage_view():
    b = per.ReplayBuffer(8, ITEM)
    b.add(obs=[1, 2, 3], action=1, reward=0.5)                      # keywords
    b.add({"obs": np.ones((2, 3)), "action": [2, 3], "reward": [1, 2]})   # dict batch
    rec = np.zeros(2, b.dtype)
    rec["action"] = [4, 5]
    b.add(rec)                                                     # records
    b.add(rec[0])                                                  # one record
    assert len(b) == 6 and b.added == 6
    st = b.storage
    assert list(st["action"]) == [1, 2, 3, 4, 5, 4]
    assert list(st["obs"][0]) == [1.0, 2.0, 3.0]
    assert not st.flags.writeable
    with pytest.raises(ValueError):
        st["action"][0] = 9
    plain = per.ReplayBuffer(4, (np.float32, 2))
    plain.add(np.array([[1, 2], [3, 4]], np.float32))
    assert plain.sample(3)["item"].shape == (3, 2)


def test_add_batch_takes_batches_only(tmp_path):
    g = np.arange(5)
    fields = {"obs": np.stack([g, g, g], 1), "action": g, "reward": g * 0.5}
    a, b = per.ReplayBuffer(8, ITEM, seed=1), per.ReplayBuffer(8, ITEM, seed=1)
    a.add(fields, ends=per.END_TERMINATED)
    b.add_batch(**fields, ends=per.END_TERMINATED)
    assert state(a, tmp_path) == state(b, tmp_path)
    before = state(b, tmp_path)
    one = {"obs": np.ones(3), "action": 1, "reward": 1.0}      # one item, no batch axis
    with pytest.raises(ValueError):
        b.add_batch(one)
    with pytest.raises(ValueError):
        b.add_batch(np.zeros((), b.dtype))
    with pytest.raises(ValueError):
        b.add_batch(np.zeros((2, 2), b.dtype))
    assert state(b, tmp_path) == before
    b.add_batch({k: np.asarray(v)[None] for k, v in one.items()})   # a batch of one
    b.add_batch(np.zeros(0, b.dtype))
    assert len(b) == 6
    plain = per.ReplayBuffer(4, (np.float32, 2))
    with pytest.raises(ValueError):
        plain.add_batch(np.array([1, 2], np.float32))
    plain.add_batch(np.array([[1, 2]], np.float32))
    assert len(plain) == 1


def test_sample_shapes_ids_weights():
    b = filled(alpha=0.6)
    b.update(np.arange(50, dtype=np.uint64) | (np.uint64(1) << np.uint64(32)),
             np.linspace(0.0, 3.0, 50))
    s = b.sample(16)
    assert s["obs"].shape == (16, 3) and s["obs"].dtype == np.float32
    assert s["action"].shape == (16,) and s["ids"].dtype == np.uint64
    assert s["weights"].dtype == np.float32
    assert np.all(s["weights"] > 0) and s["weights"].max() == 1.0
    slots = (s["ids"] & np.uint64(0xFFFFFFFF)).astype(int)
    assert np.array_equal(s["action"], slots % 4)           # items match ids
    u = b.sample(50, unique=True)
    assert len(set(u["ids"].tolist())) == 50
    w = b.sample(200, window=5)
    assert set(((w["ids"] & np.uint64(0xFFFFFFFF)).astype(int)).tolist()) <= set(range(45, 50))
    assert b.step == 3 and abs(b.beta - (0.4 + 0.6 * 3 / 200000)) < 1e-15
    s1 = b.sample(4, beta=0.0)
    assert np.all(s1["weights"] == 1.0)


def test_errors_leave_the_buffer_unchanged(tmp_path):
    empty = per.ReplayBuffer(8, ITEM)
    with pytest.raises(per.Error) as e:
        empty.sample(1)
    assert e.value.name == "PER_ERR_EMPTY"
    b = filled()
    ids = b.sample(4)["ids"]
    before = state(b, tmp_path)
    cases = [
        (lambda: b.sample(0), "PER_ERR_BATCH"),
        (lambda: b.sample(51, unique=True), "PER_ERR_TOO_FEW"),
        (lambda: b.sample(4, beta=-1.0), "PER_ERR_ARG"),
        (lambda: b.update(ids, [1.0, np.nan, 1.0, 1.0]), "PER_ERR_NAN"),
        (lambda: b.update(ids, [1.0, 1.0, np.inf, 1.0]), "PER_ERR_INF"),
        (lambda: b.update([63 | 1 << 32], [1.0]), "PER_ERR_INDEX"),     # never handed out
        (lambda: b.update([-1], [1.0]), "PER_ERR_INDEX"),
        (lambda: b.add(obs=[0, 0, 0], action=0, reward=0, ends=7), "PER_ERR_ARG"),
        (lambda: b.add(obs=np.zeros((2, 3)), action=[0, 0], reward=[0, 0],
                       ends=[0, 3]), "PER_ERR_ARG"),
        (lambda: b.load(tmp_path / "missing.per"), "PER_ERR_IO"),
    ]
    for call, name in cases:
        with pytest.raises(per.Error) as e:
            call()
        assert e.value.name == name, name
        assert state(b, tmp_path) == before, name
    for call, exc in [
        (lambda: b.add(obs=[0, 0, 0], action=0), ValueError),               # a field missing
        (lambda: b.add(obs=[0, 0], action=0, reward=0), ValueError),         # wrong shape
        (lambda: b.add(obs=np.zeros((2, 3)), action=[0, 0, 0], reward=[0, 0]), ValueError),
        (lambda: b.add(np.zeros(2, [("x", "f4")])), TypeError),
        (lambda: b.update(ids, [1.0]), ValueError),
        (lambda: b.sample(1.5), TypeError),
    ]:
        with pytest.raises(exc):
            call()
        assert state(b, tmp_path) == before


def test_stale_ids_are_counted():
    b = per.ReplayBuffer(4, ITEM, seed=1)
    z = {"obs": np.zeros((4, 3)), "action": np.zeros(4), "reward": np.zeros(4)}
    b.add(z)
    ids = b.sample(4)["ids"]
    b.add({k: v[:2] for k, v in z.items()})        # overwrites slots 0 and 1
    stale = int(np.sum((ids & np.uint64(0xFFFFFFFF)) < 2))
    assert b.update(ids, np.ones(4)) == stale


def test_checkpoint_round_trip(tmp_path):
    a = filled()
    a.update(a.sample(8)["ids"], np.arange(8.0))
    a.save(tmp_path / "a.per")
    b = per.ReplayBuffer(64, ITEM, seed=99)
    b.load(tmp_path / "a.per")
    for _ in range(3):
        sa, sb = a.sample(8), b.sample(8)
        for k in sa:
            assert np.array_equal(sa[k], sb[k]), k
    # a buffer of another capacity refuses the file and stays as it was
    c = per.ReplayBuffer(32, ITEM)
    with pytest.raises(per.Error) as e:
        c.load(tmp_path / "a.per")
    assert e.value.name == "PER_ERR_MISMATCH" and len(c) == 0
    bad = bytearray((tmp_path / "a.per").read_bytes())
    bad[300] ^= 1
    (tmp_path / "bad.per").write_bytes(bytes(bad))
    before = state(b, tmp_path)
    with pytest.raises(per.Error) as e:
        b.load(tmp_path / "bad.per")
    assert e.value.name == "PER_ERR_CHECKSUM"
    assert state(b, tmp_path) == before
    # two shards hold every item once
    shards = [per.ReplayBuffer(32, ITEM) for _ in range(2)]
    for r, s in enumerate(shards):
        s.load_shard(tmp_path / "a.per", r, 2)
    got = sorted(np.concatenate([s.storage["action"] * 1000 + s.storage["obs"][:, 0]
                                 for s in shards]).tolist())
    assert got == sorted((a.storage["action"] * 1000 + a.storage["obs"][:, 0]).tolist())


def test_sequences():
    b = per.ReplayBuffer(16, ITEM, seq_len=4, seq_stride=2, seed=2)
    g = np.arange(12)
    ends = np.where(g == 5, per.END_TERMINATED, per.END_NONE)
    b.add(obs=np.stack([g, g, g], 1), action=g, reward=g, ends=ends)
    s = b.sample(8, sequences=True)
    assert s["action"].shape == (8, 4) and s["mask"].shape == (8, 4)
    assert s["mask"].dtype == np.bool_ and s["mask"].all()
    starts = s["action"][:, 0]
    assert np.all(starts % 2 == 0)
    assert np.array_equal(s["action"], starts[:, None] + np.arange(4))
    # valid starts: 0, 2 (its last step ends the episode), 6 and 8; 4
    # crosses the end at step 5, 10 runs past the newest step
    assert set(starts.tolist()) <= {0, 2, 6, 8}
    assert b.update_sequences(s["ids"], np.ones((8, 4))) == 0
    with pytest.raises(ValueError):
        b.update_sequences(s["ids"], np.ones(8))
    with pytest.raises(per.Error) as e:
        per.ReplayBuffer(16, ITEM).sample(1, sequences=True)
    assert e.value.name in ("PER_ERR_ARG", "PER_ERR_EMPTY")


def test_nstep_items_and_save(tmp_path):
    a = per.NStep(3, 0.5, obs_shape=2, obs_dtype=np.float32)
    buf = per.ReplayBuffer(16, a.item_dtype)
    assert a.item_dtype.itemsize == a.layout["size"]
    for t in range(4):
        a.step(buf, [t, t], t % 2, 1.0, [t + 1, t + 1])
    assert len(buf) == 2 and a.pending == 2
    st = buf.storage
    assert list(st["obs"][:, 0]) == [0.0, 1.0]
    assert list(st["reward"]) == [1.75, 1.75] and list(st["discount"]) == [0.125, 0.125]
    assert list(st["next_obs"][:, 0]) == [3.0, 4.0] and list(st["done"]) == [0, 0]
    a.save(tmp_path / "n.pern")
    b = per.NStep(3, 0.5, obs_shape=2, obs_dtype=np.float32)
    b.load(tmp_path / "n.pern")
    assert b.pending == 2
    a.step(buf, [4, 4], 0, 2.0, [5, 5], terminated=True)
    b.step(buf, [4, 4], 0, 2.0, [5, 5], terminated=True)
    st = buf.storage
    assert len(buf) == 8 and a.pending == 0
    assert np.array_equal(st[2:5], st[5:8])        # the two adders emitted the same
    assert list(st["done"][2:5]) == [1, 1, 1]
    with pytest.raises(per.Error) as e:
        a.step(buf, [0, 0], 0, float("nan"), [0, 0])
    assert e.value.name == "PER_ERR_NAN"
    with pytest.raises(ValueError):
        a.step(buf, [0, 0, 0], 0, 1.0, [0, 0])
    other = per.ReplayBuffer(4, ITEM)
    with pytest.raises(per.Error) as e:
        a.step(other, [0, 0], 0, 1.0, [0, 0])
    assert e.value.name == "PER_ERR_ARG"
    c = per.NStep(2, 0.5, obs_shape=2)
    with pytest.raises(per.Error) as e:
        per.load_nstep([c], tmp_path / "n.pern")
    assert e.value.name == "PER_ERR_MISMATCH"


def test_live_max():
    """live_max: after one huge TD error is updated away, new items enter
    at the largest leaf stored now; by default at the largest ever."""
    item = {"x": np.float32}
    bufs = [per.ReplayBuffer(8, item, alpha=0.5, eps=0.0, live_max=lm)
            for lm in (False, True)]
    for b in bufs:
        b.add(x=np.zeros(4, np.float32))
        ids = b.sample(4)["ids"]
        b.update(ids[:1], np.array([1e30], np.float32))
        b.update(ids[:1], np.array([4.0], np.float32))
        b.add(x=np.zeros(1, np.float32))
    paper, live = (b.priorities()[4] for b in bufs)
    assert paper > 1e14 and live == 2.0  # (1e30)^0.5 and 4^0.5
    assert bufs[1].config["flags"] & per._per.MAX_LIVE


def test_add_with_td_is_add_then_update():
    """add(..., td=) gives each item the priority update would (Ape-X's
    actor-computed priorities), in one call; a refused td adds nothing."""
    item = {"x": np.int64}
    a = per.ReplayBuffer(8, item, alpha=0.7, eps=1e-3, seed=2)
    b = per.ReplayBuffer(8, item, alpha=0.7, eps=1e-3, seed=2)
    td = np.array([0.5, -3.0, 0.0, 1e3, 2.0, 0.25, 7.0, 1.0, 4.0, -0.5])
    a.add_batch(x=np.arange(10), td=td)
    b.add_batch(x=np.arange(10))
    slots = (np.arange(10) % 8)[2:]  # the last 8 items stay
    gen = np.where(slots < 2, 2, 1).astype(np.uint64)
    b.update(slots.astype(np.uint64) | gen << np.uint64(32), td[2:])
    assert a.priorities().tobytes() == b.priorities().tobytes()
    for _ in range(3):
        x, y = a.sample(4), b.sample(4)
        assert x.records.tobytes() == y.records.tobytes()
        assert x["weights"].tobytes() == y["weights"].tobytes()
    a.add(x=99, td=2.5)
    assert a.priorities()[2] == pytest.approx((2.5 + 1e-3) ** 0.7)
    before = a.priorities()
    with pytest.raises(per.Error, match=r"PER_ERR_NAN: td\[1\] is NaN"):
        a.add_batch(x=[1, 2], td=[0.0, np.nan])
    with pytest.raises(ValueError, match=r"td has shape \(3,\)"):
        a.add_batch(x=[1, 2], td=[0.0, 1.0, 2.0])
    with pytest.raises(TypeError, match="td must hold numbers"):
        a.add(x=1, td="big")
    assert a.priorities().tobytes() == before.tobytes() and a.added == 11


def test_aligned_padding_is_stored_as_zeros(tmp_path):
    """An aligned item has padding between its fields; records made from
    fields store zeros there, whatever the memory held before, so the same
    adds give the same checkpoint bytes."""
    item = {"flag": np.int8, "x": np.float64, "k": np.int16}
    paths = []
    for trial in range(2):
        junk = np.full(4096, 0xA5 + trial, np.uint8)  # freed memory to reuse
        del junk
        b = per.ReplayBuffer(16, item, align=True, seed=1)
        b.add_batch(flag=np.arange(5, dtype=np.int8), x=np.linspace(0, 1, 5),
                    k=np.arange(5, dtype=np.int16))
        b.add(flag=1, x=2.0, k=3)
        raw = b.storage.view(np.uint8).reshape(-1, b.dtype.itemsize)
        pad = np.ones(b.dtype.itemsize, bool)
        for name in b.dtype.names:
            off = b.dtype.fields[name][1]
            pad[off:off + b.dtype[name].itemsize] = False
        assert pad.any() and not raw[:, pad].any()
        paths.append(tmp_path / f"{trial}.per")
        b.save(paths[-1])
    assert paths[0].read_bytes() == paths[1].read_bytes()
