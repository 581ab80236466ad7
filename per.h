/* per.h - prioritized experience replay in one C header.       v0.1.0
   https://example.invalid/per   (no warranty; LICENSE: see end of file)

   Do this:
      #define PER_IMPLEMENTATION
   before you include this file in *one* C or C++ file to create the
   implementation. Every other file includes it without the define:

      // in exactly one .c file
      #define PER_IMPLEMENTATION
      #include "per.h"

   CONTENTS
      1. Status codes ........ per_status, per_status_str          >>status
      2. Random numbers ...... per_rng, per_philox4x32_10          >>rng
      3. Sum tree ............ per_tree_*                          >>tree
      4. Uniform sampler ..... per_swap_* (without replacement)    >>swap
      5. Categorical sampler . per_tree_sample_iid, per_cat_*      >>cat
      (grep the implementation for the >>markers)

   QUICK START
      per_tree t;
      per_rng rng;
      uint32_t idx[32];
      per_real val[32];
      if (per_tree_init(&t, 1000, NULL) != PER_OK) ...;
      per_tree_set(&t, 7, 2.5);                  // leaf 7 gets priority 2.5
      per_rng_init(&rng, 42);                    // seed 42, counter 0
      per_status s = per_tree_sample(&t, &rng, 32, idx, val);  // stratified
      if (s != PER_OK) fprintf(stderr, "%s\n", per_status_str(s));
      per_tree_free(&t);

   THE TREE LAYOUT (shared with the CUDA companion, per_cuda.h)
      capacity C >= 1, L = the smallest power of two >= C, one array of 2L
      per_real values: node[1] is the root (the total), node k has children
      2k and 2k+1, leaf i is node[L+i], padded leaves [L+C, 2L) and node[0]
      are 0. Every internal node is *recomputed* from its two children,
      never patched by a delta, so node[k] == node[2k] + node[2k+1] holds
      exactly, the tree never drifts, and the same leaves always give the
      same bits. A tree can move between host and device by memcpy.

   COMPILE-TIME OPTIONS (define before including)
      PER_REAL            node type, `double` (default) or `float`. Double
                          keeps sampling exact at 2^24 leaves; float halves
                          memory. Must be the same in every file and on the
                          GPU side.
      PER_STATIC          make every function static to the including file
      PER_MALLOC(sz,ctx)  allocator, default malloc; `ctx` is the alloc_ctx
      PER_FREE(p,ctx)     given to the init function. Define both or neither.
      PER_ASSERT(x)       internal invariant checks, default assert(x)

   BUILD FLAGS
      Compile with -ffp-contract=off (the Meson build does) if you need the
      CPU to match the GPU bit for bit; the arithmetic is written so that no
      fused multiply-add can change a result, but the flag removes doubt.
      -ffast-math is not supported (it removes the NaN/infinity checks).

   ERRORS
      Every fallible function returns a per_status (PER_OK == 0). On any
      error the structure is left exactly as it was (byte for byte): batches
      are validated completely before any of them is applied. No function
      aborts or exits.

   THREADS
      No global state; every function is reentrant. One structure is not
      safe for concurrent writers, nor for a writer concurrent with readers.
      Const functions (sampling from a const per_tree) may run concurrently
      on one tree; per_tree_sample_strata lets threads split one batch and
      get the same result as one thread.

   REVISION HISTORY
      0.1.0  sum tree, Philox RNG, uniform and categorical samplers
*/
#ifndef PER_H_INCLUDED
#define PER_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef PER_REAL
#define PER_REAL double
#endif
typedef PER_REAL per_real;

#ifdef PER_STATIC
#if defined(__GNUC__) || defined(__clang__)
#define PERDEF static __attribute__((unused))
#else
#define PERDEF static
#endif
#else
#define PERDEF extern
#endif

/* PER_HD marks the small functions that host and device code share: the
   RNG, the descent and the parent recomputation. One source of truth. */
#if defined(__CUDACC__)
#define PER_HD __host__ __device__
#else
#define PER_HD
#endif
#define PER_INLINE static inline

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
   1. Status codes                                                >>status
   ====================================================================== */

/* One list makes both the enum and the messages. New codes go at the end
   so existing values never change. */
#define PER_STATUS_LIST(X)                                                   \
  X(PER_OK, "ok")                                                            \
  X(PER_ERR_NULL, "a required pointer argument is NULL")                     \
  X(PER_ERR_NOMEM, "memory allocation failed")                               \
  X(PER_ERR_CAPACITY, "capacity out of range (1 .. 2^31)")                   \
  X(PER_ERR_MEMORY, "caller memory block too small or misaligned")          \
  X(PER_ERR_INDEX, "index out of range")                                     \
  X(PER_ERR_NAN, "value is NaN")                                             \
  X(PER_ERR_INF, "value is infinite")                                        \
  X(PER_ERR_NEGATIVE, "value is negative")                                   \
  X(PER_ERR_RANGE, "value too large (above PER_LEAF_MAX)")                   \
  X(PER_ERR_BATCH, "batch size is zero or larger than allowed")              \
  X(PER_ERR_EMPTY, "nothing to sample: the total priority is zero")          \
  X(PER_ERR_DEGENERATE, "the total priority is not finite")                  \
  X(PER_ERR_TOO_FEW, "fewer items with positive priority than requested")    \
  X(PER_ERR_CORRUPT, "structure is inconsistent (invariant violated)")       \
  X(PER_ERR_ARG, "invalid argument")

typedef enum per_status {
#define PER__STATUS_ENUM(name, msg) name,
  PER_STATUS_LIST(PER__STATUS_ENUM)
#undef PER__STATUS_ENUM
  PER_STATUS_COUNT
} per_status;

/* A static English message for any status; "unknown status" for values
   outside the enum. Never NULL. */
PERDEF const char *per_status_str(per_status s);

