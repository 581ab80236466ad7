/* test_samplers.c - the uniform swap sampler (per_swap_*) and the
   categorical samplers (per_tree_sample_iid, per_cat_*).

   Statistical checks use fixed seeds, so each run sees the same numbers.
   Each states its tolerance and false-failure probability (the probability
   that a correct sampler fails it); chi-square checks fail when p < 1e-6.

   All allocation goes through a counting allocator (PER_MALLOC/PER_FREE
   below) that can be told to fail its n-th call, so leaks and the
   allocation-failure paths are checked. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- counting allocator (heap.h) ---------------------------------------- */
#include "heap.h"
#define PER_IMPLEMENTATION
#include "per.h"

#include "stats.h"
#include "t.h"

/* Chi-square failure threshold: false-failure probability per check. */
#define P_MIN 1e-6

/* Words of the stream consumed so far. */
static uint64_t words_used(const per_rng *r) {
  return r->counter * 4 - r->avail;
}

/* Words one per_rng_real call consumes. */
#define WORDS_PER_REAL ((uint64_t)(sizeof(per_real) == sizeof(float) ? 1 : 2))

static void fresh(per_rng *r, uint64_t seed) {
  memset(r, 0, sizeof *r); /* every byte set for memcmp, whatever init sets */
  per_rng_init(r, seed);
}

/* p-value of counts[0..cells) against probabilities prob[0..cells) (which
   sum to 1) with df degrees of freedom. */
static double p_fit(const double *counts, const double *prob, int cells,
                    int df) {
  double total = 0, stat, *expect;
  int i;
  expect = (double *)malloc((size_t)cells * sizeof *expect);
  if (!expect) return -1;
  for (i = 0; i < cells; ++i) total += counts[i];
  for (i = 0; i < cells; ++i) expect[i] = prob[i] * total;
  stat = chi2_stat(counts, expect, cells);
  free(expect);
  return chi2_p(stat, df);
}

static double p_uniform(const double *counts, int cells) {
  double prob[400];
  int i;
  if (cells > 400) return -1;
  for (i = 0; i < cells; ++i) prob[i] = 1.0 / cells;
  return p_fit(counts, prob, cells, cells - 1);
}

/* 1 when a[0..k) are distinct and all < n. */
static int distinct_below(const uint32_t *a, uint32_t k, uint32_t n) {
  unsigned char *seen = (unsigned char *)calloc(n ? n : 1, 1);
  uint32_t i;
  int ok = 1;
  if (!seen) return 0;
  for (i = 0; i < k && ok; ++i) {
    if (a[i] >= n || seen[a[i]]) ok = 0;
    else seen[a[i]] = 1;
  }
  free(seen);
  return ok;
}

/* 1 when a[0..n) is a permutation of [0, n): n distinct values below n. */
static int is_perm(const uint32_t *a, uint32_t n) {
  return distinct_below(a, n, n);
}

/* ======================================================================
   Uniform sampler
   ====================================================================== */

/* A byte-for-byte copy of a sampler and its perm array. */
typedef struct swap_snap {
  per_swap s;
  uint32_t *perm;
  size_t bytes;
} swap_snap;

static void swap_snap_take(swap_snap *sn, const per_swap *s) {
  memcpy(&sn->s, s, sizeof *s);
  sn->bytes = s->perm ? (size_t)s->capacity * sizeof(uint32_t) : 0;
  sn->perm = (uint32_t *)malloc(sn->bytes ? sn->bytes : 1);
  if (sn->perm && sn->bytes) memcpy(sn->perm, s->perm, sn->bytes);
}

static int swap_snap_same(const swap_snap *sn, const per_swap *s) {
  if (memcmp(&sn->s, s, sizeof *s) != 0) return 0;
  if (sn->bytes && memcmp(sn->perm, s->perm, sn->bytes) != 0) return 0;
  return 1;
}

static void swap_snap_drop(swap_snap *sn) {
  free(sn->perm);
  sn->perm = NULL;
}

static int swap_is_empty(const per_swap *s) {
  return s->perm == NULL && s->n == 0 && s->capacity == 0 && s->owns == 0;
}

static void test_swap_init_free(void) {
  per_swap s;
  long live0 = t_default_heap.live;
  uint32_t i;
  int ok = 1;

  CHECK_EQ_U(per_swap_bytes(0), 0);
  CHECK_EQ_U(per_swap_bytes(PER_MAX_CAPACITY + 1u), 0);
  CHECK_EQ_U(per_swap_bytes(0xffffffffu), 0);
  CHECK_EQ_U(per_swap_bytes(10), 10 * sizeof(uint32_t));
  CHECK_EQ_U(per_swap_bytes(1), sizeof(uint32_t));

  CHECK_STATUS(per_swap_init(NULL, 10, NULL), PER_ERR_NULL);
  memset(&s, 0xAB, sizeof s);
  CHECK_STATUS(per_swap_init(&s, 0, NULL), PER_ERR_CAPACITY);
  CHECK(swap_is_empty(&s));
  per_swap_free(&s); /* freeable after an error */
  memset(&s, 0xAB, sizeof s);
  CHECK_STATUS(per_swap_init(&s, PER_MAX_CAPACITY + 1u, NULL),
               PER_ERR_CAPACITY);
  CHECK(swap_is_empty(&s));
  CHECK_EQ_U(t_default_heap.live, live0);

  memset(&s, 0xAB, sizeof s);
  CHECK_OK(per_swap_init(&s, 17, NULL));
  CHECK_EQ_U(s.n, 0);
  CHECK_EQ_U(s.capacity, 17);
  CHECK_EQ_U(s.owns, 1);
  CHECK_EQ_U(t_default_heap.live, live0 + 1);
  for (i = 0; i < 17; ++i) ok &= s.perm[i] == i;
  CHECK(ok);
  per_swap_free(&s);
  CHECK(swap_is_empty(&s));
  CHECK_EQ_U(t_default_heap.live, live0);
  per_swap_free(&s); /* twice */
  per_swap_free(NULL);
  CHECK_EQ_U(t_default_heap.live, live0);
}

