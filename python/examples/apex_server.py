"""Ape-X DQN (Horgan et al. 2018) on Gymnasium's CartPole-v1 over per.net:
actor processes send their rollouts to a replay server, one learner
samples from it.

The main process is the learner. It starts a per.net.Server with one
table, "replay", whose item is one step of a rollout, and K actor
processes (--actors, default 3; multiprocessing, spawn). Actor i plays
its own CartPole with its own fixed exploration rate, Ape-X's schedule
as apex_cartpole.py's:

    epsilon_i = 0.4 ** (1 + 7 i / (K - 1))        (0.4 when K = 1)

It turns its steps into 3-step items (obs, action, reward: the n-step
return, discount: gamma^m, next_obs: the step to bootstrap from, done;
per_nstep's rule, computed here in Python) in a per.TrajectoryAccumulator
whose example is

    {"step":    {obs (T, 4), action (T,), reward (T,), discount (T,),
                 next_obs (T, 4), done (T,)},          buffered: T items
     "rollout": {actor (1,), epsilon (1,), version (1,)}}   single-item

(T = --rollout), and every T items computes their initial priorities as
TD errors with its own copy of the network (Ape-X) and sends the rollout
as one trajectory with per.net.TcpClient(host, port, example).send(acc,
td=td) (seed 003's client), episode ends included. The single-item
record rides along with every step: the learner reads which actor, at
which epsilon and with which weights each sampled item was played.

The learner draws each minibatch through a per.net.Client, takes one
double-DQN step (dqn_cartpole.py's network and loss: Huber loss times
the IS weights, Adam, a Polyak target), sends the new priorities back
(update) and every --sync updates publishes its weights to the actors in
shared memory (a lock and a version number; each actor takes the newest
weights before each rollout it starts). The table's rate limiter
(per.net.Table's min_size, samples_per_insert and error_margin: Reverb's
SampleToInsertRatio, in items) keeps actors and learner near --ratio
actor steps per update: while inserting is ahead an actor's send waits,
while sampling is ahead the learner's sample does (both clients retry
the server's busy answers).

Every --check updates the learner plays greedy episodes on an
environment of its own: CartPole-v1 is solved when 100 of them average
475 or more (Gymnasium's threshold; apex_cartpole.py's test, which stops
an evaluation as soon as that mean is out of reach).

Seeds: --seed fixes the network's initialization, the table's sampling,
each actor's environment and exploration. The actors run asynchronously
(the operating system schedules them, and the rate limiter lets them
drift by up to --slack steps' worth of items), so the order in which rollouts reach the
table, and with it the run, differs from run to run: runs with one seed
are alike in spirit, not step for step.

    python python/examples/apex_server.py [--actors K] [--steps N] [--seed S]
    python python/examples/apex_server.py --smoke      # a few seconds, CI

Needs numpy, gymnasium, pyzmq and per. Exits with 0 when solved within
--steps (actor steps of all actors together; --smoke: 0 when the
pipeline ran), 3 when not, 1 on a failure (an actor that died, the
server unreachable), 130 on Ctrl-C or SIGTERM; the actors are stopped and joined
and the server closed on every exit.
"""

import argparse
import os

# tiny matrices: one BLAS thread a process (K actors and a learner share the cores)
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import multiprocessing as mp  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import numpy as np  # noqa: E402

import per  # noqa: E402
import per.net  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dqn_cartpole import EVAL_EPISODES, HIDDEN, MLP, greedy_solved  # noqa: E402

try:
    import gymnasium as gym
except ImportError as e:  # pragma: no cover
    raise SystemExit("this example needs gymnasium: pip install gymnasium") from e

GAMMA, NSTEP = 0.99, 3
SIZES = [4, HIDDEN, HIDDEN, 2]


def make_example(T):
    """The TrajectoryAccumulator example: T n-step items, one record of
    the rollout's actor."""
    f32 = np.float32
    return {
        "step": {"obs": np.zeros((T, 4), f32), "action": np.zeros(T, np.int32),
                 "reward": np.zeros(T, f32), "discount": np.zeros(T, f32),
                 "next_obs": np.zeros((T, 4), f32), "done": np.zeros(T, np.uint8)},
        "rollout": {"actor": np.zeros(1, np.int32), "epsilon": np.zeros(1, f32),
                    "version": np.zeros(1, np.int32)},
    }


def actor_epsilon(i, K):
    return 0.4 ** (1 + 7 * i / (K - 1)) if K > 1 else 0.4


