/* fuzz_net.c - libFuzzer target for the replay server's request handling
   (per_net_handle, per_net.h). Input: requests, each a little-endian u16
   length and that many bytes (the last one cut to what is left), at most
   64, handled in order by a server whose largest message is
   PER_NET_MIN_MESSAGE, with two tables from a spec text: "p" (32 items of
   4 bytes, PER_WEIGHTS_BUFFER_MAX, layout "u32") and "s" (24 items of 3
   bytes, sequences of 4 steps every 2 slots across episode ends, a rate
   limiter: 2 items before a sample, 2 samples an insert, margin 12).
   After each request: both tables pass per_buffer_check; the reply is
   well-formed (magic, version 1, the returned status in range and in
   its header, the reserved field 0, a message exactly on a refusal and
   within the reply, no longer than the largest message) and echoes the
   request's op and id once its header could be read; a refused request
   left both tables byte for byte as they were and moved only the
   refused counters; an applied one has its op's reply length, and a
   batch's ids and weights are those of stored items. */
#include "fuzz_common.h"
#define PER_NET_IMPLEMENTATION
#include "per_net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char NET_SPEC[] = "table p\n"
                               "capacity 32\n"
                               "item_size 4\n"
                               "seed 1\n"
                               "beta_steps 10\n"
                               "flags weights_buffer_max\n"
                               "layout u32\n"
                               "table s\n"
                               "capacity 24\n"
                               "item_size 3\n"
                               "seq_len 4\n"
                               "seq_stride 2\n"
                               "max_unique 6\n"
                               "flags seq_cross_episodes\n"
                               "min_size 2\n"
                               "samples_per_insert 2\n"
                               "error_margin 12\n";

static uint64_t net_le(const unsigned char *p, unsigned n) {
  uint64_t v = 0;
  while (n--) v = (v << 8) | p[n];
  return v;
}

/* The applied request req (len bytes) got the reply o (n bytes): its
   op's length, and a batch of stored items. */
