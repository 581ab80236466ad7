/* test_frames.c - frame stacks (per_frames_*): every stack rebuilt on
   sampling equals the one a naive buffer stores whole (the same stream
   through per_nstep into a per_buffer of full stacks), over random
   episodes of 1 .. 40 steps ending terminated or truncated, 1 and 3
   lanes stepped in random order, n = 1 and 3, stacks of 1 and 4, the
   ring wrapping many times, rings so small that transitions lose their
   frames and lanes restart; the draws (ids, weights) equal the naive
   buffer's under the same window, with PER_SAMPLE_UNIQUE, windows and
   priority updates; sequences that stop at episode ends; the memory;
   errors that name the field; no allocation per step or sample. */
#include "buffer_util.h"
#define PER_FRAMES_IMPLEMENTATION
#include "per_frames.h"

#define F 12u /* bytes a frame */
#define MAXK 4u

/* The frame step t of episode ep of lane i shows: bytes no other
   (lane, episode, step) shows. */
static void frame_at(uint32_t lane, uint32_t ep, uint32_t t, uint8_t *out) {
  uint64_t x = ((uint64_t)lane << 48) ^ ((uint64_t)ep << 20) ^ t;
  uint32_t i;
  for (i = 0; i < F; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = (uint8_t)(x >> 56);
  }
  memcpy(out, &t, 2); /* readable in a debugger */
  out[2] = (uint8_t)ep;
  out[3] = (uint8_t)lane;
}

static float reward_of(uint32_t lane, uint32_t ep, uint32_t t) {
  return (float)((int)((lane * 7u + ep * 3u + t * 5u) % 11u) - 4) * 0.25f;
}

/* One environment: its episode, its step and the episode's length. */
typedef struct env {
  uint32_t ep, t, len;
  int terminated;
  /* the naive side: the current stack, whole, and its adder */
  uint8_t stack[MAXK * F];
  int live;
  per_nstep adder;
} env;

/* When set, world_step gives this per_frames the same steps (a loaded
   copy that must go on as the original does). */
static per_frames *twin;

typedef struct world {
  per_frames f;
  per_buffer naive; /* items: per_nstep records of whole stacks */
  per_nstep_layout nl, fl;
  env envs[3];
  uint32_t lanes, k;
  int slow; /* the last lane steps once in 40 steps, the others share the
               rest: it waits while they write the ring over */
  per_rng rng;
} world;

static void world_init(world *w, uint32_t cap, uint32_t lanes, uint32_t k,
                       uint32_t n, uint64_t frames, per_config base) {
  per_frames_config c = per_frames_config_default(cap, F, k, 2);
  per_nstep_config nc;
  per_config bc = base;
  uint32_t i;
  memset(w, 0, sizeof *w);
  c.buffer = base;
  c.buffer.capacity = cap;
  c.n = n;
  c.gamma = 0.9f;
  c.lanes = lanes;
  c.frames = frames;
  REQUIRE(per_frames_init(&w->f, &c, NULL) == PER_OK);
  nc.n = n;
  nc.gamma = 0.9f;
  nc.obs_size = k * F;
  nc.action_size = 2;
  w->nl = per_nstep_layout_of(&nc);
  w->fl = per_frames_layout(&c);
  bc.capacity = cap;
  bc.item_size = w->nl.size;
  REQUIRE(per_buffer_init(&w->naive, &bc, NULL) == PER_OK);
  for (i = 0; i < lanes; ++i)
    REQUIRE(per_nstep_init(&w->envs[i].adder, &nc, NULL) == PER_OK);
  w->lanes = lanes;
  w->k = k;
  per_rng_init(&w->rng, 1000u + cap + lanes * 10u + k * 100u + n);
}

static void world_free(world *w) {
  uint32_t i;
  for (i = 0; i < w->lanes; ++i) per_nstep_free(&w->envs[i].adder);
  per_buffer_free(&w->naive);
  per_frames_free(&w->f);
}

/* One step of a random lane, on both sides. Episode lengths: 1 .. 40,
   a third of them 1 .. 3 steps. */
