/* seq_cartpole.c - sequence replay (R2D2-style) on a partially observable
   CartPole-v1, in plain C with per.h.

   The agent sees only the cart position and the pole angle; the two
   velocities are hidden, so one observation cannot tell a pole falling
   left from one swinging back. The Q-network gets the last K observations
   instead, and that history comes from per's sequence replay: every
   environment step is stored once, with its episode end, and training
   draws whole runs of consecutive steps.

   The stored step (struct step below): the observation the action was
   taken in, the one that followed, the action, the reward, the step's
   index in its episode and its end (PER_END_NONE, _TERMINATED or
   _TRUNCATED, also handed to per_buffer_add_step). The buffer keeps a
   sequence of L steps starting at every multiple of the stride S, and
   with PER_SEQ_CROSS_EPISODES a sequence may run past an episode end: the
   steps after it come back masked. So the unmasked steps of a drawn
   sequence all belong to one episode, which began at or before the
   sequence's first step.

   The input for step t of a sequence: the observations of steps t-K+1 ..
   t, oldest first, each as (position / 2.4, angle / 12 degrees, 1), or
   (0, 0, 0) for a step before the episode's start. The next state of step t is the same
   window moved on by one, ending with the step's next observation.
   Burn-in: a step whose window reaches back past the sequence's first
   step (t < K - 1 while the episode began earlier) has no full history
   in the draw; it is left out of the loss. Masked steps are left out too.

   Every other step gets the double-DQN target over up to n steps inside
   the sequence,
       y_t = sum_{k<m} gamma^k r_{t+k}
             + (terminated ? 0 : gamma^m Q_target(s', argmax_a Q(s', a)))
   where m <= n stops early at an episode end or at the sequence's last
   step and s' is the next state of step t+m-1 (a truncated episode
   bootstraps from it; a terminated one does not). The loss is the Huber
   loss of Q(s_t, a_t) - y_t times the sequence's importance-sampling
   weight, averaged over the steps in the loss. Each sequence's L TD
   errors go back through per_buffer_update_seq: the trained steps' own,
   0 for the masked steps (per leaves their priorities as they are), and
   for the burn-in steps the mean |TD| of the sequence's trained steps:
   per sets the priority of every unmasked step, and this keeps the
   sequence's priority (eta * max + (1 - eta) * mean over its steps)
   close to what its trained steps alone would give.

   The network: 3K-64-64-2 ReLU (mlp.h), Adam, a target network following
   by Polyak averaging, epsilon-greedy exploration decaying linearly, one
   gradient step per environment step. Defaults: L = 16, S = 8, K = 4,
   n = 3, B = 8 sequences per draw (up to 128 steps in the loss).

   Solved (as Gymnasium's CartPole-v1 defines it): the mean return of the
   last 100 episodes reaches 475. Training stops there, or at --steps.
   Exit status 0 whether solved or not; 1 on an error, 2 on bad flags,
   3 when --smoke's check fails.

   Usage: seq_cartpole [--seed S] [--steps N] [--batch B] [--seq-len L]
                       [--stride S] [--history K] [--n N] [--quiet]
                       [--smoke] [--eval K] [--help]
   (--help lists the rest: --capacity, --alpha, --beta, --gamma, --lr,
   --tau, --train-every, --every). */
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

#define SEEN 2           /* observed values: cart position, pole angle */
#define IN_PER_OBS 3     /* network inputs per observation: + validity */
#define HIDDEN 64
#define MAX_HISTORY 16
#define MAX_BATCH 256    /* sequences per draw */
#define MAX_SEQ_LEN 256
#define MAX_ROWS 65536   /* batch * seq_len */
#define WINDOW 100       /* episodes in the moving average */
#define SOLVED_AT 475.0  /* CartPole-v1's reward threshold */
/* --smoke: a short run, then greedy episodes whose mean must reach
   SMOKE_MIN (see examples/meson.build for the measurements behind it) */