/* ======================================================================
   2. Random numbers: Philox4x32-10, counter based                  >>rng
   ======================================================================
   A stream is (seed, counter): block c of seed s is
   philox4x32_10(ctr = {lo(c), hi(c), 0, 0}, key = {lo(s), hi(s)}), four
   32-bit words. The same (seed, counter) gives the same words on every
   machine and on the GPU. per_rng is a caller-owned stream position that
   hands those words out one at a time. */

typedef struct per_rng {
  uint64_t seed;    /* key of the stream */
  uint64_t counter; /* next block to generate */
  uint32_t buf[4];  /* the current block */
  uint32_t avail;   /* words of buf not handed out yet (0..4) */
  uint32_t pad;     /* always 0: the struct has no padding bytes, so its
                       bytes can be compared and saved as they are */
} per_rng;

/* Philox4x32 with 10 rounds (Salmon et al., SC'11), matching Random123's
   philox4x32_10 and its known-answer vectors. */
PER_INLINE PER_HD void per_philox4x32_10(const uint32_t ctr[4],
                                         const uint32_t key[2],
                                         uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  int r;
  for (r = 0; r < 10; ++r) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0;
    uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* Block `counter` of stream `seed`. */
PER_INLINE PER_HD void per_rng_block(uint64_t seed, uint64_t counter,
                                     uint32_t out[4]) {
  uint32_t ctr[4], key[2];
  ctr[0] = (uint32_t)counter;
  ctr[1] = (uint32_t)(counter >> 32);
  ctr[2] = 0;
  ctr[3] = 0;
  key[0] = (uint32_t)seed;
  key[1] = (uint32_t)(seed >> 32);
  per_philox4x32_10(ctr, key, out);
}

/* Uniform float in [0,1) from the top 24 bits of one word:
   (w >> 8) * 2^-24. */
PER_INLINE PER_HD float per_u01f(uint32_t w) {
  return (float)(w >> 8) * (1.0f / 16777216.0f);
}

/* Uniform double in [0,1) from 53 bits of two words: the top 27 bits of
   hi and the top 26 of lo, ((hi >> 5) * 2^26 + (lo >> 6)) * 2^-53. Exact:
   every step is an integer below 2^53 or a multiplication by a power of
   two. */
PER_INLINE PER_HD double per_u01d(uint32_t hi, uint32_t lo) {
  uint64_t m = ((uint64_t)(hi >> 5) << 26) | (uint64_t)(lo >> 6);
  return (double)m * (1.0 / 9007199254740992.0);
}

/* Uniform per_real in [0,1) from a block: 24 bits (float) or 53 bits
   (double) taken from its first words. */
PER_INLINE PER_HD per_real per_u01_real(const uint32_t w[4]) {
  if (sizeof(per_real) == sizeof(float)) return (per_real)per_u01f(w[0]);
  return (per_real)per_u01d(w[0], w[1]);
}

/* Start a stream at block 0 of `seed`. */
PERDEF void per_rng_init(per_rng *r, uint64_t seed);
/* Next 32-bit word of the stream (four per block, in order). */
PERDEF uint32_t per_rng_u32(per_rng *r);
/* Uniform integer in [0, n) without modulo bias (Lemire's multiply-shift
   with rejection). n == 0 returns 0. */
PERDEF uint32_t per_rng_below(per_rng *r, uint32_t n);
/* Uniform double in [0,1), 53 random bits (two words). */
PERDEF double per_rng_double(per_rng *r);
/* Uniform float in [0,1), 24 random bits (one word). */
PERDEF float per_rng_float(per_rng *r);
/* Uniform per_real in [0,1): per_rng_float or per_rng_double. */
PERDEF per_real per_rng_real(per_rng *r);

/* ======================================================================
   3. Sum tree                                                       >>tree
   ====================================================================== */

/* Largest capacity: 2^31 leaves (the node array then has 2^32 values). */
#define PER_MAX_CAPACITY 0x80000000u

/* Largest accepted leaf value. Chosen so that the sum of PER_MAX_CAPACITY
   such leaves is still finite: the total of a valid tree is never infinite.
   (1e290 for double, 1e28 for float.) */
#define PER_LEAF_MAX \
  ((per_real)(sizeof(per_real) == sizeof(float) ? 1e28 : 1e290))

typedef struct per_tree {
  per_real *node;     /* 2*leaves values; node[1] is the root */
  uint32_t capacity;  /* C: leaves in use are [0, C) */
  uint32_t leaves;    /* L: smallest power of two >= C */
  uint32_t depth;     /* log2(L): levels above the leaves */
  uint32_t owns;      /* 1 when node was allocated with PER_MALLOC */
  void *alloc_ctx;    /* passed to PER_MALLOC / PER_FREE */
} per_tree;

/* PER_OK when v may be a leaf (finite, >= 0, <= PER_LEAF_MAX), else why
   not: PER_ERR_NAN, PER_ERR_INF, PER_ERR_NEGATIVE or PER_ERR_RANGE. Reads
   the bits, so it keeps working under -ffinite-math-only. */
PER_INLINE PER_HD per_status per_leaf_status(per_real v) {
  if (sizeof(per_real) == sizeof(double)) {
    uint64_t b;
    double d = (double)v;
    memcpy(&b, &d, sizeof b);
    if (((b >> 52) & 0x7ffu) == 0x7ffu)
      return (b & 0xfffffffffffffull) ? PER_ERR_NAN : PER_ERR_INF;
  } else {
    uint32_t b;
    float f = (float)v;
    memcpy(&b, &f, sizeof b);
    if (((b >> 23) & 0xffu) == 0xffu)
      return (b & 0x7fffffu) ? PER_ERR_NAN : PER_ERR_INF;
  }
  if (v < 0) return PER_ERR_NEGATIVE;
  if (v > PER_LEAF_MAX) return PER_ERR_RANGE;
  return PER_OK;
}

/* One step of the descent by prefix mass `u` (DESIGN §2), from internal
   node k to the child it returns: go left when u < left; otherwise subtract
   left and go right, except when the right child has no mass, then go left
   (and go right whenever the left child has no mass). Whenever node[k] > 0
   the child returned has mass, for every u: 0, the total, past the total,
   even NaN or negative. Branch-free; `*u - 0` leaves *u's bits as they are,
   so this is exactly "if (go right) *u -= left". */
PER_INLINE PER_HD uint32_t per_tree_step(const per_real *node, uint32_t k,
                                         per_real *u) {
  per_real left = node[2 * k];
  per_real right = node[2 * k + 1];
  uint32_t go_right = ((uint32_t)!(*u < left) & (uint32_t)(right > 0)) |
                      (uint32_t)!(left > 0);
  *u -= go_right ? left : (per_real)0;
  return 2 * k + go_right;
}

/* Leaf index of the descent by prefix mass u from the root: per_tree_step
   until a leaf. When node[1] > 0 the leaf has a value > 0. */
PER_INLINE PER_HD uint32_t per_tree_descend(const per_real *node,
                                            uint32_t leaves, per_real u) {
  uint32_t k = 1;
  while (k < leaves) k = per_tree_step(node, k, &u);
  return k - leaves;
}

/* node[k] = node[2k] + node[2k+1]: the only way a parent gets a value. */
PER_INLINE PER_HD void per_tree_recompute(per_real *node, uint32_t k) {
  node[k] = node[2 * k] + node[2 * k + 1];
}

/* Prefix mass of stratum i of a B-batch drawn with block (seed, counter+i):
   u_i = (i + r_i) * seg with seg = total / B and r_i uniform in [0,1). */
PER_INLINE PER_HD per_real per_tree_stratum_u(uint64_t seed, uint64_t counter,
                                              uint32_t i, per_real seg) {
  uint32_t w[4];
  per_rng_block(seed, counter + i, w);
  return ((per_real)i + per_u01_real(w)) * seg;
}

/* Bytes of the node array for `capacity` leaves: 2L * sizeof(per_real);
   0 when capacity is 0 or above PER_MAX_CAPACITY (or size_t overflows). */
PERDEF size_t per_tree_bytes(uint32_t capacity);

/* Allocate a tree of `capacity` leaves, all 0. `alloc_ctx` goes to
   PER_MALLOC/PER_FREE (NULL is fine). Errors: PER_ERR_NULL,
   PER_ERR_CAPACITY, PER_ERR_NOMEM. On error *t is set to an empty tree
   that per_tree_free accepts. */
PERDEF per_status per_tree_init(per_tree *t, uint32_t capacity,
                                void *alloc_ctx);

/* Same, in caller-owned memory `mem` of `bytes` >= per_tree_bytes(capacity)
   bytes, aligned for per_real. The tree never frees it. Errors:
   PER_ERR_NULL, PER_ERR_CAPACITY, PER_ERR_MEMORY. */
PERDEF per_status per_tree_init_mem(per_tree *t, uint32_t capacity,
                                    void *mem, size_t bytes);

/* Release the node array (when the tree owns it) and zero *t. Safe on a
   zeroed or already freed tree and on NULL. */
PERDEF void per_tree_free(per_tree *t);

/* Set every node to 0. */
PERDEF void per_tree_clear(per_tree *t);

/* Leaf i = v, then recompute its ancestors. v must be finite, >= 0 and
   <= PER_LEAF_MAX (-0 is stored as +0). Errors: PER_ERR_NULL,
   PER_ERR_INDEX (i >= capacity), PER_ERR_NAN, PER_ERR_INF,
   PER_ERR_NEGATIVE, PER_ERR_RANGE. */
PERDEF per_status per_tree_set(per_tree *t, uint32_t i, per_real v);

/* Leaves idx[j] = val[j] for j in [0,n). The whole batch is validated
   first (same errors as per_tree_set; nothing is written on error).
   Duplicate indices: the last one wins. Parents are then recomputed level
   by level, each touched parent exactly once, after all of its children
   are final. O(n log L), no allocation. n == 0 is a no-op. The result is
   bitwise identical to applying per_tree_set to each pair in order. */
PERDEF per_status per_tree_set_batch(per_tree *t, const uint32_t *idx,
                                     const per_real *val, size_t n);

/* Replace every leaf: leaf i = val[i] for i < n, 0 for n <= i < capacity,
   then recompute every internal node: O(L). n <= capacity. Validated first
   (PER_ERR_INDEX when n > capacity). */
PERDEF per_status per_tree_build(per_tree *t, const per_real *val,
                                 uint32_t n);

/* Leaf i, or 0 when i >= capacity. */
PERDEF per_real per_tree_get(const per_tree *t, uint32_t i);

/* The total (root) of the tree; 0 for an empty tree. */
PERDEF per_real per_tree_total(const per_tree *t);

/* Sum of the leaves [0, i) from the tree's partial sums, O(log L); i is
   clamped to capacity. */
PERDEF per_real per_tree_prefix(const per_tree *t, uint32_t i);

/* Leaf whose prefix interval holds u (per_tree_descend). u >= total gives
   the last leaf with mass. Errors: PER_ERR_NULL, PER_ERR_NAN (u is NaN),
   PER_ERR_NEGATIVE (u < 0), PER_ERR_EMPTY (total 0), PER_ERR_DEGENERATE
   (total not finite). */
PERDEF per_status per_tree_find(const per_tree *t, per_real u,
                                uint32_t *idx);

/* Stratified batch of B draws: stratum i in [0,B) draws u_i =
   (i + r_i) * total / B, r_i from block (rng->seed, rng->counter + i), and
   descends. idx[i] gets the leaf, val[i] its value (val may be NULL; the
   probability is val[i] / per_tree_total). On success rng->counter
   advances by B and the stream's buffered words are dropped; on error
   nothing changes. Every index has a value > 0. Errors: PER_ERR_NULL,
   PER_ERR_BATCH (B == 0), PER_ERR_EMPTY, PER_ERR_DEGENERATE. */
PERDEF per_status per_tree_sample(const per_tree *t, per_rng *rng,
                                  uint32_t B, uint32_t *idx, per_real *val);

/* Strata [first, first + count) of the B-batch that per_tree_sample would
   draw from (seed, counter), written to idx[0..count) and val[0..count).
   Threads that split [0,B) among themselves get exactly the batch of one
   per_tree_sample call. count == 0 is a no-op. Errors as per_tree_sample,
   plus PER_ERR_INDEX when first + count > B. */
PERDEF per_status per_tree_sample_strata(const per_tree *t, uint64_t seed,
                                         uint64_t counter, uint32_t B,
                                         uint32_t first, uint32_t count,
                                         uint32_t *idx, per_real *val);

/* Check everything the tree promises: node[0] == 0, leaves finite and in
   [0, PER_LEAF_MAX], padded leaves 0, node[k] == node[2k] + node[2k+1]
   exactly for every internal k. O(L). PER_OK or PER_ERR_CORRUPT (or
   PER_ERR_NULL). For tests, debugging and data from outside. */
PERDEF per_status per_tree_check(const per_tree *t);

/* ======================================================================
   4. Uniform sampling without replacement: partial Fisher-Yates   >>swap
   ======================================================================
   perm[0..n) is always a permutation of [0, n). A batch of k swaps k
   uniformly chosen positions to the front: O(1) per draw, no reset between
   batches. n grows as a buffer fills, without re-initialising. */

typedef struct per_swap {
  uint32_t *perm;    /* capacity entries */
  uint32_t n;        /* items currently eligible: [0, n) */
  uint32_t capacity; /* most items n can grow to */
  uint32_t owns;     /* 1 when perm was allocated with PER_MALLOC */
  void *alloc_ctx;
} per_swap;

/* Bytes for `capacity` entries; 0 when capacity is 0 or too large. */
PERDEF size_t per_swap_bytes(uint32_t capacity);
/* A sampler for up to `capacity` items with n = 0. Errors: PER_ERR_NULL,
   PER_ERR_CAPACITY, PER_ERR_NOMEM (then *s is empty and freeable). */
PERDEF per_status per_swap_init(per_swap *s, uint32_t capacity,
                                void *alloc_ctx);
/* Same in caller memory (aligned for uint32_t). PER_ERR_MEMORY when too
   small or misaligned. */
PERDEF per_status per_swap_init_mem(per_swap *s, uint32_t capacity,
                                    void *mem, size_t bytes);
/* Release and zero. Safe on a zeroed sampler and on NULL. */
PERDEF void per_swap_free(per_swap *s);
/* Let items [0, n) be drawn. n may only grow: PER_ERR_ARG when
   n < s->n, PER_ERR_CAPACITY when n > capacity. O(1). */
PERDEF per_status per_swap_grow(per_swap *s, uint32_t n);
/* k distinct indices, uniform over the k-subsets of [0, n) and in uniform
   random order, into out[0..k). Errors: PER_ERR_NULL, PER_ERR_EMPTY
   (n == 0), PER_ERR_BATCH (k == 0 or k > n). */
PERDEF per_status per_swap_sample(per_swap *s, per_rng *rng, uint32_t k,
                                  uint32_t *out);

/* ======================================================================
   5. Categorical sampling over a tree                                >>cat
   ====================================================================== */

/* k independent draws proportional to the leaves (with replacement):
   u = r * total, r = per_rng_real(rng). val may be NULL. Errors:
   PER_ERR_NULL, PER_ERR_BATCH (k == 0), PER_ERR_EMPTY,
   PER_ERR_DEGENERATE; on error rng is unchanged. */
PERDEF per_status per_tree_sample_iid(const per_tree *t, per_rng *rng,
                                      uint32_t k, uint32_t *idx,
                                      per_real *val);

/* Workspace for sampling without replacement, sized for batches up to
   max_k. */
typedef struct per_cat {
  uint32_t max_k;
  uint32_t hbits;        /* hash table has 2^hbits slots */
  uint32_t *table;       /* open addressing, key = index + 1, 0 = empty */
  per_real *saved;       /* leaf values zeroed by the fallback */
  uint32_t reject_limit; /* repeats tolerated before the fallback; see below */
  uint32_t owns;
  void *alloc_ctx;
} per_cat;

/* Allocate the workspace for batches of up to max_k (>= 1). Errors:
   PER_ERR_NULL, PER_ERR_BATCH (max_k == 0 or > 2^30), PER_ERR_NOMEM (then
   *c is empty and freeable). reject_limit starts at max_k. */
PERDEF per_status per_cat_init(per_cat *c, uint32_t max_k, void *alloc_ctx);
/* Release and zero. Safe on a zeroed workspace and on NULL. */
PERDEF void per_cat_free(per_cat *c);

/* k distinct leaves drawn by successive sampling (each pick proportional
   to the leaves not picked yet), in pick order, into idx[0..k); val[j]
   (may be NULL) is the leaf's value. Method: i.i.d. draws keeping first
   occurrences, which has exactly the successive-sampling distribution;
   once a call has seen c->reject_limit repeats (at most 64k + 1024 count;
   0 skips this phase) it switches to zeroing the picked leaves and drawing
   from the rest, then restores them. The tree
   is bitwise unchanged afterwards, on success and on every error (it is
   written to during the call: no concurrent readers). Errors:
   PER_ERR_NULL, PER_ERR_BATCH (k == 0 or k > max_k), PER_ERR_EMPTY,
   PER_ERR_DEGENERATE, PER_ERR_TOO_FEW (fewer than k positive leaves).
   The rng advances on success and may have advanced on PER_ERR_TOO_FEW;
   on the other errors it is unchanged. */
PERDEF per_status per_cat_sample(per_cat *c, per_tree *t, per_rng *rng,
                                 uint32_t k, uint32_t *idx, per_real *val);

#ifdef __cplusplus
}
#endif

