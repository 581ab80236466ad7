/* apex_async.c - Ape-X DQN on CartPole-v1 with actors that never wait
   for the learner: per_mpi.h's feed carries their batches to replay
   ranks, one prioritized replay sharded over those ranks serves the
   learner, and the learner's weights go back to the actors by a
   non-blocking broadcast.
   Rank 0 is the learner; ranks 1 .. R hold the replay (--replay R,
   default 1); the others are actors, actor i with Ape-X's exploration
   rate epsilon_i = 0.4^(1 + 7 i / (A - 1)) (0.4 when A = 1). An actor
   steps its own CartPole, turns steps into n-step items (per_nstep),
   computes each item's TD error with its copy of the network (Ape-X's
   initial priorities) and every --send items hands them to its replay
   rank (per_mpi_feed_send), which stores them with those priorities
   (per_buffer_add_td). The learner and the replay ranks run in steps:
   the replay ranks drain what arrived, then all of them take part in one
   per_mpi_sample to the learner and one per_mpi_update; the actors are
   in none of it. Every --sync updates the learner starts a broadcast of
   its weights (MPI_Ibcast), unless the last one is still on its way;
   each actor takes the newest one between its steps.
   With --ordered a run is fixed by its seed: each step drains one batch
   from every actor (PER_MPI_FEED_ORDERED), a broadcast goes out every
   --sync steps, and an actor takes broadcast k before its batch
   (k + 2) * sync, waiting for it if needed. Without it the actors and
   the learner each go at their own pace and the run varies.
   Every --check updates the learner plays 100 greedy episodes; solved
   when their mean return reaches 475. Progress lines give the items
   stored per second (the actors' environment steps) and the learner's
   updates per second, and how many of the actors' sends had to wait.
   Exit status 0 when solved, 3 when not within --steps items (--smoke:
   0 once the run went through, and with --ordered only if 10 greedy
   episodes then average 100 or more), 1 on an error, 2 on bad flags or
   fewer than R + 2 ranks.
   Usage: mpirun -np 4 apex_async [--replay R] [--ordered] [--seed S]
                                  [--steps N] [...]   (--help: the rest) */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
#define MAX_SEND 256
#define MAX_MSG (MAX_SEND + MAX_N) /* a send, and what one step adds */
#define LEARNER 0
#define EVAL_EPISODES 100
#define LAG 2             /* --ordered: broadcasts an actor may be behind */
#define SMOKE_STEPS 60000 /* --smoke's run (dqn.h: the check after it) */

typedef struct options {
  dqn_options run;
  long sync, check;
  uint32_t replay; /* replay ranks */
  uint32_t send;   /* items per batch an actor sends */
  int ordered;
} options;

static void usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np W apex_async [options]   (W >= R + 2: rank 0 "
          "learns, ranks 1..R hold the replay, the others act)\n"
          "  --replay R        replay ranks (default 1)\n"
          "  --ordered         a run fixed by its seed (see the source)\n"
          "  --send K          items per batch an actor sends (default 8)\n"
          "  --seed S          seed of everything (default 1)\n"
          "  --steps N         items stored in all, the actors' steps "
          "(default 400000)\n"
          "  --sync K          updates between weight broadcasts (default "
          "20)\n"
          "  --check K         updates between greedy evaluations (default "
          "2000)\n"
          "  --n N, --alpha A, --beta B, --batch B, --capacity C (per replay "
          "rank),\n"
          "  --gamma G, --lr LR, --tau T, --quiet, --smoke (a short run that "
          "must not fail)\n");
}

