/* bench_memory.c - how close per.h's sum tree comes to the machine's
   memory limit: the memory's own latency and throughput for random
   cache lines, then per.h's stratified sample and batch update at a
   large N beside a memory-only floor that touches the same cache lines,
   all in one process (see bench_common.h for how a figure is measured).

   Ops:
     chase   latency: for each working set S of --bytes (default 32 KiB
             to 512 MiB), S / 64 cache lines linked into one random cycle
             (Sattolo's algorithm); each line holds the byte offset of the
             next in its first word. An iteration follows the chain for
             4096 steps, each load's address being the value of the one
             before, so one load is in flight at a time; the position is
             kept from one iteration to the next. ns per load.
     gather  throughput: over the same lines, 4096 loads per iteration of
             random lines whose numbers come from an array read in order
             (up to 2^22 of them, so that at the large sizes the lines
             loaded span far more than the caches); the loaded words are
             summed. No address depends on a load, so many are in flight
             at once. ns per load.
     sample  per N (--n, default 2^24) and B (--b, default 1024), ns per
             item, interleaved:
               per.h  per_tree_sample (the stratified batch) of B on a tree
                      of N leaves in (0, 1] (bc_build_trees), one per_rng,
                      fresh u's every batch;
               floor  memory only: in each of B equal slices of the leaves
                      one leaf drawn by a cheap hash (the leaves are i.i.d.,
                      so per.h's strata land on such paths too), then level
                      by level from the root down (levels outer, lanes
                      inner, as per.h's lockstep descents run, but over
                      the whole batch at once where per.h runs groups of
                      64; --floor-lanes 64 takes per.h's groups), the pair
                      of children under each lane's path node is loaded
                      and added to the lane's sum. The same cache lines as
                      per.h's descent, with every address known in advance
                      and no arithmetic beyond the sums: the memory's
                      limit for this descent.
             Beside them, computed and not timed: depth x the chase's ns
             per load over a working set of the tree's own bytes (a chase
             at that size is run for it when --bytes does not hold it),
             the time of one descent alone if every level were a miss
             waiting on the one before (side "latency-bound").
     update  same N and B, ns per item, interleaved:
               per.h  per_tree_set_batch of B (index, value) pairs from a
                      pool of random pairs both sides walk through in the
                      same order (as bench_tree's update);
               floor  memory only, on a copy of the tree of its own: the
                      same B leaves written, then level by level from the
                      leaves' parents up to the root (levels outer, lanes
                      inner) each lane's ancestor at that level set to the
                      sum of its two children; a level of at most B nodes
                      (near the root) is recomputed whole, in order, each
                      node once, as per.h does there. The same cache lines
                      as per.h's update, no validation, no arithmetic
                      beyond the sums.
     set     one leaf at a time, filling a ring from leaf 0 on, per N
             (no B), ns per leaf, interleaved, each side on a tree of its
             own with the same leaves and the same values in the same
             order:
               per.h   per_tree_set(pos, v);
               exact   the least code that computes per_tree_set's bits:
                       the leaf written, then a plain loop up to the root,
                       the running sum in a register, each parent the sum
                       of the value just computed and its sibling's, no
                       checks, inlined into the timed loop (per.h's is
                       a call); each step's add waits on the one before;
               delta   the textbook's walk at the same width: the change
                       v - old added to every ancestor (independent
                       read-modify-writes, no chain; the sums drift);
               stores  memory only: the leaf and every ancestor written
                       with v, nothing loaded, no adds.
             per.h against exact is what per_tree_set's call, checks and
             code cost; exact against delta, what recomputing every parent
             from its children costs (the chain of depth dependent adds
             that a sum of exact children needs); stores, the memory's
             part.
   Printed per figure; for sample and update also floor / per.h, the
   fraction of the memory limit per.h reaches (1 would be the limit).

   CSV (--csv), one row per figure and side:
     real,op,n,b,side,ns,min,max,reps,iters
   chase, gather: n = the working set in bytes, b = 0, side "load".
   sample, update: n = N, b = B, side in {per.h, floor, latency-bound};
   set: n = N, b = 0, side in {per.h, exact, delta, stores};
   ns, min, max: median, fastest and slowest loop in ns per item
   (latency-bound: the computed figure, min = max = ns, reps = iters = 0).

   Checks (never timed): each chase is one cycle through every line;
   per.h's sampled indices are < N and their values the leaves' values;
   after timing, the whole update pool is applied in order to both trees,
   then per.h's tree passes per_tree_check, the floor's tree keeps every
   parent the sum of its children (every one with --quick or in a tree of
   fewer than 10^5, 10^5 random ones otherwise) and the two trees are
   identical bit for bit; after set, one more lap of the ring, every leaf
   given the same value on per.h's tree and exact's, then the two are
   identical bit for bit and per.h's passes per_tree_check (delta's and
   stores' are not compared: neither keeps exact sums). The exit status is 0 only when every check
   passes. --quick runs tiny sizes with short loops: the smoke test.

   Build: C99 + POSIX (clock_gettime). PER_REAL is a compile-time choice. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#define PER_IMPLEMENTATION
#include "per.h"

#include "bench_common.h"

#define LINE 64           /* bytes of a cache line */
#define CHASE_STEPS 4096  /* dependent loads per chase iteration */
#define GATHER_LOADS 4096 /* independent loads per gather iteration */
#define GATHER_MAX ((size_t)1 << 22) /* most line numbers in the array */
#define CHECK_NODES 100000           /* parents checked without --quick */