static void world_step(world *w, uint32_t max_len) {
  uint32_t lane = !w->slow ? per_rng_below(&w->rng, w->lanes)
                  : per_rng_below(&w->rng, 40) == 0
                      ? w->lanes - 1u
                      : per_rng_below(&w->rng, w->lanes - 1u);
  env *e = &w->envs[lane];
  uint8_t obs[F], next[F], nstack[MAXK * F];
  uint16_t action;
  uint64_t restarts = w->f.restarts;
  int end, term;
  uint32_t k = w->k;
  if (e->len == 0) {
    e->len = per_rng_below(&w->rng, 3) == 0
                 ? 1u + per_rng_below(&w->rng, 3)
                 : 1u + per_rng_below(&w->rng, max_len);
    e->terminated = (int)per_rng_below(&w->rng, 2);
  }
  frame_at(lane, e->ep, e->t, obs);
  frame_at(lane, e->ep, e->t + 1u, next);
  action = (uint16_t)(e->t * 31u + lane);
  end = e->t + 1u == e->len;
  term = end && e->terminated;
  CHECK_OK(per_frames_step(&w->f, lane, obs, &action,
                           reward_of(lane, e->ep, e->t), next, term,
                           end && !term));
  if (twin)
    CHECK_OK(per_frames_step(twin, lane, obs, &action,
                             reward_of(lane, e->ep, e->t), next, term,
                             end && !term));
  /* the naive side: whole stacks, the first frame repeated */
  if (w->f.restarts != restarts) {
    per_nstep_reset(&e->adder);
    e->live = 0;
  }
  if (!e->live) {
    uint32_t i;
    for (i = 0; i < k; ++i) memcpy(e->stack + i * F, obs, F);
    e->live = 1;
  }
  memcpy(nstack, e->stack + F, (k - 1u) * F);
  memcpy(nstack + (k - 1u) * F, next, F);
  CHECK_OK(per_nstep_step(&e->adder, &w->naive, e->stack, &action,
                          reward_of(lane, e->ep, e->t), nstack, term,
                          end && !term));
  memcpy(e->stack, nstack, k * F);
  /* a lane that goes on keeps every frame it needs */
  if (!end)
    CHECK(peri_frames_lane_low(&w->f, lane) >= peri_frames_first(&w->f));
  e->t += 1;
  if (end) {
    e->live = 0;
    e->ep += 1;
    e->t = 0;
    e->len = 0;
  }
}

/* Every drawable transition, rebuilt, against the naive one in the same
   slot; and the frames of the newest transitions that are not drawable
   really are gone (else the window would be too narrow). */
static void check_all(world *w) {
  uint32_t cap = w->f.buffer.cfg.capacity, k = w->k;
  uint32_t drawable = per_frames_drawable(&w->f);
  uint64_t a;
  uint8_t got[MAXK * F];
  unsigned bad = 0;
  CHECK_EQ_U(w->f.buffer.added, w->naive.added);
  CHECK(drawable <= w->f.buffer.size);
  CHECK_OK(per_frames_check(&w->f));
  for (a = w->f.buffer.added - drawable; a < w->f.buffer.added; ++a) {
    uint32_t slot = (uint32_t)(a % cap);
    const unsigned char *rec =
        w->f.buffer.items + (size_t)slot * w->f.buffer.cfg.item_size;
    const unsigned char *nv =
        w->naive.items + (size_t)slot * w->naive.cfg.item_size;
    peri_frames_gather(&w->f, rec + w->fl.obs, got);
    bad += memcmp(got, nv + w->nl.obs, k * F) != 0;
    peri_frames_gather(&w->f, rec + w->fl.next_obs, got);
    bad += memcmp(got, nv + w->nl.next_obs, k * F) != 0;
    bad += memcmp(rec + w->fl.action, nv + w->nl.action, 2) != 0;
    bad += memcmp(rec + w->fl.reward, nv + w->nl.reward, 12) != 0;
  }
  CHECK_MSG(bad == 0, "%u fields of drawable transitions differ", bad);
  if (drawable < w->f.buffer.size) {
    /* the newest transition left out lost a frame */
    uint32_t slot = (uint32_t)((w->f.buffer.added - drawable - 1u) % cap);
    const unsigned char *rec =
        w->f.buffer.items + (size_t)slot * w->f.buffer.cfg.item_size;
    uint64_t low;
    memcpy(&low, rec + w->fl.obs, 8);
    CHECK(low < peri_frames_first(&w->f));
  }
}

/* B draws from both sides under the same options: the same ids and
   weights, and each drawn transition rebuilt as the naive one. */
