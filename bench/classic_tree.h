/* classic_tree.h - the baseline for the benchmarks: a textbook float32 sum
   tree, written the way most prioritized-replay implementations write it.

   - The same layout as per.h: L = smallest power of two >= capacity,
     node[1] is the root, node k has children 2k and 2k+1, leaf i is
     node[L + i], padded leaves are 0.
   - A single update writes the leaf, then walks up adding the delta
     (new - old) to every ancestor. Nothing is recomputed from the children,
     so float rounding makes the internal nodes drift over time; that is the
     textbook behaviour, kept on purpose.
   - Descent is branchy: `if (u <= left) go left; else { u -= left; go right }`.
     A leaf index past the used capacity (u rounded past the last mass) is
     clamped to the last leaf, as most implementations do.
   - Stratified sampling of B: seg = total / B, u_i = (i + r_i) * seg with
     its own small RNG (xorshift64*, 24-bit floats), all in float.
   - add(): write the next ring slot, then the same delta walk-up.
   - Sampling without replacement: zero-and-restore (each pick is set to 0,
     the picks are put back at the end).
   - The PER training step (classic_step): stratified sample, IS weights
     with powf, priorities with powf, B single updates.

   No input validation: the baseline does what the textbook does, no more.
   Everything is static; include it in one .c file. */
#ifndef CLASSIC_TREE_H
#define CLASSIC_TREE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Every function is static; a program may leave some unused. */
#if defined(__GNUC__) || defined(__clang__)
#define CLASSIC_FN static __attribute__((unused))
#else
#define CLASSIC_FN static
#endif

typedef struct classic_tree {
  float *node;       /* 2 * leaves floats */
  uint32_t capacity; /* leaves in use */
  uint32_t leaves;   /* power of two >= capacity */
  uint32_t next;     /* ring position of the next add() */
  uint64_t rng;      /* xorshift64* state, never 0 */
} classic_tree;

CLASSIC_FN int classic_init(classic_tree *ct, uint32_t capacity,
                            uint64_t seed) {
  uint32_t L = 1;
  while (L < capacity) L <<= 1;
  ct->node = (float *)calloc((size_t)2 * L, sizeof(float));
  ct->capacity = capacity;
  ct->leaves = L;
  ct->next = 0;
  ct->rng = seed ? seed : 0x9E3779B97F4A7C15ull;
  return ct->node != NULL;
}

CLASSIC_FN void classic_free(classic_tree *ct) {
  free(ct->node);
  ct->node = NULL;
}

/* Uniform float in [0,1): xorshift64* (Marsaglia / Vigna), top 24 bits. */
CLASSIC_FN float classic_rand01(classic_tree *ct) {
  uint64_t x = ct->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  ct->rng = x;
  return (float)((x * 0x2545F4914F6CDD1Dull) >> 40) * (1.0f / 16777216.0f);
}

/* Fill every leaf at once and sum bottom up (set-up only, not timed). */
CLASSIC_FN void classic_build(classic_tree *ct, const float *val, uint32_t n) {
  uint32_t L = ct->leaves, k;
  memset(ct->node, 0, (size_t)2 * L * sizeof(float));
  memcpy(ct->node + L, val, (size_t)n * sizeof(float));
  for (k = L - 1; k >= 1; --k)
    ct->node[k] = ct->node[2 * k] + ct->node[2 * k + 1];
}

CLASSIC_FN float classic_total(const classic_tree *ct) { return ct->node[1]; }

/* Leaf i = v: write it, then add the change to every ancestor. */
CLASSIC_FN void classic_update(classic_tree *ct, uint32_t i, float v) {
  uint32_t k = ct->leaves + i;
  float delta = v - ct->node[k];
  ct->node[k] = v;
  for (k >>= 1; k >= 1; k >>= 1) ct->node[k] += delta;
}

