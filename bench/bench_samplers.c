/* bench_samplers.c - per.h's samplers against textbook baselines, in one
   process, on the same inputs, interleaved (see bench_common.h).

   Ops:
     swap     uniform without replacement, k = 1024 of n = 64,000:
              per_swap_sample (partial Fisher-Yates over a permutation kept
              between batches) vs a rejection sampler with a hash set (draw
              uniformly, keep first occurrences; a fresh 4096-slot table per
              batch) - what CPython's random.sample does for these n and k.
     cat      categorical without replacement, k = 1024 of N = 10^8 leaves:
              per_cat_sample vs zero-and-restore on the classic float32 tree.
     iid      categorical with replacement, k = 1024 of N = 10^8:
              per_tree_sample_iid vs k classic descents.
     threads  one stratified batch of B split over 2 pthreads with
              per_tree_sample_strata vs the same batch on 1 thread, for
              N in {2^16, 10^6, 2^24}, B in {1024, 4096}; the two results
              are compared (they must be identical). The threads meet twice
              per batch, spinning on two atomic counters (--barrier: at
              pthread barriers); that cost is included.
   Printed per batch (microseconds) and per item (ns), with the ratio
   baseline / per.h (for threads: 1 thread / 2 threads, the speed-up).

   Checks (never timed): indices valid, distinct where promised, values
   equal to the leaves, the 2-thread batch identical to the 1-thread one;
   with --quick also the tree unchanged by per_cat_sample. Exit status 0
   only when every check passes. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <pthread.h>

#define PER_IMPLEMENTATION
#include "per.h"

#include "bench_common.h"

static const char *usage =
    "usage: bench_samplers [options]\n"
    "  per.h's samplers vs textbook baselines. ops: swap, cat, iid, threads\n"
    "  --n LIST applies to cat and iid (default 1e8), --b LIST is k for\n"
    "  swap, cat and iid (default 1024); also:\n"
    "  --swap-n N       population of the uniform sampler (default 64000)\n"
    "  --threads-n LIST tree sizes of the 2-thread run (default "
    "2^16,1e6,2^24)\n"
    "  --threads-b LIST batch sizes of the 2-thread run (default 1024,4096)\n"
    "  --barrier        2-thread hand-off by pthread barriers instead of\n"
    "                   spinning on atomics (the default)\n";

static uint64_t swap_n = 64000;
static uint64_t thr_n[BC_MAX_LIST], thr_b[BC_MAX_LIST];
static int thr_nn = 0, thr_nb = 0;
static int thr_spin = 1;

static int extra_opt(const char *opt, const char *val, int *bad) {
  if (strcmp(opt, "--swap-n") == 0) {
    const char *e;
    if (!val || (swap_n = bc_parse_num(val, &e)) == 0 || *e ||
        swap_n > PER_MAX_CAPACITY)
      *bad = 1;
    return 1;
  }
  if (strcmp(opt, "--barrier") == 0) {
    thr_spin = 0;
    return 2;
  }
  if (strcmp(opt, "--threads-n") == 0) {
    if (!val || !bc_parse_list(val, thr_n, &thr_nn)) *bad = 1;
    return 1;
  }
  if (strcmp(opt, "--threads-b") == 0) {
    if (!val || !bc_parse_list(val, thr_b, &thr_nb)) *bad = 1;
    return 1;
  }
  return 0;
}

static int failures = 0;

static void fail(const char *op, const char *what, uint64_t n, uint64_t k) {
  fprintf(stderr, "CHECK FAILED (%s, N=%llu, k=%llu): %s\n", op,
          (unsigned long long)n, (unsigned long long)k, what);
  ++failures;
}

static void report(FILE *csv, const char *op, uint64_t n, uint64_t k,
                   const bc_result *r, const char *a_name, const char *b_name) {
  printf("%-8s %10llu %5llu  %10.2f %8.2f  %10.2f %8.2f", op,
         (unsigned long long)n, (unsigned long long)k,
         r->a_ns * (double)k / 1e3, r->a_ns, r->b_ns * (double)k / 1e3,
         r->b_ns);
  bc_print_ratio(r);
  fflush(stdout);
  bc_csv_row(csv, op, n, k, r, (double)k, a_name, b_name);
}

/* xorshift64*: the baselines' own small generator. */
static uint64_t xs_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Distinct and below n? `stamp` has n entries, `mark` changes every call. */
static int distinct_below(const uint32_t *v, uint32_t k, uint32_t n,
                          uint32_t *stamp, uint32_t mark) {
  uint32_t i;
  for (i = 0; i < k; ++i) {
    if (v[i] >= n || stamp[v[i]] == mark) return 0;
    stamp[v[i]] = mark;
  }
  return 1;
}

