"""per.net: prioritized replay over the network, with ZeroMQ (pyzmq).

A Server holds named tables, each a per.h replay buffer, and answers the
requests of docs/PROTOCOL.md on a ZeroMQ ROUTER socket; the request
handling is per_net.h's (per_net_handle, through the extension), the
same code as the C server per-server. A Client (a DEALER socket) inserts
trajectories, samples batches and updates priorities:

    import numpy as np, per.net
    item = {"obs": (np.float32, 4), "action": np.int32}
    with per.net.Server({"replay": per.net.Table(100_000, item, seed=1)},
                        "tcp://127.0.0.1:50051") as server:
        server.start()                       # serves in a daemon thread
        with per.net.Client("tcp://127.0.0.1:50051", dtype=item) as c:
            c.insert(obs=np.zeros((8, 4)), action=np.arange(8))
            batch = c.sample(4)              # items, ids, weights, ...
            c.update(batch.ids, td_errors)

For the same config, seed and calls, a table draws exactly the ids,
weights and items of a per.ReplayBuffer (also with nodes=numpy.float32),
and its checkpoint (Server.save) is that buffer's, byte for byte.
Server(..., checkpoint=DIR, every=SECONDS) keeps the whole server's
checkpoint in DIR (Server.save_all; per-server's --checkpoint),
restored at start.

TcpClient is seed 003's client: TcpClient(host, port, example) with the
example of a per.TrajectoryAccumulator sends what the accumulator built
(send(acc) or send(acc.build())) to a table made with
Table(capacity, example=example); example_dtype says what its items are.

A request the server refuses raises per.Error (status and name, the
per_status of the reply) whose message is the server's, and changed
nothing there; arguments checked here raise TypeError or ValueError
before anything is sent; a reply that does not come within the client's
timeout, nor within it again after the request was sent once more on a
new connection (resend=True; its once-only id makes the server apply it
at most once), raises TimeoutError.

Security is ZeroMQ's CURVE: a Server made with curve_secret= (its
secret key) encrypts every connection, and with curve_clients= (the
public keys allowed) refuses any other client; Client(curve=(server's
public key, its public key, its secret key)) connects so. Keys are 40
characters of Z85 (zmq.curve_keypair(), per-server --curve-keygen). A
Server binds only loopback addresses (and ipc:// or inproc://
endpoints) unless it has both, or is made with insecure=True.

Needs pyzmq (pip install pyzmq, or pip install per-replay[net]); the
module imports without it, and Server and Client raise ImportError
saying so. Table and example_dtype need NumPy only.
"""

import importlib
import ipaddress
import math
import os
import secrets
import struct
import threading
import time
import typing as t
import warnings

import numpy as np

from . import _per
from . import _per32
from . import config as _config
from . import END_NONE
from . import ReplayBuffer as _ReplayBuffer
from . import TrajectoryAccumulator
from . import _Scale
from . import _dtype_of_layout
from . import _floats
from . import _indices
from . import _layout_of
from . import _vector
from . import _cast
from .config import Array, ArrayLike, DType, DTypeLike, Items, ItemSpec
from .config import PathArg
from .config import count as _count
from .config import error as _error

if t.TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "Table", "Server", "Client", "TcpClient", "Batch", "example_dtype",
    "VERSION", "HELLO", "INSERT", "SAMPLE", "UPDATE", "INFO",
    "MAX_MESSAGE", "DEFAULT_ENDPOINT",
]

#: The wire format's version (docs/PROTOCOL.md).
VERSION = 1
#: Ops: a request's u16 op.
HELLO, INSERT, SAMPLE, UPDATE, INFO = 1, 2, 3, 4, 5
#: The largest request or reply a Server takes or makes by default (64 MiB).
MAX_MESSAGE = 64 << 20
#: Where a Server listens by default.
DEFAULT_ENDPOINT = "tcp://127.0.0.1:50051"

_OPS = {HELLO: "HELLO", INSERT: "INSERT", SAMPLE: "SAMPLE", UPDATE: "UPDATE",
        INFO: "INFO"}
# a request's header: magic, version, op, request id, name length
_REQ = struct.Struct("<4sHHQB")
# a reply's: magic, version, op, request id, status, message length, 0
_REP = struct.Struct("<4sHHQiHH")
# HELLO's reply body: the table's per_config, then its layout
_TABLE = struct.Struct("<6I3dQ3dQH")
_TABLE_KEYS = ("capacity", "item_size", "seq_len", "seq_stride", "flags",
               "max_unique", "alpha", "beta0", "beta1", "beta_steps", "eps",
               "max_priority", "seq_eta", "seed")
# INFO's reply body
_INFO = struct.Struct("<4I3Qd8Q2d")
_INFO_KEYS = ("capacity", "item_size", "size", "seq_len", "added",
              "trajectories", "step", "beta", "inserts", "samples", "updates",
              "refused", "items_inserted", "items_sampled", "busy",
              "min_size", "samples_per_insert", "error_margin")
_BUSY = 23  # PER_ERR_BUSY: the rate limiter holds a request back
# a request id with this bit is once-only (PER_NET_ONCE; docs/PROTOCOL.md,
# "Once-only requests"); the low 63 bits count up
_ONCE = 1 << 63
_MASK63 = _ONCE - 1
# the file of a checkpoint directory that names its generation
# (PER_NET_STATE_FILE): a directory holding it has a checkpoint
_STATE_FILE = "server.state"
# INSERT flags, UPDATE flags, SAMPLE want
_ENDS, _TD, _SEQUENCES, _NO_ITEMS = 1, 2, 1, 1


def _zmq(module: str = "zmq") -> t.Any:
    """pyzmq (or one of its modules), imported when a Server or Client is
    made."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError("per.net needs pyzmq: pip install pyzmq (or pip "
                          "install per-replay[net])") from e


def _table_name(name: object, call: str) -> bytes:
    """A table's name as the wire has it: 1 to 63 bytes of UTF-8, no
    control character, no blank at either end (a spec text drops those)."""
    if not isinstance(name, str):
        raise TypeError(f"{call}: a table's name is a str, not "
                        f"{type(name).__name__}")
    b = name.encode()
    if (not 1 <= len(b) <= 63 or any(c < 0x20 or c == 0x7F for c in b)
            or name != name.strip(" \t")):
        raise ValueError(f"{call}: a table's name is 1 to 63 bytes of UTF-8 "
                         f"without control characters or blanks at its "
                         f"ends, not {name!r}")
    return b


# ---------------------------------------------------------------------------
# Items from a seed-003 example
# ---------------------------------------------------------------------------


def _scales(example: t.Mapping[str, t.Any], call: str
            ) -> t.Tuple[_Scale, t.List[_Scale]]:
    """The example's buffered timescale and its single-item ones (in the
    example's order), as TrajectoryAccumulator reads them."""
    if not isinstance(example, dict) or not example:
        raise TypeError(f"{call}: the example is a non-empty dict whose keys "
                        f"name the timescales, as TrajectoryAccumulator's")
    for name in example:
        if not isinstance(name, str):
            raise TypeError(f"{call}: timescale names are str, not "
                            f"{type(name).__name__} ({name!r})")
    scales = [_Scale(name, i, sub) for i, (name, sub) in enumerate(example.items())]
    buffered = [sc for sc in scales if not sc.single]
    if len(buffered) != 1:
        raise ValueError(f"{call}: the example needs exactly one buffered "
                         f"timescale (the steps, one item each), not "
                         f"{len(buffered)} ({[sc.name for sc in buffered]})")
    return buffered[0], [sc for sc in scales if sc.single]


