/* bench_common.h - timing, statistics, options and CSV output shared by the
   in-process benchmarks. Static functions; include once per program, after
   per.h (it prints per_real values) and with _POSIX_C_SOURCE defined.

   How a figure is measured (bc_measure):
   - each side (per.h and the baseline) gets its own iteration count,
     calibrated so that one timed loop lasts at least --min-time seconds
     (the calibration runs double as warm-up);
   - then --reps timed loops of each side, alternating (A B B A A B ...),
     on the same inputs; the figure is the median of the loops, in ns per
     item, with the minimum and maximum kept for the CSV;
   - the ratio is baseline / per.h: above 1 means per.h is faster.
   With --iters K the calibration is skipped and every loop runs K
   iterations (fixed work, for whole-program timings with hyperfine).
   Loops are timed on CLOCK_MONOTONIC (wall time); --cpu-clock times them on
   CLOCK_THREAD_CPUTIME_ID instead (the thread's own CPU time: time spent
   preempted by other processes of a shared machine does not count, memory
   stalls do). Multi-threaded figures always use wall time. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

/* The compiler flags a program was built with, for its header line (the
   Meson build defines it). */
#ifndef BENCH_CFLAGS
#define BENCH_CFLAGS "(unknown)"
#endif

/* Static helpers, some unused by one program or another. */
#if defined(__GNUC__) || defined(__clang__)
#define BC_FN static __attribute__((unused))
#else
#define BC_FN static
#endif

#define BC_MAX_LIST 32
#define BC_MAX_REPS 101

typedef struct bc_opts {
  int reps;        /* timed loops per side (median of these) */
  double min_time; /* seconds per timed loop */
  uint64_t iters;  /* fixed iterations per loop; 0 = calibrate */
  int quick;       /* smoke test: tiny sizes, a few short loops */
  int side;        /* 0 both, 1 per.h only, 2 baseline only */
  const char *csv; /* write every figure here (NULL: no CSV) */
  const char *ops; /* comma list of ops to run (NULL: all) */
  uint64_t n[BC_MAX_LIST];
  int nn; /* 0: the program's default list */
  uint64_t b[BC_MAX_LIST];
  int nb;
  uint64_t seed;
  int huge; /* 2 MiB-aligned trees with madvise(MADV_HUGEPAGE) */
} bc_opts;

/* A program's own options: return 1 (takes a value) or 2 (a flag) when
   opt is yours, 0 when not; *bad = 1 for a bad value. */
typedef int (*bc_extra_opt)(const char *opt, const char *val, int *bad);

typedef struct bc_result {
  double a_ns, b_ns; /* median ns per item: per.h side, baseline */
  double a_min, a_max, b_min, b_max;
  uint64_t a_iters, b_iters; /* iterations per timed loop */
  int reps;
} bc_result;

/* One timed side: run `iters` iterations of `items` items each. */
typedef void (*bc_kernel)(void *ctx, uint64_t iters);

/* The clock of the timed loops (see above). */
static clockid_t bc_clock = CLOCK_MONOTONIC;

