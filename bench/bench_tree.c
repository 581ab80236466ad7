/* bench_tree.c - per.h's sum tree against a classic textbook float32 sum
   tree (classic_tree.h), in one process, on the same inputs, interleaved.

   Ops, for N in {2^16, 10^6, 2^24} and B in {256, 1024, 4096}:
     sample  stratified batch of B: per_tree_sample vs classic_sample
     update  B random (index, value) pairs: per_tree_set_batch vs B
             classic_update calls (delta walk-up)
     add     filling a ring of N one item at a time: per_tree_set at the
             next position vs classic_add (no B)
     addrun  filling the ring B items at a time: per_tree_set_range on the
             next B slots (two calls where the ring wraps) vs B
             classic_add calls, as a textbook buffer adds a batch
     cycle   the PER buffer's training step on a full buffer of N: sample B
             (per_buffer_sample: ids and IS weights) and update their
             priorities from B TD errors (per_buffer_update), vs the same
             step on the classic tree: classic_sample, weights
             (N P(i))^-beta / max with powf, priorities (|td| + eps)^alpha
             with powf, B classic_update calls. alpha 0.6, beta 0.4.
     prio    the formulas alone: B priorities (|td| + 1e-6)^0.6 with
             per.h's pow as per_buffer_update computes them
             (peri_priorities: four at a time in AVX2 lanes where the CPU
             has them) vs the same one at a time with the C library's pow;
             no tree (no N)
     weight  B IS weights (pmin / p)^0.4 to float as per_buffer_sample
             computes them (peri_weights) vs the C library's pow
   Printed as ns per item (median of --reps timed loops of >= --min-time
   seconds each) and as the ratio classic / per.h (> 1: per.h faster).

   After each figure the program checks what it timed: every sampled index
   is a used leaf (and per.h's value is that leaf's value and > 0), per.h's
   tree passes per_tree_check, and after re-applying the same inputs to
   both trees, their leaves are identical. The exit status is 0 only when
   every check passes (timings are never checked). --quick runs tiny sizes
   with short loops: the smoke test.

   Build: C99 + POSIX (clock_gettime). PER_REAL is a compile-time choice;
   the Meson build makes one executable per setting. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#define PER_IMPLEMENTATION
#include "per.h"

#include "bench_common.h"

static const char *usage =
    "usage: bench_tree [options]\n"
    "  per.h's sum tree vs a classic float32 sum tree, ns per item.\n"
    "  ops: sample, update, add, addrun, cycle, prio, weight (prio and "
    "weight:\n  per.h's pow against the C library's). Example: bench_tree "
    "--op sample --n 65536 --b 1024\n";

typedef struct ctx {
  uint32_t n, B;
  int have_per, have_classic;
  per_tree t;
  per_rng rng;
  classic_tree ct;
  per_buffer buf; /* cycle: the PER buffer (full), created on demand */
  int have_buf;
  uint64_t *ids; /* cycle outputs */
  float *w_p, *w_c, *prio_c;
  void *per_mem; /* --huge: the tree's memory, owned here */
  /* inputs: pool of (index, value) pairs, cycled; the same for both */
  size_t pool;
  uint32_t *pool_idx;
  per_real *pool_val;
  float *pool_valf;
  size_t off_p, off_c; /* next pool position, per side */
  uint32_t pos_p;      /* per.h's ring position for add */
  /* outputs */
  uint32_t *idx_p, *idx_c;
  per_real *val_p;
  float *val_c;
  per_status err;
} ctx;

static int failures = 0;

static void fail(const char *what, uint32_t n, uint32_t B) {
  fprintf(stderr, "CHECK FAILED (N=%u, B=%u): %s\n", n, B, what);
  ++failures;
}

/* ---- kernels: `iters` iterations each ---------------------------------- */

static void k_sample_per(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  per_status s = bc_sample_per(&c->t, &c->rng, c->B, c->idx_p, c->val_p, iters);
  if (s != PER_OK) c->err = s;
}

static void k_sample_classic(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) classic_sample(&c->ct, c->B, c->idx_c, c->val_c);
}

static void k_update_per(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  per_status s = bc_update_per(&c->t, c->pool_idx, c->pool_val, c->pool,
                               &c->off_p, c->B, iters);
  if (s != PER_OK) c->err = s;
}

static void k_update_classic(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    classic_update_batch(&c->ct, c->pool_idx + c->off_c,
                         c->pool_valf + c->off_c, c->B);
    bc_pool_next(&c->off_c, c->B, c->pool);
  }
}

