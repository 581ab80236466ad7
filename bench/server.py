#!/usr/bin/env python3
"""bench/server.py [--out DIR] [--reps R] [--warm S] [--secs S] [--quick]
[--per-server PATH] [--reverb-python PATH] [--actors LIST] [--items LIST]
[--systems LIST]: a replay server on localhost, fed by actor processes
while one learner process samples and updates, against Reverb doing the
same, in the same run; and the same requests in process, as the
server's ceiling.

Items: rows of 64 bytes (a small transition) or 28,224 bytes (an
84 x 84 x 4 uint8 frame stack) of random bytes, in a table of 65,536 or
16,384 items (alpha 0.6, beta 0.4, eps 1e-6; no rate limiter), which
starts with 4,096 items (the learner's first batch never waits).
Systems, each a server on 127.0.0.1 with its clients in processes of
their own (spawned), one after another:

  per-server  the C program (server/per_server.c), --queue 16 (default)
  per.net     per.net.Server, the Python package's server (pyzmq's loop
              around the same per_net.h), in a process of its own
  reverb      reverb.Server (dm-reverb 0.14, TensorFlow 2.15), a
              Prioritized(0.6) selector, a Fifo remover, MinSize(1)
  in-process  per.net.Server.handle: the requests' bytes handed to
              per_net.h in the measuring process, no socket (insert
              alone, then sample + update alone): the most a
              single-threaded per-server can answer
  zmq-floor   a pyzmq ROUTER that answers a learner's sample and update
              with as many bytes as per's replies have, a DEALER that
              sends as many and does nothing with what comes back: the
              transport's own round trip, the least a batch can take
              over ZeroMQ on this machine

Clients, the same work on every system:

  actor    inserts chunks of 32 items, as fast as the server takes them.
           per: Client.insert(32 rows), one INSERT (a trajectory of 32
           items at the largest priority). reverb: a structured_writer
           whose one config makes an item of each step (the newest,
           priority 1.0), 32 x append(), then flush(), which waits for
           the server, so both sides wait for their 32 items once (the
           fastest of Reverb's Python writers here: trajectory_writer
           with a create_item a step ran at 0.63x its rate, Client.insert
           at 0.13x).
  learner  batches of 256: sample, then priorities from 256 TD errors
           (random, drawn before the clock). per: Client.sample(256)
           (items, ids, IS weights) + Client.update(ids, td). reverb:
           next() of TrajectoryDataset.from_table_signature(...,
           max_in_flight_samples_per_worker=512).batch(256), Reverb's
           training path (its docs say Client.sample is not), the IS
           weights (N p)^-0.4 / max from the sample's info in NumPy, and
           Client.mutate_priorities({key: |td| + eps}).

After every process has connected (a barrier), each runs --warm seconds
(default 1) unmeasured, then --secs (default 4) measured: an actor
counts the items of the inserts that returned in that window, the
learner the batches (a run where a process measured nothing, its one
call outlasting the window, is said and made again, once), and the wall
time (time.perf_counter) of each
batch's fetch: per, one SAMPLE round trip; reverb, next() of the
dataset, which keeps up to 512 samples in flight, so its figure is the
learner's wait and can be less than a round trip. Figures per run:
inserts/s (items), samples/s (items: batches x 256), the fetch's p50
and p99 in microseconds, and the server process's peak RSS (VmHWM).

A run is --reps (default 3) rounds; each round has every system at
every item size and actor count (--actors, default 0,1,4,8), in that
order, so slow drifts of a shared machine reach every side alike. It
writes DIR/server_runs.csv (every run) and DIR/server.csv: each
(system, item, actors) with the median of the rounds, their min and max,
and for per-server and per.net the ratio to reverb's median (above 1:
per is faster; for p99, reverb's over per's) and the share of the
in-process ceiling they reach, and the share of zmq-floor's samples/s
(the transport alone, measured without actors). reverb runs under --reverb-python (a
virtualenv with dm-reverb 0.14; bench/server.sh makes it); empty, or
--systems without reverb, leaves it out.

Internal: `bench/server.py one SYSTEM ITEM ACTORS` runs one
configuration and prints its figures as JSON on stdout.
"""