BC_FN double bc_now(void) {
  struct timespec ts;
  clock_gettime(bc_clock, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

BC_FN int bc_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

BC_FN double bc_median(const double *v, int n) {
  double s[BC_MAX_REPS];
  int i;
  if (n <= 0) return 0;
  for (i = 0; i < n; ++i) s[i] = v[i];
  qsort(s, (size_t)n, sizeof s[0], bc_cmp_double);
  return (n & 1) ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* Median, minimum and maximum of v[0..n), n >= 1. */
BC_FN void bc_spread(const double *v, int n, double *med, double *min,
                     double *max) {
  int i;
  *med = bc_median(v, n);
  *min = *max = v[0];
  for (i = 1; i < n; ++i) {
    if (v[i] < *min) *min = v[i];
    if (v[i] > *max) *max = v[i];
  }
}

BC_FN double bc_time(bc_kernel k, void *ctx, uint64_t iters) {
  double t0 = bc_now();
  k(ctx, iters);
  return bc_now() - t0;
}

/* Iterations for one loop of at least min_time seconds. */
BC_FN uint64_t bc_calibrate(bc_kernel k, void *ctx, double min_time) {
  uint64_t iters = 1;
  for (;;) {
    double t = bc_time(k, ctx, iters);
    double want;
    if (t >= min_time) return iters;
    if (t < 1e-6) {
      iters *= 16;
      continue;
    }
    want = (double)iters * min_time * 1.1 / t;
    if (want > 16.0 * (double)iters) want = 16.0 * (double)iters;
    iters = (uint64_t)want + 1;
  }
}

/* bc_measure for more than two sides (bench_peers: per.h and three
   peers). Side s runs k[s] on ctx[s]; a NULL k[s] is not measured and its
   figures are 0. Each side is calibrated on its own, then every round
   times each side once: in order 0, 1, ..., sides - 1 on even rounds and
   in reverse on odd ones, so that no side always runs first or last
   (bc_measure is the case of two sides: A B, B A, ...). Figures in ns
   per item. */
#define BC_MAX_SIDES 8

typedef struct bc_result_n {
  int sides, reps;
  double ns[BC_MAX_SIDES]; /* median ns per item */
  double min[BC_MAX_SIDES], max[BC_MAX_SIDES];
  uint64_t iters[BC_MAX_SIDES]; /* iterations per timed loop */
} bc_result_n;

BC_FN bc_result_n bc_measure_n(const bc_opts *o, int sides, const bc_kernel *k,
                               void *const *ctx, double items) {
  bc_result_n r;
  double t[BC_MAX_SIDES][BC_MAX_REPS];
  int i, j, s, n = o->reps;
  memset(&r, 0, sizeof r);
  if (sides > BC_MAX_SIDES) sides = BC_MAX_SIDES;
  if (n < 1) n = 1;
  if (n > BC_MAX_REPS) n = BC_MAX_REPS;
  r.sides = sides;
  r.reps = n;
  for (s = 0; s < sides; ++s)
    if (k[s])
      r.iters[s] =
          o->iters ? o->iters : bc_calibrate(k[s], ctx[s], o->min_time);
  for (i = 0; i < n; ++i)
    for (j = 0; j < sides; ++j) {
      s = (i & 1) ? sides - 1 - j : j;
      if (k[s]) t[s][i] = bc_time(k[s], ctx[s], r.iters[s]);
    }
  for (s = 0; s < sides; ++s) {
    if (!k[s]) continue;
    for (i = 0; i < n; ++i)
      t[s][i] = t[s][i] * 1e9 / ((double)r.iters[s] * items);
    bc_spread(t[s], n, &r.ns[s], &r.min[s], &r.max[s]);
  }
  return r;
}

/* Measure side a (per.h) against side b (baseline), interleaved: the two
   sides of bc_measure_n. Either kernel may be NULL (then its figures are
   0). items = items per iteration. */
BC_FN bc_result bc_measure(const bc_opts *o, bc_kernel ka, void *ca,
                           bc_kernel kb, void *cb, double items) {
  const bc_kernel k[2] = {ka, kb};
  void *const ctx[2] = {ca, cb};
  bc_result_n m = bc_measure_n(o, 2, k, ctx, items);
  bc_result r;
  r.a_ns = m.ns[0];
  r.a_min = m.min[0];
  r.a_max = m.max[0];
  r.a_iters = m.iters[0];
  r.b_ns = m.ns[1];
  r.b_min = m.min[1];
  r.b_max = m.max[1];
  r.b_iters = m.iters[1];
  r.reps = m.reps;
  if (o->iters) r.a_iters = r.b_iters = o->iters; /* reported for both */
  return r;
}

/* A pool offset after n more values of a pool of `pool`: back to 0 where
   the next n would run past the pool's end. */
BC_FN void bc_pool_next(size_t *off, uint32_t n, size_t pool) {
  *off += n;
  if (*off + n > pool) *off = 0;
}

/* splitmix64: the inputs (indices, values) are drawn with it, once, before
   any timing; neither side's own RNG is involved. */
BC_FN uint64_t bc_split(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* A priority in (0, 1], exactly representable as a float. */
BC_FN float bc_prio(uint64_t *s) {
  return (float)((bc_split(s) >> 40) + 1) * (1.0f / 16777216.0f);
}

/* Uniform in [0, n). */
BC_FN uint32_t bc_below(uint64_t *s, uint32_t n) {
  return (uint32_t)(((bc_split(s) >> 32) * (uint64_t)n) >> 32);
}

/* The (index, value) pool of the update and add inputs: enough pairs for
   batches up to max_b that batches do not repeat within a short loop. */
BC_FN size_t bc_pool_size(uint32_t max_b) {
  size_t pool = (size_t)max_b * 32;
  return pool < 65536 ? 65536 : pool;
}

/* Fills a pool of `pool` pairs from the generator s, each an index in
   [0, n) then a bc_prio value: val gets it as per_real, valf (when not
   NULL) as the float it was drawn as. Every benchmark that fills its pool
   this way from the same state gets the same pairs. */
BC_FN void bc_fill_pool(uint64_t *s, uint32_t n, size_t pool, uint32_t *idx,
                        per_real *val, float *valf) {
  size_t i;
  for (i = 0; i < pool; ++i) {
    float v;
    idx[i] = bc_below(s, n);
    v = bc_prio(s);
    val[i] = (per_real)v;
    if (valf) valf[i] = v;
  }
}

BC_FN void *bc_xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
    exit(2);
  }
  return p;
}

/* Zeroed memory for a tree. With huge = 1: 2 MiB aligned, size rounded up
   to 2 MiB, and madvise(MADV_HUGEPAGE) so that transparent huge pages back
   it even when /sys/kernel/mm/transparent_hugepage/enabled is "madvise". */
BC_FN void *bc_big_alloc(size_t bytes, int huge) {
  void *p = NULL;
  size_t round = (size_t)2 << 20;
  if (!huge) {
    p = bc_xmalloc(bytes);
  } else {
    size_t sz = (bytes + round - 1) / round * round;
    if (posix_memalign(&p, round, sz) != 0) p = NULL;
    if (!p) {
      fprintf(stderr, "out of memory (%zu bytes)\n", sz);
      exit(2);
    }
#ifdef MADV_HUGEPAGE
    madvise(p, sz, MADV_HUGEPAGE);
#endif
  }
  memset(p, 0, bytes);
  return p;
}

/* "65536", "1e6", "2^24", "64000" -> value; 0 on a parse error. */
BC_FN uint64_t bc_parse_num(const char *s, const char **end) {
  char *e;
  if (s[0] == '2' && s[1] == '^') {
    unsigned long p = strtoul(s + 2, &e, 10);
    *end = e;
    return (e == s + 2 || p > 40) ? 0 : (uint64_t)1 << p;
  } else {
    double d = strtod(s, &e);
    *end = e;
    if (e == s || !(d >= 1) || d > 1e12 || d != floor(d)) return 0;
    return (uint64_t)d;
  }
}

BC_FN int bc_parse_list(const char *s, uint64_t *out, int *n) {
  *n = 0;
  while (*s) {
    const char *e;
    uint64_t v = bc_parse_num(s, &e);
    if (v == 0 || *n >= BC_MAX_LIST) return 0;
    out[(*n)++] = v;
    if (*e == ',') ++e;
    else if (*e) return 0;
    s = e;
  }
  return *n > 0;
}

/* A list option left unset (*n == 0) takes its default d[0..nd). */
BC_FN void bc_default_list(uint64_t *v, int *n, const uint64_t *d, int nd) {
  int j;
  if (*n != 0) return;
  for (j = 0; j < nd; ++j) v[j] = d[j];
  *n = nd;
}

/* Is op selected by --op (a comma list; NULL or "all" means every op)? */
BC_FN int bc_want_op(const bc_opts *o, const char *op) {
  size_t len = strlen(op);
  const char *p = o->ops;
  if (!p || strcmp(p, "all") == 0) return 1;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == len && strncmp(p, op, len) == 0) return 1;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

static const char *bc_common_usage =
    "  --op LIST        only these ops (comma separated; default all)\n"
    "  --n LIST         sizes, e.g. 65536,1e6,2^24 (default: the target "
    "sizes)\n"
    "  --b LIST         batch sizes, e.g. 256,1024,4096\n"
    "  --reps R         timed loops per side, median reported (default 5)\n"
    "  --min-time S     seconds per timed loop (default 0.2)\n"
    "  --iters K        fixed iterations per loop instead of --min-time\n"
    "  --impl WHO       both (default), per (per.h only), base (baseline "
    "only)\n"
    "  --csv FILE       write every figure to FILE\n"
    "  --seed S         seed of the inputs (default 1)\n"
    "  --huge           trees in 2 MiB-aligned memory with MADV_HUGEPAGE\n"
    "  --cpu-clock      time the thread's CPU time instead of wall time\n"
    "  --quick          smoke test: tiny sizes, short loops, checks only\n";

/* Parse the options every benchmark shares; 0 on error (message printed). */
BC_FN int bc_parse(bc_opts *o, int argc, char **argv, const char *usage,
                   bc_extra_opt extra) {
  int i;
  memset(o, 0, sizeof *o);
  o->reps = 5;
  o->min_time = 0.2;
  o->seed = 1;
  for (i = 1; i < argc; ++i) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int takes = 1;
    int bad = 0, used = extra ? extra(a, v, &bad) : 0;
    if (bad) goto bad;
    if (used) {
      takes = used == 1;
    } else if (strcmp(a, "--quick") == 0) {
      o->quick = 1;
      takes = 0;
    } else if (strcmp(a, "--huge") == 0) {
      o->huge = 1;
      takes = 0;
    } else if (strcmp(a, "--cpu-clock") == 0) {
      bc_clock = CLOCK_THREAD_CPUTIME_ID;
      takes = 0;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      printf("%s%s", usage, bc_common_usage);
      exit(0);
    } else if (!v) {
      fprintf(stderr, "%s: missing value or unknown option\n", a);
      return 0;
    } else if (strcmp(a, "--op") == 0) {
      o->ops = v;
    } else if (strcmp(a, "--n") == 0) {
      if (!bc_parse_list(v, o->n, &o->nn)) goto bad;
    } else if (strcmp(a, "--b") == 0) {
      if (!bc_parse_list(v, o->b, &o->nb)) goto bad;
    } else if (strcmp(a, "--reps") == 0) {
      o->reps = atoi(v);
      if (o->reps < 1 || o->reps > BC_MAX_REPS) goto bad;
    } else if (strcmp(a, "--min-time") == 0) {
      o->min_time = strtod(v, NULL);
      if (!(o->min_time >= 0) || o->min_time > 60) goto bad;
    } else if (strcmp(a, "--iters") == 0) {
      o->iters = strtoull(v, NULL, 10);
      if (o->iters == 0) goto bad;
    } else if (strcmp(a, "--impl") == 0) {
      if (strcmp(v, "both") == 0) o->side = 0;
      else if (strcmp(v, "per") == 0) o->side = 1;
      else if (strcmp(v, "base") == 0 || strcmp(v, "classic") == 0) o->side = 2;
      else goto bad;
    } else if (strcmp(a, "--csv") == 0) {
      o->csv = v;
    } else if (strcmp(a, "--seed") == 0) {
      o->seed = strtoull(v, NULL, 10);
    } else {
      fprintf(stderr, "unknown option %s (try --help)\n", a);
      return 0;
    }
    i += takes;
    continue;
  bad:
    fprintf(stderr, "bad value for %s: %s\n", a, v);
    return 0;
  }
  if (o->quick) {
    o->reps = o->reps < 3 ? o->reps : 3;
    o->min_time = 0.002;
  }
  return 1;
}

/* The N and B lists of o within what the benchmarks take (N at most
   PER_MAX_CAPACITY, B at most 2^24), *max_b the largest B. Returns 0
   after a message on stderr when one is out of range. */
BC_FN int bc_check_sizes(const bc_opts *o, uint32_t *max_b) {
  int j;
  *max_b = 0;
  for (j = 0; j < o->nn; ++j)
    if (o->n[j] > PER_MAX_CAPACITY) {
      fprintf(stderr, "N too large\n");
      return 0;
    }
  for (j = 0; j < o->nb; ++j) {
    if (o->b[j] > (1u << 24)) {
      fprintf(stderr, "B too large\n");
      return 0;
    }
    if (o->b[j] > *max_b) *max_b = (uint32_t)o->b[j];
  }
  return 1;
}

/* iters stratified batches of B from t (per_tree_sample), the kernel of
   every per.h sample figure. Returns PER_OK, or the last failure. */
BC_FN per_status bc_sample_per(per_tree *t, per_rng *rng, uint32_t B,
                               uint32_t *idx, per_real *val, uint64_t iters) {
  per_status err = PER_OK;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    per_status s = per_tree_sample(t, rng, B, idx, val);
    if (s != PER_OK) err = s;
  }
  return err;
}