static void check_draws(world *w, uint32_t B, per_sample_opts *opts,
                        uint64_t *ids) {
  uint32_t k = w->k, j, L = 1;
  size_t sb = k * F;
  uint8_t obs[64 * MAXK * F], next[64 * MAXK * F], act[64 * 2];
  uint8_t items[64 * 400];
  float rew[64], disc[64], wf[64], wn[64];
  uint32_t done[64];
  uint64_t idf[64], idn[64];
  per_frames_out out;
  per_sample_opts o;
  per_status sf, sn;
  unsigned bad = 0;
  memset(&out, 0, sizeof out);
  out.obs = obs;
  out.next_obs = next;
  out.action = act;
  out.reward = rew;
  out.discount = disc;
  out.done = done;
  out.ids = idf;
  out.weights = wf;
  if (opts) o = *opts;
  else memset(&o, 0, sizeof o);
  if (o.flags & PER_SAMPLE_SEQUENCES) L = w->f.buffer.cfg.seq_len;
  REQUIRE(B * L <= 64 && w->naive.cfg.item_size <= 400);
  {
    uint32_t d = per_frames_drawable(&w->f);
    if (d < w->f.buffer.size && (o.window == 0 || o.window > d)) o.window = d;
  }
  sf = per_frames_sample(&w->f, B, opts, &out);
  sn = per_buffer_sample(&w->naive, B, &o, items, idn, wn);
  CHECK_STATUS(sf, sn);
  if (sf != PER_OK) return;
  CHECK_MEM(idf, idn, B * sizeof *idf);
  CHECK_MEM(wf, wn, B * sizeof *wf);
  for (j = 0; j < B * L; ++j) {
    const unsigned char *nv = items + (size_t)j * w->naive.cfg.item_size;
    bad += memcmp(obs + j * sb, nv + w->nl.obs, sb) != 0;
    bad += memcmp(next + j * sb, nv + w->nl.next_obs, sb) != 0;
    bad += memcmp(act + j * 2, nv + w->nl.action, 2) != 0;
    bad += memcmp(&rew[j], nv + w->nl.reward, 4) != 0;
    bad += memcmp(&disc[j], nv + w->nl.discount, 4) != 0;
    bad += memcmp(&done[j], nv + w->nl.done, 4) != 0;
  }
  CHECK_MSG(bad == 0, "%u fields of drawn transitions differ", bad);
  if (ids) memcpy(ids, idf, B * sizeof *idf);
}

/* Random runs: wrap, lanes, n, k, rings from small to the default. */
static void test_streams(void) {
  static const uint32_t lanes[] = {1, 3};
  static const uint32_t ks[] = {1, 4};
  static const uint32_t ns[] = {1, 3};
  uint32_t a, b, c, r;
  unsigned runs = 0;
  uint64_t restarts = 0, short_windows = 0;
  for (a = 0; a < 2; ++a)
    for (b = 0; b < 2; ++b)
      for (c = 0; c < 2; ++c)
        for (r = 0; r < 3; ++r) {
          per_config base = per_config_default(64, 1);
          world w;
          uint64_t floor = (uint64_t)lanes[a] * (ks[b] + ns[c] + 2u);
          /* the smallest ring, a short one, the default */
          uint64_t frames = r == 0 ? floor : r == 1 ? 48u + floor : 0u;
          uint32_t step;
          base.seed = 7u + r;
          world_init(&w, 64, lanes[a], ks[b], ns[c], frames, base);
          for (step = 0; step < 1500; ++step) {
            world_step(&w, 40);
            if (step % 97 == 0) check_all(&w);
            if (step % 13 == 0 && per_frames_drawable(&w.f) > 0) {
              per_sample_opts o;
              uint64_t ids[16] = {0};
              float td[16];
              uint32_t j;
              memset(&o, 0, sizeof o);
              o.window = step % 2 ? 0u : 20u;
              o.flags = step % 3 == 0 ? PER_SAMPLE_UNIQUE : 0u;
              if ((o.flags & PER_SAMPLE_UNIQUE) &&
                  per_frames_drawable(&w.f) < 8u)
                o.flags = 0;
              check_draws(&w, 8, &o, NULL);
              /* the same updates on both sides */
              memset(&o, 0, sizeof o);
              check_draws(&w, 16, &o, ids);
              for (j = 0; j < 16; ++j)
                td[j] = (float)(per_rng_below(&w.rng, 100)) * 0.03f;
              CHECK_OK(per_frames_update(&w.f, ids, td, 16, NULL));
              CHECK_OK(per_buffer_update(&w.naive, ids, td, 16, NULL));
            }
          }
          check_all(&w);
          CHECK_OK(per_frames_check(&w.f));
          /* the default ring keeps every transition drawable when one
             lane's episodes are long enough: asserted below */
          restarts += w.f.restarts;
          short_windows += per_frames_drawable(&w.f) < w.f.buffer.size;
          ++runs;
          world_free(&w);
        }
  CHECK_EQ_U(runs, 24);
  /* the small rings must have exercised both ways of losing frames */
  CHECK(restarts > 0);
  CHECK(short_windows > 0);
}

