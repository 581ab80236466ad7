"""The classes per was specified from, with their names, arguments and
return types, each a thin layer over per's buffers and trees: a trainer
written for one of them switches to per by one import.

Seed 000, a SAC trainer's prioritized n-step replay (NumPy, PyTorch
tensors out):

    from per.seeds import PrioritizedNStepReplayBuffer, _SumTree

Seed 001, a sum tree and a replay on the GPU (PyTorch tensors in and
out; device "cuda" runs per.cuda, device "cpu" runs the same kernels on
the CPU through per.cuda.host, where that is installed):

    from per.seeds import (CpuSumTree, GpuSumTree, GpuCumsumSampler,
                           GPUReplayPER, PERBatch)

Nothing of the seeds' own sampling is re-implemented: every draw, weight
and priority is per's (per.ReplayBuffer, per.NStep, per.SumTree,
per.cuda.ReplayBuffer, per.cuda.SumTree), so the same seed gives the same
batches as per itself. Where a seed's behaviour differs from per's, the
class keeps per's and its docstring says where and why. The common ones:

- Descent. The seeds go left when u <= left sum, which can land on a
  leaf of priority 0 at an interval's edge (and seed 001 then clamps to
  the last slot, which may be empty); per goes left when u < left sum and
  never returns a leaf without mass.
- Randomness. Draws come from per's counter-based generator (seed
  keyword, default 0), not from NumPy's or PyTorch's global state: the
  same seed gives the same batches on every machine, CPU and GPU alike.
- Priorities are written as per writes them: (|td| + eps)^alpha from TD
  errors rounded to float32, NaN and infinite TD errors refused.
- Indices. The seeds hand out slots (0 .. capacity - 1), and these
  classes do too; update_priorities gives a slot's priority to the item
  in it now (the seeds' behaviour). per.ReplayBuffer's own ids carry the
  slot's generation as well, so an update for an item overwritten since
  its draw is skipped: use .buffer for that.

Torch is imported when a class needs it (seed 001's always; seed 000's
to return tensors, NumPy arrays without it).
"""

import dataclasses as _dataclasses
import importlib as _importlib
import types as _types
import typing as _t

import numpy as _np

import per as _per_pkg

from . import _host
from . import cuda as _cuda
from .config import Array as _Array
from .config import ArrayLike as _ArrayLike
from .config import count as _count
from .config import real as _real

__all__ = ["_SumTree", "PrioritizedNStepReplayBuffer", "CpuSumTree",
           "GpuSumTree", "GpuCumsumSampler", "GPUReplayPER", "PERBatch"]

_GEN_PERIOD = 0xFFFFFFFF  # per.h: a slot's generation counts 1 .. 2^32 - 1
_SLOT_MASK = 0xFFFFFFFF  # per.h: an id's slot is its low 32 bits


def _torch(call: str, required: bool = True) -> _t.Optional[_types.ModuleType]:
    """PyTorch, imported at the first call that needs it."""
    try:
        return _importlib.import_module("torch")
    except ImportError:
        if required:
            raise ImportError(f"{call} needs PyTorch: pip install torch") from None
        return None


def _ids_of_slots(slots: _t.Any, added: int, capacity: int, xp: _t.Any) -> _t.Any:
    """per's ids (slot | generation << 32) of the items now in `slots`, for
    a ring that has taken `added` items in order (item k went to slot k mod
    capacity, the slot's generation counting its writes 1 .. 2^32 - 1 and
    then 1 again, per.h's per_buffer). xp is numpy or torch; slots int64.
    Slots outside [0, min(added, capacity)) get the id capacity, which
    per refuses (an id it never handed out)."""
    writes = (added - 1 - slots) // capacity + 1
    gen = (writes - 1) % _GEN_PERIOD + 1
    ok = (slots >= 0) & (slots < min(added, capacity))
    ids = slots | (gen << 32)
    return xp.where(ok, ids, capacity)