import argparse
import csv
import json
import multiprocessing as mp
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

B = 256
CHUNK = 32
ALPHA, BETA, EPS = 0.6, 0.4, 1e-6
ITEMS = {"64B": (64, 1 << 16), "28KB": (28224, 1 << 14)}
PREFILL = 4096
SYSTEMS = ("per-server", "per.net", "reverb", "in-process", "zmq-floor")
ALONE = ("in-process", "zmq-floor")  # measured without actors
TABLE = "replay"


def spec(item_bytes, capacity):
    return (f"table {TABLE}\ncapacity {capacity}\nitem_size {item_bytes}\n"
            f"alpha {ALPHA}\nbeta0 {BETA}\nbeta1 {BETA}\neps {EPS}\n")


def chunks(item_bytes, n=8, seed=1):
    import numpy as np
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (CHUNK, item_bytes), dtype=np.uint8)
            for _ in range(n)]


def tds(n=32, seed=2):
    import numpy as np
    rng = np.random.default_rng(seed)
    return [rng.random(B, dtype=np.float32) for _ in range(n)]


def hwm_mib(pid):
    """Peak resident memory of process pid in MiB (VmHWM), or -1."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return -1.0


# -- the servers ---------------------------------------------------------------

def pernet_server(text, q, stop):
    import per.net
    srv = per.net.Server(text, "tcp://127.0.0.1:0")
    q.put(srv.endpoint)
    srv.serve(stop)
    srv.close()


def reply_bytes(item_bytes):
    """The size of per's SAMPLE reply of B items (docs/PROTOCOL.md)."""
    return 24 + 16 + B * (8 + 4 + item_bytes)


def floor_server(item_bytes, q, stop):
    """A pyzmq ROUTER answering each request with as many bytes as per's
    reply to it would have (a sample's batch, or an update's 32 bytes)."""
    import zmq
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    q.put(f"tcp://127.0.0.1:{port}")
    big, small = bytes(reply_bytes(item_bytes)), bytes(32)
    while not stop.is_set():
        if not sock.poll(50):
            continue
        f = sock.recv_multipart(copy=False)
        sock.send_multipart([f[0], big if f[-1].bytes[:1] == b"S" else small],
                            copy=False)
    sock.close(0)
    ctx.term()


def reverb_table(item_bytes, capacity):
    import reverb
    import tensorflow as tf
    return reverb.Table(
        name=TABLE, sampler=reverb.selectors.Prioritized(ALPHA),
        remover=reverb.selectors.Fifo(), max_size=capacity,
        rate_limiter=reverb.rate_limiters.MinSize(1),
        signature={"x": tf.TensorSpec([item_bytes], tf.uint8)})


def reverb_server(item_bytes, capacity, q, stop):
    import reverb
    srv = reverb.Server(tables=[reverb_table(item_bytes, capacity)])
    q.put(f"localhost:{srv.port}")
    stop.wait()
    srv.stop()


