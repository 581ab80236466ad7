/* bench_frames.c - frame stacks (per_frames) against the naive layout
   they replace: a per_buffer of per_nstep records holding both stacks
   whole, fed the same stream, in one process.

   Ops:
     memory  bytes per transition at --n transitions (default 10^6) of
             84x84 uint8 frames stacked 4 deep, n = 3, a 1-byte action:
             every byte per_frames_init allocates (counted through
             PER_MALLOC; the ring is allocated, not touched), against
             the naive buffer's items (capacity * item_size, computed)
             plus what per_buffer_init_mem allocates besides. Also the
             ratio to one frame plus the scalars.
     step    ns per environment step once both rings have wrapped:
             per_frames_step against per_nstep_step with whole stacks
             (the naive side also shifts its stack).
     sample  ns per transition of a batch of --b (default 32): per_frames_sample
             rebuilding obs and next_obs (and the action, reward,
             discount, done, ids, weights) against per_buffer_sample
             copying the naive records out; both buffers hold --sample-n
             (default 50000) transitions of the same episodes (100 .. 1000
             steps) and draw the same slots (same seed, same leaves).
   The stream cycles through 257 random frames made before timing.
   --quick: small sizes; always checks that both sides drew the same ids
   and stacks. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Count what per.h allocates. */
static size_t bf_bytes;
static void *bf_malloc(size_t n) {
  bf_bytes += n;
  return malloc(n);
}
#define PER_MALLOC(sz, ctx) ((void)(ctx), bf_malloc(sz))
#define PER_FREE(p, ctx) ((void)(ctx), free(p))
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_FRAMES_IMPLEMENTATION
#include "per_frames.h"

#include "bench_common.h"

#define FW 84u
#define FRAME (FW * FW)
#define K 4u
#define NSTEP 3u
#define POOL 257u

static const char *usage =
    "usage: bench_frames [options]\n"
    "  ops: memory, step, sample; --n: transitions for memory (default\n"
    "  1000000); --b: batch for sample (default 32)\n"
    "  --sample-n N     transitions held for step and sample (default "
    "50000)\n";

static uint64_t sample_n = 50000;
static int failures;

static int extra_opt(const char *opt, const char *val, int *bad) {
  if (strcmp(opt, "--sample-n") == 0) {
    const char *end;
    sample_n = bc_parse_num(val, &end);
    *bad = *end != 0 || sample_n == 0 || sample_n > PER_MAX_CAPACITY;
    return 1;
  }
  return 0;
}

static void fail(const char *op, const char *what) {
  fprintf(stderr, "bench_frames %s: %s\n", op, what);
  ++failures;
}

static per_frames_config frames_config(uint32_t n) {
  per_frames_config c = per_frames_config_default(n, FRAME, K, 1);
  c.n = NSTEP;
  c.buffer.seed = 5;
  return c;
}

static per_nstep_config naive_nstep(void) {
  per_nstep_config nc;
  nc.n = NSTEP;
  nc.gamma = 0.99f;
  nc.obs_size = K * FRAME;
  nc.action_size = 1;
  return nc;
}

static void run_memory(FILE *csv, uint32_t n) {
  per_frames_config c = frames_config(n);
  per_frames f;
  per_buffer nb;
  per_config bc = c.buffer;
  per_nstep_config nc = naive_nstep();
  per_nstep_layout nl = per_nstep_layout_of(&nc);
  size_t fbytes, nbytes;
  unsigned char dummy[1];
  double fper, nper, scalars = 1 + 4 + 4 + 1; /* action, reward,
                                                 discount, done */
  bc_result r;
  bf_bytes = 0;
  if (per_frames_init(&f, &c, NULL) != PER_OK) {
    fail("memory", f.error);
    return;
  }
  fbytes = bf_bytes;
  per_frames_free(&f);
  bc.item_size = nl.size;
  bf_bytes = 0;
  /* the items block is claimed, never touched (init_mem does not zero) */
  if (per_buffer_init_mem(&nb, &bc, dummy, (size_t)n * nl.size, NULL) !=
      PER_OK) {
    fail("memory", nb.error);
    return;
  }
  nbytes = bf_bytes + (size_t)n * nl.size;
  per_buffer_free(&nb);
  fper = (double)fbytes / n;
  nper = (double)nbytes / n;
  printf("memory  %9u transitions of %ux%u frames, stack %u, n %u:\n", n, FW,
         FW, K, NSTEP);
  printf("  per_frames %10.1f bytes/transition (%.3fx one frame + "
         "scalars), %.2f GB\n",
         fper, fper / (FRAME + scalars), (double)fbytes / 1e9);
  printf("  naive      %10.1f bytes/transition, %.2f GB: %.2fx per_frames\n",
         nper, (double)nbytes / 1e9, nper / fper);
  memset(&r, 0, sizeof r);
  r.a_ns = fper; /* bytes, in the ns columns */
  r.b_ns = nper;
  r.reps = 1;
  bc_csv_row(csv, "memory_bytes", n, 0, &r, 1, "per_frames", "naive");
  if (fper > 1.05 * (FRAME + scalars)) fail("memory", "above 1.05x a frame");
}

