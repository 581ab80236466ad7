"""per.mpi: one prioritized replay buffer over the ranks of an MPI
communicator (per_mpi.h), from Python with mpi4py.

Every rank owns a shard, a per.ReplayBuffer it adds to with no
communication; sample, update, save, load, global_size and close are
collective (every rank of the communicator calls them, in the same
order) and draw from all the shards together as one buffer holding
every item would, bit for bit the batches of the C library's per_mpi.

    from mpi4py import MPI
    import per.mpi
    buf = per.mpi.ReplayBuffer(MPI.COMM_WORLD, 1 << 16,
                               {"obs": (np.float32, 4), "action": np.int32})
    buf.add(obs=o, action=a)                  # local, this rank's shard
    batch = buf.sample(256, root=0)           # collective; None off root
    buf.update(batch["ids"], td) if batch is not None else buf.update([], [])

Ids are records of ID (the shard's id and the owning rank). A collective
fails on every rank or on none: a rank whose arguments are refused here
raises its TypeError or ValueError, and the other ranks, which took part
in the same call, raise per.Error; a status from C is the same on every
rank. The shard itself must not be sampled, updated, cleared or loaded
with per.ReplayBuffer's own calls (they are refused here). Adds may come
from any thread; the collectives of one buffer from one thread per rank
(MPI matches them in call order).

per._mpi, the extension under this module, is built when an MPI is found
at build time (Open MPI's or MPICH's development files); mpi4py must use
that same MPI library (pip install --no-binary mpi4py mpi4py builds it
against the MPI on the PATH).
"""

import os as _os
import typing as _t

import numpy as _np

from . import Batch, ItemSpec
from . import ReplayBuffer as _ReplayBuffer
from . import _per
from .config import ArrayLike as _ArrayLike
from .config import Items as _ItemsIn
from .config import DType as _DType
from .config import PathArg as _PathArg
from .config import ReplayKeywords as _ReplayKeywords
from .config import count as _count
from .config import error as _error
from .config import item_dtype as _item_dtype
from .config import real as _real

if _t.TYPE_CHECKING:
    from typing_extensions import Unpack as _Unpack

try:
    from . import _mpi
except ImportError as _e:  # pragma: no cover - depends on the build
    raise ImportError(
        "per.mpi: this per was built without an MPI (per._mpi is missing "
        "or cannot load its MPI library: " + str(_e) + "); install Open MPI "
        "or MPICH with its development files and reinstall per from source"
    ) from _e

__all__ = ["ReplayBuffer", "Feed", "ALL", "ID"]

#: sample(root=ALL): every rank receives the batch.
ALL: int = _mpi.ALL

#: A global id (per_mpi_id): the shard's id and the rank that owns it.
ID: _DType = _np.dtype([("id", _np.uint64), ("rank", _np.uint64)])
assert ID.itemsize == _mpi.ID_BYTES


class _Comm(_t.Protocol):
    """What per.mpi needs of a communicator (mpi4py's MPI.Comm)."""

    def py2f(self) -> int: ...

    def allgather(self, sendobj: object) -> _t.List[object]: ...


def _raise(s: int, msg: str, call: str) -> None:
    if s:
        name = _per.status_name(s)
        raise _error(name, f"{msg} ({call})")