#endif /* PER_H_INCLUDED */

/* ======================================================================
   IMPLEMENTATION
   ====================================================================== */
#if defined(PER_IMPLEMENTATION) && !defined(PER_IMPLEMENTATION_INCLUDED)
#define PER_IMPLEMENTATION_INCLUDED

#include <string.h>

#if defined(PER_MALLOC) && defined(PER_FREE)
/* user allocator */
#elif !defined(PER_MALLOC) && !defined(PER_FREE)
#include <stdlib.h>
#define PER_MALLOC(sz, ctx) ((void)(ctx), malloc(sz))
#define PER_FREE(p, ctx) ((void)(ctx), free(p))
#else
#error "per.h: define both PER_MALLOC and PER_FREE, or neither"
#endif

#ifndef PER_ASSERT
#include <assert.h>
#define PER_ASSERT(x) assert(x)
#endif

#if defined(__GNUC__) || defined(__clang__)
#define PER__PREFETCH(p) __builtin_prefetch(p)
#else
#define PER__PREFETCH(p) ((void)(p))
#endif

/* Descents run in lockstep groups of this many (sampling functions). */
#ifndef PER__LANES
#define PER__LANES 32
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* >>status */
PERDEF const char *per_status_str(per_status s) {
  switch (s) {
#define PER__STATUS_MSG(name, msg) \
  case name:                       \
    return msg;
    PER_STATUS_LIST(PER__STATUS_MSG)
#undef PER__STATUS_MSG
    default:
      break;
  }
  return "unknown status";
}

