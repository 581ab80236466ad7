"""The config in one place (per.config, python/per/pyper_config.h): every
per_config field is a keyword of the buffers, its default is the C one,
the extension takes the fields by name, and per.cuda and per.mpi use
per.config rather than per's private names."""

import ast
import inspect
import os
import typing

import numpy as np
import pytest

import per
import per.config as pcfg
import per.cuda as pc

ITEM = {"obs": (np.float32, 4), "action": np.int32}
# per_config's fields that are no keyword: set from the call's arguments
# (capacity, the item's size) or from the flag keywords
NOT_KEYWORDS = {"capacity", "item_size", "flags"}
# per_frames_config's fields set from FrameBuffer's other arguments
FRAME_ARGS = {"frame_bytes", "stack", "action_size"}


def test_every_c_field_is_a_keyword():
    """A field added to per_config (and to pyper_config.h) without a Key
    fails here."""
    c_fields = set(per.config_default(64, 8))
    names = {k.name for k in pcfg.BUFFER_KEYS if k.kind != pcfg.FLAG}
    assert c_fields - NOT_KEYWORDS == names
    frames = per._per.frames_config_default(64, 16, 4, 8)
    assert set(frames) - {"buffer"} - FRAME_ARGS == {
        k.name for k in pcfg.FRAME_KEYS} - {k.name for k in pcfg.BUFFER_KEYS}
    assert set(frames["buffer"]) == c_fields
    flags = {k.bit for k in pcfg.REPLAY_KEYS if k.kind == pcfg.FLAG}
    assert flags == {per._per.WEIGHTS_BUFFER_MAX, per._per.SEQ_CROSS_EPISODES,
                     per._per.MAX_LIVE}


@pytest.mark.parametrize("keys,hints", [
    (pcfg.BUFFER_KEYS, pcfg.BufferKeywords),
    (pcfg.REPLAY_KEYS, pcfg.ReplayKeywords),
    (pcfg.FRAME_KEYS, pcfg.FrameKeywords),
])
def test_typed_dicts_are_the_keys(keys, hints):
    types = typing.get_type_hints(hints)
    assert set(types) == {k.name for k in keys}
    kinds = {pcfg.REAL: float, pcfg.REAL32: float, pcfg.INT: int,
             pcfg.FLAG: bool}
    for k in keys:
        want = kinds[k.kind]
        assert types[k.name] == (typing.Optional[want] if k.none_is_default
                                 else want), k


def _shown(cls):
    """The keyword defaults inspect.signature shows for cls."""
    return {p.name: p.default for p in inspect.signature(cls).parameters.values()
            if p.kind == p.KEYWORD_ONLY}


def test_signatures_show_the_c_defaults():
    d = per.config_default(1000, 8)
    shown = _shown(per.ReplayBuffer)
    for k in pcfg.REPLAY_KEYS:
        if k.kind == pcfg.FLAG:
            assert shown[k.name] is False
        elif k.none_is_default:
            assert shown[k.name] is None
        else:
            assert shown[k.name] == d[k.name], k
    assert shown["align"] is False
    assert _shown(pc.ReplayBuffer) == {**shown, "max_batch": 1024,
                                       "device": None, "stream": None,
                                       "wrap": None}
    f = _shown(per.FrameBuffer)
    fd = per._per.frames_config_default(1000, 16, 4, 8)
    assert (f["n"], f["lanes"], f["frames"]) == (fd["n"], fd["lanes"], fd["frames"])
    assert np.float32(f["gamma"]) == np.float32(fd["gamma"])
    assert f["stack"] == 4 and "live_max" not in f


def test_defaults_are_the_c_ones():
    """A buffer made with no keyword holds per_config_default's config."""
    b = per.ReplayBuffer(1000, ITEM)
    assert b.config == per.config_default(1000, b.dtype.itemsize)
    assert pcfg.defaults(1000, 8)["max_unique"] == 1000
    assert pcfg.defaults(1 << 20, 8)["max_unique"] == 65536
    f = per.FrameBuffer(100, (4, 4))
    fd = per._per.frames_config_default(100, 16, 4, 8)
    assert {k: f.config[k] for k in ("n", "gamma", "lanes", "stack")} == {
        k: fd[k] for k in ("n", "gamma", "lanes", "stack")}
    assert {k: v for k, v in f.config["buffer"].items() if k != "item_size"} == {
        k: v for k, v in fd["buffer"].items() if k != "item_size"}


KW = dict(alpha=0.7, beta0=0.5, beta1=0.9, beta_steps=77, eps=1e-3,
          max_priority=2.0, seed=5, weights_buffer_max=True, max_unique=40,
          seq_len=4, seq_stride=2, seq_eta=0.8, cross_episodes=True,
          live_max=True)


