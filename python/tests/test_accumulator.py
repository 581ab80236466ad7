"""per.TrajectoryAccumulator: the multi-timescale accumulator as its users
write it (a dict of timescales, kinds inferred from the example's
shapes), its pitfalls (leading dims that differ, adds past capacity, a
top level that is not a dict), refusals that name what is wrong and
change nothing, the fast and the converting add giving the same bytes,
nested trees with and without optree, a rollout added to a buffer equal
to add_batch of the same steps, and no allocation per rollout."""
import gc
import tracemalloc

import numpy as np
import pytest

import per

T = 64


def three_timescales(T=T):
    return {
        # buffered: leading dim T across every leaf
        "step": {
            "obs": np.zeros((T, 4), dtype=np.float32),
            "reward": np.zeros((T,), dtype=np.float32),
        },
        # single-item: every leaf (1, ...)
        "episode": {
            "return": np.zeros((1,), dtype=np.float32),
            "length": np.zeros((1,), dtype=np.float32),
        },
        # single-item: a 0-d leaf
        "final_step": {
            "obs": np.zeros((4,), dtype=np.float32),
            "reward": np.zeros((), dtype=np.int32),
        },
    }


class Env:
    """A deterministic stand-in for an environment: obs float32 (4,),
    rewards Python floats."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def reset(self):
        return self.rng.standard_normal(4).astype(np.float32)

    def step(self):
        return (self.rng.standard_normal(4).astype(np.float32),
                float(self.rng.integers(0, 3)))


def snapshot(acc):
    """Every array of the accumulator's tree and its counts, copied."""
    tree = acc._tree
    return ({k: {n: np.array(v, copy=True) for n, v in d.items()}
             for k, d in tree.items()},
            {k: acc.count(k) for k in tree})


def assert_same(a, b):
    (ta, ca), (tb, cb) = a, b
    assert ca == cb
    for k in ta:
        for n in ta[k]:
            np.testing.assert_array_equal(ta[k][n], tb[k][n])


def test_the_three_timescales_as_written():
    env = Env(1)
    acc = per.TrajectoryAccumulator(three_timescales())
    kinds = acc.timescales
    assert {k: (v["kind"], v["capacity"]) for k, v in kinds.items()} == {
        "step": ("buffered", T), "episode": ("single", 1),
        "final_step": ("single", 1)}
    for rollout in range(3):
        episode_return, reward, length = 0.0, 0.0, 0
        obs = env.reset()
        want_obs, want_rew = [], []
        for _ in range(T):
            acc.add("step", {"obs": obs, "reward": reward})
            want_obs.append(obs)
            want_rew.append(reward)
            obs, reward = env.step()
            episode_return += float(reward)
            length += 1
        acc.add("episode", {"return": np.array([episode_return]),
                            "length": np.array([length])})
        acc.add("final_step", {"obs": obs, "reward": reward})
        tree = acc.build()
        # the example's structure, shapes and dtypes
        for k, d in three_timescales().items():
            assert set(tree[k]) == set(d)
            for n, v in d.items():
                assert tree[k][n].shape == v.shape
                assert tree[k][n].dtype == v.dtype
        np.testing.assert_array_equal(tree["step"]["obs"], np.stack(want_obs))
        np.testing.assert_array_equal(tree["step"]["reward"],
                                      np.array(want_rew, np.float32))
        assert tree["episode"]["return"].tolist() == [
            float(np.float32(episode_return))]
        assert tree["episode"]["length"].tolist() == [T]
        np.testing.assert_array_equal(tree["final_step"]["obs"], obs)
        assert tree["final_step"]["reward"].item() == int(reward)
        assert acc.built_counts == {"step": T, "episode": 1, "final_step": 1}
        assert acc.last_id == rollout
    # the tree aliases the accumulator: the next add writes into it, and
    # clears the single-item records
    assert acc.build() is tree
    acc.add("step", {"obs": np.full(4, 7, np.float32), "reward": 2.0})
    assert tree["step"]["obs"][0].tolist() == [7, 7, 7, 7]
    assert tree["episode"]["return"].tolist() == [0.0]
    assert acc.count("step") == 1 and acc.count("episode") == 0


