/* per_net.h - replay over the network, a companion of per.h: named tables
   of per_buffer answering the requests of docs/PROTOCOL.md, one message
   in, one message out, with no transport of its own (per-server carries
   them over ZeroMQ; so does Python's per.net.Server).
   (no warranty; LICENSE: see the end of per.h)

   Do this, in *one* C or C++ file:
      #define PER_IMPLEMENTATION
      #include "per.h"
      #define PER_NET_IMPLEMENTATION
      #include "per_net.h"
   The implementation is compiled in the file that compiles per.h's: it
   uses per.h's messages (per.h's >>rules). Every other file includes
   per_net.h alone; it includes per.h. PER_STATIC and PER_MALLOC/PER_FREE
   are per.h's options and mean here what they mean there. A table's
   nodes are PER_REAL's; the wire format does not depend on it.

   CONTENTS
      Declarations ....... per_net_server, per_net_table, per_net_*   >>api
      Implementation: tables, specs, requests, replies ...........  >>net
      (grep for the >>markers)

   WHAT IT IS
      A server holds tables, each a per_buffer with a name, and turns one
      request (bytes, as they came off the network) into one reply
      (bytes, in the server's memory): per_net_handle. It never reads
      past a request's length, never trusts a length or count it holds
      before checking it against the bytes that are there, and answers
      every request, also one it cannot parse, with a status and a
      message. A refused request changes nothing. Not safe for concurrent
      use: one thread serves (per_buffer's own rule).

   QUICK START (one request; per-server, server/per_server.c, serves)
      per_net_server srv;
      per_config cfg = per_config_default(100000, 44);
      unsigned char req[64] = "PERQ";            // a request off the network
      const void *reply;                         // the reply to send back
      size_t reply_len;
      if (per_net_init(&srv, PER_NET_MAX_MESSAGE, NULL) != PER_OK) return 1;
      if (per_net_add_table(&srv, "replay", &cfg, "") != PER_OK) return 1;
      per_net_handle(&srv, req, sizeof req, &reply, &reply_len);
      per_net_free(&srv);

   HISTORY
      0.5.0  (unreleased) new: the wire format's version 1 (HELLO,
             INSERT, SAMPLE, UPDATE, INFO), tables from a spec text.
*/
#ifndef PER_NET_H_INCLUDED
#define PER_NET_H_INCLUDED

#include "per.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
   Declarations                                                       >>api
   ====================================================================== */

#define per_net_init PERI_NAME(per_net_init)
#define per_net_free PERI_NAME(per_net_free)
#define per_net_add_table PERI_NAME(per_net_add_table)
#define per_net_add_spec PERI_NAME(per_net_add_spec)
#define per_net_find PERI_NAME(per_net_find)
#define per_net_handle PERI_NAME(per_net_handle)

/* The wire format's version (docs/PROTOCOL.md). */
#define PER_NET_VERSION 1
/* Bytes of a table's name, its NUL included: names are 1 .. 63 bytes. */
#define PER_NET_NAME_MAX 64
/* The largest request or reply a server makes or takes by default. */
#define PER_NET_MAX_MESSAGE (UINT64_C(64) << 20)
/* The smallest max_message per_net_init accepts. */
#define PER_NET_MIN_MESSAGE UINT64_C(4096)
/* Bytes of a reply's header; its body starts there. */
#define PER_NET_REPLY_HEADER 24u

/* Ops (a request's u16 op) */
enum {
  PER_NET_HELLO = 1,  /* item size and layout checked against the table's */
  PER_NET_INSERT = 2, /* items as one trajectory */
  PER_NET_SAMPLE = 3, /* a batch: ids, weights, items, masks */
  PER_NET_UPDATE = 4, /* priorities from TD errors */
  PER_NET_INFO = 5    /* sizes and counters */
};
/* INSERT flags */
enum { PER_NET_ENDS = 1u << 0, PER_NET_TD = 1u << 1 };
/* UPDATE flags */
enum { PER_NET_SEQUENCES = 1u << 0 };
/* SAMPLE want */
enum { PER_NET_NO_ITEMS = 1u << 0 };

/* A table: a per_buffer with a name and what it served. The buffer is
   the caller's to read, and to change through per.h's functions between
   requests (per_buffer_load of a checkpoint, say). */
typedef struct per_net_table {
  char name[PER_NET_NAME_MAX];
  per_buffer buf;
  uint64_t inserts, samples, updates; /* requests applied */
  uint64_t refused;                   /* requests for it refused */
} per_net_table;

/* A plain struct: declare one and per_net_init it. Fields are readable;
   change them only through the functions. */
typedef struct per_net_server {
  per_net_table **tables; /* ntables tables, in the order added */
  uint32_t ntables;
  uint64_t max_message; /* the largest request or reply, bytes */
  unsigned char *out;   /* the last reply (out_cap bytes) */
  size_t out_cap;
  unsigned char *scratch; /* aligned copies of a request's ids and TD */
  size_t scratch_cap;
  unsigned char fallback[PER_NET_REPLY_HEADER + 192]; /* a refusal's reply
                                                         when out cannot
                                                         grow */
  uint64_t requests, refused; /* all requests, and those refused */
  void *alloc_ctx;
  char error[192]; /* what the last refused call refused ("" after a
                      successful one); a request's refusal is its
                      reply's message */
} per_net_server;

/* An empty server whose requests and replies are at most max_message
   bytes (PER_NET_MAX_MESSAGE is 64 MiB). alloc_ctx goes to
   PER_MALLOC/PER_FREE. Errors: PER_ERR_NULL (s), PER_ERR_ARG
   (max_message < PER_NET_MIN_MESSAGE or above SIZE_MAX / 2); *s is then
   zeroed but for s->error, and per_net_free accepts it. */
PERDEF per_status per_net_init(per_net_server *s, uint64_t max_message,
                               void *alloc_ctx);
/* Free every table and the server's memory, and zero *s. Safe on a
   zeroed server and on NULL. */
PERDEF void per_net_free(per_net_server *s);
/* A table named `name` (1 .. 63 bytes, no control characters), a new
   per_buffer of cfg (per_buffer_init) whose layout is `layout`
   (per_buffer_set_layout; "" or NULL for unknown). Errors (the server
   unchanged, s->error says why): PER_ERR_NULL (s, name or cfg),
   PER_ERR_ARG (a name of another length or with a control character, a
   name already taken, a layout too long), per_buffer_init's errors
   (cfg), PER_ERR_NOMEM. */
