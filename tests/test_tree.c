/* test_tree.c - the sum tree: layout, updates, descent, sampling, errors.
   Runs with PER_REAL double (default) and float (the Meson build compiles
   it both ways). */
#include <math.h>
#include <stdlib.h>

#include "heap.h" /* every allocation of the library counted */
#define PER_IMPLEMENTATION
#include "per.h"
#include "stats.h"
#include "t.h"

#define IS_FLOAT (sizeof(per_real) == sizeof(float))

static size_t tree_nodes(const per_tree *t) { return (size_t)t->leaves * 2; }

/* A byte snapshot of a tree: the struct and the node array. */
typedef struct snap {
  per_tree head;
  per_real *node;
  size_t n;
} snap;
static snap snap_take(const per_tree *t) {
  snap s;
  s.head = *t;
  s.n = tree_nodes(t);
  s.node = (per_real *)malloc(s.n * sizeof(per_real));
  memcpy(s.node, t->node, s.n * sizeof(per_real));
  return s;
}
/* 1 when t is byte for byte as when s was taken. Frees s. */
static int snap_same(snap *s, const per_tree *t) {
  int same = memcmp(&s->head, t, sizeof *t) == 0 &&
             memcmp(s->node, t->node, s->n * sizeof(per_real)) == 0;
  free(s->node);
  return same;
}
#define CHECK_UNCHANGED(s, t) \
  CHECK_MSG(snap_same(&(s), (t)), "tree changed by a failing call")

static uint32_t next_pow2(uint32_t c) {
  uint32_t L = 1;
  while (L < c) L <<= 1;
  return L;
}

/* ---- the seed write-ups' tests ---------------------------------------- */

static void test_seed_cases(void) {
  per_tree t;
  uint32_t i, idx;
  static const per_real p[4] = {1, 2, 3, 4};

  CHECK_OK(per_tree_init(&t, 4, NULL));
  for (i = 0; i < 4; ++i) CHECK_OK(per_tree_set(&t, i, p[i]));
  CHECK_EQ_F(per_tree_total(&t), 10.0);
  /* cumulative [1, 3, 6, 10] */
  CHECK_OK(per_tree_find(&t, (per_real)0.5, &idx));
  CHECK_EQ_U(idx, 0);
  CHECK_OK(per_tree_find(&t, (per_real)2.5, &idx));
  CHECK_EQ_U(idx, 1);
  CHECK_OK(per_tree_find(&t, (per_real)7.0, &idx));
  CHECK_EQ_U(idx, 3);
  /* the interval boundaries: [0,1) -> 0, [1,3) -> 1, [3,6) -> 2, [6,10) -> 3 */
  CHECK_OK(per_tree_find(&t, 1, &idx));
  CHECK_EQ_U(idx, 1);
  CHECK_OK(per_tree_find(&t, 3, &idx));
  CHECK_EQ_U(idx, 2);
  CHECK_OK(per_tree_find(&t, 6, &idx));
  CHECK_EQ_U(idx, 3);
  CHECK_EQ_F(per_tree_prefix(&t, 0), 0);
  CHECK_EQ_F(per_tree_prefix(&t, 3), 6);
  CHECK_EQ_F(per_tree_prefix(&t, 4), 10);
  CHECK_EQ_F(per_tree_prefix(&t, 99), 10);

  /* update propagates */
  for (i = 0; i < 4; ++i) CHECK_OK(per_tree_set(&t, i, 1));
  CHECK_EQ_F(per_tree_total(&t), 4.0);
  CHECK_OK(per_tree_set(&t, 0, 5));
  CHECK_EQ_F(per_tree_total(&t), 8.0);
  CHECK_EQ_F(per_tree_get(&t, 0), 5.0);
  CHECK_OK(per_tree_check(&t));
  per_tree_free(&t);

  /* circular overwrite: capacity 3, the 4th write goes to slot 0 */
  CHECK_OK(per_tree_init(&t, 3, NULL));
  {
    static const per_real w[4] = {1, 2, 3, 10};
    uint32_t next = 0, slot = 0;
    for (i = 0; i < 4; ++i) {
      slot = next;
      CHECK_OK(per_tree_set(&t, slot, w[i]));
      next = (next + 1) % 3;
    }
    CHECK_EQ_U(slot, 0);
    CHECK_EQ_F(per_tree_total(&t), 15.0);
  }
  CHECK_OK(per_tree_check(&t));
  per_tree_free(&t);
}

/* Root equals the sum of the leaves and every internal node its children's
   sum after 5,000 random updates with duplicates on capacity 1024; the
   batch update equals one-by-one updates bit for bit. */
static void test_random_updates(void) {
  per_tree a, b;
  per_rng rng;
  uint32_t idx[5000];
  per_real val[5000];
  uint32_t j;
  long double sum = 0;
  CHECK_OK(per_tree_init(&a, 1024, NULL));
  CHECK_OK(per_tree_init(&b, 1024, NULL));
  per_rng_init(&rng, 1);
  for (j = 0; j < 5000; ++j) {
    idx[j] = per_rng_below(&rng, 1024);
    val[j] = per_rng_real(&rng);
  }
  CHECK_OK(per_tree_set_batch(&a, idx, val, 5000));
  for (j = 0; j < 5000; ++j) CHECK_OK(per_tree_set(&b, idx[j], val[j]));
  CHECK_OK(per_tree_check(&a));
  CHECK_MEM(a.node, b.node, tree_nodes(&a) * sizeof(per_real));
  for (j = 0; j < 1024; ++j) sum += per_tree_get(&a, j);
  CHECK_NEAR(per_tree_total(&a), (double)sum,
             1e-9 * 1024 + (IS_FLOAT ? 1e-3 : 0));
  /* last one wins for duplicates */
  {
    uint32_t d[3] = {7, 9, 7};
    per_real v[3] = {1, 2, 3};
    CHECK_OK(per_tree_set_batch(&a, d, v, 3));
    CHECK_EQ_F(per_tree_get(&a, 7), 3);
    CHECK_EQ_F(per_tree_get(&a, 9), 2);
  }
  CHECK_OK(per_tree_check(&a));
  /* a batch of n == 0 changes nothing, even with NULL arrays */
  {
    snap s = snap_take(&a);
    CHECK_OK(per_tree_set_batch(&a, NULL, NULL, 0));
    CHECK_UNCHANGED(s, &a);
  }
  per_tree_free(&a);
  per_tree_free(&b);
}

