"""per: prioritized experience replay from Python, over per.h.

The same sum tree, samplers, replay buffer and n-step adder as the C
library (double nodes), with NumPy arrays in and out. For the same config,
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
names the call and the argument ("ReplayBuffer.sample: batch_size must be
in [0, 2^32), got -1").
"""

# Everything imported here has a leading underscore, so that dir(per)
# and `from per import *` show the API (__all__) and nothing else.
import os as _os
import typing as _t

import numpy as _np

from . import _per
from ._per import Error, Rng, crc32c, status_name

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
    "NStep",
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

ItemSpec = _t.Union[_np.dtype, str, type, _t.Mapping[str, _t.Any]]


def _error(code_name: str, message: str) -> Error:
    """A per.Error like the C calls raise, for a check made here."""
    code = getattr(_per, code_name)
    e = Error(f"{code_name}: {message}")
    e.status = code
    e.name = code_name
    return e


def _indices(a: _t.Any, what: str, bits: int) -> _np.ndarray:
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


def _floats(a: _t.Any, what: str, dt: type) -> _np.ndarray:
    arr = _np.asarray(a)
    if arr.dtype.kind not in "fiub" and arr.size > 0:
        raise TypeError(f"{what} must hold numbers, not {arr.dtype}")
    return _np.ascontiguousarray(arr, dtype=dt).reshape(-1)


def _count(n: _t.Any, what: str, bits: int = 32) -> int:
    """n as an int in [0, 2^bits): else TypeError or OverflowError, with
    the messages of the extension's own checks ("Call: name must be ...")."""
    if isinstance(n, (bool, _np.bool_)) or not isinstance(n, (int, _np.integer)):
        raise TypeError(f"{what} must be an int, not {type(n).__name__}")
    if not 0 <= int(n) < 1 << bits:
        raise OverflowError(f"{what} must be in [0, 2^{bits}), got {int(n)}")
    return int(n)


def _real(x: _t.Any, what: str) -> float:
    """x as a Python float; a TypeError names the argument."""
    try:
        return float(x)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a real number, not "
                        f"{type(x).__name__}") from None


def config_default(capacity: int, item_size: int) -> _t.Dict[str, _t.Any]:
    """per_config_default(capacity, item_size) as a dict."""
    return _per.config_default(capacity, item_size)


# ---------------------------------------------------------------------------
# Sum tree and samplers
# ---------------------------------------------------------------------------


class SumTree(_per._SumTree):
    """A per_tree of `capacity` leaves (double), all 0 at first.

    set(i, v) / get(i) / total / prefix(i) / find(u) as in C; the batch
    calls take arrays. Leaf values must be finite, >= 0 and <= 1e290:
    others raise per.Error (PER_ERR_NAN, PER_ERR_INF, PER_ERR_NEGATIVE,
    PER_ERR_RANGE) with nothing written.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)

    def __len__(self) -> int:
        return self.capacity

    def set_batch(self, idx: _t.Any, val: _t.Any) -> None:
        """Leaves idx[j] = val[j]; validated first, the last duplicate
        wins (per_tree_set_batch)."""
        self._set_batch(_indices(idx, "idx", 32), _floats(val, "val", _np.float64))

    def set_range(self, first: int, val: _t.Any) -> None:
        """Leaves first + j = val[j] (per_tree_set_range)."""
        self._set_range(first, _floats(val, "val", _np.float64))

    def build(self, val: _t.Any) -> None:
        """Leaf i = val[i], the rest 0, every node recomputed
        (per_tree_build)."""
        self._build(_floats(val, "val", _np.float64))

    def values(self, idx: _t.Any = None) -> _np.ndarray:
        """The leaves idx (all `capacity` when None), as float64."""
        if idx is None:
            nodes = self.nodes()
            return nodes[self.leaves : self.leaves + self.capacity].copy()
        i = _indices(idx, "idx", 32)
        out = _np.empty(i.shape[0], _np.float64)
        self._get_into(i, out)
        return out

    def nodes(self) -> _np.ndarray:
        """A copy of the node array (2L float64, root at 1, leaves at
        [L, L + capacity)): the layout per_cuda and the C library share."""
        out = _np.empty(2 * self.leaves, _np.float64)
        self._nodes_into(out)
        return out

    def sample(self, batch_size: int, rng: Rng) -> _t.Tuple[_np.ndarray, _np.ndarray]:
        """Stratified batch (per_tree_sample): (leaf indices uint32, their
        values float64); P(i) = value / total."""
        B = _count(batch_size, "SumTree.sample: batch_size")
        idx = _np.empty(B, _np.uint32)
        val = _np.empty(B, _np.float64)
        self._sample(rng, B, idx, val)
        return idx, val

    def sample_iid(self, k: int, rng: Rng) -> _t.Tuple[_np.ndarray, _np.ndarray]:
        """k independent draws proportional to the leaves
        (per_tree_sample_iid)."""
        k = _count(k, "SumTree.sample_iid: k")
        idx = _np.empty(k, _np.uint32)
        val = _np.empty(k, _np.float64)
        self._sample_iid(rng, k, idx, val)
        return idx, val


class UniformSampler(_per._UniformSampler):
    """Uniform sampling without replacement over [0, n) by partial
    Fisher-Yates (per_swap): O(1) per draw, n grows with grow(n)."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)

    def sample(self, k: int, rng: Rng) -> _np.ndarray:
        """k distinct indices in [0, n), uniform, in random order."""
        k = _count(k, "UniformSampler.sample: k")
        out = _np.empty(k, _np.uint32)
        self._sample(rng, k, out)
        return out


