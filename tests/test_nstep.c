/* test_nstep.c - the n-step adder (per_nstep_*): layouts, returns checked
   against a direct computation for n = 1, 3, 5 over terminated and
   truncated episodes of every length, two adders feeding one buffer,
   errors, no allocation per step; PER_NSTEP_ITEM's structs against the
   emitted bytes; pending steps saved and loaded. */
#include "buffer_util.h"

#include <stdio.h>

/* The item structs users declare: each must match per_nstep_layout_of
   (PER_NSTEP_ITEM's own check stops the build otherwise). */
PER_NSTEP_ITEM(cart_item, float, 4, int32_t, 1);
PER_NSTEP_ITEM(atari_item, uint8_t, 84, uint16_t, 1);
PER_NSTEP_ITEM(wide_item, double, 3, int32_t, 3);
PER_NSTEP_ITEM(chunk_item, uint16_t, 6, float, 3);

/* Observations are 3 uint32: (env, episode, t); actions one uint16. */
typedef struct obs3 {
  uint32_t env, ep, t;
} obs3;

static obs3 make_obs(uint32_t env, uint32_t ep, uint32_t t) {
  obs3 o;
  o.env = env;
  o.ep = ep;
  o.t = t;
  return o;
}

static float reward_at(uint32_t env, uint32_t ep, uint32_t t) {
  return (float)((int)((env * 7 + ep * 3 + t * 5) % 11) - 4) * 0.5f +
         0.125f * (float)env;
}

/* The item step t of an episode of length T (ending by `terminated`) must
   be, computed directly from the definition. */
static void expected_item(const per_nstep_config *nc, const per_nstep_layout *l,
                          uint32_t env, uint32_t ep, uint32_t t, uint32_t T,
                          int terminated, unsigned char *item) {
  uint32_t m = T - t < nc->n ? T - t : nc->n, k, done;
  double acc = 0, g = 1;
  float r, d;
  obs3 o = make_obs(env, ep, t), next = make_obs(env, ep, t + m);
  uint16_t a = (uint16_t)(t * 13 + env);
  for (k = 0; k < m; ++k) {
    acc += g * (double)reward_at(env, ep, t + k);
    g *= (double)nc->gamma;
  }
  r = (float)acc;
  d = (float)g;
  done = (terminated && t + m == T) ? 1u : 0u;
  memset(item, 0, l->size);
  memcpy(item + l->obs, &o, sizeof o);
  memcpy(item + l->action, &a, sizeof a);
  memcpy(item + l->reward, &r, sizeof r);
  memcpy(item + l->discount, &d, sizeof d);
  memcpy(item + l->done, &done, sizeof done);
  memcpy(item + l->next_obs, &next, sizeof next);
}

/* Run one episode of length T through the adder. */
static void run_episode(per_nstep *a, per_buffer *b, uint32_t env, uint32_t ep,
                        uint32_t T, int terminated) {
  uint32_t t;
  for (t = 0; t < T; ++t) {
    obs3 o = make_obs(env, ep, t), next = make_obs(env, ep, t + 1);
    uint16_t act = (uint16_t)(t * 13 + env);
    int end = t + 1 == T;
    CHECK_OK(per_nstep_step(a, b, &o, &act, reward_at(env, ep, t), &next,
                            end && terminated, end && !terminated));
  }
}

static per_nstep_config nstep_cfg(uint32_t n, float gamma, uint32_t obs_size,
                                  uint32_t action_size) {
  per_nstep_config nc;
  nc.n = n;
  nc.gamma = gamma;
  nc.obs_size = obs_size;
  nc.action_size = action_size;
  return nc;
}

/* A buffer of `capacity` items of nc's layout; returns the layout. */
static per_nstep_layout nstep_buffer(per_buffer *b, const per_nstep_config *nc,
                                     uint32_t capacity) {
  per_nstep_layout l = per_nstep_layout_of(nc);
  per_config c = cfg_of(capacity, l.size);
  CHECK_OK(per_buffer_init(b, &c, NULL));
  return l;
}

