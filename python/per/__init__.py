"""per: prioritized experience replay from Python, over per.h.

The same sum tree, samplers, replay buffer and n-step adder as the C
library, with NumPy arrays in and out: double nodes (PER_REAL double), or
float nodes with dtype=numpy.float32 (SumTree, CategoricalSampler) or
nodes=numpy.float32 (ReplayBuffer, FrameBuffer), as a C build with
PER_REAL float. For the same config,
seed and calls, every id, item and weight is the one the C library gives,
bit for bit, and checkpoints move between C and Python.

    import numpy as np, per
    buf = per.ReplayBuffer(100_000, {"obs": (np.float32, 4),
                                     "action": np.int32,
                                     "reward": np.float32}, seed=1)
    buf.add(obs=np.zeros(4), action=1, reward=0.5)
    batch = buf.sample(32)        # fields, "ids" and "weights"
    buf.update(batch["ids"], td_errors)

A failed call raises per.Error (status, name) and leaves the structure as
it was; arguments of the wrong type, range or shape raise TypeError,
OverflowError or ValueError before anything changes, with a message that
names the call and the argument or field ("ReplayBuffer.sample: batch_size
must be in [0, 2^32), got -1"). Values go into an item's fields only
where the conversion is exact (ReplayBuffer.add states the rule).
"""

# Everything imported here has a leading underscore, so that dir(per)
# and `from per import *` show the API (__all__) and nothing else (and
# per.config, the config and argument checks this module shares with
# per.cuda and per.mpi).
import concurrent.futures as _futures
import dataclasses as _dataclasses
import hashlib as _hashlib
import importlib as _importlib
import inspect as _inspect
import json as _json
import math as _math
import os as _os
import secrets as _secrets
import shutil as _shutil
import struct as _struct
import sys as _sys
import tempfile as _tempfile
import threading as _threading
import typing as _t
import weakref as _weakref

import numpy as _np

from . import _per
from . import _per32
from . import config as _config
from ._per import Error, Rng, crc32c, status_name
from .config import Array as _Array
from .config import ArrayLike as _ArrayLike
from .config import DType as _DType
from .config import DTypeLike as _DTypeLike
from .config import Items as _ItemsIn
from .config import ItemSpec
from .config import PathArg as _PathArg
from .config import ShapeLike as _ShapeLike
from .config import count as _count
from .config import F32 as _F32
from .config import F64 as _F64
from .config import NodesLike as _NodesLike
from .config import error as _error
from .config import item_dtype as _item_dtype
from .config import nodes_of as _nodes_of
from .config import real as _real
from .config import real32 as _real32
from .config import shape as _shape

if _t.TYPE_CHECKING:
    from typing_extensions import Unpack as _Unpack

__version__: str = _per.PER_VERSION_STRING

END_NONE: int = _per.END_NONE
END_TERMINATED: int = _per.END_TERMINATED
END_TRUNCATED: int = _per.END_TRUNCATED

__all__ = [
    "Error",
    "Rng",
    "SumTree",
    "UniformSampler",
    "CategoricalSampler",
    "ReplayBuffer",
    "Batch",
    "NStep",
    "FrameBuffer",
    "Trajectory",
    "TrajectoryAccumulator",
    "TrajectoryStore",
    "TrajectoryReplayBuffer",
    "save_nstep",
    "load_nstep",
    "config_default",
    "status_name",
    "crc32c",
    "END_NONE",
    "END_TERMINATED",
    "END_TRUNCATED",
    "ItemSpec",
    "__version__",
]


def _indices(a: object, what: str, bits: int) -> _Array:
    """a as a C-contiguous uint32/uint64 array. Integers outside the
    type's range raise PER_ERR_INDEX (they would wrap in a cast)."""
    dt = _np.uint32 if bits == 32 else _np.uint64
    arr = _np.asarray(a)
    if arr.dtype == dt:
        return _np.ascontiguousarray(arr).reshape(-1)
    if arr.dtype.kind not in "iub" and arr.size > 0:
        raise TypeError(f"{what} must hold integers, not {arr.dtype}")
    if arr.size and (arr.min() < 0 or int(arr.max()) > _np.iinfo(dt).max):
        raise _error("PER_ERR_INDEX", f"{what} holds values outside "
                     f"[0, 2^{bits})")
    return _np.ascontiguousarray(arr, dtype=dt).reshape(-1)


def _floats(a: object, what: str, dt: "type[_np.floating[_t.Any]]") -> _Array:
    """a as a flat contiguous array of dt; a finite value that dt cannot
    hold (1e39 into float32) is a ValueError naming it, not an inf."""
    arr = _np.asarray(a)
    if arr.dtype.kind not in "fiub" and arr.size > 0:
        raise TypeError(f"{what} must hold numbers, not {arr.dtype}")
    with _np.errstate(over="ignore"):
        out = _np.ascontiguousarray(arr, dtype=dt).reshape(-1)
    if arr.dtype.kind == "f" and out.size and arr.dtype.itemsize > out.dtype.itemsize:
        bad = _np.isinf(out) & _np.isfinite(arr.reshape(-1))
        if bad.any():
            j = int(_np.argmax(bad))
            raise ValueError(f"{what}[{j}] ({dt.__name__}): "
                             f"{float(arr.reshape(-1)[j])!r} overflows "
                             f"{dt.__name__}")
    return out


def _vector(a: object, what: str) -> _Array:
    """a as an array that must be 1-D (one entry per index)."""
    arr = _np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {arr.shape}")
    return arr


# ---------------------------------------------------------------------------
# Values into typed fields: exact conversions only
# ---------------------------------------------------------------------------


