// cuda_buffer_cases.h - per_cuda_buffer against per_buffer: random sequences
// of add_batch / sample / update calls run on both, every status, id, item,
// weight and stale count compared, and the whole state after a download.
// Shared by the host build (test_cuda_host.cpp) and the GPU test binary.
//
// Needs before it: cuda_cases.h. The kernels and the CPU share per.h's
// pow (peri_pow), so everything must be bitwise equal, at every alpha, in
// the host build and on a GPU alike.
#ifndef PER_CUDA_BUFFER_CASES_H
#define PER_CUDA_BUFFER_CASES_H

// Evidence, printed by cb_run_all.
static unsigned long long cb_calls, cb_draws, cb_states;
// Of them: sequences drawn, update_seq calls applied, and sequence
// states compared with a valid sequence in them.
static unsigned long long cb_seq_draws, cb_seq_updates, cb_seq_states;

// A device buffer with device arrays for one call's inputs and outputs.
struct cb_dev {
  per_cuda_buffer b;
  void *mem;
  unsigned char *d_in, *d_out; // items in (adds) and out (samples)
  uint8_t *d_ends, *d_mask;
  uint64_t *d_ids;
  float *d_td, *d_w;
  uint32_t *d_stale;
  unsigned long long *d_status;
};

// Rows of a call: max_batch, times seq_len with sequences (a sample's
// steps, an update_seq's TD errors).
static uint32_t cb_rows(const per_config *cfg, uint32_t max_batch) {
  return max_batch * (cfg->seq_len ? cfg->seq_len : 1u);
}

static int cb_dev_make(cb_dev *d, const per_config *cfg, uint32_t max_batch) {
  size_t bytes = per_cuda_buffer_bytes(cfg, max_batch);
  size_t rows = cb_rows(cfg, max_batch);
  memset(d, 0, sizeof *d);
  CHECK(bytes > 0);
  if (bytes == 0) return 0;
  d->mem = cc_dmalloc(bytes);
  d->d_in = (unsigned char *)cc_dmalloc((size_t)max_batch * cfg->item_size);
  d->d_out = (unsigned char *)cc_dmalloc(rows * cfg->item_size);
  d->d_ends = (uint8_t *)cc_dmalloc(max_batch);
  d->d_mask = (uint8_t *)cc_dmalloc(rows);
  d->d_ids = (uint64_t *)cc_dmalloc((size_t)max_batch * 8);
  d->d_td = (float *)cc_dmalloc(rows * 4);
  d->d_w = (float *)cc_dmalloc((size_t)max_batch * 4);
  d->d_stale = (uint32_t *)cc_dmalloc(8);
  d->d_status = (unsigned long long *)cc_dmalloc(8);
  if (!d->mem || !d->d_in || !d->d_out || !d->d_ends || !d->d_mask ||
      !d->d_ids || !d->d_td || !d->d_w || !d->d_stale || !d->d_status)
    return 0;
  CHECK_OK(per_cuda_buffer_init_mem(&d->b, cfg, max_batch, d->mem, bytes,
                                    cc_stream));
  return d->b.d_items != NULL;
}

static void cb_dev_free(cb_dev *d) {
  void *p[] = {d->mem,   d->d_in, d->d_out, d->d_ends,  d->d_mask,
               d->d_ids, d->d_td, d->d_w,   d->d_stale, d->d_status};
  size_t i;
  for (i = 0; i < sizeof p / sizeof p[0]; ++i) cudaFree(p[i]);
  memset(d, 0, sizeof *d);
}

// The status a device call reported, as the CPU's per_status.
static per_status cb_status(const cb_dev *d) {
  return per_cuda_status_decode(cc_status_word(d->d_status), NULL);
}

// Every field of two buffers' state: arrays byte for byte, then scalars.
static void cb_same_state(const char *what, const per_buffer *a,
                          const per_buffer *b) {
  uint32_t cap = a->cfg.capacity;
  size_t tb = per_tree_bytes(cap);
  ++cb_states;
  CHECK_MSG(memcmp(a->items, b->items, (size_t)cap * a->cfg.item_size) == 0,
            "%s: items differ", what);
  CHECK_MSG(memcmp(a->gen, b->gen, (size_t)cap * 4) == 0,
            "%s: generations differ", what);
  CHECK_MSG(memcmp(a->ends, b->ends, cap) == 0, "%s: ends differ", what);
  CHECK_MSG(memcmp(a->traj, b->traj, (size_t)cap * 4) == 0,
            "%s: trajectory ids differ", what);
  cc_same_tree(what, &a->tree, b->tree.node);
  CHECK_MSG((a->min_node == NULL) == (b->min_node == NULL) &&
                (!a->min_node || memcmp(a->min_node, b->min_node, tb) == 0),
            "%s: min trees differ", what);
  CHECK_MSG(memcmp(&a->rng, &b->rng, sizeof a->rng) == 0,
            "%s: streams differ (counter %llu vs %llu, avail %u vs %u)", what,
            (unsigned long long)a->rng.counter,
            (unsigned long long)b->rng.counter, a->rng.avail, b->rng.avail);
  CHECK_EQ_U(a->step, b->step);
  CHECK_EQ_U(a->added, b->added);
  CHECK_EQ_U(a->trajs, b->trajs);
  CHECK_MSG(memcmp(&a->max_leaf, &b->max_leaf, sizeof a->max_leaf) == 0,
            "%s: max leaf %.17g vs %.17g", what, (double)a->max_leaf,
            (double)b->max_leaf);
  CHECK_EQ_U(a->size, b->size);
  CHECK_EQ_U(a->pos, b->pos);
  CHECK_EQ_U(a->zero_hint, b->zero_hint);
  if (a->swap.perm && b->swap.perm) {
    CHECK_EQ_U(a->swap.n, b->swap.n);
    CHECK(memcmp(a->swap.perm, b->swap.perm, (size_t)cap * 4) == 0);
  }
  CHECK_MSG((a->seq_ok == NULL) == (b->seq_ok == NULL), "%s: sequences", what);
  if (a->seq_ok && b->seq_ok) {
    uint32_t ns = a->seq_tree.capacity;
    size_t sb = per_tree_bytes(ns);
    cb_seq_states += memchr(a->seq_ok, 1, ns) != NULL;
    cc_same_tree(what, &a->seq_tree, b->seq_tree.node);
    CHECK_MSG(memcmp(a->seq_ok, b->seq_ok, ns) == 0,
              "%s: sequence flags differ", what);
    CHECK_MSG((a->seq_min_node == NULL) == (b->seq_min_node == NULL) &&
                  (!a->seq_min_node ||
                   memcmp(a->seq_min_node, b->seq_min_node, sb) == 0),
              "%s: sequence min trees differ", what);
  }
}