static int parse_args(int argc, char **argv, options *o, int rank) {
  arg_flag flags[DQN_FLAGS + 6];
  size_t n;
  int bad = 0;
  memset(o, 0, sizeof *o);
  dqn_options_default(&o->run);
  o->run.steps = 400000;
  o->run.batch = 64;
  o->run.capacity = 100000;
  o->run.tau = 0.005f;
  o->sync = 20;
  o->check = 2000;
  o->replay = 1;
  o->send = 8;
  n = dqn_flags(flags, &o->run, MAX_N, MAX_BATCH);
  flags[n++] = arg_long("--sync", &o->sync, 1, 1000000);
  flags[n++] = arg_long("--check", &o->check, 1, 100000000L);
  flags[n++] = arg_u32("--replay", &o->replay, 1, 64);
  flags[n++] = arg_u32("--send", &o->send, 1, MAX_SEND);
  flags[n++] = arg_switch("--ordered", &o->ordered);
  if (rank == LEARNER) {
    bad = arg_parse(argc, argv, flags, n, "apex_async", usage) != 0;
    if (!bad && o->run.smoke) dqn_smoke(&o->run, SMOKE_STEPS);
  }
  MPI_Bcast(&bad, 1, MPI_INT, LEARNER, MPI_COMM_WORLD);
  MPI_Bcast(o, (int)sizeof *o, MPI_BYTE, LEARNER, MPI_COMM_WORLD);
  return bad ? -1 : 0;
}

/* Everything one rank holds. */
typedef struct rank_state {
  int rank, world, role; /* role: 'L'earner, 'R'eplay, 'A'ctor */
  MPI_Comm rcomm;        /* learner + replay ranks: the per_mpi */
  MPI_Comm acomm;        /* learner + actors: the weights */
  per_mpi rb;            /* learner, replay ranks */
  per_mpi_feed feed;     /* everyone: actors send, replay ranks drain */
  per_nstep_layout lay;
  dqn_agent ag;
  dqn_rows rows;        /* learner: drawn items; actors: their batch */
  unsigned char *items; /* learner: B drawn; actors: their outbox */
  per_mpi_id *ids;
  float *td, *stage; /* actors: TD errors; everyone in acomm: weights */
  uint8_t *ends;     /* actors: their batch's ends */
  int stage_n;       /* floats in stage (1 + the weights) */
  MPI_Request bcast; /* the weights broadcast in flight */
  per_nstep adder;   /* actors */
  per_buffer outbox; /* actors: the adder's items until sent */
  dqn_record rec;    /* actors: episode returns */
  cartpole env;
  float obs[CARTPOLE_OBS];
  double eps;
  long sent, taken; /* actors: batches sent, broadcasts taken */
} rank_state;

static int weights_n(mlp *net) {
  int l, n = 0;
  for (l = 0; l < net->n_layers; ++l)
    n += net->layer[l].in * net->layer[l].out + net->layer[l].out;
  return n;
}

/* The network's weights to or from stage[1..]; stage[0] is the stop
   flag. */
static void weights_copy(rank_state *s, int to_stage) {
  int l, at = 1;
  for (l = 0; l < s->ag.net.n_layers; ++l) {
    mlp_layer *L = &s->ag.net.layer[l];
    int k = L->in * L->out + L->out; /* w and b lie together (mlp.h) */
    if (to_stage) memcpy(s->stage + at, L->w, (size_t)k * sizeof(float));
    else memcpy(L->w, s->stage + at, (size_t)k * sizeof(float));
    at += k;
  }
}

