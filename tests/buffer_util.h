/* buffer_util.h - shared by the buffer, n-step and checkpoint tests: the
   counting allocator of heap.h (this header includes per.h with
   PER_IMPLEMENTATION after it), byte snapshots of a struct's
   allocations and of a whole per_buffer (the struct and every
   allocation) and whole-file reads and writes. */
#ifndef PER_BUFFER_UTIL_H
#define PER_BUFFER_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap.h"
#define PER_IMPLEMENTATION
#include "per.h"
#include "t.h"

#define IS_FLOAT (sizeof(per_real) == sizeof(float))

/* ---- snapshots ---------------------------------------------------------- */

/* Copies of a struct's allocations: up to 15 regions, in a fixed order. */
typedef struct regions {
  unsigned char *mem[15];
  size_t len[15];
} regions;

static inline void regions_take(regions *r, const void *const *p,
                                const size_t *len, int n) {
  int k;
  for (k = 0; k < n; ++k) {
    r->len[k] = len[k];
    r->mem[k] = (unsigned char *)malloc(len[k] ? len[k] : 1);
    if (len[k]) memcpy(r->mem[k], p[k], len[k]);
  }
}

/* 1 when the regions p[0..n) hold what r copied. Frees r. */
static inline int regions_same(regions *r, const void *const *p,
                               const size_t *len, int n) {
  int k, same = 1;
  for (k = 0; k < n; ++k) {
    if (same && (len[k] != r->len[k] ||
                 (len[k] && memcmp(p[k], r->mem[k], len[k]) != 0)))
      same = 0;
    free(r->mem[k]);
  }
  return same;
}

typedef struct bsnap {
  per_buffer head;
  regions r;
} bsnap;

/* The allocations of b with their sizes, in a fixed order. */
static inline int bsnap_regions(const per_buffer *b, const void **p,
                                size_t *n) {
  size_t nodes =
      b->tree.node ? (size_t)b->tree.leaves * 2 * sizeof(per_real) : 0;
  size_t cap = b->cfg.capacity, mu = b->cfg.max_unique;
  size_t seq_nodes =
      b->seq_tree.node ? (size_t)b->seq_tree.leaves * 2 * sizeof(per_real) : 0;
  int k = 0;
  p[k] = b->items;
  n[k++] = b->items ? cap * b->cfg.item_size : 0;
  p[k] = b->gen;
  n[k++] = b->gen ? cap * sizeof(uint32_t) : 0;
  p[k] = b->tree.node;
  n[k++] = nodes;
  p[k] = b->min_node;
  n[k++] = b->min_node ? nodes : 0;
  p[k] = b->swap.perm;
  n[k++] = b->swap.perm ? cap * sizeof(uint32_t) : 0;
  p[k] = b->cat.table;
  n[k++] = b->cat.table ? ((size_t)1 << b->cat.hbits) * sizeof(uint32_t) : 0;
  p[k] = b->cat.saved;
  n[k++] = b->cat.saved ? (size_t)b->cat.max_k * sizeof(per_real) : 0;
  p[k] = b->scratch_idx;
  n[k++] = b->scratch_idx ? mu * sizeof(uint32_t) : 0;
  p[k] = b->scratch_val;
  n[k++] = b->scratch_val ? mu * sizeof(per_real) : 0;
  p[k] = b->ends;
  n[k++] = b->ends ? cap : 0;
  p[k] = b->seq_tree.node;
  n[k++] = seq_nodes;
  p[k] = b->seq_min_node;
  n[k++] = b->seq_min_node ? seq_nodes : 0;
  p[k] = b->seq_ok;
  n[k++] = b->seq_ok ? b->seq_tree.capacity : 0;
  p[k] = b->traj;
  n[k++] = b->traj ? cap * sizeof(uint32_t) : 0;
  p[k] = b->max_node;
  n[k++] = b->max_node ? nodes : 0;
  return k;
}

static inline bsnap bsnap_take(const per_buffer *b) {
  bsnap s;
  const void *p[15];
  size_t len[15];
  int n = bsnap_regions(b, p, len);
  memcpy(&s.head, b, sizeof *b);
  regions_take(&s.r, p, len, n);
  return s;
}

/* 1 when b is byte for byte as when s was taken, but for b->error (what
   a refused call writes). Frees s. */
static inline int bsnap_same(bsnap *s, const per_buffer *b) {
  const void *p[15];
  size_t len[15];
  int n = bsnap_regions(b, p, len);
  per_buffer now;
  memcpy(&now, b, sizeof now);
  memcpy(now.error, s->head.error, sizeof now.error);
  return regions_same(&s->r, p, len, n) &
         (memcmp(&s->head, &now, sizeof now) == 0);
}

#define CHECK_UNCHANGED(s, b) \
  CHECK_MSG(bsnap_same(&(s), (b)), "buffer changed by a failing call")

/* The state that decides future behaviour (not scratch memory): equal for
   a buffer and its save/load copy. */