/* >>rng */
PERDEF void per_rng_init(per_rng *r, uint64_t seed) {
  r->seed = seed;
  r->counter = 0;
  r->buf[0] = r->buf[1] = r->buf[2] = r->buf[3] = 0;
  r->avail = 0;
  r->pad = 0;
}

PERDEF uint32_t per_rng_u32(per_rng *r) {
  if (r->avail == 0) {
    per_rng_block(r->seed, r->counter, r->buf);
    r->counter += 1;
    r->avail = 4;
  }
  return r->buf[4 - r->avail--];
}

PERDEF uint32_t per_rng_below(per_rng *r, uint32_t n) {
  uint64_t m;
  uint32_t lo;
  if (n == 0) return 0;
  m = (uint64_t)per_rng_u32(r) * n;
  lo = (uint32_t)m;
  if (lo < n) {
    uint32_t threshold = (uint32_t)(0u - n) % n; /* 2^32 mod n */
    while (lo < threshold) {
      m = (uint64_t)per_rng_u32(r) * n;
      lo = (uint32_t)m;
    }
  }
  return (uint32_t)(m >> 32);
}

PERDEF double per_rng_double(per_rng *r) {
  uint32_t hi = per_rng_u32(r);
  uint32_t lo = per_rng_u32(r);
  return per_u01d(hi, lo);
}

