/* dqn.h - the DQN agent dqn_cartpole.c and seq_cartpole.c share, and the
   run around it (example code, not per's API).

   The agent: an online and a target network (mlp.h, inputs-64-64-2 ReLU)
   and the random stream that initializes them, then explores. It acts
   epsilon-greedily, epsilon decaying linearly, and learns from rows, one
   per trained step: the double-DQN target
       y = R + disc * Q_target(s', argmax_a Q(s', a))
   with R the discounted reward sum and disc gamma^m, or 0 after a
   terminated episode; the Huber loss of Q(s, a) - y times the row's
   importance-sampling weight, averaged over the rows; Adam; then the
   target follows by Polyak averaging. Where the rows come from (one
   n-step item each, or the steps of drawn sequences) is each example's.

   The run: the flags both examples take, per's config for their replay,
   the record of episode returns (the mean of the last 100 decides
   "solved") with its progress and summary lines, and the greedy
   evaluation after training with --smoke's check.

   Needs per.h, cartpole.h, args.h and mlp.h included before it.
   Everything is static; include it once. The run's helpers that not
   every example uses (the epsilon schedule, the episode record's lines)
   are inline, so that a program need not use them all. */
#ifndef PER_EXAMPLE_DQN_H
#define PER_EXAMPLE_DQN_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HIDDEN 64
#define WINDOW 100      /* episodes in the moving average */
#define SOLVED_AT 475.0 /* CartPole-v1's reward threshold */
/* --smoke: a short run (each example sets its length), then greedy
   episodes whose mean must reach SMOKE_MIN (see examples/meson.build for
   the measurements behind it) */
#define SMOKE_EVAL 10
#define SMOKE_MIN 100.0

/* The options both examples take. */
typedef struct dqn_options {
  uint64_t seed;
  long steps;        /* environment steps budget */
  uint32_t batch;    /* items, or sequences, per draw */
  uint32_t n;        /* n-step return */
  uint32_t capacity; /* replay capacity (items) */
  double alpha;      /* priority exponent */
  double beta0;      /* IS exponent at the start, annealed to 1 */
  float gamma;
  float lr;
  float tau;          /* Polyak factor per training step */
  float clip;         /* gradient norm clip */
  long learn_start;   /* steps before the first update */
  long explore_steps; /* epsilon 1 -> eps_final over these steps */
  float eps_final;
  int quiet, smoke;
  long eval_episodes; /* greedy episodes after training */
  long report_every;
} dqn_options;

/* The defaults both examples have; batch, capacity and tau are each
   example's own (0 here). */
static void dqn_options_default(dqn_options *o) {
  memset(o, 0, sizeof *o);
  o->seed = 1;
  o->steps = 150000;
  o->n = 3;
  o->alpha = 0.6;
  o->beta0 = 0.4;
  o->gamma = 0.99f;
  o->lr = 1e-3f;
  o->clip = 10.0f;
  o->learn_start = 1000;
  o->explore_steps = 10000;
  o->eps_final = 0.01f;
  o->report_every = 10000;
}

#define DQN_FLAGS 14 /* how many dqn_flags writes */

/* The flags that set o into flags[0..DQN_FLAGS); --n and --batch go up
   to max_n and max_batch. Returns DQN_FLAGS. */
static size_t dqn_flags(arg_flag *flags, dqn_options *o, long max_n,
                        long max_batch) {
  size_t k = 0;
  flags[k++] = arg_u64("--seed", &o->seed, 0, LONG_MAX);
  flags[k++] = arg_long("--steps", &o->steps, 1, 100000000L);
  flags[k++] = arg_u32("--n", &o->n, 1, max_n);
  flags[k++] = arg_u32("--batch", &o->batch, 1, max_batch);
  flags[k++] = arg_u32("--capacity", &o->capacity, 1, 1L << 24);
  flags[k++] = arg_long("--eval", &o->eval_episodes, 0, 100000);
  flags[k++] = arg_long("--every", &o->report_every, 1, LONG_MAX);
  flags[k++] = arg_double("--alpha", &o->alpha, 0.0, 10.0);
  flags[k++] = arg_double("--beta", &o->beta0, 0.0, 1.0);
  flags[k++] = arg_float("--gamma", &o->gamma, 0.0, 1.0);
  flags[k++] = arg_float("--lr", &o->lr, 1e-7, 1.0);
  flags[k++] = arg_float("--tau", &o->tau, 1e-6, 1.0);
  flags[k++] = arg_switch("--quiet", &o->quiet);
  flags[k++] = arg_switch("--smoke", &o->smoke);
  return k;
}

