"""per.net: the replay server (per_net.h's request handling through the
extension, over a ZeroMQ ROUTER) and its clients, on tcp://127.0.0.1
ports ZeroMQ picks.

A table draws what a per.ReplayBuffer of the same config and seed draws,
bit for bit (ids, weights, items, masks, stale counts, checkpoints), with
double and float nodes; every refusal raises per.Error and changes
nothing; every malformed message gets the status docs/PROTOCOL.md gives
it and the server goes on; HELLO refuses another item; seed 003's
TcpClient sends what a TrajectoryAccumulator built.

Needs pyzmq: without it the module skips, unless PER_NEED_ZMQ is set
(CI), where a missing pyzmq fails."""
import os
import struct
import threading
import time

import numpy as np
import pytest

import per

try:
    import zmq
except ImportError:
    if os.environ.get("PER_NEED_ZMQ", "") not in ("", "0"):
        raise
    pytest.skip("pyzmq is not installed (pip install pyzmq)",
                allow_module_level=True)

import per.net as pn
from per import _per

ITEM = {"obs": (np.float32, 3), "action": np.int32}
CFG = dict(seed=7, alpha=0.6, beta0=0.4, beta_steps=50, eps=1e-3)
ANY = "tcp://127.0.0.1:0"


def items(n, start=0):
    g = np.arange(start, start + n)
    return {"obs": np.stack([g, g + 0.5, g + 0.25], axis=1).astype(np.float32),
            "action": (g % 5).astype(np.int32)}


def fails(name, call, *args, **kw):
    """call(*args, **kw) raises per.Error with status `name`."""
    with pytest.raises(per.Error) as e:
        call(*args, **kw)
    assert e.value.name == name, e.value
    assert e.value.status == getattr(_per, name)
    return e.value


def same_batch(got, ref, sequences=False):
    np.testing.assert_array_equal(got.ids, ref["ids"])
    np.testing.assert_array_equal(got.weights, ref["weights"])
    assert got.ids.dtype == np.uint64 and got.weights.dtype == np.float32
    if got.items is not None:
        assert got.items.dtype == ref.records.dtype
        assert got.items.shape == ref.records.shape
        assert got.items.tobytes() == ref.records.tobytes()
    if sequences:
        np.testing.assert_array_equal(got.mask, ref["mask"])
    else:
        assert got.mask is None


def same_files(server, name, ref, tmp_path):
    a, b = tmp_path / f"{name}-table.per", tmp_path / f"{name}-ref.per"
    server.save(name, a)
    ref.save(b)
    assert a.read_bytes() == b.read_bytes()


@pytest.fixture
def pair(request):
    """A server with a plain table and a sequence table, a client of
    each, and the ReplayBuffers they must agree with (nodes from the
    test's parameter, float64 by default)."""
    nodes = getattr(request, "param", np.float64)
    seq = dict(CFG, seq_len=4, seq_stride=2)
    server = pn.Server({"replay": pn.Table(64, ITEM, **CFG),
                        "seq": pn.Table(48, ITEM, **seq)}, ANY, nodes=nodes)
    server.start()
    plain = pn.Client(server.endpoint, dtype=ITEM)
    seqc = pn.Client(server.endpoint, "seq", dtype=ITEM)
    ref = per.ReplayBuffer(64, ITEM, nodes=nodes, **CFG)
    sref = per.ReplayBuffer(48, ITEM, nodes=nodes, **seq)
    yield server, plain, seqc, ref, sref
    plain.close()
    seqc.close()
    server.close()


# ---------------------------------------------------------------------------
# (a) and (f): bit for bit a ReplayBuffer, double and float nodes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("pair", [np.float64, np.float32], indirect=True,
                         ids=["float64", "float32"])
def test_table_is_replay_buffer(pair, tmp_path):
    server, c, _, ref, _ = pair
    rng = np.random.default_rng(3)
    assert c.table["capacity"] == 64 and c.table["seed"] == 7
    assert c.table["layout"] == ref.layout
    # inserts: plain, with td, with ends (one for the last, one each)
    assert c.insert(items(10), ends=per.END_TERMINATED) == 0
    ref.add_batch(items(10), ends=per.END_TERMINATED)
    td = rng.normal(size=7).astype(np.float32)
    assert c.insert(items(7, 10), td=td) == 1
    ref.add_batch(items(7, 10), td=td)
    ends = np.zeros(12, np.uint8)
    ends[[3, 11]] = (per.END_TRUNCATED, per.END_TERMINATED)
    assert c.insert(**items(12, 17), ends=ends) == 2  # fields as keywords
    ref.add_batch(items(12, 17), ends=ends)
    for kw in ({}, {"unique": True}, {"beta": 0.9}, {"window": 9},
               {"window": 2, "trajectories": True},
               {"unique": True, "beta": 0.5, "window": 20}):
        got = c.sample(16, **kw)
        beta = ref.beta  # the schedule's, before the draw
        want = ref.sample(16, **kw)
        same_batch(got, want)
        assert got.beta == kw.get("beta", beta)
        td = rng.random(16).astype(np.float32) * 3
        assert c.update(got.ids, td) == ref.update(want["ids"], td)
    # ids and weights only
    got = c.sample(8, items=False)
    want = ref.sample(8)
    assert got.items is None
    same_batch(got, want)
    # wrap around the ring: the last sample's ids go stale
    for k in range(5):
        tdk = rng.random(15) if k % 2 else None
        c.insert(items(15, 100 + 15 * k), td=tdk)
        ref.add_batch(items(15, 100 + 15 * k), td=tdk)
    td = rng.random(8).astype(np.float32)
    stale = c.update(got.ids, td)
    assert stale == ref.update(want["ids"], td) and stale > 0
    info = c.info()
    assert (info["size"], info["added"], info["step"], info["trajectories"]) \
        == (len(ref), ref.added, ref.step, ref.counters["trajectories"])
    assert info["beta"] == ref.beta and info["refused"] == 0
    assert info["inserts"] == 8 and info["updates"] == 7
    same_batch(c.sample(32), ref.sample(32))
    same_files(server, "replay", ref, tmp_path)


