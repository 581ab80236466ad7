/* The C side of test_c_bitwise.py: one fixed sequence of per_buffer calls,
   printed so that the Python package's run of the same calls can be
   compared with it line by line (ids, weight bits, item bytes).

     ref_ops run FLAGS PATH      the script, then save to PATH
     ref_ops resume FLAGS PATH   load PATH, then the resume script
     ref_ops tree                per_tree and per_cat calls (tree_script)

   Built with -DPER_REAL=float too: the same lines then come from float
   nodes, as the package's dtype=float32 classes must give them.
   Keep in step with script(), resume() and tree_script() in
   test_c_bitwise.py. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_IMPLEMENTATION
#include "per.h"

#define PY_LAYOUT \
  "numpy:[[\"obs\",\"<f4\",[4]],[\"action\",\"<i4\"],[\"reward\",\"<f4\"]]"

typedef struct item {
  float obs[4];
  int32_t action;
  float reward;
} item;

static void fail(const char *what, per_status s) {
  fprintf(stderr, "ref_ops: %s: %s\n", what, per_status_str(s));
  exit(1);
}

static void print_batch(const char *tag, per_buffer *b, uint32_t B,
                        const per_sample_opts *o) {
  item *it = (item *)malloc(B * sizeof *it);
  uint64_t *ids = (uint64_t *)malloc(B * sizeof *ids);
  float *w = (float *)malloc(B * sizeof *w);
  per_status s;
  uint32_t j;
  size_t k;
  if (!it || !ids || !w) exit(1);
  s = per_buffer_sample(b, B, o, it, ids, w);
  if (s != PER_OK) fail(tag, s);
  printf("%s ids", tag);
  for (j = 0; j < B; j++) printf(" %" PRIu64, ids[j]);
  printf("\n%s w", tag);
  for (j = 0; j < B; j++) {
    uint32_t bits;
    memcpy(&bits, &w[j], 4);
    printf(" %08" PRIx32, bits);
  }
  printf("\n%s items ", tag);
  for (k = 0; k < B * sizeof *it; k++)
    printf("%02x", ((const unsigned char *)it)[k]);
  printf("\n");
  free(it);
  free(ids);
  free(w);
}

/* td of a sampled id: from its slot, some negative, some zero. */
static void update(per_buffer *b, uint32_t B) {
  uint64_t *ids = (uint64_t *)malloc(B * sizeof *ids);
  float *td = (float *)malloc(B * sizeof *td);
  uint32_t j, stale = 0;
  per_status s;
  if (!ids || !td) exit(1);
  if ((s = per_buffer_sample(b, B, NULL, NULL, ids, NULL)) != PER_OK)
    fail("sample for update", s);
  for (j = 0; j < B; j++)
    td[j] = (float)(uint32_t)(ids[j] % 97u) * 0.03125f - 1.0f;
  if ((s = per_buffer_update(b, ids, td, B, &stale)) != PER_OK)
    fail("update", s);
  printf("stale %" PRIu32 "\n", stale);
  free(ids);
  free(td);
}

/* The node values v[0..n) as hex of their bits (per_real's width). */
static void print_reals(const char *tag, const per_real *v, uint32_t n) {
  uint32_t j;
  printf("%s", tag);
  for (j = 0; j < n; j++) {
    if (sizeof(per_real) == 4) {
      uint32_t bits;
      memcpy(&bits, &v[j], 4);
      printf(" %08" PRIx32, bits);
    } else {
      uint64_t bits;
      memcpy(&bits, &v[j], 8);
      printf(" %016" PRIx64, bits);
    }
  }
  printf("\n");
}

static void print_ids(const char *tag, const uint32_t *idx, uint32_t n) {
  uint32_t j;
  printf("%s", tag);
  for (j = 0; j < n; j++) printf(" %" PRIu32, idx[j]);
  printf("\n");
}

/* A tree of 1000 leaves: build, batch sets with duplicates, stratified,
   iid and categorical draws, find, prefix, then the whole node array. */
