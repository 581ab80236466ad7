"""DQN on Gymnasium's CartPole-v1 with seed 001's GPU replay,
per.seeds.GPUReplayPER: the coursework's training script (section 16 of
seed 001) on per's buffer, changed by one import.

The agent is the seed's: a 4-128-128-2 ReLU Q-network, epsilon-greedy
actions with epsilon decayed linearly, one-step targets

    y = r + gamma * (1 - done) * max_a Q_target(s', a)

from a target network copied from the online one every
target_update_freq steps, the loss of each sampled row scaled by its
importance-sampling weight, Adam, and the priorities set from the TD
errors (buf.update_priorities(batch.indices, td)). Transitions, batches
and priorities stay on the replay's device: "cuda" (per.cuda) when PyTorch
sees a GPU and per was built with CUDA, else "cpu" (per.cuda.host, the
CPU emulation of per's CUDA kernels: the same kernels, slower).

Solved: every --every environment steps (5,000) the online network plays
greedy episodes on an environment of its own, and CartPole-v1 is solved
when 100 of them average 475 or more (Gymnasium's threshold; the test of
python/examples/apex_cartpole.py, which gives up as soon as that mean is
out of reach); the run stops there. The seed's script never evaluates.

    python python/examples/train_cartpole_per.py [--seed S] [--total-steps N]
        [--device auto|cuda|cpu] [--host] [--csv FILE] [--smoke] ...

Every field of Config is a flag (--batch-size 256, --eps-end 0.01, ...;
huber's is --squared).
Prints progress at each evaluation (avg100: the training episodes'
mean, greedy: the evaluation's); --csv writes step, episode, return for
each training episode; --smoke runs 3000 steps and checks the pipeline
(every call ran, the replay passes its check), not the learning.

Config's defaults differ from the seed's so that it solves in minutes on
a CPU, where per.cuda.host emulates the kernels thread by thread: a
sample and an update take about 4 ms together at batch 64, 10 - 15 ms at
batch 256 (on a 2-core machine):
    seed               0 -> 1, the other examples' default;
    total_steps        300,000 -> 150,000: a budget; the run stops when
                       solved;
    warmup_steps       10,000 -> 1,000 and eps_decay_steps 100,000 ->
                       10,000: CartPole needs little random play, and the
                       seed explores for a third of its budget;
    train_freq         1 -> 4 and batch_size 256 -> 64: a quarter of the
                       updates, each of a quarter of the rows (the seed's
                       would take hours on per.cuda.host);
    lr                 1e-3 -> 5e-4 and target_update_freq 1,000 -> 500
                       steps (125 updates at train_freq 4);
    capacity           100,000 -> 50,000 and beta_anneal_steps 200,000
                       -> 150,000 (beta reaches 1 at the budget's end);
    huber, max_grad_norm (not in the seed): the Huber loss in place of the
                       squared TD error, the gradient's norm clipped at 10.
With these defaults seeds 1 .. 4 solve at 50k, 50k, 70k and 70k
environment steps; putting back the seed's lr and target_update_freq
takes 95k, 95k, 125k, 70k, its capacity and beta_anneal_steps 90k, 75k,
85k, 75k, its loss (--squared --max-grad-norm 0) 90k, 90k, 90k, 80k.
Two changes are not hyperparameters: done is Gymnasium's terminated
(the seed's also ends the return at the 500-step time limit, a state it
then learns to value as terminal), and random actions come from a
seeded NumPy generator (the seed's from the unseeded action space), so
one --seed gives one run on a machine.

Needs torch, gymnasium, numpy and per with per.cuda (nvcc at build time)
or per.cuda.host (pip install . -Csetup-args=-Dpython_cuda_host=true).
Exits with 0 when solved within --total-steps, 1 when not (--smoke: 0
when the pipeline ran), 2 when the replay's device is not there.
"""

import argparse
import dataclasses
import sys
import time

import numpy as np

import per
import per.cuda as pc

try:
    import gymnasium as gym
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError as e:  # pragma: no cover
    raise SystemExit("this example needs torch and gymnasium: "
                     "pip install torch gymnasium") from e

from per.seeds import GPUReplayPER

SOLVED_AT = 475.0
WINDOW = 100


@dataclasses.dataclass
class Config:
    """The seed's Config, its field names kept; the defaults that differ
    are listed in the module's docstring."""

    env_id: str = "CartPole-v1"
    seed: int = 1

    total_steps: int = 150_000
    warmup_steps: int = 1_000

    capacity: int = 50_000
    batch_size: int = 64
    gamma: float = 0.99

    lr: float = 5e-4
    train_freq: int = 4
    target_update_freq: int = 500

    # epsilon-greedy
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_decay_steps: int = 10_000

    # PER
    alpha: float = 0.6
    beta0: float = 0.4
    beta_anneal_steps: int = 150_000

    # not in the seed
    huber: bool = True
    max_grad_norm: float = 10.0


