/* test_buffer.c - the replay buffer (per_buffer_*): adds, sampling,
   IS weights, the beta schedule, updates, stale ids, windows, the uniform
   modes, bad input and allocation failure. Runs with PER_REAL double and
   float.

   Statistical checks use fixed seeds and fail when a chi-square p-value is
   below P_MIN = 1e-6 (false-failure probability 1e-6 per check for a
   correct sampler; stratification only lowers the variance of the counts,
   which keeps the test conservative). */
#include "buffer_util.h"
#include "stats.h"

#define P_MIN 1e-6

/* The item of the seed tests: one transition, with its add index. */
typedef struct transition {
  float obs[4];
  int32_t act;
  float rew;
  float next_obs[4];
  uint32_t done;
  uint32_t index; /* the add call that wrote it */
} transition;

static transition make_transition(per_rng *r, uint32_t i) {
  transition t;
  int k;
  memset(&t, 0, sizeof t);
  for (k = 0; k < 4; ++k) {
    t.obs[k] = per_rng_float(r) - 0.5f;
    t.next_obs[k] = per_rng_float(r) - 0.5f;
  }
  t.act = (int32_t)(i % 2);
  t.rew = 1.0f;
  t.index = i;
  return t;
}

static per_real leaf(const per_buffer *b, uint32_t slot) {
  return per_tree_get(&b->tree, slot);
}

/* The leaf the buffer must compute for td. */
static per_real leaf_of(const per_buffer *b, float td) {
  double p = b->cfg.alpha == 0
                 ? 1.0
                 : pow(fabs((double)td) + b->cfg.eps, b->cfg.alpha);
  return (per_real)p;
}

/* ---- config -------------------------------------------------------------- */

static void test_config(void) {
  per_config c = per_config_default(10, 4), z;
  per_buffer b;
  float w[4];
  uint64_t ids[4];
  uint32_t i, v = 0;
  CHECK_EQ_U(c.capacity, 10);
  CHECK_EQ_U(c.item_size, 4);
  CHECK_EQ_F(c.alpha, 0.6);
  CHECK_EQ_F(c.beta0, 0.4);
  CHECK_EQ_F(c.beta1, 1.0);
  CHECK_EQ_U(c.beta_steps, 200000);
  CHECK_EQ_F(c.eps, 1e-6);
  CHECK_EQ_F(c.max_priority, 1.0);
  CHECK_EQ_U(c.seed, 0);
  CHECK_EQ_U(c.flags, 0);
  CHECK_EQ_U(c.max_unique, 10);
  CHECK_EQ_U(per_config_default(100000, 4).max_unique, 65536);

  /* Zeros are read as zeros: alpha 0 is uniform replay (every leaf 1),
     beta 0 no correction, eps 0 no floor; beta_steps 0 is beta1 at once. */
  c.alpha = 0;
  c.beta0 = 0;
  c.beta1 = 0;
  c.eps = 0;
  c.beta_steps = 0;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_EQ_F(b.cfg.alpha, 0);
  CHECK_EQ_F(b.cfg.beta0, 0);
  CHECK_EQ_F(b.cfg.eps, 0);
  CHECK_EQ_F(per_buffer_beta(&b), 0);
  for (i = 0; i < 6; ++i) CHECK_OK(per_buffer_add(&b, &i));
  {
    float td[3] = {5, 0.001f, 0};
    uint64_t up[3];
    up[0] = 0 | (uint64_t)1 << 32;
    up[1] = 1 | (uint64_t)1 << 32;
    up[2] = 2 | (uint64_t)1 << 32;
    CHECK_OK(per_buffer_update(&b, up, td, 3, NULL));
  }
  for (i = 0; i < 6; ++i) CHECK_EQ_F(per_tree_get(&b.tree, i), 1);
  CHECK_OK(per_buffer_sample(&b, 4, NULL, NULL, ids, w));
  for (i = 0; i < 4; ++i) CHECK_EQ_F(w[i], 1);
  per_buffer_free(&b);
  c = per_config_default(10, 4);
  c.beta_steps = 0;
  c.beta1 = 0.7;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_EQ_F(per_buffer_beta(&b), 0.7);
  CHECK_OK(per_buffer_add(&b, &v));
  CHECK_OK(per_buffer_sample(&b, 1, NULL, NULL, NULL, NULL));
  CHECK_EQ_F(per_buffer_beta(&b), 0.7);
  per_buffer_free(&b);

  /* The old idiom, a zeroed config with capacity and item_size filled in,
     is refused loudly rather than run with silent defaults. */
  memset(&z, 0, sizeof z);
  z.capacity = 10;
  z.item_size = 4;
  CHECK_STATUS(per_buffer_init(&b, &z, NULL), PER_ERR_ARG);
  z.max_priority = 1; /* max_unique still 0 */
  CHECK_STATUS(per_buffer_init(&b, &z, NULL), PER_ERR_ARG);
  z.max_unique = 10; /* now every field is as written: a valid config */
  CHECK_OK(per_buffer_init(&b, &z, NULL));
  CHECK_EQ_F(b.cfg.alpha, 0);
  per_buffer_free(&b);
}

/* ---- the seed write-ups' buffer tests --------------------------------- */

/* push 200, sample 64: every output has its shape and meaning */
static void test_push_sample_shapes(void) {
  per_config c = cfg_of(1024, sizeof(transition));
  per_buffer b;
  per_rng r;
  transition out[64], want;
  uint64_t ids[64];
  float w[64];
  uint32_t i;
  per_rng_init(&r, 1);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (i = 0; i < 200; ++i) {
    transition t = make_transition(&r, i);
    CHECK_OK(per_buffer_add(&b, &t));
  }
  CHECK_EQ_U(per_buffer_size(&b), 200);
  CHECK_OK(per_buffer_sample(&b, 64, NULL, out, ids, w));
  per_rng_init(&r, 1);
  for (i = 0; i < 64; ++i) {
    uint32_t slot = (uint32_t)ids[i], k;
    CHECK(slot < 200);
    CHECK_EQ_U(ids[i] >> 32, 1); /* written once */
    CHECK_EQ_U(out[i].index, slot);
    CHECK(w[i] > 0 && w[i] <= 1);
    /* the gathered bytes are the added bytes */
    per_rng_init(&r, 1);
    for (k = 0; k <= slot; ++k) want = make_transition(&r, k);
    CHECK_MEM(&out[i], &want, sizeof want);
  }
  /* all leaves equal: every weight is exactly 1 */
  for (i = 0; i < 64; ++i) CHECK_EQ_F(w[i], 1);
  /* outputs may be NULL */
  CHECK_OK(per_buffer_sample(&b, 64, NULL, NULL, NULL, NULL));
  CHECK_OK(per_buffer_check(&b));
  per_buffer_free(&b);
}

static void test_empty(void) {
  per_config c = cfg_of(16, 4);
  per_buffer b;
  uint64_t ids[4];
  per_sample_opts o;
  bsnap s;
  memset(&o, 0, sizeof o);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_sample(&b, 4, NULL, NULL, ids, NULL), PER_ERR_EMPTY);
  o.flags = PER_SAMPLE_UNIQUE;
  CHECK_STATUS(per_buffer_sample(&b, 4, &o, NULL, ids, NULL), PER_ERR_EMPTY);
  o.window = 3;
  CHECK_STATUS(per_buffer_sample(&b, 1, &o, NULL, ids, NULL), PER_ERR_EMPTY);
  CHECK_UNCHANGED(s, &b);
  CHECK_EQ_U(per_buffer_size(&b), 0);
  per_buffer_free(&b);
}

/* capacity 100, alpha 1, slot 0 priority 100 and the rest 0.01: over 200
   batches of 8 slot 0 is drawn far more often than the 16 of uniform
   sampling (it holds ~99% of the mass: ~1580 expected). */
static void test_priority_bias(void) {
  per_config c = cfg_of(100, sizeof(transition));
  per_buffer b;
  per_rng r;
  uint64_t ids[100];
  float td[100];
  uint32_t i, k, count0 = 0;
  c.alpha = 1;
  c.beta0 = 0.4;
  c.beta1 = 0.4;
  c.seed = 7;
  per_rng_init(&r, 7);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (i = 0; i < 100; ++i) {
    transition t = make_transition(&r, i);
    CHECK_OK(per_buffer_add(&b, &t));
    ids[i] = (uint64_t)i | (uint64_t)1 << 32;
    td[i] = 0.01f;
  }
  td[0] = 100.0f;
  CHECK_OK(per_buffer_update(&b, ids, td, 100, NULL));
  for (k = 0; k < 200; ++k) {
    uint64_t got[8];
    CHECK_OK(per_buffer_sample(&b, 8, NULL, NULL, got, NULL));
    for (i = 0; i < 8; ++i) count0 += (uint32_t)got[i] == 0;
  }
  CHECK_MSG(count0 > 200, "slot 0 drawn %u times", count0);
  per_buffer_free(&b);
}

/* weights in (0, 1], max 1, and w_i > w_j exactly when p_i < p_j */
static void test_weights(void) {
  per_config c = cfg_of(50, 4);
  per_buffer b;
  uint64_t ids[50], got[64];
  float td[50], w[64];
  uint32_t i, j, v;
  float maxw = 0;
  c.seed = 3;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (v = 0; v < 50; ++v) {
    CHECK_OK(per_buffer_add(&b, &v));
    ids[v] = (uint64_t)v | (uint64_t)1 << 32;
    td[v] = 0.1f * (float)(v % 10);
  }
  CHECK_OK(per_buffer_update(&b, ids, td, 50, NULL));
  CHECK_OK(per_buffer_sample(&b, 64, NULL, NULL, got, w));
  for (i = 0; i < 64; ++i) {
    CHECK(w[i] > 0 && w[i] <= 1);
    if (w[i] > maxw) maxw = w[i];
    for (j = 0; j < 64; ++j) {
      per_real pi = leaf(&b, (uint32_t)got[i]), pj = leaf(&b, (uint32_t)got[j]);
      if (pi < pj)
        CHECK_MSG(w[i] > w[j], "p %g < %g but w %g <= %g", (double)pi,
                  (double)pj, w[i], w[j]);
      if (pi == pj) CHECK_EQ_F(w[i], w[j]);
    }
  }
  CHECK_EQ_F(maxw, 1);
  /* the value: (N P(i))^-beta / max = (p_min / p_i)^beta, beta at step 1 */
  {
    double beta = 0.4 + 0.6 * (1.0 / 200000.0), pmin = 1e300;
    CHECK_EQ_F(per_buffer_beta(&b), beta);
    CHECK_OK(per_buffer_sample(&b, 64, NULL, NULL, got, w));
    for (i = 0; i < 64; ++i)
      if ((double)leaf(&b, (uint32_t)got[i]) < pmin)
        pmin = (double)leaf(&b, (uint32_t)got[i]);
    for (i = 0; i < 64; ++i)
      CHECK_NEAR(w[i], pow(pmin / (double)leaf(&b, (uint32_t)got[i]), beta),
                 1e-6);
  }
  per_buffer_free(&b);
}

/* beta: 0.4 at first, linear, exactly 1 after beta_steps sample calls and
   from then on; PER_SAMPLE_BETA calls count as steps too */