class Server:
    """One system's server, started; .address for its clients."""

    def __init__(self, system, item, per_server):
        item_bytes, capacity = ITEMS[item]
        self.proc = None
        self.child = None
        if system == "per-server":
            d = tempfile.mkdtemp()
            ready = os.path.join(d, "ready")
            self.proc = subprocess.Popen(
                [per_server, "--table", TABLE, "--capacity", str(capacity),
                 "--item-size", str(item_bytes), "--alpha", str(ALPHA),
                 "--beta0", str(BETA), "--beta1", str(BETA), "--eps", str(EPS),
                 "--bind", "tcp://127.0.0.1:*", "--ready-file", ready,
                 "--quiet"])
            end = time.monotonic() + 30
            while not os.path.exists(ready):
                if self.proc.poll() is not None or time.monotonic() > end:
                    raise RuntimeError("per-server did not start")
                time.sleep(0.01)
            with open(ready) as f:
                self.address = f.readline().strip()
            self.pid = self.proc.pid
            return
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        self.stop = ctx.Event()
        if system == "per.net":
            target, args = pernet_server, (spec(item_bytes, capacity),)
        elif system == "zmq-floor":
            target, args = floor_server, (item_bytes,)
        else:
            target, args = reverb_server, (item_bytes, capacity)
        self.child = ctx.Process(target=target, args=args + (q, self.stop))
        self.child.start()
        self.address = q.get(timeout=120)
        self.pid = self.child.pid

    def close(self):
        rss = hwm_mib(self.pid)
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)
        else:
            self.stop.set()
            self.child.join(30)
            if self.child.is_alive():
                self.child.kill()
        return rss


# -- the clients ---------------------------------------------------------------

class PerClient:
    def __init__(self, address, item_bytes):
        import per.net
        self.c = per.net.Client(address, TABLE, item_size=item_bytes)

    def insert(self, rows):
        self.c.insert(rows)

    def fetch(self):
        return self.c.sample(B)

    def update(self, batch, td):
        self.c.update(batch.ids, td)


class ReverbClient:
    def __init__(self, address, item_bytes, learner=False):
        import reverb
        self.client = reverb.Client(address)
        self.writer = None
        self.it = None
        if learner:
            ds = reverb.TrajectoryDataset.from_table_signature(
                server_address=address, table=TABLE,
                max_in_flight_samples_per_worker=2 * B)
            self.it = iter(ds.batch(B, drop_remainder=True))
        else:
            from reverb import structured_writer as sw
            ref = sw.create_reference_step({"x": None})
            cfg = sw.create_config(pattern={"x": ref["x"][-1]}, table=TABLE)
            self.writer = self.client.structured_writer([cfg])

    def insert(self, rows):
        w = self.writer
        for row in rows:
            w.append({"x": row})
        w.flush()

    def fetch(self):
        import numpy as np
        s = next(self.it)
        keys = s.info.key.numpy()
        p = s.info.probability.numpy()
        n = s.info.table_size.numpy()
        items = s.data["x"].numpy()
        w = (n * p) ** -BETA
        w /= w.max()
        return keys, items, w.astype(np.float32)

    def update(self, batch, td):
        import numpy as np
        prio = (np.abs(td) + EPS).tolist()
        self.client.mutate_priorities(TABLE, dict(zip(batch[0].tolist(), prio)))


class FloorClient:
    """The bytes of per's sample and update, over a pyzmq DEALER, and
    nothing else: the reply's frame is not copied (per's client copies
    the items once, into the arrays it returns)."""

    def __init__(self, address, item_bytes):
        import zmq
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.connect(address)
        self.sample_req = b"S" + bytes(47)  # as long as per's SAMPLE
        self.update_req = b"U" + bytes(31 + B * 12)  # and UPDATE

    def fetch(self):
        self.sock.send(self.sample_req)
        return self.sock.recv(copy=False)

    def update(self, batch, td):
        self.sock.send(self.update_req)
        self.sock.recv(copy=False)


def client(system, address, item_bytes, learner=False):
    if system == "zmq-floor":
        return FloorClient(address, item_bytes)
    if system == "reverb":
        return ReverbClient(address, item_bytes, learner)
    return PerClient(address, item_bytes)


def window(barrier, warm, secs):
    barrier.wait(timeout=600)
    t0 = time.perf_counter()
    return t0 + warm, t0 + warm + secs


def actor(system, address, item_bytes, seed, barrier, warm, secs, out):
    c = client(system, address, item_bytes)
    pool = chunks(item_bytes, seed=seed)
    ws, we = window(barrier, warm, secs)
    n = i = 0
    worst = 0.0
    while True:
        t = time.perf_counter()
        c.insert(pool[i % len(pool)])
        i += 1
        now = time.perf_counter()
        worst = max(worst, now - t)
        if now >= we:
            break
        if now >= ws:
            n += CHUNK
    out.put(("actor", n, worst))