PERDEF per_status per_net_add_table(per_net_server *s, const char *name,
                                    const per_config *cfg, const char *layout);
/* Tables from a spec text: lines of `key value`; `table NAME` starts a
   table, and the keys after it up to the next `table` are per_config's
   fields (capacity, item_size, alpha, beta0, beta1, beta_steps, eps,
   max_priority, seed, flags, max_unique, seq_len, seq_stride, seq_eta),
   each at most once, and `layout`, whose value is the rest of its line
   (trailing blanks dropped). Fields not named keep per_config_default's
   value for the table's capacity and item_size, which are required.
   flags is a number or names joined by `|`: weights_buffer_max,
   seq_cross_episodes, max_live. Blank lines and lines starting with `#`
   are skipped; blanks around keys and values are ignored. Numbers are
   decimal (integers) or as strtod reads them (reals); a value must be
   the whole rest of its line. Every table of the text is added, or (on
   an error) none: Errors: PER_ERR_NULL (s or text), PER_ERR_ARG (an
   unknown key, a key twice, a bad number, a key before `table`, a table
   without capacity or item_size; s->error names the line), and those of
   per_net_add_table. */
PERDEF per_status per_net_add_spec(per_net_server *s, const char *text);
/* The table named by the len bytes at name, or NULL. */
PERDEF per_net_table *per_net_find(const per_net_server *s, const char *name,
                                   size_t len);
/* Answer one request: the len bytes at req (docs/PROTOCOL.md; any bytes
   at all are accepted, and read only within len). *reply and *reply_len
   get the reply, in the server's memory, valid until the next call on s.
   Returns the reply's status (PER_OK when the request was applied), and
   on any other status nothing was changed but the counters (s->requests,
   s->refused, the table's refused). Every call makes a reply, so *reply
   is never NULL after it, unless s, reply or reply_len is NULL
   (PER_ERR_NULL, nothing written). */
PERDEF per_status per_net_handle(per_net_server *s, const void *req, size_t len,
                                 const void **reply, size_t *reply_len);

#ifdef __cplusplus
}
#endif

#endif /* PER_NET_H_INCLUDED */

/* ======================================================================
   IMPLEMENTATION
   ====================================================================== */
#if defined(PER_NET_IMPLEMENTATION) && !defined(PER_NET_IMPLEMENTATION_INCLUDED)
#define PER_NET_IMPLEMENTATION_INCLUDED

#ifndef PER_IMPLEMENTATION_INCLUDED
#error \
    "per_net.h: define PER_NET_IMPLEMENTATION in the file that defines PER_IMPLEMENTATION, after including per.h there"
#endif

#include <locale.h>
#include <stdlib.h>
#include <string.h>

/* per.h's casts are C casts; so are these (see per.h). */
#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuseless-cast"
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* >>net */

/* A request's fixed header: magic, version, op, request id, name
   length. */
#define PERI_NET_REQ_HEADER 17u

/* Little-endian reads and writes of unaligned bytes. */
static uint64_t peri_net_get(const unsigned char *p, unsigned n) {
  uint64_t v = 0;
  while (n--) v = (v << 8) | p[n];
  return v;
}

static void peri_net_put(unsigned char *p, uint64_t v, unsigned n) {
  unsigned k;
  for (k = 0; k < n; ++k) {
    p[k] = (unsigned char)(v & 0xFFu);
    v >>= 8;
  }
}

