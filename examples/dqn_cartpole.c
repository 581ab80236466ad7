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
   item equally likely, weights 1) for comparison.

   Solved (as Gymnasium's CartPole-v1 defines it): the mean return of the
   last 100 episodes reaches 475. Training stops there, or at --steps.
   Exit status 0 whether solved or not; 1 on an error, 2 on bad flags,
   3 when --smoke's check fails.

   Usage: dqn_cartpole [--seed S] [--steps N] [--n N] [--alpha A]
                       [--beta B] [--batch B] [--uniform] [--csv FILE]
                       [--quiet] [--smoke] [--eval K] [--help]
   (--help lists the rest: --capacity, --gamma, --lr, --tau, --every). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PER_IMPLEMENTATION
#include "per.h"
#include "cartpole.h"
#include "args.h"
#include "mlp.h"

#define HIDDEN 64
#define MAX_BATCH 1024
#define WINDOW 100       /* episodes in the moving average */
#define SOLVED_AT 475.0  /* CartPole-v1's reward threshold */
/* --smoke: a short run, then greedy episodes whose mean must reach
   SMOKE_MIN (see examples/meson.build for the measurements behind it) */
#define SMOKE_STEPS 5000
#define SMOKE_EVAL 10
#define SMOKE_MIN 100.0

typedef struct options {
  uint64_t seed;
  long steps;          /* environment steps budget */
  uint32_t n;          /* n-step return */
  double alpha;        /* priority exponent */
  double beta0;        /* IS exponent at the start, annealed to 1 */
  uint32_t batch;
  uint32_t capacity;   /* replay capacity (items) */
  float gamma;
  float lr;
  float tau;           /* Polyak factor per training step */
  float clip;          /* gradient norm clip */
  long learn_start;    /* steps before the first update */
  long explore_steps;  /* epsilon 1 -> eps_final over these steps */
  float eps_final;
  int uniform, quiet, smoke;
  long eval_episodes;  /* greedy episodes after training */
  long report_every;
  const char *csv;
} options;

static void usage(FILE *f) {
  fprintf(f,
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
  const arg_flag flags[] = {
      arg_u64("--seed", &o->seed, 0, LONG_MAX),
      arg_long("--steps", &o->steps, 1, 100000000L),
      arg_u32("--n", &o->n, 1, 16),
      arg_u32("--batch", &o->batch, 1, MAX_BATCH),
      arg_u32("--capacity", &o->capacity, 1, 1L << 24),
      arg_long("--eval", &o->eval_episodes, 0, 100000),
      arg_long("--every", &o->report_every, 1, LONG_MAX),
      arg_double("--alpha", &o->alpha, 0.0, 10.0),
      arg_double("--beta", &o->beta0, 0.0, 1.0),
      arg_float("--gamma", &o->gamma, 0.0, 1.0),
      arg_float("--lr", &o->lr, 1e-7, 1.0),
      arg_float("--tau", &o->tau, 1e-6, 1.0),
      arg_text("--csv", &o->csv),
      arg_switch("--uniform", &o->uniform),
      arg_switch("--quiet", &o->quiet),
      arg_switch("--smoke", &o->smoke)};
  return arg_parse(argc, argv, flags, sizeof flags / sizeof flags[0],
                   "dqn_cartpole", usage);
}

static int argmax2(const float *q) { return q[1] > q[0] ? 1 : 0; }

/* Mean return of k greedy episodes (epsilon 0) on an environment seeded
   apart from the training one. */
static double evaluate(mlp *net, uint64_t seed, long k) {
  cartpole env;
  float obs[CARTPOLE_OBS];
  double total = 0.0;
  long e;
  cartpole_init(&env, seed);
  for (e = 0; e < k; ++e) {
    int term = 0, trunc = 0;
    cartpole_reset(&env, obs);
    while (!term && !trunc)
      total += cartpole_step(&env, argmax2(mlp_forward(net, obs, 1)), obs,
                             &term, &trunc);
  }
  return k > 0 ? total / (double)k : 0.0;
}

static double seconds(void) { return (double)clock() / CLOCKS_PER_SEC; }

int main(int argc, char **argv) {
  options o;
  per_config pc;
  per_nstep_config nc;
  per_nstep_layout lay;
  per_buffer buf;
  per_nstep adder;
  mlp net, target;
  per_rng rng;
  cartpole env;
  static const int sizes[4] = {CARTPOLE_OBS, HIDDEN, HIDDEN, CARTPOLE_ACTIONS};
  unsigned char *items = NULL;
  uint64_t ids[MAX_BATCH];
  float weights[MAX_BATCH], td[MAX_BATCH], y[MAX_BATCH];
  uint32_t act_taken[MAX_BATCH], next_best[MAX_BATCH];
  float *x = NULL, *x2 = NULL, *dout = NULL;
  float obs[CARTPOLE_OBS], next[CARTPOLE_OBS];
  double returns[WINDOW], ret_sum = 0.0, ep_return = 0.0, avg = 0.0;
  long step, episodes = 0, solved_step = -1;
  double t0, t_last, eps = 1.0;
  long step_last = 0;
  FILE *csv = NULL;
  int rc = 1;
  per_status s;

  memset(&o, 0, sizeof o);
  o.seed = 1;
  o.steps = 150000;
  o.n = 3;
  o.alpha = 0.6;
  o.beta0 = 0.4;
  o.batch = 64;
  o.capacity = 100000;
  o.gamma = 0.99f;
  o.lr = 1e-3f;
  o.tau = 0.005f;
  o.clip = 10.0f;
  o.learn_start = 1000;
  o.explore_steps = 10000;
  o.eps_final = 0.01f;
  o.report_every = 10000;
  if (parse_args(argc, argv, &o)) {
    usage(stderr);
    return 2;
  }
  if (o.smoke) {
    o.steps = SMOKE_STEPS;
    o.eval_episodes = SMOKE_EVAL;
    o.quiet = 1;
  }

  /* The replay: n-step items; alpha 0 for --uniform. */
  memset(&nc, 0, sizeof nc);
  nc.n = o.n;
  nc.gamma = o.gamma;
  nc.obs_size = sizeof obs;
  nc.action_size = sizeof(uint32_t);
  lay = per_nstep_layout_of(&nc);
  pc = per_config_default(o.capacity, lay.size);
  pc.alpha = o.uniform ? 0.0 : o.alpha;
  pc.beta0 = o.beta0;
  pc.beta1 = 1.0;
  pc.beta_steps = (uint64_t)(o.steps > o.learn_start ? o.steps - o.learn_start
                                                      : 1);
  pc.seed = o.seed;
  s = per_buffer_init(&buf, &pc, NULL);
  if (s != PER_OK) {
    fprintf(stderr, "per_buffer_init: %s\n", per_status_str(s));
    return 1;
  }
  s = per_nstep_init(&adder, &nc, NULL);
  if (s != PER_OK) {
    fprintf(stderr, "per_nstep_init: %s\n", per_status_str(s));
    per_buffer_free(&buf);
    return 1;
  }

  memset(&net, 0, sizeof net);
  memset(&target, 0, sizeof target);
  per_rng_init(&rng, o.seed ^ 0x9e3779b97f4a7c15ull);
  if (mlp_init(&net, sizes, 3, MAX_BATCH, &rng) ||
      mlp_init(&target, sizes, 3, MAX_BATCH, &rng)) {
    fprintf(stderr, "dqn_cartpole: out of memory\n");
    goto done;
  }
  mlp_blend(&target, &net, 1.0f);
  items = (unsigned char *)malloc((size_t)o.batch * lay.size);
  x = (float *)malloc((size_t)o.batch * CARTPOLE_OBS * sizeof(float));
  x2 = (float *)malloc((size_t)o.batch * CARTPOLE_OBS * sizeof(float));
  dout = (float *)malloc((size_t)o.batch * CARTPOLE_ACTIONS * sizeof(float));
  if (!items || !x || !x2 || !dout) {
    fprintf(stderr, "dqn_cartpole: out of memory\n");
    goto done;
  }
  if (o.csv) {
    csv = fopen(o.csv, "w");
    if (!csv) {
      fprintf(stderr, "dqn_cartpole: cannot write %s: %s\n", o.csv,
              strerror(errno));
      goto done;
    }
    fprintf(csv, "step,episode,return,avg100,epsilon,beta\n");
  }

  if (!o.quiet) {
    printf("DQN on CartPole-v1: seed %llu, ", (unsigned long long)o.seed);
    if (pc.alpha == 0)
      printf("uniform replay (alpha 0)");
    else
      printf("prioritized replay (alpha %g, beta %g -> 1)", o.alpha, o.beta0);
    printf(", n %u, batch %u, budget %ld steps\n", o.n, o.batch, o.steps);
  }
  cartpole_init(&env, o.seed);
  cartpole_reset(&env, obs);
  t0 = t_last = seconds();
  for (step = 1; step <= o.steps; ++step) {
    uint32_t a;
    int term, trunc;
    float r;

    /* epsilon-greedy, epsilon linear from 1 to eps_final */
    eps = step >= o.explore_steps
              ? o.eps_final
              : 1.0 - (1.0 - o.eps_final) * (double)step / o.explore_steps;
    if (per_rng_double(&rng) < eps)
      a = per_rng_below(&rng, CARTPOLE_ACTIONS);
    else
      a = (uint32_t)argmax2(mlp_forward(&net, obs, 1));

    r = cartpole_step(&env, (int)a, next, &term, &trunc);
    ep_return += r;
    s = per_nstep_step(&adder, &buf, obs, &a, r, next, term, trunc);
    if (s != PER_OK) {
      fprintf(stderr, "per_nstep_step: %s\n", per_status_str(s));
      goto done;
    }
    memcpy(obs, next, sizeof obs);

    if (term || trunc) {
      if (episodes >= WINDOW) ret_sum -= returns[episodes % WINDOW];
      returns[episodes % WINDOW] = ep_return;
      ret_sum += ep_return;
      episodes += 1;
      avg = ret_sum / (double)(episodes < WINDOW ? episodes : WINDOW);
      if (csv)
        fprintf(csv, "%ld,%ld,%g,%.2f,%.4f,%.4f\n", step, episodes,
                ep_return, avg, eps, per_buffer_beta(&buf));
      ep_return = 0.0;
      cartpole_reset(&env, obs);
      if (episodes >= WINDOW && avg >= SOLVED_AT) {
        solved_step = step;
        break;
      }
    }

    /* one gradient step per environment step */
    if (step >= o.learn_start && per_buffer_size(&buf) > 0) {
      uint32_t i, B = o.batch, stale;
      const float *q;
      float loss_scale = 1.0f / (float)B;
      s = per_buffer_sample(&buf, B, NULL, items, ids, weights);
      if (s != PER_OK) {
        fprintf(stderr, "per_buffer_sample: %s\n", per_status_str(s));
        goto done;
      }
      for (i = 0; i < B; ++i) {
        const unsigned char *it = items + (size_t)i * lay.size;
        memcpy(x + i * CARTPOLE_OBS, it + lay.obs, sizeof obs);
        memcpy(x2 + i * CARTPOLE_OBS, it + lay.next_obs, sizeof obs);
        memcpy(&act_taken[i], it + lay.action, sizeof(uint32_t));
      }
      /* double DQN: the online network picks a', the target rates it */
      q = mlp_forward(&net, x2, (int)B);
      for (i = 0; i < B; ++i) next_best[i] = (uint32_t)argmax2(q + 2 * i);
      q = mlp_forward(&target, x2, (int)B);
      for (i = 0; i < B; ++i) {
        const unsigned char *it = items + (size_t)i * lay.size;
        float rew, disc;
        uint32_t dn;
        memcpy(&rew, it + lay.reward, sizeof rew);
        memcpy(&disc, it + lay.discount, sizeof disc);
        memcpy(&dn, it + lay.done, sizeof dn);
        y[i] = rew + (dn ? 0.0f : disc * q[2 * i + next_best[i]]);
      }
      q = mlp_forward(&net, x, (int)B);
      for (i = 0; i < B; ++i) {
        uint32_t ai = act_taken[i];
        float d = q[2 * i + ai] - y[i];
        td[i] = d;
        /* Huber (delta 1) derivative, scaled by the IS weight */
        if (d > 1.0f) d = 1.0f;
        if (d < -1.0f) d = -1.0f;
        dout[2 * i + ai] = weights[i] * d * loss_scale;
        dout[2 * i + (ai ^ 1u)] = 0.0f;
      }
      mlp_backward(&net, dout, (int)B);
      mlp_adam(&net, o.lr, o.clip);
      mlp_blend(&target, &net, o.tau);
      /* stale counts the items overwritten since the sample, whose
         update is ignored: none here, since nothing is added in between */
      s = per_buffer_update(&buf, ids, td, B, &stale);
      if (s != PER_OK) {
        fprintf(stderr, "per_buffer_update: %s\n", per_status_str(s));
        goto done;
      }
    }

    if (!o.quiet && step % o.report_every == 0) {
      double now = seconds(), dt = now - t_last;
      printf("step %7ld  episodes %5ld  avg100 %6.1f  epsilon %.3f  "
             "beta %.3f  %6.0f steps/s\n",
             step, episodes, avg, eps, per_buffer_beta(&buf),
             dt > 0 ? (double)(step - step_last) / dt : 0.0);
      fflush(stdout);
      t_last = now;
      step_last = step;
    }
  }

  if (step > o.steps) step = o.steps;
  if (solved_step >= 0)
    printf("solved at step %ld (episode %ld): avg100 %.1f, %.1f s\n",
           solved_step, episodes, avg, seconds() - t0);
  else
    printf("not solved in %ld steps (%ld episodes): final avg100 %.1f, "
           "%.1f s\n",
           step, episodes, avg, seconds() - t0);
  rc = 0;
  if (o.eval_episodes > 0) {
    double mean = evaluate(&net, o.seed + 1000003u, o.eval_episodes);
    printf("greedy evaluation: mean return %.1f over %ld episodes\n", mean,
           o.eval_episodes);
    if (o.smoke) {
      /* a uniformly random policy averages 22.3 */
      printf("smoke check (mean >= %.0f): %s\n", SMOKE_MIN,
             mean >= SMOKE_MIN ? "ok" : "FAILED");
      if (mean < SMOKE_MIN) rc = 3;
    }
  }

done:
  if (csv && fclose(csv) != 0) {
    fprintf(stderr, "dqn_cartpole: error writing %s\n", o.csv);
    rc = 1;
  }
  free(items);
  free(x);
  free(x2);
  free(dout);
  mlp_free(&net);
  mlp_free(&target);
  per_nstep_free(&adder);
  per_buffer_free(&buf);
  return rc;
}