#define SMOKE_STEPS 10000
#define SMOKE_EVAL 10
#define SMOKE_MIN 100.0

/* One environment step as stored in the buffer. */
typedef struct step {
  float obs[SEEN];      /* what the agent saw when it acted */
  float next_obs[SEEN]; /* what it saw after */
  int32_t action;
  float reward;
  uint32_t t;           /* steps of the episode before this one */
  uint32_t end;         /* PER_END_*, as given to per_buffer_add_step */
} step;

typedef struct options {
  uint64_t seed;
  long steps;          /* environment steps budget */
  uint32_t batch;      /* sequences per draw */
  uint32_t seq_len;    /* L */
  uint32_t stride;     /* a sequence starts every S slots */
  uint32_t history;    /* K observations per network input */
  uint32_t n;          /* n-step return, inside a sequence */
  uint32_t capacity;   /* replay capacity (steps) */
  double alpha;        /* priority exponent */
  double beta0;        /* IS exponent at the start, annealed to 1 */
  float gamma;
  float lr;
  float tau;           /* Polyak factor per training step */
  float clip;          /* gradient norm clip */
  long train_every;    /* environment steps per gradient step */
  long learn_start;    /* steps before the first update */
  long explore_steps;  /* epsilon 1 -> eps_final over these steps */
  float eps_final;
  int quiet, smoke;
  long eval_episodes;  /* greedy episodes after training */
  long report_every;
} options;

static void usage(FILE *f) {
  fprintf(f,
    "usage: seq_cartpole [options]\n"
    "  --seed S         environment, network and replay seed (default 1)\n"
    "  --steps N        environment step budget (default 150000)\n"
    "  --batch B        sequences per draw (default 8)\n"
    "  --seq-len L      steps per sequence (default 16)\n"
    "  --stride S       a sequence starts every S slots; divides the\n"
    "                   capacity (default 8)\n"
    "  --history K      observations per network input, <= L (default 4)\n"
    "  --n N            n-step return inside a sequence (default 3)\n"
    "  --quiet          only the final summary\n"
    "  --smoke          check run: %d steps, then %d greedy episodes;\n"
    "                   exit status 3 when their mean return is below %.0f\n"
    "  --capacity C     replay capacity in steps (default 65536)\n"
    "  --alpha A        priority exponent (default 0.6)\n"
    "  --beta B         initial IS exponent, annealed to 1 (default 0.4)\n"
    "  --gamma G        discount (default 0.99)\n"
    "  --lr LR          Adam learning rate (default 1e-3)\n"
    "  --tau T          target network Polyak factor (default 0.002)\n"
    "  --train-every N  environment steps per gradient step (default 1)\n"
    "  --every N        progress line every N steps (default 10000)\n"
    "  --eval K         after training, K greedy episodes (default 0)\n",
    SMOKE_STEPS, SMOKE_EVAL, SMOKE_MIN);
}