@pytest.mark.parametrize("pair", [np.float64, np.float32], indirect=True,
                         ids=["float64", "float32"])
def test_sequences_are_replay_buffer(pair, tmp_path):
    server, _, c, _, ref = pair
    rng = np.random.default_rng(5)
    assert c.table["seq_len"] == 4 and c.table["seq_stride"] == 2
    start = 0
    for n in (9, 6, 13, 8, 11):
        ends = np.zeros(n, np.uint8)
        ends[-1] = per.END_TERMINATED if n % 2 else per.END_TRUNCATED
        ends[n // 2] = per.END_TERMINATED
        td = rng.random(n) if n > 9 else None
        c.insert(items(n, start), ends=ends, td=td)
        ref.add_batch(items(n, start), ends=ends, td=td)
        start += n
    for kw in ({}, {"unique": True}, {"beta": 0.7}):
        got = c.sample(6, sequences=True, **kw)
        want = ref.sample(6, sequences=True, **kw)
        assert got.items.shape == (6, 4) and got.mask.dtype == np.bool_
        same_batch(got, want, sequences=True)
        td = rng.random((6, 4)).astype(np.float32)
        assert (c.update(got.ids, td, sequences=True) ==
                ref.update_sequences(want["ids"], td))
    got, want = c.sample(5), ref.sample(5)
    same_batch(got, want)
    td = rng.random(5).astype(np.float32)
    assert c.update(got.ids, td) == ref.update(want["ids"], td)
    # sequences without items: ids, weights and masks
    got = c.sample(3, sequences=True, items=False)
    want = ref.sample(3, sequences=True)
    assert got.items is None
    same_batch(got, want, sequences=True)
    same_files(server, "seq", ref, tmp_path)


# ---------------------------------------------------------------------------
# (b): refusals raise per.Error, say why, and change nothing
# ---------------------------------------------------------------------------


def test_refusals_change_nothing(pair, tmp_path):
    server, c, s, ref, sref = pair
    c.insert(items(20))
    ref.add_batch(items(20))
    s.insert(items(12))
    sref.add_batch(items(12))
    b = c.sample(4)
    rb = ref.sample(4)

    def both(name, op, refop, *args, **kw):
        e = fails(name, op, *args, **kw)
        r = fails(name, refop, *args, **kw)
        # the server's message is the buffer's, with where it was refused
        why = str(r).split(": ", 1)[1].rsplit(" (", 1)[0]
        assert why in str(e) and "table 'replay'" in str(e), (e, r)
        return e

    both("PER_ERR_NAN", c.insert, ref.add_batch, items(3), td=[1, np.nan, 2])
    both("PER_ERR_ARG", c.insert, ref.add_batch, items(2), ends=[0, 3])
    both("PER_ERR_ARG", c.sample, ref.sample, 4, beta=-1.0)
    both("PER_ERR_TOO_FEW", c.sample, ref.sample, 21, unique=True)
    both("PER_ERR_ARG", c.sample, ref.sample, 2, sequences=True)
    e = fails("PER_ERR_NAN", c.update, b.ids, [1, 2, np.nan, 4])
    fails("PER_ERR_NAN", ref.update, rb["ids"], [1, 2, np.nan, 4])
    assert "td" in str(e)
    bad = np.array([1 << 40], np.uint64)
    both("PER_ERR_INDEX", c.update, ref.update, bad, [1.0])
    e = fails("PER_ERR_BATCH", c.sample, 0)
    assert "B 0" in str(e)
    fails("PER_ERR_ARG", c.update, b.ids, np.ones((4, 4)), sequences=True)
    # sequence ones
    sb = s.sample(2, sequences=True)
    srb = sref.sample(2, sequences=True)
    fails("PER_ERR_NAN", s.update, sb.ids, np.full((2, 4), np.nan), sequences=True)
    fails("PER_ERR_NAN", sref.update_sequences, srb["ids"], np.full((2, 4), np.nan))
    # checked here, before anything is sent
    with pytest.raises(ValueError, match="td has shape"):
        c.update(b.ids, [1.0])
    with pytest.raises(ValueError, match="no items"):
        c.insert(items(0))
    with pytest.raises(ValueError, match="fields do not match"):
        c.insert({"obs": np.zeros((2, 3))})
    with pytest.raises(ValueError, match="float32"):
        c.insert(items(2), td=[1e300, 1])
    # nothing changed: the same draws, updates and files as the reference
    assert c.info()["refused"] == 9
    assert c.update(b.ids, [1, 2, 3, 4]) == ref.update(rb["ids"], [1, 2, 3, 4])
    same_batch(c.sample(16), ref.sample(16))
    same_batch(s.sample(4, sequences=True), sref.sample(4, sequences=True),
               sequences=True)
    same_files(server, "replay", ref, tmp_path)
    same_files(server, "seq", sref, tmp_path)


# ---------------------------------------------------------------------------
# (c): raw messages, malformed or refused, through a raw DEALER
# ---------------------------------------------------------------------------


def request(op, body=b"", name=b"t", rid=77, version=1, magic=b"PERQ"):
    return struct.pack("<4sHHQB", magic, version, op, rid, len(name)) + name + body


def ask(sock, payload, timeout_ms=10000):
    sock.send(payload)
    assert sock.poll(timeout_ms), "no reply"
    frames = sock.recv_multipart()
    rep = frames[-1]
    magic, version, op, rid, status, mlen, zero = struct.unpack_from("<4sHHQiHH", rep)
    assert (magic, version, zero) == (b"PERR", 1, 0)
    msg = rep[24:24 + mlen].decode() if status else ""
    if status:
        assert len(rep) == 24 + mlen and mlen > 0
    else:
        assert mlen == 0
    return op, rid, status, msg, rep[24:]


def test_raw_messages(tmp_path):
    ctx = zmq.Context.instance()
    # a small max_message: 4096 bytes, a 16-byte item
    with pn.Server({"t": pn.Table(300, {"x": (np.float32, 4)}, seed=1)},
                   ANY, max_message=4096) as server:
        server.start()
        d = ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.LINGER, 0)
        d.connect(server.endpoint)
        F, V, I, B, A = (_per.PER_ERR_FORMAT, _per.PER_ERR_VERSION,
                         _per.PER_ERR_INDEX, _per.PER_ERR_BATCH,
                         _per.PER_ERR_ARG)
        item = np.arange(4, dtype=np.float32).tobytes()
        ins = lambda n, flags=0, extra=b"": request(
            2, struct.pack("<II", n, flags) + item * n + extra)
        cases = [
            (b"", F, 0, 0, "shorter than a header"),
            (b"PERQ\x01\x00\x05\x00", F, 0, 0, "shorter than a header"),
            (request(5, magic=b"QREP"), F, 0, 0, "PERQ"),
            (request(5, version=2), V, 5, 77, "version 2"),
            (request(9), F, 9, 77, "unknown op"),
            (request(5, name=b"nope"), I, 5, 77, "no table named \"nope\""),
            (request(5, name=b""), F, 5, 77, "name"),
            (request(5, name=b"t")[:-1], F, 5, 77, "shorter than its table name"),
            # bodies too short and too long, op by op
            (request(1, struct.pack("<I", 16)), F, 1, 77, "hello"),
            (request(1, struct.pack("<IH", 16, 0) + b"x"), F, 1, 77, "hello"),
            (request(2, struct.pack("<I", 1)), F, 2, 77, "insert"),
            (ins(2)[:-1], F, 2, 77, "insert"),
            (ins(2, extra=b"\0"), F, 2, 77, "insert"),
            (ins(2, 1), F, 2, 77, "insert"),          # ends promised, absent
            (request(3, struct.pack("<IIdI", 4, 0, 0.0, 0)), F, 3, 77, "sample"),
            (request(3, struct.pack("<IIdII", 4, 0, 0.0, 0, 0) + b"\0"), F, 3,
             77, "sample"),
            (request(4, struct.pack("<II", 1, 0) + b"\0" * 11), F, 4, 77,
             "update"),
            (request(4, struct.pack("<II", 1, 0) + b"\0" * 13), F, 4, 77,
             "update"),
            (request(4, struct.pack("<I", 1)), F, 4, 77, "update"),
            (request(5, b"\0"), F, 5, 77, "info"),
            # counts and flags the server refuses itself
            (ins(0), B, 2, 77, "n is 0"),
            (ins(1, 4), A, 2, 77, "unknown flags"),
            (request(3, struct.pack("<IIdII", 0, 0, 0.0, 0, 0)), B, 3, 77, "B 0"),
            (request(3, struct.pack("<IIdII", 1, 0, 0.0, 0, 2)), A, 3, 77,
             "want"),
            (request(3, struct.pack("<IIdII", 4000, 0, 0.0, 0, 0)), B, 3, 77,
             "larger than the largest message"),
            (request(4, struct.pack("<II", 0, 2)), A, 4, 77, "unknown flags"),
            (request(4, struct.pack("<II", 0, 1)), A, 4, 77, "no sequences"),
            (request(1, struct.pack("<IH", 12, 0)), _per.PER_ERR_MISMATCH, 1,
             77, "12 bytes"),
        ]
        for payload, status, op, rid, words in cases:
            got = ask(d, payload)
            assert got[:3] == (op, rid, status), (payload, got)
            assert words in got[3], (payload, got[3])
        # a message past max_message: ZeroMQ drops that connection; the
        # server goes on serving the others
        big = ctx.socket(zmq.DEALER)
        big.setsockopt(zmq.LINGER, 0)
        big.connect(server.endpoint)
        big.send(ins(300))
        assert not big.poll(200)
        big.close(0)
        # good requests after all that: an insert and the counters
        op, rid, status, _, body = ask(d, ins(3))
        assert (op, status) == (2, 0)
        assert struct.unpack_from("<QII", body) == (0, 3, 0)
        op, rid, status, _, body = ask(d, request(5, rid=5))
        assert (op, rid, status) == (5, 5, 0)
        info = dict(zip(("capacity", "item_size", "size", "seq_len"),
                        struct.unpack_from("<4I", body)))
        assert info == {"capacity": 300, "item_size": 16, "size": 3, "seq_len": 0}
        # the table's count: all but the 7 refused before a table was
        # found (header, magic, version, name)
        assert struct.unpack_from("<Q", body, 72)[0] == len(cases) - 7
        # a REQ socket: the empty delimiter frame goes back too
        r = ctx.socket(zmq.REQ)
        r.setsockopt(zmq.LINGER, 0)
        r.connect(server.endpoint)
        op, rid, status, _, body = ask(r, request(3, struct.pack(
            "<IIdII", 2, 0, 0.0, 0, 0), rid=9))
        assert (op, rid, status) == (3, 9, 0)
        nb, s = struct.unpack_from("<II", body)
        assert (nb, s) == (2, 1) and len(body) == 16 + 2 * (12 + 16)
        r.close(0)
        d.close(0)