static double peri_net_get_f64(const unsigned char *p) {
  uint64_t u = peri_net_get(p, 8);
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static void peri_net_put_f64(unsigned char *p, double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  peri_net_put(p, u, 8);
}

/* A request being read: the bytes left at p..end. */
typedef struct peri_net_in {
  const unsigned char *p, *end;
} peri_net_in;

static size_t peri_net_left(const peri_net_in *in) {
  return (size_t)(in->end - in->p);
}

/* The next n bytes (n <= 8) as a number; 0 when fewer are left (the
   caller checks the length first). */
static uint64_t peri_net_take(peri_net_in *in, unsigned n) {
  uint64_t v;
  if (peri_net_left(in) < n) return 0;
  v = peri_net_get(in->p, n);
  in->p += n;
  return v;
}

/* s->error for call fn: "fn: " and what follows. */
static peri_msg peri_net_msg(per_net_server *s, const char *fn) {
  peri_msg m = peri_msg_into(s->error, sizeof s->error);
  peri_msg_s(&m, fn);
  peri_msg_s(&m, ": ");
  return m;
}

static per_status peri_net_fail(per_net_server *s, const char *fn,
                                const char *what, per_status st) {
  peri_msg m = peri_net_msg(s, fn);
  peri_msg_s(&m, what);
  return st;
}

PERDEF per_status per_net_init(per_net_server *s, uint64_t max_message,
                               void *alloc_ctx) {
  if (!s) return PER_ERR_NULL;
  memset(s, 0, sizeof *s);
  if (max_message < PER_NET_MIN_MESSAGE ||
      max_message > (uint64_t)(SIZE_MAX / 2)) {
    peri_msg m = peri_net_msg(s, "per_net_init");
    peri_msg_nu(&m, "max_message", max_message);
    peri_msg_s(&m, " is outside [4096, SIZE_MAX / 2]");
    return PER_ERR_ARG;
  }
  s->max_message = max_message;
  s->alloc_ctx = alloc_ctx;
  return PER_OK;
}

PERDEF void per_net_free(per_net_server *s) {
  uint32_t k;
  if (!s) return;
  for (k = 0; k < s->ntables; ++k) {
    per_buffer_free(&s->tables[k]->buf);
    PER_FREE(s->tables[k], s->alloc_ctx);
  }
  if (s->tables) PER_FREE(s->tables, s->alloc_ctx);
  if (s->out) PER_FREE(s->out, s->alloc_ctx);
  if (s->scratch) PER_FREE(s->scratch, s->alloc_ctx);
  memset(s, 0, sizeof *s);
}

PERDEF per_net_table *per_net_find(const per_net_server *s, const char *name,
                                   size_t len) {
  uint32_t k;
  if (!s || !name || len == 0 || len >= PER_NET_NAME_MAX) return NULL;
  for (k = 0; k < s->ntables; ++k) {
    const char *n = s->tables[k]->name;
    if (strlen(n) == len && memcmp(n, name, len) == 0) return s->tables[k];
  }
  return NULL;
}

/* PER_OK when name (len bytes) may name a table: 1 .. 63 bytes, none a
   control character. */
static int peri_net_name_ok(const char *name, size_t len) {
  size_t k;
  if (len == 0 || len >= PER_NET_NAME_MAX) return 0;
  for (k = 0; k < len; ++k)
    if ((unsigned char)name[k] < 0x20u || name[k] == 0x7F) return 0;
  return 1;
}

PERDEF per_status per_net_add_table(per_net_server *s, const char *name,
                                    const per_config *cfg, const char *layout) {
  static const char fn[] = "per_net_add_table";
  per_net_table *t, **grown;
  per_status st;
  size_t len;
  if (!s) return PER_ERR_NULL;
  if (!name || !cfg)
    return peri_net_fail(s, fn, "name or cfg is NULL", PER_ERR_NULL);
  len = strlen(name);
  if (!peri_net_name_ok(name, len)) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, "a table's name is 1 to 63 bytes without control "
                   "characters, not one of ");
    peri_msg_u(&m, len);
    peri_msg_s(&m, " bytes");
    return PER_ERR_ARG;
  }
  if (per_net_find(s, name, len)) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, "a table named \"");
    peri_msg_s(&m, name);
    peri_msg_s(&m, "\" exists");
    return PER_ERR_ARG;
  }
  if (layout && strlen(layout) >= PER_LAYOUT_MAX) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, "the layout has ");
    peri_msg_u(&m, strlen(layout));
    peri_msg_s(&m, " chars, more than 511");
    return PER_ERR_ARG;
  }
  t = (per_net_table *)PER_MALLOC(sizeof *t, s->alloc_ctx);
  grown = (per_net_table **)PER_MALLOC((s->ntables + 1u) * sizeof *grown,
                                       s->alloc_ctx);
  if (!t || !grown) {
    if (t) PER_FREE(t, s->alloc_ctx);
    if (grown) PER_FREE(grown, s->alloc_ctx);
    return peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
  }
  memset(t, 0, sizeof *t);
  memcpy(t->name, name, len + 1);
  st = per_buffer_init(&t->buf, cfg, s->alloc_ctx);
  if (st == PER_OK) st = per_buffer_set_layout(&t->buf, layout ? layout : "");
  if (st != PER_OK) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, "table \"");
    peri_msg_s(&m, name);
    peri_msg_s(&m, "\": ");
    peri_msg_s(&m, t->buf.error[0] ? t->buf.error : per_status_str(st));
    per_buffer_free(&t->buf);
    PER_FREE(t, s->alloc_ctx);
    PER_FREE(grown, s->alloc_ctx);
    return st;
  }
  if (s->ntables) memcpy(grown, s->tables, s->ntables * sizeof *grown);
  if (s->tables) PER_FREE(s->tables, s->alloc_ctx);
  grown[s->ntables] = t;
  s->tables = grown;
  s->ntables++;
  s->error[0] = 0;
  return PER_OK;
}

/* ---- spec texts ---- */

/* One table of a spec being read: its config and which keys were set. */
typedef struct peri_net_spec {
  char name[PER_NET_NAME_MAX];
  char layout[PER_LAYOUT_MAX];
  per_config cfg;
  uint32_t set; /* bit k: key k of peri_net_keys was given */
  uint32_t line;
} peri_net_spec;

static const char *const peri_net_keys[] = {
    "capacity",   "item_size", "alpha",        "beta0",   "beta1",
    "beta_steps", "eps",       "max_priority", "seed",    "flags",
    "max_unique", "seq_len",   "seq_stride",   "seq_eta", "layout"};
#define PERI_NET_NKEYS (sizeof peri_net_keys / sizeof peri_net_keys[0])

static int peri_net_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* The line's number in a message: "line N: " */
static peri_msg peri_net_line_msg(per_net_server *s, uint32_t line) {
  peri_msg m = peri_net_msg(s, "per_net_add_spec");
  peri_msg_nu(&m, "line", line);
  peri_msg_s(&m, ": ");
  return m;
}

/* An unsigned decimal of the whole value v (n bytes), at most max. */
static int peri_net_parse_u(const char *v, size_t n, uint64_t max,
                            uint64_t *out) {
  uint64_t x = 0;
  size_t k;
  if (n == 0 || n > 20) return 0;
  for (k = 0; k < n; ++k) {
    unsigned d = (unsigned)(unsigned char)v[k] - (unsigned)'0';
    if (d > 9u || x > (UINT64_MAX - d) / 10u) return 0;
    x = x * 10u + d;
  }
  if (x > max) return 0;
  *out = x;
  return 1;
}

/* A real: the whole value as strtod reads it in the C locale (a '.'
   for the decimal point whatever the locale says: it becomes the
   locale's before strtod reads it, and a locale's own is refused). */
static int peri_net_parse_d(const char *v, size_t n, double *out) {
  char tmp[64], *end = NULL;
  const char *point = localeconv()->decimal_point;
  size_t k;
  if (n == 0 || n >= sizeof tmp || !point || strlen(point) != 1) return 0;
  memcpy(tmp, v, n);
  tmp[n] = 0;
  for (k = 0; k < n; ++k)
    if (tmp[k] == point[0] && point[0] != '.') return 0;
    else if (tmp[k] == '.') tmp[k] = point[0];
  *out = strtod(tmp, &end);
  return end == tmp + n;
}

/* Config flags: a number, or names joined by |. */
static int peri_net_parse_flags(const char *v, size_t n, uint32_t *out) {
  static const char *const names[] = {"weights_buffer_max",
                                      "seq_cross_episodes", "max_live"};
  static const uint32_t bits[] = {PER_WEIGHTS_BUFFER_MAX,
                                  PER_SEQ_CROSS_EPISODES, PER_MAX_LIVE};
  uint64_t x;
  uint32_t f = 0;
  size_t a = 0;
  if (peri_net_parse_u(v, n, UINT32_MAX, &x)) {
    *out = (uint32_t)x;
    return 1;
  }
  if (n == 0 || v[n - 1] == '|') return 0;
  while (a < n) {
    size_t b = a, e, k;
    int found = 0;
    while (b < n && v[b] != '|') ++b;
    e = b;
    while (a < e && peri_net_blank(v[a])) ++a;
    while (e > a && peri_net_blank(v[e - 1])) --e;
    for (k = 0; k < 3; ++k)
      if (strlen(names[k]) == e - a && memcmp(names[k], v + a, e - a) == 0) {
        f |= bits[k];
        found = 1;
      }
    if (!found) return 0;
    a = b + 1;
  }
  *out = f;
  return 1;
}