static void test_layout(void) {
  per_nstep_config nc;
  per_nstep_layout l;
  nc = nstep_cfg(3, 0.99f, 12, 4);
  l = per_nstep_layout_of(&nc);
  CHECK_EQ_U(l.obs, 0);
  CHECK_EQ_U(l.action, 12);
  CHECK_EQ_U(l.reward, 16);
  CHECK_EQ_U(l.discount, 20);
  CHECK_EQ_U(l.done, 24);
  CHECK_EQ_U(l.next_obs, 28);
  CHECK_EQ_U(l.size, 40);
  nc.obs_size = 5;
  nc.action_size = 2; /* 7 -> reward at 8 */
  l = per_nstep_layout_of(&nc);
  CHECK_EQ_U(l.reward, 8);
  CHECK_EQ_U(l.next_obs, 20);
  CHECK_EQ_U(l.size, 25);
  nc.obs_size = 0xfffffff0u;
  l = per_nstep_layout_of(&nc);
  CHECK_EQ_U(l.size, 0);
  l = per_nstep_layout_of(NULL);
  CHECK_EQ_U(l.size, 0);
}

/* A hand-computed case: n = 3, gamma 0.5, rewards 1..5, terminated after
   5 steps. Items: t0: 1 + 1 + 0.75 = 2.75 (disc 0.125, next t3, done 0),
   t1: 2 + 1.5 + 1 = 4.5, then the flush: t2: 3 + 2 + 1.25 = 6.25 (done 1),
   t3: 4 + 2.5 = 6.5 (disc 0.25), t4: 5 (disc 0.5). */
static void test_hand(void) {
  static const float want_r[5] = {2.75f, 4.5f, 6.25f, 6.5f, 5.0f};
  static const float want_d[5] = {0.125f, 0.125f, 0.125f, 0.25f, 0.5f};
  static const uint32_t want_done[5] = {0, 0, 1, 1, 1};
  static const uint32_t want_next[5] = {3, 4, 5, 5, 5};
  per_nstep_config nc;
  per_nstep a;
  per_nstep_layout l;
  per_buffer b;
  uint32_t t, i;
  nc = nstep_cfg(3, 0.5f, 4, 4);
  l = nstep_buffer(&b, &nc, 16);
  CHECK_OK(per_nstep_init(&a, &nc, NULL));
  for (t = 0; t < 5; ++t) {
    uint32_t o = t, next = t + 1, act = 100 + t;
    CHECK_OK(
        per_nstep_step(&a, &b, &o, &act, (float)(t + 1), &next, t == 4, 0));
    CHECK_EQ_U(per_buffer_size(&b), t < 2 ? 0 : (t < 4 ? t - 1 : 5));
  }
  for (i = 0; i < 5; ++i) {
    const unsigned char *it = b.items + (size_t)i * l.size;
    uint32_t o, act, done, next;
    float r, d;
    memcpy(&o, it + l.obs, 4);
    memcpy(&act, it + l.action, 4);
    memcpy(&r, it + l.reward, 4);
    memcpy(&d, it + l.discount, 4);
    memcpy(&done, it + l.done, 4);
    memcpy(&next, it + l.next_obs, 4);
    CHECK_EQ_U(o, i);
    CHECK_EQ_U(act, 100 + i);
    CHECK_EQ_F(r, want_r[i]);
    CHECK_EQ_F(d, want_d[i]);
    CHECK_EQ_U(done, want_done[i]);
    CHECK_EQ_U(next, want_next[i]);
  }
  /* the same episode truncated: done 0 everywhere, same discounts */
  per_buffer_free(&b);
  l = nstep_buffer(&b, &nc, 16);
  for (t = 0; t < 5; ++t) {
    uint32_t o = t, next = t + 1, act = 100 + t;
    CHECK_OK(
        per_nstep_step(&a, &b, &o, &act, (float)(t + 1), &next, 0, t == 4));
  }
  for (i = 0; i < 5; ++i) {
    const unsigned char *it = b.items + (size_t)i * l.size;
    uint32_t done, next;
    float d;
    memcpy(&d, it + l.discount, 4);
    memcpy(&done, it + l.done, 4);
    memcpy(&next, it + l.next_obs, 4);
    CHECK_EQ_U(done, 0);
    CHECK_EQ_F(d, want_d[i]);
    CHECK_EQ_U(next, want_next[i]);
  }
  per_nstep_free(&a);
  per_buffer_free(&b);
}

