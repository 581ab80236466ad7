/* test_seq.c - episode ends and sequence replay (PER_SAMPLE_SEQUENCES,
   per_buffer_update_seq): the sequence tree against a model written from
   the add history, validity at the write head, the wrap and every episode
   end offset, masks, the law of the draws, L = 1 against item sampling,
   stale ids, bad input leaving the buffer byte-identical, checkpoints and
   determinism. Runs with PER_REAL double and float.

   The statistical check uses a fixed seed and fails when a chi-square
   p-value is below P_MIN = 1e-6 (false-failure probability 1e-6 for a
   correct sampler; stratified draws only lower the counts' variance). */
#include "buffer_util.h"
#include "stats.h"

#define P_MIN 1e-6
#define NAME(s) (IS_FLOAT ? "seq_float_" s : "seq_double_" s)

/* The item: the global index of the step (the add that wrote it) and its
   end flag. */
typedef struct step {
  uint32_t index;
  uint32_t end;
} step;

/* What the test remembers of every add: the end flag of step g. */
typedef struct model {
  uint8_t end[1 << 16];
  uint32_t added;
} model;

static per_config seq_cfg(uint32_t cap, uint32_t len, uint32_t stride,
                          int cross) {
  per_config c = per_config_default(cap, sizeof(step));
  c.seq_len = len;
  c.seq_stride = stride;
  c.flags = cross ? PER_SEQ_CROSS_EPISODES : 0;
  c.seed = 1234u + cap + len * 7u + stride * 31u + (uint32_t)cross;
  return c;
}

/* Add n steps, step g ending its episode where end_of(g) says. */
static void add_steps(per_buffer *b, model *m, uint32_t n, uint32_t every,
                      uint32_t phase) {
  step s[64];
  uint8_t e[64];
  uint32_t i;
  REQUIRE(n <= 64);
  for (i = 0; i < n; ++i) {
    uint32_t g = m->added + i;
    s[i].index = g;
    e[i] = (uint8_t)(every && g % every == phase
                         ? (g % 2 ? PER_END_TERMINATED : PER_END_TRUNCATED)
                         : PER_END_NONE);
    s[i].end = e[i];
    m->end[g % (1u << 16)] = e[i];
  }
  CHECK_OK(per_buffer_add_steps(b, s, n, e));
  m->added += n;
}

/* The model's sequence at start slot s: the number of its steps up to
   its first episode end (0 when it must not be drawn), from the global
   step indices alone. */
static uint32_t model_steps(const per_buffer *b, const model *m,
                            uint32_t slot) {
  uint32_t cap = b->cfg.capacity, L = b->cfg.seq_len, t;
  uint64_t g, newest;
  if (m->added == 0) return 0;
  newest = m->added - 1;
  /* the step stored at slot: the latest g with g % cap == slot */
  if (slot > newest) return 0;
  g = newest - ((newest - slot) % cap);
  if (g + L - 1 > newest) return 0; /* would span the write head */
  for (t = 0; t + 1 < L; ++t) {
    if (m->end[(g + t) % (1u << 16)]) {
      if (!(b->cfg.flags & PER_SEQ_CROSS_EPISODES)) return 0;
      return t + 1;
    }
  }
  return L;
}

/* Item updates of every stored slot: slot j gets td[j] (size <= 64). */
static void update_all(per_buffer *b, const float *td) {
  uint64_t ids[64];
  uint32_t j;
  REQUIRE(b->size <= 64);
  for (j = 0; j < b->size; ++j)
    ids[j] = (uint64_t)j | ((uint64_t)b->gen[j] << 32);
  CHECK_OK(per_buffer_update(b, ids, td, b->size, NULL));
}

/* Every sequence leaf against the model: validity exactly, the value as
   eta * max + (1 - eta) * mean of the unmasked steps' leaves. */