/* The default ring: with episodes of 64 steps or more every stored
   transition stays drawable, one lane or three in turn. */
static void test_default_ring(void) {
  uint32_t lanes, step;
  for (lanes = 1; lanes <= 3; lanes += 2) {
    per_config base = per_config_default(640, 1);
    world w;
    uint64_t short_at = 0;
    world_init(&w, 640, lanes, 4, 3, 0, base);
    for (step = 0; step < 6000; ++step) {
      env *e;
      uint32_t lane = step % lanes;
      uint8_t obs[F], next[F];
      uint16_t action = 1;
      int end;
      /* round robin, episodes of 64 .. 90 steps */
      e = &w.envs[lane];
      if (e->len == 0) e->len = 64u + (uint32_t)((step * 7u) % 27u);
      frame_at(lane, e->ep, e->t, obs);
      frame_at(lane, e->ep, e->t + 1u, next);
      end = e->t + 1u == e->len;
      CHECK_OK(per_frames_step(&w.f, lane, obs, &action, 1.0f, next, 0, end));
      e->t += 1;
      if (end) {
        e->ep += 1;
        e->t = 0;
        e->len = 0;
      }
      if (per_frames_drawable(&w.f) != w.f.buffer.size && !short_at)
        short_at = step + 1u;
    }
    CHECK_EQ_U(short_at, 0);
    CHECK_EQ_U(w.f.restarts, 0);
    CHECK_EQ_U(w.f.buffer.size, 640);
    CHECK_OK(per_frames_check(&w.f));
    world_free(&w);
  }
}

/* Sequences (one lane): steps of one episode, in order, never across an
   end (the last step of an episode is stored with its end). */
static void test_sequences(void) {
  per_config base = per_config_default(64, 1);
  world w;
  uint32_t step, j, s, L = 4, bad = 0, ends = 0;
  uint8_t obs[8 * 4 * MAXK * F];
  uint32_t done[32];
  uint64_t ids[8];
  per_frames_out out;
  per_sample_opts o;
  base.seq_len = L;
  base.seq_stride = 2;
  world_init(&w, 64, 1, 2, 1, 0, base);
  for (step = 0; step < 700; ++step) world_step(&w, 12);
  for (j = 0; j < 64; ++j) ends += w.f.buffer.ends[j] != PER_END_NONE;
  CHECK(ends > 0);
  memset(&out, 0, sizeof out);
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_SEQUENCES;
  out.obs = obs;
  out.done = done;
  out.ids = ids;
  for (step = 0; step < 50; ++step) {
    CHECK_OK(per_frames_sample(&w.f, 8, &o, &out));
    for (j = 0; j < 8; ++j) {
      CHECK(ids[j] & PER_ID_SEQ);
      for (s = 0; s + 1u < L; ++s) {
        /* the newest frame of step s + 1 follows step s's in its episode */
        const uint8_t *a = obs + ((j * L + s) * 2u + 1u) * F;
        const uint8_t *b = obs + ((j * L + s + 1u) * 2u + 1u) * F;
        uint16_t ta, tb;
        memcpy(&ta, a, 2);
        memcpy(&tb, b, 2);
        bad += a[2] != b[2] || a[3] != b[3] || tb != ta + 1u;
      }
    }
  }
  CHECK_MSG(bad == 0, "%u sequence steps not consecutive", bad);
  world_free(&w);
}

/* A lane restarts exactly when this step's frame would overwrite the
   oldest frame it still needs: one frame later is too late. */
