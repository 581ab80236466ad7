/* det.c - the same seed gives the same bits whatever the build.

   per.h promises results that do not depend on the compiler, its
   optimization level, -march or floating-point contraction: no fused
   multiply-add (nor anything else a conforming optimizer may do) can change
   a result. This program exercises every layer from fixed seeds and prints
   one line per category,

       NAME HEX64

   HEX64 being a 64-bit FNV-1a hash of the bytes that category produced
   (integers and floating-point values hashed as their little-endian bit
   patterns), then `all HEX64` over the category hashes. tools/determinism.sh
   compiles it in several ways (gcc -O0 -std=c99 as the reference; -O3
   -march=native, forced FMA, clang, C++) and compares the lines.

   Valid C99 and C++11. PER_REAL comes from the command line (double, the
   default, or float). Every per_* status is checked: an unexpected one is
   printed to stderr and the program exits 2. It writes (and removes)
   checkpoint files det_<PER_REAL>_*.ckpt in the current directory.

   The program's own arithmetic must not depend on the build either, or it
   would blame per.h for its own contractions: every input value is made
   from integers with exact operations, or through det_mul (a product
   rounded by a volatile store, so it cannot be fused into a following add)
   and det_opaque (a value the compiler cannot fold, e.g. into a pow it
   would then evaluate at compile time). */
#define PER_IMPLEMENTATION
#include "per.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DET_STR2(x) #x
#define DET_STR(x) DET_STR2(x)

/* ---- hashes -------------------------------------------------------------- */

enum {
  H_RNG,
  H_TREE,
  H_IID,
  H_CAT,
  H_SWAP,
  H_IDS,
  H_ITEMS,
  H_WEIGHTS,
  H_WEIGHTS_BUFMAX,
  H_WINDOW,
  H_UNIQUE,
  H_ALPHA0,
  H_BETA,
  H_STATE,
  H_STALE,
  H_CKPT,
  H_NSTEP,
  H_SEQ,
  H_POW,
  H_COUNT
};

static const char *const det_names[H_COUNT] = {"rng",
                                               "tree",
                                               "iid",
                                               "cat",
                                               "swap",
                                               "buffer_ids",
                                               "buffer_items",
                                               "buffer_weights",
                                               "buffer_weights_bufmax",
                                               "buffer_window",
                                               "buffer_unique",
                                               "buffer_alpha0",
                                               "beta",
                                               "buffer_state",
                                               "stale",
                                               "checkpoint",
                                               "nstep",
                                               "sequences",
                                               "pow"};

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t det_h[H_COUNT];

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = (const unsigned char *)p;
  size_t i;
  for (i = 0; i < n; ++i) {
    h ^= s[i];
    h *= FNV_PRIME;
  }
  return h;
}

static void h_bytes(int c, const void *p, size_t n) {
  det_h[c] = fnv(det_h[c], p, n);
}

static void h_u32(int c, uint32_t v) {
  unsigned char b[4];
  b[0] = (unsigned char)v;
  b[1] = (unsigned char)(v >> 8);
  b[2] = (unsigned char)(v >> 16);
  b[3] = (unsigned char)(v >> 24);
  h_bytes(c, b, 4);
}

static void h_u64(int c, uint64_t v) {
  h_u32(c, (uint32_t)v);
  h_u32(c, (uint32_t)(v >> 32));
}

static void h_f32(int c, float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  h_u32(c, u);
}

static void h_f64(int c, double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  h_u64(c, u);
}

static void h_real(int c, per_real v) {
  if (sizeof(per_real) == sizeof(float)) h_f32(c, (float)v);
  else h_f64(c, (double)v);
}

/* name(c, p, n): the n values at p, each hashed by `one`. */
#define H_ARRAY(name, type, one)                     \
  static void name(int c, const type *p, size_t n) { \
    size_t i;                                        \
    for (i = 0; i < n; ++i) one(c, p[i]);            \
  }
H_ARRAY(h_u32s, uint32_t, h_u32)
H_ARRAY(h_u64s, uint64_t, h_u64)
H_ARRAY(h_reals, per_real, h_real)
H_ARRAY(h_f32s, float, h_f32)

static void h_rng(int c, const per_rng *r) {
  h_u64(c, r->seed);
  h_u64(c, r->counter);
  h_u32s(c, r->buf, 4);
  h_u32(c, r->avail);
}

/* ---- checks and exact helpers -------------------------------------------- */

static void det_fail(const char *what, int line, per_status got,
                     per_status want) {
  fprintf(stderr, "det.c:%d: %s returned %s (%d), expected %s\n", line, what,
          per_status_str(got), (int)got, per_status_str(want));
  exit(2);
}

#define EXPECT(call, want)                                           \
  do {                                                               \
    per_status det_s_ = (call);                                      \
    if (det_s_ != (want)) det_fail(#call, __LINE__, det_s_, (want)); \
  } while (0)
#define CHECK(call) EXPECT(call, PER_OK)

static void det_die(const char *what, int line) {
  fprintf(stderr, "det.c:%d: %s\n", line, what);
  exit(2);
}
#define REQUIRE(cond)                                             \
  do {                                                            \
    if (!(cond)) det_die("requirement failed: " #cond, __LINE__); \
  } while (0)

static void *det_alloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) det_die("out of memory", __LINE__);
  memset(p, 0, n ? n : 1);
  return p;
}

/* a * b rounded to double: the volatile store keeps it from being fused
   with whatever the caller adds to it. */
static double det_mul(double a, double b) {
  volatile double v = a * b;
  return v;
}

static float det_mulf(float a, float b) {
  volatile float v = a * b;
  return v;
}

/* x, opaque to the optimizer. */
static double det_opaque(double x) {
  volatile double v = x;
  return v;
}

/* An integer mix (splitmix64's finalizer). */
static uint64_t det_mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/* Non-trivial leaf values: (k * 0.37 + 0.001)^1.3 (per.h's pow: the same
   bits with every libm), some zeros, a few large and tiny ones. */
