"""per.cuda: per_cuda.h from Python, for device tensors.

``per.cuda.ReplayBuffer`` is ``per.ReplayBuffer`` on the GPU (per_cuda_buffer):
items, priorities and every counter live in device memory, the calls only
enqueue work on a CUDA stream (the caller's current one by default: PyTorch's
``torch.cuda.current_stream()``), nothing waits for the device, and a whole
training step can be captured in a CUDA graph (``torch.cuda.graph``). Inputs
are device arrays of any library (PyTorch, CuPy, JAX, Numba: anything with
``__cuda_array_interface__`` or ``__dlpack__``); ``sample`` returns views of
the buffer's own output memory, without a copy. ``per.cuda.SumTree`` is the
device sum tree alone (per_cuda_tree).

Streams: a call enqueues on its ``stream=`` (an int cudaStream_t handle,
where 0 and 1 are the legacy default stream and 2 the per-thread one, or
an object with ``.cuda_stream``, as torch.cuda.Stream, or ``.ptr``, as
CuPy's), else on the constructor's ``stream=``, else on PyTorch's current
stream when PyTorch is imported, else on CuPy's. With no stream given and
neither imported, it raises ValueError: the legacy default stream, which a
graph cannot capture and which serialises with every blocking stream, is
taken only when asked for. An input whose ``__cuda_array_interface__``
names its producer's stream (its "stream", version 3: CuPy, Numba) is
waited for when that is not the call's stream: an event recorded on the
producer's stream, waited for on the call's by the device, never by the
host, so a graph capture of the call's stream takes it too (as an
external event wait where the producer is not in the capture). Stream 0
there is refused, as the interface disallows it; None or no "stream"
means the data is ready for any stream. An input taken through
``__dlpack__`` is given the call's stream, and its producer orders its own
work before it. PyTorch's ``__cuda_array_interface__`` names no stream: a
tensor written on another stream than the call's is yours to order
(``torch.cuda.current_stream().wait_stream(other)``), as for any reader
of that interface.

The same calls, seed and config give the same bits as ``per.ReplayBuffer``
(``to_cpu`` / ``from_cpu`` move the whole state between them, so ``save`` and
``load`` work through the CPU buffer).

Node types: double by default; ``SumTree(..., dtype=numpy.float32)`` and
``ReplayBuffer(..., nodes=numpy.float32)`` have float nodes (per_cuda
built with PER_REAL float, the extension per._cuda32), the same bits as
``per.SumTree(..., dtype=numpy.float32)`` and ``per.ReplayBuffer(...,
nodes=numpy.float32)``; a float buffer's ``to_cpu`` / ``from_cpu`` take a
per.ReplayBuffer of float nodes.

Errors the host can see (a wrong dtype, shape or device, a batch too large)
raise at once. Errors only the device knows (a NaN TD error, sampling an empty
buffer) are kept in a status word on the device, the first one since the last
check, and ``status()`` waits for the stream and raises it as per.Error; a
call that failed on the device changed nothing.

per.cuda needs the extension per._cuda (per._cuda32 for float nodes), which
pip builds when nvcc (the CUDA toolkit) is on PATH at install time;
``available()`` says whether it is here and ``unavailable_reason()`` why not
(``available(numpy.float32)``: per._cuda32). ``per.cuda.host`` has the same
classes over a CPU emulation of the kernels (per._cuda_host, and
per._cuda_host32 for float nodes, built for the tests with
``-Csetup-args=-Dpython_cuda_host=true``): its "device arrays" are made by
``host.to_device``. Each of its two extensions emulates device memory of its
own: the arrays a float32 object takes are made with
``host.to_device(..., nodes=numpy.float32)``. It has no streams (its work
runs in order as it is enqueued): a call without a stream needs no framework
there, and the "stream" of an ``__array_interface__``, which it reads where
the GPU reads ``__cuda_array_interface__``, is checked and waited for as on
a GPU (the wait only counted, ``host.module.stream_waits()``).
"""
from __future__ import annotations

import importlib as _importlib
import sys as _sys
import types as _types
import typing as _t

import numpy as _np

import per as _per_pkg
from . import _per
from .config import Array as _Array
from .config import DType as _DType
from .config import F32 as _F32
from .config import F64 as _F64
from .config import NodesLike as _NodesLike
from .config import REPLAY_KEYS as _REPLAY_KEYS
from .config import ReplayKeywords as _ReplayKeywords
from .config import c_config as _c_config
from .config import check_keywords as _check_keywords
from .config import count as _count
from .config import defaults as _defaults
from .config import error as _error
from .config import field as _field
from .config import item_dtype as _item_dtype
from .config import keywords as _keywords
from .config import nodes_of as _nodes_of
from .config import real as _real
from .config import signature as _signature

if _t.TYPE_CHECKING:
    from typing_extensions import Unpack as _Unpack

    from . import _cuda as _stub


class _Extension(_t.Protocol):
    """What per.cuda uses of its extension, per._cuda or per._cuda_host,
    or per._cuda32 or per._cuda_host32 for float nodes (all four built
    from _cuda.cpp; _cuda.pyi types them)."""

    @property
    def backend(self) -> str: ...
    @property
    def MAX_BATCH(self) -> int: ...
    @property
    def DeviceArray(self) -> type[_stub.DeviceArray]: ...
    def Memory(self, bytes: int, device: int) -> _stub._Memory | int: ...
    def _Buffer(self, config: dict[str, object], max_batch: int,
                extra_bytes: int, device: int, stream: int
                ) -> tuple[_stub._BufferHandle | None, int, str]: ...
    def _Tree(self, capacity: int, max_batch: int, device: int,
              stream: int) -> tuple[_stub._TreeHandle | None, int]: ...
    def view(self, owner: object, ptr: int, device: int,
             dtype: tuple[int, int], typestr: str, shape: tuple[int, ...],
             strides: tuple[int, ...]) -> _stub.DeviceArray: ...
    def dlpack_info(self, obj: object, stream: int | None) -> tuple[
        int, int, int, int, int, int, tuple[int, ...],
        tuple[int, ...] | None]: ...
    def copy(self, dst: int, src: int, bytes: int, kind: int, device: int,
             stream: int) -> int: ...
    def copy2d(self, dst: int, dpitch: int, src: int, spitch: int, width: int,
               height: int, device: int, stream: int) -> int: ...
    def synchronize(self, device: int, stream: int) -> int: ...
    def stream_wait(self, device: int, producer: int, stream: int) -> int: ...
    def stream_waits(self) -> int: ...
    def device_count(self) -> int: ...
    def current_device(self) -> int: ...
    def last_error(self) -> tuple[int, str]: ...
    def real_bytes(self) -> int: ...
    def on_device(self, ptr: int, bytes: int) -> bool: ...


_cuda_mod: _Extension | None
try:
    from . import _cuda as _cuda_mod
    _why: str = ""
except ImportError as _e:  # pragma: no cover - depends on the install
    _cuda_mod = None
    _why = (f"per.cuda needs the extension per._cuda, which is not installed "
            f"({_e}). It is built when nvcc is on PATH while pip installs per: "
            "install the CUDA toolkit, put its bin/ on PATH and reinstall "
            "(pip install --force-reinstall --no-binary per-replay per-replay, "
            "or pip install . from a checkout).")