/* Priorities 1..128, 200,000 stratified draws (batches of 64): chi-square
   against p_i = i / sum, failing at p < 1e-6 (false-failure probability
   1e-6; stratification only lowers the statistic's variance, so the test
   stays conservative), and the L1 < 0.10 check of the CUDA coursework. */
static void test_distribution(void) {
  per_tree t;
  per_rng rng;
  double obs[128] = {0}, expd[128], l1 = 0, stat, p;
  uint32_t idx[64], i, b;
  CHECK_OK(per_tree_init(&t, 128, NULL));
  for (i = 0; i < 128; ++i) CHECK_OK(per_tree_set(&t, i, (per_real)(i + 1)));
  per_rng_init(&rng, 2024);
  for (b = 0; b < 200000 / 64; ++b) {
    CHECK_STATUS(per_tree_sample(&t, &rng, 64, idx, NULL), PER_OK);
    for (i = 0; i < 64; ++i) obs[idx[i]] += 1;
  }
  for (i = 0; i < 128; ++i) {
    expd[i] = (double)(i + 1) / 8256.0 * (200000 / 64 * 64);
    l1 += fabs(obs[i] - expd[i]) / (200000 / 64 * 64);
  }
  stat = chi2_stat(obs, expd, 128);
  p = chi2_p(stat, 127);
  CHECK_MSG(p > 1e-6, "chi-square %.2f df 127 p %.3g", stat, p);
  CHECK_MSG(l1 < 0.10, "L1 %.4f", l1);
  CHECK_EQ_U(rng.counter, 200000 / 64 * 64);
  per_tree_free(&t);
}

/* ---- edges -------------------------------------------------------------- */

/* Whatever u the descent gets, the leaf has mass and is in range. */
static void check_every_u(const per_tree *t, int line) {
  per_real total = per_tree_total(t);
  per_real us[10];
  int n = 0, i;
  us[n++] = 0;
  us[n++] = total;
  us[n++] = (per_real)nextafter((double)total, INFINITY);
  us[n++] = IS_FLOAT ? (per_real)nextafterf((float)total, INFINITY) : total;
  us[n++] = total * 2;
  us[n++] = (per_real)1e30;
  us[n++] = (per_real)INFINITY;
  us[n++] = (per_real)NAN;
  us[n++] = -1;
  us[n++] = (per_real)-0.0;
  for (i = 0; i < n; ++i) {
    uint32_t leaf = per_tree_descend(t->node, t->leaves, us[i]);
    if (leaf >= t->capacity || !(per_tree_get(t, leaf) > 0)) {
      ++t_fail_count;
      fprintf(stderr,
              "%s:%d: FAIL: u=%.17g of total %.17g gave leaf %u (value %g, "
              "capacity %u)\n",
              __FILE__, line, (double)us[i], (double)total, leaf,
              (double)per_tree_get(t, leaf), t->capacity);
    } else {
      ++t_pass_count;
    }
  }
}

static void test_edges(void) {
  static const uint32_t caps[] = {1,  2,  3,  4,  5,    7,    8,   9,
                                  16, 17, 31, 33, 1000, 1024, 1025};
  size_t c;
  per_rng rng;
  per_rng_init(&rng, 3);
  for (c = 0; c < sizeof caps / sizeof caps[0]; ++c) {
    uint32_t cap = caps[c], i, idx;
    per_tree t;
    CHECK_OK(per_tree_init(&t, cap, NULL));
    CHECK_EQ_U(t.leaves, next_pow2(cap));
    CHECK_EQ_U(per_tree_bytes(cap), 2 * next_pow2(cap) * sizeof(per_real));
    /* all-zero tree: a clear error, no crash */
    CHECK_STATUS(per_tree_find(&t, 0, &idx), PER_ERR_EMPTY);
    {
      uint32_t out4[4];
      CHECK_STATUS(per_tree_sample(&t, &rng, 4, out4, NULL), PER_ERR_EMPTY);
      CHECK_STATUS(per_tree_sample_iid(&t, &rng, 4, out4, NULL), PER_ERR_EMPTY);
    }
    CHECK_OK(per_tree_check(&t));

    /* leaf order: leaf i holds i + 1; the middle of its interval finds it */
    for (i = 0; i < cap; ++i) CHECK_OK(per_tree_set(&t, i, (per_real)(i + 1)));
    CHECK_OK(per_tree_check(&t));
    for (i = 0; i < cap; ++i) {
      per_real mid = per_tree_prefix(&t, i) + (per_real)(i + 1) / 2;
      CHECK_OK(per_tree_find(&t, mid, &idx));
      CHECK_MSG(idx == i, "cap %u: leaf %u found as %u", cap, i, idx);
    }
    /* u = 0 -> first leaf, u = total (and past it) -> last leaf */
    CHECK_OK(per_tree_find(&t, 0, &idx));
    CHECK_EQ_U(idx, 0);
    CHECK_OK(per_tree_find(&t, per_tree_total(&t), &idx));
    CHECK_EQ_U(idx, cap - 1);
    CHECK_OK(per_tree_find(&t, (per_real)1e30, &idx));
    CHECK_EQ_U(idx, cap - 1);
    check_every_u(&t, __LINE__);

    /* zeros at the left and right edges (and the padding beyond) */
    if (cap >= 3) {
      CHECK_OK(per_tree_set(&t, 0, 0));
      CHECK_OK(per_tree_set(&t, cap - 1, 0));
      CHECK_OK(per_tree_find(&t, 0, &idx));
      CHECK_EQ_U(idx, 1);
      CHECK_OK(per_tree_find(&t, per_tree_total(&t), &idx));
      CHECK_EQ_U(idx, cap - 2);
      check_every_u(&t, __LINE__);
    }
    /* only the last slot has mass: it is found for every u, and sampled */
    {
      uint32_t out[16], j;
      per_tree_clear(&t);
      CHECK_OK(per_tree_set(&t, cap - 1, (per_real)0.25));
      check_every_u(&t, __LINE__);
      CHECK_OK(per_tree_sample(&t, &rng, 16, out, NULL));
      for (j = 0; j < 16; ++j) CHECK_EQ_U(out[j], cap - 1);
      /* only the first slot */
      per_tree_clear(&t);
      CHECK_OK(per_tree_set(&t, 0, (per_real)3));
      check_every_u(&t, __LINE__);
      CHECK_OK(per_tree_sample(&t, &rng, 16, out, NULL));
      for (j = 0; j < 16; ++j) CHECK_EQ_U(out[j], 0);
    }
    /* random sparse trees: every u, and every stratified draw, hits mass */
    {
      int rep;
      for (rep = 0; rep < 20; ++rep) {
        uint32_t out[64], j;
        per_real vals[64];
        per_tree_clear(&t);
        for (i = 0; i < cap; ++i)
          if (per_rng_below(&rng, 3) == 0)
            CHECK_OK(
                per_tree_set(&t, i, per_rng_real(&rng) * (per_real)(rep + 1)));
        CHECK_OK(per_tree_set(&t, per_rng_below(&rng, cap), (per_real)1e-30));
        check_every_u(&t, __LINE__);
        CHECK_OK(per_tree_sample(&t, &rng, 64, out, vals));
        for (j = 0; j < 64; ++j) {
          CHECK(out[j] < cap && vals[j] > 0 &&
                vals[j] == per_tree_get(&t, out[j]));
        }
      }
    }
    per_tree_free(&t);
  }
}