static void test_restart_boundary(void) {
  per_frames_config c = per_frames_config_default(32, F, 2, 2);
  per_frames f;
  uint8_t fr[F] = {0};
  uint16_t act = 0;
  uint32_t i;
  c.n = 2;
  c.lanes = 2;
  c.frames = 12; /* the floor: 2 * (2 + 2 + 2) */
  REQUIRE(per_frames_init(&f, &c, NULL) == PER_OK);
  /* lane 0: one step, pending (n = 2), needs frame 0 */
  CHECK_OK(per_frames_step(&f, 0, fr, &act, 1, fr, 0, 0));
  CHECK_EQ_U(f.next_frame, 2);
  /* lane 1 writes frames 2 .. 11: frame 0 is still in the ring */
  for (i = 0; i < 9; ++i)
    CHECK_OK(per_frames_step(&f, 1, fr, &act, 1, fr, 0, 0));
  CHECK_EQ_U(f.next_frame, 12);
  CHECK_EQ_U(f.restarts, 0);
  /* lane 0's next frame would overwrite frame 0: it restarts */
  CHECK_OK(per_frames_step(&f, 0, fr, &act, 1, fr, 0, 0));
  CHECK_EQ_U(f.restarts, 1);
  CHECK_EQ_U(f.next_frame, 14);
  CHECK(peri_frames_lane_low(&f, 0) >= peri_frames_first(&f));
  CHECK_EQ_U(per_frames_drawable(&f), f.buffer.size);
  CHECK_OK(per_frames_check(&f));
  per_frames_free(&f);
}

#define FNAME(s) (IS_FLOAT ? "frames_float_" s : "frames_double_" s)

/* f's state that a refused load must leave as it was. */
typedef struct frames_state {
  uint64_t next_frame, added, drawable_from, restarts;
  uint32_t low_len, size;
  unsigned char *ring;
} frames_state;

static frames_state state_of(const per_frames *f) {
  frames_state x;
  size_t rb = (size_t)f->cfg.frames * f->cfg.frame_bytes;
  x.next_frame = f->next_frame;
  x.added = f->buffer.added;
  x.drawable_from = f->drawable_from;
  x.restarts = f->restarts;
  x.low_len = f->low_len;
  x.size = f->buffer.size;
  x.ring = (unsigned char *)malloc(rb);
  memcpy(x.ring, f->ring, rb);
  return x;
}

/* 1 when f is in state x; frees x. */
static int state_same(const per_frames *f, frames_state *x) {
  size_t rb = (size_t)f->cfg.frames * f->cfg.frame_bytes;
  int same = x->next_frame == f->next_frame && x->added == f->buffer.added &&
             x->drawable_from == f->drawable_from &&
             x->restarts == f->restarts && x->low_len == f->low_len &&
             x->size == f->buffer.size && memcmp(x->ring, f->ring, rb) == 0;
  free(x->ring);
  return same;
}

static long file_size(const char *path) {
  FILE *fp = fopen(path, "rb");
  long n;
  if (!fp) return -1;
  fseek(fp, 0, SEEK_END);
  n = ftell(fp);
  fclose(fp);
  return n;
}

/* Flip one byte of a file at offset `at` (from the end when negative). */
static void flip_byte(const char *path, long at) {
  FILE *fp = fopen(path, "r+b");
  int c;
  REQUIRE(fp != NULL);
  fseek(fp, at, at < 0 ? SEEK_END : SEEK_SET);
  c = fgetc(fp);
  fseek(fp, -1, SEEK_CUR);
  fputc(c ^ 0x5a, fp);
  fclose(fp);
}

static void copy_file(const char *from, const char *to) {
  FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
  int c;
  REQUIRE(a && b);
  while ((c = fgetc(a)) != EOF) fputc(c, b);
  fclose(a);
  fclose(b);
}

/* Save, load into a fresh per_frames, and both go on alike: the same
   steps give the same draws, weights and stacks. Then every refusal. */