// Download d into a fresh per_buffer of cpu's config and compare.
static void cb_compare(const char *what, const per_buffer *cpu, cb_dev *d) {
  per_buffer h;
  size_t la = 0, lb = 0, n;
  unsigned char *sa, *sb;
  per_cuda_counters *d_c = (per_cuda_counters *)cc_dmalloc(sizeof *d_c), c;
  CHECK_OK(per_buffer_init(&h, &cpu->cfg, NULL));
  CHECK_OK(per_cuda_buffer_download(&d->b, &h, cc_stream));
  cb_same_state(what, cpu, &h);
  // the counters alone, without a download
  if (d_c) {
    CHECK_OK(per_cuda_buffer_counters(&d->b, d_c, cc_stream));
    cc_d2h(&c, d_c, sizeof c);
    CHECK_EQ_U(c.size, cpu->size);
    CHECK_EQ_U(c.pos, cpu->pos);
    CHECK_EQ_U(c.added, cpu->added);
    CHECK_EQ_U(c.trajs, cpu->trajs);
    CHECK_EQ_U(c.step, cpu->step);
    CHECK(c.max_leaf == (double)cpu->max_leaf);
    CHECK_STATUS(per_cuda_buffer_counters(&d->b, NULL, cc_stream),
                 PER_ERR_NULL);
    CHECK_STATUS(
        per_cuda_buffer_counters(
            &d->b, (per_cuda_counters *)(void *)((char *)d_c + 4), cc_stream),
        PER_ERR_MEMORY);
    cudaFree(d_c);
  }
  // and the checkpoints the two would write
  n = per_buffer_snapshot_bytes(cpu);
  sa = (unsigned char *)malloc(n);
  sb = (unsigned char *)malloc(n);
  if (sa && sb) {
    CHECK_OK(per_buffer_snapshot(cpu, sa, n, &la));
    CHECK_OK(per_buffer_snapshot(&h, sb, n, &lb));
    CHECK_MSG(la == lb && memcmp(sa, sb, la) == 0, "%s: checkpoints differ",
              what);
  }
  free(sa);
  free(sb);
  per_buffer_free(&h);
}

// A TD error: mostly ordinary, sometimes 0, tiny, huge, NaN or infinite
// (bad_per_mille of them not finite).
static float cb_td(per_rng *r, uint32_t bad_per_mille) {
  uint32_t k = per_rng_below(r, 1000);
  if (k < bad_per_mille) return k % 2 ? NAN : -INFINITY;
  k = per_rng_below(r, 16);
  if (k == 0) return 0.0f;
  if (k == 1) return -0.0f;
  if (k == 2) return 1e-30f;
  if (k == 3) return 3e38f;
  return (per_rng_float(r) - 0.5f) * (float)ldexp(1.0, (int)k - 8);
}

struct cb_host { // the host side of one call
  unsigned char *items, *out_cpu, *out_dev;
  uint8_t *ends, *mask_cpu, *mask_dev;
  uint64_t *ids, *ids_dev;
  float *td, *w_cpu, *w_dev;
  int seq_ids; // ids holds the last sample's sequence ids
};

// Host arrays for calls of up to max_batch items of isz bytes (rows:
// cb_rows, a sample's steps or an update_seq's TD errors).
static int cb_host_make(cb_host *h, uint32_t max_batch, uint32_t rows,
                        size_t isz) {
  int ok;
  h->items = (unsigned char *)malloc(max_batch * isz);
  h->out_cpu = (unsigned char *)malloc(rows * isz);
  h->out_dev = (unsigned char *)malloc(rows * isz);
  h->ends = (uint8_t *)malloc(max_batch);
  h->mask_cpu = (uint8_t *)malloc(rows);
  h->mask_dev = (uint8_t *)malloc(rows);
  h->ids = (uint64_t *)malloc((size_t)max_batch * 8);
  h->ids_dev = (uint64_t *)malloc((size_t)max_batch * 8);
  h->td = (float *)malloc((size_t)rows * 4);
  h->w_cpu = (float *)malloc((size_t)max_batch * 4);
  h->w_dev = (float *)malloc((size_t)max_batch * 4);
  h->seq_ids = 0;
  ok = h->items && h->out_cpu && h->out_dev && h->ends && h->mask_cpu &&
       h->mask_dev && h->ids && h->ids_dev && h->td && h->w_cpu && h->w_dev;
  CHECK(ok);
  return ok;
}

static void cb_host_free(cb_host *h) {
  free(h->items);
  free(h->out_cpu);
  free(h->out_dev);
  free(h->ends);
  free(h->mask_cpu);
  free(h->mask_dev);
  free(h->ids);
  free(h->ids_dev);
  free(h->td);
  free(h->w_cpu);
  free(h->w_dev);
  memset(h, 0, sizeof *h);
}

static void cb_add(per_buffer *cpu, cb_dev *d, cb_host *h, per_rng *r,
                   uint32_t max_batch) {
  uint32_t n = per_rng_below(r, 8) == 0 ? 0 : 1 + per_rng_below(r, max_batch);
  uint32_t isz = cpu->cfg.item_size, j;
  int with_ends = per_rng_below(r, 2) == 0;
  per_status want;
  for (j = 0; j < n * isz; ++j) h->items[j] = (unsigned char)per_rng_u32(r);
  for (j = 0; j < n; ++j) {
    uint32_t k = per_rng_below(r, 10);
    h->ends[j] = k < 7 ? 0 : k < 9 ? (uint8_t)(k - 6) : 0;
  }
  if (with_ends && n > 0 && per_rng_below(r, 10) == 0)
    h->ends[per_rng_below(r, n)] = 3; // refused
  if (n) cc_h2d(d->d_in, h->items, (size_t)n * isz);
  if (n) cc_h2d(d->d_ends, h->ends, n);
  want = per_buffer_add_steps(cpu, h->items, n, with_ends ? h->ends : NULL);
  CHECK_OK(per_cuda_buffer_add_batch(
      &d->b, d->d_in, n, with_ends ? d->d_ends : NULL, d->d_status, cc_stream));
  CHECK_STATUS(cb_status(d), want);
  ++cb_calls;
}

// A sample of B with options o on both; returns B on success (its ids
// are in h->ids), else 0.
static uint32_t cb_sample_opts(per_buffer *cpu, cb_dev *d, cb_host *h,
                               uint32_t B, const per_sample_opts *opts) {
  uint32_t isz = cpu->cfg.item_size, j;
  int seq = (opts->flags & PER_SAMPLE_SEQUENCES) != 0;
  size_t rows = (size_t)B * (seq ? cpu->cfg.seq_len : 1u);
  per_sample_opts o = *opts;
  per_status want;
  if (seq) o.mask = h->mask_cpu;
  want = per_buffer_sample(cpu, B, &o, h->out_cpu, h->ids, h->w_cpu);
  if (seq) o.mask = d->d_mask;
  CHECK_OK(per_cuda_buffer_sample(&d->b, B, &o, d->d_out, d->d_ids, d->d_w,
                                  d->d_status, cc_stream));
  CHECK_STATUS(cb_status(d), want);
  ++cb_calls;
  h->seq_ids = 0;
  if (want != PER_OK) return 0;
  h->seq_ids = seq;
  if (seq) {
    cb_seq_draws += B;
    cc_d2h(h->mask_dev, d->d_mask, rows);
    CHECK_MSG(memcmp(h->mask_cpu, h->mask_dev, rows) == 0,
              "masks of %u sequences differ", B);
  }
  cc_d2h(h->out_dev, d->d_out, rows * isz);
  cc_d2h(h->ids_dev, d->d_ids, (size_t)B * 8);
  cc_d2h(h->w_dev, d->d_w, (size_t)B * 4);
  cb_draws += B;
  for (j = 0; j < B; ++j) {
    CHECK_MSG(h->ids[j] == h->ids_dev[j],
              "draw %u of %u: id %llx (cpu) vs %llx (device)", j, B,
              (unsigned long long)h->ids[j], (unsigned long long)h->ids_dev[j]);
    CHECK_MSG(cc_ulps_f(h->w_cpu[j], h->w_dev[j]) == 0,
              "draw %u of %u: weight %.9g (cpu) vs %.9g (device)", j, B,
              (double)h->w_cpu[j], (double)h->w_dev[j]);
    if (h->ids[j] != h->ids_dev[j]) break;
  }
  CHECK(memcmp(h->out_cpu, h->out_dev, rows * isz) == 0);
  return B;
}

