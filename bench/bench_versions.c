/* bench_versions.c - this per.h's buffer against another per.h's (an
   earlier release, a commit before a change), in one process, on the same
   inputs, interleaved: the figure a change's speed-up is claimed from.

   The two sides are versions_side.c built against each per.h
   (versions_side.h); bench/versions.sh builds them from a git revision
   and runs this program. The Meson build makes both sides from this
   per.h: its smoke run (--quick --same) checks the plumbing and that the
   two sides agree bit for bit.

   Ops, for N in {2^16, 10^6} and B in {256, 1024, 4096}, on a full buffer
   of N 4-byte items (double leaves unless PER_REAL says otherwise; both
   sides are built alike):
     step    the training step: per_buffer_sample of B (ids and IS weights,
             alpha 0.6, the scheduled beta) and per_buffer_update of those
             ids from B TD errors
     update  per_buffer_update of B ids of random slots from B TD errors:
             B priorities (|td| + eps)^alpha and the batch update
   Printed as ns per item (median of --reps timed loops) and as the ratio
   other / this (> 1: this per.h is faster).

   Checked after each figure: every call of both sides succeeded and both
   buffers pass per_buffer_check. With --same (both sides the same per.h),
   also that fresh buffers given the same calls hand out the same ids and
   weights. The exit status is 0 only when every check passes (timings
   are never checked).

   Build: C99 + POSIX (clock_gettime). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#define PER_IMPLEMENTATION
#include "per.h"

#include "bench_common.h"
#include "versions_side.h"

static const char *usage =
    "usage: bench_versions [options] [--same]\n"
    "  this per.h's buffer against another per.h's, ns per item (built by\n"
    "  bench/versions.sh). ops: step, update. --same: both sides are one\n"
    "  per.h, so their draws must agree bit for bit.\n";

static int same = 0;

static int extra_opt(const char *opt, const char *val, int *bad) {
  (void)val;
  (void)bad;
  if (strcmp(opt, "--same") == 0) {
    same = 1;
    return 2;
  }
  return 0;
}

typedef struct side {
  void *h;
  int (*step)(void *, uint32_t, const float *);
  int (*update)(void *, uint32_t, const uint64_t *, const float *);
  const float *td;     /* the pool of TD errors */
  const uint64_t *ids; /* the pool of ids (update) */
  size_t pool, off;
  uint32_t B;
  int err; /* the last failed call's status, 0 when none */
} side;

static int failures = 0;

static void fail(const char *what, uint32_t n, uint32_t B) {
  fprintf(stderr, "CHECK FAILED (N=%u, B=%u): %s\n", n, B, what);
  ++failures;
}

static void k_step(void *p, uint64_t iters) {
  side *s = (side *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    int st = s->step(s->h, s->B, s->td + s->off);
    if (st) s->err = st;
    bc_pool_next(&s->off, s->B, s->pool);
  }
}

static void k_update(void *p, uint64_t iters) {
  side *s = (side *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    int st = s->update(s->h, s->B, s->ids + s->off, s->td + s->off);
    if (st) s->err = st;
    bc_pool_next(&s->off, s->B, s->pool);
  }
}

/* Fresh buffers of n from both sides, `steps` steps of B with the same TD
   errors: the same ids and weights every step (--same). */
static void check_same(const bc_opts *o, uint32_t n, uint32_t B,
                       const float *td, size_t pool) {
  char err[160];
  void *a = vs_this_open(n, B, o->seed, err, sizeof err);
  void *b = a ? vs_other_open(n, B, o->seed, err, sizeof err) : NULL;
  size_t off = 0;
  int k;
  if (!a || !b) {
    fail(err, n, B);
    vs_this_close(a);
    return;
  }
  for (k = 0; k < 8; ++k) {
    const uint64_t *ia, *ib;
    const float *wa, *wb;
    if (vs_this_step(a, B, td + off) || vs_other_step(b, B, td + off)) {
      fail("a step failed", n, B);
      break;
    }
    vs_this_last(a, &ia, &wa);
    vs_other_last(b, &ib, &wb);
    if (memcmp(ia, ib, B * sizeof *ia) || memcmp(wa, wb, B * sizeof *wa)) {
      fail("one per.h on both sides, different ids or weights", n, B);
      break;
    }
    bc_pool_next(&off, B, pool);
  }
  vs_this_close(a);
  vs_other_close(b);
}