static void test_beta_schedule(void) {
  per_config c = cfg_of(8, 4);
  per_buffer b;
  uint32_t v = 1, i;
  double prev;
  c.beta_steps = 10;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_OK(per_buffer_add(&b, &v));
  CHECK_EQ_F(per_buffer_beta(&b), 0.4);
  prev = 0.4;
  for (i = 0; i < 10; ++i) {
    CHECK_OK(per_buffer_sample(&b, 2, NULL, NULL, NULL, NULL));
    CHECK(per_buffer_beta(&b) > prev);
    prev = per_buffer_beta(&b);
  }
  CHECK_EQ_F(per_buffer_beta(&b), 1.0);
  CHECK_OK(per_buffer_sample(&b, 2, NULL, NULL, NULL, NULL));
  CHECK_EQ_F(per_buffer_beta(&b), 1.0);
  per_buffer_free(&b);

  /* the default anneal: 200,000 calls */
  c = cfg_of(8, 4);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_OK(per_buffer_add(&b, &v));
  for (i = 0; i < 100000; ++i) per_buffer_sample(&b, 1, NULL, NULL, NULL, NULL);
  CHECK_NEAR(per_buffer_beta(&b), 0.7, 1e-12);
  for (i = 0; i < 99999; ++i) per_buffer_sample(&b, 1, NULL, NULL, NULL, NULL);
  CHECK(per_buffer_beta(&b) < 1.0);
  {
    per_sample_opts o;
    memset(&o, 0, sizeof o);
    o.flags = PER_SAMPLE_BETA;
    o.beta = 0.25;
    CHECK_OK(per_buffer_sample(&b, 1, &o, NULL, NULL, NULL));
  }
  CHECK_EQ_F(per_buffer_beta(&b), 1.0);
  per_buffer_free(&b);

  /* beta = 0: no correction, every weight 1 */
  c = cfg_of(8, 4);
  c.beta0 = 0;
  c.beta1 = 0;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (v = 0; v < 8; ++v) CHECK_OK(per_buffer_add(&b, &v));
  {
    uint64_t ids[8];
    float td[8], w[8];
    for (i = 0; i < 8; ++i) {
      ids[i] = (uint64_t)i | (uint64_t)1 << 32;
      td[i] = (float)i;
    }
    CHECK_OK(per_buffer_update(&b, ids, td, 8, NULL));
    CHECK_EQ_F(per_buffer_beta(&b), 0);
    CHECK_OK(per_buffer_sample(&b, 8, NULL, NULL, ids, w));
    for (i = 0; i < 8; ++i) CHECK_EQ_F(w[i], 1);
  }
  per_buffer_free(&b);
}

/* the coursework's replay tests: indices in range, weights <= 1, updates
   with random TD errors run and keep the invariants */
static void test_replay_runs(void) {
  per_config c = cfg_of(256, sizeof(transition));
  per_buffer b;
  per_rng r;
  uint64_t ids[64];
  float w[64], td[64];
  uint32_t i, round, stale = 0;
  per_rng_init(&r, 5);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (i = 0; i < 100; ++i) {
    transition t = make_transition(&r, i);
    CHECK_OK(per_buffer_add(&b, &t));
  }
  for (round = 0; round < 50; ++round) {
    CHECK_OK(per_buffer_sample(&b, 32, NULL, NULL, ids, w));
    for (i = 0; i < 32; ++i) {
      CHECK((uint32_t)ids[i] < 100);
      CHECK(w[i] > 0 && w[i] <= 1);
      td[i] = (per_rng_float(&r) - 0.5f) * 4;
    }
    CHECK_OK(per_buffer_update(&b, ids, td, 32, &stale));
    CHECK_EQ_U(stale, 0);
  }
  CHECK_OK(per_buffer_check(&b));
  per_buffer_free(&b);
}

/* ---- updates ---------------------------------------------------------- */

static void test_update_rules(void) {
  per_config c = cfg_of(8, 4);
  per_buffer b;
  uint32_t v, stale = 99;
  uint64_t ids[3];
  float td[3];
  c.alpha = 0.5;
  c.eps = 0.25;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (v = 0; v < 5; ++v) CHECK_OK(per_buffer_add(&b, &v));
  CHECK_EQ_F(b.max_leaf, 1);
  /* duplicates: the last one wins; negative td counts by magnitude */
  ids[0] = 2 | (uint64_t)1 << 32;
  ids[1] = 3 | (uint64_t)1 << 32;
  ids[2] = 2 | (uint64_t)1 << 32;
  td[0] = 8.0f;
  td[1] = -3.75f;
  td[2] = 0.0f;
  CHECK_OK(per_buffer_update(&b, ids, td, 3, &stale));
  CHECK_EQ_U(stale, 0);
  CHECK_EQ_F(leaf(&b, 2), leaf_of(&b, 0.0f));
  CHECK_EQ_F(leaf(&b, 2), 0.5); /* (0 + 0.25)^0.5 */
  CHECK_EQ_F(leaf(&b, 3), 2.0); /* (3.75 + 0.25)^0.5 */
  /* max leaf: raised by the largest leaf written (8.25^0.5), kept after */
  CHECK_EQ_F(b.max_leaf, leaf_of(&b, 8.0f));
  td[0] = 0;
  CHECK_OK(per_buffer_update(&b, ids, td, 1, NULL));
  CHECK_EQ_F(b.max_leaf, leaf_of(&b, 8.0f));
  /* new items enter at the max leaf */
  CHECK_OK(per_buffer_add(&b, &v));
  CHECK_EQ_F(leaf(&b, 5), leaf_of(&b, 8.0f));
  /* n == 0: nothing, even with NULL arrays */
  stale = 7;
  CHECK_OK(per_buffer_update(&b, NULL, NULL, 0, &stale));
  CHECK_EQ_U(stale, 0);
  /* a huge td is capped at PER_LEAF_MAX */
  c.alpha = 10;
  per_buffer_free(&b);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_OK(per_buffer_add(&b, &v));
  td[0] = 3e38f;
  ids[0] = (uint64_t)1 << 32;
  CHECK_OK(per_buffer_update(&b, ids, td, 1, NULL));
  CHECK_EQ_F(leaf(&b, 0), PER_LEAF_MAX);
  CHECK_OK(per_buffer_check(&b));
  per_buffer_free(&b);
}

/* sample, overwrite some sampled slots by adds, update: the overwritten
   ones are skipped and counted and their leaves stay as the add set them */
static void test_stale(void) {
  per_config c = cfg_of(6, 4);
  per_buffer b;
  uint64_t ids[6];
  float td[6];
  uint32_t v, i, stale = 0, want = 0;
  per_sample_opts o;
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_UNIQUE;
  c.seed = 11;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (v = 0; v < 6; ++v) CHECK_OK(per_buffer_add(&b, &v));
  CHECK_OK(per_buffer_sample(&b, 6, &o, NULL, ids, NULL));
  for (i = 0; i < 6; ++i) {
    CHECK_EQ_U(ids[i] >> 32, 1);
    td[i] = 5.0f + (float)i;
  }
  /* two adds overwrite slots 0 and 1 (generation 2) */
  for (v = 6; v < 8; ++v) CHECK_OK(per_buffer_add(&b, &v));
  CHECK_EQ_U(b.gen[0], 2);
  CHECK_EQ_U(b.gen[1], 2);
  CHECK_EQ_U(b.gen[2], 1);
  CHECK_OK(per_buffer_update(&b, ids, td, 6, &stale));
  for (i = 0; i < 6; ++i) {
    uint32_t slot = (uint32_t)ids[i];
    if (slot < 2) {
      ++want;
      CHECK_EQ_F(leaf(&b, slot), 1); /* the add's leaf, untouched */
    } else {
      CHECK_EQ_F(leaf(&b, slot), leaf_of(&b, td[i]));
    }
  }
  CHECK_EQ_U(stale, want);
  CHECK_EQ_U(stale, 2);
  /* a fresh id for slot 0 works */
  ids[0] = 0 | (uint64_t)2 << 32;
  CHECK_OK(per_buffer_update(&b, ids, td, 1, &stale));
  CHECK_EQ_U(stale, 0);
  CHECK_OK(per_buffer_check(&b));
  per_buffer_free(&b);
}

/* per_buffer_update_check: per_buffer_update's status, stale count and
   max_leaf, with nothing changed; per_is_weight: the sample's weights. */
static void test_update_check(void) {
  per_config c = cfg_of(16, 4);
  per_buffer b, copy;
  uint64_t ids[8], saved;
  float td[8], w[8];
  uint32_t v, i, stale = 99, stale2 = 98;
  per_real mx = -1, vmin;
  double beta;
  c.seed = 3;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_OK(per_buffer_init(&copy, &c, NULL));
  for (v = 0; v < 20; ++v) { /* wrapped: slots 0..3 at generation 2 */
    CHECK_OK(per_buffer_add(&b, &v));
    CHECK_OK(per_buffer_add(&copy, &v));
  }
  beta = per_buffer_beta(&b); /* the sample's */
  CHECK_OK(per_buffer_sample(&b, 8, NULL, NULL, ids, w));
  CHECK_OK(per_buffer_sample(&copy, 8, NULL, NULL, NULL, NULL));
  /* the weights are per_is_weight over the batch's smallest leaf */
  vmin = leaf(&b, (uint32_t)ids[0]);
  for (i = 1; i < 8; ++i)
    if (leaf(&b, (uint32_t)ids[i]) < vmin) vmin = leaf(&b, (uint32_t)ids[i]);
  for (i = 0; i < 8; ++i)
    CHECK(per_is_weight(leaf(&b, (uint32_t)ids[i]), vmin, beta) == w[i]);
  CHECK(per_is_weight(2, 1, 0) == 1.0f);
  CHECK(per_is_weight(1, 2, 0.5) == 1.0f);
  CHECK(per_is_weight(4, 1, 0.5) == 0.5f);
  for (i = 0; i < 8; ++i) td[i] = 0.5f * (float)i - 1.0f;
  td[5] = 40.0f;                   /* a new largest leaf */
  ids[6] = 2u | (uint64_t)1 << 32; /* overwritten since: stale */
  ids[7] = 5u | (uint64_t)1 << 32;
  CHECK_OK(per_buffer_update_check(&b, ids, td, 8, &stale, &mx));
  CHECK_OK(per_buffer_update_check(&b, ids, td, 8, NULL, NULL));
  CHECK_MEM(b.tree.node, copy.tree.node,
            2 * (size_t)b.tree.leaves * sizeof(per_real));
  CHECK(b.max_leaf == copy.max_leaf);
  CHECK_OK(per_buffer_update(&b, ids, td, 8, &stale2));
  CHECK_EQ_U(stale, stale2);
  CHECK(stale >= 1);
  CHECK(mx == b.max_leaf);
  CHECK(mx == leaf_of(&b, 40.0f));
  /* errors: the same status as the update, nothing written */
  saved = ids[3];
  stale = 77;
  td[2] = NAN;
  CHECK_STATUS(per_buffer_update_check(&b, ids, td, 8, &stale, &mx),
               per_buffer_update(&b, ids, td, 8, NULL));
  td[2] = INFINITY;
  CHECK_STATUS(per_buffer_update_check(&b, ids, td, 8, &stale, &mx),
               PER_ERR_INF);
  td[2] = 1;
  ids[3] = 3u | (uint64_t)9 << 32; /* a generation never handed out */
  CHECK_STATUS(per_buffer_update_check(&b, ids, td, 8, &stale, &mx),
               PER_ERR_INDEX);
  ids[3] = 16; /* slot past the ring */
  CHECK_STATUS(per_buffer_update_check(&b, ids, td, 8, &stale, &mx),
               PER_ERR_INDEX);
  ids[3] = saved;
  CHECK_EQ_U(stale, 77);
  CHECK_STATUS(per_buffer_update_check(NULL, ids, td, 8, NULL, NULL),
               PER_ERR_NULL);
  CHECK_STATUS(per_buffer_update_check(&b, NULL, td, 8, NULL, NULL),
               PER_ERR_NULL);
  CHECK_OK(per_buffer_update_check(&b, NULL, NULL, 0, &stale, &mx));
  CHECK_EQ_U(stale, 0);
  CHECK(mx == b.max_leaf);
  per_buffer_free(&b);
  per_buffer_free(&copy);
}