/* Returns 0, or -1 after printing what is wrong. */
static int parse_args(int argc, char **argv, options *o) {
  const arg_flag flags[] = {
      arg_u64("--seed", &o->seed, 0, LONG_MAX),
      arg_long("--steps", &o->steps, 1, 100000000L),
      arg_u32("--batch", &o->batch, 1, MAX_BATCH),
      arg_u32("--seq-len", &o->seq_len, 1, MAX_SEQ_LEN),
      arg_u32("--stride", &o->stride, 1, MAX_SEQ_LEN),
      arg_u32("--history", &o->history, 1, MAX_HISTORY),
      arg_u32("--n", &o->n, 1, MAX_SEQ_LEN),
      arg_u32("--capacity", &o->capacity, 1, 1L << 24),
      arg_long("--train-every", &o->train_every, 1, 1000000L),
      arg_long("--eval", &o->eval_episodes, 0, 100000),
      arg_long("--every", &o->report_every, 1, LONG_MAX),
      arg_double("--alpha", &o->alpha, 0.0, 10.0),
      arg_double("--beta", &o->beta0, 0.0, 1.0),
      arg_float("--gamma", &o->gamma, 0.0, 1.0),
      arg_float("--lr", &o->lr, 1e-7, 1.0),
      arg_float("--tau", &o->tau, 1e-6, 1.0),
      arg_switch("--quiet", &o->quiet),
      arg_switch("--smoke", &o->smoke)};
  if (arg_parse(argc, argv, flags, sizeof flags / sizeof flags[0],
                "seq_cartpole", usage))
    return -1;
  /* what the flags must satisfy together */
  if (o->history > o->seq_len) {
    fprintf(stderr, "seq_cartpole: --history %u exceeds --seq-len %u\n",
            o->history, o->seq_len);
    return -1;
  }
  if (o->seq_len > o->capacity || o->capacity % o->stride != 0) {
    fprintf(stderr, "seq_cartpole: --stride %u must divide --capacity %u, "
            "which must hold a sequence of %u\n",
            o->stride, o->capacity, o->seq_len);
    return -1;
  }
  if ((unsigned long)o->batch * o->seq_len > MAX_ROWS) {
    fprintf(stderr, "seq_cartpole: --batch times --seq-len exceeds %d\n",
            MAX_ROWS);
    return -1;
  }
  return 0;
}

/* The network input for one state: K observations, oldest first, each
   (its two seen values, 1), or (0, 0, 0) where recent[k] is NULL (a step
   before the episode's start). */
static void stack_obs(float *x, const float *const *recent, uint32_t K) {
  uint32_t k;
  for (k = 0; k < K; ++k) {
    float *xk = x + IN_PER_OBS * k;
    if (recent[k]) {
      xk[0] = recent[k][0];
      xk[1] = recent[k][1];
      xk[2] = 1.0f;
    } else {
      xk[0] = xk[1] = xk[2] = 0.0f;
    }
  }
}

/* The input of the state step sq[t] acted in: steps t-K+1 .. t of the
   sequence, those before the episode's start padded. The caller makes
   sure the episode's part of the window lies inside the sequence. */
static void state_input(float *x, const step *sq, uint32_t t, uint32_t K) {
  const float *recent[MAX_HISTORY];
  uint32_t k;
  for (k = 0; k < K; ++k) {
    uint32_t back = K - 1 - k; /* steps before t */
    recent[k] = back <= sq[t].t ? sq[t - back].obs : NULL;
  }
  stack_obs(x, recent, K);
}

/* The input of the state after step sq[u]: steps u-K+2 .. u, then the
   step's next observation. */
static void next_input(float *x, const step *sq, uint32_t u, uint32_t K) {
  const float *recent[MAX_HISTORY];
  uint32_t k;
  for (k = 0; k + 1 < K; ++k) {
    uint32_t back = K - 2 - k;
    recent[k] = back <= sq[u].t ? sq[u - back].obs : NULL;
  }
  recent[K - 1] = sq[u].next_obs;
  stack_obs(x, recent, K);
}

/* What the agent sees of a full observation: the cart position and the
   pole angle, each divided by its termination threshold (so both lie in
   [-1, 1] while the episode lasts). */
static void seen_part(float seen[SEEN], const float full[CARTPOLE_OBS]) {
  seen[0] = full[0] / (float)CARTPOLE_X_THRESHOLD;
  seen[1] = full[2] / (float)CARTPOLE_THETA_THRESHOLD;
}

/* The last K observations of the running episode, oldest first
   (obs[K-1] the newest); seen counts the episode's observations. */
typedef struct history {
  float obs[MAX_HISTORY][SEEN];
  uint32_t K, seen;
} history;

static void history_reset(history *h, uint32_t K, const float *full) {
  memset(h, 0, sizeof *h);
  h->K = K;
  seen_part(h->obs[K - 1], full);
  h->seen = 1;
}