/* ---- uniform without replacement --------------------------------------- */

typedef struct swap_ctx {
  uint32_t n, k;
  per_swap sw;
  per_rng rng;
  uint32_t *out_p, *out_b;
  per_status err;
  /* baseline: rejection with a hash set */
  uint32_t *slot; /* 2^bits slots, key + 1, 0 = empty */
  uint32_t bits;
  uint64_t xs;
} swap_ctx;

static void k_swap_per(void *p, uint64_t iters) {
  swap_ctx *c = (swap_ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    per_status s = per_swap_sample(&c->sw, &c->rng, c->k, c->out_p);
    if (s != PER_OK) c->err = s;
  }
}

/* k distinct uniform indices of [0, n): draw, keep the new ones. */
static void hashset_sample(swap_ctx *c) {
  uint32_t mask = (1u << c->bits) - 1u, m = 0;
  memset(c->slot, 0, ((size_t)1 << c->bits) * sizeof(uint32_t));
  while (m < c->k) {
    uint32_t x = (uint32_t)(((xs_next(&c->xs) >> 32) * c->n) >> 32);
    uint32_t h = (x * 2654435761u) >> (32 - c->bits);
    while (c->slot[h] != 0 && c->slot[h] != x + 1) h = (h + 1) & mask;
    if (c->slot[h] == 0) {
      c->slot[h] = x + 1;
      c->out_b[m++] = x;
    }
  }
}

static void k_swap_base(void *p, uint64_t iters) {
  swap_ctx *c = (swap_ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) hashset_sample(c);
}

static void run_swap(const bc_opts *o, FILE *csv, uint32_t n, uint32_t k) {
  swap_ctx c;
  bc_result r;
  uint32_t *stamp;
  memset(&c, 0, sizeof c);
  c.n = n;
  c.k = k;
  if (k > n) {
    fprintf(stderr, "swap: k=%u > n=%u, skipped\n", k, n);
    return;
  }
  if (per_swap_init(&c.sw, n, NULL) != PER_OK ||
      per_swap_grow(&c.sw, n) != PER_OK) {
    fail("swap", "per_swap_init", n, k);
    return;
  }
  per_rng_init(&c.rng, o->seed);
  c.xs = o->seed * 0x9E3779B97F4A7C15ull + 1;
  c.bits = 1;
  while ((1u << c.bits) < 4u * k) ++c.bits; /* load factor <= 1/4 */
  c.slot = (uint32_t *)bc_xmalloc(((size_t)1 << c.bits) * sizeof(uint32_t));
  c.out_p = (uint32_t *)bc_xmalloc((size_t)k * sizeof(uint32_t));
  c.out_b = (uint32_t *)bc_xmalloc((size_t)k * sizeof(uint32_t));
  r = bc_measure(o, o->side != 2 ? k_swap_per : NULL, &c,
                 o->side != 1 ? k_swap_base : NULL, &c, k);
  report(csv, "swap", n, k, &r, "per.h", "hashset");
  stamp = (uint32_t *)calloc(n, sizeof(uint32_t));
  if (!stamp) exit(2);
  if (c.err != PER_OK) fail("swap", per_status_str(c.err), n, k);
  if (o->side != 2 && !distinct_below(c.out_p, k, n, stamp, 1))
    fail("swap", "per.h indices not distinct or out of range", n, k);
  if (o->side != 1 && !distinct_below(c.out_b, k, n, stamp, 2))
    fail("swap", "baseline indices not distinct or out of range", n, k);
  free(stamp);
  free(c.slot);
  free(c.out_p);
  free(c.out_b);
  per_swap_free(&c.sw);
}