# ---------------------------------------------------------------------------
# Seed 000: a SAC trainer's prioritized n-step replay
# ---------------------------------------------------------------------------


class _SumTree:
    """Seed 000's sum tree (its private name, kept so that its tests run
    unchanged) over per.SumTree: `capacity` leaves written in a ring by
    add, the root the total.

    add(p) writes the next slot (circularly) and returns it; update(i, p)
    rewrites slot i; get(s) returns (slot, priority) of the leaf whose
    prefix interval [prefix, prefix + p) holds s. Where the seed differs:
    its tree is root-at-0 with capacity - 1 inner nodes; this is per's
    (root at node 1, leaves at L .. L + capacity, L a power of two), whose
    descent goes left when s < left sum where the seed's goes when s <=
    left sum: get(1.0) over leaves 1, 2 is slot 1 here, slot 0 in the
    seed; s >= total gives the last leaf with mass, never an empty one.
    Priorities must be finite and >= 0, and slots in [0, capacity)
    (per.Error otherwise, OverflowError for a negative slot; nothing
    written); the seed would store a NaN and lose the tree's total.
    max_priority is the largest priority ever written, at least 1.0 (the
    seed's start value).
    """

    __slots__ = ("capacity", "_t", "_write_idx", "_max_priority")

    def __init__(self, capacity: int) -> None:
        self.capacity: int = _count(capacity, "_SumTree: capacity")
        self._t = _per_pkg.SumTree(self.capacity)
        self._write_idx = 0
        self._max_priority = 1.0

    def add(self, priority: float) -> int:
        """Write priority to the next slot (circularly); returns the slot."""
        i = self._write_idx
        self.update(i, priority)
        self._write_idx = (i + 1) % self.capacity
        return i

    def update(self, data_idx: int, priority: float) -> None:
        """Slot data_idx's priority (per_tree_set)."""
        p = _real(priority, "_SumTree.update: priority")
        self._t.set(int(data_idx), p)
        self._max_priority = max(self._max_priority, p)

    def get(self, s: float) -> _t.Tuple[int, float]:
        """(slot, priority) of the leaf whose prefix interval holds s
        (per_tree_find)."""
        i = self._t.find(_real(s, "_SumTree.get: s"))
        return i, self._t.get(i)

    @property
    def total(self) -> float:
        return self._t.total

    @property
    def max_priority(self) -> float:
        return self._max_priority


_Batch7 = _t.Tuple[_t.Any, _t.Any, _t.Any, _t.Any, _t.Any, _Array, _t.Any]


