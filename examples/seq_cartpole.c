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
   (0, 0, 0) for a step before the episode's start. The next state of
   step t is the same window moved on by one, ending with the step's next
   observation.
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
   n = 3, B = 8 sequences per draw (up to 128 steps in the loss). The
   agent and the run around it (flags, episode returns, evaluation) are
   dqn.h's, shared with dqn_cartpole.c; this file turns drawn sequences
   into the agent's rows.

   Solved (as Gymnasium's CartPole-v1 defines it): the mean return of the
   last 100 episodes reaches 475. Training stops there, or at --steps.
   Exit status 0 whether solved or not; 1 on an error, 2 on bad flags,
   3 when --smoke's check fails.

   Usage: seq_cartpole [--seed S] [--steps N] [--batch B] [--seq-len L]
                       [--stride S] [--history K] [--n N] [--quiet]
                       [--smoke] [--eval K] [--help]
   (--help lists the rest: --capacity, --alpha, --beta, --gamma, --lr,
   --tau, --train-every, --every). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_IMPLEMENTATION
#include "per.h"
#include "cartpole.h"
#include "args.h"
#include "mlp.h"
#include "dqn.h"

#define SEEN 2       /* observed values: cart position, pole angle */
#define IN_PER_OBS 3 /* network inputs per observation: + validity */
#define MAX_HISTORY 16
#define MAX_BATCH 256 /* sequences per draw */
#define MAX_SEQ_LEN 256
#define MAX_ROWS 65536    /* batch * seq_len */
#define SMOKE_STEPS 10000 /* --smoke's run (dqn.h: the check after it) */

/* One environment step as stored in the buffer. */
typedef struct step {
  float obs[SEEN];      /* what the agent saw when it acted */
  float next_obs[SEEN]; /* what it saw after */
  int32_t action;
  float reward;
  uint32_t t;   /* steps of the episode before this one */
  uint32_t end; /* PER_END_*, as given to per_buffer_add_step */
} step;

typedef struct options {
  dqn_options run;  /* what dqn_cartpole takes too */
  uint32_t seq_len; /* L */
  uint32_t stride;  /* a sequence starts every S slots */
  uint32_t history; /* K observations per network input */
  long train_every; /* environment steps per gradient step */
} options;

static void usage(FILE *f) {
  fprintf(
      f,
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
  arg_flag flags[DQN_FLAGS + 4];
  size_t n;
  memset(o, 0, sizeof *o);
  dqn_options_default(&o->run);
  o->run.batch = 8;
  o->run.capacity = 65536;
  o->run.tau = 0.002f;
  o->seq_len = 16;
  o->stride = 8;
  o->history = 4;
  o->train_every = 1;
  n = dqn_flags(flags, &o->run, MAX_SEQ_LEN, MAX_BATCH);
  flags[n++] = arg_u32("--seq-len", &o->seq_len, 1, MAX_SEQ_LEN);
  flags[n++] = arg_u32("--stride", &o->stride, 1, MAX_SEQ_LEN);
  flags[n++] = arg_u32("--history", &o->history, 1, MAX_HISTORY);
  flags[n++] = arg_long("--train-every", &o->train_every, 1, 1000000L);
  if (arg_parse(argc, argv, flags, n, "seq_cartpole", usage)) return -1;
  /* what the flags must satisfy together */
  if (o->history > o->seq_len) {
    fprintf(stderr, "seq_cartpole: --history %u exceeds --seq-len %u\n",
            o->history, o->seq_len);
    return -1;
  }
  if (o->seq_len > o->run.capacity || o->run.capacity % o->stride != 0) {
    fprintf(stderr,
            "seq_cartpole: --stride %u must divide --capacity %u, "
            "which must hold a sequence of %u\n",
            o->stride, o->run.capacity, o->seq_len);
    return -1;
  }
  if ((unsigned long)o->run.batch * o->seq_len > MAX_ROWS) {
    fprintf(stderr, "seq_cartpole: --batch times --seq-len exceeds %d\n",
            MAX_ROWS);
    return -1;
  }
  if (o->run.smoke) dqn_smoke(&o->run, SMOKE_STEPS);
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

/* The greedy policy for evaluate: the network on the history of the
   episode so far, which the policy keeps. */
typedef struct history_policy {
  mlp *net;
  uint32_t K;
  history h;
} history_policy;

static int greedy_policy(void *self, const float *obs, int first) {
  history_policy *p = (history_policy *)self;
  float x[IN_PER_OBS * MAX_HISTORY];
  if (first) history_reset(&p->h, p->K, obs);
  else history_push(&p->h, obs);
  history_input(&p->h, x);
  return greedy(p->net, x);
}

/* The replay: one step per environment step, sequences of seq_len
   starting every stride slots, allowed to run past an episode end.
   Returns 0, or -1 after printing what failed. */
static int replay_init(per_buffer *buf, const options *o) {
  per_config pc = dqn_replay_config(&o->run, sizeof(step), o->train_every);
  pc.seq_len = o->seq_len;
  pc.seq_stride = o->stride;
  pc.flags = PER_SEQ_CROSS_EPISODES;
  return failed(per_buffer_init(buf, &pc, NULL), "per_buffer_init") ? -1 : 0;
}

/* Stores one environment step, its observations as the agent sees them;
   t: the steps of the episode before it. Returns 0, or 1 after printing
   per's error. */
static int store_step(per_buffer *buf, const float *obs, uint32_t a, float r,
                      const float *next, uint32_t t, int term, int trunc) {
  step st;
  memset(&st, 0, sizeof st);
  seen_part(st.obs, obs);
  seen_part(st.next_obs, next);
  st.action = (int32_t)a;
  st.reward = r;
  st.t = t;
  st.end = term ? PER_END_TERMINATED : trunc ? PER_END_TRUNCATED : PER_END_NONE;
  return failed(per_buffer_add_step(buf, &st, (uint8_t)st.end),
                "per_buffer_add_step");
}

/* Scratch of one training step, sized for B sequences of L steps. */
typedef struct trainer {
  step *items;      /* B * L drawn steps */
  uint8_t *mask;    /* B * L: 1 for a step of the sequence's episode */
  uint64_t *ids;    /* B sequence ids */
  float *weights;   /* B IS weights */
  float *td;        /* B * L TD errors for per_buffer_update_seq */
  uint32_t *row_at; /* per row: its step's index in items */
  uint8_t *trained; /* B * L: 1 for a step in the loss */
  dqn_rows rows;    /* up to B * L rows, one per step in the loss */
} trainer;

static void trainer_free(trainer *tr) {
  free(tr->items);
  free(tr->mask);
  free(tr->ids);
  free(tr->weights);
  free(tr->td);
  free(tr->row_at);
  free(tr->trained);
  rows_free(&tr->rows);
  memset(tr, 0, sizeof *tr);
}

static int trainer_init(trainer *tr, uint32_t B, uint32_t L, uint32_t K) {
  size_t rows = (size_t)B * L;
  memset(tr, 0, sizeof *tr);
  tr->items = (step *)malloc(rows * sizeof(step));
  tr->mask = (uint8_t *)malloc(rows);
  tr->ids = (uint64_t *)malloc(B * sizeof(uint64_t));
  tr->weights = (float *)malloc(B * sizeof(float));
  tr->td = (float *)malloc(rows * sizeof(float));
  tr->row_at = (uint32_t *)malloc(rows * sizeof(uint32_t));
  tr->trained = (uint8_t *)malloc(rows);
  if (tr->items && tr->mask && tr->ids && tr->weights && tr->td && tr->row_at &&
      tr->trained && !rows_init(&tr->rows, rows, (size_t)IN_PER_OBS * K))
    return 0;
  trainer_free(tr);
  return -1;
}

/* The rows of the drawn sequences: one per step in the loss, unmasked
   and with its window inside the sequence (min(K - 1, steps of the
   episode before it) <= t). Returns how many. */
static uint32_t sequence_rows(const options *o, trainer *tr) {
  const uint32_t B = o->run.batch, L = o->seq_len, K = o->history;
  const size_t in = (size_t)IN_PER_OBS * K;
  dqn_rows *b = &tr->rows;
  uint32_t j, t, rows = 0;
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
        g *= o->run.gamma;
        if (sq[u].end != PER_END_NONE || u + 1 == L || u + 1 - t == o->run.n)
          break;
        ++u;
      }
      state_input(b->x + rows * in, sq, t, K);
      next_input(b->x2 + rows * in, sq, u, K);
      b->action[rows] = (uint32_t)sq[t].action;
      b->ret[rows] = sum;
      b->disc[rows] = sq[u].end == PER_END_TERMINATED ? 0.0f : g;
      b->weight[rows] = tr->weights[j];
      tr->row_at[rows] = j * L + t;
      tr->trained[j * L + t] = 1;
      ++rows;
    }
  }
  return rows;
}