/* ---- categorical, with and without replacement ------------------------- */

typedef struct cat_ctx {
  uint32_t n, k;
  int have_per, have_classic;
  per_tree t;
  void *per_mem;
  per_cat cat;
  per_rng rng;
  classic_tree ct;
  uint32_t *idx_p, *idx_c;
  per_real *val_p;
  float *val_c;
  per_status err;
} cat_ctx;

static void k_cat_per(void *p, uint64_t iters) {
  cat_ctx *c = (cat_ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    per_status s =
        per_cat_sample(&c->cat, &c->t, &c->rng, c->k, c->idx_p, c->val_p);
    if (s != PER_OK) c->err = s;
  }
}

static void k_cat_classic(void *p, uint64_t iters) {
  cat_ctx *c = (cat_ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i)
    classic_sample_wor(&c->ct, c->k, c->idx_c, c->val_c);
}

static void k_iid_per(void *p, uint64_t iters) {
  cat_ctx *c = (cat_ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    per_status s =
        per_tree_sample_iid(&c->t, &c->rng, c->k, c->idx_p, c->val_p);
    if (s != PER_OK) c->err = s;
  }
}

static void k_iid_classic(void *p, uint64_t iters) {
  cat_ctx *c = (cat_ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i)
    classic_sample_iid(&c->ct, c->k, c->idx_c, c->val_c);
}

/* Both trees over the same N leaves in (0, 1]. */
static void cat_setup(cat_ctx *c, const bc_opts *o, uint32_t n, uint32_t maxk) {
  memset(c, 0, sizeof *c);
  c->n = n;
  c->have_per = o->side != 2;
  c->have_classic = o->side != 1;
  bc_build_trees(o, n, c->have_per, c->have_classic, &c->t, &c->per_mem,
                 &c->ct);
  if (c->have_per) {
    per_status st = per_cat_init(&c->cat, maxk, NULL);
    if (st != PER_OK) {
      fprintf(stderr, "per_cat of %u: %s\n", maxk, per_status_str(st));
      exit(2);
    }
    per_rng_init(&c->rng, o->seed);
  }
  c->idx_p = (uint32_t *)bc_xmalloc((size_t)maxk * sizeof(uint32_t));
  c->idx_c = (uint32_t *)bc_xmalloc((size_t)maxk * sizeof(uint32_t));
  c->val_p = (per_real *)bc_xmalloc((size_t)maxk * sizeof(per_real));
  c->val_c = (float *)bc_xmalloc((size_t)maxk * sizeof(float));
}

static void cat_teardown(cat_ctx *c) {
  per_cat_free(&c->cat);
  per_tree_free(&c->t);
  free(c->per_mem);
  if (c->have_classic) classic_free(&c->ct);
  free(c->idx_p);
  free(c->idx_c);
  free(c->val_p);
  free(c->val_c);
}

/* per.h's picks: valid, each value that leaf's value and > 0, distinct when
   `wor`. The baseline's: valid; its repeats (zero-and-restore in float can
   pick a zeroed leaf again) are counted and printed, not failed. */
