"""per.FrameBuffer: stacks rebuilt from frames stored once must equal the
stacks a naive buffer stores whole (per.NStep into a per.ReplayBuffer fed
the same stream), draws and weights included; lanes and step_lanes;
sequences; errors that name the argument and change nothing."""
import numpy as np
import pytest

import per

FRAME = (6, 5)


def frame(lane, ep, t):
    """Bytes no other (lane, episode, step) shows."""
    rng = np.random.default_rng([lane, ep, t])
    f = rng.integers(0, 256, FRAME, dtype=np.uint8)
    f[0, 0] = t % 256
    return f


class Naive:
    """Whole stacks: the first frame repeated at an episode's start."""

    def __init__(self, capacity, k, n, lanes, seed, nodes=None):
        self.k = k
        self.adders = [per.NStep(n, 0.9, (k,) + FRAME, np.uint8, (), np.int64)
                       for _ in range(lanes)]
        self.buf = per.ReplayBuffer(capacity, self.adders[0].item_dtype, seed=seed,
                                    nodes=nodes)
        self.stack = [None] * lanes

    def step(self, lane, obs, action, reward, nxt, term, trunc):
        if self.stack[lane] is None:
            self.stack[lane] = np.stack([obs] * self.k)
        ns = np.concatenate([self.stack[lane][1:], nxt[None]])
        self.adders[lane].step(self.buf, self.stack[lane], action, reward, ns,
                               term, trunc)
        self.stack[lane] = None if (term or trunc) else ns


def window(fb, w):
    """The window FrameBuffer.sample uses: narrowed to the drawable."""
    d = fb.drawable
    return d if d < len(fb) and (w == 0 or w > d) else w


def run(capacity, k, n, lanes, steps, seed=3, frames=0, p=None, nodes=None):
    fb = per.FrameBuffer(capacity, FRAME, stack=k, n=n, gamma=0.9, lanes=lanes,
                         seed=seed, frames=frames, nodes=nodes)
    nv = Naive(capacity, k, n, lanes, seed, nodes)
    rng = np.random.default_rng(seed)
    ep = [0] * lanes
    t = [0] * lanes
    length = [int(rng.integers(1, 30)) for _ in range(lanes)]
    for _ in range(steps):
        lane = int(rng.choice(lanes, p=p))
        obs, nxt = frame(lane, ep[lane], t[lane]), frame(lane, ep[lane], t[lane] + 1)
        end = t[lane] + 1 == length[lane]
        term = bool(end and rng.integers(2))
        a = int(rng.integers(100))
        r = float(rng.normal())
        restarts = fb.restarts
        fb.step(obs, a, r, nxt, term, end and not term, lane=lane)
        if fb.restarts != restarts:  # the lane's frames were gone
            nv.adders[lane].reset()
            nv.stack[lane] = None
        nv.step(lane, obs, a, r, nxt, term, end and not term)
        t[lane] += 1
        if end:
            ep[lane] += 1
            t[lane] = 0
            length[lane] = int(rng.integers(1, 30))
    return fb, nv


# float nodes too: the frame buffer's and the naive buffer's (per.NStep,
# per._per's, adding to a per._per32 buffer) trees are float, the draws
# and weights still equal
@pytest.mark.parametrize("nodes", [np.float64, np.float32])
@pytest.mark.parametrize("k,n,lanes", [(4, 1, 1), (4, 3, 1), (1, 1, 2), (3, 2, 3)])
def test_stacks_equal_naive(k, n, lanes, nodes):
    fb, nv = run(100, k, n, lanes, 700, nodes=nodes)
    assert fb.nodes == nv.buf.nodes == nodes
    fb.check()
    assert len(fb) == len(nv.buf) == 100
    # episodes of 1 .. 29 steps: more first frames than the default ring's
    # 1/64, so the oldest few transitions have lost theirs
    assert 60 < fb.drawable <= 100
    for call in range(20):
        kw = {"unique": call % 2 == 1, "window": 0 if call % 3 else 40}
        got = fb.sample(16, **kw)
        kw["window"] = window(fb, kw["window"])
        want = nv.buf.sample(16, **kw)
        np.testing.assert_array_equal(got["ids"], want["ids"])
        np.testing.assert_array_equal(got["weights"], want["weights"])
        for key in ("obs", "next_obs", "action", "reward", "discount", "done"):
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
        assert got["obs"].shape == (16, k) + FRAME
        td = np.random.default_rng(call).random(16).astype(np.float32)
        assert fb.update(got["ids"], td) == nv.buf.update(want["ids"], td)


def test_small_ring_never_draws_lost_frames():
    # lane 2 steps rarely: the others write the ring over while it waits
    fb, nv = run(80, 4, 2, 3, 900, frames=3 * (4 + 2 + 2) + 20,
                 p=[0.49, 0.49, 0.02])
    fb.check()
    assert 0 < fb.drawable < len(fb)
    assert fb.restarts > 0
    for _ in range(10):
        got = fb.sample(8)
        # the naive buffer, limited to the same newest transitions
        want = nv.buf.sample(8, window=window(fb, 0))
        np.testing.assert_array_equal(got["ids"], want["ids"])
        np.testing.assert_array_equal(got["obs"], want["obs"])
        np.testing.assert_array_equal(got["next_obs"], want["next_obs"])