def _cast(v: _Array, to: _DType, what: str) -> _Array:
    """v converted to the scalar dtype `to`, when every value converts
    exactly. The rule (ReplayBuffer.add states it):

    - a bool field takes 0 and 1 (False, True) of any real type;
    - an integer field takes bools, integers in its range, and floats
      that are whole numbers in its range (not NaN, not inf);
    - a float or complex field takes bools and the integers it holds
      exactly; floats are rounded to the nearest, and refused where a
      finite value would become inf; NaN and inf stay what they are; a
      complex value never goes into a real field;
    - bytes and str fields take bytes or str that convert back to the
      same text (not cut short, ASCII into bytes); datetime and timedelta
      fields, values of their own kind that convert back to the same
      time; a nested record field, its own dtype only.

    Raises TypeError when v's kind does not go into `to` at all, and
    ValueError naming the first value that would change."""
    src = v.dtype
    if src == to:
        return v
    k, t = src.kind, to.kind
    if k == "O":
        return _cast_objects(v, to, what)
    num = "biufc"
    if ((t in num) != (k in num) or (k == "c" and t != "c")
            or (t in "SU" and k not in "SU") or (t in "mM" and k != t)
            or t not in num + "SUmM"):
        raise TypeError(f"{what} ({_dname(to)}): {_dname(src)} values do "
                        f"not convert to {_dname(to)}")
    with _np.errstate(all="ignore"):
        try:
            out = v.astype(to)
        except (ValueError, UnicodeError) as e:
            raise ValueError(f"{what} ({_dname(to)}): {e}") from None
        if t == "b":
            if k != "b":
                _refuse(v, (v != 0) & (v != 1), what, to, "is neither 0 nor 1")
        elif t in "iu":
            _check_int_range(v, to, what)
        elif t in "fc" and k in "iu":
            _check_exact(v, out, to, what)
        elif (t in "fc" and k in "fc" and to.itemsize // (1 + (t == "c"))
              < src.itemsize // (1 + (k == "c"))):  # narrower parts
            bad = _np.isfinite(v) & ~_np.isfinite(out)
            if bad.any():  # the message only then: it costs microseconds
                _refuse(v, bad, what, to, f"overflows {_dname(to)} (largest "
                        f"finite {_np.finfo(to).max!s})")
        elif t in "SUmM":
            back = out.astype(src)
            bad = back != v
            if t in "mM":
                bad &= ~(_np.isnat(v) & _np.isnat(back))
            _refuse(v, bad, what, to, f"does not convert to {_dname(to)} "
                    "unchanged")
    return out


def _dname(dt: _DType) -> str:
    """A dtype as messages name it: float32, S4, datetime64[s]."""
    return dt.name if dt.kind in "biufc" else dt.str.lstrip("|<>=")


def _refuse(v: _Array, bad: _Array, what: str, to: _DType,
            reason: str) -> None:
    """ValueError for the first value of v where bad holds, if any."""
    if bad.any():
        x = v[bad].flat[0]
        shown = str(x) if v.dtype.kind in "mM" else repr(x.item())
        raise ValueError(f"{what} ({_dname(to)}): {shown} {reason}")


def _check_int_range(v: _Array, to: _DType, what: str) -> None:
    """v (bool, integer or float) into the integer dtype `to`: whole
    numbers in its range only. Compared as Python ints and floats, which
    compare exactly, where NumPy may compare through float64."""
    info = _np.iinfo(to)
    lo, hi = int(info.min), int(info.max)
    k = v.dtype.kind
    if k == "b" or v.size == 0:
        return
    if k in "iu":
        if lo <= int(v.min()) and int(v.max()) <= hi:
            return
        x = next(x for x in v.ravel().tolist() if not lo <= x <= hi)
        raise ValueError(f"{what} ({_dname(to)}): {x!r} is outside "
                         f"[{lo}, {hi}]")
    whole = _np.isfinite(v) & (_np.trunc(v) == v)
    _refuse(v, ~whole, what, to, "is not a whole number")
    # float(x) and ints compare exactly in Python
    if lo <= float(v.min()) and float(v.max()) <= hi:
        return
    x = next(x for x in v.ravel().tolist() if not lo <= x <= hi)
    raise ValueError(f"{what} ({_dname(to)}): {x!r} is outside [{lo}, {hi}]")


def _check_exact(v: _Array, out: _Array, to: _DType, what: str) -> None:
    """Integers v into the float or complex dtype `to` (out, converted):
    each must come out as the same number. Integers of magnitude up to
    2^(significand bits) always do; the larger ones are compared one by
    one as Python numbers."""
    lim = 1 << (_np.finfo(to).nmant + 1)
    if lim >= 1 << 64:      # holds every int64 and uint64 exactly
        return
    big = v > lim
    if v.dtype.kind == "i":
        big |= v < -lim
    if not big.any():
        return
    for x, y in zip(v[big].tolist(), out[big].tolist()):
        f = y.real if isinstance(y, complex) else y
        if not (_math.isfinite(f) and int(f) == x):
            raise ValueError(f"{what} ({_dname(to)}): the integer {x!r} "
                             f"has no exact {_dname(to)} value")


def _cast_objects(v: _Array, to: _DType, what: str) -> _Array:
    """An object array (NumPy makes one of Python ints past 64 bits) into
    `to`, by the rule of _cast: Python ints only, checked one by one."""
    xs = v.ravel().tolist()
    odd = next((x for x in xs if not isinstance(x, (int, _np.integer))), 0)
    if not isinstance(odd, (int, _np.integer)) or to.kind not in "biufc":
        raise TypeError(f"{what} ({_dname(to)}): Python "
                        f"{type(odd).__name__} objects do not convert to "
                        f"{_dname(to)}")
    xs = [int(x) for x in xs]
    for x in xs:
        if to.kind == "b":
            ok, reason = x in (0, 1), "is neither 0 nor 1"
        elif to.kind in "iu":
            lo, hi = int(_np.iinfo(to).min), int(_np.iinfo(to).max)
            ok, reason = lo <= x <= hi, f"is outside [{lo}, {hi}]"
        else:
            reason = f"has no exact {_dname(to)} value"
            try:
                f = float(x)
            except OverflowError:
                ok = False
            else:
                with _np.errstate(all="ignore"):
                    y = to.type(f)
                f = float(y.real)
                ok = _math.isfinite(f) and int(f) == x
        if not ok:
            raise ValueError(f"{what} ({_dname(to)}): {x!r} {reason}")
    return _np.array(xs, dtype=to).reshape(v.shape)


def config_default(capacity: int, item_size: int) -> _t.Dict[str, _t.Any]:
    """per_config_default(capacity, item_size) as a dict."""
    return _per.config_default(capacity, item_size)


# ---------------------------------------------------------------------------
# Node types: double (per._per) and float (per._per32)
# ---------------------------------------------------------------------------

class _Twin(type):
    """The metaclass of the classes with float nodes beside double ones
    (SumTree, CategoricalSampler, ReplayBuffer, FrameBuffer): the public
    class is the double one and makes its float twin (a class over
    per._per32's type, the same methods) when asked for float32; so that
    code checking isinstance(x, per.ReplayBuffer) takes both, the public
    class counts its twin's instances as its own."""

    def __instancecheck__(cls, obj: object) -> bool:
        twin = cls.__dict__.get("_twin")
        return (type.__instancecheck__(cls, obj) or
                (twin is not None and type.__instancecheck__(twin, obj)))

    def __subclasscheck__(cls, sub: type) -> bool:
        twin = cls.__dict__.get("_twin")
        return (type.__subclasscheck__(cls, sub) or
                (twin is not None and type.__subclasscheck__(twin, sub)))


def _twin_of(cls: type, public: type, what: str) -> _t.Any:
    """public's float twin, for a construction of cls; a subclass of the
    public class has double nodes only (its base is per._per's type)."""
    if cls is not public:
        raise TypeError(f"{cls.__name__}: {what}float32 makes a per."
                        f"{public.__name__} of float nodes; a subclass of "
                        f"per.{public.__name__} has float64 nodes")
    return public.__dict__["_twin"]


def _twin_for(cls: type, public: type, kw: str, x: _NodesLike) -> _t.Any:
    """public's float twin when x (its argument kw) asks for float32
    nodes, else None (cls's own, double, construction goes on)."""
    if _nodes_of(x, f"{public.__name__}: {kw}") != _F32:
        return None
    return _twin_of(cls, public, kw + "=")


def _own_nodes(have: _DType, x: _NodesLike, what: str) -> None:
    """A methods class's __init__: x (its dtype or nodes argument), when
    given, names the node type of the class being made, `have` (only a
    twin called directly can be given the other)."""
    if x is not None and _nodes_of(x, what) != have:
        raise TypeError(f"{what} {x!r} for an object of {have} nodes")


def _make_twin(public: type, methods: type, base: type, attr: str) -> type:
    """The float twin of public: methods (public's methods class) over
    per._per32's base, its attr ("dtype" or "nodes") float32, named
    _<Public>32 (pickle finds it in per)."""
    name = "_" + public.__name__ + "32"
    twin = type(name, (methods, base), {"__module__": __name__,
                                        "__qualname__": name,
                                        "__doc__": public.__doc__,
                                        attr: _F32})
    setattr(public, "_twin", twin)
    return twin


def _new_signature(cls: type) -> None:
    """help() and inspect.signature of cls show its __init__'s parameters
    (not the *args, **kwargs of the __new__ that picks the node type)."""
    setattr(cls.__dict__["__new__"].__func__, "__signature__",
            _inspect.signature(getattr(cls, "__init__")))


# ---------------------------------------------------------------------------
# Sum tree and samplers
# ---------------------------------------------------------------------------

if _t.TYPE_CHECKING:
    _TreeBase = _per._SumTree
    _CatBase = _per._CategoricalSampler
    _BufBase = _per._Buffer
    _FramesBase = _per._Frames
else:
    _TreeBase = _CatBase = _BufBase = _FramesBase = object


class _SumTreeMethods(_TreeBase):
    """SumTree's methods, the same for both node types."""

    dtype: _DType

    def __init__(self, capacity: int, dtype: _NodesLike = None) -> None:
        _own_nodes(self.dtype, dtype, "SumTree: dtype")
        super().__init__(capacity)

    def __len__(self) -> int:
        return self.capacity

    def set_batch(self, idx: _ArrayLike, val: _ArrayLike) -> None:
        """Leaves idx[j] = val[j]; validated first, the last duplicate
        wins (per_tree_set_batch). idx and val are 1-D, of one length."""
        i = _vector(idx, "SumTree.set_batch: idx")
        v = _vector(val, "SumTree.set_batch: val")
        if v.shape != i.shape:
            raise ValueError(f"SumTree.set_batch: {i.shape[0]} idx but "
                             f"{v.shape[0]} val")
        self._set_batch(_indices(i, "SumTree.set_batch: idx", 32),
                        _floats(v, "SumTree.set_batch: val", self.dtype.type))

    def set_range(self, first: int, val: _ArrayLike) -> None:
        """Leaves first + j = val[j] (per_tree_set_range); val is 1-D."""
        v = _vector(val, "SumTree.set_range: val")
        self._set_range(first, _floats(v, "SumTree.set_range: val", self.dtype.type))

    def build(self, val: _ArrayLike) -> None:
        """Leaf i = val[i], the rest 0, every node recomputed
        (per_tree_build); val is 1-D."""
        v = _vector(val, "SumTree.build: val")
        self._build(_floats(v, "SumTree.build: val", self.dtype.type))

    def values(self, idx: _t.Optional[_ArrayLike] = None) -> _Array:
        """The leaves idx (all `capacity` when None), as self.dtype."""
        if idx is None:
            nodes = self.nodes()
            return nodes[self.leaves : self.leaves + self.capacity].copy()
        i = _indices(idx, "SumTree.values: idx", 32)
        out = _np.empty(i.shape[0], self.dtype)
        self._get_into(i, out)
        return out

    def nodes(self) -> _Array:
        """A copy of the node array (2L values of self.dtype, root at 1,
        leaves at [L, L + capacity)): the layout per_cuda and the C library
        share."""
        out = _np.empty(2 * self.leaves, self.dtype)
        self._nodes_into(out)
        return out

    def sample(self, batch_size: int, rng: Rng) -> _t.Tuple[_Array, _Array]:
        """Stratified batch (per_tree_sample): (leaf indices uint32, their
        values of self.dtype); P(i) = value / total."""
        B = _count(batch_size, "SumTree.sample: batch_size")
        idx = _np.empty(B, _np.uint32)
        val = _np.empty(B, self.dtype)
        self._sample(rng, B, idx, val)
        return idx, val

    def sample_iid(self, k: int, rng: Rng) -> _t.Tuple[_Array, _Array]:
        """k independent draws proportional to the leaves
        (per_tree_sample_iid)."""
        k = _count(k, "SumTree.sample_iid: k")
        idx = _np.empty(k, _np.uint32)
        val = _np.empty(k, self.dtype)
        self._sample_iid(rng, k, idx, val)
        return idx, val


class SumTree(_SumTreeMethods, _per._SumTree, metaclass=_Twin):
    """A per_tree of `capacity` leaves, all 0 at first: double
    (dtype=numpy.float64, the default) or float (numpy.float32: half the
    memory, the values of a C build with PER_REAL float).

    set(i, v) / get(i) / total / prefix(i) / find(u) as in C; the batch
    calls take arrays (values converted to dtype as add() converts: a
    finite value that would become inf is refused). Leaf values must be
    finite, >= 0 and <= 1e290 (1e28 with float32): others raise per.Error
    (PER_ERR_NAN, PER_ERR_INF, PER_ERR_NEGATIVE, PER_ERR_RANGE) with
    nothing written.
    """

    dtype: _DType = _F64

    def __new__(cls, capacity: int, dtype: _NodesLike = None) -> "SumTree":
        twin = _twin_for(cls, SumTree, "dtype", dtype)
        return twin(capacity) if twin else super().__new__(cls)


_SumTree32 = _make_twin(SumTree, _SumTreeMethods, _per32._SumTree, "dtype")
_new_signature(SumTree)


class UniformSampler(_per._UniformSampler):
    """Uniform sampling without replacement over [0, n) by partial
    Fisher-Yates (per_swap): O(1) per draw, n grows with grow(n)."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)

    def sample(self, k: int, rng: Rng) -> _Array:
        """k distinct indices in [0, n), uniform, in random order."""
        k = _count(k, "UniformSampler.sample: k")
        out = _np.empty(k, _np.uint32)
        self._sample(rng, k, out)
        return out


class _CategoricalMethods(_CatBase):
    """CategoricalSampler's methods, the same for both node types."""

    dtype: _DType

    def __init__(self, max_k: int, dtype: _NodesLike = None) -> None:
        _own_nodes(self.dtype, dtype, "CategoricalSampler: dtype")
        super().__init__(max_k)

    def sample(self, tree: SumTree, k: int, rng: Rng) -> _t.Tuple[_Array, _Array]:
        """k distinct leaves by successive sampling, in pick order: (indices
        uint32, values of the tree's dtype). The tree is unchanged
        afterwards; its dtype must be the sampler's."""
        k = _count(k, "CategoricalSampler.sample: k")
        if isinstance(tree, SumTree) and tree.dtype != self.dtype:
            raise TypeError(f"CategoricalSampler.sample: a SumTree of "
                            f"{tree.dtype} for a sampler of {self.dtype} "
                            f"(make it with dtype={tree.dtype})")
        idx = _np.empty(k, _np.uint32)
        val = _np.empty(k, self.dtype)
        self._sample(tree, rng, k, idx, val)
        return idx, val


class CategoricalSampler(_CategoricalMethods, _per._CategoricalSampler,
                         metaclass=_Twin):
    """Sampling without replacement proportional to a SumTree's leaves
    (per_cat), for batches up to max_k, over trees of dtype (float64, the
    default, or float32)."""

    dtype: _DType = _F64

    def __new__(cls, max_k: int, dtype: _NodesLike = None) -> "CategoricalSampler":
        twin = _twin_for(cls, CategoricalSampler, "dtype", dtype)
        return twin(max_k) if twin else super().__new__(cls)


_CategoricalSampler32 = _make_twin(CategoricalSampler, _CategoricalMethods,
                                   _per32._CategoricalSampler, "dtype")
_new_signature(CategoricalSampler)


# ---------------------------------------------------------------------------
# Replay buffer
# ---------------------------------------------------------------------------


_LAYOUT_MAX = 511  # per.h's PER_LAYOUT_MAX - 1


def _layout_of(dt: _DType) -> str:
    """The layout text a ReplayBuffer of items dt names (checkpoints keep
    it; a load refuses a file of another): "numpy:" and the dtype's descr
    as compact JSON, or, past 511 chars, "numpy-sha256:" and the digest of
    that JSON (still compared on load, but from_file then needs the
    dtype)."""
    text = "numpy:" + _json.dumps(dt.descr, separators=(",", ":"))
    if len(text.encode()) <= _LAYOUT_MAX:
        return text
    return "numpy-sha256:" + _hashlib.sha256(text.encode()).hexdigest()


def _descr(x: _t.Any) -> _t.Any:
    """A dtype descr from its JSON form: lists back to tuples."""
    if isinstance(x, list):
        out = []
        for f in x:
            name = tuple(f[0]) if isinstance(f[0], list) else f[0]
            typ = _descr(f[1]) if isinstance(f[1], list) else f[1]
            out.append((name, typ) if len(f) == 2 else (name, typ, tuple(f[2])))
        return out
    return x


def _dtype_of_layout(text: str) -> _t.Optional[_DType]:
    """The dtype a "numpy:" layout text names, or None."""
    if not text.startswith("numpy:"):
        return None
    dt: _DType = _np.dtype(_descr(_json.loads(text[len("numpy:"):])))
    return dt


def _items(n: _t.Optional[int]) -> str:
    return "one item" if n is None else f"a batch of {n}"


if _t.TYPE_CHECKING:
    _BatchBase = _t.Dict[str, _Array]
else:
    _BatchBase = dict


class Batch(_BatchBase):
    """What ReplayBuffer.sample returns: a dict of arrays, the item's fields
    (views of .records, the record array they share) and "ids",
    "weights", and with the options "mask", "end", "trajectory". Pass it
    back as sample(..., out=batch) to draw into the same memory."""

    def __init__(self, records: _Array) -> None:
        super().__init__((name, records[name])
                         for name in records.dtype.names or ())
        self.records: _Array = records


class _RecordMaker(_t.Protocol):
    """What ReplayBuffer._records and _from_fields need of self (per.mpi.Feed
    makes its batches with them too)."""

    dtype: _DType

    def _from_fields(self, values: _t.Mapping[str, object], call: str,
                     batch: bool) -> _Array: ...


class _ReplayBufferMethods(_BufBase):
    """ReplayBuffer's methods, the same for both node types."""

    dtype: _DType  # the item's
    nodes: _DType  # the trees'

    def __init__(self, capacity: int, item: ItemSpec, *, align: bool = False,
                 nodes: _NodesLike = None,
                 **config: "_Unpack[_config.ReplayKeywords]") -> None:
        _own_nodes(self.nodes, nodes, "ReplayBuffer: nodes")
        _config.check_keywords("ReplayBuffer.__init__", config,
                               _config.REPLAY_KEYS)
        dt = _item_dtype(item, align)
        capacity = _count(capacity, "ReplayBuffer: capacity")
        super().__init__(_config.c_config(
            "ReplayBuffer", _config.REPLAY_KEYS, config,
            {"capacity": capacity, "item_size": dt.itemsize}))
        self.dtype: _DType = dt
        self._set_layout(_layout_of(dt))
        # fixed for the buffer's life (load refuses another capacity or
        # seq_len); kept here so sample() does not build the config dict
        cfg = self.config
        self._capacity: int = cfg["capacity"]
        self._seq_len: int = max(cfg["seq_len"], 1)

    # -- adding ------------------------------------------------------------

    def _records(self: "_RecordMaker", item: object,
                 fields: _t.Mapping[str, object], call: str,
                 batch: bool = False) -> _Array:
        """The items to add as a 1-D contiguous array of self.dtype; with
        batch, only input with a leading batch axis is taken. Nothing is
        written to the buffer here: a refusal leaves it as it was."""
        dt = self.dtype
        if item is not None and fields:
            raise TypeError(f"{call}: pass the item(s) or fields as keywords, "
                            "not both")
        if item is None:
            item = fields
        if isinstance(item, _t.Mapping):
            got, names = set(item.keys()), set(dt.names or ())
            if got != names:
                raise ValueError(f"{call}: fields do not match the item: "
                                 f"missing {sorted(names - got)}, unknown "
                                 f"{sorted(got - names)}")
            return self._from_fields(item, call, batch)
        arr = _np.asarray(item)
        if arr.dtype.names is None:
            if dt.names == ("item",):
                return self._from_fields({"item": arr}, call, batch)
            raise TypeError(f"{call}: items are records of {dt} or fields "
                            f"(a dict or keywords), not {arr.dtype} values")
        if arr.ndim > 1 or (batch and arr.ndim != 1):
            raise ValueError(f"{call}: a 1-D array of records, got shape "
                             f"{arr.shape}" if batch else
                             f"{call}: a record or a 1-D array of records, "
                             f"got shape {arr.shape}")
        if arr.dtype == dt:
            return _np.ascontiguousarray(arr.reshape(-1))
        if set(arr.dtype.names) != set(dt.names or ()):
            raise TypeError(f"{call}: records with the fields "
                            f"{list(arr.dtype.names)}, the buffer's are "
                            f"{list(dt.names or ())}")
        # the same fields in another layout or of other types: field by
        # field, by the rule of add()
        return self._from_fields({n: arr[n] for n in dt.names or ()}, call,
                                 batch)

    def _from_fields(self: "_RecordMaker", values: _t.Mapping[str, object],
                     call: str, batch: bool) -> _Array:
        """Records from one value or array per field: each field's shape is
        the item's (one item; not with batch) or (n,) + the item's (n
        items), n alike for every field; each value converted by the rule
        of add() (_cast)."""
        dt = self.dtype
        plain = dt.names == ("item",)
        n: _t.Optional[int] = None
        first = ""
        conv = {}
        for name in dt.names or ():
            label = "item array" if plain else f"field {name!r}"
            base, fshape = dt[name].base, dt[name].shape
            v = _np.asarray(values[name])
            many = "(n" + "".join(f", {d}" for d in fshape) + (",)" if not fshape else ")")
            if v.shape == fshape and not batch:
                m = None
            elif v.ndim == len(fshape) + 1 and v.shape[1:] == fshape:
                m = v.shape[0]
            elif v.shape == fshape:
                raise ValueError(f"{call}: {label} has shape {v.shape}, one "
                                 f"item's; a batch has a leading axis, {many}")
            else:
                raise ValueError(f"{call}: {label} has shape {v.shape}; one "
                                 f"item's is {fshape}, a batch's {many}")
            if first and m != n:
                raise ValueError(f"{call}: field {first!r} holds {_items(n)}, "
                                 f"field {name!r} {_items(m)}")
            n, first = m, first or name
            conv[name] = _cast(v, base, f"{call}: {label}")
        # zeros: the padding of an aligned dtype is stored too, and must
        # not carry whatever the memory held (checkpoints would differ)
        rec = _np.zeros(1 if n is None else n, dt)
        for name, v in conv.items():
            rec[name] = v
        return rec

    def add(self, item: _ItemsIn = None,
            *, ends: _t.Optional[_ArrayLike] = None,
            td: _t.Optional[_ArrayLike] = None, **fields: _ArrayLike) -> None:
        """Store one item or a batch, as one trajectory.

        item: a record or 1-D array of self.dtype, or a dict of field ->
        value (one item) or field -> array with a leading batch axis; the
        fields may also be keywords: add(obs=o, action=a, ...). ends: None
        (no episode end), an END_* int for the last item of the batch, or
        one END_* per item. New items get the largest priority seen; with
        td (one TD error per item, as Ape-X's actors compute them) each
        gets the priority update would give it, (|td| + eps)^alpha
        (per_buffer_add_td).

        A value whose type is not the field's is converted only where
        that is exact: a bool field takes 0 and 1; an integer field takes
        integers in its range and floats that are whole numbers in it (not
        NaN or inf); a float field takes the integers it holds exactly, and
        floats rounded to the nearest, except a finite one that would
        become inf (1e300 into float32); complex values never go into a
        real field; text must fit its field and bytes be ASCII text. Records
        of another dtype with the same field names are converted field by
        field by the same rule. Anything else raises TypeError (a type that
        does not convert) or ValueError (a value that would change, or a
        shape that is not the item's), naming the field, and adds
        nothing."""
        self._add_records(self._records(item, fields, "ReplayBuffer.add"),
                          ends, "ReplayBuffer.add", td)

    def add_batch(self, items: _ItemsIn = None,
                  *, ends: _t.Optional[_ArrayLike] = None,
                  td: _t.Optional[_ArrayLike] = None,
                  **fields: _ArrayLike) -> None:
        """add() for batches only: the records, or every field, must have a
        leading batch axis (a batch of one is shape (1, ...), never read as
        one item; a single record is refused with ValueError). Zero items
        add nothing. Values convert as in add(); td, when given, has shape
        (n,)."""
        call = "ReplayBuffer.add_batch"
        self._add_records(self._records(items, fields, call, batch=True), ends, call, td)

    def _add_records(self, rec: _Array, ends: _t.Optional[_ArrayLike], call: str,
                     td: _t.Optional[_ArrayLike] = None) -> None:
        n = rec.shape[0]
        t = None
        if td is not None:
            tv = _np.asarray(td)
            if tv.shape not in ((n,), ()) or (tv.shape == () and n != 1):
                raise ValueError(f"{call}: td has shape {tv.shape}; {n} items "
                                 f"take td of shape ({n},)")
            t = _floats(tv, f"{call}: td", _np.float32)
        e = None
        if ends is not None:
            ea = _np.asarray(ends)
            if ea.dtype.kind not in "iub":
                raise TypeError(f"{call}: ends must be END_* integers, not "
                                f"{ea.dtype}")
            if ea.ndim == 0:
                ea = _np.concatenate([_np.zeros(max(n - 1, 0), _np.int64), ea.reshape(1)])
            if ea.shape != (n,):
                raise ValueError(f"{call}: {n} items but ends of shape {ea.shape}")
            if ea.size and (ea.min() < 0 or ea.max() > 255):
                raise _error("PER_ERR_ARG", f"{call}: an end is not an END_* value")
            e = _np.ascontiguousarray(ea, dtype=_np.uint8)
        if n == 0:
            return
        self._add(rec, e, t)

    # -- sampling ----------------------------------------------------------

    def sample(
        self,
        batch_size: int,
        *,
        unique: bool = False,
        beta: _t.Optional[float] = None,
        window: int = 0,
        trajectories: bool = False,
        sequences: bool = False,
        episode_info: bool = False,
        out: _t.Optional["Batch"] = None,
    ) -> "Batch":
        """Draw batch_size items (per_buffer_sample): a dict of the item's
        fields (leading axis batch_size; with sequences, (batch_size,
        seq_len)), "ids" (uint64, for update) and "weights" (float32 IS
        weights, max 1), and with sequences "mask" (bool, False after an
        episode's end). unique: distinct items; beta: this beta instead of
        the schedule; window: only the `window` newest items (or
        trajectories, with trajectories=True); sequences: seq_len steps
        each; episode_info: also "end" (uint8, the step's END_NONE,
        END_TERMINATED or END_TRUNCATED) and "trajectory" (uint32, the low
        32 bits of the id of the add call that stored it), with the
        fields' leading shape. The item's arrays are views of one record
        array (out.records): no copies. out: a Batch an earlier call
        returned for the same batch_size and options, filled in place and
        returned (no allocation); a draw that is refused leaves it as it
        was."""
        B = _count(batch_size, "ReplayBuffer.sample: batch_size")
        window = _count(window, "ReplayBuffer.sample: window")
        flags = 0
        b = 0.0
        if unique:
            flags |= _per.SAMPLE_UNIQUE
        if beta is not None:
            flags |= _per.SAMPLE_BETA
            b = _real(beta, "ReplayBuffer.sample: beta")
        if trajectories:
            flags |= _per.SAMPLE_TRAJECTORIES
        L = 1
        if sequences:
            flags |= _per.SAMPLE_SEQUENCES
            L = self._seq_len
        lead = (B, L) if sequences else (B,)
        if out is None:
            out = Batch(_np.empty(lead, self.dtype))
            out["ids"] = _np.empty(B, _np.uint64)
            out["weights"] = _np.empty(B, _np.float32)
            if sequences:
                out["mask"] = _np.empty(lead, _np.bool_)
            if episode_info:
                out["end"] = _np.empty(lead, _np.uint8)
                out["trajectory"] = _np.empty(lead, _np.uint32)
        else:
            self._check_out(out, lead, sequences, episode_info)
        ids = out["ids"]
        mask = out["mask"].view(_np.uint8) if sequences else None
        self._sample(B, flags, b, window, out.records, ids, out["weights"], mask)
        if episode_info:
            self._ends_into(ids, sequences, out["end"], out["trajectory"])
        return out

    def _check_out(self, out: "Batch", lead: _t.Tuple[int, ...], sequences: bool,
                   episode_info: bool) -> None:
        c = "ReplayBuffer.sample: out"
        if not isinstance(out, Batch):
            raise TypeError(f"{c} must be a Batch that sample returned")
        if out.records.dtype != self.dtype or out.records.shape != lead:
            raise ValueError(f"{c} holds records of shape {out.records.shape}, "
                             f"{out.records.dtype}; this call needs {lead}, "
                             f"{self.dtype}")
        want = {"ids", "weights"} | ({"mask"} if sequences else set()) | (
            {"end", "trajectory"} if episode_info else set())
        missing = want - set(out)
        if missing:
            raise ValueError(f"{c} lacks {sorted(missing)}: make it with the "
                             "same options")
        if out["ids"].shape != lead[:1] or out["weights"].shape != lead[:1]:
            raise ValueError(f"{c}: ids and weights must have shape {lead[:1]}")

    def clear(self) -> None:
        """Drop every item: the buffer as a new one made with the same
        arguments (the rng restarts from the seed and the beta schedule
        from step 0). BufferError while a view of storage is alive."""
        self._clear()

    def __repr__(self) -> str:
        c = self.config
        seq = (f", seq_len={c['seq_len']}, seq_stride={c['seq_stride']}"
               if c["seq_len"] else "")
        nodes = ", nodes=float32" if self.nodes == _F32 else ""
        return (f"per.ReplayBuffer(capacity={c['capacity']}, size={self.size}, "
                f"item={self.dtype}, alpha={c['alpha']:g}, "
                f"beta={self.beta:g} (step {self.step}), eps={c['eps']:g}, "
                f"seed={c['seed']}{seq}{nodes})")

    def __reduce__(self) -> _t.Tuple[_t.Any, ...]:
        """Pickling, copy and deepcopy: the checkpoint's bytes (what save
        writes), restored by a buffer made from the same arguments."""
        return (_restore_buffer, (type(self), self._init_kwargs(),
                                  self.dtype, self._snapshot(True)))

    def _init_kwargs(self) -> _t.Dict[str, _t.Any]:
        c = self.config
        nodes = {"nodes": "float32"} if self.nodes == _F32 else {}
        return {"capacity": c["capacity"], **nodes,
                **_config.keywords(c, _config.REPLAY_KEYS)}

    def _ids_td(self, ids: _ArrayLike, td: _ArrayLike, call: str,
                seq: bool) -> _t.Tuple[_Array, _Array]:
        """ids 1-D; td of shape (len(ids),), or (len(ids), seq_len) for
        sequences: any other shape is refused, never flattened."""
        i = _vector(ids, f"{call}: ids")
        t = _np.asarray(td)
        want = (i.shape[0], self._seq_len) if seq else i.shape
        if t.shape != want:
            raise ValueError(f"{call}: td has shape {t.shape}; {i.shape[0]} "
                             f"ids take td of shape {want}")
        return (_indices(i, f"{call}: ids", 64),
                _floats(t, f"{call}: td", _np.float32))

    def update(self, ids: _ArrayLike, td: _ArrayLike) -> int:
        """Priorities (|td| + eps)^alpha for the sampled ids
        (per_buffer_update; td is rounded to float32 as in C). ids is 1-D
        and td has its shape, one value per id. Returns how many ids were
        stale (their slot overwritten since the draw)."""
        return self._update(*self._ids_td(ids, td, "ReplayBuffer.update", False), False)

    def update_sequences(self, ids: _ArrayLike, td: _ArrayLike) -> int:
        """per_buffer_update_seq: td holds seq_len values per id, shape
        (len(ids), seq_len)."""
        call = "ReplayBuffer.update_sequences"
        return self._update(*self._ids_td(ids, td, call, True), True)

    # -- state -------------------------------------------------------------

    def __len__(self) -> int:
        return self.size

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def step(self) -> int:
        """Sample calls so far (the beta schedule's clock)."""
        return int(self.counters["step"])

    @property
    def added(self) -> int:
        """Items added in total."""
        return int(self.counters["added"])

    @property
    def storage(self) -> _Array:
        """The item ring, slots [0, len(self)), as a read-only view (no
        copy): slot order, not age order."""
        return _np.frombuffer(memoryview(self), dtype=self.dtype)[: self.size]

    def priorities(self) -> _Array:
        """A copy of the leaves of slots [0, capacity) (0 where empty)."""
        out = _np.empty(self.capacity, self.nodes)
        self._leaves_into(out, False)
        return out

    def save(self, path: _PathArg) -> None:
        """per_buffer_save: the whole state, atomically replacing path."""
        self._save(_os.fspath(path))

    def save_async(self, path: _PathArg) -> "_futures.Future[None]":
        """The non-blocking save: the state is copied now (memcpy speed,
        per_buffer_snapshot; the buffer is free again once this returns)
        and written to path by a thread of its own with per_buffer_save's
        guarantees (per_snapshot_write). Returns a Future: result() waits
        and raises per.Error if the write failed. The file is the one
        save would have written at the time of the call."""
        data = self._snapshot(False)
        target = _os.fspath(path)
        fut: "_futures.Future[None]" = _futures.Future()

        def write() -> None:
            if not fut.set_running_or_notify_cancel():
                return
            try:
                _per.snapshot_write(data, target)
            except BaseException as e:  # handed to whoever waits
                fut.set_exception(e)
            else:
                fut.set_result(None)

        _threading.Thread(target=write, name="per-save", daemon=False).start()
        return fut

    def load(self, path: _PathArg) -> None:
        """per_buffer_load: replace the state with the file's (validated
        completely first; the buffer is unchanged on error).

        The file's config replaces this buffer's alpha, beta0, beta1,
        beta_steps, eps, max_priority, seed and seq_eta (a loaded buffer
        draws exactly what the saved one would have). Its capacity, item
        dtype, weights_buffer_max, cross_episodes, max_unique, seq_len
        and seq_stride must be this buffer's (per.Error PER_ERR_MISMATCH
        names the one that differs); the dtype is compared through the
        layout text the file keeps (files written by C without one load
        into any buffer of their item size). ReplayBuffer.from_file makes
        the buffer a file needs."""
        self._load(_os.fspath(path))

    @classmethod
    def from_file(cls, path: _PathArg,
                  item: _t.Optional[ItemSpec] = None) -> "ReplayBuffer":
        """A buffer made from the file's header (per_ckpt_read_info): its
        capacity, config, item dtype and node type, and loaded with the
        file. item is
        needed only for files that do not name a NumPy dtype (written by
        C, by per before 0.4, or with a dtype too long to keep whole);
        when given, it must match the file's."""
        p = _os.fspath(path)
        info = _per.ckpt_info(p)
        call = "ReplayBuffer.from_file"
        nodes = {8: _F64, 4: _F32}.get(info["real_bytes"])
        if nodes is None:
            raise ValueError(f"{call}: {p!r} holds {info['real_bytes']}-byte "
                             "leaves; nodes are float64 or float32")
        dt = (_item_dtype(item) if item is not None
              else _dtype_of_layout(info["layout"]))
        if dt is None:
            what = ("names no item layout" if not info["layout"]
                    else "names its items' dtype only by a digest")
            raise ValueError(f"{call}: {p!r} {what}: pass item=, the dtype "
                             "of its items")
        if dt.itemsize != info["item_size"]:
            raise ValueError(f"{call}: item= is {dt.itemsize} bytes, the "
                             f"file's items are {info['item_size']}")
        buf = cls(info["capacity"], dt, nodes=nodes,
                  **_config.keywords(info, _config.REPLAY_KEYS))
        buf.load(p)
        return _t.cast("ReplayBuffer", buf)

    def load_shard(self, path: _PathArg, rank: int, world: int) -> None:
        """per_buffer_load_shard: items rank, rank + world, ... of the file."""
        self._load_shard(_os.fspath(path), rank, world)


class ReplayBuffer(_ReplayBufferMethods, _per._Buffer, metaclass=_Twin):
    """A prioritized replay buffer (per_buffer) of `capacity` items.

    `item` describes one item: a structured NumPy dtype, or a dict of
    field name -> dtype, (dtype, shape) or example array. The keyword
    arguments are per_config's fields with the C defaults (alpha = 0 is
    uniform replay, 0 is a value like any other). Flags are keywords:
    weights_buffer_max (PER_WEIGHTS_BUFFER_MAX), cross_episodes
    (PER_SEQ_CROSS_EPISODES), live_max (PER_MAX_LIVE: new items get the
    largest leaf stored now instead of the largest ever written, so one
    huge TD error stops counting once its item is updated or evicted).
    max_unique=None takes the C default
    (min(capacity, 65536)). nodes: the sum trees' node type (`self.nodes`),
    numpy.float64 (default: per.h's default, PER_REAL double) or
    numpy.float32 (PER_REAL float: half the tree memory; ids, weights,
    items and checkpoints those of a C build with PER_REAL float).
    """

    nodes: _DType = _F64

    def __new__(cls, *args: _t.Any, nodes: _NodesLike = None,
                **kwargs: _t.Any) -> "ReplayBuffer":
        twin = _twin_for(cls, ReplayBuffer, "nodes", nodes)
        return twin(*args, nodes=nodes, **kwargs) if twin else super().__new__(cls)


_ReplayBuffer32 = _make_twin(ReplayBuffer, _ReplayBufferMethods,
                             _per32._Buffer, "nodes")

# help() and inspect.signature show the keywords with the C defaults
_config.signature(ReplayBuffer.__init__, _config.REPLAY_KEYS,
                  _config.defaults(1, 1), _config.ReplayKeywords)
_new_signature(ReplayBuffer)


# ---------------------------------------------------------------------------
# n-step adder
# ---------------------------------------------------------------------------


def _restore_buffer(cls: "type[ReplayBuffer]", kwargs: _t.Dict[str, _t.Any],
                    dtype: _DType, data: bytes) -> "ReplayBuffer":
    """The other half of ReplayBuffer.__reduce__."""
    kw = dict(kwargs)
    capacity = kw.pop("capacity")
    buf = cls(capacity, dtype, **kw)
    buf._load_mem(data)
    return buf


class NStep(_per._NStep):
    """Turns environment steps into n-step items (per_nstep): obs, action,
    reward (discounted sum), discount (gamma^m), done, next_obs.

    item_dtype is the dtype of the items it emits: make the buffer with
    ReplayBuffer(capacity, adder.item_dtype)."""

    def __init__(
        self,
        n: int,
        gamma: float,
        obs_shape: _ShapeLike = (),
        obs_dtype: _DTypeLike = _np.float32,
        action_shape: _ShapeLike = (),
        action_dtype: _DTypeLike = _np.int32,
    ) -> None:
        self.obs_dtype = _np.dtype(obs_dtype)
        self.obs_shape = _shape(obs_shape, "NStep: obs_shape")
        self.action_dtype = _np.dtype(action_dtype)
        self.action_shape = _shape(action_shape, "NStep: action_shape")
        obs_size = self.obs_dtype.itemsize * int(_np.prod(self.obs_shape, dtype=_np.int64))
        act_size = self.action_dtype.itemsize * int(_np.prod(self.action_shape, dtype=_np.int64))
        super().__init__(n, _real32(gamma, "NStep: gamma"), obs_size, act_size)
        lay = self.layout
        self.item_dtype: _DType = _np.dtype({
            "names": ["obs", "action", "reward", "discount", "done", "next_obs"],
            "formats": [(self.obs_dtype, self.obs_shape),
                        (self.action_dtype, self.action_shape), _np.float32,
                        _np.float32, _np.uint32, (self.obs_dtype, self.obs_shape)],
            "offsets": [lay["obs"], lay["action"], lay["reward"],
                        lay["discount"], lay["done"], lay["next_obs"]],
            "itemsize": lay["size"],
        })

    @staticmethod
    def _array(o: _ArrayLike, dtype: _DType, shape: _t.Tuple[int, ...], what: str) -> _Array:
        a = _np.asarray(o)
        if a.shape != shape:
            raise ValueError(f"{what} has shape {a.shape}, the adder's is {shape}")
        a = _cast(a, dtype, what)
        return a if a.flags.c_contiguous else a.copy()

    def step(self, buffer: ReplayBuffer, obs: _ArrayLike, action: _ArrayLike,
             reward: float, next_obs: _ArrayLike, terminated: bool = False,
             truncated: bool = False) -> None:
        """One environment step (per_nstep_step): emits to buffer the items
        that are complete. obs, action and next_obs convert to the adder's
        dtypes as values convert in ReplayBuffer.add (exactly, or refused
        with nothing changed); reward is rounded to float32, and refused
        where it would become inf."""
        c = "NStep.step: "
        self._step(buffer, self._array(obs, self.obs_dtype, self.obs_shape, c + "obs"),
                   self._array(action, self.action_dtype, self.action_shape, c + "action"),
                   _real32(reward, c + "reward"),
                   self._array(next_obs, self.obs_dtype, self.obs_shape, c + "next_obs"),
                   bool(terminated), bool(truncated))

    def save(self, path: _PathArg) -> None:
        """The pending steps of this adder (save_nstep([self], path))."""
        _per.nstep_save([self], _os.fspath(path))

    def load(self, path: _PathArg) -> None:
        _per.nstep_load([self], _os.fspath(path))


def save_nstep(adders: _t.Sequence[NStep], path: _PathArg) -> None:
    """per_nstep_save: the pending steps of several adders in one file."""
    _per.nstep_save(list(adders), _os.fspath(path))


def load_nstep(adders: _t.Sequence[NStep], path: _PathArg) -> None:
    """per_nstep_load: the file's pending steps into adders made with the
    same configs (all unchanged on error)."""
    _per.nstep_load(list(adders), _os.fspath(path))


class _FrameBufferMethods(_FramesBase):
    """FrameBuffer's methods, the same for both node types."""

    nodes: _DType  # the trees'

    def __init__(
        self,
        capacity: int,
        frame_shape: _ShapeLike = (84, 84),
        frame_dtype: _DTypeLike = _np.uint8,
        *,
        stack: int = 4,
        action_shape: _ShapeLike = (),
        action_dtype: _DTypeLike = _np.int64,
        nodes: _NodesLike = None,
        **config: "_Unpack[_config.FrameKeywords]",
    ) -> None:
        c = "FrameBuffer: "
        _own_nodes(self.nodes, nodes, c + "nodes")
        _config.check_keywords("FrameBuffer.__init__", config,
                               _config.FRAME_KEYS)
        self.frame_dtype: _DType = _np.dtype(frame_dtype)
        self.frame_shape: _t.Tuple[int, ...] = _shape(frame_shape, c + "frame_shape")
        self.action_dtype: _DType = _np.dtype(action_dtype)
        self.action_shape: _t.Tuple[int, ...] = _shape(action_shape, c + "action_shape")
        fb = self.frame_dtype.itemsize * int(_np.prod(self.frame_shape, dtype=_np.int64))
        ab = self.action_dtype.itemsize * int(_np.prod(self.action_shape, dtype=_np.int64))
        capacity = _count(capacity, c + "capacity")
        super().__init__(_config.c_config(
            "FrameBuffer", _config.FRAME_KEYS, config,
            {"capacity": capacity, "frame_bytes": fb, "stack": stack,
             "action_size": ab}))
        cfg = self.config
        self._stack: int = cfg["stack"]
        self._lanes: int = cfg["lanes"]
        self._seq_len: int = max(cfg["buffer"]["seq_len"], 1)
        self._capacity: int = cfg["buffer"]["capacity"]

    def _arr(self, o: _ArrayLike, dtype: _DType, shape: _t.Tuple[int, ...],
             what: str) -> _Array:
        a = _np.asarray(o)
        if a.shape != shape:
            raise ValueError(f"{what} has shape {a.shape}, needs {shape}")
        a = _cast(a, dtype, what)
        return a if a.flags.c_contiguous else a.copy()

    def step(self, obs_frame: _ArrayLike, action: _ArrayLike, reward: float,
             next_frame: _ArrayLike, terminated: bool = False,
             truncated: bool = False, *, lane: int = 0) -> None:
        """One environment step of `lane` (per_frames_step). obs_frame and
        next_frame have frame_shape (the newest frame of each observation:
        obs[-1] of a stacked observation); values convert to the frame and
        action dtypes exactly or are refused, nothing changed."""
        c = "FrameBuffer.step: "
        self._step(lane,
                   self._arr(obs_frame, self.frame_dtype, self.frame_shape, c + "obs_frame"),
                   self._arr(action, self.action_dtype, self.action_shape, c + "action"),
                   _real32(reward, c + "reward"),
                   self._arr(next_frame, self.frame_dtype, self.frame_shape, c + "next_frame"),
                   bool(terminated), bool(truncated))

    def step_lanes(self, obs_frames: _ArrayLike, actions: _ArrayLike,
                   rewards: _ArrayLike, next_frames: _ArrayLike,
                   terminated: _ArrayLike, truncated: _ArrayLike) -> None:
        """One step of every lane, lane 0 first (a vector environment's
        step): arrays with a leading axis of `lanes`. A reward that is not
        finite is refused before any lane steps."""
        c = "FrameBuffer.step_lanes: "
        L = (self._lanes,)
        r = _np.asarray(rewards)
        if r.shape != L:
            raise ValueError(f"{c}rewards has shape {r.shape}, needs {L}")
        self._step_lanes(
            self._arr(obs_frames, self.frame_dtype, L + self.frame_shape, c + "obs_frames"),
            self._arr(actions, self.action_dtype, L + self.action_shape, c + "actions"),
            _np.ascontiguousarray(_floats(r, c + "rewards", _np.float32)),
            self._arr(next_frames, self.frame_dtype, L + self.frame_shape, c + "next_frames"),
            self._arr(_np.asarray(terminated).astype(bool), _np.dtype(_np.uint8), L,
                      c + "terminated"),
            self._arr(_np.asarray(truncated).astype(bool), _np.dtype(_np.uint8), L,
                      c + "truncated"))

    def sample(
        self,
        batch_size: int,
        *,
        unique: bool = False,
        beta: _t.Optional[float] = None,
        window: int = 0,
        sequences: bool = False,
        out: _t.Optional[_t.Dict[str, _Array]] = None,
    ) -> _t.Dict[str, _Array]:
        """Draw batch_size transitions (per_frames_sample) among those
        whose frames are all stored: a dict of "obs" and "next_obs" (shape
        (batch_size, stack) + frame_shape), "action", "reward",
        "discount", "done" (n-step: the target is reward + (1 - done) *
        discount * V(next_obs)), "ids" and "weights"; with sequences, a
        (batch_size, seq_len) leading shape and "mask". out: a dict an
        earlier call returned for the same batch_size and options, filled
        in place and returned (no allocation); a draw that is refused
        leaves it as it was."""
        c = "FrameBuffer.sample: "
        B = _count(batch_size, c + "batch_size")
        window = _count(window, c + "window")
        flags = 0
        b = 0.0
        if unique:
            flags |= _per.SAMPLE_UNIQUE
        if beta is not None:
            flags |= _per.SAMPLE_BETA
            b = _real(beta, c + "beta")
        lead: _t.Tuple[int, ...] = (B,)
        if sequences:
            flags |= _per.SAMPLE_SEQUENCES
            lead = (B, self._seq_len)
        stack = lead + (self._stack,) + self.frame_shape
        f32 = _np.dtype(_np.float32)
        want = {"obs": (stack, self.frame_dtype), "next_obs": (stack, self.frame_dtype),
                "action": (lead + self.action_shape, self.action_dtype),
                "reward": (lead, f32), "discount": (lead, f32),
                "done": (lead, _np.dtype(_np.uint32)), "ids": ((B,), _np.dtype(_np.uint64)),
                "weights": ((B,), f32)}
        if sequences:
            want["mask"] = (lead, _np.dtype(_np.bool_))
        if out is None:
            out = {name: _np.empty(shape, dt) for name, (shape, dt) in want.items()}
        else:
            if not isinstance(out, dict):
                raise TypeError(f"{c}out must be a dict that sample returned, not "
                                f"{type(out).__name__}")
            for name, (shape, dt) in want.items():
                a = out.get(name)
                if not (isinstance(a, _np.ndarray) and a.shape == shape and a.dtype == dt
                        and a.flags.c_contiguous and a.flags.writeable):
                    got = (f"{a.shape}, {a.dtype}" if isinstance(a, _np.ndarray)
                           else type(a).__name__)
                    raise ValueError(f"{c}out[{name!r}] must be a writable C-contiguous "
                                     f"array of shape {shape}, {dt} (this call's); got "
                                     f"{got}")
        mask = out["mask"].view(_np.uint8) if sequences else None
        self._sample(B, flags, b, window, out["obs"], out["next_obs"], out["action"],
                     out["reward"], out["discount"], out["done"], out["ids"],
                     out["weights"], mask)
        return out

    def update(self, ids: _ArrayLike, td: _ArrayLike) -> int:
        """Priorities from TD errors for the sampled ids (per_frames_update);
        td has the shape of ids. Returns how many ids were stale."""
        c = "FrameBuffer.update"
        i = _vector(ids, f"{c}: ids")
        t = _np.asarray(td)
        if t.shape != i.shape:
            raise ValueError(f"{c}: td has shape {t.shape}; {i.shape[0]} ids "
                             f"take td of shape {i.shape}")
        return self._update(_indices(i, f"{c}: ids", 64),
                            _floats(t, f"{c}: td", _np.float32))

    def save(self, path: _PathArg) -> None:
        """per_frames_save: one atomic file, every frame in the ring once."""
        self._save(_os.fspath(path))

    def load(self, path: _PathArg) -> None:
        """per_frames_load: replace the state with the file's; the buffer
        must have been made with the saved arguments (per.Error
        PER_ERR_MISMATCH names the first that differs). Unchanged on
        error."""
        self._load(_os.fspath(path))

    def __len__(self) -> int:
        return self.counters["size"]

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def drawable(self) -> int:
        """Transitions that can be drawn now (per_frames_drawable)."""
        return self.counters["drawable"]

    @property
    def restarts(self) -> int:
        """Lanes restarted because the ring overwrote their frames."""
        return self.counters["restarts"]


class FrameBuffer(_FrameBufferMethods, _per._Frames, metaclass=_Twin):
    """Prioritized replay of stacked frames with each frame stored once
    (per_frames): pixel replay at about one frame a transition instead of
    two stacks.

    A step gives the newest frame of the observation (read at an
    episode's first step), the action, the reward, the newest frame of the
    next observation and how the step ended; sampling rebuilds obs and
    next_obs, stacks of `stack` frames, oldest first, the frames before an
    episode's first one being that frame repeated (Gymnasium's
    FrameStackObservation default). n > 1 gives n-step returns as NStep
    does (reward, discount = gamma^m, done). lanes > 1: one lane per
    environment of a vector environment, stepped in any order (step's
    lane=) or all at once (step_lanes). The keywords after lanes are
    ReplayBuffer's; frames=0 takes the default ring (capacity + capacity /
    64 + lanes * (stack + n + 2) frames). nodes: the sum trees' node
    type, numpy.float64 (default) or numpy.float32, as ReplayBuffer's."""

    nodes: _DType = _F64

    def __new__(cls, *args: _t.Any, nodes: _NodesLike = None,
                **kwargs: _t.Any) -> "FrameBuffer":
        twin = _twin_for(cls, FrameBuffer, "nodes", nodes)
        return twin(*args, nodes=nodes, **kwargs) if twin else super().__new__(cls)


_FrameBuffer32 = _make_twin(FrameBuffer, _FrameBufferMethods, _per32._Frames,
                            "nodes")

_config.signature(FrameBuffer.__init__, _config.FRAME_KEYS,
                  _config.frame_defaults(1, 1, 4, 1), _config.FrameKeywords)
_new_signature(FrameBuffer)


class _Rollout(_t.TypedDict):
    """What Trajectory.build returns."""

    steps: _Array
    ends: _Array
    once: _t.Optional[_Array]
    id: int


class _Added(_t.TypedDict):
    """What Trajectory.add_to returns."""

    n: int
    once: _t.Optional[_Array]
    id: int


class Trajectory(_per._Traj):
    """A rollout collected field by field, then added to a ReplayBuffer in
    one call (per_traj, seed 003's accumulator): `capacity` steps at most.

    `step` describes one step record, as ReplayBuffer's `item` does (make
    the buffer with ReplayBuffer(n, traj.dtype)); `once`, if given, the
    fields kept once per rollout (an episode return, a bootstrap
    observation), returned by build/add_to and not stored in the buffer.
    Field names are unique across both. Fields of a step may arrive in any
    order (add(obs=...) now, add(reward=...) later); a step is complete
    once every step field has its value."""

    def __init__(self, capacity: int, step: ItemSpec,
                 once: _t.Optional[ItemSpec] = None) -> None:
        self.dtype: _DType = _item_dtype(step)
        self.once_dtype: _t.Optional[_DType] = (
            _item_dtype(once) if once is not None else None)
        fields = [(n, 0, _config.field(self.dtype, n)[1],
                   self.dtype[n].itemsize) for n in self.dtype.names or ()]
        if self.once_dtype is not None:
            fields += [(n, 1, _config.field(self.once_dtype, n)[1],
                        self.once_dtype[n].itemsize)
                       for n in self.once_dtype.names or ()]
        clash = set(self.dtype.names or ()) & set(
            self.once_dtype.names or () if self.once_dtype is not None else ())
        if clash:
            raise ValueError(f"Trajectory: field names are unique across step "
                             f"and once (add takes them by name): "
                             f"{sorted(clash)} in both")
        self._index = {f[0]: i for i, f in enumerate(fields)}
        self._kinds = {f[0]: (self.dtype if f[1] == 0 else self.once_dtype)
                       for f in fields}
        super().__init__(capacity, self.dtype.itemsize,
                         self.once_dtype.itemsize if self.once_dtype is not None
                         else 0, fields)
        self._capacity = _count(capacity, "Trajectory: capacity")

    def _value(self, name: str, v: _ArrayLike, call: str) -> _Array:
        dt = self._kinds[name]
        assert dt is not None
        base, shape = dt[name].base, dt[name].shape
        a = _np.asarray(v)
        if a.shape != shape:
            raise ValueError(f"{call}: field {name!r} has shape {a.shape}, "
                             f"needs {shape}")
        return _np.ascontiguousarray(_cast(a, base, f"{call}: field {name!r}"))

    def add(self, **fields: _ArrayLike) -> None:
        """The next value of each field given (per_traj_add), in the order
        given; a once field's replaces its value. Every value is checked
        before any is added."""
        call = "Trajectory.add"
        unknown = [n for n in fields if n not in self._index]
        if unknown:
            raise ValueError(f"{call}: unknown field {unknown[0]!r}; the "
                             f"fields are {list(self._index)}")
        vals = [(self._index[n], self._value(n, v, call)) for n, v in fields.items()]
        for i, v in vals:
            self._add(i, v)

    def add_step(self, record: _t.Optional[_ArrayLike] = None, *,
                 end: int = END_NONE, **fields: _ArrayLike) -> None:
        """A whole step (per_traj_add_step): a record of dtype, or every
        step field as a keyword; end is the step's episode end."""
        call = "Trajectory.add_step"
        if record is not None and fields:
            raise TypeError(f"{call}: pass a record or fields, not both")
        if record is not None:
            rec = _np.asarray(record)
            if rec.dtype != self.dtype or rec.shape != ():
                raise TypeError(f"{call}: a record of {self.dtype}")
        else:
            names = set(self.dtype.names or ())
            if set(fields) != names:
                raise ValueError(f"{call}: fields do not match the step: "
                                 f"missing {sorted(names - set(fields))}, "
                                 f"unknown {sorted(set(fields) - names)}")
            rec = _np.zeros((), self.dtype)
            for n, v in fields.items():
                rec[n] = self._value(n, v, call)
        self._add_step(_np.ascontiguousarray(rec), _count(end, f"{call}: end", 8))

    def end(self, end: int) -> None:
        """The episode end of the last complete step (per_traj_end)."""
        self._end(end)

    def __len__(self) -> int:
        return self.steps

    def build(self) -> "_Rollout":
        """The rollout so far (per_traj_build): "steps" (a copy, dtype
        records), "ends" (uint8), "once" (a record of once_dtype, or None)
        and "id" (its number in this accumulator); then the accumulator
        starts the next rollout."""
        steps = _np.empty(self._capacity, self.dtype)
        ends = _np.empty(self._capacity, _np.uint8)
        once = (_np.zeros((), self.once_dtype)
                if self.once_dtype is not None else None)
        n, tid = self._build(steps, ends, once)
        return {"steps": steps[:n], "ends": ends[:n], "once": once, "id": tid}

    def add_to(self, buffer: ReplayBuffer) -> "_Added":
        """Build the rollout and add it to buffer as one trajectory
        (per_buffer_add_steps straight from the accumulator: no copy of
        the steps). Returns {"n": steps added, "once": the once record or
        None, "id": its number here}."""
        once = (_np.zeros((), self.once_dtype)
                if self.once_dtype is not None else None)
        n, tid = self._add_to(buffer, once)
        return {"n": n, "once": once, "id": tid}


# ---------------------------------------------------------------------------
# TrajectoryAccumulator: a rollout at several named timescales
# ---------------------------------------------------------------------------

_optree: _t.Any
try:  # optional: any pytree optree knows, below the top level
    _optree = _importlib.import_module("optree")
except ImportError:  # plain dicts, lists and tuples
    _optree = None

_Tree = _t.Any


def _dict_keys(d: _t.Dict[_t.Any, _t.Any]) -> _t.List[_t.Any]:
    """A dict's keys in flatten order: sorted (as optree sorts them), or
    as they are when they do not sort."""
    try:
        return sorted(d)
    except TypeError:
        return list(d)


def _plain_flatten(tree: _Tree, path: _t.Tuple[_t.Any, ...] = ()
                   ) -> _t.List[_t.Tuple[_t.Tuple[_t.Any, ...], _t.Any]]:
    """(path, leaf) of a tree of dicts (keys sorted), lists and tuples."""
    if isinstance(tree, dict):
        return [pl for k in _dict_keys(tree)
                for pl in _plain_flatten(tree[k], path + (k,))]
    if isinstance(tree, (list, tuple)):
        return [pl for i, v in enumerate(tree)
                for pl in _plain_flatten(v, path + (i,))]
    return [(path, tree)]


def _plain_unflatten(tree: _Tree, leaves: _t.Iterator[_t.Any]) -> _Tree:
    """tree's structure (the example's) with `leaves` in _plain_flatten's
    order."""
    if isinstance(tree, dict):
        out = {k: _plain_unflatten(tree[k], leaves) for k in _dict_keys(tree)}
        return {k: out[k] for k in tree}  # the example's key order
    if isinstance(tree, (list, tuple)):
        items = [_plain_unflatten(v, leaves) for v in tree]
        if isinstance(tree, tuple):
            return (type(tree)(*items) if hasattr(tree, "_fields")
                    else tuple(items))
        return items
    return next(leaves)


class _Scale:
    """One timescale of a TrajectoryAccumulator: its leaves, their
    fields, its record dtype and the tree of views build() returns."""

    def __init__(self, name: str, index: int, sub: _Tree) -> None:
        self.name, self.index = name, index
        if _optree is not None:
            leaves, self.spec = _optree.tree_flatten(sub)
            self.paths: _t.List[_t.Tuple[_t.Any, ...]] = [
                tuple(p) for p in _optree.tree_paths(sub)]
        else:
            flat = _plain_flatten(sub)
            self.spec = None
            self.paths = [p for p, _ in flat]
            leaves = [v for _, v in flat]
        self.example = sub
        self.labels = ["/".join(str(k) for k in p) if p else "(the leaf)"
                       for p in self.paths]
        where = f"TrajectoryAccumulator: timescale {name!r}"
        if not leaves:
            raise ValueError(f"{where} has no leaves")
        arrays = []
        for label, leaf in zip(self.labels, leaves):
            a = _np.asarray(leaf)
            if a.dtype.kind not in "biuf" or a.dtype.byteorder == ">":
                raise TypeError(f"{where}: leaf {label!r} has dtype {a.dtype}; "
                                f"leaves are bool, integer or float arrays")
            arrays.append(a)
        single = any(a.ndim == 0 for a in arrays) or all(
            a.shape[0] == 1 for a in arrays)
        if single:
            self.capacity = 1
            shapes = [a.shape for a in arrays]
        else:
            lead = {a.shape[0] for a in arrays}
            if len(lead) != 1:
                dims = ", ".join(f"{lb!r}: {a.shape[0]}"
                                 for lb, a in zip(self.labels, arrays))
                raise ValueError(
                    f"{where}: the leaves of a buffered timescale share "
                    f"their leading dim (its capacity), but they differ "
                    f"({dims}); for a single-item timescale make one leaf "
                    f"0-d or give every leaf a leading dim of 1")
            self.capacity = lead.pop()
            shapes = [a.shape[1:] for a in arrays]
        self.single = single
        self.dtypes = [a.dtype for a in arrays]
        self.shapes = shapes
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"{where}: two leaves have the path "
                             f"{next(x for x in self.labels if self.labels.count(x) > 1)!r}")
        self.first = 0  # its first field's index in the accumulator
        self.ends: _t.Optional[_Array] = None  # buffered: its episode ends
        self.dtype: _DType = _np.dtype({
            "names": self.labels,
            "formats": [(_np.dtype(d.str), s) if s else _np.dtype(d.str)
                        for d, s in zip(self.dtypes, shapes)]})
        # a flat dict of leaves: add() copies them in C when they are
        # exactly of their leaf's dtype and shape
        self.keys = (tuple(p[0] for p in self.paths)
                     if isinstance(sub, dict) and all(
                         len(p) == 1 and isinstance(p[0], str)
                         for p in self.paths) else None)

    def flatten(self, tree: _Tree, call: str) -> _t.List[_t.Any]:
        """tree's values at the example's leaves, in this timescale's
        order (a value there may be anything array-like: a list is one
        leaf's value, not a subtree); ValueError naming the difference
        when tree's containers are not the example's."""
        if _optree is not None:
            try:
                return list(self.spec.flatten_up_to(tree))
            except (ValueError, TypeError) as e:
                why = str(e)
        else:
            out: _t.List[_t.Any] = []
            why = self._up_to(self.example, tree, (), out)
            if not why:
                return out
        raise ValueError(f"{call}: timescale {self.name!r} takes a tree "
                         f"shaped as the example's (leaves {self.labels}): "
                         f"{why}")

    @classmethod
    def _up_to(cls, ex: _Tree, tree: _Tree, path: _t.Tuple[_t.Any, ...],
               out: _t.List[_t.Any]) -> str:
        """Append tree's values at ex's leaves to out (_plain_flatten's
        order); "" or what differs."""
        where = "/".join(str(k) for k in path) or "the top"
        if isinstance(ex, dict):
            if not isinstance(tree, dict):
                return f"at {where}, a {type(tree).__name__} for a dict"
            if set(tree) != set(ex):
                return (f"at {where}, keys {sorted(map(str, tree))} for "
                        f"{sorted(map(str, ex))}")
            for k in _dict_keys(ex):
                why = cls._up_to(ex[k], tree[k], path + (k,), out)
                if why:
                    return why
            return ""
        if isinstance(ex, (list, tuple)):
            if not isinstance(tree, (list, tuple)) or len(tree) != len(ex):
                return (f"at {where}, {type(tree).__name__} for a "
                        f"{type(ex).__name__} of {len(ex)}")
            for i, (x, y) in enumerate(zip(ex, tree)):
                why = cls._up_to(x, y, path + (i,), out)
                if why:
                    return why
            return ""
        out.append(tree)
        return ""

    def value(self, i: int, v: _t.Any, call: str) -> _Array:
        """Leaf i's value v as the field's bytes (C order), converted by
        per's exact rule; ValueError or TypeError naming the leaf."""
        label, shape = self.labels[i], self.shapes[i]
        what = f"{call}: timescale {self.name!r}, leaf {label!r}"
        a = _np.asarray(v)
        ok = a.shape == shape or a.shape == (1,) + shape or (
            self.single and len(shape) >= 1 and shape[0] == 1
            and a.shape == shape[1:])
        if not ok:
            want = [shape, (1,) + shape] + (
                [shape[1:]] if self.single and shape[:1] == (1,) else [])
            raise ValueError(f"{what} has shape {a.shape}; it takes "
                             + " or ".join(str(w) for w in want))
        return _np.ascontiguousarray(_cast(a, self.dtypes[i], what))


