"""per-server on per.net: the command the wheel installs (pip install
per-replay[net]), with the options, messages and exit statuses of the C
program server/per_server.c, serving through per.net.Server.

    per-server --table replay --capacity 100000 --item-size 44
    python -m per.server --spec tables.spec --checkpoint ckpt --every 60

The tables of --spec files and of --table options become one spec text,
as the C program builds it, that per.net.Server reads (per_net.h's
per_net_add_spec); a refusal names the option or the spec file's line
that made it. per.net.Server binds one endpoint, so this command takes
one --bind (the C program binds several).

Exit status: 0 after SIGINT or SIGTERM (after the last save with
--checkpoint), and after --help, --version and --curve-keygen; 1 on a
failure at run time (pyzmq missing, a bind, --load, --checkpoint's
restore or last save, the ready file); 2 on bad options or specs.
main(argv) returns it; `python -m per.server` exits with it."""

import importlib
import os
import re
import signal
import struct
import sys
import threading
import types
import typing as t
import warnings

from . import Error
from . import __version__
from . import net as _net

_PROG = "per-server"
_HINT = "Try 'per-server --help' for the options."
_PYZMQ = ("per.net needs pyzmq: pip install pyzmq (or pip install "
          "per-replay[net])")

_USAGE = """\
Usage: per-server [OPTION]...
Serve prioritized replay tables (per.h's per_buffer, by name) over
ZeroMQ: a ROUTER socket answering the requests of docs/PROTOCOL.md
(HELLO, INSERT, SAMPLE, UPDATE, INFO) from DEALER or REQ clients. This
is the Python per-server (python -m per.server), serving with
per.net.Server: the C program's options and exit statuses, with one
--bind.

Tables (at least one; in the order given):
  --spec FILE           tables from a spec file (format below); may
                        repeat
  --table NAME          start a table named NAME (1 to 63 bytes); the
                        options below set the latest table's config:
    --capacity N        items it holds (required)
    --item-size N       bytes of an item (required)
    --alpha X           priority exponent
    --beta0 X           importance-sampling exponent at the start,
    --beta1 X           at the end,
    --beta-steps N      reached after N samples
    --eps X             added to |TD error|
    --max-priority X    priority cap
    --seed N            the table's random stream
    --flags F           a number, or names joined by |:
                        weights_buffer_max, seq_cross_episodes,
                        max_live
    --max-unique N      PER_SAMPLE_UNIQUE's bound
    --seq-len N         steps of a sequence (0: no sequences)
    --seq-stride N      steps between sequence starts
    --seq-eta X         sequence priority mix (max vs mean)
    --layout TEXT       the items' layout, as HELLO checks it
                        Unset fields keep per_config_default's value.
    --min-size N        rate limiter: items stored before a sample
                        (default 0)
    --samples-per-insert X  items sampled an item inserted (default 0:
                        no ratio); the side ahead by more than
    --error-margin X    items is answered busy (docs/PROTOCOL.md)
  --load NAME=PATH      load the checkpoint at PATH (per_buffer_save,
                        per.net.Server.save) into table NAME before
                        serving (Server.load); may repeat

Durability:
  --checkpoint DIR      keep the whole server in DIR (created when
                        missing): when DIR holds a checkpoint, start
                        from it (every table, its counters and the
                        once-only requests it applied); save at SIGINT
                        or SIGTERM, and with --every. The tables must
                        be the checkpoint's, by name (not with --load)
  --every SECONDS       also save every SECONDS (> 0) while requests
                        come

Transport:
  --bind ENDPOINT       the ZeroMQ endpoint to bind, one (default
                        {bind}; the C per-server binds
                        several). tcp://127.0.0.1:0 takes a free port
                        (see --ready-file); ipc://PATH is fine too.
  --insecure            allow binding tcp on an address other than
                        loopback (127.x.x.x, ::1, localhost) without
                        CURVE: anyone who can reach the port can read
                        and change the tables
  --max-message BYTES   the largest request or reply (default {maxmsg},
                        at least 4096)
  --queue N             messages queued for each client, each way
                        (default 16; ZeroMQ's SNDHWM and RCVHWM)
  --ready-file PATH     once bound, write the bound endpoint (port
                        resolved) and a line break to PATH, atomically
                        (a temporary file renamed); removed at a clean
                        stop
  --quiet               no ready and no stopped line on stderr

Security (ZeroMQ CURVE: encryption, and clients known by their keys):
  --curve-secret FILE   the server's secret key (40 characters of Z85,
                        the file's only key): connections are CURVE
  --curve-clients FILE  the public keys of the clients allowed, one a
                        line (# comments); any other is refused. With
                        both, tcp may bind any address
  --curve-keygen PREFIX write a new key pair to PREFIX.secret (mode
                        0600) and PREFIX.public, and exit
  --help                this text
  --version             per's version, the wire format's, ZeroMQ's and
                        pyzmq's

Spec format (--spec): lines of `key value`. `table NAME` starts a
table; the keys after it, each at most once, are the options above
with _ for - (capacity, item_size, alpha, beta0, beta1, beta_steps,
eps, max_priority, seed, flags, max_unique, seq_len, seq_stride,
seq_eta, min_size, samples_per_insert, error_margin) and layout, whose
value is the rest of its line. Blank lines and lines starting with #
are skipped. For example:
    # replay for the learner
    table replay
    capacity 1000000
    item_size 44
    alpha 0.6
    flags weights_buffer_max|max_live

SIGINT or SIGTERM stops the server: exit status 0 (after the last
save with --checkpoint). Exit status 1 is a failure while starting
or serving (pyzmq missing, bind, --load, --checkpoint's load or last
save, --ready-file), 2 bad options or specs.
"""

