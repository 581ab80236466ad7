/* per_mpi.h under mpirun -np 1, 2, 3 and 4 (tests/meson.build): the
   sharded buffer against one per_buffer (bit for bit where W and C are
   powers of two), the global law, and errors agreed by every rank. */
#include <stdlib.h>

/* Every block per and per_mpi allocate, counted (heap.h): all freed at
   the end (LeakSanitizer cannot run over Open MPI, tests/mpi/meson.build). */
#include "heap.h"

#define PER_IMPLEMENTATION
#include "per.h"
#define PER_MPI_IMPLEMENTATION
#include "per_mpi.h"

#include "stats.h"
#include "t.h"

static int me, W;

/* Every rank of comm's status must be `want`. */
static void check_on(MPI_Comm comm, int got, int want, const char *what) {
  int n, r, *all;
  MPI_Comm_size(comm, &n);
  all = (int *)malloc((size_t)n * sizeof *all);
  REQUIRE(all);
  MPI_Allgather(&got, 1, MPI_INT, all, 1, MPI_INT, comm);
  for (r = 0; r < n; ++r)
    CHECK_MSG(all[r] == want, "%s: rank %d got %s, want %s", what, r,
              per_status_str((per_status)all[r]),
              per_status_str((per_status)want));
  free(all);
}

static void check_all(int got, int want, const char *what) {
  check_on(MPI_COMM_WORLD, got, want, what);
}

typedef struct item {
  uint32_t rank, slot, tag;
} item;

static item make_item(uint32_t r, uint32_t j, uint32_t tag) {
  item it;
  it.rank = r;
  it.slot = j;
  it.tag = tag;
  return it;
}

/* FNV-1a of a shard's leaves, counters and rng: "nothing changed". */
static uint64_t shard_hash(const per_buffer *b) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char *p = (const unsigned char *)b->tree.node;
  size_t i, n = 2 * (size_t)b->tree.leaves * sizeof(per_real);
  for (i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  h = (h ^ b->rng.counter) * 1099511628211ull;
  h = (h ^ b->step) * 1099511628211ull;
  h = (h ^ b->size) * 1099511628211ull;
  return h;
}

/* ---- bit for bit against one buffer of W * C leaves ---- */

/* Every leaf of big and of every shard becomes 0 (eps = 0: a TD error of
   0 gives leaf 0), so that both sample by the uniform fallback: big one
   slot at a time, each shard its own slots in one per_mpi_update. */
static void zero_leaves(per_mpi *m, per_buffer *big) {
  uint32_t j, n = per_buffer_size(&m->shard);
  per_mpi_id *gids = (per_mpi_id *)malloc((n ? n : 1) * sizeof *gids);
  float *td = (float *)calloc(n ? n : 1, sizeof *td);
  uint64_t id;
  float zero = 0;
  REQUIRE(gids && td);
  for (j = 0; j < big->size; ++j) {
    id = (uint64_t)j | ((uint64_t)big->gen[j] << 32);
    REQUIRE(per_buffer_update(big, &id, &zero, 1, NULL) == PER_OK);
  }
  for (j = 0; j < n; ++j) {
    gids[j].rank = (uint64_t)me;
    gids[j].id = (uint64_t)j | ((uint64_t)m->shard.gen[j] << 32);
  }
  CHECK_OK(per_mpi_update(m, gids, td, n, NULL));
  CHECK(m->shard.tree.node[1] == 0);
  CHECK(big->tree.node[1] == 0);
  free(gids);
  free(td);
}