def example_dtype(example: t.Mapping[str, t.Any]) -> DType:
    """The item dtype of a table for seed 003's example (a
    TrajectoryAccumulator's): one item a step. The example must have
    exactly one buffered timescale (ValueError otherwise). The dtype is a
    nested record: its first field, named as the buffered timescale,
    holds the step's record (TrajectoryAccumulator.timescales[name]
    ["dtype"]: a field per leaf, named by the leaf's path joined with
    "/"), and each single-item timescale follows, in the example's order,
    as a field of its name holding its record (leaf shapes as the
    example's, a leading 1 kept). So items["step"]["obs"] is a batch's
    observations and items["episode"]["return"] the episode return sent
    with each of its steps."""
    b, singles = _scales(example, "per.net.example_dtype")
    dt: DType = np.dtype([(b.name, b.dtype)] + [(s.name, s.dtype) for s in singles])
    return dt


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------

#: Table's config keywords: ReplayBuffer's.
_KEYS = _config.REPLAY_KEYS
#: per_config's flags by the names a spec text knows (per_net_add_spec)
_FLAG_NAMES = {"weights_buffer_max": _per.WEIGHTS_BUFFER_MAX,
               "seq_cross_episodes": _per.SEQ_CROSS_EPISODES,
               "max_live": _per.MAX_LIVE}
# integer fields of 64 bits (the others are 32)
_WIDE = ("beta_steps", "seed")


class Table:
    """One table of a Server: a per.h replay buffer of `capacity` items.

    The item is `dtype` (what ReplayBuffer takes as its item: a
    structured dtype, or a dict of field -> dtype, (dtype, shape) or
    example array), or an int (items of that many bytes, no NumPy dtype:
    its clients read raw bytes), or example= (seed 003's example: the
    items of example_dtype(example)). layout: the text the table keeps
    and compares with each client's HELLO and with a checkpoint's (default:
    the dtype's, as ReplayBuffer keeps it, so that a table's checkpoint
    loads into per.ReplayBuffer and back; "" for an int dtype).

    The keywords are ReplayBuffer's (per_config's fields, with the C
    defaults: alpha, beta0, beta1, beta_steps, eps, max_priority, seed,
    max_unique, seq_len, seq_stride, seq_eta, and the flags
    weights_buffer_max, cross_episodes, live_max as bools), so a table and
    a ReplayBuffer made with the same ones draw the same; and flags=, an
    int of per_config's flag bits or their spec-text names joined by "|"
    ("weights_buffer_max|seq_cross_episodes|max_live"), OR'ed with the
    bool keywords. .config is the C config given (per_config's field
    names; the fields left out take per_config_default's values).

    min_size, samples_per_insert, error_margin: the table's rate limiter
    (docs/PROTOCOL.md, "Rate limiting"; Reverb's SampleToInsertRatio in
    items): samples wait (PER_ERR_BUSY) until min_size items are stored
    and, with samples_per_insert > 0, whenever samples run more than
    error_margin items ahead of samples_per_insert per item inserted;
    inserts when they run that far ahead of samples. The defaults limit
    nothing."""

    def __init__(self, capacity: int, dtype: t.Union[ItemSpec, int, None] = None,
                 *, example: t.Optional[t.Mapping[str, t.Any]] = None,
                 layout: t.Optional[str] = None,
                 flags: t.Union[int, str, None] = None,
                 min_size: int = 0, samples_per_insert: float = 0.0,
                 error_margin: float = 0.0,
                 **config: "Unpack[_config.ReplayKeywords]") -> None:
        call = "per.net.Table"
        self.min_size: int = _count(min_size, f"{call}: min_size", 64)
        self.samples_per_insert: float = _config.real(
            samples_per_insert, f"{call}: samples_per_insert")
        self.error_margin: float = _config.real(error_margin,
                                                f"{call}: error_margin")
        if (dtype is None) == (example is None):
            raise TypeError(f"{call}: give the item as dtype or as example=, "
                            "one of them")
        _config.check_keywords(call, config, _KEYS)
        self.dtype: t.Optional[DType] = None
        if example is not None:
            self.dtype = example_dtype(example)
            size = self.dtype.itemsize
        elif isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
            size = _count(dtype, f"{call}: item size")
        else:
            self.dtype = _config.item_dtype(t.cast(ItemSpec, dtype))
            size = self.dtype.itemsize
        if layout is None:
            layout = _layout_of(self.dtype) if self.dtype is not None else ""
        if not isinstance(layout, str):
            raise TypeError(f"{call}: layout is a str, not {type(layout).__name__}")
        if ("\n" in layout or "\r" in layout or layout != layout.strip(" \t")
                or len(layout.encode()) > 511):
            raise ValueError(f"{call}: a layout is one line of at most 511 "
                             "bytes without blanks at its ends")
        self.layout: str = layout
        cfg = _config.c_config(call, _KEYS, config, {
            "capacity": _count(capacity, f"{call}: capacity"),
            "item_size": size})
        for k in _KEYS:
            if k.kind == _config.INT and k.name in cfg:
                _count(cfg[k.name], f"{call}: {k.name}",
                       64 if k.name in _WIDE else 32)
        cfg["flags"] = t.cast(int, cfg["flags"]) | self._flags(flags, call)
        self.config: t.Dict[str, object] = cfg

    @staticmethod
    def _flags(flags: t.Union[int, str, None], call: str) -> int:
        if flags is None:
            return 0
        if isinstance(flags, str):
            out = 0
            for part in flags.split("|"):
                bit = _FLAG_NAMES.get(part.strip())
                if bit is None:
                    raise ValueError(f"{call}: flags: unknown flag "
                                     f"{part.strip()!r}; the names are "
                                     f"{sorted(_FLAG_NAMES)}")
                out |= bit
            return out
        return _count(flags, f"{call}: flags")

    @property
    def item_size(self) -> int:
        return t.cast(int, self.config["item_size"])

    def spec(self, name: str) -> str:
        """The spec text of this table named `name`, as per_net_add_spec
        (and per-server's --spec file) reads it: `table NAME`, then a
        `key value` line per field given (reals written so that strtod
        gives the same double back), flags as a number, and the layout."""
        _table_name(name, "per.net.Table.spec")
        lines = [f"table {name}"]
        for key, v in self.config.items():
            if isinstance(v, float):
                lines.append(f"{key} {v!r}")
            else:
                lines.append(f"{key} {int(t.cast(int, v))}")
        if self.min_size:
            lines.append(f"min_size {self.min_size}")
        if self.samples_per_insert:
            lines.append(f"samples_per_insert {self.samples_per_insert!r}")
        if self.error_margin:
            lines.append(f"error_margin {self.error_margin!r}")
        if self.layout:
            lines.append(f"layout {self.layout}")
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        item = self.dtype if self.dtype is not None else f"{self.item_size} bytes"
        return f"per.net.Table(capacity={self.config['capacity']}, item={item})"


# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------


_Z85 = ("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        ".-:+=^!/*?&<>()[]{}@%$#")
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}


def _z85_key(s: str) -> bool:
    """Whether s is a CURVE key: 40 characters of Z85 (each group of 5
    below 2**32), as zmq_z85_decode takes it."""
    if len(s) != 40:
        return False
    for k in range(0, 40, 5):
        v = 0
        for c in s[k:k + 5]:
            d = _Z85_VALUE.get(c)
            if d is None:
                return False
            v = v * 85 + d
        if v >= 1 << 32:
            return False
    return True


def _key(key: t.Union[str, bytes], what: str) -> bytes:
    """A CURVE key: 40 characters of Z85 (32 bytes), as bytes."""
    if isinstance(key, str):
        key = key.encode("ascii", "replace")
    if not isinstance(key, bytes):
        raise TypeError(f"{what} is a key (str or bytes of Z85), not "
                        f"{type(key).__name__}")
    key = key.strip()
    if not _z85_key(key.decode("latin-1")):
        raise ValueError(f"{what} is not a key: 40 characters of Z85 "
                         "(zmq.curve_keypair(), per-server --curve-keygen)")
    return key


class _Allowed:
    """ZAP's CURVE check (zmq.auth): the client's public key among the
    allowed."""

    def __init__(self, keys: t.FrozenSet[bytes]) -> None:
        self.keys = keys

    def callback(self, domain: str, key: bytes) -> bool:
        return key in self.keys


def _ipv6(endpoint: str) -> bool:
    """Whether endpoint is tcp:// at a bracketed (IPv6) address, which a
    ZeroMQ socket binds or reaches only with its IPV6 option set."""
    return endpoint.startswith("tcp://[")


def _local(endpoint: str) -> bool:
    """Whether endpoint reaches only this machine: ipc://, inproc://, or
    tcp:// on a loopback address or localhost."""
    transport, _, rest = endpoint.partition("://")
    if transport in ("ipc", "inproc"):
        return True
    if transport != "tcp":
        return False
    host = rest.rsplit(":", 1)[0]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # an interface name, *, a host name
        return False


class Server:
    """A replay server: per_net.h's tables answering docs/PROTOCOL.md's
    requests on a ZeroMQ ROUTER socket bound to `endpoint`.

    tables: a dict of name -> Table, or a spec text (per_net_add_spec's,
    per-server's --spec). endpoint: where to listen; "tcp://127.0.0.1:0"
    takes a free port (.endpoint then says which); an IPv6 address goes
    in brackets ("tcp://[::1]:0"). max_message: the
    largest request or reply in bytes (ZeroMQ drops a connection that
    sends a larger request; a sample whose reply would be larger is
    refused with PER_ERR_BATCH). nodes: the tables' node type,
    numpy.float64 or numpy.float32 (ReplayBuffer's nodes=).
    curve_secret: the server's CURVE secret key (Z85, 40 characters):
    every connection is encrypted; curve_clients: the public keys of the
    clients allowed (any other is refused; per-server's --curve-clients).
    insecure: bind an address other machines reach without both; such an
    endpoint is otherwise a ValueError. queue: messages kept for each client, each way (ZeroMQ's
    SNDHWM and RCVHWM; per-server's --queue): a client that sends more
    without reading waits, and replies past `queue` to one that does not
    read are dropped (it times out), so the server holds at most `queue`
    largest messages a client.

    checkpoint: a directory (made when missing) that holds the whole
    server's checkpoint (per_net_save: every table, its counters, its rate
    limiter's counts and the once-only requests it remembers; per-server's
    --checkpoint). When it holds one (server.state), the tables are
    restored from it here, before anything is served; else they start
    empty. The server saves into it every `every` seconds while serving
    (from the serving loop, and only when a request came since the last
    save; every None or 0: never while serving), when serve() returns and
    at close(). A save the loop could not make leaves the directory's
    previous checkpoint whole: the loop goes on serving, warns
    (RuntimeWarning), keeps the error in .save_error and tries again;
    close() raises it if its own save fails too.

    serve() answers requests until stopped; start() serves in a daemon
    thread; close() stops and closes (also as a context manager). save,
    load, save_all, restore_all and handle may be called while it serves,
    from any
    thread: a lock keeps them and the loop apart. The tables are made
    (and restored) before the socket is bound: a bad spec, or a
    checkpoint of other tables, raises per.Error (its line or the
    mismatch named) and binds nothing."""

    def __init__(self, tables: t.Union[t.Mapping[str, Table], str],
                 endpoint: str = DEFAULT_ENDPOINT, *,
                 max_message: int = MAX_MESSAGE,
                 nodes: DTypeLike = np.float64, insecure: bool = False,
                 checkpoint: t.Optional[PathArg] = None,
                 every: t.Optional[float] = None, queue: int = 16,
                 curve_secret: t.Optional[t.Union[str, bytes]] = None,
                 curve_clients: t.Optional[t.Iterable[t.Union[str, bytes]]]
                 = None) -> None:
        call = "per.net.Server"
        if isinstance(tables, str):
            spec = tables
        elif isinstance(tables, t.Mapping):
            if not tables:
                raise ValueError(f"{call}: no tables")
            for name, table in tables.items():
                if not isinstance(table, Table):
                    raise TypeError(f"{call}: table {name!r} is a "
                                    f"{type(table).__name__}, not a "
                                    "per.net.Table")
            spec = "".join(table.spec(name) for name, table in tables.items())
        else:
            raise TypeError(f"{call}: tables is a dict of name -> Table or a "
                            f"spec text, not {type(tables).__name__}")
        if not isinstance(endpoint, str):
            raise TypeError(f"{call}: endpoint is a str, not "
                            f"{type(endpoint).__name__}")
        secret = (None if curve_secret is None
                  else _key(curve_secret, f"{call}: curve_secret"))
        allowed: t.Optional[t.FrozenSet[bytes]] = None
        if curve_clients is not None:
            if secret is None:
                raise ValueError(f"{call}: curve_clients needs curve_secret "
                                 "(per-server's --curve-secret)")
            if isinstance(curve_clients, (str, bytes)):
                raise TypeError(f"{call}: curve_clients is a list of public "
                                "keys, not one key")
            allowed = frozenset(_key(k, f"{call}: curve_clients[{i}]")
                                for i, k in enumerate(curve_clients))
            if not allowed:
                raise ValueError(f"{call}: curve_clients is empty")
        if not insecure and allowed is None and not _local(endpoint):
            raise ValueError(
                f"{call}: {endpoint!r} can be reached from other machines: "
                "anyone who reaches it could read and change the tables. "
                "Give curve_secret= and curve_clients= (ZeroMQ CURVE: only "
                "clients with those keys get in), bind a loopback address "
                "(tcp://127.0.0.1:PORT), or pass insecure=True "
                "(per-server's --insecure) on a network you trust.")
        self.nodes: DType = _config.nodes_of(nodes, f"{call}: nodes")
        mm = _count(max_message, f"{call}: max_message", 64)
        hwm = _count(queue, f"{call}: queue", 32)
        if not 1 <= hwm <= 1000000:
            raise ValueError(f"{call}: queue is 1 to 1000000 messages, not "
                             f"{queue!r}")
        period = 0.0
        if every is not None:
            period = _config.real(every, f"{call}: every")
            if not (period >= 0 and math.isfinite(period)):
                raise ValueError(f"{call}: every is a number of seconds >= 0 "
                                 f"(or None), not {every!r}")
            if period and checkpoint is None:
                raise ValueError(f"{call}: every= saves into checkpoint=, "
                                 "which was not given")
        #: the checkpoint directory (None: none), and the seconds between
        #: its saves while serving (0: none while serving)
        self.checkpoint: t.Optional[str] = None
        self.every: float = period
        #: the error of the last save the serving loop could not make
        #: (None once a save succeeds)
        self.save_error: t.Optional[BaseException] = None
        mod = _per32 if self.nodes == _config.F32 else _per
        self._srv: _per._NetServer = mod._NetServer(spec, mm)
        # the tables may differ from the checkpoint's last save
        self._dirty = True
        if checkpoint is not None:
            if not isinstance(checkpoint, (str, os.PathLike)):
                raise TypeError(f"{call}: checkpoint is a directory's path, "
                                f"not {type(checkpoint).__name__}")
            ckpt = os.fsdecode(os.fspath(checkpoint))
            os.makedirs(ckpt, exist_ok=True)
            if os.path.exists(os.path.join(ckpt, _STATE_FILE)):
                self._srv.restore_all(ckpt)
                self._dirty = False
            self.checkpoint = ckpt
        zmq = _zmq()
        self._zmq = zmq
        self._lock = threading.Lock()        # around every call on _srv
        self._serving = threading.Lock()     # held by the one serve loop
        self._stop = threading.Event()
        self._thread: t.Optional[threading.Thread] = None
        self._closed = False
        self._ctx = zmq.Context()
        self._auth: t.Any = None
        try:
            if allowed is not None:  # the ZAP handler, before the bind
                auth = _zmq("zmq.auth.thread")
                self._auth = auth.ThreadAuthenticator(self._ctx)
                self._auth.start()
                self._auth.configure_curve_callback(
                    domain="per", credentials_provider=_Allowed(allowed))
            sock = self._ctx.socket(zmq.ROUTER)
            try:
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.MAXMSGSIZE, mm)
                if secret is not None:
                    sock.setsockopt(zmq.CURVE_SERVER, 1)
                    sock.setsockopt(zmq.CURVE_SECRETKEY, secret)
                    sock.setsockopt(zmq.ZAP_DOMAIN, b"per")
                sock.setsockopt(zmq.SNDHWM, hwm)
                sock.setsockopt(zmq.RCVHWM, hwm)
                if _ipv6(endpoint):
                    sock.setsockopt(zmq.IPV6, 1)
                sock.bind(endpoint)
                self.endpoint: str = sock.getsockopt_string(zmq.LAST_ENDPOINT)
            except BaseException:
                sock.close(0)
                raise
        except BaseException:
            if self._auth is not None:
                self._auth.stop()
            self._ctx.term()
            raise
        self._sock = sock
        self.max_message: int = mm
        self.queue: int = hwm

    # -- the tables ----------------------------------------------------------

    @property
    def tables(self) -> t.List[str]:
        """The tables' names, in the order made."""
        with self._lock:
            return self._srv.tables()

    def config(self, name: str) -> t.Dict[str, t.Any]:
        """Table `name`'s per_config (its fields by their C names) and
        "layout"; KeyError when there is none."""
        with self._lock:
            return self._srv.config(name)

    def handle(self, request: t.Any) -> bytes:
        """The reply to one request (any bytes-like object), as the loop
        answers it: for a transport of your own."""
        with self._lock:
            self._dirty = True
            return self._srv.handle(request)

    def save(self, name: str, path: PathArg) -> None:
        """per_buffer_save of table `name` (a per.ReplayBuffer checkpoint:
        ReplayBuffer.from_file reads it)."""
        with self._lock:
            self._srv.save(name, os.fspath(path))

    def save_all(self, dir: t.Optional[PathArg] = None) -> None:
        """The whole server's checkpoint (per_net_save: every table, its
        counters, rate limiter counts and the once-only requests it
        remembers) into the existing directory dir, by default the
        checkpoint directory (ValueError when there is none);
        restore_all, checkpoint= and per-server --checkpoint read it."""
        if dir is None:
            if self.checkpoint is None:
                raise ValueError("per.net.Server.save_all: no dir given, and "
                                 "the server has no checkpoint directory "
                                 "(checkpoint=)")
            self._save_checkpoint()
            return
        self._save(os.fsdecode(os.fspath(dir)))

    def restore_all(self, dir: PathArg) -> None:
        """Give the tables the state of save_all(dir)'s checkpoint in dir
        (per_net_restore): their buffers, counters, rate limiter counts
        and the once-only requests they remember. dir must hold exactly
        this server's tables, by name (per.Error PER_ERR_MISMATCH naming
        the difference otherwise, nothing changed). A table file that
        fails after others were restored (its own checksum) leaves the
        server part restored: restore again or close it, do not serve."""
        d = os.fsdecode(os.fspath(dir))
        with self._lock:
            self._dirty = True
            self._srv.restore_all(d)

    def load(self, name: str, path: PathArg) -> None:
        """per_buffer_load into table `name` (the checkpoint of a table or
        ReplayBuffer of its capacity, items and sequence settings)."""
        with self._lock:
            self._dirty = True
            self._srv.load(name, os.fspath(path))

    @property
    def generation(self) -> int:
        """The generation of the checkpoint last saved or restored (0:
        none yet); a directory's file names carry it."""
        return self._srv.generation

    @property
    def repeats(self) -> int:
        """Once-only requests answered from memory, applying nothing
        (repeats of INSERTs and UPDATEs applied before)."""
        return self._srv.repeats

    def _save(self, d: str) -> None:
        """per_net_save into d, under the lock; the checkpoint directory
        is then up to date when d is it."""
        with self._lock:
            self._srv.save_all(d)
            if d == self.checkpoint:
                self._dirty = False

    def _save_checkpoint(self) -> None:
        assert self.checkpoint is not None
        self._save(self.checkpoint)
        self.save_error = None

    def _autosave(self) -> None:
        """The loop's save: a failure is kept and warned of, not raised,
        so that serving goes on (the previous checkpoint stays whole)."""
        try:
            self._save_checkpoint()
        except _per.Error as e:
            self.save_error = e
            warnings.warn(f"per.net.Server: the checkpoint was not saved, "
                          f"serving goes on: {e}", RuntimeWarning,
                          stacklevel=2)

    # -- serving -------------------------------------------------------------

    def serve(self, stop_event: t.Optional[threading.Event] = None,
              poll_ms: int = 50) -> None:
        """Answer requests until stop_event is set or close() is called
        (checked every poll_ms milliseconds). Every request, also one that
        cannot be parsed, gets one reply, addressed as it came (a DEALER's
        identity, and a REQ's empty delimiter frame): the frames before
        the request's last are sent back before the reply. One loop at a
        time (RuntimeError for a second). With a checkpoint directory, the
        loop saves into it every `every` seconds when requests came, and
        once more when it returns (see the class)."""
        zmq = self._zmq
        if not self._serving.acquire(blocking=False):
            raise RuntimeError("per.net.Server.serve: it is serving already")
        try:
            if self._closed:  # read under _serving, which close() holds
                raise ValueError("per.net.Server.serve: the server is closed")
            sock = self._sock
            every = self.every if self.checkpoint is not None else 0.0
            due = time.monotonic() + every
            while not self._stop.is_set() and not (
                    stop_event is not None and stop_event.is_set()):
                wait = poll_ms
                if every:
                    if time.monotonic() >= due:
                        if self._dirty:
                            self._autosave()
                        due = time.monotonic() + every
                    wait = min(poll_ms, max(0, math.ceil(
                        (due - time.monotonic()) * 1000)))
                if not sock.poll(wait, zmq.POLLIN):
                    continue
                for _ in range(256):  # then look at the stop flags again
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    if len(frames) < 2:  # a ROUTER's has the identity first
                        continue
                    with self._lock:
                        self._dirty = True
                        reply = self._srv.handle(frames[-1].buffer)
                    sock.send_multipart([f.bytes for f in frames[:-1]] + [reply],
                                        copy=False)
            # stopped by stop_event: saved here; by close(): close saves
            if (self.checkpoint is not None and self._dirty
                    and not self._stop.is_set()):
                self._autosave()
        finally:
            self._serving.release()

    def start(self) -> "Server":
        """serve() in a daemon thread; returns self."""
        if self._closed:
            raise ValueError("per.net.Server.start: the server is closed")
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("per.net.Server.start: started already")
        self._thread = threading.Thread(target=self.serve, daemon=True,
                                        name=f"per.net.Server {self.endpoint}")
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving (wait for the loop to finish its request), close
        the socket, and save into the checkpoint directory when the
        tables changed since its last save (per.Error when that save
        fails; the directory's previous checkpoint stays whole).
        Idempotent."""
        if self._closed:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        # a loop of another thread (serve() called there) sees the flag
        # within poll_ms and lets go
        with self._serving:
            self._closed = True
            self._sock.close(0)
            if self._auth is not None:
                self._auth.stop()
            self._ctx.term()
        if self.checkpoint is not None and self._dirty:
            self._save_checkpoint()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._closed:
            return f"per.net.Server({self.endpoint!r}, closed)"
        state = "serving" if self._serving.locked() else "not serving"
        return f"per.net.Server({self.endpoint!r}, tables={self.tables}, {state})"


# ---------------------------------------------------------------------------
# Clients
# ---------------------------------------------------------------------------


class Batch(t.NamedTuple):
    """What Client.sample returns. items: the records (the client's
    dtype; raw uint8 rows of the item's bytes without one), shape (B,) or
    (B, seq_len) with sequences, None with items=False. ids: uint64, for
    update. weights: float32 importance-sampling weights. mask: bool
    (B, seq_len) with sequences, False past the sequence's episode (as
    ReplayBuffer.sample's "mask"), else None. beta: the beta the weights
    used."""

    items: t.Optional[Array]
    ids: Array
    weights: Array
    mask: t.Optional[Array]
    beta: float


class _Records:
    """Items of a dtype, by ReplayBuffer.add_batch's rules (its own
    code)."""

    _records = _ReplayBuffer._records
    _from_fields = _ReplayBuffer._from_fields

    def __init__(self, dtype: DType) -> None:
        self.dtype = dtype


class Client:
    """A client of one table of a Server (or per-server) at `endpoint`.

    dtype (ReplayBuffer's item) or example (seed 003's: example_dtype)
    names the items; the client then says HELLO at once, and a table of
    another item size or layout raises per.Error PER_ERR_MISMATCH here.
    item_size alone: items are raw bytes of that size (HELLO checks the
    size only). With none of them no HELLO is sent and samples come back
    as raw uint8 rows. .table is the table's config from HELLO (None
    without one).

    Each request has a once-only request id of its own (bit 63 set, the
    low 63 bits counting up from a random start; docs/PROTOCOL.md,
    "Once-only requests") and the client waits for the reply with that
    id, dropping any other (a late reply to a request that timed out),
    for `timeout` seconds. Then it closes its socket and opens a new one
    (a server that restarted, or a connection that broke, is reached
    afresh), and with resend=True (the default) sends the same request,
    its id unchanged, once more on it and waits `timeout` seconds again:
    a server that applied the INSERT or UPDATE already answers from
    memory and applies nothing (a SAMPLE is drawn again). When no reply
    comes to that either, or with resend=False, it raises TimeoutError;
    the request may have been applied, once. A client is one ZeroMQ
    socket: use it from one thread at a time.

    A table with a rate limiter (Table's min_size, samples_per_insert,
    error_margin) answers a request that would run too far ahead
    PER_ERR_BUSY, having done nothing. With wait=True (the default) the
    client sends it again, 1 ms later and then at doubling intervals up
    to 50 ms, until it is applied or `timeout` seconds have passed since
    it was first sent (or sent again after a timeout), then raises
    per.Error PER_ERR_BUSY; with wait=False the first busy answer raises
    it."""

    def __init__(self, endpoint: str, table: str = "replay", *,
                 dtype: t.Optional[ItemSpec] = None,
                 example: t.Optional[t.Mapping[str, t.Any]] = None,
                 item_size: t.Optional[int] = None,
                 timeout: float = 10.0, wait: bool = True,
                 resend: bool = True,
                 curve: t.Optional[t.Sequence[t.Union[str, bytes]]] = None
                 ) -> None:
        call = type(self).__module__ + "." + type(self).__qualname__
        self._curve: t.Optional[t.Tuple[bytes, ...]] = None
        if curve is not None:
            if isinstance(curve, (str, bytes)) or len(curve) != 3:
                raise TypeError(f"{call}: curve is (the server's public key, "
                                "this client's public key, its secret key)")
            self._curve = tuple(
                _key(k, f"{call}: curve[{i}]") for i, k in enumerate(curve))
        self._call_name = call
        self._name = _table_name(table, call)
        self.table_name: str = table
        if sum(x is not None for x in (dtype, example, item_size)) > 1:
            raise TypeError(f"{call}: give the item as dtype, example or "
                            "item_size, one of them")
        self.dtype: t.Optional[DType] = None
        layout = ""
        size: t.Optional[int] = None
        if example is not None:
            self.dtype = example_dtype(example)
        elif dtype is not None:
            self.dtype = _config.item_dtype(dtype)
        elif item_size is not None:
            size = _count(item_size, f"{call}: item_size")
        if self.dtype is not None:
            size = self.dtype.itemsize
            layout = _layout_of(self.dtype)
        self.item_size: t.Optional[int] = size
        self.timeout = _config.real(timeout, f"{call}: timeout")
        self.wait: bool = bool(wait)
        self.resend: bool = bool(resend)
        if not self.timeout > 0:
            raise ValueError(f"{call}: timeout must be > 0 seconds, not "
                             f"{timeout!r}")
        if not isinstance(endpoint, str):
            raise TypeError(f"{call}: endpoint is a str, not "
                            f"{type(endpoint).__name__}")
        self.endpoint: str = endpoint
        zmq = _zmq()
        self._zmq = zmq
        self._next_id = secrets.randbits(63)  # the next id's low 63 bits
        self._ctx = zmq.Context()
        self._sock: t.Any = None
        self._closed = False
        self.table: t.Optional[t.Dict[str, t.Any]] = None
        try:
            self._connect()
            if size is not None:
                lay = layout.encode()
                self.table = self._hello(self._request(
                    HELLO, [struct.pack("<IH", size, len(lay)), lay], "HELLO"))
        except BaseException:
            self.close()
            raise

    # -- the wire ------------------------------------------------------------

    def _connect(self) -> None:
        """A new DEALER socket (of the client's context) connected to the
        endpoint, in place of the one there was (closed, dropping what
        it still queued)."""
        zmq = self._zmq
        if self._sock is not None:
            self._sock.close(0)
            self._sock = None
        sock = self._ctx.socket(zmq.DEALER)
        try:
            sock.setsockopt(zmq.LINGER, 0)
            if _ipv6(self.endpoint):
                sock.setsockopt(zmq.IPV6, 1)
            if self._curve is not None:
                sock.setsockopt(zmq.CURVE_SERVERKEY, self._curve[0])
                sock.setsockopt(zmq.CURVE_PUBLICKEY, self._curve[1])
                sock.setsockopt(zmq.CURVE_SECRETKEY, self._curve[2])
            sock.connect(self.endpoint)
        except BaseException:
            sock.close(0)
            raise
        self._sock = sock

    def _request(self, op: int, body: t.Sequence[t.Any], what: str
                 ) -> memoryview:
        """Send one request (the header, then the bytes-like parts of
        body) and return the body of its reply; per.Error for a refusal."""
        if self._closed:
            raise ValueError(f"{self._call_name}: the client is closed")
        zmq = self._zmq
        if self._sock is None:  # a reconnection after a timeout failed
            self._connect()
        rid = _ONCE | self._next_id
        self._next_id = (self._next_id + 1) & _MASK63
        head = _REQ.pack(b"PERQ", VERSION, op, rid, len(self._name)) + self._name
        request = b"".join([head, *body])
        self._sock.send(request, copy=False)
        deadline = time.monotonic() + self.timeout
        pause = 0.001
        again = self.resend
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                # a server that restarted or a broken connection is
                # reached afresh on a new socket; the request, with its
                # id, is sent there once more
                self._connect()
                if again:
                    again = False
                    self._sock.send(request, copy=False)
                    deadline = time.monotonic() + self.timeout
                    continue
                sent = "sent twice, " if self.resend else ""
                raise TimeoutError(
                    f"{self._call_name}.{what}: no reply from "
                    f"{self.endpoint} in {self.timeout:g} s ({sent}"
                    "no server serving there, or a request larger than "
                    "its max_message, which it drops"
                    + ("; CURVE: is it the server's public key, and is this "
                       "client's among its curve_clients?" if self._curve
                       else "") + ")")
            if not self._sock.poll(max(1, math.ceil(left * 1000)), zmq.POLLIN):
                continue
            # the frame's own memory, not a copy: a batch of large items
            # is copied once, into the arrays sample() returns
            reply: memoryview = self._sock.recv_multipart(copy=False)[-1].buffer
            if len(reply) < _REP.size or bytes(reply[:4]) != b"PERR":
                raise _error("PER_ERR_FORMAT", f"{self._call_name}.{what}: "
                             f"{self.endpoint} sent a reply that is not "
                             "per's")
            _, _, _, got, status, mlen, _ = _REP.unpack_from(reply)
            if got != rid:
                continue  # a late reply to an earlier request
            if status == _BUSY and self.wait and \
                    time.monotonic() + pause < deadline:
                time.sleep(pause)  # nothing was done: the same request again
                pause = min(2 * pause, 0.05)
                self._sock.send(request, copy=False)
                continue
            if status != 0:
                msg = bytes(reply[_REP.size:_REP.size + mlen]).decode(
                    "utf-8", "replace")
                name = _per.status_name(status)
                e = _per.Error(f"{name}: {msg} ({self._call_name}.{what}, "
                               f"table {self.table_name!r} at "
                               f"{self.endpoint})")
                e.status, e.name = status, name
                raise e
            return reply[_REP.size:]

    @staticmethod
    def _hello(body: memoryview) -> t.Dict[str, t.Any]:
        vals = _TABLE.unpack_from(body)
        out: t.Dict[str, t.Any] = dict(zip(_TABLE_KEYS, vals[:-1]))
        out["layout"] = bytes(body[_TABLE.size:_TABLE.size + vals[-1]]).decode(
            "utf-8", "replace")
        return out

    # -- the ops -------------------------------------------------------------

    def _rows(self, items: Items, fields: t.Mapping[str, ArrayLike],
              call: str) -> t.Tuple[t.Any, int]:
        """The items as bytes to send and their count."""
        if self.dtype is not None:
            rec = _Records(self.dtype)._records(items, fields, call, batch=True)
            return rec, int(rec.shape[0])
        if fields or items is None:
            raise TypeError(f"{call}: a client without a dtype takes items "
                            "as an array, one row an item")
        a = np.ascontiguousarray(items)
        if a.ndim < 1:
            raise ValueError(f"{call}: items is an array with a leading "
                             "batch axis, one row an item")
        n = int(a.shape[0])
        if self.item_size is not None and n and a.nbytes != n * self.item_size:
            raise ValueError(f"{call}: a row of items is {a.nbytes // n} "
                             f"bytes; the table's items are {self.item_size}")
        return a, n

    def insert(self, items: Items = None, *,
               ends: t.Optional[ArrayLike] = None,
               td: t.Optional[ArrayLike] = None,
               **fields: ArrayLike) -> int:
        """Store a batch of items as one trajectory (INSERT); returns its
        trajectory id. items as ReplayBuffer.add_batch takes them (records
        of the dtype, or a dict of field -> array with a leading batch
        axis, or the fields as keywords), converted by its exact rule;
        without a dtype, an array whose rows are the items' bytes. ends:
        None, one END_* for the last item, or one per item. td: one TD
        error per item; each item's priority is then the one update would
        give it (per_buffer_add_td), else the largest written so far."""
        call = f"{self._call_name}.insert"
        rec, n = self._rows(items, fields, call)
        if n == 0:
            raise ValueError(f"{call}: no items (an insert holds 1 or more)")
        flags = 0
        parts: t.List[t.Any] = [None, rec]
        if ends is not None:
            ea = np.asarray(ends)
            if ea.dtype.kind not in "iub":
                raise TypeError(f"{call}: ends must be END_* integers, not "
                                f"{ea.dtype}")
            if ea.ndim == 0:
                ea = np.concatenate([np.full(n - 1, END_NONE, np.int64),
                                     ea.reshape(1)])
            if ea.shape != (n,):
                raise ValueError(f"{call}: {n} items but ends of shape {ea.shape}")
            if ea.min() < 0 or ea.max() > 255:
                raise _error("PER_ERR_ARG", f"{call}: an end is not an END_* value")
            parts.append(np.ascontiguousarray(ea, dtype=np.uint8))
            flags |= _ENDS
        if td is not None:
            tv = np.asarray(td)
            if tv.shape not in ((n,), ()) or (tv.shape == () and n != 1):
                raise ValueError(f"{call}: td has shape {tv.shape}; {n} items "
                                 f"take td of shape ({n},)")
            parts.append(_floats(tv, f"{call}: td", np.float32).astype("<f4"))
            flags |= _TD
        parts[0] = struct.pack("<II", n, flags)
        body = self._request(INSERT, parts, "insert")
        tid: int = struct.unpack_from("<Q", body)[0]
        return tid

    def sample(self, batch_size: int, *, unique: bool = False,
               beta: t.Optional[float] = None, window: int = 0,
               trajectories: bool = False, sequences: bool = False,
               items: bool = True) -> Batch:
        """Draw batch_size items (SAMPLE; per_buffer_sample): as
        ReplayBuffer.sample's options (unique, beta instead of the
        schedule, window newest items or trajectories, sequences of
        seq_len steps with their mask). items=False: ids and weights only
        (Batch.items None)."""
        call = f"{self._call_name}.sample"
        B = _count(batch_size, f"{call}: batch_size")
        w = _count(window, f"{call}: window")
        flags = 0
        b = 0.0
        if unique:
            flags |= _per.SAMPLE_UNIQUE
        if beta is not None:
            flags |= _per.SAMPLE_BETA
            b = _config.real(beta, f"{call}: beta")
        if trajectories:
            flags |= _per.SAMPLE_TRAJECTORIES
        if sequences:
            flags |= _per.SAMPLE_SEQUENCES
        want = 0 if items else _NO_ITEMS
        body = self._request(SAMPLE, [struct.pack("<IIdII", B, flags, b, w, want)],
                             "sample")
        nb, s, used = struct.unpack_from("<IId", body)
        at = 16
        ids = np.frombuffer(body, "<u8", nb, at).astype(np.uint64)
        at += 8 * nb
        weights = np.frombuffer(body, "<f4", nb, at).astype(np.float32)
        at += 4 * nb
        lead = (nb, s) if sequences else (nb,)
        steps = nb * s
        recs: t.Optional[Array] = None
        if items:
            size = self.item_size
            if size is None:  # what is left but the masks
                left = len(body) - at - (steps if sequences else 0)
                size = left // steps if steps else 0
            raw = np.frombuffer(body, np.uint8, steps * size, at)
            at += steps * size
            recs = (raw.view(self.dtype).reshape(lead) if self.dtype is not None
                    else raw.reshape(lead + (size,))).copy()
        mask: t.Optional[Array] = None
        if sequences:
            mask = np.frombuffer(body, np.uint8, steps, at).reshape(lead) != 0
        return Batch(recs, ids, weights, mask, float(used))

    def update(self, ids: ArrayLike, td: ArrayLike, *,
               sequences: bool = False) -> int:
        """New priorities from TD errors (UPDATE): ids from a sample
        (1-D) and one td each, or with sequences (ids of a sample with
        sequences=True) td of shape (len(ids), seq_len), each sequence's
        steps in order (per_buffer_update_seq). Returns how many ids were
        stale (their items overwritten since the draw; skipped)."""
        call = f"{self._call_name}.update"
        i = _vector(ids, f"{call}: ids")
        tv = np.asarray(td)
        n = i.shape[0]
        if sequences:
            # the table's seq_len when HELLO said (0: the server refuses)
            L = (self.table["seq_len"] or None) if self.table is not None else None
            ok = tv.ndim == 2 and tv.shape[0] == n and (L is None or tv.shape[1] == L)
            want = f"({n}, {L if L is not None else 'seq_len'})"
        else:
            ok = tv.shape == (n,)
            want = f"({n},)"
        if not ok:
            raise ValueError(f"{call}: td has shape {tv.shape}; {n} ids take "
                             f"td of shape {want}")
        iv = _indices(i, f"{call}: ids", 64).astype("<u8")
        fv = _floats(tv, f"{call}: td", np.float32).astype("<f4")
        flags = _SEQUENCES if sequences else 0
        body = self._request(UPDATE, [struct.pack("<II", n, flags), iv, fv],
                             "update")
        stale: int = struct.unpack_from("<I", body)[0]
        return stale

    def info(self) -> t.Dict[str, t.Any]:
        """The table's sizes and counters (INFO): capacity, item_size,
        size (items stored), seq_len, added (items), trajectories, step
        (sample calls: the beta schedule's), beta (the next scheduled),
        and inserts, samples, updates (requests applied since the server
        started) and refused (requests for it refused)."""
        body = self._request(INFO, [], "info")
        return dict(zip(_INFO_KEYS, _INFO.unpack_from(body)))

    def close(self) -> None:
        """Close the socket (requests in flight are dropped). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._sock is not None:
            self._sock.close(0)
            self._sock = None
        self._ctx.term()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        item = self.dtype if self.dtype is not None else (
            f"{self.item_size} bytes" if self.item_size is not None else "raw")
        return (f"{self._call_name}({self.endpoint!r}, table="
                f"{self.table_name!r}, item={item})")


class TcpClient(Client):
    """Seed 003's client: a Client of table `table` at tcp://host:port
    whose items are example_dtype(example) (the server's table made with
    Table(capacity, example=example), "the same example"). send() inserts
    what a TrajectoryAccumulator(example) built as one trajectory; the
    other keywords are Client's (timeout, wait, resend, curve)."""

    def __init__(self, host: str, port: int, example: t.Mapping[str, t.Any],
                 table: str = "replay", *, timeout: float = 10.0,
                 wait: bool = True, resend: bool = True,
                 curve: t.Optional[t.Sequence[t.Union[str, bytes]]] = None
                 ) -> None:
        self._steps, self._singles = _scales(example, "per.net.TcpClient")
        port = _count(port, "per.net.TcpClient: port", 16)
        h = f"[{host}]" if ":" in host and not host.startswith("[") else host
        super().__init__(f"tcp://{h}:{port}", table, example=example,
                         timeout=timeout, wait=wait, resend=resend,
                         curve=curve)

    def send(self, tree: t.Union[TrajectoryAccumulator, t.Mapping[str, t.Any]],
             *, n: t.Optional[int] = None, ends: t.Optional[ArrayLike] = None,
             td: t.Optional[ArrayLike] = None) -> int:
        """Insert one rollout as one trajectory, one item a step of the
        buffered timescale, each item also holding every single-item
        timescale's record (example_dtype); returns its trajectory id.

        tree: a TrajectoryAccumulator of the client's example, or what
        its build() returned (a dict of timescale -> tree; any dict of
        that shape with arrays of the leaves' dtypes, a buffered leaf
        having any leading length N).

        - An accumulator is built here (acc.build()): the steps sent are
          its built_counts of the buffered timescale, their episode ends
          its episode_ends (what end() set).
        - A built tree says neither (build() hands out the accumulator's
          whole arrays, past this rollout's steps too): all N records
          are sent, with no episode end, unless n (the first n records)
          and ends (None, one END_* for the last step, or one per step)
          say otherwise. client.send(acc.build()) after exactly N adds
          (seed 003's loop) sends that rollout.

        n and ends, when given, override the accumulator's too. td: one
        TD error per step sent (Client.insert). Values convert into the
        leaves' dtypes exactly or are refused (TypeError or ValueError,
        nothing sent)."""
        call = "per.net.TcpClient.send"
        b = self._steps
        acc_n: t.Optional[int] = None
        acc_ends: t.Optional[Array] = None
        if isinstance(tree, TrajectoryAccumulator):
            acc = tree
            theirs = acc.timescales
            ours = {sc.name: sc.dtype for sc in [b] + self._singles}
            if ({k: v["dtype"] for k, v in theirs.items()} != ours or
                    theirs[b.name]["kind"] != "buffered"):
                raise ValueError(f"{call}: the accumulator's timescales "
                                 f"{ {k: str(v['dtype']) for k, v in theirs.items()} } "
                                 f"are not the client's example's")
            built = acc.build()
            acc_n = acc.built_counts[b.name]
            acc_ends = np.array(acc.episode_ends(b.name)[:acc_n])
        elif isinstance(tree, t.Mapping):
            built = dict(tree)
        else:
            raise TypeError(f"{call}: send takes a TrajectoryAccumulator or "
                            f"the dict its build() returns, not "
                            f"{type(tree).__name__}")
        names = [b.name] + [s.name for s in self._singles]
        if set(built) != set(names):
            raise ValueError(f"{call}: the tree's timescales are "
                             f"{sorted(map(str, built))}; the example's "
                             f"{sorted(names)}")
        leaves = [np.asarray(v) for v in b.flatten(built[b.name], call)]
        lengths = {a.shape[0] if a.ndim else None for a in leaves}
        for label, a, shape in zip(b.labels, leaves, b.shapes):
            if a.ndim == 0 or a.shape[1:] != shape:
                raise ValueError(f"{call}: timescale {b.name!r}, leaf "
                                 f"{label!r} has shape {a.shape}; it takes "
                                 f"(N,) + {shape}")
        if len(lengths) != 1:
            raise ValueError(f"{call}: the leaves of timescale {b.name!r} "
                             f"differ in length: {sorted(map(str, lengths))}")
        N = int(leaves[0].shape[0])
        if n is not None:
            count = _count(n, f"{call}: n")
        else:
            count = acc_n if acc_n is not None else N
        if not 1 <= count <= N:
            raise ValueError(f"{call}: {count} steps to send of {N} "
                             f"(a send holds 1 or more)")
        assert self.dtype is not None
        rec = np.zeros(count, self.dtype)
        steps = rec[b.name]
        for i, (label, a) in enumerate(zip(b.labels, leaves)):
            steps[label] = _cast(a[:count], b.dtypes[i],
                                 f"{call}: timescale {b.name!r}, leaf {label!r}")
        for sc in self._singles:
            vals = sc.flatten(built[sc.name], call)
            part = rec[sc.name]
            for i, (label, v) in enumerate(zip(sc.labels, vals)):
                part[label] = sc.value(i, v, call)
        if ends is None and acc_ends is not None:
            ends = np.zeros(count, np.uint8)
            k = min(count, acc_ends.shape[0])
            ends[:k] = acc_ends[:k]
        return self.insert(rec, ends=ends, td=td)