/* iters batch updates of B pairs from the pool (per_tree_set_batch), each
   batch the next B pairs from *off on (bc_pool_next), the kernel of the
   per.h update figures of bench_tree and bench_memory. Returns PER_OK, or
   the last failure. */
BC_FN per_status bc_update_per(per_tree *t, const uint32_t *pool_idx,
                               const per_real *pool_val, size_t pool,
                               size_t *off, uint32_t B, uint64_t iters) {
  per_status err = PER_OK;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    per_status s = per_tree_set_batch(t, pool_idx + *off, pool_val + *off, B);
    if (s != PER_OK) err = s;
    bc_pool_next(off, B, pool);
  }
  return err;
}

BC_FN const char *bc_real_name(void) {
  return sizeof(per_real) == sizeof(float) ? "float" : "double";
}

BC_FN FILE *bc_csv_open(const bc_opts *o) {
  FILE *f;
  if (!o->csv) return NULL;
  f = fopen(o->csv, "w");
  if (!f) {
    fprintf(stderr, "cannot write %s: %s\n", o->csv, strerror(errno));
    exit(2);
  }
  fprintf(f, "real,op,n,b,per_ns,base_ns,ratio,per_batch_ns,base_batch_ns,"
             "per_min,per_max,base_min,base_max,reps,per_iters,base_iters,"
             "per_name,base_name\n");
  return f;
}