def test_pitfall_leading_dims_differ():
    with pytest.raises(ValueError) as e:
        per.TrajectoryAccumulator({"step": {"obs": np.zeros((64, 4)),
                                            "reward": np.zeros((32,))}})
    msg = str(e.value)
    assert "timescale 'step'" in msg
    assert "'obs': 64" in msg and "'reward': 32" in msg
    # a single-item timescale: one leaf 0-d, or a leading 1 on every leaf
    acc = per.TrajectoryAccumulator({
        "a": {"x": np.zeros((64, 4)), "y": np.zeros(())},
        "b": {"x": np.zeros((1, 3)), "y": np.zeros((1,))}})
    assert acc.timescales["a"]["kind"] == "single"
    assert acc.timescales["b"]["kind"] == "single"
    acc.add("a", {"x": np.ones((64, 4)), "y": 2})
    acc.add("a", {"x": np.full((64, 4), 3.0), "y": 5})  # replaces
    tree = acc.build()
    assert tree["a"]["x"].shape == (64, 4) and (tree["a"]["x"] == 3).all()
    assert tree["a"]["y"].item() == 5


def test_pitfall_adding_past_capacity():
    acc = per.TrajectoryAccumulator(three_timescales(T=3))
    for t in range(3):
        acc.add("step", {"obs": np.full(4, t, np.float32), "reward": t})
    before = snapshot(acc)
    with pytest.raises(IndexError, match=r"timescale 'step' is full: "
                       r"capacity 3, index 3"):
        acc.add("step", {"obs": np.zeros(4, np.float32), "reward": 0.0})
    with pytest.raises(IndexError, match="capacity 3, index 3"):
        acc.add("step", {"obs": [1, 2, 3, 4], "reward": 1})  # converting add
    assert_same(before, snapshot(acc))
    acc.reset()  # aborts the partial rollout
    assert acc.count("step") == 0
    acc.add("step", {"obs": np.zeros(4, np.float32), "reward": 0.0})
    assert acc.count("step") == 1


def test_pitfall_top_level_must_be_a_dict():
    with pytest.raises(TypeError, match="must be a dict"):
        per.TrajectoryAccumulator([np.zeros((4, 2))])
    with pytest.raises(TypeError, match="names are str"):
        per.TrajectoryAccumulator({1: {"x": np.zeros((4,))}})
    with pytest.raises(ValueError, match="no timescale"):
        per.TrajectoryAccumulator({})
    with pytest.raises(ValueError, match="timescale 'e' has no leaves"):
        per.TrajectoryAccumulator({"e": {}})
    with pytest.raises(TypeError, match="leaf 'x' has dtype object"):
        per.TrajectoryAccumulator({"s": {"x": np.array([None, 1])}})


def test_refusals_name_the_problem_and_change_nothing():
    acc = per.TrajectoryAccumulator(three_timescales(T=8))
    acc.add("step", {"obs": np.ones(4, np.float32), "reward": 1.0})
    acc.add("final_step", {"obs": np.ones(4, np.float32), "reward": 2})
    before = snapshot(acc)
    cases = [
        (ValueError, "unknown timescale 'steps'; the timescales are "
         r"\['step', 'episode', 'final_step'\]",
         ("steps", {"obs": np.zeros(4), "reward": 0.0})),
        (TypeError, "a timescale's name is a str", (3, {})),
        (ValueError, r"timescale 'step', leaf 'obs' has shape \(3,\); it "
         r"takes \(4,\) or \(1, 4\)",
         ("step", {"obs": np.zeros(3), "reward": 0.0})),
        (ValueError, r"timescale 'step' takes a tree shaped as the "
         r"example's .*'reward'",
         ("step", {"obs": np.zeros(4)})),
        (ValueError, r"timescale 'step' takes a tree .*'x'",
         ("step", {"obs": np.zeros(4), "reward": 0.0, "x": 1})),
        (ValueError, "timescale 'step' takes a tree",
         ("step", [np.zeros(4), 0.0])),
        (ValueError, r"leaf 'reward' \(int32\): 1.5 is not a whole number",
         ("final_step", {"obs": np.zeros(4), "reward": 1.5})),
        (ValueError, r"leaf 'reward' \(int32\): .* outside",
         ("final_step", {"obs": np.zeros(4), "reward": 2**40})),
        (TypeError, r"leaf 'reward' \(float32\)",
         ("step", {"obs": np.zeros(4), "reward": "x"})),
        (ValueError, r"leaf 'obs' \(float32\)",  # finite -> inf
         ("step", {"obs": np.full(4, 1e39), "reward": 0.0})),
        (ValueError, r"leaf 'return' has shape \(2,\)",
         ("episode", {"return": np.zeros(2), "length": 1})),
    ]
    for exc, pattern, args in cases:
        with pytest.raises(exc, match=pattern):
            acc.add(*args)
        assert_same(before, snapshot(acc))
    # the first leaf good and the second bad: nothing of the call goes in
    with pytest.raises(ValueError):
        acc.add("step", {"obs": np.full(4, 9, np.float32), "reward": [1, 2]})
    assert_same(before, snapshot(acc))
    with pytest.raises(ValueError, match="single-item, not buffered"):
        acc.end(per.END_TERMINATED, "episode")
    with pytest.raises(per.Error, match="PER_ERR_ARG"):
        acc.end(7)