# ---------------------------------------------------------------------------
# (d): HELLO, endpoints, timeouts, spec texts, checkpoints
# ---------------------------------------------------------------------------


def test_hello_mismatch():
    with pn.Server({"replay": pn.Table(16, ITEM)}, ANY) as server:
        server.start()
        other = {"obs": (np.float32, 3), "action": np.uint32}  # same size
        e = fails("PER_ERR_MISMATCH", pn.Client, server.endpoint, dtype=other)
        assert "layout" in str(e) and "<u4" in str(e)
        e = fails("PER_ERR_MISMATCH", pn.Client, server.endpoint,
                  dtype={"obs": (np.float32, 5)})
        assert "16 bytes" in str(e) and "20 bytes" in str(e)
        fails("PER_ERR_MISMATCH", pn.Client, server.endpoint, item_size=12)
        fails("PER_ERR_INDEX", pn.Client, server.endpoint, "nope", dtype=ITEM)
        # the item size alone, or nothing at all: raw rows
        with pn.Client(server.endpoint, item_size=16) as raw, \
                pn.Client(server.endpoint) as bare, \
                pn.Client(server.endpoint, dtype=ITEM) as typed:
            assert raw.table["item_size"] == 16 and bare.table is None
            assert typed.insert(items(4)) == 0
            recs = np.zeros(4, per.ReplayBuffer(4, ITEM).dtype)
            for k, v in items(4, 4).items():
                recs[k] = v
            assert bare.insert(recs.view(np.uint8).reshape(4, 16)) == 1
            b = raw.sample(3, unique=True)
            assert b.items.dtype == np.uint8 and b.items.shape == (3, 16)
            b2 = bare.sample(2)
            assert b2.items.shape == (2, 16)
            got = typed.sample(8, unique=True)
            rows = {r.tobytes() for r in got.items}
            assert rows == {r.tobytes() for r in recs} | {
                r.tobytes() for r in _recs(items(4))}
            with pytest.raises(ValueError, match="bytes"):
                raw.insert(np.zeros((2, 12), np.uint8))