static int rank_init(rank_state *s, const options *o) {
  per_nstep_config nc = dqn_nstep_config(&o->run);
  per_config pc;
  int R = (int)o->replay, actors = s->world - 1 - R, dest;
  s->role = s->rank == LEARNER ? 'L' : s->rank <= R ? 'R' : 'A';
  s->lay = per_nstep_layout_of(&nc);
  MPI_Comm_split(MPI_COMM_WORLD, s->role != 'A' ? 0 : MPI_UNDEFINED, s->rank,
                 &s->rcomm);
  MPI_Comm_split(MPI_COMM_WORLD, s->role != 'R' ? 0 : MPI_UNDEFINED, s->rank,
                 &s->acomm);
  dest = s->role == 'A' ? 1 + (s->rank - R - 1) % R : PER_MPI_FEED_NONE;
  if (failed(per_mpi_feed_init(&s->feed, MPI_COMM_WORLD, dest, s->lay.size,
                               MAX_MSG, 4, NULL),
             "per_mpi_feed_init"))
    return 1;
  if (agent_init(&s->ag, CARTPOLE_OBS, MAX_BATCH, o->run.seed)) return 1;
  if (s->role != 'A') {
    pc = dqn_replay_config(&o->run, s->lay.size, 1);
    pc.beta_steps = (uint64_t)(o->run.steps / actors);   /* about the steps */
    if (s->role == 'L') pc.capacity = pc.max_unique = 1; /* stores nothing */
    if (failed(per_mpi_init(&s->rb, s->rcomm, &pc, NULL), "per_mpi_init"))
      return 1;
  }
  if (s->role != 'R') {
    s->stage_n = 1 + weights_n(&s->ag.net);
    s->stage = (float *)calloc((size_t)s->stage_n, sizeof(float));
    if (!s->stage) return 1;
    s->bcast = MPI_REQUEST_NULL;
  }
  if (s->role == 'L') {
    s->items = (unsigned char *)malloc((size_t)o->run.batch * s->lay.size);
    s->ids = (per_mpi_id *)malloc(o->run.batch * sizeof *s->ids);
    if (!s->items || !s->ids || rows_init(&s->rows, o->run.batch, CARTPOLE_OBS))
      return 1;
  } else if (s->role == 'A') {
    per_config oc = per_config_default(2 * MAX_SEND, s->lay.size);
    int i = s->rank - R - 1;
    if (failed(per_nstep_init(&s->adder, &nc, NULL), "per_nstep_init") ||
        failed(per_buffer_init(&s->outbox, &oc, NULL), "per_buffer_init"))
      return 1;
    s->td = (float *)malloc(MAX_MSG * sizeof(float));
    s->ends = (uint8_t *)malloc(MAX_MSG);
    if (!s->td || !s->ends || rows_init(&s->rows, MAX_MSG, CARTPOLE_OBS))
      return 1;
    s->eps = actors == 1
                 ? 0.4
                 : pow(0.4, 1.0 + 7.0 * (double)i / (double)(actors - 1));
    per_rng_init(&s->ag.rng, o->run.seed * 1000003u + (uint64_t)s->rank);
    cartpole_init(&s->env, o->run.seed * 7919u + (uint64_t)s->rank);
    cartpole_reset(&s->env, s->obs);
    record_start(&s->rec);
    /* the first broadcast, always posted: the learner's next one */
    MPI_Ibcast(s->stage, s->stage_n, MPI_FLOAT, 0, s->acomm, &s->bcast);
  }
  return 0;
}

static void rank_free(rank_state *s) {
  per_mpi_feed_free(&s->feed);
  if (s->role != 'A' && s->rcomm != MPI_COMM_NULL) per_mpi_free(&s->rb);
  per_nstep_free(&s->adder);
  per_buffer_free(&s->outbox);
  agent_free(&s->ag);
  rows_free(&s->rows);
  free(s->items);
  free(s->ids);
  free(s->td);
  free(s->ends);
  free(s->stage);
  if (s->rcomm != MPI_COMM_NULL) MPI_Comm_free(&s->rcomm);
  if (s->acomm != MPI_COMM_NULL) MPI_Comm_free(&s->acomm);
}

/* An actor takes a broadcast that arrived (or, with wait, the next one):
   its weights, then posts for the next. 1 when it said stop. */
static int take_weights(rank_state *s, int wait) {
  int done = 0;
  if (wait) MPI_Wait(&s->bcast, MPI_STATUS_IGNORE), done = 1;
  else MPI_Test(&s->bcast, &done, MPI_STATUS_IGNORE);
  if (!done) return 0;
  if (s->stage[0] != 0) return 1;
  weights_copy(s, 0);
  ++s->taken;
  MPI_Ibcast(s->stage, s->stage_n, MPI_FLOAT, 0, s->acomm, &s->bcast);
  return 0;
}