/* ---- add_batch equals single adds ------------------------------------- */

static void test_add_batch(void) {
  /* {capacity, n}: wrapping, more than the capacity, and runs longer than
     the 256 slots set per tree call */
  static const uint32_t cases[][2] = {{13, 1},    {13, 5},    {13, 7},
                                      {13, 13},   {13, 29},   {13, 60},
                                      {600, 555}, {600, 1300}};
  static unsigned char items[3 * 1300];
  size_t k;
  for (k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    per_config c = cfg_of(cases[k][0], 3);
    const uint32_t n = cases[k][1];
    per_buffer a, b;
    uint32_t i;
    c.flags = PER_WEIGHTS_BUFFER_MAX;
    for (i = 0; i < sizeof items; ++i) items[i] = (unsigned char)(i * 7 + k);
    CHECK_OK(per_buffer_init(&a, &c, NULL));
    CHECK_OK(per_buffer_init(&b, &c, NULL));
    /* start mid-ring */
    CHECK_OK(per_buffer_add_batch(&a, items, 4));
    CHECK_OK(per_buffer_add_batch(&b, items, 4));
    CHECK_OK(per_buffer_add_batch(&a, items, n));
    for (i = 0; i < n; ++i) CHECK_OK(per_buffer_add(&b, items + 3 * i));
    /* the same but for the trajectories: the batch is one, its items are
       n of them when added one by one */
    CHECK_EQ_U(a.trajs, 2);
    CHECK_EQ_U(b.trajs, 1 + n);
    for (i = 0; i < a.size; ++i) {
      /* the slot of age i */
      uint32_t slot = (a.pos + a.cfg.capacity - 1 - i) % a.cfg.capacity;
      CHECK_EQ_U(a.traj[slot], i < n ? 1 : 0);
      CHECK_EQ_U(b.traj[slot], i < n ? n - i : 0);
    }
    b.trajs = a.trajs;
    memcpy(b.traj, a.traj, (size_t)c.capacity * sizeof(uint32_t));
    CHECK_MSG(state_equal(&a, &b), "add_batch(%u) differs from single adds", n);
    CHECK_OK(per_buffer_check(&a));
    CHECK_OK(per_buffer_add_batch(&a, NULL, 0));
    per_buffer_free(&a);
    per_buffer_free(&b);
  }
}

/* per_buffer_add_td is per_buffer_add_steps followed by per_buffer_update
   of the kept items with their td, state for state (max_leaf, min and
   max trees, sequences, generations, ends), over ring shapes that wrap and
   calls longer than the ring, for each kind of buffer; a refused call
   (a NaN or infinite td, td NULL) stores nothing and names the entry. */
static void test_add_td(void) {
  static const uint32_t cases[][2] = {{13, 1},  {13, 5},    {13, 13},
                                      {13, 29}, {600, 555}, {600, 1300}};
  static const uint32_t flags[] = {0, PER_WEIGHTS_BUFFER_MAX, PER_MAX_LIVE, 0};
  static unsigned char items[3 * 1300];
  static float td[1300];
  static uint8_t ends[1300];
  static uint64_t ids[1300];
  size_t k, f;
  per_rng r;
  per_rng_init(&r, 77);
  for (k = 0; k < sizeof items; ++k) items[k] = (unsigned char)(k * 5);
  for (k = 0; k < sizeof cases / sizeof cases[0]; ++k)
    for (f = 0; f < sizeof flags / sizeof flags[0]; ++f) {
      per_config c = cfg_of(cases[k][0], 3);
      const uint32_t n = cases[k][1], cap = cases[k][0];
      uint32_t i, keep = n < cap ? n : cap, first;
      per_buffer a, b;
      bsnap snap;
      c.flags = flags[f];
      c.alpha = f == 3 ? 0.0 : 0.7;
      c.eps = k % 2 ? 0.0 : 1e-3; /* with eps 0, td 0 is a zero leaf */
      if (f == 1) {               /* sequences over the same steps */
        c.seq_len = 3;
        c.seq_stride = 1;
      }
      for (i = 0; i < n; ++i) {
        td[i] = i % 7 == 3 ? 0.0f : (per_rng_float(&r) - 0.5f) * 8.0f;
        ends[i] = (uint8_t)(i % 5 == 4 ? PER_END_TERMINATED : PER_END_NONE);
      }
      td[n / 2] = 1e30f; /* a leaf above every one before */
      CHECK_OK(per_buffer_init(&a, &c, NULL));
      CHECK_OK(per_buffer_init(&b, &c, NULL));
      CHECK_OK(per_buffer_add_batch(&a, items, 4)); /* start mid-ring */
      CHECK_OK(per_buffer_add_batch(&b, items, 4));
      first = (a.pos + n - keep) % cap;
      CHECK_OK(per_buffer_add_td(&a, items, n, ends, td));
      CHECK_OK(per_buffer_add_steps(&b, items, n, ends));
      for (i = 0; i < keep; ++i) {
        uint32_t slot = (first + i) % cap;
        ids[i] = slot | (uint64_t)b.gen[slot] << 32;
      }
      CHECK_OK(per_buffer_update(&b, ids, td + (n - keep), keep, NULL));
      CHECK_MSG(state_equal(&a, &b),
                "add_td(%u) on capacity %u (flags %u) differs from add + "
                "update",
                n, cap, (unsigned)c.flags);
      CHECK_OK(per_buffer_check(&a));
      /* refusals: nothing stored, the entry named */
      td[n - 1] = NAN;
      snap = bsnap_take(&a);
      CHECK_EQ_U(per_buffer_add_td(&a, items, n, ends, td), PER_ERR_NAN);
      CHECK_UNCHANGED(snap, &a);
      CHECK(strstr(a.error, "is NaN") != NULL);
      td[n - 1] = -INFINITY;
      snap = bsnap_take(&a);
      CHECK_EQ_U(per_buffer_add_td(&a, items, n, NULL, td), PER_ERR_INF);
      CHECK_UNCHANGED(snap, &a);
      snap = bsnap_take(&a);
      CHECK_EQ_U(per_buffer_add_td(&a, items, n, NULL, NULL), PER_ERR_NULL);
      CHECK_UNCHANGED(snap, &a);
      CHECK_STR(a.error, "td is NULL");
      snap = bsnap_take(&a);
      CHECK_OK(per_buffer_add_td(&a, items, 0, NULL, NULL)); /* nothing */
      CHECK_UNCHANGED(snap, &a);
      per_buffer_free(&a);
      per_buffer_free(&b);
    }
}

/* ---- trajectories ------------------------------------------------------- */

/* Every add call that stores items is one trajectory: a model of the ids
   against the buffer's after each call of a random run (every add
   function, empty calls, calls longer than the ring); a window of W
   trajectories draws exactly what an item window over their items draws
   (a twin buffer given the model's item count), for items and sequences,
   with and without replacement. */
static void test_trajectories(void) {
  enum { CAP = 48, MAXN = 70 };
  per_config c = cfg_of(CAP, 4);
  per_buffer a, b;
  per_rng r;
  uint64_t model[CAP]; /* trajectory id per slot */
  uint64_t trajs = 0;
  uint32_t pos = 0, size = 0, step, t;
  static unsigned char items[4 * MAXN];
  uint8_t ends[MAXN];
  c.seq_len = 3;
  c.seq_stride = 2;
  c.flags = PER_SEQ_CROSS_EPISODES;
  c.max_unique = 16;
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  per_rng_init(&r, 77);
  for (t = 0; t < sizeof items; ++t) items[t] = (unsigned char)(t * 13);
  for (step = 0; step < 400; ++step) {
    uint32_t kind = per_rng_below(&r, 5), n, i, w;
    n = kind == 0                      ? 1
        : kind == 4 && step % 50 == 49 ? MAXN
                                       : per_rng_below(&r, 8);
    for (i = 0; i < n; ++i) ends[i] = (uint8_t)(per_rng_below(&r, 6) == 0);
    if (kind == 0) {
      CHECK_OK(per_buffer_add(&a, items));
      CHECK_OK(per_buffer_add(&b, items));
    } else if (kind == 1) {
      CHECK_OK(per_buffer_add_batch(&a, items, n));
      CHECK_OK(per_buffer_add_batch(&b, items, n));
    } else if (kind == 2 && n > 0) {
      CHECK_OK(per_buffer_add_step(&a, items, ends[0]));
      CHECK_OK(per_buffer_add_step(&b, items, ends[0]));
      n = 1;
    } else {
      CHECK_OK(per_buffer_add_steps(&a, items, n, ends));
      CHECK_OK(per_buffer_add_steps(&b, items, n, ends));
    }
    for (i = 0; i < n; ++i) {
      model[pos] = trajs;
      pos = (pos + 1) % CAP;
    }
    if (n > 0) ++trajs;
    size = size + n > CAP ? CAP : size + n;
    CHECK_EQ_U(a.trajs, trajs);
    for (i = 0; i < size; ++i) CHECK_EQ_U(a.traj[i], (uint32_t)model[i]);
    CHECK_OK(per_buffer_check(&a));
    if (size == 0) continue;
    /* windows of w trajectories: their items are the newest k */
    for (w = 1; w <= 6; w += 1 + step % 3) {
      uint64_t newest = model[(pos + CAP - 1) % CAP];
      uint32_t k = 0, mode;
      uint64_t ia[16], ib[16];
      float wa[16], wb[16];
      while (k < size && model[(pos + CAP - 1 - k) % CAP] + w > newest) ++k;
      for (mode = 0; mode < 3; ++mode) {
        per_sample_opts oa, ob;
        per_status sa, sb;
        memset(&oa, 0, sizeof oa);
        oa.flags = PER_SAMPLE_TRAJECTORIES |
                   (mode == 1 ? PER_SAMPLE_UNIQUE : 0) |
                   (mode == 2 ? PER_SAMPLE_SEQUENCES : 0);
        oa.window = w;
        ob = oa;
        ob.flags &= ~(uint32_t)PER_SAMPLE_TRAJECTORIES;
        ob.window = k;
        sa = per_buffer_sample(&a, mode == 1 ? (k < 16 ? k : 16) : 16, &oa,
                               NULL, ia, wa);
        sb = per_buffer_sample(&b, mode == 1 ? (k < 16 ? k : 16) : 16, &ob,
                               NULL, ib, wb);
        CHECK_STATUS(sa, sb);
        if (sa == PER_OK && sb == PER_OK) {
          uint32_t nb = mode == 1 ? (k < 16 ? k : 16) : 16;
          CHECK_MEM(ia, ib, nb * sizeof(uint64_t));
          CHECK_MEM(wa, wb, nb * sizeof(float));
          for (i = 0; i < nb && mode != 2; ++i)
            CHECK(model[(uint32_t)ia[i]] + w > newest); /* in the window */
        }
      }
    }
  }
  /* a window past the oldest trajectory is the whole buffer */
  {
    per_sample_opts o;
    uint64_t ids[4];
    memset(&o, 0, sizeof o);
    o.flags = PER_SAMPLE_TRAJECTORIES;
    o.window = 0xffffffffu;
    CHECK_OK(per_buffer_sample(&a, 4, &o, NULL, ids, NULL));
  }
  per_buffer_free(&a);
  per_buffer_free(&b);
}