static void equivalence(uint32_t flags, double eps, int adds) {
  const uint32_t C = 64, rounds = 48;
  per_config cfg = per_config_default(C, sizeof(item));
  per_config big_cfg;
  per_mpi m;
  per_buffer big;
  per_rng trng;
  uint32_t r, j, pass, round, added0 = 0, bad = 0, bad_w = 0, bad_items = 0;
  uint32_t Bs[4] = {1, 7, 64, 200};
  uint64_t *bids = (uint64_t *)malloc(256 * sizeof *bids);
  per_mpi_id *gids = (per_mpi_id *)malloc(256 * sizeof *gids);
  float *w1 = (float *)malloc(256 * sizeof *w1);
  float *w2 = (float *)malloc(256 * sizeof *w2);
  float *td = (float *)malloc(256 * sizeof *td);
  item *i1 = (item *)malloc(256 * sizeof *i1);
  item *i2 = (item *)malloc(256 * sizeof *i2);
  REQUIRE(bids && gids && w1 && w2 && td && i1 && i2);
  cfg.alpha = 0.7;
  cfg.beta0 = 0.3;
  cfg.beta_steps = 20; /* annealed within the rounds */
  cfg.eps = eps;
  cfg.seed = 1234;
  cfg.flags = flags;
  big_cfg = cfg;
  big_cfg.capacity = C * (uint32_t)W;
  big_cfg.max_unique = big_cfg.capacity;
  cfg.max_unique = C;
  REQUIRE(per_mpi_init(&m, MPI_COMM_WORLD, &cfg, NULL) == PER_OK);
  REQUIRE(per_buffer_init(&big, &big_cfg, NULL) == PER_OK);
  /* two passes: rank r's slot j is slot r * C + j of the big buffer, at
     generation 2 */
  for (pass = 0; pass < 2; ++pass)
    for (r = 0; r < (uint32_t)W; ++r)
      for (j = 0; j < C; ++j) {
        item it = make_item(r, j, pass);
        REQUIRE(per_buffer_add(&big, &it) == PER_OK);
        if (r == (uint32_t)me) REQUIRE(per_buffer_add(&m.shard, &it) == PER_OK);
      }
  CHECK_EQ_U(per_mpi_size(&m), (uint64_t)C * (uint64_t)W);
  per_rng_init(&trng, 99); /* the same TD errors on every rank */
  for (round = 0; round < rounds; ++round) {
    uint32_t B = Bs[round % 4], stale_big = 0, stale = 0, n;
    int root = (int)(round % (uint32_t)(W + 1)) - 1; /* ALL, 0, 1, ... */
    int learner = root == PER_MPI_ALL ? (int)(round % (uint32_t)W) : root;
    int receive = root == PER_MPI_ALL || root == me;
    per_sample_opts o;
    const per_sample_opts *op = NULL;
    memset(&o, 0, sizeof o);
    if (round % 6 == 5) { /* a fixed beta now and then */
      o.flags = PER_SAMPLE_BETA;
      o.beta = 0.55;
      op = &o;
    }
    REQUIRE(per_buffer_sample(&big, B, op, i1, bids, w1) == PER_OK);
    memset(gids, 0, B * sizeof *gids);
    CHECK_OK(per_mpi_sample(&m, B, root, op, receive ? i2 : NULL,
                            receive ? gids : NULL, receive ? w2 : NULL));
    if (receive) {
      for (j = 0; j < B; ++j) {
        uint64_t slot = (uint32_t)gids[j].id + gids[j].rank * C;
        bad += slot != (uint32_t)bids[j] || gids[j].id >> 32 != bids[j] >> 32;
        bad_items += memcmp(&i1[j], &i2[j], sizeof(item)) != 0;
      }
      bad_w += memcmp(w1, w2, B * sizeof *w1) != 0;
    }
    CHECK_EQ_U(m.shard.rng.counter, big.rng.counter);
    CHECK_EQ_U(m.shard.step, big.step);
    /* now and then, rank 0 adds before the update: some drawn ids go
       stale and the new items get the agreed max_leaf */
    if (adds && round % 5 == 4 && added0 + 3 <= C) {
      for (j = 0; j < 3; ++j) {
        item it = make_item(0, added0 + j, 100 + round);
        REQUIRE(per_buffer_add(&big, &it) == PER_OK);
        if (me == 0) REQUIRE(per_buffer_add(&m.shard, &it) == PER_OK);
      }
      added0 += 3;
    }
    for (j = 0; j < B; ++j)
      td[j] = (float)(per_rng_double(&trng) * 4.0 - 2.0) *
              (j % 9 == 3 ? 0.0f : 1.0f);
    REQUIRE(per_buffer_update(&big, bids, td, B, &stale_big) == PER_OK);
    /* the learner (a receiving rank) sends the whole batch back */
    n = me == learner ? B : 0;
    CHECK_OK(per_mpi_update(&m, gids, td, n, &stale));
    CHECK_EQ_U(stale, stale_big);
    CHECK_MSG(m.shard.max_leaf == big.max_leaf, "max_leaf %g != %g",
              (double)m.shard.max_leaf, (double)big.max_leaf);
  }
  CHECK_EQ_U(bad, 0);
  CHECK_EQ_U(bad_items, 0);
  CHECK_EQ_U(bad_w, 0);
  for (j = 0, bad = 0; j < C; ++j)
    bad += per_tree_get(&m.shard.tree, j) !=
           per_tree_get(&big.tree, (uint32_t)me * C + j);
  CHECK_EQ_U(bad, 0);
  CHECK_OK(per_buffer_check(&m.shard));

  /* the uniform fallback: every leaf 0 (eps = 0), positions at 0 */
  if (eps == 0 && !adds) {
    uint32_t B = 100;
    zero_leaves(&m, &big);
    REQUIRE(per_buffer_sample(&big, B, NULL, i1, bids, w1) == PER_OK);
    CHECK_OK(per_mpi_sample(&m, B, PER_MPI_ALL, NULL, i2, gids, w2));
    for (j = 0, bad = 0; j < B; ++j)
      bad += (uint32_t)gids[j].id + gids[j].rank * C != (uint32_t)bids[j] ||
             w2[j] != 1.0f || memcmp(&i1[j], &i2[j], sizeof(item)) != 0;
    CHECK_EQ_U(bad, 0);
  }
  per_mpi_free(&m);
  per_buffer_free(&big);
  free(bids);
  free(gids);
  free(w1);
  free(w2);
  free(td);
  free(i1);
  free(i2);
}

/* ---- the uniform fallback against one buffer, with the ring wrapped ---- */