static void cat_check(cat_ctx *c, const char *op, int wor, uint32_t *stamp,
                      uint32_t *mark) {
  uint32_t i;
  if (c->err != PER_OK) fail(op, per_status_str(c->err), c->n, c->k);
  c->err = PER_OK;
  if (c->have_per) {
    for (i = 0; i < c->k; ++i)
      if (c->idx_p[i] >= c->n || !(c->val_p[i] > 0) ||
          c->val_p[i] != per_tree_get(&c->t, c->idx_p[i])) {
        fail(op, "per.h picked an invalid leaf", c->n, c->k);
        break;
      }
    if (wor && !distinct_below(c->idx_p, c->k, c->n, stamp, ++*mark))
      fail(op, "per.h picks not distinct", c->n, c->k);
  }
  if (c->have_classic) {
    uint32_t rep = 0;
    ++*mark;
    for (i = 0; i < c->k; ++i) {
      if (c->idx_c[i] >= c->n) {
        fail(op, "classic picked an invalid leaf", c->n, c->k);
        break;
      }
      rep += stamp[c->idx_c[i]] == *mark;
      stamp[c->idx_c[i]] = *mark;
    }
    if (wor && rep)
      printf("  (classic zero-and-restore repeated %u of %u picks in its last "
             "batch)\n",
             rep, c->k);
  }
}

static void run_cat(const bc_opts *o, FILE *csv, uint32_t n, const uint64_t *ks,
                    int nk) {
  cat_ctx c;
  uint32_t maxk = 0, mark = 0, *stamp;
  int j;
  for (j = 0; j < nk; ++j)
    if (ks[j] > maxk) maxk = (uint32_t)ks[j];
  cat_setup(&c, o, n, maxk);
  stamp = (uint32_t *)calloc(n, sizeof(uint32_t));
  if (!stamp) exit(2);
  for (j = 0; j < nk; ++j) {
    bc_result r;
    c.k = (uint32_t)ks[j];
    if (c.k > n) continue;
    if (bc_want_op(o, "cat")) {
      per_real *copy = NULL;
      size_t bytes = per_tree_bytes(n);
      if (o->quick && c.have_per) {
        copy = (per_real *)bc_xmalloc(bytes);
        memcpy(copy, c.t.node, bytes);
      }
      r = bc_measure(o, c.have_per ? k_cat_per : NULL, &c,
                     c.have_classic ? k_cat_classic : NULL, &c, c.k);
      report(csv, "cat", n, c.k, &r, "per.h", "classic");
      cat_check(&c, "cat", 1, stamp, &mark);
      if (copy) {
        if (memcmp(copy, c.t.node, bytes) != 0)
          fail("cat", "per_cat_sample changed the tree", n, c.k);
        free(copy);
      }
    }
    if (bc_want_op(o, "iid")) {
      r = bc_measure(o, c.have_per ? k_iid_per : NULL, &c,
                     c.have_classic ? k_iid_classic : NULL, &c, c.k);
      report(csv, "iid", n, c.k, &r, "per.h", "classic");
      cat_check(&c, "iid", 0, stamp, &mark);
    }
  }
  free(stamp);
  cat_teardown(&c);
}

/* ---- stratified sampling on 2 threads ---------------------------------- */

typedef struct thr_ctx {
  const per_tree *t;
  uint64_t seed, counter1, counter2;
  uint32_t B, half;
  uint32_t *idx1, *idx2;
  per_real *val1, *val2;
  pthread_barrier_t start, done;
  int quit;
  per_status err, werr;
  int spin;         /* hand-off by spinning on go/ack, not barriers */
  unsigned go, ack; /* batch number posted / finished by the worker */
} thr_ctx;

/* The hand-off: with spin = 1 the two threads meet through two counters
   (release/acquire, GCC/clang atomics) and busy-wait, which costs well
   under a microsecond when both cores are free; barriers (spin = 0) sleep
   in the kernel and cost tens of microseconds on this VM. */
static void thr_post(thr_ctx *c) {
  if (!c->spin) {
    pthread_barrier_wait(&c->start);
    return;
  }
  __atomic_store_n(&c->go, c->go + 1, __ATOMIC_RELEASE);
}

static void thr_wait_done(thr_ctx *c) {
  if (!c->spin) {
    pthread_barrier_wait(&c->done);
    return;
  }
  while (__atomic_load_n(&c->ack, __ATOMIC_ACQUIRE) != c->go) {
  }
}