def test_accepted_shapes_and_conversions():
    acc = per.TrajectoryAccumulator(three_timescales(T=6))
    # exact values (the C path) and values that convert (the Python path)
    vals = [
        {"obs": np.arange(4, dtype=np.float32), "reward": 0.5},
        {"obs": [0.0, 1.0, 2.0, 3.0], "reward": 1},             # list, int
        {"obs": np.arange(4.0)[None, :], "reward": np.float64(0.5)},  # (1,4)
        {"obs": np.arange(8, dtype=np.float32)[::2], "reward": True},  # strided
        {"obs": np.arange(4, dtype=np.int64), "reward": np.array([0.25])},
        {"obs": np.arange(4, dtype=np.float32).reshape(1, 4), "reward": 3},
    ]
    for v in vals:
        acc.add("step", v)
    acc.add("episode", {"return": 1.5, "length": np.array([6.0])})  # () for (1,)
    acc.add("final_step", {"obs": np.ones((1, 4)), "reward": np.int8(-3)})
    tree = acc.build()
    np.testing.assert_array_equal(
        tree["step"]["obs"],
        np.array([[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3], [0, 2, 4, 6],
                  [0, 1, 2, 3], [0, 1, 2, 3]], np.float32))
    assert tree["step"]["reward"].tolist() == [0.5, 1, 0.5, 1, 0.25, 3]
    assert tree["episode"]["return"].tolist() == [1.5]
    assert tree["final_step"]["reward"].item() == -3


def test_fast_and_converting_adds_give_the_same_bytes():
    """The same steps through the C path (exact float32 arrays, Python
    floats) and through the converting one (lists, float64 arrays)."""
    rng = np.random.default_rng(5)
    obs = rng.standard_normal((T, 4)).astype(np.float32)
    rew = rng.standard_normal(T).astype(np.float32)
    a = per.TrajectoryAccumulator(three_timescales())
    b = per.TrajectoryAccumulator(three_timescales())
    for t in range(T):
        a.add("step", {"obs": obs[t], "reward": float(rew[t])})
        b.add("step", {"obs": obs[t].astype(np.float64).tolist(),
                       "reward": rew[t:t + 1].astype(np.float64)})
    ta, tb = a.build(), b.build()
    assert ta["step"]["obs"].tobytes() == tb["step"]["obs"].tobytes()
    assert ta["step"]["reward"].tobytes() == tb["step"]["reward"].tobytes()
    np.testing.assert_array_equal(ta["step"]["obs"], obs)