class TrajectoryAccumulator(_per._Traj):
    """A rollout's data at several timescales in arrays allocated once
    (per_traj_init_spec), filled by add() and handed out by build().

    `example` is a dict whose keys name the timescales; each value is a
    pytree (nested dicts, lists and tuples; with optree installed, any
    tree optree flattens) of arrays, and its kind is inferred from the
    leaves' shapes:

    - single-item when at least one leaf is 0-d or every leaf has a
      leading dim of 1: it holds one record and add() replaces it;
    - buffered otherwise: every leaf shares a leading dim N (> 1), the
      capacity, and each add() writes the next of N records (stored[s:s+1]
      = incoming). Leaves whose leading dims differ: ValueError naming the
      timescale and the leaves.

    Leaves are bool, integer or float arrays; the example's values do not
    matter, only their dtypes and shapes. Values convert into a leaf's
    dtype only exactly (ReplayBuffer.add's rule); a buffered leaf takes
    its per-step shape (the leaf's without N) or that with a leading 1, a
    single-item leaf its own shape, with or without one leading 1.

    build() returns the filled tree (the example's structure, the same
    tree every time) whose arrays ALIAS the accumulator: the next add()
    or reset() overwrites them (and clears the single-item records and
    the episode ends), so copy or send it first. A buffered timescale
    not filled to capacity keeps older records past its count
    (built_counts says how many are this rollout's; episode_ends(name)
    their ends, set by end()). add_to() hands a buffered timescale's
    records to a ReplayBuffer as one trajectory, straight from the
    accumulator. The arrays are allocated once: build, add_to and reset
    allocate none, nor does an add of a flat dict whose values are
    exactly of their leaves' dtypes and shapes (arrays, Python floats
    and ints); other values are converted through a temporary array."""

    def __init__(self, example: _t.Mapping[str, _Tree]) -> None:
        call = "TrajectoryAccumulator"
        if not isinstance(example, dict):
            raise TypeError(f"{call}: the example must be a dict whose keys "
                            f"name the timescales, not "
                            f"{type(example).__name__}")
        if not example:
            raise ValueError(f"{call}: the example has no timescale")
        for name in example:
            if not isinstance(name, str):
                raise TypeError(f"{call}: timescale names are str, not "
                                f"{type(name).__name__} ({name!r})")
        scales = [_Scale(name, i, sub)
                  for i, (name, sub) in enumerate(example.items())]
        fields: _t.List[_t.Tuple[str, int, int, int]] = []
        for sc in scales:
            names = sc.dtype.names or ()
            sc.first = len(fields)
            for j, label in enumerate(names):
                cname = label if len(label.encode()) <= 63 else f"#{j}"
                fields.append((cname, sc.index,
                               _config.field(sc.dtype, label)[1],
                               sc.dtype[label].itemsize))
        super().__init__(0, 0, 0, fields,
                         [(sc.name, 1 if sc.single else 0, sc.capacity,
                           sc.dtype.itemsize) for sc in scales])
        # the block's views keep its memory alive, not the accumulator
        mem: _t.Any = self._memory()
        block = _np.frombuffer(mem, _np.uint8)
        self._scales = {sc.name: sc for sc in scales}
        self._order = scales
        views: _t.Dict[str, _Tree] = {}
        for sc in scales:
            at = self._offset(sc.index)
            recs = block[at:at + sc.capacity * sc.dtype.itemsize].view(sc.dtype)
            leaves = []
            for label, shape in zip(sc.dtype.names or (), sc.shapes):
                col = recs[label]  # (capacity,) + shape
                leaves.append(col.reshape(shape) if sc.single else col)
            e = self._ends_offset(sc.index)
            if e >= 0:
                sc.ends = block[e:e + sc.capacity]
            if _optree is not None:
                tree = _optree.tree_unflatten(sc.spec, leaves)
            else:
                tree = _plain_unflatten(sc.example, iter(leaves))
            views[sc.name] = tree
            # the dtypes' kinds are "b", "i", "u" or "f" (_Scale checks)
            self._plan(sc.index, sc.name, sc.keys,
                       [(sc.first + j, d.kind, d.itemsize,
                         tuple(int(x) for x in shape))
                        for j, (d, shape) in enumerate(zip(sc.dtypes,
                                                           sc.shapes))])
        self._tree = views
        self.built_counts: _t.Dict[str, int] = {sc.name: 0 for sc in scales}
        self.last_id: _t.Optional[int] = None

    # add(name, tree) is _per._Traj._add_tree: the exact values of a flat
    # dict go in without Python; everything else comes to _add_slow.
    add = _per._Traj._add_tree

    def _add_slow(self, name: object, tree: _Tree) -> None:
        call = "TrajectoryAccumulator.add"
        sc = self._scale(name, call)
        self._room(sc.index)  # IndexError when full, before any value
        leaves = sc.flatten(tree, call)
        values = [sc.value(i, v, call) for i, v in enumerate(leaves)]
        self._add_leaves(sc.index, values)

    def _scale(self, name: object, call: str) -> _Scale:
        if not isinstance(name, str):
            raise TypeError(f"{call}: a timescale's name is a str, not "
                            f"{type(name).__name__}")
        sc = self._scales.get(name)
        if sc is None:
            raise ValueError(f"{call}: unknown timescale {name!r}; the "
                             f"timescales are {list(self._scales)}")
        return sc

    @property
    def timescales(self) -> _t.Dict[str, _t.Dict[str, _t.Any]]:
        """Each timescale's kind ("buffered" or "single"), capacity and
        record dtype (make a ReplayBuffer for a buffered one with
        ReplayBuffer(n, acc.timescales[name]["dtype"]))."""
        return {sc.name: {"kind": "single" if sc.single else "buffered",
                          "capacity": sc.capacity, "dtype": sc.dtype}
                for sc in self._order}

    def count(self, name: str) -> int:
        """Records added to timescale `name` since the last build or reset
        (a single-item one: 1 once added, else 0)."""
        return int(self._count(self._scale(name, "TrajectoryAccumulator.count").index))

    def end(self, end: int, name: _t.Optional[str] = None) -> None:
        """The episode end (END_NONE, END_TERMINATED or END_TRUNCATED) of
        the last record of buffered timescale `name` (default: the first
        buffered one); add_to hands the ends to the buffer."""
        sc = self._buffered(name, "TrajectoryAccumulator.end")
        self._end_at(sc.index, _count(end, "TrajectoryAccumulator.end: end", 8))

    def episode_ends(self, name: _t.Optional[str] = None) -> _Array:
        """The episode ends (uint8, END_*) of buffered timescale `name`
        (default: the first buffered one), one per record: a view that
        aliases the accumulator as build()'s tree does (read it after
        build() with built_counts[name] records of this rollout; the next
        add or reset clears it)."""
        sc = self._buffered(name, "TrajectoryAccumulator.episode_ends")
        assert sc.ends is not None
        return sc.ends

    def _buffered(self, name: _t.Optional[str], call: str) -> _Scale:
        if name is None:
            for sc in self._order:
                if not sc.single:
                    return sc
            raise ValueError(f"{call}: no buffered timescale")
        sc = self._scale(name, call)
        if sc.single:
            raise ValueError(f"{call}: timescale {name!r} is single-item, "
                             f"not buffered")
        return sc

    def build(self) -> _t.Dict[str, _Tree]:
        """The filled tree, every timescale (views that alias the
        accumulator: valid until the next add or reset); then the counters
        start over. built_counts says how many records of each timescale
        this rollout filled, last_id its number (0, 1, ...)."""
        self._built(self._build_parts())
        return self._tree

    def _built(self, tid: int) -> None:
        """After a build: its id, and each timescale's records in it."""
        self.last_id = tid
        for sc in self._order:
            self.built_counts[sc.name] = self._part_n(sc.index)

    def add_to(self, buffer: "ReplayBuffer", step: _t.Optional[str] = None,
               once: _t.Optional[_t.Sequence[str]] = None
               ) -> _t.Dict[str, _t.Any]:
        """Build the rollout and add buffered timescale `step` (default:
        the first buffered one) to buffer as one trajectory, with its
        episode ends (per_buffer_add_steps straight from the
        accumulator: no copy). The buffer's items must be the
        timescale's records: ReplayBuffer(n, acc.timescales[step]["dtype"]).
        Returns {"n": records added, "id": the rollout's number here,
        "once": {name: tree}} with the single-item timescales named in
        `once` (default: every one), views as build()'s."""
        call = "TrajectoryAccumulator.add_to"
        sc = self._buffered(step, call)
        names = ([s.name for s in self._order if s.single] if once is None
                 else [self._scale(n, call).name for n in once])
        multi = [n for n in names if not self._scales[n].single]
        if multi:
            raise ValueError(f"{call}: once names single-item timescales; "
                             f"{multi[0]!r} is buffered")
        if not isinstance(buffer, ReplayBuffer):
            raise TypeError(f"{call}: buffer must be a per.ReplayBuffer, not "
                            f"{type(buffer).__name__}")
        if buffer.dtype != sc.dtype:
            raise ValueError(f"{call}: the buffer's items are {buffer.dtype}, "
                             f"timescale {sc.name!r}'s records {sc.dtype}")
        n, tid = self._add_part(buffer, sc.index)
        self._built(tid)
        return {"n": n, "id": tid,
                "once": {k: self._tree[k] for k in names}}