/* n single updates, in order: how a textbook buffer applies new priorities. */
CLASSIC_FN void classic_update_batch(classic_tree *ct, const uint32_t *idx,
                                     const float *val, uint32_t n) {
  uint32_t j;
  for (j = 0; j < n; ++j) classic_update(ct, idx[j], val[j]);
}

/* Write the next ring slot. */
CLASSIC_FN void classic_add(classic_tree *ct, float v) {
  classic_update(ct, ct->next, v);
  if (++ct->next == ct->capacity) ct->next = 0;
}

/* Leaf whose prefix interval holds u: the branchy textbook descent. */
CLASSIC_FN uint32_t classic_find(const classic_tree *ct, float u) {
  const float *node = ct->node;
  uint32_t L = ct->leaves, k = 1, leaf;
  while (k < L) {
    float left = node[2 * k];
    if (u <= left) {
      k = 2 * k;
    } else {
      u -= left;
      k = 2 * k + 1;
    }
  }
  leaf = k - L;
  return leaf < ct->capacity ? leaf : ct->capacity - 1;
}

/* Stratified batch of B: one draw in each of B equal slices of the total. */
CLASSIC_FN void classic_sample(classic_tree *ct, uint32_t B, uint32_t *idx,
                               float *val) {
  float seg = classic_total(ct) / (float)B;
  uint32_t i;
  for (i = 0; i < B; ++i) {
    float u = ((float)i + classic_rand01(ct)) * seg;
    uint32_t leaf = classic_find(ct, u);
    idx[i] = leaf;
    val[i] = ct->node[ct->leaves + leaf];
  }
}

/* One draw proportional to the leaves: *idx its leaf (also returned),
   *val that leaf's value. */
CLASSIC_FN uint32_t classic_draw(classic_tree *ct, uint32_t *idx, float *val) {
  uint32_t leaf = classic_find(ct, classic_rand01(ct) * classic_total(ct));
  *idx = leaf;
  *val = ct->node[ct->leaves + leaf];
  return leaf;
}

/* k independent draws proportional to the leaves (with replacement). */
CLASSIC_FN void classic_sample_iid(classic_tree *ct, uint32_t k, uint32_t *idx,
                                   float *val) {
  uint32_t i;
  for (i = 0; i < k; ++i) classic_draw(ct, idx + i, val + i);
}

/* k draws without replacement by zero-and-restore: each pick is set to 0
   (so it cannot come again), and all picks get their values back at the
   end. val[j] receives the pick's value. */
CLASSIC_FN void classic_sample_wor(classic_tree *ct, uint32_t k, uint32_t *idx,
                                   float *val) {
  uint32_t i;
  for (i = 0; i < k; ++i)
    classic_update(ct, classic_draw(ct, idx + i, val + i), 0.0f);
  for (i = k; i-- > 0;) classic_update(ct, idx[i], val[i]);
}

/* The PER training step of B on a tree of n items, the textbook way:
   classic_sample into idx/val, weights w[j] = (n P(j))^-beta divided by
   the batch's largest, priorities prio[j] = (|td[j]| + eps)^alpha with
   powf, and B classic_update calls. */
CLASSIC_FN void classic_step(classic_tree *ct, uint32_t n, uint32_t B,
                             const float *td, float alpha, float beta,
                             float eps, uint32_t *idx, float *val, float *w,
                             float *prio) {
  float total, wmax = 0;
  uint32_t j;
  classic_sample(ct, B, idx, val);
  total = classic_total(ct);
  for (j = 0; j < B; ++j) {
    w[j] = powf((float)n * val[j] / total, -beta);
    if (w[j] > wmax) wmax = w[j];
  }
  for (j = 0; j < B; ++j) w[j] /= wmax;
  for (j = 0; j < B; ++j) prio[j] = powf(fabsf(td[j]) + eps, alpha);
  classic_update_batch(ct, idx, prio, B);
}

#endif /* CLASSIC_TREE_H */