def _recs(fields):
    r = np.zeros(len(fields["action"]), per.ReplayBuffer(4, ITEM).dtype)
    for k, v in fields.items():
        r[k] = v
    return r


def test_endpoints_and_timeouts():
    t = {"replay": pn.Table(8, ITEM)}
    for ep in ("tcp://0.0.0.0:0", "tcp://*:0", "tcp://eth0:0",
               "tcp://10.1.2.3:5555"):
        with pytest.raises(ValueError, match="CURVE.*insecure=True"):
            pn.Server(t, ep)
    with pn.Server(t, "tcp://0.0.0.0:0", insecure=True) as s:
        assert s.endpoint.startswith("tcp://0.0.0.0:")
    # a late reply is dropped: the first request times out before the
    # server serves, the second gets its own reply, not the first's
    with pn.Server(t, ANY) as server:
        c = pn.Client(server.endpoint, timeout=0.2)
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="no reply"):
            c.info()
        assert time.monotonic() - t0 < 2
        server.start()
        c.timeout = 5.0
        assert c.insert(_recs(items(2)).view(np.uint8).reshape(2, 16)) == 0
        assert c.info()["size"] == 2
        c.close()
        with pytest.raises(ValueError, match="closed"):
            c.info()
    # serve() on a thread of the caller's, until its event is set
    with pn.Server(t, ANY) as server:
        stop = threading.Event()
        th = threading.Thread(target=server.serve, args=(stop,))
        th.start()
        with pn.Client(server.endpoint, dtype=ITEM) as c:
            assert c.insert(items(3)) == 0
        with pytest.raises(RuntimeError, match="serving already"):
            server.serve()
        stop.set()
        th.join(5)
        assert not th.is_alive()
        server.start()  # and again, in its own thread
        with pn.Client(server.endpoint, dtype=ITEM) as c:
            assert c.info()["size"] == 3
    with pytest.raises(ValueError, match="closed"):
        server.start()
    # nothing listening: HELLO times out at construction
    with pytest.raises(TimeoutError):
        pn.Client("tcp://127.0.0.1:1", dtype=ITEM, timeout=0.1)


def _ipv6_loopback():
    """Whether this machine has an IPv6 loopback (::1) to bind."""
    import socket
    try:
        with socket.socket(socket.AF_INET6) as sk:
            sk.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback (::1) here")
def test_ipv6_loopback():
    # a bracketed address is IPv6: the server binds it and clients reach
    # it (ZeroMQ needs its IPV6 option on both sockets for that), with no
    # insecure=True, as ::1 is loopback
    with pn.Server({"replay": pn.Table(8, ITEM)}, "tcp://[::1]:0") as server:
        assert server.endpoint.startswith("tcp://[::1]:")
        server.start()
        with pn.Client(server.endpoint, dtype=ITEM, timeout=5) as c:
            assert c.insert(items(3)) == 0
            assert c.info()["size"] == 3


def test_spec_text_and_checkpoints(tmp_path):
    spec = ("# two tables\n"
            "table a\n capacity 8\n item_size 4\n alpha 0.5\n flags max_live\n"
            "\ntable b\ncapacity 4\nitem_size 16\nseed 9\n"
            f"layout {per.ReplayBuffer(4, ITEM).layout}\n")
    with pn.Server(spec, ANY) as server:
        assert server.tables == ["a", "b"]
        cfg = server.config("a")
        assert cfg["alpha"] == 0.5 and cfg["flags"] == _per.MAX_LIVE
        assert server.config("b")["layout"] == per.ReplayBuffer(4, ITEM).layout
        with pytest.raises(KeyError):
            server.config("c")
        # a ReplayBuffer's checkpoint into a table and back
        ref = per.ReplayBuffer(4, ITEM, seed=9)
        ref.add_batch(items(3))
        ref.save(tmp_path / "ref.per")
        server.load("b", tmp_path / "ref.per")
        server.start()
        with pn.Client(server.endpoint, "b", dtype=ITEM) as c:
            same_batch(c.sample(5), ref.sample(5))
        server.save("b", tmp_path / "b.per")
        back = per.ReplayBuffer.from_file(tmp_path / "b.per")
        assert back.dtype == ref.dtype
        same_files(server, "b", ref, tmp_path)
        fails("PER_ERR_MISMATCH", server.load, "a", tmp_path / "ref.per")
        with pytest.raises(KeyError):
            server.save("c", tmp_path / "c.per")
    e = fails("PER_ERR_ARG", pn.Server, "table a\ncapacity 8\nbogus 1\n", ANY)
    assert "line 3" in str(e) and "bogus" in str(e)
    fails("PER_ERR_ARG", pn.Server, "table a\ncapacity 8\n", ANY)
    # the Table's own checks
    with pytest.raises(TypeError, match="one of them"):
        pn.Table(8)
    with pytest.raises(TypeError, match="unexpected keyword"):
        pn.Table(8, ITEM, gamma=0.9)
    with pytest.raises(OverflowError, match="seed"):
        pn.Table(8, ITEM, seed=-1)
    with pytest.raises(ValueError, match="unknown flag"):
        pn.Table(8, ITEM, flags="fast")
    with pytest.raises(ValueError, match="name"):
        pn.Table(8, ITEM).spec("a b ")
    tb = pn.Table(8, 12, flags="weights_buffer_max|max_live", live_max=True,
                  seq_len=2)
    assert tb.layout == "" and tb.item_size == 12
    assert tb.config["flags"] == _per.WEIGHTS_BUFFER_MAX | _per.MAX_LIVE
    assert "layout" not in tb.spec("x")