// A random sample: batch size, window, trajectories, beta, distinct.
static uint32_t cb_sample(per_buffer *cpu, cb_dev *d, cb_host *h, per_rng *r,
                          uint32_t max_batch) {
  uint32_t B = 1 + per_rng_below(r, max_batch);
  per_sample_opts o;
  memset(&o, 0, sizeof o);
  if (per_rng_below(r, 3) == 0)
    o.window = 1 + per_rng_below(r, 2 * cpu->cfg.capacity);
  if (o.window && per_rng_below(r, 2)) o.flags |= PER_SAMPLE_TRAJECTORIES;
  if (per_rng_below(r, 4) == 0) {
    o.flags |= PER_SAMPLE_BETA;
    o.beta = per_rng_below(r, 3) == 0 ? 0.0 : 2 * per_rng_double(r);
  }
  if (per_rng_below(r, 3) == 0) { // distinct: B <= max_unique
    o.flags |= PER_SAMPLE_UNIQUE;
    if (B > cpu->cfg.max_unique) B = 1 + per_rng_below(r, cpu->cfg.max_unique);
  }
  if (cpu->cfg.seq_len && per_rng_below(r, 4) != 0)
    o.flags |= PER_SAMPLE_SEQUENCES;
  return cb_sample_opts(cpu, d, h, B, &o);
}

// An update of the n pairs in h->ids, h->td on both.
static void cb_update_pairs(per_buffer *cpu, cb_dev *d, cb_host *h,
                            uint32_t n) {
  uint32_t stale_cpu = 0xdeadu, stale_dev = 0xbeefu;
  per_status want;
  if (n) cc_h2d(d->d_ids, h->ids, (size_t)n * 8);
  if (n) cc_h2d(d->d_td, h->td, (size_t)n * 4);
  cc_h2d(d->d_stale, &stale_dev, 4);
  want = per_buffer_update(cpu, h->ids, h->td, n, &stale_cpu);
  CHECK_OK(per_cuda_buffer_update(&d->b, d->d_ids, d->d_td, n, d->d_stale,
                                  d->d_status, cc_stream));
  CHECK_STATUS(cb_status(d), want);
  cc_d2h(&stale_dev, d->d_stale, 4);
  CHECK_EQ_U(stale_dev, want == PER_OK ? stale_cpu : 0xbeefu);
  ++cb_calls;
}

// An update_seq of the n sequence ids in h->ids (TD errors h->td, n *
// seq_len of them) on both.
static void cb_update_seq_ids(per_buffer *cpu, cb_dev *d, cb_host *h,
                              uint32_t n) {
  uint32_t stale_cpu = 0xdeadu, stale_dev = 0xbeefu, len = cpu->cfg.seq_len;
  per_status want;
  if (n) cc_h2d(d->d_ids, h->ids, (size_t)n * 8);
  if (n) cc_h2d(d->d_td, h->td, (size_t)n * len * 4);
  cc_h2d(d->d_stale, &stale_dev, 4);
  want = per_buffer_update_seq(cpu, h->ids, h->td, n, &stale_cpu);
  CHECK_OK(per_cuda_buffer_update_seq(&d->b, d->d_ids, d->d_td, n, d->d_stale,
                                      d->d_status, cc_stream));
  CHECK_STATUS(cb_status(d), want);
  cc_d2h(&stale_dev, d->d_stale, 4);
  CHECK_EQ_U(stale_dev, want == PER_OK ? stale_cpu : 0xbeefu);
  ++cb_calls;
  cb_seq_updates += want == PER_OK && n > stale_cpu;
}

// Update the sequences of the last sample (or made-up sequence ids),
// sometimes with a bad TD error or a bad id.
static void cb_update_seq(per_buffer *cpu, cb_dev *d, cb_host *h, per_rng *r,
                          uint32_t max_batch, uint32_t have) {
  uint32_t n = per_rng_below(r, 8) == 0 ? 0 : 1 + per_rng_below(r, max_batch);
  uint32_t j, cap = cpu->cfg.capacity, st = cpu->cfg.seq_stride;
  uint32_t len = cpu->cfg.seq_len;
  for (j = 0; j < n; ++j) {
    if (have && per_rng_below(r, 6) != 0) {
      h->ids[j] = h->ids[per_rng_below(r, have)];
    } else { // a sequence start, its generation, one older or (rarely) bad
      uint32_t slot = per_rng_below(r, cap / st) * st, g = cpu->gen[slot];
      uint32_t k = per_rng_below(r, 24);
      if (k == 0) g += 1;                   // never handed out
      else if (k == 1 && st > 1) slot += 1; // not a sequence start
      else if (k < 8 && g > 1) g -= 1;      // stale
      h->ids[j] = (uint64_t)slot | (uint64_t)g << 32 | PER_ID_SEQ;
    }
  }
  for (j = 0; j < n * len; ++j) h->td[j] = cb_td(r, 1);
  cb_update_seq_ids(cpu, d, h, n);
}

// Update the ids of the last sample (or made-up ones), sometimes with a
// bad TD error or a bad id.
static void cb_update(per_buffer *cpu, cb_dev *d, cb_host *h, per_rng *r,
                      uint32_t max_batch, uint32_t have) {
  uint32_t n = per_rng_below(r, 8) == 0 ? 0 : 1 + per_rng_below(r, max_batch);
  uint32_t j, cap = cpu->cfg.capacity;
  if (h->seq_ids) { // a sequence sample's ids go to update_seq
    if (per_rng_below(r, 5) != 0) {
      cb_update_seq(cpu, d, h, r, max_batch, have);
      return;
    }
    have = 0;
  } else if (cpu->cfg.seq_len && per_rng_below(r, 3) == 0) {
    cb_update_seq(cpu, d, h, r, max_batch, 0);
    return;
  }
  for (j = 0; j < n; ++j) {
    if (have && per_rng_below(r, 8) != 0) {
      h->ids[j] = h->ids[per_rng_below(r, have)];
    } else { // any slot, its generation, one older or (rarely) bad
      uint32_t slot = per_rng_below(r, cap), g = cpu->gen[slot];
      uint32_t k = per_rng_below(r, 20);
      if (k == 0) g += 1;          // newer than the slot's: never handed out
      else if (k == 1) slot = cap; // outside the ring
      else if (k < 8 && g > 1) g -= 1; // stale
      h->ids[j] = (uint64_t)slot | (uint64_t)g << 32;
      if (k == 8) h->ids[j] |= PER_ID_SEQ; // a sequence's id: refused
    }
    h->td[j] = cb_td(r, 3);
  }
  cb_update_pairs(cpu, d, h, n);
}