/* An actor's batch: the outbox's items, their TD errors from its own
   network (Ape-X: y = R + disc * Q(s', argmax Q(s', .)), td = Q(s, a) -
   y), sent to its replay rank; the outbox is emptied. */
static int send_batch(rank_state *s) {
  uint32_t n = per_buffer_size(&s->outbox), i;
  dqn_rows *b = &s->rows;
  const float *q;
  for (i = 0; i < n; ++i) {
    rows_from_nstep(b, i, s->outbox.items + (size_t)i * s->lay.size, &s->lay);
    s->ends[i] = s->outbox.ends[i];
  }
  q = mlp_forward(&s->ag.net, b->x2, (int)n);
  for (i = 0; i < n; ++i)
    b->ret[i] += b->disc[i] * q[2 * i + argmax2(q + 2 * i)];
  q = mlp_forward(&s->ag.net, b->x, (int)n);
  for (i = 0; i < n; ++i) s->td[i] = q[2 * i + b->action[i]] - b->ret[i];
  if (failed(per_mpi_feed_send(&s->feed, s->outbox.items, n, s->ends, s->td),
             "per_mpi_feed_send"))
    return 1;
  ++s->sent;
  per_buffer_free(&s->outbox); /* empty again, at slot 0 */
  {
    per_config oc = per_config_default(2 * MAX_SEND, s->lay.size);
    return failed(per_buffer_init(&s->outbox, &oc, NULL), "per_buffer_init");
  }
}

/* An actor until the learner says stop. */
static int actor(rank_state *s, const options *o) {
  for (;;) {
    float next[CARTPOLE_OBS];
    uint32_t a;
    int term, trunc;
    float r;
    if (o->ordered) {
      /* before batch (k + LAG) * sync: broadcast k, whatever the timing */
      if (s->sent >= LAG * o->sync && s->sent % o->sync == 0 &&
          per_buffer_size(&s->outbox) == 0 &&
          s->taken < s->sent / o->sync - LAG + 1) {
        if (take_weights(s, 1)) break;
      }
    } else if (take_weights(s, 0)) {
      break;
    }
    a = epsilon_greedy(&s->ag, s->eps, s->obs);
    r = cartpole_step(&s->env, (int)a, next, &term, &trunc);
    if (failed(per_nstep_step(&s->adder, &s->outbox, s->obs, &a, r, next, term,
                              trunc),
               "per_nstep_step"))
      return 1;
    memcpy(s->obs, next, sizeof next);
    s->rec.ep_return += r;
    if (term || trunc) {
      record_episode(&s->rec);
      cartpole_reset(&s->env, s->obs);
    }
    if (per_buffer_size(&s->outbox) >= o->send && send_batch(s)) return 1;
  }
  /* stop: the last weights broadcast said so; the replay ranks drain
     until every actor closed */
  return failed(per_mpi_feed_close(&s->feed), "per_mpi_feed_close");
}

/* One step of the learner and the replay ranks (collective over rcomm):
   the replay ranks drain, every one learns the stop flag and the items
   stored, then, with enough stored, one sample to the learner and one
   update. Returns -1 on an error, 0, or 1 once stopped. */