# ---------------------------------------------------------------------------
# (e): seed 003, TrajectoryAccumulator and TcpClient
# ---------------------------------------------------------------------------

T = 64


def seed_example():
    return {
        "step": {
            "obs": np.zeros((T, 4), dtype=np.float32),
            "reward": np.zeros((T,), dtype=np.float32),
        },
        "episode": {
            "return": np.zeros((1,), dtype=np.float32),
            "length": np.zeros((1,), dtype=np.float32),
        },
        "final_step": {
            "obs": np.zeros((4,), dtype=np.float32),
            "reward": np.zeros((), dtype=np.int32),
        },
    }


def rollout(buf, r, steps=T):
    """Seed 003's loop, rollout r: obs [r, t, t, t], reward t / 2."""
    ret = 0.0
    for t in range(steps):
        buf.add("step", {"obs": np.array([r, t, t, t], np.float32),
                         "reward": t / 2})
        ret += t / 2
    buf.add("episode", {"return": np.array([ret]), "length": np.array([steps])})
    buf.add("final_step", {"obs": np.full(4, r, np.float32), "reward": r})
    return ret


def test_seed_003(tmp_path):
    example = seed_example()
    dt = pn.example_dtype(example)
    assert dt.names == ("step", "episode", "final_step")
    assert dt["step"] == per.TrajectoryAccumulator(example).timescales["step"]["dtype"]
    assert dt["episode"]["return"].shape == (1,)
    assert dt["final_step"]["reward"] == np.int32
    table = pn.Table(1000, example=example, seed=3)
    with pn.Server({"replay": table}, ANY) as server:
        server.start()
        port = int(server.endpoint.rsplit(":", 1)[1])
        client = pn.TcpClient("localhost", port, example)
        buf = per.TrajectoryAccumulator(example)
        ref = per.ReplayBuffer(1000, dt, seed=3)
        returns = {}
        # send(buf.build()) after T adds, as the seed does; send(buf)
        # with an episode end and a partial rollout
        returns[0] = rollout(buf, 0)
        assert client.send(buf.build()) == 0
        returns[1] = rollout(buf, 1)
        buf.end(per.END_TERMINATED)
        assert client.send(buf) == 1
        returns[2] = rollout(buf, 2, steps=10)
        buf.end(per.END_TRUNCATED)
        assert client.send(buf) == 2
        assert client.info()["size"] == 2 * T + 10
        got = client.sample(2 * T + 10, unique=True)
        seen = set()
        for rec in got.items:
            r, t = int(rec["step"]["obs"][0]), int(rec["step"]["obs"][1])
            seen.add((r, t))
            assert list(rec["step"]["obs"]) == [r, t, t, t]
            assert rec["step"]["reward"] == t / 2
            assert rec["episode"]["return"][0] == np.float32(returns[r])
            assert rec["episode"]["length"][0] == (10 if r == 2 else T)
            assert list(rec["final_step"]["obs"]) == [r] * 4
            assert rec["final_step"]["reward"] == r
        assert seen == {(r, t) for r in range(3) for t in range(T if r < 2 else 10)}
        # the same items and ends in a ReplayBuffer: the same file
        for r, (n, end) in enumerate(((T, None), (T, per.END_TERMINATED),
                                      (10, per.END_TRUNCATED))):
            recs = np.zeros(n, dt)
            for t in range(n):
                recs[t]["step"]["obs"] = [r, t, t, t]
                recs[t]["step"]["reward"] = t / 2
            recs["episode"]["return"] = returns[r]
            recs["episode"]["length"] = n
            recs["final_step"]["obs"] = r
            recs["final_step"]["reward"] = r
            ref.add_batch(recs, ends=end)
        ref.sample(2 * T + 10, unique=True)
        same_files(server, "replay", ref, tmp_path)
        # a built tree with n and ends; wrong trees
        rollout(buf, 3, steps=5)
        tree = buf.build()
        assert client.send(tree, n=5, ends=per.END_TERMINATED) == 3
        assert client.info()["size"] == 2 * T + 15
        with pytest.raises(ValueError, match="timescales"):
            client.send({"step": tree["step"]})
        with pytest.raises(ValueError, match="steps to send"):
            client.send(tree, n=T + 1)
        with pytest.raises(ValueError, match="not the client's example"):
            client.send(per.TrajectoryAccumulator({"step": example["step"]}))
        client.close()
    two = dict(example, more={"x": np.zeros((3, 2))})
    with pytest.raises(ValueError, match="exactly one buffered"):
        pn.example_dtype(two)
    with pytest.raises(ValueError, match="exactly one buffered"):
        pn.example_dtype({"episode": example["episode"]})


# ---------------------------------------------------------------------------
# the rate limiter: min_size, samples_per_insert, error_margin
# ---------------------------------------------------------------------------