static void check_model(const per_buffer *b, const model *m) {
  uint32_t j, ns = b->seq_tree.capacity, bad = 0;
  for (j = 0; j < ns; ++j) {
    uint32_t slot = j * b->cfg.seq_stride, n = model_steps(b, m, slot), t;
    double mx = 0, sum = 0, want;
    double got = (double)b->seq_tree.node[b->seq_tree.leaves + j];
    for (t = 0; t < n; ++t) {
      double v = (double)per_tree_get(&b->tree, (slot + t) % b->cfg.capacity);
      mx = v > mx ? v : mx;
      sum += v;
    }
    want = n ? b->cfg.seq_eta * mx + (1 - b->cfg.seq_eta) * (sum / n) : 0;
    if ((b->seq_ok[j] != 0) != (n != 0) ||
        fabs(got - want) > (IS_FLOAT ? 1e-6 : 1e-12) * want)
      ++bad;
  }
  CHECK_MSG(bad == 0, "%u of %u sequence leaves differ from the model", bad,
            ns);
  CHECK_OK(per_buffer_check(b));
}

/* Every drawn sequence: valid in the model, its items the consecutive
   steps from its start, the mask up to the first end. */
static void check_draw(const per_buffer *b, const model *m, uint32_t B,
                       const step *items, const uint64_t *ids,
                       const uint8_t *mask) {
  uint32_t i, t, L = b->cfg.seq_len, bad = 0;
  for (i = 0; i < B; ++i) {
    uint32_t slot = per_id_slot(ids[i]), n = model_steps(b, m, slot);
    if (n == 0 || slot % b->cfg.seq_stride != 0 ||
        (uint32_t)(ids[i] >> 32) != b->gen[slot]) {
      ++bad;
      continue;
    }
    for (t = 0; t < L; ++t) {
      const step *s = &items[(size_t)i * L + t];
      if (s->index != items[(size_t)i * L].index + t ||
          s->index % b->cfg.capacity != (slot + t) % b->cfg.capacity)
        ++bad;
      if (mask && mask[(size_t)i * L + t] != (t < n)) ++bad;
    }
  }
  CHECK_MSG(bad == 0, "%u bad draws or steps in a batch of %u", bad, B);
}

/* ---- config and ends ----------------------------------------------------- */

static void test_config(void) {
  per_config c = per_config_default(12, 4), d;
  per_buffer b;
  int k;
  CHECK_EQ_U(c.seq_len, 0);
  CHECK_EQ_U(c.seq_stride, 0);
  CHECK_EQ_F(c.seq_eta, 0.9);
  for (k = 0; k < 9; ++k) {
    d = c;
    d.seq_len = 4;
    d.seq_stride = 2;
    if (k == 0) d.seq_stride = 0; /* stride 0 */
    if (k == 1) d.seq_stride = 5; /* does not divide 12 */
    if (k == 2) d.seq_len = 13;   /* L > capacity */
    if (k == 3) d.seq_eta = -0.1;
    if (k == 4) d.seq_eta = 1.5;
    if (k == 5) d.seq_eta = NAN;
    if (k == 6) d.seq_len = 0; /* a stride without L */
    if (k == 7) {
      d.seq_len = 0;
      d.seq_stride = 0;
      d.flags = PER_SEQ_CROSS_EPISODES;
    }
    if (k == 8) d.flags = 1u << 7; /* unknown flag */
    CHECK_MSG(per_buffer_init(&b, &d, NULL) == PER_ERR_ARG, "config case %d",
              k);
    CHECK(b.items == NULL);
  }
  d = c;
  d.seq_len = 12; /* L = capacity, stride = capacity: one sequence */
  d.seq_stride = 12;
  CHECK_OK(per_buffer_init(&b, &d, NULL));
  CHECK_EQ_U(b.seq_tree.capacity, 1);
  per_buffer_free(&b);
}