/* per_swap_init_mem: caller memory, never freed by the sampler. */
static void test_swap_init_mem(void) {
  uint32_t buf[33];
  uint32_t ref[33];
  unsigned char *bytes = (unsigned char *)buf;
  per_swap s;
  per_rng r;
  uint32_t out[4], i;
  long frees0 = t_default_heap.frees, calls0 = t_default_heap.calls;
  int ok = 1;

  memset(buf, 0xEE, sizeof buf);
  memcpy(ref, buf, sizeof buf);
  CHECK_STATUS(per_swap_init_mem(NULL, 8, buf, sizeof buf), PER_ERR_NULL);
  memset(&s, 0xAB, sizeof s);
  CHECK_STATUS(per_swap_init_mem(&s, 8, NULL, sizeof buf), PER_ERR_NULL);
  CHECK(swap_is_empty(&s));
  CHECK_STATUS(per_swap_init_mem(&s, 0, buf, sizeof buf), PER_ERR_CAPACITY);
  CHECK(swap_is_empty(&s));
  /* one byte too small */
  memset(&s, 0xAB, sizeof s);
  CHECK_STATUS(per_swap_init_mem(&s, 8, buf, 8 * sizeof(uint32_t) - 1),
               PER_ERR_MEMORY);
  CHECK(swap_is_empty(&s));
  /* misaligned by 1, 2 and 3 bytes, with room to spare */
  for (i = 1; i < 4; ++i) {
    memset(&s, 0xAB, sizeof s);
    CHECK_STATUS(per_swap_init_mem(&s, 8, bytes + i, 16 * sizeof(uint32_t)),
                 PER_ERR_MEMORY);
    CHECK(swap_is_empty(&s));
  }
  CHECK_MEM(buf, ref, sizeof buf); /* the failures wrote nothing */
  per_swap_free(&s);

  /* exactly big enough, at an aligned offset inside the block */
  CHECK_OK(per_swap_init_mem(&s, 8, buf + 1, 8 * sizeof(uint32_t)));
  CHECK(s.perm == buf + 1);
  CHECK_EQ_U(s.owns, 0);
  CHECK_EQ_U(s.capacity, 8);
  CHECK_EQ_U(s.n, 0);
  for (i = 0; i < 8; ++i) ok &= buf[1 + i] == i;
  CHECK(ok);
  CHECK_EQ_U(buf[0], 0xEEEEEEEEu); /* nothing outside its bytes */
  CHECK_EQ_U(buf[9], 0xEEEEEEEEu);
  CHECK_OK(per_swap_grow(&s, 8));
  fresh(&r, 5);
  CHECK_OK(per_swap_sample(&s, &r, 4, out));
  CHECK(distinct_below(out, 4, 8));
  CHECK(is_perm(buf + 1, 8));
  per_swap_free(&s);
  CHECK(swap_is_empty(&s));
  /* the sampler never allocated nor freed */
  CHECK_EQ_U(t_default_heap.frees, frees0);
  CHECK_EQ_U(t_default_heap.calls, calls0);
}

/* Every error leaves the sampler, its perm array and the rng byte for
   byte as they were, with the documented status. */
static void test_swap_errors(void) {
  per_swap s, z;
  per_rng r, r0;
  swap_snap sn;
  uint32_t out[16];
  int b;

  CHECK_OK(per_swap_init(&s, 10, NULL));
  fresh(&r, 31);
  /* n == 0: nothing to draw */
  swap_snap_take(&sn, &s);
  r0 = r;
  CHECK_STATUS(per_swap_sample(&s, &r, 1, out), PER_ERR_EMPTY);
  CHECK(swap_snap_same(&sn, &s));
  CHECK_MEM(&r, &r0, sizeof r);
  swap_snap_drop(&sn);

  /* shuffle perm so a stray write would show */
  CHECK_OK(per_swap_grow(&s, 6));
  for (b = 0; b < 20; ++b) CHECK_OK(per_swap_sample(&s, &r, 3, out));
  (void)per_rng_u32(&r); /* leave words buffered in the rng */

  swap_snap_take(&sn, &s);
  r0 = r;
  CHECK_STATUS(per_swap_sample(&s, &r, 0, out), PER_ERR_BATCH);
  CHECK(swap_snap_same(&sn, &s));
  CHECK_MEM(&r, &r0, sizeof r);
  CHECK_STATUS(per_swap_sample(&s, &r, 7, out), PER_ERR_BATCH); /* k > n */
  CHECK(swap_snap_same(&sn, &s));
  CHECK_MEM(&r, &r0, sizeof r);
  CHECK_STATUS(per_swap_sample(&s, &r, 11, out), PER_ERR_BATCH);
  CHECK(swap_snap_same(&sn, &s));
  CHECK_STATUS(per_swap_sample(NULL, &r, 1, out), PER_ERR_NULL);
  CHECK_STATUS(per_swap_sample(&s, NULL, 1, out), PER_ERR_NULL);
  CHECK_STATUS(per_swap_sample(&s, &r, 1, NULL), PER_ERR_NULL);
  CHECK(swap_snap_same(&sn, &s));
  CHECK_MEM(&r, &r0, sizeof r);

  CHECK_STATUS(per_swap_grow(&s, 5), PER_ERR_ARG); /* shrink */
  CHECK(swap_snap_same(&sn, &s));
  CHECK_STATUS(per_swap_grow(&s, 0), PER_ERR_ARG); /* shrink to 0 */
  CHECK(swap_snap_same(&sn, &s));
  CHECK_STATUS(per_swap_grow(&s, 11), PER_ERR_CAPACITY); /* n > capacity */
  CHECK(swap_snap_same(&sn, &s));
  CHECK_STATUS(per_swap_grow(&s, 0xffffffffu), PER_ERR_CAPACITY);
  CHECK(swap_snap_same(&sn, &s));
  CHECK_STATUS(per_swap_grow(NULL, 7), PER_ERR_NULL);
  CHECK(swap_snap_same(&sn, &s));
  /* growing to the same n is allowed and changes nothing */
  CHECK_OK(per_swap_grow(&s, 6));
  CHECK(swap_snap_same(&sn, &s));
  swap_snap_drop(&sn);

  /* a zeroed (or freed) sampler */
  memset(&z, 0, sizeof z);
  CHECK_STATUS(per_swap_grow(&z, 1), PER_ERR_NULL);
  CHECK_STATUS(per_swap_sample(&z, &r, 1, out), PER_ERR_NULL);
  CHECK(swap_is_empty(&z));
  CHECK_MEM(&r, &r0, sizeof r);
  per_swap_free(&s);
}

/* k distinct indices below n; perm stays a permutation with no reset. */
static void test_swap_distinct(void) {
  static const uint32_t ks[] = {1, 2, 10, 499, 500, 999, 1000};
  static uint32_t out[1000];
  per_swap s;
  per_rng r;
  size_t i;
  int b, bad = 0;
  CHECK_OK(per_swap_init(&s, 1000, NULL));
  CHECK_OK(per_swap_grow(&s, 1000));
  fresh(&r, 4);
  for (b = 0; b < 300; ++b) {
    for (i = 0; i < sizeof ks / sizeof ks[0]; ++i) {
      if (per_swap_sample(&s, &r, ks[i], out) != PER_OK) ++bad;
      if (!distinct_below(out, ks[i], 1000)) ++bad;
    }
  }
  CHECK_EQ_U(bad, 0);
  CHECK(is_perm(s.perm, 1000));
  CHECK_EQ_U(s.n, 1000);
  per_swap_free(&s);
}

/* `batches` batches of k <= 16 from s: cnt[j * n + i] counts item i at
   output position j (an item >= n in cell 0). Returns the failed calls. */