def test_rate_limiter(tmp_path):
    """The side that runs ahead is answered busy (wait=False) or waits
    until the other side catches up (wait=True); a busy request changes
    nothing; INFO counts it; a load puts the ratio in the middle."""
    table = pn.Table(100, ITEM, min_size=10, samples_per_insert=2,
                     error_margin=8, **CFG)
    assert "min_size 10\n" in table.spec("r")
    with pn.Server({"r": table}, ANY) as server:
        server.start()
        c = pn.Client(server.endpoint, "r", dtype=ITEM, wait=False)
        fails("PER_ERR_BUSY", c.sample, 1)           # empty: below min_size
        c.insert(items(9))                           # d = 18
        e = fails("PER_ERR_BUSY", c.sample, 1)       # 9 items < min_size
        assert "fewer than min_size 10" in str(e)
        c.insert(items(11, 9))                       # d = 40
        e = fails("PER_ERR_BUSY", c.insert, items(1))
        assert "inserting is ahead" in str(e)
        c.sample(16)                                 # d = 24
        c.sample(16)                                 # d = 8 < 12
        e = fails("PER_ERR_BUSY", c.sample, 1)
        assert "sampling is ahead" in str(e)
        info = c.info()
        assert (info["items_inserted"], info["items_sampled"], info["busy"],
                info["min_size"], info["samples_per_insert"],
                info["error_margin"]) == (20, 32, 4, 10, 2.0, 8.0)
        assert info["size"] == 20 and info["samples"] == 2

        # wait=True: a sample that is ahead waits for an actor's insert
        w = pn.Client(server.endpoint, "r", dtype=ITEM, timeout=5.0)
        actor = pn.Client(server.endpoint, "r", dtype=ITEM)
        timer = threading.Timer(0.3, lambda: actor.insert(items(2, 20)))
        t0 = time.monotonic()
        timer.start()
        batch = w.sample(4)                          # waits for d >= 12
        waited = time.monotonic() - t0
        timer.join()
        assert batch.ids.shape == (4,) and waited >= 0.25
        # ... and gives up after its timeout, having changed nothing
        short = pn.Client(server.endpoint, "r", dtype=ITEM, timeout=0.2)
        before = short.info()
        fails("PER_ERR_BUSY", short.sample, 1)       # d = 12 - 4 = 8 < 12
        after = short.info()
        assert after["items_sampled"] == before["items_sampled"]
        assert after["step"] == before["step"] and after["busy"] > before["busy"]

        # a load counts the items loaded as inserted, d in the middle
        path = tmp_path / "r.per"
        server.save("r", path)
        server.load("r", path)
        info = c.info()
        assert info["items_inserted"] == 22 and info["items_sampled"] == 24
        for cl in (c, w, actor, short):
            cl.close()
    # the limiter's values are checked on the server's side
    with pytest.raises(per.Error, match="min_size"):
        pn.Server({"r": pn.Table(4, ITEM, min_size=5)}, ANY)
    with pytest.raises(per.Error, match="error_margin"):
        pn.Server({"r": pn.Table(4, ITEM, error_margin=-1.0)}, ANY)


# ---------------------------------------------------------------------------
# once-only request ids, checkpoints of the whole server, resend
# ---------------------------------------------------------------------------

ONCE = 1 << 63
RAW = {"x": (np.float32, 4)}  # a 16-byte item


def raw_insert(n, rid, start=0, name=b"t"):
    """An INSERT of n RAW items with request id rid, as bytes."""
    rows = np.arange(start * 4, (start + n) * 4, dtype=np.float32).tobytes()
    return request(2, struct.pack("<II", n, 0) + rows, name=name, rid=rid)


def raw_dealer(endpoint):
    d = zmq.Context.instance().socket(zmq.DEALER)
    d.setsockopt(zmq.LINGER, 0)
    d.connect(endpoint)
    return d


def raw_reply(sock, payload):
    """The whole reply (header and body) to payload."""
    sock.send(payload)
    assert sock.poll(10000), "no reply"
    return sock.recv_multipart()[-1]


def raw_info(sock, name=b"t"):
    op, rid, status, _, body = ask(sock, request(5, name=name, rid=1))
    assert status == 0
    return dict(zip(pn._INFO_KEYS, pn._INFO.unpack_from(body)))


def test_once_only_requests():
    """A once-only INSERT or UPDATE sent again gets the first reply and
    applies nothing; its id with the other op is refused; a plain id is
    applied each time it comes."""
    with pn.Server({"t": pn.Table(64, RAW, seed=1)}, ANY) as server:
        server.start()
        d = raw_dealer(server.endpoint)
        rid = ONCE | 12345
        first = raw_reply(d, raw_insert(3, rid))
        assert struct.unpack_from("<i", first, 16)[0] == 0
        assert struct.unpack_from("<QII", first, 24) == (0, 3, 0)
        again = raw_reply(d, raw_insert(3, rid))
        assert again == first  # header and body, byte for byte
        info = raw_info(d)
        assert (info["size"], info["added"], info["inserts"]) == (3, 3, 1)
        assert server.repeats == 1
        # the same id as an UPDATE: refused, nothing applied
        upd = request(4, struct.pack("<II", 1, 0) + struct.pack("<Qf", 0, 1.0),
                      rid=rid)
        op, got, status, msg, _ = ask(d, upd)
        assert (op, got, status) == (4, rid, _per.PER_ERR_ARG)
        assert "once-only request id" in msg and "INSERT" in msg
        assert raw_info(d)["updates"] == 0
        # a once-only UPDATE, twice: the same stale count, applied once
        _, _, status, _, body = ask(d, request(3, struct.pack(
            "<IIdII", 2, 0, 0.0, 0, 1)))
        ids = body[16:32]  # two sampled ids, without items
        urid = ONCE | 777
        op, _, status, _, body = ask(d, request(
            4, struct.pack("<II", 2, 0) + ids + struct.pack("<ff", 2, 3),
            rid=urid))
        assert (op, status) == (4, 0)
        op, _, status, _, body2 = ask(d, request(
            4, struct.pack("<II", 2, 0) + ids + struct.pack("<ff", 9, 9),
            rid=urid))
        assert (op, status, body2) == (4, 0, body)
        assert raw_info(d)["updates"] == 1 and server.repeats == 2
        # a plain id (bit 63 clear) is never remembered: applied twice
        plain = [raw_reply(d, raw_insert(2, 4321, 10)) for _ in range(2)]
        assert [struct.unpack_from("<Q", r, 24)[0] for r in plain] == [1, 2]
        info = raw_info(d)
        assert (info["size"], info["added"], info["inserts"]) == (7, 7, 3)
        assert server.repeats == 2
        d.close(0)