# ---------------------------------------------------------------------------
# The trajectory store (per_store.h): replay larger than RAM
# ---------------------------------------------------------------------------

#: TrajectoryStore's config keywords: ReplayBuffer's but the sequence
#: ones (a store draws samples, not sequences).
_STORE_KEYS: _t.Tuple[_config.Key, ...] = tuple(
    k for k in _config.REPLAY_KEYS
    if k.name not in ("seq_len", "seq_stride", "seq_eta", "cross_episodes"))
#: TrajectoryReplayBuffer's: the same but seed, its first argument.
_TRB_KEYS: _t.Tuple[_config.Key, ...] = tuple(
    k for k in _STORE_KEYS if k.name != "seed")


class _TrbKeywords(_t.TypedDict, total=False):
    alpha: float
    beta0: float
    beta1: float
    beta_steps: int
    eps: float
    max_priority: float
    weights_buffer_max: bool
    max_unique: _t.Optional[int]
    live_max: bool


class _StoreKeywords(_TrbKeywords, total=False):
    seed: int


def _host(v: object) -> object:
    """A PyTorch tensor as a NumPy array on the host (detached, copied
    from its device); anything else as it is, for np.asarray."""
    if type(v).__module__.split(".")[0] == "torch" and hasattr(v, "detach"):
        return _t.cast(_t.Any, v).detach().cpu().numpy()
    return v