class CategoricalSampler(_per._CategoricalSampler):
    """Sampling without replacement proportional to a SumTree's leaves
    (per_cat), for batches up to max_k."""

    def __init__(self, max_k: int) -> None:
        super().__init__(max_k)

    def sample(self, tree: SumTree, k: int, rng: Rng) -> _t.Tuple[_np.ndarray, _np.ndarray]:
        """k distinct leaves by successive sampling, in pick order: (indices
        uint32, values float64). The tree is unchanged afterwards."""
        k = _count(k, "CategoricalSampler.sample: k")
        idx = _np.empty(k, _np.uint32)
        val = _np.empty(k, _np.float64)
        self._sample(tree, rng, k, idx, val)
        return idx, val


# ---------------------------------------------------------------------------
# Replay buffer
# ---------------------------------------------------------------------------


def _item_dtype(item: ItemSpec) -> _np.dtype:
    """The structured dtype of one stored item. A dict maps field names to
    a dtype, a (dtype, shape) pair or an example array; a dtype without
    fields becomes the single field "item"."""
    if isinstance(item, _t.Mapping):
        fields = []
        for name, spec in item.items():
            if isinstance(spec, _np.ndarray):
                fields.append((name, spec.dtype, spec.shape))
            elif isinstance(spec, tuple) and len(spec) == 2:
                dt, shape = spec
                shape = (shape,) if isinstance(shape, (int, _np.integer)) else tuple(shape)
                fields.append((name, _np.dtype(dt), shape))
            else:
                fields.append((name, _np.dtype(spec), ()))
        if not fields:
            raise ValueError("an item needs at least one field")
        dt = _np.dtype(fields)
    else:
        dt = _np.dtype(item)
        if dt.names is None:
            dt = _np.dtype([("item", dt)])
    if dt.hasobject:
        raise TypeError("items are stored as bytes: no Python objects in the dtype")
    return dt