/* ---- distributions ------------------------------------------------------ */

/* counts of draws per slot over `batches` calls */
static void count_draws(per_buffer *b, uint32_t B, uint32_t batches,
                        const per_sample_opts *o, double *counts) {
  uint64_t ids[64];
  uint32_t k, i;
  for (k = 0; k < batches; ++k) {
    CHECK_OK(per_buffer_sample(b, B, o, NULL, ids, NULL));
    for (i = 0; i < B; ++i) counts[(uint32_t)ids[i]] += 1;
  }
}

/* prioritized draws match (|td| + eps)^alpha / sum */
static void test_distribution(void) {
  per_config c = cfg_of(64, 4);
  per_buffer b;
  per_rng r;
  uint64_t ids[64];
  float td[64];
  double counts[64] = {0}, expd[64], sum = 0, stat, p;
  uint32_t v, i;
  c.alpha = 0.7;
  c.eps = 0.01;
  c.seed = 21;
  per_rng_init(&r, 99);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (v = 0; v < 64; ++v) {
    CHECK_OK(per_buffer_add(&b, &v));
    ids[v] = (uint64_t)v | (uint64_t)1 << 32;
    td[v] = per_rng_float(&r) * 3 - 1;
  }
  CHECK_OK(per_buffer_update(&b, ids, td, 64, NULL));
  for (i = 0; i < 64; ++i) sum += pow(fabs((double)td[i]) + 0.01, 0.7);
  count_draws(&b, 50, 2000, NULL, counts);
  for (i = 0; i < 64; ++i)
    expd[i] = pow(fabs((double)td[i]) + 0.01, 0.7) / sum * 100000;
  stat = chi2_stat(counts, expd, 64);
  p = chi2_p(stat, 63);
  CHECK_MSG(p > P_MIN, "prioritized: chi-square %.2f df 63 p %.3g", stat, p);

  /* unique batches: the first pick of each batch is a plain categorical
     draw; its counts follow the same law */
  {
    per_sample_opts o;
    double first[64] = {0};
    uint32_t k;
    memset(&o, 0, sizeof o);
    o.flags = PER_SAMPLE_UNIQUE;
    for (k = 0; k < 20000; ++k) {
      uint64_t got[16];
      uint32_t j, l;
      CHECK_OK(per_buffer_sample(&b, 16, &o, NULL, got, NULL));
      first[(uint32_t)got[0]] += 1;
      for (j = 0; j < 16; ++j)
        for (l = j + 1; l < 16; ++l)
          if (got[j] == got[l])
            CHECK_MSG(0, "unique batch repeats slot %u", (uint32_t)got[j]);
    }
    for (i = 0; i < 64; ++i)
      expd[i] = pow(fabs((double)td[i]) + 0.01, 0.7) / sum * 20000;
    stat = chi2_stat(first, expd, 64);
    p = chi2_p(stat, 63);
    CHECK_MSG(p > P_MIN, "unique first pick: chi-square %.2f df 63 p %.3g",
              stat, p);
  }
  per_buffer_free(&b);
}

/* windows: only the W newest items, also when the ring wraps; prioritized
   draws inside follow the window's leaves; unique and uniform variants */
static void test_window(void) {
  static const double alphas[2] = {0.8, 0};
  int a;
  for (a = 0; a < 2; ++a) {
    per_config c = cfg_of(50, 4);
    per_buffer b;
    per_sample_opts o;
    per_rng r;
    uint32_t v, i, k, W = 17;
    double counts[50] = {0}, expd[50], sum = 0, stat, p;
    uint64_t ids[64];
    float td[50];
    uint32_t items[64];
    per_real nodes_before[128]; /* 2L, L = 64 */
    c.alpha = alphas[a];
    c.seed = 5;
    per_rng_init(&r, 8);
    CHECK_OK(per_buffer_init(&b, &c, NULL));
    for (v = 0; v < 120; ++v)
      CHECK_OK(per_buffer_add(&b, &v)); /* wrapped: pos 20 */
    CHECK_EQ_U(b.pos, 20);
    for (i = 0; i < 50; ++i) {
      ids[i] = (uint64_t)i | (uint64_t)b.gen[i] << 32;
      td[i] = per_rng_float(&r) * 2;
    }
    CHECK_OK(per_buffer_update(&b, ids, td, 50, NULL));
    memset(&o, 0, sizeof o);
    o.window = W; /* items 103..119: slots 3..19 */
    for (k = 0; k < 2000; ++k) {
      CHECK_OK(per_buffer_sample(&b, 50, &o, items, ids, NULL));
      for (i = 0; i < 50; ++i) {
        CHECK(items[i] >= 120 - W && items[i] < 120);
        counts[(uint32_t)ids[i]] += 1;
      }
    }
    for (i = 0; i < 50; ++i) {
      int in = i >= 3 && i < 20;
      expd[i] = in ? (double)leaf(&b, i) : 0;
      sum += expd[i];
    }
    for (i = 0; i < 50; ++i) expd[i] = expd[i] / sum * 100000;
    stat = chi2_stat(counts, expd, 50);
    p = chi2_p(stat, W - 1);
    CHECK_MSG(p > P_MIN, "window (alpha %g): chi-square %.2f df %u p %.3g",
              c.alpha, stat, W - 1, p);

    /* a window across the wrap: 30 newest are slots 40..49 and 0..19 */
    o.window = 30;
    memset(counts, 0, sizeof counts);
    for (k = 0; k < 200; ++k) {
      CHECK_OK(per_buffer_sample(&b, 64, &o, items, ids, NULL));
      for (i = 0; i < 64; ++i) {
        CHECK(items[i] >= 90 && items[i] < 120);
        counts[(uint32_t)ids[i]] += 1;
      }
    }
    for (i = 20; i < 40; ++i) CHECK_EQ_F(counts[i], 0);
    for (i = 0; i < 50; ++i)
      if (i < 20 || i >= 40) CHECK_MSG(counts[i] > 0, "slot %u never drawn", i);
    /* unique in the window: distinct, all inside; W items exactly */
    o.flags = PER_SAMPLE_UNIQUE;
    memcpy(nodes_before, b.tree.node, sizeof(per_real) * 2 * b.tree.leaves);
    for (k = 0; k < 50; ++k) {
      uint32_t seen[50] = {0};
      CHECK_OK(per_buffer_sample(&b, 30, &o, items, ids, NULL));
      for (i = 0; i < 30; ++i) {
        CHECK(items[i] >= 90 && items[i] < 120);
        CHECK_EQ_U(seen[(uint32_t)ids[i]]++, 0);
      }
    }
    CHECK_STATUS(per_buffer_sample(&b, 31, &o, items, ids, NULL),
                 PER_ERR_TOO_FEW);
    /* unique window draws leave the tree exactly as it was */
    CHECK_MEM(nodes_before, b.tree.node, sizeof(per_real) * 2 * b.tree.leaves);
    CHECK_OK(per_buffer_check(&b));
    /* the window's first picks follow its leaves */
    o.window = W;
    memset(counts, 0, sizeof counts);
    for (k = 0; k < 20000; ++k) {
      CHECK_OK(per_buffer_sample(&b, 5, &o, NULL, ids, NULL));
      counts[(uint32_t)ids[0]] += 1;
    }
    for (i = 0; i < 50; ++i) expd[i] = expd[i] / 100000 * 20000;
    stat = chi2_stat(counts, expd, 50);
    p = chi2_p(stat, W - 1);
    CHECK_MSG(p > P_MIN,
              "unique window first pick (alpha %g): chi-square %.2f p %.3g",
              c.alpha, stat, p);
    /* window larger than the buffer: the whole buffer */
    o.window = 1000;
    o.flags = 0;
    CHECK_OK(per_buffer_sample(&b, 8, &o, NULL, ids, NULL));
    per_buffer_free(&b);
  }
}

/* A buffer that is not full: the window counts back from the newest. */
static void test_window_partial(void) {
  per_config c = cfg_of(100, 4);
  per_buffer b;
  per_sample_opts o;
  uint32_t v, i, items[64];
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (v = 0; v < 37; ++v) CHECK_OK(per_buffer_add(&b, &v));
  memset(&o, 0, sizeof o);
  o.window = 1;
  CHECK_OK(per_buffer_sample(&b, 64, &o, items, NULL, NULL));
  for (i = 0; i < 64; ++i) CHECK_EQ_U(items[i], 36);
  o.window = 5;
  CHECK_OK(per_buffer_sample(&b, 64, &o, items, NULL, NULL));
  for (i = 0; i < 64; ++i) CHECK(items[i] >= 32 && items[i] < 37);
  per_buffer_free(&b);
}

/* Degenerate totals: all leaves 0 (eps = 0 and td = 0) -> uniform draws
   over the eligible items with weights 1; unique too. */
static void test_uniform_fallback(void) {
  per_config c = cfg_of(40, 4);
  per_buffer b;
  per_sample_opts o;
  uint64_t ids[40];
  float td[40], w[40];
  double counts[40] = {0}, expd[40], stat, p;
  uint32_t v, i, k, items[40];
  c.eps = 0;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (v = 0; v < 30; ++v) {
    CHECK_OK(per_buffer_add(&b, &v));
    ids[v] = (uint64_t)v | (uint64_t)1 << 32;
    td[v] = 0;
  }
  CHECK_OK(per_buffer_update(&b, ids, td, 30, NULL));
  CHECK_EQ_F(per_tree_total(&b.tree), 0);
  for (k = 0; k < 3000; ++k) {
    CHECK_OK(per_buffer_sample(&b, 10, NULL, items, ids, w));
    for (i = 0; i < 10; ++i) {
      CHECK(items[i] < 30 && (uint32_t)ids[i] == items[i]);
      CHECK_EQ_F(w[i], 1);
      counts[items[i]] += 1;
    }
  }
  for (i = 0; i < 40; ++i) expd[i] = i < 30 ? 1000 : 0;
  stat = chi2_stat(counts, expd, 40);
  p = chi2_p(stat, 29);
  CHECK_MSG(p > P_MIN, "uniform fallback: chi-square %.2f df 29 p %.3g", stat,
            p);
  /* unique: distinct, weights 1; windows too */
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_UNIQUE;
  for (k = 0; k < 100; ++k) {
    uint32_t seen[40] = {0};
    CHECK_OK(per_buffer_sample(&b, 30, &o, items, ids, w));
    for (i = 0; i < 30; ++i) {
      CHECK_EQ_U(seen[items[i]]++, 0);
      CHECK_EQ_F(w[i], 1);
    }
  }
  o.window = 4;
  CHECK_OK(per_buffer_sample(&b, 4, &o, items, ids, w));
  for (i = 0; i < 4; ++i) CHECK(items[i] >= 26 && items[i] < 30);
  /* some positive leaves again: unique batches beyond them are refused */
  ids[0] = 3 | (uint64_t)1 << 32;
  td[0] = 1;
  CHECK_OK(per_buffer_update(&b, ids, td, 1, NULL));
  o.window = 0;
  CHECK_OK(per_buffer_sample(&b, 1, &o, items, ids, w));
  CHECK_EQ_U(items[0], 3);
  {
    bsnap s = bsnap_take(&b);
    CHECK_STATUS(per_buffer_sample(&b, 2, &o, items, ids, w), PER_ERR_TOO_FEW);
    CHECK_UNCHANGED(s, &b);
  }
  /* a total that is not finite (memory written from outside): uniform
     draws with weights 1, not garbage */
  {
    per_real saved = b.tree.node[1];
    b.tree.node[1] = (per_real)INFINITY;
    CHECK_OK(per_buffer_sample(&b, 20, NULL, items, ids, w));
    for (i = 0; i < 20; ++i) CHECK(items[i] < 30 && w[i] == 1);
    b.tree.node[1] = (per_real)NAN;
    CHECK_OK(per_buffer_sample(&b, 20, NULL, items, ids, w));
    for (i = 0; i < 20; ++i) CHECK(items[i] < 30 && w[i] == 1);
    b.tree.node[1] = saved;
  }
  /* non-unique draws only find the positive one */
  CHECK_OK(per_buffer_sample(&b, 20, NULL, items, ids, w));
  for (i = 0; i < 20; ++i) CHECK_EQ_U(items[i], 3);
  CHECK_OK(per_buffer_check(&b));
  per_buffer_free(&b);
}