def test_server_checkpoint(tmp_path):
    """checkpoint=: saved at close, restored by the next Server on the
    directory (tables, counters and the once-only requests remembered);
    save_all(dir) and restore_all(dir) by hand."""
    ckpt = tmp_path / "ckpt" / "server"  # made when missing
    tables = {"replay": pn.Table(64, ITEM, **CFG), "raw": pn.Table(32, RAW)}
    server = pn.Server(tables, ANY, checkpoint=ckpt)
    assert server.checkpoint == str(ckpt) and ckpt.is_dir()
    assert server.generation == 0 and server.every == 0
    server.start()
    c = pn.Client(server.endpoint, dtype=ITEM)
    c.insert(items(10), ends=per.END_TERMINATED)
    c.insert(items(6, 10), td=np.arange(6) / 2)
    b = c.sample(8)
    c.update(b.ids, np.ones(8))
    d = raw_dealer(server.endpoint)
    first = raw_reply(d, raw_insert(3, ONCE | 99, name=b"raw"))
    assert struct.unpack_from("<i", first, 16)[0] == 0
    before = c.info()
    d.close(0)
    c.close()
    server.close()  # saves
    assert (ckpt / "server.state").exists() and server.generation == 1
    assert sorted(p.name for p in ckpt.iterdir()) == [
        "server.state", "table-0.1.per", "table-1.1.per"]

    with pn.Server(tables, ANY, checkpoint=ckpt) as again:
        assert again.generation == 1 and again.repeats == 0
        again.start()
        with pn.Client(again.endpoint, dtype=ITEM) as c2:
            assert c2.info() == before
            # the table file is the buffer's checkpoint
            ref = per.ReplayBuffer.from_file(ckpt / "table-0.1.per")
            same_batch(c2.sample(8), ref.sample(8))
        d = raw_dealer(again.endpoint)
        # remembered: answered as the first time, applied once
        assert raw_reply(d, raw_insert(3, ONCE | 99, name=b"raw")) == first
        assert raw_info(d, b"raw")["added"] == 3 and again.repeats == 1
        op, _, status, _, body = ask(d, raw_insert(2, ONCE | 100, 3,
                                                   name=b"raw"))
        assert (op, status) == (2, 0)  # a new one is applied
        assert struct.unpack_from("<QII", body) == (1, 5, 0)
        assert raw_info(d, b"raw")["added"] == 5
        d.close(0)
        # by hand: another directory (which must exist), and back
        other = tmp_path / "other"
        with pytest.raises(per.Error) as e:
            again.save_all(other)
        assert e.value.name == "PER_ERR_IO" and "does the directory" in str(e.value)
        other.mkdir()
        again.save_all(other)
        assert again.generation == 2 and (other / "table-0.2.per").exists()
        again.save_all()  # the checkpoint directory
        assert again.generation == 3
        assert not (ckpt / "table-0.1.per").exists()  # the old generation
        again.restore_all(other)
        assert again.generation == 2
    with pn.Server(tables, ANY, checkpoint=ckpt) as third:
        assert third.generation == 4  # close saved after the restore
    with pn.Server(tables, ANY) as plain:
        with pytest.raises(ValueError, match="no checkpoint directory"):
            plain.save_all()


def test_server_checkpoint_every(tmp_path):
    """every=: the serving loop saves while it serves, when requests came;
    a save it cannot make is warned of, and serving goes on."""
    t = {"replay": pn.Table(16, ITEM)}
    with pytest.raises(ValueError, match="checkpoint="):
        pn.Server(t, ANY, every=1.0)
    with pytest.raises(ValueError, match="every"):
        pn.Server(t, ANY, checkpoint=tmp_path, every=-1.0)
    ckpt = tmp_path / "ckpt"
    server = pn.Server(t, ANY, checkpoint=ckpt, every=0.05)
    server.start()
    c = pn.Client(server.endpoint, dtype=ITEM)
    c.insert(items(4))

    def soon(what, limit=3.0):
        end = time.monotonic() + limit
        while not what():
            assert time.monotonic() < end, "not within the limit"
            time.sleep(0.01)

    soon(lambda: (ckpt / "server.state").exists())
    soon(lambda: server.generation >= 1)
    gen = server.generation
    time.sleep(0.2)  # no request: no save
    assert server.generation == gen
    # the directory gone: the loop's save fails, serving goes on
    for p in ckpt.iterdir():
        p.unlink()
    ckpt.rmdir()
    with pytest.warns(RuntimeWarning, match="not saved"):
        c.insert(items(2))
        soon(lambda: server.save_error is not None)
    assert server.save_error.name == "PER_ERR_IO"
    assert c.info()["size"] == 6
    c.close()
    with pytest.raises(per.Error, match="does the directory exist"):
        server.close()


def test_restore_refused(tmp_path):
    """A checkpoint of other tables is refused, naming the difference;
    nothing is bound then."""
    ckpt = tmp_path / "ckpt"
    pn.Server({"a": pn.Table(8, ITEM)}, ANY, checkpoint=ckpt).close()
    assert (ckpt / "server.state").exists()
    e = fails("PER_ERR_MISMATCH", pn.Server, {"b": pn.Table(8, ITEM)},
              f"ipc://{tmp_path}/sock", checkpoint=ckpt)
    assert 'table "a" is not the server\'s' in str(e)
    assert not (tmp_path / "sock").exists()  # not bound
    e = fails("PER_ERR_MISMATCH", pn.Server, {"a": pn.Table(16, ITEM)}, ANY,
              checkpoint=ckpt)
    assert "capacity 8" in str(e) and "capacity 16" in str(e)
    e = fails("PER_ERR_MISMATCH", pn.Server, {"a": pn.Table(8, ITEM),
                                              "b": pn.Table(8, ITEM)}, ANY,
              checkpoint=ckpt)
    assert "1 tables, the server 2" in str(e)
    with pn.Server({"a": pn.Table(8, ITEM)}, ANY) as s:
        e = fails("PER_ERR_IO", s.restore_all, tmp_path / "none")
        assert "server.state" in str(e) and "cannot be opened" in str(e)
    with pn.Server({"b": pn.Table(8, ITEM)}, ANY) as s:
        e = fails("PER_ERR_MISMATCH", s.restore_all, ckpt)
        assert 'table "a" is not the server\'s' in str(e)