/* Append the next full observation, keeping only what the agent sees. */
static void history_push(history *h, const float *full) {
  memmove(h->obs[0], h->obs[1], (h->K - 1) * sizeof h->obs[0]);
  seen_part(h->obs[h->K - 1], full);
  h->seen += 1;
}

static void history_input(const history *h, float *x) {
  const float *recent[MAX_HISTORY];
  uint32_t k;
  for (k = 0; k < h->K; ++k)
    recent[k] = h->K - 1 - k < h->seen ? h->obs[k] : NULL;
  stack_obs(x, recent, h->K);
}

static int argmax2(const float *q) { return q[1] > q[0] ? 1 : 0; }

static int greedy(mlp *net, const history *h) {
  float x[IN_PER_OBS * MAX_HISTORY];
  history_input(h, x);
  return argmax2(mlp_forward(net, x, 1));
}

/* Mean return of k greedy episodes (epsilon 0) on an environment seeded
   apart from the training one. */
static double evaluate(mlp *net, uint32_t K, uint64_t seed, long k) {
  cartpole env;
  history h;
  float obs[CARTPOLE_OBS];
  double total = 0.0;
  long e;
  cartpole_init(&env, seed);
  for (e = 0; e < k; ++e) {
    int term = 0, trunc = 0;
    cartpole_reset(&env, obs);
    history_reset(&h, K, obs);
    while (!term && !trunc) {
      total += cartpole_step(&env, greedy(net, &h), obs, &term, &trunc);
      history_push(&h, obs);
    }
  }
  return k > 0 ? total / (double)k : 0.0;
}

static double seconds(void) { return (double)clock() / CLOCKS_PER_SEC; }

/* Scratch of one training step, sized for B sequences of L steps. */
typedef struct trainer {
  step *items;          /* B * L drawn steps */
  uint8_t *mask;        /* B * L: 1 for a step of the sequence's episode */
  uint64_t *ids;        /* B sequence ids */
  float *weights;       /* B IS weights */
  float *td;            /* B * L TD errors for per_buffer_update_seq */
  float *x, *x2;        /* rows of states and of bootstrap states */
  float *ret, *disc;    /* per row: discounted reward sum, gamma^m or 0 */
  float *dout;          /* rows x 2 output gradient */
  uint32_t *row_at;     /* per row: its step's index in items */
  uint8_t *trained;     /* B * L: 1 for a step in the loss */
  uint32_t *best;       /* per row: argmax_a Q(s', a) */
} trainer;

static void trainer_free(trainer *tr) {
  free(tr->items);
  free(tr->mask);
  free(tr->ids);
  free(tr->weights);
  free(tr->td);
  free(tr->x);
  free(tr->x2);
  free(tr->ret);
  free(tr->disc);
  free(tr->dout);
  free(tr->row_at);
  free(tr->trained);
  free(tr->best);
  memset(tr, 0, sizeof *tr);
}

static int trainer_init(trainer *tr, uint32_t B, uint32_t L, uint32_t K) {
  size_t rows = (size_t)B * L, in = (size_t)IN_PER_OBS * K;
  memset(tr, 0, sizeof *tr);
  tr->items = (step *)malloc(rows * sizeof(step));
  tr->mask = (uint8_t *)malloc(rows);
  tr->ids = (uint64_t *)malloc(B * sizeof(uint64_t));
  tr->weights = (float *)malloc(B * sizeof(float));
  tr->td = (float *)malloc(rows * sizeof(float));
  tr->x = (float *)malloc(rows * in * sizeof(float));
  tr->x2 = (float *)malloc(rows * in * sizeof(float));
  tr->ret = (float *)malloc(rows * sizeof(float));
  tr->disc = (float *)malloc(rows * sizeof(float));
  tr->dout = (float *)malloc(rows * CARTPOLE_ACTIONS * sizeof(float));
  tr->row_at = (uint32_t *)malloc(rows * sizeof(uint32_t));
  tr->trained = (uint8_t *)malloc(rows);
  tr->best = (uint32_t *)malloc(rows * sizeof(uint32_t));
  if (tr->items && tr->mask && tr->ids && tr->weights && tr->td && tr->x &&
      tr->x2 && tr->ret && tr->disc && tr->dout && tr->row_at && tr->trained &&
      tr->best)
    return 0;
  trainer_free(tr);
  return -1;
}