/* alpha = 0: every leaf 1, unique batches come from the swap sampler */
static void test_uniform_mode(void) {
  per_config c = cfg_of(32, 4);
  per_buffer b;
  per_sample_opts o;
  uint64_t ids[32];
  float td[32], w[32];
  double counts[32] = {0}, expd[32], stat, p;
  uint32_t v, i, k, items[32];
  c.alpha = 0;
  c.max_priority = 7; /* ignored: alpha = 0 */
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK(b.swap.perm != NULL);
  for (v = 0; v < 20; ++v) CHECK_OK(per_buffer_add(&b, &v));
  CHECK_EQ_U(b.swap.n, 20);
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_UNIQUE;
  for (k = 0; k < 5000; ++k) {
    uint32_t seen[32] = {0};
    CHECK_OK(per_buffer_sample(&b, 8, &o, items, ids, w));
    for (i = 0; i < 8; ++i) {
      CHECK(items[i] < 20);
      CHECK_EQ_U(seen[items[i]]++, 0);
      CHECK_EQ_F(w[i], 1);
      counts[items[i]] += 1;
      td[i] = (float)i;
    }
    CHECK_OK(per_buffer_update(&b, ids, td, 8, NULL));
  }
  for (i = 0; i < 32; ++i) {
    expd[i] = i < 20 ? 5000.0 * 8 / 20 : 0;
    CHECK_EQ_F(leaf(&b, i), i < 20 ? 1 : 0);
  }
  stat = chi2_stat(counts, expd, 32);
  p = chi2_p(stat, 19);
  CHECK_MSG(p > P_MIN, "alpha 0 unique: chi-square %.2f df 19 p %.3g", stat, p);
  /* growing after sampling keeps the permutation valid */
  for (v = 20; v < 40; ++v) CHECK_OK(per_buffer_add(&b, &v));
  CHECK_EQ_U(b.swap.n, 32);
  CHECK_OK(per_buffer_sample(&b, 32, &o, items, ids, w));
  CHECK_OK(per_buffer_check(&b));
  per_buffer_free(&b);
}

/* PER_WEIGHTS_BUFFER_MAX: weights divided by the buffer-wide max, that of
   the smallest positive leaf, kept by the min tree through overwrites */
static void test_buffer_max(void) {
  per_config c = cfg_of(10, 4);
  per_buffer b;
  uint64_t ids[10], got[32];
  float td[10], w[32];
  uint32_t v, i;
  c.flags = PER_WEIGHTS_BUFFER_MAX;
  c.alpha = 1;
  c.eps = 0;
  c.beta0 = c.beta1 = 0.5;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (v = 0; v < 10; ++v) {
    CHECK_OK(per_buffer_add(&b, &v));
    ids[v] = (uint64_t)v | (uint64_t)1 << 32;
    td[v] = (float)(v + 1);
  }
  td[4] = 0.25f; /* the smallest positive leaf */
  td[7] = 0;     /* zero: excluded from the minimum */
  CHECK_OK(per_buffer_update(&b, ids, td, 10, NULL));
  CHECK_EQ_F(b.min_node[1], 0.25);
  CHECK_OK(per_buffer_sample(&b, 32, NULL, NULL, got, w));
  for (i = 0; i < 32; ++i)
    CHECK_NEAR(w[i], sqrt(0.25 / (double)leaf(&b, (uint32_t)got[i])), 1e-6);
  /* overwrite slots 0..4 (at max leaf 10): the minimum moves to the
     smallest positive leaf left, slot 5's 6 */
  for (v = 10; v < 15; ++v) CHECK_OK(per_buffer_add(&b, &v));
  CHECK_EQ_F(b.min_node[1], 6);
  CHECK_OK(per_buffer_check(&b));
  per_buffer_free(&b);
}

/* Same seed, same calls: the same batches. */
static void test_determinism(void) {
  per_config c = cfg_of(100, 4);
  per_buffer a, b;
  uint64_t ia[32], ib[32];
  float wa[32], wb[32], td[32];
  uint32_t v, k, i;
  c.seed = 1234;
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (v = 0; v < 150; ++v) {
    CHECK_OK(per_buffer_add(&a, &v));
    CHECK_OK(per_buffer_add(&b, &v));
  }
  for (k = 0; k < 20; ++k) {
    CHECK_OK(per_buffer_sample(&a, 32, NULL, NULL, ia, wa));
    CHECK_OK(per_buffer_sample(&b, 32, NULL, NULL, ib, wb));
    CHECK_MEM(ia, ib, sizeof ia);
    CHECK_MEM(wa, wb, sizeof wa);
    for (i = 0; i < 32; ++i) td[i] = (float)((ia[i] * 31 + k) % 17);
    CHECK_OK(per_buffer_update(&a, ia, td, 32, NULL));
    CHECK_OK(per_buffer_update(&b, ib, td, 32, NULL));
  }
  /* weights without ids: the same values (drawn twice internally) */
  CHECK_OK(per_buffer_sample(&a, 300, NULL, NULL, NULL, NULL));
  CHECK_OK(per_buffer_sample(&b, 300, NULL, NULL, NULL, NULL));
  {
    static uint64_t i1[300];
    static float w1[300], w2[300];
    CHECK_OK(per_buffer_sample(&a, 300, NULL, NULL, i1, w1));
    CHECK_OK(per_buffer_sample(&b, 300, NULL, NULL, NULL, w2));
    CHECK_MEM(w1, w2, sizeof w1);
  }
  CHECK(state_equal(&a, &b));
  per_buffer_free(&a);
  per_buffer_free(&b);
}

/* ---- bad input ---------------------------------------------------------- */