/* One iteration = one item added. */
static void k_add_per(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    per_status s = per_tree_set(&c->t, c->pos_p, c->pool_val[c->off_p]);
    if (s != PER_OK) c->err = s;
    if (++c->pos_p == c->n) c->pos_p = 0;
    bc_pool_next(&c->off_p, 1, c->pool);
  }
}

static void k_add_classic(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    classic_add(&c->ct, c->pool_valf[c->off_c]);
    bc_pool_next(&c->off_c, 1, c->pool);
  }
}

/* B values from the pool at c->off_p onwards into the ring at c->pos_p. */
static per_status add_run_per(ctx *c) {
  uint32_t done = 0;
  per_status s = PER_OK;
  while (done < c->B && s == PER_OK) {
    uint32_t m = c->B - done;
    if (m > c->n - c->pos_p) m = c->n - c->pos_p; /* ring wraps */
    if (m > c->pool - c->off_p) m = (uint32_t)(c->pool - c->off_p);
    s = per_tree_set_range(&c->t, c->pos_p, c->pool_val + c->off_p, m);
    done += m;
    c->pos_p += m;
    if (c->pos_p == c->n) c->pos_p = 0;
    c->off_p += m;
    if (c->off_p == c->pool) c->off_p = 0;
  }
  return s;
}

/* One iteration = B items added. */
static void k_addrun_per(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    per_status s = add_run_per(c);
    if (s != PER_OK) c->err = s;
  }
}

static void k_addrun_classic(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  uint64_t i;
  uint32_t j;
  for (i = 0; i < iters; ++i)
    for (j = 0; j < c->B; ++j) {
      classic_add(&c->ct, c->pool_valf[c->off_c]);
      bc_pool_next(&c->off_c, 1, c->pool);
    }
}

/* One iteration = one training step of B items. The TD errors come from
   the pool (values in (0, 1]), the same for both sides. */
static void k_cycle_per(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    per_status s = per_buffer_sample(&c->buf, c->B, NULL, NULL, c->ids, c->w_p);
    if (s == PER_OK)
      s = per_buffer_update(&c->buf, c->ids, c->pool_valf + c->off_p, c->B,
                            NULL);
    if (s != PER_OK) c->err = s;
    bc_pool_next(&c->off_p, c->B, c->pool);
  }
}

static void k_cycle_classic(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  uint64_t i;
  for (i = 0; i < iters; ++i) {
    classic_step(&c->ct, c->n, c->B, c->pool_valf + c->off_c, 0.6f, 0.4f, 1e-6f,
                 c->idx_c, c->val_c, c->w_c, c->prio_c);
    bc_pool_next(&c->off_c, c->B, c->pool);
  }
}

/* The formulas alone (prio, weight): per.h's pow against the C library's
   on the same B inputs from the pool (values in (0, 1]: TD errors, and
   leaves against pmin = 2^-20), into val_p / w_p and val_c / w_c. */
static void k_prio_per(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  uint64_t i;
  uint32_t j;
  for (i = 0; i < iters; ++i) {
    const float *td = c->pool_valf + c->off_p;
    for (j = 0; j < c->B; j += PERI_CHUNK)
      peri_priorities(td + j, c->B - j < PERI_CHUNK ? c->B - j : PERI_CHUNK,
                      1e-6, 0.6, c->val_p + j);
    bc_pool_next(&c->off_p, c->B, c->pool);
  }
}

static void k_prio_libm(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  uint64_t i;
  uint32_t j;
  for (i = 0; i < iters; ++i) {
    const float *td = c->pool_valf + c->off_c;
    for (j = 0; j < c->B; ++j) {
      double v = pow(fabs((double)td[j]) + 1e-6, 0.6);
      c->prio_c[j] = (float)(v <= (double)PER_LEAF_MAX ? v : PER_LEAF_MAX);
    }
    bc_pool_next(&c->off_c, c->B, c->pool);
  }
}

static void k_weight_per(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  uint64_t i;
  uint32_t j, g, m;
  per_real leaf[PERI_CHUNK];
  for (i = 0; i < iters; ++i) {
    const per_real *v = c->pool_val + c->off_p;
    for (j = 0; j < c->B; j += m) {
      m = c->B - j < PERI_CHUNK ? c->B - j : PERI_CHUNK;
      for (g = 0; g < m; ++g) leaf[g] = v[j + g] + (per_real)1;
      peri_weights(leaf, m, (per_real)0.5, 0.4, c->w_p + j);
    }
    bc_pool_next(&c->off_p, c->B, c->pool);
  }
}