/* Tiny leaves next to huge ones, subnormals, values near PER_LEAF_MAX. */
static void test_extreme_values(void) {
  per_tree t;
  uint32_t idx;
  per_real tiny = IS_FLOAT ? (per_real)1e-44 : (per_real)4.9e-324;
  CHECK_OK(per_tree_init(&t, 5, NULL));
  CHECK_OK(per_tree_set(&t, 1, tiny));
  CHECK_OK(per_tree_set(&t, 3, PER_LEAF_MAX));
  CHECK_OK(per_tree_check(&t));
  check_every_u(&t, __LINE__);
  CHECK_OK(per_tree_find(&t, 0, &idx));
  CHECK_EQ_U(idx, 1);
  /* the total of a full tree of PER_LEAF_MAX leaves stays finite */
  CHECK((double)PER_LEAF_MAX * 2147483648.0 <
        (IS_FLOAT ? 3.4028234663852886e38 : 1.7976931348623157e308));
  /* -0 is stored as +0 (bitwise), so equal leaves give equal bits */
  {
    per_real z = 0, got;
    CHECK_OK(per_tree_set(&t, 2, (per_real)-0.0));
    got = per_tree_get(&t, 2);
    CHECK_MEM(&got, &z, sizeof z);
  }
  per_tree_free(&t);
}

/* ---- bad input ---------------------------------------------------------- */

/* The values a leaf may not take, and the status each must get; and the
   tree the error tests start from: 10 leaves i % 3. */
static void bad_setup(per_tree *t, per_real bad[5], per_status want[5]) {
  uint32_t i;
  CHECK_OK(per_tree_init(t, 10, NULL));
  for (i = 0; i < 10; ++i) CHECK_OK(per_tree_set(t, i, (per_real)(i % 3)));
  bad[0] = (per_real)NAN;
  want[0] = PER_ERR_NAN;
  bad[1] = (per_real)INFINITY;
  want[1] = PER_ERR_INF;
  bad[2] = (per_real)-INFINITY;
  want[2] = PER_ERR_INF;
  bad[3] = (per_real)-1e-30;
  want[3] = PER_ERR_NEGATIVE;
  bad[4] = PER_LEAF_MAX * 2;
  want[4] = PER_ERR_RANGE;
}