static int swap_positions(per_swap *s, per_rng *r, long batches, uint32_t k,
                          uint32_t n, double *cnt) {
  uint32_t out[16], j;
  long b;
  int bad = 0;
  if (k > 16) return 1;
  for (b = 0; b < batches; ++b) {
    if (per_swap_sample(s, r, k, out) != PER_OK) ++bad;
    for (j = 0; j < k; ++j) cnt[j * n + (out[j] < n ? out[j] : 0)] += 1;
  }
  return bad;
}

/* Each output position of those counts uniform over the n items (df n - 1,
   fail when p < 1e-6). */
static void check_positions(const double *cnt, uint32_t k, uint32_t n,
                            const char *what) {
  uint32_t j;
  for (j = 0; j < k; ++j) {
    double p = p_uniform(cnt + (size_t)j * n, (int)n);
    CHECK_MSG(p >= P_MIN, "%s position %u: chi-square p = %.3g", what, j, p);
  }
}

/* Which item lands in each output position: n = 10, k = 4, 200000 batches
   on one sampler (no reset). Per position, 10 cells, df 9, expected 20000
   per cell; fail when p < 1e-6. */
static void test_swap_positions(void) {
  enum { N = 10, K = 4, BATCHES = 200000 };
  static double cnt[K][N];
  per_swap s;
  per_rng r;
  memset(cnt, 0, sizeof cnt);
  CHECK_OK(per_swap_init(&s, N, NULL));
  CHECK_OK(per_swap_grow(&s, N));
  fresh(&r, 10004);
  CHECK_EQ_U(swap_positions(&s, &r, BATCHES, K, N, &cnt[0][0]), 0);
  check_positions(&cnt[0][0], K, N, "swap");
  CHECK(is_perm(s.perm, N));
  per_swap_free(&s);
}

/* n = 5, k = 2: the 10 subsets (df 9) and the 20 ordered pairs (df 19) are
   equally likely; 200000 batches, fail when p < 1e-6. n = 4, k = 4: the 24
   orders (df 23), 240000 batches. */
static void test_swap_subsets(void) {
  double sub[10], ord[20], perm24[24];
  per_swap s;
  per_rng r;
  uint32_t out[4];
  int b, bad = 0;
  double p;

  memset(sub, 0, sizeof sub);
  memset(ord, 0, sizeof ord);
  CHECK_OK(per_swap_init(&s, 5, NULL));
  CHECK_OK(per_swap_grow(&s, 5));
  fresh(&r, 52);
  for (b = 0; b < 200000; ++b) {
    uint32_t a, c, lo, hi;
    if (per_swap_sample(&s, &r, 2, out) != PER_OK || out[0] == out[1] ||
        out[0] >= 5 || out[1] >= 5) {
      ++bad;
      continue;
    }
    a = out[0];
    c = out[1];
    lo = a < c ? a : c;
    hi = a < c ? c : a;
    /* subset {lo, hi} with lo < hi: index among the 10 pairs */
    sub[lo * 5 - lo * (lo + 1) / 2 + (hi - lo - 1)] += 1;
    ord[a * 4 + (c > a ? c - 1 : c)] += 1;
  }
  CHECK_EQ_U(bad, 0);
  p = p_uniform(sub, 10);
  CHECK_MSG(p >= P_MIN, "swap 2-subsets of 5: chi-square p = %.3g", p);
  p = p_uniform(ord, 20);
  CHECK_MSG(p >= P_MIN, "swap ordered pairs of 5: chi-square p = %.3g", p);
  per_swap_free(&s);

  /* k == n: a uniformly random order of all items */
  memset(perm24, 0, sizeof perm24);
  CHECK_OK(per_swap_init(&s, 4, NULL));
  CHECK_OK(per_swap_grow(&s, 4));
  bad = 0;
  for (b = 0; b < 240000; ++b) {
    uint32_t code = 0, rest[4] = {0, 1, 2, 3}, m = 4, j, q;
    if (per_swap_sample(&s, &r, 4, out) != PER_OK ||
        !distinct_below(out, 4, 4)) {
      ++bad;
      continue;
    }
    /* Lehmer code: position of out[j] among the unused items (kept in
       increasing order), a bijection from the 24 orders to [0, 24) */
    for (j = 0; j < 4; ++j) {
      for (q = 0; q < m && rest[q] != out[j]; ++q) {
      }
      code = code * (4 - j) + q;
      for (; q + 1 < m; ++q) rest[q] = rest[q + 1];
      --m;
    }
    perm24[code] += 1;
  }
  CHECK_EQ_U(bad, 0);
  p = p_uniform(perm24, 24);
  CHECK_MSG(p >= P_MIN, "swap orders of 4: chi-square p = %.3g", p);
  per_swap_free(&s);
}

/* No reset between batches, yet batches are independent: n = 5, k = 2, the
   ordered pair of batch b and that of batch b + 1 together take 20 * 20 =
   400 equally likely values (df 399, 400000 batches, expected 1000 per
   cell; fail when p < 1e-6). Catches a sampler whose batch depends on the
   order the previous batch left in perm (e.g. one that never leaves an
   item in place, Sattolo's variant, never repeats the previous first
   item). */
static void test_swap_independent_batches(void) {
  enum { BATCHES = 400000 };
  static double cnt[400];
  per_swap s;
  per_rng r;
  uint32_t out[2];
  int b, prev = -1, bad = 0;
  double p;
  memset(cnt, 0, sizeof cnt);
  CHECK_OK(per_swap_init(&s, 5, NULL));
  CHECK_OK(per_swap_grow(&s, 5));
  fresh(&r, 55);
  for (b = 0; b < BATCHES; ++b) {
    int code;
    if (per_swap_sample(&s, &r, 2, out) != PER_OK ||
        !distinct_below(out, 2, 5)) {
      ++bad;
      prev = -1;
      continue;
    }
    code = (int)(out[0] * 4 + (out[1] > out[0] ? out[1] - 1 : out[1]));
    if (prev >= 0) cnt[prev * 20 + code] += 1;
    prev = code;
  }
  CHECK_EQ_U(bad, 0);
  p = p_uniform(cnt, 400);
  CHECK_MSG(p >= P_MIN, "swap consecutive batches: chi-square p = %.3g", p);
  CHECK(is_perm(s.perm, 5));
  per_swap_free(&s);
}

/* Growing: before, only [0, n) is drawn; after, new items are drawable and
   the positions are uniform over the larger range (df 9, p >= 1e-6). */