static void test_ends(void) {
  per_config c = per_config_default(5, sizeof(step));
  per_buffer b;
  step s[7];
  uint8_t e[7] = {0, 1, 2, 0, 0, 1, 0};
  bsnap snap;
  uint32_t i;
  for (i = 0; i < 7; ++i) s[i].index = i;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_OK(per_buffer_add_step(&b, &s[0], PER_END_TERMINATED));
  CHECK_EQ_U(b.ends[0], PER_END_TERMINATED);
  CHECK_OK(per_buffer_add(&b, &s[1])); /* add stores PER_END_NONE */
  CHECK_EQ_U(b.ends[1], PER_END_NONE);
  snap = bsnap_take(&b);
  CHECK_STATUS(per_buffer_add_step(&b, &s[2], 3), PER_ERR_ARG);
  e[4] = 9;
  CHECK_STATUS(per_buffer_add_steps(&b, s, 7, e), PER_ERR_ARG);
  CHECK_STATUS(per_buffer_add_step(&b, NULL, 0), PER_ERR_NULL);
  CHECK_UNCHANGED(snap, &b);
  e[4] = 0;
  /* 7 steps into 5 slots from slot 2: the last 5 stay, with their ends */
  CHECK_OK(per_buffer_add_steps(&b, s, 7, e));
  for (i = 0; i < 5; ++i) {
    step got;
    uint32_t slot = (2 + 7 - 5 + i) % 5;
    memcpy(&got, b.items + (size_t)slot * sizeof(step), sizeof got);
    CHECK_EQ_U(got.index, 2 + i);
    CHECK_EQ_U(b.ends[slot], e[2 + i]);
  }
  CHECK_OK(per_buffer_add_steps(&b, s, 2, NULL)); /* NULL ends: none */
  CHECK_EQ_U(b.ends[(b.pos + 4) % 5], 0);
  CHECK_OK(per_buffer_check(&b));
  b.ends[0] = 3;
  CHECK_STATUS(per_buffer_check(&b), PER_ERR_CORRUPT);
  b.ends[0] = 0;
  per_buffer_free(&b);
}

/* ---- the sequence tree --------------------------------------------------- */

/* Random adds (with ends at every offset), item updates, sequence draws
   and updates on several shapes: after each call the tree is the
   model's, and every draw is valid. */
static void test_random_shapes(void) {
  static const uint32_t shape[][4] = {
      /* capacity, L, stride, cross */
      {16, 4, 2, 0},   {16, 4, 2, 1}, {30, 5, 5, 0}, {30, 7, 3, 1},
      {24, 12, 12, 1}, {17, 1, 1, 0}, {64, 8, 1, 1}, {40, 3, 8, 0}};
  static model m;
  static step items[64 * 24];
  uint8_t mask[64 * 24];
  uint64_t ids[64];
  float td[64 * 24], tdi[8];
  uint32_t k, it;
  for (k = 0; k < sizeof shape / sizeof shape[0]; ++k) {
    per_config c =
        seq_cfg(shape[k][0], shape[k][1], shape[k][2], (int)shape[k][3]);
    per_buffer b;
    per_rng r;
    uint32_t L = c.seq_len, draws = 0;
    memset(&m, 0, sizeof m);
    per_rng_init(&r, 99 + k);
    CHECK_OK(per_buffer_init(&b, &c, NULL));
    for (it = 0; it < 300; ++it) {
      uint32_t op = per_rng_below(&r, 4), B = 1 + per_rng_below(&r, 16), j;
      per_sample_opts o;
      per_status s;
      if (op == 0 || m.added < c.capacity / 2) {
        add_steps(&b, &m, 1 + per_rng_below(&r, 9), 2 + per_rng_below(&r, 9),
                  per_rng_below(&r, 5));
      } else if (op == 1) { /* item updates */
        uint64_t iid[8];
        CHECK_OK(per_buffer_sample(&b, 8, NULL, NULL, iid, NULL));
        for (j = 0; j < 8; ++j)
          tdi[j] = (float)per_rng_below(&r, 1000) / 100.0f;
        CHECK_OK(per_buffer_update(&b, iid, tdi, 8, NULL));
      } else {
        memset(&o, 0, sizeof o);
        o.flags = PER_SAMPLE_SEQUENCES | (op == 3 ? PER_SAMPLE_UNIQUE : 0u);
        o.window =
            per_rng_below(&r, 3) == 0 ? 1 + per_rng_below(&r, c.capacity) : 0;
        o.mask = mask;
        s = per_buffer_sample(&b, B, &o, items, ids, NULL);
        if (s == PER_ERR_TOO_FEW) continue; /* checked in test_edges */
        CHECK_OK(s);
        if (s != PER_OK) continue;
        ++draws;
        check_draw(&b, &m, B, items, ids, mask);
        if (o.window) { /* every start among the W newest items */
          for (j = 0; j < B; ++j) {
            uint32_t age =
                (b.pos + c.capacity - 1 - per_id_slot(ids[j])) % c.capacity;
            CHECK_MSG(age < o.window, "start of age %u outside a window of %u",
                      age, o.window);
          }
        }
        for (j = 0; j < B * L; ++j)
          td[j] = (float)per_rng_below(&r, 1000) / 100.0f;
        if (per_rng_below(&r, 2))
          CHECK_OK(per_buffer_update_seq(&b, ids, td, B, NULL));
      }
      check_model(&b, &m);
    }
    CHECK_MSG(draws > 20, "shape %u: only %u sequence draws", k, draws);
    per_buffer_free(&b);
  }
}