/* Key k of t set from the value v (n bytes). */
static int peri_net_set_key(peri_net_spec *t, unsigned k, const char *v,
                            size_t n) {
  per_config *c = &t->cfg;
  uint64_t u = 0;
  double d = 0;
  switch (k) {
    case 0:
    case 1:
    case 10:
    case 11:
    case 12:
      if (!peri_net_parse_u(v, n, UINT32_MAX, &u)) return 0;
      if (k == 0) c->capacity = (uint32_t)u;
      else if (k == 1) c->item_size = (uint32_t)u;
      else if (k == 10) c->max_unique = (uint32_t)u;
      else if (k == 11) c->seq_len = (uint32_t)u;
      else c->seq_stride = (uint32_t)u;
      return 1;
    case 5:
    case 8:
      if (!peri_net_parse_u(v, n, UINT64_MAX, &u)) return 0;
      if (k == 5) c->beta_steps = u;
      else c->seed = u;
      return 1;
    case 9: return peri_net_parse_flags(v, n, &c->flags);
    case 14:
      if (n >= PER_LAYOUT_MAX) return 0;
      memcpy(t->layout, v, n);
      t->layout[n] = 0;
      return 1;
    default:
      if (!peri_net_parse_d(v, n, &d)) return 0;
      if (k == 2) c->alpha = d;
      else if (k == 3) c->beta0 = d;
      else if (k == 4) c->beta1 = d;
      else if (k == 6) c->eps = d;
      else if (k == 7) c->max_priority = d;
      else c->seq_eta = d;
      return 1;
  }
}

/* The defaults for t's capacity and item_size under the keys given. */
static void peri_net_spec_defaults(peri_net_spec *t) {
  per_config given = t->cfg,
             d = per_config_default(given.capacity, given.item_size);
  uint32_t k = 0;
  for (k = 2; k < 14; ++k) {
    if (!(t->set & (1u << k))) continue;
    switch (k) {
      case 2: d.alpha = given.alpha; break;
      case 3: d.beta0 = given.beta0; break;
      case 4: d.beta1 = given.beta1; break;
      case 5: d.beta_steps = given.beta_steps; break;
      case 6: d.eps = given.eps; break;
      case 7: d.max_priority = given.max_priority; break;
      case 8: d.seed = given.seed; break;
      case 9: d.flags = given.flags; break;
      case 10: d.max_unique = given.max_unique; break;
      case 11: d.seq_len = given.seq_len; break;
      case 12: d.seq_stride = given.seq_stride; break;
      default: d.seq_eta = given.seq_eta; break;
    }
  }
  t->cfg = d;
}

/* Drop the tables added after the first `keep`. */
static void peri_net_drop_tables(per_net_server *s, uint32_t keep) {
  while (s->ntables > keep) {
    per_net_table *t = s->tables[--s->ntables];
    per_buffer_free(&t->buf);
    PER_FREE(t, s->alloc_ctx);
  }
}

/* Add the table t read from the spec; s->error names its line on error. */
static per_status peri_net_spec_add(per_net_server *s, peri_net_spec *t) {
  per_status st;
  if ((t->set & 3u) != 3u) {
    peri_msg m = peri_net_line_msg(s, t->line);
    peri_msg_s(&m, "table \"");
    peri_msg_s(&m, t->name);
    peri_msg_s(&m, "\" has no ");
    peri_msg_s(&m, (t->set & 1u) ? "item_size" : "capacity");
    return PER_ERR_ARG;
  }
  peri_net_spec_defaults(t);
  st = per_net_add_table(s, t->name, &t->cfg, t->layout);
  if (st != PER_OK) {
    char why[sizeof s->error];
    peri_msg m;
    memcpy(why, s->error, sizeof why);
    m = peri_net_line_msg(s, t->line);
    peri_msg_s(&m, why);
  }
  return st;
}

PERDEF per_status per_net_add_spec(per_net_server *s, const char *text) {
  peri_net_spec t;
  const char *p;
  uint32_t line = 0, keep;
  int open = 0;
  per_status st = PER_OK;
  if (!s) return PER_ERR_NULL;
  if (!text)
    return peri_net_fail(s, "per_net_add_spec", "text is NULL", PER_ERR_NULL);
  keep = s->ntables;
  memset(&t, 0, sizeof t);
  for (p = text; *p && st == PER_OK;) {
    const char *a = p, *e, *k, *ke, *v;
    unsigned key;
    ++line;
    while (*p && *p != '\n') ++p;
    e = p;
    if (*p) ++p;
    while (a < e && peri_net_blank(*a)) ++a;
    while (e > a && peri_net_blank(e[-1])) --e;
    if (a == e || *a == '#') continue;
    k = a;
    ke = a;
    while (ke < e && !peri_net_blank(*ke)) ++ke;
    v = ke;
    while (v < e && peri_net_blank(*v)) ++v;
    if ((size_t)(ke - k) == 5 && memcmp(k, "table", 5) == 0) {
      if (open) st = peri_net_spec_add(s, &t);
      if (st != PER_OK) break;
      memset(&t, 0, sizeof t);
      t.line = line;
      if (!peri_net_name_ok(v, (size_t)(e - v))) {
        peri_msg m = peri_net_line_msg(s, line);
        peri_msg_s(&m, "a table's name is 1 to 63 bytes without control "
                       "characters");
        st = PER_ERR_ARG;
        break;
      }
      memcpy(t.name, v, (size_t)(e - v));
      open = 1;
      continue;
    }
    for (key = 0; key < PERI_NET_NKEYS; ++key)
      if (strlen(peri_net_keys[key]) == (size_t)(ke - k) &&
          memcmp(peri_net_keys[key], k, (size_t)(ke - k)) == 0)
        break;
    {
      peri_msg m = peri_net_line_msg(s, line);
      const char *why = NULL;
      if (key == PERI_NET_NKEYS) why = "unknown key \"";
      else if (!open) why = "a key before the first `table` line: \"";
      else if (t.set & (1u << key)) why = "a second value of \"";
      else if (!peri_net_set_key(&t, key, v, (size_t)(e - v)))
        why = "not a value of \"";
      if (why) {
        char kb[24];
        size_t kn =
            (size_t)(ke - k) < sizeof kb - 1 ? (size_t)(ke - k) : sizeof kb - 1;
        memcpy(kb, k, kn);
        kb[kn] = 0;
        peri_msg_s(&m, why);
        peri_msg_s(&m, kb);
        peri_msg_s(&m, "\"");
        st = PER_ERR_ARG;
        break;
      }
      t.set |= 1u << key;
    }
  }
  if (st == PER_OK && open) st = peri_net_spec_add(s, &t);
  if (st != PER_OK) {
    char why[sizeof s->error];
    memcpy(why, s->error, sizeof why);
    peri_net_drop_tables(s, keep);
    memcpy(s->error, why, sizeof why);
    return st;
  }
  s->error[0] = 0;
  return PER_OK;
}