static void test_swap_grow(void) {
  enum { CAP = 10, K = 3, BATCHES = 200000 };
  static double cnt[K][CAP];
  per_swap s;
  per_rng r;
  uint32_t out[K];
  int b, j, bad = 0;
  memset(cnt, 0, sizeof cnt);
  CHECK_OK(per_swap_init(&s, CAP, NULL));
  fresh(&r, 7007);
  CHECK_OK(per_swap_grow(&s, 3));
  for (b = 0; b < 1000; ++b) {
    if (per_swap_sample(&s, &r, 2, out) != PER_OK) ++bad;
    if (!distinct_below(out, 2, 3)) ++bad;
  }
  CHECK(is_perm(s.perm, 3));
  CHECK_OK(per_swap_grow(&s, 7));
  CHECK(is_perm(s.perm, 7));
  for (b = 0; b < 1000; ++b) {
    if (per_swap_sample(&s, &r, K, out) != PER_OK) ++bad;
    if (!distinct_below(out, K, 7)) ++bad;
  }
  CHECK(is_perm(s.perm, 7));
  CHECK_OK(per_swap_grow(&s, CAP));
  CHECK(is_perm(s.perm, CAP));
  bad += swap_positions(&s, &r, BATCHES, K, CAP, &cnt[0][0]);
  CHECK_EQ_U(bad, 0);
  check_positions(&cnt[0][0], K, CAP, "swap after grow,");
  /* the items added last are drawn (implied by the chi-square too) */
  for (j = 0; j < K; ++j)
    CHECK(cnt[j][7] > 0 && cnt[j][8] > 0 && cnt[j][9] > 0);
  CHECK(is_perm(s.perm, CAP));
  per_swap_free(&s);
}

/* O(1) per draw: k = 1024 draws use one word each (plus rare rejections),
   whatever n is. Counted in RNG blocks, no timing. */
static void test_swap_o1(void) {
  static const uint32_t ns[] = {64000u, 1000000u, 10000000u};
  static uint32_t out[1024];
  size_t i;
  for (i = 0; i < sizeof ns / sizeof ns[0]; ++i) {
    per_swap s;
    per_rng r;
    uint32_t j;
    int bad = 0;
    if (per_swap_init(&s, ns[i], NULL) != PER_OK) {
      CHECK_MSG(0, "per_swap_init(%lu) failed", (unsigned long)ns[i]);
      continue;
    }
    CHECK_OK(per_swap_grow(&s, ns[i]));
    fresh(&r, 1024 + i);
    CHECK_OK(per_swap_sample(&s, &r, 1024, out));
    for (j = 0; j < 1024; ++j) bad += out[j] >= ns[i];
    CHECK_EQ_U(bad, 0);
    /* 1024 words = 256 blocks, plus rejections (probability < n / 2^32
       < 0.3% per draw): the bound 2*k/4 + 16 = 528 blocks is never
       reached by a correct O(1) sampler, and a per-draw cost growing with
       n would pass it. */
    CHECK_MSG(r.counter < 2 * 1024 / 4 + 16 && r.counter >= 1024 / 4,
              "k=1024 from n=%lu used %llu blocks", (unsigned long)ns[i],
              (unsigned long long)r.counter);
    per_swap_free(&s);
  }
}

/* ======================================================================
   Categorical samplers
   ====================================================================== */

static size_t tree_bytes_of(const per_tree *t) {
  return (size_t)t->leaves * 2 * sizeof(per_real);
}

/* A copy of the node array. */
static per_real *tree_copy(const per_tree *t) {
  per_real *c = (per_real *)malloc(tree_bytes_of(t));
  if (c) memcpy(c, t->node, tree_bytes_of(t));
  return c;
}

static int tree_same(const per_tree *t, const per_real *copy) {
  return copy && memcmp(t->node, copy, tree_bytes_of(t)) == 0;
}

/* t made over the leaves w[0..n); returns a copy of its node array. */
static per_real *tree_built(per_tree *t, const per_real *w, uint32_t n) {
  CHECK_OK(per_tree_init(t, n, NULL));
  CHECK_OK(per_tree_build(t, w, n));
  return tree_copy(t);
}

/* The wrong picks of a batch without replacement from the leaves
   w[0..cap): an index out of range or repeated, a zero leaf, or (val not
   NULL) a value that is not the leaf's. 0 for a good batch. */
static int bad_picks(const uint32_t *idx, const per_real *val, uint32_t k,
                     const per_real *w, uint32_t cap) {
  unsigned char *seen = (unsigned char *)calloc(cap ? cap : 1, 1);
  uint32_t j;
  int bad = 0;
  if (!seen) return 1;
  for (j = 0; j < k; ++j) {
    if (idx[j] >= cap || seen[idx[j]] || !(w[idx[j]] > 0) ||
        (val && val[j] != w[idx[j]]))
      ++bad;
    else seen[idx[j]] = 1;
  }
  free(seen);
  return bad;
}

/* One batch of k from t without replacement, checked: a failed call or
   bad picks (bad_picks) add to *bad, a tree that is not bitwise `copy`
   to *bad_tree. */
static void cat_batch(per_cat *c, per_tree *t, per_rng *r, uint32_t k,
                      uint32_t *idx, per_real *val, const per_real *w,
                      const per_real *copy, int *bad, int *bad_tree) {
  if (per_cat_sample(c, t, r, k, idx, val) != PER_OK) {
    ++*bad;
    return;
  }
  *bad += bad_picks(idx, val, k, w, t->capacity);
  if (!tree_same(t, copy)) ++*bad_tree;
}

/* ---- per_tree_sample_iid ---------------------------------------------- */

/* 200000 draws against priorities 1..128 on the even leaves of a 255-leaf
   tree (odd leaves and the padded leaf 255 are 0). Chi-square over the 128
   positive leaves, df 127, fail when p < 1e-6; zero leaves must never be
   drawn. L1 distance between the empirical and the exact law: expected
   ~0.019; the bound 0.10 is exceeded with probability < exp(-N t^2 / 2)
   = exp(-640) (McDiarmid, t = 0.08). */
static void test_iid_law(void) {
  enum { CAP = 255, DRAWS = 200000, K = 1000 };
  static uint32_t idx[K];
  static per_real val[K];
  double cnt[128], prob[128], W = 128.0 * 129.0 / 2.0, l1 = 0, p;
  per_tree t;
  per_rng r;
  uint32_t i;
  int b, bad_val = 0, zero_hits = 0;
  per_real *copy;

  memset(cnt, 0, sizeof cnt);
  CHECK_OK(per_tree_init(&t, CAP, NULL));
  for (i = 0; i < 128; ++i)
    CHECK_OK(per_tree_set(&t, 2 * i, (per_real)(i + 1)));
  copy = tree_copy(&t);
  fresh(&r, 128128);
  for (b = 0; b < DRAWS / K; ++b) {
    CHECK_OK(per_tree_sample_iid(&t, &r, K, idx, val));
    for (i = 0; i < K; ++i) {
      if (idx[i] >= CAP || (idx[i] & 1u)) {
        ++zero_hits;
        continue;
      }
      if (!(val[i] > 0) || val[i] != per_tree_get(&t, idx[i])) ++bad_val;
      cnt[idx[i] / 2] += 1;
    }
  }
  CHECK_EQ_U(zero_hits, 0);
  CHECK_EQ_U(bad_val, 0);
  CHECK(tree_same(&t, copy));
  for (i = 0; i < 128; ++i) prob[i] = (i + 1) / W;
  p = p_fit(cnt, prob, 128, 127);
  CHECK_MSG(p >= P_MIN, "iid 1..128: chi-square p = %.3g", p);
  for (i = 0; i < 128; ++i) l1 += fabs(cnt[i] / DRAWS - prob[i]);
  printf(
      "samplers: iid 1..128, %d draws: L1 distance %.4f, chi-square p %.3g\n",
      DRAWS, l1, p);
  CHECK_MSG(l1 < 0.10, "iid 1..128: L1 distance %.4f", l1);
  free(copy);
  per_tree_free(&t);
}