/* One CSV row. b = 0 means "no batch" (add); batch figures are then per
   item. */
BC_FN void bc_csv_row(FILE *f, const char *op, uint64_t n, uint64_t b,
                      const bc_result *r, double items_per_batch,
                      const char *a_name, const char *b_name) {
  double ratio = (r->a_ns > 0 && r->b_ns > 0) ? r->b_ns / r->a_ns : 0;
  if (!f) return;
  fprintf(f,
          "%s,%s,%llu,%llu,%.4f,%.4f,%.4f,%.1f,%.1f,%.4f,%.4f,%.4f,%.4f,%d,"
          "%llu,%llu,%s,%s\n",
          bc_real_name(), op, (unsigned long long)n, (unsigned long long)b,
          r->a_ns, r->b_ns, ratio, r->a_ns * items_per_batch,
          r->b_ns * items_per_batch, r->a_min, r->a_max, r->b_min, r->b_max,
          r->reps, (unsigned long long)r->a_iters,
          (unsigned long long)r->b_iters, a_name, b_name);
  fflush(f);
}

/* The end of a program: the CSV closed, then the failed checks counted
   on stderr, or `passed` (what every check established) on stdout.
   Returns the exit status. */
BC_FN int bc_finish(FILE *csv, const char *prog, int failures,
                    const char *passed) {
  if (csv) fclose(csv);
  if (failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", prog, failures);
    return 1;
  }
  printf("checks: %s\n", passed);
  return 0;
}