/* --smoke: a run of `steps` steps, then SMOKE_EVAL greedy episodes, and
   only the summary printed. */
static void dqn_smoke(dqn_options *o, long steps) {
  o->steps = steps;
  o->eval_episodes = SMOKE_EVAL;
  o->quiet = 1;
}

/* The n-step adder of a CartPole agent: n and gamma from the options,
   observations of CARTPOLE_OBS floats, one uint32_t action. */
static inline per_nstep_config dqn_nstep_config(const dqn_options *o) {
  per_nstep_config nc;
  memset(&nc, 0, sizeof nc);
  nc.n = o->n;
  nc.gamma = o->gamma;
  nc.obs_size = CARTPOLE_OBS * sizeof(float);
  nc.action_size = sizeof(uint32_t);
  return nc;
}

/* per's config for the replay: items of item_size bytes, beta annealed
   over the run's updates (one every train_every steps from learn_start
   on). */
static per_config dqn_replay_config(const dqn_options *o, uint32_t item_size,
                                    long train_every) {
  long updates =
      o->steps > o->learn_start ? (o->steps - o->learn_start) / train_every : 0;
  per_config pc = per_config_default(o->capacity, item_size);
  pc.alpha = o->alpha;
  pc.beta0 = o->beta0;
  pc.beta1 = 1.0;
  pc.beta_steps = (uint64_t)(updates > 0 ? updates : 1);
  pc.seed = o->seed;
  return pc;
}

/* 1 after printing which call failed and why when s is not PER_OK, else
   0. */
static int failed(per_status s, const char *call) {
  if (s == PER_OK) return 0;
  fprintf(stderr, "%s: %s\n", call, per_status_str(s));
  return 1;
}

typedef struct dqn_agent {
  mlp net, target; /* online network; target network following it */
  per_rng rng;     /* initializes both networks, then explores */
} dqn_agent;

/* inputs-HIDDEN-HIDDEN-2 networks taking up to max_batch rows, the target
   a copy of the online one. Returns 0, or -1 when memory runs out
   (agent_free accepts the agent either way). */
static int agent_init(dqn_agent *ag, int inputs, int max_batch, uint64_t seed) {
  const int sizes[4] = {inputs, HIDDEN, HIDDEN, CARTPOLE_ACTIONS};
  memset(ag, 0, sizeof *ag);
  per_rng_init(&ag->rng, seed ^ 0x9e3779b97f4a7c15ull);
  if (mlp_init(&ag->net, sizes, 3, max_batch, &ag->rng) ||
      mlp_init(&ag->target, sizes, 3, max_batch, &ag->rng))
    return -1;
  mlp_blend(&ag->target, &ag->net, 1.0f);
  return 0;
}

static void agent_free(dqn_agent *ag) {
  mlp_free(&ag->net);
  mlp_free(&ag->target);
}

static int argmax2(const float *q) { return q[1] > q[0] ? 1 : 0; }

/* The action with the higher Q for network input x. */
static int greedy(mlp *net, const float *x) {
  return argmax2(mlp_forward(net, x, 1));
}

/* Epsilon at environment step `step`: linear from 1 to eps_final over
   explore_steps, then eps_final. */
static inline double epsilon_at(const dqn_options *o, long step) {
  return step >= o->explore_steps
             ? o->eps_final
             : 1.0 - (1.0 - o->eps_final) * (double)step / o->explore_steps;
}

/* A uniformly random action with probability eps, else the greedy one for
   network input x. */
static uint32_t epsilon_greedy(dqn_agent *ag, double eps, const float *x) {
  if (per_rng_double(&ag->rng) < eps)
    return per_rng_below(&ag->rng, CARTPOLE_ACTIONS);
  return (uint32_t)greedy(&ag->net, x);
}

/* The rows of one gradient step. */
typedef struct dqn_rows {
  float *x, *x2;    /* rows x inputs: states, bootstrap states */
  uint32_t *action; /* the action taken in x */
  float *ret;       /* discounted reward sum; the target y after */
  float *disc;      /* gamma^m, or 0 after a terminated episode */
  float *weight;    /* importance-sampling weight */
  float *td;        /* after dqn_learn: Q(x, action) - y */
  uint32_t *best;   /* argmax_a Q(x2, a) */
  float *dout;      /* rows x 2 output gradient */
} dqn_rows;

