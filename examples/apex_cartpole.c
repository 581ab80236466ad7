/* apex_cartpole.c - Ape-X DQN (Horgan et al. 2018) on CartPole-v1 over
   MPI, with one prioritized replay sharded over the ranks (per_mpi.h).
   Rank 0 is the learner; ranks 1 .. W-1 are actors. Actor i (of A = W - 1)
   steps its own CartPole with its own fixed exploration rate
       epsilon_i = 0.4^(1 + 7 i / (A - 1))      (0.4 when A = 1)
   and adds its n-step items to its own shard, with no communication. The
   learner draws each minibatch from all the shards at once
   (per_mpi_sample: one buffer's prioritized law over every actor's
   items), takes one double-DQN step (dqn.h: Huber loss times the IS
   weights, Adam, a Polyak target) and sends the new priorities back to
   the shards that hold the items (per_mpi_update). Every --sync updates
   it broadcasts the network's weights to the actors.
   The ranks run in rounds: each actor takes --actor-steps environment
   steps, then all take part in one sample and one update. Every --check
   updates the learner plays 100 greedy episodes on an environment of its
   own; CartPole-v1 is solved when their mean return reaches 475
   (Gymnasium's threshold over 100 episodes). Progress lines give the
   environment steps per second of all actors together and the learner's
   updates per second (wall clock).
   Exit status 0 when solved, 3 when not solved within --steps, 1 on an
   error, 2 on bad flags or fewer than 2 ranks. The run is deterministic
   for a seed and a number of ranks.
   Usage: mpirun -np 4 apex_cartpole [--seed S] [--steps N] [--sync K]
                                     [--check K] [--actor-steps K] [...]
   (--help lists the rest). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_MPI_IMPLEMENTATION
#include "per_mpi.h"
#include "cartpole.h"
#include "args.h"
#include "mlp.h"
#include "dqn.h"

#define MAX_BATCH 1024
#define MAX_N 16
#define LEARNER 0
#define EVAL_EPISODES 100
#define SMOKE_STEPS 60000 /* --smoke's run (dqn.h: the check after it) */

typedef struct options {
  dqn_options run;
  long sync;            /* learner updates between weight broadcasts */
  long check;           /* learner updates between greedy evaluations */
  uint32_t actor_steps; /* environment steps of each actor per round */
} options;

static void usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np W apex_cartpole [options]   (W >= 2: rank 0 "
          "learns, the others act)\n"
          "  --seed S          seed of everything (default 1)\n"
          "  --steps N         environment steps of all actors together "
          "(default 400000)\n"
          "  --actor-steps K   steps of each actor per learner update "
          "(default 1)\n"
          "  --sync K          updates between weight broadcasts (default "
          "20)\n"
          "  --check K         updates between greedy evaluations (default "
          "2000)\n"
          "  --n N             n-step return (default 3)\n"
          "  --alpha A         priority exponent (default 0.6)\n"
          "  --beta B          initial IS exponent, annealed to 1 (default "
          "0.4)\n"
          "  --batch B         minibatch size (default 64)\n"
          "  --capacity C      replay capacity of each actor's shard "
          "(default 50000)\n"
          "  --smoke           check run: %d environment steps, then %d "
          "greedy episodes;\n"
          "                    exit status 3 when their mean return is below "
          "%.0f\n"
          "  --eval K          after training, K greedy episodes (default 0)\n"
          "  --gamma G, --lr LR, --tau T, --quiet\n",
          SMOKE_STEPS, SMOKE_EVAL, SMOKE_MIN);
}

/* Returns 0, or -1 after printing what is wrong. The learner parses and
   tells the others (one message, no rank prints twice); --help is seen
   by every rank in argv before that, so that all of them end cleanly. */
static int parse_args(int argc, char **argv, options *o, int rank) {
  arg_flag flags[DQN_FLAGS + 3];
  size_t n;
  int bad = 0;
  memset(o, 0, sizeof *o);
  dqn_options_default(&o->run);
  o->run.steps = 400000;
  o->run.batch = 64;
  o->run.capacity = 50000;
  o->run.tau = 0.005f;
  o->sync = 20;
  o->check = 2000;
  o->actor_steps = 1;
  n = dqn_flags(flags, &o->run, MAX_N, MAX_BATCH);
  flags[n++] = arg_long("--sync", &o->sync, 1, 1000000);
  flags[n++] = arg_long("--check", &o->check, 1, 100000000L);
  flags[n++] = arg_u32("--actor-steps", &o->actor_steps, 1, 1000);
  if (rank == LEARNER) {
    bad = arg_parse(argc, argv, flags, n, "apex_cartpole", usage) != 0;
    if (!bad && o->run.smoke) dqn_smoke(&o->run, SMOKE_STEPS);
  }
  MPI_Bcast(&bad, 1, MPI_INT, LEARNER, MPI_COMM_WORLD);
  MPI_Bcast(o, (int)sizeof *o, MPI_BYTE, LEARNER, MPI_COMM_WORLD);
  return bad ? -1 : 0;
}

/* 1 when argv asks for --help (or -h). */
static int wants_help(int argc, char **argv) {
  int i;
  for (i = 1; i < argc; ++i)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
  return 0;
}

