/* test_net.c - the replay server's request handling (per_net.h): every op
   of docs/PROTOCOL.md against a reference per_buffer driven directly with
   the same config, over a random script (fixed seed) on plain and
   sequence tables, each reply's bytes against what the reference call
   gives and the table's checkpoint bytes against the reference's after
   every step; every refusal (truncated and overlong requests, bad magic,
   version, op, table, name, flags, want bits, batch sizes, NaN TD errors,
   ids never handed out, HELLO mismatches) with its status, message,
   echoed header, counters and the tables byte for byte as they were;
   spec texts and their errors; init, free and NULL arguments; allocation
   failure (each allocation in turn, and all of them: the fallback reply);
   replies given away (per_net_take_reply).
   Requests are built by hand, little-endian, as a client in another
   language would. Runs with PER_REAL double and float. */
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>

#include "heap.h"

/* heap.h fails one chosen call; the fallback reply needs every call to
   fail: while net_fail_all is set, PER_MALLOC refuses (counting the
   call). */
static int net_fail_all;
static void *net_malloc(size_t sz, void *ctx) {
  if (net_fail_all) {
    ++(ctx ? (t_heap *)ctx : &t_default_heap)->calls;
    return NULL;
  }
  return t_malloc(sz, ctx);
}
#undef PER_MALLOC
#define PER_MALLOC(sz, ctx) net_malloc((sz), (ctx))

#include "buffer_util.h"
#define PER_NET_IMPLEMENTATION
#include "per_net.h"

/* ---- little-endian messages, as a client writes them ------------------- */

typedef struct msg {
  unsigned char *p;
  size_t n, cap;
} msg;

static void m_bytes(msg *m, const void *src, size_t n) {
  if (m->n + n > m->cap) {
    size_t cap = m->cap ? m->cap : 256;
    while (cap < m->n + n) cap *= 2;
    m->p = (unsigned char *)realloc(m->p, cap);
    REQUIRE(m->p != NULL);
    m->cap = cap;
  }
  if (n) memcpy(m->p + m->n, src, n);
  m->n += n;
}

static void m_uint(msg *m, uint64_t v, unsigned n) {
  unsigned char b[8];
  unsigned k;
  for (k = 0; k < n; ++k) b[k] = (unsigned char)(v >> (8 * k));
  m_bytes(m, b, n);
}
static void m_u8(msg *m, uint64_t v) { m_uint(m, v, 1); }
static void m_u16(msg *m, uint64_t v) { m_uint(m, v, 2); }
static void m_u32(msg *m, uint64_t v) { m_uint(m, v, 4); }
static void m_u64(msg *m, uint64_t v) { m_uint(m, v, 8); }
static void m_f32(msg *m, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  m_u32(m, u);
}
static void m_f64(msg *m, double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  m_u64(m, u);
}

/* A request's header, any magic and version, and a name of len bytes. */
static void m_head_raw(msg *m, const char *magic, uint32_t version, uint32_t op,
                       uint64_t id, const char *name, size_t len) {
  m->n = 0;
  m_bytes(m, magic, 4);
  m_u16(m, version);
  m_u16(m, op);
  m_u64(m, id);
  m_u8(m, len);
  m_bytes(m, name, len);
}

static void m_head(msg *m, uint32_t op, uint64_t id, const char *name) {
  m_head_raw(m, "PERQ", 1, op, id, name, strlen(name));
}

static uint64_t le(const unsigned char *p, unsigned n) {
  uint64_t v = 0;
  while (n--) v = (v << 8) | p[n];
  return v;
}

/* ---- replies -------------------------------------------------------------- */

typedef struct answer {
  per_status st; /* what per_net_handle returned */
  uint32_t op;
  uint64_t id;
  const unsigned char *body; /* the body (status 0), in the server's memory */
  size_t body_len;
  char msg[256]; /* the message, NUL-terminated */
  size_t msg_len;
  const void *raw;
  size_t raw_len;
} answer;

/* Handle m on s and read the reply, checking that it is well-formed:
   magic, version 1, the returned status in the header, the reserved
   field 0, message length 0 on success and the whole rest otherwise. */
static void send_at(per_net_server *s, const void *req, size_t len, answer *r,
                    int line) {
  const unsigned char *o;
  int32_t st;
  memset(r, 0, sizeof *r);
  r->raw = NULL;
  r->st = per_net_handle(s, req, len, &r->raw, &r->raw_len);
  if (r->raw == NULL || r->raw_len < PER_NET_REPLY_HEADER) {
    T_FAIL_AT("line %d: no reply", line);
    r->st = PER_ERR_CORRUPT;
    return;
  }
  o = (const unsigned char *)r->raw;
  st = (int32_t)(uint32_t)le(o + 16, 4);
  r->op = (uint32_t)le(o + 6, 2);
  r->id = le(o + 8, 8);
  r->msg_len = (size_t)le(o + 20, 2);
  CHECK_MSG(memcmp(o, "PERR", 4) == 0 && le(o + 4, 2) == 1 &&
                le(o + 22, 2) == 0 && st == (int32_t)r->st,
            "line %d: reply header: magic, version, status %d (returned %d)",
            line, (int)st, (int)r->st);
  if (r->st == PER_OK) {
    CHECK_MSG(r->msg_len == 0, "line %d: a message on success", line);
    /* the body's 8-byte fields sit at multiples of 8 in memory too */
    CHECK_MSG((uintptr_t)o % 8u == 0, "line %d: reply not 8-aligned", line);
    r->body = o + PER_NET_REPLY_HEADER;
    r->body_len = r->raw_len - PER_NET_REPLY_HEADER;
  } else {
    size_t n = r->msg_len < sizeof r->msg - 1 ? r->msg_len : sizeof r->msg - 1;
    CHECK_MSG(r->msg_len > 0 && r->raw_len == PER_NET_REPLY_HEADER + r->msg_len,
              "line %d: a refusal's message: %zu bytes in a reply of %zu", line,
              r->msg_len, r->raw_len);
    memcpy(r->msg, o + PER_NET_REPLY_HEADER, n);
    r->msg[n] = 0;
    CHECK_MSG(strlen(r->msg) == n, "line %d: a NUL in the message", line);
  }
}
#define SEND(s, m, r) send_at((s), (m)->p, (m)->n, (r), __LINE__)

/* The reply's body is exactly `want`'s bytes. */
#define CHECK_BODY(r, want)                       \
  do {                                            \
    CHECK_EQ_U((r)->body_len, (want)->n);         \
    if ((r)->body_len == (want)->n)               \
      CHECK_MEM((r)->body, (want)->p, (want)->n); \
  } while (0)

/* ---- snapshots ------------------------------------------------------------ */

/* The checkpoint bytes of b (per_buffer_snapshot), malloc'ed. */
static unsigned char *snap(const per_buffer *b, size_t *len) {
  size_t cap = per_buffer_snapshot_bytes(b);
  unsigned char *p = (unsigned char *)malloc(cap ? cap : 1);
  REQUIRE(p != NULL);
  REQUIRE(per_buffer_snapshot(b, p, cap, len) == PER_OK);
  return p;
}

/* 1 when a and b have the same checkpoint bytes and the same state. */
static int same_buffers(const per_buffer *a, const per_buffer *b) {
  size_t na, nb;
  unsigned char *sa = snap(a, &na), *sb = snap(b, &nb);
  int same = na == nb && memcmp(sa, sb, na) == 0 && state_equal(a, b) &&
             strcmp(a->layout, b->layout) == 0;
  free(sa);
  free(sb);
  return same;
}

/* ---- the fixture: a server whose tables each have a reference ---------- */

#define NTAB_MAX 4
#define POOL 64

typedef struct tab {
  const char *name;
  per_net_table *t; /* the server's */
  per_buffer ref;   /* driven directly with the same calls */
  uint64_t inserts, samples, updates, refused; /* what t must count */
  uint64_t sampled;                            /* items drawn */
  uint64_t item_ids[POOL], seq_ids[POOL];      /* ids handed out, newest last */
  uint32_t nitem, nseq;
} tab;

typedef struct fixture {
  per_net_server s;
  tab tabs[NTAB_MAX];
  uint32_t ntabs;
  uint64_t requests, refused; /* what s must count */
  uint64_t rng;               /* the script's */
  /* what the applied requests covered: stale ids, masked steps, and each
     kind of insert, draw and update */
  uint64_t stale, masked, ends, tds, over, unique, beta, window, trajs, noitems,
      seq_draws, seq_updates;
  msg m, want; /* a request, an expected body */
} fixture;

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15u);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}
static uint64_t rnd64(fixture *x) { return splitmix64(&x->rng); }
static uint32_t rnd(fixture *x, uint32_t n) { return (uint32_t)(rnd64(x) % n); }

static void fx_init(fixture *x, uint64_t max_message, void *ctx) {
  memset(x, 0, sizeof *x);
  REQUIRE(per_net_init(&x->s, max_message, ctx) == PER_OK);
  x->rng = 12345;
}

static tab *fx_add(fixture *x, const char *name, per_config c,
                   const char *layout) {
  tab *t;
  REQUIRE(x->ntabs < NTAB_MAX);
  t = &x->tabs[x->ntabs++];
  t->name = name;
  REQUIRE(per_net_add_table(&x->s, name, &c, layout) == PER_OK);
  t->t = per_net_find(&x->s, name, strlen(name));
  REQUIRE(t->t != NULL);
  REQUIRE(per_buffer_init(&t->ref, &c, NULL) == PER_OK);
  REQUIRE(per_buffer_set_layout(&t->ref, layout) == PER_OK);
  return t;
}

static void fx_free(fixture *x) {
  uint32_t k;
  for (k = 0; k < x->ntabs; ++k) per_buffer_free(&x->tabs[k].ref);
  per_net_free(&x->s);
  free(x->m.p);
  free(x->want.p);
}

/* The configs of the script's tables. */
static per_config cfg_plain(void) {
  per_config c = per_config_default(40, 5);
  c.seed = 11;
  c.beta_steps = 60;
  c.max_unique = 16;
  return c;
}
static per_config cfg_wmax(void) {
  per_config c = per_config_default(33, 7);
  c.seed = 12;
  c.alpha = 0.8;
  c.eps = 0;
  c.beta0 = 0.2;
  c.beta1 = 1.5;
  c.beta_steps = 0;
  c.flags = PER_WEIGHTS_BUFFER_MAX | PER_MAX_LIVE;
  return c;
}
static per_config cfg_seq(void) {
  per_config c = per_config_default(36, 3);
  c.seed = 13;
  c.seq_len = 4;
  c.seq_stride = 2;
  c.flags = PER_SEQ_CROSS_EPISODES | PER_WEIGHTS_BUFFER_MAX;
  return c;
}
static per_config cfg_seq2(void) {
  per_config c = per_config_default(30, 8);
  c.seed = 14;
  c.seq_len = 5;
  c.seq_stride = 3;
  c.seq_eta = 0.5;
  c.max_unique = 7;
  return c;
}

/* The server's counters and each table's against what they must be, and
   each table byte for byte against its reference. */
static void fx_check_at(fixture *x, int line) {
  uint32_t k;
  CHECK_MSG(x->s.requests == x->requests && x->s.refused == x->refused,
            "line %d: server counted %llu requests, %llu refused; want %llu, "
            "%llu",
            line, (unsigned long long)x->s.requests,
            (unsigned long long)x->s.refused, (unsigned long long)x->requests,
            (unsigned long long)x->refused);
  for (k = 0; k < x->ntabs; ++k) {
    tab *t = &x->tabs[k];
    CHECK_MSG(
        t->t->inserts == t->inserts && t->t->samples == t->samples &&
            t->t->updates == t->updates && t->t->refused == t->refused,
        "line %d: table %s counted %llu %llu %llu %llu", line, t->name,
        (unsigned long long)t->t->inserts, (unsigned long long)t->t->samples,
        (unsigned long long)t->t->updates, (unsigned long long)t->t->refused);
    CHECK_MSG(same_buffers(&t->t->buf, &t->ref),
              "line %d: table %s differs from its reference", line, t->name);
    CHECK_MSG(per_buffer_check(&t->t->buf) == PER_OK,
              "line %d: table %s fails per_buffer_check", line, t->name);
  }
}
#define FX_CHECK(x) fx_check_at((x), __LINE__)

/* The reply r of a request (op, id) for table t, whose reference call
   returned st: the same status, the header echoed, on a refusal the
   reference's message; the counters moved as they must. */
static void expect_same_at(fixture *x, tab *t, const answer *r, per_status st,
                           uint32_t op, uint64_t id, int line) {
  x->requests++;
  CHECK_MSG(r->st == st, "line %d: op %u on %s: status %d (%s), want %d (%s)",
            line, op, t->name, (int)r->st, r->msg, (int)st, per_status_str(st));
  CHECK_MSG(r->op == op && r->id == id, "line %d: header not echoed", line);
  if (st != PER_OK) {
    const char *want = t->ref.error[0] ? t->ref.error : per_status_str(st);
    CHECK_MSG(strcmp(r->msg, want) == 0, "line %d: message \"%s\", want \"%s\"",
              line, r->msg, want);
    x->refused++;
    t->refused++;
  } else if (op == PER_NET_INSERT) {
    t->inserts++;
  } else if (op == PER_NET_SAMPLE) {
    t->samples++;
  } else if (op == PER_NET_UPDATE) {
    t->updates++;
  }
}
#define EXPECT_SAME(x, t, r, st, op, id) \
  expect_same_at((x), (t), (r), (st), (op), (id), __LINE__)

static void pool_push(uint64_t *pool, uint32_t *n, uint64_t id) {
  if (*n == POOL) {
    memmove(pool, pool + 1, (POOL - 1) * sizeof *pool);
    --*n;
  }
  pool[(*n)++] = id;
}

/* A TD error: mostly finite, of every size and sign; rarely NaN or
   infinite. */
static float td_value(fixture *x) {
  static const float v[10] = {0.0f,  -0.0f, 0.25f, -1.5f,  3.0f,
                              1e-4f, 50.0f, -7e3f, 1e-39f, 2.0f};
  uint32_t k = rnd(x, 400);
  if (k == 0) return (float)NAN;
  if (k == 1) return (float)INFINITY;
  return v[k % 10];
}

/* ---- the ops, each against the reference ---------------------------- */

static uint64_t next_id(fixture *x) { return rnd64(x); }