static void rows_free(dqn_rows *b) {
  free(b->x);
  free(b->x2);
  free(b->action);
  free(b->ret);
  free(b->disc);
  free(b->weight);
  free(b->td);
  free(b->best);
  free(b->dout);
  memset(b, 0, sizeof *b);
}

/* Room for `rows` rows of `inputs` network inputs. Returns 0, or -1 when
   memory runs out (then *b is empty). */
static int rows_init(dqn_rows *b, size_t rows, size_t inputs) {
  memset(b, 0, sizeof *b);
  b->x = (float *)malloc(rows * inputs * sizeof(float));
  b->x2 = (float *)malloc(rows * inputs * sizeof(float));
  b->action = (uint32_t *)malloc(rows * sizeof(uint32_t));
  b->ret = (float *)malloc(rows * sizeof(float));
  b->disc = (float *)malloc(rows * sizeof(float));
  b->weight = (float *)malloc(rows * sizeof(float));
  b->td = (float *)malloc(rows * sizeof(float));
  b->best = (uint32_t *)malloc(rows * sizeof(uint32_t));
  b->dout = (float *)malloc(rows * CARTPOLE_ACTIONS * sizeof(float));
  if (b->x && b->x2 && b->action && b->ret && b->disc && b->weight && b->td &&
      b->best && b->dout)
    return 0;
  rows_free(b);
  return -1;
}

/* Row i of b from an n-step item `it` of per's adder (layout lay): the
   state, action, discounted reward sum and bootstrap state, the
   discount 0 when the episode terminated (no bootstrap). */
static inline void rows_from_nstep(dqn_rows *b, uint32_t i,
                                   const unsigned char *it,
                                   const per_nstep_layout *lay) {
  uint32_t done;
  memcpy(b->x + i * CARTPOLE_OBS, it + lay->obs, CARTPOLE_OBS * sizeof(float));
  memcpy(b->x2 + i * CARTPOLE_OBS, it + lay->next_obs,
         CARTPOLE_OBS * sizeof(float));
  memcpy(&b->action[i], it + lay->action, sizeof(uint32_t));
  memcpy(&b->ret[i], it + lay->reward, sizeof(float));
  memcpy(&b->disc[i], it + lay->discount, sizeof(float));
  memcpy(&done, it + lay->done, sizeof done);
  if (done) b->disc[i] = 0.0f;
}

/* One gradient step on the first `rows` rows of b (at least one): the
   double-DQN targets into b->ret, the TD errors into b->td, Adam on the
   online network, then the target network follows by tau. */
static void dqn_learn(dqn_agent *ag, dqn_rows *b, uint32_t rows,
                      const dqn_options *o) {
  const float scale = 1.0f / (float)rows;
  const float *q;
  uint32_t r;
  /* double DQN: the online network picks a', the target rates it */
  q = mlp_forward(&ag->net, b->x2, (int)rows);
  for (r = 0; r < rows; ++r) b->best[r] = (uint32_t)argmax2(q + 2 * r);
  q = mlp_forward(&ag->target, b->x2, (int)rows);
  for (r = 0; r < rows; ++r) {
    float bootstrap = b->disc[r] * q[2 * r + b->best[r]];
    b->ret[r] += bootstrap; /* now the target y */
  }
  q = mlp_forward(&ag->net, b->x, (int)rows);
  for (r = 0; r < rows; ++r) {
    uint32_t a = b->action[r];
    float d = q[2 * r + a] - b->ret[r];
    b->td[r] = d;
    /* Huber (delta 1) derivative, scaled by the IS weight */
    if (d > 1.0f) d = 1.0f;
    if (d < -1.0f) d = -1.0f;
    b->dout[2 * r + a] = b->weight[r] * d * scale;
    b->dout[2 * r + (a ^ 1u)] = 0.0f;
  }
  mlp_backward(&ag->net, b->dout, (int)rows);
  mlp_adam(&ag->net, o->lr, o->clip);
  mlp_blend(&ag->target, &ag->net, o->tau);
}

static double seconds(void) { return (double)clock() / CLOCKS_PER_SEC; }

/* The run so far: the returns of the last WINDOW episodes, and the clock
   of the progress lines. */