class PrioritizedNStepReplayBuffer:
    """Seed 000's buffer over per.ReplayBuffer and per.NStep: the seed's
    constructor, push_raw, sample, update_priorities and current_beta,
    plus push, the n-step adder the seed's name promises.

    Items are float32 states and actions (their shapes taken from the
    first push, as the seed does), float32 rewards and dones. push(s, a,
    r, s2, done) adds one environment step through per.NStep: n_steps
    rewards summed with gamma (fewer at an episode's end) and the state
    n_steps ahead; push_raw adds a transition as given (already n-step,
    or one step). sample(batch_size) returns the seed's tuple (states,
    actions, rewards, next_states, dones, indices, weights): tensors on
    `device` (default "cuda" when available, else "cpu"; NumPy arrays when
    PyTorch is not installed) and indices a NumPy int64 array of slots.

    Where it differs from the seed, keeping per's behaviour:
    - current_beta is the beta of the next sample call (beta_start + (
      beta_end - beta_start) * min(1, samples so far / beta_anneal_steps)):
      the seed counts the call before using it, so its k-th call uses the
      beta of k + 1 calls.
    - An empty buffer raises ValueError at sample (the seed raised
      NumPy's error). The seed's uniform fallback for a total of 0 or NaN
      has no use here: eps > 0 keeps every leaf > 0, and NaN TD errors are
      refused (per.Error) where they come in.
    - Weights are (N P(i))^-beta over the batch's largest, as the seed;
      computed in double from the leaves, never clamped by eps.
    """

    def __init__(self, capacity: int = 500_000, n_steps: int = 3,
                 gamma: float = 0.99, alpha: float = 0.6,
                 beta_start: float = 0.4, beta_end: float = 1.0,
                 beta_anneal_steps: int = 200_000, *,
                 eps: float = 1e-6, seed: int = 0,
                 device: _t.Any = None) -> None:
        c = "PrioritizedNStepReplayBuffer"
        self.cap: int = _count(capacity, f"{c}: capacity")
        self.n_steps: int = _count(n_steps, f"{c}: n_steps")
        self.gamma = _real(gamma, f"{c}: gamma")
        self.alpha = _real(alpha, f"{c}: alpha")
        self.beta_start = _real(beta_start, f"{c}: beta_start")
        self.beta_end = _real(beta_end, f"{c}: beta_end")
        self.beta_anneal_steps: int = max(1, int(beta_anneal_steps))
        self.eps = _real(eps, f"{c}: eps")
        self.seed: int = _count(seed, f"{c}: seed", 64)
        self._device = device
        self._adder: _t.Optional[_per_pkg.NStep] = None
        self._buf: _t.Optional[_per_pkg.ReplayBuffer] = None

    def _init_arrays(self, state: _Array, action: _Array) -> None:
        """The adder and the buffer, for states and actions of these
        shapes (the seed's lazy allocation)."""
        adder = _per_pkg.NStep(self.n_steps, self.gamma, obs_shape=state.shape,
                               obs_dtype=_np.float32,
                               action_shape=action.shape,
                               action_dtype=_np.float32)
        buf = _per_pkg.ReplayBuffer(
            self.cap, adder.item_dtype, alpha=self.alpha, beta0=self.beta_start,
            beta1=self.beta_end, beta_steps=self.beta_anneal_steps,
            eps=self.eps, seed=self.seed)
        self._adder, self._buf = adder, buf

    def _arrays(self, state: object, action: object, next_state: object,
                call: str) -> _t.Tuple[_Array, _Array, _Array]:
        s = _np.asarray(_host(state), dtype=_np.float32)
        a = _np.asarray(_host(action), dtype=_np.float32)
        s2 = _np.asarray(_host(next_state), dtype=_np.float32)
        if self._buf is None:
            self._init_arrays(s, a)
        assert self._adder is not None
        if s.shape != self._adder.obs_shape or s2.shape != s.shape:
            raise ValueError(f"{call}: states of shape {s.shape} and "
                             f"{s2.shape}; this buffer's are "
                             f"{self._adder.obs_shape}")
        if a.shape != self._adder.action_shape:
            raise ValueError(f"{call}: action of shape {a.shape}; this "
                             f"buffer's is {self._adder.action_shape}")
        return s, a, s2

    def push(self, state: object, action: object, reward: float,
             next_state: object, done: object) -> None:
        """One environment step, through per.NStep: the n-step items it
        completes go into the buffer at the max priority."""
        c = "PrioritizedNStepReplayBuffer.push"
        s, a, s2 = self._arrays(state, action, next_state, c)
        assert self._adder is not None and self._buf is not None
        self._adder.step(self._buf, s, a, float(reward), s2, bool(done))

    def push_raw(self, state: object, action: object, reward: float,
                 next_state: object, done: object) -> None:
        """One transition as given, at the max priority (the seed's
        push_raw); its discount field is gamma^n_steps."""
        c = "PrioritizedNStepReplayBuffer.push_raw"
        s, a, s2 = self._arrays(state, action, next_state, c)
        assert self._buf is not None
        self._buf.add(obs=s, action=a, reward=_np.float32(reward),
                      discount=_np.float32(self.gamma ** self.n_steps),
                      done=1 if done else 0, next_obs=s2)

    @property
    def current_beta(self) -> float:
        """The beta of the next sample call."""
        if self._buf is None:
            return self.beta_start
        return float(self._buf.beta)

    def sample(self, batch_size: int) -> _Batch7:
        """(states, actions, rewards, next_states, dones, indices, weights)
        of batch_size items drawn in proportion to their priorities
        (stratified, per_buffer_sample); ValueError when empty."""
        c = "PrioritizedNStepReplayBuffer.sample"
        if self._buf is None or len(self._buf) == 0:
            raise ValueError(f"{c}: the buffer is empty")
        b = self._buf.sample(batch_size)
        idx = (b["ids"] & _np.uint64(_SLOT_MASK)).astype(_np.int64)
        out = [_np.ascontiguousarray(b["obs"]),
               _np.ascontiguousarray(b["action"]),
               _np.ascontiguousarray(b["reward"]),
               _np.ascontiguousarray(b["next_obs"]),
               b["done"].astype(_np.float32),
               _np.ascontiguousarray(b["weights"])]
        torch = _torch(c, required=False)
        if torch is None:
            return (out[0], out[1], out[2], out[3], out[4], idx, out[5])
        if self._device is None:
            self._device = "cuda" if torch.cuda.is_available() else "cpu"
        t = [torch.from_numpy(x).to(self._device) for x in out]
        return (t[0], t[1], t[2], t[3], t[4], idx, t[5])

    def update_priorities(self, indices: _ArrayLike, td_errors: _ArrayLike) -> None:
        """Priorities (|td| + eps)^alpha for the items now in slots
        `indices` (per_buffer_update)."""
        c = "PrioritizedNStepReplayBuffer.update_priorities"
        if self._buf is None:
            raise ValueError(f"{c}: the buffer is empty")
        slots = _np.asarray(_host(indices))
        if slots.dtype.kind not in "iu":
            raise TypeError(f"{c}: indices must hold integers, not {slots.dtype}")
        ids = _ids_of_slots(slots.astype(_np.int64).reshape(-1),
                            self._buf.added, self.cap, _np)
        bad = ids == self.cap
        if bad.any():
            j = int(_np.argmax(bad))
            raise ValueError(f"{c}: indices[{j}] = {int(slots.reshape(-1)[j])} "
                             f"is not a filled slot (0 .. {len(self) - 1})")
        td = _np.asarray(_host(td_errors), dtype=_np.float64).reshape(-1)
        self._buf.update(ids.astype(_np.uint64), td)

    def __len__(self) -> int:
        return 0 if self._buf is None else len(self._buf)

    @property
    def buffer(self) -> _t.Optional[_per_pkg.ReplayBuffer]:
        """The per.ReplayBuffer underneath (None before the first push):
        its ids, checkpoints, sequences and the rest."""
        return self._buf