static const char *usage =
    "usage: bench_memory [options]\n"
    "  memory latency and throughput, and per.h's sum tree beside a\n"
    "  memory-only floor. ops: chase, gather, sample, update, set. --n\n"
    "  applies to sample, update and set (default 2^24), --b to sample and\n"
    "  update (default 1024); also:\n"
    "  --bytes LIST     working sets of chase and gather (default\n"
    "                   32768,131072,524288,2^21,2^23,2^25,2^27,2^29)\n"
    "  --floor-lanes K  descents of the sample floor in lockstep (default:\n"
    "                   the whole batch; per.h's groups are 64)\n";

static uint64_t sizes[BC_MAX_LIST];
static int nsizes = 0;

static uint32_t floor_lanes = 0; /* 0: the whole batch */

static int extra_opt(const char *opt, const char *val, int *bad) {
  if (strcmp(opt, "--floor-lanes") == 0) {
    const char *e;
    uint64_t v = val ? bc_parse_num(val, &e) : 0;
    if (v == 0 || *e || v > (1u << 24)) *bad = 1;
    floor_lanes = (uint32_t)v;
    return 1;
  }
  if (strcmp(opt, "--bytes") == 0) {
    int i;
    if (!val || !bc_parse_list(val, sizes, &nsizes)) *bad = 1;
    for (i = 0; i < nsizes && !*bad; ++i)
      if (sizes[i] < 2 * LINE || sizes[i] > ((uint64_t)1 << 38)) *bad = 1;
    return 1;
  }
  return 0;
}

static int failures = 0;

static void fail(const char *what, uint64_t n, uint32_t B) {
  fprintf(stderr, "CHECK FAILED (N=%llu, B=%u): %s\n", (unsigned long long)n, B,
          what);
  ++failures;
}

/* ---- chase and gather -------------------------------------------------- */

typedef struct mem {
  uint64_t *word; /* lines * 8 words; word 0 of a line: next line's offset */
  size_t bytes;
  uint32_t lines;
  uint32_t *gidx; /* gather: line numbers, read in order */
  size_t gcount, goff;
  uint64_t pos; /* chase: byte offset of the current line */
  uint64_t sink;
} mem;

/* S / 64 lines in one random cycle: Sattolo's algorithm on the lines' next
   offsets (a uniformly random cyclic permutation). */