def learner(system, address, item_bytes, barrier, warm, secs, out):
    c = client(system, address, item_bytes, learner=True)
    pool = tds()
    ws, we = window(barrier, warm, secs)
    n = i = 0
    lat = []
    worst = 0.0
    while True:
        t = time.perf_counter()
        b = c.fetch()
        f = time.perf_counter()
        c.update(b, pool[i % len(pool)])
        i += 1
        now = time.perf_counter()
        worst = max(worst, now - t)
        if now >= we:
            break
        if t >= ws:
            n += 1
            lat.append(f - t)
    out.put(("learner", n, worst, lat))


def prefill(system, address, item_bytes):
    c = client(system, address, item_bytes)
    pool = chunks(item_bytes, seed=99)
    for i in range(PREFILL // CHUNK):
        c.insert(pool[i % len(pool)])


def percentile(xs, q):
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))
    return s[k]


def one_inprocess(item, warm, secs):
    """The same requests' bytes handed to per_net.h in this process."""
    import numpy as np
    import per.net
    item_bytes, capacity = ITEMS[item]
    srv = per.net.Server(spec(item_bytes, capacity), "tcp://127.0.0.1:0")
    name = TABLE.encode()
    rid = [0]

    def req(op, body):
        rid[0] += 1
        return (b"PERQ" + struct.pack("<HHQB", 1, op, rid[0], len(name))
                + name + body)

    def ok(reply):
        st = struct.unpack_from("<i", reply, 16)[0]
        if st != 0:
            raise RuntimeError(f"in-process: status {st}: {bytes(reply[24:])!r}")
        return reply

    inserts = [req(2, struct.pack("<II", CHUNK, 0) + c.tobytes())
               for c in chunks(item_bytes)]
    pre = [req(2, struct.pack("<II", CHUNK, 0) + c.tobytes())
           for c in chunks(item_bytes, seed=99)]
    for i in range(PREFILL // CHUNK):
        ok(srv.handle(pre[i % len(pre)]))
    sample = req(3, struct.pack("<IIdII", B, 0, 0.0, 0, 0))
    td = [t.astype("<f4").tobytes() for t in tds()]
    # inserts alone
    t0 = time.perf_counter()
    ws, we = t0 + warm, t0 + warm + secs
    n = i = 0
    while True:
        ok(srv.handle(inserts[i % len(inserts)]))
        i += 1
        now = time.perf_counter()
        if now >= we:
            break
        if now >= ws:
            n += CHUNK
    ins = n / secs
    # sample + update alone
    t0 = time.perf_counter()
    ws, we = t0 + warm, t0 + warm + secs
    n = i = 0
    lat = []
    while True:
        t = time.perf_counter()
        r = ok(srv.handle(sample))
        f = time.perf_counter()
        ids = np.frombuffer(r, "<u8", B, 40).tobytes()
        ok(srv.handle(req(4, struct.pack("<II", B, 0) + ids + td[i % len(td)])))
        i += 1
        now = time.perf_counter()
        if now >= we:
            break
        if t >= ws:
            n += 1
            lat.append(f - t)
    rss = hwm_mib(os.getpid())
    srv.close()
    return {"inserts_per_s": ins, "samples_per_s": n * B / secs,
            "p50_us": percentile(lat, 0.5) * 1e6,
            "p99_us": percentile(lat, 0.99) * 1e6,
            "batches": n, "server_rss_mib": rss, "longest_s": 0.0, "idle": 0}


def one(system, item, actors, warm, secs, per_server):
    if system == "in-process":
        return one_inprocess(item, warm, secs)
    item_bytes, _ = ITEMS[item]
    srv = Server(system, item, per_server)
    try:
        if system != "zmq-floor":
            prefill(system, srv.address, item_bytes)
        ctx = mp.get_context("spawn")
        barrier = ctx.Barrier(actors + 2)
        out = ctx.Queue()
        procs = [ctx.Process(target=actor, args=(
            system, srv.address, item_bytes, 10 + k, barrier, warm, secs, out))
            for k in range(actors)]
        procs.append(ctx.Process(target=learner, args=(
            system, srv.address, item_bytes, barrier, warm, secs, out)))
        for p in procs:
            p.start()
        barrier.wait(timeout=600)
        got = [out.get(timeout=warm + secs + 300) for _ in procs]
        for p in procs:
            p.join(60)
    finally:
        rss = srv.close()
    ins = sum(g[1] for g in got if g[0] == "actor") / secs
    (lr,) = [g for g in got if g[0] == "learner"]
    return {"inserts_per_s": ins, "samples_per_s": lr[1] * B / secs,
            "p50_us": percentile(lr[3], 0.5) * 1e6,
            "p99_us": percentile(lr[3], 0.99) * 1e6,
            "batches": lr[1], "server_rss_mib": rss,
            "longest_s": max(g[2] for g in got),
            "idle": sum(1 for g in got if g[1] == 0)}


# -- the driver ----------------------------------------------------------------

FIGS = ("inserts_per_s", "samples_per_s", "p50_us", "p99_us", "server_rss_mib")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_argument
    sub("cmd", nargs="*", help=argparse.SUPPRESS)
    sub("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      "results"))
    sub("--reps", type=int, default=3)
    sub("--warm", type=float, default=1.0)
    sub("--secs", type=float, default=4.0)
    sub("--quick", action="store_true", help="1 round of 0.3 s runs, 0 and 1 actor")
    sub("--per-server", default="build-bench/server/per-server")
    sub("--reverb-python", default="")
    sub("--actors", default="0,1,4,8")
    sub("--items", default="64B,28KB")
    sub("--systems", default=",".join(SYSTEMS))
    a = ap.parse_args()
    if a.cmd:
        if len(a.cmd) != 4 or a.cmd[0] != "one":
            ap.error("internal use: one SYSTEM ITEM ACTORS")
        r = one(a.cmd[1], a.cmd[2], int(a.cmd[3]), a.warm, a.secs, a.per_server)
        print(json.dumps(r), flush=True)
        return
    if a.quick:
        a.reps, a.warm, a.secs, a.actors = 1, 0.2, 0.3, "0,1"
    actors = [int(x) for x in a.actors.split(",")]
    items = a.items.split(",")
    systems = [s for s in a.systems.split(",")]
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"--systems: {s!r} is none of {', '.join(SYSTEMS)}")
    for i in items:
        if i not in ITEMS:
            ap.error(f"--items: {i!r} is none of {', '.join(ITEMS)}")
    if "reverb" in systems and not a.reverb_python:
        print("server: no --reverb-python; reverb is left out", file=sys.stderr)
        systems.remove("reverb")
    per_server = os.path.abspath(a.per_server)
    if "per-server" in systems and not os.access(per_server, os.X_OK):
        ap.error(f"--per-server: {per_server} is not a program")
    os.makedirs(a.out, exist_ok=True)
    here = os.path.abspath(__file__)
    runs = []
    for rep in range(a.reps):
        for item in items:
            for k in actors:
                for s in systems:
                    if s in ALONE and k != actors[0]:
                        continue  # once an item size and round
                    py = a.reverb_python if s == "reverb" else sys.executable
                    cmd = [py, here, "one", s, item, str(k), "--warm",
                           str(a.warm), "--secs", str(a.secs),
                           "--per-server", per_server]
                    for attempt in (1, 2):
                        p = subprocess.run(cmd, stdout=subprocess.PIPE,
                                           timeout=900,
                                           cwd=tempfile.gettempdir())
                        if p.returncode != 0:
                            sys.exit(f"server: {s} {item} {k} actors failed "
                                     f"(exit {p.returncode})")
                        r = json.loads(
                            p.stdout.decode().strip().splitlines()[-1])
                        if not r["idle"]:
                            break
                        # a process whose one call outlasted the window
                        # measured nothing: said, and the run made again
                        print(f"round {rep + 1}/{a.reps} {item:>4} {k} actors "
                              f"{s:>10}: {r['idle']} process(es) measured "
                              f"nothing, the longest call took "
                              f"{r['longest_s']:.2f} s"
                              + ("; again" if attempt == 1 else ""),
                              flush=True)
                    else:
                        sys.exit(f"server: {s} {item} {k} actors: a process "
                                 "measured nothing, twice")
                    k_ = 0 if s in ALONE else k
                    row = {"rep": rep, "system": s, "item": item,
                           "item_bytes": ITEMS[item][0], "actors": k_, **r}
                    runs.append(row)
                    print(f"round {rep + 1}/{a.reps} {item:>4} {k_} actors "
                          f"{s:>10}: {r['inserts_per_s']:10.0f} inserts/s "
                          f"{r['samples_per_s']:10.0f} samples/s p50 "
                          f"{r['p50_us']:8.0f} us p99 {r['p99_us']:8.0f} us "
                          f"rss {r['server_rss_mib']:6.0f} MiB", flush=True)
    cols = ["rep", "system", "item", "item_bytes", "actors", "inserts_per_s",
            "samples_per_s", "p50_us", "p99_us", "batches", "server_rss_mib",
            "longest_s"]
    with open(os.path.join(a.out, "server_runs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(runs)
    summary(runs, os.path.join(a.out, "server.csv"))


def summary(runs, path):
    groups = {}
    for r in runs:
        groups.setdefault((r["system"], r["item"], r["actors"]), []).append(r)
    med = {}
    for key, rs in groups.items():
        med[key] = {f: statistics.median(r[f] for r in rs) for f in FIGS}
        for f in FIGS:
            med[key][f + "_lo"] = min(r[f] for r in rs)
            med[key][f + "_hi"] = max(r[f] for r in rs)
        med[key]["rounds"] = len(rs)
        med[key]["item_bytes"] = rs[0]["item_bytes"]
    cols = ["system", "item", "item_bytes", "actors", "rounds"]
    for f in FIGS:
        cols += [f, f + "_lo", f + "_hi"]
    cols += ["inserts_vs_reverb", "samples_vs_reverb", "p99_vs_reverb",
             "inserts_of_ceiling", "samples_of_ceiling", "samples_of_floor"]
    rows = []
    for (s, item, k), m in sorted(groups.items(), key=lambda kv: (
            list(ITEMS).index(kv[0][1]), SYSTEMS.index(kv[0][0]), kv[0][2])):
        row = {"system": s, "item": item, "actors": k, **med[(s, item, k)]}
        rv = med.get(("reverb", item, k))
        ce = med.get(("in-process", item, 0))
        fl = med.get(("zmq-floor", item, 0))
        if s in ("per-server", "per.net"):
            if rv:
                row["inserts_vs_reverb"] = ratio(row["inserts_per_s"],
                                                 rv["inserts_per_s"])
                row["samples_vs_reverb"] = ratio(row["samples_per_s"],
                                                 rv["samples_per_s"])
                row["p99_vs_reverb"] = ratio(rv["p99_us"], row["p99_us"])
            if ce:
                row["inserts_of_ceiling"] = ratio(row["inserts_per_s"],
                                                  ce["inserts_per_s"])
                row["samples_of_ceiling"] = ratio(row["samples_per_s"],
                                                  ce["samples_per_s"])
            if fl:
                row["samples_of_floor"] = ratio(row["samples_per_s"],
                                                fl["samples_per_s"])
        rows.append(row)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, cols, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({c: fmt(row.get(c, "")) for c in cols})


def ratio(a, b):
    return a / b if b and a == a and b == b else ""


def fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}" if v == v else ""
    return v


if __name__ == "__main__":
    main()