class ReplayBuffer(_per._Buffer):
    """A prioritized replay buffer (per_buffer) of `capacity` items.

    `item` describes one item: a structured NumPy dtype, or a dict of
    field name -> dtype, (dtype, shape) or example array. The keyword
    arguments are per_config's fields with the C defaults (alpha = 0 is
    uniform replay, 0 is a value like any other). Flags are keywords:
    weights_buffer_max (PER_WEIGHTS_BUFFER_MAX), cross_episodes
    (PER_SEQ_CROSS_EPISODES). max_unique=None takes the C default
    (min(capacity, 65536)).
    """

    def __init__(
        self,
        capacity: int,
        item: ItemSpec,
        *,
        alpha: float = 0.6,
        beta0: float = 0.4,
        beta1: float = 1.0,
        beta_steps: int = 200_000,
        eps: float = 1e-6,
        max_priority: float = 1.0,
        seed: int = 0,
        weights_buffer_max: bool = False,
        max_unique: _t.Optional[int] = None,
        seq_len: int = 0,
        seq_stride: int = 0,
        seq_eta: float = 0.9,
        cross_episodes: bool = False,
    ) -> None:
        dt = _item_dtype(item)
        capacity = _count(capacity, "ReplayBuffer: capacity")
        if max_unique is None:
            # the C default; a capacity C refuses is reported by the init
            # below, not here
            max_unique = (config_default(capacity, dt.itemsize)["max_unique"]
                          if 0 < capacity <= 2**31 else 1)
        flags = (_per.WEIGHTS_BUFFER_MAX if weights_buffer_max else 0) | (
            _per.SEQ_CROSS_EPISODES if cross_episodes else 0)
        r = "ReplayBuffer: "
        super().__init__(capacity, dt.itemsize, _real(alpha, r + "alpha"),
                         _real(beta0, r + "beta0"), _real(beta1, r + "beta1"),
                         beta_steps, _real(eps, r + "eps"),
                         _real(max_priority, r + "max_priority"), seed, flags,
                         max_unique, seq_len, seq_stride,
                         _real(seq_eta, r + "seq_eta"))
        self.dtype: _np.dtype = dt
        # fixed for the buffer's life (load refuses another capacity or
        # seq_len); kept here so sample() does not build the config dict
        cfg = self.config
        self._capacity: int = cfg["capacity"]
        self._seq_len: int = max(cfg["seq_len"], 1)

    # -- adding ------------------------------------------------------------

    def _records(self, item: _t.Any, fields: _t.Dict[str, _t.Any], batch: bool = False) -> _np.ndarray:
        """The items to add as a 1-D contiguous array of self.dtype; with
        batch, only input with a leading batch axis is taken."""
        dt = self.dtype
        if item is not None and fields:
            raise TypeError("pass the item(s) or fields as keywords, not both")
        if item is None:
            item = fields
        if isinstance(item, _t.Mapping):
            names = set(dt.names)
            got = set(item.keys())
            if got != names:
                missing, extra = sorted(names - got), sorted(got - names)
                raise ValueError(f"fields do not match the item: missing "
                                 f"{missing}, unknown {extra}")
            n = None
            values = {}
            for name in dt.names:
                v = _np.asarray(item[name])
                fshape = dt[name].shape
                if v.shape == fshape and not batch:
                    m = None
                elif v.shape[1:] == fshape and v.ndim == len(fshape) + 1:
                    m = v.shape[0]
                else:
                    raise ValueError(f"field {name!r}: shape {v.shape}, the "
                                     f"item's is {fshape}")
                if n is not None and m != n:
                    raise ValueError("fields hold different numbers of items")
                n = m
                values[name] = v
            rec = _np.empty(1 if n is None else n, dt)
            for name, v in values.items():
                rec[name] = v
            return rec
        arr = _np.asarray(item)
        if arr.dtype != dt:
            if dt.names == ("item",) and arr.dtype.names is None:
                shape = dt["item"].shape
                one = arr.shape == shape
                if batch and (one or arr.shape[1:] != shape):
                    raise ValueError(f"items: shape {arr.shape}, a batch of "
                                     f"{shape} items is (n,) + {shape}")
                rec = _np.empty(1 if one else arr.shape[0], dt)
                rec["item"] = arr
                return rec
            raise TypeError(f"items must have the buffer's dtype {dt}, not {arr.dtype}")
        if arr.ndim > 1 or (batch and arr.ndim != 1):
            raise ValueError("items: a 1-D array of records" if batch else
                             "items: a record or a 1-D array of records")
        return _np.ascontiguousarray(arr.reshape(-1))

    def add(self, item: _t.Any = None, *, ends: _t.Any = None, **fields: _t.Any) -> None:
        """Store one item or a batch, as one trajectory.

        item: a record or 1-D array of self.dtype, or a dict of field ->
        value (one item) or field -> array with a leading batch axis; the
        fields may also be keywords: add(obs=o, action=a, ...). ends: None
        (no episode end), an END_* int for the last item of the batch, or
        one END_* per item. New items get the largest priority seen."""
        self._add_records(self._records(item, fields), ends)

    def add_batch(self, items: _t.Any = None, *, ends: _t.Any = None, **fields: _t.Any) -> None:
        """add() for batches only: the records, or every field, must have a
        leading batch axis (a batch of one is shape (1, ...), never read as
        one item; a single record is refused with ValueError). Zero items
        add nothing."""
        self._add_records(self._records(items, fields, batch=True), ends)

    def _add_records(self, rec: _np.ndarray, ends: _t.Any) -> None:
        n = rec.shape[0]
        e = None
        if ends is not None:
            ea = _np.asarray(ends)
            if ea.dtype.kind not in "iub":
                raise TypeError("ends must be END_* integers")
            if ea.ndim == 0:
                ea = _np.concatenate([_np.zeros(max(n - 1, 0), _np.int64), ea.reshape(1)])
            if ea.shape != (n,):
                raise ValueError(f"{n} items but {ea.size} ends")
            if ea.size and (ea.min() < 0 or ea.max() > 255):
                raise _error("PER_ERR_ARG", "an end is not an END_* value")
            e = _np.ascontiguousarray(ea, dtype=_np.uint8)
        if n == 0:
            return
        self._add(rec, e)

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
    ) -> _t.Dict[str, _np.ndarray]:
        """Draw batch_size items (per_buffer_sample): a dict of the item's
        fields (leading axis batch_size; with sequences, (batch_size,
        seq_len)), "ids" (uint64, for update) and "weights" (float32 IS
        weights, max 1), and with sequences "mask" (bool, False after an
        episode's end). unique: distinct items; beta: this beta instead of
        the schedule; window: only the `window` newest items (or
        trajectories, with trajectories=True); sequences: seq_len steps
        each. The arrays are views of one record array: no copies."""
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
        rec = _np.empty((B, L) if sequences else B, self.dtype)
        ids = _np.empty(B, _np.uint64)
        weights = _np.empty(B, _np.float32)
        mask = _np.empty((B, L), _np.uint8) if sequences else None
        self._sample(B, flags, b, window, rec, ids, weights, mask)
        out = {name: rec[name] for name in self.dtype.names}
        out["ids"] = ids
        out["weights"] = weights
        if mask is not None:
            out["mask"] = mask.view(_np.bool_)
        return out

    def update(self, ids: _t.Any, td: _t.Any) -> int:
        """Priorities (|td| + eps)^alpha for the sampled ids
        (per_buffer_update; td is rounded to float32 as in C). Returns how
        many ids were stale (their slot overwritten since the draw)."""
        return self._update(_indices(ids, "ids", 64), _floats(td, "td", _np.float32), False)

    def update_sequences(self, ids: _t.Any, td: _t.Any) -> int:
        """per_buffer_update_seq: td holds seq_len values per id, shape
        (len(ids), seq_len)."""
        return self._update(_indices(ids, "ids", 64), _floats(td, "td", _np.float32), True)

    # -- state -------------------------------------------------------------

    def __len__(self) -> int:
        return self.size

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def step(self) -> int:
        """Sample calls so far (the beta schedule's clock)."""
        return self.counters["step"]

    @property
    def added(self) -> int:
        """Items added in total."""
        return self.counters["added"]

    @property
    def storage(self) -> _np.ndarray:
        """The item ring, slots [0, len(self)), as a read-only view (no
        copy): slot order, not age order."""
        return _np.frombuffer(self, dtype=self.dtype)[: self.size]

    def priorities(self) -> _np.ndarray:
        """A copy of the leaves of slots [0, capacity) (0 where empty)."""
        out = _np.empty(self.capacity, _np.float64)
        self._leaves_into(out, False)
        return out

    def save(self, path: _t.Union[str, _os.PathLike]) -> None:
        """per_buffer_save: the whole state, atomically replacing path."""
        self._save(_os.fspath(path))

    def load(self, path: _t.Union[str, _os.PathLike]) -> None:
        """per_buffer_load: replace the state with the file's (validated
        completely first; the buffer is unchanged on error)."""
        self._load(_os.fspath(path))

    def load_shard(self, path: _t.Union[str, _os.PathLike], rank: int, world: int) -> None:
        """per_buffer_load_shard: items rank, rank + world, ... of the file."""
        self._load_shard(_os.fspath(path), rank, world)