def test_keywords_round_trip():
    """keywords() of a buffer's config makes the same buffer."""
    b = per.ReplayBuffer(64, ITEM, **KW)
    assert pcfg.keywords(b.config, pcfg.REPLAY_KEYS) == KW
    again = per.ReplayBuffer(64, ITEM, **pcfg.keywords(b.config, pcfg.REPLAY_KEYS))
    assert again.config == b.config


def test_unknown_keywords_are_refused_as_python_does():
    for make, name in [(lambda: per.ReplayBuffer(8, ITEM, alpah=0.5), "ReplayBuffer"),
                       (lambda: per.FrameBuffer(8, (2, 2), live_max=True),
                        "FrameBuffer"),
                       (lambda: per.ReplayBuffer(8, ITEM, max_batch=4), "ReplayBuffer")]:
        with pytest.raises(TypeError, match=rf"^{name}.__init__\(\) got an "
                                            "unexpected keyword argument '"):
            make()


def test_the_extension_takes_fields_by_name():
    """per._per's buffers take one dict, by key: absent fields are
    per_config_default's, a key that names no field is refused, an
    integer out of range is named."""
    b = per._per._Buffer({"item_size": 8, "capacity": 100, "seed": 3})
    assert b.config == {**per.config_default(100, 8), "seed": 3}
    with pytest.raises(TypeError, match="ReplayBuffer: 'sead' is not a config field"):
        per._per._Buffer({"capacity": 100, "item_size": 8, "sead": 3})
    with pytest.raises(OverflowError, match=r"ReplayBuffer: seq_len must be in \[0, 2\^32\)"):
        per._per._Buffer({"capacity": 100, "item_size": 8, "seq_len": -1})
    with pytest.raises(TypeError, match="ReplayBuffer: alpha must be a real number"):
        per._per._Buffer({"capacity": 100, "item_size": 8, "alpha": "x"})
    with pytest.raises(TypeError, match="FrameBuffer: 'alpah' is not a config field"):
        per._per._Frames({"capacity": 100, "frame_bytes": 4, "stack": 2,
                          "action_size": 1, "alpah": 1.0})


def test_reals_are_checked_before_the_extension():
    with pytest.raises(TypeError, match="ReplayBuffer: seq_eta must be a real number"):
        per.ReplayBuffer(8, ITEM, seq_eta=None, seed=-1)
    with pytest.raises(ValueError, match=r"FrameBuffer: gamma \(float32\): 1e\+300"):
        per.FrameBuffer(8, (2, 2), gamma=1e300)


def test_cuda_checks_the_config_as_the_cpu_does():
    if not pc.host.available():
        pytest.skip("per._cuda_host is not installed")
    H = pc.host
    for kw, name, bits in [({"seed": -1}, "seed", 64),
                           ({"beta_steps": -1}, "beta_steps", 64),
                           ({"max_unique": 2**32}, "max_unique", 32),
                           ({"seq_stride": -1}, "seq_stride", 32)]:
        with pytest.raises(OverflowError,
                           match=rf"per.cuda.ReplayBuffer: {name} must be in "
                                 rf"\[0, 2\^{bits}\)"):
            H.ReplayBuffer(16, ITEM, max_batch=8, **kw)
    with pytest.raises(TypeError, match="per.cuda.ReplayBuffer: alpha"):
        H.ReplayBuffer(16, ITEM, max_batch=8, alpha="x")
    dev = H.ReplayBuffer(64, ITEM, max_batch=8,
                         **{k: v for k, v in KW.items() if k != "live_max"})
    assert dev.max_unique == 40
    cpu = dev.to_cpu()
    assert pcfg.keywords(cpu.config, pcfg.REPLAY_KEYS) == {**KW, "live_max": False}


def _imports(path):
    """The names the module at path imports from per, relatively or not."""
    with open(path) as f:
        tree = ast.parse(f.read())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (
                node.level == 1 and node.module is None or node.module == "per"):
            out += [a.name for a in node.names]
    return out


@pytest.mark.parametrize("name", ["cuda", "mpi"])
def test_submodules_use_no_private_name_of_per(name):
    """per.cuda and per.mpi take what they share with per from per.config
    (and per's API), not from per/__init__.py's private names; the
    extension modules themselves (per._per, ...) are theirs to import."""
    path = os.path.join(os.path.dirname(per.__file__), name + ".py")
    extensions = {"_per", "_mpi", "_cuda", "_cuda_host"}
    private = [n for n in _imports(path) if n.startswith("_") and n not in extensions]
    assert private == [], private
    with open(path) as f:
        assert "_per_pkg._" not in f.read()