# The per_config keys of an inline table, as options (- for the spec's _).
_TABLE_KEYS = ("capacity", "item-size", "alpha", "beta0", "beta1",
               "beta-steps", "eps", "max-priority", "seed", "flags",
               "max-unique", "seq-len", "seq-stride", "seq-eta", "layout",
               "min-size", "samples-per-insert", "error-margin")
# The keys a spec text knows (per_net_add_spec's).
_SPEC_KEYS = frozenset(k.replace("-", "_") for k in _TABLE_KEYS)
# Options without a value, and the others that take one.
_FLAGS = ("help", "version", "quiet", "insecure")
_VALUED = frozenset(("bind", "spec", "table", "load", "max-message",
                     "ready-file", "checkpoint", "every", "queue",
                     "curve-secret", "curve-clients", "curve-keygen")
                    + _TABLE_KEYS)
# A spec line's blanks (per_net_add_spec's).
_BLANKS = " \t\r"
# INFO (docs/PROTOCOL.md): the request's header, the reply's, and the
# first 80 bytes of its body (the counters before the rate limiter's)
_REQUEST = struct.Struct("<4sHHQB")
_REPLY = struct.Struct("<4sHHQiHH")
_COUNTERS = struct.Struct("<4I3Qd4Q")
_INFO = 5