static void mem_setup(mem *m, const bc_opts *o, uint64_t bytes) {
  uint64_t s = o->seed * 0x100000001B3ull + bytes;
  uint32_t i;
  size_t j;
  memset(m, 0, sizeof *m);
  m->lines = (uint32_t)(bytes / LINE);
  m->bytes = (size_t)m->lines * LINE;
  m->word = (uint64_t *)bc_big_alloc(m->bytes, o->huge);
  for (i = 0; i < m->lines; ++i) m->word[(size_t)i * 8] = (uint64_t)i * LINE;
  for (i = m->lines - 1; i > 0; --i) {
    uint32_t k = bc_below(&s, i);
    uint64_t t = m->word[(size_t)i * 8];
    m->word[(size_t)i * 8] = m->word[(size_t)k * 8];
    m->word[(size_t)k * 8] = t;
  }
  m->gcount = (size_t)m->lines * 8;
  if (m->gcount < GATHER_LOADS) m->gcount = GATHER_LOADS;
  if (m->gcount > GATHER_MAX) m->gcount = GATHER_MAX;
  m->gidx = (uint32_t *)bc_xmalloc(m->gcount * sizeof(uint32_t));
  for (j = 0; j < m->gcount; ++j) m->gidx[j] = bc_below(&s, m->lines);
}

static void mem_free(mem *m) {
  free(m->word);
  free(m->gidx);
}

/* The chain visits every line once before it comes back to the first. */
static int mem_one_cycle(const mem *m) {
  uint64_t off = 0;
  uint32_t i;
  for (i = 1; i < m->lines; ++i) {
    off = m->word[off / 8];
    if (off == 0) return 0;
  }
  return m->word[off / 8] == 0;
}

static void k_chase(void *p, uint64_t iters) {
  mem *m = (mem *)p;
  const char *base = (const char *)m->word;
  uint64_t off = m->pos, i;
  uint32_t j;
  for (i = 0; i < iters; ++i)
    for (j = 0; j < CHASE_STEPS; ++j) off = *(const uint64_t *)(base + off);
  m->pos = off;
}

static void k_gather(void *p, uint64_t iters) {
  mem *m = (mem *)p;
  const uint64_t *w = m->word;
  uint64_t sum = 0, i;
  uint32_t j;
  for (i = 0; i < iters; ++i) {
    const uint32_t *g;
    if (m->goff + GATHER_LOADS > m->gcount) m->goff = 0;
    g = m->gidx + m->goff;
    for (j = 0; j < GATHER_LOADS; ++j) sum += w[(size_t)g[j] * 8];
    m->goff += GATHER_LOADS;
  }
  m->sink += sum;
}

/* "512 MiB", "32 KiB", or bytes. */
static void fmt_bytes(char *out, size_t len, uint64_t b) {
  if (b >= ((uint64_t)1 << 30) && b % ((uint64_t)1 << 30) == 0)
    snprintf(out, len, "%llu GiB", (unsigned long long)(b >> 30));
  else if (b >= ((uint64_t)1 << 20) && b % ((uint64_t)1 << 20) == 0)
    snprintf(out, len, "%llu MiB", (unsigned long long)(b >> 20));
  else if (b >= 1024 && b % 1024 == 0)
    snprintf(out, len, "%llu KiB", (unsigned long long)(b >> 10));
  else snprintf(out, len, "%llu B", (unsigned long long)b);
}

static void csv_row(FILE *csv, const char *op, uint64_t n, uint32_t b,
                    const char *side, double ns, double min, double max,
                    int reps, uint64_t iters) {
  if (!csv) return;
  fprintf(csv, "%s,%s,%llu,%u,%s,%.4f,%.4f,%.4f,%d,%llu\n", bc_real_name(), op,
          (unsigned long long)n, b, side, ns, min, max, reps,
          (unsigned long long)iters);
  fflush(csv);
}

/* Chase figures of this run, by working set: the latency-bound figure
   takes the one at the tree's bytes. */
static uint64_t chase_bytes[2 * BC_MAX_LIST];
static double chase_ns[2 * BC_MAX_LIST];
static int nchase = 0;

static double chase_at(uint64_t bytes) {
  int i;
  for (i = 0; i < nchase; ++i)
    if (chase_bytes[i] == bytes) return chase_ns[i];
  return 0;
}

/* One figure of loads over m: measured, printed, written; ns per load. */
static double load_figure(const bc_opts *o, FILE *csv, const char *op,
                          bc_kernel k, mem *m, uint32_t loads, const char *sz,
                          const char *note) {
  void *ctx = m;
  bc_result_n r = bc_measure_n(o, 1, &k, &ctx, loads);
  printf("%-8s size %-16s  ns/load %7.2f%s\n", op, sz, r.ns[0], note);
  fflush(stdout);
  csv_row(csv, op, m->bytes, 0, "load", r.ns[0], r.min[0], r.max[0], r.reps,
          r.iters[0]);
  return r.ns[0];
}