def _store_dtype(spec: _t.Union[_DTypeLike, _t.Mapping[str, object]],
                 call: str) -> _DType:
    """A store's sample dtype: a structured dtype as it is, or from a dict
    of field name -> example value of one sample (its dtype and shape make
    the field), packed, in the dict's order."""
    if isinstance(spec, _t.Mapping):
        if not spec:
            raise ValueError(f"{call}: the spec has no field")
        fields: _t.Dict[str, _Array] = {}
        for name, v in spec.items():
            if not isinstance(name, str):
                raise TypeError(f"{call}: field names are str, not "
                                f"{type(name).__name__} ({name!r})")
            a = _np.asarray(_host(v))
            if a.dtype.hasobject:
                raise TypeError(f"{call}: field {name!r} takes an example "
                                "value of one sample (np.zeros(shape, "
                                f"dtype)), not {v!r}")
            fields[name] = a
        return _item_dtype(fields)
    dt = _np.dtype(_t.cast(_DTypeLike, spec))
    if dt.names is None:
        raise TypeError(f"{call}: the spec is a structured dtype (named "
                        f"fields) or a dict of example values, not {dt}")
    return _item_dtype(dt)


def _store_writer(store: "_per._Store", errors: _t.List[BaseException]) -> None:
    """A TrajectoryStore's writer thread: run_writer (the GIL released)
    until stop_writer or close; its error kept for writer_error."""
    try:
        store.run_writer()
    except BaseException as e:  # kept, not lost in the thread
        errors.append(e)