static void do_insert(fixture *x, tab *t, uint32_t n, uint32_t flags) {
  uint32_t isz = t->ref.cfg.item_size, j;
  unsigned char *items = (unsigned char *)malloc((size_t)n * isz);
  uint8_t *ends = (uint8_t *)malloc(n);
  float *td = (float *)malloc(n * sizeof(float));
  uint64_t id = next_id(x), traj = t->ref.trajs;
  per_status st;
  answer r;
  REQUIRE(items && ends && td);
  for (j = 0; j < n * isz; ++j) items[j] = (unsigned char)rnd(x, 256);
  for (j = 0; j < n; ++j) {
    uint32_t e = rnd(x, 1000);
    ends[j] = (uint8_t)(e < 800 ? 0 : e < 900 ? 1 : e < 999 ? 2 : 3);
    td[j] = td_value(x);
  }
  m_head(&x->m, PER_NET_INSERT, id, t->name);
  m_u32(&x->m, n);
  m_u32(&x->m, flags);
  m_bytes(&x->m, items, (size_t)n * isz);
  if (flags & PER_NET_ENDS) m_bytes(&x->m, ends, n);
  if (flags & PER_NET_TD)
    for (j = 0; j < n; ++j) m_f32(&x->m, td[j]);
  st = (flags & PER_NET_TD)
           ? per_buffer_add_td(&t->ref, items, n,
                               (flags & PER_NET_ENDS) ? ends : NULL, td)
           : per_buffer_add_steps(&t->ref, items, n,
                                  (flags & PER_NET_ENDS) ? ends : NULL);
  SEND(&x->s, &x->m, &r);
  EXPECT_SAME(x, t, &r, st, PER_NET_INSERT, id);
  if (st == PER_OK && r.st == PER_OK) {
    x->ends += (flags & PER_NET_ENDS) != 0;
    x->tds += (flags & PER_NET_TD) != 0;
    x->over += n > t->ref.cfg.capacity;
    x->want.n = 0;
    m_u64(&x->want, traj);
    m_u32(&x->want, t->ref.size);
    m_u32(&x->want, 0);
    CHECK_BODY(&r, &x->want);
  }
  free(items);
  free(ends);
  free(td);
}

static void do_sample(fixture *x, tab *t, uint32_t B, uint32_t flags,
                      double beta, uint32_t window, uint32_t want) {
  const per_config *c = &t->ref.cfg;
  uint32_t steps =
      (flags & PER_SAMPLE_SEQUENCES) && c->seq_len ? c->seq_len : 1u;
  size_t nitems = (size_t)B * steps * c->item_size, j;
  unsigned char *items = (unsigned char *)malloc(nitems ? nitems : 1);
  uint8_t *mask = (uint8_t *)malloc((size_t)B * steps);
  uint64_t *ids = (uint64_t *)malloc(B * sizeof(uint64_t));
  float *w = (float *)malloc(B * sizeof(float));
  uint64_t id = next_id(x);
  double beta_used;
  per_sample_opts o;
  per_status st;
  answer r;
  REQUIRE(items && mask && ids && w);
  m_head(&x->m, PER_NET_SAMPLE, id, t->name);
  m_u32(&x->m, B);
  m_u32(&x->m, flags);
  m_f64(&x->m, beta);
  m_u32(&x->m, window);
  m_u32(&x->m, want);
  memset(&o, 0, sizeof o);
  o.flags = flags;
  o.beta = beta;
  o.window = window;
  o.mask = (flags & PER_SAMPLE_SEQUENCES) ? mask : NULL;
  beta_used = (flags & PER_SAMPLE_BETA) ? beta : per_buffer_beta(&t->ref);
  st = per_buffer_sample(&t->ref, B, &o,
                         (want & PER_NET_NO_ITEMS) ? NULL : items, ids, w);
  SEND(&x->s, &x->m, &r);
  EXPECT_SAME(x, t, &r, st, PER_NET_SAMPLE, id);
  if (st == PER_OK && r.st == PER_OK) {
    t->sampled += B;
    x->want.n = 0;
    m_u32(&x->want, B);
    m_u32(&x->want, steps);
    m_f64(&x->want, beta_used);
    for (j = 0; j < B; ++j) m_u64(&x->want, ids[j]);
    for (j = 0; j < B; ++j) m_f32(&x->want, w[j]);
    if (!(want & PER_NET_NO_ITEMS)) m_bytes(&x->want, items, nitems);
    if (flags & PER_SAMPLE_SEQUENCES)
      m_bytes(&x->want, mask, (size_t)B * steps);
    CHECK_BODY(&r, &x->want);
    x->unique += (flags & PER_SAMPLE_UNIQUE) != 0;
    x->beta += (flags & PER_SAMPLE_BETA) != 0;
    x->window += window != 0;
    x->trajs += (flags & PER_SAMPLE_TRAJECTORIES) != 0;
    x->noitems += (want & PER_NET_NO_ITEMS) != 0;
    x->seq_draws += (flags & PER_SAMPLE_SEQUENCES) != 0;
    if (flags & PER_SAMPLE_SEQUENCES)
      for (j = 0; j < (size_t)B * steps; ++j) x->masked += mask[j] == 0;
    for (j = 0; j < B; ++j) {
      if (flags & PER_SAMPLE_SEQUENCES) pool_push(t->seq_ids, &t->nseq, ids[j]);
      else pool_push(t->item_ids, &t->nitem, ids[j]);
    }
  }
  free(items);
  free(mask);
  free(ids);
  free(w);
}

static void do_update(fixture *x, tab *t, const uint64_t *ids, uint32_t n,
                      uint32_t flags, const float *td) {
  uint32_t k = (flags & PER_NET_SEQUENCES) ? t->ref.cfg.seq_len : 1u, j;
  uint32_t stale = 0xDEADu;
  uint64_t id = next_id(x);
  per_status st;
  answer r;
  m_head(&x->m, PER_NET_UPDATE, id, t->name);
  m_u32(&x->m, n);
  m_u32(&x->m, flags);
  for (j = 0; j < n; ++j) m_u64(&x->m, ids[j]);
  for (j = 0; j < n * k; ++j) m_f32(&x->m, td[j]);
  st = (flags & PER_NET_SEQUENCES)
           ? per_buffer_update_seq(&t->ref, ids, td, n, &stale)
           : per_buffer_update(&t->ref, ids, td, n, &stale);
  SEND(&x->s, &x->m, &r);
  EXPECT_SAME(x, t, &r, st, PER_NET_UPDATE, id);
  if (st == PER_OK && r.st == PER_OK) {
    x->want.n = 0;
    x->stale += stale;
    x->seq_updates += (flags & PER_NET_SEQUENCES) != 0;
    m_u32(&x->want, stale);
    m_u32(&x->want, 0);
    CHECK_BODY(&r, &x->want);
  }
}

/* INFO's body for t as it must be now. */
static void info_body(tab *t, msg *w) {
  const per_buffer *b = &t->ref;
  w->n = 0;
  m_u32(w, b->cfg.capacity);
  m_u32(w, b->cfg.item_size);
  m_u32(w, b->size);
  m_u32(w, b->cfg.seq_len);
  m_u64(w, b->added);
  m_u64(w, b->trajs);
  m_u64(w, b->step);
  m_f64(w, per_buffer_beta(b));
  m_u64(w, t->inserts);
  m_u64(w, t->samples);
  m_u64(w, t->updates);
  m_u64(w, t->refused);
  m_u64(w, b->added); /* the limiter's count: every item inserted */
  m_u64(w, t->sampled);
  m_u64(w, 0); /* busy: no limiter here */
  m_u64(w, 0); /* min_size: none */
  m_f64(w, 0);
  m_f64(w, 0);
}

static void do_info(fixture *x, tab *t) {
  uint64_t id = next_id(x);
  answer r;
  m_head(&x->m, PER_NET_INFO, id, t->name);
  info_body(t, &x->want);
  SEND(&x->s, &x->m, &r);
  EXPECT_SAME(x, t, &r, PER_OK, PER_NET_INFO, id);
  if (r.st == PER_OK) CHECK_BODY(&r, &x->want);
}

/* HELLO's body for t. */
static void hello_body(const per_buffer *b, msg *w) {
  const per_config *c = &b->cfg;
  w->n = 0;
  m_u32(w, c->capacity);
  m_u32(w, c->item_size);
  m_u32(w, c->seq_len);
  m_u32(w, c->seq_stride);
  m_u32(w, c->flags);
  m_u32(w, c->max_unique);
  m_f64(w, c->alpha);
  m_f64(w, c->beta0);
  m_f64(w, c->beta1);
  m_u64(w, c->beta_steps);
  m_f64(w, c->eps);
  m_f64(w, c->max_priority);
  m_f64(w, c->seq_eta);
  m_u64(w, c->seed);
  m_u16(w, strlen(b->layout));
  m_bytes(w, b->layout, strlen(b->layout));
}

static void hello_req(msg *m, uint64_t id, const char *name, uint32_t isz,
                      const char *layout) {
  m_head(m, PER_NET_HELLO, id, name);
  m_u32(m, isz);
  m_u16(m, strlen(layout));
  m_bytes(m, layout, strlen(layout));
}

static void do_hello(fixture *x, tab *t, const char *layout) {
  uint64_t id = next_id(x);
  answer r;
  hello_req(&x->m, id, t->name, t->ref.cfg.item_size, layout);
  hello_body(&t->ref, &x->want);
  SEND(&x->s, &x->m, &r);
  EXPECT_SAME(x, t, &r, PER_OK, PER_NET_HELLO, id);
  if (r.st == PER_OK) CHECK_BODY(&r, &x->want);
}

/* ---- the random script ---------------------------------------------------- */

static void script_insert(fixture *x, tab *t) {
  uint32_t cap = t->ref.cfg.capacity;
  uint32_t n = rnd(x, 12) == 0 ? cap + 1 + rnd(x, 4) : 1 + rnd(x, 12);
  do_insert(x, t, n, rnd(x, 4));
}

static void script_sample(fixture *x, tab *t) {
  static const double betas[4] = {0.0, 0.4, 1.0, 2.5};
  uint32_t B =
      rnd(x, 12) == 0 ? t->ref.cfg.capacity + rnd(x, 5) : 1 + rnd(x, 8);
  uint32_t flags = 0, window = 0, want = 0;
  double beta = 0;
  if (rnd(x, 3) == 0) flags |= PER_SAMPLE_UNIQUE;
  if (rnd(x, 4) == 0) {
    flags |= PER_SAMPLE_BETA;
    beta = betas[rnd(x, 4)];
  } else if (rnd(x, 40) == 0) {
    beta = 0.5; /* without PER_SAMPLE_BETA: refused (PER_ERR_ARG) */
  }
  if (rnd(x, 3) == 0) {
    window = 1 + rnd(x, t->ref.size + 3);
    if (rnd(x, 2)) flags |= PER_SAMPLE_TRAJECTORIES;
  }
  if (t->ref.cfg.seq_len ? rnd(x, 3) != 0 : rnd(x, 25) == 0)
    flags |= PER_SAMPLE_SEQUENCES;
  if (rnd(x, 60) == 0) flags |= 1u << 4; /* unknown: refused */
  if (rnd(x, 4) == 0) want = PER_NET_NO_ITEMS;
  do_sample(x, t, B, flags, beta, window, want);
}

static void script_update(fixture *x, tab *t) {
  uint64_t ids[8];
  float td[8 * 8];
  uint32_t n, j, flags = 0, k = 1;
  if (t->ref.cfg.seq_len && t->nseq && rnd(x, 2)) {
    flags = PER_NET_SEQUENCES;
    k = t->ref.cfg.seq_len;
    n = 1 + rnd(x, 4);
    for (j = 0; j < n; ++j) ids[j] = t->seq_ids[rnd(x, t->nseq)];
  } else {
    n = 1 + rnd(x, 8);
    for (j = 0; j < n; ++j)
      ids[j] = t->nitem ? t->item_ids[rnd(x, t->nitem)]
                        : (uint64_t)rnd(x, t->ref.cfg.capacity) | 1ull << 32;
    if (rnd(x, 30) == 0) /* a slot past the capacity: never handed out */
      ids[rnd(x, n)] = (t->ref.cfg.capacity + rnd(x, 4)) | 1ull << 32;
    if (rnd(x, 30) == 0) ids[rnd(x, n)] &= 0xFFFFFFFFu; /* generation 0 */
    if (t->nseq && rnd(x, 30) == 0) /* a sequence's id: PER_ERR_ARG */
      ids[rnd(x, n)] = t->seq_ids[rnd(x, t->nseq)];
    if (!t->ref.cfg.seq_len && rnd(x, 40) == 0) {
      flags = PER_NET_SEQUENCES; /* no sequences: refused */
      k = 1;
    }
  }
  for (j = 0; j < n * k; ++j) td[j] = td_value(x);
  if (flags && !t->ref.cfg.seq_len) {
    /* the reference has no call to compare with: the server refuses it
       (PER_ERR_ARG) with its own message */
    uint64_t id = next_id(x);
    answer r;
    m_head(&x->m, PER_NET_UPDATE, id, t->name);
    m_u32(&x->m, n);
    m_u32(&x->m, flags);
    for (j = 0; j < n; ++j) m_u64(&x->m, ids[j]);
    for (j = 0; j < n; ++j) m_f32(&x->m, td[j]);
    SEND(&x->s, &x->m, &r);
    CHECK_STATUS(r.st, PER_ERR_ARG);
    CHECK(strstr(r.msg, "has no sequences") != NULL);
    x->requests++;
    x->refused++;
    t->refused++;
    return;
  }
  do_update(x, t, ids, n, flags, td);
}

static void test_script(void) {
  fixture x;
  uint32_t k, ok_ops[5] = {0};
  fx_init(&x, PER_NET_MAX_MESSAGE, NULL);
  fx_add(&x, "plain", cfg_plain(), "uint8 x[5]");
  fx_add(&x, "weights max, max live", cfg_wmax(), "");
  fx_add(&x, "seq", cfg_seq(), "uint8 rgb[3]");
  fx_add(&x, "seq2", cfg_seq2(), "float64 v");
  FX_CHECK(&x);
  for (k = 0; k < 4000; ++k) {
    tab *t = &x.tabs[rnd(&x, x.ntabs)];
    uint32_t op = rnd(&x, 100);
    uint64_t refused = x.refused;
    if (op < 30) script_insert(&x, t);
    else if (op < 65) script_sample(&x, t);
    else if (op < 90) script_update(&x, t);
    else if (op < 95) do_info(&x, t);
    else do_hello(&x, t, rnd(&x, 2) ? t->ref.layout : "");
    if (x.refused == refused)
      ok_ops[op < 30 ? 0 : op < 65 ? 1 : op < 90 ? 2 : 3]++;
    FX_CHECK(&x);
  }
  /* the script did reach each op's success (and its refusals) */
  CHECK(ok_ops[0] > 200 && ok_ops[1] > 200 && ok_ops[2] > 200);
  CHECK(x.refused > 100);
  CHECK(x.stale > 0 && x.masked > 0 && x.ends > 0 && x.tds > 0 && x.over > 0);
  CHECK(x.unique > 0 && x.beta > 0 && x.window > 0 && x.trajs > 0);
  CHECK(x.noitems > 0 && x.seq_draws > 0 && x.seq_updates > 0);
  printf("script: %llu requests (%llu refused), %llu stale ids, %llu masked "
         "steps, %llu sequence draws, %llu sequence updates\n",
         (unsigned long long)x.requests, (unsigned long long)x.refused,
         (unsigned long long)x.stale, (unsigned long long)x.masked,
         (unsigned long long)x.seq_draws, (unsigned long long)x.seq_updates);
  for (k = 0; k < x.ntabs; ++k) {
    CHECK(x.tabs[k].ref.added > x.tabs[k].ref.cfg.capacity); /* wrapped */
    CHECK(x.tabs[k].updates > 20);
  }
  fx_free(&x);
}

/* ---- refusals ------------------------------------------------------------ */

/* Handle m, which must be refused with `st`, op and id echoed as given:
   a message, the counters moved (table t's too when t is not NULL: the
   request named it) and every table byte for byte as it was. */