/* One working set: its chase and/or gather figure, printed and kept. */
static void run_mem(const bc_opts *o, FILE *csv, uint64_t bytes, int chase,
                    int gather, const char *note) {
  mem m;
  char sz[32];
  mem_setup(&m, o, bytes);
  fmt_bytes(sz, sizeof sz, m.bytes);
  if (!mem_one_cycle(&m))
    fail("the chase is not one cycle over every line", m.bytes, 0);
  if (chase) {
    double ns =
        load_figure(o, csv, "chase", k_chase, &m, CHASE_STEPS, sz, note);
    if (nchase < 2 * BC_MAX_LIST) {
      chase_bytes[nchase] = m.bytes;
      chase_ns[nchase++] = ns;
    }
  }
  if (gather)
    load_figure(o, csv, "gather", k_gather, &m, GATHER_LOADS, sz, note);
  mem_free(&m);
}

/* ---- the tree: per.h and the floor ------------------------------------- */

/* The sides of set, in the order they are measured and printed. */
enum { SET_PER, SET_EXACT, SET_DELTA, SET_STORES, SET_SIDES };
static const char *const set_side[SET_SIDES] = {"per.h", "exact", "delta",
                                                "stores"};

typedef struct tctx {
  uint32_t n, B, L, depth;
  per_tree t;
  per_rng rng;
  void *per_mem;   /* --huge: the tree's memory, owned here */
  per_real *fnode; /* update: the floor's own copy of the tree */
  /* inputs: pool of (index, value) pairs, cycled; the same for both */
  size_t pool;
  uint32_t *pool_idx;
  per_real *pool_val;
  size_t off_p, off_f; /* next pool position, per side */
  uint64_t draw;       /* the floor's draws so far */
  uint32_t G;          /* the floor's descents in lockstep */
  uint32_t *lane_k;    /* the floor's path ends, per lane */
  per_real *lane_acc;  /* the floor's sums, per lane */
  uint32_t *idx_p;
  per_real *val_p;
  per_real sink; /* the floor's sums */
  per_status err;
  /* set: the trees of exact, delta and stores (per.h's is t), and each
     side's ring position and pool offset (sides in SET_* order) */
  per_real *snode[SET_SIDES];
  uint32_t spos[SET_SIDES];
  size_t soff[SET_SIDES];
} tctx;

static void k_sample_per(void *p, uint64_t iters) {
  tctx *c = (tctx *)p;
  per_status s = bc_sample_per(&c->t, &c->rng, c->B, c->idx_p, c->val_p, iters);
  if (s != PER_OK) c->err = s;
}

/* The floor's leaf in slice j of B: one uniform position in
   [j N / B, (j + 1) N / B) from a hash of the draw's number. */
static uint32_t floor_leaf(uint64_t draw, uint32_t j, uint32_t n, uint32_t B) {
  uint64_t h = (draw + j) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  return (uint32_t)(((uint64_t)j * n + (((h >> 32) * n) >> 32)) / B);
}

static void k_sample_floor(void *p, uint64_t iters) {
  tctx *c = (tctx *)p;
  const per_real *node = c->t.node;
  uint32_t L = c->L, depth = c->depth, n = c->n, B = c->B, G = c->G;
  uint32_t *k = c->lane_k;
  per_real *acc = c->lane_acc, sum = 0;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    uint32_t base;
    for (base = 0; base < B; base += G) {
      uint32_t m = B - base < G ? B - base : G, g, level;
      for (g = 0; g < m; ++g) {
        k[g] = L + floor_leaf(c->draw, base + g, n, B);
        acc[g] = 0;
      }
      for (level = 0; level < depth; ++level) {
        uint32_t shift = depth - level;
        for (g = 0; g < m; ++g) {
          uint32_t q = k[g] >> shift;
          acc[g] += node[2 * q] + node[2 * q + 1];
        }
      }
      for (g = 0; g < m; ++g) sum += acc[g];
    }
    c->draw += B;
  }
  c->sink += sum;
}