/* n = 1, 3, 5; episode lengths 1..8 (shorter and longer than n);
   terminated and truncated; gammas 0.9 and 1 and 0: every item equals the
   direct computation, in order, and the adder is empty after each end. */
static void test_returns(void) {
  static const uint32_t ns[3] = {1, 3, 5};
  static const float gammas[3] = {0.9f, 1.0f, 0.0f};
  int ni, gi;
  for (ni = 0; ni < 3; ++ni) {
    for (gi = 0; gi < 3; ++gi) {
      per_nstep_config nc;
      per_nstep a;
      per_nstep_layout l;
      per_buffer b;
      uint32_t T, ep = 0, slot = 0;
      int term;
      unsigned char want[64];
      nc = nstep_cfg(ns[ni], gammas[gi], (uint32_t)sizeof(obs3), 2);
      l = nstep_buffer(&b, &nc, 200);
      CHECK_OK(per_nstep_init(&a, &nc, NULL));
      for (term = 0; term < 2; ++term) {
        for (T = 1; T <= 8; ++T, ++ep) {
          uint32_t t;
          run_episode(&a, &b, 0, ep, T, term);
          CHECK_EQ_U(a.count, 0);
          for (t = 0; t < T; ++t, ++slot) {
            expected_item(&nc, &l, 0, ep, t, T, term, want);
            CHECK_MSG(memcmp(b.items + (size_t)slot * l.size, want, l.size) ==
                          0,
                      "n %u gamma %g T %u term %d: item t=%u differs", nc.n,
                      (double)nc.gamma, T, term, t);
          }
        }
      }
      CHECK_EQ_U(per_buffer_size(&b), slot);
      per_nstep_free(&a);
      per_buffer_free(&b);
    }
  }
}

/* Two environments interleaved, one buffer: each item is its own env's. */
static void test_two_adders(void) {
  per_nstep_config nc;
  per_nstep a[2];
  per_nstep_layout l;
  per_buffer b;
  uint32_t t[2] = {0, 0}, ep[2] = {0, 0}, T[2] = {4, 7}, i, step,
           emitted[2] = {0, 0};
  unsigned char want[64];
  nc = nstep_cfg(3, 0.95f, (uint32_t)sizeof(obs3), 2);
  l = nstep_buffer(&b, &nc, 500);
  CHECK_OK(per_nstep_init(&a[0], &nc, NULL));
  CHECK_OK(per_nstep_init(&a[1], &nc, NULL));
  for (step = 0; step < 60; ++step) {
    uint32_t e = step % 3 == 0 ? 1 : 0; /* uneven interleaving */
    obs3 o = make_obs(e, ep[e], t[e]), next = make_obs(e, ep[e], t[e] + 1);
    uint16_t act = (uint16_t)(t[e] * 13 + e);
    int end = t[e] + 1 == T[e];
    int term = end && (ep[e] % 2 == 0);
    CHECK_OK(per_nstep_step(&a[e], &b, &o, &act, reward_at(e, ep[e], t[e]),
                            &next, term, end && !term));
    if (end) {
      ++ep[e];
      t[e] = 0;
    } else {
      ++t[e];
    }
  }
  /* every stored item equals the expected one for its (env, episode, t) */
  for (i = 0; i < per_buffer_size(&b); ++i) {
    const unsigned char *it = b.items + (size_t)i * l.size;
    obs3 o;
    memcpy(&o, it + l.obs, sizeof o);
    CHECK(o.env < 2);
    if (o.env >= 2) continue;
    expected_item(&nc, &l, o.env, o.ep, o.t, T[o.env], o.ep % 2 == 0, want);
    CHECK_MSG(memcmp(it, want, l.size) == 0, "env %u ep %u t %u differs", o.env,
              o.ep, o.t);
    ++emitted[o.env];
  }
  CHECK(emitted[0] > 0 && emitted[1] > 0);
  per_nstep_free(&a[0]);
  per_nstep_free(&a[1]);
  per_buffer_free(&b);
}