def _join_writer(store: "_per._Store", t: _threading.Thread) -> None:
    """Stop the writer and wait for its thread (which may not have reached
    run_writer yet: then the next round stops it)."""
    while t.is_alive():
        store.stop_writer()
        t.join(0.005)


def _store_close(store: "_per._Store",
                 threads: _t.List[_threading.Thread]) -> None:
    """TrajectoryStore.close, also its finalizer (garbage collection, the
    interpreter's exit): the writer stopped, the store freed."""
    for t in threads:
        _join_writer(store, t)
    threads.clear()
    store.close()


def _segment_names(directory: str) -> _t.List[str]:
    """The segment files the checkpoint in a store's directory names
    (docs/FORMAT.md, "The trajectory store"): index.bin's table (S at
    offset 52, 80-byte rows from 128, each a NUL-padded 64-byte name
    first) or, when index.log continues that index.bin, the table of its
    last record (the same header and rows, 24 bytes into the record).
    Read right after a checkpoint, the log has no record cut short."""
    index = _os.path.join(directory, "index.bin")
    with open(index, "rb") as f:
        data = f.read()
    if len(data) < 132 or data[:8] != b"\x89PERSTO\n":
        raise _error("PER_ERR_FORMAT", f"{index} is not a store's index")
    table, base = data, 0
    try:
        with open(_os.path.join(directory, "index.log"), "rb") as f:
            log = f.read()
    except FileNotFoundError:
        log = b""
    if (len(log) >= 64 and log[:8] == b"\x89PERLOG\n"
            and log[16:32] == data[24:40] and log[32:40] == data[40:48]):
        (seq,) = _struct.unpack_from("<Q", data, 40)
        at = 64
        while at + 28 <= len(log):
            magic, _, rseq, size = _struct.unpack_from("<IIQQ", log, at)
            if magic != 0x474F4C50 or rseq != seq + 1 or \
                    size > len(log) - at - 28:
                break
            table, base, seq = log, at + 24, rseq
            at += (size + 28 + 7) & ~7
    (nseg,) = _struct.unpack_from("<I", table, base + 52)
    names = []
    for i in range(nseg):
        row = base + 128 + 80 * i
        names.append(table[row:row + 64].split(b"\0", 1)[0].decode("ascii"))
    return names


def _fsync(path: str) -> None:
    fd = _os.open(path, _os.O_RDONLY)
    try:
        _os.fsync(fd)
    finally:
        _os.close(fd)


def _put_file(src: str, dst: str, segment: bool) -> None:
    """dst replaced by src's file, under a temporary name then renamed: a
    segment file hard-linked where the file system allows, else copied
    (shutil.copy2, synced) unless dst is already its copy (the same size
    and modification time: a segment is only ever appended to); the
    other files copied."""
    try:
        if _os.path.samefile(src, dst):
            return
        a, b = _os.stat(src), _os.stat(dst)
        if segment and (a.st_size, a.st_mtime_ns) == (b.st_size, b.st_mtime_ns):
            return
    except FileNotFoundError:
        pass
    tmp = f"{dst}.tmp-{_os.getpid()}-{_threading.get_ident()}"
    if _os.path.lexists(tmp):
        _os.remove(tmp)
    try:
        if not segment:
            raise OSError("copied")
        _os.link(src, tmp)
    except OSError:
        _shutil.copy2(src, tmp)
        _fsync(tmp)
    _os.replace(tmp, dst)


def _export_store(src: str, dst: str) -> None:
    """Make dst a loadable copy of the store checkpoint in src: its
    segment files hard-linked (copied across file systems), then the JSON
    files, then index.log, then index.bin last (until then dst holds
    what it held); segment files of an earlier export that the new
    checkpoint does not name are removed after."""
    _os.makedirs(dst, exist_ok=True)
    names = _segment_names(src)
    old = {n for n in _os.listdir(dst)
           if n.startswith("seg-") and n.endswith(".per")}
    for n in names:
        _put_file(_os.path.join(src, n), _os.path.join(dst, n), True)
    if not _os.path.exists(_os.path.join(src, "index.log")) and \
            _os.path.exists(_os.path.join(dst, "index.log")):
        _os.remove(_os.path.join(dst, "index.log"))
    for n in ("trajectory_index.json", "metadata.json", "index.log",
              "index.bin"):
        if n == "index.bin" or _os.path.exists(_os.path.join(src, n)):
            _put_file(_os.path.join(src, n), _os.path.join(dst, n), False)
    for n in old - set(names):
        _os.remove(_os.path.join(dst, n))
    _fsync(dst)


def _same_dir(a: str, b: str) -> bool:
    try:
        return _os.path.samefile(a, b)
    except OSError:
        return False