typedef struct dqn_record {
  double returns[WINDOW], ret_sum;
  double avg;       /* mean return of the last WINDOW episodes */
  double ep_return; /* of the running episode */
  long episodes;
  long solved_step;  /* -1 until solved */
  double t0, t_last; /* seconds() at the start, at the last line */
  long step_last;    /* step of the last line */
} dqn_record;

/* An empty record, its clock started. */
static void record_start(dqn_record *rec) {
  memset(rec, 0, sizeof *rec);
  rec->solved_step = -1;
  rec->t0 = rec->t_last = seconds();
}

/* Ends the running episode: its return (returned) joins the window. */
static double record_episode(dqn_record *rec) {
  double ret = rec->ep_return;
  long slot = rec->episodes % WINDOW;
  if (rec->episodes >= WINDOW) rec->ret_sum -= rec->returns[slot];
  rec->returns[slot] = ret;
  rec->ret_sum += ret;
  rec->episodes += 1;
  rec->avg =
      rec->ret_sum / (double)(rec->episodes < WINDOW ? rec->episodes : WINDOW);
  rec->ep_return = 0.0;
  return ret;
}

/* 1, and the step noted, when the last WINDOW episodes average SOLVED_AT
   or more (Gymnasium's definition of solved). */
static inline int record_solved(dqn_record *rec, long step) {
  if (rec->episodes < WINDOW || rec->avg < SOLVED_AT) return 0;
  rec->solved_step = step;
  return 1;
}

/* The progress line, every report_every steps unless --quiet. */
static inline void record_progress(dqn_record *rec, const dqn_options *o,
                                   long step, double eps, double beta) {
  double now, dt;
  if (o->quiet || step % o->report_every != 0) return;
  now = seconds();
  dt = now - rec->t_last;
  printf("step %7ld  episodes %5ld  avg100 %6.1f  epsilon %.3f  "
         "beta %.3f  %6.0f steps/s\n",
         step, rec->episodes, rec->avg, eps, beta,
         dt > 0 ? (double)(step - rec->step_last) / dt : 0.0);
  fflush(stdout);
  rec->t_last = now;
  rec->step_last = step;
}

/* The summary line after training, which ended at `step` (past the
   budget when the loop ran out). */
static inline void record_summary(const dqn_record *rec, const dqn_options *o,
                                  long step) {
  if (step > o->steps) step = o->steps;
  if (rec->solved_step >= 0)
    printf("solved at step %ld (episode %ld): avg100 %.1f, %.1f s\n",
           rec->solved_step, rec->episodes, rec->avg, seconds() - rec->t0);
  else
    printf("not solved in %ld steps (%ld episodes): final avg100 %.1f, "
           "%.1f s\n",
           step, rec->episodes, rec->avg, seconds() - rec->t0);
}

/* A greedy policy: the action for observation obs, first being 1 for an
   episode's first observation; self is the policy's own state. */
typedef int (*dqn_policy)(void *self, const float *obs, int first);

/* Mean return of k greedy episodes (epsilon 0) on an environment seeded
   apart from the training one. */
static double evaluate(dqn_policy act, void *self, uint64_t seed, long k) {
  cartpole env;
  float obs[CARTPOLE_OBS];
  double total = 0.0;
  long e;
  cartpole_init(&env, seed);
  for (e = 0; e < k; ++e) {
    int term = 0, trunc = 0, first = 1;
    cartpole_reset(&env, obs);
    while (!term && !trunc) {
      total += cartpole_step(&env, act(self, obs, first), obs, &term, &trunc);
      first = 0;
    }
  }
  return k > 0 ? total / (double)k : 0.0;
}

/* After training: --eval's greedy episodes and, with --smoke, the check
   of their mean. Returns the exit status: 0, or 3 when the check fails. */
static int dqn_evaluate(const dqn_options *o, dqn_policy act, void *self) {
  double mean;
  if (o->eval_episodes <= 0) return 0;
  mean = evaluate(act, self, o->seed + 1000003u, o->eval_episodes);
  printf("greedy evaluation: mean return %.1f over %ld episodes\n", mean,
         o->eval_episodes);
  if (!o->smoke) return 0;
  /* a uniformly random policy averages 22.3 */
  printf("smoke check (mean >= %.0f): %s\n", SMOKE_MIN,
         mean >= SMOKE_MIN ? "ok" : "FAILED");
  return mean < SMOKE_MIN ? 3 : 0;
}

#endif /* PER_EXAMPLE_DQN_H */