# per._cuda_host: the same source as per._cuda (_cuda.pyi types both), no
# stub of its own
_host_mod: _Extension | None
try:
    from . import _cuda_host  # type: ignore[attr-defined]
    _host_mod = _cuda_host
except ImportError:
    _host_mod = None
_host_why = ("per.cuda.host needs per._cuda_host (built with "
             "-Dpython_cuda_host=true)")

# The float extensions (per._cuda32 and per._cuda_host32: the same source
# again, _cuda.pyi types them too), imported on first use.
_float_mods: _t.Dict[bool, _t.Tuple[_t.Optional[_Extension], str]] = {}


def _float_module(host: bool) -> _t.Tuple[_t.Optional[_Extension], str]:
    """(per._cuda_host32 or per._cuda32, "") once imported, else (None, why
    not)."""
    got = _float_mods.get(host)
    if got is None:
        name = "_cuda_host32" if host else "_cuda32"
        try:
            mod = _t.cast(_Extension,
                          _importlib.import_module(f"{__package__}.{name}"))
            got = (mod, "")
        except ImportError as e:
            if host:
                why = (f"per.cuda.host: float32 nodes need the extension "
                       f"per._cuda_host32, which is not installed ({e}); it "
                       "is built with per._cuda_host (-Dpython_cuda_host=true)")
            else:
                why = (f"per.cuda: float32 nodes need the extension "
                       f"per._cuda32, which is not installed ({e}); it is "
                       "built with per._cuda, when nvcc is on PATH while pip "
                       "installs per: put the CUDA toolkit's bin/ on PATH and "
                       "reinstall (pip install --force-reinstall --no-binary "
                       "per-replay per-replay, or pip install . from a "
                       "checkout)")
            got = (None, why)
        _float_mods[host] = got
    return got


def _extension(host: bool, nodes: _DType) -> _Extension:
    """The extension of per.cuda (host False) or per.cuda.host (True) for
    the node type; ImportError naming the missing module."""
    if nodes == _F32:
        mod, why = _float_module(host)
    else:
        mod, why = (_host_mod, _host_why) if host else (_cuda_mod, _why)
    if mod is None:
        raise ImportError(why)
    if mod.real_bytes() != nodes.itemsize:
        name = ("per._cuda_host" if host else "per._cuda") + (
            "32" if nodes == _F32 else "")
        raise ImportError(f"{name} was built with {mod.real_bytes()}-byte "
                          f"nodes, not {nodes}: reinstall per")
    return mod


def _host_modules() -> _t.List[_Extension]:
    """The host backend's extensions imported so far."""
    return [m for m in (_host_mod, _float_mods.get(True, (None, ""))[0])
            if m is not None]


def _host_memory(mod: _Extension, what: str, ptr: int, nbytes: int) -> str:
    """Why [ptr, ptr + nbytes) is not the host backend's device memory of
    mod: the memory of its other node type, or none of its own."""
    for other in _host_modules():
        if other is not mod and other.on_device(ptr, nbytes):
            mine, its = ("float32", "float64") if mod.real_bytes() == 4 else (
                "float64", "float32")
            return (f"{what} is in the host backend's memory for {its} "
                    f"nodes, this object's is for {mine} nodes (each node "
                    "type emulates device memory of its own): make it with "
                    f"per.cuda.host.to_device(..., nodes=numpy.{mine})")
    return (f"{what} is not in the host backend's device memory: make it "
            "with per.cuda.host.to_device")

__all__ = ["ReplayBuffer", "SumTree", "DeviceArray", "available",
           "unavailable_reason", "device_count", "to_device", "to_host", "host"]

#: What a buffer's ``wrap`` makes of the DeviceArray views it returns (a
#: torch.Tensor by default when PyTorch is imported): any type.
_View = _t.Any
#: A CUDA device: an int, "cuda:N", a torch.device, or None (the current).
_Device = object
#: A stream: an int cudaStream_t handle, an object with .cuda_stream
#: (torch) or .ptr (cupy), or None (each call's current stream, PyTorch's
#: or CuPy's).
_Stream = object

# DLPack type codes
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BOOL = 0, 1, 2, 6
_TAGS = {1: "add_batch", 2: "sample", 3: "update", 4: "update_sequences"}
_TREE_TAGS = {1: "set_batch", 2: "sample", 3: "find"}


def available(nodes: _NodesLike = None) -> bool:
    """Whether per.cuda's GPU extension for the node type (float64, the
    default, or float32) is installed (a device may still be missing:
    device_count() says)."""
    if _nodes_of(nodes, "per.cuda.available: nodes") == _F32:
        return _float_module(False)[0] is not None
    return _cuda_mod is not None


def unavailable_reason(nodes: _NodesLike = None) -> str:
    """Why per.cuda is not available for the node type ("" when it is)."""
    if _nodes_of(nodes, "per.cuda.unavailable_reason: nodes") == _F32:
        return _float_module(False)[1]
    return _why


def _module() -> _Extension:
    if _cuda_mod is None:
        raise ImportError(_why)
    return _cuda_mod


def device_count() -> int:
    """CUDA devices visible to the CUDA runtime: 0 without a driver, or
    without per._cuda (available())."""
    return int(_cuda_mod.device_count()) if _cuda_mod is not None else 0


if _t.TYPE_CHECKING:
    DeviceArray = _stub.DeviceArray
elif _cuda_mod is not None:
    DeviceArray = _cuda_mod.DeviceArray
elif _host_mod is not None:
    DeviceArray = _host_mod.DeviceArray
else:  # pragma: no cover
    class DeviceArray:
        """A view of device memory (per._cuda is not installed)."""


def _raise(call: str, status: int, extra: str = "") -> _t.NoReturn:
    name = _per_pkg.status_name(status)
    msg = extra or ""
    raise _error(name, f"{call}{': ' + msg if msg else ''}")