# ---------------------------------------------------------------------------
# Seed 001: a sum tree and a replay on the GPU
# ---------------------------------------------------------------------------


def _spans(n: int, size: int) -> _t.Iterator[_t.Tuple[int, int]]:
    """(start, length) of the pieces of at most `size` that cover [0, n),
    in order (a call of more than max_batch values, done max_batch at a
    time)."""
    for a in range(0, n, size):
        yield a, min(size, n - a)


class _On(_t.NamedTuple):
    """Where a seed-001 class runs: per.cuda's classes or per.cuda.host's,
    the device keyword they take, torch's device, and torch."""

    ns: _t.Any
    device: _t.Any
    torch_device: _t.Any
    torch: _t.Any

    def static(self, shape: _t.Tuple[int, ...], dtype: "_np.dtype[_t.Any]",
               nodes: "_np.dtype[_t.Any]") -> _t.Any:
        """A tensor the kernels of an object of node type `nodes` may read
        and write: device memory, or that node type's emulated "device
        memory" on the CPU."""
        if self.ns is _cuda.host:
            return self.torch.from_dlpack(
                _cuda.host.to_device(_np.zeros(shape, dtype), nodes=nodes))
        z = self.torch.zeros(shape, dtype=self.torch.from_numpy(_np.zeros(0, dtype)).dtype)
        return z.to(self.torch_device)


