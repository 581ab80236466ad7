"""per.config: the buffers' config keywords, their defaults and their
checks in one place, and the argument checks that per, per.cuda and
per.mpi share.

Public-internal: per, per.cuda and per.mpi import it; it is no user API
(not in per.__all__, and any release may change it). The API is
per.ReplayBuffer(capacity, item, **config) and its kin, whose keywords
are the Keys here.

A field of per_config is one Key here (and its TypedDict line, for type
checkers) and one line of pyper_config.h; nothing else restates it. The
buffers take the keywords as **config; c_config turns those given into
the dict the extension reads by key (pyper_config.h), which gives every
field left out per_config_default's value, so no default is written in
Python; keywords() turns a config dict (a buffer's .config, a
checkpoint's header) back into keywords, for pickling, from_file and
per.cuda's to_cpu; signature() shows the defaults, taken from
per_config_default, in help() and inspect.signature.
"""

import inspect
import math
import os
import typing as t

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from . import _per
from ._per import Error

if t.TYPE_CHECKING:
    import numpy.typing as npt

    Array = npt.NDArray[t.Any]
    DType = np.dtype[t.Any]
else:  # NumPy 1.21 has no np.dtype[...] at run time
    Array = np.ndarray
    DType = np.dtype

__all__ = [
    "Array", "DType", "ArrayLike", "DTypeLike", "ShapeLike", "Items",
    "ItemSpec", "PathArg", "Key", "REAL", "REAL32", "INT", "FLAG",
    "BUFFER_KEYS", "REPLAY_KEYS", "FRAME_KEYS", "BufferKeywords",
    "ReplayKeywords", "FrameKeywords", "check_keywords", "c_config",
    "keywords", "defaults", "frame_defaults", "signature", "error", "count",
    "real", "real32", "shape", "SAMPLE_KEYS", "item_dtype", "field",
    "F64", "F32", "NodesLike", "nodes_of",
]

#: What describes one stored item: a dtype, or a dict of field name ->
#: dtype, (dtype, shape) or example array.
ItemSpec = t.Union[DType, str, type, t.Mapping[str, object]]

#: A file path, as the save and load calls take it.
PathArg = t.Union[str, os.PathLike[str]]

#: What ReplayBuffer.add takes as its item(s): records, a dict of field
#: -> value(s), or None (the fields given as keywords instead).
Items = t.Optional[t.Union[ArrayLike, t.Mapping[str, ArrayLike]]]

#: A shape: one int or a sequence of them.
ShapeLike = t.Union[int, t.Sequence[int]]

#: The node types: float64 (double, per._per and per._cuda) and float32
#: (float, per._per32 and per._cuda32).
F64: DType = np.dtype(np.float64)
F32: DType = np.dtype(np.float32)
#: A node type: numpy.float64 (or None) or numpy.float32, or what names it.
NodesLike = t.Optional[DTypeLike]

# ---------------------------------------------------------------------------
# The config keywords
# ---------------------------------------------------------------------------

REAL = "real"      # a C double: any real number, checked here
REAL32 = "real32"  # a C float: as REAL, and refused where it overflows
INT = "int"        # a C integer: checked by the extension (pyper_config.h)
FLAG = "flag"      # a bit of per_config's flags: set when true


class Key(t.NamedTuple):
    """One config keyword: its name (the C field's, but for flags), its
    kind, the flags bit of a FLAG, and whether None stands for the C
    default (max_unique=None: min(capacity, 65536), from the capacity)."""

    name: str
    kind: str
    bit: int = 0
    none_is_default: bool = False


#: per_config's fields and flags, as per.ReplayBuffer, per.FrameBuffer and
#: per.cuda.ReplayBuffer take them (in per_config's order).
BUFFER_KEYS: t.Tuple[Key, ...] = (
    Key("alpha", REAL),
    Key("beta0", REAL),
    Key("beta1", REAL),
    Key("beta_steps", INT),
    Key("eps", REAL),
    Key("max_priority", REAL),
    Key("seed", INT),
    Key("weights_buffer_max", FLAG, _per.WEIGHTS_BUFFER_MAX),
    Key("max_unique", INT, none_is_default=True),
    Key("seq_len", INT),
    Key("seq_stride", INT),
    Key("seq_eta", REAL),
    Key("cross_episodes", FLAG, _per.SEQ_CROSS_EPISODES),
)

#: per.ReplayBuffer's and per.cuda.ReplayBuffer's (which refuses
#: live_max=True): PER_MAX_LIVE besides.
REPLAY_KEYS: t.Tuple[Key, ...] = BUFFER_KEYS + (
    Key("live_max", FLAG, _per.MAX_LIVE),
)