/* The documented draw: leaf = descent by u = per_rng_real(rng) * total, one
   per_rng_real per index, checked exactly for 100000 draws (so a slightly
   perturbed u shows up); val may be NULL and changes nothing else. */
static void test_iid_formula(void) {
  static const per_real w[12] = {0, 3, 0, 0.5, 7, 0, 0, 1, 2, 0, 0.25, 4};
  static uint32_t idx[1000], idx2[1000];
  static per_real val[1000];
  per_tree t;
  per_rng a, b, c;
  uint32_t i;
  per_real total;
  int batch, bad = 0;
  CHECK_OK(per_tree_init(&t, 12, NULL));
  CHECK_OK(per_tree_build(&t, w, 12));
  total = per_tree_total(&t);
  fresh(&a, 99);
  fresh(&b, 99);
  fresh(&c, 99);
  for (batch = 0; batch < 100; ++batch) {
    uint64_t before = words_used(&a);
    CHECK_OK(per_tree_sample_iid(&t, &a, 1000, idx, NULL));
    CHECK_OK(per_tree_sample_iid(&t, &c, 1000, idx2, val));
    if (memcmp(idx, idx2, sizeof idx) != 0) ++bad;
    if (words_used(&a) - before != 1000 * WORDS_PER_REAL) ++bad;
    for (i = 0; i < 1000; ++i) {
      uint32_t want;
      per_real u = per_rng_real(&b) * total;
      if (per_tree_find(&t, u, &want) != PER_OK || want != idx[i]) ++bad;
      if (!(w[idx[i]] > 0) || val[i] != w[idx[i]]) ++bad;
    }
  }
  CHECK_EQ_U(bad, 0);
  CHECK_EQ_U(words_used(&a), words_used(&b));
  per_tree_free(&t);
}

/* Errors leave the rng (and the tree) unchanged. */
static void test_iid_errors(void) {
  per_tree t, z;
  per_rng r, r0;
  uint32_t idx[4];
  per_real val[4];
  per_real *copy;
  CHECK_OK(per_tree_init(&t, 5, NULL));
  fresh(&r, 1);
  (void)per_rng_u32(&r); /* buffered words */
  r0 = r;
  copy = tree_copy(&t);
  /* empty tree */
  CHECK_STATUS(per_tree_sample_iid(&t, &r, 2, idx, val), PER_ERR_EMPTY);
  CHECK_MEM(&r, &r0, sizeof r);
  CHECK_OK(per_tree_set(&t, 3, 2));
  free(copy);
  copy = tree_copy(&t);
  CHECK_STATUS(per_tree_sample_iid(&t, &r, 0, idx, val), PER_ERR_BATCH);
  CHECK_MEM(&r, &r0, sizeof r);
  CHECK_STATUS(per_tree_sample_iid(NULL, &r, 2, idx, val), PER_ERR_NULL);
  CHECK_STATUS(per_tree_sample_iid(&t, NULL, 2, idx, val), PER_ERR_NULL);
  CHECK_STATUS(per_tree_sample_iid(&t, &r, 2, NULL, val), PER_ERR_NULL);
  CHECK_MEM(&r, &r0, sizeof r);
  memset(&z, 0, sizeof z);
  CHECK_STATUS(per_tree_sample_iid(&z, &r, 2, idx, val), PER_ERR_NULL);
  CHECK_MEM(&r, &r0, sizeof r);
  CHECK(tree_same(&t, copy));
  /* a root that is not finite (only a corrupted tree has one) */
  t.node[1] = (per_real)INFINITY;
  CHECK_STATUS(per_tree_sample_iid(&t, &r, 2, idx, val), PER_ERR_DEGENERATE);
  CHECK_MEM(&r, &r0, sizeof r);
  t.node[1] = (per_real)NAN;
  CHECK_STATUS(per_tree_sample_iid(&t, &r, 2, idx, val), PER_ERR_DEGENERATE);
  CHECK_MEM(&r, &r0, sizeof r);
  t.node[1] = copy[1];
  CHECK(tree_same(&t, copy));
  /* and a success does move it */
  CHECK_OK(per_tree_sample_iid(&t, &r, 2, idx, val));
  CHECK(idx[0] == 3 && idx[1] == 3 && val[0] == 2 && val[1] == 2);
  CHECK(memcmp(&r, &r0, sizeof r) != 0);
  free(copy);
  per_tree_free(&t);
}

/* ---- per_cat ------------------------------------------------------------ */

static int cat_is_empty(const per_cat *c) {
  return c->table == NULL && c->saved == NULL && c->max_k == 0 && c->owns == 0;
}

static void test_cat_init_free(void) {
  per_cat c;
  long live0 = t_default_heap.live;
  CHECK_STATUS(per_cat_init(NULL, 4, NULL), PER_ERR_NULL);
  memset(&c, 0xAB, sizeof c);
  CHECK_STATUS(per_cat_init(&c, 0, NULL), PER_ERR_BATCH);
  CHECK(cat_is_empty(&c));
  memset(&c, 0xAB, sizeof c);
  CHECK_STATUS(per_cat_init(&c, (1u << 30) + 1u, NULL), PER_ERR_BATCH);
  CHECK(cat_is_empty(&c));
  per_cat_free(&c);
  CHECK_EQ_U(t_default_heap.live, live0);
  memset(&c, 0xAB, sizeof c);
  CHECK_OK(per_cat_init(&c, 5, NULL));
  CHECK_EQ_U(c.max_k, 5);
  CHECK_EQ_U(c.reject_limit, 5); /* documented start value */
  CHECK_EQ_U(c.owns, 1);
  CHECK(c.table != NULL && c.saved != NULL);
  CHECK((1u << c.hbits) >= 2 * 5u); /* load factor <= 1/2 */
  per_cat_free(&c);
  CHECK(cat_is_empty(&c));
  per_cat_free(&c);
  per_cat_free(NULL);
  CHECK_EQ_U(t_default_heap.live, live0);
}

/* ---- allocation failure of both samplers ------------------------------ */

/* per_swap_init of 100 or per_cat_init of 64, through one interface. */
typedef union sampler {
  per_swap s;
  per_cat c;
} sampler;

static per_status sampler_init(int cat, sampler *x, t_heap *h) {
  return cat ? per_cat_init(&x->c, 64, h) : per_swap_init(&x->s, 100, h);
}

static void sampler_free(int cat, sampler *x) {
  if (cat) per_cat_free(&x->c);
  else per_swap_free(&x->s);
}

static int sampler_is_empty(int cat, const sampler *x) {
  return cat ? cat_is_empty(&x->c) : swap_is_empty(&x->s);
}