PERDEF float per_rng_float(per_rng *r) { return per_u01f(per_rng_u32(r)); }

PERDEF per_real per_rng_real(per_rng *r) {
  if (sizeof(per_real) == sizeof(float)) return (per_real)per_rng_float(r);
  return (per_real)per_rng_double(r);
}

/* >>tree */

static int per__is_finite(per_real v) {
  per_status s = per_leaf_status(v);
  return s != PER_ERR_NAN && s != PER_ERR_INF;
}

static uint32_t per__leaves_for(uint32_t capacity, uint32_t *depth) {
  uint32_t L = 1, d = 0;
  while (L < capacity) {
    L <<= 1;
    ++d;
  }
  if (depth) *depth = d;
  return L;
}

PERDEF size_t per_tree_bytes(uint32_t capacity) {
  uint32_t L;
  uint64_t bytes;
  if (capacity == 0 || capacity > PER_MAX_CAPACITY) return 0;
  L = per__leaves_for(capacity, NULL);
  bytes = (uint64_t)L * 2u * sizeof(per_real);
  if ((uint64_t)(size_t)bytes != bytes) return 0; /* 32-bit size_t */
  return (size_t)bytes;
}

static void per__tree_empty(per_tree *t) { memset(t, 0, sizeof *t); }

static void per__tree_shape(per_tree *t, uint32_t capacity) {
  t->capacity = capacity;
  t->leaves = per__leaves_for(capacity, &t->depth);
}

PERDEF per_status per_tree_init(per_tree *t, uint32_t capacity,
                                void *alloc_ctx) {
  size_t bytes;
  if (!t) return PER_ERR_NULL;
  per__tree_empty(t);
  bytes = per_tree_bytes(capacity);
  if (bytes == 0) return PER_ERR_CAPACITY;
  t->node = (per_real *)PER_MALLOC(bytes, alloc_ctx);
  if (!t->node) return PER_ERR_NOMEM;
  per__tree_shape(t, capacity);
  t->owns = 1;
  t->alloc_ctx = alloc_ctx;
  per_tree_clear(t);
  return PER_OK;
}

PERDEF per_status per_tree_init_mem(per_tree *t, uint32_t capacity,
                                    void *mem, size_t bytes) {
  size_t need;
  if (!t) return PER_ERR_NULL;
  per__tree_empty(t);
  if (!mem) return PER_ERR_NULL;
  need = per_tree_bytes(capacity);
  if (need == 0) return PER_ERR_CAPACITY;
  if (bytes < need || ((uintptr_t)mem % sizeof(per_real)) != 0)
    return PER_ERR_MEMORY;
  t->node = (per_real *)mem;
  per__tree_shape(t, capacity);
  per_tree_clear(t);
  return PER_OK;
}