static void test_checkpoint(void) {
  per_config base = per_config_default(64, 1);
  world w;
  per_frames g, h;
  per_frames_config c;
  uint32_t step;
  const char *path = FNAME("ckpt.bin"), *bad = FNAME("bad.bin");
  frames_state x;
  base.seed = 11;
  /* three lanes, a small ring: restarts and lost frames are saved too */
  world_init(&w, 64, 3, 4, 3, 3u * (4u + 3u + 2u) + 30u, base);
  w.slow = 1;
  for (step = 0; step < 900; ++step) world_step(&w, 20);
  REQUIRE(w.f.restarts > 0 && per_frames_drawable(&w.f) < w.f.buffer.size);
  CHECK_OK(per_frames_save(&w.f, path));
  c = w.f.cfg;
  REQUIRE(per_frames_init(&g, &c, NULL) == PER_OK);
  CHECK_OK(per_frames_load(&g, path));
  CHECK_STR(g.error, "");
  CHECK_OK(per_frames_check(&g));
  CHECK_EQ_U(g.next_frame, w.f.next_frame);
  CHECK_EQ_U(per_frames_drawable(&g), per_frames_drawable(&w.f));
  CHECK_EQ_U(g.restarts, w.f.restarts);
  /* go on side by side */
  twin = &g;
  for (step = 0; step < 400; ++step) {
    world_step(&w, 20);
    if (step % 20 == 0) {
      uint8_t o1[8 * 4 * F], o2[8 * 4 * F], n1[8 * 4 * F], n2[8 * 4 * F];
      uint64_t i1[8], i2[8];
      float w1[8], w2[8], td[8];
      per_frames_out a, b;
      uint32_t j;
      memset(&a, 0, sizeof a);
      memset(&b, 0, sizeof b);
      a.obs = o1;
      a.next_obs = n1;
      a.ids = i1;
      a.weights = w1;
      b.obs = o2;
      b.next_obs = n2;
      b.ids = i2;
      b.weights = w2;
      CHECK_OK(per_frames_sample(&w.f, 8, NULL, &a));
      CHECK_OK(per_frames_sample(&g, 8, NULL, &b));
      CHECK_MEM(i1, i2, sizeof i1);
      CHECK_MEM(w1, w2, sizeof w1);
      CHECK_MEM(o1, o2, sizeof o1);
      CHECK_MEM(n1, n2, sizeof n1);
      for (j = 0; j < 8; ++j) td[j] = (float)j * 0.1f;
      CHECK_OK(per_frames_update(&w.f, i1, td, 8, NULL));
      CHECK_OK(per_frames_update(&g, i2, td, 8, NULL));
    }
  }
  twin = NULL;
  CHECK_OK(per_frames_check(&g));
  /* refusals leave g as it was and say why */
  CHECK_OK(per_frames_save(&w.f, path));
  c.stack = 3;
  REQUIRE(per_frames_init(&h, &c, NULL) == PER_OK);
  CHECK_STATUS(per_frames_load(&h, path), PER_ERR_MISMATCH);
  CHECK_STR(h.error, "the checkpoint's stack 4, the buffer's 3");
  per_frames_free(&h);
  c = w.f.cfg;
  c.frames += 1;
  REQUIRE(per_frames_init(&h, &c, NULL) == PER_OK);
  CHECK_STATUS(per_frames_load(&h, path), PER_ERR_MISMATCH);
  CHECK_STR(h.error, "the checkpoint's frames");
  per_frames_free(&h);
  {
    long size = file_size(path);
    /* the records: a buffer checkpoint at the end of the file */
    size_t cap = per_buffer_snapshot_bytes(&w.f.buffer), rlen = 0;
    unsigned char *snap = (unsigned char *)malloc(cap);
    long records;
    /* the last frame's byte, a record's, a lane's live flag */
    long at[3];
    static const per_status want[] = {PER_ERR_CHECKSUM, PER_ERR_CHECKSUM,
                                      PER_ERR_CORRUPT};
    uint32_t q;
    REQUIRE(snap &&
            per_buffer_snapshot(&w.f.buffer, snap, cap, &rlen) == PER_OK);
    free(snap);
    records = size - (long)rlen;
    at[0] = records - 4 - 1;
    at[1] = size - 20;
    at[2] = PERI_FRAMES_HEAD + 3;
    REQUIRE(size > 0 && records > PERI_FRAMES_HEAD);
    for (q = 0; q < 3; ++q) {
      long off = at[q];
      copy_file(path, bad);
      flip_byte(bad, off);
      x = state_of(&g);
      CHECK_STATUS(per_frames_load(&g, bad), want[q]);
      CHECK(g.error[0] != 0);
      CHECK(state_same(&g, &x));
    }
    /* truncated */
    {
      FILE *a = fopen(path, "rb"), *b = fopen(bad, "wb");
      long i;
      REQUIRE(a && b);
      for (i = 0; i < size / 2; ++i) fputc(fgetc(a), b);
      fclose(a);
      fclose(b);
      x = state_of(&g);
      CHECK_STATUS(per_frames_load(&g, bad), PER_ERR_TRUNCATED);
      CHECK(state_same(&g, &x));
    }
  }
  /* a plain buffer checkpoint is not a per_frames file */
  CHECK_OK(per_buffer_save(&w.f.buffer, bad));
  x = state_of(&g);
  CHECK_STATUS(per_frames_load(&g, bad), PER_ERR_FORMAT);
  CHECK_STR(g.error, "not a per_frames checkpoint");
  CHECK(state_same(&g, &x));
  CHECK_STATUS(per_frames_load(&g, FNAME("missing.bin")), PER_ERR_IO);
  CHECK_STATUS(per_frames_load(&g, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_frames_save(&g, NULL), PER_ERR_NULL);
  CHECK_OK(per_frames_check(&g));
  remove(path);
  remove(bad);
  per_frames_free(&g);
  world_free(&w);
}

/* Memory: the ring is frames * frame_bytes and a record is the stacks'
   counters plus the step's scalars, so a transition costs about one
   frame where a naive item holds two stacks. */
static void test_memory(void) {
  per_frames_config c = per_frames_config_default(100000, 84 * 84, 4, 1);
  per_frames f;
  t_heap h;
  uint32_t rec = per_frames_record_size(&c);
  double per_transition;
  memset(&h, 0, sizeof h);
  /* counters of both stacks, the action padded to 4, reward, discount,
     done */
  CHECK_EQ_U(rec, 4u * 8u + 4u + 12u + 4u * 8u);
  REQUIRE(per_frames_init(&f, &c, &h) == PER_OK);
  CHECK_EQ_U(f.cfg.frames, 100000u + 100000u / 64u + 4u + 1u + 2u);
  CHECK(h.max_bytes == (size_t)f.cfg.frames * 84u * 84u);
  per_transition = (double)f.cfg.frames * 84 * 84 / 100000.0 + rec;
  CHECK(per_transition < 1.05 * 84 * 84);
  per_frames_free(&f);
  CHECK_EQ_U(h.live, 0);
}

/* Errors: what is refused names the field; nothing changes. */
static void test_errors(void) {
  per_frames_config c = per_frames_config_default(32, F, 4, 2);
  per_frames f;
  uint8_t fr[F] = {0};
  uint16_t act = 0;
  uint64_t ids[4];
  per_frames_out out;
  uint64_t next;
  memset(&out, 0, sizeof out);
  out.ids = ids;
  CHECK_STATUS(per_frames_init(NULL, &c, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_frames_init(&f, NULL, NULL), PER_ERR_NULL);
  CHECK_STR(f.error, "cfg is NULL");
  c.frame_bytes = 0;
  CHECK_STATUS(per_frames_init(&f, &c, NULL), PER_ERR_ARG);
  CHECK_STR(f.error, "frame_bytes 0");
  c.frame_bytes = F;
  c.stack = 65;
  CHECK_STATUS(per_frames_init(&f, &c, NULL), PER_ERR_ARG);
  CHECK_STR(f.error, "stack 65");
  c.stack = 4;
  c.lanes = 0;
  CHECK_STATUS(per_frames_init(&f, &c, NULL), PER_ERR_ARG);
  CHECK_STR(f.error, "lanes 0");
  c.lanes = 2;
  c.gamma = 1.5f;
  CHECK_STATUS(per_frames_init(&f, &c, NULL), PER_ERR_ARG);
  CHECK_STR(f.error, "gamma");
  c.gamma = 0.9f;
  c.frames = 10;
  CHECK_STATUS(per_frames_init(&f, &c, NULL), PER_ERR_ARG);
  CHECK_STR(f.error, "frames 10 < lanes * (stack + n + 2) = 14");
  c.frames = 0;
  c.buffer.alpha = -1;
  CHECK_STATUS(per_frames_init(&f, &c, NULL), PER_ERR_ARG);
  CHECK_STR(f.error, "buffer: alpha is negative");
  c.buffer.alpha = 0.6;
  {
    /* every allocation failing in turn: refused, nothing leaks */
    t_heap h;
    long k, calls;
    memset(&h, 0, sizeof h);
    REQUIRE(per_frames_init(&f, &c, &h) == PER_OK);
    per_frames_free(&f);
    calls = h.calls;
    for (k = 1; k <= calls; ++k) {
      memset(&h, 0, sizeof h);
      h.fail_at = k;
      CHECK_STATUS(per_frames_init(&f, &c, &h), PER_ERR_NOMEM);
      CHECK_EQ_U(h.live, 0);
    }
  }
  REQUIRE(per_frames_init(&f, &c, NULL) == PER_OK);
  CHECK_STATUS(per_frames_sample(&f, 4, NULL, &out), PER_ERR_EMPTY);
  CHECK_STR(f.error, "the buffer is empty");
  CHECK_STATUS(per_frames_step(&f, 2, fr, &act, 0, fr, 0, 0), PER_ERR_INDEX);
  CHECK_STR(f.error, "lane 2 >= lanes 2");
  CHECK_STATUS(per_frames_step(&f, 0, NULL, &act, 0, fr, 0, 0), PER_ERR_NULL);
  CHECK_STR(f.error, "obs_frame is NULL");
  CHECK_STATUS(per_frames_step(&f, 0, fr, &act, 0, NULL, 0, 0), PER_ERR_NULL);
  CHECK_STR(f.error, "next_frame is NULL");
  next = f.next_frame;
  CHECK_STATUS(per_frames_step(&f, 0, fr, &act, (float)NAN, fr, 0, 0),
               PER_ERR_NAN);
  CHECK_STR(f.error, "reward is NaN");
  CHECK_STATUS(per_frames_step(&f, 0, fr, &act, (float)INFINITY, fr, 0, 0),
               PER_ERR_INF);
  CHECK_EQ_U(f.next_frame, next);
  CHECK_OK(per_frames_step(&f, 0, fr, &act, 1, fr, 0, 1));
  CHECK_STR(f.error, "");
  CHECK_EQ_U(f.next_frame, 2);
  CHECK_EQ_U(f.buffer.size, 1);
  CHECK_STATUS(per_frames_sample(&f, 0, NULL, &out), PER_ERR_BATCH);
  CHECK_STR(f.error, "batch size B is 0");
  out.ids = NULL;
  CHECK_STATUS(per_frames_sample(&f, 1, NULL, &out), PER_ERR_NULL);
  CHECK_STR(f.error, "out->ids is NULL");
  out.ids = ids;
  CHECK_OK(per_frames_sample(&f, 4, NULL, &out));
  CHECK_STATUS(per_frames_reset_lane(&f, 5), PER_ERR_INDEX);
  CHECK_OK(per_frames_reset_lane(&f, 1));
  CHECK_OK(per_frames_check(&f));
  per_frames_free(&f);
  per_frames_free(&f);
  per_frames_free(NULL);
  CHECK_EQ_U(per_frames_drawable(NULL), 0);
}

/* Steps and samples allocate nothing. */
static void test_no_alloc(void) {
  per_frames_config c = per_frames_config_default(50, F, 4, 2);
  per_frames f;
  t_heap h;
  uint8_t fr[F] = {1}, obs[8 * 4 * F];
  uint16_t act = 0;
  uint64_t ids[8];
  float td[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  per_frames_out out;
  long calls;
  uint32_t i;
  memset(&h, 0, sizeof h);
  memset(&out, 0, sizeof out);
  out.ids = ids;
  out.obs = obs;
  c.n = 3;
  REQUIRE(per_frames_init(&f, &c, &h) == PER_OK);
  calls = h.calls;
  for (i = 0; i < 500; ++i) {
    CHECK_OK(per_frames_step(&f, 0, fr, &act, 1, fr, 0, i % 37 == 36));
    if (i % 10 == 9) {
      CHECK_OK(per_frames_sample(&f, 8, NULL, &out));
      CHECK_OK(per_frames_update(&f, ids, td, 8, NULL));
    }
  }
  CHECK_EQ_U(h.calls, calls);
  per_frames_free(&f);
  CHECK_EQ_U(h.live, 0);
}

int main(void) {
  test_streams();
  test_default_ring();
  test_restart_boundary();
  test_checkpoint();
  test_sequences();
  test_memory();
  test_errors();
  test_no_alloc();
  return t_done("frames");
}