static void *sampler_ctx(int cat, const sampler *x) {
  return cat ? x->c.alloc_ctx : x->s.alloc_ctx;
}

/* Every allocation of an init fails in turn: PER_ERR_NOMEM, nothing
   leaks, the result is empty and freeable; then an init that succeeds
   holds `allocs` blocks, and the context pointer reaches the allocator. */
static void check_init_nomem(int cat, long allocs) {
  const char *name = cat ? "per_cat_init" : "per_swap_init";
  t_heap h;
  sampler x;
  long fail_at;
  int failures = 0;
  for (fail_at = 1; fail_at < 20; ++fail_at) {
    per_status st;
    memset(&h, 0, sizeof h);
    h.fail_at = fail_at;
    memset(&x, 0xAB, sizeof x);
    st = sampler_init(cat, &x, &h);
    if (h.calls < fail_at) { /* nothing was refused: success */
      CHECK_OK(st);
      CHECK_EQ_U(h.live, allocs);
      CHECK(sampler_ctx(cat, &x) == (void *)&h);
      sampler_free(cat, &x);
      CHECK_EQ_U(h.live, 0);
      break;
    }
    ++failures;
    CHECK_STATUS(st, PER_ERR_NOMEM);
    CHECK_MSG(h.live == 0, "%s failing allocation %ld leaks %ld", name, fail_at,
              h.live);
    CHECK(sampler_is_empty(cat, &x));
    sampler_free(cat, &x);
    CHECK_EQ_U(h.live, 0);
    CHECK_EQ_U(h.frees, h.calls - 1); /* all but the refused one */
  }
  CHECK_EQ_U(failures, allocs);
}

/* One allocation: the perm array. */
static void test_swap_nomem(void) { check_init_nomem(0, 1); }

/* One allocation: the table and the saved values in one block, the
   layout of per_cat_init_mem. */
static void test_cat_nomem(void) { check_init_nomem(1, 1); }

/* Random trees with zero leaves mixed in: k distinct indices with positive
   values in [0, capacity), val[j] their values, the tree bitwise unchanged
   and still valid. */
static void test_cat_basic(void) {
  enum { CAP = 100, K = 30 };
  per_real w[CAP];
  per_tree t;
  per_cat c;
  per_rng r;
  uint32_t idx[K], i;
  per_real val[K];
  per_real *copy;
  int b, bad = 0, bad_tree = 0;
  fresh(&r, 777);
  for (i = 0; i < CAP; ++i)
    w[i] = (i % 3 == 0) ? (per_real)0
                        : (per_real)(1 + per_rng_below(&r, 1000)) / 64;
  copy = tree_built(&t, w, CAP);
  CHECK_OK(per_cat_init(&c, K, NULL));
  for (b = 0; b < 2000; ++b) {
    uint32_t k = 1 + (uint32_t)b % K;
    cat_batch(&c, &t, &r, k, idx, (b & 1) ? NULL : val, w, copy, &bad,
              &bad_tree);
  }
  CHECK_EQ_U(bad, 0);
  CHECK_EQ_U(bad_tree, 0);
  CHECK_OK(per_tree_check(&t));
  free(copy);
  per_cat_free(&c);
  per_tree_free(&t);
}

/* Exact successive-sampling laws of picks 1, 2, 3 for weights w[0..n). */
static void successive_laws(const double *w, int n, double *p1, double *p2,
                            double *p3) {
  double W = 0;
  int i, j, l;
  for (i = 0; i < n; ++i) W += w[i];
  for (i = 0; i < n; ++i) p1[i] = p2[i] = p3[i] = 0;
  for (i = 0; i < n; ++i) {
    double pi = w[i] / W;
    p1[i] += pi;
    for (j = 0; j < n; ++j) {
      double pj;
      if (j == i) continue;
      pj = pi * w[j] / (W - w[i]);
      p2[j] += pj;
      for (l = 0; l < n; ++l) {
        if (l == i || l == j) continue;
        p3[l] += pj * w[l] / (W - w[i] - w[j]);
      }
    }
  }
}

/* 100000 batches of k = 3 from weights 1..8. First, second and third
   picks against the exact successive-sampling law (8 cells, df 7 each, fail
   when p < 1e-6). reject_limit is the documented default (max_k = 3), where
   i.i.d. draws repeat in ~16% of batches (the second draw repeats the first
   with probability sum p_i^2 = 204/1296), so at least 10% of batches must
   show an extra draw (binomial sd ~115 on 15700: a 50-sigma margin); or 0,
   which skips the i.i.d. phase: pure zero-and-restore, exactly K draws in
   every batch. The tree is compared bitwise after every batch. */
static void check_cat_law(uint32_t reject_limit, int use_default,
                          uint64_t seed) {
  enum { N = 8, K = 3, BATCHES = 100000 };
  double w[N], p1[N], p2[N], p3[N], c1[N], c2[N], c3[N], p;
  per_real wr[N];
  per_tree t;
  per_cat c;
  per_rng r;
  uint32_t idx[K];
  per_real *copy;
  long repeats = 0;
  int b, i, bad = 0, bad_tree = 0;
  for (i = 0; i < N; ++i) {
    w[i] = i + 1;
    wr[i] = (per_real)(i + 1);
    c1[i] = c2[i] = c3[i] = 0;
  }
  successive_laws(w, N, p1, p2, p3);
  copy = tree_built(&t, wr, N);
  CHECK_OK(per_cat_init(&c, K, NULL));
  if (!use_default) c.reject_limit = reject_limit;
  fresh(&r, seed);
  for (b = 0; b < BATCHES; ++b) {
    uint64_t before = words_used(&r);
    if (per_cat_sample(&c, &t, &r, K, idx, NULL) != PER_OK ||
        !distinct_below(idx, K, N)) {
      ++bad;
      continue;
    }
    if (words_used(&r) - before > K * WORDS_PER_REAL) ++repeats;
    c1[idx[0]] += 1;
    c2[idx[1]] += 1;
    c3[idx[2]] += 1;
    if (!tree_same(&t, copy)) ++bad_tree;
  }
  CHECK_EQ_U(bad, 0);
  CHECK_EQ_U(bad_tree, 0);
  p = p_fit(c1, p1, N, N - 1);
  CHECK_MSG(p >= P_MIN, "cat 1..8 (limit %s): first pick p = %.3g",
            use_default ? "default" : "0", p);
  p = p_fit(c2, p2, N, N - 1);
  CHECK_MSG(p >= P_MIN, "cat 1..8 (limit %s): second pick p = %.3g",
            use_default ? "default" : "0", p);
  p = p_fit(c3, p3, N, N - 1);
  CHECK_MSG(p >= P_MIN, "cat 1..8 (limit %s): third pick p = %.3g",
            use_default ? "default" : "0", p);
  if (use_default)
    CHECK_MSG(repeats >= BATCHES / 10, "cat 1..8: only %ld batches repeated",
              repeats);
  else
    CHECK_MSG(repeats == 0, "cat 1..8 (limit 0): %ld batches drew extra",
              repeats);
  free(copy);
  per_cat_free(&c);
  per_tree_free(&t);
}