PERDEF void per_tree_free(per_tree *t) {
  if (!t) return;
  if (t->owns && t->node) PER_FREE(t->node, t->alloc_ctx);
  per__tree_empty(t);
}

PERDEF void per_tree_clear(per_tree *t) {
  if (!t || !t->node) return;
  memset(t->node, 0, (size_t)t->leaves * 2 * sizeof(per_real));
}

/* Recompute the ancestors of one leaf, bottom up. */
static void per__tree_walk_up(per_tree *t, uint32_t leaf) {
  uint32_t k = (t->leaves + leaf) >> 1;
  for (; k >= 1; k >>= 1) per_tree_recompute(t->node, k);
}

/* Recompute every ancestor of the leaves idx[0..n) exactly once, level by
   level. A parent is first marked with -1 (no valid node is negative), then
   the first visit recomputes it and clears the mark; later visits from
   siblings or duplicates see a value >= 0 and skip. */
static void per__tree_fix_parents(per_tree *t, const uint32_t *idx, size_t n) {
  per_real *node = t->node;
  uint32_t L = t->leaves, s;
  size_t j;
  for (s = 1; s <= t->depth; ++s) {
    for (j = 0; j < n; ++j) node[(L + idx[j]) >> s] = (per_real)-1;
    for (j = 0; j < n; ++j) {
      uint32_t p = (L + idx[j]) >> s;
      if (node[p] < 0) per_tree_recompute(node, p);
    }
  }
}

PERDEF per_status per_tree_set(per_tree *t, uint32_t i, per_real v) {
  per_status s;
  if (!t || !t->node) return PER_ERR_NULL;
  if (i >= t->capacity) return PER_ERR_INDEX;
  s = per_leaf_status(v);
  if (s != PER_OK) return s;
  if (v == 0) v = 0; /* -0 becomes +0 */
  t->node[t->leaves + i] = v;
  per__tree_walk_up(t, i);
  return PER_OK;
}

PERDEF per_status per_tree_set_batch(per_tree *t, const uint32_t *idx,
                                     const per_real *val, size_t n) {
  size_t j;
  if (!t || !t->node) return PER_ERR_NULL;
  if (n == 0) return PER_OK;
  if (!idx || !val) return PER_ERR_NULL;
  for (j = 0; j < n; ++j) {
    per_status s;
    if (idx[j] >= t->capacity) return PER_ERR_INDEX;
    s = per_leaf_status(val[j]);
    if (s != PER_OK) return s;
  }
  for (j = 0; j < n; ++j) {
    per_real v = val[j];
    t->node[t->leaves + idx[j]] = (v == 0) ? (per_real)0 : v;
  }
  per__tree_fix_parents(t, idx, n);
  return PER_OK;
}

PERDEF per_status per_tree_build(per_tree *t, const per_real *val,
                                 uint32_t n) {
  uint32_t i, k, L;
  if (!t || !t->node) return PER_ERR_NULL;
  if (n > t->capacity) return PER_ERR_INDEX;
  if (n > 0 && !val) return PER_ERR_NULL;
  for (i = 0; i < n; ++i) {
    per_status s = per_leaf_status(val[i]);
    if (s != PER_OK) return s;
  }
  L = t->leaves;
  for (i = 0; i < n; ++i) t->node[L + i] = (val[i] == 0) ? (per_real)0 : val[i];
  for (i = n; i < L; ++i) t->node[L + i] = 0;
  for (k = L - 1; k >= 1; --k) per_tree_recompute(t->node, k);
  t->node[0] = 0;
  return PER_OK;
}

PERDEF per_real per_tree_get(const per_tree *t, uint32_t i) {
  if (!t || !t->node || i >= t->capacity) return 0;
  return t->node[t->leaves + i];
}

PERDEF per_real per_tree_total(const per_tree *t) {
  if (!t || !t->node) return 0;
  return t->node[1];
}

PERDEF per_real per_tree_prefix(const per_tree *t, uint32_t i) {
  per_real sum = 0;
  uint32_t k;
  if (!t || !t->node) return 0;
  if (i >= t->capacity) return t->node[1];
  for (k = t->leaves + i; k > 1; k >>= 1)
    if (k & 1u) sum += t->node[k - 1];
  return sum;
}

/* PER_OK when the tree has mass to sample from, else why not. */
static per_status per__tree_samplable(const per_tree *t) {
  per_real total = t->node[1];
  if (!per__is_finite(total)) return PER_ERR_DEGENERATE;
  if (!(total > 0)) return PER_ERR_EMPTY;
  return PER_OK;
}

PERDEF per_status per_tree_find(const per_tree *t, per_real u,
                                uint32_t *idx) {
  per_status s;
  if (!t || !t->node || !idx) return PER_ERR_NULL;
  if (u != u) return PER_ERR_NAN;
  if (u < 0) return PER_ERR_NEGATIVE;
  s = per__tree_samplable(t);
  if (s != PER_OK) return s;
  *idx = per_tree_descend(t->node, t->leaves, u);
  return PER_OK;
}

