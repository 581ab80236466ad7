"""DQN with prioritized replay on Atari pixels (the Arcade Learning
Environment), with per.FrameBuffer storing each 84x84 frame once.

The usual preprocessing, written out here with NumPy: every action is
repeated for 4 frames, the screen is the maximum of the last two (the
flicker), in grayscale, resized to 84x84 (nearest rows and columns);
episodes end at game over or 27,000 agent steps (truncated). The buffer
keeps the newest frame of each step once and rebuilds the stacks of 4
on sampling (obs and the n-step next_obs).

The network is small enough for a CPU without a framework: each stack of
4x84x84 is averaged over 4x4 blocks to 4x21x21, then a 1764-256-A ReLU
network, trained with Adam on the Huber loss of the double-DQN target

    y = R + (done ? 0 : gamma^m * Q_target(s', argmax_a Q(s', a)))

with R, gamma^m and done from the buffer's 3-step returns, each row
weighted by its importance-sampling weight, priorities from the TD
errors. It is not the Nature network; it learns on one core in minutes.

    python python/examples/dqn_atari.py [--game breakout] [--steps N]
        [--seed S] [--uniform] [--csv FILE] [--smoke]

--smoke: a short run that checks the pipeline (every stack rebuilt from
the ring equals the frames the environment showed) and exits 0.
Needs numpy, ale-py (its ROMs included) and per (pip install . from the
repository root).
"""

import argparse
import sys
import time

import numpy as np

import per

try:
    from ale_py import ALEInterface, LoggerMode, roms
except ImportError as e:  # pragma: no cover
    raise SystemExit("this example needs ale-py: pip install ale-py") from e

W, K, POOL = 84, 4, 4
HIDDEN = 256
MAX_STEPS = 27_000