static void test_cat_law(void) {
  check_cat_law(0, 1, 8801);
  check_cat_law(0, 0, 8802);
}

/* The zero-and-restore path on its own: leaf 0 has weight 1e20, leaves
   1..7 weights 1..7. Rounded, the total is 1e20 and equals the left
   subtree at every level, so i.i.d. draws only ever find leaf 0 and every
   batch switches to the fallback for picks 2 and 3. The exact law: pick 1
   is leaf 0 (probability 1 - 2.8e-19), pick 2 is j with w_j / 28, pick 3 as
   successive sampling from 1..7. Chi-square df 6 each, fail when
   p < 1e-6; 100000 batches. */
static void test_cat_fallback_law(void) {
  enum { N = 8, K = 3, BATCHES = 100000 };
  double w[7], q1[7], q2[7], q3[7], c2[7], c3[7], p;
  per_real wr[N];
  per_tree t;
  per_cat c;
  per_rng r;
  uint32_t idx[K];
  per_real *copy;
  int b, i, bad = 0, first_not0 = 0, bad_tree = 0;
  wr[0] = (per_real)1e20;
  for (i = 0; i < 7; ++i) {
    w[i] = i + 1;
    wr[i + 1] = (per_real)(i + 1);
    c2[i] = c3[i] = 0;
  }
  successive_laws(w, 7, q1, q2, q3); /* given pick 1 = leaf 0 */
  copy = tree_built(&t, wr, N);
  CHECK_OK(per_cat_init(&c, K, NULL));
  fresh(&r, 4242);
  for (b = 0; b < BATCHES; ++b) {
    if (per_cat_sample(&c, &t, &r, K, idx, NULL) != PER_OK ||
        !distinct_below(idx, K, N)) {
      ++bad;
      continue;
    }
    if (idx[0] != 0 || idx[1] == 0 || idx[2] == 0) {
      ++first_not0;
      continue;
    }
    c2[idx[1] - 1] += 1;
    c3[idx[2] - 1] += 1;
    if (!tree_same(&t, copy)) ++bad_tree;
  }
  CHECK_EQ_U(bad, 0);
  CHECK_EQ_U(first_not0, 0);
  CHECK_EQ_U(bad_tree, 0);
  p = p_fit(c2, q1, 7, 6);
  CHECK_MSG(p >= P_MIN, "cat fallback: second pick p = %.3g", p);
  p = p_fit(c3, q2, 7, 6);
  CHECK_MSG(p >= P_MIN, "cat fallback: third pick p = %.3g", p);
  free(copy);
  per_cat_free(&c);
  per_tree_free(&t);
}

/* k == number of positive leaves returns exactly those leaves; one more
   is PER_ERR_TOO_FEW with the tree unchanged. */
static void test_cat_all_and_too_few(void) {
  enum { CAP = 20 };
  static const uint32_t pos[8] = {0, 3, 4, 9, 11, 12, 17, 19};
  per_real w[CAP];
  per_tree t;
  per_cat c, c2;
  per_rng r;
  uint32_t idx[32], i;
  per_real val[32];
  per_real *copy;
  int b, bad = 0;
  for (i = 0; i < CAP; ++i) w[i] = 0;
  for (i = 0; i < 8; ++i) w[pos[i]] = (per_real)(0.5 + i);
  copy = tree_built(&t, w, CAP);
  CHECK_OK(per_cat_init(&c, 8, NULL));
  CHECK_OK(per_cat_init(&c2, 32, NULL));
  fresh(&r, 2020);
  for (b = 0; b < 500; ++b) {
    cat_batch((b & 1) ? &c2 : &c, &t, &r, 8, idx, val, w, copy, &bad, &bad);
  }
  CHECK_EQ_U(bad, 0);
  /* too few: 9 of 8, all 20 leaves, and more than the capacity */
  CHECK_STATUS(per_cat_sample(&c2, &t, &r, 9, idx, val), PER_ERR_TOO_FEW);
  CHECK(tree_same(&t, copy));
  CHECK_STATUS(per_cat_sample(&c2, &t, &r, CAP, idx, NULL), PER_ERR_TOO_FEW);
  CHECK(tree_same(&t, copy));
  CHECK_STATUS(per_cat_sample(&c2, &t, &r, CAP + 1, idx, val), PER_ERR_TOO_FEW);
  CHECK(tree_same(&t, copy));
  c2.reject_limit = 0;
  CHECK_STATUS(per_cat_sample(&c2, &t, &r, 9, idx, val), PER_ERR_TOO_FEW);
  CHECK(tree_same(&t, copy));
  /* and it still works afterwards */
  CHECK_OK(per_cat_sample(&c2, &t, &r, 8, idx, val));
  CHECK(tree_same(&t, copy));
  CHECK_OK(per_tree_check(&t));
  free(copy);
  per_cat_free(&c);
  per_cat_free(&c2);
  per_tree_free(&t);
}

/* Highly skewed: one leaf 1e9, seven leaves 1e-9 (the small ones are lost
   in the rounded total, so i.i.d. draws only find the big one). k = 8 (all
   positive leaves) must finish through the fallback, return all eight with
   the big one first (probability 1 - 7e-18), and restore the tree. */
static void test_cat_skewed(void) {
  enum { CAP = 16 };
  per_real w[CAP];
  per_tree t;
  per_cat c, c2;
  per_rng r;
  uint32_t idx[8], j;
  per_real val[8];
  per_real *copy;
  int b, bad = 0;
  for (j = 0; j < CAP; ++j) w[j] = 0;
  w[5] = (per_real)1e9;
  w[0] = w[2] = w[7] = w[8] = w[11] = w[13] = w[15] = (per_real)1e-9;
  copy = tree_built(&t, w, CAP);
  CHECK_OK(per_cat_init(&c, 8, NULL));
  CHECK_OK(per_cat_init(&c2, 8, NULL));
  c2.reject_limit = 1000;
  fresh(&r, 9);
  for (b = 0; b < 200; ++b) {
    int before = bad;
    cat_batch((b & 1) ? &c2 : &c, &t, &r, 8, idx, val, w, copy, &bad, &bad);
    if (bad == before && idx[0] != 5) ++bad;
  }
  CHECK_EQ_U(bad, 0);
  free(copy);
  per_cat_free(&c);
  per_cat_free(&c2);
  per_tree_free(&t);
}

/* The number of repeats tolerated before the fallback: leaves {1, 1e-30}
   (1 + 1e-30 rounds to 1, so i.i.d. draws always find leaf 0). For k = 2
   with reject_limit R >= 1 the call draws leaf 0, sees R repeats, switches
   and draws leaf 1: R + 2 draws; R = 0 goes straight to the fallback, which
   draws leaf 0 then leaf 1: 2 draws. R counts at most 64k + 1024 = 1152, so
   UINT32_MAX gives 1154 draws (and no hang). Deterministic. */