/* ---- replies ---- */

/* Room for a reply of n bytes in s->out (n <= max_message). */
static int peri_net_room(per_net_server *s, size_t n) {
  unsigned char *p;
  size_t cap;
  if (n <= s->out_cap) return 1;
  cap = s->out_cap ? s->out_cap : 4096u;
  while (cap < n) cap = cap > SIZE_MAX / 2 ? n : cap * 2;
  if (cap > s->max_message) cap = (size_t)s->max_message;
  if (cap < n) return 0;
  p = (unsigned char *)PER_MALLOC(cap, s->alloc_ctx);
  if (!p) return 0;
  if (s->out) PER_FREE(s->out, s->alloc_ctx);
  s->out = p;
  s->out_cap = cap;
  return 1;
}

/* Room for n aligned scratch bytes. */
static unsigned char *peri_net_scratch(per_net_server *s, size_t n) {
  unsigned char *p;
  if (n <= s->scratch_cap) return s->scratch;
  p = (unsigned char *)PER_MALLOC(n, s->alloc_ctx);
  if (!p) return NULL;
  if (s->scratch) PER_FREE(s->scratch, s->alloc_ctx);
  s->scratch = p;
  s->scratch_cap = n;
  return p;
}

/* A reply's header at out: op, id, status, message length. */
static void peri_net_header(unsigned char *out, uint32_t op, uint64_t id,
                            per_status st, size_t msg) {
  memcpy(out, "PERR", 4);
  peri_net_put(out + 4, PER_NET_VERSION, 2);
  peri_net_put(out + 6, op, 2);
  peri_net_put(out + 8, id, 8);
  peri_net_put(out + 16, (uint64_t)(uint32_t)(int32_t)st, 4);
  peri_net_put(out + 20, msg, 2);
  peri_net_put(out + 22, 0, 2);
}

/* A refusal: header and s->error as the message, in s->out when it has
   room, else in s->fallback (the message cut to fit). */
static per_status peri_net_refuse(per_net_server *s, per_net_table *t,
                                  uint32_t op, uint64_t id, per_status st,
                                  const void **reply, size_t *reply_len) {
  size_t msg = strlen(s->error);
  unsigned char *out;
  s->refused++;
  if (t) t->refused++;
  if (peri_net_room(s, PER_NET_REPLY_HEADER + msg)) {
    out = s->out;
  } else {
    out = s->fallback;
    if (msg > sizeof s->fallback - PER_NET_REPLY_HEADER)
      msg = sizeof s->fallback - PER_NET_REPLY_HEADER;
  }
  peri_net_header(out, op, id, st, msg);
  memcpy(out + PER_NET_REPLY_HEADER, s->error, msg);
  *reply = out;
  *reply_len = PER_NET_REPLY_HEADER + msg;
  return st;
}

/* The body of a successful reply of `body` bytes: its header written, the
   body's bytes to fill; NULL when it does not fit (s->error says so). */
static unsigned char *peri_net_body(per_net_server *s, uint32_t op, uint64_t id,
                                    size_t body) {
  if (body > s->max_message - PER_NET_REPLY_HEADER ||
      !peri_net_room(s, PER_NET_REPLY_HEADER + body))
    return NULL;
  peri_net_header(s->out, op, id, PER_OK, 0);
  return s->out + PER_NET_REPLY_HEADER;
}

/* The message of a buffer's refused call: its error, else the status. */
static void peri_net_from_buffer(per_net_server *s, const per_net_table *t,
                                 per_status st) {
  peri_msg m = peri_msg_into(s->error, sizeof s->error);
  peri_msg_s(&m, t->buf.error[0] ? t->buf.error : per_status_str(st));
}

/* ---- ops ---- */

