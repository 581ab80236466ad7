/* fuzz_ops.c - libFuzzer target driving a buffer with random add / sample
   / update / save+load sequences and hostile values (NaN, infinities,
   huge and subnormal TD errors, unknown and stale ids, batch sizes beyond
   the buffer, windows of items and of trajectories, flags, episode ends,
   sequence draws and updates).
   After every call: per_buffer_check passes; a call that fails left the
   buffer byte for byte as it was; a successful sample returns ids of
   stored items and weights in [0, 1]; a saved and reloaded buffer has the
   same state; a snapshot is the saved file but for its CRC, and
   per_snapshot_write writes a file that loads the same. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct reader {
  const uint8_t *p;
  size_t n;
} reader;

static uint32_t next8(reader *r) {
  if (r->n == 0) return 0;
  --r->n;
  return *r->p++;
}

static uint32_t next16(reader *r) { return next8(r) | next8(r) << 8; }

static float hostile_td(reader *r) {
  static const float v[12] = {0.0f,  -0.0f,  1.0f, -2.5f, 1e-45f, 1e-30f,
                              3e38f, -3e38f, 0.5f, 1e6f,  7.0f,   1e-8f};
  uint32_t k = next8(r);
  if (k == 250) return (float)NAN;
  if (k == 251) return (float)INFINITY;
  if (k == 252) return -(float)INFINITY;
  return v[k % 12];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const double alphas[5] = {0.6, 0.0, 1.0, 7.0, 0.3};
  static const double epss[3] = {1e-6, 0.0, 1e3};
  reader r;
  per_config c;
  per_buffer b;
  uint64_t ids[80];
  uint32_t nids = 0, ops = 0, seq_ids = 0;
  uint32_t k;
  char path[128];
  r.p = data;
  r.n = size;
  c = cfg_of(1 + next8(&r) % 48, 1 + next8(&r) % 12);
  k = next8(&r);
  c.alpha = alphas[k % 5];
  c.eps = epss[(k / 5) % 3];
  c.flags = (k & 0x80u) ? PER_WEIGHTS_BUFFER_MAX : 0;
  c.max_unique = (k & 0x40u) ? 1 + next8(&r) % c.capacity : c.capacity;
  c.seed = next8(&r);
  c.beta_steps = 1 + next8(&r);
  k = next8(&r); /* sequences: L, stride (may not divide: refused), cross */
  if (k & 1u) {
    c.seq_len = 1 + (k >> 1) % 12;
    c.seq_stride = 1 + (k >> 4) % 6;
    if (k & 0x80u) c.flags |= PER_SEQ_CROSS_EPISODES;
  } else if (k & 0x80u) {
    c.flags |= PER_MAX_LIVE;
  }
  if (per_buffer_init(&b, &c, NULL) != PER_OK) return 0;
  fuzz_path(path, sizeof path, "ops");
  while (r.n > 0 && ops++ < 400) {
    uint32_t op = next8(&r) % 8;
    bsnap snap = bsnap_take(&b);
    per_status s = PER_OK;
    static unsigned char items[80 * 12 * 12];
    uint8_t mask[80 * 12];
    memset(items, (int)ops, sizeof items);
    if (op == 0) {
      s = per_buffer_add(&b, next8(&r) == 255 ? NULL : items);
    } else if (op == 1) {
      s = per_buffer_add_batch(&b, items, next8(&r) % 80);
    } else if (op == 2) {
      per_sample_opts o;
      float w[80];
      uint32_t B = next8(&r) % 80, i, out = next8(&r);
      o.flags = next8(&r) & 0x8fu; /* the four flags and an unknown one */
      o.window = next8(&r) % 60;
      o.mask = (out & 8) ? mask : NULL;
      k = next8(&r);
      o.beta = k == 255 ? NAN : (k == 254 ? -1.0 : (double)k / 50.0);
      /* a beta without PER_SAMPLE_BETA is refused: only now and then */
      if (!(o.flags & PER_SAMPLE_BETA) && k < 250) o.beta = 0;
      s = per_buffer_sample(&b, B, &o, (out & 1) ? items : NULL,
                            (out & 2) ? ids : NULL, (out & 4) ? w : NULL);
      if (s == PER_OK) {
        int seq = (o.flags & PER_SAMPLE_SEQUENCES) != 0;
        for (i = 0; (out & 2) && i < B; ++i)
          CHECK(per_id_slot(ids[i]) < b.size &&
                (!seq || b.seq_ok[per_id_slot(ids[i]) / c.seq_stride]) &&
                !(ids[i] & PER_ID_SEQ) == !seq);
        for (i = 0; (out & 4) && i < B; ++i) CHECK(w[i] >= 0 && w[i] <= 1);
        for (i = 0; seq && (out & 8) && i < B * c.seq_len; ++i)
          CHECK(mask[i] <= 1);
        nids = (out & 2) ? B : 0;
        seq_ids = seq;
      }
    } else if (op == 3 || op == 4) {
      float td[80];
      uint64_t u[80];
      uint32_t n = op == 3 ? nids : next8(&r) % 80, i, stale;
      for (i = 0; i < n; ++i) {
        td[i] = hostile_td(&r);
        u[i] = op == 3 ? ids[i]
                       : ((uint64_t)next8(&r) % 8 << 32 | next16(&r) % 64);
      }
      s = per_buffer_update(&b, u, td, n, &stale);
      if (s == PER_OK) CHECK(stale <= n);
    } else if (op == 5) { /* steps with ends, some not PER_END_* */
      uint8_t e[80];
      uint32_t n = next8(&r) % 80, i;
      for (i = 0; i < n; ++i)
        e[i] = (uint8_t)(next8(&r) % 7 == 0 ? 3 : next8(&r) % 3);
      s = per_buffer_add_steps(&b, items, n, e);
    } else if (op == 6) { /* sequence updates: the drawn ids or forged */
      static float td[80 * 12];
      uint64_t u[80];
      uint32_t L = c.seq_len ? c.seq_len : 1,
               forged = !seq_ids || next8(&r) < 64;
      uint32_t n = forged ? next8(&r) % 8 : nids, i, stale;
      for (i = 0; i < n; ++i)
        u[i] =
            forged ? ((uint64_t)next8(&r) % 8 << 32 | next16(&r) % 64) : ids[i];
      for (i = 0; i < n * L; ++i)
        td[i] = next8(&r) < 8 ? hostile_td(&r) : (float)(i % 5);
      s = per_buffer_update_seq(&b, u, td, n, &stale);
      if (s == PER_OK) CHECK(stale <= n);
    } else if (next8(&r) < 32) { /* rarer: a save is an fsync */
      per_buffer l;
      if (per_buffer_save(&b, path) == PER_OK) {
        /* the snapshot is the file but for its CRC, and loads the same
           once per_snapshot_write has written it */
        size_t cap = per_buffer_snapshot_bytes(&b), len = 0;
        unsigned char *mem = (unsigned char *)malloc(cap),
                      *file = (unsigned char *)malloc(cap);
        CHECK(mem && file);
        if (mem && file) {
          long got = file_read(path, file, (long)cap);
          CHECK_OK(per_buffer_snapshot(&b, mem, cap, &len));
          CHECK(got == (long)len && memcmp(mem, file, len - 4) == 0);
          if (next8(&r) < 128)
            CHECK_OK(per_snapshot_write(mem, len, path, NULL));
        }
        free(mem);
        free(file);
        CHECK_OK(per_buffer_init(&l, &c, NULL));
        CHECK_OK(per_buffer_load(&l, path));
        CHECK(state_equal(&b, &l));
        per_buffer_free(&l);
      }
    }
    if (s != PER_OK) {
      CHECK_UNCHANGED(snap, &b);
    } else {
      (void)bsnap_same(&snap, &b);
    }
    CHECK_OK(per_buffer_check(&b));
    if (t_fail_count) break;
  }
  per_buffer_free(&b);
  remove(path);
  fuzz_assert_clean("fuzz_ops");
  return 0;
}