static void *worker(void *p) {
  thr_ctx *c = (thr_ctx *)p;
  unsigned seen = 0;
  for (;;) {
    per_status s;
    if (c->spin) {
      while (__atomic_load_n(&c->go, __ATOMIC_ACQUIRE) == seen) {
      }
      seen = __atomic_load_n(&c->go, __ATOMIC_ACQUIRE);
    } else {
      pthread_barrier_wait(&c->start);
    }
    if (c->quit) break;
    s = per_tree_sample_strata(c->t, c->seed, c->counter2, c->B, c->half,
                               c->B - c->half, c->idx2 + c->half,
                               c->val2 + c->half);
    if (s != PER_OK) c->werr = s;
    if (c->spin) __atomic_store_n(&c->ack, seen, __ATOMIC_RELEASE);
    else pthread_barrier_wait(&c->done);
  }
  return NULL;
}

static void k_two_threads(void *p, uint64_t iters) {
  thr_ctx *c = (thr_ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    per_status s;
    thr_post(c);
    s = per_tree_sample_strata(c->t, c->seed, c->counter2, c->B, 0, c->half,
                               c->idx2, c->val2);
    if (s != PER_OK) c->err = s;
    thr_wait_done(c);
    c->counter2 += c->B;
  }
}

static void k_one_thread(void *p, uint64_t iters) {
  thr_ctx *c = (thr_ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    per_status s = per_tree_sample_strata(c->t, c->seed, c->counter1, c->B, 0,
                                          c->B, c->idx1, c->val1);
    if (s != PER_OK) c->err = s;
    c->counter1 += c->B;
  }
}

static void run_threads(const bc_opts *o, FILE *csv, uint32_t n,
                        const uint64_t *bs, int nb) {
  per_tree t;
  thr_ctx c;
  pthread_t th;
  uint64_t s = o->seed * 0x100000001B3ull + n;
  uint32_t i, maxB = 0;
  per_real *v = (per_real *)bc_xmalloc((size_t)n * sizeof(per_real));
  void *mem = NULL;
  per_status st;
  int j;
  for (j = 0; j < nb; ++j)
    if (bs[j] > maxB) maxB = (uint32_t)bs[j];
  for (i = 0; i < n; ++i) v[i] = (per_real)bc_prio(&s);
  if (o->huge) {
    mem = bc_big_alloc(per_tree_bytes(n), 1);
    st = per_tree_init_mem(&t, n, mem, per_tree_bytes(n));
  } else {
    st = per_tree_init(&t, n, NULL);
  }
  if (st == PER_OK) st = per_tree_build(&t, v, n);
  free(v);
  if (st != PER_OK) {
    fprintf(stderr, "per.h tree of %u: %s\n", n, per_status_str(st));
    exit(2);
  }
  memset(&c, 0, sizeof c);
  c.t = &t;
  c.seed = o->seed;
  c.spin = thr_spin;
  c.idx1 = (uint32_t *)bc_xmalloc((size_t)maxB * sizeof(uint32_t));
  c.idx2 = (uint32_t *)bc_xmalloc((size_t)maxB * sizeof(uint32_t));
  c.val1 = (per_real *)bc_xmalloc((size_t)maxB * sizeof(per_real));
  c.val2 = (per_real *)bc_xmalloc((size_t)maxB * sizeof(per_real));
  pthread_barrier_init(&c.start, NULL, 2);
  pthread_barrier_init(&c.done, NULL, 2);
  if (pthread_create(&th, NULL, worker, &c) != 0) {
    fprintf(stderr, "pthread_create failed\n");
    exit(2);
  }
  for (j = 0; j < nb; ++j) {
    bc_result r;
    c.B = (uint32_t)bs[j];
    c.half = c.B / 2;
    {
      clockid_t keep = bc_clock;
      bc_clock = CLOCK_MONOTONIC; /* two threads: wall time */
      r = bc_measure(o, k_two_threads, &c, k_one_thread, &c, c.B);
      bc_clock = keep;
    }
    report(csv, "threads", n, c.B, &r, "2 threads", "1 thread");
    /* Same (seed, counter) on both: the batches must be identical. */
    c.counter1 = c.counter2 = 12345;
    k_one_thread(&c, 1);
    k_two_threads(&c, 1);
    if (c.err != PER_OK || c.werr != PER_OK)
      fail("threads", per_status_str(c.err != PER_OK ? c.err : c.werr), n, c.B);
    if (memcmp(c.idx1, c.idx2, (size_t)c.B * sizeof(uint32_t)) != 0 ||
        memcmp(c.val1, c.val2, (size_t)c.B * sizeof(per_real)) != 0)
      fail("threads", "2-thread batch differs from the 1-thread batch", n, c.B);
    for (i = 0; i < c.B; ++i)
      if (c.idx1[i] >= n || !(c.val1[i] > 0)) {
        fail("threads", "invalid leaf", n, c.B);
        break;
      }
  }
  c.quit = 1;
  thr_post(&c);
  pthread_join(th, NULL);
  pthread_barrier_destroy(&c.start);
  pthread_barrier_destroy(&c.done);
  free(c.idx1);
  free(c.idx2);
  free(c.val1);
  free(c.val2);
  per_tree_free(&t);
  free(mem);
}