class QNet(nn.Module):
    """obs_dim-128-128-act_dim ReLU network: one Q-value per action."""

    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(obs_dim, 128), nn.ReLU(),
                                    nn.Linear(128, 128), nn.ReLU(),
                                    nn.Linear(128, act_dim))

    def forward(self, x):
        return self.layers(x)


def epsilon_at(step, cfg):
    """eps_start at step 0 down to eps_end at eps_decay_steps, linearly."""
    frac = min(1.0, step / max(1, cfg.eps_decay_steps))
    return cfg.eps_start + frac * (cfg.eps_end - cfg.eps_start)


def greedy_action(q, obs, device):
    with torch.no_grad():
        o = torch.as_tensor(obs, dtype=torch.float32, device=device)
        return int(q(o[None]).argmax(1).item())


def greedy_solved(q, env, seed, device):
    """Plays up to WINDOW greedy episodes (starts seed, seed + 1, ...):
    (True, their mean) when it is SOLVED_AT or more; (False, the mean so
    far) as soon as that is out of reach (apex_cartpole.py's test)."""
    limit = env.spec.max_episode_steps
    short, total = 0.0, 0.0
    for k in range(WINDOW):
        obs, _ = env.reset(seed=seed + k)
        ret, done = 0.0, False
        while not done:
            obs, rew, term, trunc, _ = env.step(greedy_action(q, obs, device))
            ret += float(rew)
            done = term or trunc
        total += ret
        short += limit - ret
        if short > WINDOW * (limit - SOLVED_AT):
            return False, total / (k + 1)
    return True, total / WINDOW


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f in dataclasses.fields(Config):
        flag = "--" + f.name.replace("_", "-")
        if f.type in (bool, "bool"):
            continue
        kind = {"int": int, "float": float, "str": str}.get(f.type, f.type)
        ap.add_argument(flag, dest=f.name, type=kind, default=f.default,
                        help=f"Config.{f.name} (default {f.default})")
    ap.add_argument("--squared", dest="huber", action="store_false", default=True,
                    help="the seed's squared TD loss instead of the Huber loss")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                    help="the replay's and the networks' device: cuda (per.cuda), "
                         "cpu (per.cuda.host); auto: cuda when there is one")
    ap.add_argument("--host", action="store_true", help="the same as --device cpu")
    ap.add_argument("--csv", help="write step,episode,return per episode here")
    ap.add_argument("--every", type=int, default=5_000,
                    help="environment steps between greedy evaluations and "
                         "progress lines")
    ap.add_argument("--smoke", action="store_true",
                    help="3000 steps: the pipeline only, not the learning")
    a = ap.parse_args(argv)
    if a.host:
        a.device = "cpu"
    cfg = Config(**{f.name: getattr(a, f.name) for f in dataclasses.fields(Config)})
    if a.smoke:
        cfg.total_steps = min(cfg.total_steps, 3000)
        cfg.warmup_steps = min(cfg.warmup_steps, 500)
        a.every = min(a.every, 1000)
    return cfg, a


def pick_device(want):
    """("cuda" | "cpu", None) or (None, why not)."""
    gpu = torch.cuda.is_available() and pc.available()
    if want == "cuda" or (want == "auto" and gpu):
        if not pc.available():
            return None, pc.unavailable_reason()
        if not torch.cuda.is_available():
            return None, "PyTorch sees no CUDA device (try --device cpu)"
        return "cuda", None
    if not pc.host.available():
        return None, ("device cpu runs per's CUDA kernels on the CPU through "
                      "per.cuda.host, which this per was built without: "
                      "pip install . -Csetup-args=-Dpython_cuda_host=true "
                      "(or run where per.cuda and a GPU are)")
    return "cpu", None


