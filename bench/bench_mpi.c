/* bench_mpi.c - per_mpi.h's global sample + update per batch, under
   mpirun -np W (bench/mpi.sh runs W = 1, 2 and 4), against one per_buffer
   holding every rank's items in the same process.

   Every rank fills a shard of N items (random leaves); rank 0 also fills
   one per_buffer of W * N slots with the same leaves and times its
   per_buffer_sample(B) + per_buffer_update(B) while the others wait (the
   baseline, in the same run). Then every round is one per_mpi_sample of B
   to rank 0 and one per_mpi_update of the B TD errors from rank 0, timed
   on rank 0 (wall clock, MPI_Wtime). The time spent inside MPI's
   collectives is measured through the MPI profiling interface: this file
   defines the collectives per_mpi.h calls and forwards each to its PMPI_
   twin, adding the time to a counter. Local time = total - collective.

   Output: one line (and one CSV row with --csv) on rank 0: medians over
   the rounds of the total, collective and local microseconds per batch,
   the single buffer's, and their ratio. No timing is asserted; --quick
   (small sizes) checks that every call succeeds and exits 1 if one
   fails. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_IMPLEMENTATION
#include "per.h"
#define PER_MPI_IMPLEMENTATION
#include "per_mpi.h"

/* ---- time inside MPI's collectives (the profiling interface) ---- */

static double t_coll;

int MPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc,
                  MPI_Datatype rt, MPI_Comm c) {
  double t = PMPI_Wtime();
  int r = PMPI_Allgather(sb, sc, st, rb, rc, rt, c);
  t_coll += PMPI_Wtime() - t;
  return r;
}

int MPI_Allgatherv(const void *sb, int sc, MPI_Datatype st, void *rb,
                   const int rc[], const int rd[], MPI_Datatype rt,
                   MPI_Comm c) {
  double t = PMPI_Wtime();
  int r = PMPI_Allgatherv(sb, sc, st, rb, rc, rd, rt, c);
  t_coll += PMPI_Wtime() - t;
  return r;
}

int MPI_Gatherv(const void *sb, int sc, MPI_Datatype st, void *rb,
                const int rc[], const int rd[], MPI_Datatype rt, int root,
                MPI_Comm c) {
  double t = PMPI_Wtime();
  int r = PMPI_Gatherv(sb, sc, st, rb, rc, rd, rt, root, c);
  t_coll += PMPI_Wtime() - t;
  return r;
}

int MPI_Alltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rc,
                 MPI_Datatype rt, MPI_Comm c) {
  double t = PMPI_Wtime();
  int r = PMPI_Alltoall(sb, sc, st, rb, rc, rt, c);
  t_coll += PMPI_Wtime() - t;
  return r;
}

int MPI_Alltoallv(const void *sb, const int sc[], const int sd[],
                  MPI_Datatype st, void *rb, const int rc[], const int rd[],
                  MPI_Datatype rt, MPI_Comm c) {
  double t = PMPI_Wtime();
  int r = PMPI_Alltoallv(sb, sc, sd, st, rb, rc, rd, rt, c);
  t_coll += PMPI_Wtime() - t;
  return r;
}

int MPI_Allreduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op,
                  MPI_Comm c) {
  double t = PMPI_Wtime();
  int r = PMPI_Allreduce(sb, rb, n, dt, op, c);
  t_coll += PMPI_Wtime() - t;
  return r;
}

/* ---- the benchmark ---- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The TD error of item (rank, slot): the same on every run, so both
   sides hold the same leaves. */
static float td_of(uint32_t rank, uint32_t slot) {
  uint32_t h = (rank * 0x9E3779B9u) ^ (slot * 0x85EBCA6Bu);
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  return (float)(h % 1000u) * 0.01f + 0.01f;
}

/* Add rank r's n items to b (at slots first ..) and give them their
   leaves. Set-up only: the shards' leaves are set with per_buffer_update
   directly, which leaves their max_leaf unagreed; nothing is added
   afterwards, so nothing reads it. */