// One random sequence of `ops` calls on a CPU buffer and a device buffer
// of config cfg, compared call by call and, every so often, whole.
static void cb_sequence(const per_config *cfg, uint32_t max_batch, uint32_t ops,
                        uint64_t seed) {
  per_buffer cpu;
  cb_dev d;
  cb_host h;
  per_rng r;
  uint32_t i, have = 0, fails = t_fail_count;
  size_t isz = cfg->item_size;
  char what[160];
  memset(&h, 0, sizeof h);
  if (!cb_dev_make(&d, cfg, max_batch)) return;
  CHECK_OK(per_buffer_init(&cpu, cfg, NULL));
  REQUIRE(cb_host_make(&h, max_batch, cb_rows(cfg, max_batch), isz));
  per_rng_init(&r, seed);
  snprintf(what, sizeof what,
           "capacity %u, item %u bytes, alpha %g, eps %g, flags %u, seq_len "
           "%u, seq_stride %u, seed %llu",
           cfg->capacity, cfg->item_size, cfg->alpha, cfg->eps, cfg->flags,
           cfg->seq_len, cfg->seq_stride, (unsigned long long)seed);
  cb_compare(what, &cpu, &d); // the empty buffers
  for (i = 0; i < ops && t_fail_count == fails; ++i) {
    uint32_t k = per_rng_below(&r, 10);
    if (k < 4) {
      cb_add(&cpu, &d, &h, &r, max_batch);
    } else if (k < 7) {
      have = cb_sample(&cpu, &d, &h, &r, max_batch);
    } else {
      cb_update(&cpu, &d, &h, &r, max_batch, have);
      have = 0;
    }
    if (i % 16 == 15) cb_compare(what, &cpu, &d);
  }
  cb_compare(what, &cpu, &d);
  if (t_fail_count != fails) printf("  (failed in: %s, op %u)\n", what, i);
  // upload the CPU state into a second device buffer: the same state
  {
    cb_dev e;
    if (cb_dev_make(&e, cfg, max_batch)) {
      CHECK_OK(per_cuda_buffer_upload(&e.b, &cpu, cc_stream));
      cb_compare("after an upload", &cpu, &e);
      cb_sample(&cpu, &e, &h, &r, max_batch); // and it goes on the same
      cb_compare("after an upload and a sample", &cpu, &e);
    }
    cb_dev_free(&e);
  }
  per_buffer_free(&cpu);
  cb_dev_free(&d);
  cb_host_free(&h);
}

// >>case: bitwise against per_buffer over random call sequences
static void cb_case_bitwise(void) {
  static const uint32_t caps[] = {1, 2, 7, 64, 1000};
  // copies of 1-, 8-, 4- and 16-byte units (3 of them a row at 48)
  static const uint32_t sizes[] = {1, 8, 12, 48};
  static const double alphas[] = {0.6, 0.0, 1.0};
  uint32_t c, a, f;
  uint64_t seed = 1;
  for (c = 0; c < sizeof caps / sizeof caps[0]; ++c)
    for (a = 0; a < sizeof alphas / sizeof alphas[0]; ++a)
      for (f = 0; f < 4; ++f) {
        per_config cfg = per_config_default(caps[c], sizes[(c + f) % 4]);
        uint32_t mb = caps[c] < 64 ? 2 * caps[c] + 3 : 300;
        cfg.alpha = alphas[a];
        cfg.seed = seed * 77;
        cfg.beta_steps = 20;
        cfg.flags = (f & 1) ? PER_WEIGHTS_BUFFER_MAX : 0;
        cfg.eps = (f & 2) ? 0.0 : 1e-3; // eps 0: zero leaves, degenerate mass
        // distinct draws: up to the whole buffer (repeats, the fallback,
        // too few), or a repeat limit of 4
        cfg.max_unique = (f & 1) ? (caps[c] < 4 ? caps[c] : 4)
                                 : (caps[c] < mb ? caps[c] : mb);
        cb_sequence(&cfg, mb, 80, seed++);
      }
}

// >>case: sequence replay (R2D2) bitwise against per_buffer over random
// call sequences: sequence samples (items, ids, weights, masks), item
// and sequence updates (update_seq), and after every add and update the
// sequence tree, its validity flags and min tree, compared with each
// state. Short and long sequences, strides that overlap and that do not,
// episodes crossed or not, buffer-max weights, zero leaves, alpha 0.
static void cb_case_seq(void) {
  static const uint32_t caps[] = {6, 64, 100};
  static const uint32_t shapes[][2] = {{1, 1}, {3, 1}, {4, 2}, {5, 5}, {6, 3}};
  uint32_t c, k, f;
  uint64_t seed = 500;
  for (c = 0; c < sizeof caps / sizeof caps[0]; ++c)
    for (k = 0; k < sizeof shapes / sizeof shapes[0]; ++k)
      for (f = 0; f < 4; ++f) {
        per_config cfg = per_config_default(caps[c], 4 + 4 * (f & 1));
        uint32_t mb = caps[c] < 20 ? 9 : 24;
        if (caps[c] % shapes[k][1] != 0 || shapes[k][0] > caps[c]) continue;
        cfg.seq_len = shapes[k][0];
        cfg.seq_stride = shapes[k][1];
        cfg.alpha = f == 3 ? 0.0 : 0.6;
        cfg.eps = f == 2 ? 0.0 : 1e-3; // eps 0: zero leaves
        cfg.seed = seed * 31;
        cfg.beta_steps = 20;
        cfg.seq_eta = f == 1 ? 1.0 : 0.9;
        cfg.flags = ((f & 1) ? PER_WEIGHTS_BUFFER_MAX : 0) |
                    ((f & 2) ? PER_SEQ_CROSS_EPISODES : 0);
        cfg.max_unique = (f & 1) ? 4 : mb < caps[c] ? mb : caps[c];
        cb_sequence(&cfg, mb, 80, seed++);
      }
}