def _typestr(code: int, bits: int, lanes: int, what: str) -> str:
    if lanes != 1:
        raise TypeError(f"{what}: vector dtypes (lanes {lanes}) are not supported")
    if code == _DL_BOOL and bits == 8:
        return "|b1"
    kind = {_DL_INT: "i", _DL_UINT: "u", _DL_FLOAT: "f"}.get(code)
    if kind is None or bits % 8:
        raise TypeError(f"{what}: DLPack dtype code {code} with {bits} bits "
                        "is not a NumPy dtype per stores")
    return ("|" if bits == 8 else "<") + kind + str(bits // 8)


def _dl_code(dt: _DType) -> _t.Tuple[int, int]:
    if dt.kind == "b":
        return _DL_BOOL, 8
    code = {"i": _DL_INT, "u": _DL_UINT, "f": _DL_FLOAT}.get(dt.kind)
    if code is None:
        raise TypeError(f"no DLPack dtype for {dt}")
    return code, dt.itemsize * 8


class _Arr(_t.NamedTuple):
    """What per.cuda needs of an input array: where it is, its layout
    (strides in bytes) and the stream its producer named (the "stream" of
    its interface dict; None: nothing to wait for)."""
    ptr: int
    shape: _t.Tuple[int, ...]
    dtype: _DType
    strides: _t.Tuple[int, ...]
    stream: _t.Optional[int] = None


def _contiguous_strides(shape: _t.Tuple[int, ...], size: int) -> _t.Tuple[int, ...]:
    out: _t.List[int] = []
    s = size
    for d in reversed(shape):
        out.append(s)
        s *= d
    return tuple(reversed(out))


class _Backend:
    """The extension (per._cuda or per._cuda_host) and what differs."""

    def __init__(self, mod: _Extension, name: str) -> None:
        self.mod = mod
        self.name = name
        self.host = mod.backend == "host"

    def device_of(self, device: _Device) -> int:
        if self.host:
            if device not in (None, 0, "cpu", "host"):
                raise ValueError(f"the host backend has one device, 0: got {device!r}")
            return 0
        if device is None:
            torch = _sys.modules.get("torch")
            if torch is not None:
                return int(torch.cuda.current_device())
            return int(self.mod.current_device())
        if isinstance(device, (int, _np.integer)) and not isinstance(device, bool):
            return int(device)
        idx = getattr(device, "index", None)
        typ = getattr(device, "type", None)
        if typ == "cuda":
            return int(idx) if idx is not None else int(self.mod.current_device())
        if isinstance(device, str) and device.startswith("cuda"):
            rest = device[4:]
            if rest == "":
                return int(self.mod.current_device())
            if rest.startswith(":") and rest[1:].isdigit():
                return int(rest[1:])
        raise ValueError(f"device must be a CUDA device (an int, 'cuda:N' or a "
                         f"torch.device), not {device!r}")

    def stream_of(self, stream: _Stream, device: int) -> int:
        """The stream handle a call enqueues on: stream as given (an int
        cudaStream_t handle, where 0 and 1 are the legacy default stream
        and 2 the per-thread one, or an object with .cuda_stream, as
        torch.cuda.Stream, or .ptr, as cupy's), else PyTorch's current
        stream when PyTorch is imported, else CuPy's; with neither, a
        ValueError: the legacy default stream is taken only when asked
        for (where no GPU is at all, 0: the call then fails naming the
        CUDA error). The host backend has no streams (its work runs in order as it
        is enqueued): None is 0 there, whatever is imported."""
        if stream is None:
            if self.host:
                return 0
            torch = _sys.modules.get("torch")
            if torch is not None:
                return int(torch.cuda.current_stream(device).cuda_stream)
            cupy = _sys.modules.get("cupy")
            if cupy is not None:
                return int(cupy.cuda.get_current_stream().ptr)
            if self.mod.device_count() == 0:
                return 0  # nothing will be enqueued: the call names the
                # CUDA error (no device) rather than a missing stream
            raise ValueError(f"{self.name}: no stream given and neither PyTorch "
                             "nor CuPy is imported to name the current one; pass "
                             "stream=... (an int cudaStream_t handle or a stream "
                             "object)")
        if isinstance(stream, (int, _np.integer)) and not isinstance(stream, bool):
            h = int(stream)
        else:
            for attr in ("cuda_stream", "ptr"):
                v = getattr(stream, attr, None)
                if isinstance(v, int) and not isinstance(v, bool):
                    h = v
                    break
            else:
                raise TypeError(f"{self.name}: stream must be an int handle or a "
                                "stream object with .cuda_stream or .ptr, not "
                                f"{type(stream).__name__}")
        if h < 0:
            raise ValueError(f"{self.name}: stream handle {h} is negative")
        return h

    def _producer(self, d: _t.Dict[str, object], iface: str,
                  what: str) -> _t.Optional[int]:
        """The producer's stream of an interface dict (its "stream", from
        version 3 of __cuda_array_interface__): None when absent or None
        (the data is ready for any stream), 1 the legacy default stream, 2
        the per-thread one, else a handle; 0 is refused, as the interface
        disallows it."""
        s = d.get("stream")
        if s is None:
            return None
        if not isinstance(s, (int, _np.integer)) or isinstance(s, bool):
            raise TypeError(f"{what}: {iface}'s stream must be an int or None, "
                            f"not {type(s).__name__}")
        if s == 0:
            raise ValueError(f"{what}: {iface} gives stream 0, which the "
                             "interface disallows (1 is the legacy default "
                             "stream, 2 the per-thread one, None no stream)")
        if s < 0:
            raise ValueError(f"{what}: {iface} gives stream {int(s)}, a "
                             "negative handle")
        return int(s)

    def after(self, call: str, device: int, stream: int, *arrs: _Arr) -> None:
        """Make what the call enqueues on stream next wait for the work its
        inputs' producers enqueued on their own streams (_Arr.stream, where
        it differs from the call's: an event recorded there and waited for
        on stream, by the device; the host never waits). 0 and 1 are both
        the legacy default stream."""
        own = 1 if stream == 0 else stream
        done: _t.Set[int] = set()
        for a in arrs:
            if a.stream is None or a.stream == own or a.stream in done:
                continue
            done.add(a.stream)
            self.check(self.mod.stream_wait(device, a.stream, stream), call)

    def array(self, a: object, what: str, device: int, stream: int, *,
              anywhere: bool = False) -> _Arr:
        """Where a device array is, from __cuda_array_interface__ (GPU),
        __array_interface__ (the host backend) or __dlpack__; refused when
        it is not this backend's device memory (with anywhere, the host
        backend's memory of either node type is taken: the caller picks
        the extension it belongs to). The interface's "stream" is kept
        for after(); __dlpack__ is given the call's stream."""
        iface = "__array_interface__" if self.host else "__cuda_array_interface__"
        d = getattr(a, iface, None)
        producer = None
        if isinstance(d, dict) and "data" in d:
            producer = self._producer(d, iface, what)
            ptr = int(d["data"][0] or 0)
            shape = tuple(int(x) for x in d["shape"])
            dt = _np.dtype(d["typestr"])
            st = d.get("strides")
            strides = (_contiguous_strides(shape, dt.itemsize) if st is None
                       else tuple(int(x) for x in st))
            if not self.host:
                dev = self._pointer_device(a, ptr)
                if dev is not None and dev != device:
                    raise ValueError(f"{what} is on cuda:{dev}, the buffer on "
                                     f"cuda:{device}")
        elif hasattr(a, "__dlpack__"):
            # the producer orders its work before the call's stream itself
            # (DLPack's stream: 1 the legacy default stream, which the
            # call's 0 is; the host backend's arrays take None only)
            dl_stream = None if self.host else (stream if stream else 1)
            try:
                info = self.mod.dlpack_info(a, dl_stream)
            except (BufferError, TypeError, ValueError, RuntimeError) as e:
                # NumPy's arrays refuse a stream (ValueError)
                raise TypeError(f"{what}: {e}") from None
            ptr, dtype_, dev_id, code, bits, lanes, shape, st = info
            want = 1 if self.host else 2
            if dtype_ != want and not (not self.host and dtype_ == 13):
                place = {1: "host (CPU) memory", 2: "CUDA memory",
                         3: "pinned host memory", 13: "managed memory"}.get(
                             dtype_, f"DLPack device type {dtype_}")
                raise ValueError(f"{what} is in {place}: per.cuda takes "
                                 f"{'the host backend arrays' if self.host else 'CUDA device arrays'}")
            if not self.host and dev_id != device:
                raise ValueError(f"{what} is on cuda:{dev_id}, the buffer on "
                                 f"cuda:{device}")
            dt = _np.dtype(_typestr(code, bits, lanes, what))
            shape = tuple(shape)
            strides = (_contiguous_strides(shape, dt.itemsize) if st is None
                       else tuple(int(x) * dt.itemsize for x in st))
        else:
            lib = "per.cuda.host.to_device" if self.host else (
                "a CUDA tensor (torch.Tensor.cuda(), cupy.asarray)")
            raise TypeError(f"{what} must be a device array ({lib}), not "
                            f"{type(a).__name__}")
        nbytes = 0 if 0 in shape else (
            sum((n - 1) * abs(s) for n, s in zip(shape, strides)) + dt.itemsize)
        if (self.host and nbytes and not anywhere and
                not self.mod.on_device(ptr, nbytes)):
            raise ValueError(_host_memory(self.mod, what, ptr, nbytes))
        return _Arr(ptr, shape, dt, strides, producer)

    @staticmethod
    def _pointer_device(a: object, ptr: int) -> _t.Optional[int]:
        dev = getattr(a, "device", None)
        idx = getattr(dev, "index", None)
        if isinstance(idx, int):
            return idx
        idx = getattr(dev, "id", None)
        return idx if isinstance(idx, int) else None

    def view(self, owner: object, ptr: int, device: int, dt: _DType,
             shape: _t.Tuple[int, ...],
             strides_el: _t.Tuple[int, ...]) -> DeviceArray:
        return self.mod.view(owner, ptr, device, _dl_code(dt), dt.str, shape,
                             strides_el)

    def check(self, status: int, call: str) -> None:
        if status:
            extra = ""
            if status == _per.PER_ERR_DEVICE:
                code, text = self.mod.last_error()
                extra = f"CUDA error {code}: {text}"
            _raise(call, status, extra)


def _default_wrap(host: bool) -> _t.Callable[[DeviceArray], _View]:
    torch = _sys.modules.get("torch")
    if torch is not None:
        return _t.cast(_t.Callable[[DeviceArray], _View], torch.from_dlpack)
    return lambda a: a


def _rows(arr: _Arr, n_expected: _t.Optional[int], inner: _t.Tuple[int, ...],
          dt: _DType, what: str) -> _t.Tuple[int, int]:
    """(n, pitch) of an array of n rows of shape inner and dtype dt, each row
    contiguous; refused with a message that names `what` otherwise."""
    if arr.dtype != dt:
        raise TypeError(f"{what} is {arr.dtype}, the item stores {dt}: convert "
                        "it first (e.g. tensor.to(...))")
    want = (n_expected if n_expected is not None else "n",) + inner
    if len(arr.shape) != 1 + len(inner) or tuple(arr.shape[1:]) != inner or (
            n_expected is not None and arr.shape[0] != n_expected):
        raise ValueError(f"{what} has shape {arr.shape}, expected "
                         f"{tuple(want)}")
    n = arr.shape[0]
    inner_strides = _contiguous_strides(inner, dt.itemsize)
    if n and any(s != c for s, c, d in zip(arr.strides[1:], inner_strides, inner)
                 if d > 1):
        raise ValueError(f"{what}: each row must be contiguous (strides "
                         f"{arr.strides}); use .contiguous()")
    row = dt.itemsize * int(_np.prod(inner, dtype=_np.int64))
    pitch = arr.strides[0] if n > 1 else row
    if n > 1 and pitch < row:
        raise ValueError(f"{what}: rows overlap or run backwards (stride "
                         f"{pitch} bytes, row {row}); use .contiguous()")
    return n, pitch


def _pairs(b: _Backend, device: int, st: int, call: str,
           keys: _t.Tuple[str, object, str], values: _t.Tuple[str, object, str],
           limit: int, inner: _t.Tuple[int, ...] = ()) -> _t.Tuple[int, int, int]:
    """(keys' pointer, values' pointer, n) of two contiguous device arrays
    of n <= limit entries: keys 1-D, of a signed integer dtype (its
    unsigned twin taken as the same bits), values of their dtype and shape
    (n, *inner); each given as (name, array, typestr). Once both are
    accepted, stream st waits for their producers (_Backend.after)."""
    kname, karr, kdt = keys
    vname, varr, vdt = values
    want = _np.dtype(kdt)
    a = b.array(karr, f"{call}: {kname}", device, st)
    if a.dtype == _np.dtype(want.str.replace("i", "u")):
        a = a._replace(dtype=want)
    n, pitch = _rows(a, None, (), want, f"{call}: {kname}")
    v = b.array(varr, f"{call}: {vname}", device, st)
    _rows(v, n, inner, _np.dtype(vdt), f"{call}: {vname}")
    vrow = v.dtype.itemsize * int(_np.prod(inner, dtype=_np.int64))
    if n > 1 and (pitch != want.itemsize or v.strides[0] != vrow):
        raise ValueError(f"{call}: {kname} and {vname} must be contiguous")
    if n > limit:
        raise ValueError(f"{call}: {n} {kname}, more than max_batch {limit}")
    b.after(call, device, st, a, v)
    return a.ptr, v.ptr, n


class ReplayBuffer:
    """per.ReplayBuffer on a CUDA device (per_cuda_buffer).

    capacity, item and the keyword arguments alpha ... seq_eta mean what
    they mean for per.ReplayBuffer; not on the device: live_max. max_batch
    bounds every add_batch, sample and update, and the sequences of an
    update_sequences (device memory for the staging of that many items,
    and of max_batch * seq_len drawn steps, is allocated up front).
    device: a CUDA device (int, "cuda:N", torch.device; default the
    current one). stream: the default stream of the calls (an int
    cudaStream_t handle or a stream object; default each call's current
    stream, PyTorch's or else CuPy's, one of which must be imported when
    no stream is given: see per.cuda's "Streams"). wrap: turns the
    DeviceArray views sample() returns into your arrays (default
    torch.from_dlpack when PyTorch is imported, else the DeviceArray
    itself, which cupy.from_dlpack, jax.dlpack.from_dlpack, numba and
    numpy.from_dlpack take). nodes: the sum trees' node type (`self.nodes`),
    numpy.float64 (None, the default: double) or numpy.float32 (float,
    per._cuda32: the bits of per.ReplayBuffer(..., nodes=numpy.float32));
    `self.dtype` is the item's.
    """

    #: per.cuda.host's subclass: the host backend's extensions
    _host: bool = False

    def __init__(
        self,
        capacity: int,
        item: _per_pkg.ItemSpec,
        *,
        max_batch: int = 1024,
        device: _Device = None,
        stream: _Stream = None,
        wrap: _t.Optional[_t.Callable[[DeviceArray], _View]] = None,
        align: bool = False,
        nodes: _NodesLike = None,
        **config: _Unpack[_ReplayKeywords],
    ) -> None:
        call = "per.cuda.ReplayBuffer"
        _check_keywords("ReplayBuffer.__init__", config, _REPLAY_KEYS)
        self.nodes: _DType = _nodes_of(nodes, f"{call}: nodes")
        mod = _extension(self._host, self.nodes)
        self._b = _Backend(mod, "per.cuda")
        if config.get("live_max"):
            raise ValueError(f"{call}: live_max is not on the device; use "
                             "per.ReplayBuffer")
        dt = _item_dtype(item, align)
        capacity = _count(capacity, f"{call}: capacity")
        max_batch = _count(max_batch, f"{call}: max_batch")
        if not 0 < max_batch <= mod.MAX_BATCH:
            raise ValueError(f"{call}: max_batch must be in [1, {mod.MAX_BATCH}], "
                             f"got {max_batch}")
        seq_len = _count(config["seq_len"] if "seq_len" in config else
                         _defaults(capacity, dt.itemsize)["seq_len"],
                         f"{call}: seq_len")
        if seq_len and max_batch * seq_len > mod.MAX_BATCH:
            raise ValueError(f"{call}: max_batch * seq_len = {max_batch * seq_len}"
                             f" (an update_sequences' TD errors) must be <= "
                             f"{mod.MAX_BATCH}")
        self.dtype: _DType = dt
        self.max_batch: int = max_batch
        self.device: int = self._b.device_of(device)
        self._stream_default = stream
        self._wrap = wrap if wrap is not None else _default_wrap(self._b.host)
        cfg = _c_config(call, _REPLAY_KEYS, config,
                        {"capacity": capacity, "item_size": dt.itemsize})
        self.seq_len: int = seq_len
        # the fields sample() cannot hand out as views of the item rows
        # (an offset or row size off the field's alignment: a device
        # kernel may not read it) are copied into areas of their own
        self._fields: _t.List[_t.Tuple[str, int, _DType, _t.Tuple[int, ...], int, int]] = []
        extra = 0
        rows = max_batch * max(seq_len, 1)  # a sample's rows at most
        for name in dt.names or ():
            f, off = _field(dt, name)
            base, shape = f.base, f.shape
            nbytes = f.itemsize
            own = -1
            if off % base.alignment or dt.itemsize % base.alignment:
                own = extra
                extra += -(-rows * nbytes // 256) * 256
            self._fields.append((name, off, base, shape, nbytes, own))
        st = self._b.stream_of(stream, self.device)
        h, s, why = mod._Buffer(cfg, max_batch, extra, self.device, st)
        if s and why:  # a config error, named as per.ReplayBuffer names it
            _raise(call, s, why)
        self._b.check(s, call)
        assert h is not None  # status 0
        self._h = h
        self._ptrs: _t.Dict[str, int] = h.ptrs
        self.max_unique: int = h.config["max_unique"]
        self._views: _t.Dict[_t.Tuple[int, int], _t.Dict[str, _View]] = {}
        self._stale: _t.Optional[_View] = None

    # -- helpers -------------------------------------------------------------

    def _st(self, stream: _Stream) -> int:
        return self._b.stream_of(
            stream if stream is not None else self._stream_default, self.device)

    @property
    def capacity(self) -> int:
        return int(self._h.config["capacity"])

    @property
    def backend(self) -> str:
        """"cuda" (per._cuda or per._cuda32) or "host" (the CPU emulation,
        per._cuda_host or per._cuda_host32)."""
        return str(self._b.mod.backend)

    def __repr__(self) -> str:
        names = ", ".join(self.dtype.names or ())
        nodes = ", nodes=float32" if self.nodes == _F32 else ""
        return (f"per.cuda.ReplayBuffer(capacity={self.capacity}, fields=({names}), "
                f"max_batch={self.max_batch}, device={self.device}, "
                f"backend={self.backend!r}{nodes})")

    # -- adding ----------------------------------------------------------------

    def add_batch(self, items: object = None, *, ends: object = None,
                  stream: _Stream = None, **fields: object) -> None:
        """Enqueue n items as one trajectory (per_cuda_buffer_add_batch), at
        the max priority: either the item's fields as keywords (device
        arrays of shape (n, *field shape) and the field's dtype, each row
        contiguous), or items, a uint8 device array of n whole items in
        this buffer's layout (shape (n, item_size)). ends: None or a uint8
        device array of n episode ends (per.END_*). n in [0, max_batch].
        A bad end is a device error (status())."""
        call = "per.cuda.ReplayBuffer.add_batch"
        st = self._st(stream)
        isz = self.dtype.itemsize
        if items is not None and fields:
            raise TypeError(f"{call}: pass items or the fields as keywords, not both")
        ptr = 0
        inputs: _t.List[_Arr] = []
        if items is not None:
            a = self._b.array(items, f"{call}: items", self.device, st)
            inputs.append(a)
            n, pitch = _rows(a, None, (isz,), _np.dtype(_np.uint8), f"{call}: items")
            if n > 1 and pitch != isz:
                raise ValueError(f"{call}: items must be contiguous")
            ptr = a.ptr
            copies: _t.List[_t.Tuple[int, int, int, int]] = []
        else:
            got, names = set(fields), set(self.dtype.names or ())
            if got != names:
                raise ValueError(f"{call}: fields do not match the item: missing "
                                 f"{sorted(names - got)}, unknown {sorted(got - names)}")
            n = -1
            copies = []
            for name, off, base, shape, nbytes, _own in self._fields:
                what = f"{call}: field {name!r}"
                a = self._b.array(fields[name], what, self.device, st)
                inputs.append(a)
                k, pitch = _rows(a, None if n < 0 else n, shape, base, what)
                n = k
                copies.append((off, a.ptr, pitch, nbytes))
            if len(copies) == 1 and copies[0][0] == 0 and copies[0][3] == isz and (
                    n <= 1 or copies[0][2] == isz):
                ptr = copies[0][1]
                copies = []
        if n > self.max_batch:
            raise ValueError(f"{call}: {n} items, more than max_batch "
                             f"{self.max_batch}")
        eptr = 0
        if ends is not None:
            e = self._b.array(ends, f"{call}: ends", self.device, st)
            inputs.append(e)
            k, pitch = _rows(e, n, (), _np.dtype(_np.uint8), f"{call}: ends")
            if k > 1 and pitch != 1:
                raise ValueError(f"{call}: ends must be contiguous")
            eptr = e.ptr
        self._b.after(call, self.device, st, *inputs)
        stage = self._ptrs["stage"]
        mod = self._b.mod
        for off, src, pitch, nbytes in copies:
            if n:
                self._b.check(mod.copy2d(stage + off, isz, src, pitch, nbytes, n,
                                         self.device, st), call)
        self._b.check(self._h.add(ptr, n, eptr, st), call)

    # -- sampling --------------------------------------------------------------

    def _views_for(self, B: int, L: int) -> _t.Dict[str, _View]:
        """The views of a sample of B items (L == 0) or B sequences of L
        steps (leading shape (B, L), and "mask")."""
        v = self._views.get((B, L))
        if v is not None:
            return v
        b, dev, isz = self._b, self.device, self.dtype.itemsize
        out: _t.Dict[str, _View] = {}
        lead = (B, L) if L else (B,)
        for name, off, base, shape, nbytes, own in self._fields:
            es = base.itemsize
            row = isz // es if own < 0 else nbytes // es  # one step's
            ptr = self._ptrs["out"] + off if own < 0 else self._ptrs["extra"] + own
            steps = (L * row, row) if L else (row,)
            out[name] = self._wrap(b.view(self._h, ptr, dev, base, lead + shape,
                                          steps + _contiguous_strides(shape, 1)))
        if L:
            out["mask"] = self._wrap(b.view(self._h, self._ptrs["mask"], dev,
                                            _np.dtype(_np.bool_), lead, (L, 1)))
        out["ids"] = self._wrap(b.view(self._h, self._ptrs["ids"], dev,
                                       _np.dtype("<i8"), (B,), (1,)))
        out["weights"] = self._wrap(b.view(self._h, self._ptrs["weights"], dev,
                                           _np.dtype("<f4"), (B,), (1,)))
        self._views[(B, L)] = out
        return out

    def sample(self, batch_size: int, *, unique: bool = False,
               beta: _t.Optional[float] = None, window: int = 0,
               trajectories: bool = False, sequences: bool = False,
               stream: _Stream = None) -> _t.Dict[str, _View]:
        """Enqueue a draw of batch_size items (per_cuda_buffer_sample) and
        return views of the buffer's output memory: the item's fields
        (shape (batch_size, *field shape)), "ids" (int64: per's uint64 ids,
        the same bits: the slot in the low 32 bits, its generation in the
        high 32; pass them back to update as they are) and "weights"
        (float32 IS weights). Every sample, of any size, writes the same
        output memory, and the views of one size are the same objects
        each time: a later sample overwrites them (clone what you keep),
        which is what lets a CUDA graph capture the call. unique:
        batch_size distinct items (batch_size <= max_unique), drawn as
        per.ReplayBuffer draws them, by one device thread: about
        batch_size times a descent's latency, so keep it out of the hot
        loop of large batches. beta: a fixed beta instead of the schedule;
        window: draw from the newest `window` items only; trajectories: a
        window of whole trajectories. sequences: batch_size sequences of
        seq_len steps (a buffer made with seq_len), as per.ReplayBuffer
        draws them: the fields' leading shape is (batch_size, seq_len),
        "ids" are sequence ids (for update_sequences), "mask" (bool, False
        after an episode's end) is added. An empty buffer, fewer than
        batch_size items (sequences) with priority > 0 for unique, or no
        complete sequence, is a device error (status())."""
        call = "per.cuda.ReplayBuffer.sample"
        B = _count(batch_size, f"{call}: batch_size")
        if not 0 < B <= self.max_batch:
            raise ValueError(f"{call}: batch_size must be in [1, max_batch = "
                             f"{self.max_batch}], got {B}")
        window = _count(window, f"{call}: window")
        flags = 0
        if unique:
            if B > self.max_unique:
                raise ValueError(f"{call}: unique: batch_size {B} > max_unique "
                                 f"{self.max_unique}")
            flags |= _per.SAMPLE_UNIQUE
        b = 0.0
        if beta is not None:
            b = _real(beta, f"{call}: beta")
            flags |= _per.SAMPLE_BETA
        if trajectories:
            flags |= _per.SAMPLE_TRAJECTORIES
        L = 0
        if sequences:
            if not self.seq_len:
                raise ValueError(f"{call}: sequences needs a buffer made with "
                                 "seq_len > 0")
            flags |= _per.SAMPLE_SEQUENCES
            L = self.seq_len
        st = self._st(stream)
        use_opts = bool(flags or window)
        self._b.check(self._h.sample(B, flags, b, window, use_opts, st), call)
        isz, mod = self.dtype.itemsize, self._b.mod
        for _name, off, _base, _shape, nbytes, own in self._fields:
            if own >= 0:
                self._b.check(mod.copy2d(self._ptrs["extra"] + own, nbytes,
                                         self._ptrs["out"] + off, isz, nbytes,
                                         B * max(L, 1), self.device, st), call)
        return dict(self._views_for(B, L))

    # -- priorities ------------------------------------------------------------

    def update(self, ids: object, td: object, *, stream: _Stream = None) -> _View:
        """Enqueue new priorities (|td| + eps)^alpha for the ids sample gave
        (per_cuda_buffer_update): ids an int64 (or uint64) device array of
        n ids, td a float32 device array of n TD errors, n <= max_batch.
        Ids whose slot was overwritten since the draw are skipped. Returns
        a 0-d int32 device view of their count (written by the device). A
        NaN or infinite TD error, or an id never handed out, is a device
        error (status()) and then nothing is applied."""
        call = "per.cuda.ReplayBuffer.update"
        st = self._st(stream)
        a, t, n = _pairs(self._b, self.device, st, call, ("ids", ids, "<i8"),
                         ("td", td, "<f4"), self.max_batch)
        self._b.check(self._h.update(a, t, n, st), call)
        if self._stale is None:
            self._stale = self._wrap(self._b.view(
                self._h, self._ptrs["stale"], self.device, _np.dtype("<i4"), (), ()))
        return self._stale

    def update_sequences(self, ids: object, td: object, *,
                         stream: _Stream = None) -> _View:
        """Enqueue per_cuda_buffer_update_seq for the sequence ids a
        sequences sample gave: ids an int64 (or uint64) device array of n
        <= max_batch ids, td a float32 device array of shape (n, seq_len),
        one TD error per step (the masked steps' are not used but must be
        finite); where sequences overlap, the last write of a step wins,
        and every sequence holding a changed step gets its priority again.
        Returns a 0-d int32 device view of the stale ids' count. A NaN or
        infinite TD error, or an id never handed out, is a device error
        (status(), with the position of the sequence) and then nothing is
        applied."""
        call = "per.cuda.ReplayBuffer.update_sequences"
        if not self.seq_len:
            raise ValueError(f"{call}: a buffer made with seq_len > 0 only")
        st = self._st(stream)
        a, t, n = _pairs(self._b, self.device, st, call, ("ids", ids, "<i8"),
                         ("td", td, "<f4"), self.max_batch, (self.seq_len,))
        self._b.check(self._h.update_seq(a, t, n, st), call)
        if self._stale is None:
            self._stale = self._wrap(self._b.view(
                self._h, self._ptrs["stale"], self.device, _np.dtype("<i4"), (), ()))
        return self._stale

    # -- status and state ------------------------------------------------------

    def status(self, *, clear: bool = True, stream: _Stream = None) -> None:
        """Wait for the stream and raise, as per.Error, the first error the
        device met in this buffer's calls since the last status() (which
        call, and for a batch the position of the first bad entry); with
        clear (the default) it is forgotten after. Never call it inside a
        graph capture (it waits)."""
        st = self._st(stream)
        s, code, tag, pos = self._h.check(st, clear)
        self._b.check(s, "per.cuda.ReplayBuffer.status")
        if code:
            what = _TAGS.get(tag, "a call")
            where = (f" at position {pos}" if what in
                     ("add_batch", "update", "update_sequences") else "")
            _raise(f"per.cuda.ReplayBuffer.{what}", code,
                   f"reported by the device{where}")

    def counters(self, *, stream: _Stream = None) -> _t.Dict[str, _t.Any]:
        """The buffer's counters as the device holds them once the stream
        has run what was enqueued (per_cuda_buffer_counters; waits): size,
        pos, added, trajectories, step (the beta step) and max_leaf, as
        per.ReplayBuffer.counters names them (a method here: it waits)."""
        r = self._h.counters(self._st(stream))
        self._b.check(r[0], "per.cuda.ReplayBuffer.counters")
        return dict(zip(("size", "pos", "added", "trajectories", "step", "max_leaf"),
                        r[1:]))

    def __len__(self) -> int:
        """Items stored (waits for the current stream: counters())."""
        return int(self.counters()["size"])

    def synchronize(self, stream: _Stream = None) -> None:
        """Wait until the stream has run everything enqueued on it."""
        self._b.check(self._b.mod.synchronize(self.device, self._st(stream)),
                      "per.cuda.ReplayBuffer.synchronize")

    def clear(self, *, stream: _Stream = None) -> None:
        """Empty the buffer, as a new one with the same config."""
        self._b.check(self._h.reset(self._st(stream)), "per.cuda.ReplayBuffer.clear")

    def to_cpu(self, *, stream: _Stream = None) -> _per_pkg.ReplayBuffer:
        """A per.ReplayBuffer with this buffer's state and node type, byte
        for byte what a per.ReplayBuffer given the same calls holds
        (per_cuda_buffer_download; waits for the stream). Save it with its
        save()."""
        cfg = self._h.config
        cpu = _per_pkg.ReplayBuffer(cfg["capacity"], self.dtype, nodes=self.nodes,
                                    **_keywords(cfg, _REPLAY_KEYS))
        self._b.check(self._h.download(cpu, self._st(stream)),
                      "per.cuda.ReplayBuffer.to_cpu")
        return cpu

    def from_cpu(self, cpu: _per_pkg.ReplayBuffer, *, stream: _Stream = None) -> None:
        """Take a per.ReplayBuffer's state (its items, priorities, stream and
        counters, and its alpha, betas, eps, max_priority, seed and
        seq_eta): it must have this buffer's node type, capacity, item
        layout, seq_len and seq_stride (per_cuda_buffer_upload; waits for
        the copies)."""
        call = "per.cuda.ReplayBuffer.from_cpu"
        if not isinstance(cpu, _per_pkg.ReplayBuffer):
            raise TypeError(f"{call}: a per.ReplayBuffer, not {type(cpu).__name__}")
        if cpu.nodes != self.nodes:
            raise TypeError(f"{call}: the CPU buffer has {cpu.nodes} nodes, "
                            f"this one {self.nodes} (make it with "
                            f"per.ReplayBuffer(..., nodes=numpy.{self.nodes}))")
        if cpu.dtype != self.dtype:
            raise ValueError(f"{call}: the CPU buffer's items are {cpu.dtype}, "
                             f"these {self.dtype}")
        self._b.check(self._h.upload(cpu, self._st(stream)), call)


# help() and inspect.signature show the keywords with the C defaults
_signature(ReplayBuffer.__init__, _REPLAY_KEYS, _defaults(1, 1),
           _ReplayKeywords)


class SumTree:
    """per_cuda_tree: per.h's sum tree in device memory (root at node 1,
    leaf i at node L + i), the same bits as per.SumTree under the same
    calls. set_batch and sample enqueue on the stream; total, leaves and
    nodes are views of the tree's memory (read them after the stream has
    run the calls). dtype: the node type (`self.dtype`), numpy.float64
    (double, the default) or numpy.float32 (float, per._cuda32: the bits
    of per.SumTree(capacity, dtype=numpy.float32)); every value in or out
    is of it."""

    #: per.cuda.host's subclass: the host backend's extensions
    _host: bool = False

    def __init__(self, capacity: int, *, max_batch: int = 1024, seed: int = 0,
                 device: _Device = None, stream: _Stream = None,
                 wrap: _t.Optional[_t.Callable[[DeviceArray], _View]] = None,
                 dtype: _NodesLike = _np.float64) -> None:
        call = "per.cuda.SumTree"
        real = _nodes_of(dtype, f"{call}: dtype")
        mod = _extension(self._host, real)
        self._b = _Backend(mod, call)
        capacity = _count(capacity, f"{call}: capacity")
        max_batch = _count(max_batch, f"{call}: max_batch")
        self.seed: int = _count(seed, f"{call}: seed", 64)
        self.device: int = self._b.device_of(device)
        self._stream_default = stream
        self._wrap = wrap if wrap is not None else _default_wrap(self._b.host)
        h, s = mod._Tree(capacity, max_batch, self.device,
                         self._b.stream_of(stream, self.device))
        self._b.check(s, call)
        assert h is not None  # status 0
        self._h = h
        self.capacity: int
        self.leaves: int
        self.max_batch: int
        self.capacity, self.leaves, self.max_batch = h.shape
        self._ptrs: _t.Dict[str, int] = h.ptrs
        self._out: _t.Dict[int, _t.Tuple[_View, _View]] = {}
        self.dtype: _DType = real
        self.real: _DType = real  # the same: the node type
        L = self.leaves
        self.nodes = self._wrap(self._b.view(h, self._ptrs["nodes"], self.device,
                                             real, (2 * L,), (1,)))
        self.leaf_values = self._wrap(self._b.view(
            h, self._ptrs["nodes"] + L * real.itemsize, self.device, real,
            (self.capacity,), (1,)))
        self.total = self._wrap(self._b.view(
            h, self._ptrs["nodes"] + real.itemsize, self.device, real, (), ()))

    def _st(self, stream: _Stream) -> int:
        return self._b.stream_of(
            stream if stream is not None else self._stream_default, self.device)

    def __len__(self) -> int:
        return int(self.capacity)

    def set_batch(self, idx: object, p: object, *, stream: _Stream = None) -> None:
        """Enqueue leaves idx[j] = p[j] (per_cuda_tree_set_batch): idx an
        int32 (or uint32) device array, p a device array of the tree's
        dtype (float64 or float32), n <= max_batch; duplicates: the last
        wins. A bad index or value is a device error (status()), and then
        nothing is written."""
        call = "per.cuda.SumTree.set_batch"
        st = self._st(stream)
        a, v, n = _pairs(self._b, self.device, st, call, ("idx", idx, "<i4"),
                         ("p", p, self.real.str), self.max_batch)
        self._b.check(self._h.set(a, v, n, st), call)

    def sample(self, batch_size: int, *,
               stream: _Stream = None) -> _t.Tuple[_View, _View]:
        """Enqueue a stratified draw of batch_size leaves (per_cuda_tree_sample
        with the tree's seed and its device counter, which each draw
        advances: per.SumTree.sample with per.Rng(seed) gives the same)
        and return views (idx int32, values of the tree's dtype),
        overwritten by the next sample of the same size. An empty tree is
        a device error (status())."""
        call = "per.cuda.SumTree.sample"
        B = _count(batch_size, f"{call}: batch_size")
        if not 0 < B <= self.max_batch:
            raise ValueError(f"{call}: batch_size must be in [1, max_batch = "
                             f"{self.max_batch}], got {B}")
        self._b.check(self._h.sample(B, self.seed, self._st(stream)), call)
        return self._views(B)

    def find(self, u: object, *, stream: _Stream = None) -> _t.Tuple[_View, _View]:
        """Enqueue the leaves whose prefix intervals hold u (per_cuda_tree_find,
        per.SumTree.find_batch's leaves): u a device array of n <=
        max_batch values of the tree's dtype (float64 or float32), u >= total
        giving the last leaf with mass. Returns views (idx int32, values),
        the memory sample() returns too. A NaN or negative u, or an empty
        tree, is a device error (status())."""
        call = "per.cuda.SumTree.find"
        st = self._st(stream)
        a = self._b.array(u, f"{call}: u", self.device, st)
        n, pitch = _rows(a, None, (), self.real, f"{call}: u")
        if n > 1 and pitch != self.real.itemsize:
            raise ValueError(f"{call}: u must be contiguous")
        if not 0 < n <= self.max_batch:
            raise ValueError(f"{call}: {n} values; 1 to max_batch = "
                             f"{self.max_batch}")
        self._b.after(call, self.device, st, a)
        self._b.check(self._h.find(a.ptr, n, st), call)
        return self._views(n)

    def _views(self, B: int) -> _t.Tuple[_View, _View]:
        out = self._out.get(B)
        if out is None:
            out = (self._wrap(self._b.view(self._h, self._ptrs["idx"], self.device,
                                           _np.dtype("<i4"), (B,), (1,))),
                   self._wrap(self._b.view(self._h, self._ptrs["val"], self.device,
                                           self.real, (B,), (1,))))
            self._out[B] = out
        return out

    def status(self, *, clear: bool = True, stream: _Stream = None) -> None:
        """As ReplayBuffer.status: the first device error since the last."""
        s, code, tag, pos = self._h.check(self._st(stream), clear)
        self._b.check(s, "per.cuda.SumTree.status")
        if code:
            what = _TREE_TAGS.get(tag, "a call")
            where = f" at position {pos}" if what in ("set_batch", "find") else ""
            _raise(f"per.cuda.SumTree.{what}", code, f"reported by the device{where}")


def _to_device_with(mod: _Extension, a: object, device: _Device,
                    stream: _Stream) -> DeviceArray:
    """A copy of a in mod's device memory."""
    b = _Backend(mod, "per.cuda.to_device")
    dev = b.device_of(device)
    st = b.stream_of(stream, dev)
    arr = _np.array(a, order="C", copy=True)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"to_device: a {arr.dtype} array; per.cuda takes bool, "
                        "int, uint and float")
    mem = mod.Memory(max(arr.nbytes, 1), dev)
    if isinstance(mem, int):  # the allocation failed: its status
        b.check(mem, "per.cuda.to_device")
    assert not isinstance(mem, int)
    if arr.nbytes:
        b.check(mod.copy(mem.ptr, arr.ctypes.data, arr.nbytes, 0, dev, st),
                "per.cuda.to_device")
    return b.view(mem, mem.ptr, dev, arr.dtype, arr.shape,
                  tuple(s // arr.itemsize for s in arr.strides))


def _to_host_with(mod: _Extension, a: object, stream: _Stream) -> _Array:
    """A NumPy copy of a device array; on the host backend, of the memory
    of either node type (the copy is made by the extension it belongs
    to)."""
    b = _Backend(mod, "per.cuda.to_host")
    what = "per.cuda.to_host: the array"
    dev = 0 if b.host else b.device_of(getattr(a, "device", None)
                                       if getattr(getattr(a, "device", None),
                                                  "type", None) == "cuda"
                                       else None)
    st = b.stream_of(stream, dev)
    arr = b.array(a, what, dev, st, anywhere=True)
    if any(s < 0 for s in arr.strides):
        raise ValueError("per.cuda.to_host: negative strides")
    span = 0 if 0 in arr.shape else (
        sum((n - 1) * s for n, s in zip(arr.shape, arr.strides)) + arr.dtype.itemsize)
    if b.host and span:
        owner = [m for m in _host_modules() if m.on_device(arr.ptr, span)]
        if not owner:
            raise ValueError(_host_memory(mod, what, arr.ptr, span))
        mod = owner[0]
        b = _Backend(mod, "per.cuda.to_host")
    es = arr.dtype.itemsize
    raw = _np.zeros(-(-max(span, 1) // es) * es, _np.uint8)
    if span:
        b.after("per.cuda.to_host", dev, st, arr)
        b.check(mod.copy(raw.ctypes.data, arr.ptr, span, 1, dev, st),
                "per.cuda.to_host")
    view = _np.lib.stride_tricks.as_strided(raw.view(arr.dtype), arr.shape,
                                            arr.strides)
    return _np.array(view)


def to_host(a: object, *, stream: _Stream = None) -> _Array:
    """A NumPy copy of a device array (any strides >= 0): the copy runs on
    stream (as the buffers' calls pick it), after the array's producer
    stream where its __cuda_array_interface__ names one, and is waited
    for."""
    return _to_host_with(_module(), a, stream)


def to_device(a: object, device: _Device = None, *,
              stream: _Stream = None) -> DeviceArray:
    """A copy of a NumPy-convertible array in device memory, as a
    DeviceArray: the copy runs on stream (as the buffers' calls pick it)
    and is waited for."""
    return _to_device_with(_module(), a, device, stream)


def _host_namespace() -> _types.SimpleNamespace:
    class HostReplayBuffer(ReplayBuffer):
        __doc__ = ReplayBuffer.__doc__
        _host = True

    class HostSumTree(SumTree):
        __doc__ = SumTree.__doc__
        _host = True

    HostReplayBuffer.__name__ = HostReplayBuffer.__qualname__ = "ReplayBuffer"
    HostSumTree.__name__ = HostSumTree.__qualname__ = "SumTree"

    def host_to_host(a: object, *, stream: _Stream = None) -> _Array:
        """A NumPy copy of an array of the host backend's device memory,
        of either node type."""
        mods = _host_modules()
        if not mods:
            raise ImportError(_host_why)
        return _to_host_with(mods[0], a, stream)

    def host_to_device(a: object, device: _Device = None, *,
                       stream: _Stream = None,
                       nodes: _NodesLike = None) -> DeviceArray:
        """A copy of a NumPy-convertible array in the host backend's device
        memory for objects of the node type nodes (float64, the default,
        or float32: per._cuda_host32's memory, which only they take)."""
        dt = _nodes_of(nodes, "per.cuda.host.to_device: nodes")
        return _to_device_with(_extension(True, dt), a, device, stream)

    def host_available(nodes: _NodesLike = None) -> bool:
        """Whether per.cuda.host's extension for the node type is
        installed."""
        if _nodes_of(nodes, "per.cuda.host.available: nodes") == _F32:
            return _float_module(True)[0] is not None
        return _host_mod is not None

    def host_module_of(nodes: _NodesLike = None) -> _t.Any:
        """The host backend's extension for the node type (its shim's
        counters and graph calls: shim_races, capture_begin, ...);
        ImportError naming it when it is not installed. `module` is the
        float64 one (None when missing)."""
        return _extension(True, _nodes_of(nodes, "per.cuda.host.module_of: nodes"))

    return _types.SimpleNamespace(
        ReplayBuffer=HostReplayBuffer, SumTree=HostSumTree,
        to_device=host_to_device, to_host=host_to_host, available=host_available,
        module=_host_mod, module_of=host_module_of)


host = _host_namespace()