class Atari:
    """An ALE game: frameskip 4, max of the last two screens, 84x84 gray."""

    def __init__(self, game, seed):
        ALEInterface.setLoggerMode(LoggerMode.Error)
        self.ale = ALEInterface()
        self.ale.setInt("random_seed", seed)
        self.ale.setFloat("repeat_action_probability", 0.0)
        self.ale.loadROM(roms.get_rom_path(game))
        self.actions = self.ale.getMinimalActionSet()
        h, w = self.ale.getScreenDims()
        self.rows = (np.arange(W) * h // W).astype(np.intp)
        self.cols = (np.arange(W) * w // W).astype(np.intp)
        self.buf = np.zeros((2, h, w), np.uint8)

    def frame(self):
        s = np.maximum(self.buf[0], self.buf[1])
        return np.ascontiguousarray(s[self.rows][:, self.cols])

    def reset(self):
        self.ale.reset_game()
        self.t = 0
        self.ale.getScreenGrayscale(self.buf[0])
        self.buf[1] = self.buf[0]
        return self.frame()

    def step(self, a):
        r = 0.0
        for i in range(4):
            r += self.ale.act(self.actions[a])
            if i >= 2:
                self.ale.getScreenGrayscale(self.buf[i - 2])
            if self.ale.game_over():
                self.ale.getScreenGrayscale(self.buf[0])
                self.buf[1] = self.buf[0]
                break
        self.t += 1
        return self.frame(), r, self.ale.game_over(), self.t >= MAX_STEPS


def features(stacks):
    """(B, 4, 84, 84) uint8 -> (B, 1764) float32: 4x4 block means / 255."""
    B = stacks.shape[0]
    x = stacks.reshape(B, K, W // POOL, POOL, W // POOL, POOL).astype(np.float32)
    return x.mean(axis=(3, 5)).reshape(B, -1) / 255.0


class MLP:
    """in-HIDDEN-out ReLU network with Adam (float32)."""

    def __init__(self, sizes, rng):
        self.w = [(rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
                  for a, b in zip(sizes, sizes[1:])]
        self.b = [np.zeros(b, np.float32) for b in sizes[1:]]
        self.m = [np.zeros_like(p) for p in self.w + self.b]
        self.v = [np.zeros_like(p) for p in self.w + self.b]
        self.t = 0

    def params(self):
        return self.w + self.b

    def forward(self, x):
        self.acts = [x]
        for i, (w, b) in enumerate(zip(self.w, self.b)):
            x = x @ w + b
            if i < len(self.w) - 1:
                x = np.maximum(x, 0.0)
            self.acts.append(x)
        return x

    def backward(self, g):
        gw, gb = [None] * len(self.w), [None] * len(self.b)
        for i in reversed(range(len(self.w))):
            gw[i] = self.acts[i].T @ g
            gb[i] = g.sum(0)
            if i > 0:
                g = (g @ self.w[i].T) * (self.acts[i] > 0)
        return gw + gb

    def adam(self, grads, lr, clip, b1=0.9, b2=0.999, eps=1e-6):
        norm = np.sqrt(sum(float((g * g).sum()) for g in grads))
        if clip > 0 and norm > clip:
            grads = [g * (clip / norm) for g in grads]
        self.t += 1
        c1, c2 = 1 - b1 ** self.t, 1 - b2 ** self.t
        for p, g, m, v in zip(self.params(), grads, self.m, self.v):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            p -= (lr / c1) * m / (np.sqrt(v / c2) + eps)

    def copy_from(self, other):
        for p, q in zip(self.params(), other.params()):
            p[...] = q


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--game", default="breakout")
    ap.add_argument("--steps", type=int, default=500_000, help="agent steps")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--uniform", action="store_true", help="alpha = 0: uniform replay")
    ap.add_argument("--capacity", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--every", type=int, default=10_000, help="progress line every N steps")
    ap.add_argument("--csv", help="write step,episode,return per episode here")
    ap.add_argument("--smoke", action="store_true", help="a short checked run")
    a = ap.parse_args()
    if a.smoke:
        a.steps, a.capacity, a.every = 3000, 2000, 1000
    gamma, n, target_every, train_every, clip = 0.99, 3, 2000, 4, 10.0
    learn_start = min(20_000, a.steps // 10)
    explore = max(a.steps // 10, 1)

    rng = np.random.default_rng(a.seed)
    env = Atari(a.game, a.seed)
    A = len(env.actions)
    updates = max((a.steps - learn_start) // train_every, 1)
    rb = per.FrameBuffer(a.capacity, (W, W), np.uint8, stack=K, n=n, gamma=gamma,
                         action_dtype=np.int64, alpha=0.0 if a.uniform else 0.6,
                         beta0=0.4, beta1=1.0, beta_steps=updates, seed=a.seed)
    sizes = [K * (W // POOL) ** 2, HIDDEN, A]
    net, target = MLP(sizes, rng), MLP(sizes, rng)
    target.copy_from(net)
    print(f"DQN on {a.game} ({'uniform' if a.uniform else 'prioritized'} replay, "
          f"per {per.__version__}), {A} actions, n {n}, batch {a.batch}, "
          f"{a.steps} agent steps; buffer of {a.capacity} transitions: "
          f"{rb.config['frames']} frames of {W}x{W}", flush=True)
    out = open(a.csv, "w") if a.csv else None
    if out:
        out.write("step,episode,return\n")

    frame = env.reset()
    stack = np.stack([frame] * K)  # the agent's own copy, for acting
    ep_ret, returns, t0 = 0.0, [], time.perf_counter()
    shown = {}  # smoke: every frame the environment showed, by step
    for step in range(1, a.steps + 1):
        eps = max(0.05, 1.0 - 0.95 * step / explore)
        if rng.random() < eps:
            act = int(rng.integers(A))
        else:
            act = int(np.argmax(net.forward(features(stack[None]))[0]))
        nxt, r, term, trunc = env.step(act)
        rb.step(frame, act, float(np.sign(r)), nxt, term, trunc)
        ep_ret += r
        if a.smoke:
            shown[step] = (stack.copy(), np.concatenate([stack[1:], nxt[None]]))
        frame = nxt
        stack = np.concatenate([stack[1:], nxt[None]])
        if term or trunc:
            returns.append(ep_ret)
            if out:
                out.write(f"{step},{len(returns)},{ep_ret:g}\n")
                out.flush()
            ep_ret = 0.0
            frame = env.reset()
            stack = np.stack([frame] * K)
        if step >= learn_start and step % train_every == 0:
            b = rb.sample(a.batch)
            s, s2 = features(b["obs"]), features(b["next_obs"])
            a2 = np.argmax(net.forward(s2), 1)
            q2 = target.forward(s2)[np.arange(a.batch), a2]
            y = b["reward"] + np.where(b["done"] != 0, 0.0, b["discount"] * q2)
            q = net.forward(s)  # last: backward uses its activations
            td = q[np.arange(a.batch), b["action"]] - y
            g = np.zeros_like(q)
            g[np.arange(a.batch), b["action"]] = (np.clip(td, -1.0, 1.0) * b["weights"]
                                                  / a.batch)
            net.adam(net.backward(g), a.lr, clip)
            rb.update(b["ids"], td)
            if (step // train_every) % (target_every // train_every) == 0:
                target.copy_from(net)
        if step % a.every == 0:
            avg = np.mean(returns[-20:]) if returns else float("nan")
            print(f"step {step:8d}  episodes {len(returns):5d}  avg20 {avg:6.1f}  "
                  f"epsilon {eps:.3f}  {step / (time.perf_counter() - t0):5.0f} steps/s",
                  flush=True)
    if out:
        out.close()
    if a.smoke:
        # every rebuilt obs must be a stack the agent saw before acting,
        # every next_obs one it saw after (n = 3: 1 to 3 steps later)
        rb.check()
        bad = 0
        seen_obs = {o.tobytes() for o, _ in shown.values()}
        seen_next = {x.tobytes() for _, x in shown.values()}
        for _ in range(20):
            b = rb.sample(a.batch)
            bad += sum(o.tobytes() not in seen_obs for o in b["obs"])
            bad += sum(x.tobytes() not in seen_next for x in b["next_obs"])
        print(f"smoke: {len(rb)} transitions, {rb.drawable} drawable, "
              f"{bad} rebuilt stacks not shown by the environment")
        return 0 if bad == 0 else 1
    avg = np.mean(returns[-20:]) if returns else float("nan")
    print(f"done: {len(returns)} episodes, mean return {avg:.1f} over the last 20")
    return 0


if __name__ == "__main__":
    sys.exit(main())
