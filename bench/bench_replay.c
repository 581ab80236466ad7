/* bench_replay.c - per.h's replay buffer beyond single items, each figure
   against a baseline measured in the same run:

   snapshot  per_buffer_snapshot of a full buffer (the time a training
             thread is blocked by a non-blocking checkpoint) against a
             plain memcpy of the same number of bytes: GB/s of both, and
             the ratio memcpy / snapshot time (1 = memcpy speed).
   save      per_buffer_snapshot against per_buffer_save of the same
             buffer (the whole synchronous save, fsync included, to a file
             in --dir): how much shorter the training thread's stall is.
   seq       a sequence training step: per_buffer_sample of B sequences
             of L steps (PER_SAMPLE_SEQUENCES) + per_buffer_update_seq
             with B * L TD errors, against the same number of steps drawn
             as B * L independent items + per_buffer_update; ns per step.

   Usage: bench_replay [--op snapshot,save,seq] [--n N] [--b B]
                       [--item BYTES] [--seq-len L] [--stride S]
                       [--dir DIR] [common options]
   Defaults: N = 10^6 items of 64 bytes, B = 64, L = 80, stride 40. */
#define _POSIX_C_SOURCE 200809L
#define PER_IMPLEMENTATION
#include "per.h"
#include "bench_common.h"

static const char *usage =
    "bench_replay: snapshots, saves and sequence steps of per.h's buffer\n"
    "  --item BYTES     bytes per item (default 64)\n"
    "  --seq-len L      steps per sequence (default 80)\n"
    "  --stride S       a sequence starts every S slots (default 40)\n"
    "  --dir DIR        where op save writes its file (default .)\n";

static uint64_t item_bytes = 64, seq_len = 80, seq_stride = 40;
static const char *save_dir = ".";

static int extra_opt(const char *opt, const char *val, int *bad) {
  uint64_t *dst = NULL;
  if (strcmp(opt, "--dir") == 0) {
    if (!val) *bad = 1;
    else save_dir = val;
    return 1;
  }
  if (strcmp(opt, "--item") == 0) dst = &item_bytes;
  else if (strcmp(opt, "--seq-len") == 0) dst = &seq_len;
  else if (strcmp(opt, "--stride") == 0) dst = &seq_stride;
  else return 0;
  if (!val) {
    *bad = 1;
    return 1;
  }
  {
    const char *end;
    *dst = bc_parse_num(val, &end);
    if (*dst == 0 || *end || *dst > (1u << 20)) *bad = 1;
  }
  return 1;
}

static int failures = 0;

static void fail(const char *op, const char *what) {
  fprintf(stderr, "CHECK FAILED (%s): %s\n", op, what);
  ++failures;
}

static void check(const char *op, per_status s, const char *what) {
  if (s != PER_OK) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %s", what, per_status_str(s));
    fail(op, msg);
  }
}

/* A full buffer of n items (episode ends every 200 steps), each slot's
   priority updated once. */
static int make_buffer(per_buffer *b, uint32_t n, uint32_t L, uint32_t stride,
                       uint64_t seed) {
  per_config c = per_config_default(n, (uint32_t)item_bytes);
  unsigned char *items;
  uint8_t *ends;
  uint64_t *ids, s = seed;
  float *td;
  uint32_t i, chunk = 4096;
  c.seed = seed;
  c.seq_len = L;
  c.seq_stride = L ? stride : 0;
  if (L) c.flags = PER_SEQ_CROSS_EPISODES;
  if (per_buffer_init(b, &c, NULL) != PER_OK) return 0;
  items = (unsigned char *)bc_xmalloc((size_t)chunk * item_bytes);
  ends = (uint8_t *)bc_xmalloc(chunk);
  ids = (uint64_t *)bc_xmalloc((size_t)chunk * sizeof *ids);
  td = (float *)bc_xmalloc((size_t)chunk * sizeof *td);
  for (i = 0; i < n; i += chunk) {
    uint32_t m = n - i < chunk ? n - i : chunk, j;
    for (j = 0; j < (uint32_t)(m * item_bytes); ++j)
      items[j] = (unsigned char)bc_split(&s);
    for (j = 0; j < m; ++j) {
      ends[j] =
          (uint8_t)((i + j) % 200 == 199 ? PER_END_TERMINATED : PER_END_NONE);
      ids[j] = (uint64_t)(i + j) | (uint64_t)1 << 32; /* slot | generation 1 */
      td[j] = bc_prio(&s) * 4.0f;
    }
    if (per_buffer_add_steps(b, items, m, ends) != PER_OK) return 0;
    if (per_buffer_update(b, ids, td, m, NULL) != PER_OK) return 0;
  }
  free(items);
  free(ends);
  free(ids);
  free(td);
  return 1;
}

/* ---- snapshot and save ---- */

typedef struct snap_ctx {
  per_buffer *b;
  unsigned char *mem, *src;
  size_t cap, len;
  char path[4096];
  per_status status;
} snap_ctx;