/* The lines under a program's title: build flags, memory, clock (and
   `clock_note`), then how each figure is measured, in loops of `unit`. */
#ifdef PER_NO_HUGE_PAGES
#define BC_ALLOC "malloc"
#else
#define BC_ALLOC "per.h's default allocator (huge pages for large blocks)"
#endif
BC_FN void bc_print_setup(const bc_opts *o, const char *unit,
                          const char *clock_note) {
  printf("flags: %s; %s; %s%s\n", BENCH_CFLAGS,
         o->huge ? "huge pages (madvise)" : BC_ALLOC,
         bc_clock == CLOCK_MONOTONIC ? "wall clock" : "thread CPU clock",
         clock_note);
  if (o->iters)
    printf("median of %d loops of %llu %s per side, interleaved\n", o->reps,
           (unsigned long long)o->iters, unit);
  else
    printf("median of %d loops of >= %.3f s per side, interleaved\n", o->reps,
           o->min_time);
}

BC_FN void bc_print_ratio(const bc_result *r) {
  if (r->a_ns > 0 && r->b_ns > 0) printf("  %6.2fx\n", r->b_ns / r->a_ns);
  else printf("  %7s\n", "-");
}

/* ---- the trees both programs time --------------------------------------- */
#include "classic_tree.h"