def fake_server(answer_from, total):
    """A ROUTER that records total requests and answers those from the
    answer_from-th on (0-based) as an INSERT's reply (trajectory 41);
    returns its endpoint, the requests and its thread, which ends after
    the last one (or 3 s without one)."""
    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    seen = []

    def run():
        while len(seen) < total and router.poll(3000):
            ident, req = router.recv_multipart()
            seen.append(req)
            if len(seen) > answer_from:
                _, _, op, rid, _ = struct.unpack_from("<4sHHQB", req)
                router.send_multipart([ident, struct.pack(
                    "<4sHHQiHHQII", b"PERR", 1, op, rid, 0, 0, 0, 41, 2, 0)])
        router.close(0)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return f"tcp://127.0.0.1:{port}", seen, th


def test_client_resends():
    """No reply within the timeout: the request is sent once more, the
    same bytes, on a new connection; without resend the timeout raises."""
    endpoint, seen, th = fake_server(1, 3)
    rows = np.zeros((2, 16), np.uint8)
    with pn.Client(endpoint, timeout=0.3) as c:  # no HELLO: raw rows
        assert c.resend
        t0 = time.monotonic()
        assert c.insert(rows) == 41
        assert 0.25 < time.monotonic() - t0 < 2
        assert len(seen) == 2 and seen[0] == seen[1]
        rid = struct.unpack_from("<Q", seen[0], 8)[0]
        assert rid >> 63 == 1
        assert c.insert(rows) == 41  # the next id, at once
        assert struct.unpack_from("<Q", seen[2], 8)[0] == rid + 1
    th.join(5)
    endpoint, seen, th = fake_server(1, 1)
    with pn.Client(endpoint, timeout=0.5, resend=False) as c:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="no reply"):
            c.insert(rows)
        assert time.monotonic() - t0 < 0.9  # one wait, not two
    th.join(5)
    assert len(seen) == 1
    # ids wrap within 63 bits
    endpoint, seen, th = fake_server(0, 2)
    with pn.Client(endpoint, timeout=2.0) as c:
        c._next_id = (1 << 63) - 1
        c.insert(rows)
        c.insert(rows)
    th.join(5)
    assert [struct.unpack_from("<Q", r, 8)[0] for r in seen] == [
        (1 << 64) - 1, 1 << 63]


def test_server_queue():
    """queue=: the ROUTER's high-water marks, each way; out of range
    refused before anything is bound."""
    with pn.Server({"t": pn.Table(8, RAW)}, ANY, queue=4) as server:
        assert server.queue == 4
        assert server._sock.getsockopt(zmq.SNDHWM) == 4
        assert server._sock.getsockopt(zmq.RCVHWM) == 4
    with pn.Server({"t": pn.Table(8, RAW)}, ANY) as server:
        assert server.queue == 16 and server._sock.getsockopt(zmq.SNDHWM) == 16
    for bad in (0, 1000001):
        with pytest.raises(ValueError, match="queue is 1 to 1000000"):
            pn.Server({"t": pn.Table(8, RAW)}, ANY, queue=bad)
    with pytest.raises(OverflowError):  # as every count (config.count)
        pn.Server({"t": pn.Table(8, RAW)}, ANY, queue=-1)


def test_curve():
    """CURVE: a listed client is served on an address other machines
    reach; another key, no CURVE, or the wrong server key get no reply;
    keys that are not keys are refused before anything is bound or
    sent."""
    srv_pub, srv_sec = zmq.curve_keypair()
    a_pub, a_sec = zmq.curve_keypair()
    b_pub, b_sec = zmq.curve_keypair()
    tables = {"t": pn.Table(16, RAW)}
    with pn.Server(tables, "tcp://0.0.0.0:0", curve_secret=srv_sec,
                   curve_clients=[a_pub.decode()]) as server:
        server.start()
        ep = "tcp://127.0.0.1:" + server.endpoint.rsplit(":", 1)[1]
        with pn.Client(ep, "t", dtype=RAW, curve=(srv_pub, a_pub, a_sec)) as c:
            c.insert({"x": np.ones((3, 4), np.float32)})
            assert c.info()["size"] == 3
        for curve in ((srv_pub, b_pub, b_sec), None, (b_pub, a_pub, a_sec)):
            with pytest.raises(TimeoutError) as e:
                pn.Client(ep, "t", dtype=RAW, curve=curve, timeout=0.2,
                          resend=False)
            assert ("CURVE" in str(e.value)) == (curve is not None)
    # refused before binding: secret alone on every address, clients
    # without a secret, bad keys
    with pytest.raises(ValueError, match="curve_clients="):
        pn.Server(tables, "tcp://0.0.0.0:0", curve_secret=srv_sec)
    with pytest.raises(ValueError, match="needs curve_secret"):
        pn.Server(tables, ANY, curve_clients=[a_pub])
    with pytest.raises(ValueError, match=r"curve_clients\[1\] is not a key"):
        pn.Server(tables, ANY, curve_secret=srv_sec,
                  curve_clients=[a_pub, b"~" * 40])
    with pytest.raises(TypeError, match="not one key"):
        pn.Server(tables, ANY, curve_secret=srv_sec, curve_clients=a_pub)
    with pytest.raises(ValueError, match=r"curve\[2\] is not a key"):
        pn.Client(ANY, curve=(srv_pub, a_pub, "short"))
    # Z85 characters whose group passes 2**32 - 1: not a key either
    with pytest.raises(ValueError, match=r"curve_secret is not a key"):
        pn.Server(tables, ANY, curve_secret="%" * 40)
    with pytest.raises(TypeError, match="curve is"):
        pn.Client(ANY, curve=(srv_pub, a_pub))
    # the secret alone, on loopback: encrypted, any client key
    with pn.Server(tables, ANY, curve_secret=srv_sec) as server:
        server.start()
        with pn.Client(server.endpoint, "t", dtype=RAW,
                       curve=(srv_pub, b_pub, b_sec)) as c:
            assert c.info()["capacity"] == 16