/* `adds` items in the slot order of one buffer of W * C: item a goes to
   its slot a % (W * C), which is rank r's slot j for r * C + j; every
   leaf then 0 (eps = 0), so both draw by the uniform fallback. The first
   `adds` below W * C leave the buffer not full; above 2 * W * C the
   write head is away from slot 0 (at slot adds % (W * C)). Two batches
   of each kind must be one buffer's bit for bit, with the same stream
   and step after them. */
static void uniform_one(uint32_t adds, uint64_t seed) {
  const uint32_t C = 64, B = 64;
  per_config cfg = per_config_default(C, sizeof(item)), big_cfg;
  per_mpi m;
  per_buffer big;
  uint32_t a, j, k, bad = 0, bad_items = 0, bad_w = 0;
  uint64_t bids[64];
  per_mpi_id gids[64];
  float w1[64], w2[64];
  item i1[64], i2[64];
  cfg.alpha = 0.7;
  cfg.eps = 0;
  cfg.seed = seed;
  big_cfg = cfg;
  big_cfg.capacity = C * (uint32_t)W;
  big_cfg.max_unique = big_cfg.capacity;
  REQUIRE(per_mpi_init(&m, MPI_COMM_WORLD, &cfg, NULL) == PER_OK);
  REQUIRE(per_buffer_init(&big, &big_cfg, NULL) == PER_OK);
  for (a = 0; a < adds; ++a) {
    uint32_t slot = a % (C * (uint32_t)W);
    item it = make_item(slot / C, slot % C, a);
    REQUIRE(per_buffer_add(&big, &it) == PER_OK);
    if (slot / C == (uint32_t)me)
      REQUIRE(per_buffer_add(&m.shard, &it) == PER_OK);
  }
  zero_leaves(&m, &big);
  for (k = 0; k < 2; ++k) {
    REQUIRE(per_buffer_sample(&big, B, NULL, i1, bids, w1) == PER_OK);
    memset(gids, 0, sizeof gids);
    CHECK_OK(per_mpi_sample(&m, B, PER_MPI_ALL, NULL, i2, gids, w2));
    for (j = 0; j < B; ++j) {
      bad += (uint32_t)gids[j].id + gids[j].rank * C != (uint32_t)bids[j] ||
             gids[j].id >> 32 != bids[j] >> 32;
      bad_items += memcmp(&i1[j], &i2[j], sizeof(item)) != 0;
      bad_w += w2[j] != 1.0f || w1[j] != 1.0f;
    }
    CHECK(memcmp(&m.shard.rng, &big.rng, sizeof big.rng) == 0);
    CHECK_EQ_U(m.shard.step, big.step);
  }
  CHECK_MSG(bad == 0, "uniform after %u adds (W = %d): %u of %u draws differ",
            adds, W, bad, 2 * B);
  CHECK_EQ_U(bad_items, 0);
  CHECK_EQ_U(bad_w, 0);
  CHECK_OK(per_buffer_check(&m.shard));
  per_mpi_free(&m);
  per_buffer_free(&big);
}

static void uniform_wrapped(void) {
  uint32_t WC = 64 * (uint32_t)W;
  uniform_one(WC / 2 + 7, 11);  /* not full: from slot 0 */
  uniform_one(2 * WC, 12);      /* full, the head at slot 0 */
  uniform_one(2 * WC + 3, 13);  /* the head in rank 0's shard */
  uniform_one(2 * WC + 69, 14); /* the head in rank 1's (rank 0's at W 1) */
  uniform_one(3 * WC - 1, 15);  /* the head in the last rank's */
}

/* ---- the law, for shards of different sizes ---- */