static inline int state_equal(const per_buffer *a, const per_buffer *b) {
  size_t cap = a->cfg.capacity;
  if (memcmp(&a->cfg, &b->cfg, sizeof a->cfg) != 0) return 0;
  if (a->size != b->size || a->pos != b->pos || a->added != b->added ||
      a->step != b->step || a->zero_hint != b->zero_hint ||
      a->trajs != b->trajs)
    return 0;
  if (memcmp(&a->max_leaf, &b->max_leaf, sizeof a->max_leaf) != 0) return 0;
  if (memcmp(&a->rng, &b->rng, sizeof a->rng) != 0) return 0;
  if (memcmp(a->items, b->items, cap * a->cfg.item_size) != 0) return 0;
  if (memcmp(a->gen, b->gen, cap * sizeof(uint32_t)) != 0) return 0;
  if (a->tree.leaves != b->tree.leaves ||
      memcmp(a->tree.node, b->tree.node,
             (size_t)a->tree.leaves * 2 * sizeof(per_real)) != 0)
    return 0;
  if ((a->min_node != NULL) != (b->min_node != NULL)) return 0;
  if (a->min_node && memcmp(a->min_node, b->min_node,
                            (size_t)a->tree.leaves * 2 * sizeof(per_real)) != 0)
    return 0;
  if ((a->swap.perm != NULL) != (b->swap.perm != NULL)) return 0;
  if (a->swap.perm &&
      (a->swap.n != b->swap.n ||
       memcmp(a->swap.perm, b->swap.perm, cap * sizeof(uint32_t)) != 0))
    return 0;
  if (memcmp(a->ends, b->ends, cap) != 0) return 0;
  if (memcmp(a->traj, b->traj, cap * sizeof(uint32_t)) != 0) return 0;
  if ((a->seq_ok != NULL) != (b->seq_ok != NULL)) return 0;
  if (a->seq_ok) {
    size_t ns = a->seq_tree.capacity,
           nodes = (size_t)a->seq_tree.leaves * 2 * sizeof(per_real);
    if (ns != b->seq_tree.capacity || memcmp(a->seq_ok, b->seq_ok, ns) != 0 ||
        memcmp(a->seq_tree.node, b->seq_tree.node, nodes) != 0)
      return 0;
    if ((a->seq_min_node != NULL) != (b->seq_min_node != NULL)) return 0;
    if (a->seq_min_node && memcmp(a->seq_min_node, b->seq_min_node, nodes) != 0)
      return 0;
  }
  return 1;
}

/* Two buffers doing the same operations draw the same batches: `rounds`
   batches of 16 items (of at most 32 bytes) from each, every third one
   unique, every fourth one within the newest `window` slots (but for a
   unique batch larger than the window), each followed by the same
   update. */
static inline void same_draws(per_buffer *a, per_buffer *b, uint32_t rounds,
                              uint32_t window) {
  uint32_t k, isz = a->cfg.item_size;
  REQUIRE(isz <= 32);
  for (k = 0; k < rounds; ++k) {
    uint64_t ia[16], ib[16];
    float wa[16], wb[16], td[16];
    unsigned char xa[16 * 32], xb[16 * 32];
    per_sample_opts o;
    uint32_t i;
    memset(&o, 0, sizeof o);
    o.flags = k % 3 == 1 ? PER_SAMPLE_UNIQUE : 0;
    if (k % 4 == 3 && (o.flags == 0 || window >= 16)) o.window = window;
    CHECK_OK(per_buffer_sample(a, 16, &o, xa, ia, wa));
    CHECK_OK(per_buffer_sample(b, 16, &o, xb, ib, wb));
    CHECK_MEM(ia, ib, sizeof ia);
    CHECK_MEM(wa, wb, sizeof wa);
    CHECK_MEM(xa, xb, (size_t)16 * isz);
    for (i = 0; i < 16; ++i) td[i] = 0.5f + (float)(ia[i] % 7);
    CHECK_OK(per_buffer_update(a, ia, td, 16, NULL));
    CHECK_OK(per_buffer_update(b, ib, td, 16, NULL));
  }
}

/* ---- files ------------------------------------------------------------- */

/* Up to cap bytes of the file at path; -1 when it cannot be opened. */
static inline long file_read(const char *path, unsigned char *buf, long cap) {
  FILE *f = fopen(path, "rb");
  long n;
  if (!f) return -1;
  n = (long)fread(buf, 1, (size_t)cap, f);
  fclose(f);
  return n;
}

/* buf[0..n) as the file at path; 1 on success. */
static inline int file_write(const char *path, const unsigned char *buf,
                             long n) {
  FILE *f = fopen(path, "wb");
  int ok;
  if (!f) return 0;
  ok = fwrite(buf, 1, (size_t)n, f) == (size_t)n;
  return fclose(f) == 0 && ok;
}

static inline per_config cfg_of(uint32_t capacity, uint32_t item_size) {
  return per_config_default(capacity, item_size);
}

/* A batch of k <= 16 unique draws, its results dropped: it moves the rng
   and, with alpha 0, shuffles the swap permutation. */
static inline per_status sample_unique(per_buffer *b, uint32_t k) {
  per_sample_opts o;
  uint64_t ids[16];
  if (k > 16) return PER_ERR_BATCH;
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_UNIQUE;
  return per_buffer_sample(b, k, &o, NULL, ids, NULL);
}

#endif