// >>case: what the device buffer refuses, and init's errors
static void cb_case_api(void) {
  per_config cfg = per_config_default(100, 8);
  per_sample_opts o;
  cfg.max_unique = 10;
  cb_dev d;
  size_t bytes = per_cuda_buffer_bytes(&cfg, 64);
  per_cuda_buffer b;
  unsigned long long *mis;
  CHECK(bytes > 0);
  CHECK_EQ_U(per_cuda_buffer_bytes(&cfg, 0), 0);
  CHECK_EQ_U(per_cuda_buffer_bytes(&cfg, PER_CUDA_MAX_BATCH + 1), 0);
  CHECK_EQ_U(per_cuda_buffer_bytes(NULL, 64), 0);
  cfg.seq_len = 4; // an update_seq's max_batch * seq_len TD errors: too many
  cfg.seq_stride = 4;
  CHECK(per_cuda_buffer_bytes(&cfg, PER_CUDA_MAX_BATCH / 4) > 0);
  CHECK_EQ_U(per_cuda_buffer_bytes(&cfg, PER_CUDA_MAX_BATCH / 4 + 1), 0);
  CHECK_STATUS(per_cuda_buffer_init_mem(&b, &cfg, PER_CUDA_MAX_BATCH / 4 + 1,
                                        (void *)256, 1 << 20, cc_stream),
               PER_ERR_BATCH);
  cfg.seq_len = 0;
  cfg.seq_stride = 0;
  cfg.flags = PER_MAX_LIVE; // not on the device
  CHECK_EQ_U(per_cuda_buffer_bytes(&cfg, 64), 0);
  CHECK_STATUS(
      per_cuda_buffer_init_mem(&b, &cfg, 64, (void *)256, 1 << 20, cc_stream),
      PER_ERR_ARG);
  CHECK(b.d_items == NULL);
  cfg.flags = 0;
  cfg.capacity = 0;
  CHECK_STATUS(
      per_cuda_buffer_init_mem(&b, &cfg, 64, (void *)256, 1 << 20, cc_stream),
      PER_ERR_CAPACITY);
  cfg.capacity = 100;
  CHECK_STATUS(
      per_cuda_buffer_init_mem(&b, &cfg, 0, (void *)256, 1 << 20, cc_stream),
      PER_ERR_BATCH);
  CHECK_STATUS(per_cuda_buffer_init_mem(&b, &cfg, 64, NULL, bytes, cc_stream),
               PER_ERR_NULL);
  CHECK_STATUS(
      per_cuda_buffer_init_mem(&b, &cfg, 64, (void *)256, bytes - 1, cc_stream),
      PER_ERR_MEMORY);
  CHECK_STATUS(
      per_cuda_buffer_init_mem(&b, &cfg, 64, (void *)264, bytes, cc_stream),
      PER_ERR_MEMORY);
  if (!cb_dev_make(&d, &cfg, 64)) return;
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_UNIQUE; // B <= max_batch but > config max_unique
  CHECK_STATUS(per_cuda_buffer_sample(&d.b, 11, &o, NULL, d.d_ids, NULL,
                                      d.d_status, cc_stream),
               PER_ERR_BATCH);
  CHECK_OK(per_cuda_buffer_sample(&d.b, 10, &o, NULL, d.d_ids, NULL, d.d_status,
                                  cc_stream));
  CHECK_STATUS(cb_status(&d), PER_ERR_EMPTY);
  o.flags = PER_SAMPLE_SEQUENCES;
  CHECK_STATUS(per_cuda_buffer_sample(&d.b, 4, &o, NULL, d.d_ids, NULL,
                                      d.d_status, cc_stream),
               PER_ERR_ARG);
  o.flags = PER_SAMPLE_BETA;
  o.beta = -1;
  CHECK_STATUS(per_cuda_buffer_sample(&d.b, 4, &o, NULL, d.d_ids, NULL,
                                      d.d_status, cc_stream),
               PER_ERR_ARG);
  CHECK_STATUS(per_cuda_buffer_sample(&d.b, 0, NULL, NULL, d.d_ids, NULL,
                                      d.d_status, cc_stream),
               PER_ERR_BATCH);
  CHECK_STATUS(per_cuda_buffer_sample(&d.b, 65, NULL, NULL, d.d_ids, NULL,
                                      d.d_status, cc_stream),
               PER_ERR_BATCH);
  CHECK_STATUS(
      per_cuda_buffer_add_batch(&d.b, d.d_in, 65, NULL, d.d_status, cc_stream),
      PER_ERR_BATCH);
  CHECK_STATUS(per_cuda_buffer_update(&d.b, d.d_ids, d.d_td, 65, NULL,
                                      d.d_status, cc_stream),
               PER_ERR_BATCH);
  mis = (unsigned long long *)((char *)d.d_status + 4);
  CHECK_STATUS(per_cuda_buffer_add_batch(&d.b, d.d_in, 1, NULL, mis, cc_stream),
               PER_ERR_MEMORY);
  CHECK_STATUS(per_cuda_buffer_update(&d.b, (const uint64_t *)(d.d_in + 1),
                                      d.d_td, 1, NULL, d.d_status, cc_stream),
               PER_ERR_MEMORY);
  CHECK_STATUS(
      per_cuda_buffer_add_batch(&d.b, NULL, 1, NULL, d.d_status, cc_stream),
      PER_ERR_NULL);
  // sampling an empty buffer: PER_ERR_EMPTY on the device, nothing moves
  CHECK_OK(per_cuda_buffer_sample(&d.b, 4, NULL, NULL, d.d_ids, NULL,
                                  d.d_status, cc_stream));
  CHECK_STATUS(cb_status(&d), PER_ERR_EMPTY);
  {
    per_buffer cpu, other;
    per_config c2 = cfg;
    CHECK_OK(per_buffer_init(&cpu, &cfg, NULL));
    cb_compare("after a refused sample", &cpu, &d);
    c2.item_size = 4;
    CHECK_OK(per_buffer_init(&other, &c2, NULL));
    CHECK_STATUS(per_cuda_buffer_download(&d.b, &other, cc_stream),
                 PER_ERR_ARG);
    CHECK_STATUS(per_cuda_buffer_upload(&d.b, &other, cc_stream), PER_ERR_ARG);
    per_buffer_free(&other);
    per_buffer_free(&cpu);
  }
  cb_dev_free(&d);
}