static int tree_ops(void) {
  enum { CAP = 1000, B = 64 };
  per_tree t;
  per_cat c;
  per_rng rng;
  per_real *val = (per_real *)malloc(CAP * sizeof *val), out[B], u;
  uint32_t *idx = (uint32_t *)malloc(CAP * sizeof *idx), got[B], i, r;
  per_status s;
  if (!val || !idx) return 1;
  if ((s = per_tree_init(&t, CAP, NULL)) != PER_OK) fail("tree init", s);
  if ((s = per_cat_init(&c, B, NULL)) != PER_OK) fail("cat init", s);
  per_rng_init(&rng, 777);
  for (i = 0; i < CAP; i++)
    val[i] = (per_real)((double)(i % 13) * 0.1 + (double)(i % 7) * 1e-3);
  if ((s = per_tree_build(&t, val, CAP)) != PER_OK) fail("build", s);
  for (r = 0; r < 4; r++) {
    for (i = 0; i < 200; i++) {
      idx[i] = (i * 37u + r * 101u) % CAP;
      val[i] = (per_real)((double)((i + r) % 17) * 0.37 + 1e-4 * (double)r);
    }
    if ((s = per_tree_set_batch(&t, idx, val, 200)) != PER_OK) fail("set", s);
    print_reals("total", &t.node[1], 1);
    if ((s = per_tree_sample(&t, &rng, B, got, out)) != PER_OK)
      fail("sample", s);
    print_ids("strat ids", got, B);
    print_reals("strat val", out, B);
    if ((s = per_tree_sample_iid(&t, &rng, B, got, out)) != PER_OK)
      fail("iid", s);
    print_ids("iid ids", got, B);
    print_reals("iid val", out, B);
    if ((s = per_cat_sample(&c, &t, &rng, 32, got, out)) != PER_OK)
      fail("cat", s);
    print_ids("cat ids", got, 32);
    print_reals("cat val", out, 32);
    for (i = 0; i < 8; i++) {
      u = (per_real)((double)i * 0.125 * (double)per_tree_total(&t));
      if ((s = per_tree_find(&t, u, &got[i])) != PER_OK) fail("find", s);
      out[i] = per_tree_prefix(&t, (i * 97u + r) % CAP);
    }
    print_ids("find", got, 8);
    print_reals("prefix", out, 8);
  }
  print_reals("nodes", t.node, 2 * t.leaves);
  per_cat_free(&c);
  per_tree_free(&t);
  free(val);
  free(idx);
  return 0;
}

int main(int argc, char **argv) {
  per_config cfg;
  per_buffer b;
  per_sample_opts uniq = {PER_SAMPLE_UNIQUE, 0, 0, NULL};
  per_sample_opts win = {0, 0, 200, NULL};
  per_sample_opts beta = {PER_SAMPLE_BETA, 0.9, 0, NULL};
  per_status s;
  uint32_t next = 0, r;
  if (argc == 2 && strcmp(argv[1], "tree") == 0) return tree_ops();
  if (argc != 4) {
    fprintf(stderr, "usage: ref_ops run|resume FLAGS PATH | ref_ops tree\n");
    return 2;
  }
  cfg = per_config_default(1000, sizeof(item));
  cfg.alpha = 0.7;
  cfg.beta0 = 0.5;
  cfg.beta_steps = 50;
  cfg.eps = 1e-3;
  cfg.seed = 12345;
  cfg.flags = (uint32_t)strtoul(argv[2], NULL, 10);
  if ((s = per_buffer_init(&b, &cfg, NULL)) != PER_OK) fail("init", s);
  /* the layout text the package's ReplayBuffer names for this item
     (test_c_bitwise.py checks that it still does) */
  if ((s = per_buffer_set_layout(&b, PY_LAYOUT)) != PER_OK) fail("layout", s);
  if (strcmp(argv[1], "run") == 0) {
    for (r = 0; r < 6; r++) {
      uint32_t n = 37 + 113 * r, j;
      item *it = (item *)malloc(n * sizeof *it);
      uint8_t *ends = (uint8_t *)malloc(n);
      if (!it || !ends) return 1;
      for (j = 0; j < n; j++) {
        uint32_t g = next + j, k;
        for (k = 0; k < 4; k++) it[j].obs[k] = (float)g + 0.25f * (float)k;
        it[j].action = (int32_t)(g % 7);
        it[j].reward = (float)(g % 11) * 0.5f;
        ends[j] = g % 50 == 49 ? PER_END_TERMINATED : PER_END_NONE;
      }
      if ((s = per_buffer_add_steps(&b, it, n, ends)) != PER_OK) fail("add", s);
      next += n;
      free(it);
      free(ends);
      print_batch("plain", &b, 64, NULL);
      update(&b, 64);
      print_batch("unique", &b, 32, &uniq);
      print_batch("window", &b, 16, &win);
      print_batch("beta", &b, 8, &beta);
    }
    if ((s = per_buffer_save(&b, argv[3])) != PER_OK) fail("save", s);
  } else {
    if ((s = per_buffer_load(&b, argv[3])) != PER_OK) fail("load", s);
    for (r = 0; r < 3; r++) {
      print_batch("plain", &b, 64, NULL);
      update(&b, 48);
      print_batch("unique", &b, 32, &uniq);
    }
  }
  per_buffer_free(&b);
  return 0;
}