class _Exit(Exception):
    """Stop with an exit status: `message` said on stderr (none when
    empty), followed by the --help hint when `hint`."""

    def __init__(self, status: int, message: str = "",
                 hint: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.hint = hint


def _usage(what: str, arg: t.Optional[str] = None) -> _Exit:
    """A bad option: one line, the hint, exit status 2 (the C program's
    bad_usage)."""
    return _Exit(2, what if arg is None else f"{what}: {arg}", hint=True)


class _Source:
    """Where tables come from: a spec file, or an inline --table whose
    options are its spec lines."""

    def __init__(self, file: t.Optional[str] = None,
                 table: t.Optional[str] = None) -> None:
        self.file = file
        self.table = table
        #: an inline table's spec lines, "table NAME" first
        self.lines: t.List[str] = [] if table is None else [f"table {table}"]
        #: the option that made each line ("" for the table line)
        self.given: t.List[str] = [] if table is None else [""]
        #: a spec file's refusal found before parsing: its first key is
        #: not `table` (line, why)
        self.opening: t.Optional[t.Tuple[int, str]] = None


class _Options:
    def __init__(self) -> None:
        self.binds: t.List[str] = []
        self.sources: t.List[_Source] = []
        self.loads: t.List[t.Tuple[str, str, str]] = []  # (NAME=PATH, NAME, PATH)
        self.max_message = _net.MAX_MESSAGE
        self.queue = 16
        self.ready_file: t.Optional[str] = None
        self.checkpoint: t.Optional[str] = None
        self.every = 0.0
        self.curve_secret: t.Optional[str] = None
        self.curve_clients: t.Optional[str] = None
        self.keygen: t.Optional[str] = None
        self.quiet = False
        self.insecure = False


def _u64(s: str) -> t.Optional[int]:
    """An unsigned decimal, the whole of s, below 2**64."""
    if not re.fullmatch(r"[0-9]+", s):
        return None
    x = int(s)
    return x if x < 1 << 64 else None


def _seconds(s: str) -> t.Optional[float]:
    """A number of seconds: the whole of s, as strtod reads it (no "_",
    no blank after it)."""
    if "_" in s or s != s.rstrip():
        return None
    try:
        return float(s)
    except ValueError:
        return None


def _zmq() -> t.Any:
    """pyzmq; exit status 1 saying how to install it when it is
    missing."""
    try:
        return importlib.import_module("zmq")
    except ImportError:
        raise _Exit(1, _PYZMQ) from None


def _say(line: str) -> None:
    print(f"{_PROG}: {line}", file=sys.stderr, flush=True)


def _print(text: str) -> int:
    """text on stdout: exit status 0, or 1 when it could not be
    written."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError:
        return 1
    return 0


def _parse(argv: t.Sequence[str]) -> t.Union[_Options, int]:
    """The options, or the exit status of --help or --version (printed
    here); raises _Exit on a bad option."""
    o = _Options()
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("--") or arg == "--":
            raise _usage("not an option (they all start with --)", arg)
        opt, eq, value = arg[2:].partition("=")
        if opt in _FLAGS:
            if eq:
                raise _usage("this option takes no value", arg)
            if opt == "help":
                return _print(_USAGE.format(bind=_net.DEFAULT_ENDPOINT,
                                            maxmsg=_net.MAX_MESSAGE))
            if opt == "version":
                return _print(_version() + "\n")
            if opt == "quiet":
                o.quiet = True
            else:
                o.insecure = True
            continue
        if opt not in _VALUED:
            raise _usage("unknown option", arg)
        if not eq:
            if i >= len(argv):
                raise _usage("this option needs a value", arg)
            value = argv[i]
            i += 1
        if "\r" in value or "\n" in value:
            raise _usage("a value with a line break", arg)
        if opt in _TABLE_KEYS:
            if not o.sources or o.sources[-1].table is None:
                raise _Exit(2, f"--{opt} before any --table: a table's "
                            "options follow its --table NAME", hint=True)
            src = o.sources[-1]
            src.lines.append(f"{opt.replace('-', '_')} {value}")
            src.given.append(f"--{opt} {value}")
        elif opt == "table":
            o.sources.append(_Source(table=value))
        elif opt == "spec":
            o.sources.append(_Source(file=value))
        elif opt == "bind":
            if o.binds:
                raise _usage("--bind given twice: this per-server (Python, "
                             "per.net.Server) binds one endpoint; the C "
                             "per-server binds several", value)
            o.binds.append(value)
        elif opt == "load":
            name, at, path = value.partition("=")
            if not at or not name or not path:
                raise _usage("--load takes NAME=PATH", value)
            o.loads.append((value, name, path))
        elif opt == "max-message":
            n = _u64(value)
            if n is None:
                raise _usage("--max-message takes a number of bytes", value)
            o.max_message = n
        elif opt == "curve-secret":
            o.curve_secret = value
        elif opt == "curve-clients":
            o.curve_clients = value
        elif opt == "curve-keygen":
            if not value:
                raise _usage("--curve-keygen takes a path prefix", value)
            o.keygen = value
        elif opt == "queue":
            n = _u64(value)
            if n is None or not 1 <= n <= 1000000:
                raise _usage("--queue takes a number of messages, 1 to "
                             "1000000", value)
            o.queue = n
        elif opt == "checkpoint":
            if not value:
                raise _usage("--checkpoint takes a directory", value)
            o.checkpoint = value
        elif opt == "every":
            s = _seconds(value)
            if s is None or not 0 < s <= 1e9:
                raise _usage("--every takes seconds, a number above 0", value)
            o.every = s
        else:
            o.ready_file = value
    if o.keygen is not None:
        return o
    if o.curve_clients is not None and o.curve_secret is None:
        raise _usage("--curve-clients needs --curve-secret FILE")
    if not o.sources:
        raise _usage("no table: give --table NAME --capacity N --item-size N, "
                     "or --spec FILE")
    if o.every > 0 and o.checkpoint is None:
        raise _usage("--every needs --checkpoint DIR")
    if o.checkpoint is not None and o.loads:
        raise _usage("--load and --checkpoint: a checkpoint directory holds "
                     "the tables' state")
    if not o.binds:
        o.binds.append(_net.DEFAULT_ENDPOINT)
    return o


def _version() -> str:
    try:
        zmq = importlib.import_module("zmq")
    except ImportError:
        lib = "pyzmq not installed: pip install pyzmq"
    else:
        lib = f"ZeroMQ {zmq.zmq_version()}, pyzmq {zmq.__version__}"
    return (f"per-server {__version__} (Python, per.net; wire format "
            f"{_net.VERSION}, {lib})")


# ---- CURVE ----


def _keygen(prefix: str) -> None:
    """--curve-keygen PREFIX: a new pair into PREFIX.secret (mode 0600)
    and PREFIX.public, each the key and a line break."""
    zmq = _zmq()
    if not zmq.has("curve"):
        raise _Exit(1, "--curve-keygen: this libzmq has no CURVE")
    public, secret = zmq.curve_keypair()
    for suffix, key, mode in ((".secret", secret, 0o600),
                              (".public", public, 0o644)):
        path = prefix + suffix
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(fd, "wb") as f:
                if mode == 0o600:  # a file that was there keeps no wider mode
                    os.fchmod(f.fileno(), mode)
                f.write(key + b"\n")
        except OSError as e:
            raise _Exit(1, f"--curve-keygen {path}: {e.strerror}") from None
        _say(f"wrote {path}")


def _read_keys(opt: str, path: str, one: bool) -> t.List[str]:
    """The keys of a key file: 40 characters of Z85 a line, blanks around
    them and lines that are blank or start with # skipped (one key at
    most when `one`); exit status 2 on a bad file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise _Exit(2, f"{opt} {path}: {e.strerror}") from None
    if b"\0" in data:
        raise _Exit(2, f"{opt} {path}: a NUL byte: not a text")
    keys: t.List[str] = []
    for no, raw in enumerate(data.split(b"\n"), 1):
        line = raw.decode("latin-1").strip(_BLANKS)
        if not line or line.startswith("#"):
            continue
        if one and keys:
            raise _Exit(2, f"{opt} {path}: line {no}: a second key (the file "
                        "holds one)")
        if not _net._z85_key(line):
            raise _Exit(2, f"{opt} {path}: line {no}: not a key: 40 "
                        "characters of Z85")
        keys.append(line)
    if not keys:
        raise _Exit(2, f"{opt} {path}: no key in it")
    return keys