// >>case: a trainer's step (add, sample, update) captured once per buffer
// as a CUDA graph and replayed, three buffers (one with sequences) on
// three streams with their replays interleaved: every replay gives what
// per_buffer's three calls give (statuses, ids, items, weights, stale
// counts), and the states stay equal. The graph freezes the batch sizes
// and pointers only; the items and TD errors change between replays
// through the device arrays, and halfway an upload of a state with other
// alpha, eps, beta schedule and eta changes what the same graphs do.
static void cb_case_graph(void) {
  enum { NB = 3, ADD = 5, B = 7, MAXB = 16, REPLAYS = 40 };
  cudaStream_t s[NB];
  cudaGraphExec_t exec[NB];
  cb_dev d[NB];
  cb_host h[NB];
  per_buffer cpu[NB];
  unsigned long long *d_st[NB]; // the three calls' status words
  per_rng r;
  uint32_t k, i, j, replays = 0;
  memset(d, 0, sizeof d);
  memset(h, 0, sizeof h);
  memset(exec, 0, sizeof exec);
  per_rng_init(&r, 2024);
  for (k = 0; k < NB; ++k) {
    per_config cfg = per_config_default(k ? 64 : 50, k ? 12 : 8);
    cudaGraph_t g = NULL;
    cfg.alpha = k ? 0.6 : 1.0;
    cfg.seed = 11 + k;
    cfg.beta_steps = 30;
    cfg.flags = k == 1 ? PER_WEIGHTS_BUFFER_MAX : 0;
    if (k == 2) { // sequences, refreshed with eta by every add and update
      cfg.seq_len = 4;
      cfg.seq_stride = 2;
    }
    REQUIRE(cudaStreamCreate(&s[k]) == cudaSuccess);
    REQUIRE(cb_dev_make(&d[k], &cfg, MAXB));
    REQUIRE(cb_host_make(&h[k], MAXB, MAXB, cfg.item_size));
    d_st[k] = (unsigned long long *)cc_dmalloc(3 * 8);
    REQUIRE(d_st[k] != NULL);
    CHECK_OK(per_buffer_init(&cpu[k], &cfg, NULL));
    REQUIRE(cudaStreamSynchronize(cc_stream) == cudaSuccess); // the init
    CHECK_EQ_U(cudaStreamBeginCapture(s[k], cudaStreamCaptureModeThreadLocal),
               cudaSuccess);
    CHECK_OK(per_cuda_buffer_add_batch(&d[k].b, d[k].d_in, ADD, NULL,
                                       &d_st[k][0], s[k]));
    CHECK_OK(per_cuda_buffer_sample(&d[k].b, B, NULL, d[k].d_out, d[k].d_ids,
                                    d[k].d_w, &d_st[k][1], s[k]));
    CHECK_OK(per_cuda_buffer_update(&d[k].b, d[k].d_ids, d[k].d_td, B,
                                    d[k].d_stale, &d_st[k][2], s[k]));
    CHECK_EQ_U(cudaStreamEndCapture(s[k], &g), cudaSuccess);
    REQUIRE(g != NULL);
    CHECK_EQ_U(cudaGraphInstantiate(&exec[k], g, 0), cudaSuccess);
    cudaGraphDestroy(g);
    REQUIRE(exec[k] != NULL);
    cb_compare("captured, not replayed", &cpu[k], &d[k]); // nothing ran
  }
  for (i = 0; i < REPLAYS && t_fail_count == 0; ++i) {
    if (i == REPLAYS / 2)        // a checkpoint with another config: the graphs
      for (k = 0; k < NB; ++k) { // take its alpha, eps, betas and eta
        per_config oc = cpu[k].cfg;
        per_buffer other;
        uint32_t stale = 0;
        char path[64];
        oc.alpha = k ? 0.9 : 0.5;
        oc.eps = 0.25;
        oc.beta0 = 0.7;
        oc.beta1 = 0.2;
        oc.beta_steps = 7;
        oc.seq_eta = 0.3;
        oc.seed = 99;
        snprintf(path, sizeof path, "cb_graph_%u_%u.ckpt",
                 (unsigned)sizeof(per_real), k);
        REQUIRE(per_buffer_init(&other, &oc, NULL) == PER_OK);
        for (j = 0; j < 3 * MAXB * oc.item_size; ++j)
          h[k].items[j % (MAXB * oc.item_size)] = (unsigned char)j;
        for (j = 0; j < 3; ++j) {
          CHECK_OK(per_buffer_add_steps(&other, h[k].items, MAXB, NULL));
          CHECK_OK(per_buffer_sample(&other, B, NULL, h[k].out_cpu, h[k].ids,
                                     h[k].w_cpu));
          for (uint32_t t = 0; t < B; ++t) h[k].td[t] = cb_td(&r, 0);
          CHECK_OK(per_buffer_update(&other, h[k].ids, h[k].td, B, &stale));
        }
        CHECK_OK(per_buffer_save(&other, path));
        CHECK_OK(per_buffer_load(&cpu[k], path));
        remove(path);
        per_buffer_free(&other);
        REQUIRE(cudaStreamSynchronize(s[k]) == cudaSuccess);
        CHECK_OK(per_cuda_buffer_upload(&d[k].b, &cpu[k], s[k]));
        // (cb_compare downloads on another stream)
        REQUIRE(cudaStreamSynchronize(s[k]) == cudaSuccess);
        cb_compare("uploaded with another config", &cpu[k], &d[k]);
      }
    for (k = 0; k < NB; ++k) { // enqueue every replay, then look
      size_t isz = cpu[k].cfg.item_size;
      for (j = 0; j < ADD * isz; ++j)
        h[k].items[j] = (unsigned char)per_rng_u32(&r);
      for (j = 0; j < B; ++j) h[k].td[j] = cb_td(&r, 0);
      cc_h2d(d[k].d_in, h[k].items, ADD * isz);
      cc_h2d(d[k].d_td, h[k].td, B * 4);
      CHECK_EQ_U(cudaGraphLaunch(exec[k], s[k]), cudaSuccess);
    }
    for (k = 0; k < NB; ++k) {
      size_t isz = cpu[k].cfg.item_size;
      unsigned long long st[3];
      uint32_t stale_cpu = 0, stale_dev = 0;
      CHECK_EQ_U(cudaStreamSynchronize(s[k]), cudaSuccess);
      CHECK_OK(per_buffer_add_steps(&cpu[k], h[k].items, ADD, NULL));
      CHECK_OK(per_buffer_sample(&cpu[k], B, NULL, h[k].out_cpu, h[k].ids,
                                 h[k].w_cpu));
      CHECK_OK(per_buffer_update(&cpu[k], h[k].ids, h[k].td, B, &stale_cpu));
      cc_d2h(st, d_st[k], sizeof st);
      cc_d2h(h[k].out_dev, d[k].d_out, B * isz);
      cc_d2h(h[k].ids_dev, d[k].d_ids, B * 8);
      cc_d2h(h[k].w_dev, d[k].d_w, B * 4);
      cc_d2h(&stale_dev, d[k].d_stale, 4);
      for (j = 0; j < 3; ++j)
        CHECK_STATUS(per_cuda_status_decode(st[j], NULL), PER_OK);
      CHECK(memcmp(h[k].ids, h[k].ids_dev, B * 8) == 0);
      CHECK(memcmp(h[k].out_cpu, h[k].out_dev, B * isz) == 0);
      for (j = 0; j < B; ++j)
        CHECK_MSG(cc_ulps_f(h[k].w_cpu[j], h[k].w_dev[j]) == 0,
                  "replay %u, buffer %u, draw %u: weight %.9g vs %.9g", i, k, j,
                  (double)h[k].w_cpu[j], (double)h[k].w_dev[j]);
      CHECK_EQ_U(stale_dev, stale_cpu);
      cb_draws += B;
      cb_calls += 3;
      if (i % 10 == 9) cb_compare("replayed graph", &cpu[k], &d[k]);
    }
    ++replays;
  }
  CHECK_EQ_U(replays, REPLAYS);
  for (k = 0; k < NB; ++k) {
    if (exec[k]) cudaGraphExecDestroy(exec[k]);
    cudaStreamDestroy(s[k]);
    cudaFree(d_st[k]);
    per_buffer_free(&cpu[k]);
    cb_dev_free(&d[k]);
    cb_host_free(&h[k]);
  }
}