class ReplayBuffer(_ReplayBuffer):
    """A per_mpi buffer: this rank's shard (a per.ReplayBuffer of
    `capacity` items) and the collectives over `comm` (an mpi4py
    communicator, duplicated: per's messages never meet the caller's).

    Collective. The arguments are per.ReplayBuffer's; every rank must
    give the same ones except capacity and max_unique (per.Error
    PER_ERR_ARG otherwise, on every rank), and the same item dtype
    (ValueError on every rank). Not supported: seq_len, live_max. len()
    and the inherited state (storage, priorities, added) are this rank's
    shard; global_size() counts every rank's items."""

    def __init__(self, comm: _Comm, capacity: int, item: ItemSpec, *,
                 align: bool = False,
                 **config: "_Unpack[_ReplayKeywords]") -> None:
        call = "per.mpi.ReplayBuffer"
        handle = comm.py2f()
        err: _t.Optional[BaseException] = None
        owner: _t.Optional[ReplayBuffer] = self
        try:
            super().__init__(capacity, item, align=align, **config)
        except Exception as e:  # raised after the collective, see below
            err, owner = e, None
        layouts = comm.allgather(None if owner is None else self.layout)
        if err is None and len(set(layouts)) > 1:
            ranks = [r for r, x in enumerate(layouts) if x != layouts[0]]
            err = ValueError(f"{call}: the ranks' item dtypes differ (rank 0's "
                             f"is not that of ranks {ranks})")
            owner = None
        s, msg, shards = _mpi.open(handle, None if err else owner)
        if err is not None:
            raise err
        _raise(s, msg, call)
        assert shards is not None  # status 0
        self._mpi: "_mpi._Shards" = shards
        self.comm = comm

    @property
    def rank(self) -> int:
        return int(self._mpi.rank)

    @property
    def world(self) -> int:
        return int(self._mpi.world)

    def __repr__(self) -> str:
        return (f"per.mpi.ReplayBuffer(rank {self.rank} of {self.world}, "
                f"capacity={self.capacity}, size={self.size}, "
                f"item={self.dtype}, step {self.step})")

    # -- collectives ---------------------------------------------------

    def sample(self, batch_size: int, *, root: int = 0,  # type: ignore[override]
               beta: _t.Optional[float] = None,
               out: _t.Optional[Batch] = None) -> _t.Optional[Batch]:
        """Collective: batch_size items drawn from all the shards as one
        buffer of all their items would (per_mpi_sample: stratified, with
        replacement, the beta schedule or beta). The batch goes to rank
        root, or to every rank with root=ALL: a Batch of the item's
        fields, "ids" (ID records) and "weights" (float32, max 1); the
        other ranks get None. out: a Batch an earlier call returned on
        this rank for the same batch_size, filled in place."""
        call = "per.mpi.ReplayBuffer.sample"
        err: _t.Optional[BaseException] = None
        B, r, flags, b = 0, 0, 0, 0.0
        rec = ids = w = None
        try:
            B = _count(batch_size, f"{call}: batch_size")
            if isinstance(root, bool) or not isinstance(root, (int, _np.integer)):
                raise TypeError(f"{call}: root must be a rank or per.mpi.ALL, "
                                f"not {type(root).__name__}")
            r = int(root)
            if r != ALL and not 0 <= r < self.world:
                raise ValueError(f"{call}: root {r} is not a rank of "
                                 f"{self.world} or per.mpi.ALL")
            if beta is not None:
                flags, b = _per.SAMPLE_BETA, _real(beta, f"{call}: beta")
            if r in (ALL, self.rank):
                if out is None:
                    out = Batch(_np.empty(B, self.dtype))
                    out["ids"] = _np.empty(B, ID)
                    out["weights"] = _np.empty(B, _np.float32)
                elif not (isinstance(out, Batch) and out.records.dtype == self.dtype
                          and out.records.shape == (B,) and "ids" in out
                          and out["ids"].dtype == ID and out["ids"].shape == (B,)
                          and out["weights"].shape == (B,)):
                    raise ValueError(f"{call}: out is not a Batch this call "
                                     f"returned for batch_size {B}")
                rec, ids, w = out.records, out["ids"], out["weights"]
        except Exception as e:
            err = e
        s, msg, _ = self._mpi.sample(B, r, flags, b, rec, ids, w, err is not None)
        if err is not None:
            raise err
        _raise(s, msg, call)
        return out if r in (ALL, self.rank) else None

    def update(self, ids: _ArrayLike, td: _ArrayLike) -> int:
        """Collective: every rank passes its own ids (ID records from a
        sample, or an (n, 2) integer array of id and rank; n may be 0)
        and td of shape (n,); each goes to the rank that owns it and sets
        the priority (|td| + eps)^alpha there (per_mpi_update). Returns
        how many ids were stale, over all ranks (the same on every
        rank)."""
        call = "per.mpi.ReplayBuffer.update"
        err: _t.Optional[BaseException] = None
        i = _np.empty(0, ID)
        t = _np.empty(0, _np.float32)
        try:
            a = _np.asarray(ids)
            if a.dtype.names is not None:
                if set(a.dtype.names) != {"id", "rank"} or a.ndim != 1:
                    raise TypeError(f"{call}: ids must be a 1-D array of "
                                    f"per.mpi.ID records, got {a.dtype}")
                i = _np.empty(a.shape[0], ID)
                i["id"], i["rank"] = a["id"], a["rank"]
            else:
                if a.size == 0:
                    a = _np.empty((0, 2), _np.uint64)
                if a.ndim != 2 or a.shape[1] != 2 or a.dtype.kind not in "iu":
                    raise TypeError(f"{call}: ids must be per.mpi.ID records or "
                                    f"an (n, 2) integer array, got {a.dtype} "
                                    f"of shape {a.shape}")
                if a.size and a.min() < 0:
                    raise ValueError(f"{call}: ids: a negative id or rank")
                i = _np.empty(a.shape[0], ID)
                i["id"], i["rank"] = a[:, 0], a[:, 1]
            tv = _np.asarray(td)
            if tv.shape != (i.shape[0],):
                raise ValueError(f"{call}: td has shape {tv.shape}; "
                                 f"{i.shape[0]} ids take ({i.shape[0]},)")
            if tv.size and tv.dtype.kind not in "iuf":
                raise TypeError(f"{call}: td must be real numbers, not {tv.dtype}")
            t = _np.ascontiguousarray(tv, dtype=_np.float32)
        except Exception as e:
            err = e
        s, msg, stale = self._mpi.update(i, t, err is not None)
        if err is not None:
            raise err
        _raise(s, msg, call)
        return int(stale)

    def _path_call(self, path: "_t.Union[_PathArg, bytes]", load: bool) -> None:
        call = "per.mpi.ReplayBuffer." + ("load" if load else "save")
        p: _t.Optional[str] = None
        err: _t.Optional[BaseException] = None
        try:
            fp = _os.fspath(path)
            p = _os.fsdecode(fp) if isinstance(fp, bytes) else fp
        except Exception as e:
            err = e
        s, msg, busy = (self._mpi.load if load else self._mpi.save)(p)
        if err is not None:
            raise err
        if busy:
            raise BufferError(f"{call}: views of storage are alive on this "
                              "rank; a load moves the items")
        _raise(s, msg, call)

    def save(self, path: _PathArg) -> None:
        """Collective: checkpoints every shard under path, the same on
        every rank (per_mpi_save: one file per rank and a manifest at
        path written last, so a crash leaves the previous checkpoint or
        this one, whole)."""
        self._path_call(path, False)

    def load(self, path: _PathArg) -> None:
        """Collective: replaces every shard with the checkpoint at path,
        saved at any world size (per_mpi_load: at the same world size the
        run goes on as the saved one would have; at another, the items
        are re-sharded and ids drawn before must not be updated after).
        BufferError on a rank holding views of storage (the others raise
        per.Error)."""
        self._path_call(path, True)

    def global_size(self) -> int:
        """Collective: the items stored on all ranks together."""
        return int(self._mpi.size())

    def close(self) -> None:
        """Collective: frees the communicator this buffer duplicated; the
        shard stays readable, the collectives raise RuntimeError. A buffer
        dropped without close() frees it on its own (MPI_Comm_free, which
        Open MPI and MPICH complete without the other ranks)."""
        self._mpi.close()

    # -- the shard's own calls that would break the shared state --------

    def _refuse(self, what: str) -> _t.NoReturn:
        raise TypeError(f"per.mpi.ReplayBuffer: {what} is not supported "
                        "(the shard's rng, step and priorities are shared "
                        "by the ranks)")

    def update_sequences(self, ids: _ArrayLike, td: _ArrayLike) -> int:
        self._refuse("update_sequences")

    def clear(self) -> None:
        self._refuse("clear")

    def load_shard(self, path: _PathArg, rank: int, world: int) -> None:
        self._refuse("load_shard (load takes any world size)")

    def save_async(self, path: _PathArg) -> "_t.NoReturn":
        self._refuse("save_async")

    @classmethod
    def from_file(cls, path: _PathArg,
                  item: _t.Optional[ItemSpec] = None) -> "_t.NoReturn":
        raise TypeError("per.mpi.ReplayBuffer: from_file is not supported "
                        "(make the buffer on every rank, then load)")

    def __reduce__(self) -> "_t.NoReturn":
        self._refuse("pickling or copying")