# ---- endpoints ----


def _loopback(host: str) -> bool:
    """127.x.x.x, ::1 or localhost (the C program's test)."""
    if host in ("localhost", "::1"):
        return True
    return (len(host) >= 5 and host.startswith("127.")
            and all(c == "." or "0" <= c <= "9" for c in host[4:]))


def _local(ep: str) -> bool:
    """Whether ep may be bound without --insecure: ipc://, inproc://, or
    tcp:// on a loopback address."""
    if ep.startswith(("ipc://", "inproc://")):
        return True
    if not ep.startswith("tcp://"):
        return False
    h = ep[6:]
    if h.startswith("["):
        e = h.find("]")
        return e >= 0 and _loopback(h[1:e])
    e = h.rfind(":")
    return e >= 0 and _loopback(h[:e])


# ---- tables ----


def _spec_lines(src: _Source) -> t.List[str]:
    """A spec file's lines (per_net_add_spec's: split at line feeds);
    src.opening is set when its first key is not `table` (a spec read
    on its own refuses that line, and the tables before it in the one
    spec text would take it). Exit status 2 when it cannot be read."""
    assert src.file is not None
    try:
        with open(src.file, "rb") as f:
            data = f.read()
    except OSError as e:
        raise _Exit(2, f"--spec {src.file}: {e.strerror}") from None
    if b"\0" in data:
        raise _Exit(2, f"--spec {src.file}: a NUL byte: not a text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _Exit(2, f"--spec {src.file}: not UTF-8 text (byte {e.start})"
                    ) from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    for no, line in enumerate(lines, 1):
        line = line.strip(_BLANKS)
        if not line or line.startswith("#"):
            continue
        key = re.split(r"[ \t\r]", line, maxsplit=1)[0]
        if key != "table":
            why = ("unknown key" if key not in _SPEC_KEYS else
                   "a key before the first `table` line")
            src.opening = (no, f'{why}: "{key[:23]}"')
        break
    return lines