/* Both sides fed one stream: episodes of 100 .. 1000 steps. */
typedef struct feed {
  per_frames f;
  per_buffer nb;
  per_nstep na;
  unsigned char stack[K * FRAME], nstack[K * FRAME];
  unsigned char *pool; /* POOL frames the stream cycles through */
  const unsigned char *obs, *next;
  uint64_t s, at;
  uint32_t t, len;
  int live;
} feed;

static void frame_fill(unsigned char *p, uint64_t *s) {
  uint32_t i;
  for (i = 0; i < FRAME; i += 8) {
    uint64_t v = bc_split(s);
    memcpy(p + i, &v, FRAME - i < 8 ? FRAME - i : 8);
  }
}

static void feed_frames(feed *d) {
  uint8_t a = (uint8_t)d->t;
  int end = d->t + 1 == d->len;
  if (per_frames_step(&d->f, 0, d->obs, &a, 1.0f, d->next, 0, end) != PER_OK)
    fail("step", d->f.error);
}

static void feed_naive(feed *d) {
  uint8_t a = (uint8_t)d->t;
  int end = d->t + 1 == d->len;
  if (!d->live) {
    uint32_t i;
    for (i = 0; i < K; ++i) memcpy(d->stack + i * FRAME, d->obs, FRAME);
    d->live = 1;
  }
  memcpy(d->nstack, d->stack + FRAME, (K - 1) * FRAME);
  memcpy(d->nstack + (K - 1) * FRAME, d->next, FRAME);
  if (per_nstep_step(&d->na, &d->nb, d->stack, &a, 1.0f, d->nstack, 0, end) !=
      PER_OK)
    fail("step", "per_nstep_step");
  memcpy(d->stack, d->nstack, K * FRAME);
  if (end) d->live = 0;
}

static void feed_next(feed *d) {
  d->t += 1;
  if (d->t == d->len) {
    d->t = 0;
    d->len = 100 + bc_below(&d->s, 901);
  }
  d->at += 1;
  d->obs = d->next;
  d->next = d->pool + (size_t)(d->at % POOL) * FRAME;
}

static void k_step_frames(void *p, uint64_t iters) {
  feed *d = (feed *)p;
  while (iters--) {
    feed_frames(d);
    feed_next(d);
  }
}

static void k_step_naive(void *p, uint64_t iters) {
  feed *d = (feed *)p;
  while (iters--) {
    feed_naive(d);
    feed_next(d);
  }
}

static int feed_init(feed *d, uint32_t n) {
  per_frames_config c = frames_config(n);
  per_nstep_config nc = naive_nstep();
  per_config bc = c.buffer;
  uint32_t i;
  memset(d, 0, sizeof *d);
  d->s = 99;
  d->len = 100 + bc_below(&d->s, 901);
  d->pool = (unsigned char *)bc_xmalloc((size_t)POOL * FRAME);
  for (i = 0; i < POOL; ++i) frame_fill(d->pool + (size_t)i * FRAME, &d->s);
  d->at = 1;
  d->obs = d->pool;
  d->next = d->pool + FRAME;
  bc.item_size = per_nstep_layout_of(&nc).size;
  return per_frames_init(&d->f, &c, NULL) == PER_OK &&
         per_buffer_init(&d->nb, &bc, NULL) == PER_OK &&
         per_nstep_init(&d->na, &nc, NULL) == PER_OK;
}

static void feed_free(feed *d) {
  free(d->pool);
  per_frames_free(&d->f);
  per_buffer_free(&d->nb);
  per_nstep_free(&d->na);
}

typedef struct draw {
  feed *d;
  uint32_t B;
  unsigned char *obs, *next, *act, *items;
  float *rew, *disc, *w;
  uint32_t *done;
  uint64_t *ids;
  per_frames_out out;
} draw;

static void k_sample_frames(void *p, uint64_t iters) {
  draw *c = (draw *)p;
  while (iters--)
    if (per_frames_sample(&c->d->f, c->B, NULL, &c->out) != PER_OK)
      fail("sample", c->d->f.error);
}

static void k_sample_naive(void *p, uint64_t iters) {
  draw *c = (draw *)p;
  while (iters--)
    if (per_buffer_sample(&c->d->nb, c->B, NULL, c->items, c->ids, c->w) !=
        PER_OK)
      fail("sample", c->d->nb.error);
}

