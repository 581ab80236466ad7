/* bench_feed.c - Ape-X's ingestion: K actors' items reaching the replay
   and the learner's step, asynchronous (per_mpi_feed) against lockstep
   (per_mpi alone), under mpirun -np K + 2 (bench/feed.sh runs K = 1, 2,
   4 and 8).

   Rank 0 learns, rank 1 holds the replay, ranks 2 .. K + 1 act. An
   actor's "environment step" is --work microseconds of busy arithmetic
   that makes one item of --item bytes (64). The learner's step is one
   per_mpi_sample of B (64) to rank 0 and one per_mpi_update of its TD
   errors, over the learner and the replay rank.
   - lockstep: as apex_cartpole: every rank is in one per_mpi; each round
     every actor takes --send steps and adds the items to its own shard,
     then all take part in one sample and one update.
   - feed: as apex_async: the actors are outside the per_mpi and send
     every --send items (per_mpi_feed_send, 4 slots); the replay rank
     drains what arrived before each learner step.
   Each mode runs --seconds of wall clock (after --warm seconds). Output
   on rank 0, one line (and a CSV row with --csv) per mode: items stored
   per second (all actors), learner steps per second, the median learner
   step in microseconds, and for the feed the share of sends that waited
   for a free slot. No timing is asserted; --quick (0.2 s) checks that
   every call succeeds (a failure aborts the job). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_IMPLEMENTATION
#include "per.h"
#define PER_MPI_IMPLEMENTATION
#include "per_mpi.h"

#define B 64
#define SLOTS 4

typedef struct opts {
  double seconds, warm, work_us;
  uint32_t item, send;
} opts;

static int me, W;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* An environment step: work_us of arithmetic, then the item. */
static void env_step(const opts *o, unsigned char *item, uint64_t k) {
  double t = MPI_Wtime(), x = (double)k;
  volatile double sink;
  while (MPI_Wtime() - t < o->work_us * 1e-6)
    for (int j = 0; j < 64; ++j) x = x * 1.0000001 + 1e-9;
  sink = x;
  (void)sink;
  memset(item, (int)(k & 0xff), o->item);
  memcpy(item, &k, sizeof k);
}

typedef struct result {
  double items_s, steps_s, step_us, waited;
} result;

/* The learner's steps over rb until stop (the learner decides): timed
   after `warm` seconds; the replay rank first drains (feed) each step.
   Returns the learner's count and median. */
static void learner_loop(per_mpi *rb, per_mpi_feed *feed, const opts *o,
                         int learner, result *res, uint64_t *stored) {
  static unsigned char items[B * 1024];
  static per_mpi_id ids[B];
  static float td[B], w[B];
  double t0 = MPI_Wtime(), t_start = 0, *times = NULL;
  long cap = 1 << 20, n = 0, k;
  int phase = 0; /* 0 warm-up, 1 timed, 2 stop */
  uint64_t added0 = 0, added;
  if (learner) times = (double *)malloc((size_t)cap * sizeof *times);
  for (;;) {
    int64_t mine[2], all[2];
    double t;
    if (feed && feed->nsrc > 0)
      per_mpi_feed_drain(feed, &rb->shard, 64, 0, NULL);
    if (learner) {
      double now = MPI_Wtime() - t0;
      phase = now < o->warm ? 0 : now < o->warm + o->seconds ? 1 : 2;
    }
    mine[0] = learner ? phase : 0;
    mine[1] = learner ? 0 : (int64_t)rb->shard.added;
    MPI_Allreduce(mine, all, 2, MPI_INT64_T, MPI_SUM, rb->comm);
    added = (uint64_t)all[1];
    if (all[0] == 1 && t_start == 0) {
      t_start = MPI_Wtime();
      added0 = added;
    }
    if (all[0] == 2) break;
    if (per_mpi_size(rb) < B) continue;
    t = MPI_Wtime();
    if (per_mpi_sample(rb, B, 0, NULL, learner ? items : NULL,
                       learner ? ids : NULL, learner ? w : NULL) != PER_OK)
      MPI_Abort(MPI_COMM_WORLD, 1);
    for (k = 0; k < B; ++k) td[k] = 0.5f + (float)(k % 7);
    if (per_mpi_update(rb, learner ? ids : NULL, learner ? td : NULL,
                       learner ? B : 0, NULL) != PER_OK)
      MPI_Abort(MPI_COMM_WORLD, 1);
    if (learner && all[0] == 1 && n < cap) times[n++] = MPI_Wtime() - t;
  }
  if (learner) {
    double dt = MPI_Wtime() - t_start;
    qsort(times, (size_t)n, sizeof *times, cmp_double);
    res->items_s = (double)(added - added0) / dt;
    res->steps_s = (double)n / dt;
    res->step_us = n ? times[n / 2] * 1e6 : 0;
    free(times);
  }
  *stored = added;
}

