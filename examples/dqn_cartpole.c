/* dqn_cartpole.c - DQN with prioritized replay and n-step returns learns
   CartPole-v1, in plain C with per.h.

   The agent: a 4-64-64-2 ReLU network (mlp.h) trained with Adam on the
   Huber loss of the double-DQN target
       y = R + (done ? 0 : gamma^m * Q_target(s', argmax_a Q(s', a)))
   where R, gamma^m, done and s' come from per's n-step adder, a target
   network that follows the online one by Polyak averaging, epsilon-greedy
   exploration decaying linearly, and per's buffer: each sampled item's
   loss is multiplied by its importance-sampling weight, and its priority
   is set from |TD error| after the step. --uniform sets alpha to 0 (every
   item equally likely, weights 1) for comparison. The agent and the run
   around it (flags, episode returns, evaluation) are dqn.h's, shared
   with seq_cartpole.c; this file turns sampled n-step items into the
   agent's rows.

   Solved (as Gymnasium's CartPole-v1 defines it): the mean return of the
   last 100 episodes reaches 475. Training stops there, or at --steps.
   Exit status 0 whether solved or not; 1 on an error, 2 on bad flags,
   3 when --smoke's check fails.

   Usage: dqn_cartpole [--seed S] [--steps N] [--n N] [--alpha A]
                       [--beta B] [--batch B] [--uniform] [--csv FILE]
                       [--quiet] [--smoke] [--eval K] [--help]
   (--help lists the rest: --capacity, --gamma, --lr, --tau, --every). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_IMPLEMENTATION
#include "per.h"
#include "cartpole.h"
#include "args.h"
#include "mlp.h"
#include "dqn.h"

#define MAX_BATCH 1024
#define MAX_N 16
#define SMOKE_STEPS 5000 /* --smoke's run (dqn.h: the check after it) */

typedef struct options {
  dqn_options run; /* what seq_cartpole takes too */
  int uniform;     /* alpha 0 */
  const char *csv; /* per-episode lines, or NULL */
} options;

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: dqn_cartpole [options]\n"
      "  --seed S        environment, network and replay seed (default 1)\n"
      "  --steps N       environment step budget (default 150000)\n"
      "  --n N           n-step return (default 3)\n"
      "  --alpha A       priority exponent (default 0.6)\n"
      "  --beta B        initial IS exponent, annealed to 1 (default 0.4)\n"
      "  --batch B       minibatch size (default 64)\n"
      "  --uniform       uniform replay: alpha = 0, weights 1\n"
      "  --csv FILE      write one line per episode: step,episode,return,\n"
      "                  avg100,epsilon,beta\n"
      "  --quiet         only the final summary\n"
      "  --smoke         check run: %d steps, then %d greedy episodes;\n"
      "                  exit status 3 when their mean return is below %.0f\n"
      "  --capacity C    replay capacity (default 100000)\n"
      "  --gamma G       discount (default 0.99)\n"
      "  --lr LR         Adam learning rate (default 1e-3)\n"
      "  --tau T         target network Polyak factor (default 0.005)\n"
      "  --every N       progress line every N steps (default 10000)\n"
      "  --eval K        after training, K greedy episodes (default 0)\n",
      SMOKE_STEPS, SMOKE_EVAL, SMOKE_MIN);
}

/* Returns 0, or -1 after printing what is wrong. */
static int parse_args(int argc, char **argv, options *o) {
  arg_flag flags[DQN_FLAGS + 2];
  size_t n;
  memset(o, 0, sizeof *o);
  dqn_options_default(&o->run);
  o->run.batch = 64;
  o->run.capacity = 100000;
  o->run.tau = 0.005f;
  n = dqn_flags(flags, &o->run, MAX_N, MAX_BATCH);
  flags[n++] = arg_switch("--uniform", &o->uniform);
  flags[n++] = arg_text("--csv", &o->csv);
  if (arg_parse(argc, argv, flags, n, "dqn_cartpole", usage)) return -1;
  if (o->run.smoke) dqn_smoke(&o->run, SMOKE_STEPS);
  return 0;
}

/* The replay: n-step items from per's adder; alpha 0 for --uniform. */
typedef struct replay {
  per_buffer buf;
  per_nstep adder;
  per_nstep_layout lay; /* where an item's fields lie */
} replay;

/* Returns 0, or -1 after printing what failed (then nothing to free). */
static int replay_init(replay *rp, const options *o) {
  per_nstep_config nc = dqn_nstep_config(&o->run);
  per_config pc;
  rp->lay = per_nstep_layout_of(&nc);
  pc = dqn_replay_config(&o->run, rp->lay.size, 1);
  if (o->uniform) pc.alpha = 0.0;
  if (failed(per_buffer_init(&rp->buf, &pc, NULL), "per_buffer_init"))
    return -1;
  if (failed(per_nstep_init(&rp->adder, &nc, NULL), "per_nstep_init")) {
    per_buffer_free(&rp->buf);
    return -1;
  }
  return 0;
}

static void replay_free(replay *rp) {
  per_nstep_free(&rp->adder);
  per_buffer_free(&rp->buf);
}

/* Hands one environment step to the n-step adder, which adds an item to
   the buffer for every step that has its n steps (or its episode's end)
   behind it. Returns 0, or 1 after printing per's error. */
static int store_step(replay *rp, const float *obs, uint32_t a, float r,
                      const float *next, int term, int trunc) {
  return failed(
      per_nstep_step(&rp->adder, &rp->buf, obs, &a, r, next, term, trunc),
      "per_nstep_step");
}