def n_params():
    return sum(a * b + b for a, b in zip(SIZES, SIZES[1:]))


def set_flat(net, flat):
    at = 0
    for p in net.params():
        p[...] = flat[at:at + p.size].reshape(p.shape)
        at += p.size


class Shared:
    """What the processes share: the weights (float64, guarded by lock,
    with their version), each actor's step count (its own slot), the
    stop flag."""

    def __init__(self, ctx, K):
        self.lock = ctx.Lock()
        self.weights = ctx.RawArray("d", n_params())
        self.version = ctx.RawValue("q", 0)
        self.steps = ctx.RawArray("q", K)
        self.stop = ctx.Event()

    def publish(self, net):
        flat = np.frombuffer(self.weights, np.float64)
        with self.lock:
            at = 0
            for p in net.params():
                flat[at:at + p.size] = p.ravel()
                at += p.size
            self.version.value += 1

    def fetch(self, net, have):
        """Copies the weights into net when newer than version `have`;
        returns the version net holds."""
        if self.version.value == have:
            return have
        with self.lock:
            set_flat(net, np.frombuffer(self.weights, np.float64))
            return int(self.version.value)

    def total_steps(self):
        return int(sum(self.steps))


class NStepItems:
    """per_nstep's rule (per.NStep's, which adds to a ReplayBuffer
    itself) giving the items instead: step() returns the (item, end)
    pairs a step completes. Once n steps are pending the oldest is an
    item of m = n steps (done 0, next_obs this step's); at an episode's
    end every pending step is one, oldest first, with m = the steps to
    the end, done = terminated, next_obs the last step's; end is
    END_TERMINATED or END_TRUNCATED for the episode's last item, else
    END_NONE. reward = r_t + gamma r_t+1 + ... (m terms), discount =
    gamma^m."""

    def __init__(self, n, gamma):
        self.n, self.gamma = n, gamma
        self.pending = []                 # (obs, action, reward)

    def _item(self, m, next_obs, done):
        ret = 0.0
        for j in range(m - 1, -1, -1):
            ret = self.pending[j][2] + self.gamma * ret
        o, act, _ = self.pending.pop(0)
        return {"obs": o, "action": act, "reward": ret, "discount": self.gamma ** m,
                "next_obs": next_obs, "done": done}

    def step(self, obs, action, reward, next_obs, terminated, truncated):
        self.pending.append((obs, action, float(reward)))
        out = []
        if terminated or truncated:
            end = per.END_TERMINATED if terminated else per.END_TRUNCATED
            while self.pending:
                m = len(self.pending)
                out.append((self._item(m, next_obs, bool(terminated)),
                            end if m == 1 else per.END_NONE))
        elif len(self.pending) == self.n:
            out.append((self._item(self.n, next_obs, False), per.END_NONE))
        return out


def td_errors(net, s, a, r, disc, done, s2):
    """Q(s, a) - (r + discount * max_a' Q(s', a')) with one network (an
    actor's initial priorities)."""
    q2 = net.forward(s2.astype(np.float64)).max(1)
    y = r + np.where(done != 0, 0.0, disc * q2)
    q = net.forward(s.astype(np.float64))
    return q[np.arange(len(a)), a] - y