int main(int argc, char **argv) {
  opts o = {2.0, 0.5, 20.0, 64, 8};
  const char *csv = NULL;
  int quick = 0, i, K, mode;
  per_config cfg;
  unsigned char *item, *batch;
  result res[2];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  for (i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
      o.seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--work") && i + 1 < argc)
      o.work_us = atof(argv[++i]);
    else if (!strcmp(argv[i], "--send") && i + 1 < argc)
      o.send = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
    else {
      if (me == 0)
        fprintf(stderr, "usage: mpirun -np K+2 bench_feed [--seconds S] "
                        "[--work US] [--send N] [--csv FILE] [--quick]\n");
      MPI_Finalize();
      return 2;
    }
  }
  if (quick) o.seconds = 0.2, o.warm = 0.05;
  if (W < 3 || o.send < 1 || o.send > 1024 || !(o.seconds > 0)) {
    if (me == 0) fprintf(stderr, "bench_feed: needs 3 ranks or more\n");
    MPI_Finalize();
    return 2;
  }
  K = W - 2;
  item = (unsigned char *)malloc(o.item);
  batch = (unsigned char *)malloc((size_t)o.send * o.item);
  cfg = per_config_default(1u << 20, o.item);
  memset(res, 0, sizeof res);
  for (mode = 0; mode < 2; ++mode) {
    uint64_t k = 0, stored = 0;
    long waits = 0, sends = 0, all_waits = 0, all_sends = 0;
    if (mode == 0) { /* lockstep: every rank in the per_mpi */
      per_mpi rb;
      double t0 = MPI_Wtime();
      int phase = 0;
      if (per_mpi_init(&rb, MPI_COMM_WORLD, &cfg, NULL) != PER_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
      /* rounds: actors step and add, then one sample and update; the
         learner times it (rank 1 holds nothing here, as the learner) */
      {
        static unsigned char items[B * 1024];
        static per_mpi_id ids[B];
        static float td[B], w[B];
        double t_start = 0, *times = NULL;
        long cap = 1 << 20, n = 0;
        uint64_t added0 = 0;
        int j;
        if (me == 0) times = (double *)malloc((size_t)cap * sizeof *times);
        for (;;) {
          int64_t mine[2], all[2];
          double t;
          if (me >= 2)
            for (j = 0; j < (int)o.send; ++j) {
              env_step(&o, item, k++);
              per_buffer_add(&rb.shard, item);
            }
          if (me == 0) {
            double now = MPI_Wtime() - t0;
            phase = now < o.warm ? 0 : now < o.warm + o.seconds ? 1 : 2;
          }
          mine[0] = me == 0 ? phase : 0;
          mine[1] = (int64_t)rb.shard.added;
          MPI_Allreduce(mine, all, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
          if (all[0] == 1 && t_start == 0) {
            t_start = MPI_Wtime();
            added0 = (uint64_t)all[1];
          }
          if (all[0] == 2) {
            stored = (uint64_t)all[1];
            break;
          }
          t = MPI_Wtime();
          if (per_mpi_sample(&rb, B, 0, NULL, me == 0 ? items : NULL,
                             me == 0 ? ids : NULL,
                             me == 0 ? w : NULL) != PER_OK)
            MPI_Abort(MPI_COMM_WORLD, 1);
          for (j = 0; j < B; ++j) td[j] = 0.5f + (float)(j % 7);
          if (per_mpi_update(&rb, me == 0 ? ids : NULL, me == 0 ? td : NULL,
                             me == 0 ? B : 0, NULL) != PER_OK)
            MPI_Abort(MPI_COMM_WORLD, 1);
          if (me == 0 && all[0] == 1 && n < cap) times[n++] = MPI_Wtime() - t;
        }
        if (me == 0) {
          double dt = MPI_Wtime() - t_start;
          qsort(times, (size_t)n, sizeof *times, cmp_double);
          res[0].items_s = (double)(stored - added0) / dt;
          res[0].steps_s = (double)n / dt;
          res[0].step_us = n ? times[n / 2] * 1e6 : 0;
          free(times);
        }
      }
      per_mpi_free(&rb);
    } else { /* the feed: actors outside the per_mpi */
      MPI_Comm rcomm;
      per_mpi_feed f;
      per_mpi rb;
      int role = me == 0 ? 0 : me == 1 ? 1 : 2, stop = 0;
      MPI_Request req = MPI_REQUEST_NULL;
      MPI_Comm_split(MPI_COMM_WORLD, role < 2 ? 0 : MPI_UNDEFINED, me, &rcomm);
      if (per_mpi_feed_init(&f, MPI_COMM_WORLD,
                            role == 2 ? 1 : PER_MPI_FEED_NONE, o.item, o.send,
                            SLOTS, NULL) != PER_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
      if (role == 2) {
        /* the stop comes from the learner as one message */
        MPI_Irecv(&stop, 1, MPI_INT, 0, 77, MPI_COMM_WORLD, &req);
        while (!stop) {
          int done = 0, j;
          for (j = 0; j < (int)o.send; ++j)
            env_step(&o, batch + (size_t)j * o.item, k++);
          per_mpi_feed_send(&f, batch, o.send, NULL, NULL);
          MPI_Test(&req, &done, MPI_STATUS_IGNORE);
          if (done) break;
        }
        per_mpi_feed_close(&f);
      } else {
        if (per_mpi_init(&rb, rcomm, &cfg, NULL) != PER_OK)
          MPI_Abort(MPI_COMM_WORLD, 1);
        learner_loop(&rb, &f, &o, me == 0, &res[1], &stored);
        if (me == 0) {
          int one = 1, a;
          for (a = 2; a < W; ++a)
            MPI_Send(&one, 1, MPI_INT, a, 77, MPI_COMM_WORLD);
        }
        while (!per_mpi_feed_done(&f))
          per_mpi_feed_drain(&f, &rb.shard, 1024, 0, NULL);
        per_mpi_free(&rb);
        MPI_Comm_free(&rcomm);
      }
      waits = (long)f.waits;
      sends = role == 2 ? (long)f.msgs : 0;
      MPI_Reduce(&waits, &all_waits, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
      MPI_Reduce(&sends, &all_sends, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
      if (me == 0)
        res[1].waited = all_sends ? (double)all_waits / (double)all_sends : 0;
      per_mpi_feed_free(&f);
    }
    (void)stored;
  }
  if (me == 0) {
    static const char *name[2] = {"lockstep", "feed"};
    for (mode = 0; mode < 2; ++mode)
      printf("K %d  work %.0f us  send %u  %-8s  items/s %9.0f  learner "
             "steps/s %7.0f  step %7.1f us  sends waited %5.1f%%\n",
             K, o.work_us, o.send, name[mode], res[mode].items_s,
             res[mode].steps_s, res[mode].step_us, 100 * res[mode].waited);
    if (csv) {
      FILE *fp = fopen(csv, "a");
      if (fp) {
        for (mode = 0; mode < 2; ++mode)
          fprintf(fp, "%d,%.1f,%u,%s,%.0f,%.0f,%.2f,%.4f\n", K, o.work_us,
                  o.send, name[mode], res[mode].items_s, res[mode].steps_s,
                  res[mode].step_us, res[mode].waited);
        fclose(fp);
      }
    }
  }
  free(item);
  free(batch);
  MPI_Finalize();
  return 0;
}