class TrajectoryStore:
    """A prioritized replay whose samples live on disk (per_store.h): the
    trajectories in segment files under directory `path`, their
    priorities and places in memory, so that the replay may be far larger
    than RAM. It draws what a per.ReplayBuffer of the same config given
    the same samples draws (ids, weights and samples, bit for bit).

    `spec` describes one sample: a structured dtype, or a dict of field
    name -> example value of one sample (anything np.asarray takes; its
    dtype and shape make the field, its values do not matter). The
    sample's record (`dtype`) holds the fields packed, in the spec's
    order. `capacity` is in samples; the store evicts the oldest samples
    first, as ReplayBuffer does. The keywords after it are per_config's
    (ReplayBuffer's, but the sequence ones) with the C defaults;
    `cache_bytes` (default 256 MiB: written trajectories kept in memory,
    the newest), `staging_bytes` (64 MiB: trajectories not written yet; a
    trajectory needs item_size + 1 bytes a sample there, rounded up to 8)
    and `segment_bytes` (1 GiB: a segment file's size) size the memory
    and the files; None takes the default. `path` is made if missing (its
    parent must exist) and must not hold a store unless `resume`: then the
    store in it is loaded (its checkpoint's config, capacity and dtype
    must be this one's).

    With `writer` (default) a daemon thread writes the staged
    trajectories to disk in the background, the GIL released: an add
    copies its rollout and returns, and waits only when staging_bytes
    are full (add_trajectories(..., nowait=True) raises per.Error
    PER_ERR_BUSY instead). Without it, adds write the oldest staged
    trajectories themselves when staging is full, and flush() writes
    them all. Every call holds the store's own lock and releases the GIL
    while it does I/O, so Python threads may share a store. close() (also
    `with`, garbage collection and the interpreter's exit) stops the
    writer and frees the memory; the files stay, and a closed store
    refuses every call with ValueError. Staged trajectories that no
    checkpoint wrote are not written then: save_checkpoint() first to
    keep them.

    A failed call raises per.Error and leaves the store as it was;
    arguments of the wrong type, range or shape raise TypeError,
    OverflowError or ValueError naming the call and the field, before
    anything changes."""

    def __init__(self, path: _PathArg,
                 spec: _t.Union[_DTypeLike, _t.Mapping[str, object]], *,
                 capacity: int, cache_bytes: _t.Optional[int] = None,
                 staging_bytes: _t.Optional[int] = None,
                 segment_bytes: _t.Optional[int] = None,
                 resume: bool = False, writer: bool = True,
                 **config: "_Unpack[_StoreKeywords]") -> None:
        call = "TrajectoryStore"
        if not hasattr(_per, "_Store"):
            raise NotImplementedError(f"{call}: per_store.h is POSIX only; "
                                      "this build has no store")
        _config.check_keywords("TrajectoryStore.__init__", config, _STORE_KEYS)
        dt = _store_dtype(spec, call)
        capacity = _count(capacity, f"{call}: capacity")
        self._path = _os.fspath(path)
        self._dtype: _DType = dt
        # whether the fields leave bytes of a sample uncovered (zeroed)
        self._gaps = sum(dt[n].itemsize for n in dt.names or ()) != \
            dt.itemsize
        self._store = _per._Store(
            self._path,
            _config.c_config(call, _STORE_KEYS, config,
                             {"capacity": capacity, "item_size": dt.itemsize}),
            cache_bytes, staging_bytes, segment_bytes, _layout_of(dt),
            bool(resume))
        self._capacity = capacity
        self._errors: _t.List[BaseException] = []
        self._threads: _t.List[_threading.Thread] = []
        self._ckpt_lock = _threading.Lock()
        self._finalizer = _weakref.finalize(self, _store_close, self._store,
                                            self._threads)
        if writer:
            self._start_writer()

    # -- the writer thread -------------------------------------------------

    def _start_writer(self) -> None:
        t = _threading.Thread(target=_store_writer,
                              args=(self._store, self._errors),
                              name="per-store-writer", daemon=True)
        t.start()
        self._threads[:] = [t]

    def _stop_writer(self) -> bool:
        """Stop and join the writer thread; whether one was running."""
        ran = any(t.is_alive() for t in self._threads)
        for t in self._threads:
            _join_writer(self._store, t)
        self._threads.clear()
        return ran

    @property
    def writer_error(self) -> _t.Optional[BaseException]:
        """The error that stopped the writer thread (per.Error, an I/O
        error naming the file), or None. The trajectory it could not write
        stays staged; adds then write themselves and report the error if
        it persists."""
        return self._errors[0] if self._errors else None

    # -- adding ------------------------------------------------------------

    def _rollout(self, rollout: _t.Mapping[str, object], call: str
                 ) -> _t.Tuple[_t.List[_t.Tuple[_Array, int, int]], int, int]:
        """A rollout's fields as the store's add_fields takes them: per
        field, its T * B values (sample t * B + b) as a C-contiguous
        array of the spec's type, its byte offset in a sample and its
        bytes; then T, B. The store assembles the samples in its staging
        area from these (one copy). Nothing is added here: a refusal
        leaves the store as it was."""
        dt = self._dtype
        names = dt.names or ()
        got = set(rollout.keys())
        if got != set(names):
            raise ValueError(f"{call}: keys do not match the spec: missing "
                             f"{sorted(set(names) - got)}, unknown "
                             f"{sorted(map(str, got - set(names)))}")
        lead: _t.Optional[_t.Tuple[int, int]] = None
        first = ""
        conv = {}
        for name in names:
            base, fshape = dt[name].base, dt[name].shape
            v = _np.asarray(_host(rollout[name]))
            want = "(T, B" + "".join(f", {d}" for d in fshape) + ")"
            if v.ndim != 2 + len(fshape) or v.shape[2:] != fshape:
                raise ValueError(f"{call}: field {name!r} has shape {v.shape}; "
                                 f"a rollout's is {want}")
            if lead is not None and v.shape[:2] != lead:
                raise ValueError(f"{call}: field {first!r} has (T, B) = {lead}, "
                                 f"field {name!r} {v.shape[:2]}")
            lead, first = (v.shape[0], v.shape[1]), first or name
            conv[name] = _cast(v, base, f"{call}: field {name!r}")
        assert lead is not None and dt.fields is not None
        T, B = lead
        fields = []
        for name, v in conv.items():
            size = dt[name].itemsize
            if size:
                fields.append((_np.ascontiguousarray(v).reshape(-1),
                               dt.fields[name][1], size))
        return fields, T, B

    @staticmethod
    def _ends(ends: _t.Optional[_ArrayLike], T: int, B: int,
              call: str) -> _t.Optional[_Array]:
        if ends is None:
            return None
        ea = _np.asarray(_host(ends))
        if ea.shape != (T, B):
            raise ValueError(f"{call}: ends has shape {ea.shape}; the "
                             f"rollout's (T, B) is {(T, B)}")
        if ea.dtype.kind == "b":
            return _np.where(ea, END_TERMINATED, END_NONE).astype(
                _np.uint8).reshape(-1)
        if ea.dtype.kind not in "iu":
            raise TypeError(f"{call}: ends must be END_* integers or bools, "
                            f"not {ea.dtype}")
        if ea.size and (ea.min() < 0 or ea.max() > 255):
            raise _error("PER_ERR_ARG", f"{call}: an end is not an END_* value")
        return _np.ascontiguousarray(ea, dtype=_np.uint8).reshape(-1)

    @_t.overload
    def add_trajectories(self, rollout: _t.Mapping[str, object], *,
                         ends: _t.Optional[_ArrayLike] = None,
                         nowait: bool = False) -> int: ...

    @_t.overload
    def add_trajectories(self, rollout: _t.Sequence[_t.Mapping[str, object]],
                         *, ends: _t.Optional[_t.Sequence[
                             _t.Optional[_ArrayLike]]] = None,
                         nowait: bool = False) -> _t.List[int]: ...

    def add_trajectories(self, rollout: _t.Any, *, ends: _t.Any = None,
                         nowait: bool = False) -> _t.Any:
        """Add a rollout as ONE trajectory: a dict with exactly the spec's
        keys, each an array [T, B, *field_shape] (anything np.asarray
        takes; PyTorch tensors are copied to the host), T and B alike for
        every field. Its T * B samples are stored flattened t-major
        (sample t * B + b: step t of environment b), as seed 002's
        TrajectoryReplayBuffer keeps a rollout: one contiguous write per
        rollout, windows that count rollouts, the (T, B) shape kept in the
        index (trajectory(id)["shape"]). ends: None, or a [T, B] array of
        per.END_* codes or of bools (True: terminated). Values convert
        into the fields by ReplayBuffer.add's exact rule.

        A list of such dicts adds each as one trajectory (ends then None
        or a list of as many); every rollout is checked before the first
        is added. Returns the trajectory id (a list of them for a list),
        0, 1, ... in add order.

        Errors: ValueError for keys that are not the spec's (it names the
        missing and the unknown ones), a field whose trailing shape is not
        the spec's or whose (T, B) is not the other fields', ends of
        another shape, and a value that would change in the conversion;
        TypeError for a value of a kind that does not convert; per.Error
        from the store for the rest (PER_ERR_ARG: T or B 0, more samples
        than capacity or a trajectory larger than staging_bytes, an end
        that is not an END_*; PER_ERR_BUSY with nowait when staging is
        full; PER_ERR_IO when a write to make room failed). Nothing is
        added by a call that raises, but for the rollouts of a list added
        before the one that failed in the store."""
        call = "TrajectoryStore.add_trajectories"
        if isinstance(rollout, _t.Mapping):
            rec, T, B = self._rollout(rollout, call)
            e = self._ends(ends, T, B, call)
            return self._store.add_fields(rec, T, B, e, bool(nowait),
                                          self._gaps)
        if not isinstance(rollout, (list, tuple)):
            raise TypeError(f"{call}: a rollout is a dict of arrays (or a "
                            f"list of them), not {type(rollout).__name__}")
        if ends is not None and (not isinstance(ends, (list, tuple))
                                 or len(ends) != len(rollout)):
            raise ValueError(f"{call}: {len(rollout)} rollouts take None or a "
                             "list of as many ends")
        parts = []
        for i, r in enumerate(rollout):
            if not isinstance(r, _t.Mapping):
                raise TypeError(f"{call}: rollout {i} is a "
                                f"{type(r).__name__}, not a dict of arrays")
            rec, T, B = self._rollout(r, f"{call}: rollout {i}")
            e = self._ends(None if ends is None else ends[i], T, B,
                           f"{call}: rollout {i}")
            parts.append((rec, T, B, e))
        return [self._store.add_fields(rec, T, B, e, bool(nowait),
                                       self._gaps)
                for rec, T, B, e in parts]

    def flush(self) -> None:
        """Write every staged trajectory now, on this thread
        (per_store_write); per.Error PER_ERR_IO names the file if a write
        fails (the trajectory stays staged)."""
        self._store.write()

    # -- sampling ----------------------------------------------------------

    def sample(self, num_chunks: int, *, unique: bool = False,
               beta: _t.Optional[float] = None, window: int = 0,
               trajectories: bool = True) -> _t.Dict[str, _Array]:
        """Draw num_chunks samples (per_store_sample, as
        ReplayBuffer.sample draws): a dict of the spec's fields, each a
        contiguous array [num_chunks, *field_shape], and "ids" (uint64,
        for update) and "weights" (float32 IS weights, max 1). unique:
        distinct samples; beta: this beta instead of the schedule's;
        window: only the newest `window` trajectories (seed 002's
        sample_window_size; 0: all), or samples with trajectories=False.
        Samples in memory are copied, the others read from their segment
        files (each once, in file order) with the GIL released."""
        call = "TrajectoryStore.sample"
        B = _count(num_chunks, f"{call}: num_chunks")
        w = _count(window, f"{call}: window")
        b = None if beta is None else _real(beta, f"{call}: beta")
        items, ids, weights = self._store.sample(B, bool(unique), b, w,
                                                 bool(trajectories))
        rec = _np.frombuffer(items, self._dtype)
        out = {name: _np.ascontiguousarray(rec[name])
               for name in self._dtype.names or ()}
        out["ids"] = _np.frombuffer(ids, _np.uint64)
        out["weights"] = _np.frombuffer(weights, _np.float32)
        return out

    def update(self, ids: _ArrayLike, td_errors: _ArrayLike) -> int:
        """Priorities (|td| + eps)^alpha for the sampled ids
        (per_store_update; td rounded to float32), td_errors of ids' shape
        (1-D). Returns how many ids were stale (evicted since the draw).
        per.Error PER_ERR_NAN or PER_ERR_INF for a td that is not finite,
        nothing updated."""
        call = "TrajectoryStore.update"
        i = _vector(ids, f"{call}: ids")
        t = _np.asarray(td_errors)
        if t.shape != i.shape:
            raise ValueError(f"{call}: td_errors has shape {t.shape}; "
                             f"{i.shape[0]} ids take shape {i.shape}")
        return self._store.update(_indices(i, f"{call}: ids", 64),
                                  _floats(t, f"{call}: td_errors", _np.float32))

    # -- checkpoints ---------------------------------------------------------

    def save_checkpoint(self, path: _t.Optional[_PathArg] = None) -> None:
        """Checkpoint the store in its own directory (per_store_checkpoint:
        the staged trajectories written, the segments synced, a record of
        what changed appended to index.log (index.bin replaced atomically
        when the log has outgrown it), then trajectory_index.json and
        metadata.json; its cost is what changed, not the data). With a
        path other than the store's directory, then export it there (made
        if missing): the segment files the checkpoint names are
        hard-linked into path (copied where path is on another file
        system), the four index files copied, index.bin last, so that
        path is a store that load_checkpoint or TrajectoryStore(path, ...,
        resume=True) takes. path must be a new or empty directory or an
        earlier export (whose files are replaced)."""
        with self._ckpt_lock:
            self._store.checkpoint(True)
            if path is None:
                return
            dst = _os.fspath(path)
            if not _same_dir(dst, self._path):
                _export_store(self._path, dst)

    def load_checkpoint(self, path: _PathArg, *, rank: int = 0,
                        world_size: int = 1, quick: bool = False) -> None:
        """Replace the store's contents with the checkpoint in directory
        path (its own or another store's; per_store_load): all of it, or
        with world_size > 1 the trajectories whose id is rank mod
        world_size, with the global counters. Everything is checked first
        (index.bin's CRC, every taken trajectory's header, length and,
        unless quick, its data's CRC-32C, the config and dtype as
        ReplayBuffer.load checks them); on error the store is as it was.
        Segment files of another directory are hard-linked (or copied)
        into this one. Staged trajectories are dropped with the rest."""
        call = "TrajectoryStore.load_checkpoint"
        self._store.load(_os.fspath(path), _count(rank, f"{call}: rank"),
                         _count(world_size, f"{call}: world_size"),
                         bool(quick))

    # -- state -------------------------------------------------------------

    def __len__(self) -> int:
        """Samples stored."""
        return self._store.size

    def stats(self) -> _t.Dict[str, int]:
        """per_store_stats: trajectories and samples stored, added in all
        (added_trajectories is the next id), disk_bytes and segments,
        staged_bytes and staged_trajectories (not written yet),
        cached_bytes, cache_hits and cache_misses (samples copied from
        memory, read from disk), reads and read_bytes, written_trajectories
        and written_bytes, waits (adds that waited for room), busy (adds
        refused with PER_ERR_BUSY) and checkpoints."""
        return self._store.stats()

    def trajectory(self, id: int) -> _t.Dict[str, _t.Any]:
        """The stored trajectory `id` as the index has it: id, uuid (str),
        num_samples, shape (T, B), max_episode_length (the longest run of
        one environment's steps up to an end), live (samples still
        stored), written (in a segment file), cached (in memory).
        per.Error PER_ERR_INDEX when no stored trajectory has that id."""
        return self._store.trajectory(id)

    def check(self) -> None:
        """Check the store's invariants (per_store_check; tests, tools):
        the writer thread is stopped for it and started again."""
        ran = self._stop_writer()
        try:
            self._store.check()
        finally:
            if ran and not self._store.closed:
                self._start_writer()

    @property
    def path(self) -> str:
        """The store's directory."""
        return self._path

    @property
    def dtype(self) -> _DType:
        """One sample's record: the spec's fields, packed."""
        return self._dtype

    @property
    def spec(self) -> _t.Dict[str, _t.Tuple[_DType, _t.Tuple[int, ...]]]:
        """Each field's (dtype, shape) in a sample."""
        dt = self._dtype
        return {n: (dt[n].base, dt[n].shape) for n in dt.names or ()}

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def closed(self) -> bool:
        return self._store.closed

    def close(self) -> None:
        """Stop the writer thread and free the memory (per_store_free);
        the files stay. Trajectories still staged are not written:
        save_checkpoint() first to keep them. Later calls raise ValueError;
        close() again does nothing."""
        self._finalizer()

    def __enter__(self) -> "TrajectoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return f"per.TrajectoryStore({self._path!r}, closed)"
        st = self.stats()
        return (f"per.TrajectoryStore({self._path!r}, capacity="
                f"{self._capacity}, samples={st['samples']}, trajectories="
                f"{st['trajectories']}, sample={self._dtype})")


_config.signature(TrajectoryStore.__init__, _STORE_KEYS,
                  _config.defaults(1, 1, _STORE_KEYS), _StoreKeywords)


# ---------------------------------------------------------------------------
# Seed 002's TrajectoryReplayBuffer over the store
# ---------------------------------------------------------------------------

_TRB = "TrajectoryReplayBuffer"


def _is_array(v: object) -> bool:
    """An attribute add_trajectories takes from an object: an array
    (NumPy's, a PyTorch tensor, anything with __array__ or
    __array_interface__; not a NumPy scalar)."""
    if isinstance(v, _np.generic):  # a NumPy scalar: a number
        return False
    return isinstance(v, _np.ndarray) or hasattr(v, "__array__") or hasattr(
        v, "__array_interface__")