static void law(void) {
  /* rank r holds 5 + 3r items of leaves 1..5: P(i) = p_i / sum. Pearson's
     chi-square over every (rank, slot) cell, failing at p < 1e-6: a
     false-failure probability of at most 1e-6 (stratified draws vary
     less than independent ones, so the statistic only gets smaller). */
  const uint32_t B = 512, batches = 500;
  uint32_t cap = 5 + 3 * (uint32_t)me, cells = 0, r, j, k;
  per_config cfg = per_config_default(cap, sizeof(item));
  per_mpi m;
  static per_mpi_id ids[512];
  static float w[512], td[512];
  double *obs, *exp_, sum = 0;
  int s = PER_OK;
  for (r = 0; r < (uint32_t)W; ++r) cells += 5 + 3 * r;
  obs = (double *)calloc(cells, sizeof *obs);
  exp_ = (double *)calloc(cells, sizeof *exp_);
  REQUIRE(obs && exp_);
  cfg.alpha = 1;
  cfg.eps = 0;
  cfg.seed = 77;
  cfg.max_unique = cap;
  REQUIRE(per_mpi_init(&m, MPI_COMM_WORLD, &cfg, NULL) == PER_OK);
  for (j = 0; j < cap; ++j) {
    item it = make_item((uint32_t)me, j, 0);
    REQUIRE(per_buffer_add(&m.shard, &it) == PER_OK);
  }
  /* leaves 1 + (7r + j) % 5, set by the owners through the collective */
  for (j = 0; j < cap; ++j) {
    ids[0].rank = (uint64_t)me;
    ids[0].id = (uint64_t)j | ((uint64_t)1 << 32);
    td[0] = (float)(1 + (7 * (uint32_t)me + j) % 5);
    REQUIRE(per_mpi_update(&m, ids, td, 1, NULL) == PER_OK);
  }
  /* a collective: ranks with fewer items take part with nothing */
  for (; j < 5 + 3 * (uint32_t)(W - 1); ++j)
    REQUIRE(per_mpi_update(&m, ids, td, 0, NULL) == PER_OK);
  for (r = 0, k = 0; r < (uint32_t)W; ++r)
    for (j = 0; j < 5 + 3 * r; ++j, ++k) {
      exp_[k] = 1 + (7 * r + j) % 5;
      sum += exp_[k];
    }
  for (k = 0; k < cells; ++k) exp_[k] *= (double)B * batches / sum;
  for (j = 0; j < batches; ++j) {
    float wmax = 0;
    s = per_mpi_sample(&m, B, 0, NULL, NULL, me == 0 ? ids : NULL,
                       me == 0 ? w : NULL);
    if (s != PER_OK) break;
    if (me != 0) continue;
    for (k = 0; k < B; ++k) {
      uint32_t cell = 0;
      for (r = 0; r < ids[k].rank; ++r) cell += 5 + 3 * r;
      obs[cell + (uint32_t)ids[k].id] += 1;
      if (w[k] > wmax) wmax = w[k];
    }
    if (wmax != 1.0f) s = PER_ERR_CORRUPT;
  }
  check_all(s, PER_OK, "law: sampling");
  if (me == 0) {
    double p = chi2_p(chi2_stat(obs, exp_, (int)cells), cells - 1.0);
    CHECK_MSG(p > 1e-6, "law: chi-square p = %g over %u cells", p, cells);
  }
  per_mpi_free(&m);
  free(obs);
  free(exp_);
}

/* ---- errors: the same status everywhere, nothing changed ---- */