static void refused_at(fixture *x, tab *t, const void *req, size_t len,
                       per_status st, uint32_t op, uint64_t id, int line) {
  bsnap before[NTAB_MAX];
  uint64_t counts[NTAB_MAX][4];
  uint64_t requests = x->s.requests, nrefused = x->s.refused;
  uint32_t k;
  answer r;
  for (k = 0; k < x->ntabs; ++k) {
    per_net_table *nt = x->tabs[k].t;
    before[k] = bsnap_take(&nt->buf);
    counts[k][0] = nt->inserts;
    counts[k][1] = nt->samples;
    counts[k][2] = nt->updates;
    counts[k][3] = nt->refused + (t == &x->tabs[k]);
  }
  send_at(&x->s, req, len, &r, line);
  CHECK_MSG(r.st == st, "line %d: status %d (%s: \"%s\"), want %d (%s)", line,
            (int)r.st, per_status_str(r.st), r.msg, (int)st,
            per_status_str(st));
  CHECK_MSG(r.op == op && r.id == id,
            "line %d: op %u id %llu echoed, want %u %llu", line, r.op,
            (unsigned long long)r.id, op, (unsigned long long)id);
  CHECK_MSG(r.msg_len > 0, "line %d: no message", line);
  CHECK_MSG(strcmp(x->s.error, r.msg) == 0,
            "line %d: s->error \"%s\" is not the reply's message", line,
            x->s.error);
  CHECK_MSG(x->s.requests == requests + 1 && x->s.refused == nrefused + 1,
            "line %d: server counters", line);
  x->requests++;
  x->refused++;
  if (t) t->refused++;
  for (k = 0; k < x->ntabs; ++k) {
    per_net_table *nt = x->tabs[k].t;
    CHECK_MSG(bsnap_same(&before[k], &nt->buf),
              "line %d: table %s changed by a refused request", line,
              x->tabs[k].name);
    CHECK_MSG(nt->inserts == counts[k][0] && nt->samples == counts[k][1] &&
                  nt->updates == counts[k][2] && nt->refused == counts[k][3],
              "line %d: table %s's counters", line, x->tabs[k].name);
  }
}
#define REFUSED(x, t, m, st, op, id) \
  refused_at((x), (t), (m)->p, (m)->n, (st), (op), (id), __LINE__)

/* A request that must succeed (the tables' own calls, no reference). */
static void ok_at(fixture *x, const msg *m, answer *r, int line) {
  send_at(&x->s, m->p, m->n, r, line);
  CHECK_MSG(r->st == PER_OK, "line %d: refused: %d \"%s\"", line, (int)r->st,
            r->msg);
  x->requests++;
}
#define OK(x, m, r) ok_at((x), (m), (r), __LINE__)

/* A fixture for refusals: tables "plain" (layout "uint8 x[5]") and "seq"
   with items, and ids of each kind. */
static void refusal_fixture(fixture *x, uint64_t max_message) {
  uint32_t k;
  fx_init(x, max_message, NULL);
  fx_add(x, "plain", cfg_plain(), "uint8 x[5]");
  fx_add(x, "seq", cfg_seq(), "");
  for (k = 0; k < 2; ++k) {
    do_insert(x, &x->tabs[k], 20, 0);
    do_sample(x, &x->tabs[k], 4, 0, 0, 0, 0);
    REQUIRE(x->tabs[k].nitem == 4);
  }
  do_sample(x, &x->tabs[1], 3, PER_SAMPLE_SEQUENCES, 0, 0, 0);
  REQUIRE(x->tabs[1].nseq == 3);
  FX_CHECK(x);
}

/* Every prefix of m and m with 1..8 bytes more are refused
   (PER_ERR_FORMAT); the header is echoed once it is whole. */
static void cut_and_pad_at(fixture *x, tab *t, const msg *m, int line) {
  size_t k, full = m->n;
  uint32_t op = (uint32_t)le(m->p + 6, 2);
  uint64_t id = le(m->p + 8, 8);
  size_t named = 17u + m->p[16];
  msg big = {NULL, 0, 0};
  for (k = 0; k < full; ++k)
    refused_at(x, k >= named ? t : NULL, m->p, k, PER_ERR_FORMAT,
               k >= 17 ? op : 0, k >= 17 ? id : 0, line);
  m_bytes(&big, m->p, full);
  for (k = 1; k <= 8; ++k) {
    m_u8(&big, k == 8 ? 0 : 0xA5u);
    refused_at(x, t, big.p, big.n, PER_ERR_FORMAT, op, id, line);
  }
  free(big.p);
}

static void test_truncated(void) {
  fixture x;
  tab *p, *q;
  answer r;
  uint32_t j;
  float td[8];
  refusal_fixture(&x, PER_NET_MAX_MESSAGE);
  p = &x.tabs[0];
  q = &x.tabs[1];
  hello_req(&x.m, 1, "plain", 5, "uint8 x[5]");
  cut_and_pad_at(&x, p, &x.m, __LINE__);
  OK(&x, &x.m, &r);
  hello_req(&x.m, 2, "plain", 5, "");
  cut_and_pad_at(&x, p, &x.m, __LINE__);
  m_head(&x.m, PER_NET_INSERT, 3, "plain");
  m_u32(&x.m, 3);
  m_u32(&x.m, PER_NET_ENDS | PER_NET_TD);
  for (j = 0; j < 15; ++j) m_u8(&x.m, j);
  m_u8(&x.m, 0);
  m_u8(&x.m, 1);
  m_u8(&x.m, 2);
  for (j = 0; j < 3; ++j) m_f32(&x.m, 0.5f + (float)j);
  cut_and_pad_at(&x, p, &x.m, __LINE__);
  m_head(&x.m, PER_NET_INSERT, 4, "seq");
  m_u32(&x.m, 2);
  m_u32(&x.m, 0);
  for (j = 0; j < 6; ++j) m_u8(&x.m, j);
  cut_and_pad_at(&x, q, &x.m, __LINE__);
  m_head(&x.m, PER_NET_SAMPLE, 5, "plain");
  m_u32(&x.m, 4);
  m_u32(&x.m, PER_SAMPLE_UNIQUE | PER_SAMPLE_BETA);
  m_f64(&x.m, 0.5);
  m_u32(&x.m, 10);
  m_u32(&x.m, PER_NET_NO_ITEMS);
  cut_and_pad_at(&x, p, &x.m, __LINE__);
  m_head(&x.m, PER_NET_UPDATE, 6, "plain");
  m_u32(&x.m, 2);
  m_u32(&x.m, 0);
  m_u64(&x.m, p->item_ids[0]);
  m_u64(&x.m, p->item_ids[1]);
  m_f32(&x.m, 1.0f);
  m_f32(&x.m, 2.0f);
  cut_and_pad_at(&x, p, &x.m, __LINE__);
  m_head(&x.m, PER_NET_UPDATE, 7, "seq");
  m_u32(&x.m, 2);
  m_u32(&x.m, PER_NET_SEQUENCES);
  m_u64(&x.m, q->seq_ids[0]);
  m_u64(&x.m, q->seq_ids[1]);
  for (j = 0; j < 8; ++j) td[j] = (float)j;
  for (j = 0; j < 8; ++j) m_f32(&x.m, td[j]);
  cut_and_pad_at(&x, q, &x.m, __LINE__);
  OK(&x, &x.m, &r); /* the whole one is good */
  m_head(&x.m, PER_NET_INFO, 8, "seq");
  cut_and_pad_at(&x, q, &x.m, __LINE__);
  /* NULL request bytes: len is taken as 0 */
  refused_at(&x, NULL, NULL, 100, PER_ERR_FORMAT, 0, 0, __LINE__);
  fx_free(&x);
}

