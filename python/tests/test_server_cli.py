"""per.server, the per-server command of the wheel: its options, messages
and exit statuses (those of the C program server/per_server.c), and a
server run as `python -m per.server` in a child process, found through
its ready file and used with per.net.Client: inserts, samples and INFO,
a stop at SIGTERM (exit status 0, the ready file removed), a restart
from --checkpoint, and CURVE keys from --curve-keygen.

Needs pyzmq: without it the module skips, unless PER_NEED_ZMQ is set
(CI), where a missing pyzmq fails. Every wait is bounded, and a child
still running when a test ends is killed."""
import contextlib
import importlib
import os
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

import per

if os.environ.get("PER_NEED_ZMQ", "") not in ("", "0"):
    import zmq  # a missing pyzmq fails here
else:
    zmq = pytest.importorskip("zmq")

import per.net as pn

ANY = "tcp://127.0.0.1:0"
TABLE = ["--table", "replay", "--capacity", "64", "--item-size", "8"]
HINT = "Try 'per-server --help' for the options."


def command(*args):
    return [sys.executable, "-m", "per.server", *args]


def run(tmp_path, *args):
    """per-server run to its end: (exit status, stdout, stderr)."""
    p = subprocess.run(command(*args), cwd=tmp_path, capture_output=True,
                       text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


@contextlib.contextmanager
def served(tmp_path, *args):
    """A per-server child bound to a free port: yields (process, its
    endpoint, the ready file), once the ready file is there (10 s at
    most); killed if it still runs at the end."""
    ready = tmp_path / "ready"
    if ready.exists():
        ready.unlink()
    p = subprocess.Popen(command(*args, "--bind", ANY, "--ready-file",
                                 str(ready)),
                         cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while not ready.exists():
            if p.poll() is not None:
                pytest.fail(f"per-server exited {p.returncode}: "
                            f"{p.stderr.read()}")
            if time.monotonic() > deadline:
                pytest.fail("per-server wrote no ready file within 10 s")
            time.sleep(0.02)
        text = ready.read_text()
        assert text.endswith("\n") and text.count("\n") == 1, repr(text)
        yield p, text.strip(), ready
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        p.stdout.close()
        p.stderr.close()


def stop(p, sig=signal.SIGTERM):
    """Signal the child and wait for it (10 s at most): (status, stderr)."""
    p.send_signal(sig)
    _, err = p.communicate(timeout=10)
    return p.returncode, err


@pytest.fixture
def server_main():
    """per.server.main (the per-server command's)."""
    return importlib.import_module("per.server").main


def test_help_and_version(tmp_path):
    rc, out, err = run(tmp_path, "--help")
    assert rc == 0 and err == ""
    assert out.startswith("Usage: per-server [OPTION]...")
    assert "Python per-server" in out and "per.net.Server" in out
    for opt in ("--spec FILE", "--table NAME", "--samples-per-insert X",
                "--load NAME=PATH", "--checkpoint DIR", "--every SECONDS",
                "--bind ENDPOINT", "--insecure", "--max-message BYTES",
                "--queue N", "--ready-file PATH", "--quiet",
                "--curve-secret FILE", "--curve-clients FILE",
                "--curve-keygen PREFIX", "--version"):
        assert opt in out, opt
    rc, out, err = run(tmp_path, "--version")
    assert rc == 0 and err == ""
    assert out.startswith(f"per-server {per.__version__} (")
    assert f"wire format {pn.VERSION}" in out and "pyzmq" in out


@pytest.mark.parametrize("args, lines", [
    (["--frobnicate"], ["per-server: unknown option: --frobnicate", HINT]),
    (["--frobnicate=1"], ["per-server: unknown option: --frobnicate=1", HINT]),
    (["table"], ["per-server: not an option (they all start with --): table",
                 HINT]),
    (["--capacity", "64"],
     ["per-server: --capacity before any --table: a table's options follow "
      "its --table NAME", HINT]),
    (TABLE + ["--every", "5"], ["per-server: --every needs --checkpoint DIR",
                                HINT]),
    (TABLE + ["--every=0", "--checkpoint", "d"],
     ["per-server: --every takes seconds, a number above 0: 0", HINT]),
    (TABLE + ["--load", "replay=x", "--checkpoint", "d"],
     ["per-server: --load and --checkpoint: a checkpoint directory holds the "
      "tables' state", HINT]),
    (TABLE + ["--queue", "0"],
     ["per-server: --queue takes a number of messages, 1 to 1000000: 0",
      HINT]),
    (TABLE + ["--quiet=yes"],
     ["per-server: this option takes no value: --quiet=yes", HINT]),
    (TABLE + ["--bind"], ["per-server: this option needs a value: --bind",
                          HINT]),
    (TABLE + ["--bind", ANY, "--bind=ipc:///tmp/x"],
     ["per-server: --bind given twice: this per-server (Python, "
      "per.net.Server) binds one endpoint; the C per-server binds several: "
      "ipc:///tmp/x", HINT]),
    ([], ["per-server: no table: give --table NAME --capacity N --item-size "
          "N, or --spec FILE", HINT]),
    # the spec text's refusals, said of the option that made the line
    (["--table=t", "--capacity=64", "--item-size=x"],
     ['per-server: --table t, --item-size x: not a value of "item_size"']),
    (["--table", "t", "--capacity", "64"],
     ['per-server: --table t: table "t" has no item_size']),
    (TABLE + TABLE, ['per-server: --table replay: per_net_add_table: a table '
                     'named "replay" exists']),
    (TABLE + ["--max-message", "100"],
     ["per-server: --max-message: per_net_init: max_message 100 is outside "
      "[4096, SIZE_MAX / 2]"]),
    (TABLE + ["--bind", "tcp://0.0.0.0:0"],
     ["per-server: --bind tcp://0.0.0.0:0: not a loopback address "
      "(127.x.x.x, ::1, localhost), ipc:// or inproc://: anyone who reaches "
      "it could read and change the tables. Give --curve-secret and "
      "--curve-clients (only clients with those keys get in), or "
      "--insecure"]),
])
def test_option_errors(server_main, capsys, args, lines):
    assert server_main(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == lines


def test_spec_file_errors(server_main, capsys, tmp_path):
    bad = tmp_path / "bad.spec"
    bad.write_text("# two tables\ntable a\ncapacity 8\nitem_size 4\n\n"
                   "table b\ncapacity 8\nsize 4\n")
    assert server_main(["--spec", str(bad)]) == 2
    assert capsys.readouterr().err == (
        f"per-server: --spec {bad}: per_net_add_spec: line 8: unknown key "
        '"size"\n')
    # a file whose first key is not `table` is refused, as a spec read on
    # its own, not taken as the previous table's
    opens = tmp_path / "opens.spec"
    opens.write_text("\nalpha 0.5\ntable c\ncapacity 8\nitem_size 4")
    assert server_main(TABLE + ["--spec", str(opens)]) == 2
    assert capsys.readouterr().err == (
        f"per-server: --spec {opens}: per_net_add_spec: line 2: a key before "
        "the first `table` line: \"alpha\"\n")
    assert server_main(["--spec", str(tmp_path / "none.spec")]) == 2
    assert capsys.readouterr().err == (
        f"per-server: --spec {tmp_path / 'none.spec'}: No such file or "
        "directory\n")


def test_without_pyzmq(server_main, capsys, monkeypatch):
    # the tables are read first (a bad spec is still exit status 2)
    monkeypatch.setitem(sys.modules, "zmq", None)
    assert server_main(TABLE + ["--bind", ANY]) == 1
    assert capsys.readouterr().err == (
        "per-server: per.net needs pyzmq: pip install pyzmq (or pip install "
        "per-replay[net])\n")
    assert server_main(["--table", "t", "--capacity", "8"]) == 2


def test_serve_and_stop(tmp_path):
    spec = tmp_path / "more.spec"
    spec.write_text("table other\ncapacity 16\nitem_size 4\nalpha 0.5\n")
    with served(tmp_path, *TABLE, "--seed=3", "--spec", str(spec)) as (
            p, endpoint, ready):
        assert endpoint.startswith("tcp://127.0.0.1:")
        assert not endpoint.endswith(":0")
        with pn.Client(endpoint, "replay", item_size=8, timeout=5) as c:
            items = np.arange(40, dtype=np.uint8).reshape(5, 8)
            c.insert(items)
            batch = c.sample(3)
            assert batch.items.shape == (3, 8)
            assert set(map(bytes, batch.items)) <= set(map(bytes, items))
            assert c.update(batch.ids, np.ones(3)) == 0
            info = c.info()
            assert (info["capacity"], info["item_size"], info["size"]) == (
                64, 8, 5)
        with pn.Client(endpoint, "other", item_size=4, timeout=5) as c:
            assert c.info()["capacity"] == 16
        rc, err = stop(p)
        assert rc == 0, err
        assert not ready.exists()
    lines = err.splitlines()
    assert lines[0] == (f"per-server: serving replay(64, 8), other(16, 4) on "
                        f"{endpoint}")
    assert lines[-1] == ("per-server: stopped after 3 requests applied "
                         "(INSERT 1, SAMPLE 1, UPDATE 1; 0 refused)")


def test_checkpoint_restart(tmp_path):
    ckpt = tmp_path / "ckpt"
    with served(tmp_path, *TABLE, "--checkpoint", str(ckpt), "--quiet") as (
            p, endpoint, _):
        with pn.Client(endpoint, "replay", item_size=8, timeout=5) as c:
            c.insert(np.ones((7, 8), np.uint8))
        rc, err = stop(p, signal.SIGINT)
        assert (rc, err) == (0, "")
    assert (ckpt / "server.state").exists()
    with served(tmp_path, *TABLE, "--checkpoint", str(ckpt)) as (
            p, endpoint, _):
        with pn.Client(endpoint, "replay", item_size=8, timeout=5) as c:
            info = c.info()
            assert (info["size"], info["inserts"]) == (7, 1)
        rc, err = stop(p)
        assert rc == 0, err
    assert err.splitlines()[0] == (
        f"per-server: restored generation 1 from {ckpt}")
    assert f"per-server: saved generation 2 to {ckpt}" in err.splitlines()
    # another set of tables than the checkpoint's: exit status 1
    rc, _, err = run(tmp_path, "--table", "x", "--capacity", "8",
                     "--item-size", "8", "--checkpoint", str(ckpt), "--bind",
                     ANY)
    assert rc == 1 and err.startswith(f"per-server: --checkpoint {ckpt}: "), err


def test_run_time_failures(tmp_path):
    rc, _, err = run(tmp_path, *TABLE, "--load", "replay=missing.per",
                     "--bind", ANY)
    assert rc == 1 and err.startswith(
        "per-server: --load replay=missing.per: per_net_load: "), err
    rc, _, err = run(tmp_path, *TABLE, "--bind", ANY, "--ready-file",
                     str(tmp_path / "no" / "ready"))
    assert (rc, err) == (1, f"per-server: --ready-file "
                            f"{tmp_path / 'no' / 'ready'}: No such file or "
                            "directory\n")


def test_curve(tmp_path):
    rc, _, err = run(tmp_path, "--curve-keygen", "srv")
    assert rc == 0 and err.splitlines() == ["per-server: wrote srv.secret",
                                            "per-server: wrote srv.public"]
    assert stat.S_IMODE(os.stat(tmp_path / "srv.secret").st_mode) == 0o600
    rc, _, err = run(tmp_path, "--curve-keygen=actor")
    assert rc == 0, err
    key = {name: (tmp_path / name).read_text() for name in (
        "srv.secret", "srv.public", "actor.secret", "actor.public")}
    assert all(len(k) == 41 and k.endswith("\n") for k in key.values())
    (tmp_path / "clients").write_text(
        "# the actors allowed\n\n  " + key["actor.public"])
    (tmp_path / "two").write_text(key["srv.secret"] + key["actor.secret"])
    rc, _, err = run(tmp_path, *TABLE, "--curve-secret", "two")
    assert (rc, err) == (2, "per-server: --curve-secret two: line 2: a second "
                            "key (the file holds one)\n")
    with served(tmp_path, *TABLE, "--curve-secret", "srv.secret",
                "--curve-clients", str(tmp_path / "clients")) as (
            p, endpoint, _):
        curve = (key["srv.public"], key["actor.public"], key["actor.secret"])
        with pn.Client(endpoint, "replay", item_size=8, timeout=5,
                       curve=curve) as c:
            c.insert(np.zeros((2, 8), np.uint8))
            assert c.info()["size"] == 2
        # a client whose key is not listed gets no reply (its HELLO)
        stranger = zmq.curve_keypair()
        with pytest.raises(TimeoutError):
            pn.Client(endpoint, "replay", item_size=8, timeout=0.3,
                      resend=False, curve=(key["srv.public"],) + stranger)
        rc, err = stop(p)
        assert rc == 0, err
