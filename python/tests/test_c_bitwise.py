"""The Python package against the C library: the same config, seed and
calls give the same ids, IS weights (bit for bit) and item bytes, the
same checkpoint file, and each side resumes from the other's checkpoint
exactly; the sum tree and categorical sampler give the same draws and
node values bit for bit. The C side is ref_ops.c, compiled here against
this checkout's per.h with the system C compiler ($CC, default cc),
once per node type: double against the package's default classes, float
(-DPER_REAL=float) against their dtype/nodes=numpy.float32 ones."""

import os
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

import per

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ITEM = np.dtype([("obs", "<f4", (4,)), ("action", "<i4"), ("reward", "<f4")])


NODES = {"double": np.float64, "float": np.float32}


@pytest.fixture(scope="module", params=sorted(NODES))
def real(request):
    return request.param


@pytest.fixture(scope="module")
def ref_ops(tmp_path_factory, real):
    exe = tmp_path_factory.mktemp("ref") / f"ref_ops_{real}"
    cc = shlex.split(os.environ.get("CC", "cc"))
    subprocess.run(cc + ["-std=c99", "-O2", f"-DPER_REAL={real}", "-I", str(ROOT),
                         str(HERE / "ref_ops.c"), "-o", str(exe), "-lm"], check=True)
    return exe


def make(flags, real):
    return per.ReplayBuffer(1000, ITEM, alpha=0.7, beta0=0.5, beta_steps=50,
                            eps=1e-3, seed=12345, nodes=NODES[real],
                            weights_buffer_max=bool(flags & 1))


def batch_lines(tag, buf, B, **kw):
    s = buf.sample(B, **kw)
    rec = np.empty(B, ITEM)
    for name in ITEM.names:
        rec[name] = s[name]
    return [f"{tag} ids " + " ".join(str(int(i)) for i in s["ids"]),
            f"{tag} w " + " ".join(f"{int(w):08x}" for w in s["weights"].view(np.uint32)),
            f"{tag} items " + rec.tobytes().hex()]


def update_lines(buf, B):
    ids = buf.sample(B)["ids"]
    td = (ids % np.uint64(97)).astype(np.uint32).astype(np.float32) * np.float32(0.03125) - np.float32(1.0)
    return [f"stale {buf.update(ids, td)}"]


def script(buf):
    out, nxt = [], 0
    for r in range(6):
        n = 37 + 113 * r
        g = np.arange(nxt, nxt + n, dtype=np.uint32)
        obs = g.astype(np.float32)[:, None] + np.float32(0.25) * np.arange(4, dtype=np.float32)
        ends = np.where(g % 50 == 49, per.END_TERMINATED, per.END_NONE)
        buf.add(obs=obs, action=(g % 7).astype(np.int32),
                reward=(g % 11).astype(np.float32) * np.float32(0.5), ends=ends)
        nxt += n
        out += batch_lines("plain", buf, 64)
        out += update_lines(buf, 64)
        out += batch_lines("unique", buf, 32, unique=True)
        out += batch_lines("window", buf, 16, window=200)
        out += batch_lines("beta", buf, 8, beta=0.9)
    return out


def resume(buf):
    out = []
    for _ in range(3):
        out += batch_lines("plain", buf, 64)
        out += update_lines(buf, 48)
        out += batch_lines("unique", buf, 32, unique=True)
    return out


def run_c(exe, *args):
    got = subprocess.run([str(exe), *map(str, args)], check=True,
                         capture_output=True, text=True)
    return got.stdout.splitlines()


@pytest.mark.parametrize("flags", [0, 1])
def test_same_batches_file_and_resume(ref_ops, real, tmp_path, flags):
    c_file, py_file = tmp_path / "c.per", tmp_path / "py.per"
    c_out = run_c(ref_ops, "run", flags, c_file)
    buf = make(flags, real)
    assert buf.nodes == NODES[real]
    py_out = script(buf)
    assert len(c_out) == len(py_out) == 6 * 13
    for i, (c, p) in enumerate(zip(c_out, py_out)):
        assert c == p, f"line {i} differs"
    # the layout ref_ops.c names for the same item
    assert buf.layout == 'numpy:[["obs","<f4",[4]],["action","<i4"],["reward","<f4"]]'
    buf.save(py_file)
    assert py_file.read_bytes() == c_file.read_bytes()

    # C resumes from Python's file, Python from C's: the same batches.
    c_res = run_c(ref_ops, "resume", flags, py_file)
    other = make(flags, real)
    other.load(c_file)
    assert resume(other) == c_res
    # and both equal the run that never stopped
    assert resume(buf) == c_res
    # a buffer of the other node type refuses the file, unchanged
    wrong = per.ReplayBuffer(1000, ITEM, alpha=0.7, beta0=0.5, beta_steps=50,
                             eps=1e-3, seed=12345,
                             nodes=NODES["float" if real == "double" else "double"],
                             weights_buffer_max=bool(flags & 1))
    with pytest.raises(per.Error, match="PER_ERR_MISMATCH"):
        wrong.load(c_file)
    assert len(wrong) == 0
    assert per.ReplayBuffer.from_file(c_file).nodes == NODES[real]


def reals(tag, v, dt):
    """ref_ops.c's print_reals: the values' bits in hex."""
    bits = np.asarray(v, dt).view(np.uint32 if dt == np.float32 else np.uint64)
    width = 2 * np.dtype(dt).itemsize
    return f"{tag}" + "".join(f" {int(b):0{width}x}" for b in bits)


def ids(tag, v):
    return f"{tag}" + "".join(f" {int(i)}" for i in v)


def tree_script(dt):
    """ref_ops.c's tree_ops through per.SumTree and per.CategoricalSampler
    of node type dt."""
    cap, B = 1000, 64
    t = per.SumTree(cap, dtype=dt)
    c = per.CategoricalSampler(B, dtype=dt)
    rng = per.Rng(777)
    i = np.arange(cap, dtype=np.float64)
    t.build(((i % 13) * 0.1 + (i % 7) * 1e-3).astype(dt))
    out = []
    for r in range(4):
        j = np.arange(200)
        t.set_batch((j * 37 + r * 101) % cap,
                    (((j + r) % 17) * 0.37 + 1e-4 * r).astype(dt))
        out.append(reals("total", [t.total], dt))
        for tag, (got, val) in (("strat", t.sample(B, rng)),
                                ("iid", t.sample_iid(B, rng)),
                                ("cat", c.sample(t, 32, rng))):
            assert val.dtype == dt
            out += [ids(f"{tag} ids", got), reals(f"{tag} val", val, dt)]
        total = float(t.total)
        out.append(ids("find", [t.find(k * 0.125 * total) for k in range(8)]))
        out.append(reals("prefix", [t.prefix((k * 97 + r) % cap)
                                    for k in range(8)], dt))
    nodes = t.nodes()
    assert nodes.dtype == dt
    out.append(reals("nodes", nodes, dt))
    return out


def test_tree_and_categorical_bitwise(ref_ops, real):
    c_out = run_c(ref_ops, "tree")
    py_out = tree_script(NODES[real])
    assert len(c_out) == len(py_out) == 4 * 9 + 1
    for k, (c, p) in enumerate(zip(c_out, py_out)):
        assert c == p, f"line {k} differs"