#: per.FrameBuffer's: per_frames_config's own fields that have a C
#: default, then the buffer's.
FRAME_KEYS: t.Tuple[Key, ...] = (
    Key("n", INT),
    Key("gamma", REAL32),
    Key("lanes", INT),
    Key("frames", INT),
) + BUFFER_KEYS


# The same keywords for type checkers (**config: Unpack[...]); a test
# holds them to the Keys above.
class BufferKeywords(t.TypedDict, total=False):
    alpha: float
    beta0: float
    beta1: float
    beta_steps: int
    eps: float
    max_priority: float
    seed: int
    weights_buffer_max: bool
    max_unique: t.Optional[int]
    seq_len: int
    seq_stride: int
    seq_eta: float
    cross_episodes: bool


class ReplayKeywords(BufferKeywords, total=False):
    live_max: bool


class FrameKeywords(BufferKeywords, total=False):
    n: int
    gamma: float
    lanes: int
    frames: int


def check_keywords(func: str, given: t.Mapping[str, object],
                   keys: t.Sequence[Key]) -> None:
    """A keyword that is none of keys: the TypeError Python raises for an
    unknown keyword of func ("ReplayBuffer.__init__")."""
    names = {k.name for k in keys}
    for name in given:
        if name not in names:
            raise TypeError(f"{func}() got an unexpected keyword argument "
                            f"{name!r}")


def c_config(call: str, keys: t.Sequence[Key], given: t.Mapping[str, object],
             fields: t.Mapping[str, object]) -> t.Dict[str, object]:
    """The dict the extension's buffers take (pyper_config.h): `fields`
    (capacity, item_size, ...: C fields the caller sets), then each
    keyword of keys that is given, in keys' order: a real checked here
    (TypeError or ValueError naming "call: name"), an integer as given
    (the extension checks it and names it the same way), None where it
    stands for the default left out, the flags as one field "flags". A
    field left out takes per_config_default's value in C."""
    out = dict(fields)
    flags = 0
    for k in keys:
        if k.name not in given:
            continue
        v = given[k.name]
        what = f"{call}: {k.name}"
        if k.kind == FLAG:
            flags |= k.bit if v else 0
        elif v is None and k.none_is_default:
            continue
        elif k.kind == REAL:
            out[k.name] = real(v, what)
        elif k.kind == REAL32:
            out[k.name] = real32(v, what)
        else:
            out[k.name] = v
    out["flags"] = flags
    return out