static void test_errors_and_memory(void) {
  per_nstep_config nc, bad;
  per_nstep a, zero;
  per_nstep_layout l;
  per_buffer b, wrong;
  per_config c;
  t_heap heap;
  uint32_t o = 1, act = 2, next = 3, i;
  unsigned char before[sizeof(per_nstep)];
  memset(&zero, 0, sizeof zero);
  nc = nstep_cfg(4, 0.9f, 4, 4);
  l = nstep_buffer(&b, &nc, 64);
  c = cfg_of(64, l.size + 1);
  CHECK_OK(per_buffer_init(&wrong, &c, NULL));

  /* init errors */
  bad = nc;
  bad.n = 0;
  CHECK_STATUS(per_nstep_init(&a, &bad, NULL), PER_ERR_ARG);
  CHECK_MEM(&a, &zero, sizeof a);
  bad = nc;
  bad.gamma = 1.5f;
  CHECK_STATUS(per_nstep_init(&a, &bad, NULL), PER_ERR_ARG);
  bad = nc;
  bad.gamma = -0.1f;
  CHECK_STATUS(per_nstep_init(&a, &bad, NULL), PER_ERR_ARG);
  bad = nc;
  bad.gamma = (float)NAN;
  CHECK_STATUS(per_nstep_init(&a, &bad, NULL), PER_ERR_ARG);
  bad = nc;
  bad.obs_size = 0;
  CHECK_STATUS(per_nstep_init(&a, &bad, NULL), PER_ERR_ARG);
  bad = nc;
  bad.action_size = 0;
  CHECK_STATUS(per_nstep_init(&a, &bad, NULL), PER_ERR_ARG);
  CHECK_STATUS(per_nstep_init(&a, NULL, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_nstep_init(NULL, &nc, NULL), PER_ERR_NULL);
  per_nstep_free(&a);
  per_nstep_free(NULL);

  /* allocation failure: one allocation, nothing leaked */
  memset(&heap, 0, sizeof heap);
  heap.fail_at = 1;
  CHECK_STATUS(per_nstep_init(&a, &nc, &heap), PER_ERR_NOMEM);
  CHECK_MEM(&a, &zero, sizeof a);
  CHECK_EQ_U(heap.live, 0);
  heap.fail_at = 0;
  heap.calls = 0;
  CHECK_OK(per_nstep_init(&a, &nc, &heap));
  CHECK_EQ_U(heap.calls, 1);

  /* step errors change nothing (adder bytes, pending data, buffer) */
  CHECK_OK(per_nstep_step(&a, &b, &o, &act, 1.0f, &next, 0, 0));
  {
    float bad_r[3];
    per_status want[3] = {PER_ERR_NAN, PER_ERR_INF, PER_ERR_INF};
    unsigned char pend[4 * (4 + 4 + 4)];
    bsnap s;
    bad_r[0] = (float)NAN;
    bad_r[1] = (float)INFINITY;
    bad_r[2] = -(float)INFINITY;
    memcpy(before, &a, sizeof a);
    memcpy(pend, a.reward, sizeof pend);
    s = bsnap_take(&b);
    for (i = 0; i < 3; ++i)
      CHECK_STATUS(per_nstep_step(&a, &b, &o, &act, bad_r[i], &next, 1, 0),
                   want[i]);
    CHECK_STATUS(per_nstep_step(&a, &wrong, &o, &act, 1.0f, &next, 1, 0),
                 PER_ERR_ARG);
    CHECK_STATUS(per_nstep_step(&a, &b, NULL, &act, 1.0f, &next, 1, 0),
                 PER_ERR_NULL);
    CHECK_STATUS(per_nstep_step(&a, &b, &o, NULL, 1.0f, &next, 1, 0),
                 PER_ERR_NULL);
    CHECK_STATUS(per_nstep_step(&a, &b, &o, &act, 1.0f, NULL, 1, 0),
                 PER_ERR_NULL);
    CHECK_STATUS(per_nstep_step(&a, NULL, &o, &act, 1.0f, &next, 1, 0),
                 PER_ERR_NULL);
    CHECK_STATUS(per_nstep_step(NULL, &b, &o, &act, 1.0f, &next, 1, 0),
                 PER_ERR_NULL);
    CHECK_MEM(&a, before, sizeof a);
    CHECK_MEM(a.reward, pend, sizeof pend);
    CHECK_UNCHANGED(s, &b);
  }
  /* reset drops the pending step: the next episode end emits only its own */
  per_nstep_reset(&a);
  CHECK_EQ_U(a.count, 0);
  i = per_buffer_size(&b);
  CHECK_OK(per_nstep_step(&a, &b, &o, &act, 1.0f, &next, 1, 0));
  CHECK_EQ_U(per_buffer_size(&b), i + 1);

  /* no allocation per step */
  {
    long calls = heap.calls;
    uint32_t k;
    for (k = 0; k < 1000; ++k)
      CHECK_OK(per_nstep_step(&a, &b, &o, &act, 0.5f, &next, k % 17 == 0, 0));
    CHECK_EQ_U(heap.calls, calls);
  }
  per_nstep_free(&a);
  CHECK_EQ_U(heap.live, 0);
  per_buffer_free(&b);
  per_buffer_free(&wrong);
}

/* PER_NSTEP_ITEM's offsets are per_nstep_layout_of's, and an emitted item
   reads back through the struct. */
#define ITEM_LAYOUT_MATCHES(T, obs_bytes, act_bytes) \
  do {                                               \
    per_nstep_config c_;                             \
    per_nstep_layout l_;                             \
    c_.n = 2;                                        \
    c_.gamma = 0.5f;                                 \
    c_.obs_size = (obs_bytes);                       \
    c_.action_size = (act_bytes);                    \
    l_ = per_nstep_layout_of(&c_);                   \
    CHECK_EQ_U(offsetof(T, obs), l_.obs);            \
    CHECK_EQ_U(offsetof(T, action), l_.action);      \
    CHECK_EQ_U(offsetof(T, reward), l_.reward);      \
    CHECK_EQ_U(offsetof(T, discount), l_.discount);  \
    CHECK_EQ_U(offsetof(T, done), l_.done);          \
    CHECK_EQ_U(offsetof(T, next_obs), l_.next_obs);  \
    CHECK_EQ_U(sizeof(T), l_.size);                  \
  } while (0)

static void test_item_struct(void) {
  per_nstep_config nc;
  per_nstep a;
  per_buffer b;
  per_config c;
  cart_item it;
  float o[4] = {1, 2, 3, 4}, next[4] = {5, 6, 7, 8};
  int32_t act = -3;
  ITEM_LAYOUT_MATCHES(cart_item, 16, 4);
  ITEM_LAYOUT_MATCHES(atari_item, 84, 2);
  ITEM_LAYOUT_MATCHES(wide_item, 24, 12);
  ITEM_LAYOUT_MATCHES(chunk_item, 12, 12);
  nc.n = 3;
  nc.gamma = 0.5f;
  nc.obs_size = sizeof it.obs;
  nc.action_size = sizeof it.action;
  c = cfg_of(8, sizeof(cart_item));
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_OK(per_nstep_init(&a, &nc, NULL));
  CHECK_OK(per_nstep_step(&a, &b, o, &act, 2.0f, next, 0, 0));
  CHECK_OK(per_nstep_step(&a, &b, next, &act, 4.0f, o, 1, 0));
  CHECK_EQ_U(per_buffer_size(&b), 2);
  memcpy(&it, b.items, sizeof it);
  CHECK_EQ_F(it.obs[2], 3);
  CHECK_EQ_U((uint32_t)(it.action[0] + 10), 7);
  CHECK_EQ_F(it.reward, 2.0f + 0.5f * 4.0f);
  CHECK_EQ_F(it.discount, 0.25f);
  CHECK_EQ_U(it.done, 1);
  CHECK_EQ_F(it.next_obs[0], 1);
  per_nstep_free(&a);
  per_buffer_free(&b);
}

/* ---- pending steps saved and loaded ---------------------------------- */

#define NNAME(s) (IS_FLOAT ? "nstep_float_" s : "nstep_double_" s)

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  unsigned char *p;
  long len;
  REQUIRE(f != NULL);
  fseek(f, 0, SEEK_END);
  len = ftell(f);
  fseek(f, 0, SEEK_SET);
  p = (unsigned char *)malloc((size_t)len + 1);
  REQUIRE(p != NULL);
  *n = fread(p, 1, (size_t)len, f);
  fclose(f);
  return p;
}