static void errors(void) {
  per_config cfg = per_config_default(32, sizeof(item));
  per_mpi m;
  per_mpi_id ids[4];
  float td[4] = {1, 2, 3, 4};
  per_sample_opts o;
  uint64_t h;
  uint32_t j;
  int last = W - 1;
  cfg.seed = 5;
  /* init: one rank's config differs, or one rank's is invalid */
  {
    per_config c2 = cfg;
    if (me == last) c2.alpha = 0.5;
    check_all(per_mpi_init(&m, MPI_COMM_WORLD, &c2, NULL),
              W > 1 ? PER_ERR_ARG : PER_OK, "init: configs differ");
    if (W == 1) per_mpi_free(&m);
    c2 = cfg;
    if (me == last) c2.capacity = 0;
    check_all(per_mpi_init(&m, MPI_COMM_WORLD, &c2, NULL), PER_ERR_CAPACITY,
              "init: a zero capacity");
    c2 = cfg;
    if (me == 0) c2.seq_len = 4, c2.seq_stride = 4;
    check_all(per_mpi_init(&m, MPI_COMM_WORLD, &c2, NULL), PER_ERR_ARG,
              "init: sequences");
    check_all(per_mpi_init(&m, MPI_COMM_WORLD, me == last ? NULL : &cfg, NULL),
              PER_ERR_NULL, "init: a NULL config");
  }
  REQUIRE(per_mpi_init(&m, MPI_COMM_WORLD, &cfg, NULL) == PER_OK);
  check_all(per_mpi_sample(&m, 4, 0, NULL, NULL, NULL, NULL), PER_ERR_EMPTY,
            "sample: every shard empty");
  for (j = 0; j < 8; ++j) {
    item it = make_item((uint32_t)me, j, 0);
    REQUIRE(per_buffer_add(&m.shard, &it) == PER_OK);
  }
  h = shard_hash(&m.shard);
  check_all(per_mpi_sample(&m, me == last ? 5 : 4, 0, NULL, NULL, NULL, NULL),
            W > 1 ? PER_ERR_ARG : PER_OK, "sample: B differs");
  if (W == 1) h = shard_hash(&m.shard);
  check_all(per_mpi_sample(&m, me == last ? 0 : 4, 0, NULL, NULL, NULL, NULL),
            PER_ERR_BATCH, "sample: B = 0 on one rank");
  check_all(per_mpi_sample(&m, 4, me == last ? W : 0, NULL, NULL, NULL, NULL),
            PER_ERR_ARG, "sample: root outside");
  memset(&o, 0, sizeof o);
  o.flags = me == last ? PER_SAMPLE_UNIQUE : 0;
  check_all(per_mpi_sample(&m, 4, 0, &o, NULL, NULL, NULL), PER_ERR_ARG,
            "sample: unique");
  o.flags = 0;
  o.window = me == last ? 5 : 0; /* windows are not supported */
  check_all(per_mpi_sample(&m, 4, 0, &o, NULL, NULL, NULL), PER_ERR_ARG,
            "sample: a window");
  o.window = 0;
  o.flags = PER_SAMPLE_BETA;
  o.beta = me == last ? -1.0 : 0.5;
  check_all(per_mpi_sample(&m, 4, 0, &o, NULL, NULL, NULL), PER_ERR_ARG,
            "sample: a negative beta");
  check_all(shard_hash(&m.shard) == h ? PER_OK : PER_ERR_CORRUPT, PER_OK,
            "sample errors change nothing");

  /* updates: rank 0 sends a valid id to every rank, plus one bad thing */
  for (j = 0; j < 3; ++j) {
    ids[j].rank = (uint64_t)(j % (uint32_t)W);
    ids[j].id = (uint64_t)j | ((uint64_t)1 << 32);
  }
  ids[3] = ids[0];
  td[3] = me == last ? NAN : 1.0f;
  check_all(per_mpi_update(&m, ids, td, 4, NULL), PER_ERR_NAN,
            "update: a NaN on one rank");
  td[3] = me == last ? INFINITY : 1.0f;
  check_all(per_mpi_update(&m, ids, td, 4, NULL), PER_ERR_INF,
            "update: an infinity on one rank");
  td[3] = 1.0f;
  ids[3].rank = me == last ? (uint64_t)W : 0;
  check_all(per_mpi_update(&m, ids, td, 4, NULL), PER_ERR_INDEX,
            "update: a rank outside");
  /* found only by the owner: a generation never handed out */
  ids[3].rank = (uint64_t)last;
  ids[3].id = me == 0 ? (uint64_t)2 | ((uint64_t)7 << 32)
                      : (uint64_t)2 | ((uint64_t)1 << 32);
  check_all(per_mpi_update(&m, ids, td, 4, NULL), PER_ERR_INDEX,
            "update: an id its owner never handed out");
  ids[3].id = (uint64_t)40; /* slot beyond the shard */
  check_all(per_mpi_update(&m, ids, td, me == last ? 4 : 3, NULL),
            PER_ERR_INDEX, "update: a slot beyond the owner's shard");
  check_all(per_mpi_update(&m, me == 0 ? NULL : ids, td, 2, NULL), PER_ERR_NULL,
            "update: NULL ids on one rank");
  check_all(shard_hash(&m.shard) == h ? PER_OK : PER_ERR_CORRUPT, PER_OK,
            "update errors change nothing");
  check_all(per_mpi_update(&m, ids, td, 3, NULL), PER_OK, "update: valid");
  check_all(shard_hash(&m.shard) != h || me >= 3 ? PER_OK : PER_ERR_CORRUPT,
            PER_OK, "a valid update changes the owners' leaves");
  check_all(per_mpi_sample(&m, 4, PER_MPI_ALL, NULL, NULL, NULL, NULL), PER_OK,
            "sample after the errors");
  CHECK_EQ_U(per_mpi_size(&m), 8 * (uint64_t)W);
  per_mpi_free(&m);
  CHECK_EQ_U(per_mpi_size(&m), 0);
  CHECK_STATUS(per_mpi_sample(NULL, 4, 0, NULL, NULL, NULL, NULL),
               PER_ERR_NULL);
  CHECK_STATUS(per_mpi_update(NULL, ids, td, 1, NULL), PER_ERR_NULL);
}

/* ---- checkpoints: the same world size and every other ---- */

/* One stored item as the test compares them: the item, its leaf's bits
   and its episode end. */
typedef struct saved {
  item it;
  double leaf;
  uint32_t end, pad;
} saved;

/* Every shard's items oldest first, ranks in order, on rank 0 of m's
   communicator (*n of them; NULL elsewhere). */
static saved *collect(const per_mpi *m, uint32_t *n) {
  const per_buffer *b = &m->shard;
  uint32_t cap = b->cfg.capacity, start = (b->pos + cap - b->size) % cap, i;
  int mine = (int)(b->size * sizeof(saved)), *cnt = NULL, *dsp = NULL, r;
  saved *out = NULL, *loc = (saved *)calloc(b->size + 1, sizeof *loc);
  REQUIRE(loc);
  for (i = 0; i < b->size; ++i) {
    uint32_t slot = (start + i) % cap;
    memcpy(&loc[i].it, b->items + (size_t)slot * sizeof(item), sizeof(item));
    loc[i].leaf = (double)per_tree_get(&b->tree, slot);
    loc[i].end = b->ends[slot];
  }
  if (m->rank == 0) {
    cnt = (int *)malloc((size_t)m->world * sizeof *cnt);
    dsp = (int *)malloc((size_t)m->world * sizeof *dsp);
    REQUIRE(cnt && dsp);
  }
  MPI_Gather(&mine, 1, MPI_INT, cnt, 1, MPI_INT, 0, m->comm);
  if (m->rank == 0) {
    int off = 0;
    for (r = 0; r < m->world; ++r) dsp[r] = off, off += cnt[r];
    out = (saved *)malloc((size_t)off + 1);
    REQUIRE(out);
    *n = (uint32_t)(off / (int)sizeof(saved));
  }
  MPI_Gatherv(loc, mine, MPI_BYTE, out, cnt, dsp, MPI_BYTE, 0, m->comm);
  free(loc);
  free(cnt);
  free(dsp);
  return out;
}