static void test_refusals(void) {
  fixture x;
  tab *p, *q;
  answer r;
  char name64[65];
  msg *m = &x.m;
  refusal_fixture(&x, PER_NET_MAX_MESSAGE);
  p = &x.tabs[0];
  q = &x.tabs[1];
  /* magic */
  m_head_raw(m, "PERX", 1, PER_NET_INFO, 9, "plain", 5);
  REFUSED(&x, NULL, m, PER_ERR_FORMAT, 0, 0);
  CHECK_STR(x.s.error, "request: no PERQ magic");
  m_head_raw(m, "PERR", 1, PER_NET_INFO, 9, "plain", 5); /* a reply */
  REFUSED(&x, NULL, m, PER_ERR_FORMAT, 0, 0);
  /* version: refused in a version-1 reply, the header echoed */
  m_head_raw(m, "PERQ", 0, PER_NET_INFO, 10, "plain", 5);
  REFUSED(&x, NULL, m, PER_ERR_VERSION, PER_NET_INFO, 10);
  CHECK_STR(x.s.error, "request: version 0: this server speaks version 1");
  m_head_raw(m, "PERQ", 2, PER_NET_SAMPLE, 11, "plain", 5);
  REFUSED(&x, NULL, m, PER_ERR_VERSION, PER_NET_SAMPLE, 11);
  m_head_raw(m, "PERQ", 0xFFFF, 77, 12, "", 0);
  REFUSED(&x, NULL, m, PER_ERR_VERSION, 77, 12);
  /* ops: 0, 6 and the largest, for a table that exists */
  m_head(m, 0, 13, "plain");
  REFUSED(&x, p, m, PER_ERR_FORMAT, 0, 13);
  CHECK_STR(x.s.error, "request: unknown op 0");
  m_head(m, 6, 14, "seq");
  REFUSED(&x, q, m, PER_ERR_FORMAT, 6, 14);
  m_head(m, 0xFFFF, UINT64_MAX, "seq");
  m_u32(m, 0);
  REFUSED(&x, q, m, PER_ERR_FORMAT, 0xFFFF, UINT64_MAX);
  /* table names: unknown, a prefix, a longer one, 0 and 64 bytes, a
     control character */
  m_head(m, PER_NET_INFO, 15, "plane");
  REFUSED(&x, NULL, m, PER_ERR_INDEX, PER_NET_INFO, 15);
  CHECK_STR(x.s.error, "request: no table named \"plane\"");
  m_head(m, PER_NET_INFO, 16, "pla");
  REFUSED(&x, NULL, m, PER_ERR_INDEX, PER_NET_INFO, 16);
  m_head(m, PER_NET_INFO, 17, "plainer");
  REFUSED(&x, NULL, m, PER_ERR_INDEX, PER_NET_INFO, 17);
  m_head_raw(m, "PERQ", 1, PER_NET_INFO, 18, "", 0);
  REFUSED(&x, NULL, m, PER_ERR_FORMAT, PER_NET_INFO, 18);
  memset(name64, 'a', 64);
  name64[64] = 0;
  m_head_raw(m, "PERQ", 1, PER_NET_INFO, 19, name64, 64);
  REFUSED(&x, NULL, m, PER_ERR_FORMAT, PER_NET_INFO, 19);
  m_head_raw(m, "PERQ", 1, PER_NET_INFO, 20, name64, 63); /* no such table */
  REFUSED(&x, NULL, m, PER_ERR_INDEX, PER_NET_INFO, 20);
  m_head_raw(m, "PERQ", 1, PER_NET_INFO, 21, "pl\0in", 5);
  REFUSED(&x, NULL, m, PER_ERR_FORMAT, PER_NET_INFO, 21);
  m_head_raw(m, "PERQ", 1, PER_NET_INFO, 22, "pl\nin", 5);
  REFUSED(&x, NULL, m, PER_ERR_FORMAT, PER_NET_INFO, 22);
  m_head_raw(m, "PERQ", 1, PER_NET_INFO, 23, "plai\x7f", 5);
  REFUSED(&x, NULL, m, PER_ERR_FORMAT, PER_NET_INFO, 23);

  /* INSERT: unknown flags, n = 0, NaN and infinite TD errors, a bad end */
  m_head(m, PER_NET_INSERT, 30, "plain");
  m_u32(m, 1);
  m_u32(m, 4);
  m_bytes(m, "abcde", 5);
  REFUSED(&x, p, m, PER_ERR_ARG, PER_NET_INSERT, 30);
  CHECK_STR(x.s.error, "insert: unknown flags 4");
  m_head(m, PER_NET_INSERT, 31, "plain");
  m_u32(m, 1);
  m_u32(m, 0x80000000u | PER_NET_TD);
  m_bytes(m, "abcde", 5);
  m_f32(m, 1.0f);
  REFUSED(&x, p, m, PER_ERR_ARG, PER_NET_INSERT, 31);
  m_head(m, PER_NET_INSERT, 32, "plain");
  m_u32(m, 0);
  m_u32(m, 0);
  REFUSED(&x, p, m, PER_ERR_BATCH, PER_NET_INSERT, 32);
  CHECK_STR(x.s.error, "insert: n is 0");
  m_head(m, PER_NET_INSERT, 33, "plain");
  m_u32(m, 2);
  m_u32(m, PER_NET_TD);
  m_bytes(m, "abcdefghij", 10);
  m_f32(m, 1.0f);
  m_f32(m, (float)NAN);
  REFUSED(&x, p, m, PER_ERR_NAN, PER_NET_INSERT, 33);
  CHECK(strstr(x.s.error, "td[1]") != NULL); /* the buffer's message */
  m_head(m, PER_NET_INSERT, 34, "seq");
  m_u32(m, 1);
  m_u32(m, PER_NET_TD | PER_NET_ENDS);
  m_bytes(m, "abc", 3);
  m_u8(m, 1);
  m_f32(m, -(float)INFINITY);
  REFUSED(&x, q, m, PER_ERR_INF, PER_NET_INSERT, 34);
  m_head(m, PER_NET_INSERT, 35, "seq");
  m_u32(m, 2);
  m_u32(m, PER_NET_ENDS);
  m_bytes(m, "abcdef", 6);
  m_u8(m, 0);
  m_u8(m, 3);
  REFUSED(&x, q, m, PER_ERR_ARG, PER_NET_INSERT, 35);
  /* a count whose bytes would pass the request: the largest n */
  m_head(m, PER_NET_INSERT, 36, "plain");
  m_u32(m, UINT32_MAX);
  m_u32(m, PER_NET_ENDS | PER_NET_TD);
  m_bytes(m, "abcdefghij", 10);
  REFUSED(&x, p, m, PER_ERR_FORMAT, PER_NET_INSERT, 36);

  /* SAMPLE: B = 0, unknown want bits, unknown flags, beta without its
     flag, sequences of a table without them, too many unique */
  m_head(m, PER_NET_SAMPLE, 40, "plain");
  m_u32(m, 0);
  m_u32(m, 0);
  m_f64(m, 0);
  m_u32(m, 0);
  m_u32(m, 0);
  REFUSED(&x, p, m, PER_ERR_BATCH, PER_NET_SAMPLE, 40);
  CHECK_STR(x.s.error, "sample: B 0 (a batch is 1 or more)");
  m_head(m, PER_NET_SAMPLE, 41, "plain");
  m_u32(m, 2);
  m_u32(m, 0);
  m_f64(m, 0);
  m_u32(m, 0);
  m_u32(m, 2);
  REFUSED(&x, p, m, PER_ERR_ARG, PER_NET_SAMPLE, 41);
  CHECK_STR(x.s.error, "sample: unknown want bits 2");
  m_head(m, PER_NET_SAMPLE, 42, "plain");
  m_u32(m, 2);
  m_u32(m, 0);
  m_f64(m, 0);
  m_u32(m, 0);
  m_u32(m, 0x80000001u);
  REFUSED(&x, p, m, PER_ERR_ARG, PER_NET_SAMPLE, 42);
  m_head(m, PER_NET_SAMPLE, 43, "plain");
  m_u32(m, 2);
  m_u32(m, 1u << 4);
  m_f64(m, 0);
  m_u32(m, 0);
  m_u32(m, 0);
  REFUSED(&x, p, m, PER_ERR_ARG, PER_NET_SAMPLE, 43);
  m_head(m, PER_NET_SAMPLE, 44, "plain");
  m_u32(m, 2);
  m_u32(m, 0);
  m_f64(m, 0.5);
  m_u32(m, 0);
  m_u32(m, 0);
  REFUSED(&x, p, m, PER_ERR_ARG, PER_NET_SAMPLE, 44);
  m_head(m, PER_NET_SAMPLE, 45, "plain");
  m_u32(m, 2);
  m_u32(m, PER_SAMPLE_BETA);
  m_f64(m, (double)NAN);
  m_u32(m, 0);
  m_u32(m, 0);
  REFUSED(&x, p, m, PER_ERR_ARG, PER_NET_SAMPLE, 45);
  m_head(m, PER_NET_SAMPLE, 46, "plain");
  m_u32(m, 2);
  m_u32(m, PER_SAMPLE_SEQUENCES);
  m_f64(m, 0);
  m_u32(m, 0);
  m_u32(m, 0);
  REFUSED(&x, p, m, PER_ERR_ARG, PER_NET_SAMPLE, 46);
  m_head(m, PER_NET_SAMPLE, 47, "plain");
  m_u32(m, 17); /* max_unique 16 */
  m_u32(m, PER_SAMPLE_UNIQUE);
  m_f64(m, 0);
  m_u32(m, 0);
  m_u32(m, 0);
  REFUSED(&x, p, m, PER_ERR_BATCH, PER_NET_SAMPLE, 47);
  m_head(m, PER_NET_SAMPLE, 48, "plain");
  m_u32(m, UINT32_MAX); /* far past the largest message */
  m_u32(m, 0);
  m_f64(m, 0);
  m_u32(m, 0);
  m_u32(m, PER_NET_NO_ITEMS);
  REFUSED(&x, p, m, PER_ERR_BATCH, PER_NET_SAMPLE, 48);
  CHECK_STR(x.s.error, "sample: B 4294967295 makes a reply larger than the "
                       "largest message, 67108864");

  /* UPDATE: unknown flags, NaN, ids never handed out, a sequence's id in
     an item update, sequences of a table without them, n = 0 */
  m_head(m, PER_NET_UPDATE, 50, "plain");
  m_u32(m, 1);
  m_u32(m, 2);
  m_u64(m, p->item_ids[0]);
  m_f32(m, 1.0f);
  REFUSED(&x, p, m, PER_ERR_ARG, PER_NET_UPDATE, 50);
  CHECK_STR(x.s.error, "update: unknown flags 2");
  m_head(m, PER_NET_UPDATE, 51, "plain");
  m_u32(m, 2);
  m_u32(m, 0);
  m_u64(m, p->item_ids[0]);
  m_u64(m, p->item_ids[1]);
  m_f32(m, 1.0f);
  m_f32(m, (float)NAN);
  REFUSED(&x, p, m, PER_ERR_NAN, PER_NET_UPDATE, 51);
  m_head(m, PER_NET_UPDATE, 52, "seq");
  m_u32(m, 1);
  m_u32(m, PER_NET_SEQUENCES);
  m_u64(m, q->seq_ids[0]);
  m_f32(m, 1.0f);
  m_f32(m, 1.0f);
  m_f32(m, (float)NAN);
  m_f32(m, 1.0f);
  REFUSED(&x, q, m, PER_ERR_NAN, PER_NET_UPDATE, 52);
  m_head(m, PER_NET_UPDATE, 53, "plain");
  m_u32(m, 1);
  m_u32(m, 0);
  m_u64(m, 40u | 1ull << 32); /* slot 40 of a capacity of 40 */
  m_f32(m, 1.0f);
  REFUSED(&x, p, m, PER_ERR_INDEX, PER_NET_UPDATE, 53);
  m_head(m, PER_NET_UPDATE, 54, "plain");
  m_u32(m, 1);
  m_u32(m, 0);
  m_u64(m, 3); /* generation 0 */
  m_f32(m, 1.0f);
  REFUSED(&x, p, m, PER_ERR_INDEX, PER_NET_UPDATE, 54);
  m_head(m, PER_NET_UPDATE, 55, "plain");
  m_u32(m, 1);
  m_u32(m, 0);
  m_u64(m, 3u | 9ull << 32); /* a generation slot 3 never had */
  m_f32(m, 1.0f);
  REFUSED(&x, p, m, PER_ERR_INDEX, PER_NET_UPDATE, 55);
  m_head(m, PER_NET_UPDATE, 56, "seq");
  m_u32(m, 1);
  m_u32(m, 0);
  m_u64(m, q->seq_ids[0]);
  m_f32(m, 1.0f);
  REFUSED(&x, q, m, PER_ERR_ARG, PER_NET_UPDATE, 56);
  m_head(m, PER_NET_UPDATE, 57, "seq");
  m_u32(m, 1);
  m_u32(m, PER_NET_SEQUENCES);
  m_u64(m, 1u | PER_ID_SEQ | 1ull << 32); /* not a sequence start */
  m_f32(m, 1.0f);
  m_f32(m, 1.0f);
  m_f32(m, 1.0f);
  m_f32(m, 1.0f);
  REFUSED(&x, q, m, PER_ERR_INDEX, PER_NET_UPDATE, 57);
  m_head(m, PER_NET_UPDATE, 58, "plain");
  m_u32(m, 1);
  m_u32(m, PER_NET_SEQUENCES);
  m_u64(m, p->item_ids[0]);
  m_f32(m, 1.0f);
  REFUSED(&x, p, m, PER_ERR_ARG, PER_NET_UPDATE, 58);
  CHECK_STR(x.s.error, "update: table \"plain\" has no sequences (seq_len 0)");
  m_head(m, PER_NET_UPDATE, 59, "seq");
  m_u32(m, UINT32_MAX); /* n * (8 + 4 * 4) bytes: more than there are */
  m_u32(m, PER_NET_SEQUENCES);
  m_u64(m, q->seq_ids[0]);
  REFUSED(&x, q, m, PER_ERR_FORMAT, PER_NET_UPDATE, 59);
  /* n = 0: PROTOCOL.md's statuses table, "PER_ERR_BATCH: n or B of 0".
     per_net.h's UPDATE has no such check (it applies nothing, counts an
     update and answers PER_OK): this check fails until it does. */
  m_head(m, PER_NET_UPDATE, 60, "plain");
  m_u32(m, 0);
  m_u32(m, 0);
  REFUSED(&x, p, m, PER_ERR_BATCH, PER_NET_UPDATE, 60);
  m_head(m, PER_NET_UPDATE, 61, "seq");
  m_u32(m, 0);
  m_u32(m, PER_NET_SEQUENCES);
  REFUSED(&x, q, m, PER_ERR_BATCH, PER_NET_UPDATE, 61);

  /* HELLO: another item size, another layout (both named in the message),
     a layout of another length */
  hello_req(m, 70, "plain", 6, "uint8 x[5]");
  REFUSED(&x, p, m, PER_ERR_MISMATCH, PER_NET_HELLO, 70);
  CHECK_STR(x.s.error, "hello: table \"plain\" has items of 5 bytes, layout "
                       "\"uint8 x[5]\"; the client's are 6 bytes, "
                       "\"uint8 x[5]\"");
  hello_req(m, 71, "plain", 5, "uint8 x[6]");
  REFUSED(&x, p, m, PER_ERR_MISMATCH, PER_NET_HELLO, 71);
  CHECK(strstr(x.s.error, "\"uint8 x[6]\"") != NULL);
  hello_req(m, 72, "plain", 5, "uint8 x[5] ");
  REFUSED(&x, p, m, PER_ERR_MISMATCH, PER_NET_HELLO, 72);
  hello_req(m, 73, "seq", 4, "");
  REFUSED(&x, q, m, PER_ERR_MISMATCH, PER_NET_HELLO, 73);
  /* a layout length past the bytes there are */
  m_head(m, PER_NET_HELLO, 74, "plain");
  m_u32(m, 5);
  m_u16(m, 0xFFFF);
  m_bytes(m, "uint8", 5);
  REFUSED(&x, p, m, PER_ERR_FORMAT, PER_NET_HELLO, 74);
  /* HELLO accepted: an empty layout against a table's, any layout against
     a table without one; the reply is the table */
  hello_req(m, 75, "plain", 5, "");
  OK(&x, m, &r);
  hello_body(&p->ref, &x.want);
  CHECK_BODY(&r, &x.want);
  hello_req(m, 76, "seq", 3, "float32 anything");
  OK(&x, m, &r);
  hello_body(&q->ref, &x.want);
  CHECK_BODY(&r, &x.want);
  /* s->error is "" after a successful request of each op, also after a
     refusal (per_net.h's HELLO does not clear it: that check fails until
     it does) */
  {
    static const char *const ops[5] = {"HELLO", "INSERT", "SAMPLE", "UPDATE",
                                       "INFO"};
    uint32_t k;
    for (k = 0; k < 5; ++k) {
      m_head(m, PER_NET_INFO, 77, "nope");
      REFUSED(&x, NULL, m, PER_ERR_INDEX, PER_NET_INFO, 77);
      if (k == 0) hello_req(m, 78, "plain", 5, "uint8 x[5]");
      if (k == 1) {
        m_head(m, PER_NET_INSERT, 78, "plain");
        m_u32(m, 1);
        m_u32(m, 0);
        m_bytes(m, "abcde", 5);
      }
      if (k == 2) {
        m_head(m, PER_NET_SAMPLE, 78, "plain");
        m_u32(m, 1);
        m_u32(m, 0);
        m_f64(m, 0);
        m_u32(m, 0);
        m_u32(m, 0);
      }
      if (k == 3) {
        m_head(m, PER_NET_UPDATE, 78, "plain");
        m_u32(m, 1);
        m_u32(m, 0);
        m_u64(m, p->item_ids[0]);
        m_f32(m, 1.0f);
      }
      if (k == 4) m_head(m, PER_NET_INFO, 78, "plain");
      OK(&x, m, &r);
      CHECK_MSG(x.s.error[0] == 0, "s->error \"%s\" after a successful %s",
                x.s.error, ops[k]);
    }
  }
  m_head(m, PER_NET_INFO, 80, "plain");
  OK(&x, m, &r);
  /* the tables' counters after all that, as INFO says them */
  CHECK_EQ_U(le(r.body + 48, 8), p->t->inserts);
  CHECK_EQ_U(le(r.body + 72, 8), p->t->refused);
  CHECK(p->t->refused > 20);
  fx_free(&x);
}

/* The largest batch whose reply fits in max_message is answered, one more
   is refused (PER_ERR_BATCH): items, no items, sequences with masks, and
   a reply of exactly max_message. */
static void sample_b(fixture *x, tab *t, uint64_t id, uint32_t B,
                     uint32_t flags, uint32_t want) {
  m_head(&x->m, PER_NET_SAMPLE, id, t->name);
  m_u32(&x->m, B);
  m_u32(&x->m, flags);
  m_f64(&x->m, 0);
  m_u32(&x->m, 0);
  m_u32(&x->m, want);
}

static void test_largest_batch(void) {
  fixture x;
  tab *p, *q, *w;
  uint32_t room = (uint32_t)(PER_NET_MIN_MESSAGE - PER_NET_REPLY_HEADER - 16);
  uint32_t unit_items = 12 + 5, unit_ids = 12, unit_seq = 12 + 4 * 3 + 4;
  per_config c = per_config_default(16, 12);
  refusal_fixture(&x, PER_NET_MIN_MESSAGE);
  p = &x.tabs[0];
  q = &x.tabs[1];
  CHECK_EQ_U(x.s.max_message, 4096);
  sample_b(&x, p, 1, room / unit_items + 1, 0, 0);
  REFUSED(&x, p, &x.m, PER_ERR_BATCH, PER_NET_SAMPLE, 1);
  CHECK_STR(x.s.error, "sample: B 239 makes a reply larger than the largest "
                       "message, 4096");
  do_sample(&x, p, room / unit_items, 0, 0, 0, 0);
  CHECK_EQ_U(x.s.out_cap, 4096);
  FX_CHECK(&x);
  sample_b(&x, p, 2, room / unit_ids + 1, 0, PER_NET_NO_ITEMS);
  REFUSED(&x, p, &x.m, PER_ERR_BATCH, PER_NET_SAMPLE, 2);
  do_sample(&x, p, room / unit_ids, 0, 0, 0, PER_NET_NO_ITEMS);
  sample_b(&x, q, 3, room / unit_seq + 1, PER_SAMPLE_SEQUENCES, 0);
  REFUSED(&x, q, &x.m, PER_ERR_BATCH, PER_NET_SAMPLE, 3);
  do_sample(&x, q, room / unit_seq, PER_SAMPLE_SEQUENCES, 0, 0, 0);
  FX_CHECK(&x);
  /* items of 12 bytes: 169 draws of 24 bytes fill the room exactly */
  w = fx_add(&x, "wide", c, "");
  do_insert(&x, w, 10, 0);
  sample_b(&x, w, 4, 170, 0, 0);
  REFUSED(&x, w, &x.m, PER_ERR_BATCH, PER_NET_SAMPLE, 4);
  CHECK_EQ_U(169u * 24u, room);
  do_sample(&x, w, 169, 0, 0, 0, 0);
  CHECK_EQ_U(x.s.out_cap, 4096);
  FX_CHECK(&x);
  {
    answer r;
    sample_b(&x, w, 5, 169, 0, 0);
    send_at(&x.s, x.m.p, x.m.n, &r, __LINE__);
    CHECK_STATUS(r.st, PER_OK);
    CHECK_EQ_U(r.raw_len, 4096);
  }
  fx_free(&x);
}

/* ---- spec texts ----------------------------------------------------------- */

static const char GOOD_SPEC[] =
    "# two tables, every key\n"
    "\n"
    "table plain one\n"
    "  capacity   64\n"
    "\titem_size\t12  \n"
    "  alpha 0.7\n"
    "  beta0 0.5\n"
    "  beta1 0.9\n"
    "  beta_steps 1000\n"
    "  eps 1e-5\n"
    "  max_priority 2.5\n"
    "  seed 18446744073709551615\n"
    "  flags weights_buffer_max | max_live\n"
    "  max_unique 32\n"
    "  layout   float32 obs[2]; int32 action;  float32  r  \n"
    "   # a comment inside\n"
    "\r\n"
    "table seq\r\n"
    "seq_eta 0.25\n"
    "item_size 8\n"
    "capacity 96\n"
    "seq_len 6\n"
    "seq_stride 3\n"
    "flags 2\n"
    "table named\n"
    "capacity 10\n"
    "item_size 1\n"
    "flags seq_cross_episodes|weights_buffer_max\n"
    "seq_len 2\n"
    "seq_stride 1\n"
    "layout\n";