/* L = 1, stride 1: the sequence tree equals the item tree, so sequence
   draws are item draws, bit for bit. */
static void test_len_one(void) {
  per_config c = seq_cfg(50, 1, 1, 0);
  per_buffer a, b;
  static model m, mb;
  per_sample_opts o;
  step ia[40], ib[40];
  uint64_t ida[40], idb[40];
  float wa[40], wb[40], td[40];
  uint32_t k, j;
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  memset(&m, 0, sizeof m);
  memset(&mb, 0, sizeof mb);
  for (k = 0; k < 10; ++k) {
    add_steps(&a, &m, 7, 3, 1);
    add_steps(&b, &mb, 7, 3, 1);
  }
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_SEQUENCES;
  for (k = 0; k < 20; ++k) {
    o.window = k % 3 == 0 ? 13 : 0;
    CHECK_OK(per_buffer_sample(&a, 40, &o, ia, ida, wa));
    o.flags = 0;
    CHECK_OK(per_buffer_sample(&b, 40, &o, ib, idb, wb));
    o.flags = PER_SAMPLE_SEQUENCES;
    for (j = 0; j < 40; ++j) {
      CHECK((ida[j] & PER_ID_SEQ) && !(idb[j] & PER_ID_SEQ));
      CHECK(ida[j] == (idb[j] | PER_ID_SEQ));
    }
    CHECK(memcmp(ia, ib, sizeof ia) == 0);
    CHECK(memcmp(wa, wb, sizeof wa) == 0);
    for (j = 0; j < 40; ++j) td[j] = (float)(j % 9) * 0.75f + (float)k;
    CHECK_OK(per_buffer_update_seq(&a, ida, td, 40, NULL));
    CHECK_OK(per_buffer_update(&b, idb, td, 40, NULL));
  }
  per_buffer_free(&a);
  per_buffer_free(&b);
}

/* The law: P(start j) = leaf_j / total, leaf_j = eta * max + (1 - eta) *
   mean of its steps' priorities, over many stratified batches. */