/* One draw of B sequences, one gradient step, one priority update.
   Returns PER_OK or the failing call's status (printed). */
static per_status train(const options *o, per_buffer *buf, trainer *tr,
                        mlp *net, mlp *target) {
  const uint32_t B = o->batch, L = o->seq_len, K = o->history;
  const size_t in = (size_t)IN_PER_OBS * K;
  /* flags, beta (unused: the schedule), window (0: whole buffer), mask */
  per_sample_opts opts = {PER_SAMPLE_SEQUENCES, 0.0, 0, tr->mask};
  uint32_t j, t, r, rows = 0, stale;
  const float *q;
  float scale;
  double abs_sum = 0.0;
  per_status s;

  s = per_buffer_sample(buf, B, &opts, tr->items, tr->ids, tr->weights);
  if (s != PER_OK) {
    fprintf(stderr, "per_buffer_sample: %s\n", per_status_str(s));
    return s;
  }

  /* One row per step in the loss: unmasked, and its window inside the
     sequence (min(K - 1, steps of the episode before it) <= t). */
  for (j = 0; j < B; ++j) {
    const step *sq = tr->items + (size_t)j * L;
    const uint8_t *mk = tr->mask + (size_t)j * L;
    for (t = 0; t < L; ++t) {
      uint32_t need = sq[t].t < K - 1 ? sq[t].t : K - 1, u = t;
      float g = 1.0f, sum = 0.0f;
      tr->trained[j * L + t] = 0;
      if (!mk[t] || need > t) continue;
      /* the n-step return: stop at an episode end, or at the
         sequence's last step */
      for (;;) {
        sum += g * sq[u].reward;
        g *= o->gamma;
        if (sq[u].end != PER_END_NONE || u + 1 == L || u + 1 - t == o->n)
          break;
        ++u;
      }
      state_input(tr->x + rows * in, sq, t, K);
      next_input(tr->x2 + rows * in, sq, u, K);
      tr->ret[rows] = sum;
      tr->disc[rows] = sq[u].end == PER_END_TERMINATED ? 0.0f : g;
      tr->row_at[rows] = j * L + t;
      tr->trained[j * L + t] = 1;
      ++rows;
    }
  }

  if (rows > 0) {
    /* double DQN: the online network picks a', the target rates it */
    q = mlp_forward(net, tr->x2, (int)rows);
    for (r = 0; r < rows; ++r) tr->best[r] = (uint32_t)argmax2(q + 2 * r);
    q = mlp_forward(target, tr->x2, (int)rows);
    for (r = 0; r < rows; ++r) {
      float bootstrap = tr->disc[r] * q[2 * r + tr->best[r]];
      tr->ret[r] += bootstrap; /* now the target y */
    }
    q = mlp_forward(net, tr->x, (int)rows);
    scale = 1.0f / (float)rows;
    for (r = 0; r < rows; ++r) {
      uint32_t at = tr->row_at[r];
      uint32_t a = (uint32_t)tr->items[at].action;
      float d = q[2 * r + a] - tr->ret[r];
      tr->td[at] = d;
      abs_sum += fabs((double)d);
      /* Huber (delta 1) derivative, times the sequence's IS weight */
      if (d > 1.0f) d = 1.0f;
      if (d < -1.0f) d = -1.0f;
      tr->dout[2 * r + a] = tr->weights[at / L] * d * scale;
      tr->dout[2 * r + (a ^ 1u)] = 0.0f;
    }
    mlp_backward(net, tr->dout, (int)rows);
    mlp_adam(net, o->lr, o->clip);
    mlp_blend(target, net, o->tau);
  }

  /* The TD errors for the update: masked steps 0 (ignored by per), burn-in
     steps the mean |TD| of their sequence's trained steps (of the whole
     batch when the sequence has none). */
  for (j = 0; j < B; ++j) {
    float *td = tr->td + (size_t)j * L;
    const uint8_t *mk = tr->mask + (size_t)j * L;
    const uint8_t *used = tr->trained + (size_t)j * L;
    double seq_sum = 0.0;
    uint32_t count = 0;
    float fill;
    for (t = 0; t < L; ++t)
      if (used[t]) seq_sum += fabs((double)td[t]), ++count;
    fill = (float)(count > 0 ? seq_sum / count
                             : rows > 0 ? abs_sum / rows : 0.0);
    for (t = 0; t < L; ++t)
      if (!used[t]) td[t] = mk[t] ? fill : 0.0f;
  }
  /* stale counts the sequences overwritten since the draw: none here,
     since nothing is added in between */
  s = per_buffer_update_seq(buf, tr->ids, tr->td, B, &stale);
  if (s != PER_OK)
    fprintf(stderr, "per_buffer_update_seq: %s\n", per_status_str(s));
  return s;
}