/* per.h's tree (when have_per) and the classic tree (when have_classic)
   over the same n leaves in (0, 1], drawn by bc_prio from o->seed and n; in
   2 MiB-aligned huge-page memory with o->huge (*per_mem then holds
   per.h's block, for bc_big_free). Returns the generator's state after the
   leaves, for inputs that follow them. Exits with status 2 when a tree
   cannot be made. */
BC_FN uint64_t bc_build_trees(const bc_opts *o, uint32_t n, int have_per,
                              int have_classic, per_tree *t, void **per_mem,
                              classic_tree *ct) {
  uint64_t s = o->seed * 0x100000001B3ull + n;
  uint32_t i;
  float *leaf = (float *)bc_xmalloc((size_t)n * sizeof(float));
  for (i = 0; i < n; ++i) leaf[i] = bc_prio(&s);
  if (have_per) {
    per_real *v = (per_real *)bc_xmalloc((size_t)n * sizeof(per_real));
    per_status st;
    for (i = 0; i < n; ++i) v[i] = (per_real)leaf[i];
    if (o->huge) {
      size_t bytes = per_tree_bytes(n);
      *per_mem = bc_big_alloc(bytes, 1);
      st = per_tree_init_mem(t, n, *per_mem, bytes);
    } else {
      st = per_tree_init(t, n, NULL);
    }
    if (st == PER_OK) st = per_tree_build(t, v, n);
    if (st != PER_OK) {
      fprintf(stderr, "per.h tree of %u: %s\n", n, per_status_str(st));
      exit(2);
    }
    free(v);
  }
  if (have_classic) {
    if (!classic_init(ct, n, o->seed + 7)) {
      fprintf(stderr, "classic tree of %u: out of memory\n", n);
      exit(2);
    }
    if (o->huge) {
      free(ct->node);
      ct->node =
          (float *)bc_big_alloc((size_t)2 * ct->leaves * sizeof(float), 1);
    }
    classic_build(ct, leaf, n);
  }
  free(leaf);
  return s;
}

#endif /* BENCH_COMMON_H */