/* Everything one rank holds. */
typedef struct rank_state {
  per_mpi rb;           /* the replay: this rank's shard of it */
  per_nstep adder;      /* actors: their n-step items */
  per_nstep_layout lay; /* where an item's fields lie */
  dqn_agent ag;         /* learner: trained; actors: a copy that acts */
  dqn_rows rows;        /* learner: one row per drawn item */
  unsigned char *items; /* learner: B drawn items */
  per_mpi_id *ids;      /* learner: their global ids */
  cartpole env;         /* actors */
  float obs[CARTPOLE_OBS];
  double eps;      /* actors: the fixed exploration rate */
  dqn_record rec;  /* actors: episode returns */
  int rank, world; /* world = W; A = W - 1 actors */
} rank_state;

/* Returns 0, or 1 after printing what failed (the same on every rank for
   the collective parts). */
static int rank_init(rank_state *s, const options *o) {
  per_nstep_config nc = dqn_nstep_config(&o->run);
  per_config pc;
  long per_round = (long)(s->world - 1) * (long)o->actor_steps;
  int actors = s->world - 1;
  s->lay = per_nstep_layout_of(&nc);
  /* beta is annealed over the learner's updates: one per round */
  pc = dqn_replay_config(&o->run, s->lay.size, per_round);
  if (s->rank == LEARNER) /* the learner stores nothing */
    pc.capacity = pc.max_unique = 1;
  if (failed(per_mpi_init(&s->rb, MPI_COMM_WORLD, &pc, NULL), "per_mpi_init"))
    return 1;
  /* every rank starts from the same network: the actors' copies are the
     learner's until the first broadcast */
  if (agent_init(&s->ag, CARTPOLE_OBS, MAX_BATCH, o->run.seed)) return 1;
  if (s->rank == LEARNER) {
    s->items = (unsigned char *)malloc((size_t)o->run.batch * s->lay.size);
    s->ids = (per_mpi_id *)malloc(o->run.batch * sizeof *s->ids);
    if (!s->items || !s->ids || rows_init(&s->rows, o->run.batch, CARTPOLE_OBS))
      return 1;
    return 0;
  }
  if (failed(per_nstep_init(&s->adder, &nc, NULL), "per_nstep_init")) return 1;
  {
    int i = s->rank - 1;
    s->eps = actors == 1
                 ? 0.4
                 : pow(0.4, 1.0 + 7.0 * (double)i / (double)(actors - 1));
  }
  per_rng_init(&s->ag.rng, o->run.seed * 1000003u + (uint64_t)s->rank);
  cartpole_init(&s->env, o->run.seed * 7919u + (uint64_t)s->rank);
  cartpole_reset(&s->env, s->obs);
  record_start(&s->rec);
  return 0;
}

static void rank_free(rank_state *s) {
  per_nstep_free(&s->adder);
  agent_free(&s->ag);
  rows_free(&s->rows);
  free(s->items);
  free(s->ids);
  per_mpi_free(&s->rb);
}

/* An actor's k environment steps into its shard. */
static void act(rank_state *s, uint32_t k) {
  uint32_t j;
  for (j = 0; j < k; ++j) {
    float next[CARTPOLE_OBS];
    uint32_t a = epsilon_greedy(&s->ag, s->eps, s->obs);
    int term, trunc;
    float r = cartpole_step(&s->env, (int)a, next, &term, &trunc);
    s->rec.ep_return += r;
    /* cannot fail for valid steps; the other ranks would wait for this
       one in the next collective, so an error ends the job */
    if (failed(per_nstep_step(&s->adder, &s->rb.shard, s->obs, &a, r, next,
                              term, trunc),
               "per_nstep_step"))
      MPI_Abort(MPI_COMM_WORLD, 1);
    memcpy(s->obs, next, sizeof next);
    if (term || trunc) {
      record_episode(&s->rec);
      cartpole_reset(&s->env, s->obs);
    }
  }
}

/* One learner step, a collective: the learner draws B items from every
   shard, learns, and sends the priorities back; the actors take part
   with nothing to receive or send. Returns 0, or 1 (on every rank) after
   printing the failing call. */
static int learn(rank_state *s, const options *o) {
  const per_nstep_layout *lay = &s->lay;
  const uint32_t B = o->run.batch;
  dqn_rows *b = &s->rows;
  uint32_t i;
  int me = s->rank == LEARNER;
  if (failed(per_mpi_sample(&s->rb, B, LEARNER, NULL, me ? s->items : NULL,
                            me ? s->ids : NULL, me ? b->weight : NULL),
             "per_mpi_sample"))
    return 1;
  if (me) {
    for (i = 0; i < B; ++i)
      rows_from_nstep(b, i, s->items + (size_t)i * lay->size, lay);
    dqn_learn(&s->ag, b, B, &o->run);
  }
  /* the actors kept adding since the draw: some ids may be stale, and
     per_mpi_update skips them */
  return failed(per_mpi_update(&s->rb, me ? s->ids : NULL, me ? b->td : NULL,
                               me ? B : 0, NULL),
                "per_mpi_update");
}