def _trajectory_fields(traj: object, call: str,
                       torch_keys: _t.Set[str]) -> _t.Dict[str, _Array]:
    """A trajectory's arrays by field name ("a/b" for key b of dict a), on
    the host; the names of those that were PyTorch tensors added to
    torch_keys."""
    out: _t.Dict[str, _Array] = {}

    def put(name: str, v: object, strict: bool) -> None:
        if v is None:
            return
        if isinstance(v, _t.Mapping):
            for k, x in v.items():
                if not isinstance(k, str) or "/" in k or not k:
                    where = repr(name) if name else "the trajectory"
                    raise ValueError(f"{call}: key {k!r} of {where}: keys are "
                                     "non-empty str without '/' (which "
                                     "names nested keys)")
                put(f"{name}/{k}" if name else k, x, strict)
            return
        if not strict and not _is_array(v):
            return
        if type(v).__module__.split(".")[0] == "torch":
            torch_keys.add(name)
        out[name] = _np.asarray(_host(v))

    if isinstance(traj, _t.Mapping):
        put("", traj, True)
    elif _dataclasses.is_dataclass(traj) and not isinstance(traj, type):
        for f in _dataclasses.fields(traj):
            put(f.name, getattr(traj, f.name, None), False)
    elif hasattr(traj, "__dict__"):
        for k, v in vars(traj).items():
            if not k.startswith("_"):
                put(k, v, False)
    else:
        raise TypeError(f"{call}: a trajectory is a dict of arrays or an "
                        f"object with array attributes, not "
                        f"{type(traj).__name__}")
    if not out:
        raise ValueError(f"{call}: the trajectory has no array")
    return out


def _nest(flat: _t.Dict[str, _t.Any]) -> _t.Dict[str, _t.Any]:
    """{"a/b": x} as {"a": {"b": x}}."""
    out: _t.Dict[str, _t.Any] = {}
    for name, v in flat.items():
        d = out
        *outer, last = name.split("/")
        for k in outer:
            d = d.setdefault(k, {})
        d[last] = v
    return out


def _buffer_close(stores: _t.List[TrajectoryStore],
                  tmp: _t.Optional[str]) -> None:
    """TrajectoryReplayBuffer.close, also its finalizer."""
    for s in stores:
        s.close()
    if tmp is not None:
        _shutil.rmtree(tmp, ignore_errors=True)


class TrajectoryReplayBuffer:
    """Seed 002's trajectory replay (RLinf's TrajectoryReplayBuffer, with
    its name and arguments) over per.TrajectoryStore: rollouts of T steps
    of B environments are stored as they come, [T, B, ...], each one
    trajectory of T * B samples on disk, and sample(num_chunks) draws
    samples (seed 002's chunks) into a batch of the rollout's keys,
    [num_chunks, ...].

    - seed: the sampling rng's (None: a random one, kept in .seed).
    - storage_dir: the store's directory (made if missing); None: a new
      temporary directory, removed by close(). A directory that holds a
      store is resumed (its trajectories and counters), as seed 002
      reloads its metadata.
    - enable_cache, cache_size: cache_size trajectories kept in memory
      (the newest; cache_bytes from the first trajectory's size); no cache
      without enable_cache.
    - storage_format: "pt" or "pkl", accepted for seed 002's callers;
      the data are always per's own segment files (docs/FORMAT.md, "The
      trajectory store"), neither torch.save's nor pickle's. Another value
      is a ValueError.
    - sample_window_size: sample from the newest this many trajectories
      (0: all).
    - save_trajectories: False still stores the data on disk, in a
      temporary directory removed by close() (storage_dir is not used),
      and save_checkpoint raises RuntimeError: checkpoints are
      unavailable, as in seed 002.
    - capacity: samples kept (the oldest evicted first); None (the
      default): 2^20, or the checkpoint's for a buffer made by
      load_checkpoint or resumed from storage_dir;
      alpha: 0 (the default) samples uniformly, as seed 002 does; alpha >
      0 makes the replay prioritized, and then update(ids, td_errors)
      sets priorities, with the ids from sample(..., with_info=True). The
      other keywords are TrajectoryStore's: per_config's (beta0, beta1,
      beta_steps, eps, max_priority, ...), staging_bytes (default: 64 MiB
      or two trajectories, the larger), segment_bytes and writer.

    What add_trajectories takes from a trajectory: from a dict, every key
    whose value is not None; from a dataclass, its fields (from another
    object, its attributes not starting with "_") whose value is an
    array (a NumPy array, a PyTorch tensor, anything with __array__ or
    __array_interface__), others (None, numbers, strings such as a model
    weights id) skipped. A dict value, in either, is a nested dict of
    arrays: its keys become fields "outer/inner", and sample returns the
    same nesting. Every array is [T, B, ...] with the same T and B (one
    trajectory's fields may not have T + 1 rows). The store is made at
    the first add from the first trajectory's fields, dtypes and
    trailing shapes; later trajectories must have the same fields
    (ValueError naming those missing and unknown) of any T and B. sample
    returns PyTorch tensors (torch.from_numpy) for the fields added as
    tensors, NumPy arrays for the others (and for every field of a buffer
    that has only loaded).

    size, total_samples and trajectory_counter are seed 002's counters:
    trajectories stored, samples added in all, trajectories added in all
    (the next id), global over the ranks of a sharded load; len() is the
    samples stored."""

    def __init__(self, seed: _t.Optional[int] = 1234,
                 storage_dir: _t.Optional[_PathArg] = None,
                 enable_cache: bool = True, cache_size: int = 5,
                 storage_format: str = "pt", sample_window_size: int = 0,
                 save_trajectories: bool = True, *,
                 capacity: _t.Optional[int] = None,
                 staging_bytes: _t.Optional[int] = None,
                 segment_bytes: _t.Optional[int] = None, writer: bool = True,
                 **config: "_Unpack[_TrbKeywords]") -> None:
        _config.check_keywords(f"{_TRB}.__init__", config, _TRB_KEYS)
        if storage_format not in ("pt", "pkl"):
            raise ValueError(f"{_TRB}: storage_format is 'pt' or 'pkl', not "
                             f"{storage_format!r}")
        self.storage_format = storage_format
        self.seed: int = (_secrets.randbits(64) if seed is None
                          else _count(seed, f"{_TRB}: seed", 64))
        self.enable_cache = bool(enable_cache)
        self.cache_size = _count(cache_size, f"{_TRB}: cache_size")
        self.sample_window_size = _count(sample_window_size,
                                         f"{_TRB}: sample_window_size")
        self.save_trajectories = bool(save_trajectories)
        self._capacity = (None if capacity is None
                          else _count(capacity, f"{_TRB}: capacity"))
        self._staging = staging_bytes
        self._segment = segment_bytes
        self._writer = bool(writer)
        self._config: _t.Dict[str, _t.Any] = {"alpha": 0.0, **config,
                                              "seed": self.seed}
        self._tmp: _t.Optional[str] = None
        if storage_dir is None or not self.save_trajectories:
            self._tmp = _tempfile.mkdtemp(prefix="per-trajectories-")
            self.storage_dir: str = self._tmp
        else:
            self.storage_dir = _os.fspath(storage_dir)
            _os.makedirs(self.storage_dir, exist_ok=True)
        self._stores: _t.List[TrajectoryStore] = []
        self._names: _t.Optional[_t.Tuple[str, ...]] = None
        self._torch: _t.Set[str] = set()
        self._finalizer = _weakref.finalize(self, _buffer_close, self._stores,
                                            self._tmp)
        if _os.path.exists(_os.path.join(self.storage_dir, "index.bin")):
            self._store_from(self.storage_dir, resume=True)

    # -- the store ---------------------------------------------------------

    @property
    def store(self) -> _t.Optional[TrajectoryStore]:
        """The TrajectoryStore underneath (None until the first add or
        load)."""
        return self._stores[0] if self._stores else None

    def _make(self, spec: _t.Union[_DType, _t.Mapping[str, object]],
              samples: int, resume: bool,
              capacity: _t.Optional[int] = None) -> TrajectoryStore:
        """The store, for spec, sized from a trajectory of `samples`, of
        the buffer's capacity, else `capacity`, else 2^20."""
        dt = _store_dtype(spec, _TRB)
        cap = (self._capacity if self._capacity is not None
               else capacity if capacity is not None else 1 << 20)
        traj = (samples * (dt.itemsize + 1) + 7) // 8 * 8
        staging = (self._staging if self._staging is not None
                   else max(64 << 20, 2 * traj))
        store = TrajectoryStore(
            self.storage_dir, dt, capacity=cap,
            cache_bytes=self.cache_size * traj if self.enable_cache else 0,
            staging_bytes=staging, segment_bytes=self._segment,
            resume=resume, writer=self._writer, **self._config)
        self._stores.append(store)
        self._names = dt.names
        return store

    def _store_from(self, path: str, resume: bool) -> TrajectoryStore:
        """The store for the checkpoint in path, from its metadata.json
        (the sample dtype its layout names, its trajectories' mean size,
        its capacity unless the buffer was given one)."""
        meta = _os.path.join(path, "metadata.json")
        try:
            with open(meta, encoding="utf-8") as f:
                m = _json.load(f)
        except OSError as e:
            raise _error("PER_ERR_IO", f"{_TRB}: cannot read {meta}: {e}") from None
        dt = _dtype_of_layout(str(m.get("layout", "")))
        if dt is None:
            raise ValueError(f"{_TRB}: {meta} names no NumPy sample dtype "
                             "(a store written by C, or one whose dtype is "
                             "too long to keep): add a trajectory first")
        n = max(1, -(-int(m.get("total_samples", 0))
                     // max(1, int(m.get("trajectory_counter", 0)))))
        return self._make(dt, n, resume, int(m.get("capacity", 1 << 20)))

    # -- adding and sampling -------------------------------------------------

    def add_trajectories(self, trajectories: _t.Iterable[object]) -> _t.List[int]:
        """Add each trajectory (a dict of [T, B, ...] arrays or an object
        with such attributes: the class doc says what is taken) as one
        trajectory of the store, in order; returns their ids (seed 002's
        trajectory_id). Every trajectory is checked before the first is
        added; errors as TrajectoryStore.add_trajectories'."""
        call = f"{_TRB}.add_trajectories"
        if isinstance(trajectories, _t.Mapping) or not isinstance(
                trajectories, _t.Iterable):
            raise TypeError(f"{call}: takes a list of trajectories, not a "
                            f"{type(trajectories).__name__}")
        rollouts = [_trajectory_fields(t, call, self._torch)
                    for t in trajectories]
        if not rollouts:
            return []
        store = self.store
        if store is None:
            first = rollouts[0]
            bad = [k for k, v in first.items() if v.ndim < 2]
            if bad:
                raise ValueError(f"{call}: field {bad[0]!r} has shape "
                                 f"{first[bad[0]].shape}; a trajectory's "
                                 "arrays are [T, B, ...]")
            v0 = next(iter(first.values()))
            store = self._make({k: _np.zeros(v.shape[2:], v.dtype)
                                for k, v in first.items()},
                               int(v0.shape[0]) * int(v0.shape[1]), False)
        ids: _t.List[int] = store.add_trajectories(rollouts)
        return ids

    @_t.overload
    def sample(self, num_chunks: int, *,
               with_info: "_t.Literal[False]" = False) -> _t.Dict[str, _t.Any]: ...

    @_t.overload
    def sample(self, num_chunks: int, *, with_info: "_t.Literal[True]"
               ) -> _t.Tuple[_t.Dict[str, _t.Any], _Array, _Array]: ...

    def sample(self, num_chunks: int, *, with_info: bool = False) -> _t.Any:
        """num_chunks samples drawn from the newest sample_window_size
        trajectories (all for 0): a dict of the rollouts' keys, each
        [num_chunks, ...] (nested dicts as added; PyTorch tensors for the
        fields added as tensors). With alpha 0 (the default) every sample
        of the window is equally likely, as in seed 002; else by priority.
        with_info: (batch, ids, weights) instead, ids (uint64) for update
        and weights the IS weights (float32). per.Error PER_ERR_EMPTY
        when nothing is stored."""
        store = self.store
        if store is None:
            raise _error("PER_ERR_EMPTY", f"{_TRB}.sample: the buffer is empty")
        s = store.sample(num_chunks, window=self.sample_window_size,
                         trajectories=True)
        torch = _sys.modules.get("torch") if self._torch else None
        flat: _t.Dict[str, _t.Any] = {}
        for name in self._names or ():
            v = s[name]
            flat[name] = (torch.from_numpy(v)
                          if torch is not None and name in self._torch else v)
        batch = _nest(flat)
        if with_info:
            return batch, s["ids"], s["weights"]
        return batch

    def update(self, ids: _ArrayLike, td_errors: _ArrayLike) -> int:
        """The priorities of the samples drawn with ids
        (TrajectoryStore.update); returns the stale count. Needs alpha > 0
        to change what is drawn."""
        store = self.store
        if store is None:
            raise _error("PER_ERR_EMPTY", f"{_TRB}.update: the buffer is empty")
        return store.update(ids, td_errors)

    # -- checkpoints -------------------------------------------------------

    def save_checkpoint(self, path: _PathArg) -> None:
        """Checkpoint the store (TrajectoryStore.save_checkpoint) and make
        path a copy of it that load_checkpoint takes (segment files hard-
        linked). RuntimeError with save_trajectories=False (checkpoints
        are unavailable then, as in seed 002) and before anything was
        added."""
        call = f"{_TRB}.save_checkpoint"
        if not self.save_trajectories:
            raise RuntimeError(f"{call}: checkpoints are unavailable with "
                               "save_trajectories=False")
        store = self.store
        if store is None:
            raise RuntimeError(f"{call}: nothing was added: no checkpoint")
        store.save_checkpoint(path)

    def load_checkpoint(self, path: _PathArg, is_distributed: bool = False,
                        local_rank: int = 0, world_size: int = 1) -> None:
        """Replace the contents with the checkpoint in path
        (TrajectoryStore.load_checkpoint): all of it, or with
        is_distributed the shard of rank local_rank of world_size (the
        trajectories whose id is local_rank mod world_size, whole), with
        the global total_samples and trajectory_counter. A buffer to
        which nothing was added is made from the checkpoint's
        metadata.json first. The sampling state (rng, beta schedule) is
        the checkpoint's for a whole load, this buffer's for a shard."""
        p = _os.fspath(path)
        rank, world = ((local_rank, world_size) if is_distributed else (0, 1))
        store = self.store
        if store is None:
            store = self._store_from(p, resume=False)
        store.load_checkpoint(p, rank=rank, world_size=world)

    # -- state -------------------------------------------------------------

    def _stat(self, key: str) -> int:
        store = self.store
        return store.stats()[key] if store is not None else 0

    @property
    def size(self) -> int:
        """Trajectories stored (seed 002's size)."""
        return self._stat("trajectories")

    @property
    def total_samples(self) -> int:
        """Samples added in all (seed 002's total_samples)."""
        return self._stat("added_samples")

    @property
    def trajectory_counter(self) -> int:
        """Trajectories added in all: the next trajectory's id."""
        return self._stat("added_trajectories")

    def __len__(self) -> int:
        """Samples stored."""
        store = self.store
        return len(store) if store is not None else 0

    def close(self) -> None:
        """Close the store (its writer thread stopped) and remove the
        temporary directory if the buffer made one; close() again does
        nothing."""
        self._finalizer()

    def __enter__(self) -> "TrajectoryReplayBuffer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_config.signature(TrajectoryReplayBuffer.__init__, _TRB_KEYS,
                  {**_config.defaults(1, 1, _TRB_KEYS), "alpha": 0.0},
                  _TrbKeywords)