/* HELLO: item size and layout against the table's; the table's config. */
static per_status peri_net_hello(per_net_server *s, per_net_table *t,
                                 peri_net_in *in, uint64_t id,
                                 const void **reply, size_t *reply_len) {
  const per_config *c = &t->buf.cfg;
  uint32_t item_size, m;
  size_t lay = strlen(t->buf.layout);
  unsigned char *o;
  if (peri_net_left(in) < 6) goto format;
  item_size = (uint32_t)peri_net_take(in, 4);
  m = (uint32_t)peri_net_take(in, 2);
  if (peri_net_left(in) != m) goto format;
  if (item_size != c->item_size ||
      (m != 0 && lay != 0 && (m != lay || memcmp(in->p, t->buf.layout, m)))) {
    peri_msg msg = peri_net_msg(s, "hello");
    char theirs[96];
    size_t n = m < sizeof theirs - 1 ? m : sizeof theirs - 1;
    memcpy(theirs, in->p, n);
    theirs[n] = 0;
    peri_msg_s(&msg, "table \"");
    peri_msg_s(&msg, t->name);
    peri_msg_s(&msg, "\" has items of ");
    peri_msg_u(&msg, c->item_size);
    peri_msg_s(&msg, " bytes, layout \"");
    peri_msg_s(&msg, t->buf.layout);
    peri_msg_s(&msg, "\"; the client's are ");
    peri_msg_u(&msg, item_size);
    peri_msg_s(&msg, " bytes, \"");
    peri_msg_s(&msg, theirs);
    peri_msg_s(&msg, "\"");
    return peri_net_refuse(s, t, PER_NET_HELLO, id, PER_ERR_MISMATCH, reply,
                           reply_len);
  }
  o = peri_net_body(s, PER_NET_HELLO, id, 90 + lay);
  if (!o) goto big;
  peri_net_put(o, c->capacity, 4);
  peri_net_put(o + 4, c->item_size, 4);
  peri_net_put(o + 8, c->seq_len, 4);
  peri_net_put(o + 12, c->seq_stride, 4);
  peri_net_put(o + 16, c->flags, 4);
  peri_net_put(o + 20, c->max_unique, 4);
  peri_net_put_f64(o + 24, c->alpha);
  peri_net_put_f64(o + 32, c->beta0);
  peri_net_put_f64(o + 40, c->beta1);
  peri_net_put(o + 48, c->beta_steps, 8);
  peri_net_put_f64(o + 56, c->eps);
  peri_net_put_f64(o + 64, c->max_priority);
  peri_net_put_f64(o + 72, c->seq_eta);
  peri_net_put(o + 80, c->seed, 8);
  peri_net_put(o + 88, lay, 2);
  memcpy(o + 90, t->buf.layout, lay);
  *reply = s->out;
  *reply_len = PER_NET_REPLY_HEADER + 90 + lay;
  s->error[0] = 0;
  return PER_OK;
format:
  peri_net_fail(s, "hello",
                "the body is not u32 item size, u16 layout "
                "length and that many bytes",
                PER_ERR_FORMAT);
  return peri_net_refuse(s, t, PER_NET_HELLO, id, PER_ERR_FORMAT, reply,
                         reply_len);
big:
  peri_net_fail(s, "hello", "out of memory", PER_ERR_NOMEM);
  return peri_net_refuse(s, t, PER_NET_HELLO, id, PER_ERR_NOMEM, reply,
                         reply_len);
}

/* INSERT: n items as one trajectory, with ends and TD errors. */
static per_status peri_net_insert(per_net_server *s, per_net_table *t,
                                  peri_net_in *in, uint64_t id,
                                  const void **reply, size_t *reply_len) {
  static const char fn[] = "insert";
  uint32_t n, flags, j;
  uint64_t need, traj;
  const unsigned char *items, *ends = NULL;
  float *td = NULL;
  unsigned char *o;
  per_status st;
  if (peri_net_left(in) < 8) {
    peri_net_fail(s, fn, "the body is shorter than u32 n, u32 flags",
                  PER_ERR_FORMAT);
    return peri_net_refuse(s, t, PER_NET_INSERT, id, PER_ERR_FORMAT, reply,
                           reply_len);
  }
  n = (uint32_t)peri_net_take(in, 4);
  flags = (uint32_t)peri_net_take(in, 4);
  if (flags & ~(uint32_t)(PER_NET_ENDS | PER_NET_TD)) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "unknown flags", flags);
    return peri_net_refuse(s, t, PER_NET_INSERT, id, PER_ERR_ARG, reply,
                           reply_len);
  }
  if (n == 0) {
    peri_net_fail(s, fn, "n is 0", PER_ERR_BATCH);
    return peri_net_refuse(s, t, PER_NET_INSERT, id, PER_ERR_BATCH, reply,
                           reply_len);
  }
  /* bytes an item (checked by division: times n it may pass 2^64) */
  need = (uint64_t)t->buf.cfg.item_size + ((flags & PER_NET_ENDS) ? 1u : 0u) +
         ((flags & PER_NET_TD) ? 4u : 0u);
  if (peri_net_left(in) % need != 0 || peri_net_left(in) / need != n) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "n", n);
    peri_msg_s(&m, " with these flags needs ");
    peri_msg_u(&m, need);
    peri_msg_s(&m, " bytes an item after n and flags; the body has ");
    peri_msg_u(&m, peri_net_left(in));
    return peri_net_refuse(s, t, PER_NET_INSERT, id, PER_ERR_FORMAT, reply,
                           reply_len);
  }
  items = in->p;
  if (flags & PER_NET_ENDS) ends = items + (size_t)n * t->buf.cfg.item_size;
  if (flags & PER_NET_TD) {
    const unsigned char *src =
        items + (size_t)n * t->buf.cfg.item_size + (ends ? n : 0u);
    td = (float *)peri_net_scratch(s, (size_t)n * sizeof(float));
    if (!td) {
      peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
      return peri_net_refuse(s, t, PER_NET_INSERT, id, PER_ERR_NOMEM, reply,
                             reply_len);
    }
    for (j = 0; j < n; ++j) {
      uint32_t u = (uint32_t)peri_net_get(src + 4u * j, 4);
      memcpy(&td[j], &u, 4);
    }
  }
  if (!peri_net_room(s, PER_NET_REPLY_HEADER + 16u)) {
    peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
    return peri_net_refuse(s, t, PER_NET_INSERT, id, PER_ERR_NOMEM, reply,
                           reply_len);
  }
  traj = t->buf.trajs;
  st = td ? per_buffer_add_td(&t->buf, items, n, ends, td)
          : per_buffer_add_steps(&t->buf, items, n, ends);
  if (st != PER_OK) {
    peri_net_from_buffer(s, t, st);
    return peri_net_refuse(s, t, PER_NET_INSERT, id, st, reply, reply_len);
  }
  t->inserts++;
  o = peri_net_body(s, PER_NET_INSERT, id, 16);
  peri_net_put(o, traj, 8);
  peri_net_put(o + 8, t->buf.size, 4);
  peri_net_put(o + 12, 0, 4);
  *reply = s->out;
  *reply_len = PER_NET_REPLY_HEADER + 16u;
  s->error[0] = 0;
  return PER_OK;
}