/* The sums of added and trajs over m's ranks. */
static void counters(const per_mpi *m, uint64_t *sum) {
  uint64_t mine[2];
  mine[0] = m->shard.added;
  mine[1] = m->shard.trajs;
  MPI_Allreduce(mine, sum, 2, MPI_UINT64_T, MPI_SUM, m->comm);
}

static int file_exists(const char *name) {
  FILE *f = fopen(name, "rb");
  if (f) fclose(f);
  return f != NULL;
}

/* The config of the test's shards: capacity cap, the rest alike. */
static per_config ck_cfg(uint32_t cap) {
  per_config c = per_config_default(cap, sizeof(item));
  c.alpha = 0.8;
  c.beta0 = 0.4;
  c.beta_steps = 50;
  c.seed = 4242;
  c.flags = PER_WEIGHTS_BUFFER_MAX;
  c.max_unique = cap;
  return c;
}

/* A sharded replay with history on comm (ws ranks): rank q holds up to
   16 + 8q items after 20 + 5q adds (ranks 0 and 1 wrapped), one episode
   end every 4 steps, and 6 rounds of sample and update. */
static void ck_fill(per_mpi *m, MPI_Comm comm) {
  per_config c = ck_cfg(16 + 8 * (uint32_t)me);
  per_mpi_id ids[16];
  float td[16];
  uint32_t j, k;
  REQUIRE(per_mpi_init(m, comm, &c, NULL) == PER_OK);
  for (j = 0; j < 20 + 5 * (uint32_t)me; ++j) {
    item it = make_item((uint32_t)me, j, 7);
    REQUIRE(per_buffer_add_step(&m->shard, &it,
                                j % 4 == 3 ? PER_END_TERMINATED
                                           : PER_END_NONE) == PER_OK);
  }
  for (k = 0; k < 6; ++k) {
    REQUIRE(per_mpi_sample(m, 16, PER_MPI_ALL, NULL, NULL, ids, NULL) ==
            PER_OK);
    for (j = 0; j < 16; ++j) td[j] = 0.25f * (float)((j * 7 + k) % 13);
    REQUIRE(per_mpi_update(m, ids, td, m->rank == 0 ? 16 : 0, NULL) == PER_OK);
  }
}

/* Save on the first ws ranks, load on the first wl: every item once, in
   order, with its leaf and end; the shared state and the counters'
   sums as saved; at ws == wl the same state and the same next batches
   as the saved replay. */