static void test_spec(void) {
  per_net_server s;
  per_net_table *t;
  per_config d;
  REQUIRE(per_net_init(&s, PER_NET_MAX_MESSAGE, NULL) == PER_OK);
  CHECK_OK(per_net_add_spec(&s, GOOD_SPEC));
  CHECK_EQ_U(s.ntables, 3);
  CHECK(s.error[0] == 0);
  t = per_net_find(&s, "plain one", 9);
  REQUIRE(t != NULL);
  CHECK(t == s.tables[0]);
  CHECK_EQ_U(t->buf.cfg.capacity, 64);
  CHECK_EQ_U(t->buf.cfg.item_size, 12);
  CHECK_EQ_F(t->buf.cfg.alpha, 0.7);
  CHECK_EQ_F(t->buf.cfg.beta0, 0.5);
  CHECK_EQ_F(t->buf.cfg.beta1, 0.9);
  CHECK_EQ_U(t->buf.cfg.beta_steps, 1000);
  CHECK_EQ_F(t->buf.cfg.eps, 1e-5);
  CHECK_EQ_F(t->buf.cfg.max_priority, 2.5);
  CHECK_EQ_U(t->buf.cfg.seed, UINT64_MAX);
  CHECK_EQ_U(t->buf.cfg.flags, PER_WEIGHTS_BUFFER_MAX | PER_MAX_LIVE);
  CHECK_EQ_U(t->buf.cfg.max_unique, 32);
  CHECK_EQ_U(t->buf.cfg.seq_len, 0);
  CHECK(strcmp(t->buf.layout, "float32 obs[2]; int32 action;  float32  r") ==
        0);
  t = per_net_find(&s, "seq", 3);
  REQUIRE(t != NULL);
  d = per_config_default(96, 8);
  d.seq_eta = 0.25;
  d.seq_len = 6;
  d.seq_stride = 3;
  d.flags = PER_SEQ_CROSS_EPISODES;
  CHECK(memcmp(&t->buf.cfg, &d, sizeof d) == 0);
  CHECK(t->buf.layout[0] == 0);
  t = per_net_find(&s, "named", 5);
  REQUIRE(t != NULL);
  CHECK_EQ_U(t->buf.cfg.flags, PER_SEQ_CROSS_EPISODES | PER_WEIGHTS_BUFFER_MAX);
  CHECK_EQ_U(t->buf.cfg.max_unique, 10); /* per_config_default's for 10 */
  CHECK(t->buf.layout[0] == 0);
  CHECK(per_net_find(&s, "plain", 5) == NULL);
  CHECK(per_net_find(&s, "plain one ", 10) == NULL);
  CHECK(per_net_find(&s, NULL, 3) == NULL);
  CHECK(per_net_find(NULL, "seq", 3) == NULL);
  /* an empty text (and one of comments) adds nothing and succeeds */
  CHECK_OK(per_net_add_spec(&s, ""));
  CHECK_OK(per_net_add_spec(&s, "# nothing\n\n  \n"));
  CHECK_EQ_U(s.ntables, 3);
  per_net_free(&s);
  CHECK(s.tables == NULL && s.ntables == 0);
}

/* Spec `text` is refused with `want`, s->error starting with `msg`; no
   table of it is added and the server's tables are as they were. */
static void spec_fails_at(per_net_server *s, const char *text, per_status want,
                          const char *msg, int line) {
  uint32_t n = s->ntables, k;
  bsnap before[8];
  per_net_table *ptr[8];
  per_status st;
  REQUIRE(n <= 8);
  for (k = 0; k < n; ++k) {
    ptr[k] = s->tables[k];
    before[k] = bsnap_take(&s->tables[k]->buf);
  }
  st = per_net_add_spec(s, text);
  CHECK_MSG(st == want, "line %d: status %d (\"%s\"), want %d", line, (int)st,
            s->error, (int)want);
  CHECK_MSG(strncmp(s->error, msg, strlen(msg)) == 0,
            "line %d: \"%s\", want \"%s...\"", line, s->error, msg);
  CHECK_MSG(s->ntables == n, "line %d: %u tables, want %u", line, s->ntables,
            n);
  for (k = 0; k < n && k < s->ntables; ++k) {
    CHECK_MSG(s->tables[k] == ptr[k] && bsnap_same(&before[k], &ptr[k]->buf),
              "line %d: table %u changed", line, k);
  }
  /* a text wrongly accepted: its tables dropped, so that the next cases
     see the server as it was */
  while (s->ntables > n) {
    per_net_table *t = s->tables[--s->ntables];
    per_buffer_free(&t->buf);
    PER_FREE(t, s->alloc_ctx);
  }
}
#define SPEC_FAILS(s, text, want, msg) \
  spec_fails_at((s), (text), (want), (msg), __LINE__)

static void test_spec_errors(void) {
  per_net_server s;
  t_heap heap;
  memset(&heap, 0, sizeof heap);
  REQUIRE(per_net_init(&s, PER_NET_MAX_MESSAGE, &heap) == PER_OK);
  REQUIRE(per_net_add_spec(&s, "table old\ncapacity 8\nitem_size 4\n") ==
          PER_OK);
  SPEC_FAILS(&s, "table a\ncapacity 8\nitem_size 4\ncapacty 9\n", PER_ERR_ARG,
             "per_net_add_spec: line 4: unknown key \"capacty\"");
  SPEC_FAILS(&s, "table a\ncapacity 8\nitem_size 4\ncapacity 9\n", PER_ERR_ARG,
             "per_net_add_spec: line 4: a second value of \"capacity\"");
  SPEC_FAILS(&s, "# first\ncapacity 8\ntable a\n", PER_ERR_ARG,
             "per_net_add_spec: line 2: a key before the first `table` line: "
             "\"capacity\"");
  SPEC_FAILS(&s, "table a\ncapacity 8x\nitem_size 4\n", PER_ERR_ARG,
             "per_net_add_spec: line 2: not a value of \"capacity\"");
  SPEC_FAILS(&s, "table a\ncapacity -8\nitem_size 4\n", PER_ERR_ARG,
             "per_net_add_spec: line 2: not a value of \"capacity\"");
  SPEC_FAILS(&s, "table a\ncapacity 4294967296\nitem_size 4\n", PER_ERR_ARG,
             "per_net_add_spec: line 2: not a value of \"capacity\"");
  SPEC_FAILS(&s,
             "table a\ncapacity 8\nitem_size 4\nseed 18446744073709551616\n",
             PER_ERR_ARG, "per_net_add_spec: line 4: not a value of \"seed\"");
  SPEC_FAILS(&s, "table a\ncapacity 8\nitem_size 4\nalpha abc\n", PER_ERR_ARG,
             "per_net_add_spec: line 4: not a value of \"alpha\"");
  SPEC_FAILS(&s, "table a\ncapacity 8\nitem_size 4\nalpha 0.5 0.6\n",
             PER_ERR_ARG, "per_net_add_spec: line 4: not a value of \"alpha\"");
  SPEC_FAILS(&s, "table a\ncapacity 8\nitem_size 4\nalpha\n", PER_ERR_ARG,
             "per_net_add_spec: line 4: not a value of \"alpha\"");
  SPEC_FAILS(&s, "table a\ncapacity 8\nitem_size 4\nflags max_live|bogus\n",
             PER_ERR_ARG, "per_net_add_spec: line 4: not a value of \"flags\"");
  SPEC_FAILS(&s, "table a\ncapacity 8\nitem_size 4\nflags |max_live\n",
             PER_ERR_ARG, "per_net_add_spec: line 4: not a value of \"flags\"");
  /* flags with no value, or names ending in `|`: neither a number nor names
     joined by `|` (per_net.h accepts both, as 0 and as max_live: these two
     checks fail until peri_net_parse_flags refuses them) */
  SPEC_FAILS(&s, "table a\ncapacity 8\nitem_size 4\nflags\n", PER_ERR_ARG,
             "per_net_add_spec: line 4: not a value of \"flags\"");
  SPEC_FAILS(&s, "table a\ncapacity 8\nitem_size 4\nflags max_live|\n",
             PER_ERR_ARG, "per_net_add_spec: line 4: not a value of \"flags\"");
  SPEC_FAILS(&s, "table a\ncapacity 8\nitem_size 4 # a comment\n", PER_ERR_ARG,
             "per_net_add_spec: line 3: not a value of \"item_size\"");
  SPEC_FAILS(&s, "table a\ncapacity 8\n\n", PER_ERR_ARG,
             "per_net_add_spec: line 1: table \"a\" has no item_size");
  SPEC_FAILS(&s, "table a\nitem_size 8\ntable b\ncapacity 8\nitem_size 1\n",
             PER_ERR_ARG,
             "per_net_add_spec: line 1: table \"a\" has no "
             "capacity");
  SPEC_FAILS(&s, "table\ncapacity 8\nitem_size 1\n", PER_ERR_ARG,
             "per_net_add_spec: line 1: a table's name is 1 to 63 bytes");
  /* a good table first, then a bad one: neither is added */
  SPEC_FAILS(&s,
             "table a\ncapacity 8\nitem_size 4\n\ntable b\ncapacity 8\n"
             "item_size 4\nalpha -1\n",
             PER_ERR_ARG,
             "per_net_add_spec: line 5: per_net_add_table: table \"b\": "
             "alpha is negative");
  SPEC_FAILS(&s,
             "table a\ncapacity 8\nitem_size 4\ntable a\ncapacity 9\n"
             "item_size 4\n",
             PER_ERR_ARG,
             "per_net_add_spec: line 4: per_net_add_table: a "
             "table named \"a\" exists");
  SPEC_FAILS(&s,
             "table a\ncapacity 8\nitem_size 4\ntable old\ncapacity 9\n"
             "item_size 4\n",
             PER_ERR_ARG,
             "per_net_add_spec: line 4: per_net_add_table: a "
             "table named \"old\" exists");
  SPEC_FAILS(&s, "table a\ncapacity 0\nitem_size 4\n", PER_ERR_CAPACITY,
             "per_net_add_spec: line 1: per_net_add_table: table \"a\": "
             "capacity 0 is not in 1 .. 2^31");
  SPEC_FAILS(&s, "table a\ncapacity 8\nitem_size 4\nseq_len 3\nseq_stride 3\n",
             PER_ERR_ARG, "per_net_add_spec: line 1: per_net_add_table: ");
  SPEC_FAILS(&s, "table a\ncapacity 8\nitem_size 4\nflags 64\n", PER_ERR_ARG,
             "per_net_add_spec: line 1: per_net_add_table: ");
  SPEC_FAILS(&s, NULL, PER_ERR_NULL, "per_net_add_spec: text is NULL");
  CHECK_STATUS(per_net_add_spec(NULL, "table a\n"), PER_ERR_NULL);
  CHECK_EQ_U(s.ntables, 1);
  /* every error left nothing allocated but the first table and the list */
  per_net_free(&s);
  CHECK_EQ_U(heap.live, 0);
}

/* ---- init, free, tables, NULL ------------------------------------------ */

static int zero_but_error(const per_net_server *s) {
  per_net_server z;
  memcpy(&z, s, sizeof z);
  memset(z.error, 0, sizeof z.error);
  {
    static const per_net_server zero;
    return memcmp(&z, &zero, sizeof z) == 0;
  }
}

static void test_init_free(void) {
  per_net_server s;
  per_config c = per_config_default(8, 4);
  const void *out = NULL;
  size_t len = 0;
  char name[80];
  memset(&s, 0x77, sizeof s);
  CHECK_STATUS(per_net_init(&s, PER_NET_MIN_MESSAGE - 1, NULL), PER_ERR_ARG);
  CHECK(zero_but_error(&s));
  CHECK_STR(s.error, "per_net_init: max_message 4095 is outside [4096, "
                     "SIZE_MAX / 2]");
  per_net_free(&s);
  memset(&s, 0x77, sizeof s);
  CHECK_STATUS(per_net_init(&s, 0, NULL), PER_ERR_ARG);
  CHECK(zero_but_error(&s));
  CHECK_STATUS(per_net_init(&s, UINT64_MAX, NULL), PER_ERR_ARG);
  CHECK(zero_but_error(&s));
  CHECK_STATUS(per_net_init(&s, (uint64_t)(SIZE_MAX / 2) + 1, NULL),
               PER_ERR_ARG);
  CHECK_STATUS(per_net_init(NULL, PER_NET_MAX_MESSAGE, NULL), PER_ERR_NULL);
  per_net_free(NULL);
  memset(&s, 0, sizeof s);
  per_net_free(&s);
  CHECK(zero_but_error(&s));
  CHECK_OK(per_net_init(&s, PER_NET_MIN_MESSAGE, NULL));
  CHECK_EQ_U(s.max_message, PER_NET_MIN_MESSAGE);
  CHECK(s.error[0] == 0 && s.ntables == 0 && s.out == NULL);
  /* handle with NULL arguments: nothing written, nothing counted */
  CHECK_STATUS(per_net_handle(NULL, "PERQ", 4, &out, &len), PER_ERR_NULL);
  CHECK_STATUS(per_net_handle(&s, "PERQ", 4, NULL, &len), PER_ERR_NULL);
  CHECK_STATUS(per_net_handle(&s, "PERQ", 4, &out, NULL), PER_ERR_NULL);
  CHECK(out == NULL && len == 0);
  CHECK_EQ_U(s.requests, 0);
  CHECK(s.out == NULL);
  /* a request to a server without tables */
  {
    msg m = {NULL, 0, 0};
    answer r;
    m_head(&m, PER_NET_INFO, 5, "x");
    send_at(&s, m.p, m.n, &r, __LINE__);
    CHECK_STATUS(r.st, PER_ERR_INDEX);
    CHECK_EQ_U(r.id, 5);
    free(m.p);
  }
  /* per_net_add_table's refusals, the server unchanged */
  CHECK_STATUS(per_net_add_table(NULL, "a", &c, ""), PER_ERR_NULL);
  CHECK_STATUS(per_net_add_table(&s, NULL, &c, ""), PER_ERR_NULL);
  CHECK_STR(s.error, "per_net_add_table: name or cfg is NULL");
  CHECK_STATUS(per_net_add_table(&s, "a", NULL, ""), PER_ERR_NULL);
  CHECK_STATUS(per_net_add_table(&s, "", &c, ""), PER_ERR_ARG);
  CHECK_STR(s.error, "per_net_add_table: a table's name is 1 to 63 bytes "
                     "without control characters, not one of 0 bytes");
  memset(name, 'n', sizeof name);
  name[64] = 0;
  CHECK_STATUS(per_net_add_table(&s, name, &c, ""), PER_ERR_ARG);
  name[63] = 0;
  CHECK_OK(per_net_add_table(&s, name, &c, NULL)); /* 63 bytes */
  CHECK(per_net_find(&s, name, 63) != NULL);
  CHECK_STATUS(per_net_add_table(&s, name, &c, ""), PER_ERR_ARG);
  CHECK_STR(s.error, "per_net_add_table: a table named \"");
  CHECK_STATUS(per_net_add_table(&s, "tab\there", &c, ""), PER_ERR_ARG);
  {
    char lay[PER_LAYOUT_MAX + 1];
    memset(lay, 'l', sizeof lay);
    lay[PER_LAYOUT_MAX] = 0;
    CHECK_STATUS(per_net_add_table(&s, "b", &c, lay), PER_ERR_ARG);
    CHECK_STR(s.error, "per_net_add_table: the layout has 512 chars");
    lay[PER_LAYOUT_MAX - 1] = 0;
    CHECK_OK(per_net_add_table(&s, "b", &c, lay)); /* 511: fits */
    CHECK(strcmp(per_net_find(&s, "b", 1)->buf.layout, lay) == 0);
  }
  c.capacity = 0;
  CHECK_STATUS(per_net_add_table(&s, "c", &c, ""), PER_ERR_CAPACITY);
  CHECK_STR(s.error, "per_net_add_table: table \"c\": capacity 0 is not in 1 "
                     ".. 2^31");
  CHECK_EQ_U(s.ntables, 2);
  per_net_free(&s);
  CHECK(zero_but_error(&s) && s.error[0] == 0);
  per_net_free(&s); /* twice */
}