def actor(i, K, host, port, a, shared, parent):
    """Actor i: plays, builds n-step items in its accumulator, sends each
    rollout with its TD errors; returns at the stop flag (or when the
    learner's process is gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the learner stops us
    T = a.rollout
    example = make_example(T)
    acc = per.TrajectoryAccumulator(example)
    rows = acc.build()["step"]        # views of acc's memory: the records added
    eps = actor_epsilon(i, K)
    me = a.seed * 1000 + i + 1        # apex_cartpole.py's rank i + 1
    rng = np.random.default_rng(me)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=me)
    net = MLP(SIZES, np.random.default_rng(a.seed))
    version = shared.fetch(net, 0)
    nstep = NStepItems(NSTEP, GAMMA)
    steps = 0
    # busy answers (inserting ahead) are retried for up to 2 s at a time,
    # then the stop flag is looked at
    client = per.net.TcpClient(host, port, example, timeout=2.0)
    try:
        def send():
            nonlocal version
            n = acc.count("step")
            td = td_errors(net, rows["obs"][:n], rows["action"][:n], rows["reward"][:n],
                           rows["discount"][:n], rows["done"][:n], rows["next_obs"][:n])
            acc.add("rollout", {"actor": i, "epsilon": eps, "version": version})
            tree = acc.build()
            ends = np.array(acc.episode_ends("step")[:n])
            while True:
                try:
                    client.send(tree, n=n, ends=ends, td=td)
                    break
                except per.Error as e:
                    if e.name != "PER_ERR_BUSY" or shared.stop.is_set():
                        raise
                if os.getppid() != parent:
                    raise SystemExit(f"actor {i}: the learner is gone")
            version = shared.fetch(net, version)
            if os.getppid() != parent:
                raise SystemExit(f"actor {i}: the learner is gone")

        while not shared.stop.is_set():
            if rng.random() < eps:
                action = int(rng.integers(2))
            else:
                action = int(np.argmax(net.forward(obs[None].astype(np.float64))[0]))
            nxt, reward, term, trunc, _ = env.step(action)
            steps += 1
            shared.steps[i] = steps
            for item, end in nstep.step(obs, action, reward, nxt, term, trunc):
                acc.add("step", item)
                if end:
                    acc.end(end)
                if acc.count("step") == T:
                    send()
            obs = env.reset()[0] if term or trunc else nxt
    finally:
        client.close()
        env.close()


def actor_main(i, K, host, port, a, shared, parent):
    """The process's entry: exit status 0 when stopped, 1 on an error
    (its traceback printed)."""
    try:
        actor(i, K, host, port, a, shared, parent)
    except BaseException:
        if not shared.stop.is_set():
            print(f"actor {i} failed:", file=sys.stderr)
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
    os._exit(0)


def check_actors(procs):
    for i, p in enumerate(procs):
        if p.exitcode is not None:
            raise RuntimeError(f"actor {i} exited with status {p.exitcode}")


def learn(a, shared, procs, server, t0):
    """The learner's loop; returns (solved at actor steps or None, updates)."""
    K = a.actors
    example = make_example(a.rollout)
    net = MLP(SIZES, np.random.default_rng(a.seed))
    target = MLP(SIZES, np.random.default_rng(a.seed))
    shared.publish(net)
    for p in procs:
        p.start()
    client = per.net.Client(server.endpoint, dtype=per.net.example_dtype(example),
                            timeout=2.0)
    csv = open(a.csv, "w") if a.csv else None
    try:
        if csv:
            csv.write("actor_steps,updates,greedy_mean,episodes\n")
        while client.info()["size"] < a.learn_start:   # the first items
            check_actors(procs)
            time.sleep(0.01)
        rows = np.arange(a.batch)
        updates, shares = 0, np.zeros(K)
        while True:
            steps = shared.total_steps()
            if steps >= a.steps:
                return None, updates
            try:
                b = client.sample(a.batch)  # waits while sampling is ahead
            except per.Error as e:          # for 2 s: then look at the actors
                if e.name != "PER_ERR_BUSY":
                    raise
                check_actors(procs)
                continue
            it = b.items["step"]
            s, s2 = it["obs"].astype(np.float64), it["next_obs"].astype(np.float64)
            act = it["action"].astype(np.int64)
            a2 = np.argmax(net.forward(s2), 1)
            q2 = target.forward(s2)[rows, a2]
            y = it["reward"] + np.where(it["done"] != 0, 0.0, it["discount"] * q2)
            q = net.forward(s)              # last: backward uses its activations
            td = q[rows, act] - y
            g = np.zeros_like(q)
            g[rows, act] = np.clip(td, -1.0, 1.0) * b.weights / a.batch
            net.adam(net.backward(g), a.lr, 10.0)
            target.copy_from(net, a.tau)
            client.update(b.ids, td)
            shares += np.bincount(b.items["rollout"]["actor"].ravel(), minlength=K)
            updates += 1
            if updates % a.sync == 0:
                shared.publish(net)
                check_actors(procs)
            if updates % a.check == 0:
                episodes = 5 if a.smoke else EVAL_EPISODES
                ok, mean, played = greedy_solved(net, gym.make("CartPole-v1"),
                                                 10_000 + updates, episodes)
                steps = shared.total_steps()
                info = client.info()
                share = "/".join(f"{x:.0%}" for x in shares / shares.sum())
                # how many weight publications ago the batch's items were played
                lag = shared.version.value - float(b.items["rollout"]["version"].mean())
                print(f"actor steps {steps:7d}  updates {updates:6d}  greedy mean "
                      f"{mean:6.1f} ({played:3d} episodes)  beta {b.beta:.3f}  "
                      f"replay {info['size']:6d}  actors' share {share}  "
                      f"items' age {lag:5.1f} syncs  "
                      f"{steps / (time.perf_counter() - t0):5.0f} steps/s", flush=True)
                if csv:
                    csv.write(f"{steps},{updates},{mean:.2f},{played}\n")
                    csv.flush()
                shares[:] = 0
                if ok and not a.smoke:
                    return steps, updates
                if a.smoke:
                    return None, updates
    finally:
        client.close()
        if csv:
            csv.close()