static void k_update_per(void *p, uint64_t iters) {
  tctx *c = (tctx *)p;
  per_status s = bc_update_per(&c->t, c->pool_idx, c->pool_val, c->pool,
                               &c->off_p, c->B, iters);
  if (s != PER_OK) c->err = s;
}

/* The floor's update: leaves idx[j] = val[j] in order, then every level
   from the leaves' parents up, each lane's ancestor there recomputed from
   its two children (final: the level below is done). A level of at most B
   nodes (near the root) is recomputed whole, in order: the lines the lanes
   would touch there, each node once. */
static void floor_update(per_real *node, uint32_t L, uint32_t depth,
                         const uint32_t *idx, const per_real *val, uint32_t B) {
  uint32_t j, s, q;
  for (j = 0; j < B; ++j) node[L + idx[j]] = val[j];
  for (s = 1; s <= depth; ++s) {
    if ((L >> s) <= B) {
      for (q = L >> s; q < L >> (s - 1); ++q)
        node[q] = node[2 * q] + node[2 * q + 1];
      continue;
    }
    for (j = 0; j < B; ++j) {
      q = (L + idx[j]) >> s;
      node[q] = node[2 * q] + node[2 * q + 1];
    }
  }
}

static void k_update_floor(void *p, uint64_t iters) {
  tctx *c = (tctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    floor_update(c->fnode, c->L, c->depth, c->pool_idx + c->off_f,
                 c->pool_val + c->off_f, c->B);
    bc_pool_next(&c->off_f, c->B, c->pool);
  }
}

/* ---- set: one leaf at a time ------------------------------------------- */

static void print_ns(const char *side, double ns);

/* Side s's next leaf and value: the ring position and the pool walked
   through one value at a time. */
#define SET_NEXT(c, s)                              \
  do {                                              \
    if (++(c)->spos[s] == (c)->n) (c)->spos[s] = 0; \
    bc_pool_next(&(c)->soff[s], 1, (c)->pool);      \
  } while (0)

static void k_set_per(void *p, uint64_t iters) {
  tctx *c = (tctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    per_status s =
        per_tree_set(&c->t, c->spos[SET_PER], c->pool_val[c->soff[SET_PER]]);
    if (s != PER_OK) c->err = s;
    SET_NEXT(c, SET_PER);
  }
}

/* per_tree_set's bits with nothing else: node[k] = cur, and each parent
   the sum of the value just computed and its sibling (in the layout's
   order or not: IEEE addition is commutative). */
static void exact_set(per_real *node, uint32_t L, uint32_t i, per_real v) {
  size_t k = (size_t)L + i;
  per_real cur = v;
  node[k] = cur;
  for (; k > 1; k >>= 1) {
    cur = cur + node[k ^ 1];
    node[k >> 1] = cur;
  }
}

static void k_set_exact(void *p, uint64_t iters) {
  tctx *c = (tctx *)p;
  per_real *node = c->snode[SET_EXACT];
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    exact_set(node, c->L, c->spos[SET_EXACT], c->pool_val[c->soff[SET_EXACT]]);
    SET_NEXT(c, SET_EXACT);
  }
}

static void k_set_delta(void *p, uint64_t iters) {
  tctx *c = (tctx *)p;
  per_real *node = c->snode[SET_DELTA];
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    size_t k = (size_t)c->L + c->spos[SET_DELTA];
    per_real d = c->pool_val[c->soff[SET_DELTA]] - node[k];
    for (; k >= 1; k >>= 1) node[k] += d;
    SET_NEXT(c, SET_DELTA);
  }
}

static void k_set_stores(void *p, uint64_t iters) {
  tctx *c = (tctx *)p;
  per_real *node = c->snode[SET_STORES];
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    size_t k = (size_t)c->L + c->spos[SET_STORES];
    per_real v = c->pool_val[c->soff[SET_STORES]];
    for (; k >= 1; k >>= 1) node[k] = v;
    SET_NEXT(c, SET_STORES);
  }
}

/* Not timed: one more lap of the ring on per.h's tree and exact's, every
   leaf from 0 on given the same value on both, so that the two hold the
   same leaves whatever number of loops each side ran; then the trees must
   be the same bits and per.h's must be valid. */