def _on(device: _t.Any, call: str) -> _On:
    torch = _torch(call)
    assert torch is not None
    dev = torch.device(device)
    if dev.type == "cpu":
        if not _cuda.host.available():
            raise ImportError(f"{call}: device 'cpu' runs per's kernels on the "
                              "CPU through per.cuda.host, which needs per built "
                              "with -Csetup-args=-Dpython_cuda_host=true")
        return _On(_cuda.host, None, dev, torch)
    if dev.type != "cuda":
        raise ValueError(f"{call}: device must be 'cuda' (per.cuda) or 'cpu' "
                         f"(per.cuda.host), got {device!r}")
    if not _cuda.available():
        raise ImportError(f"{call}: {_cuda.unavailable_reason()}")
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return _On(_cuda, dev, dev, torch)


def _int_tensor(on: _On, x: object, what: str) -> _t.Any:
    """x as a 1-D tensor on on's device; TypeError unless it holds
    integers (float indices would be truncated to another slot, bools
    taken as 0 and 1)."""
    torch = on.torch
    v = torch.as_tensor(x, device=on.torch_device).reshape(-1)
    if v.is_floating_point() or v.is_complex() or v.dtype == torch.bool:
        raise TypeError(f"{what} must hold integers, not {v.dtype}")
    return v


def _np_dtype(torch: _t.Any, dt: _t.Any, call: str) -> "_np.dtype[_t.Any]":
    try:
        out: "_np.dtype[_t.Any]" = _np.dtype(torch.empty(0, dtype=dt).numpy().dtype)
        return out
    except TypeError:
        raise TypeError(f"{call}: {dt} has no NumPy dtype") from None


class CpuSumTree:
    """Seed 001's CPU reference tree over per.SumTree: its flat layout
    (root at node 1, leaves at L .. L + capacity) is per's. update(idx,
    new_p) writes leaves (the last of duplicates wins, as the seed's
    sequential loop); sample(u) returns the leaves whose prefix intervals
    hold the values u (per_tree_find: u < left sum goes left, the seed's
    u <= left sum; no empty leaf is ever returned, where the seed clamps
    to the last slot). Nodes are float32 as the seed's (per.SumTree's
    float nodes, per.h's PER_REAL float; dtype=numpy.float64 for double):
    tree is a copy of them."""

    def __init__(self, capacity: int, dtype: _t.Any = _np.float32) -> None:
        self.capacity: int = _count(capacity, "CpuSumTree: capacity")
        self._t = _per_pkg.SumTree(self.capacity, dtype=dtype)
        self.L: int = self._t.leaves

    @property
    def tree(self) -> _Array:
        return self._t.nodes()

    def update(self, idx: _ArrayLike, new_p: _ArrayLike) -> None:
        self._t.set_batch(_np.asarray(idx).reshape(-1), _np.asarray(new_p).reshape(-1))

    def sample(self, u: _ArrayLike) -> _Array:
        v = _np.asarray(u, dtype=_np.float64).reshape(-1)
        return _np.array([self._t.find(float(x)) for x in v], dtype=_np.int64)

    @property
    def total(self) -> float:
        return self._t.total


