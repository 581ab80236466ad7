/* fuzz_ckpt.c - libFuzzer target for the checkpoint loader.
   Input: one mode byte, then the file. Mode bit 0 recomputes the CRC so
   that the field checks behind it are reached; bits 1..5 choose a sharded
   load (rank < world) or an append (rank >= world) and bits 6..7 the
   capacity of the buffer it goes into. The file is
   loaded into four buffers (plain, alpha = 0, with
   PER_WEIGHTS_BUFFER_MAX, with sequences of 4 steps every 2 slots across
   episode ends). A refused file must leave the buffer byte for
   byte as it was; an accepted one must pass per_buffer_check and then
   sample and update normally. The same file also goes to per_nstep_load
   with two adders: refused, they are unchanged; accepted, they have
   fewer than n pending steps each and keep emitting items. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[128];
  unsigned mode;
  int variant;
  FILE *f;
  if (size < 1) return 0;
  mode = data[0];
  ++data;
  --size;
  fuzz_path(path, sizeof path, "ckpt");
  f = fopen(path, "wb");
  if (!f) return 0;
  if (size) fwrite(data, 1, size, f);
  if ((mode & 1u) && size >= 4) {
    uint32_t c = per_crc32c(0, data, size - 4);
    unsigned char tail[4];
    tail[0] = (unsigned char)c;
    tail[1] = (unsigned char)(c >> 8);
    tail[2] = (unsigned char)(c >> 16);
    tail[3] = (unsigned char)(c >> 24);
    fseek(f, (long)(size - 4), SEEK_SET);
    fwrite(tail, 1, 4, f);
  }
  fclose(f);
  for (variant = 0; variant < 4; ++variant) {
    /* shards may go to smaller buffers: capacity 1, 6, 11 or 16 */
    per_config c = cfg_of((mode & 2u) ? 1 + ((mode >> 6) & 3u) * 5 : 16, 8);
    per_buffer b;
    per_status s;
    bsnap snap;
    uint32_t v;
    if (variant == 1) c.alpha = 0;
    if (variant == 2) c.flags = PER_WEIGHTS_BUFFER_MAX;
    if (variant == 3 && c.capacity % 2 == 0) {
      c.seq_len = 4;
      c.seq_stride = 2;
      c.flags = PER_SEQ_CROSS_EPISODES;
    }
    if (per_buffer_init(&b, &c, NULL) != PER_OK) abort();
    for (v = 0; v < 5; ++v) {
      unsigned char item[8];
      memset(item, (int)v, sizeof item);
      per_buffer_add(&b, item);
    }
    snap = bsnap_take(&b);
    if (mode & 2u) {
      uint32_t world = 1 + ((mode >> 2) & 3u), rank = (mode >> 4) & 3u;
      if (rank < world) s = per_buffer_load_shard(&b, path, rank, world);
      else /* items rank .. rank + 2 world - 1, after b's five */
        s = per_buffer_load_append(&b, path, rank, 2 * world);
    } else {
      s = per_buffer_load(&b, path);
    }
    if (s != PER_OK) {
      CHECK_UNCHANGED(snap, &b);
    } else {
      uint64_t ids[8];
      float w[8], td[8] = {1, 2, 0, 3, 4, 5, 6, 7};
      (void)bsnap_same(&snap, &b); /* frees it */
      CHECK_OK(per_buffer_check(&b));
      if (b.size > 0) {
        CHECK_OK(per_buffer_sample(&b, 8, NULL, NULL, ids, w));
        CHECK_OK(per_buffer_update(&b, ids, td, 8, NULL));
        CHECK_OK(per_buffer_check(&b));
      }
      if (b.seq_ok) {
        per_sample_opts o;
        uint8_t mask[8 * 4];
        float std[8 * 4];
        memset(&o, 0, sizeof o);
        memset(std, 0, sizeof std);
        o.flags = PER_SAMPLE_SEQUENCES;
        o.mask = mask;
        s = per_buffer_sample(&b, 8, &o, NULL, ids, w);
        if (s == PER_OK) CHECK_OK(per_buffer_update_seq(&b, ids, std, 8, NULL));
        else CHECK(s == PER_ERR_TOO_FEW || s == PER_ERR_EMPTY);
        CHECK_OK(per_buffer_check(&b));
      }
    }
    per_buffer_free(&b);
  }
  {
    per_nstep_config nc[2] = {{2, 0.5f, 4, 4}, {3, 0.9f, 8, 2}};
    per_nstep a[2], before[2];
    unsigned char ring[2][64];
    per_status s;
    uint32_t i;
    for (i = 0; i < 2; ++i) {
      if (per_nstep_init(&a[i], &nc[i], NULL) != PER_OK) abort();
      memset(a[i].reward, 0x5a,
             (size_t)nc[i].n * (4 + nc[i].obs_size + nc[i].action_size));
      memcpy(ring[i], a[i].reward,
             (size_t)nc[i].n * (4 + nc[i].obs_size + nc[i].action_size));
      before[i] = a[i];
    }
    s = per_nstep_load(a, 2, path);
    for (i = 0; i < 2; ++i) {
      size_t bytes = (size_t)nc[i].n * (4 + nc[i].obs_size + nc[i].action_size);
      if (s != PER_OK) {
        CHECK(memcmp(&before[i], &a[i], sizeof a[i]) == 0);
        CHECK(memcmp(ring[i], a[i].reward, bytes) == 0);
      } else {
        per_nstep_layout l = per_nstep_layout_of(&nc[i]);
        per_config c = cfg_of(16, l.size);
        per_buffer b;
        unsigned char o[8] = {0}, act[4] = {0};
        uint32_t pending = a[i].count;
        CHECK(pending < nc[i].n && a[i].head == 0);
        if (per_buffer_init(&b, &c, NULL) != PER_OK) abort();
        /* a terminal step emits every pending step and itself */
        CHECK_OK(per_nstep_step(&a[i], &b, o, act, 1.0f, o, 1, 0));
        CHECK_EQ_U(b.size, pending + 1);
        CHECK_EQ_U(a[i].count, 0);
        per_buffer_free(&b);
      }
      per_nstep_free(&a[i]);
    }
  }
  remove(path);
  fuzz_assert_clean("fuzz_ckpt");
  return 0;
}