static void check_sets(tctx *c) {
  uint32_t i;
  size_t off = 0;
  per_status st;
  for (i = 0; i < c->n; ++i) {
    if (per_tree_set(&c->t, i, c->pool_val[off]) != PER_OK)
      fail("per_tree_set", c->n, 0);
    exact_set(c->snode[SET_EXACT], c->L, i, c->pool_val[off]);
    bc_pool_next(&off, 1, c->pool);
  }
  if ((st = per_tree_check(&c->t)) != PER_OK) fail(per_status_str(st), c->n, 0);
  if (memcmp(c->snode[SET_EXACT], c->t.node, per_tree_bytes(c->n)) != 0)
    fail("exact's tree and per.h's differ after the same sets", c->n, 0);
}

static void run_set(const bc_opts *o, FILE *csv, tctx *c) {
  bc_kernel k[SET_SIDES] = {k_set_per, k_set_exact, k_set_delta, k_set_stores};
  void *ctx[SET_SIDES];
  bc_result_n r;
  size_t bytes = per_tree_bytes(c->n);
  int s;
  for (s = 0; s < SET_SIDES; ++s) {
    ctx[s] = c;
    c->spos[s] = 0;
    c->soff[s] = 0;
    if (s != SET_PER) {
      c->snode[s] = (per_real *)bc_big_alloc(bytes, o->huge);
      memcpy(c->snode[s], c->t.node, bytes);
    }
  }
  r = bc_measure_n(o, SET_SIDES, k, ctx, 1);
  printf("%-8s N %-10u       ", "set", c->n);
  for (s = 0; s < SET_SIDES; ++s) print_ns(set_side[s], r.ns[s]);
  printf("  exact/per.h %5.2f  delta/exact %5.2f\n", r.ns[1] / r.ns[0],
         r.ns[2] / r.ns[1]);
  fflush(stdout);
  for (s = 0; s < SET_SIDES; ++s)
    csv_row(csv, "set", c->n, 0, set_side[s], r.ns[s], r.min[s], r.max[s],
            r.reps, r.iters[s]);
  if (c->err != PER_OK) fail(per_status_str(c->err), c->n, 0);
  c->err = PER_OK;
  check_sets(c);
  for (s = 0; s < SET_SIDES; ++s) {
    if (s != SET_PER) free(c->snode[s]);
    c->snode[s] = NULL;
  }
}

/* ---- checks (never timed) ---------------------------------------------- */

static void check_samples(tctx *c) {
  uint32_t i;
  for (i = 0; i < c->B; ++i)
    if (c->idx_p[i] >= c->n || !(c->val_p[i] > 0) ||
        c->val_p[i] != per_tree_get(&c->t, c->idx_p[i])) {
      fail("per.h sampled an invalid leaf", c->n, c->B);
      return;
    }
}

/* The whole pool once, in order, on both trees: every leaf either side
   touched now holds its last value in the pool, whatever number of loops
   each side ran. Then per.h's tree is valid, the floor's parents are the
   sums of their children, and the two trees are the same bits. */
static void sync_and_check(tctx *c, int quick) {
  size_t off;
  uint64_t s = 12345;
  uint32_t i, checks = quick || c->L - 1 < CHECK_NODES ? c->L - 1 : CHECK_NODES;
  per_status st;
  for (off = 0; off + c->B <= c->pool; off += c->B) {
    if (per_tree_set_batch(&c->t, c->pool_idx + off, c->pool_val + off, c->B) !=
        PER_OK)
      fail("per_tree_set_batch", c->n, c->B);
    floor_update(c->fnode, c->L, c->depth, c->pool_idx + off, c->pool_val + off,
                 c->B);
  }
  c->off_p = c->off_f = 0;
  if ((st = per_tree_check(&c->t)) != PER_OK)
    fail(per_status_str(st), c->n, c->B);
  for (i = 0; i < checks; ++i) {
    uint32_t k = checks == c->L - 1 ? i + 1 : 1 + bc_below(&s, c->L - 1);
    if (c->fnode[k] != c->fnode[2 * k] + c->fnode[2 * k + 1]) {
      fail("the floor's parent is not the sum of its children", c->n, c->B);
      break;
    }
  }
  if (memcmp(c->fnode, c->t.node, per_tree_bytes(c->n)) != 0)
    fail("the floor's tree and per.h's differ after the same inputs", c->n,
         c->B);
}