def interrupt(signum, frame):
    raise KeyboardInterrupt


def stop_actors(shared, procs):
    """Sets the stop flag, joins every actor (terminating one that does
    not stop within 10 s, killing one that ignores that), so that none is
    left running or unreaped; a second Ctrl-C does not cut this short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    shared.stop.set()
    deadline = time.monotonic() + 10.0
    for p in procs:
        if p.pid is not None:
            p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(5.0)
        if p.is_alive():
            p.kill()
            p.join()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--actors", type=int, default=3, help="actor processes")
    ap.add_argument("--steps", type=int, default=300_000,
                    help="environment steps of all actors together")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rollout", type=int, default=32, help="items an actor sends at once (T)")
    ap.add_argument("--ratio", type=float, default=3.0,
                    help="actor steps per learner update (the rate limiter's)")
    ap.add_argument("--slack", type=int, default=500,
                    help="steps actors or learner may run ahead of --ratio")
    ap.add_argument("--learn-start", type=int, default=1000, help="items before the first update")
    ap.add_argument("--sync", type=int, default=50, help="updates between weight publications")
    ap.add_argument("--check", type=int, default=2000, help="updates between greedy evaluations")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--capacity", type=int, default=100_000, help="the table's items")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--tau", type=float, default=0.005)
    ap.add_argument("--csv", help="write the evaluations (actor steps, updates, "
                    "greedy mean, episodes played) here")
    ap.add_argument("--smoke", action="store_true",
                    help="a few seconds: 200 updates, one evaluation of up to 5 "
                    "episodes, exit 0")
    a = ap.parse_args()
    if a.smoke:
        a.steps, a.learn_start, a.check, a.slack = 3000, 300, 200, 100
    if a.actors < 1 or a.rollout < 2:
        ap.error("--actors >= 1 and --rollout >= 2")

    signal.signal(signal.SIGTERM, interrupt)   # as Ctrl-C: the same cleanup
    K = a.actors
    example = make_example(a.rollout)
    updates_planned = max(int((a.steps - a.learn_start) / a.ratio), 1)
    # the rate limiter, in items: a.batch sampled an update, one inserted a
    # step; --slack steps' worth either way
    spi = a.batch / a.ratio
    table = per.net.Table(a.capacity, example=example, alpha=0.6, beta0=0.4, beta1=1.0,
                          beta_steps=updates_planned, seed=a.seed,
                          min_size=a.learn_start, samples_per_insert=spi,
                          error_margin=a.slack * spi)
    ctx = mp.get_context("spawn")   # not fork: the server's thread runs already
    shared = Shared(ctx, K)
    t0 = time.perf_counter()
    status = 1
    with per.net.Server({"replay": table}, "tcp://127.0.0.1:0") as server:
        server.start()
        host, port = server.endpoint[len("tcp://"):].rsplit(":", 1)
        print(f"Ape-X DQN on CartPole-v1 over per.net (per {per.__version__}): "
              f"1 learner and {K} actors, server {server.endpoint}, rollouts of "
              f"{a.rollout}, {a.ratio:g} actor steps an update, batch {a.batch}, "
              f"budget {a.steps} steps{' (smoke)' if a.smoke else ''}", flush=True)
        procs = [ctx.Process(target=actor_main, name=f"apex actor {i}", daemon=True,
                             args=(i, K, host, int(port), a, shared, os.getpid()))
                 for i in range(K)]
        try:
            solved, updates = learn(a, shared, procs, server, t0)
            wall = time.perf_counter() - t0
            steps = shared.total_steps()
            if a.smoke:
                print(f"smoke: {steps} actor steps, {updates} updates in {wall:.1f} s")
                status = 0
            elif solved is not None:
                print(f"solved at {solved} actor steps ({updates} updates) in {wall:.0f} s")
                status = 0
            else:
                print(f"not solved in {a.steps} actor steps ({updates} updates, "
                      f"{wall:.0f} s)")
                status = 3
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            status = 130
        except Exception:
            traceback.print_exc()
            status = 1
        finally:
            stop_actors(shared, procs)
    for i, p in enumerate(procs):
        if p.exitcode not in (0, None) and status in (0, 3):
            print(f"actor {i} exited with status {p.exitcode}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