/* SAMPLE: a batch into the reply, in place. */
static per_status peri_net_sample(per_net_server *s, per_net_table *t,
                                  peri_net_in *in, uint64_t id,
                                  const void **reply, size_t *reply_len) {
  static const char fn[] = "sample";
  per_sample_opts opts;
  uint32_t B, want, steps;
  uint64_t unit, body;
  double beta;
  unsigned char *o;
  per_status st;
  if (peri_net_left(in) != 24) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, "the body is u32 B, u32 flags, f64 beta, u32 window, "
                   "u32 want: 24 bytes, not ");
    peri_msg_u(&m, peri_net_left(in));
    return peri_net_refuse(s, t, PER_NET_SAMPLE, id, PER_ERR_FORMAT, reply,
                           reply_len);
  }
  memset(&opts, 0, sizeof opts);
  B = (uint32_t)peri_net_take(in, 4);
  opts.flags = (uint32_t)peri_net_take(in, 4);
  opts.beta = peri_net_get_f64(in->p);
  in->p += 8;
  opts.window = (uint32_t)peri_net_take(in, 4);
  want = (uint32_t)peri_net_take(in, 4);
  if (want & ~(uint32_t)PER_NET_NO_ITEMS) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "unknown want bits", want);
    return peri_net_refuse(s, t, PER_NET_SAMPLE, id, PER_ERR_ARG, reply,
                           reply_len);
  }
  steps = (opts.flags & PER_SAMPLE_SEQUENCES) && t->buf.cfg.seq_len
              ? t->buf.cfg.seq_len
              : 1u;
  unit = 12u +
         ((want & PER_NET_NO_ITEMS) ? 0u
                                    : (uint64_t)steps * t->buf.cfg.item_size) +
         ((opts.flags & PER_SAMPLE_SEQUENCES) ? steps : 0u);
  if (B == 0 ||
      (uint64_t)B > (s->max_message - PER_NET_REPLY_HEADER - 16u) / unit) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "B", B);
    peri_msg_s(&m, B ? " makes a reply larger than the largest message, "
                     : " (a batch is 1 or more)");
    if (B) peri_msg_u(&m, s->max_message);
    return peri_net_refuse(s, t, PER_NET_SAMPLE, id, PER_ERR_BATCH, reply,
                           reply_len);
  }
  body = 16u + (uint64_t)B * unit;
  o = peri_net_body(s, PER_NET_SAMPLE, id, (size_t)body);
  if (!o) {
    peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
    return peri_net_refuse(s, t, PER_NET_SAMPLE, id, PER_ERR_NOMEM, reply,
                           reply_len);
  }
  beta = (opts.flags & PER_SAMPLE_BETA) ? opts.beta : per_buffer_beta(&t->buf);
  {
    unsigned char *ids = o + 16, *w = ids + (size_t)8 * B;
    unsigned char *items = w + (size_t)4 * B;
    unsigned char *mask =
        items + ((want & PER_NET_NO_ITEMS)
                     ? 0u
                     : (size_t)B * steps * t->buf.cfg.item_size);
    if (opts.flags & PER_SAMPLE_SEQUENCES) opts.mask = mask;
    /* ids at 24 + 16 from the reply's start: 8-aligned in s->out, which
       PER_MALLOC aligns; weights at a multiple of 4 after them. */
    st = per_buffer_sample(&t->buf, B, &opts,
                           (want & PER_NET_NO_ITEMS) ? NULL : items,
                           (uint64_t *)(void *)ids, (float *)(void *)w);
    if (st != PER_OK) {
      peri_net_from_buffer(s, t, st);
      return peri_net_refuse(s, t, PER_NET_SAMPLE, id, st, reply, reply_len);
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    {
      uint32_t j;
      for (j = 0; j < B; ++j) {
        uint64_t v;
        uint32_t f;
        memcpy(&v, ids + 8u * j, 8);
        peri_net_put(ids + 8u * j, v, 8);
        memcpy(&f, w + 4u * j, 4);
        peri_net_put(w + 4u * j, f, 4);
      }
    }
#endif
  }
  peri_net_put(o, B, 4);
  peri_net_put(o + 4, steps, 4);
  peri_net_put_f64(o + 8, beta);
  t->samples++;
  *reply = s->out;
  *reply_len = PER_NET_REPLY_HEADER + (size_t)body;
  s->error[0] = 0;
  return PER_OK;
}

/* UPDATE: priorities of items or sequences from TD errors. */
static per_status peri_net_update(per_net_server *s, per_net_table *t,
                                  peri_net_in *in, uint64_t id,
                                  const void **reply, size_t *reply_len) {
  static const char fn[] = "update";
  uint32_t n, flags, k, stale = 0;
  uint64_t need, ntd, j;
  uint64_t *ids;
  float *td;
  unsigned char *o;
  per_status st;
  if (peri_net_left(in) < 8) {
    peri_net_fail(s, fn, "the body is shorter than u32 n, u32 flags",
                  PER_ERR_FORMAT);
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, PER_ERR_FORMAT, reply,
                           reply_len);
  }
  n = (uint32_t)peri_net_take(in, 4);
  flags = (uint32_t)peri_net_take(in, 4);
  if (flags & ~(uint32_t)PER_NET_SEQUENCES) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "unknown flags", flags);
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, PER_ERR_ARG, reply,
                           reply_len);
  }
  k = (flags & PER_NET_SEQUENCES) ? t->buf.cfg.seq_len : 1u;
  if ((flags & PER_NET_SEQUENCES) && k == 0) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_s(&m, "table \"");
    peri_msg_s(&m, t->name);
    peri_msg_s(&m, "\" has no sequences (seq_len 0)");
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, PER_ERR_ARG, reply,
                           reply_len);
  }
  if (n == 0) {
    peri_net_fail(s, fn, "n is 0", PER_ERR_BATCH);
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, PER_ERR_BATCH, reply,
                           reply_len);
  }
  /* n ids and n * k TD errors: checked by division, since 8 + 4k bytes a
     unit times n may pass 2^64 */
  ntd = (uint64_t)n * k;
  need = 8u + (uint64_t)4 * k;
  if (peri_net_left(in) % need != 0 || peri_net_left(in) / need != n) {
    peri_msg m = peri_net_msg(s, fn);
    peri_msg_nu(&m, "n", n);
    peri_msg_s(&m, " needs ");
    peri_msg_u(&m, need);
    peri_msg_s(&m, " bytes of id and TD errors each; the body has ");
    peri_msg_u(&m, peri_net_left(in));
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, PER_ERR_FORMAT, reply,
                           reply_len);
  }
  ids = (uint64_t *)(void *)peri_net_scratch(s, peri_net_left(in) + 8u);
  if (!ids || !peri_net_room(s, PER_NET_REPLY_HEADER + 8u)) {
    peri_net_fail(s, fn, "out of memory", PER_ERR_NOMEM);
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, PER_ERR_NOMEM, reply,
                           reply_len);
  }
  td = (float *)(void *)(ids + n);
  for (j = 0; j < n; ++j) ids[j] = peri_net_get(in->p + 8u * j, 8);
  for (j = 0; j < ntd; ++j) {
    uint32_t u = (uint32_t)peri_net_get(in->p + 8u * n + 4u * j, 4);
    memcpy(&td[j], &u, 4);
  }
  st = (flags & PER_NET_SEQUENCES)
           ? per_buffer_update_seq(&t->buf, ids, td, n, &stale)
           : per_buffer_update(&t->buf, ids, td, n, &stale);
  if (st != PER_OK) {
    peri_net_from_buffer(s, t, st);
    return peri_net_refuse(s, t, PER_NET_UPDATE, id, st, reply, reply_len);
  }
  t->updates++;
  o = peri_net_body(s, PER_NET_UPDATE, id, 8);
  peri_net_put(o, stale, 4);
  peri_net_put(o + 4, 0, 4);
  *reply = s->out;
  *reply_len = PER_NET_REPLY_HEADER + 8u;
  s->error[0] = 0;
  return PER_OK;
}