/* The learner's online weights to every actor (a collective). */
static void sync_weights(rank_state *s) {
  int l;
  for (l = 0; l < s->ag.net.n_layers; ++l) {
    mlp_layer *L = &s->ag.net.layer[l];
    /* w and b lie next to each other (mlp.h) */
    MPI_Bcast(L->w, L->in * L->out + L->out, MPI_FLOAT, LEARNER,
              MPI_COMM_WORLD);
  }
}

static int greedy_policy(void *self, const float *obs, int first) {
  (void)first;
  return greedy((mlp *)self, obs);
}

/* Every --check updates (a collective): the learner's greedy mean over
   EVAL_EPISODES episodes, the actors' last-100 averages gathered for the
   progress line; 1 on every rank when solved. */
static int check(rank_state *s, const options *o, long updates, long env_steps,
                 double t0) {
  double mean = 0, avg = s->rec.avg, *avgs = NULL;
  int solved = 0, r;
  if (s->rank == LEARNER) {
    avgs = (double *)malloc((size_t)s->world * sizeof *avgs);
    mean = evaluate(greedy_policy, &s->ag.net, o->run.seed + 1000003u,
                    EVAL_EPISODES);
    solved = mean >= SOLVED_AT;
  }
  MPI_Gather(&avg, 1, MPI_DOUBLE, avgs, 1, MPI_DOUBLE, LEARNER, MPI_COMM_WORLD);
  if (s->rank == LEARNER && !o->run.quiet && avgs) {
    double dt = MPI_Wtime() - t0;
    printf("update %7ld  env steps %8ld  greedy mean %5.1f  actors' avg100",
           updates, env_steps, mean);
    for (r = 1; r < s->world; ++r) printf(" %5.1f", avgs[r]);
    printf("  %7.0f env steps/s  %6.0f updates/s\n",
           dt > 0 ? (double)env_steps / dt : 0.0,
           dt > 0 ? (double)updates / dt : 0.0);
    fflush(stdout);
  }
  free(avgs);
  MPI_Bcast(&solved, 1, MPI_INT, LEARNER, MPI_COMM_WORLD);
  if (solved && s->rank == LEARNER) {
    double dt = MPI_Wtime() - t0;
    printf("solved at update %ld (%ld environment steps): greedy mean %.1f "
           "over %d episodes, %.1f s, %.0f env steps/s, %.0f updates/s\n",
           updates, env_steps, mean, EVAL_EPISODES, dt,
           dt > 0 ? (double)env_steps / dt : 0.0,
           dt > 0 ? (double)updates / dt : 0.0);
  }
  return solved;
}

int main(int argc, char **argv) {
  options o;
  rank_state s;
  long env_steps = 0, updates = 0;
  int rc = 1, solved = 0, bad, any_bad;
  double t0;
  MPI_Init(&argc, &argv);
  memset(&s, 0, sizeof s);
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.world);
  if (wants_help(argc, argv)) {
    if (s.rank == LEARNER) usage(stdout);
    MPI_Finalize();
    return 0;
  }
  bad = parse_args(argc, argv, &o, s.rank) != 0;
  if (s.world < 2) {
    if (s.rank == LEARNER)
      fprintf(stderr, "apex_cartpole: needs 2 or more ranks (mpirun -np W, "
                      "W >= 2: a learner and W - 1 actors)\n");
    bad = 1;
  }
  if (bad) {
    if (s.rank == LEARNER) usage(stderr);
    MPI_Finalize();
    return 2;
  }
  bad = rank_init(&s, &o);
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_bad) {
    if (!bad) fprintf(stderr, "apex_cartpole: rank %d: setup failed\n", s.rank);
    goto done;
  }
  if (s.rank == LEARNER && !o.run.quiet)
    printf("Ape-X DQN on CartPole-v1: seed %llu, 1 learner, %d actors, "
           "batch %u, n %u, alpha %g, weights every %ld updates\n",
           (unsigned long long)o.run.seed, s.world - 1, o.run.batch, o.run.n,
           o.run.alpha, o.sync);
  t0 = MPI_Wtime();
  while (env_steps < o.run.steps && !solved) {
    if (s.rank != LEARNER) act(&s, o.actor_steps);
    env_steps += (long)(s.world - 1) * (long)o.actor_steps;
    if (env_steps < o.run.learn_start) continue;
    if (learn(&s, &o)) goto done;
    ++updates;
    if (updates % o.sync == 0) sync_weights(&s);
    if (updates % o.check == 0) solved = check(&s, &o, updates, env_steps, t0);
  }
  if (!solved && s.rank == LEARNER)
    printf("not solved in %ld environment steps (%ld updates), %.1f s\n",
           env_steps, updates, MPI_Wtime() - t0);
  rc = solved || o.run.smoke ? 0 : 3;
  if (s.rank == LEARNER && o.run.eval_episodes > 0) {
    int e = dqn_evaluate(&o.run, greedy_policy, &s.ag.net);
    if (o.run.smoke) rc = e;
  }
done:
  rank_free(&s);
  MPI_Finalize();
  return rc;
}