/* The TD errors for the update: the trained steps' own, masked steps 0
   (ignored by per), burn-in steps the mean |TD| of their sequence's
   trained steps (of the whole batch when the sequence has none). */
static void sequence_td(const options *o, trainer *tr, uint32_t rows) {
  const uint32_t B = o->run.batch, L = o->seq_len;
  double abs_sum = 0.0;
  uint32_t j, t, r;
  for (r = 0; r < rows; ++r) {
    float d = tr->rows.td[r];
    tr->td[tr->row_at[r]] = d;
    abs_sum += fabs((double)d);
  }
  for (j = 0; j < B; ++j) {
    float *td = tr->td + (size_t)j * L;
    const uint8_t *mk = tr->mask + (size_t)j * L;
    const uint8_t *used = tr->trained + (size_t)j * L;
    double seq_sum = 0.0;
    uint32_t count = 0;
    float fill;
    for (t = 0; t < L; ++t)
      if (used[t]) seq_sum += fabs((double)td[t]), ++count;
    fill = (float)(count > 0  ? seq_sum / count
                   : rows > 0 ? abs_sum / rows
                              : 0.0);
    for (t = 0; t < L; ++t)
      if (!used[t]) td[t] = mk[t] ? fill : 0.0f;
  }
}

/* One draw of B sequences, one gradient step, one priority update.
   Returns 0, or 1 after printing the failing call. */