/* ---- memory ------------------------------------------------------------- */

/* The requests the memory tests send, in order: each op, a batch that
   makes the reply grow, TD errors (scratch), sequences. */
static void memory_requests(fixture *x, uint32_t k, msg *m) {
  uint32_t j;
  switch (k) {
    case 0: m_head(m, PER_NET_INFO, 100, "plain"); break;
    case 1: hello_req(m, 101, "plain", 5, "uint8 x[5]"); break;
    case 2:
    case 3:
      m_head(m, PER_NET_INSERT, 100 + k, k == 2 ? "plain" : "seq");
      m_u32(m, 30);
      m_u32(m, PER_NET_TD | PER_NET_ENDS);
      for (j = 0; j < 30 * (k == 2 ? 5u : 3u); ++j) m_u8(m, j * 7);
      for (j = 0; j < 30; ++j) m_u8(m, j % 9 == 8);
      for (j = 0; j < 30; ++j) m_f32(m, (float)j * 0.5f);
      break;
    case 4:
      m_head(m, PER_NET_SAMPLE, 104, "plain");
      m_u32(m, 300); /* a reply of 8.9 KB: s->out grows */
      m_u32(m, 0);
      m_f64(m, 0);
      m_u32(m, 0);
      m_u32(m, 0);
      break;
    case 5:
      m_head(m, PER_NET_SAMPLE, 105, "seq");
      m_u32(m, 8);
      m_u32(m, PER_SAMPLE_SEQUENCES);
      m_f64(m, 0);
      m_u32(m, 0);
      m_u32(m, 0);
      break;
    case 6:
      m_head(m, PER_NET_UPDATE, 106, "plain");
      m_u32(m, 200); /* scratch grows */
      m_u32(m, 0);
      for (j = 0; j < 200; ++j)
        m_u64(m, x->tabs[0].t->buf.gen[j % 30]
                     ? (uint64_t)(j % 30) |
                           (uint64_t)x->tabs[0].t->buf.gen[j % 30] << 32
                     : 0);
      for (j = 0; j < 200; ++j) m_f32(m, (float)j);
      break;
    default:
      m_head(m, PER_NET_UPDATE, 107, "seq");
      m_u32(m, 1);
      m_u32(m, PER_NET_SEQUENCES);
      m_u64(m, 0 | PER_ID_SEQ | (uint64_t)x->tabs[1].t->buf.gen[0] << 32);
      for (j = 0; j < 4; ++j) m_f32(m, 2.0f);
      break;
  }
}
#define NMEMREQ 8

/* A server with tables "plain" and "seq" on the counting heap, whose
   allocation number fail_at fails (0: none), answering the memory
   requests: a request refused for memory (PER_ERR_NOMEM) changed nothing
   and is sent again, and must then succeed. *failed: some call failed. */
static void memory_run(fixture *x, t_heap *heap, long fail_at, int *failed) {
  uint32_t k;
  answer r;
  per_config p = cfg_plain(), q = cfg_seq();
  per_status st;
  fx_init(x, PER_NET_MAX_MESSAGE, heap);
  memset(heap, 0, sizeof *heap);
  heap->fail_at = fail_at;
  *failed = 0;
  st = per_net_add_table(&x->s, "plain", &p, "uint8 x[5]");
  if (st != PER_OK) {
    CHECK_STATUS(st, PER_ERR_NOMEM);
    CHECK_EQ_U(x->s.ntables, 0);
    *failed = 1;
    REQUIRE(per_net_add_table(&x->s, "plain", &p, "uint8 x[5]") == PER_OK);
  }
  st = per_net_add_table(&x->s, "seq", &q, "");
  if (st != PER_OK) {
    CHECK_STATUS(st, PER_ERR_NOMEM);
    CHECK_EQ_U(x->s.ntables, 1);
    *failed = 1;
    REQUIRE(per_net_add_table(&x->s, "seq", &q, "") == PER_OK);
  }
  x->ntabs = 2;
  x->tabs[0].t = x->s.tables[0];
  x->tabs[1].t = x->s.tables[1];
  x->tabs[0].name = "plain";
  x->tabs[1].name = "seq";
  for (k = 0; k < NMEMREQ; ++k) {
    bsnap b0 = bsnap_take(&x->tabs[0].t->buf),
          b1 = bsnap_take(&x->tabs[1].t->buf);
    memory_requests(x, k, &x->m);
    send_at(&x->s, x->m.p, x->m.n, &r, __LINE__);
    if (r.st == PER_ERR_NOMEM) {
      /* refused, nothing changed; the same request again succeeds */
      CHECK(bsnap_same(&b0, &x->tabs[0].t->buf));
      CHECK(bsnap_same(&b1, &x->tabs[1].t->buf));
      CHECK(strstr(r.msg, "out of memory") != NULL);
      *failed = 1;
      send_at(&x->s, x->m.p, x->m.n, &r, __LINE__);
    } else {
      (void)bsnap_same(&b0, &x->tabs[0].t->buf);
      (void)bsnap_same(&b1, &x->tabs[1].t->buf);
    }
    CHECK_MSG(r.st == PER_OK, "request %u with allocation %ld failing: %d %s",
              k, fail_at, (int)r.st, r.msg);
  }
}

static void test_memory(void) {
  fixture ref, x;
  t_heap heap_ref, heap;
  long fail_at, calls;
  int failed;
  uint32_t k;
  answer r;
  /* without failures; then each allocation in turn fails once */
  memory_run(&ref, &heap_ref, 0, &failed);
  CHECK(!failed);
  calls = heap_ref.calls;
  CHECK(calls > 10);
  for (fail_at = 1; fail_at <= calls; ++fail_at) {
    memory_run(&x, &heap, fail_at, &failed);
    CHECK_MSG(failed, "allocation %ld of %ld failed unseen", fail_at, calls);
    CHECK(same_buffers(&x.tabs[0].t->buf, &ref.tabs[0].t->buf));
    CHECK(same_buffers(&x.tabs[1].t->buf, &ref.tabs[1].t->buf));
    fx_free(&x);
    CHECK_MSG(heap.live == 0, "allocation %ld: %ld blocks leaked", fail_at,
              heap.live);
  }
  /* the same requests again allocate nothing: the reply and the scratch
     have grown */
  calls = heap_ref.calls;
  for (k = 0; k < NMEMREQ; ++k) {
    memory_requests(&ref, k, &ref.m);
    send_at(&ref.s, ref.m.p, ref.m.n, &r, __LINE__);
    CHECK_STATUS(r.st, PER_OK);
  }
  CHECK_EQ_U(heap_ref.calls, calls);
  /* every allocation failing: requests that need none still succeed;
     those that need one are refused (PER_ERR_NOMEM) */
  net_fail_all = 1;
  memory_requests(&ref, 0, &ref.m);
  send_at(&ref.s, ref.m.p, ref.m.n, &r, __LINE__);
  CHECK_STATUS(r.st, PER_OK);
  ref.m.n = 0;
  m_head(&ref.m, PER_NET_SAMPLE, 9, "plain");
  m_u32(&ref.m, 1000); /* 17 KB: more than the reply has */
  m_u32(&ref.m, 0);
  m_f64(&ref.m, 0);
  m_u32(&ref.m, 0);
  m_u32(&ref.m, 0);
  {
    bsnap b = bsnap_take(&ref.tabs[0].t->buf);
    send_at(&ref.s, ref.m.p, ref.m.n, &r, __LINE__);
    CHECK_STATUS(r.st, PER_ERR_NOMEM);
    CHECK_EQ_U(r.id, 9);
    CHECK(bsnap_same(&b, &ref.tabs[0].t->buf));
  }
  net_fail_all = 0;
  fx_free(&ref);
  CHECK_EQ_U(heap_ref.live, 0);

  /* every allocation failing on a server that never replied: s->out
     cannot be made, and each refusal comes back in s->fallback */
  memset(&heap, 0, sizeof heap);
  fx_init(&x, PER_NET_MAX_MESSAGE, &heap);
  {
    per_config p = cfg_plain();
    REQUIRE(per_net_add_table(&x.s, "plain", &p, "uint8 x[5]") == PER_OK);
  }
  net_fail_all = 1;
  x.ntabs = 1;
  x.tabs[0].t = x.s.tables[0];
  x.tabs[0].name = "plain";
  {
    bsnap b = bsnap_take(&x.s.tables[0]->buf);
    for (k = 0; k < NMEMREQ; ++k) {
      if (k == 3 || k == 5 || k == 7) continue; /* no table "seq" here */
      memory_requests(&x, k, &x.m);
      send_at(&x.s, x.m.p, x.m.n, &r, __LINE__);
      CHECK_STATUS(r.st, PER_ERR_NOMEM);
      CHECK(r.raw == (const void *)x.s.fallback);
      CHECK_STR(r.msg, k == 0   ? "info: out of memory"
                       : k == 1 ? "hello: out of memory"
                       : k == 2 ? "insert: out of memory"
                       : k == 4 ? "sample: out of memory"
                                : "update: out of memory");
      CHECK_EQ_U(r.id, 100 + k);
    }
    /* and the refusals of a request that cannot be read */
    send_at(&x.s, "PERQ", 4, &r, __LINE__);
    CHECK_STATUS(r.st, PER_ERR_FORMAT);
    CHECK(r.raw == (const void *)x.s.fallback);
    CHECK_STR(r.msg, "request: shorter than a header: 4 bytes");
    m_head(&x.m, PER_NET_INFO, 3, "nope");
    send_at(&x.s, x.m.p, x.m.n, &r, __LINE__);
    CHECK_STATUS(r.st, PER_ERR_INDEX);
    CHECK(r.raw == (const void *)x.s.fallback);
    CHECK(bsnap_same(&b, &x.s.tables[0]->buf));
    CHECK(x.s.out == NULL && x.s.scratch == NULL);
  }
  net_fail_all = 0;
  m_head(&x.m, PER_NET_INFO, 4, "plain");
  send_at(&x.s, x.m.p, x.m.n, &r, __LINE__);
  CHECK_STATUS(r.st, PER_OK);
  CHECK(r.raw == (const void *)x.s.out);
  fx_free(&x);
  CHECK_EQ_U(heap.live, 0);
}

/* ---- the rate limiter ------------------------------------------------------ */

/* An INSERT of n 8-byte items (value v each) or a SAMPLE of B on table
   "r"; the status per_net_handle returned. */
static per_status lim_insert(per_net_server *s, uint32_t n, uint64_t v,
                             answer *r) {
  msg m = {NULL, 0, 0};
  uint32_t k;
  m_head(&m, PER_NET_INSERT, 1000 + v, "r");
  m_u32(&m, n);
  m_u32(&m, 0);
  for (k = 0; k < n; ++k) m_u64(&m, v);
  SEND(s, &m, r);
  free(m.p);
  return r->st;
}

static per_status lim_sample(per_net_server *s, uint32_t B, answer *r) {
  msg m = {NULL, 0, 0};
  m_head(&m, PER_NET_SAMPLE, 2000 + B, "r");
  m_u32(&m, B);
  m_u32(&m, 0);
  m_f64(&m, 0);
  m_u32(&m, 0);
  m_u32(&m, 0);
  SEND(s, &m, r);
  free(m.p);
  return r->st;
}

/* A busy answer changed nothing but the counters. */
static void lim_busy_at(per_net_server *s, per_net_table *t, int sample,
                        uint32_t n, int line) {
  bsnap before = bsnap_take(&t->buf);
  uint64_t in = t->items_in, out = t->items_out, busy = t->busy;
  uint64_t refused = t->refused;
  answer r;
  per_status st = sample ? lim_sample(s, n, &r) : lim_insert(s, n, 7, &r);
  CHECK_MSG(st == PER_ERR_BUSY, "line %d: status %d, want PER_ERR_BUSY", line,
            (int)st);
  CHECK_MSG(strstr(r.msg, "busy") != NULL, "line %d: message \"%s\"", line,
            r.msg);
  CHECK_MSG(bsnap_same(&before, &t->buf) && t->items_in == in &&
                t->items_out == out && t->busy == busy + 1 &&
                t->refused == refused + 1,
            "line %d: a busy answer changed the table or miscounted", line);
}
#define LIM_BUSY(s, t, sample, n) lim_busy_at((s), (t), (sample), (n), __LINE__)