static int step(rank_state *s, const options *o, int stop, long *stored,
                int *learned) {
  int64_t mine[2], all[2];
  uint32_t B = o->run.batch, i;
  int me = s->role == 'L';
  dqn_rows *b = &s->rows;
  if (!me) {
    uint32_t want = o->ordered ? (uint32_t)s->feed.nsrc : 64;
    if (failed(per_mpi_feed_drain(&s->feed, &s->rb.shard, want,
                                  o->ordered ? PER_MPI_FEED_ORDERED : 0, NULL),
               "per_mpi_feed_drain"))
      return -1;
  }
  mine[0] = me ? stop : 0;
  mine[1] = me ? 0 : (int64_t)s->rb.shard.added;
  MPI_Allreduce(mine, all, 2, MPI_INT64_T, MPI_SUM, s->rcomm);
  *stored = (long)all[1];
  *learned = 0;
  if (all[0]) return 1;
  if (*stored < o->run.learn_start) return 0;
  if (failed(per_mpi_sample(&s->rb, B, LEARNER, NULL, me ? s->items : NULL,
                            me ? s->ids : NULL, me ? b->weight : NULL),
             "per_mpi_sample"))
    return -1;
  if (me) {
    for (i = 0; i < B; ++i)
      rows_from_nstep(b, i, s->items + (size_t)i * s->lay.size, &s->lay);
    dqn_learn(&s->ag, b, B, &o->run);
  }
  *learned = 1;
  return failed(per_mpi_update(&s->rb, me ? s->ids : NULL, me ? b->td : NULL,
                               me ? B : 0, NULL),
                "per_mpi_update")
             ? -1
             : 0;
}

/* The learner's weights to the actors, unless the last broadcast is
   still on its way (with --ordered: always, after it). */
static void send_weights(rank_state *s, const options *o, int stop) {
  int done = 1;
  if (s->bcast != MPI_REQUEST_NULL) {
    if (o->ordered || stop) MPI_Wait(&s->bcast, MPI_STATUS_IGNORE);
    else MPI_Test(&s->bcast, &done, MPI_STATUS_IGNORE);
  }
  if (!done) return;
  s->stage[0] = (float)stop;
  weights_copy(s, 1);
  MPI_Ibcast(s->stage, s->stage_n, MPI_FLOAT, 0, s->acomm, &s->bcast);
}

static void nap_ms(long ms) {
  struct timespec t;
  t.tv_sec = 0;
  t.tv_nsec = ms * 1000000L;
  nanosleep(&t, NULL);
}

static int greedy_policy(void *self, const float *obs, int first) {
  (void)first;
  return greedy((mlp *)self, obs);
}

/* The learner or a replay rank until the learner stops; returns 0 (solved)
   3 (not), -1 (error). */
static int serve(rank_state *s, const options *o) {
  long steps = 0, updates = 0, stored = 0, budget = o->run.steps;
  int stop = 0, solved = 0, learned, r;
  double t0 = MPI_Wtime(), mean = 0;
  for (;;) {
    r = step(s, o, stop, &stored, &learned);
    if (r < 0) return -1;
    if (r > 0) break;
    ++steps;
    updates += learned;
    if (s->role != 'L') continue;
    if (!learned && !o->ordered) nap_ms(1); /* the actors' turn */
    if (o->ordered ? steps % o->sync == 0 : learned && updates % o->sync == 0)
      send_weights(s, o, 0);
    if (learned && updates % o->check == 0) {
      double dt;
      mean = evaluate(greedy_policy, &s->ag.net, o->run.seed + 1000003u,
                      EVAL_EPISODES);
      solved = mean >= SOLVED_AT;
      dt = MPI_Wtime() - t0;
      if (!o->run.quiet || solved)
        printf("update %7ld  items %8ld  greedy mean %5.1f  %7.0f items/s  "
               "%6.0f updates/s\n",
               updates, stored, mean, dt > 0 ? (double)stored / dt : 0.0,
               dt > 0 ? (double)updates / dt : 0.0);
      fflush(stdout);
    }
    stop = solved || stored >= budget;
  }
  if (s->role == 'L') {
    double dt = MPI_Wtime() - t0;
    send_weights(s, o, 1); /* stop, to the actors */
    MPI_Wait(&s->bcast, MPI_STATUS_IGNORE);
    if (solved)
      printf("solved at update %ld (%ld items stored): greedy mean %.1f over "
             "%d episodes, %.1f s, %.0f items/s, %.0f updates/s\n",
             updates, stored, mean, EVAL_EPISODES, dt, (double)stored / dt,
             (double)updates / dt);
    else
      printf("not solved in %ld items (%ld updates), %.1f s\n", stored, updates,
             dt);
  } else {
    /* the actors send until they hear stop: take it all, then done */
    while (!per_mpi_feed_done(&s->feed))
      if (failed(per_mpi_feed_drain(&s->feed, &s->rb.shard, 64,
                                    o->ordered ? PER_MPI_FEED_ORDERED : 0,
                                    NULL),
                 "per_mpi_feed_drain"))
        return -1;
  }
  return solved ? 0 : 3;
}

