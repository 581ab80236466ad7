"""The Python package against the C library: the same config, seed and
calls give the same ids, IS weights (bit for bit) and item bytes, the
same checkpoint file, and each side resumes from the other's checkpoint
exactly. The C side is ref_ops.c, compiled here against this checkout's
per.h with the system C compiler ($CC, default cc)."""

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


@pytest.fixture(scope="module")
def ref_ops(tmp_path_factory):
    exe = tmp_path_factory.mktemp("ref") / "ref_ops"
    cc = shlex.split(os.environ.get("CC", "cc"))
    subprocess.run(cc + ["-std=c99", "-O2", "-I", str(ROOT), str(HERE / "ref_ops.c"),
                         "-o", str(exe), "-lm"], check=True)
    return exe


def make(flags):
    return per.ReplayBuffer(1000, ITEM, alpha=0.7, beta0=0.5, beta_steps=50,
                            eps=1e-3, seed=12345,
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
def test_same_batches_file_and_resume(ref_ops, tmp_path, flags):
    c_file, py_file = tmp_path / "c.per", tmp_path / "py.per"
    c_out = run_c(ref_ops, "run", flags, c_file)
    buf = make(flags)
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
    other = make(flags)
    other.load(c_file)
    assert resume(other) == c_res
    # and both equal the run that never stopped
    assert resume(buf) == c_res