static void test_bad_input(void) {
  per_config c = cfg_of(8, 4);
  per_buffer b;
  per_sample_opts o;
  uint64_t ids[8], bad_ids[3];
  float td[8], w[8];
  uint32_t v, items[8], stale = 1234;
  bsnap s;
  size_t k;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (v = 0; v < 10; ++v) CHECK_OK(per_buffer_add(&b, &v)); /* wrapped */
  CHECK_OK(per_buffer_sample(&b, 8, NULL, NULL, ids, NULL));
  (void)per_rng_u32(&b.rng); /* buffered words in the rng: must survive too */
  for (v = 0; v < 8; ++v) td[v] = 1;

  /* update: each bad value last, so nothing before it may be applied */
  {
    float bad[4];
    per_status want[4] = {PER_ERR_NAN, PER_ERR_INF, PER_ERR_INF, PER_ERR_NAN};
    bad[0] = (float)NAN;
    bad[1] = (float)INFINITY;
    bad[2] = (float)-INFINITY;
    bad[3] = -(float)NAN;
    for (k = 0; k < 4; ++k) {
      td[7] = bad[k];
      s = bsnap_take(&b);
      CHECK_STATUS(per_buffer_update(&b, ids, td, 8, &stale), want[k]);
      CHECK_UNCHANGED(s, &b);
      CHECK_EQ_U(stale, 1234);
    }
    td[7] = 1;
  }
  /* unknown ids: slot >= capacity, generation 0, generation not yet given */
  bad_ids[0] = ids[0];
  bad_ids[1] = ids[1];
  {
    uint64_t unknown[4];
    unknown[0] = 8 | (uint64_t)1 << 32;
    unknown[1] = 0x7fffffffull | (uint64_t)1 << 32;
    unknown[2] = 3; /* generation 0 */
    unknown[3] = 3 | (uint64_t)(b.gen[3] + 1) << 32;
    for (k = 0; k < 4; ++k) {
      bad_ids[2] = unknown[k];
      s = bsnap_take(&b);
      CHECK_STATUS(per_buffer_update(&b, bad_ids, td, 3, &stale),
                   PER_ERR_INDEX);
      CHECK_UNCHANGED(s, &b);
    }
  }
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_update(&b, NULL, td, 3, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_update(&b, ids, NULL, 3, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_update(NULL, ids, td, 3, NULL), PER_ERR_NULL);
  CHECK_UNCHANGED(s, &b);

  /* sample */
  memset(&o, 0, sizeof o);
  memset(items, 0xab, sizeof items);
  memset(w, 0xab, sizeof w);
  {
    uint64_t ids0[8];
    memcpy(ids0, ids, sizeof ids);
    s = bsnap_take(&b);
    CHECK_STATUS(per_buffer_sample(&b, 0, NULL, items, ids, w), PER_ERR_BATCH);
    o.flags = PER_SAMPLE_UNIQUE;
    CHECK_STATUS(per_buffer_sample(&b, 9, &o, items, ids, w),
                 PER_ERR_BATCH); /* > max_unique */
    o.window = 3;
    CHECK_STATUS(per_buffer_sample(&b, 4, &o, items, ids, w), PER_ERR_TOO_FEW);
    o.flags = 1u << 7;
    o.window = 0;
    CHECK_STATUS(per_buffer_sample(&b, 4, &o, items, ids, w), PER_ERR_ARG);
    o.flags = PER_SAMPLE_BETA;
    o.beta = NAN;
    CHECK_STATUS(per_buffer_sample(&b, 4, &o, items, ids, w), PER_ERR_ARG);
    o.beta = -0.5;
    CHECK_STATUS(per_buffer_sample(&b, 4, &o, items, ids, w), PER_ERR_ARG);
    o.beta = INFINITY;
    CHECK_STATUS(per_buffer_sample(&b, 4, &o, items, ids, w), PER_ERR_ARG);
    CHECK_STATUS(per_buffer_sample(NULL, 4, NULL, items, ids, w), PER_ERR_NULL);
    CHECK_UNCHANGED(s, &b);
    /* no output was written */
    CHECK_MEM(ids, ids0, sizeof ids);
    for (k = 0; k < 8; ++k) CHECK_EQ_U(items[k], 0xababababu);
  }
  /* add */
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_add(&b, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_add_batch(&b, NULL, 3), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_add(NULL, &v), PER_ERR_NULL);
  CHECK_UNCHANGED(s, &b);
  per_buffer_free(&b);

  /* bad configs: a specific status, a message that names the field, and a
     zeroed, freeable buffer but for that message */
  {
    struct {
      per_config c;
      per_status want;
      const char *says;
    } t[24];
    per_buffer zero;
    int n = 0, i;
    memset(&zero, 0, sizeof zero);
    t[n].c = cfg_of(0, 4);
    t[n].says = "capacity 0 is not in 1 .. 2^31";
    t[n++].want = PER_ERR_CAPACITY;
    t[n].c = cfg_of(PER_MAX_CAPACITY + 1u, 4);
    t[n].says = "capacity 2147483649 is not in 1 .. 2^31";
    t[n++].want = PER_ERR_CAPACITY;
    t[n].c = cfg_of(8, 0);
    t[n].says = "item_size is 0 (must be >= 1)";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.alpha = -0.5;
    t[n].says = "alpha is negative";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.alpha = NAN;
    t[n].says = "alpha is NaN";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.alpha = INFINITY;
    t[n].says = "alpha is infinite";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.beta0 = -2;
    t[n].says = "beta0 is negative";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.beta1 = NAN;
    t[n].says = "beta1 is NaN";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.eps = -1e-3;
    t[n].says = "eps is negative";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.max_priority = 0;
    t[n].says = "max_priority is 0 (must be > 0)";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.max_priority = -1;
    t[n].says = "max_priority is negative";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.max_unique = 0;
    t[n].says = "max_unique 0 (must be >= 1)";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.max_priority = 1e29;
    t[n].says = IS_FLOAT ? "max_priority is above PER_LEAF_MAX" : "";
    t[n++].want = IS_FLOAT ? PER_ERR_ARG : PER_OK;
    t[n].c = cfg_of(8, 4);
    t[n].c.max_priority = 1e308 * 10;
    t[n].says = "max_priority is infinite";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.flags = PER_SEQ_CROSS_EPISODES;
    t[n].says = "PER_SEQ_CROSS_EPISODES without seq_len";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.flags = 1u << 7;
    t[n].says = "flags 128 has bits that are no PER_WEIGHTS_BUFFER_MAX";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.max_unique = 9;
    t[n].says = "max_unique 9 > capacity 8 (per_config_default sets it";
    t[n++].want = PER_ERR_ARG;
    t[n].c = per_config_default(100, 4); /* capacity changed afterwards */
    t[n].c.capacity = 50;
    t[n].says = "max_unique 100 > capacity 50";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.seq_len = 4;
    t[n].says = "seq_len 4 needs seq_stride >= 1";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.seq_stride = 2;
    t[n].says = "seq_stride 2 without seq_len";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.seq_len = 4;
    t[n].c.seq_stride = 3;
    t[n].says = "seq_stride 3 does not divide capacity 8";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.seq_len = 9;
    t[n].c.seq_stride = 1;
    t[n].says = "seq_len 9 > capacity 8";
    t[n++].want = PER_ERR_ARG;
    t[n].c = cfg_of(8, 4);
    t[n].c.seq_eta = 1.5;
    t[n].says = "seq_eta is above 1";
    t[n++].want = PER_ERR_ARG;
    for (i = 0; i < n; ++i) {
      per_status got = per_buffer_init(&b, &t[i].c, NULL);
      CHECK_MSG(got == t[i].want, "config %d: got %s, want %s", i,
                per_status_str(got), per_status_str(t[i].want));
      CHECK_MSG(strncmp(b.error, t[i].says, strlen(t[i].says)) == 0 &&
                    (got != PER_OK || b.error[0] == 0),
                "config %d: error \"%s\", want \"%s...\"", i, b.error,
                t[i].says);
      if (got != PER_OK) {
        memset(b.error, 0, sizeof b.error);
        CHECK_MEM(&b, &zero, sizeof b);
      }
      per_buffer_free(&b);
    }
    CHECK_STATUS(per_buffer_init(&b, NULL, NULL), PER_ERR_NULL);
    CHECK_STATUS(per_buffer_init(NULL, &t[0].c, NULL), PER_ERR_NULL);
    per_buffer_free(NULL);
    CHECK_EQ_U(per_buffer_size(NULL), 0);
  }
  CHECK_EQ_U(t_default_heap.live, 0);
}

/* ---- allocation failure -------------------------------------------------- */

/* ---- for layers over several buffers (per_mpi.h) ------------------------ */

/* Two buffers with the same config (but seed) and the same history of
   adds (two trajectories per call of add_batch, the ring wrapped) and
   updates. */
static void shard_pair(per_buffer *a, per_buffer *b, per_config c,
                       uint64_t seed_b) {
  uint32_t v[40], k;
  uint64_t ids[8];
  float td[8];
  CHECK_OK(per_buffer_init(a, &c, NULL));
  c.seed = seed_b;
  CHECK_OK(per_buffer_init(b, &c, NULL));
  for (k = 0; k < 40; ++k) v[k] = k;
  CHECK_OK(per_buffer_add_batch(a, v, 25));
  CHECK_OK(per_buffer_add_batch(b, v, 25));
  CHECK_OK(per_buffer_add_batch(a, v + 25, 15));
  CHECK_OK(per_buffer_add_batch(b, v + 25, 15));
  for (k = 0; k < 8; ++k) {
    ids[k] = (uint64_t)(3 * k) | (uint64_t)a->gen[3 * k] << 32;
    td[k] = 0.25f * (float)(k + 1);
  }
  CHECK_OK(per_buffer_update(a, ids, td, 8, NULL));
  CHECK_OK(per_buffer_update(b, ids, td, 8, NULL));
}

/* per_buffer_advance_strata: a caller draws the strata from the stream
   (per_tree_stratum_u, per_tree_descend) and advances: the leaves of
   per_buffer_sample, then the same state and the same batches. */
static void test_advance_strata(void) {
  per_config c = cfg_of(32, 4);
  per_buffer a, b;
  uint64_t ids[16];
  uint32_t i, bad = 0;
  per_real seg;
  bsnap s;
  shard_pair(&a, &b, c, c.seed);
  (void)per_rng_u32(&a.rng); /* buffered words: dropped by both */
  (void)per_rng_u32(&b.rng);
  seg = per_tree_total(&b.tree) / 16;
  CHECK_OK(per_buffer_sample(&a, 16, NULL, NULL, ids, NULL));
  for (i = 0; i < 16; ++i)
    bad += per_tree_descend(b.tree.node, b.tree.leaves,
                            per_tree_stratum_u(b.rng.seed, b.rng.counter, i,
                                               seg)) != (uint32_t)ids[i];
  CHECK_EQ_U(bad, 0);
  CHECK_OK(per_buffer_advance_strata(&b, 16));
  CHECK(state_equal(&a, &b));
  same_draws(&a, &b, 12, 10);
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_advance_strata(&b, 0), PER_ERR_BATCH);
  CHECK_STATUS(per_buffer_advance_strata(NULL, 4), PER_ERR_NULL);
  CHECK_UNCHANGED(s, &b);
  per_buffer_free(&a);
  per_buffer_free(&b);
}

/* per_buffer_draw_uniform: the positions of the uniform fallback (every
   leaf 0), counted from the oldest item, then the same state and the
   same batches; 64-bit draws above 2^32 - 1 items. */
static void test_draw_uniform(void) {
  per_config c = cfg_of(32, 4);
  per_buffer a, b;
  uint64_t ids[40], pos[40], n = 5000000000ull;
  float td[40];
  uint32_t i, k, bad = 0, oldest;
  per_rng r;
  bsnap s;
  c.eps = 0;
  shard_pair(&a, &b, c, c.seed);
  for (i = 0; i < 32; ++i) {
    ids[i] = (uint64_t)i | (uint64_t)a.gen[i] << 32;
    td[i] = 0;
  }
  CHECK_OK(per_buffer_update(&a, ids, td, 32, NULL));
  CHECK_OK(per_buffer_update(&b, ids, td, 32, NULL));
  CHECK_EQ_F(per_tree_total(&a.tree), 0);
  oldest = b.pos; /* full: the oldest item is at pos */
  CHECK_OK(per_buffer_sample(&a, 40, NULL, NULL, ids, NULL));
  CHECK_OK(per_buffer_draw_uniform(&b, per_buffer_size(&b), 40, pos));
  for (i = 0; i < 40; ++i)
    bad += (uint32_t)ids[i] != (uint32_t)((oldest + pos[i]) % 32);
  CHECK_EQ_U(bad, 0);
  CHECK(state_equal(&a, &b));
  for (k = 0; k < 4; ++k) { /* the next batches, uniform too */
    CHECK_OK(per_buffer_sample(&a, 16, NULL, NULL, ids, NULL));
    CHECK_OK(per_buffer_sample(&b, 16, NULL, NULL, ids + 16, NULL));
    CHECK_MEM(ids, ids + 16, 16 * sizeof *ids);
  }
  CHECK(state_equal(&a, &b));
  /* beyond 32 bits: two words a draw, the high one first, by rejection */
  r = b.rng;
  CHECK_OK(per_buffer_draw_uniform(&b, n, 8, pos));
  for (i = 0, bad = 0; i < 8; ++i) {
    uint64_t x, lim = ~(uint64_t)0 - ~(uint64_t)0 % n;
    do {
      x = (uint64_t)per_rng_u32(&r) << 32;
      x |= per_rng_u32(&r);
    } while (x >= lim);
    bad += pos[i] != x % n;
  }
  CHECK_EQ_U(bad, 0);
  CHECK(memcmp(&r, &b.rng, sizeof r) == 0);
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_draw_uniform(&b, 32, 0, pos), PER_ERR_BATCH);
  CHECK_STATUS(per_buffer_draw_uniform(&b, 0, 4, pos), PER_ERR_EMPTY);
  CHECK_STATUS(per_buffer_draw_uniform(&b, 32, 4, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_draw_uniform(NULL, 32, 4, pos), PER_ERR_NULL);
  CHECK_UNCHANGED(s, &b);
  per_buffer_free(&a);
  per_buffer_free(&b);
}

/* per_buffer_shared_of and per_buffer_set_shared: a buffer given another's
   shared state samples as that one does; every bad field is refused with
   the buffer unchanged. */