@pytest.mark.parametrize("use_optree", [False, True])
def test_nested_trees(monkeypatch, use_optree):
    if use_optree:
        optree = pytest.importorskip("optree")
        monkeypatch.setattr(per, "_optree", optree)
    else:
        monkeypatch.setattr(per, "_optree", None)
    example = {"step": {"obs": {"pixels": np.zeros((5, 2, 2), np.uint8),
                                "state": np.zeros((5, 3), np.float32)},
                        "pair": (np.zeros((5,), np.int16),
                                 np.zeros((5, 2), np.float64)),
                        "list": [np.zeros((5,), np.bool_)]},
               "last": [np.zeros((), np.float32), np.zeros((2,), np.int32)]}
    acc = per.TrajectoryAccumulator(example)
    assert acc.timescales["step"]["capacity"] == 5
    assert acc.timescales["last"]["kind"] == "single"
    for t in range(5):
        acc.add("step", {"obs": {"pixels": np.full((2, 2), t, np.uint8),
                                 "state": [t, t + 1, t + 2]},
                         "pair": (t - 2, [0.5 * t, -t]),
                         "list": [t % 2 == 0]})
    acc.add("last", [1.25, [3, 4]])
    tree = acc.build()
    assert isinstance(tree["step"]["pair"], tuple)
    assert isinstance(tree["step"]["list"], list)
    assert tree["step"]["obs"]["pixels"][:, 0, 0].tolist() == [0, 1, 2, 3, 4]
    assert tree["step"]["obs"]["state"][4].tolist() == [4, 5, 6]
    assert tree["step"]["pair"][0].tolist() == [-2, -1, 0, 1, 2]
    assert tree["step"]["pair"][1][3].tolist() == [1.5, -3]
    assert tree["step"]["list"][0].tolist() == [True, False, True, False, True]
    assert tree["last"][0].item() == 1.25 and tree["last"][1].tolist() == [3, 4]
    with pytest.raises(ValueError, match="timescale 'last' takes a tree"):
        acc.add("last", [1.0])
    with pytest.raises(ValueError, match="timescale 'step' takes a tree"):
        acc.add("step", {"obs": {"pixels": 0}, "pair": (0, 0), "list": [0]})


def test_add_to_equals_add_batch():
    """A rollout handed to a buffer by add_to equals add_batch of the same
    steps and ends: storage, counters, and the ids, items and weights of
    later samples and updates."""
    rng = np.random.default_rng(11)
    acc = per.TrajectoryAccumulator(three_timescales(T=16))
    dt = acc.timescales["step"]["dtype"]
    a = per.ReplayBuffer(40, dt, seed=9)
    b = per.ReplayBuffer(40, dt, seed=9)
    for k, n in enumerate([16, 5, 9, 16]):
        recs = np.zeros(n, dt)
        recs["obs"] = rng.standard_normal((n, 4))
        recs["reward"] = rng.standard_normal(n)
        for t in range(n):
            acc.add("step", {"obs": recs["obs"][t], "reward": recs["reward"][t]})
        end = per.END_TERMINATED if k % 2 else per.END_TRUNCATED
        acc.end(end)
        acc.add("episode", {"return": k, "length": n})
        assert acc.episode_ends()[n - 1] == end
        out = acc.add_to(a)
        assert out["n"] == n and out["id"] == k
        assert out["once"]["episode"]["return"].tolist() == [k]
        assert set(out["once"]) == {"episode", "final_step"}
        ends = np.zeros(n, np.uint8)
        ends[-1] = end
        b.add_batch(recs, ends=ends)
        np.testing.assert_array_equal(a.storage, b.storage)
        assert a.counters == b.counters
        x, y = a.sample(8, episode_info=True), b.sample(8, episode_info=True)
        for key in x:
            np.testing.assert_array_equal(x[key], y[key])
        td = rng.standard_normal(8)
        a.update(x["ids"], td)
        b.update(y["ids"], td)
    assert acc.count("step") == 0
    with pytest.raises(per.Error, match="PER_ERR_EMPTY"):
        acc.add_to(a)
    wrong = per.ReplayBuffer(8, {"x": np.float64})
    acc.add("step", {"obs": np.zeros(4, np.float32), "reward": 0.0})
    with pytest.raises(ValueError, match="the buffer's items are"):
        acc.add_to(wrong)
    with pytest.raises(ValueError, match="single-item, not buffered"):
        acc.add_to(a, step="episode")
    with pytest.raises(ValueError, match="'step' is buffered"):
        acc.add_to(a, once=["step"])
    assert acc.count("step") == 1  # nothing taken by the refusals