class GpuSumTree:
    """Seed 001's GPU tree over per.cuda.SumTree: per's layout on the
    device (root at node 1, leaves at L .. L + capacity), which is the
    seed's. tree is a tensor view of the nodes (float32 as the seed's:
    per.cuda.SumTree's float nodes, per_cuda_float; dtype=numpy.float64
    for double), total a 0-d view of the root.

    update(idx, new_p) writes leaves: idx int64 and new_p floats, tensors
    on the tree's device, of one length. The seed adds deltas with atomics,
    so duplicates race and float sums drift; here the last of duplicates
    wins and every changed node is recomputed from its children
    (per_cuda_tree_set_batch), the same bits as per.SumTree. An index out
    of range or a NaN, infinite or negative priority is refused with
    nothing written, raised (per.Error) at the next sample or check().
    update_coalesced is update.

    sample(batch_size): a stratified draw of int64 leaf indices from the
    tree's seed and its draw counter (per_cuda_tree_sample; per.SumTree
    with per.Rng(seed) gives the same), not from torch's generator; the
    seed's descent differences are in per.seeds' docstring. Larger
    batches than max_batch are drawn max_batch at a time.
    """

    def __init__(self, capacity: int, device: _t.Any = "cuda", *,
                 max_batch: int = 65536, seed: int = 0,
                 dtype: _t.Any = _np.float32) -> None:
        c = "GpuSumTree"
        on = _on(device, c)
        self._on = on
        self._t = on.ns.SumTree(capacity, max_batch=max_batch, seed=seed,
                                device=on.device, dtype=dtype)
        self.capacity: int = self._t.capacity
        self.L: int = self._t.leaves
        self.device: _t.Any = on.torch_device
        self.max_batch: int = self._t.max_batch
        self.tree: _t.Any = self._t.nodes
        nodes = self._t.dtype
        self._idx = on.static((self.max_batch,), _np.dtype(_np.int32), nodes)
        self._val = on.static((self.max_batch,), nodes, nodes)

    @property
    def total(self) -> _t.Any:
        return self.tree[1]

    def total_priority(self) -> _t.Any:
        """The root (a 0-d tensor view)."""
        return self.tree[1]

    def leaf_values(self) -> _t.Any:
        return self._t.leaf_values

    def leaf_priorities(self, idx: _t.Any) -> _t.Any:
        return self.tree[self.L + idx]

    def update(self, idx: _t.Any, new_p: _t.Any) -> None:
        torch = self._on.torch
        idx = _int_tensor(self._on, idx, "GpuSumTree.update: idx")
        new_p = torch.as_tensor(new_p, device=self.device).reshape(-1)
        if idx.shape != new_p.shape:
            raise ValueError(f"GpuSumTree.update: {idx.shape[0]} idx but "
                             f"{new_p.shape[0]} new_p")
        # out of range (which int32 could wrap into range): an index per
        # refuses, so the batch is refused as a whole
        idx = torch.where((idx >= 0) & (idx < self.capacity), idx, -1)
        for a, n in _spans(idx.shape[0], self.max_batch):
            self._idx[:n].copy_(idx[a:a + n])
            self._val[:n].copy_(new_p[a:a + n])
            self._t.set_batch(self._idx[:n], self._val[:n])

    update_coalesced = update

    def sample(self, batch_size: int) -> _t.Any:
        """batch_size int64 leaf indices; RuntimeError when the total is 0."""
        torch = self._on.torch
        B = _count(batch_size, "GpuSumTree.sample: batch_size")
        self._t.status()
        if float(self.tree[1]) <= 0.0:
            raise RuntimeError("Cannot sample: total priority is 0")
        out = torch.empty(B, dtype=torch.int64, device=self.device)
        for a, n in _spans(B, self.max_batch):
            idx, _ = self._t.sample(n)
            out[a:a + n].copy_(idx)
        return out

    def check(self) -> None:
        """Raise per.Error for the first refused call since the last check."""
        self._t.status()


class GpuCumsumSampler:
    """Seed 001's baseline, kept for comparisons: priorities in a flat
    float32 tensor, each sample a full prefix sum (torch.cumsum) and a
    binary search per draw (torch.searchsorted), stratified. Theta(N) per
    sample: the cost a sum tree avoids. Plain PyTorch on any device. The
    search takes the first prefix sum > u (the seed's, >= u, can draw a
    slot of priority 0)."""

    def __init__(self, capacity: int, device: _t.Any = "cuda") -> None:
        torch = _torch("GpuCumsumSampler")
        assert torch is not None
        self._torch = torch
        self.capacity: int = _count(capacity, "GpuCumsumSampler: capacity")
        self.device: _t.Any = torch.device(device)
        self.priorities: _t.Any = torch.zeros(self.capacity, device=self.device,
                                              dtype=torch.float32)

    def update(self, idx: _t.Any, new_p: _t.Any) -> None:
        self.priorities[idx] = self._torch.as_tensor(
            new_p, dtype=self.priorities.dtype, device=self.device)

    def sample(self, batch_size: int) -> _t.Any:
        torch = self._torch
        cdf = torch.cumsum(self.priorities, 0)
        step = cdf[-1] / batch_size
        u = (torch.arange(batch_size, device=self.device)
             + torch.rand(batch_size, device=self.device)) * step
        return torch.searchsorted(cdf, u, right=True).clamp_(max=self.capacity - 1)


