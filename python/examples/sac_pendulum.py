"""SAC with prioritized replay on Gymnasium's Pendulum-v1, with per's
buffer and n-step adder and PyTorch (CPU).

Soft actor-critic (Haarnoja et al. 2018) with twin critics and a learned
temperature. The replay is switched as seed 000's SACTrainingConfig
switches it, with its names and defaults: use_per (default False: uniform
replay, alpha = 0, every weight 1), per_alpha 0.6, per_beta_start 0.4,
per_beta_end 1.0, per_beta_anneal_steps 200000 (sample calls). With
use_per each sampled transition's priority is the mean of the twin
critics' absolute TD errors, (|d1| + |d2|) / 2, and the critic loss is
weighted by the importance-sampling weights, whose exponent beta the
buffer anneals from per_beta_start to per_beta_end. Both use 3-step
returns from per.NStep.

    python python/examples/sac_pendulum.py [--use-per | --no-per]
        [--per-alpha A] [--per-beta-start B0] [--per-beta-end B1]
        [--per-beta-anneal-steps N] [--steps N] [--seed S] [--csv FILE]
        [--smoke]

(--per is --use-per.)

Pendulum-v1 episodes are 200 steps; a return above about -200 is a
pendulum held upright. Prints the mean return of the last 10 episodes
as it goes; --csv writes step, episode, return for each episode.
--smoke: a short run that only checks the pipeline. Needs torch,
gymnasium and per (pip install . from the repository root).
"""

import argparse
import dataclasses
import sys
import time

import numpy as np

import per

try:
    import gymnasium as gym
    import torch
    from torch import nn
except ImportError as e:  # pragma: no cover
    raise SystemExit("this example needs torch and gymnasium: "
                     "pip install torch gymnasium") from e

HIDDEN = 256


@dataclasses.dataclass
class SACTrainingConfig:
    """The replay switches of seed 000's trainer config, its defaults."""

    buffer_size: int = 100_000
    n_steps: int = 3
    gamma: float = 0.99
    use_per: bool = False
    per_alpha: float = 0.6
    per_beta_start: float = 0.4
    per_beta_end: float = 1.0
    per_beta_anneal_steps: int = 200_000


def make_buffer(cfg, item_dtype, seed):
    """The seed's switch: prioritized replay when cfg.use_per, else
    uniform replay (alpha = 0: every weight 1, whatever beta) in the same
    per.ReplayBuffer."""
    return per.ReplayBuffer(cfg.buffer_size, item_dtype,
                            alpha=cfg.per_alpha if cfg.use_per else 0.0,
                            beta0=cfg.per_beta_start, beta1=cfg.per_beta_end,
                            beta_steps=cfg.per_beta_anneal_steps, seed=seed)


def mlp(inp, out):
    return nn.Sequential(nn.Linear(inp, HIDDEN), nn.ReLU(),
                         nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                         nn.Linear(HIDDEN, out))