/* ---- set-up ------------------------------------------------------------ */

static void setup(tctx *c, const bc_opts *o, uint32_t n, uint32_t maxB) {
  uint64_t s;
  memset(c, 0, sizeof *c);
  c->n = n;
  s = bc_build_trees(o, n, 1, 0, &c->t, &c->per_mem, NULL);
  c->L = c->t.leaves;
  c->depth = c->t.depth;
  per_rng_init(&c->rng, o->seed);

  /* The pool: as bench_tree's (the same pairs for the same N and B). */
  c->pool = bc_pool_size(maxB);
  c->pool_idx = (uint32_t *)bc_xmalloc(c->pool * sizeof(uint32_t));
  c->pool_val = (per_real *)bc_xmalloc(c->pool * sizeof(per_real));
  bc_fill_pool(&s, n, c->pool, c->pool_idx, c->pool_val, NULL);
  c->idx_p = (uint32_t *)bc_xmalloc((size_t)maxB * sizeof(uint32_t));
  c->val_p = (per_real *)bc_xmalloc((size_t)maxB * sizeof(per_real));
  c->lane_k = (uint32_t *)bc_xmalloc((size_t)maxB * sizeof(uint32_t));
  c->lane_acc = (per_real *)bc_xmalloc((size_t)maxB * sizeof(per_real));
}

static void teardown(tctx *c) {
  per_tree_free(&c->t);
  free(c->per_mem);
  free(c->fnode);
  free(c->pool_idx);
  free(c->pool_val);
  free(c->idx_p);
  free(c->val_p);
  free(c->lane_k);
  free(c->lane_acc);
}

/* ---- driver ------------------------------------------------------------ */

static void print_ns(const char *side, double ns) {
  if (ns > 0) printf("  %s %7.2f", side, ns);
  else printf("  %s %7s", side, "-");
}

/* One figure: per.h and the floor interleaved, printed (with the
   latency-bound figure when lat_ns > 0) and written to the CSV. */
static void run_tree(const bc_opts *o, FILE *csv, tctx *c, const char *op,
                     uint32_t B, bc_kernel kp, bc_kernel kf, double lat_ns) {
  bc_kernel k[2];
  void *ctx[2];
  bc_result_n r;
  c->B = B;
  c->G = floor_lanes && floor_lanes < B ? floor_lanes : B;
  c->off_p = c->off_f = 0;
  k[0] = o->side != 2 ? kp : NULL;
  k[1] = o->side != 1 ? kf : NULL;
  ctx[0] = ctx[1] = c;
  r = bc_measure_n(o, 2, k, ctx, B);
  printf("%-8s N %-10u B %-5u", op, c->n, B);
  print_ns("per.h", r.ns[0]);
  print_ns("floor", r.ns[1]);
  if (r.ns[0] > 0 && r.ns[1] > 0)
    printf("  floor/per.h %5.2f", r.ns[1] / r.ns[0]);
  else printf("  floor/per.h %5s", "-");
  if (lat_ns > 0)
    printf("  (latency-bound, one descent alone: %u x %.1f = %.0f ns)",
           c->depth, lat_ns, c->depth * lat_ns);
  printf("\n");
  fflush(stdout);
  if (r.ns[0] > 0)
    csv_row(csv, op, c->n, B, "per.h", r.ns[0], r.min[0], r.max[0], r.reps,
            r.iters[0]);
  if (r.ns[1] > 0)
    csv_row(csv, op, c->n, B, "floor", r.ns[1], r.min[1], r.max[1], r.reps,
            r.iters[1]);
  if (lat_ns > 0)
    csv_row(csv, op, c->n, B, "latency-bound", c->depth * lat_ns,
            c->depth * lat_ns, c->depth * lat_ns, 0, 0);
  if (c->err != PER_OK) fail(per_status_str(c->err), c->n, B);
  c->err = PER_OK;
}