static void test_limiter(void) {
  per_net_server s;
  per_net_table *t;
  answer r;
  const char *path =
      IS_FLOAT ? "net_float_limiter.bin" : "net_double_limiter.bin";
  REQUIRE(per_net_init(&s, PER_NET_MAX_MESSAGE, NULL) == PER_OK);
  /* min_size 10, 2 samples an insert, margin 8: d = 2 I - S must stay in
     [20 - 8, 20 + 8] as the requests are checked (before each) */
  CHECK_OK(per_net_add_spec(&s, "table r\ncapacity 100\nitem_size 8\n"
                                "min_size 10\nsamples_per_insert 2\n"
                                "error_margin 8\nseed 3\n"));
  t = per_net_find(&s, "r", 1);
  REQUIRE(t != NULL);
  CHECK_EQ_U(t->min_size, 10);
  CHECK_EQ_F(t->samples_per_insert, 2.0);
  CHECK_EQ_F(t->error_margin, 8.0);
  LIM_BUSY(&s, t, 1, 1);               /* empty: below min_size */
  CHECK_OK(lim_insert(&s, 9, 1, &r));  /* d 0 -> 18 */
  LIM_BUSY(&s, t, 1, 1);               /* 9 items < min_size */
  CHECK_OK(lim_insert(&s, 1, 2, &r));  /* d 18 -> 20 */
  CHECK_OK(lim_insert(&s, 10, 3, &r)); /* d 20 <= 28 -> 40 */
  CHECK_EQ_U(t->items_in, 20);
  LIM_BUSY(&s, t, 0, 1);            /* d 40 > 28: inserting is ahead */
  CHECK_OK(lim_sample(&s, 16, &r)); /* d 40 >= 12 -> 24 */
  CHECK_OK(lim_sample(&s, 16, &r)); /* d 24 >= 12 -> 8 */
  CHECK_EQ_U(t->items_out, 32);
  LIM_BUSY(&s, t, 1, 1);               /* d 8 < 12: sampling is ahead */
  CHECK_OK(lim_insert(&s, 1, 4, &r));  /* d 8 <= 28 -> 10 */
  LIM_BUSY(&s, t, 1, 64);              /* still 10 < 12, any B */
  CHECK_OK(lim_insert(&s, 50, 5, &r)); /* a large insert: d 10 -> 110 */
  CHECK_OK(lim_sample(&s, 90, &r));    /* a large sample: d 110 -> 20 */
  CHECK_EQ_U(t->busy, 5);
  /* INFO says it all */
  {
    msg m = {NULL, 0, 0};
    m_head(&m, PER_NET_INFO, 5, "r");
    SEND(&s, &m, &r);
    free(m.p);
    REQUIRE(r.st == PER_OK && r.body_len == 128);
    CHECK_EQ_U(le(r.body + 80, 8), 71);                     /* items inserted */
    CHECK_EQ_U(le(r.body + 88, 8), 122);                    /* items sampled */
    CHECK_EQ_U(le(r.body + 96, 8), 5);                      /* busy */
    CHECK_EQ_U(le(r.body + 104, 8), 10);                    /* min_size */
    CHECK_EQ_U(le(r.body + 112, 8), 0x4000000000000000ull); /* 2.0 */
    CHECK_EQ_U(le(r.body + 120, 8), 0x4020000000000000ull); /* 8.0 */
  }
  /* per_net_set_limiter: its refusals change nothing */
  CHECK(per_net_set_limiter(&s, t, 101, 1, 0) == PER_ERR_ARG);
  CHECK(strstr(s.error, "min_size") != NULL);
  CHECK(per_net_set_limiter(&s, t, 5, -1, 0) == PER_ERR_ARG);
  CHECK(strstr(s.error, "samples_per_insert") != NULL);
  CHECK(per_net_set_limiter(&s, t, 5, 1, 0.0 / 0.0) == PER_ERR_ARG);
  CHECK(strstr(s.error, "error_margin") != NULL);
  CHECK(per_net_set_limiter(&s, NULL, 5, 1, 0) == PER_ERR_NULL);
  CHECK(per_net_set_limiter(NULL, t, 5, 1, 0) == PER_ERR_NULL);
  CHECK(t->min_size == 10 && t->samples_per_insert == 2.0 &&
        t->error_margin == 8.0);
  /* no ratio: samples never wait for inserts, inserts never for samples */
  CHECK_OK(per_net_set_limiter(&s, t, 0, 0, 0));
  CHECK(s.error[0] == 0);
  CHECK_EQ_U(t->items_in, 71); /* the counts stay */
  CHECK_OK(lim_sample(&s, 100, &r));
  CHECK_OK(lim_sample(&s, 100, &r));
  CHECK_OK(lim_insert(&s, 100, 6, &r));
  /* a load counts the items loaded as inserted, d in the middle */
  CHECK_OK(per_net_set_limiter(&s, t, 10, 2, 8));
  CHECK_OK(per_buffer_save(&t->buf, path));
  CHECK_OK(lim_sample(&s, 1, &r)); /* the table moves on from the file */
  CHECK_OK(per_net_load(&s, t, path));
  CHECK_EQ_U(t->items_in, 100);
  CHECK_EQ_U(t->items_out, 180); /* 2 * (100 - 10): d = 20 */
  CHECK_EQ_U(t->buf.step, 5);    /* the file's, not the sample's after it */
  CHECK(per_net_load(&s, t, "/nonexistent/per_net") == PER_ERR_IO);
  CHECK(strncmp(s.error, "per_net_load: table \"r\": ", 25) == 0);
  CHECK_EQ_U(t->items_in, 100);
  CHECK(per_net_load(&s, NULL, path) == PER_ERR_NULL);
  remove(path);
  /* spec values are checked */
  {
    uint32_t n = s.ntables;
    CHECK(per_net_add_spec(&s, "table x\ncapacity 4\nitem_size 8\n"
                               "min_size 5\n") == PER_ERR_ARG);
    CHECK(strstr(s.error, "line 1") != NULL && strstr(s.error, "min_size"));
    CHECK(per_net_add_spec(&s, "table x\ncapacity 4\nitem_size 8\n"
                               "samples_per_insert x\n") == PER_ERR_ARG);
    CHECK(strstr(s.error, "line 4") != NULL);
    CHECK(per_net_add_spec(&s, "table x\ncapacity 4\nitem_size 8\n"
                               "error_margin -1\n") == PER_ERR_ARG);
    CHECK_EQ_U(s.ntables, n);
  }
  per_net_free(&s);
}

/* ---- once-only requests and checkpoints of the whole server ----------- */

#define ONCE_KEEP 8192u /* requests kept to be sent again */
#define ONCE_POOL 16u

/* What a once-only request applied answered, as the test remembers it. */
typedef struct once_seen {
  uint64_t id;
  uint32_t op;
  unsigned char body[16];
  size_t body_len;
} once_seen;

typedef struct once_run {
  per_net_server a, b; /* a under test; b the reference: every request
                          a must apply, sent with the once bit cleared */
  msg kept[ONCE_KEEP];
  uint64_t nkept;
  once_seen seen[PER_NET_RECALL]; /* the last PER_NET_RECALL applied */
  uint64_t nseen;
  uint64_t pool[ONCE_POOL]; /* item ids drawn, for updates */
  uint32_t npool;
  uint64_t repeats, mismatches, forgotten, applied_once, rng;
  char dir[64];
} once_run;

static uint64_t once_rnd(once_run *o) { return splitmix64(&o->rng); }

static const once_seen *once_find(const once_run *o, uint64_t id) {
  uint64_t k, n = o->nseen < PER_NET_RECALL ? o->nseen : PER_NET_RECALL;
  for (k = 0; k < n; ++k)
    if (o->seen[k].id == id) return &o->seen[k];
  return NULL;
}

static void once_server(per_net_server *s) {
  per_config c = cfg_plain();
  REQUIRE(per_net_init(s, PER_NET_MAX_MESSAGE, NULL) == PER_OK);
  REQUIRE(per_net_add_table(s, "t", &c, "u1,f4") == PER_OK);
}

/* a's table against b's: buffer bytes, counters (a refused the op
   mismatches b never saw), repeats. */
static void once_check_at(once_run *o, int line) {
  const per_net_table *ta = o->a.tables[0], *tb = o->b.tables[0];
  CHECK_MSG(same_buffers(&ta->buf, &tb->buf), "line %d: the tables differ",
            line);
  CHECK_MSG(ta->inserts == tb->inserts && ta->samples == tb->samples &&
                ta->updates == tb->updates &&
                ta->refused == tb->refused + o->mismatches &&
                ta->items_in == tb->items_in && ta->items_out == tb->items_out,
            "line %d: counters %llu %llu %llu %llu, reference %llu %llu %llu "
            "%llu",
            line, (unsigned long long)ta->inserts,
            (unsigned long long)ta->samples, (unsigned long long)ta->updates,
            (unsigned long long)ta->refused, (unsigned long long)tb->inserts,
            (unsigned long long)tb->samples, (unsigned long long)tb->updates,
            (unsigned long long)tb->refused);
  CHECK_MSG(ta->repeats == o->repeats, "line %d: %llu repeats, want %llu", line,
            (unsigned long long)ta->repeats, (unsigned long long)o->repeats);
}

/* Send m (kept to be sent again) to a, and to b when a must apply it. */
static void once_send(once_run *o, const msg *m) {
  uint64_t id = le(m->p + 8, 8);
  uint32_t op = (uint32_t)le(m->p + 6, 2);
  const once_seen *e = NULL;
  int once =
      (id & PER_NET_ONCE) && (op == PER_NET_INSERT || op == PER_NET_UPDATE);
  answer ra, rb;
  if (once) e = once_find(o, id);
  SEND(&o->a, m, &ra);
  if (e && e->op == op) { /* a repeat: the first reply, nothing applied */
    o->repeats++;
    CHECK_EQ_U(ra.st, PER_OK);
    CHECK_EQ_U(ra.body_len, e->body_len);
    if (ra.body_len == e->body_len) CHECK_MEM(ra.body, e->body, e->body_len);
  } else if (e) { /* that id came with the other op */
    o->mismatches++;
    CHECK_EQ_U(ra.st, PER_ERR_ARG);
    CHECK_MSG(strstr(ra.msg, "once-only request id") != NULL, "\"%s\"", ra.msg);
  } else {
    msg c = {NULL, 0, 0};
    m_bytes(&c, m->p, m->n);
    c.p[15] &= 0x7Fu; /* the once bit off: b applies it as a's first */
    SEND(&o->b, &c, &rb);
    free(c.p);
    CHECK_EQ_U(ra.st, rb.st);
    CHECK_EQ_U(ra.raw_len, rb.raw_len);
    if (ra.raw_len == rb.raw_len) {
      CHECK_MEM(ra.raw, rb.raw, 8);
      CHECK_MEM((const unsigned char *)ra.raw + 16,
                (const unsigned char *)rb.raw + 16, ra.raw_len - 16);
    }
    if (ra.st == PER_OK && once) {
      once_seen *s = &o->seen[o->nseen++ % PER_NET_RECALL];
      s->id = id;
      s->op = op;
      s->body_len = ra.body_len;
      memcpy(s->body, ra.body, ra.body_len);
      o->applied_once++;
    }
    if (ra.st == PER_OK && op == PER_NET_SAMPLE) {
      uint32_t B = (uint32_t)le(ra.body, 4), j;
      for (j = 0; j < B; ++j) {
        if (o->npool == ONCE_POOL) o->npool = 0;
        o->pool[o->npool++] = le(ra.body + 16 + 8u * j, 8);
      }
    }
  }
}

/* A new request of a random kind in *m. */
static void once_new(once_run *o, msg *m, uint32_t kind) {
  uint64_t id = once_rnd(o);
  uint32_t n = 1u + (uint32_t)(once_rnd(o) % 4u), j;
  if (once_rnd(o) % 5u) id |= PER_NET_ONCE;
  else id &= ~PER_NET_ONCE;
  m->n = 0;
  if (kind < 45) {
    uint32_t flags = (uint32_t)(once_rnd(o) % 4u);
    m_head(m, PER_NET_INSERT, id, "t");
    m_u32(m, n);
    m_u32(m, flags);
    for (j = 0; j < n * 5u; ++j) m_u8(m, once_rnd(o) & 0xFFu);
    if (flags & PER_NET_ENDS) /* 3 is no end: refused, 1 time in 40 */
      for (j = 0; j < n; ++j) m_u8(m, once_rnd(o) % 40u == 0 ? 3 : 0);
    if (flags & PER_NET_TD)
      for (j = 0; j < n; ++j) m_f32(m, (float)(once_rnd(o) % 100u) / 7.0f);
  } else if (kind < 60 && o->npool) {
    m_head(m, PER_NET_UPDATE, id, "t");
    m_u32(m, n);
    m_u32(m, 0);
    for (j = 0; j < n; ++j) m_u64(m, o->pool[once_rnd(o) % o->npool]);
    for (j = 0; j < n; ++j) /* NaN, refused, 1 time in 50 */
      m_f32(m, once_rnd(o) % 50u == 0 ? (float)NAN
                                      : (float)(once_rnd(o) % 64u) / 9.0f);
  } else {
    m_head(m, PER_NET_SAMPLE, id, "t");
    m_u32(m, n);
    m_u32(m, 0);
    m_f64(m, 0.0);
    m_u32(m, 0);
    m_u32(m, 0);
  }
}

/* Save a, restore into a new server, and go on with that one. */
static void once_restart(once_run *o) {
  per_net_server a2;
  uint64_t gen = o->a.generation;
  char old[128];
  CHECK_EQ_U(per_net_save(&o->a, o->dir), PER_OK);
  CHECK_EQ_U(o->a.generation, gen + 1u);
  snprintf(old, sizeof old, "%s/table-0.%llu.per", o->dir,
           (unsigned long long)gen);
  CHECK_MSG(gen == 0 || access(old, F_OK) != 0, "%s is left", old);
  once_server(&a2);
  CHECK_EQ_U(per_net_restore(&a2, o->dir), PER_OK);
  CHECK_EQ_U(a2.generation, gen + 1u);
  CHECK_EQ_U(a2.tables[0]->repeats, o->a.tables[0]->repeats);
  CHECK_EQ_U(a2.tables[0]->busy, o->a.tables[0]->busy);
  CHECK_EQ_U(a2.tables[0]->seen_count,
             o->nseen < PER_NET_RECALL ? o->nseen : PER_NET_RECALL);
  per_net_free(&o->a);
  o->a = a2;
}

/* 14,000 requests on a table, a quarter of them sent again from the last
   8192 kept (mostly recent, some long gone from memory), some with the
   other op's body: every INSERT and UPDATE with a once-only id applied
   at most once while remembered, its repeats answered with the first
   reply, SAMPLEs and plain ids applied every time; the table byte for
   byte against a reference server, through five checkpoint restarts. */
static void test_once(void) {
  once_run *o = (once_run *)calloc(1, sizeof *o);
  uint32_t step, k;
  msg m = {NULL, 0, 0};
  REQUIRE(o != NULL);
  o->rng = 99;
  snprintf(o->dir, sizeof o->dir, "net_once_%s_XXXXXX",
           IS_FLOAT ? "float" : "double");
  REQUIRE(mkdtemp(o->dir) != NULL);
  once_server(&o->a);
  once_server(&o->b);
  for (step = 0; step < 14000; ++step) {
    uint32_t kind = (uint32_t)(once_rnd(o) % 100u);
    if (kind < 75 || o->nkept == 0) {
      msg *kept = &o->kept[o->nkept++ % ONCE_KEEP];
      once_new(o, kept, kind % 75u);
      once_send(o, kept);
    } else {
      /* back 1 .. 16, .. 512 or .. 8192 requests */
      static const uint32_t span[3] = {16, 512, ONCE_KEEP};
      uint64_t most = o->nkept < ONCE_KEEP ? o->nkept : ONCE_KEEP;
      uint64_t back = 1u + once_rnd(o) % span[once_rnd(o) % 3u];
      const msg *old =
          &o->kept[(o->nkept - (back < most ? back : most)) % ONCE_KEEP];
      uint32_t op = (uint32_t)le(old->p + 6, 2);
      if (kind >= 97 && (op == PER_NET_INSERT || op == PER_NET_UPDATE)) {
        /* its id on a new request of the other op */
        once_new(o, &m, op == PER_NET_INSERT ? 50u : 10u);
        if ((uint32_t)le(m.p + 6, 2) != op) memcpy(m.p + 8, old->p + 8, 8);
        once_send(o, &m);
      } else {
        if ((le(old->p + 8, 8) & PER_NET_ONCE) &&
            (op == PER_NET_INSERT || op == PER_NET_UPDATE) &&
            !once_find(o, le(old->p + 8, 8)))
          o->forgotten++;
        once_send(o, old);
      }
    }
    if (step % 97 == 0) once_check_at(o, __LINE__);
    if (step % 2800 == 2799) once_restart(o);
  }
  once_check_at(o, __LINE__);
  printf("once: %llu once-only applied, %llu repeats answered, %llu sent "
         "again after they were forgotten or refused, %llu of the other op\n",
         (unsigned long long)o->applied_once, (unsigned long long)o->repeats,
         (unsigned long long)o->forgotten, (unsigned long long)o->mismatches);
  CHECK(o->repeats > 1000 && o->forgotten > 50 && o->mismatches > 100 &&
        o->applied_once > PER_NET_RECALL);
  per_net_free(&o->a);
  per_net_free(&o->b);
  for (k = 0; k < ONCE_KEEP; ++k) free(o->kept[k].p);
  free(m.p);
  {
    char f[128];
    snprintf(f, sizeof f, "%s/%s", o->dir, PER_NET_STATE_FILE);
    CHECK(remove(f) == 0);
    snprintf(f, sizeof f, "%s/table-0.5.per", o->dir);
    CHECK(remove(f) == 0);
    CHECK(rmdir(o->dir) == 0);
  }
  free(o);
}