PERDEF per_status per_tree_sample_strata(const per_tree *t, uint64_t seed,
                                         uint64_t counter, uint32_t B,
                                         uint32_t first, uint32_t count,
                                         uint32_t *idx, per_real *val) {
  per_status s;
  per_real seg;
  uint32_t base, L;
  if (!t || !t->node) return PER_ERR_NULL;
  if (B == 0) return PER_ERR_BATCH;
  if (count > B || first > B - count) return PER_ERR_INDEX;
  if (count == 0) return PER_OK;
  if (!idx) return PER_ERR_NULL;
  s = per__tree_samplable(t);
  if (s != PER_OK) return s;
  L = t->leaves;
  seg = t->node[1] / (per_real)B;
  /* Descents are chains of dependent loads. Run PER__LANES of them in
     lockstep, one level at a time, so that their cache misses overlap; each
     lane does exactly what per_tree_descend does. */
  for (base = 0; base < count; base += PER__LANES) {
    uint32_t k[PER__LANES], g, level;
    per_real u[PER__LANES];
    uint32_t m = count - base < PER__LANES ? count - base : PER__LANES;
    for (g = 0; g < m; ++g) {
      u[g] = per_tree_stratum_u(seed, counter, first + base + g, seg);
      k[g] = 1;
    }
    for (level = 0; level < t->depth; ++level) {
      for (g = 0; g < m; ++g) {
        k[g] = per_tree_step(t->node, k[g], &u[g]);
        PER__PREFETCH(&t->node[(uint64_t)4 * k[g] < (uint64_t)2 * L ? 4 * k[g] : 0]);
      }
    }
    for (g = 0; g < m; ++g) {
      uint32_t leaf = k[g] - L;
      PER_ASSERT(leaf < t->capacity && t->node[k[g]] > 0);
      idx[base + g] = leaf;
      if (val) val[base + g] = t->node[k[g]];
    }
  }
  return PER_OK;
}

PERDEF per_status per_tree_sample(const per_tree *t, per_rng *rng,
                                  uint32_t B, uint32_t *idx, per_real *val) {
  per_status s;
  if (!rng) return PER_ERR_NULL;
  if (B > 0 && !idx) return PER_ERR_NULL;
  s = per_tree_sample_strata(t, rng->seed, rng->counter, B, 0, B, idx, val);
  if (s != PER_OK) return s;
  rng->counter += B;
  rng->avail = 0;
  return PER_OK;
}

PERDEF per_status per_tree_check(const per_tree *t) {
  uint32_t i, k, L;
  const per_real *node;
  if (!t || !t->node) return PER_ERR_NULL;
  L = t->leaves;
  node = t->node;
  if (t->capacity == 0 || t->capacity > L || (L >> t->depth) != 1u ||
      (t->depth > 0 && (L >> 1) >= t->capacity))
    return PER_ERR_CORRUPT;
  if (node[0] != 0) return PER_ERR_CORRUPT;
  for (i = 0; i < t->capacity; ++i)
    if (per_leaf_status(node[L + i]) != PER_OK) return PER_ERR_CORRUPT;
  for (i = t->capacity; i < L; ++i)
    if (node[L + i] != 0) return PER_ERR_CORRUPT;
  for (k = L - 1; k >= 1; --k)
    if (!(node[k] == node[2 * k] + node[2 * k + 1])) return PER_ERR_CORRUPT;
  return PER_OK;
}

/* >>swap */
PERDEF size_t per_swap_bytes(uint32_t capacity) {
  uint64_t bytes;
  if (capacity == 0 || capacity > PER_MAX_CAPACITY) return 0;
  bytes = (uint64_t)capacity * sizeof(uint32_t);
  if ((uint64_t)(size_t)bytes != bytes) return 0; /* 32-bit size_t */
  return (size_t)bytes;
}

static void per__swap_setup(per_swap *s, uint32_t capacity, uint32_t *perm) {
  uint32_t i;
  s->perm = perm;
  s->capacity = capacity;
  s->n = 0;
  for (i = 0; i < capacity; ++i) perm[i] = i;
}

PERDEF per_status per_swap_init(per_swap *s, uint32_t capacity,
                                void *alloc_ctx) {
  size_t bytes;
  uint32_t *perm;
  if (!s) return PER_ERR_NULL;
  memset(s, 0, sizeof *s);
  bytes = per_swap_bytes(capacity);
  if (bytes == 0) return PER_ERR_CAPACITY;
  perm = (uint32_t *)PER_MALLOC(bytes, alloc_ctx);
  if (!perm) return PER_ERR_NOMEM;
  per__swap_setup(s, capacity, perm);
  s->owns = 1;
  s->alloc_ctx = alloc_ctx;
  return PER_OK;
}

PERDEF per_status per_swap_init_mem(per_swap *s, uint32_t capacity,
                                    void *mem, size_t bytes) {
  size_t need;
  if (!s) return PER_ERR_NULL;
  memset(s, 0, sizeof *s);
  if (!mem) return PER_ERR_NULL;
  need = per_swap_bytes(capacity);
  if (need == 0) return PER_ERR_CAPACITY;
  if (bytes < need || ((uintptr_t)mem % sizeof(uint32_t)) != 0)
    return PER_ERR_MEMORY;
  per__swap_setup(s, capacity, (uint32_t *)mem);
  return PER_OK;
}

PERDEF void per_swap_free(per_swap *s) {
  if (!s) return;
  if (s->owns && s->perm) PER_FREE(s->perm, s->alloc_ctx);
  memset(s, 0, sizeof *s);
}

PERDEF per_status per_swap_grow(per_swap *s, uint32_t n) {
  if (!s || !s->perm) return PER_ERR_NULL;
  if (n > s->capacity) return PER_ERR_CAPACITY;
  if (n < s->n) return PER_ERR_ARG;
  /* perm[s->n .. n) were never swapped (draws stay inside [0, s->n)), so
     they still hold their own index and [0, n) is a permutation. */
  s->n = n;
  return PER_OK;
}

PERDEF per_status per_swap_sample(per_swap *s, per_rng *rng, uint32_t k,
                                  uint32_t *out) {
  uint32_t i, n;
  if (!s || !s->perm || !rng || !out) return PER_ERR_NULL;
  n = s->n;
  if (n == 0) return PER_ERR_EMPTY;
  if (k == 0 || k > n) return PER_ERR_BATCH;
  for (i = 0; i < k; ++i) {
    uint32_t j = i + per_rng_below(rng, n - i);
    uint32_t pick = s->perm[j];
    s->perm[j] = s->perm[i];
    s->perm[i] = pick;
    out[i] = pick;
  }
  return PER_OK;
}