// >>case: distinct draws down every path of per_buffer_sample's, each
// certain here (not left to the random sequences): the fallback after too
// many repeats, too few positive leaves (whole buffer and window), a
// window, the swap permutation of alpha = 0 (kept across calls and
// compared after each), and Floyd's uniform picks of degenerate mass.
static void cb_case_unique(void) {
  enum { CAP = 64, MAXB = 64 };
  static const double alphas[] = {1.0, 0.0};
  uint32_t a, j;
  for (a = 0; a < 2; ++a) {
    per_config cfg = per_config_default(CAP, 4);
    per_buffer cpu;
    cb_dev d;
    cb_host h;
    per_sample_opts o;
    char what[96];
    cfg.alpha = alphas[a];
    cfg.eps = 0; // zero TD errors make zero leaves
    cfg.seed = 99 + a;
    cfg.max_unique = CAP; // the repeat limit: 64 repeats, then the fallback
    memset(&h, 0, sizeof h);
    memset(&o, 0, sizeof o);
    REQUIRE(cb_dev_make(&d, &cfg, MAXB));
    CHECK_OK(per_buffer_init(&cpu, &cfg, NULL));
    REQUIRE(cb_host_make(&h, MAXB, MAXB, cfg.item_size));
    for (j = 0; j < CAP * 4; ++j) h.items[j] = (unsigned char)(j * 7u);
    CHECK_OK(per_buffer_add_steps(&cpu, h.items, CAP, NULL));
    CHECK_OK(per_cuda_buffer_add_batch(&d.b, d.d_in, 0, NULL, d.d_status,
                                       cc_stream));
    cc_h2d(d.d_in, h.items, CAP * 4);
    CHECK_OK(per_cuda_buffer_add_batch(&d.b, d.d_in, CAP, NULL, d.d_status,
                                       cc_stream));
    CHECK_STATUS(cb_status(&d), PER_OK);
    snprintf(what, sizeof what, "distinct draws, alpha %g", cfg.alpha);
    o.flags = PER_SAMPLE_UNIQUE;
    if (a == 1) { // alpha 0: the swap permutation, call after call
      static const uint32_t Bs[] = {64, 10, 1, 33, 64, 7};
      for (j = 0; j < sizeof Bs / sizeof Bs[0]; ++j) {
        CHECK_EQ_U(cb_sample_opts(&cpu, &d, &h, Bs[j], &o), Bs[j]);
        cb_compare(what, &cpu, &d);
      }
      o.window = 40; // a window of alpha 0: each pick zeroed
      CHECK_EQ_U(cb_sample_opts(&cpu, &d, &h, 40, &o), 40);
      CHECK_EQ_U(cb_sample_opts(&cpu, &d, &h, 41, &o), 0); // too few
      cb_compare(what, &cpu, &d);
    } else {
      // leaf 0 holds nearly all the mass, 1 .. 39 a little, 40 .. 63 none
      for (j = 0; j < CAP; ++j) {
        h.ids[j] = (uint64_t)j | (uint64_t)cpu.gen[j] << 32;
        h.td[j] = j == 0 ? 1e6f : j < 40 ? 1e-3f : 0.0f;
      }
      cb_update_pairs(&cpu, &d, &h, CAP);
      // 40 picks: leaf 0 at once, then repeats of it until the fallback
      CHECK_EQ_U(cb_sample_opts(&cpu, &d, &h, 40, &o), 40);
      for (j = 0; j < 40; ++j) CHECK((uint32_t)h.ids[j] < 40);
      CHECK_EQ_U(cb_sample_opts(&cpu, &d, &h, 41, &o), 0); // too few
      cb_compare(what, &cpu, &d);
      o.window = 50; // slots 14 .. 63: 26 with mass
      CHECK_EQ_U(cb_sample_opts(&cpu, &d, &h, 20, &o), 20);
      CHECK_EQ_U(cb_sample_opts(&cpu, &d, &h, 27, &o), 0); // too few
      cb_compare(what, &cpu, &d);
      // every leaf 0: degenerate mass, Floyd's picks over the window
      for (j = 0; j < CAP; ++j) {
        h.ids[j] = (uint64_t)j | (uint64_t)cpu.gen[j] << 32;
        h.td[j] = 0.0f;
      }
      cb_update_pairs(&cpu, &d, &h, CAP);
      CHECK_EQ_U(cb_sample_opts(&cpu, &d, &h, 50, &o), 50);
      CHECK_EQ_U(cb_sample_opts(&cpu, &d, &h, 51, &o), 0); // too few
      o.window = 0;
      CHECK_EQ_U(cb_sample_opts(&cpu, &d, &h, 64, &o), 64);
      cb_compare(what, &cpu, &d);
    }
    { // max_unique stays each side's own: what its memory was sized for
      per_config c8 = cfg;
      per_buffer small;
      c8.max_unique = 8;
      CHECK_OK(per_buffer_init(&small, &c8, NULL));
      CHECK_OK(per_cuda_buffer_download(&d.b, &small, cc_stream));
      CHECK_EQ_U(small.cfg.max_unique, 8);
      CHECK_STATUS(per_buffer_sample(&small, 9, &o, NULL, NULL, NULL),
                   PER_ERR_BATCH);
      CHECK_OK(per_cuda_buffer_upload(&d.b, &small, cc_stream));
      CHECK_EQ_U(d.b.cfg.max_unique, CAP);
      per_buffer_free(&small);
    }
    per_buffer_free(&cpu);
    cb_dev_free(&d);
    cb_host_free(&h);
  }
}

// >>case: degenerate mass without distinct draws: the uniform draws
// block 0's threads make together (per_cuda.cu's peri_cuda_uniform_draws),
// bitwise against per_buffer: batches within one round of 1024 words, at
// its edge and over several rounds; the whole ring and windows that wrap;
// sequences from a rank table of 313 chunks (more than a lane each), some
// of them invalid, and none valid at all. The whole state, the stream's
// place in its block included, is compared after every sample.
static void cb_uniform_fill(per_buffer *cpu, cb_dev *d, cb_host *h, uint32_t n,
                            uint32_t maxb, uint32_t end_every) {
  uint32_t done = 0, j;
  while (done < n) {
    uint32_t k = n - done < maxb ? n - done : maxb;
    for (j = 0; j < k * cpu->cfg.item_size; ++j)
      h->items[j] = (unsigned char)(j * 13u + done);
    for (j = 0; j < k; ++j)
      h->ends[j] = (done + j) % end_every == end_every - 1;
    cc_h2d(d->d_in, h->items, (size_t)k * cpu->cfg.item_size);
    cc_h2d(d->d_ends, h->ends, k);
    CHECK_OK(per_buffer_add_steps(cpu, h->items, k, h->ends));
    CHECK_OK(per_cuda_buffer_add_batch(&d->b, d->d_in, k, d->d_ends,
                                       d->d_status, cc_stream));
    CHECK_STATUS(cb_status(d), PER_OK);
    done += k;
  }
  for (done = 0; done < cpu->cfg.capacity; done += maxb) { // every leaf 0
    uint32_t k =
        cpu->cfg.capacity - done < maxb ? cpu->cfg.capacity - done : maxb;
    for (j = 0; j < k; ++j) {
      h->ids[j] = (uint64_t)(done + j) | (uint64_t)cpu->gen[done + j] << 32;
      h->td[j] = 0.0f;
    }
    cb_update_pairs(cpu, d, h, k);
  }
}

// Both sides of cfg and the host arrays for batches of maxb, filled by
// cb_uniform_fill: the ring wrapped, an end every end_every, every leaf 0.
static void cb_make_filled(const per_config *cfg, uint32_t maxb,
                           uint32_t end_every, per_buffer *cpu, cb_dev *d,
                           cb_host *h) {
  memset(h, 0, sizeof *h);
  REQUIRE(cb_dev_make(d, cfg, maxb));
  CHECK_OK(per_buffer_init(cpu, cfg, NULL));
  REQUIRE(cb_host_make(h, maxb, cb_rows(cfg, maxb), cfg->item_size));
  cb_uniform_fill(cpu, d, h, cfg->capacity + cfg->capacity / 3, maxb,
                  end_every);
}