static void test_bad_input(void) {
  per_tree t;
  per_rng rng, rng0;
  uint32_t i, idx[8];
  snap s;
  per_real bad[5];
  per_status want[5];
  bad_setup(&t, bad, want);

  for (i = 0; i < 5; ++i) {
    uint32_t bi[4] = {0, 1, 2, 9};
    per_real bv[4] = {5, 6, 7, 8};
    bv[3] = bad[i]; /* the bad value comes last: nothing may be applied */
    s = snap_take(&t);
    CHECK_STATUS(per_tree_set(&t, 4, bad[i]), want[i]);
    CHECK_UNCHANGED(s, &t);
    s = snap_take(&t);
    CHECK_STATUS(per_tree_set_batch(&t, bi, bv, 4), want[i]);
    CHECK_UNCHANGED(s, &t);
    s = snap_take(&t);
    CHECK_STATUS(per_tree_build(&t, bv, 4), want[i]);
    CHECK_UNCHANGED(s, &t);
  }
  {
    uint32_t bi[3] = {0, 10, 1};
    per_real bv[3] = {1, 1, 1};
    per_real many[11] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    s = snap_take(&t);
    CHECK_STATUS(per_tree_set(&t, 10, 1), PER_ERR_INDEX);
    CHECK_STATUS(per_tree_set(&t, 0xffffffffu, 1), PER_ERR_INDEX);
    CHECK_STATUS(per_tree_set_batch(&t, bi, bv, 3), PER_ERR_INDEX);
    CHECK_STATUS(per_tree_set_batch(&t, NULL, bv, 3), PER_ERR_NULL);
    CHECK_STATUS(per_tree_set_batch(&t, bi, NULL, 3), PER_ERR_NULL);
    CHECK_STATUS(per_tree_build(&t, many, 11), PER_ERR_INDEX);
    CHECK_STATUS(per_tree_build(&t, NULL, 3), PER_ERR_NULL);
    CHECK_STATUS(per_tree_find(&t, (per_real)NAN, idx), PER_ERR_NAN);
    CHECK_STATUS(per_tree_find(&t, -1, idx), PER_ERR_NEGATIVE);
    CHECK_STATUS(per_tree_find(&t, 1, NULL), PER_ERR_NULL);
    CHECK_UNCHANGED(s, &t);
  }
  /* sampling errors leave the rng as it was */
  per_rng_init(&rng, 9);
  (void)per_rng_u32(&rng);
  rng0 = rng;
  CHECK_STATUS(per_tree_sample(&t, &rng, 0, idx, NULL), PER_ERR_BATCH);
  CHECK_STATUS(per_tree_sample(&t, &rng, 4, NULL, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_tree_sample(NULL, &rng, 4, idx, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_tree_sample(&t, NULL, 4, idx, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_tree_sample_strata(&t, 1, 0, 8, 5, 4, idx, NULL),
               PER_ERR_INDEX);
  CHECK_STATUS(per_tree_sample_strata(&t, 1, 0, 8, 0xffffffffu, 2, idx, NULL),
               PER_ERR_INDEX);
  CHECK_STATUS(per_tree_sample_strata(&t, 1, 0, 0, 0, 0, idx, NULL),
               PER_ERR_BATCH);
  CHECK_OK(per_tree_sample_strata(&t, 1, 0, 8, 8, 0, NULL, NULL));
  CHECK_MEM(&rng, &rng0, sizeof rng);
  per_tree_clear(&t);
  CHECK_STATUS(per_tree_sample(&t, &rng, 4, idx, NULL), PER_ERR_EMPTY);
  CHECK_MEM(&rng, &rng0, sizeof rng);
  /* a non-finite total (memory written from outside) is refused */
  t.node[1] = (per_real)INFINITY;
  CHECK_STATUS(per_tree_sample(&t, &rng, 4, idx, NULL), PER_ERR_DEGENERATE);
  CHECK_STATUS(per_tree_find(&t, 0, idx), PER_ERR_DEGENERATE);
  t.node[1] = (per_real)NAN;
  CHECK_STATUS(per_tree_sample(&t, &rng, 4, idx, NULL), PER_ERR_DEGENERATE);
  CHECK_MEM(&rng, &rng0, sizeof rng);
  per_tree_free(&t);

  /* construction errors */
  CHECK_STATUS(per_tree_init(&t, 0, NULL), PER_ERR_CAPACITY);
  CHECK(t.node == NULL);
  per_tree_free(&t);
  CHECK_STATUS(per_tree_init(&t, PER_MAX_CAPACITY + 1u, NULL),
               PER_ERR_CAPACITY);
  CHECK_STATUS(per_tree_init(NULL, 4, NULL), PER_ERR_NULL);
  CHECK_EQ_U(per_tree_bytes(0), 0);
  CHECK_EQ_U(per_tree_bytes(PER_MAX_CAPACITY + 1u), 0);
  CHECK(per_tree_bytes(PER_MAX_CAPACITY) == 0 ||
        per_tree_bytes(PER_MAX_CAPACITY) ==
            (size_t)PER_MAX_CAPACITY * 2 * sizeof(per_real));
  per_tree_free(NULL);
  CHECK_EQ_F(per_tree_total(NULL), 0);
  CHECK_EQ_F(per_tree_get(NULL, 0), 0);
  CHECK_STATUS(per_tree_check(NULL), PER_ERR_NULL);
}

static void test_check_detects(void) {
  per_tree t;
  uint32_t i;
  CHECK_OK(per_tree_init(&t, 6, NULL));
  for (i = 0; i < 6; ++i) CHECK_OK(per_tree_set(&t, i, (per_real)(i + 1)));
  CHECK_OK(per_tree_check(&t));
  t.node[3] += 1; /* an internal node off by one */
  CHECK_STATUS(per_tree_check(&t), PER_ERR_CORRUPT);
  t.node[3] -= 1;
  CHECK_OK(per_tree_check(&t));
  t.node[t.leaves + 7] = 1; /* a padded leaf */
  CHECK_STATUS(per_tree_check(&t), PER_ERR_CORRUPT);
  t.node[t.leaves + 7] = 0;
  t.node[0] = 1;
  CHECK_STATUS(per_tree_check(&t), PER_ERR_CORRUPT);
  t.node[0] = 0;
  t.node[t.leaves + 2] = -1; /* a negative leaf (and the sums agree) */
  for (i = (t.leaves + 2) >> 1; i >= 1; i >>= 1) per_tree_recompute(t.node, i);
  CHECK_STATUS(per_tree_check(&t), PER_ERR_CORRUPT);
  per_tree_free(&t);
}

/* ---- memory ------------------------------------------------------------- */

static void test_alloc(void) {
  per_tree t;
  per_status s;
  long before = t_default_heap.live;
  t_default_heap.fail_at = t_default_heap.calls + 1; /* the next call */
  s = per_tree_init(&t, 100, NULL);
  CHECK_STATUS(s, PER_ERR_NOMEM);
  CHECK(t.node == NULL && t.capacity == 0);
  per_tree_free(&t);
  CHECK_EQ_U(t_default_heap.live, before);
  t_default_heap.fail_at = 0;
  CHECK_OK(per_tree_init(&t, 100, NULL));
  CHECK_EQ_U(t_default_heap.live, before + 1);
  per_tree_free(&t);
  per_tree_free(&t); /* twice is fine */
  CHECK_EQ_U(t_default_heap.live, before);

  /* caller-owned memory gives the same tree as an allocated one */
  {
    union {
      per_real r[64];
      char c[64 * sizeof(per_real)];
    } mem;
    per_tree a, b;
    uint32_t i;
    /* L = 32: 64 values */
    CHECK_OK(per_tree_init_mem(&a, 17, mem.r, sizeof mem));
    CHECK_STATUS(per_tree_init_mem(&a, 33, mem.r, sizeof mem), PER_ERR_MEMORY);
    CHECK_OK(per_tree_init_mem(&a, 16, mem.r, sizeof mem));
    CHECK_STATUS(per_tree_init_mem(&b, 16, mem.r, 32 * sizeof(per_real) - 1),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_tree_init_mem(&b, 8, mem.c + 1, 32 * sizeof(per_real)),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_tree_init_mem(&b, 8, NULL, 32 * sizeof(per_real)),
                 PER_ERR_NULL);
    CHECK_STATUS(per_tree_init_mem(&b, 0, mem.r, sizeof mem), PER_ERR_CAPACITY);
    CHECK_OK(per_tree_init(&b, 16, NULL));
    for (i = 0; i < 16; ++i) {
      CHECK_OK(per_tree_set(&a, i, (per_real)(i * i)));
      CHECK_OK(per_tree_set(&b, i, (per_real)(i * i)));
    }
    CHECK_MEM(a.node, b.node, 32 * sizeof(per_real));
    before = t_default_heap.live;
    per_tree_free(&a); /* does not free caller memory */
    CHECK_EQ_U(t_default_heap.live, before);
    per_tree_free(&b);
  }
}

/* ---- batches split over strata ---------------------------------------- */

static void test_strata(void) {
  per_tree t;
  per_rng rng;
  uint32_t whole[100], part[100], i;
  per_real wv[100], pv[100];
  uint64_t c0;
  CHECK_OK(per_tree_init(&t, 777, NULL));
  per_rng_init(&rng, 5);
  for (i = 0; i < 777; ++i) CHECK_OK(per_tree_set(&t, i, per_rng_real(&rng)));
  per_rng_init(&rng, 77);
  rng.counter = 123456789012ull;
  c0 = rng.counter;
  CHECK_OK(per_tree_sample(&t, &rng, 100, whole, wv));
  CHECK_EQ_U(rng.counter, c0 + 100);
  CHECK_EQ_U(rng.avail, 0);
  /* three uneven pieces in reverse order give the same batch */
  CHECK_OK(per_tree_sample_strata(&t, 77, c0, 100, 61, 39, part + 61, pv + 61));
  CHECK_OK(per_tree_sample_strata(&t, 77, c0, 100, 7, 54, part + 7, pv + 7));
  CHECK_OK(per_tree_sample_strata(&t, 77, c0, 100, 0, 7, part, pv));
  CHECK_MEM(whole, part, sizeof whole);
  CHECK_MEM(wv, pv, sizeof wv);
  /* each stratum's draw lies in its own slice of the mass */
  for (i = 0; i < 100; ++i) {
    per_real seg = per_tree_total(&t) / 100;
    per_real u = per_tree_stratum_u(77, c0, i, seg);
    CHECK(u >= seg * (per_real)i * (per_real)0.999999);
    CHECK(u <= seg * (per_real)(i + 1) * (per_real)1.000001);
    CHECK_EQ_U(per_tree_descend(t.node, t.leaves, u), whole[i]);
  }
  per_tree_free(&t);
}

/* ---- contiguous runs and batch shapes --------------------------------- */

/* A leaf value for the update tests: about a third exact zeros (some -0),
   the rest spread over many magnitudes, so sums round. */
static per_real mixed_value(per_rng *rng) {
  uint32_t q = per_rng_below(rng, 12);
  if (q < 3) return 0;
  if (q == 3) return (per_real)-0.0;
  return per_rng_real(rng) * (per_real)(1u << per_rng_below(rng, 20)) +
         (per_real)q;
}

/* per_tree_set_range equals per_tree_set on each leaf in order, bit for
   bit, for random runs (lengths 0, 1, 2, many, the whole tree) on
   capacities that are and are not powers of two; -0 is stored as +0. */
static void test_set_range(void) {
  static const uint32_t caps[] = {1, 2, 3, 5, 64, 100, 1000, 4097};
  per_rng rng;
  per_real *v = (per_real *)malloc(4097 * sizeof(per_real));
  uint32_t c, r, i;
  per_rng_init(&rng, 4242);
  for (c = 0; c < sizeof caps / sizeof caps[0]; ++c) {
    uint32_t cap = caps[c];
    per_tree a, b;
    CHECK_OK(per_tree_init(&a, cap, NULL));
    CHECK_OK(per_tree_init(&b, cap, NULL));
    for (r = 0; r < 40; ++r) {
      uint32_t first = per_rng_below(&rng, cap);
      uint32_t n = per_rng_below(&rng, cap - first + 1);
      if (r % 4 == 1) n = n < 2 ? n : 1 + per_rng_below(&rng, 2);
      if (r == 39) {
        first = 0;
        n = cap;
      }
      for (i = 0; i < n; ++i) v[i] = mixed_value(&rng);
      for (i = 0; i < n; ++i) CHECK_OK(per_tree_set(&a, first + i, v[i]));
      CHECK_OK(per_tree_set_range(&b, first, v, n));
      CHECK_MEM(a.node, b.node, tree_nodes(&a) * sizeof(per_real));
    }
    CHECK_OK(per_tree_check(&b));
    /* -0 becomes +0 (the bits, not only the value) */
    v[0] = (per_real)-0.0;
    CHECK_OK(per_tree_set_range(&b, cap - 1, v, 1));
    {
      per_real zero = 0, got = per_tree_get(&b, cap - 1);
      CHECK_MEM(&got, &zero, sizeof zero);
    }
    per_tree_free(&a);
    per_tree_free(&b);
  }
  free(v);
}

/* per_tree_set_range's errors leave the tree as it was. */
static void test_set_range_errors(void) {
  per_tree t;
  snap s;
  uint32_t i;
  per_real v[4] = {1, 2, 3, 4};
  per_real bad[5];
  per_status want[5];
  bad_setup(&t, bad, want);
  for (i = 0; i < 5; ++i) {
    per_real w[4] = {5, 6, 7, 8};
    w[3] = bad[i]; /* last: nothing may be applied */
    s = snap_take(&t);
    CHECK_STATUS(per_tree_set_range(&t, 2, w, 4), want[i]);
    CHECK_UNCHANGED(s, &t);
  }
  s = snap_take(&t);
  CHECK_STATUS(per_tree_set_range(&t, 7, v, 4), PER_ERR_INDEX); /* 7 + 4 > 10 */
  CHECK_STATUS(per_tree_set_range(&t, 10, v, 1), PER_ERR_INDEX);
  CHECK_STATUS(per_tree_set_range(&t, 0xffffffffu, v, 2), PER_ERR_INDEX);
  CHECK_STATUS(per_tree_set_range(&t, 1, v, (size_t)-1), PER_ERR_INDEX);
  CHECK_STATUS(per_tree_set_range(&t, 0, NULL, 3), PER_ERR_NULL);
  CHECK_STATUS(per_tree_set_range(NULL, 0, v, 3), PER_ERR_NULL);
  CHECK_OK(per_tree_set_range(&t, 0, NULL, 0)); /* n == 0: no-op */
  CHECK_OK(per_tree_set_range(&t, 10, v, 0));
  CHECK_UNCHANGED(s, &t);
  CHECK_OK(per_tree_set_range(&t, 6, v, 4)); /* up to the last leaf */
  CHECK_EQ_F(per_tree_get(&t, 9), 4);
  CHECK_OK(per_tree_check(&t));
  per_tree_free(&t);
}

/* per_tree_set_batch equals per_tree_set one by one, bit for bit, for the
   batch shapes its two ways of covering a level meet: indices clustered
   in a narrow span (recomputed as a span from low levels on), spread over
   the whole tree (one pass per level), runs of duplicates, a batch larger
   than the tree, a single index. Every other round has no -0 (made +0),
   so its batch takes the path for values that go in as they are (each
   leaf written and walked up at once in a small tree); the others take
   the one that stores -0 as +0 first. The last size, 2^22 leaves, is
   beyond PERI_WALK_MAX_BYTES for both node types, so there every level
   below the spans is covered by passes rather than walks. */
static void test_batch_shapes(void) {
  static const uint32_t caps[] = {1, 3, 777, 4096, 65537, (1u << 21) + 5};
  per_rng rng;
  uint32_t *idx = (uint32_t *)malloc(9000 * sizeof(uint32_t));
  per_real *val = (per_real *)malloc(9000 * sizeof(per_real));
  uint32_t c, r, j;
  per_rng_init(&rng, 99);
  for (c = 0; c < sizeof caps / sizeof caps[0]; ++c) {
    uint32_t cap = caps[c];
    per_tree a, b;
    CHECK_OK(per_tree_init(&a, cap, NULL));
    CHECK_OK(per_tree_init(&b, cap, NULL));
    for (r = 0; r < 12; ++r) {
      uint32_t n = r % 4 == 0   ? 1
                   : r % 4 == 1 ? 9000
                                : 1 + per_rng_below(&rng, 600);
      uint32_t span =
          r % 3 == 0 ? cap : 1 + per_rng_below(&rng, cap < 40 ? cap : 40);
      uint32_t base = per_rng_below(&rng, cap - span + 1);
      for (j = 0; j < n; ++j) {
        idx[j] = base + per_rng_below(&rng, span);
        val[j] = mixed_value(&rng);
        if (r % 2 == 1 && val[j] == 0) val[j] = 0;
        if (j > 0 && per_rng_below(&rng, 8) == 0) idx[j] = idx[j - 1];
      }
      CHECK_OK(per_tree_set_batch(&a, idx, val, n));
      for (j = 0; j < n; ++j) CHECK_OK(per_tree_set(&b, idx[j], val[j]));
      CHECK_MEM(a.node, b.node, tree_nodes(&a) * sizeof(per_real));
    }
    CHECK_OK(per_tree_check(&a));
    per_tree_free(&a);
    per_tree_free(&b);
  }
  free(idx);
  free(val);
}

/* A tree over PERI_WALK_MAX_BYTES times its batch updates both ways on
   its first batches (where the build has a cycle counter) and keeps the
   faster: every batch, the trial ones, the ones after, and the other way
   forced afterwards, must leave the bytes per_tree_set one at a time
   leaves. */
static void test_fix_ways(void) {
  uint32_t cap = (uint32_t)((size_t)1 << 23) / (uint32_t)sizeof(per_real) + 1;
  uint32_t trials = PERI_FIX_WARM + 2 * PERI_FIX_TRIALS, r, j, n = 700;
  uint32_t timed = 0; /* batches timed each way */
  uint32_t *idx = (uint32_t *)malloc(n * sizeof(uint32_t));
  per_real *val = (per_real *)malloc(n * sizeof(per_real));
  per_tree a, b;
  per_rng rng;
  per_rng_init(&rng, 7);
  CHECK_OK(per_tree_init(&a, cap, NULL));
  CHECK_OK(per_tree_init(&b, cap, NULL));
  CHECK((size_t)a.leaves * 2 * sizeof(per_real) > PERI_WALK_MAX_BYTES);
  for (r = 0; r < trials + 8; ++r) {
    if (r == trials + 4) a.fix_walk = !a.fix_walk; /* the other way */
    for (j = 0; j < n; ++j) {
      idx[j] = per_rng_below(&rng, cap);
      val[j] = mixed_value(&rng);
      if (j > 0 && per_rng_below(&rng, 8) == 0) idx[j] = idx[j - 1];
    }
    CHECK_OK(per_tree_set_batch(&a, idx, val, n));
    for (j = 0; j < n; ++j) CHECK_OK(per_tree_set(&b, idx[j], val[j]));
    CHECK_MEM(a.node, b.node, tree_nodes(&a) * sizeof(per_real));
  }
#ifdef PERI_TICKS
  timed = PERI_FAST ? PERI_FIX_TRIALS : 0; /* PER_REFERENCE: level passes */
#endif
  CHECK(a.fix_calls == (timed ? trials : 0) &&
        a.fix_leaves[0] == (uint64_t)n * timed &&
        a.fix_leaves[1] == (uint64_t)n * timed);
  per_tree_free(&a);
  per_tree_free(&b);
  free(idx);
  free(val);
}

/* Sampling runs its descents in lockstep groups; every result must still
   be the one-at-a-time definition: stratum i of (seed, counter) is
   per_tree_descend of per_tree_stratum_u, for batch sizes and pieces that
   do and do not fill whole groups, sparse trees included. */
static void test_lockstep_strata(void) {
  static const uint32_t caps[] = {1, 2, 31, 33, 1000, 70000};
  per_rng rng;
  uint32_t *idx = (uint32_t *)malloc(3000 * sizeof(uint32_t));
  per_real *val = (per_real *)malloc(3000 * sizeof(per_real));
  uint32_t c, r, i;
  per_rng_init(&rng, 7);
  for (c = 0; c < sizeof caps / sizeof caps[0]; ++c) {
    per_tree t;
    CHECK_OK(per_tree_init(&t, caps[c], NULL));
    for (i = 0; i < caps[c]; ++i)
      CHECK_OK(per_tree_set(&t, i, mixed_value(&rng)));
    CHECK_OK(per_tree_set(&t, caps[c] - 1, 1));
    for (r = 0; r < 20; ++r) {
      uint64_t seed = ((uint64_t)per_rng_u32(&rng) << 32) | per_rng_u32(&rng);
      uint64_t ctr =
          r == 0 ? ~(uint64_t)0 - 5 : (uint64_t)per_rng_u32(&rng) << (r % 33);
      uint32_t B = 1 + per_rng_below(&rng, r % 2 ? 70 : 3000);
      uint32_t first = per_rng_below(&rng, B + 1);
      uint32_t count = per_rng_below(&rng, B - first + 1);
      per_real seg = per_tree_total(&t) / (per_real)B;
      uint32_t bad = 0;
      CHECK_OK(
          per_tree_sample_strata(&t, seed, ctr, B, first, count, idx, val));
      for (i = 0; i < count; ++i) {
        uint32_t want = per_tree_descend(
            t.node, t.leaves, per_tree_stratum_u(seed, ctr, first + i, seg));
        bad += idx[i] != want || val[i] != per_tree_get(&t, want);
      }
      CHECK_EQ_U(bad, 0);
    }
    per_tree_free(&t);
  }
  free(idx);
  free(val);
}

/* Same stream position: per_rng has no padding bytes (test_rng checks
   its size), so its bytes compare as its fields. */
static int rng_same(const per_rng *a, const per_rng *b) {
  return memcmp(a, b, sizeof *a) == 0;
}

/* i.i.d. and without-replacement draws in lockstep groups consume the rng
   exactly as one descent after another would: same leaves, same order,
   same rng state after. */
static void test_lockstep_draws(void) {
  static const uint32_t ks[] = {1, 7, 8, 31, 32, 33, 100, 1000};
  per_tree t;
  per_rng rng, a, b;
  uint32_t idx[1000], i, c;
  per_real val[1000];
  unsigned char *seen;
  per_cat cat;
  const uint32_t N = 20000;
  CHECK_OK(per_tree_init(&t, N, NULL));
  per_rng_init(&rng, 31337);
  for (i = 0; i < N; ++i) CHECK_OK(per_tree_set(&t, i, mixed_value(&rng)));
  seen = (unsigned char *)calloc(N, 1);
  CHECK_OK(per_cat_init(&cat, 1000, NULL));
  for (c = 0; c < sizeof ks / sizeof ks[0]; ++c) {
    uint32_t k = ks[c], bad = 0, m = 0;
    per_rng_init(&a, 1000 + k);
    (void)per_rng_u32(&a); /* start mid-block */
    b = a;
    CHECK_OK(per_tree_sample_iid(&t, &a, k, idx, val));
    for (i = 0; i < k; ++i) {
      uint32_t want = per_tree_descend(t.node, t.leaves,
                                       per_rng_real(&b) * per_tree_total(&t));
      bad += idx[i] != want || val[i] != per_tree_get(&t, want);
    }
    CHECK_EQ_U(bad, 0);
    CHECK(rng_same(&a, &b));
    /* without replacement: first occurrences of the same i.i.d. stream
       (k <= 1000 of ~13,000 positive leaves: far fewer repeats than the
       fallback's limit, so phase 1 does it all) */
    b = a;
    CHECK_OK(per_cat_sample(&cat, &t, &a, k, idx, val));
    memset(seen, 0, N);
    while (m < k) {
      uint32_t leaf = per_tree_descend(t.node, t.leaves,
                                       per_rng_real(&b) * per_tree_total(&t));
      if (seen[leaf]) continue;
      seen[leaf] = 1;
      bad += idx[m] != leaf || val[m] != per_tree_get(&t, leaf);
      ++m;
    }
    CHECK_EQ_U(bad, 0);
    CHECK(rng_same(&a, &b));
  }
  CHECK_OK(per_tree_check(&t));
  per_cat_free(&cat);
  free(seen);
  per_tree_free(&t);
}

/* ---- accuracy against an exact reference ------------------------------ */

/* N = 2^22 leaves in (0,1]; 10^6 stratified draws (1000 batches of 1000)
   compared with an exact search: long double prefix sums and binary search
   for the same u. Double trees must agree on >= 99.999% of draws. */
static void test_accuracy(void) {
  const uint32_t N = 1u << 22;
  per_tree t;
  per_rng rng;
  long double *pre;
  per_real *vals;
  uint32_t i, b, agree = 0, total_draws = 0;
  double frac;
  pre = (long double *)malloc(((size_t)N + 1) * sizeof(long double));
  vals = (per_real *)malloc((size_t)N * sizeof(per_real));
  CHECK(pre != NULL && vals != NULL);
  if (!pre || !vals) return;
  CHECK_OK(per_tree_init(&t, N, NULL));
  per_rng_init(&rng, 11);
  for (i = 0; i < N; ++i) vals[i] = 1 - per_rng_real(&rng); /* (0, 1] */
  CHECK_OK(per_tree_build(&t, vals, N));
  pre[0] = 0;
  for (i = 0; i < N; ++i) pre[i + 1] = pre[i] + (long double)vals[i];
  for (b = 0; b < 1000; ++b) {
    uint32_t idx[1000], j;
    uint64_t c0 = rng.counter;
    per_real seg = per_tree_total(&t) / 1000;
    CHECK_STATUS(per_tree_sample(&t, &rng, 1000, idx, NULL), PER_OK);
    for (j = 0; j < 1000; ++j) {
      long double u = (long double)per_tree_stratum_u(rng.seed, c0, j, seg);
      uint32_t lo = 0, hi = N - 1; /* smallest i with pre[i+1] > u */
      while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (pre[mid + 1] > u) hi = mid;
        else lo = mid + 1;
      }
      agree += (lo == idx[j]);
      ++total_draws;
    }
  }
  frac = (double)agree / total_draws;
  printf("accuracy: %s tree, N = 2^22: %.5f%% of %u stratified draws equal the "
         "exact search\n",
         IS_FLOAT ? "float" : "double", 100 * frac, total_draws);
  if (!IS_FLOAT) CHECK_MSG(frac >= 0.99999, "agreement %.7f", frac);
  else
    CHECK_MSG(frac >= 0.90, "float agreement %.7f",
              frac); /* measured 97.5%: docs/GUIDE.md */
  per_tree_free(&t);
  free(pre);
  free(vals);
}

/* ---- no drift ----------------------------------------------------------- */

/* 10^7 random updates (batches with duplicates and single sets), then
   every node bitwise equals an O(N) build of the same leaves. */
static void test_drift(void) {
  const uint32_t N = (1u << 16) + 3;
  per_tree t, fresh;
  per_rng rng;
  uint32_t idx[1000];
  per_real val[1000];
  per_real *leaves;
  uint32_t r, j, done = 0;
  CHECK_OK(per_tree_init(&t, N, NULL));
  CHECK_OK(per_tree_init(&fresh, N, NULL));
  per_rng_init(&rng, 12);
  for (r = 0; done < 10000000u; ++r) {
    for (j = 0; j < 1000; ++j) {
      idx[j] = per_rng_below(&rng, N);
      /* widely varying magnitudes make rounding matter */
      val[j] = per_rng_real(&rng) *
               (per_real)ldexp(1.0, (int)per_rng_below(&rng, 40) - 20);
    }
    if (r % 10 == 9) {
      for (j = 0; j < 1000; ++j) per_tree_set(&t, idx[j], val[j]);
    } else {
      per_tree_set_batch(&t, idx, val, 1000);
    }
    done += 1000;
  }
  leaves = (per_real *)malloc(N * sizeof(per_real));
  for (j = 0; j < N; ++j) leaves[j] = per_tree_get(&t, j);
  CHECK_OK(per_tree_build(&fresh, leaves, N));
  CHECK_OK(per_tree_check(&t));
  CHECK_MEM(t.node, fresh.node, tree_nodes(&t) * sizeof(per_real));
  free(leaves);
  per_tree_free(&t);
  per_tree_free(&fresh);
}

/* per_tree_find_batch is per_tree_find of each value, lockstep groups
   and their tails included: trees with zero leaves and of sizes around a
   power of two, values at every prefix boundary, 0, the total and past
   it; a bad value anywhere refuses the batch with nothing written. */
static void test_find_batch(void) {
  static const uint32_t caps[] = {1, 5, 64, 1000, 65539};
  static const uint32_t ns[] = {0, 1, 3, 7, 8, 9, 31, 100, 1000};
  static per_real u[1000], val[1000];
  static uint32_t idx[1000];
  per_rng r;
  size_t c, k;
  per_rng_init(&r, 5);
  for (c = 0; c < sizeof caps / sizeof caps[0]; ++c) {
    per_tree t;
    uint32_t i, bad = 0;
    per_real total;
    CHECK_OK(per_tree_init(&t, caps[c], NULL));
    for (i = 0; i < caps[c]; ++i)
      CHECK_OK(per_tree_set(&t, i,
                            i % 3 == 1 ? 0 : (per_real)per_rng_double(&r) * 4));
    CHECK_OK(per_tree_set(&t, 0, 1)); /* some mass in every tree */
    total = per_tree_total(&t);
    for (k = 0; k < sizeof ns / sizeof ns[0]; ++k) {
      uint32_t n = ns[k];
      for (i = 0; i < n; ++i) {
        switch (i % 4) {
          case 0: u[i] = (per_real)per_rng_double(&r) * total; break;
          case 1: u[i] = per_tree_prefix(&t, per_rng_below(&r, caps[c])); break;
          case 2: u[i] = i % 8 == 2 ? 0 : total; break;
          default: u[i] = total * (per_real)1.5; break;
        }
      }
      CHECK_OK(per_tree_find_batch(&t, u, n, idx, val));
      for (i = 0; i < n; ++i) {
        uint32_t one = 0;
        CHECK_OK(per_tree_find(&t, u[i], &one));
        bad += idx[i] != one || val[i] != per_tree_get(&t, one);
      }
    }
    CHECK_MSG(bad == 0, "capacity %u: %u values found elsewhere", caps[c], bad);
    /* refusals: nothing written */
    for (i = 0; i < 20; ++i) u[i] = total / 2, idx[i] = 777;
    u[13] = (per_real)NAN;
    CHECK_STATUS(per_tree_find_batch(&t, u, 20, idx, NULL), PER_ERR_NAN);
    u[13] = -1;
    CHECK_STATUS(per_tree_find_batch(&t, u, 20, idx, NULL), PER_ERR_NEGATIVE);
    CHECK_EQ_U(idx[0], 777);
    CHECK_EQ_U(idx[19], 777);
    CHECK_STATUS(per_tree_find_batch(&t, NULL, 1, idx, NULL), PER_ERR_NULL);
    CHECK_STATUS(per_tree_find_batch(&t, u, 1, NULL, NULL), PER_ERR_NULL);
    CHECK_OK(per_tree_find_batch(&t, NULL, 0, NULL, NULL));
    per_tree_clear(&t);
    u[13] = 0;
    CHECK_STATUS(per_tree_find_batch(&t, u, 20, idx, NULL), PER_ERR_EMPTY);
    per_tree_free(&t);
  }
}

int main(void) {
  test_seed_cases();
  test_random_updates();
  test_distribution();
  test_edges();
  test_extreme_values();
  test_bad_input();
  test_check_detects();
  test_alloc();
  test_strata();
  test_set_range();
  test_set_range_errors();
  test_batch_shapes();
  test_fix_ways();
  test_lockstep_strata();
  test_lockstep_draws();
  test_find_batch();
  test_accuracy();
  test_drift();
  return t_done(IS_FLOAT ? "tree (float)" : "tree (double)");
}