int main(int argc, char **argv) {
  options o;
  per_config pc;
  per_buffer buf;
  trainer tr;
  mlp net, target;
  per_rng rng;
  cartpole env;
  history h;
  int sizes[4];
  float obs[CARTPOLE_OBS], next[CARTPOLE_OBS];
  double returns[WINDOW], ret_sum = 0.0, ep_return = 0.0, avg = 0.0;
  long step_no, episodes = 0, solved_step = -1, updates;
  double t0, t_last, eps = 1.0;
  long step_last = 0;
  uint32_t ep_t = 0;
  int rc = 1;
  per_status s;

  memset(&o, 0, sizeof o);
  o.seed = 1;
  o.steps = 150000;
  o.batch = 8;
  o.seq_len = 16;
  o.stride = 8;
  o.history = 4;
  o.n = 3;
  o.capacity = 65536;
  o.alpha = 0.6;
  o.beta0 = 0.4;
  o.gamma = 0.99f;
  o.lr = 1e-3f;
  o.tau = 0.002f;
  o.clip = 10.0f;
  o.train_every = 1;
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

  /* The replay: one step per environment step, sequences of seq_len
     starting every stride slots, allowed to run past an episode end. */
  updates = o.steps > o.learn_start ? (o.steps - o.learn_start) / o.train_every
                                    : 0;
  pc = per_config_default(o.capacity, sizeof(step));
  pc.alpha = o.alpha;
  pc.beta0 = o.beta0;
  pc.beta1 = 1.0;
  pc.beta_steps = (uint64_t)(updates > 0 ? updates : 1);
  pc.seed = o.seed;
  pc.seq_len = o.seq_len;
  pc.seq_stride = o.stride;
  pc.flags = PER_SEQ_CROSS_EPISODES;
  s = per_buffer_init(&buf, &pc, NULL);
  if (s != PER_OK) {
    fprintf(stderr, "per_buffer_init: %s\n", per_status_str(s));
    return 1;
  }

  memset(&net, 0, sizeof net);
  memset(&target, 0, sizeof target);
  memset(&tr, 0, sizeof tr);
  sizes[0] = (int)(IN_PER_OBS * o.history);
  sizes[1] = sizes[2] = HIDDEN;
  sizes[3] = CARTPOLE_ACTIONS;
  per_rng_init(&rng, o.seed ^ 0x9e3779b97f4a7c15ull);
  if (mlp_init(&net, sizes, 3, (int)(o.batch * o.seq_len), &rng) ||
      mlp_init(&target, sizes, 3, (int)(o.batch * o.seq_len), &rng) ||
      trainer_init(&tr, o.batch, o.seq_len, o.history)) {
    fprintf(stderr, "seq_cartpole: out of memory\n");
    goto done;
  }
  mlp_blend(&target, &net, 1.0f);

  if (!o.quiet)
    printf("sequence DQN on CartPole-v1 without velocities: seed %llu, "
           "%u sequences of %u (stride %u), history %u, n %u, "
           "budget %ld steps\n",
           (unsigned long long)o.seed, o.batch, o.seq_len, o.stride,
           o.history, o.n, o.steps);
  cartpole_init(&env, o.seed);
  cartpole_reset(&env, obs);
  history_reset(&h, o.history, obs);
  t0 = t_last = seconds();
  for (step_no = 1; step_no <= o.steps; ++step_no) {
    step st;
    uint32_t a;
    int term, trunc;
    float r;

    /* epsilon-greedy, epsilon linear from 1 to eps_final */
    eps = step_no >= o.explore_steps
              ? o.eps_final
              : 1.0 - (1.0 - o.eps_final) * (double)step_no / o.explore_steps;
    if (per_rng_double(&rng) < eps)
      a = per_rng_below(&rng, CARTPOLE_ACTIONS);
    else
      a = (uint32_t)greedy(&net, &h);

    r = cartpole_step(&env, (int)a, next, &term, &trunc);
    ep_return += r;
    memset(&st, 0, sizeof st);
    seen_part(st.obs, obs);
    seen_part(st.next_obs, next);
    st.action = (int32_t)a;
    st.reward = r;
    st.t = ep_t++;
    st.end = term ? PER_END_TERMINATED : trunc ? PER_END_TRUNCATED
                                               : PER_END_NONE;
    s = per_buffer_add_step(&buf, &st, (uint8_t)st.end);
    if (s != PER_OK) {
      fprintf(stderr, "per_buffer_add_step: %s\n", per_status_str(s));
      goto done;
    }
    memcpy(obs, next, sizeof obs);
    history_push(&h, obs);

    if (term || trunc) {
      if (episodes >= WINDOW) ret_sum -= returns[episodes % WINDOW];
      returns[episodes % WINDOW] = ep_return;
      ret_sum += ep_return;
      episodes += 1;
      avg = ret_sum / (double)(episodes < WINDOW ? episodes : WINDOW);
      ep_return = 0.0;
      ep_t = 0;
      cartpole_reset(&env, obs);
      history_reset(&h, o.history, obs);
      if (episodes >= WINDOW && avg >= SOLVED_AT) {
        solved_step = step_no;
        break;
      }
    }

    if (step_no >= o.learn_start && step_no % o.train_every == 0 &&
        train(&o, &buf, &tr, &net, &target) != PER_OK)
      goto done;

    if (!o.quiet && step_no % o.report_every == 0) {
      double now = seconds(), dt = now - t_last;
      printf("step %7ld  episodes %5ld  avg100 %6.1f  epsilon %.3f  "
             "beta %.3f  %6.0f steps/s\n",
             step_no, episodes, avg, eps, per_buffer_beta(&buf),
             dt > 0 ? (double)(step_no - step_last) / dt : 0.0);
      fflush(stdout);
      t_last = now;
      step_last = step_no;
    }
  }

  if (step_no > o.steps) step_no = o.steps;
  if (solved_step >= 0)
    printf("solved at step %ld (episode %ld): avg100 %.1f, %.1f s\n",
           solved_step, episodes, avg, seconds() - t0);
  else
    printf("not solved in %ld steps (%ld episodes): final avg100 %.1f, "
           "%.1f s\n",
           step_no, episodes, avg, seconds() - t0);
  rc = 0;
  if (o.eval_episodes > 0) {
    double mean =
        evaluate(&net, o.history, o.seed + 1000003u, o.eval_episodes);
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
  trainer_free(&tr);
  mlp_free(&net);
  mlp_free(&target);
  per_buffer_free(&buf);
  return rc;
}