static void k_snapshot(void *p, uint64_t iters) {
  snap_ctx *c = (snap_ctx *)p;
  while (iters--)
    if (per_buffer_snapshot(c->b, c->mem, c->cap, &c->len) != PER_OK)
      c->status = PER_ERR_ARG;
}

static void k_memcpy(void *p, uint64_t iters) {
  snap_ctx *c = (snap_ctx *)p;
  while (iters--) {
    memcpy(c->mem, c->src, c->len);
    c->src[iters % c->len] ^= c->mem[c->len / 2]; /* keep the copy live */
  }
}

static void k_save(void *p, uint64_t iters) {
  snap_ctx *c = (snap_ctx *)p;
  while (iters--) {
    per_status s = per_buffer_save(c->b, c->path);
    if (s != PER_OK) c->status = s;
  }
}

static void print_row(FILE *csv, const char *op, uint64_t n, uint64_t b,
                      const bc_result *r, double items, const char *a,
                      const char *bn) {
  printf("%-9s %9llu %5llu  %11.2f %8.3f  %11.2f %8.3f", op,
         (unsigned long long)n, (unsigned long long)b, r->a_ns * items / 1e3,
         r->a_ns, r->b_ns * items / 1e3, r->b_ns);
  bc_print_ratio(r);
  fflush(stdout);
  bc_csv_row(csv, op, n, b, r, items, a, bn);
}

static void run_snapshot(const bc_opts *o, FILE *csv, uint32_t n, int want_snap,
                         int want_save) {
  per_buffer b;
  snap_ctx c;
  bc_result r;
  if (!make_buffer(&b, n, 0, 0, o->seed)) {
    fail("snapshot", "buffer setup");
    return;
  }
  memset(&c, 0, sizeof c);
  c.b = &b;
  c.cap = per_buffer_snapshot_bytes(&b);
  c.mem = (unsigned char *)bc_xmalloc(c.cap);
  c.src = (unsigned char *)bc_xmalloc(c.cap);
  memset(c.src, 1, c.cap);
  check("snapshot", per_buffer_snapshot(&b, c.mem, c.cap, &c.len),
        "per_buffer_snapshot");
  snprintf(c.path, sizeof c.path, "%s/bench_replay_%s.ckpt", save_dir,
           bc_real_name());
  { /* the snapshot written out is per_buffer_save's file */
    FILE *f;
    unsigned char *file = (unsigned char *)bc_xmalloc(c.len);
    check("snapshot", per_snapshot_write(c.mem, c.len, c.path, NULL),
          "per_snapshot_write");
    f = fopen(c.path, "rb");
    if (!f || fread(file, 1, c.len, f) != c.len)
      fail("snapshot", "reading the written file");
    if (f) fclose(f);
    check("snapshot", per_buffer_save(&b, c.path), "per_buffer_save");
    f = fopen(c.path, "rb");
    if (!f || fread(c.src, 1, c.len, f) != c.len ||
        memcmp(file, c.src, c.len) != 0)
      fail("snapshot",
           "per_snapshot_write's file differs from per_buffer_save's");
    if (f) fclose(f);
    free(file);
  }
  if (want_snap) {
    r = bc_measure(o, o->side != 2 ? k_snapshot : NULL, &c,
                   o->side != 1 ? k_memcpy : NULL, &c, (double)n);
    print_row(csv, "snapshot", n, 0, &r, (double)n, "per_buffer_snapshot",
              "memcpy");
    if (r.a_ns > 0)
      printf("          snapshot %.0f MB (%llu bytes per item): %.2f GB/s; "
             "memcpy %.2f GB/s\n",
             (double)c.len / 1e6, (unsigned long long)(c.len / n),
             (double)c.len / (r.a_ns * n),
             r.b_ns > 0 ? (double)c.len / (r.b_ns * n) : 0.0);
  }
  if (want_save) {
    bc_opts q = *o;
    if (!q.iters && !q.quick && q.min_time < 1)
      q.min_time = 1; /* a save is long */
    if (q.reps > 5) q.reps = 5;
    r = bc_measure(&q, o->side != 2 ? k_snapshot : NULL, &c,
                   o->side != 1 ? k_save : NULL, &c, (double)n);
    print_row(csv, "save", n, 0, &r, (double)n, "per_buffer_snapshot",
              "per_buffer_save");
  }
  if (c.status != PER_OK) fail("snapshot", per_status_str(c.status));
  remove(c.path);
  free(c.mem);
  free(c.src);
  per_buffer_free(&b);
}

/* ---- sequences ---- */

typedef struct seq_ctx {
  per_buffer *b;
  uint32_t B, L;
  unsigned char *out;
  uint8_t *mask;
  uint64_t *ids;
  float *w, *td;
  per_status status;
} seq_ctx;

static void k_seq(void *p, uint64_t iters) {
  seq_ctx *c = (seq_ctx *)p;
  per_sample_opts o;
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_SEQUENCES;
  o.mask = c->mask;
  while (iters--) {
    per_status s = per_buffer_sample(c->b, c->B, &o, c->out, c->ids, c->w);
    if (s == PER_OK) s = per_buffer_update_seq(c->b, c->ids, c->td, c->B, NULL);
    if (s != PER_OK) c->status = s;
  }
}