static void k_weight_libm(void *p, uint64_t iters) {
  ctx *c = (ctx *)p;
  uint64_t i;
  uint32_t j;
  for (i = 0; i < iters; ++i) {
    const per_real *v = c->pool_val + c->off_c;
    for (j = 0; j < c->B; ++j)
      c->w_c[j] = (float)pow(0.5 / (double)(v[j] + (per_real)1), 0.4);
    bc_pool_next(&c->off_c, c->B, c->pool);
  }
}

/* ---- checks (never timed) ---------------------------------------------- */

/* The buffer for the cycle op: capacity n, filled with n items (4 bytes
   each), every leaf at the initial priority; the classic tree's leaves
   are the same (all 1). */
static void setup_buffer(ctx *c, const bc_opts *o, uint32_t maxB) {
  per_config cfg;
  uint32_t i, chunk = 4096, *items;
  per_status s;
  cfg = per_config_default(c->n, sizeof(uint32_t));
  cfg.seed = o->seed;
  s = per_buffer_init(&c->buf, &cfg, NULL);
  items = (uint32_t *)bc_xmalloc(chunk * sizeof(uint32_t));
  for (i = 0; i < c->n && s == PER_OK; i += chunk) {
    uint32_t m = c->n - i < chunk ? c->n - i : chunk, j;
    for (j = 0; j < m; ++j) items[j] = i + j;
    s = per_buffer_add_batch(&c->buf, items, m);
  }
  free(items);
  if (s != PER_OK) {
    fprintf(stderr, "per.h buffer of %u: %s\n", c->n, per_status_str(s));
    exit(2);
  }
  c->have_buf = 1;
  c->ids = (uint64_t *)bc_xmalloc((size_t)maxB * sizeof(uint64_t));
  if (c->have_classic) {
    float *one = (float *)bc_xmalloc((size_t)c->n * sizeof(float));
    for (i = 0; i < c->n; ++i) one[i] = 1.0f;
    classic_build(&c->ct, one, c->n);
    free(one);
  }
}

/* The cycle's results: the buffer's invariants, weights in (0, 1] with a
   1 in every batch, ids of filled slots. */
static void check_cycle(ctx *c) {
  uint32_t j, ones = 0;
  per_status s = per_buffer_check(&c->buf);
  if (s != PER_OK) fail(per_status_str(s), c->n, c->B);
  for (j = 0; j < c->B; ++j) {
    if (!(c->w_p[j] > 0 && c->w_p[j] <= 1) || (uint32_t)c->ids[j] >= c->n) {
      fail("per.h buffer weight or id out of range", c->n, c->B);
      return;
    }
    ones += c->w_p[j] == 1.0f;
  }
  if (ones == 0)
    fail("per.h buffer weights not normalized by the batch max", c->n, c->B);
}

/* Both trees hold the same leaves, and per.h's tree is valid. */
static void check_trees(ctx *c) {
  uint32_t i;
  per_status s;
  if (c->have_per && (s = per_tree_check(&c->t)) != PER_OK)
    fail(per_status_str(s), c->n, c->B);
  if (!c->have_per || !c->have_classic) return;
  for (i = 0; i < c->n; ++i)
    if ((float)per_tree_get(&c->t, i) != c->ct.node[c->ct.leaves + i]) {
      fail("per.h and classic leaves differ after the same inputs", c->n, c->B);
      return;
    }
}

/* Apply the whole pool once to both trees, in order: every leaf either
   of them touched now holds the value of its last occurrence in the pool,
   whatever number of loops each side ran. */
static void sync_updates(ctx *c) {
  size_t off;
  for (off = 0; off + c->B <= c->pool; off += c->B) {
    if (c->have_per && per_tree_set_batch(&c->t, c->pool_idx + off,
                                          c->pool_val + off, c->B) != PER_OK)
      fail("per_tree_set_batch", c->n, c->B);
    if (c->have_classic)
      classic_update_batch(&c->ct, c->pool_idx + off, c->pool_valf + off, c->B);
  }
  c->off_p = c->off_c = 0;
}

/* One full lap of the ring from position 0, per.h by runs of B
   (per_tree_set_range), classic one item at a time. */
static void sync_addruns(ctx *c) {
  uint32_t i;
  c->pos_p = 0;
  c->off_p = 0;
  c->ct.next = 0;
  c->off_c = 0;
  if (c->have_per)
    for (i = 0; i < c->n; i += c->B) {
      uint32_t keep = c->B;
      if (c->n - i < c->B) c->B = c->n - i;
      if (add_run_per(c) != PER_OK) fail("per_tree_set_range", c->n, c->B);
      c->B = keep;
    }
  if (c->have_classic)
    for (i = 0; i < c->n; ++i) {
      classic_add(&c->ct, c->pool_valf[c->off_c]);
      bc_pool_next(&c->off_c, 1, c->pool);
    }
  c->off_p = c->off_c = 0;
}