static void run_step_sample(const bc_opts *o, FILE *csv, int want_step,
                            int want_sample) {
  uint32_t n = (uint32_t)sample_n, i, j;
  feed d;
  bc_result r;
  if (!feed_init(&d, n)) {
    fail("step", "init");
    return;
  }
  /* the same stream into both (same slots), past one wrap of the ring */
  for (i = 0; i < n + n / 8; ++i) {
    feed_frames(&d);
    feed_naive(&d);
    feed_next(&d);
  }
  if (per_frames_drawable(&d.f) != d.f.buffer.size)
    fail("sample", "not every transition drawable");
  for (j = 0; want_sample && j < (uint32_t)o->nb; ++j) {
    draw c;
    uint32_t B = (uint32_t)o->b[j];
    uint64_t *ids2 = (uint64_t *)bc_xmalloc(B * sizeof *ids2);
    memset(&c, 0, sizeof c);
    c.d = &d;
    c.B = B;
    c.obs = (unsigned char *)bc_xmalloc((size_t)B * K * FRAME);
    c.next = (unsigned char *)bc_xmalloc((size_t)B * K * FRAME);
    c.act = (unsigned char *)bc_xmalloc(B);
    c.items = (unsigned char *)bc_xmalloc((size_t)B * d.nb.cfg.item_size);
    c.rew = (float *)bc_xmalloc(B * sizeof(float));
    c.disc = (float *)bc_xmalloc(B * sizeof(float));
    c.w = (float *)bc_xmalloc(B * sizeof(float));
    c.done = (uint32_t *)bc_xmalloc(B * sizeof(uint32_t));
    c.ids = (uint64_t *)bc_xmalloc(B * sizeof(uint64_t));
    c.out.obs = c.obs;
    c.out.next_obs = c.next;
    c.out.action = c.act;
    c.out.reward = c.rew;
    c.out.discount = c.disc;
    c.out.done = c.done;
    c.out.ids = ids2;
    c.out.weights = c.w;
    /* one draw each from the same state: the same ids and stacks */
    k_sample_frames(&c, 1);
    k_sample_naive(&c, 1);
    if (memcmp(ids2, c.ids, B * sizeof *ids2) != 0)
      fail("sample", "the two sides drew different ids");
    for (i = 0; i < B; ++i)
      if (memcmp(c.obs + (size_t)i * K * FRAME,
                 c.items + (size_t)i * d.nb.cfg.item_size, K * FRAME) != 0)
        fail("sample", "a rebuilt stack differs from the naive one");
    r = bc_measure(o, k_sample_frames, &c, k_sample_naive, &c, B);
    printf("sample  %9u  B %5u  per_frames %8.1f ns   naive %8.1f ns", n, B,
           r.a_ns, r.b_ns);
    bc_print_ratio(&r);
    bc_csv_row(csv, "sample", n, B, &r, B, "per_frames", "naive_stacks");
    free(c.obs);
    free(c.next);
    free(c.act);
    free(c.items);
    free(c.rew);
    free(c.disc);
    free(c.w);
    free(c.done);
    free(c.ids);
    free(ids2);
  }
  /* steps on full rings (no first touch), each side its own steps */
  if (want_step) {
    bc_opts q = *o;
    q.reps = o->quick ? 1 : o->reps;
    r = bc_measure(&q, k_step_frames, &d, k_step_naive, &d, 1);
    printf("step    %9u            per_frames %8.1f ns   naive %8.1f ns", n,
           r.a_ns, r.b_ns);
    bc_print_ratio(&r);
    bc_csv_row(csv, "step", n, 0, &r, 1, "per_frames", "naive_stacks");
  }
  feed_free(&d);
}

int main(int argc, char **argv) {
  static const uint64_t def_n[] = {1000000}, quick_n[] = {20000};
  static const uint64_t def_b[] = {32}, quick_b[] = {8};
  bc_opts o;
  FILE *csv;
  int j;
  if (!bc_parse(&o, argc, argv, usage, extra_opt)) return 2;
  bc_default_list(o.n, &o.nn, o.quick ? quick_n : def_n, 1);
  bc_default_list(o.b, &o.nb, o.quick ? quick_b : def_b, 1);
  if (o.quick) sample_n = 2000;
  for (j = 0; j < o.nn; ++j)
    if (o.n[j] == 0 || o.n[j] > PER_MAX_CAPACITY) return 2;
  csv = bc_csv_open(&o);
  printf("bench_frames: per.h (PER_REAL=%s), %ux%u uint8 frames, stack %u, "
         "n %u\n",
         bc_real_name(), FW, FW, K, NSTEP);
  bc_print_setup(&o, "iterations", "");
  for (j = 0; j < o.nn; ++j)
    if (bc_want_op(&o, "memory")) run_memory(csv, (uint32_t)o.n[j]);
  if (bc_want_op(&o, "step") || bc_want_op(&o, "sample"))
    run_step_sample(&o, csv, bc_want_op(&o, "step"), bc_want_op(&o, "sample"));
  return bc_finish(csv, "bench_frames", failures,
                   "per_frames within 1.05x a frame a transition; both "
                   "sides drew the same ids and stacks");
}