static per_real det_leaf(uint32_t k) {
  double base;
  if (k % 11 == 3) return 0;
  base = det_mul((double)k, 0.37) + 0.001;
  if (k % 17 == 5) base = det_mul(base, 1e4);
  if (k % 23 == 7) base = det_mul(base, 1e-5);
  return (per_real)peri_pow(det_opaque(base), det_opaque(1.3));
}

/* The next representable per_real above v. */
static per_real det_next_up(per_real v) {
  if (sizeof(per_real) == sizeof(float))
    return (per_real)nextafterf((float)v, (float)HUGE_VAL);
  return (per_real)nextafter((double)v, HUGE_VAL);
}

static per_real det_next_down(per_real v) {
  if (sizeof(per_real) == sizeof(float))
    return (per_real)nextafterf((float)v, 0.0f);
  return (per_real)nextafter((double)v, 0.0);
}

/* ---- rng ----------------------------------------------------------------- */

static void det_rng(void) {
  static const uint64_t seeds[] = {
      0, 1, 42, 0xffffffffffffffffull, 0x0123456789abcdefull, 0x100000000ull};
  static const uint32_t ns[] = {
      0,           1,           2,          3,           7,
      10,          1000,        65537,      0x7fffffffu, 0x80000001u,
      0xc0000000u, 0xfffffffeu, 0xffffffffu};
  size_t si, j;
  for (si = 0; si < sizeof seeds / sizeof seeds[0]; ++si) {
    per_rng r;
    per_rng_init(&r, seeds[si]);
    for (j = 0; j < 257; ++j) h_u32(H_RNG, per_rng_u32(&r));
    for (j = 0; j < 40 * (sizeof ns / sizeof ns[0]); ++j)
      h_u32(H_RNG, per_rng_below(&r, ns[j % (sizeof ns / sizeof ns[0])]));
    for (j = 0; j < 300; ++j) {
      h_f64(H_RNG, per_rng_double(&r));
      h_f32(H_RNG, per_rng_float(&r));
      h_real(H_RNG, per_rng_real(&r));
      if (j % 7 == 0) h_u32(H_RNG, per_rng_u32(&r)); /* odd word positions */
    }
    h_rng(H_RNG, &r);
  }
  {
    uint32_t out[4];
    per_rng_block(0x243f6a8885a308d3ull, 0x13198a2e03707344ull, out);
    h_u32s(H_RNG, out, 4);
  }
}

/* ---- tree ---------------------------------------------------------------- */

static void h_tree_nodes(int c, const per_tree *t) {
  h_u32(c, t->capacity);
  h_u32(c, t->leaves);
  h_reals(c, t->node, (size_t)2 * t->leaves);
}

/* Fill a tree with det_leaf values through the three setters. */
static void det_fill(per_tree *t, uint32_t salt) {
  uint32_t cap = t->capacity, i, n, *idx;
  per_real *val;
  for (i = 0; i < cap; i += 1 + (i % 3))
    CHECK(per_tree_set(t, i, det_leaf(i + salt)));
  n = cap < 4096 ? cap : 4096;
  idx = (uint32_t *)det_alloc(sizeof(uint32_t) * n);
  val = (per_real *)det_alloc(sizeof(per_real) * cap);
  for (i = 0; i < n; ++i) {
    /* duplicates: every fifth index repeats an earlier one */
    idx[i] = (i % 5 == 4) ? idx[i / 2]
                          : (uint32_t)(det_mix((uint64_t)i + salt) % cap);
    val[i] = det_leaf(i * 3 + 1 + salt);
  }
  CHECK(per_tree_set_batch(t, idx, val, n));
  CHECK(per_tree_set_batch(t, idx, val, 1));
  CHECK(per_tree_set_batch(t, idx + 1, val, n / 3));
  for (i = 0; i < cap; ++i) val[i] = det_leaf(i * 5 + 2 + salt);
  CHECK(per_tree_set_range(t, 0, val, n < 300 ? n : 300));
  CHECK(per_tree_set_range(t, cap / 3, val, (cap - cap / 3) / 2));
  CHECK(per_tree_set_range(t, cap - 1, val + 7, 1));
  CHECK(per_tree_check(t));
  free(idx);
  free(val);
}

static void det_tree_queries(per_tree *t, uint64_t seed) {
  static const uint32_t Bs[] = {1, 3, 15, 16, 17, 63, 64, 65, 200, 1000, 4097};
  per_real total = per_tree_total(t), u;
  uint32_t i, idx, cap = t->capacity;
  uint32_t *out;
  per_real *val;
  per_rng r;
  size_t bi;
  h_real(H_TREE, total);
  /* find: 0, the total, just past it, far past it, many fractions of it,
     the exact prefix boundaries and just below them */
  CHECK(per_tree_find(t, 0, &idx));
  h_u32(H_TREE, idx);
  CHECK(per_tree_find(t, total, &idx));
  h_u32(H_TREE, idx);
  u = det_next_up(total);
  CHECK(per_tree_find(t, u, &idx));
  h_u32(H_TREE, idx);
  u = det_next_up(u);
  CHECK(per_tree_find(t, u, &idx));
  h_u32(H_TREE, idx);
  CHECK(per_tree_find(t, (per_real)det_mul((double)total, 2.5), &idx));
  h_u32(H_TREE, idx);
  for (i = 0; i <= 997; ++i) {
    u = (per_real)det_mul((double)total, (double)i / 997.0);
    h_real(H_TREE, u);
    CHECK(per_tree_find(t, u, &idx));
    h_u32(H_TREE, idx);
  }
  for (i = 0; i <= cap; i += 1 + i % 5) {
    u = per_tree_prefix(t, i);
    h_real(H_TREE, u);
    CHECK(per_tree_find(t, u, &idx));
    h_u32(H_TREE, idx);
    if (u > 0) {
      CHECK(per_tree_find(t, det_next_down(u), &idx));
      h_u32(H_TREE, idx);
    }
    h_real(H_TREE, per_tree_get(t, i));
  }
  /* stratified batches, whole and as strata split among "threads" */
  out = (uint32_t *)det_alloc(sizeof(uint32_t) * 4097);
  val = (per_real *)det_alloc(sizeof(per_real) * 4097);
  per_rng_init(&r, seed);
  for (bi = 0; bi < sizeof Bs / sizeof Bs[0]; ++bi) {
    uint32_t B = Bs[bi], first, count;
    CHECK(per_tree_sample(t, &r, B, out, val));
    h_u32s(H_TREE, out, B);
    h_reals(H_TREE, val, B);
    CHECK(per_tree_sample(t, &r, B, out, NULL));
    h_u32s(H_TREE, out, B);
    h_rng(H_TREE, &r);
    for (first = 0; first < B; first += count) {
      count = 1 + (first * 7 + B) % 97;
      if (count > B - first) count = B - first;
      CHECK(per_tree_sample_strata(t, seed + 1, (uint64_t)B * 1000, B, first,
                                   count, out, val));
      h_u32s(H_TREE, out, count);
      h_reals(H_TREE, val, count);
    }
  }
  free(out);
  free(val);
}