static void test_shared_state(void) {
  per_config c = cfg_of(32, 4);
  per_buffer a, b, z;
  per_buffer_shared sh, bad;
  per_real top = 0;
  uint32_t i, k;
  bsnap s;
  c.beta_steps = 30;
  shard_pair(&a, &b, c, 777);
  for (k = 0; k < 5; ++k) CHECK_OK(sample_unique(&a, 4));
  (void)per_rng_u32(&a.rng); /* a stream in the middle of a block */
  b.cfg.beta0 = 0.1;         /* fields the state replaces */
  b.cfg.beta1 = 0.9;
  b.cfg.beta_steps = 7;
  sh = per_buffer_shared_of(&a);
  CHECK(memcmp(&sh.rng, &a.rng, sizeof sh.rng) == 0);
  CHECK_EQ_U(sh.step, a.step);
  CHECK_EQ_F(sh.max_leaf, a.max_leaf);
  CHECK_EQ_F(sh.beta0, a.cfg.beta0);
  CHECK_EQ_U(sh.seed, a.cfg.seed);
  CHECK_OK(per_buffer_set_shared(&b, &sh));
  CHECK(state_equal(&a, &b));
  same_draws(&a, &b, 12, 10);
  memset(&z, 0, sizeof z);
  sh = per_buffer_shared_of(NULL);
  CHECK_EQ_U(sh.step, 0);
  CHECK_EQ_F(sh.max_leaf, 0);

  /* bad fields, one at a time */
  sh = per_buffer_shared_of(&b);
  for (i = 0; i < 32; ++i)
    if (per_tree_get(&b.tree, i) > top) top = per_tree_get(&b.tree, i);
  for (k = 0; k < 14; ++k) {
    bad = sh;
    switch (k) {
      case 0: bad.alpha = NAN; break;
      case 1: bad.alpha = -1; break;
      case 2: bad.alpha = 0; break; /* b's alpha is not 0 */
      case 3: bad.beta0 = INFINITY; break;
      case 4: bad.beta1 = -0.5; break;
      case 5: bad.eps = NAN; break;
      case 6: bad.max_priority = 0; break;
      case 7: bad.max_priority = (double)PER_LEAF_MAX * 2; break;
      case 8: bad.rng.avail = 5; break;
      case 9: bad.rng.pad = 1; break;
      case 10: bad.max_leaf = (per_real)NAN; break;
      case 11: bad.max_leaf = 0; break;
      case 12: bad.max_leaf = -1; break;
      default: bad.max_leaf = top * (per_real)0.5; break; /* below a leaf */
    }
    s = bsnap_take(&b);
    CHECK_STATUS(per_buffer_set_shared(&b, &bad), PER_ERR_ARG);
    CHECK_UNCHANGED(s, &b);
  }
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_set_shared(&b, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_set_shared(NULL, &sh), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_set_shared(&z, &sh), PER_ERR_NULL);
  CHECK_UNCHANGED(s, &b);
  /* max_leaf exactly the largest leaf is fine */
  sh.max_leaf = top;
  CHECK_OK(per_buffer_set_shared(&b, &sh));
  CHECK_OK(per_buffer_check(&b));
  per_buffer_free(&a);
  per_buffer_free(&b);

  /* alpha 0: every leaf 1, so max_leaf must be 1 */
  c.alpha = 0;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  for (i = 0; i < 5; ++i) CHECK_OK(per_buffer_add(&b, &i));
  sh = per_buffer_shared_of(&b);
  sh.max_leaf = 2;
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_set_shared(&b, &sh), PER_ERR_ARG);
  sh.max_leaf = 1;
  sh.alpha = 0.5;
  CHECK_STATUS(per_buffer_set_shared(&b, &sh), PER_ERR_ARG);
  CHECK_UNCHANGED(s, &b);
  sh.alpha = 0;
  sh.step = 99;
  CHECK_OK(per_buffer_set_shared(&b, &sh));
  CHECK_EQ_U(b.step, 99);
  CHECK_OK(per_buffer_check(&b));
  per_buffer_free(&b);
}

/* per_buffer_raise_max_leaf: never lowers it; new items get it; bad
   values refused with the buffer unchanged. */
static void test_raise_max_leaf(void) {
  per_config c = cfg_of(8, 4);
  per_buffer b;
  per_real m, bad[5];
  per_status want[5] = {PER_ERR_NAN, PER_ERR_INF, PER_ERR_NEGATIVE,
                        PER_ERR_RANGE, PER_ERR_ARG};
  uint32_t v = 1, k;
  bsnap s;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_OK(per_buffer_add(&b, &v));
  m = b.max_leaf;
  CHECK_OK(per_buffer_raise_max_leaf(&b, m / 2));
  CHECK_EQ_F(b.max_leaf, m);
  CHECK_OK(per_buffer_raise_max_leaf(&b, m * 3));
  CHECK_EQ_F(b.max_leaf, m * 3);
  CHECK_OK(per_buffer_add(&b, &v));
  CHECK_EQ_F(per_tree_get(&b.tree, 1), m * 3);
  CHECK_OK(per_buffer_check(&b));
  bad[0] = (per_real)NAN;
  bad[1] = (per_real)INFINITY;
  bad[2] = -1;
  bad[3] = PER_LEAF_MAX * 2;
  bad[4] = 0;
  for (k = 0; k < 5; ++k) {
    s = bsnap_take(&b);
    CHECK_STATUS(per_buffer_raise_max_leaf(&b, bad[k]), want[k]);
    CHECK_UNCHANGED(s, &b);
  }
  CHECK_STATUS(per_buffer_raise_max_leaf(NULL, 1), PER_ERR_NULL);
  per_buffer_free(&b);
  c.alpha = 0; /* every leaf 1 */
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_raise_max_leaf(&b, 2), PER_ERR_ARG);
  CHECK_OK(per_buffer_raise_max_leaf(&b, 1));
  CHECK_OK(per_buffer_raise_max_leaf(&b, (per_real)0.5));
  CHECK_UNCHANGED(s, &b);
  per_buffer_free(&b);
}

/* per_buffer_count_evicted: the counters grow, every stored trajectory
   id moves with trajs, and the buffer stays valid; bad counts refused
   with the buffer unchanged. */
static void test_count_evicted(void) {
  per_config c = cfg_of(32, 4);
  per_buffer a, b;
  uint32_t traj[32], i, bad = 0;
  uint64_t added, trajs;
  bsnap s;
  shard_pair(&a, &b, c, c.seed);
  memcpy(traj, b.traj, sizeof traj);
  added = b.added;
  trajs = b.trajs;
  CHECK_OK(per_buffer_count_evicted(&b, 10, 3));
  CHECK_EQ_U(b.added, added + 10);
  CHECK_EQ_U(b.trajs, trajs + 3);
  for (i = 0; i < 32; ++i) bad += b.traj[i] != traj[i] + 3;
  CHECK_EQ_U(bad, 0);
  CHECK_OK(per_buffer_check(&b));
  CHECK_OK(per_buffer_count_evicted(&b, 0, 0));
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_count_evicted(&b, 3, 4), PER_ERR_ARG);
  CHECK_STATUS(per_buffer_count_evicted(&b, ~(uint64_t)0, 1), PER_ERR_ARG);
  CHECK_STATUS(per_buffer_count_evicted(NULL, 1, 1), PER_ERR_NULL);
  CHECK_UNCHANGED(s, &b);
  per_buffer_free(&a);
  per_buffer_free(&b);
}

static void test_alloc_failure(void) {
  static const uint32_t flags[3] = {0, PER_WEIGHTS_BUFFER_MAX, 0};
  int variant;
  for (variant = 0; variant < 3; ++variant) {
    per_config c = cfg_of(20, 4);
    per_buffer b, zero;
    t_heap heap;
    long total, k;
    c.flags = flags[variant];
    if (variant == 2) c.alpha = 0;
    memset(&zero, 0, sizeof zero);
    memset(&heap, 0, sizeof heap);
    CHECK_OK(per_buffer_init(&b, &c, &heap));
    total = heap.calls;
    CHECK(total >= 6);
    per_buffer_free(&b);
    CHECK_EQ_U(heap.live, 0);
    for (k = 1; k <= total; ++k) {
      memset(&heap, 0, sizeof heap);
      heap.fail_at = k;
      CHECK_STATUS(per_buffer_init(&b, &c, &heap), PER_ERR_NOMEM);
      CHECK_STR(b.error, per_status_str(PER_ERR_NOMEM));
      memset(b.error, 0, sizeof b.error);
      CHECK_MEM(&b, &zero, sizeof b);
      CHECK_MSG(heap.live == 0,
                "variant %d, failing allocation %ld: %ld leaked", variant, k,
                heap.live);
      per_buffer_free(&b);
    }
    /* nothing allocates after init: a whole add/sample/update cycle */
    memset(&heap, 0, sizeof heap);
    CHECK_OK(per_buffer_init(&b, &c, &heap));
    total = heap.calls;
    {
      uint32_t v;
      uint64_t ids[16];
      float td[16] = {0};
      per_sample_opts o;
      memset(&o, 0, sizeof o);
      for (v = 0; v < 30; ++v) CHECK_OK(per_buffer_add(&b, &v));
      CHECK_OK(per_buffer_sample(&b, 16, NULL, NULL, ids, td));
      CHECK_OK(per_buffer_update(&b, ids, td, 16, NULL));
      o.flags = PER_SAMPLE_UNIQUE;
      CHECK_OK(per_buffer_sample(&b, 16, &o, NULL, ids, td));
      o.window = 7;
      CHECK_OK(per_buffer_sample(&b, 5, &o, NULL, ids, td));
    }
    CHECK_EQ_U(heap.calls, total);
    per_buffer_free(&b);
    CHECK_EQ_U(heap.live, 0);
  }
}

/* ---- a long random run keeps every invariant ---------------------------- */

static void test_random_ops(void) {
  int variant;
  for (variant = 0; variant < 4; ++variant) {
    per_config c = cfg_of(33, 8);
    per_buffer b;
    per_rng r;
    uint32_t step;
    c.seed = (uint64_t)variant;
    c.flags = variant & 1 ? PER_WEIGHTS_BUFFER_MAX : 0;
    if (variant == 2) c.alpha = 0;
    if (variant == 3) c.eps = 0;
    per_rng_init(&r, 77 + (uint64_t)variant);
    CHECK_OK(per_buffer_init(&b, &c, NULL));
    for (step = 0; step < 3000; ++step) {
      uint32_t op = per_rng_below(&r, 4);
      unsigned char items[8 * 40];
      uint64_t ids[40];
      float td[40], w[40];
      uint32_t n = 1 + per_rng_below(&r, 40), i;
      per_sample_opts o;
      per_status s;
      memset(items, (int)step, sizeof items);
      memset(&o, 0, sizeof o);
      if (op == 0) {
        CHECK_OK(per_buffer_add_batch(&b, items, n));
      } else {
        o.flags = per_rng_below(&r, 4);
        o.beta = per_rng_double(&r);
        if (!(o.flags & PER_SAMPLE_BETA)) o.beta = 0; /* else refused */
        o.window = per_rng_below(&r, 3) == 0 ? per_rng_below(&r, 40) : 0;
        s = per_buffer_sample(&b, n, &o, items, ids, w);
        if (s == PER_OK) {
          for (i = 0; i < n; ++i) {
            CHECK((uint32_t)ids[i] < b.size && w[i] >= 0 && w[i] <= 1);
            td[i] = (per_rng_float(&r) - 0.5f) *
                    (variant == 3 ? (float)(i & 1) : 10.0f);
          }
          CHECK_OK(per_buffer_update(&b, ids, td, n, NULL));
        } else {
          CHECK(s == PER_ERR_EMPTY || s == PER_ERR_TOO_FEW ||
                s == PER_ERR_BATCH);
        }
      }
      if (step % 97 == 0) CHECK_OK(per_buffer_check(&b));
    }
    CHECK_OK(per_buffer_check(&b));
    per_buffer_free(&b);
  }
}

/* A refused call says which argument or field and why in b->error (the
   buffer otherwise unchanged: test_bad_input); a successful call empties
   it. */
