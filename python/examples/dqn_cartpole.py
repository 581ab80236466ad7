"""DQN with prioritized replay on Gymnasium's CartPole-v1, with per's
buffer and n-step adder and a small NumPy network (no framework).

The agent of examples/dqn_cartpole.c in Python: a 4-64-64-2 ReLU network
trained with Adam on the Huber loss of the double-DQN target

    y = R + (done ? 0 : gamma^m * Q_target(s', argmax_a Q(s', a)))

where R, gamma^m, done and s' come from per.NStep (3-step returns), each
row's loss scaled by its importance-sampling weight, and the priorities
updated from the TD errors. The target network follows by Polyak
averaging. Solved: a mean return of 475 or more over the last 100
episodes (CartPole-v1's threshold).

    python python/examples/dqn_cartpole.py [--steps N] [--seed S] [--uniform]

Needs numpy, gymnasium and per (the distribution per-replay: pip install .
from the repository root).
Exits with 0 when it solves the task within --steps, 1 when not.
"""

import argparse
import sys
import time

import numpy as np

import per

try:
    import gymnasium as gym
except ImportError as e:  # pragma: no cover
    raise SystemExit("this example needs gymnasium: pip install gymnasium") from e

HIDDEN = 64
SOLVED_AT = 475.0
EVAL_EPISODES = 100  # greedy_solved's (the Ape-X examples')


class MLP:
    """inputs-HIDDEN-HIDDEN-outputs ReLU network with Adam (float64)."""

    def __init__(self, sizes, rng):
        self.w = [rng.standard_normal((a, b)) * np.sqrt(2.0 / a) for a, b in zip(sizes, sizes[1:])]
        self.b = [np.zeros(b) for b in sizes[1:]]
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

    def backward(self, grad_out):
        gw, gb = [None] * len(self.w), [None] * len(self.b)
        g = grad_out
        for i in reversed(range(len(self.w))):
            gw[i] = self.acts[i].T @ g
            gb[i] = g.sum(0)
            if i > 0:
                g = (g @ self.w[i].T) * (self.acts[i] > 0)
        return gw + gb

    def adam(self, grads, lr, clip, b1=0.9, b2=0.999, eps=1e-8):
        norm = np.sqrt(sum(float((g * g).sum()) for g in grads))
        if clip > 0 and norm > clip:
            grads = [g * (clip / norm) for g in grads]
        self.t += 1
        for p, g, m, v in zip(self.params(), grads, self.m, self.v):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            mh = m / (1 - b1 ** self.t)
            vh = v / (1 - b2 ** self.t)
            p -= lr * mh / (np.sqrt(vh) + eps)

    def copy_from(self, other, tau=1.0):
        for p, q in zip(self.params(), other.params()):
            p *= 1.0 - tau
            p += tau * q


def greedy_solved(net, env, seed, episodes=EVAL_EPISODES):
    """Plays up to `episodes` greedy episodes of env with net's argmax:
    (True when they average >= SOLVED_AT, their mean, episodes played).
    Stops at the first episode that puts that mean out of reach. The
    Ape-X examples' test (apex_cartpole.py, apex_server.py)."""
    short, total = 0.0, 0.0
    for k in range(episodes):
        obs, _ = env.reset(seed=seed + k)
        ret, done = 0.0, False
        while not done:
            q = net.forward(obs[None].astype(np.float64))[0]
            obs, reward, term, trunc, _ = env.step(int(np.argmax(q)))
            ret += reward
            done = term or trunc
        total += ret
        short += 500.0 - ret
        if short > episodes * (500.0 - SOLVED_AT):
            return False, total / (k + 1), k + 1
    return True, total / episodes, episodes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=150_000, help="environment steps budget")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--uniform", action="store_true", help="alpha = 0: uniform replay")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--capacity", type=int, default=100_000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--tau", type=float, default=0.005)
    ap.add_argument("--every", type=int, default=10_000, help="progress line every N steps")
    a = ap.parse_args()

    gamma, n, learn_start, explore, eps_final, clip = 0.99, 3, 1000, 10_000, 0.01, 10.0
    rng = np.random.default_rng(a.seed)
    env = gym.make("CartPole-v1")
    adder = per.NStep(n, gamma, obs_shape=4, obs_dtype=np.float32, action_dtype=np.int32)
    updates = max(a.steps - learn_start, 1)
    buf = per.ReplayBuffer(a.capacity, adder.item_dtype, alpha=0.0 if a.uniform else 0.6,
                           beta0=0.4, beta1=1.0, beta_steps=updates, seed=a.seed)
    net = MLP([4, HIDDEN, HIDDEN, 2], rng)
    target = MLP([4, HIDDEN, HIDDEN, 2], rng)
    target.copy_from(net)
    print(f"DQN on CartPole-v1 ({'uniform' if a.uniform else 'prioritized'} replay, "
          f"per {per.__version__}), n {n}, batch {a.batch}, budget {a.steps} steps")

    obs, _ = env.reset(seed=a.seed)
    returns, ep_ret, episodes, t0 = [], 0.0, 0, time.perf_counter()
    solved = None
    for step in range(1, a.steps + 1):
        eps = max(eps_final, 1.0 - (1.0 - eps_final) * step / explore)
        if rng.random() < eps:
            action = int(rng.integers(2))
        else:
            action = int(np.argmax(net.forward(obs[None].astype(np.float64))[0]))
        nxt, reward, term, trunc, _ = env.step(action)
        adder.step(buf, obs, action, reward, nxt, term, trunc)
        ep_ret += reward
        obs = nxt
        if term or trunc:
            returns.append(ep_ret)
            episodes += 1
            ep_ret = 0.0
            obs, _ = env.reset()
            if len(returns) >= 100 and np.mean(returns[-100:]) >= SOLVED_AT:
                solved = step
                break
        if step >= learn_start:
            b = buf.sample(a.batch)
            s, s2 = b["obs"].astype(np.float64), b["next_obs"].astype(np.float64)
            act = b["action"].astype(np.int64)
            a2 = np.argmax(net.forward(s2), 1)
            q2 = target.forward(s2)[np.arange(a.batch), a2]
            y = b["reward"] + np.where(b["done"] != 0, 0.0, b["discount"] * q2)
            q = net.forward(s)              # last: backward uses its activations
            td = q[np.arange(a.batch), act] - y
            g = np.zeros_like(q)
            g[np.arange(a.batch), act] = np.clip(td, -1.0, 1.0) * b["weights"] / a.batch
            net.adam(net.backward(g), a.lr, clip)
            target.copy_from(net, a.tau)
            buf.update(b["ids"], td)
        if step % a.every == 0:
            avg = np.mean(returns[-100:]) if returns else 0.0
            print(f"step {step:7d}  episodes {episodes:5d}  avg100 {avg:6.1f}  "
                  f"epsilon {eps:.3f}  beta {buf.beta:.3f}  "
                  f"{step / (time.perf_counter() - t0):6.0f} steps/s", flush=True)
    if solved is not None:
        print(f"solved at step {solved} (episode {episodes}): mean return "
              f"{np.mean(returns[-100:]):.1f} over the last 100 episodes")
    else:
        avg = np.mean(returns[-100:]) if returns else 0.0
        print(f"not solved in {a.steps} steps: mean return {avg:.1f} over the last 100 episodes")
    return 0 if solved is not None else 1


if __name__ == "__main__":
    sys.exit(main())