static void k_items(void *p, uint64_t iters) {
  seq_ctx *c = (seq_ctx *)p;
  uint32_t k = c->B * c->L;
  while (iters--) {
    per_status s = per_buffer_sample(c->b, k, NULL, c->out, c->ids, c->w);
    if (s == PER_OK) s = per_buffer_update(c->b, c->ids, c->td, k, NULL);
    if (s != PER_OK) c->status = s;
  }
}

static void run_seq(const bc_opts *o, FILE *csv, uint32_t n, uint32_t B) {
  per_buffer bs, bi;
  seq_ctx cs, ci;
  bc_result r;
  uint32_t L = (uint32_t)seq_len, k = B * L, j;
  uint64_t s = o->seed ^ 0x5e9ull;
  if (n % seq_stride != 0 || L > n) {
    fail("seq", "--n must be a multiple of --stride and >= --seq-len");
    return;
  }
  if (!make_buffer(&bs, n, L, (uint32_t)seq_stride, o->seed) ||
      !make_buffer(&bi, n, 0, 0, o->seed)) {
    fail("seq", "buffer setup");
    return;
  }
  memset(&cs, 0, sizeof cs);
  cs.b = &bs;
  cs.B = B;
  cs.L = L;
  cs.out = (unsigned char *)bc_xmalloc((size_t)k * item_bytes);
  cs.mask = (uint8_t *)bc_xmalloc(k);
  cs.ids = (uint64_t *)bc_xmalloc((size_t)k * sizeof(uint64_t));
  cs.w = (float *)bc_xmalloc((size_t)k * sizeof(float));
  cs.td = (float *)bc_xmalloc((size_t)k * sizeof(float));
  for (j = 0; j < k; ++j) cs.td[j] = bc_prio(&s) * 4.0f;
  ci = cs;
  ci.b = &bi;
  k_seq(&cs, 1);
  k_items(&ci, 1);
  r = bc_measure(o, o->side != 2 ? k_seq : NULL, &cs,
                 o->side != 1 ? k_items : NULL, &ci, (double)k);
  print_row(csv, "seq", n, B, &r, (double)k, "sequences", "independent items");
  if (cs.status != PER_OK) fail("seq", per_status_str(cs.status));
  if (ci.status != PER_OK) fail("seq", per_status_str(ci.status));
  if (per_buffer_check(&bs) != PER_OK || per_buffer_check(&bi) != PER_OK)
    fail("seq", "per_buffer_check after the loops");
  free(cs.out);
  free(cs.mask);
  free(cs.ids);
  free(cs.w);
  free(cs.td);
  per_buffer_free(&bs);
  per_buffer_free(&bi);
}

int main(int argc, char **argv) {
  static const uint64_t def_n[] = {1000000}, quick_n[] = {20000};
  static const uint64_t def_b[] = {64}, quick_b[] = {8};
  bc_opts o;
  FILE *csv;
  int j, i;
  if (!bc_parse(&o, argc, argv, usage, extra_opt)) return 2;
  bc_default_list(o.n, &o.nn, o.quick ? quick_n : def_n, 1);
  bc_default_list(o.b, &o.nb, o.quick ? quick_b : def_b, 1);
  for (j = 0; j < o.nn; ++j)
    if (o.n[j] == 0 || o.n[j] > PER_MAX_CAPACITY) return 2;
  for (j = 0; j < o.nb; ++j)
    if (o.b[j] == 0 || o.b[j] * seq_len > (1u << 24)) return 2;
  csv = bc_csv_open(&o);
  printf("bench_replay: per.h (PER_REAL=%s), %llu-byte items\n", bc_real_name(),
         (unsigned long long)item_bytes);
  printf("flags: %s; %s\n", BENCH_CFLAGS,
         bc_clock == CLOCK_MONOTONIC ? "wall clock" : "thread CPU clock");
  printf(
      "baselines: snapshot = memcpy of the same bytes; save = per_buffer_save "
      "(fsync included) to %s;\n"
      "           seq = B * L independent items sampled and updated "
      "(L = %llu, stride %llu)\n",
      save_dir, (unsigned long long)seq_len, (unsigned long long)seq_stride);
  printf("%-9s %9s %5s  %11s %8s  %11s %8s  %7s\n", "op", "N", "B",
         "per us/call", "ns/item", "base us/call", "ns/item", "base/per");
  for (j = 0; j < o.nn; ++j) {
    uint32_t n = (uint32_t)o.n[j];
    if (bc_want_op(&o, "snapshot") || bc_want_op(&o, "save"))
      run_snapshot(&o, csv, n, bc_want_op(&o, "snapshot"),
                   bc_want_op(&o, "save"));
    if (bc_want_op(&o, "seq"))
      for (i = 0; i < o.nb; ++i) run_seq(&o, csv, n, (uint32_t)o.b[i]);
  }
  return bc_finish(csv, "bench_replay", failures,
                   "snapshot written = per_buffer_save's file; every call "
                   "OK; buffers valid after the loops");
}