/* iid draws (with replacement) from the tree. */
static void det_iid(per_tree *t, uint64_t seed) {
  static const uint32_t ks[] = {1, 5, 15, 16, 17, 64, 65, 300, 2000};
  uint32_t *idx = (uint32_t *)det_alloc(sizeof(uint32_t) * 2000);
  per_real *val = (per_real *)det_alloc(sizeof(per_real) * 2000);
  per_rng r;
  size_t i;
  per_rng_init(&r, seed);
  for (i = 0; i < 2 * sizeof ks / sizeof ks[0]; ++i) {
    uint32_t k = ks[i % (sizeof ks / sizeof ks[0])];
    if (i % 4 == 1) h_u32(H_IID, per_rng_u32(&r)); /* start mid-block */
    CHECK(per_tree_sample_iid(t, &r, k, idx, (i & 1) ? NULL : val));
    h_u32s(H_IID, idx, k);
    if (!(i & 1)) h_reals(H_IID, val, k);
    h_rng(H_IID, &r);
  }
  free(idx);
  free(val);
}

/* Categorical draws without replacement. */
static void det_cat(per_tree *t, uint64_t seed) {
  uint32_t cap = t->capacity, positive = 0, i, k;
  uint32_t *idx = (uint32_t *)det_alloc(sizeof(uint32_t) * cap);
  per_real *val = (per_real *)det_alloc(sizeof(per_real) * cap);
  per_cat c;
  per_rng r;
  for (i = 0; i < cap; ++i) positive += per_tree_get(t, i) > 0;
  CHECK(per_cat_init(&c, cap, NULL));
  per_rng_init(&r, seed);
  for (k = 1; k <= positive; k = k < 40 ? k + 7 : k * 2 + 1) {
    CHECK(per_cat_sample(&c, t, &r, k, idx, val));
    h_u32s(H_CAT, idx, k);
    h_reals(H_CAT, val, k);
    h_rng(H_CAT, &r);
  }
  /* all positive leaves: the fallback phase */
  CHECK(per_cat_sample(&c, t, &r, positive, idx, NULL));
  h_u32s(H_CAT, idx, positive);
  CHECK(per_cat_sample(&c, t, &r, positive - 1, idx, val));
  h_u32s(H_CAT, idx, positive - 1);
  h_reals(H_CAT, val, positive - 1);
  /* the fallback from the first repeat on, and from the start */
  c.reject_limit = 1;
  CHECK(per_cat_sample(&c, t, &r, positive / 2, idx, val));
  h_u32s(H_CAT, idx, positive / 2);
  c.reject_limit = 0;
  CHECK(per_cat_sample(&c, t, &r, positive / 3, idx, val));
  h_u32s(H_CAT, idx, positive / 3);
  h_reals(H_CAT, val, positive / 3);
  c.reject_limit = c.max_k;
  /* more than the positive leaves */
  if (positive < cap)
    EXPECT(per_cat_sample(&c, t, &r, positive + 1, idx, val), PER_ERR_TOO_FEW);
  h_rng(H_CAT, &r);
  h_tree_nodes(H_CAT, t); /* bitwise unchanged */
  per_cat_free(&c);
  free(idx);
  free(val);
}

static void det_tree(void) {
  per_tree t, big, built;
  per_real *val, *mem;
  uint32_t i;
  /* 1000 leaves: the walk-up path of set_batch (a tree below 1 MiB) */
  CHECK(per_tree_init(&t, 1000, NULL));
  det_fill(&t, 0);
  det_tree_queries(&t, 1234);
  h_tree_nodes(H_TREE, &t);
  /* above 1 MiB: the level-by-level path */
  CHECK(per_tree_init(&big, 140000, NULL));
  det_fill(&big, 77);
  det_tree_queries(&big, 99);
  h_tree_nodes(H_TREE, &big);
  /* build */
  mem = (per_real *)det_alloc(per_tree_bytes(333));
  CHECK(per_tree_init_mem(&built, 333, mem, per_tree_bytes(333)));
  val = (per_real *)det_alloc(sizeof(per_real) * 333);
  for (i = 0; i < 333; ++i) val[i] = det_leaf(i * 13 + 5);
  CHECK(per_tree_build(&built, val, 300));
  det_tree_queries(&built, 5);
  h_tree_nodes(H_TREE, &built);
  free(val);

  det_iid(&t, 2024);
  det_iid(&big, 2025);
  det_iid(&built, 2026);
  det_cat(&t, 31);
  det_cat(&built, 32);
  per_tree_free(&t);
  per_tree_free(&big);
  per_tree_free(&built);
  free(mem);
}

/* ---- swap ---------------------------------------------------------------- */