/* Write len bytes to path (a test's damage to a checkpoint file). */
static void put_file(const char *path, const void *p, size_t len) {
  FILE *f = fopen(path, "wb");
  REQUIRE(f != NULL);
  REQUIRE(fwrite(p, 1, len, f) == len);
  REQUIRE(fclose(f) == 0);
}

static unsigned char *get_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  unsigned char *p = (unsigned char *)malloc(1 << 16);
  REQUIRE(f != NULL && p != NULL);
  *len = fread(p, 1, 1 << 16, f);
  REQUIRE(*len > 0 && *len < (1 << 16));
  fclose(f);
  return p;
}

/* restore into s refused with want, and s's table as it was */
static void restore_fails_at(per_net_server *s, const char *dir,
                             per_status want, const char *words, int line) {
  size_t n0, n1;
  unsigned char *before = snap(&s->tables[0]->buf, &n0), *after;
  uint64_t inserts = s->tables[0]->inserts;
  per_status st = per_net_restore(s, dir);
  after = snap(&s->tables[0]->buf, &n1);
  CHECK_MSG(st == want, "line %d: restore %d (%s), want %d", line, (int)st,
            s->error, (int)want);
  CHECK_MSG(strstr(s->error, words) != NULL, "line %d: \"%s\" lacks \"%s\"",
            line, s->error, words);
  CHECK_MSG(n0 == n1 && memcmp(before, after, n0) == 0 &&
                s->tables[0]->inserts == inserts,
            "line %d: the table changed", line);
  free(before);
  free(after);
}
#define RESTORE_FAILS(s, dir, want, words) \
  restore_fails_at((s), (dir), (want), (words), __LINE__)

/* Every refusal of per_net_save and per_net_restore, each leaving the
   server as it was; a crash's leftovers ignored. */
static void test_checkpoint_errors(void) {
  per_net_server s, t;
  per_config c = cfg_plain(), c41 = cfg_plain();
  char dir[64], state[128], file[128];
  unsigned char item[5] = {1, 2, 3, 4, 5}, *p;
  size_t len;
  msg m = {NULL, 0, 0};
  answer r;
  snprintf(dir, sizeof dir, "net_ckpt_%s_XXXXXX",
           IS_FLOAT ? "float" : "double");
  REQUIRE(mkdtemp(dir) != NULL);
  snprintf(state, sizeof state, "%s/%s", dir, PER_NET_STATE_FILE);
  once_server(&s);
  once_server(&t);
  CHECK_EQ_U(per_net_save(NULL, dir), PER_ERR_NULL);
  CHECK_EQ_U(per_net_save(&s, NULL), PER_ERR_NULL);
  CHECK_EQ_U(per_net_restore(NULL, dir), PER_ERR_NULL);
  CHECK_EQ_U(per_net_restore(&s, NULL), PER_ERR_NULL);
  RESTORE_FAILS(&t, dir, PER_ERR_IO, "server.state: cannot be opened");
  CHECK_EQ_U(per_net_save(&s, "net_no_such_dir/x"), PER_ERR_IO);
  CHECK(strstr(s.error, "net_no_such_dir/x/table-0.1.per") != NULL);
  CHECK_EQ_U(s.generation, 0);

  /* one insert with a once-only id, saved */
  m_head(&m, PER_NET_INSERT, PER_NET_ONCE | 7u, "t");
  m_u32(&m, 1);
  m_u32(&m, 0);
  m_bytes(&m, item, 5);
  SEND(&s, &m, &r);
  CHECK_EQ_U(r.st, PER_OK);
  CHECK_EQ_U(per_net_save(&s, dir), PER_OK);
  CHECK_EQ_U(s.generation, 1);

  /* other tables, another capacity */
  {
    per_net_server u;
    REQUIRE(per_net_init(&u, PER_NET_MAX_MESSAGE, NULL) == PER_OK);
    REQUIRE(per_net_add_table(&u, "other", &c, "") == PER_OK);
    RESTORE_FAILS(&u, dir, PER_ERR_MISMATCH, "table \"t\" is not the server's");
    REQUIRE(per_net_add_table(&u, "t", &c, "") == PER_OK);
    RESTORE_FAILS(&u, dir, PER_ERR_MISMATCH, "has 1 tables, the server 2");
    per_net_free(&u);
    REQUIRE(per_net_init(&u, PER_NET_MAX_MESSAGE, NULL) == PER_OK);
    c41.capacity = 41;
    REQUIRE(per_net_add_table(&u, "t", &c41, "") == PER_OK);
    RESTORE_FAILS(&u, dir, PER_ERR_MISMATCH, "capacity 40, item size 5; table");
    per_net_free(&u);
  }

  /* the state file damaged: each refused, t unchanged */
  p = get_file(state, &len);
  put_file(state, "PERNETSX", 8);
  RESTORE_FAILS(&t, dir, PER_ERR_FORMAT, "not a per_net_save state file");
  put_file(state, p, 20);
  RESTORE_FAILS(&t, dir, PER_ERR_TRUNCATED, per_status_str(PER_ERR_TRUNCATED));
  put_file(state, p, len - 1);
  RESTORE_FAILS(&t, dir, PER_ERR_TRUNCATED, per_status_str(PER_ERR_TRUNCATED));
  p[len / 2] ^= 0x10u;
  put_file(state, p, len);
  RESTORE_FAILS(&t, dir, PER_ERR_CHECKSUM, per_status_str(PER_ERR_CHECKSUM));
  p[len / 2] ^= 0x10u;
  p[8] = 2;
  put_file(state, p, len);
  RESTORE_FAILS(&t, dir, PER_ERR_VERSION, per_status_str(PER_ERR_VERSION));
  p[8] = 1;
  { /* a record out of range, with its CRC right: a name of length 0 */
    uint32_t crc;
    p[PERI_NET_STATE_HEAD] = 0;
    crc = per_crc32c(0, p, len - 4);
    p[len - 4] = (unsigned char)crc;
    p[len - 3] = (unsigned char)(crc >> 8);
    p[len - 2] = (unsigned char)(crc >> 16);
    p[len - 1] = (unsigned char)(crc >> 24);
    put_file(state, p, len);
    RESTORE_FAILS(&t, dir, PER_ERR_CORRUPT, per_status_str(PER_ERR_CORRUPT));
  }
  CHECK_EQ_U(per_net_save(&s, dir), PER_OK); /* overwrites the bad one */
  CHECK_EQ_U(s.generation, 2);
  free(p);

  /* a missing table file; then a crash's leftover (the next generation's
     table file, never named by a state file) */
  snprintf(file, sizeof file, "%s/table-0.2.per", dir);
  p = get_file(file, &len);
  REQUIRE(remove(file) == 0);
  RESTORE_FAILS(&t, dir, PER_ERR_IO, "table-0.2.per");
  put_file(file, p, len);
  free(p);
  snprintf(file, sizeof file, "%s/table-0.3.per", dir);
  put_file(file, "junk", 4);
  CHECK_EQ_U(per_net_restore(&t, dir), PER_OK);
  CHECK_EQ_U(t.generation, 2);
  CHECK(same_buffers(&t.tables[0]->buf, &s.tables[0]->buf));
  /* the repeat is remembered after the restore, the generation goes on */
  SEND(&t, &m, &r);
  CHECK_EQ_U(r.st, PER_OK);
  CHECK_EQ_U(t.tables[0]->repeats, 1);
  CHECK(same_buffers(&t.tables[0]->buf, &s.tables[0]->buf));
  CHECK_EQ_U(per_net_save(&t, dir), PER_OK);
  CHECK_EQ_U(t.generation, 3);
  CHECK_EQ_U(per_net_restore(&s, dir), PER_OK);
  CHECK_EQ_U(s.tables[0]->repeats, 1);
  snprintf(file, sizeof file, "%s/table-0.2.per", dir);
  CHECK(access(file, F_OK) != 0);
  { /* each allocation of a restore, then of a save, failing in turn: a
       refusal leaves the table, and the directory's checkpoint, whole */
    t_heap h;
    long f;
    int done;
    per_net_server u;
    per_status st;
    for (done = 0, f = 1; !done; ++f) {
      memset(&h, 0, sizeof h);
      REQUIRE(per_net_init(&u, PER_NET_MAX_MESSAGE, &h) == PER_OK);
      REQUIRE(per_net_add_table(&u, "t", &c, "u1,f4") == PER_OK);
      h.fail_at = h.calls + f;
      p = snap(&u.tables[0]->buf, &len);
      st = per_net_restore(&u, dir);
      if (st == PER_OK) {
        CHECK(same_buffers(&u.tables[0]->buf, &s.tables[0]->buf));
        done = 1;
      } else {
        size_t len1;
        unsigned char *p1 = snap(&u.tables[0]->buf, &len1);
        CHECK_MSG(st == PER_ERR_NOMEM && (strstr(u.error, "out of memory") ||
                                          strstr(u.error, "memory")),
                  "restore: %d %s", (int)st, u.error);
        CHECK(len1 == len && memcmp(p, p1, len) == 0);
        CHECK_EQ_U(u.generation, 0);
        free(p1);
      }
      free(p);
      per_net_free(&u);
    }
    CHECK(f > 3);
    for (done = 0, f = 1; !done; ++f) {
      memset(&h, 0, sizeof h);
      REQUIRE(per_net_init(&u, PER_NET_MAX_MESSAGE, &h) == PER_OK);
      REQUIRE(per_net_add_table(&u, "t", &c, "u1,f4") == PER_OK);
      REQUIRE(per_net_restore(&u, dir) == PER_OK);
      SEND(&u, &m, &r); /* a repeat */
      h.fail_at = h.calls + f;
      st = per_net_save(&u, dir);
      CHECK_MSG(st == PER_OK || st == PER_ERR_NOMEM, "save: %d %s", (int)st,
                u.error);
      done = st == PER_OK;
      per_net_free(&u);
      REQUIRE(per_net_init(&u, PER_NET_MAX_MESSAGE, NULL) == PER_OK);
      REQUIRE(per_net_add_table(&u, "t", &c, "u1,f4") == PER_OK);
      CHECK_EQ_U(per_net_restore(&u, dir), PER_OK);
      CHECK_EQ_U(u.generation, done ? 4u : 3u);
      CHECK_EQ_U(u.tables[0]->repeats, done ? 2u : 1u);
      per_net_free(&u);
    }
    CHECK(f > 3);
  }
  snprintf(file, sizeof file, "%s/table-0.3.per", dir);
  CHECK(access(file, F_OK) != 0);
  snprintf(file, sizeof file, "%s/table-0.4.per", dir);
  CHECK(remove(file) == 0);
  CHECK(remove(state) == 0);
  CHECK(rmdir(dir) == 0);
  free(m.p);
  per_net_free(&s);
  per_net_free(&t);
}

/* per_net_take_reply: the reply's block is the caller's, its bytes kept
   across later requests and freed by per_net_reply_free with the server's
   allocator; s makes a new block for its next reply; a reply not at the
   start of s->out (another pointer, the fallback refusal, a block taken
   already) is not given. */
static void test_take_reply(void) {
  fixture x;
  t_heap heap;
  answer r;
  per_config p = cfg_plain();
  unsigned char items[6 * 5], *kept;
  void *blocks[3];
  size_t len;
  long live;
  memset(&heap, 0, sizeof heap);
  fx_init(&x, PER_NET_MAX_MESSAGE, &heap);
  REQUIRE(per_net_add_table(&x.s, "plain", &p, "uint8 x[5]") == PER_OK);
  CHECK(per_net_take_reply(&x.s, x.s.fallback) == NULL); /* no reply yet */
  m_head(&x.m, PER_NET_INSERT, 1, "plain");
  m_u32(&x.m, 6);
  m_u32(&x.m, 0);
  for (len = 0; len < sizeof items; ++len) items[len] = (unsigned char)len;
  m_bytes(&x.m, items, sizeof items);
  send_at(&x.s, x.m.p, x.m.n, &r, __LINE__);
  CHECK_STATUS(r.st, PER_OK);
  m_head(&x.m, PER_NET_SAMPLE, 2, "plain");
  m_u32(&x.m, 4);
  m_u32(&x.m, 0);
  m_f64(&x.m, 0);
  m_u32(&x.m, 0);
  m_u32(&x.m, 0);
  send_at(&x.s, x.m.p, x.m.n, &r, __LINE__);
  CHECK_STATUS(r.st, PER_OK);
  len = r.raw_len;
  kept = (unsigned char *)malloc(len);
  REQUIRE(kept != NULL);
  memcpy(kept, r.raw, len);
  CHECK(per_net_take_reply(NULL, r.raw) == NULL);
  CHECK(per_net_take_reply(&x.s, (const unsigned char *)r.raw + 1) == NULL);
  live = heap.live;
  blocks[0] = per_net_take_reply(&x.s, r.raw);
  CHECK(blocks[0] == r.raw);
  CHECK(x.s.out == NULL && x.s.out_cap == 0);
  CHECK(per_net_take_reply(&x.s, r.raw) == NULL); /* given already */
  CHECK_EQ_U(heap.live, live); /* the caller's now, not freed */
  /* the next replies: a new block each time one is taken */
  m_head(&x.m, PER_NET_INFO, 3, "plain");
  send_at(&x.s, x.m.p, x.m.n, &r, __LINE__);
  CHECK_STATUS(r.st, PER_OK);
  CHECK(r.raw != blocks[0] && x.s.out != NULL);
  CHECK_EQ_U(heap.live, live + 1);
  blocks[1] = per_net_take_reply(&x.s, r.raw);
  CHECK(blocks[1] == r.raw);
  send_at(&x.s, x.m.p, x.m.n, &r, __LINE__); /* INFO again */
  CHECK_STATUS(r.st, PER_OK);
  blocks[2] = per_net_take_reply(&x.s, r.raw);
  CHECK(blocks[2] != NULL && blocks[2] != blocks[1]);
  CHECK(memcmp(blocks[0], kept, len) == 0); /* untouched by later replies */
  CHECK_EQ_U(heap.live, live + 2);
  /* a refusal s has no memory for is in s->fallback: not given */
  net_fail_all = 1;
  send_at(&x.s, x.m.p, x.m.n, &r, __LINE__);
  net_fail_all = 0;
  CHECK_STATUS(r.st, PER_ERR_NOMEM);
  CHECK(r.raw == (const void *)x.s.fallback);
  CHECK(per_net_take_reply(&x.s, r.raw) == NULL);
  per_net_reply_free(blocks[0], x.s.alloc_ctx);
  per_net_reply_free(blocks[1], x.s.alloc_ctx);
  per_net_reply_free(blocks[2], x.s.alloc_ctx);
  per_net_reply_free(NULL, x.s.alloc_ctx);
  CHECK_EQ_U(heap.live, live - 1);
  /* and s goes on: its next reply in a block it frees itself */
  send_at(&x.s, x.m.p, x.m.n, &r, __LINE__);
  CHECK_STATUS(r.st, PER_OK);
  free(kept);
  fx_free(&x);
  CHECK_EQ_U(heap.live, 0);
}

int main(void) {
  test_init_free();
  test_spec();
  test_spec_errors();
  test_script();
  test_truncated();
  test_refusals();
  test_largest_batch();
  test_memory();
  test_limiter();
  test_once();
  test_checkpoint_errors();
  test_take_reply();
  return t_done(IS_FLOAT ? "net (float)" : "net (double)");
}