static int fill(per_buffer *b, uint32_t r, uint32_t n, uint32_t first,
                unsigned char *item) {
  enum { CH = 4096 };
  static uint64_t ids[CH];
  static float td[CH];
  uint32_t j, k;
  for (j = 0; j < n; ++j) {
    memcpy(item, &j, sizeof j);
    if (per_buffer_add(b, item) != PER_OK) return 0;
  }
  for (j = 0; j < n; j += k) {
    for (k = 0; k < CH && j + k < n; ++k) {
      ids[k] = (uint64_t)(first + j + k) | ((uint64_t)1 << 32);
      td[k] = td_of(r, j + k);
    }
    if (per_buffer_update(b, ids, td, k, NULL) != PER_OK) return 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  uint32_t n = 1u << 20, B = 1024, isz = 64, i, r;
  int rounds = 200, warm = 20, quick = 0, me, W, k, ok = 1, all_ok;
  const char *csv = NULL;
  per_config cfg;
  per_mpi m;
  per_mpi_id *ids;
  float *td, *w;
  unsigned char *items, *item;
  double *tot, *coll, *one, t_one = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  for (k = 1; k < argc; ++k) {
    if (!strcmp(argv[k], "--n") && k + 1 < argc)
      n = (uint32_t)strtoul(argv[++k], NULL, 0);
    else if (!strcmp(argv[k], "--batch") && k + 1 < argc)
      B = (uint32_t)strtoul(argv[++k], NULL, 0);
    else if (!strcmp(argv[k], "--item") && k + 1 < argc)
      isz = (uint32_t)strtoul(argv[++k], NULL, 0);
    else if (!strcmp(argv[k], "--rounds") && k + 1 < argc)
      rounds = atoi(argv[++k]);
    else if (!strcmp(argv[k], "--csv") && k + 1 < argc) csv = argv[++k];
    else if (!strcmp(argv[k], "--quick")) quick = 1;
    else {
      if (me == 0)
        fprintf(stderr, "usage: mpirun -np W bench_mpi [--n N (per rank)] "
                        "[--batch B] [--item BYTES] [--rounds R] [--csv FILE] "
                        "[--quick]\n");
      MPI_Finalize();
      return 2;
    }
  }
  if (quick) n = 4096, B = 64, rounds = 10, warm = 2;
  if (n < 1 || B < 1 || isz < 4 || rounds < 1) {
    if (me == 0) fprintf(stderr, "bench_mpi: sizes must be positive\n");
    MPI_Finalize();
    return 2;
  }
  ids = (per_mpi_id *)malloc(B * sizeof *ids);
  td = (float *)malloc(B * sizeof *td);
  w = (float *)malloc(B * sizeof *w);
  items = (unsigned char *)malloc((size_t)B * isz);
  item = (unsigned char *)calloc(1, isz);
  tot = (double *)malloc((size_t)rounds * sizeof *tot);
  coll = (double *)malloc((size_t)rounds * sizeof *coll);
  one = (double *)malloc((size_t)rounds * sizeof *one);
  if (!ids || !td || !w || !items || !item || !tot || !coll || !one) {
    fprintf(stderr, "bench_mpi: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  cfg = per_config_default(n, isz);
  cfg.seed = 7;
  if (per_mpi_init(&m, MPI_COMM_WORLD, &cfg, NULL) != PER_OK) {
    fprintf(stderr, "bench_mpi: per_mpi_init failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  ok &= fill(&m.shard, (uint32_t)me, n, 0, item);

  /* the baseline: one buffer of W * N slots, the same leaves, on rank 0
     while the others wait */
  if (me == 0) {
    per_config c1 = per_config_default(n * (uint32_t)W, isz);
    per_buffer one_buf;
    uint64_t *bid = (uint64_t *)malloc(B * sizeof *bid);
    c1.seed = 7;
    ok &= bid && per_buffer_init(&one_buf, &c1, NULL) == PER_OK;
    for (r = 0; ok && r < (uint32_t)W; ++r)
      ok &= fill(&one_buf, r, n, r * n, item);
    for (k = -warm; ok && k < rounds; ++k) {
      double t = MPI_Wtime();
      ok &= per_buffer_sample(&one_buf, B, NULL, items, bid, w) == PER_OK;
      for (i = 0; i < B; ++i)
        td[i] = td_of((uint32_t)(bid[i] & 0xffffffffu) / n, (uint32_t)k + i);
      ok &= per_buffer_update(&one_buf, bid, td, B, NULL) == PER_OK;
      if (k >= 0) one[k] = (MPI_Wtime() - t) * 1e6;
    }
    if (ok) t_one = median(one, rounds);
    per_buffer_free(&one_buf);
    free(bid);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  /* the sharded replay: sample to rank 0, update from rank 0 */
  for (k = -warm; k < rounds; ++k) {
    double t, c0;
    per_status s;
    MPI_Barrier(MPI_COMM_WORLD);
    c0 = t_coll;
    t = MPI_Wtime();
    s = per_mpi_sample(&m, B, 0, NULL, me == 0 ? items : NULL,
                       me == 0 ? ids : NULL, me == 0 ? w : NULL);
    if (me == 0)
      for (i = 0; i < B; ++i)
        td[i] = td_of((uint32_t)ids[i].rank, (uint32_t)k + i);
    if (s == PER_OK) s = per_mpi_update(&m, ids, td, me == 0 ? B : 0, NULL);
    ok &= s == PER_OK;
    if (k >= 0) {
      tot[k] = (MPI_Wtime() - t) * 1e6;
      coll[k] = (t_coll - c0) * 1e6;
    }
    if (s != PER_OK) break; /* the same status on every rank */
  }
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (me == 0 && all_ok) {
    double *loc = (double *)malloc((size_t)rounds * sizeof *loc);
    double tm, cm, lm;
    for (k = 0; k < rounds && loc; ++k) loc[k] = tot[k] - coll[k];
    tm = median(tot, rounds);
    cm = median(coll, rounds);
    lm = loc ? median(loc, rounds) : 0;
    printf("W %d  N/rank %u  B %u  item %u B: per_mpi %.1f us/batch "
           "(collectives %.1f, local %.1f); one per_buffer of %u: %.1f us; "
           "ratio %.2fx\n",
           W, n, B, isz, tm, cm, lm, n * (uint32_t)W, t_one, tm / t_one);
    if (csv) {
      FILE *f = fopen(csv, "a");
      if (f) {
        fprintf(f, "%d,%u,%u,%u,%d,%.2f,%.2f,%.2f,%.2f\n", W, n, B, isz, rounds,
                tm, cm, lm, t_one);
        fclose(f);
      }
    }
    free(loc);
  }
  if (me == 0 && !all_ok) fprintf(stderr, "bench_mpi: a call failed\n");
  per_mpi_free(&m);
  free(ids);
  free(td);
  free(w);
  free(items);
  free(item);
  free(tot);
  free(coll);
  free(one);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