@_dataclasses.dataclass
class PERBatch:
    """Seed 001's batch: tensors on the replay's device (indices int64
    slots, weights float32, at most 1)."""

    obs: _t.Any
    act: _t.Any
    rew: _t.Any
    next_obs: _t.Any
    done: _t.Any
    weights: _t.Any
    indices: _t.Any


class GPUReplayPER:
    """Seed 001's replay over per.cuda.ReplayBuffer: transitions (obs and
    next_obs of obs_shape and dtype_obs, act int64, rew and done float32)
    and their priorities on the device.

    add(obs, act, rew, next_obs, done) takes host or device values, one
    transition: they are gathered on the host and written max_batch at a
    time (and before every sample), one copy and one kernel per field per
    max_batch adds instead of five copies and a tree update per add.
    sample(batch_size, step, beta_steps) anneals beta from beta0 to 1 over
    beta_steps (default beta_anneal_steps) as the seed does and returns a
    PERBatch (the buffer's draw, copied out of its output memory);
    batch_size <= max_batch (ValueError otherwise), a draw being one
    stratified batch whose weights share its largest.
    update_priorities(indices, td_error): priorities (|td| + eps)^alpha,
    TD errors rounded to float32. len() counts every add. The trees have
    float nodes as the seed's (per.cuda.ReplayBuffer(..., nodes=
    numpy.float32): per_cuda_float); nodes=numpy.float64 for double.

    Where it differs from the seed, keeping per's behaviour: new items get
    the largest priority written so far, tracked on the device (the
    seed's copy on the host); weights are (N P(i))^-beta over the batch's
    largest from the leaves in double, not clamped by eps; a NaN or
    infinite TD error, or a slot never filled, is refused (per.Error, at
    the next sample or check()) with nothing written; updates of slots
    written again since their draw go to the new item as in the seed,
    unless fewer than max_batch adds came in between (those items are
    written after the update and get the max priority). beta_anneal_steps
    is accepted by the constructor, as the seed's training script passes
    it.
    """

    def __init__(self, capacity: int, obs_shape: _t.Sequence[int],
                 device: _t.Any = "cuda", alpha: float = 0.6,
                 beta0: float = 0.4, eps: float = 1e-6,
                 dtype_obs: _t.Any = None, *,
                 beta_anneal_steps: int = 200_000, max_batch: int = 1024,
                 seed: int = 0, nodes: _t.Any = _np.float32) -> None:
        c = "GPUReplayPER"
        on = _on(device, c)
        torch = on.torch
        self._on = on
        self.device: _t.Any = on.torch_device
        self.capacity: int = _count(capacity, f"{c}: capacity")
        self.alpha = _real(alpha, f"{c}: alpha")
        self.beta0 = _real(beta0, f"{c}: beta0")
        self.eps = _real(eps, f"{c}: eps")
        self.beta_anneal_steps: int = max(1, int(beta_anneal_steps))
        shape = tuple(int(d) for d in obs_shape)
        od = _np_dtype(torch, torch.float32 if dtype_obs is None else dtype_obs,
                       f"{c}: dtype_obs")
        self._item: "_np.dtype[_t.Any]" = _np.dtype(
            [("obs", od, shape), ("act", _np.int64), ("rew", _np.float32),
             ("next_obs", od, shape), ("done", _np.float32)], align=True)
        self.buffer: _t.Any = on.ns.ReplayBuffer(
            self.capacity, self._item, max_batch=max_batch, device=on.device,
            alpha=self.alpha, beta0=self.beta0, beta1=1.0,
            beta_steps=self.beta_anneal_steps, eps=self.eps, seed=seed,
            align=True, nodes=nodes)
        self.max_batch: int = max_batch
        assert self._item.names is not None
        self._names: _t.Tuple[str, ...] = self._item.names
        self._staged = _np.zeros(max_batch, self._item)
        self._n = 0  # rows staged
        self._added = 0  # items written to the buffer
        nd = self.buffer.nodes
        self._dev = {k: on.static((max_batch,) + self._item[k].shape,
                                  self._item[k].base, nd) for k in self._names}
        self._ids = on.static((max_batch,), _np.dtype(_np.int64), nd)
        self._td = on.static((max_batch,), _np.dtype(_np.float32), nd)

    @property
    def size(self) -> int:
        return min(self._added + self._n, self.capacity)

    @property
    def pos(self) -> int:
        """The slot the next add writes."""
        return (self._added + self._n) % self.capacity

    def __len__(self) -> int:
        return self.size

    def add(self, obs: object, act: object, rew: object, next_obs: object,
            done: object) -> None:
        r = self._staged[self._n]
        r["obs"] = _np.asarray(_host(obs))
        r["next_obs"] = _np.asarray(_host(next_obs))
        r["act"] = int(_t.cast(_t.Any, act))
        r["rew"] = float(_t.cast(_t.Any, rew))
        r["done"] = float(_t.cast(_t.Any, done))
        self._n += 1
        if self._n == self.max_batch:
            self.flush()

    def flush(self) -> None:
        """Write the gathered adds into the buffer now."""
        n = self._n
        if not n:
            return
        torch = self._on.torch
        for k in self._names:
            self._dev[k][:n].copy_(torch.from_numpy(self._staged[k][:n]))
        self.buffer.add_batch(**{k: self._dev[k][:n] for k in self._names})
        self._added += n
        self._n = 0

    def beta(self, step: int, beta_steps: _t.Optional[int] = None) -> float:
        """The seed's schedule: beta0 + (1 - beta0) * min(1, step /
        beta_steps)."""
        steps = self.beta_anneal_steps if beta_steps is None else beta_steps
        return self.beta0 + min(1.0, step / float(steps)) * (1.0 - self.beta0)

    def sample(self, batch_size: int, step: int,
               beta_steps: _t.Optional[int] = None) -> PERBatch:
        self.flush()
        if self.size == 0:
            raise RuntimeError("Cannot sample from empty buffer")
        self.buffer.status()
        b = self.buffer.sample(batch_size, beta=self.beta(step, beta_steps))
        ids = b["ids"]
        return PERBatch(obs=b["obs"].clone(), act=b["act"].clone(),
                        rew=b["rew"].clone(), next_obs=b["next_obs"].clone(),
                        done=b["done"].clone(), weights=b["weights"].clone(),
                        indices=ids & _SLOT_MASK)

    def update_priorities(self, indices: _t.Any, td_error: _t.Any) -> None:
        torch = self._on.torch
        slots = _int_tensor(self._on, indices,
                            "GPUReplayPER.update_priorities: indices").long()
        td = torch.as_tensor(td_error, device=self.device).reshape(-1)
        if slots.shape != td.shape:
            raise ValueError(f"GPUReplayPER.update_priorities: {slots.shape[0]} "
                             f"indices but {td.shape[0]} TD errors")
        ids = _ids_of_slots(slots, self._added, self.capacity, torch)
        for a, n in _spans(ids.shape[0], self.max_batch):
            self._ids[:n].copy_(ids[a:a + n])
            self._td[:n].copy_(td[a:a + n])
            self.buffer.update(self._ids[:n], self._td[:n])

    def check(self) -> None:
        """Raise per.Error for the first refused call since the last check."""
        self.buffer.status()