/* INFO: sizes and counters. */
static per_status peri_net_info(per_net_server *s, per_net_table *t,
                                peri_net_in *in, uint64_t id,
                                const void **reply, size_t *reply_len) {
  const per_buffer *b = &t->buf;
  unsigned char *o;
  if (peri_net_left(in) != 0) {
    peri_net_fail(s, "info", "the body is empty", PER_ERR_FORMAT);
    return peri_net_refuse(s, t, PER_NET_INFO, id, PER_ERR_FORMAT, reply,
                           reply_len);
  }
  o = peri_net_body(s, PER_NET_INFO, id, 80);
  if (!o) {
    peri_net_fail(s, "info", "out of memory", PER_ERR_NOMEM);
    return peri_net_refuse(s, t, PER_NET_INFO, id, PER_ERR_NOMEM, reply,
                           reply_len);
  }
  peri_net_put(o, b->cfg.capacity, 4);
  peri_net_put(o + 4, b->cfg.item_size, 4);
  peri_net_put(o + 8, b->size, 4);
  peri_net_put(o + 12, b->cfg.seq_len, 4);
  peri_net_put(o + 16, b->added, 8);
  peri_net_put(o + 24, b->trajs, 8);
  peri_net_put(o + 32, b->step, 8);
  peri_net_put_f64(o + 40, per_buffer_beta(b));
  peri_net_put(o + 48, t->inserts, 8);
  peri_net_put(o + 56, t->samples, 8);
  peri_net_put(o + 64, t->updates, 8);
  peri_net_put(o + 72, t->refused, 8);
  *reply = s->out;
  *reply_len = PER_NET_REPLY_HEADER + 80u;
  s->error[0] = 0;
  return PER_OK;
}

PERDEF per_status per_net_handle(per_net_server *s, const void *req, size_t len,
                                 const void **reply, size_t *reply_len) {
  const unsigned char *r = (const unsigned char *)req;
  peri_net_in in;
  per_net_table *t;
  uint32_t version, op, k;
  uint64_t id;
  if (!s || !reply || !reply_len) return PER_ERR_NULL;
  s->requests++;
  if (!r) len = 0;
  if (len < PERI_NET_REQ_HEADER || memcmp(r, "PERQ", 4) != 0) {
    peri_msg m = peri_net_msg(s, "request");
    if (len < PERI_NET_REQ_HEADER) {
      peri_msg_s(&m, "shorter than a header: ");
      peri_msg_u(&m, len);
      peri_msg_s(&m, " bytes");
    } else {
      peri_msg_s(&m, "no PERQ magic: not a per request");
    }
    return peri_net_refuse(s, NULL, 0, 0, PER_ERR_FORMAT, reply, reply_len);
  }
  version = (uint32_t)peri_net_get(r + 4, 2);
  op = (uint32_t)peri_net_get(r + 6, 2);
  id = peri_net_get(r + 8, 8);
  if (version != PER_NET_VERSION) {
    peri_msg m = peri_net_msg(s, "request");
    peri_msg_nu(&m, "version", version);
    peri_msg_s(&m, ": this server speaks version 1");
    return peri_net_refuse(s, NULL, op, id, PER_ERR_VERSION, reply, reply_len);
  }
  k = r[16];
  if (len < PERI_NET_REQ_HEADER + k ||
      !peri_net_name_ok((const char *)r + PERI_NET_REQ_HEADER, k)) {
    peri_msg m = peri_net_msg(s, "request");
    peri_msg_s(&m, len < PERI_NET_REQ_HEADER + k
                       ? "shorter than its table name"
                       : "a table's name is 1 to 63 bytes without control "
                         "characters");
    return peri_net_refuse(s, NULL, op, id, PER_ERR_FORMAT, reply, reply_len);
  }
  t = per_net_find(s, (const char *)r + PERI_NET_REQ_HEADER, k);
  if (!t) {
    peri_msg m = peri_net_msg(s, "request");
    char name[PER_NET_NAME_MAX];
    memcpy(name, r + PERI_NET_REQ_HEADER, k);
    name[k] = 0;
    peri_msg_s(&m, "no table named \"");
    peri_msg_s(&m, name);
    peri_msg_s(&m, "\"");
    return peri_net_refuse(s, NULL, op, id, PER_ERR_INDEX, reply, reply_len);
  }
  in.p = r + PERI_NET_REQ_HEADER + k;
  in.end = r + len;
  switch (op) {
    case PER_NET_HELLO: return peri_net_hello(s, t, &in, id, reply, reply_len);
    case PER_NET_INSERT:
      return peri_net_insert(s, t, &in, id, reply, reply_len);
    case PER_NET_SAMPLE:
      return peri_net_sample(s, t, &in, id, reply, reply_len);
    case PER_NET_UPDATE:
      return peri_net_update(s, t, &in, id, reply, reply_len);
    case PER_NET_INFO: return peri_net_info(s, t, &in, id, reply, reply_len);
    default: {
      peri_msg m = peri_net_msg(s, "request");
      peri_msg_nu(&m, "unknown op", op);
      return peri_net_refuse(s, t, op, id, PER_ERR_FORMAT, reply, reply_len);
    }
  }
}

#ifdef __cplusplus
}
#endif

#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic pop
#endif

#endif /* PER_NET_IMPLEMENTATION */