class Feed:
    """per_mpi_feed: actors hand batches of items to replay ranks without
    waiting for them (Ape-X's ingestion).

    Collective over comm (actors and replay ranks alike): dest is the
    rank this rank sends to, or None for a rank that only receives (or
    neither); every rank learns which ranks send to it. item is the
    items' dtype (the receivers' ReplayBuffer's), max_items the largest
    batch a send takes, slots the sender's messages in flight at most.

    send() copies a batch (records or fields as ReplayBuffer.add_batch
    takes them, with ends and td: the actor's TD errors, which become the
    items' priorities) and returns; only when every slot is still in
    flight does it wait (counted in state["waits"]; nothing is dropped).
    A receiver calls drain(buffer) at its own pace: the batches that
    arrived go into buffer (per_buffer_add_td), in arrival order or, with
    ordered=True, one from each sender in turn, which fixes the order of a
    run. close() ends a sender (its end marker follows its last batch);
    state["done"] is True on a receiver once every sender closed and all
    was drained. free() is collective; call it on every rank at the end.
    """

    def __init__(self, comm: _Comm, item: ItemSpec, *, dest: _t.Optional[int] = None,
                 max_items: int = 256, slots: int = 4) -> None:
        call = "per.mpi.Feed"
        err: _t.Optional[BaseException] = None
        d, mi, sl = _mpi.FEED_NONE, 1, 1
        self.dtype: _DType = _np.dtype(_np.uint8)
        try:
            self.dtype = _item_dtype(item)
            if dest is not None:
                if isinstance(dest, bool) or not isinstance(dest, (int, _np.integer)):
                    raise TypeError(f"{call}: dest must be a rank or None, not "
                                    f"{type(dest).__name__}")
                d = int(dest)
            mi = _count(max_items, f"{call}: max_items")
            sl = _count(slots, f"{call}: slots")
        except Exception as e:
            err = e
        s, msg, feed = _mpi.feed_open(comm.py2f(), d, self.dtype.itemsize, mi, sl,
                                      err is not None)
        if err is not None:
            raise err
        _raise(s, msg, call)
        assert feed is not None  # status 0
        self._feed: "_mpi._Feed" = feed
        self.max_items = mi

    # the records of a batch, by ReplayBuffer.add_batch's rules
    _records = _ReplayBuffer._records
    _from_fields = _ReplayBuffer._from_fields

    def send(self, items: _ItemsIn = None, *,
             ends: _t.Optional[_ArrayLike] = None,
             td: _t.Optional[_ArrayLike] = None, **fields: _ArrayLike) -> None:
        """Hand a batch (1 to max_items records, with their ends and TD
        errors, each optional) to this rank's dest."""
        call = "per.mpi.Feed.send"
        rec = self._records(items, fields, call, batch=True)
        n = rec.shape[0]
        if not 1 <= n <= self.max_items:
            raise ValueError(f"{call}: {n} items; a send takes 1 to {self.max_items}")
        e = t = None
        if ends is not None:
            ea = _np.asarray(ends)
            if ea.shape != (n,) or ea.dtype.kind not in "iub":
                raise ValueError(f"{call}: ends must be {n} END_* integers")
            e = _np.ascontiguousarray(ea, dtype=_np.uint8)
        if td is not None:
            tv = _np.asarray(td)
            if tv.shape != (n,) or tv.dtype.kind not in "iuf":
                raise ValueError(f"{call}: td must be {n} real numbers")
            t = _np.ascontiguousarray(tv, dtype=_np.float32)
        s, msg, _ = self._feed.send(rec, n, e, t)
        _raise(s, msg, call)

    def drain(self, buffer: _ReplayBuffer, max_msgs: int = 1 << 30, *,
              ordered: bool = False) -> int:
        """Put the batches that arrived into buffer (a ReplayBuffer of this
        feed's dtype, or a per.mpi.ReplayBuffer's shard); returns the items
        stored. Without ordered it takes what is there and never waits;
        with ordered, the next batch of each sender in turn, waiting for
        it, until max_msgs batches or every sender closed. A batch the
        buffer refuses (a NaN td) is counted in state["rejected"]."""
        call = "per.mpi.Feed.drain"
        if not isinstance(buffer, _ReplayBuffer) or buffer.dtype != self.dtype:
            raise TypeError(f"{call}: buffer must be a ReplayBuffer of {self.dtype}")
        if buffer.nodes != _np.float64:  # per._mpi embeds per.h, double nodes
            raise TypeError(f"{call}: buffer has {buffer.nodes} nodes; per.mpi "
                            "feeds buffers of float64 nodes")
        s, msg, n = self._feed.drain(buffer, _count(max_msgs, f"{call}: max_msgs"),
                                     bool(ordered))
        _raise(s, msg, call)
        return int(n)

    def close(self) -> None:
        """A sender: waits for its batches in flight, then sends its end
        marker."""
        s, msg, _ = self._feed.close()
        _raise(s, msg, "per.mpi.Feed.close")

    @property
    def state(self) -> _t.Dict[str, _t.Any]:
        """dest, senders (how many send here), msgs and items (sent, or
        stored), waits, rejected, error (the last rejection's), done."""
        st = dict(self._feed.state)
        st["done"] = bool(st["done"])
        return st

    def free(self) -> None:
        """Collective: a sender not yet closed closes, a receiver takes and
        drops every sender's batches up to its end marker (drain until
        done first to keep them), and everything is freed."""
        self._feed.free()