static void det_swap(void) {
  static const uint32_t ns[] = {1,   10,   10,   100,  100,
                                200, 1000, 1000, 1000, 1000};
  static const uint32_t ks[] = {1, 3, 10, 64, 70, 150, 1000, 999, 63, 500};
  per_swap s;
  per_rng r;
  uint32_t out[1000], *mem = (uint32_t *)det_alloc(per_swap_bytes(1000));
  size_t i;
  CHECK(per_swap_init_mem(&s, 1000, mem, per_swap_bytes(1000)));
  per_rng_init(&r, 555);
  for (i = 0; i < 3 * sizeof ns / sizeof ns[0]; ++i) {
    size_t j = i % (sizeof ns / sizeof ns[0]);
    uint32_t n = ns[j] > s.n ? ns[j] : s.n, k = ks[j] < n ? ks[j] : n;
    CHECK(per_swap_grow(&s, n));
    if (i % 3 == 1) h_u32(H_SWAP, per_rng_u32(&r)); /* words buffered */
    CHECK(per_swap_sample(&s, &r, k, out));
    h_u32s(H_SWAP, out, k);
    h_rng(H_SWAP, &r);
  }
  h_u32s(H_SWAP, s.perm, s.capacity);
  per_swap_free(&s);
  free(mem);
}

/* ---- buffer -------------------------------------------------------------- */

enum { M_PLAIN, M_BUFMAX, M_WINDOW, M_UNIQUE, M_UNIQUE_ZERO, M_ALPHA0 };

typedef struct det_buf {
  const char *name;
  per_config cfg;
  int mode;
  per_buffer b;
  uint64_t next_item; /* add index of the next item */
  uint64_t *prev_ids; /* the previous sample call's ids */
  uint32_t nprev;
} det_buf;

#define DET_MAX_B 300

/* Item bytes from the add index. */
static void det_item(unsigned char *p, uint32_t size, uint64_t k) {
  uint64_t h = det_mix(k ^ 0x5eed);
  uint32_t j;
  for (j = 0; j < size; ++j)
    p[j] = (unsigned char)(j < 8 ? k >> (8 * j) : h >> (8 * (j % 8)));
  p[0] ^= (unsigned char)(h >> 56);
}

/* A td error from an id: +-(1 + f) * 2^e, f a multiple of 2^-16, e in
   [-10, 10] (1e-3 .. 2e3), sometimes 0. Exact. */
static float det_td(uint64_t id, uint32_t round) {
  uint64_t h = det_mix(id * 31 + round);
  double m = (double)(65536 + (h & 0xffff)) / 65536.0;
  int e = (int)((h >> 16) % 21) - 10;
  if ((h >> 40) % 13 == 0) return 0.0f;
  return (float)(((h >> 48) & 1) ? -ldexp(m, e) : ldexp(m, e));
}

static void det_buf_init(det_buf *d, const char *name, int mode, uint32_t cap,
                         uint32_t isz, double alpha, double beta0, double beta1,
                         uint64_t beta_steps, double eps, double max_priority,
                         uint64_t seed, uint32_t flags) {
  memset(d, 0, sizeof *d);
  d->name = name;
  d->mode = mode;
  d->cfg = per_config_default(cap, isz);
  d->cfg.alpha = alpha;
  d->cfg.beta0 = beta0;
  d->cfg.beta1 = beta1;
  d->cfg.beta_steps = beta_steps;
  d->cfg.eps = eps;
  d->cfg.max_priority = max_priority;
  d->cfg.seed = seed;
  d->cfg.flags = flags;
  CHECK(per_buffer_init(&d->b, &d->cfg, NULL));
  d->prev_ids = (uint64_t *)det_alloc(sizeof(uint64_t) * DET_MAX_B);
}

static void det_buf_adds(det_buf *d, uint32_t round) {
  uint32_t isz = d->cfg.item_size, cap = d->cfg.capacity, n, j;
  unsigned char *items;
  if (round % 3 == 0) {
    /* a batch; for the small buffers sometimes more than the capacity */
    n = (uint32_t)(det_mix(round + 7) % (cap < 100 ? 3 * cap : 60)) +
        (round == 0);
    items = (unsigned char *)det_alloc((size_t)(n ? n : 1) * isz);
    for (j = 0; j < n; ++j)
      det_item(items + (size_t)j * isz, isz, d->next_item++);
    CHECK(per_buffer_add_batch(&d->b, items, n));
    free(items);
  } else {
    unsigned char item[64];
    n = 1 + round % 4;
    for (j = 0; j < n; ++j) {
      det_item(item, isz, d->next_item++);
      CHECK(per_buffer_add(&d->b, item));
    }
  }
}

/* Leaves > 0 among the W newest slots. */
static uint32_t det_positive(const per_buffer *b, uint32_t W) {
  uint32_t cap = b->cfg.capacity, p, n = 0;
  for (p = 0; p < W; ++p)
    n += per_tree_get(&b->tree,
                      (uint32_t)(((uint64_t)b->pos + cap - 1 - p) % cap)) > 0;
  return n;
}

/* Make the k newest items' leaves 0 (td 0 with eps 0): a window of k is
   then degenerate (sampled uniformly). */
static void det_zero_newest(det_buf *d, uint32_t k) {
  per_buffer *b = &d->b;
  uint32_t cap = b->cfg.capacity, j, stale = 99;
  uint64_t ids[16];
  float zero[16];
  for (j = 0; j < k; ++j) {
    uint32_t slot = (b->pos + cap - 1 - j) % cap;
    ids[j] = (uint64_t)slot | ((uint64_t)b->gen[slot] << 32);
    zero[j] = 0.0f;
  }
  CHECK(per_buffer_update(b, ids, zero, k, &stale));
  REQUIRE(stale == 0);
}