/* One full lap of the ring from position 0 on both trees. */
static void sync_adds(ctx *c) {
  uint32_t i;
  c->pos_p = 0;
  c->ct.next = 0;
  for (i = 0; i < c->n; ++i) {
    size_t j = i % c->pool;
    if (c->have_per && per_tree_set(&c->t, i, c->pool_val[j]) != PER_OK)
      fail("per_tree_set", c->n, c->B);
    if (c->have_classic) classic_add(&c->ct, c->pool_valf[j]);
  }
  c->off_p = c->off_c = 0;
}

static void check_samples(ctx *c) {
  uint32_t i;
  for (i = 0; i < c->B; ++i) {
    if (c->have_per && (c->idx_p[i] >= c->n || !(c->val_p[i] > 0) ||
                        c->val_p[i] != per_tree_get(&c->t, c->idx_p[i]))) {
      fail("per.h sampled an invalid leaf", c->n, c->B);
      return;
    }
    if (c->have_classic && c->idx_c[i] >= c->n) {
      fail("classic sampled an invalid leaf", c->n, c->B);
      return;
    }
  }
}

/* Fraction of u in [0, total) for which both trees find the same leaf
   (the classic one in float32, with its own total). */
static double agreement(ctx *c, uint32_t draws) {
  uint64_t s = 12345;
  uint32_t i, same = 0;
  for (i = 0; i < draws; ++i) {
    double r = (double)(bc_split(&s) >> 11) * (1.0 / 9007199254740992.0);
    uint32_t a = 0, b;
    if (per_tree_find(&c->t, (per_real)(r * (double)per_tree_total(&c->t)),
                      &a) != PER_OK)
      return 0;
    b = classic_find(&c->ct, (float)r * classic_total(&c->ct));
    same += a == b;
  }
  return (double)same / draws;
}

/* ---- set-up ------------------------------------------------------------ */

static void setup(ctx *c, const bc_opts *o, uint32_t n, uint32_t maxB) {
  uint64_t s;
  memset(c, 0, sizeof *c);
  c->n = n;
  c->have_per = o->side != 2;
  c->have_classic = o->side != 1;
  s = bc_build_trees(o, n, c->have_per, c->have_classic, &c->t, &c->per_mem,
                     &c->ct);
  if (c->have_per) per_rng_init(&c->rng, o->seed);

  /* The pool: enough pairs that batches do not repeat within a short loop. */
  c->pool = bc_pool_size(maxB);
  c->pool_idx = (uint32_t *)bc_xmalloc(c->pool * sizeof(uint32_t));
  c->pool_val = (per_real *)bc_xmalloc(c->pool * sizeof(per_real));
  c->pool_valf = (float *)bc_xmalloc(c->pool * sizeof(float));
  bc_fill_pool(&s, n, c->pool, c->pool_idx, c->pool_val, c->pool_valf);
  c->idx_p = (uint32_t *)bc_xmalloc((size_t)maxB * sizeof(uint32_t));
  c->idx_c = (uint32_t *)bc_xmalloc((size_t)maxB * sizeof(uint32_t));
  c->val_p = (per_real *)bc_xmalloc((size_t)maxB * sizeof(per_real));
  c->val_c = (float *)bc_xmalloc((size_t)maxB * sizeof(float));
  c->w_p = (float *)bc_xmalloc((size_t)maxB * sizeof(float));
  c->w_c = (float *)bc_xmalloc((size_t)maxB * sizeof(float));
  c->prio_c = (float *)bc_xmalloc((size_t)maxB * sizeof(float));
}

static void teardown(ctx *c) {
  if (c->have_buf) {
    per_buffer_free(&c->buf);
    free(c->ids);
  }
  free(c->w_p);
  free(c->w_c);
  free(c->prio_c);
  per_tree_free(&c->t);
  free(c->per_mem);
  if (c->have_classic) classic_free(&c->ct);
  free(c->pool_idx);
  free(c->pool_val);
  free(c->pool_valf);
  free(c->idx_p);
  free(c->idx_c);
  free(c->val_p);
  free(c->val_c);
}

/* ---- driver ------------------------------------------------------------ */

static void report(FILE *csv, const char *op, uint32_t n, uint32_t B,
                   const bc_result *r) {
  char bs[16];
  if (B) snprintf(bs, sizeof bs, "%u", B);
  else snprintf(bs, sizeof bs, "-");
  printf("%-7s %10u %5s  %13.2f  %15.2f", op, n, bs, r->a_ns, r->b_ns);
  bc_print_ratio(r);
  fflush(stdout);
  bc_csv_row(csv, op, n, B, r, B ? (double)B : 1.0, "per.h", "classic");
}