static void spill(const char *path, const unsigned char *p, size_t n) {
  FILE *f = fopen(path, "wb");
  REQUIRE(f != NULL);
  REQUIRE(fwrite(p, 1, n, f) == n);
  fclose(f);
}

/* The file with the CRC recomputed over its (changed) bytes. */
static void spill_crc(const char *path, unsigned char *p, size_t n) {
  uint32_t crc = per_crc32c(0, p, n - 4);
  p[n - 4] = (unsigned char)crc;
  p[n - 3] = (unsigned char)(crc >> 8);
  p[n - 2] = (unsigned char)(crc >> 16);
  p[n - 1] = (unsigned char)(crc >> 24);
  spill(path, p, n);
}

/* An adder's observable state: head, count and the pending steps. */
static int same_adder(const per_nstep *x, const per_nstep *y) {
  uint32_t j;
  if (x->count != y->count) return 0;
  for (j = 0; j < x->count; ++j) {
    uint32_t i = (x->head + j) % x->cfg.n, k = (y->head + j) % y->cfg.n;
    if (memcmp(&x->reward[i], &y->reward[k], 4) != 0 ||
        memcmp(x->obs + (size_t)i * x->cfg.obs_size,
               y->obs + (size_t)k * y->cfg.obs_size, x->cfg.obs_size) != 0 ||
        memcmp(x->act + (size_t)i * x->cfg.action_size,
               y->act + (size_t)k * y->cfg.action_size,
               x->cfg.action_size) != 0)
      return 0;
  }
  return 1;
}