static void check_applied(const per_net_table *t, const unsigned char *req,
                          size_t len, const unsigned char *o, size_t n) {
  uint32_t op = (uint32_t)net_le(req + 6, 2);
  const unsigned char *body = req + 17 + req[16];
  const per_config *c = &t->buf.cfg;
  if (op == PER_NET_HELLO) {
    CHECK(n == PER_NET_REPLY_HEADER + 90 + strlen(t->buf.layout));
  } else if (op == PER_NET_INSERT) {
    CHECK(n == PER_NET_REPLY_HEADER + 16 && net_le(o + 32, 4) == t->buf.size &&
          net_le(o + 24, 8) < t->buf.trajs);
  } else if (op == PER_NET_UPDATE) {
    CHECK(n == PER_NET_REPLY_HEADER + 8 &&
          net_le(o + 24, 4) <= net_le(body, 4));
  } else if (op == PER_NET_INFO) {
    CHECK(n == PER_NET_REPLY_HEADER + 128 && net_le(o + 32, 4) == t->buf.size);
  } else if (op == PER_NET_SAMPLE) {
    uint32_t B = (uint32_t)net_le(body, 4),
             flags = (uint32_t)net_le(body + 4, 4);
    uint32_t want = (uint32_t)net_le(body + 20, 4), j;
    int seq = (flags & PER_SAMPLE_SEQUENCES) != 0;
    uint64_t steps = seq ? c->seq_len : 1;
    uint64_t unit = 12 +
                    ((want & PER_NET_NO_ITEMS) ? 0 : steps * c->item_size) +
                    (seq ? steps : 0);
    CHECK(len == (size_t)(body - req) + 24);
    CHECK(n == PER_NET_REPLY_HEADER + 16 + B * unit && net_le(o + 24, 4) == B &&
          net_le(o + 28, 4) == steps);
    for (j = 0; j < B && n == PER_NET_REPLY_HEADER + 16 + B * unit; ++j) {
      uint64_t id = net_le(o + 40 + 8 * j, 8);
      uint32_t wb = (uint32_t)net_le(o + 40 + 8 * B + 4 * j, 4);
      float w;
      memcpy(&w, &wb, 4);
      CHECK(per_id_slot(id) < t->buf.size && !(id & PER_ID_SEQ) == !seq &&
            w >= 0 && w <= 1);
    }
  } else {
    CHECK(0); /* no other op is applied */
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  per_net_server s;
  uint32_t nreq = 0, k;
  (void)fuzz_path; /* no files here */
  if (per_net_init(&s, PER_NET_MIN_MESSAGE, NULL) != PER_OK ||
      per_net_add_spec(&s, NET_SPEC) != PER_OK) {
    fprintf(stderr, "fuzz_net: the server: %s\n", s.error);
    abort();
  }
  while (size >= 2 && nreq++ < 64) {
    size_t len = (size_t)(data[0] | data[1] << 8);
    const unsigned char *req = data + 2, *o;
    const void *out = NULL;
    size_t n = 0, msg;
    uint64_t counts[2][6], requests = s.requests, refused = s.refused;
    bsnap before[2];
    per_status st;
    int32_t head;
    if (len > size - 2) len = size - 2;
    data += 2 + len;
    size -= 2 + len;
    for (k = 0; k < 2; ++k) {
      per_net_table *t = s.tables[k];
      before[k] = bsnap_take(&t->buf);
      counts[k][0] = t->inserts;
      counts[k][1] = t->samples;
      counts[k][2] = t->updates;
      counts[k][3] = t->refused;
      counts[k][4] = t->items_in;
      counts[k][5] = t->items_out;
    }
    st = per_net_handle(&s, req, len, &out, &n);
    o = (const unsigned char *)out;
    CHECK(o != NULL && n >= PER_NET_REPLY_HEADER && n <= s.max_message);
    if (!o || n < PER_NET_REPLY_HEADER) break;
    head = (int32_t)(uint32_t)net_le(o + 16, 4);
    msg = (size_t)net_le(o + 20, 2);
    CHECK(memcmp(o, "PERR", 4) == 0 && net_le(o + 4, 2) == PER_NET_VERSION &&
          net_le(o + 22, 2) == 0);
    CHECK(head == (int32_t)st && st >= 0 && st < PER_STATUS_COUNT);
    CHECK(PER_NET_REPLY_HEADER + msg <= n);
    CHECK(st == PER_OK ? msg == 0 : msg > 0 && n == PER_NET_REPLY_HEADER + msg);
    if (len >= 17 && memcmp(req, "PERQ", 4) == 0) {
      CHECK(net_le(o + 6, 2) == net_le(req + 6, 2) &&
            net_le(o + 8, 8) == net_le(req + 8, 8));
    } else {
      CHECK(st == PER_ERR_FORMAT && net_le(o + 6, 2) == 0 &&
            net_le(o + 8, 8) == 0);
    }
    CHECK(s.requests == requests + 1 && s.refused == refused + (st != PER_OK));
    for (k = 0; k < 2; ++k) {
      per_net_table *t = s.tables[k];
      int named = len >= 17 && len >= 17u + req[16] &&
                  per_net_find(&s, (const char *)req + 17, req[16]) == t;
      if (st != PER_OK) {
        CHECK_UNCHANGED(before[k], &t->buf);
        CHECK(t->inserts == counts[k][0] && t->samples == counts[k][1] &&
              t->updates == counts[k][2] && t->refused <= counts[k][3] + 1 &&
              t->items_in == counts[k][4] && t->items_out == counts[k][5]);
      } else {
        (void)bsnap_same(&before[k], &t->buf);
        CHECK(t->refused == counts[k][3] && t->items_in >= counts[k][4] &&
              t->items_out >= counts[k][5]);
        if (named) check_applied(t, req, len, o, n);
      }
      CHECK_OK(per_buffer_check(&t->buf));
    }
    if (t_fail_count) break;
  }
  per_net_free(&s);
  fuzz_assert_clean("fuzz_net");
  return 0;
}