def main(argv=None):
    cfg, a = parse(sys.argv[1:] if argv is None else argv)
    device, why = pick_device(a.device)
    if device is None:
        print(f"train_cartpole_per: {why}", file=sys.stderr)
        return 2
    torch.manual_seed(cfg.seed)
    if device == "cpu":
        torch.set_num_threads(1)
    rng = np.random.default_rng(cfg.seed)

    env = gym.make(cfg.env_id)
    obs, _ = env.reset(seed=cfg.seed)
    obs_dim, act_dim = obs.shape[0], int(env.action_space.n)
    q = QNet(obs_dim, act_dim).to(device)
    q_targ = QNet(obs_dim, act_dim).to(device)
    q_targ.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=cfg.lr)
    buf = GPUReplayPER(capacity=cfg.capacity, obs_shape=(obs_dim,), device=device,
                       alpha=cfg.alpha, beta0=cfg.beta0,
                       beta_anneal_steps=cfg.beta_anneal_steps, seed=cfg.seed)
    where = (f"per.cuda on {torch.cuda.get_device_name()}" if device == "cuda"
             else "per.cuda.host on the CPU")
    print(f"DQN on {cfg.env_id} with per.seeds.GPUReplayPER ({where}, per "
          f"{per.__version__}), batch {cfg.batch_size}, train every "
          f"{cfg.train_freq} steps, {'Huber' if cfg.huber else 'squared'} loss, "
          f"seed {cfg.seed}, budget {cfg.total_steps} steps", flush=True)
    out = open(a.csv, "w") if a.csv else None
    if out:
        out.write("step,episode,return\n")

    returns, ep_ret, updates, losses = [], 0.0, 0, []
    solved, greedy, t0 = None, float("nan"), time.perf_counter()
    eval_env = gym.make(cfg.env_id)
    for step in range(1, cfg.total_steps + 1):
        eps = epsilon_at(step, cfg)
        if rng.random() < eps:
            act = int(rng.integers(act_dim))
        else:
            act = greedy_action(q, obs, device)
        nxt, rew, term, trunc, _ = env.step(act)
        # terminated, not truncated: the time limit is no terminal state
        buf.add(obs, act, float(rew), nxt, term)
        ep_ret += float(rew)
        obs = nxt
        if term or trunc:
            returns.append(ep_ret)
            if out:
                out.write(f"{step},{len(returns)},{ep_ret:.0f}\n")
                out.flush()
            ep_ret = 0.0
            obs, _ = env.reset()

        if step >= cfg.warmup_steps and step % cfg.train_freq == 0:
            batch = buf.sample(batch_size=cfg.batch_size, step=step)
            with torch.no_grad():
                best_next = q_targ(batch.next_obs).max(1).values
                y = batch.rew + cfg.gamma * (1.0 - batch.done) * best_next
            q_sa = q(batch.obs).gather(1, batch.act.unsqueeze(1)).squeeze(1)
            td = y - q_sa
            if cfg.huber:
                per_row = F.smooth_l1_loss(q_sa, y, reduction="none")
            else:
                per_row = td.pow(2)
            loss = (batch.weights * per_row).mean()
            opt.zero_grad()
            loss.backward()
            if cfg.max_grad_norm > 0:
                nn.utils.clip_grad_norm_(q.parameters(), cfg.max_grad_norm)
            opt.step()
            buf.update_priorities(batch.indices, td.detach())
            updates += 1
            if a.smoke:
                losses.append(float(loss.detach()))
        if step % cfg.target_update_freq == 0:
            q_targ.load_state_dict(q.state_dict())

        if step % a.every == 0:
            ok, greedy = greedy_solved(q, eval_env, 10_000 + step, device)
            avg = np.mean(returns[-WINDOW:]) if returns else float("nan")
            print(f"step {step:7d}  episodes {len(returns):5d}  avg100 {avg:6.1f}  "
                  f"greedy {greedy:6.1f}  epsilon {eps:.3f}  beta {buf.beta(step):.3f}  "
                  f"{step / (time.perf_counter() - t0):5.0f} steps/s", flush=True)
            if ok and step >= cfg.warmup_steps:
                solved = step
                break
    if out:
        out.close()
    env.close()
    eval_env.close()
    secs = time.perf_counter() - t0
    avg = np.mean(returns[-WINDOW:]) if returns else float("nan")

    if a.smoke:
        buf.check()  # raises per.Error for any call the kernels refused
        ok = (len(returns) >= 5 and updates > 0 and len(buf) == step
              and bool(np.all(np.isfinite(losses))))
        if device == "cpu" and pc.host.module.shim_races():
            print("the emulation saw threads of a launch conflict")
            ok = False
        print(f"smoke: {step} steps, {len(returns)} episodes, {updates} updates "
              f"in {secs:.1f} s: {'ok' if ok else 'FAILED'}")
        return 0 if ok else 1
    if solved is not None:
        print(f"solved at step {solved} (episode {len(returns)}, {updates} updates, "
              f"{secs:.0f} s): greedy mean return {greedy:.1f} over {WINDOW} "
              f"episodes")
        return 0
    print(f"not solved in {cfg.total_steps} steps ({updates} updates, {secs:.0f} s): "
          f"mean return {avg:.1f} over the last {WINDOW} training episodes")
    return 1


if __name__ == "__main__":
    sys.exit(main())