static void cb_case_uniform(void) {
  enum { MAXB = 1100 };
  static const uint32_t Bs[] = {1, 255, 1024, 1025, 1100, 257};
  static const uint32_t shapes[][4] = {
      // capacity, seq_len, seq_stride, an episode end every this many steps
      {3000, 0, 0, 1000},
      {10000, 4, 1, 13},
      {64, 4, 1, 2}}; // every sequence crosses an end: none valid
  uint32_t c, b, v;
  for (c = 0; c < sizeof shapes / sizeof shapes[0]; ++c) {
    per_config cfg = per_config_default(shapes[c][0], 4);
    uint32_t windows[3] = {0, shapes[c][0] / 2, shapes[c][0] - 7};
    per_buffer cpu;
    cb_dev d;
    cb_host h;
    per_sample_opts o;
    char what[96];
    cfg.eps = 0; // zero TD errors make zero leaves
    cfg.seq_len = shapes[c][1];
    cfg.seq_stride = shapes[c][2];
    cfg.seed = 4242 + c;
    memset(&o, 0, sizeof o);
    // the ring wrapped: windows span its end
    cb_make_filled(&cfg, MAXB, shapes[c][3], &cpu, &d, &h);
    CHECK(!(cpu.tree.node[1] > 0));
    if (cfg.seq_len) o.flags = PER_SAMPLE_SEQUENCES;
    for (v = 0; v < 3; ++v)
      for (b = 0; b < sizeof Bs / sizeof Bs[0]; ++b) {
        uint32_t want = c == 2 ? 0u : Bs[b];
        o.window = windows[v];
        snprintf(what, sizeof what,
                 "uniform draws: capacity %u, seq_len %u, window %u, B %u",
                 cfg.capacity, cfg.seq_len, o.window, Bs[b]);
        CHECK_MSG(cb_sample_opts(&cpu, &d, &h, Bs[b], &o) == want, "%s", what);
        cb_compare(what, &cpu, &d);
      }
    per_buffer_free(&cpu);
    cb_dev_free(&d);
    cb_host_free(&h);
  }
}

// >>case: distinct draws made by block 0's threads together (per_cuda.cu's
// peri_cuda_pick), bitwise against per_buffer, with batches of one lane,
// at a round's edge (256) and over several rounds, each state compared
// after every sample (the stream's place in its block included: a double
// draw takes two words, from an odd place in the block, so some lie
// across two blocks):
//   - the whole tree's phase 1 with no fallback (mass spread over 3000
//     leaves: repeats within a round and across rounds), and with the
//     fallback after a few rounds (31 leaves hold 93% of the mass, so
//     the repeat limit of max_unique comes first);
//   - buffer-max weights and the batch minimum over every lane's part;
//   - lane 0's methods with the lanes' ids and weights: a window, the
//     swap permutation of alpha 0, Floyd's picks of degenerate mass;
//   - sequences: the whole sequence tree (some invalid: leaf 0), and
//     Floyd's positions of degenerate mass mapped through the rank table
//     (313 chunks).
static void cb_set_tds(per_buffer *cpu, cb_dev *d, cb_host *h, uint32_t maxb,
                       uint32_t pattern) {
  uint32_t done, j;
  for (done = 0; done < cpu->cfg.capacity; done += maxb) {
    uint32_t k =
        cpu->cfg.capacity - done < maxb ? cpu->cfg.capacity - done : maxb;
    for (j = 0; j < k; ++j) {
      uint32_t s = done + j;
      h->ids[j] = (uint64_t)s | (uint64_t)cpu->gen[s] << 32;
      h->td[j] = pattern == 0  ? 0.1f + (float)(s % 5)
                 : s % 97 == 0 ? 50.0f
                               : 0.01f * (float)(1 + s % 7);
    }
    cb_update_pairs(cpu, d, h, k);
  }
}

static void cb_case_unique_lanes(void) {
  enum { MAXB = 1100 };
  static const uint32_t Bs[] = {1, 255, 256, 257, 700, 1100, 3, 513};
  static const struct {
    uint32_t cap, seq_len, end_every, flags, pattern; // pattern 2: all 0
    double alpha;
    uint32_t window;
  } shapes[] = {{3000, 0, 1000, 0, 0, 1.0, 0},
                {3000, 0, 1000, 0, 1, 1.0, 0},
                {3000, 0, 1000, PER_WEIGHTS_BUFFER_MAX, 1, 0.7, 0},
                {3000, 0, 1000, 0, 1, 1.0, 2900},
                {3000, 0, 1000, 0, 1, 0.0, 0},
                {3000, 0, 1000, 0, 2, 1.0, 2000},
                {10000, 4, 13, 0, 0, 1.0, 0},
                {10000, 4, 13, 0, 2, 1.0, 0}};
  uint32_t c, b;
  for (c = 0; c < sizeof shapes / sizeof shapes[0]; ++c) {
    per_config cfg = per_config_default(shapes[c].cap, 4);
    per_buffer cpu;
    cb_dev d;
    cb_host h;
    per_sample_opts o;
    char what[128];
    cfg.eps = 0; // zero TD errors make zero leaves
    cfg.alpha = shapes[c].alpha;
    cfg.flags = shapes[c].flags;
    cfg.seq_len = shapes[c].seq_len;
    cfg.seq_stride = shapes[c].seq_len ? 1 : 0;
    cfg.max_unique = MAXB; // the repeat limit too
    cfg.seed = 777 + c;
    memset(&o, 0, sizeof o);
    cb_make_filled(&cfg, MAXB, shapes[c].end_every, &cpu, &d, &h);
    // 5 uniform draws of the degenerate mass (alpha 0: strata, every leaf
    // 1): an odd number of words taken, so a double's two words lie
    // across two blocks in some rounds below
    o.flags = cfg.seq_len ? (uint32_t)PER_SAMPLE_SEQUENCES : 0u;
    CHECK_EQ_U(cb_sample_opts(&cpu, &d, &h, 5, &o), 5);
    CHECK_MSG(cfg.alpha == 0 || cpu.rng.avail % 2 == 1, "shape %u: avail %u", c,
              cpu.rng.avail);
    if (shapes[c].pattern != 2)
      cb_set_tds(&cpu, &d, &h, MAXB, shapes[c].pattern);
    CHECK((shapes[c].pattern == 2) == !(cpu.tree.node[1] > 0));
    o.flags =
        PER_SAMPLE_UNIQUE | (cfg.seq_len ? (uint32_t)PER_SAMPLE_SEQUENCES : 0u);
    o.window = shapes[c].window;
    for (b = 0; b < sizeof Bs / sizeof Bs[0]; ++b) {
      snprintf(what, sizeof what,
               "distinct draws: capacity %u, seq_len %u, pattern %u, alpha "
               "%g, window %u, B %u",
               cfg.capacity, cfg.seq_len, shapes[c].pattern, cfg.alpha,
               o.window, Bs[b]);
      CHECK_MSG(cb_sample_opts(&cpu, &d, &h, Bs[b], &o) == Bs[b], "%s", what);
      cb_compare(what, &cpu, &d);
    }
    per_buffer_free(&cpu);
    cb_dev_free(&d);
    cb_host_free(&h);
  }
}

static void cb_run_all(void) {
  cb_case_api();
  cb_case_bitwise();
  cb_case_seq();
  cb_case_unique();
  cb_case_uniform();
  cb_case_unique_lanes();
  cb_case_graph();
  printf("  replay buffer: %llu calls, %llu draws, %llu states compared\n",
         cb_calls, cb_draws, cb_states);
  printf("  sequences: %llu drawn, %llu update_seq calls applied, %llu states "
         "with valid sequences compared\n",
         cb_seq_draws, cb_seq_updates, cb_seq_states);
  CHECK(cb_seq_draws > 1000 && cb_seq_updates > 100 && cb_seq_states > 100);
}

#endif