def _spec(o: _Options) -> t.Tuple[str, t.List[t.Tuple[_Source, int]]]:
    """The one spec text of every source, in order, and where each of its
    lines came from (the source and its line there, from 1). A spec file
    whose first key is not `table` is preceded by a `table` line without
    a name, its line 0: the spec text is refused there, after the tables
    before it were read, as the C program refuses that file."""
    lines: t.List[str] = []
    origin: t.List[t.Tuple[_Source, int]] = []
    for src in o.sources:
        if src.file is None:
            own = src.lines
        else:
            own = _spec_lines(src)
            if src.opening is not None:
                lines.append("table")
                origin.append((src, 0))
        lines.extend(own)
        origin.extend((src, k) for k in range(1, len(own) + 1))
    return "".join(line + "\n" for line in lines), origin


def _why(e: BaseException) -> str:
    """per.Error's message without its status name and where it was
    raised: what per_net.h said."""
    m = re.fullmatch(r"[A-Z0-9_]+: (.*) \([\w.]+\)", str(e), re.S)
    return m.group(1) if m else str(e)


def _spec_error(e: Error, origin: t.List[t.Tuple[_Source, int]]) -> str:
    """The message of per.net.Server's refusal of the spec text, said of
    the option or spec file line that made the line it names."""
    why = _why(e)
    if why.startswith("per_net_init"):
        return f"--max-message: {why}"
    m = re.fullmatch(r"per_net_add_spec: line ([0-9]+): (.*)", why, re.S)
    if m is None or not 1 <= int(m.group(1)) <= len(origin):
        return why
    src, no = origin[int(m.group(1)) - 1]
    if src.file is not None:
        if no == 0:
            assert src.opening is not None
            no, reason = src.opening
        else:
            reason = m.group(2)
        return f"--spec {src.file}: per_net_add_spec: line {no}: {reason}"
    given = src.given[no - 1]
    return f"--table {src.table}{', ' if given else ''}{given}: {m.group(2)}"


# ---- serving ----


def _write_ready(path: str, endpoint: str) -> None:
    """The endpoint and a line break into path: a temporary file
    renamed."""
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write(endpoint + "\n")
        os.replace(tmp, path)
    except OSError:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def _counters(server: _net.Server) -> t.Optional[t.List[int]]:
    """inserts, samples, updates and refused, summed over the tables
    (INFO through Server.handle); None when a table does not answer."""
    total = [0, 0, 0, 0]
    try:
        for name in server.tables:
            b = name.encode()
            reply = server.handle(_REQUEST.pack(b"PERQ", _net.VERSION, _INFO, 0,
                                                len(b)) + b)
            if (len(reply) < _REPLY.size + _COUNTERS.size
                    or _REPLY.unpack_from(reply)[4] != 0):
                return None
            got = _COUNTERS.unpack_from(reply, _REPLY.size)[8:12]
            total = [x + y for x, y in zip(total, got)]
    except Exception:
        return None
    return total


def _stopped(server: _net.Server, start: t.Optional[t.List[int]],
             repeats: int) -> str:
    """The stopped line: the requests this run applied and refused."""
    end = _counters(server)
    if end is None or start is None:
        return "stopped"
    i, s, u, r = (a - b for a, b in zip(end, start))
    line = (f"stopped after {i + s + u} requests applied (INSERT {i}, "
            f"SAMPLE {s}, UPDATE {u}; {r} refused")
    more = server.repeats - repeats
    if more:
        line += f"; {more} once-only repeats answered from memory"
    return line + ")"


def _warning(message: t.Union[Warning, str], category: t.Type[Warning],
             filename: str, lineno: int, file: t.Optional[t.TextIO] = None,
             line: t.Optional[str] = None) -> None:
    """A warning (a save while serving that failed) as one line."""
    _say(str(message))


def _close(server: _net.Server) -> None:
    """Close after a failure: the error said is the one that matters."""
    try:
        server.close()
    except Exception:
        pass