def test_no_allocation_per_rollout():
    """1,000 rollouts of 256 steps after the first builds keep 0 bytes
    more of what was allocated inside a rollout (tracemalloc, by the
    frames of rollout(); last_id, an int, is replaced at each build), and
    the peak of all traced memory stays below a quarter of one rollout's
    step records (a copy of the arrays per build, or new views and dicts,
    would pass it)."""
    n = 256
    acc = per.TrajectoryAccumulator(three_timescales(T=n))
    obs = np.ones(4, np.float32)
    ep = {"return": np.ones(1, np.float32), "length": np.ones(1, np.float32)}
    fin = {"obs": obs, "reward": 1}
    step = {"obs": obs, "reward": 0.5}

    def rollout():
        for _ in range(n):
            acc.add("step", step)
        acc.add("episode", ep)
        acc.add("final_step", fin)
        return acc.build()

    code = rollout.__code__
    lines = range(code.co_firstlineno, code.co_firstlineno + 7)

    def kept_by_rollouts(snapshot):
        return sum(tr.size for tr in snapshot.traces if any(
            f.filename == code.co_filename and f.lineno in lines
            for f in tr.traceback))

    for _ in range(300):  # last_id past CPython's cached small ints (256)
        rollout()
    gc.collect()
    tracemalloc.start(8)
    try:
        rollout()
        before = tracemalloc.take_snapshot()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for _ in range(1000):
            rollout()
        peak = tracemalloc.get_traced_memory()[1]
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    assert kept_by_rollouts(after) == kept_by_rollouts(before), (
        kept_by_rollouts(after), kept_by_rollouts(before))
    record_bytes = acc.timescales["step"]["dtype"].itemsize * n  # 5,120
    assert peak - base < record_bytes // 4, (peak, base)


def test_views_outlive_the_accumulator():
    acc = per.TrajectoryAccumulator(three_timescales(T=4))
    for t in range(4):
        acc.add("step", {"obs": np.full(4, t, np.float32), "reward": t})
    acc.end(per.END_TERMINATED)
    tree = acc.build()
    ends = acc.episode_ends("step")
    del acc
    gc.collect()
    big = [np.full(1000, 99.0) for _ in range(50)]  # reuse freed memory
    assert tree["step"]["reward"].tolist() == [0, 1, 2, 3]
    assert tree["step"]["obs"][3].tolist() == [3, 3, 3, 3]
    assert ends.tolist() == [0, 0, 0, per.END_TERMINATED]
    del big


def test_the_c_add_converts_as_the_python_one():
    """add() of a flat dict converts in C what ReplayBuffer.add's rule
    lets through unchanged (float64 into float32, ints into floats, ...)
    and leaves the rest to Python; a nested timescale always converts in
    Python. Both must store the same bytes, or both refuse with the same
    exception type, for values at the edges of each rule: alone, in an
    array of two and in a list of two."""
    big = 2**63
    cases = {
        np.float32: [1.5, 1e39, -1e39, float("inf"), float("nan"), 2**24,
                     2**24 + 1, 2**30, -(2**24), True, np.float64(0.1),
                     np.array(3.4028235e38), np.int64(2**53 + 1), big],
        np.float64: [0.1, 2**53, 2**53 + 1, -(2**60), np.uint64(2**64 - 1),
                     np.float32(0.1), False],
        np.int8: [127, 128, -128, -129, 3.0, 3.5, float("nan"), -0.0,
                  np.uint8(200), np.int64(-5), True],
        np.uint8: [255, 256, -1, 255.0, 256.0, np.int16(7), np.float32(2.0)],
        np.int64: [big - 1, big, -big, -big - 1, 9.2e18, 9.3e18,
                   np.uint64(2**63), np.float32(-3.0)],
        np.uint64: [2**64 - 1, 2**64, big, -1, 1.8e19, np.int64(-1)],
        np.bool_: [0, 1, 2, 0.0, 1.0, 0.5, True, np.int32(1), np.float64(1)],
    }
    for dt, values in cases.items():
        for v in values:
            for arr in ("alone", "array", "list"):
                if arr == "alone" or isinstance(v, np.ndarray):
                    val, shape = v, ()
                else:
                    val = np.array([v, v]) if arr == "array" else [v, v]
                    shape = (2,)
                flat = per.TrajectoryAccumulator(
                    {"s": {"x": np.zeros((2,) + shape, dt)}})
                nested = per.TrajectoryAccumulator(
                    {"s": {"n": {"x": np.zeros((2,) + shape, dt)}}})
                got = []
                for acc, tree in ((flat, {"x": val}), (nested, {"n": {"x": val}})):
                    try:
                        acc.add("s", tree)
                    except (ValueError, TypeError, OverflowError) as e:
                        got.append(type(e))
                    else:
                        got.append(acc.build())
                a, b = got
                if isinstance(a, type) or isinstance(b, type):
                    assert a == b, (dt, v, arr, a, b)
                else:
                    x, y = a["s"]["x"], b["s"]["n"]["x"]
                    assert x.tobytes() == y.tobytes(), (dt, v, arr, x, y)