int main(int argc, char **argv) {
  static const uint64_t def_bytes[] = {
      (uint64_t)32 << 10,  (uint64_t)128 << 10, (uint64_t)512 << 10,
      (uint64_t)2 << 20,   (uint64_t)8 << 20,   (uint64_t)32 << 20,
      (uint64_t)128 << 20, (uint64_t)512 << 20};
  static const uint64_t quick_bytes[] = {(uint64_t)32 << 10, (uint64_t)2 << 20};
  static const uint64_t def_n[] = {16777216};
  static const uint64_t def_b[] = {1024};
  static const uint64_t quick_n[] = {4096};
  static const uint64_t quick_b[] = {64};
  bc_opts o;
  FILE *csv = NULL;
  int in, ib, j, want_chase, want_gather, want_sample, want_update, want_set;
  uint32_t maxB = 0;

  if (!bc_parse(&o, argc, argv, usage, extra_opt)) return 2;
  bc_default_list(sizes, &nsizes, o.quick ? quick_bytes : def_bytes,
                  o.quick ? 2 : 8);
  bc_default_list(o.n, &o.nn, o.quick ? quick_n : def_n, 1);
  bc_default_list(o.b, &o.nb, o.quick ? quick_b : def_b, 1);
  if (!bc_check_sizes(&o, &maxB)) return 2;
  want_chase = bc_want_op(&o, "chase");
  want_gather = bc_want_op(&o, "gather");
  want_sample = bc_want_op(&o, "sample");
  want_update = bc_want_op(&o, "update");
  want_set = bc_want_op(&o, "set");
  if (o.csv) {
    csv = fopen(o.csv, "w");
    if (!csv) {
      fprintf(stderr, "cannot write %s: %s\n", o.csv, strerror(errno));
      return 2;
    }
    fprintf(csv, "real,op,n,b,side,ns,min,max,reps,iters\n");
  }

  printf("bench_memory: memory latency and throughput; per.h (PER_REAL=%s) "
         "beside a memory-only floor\n",
         bc_real_name());
  bc_print_setup(&o, "iterations", "");
  printf("chase: %d dependent loads per iteration; gather: %d independent "
         "loads; sample, update: ns per item; set: ns per leaf\n",
         CHASE_STEPS, GATHER_LOADS);

  if (want_chase || want_gather)
    for (j = 0; j < nsizes; ++j)
      run_mem(&o, csv, sizes[j], want_chase, want_gather, "");

  for (in = 0; in < o.nn; ++in) {
    tctx c;
    uint32_t n = (uint32_t)o.n[in];
    uint64_t tree_bytes = per_tree_bytes(n);
    /* the chase over the tree's bytes: whole lines, at least two */
    uint64_t lat_bytes = (tree_bytes + LINE - 1) / LINE * LINE;
    double lat = 0;
    if (lat_bytes < 2 * LINE) lat_bytes = 2 * LINE;
    if (want_sample) {
      lat = chase_at(lat_bytes);
      if (lat == 0) {
        run_mem(&o, csv, lat_bytes, 1, 0, "  (the tree's size)");
        lat = chase_at(lat_bytes);
      }
    }
    setup(&c, &o, n, maxB);
    if (want_sample)
      for (ib = 0; ib < o.nb; ++ib) {
        run_tree(&o, csv, &c, "sample", (uint32_t)o.b[ib], k_sample_per,
                 k_sample_floor, lat);
        if (o.side != 2) check_samples(&c);
      }
    if (want_update) {
      c.fnode = (per_real *)bc_big_alloc(tree_bytes, o.huge);
      for (ib = 0; ib < o.nb; ++ib) {
        memcpy(c.fnode, c.t.node, tree_bytes);
        run_tree(&o, csv, &c, "update", (uint32_t)o.b[ib], k_update_per,
                 k_update_floor, 0);
        sync_and_check(&c, o.quick);
      }
    }
    if (want_set) run_set(&o, csv, &c);
    teardown(&c);
  }
  return bc_finish(csv, "bench_memory", failures,
                   "all sampled indices valid, the floor's tree equal to "
                   "per.h's after the same updates, exact's equal to per.h's "
                   "after the same sets");
}