/* One figure: op on batches of B (0: one item at a time), both sides
   timed from the start of the pool and ring, reported, its errors
   failed. */
static void run_op(const bc_opts *o, FILE *csv, ctx *c, const char *op,
                   uint32_t B, bc_kernel kp, bc_kernel kc) {
  bc_result r;
  c->B = B;
  c->off_p = c->off_c = 0;
  c->pos_p = 0;
  r = bc_measure(o, c->have_per ? kp : NULL, c, c->have_classic ? kc : NULL, c,
                 B ? B : 1);
  report(csv, op, c->n, B, &r);
  if (c->err != PER_OK) fail(per_status_str(c->err), c->n, B);
  c->err = PER_OK;
}

int main(int argc, char **argv) {
  static const uint64_t def_n[] = {65536, 1000000, 16777216};
  static const uint64_t def_b[] = {256, 1024, 4096};
  static const uint64_t quick_n[] = {1000, 4096};
  static const uint64_t quick_b[] = {16, 64};
  bc_opts o;
  FILE *csv;
  int in, ib;
  uint32_t maxB = 0;

  if (!bc_parse(&o, argc, argv, usage, NULL)) return 2;
  bc_default_list(o.n, &o.nn, o.quick ? quick_n : def_n, o.quick ? 2 : 3);
  bc_default_list(o.b, &o.nb, o.quick ? quick_b : def_b, o.quick ? 2 : 3);
  if (!bc_check_sizes(&o, &maxB)) return 2;
  csv = bc_csv_open(&o);

  printf("bench_tree: per.h (PER_REAL=%s) vs classic float32 tree\n",
         bc_real_name());
  bc_print_setup(&o, "iterations", "");
  printf("%-7s %10s %5s  %13s  %15s  %7s\n", "op", "N", "B", "per.h ns/item",
         "classic ns/item", "classic/per.h");

  for (in = 0; in < o.nn; ++in) {
    ctx c;
    uint32_t n = (uint32_t)o.n[in];
    setup(&c, &o, n, maxB);
    if (c.have_per && c.have_classic) {
      double agree = agreement(&c, 4096);
      if (o.quick && agree < 0.98)
        fail("per.h and classic descents disagree", n, 0);
      if (o.quick)
        printf("  (N=%u: both trees find the same leaf for %.2f%% of u)\n", n,
               100 * agree);
    }
    if (bc_want_op(&o, "sample"))
      for (ib = 0; ib < o.nb; ++ib) {
        run_op(&o, csv, &c, "sample", (uint32_t)o.b[ib], k_sample_per,
               k_sample_classic);
        check_samples(&c);
      }
    if (bc_want_op(&o, "update"))
      for (ib = 0; ib < o.nb; ++ib) {
        run_op(&o, csv, &c, "update", (uint32_t)o.b[ib], k_update_per,
               k_update_classic);
        sync_updates(&c);
        check_trees(&c);
      }
    if (bc_want_op(&o, "add")) {
      run_op(&o, csv, &c, "add", 0, k_add_per, k_add_classic);
      sync_adds(&c);
      check_trees(&c);
    }
    if (bc_want_op(&o, "addrun"))
      for (ib = 0; ib < o.nb; ++ib) {
        run_op(&o, csv, &c, "addrun", (uint32_t)o.b[ib], k_addrun_per,
               k_addrun_classic);
        sync_addruns(&c);
        check_trees(&c);
      }
    if (bc_want_op(&o, "prio") && in == 0)
      for (ib = 0; ib < o.nb; ++ib)
        run_op(&o, csv, &c, "prio", (uint32_t)o.b[ib], k_prio_per, k_prio_libm);
    if (bc_want_op(&o, "weight") && in == 0)
      for (ib = 0; ib < o.nb; ++ib)
        run_op(&o, csv, &c, "weight", (uint32_t)o.b[ib], k_weight_per,
               k_weight_libm);
    /* Last: it rebuilds the classic tree with the buffer's leaves. */
    if (bc_want_op(&o, "cycle") && c.have_per) {
      setup_buffer(&c, &o, maxB);
      for (ib = 0; ib < o.nb; ++ib) {
        run_op(&o, csv, &c, "cycle", (uint32_t)o.b[ib], k_cycle_per,
               k_cycle_classic);
        check_cycle(&c);
      }
    }
    teardown(&c);
  }
  return bc_finish(csv, "bench_tree", failures,
                   "all sampled indices valid, trees identical after the "
                   "same inputs");
}