# ---------------------------------------------------------------------------
# n-step adder
# ---------------------------------------------------------------------------


def _shape(s: _t.Any, what: str) -> _t.Tuple[int, ...]:
    if isinstance(s, (int, _np.integer)):
        return (_count(s, what),)
    return tuple(_count(x, what) for x in s)


class NStep(_per._NStep):
    """Turns environment steps into n-step items (per_nstep): obs, action,
    reward (discounted sum), discount (gamma^m), done, next_obs.

    item_dtype is the dtype of the items it emits: make the buffer with
    ReplayBuffer(capacity, adder.item_dtype)."""

    def __init__(
        self,
        n: int,
        gamma: float,
        obs_shape: _t.Any = (),
        obs_dtype: _t.Any = _np.float32,
        action_shape: _t.Any = (),
        action_dtype: _t.Any = _np.int32,
    ) -> None:
        self.obs_dtype = _np.dtype(obs_dtype)
        self.obs_shape = _shape(obs_shape, "NStep: obs_shape")
        self.action_dtype = _np.dtype(action_dtype)
        self.action_shape = _shape(action_shape, "NStep: action_shape")
        obs_size = self.obs_dtype.itemsize * int(_np.prod(self.obs_shape, dtype=_np.int64))
        act_size = self.action_dtype.itemsize * int(_np.prod(self.action_shape, dtype=_np.int64))
        super().__init__(n, _real(gamma, "NStep: gamma"), obs_size, act_size)
        lay = self.layout
        self.item_dtype: _np.dtype = _np.dtype({
            "names": ["obs", "action", "reward", "discount", "done", "next_obs"],
            "formats": [(self.obs_dtype, self.obs_shape),
                        (self.action_dtype, self.action_shape), _np.float32,
                        _np.float32, _np.uint32, (self.obs_dtype, self.obs_shape)],
            "offsets": [lay["obs"], lay["action"], lay["reward"],
                        lay["discount"], lay["done"], lay["next_obs"]],
            "itemsize": lay["size"],
        })

    @staticmethod
    def _array(o: _t.Any, dtype: _np.dtype, shape: _t.Tuple[int, ...], what: str) -> _np.ndarray:
        a = _np.asarray(o, dtype=dtype)
        if a.shape != shape:
            raise ValueError(f"{what}: shape {a.shape}, expected {shape}")
        return a if a.flags.c_contiguous else a.copy()

    def step(self, buffer: ReplayBuffer, obs: _t.Any, action: _t.Any, reward: float,
             next_obs: _t.Any, terminated: bool = False, truncated: bool = False) -> None:
        """One environment step (per_nstep_step): emits to buffer the items
        that are complete."""
        self._step(buffer, self._array(obs, self.obs_dtype, self.obs_shape, "obs"),
                   self._array(action, self.action_dtype, self.action_shape, "action"),
                   float(reward),
                   self._array(next_obs, self.obs_dtype, self.obs_shape, "next_obs"),
                   bool(terminated), bool(truncated))

    def save(self, path: _t.Union[str, _os.PathLike]) -> None:
        """The pending steps of this adder (save_nstep([self], path))."""
        _per.nstep_save([self], _os.fspath(path))

    def load(self, path: _t.Union[str, _os.PathLike]) -> None:
        _per.nstep_load([self], _os.fspath(path))


def save_nstep(adders: _t.Sequence[NStep], path: _t.Union[str, _os.PathLike]) -> None:
    """per_nstep_save: the pending steps of several adders in one file."""
    _per.nstep_save(list(adders), _os.fspath(path))


def load_nstep(adders: _t.Sequence[NStep], path: _t.Union[str, _os.PathLike]) -> None:
    """per_nstep_load: the file's pending steps into adders made with the
    same configs (all unchanged on error)."""
    _per.nstep_load(list(adders), _os.fspath(path))