/* >>cat */
PERDEF per_status per_tree_sample_iid(const per_tree *t, per_rng *rng,
                                      uint32_t k, uint32_t *idx,
                                      per_real *val) {
  per_status s;
  per_real total;
  uint32_t i, L;
  if (!t || !t->node || !rng) return PER_ERR_NULL;
  if (k == 0) return PER_ERR_BATCH;
  if (!idx) return PER_ERR_NULL;
  s = per__tree_samplable(t);
  if (s != PER_OK) return s;
  total = t->node[1];
  L = t->leaves;
  for (i = 0; i < k; ++i) {
    uint32_t leaf = per_tree_descend(t->node, L, per_rng_real(rng) * total);
    idx[i] = leaf;
    if (val) val[i] = t->node[L + leaf];
  }
  return PER_OK;
}

PERDEF per_status per_cat_init(per_cat *c, uint32_t max_k, void *alloc_ctx) {
  uint32_t hbits = 1;
  size_t slots;
  if (!c) return PER_ERR_NULL;
  memset(c, 0, sizeof *c);
  if (max_k == 0 || max_k > (1u << 30)) return PER_ERR_BATCH;
  while ((1u << hbits) < 2u * max_k) ++hbits; /* load factor <= 1/2 */
  slots = (size_t)1 << hbits;
  c->table = (uint32_t *)PER_MALLOC(slots * sizeof(uint32_t), alloc_ctx);
  if (!c->table) return PER_ERR_NOMEM;
  c->saved = (per_real *)PER_MALLOC((size_t)max_k * sizeof(per_real), alloc_ctx);
  if (!c->saved) {
    PER_FREE(c->table, alloc_ctx);
    c->table = NULL;
    return PER_ERR_NOMEM;
  }
  c->max_k = max_k;
  c->hbits = hbits;
  c->reject_limit = max_k;
  c->owns = 1;
  c->alloc_ctx = alloc_ctx;
  return PER_OK;
}

PERDEF void per_cat_free(per_cat *c) {
  if (!c) return;
  if (c->owns) {
    if (c->table) PER_FREE(c->table, c->alloc_ctx);
    if (c->saved) PER_FREE(c->saved, c->alloc_ctx);
  }
  memset(c, 0, sizeof *c);
}

/* Insert key into the set; 1 when it was new, 0 when already present. */
static int per__cat_insert(per_cat *c, uint32_t key) {
  uint32_t mask = (1u << c->hbits) - 1u;
  uint32_t h = (uint32_t)(key * 2654435761u) >> (32u - c->hbits);
  for (;;) {
    uint32_t cur = c->table[h];
    if (cur == 0) {
      c->table[h] = key + 1u;
      return 1;
    }
    if (cur == key + 1u) return 0;
    h = (h + 1u) & mask;
  }
}

/* Put back the leaves idx[0..m) from c->saved and recompute their
   ancestors: the tree is again exactly what it was. */
static void per__cat_restore(per_cat *c, per_tree *t, const uint32_t *idx,
                             uint32_t m) {
  uint32_t j;
  for (j = 0; j < m; ++j) t->node[t->leaves + idx[j]] = c->saved[j];
  per__tree_fix_parents(t, idx, m);
}

PERDEF per_status per_cat_sample(per_cat *c, per_tree *t, per_rng *rng,
                                 uint32_t k, uint32_t *idx, per_real *val) {
  per_status s;
  per_real total;
  uint32_t L, m = 0, j;
  uint64_t rejects = 0, limit;
  if (!c || !c->table || !t || !t->node || !rng) return PER_ERR_NULL;
  if (k == 0 || k > c->max_k) return PER_ERR_BATCH;
  if (!idx) return PER_ERR_NULL;
  s = per__tree_samplable(t);
  if (s != PER_OK) return s;
  if (k > t->capacity) return PER_ERR_TOO_FEW;
  L = t->leaves;
  total = t->node[1];
  memset(c->table, 0, ((size_t)1 << c->hbits) * sizeof(uint32_t));
  /* A bounded number of repeats: i.i.d. draws can need arbitrarily many
     when a few leaves hold nearly all the mass. */
  limit = (uint64_t)64 * k + 1024;
  if (c->reject_limit < limit) limit = c->reject_limit;

  /* Phase 1: i.i.d. draws, first occurrences kept. */
  while (m < k && rejects < limit) {
    uint32_t leaf = per_tree_descend(t->node, L, per_rng_real(rng) * total);
    if (per__cat_insert(c, leaf)) {
      c->saved[m] = t->node[L + leaf];
      idx[m++] = leaf;
    } else {
      ++rejects;
    }
  }

  if (m < k) {
    /* Phase 2: too many repeats (k is close to the number of leaves with
       mass, or the mass is concentrated). Zero the picks and draw from the
       rest: given the picks so far, the next pick has the same law under
       both methods. */
    for (j = 0; j < m; ++j) t->node[L + idx[j]] = 0;
    per__tree_fix_parents(t, idx, m);
    while (m < k) {
      uint32_t leaf;
      total = t->node[1];
      if (!(total > 0)) {
        per__cat_restore(c, t, idx, m);
        return PER_ERR_TOO_FEW;
      }
      leaf = per_tree_descend(t->node, L, per_rng_real(rng) * total);
      c->saved[m] = t->node[L + leaf];
      idx[m++] = leaf;
      t->node[L + leaf] = 0;
      per__tree_walk_up(t, leaf);
    }
    per__cat_restore(c, t, idx, m);
  }
  if (val)
    for (j = 0; j < k; ++j) val[j] = c->saved[j];
  return PER_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* PER_IMPLEMENTATION */

/*
------------------------------------------------------------------------------
LICENSE (MIT)
Copyright (c) 2026 the per authors
Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:
The above copyright notice and this permission notice shall be included in
all copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
*/