static void test_cat_reject_limit(void) {
  static const uint32_t limits[] = {0, 1, 5, 100, 0xffffffffu};
  per_real w[2];
  per_tree t;
  per_cat c;
  per_rng r;
  uint32_t idx[2];
  per_real *copy;
  size_t i;
  w[0] = 1;
  w[1] = (per_real)1e-30;
  copy = tree_built(&t, w, 2);
  CHECK_OK(per_cat_init(&c, 2, NULL));
  for (i = 0; i < sizeof limits / sizeof limits[0]; ++i) {
    c.reject_limit = limits[i];
    fresh(&r, 600 + i);
    CHECK_OK(per_cat_sample(&c, &t, &r, 2, idx, NULL));
    CHECK(idx[0] == 0 && idx[1] == 1);
    {
      unsigned long want = (limits[i] < 1152u ? limits[i] : 1152u) + 2;
      CHECK_MSG(words_used(&r) == want * WORDS_PER_REAL,
                "reject_limit %lu: %llu draws, want %lu",
                (unsigned long)limits[i],
                (unsigned long long)(words_used(&r) / WORDS_PER_REAL), want);
    }
    CHECK(tree_same(&t, copy));
  }
  free(copy);
  /* one positive leaf, k = 2, the largest limit: PER_ERR_TOO_FEW after a
     bounded number of draws, tree unchanged */
  {
    per_real one[4] = {1, 0, 0, 0};
    CHECK_OK(per_tree_build(&t, one, 2));
    copy = tree_copy(&t);
    c.reject_limit = 0xffffffffu;
    fresh(&r, 700);
    CHECK_STATUS(per_cat_sample(&c, &t, &r, 2, idx, NULL), PER_ERR_TOO_FEW);
    CHECK(words_used(&r) <= 1160 * WORDS_PER_REAL);
    CHECK(tree_same(&t, copy));
    free(copy);
  }
  per_cat_free(&c);
  per_tree_free(&t);
}

/* Every error: the documented status, the tree bitwise unchanged, the rng
   unchanged. */
static void test_cat_errors(void) {
  per_real w[6] = {1, 0, 2, 3, 0, 4};
  per_tree t, z, e;
  per_cat c, zc;
  per_rng r, r0;
  uint32_t idx[8];
  per_real val[8];
  per_real *copy, *ecopy;
  CHECK_OK(per_tree_init(&t, 6, NULL));
  CHECK_OK(per_tree_build(&t, w, 6));
  CHECK_OK(per_tree_init(&e, 6, NULL)); /* all zero */
  copy = tree_copy(&t);
  ecopy = tree_copy(&e);
  CHECK_OK(per_cat_init(&c, 3, NULL));
  fresh(&r, 3);
  (void)per_rng_u32(&r);
  r0 = r;

  CHECK_STATUS(per_cat_sample(&c, &t, &r, 0, idx, val), PER_ERR_BATCH);
  CHECK(tree_same(&t, copy));
  CHECK_MEM(&r, &r0, sizeof r);
  CHECK_STATUS(per_cat_sample(&c, &t, &r, 4, idx, val), PER_ERR_BATCH);
  CHECK(tree_same(&t, copy));
  CHECK_MEM(&r, &r0, sizeof r);
  CHECK_STATUS(per_cat_sample(NULL, &t, &r, 1, idx, val), PER_ERR_NULL);
  CHECK_STATUS(per_cat_sample(&c, NULL, &r, 1, idx, val), PER_ERR_NULL);
  CHECK_STATUS(per_cat_sample(&c, &t, NULL, 1, idx, val), PER_ERR_NULL);
  CHECK_STATUS(per_cat_sample(&c, &t, &r, 1, NULL, val), PER_ERR_NULL);
  memset(&zc, 0, sizeof zc);
  CHECK_STATUS(per_cat_sample(&zc, &t, &r, 1, idx, val), PER_ERR_NULL);
  memset(&z, 0, sizeof z);
  CHECK_STATUS(per_cat_sample(&c, &z, &r, 1, idx, val), PER_ERR_NULL);
  CHECK(tree_same(&t, copy));
  CHECK_MEM(&r, &r0, sizeof r);
  CHECK_STATUS(per_cat_sample(&c, &e, &r, 1, idx, val), PER_ERR_EMPTY);
  CHECK(tree_same(&e, ecopy));
  CHECK_MEM(&r, &r0, sizeof r);
  /* not finite root (a corrupted tree) */
  t.node[1] = (per_real)INFINITY;
  CHECK_STATUS(per_cat_sample(&c, &t, &r, 1, idx, val), PER_ERR_DEGENERATE);
  CHECK_MEM(&r, &r0, sizeof r);
  t.node[1] = copy[1];
  CHECK(tree_same(&t, copy));
  /* k == max_k works */
  CHECK_OK(per_cat_sample(&c, &t, &r, 3, idx, val));
  CHECK(distinct_below(idx, 3, 6));
  CHECK(tree_same(&t, copy));
  free(copy);
  free(ecopy);
  per_cat_free(&c);
  per_tree_free(&t);
  per_tree_free(&e);
}

/* A capacity 10^5 tree (some zero leaves) and k = 1024. */
static void test_cat_large(void) {
  enum { CAP = 100000, K = 1024 };
  static per_real w[CAP];
  static uint32_t idx[K];
  static per_real val[K];
  per_tree t;
  per_cat c;
  per_rng r;
  per_real *copy;
  uint32_t i;
  int b, bad = 0, bad_tree = 0;
  fresh(&r, 100000);
  for (i = 0; i < CAP; ++i)
    w[i] = (i % 7 == 3) ? (per_real)0
                        : (per_real)per_rng_real(&r) + (per_real)0.01;
  copy = tree_built(&t, w, CAP);
  CHECK_OK(per_cat_init(&c, K, NULL));
  for (b = 0; b < 30; ++b) {
    cat_batch(&c, &t, &r, K, idx, val, w, copy, &bad, &bad_tree);
  }
  CHECK_EQ_U(bad, 0);
  CHECK_EQ_U(bad_tree, 0);
  CHECK_OK(per_tree_check(&t));
  free(copy);
  per_cat_free(&c);
  per_tree_free(&t);
}

int main(void) {
  test_swap_init_free();
  test_swap_init_mem();
  test_swap_errors();
  test_swap_distinct();
  test_swap_positions();
  test_swap_subsets();
  test_swap_independent_batches();
  test_swap_grow();
  test_swap_o1();
  test_swap_nomem();
  test_iid_law();
  test_iid_formula();
  test_iid_errors();
  test_cat_init_free();
  test_cat_nomem();
  test_cat_basic();
  test_cat_law();
  test_cat_fallback_law();
  test_cat_all_and_too_few();
  test_cat_skewed();
  test_cat_reject_limit();
  test_cat_errors();
  test_cat_large();
  CHECK_MSG(t_default_heap.live == 0, "%ld allocations not freed",
            t_default_heap.live);
  return t_done("samplers");
}