static void test_errors_say_why(void) {
  per_config c = cfg_of(8, 4), cs = cfg_of(8, 4);
  per_buffer b, q;
  per_sample_opts o;
  uint64_t ids[8], bad[2];
  float td[8], w[8];
  uint32_t v, items[8];
  uint8_t ends[3] = {PER_END_NONE, 5, PER_END_NONE};
  bsnap s;
  memset(&o, 0, sizeof o);
  for (v = 0; v < 8; ++v) td[v] = 1;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK(b.error[0] == 0);
  CHECK_STATUS(per_buffer_sample(&b, 2, NULL, NULL, ids, NULL), PER_ERR_EMPTY);
  CHECK_STR(b.error, "the buffer is empty");
  for (v = 0; v < 10; ++v) CHECK_OK(per_buffer_add(&b, &v));
  CHECK(b.error[0] == 0);
  CHECK_STATUS(per_buffer_sample(&b, 0, NULL, NULL, ids, NULL), PER_ERR_BATCH);
  CHECK_STR(b.error, "batch size B is 0");
  CHECK_OK(per_buffer_sample(&b, 4, NULL, NULL, ids, w));
  CHECK(b.error[0] == 0);

  /* opts */
  o.beta = 0.5; /* without PER_SAMPLE_BETA: refused, not ignored */
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_sample(&b, 4, &o, NULL, ids, w), PER_ERR_ARG);
  CHECK_UNCHANGED(s, &b);
  CHECK_STR(b.error, "opts->beta is set but PER_SAMPLE_BETA is not");
  o.flags = PER_SAMPLE_BETA;
  o.beta = 1.5; /* above 1: accepted, weights still in [0, 1] */
  CHECK_OK(per_buffer_sample(&b, 8, &o, NULL, ids, w));
  for (v = 0; v < 8; ++v) CHECK(w[v] >= 0 && w[v] <= 1);
  o.beta = -1;
  CHECK_STATUS(per_buffer_sample(&b, 4, &o, NULL, ids, w), PER_ERR_ARG);
  CHECK_STR(b.error, "opts->beta is negative");
  o.beta = 0;
  o.flags = PER_SAMPLE_SEQUENCES;
  CHECK_STATUS(per_buffer_sample(&b, 4, &o, NULL, ids, w), PER_ERR_ARG);
  CHECK_STR(b.error, "PER_SAMPLE_SEQUENCES on a buffer without sequences");
  o.flags = 1u << 9;
  CHECK_STATUS(per_buffer_sample(&b, 4, &o, NULL, ids, w), PER_ERR_ARG);
  CHECK_STR(b.error, "opts->flags 512 has bits");
  o.flags = PER_SAMPLE_UNIQUE;
  CHECK_STATUS(per_buffer_sample(&b, 9, &o, NULL, ids, w), PER_ERR_BATCH);
  CHECK_STR(b.error, "PER_SAMPLE_UNIQUE: batch size B 9 > config max_unique 8");
  o.window = 3;
  CHECK_STATUS(per_buffer_sample(&b, 4, &o, NULL, ids, w), PER_ERR_TOO_FEW);
  CHECK_STR(b.error, "PER_SAMPLE_UNIQUE: batch size B 4 > 3 eligible items");
  memset(&o, 0, sizeof o);

  /* update */
  CHECK_OK(per_buffer_sample(&b, 4, NULL, NULL, ids, w));
  td[2] = (float)NAN;
  CHECK_STATUS(per_buffer_update(&b, ids, td, 4, NULL), PER_ERR_NAN);
  CHECK_STR(b.error, "td[2] is NaN");
  td[2] = 1;
  bad[0] = ids[0];
  bad[1] = 9 | (uint64_t)1 << 32;
  CHECK_STATUS(per_buffer_update(&b, bad, td, 2, NULL), PER_ERR_INDEX);
  CHECK_STR(b.error, "ids[1] (slot 9, generation 1) was never handed out by "
                     "per_buffer_sample: slot >= capacity 8");
  bad[1] = 3;
  CHECK_STATUS(per_buffer_update(&b, bad, td, 2, NULL), PER_ERR_INDEX);
  CHECK_STR(b.error, "ids[1] (slot 3, generation 0) was never handed out by "
                     "per_buffer_sample: generation 0");
  CHECK_OK(per_buffer_update(&b, ids, td, 4, NULL));
  CHECK(b.error[0] == 0);

  /* adds */
  CHECK_STATUS(per_buffer_add_steps(&b, items, 3, ends), PER_ERR_ARG);
  CHECK_STR(b.error, "ends[1] is 5, not PER_END_NONE, PER_END_TERMINATED or "
                     "PER_END_TRUNCATED");
  CHECK_STATUS(per_buffer_add_step(&b, items, 7), PER_ERR_ARG);
  CHECK_STR(b.error, "end is 7, not PER_END_NONE");
  CHECK_STATUS(per_buffer_add(&b, NULL), PER_ERR_NULL);
  CHECK_STR(b.error, "item is NULL");
  per_buffer_free(&b);

  /* a sequence's id: refused by per_buffer_update, taken by _update_seq */
  cs.seq_len = 2;
  cs.seq_stride = 2;
  CHECK_OK(per_buffer_init(&q, &cs, NULL));
  for (v = 0; v < 8; ++v) CHECK_OK(per_buffer_add(&q, &v));
  o.flags = PER_SAMPLE_SEQUENCES;
  CHECK_OK(per_buffer_sample(&q, 3, &o, NULL, ids, NULL));
  for (v = 0; v < 3; ++v) {
    CHECK(ids[v] & PER_ID_SEQ);
    CHECK(per_id_slot(ids[v]) % 2 == 0 && per_id_slot(ids[v]) < 8);
    CHECK_EQ_U(per_id_generation(ids[v]), 1);
  }
  s = bsnap_take(&q);
  CHECK_STATUS(per_buffer_update(&q, ids, td, 3, NULL), PER_ERR_ARG);
  CHECK_UNCHANGED(s, &q);
  CHECK_STR(q.error, "ids[0] is a sequence's id (PER_SAMPLE_SEQUENCES): "
                     "per_buffer_update_seq updates its steps");
  CHECK_OK(per_buffer_update_seq(&q, ids, td, 3, NULL));
  CHECK(q.error[0] == 0);
  for (v = 0; v < 3; ++v) ids[v] &= ~PER_ID_SEQ; /* without the bit too */
  CHECK_OK(per_buffer_update_seq(&q, ids, td, 3, NULL));
  per_buffer_free(&q);
}

/* The double and float tests run at once in one directory: a file each. */
#define MAX_LIVE_FILE \
  (IS_FLOAT ? "buffer_float_max_live.bin" : "buffer_double_max_live.bin")

/* PER_MAX_LIVE: new items get the largest stored leaf (max_priority when
   none is > 0); the default keeps the largest ever written. Checked
   against the leaves themselves after every call of a random run. */
static void test_max_live(void) {
  per_config c = cfg_of(16, 4);
  per_buffer live, paper;
  per_rng r;
  uint64_t ids[8];
  float td[8], huge = 1e30f;
  uint32_t v, k, i;
  per_real big;
  c.alpha = 0.5;
  c.eps = 0;
  c.flags = PER_MAX_LIVE;
  CHECK_OK(per_buffer_init(&live, &c, NULL));
  c.flags = 0;
  CHECK_OK(per_buffer_init(&paper, &c, NULL));
  for (v = 0; v < 4; ++v) {
    CHECK_OK(per_buffer_add(&live, &v));
    CHECK_OK(per_buffer_add(&paper, &v));
  }
  CHECK_EQ_F(live.max_leaf, 1);
  /* one huge TD error: both give it to the next item */
  ids[0] = 2 | (uint64_t)1 << 32;
  CHECK_OK(per_buffer_update(&live, ids, &huge, 1, NULL));
  CHECK_OK(per_buffer_update(&paper, ids, &huge, 1, NULL));
  big = live.tree.node[live.tree.leaves + 2];
  CHECK_EQ_F(live.max_leaf, big);
  CHECK_EQ_F(paper.max_leaf, big);
  /* its leaf lowered: the live maximum falls, the paper's stays */
  td[0] = 4;
  CHECK_OK(per_buffer_update(&live, ids, td, 1, NULL));
  CHECK_OK(per_buffer_update(&paper, ids, td, 1, NULL));
  CHECK_EQ_F(live.max_leaf, 2); /* 4^0.5 */
  CHECK_EQ_F(paper.max_leaf, big);
  CHECK_OK(per_buffer_add(&live, &v));
  CHECK_EQ_F(live.tree.node[live.tree.leaves + 4], 2);
  CHECK_OK(per_buffer_check(&live));
  /* every leaf 0: new items get max_priority */
  for (v = 0; v < 5; ++v) {
    ids[v] = v | (uint64_t)1 << 32;
    td[v] = 0;
  }
  CHECK_OK(per_buffer_update(&live, ids, td, 5, NULL));
  CHECK_EQ_F(live.max_leaf, c.max_priority);
  CHECK_OK(per_buffer_check(&live));
  /* what only the paper's rule allows */
  CHECK_STATUS(per_buffer_raise_max_leaf(&live, 3), PER_ERR_ARG);
  CHECK_STR(live.error, "PER_MAX_LIVE");
  CHECK_STATUS(per_buffer_update_check(&live, ids, td, 1, NULL, &big),
               PER_ERR_ARG);
  per_buffer_free(&paper);

  /* a random run: max_leaf is always the largest stored leaf */
  per_rng_init(&r, 99);
  for (k = 0; k < 3000; ++k) {
    uint32_t op = per_rng_below(&r, 3), n = 1 + per_rng_below(&r, 8);
    per_real top = 0;
    if (op == 0) {
      uint32_t items[8] = {0};
      CHECK_OK(per_buffer_add_batch(&live, items, n));
    } else if (op == 1 && live.size > 0) {
      CHECK_OK(per_buffer_sample(&live, n, NULL, NULL, ids, NULL));
      for (i = 0; i < n; ++i)
        td[i] = per_rng_below(&r, 5) == 0 ? 0 : 100 * per_rng_float(&r);
      CHECK_OK(per_buffer_update(&live, ids, td, n, NULL));
    } else if (live.size > 0) {
      CHECK_OK(per_buffer_save(&live, MAX_LIVE_FILE));
      CHECK_OK(per_buffer_load(&live, MAX_LIVE_FILE));
    }
    for (i = 0; i < live.size; ++i)
      if (live.tree.node[live.tree.leaves + i] > top)
        top = live.tree.node[live.tree.leaves + i];
    CHECK_EQ_F(live.max_leaf, top > 0 ? top : (per_real)c.max_priority);
  }
  CHECK_OK(per_buffer_check(&live));
  remove(MAX_LIVE_FILE);
  per_buffer_free(&live);
}

int main(void) {
  test_config();
  test_push_sample_shapes();
  test_empty();
  test_priority_bias();
  test_weights();
  test_beta_schedule();
  test_replay_runs();
  test_update_rules();
  test_stale();
  test_update_check();
  test_add_batch();
  test_add_td();
  test_trajectories();
  test_distribution();
  test_window();
  test_window_partial();
  test_uniform_fallback();
  test_uniform_mode();
  test_buffer_max();
  test_determinism();
  test_bad_input();
  test_errors_say_why();
  test_max_live();
  test_advance_strata();
  test_draw_uniform();
  test_shared_state();
  test_raise_max_leaf();
  test_count_evicted();
  test_alloc_failure();
  test_random_ops();
  return t_done(IS_FLOAT ? "buffer (float)" : "buffer (double)");
}