/* Scratch of one training step, sized for B items. */
typedef struct trainer {
  unsigned char *items; /* B sampled items */
  uint64_t *ids;        /* their ids */
  dqn_rows rows;        /* one row per item */
} trainer;

static void trainer_free(trainer *tr) {
  free(tr->items);
  free(tr->ids);
  rows_free(&tr->rows);
  memset(tr, 0, sizeof *tr);
}

static int trainer_init(trainer *tr, uint32_t B, uint32_t item_size) {
  memset(tr, 0, sizeof *tr);
  tr->items = (unsigned char *)malloc((size_t)B * item_size);
  tr->ids = (uint64_t *)malloc(B * sizeof(uint64_t));
  if (tr->items && tr->ids && !rows_init(&tr->rows, B, CARTPOLE_OBS)) return 0;
  trainer_free(tr);
  return -1;
}

/* One minibatch of B items, one gradient step, one priority update.
   Returns 0, or 1 after printing the failing call. */
static int train(const options *o, replay *rp, trainer *tr, dqn_agent *ag) {
  const per_nstep_layout *lay = &rp->lay;
  const uint32_t B = o->run.batch;
  dqn_rows *b = &tr->rows;
  uint32_t i, stale;
  if (failed(
          per_buffer_sample(&rp->buf, B, NULL, tr->items, tr->ids, b->weight),
          "per_buffer_sample"))
    return 1;
  for (i = 0; i < B; ++i)
    rows_from_nstep(b, i, tr->items + (size_t)i * lay->size, lay);
  dqn_learn(ag, b, B, &o->run);
  /* stale counts the items overwritten since the sample, whose update is
     ignored: none here, since nothing is added in between */
  return failed(per_buffer_update(&rp->buf, tr->ids, b->td, B, &stale),
                "per_buffer_update");
}

/* The --csv file with its header line; NULL after printing why not. */
static FILE *csv_open(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "dqn_cartpole: cannot write %s: %s\n", path,
            strerror(errno));
    return NULL;
  }
  fprintf(f, "step,episode,return,avg100,epsilon,beta\n");
  return f;
}

static void print_header(const options *o) {
  const dqn_options *r = &o->run;
  if (r->quiet) return;
  printf("DQN on CartPole-v1: seed %llu, ", (unsigned long long)r->seed);
  if (o->uniform || r->alpha == 0) printf("uniform replay (alpha 0)");
  else
    printf("prioritized replay (alpha %g, beta %g -> 1)", r->alpha, r->beta0);
  printf(", n %u, batch %u, budget %ld steps\n", r->n, r->batch, r->steps);
}

/* The greedy policy for evaluate: the network (self) on the observation. */
static int greedy_policy(void *self, const float *obs, int first) {
  (void)first;
  return greedy((mlp *)self, obs);
}

int main(int argc, char **argv) {
  options o;
  replay rp;
  dqn_agent ag;
  trainer tr;
  dqn_record rec;
  cartpole env;
  float obs[CARTPOLE_OBS], next[CARTPOLE_OBS];
  FILE *csv = NULL;
  long step;
  int rc = 1;

  if (parse_args(argc, argv, &o)) {
    usage(stderr);
    return 2;
  }
  if (replay_init(&rp, &o)) return 1;
  memset(&tr, 0, sizeof tr); /* for done: when agent_init fails */
  if (agent_init(&ag, CARTPOLE_OBS, MAX_BATCH, o.run.seed) ||
      trainer_init(&tr, o.run.batch, rp.lay.size)) {
    fprintf(stderr, "dqn_cartpole: out of memory\n");
    goto done;
  }
  if (o.csv && !(csv = csv_open(o.csv))) goto done;
  print_header(&o);

  cartpole_init(&env, o.run.seed);
  cartpole_reset(&env, obs);
  record_start(&rec);
  for (step = 1; step <= o.run.steps; ++step) {
    double eps = epsilon_at(&o.run, step);
    uint32_t a = epsilon_greedy(&ag, eps, obs);
    int term, trunc;
    float r = cartpole_step(&env, (int)a, next, &term, &trunc);
    rec.ep_return += r;
    if (store_step(&rp, obs, a, r, next, term, trunc)) goto done;
    memcpy(obs, next, sizeof obs);

    if (term || trunc) {
      double ret = record_episode(&rec);
      if (csv)
        fprintf(csv, "%ld,%ld,%g,%.2f,%.4f,%.4f\n", step, rec.episodes, ret,
                rec.avg, eps, per_buffer_beta(&rp.buf));
      cartpole_reset(&env, obs);
      if (record_solved(&rec, step)) break;
    }

    /* one gradient step per environment step */
    if (step >= o.run.learn_start && per_buffer_size(&rp.buf) > 0 &&
        train(&o, &rp, &tr, &ag))
      goto done;
    record_progress(&rec, &o.run, step, eps, per_buffer_beta(&rp.buf));
  }

  record_summary(&rec, &o.run, step);
  rc = dqn_evaluate(&o.run, greedy_policy, &ag.net);

done:
  if (csv && fclose(csv) != 0) {
    fprintf(stderr, "dqn_cartpole: error writing %s\n", o.csv);
    rc = 1;
  }
  trainer_free(&tr);
  agent_free(&ag);
  replay_free(&rp);
  return rc;
}