static void test_law(void) {
  per_config c = seq_cfg(64, 6, 2, 0);
  per_buffer b;
  static model m;
  per_sample_opts o;
  uint64_t ids[64];
  float td[64];
  double counts[32], expd[32], total = 0, stat, p;
  uint32_t j, k, cells = 0;
  memset(&m, 0, sizeof m);
  memset(counts, 0, sizeof counts);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  add_steps(&b, &m, 64, 0, 0);
  add_steps(&b, &m, 10, 0, 0); /* wrapped: slots 10..15 hold the newest */
  for (j = 0; j < 64; ++j) td[j] = (float)((j * 37) % 11) * 0.5f;
  update_all(&b, td);
  check_model(&b, &m);
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_SEQUENCES;
  for (k = 0; k < 2000; ++k) {
    CHECK_OK(per_buffer_sample(&b, 64, &o, NULL, ids, NULL));
    for (j = 0; j < 64; ++j) counts[per_id_slot(ids[j]) / 2] += 1;
  }
  for (j = 0; j < 32; ++j)
    total += (double)b.seq_tree.node[b.seq_tree.leaves + j];
  for (j = 0; j < 32; ++j) {
    expd[j] =
        2000.0 * 64 * (double)b.seq_tree.node[b.seq_tree.leaves + j] / total;
    cells += expd[j] > 0;
  }
  /* all but the starts at slots 6 and 8, whose sequences would span the
     write head (the newest step is at slot 9) */
  CHECK_EQ_U(cells, 30);
  CHECK(expd[3] == 0 && expd[4] == 0);
  stat = chi2_stat(counts, expd, 32);
  p = chi2_p(stat, cells - 1);
  CHECK_MSG(p > P_MIN, "sequence law: chi-square %.2f df %u p %.3g", stat,
            cells - 1, p);
  per_buffer_free(&b);
}

/* L > stored, the write head, the wrap, degenerate mass, masks at every
   end offset, unique draws. */
static void test_edges(void) {
  per_config c = seq_cfg(12, 4, 2, 1);
  per_buffer b;
  static model m;
  per_sample_opts o;
  step items[24 * 4];
  uint8_t mask[24 * 4];
  uint64_t ids[24];
  float w[24];
  uint32_t j, phase;
  memset(&m, 0, sizeof m);
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_SEQUENCES;
  o.mask = mask;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  add_steps(&b, &m, 3, 0, 0);
  CHECK_STATUS(per_buffer_sample(&b, 1, &o, items, ids, w), PER_ERR_TOO_FEW);
  add_steps(&b, &m, 1, 0, 0); /* now one: slots 0..3 */
  CHECK_OK(per_buffer_sample(&b, 5, &o, items, ids, w));
  for (j = 0; j < 5; ++j) CHECK_EQ_U(per_id_slot(ids[j]), 0);
  o.flags |= PER_SAMPLE_UNIQUE;
  CHECK_STATUS(per_buffer_sample(&b, 2, &o, items, ids, w), PER_ERR_TOO_FEW);
  o.flags = PER_SAMPLE_SEQUENCES;
  /* ends at every offset, the ring wrapped several times */
  for (phase = 0; phase < 7; ++phase) {
    add_steps(&b, &m, 9, 7, phase);
    check_model(&b, &m);
    CHECK_OK(per_buffer_sample(&b, 24, &o, items, ids, w));
    check_draw(&b, &m, 24, items, ids, mask);
  }
  /* unique: distinct starts */
  o.flags |= PER_SAMPLE_UNIQUE;
  {
    uint32_t nvalid = 0, i;
    for (j = 0; j < b.seq_tree.capacity; ++j) nvalid += b.seq_ok[j];
    CHECK(nvalid >= 2);
    CHECK_OK(per_buffer_sample(&b, nvalid, &o, items, ids, w));
    for (j = 0; j < nvalid; ++j)
      for (i = 0; i < j; ++i) CHECK(ids[i] != ids[j]);
    CHECK_STATUS(per_buffer_sample(&b, nvalid + 1, &o, items, ids, w),
                 PER_ERR_TOO_FEW);
  }
  per_buffer_free(&b);

  /* L = capacity: the one sequence is valid only while the ring holds
     exactly it, oldest at slot 0 */
  c = seq_cfg(6, 6, 6, 0);
  o.flags = PER_SAMPLE_SEQUENCES;
  memset(&m, 0, sizeof m);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  add_steps(&b, &m, 5, 0, 0);
  CHECK_STATUS(per_buffer_sample(&b, 1, &o, items, ids, w), PER_ERR_TOO_FEW);
  add_steps(&b, &m, 1, 0, 0);
  CHECK_OK(per_buffer_sample(&b, 3, &o, items, ids, w));
  check_draw(&b, &m, 3, items, ids, mask);
  add_steps(&b, &m, 1, 0, 0);
  CHECK_STATUS(per_buffer_sample(&b, 1, &o, items, ids, w), PER_ERR_TOO_FEW);
  add_steps(&b, &m, 5, 0, 0);
  CHECK_OK(per_buffer_sample(&b, 1, &o, items, ids, w));
  CHECK_EQ_U(items[0].index, 6);
  check_model(&b, &m);
  per_buffer_free(&b);

  /* eps = 0 and every TD 0: no mass, draws uniform over valid sequences
     with weight 1 */
  c = seq_cfg(12, 4, 2, 0);
  c.eps = 0;
  memset(&m, 0, sizeof m);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  add_steps(&b, &m, 12, 5, 2);
  {
    float td[12] = {0};
    update_all(&b, td);
  }
  check_model(&b, &m);
  CHECK(b.seq_tree.node[1] == 0);
  o.flags = PER_SAMPLE_SEQUENCES;
  CHECK_OK(per_buffer_sample(&b, 24, &o, items, ids, w));
  check_draw(&b, &m, 24, items, ids, mask);
  for (j = 0; j < 24; ++j) CHECK_EQ_F(w[j], 1.0f);
  o.flags |= PER_SAMPLE_UNIQUE;
  CHECK_OK(per_buffer_sample(&b, 2, &o, items, ids, w));
  CHECK(ids[0] != ids[1]);
  check_draw(&b, &m, 2, items, ids, mask);
  per_buffer_free(&b);
}