int main(int argc, char **argv) {
  options o;
  rank_state s;
  int rc = 1, bad, any_bad, i;
  long waits = 0, mine;
  double avg, *avgs = NULL;
  MPI_Init(&argc, &argv);
  memset(&s, 0, sizeof s);
  s.rcomm = s.acomm = MPI_COMM_NULL;
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.world);
  for (i = 1; i < argc; ++i)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      if (s.rank == LEARNER) usage(stdout);
      MPI_Finalize();
      return 0;
    }
  bad = parse_args(argc, argv, &o, s.rank) != 0;
  if (!bad && s.world < (int)o.replay + 2) {
    if (s.rank == LEARNER)
      fprintf(stderr,
              "apex_async: needs %u or more ranks (a learner, %u "
              "replay ranks, one actor or more)\n",
              o.replay + 2, o.replay);
    bad = 1;
  }
  if (bad) {
    if (s.rank == LEARNER) usage(stderr);
    MPI_Finalize();
    return 2;
  }
  bad = rank_init(&s, &o);
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_bad) goto done;
  if (s.rank == LEARNER && !o.run.quiet)
    printf("Ape-X DQN on CartPole-v1, asynchronous%s: seed %llu, 1 learner, "
           "%u replay ranks, %d actors, batch %u, sends of %u items\n",
           o.ordered ? " (ordered)" : "", (unsigned long long)o.run.seed,
           o.replay, s.world - 1 - (int)o.replay, o.run.batch, o.send);
  rc = s.role == 'A' ? actor(&s, &o) : serve(&s, &o);
  /* an actor that failed would leave its replay rank waiting for it */
  if (rc < 0 || (s.role == 'A' && rc != 0)) MPI_Abort(MPI_COMM_WORLD, 1);
  /* the actors' waits for a free send slot (back-pressure), summed, and
     their last 100 episodes' mean returns */
  mine = (long)s.feed.waits;
  MPI_Reduce(&mine, &waits, 1, MPI_LONG, MPI_SUM, LEARNER, MPI_COMM_WORLD);
  avg = s.rec.avg;
  if (s.rank == LEARNER)
    avgs = (double *)malloc((size_t)s.world * sizeof *avgs);
  MPI_Gather(&avg, 1, MPI_DOUBLE, avgs, 1, MPI_DOUBLE, LEARNER, MPI_COMM_WORLD);
  if (s.rank == LEARNER && !o.run.quiet && avgs) {
    printf("sends that waited for a free slot: %ld; actors' avg100:", waits);
    for (i = (int)o.replay + 1; i < s.world; ++i) printf(" %.1f", avgs[i]);
    printf("\n");
  }
  free(avgs);
  if (s.rank == LEARNER && o.run.eval_episodes > 0) {
    dqn_options eo = o.run;
    int e;
    eo.smoke = o.run.smoke && o.ordered; /* the check only where it holds */
    e = dqn_evaluate(&eo, greedy_policy, &s.ag.net);
    /* a smoke run must learn, not solve; without --ordered how much it
       learns in its items depends on the timing (a slow learner beside
       fast actors updates less), so there it must only run through */
    if (o.run.smoke) rc = o.ordered ? e : 0;
  }
  MPI_Bcast(&rc, 1, MPI_INT, LEARNER, MPI_COMM_WORLD);
done:
  rank_free(&s);
  MPI_Finalize();
  return rc;
}