/* One sample call and its update. */
static void det_buf_sample(det_buf *d, uint32_t round, uint32_t call) {
  static const uint32_t Bs[] = {32, 64, 7, 300, 1, 256, 257, 16, 100, 5};
  static const uint32_t Ws[] = {1, 10, 100, 37, 500, 999, 1000, 5000, 2, 64};
  per_buffer *b = &d->b;
  uint32_t B = Bs[(round + call * 3) % (sizeof Bs / sizeof Bs[0])];
  uint32_t W = Ws[(round * 7 + call) % (sizeof Ws / sizeof Ws[0])],
           size = b->size;
  uint32_t isz = d->cfg.item_size, stale = 12345, j;
  uint64_t ids[DET_MAX_B];
  float w[DET_MAX_B], td[DET_MAX_B];
  unsigned char *items = (unsigned char *)det_alloc((size_t)DET_MAX_B * isz);
  per_sample_opts o;
  int c_ids = H_IDS, c_items = H_ITEMS, c_w = H_WEIGHTS;
  memset(&o, 0, sizeof o);
  if ((round + call) % 5 == 4) {
    o.flags |= PER_SAMPLE_BETA;
    o.beta = (double)((round + call) % 11) / 8.0;
  }
  switch (d->mode) {
    case M_PLAIN: break;
    case M_BUFMAX:
      c_w = H_WEIGHTS_BUFMAX;
      if (round % 4 == 1) o.flags |= PER_SAMPLE_UNIQUE;
      if (round % 6 == 5) o.window = W;
      break;
    case M_WINDOW:
      c_ids = c_items = c_w = H_WINDOW;
      o.window = W;
      break;
    case M_UNIQUE:
    case M_UNIQUE_ZERO:
      c_ids = c_items = c_w = H_UNIQUE;
      o.flags |= PER_SAMPLE_UNIQUE;
      if (round % 2 == 1) o.window = W;
      if (d->mode == M_UNIQUE_ZERO && round % 7 == 3) {
        /* a degenerate window: uniform draws (Floyd's when unique) */
        o.window = 1 + round % 16 < size ? 1 + round % 16 : size;
        det_zero_newest(d, o.window);
        if (round % 14 == 3) o.flags &= ~(uint32_t)PER_SAMPLE_UNIQUE;
      }
      break;
    case M_ALPHA0:
      c_ids = c_items = c_w = H_ALPHA0;
      if (round % 3 == 1) o.flags |= PER_SAMPLE_UNIQUE;
      if (round % 4 >= 2) o.window = W;
      break;
  }
  if (o.flags & PER_SAMPLE_UNIQUE) {
    uint32_t eligible = (o.window && o.window < size) ? o.window : size;
    if (B > eligible) B = eligible;
    if (b->zero_hint) {
      uint32_t pos = det_positive(b, eligible);
      if (pos == 0) B = eligible < 3 ? eligible : 3; /* degenerate */
      else if (B > pos) B = pos;
    }
  }
  h_f64(H_BETA, per_buffer_beta(b));
  h_u64(H_BETA, b->step);
  CHECK(per_buffer_sample(b, B, &o, items, ids, w));
  h_u64s(c_ids, ids, B);
  h_bytes(c_items, items, (size_t)B * isz);
  h_f32s(c_w, w, B);
  h_rng(c_ids, &b->rng);
  if (call == 1 && round % 4 == 0) {
    /* outputs may be NULL; a second batch into weights only */
    h_f64(H_BETA, per_buffer_beta(b));
    CHECK(per_buffer_sample(b, B, &o, NULL, NULL, w));
    h_f32s(c_w, w, B);
  }
  for (j = 0; j < B; ++j) td[j] = det_td(ids[j], round);
  CHECK(per_buffer_update(b, ids, td, B, &stale));
  REQUIRE(stale == 0);
  h_u32(H_STALE, stale);
  /* the previous call's ids: those of items overwritten since (by this
     round's adds) are stale */
  if (d->nprev > 0) {
    for (j = 0; j < d->nprev; ++j) td[j] = det_td(d->prev_ids[j], round + 1000);
    CHECK(per_buffer_update(b, d->prev_ids, td, d->nprev, &stale));
    h_u32(H_STALE, stale);
  }
  memcpy(d->prev_ids, ids, sizeof(uint64_t) * B);
  d->nprev = B;
  free(items);
}

static void h_buf_state(int c, const per_buffer *b) {
  uint32_t cap = b->cfg.capacity;
  h_tree_nodes(c, &b->tree);
  h_u32s(c, b->gen, cap);
  h_bytes(c, b->items, (size_t)cap * b->cfg.item_size);
  if (b->min_node) h_reals(c, b->min_node, (size_t)2 * b->tree.leaves);
  if (b->swap.perm) {
    h_u32(c, b->swap.n);
    h_u32s(c, b->swap.perm, cap);
  }
  h_real(c, b->max_leaf);
  h_u64(c, b->step);
  h_u64(c, b->added);
  h_u32(c, b->pos);
  h_u32(c, b->size);
  h_u32(c, b->zero_hint);
  h_rng(c, &b->rng);
}

/* Save, hash the file, load into a fresh buffer, hash that and a batch of
   each (they must be the same batch). */
static void det_ckpt(det_buf *d) {
  char path[128];
  FILE *f;
  unsigned char chunk[4096];
  size_t got;
  per_buffer fresh;
  uint32_t crc = 0, rank;
  uint64_t ids[2][64];
  float w[2][64];
  sprintf(path, "det_%s_%s.ckpt", DET_STR(PER_REAL), d->name);
  CHECK(per_buffer_save(&d->b, path));
  f = fopen(path, "rb");
  if (!f) det_die("cannot reopen the checkpoint", __LINE__);
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
    h_bytes(H_CKPT, chunk, got);
    crc = per_crc32c(crc, chunk, got);
  }
  fclose(f);
  h_u32(H_CKPT, crc);
  CHECK(per_buffer_init(&fresh, &d->cfg, NULL));
  CHECK(per_buffer_load(&fresh, path));
  CHECK(per_buffer_check(&fresh));
  h_buf_state(H_CKPT, &fresh);
  h_f64(H_CKPT, per_buffer_beta(&fresh));
  CHECK(per_buffer_sample(&d->b, 64, NULL, NULL, ids[0], w[0]));
  CHECK(per_buffer_sample(&fresh, 64, NULL, NULL, ids[1], w[1]));
  REQUIRE(memcmp(ids[0], ids[1], sizeof ids[0]) == 0);
  REQUIRE(memcmp(w[0], w[1], sizeof w[0]) == 0);
  h_u64s(H_CKPT, ids[1], 64);
  h_f32s(H_CKPT, w[1], 64);
  per_buffer_free(&fresh);
  for (rank = 0; rank < 3; ++rank) {
    CHECK(per_buffer_init(&fresh, &d->cfg, NULL));
    CHECK(per_buffer_load_shard(&fresh, path, rank, 3));
    CHECK(per_buffer_check(&fresh));
    h_buf_state(H_CKPT, &fresh);
    per_buffer_free(&fresh);
  }
  remove(path);
}