/* Stale sequences, bad input, updates on overlapping sequences. */
static void test_update(void) {
  per_config c = seq_cfg(16, 4, 2, 0);
  per_buffer b, plain;
  static model m;
  per_sample_opts o;
  uint64_t ids[4], bad;
  float td[16];
  uint32_t stale = 77, j;
  bsnap s;
  memset(&m, 0, sizeof m);
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_SEQUENCES;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  add_steps(&b, &m, 16, 0, 0);
  CHECK_OK(per_buffer_sample(&b, 4, &o, NULL, ids, NULL));
  for (j = 0; j < 16; ++j) td[j] = 1.0f + (float)j;
  /* bad input: nothing changes */
  s = bsnap_take(&b);
  td[5] = NAN;
  CHECK_STATUS(per_buffer_update_seq(&b, ids, td, 4, &stale), PER_ERR_NAN);
  td[5] = INFINITY;
  CHECK_STATUS(per_buffer_update_seq(&b, ids, td, 4, &stale), PER_ERR_INF);
  td[5] = 6.0f;
  bad = ids[2] + 1; /* not a sequence start */
  CHECK_STATUS(per_buffer_update_seq(&b, &bad, td, 1, &stale), PER_ERR_INDEX);
  /* current, spans the head */
  bad = (uint64_t)14 | ((uint64_t)b.gen[14] << 32);
  CHECK_STATUS(per_buffer_update_seq(&b, &bad, td, 1, &stale), PER_ERR_INDEX);
  bad = (uint64_t)16 | ((uint64_t)1 << 32);
  CHECK_STATUS(per_buffer_update_seq(&b, &bad, td, 1, &stale), PER_ERR_INDEX);
  CHECK_STATUS(per_buffer_update_seq(&b, NULL, td, 1, &stale), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_sample(&b, 0, &o, NULL, ids, NULL), PER_ERR_BATCH);
  CHECK_EQ_U(stale, 77);
  CHECK_UNCHANGED(s, &b);
  /* applied: the steps' leaves, then the sequences */
  CHECK_OK(per_buffer_update_seq(&b, ids, td, 4, &stale));
  CHECK_EQ_U(stale, 0);
  for (j = 0; j < 4; ++j) { /* the last write of a step wins */
    uint32_t t, k, slot = per_id_slot(ids[j]);
    for (t = 0; t < 4; ++t) {
      int later = 0;
      for (k = j + 1; k < 4; ++k)
        later |= (slot + t - per_id_slot(ids[k])) % 16 < 4;
      if (!later)
        CHECK_EQ_F(per_tree_get(&b.tree, (slot + t) % 16),
                   (per_real)pow(fabs((double)td[j * 4 + t]) + c.eps, c.alpha));
    }
  }
  check_model(&b, &m);
  /* overwrite the first two sequences' starts: stale */
  CHECK_OK(per_buffer_sample(&b, 4, &o, NULL, ids, NULL));
  add_steps(&b, &m, 16, 0, 0);
  s = bsnap_take(&b);
  CHECK_OK(per_buffer_update_seq(&b, ids, td, 4, &stale));
  CHECK_EQ_U(stale, 4);
  CHECK_UNCHANGED(s, &b);
  /* a buffer without sequences refuses both calls */
  c = per_config_default(16, sizeof(step));
  CHECK_OK(per_buffer_init(&plain, &c, NULL));
  add_steps(&plain, &m, 16, 0, 0);
  s = bsnap_take(&plain);
  CHECK_STATUS(per_buffer_sample(&plain, 2, &o, NULL, ids, NULL), PER_ERR_ARG);
  CHECK_STATUS(per_buffer_update_seq(&plain, ids, td, 1, NULL), PER_ERR_ARG);
  CHECK_UNCHANGED(s, &plain);
  per_buffer_free(&plain);
  per_buffer_free(&b);
}