def test_step_lanes_equals_step():
    a = per.FrameBuffer(50, FRAME, stack=2, lanes=3, seed=1)
    b = per.FrameBuffer(50, FRAME, stack=2, lanes=3, seed=1)
    for t in range(40):
        obs = np.stack([frame(i, 0, t) for i in range(3)])
        nxt = np.stack([frame(i, 0, t + 1) for i in range(3)])
        ends = np.array([t % 7 == 6, False, t % 11 == 10])
        a.step_lanes(obs, [1, 2, 3], [0.5, 1.0, 1.5], nxt, ends, [False] * 3)
        for i in range(3):
            b.step(obs[i], i + 1, 0.5 * (i + 1), nxt[i], bool(ends[i]), False, lane=i)
    x, y = a.sample(10), b.sample(10)
    for key in x:
        np.testing.assert_array_equal(x[key], y[key])


def test_sequences_stop_at_episode_ends():
    fb = per.FrameBuffer(64, FRAME, stack=2, seq_len=4, seq_stride=2, seed=2)
    for ep in range(30):
        for t in range(5):
            fb.step(frame(0, ep, t), t, 1.0, frame(0, ep, t + 1), t == 4, False)
    s = fb.sample(8, sequences=True)
    assert s["obs"].shape == (8, 4, 2) + FRAME
    assert s["mask"].all()
    newest = s["obs"][:, :, -1, 0, 0].astype(int)  # the step number
    assert (np.diff(newest, axis=1) == 1).all()


def test_errors_name_the_argument_and_change_nothing():
    fb = per.FrameBuffer(16, FRAME, stack=2, lanes=2)
    f = np.zeros(FRAME, np.uint8)
    with pytest.raises(per.Error, match="PER_ERR_EMPTY"):
        fb.sample(2)
    with pytest.raises(per.Error, match="lane 2 >= lanes 2"):
        fb.step(f, 0, 1.0, f, lane=2)
    with pytest.raises(ValueError, match="next_frame has shape"):
        fb.step(f, 0, 1.0, np.zeros((5, 6), np.uint8))
    with pytest.raises(ValueError, match="obs_frame"):
        fb.step(np.full(FRAME, 300), 0, 1.0, f)
    with pytest.raises(ValueError, match=r"rewards\[1\] is not finite"):
        fb.step_lanes(np.zeros((2,) + FRAME, np.uint8), [0, 0], [1.0, np.nan],
                      np.zeros((2,) + FRAME, np.uint8), [False] * 2, [False] * 2)
    assert fb.counters["next_frame"] == 0
    with pytest.raises(per.Error, match="stack 0"):
        per.FrameBuffer(16, FRAME, stack=0)
    with pytest.raises(per.Error, match="frames 3 < lanes"):
        per.FrameBuffer(16, FRAME, frames=3)
    with pytest.raises(per.Error, match="buffer: alpha is negative"):
        per.FrameBuffer(16, FRAME, alpha=-1)
    fb.step(f, 0, 1.0, f, True)
    assert len(fb) == 1 and fb.drawable == 1
    with pytest.raises(ValueError, match="td has shape"):
        fb.update(fb.sample(2)["ids"], [0.0])


def test_save_load_goes_on_alike(tmp_path):
    fb, _ = run(60, 4, 3, 2, 500)
    path = tmp_path / "frames.bin"
    fb.save(path)
    other = per.FrameBuffer(60, FRAME, stack=4, n=3, gamma=0.9, lanes=2, seed=3)
    other.load(path)
    other.check()
    assert other.counters == fb.counters
    for t in range(50):
        for b in (fb, other):
            b.step(frame(0, 99, t), 1, 0.5, frame(0, 99, t + 1), lane=t % 2)
        x, y = fb.sample(8), other.sample(8)
        for key in x:
            np.testing.assert_array_equal(x[key], y[key], err_msg=key)
    wrong = per.FrameBuffer(60, FRAME, stack=3, n=3, gamma=0.9, lanes=2)
    with pytest.raises(per.Error, match="PER_ERR_MISMATCH: the checkpoint's stack 4"):
        wrong.load(path)


@pytest.mark.parametrize("sequences", [False, True])
def test_sample_out_fills_the_same_memory(sequences):
    kw = dict(stack=2, n=2, seq_len=3, seq_stride=1, seed=4)
    fb, twin = (per.FrameBuffer(64, FRAME, **kw) for _ in range(2))
    for b in (fb, twin):
        for t in range(40):
            b.step(frame(0, t // 7, t % 7), t, 1.0, frame(0, t // 7, t % 7 + 1),
                   t % 7 == 6, False)
    out = fb.sample(5, sequences=sequences)
    twin.sample(5, sequences=sequences)
    arrays = {k: v for k, v in out.items()}
    for _ in range(3):
        got = fb.sample(5, sequences=sequences, out=out)
        want = twin.sample(5, sequences=sequences)
        assert got is out and all(got[k] is arrays[k] for k in arrays)
        assert set(got) == set(want)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    before = {k: v.copy() for k, v in out.items()}
    with pytest.raises(per.Error, match="PER_ERR_ARG"):  # refused: out unchanged
        fb.sample(5, sequences=sequences, out=out, beta=-1.0)
    for key in before:
        np.testing.assert_array_equal(out[key], before[key], err_msg=key)
    with pytest.raises(ValueError, match=r"out\['obs'\] must be"):
        fb.sample(4, sequences=sequences, out=out)
    with pytest.raises(TypeError, match="out must be a dict"):
        fb.sample(5, sequences=sequences, out=[1])
    bad = dict(out)
    bad["reward"] = out["reward"].astype(np.float64)
    with pytest.raises(ValueError, match=r"out\['reward'\]"):
        fb.sample(5, sequences=sequences, out=bad)