static int train(const options *o, per_buffer *buf, trainer *tr,
                 dqn_agent *ag) {
  const uint32_t B = o->run.batch;
  /* flags, beta (unused: the schedule), window (0: whole buffer), mask */
  per_sample_opts opts = {PER_SAMPLE_SEQUENCES, 0.0, 0, tr->mask};
  uint32_t rows, stale;
  if (failed(per_buffer_sample(buf, B, &opts, tr->items, tr->ids, tr->weights),
             "per_buffer_sample"))
    return 1;
  rows = sequence_rows(o, tr);
  if (rows > 0) dqn_learn(ag, &tr->rows, rows, &o->run);
  sequence_td(o, tr, rows);
  /* stale counts the sequences overwritten since the draw: none here,
     since nothing is added in between */
  return failed(per_buffer_update_seq(buf, tr->ids, tr->td, B, &stale),
                "per_buffer_update_seq");
}

static void print_header(const options *o) {
  if (o->run.quiet) return;
  printf("sequence DQN on CartPole-v1 without velocities: seed %llu, "
         "%u sequences of %u (stride %u), history %u, n %u, "
         "budget %ld steps\n",
         (unsigned long long)o->run.seed, o->run.batch, o->seq_len, o->stride,
         o->history, o->run.n, o->run.steps);
}

int main(int argc, char **argv) {
  options o;
  per_buffer buf;
  dqn_agent ag;
  trainer tr;
  dqn_record rec;
  cartpole env;
  history h;
  history_policy eval;
  float obs[CARTPOLE_OBS], next[CARTPOLE_OBS];
  float x[IN_PER_OBS * MAX_HISTORY];
  uint32_t ep_t = 0; /* steps of the running episode */
  long step_no;
  int rc = 1;

  if (parse_args(argc, argv, &o)) {
    usage(stderr);
    return 2;
  }
  if (replay_init(&buf, &o)) return 1;
  memset(&tr, 0, sizeof tr); /* for done: when agent_init fails */
  if (agent_init(&ag, (int)(IN_PER_OBS * o.history),
                 (int)(o.run.batch * o.seq_len), o.run.seed) ||
      trainer_init(&tr, o.run.batch, o.seq_len, o.history)) {
    fprintf(stderr, "seq_cartpole: out of memory\n");
    goto done;
  }
  print_header(&o);

  cartpole_init(&env, o.run.seed);
  cartpole_reset(&env, obs);
  history_reset(&h, o.history, obs);
  record_start(&rec);
  for (step_no = 1; step_no <= o.run.steps; ++step_no) {
    double eps = epsilon_at(&o.run, step_no);
    uint32_t a;
    int term, trunc;
    float r;
    history_input(&h, x);
    a = epsilon_greedy(&ag, eps, x);
    r = cartpole_step(&env, (int)a, next, &term, &trunc);
    rec.ep_return += r;
    if (store_step(&buf, obs, a, r, next, ep_t++, term, trunc)) goto done;
    memcpy(obs, next, sizeof obs);
    history_push(&h, obs);

    if (term || trunc) {
      record_episode(&rec);
      ep_t = 0;
      cartpole_reset(&env, obs);
      history_reset(&h, o.history, obs);
      if (record_solved(&rec, step_no)) break;
    }

    if (step_no >= o.run.learn_start && step_no % o.train_every == 0 &&
        train(&o, &buf, &tr, &ag))
      goto done;
    record_progress(&rec, &o.run, step_no, eps, per_buffer_beta(&buf));
  }

  record_summary(&rec, &o.run, step_no);
  eval.net = &ag.net;
  eval.K = o.history;
  rc = dqn_evaluate(&o.run, greedy_policy, &eval);

done:
  trainer_free(&tr);
  agent_free(&ag);
  per_buffer_free(&buf);
  return rc;
}