/* Buffer-max weights for sequences: the smallest positive sequence leaf. */
static void test_buffer_max(void) {
  per_config c = seq_cfg(32, 4, 4, 1);
  per_buffer b;
  static model m;
  per_sample_opts o;
  uint64_t ids[16];
  float w[16];
  per_real vmin = 0;
  uint32_t j;
  c.flags |= PER_WEIGHTS_BUFFER_MAX;
  memset(&m, 0, sizeof m);
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  add_steps(&b, &m, 40, 6, 1);
  {
    float td[32];
    for (j = 0; j < 32; ++j) td[j] = (float)(j % 7) + 0.5f;
    update_all(&b, td);
  }
  check_model(&b, &m);
  for (j = 0; j < b.seq_tree.capacity; ++j) {
    per_real v = b.seq_tree.node[b.seq_tree.leaves + j];
    if (v > 0 && (vmin == 0 || v < vmin)) vmin = v;
  }
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_SEQUENCES | PER_SAMPLE_BETA;
  o.beta = 0.7;
  CHECK_OK(per_buffer_sample(&b, 16, &o, NULL, ids, w));
  for (j = 0; j < 16; ++j) {
    per_real v = b.seq_tree.node[b.seq_tree.leaves + per_id_slot(ids[j]) / 4];
    CHECK_EQ_F(w[j], (float)pow((double)vmin / (double)v, 0.7));
  }
  per_buffer_free(&b);
}

/* Save and load: the same sequences and the same next batches; another
   sequence shape refuses the file. */
static void test_checkpoint(void) {
  per_config c = seq_cfg(20, 5, 5, 1), d;
  per_buffer a, b;
  static model m;
  per_sample_opts o;
  uint64_t ia[8], ib[8];
  uint8_t ma[40], mb[40];
  float wa[8], wb[8];
  bsnap s;
  int k;
  memset(&m, 0, sizeof m);
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  add_steps(&a, &m, 27, 4, 3);
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_SEQUENCES;
  CHECK_OK(per_buffer_save(&a, NAME("ckpt.bin")));
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_OK(per_buffer_load(&b, NAME("ckpt.bin")));
  CHECK(state_equal(&a, &b));
  CHECK_OK(per_buffer_check(&b));
  for (k = 0; k < 3; ++k) {
    o.mask = ma;
    CHECK_OK(per_buffer_sample(&a, 8, &o, NULL, ia, wa));
    o.mask = mb;
    CHECK_OK(per_buffer_sample(&b, 8, &o, NULL, ib, wb));
    CHECK(memcmp(ia, ib, sizeof ia) == 0 && memcmp(wa, wb, sizeof wa) == 0 &&
          memcmp(ma, mb, sizeof ma) == 0);
  }
  per_buffer_free(&b);
  for (k = 0; k < 3; ++k) {
    d = c;
    if (k == 0) d.seq_len = 4;
    if (k == 1) d.seq_stride = 4;
    if (k == 2) {
      d.seq_len = 0;
      d.seq_stride = 0;
      d.flags = 0;
    }
    CHECK_OK(per_buffer_init(&b, &d, NULL));
    s = bsnap_take(&b);
    CHECK_STATUS(per_buffer_load(&b, NAME("ckpt.bin")), PER_ERR_MISMATCH);
    CHECK_UNCHANGED(s, &b);
    /* a shard keeps b's own shape and rebuilds its sequences */
    CHECK_OK(per_buffer_load_shard(&b, NAME("ckpt.bin"), 0, 1));
    CHECK_OK(per_buffer_check(&b));
    CHECK(memcmp(b.ends, a.ends + a.pos, a.size - a.pos) == 0 &&
          memcmp(b.ends + (a.size - a.pos), a.ends, a.pos) == 0);
    per_buffer_free(&b);
  }
  per_buffer_free(&a);
  remove(NAME("ckpt.bin"));
}