int main(int argc, char **argv) {
  static const uint64_t def_n[] = {100000000}, quick_n[] = {20000};
  static const uint64_t def_b[] = {1024}, quick_b[] = {256};
  static const uint64_t def_n_thr[] = {65536, 1000000, 16777216};
  static const uint64_t quick_n_thr[] = {4096};
  static const uint64_t def_b_thr[] = {1024, 4096};
  bc_opts o;
  FILE *csv;
  int j;

  if (!bc_parse(&o, argc, argv, usage, extra_opt)) return 2;
  bc_default_list(o.n, &o.nn, o.quick ? quick_n : def_n, 1);
  bc_default_list(o.b, &o.nb, o.quick ? quick_b : def_b, 1);
  if (o.quick && swap_n == 64000) swap_n = 5000;
  bc_default_list(thr_n, &thr_nn, o.quick ? quick_n_thr : def_n_thr,
                  o.quick ? 1 : 3);
  bc_default_list(thr_b, &thr_nb, o.quick ? quick_b : def_b_thr,
                  o.quick ? 1 : 2);
  for (j = 0; j < o.nn; ++j)
    if (o.n[j] > PER_MAX_CAPACITY) return 2;
  for (j = 0; j < thr_nn; ++j)
    if (thr_n[j] > PER_MAX_CAPACITY) return 2;
  for (j = 0; j < o.nb; ++j)
    if (o.b[j] > (1u << 24)) return 2;
  for (j = 0; j < thr_nb; ++j)
    if (thr_b[j] > (1u << 24) || thr_b[j] < 2) return 2;
  csv = bc_csv_open(&o);

  printf("bench_samplers: per.h (PER_REAL=%s) vs textbook baselines\n",
         bc_real_name());
  bc_print_setup(&o, "batches", " (threads: wall clock)");
  printf("baselines: swap = hash-set rejection sampler; cat = zero-and-restore "
         "on the classic float32 tree;\n"
         "           iid = classic descents; threads = the same call on 1 "
         "thread\n");
  printf("%-8s %10s %5s  %10s %8s  %10s %8s  %7s\n", "op", "N", "k/B",
         "per us/bat", "ns/item", "base us/bat", "ns/item", "base/per");

  if (bc_want_op(&o, "swap"))
    for (j = 0; j < o.nb; ++j)
      run_swap(&o, csv, (uint32_t)swap_n, (uint32_t)o.b[j]);
  if (bc_want_op(&o, "cat") || bc_want_op(&o, "iid"))
    for (j = 0; j < o.nn; ++j) run_cat(&o, csv, (uint32_t)o.n[j], o.b, o.nb);
  if (bc_want_op(&o, "threads") && o.side != 2)
    for (j = 0; j < thr_nn; ++j)
      run_threads(&o, csv, (uint32_t)thr_n[j], thr_b, thr_nb);

  return bc_finish(csv, "bench_samplers", failures,
                   "all picks valid and distinct where promised, 2-thread "
                   "batches identical to 1-thread");
}