static void ck_round(int ws, int wl, const char *path) {
  MPI_Comm cs, cl;
  per_mpi ms, ml;
  saved *before = NULL, *after = NULL;
  uint32_t nb = 0, na = 0;
  uint64_t sb[2], sa[2];
  MPI_Comm_split(MPI_COMM_WORLD, me < ws ? 0 : MPI_UNDEFINED, me, &cs);
  MPI_Comm_split(MPI_COMM_WORLD, me < wl ? 0 : MPI_UNDEFINED, me, &cl);
  memset(&ms, 0, sizeof ms);
  if (me < ws) {
    ck_fill(&ms, cs);
    check_on(cs, per_mpi_save(&ms, path), PER_OK, "save");
    before = collect(&ms, &nb);
    counters(&ms, sb);
  }
  MPI_Bcast(&nb, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
  MPI_Bcast(sb, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (me < wl) {
    /* another world size: room for any block */
    per_config c = ck_cfg(ws == wl ? 16 + 8 * (uint32_t)me : 128);
    per_rng rng;
    uint64_t step;
    double mx;
    c.alpha = 0.3; /* alpha, beta, seed and the stream come from the file */
    c.seed = 1;
    REQUIRE(per_mpi_init(&ml, cl, &c, NULL) == PER_OK);
    check_on(cl, per_mpi_load(&ml, path), PER_OK, "load");
    after = collect(&ml, &na);
    counters(&ml, sa);
    CHECK_OK(per_buffer_check(&ml.shard));
    if (me == 0) {
      CHECK_EQ_U(na, nb);
      CHECK_MSG(na == nb && memcmp(before, after, na * sizeof *after) == 0,
                "saved at %d, loaded at %d: the items differ", ws, wl);
    }
    CHECK_EQ_U(sa[0], sb[0]);
    CHECK_EQ_U(sa[1], sb[1]);
    /* the shared state, as rank 0 saved it */
    rng = ml.shard.rng;
    step = ml.shard.step;
    mx = (double)ml.shard.max_leaf;
    if (me == 0) {
      rng = ms.shard.rng;
      step = ms.shard.step;
      mx = (double)ms.shard.max_leaf;
    }
    MPI_Bcast(&rng, (int)sizeof rng, MPI_BYTE, 0, cl);
    MPI_Bcast(&step, 1, MPI_UINT64_T, 0, cl);
    MPI_Bcast(&mx, 1, MPI_DOUBLE, 0, cl);
    CHECK(memcmp(&rng, &ml.shard.rng, sizeof rng) == 0);
    CHECK_EQ_U(ml.shard.step, step);
    CHECK_EQ_F(ml.shard.max_leaf, (per_real)mx);
    CHECK_EQ_F(ml.shard.cfg.alpha, 0.8);
    CHECK_EQ_U(ml.shard.cfg.seed, 4242);
    if (ws == wl) { /* the same replay: the next batches bit for bit */
      per_mpi_id i1[32], i2[32];
      float w1[32], w2[32];
      item t1[32], t2[32];
      uint32_t k;
      CHECK(memcmp(ml.shard.gen, ms.shard.gen,
                   ms.shard.cfg.capacity * sizeof(uint32_t)) == 0);
      CHECK_EQ_U(ml.shard.pos, ms.shard.pos);
      for (k = 0; k < 3; ++k) {
        float td[32];
        uint32_t j;
        CHECK_OK(per_mpi_sample(&ms, 32, PER_MPI_ALL, NULL, t1, i1, w1));
        CHECK_OK(per_mpi_sample(&ml, 32, PER_MPI_ALL, NULL, t2, i2, w2));
        CHECK(memcmp(i1, i2, sizeof i1) == 0);
        CHECK(memcmp(w1, w2, sizeof w1) == 0);
        CHECK(memcmp(t1, t2, sizeof t1) == 0);
        for (j = 0; j < 32; ++j) td[j] = (float)j * 0.1f;
        CHECK_OK(per_mpi_update(&ms, i1, td, me == 0 ? 32 : 0, NULL));
        CHECK_OK(per_mpi_update(&ml, i2, td, me == 0 ? 32 : 0, NULL));
      }
    } else { /* a re-shard samples and updates as any replay */
      per_mpi_id ids[32];
      float td[32];
      uint32_t j;
      CHECK_OK(per_mpi_sample(&ml, 32, 0, NULL, NULL, ids, NULL));
      for (j = 0; j < 32; ++j) td[j] = 1.0f;
      CHECK_OK(per_mpi_update(&ml, ids, td, me == 0 ? 32 : 0, NULL));
      CHECK_OK(per_buffer_check(&ml.shard));
    }
    per_mpi_free(&ml);
    MPI_Comm_free(&cl);
  }
  if (me < ws) {
    per_mpi_free(&ms);
    MPI_Comm_free(&cs);
  }
  free(before);
  free(after);
}

/* Rank 0 damages the file `target` (k 0: its middle byte flipped; 1: its
   last byte, the CRC, flipped; 2: moved away), or with undo repairs it
   (a flip is its own inverse); then every rank waits for it. */
static void damage(const char *target, int k, int undo) {
  static unsigned char buf[65536];
  if (me == 0 && k == 2) {
    REQUIRE(undo ? rename("moved-away", target) == 0
                 : rename(target, "moved-away") == 0);
  } else if (me == 0) {
    size_t n;
    FILE *f = fopen(target, "rb");
    REQUIRE(f);
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    REQUIRE(n > 0 && n < sizeof buf);
    buf[k == 0 ? n / 2 : n - 1] ^= 0x20;
    f = fopen(target, "wb");
    REQUIRE(f && fwrite(buf, 1, n, f) == n);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Saves replace the previous checkpoint's files; bad input, missing and
   damaged files fail on every rank with every shard unchanged. */
static void ck_errors(const char *path) {
  per_mpi m, m2;
  per_config c;
  char name[256], other[256];
  uint64_t h;
  int last = W - 1, k;
  snprintf(other, sizeof other, "%s-elsewhere", path);
  if (me == 0) { /* saves numbered from 1 */
    remove(path);
    remove(other);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  ck_fill(&m, MPI_COMM_WORLD);
  check_all(per_mpi_save(&m, path), PER_OK, "save 1");
  check_all(per_mpi_save(&m, path), PER_OK, "save 2");
  snprintf(name, sizeof name, "%s.1.%d", path, me);
  check_all(file_exists(name) ? PER_ERR_IO : PER_OK, PER_OK,
            "save 2 removed save 1's files");
  snprintf(name, sizeof name, "%s.2.%d", path, me);
  check_all(file_exists(name) ? PER_OK : PER_ERR_IO, PER_OK,
            "save 2's files are there");
  /* a save cut short before its manifest: files no manifest names */
  snprintf(other, sizeof other, "%s.3.%d", path, me);
  {
    FILE *f = fopen(other, "wb");
    REQUIRE(f);
    fputs("left by a crash", f);
    fclose(f);
  }
  h = shard_hash(&m.shard);
  check_all(per_mpi_load(&m, path), PER_OK, "load save 2 beside stray files");
  check_all(shard_hash(&m.shard) == h ? PER_OK : PER_ERR_CORRUPT, PER_OK,
            "load of the state it holds");
  check_all(per_mpi_save(&m, path), PER_OK, "save 3 over the stray files");
  snprintf(name, sizeof name, "%s.2.%d", path, me);
  check_all(file_exists(name) ? PER_ERR_IO : PER_OK, PER_OK,
            "save 3 removed save 2's files");
  /* bad arguments (with W == 1 the save to `other` is one) */
  snprintf(other, sizeof other, "%s-elsewhere", path);
  check_all(per_mpi_save(&m, me == last ? other : path),
            W > 1 ? PER_ERR_ARG : PER_OK, "save: paths differ");
  check_all(per_mpi_save(&m, me == last ? NULL : path), PER_ERR_NULL,
            "save: a NULL path");
  check_all(per_mpi_save(&m, "no-such-dir/ck"), PER_ERR_IO,
            "save: no directory");
  h = shard_hash(&m.shard);
  check_all(per_mpi_load(&m, me == last ? other : path),
            W > 1 ? PER_ERR_ARG : PER_OK, "load: paths differ");
  check_all(per_mpi_load(&m, me == last ? NULL : path), PER_ERR_NULL,
            "load: a NULL path");
  check_all(per_mpi_load(&m, "no-such-dir/ck"), PER_ERR_IO,
            "load: no manifest");
  check_all(shard_hash(&m.shard) == h ? PER_OK : PER_ERR_CORRUPT, PER_OK,
            "failed loads change nothing");
  /* another capacity at the same world size; too small for a block */
  c = ck_cfg(me == last ? 64 : 16 + 8 * (uint32_t)me);
  REQUIRE(per_mpi_init(&m2, MPI_COMM_WORLD, &c, NULL) == PER_OK);
  check_all(per_mpi_load(&m2, path), PER_ERR_MISMATCH,
            "load: another capacity");
  per_mpi_free(&m2);
  c = ck_cfg(8);
  {
    MPI_Comm one;
    MPI_Comm_split(MPI_COMM_WORLD, me == 0 ? 0 : MPI_UNDEFINED, me, &one);
    if (me == 0) {
      REQUIRE(per_mpi_init(&m2, one, &c, NULL) == PER_OK);
      CHECK_STATUS(per_mpi_load(&m2, path), PER_ERR_MISMATCH);
      c = ck_cfg(128);
      c.item_size = 4;
      per_mpi_free(&m2);
      REQUIRE(per_mpi_init(&m2, one, &c, NULL) == PER_OK);
      CHECK_STATUS(per_mpi_load(&m2, path), PER_ERR_MISMATCH);
      per_mpi_free(&m2);
      MPI_Comm_free(&one);
    }
  }
  /* damaged files: a byte of the manifest; the last rank's shard file
     with another CRC (not the file the manifest names), then gone */
  for (k = 0; k < 3; ++k) {
    char target[256];
    if (k == 0) snprintf(target, sizeof target, "%s", path);
    else snprintf(target, sizeof target, "%s.3.%d", path, last);
    damage(target, k, 0);
    h = shard_hash(&m.shard);
    check_all(per_mpi_load(&m, path),
              k == 0 ? PER_ERR_CHECKSUM
                     : (k == 1 ? PER_ERR_CHECKSUM : PER_ERR_IO),
              k == 0 ? "load: a damaged manifest"
                     : (k == 1 ? "load: a damaged shard file"
                               : "load: a missing shard file"));
    check_all(shard_hash(&m.shard) == h ? PER_OK : PER_ERR_CORRUPT, PER_OK,
              "a refused load changes nothing");
    damage(target, k, 1);
  }
  check_all(per_mpi_load(&m, path), PER_OK, "load once repaired");
  per_mpi_free(&m);
}

/* Every save and load pair of world sizes 1..W, then the errors. */
static void checkpoints(void) {
  char path[128];
  int ws, wl, k;
  snprintf(path, sizeof path, "mpi_ck_%s_%d",
           sizeof(per_real) == 8 ? "double" : "float", W);
  for (ws = 1; ws <= W; ++ws)
    for (wl = 1; wl <= W; ++wl) ck_round(ws, wl, path);
  ck_errors(path);
  /* leave nothing behind */
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 0) {
    char name[160];
    remove(path);
    for (k = 0; k < (W * W + 8) * W; ++k) {
      snprintf(name, sizeof name, "%s.%d.%d", path, k / W + 1, k % W);
      remove(name);
    }
    snprintf(name, sizeof name, "%s-elsewhere", path);
    remove(name);
    snprintf(name, sizeof name, "%s-elsewhere.1.0", path); /* W == 1 */
    remove(name);
  }
}

int main(int argc, char **argv) {
  int rc, pow2;
  char name[64];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  pow2 = (W & (W - 1)) == 0;
  if (pow2) { /* bit for bit: W and C powers of two */
    equivalence(0, 1e-3, 1);
    equivalence(PER_WEIGHTS_BUFFER_MAX, 1e-3, 1);
    equivalence(0, 0, 0);
    uniform_wrapped();
  }
  law();
  errors();
  checkpoints();
  CHECK_MSG(t_default_heap.live == 0, "%ld blocks of per's not freed",
            t_default_heap.live);
  snprintf(name, sizeof name, "mpi rank %d of %d (%s)", me, W,
           sizeof(per_real) == 8 ? "double" : "float");
  rc = t_done(name);
  MPI_Finalize();
  return rc;
}