/* IS weights on the edge. A beta one ulp off changes a float weight only
   when the weight lies within about |ln x| ulps (of double) of a float
   rounding boundary, so random batches almost never show it. Here beta0 is
   chosen so that at step STEP the weight (1/100)^beta of leaf 100 against
   leaf 1 sits on a boundary exactly when the schedule's
   beta0 + (beta1 - beta0) * (step / beta_steps) is rounded twice versus
   once (a fused multiply-add): a build that fuses it gets another float
   weight. The search uses per.h's own pow (the buffer's, peri_pow_f),
   det_fma and nextafter (the same bits with every libm; the arguments
   opaque so nothing is folded at compile time) and exact or det_mul
   arithmetic. */
/* a * b + c rounded once, as a fused multiply-add gives it (but for rare
   double roundings), from exact operations: not libm's fma, which
   MinGW's runtime does not round once. */
static double det_fma(double a, double b, double c) {
  double a1, a2, b1, b2, p, pl, s, e;
  peri_split(a, &a1, &a2);
  peri_split(b, &b1, &b2);
  p = det_mul(a, b);
  pl = ((a1 * b1 - p) + a1 * b2 + a2 * b1) + a2 * b2; /* a b = p + pl */
  s = peri_two_sum(c, p, &e);
  return s + (e + pl);
}

/* ln(v) / ln(x) for v, x in (0, 1): the b in (0, 4) with x^b = v, by
   bisection on peri_pow_f (no libm log, whose last bit varies). */