def _flat(cfg: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    """A config dict with a nested "buffer" (FrameBuffer's) made one
    level, the buffer's fields beside the frames' own."""
    out = {k: v for k, v in cfg.items() if k != "buffer"}
    out.update(cfg.get("buffer", {}))
    return out


def keywords(cfg: t.Mapping[str, t.Any],
             keys: t.Sequence[Key]) -> t.Dict[str, t.Any]:
    """The keywords of keys that make a buffer of config dict cfg (a
    .config, config_default's, a checkpoint's header): the fields' values,
    each flag from cfg["flags"]."""
    c = _flat(cfg)
    return {k.name: bool(c["flags"] & k.bit) if k.kind == FLAG else c[k.name]
            for k in keys}


def defaults(capacity: int, item_size: int,
             keys: t.Sequence[Key] = REPLAY_KEYS) -> t.Dict[str, t.Any]:
    """keys' defaults for a buffer of capacity items of item_size bytes:
    per_config_default's values, read now from the extension."""
    return keywords(_per.config_default(capacity, item_size), keys)


def frame_defaults(capacity: int, frame_bytes: int, stack: int,
                   action_size: int) -> t.Dict[str, t.Any]:
    """FRAME_KEYS' defaults: per_frames_config_default's values."""
    return keywords(_per.frames_config_default(capacity, frame_bytes, stack,
                                               action_size), FRAME_KEYS)


def signature(init: t.Callable[..., None], keys: t.Sequence[Key],
              values: t.Mapping[str, t.Any], hints: type) -> None:
    """Give init, an __init__ taking the keys as **config, the signature
    that help() and inspect.signature show: its own parameters with the
    keys as keyword-only ones in place of **config, each with its value in
    values (a defaults() dict), None where None is the default, and the
    type of the TypedDict hints."""
    sig = inspect.signature(init)
    types = t.get_type_hints(hints)
    params = [p for p in sig.parameters.values()
              if p.kind != inspect.Parameter.VAR_KEYWORD]
    for k in keys:
        v = None if k.none_is_default else values[k.name]
        if k.kind == REAL32:  # as written: 0.99, not 0.9900000095367432
            v = float(str(np.float32(v)))
        params.append(inspect.Parameter(
            k.name, inspect.Parameter.KEYWORD_ONLY, default=v,
            annotation=types.get(k.name, inspect.Parameter.empty)))
    setattr(init, "__signature__", sig.replace(parameters=params))


# ---------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------


def error(code_name: str, message: str) -> Error:
    """A per.Error like the C calls raise, for a check made in Python."""
    code = getattr(_per, code_name)
    e = Error(f"{code_name}: {message}")
    e.status = code
    e.name = code_name
    return e


def count(n: object, what: str, bits: int = 32) -> int:
    """n as an int in [0, 2^bits): else TypeError or OverflowError, with
    the messages of the extension's own checks ("Call: name must be ...")."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{what} must be an int, not {type(n).__name__}")
    if not 0 <= int(n) < 1 << bits:
        raise OverflowError(f"{what} must be in [0, 2^{bits}), got {int(n)}")
    return int(n)


def nodes_of(x: object, what: str) -> DType:
    """The node type x names: float64 (also for None) or float32; else a
    TypeError naming both."""
    try:
        d = F64 if x is None else np.dtype(t.cast(DTypeLike, x))
    except (TypeError, ValueError):
        d = None
    if d is None or d not in (F64, F32):
        raise TypeError(f"{what} must be numpy.float64 (double nodes) or "
                        f"numpy.float32 (float nodes), not {x!r}")
    return d


def real(x: object, what: str) -> float:
    """x as a Python float; a TypeError names the argument."""
    try:
        return float(t.cast("t.SupportsFloat", x))
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a real number, not "
                        f"{type(x).__name__}") from None


def real32(x: object, what: str) -> float:
    """x as a float for a C float: rounded to float32, and refused with a
    ValueError where a finite value would become inf."""
    f = real(x, what)
    if math.isfinite(f) and abs(f) > float(np.finfo(np.float32).max):
        with np.errstate(over="ignore"):
            if not math.isfinite(float(np.float32(f))):
                raise ValueError(f"{what} (float32): {f!r} overflows float32 "
                                 f"(largest finite "
                                 f"{np.finfo(np.float32).max!s})")
    return f


def shape(s: ShapeLike, what: str) -> t.Tuple[int, ...]:
    """An int or a sequence of ints as a shape, each checked by count."""
    if isinstance(s, (int, np.integer)):
        return (count(s, what),)
    return tuple(count(x, what) for x in s)


#: sample()'s outputs besides the item's fields: no field may take them.
SAMPLE_KEYS = frozenset(("ids", "weights", "mask", "end", "trajectory"))


def _aligned(dt: DType) -> bool:
    """Every field of dt at a multiple of its alignment, and dt's size a
    multiple of the largest: each field of an array of dt then has strides
    that are multiples of its element size."""
    align = 1
    for name in dt.names or ():
        f, off = field(dt, name)
        a = f.base.alignment
        if off % a:
            return False
        align = max(align, a)
    return dt.itemsize % align == 0


def field(dt: DType, name: str) -> t.Tuple[DType, int]:
    """The dtype and offset of field name of the structured dtype dt."""
    fields = dt.fields
    assert fields is not None
    f = fields[name]
    return f[0], f[1]


def item_dtype(item: ItemSpec, align: bool = False) -> DType:
    """The structured dtype of one stored item. A dict maps field names to
    a dtype, a (dtype, shape) pair or an example array; a dtype without
    fields becomes the single field "item". align: each field at an offset
    that is a multiple of its alignment and the size a multiple of the
    largest (NumPy's align=True, C's struct layout), so that every field
    of a batch can be viewed by PyTorch or DLPack without a copy."""
    dt: DType
    if isinstance(item, t.Mapping):
        fields: t.List[t.Tuple[str, DType, t.Tuple[int, ...]]] = []
        for name, spec in item.items():
            if isinstance(spec, np.ndarray):
                fields.append((name, spec.dtype, spec.shape))
            elif isinstance(spec, tuple) and len(spec) == 2:
                d, s = spec
                s = (s,) if isinstance(s, (int, np.integer)) else tuple(s)
                fields.append((name, np.dtype(d), s))
            else:
                fields.append((name, np.dtype(t.cast(DTypeLike, spec)), ()))
        if not fields:
            raise ValueError("an item needs at least one field")
        dt = np.dtype(t.cast(DTypeLike, fields), align=align)
    else:
        dt = np.dtype(item)
        if dt.names is None:
            dt = np.dtype([("item", dt)], align=align)
        elif align and not _aligned(dt):
            raise ValueError(f"align=True: {dt} has a field off its alignment "
                             "or a size that is not a multiple of the largest; "
                             "make it with np.dtype(..., align=True)")
    if dt.hasobject:
        raise TypeError("items are stored as bytes: no Python objects in the dtype")
    clash = [name for name in dt.names or () if name in SAMPLE_KEYS]
    if clash:
        raise ValueError(f"field name {clash[0]!r} is taken by sample()'s own "
                         f"outputs {sorted(SAMPLE_KEYS)}: rename the field")
    return dt