static void report(FILE *csv, const char *op, uint32_t n, uint32_t B,
                   const bc_result *r) {
  printf("%-7s %10u %5u  %12.2f  %13.2f", op, n, B, r->a_ns, r->b_ns);
  bc_print_ratio(r);
  fflush(stdout);
  bc_csv_row(csv, op, n, B, r, (double)B, "this", "other");
}

static void run_op(const bc_opts *o, FILE *csv, side *a, side *b,
                   const char *op, uint32_t n, uint32_t B, bc_kernel k) {
  bc_result r;
  a->B = b->B = B;
  a->off = b->off = 0;
  r = bc_measure(o, o->side == 2 ? NULL : k, a, o->side == 1 ? NULL : k, b, B);
  report(csv, op, n, B, &r);
  if (a->err) fail("a call of this per.h failed", n, B);
  if (b->err) fail("a call of the other per.h failed", n, B);
  a->err = b->err = 0;
  if (vs_this_check(a->h) || vs_other_check(b->h))
    fail("per_buffer_check after the figure", n, B);
}

int main(int argc, char **argv) {
  static const uint64_t def_n[] = {65536, 1000000};
  static const uint64_t def_b[] = {256, 1024, 4096};
  static const uint64_t quick_n[] = {1000, 4096};
  static const uint64_t quick_b[] = {16, 64};
  bc_opts o;
  FILE *csv;
  int in, ib;
  uint32_t maxB = 0;

  if (!bc_parse(&o, argc, argv, usage, extra_opt)) return 2;
  bc_default_list(o.n, &o.nn, o.quick ? quick_n : def_n, 2);
  bc_default_list(o.b, &o.nb, o.quick ? quick_b : def_b, o.quick ? 2 : 3);
  if (!bc_check_sizes(&o, &maxB)) return 2;
  csv = bc_csv_open(&o);

  printf("bench_versions: this per.h %s vs the other per.h %s (PER_REAL=%s)\n",
         vs_this_version(), vs_other_version(), bc_real_name());
  bc_print_setup(&o, "steps", "");
  printf("%-7s %10s %5s  %12s  %13s  %7s\n", "op", "N", "B", "this ns/item",
         "other ns/item", "other/this");

  for (in = 0; in < o.nn; ++in) {
    uint32_t n = (uint32_t)o.n[in], j;
    size_t pool = bc_pool_size(maxB);
    uint64_t rs = o.seed * 0x9E3779B97F4A7C15ull + n;
    uint32_t *slot = (uint32_t *)bc_xmalloc(pool * sizeof *slot);
    float *td = (float *)bc_xmalloc(pool * sizeof *td);
    uint64_t *ids = (uint64_t *)bc_xmalloc(pool * sizeof *ids);
    per_real *val = (per_real *)bc_xmalloc(pool * sizeof *val);
    side a, b;
    char err[160];
    bc_fill_pool(&rs, n, pool, slot, val, td);
    /* a full buffer's slots were each written once: generation 1 */
    for (j = 0; j < pool; ++j) ids[j] = (uint64_t)slot[j] | (uint64_t)1 << 32;
    if (same)
      for (ib = 0; ib < o.nb; ++ib)
        check_same(&o, n, (uint32_t)o.b[ib], td, pool);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.h = vs_this_open(n, maxB, o.seed, err, sizeof err);
    b.h = a.h ? vs_other_open(n, maxB, o.seed, err, sizeof err) : NULL;
    if (!a.h || !b.h) {
      fprintf(stderr, "N=%u: %s\n", n, err);
      return 2;
    }
    a.step = vs_this_step;
    a.update = vs_this_update;
    b.step = vs_other_step;
    b.update = vs_other_update;
    a.td = b.td = td;
    a.ids = b.ids = ids;
    a.pool = b.pool = pool;
    if (bc_want_op(&o, "step"))
      for (ib = 0; ib < o.nb; ++ib)
        run_op(&o, csv, &a, &b, "step", n, (uint32_t)o.b[ib], k_step);
    if (bc_want_op(&o, "update"))
      for (ib = 0; ib < o.nb; ++ib)
        run_op(&o, csv, &a, &b, "update", n, (uint32_t)o.b[ib], k_update);
    vs_this_close(a.h);
    vs_other_close(b.h);
    free(slot);
    free(td);
    free(ids);
    free(val);
  }
  return bc_finish(csv, "bench_versions", failures,
                   same ? "every call succeeded, both buffers valid, the "
                          "same draws on both sides"
                        : "every call succeeded, both buffers valid");
}