static double det_log_ratio(double v, double x) {
  double lo = 0, hi = 4;
  int i;
  for (i = 0; i < 80; ++i) {
    double mid = (lo + hi) / 2;
    if (peri_pow_f(det_opaque(x), det_opaque(mid)) > v) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

#define DET_STEPS 777u
#define DET_STEP 100u
static double det_edge_beta0(void) {
  const double x = (double)(per_real)1 / (double)(per_real)100;
  const double q = (double)DET_STEP / (double)DET_STEPS;
  float w0 = (float)peri_pow_f(det_opaque(x), det_opaque(0.7));
  int j, k;
  for (j = 0; j < 256; ++j) {
    float lo = w0, hi;
    double mid, target, b0;
    int i;
    for (i = 0; i < j; ++i) lo = nextafterf(lo, 1.0f);
    hi = nextafterf(lo, 1.0f);
    mid = ((double)lo + (double)hi) / 2; /* exact */
    target = det_log_ratio(mid, x);
    b0 = (target - q) / (1.0 - q); /* target = b0 + (1 - b0) q */
    for (k = 0; k < 64; ++k) b0 = nextafter(b0, 0.0);
    for (k = 0; k < 129; ++k, b0 = nextafter(b0, 1.0)) {
      double d = 1.0 - b0;
      double twice = b0 + det_mul(d, q);
      double once = det_fma(det_opaque(d), det_opaque(q), det_opaque(b0));
      if (twice != once &&
          (float)peri_pow_f(det_opaque(x), det_opaque(twice)) !=
              (float)peri_pow_f(det_opaque(x), det_opaque(once)))
        return b0;
    }
  }
  return 0.5; /* not found (a libm without a near case): a plain schedule */
}

/* Two items with leaves 1 and 100 (alpha 1, eps 0), DET_STEP sample calls,
   then the batch at the edge; weights normalized by the batch (B = 256:
   leaf 1, with 1/101 of the mass, is in every such batch) and by the
   buffer. */
static void det_edge(double beta0) {
  uint32_t flags;
  for (flags = 0; flags <= (uint32_t)PER_WEIGHTS_BUFFER_MAX;
       flags += PER_WEIGHTS_BUFFER_MAX) {
    int cw = flags ? H_WEIGHTS_BUFMAX : H_WEIGHTS;
    det_buf d;
    uint64_t ids[2], got[256];
    float td[2], w[256];
    unsigned char item[8];
    uint32_t s, j, stale = 99;
    det_buf_init(&d, "edge", M_PLAIN, 4, 8, 1.0, beta0, 1.0, DET_STEPS, 0, 1,
                 19, flags);
    for (j = 0; j < 2; ++j) {
      det_item(item, 8, j);
      CHECK(per_buffer_add(&d.b, item));
      ids[j] = (uint64_t)j | ((uint64_t)d.b.gen[j] << 32);
    }
    td[0] = 1.0f;
    td[1] = -100.0f;
    CHECK(per_buffer_update(&d.b, ids, td, 2, &stale));
    REQUIRE(stale == 0);
    for (s = 0; s <= DET_STEP + 2; ++s) {
      uint32_t B = s == DET_STEP ? 256 : 2;
      h_f64(H_BETA, per_buffer_beta(&d.b));
      CHECK(per_buffer_sample(&d.b, B, NULL, NULL, got, w));
      h_u64s(H_IDS, got, B);
      h_f32s(cw, w, B);
    }
    h_buf_state(H_STATE, &d.b);
    per_buffer_free(&d.b);
    free(d.prev_ids);
  }
}

static void det_buffers(void) {
  enum { NB = 8, ROUNDS = 300 };
  det_buf *d = (det_buf *)det_alloc(sizeof(det_buf) * NB);
  uint32_t round, i, call;
  /* name mode capacity item_size alpha beta0 beta1 beta_steps eps
     max_priority seed flags */
  det_buf_init(&d[0], "plain", M_PLAIN, 1000, 8, 0.6, 0.4, 1, 777, 1e-6, 1, 11,
               0);
  det_buf_init(&d[1], "small", M_PLAIN, 37, 12, 0.7, 0.4, 1, 500, 1e-6, 1e6, 12,
               0);
  det_buf_init(&d[2], "bufmax", M_BUFMAX, 1000, 8, 0.7, 0.3, 0.9, 500, 1e-6, 1,
               13, PER_WEIGHTS_BUFFER_MAX);
  det_buf_init(&d[3], "window", M_WINDOW, 1000, 12, 0.6, 0.5, 0.9, 777, 1e-6, 1,
               14, 0);
  det_buf_init(&d[4], "unique", M_UNIQUE, 1000, 8, 0.7, 0.4, 1, 333, 1e-6, 1e6,
               15, 0);
  det_buf_init(&d[5], "unique0", M_UNIQUE_ZERO, 37, 12, 0.6, 0.1, 1, 500, 0, 1,
               16, 0);
  det_buf_init(&d[6], "alpha0", M_ALPHA0, 1000, 8, 0, 0.4, 1, 777, 1e-6, 1, 17,
               0);
  det_buf_init(&d[7], "alpha0s", M_ALPHA0, 37, 12, 0, 0, 1, 500, 1e-6, 1, 18,
               PER_WEIGHTS_BUFFER_MAX);
  for (round = 0; round < ROUNDS; ++round) {
    for (i = 0; i < NB; ++i) {
      det_buf_adds(&d[i], round);
      for (call = 0; call < 2; ++call) det_buf_sample(&d[i], round, call);
    }
  }
  for (i = 0; i < NB; ++i) {
    CHECK(per_buffer_check(&d[i].b));
    h_buf_state(H_STATE, &d[i].b);
    det_ckpt(&d[i]);
    per_buffer_free(&d[i].b);
    free(d[i].prev_ids);
  }
  free(d);
  det_edge(det_edge_beta0());
}

/* ---- sequences ----------------------------------------------------------- */

/* Sequence replay: steps with episode ends, sequence draws (whole,
   window, unique) with masks, IS weights (batch and buffer max), updates
   from B x L TD errors, the sequence tree, and a checkpoint round trip. */
static void det_seq(void) {
  enum { B = 24 };
  static const uint32_t shape[2][5] = {
      /* capacity, L, stride, flags, item */
      {600, 8, 4, PER_SEQ_CROSS_EPISODES | PER_WEIGHTS_BUFFER_MAX, 8},
      {90, 5, 5, 0, 12}};
  uint32_t k, round, j;
  for (k = 0; k < 2; ++k) {
    per_config c = per_config_default(shape[k][0], shape[k][4]);
    per_buffer b, l;
    uint64_t next = 0, ids[B];
    unsigned char *items, *out;
    uint8_t ends[40], mask[B * 8];
    float w[B], *td;
    char path[64];
    c.seq_len = shape[k][1];
    c.seq_stride = shape[k][2];
    c.flags = shape[k][3];
    c.alpha = k ? 0.7 : 0.6;
    c.eps = k ? 0 : 1e-6;
    c.seq_eta = k ? 0.75 : 0.9;
    c.seed = 21 + k;
    CHECK(per_buffer_init(&b, &c, NULL));
    items = (unsigned char *)det_alloc((size_t)40 * c.item_size);
    out = (unsigned char *)det_alloc((size_t)B * c.seq_len * c.item_size);
    td = (float *)det_alloc(sizeof(float) * B * c.seq_len);
    for (round = 0; round < 200; ++round) {
      uint32_t n = 1 + (uint32_t)(det_mix(round * 3 + k) % 40), nb;
      per_sample_opts o;
      per_status s;
      for (j = 0; j < n; ++j) {
        uint64_t h = det_mix(next ^ 0xe9d);
        det_item(items + (size_t)j * c.item_size, c.item_size, next++);
        ends[j] = (uint8_t)(h % 23 == 0   ? PER_END_TERMINATED
                            : h % 31 == 0 ? PER_END_TRUNCATED
                                          : 0);
      }
      CHECK(per_buffer_add_steps(&b, items, n, ends));
      memset(&o, 0, sizeof o);
      o.flags =
          PER_SAMPLE_SEQUENCES | (round % 5 == 4 ? PER_SAMPLE_UNIQUE : 0u);
      o.window =
          round % 3 == 1 ? 1 + (uint32_t)(det_mix(round) % c.capacity) : 0;
      o.mask = mask;
      nb = round % 5 == 4 ? 3 : B;
      s = per_buffer_sample(&b, nb, &o, out, ids, w);
      h_u32(H_SEQ, (uint32_t)s);
      if (s != PER_OK) {
        if (s != PER_ERR_TOO_FEW) CHECK(s);
        continue;
      }
      h_u64s(H_SEQ, ids, nb);
      h_f32s(H_SEQ, w, nb);
      h_bytes(H_SEQ, mask, (size_t)nb * c.seq_len);
      h_bytes(H_SEQ, out, (size_t)nb * c.seq_len * c.item_size);
      for (j = 0; j < nb * c.seq_len; ++j)
        td[j] = det_td(ids[j / c.seq_len] + j, round);
      CHECK(per_buffer_update_seq(&b, ids, td, nb, NULL));
    }
    CHECK(per_buffer_check(&b));
    h_tree_nodes(H_SEQ, &b.seq_tree);
    h_bytes(H_SEQ, b.seq_ok, b.seq_tree.capacity);
    h_buf_state(H_SEQ, &b);
    sprintf(path, "det_%s_seq%u.ckpt", DET_STR(PER_REAL), (unsigned)k);
    CHECK(per_buffer_save(&b, path));
    CHECK(per_buffer_init(&l, &c, NULL));
    CHECK(per_buffer_load(&l, path));
    if (memcmp(l.seq_tree.node, b.seq_tree.node,
               (size_t)b.seq_tree.leaves * 2 * sizeof(per_real)) != 0)
      det_die("sequence tree differs after a load", __LINE__);
    remove(path);
    per_buffer_free(&l);
    per_buffer_free(&b);
    free(items);
    free(out);
    free(td);
  }
}

/* ---- nstep --------------------------------------------------------------- */

enum { OBS = 6, ACT = 3 };

/* Rewards of episode e: 0.1 k - 0.37 (k the step of the whole run), or,
   every fourth episode, three rewards that cancel: r0 + g r1 + g^2 r2 is
   tiny while g^2 r2 is not exact in double, so a fused multiply-add in the
   discounted sum changes the float that is stored. */
static void det_rewards(float *r, uint32_t len, uint32_t e, uint32_t *k,
                        float gamma) {
  uint32_t t;
  for (t = 0; t < len; ++t, ++*k) r[t] = det_mulf(0.1f, (float)*k) - 0.37f;
  if (e % 4 == 2 && len >= 3) {
    double g1 = (double)gamma, g2 = det_mul(g1, g1), P, R;
    P = det_mul(g2, (double)r[2]);
    r[0] = -(float)P;
    R = P + (double)r[0];
    r[1] = -(float)(R / g1);
  }
}

static void det_nstep(void) {
  per_nstep a[3];
  per_nstep_config nc[3];
  per_buffer b;
  per_config cfg;
  uint32_t i, e, t, k = 0;
  per_nstep_layout l;
  memset(nc, 0, sizeof nc);
  nc[0].n = 3;
  nc[0].gamma = 0.99f;
  nc[1].n = 5;
  nc[1].gamma = 0.9f;
  nc[2].n = 1;
  nc[2].gamma = 0.97f;
  for (i = 0; i < 3; ++i) {
    nc[i].obs_size = OBS;
    nc[i].action_size = ACT;
    CHECK(per_nstep_init(&a[i], &nc[i], NULL));
  }
  l = per_nstep_layout_of(&nc[0]);
  cfg = per_config_default(8192, l.size);
  cfg.beta_steps = 777;
  cfg.seed = 21;
  CHECK(per_buffer_init(&b, &cfg, NULL));
  for (e = 0; e < 240; ++e) {
    per_nstep *ad = &a[e % 3];
    uint32_t len = 1 + (uint32_t)(det_mix(e) % 12);
    float r[16];
    int term = e % 3 == 0 || e % 5 == 0, trunc = e % 3 != 0;
    if (e % 4 == 2) len = 3; /* the cancelling episodes end at 3 steps */
    det_rewards(r, len, e, &k, ad->cfg.gamma);
    for (t = 0; t < len; ++t) {
      unsigned char obs[OBS], act[ACT], next[OBS];
      uint32_t j;
      int last = t + 1 == len;
      for (j = 0; j < OBS; ++j) {
        obs[j] = (unsigned char)(e * 13 + t * 7 + j);
        next[j] = (unsigned char)(e * 13 + (t + 1) * 7 + j);
      }
      for (j = 0; j < ACT; ++j) act[j] = (unsigned char)(e + t * 3 + j);
      if (e % 29 == 11 && t == 1) {
        float nan_reward = (float)det_opaque(0.0) / (float)det_opaque(0.0);
        EXPECT(per_nstep_step(ad, &b, obs, act, nan_reward, next, 0, 0),
               PER_ERR_NAN);
      }
      CHECK(per_nstep_step(ad, &b, obs, act, r[t], next, last && term,
                           last && trunc));
    }
    if (e % 37 == 36) {
      /* an episode cut off from outside: pending steps dropped */
      unsigned char z[OBS + ACT];
      memset(z, 0, sizeof z);
      CHECK(per_nstep_step(ad, &b, z, z, 1.0f, z, 0, 0));
      per_nstep_reset(ad);
    }
  }
  h_u32(H_NSTEP, b.size);
  h_u32(H_NSTEP, b.pos);
  h_u64(H_NSTEP, b.added);
  h_bytes(H_NSTEP, b.items, (size_t)b.size * b.cfg.item_size);
  per_buffer_free(&b);
  for (i = 0; i < 3; ++i) per_nstep_free(&a[i]);
}

/* ---- main ---------------------------------------------------------------- */

/* per.h's pow on its own (peri_pow: priorities with double leaves;
   peri_pow_f: weights and float leaves) over 2^18 inputs made from random
   bits: x any positive finite double (subnormals included), y in
   [2^-20, 2^20) (both ends of the range: 0, overflow). Builds that use
   the CPU's FMA for the exact products and those that do not must agree. */
static void det_pow(void) {
  uint32_t i, w[4];
  for (i = 0; i < (1u << 18); ++i) {
    uint64_t bx, by;
    double x, y;
    per_rng_block(2718, i, w);
    bx = ((uint64_t)w[0] << 32 | w[1]) % 0x7fefffffffffffffull + 1;
    by = ((uint64_t)(1003 + w[2] % 40) << 52) |
         (((uint64_t)w[3] << 20) & 0xfffffffffffffull);
    memcpy(&x, &bx, 8);
    memcpy(&y, &by, 8);
    x = det_opaque(x);
    y = det_opaque(y);
    h_f64(H_POW, peri_pow(x, y));
    h_f64(H_POW, peri_pow_f(x, y));
  }
}

int main(void) {
  uint64_t all = FNV_OFFSET;
  int c;
  for (c = 0; c < H_COUNT; ++c) det_h[c] = FNV_OFFSET;
  det_rng();
  det_tree();
  det_swap();
  det_buffers();
  det_nstep();
  det_seq();
  det_pow();
  for (c = 0; c < H_COUNT; ++c) {
    unsigned char b[8];
    int j;
    printf("%s %08lx%08lx\n", det_names[c], (unsigned long)(det_h[c] >> 32),
           (unsigned long)(det_h[c] & 0xffffffffu));
    for (j = 0; j < 8; ++j) b[j] = (unsigned char)(det_h[c] >> (8 * j));
    all = fnv(all, b, 8);
  }
  printf("all %08lx%08lx\n", (unsigned long)(all >> 32),
         (unsigned long)(all & 0xffffffffu));
  return 0;
}