def _serve(o: _Options, stop: threading.Event) -> int:
    secret = (None if o.curve_secret is None else
              _read_keys("--curve-secret", o.curve_secret, True)[0])
    if secret is not None and not _zmq().has("curve"):
        raise _Exit(2, "--curve-secret: this libzmq has no CURVE")
    clients = (None if o.curve_clients is None else
               _read_keys("--curve-clients", o.curve_clients, False))
    endpoint = o.binds[0]
    if not _local(endpoint) and not o.insecure and clients is None:
        raise _Exit(2, f"--bind {endpoint}: not a loopback address "
                    "(127.x.x.x, ::1, localhost), ipc:// or inproc://: anyone "
                    "who reaches it could read and change the tables. Give "
                    "--curve-secret and --curve-clients (only clients with "
                    "those keys get in), or --insecure")
    text, origin = _spec(o)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _Exit(2, "a --table option is not UTF-8 text") from None
    try:
        server = _net.Server(text, endpoint, max_message=o.max_message,
                             insecure=o.insecure, checkpoint=o.checkpoint,
                             every=o.every or None, queue=o.queue,
                             curve_secret=secret, curve_clients=clients)
    except Error as e:
        if str(e).endswith("(per.net.Server)"):  # the spec or max_message
            raise _Exit(2, _spec_error(e, origin)) from None
        raise _Exit(1, f"--checkpoint {o.checkpoint}: {_why(e)}") from None
    except OSError as e:  # the checkpoint directory could not be made
        raise _Exit(1, f"--checkpoint {o.checkpoint}: {e.strerror}") from None
    except ImportError as e:
        raise _Exit(1, str(e)) from None
    except ValueError as e:
        raise _Exit(2, str(e)) from None
    except Exception as e:
        if type(e).__module__.partition(".")[0] != "zmq":
            raise
        # zmq.ZMQError: the bind
        errno = getattr(e, "errno", None)
        why = _zmq().strerror(errno) if isinstance(errno, int) else str(e)
        raise _Exit(1, f"--bind {endpoint}: {why}") from None
    ready = False
    try:
        if server.generation and not o.quiet:
            _say(f"restored generation {server.generation} from "
                 f"{o.checkpoint}")
        for spec, name, path in o.loads:
            if name not in server.tables:
                raise _Exit(2, f'--load {spec}: no table named "{name}"')
            try:
                server.load(name, path)
            except (Error, OSError, ValueError) as e:
                raise _Exit(1, f"--load {spec}: {_why(e)}") from None
        if o.ready_file is not None:
            try:
                _write_ready(o.ready_file, server.endpoint)
            except OSError as e:
                raise _Exit(1, f"--ready-file {o.ready_file}: {e.strerror}"
                            ) from None
            ready = True
        if not o.quiet:
            tables = ", ".join(
                f"{n}({c['capacity']}, {c['item_size']})"
                for n, c in ((n, server.config(n)) for n in server.tables))
            _say(f"serving {tables} on {server.endpoint}")
        # the counters before this run: a restored checkpoint's (per_net.h
        # keeps them across restarts), else 0. Reading them (INFO through
        # Server.handle) counts as a change: the stop saves, as the C
        # program's always does.
        start = _counters(server) if server.generation else [0, 0, 0, 0]
        repeats = server.repeats
        generation = server.generation
        try:
            server.serve(stop)
        except Exception as e:
            raise _Exit(1, f"serving: {e}") from None
    except BaseException:
        if ready:
            _remove(o.ready_file)
        _close(server)
        raise
    if ready:
        _remove(o.ready_file)
    try:
        server.close()  # the last save, when serve's own could not be made
    except (Error, OSError) as e:
        raise _Exit(1, f"--checkpoint {o.checkpoint}: {_why(e)}") from None
    if o.quiet:
        return 0
    if o.checkpoint is not None and server.generation != generation:
        _say(f"saved generation {server.generation} to {o.checkpoint}")
    # the tables after close: nothing changes them any more
    _say(_stopped(server, start, repeats))
    return 0


def _remove(path: t.Optional[str]) -> None:
    if path is not None:
        try:
            os.remove(path)
        except OSError:
            pass


def main(argv: t.Optional[t.Sequence[str]] = None) -> int:
    """per-server with the options argv (default sys.argv[1:]): serve
    until SIGINT or SIGTERM. Returns the exit status (0, 1 or 2; see the
    module); messages go to stderr, --help and --version to stdout."""
    args = list(sys.argv[1:] if argv is None else argv)
    stop = threading.Event()
    handlers: t.Dict[int, t.Any] = {}

    def on_signal(signum: int, frame: t.Optional[types.FrameType]) -> None:
        stop.set()

    try:
        o = _parse(args)
        if isinstance(o, int):
            return o
        if o.keygen is not None:
            _keygen(o.keygen)
            return 0
        # signal handlers belong to the main thread: main() called from
        # another one serves until the process ends
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                handlers[sig] = signal.signal(sig, on_signal)
        with warnings.catch_warnings():
            warnings.simplefilter("always", RuntimeWarning)
            warnings.showwarning = _warning
            return _serve(o, stop)
    except _Exit as e:
        if e.message:
            _say(e.message)
        if e.hint:
            print(_HINT, file=sys.stderr, flush=True)
        return e.status
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())