/* The same seed and calls give the same sequence batches. */
static void test_determinism(void) {
  per_config c = seq_cfg(48, 6, 3, 1);
  per_buffer a, b;
  static model ma, mb;
  per_sample_opts o;
  static step xa[32 * 6], xb[32 * 6];
  uint64_t ia[32], ib[32];
  float wa[32], wb[32], td[32 * 6];
  uint32_t k, j;
  memset(&ma, 0, sizeof ma);
  memset(&mb, 0, sizeof mb);
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  memset(&o, 0, sizeof o);
  for (k = 0; k < 12; ++k) {
    add_steps(&a, &ma, 11, 9, k % 9);
    add_steps(&b, &mb, 11, 9, k % 9);
    uint32_t B = k % 4 == 3 ? 4 : 32;
    o.flags = PER_SAMPLE_SEQUENCES | (k % 4 == 3 ? PER_SAMPLE_UNIQUE : 0u);
    o.window = k % 3 == 1 ? 30 : 0;
    CHECK_OK(per_buffer_sample(&a, B, &o, xa, ia, wa));
    CHECK_OK(per_buffer_sample(&b, B, &o, xb, ib, wb));
    CHECK(memcmp(ia, ib, B * sizeof ia[0]) == 0 &&
          memcmp(wa, wb, B * sizeof wa[0]) == 0 &&
          memcmp(xa, xb, B * 6 * sizeof xa[0]) == 0);
    for (j = 0; j < B * 6; ++j) td[j] = (float)((j * 13 + k) % 17) * 0.25f;
    CHECK_OK(per_buffer_update_seq(&a, ia, td, B, NULL));
    CHECK_OK(per_buffer_update_seq(&b, ib, td, B, NULL));
  }
  CHECK(state_equal(&a, &b));
  per_buffer_free(&a);
  per_buffer_free(&b);
}

/* Allocation failure at every allocation of a sequence buffer's init. */
static void test_alloc_failure(void) {
  per_config c = seq_cfg(64, 8, 4, 0);
  t_heap heap;
  per_buffer b;
  long k, total;
  c.flags = PER_WEIGHTS_BUFFER_MAX;
  memset(&heap, 0, sizeof heap);
  CHECK_OK(per_buffer_init(&b, &c, &heap));
  total = heap.calls;
  per_buffer_free(&b);
  CHECK_EQ_U(heap.live, 0);
  for (k = 0; k < total; ++k) {
    memset(&heap, 0, sizeof heap);
    heap.fail_at = k + 1;
    CHECK_STATUS(per_buffer_init(&b, &c, &heap), PER_ERR_NOMEM);
    CHECK_EQ_U(heap.live, 0);
  }
}

int main(void) {
  test_config();
  test_ends();
  test_random_shapes();
  test_len_one();
  test_law();
  test_edges();
  test_update();
  test_buffer_max();
  test_checkpoint();
  test_determinism();
  test_alloc_failure();
  return t_done(IS_FLOAT ? "seq (float)" : "seq (double)");
}
