"""Ape-X DQN (Horgan et al. 2018) on Gymnasium's CartPole-v1 over MPI,
with one prioritized replay sharded over the ranks (per.mpi).

The Python twin of examples/apex_cartpole.c. Rank 0 is the learner;
ranks 1 .. W-1 are actors. Actor i (of A = W - 1) plays its own
CartPole with its own fixed exploration rate

    epsilon_i = 0.4 ** (1 + 7 i / (A - 1))        (0.4 when A = 1)

and adds its 3-step items (per.NStep) to its own shard, with no
communication. The learner draws each minibatch from all the shards at
once (sample(root=0): one buffer's prioritized law over every actor's
items), takes one double-DQN step (the network and loss of
dqn_cartpole.py: Huber loss times the IS weights, Adam, a Polyak target)
and sends the new priorities back to the shards that hold the items
(update). Every --sync updates it broadcasts the network's weights to
the actors. The ranks run in rounds: each actor takes --actor-steps
environment steps, then all take part in one sample and one update.

Every --check updates the learner plays greedy episodes on an
environment of its own: CartPole-v1 is solved when 100 of them average
475 or more (Gymnasium's threshold); an evaluation stops as soon as that
mean is out of reach.

    mpirun -np 4 python python/examples/apex_cartpole.py [--steps N] [--seed S]

Needs numpy, gymnasium, mpi4py and per built with an MPI. Exits with 0
when solved within --steps (actor steps of all actors together), 3 when
not, 2 with fewer than 2 ranks.
"""

import argparse
import os
import sys
import time

import numpy as np
from mpi4py import MPI

import per
import per.mpi

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dqn_cartpole import EVAL_EPISODES, HIDDEN, MLP, greedy_solved  # noqa: E402

try:
    import gymnasium as gym
except ImportError as e:  # pragma: no cover
    raise SystemExit("this example needs gymnasium: pip install gymnasium") from e

LEARNER = 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300_000,
                    help="environment steps of all actors together")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--actor-steps", type=int, default=1,
                    help="steps of each actor per learner update")
    ap.add_argument("--sync", type=int, default=50, help="updates between weight broadcasts")
    ap.add_argument("--check", type=int, default=2000, help="updates between greedy evaluations")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--capacity", type=int, default=50_000, help="items per actor's shard")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--tau", type=float, default=0.005)
    a = ap.parse_args()

    comm = MPI.COMM_WORLD
    me, W = comm.rank, comm.size
    if W < 2:
        if me == 0:
            print("apex_cartpole.py: needs 2 or more ranks (mpirun -np 4 ...)")
        return 2
    A = W - 1
    gamma, n, learn_start, clip = 0.99, 3, 1000, 10.0
    rounds = max(a.steps // (A * a.actor_steps), 1)
    adder = per.NStep(n, gamma, obs_shape=4, obs_dtype=np.float32, action_dtype=np.int32)
    # the learner stores nothing: a shard of one slot
    buf = per.mpi.ReplayBuffer(comm, 1 if me == LEARNER else a.capacity,
                               adder.item_dtype, alpha=0.6, beta0=0.4, beta1=1.0,
                               beta_steps=rounds, seed=a.seed)
    rng = np.random.default_rng(a.seed * 1000 + me)
    net = MLP([4, HIDDEN, HIDDEN, 2], np.random.default_rng(a.seed))
    target = MLP([4, HIDDEN, HIDDEN, 2], np.random.default_rng(a.seed))
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=a.seed * 1000 + me)
    epsilon = 0.4 ** (1 + 7 * (me - 1) / (A - 1)) if A > 1 else 0.4
    if me == LEARNER:
        print(f"Ape-X DQN on CartPole-v1: 1 learner and {A} actors over MPI "
              f"(per {per.__version__}), batch {a.batch}, budget {a.steps} steps",
              flush=True)

    updates, solved, t0 = 0, None, time.perf_counter()
    result = np.zeros(2)  # (solved, mean return), from the learner
    for rnd in range(1, rounds + 1):
        if me != LEARNER:
            for _ in range(a.actor_steps):
                if rng.random() < epsilon:
                    action = int(rng.integers(2))
                else:
                    action = int(np.argmax(net.forward(obs[None].astype(np.float64))[0]))
                nxt, reward, term, trunc, _ = env.step(action)
                adder.step(buf, obs, action, reward, nxt, term, trunc)
                obs = nxt
                if term or trunc:
                    obs, _ = env.reset()
        if buf.global_size() < learn_start:
            continue
        b = buf.sample(a.batch, root=LEARNER)
        if me == LEARNER:
            s, s2 = b["obs"].astype(np.float64), b["next_obs"].astype(np.float64)
            act = b["action"].astype(np.int64)
            rows = np.arange(a.batch)
            a2 = np.argmax(net.forward(s2), 1)
            q2 = target.forward(s2)[rows, a2]
            y = b["reward"] + np.where(b["done"] != 0, 0.0, b["discount"] * q2)
            q = net.forward(s)              # last: backward uses its activations
            td = q[rows, act] - y
            g = np.zeros_like(q)
            g[rows, act] = np.clip(td, -1.0, 1.0) * b["weights"] / a.batch
            net.adam(net.backward(g), a.lr, clip)
            target.copy_from(net, a.tau)
            buf.update(b["ids"], td)
        else:
            buf.update([], [])
        updates += 1
        if updates % a.sync == 0:
            for p in net.params():
                comm.Bcast(p, root=LEARNER)
        if updates % a.check == 0:
            if me == LEARNER:
                ok, mean, _ = greedy_solved(net, gym.make("CartPole-v1"), 10_000 + updates)
                result[:] = (ok, mean)
                print(f"actor steps {rnd * A * a.actor_steps:7d}  updates {updates:6d}  "
                      f"greedy mean {mean:6.1f}  beta {buf.beta:.3f}  "
                      f"{rnd * A * a.actor_steps / (time.perf_counter() - t0):6.0f} "
                      f"steps/s", flush=True)
            comm.Bcast(result, root=LEARNER)
            if result[0]:
                solved = rnd * A * a.actor_steps
                break
    buf.close()
    if me == LEARNER:
        if solved is not None:
            print(f"solved at {solved} actor steps ({updates} updates): greedy mean "
                  f"return {result[1]:.1f} over {EVAL_EPISODES} episodes")
        else:
            print(f"not solved in {a.steps} actor steps ({updates} updates)")
    return 0 if solved is not None else 3


if __name__ == "__main__":
    sys.exit(main())