/* Raw bytes of the adders' structs and rings, to prove an error changed
   nothing at all. */
static size_t adder_bytes(const per_nstep *a) {
  return (size_t)a->cfg.n * (4 + a->cfg.obs_size + a->cfg.action_size);
}

static void test_save_load(void) {
  enum { NA = 3 };
  per_nstep_config nc[NA];
  per_nstep a[NA], r[NA], wrong[NA];
  per_buffer b1, b2;
  per_config c;
  per_nstep_layout l;
  uint32_t i, t, e;
  size_t n;
  unsigned char *file, *copy;
  memset(nc, 0, sizeof nc);
  for (i = 0; i < NA; ++i) {
    nc[i].n = 2 + 2 * i; /* 2, 4, 6 */
    nc[i].gamma = 0.9f;
    nc[i].obs_size = sizeof(obs3);
    nc[i].action_size = 2;
  }
  l = per_nstep_layout_of(&nc[0]);
  c = cfg_of(256, l.size);
  CHECK_OK(per_buffer_init(&b1, &c, NULL));
  CHECK_OK(per_buffer_init(&b2, &c, NULL));
  for (i = 0; i < NA; ++i) {
    CHECK_OK(per_nstep_init(&a[i], &nc[i], NULL));
    CHECK_OK(per_nstep_init(&r[i], &nc[i], NULL));
  }
  /* adder e runs 4 + e steps (every ring has wrapped: head != 0), then
     everything is saved */
  for (e = 0; e < NA; ++e)
    for (t = 0; t < 4 + e; ++t) {
      obs3 o = make_obs(e, 0, t), next = make_obs(e, 0, t + 1);
      uint16_t act = (uint16_t)(t * 13 + e);
      CHECK_OK(per_nstep_step(&a[e], &b1, &o, &act, reward_at(e, 0, t), &next,
                              0, 0));
    }
  for (i = 0; i < NA; ++i)
    CHECK(a[i].head != 0 && a[i].count == a[i].cfg.n - 1);
  CHECK_OK(per_nstep_save(a, NA, NNAME("ok.bin")));
  CHECK_OK(per_nstep_load(r, NA, NNAME("ok.bin")));
  for (i = 0; i < NA; ++i) CHECK(same_adder(&a[i], &r[i]));
  /* the restored adders emit exactly what the originals emit */
  for (e = 0; e < NA; ++e)
    for (t = 4 + e; t < 10 + e; ++t) {
      obs3 o = make_obs(e, 0, t), next = make_obs(e, 0, t + 1);
      uint16_t act = (uint16_t)(t * 13 + e);
      int end = t + 1 == 10 + e;
      uint32_t s1 = b1.size, s2 = b2.size;
      CHECK_OK(per_nstep_step(&a[e], &b1, &o, &act, reward_at(e, 0, t), &next,
                              end, 0));
      CHECK_OK(per_nstep_step(&r[e], &b2, &o, &act, reward_at(e, 0, t), &next,
                              end, 0));
      CHECK_EQ_U(b1.size - s1, b2.size - s2);
      CHECK(memcmp(b1.items + (size_t)s1 * l.size,
                   b2.items + (size_t)s2 * l.size,
                   (size_t)(b1.size - s1) * l.size) == 0);
    }

  /* errors: every adder unchanged, byte for byte */
  file = slurp(NNAME("ok.bin"), &n);
  copy = (unsigned char *)malloc(n + 8);
  REQUIRE(copy != NULL);
  CHECK_OK(per_nstep_load(r, NA, NNAME("ok.bin"))); /* the saved state again */
  {
    struct {
      const char *what;
      per_status want;
    } cases[12];
    size_t nc2 = 0, ci;
    unsigned char *snap[NA];
    per_nstep before[NA];
    for (i = 0; i < NA; ++i) {
      snap[i] = (unsigned char *)malloc(adder_bytes(&r[i]));
      REQUIRE(snap[i] != NULL);
      memcpy(snap[i], r[i].reward, adder_bytes(&r[i]));
      before[i] = r[i];
    }
    for (ci = 0; ci < 11; ++ci) {
      const char *path = NNAME("bad.bin");
      per_status got;
      memcpy(copy, file, n);
      switch (ci) {
        case 0:
          cases[nc2].what = "missing";
          cases[nc2++].want = PER_ERR_IO;
          remove(path);
          break;
        case 1:
          cases[nc2].what = "empty";
          cases[nc2++].want = PER_ERR_FORMAT;
          spill(path, copy, 0);
          break;
        case 2:
          cases[nc2].what = "magic";
          cases[nc2++].want = PER_ERR_FORMAT;
          copy[3] ^= 1;
          spill(path, copy, n);
          break;
        case 3:
          cases[nc2].what = "version";
          cases[nc2++].want = PER_ERR_VERSION;
          copy[8] = 2;
          spill_crc(path, copy, n);
          break;
        case 4:
          cases[nc2].what = "adder count";
          cases[nc2++].want = PER_ERR_MISMATCH;
          copy[16] = 2;
          spill_crc(path, copy, n);
          break;
        case 5:
          cases[nc2].what = "gamma";
          cases[nc2++].want = PER_ERR_MISMATCH;
          copy[20 + 4] ^= 1;
          spill_crc(path, copy, n);
          break;
        case 6:
          cases[nc2].what = "count >= n";
          cases[nc2++].want = PER_ERR_CORRUPT;
          copy[20 + 16] = 2;
          spill_crc(path, copy, n);
          break;
        case 7:
          cases[nc2].what = "NaN reward";
          cases[nc2++].want = PER_ERR_CORRUPT;
          copy[40 + 2] = 0xc0;
          copy[40 + 3] = 0x7f;
          spill_crc(path, copy, n);
          break;
        case 8:
          cases[nc2].what = "a flipped byte";
          cases[nc2++].want = PER_ERR_CHECKSUM;
          copy[n / 2] ^= 0x10;
          spill(path, copy, n);
          break;
        case 9:
          cases[nc2].what = "truncated";
          cases[nc2++].want = PER_ERR_TRUNCATED;
          spill(path, copy, n - 5);
          break;
        default:
          cases[nc2].what = "trailing bytes";
          cases[nc2++].want = PER_ERR_CORRUPT;
          copy[n] = 0;
          spill(path, copy, n + 1);
          break;
      }
      got = per_nstep_load(r, NA, path);
      CHECK_MSG(got == cases[nc2 - 1].want, "%s: got %s, want %s",
                cases[nc2 - 1].what, per_status_str(got),
                per_status_str(cases[nc2 - 1].want));
      for (i = 0; i < NA; ++i) {
        CHECK(memcmp(&before[i], &r[i], sizeof r[i]) == 0);
        CHECK(memcmp(snap[i], r[i].reward, adder_bytes(&r[i])) == 0);
      }
    }
    /* every proper prefix of the file, the header's included */
    for (ci = 1; ci < n; ++ci) {
      per_status got;
      spill(NNAME("bad.bin"), file, ci);
      got = per_nstep_load(r, NA, NNAME("bad.bin"));
      CHECK_MSG(got == PER_ERR_TRUNCATED, "first %u of %u bytes: got %s",
                (unsigned)ci, (unsigned)n, per_status_str(got));
      for (i = 0; i < NA; ++i) {
        CHECK(memcmp(&before[i], &r[i], sizeof r[i]) == 0);
        CHECK(memcmp(snap[i], r[i].reward, adder_bytes(&r[i])) == 0);
      }
    }
    for (i = 0; i < NA; ++i) free(snap[i]);
  }
  /* adders with other configs, or fewer of them */
  for (i = 0; i < NA; ++i) {
    per_nstep_config w = nc[i];
    if (i == 1) w.action_size = 4;
    CHECK_OK(per_nstep_init(&wrong[i], &w, NULL));
  }
  CHECK_STATUS(per_nstep_load(wrong, NA, NNAME("ok.bin")), PER_ERR_MISMATCH);
  CHECK_EQ_U(wrong[0].count, 0);
  CHECK_STATUS(per_nstep_load(r, NA - 1, NNAME("ok.bin")), PER_ERR_MISMATCH);
  CHECK_STATUS(per_nstep_load(r, 0, NNAME("ok.bin")), PER_ERR_ARG);
  CHECK_STATUS(per_nstep_save(r, 0, NNAME("x.bin")), PER_ERR_ARG);
  CHECK_STATUS(per_nstep_load(NULL, 1, NNAME("ok.bin")), PER_ERR_NULL);
  CHECK_STATUS(per_nstep_save(r, NA, NULL), PER_ERR_NULL);
  {
    per_nstep zero[1];
    memset(zero, 0, sizeof zero);
    CHECK_STATUS(per_nstep_save(zero, 1, NNAME("x.bin")), PER_ERR_NULL);
  }
  /* an empty adder saves and loads as empty */
  per_nstep_reset(&r[0]);
  per_nstep_reset(&r[1]);
  per_nstep_reset(&r[2]);
  CHECK_OK(per_nstep_save(r, NA, NNAME("empty.bin")));
  CHECK_OK(per_nstep_load(a, NA, NNAME("empty.bin")));
  for (i = 0; i < NA; ++i) CHECK_EQ_U(a[i].count, 0);
  for (i = 0; i < NA; ++i) {
    per_nstep_free(&a[i]);
    per_nstep_free(&r[i]);
    per_nstep_free(&wrong[i]);
  }
  per_buffer_free(&b1);
  per_buffer_free(&b2);
  free(file);
  free(copy);
  remove(NNAME("ok.bin"));
  remove(NNAME("bad.bin"));
  remove(NNAME("empty.bin"));
}

int main(void) {
  test_layout();
  test_hand();
  test_returns();
  test_two_adders();
  test_errors_and_memory();
  test_item_struct();
  test_save_load();
  return t_done(IS_FLOAT ? "nstep (float)" : "nstep (double)");
}