class Actor(nn.Module):
    """A tanh-squashed Gaussian policy."""

    def __init__(self, obs, act, scale):
        super().__init__()
        self.net = mlp(obs, 2 * act)
        self.scale = scale

    def forward(self, s, deterministic=False):
        mu, log_std = self.net(s).chunk(2, -1)
        log_std = log_std.clamp(-20, 2)
        std = log_std.exp()
        u = mu if deterministic else mu + std * torch.randn_like(mu)
        a = torch.tanh(u)
        # log pi(a|s) with the tanh change of variables
        logp = (-0.5 * ((u - mu) / std) ** 2 - log_std - 0.5 * np.log(2 * np.pi)).sum(-1)
        logp = logp - torch.log(1 - a.pow(2) + 1e-6).sum(-1)
        return a * self.scale, logp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    d = SACTrainingConfig()
    ap.add_argument("--use-per", "--per", dest="per", action="store_true",
                    default=d.use_per, help="prioritized replay (use_per)")
    ap.add_argument("--no-per", dest="per", action="store_false",
                    help="uniform replay (the default)")
    ap.add_argument("--per-alpha", type=float, default=d.per_alpha)
    ap.add_argument("--per-beta-start", type=float, default=d.per_beta_start)
    ap.add_argument("--per-beta-end", type=float, default=d.per_beta_end)
    ap.add_argument("--per-beta-anneal-steps", type=int,
                    default=d.per_beta_anneal_steps, help="sample calls")
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--csv", help="write step,episode,return per episode here")
    ap.add_argument("--smoke", action="store_true", help="a short checked run")
    a = ap.parse_args()
    if a.smoke:
        a.steps = 1200
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(a.seed)
    env = gym.make("Pendulum-v1")
    obs_dim = env.observation_space.shape[0]
    act_dim = env.action_space.shape[0]
    scale = float(env.action_space.high[0])
    cfg = SACTrainingConfig(use_per=a.per, per_alpha=a.per_alpha,
                            per_beta_start=a.per_beta_start,
                            per_beta_end=a.per_beta_end,
                            per_beta_anneal_steps=a.per_beta_anneal_steps)
    gamma, n, tau, learn_start = cfg.gamma, cfg.n_steps, 0.005, 1000 if not a.smoke else 300

    adder = per.NStep(n, gamma, obs_shape=obs_dim, obs_dtype=np.float32,
                      action_shape=act_dim, action_dtype=np.float32)
    buf = make_buffer(cfg, adder.item_dtype, a.seed)
    actor = Actor(obs_dim, act_dim, scale)
    q1, q2 = mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)
    t1, t2 = mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)
    t1.load_state_dict(q1.state_dict())
    t2.load_state_dict(q2.state_dict())
    log_alpha = torch.zeros(1, requires_grad=True)
    target_entropy = -float(act_dim)
    opt_pi = torch.optim.Adam(actor.parameters(), lr=a.lr)
    opt_q = torch.optim.Adam(list(q1.parameters()) + list(q2.parameters()), lr=a.lr)
    opt_a = torch.optim.Adam([log_alpha], lr=a.lr)
    kind = (f"prioritized: alpha {cfg.per_alpha:g}, beta {cfg.per_beta_start:g} -> "
            f"{cfg.per_beta_end:g} over {cfg.per_beta_anneal_steps} samples"
            if cfg.use_per else "uniform")
    print(f"SAC on Pendulum-v1 ({kind} replay, "
          f"per {per.__version__}), n {n}, batch {a.batch}, {a.steps} steps",
          flush=True)
    out = open(a.csv, "w") if a.csv else None
    if out:
        out.write("step,episode,return\n")

    obs, _ = env.reset(seed=a.seed)
    ep_ret, returns, t0 = 0.0, [], time.perf_counter()
    for step in range(1, a.steps + 1):
        if step < learn_start:
            act = rng.uniform(-scale, scale, act_dim).astype(np.float32)
        else:
            with torch.no_grad():
                act = actor(torch.as_tensor(obs, dtype=torch.float32)[None])[0][0].numpy()
        nxt, r, term, trunc, _ = env.step(act)
        adder.step(buf, obs, act, float(r), nxt, term, trunc)
        ep_ret += float(r)
        obs = nxt
        if term or trunc:
            returns.append(ep_ret)
            if out:
                out.write(f"{step},{len(returns)},{ep_ret:.2f}\n")
                out.flush()
            ep_ret = 0.0
            obs, _ = env.reset()
        if step < learn_start:
            continue
        b = buf.sample(a.batch)
        s = torch.from_numpy(b["obs"])
        s2 = torch.from_numpy(b["next_obs"])
        act_b = torch.from_numpy(b["action"]).reshape(-1, act_dim)
        alpha = log_alpha.exp().detach()
        with torch.no_grad():
            a2, logp2 = actor(s2)
            sa2 = torch.cat([s2, a2], -1)
            q_next = torch.min(t1(sa2), t2(sa2)).squeeze(-1) - alpha * logp2
            notdone = 1.0 - torch.from_numpy(b["done"].astype(np.float32))
            y = torch.from_numpy(b["reward"]) + notdone * torch.from_numpy(b["discount"]) * q_next
        sa = torch.cat([s, act_b], -1)
        d1 = q1(sa).squeeze(-1) - y
        d2 = q2(sa).squeeze(-1) - y
        w = torch.from_numpy(b["weights"])  # all 1 for uniform replay
        q_loss = (w * 0.5 * (d1.pow(2) + d2.pow(2))).mean()
        opt_q.zero_grad()
        q_loss.backward()
        opt_q.step()
        buf.update(b["ids"], 0.5 * (d1.detach().abs() + d2.detach().abs()).numpy())
        a_new, logp = actor(s)
        sa_new = torch.cat([s, a_new], -1)
        pi_loss = (alpha * logp - torch.min(q1(sa_new), q2(sa_new)).squeeze(-1)).mean()
        opt_pi.zero_grad()
        pi_loss.backward()
        opt_pi.step()
        a_loss = -(log_alpha * (logp.detach() + target_entropy)).mean()
        opt_a.zero_grad()
        a_loss.backward()
        opt_a.step()
        with torch.no_grad():
            for net, tgt in ((q1, t1), (q2, t2)):
                for p, tp in zip(net.parameters(), tgt.parameters()):
                    tp.mul_(1 - tau).add_(tau * p)
        if step % 2000 == 0:
            avg = np.mean(returns[-10:]) if returns else float("nan")
            print(f"step {step:6d}  episodes {len(returns):4d}  avg10 {avg:8.1f}  "
                  f"beta {buf.beta:.3f}  alpha {alpha.item():.3f}  "
                  f"{step / (time.perf_counter() - t0):5.0f} steps/s", flush=True)
    if out:
        out.close()
    avg = np.mean(returns[-10:]) if returns else float("nan")
    print(f"done: {len(returns)} episodes, mean return {avg:.1f} over the last 10")
    if a.smoke:
        buf.check()
        ok = len(returns) >= 5 and np.isfinite(avg) and buf.step == a.steps - learn_start + 1
        print("smoke:", "ok" if ok else "FAILED")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
