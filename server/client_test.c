/* The tests of per_net.h's client (per_net_client) against the built
   per-server and against a fake server.

     server-client-test PER_SERVER

   1. A fake server (a forked child with a ROUTER socket, answering by
      the table a request names) for what a real server does not do on
      demand: busy replies (retried with the same request id, or
      PER_ERR_BUSY after timeout_ms), replies of other ids (dropped), a
      late reply (PER_ERR_IO; the next call is served on a new socket),
      a message longer than c->error, replies of the wrong shape
      (PER_ERR_FORMAT, nothing written), an INFO body of 80 bytes, and
      a request swallowed once (sent again with the same bytes and
      once-only id on a new socket: answered; without resend PER_ERR_IO).
   2. per-server as a child on tcp://127.0.0.1:* with a plain table, a
      sequence table and a rate-limited one (from a spec file): one
      fixed-seed script of inserts, samples and updates sent through
      per_net_client and applied to a local per_buffer of the same
      config, every output compared bit for bit; the refusals of the
      client (its arguments, nothing sent), of the server (NaN TD:
      PER_ERR_NAN with the buffer's message; HELLO: PER_ERR_MISMATCH at
      open; the rate limiter: PER_ERR_BUSY), an endpoint nobody serves
      (PER_ERR_IO within about timeout_ms); INFO against the local
      buffer.
   3. per-server with --checkpoint stopped and started again under one
      client, one request sent while it was down: served, the tables
      as they were.
   4. per-server with CURVE keys (--curve-keygen, --curve-secret,
      --curve-clients) bound on every address: a listed client served,
      another key, no CURVE or a wrong server key unanswered, bad keys
      refused by the client.
   5. per-server on tcp://[::1]:* (where this machine has an IPv6
      loopback): a client reaches the bracketed address.

   Every wait is bounded (the ready file 10 s, a reply 5 s, an exit
   10 s), and the children are killed on any failure. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#define PER_IMPLEMENTATION
#include "per.h"
#define PER_NET_IMPLEMENTATION
#include "per_net.h"
#include "../tests/t.h"
#include "child.h"

#define REPLY_MS 5000

static pid_t fake = -1; /* the fake server, killed at exit */

static void kill_children(void) {
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    child = -1;
  }
  if (fake > 0) {
    kill(fake, SIGKILL);
    waitpid(fake, NULL, 0);
    fake = -1;
  }
}

/* Milliseconds of a monotonic clock. */
static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- bytes ---- */

static void put_f64(unsigned char *p, double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  put(p, u, 8);
}

/* The script's numbers: splitmix64 from a fixed seed. */
static uint64_t rng_state = 20261129;

static uint64_t rnd(void) {
  uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static void fill(unsigned char *p, size_t n) {
  size_t k;
  for (k = 0; k < n; ++k) p[k] = (unsigned char)(rnd() >> 56);
}

/* A TD error in [-3, 3). */
static float td_of(void) {
  return (float)((double)(rnd() >> 40) / 16777216.0 * 6.0 - 3.0);
}

/* ---- processes ---- */

/* ---- the fake server ---- */

/* A reply: header, then the body (status 0) or the message. */
static void fake_reply(void *s, zmq_msg_t *who, unsigned op, uint64_t id,
                       per_status st, const void *body, size_t n) {
  unsigned char out[2048];
  memcpy(out, "PERR", 4);
  put(out + 4, 1, 2);
  put(out + 6, op, 2);
  put(out + 8, id, 8);
  put(out + 16, (uint64_t)(uint32_t)(int32_t)st, 4);
  put(out + 20, st == PER_OK ? 0 : n, 2);
  put(out + 22, 0, 2);
  if (n > sizeof out - 24) _exit(3);
  if (n) memcpy(out + 24, body, n);
  if (zmq_send(s, zmq_msg_data(who), zmq_msg_size(who), ZMQ_SNDMORE) < 0 ||
      zmq_send(s, out, 24 + n, 0) < 0)
    _exit(3);
}

/* HELLO's table: capacity 16, the item size asked, seed 7, layout
   "fake". */
static size_t fake_table(unsigned char *b, uint32_t item_size) {
  memset(b, 0, 94);
  put(b, 16, 4);
  put(b + 4, item_size, 4);
  put(b + 20, 16, 4);    /* max_unique */
  put_f64(b + 24, 0.6);  /* alpha */
  put_f64(b + 32, 0.4);  /* beta0 */
  put_f64(b + 40, 1.0);  /* beta1 */
  put(b + 48, 1000, 8);  /* beta_steps */
  put_f64(b + 56, 1e-6); /* eps */
  put_f64(b + 64, 1.0);  /* max_priority */
  put_f64(b + 72, 0.9);  /* seq_eta */
  put(b + 80, 7, 8);     /* seed */
  put(b + 88, 4, 2);     /* layout length */
  memcpy(b + 90, "fake", 4);
  return 94;
}

/* INFO's counters: field k (k < 12) holds 100 + k, beta 0.5, the rate
   limiter's 200 .., 0.25 and 1.5. */
static void fake_info(unsigned char *b) {
  unsigned k;
  for (k = 0; k < 4; ++k) put(b + 4 * k, 100 + k, 4);
  for (k = 0; k < 3; ++k) put(b + 16 + 8 * k, 104 + k, 8);
  put_f64(b + 40, 0.5);
  for (k = 0; k < 4; ++k) put(b + 48 + 8 * k, 108 + k, 8);
  for (k = 0; k < 4; ++k) put(b + 80 + 8 * k, 200 + k, 8);
  put_f64(b + 112, 0.25);
  put_f64(b + 120, 1.5);
}

/* Serve on a ROUTER at tcp://127.0.0.1:* (its endpoint written to fd)
   until a request for table "quit", or 30 s without one. The table a
   request names says what it gets. A child: it leaves with _exit, not
   running the parent's atexit. */
static void fake_serve(int fd) {
  void *ctx = zmq_ctx_new(), *s;
  char ep[256];
  size_t eplen = sizeof ep;
  int zero = 0;
  uint64_t busy_id = 0, lost_id = 0;
  unsigned busy_n = 0, late_n = 0;
  unsigned char lost[512]; /* the request "lost" swallowed */
  size_t lost_n = 0;
  if (!ctx) _exit(3);
  s = zmq_socket(ctx, ZMQ_ROUTER);
  if (!s || zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
      zmq_bind(s, "tcp://127.0.0.1:*") != 0 ||
      zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &eplen) != 0)
    _exit(3);
  if (write(fd, ep, strlen(ep) + 1) != (ssize_t)(strlen(ep) + 1)) _exit(3);
  close(fd);
  for (;;) {
    zmq_pollitem_t it;
    zmq_msg_t who, req;
    const unsigned char *r;
    unsigned char b[2048];
    char name[64];
    unsigned op, k;
    uint64_t id;
    memset(&it, 0, sizeof it);
    it.socket = s;
    it.events = ZMQ_POLLIN;
    if (zmq_poll(&it, 1, 30000) != 1) _exit(4);
    zmq_msg_init(&who);
    zmq_msg_init(&req);
    if (zmq_msg_recv(&who, s, 0) < 0 || !zmq_msg_more(&who) ||
        zmq_msg_recv(&req, s, 0) < 0 || zmq_msg_more(&req))
      _exit(3);
    r = (const unsigned char *)zmq_msg_data(&req);
    if (zmq_msg_size(&req) < 17 || memcmp(r, "PERQ", 4) != 0) _exit(3);
    op = (unsigned)get(r + 6, 2);
    id = get(r + 8, 8);
    k = r[16];
    if (k >= sizeof name || zmq_msg_size(&req) < 17 + k) _exit(3);
    memcpy(name, r + 17, k);
    name[k] = 0;
    if (!strcmp(name, "quit")) {
      fake_reply(s, &who, op, id, PER_OK, NULL, 0);
      break;
    }
    if (op == PER_NET_HELLO && strcmp(name, "shorthello") != 0) {
      size_t n = fake_table(b, (uint32_t)get(r + 17 + k, 4));
      if (!strcmp(name, "otherhello")) put(b + 4, 99, 4);
      fake_reply(s, &who, op, id, PER_OK, b, n);
    } else if (op == PER_NET_HELLO) {
      fake_reply(s, &who, op, id, PER_OK, b, 40);
    } else if (!strcmp(name, "busy")) {
      /* busy three times, each with the same request id */
      if (busy_n > 0 && id != busy_id) {
        fake_reply(s, &who, op, id, PER_ERR_CORRUPT, "fake: another id", 16);
      } else if (busy_n < 3) {
        busy_id = id;
        ++busy_n;
        fake_reply(s, &who, op, id, PER_ERR_BUSY, "fake: busy", 10);
      } else {
        busy_n = 0;
        fake_info(b);
        fake_reply(s, &who, op, id, PER_OK, b, 128);
      }
    } else if (!strcmp(name, "lost")) {
      /* each request swallowed the first time; the same bytes again
         answered (a once-only id: bit 63 set), other bytes refused */
      size_t len = zmq_msg_size(&req);
      if (id != lost_id) {
        lost_id = id;
        lost_n = len < sizeof lost ? len : 0;
        memcpy(lost, r, lost_n);
      } else if (len != lost_n || memcmp(lost, r, len) != 0 || !(id >> 63)) {
        fake_reply(s, &who, op, id, PER_ERR_CORRUPT, "fake: not the same", 18);
      } else {
        fake_info(b);
        put(b, 777, 4);
        fake_reply(s, &who, op, id, PER_OK, b, 128);
      }
    } else if (!strcmp(name, "busyall")) {
      fake_reply(s, &who, op, id, PER_ERR_BUSY, "fake: busy, always", 18);
    } else if (!strcmp(name, "stale")) {
      /* two replies of other ids first */
      fake_info(b);
      fake_reply(s, &who, op, id ^ 1u, PER_OK, b, 128);
      fake_reply(s, &who, op, id + 7u, PER_ERR_ARG, "fake: stale", 11);
      put(b, 555, 4);
      fake_reply(s, &who, op, id, PER_OK, b, 128);
    } else if (!strcmp(name, "late")) {
      /* the first request answered after 400 ms, the others at once */
      if (late_n++ == 0) sleep_ms(400);
      fake_info(b);
      fake_reply(s, &who, op, id, PER_OK, b, 128);
    } else if (!strcmp(name, "long")) {
      memset(b, 'x', 1000);
      memcpy(b, "fake: ", 6);
      fake_reply(s, &who, op, id, PER_ERR_ARG, b, 1000);
    } else if (!strcmp(name, "short")) {
      fake_info(b);
      fake_reply(s, &who, op, id, PER_OK, b, op == PER_NET_SAMPLE ? 20 : 50);
    } else if (!strcmp(name, "info80")) {
      fake_info(b);
      fake_reply(s, &who, op, id, PER_OK, b, 80);
    } else if (!strcmp(name, "garbage")) {
      if (zmq_send(s, zmq_msg_data(&who), zmq_msg_size(&who), ZMQ_SNDMORE) <
              0 ||
          zmq_send(s, "garbage, not a reply at all", 27, 0) < 0)
        _exit(3);
    } else if (!strcmp(name, "badop")) {
      fake_info(b);
      fake_reply(s, &who, PER_NET_UPDATE, id, PER_OK, b, 128);
    } else if (!strcmp(name, "sample") && op == PER_NET_SAMPLE) {
      /* a batch of B - 1 where B was asked */
      uint32_t B = (uint32_t)get(r + 17 + k, 4);
      memset(b, 0, sizeof b);
      put(b, B - 1, 4);
      put(b + 4, 1, 4);
      fake_reply(s, &who, op, id, PER_OK, b, 16 + (B - 1) * 12u);
    } else {
      fake_reply(s, &who, op, id, PER_ERR_ARG, "fake: no such op here", 21);
    }
    zmq_msg_close(&who);
    zmq_msg_close(&req);
  }
  zmq_close(s);
  zmq_ctx_term(ctx);
  _exit(0);
}

/* Fork the fake server; its endpoint into ep. */
static void fake_start(char *ep, size_t cap) {
  int fds[2];
  struct pollfd p;
  ssize_t n;
  REQUIRE(pipe(fds) == 0);
  fflush(stdout);
  fflush(stderr);
  fake = fork();
  REQUIRE(fake >= 0);
  if (fake == 0) {
    close(fds[0]);
    fake_serve(fds[1]);
  }
  close(fds[1]);
  p.fd = fds[0];
  p.events = POLLIN;
  REQUIRE(poll(&p, 1, 10000) == 1);
  n = read(fds[0], ep, cap - 1);
  REQUIRE(n > 1 && ep[n - 1] == 0);
  close(fds[0]);
}

static int fake_tests(void) {
  char ep[256];
  per_net_client c;
  per_net_info info;
  uint64_t ids[4] = {1, 2, 3, 4};
  double t0, ms;
  fake_start(ep, sizeof ep);

  /* HELLO's table into the client; INFO's 128 bytes field by field. */
  CHECK_OK(per_net_client_open(&c, ep, "ok", 12, "fake", REPLY_MS));
  CHECK_EQ_U(c.item_size, 12);
  CHECK_EQ_U(c.seq_len, 0);
  CHECK_EQ_U(c.table_cfg.capacity, 16);
  CHECK_EQ_U(c.table_cfg.item_size, 12);
  CHECK_EQ_U(c.table_cfg.max_unique, 16);
  CHECK_EQ_U(c.table_cfg.beta_steps, 1000);
  CHECK_EQ_U(c.table_cfg.seed, 7);
  CHECK_EQ_F(c.table_cfg.alpha, 0.6);
  CHECK_EQ_F(c.table_cfg.eps, 1e-6);
  CHECK_EQ_F(c.table_cfg.seq_eta, 0.9);
  CHECK(strcmp(c.layout, "fake") == 0);
  CHECK_EQ_U(c.requests, 1);
  CHECK_EQ_U(c.busy_wait, 1);
  CHECK_EQ_U(c.max_message, PER_NET_MAX_MESSAGE);
  CHECK(c.error[0] == 0);
  /* a request the fake refuses: its message */
  CHECK_STATUS(per_net_client_info(&c, &info), PER_ERR_ARG);
  CHECK(strcmp(c.error, "fake: no such op here") == 0);
  per_net_client_close(&c);

  /* Busy three times: sent again with the same id (else the fake says
     PER_ERR_CORRUPT), then answered. */
  CHECK_OK(per_net_client_open(&c, ep, "busy", 8, NULL, REPLY_MS));
  memset(&info, 0, sizeof info);
  CHECK_OK(per_net_client_info(&c, &info));
  CHECK_EQ_U(c.retries, 3);
  CHECK_EQ_U(c.requests, 2);
  CHECK_EQ_U(info.capacity, 100);
  CHECK_EQ_U(info.item_size, 101);
  CHECK_EQ_U(info.size, 102);
  CHECK_EQ_U(info.seq_len, 103);
  CHECK_EQ_U(info.added, 104);
  CHECK_EQ_U(info.trajectories, 105);
  CHECK_EQ_U(info.step, 106);
  CHECK_EQ_F(info.beta, 0.5);
  CHECK_EQ_U(info.inserts, 108);
  CHECK_EQ_U(info.samples, 109);
  CHECK_EQ_U(info.updates, 110);
  CHECK_EQ_U(info.refused, 111);
  CHECK_EQ_U(info.items_inserted, 200);
  CHECK_EQ_U(info.items_sampled, 201);
  CHECK_EQ_U(info.busy, 202);
  CHECK_EQ_U(info.min_size, 203);
  CHECK_EQ_F(info.samples_per_insert, 0.25);
  CHECK_EQ_F(info.error_margin, 1.5);
  /* without busy_wait: PER_ERR_BUSY at once */
  c.busy_wait = 0;
  memset(&info, 0xCD, sizeof info);
  CHECK_STATUS(per_net_client_info(&c, &info), PER_ERR_BUSY);
  CHECK(strcmp(c.error, "fake: busy") == 0);
  CHECK_EQ_U(c.retries, 3);
  CHECK_EQ_U(info.capacity, 0xCDCDCDCDu); /* nothing written */
  per_net_client_close(&c);

  /* Always busy: PER_ERR_BUSY after about timeout_ms. */
  CHECK_OK(per_net_client_open(&c, ep, "busyall", 8, NULL, REPLY_MS));
  c.timeout_ms = 200;
  t0 = now_ms();
  CHECK_STATUS(per_net_client_info(&c, &info), PER_ERR_BUSY);
  ms = now_ms() - t0;
  CHECK_MSG(ms >= 120 && ms < 2000, "busy for %.0f ms, timeout 200", ms);
  CHECK(strcmp(c.error, "fake: busy, always") == 0);
  CHECK_MSG(c.retries >= 3, "%u retries", (unsigned)c.retries);
  per_net_client_close(&c);

  /* Replies of other ids dropped. */
  CHECK_OK(per_net_client_open(&c, ep, "stale", 8, NULL, REPLY_MS));
  CHECK_OK(per_net_client_info(&c, &info));
  CHECK_EQ_U(info.capacity, 555);
  CHECK_EQ_U(c.dropped, 2);
  per_net_client_close(&c);

  /* A late reply: PER_ERR_IO; the next call on a new socket. */
  CHECK_OK(per_net_client_open(&c, ep, "late", 8, NULL, REPLY_MS));
  c.timeout_ms = 150;
  t0 = now_ms();
  CHECK_STATUS(per_net_client_info(&c, &info), PER_ERR_IO);
  ms = now_ms() - t0;
  CHECK_MSG(ms >= 140 && ms < 2000, "no reply after %.0f ms, timeout 150", ms);
  CHECK_STR(c.error, "per_net_client_info: no reply within 150 ms from tcp://");
  CHECK(c.sock != NULL);
  c.timeout_ms = REPLY_MS;
  CHECK_OK(per_net_client_info(&c, &info));
  CHECK_EQ_U(info.capacity, 100);
  CHECK_EQ_U(c.dropped, 0); /* the late reply went to the old socket */
  per_net_client_close(&c);

  /* No reply: sent once more (its bytes and once-only id) on a new
     socket, and answered; without resend, PER_ERR_IO. */
  CHECK_OK(per_net_client_open(&c, ep, "lost", 8, NULL, REPLY_MS));
  CHECK(c.next_id >> 63);
  CHECK_EQ_U(c.resend, 1);
  c.timeout_ms = 200;
  t0 = now_ms();
  CHECK_OK(per_net_client_info(&c, &info));
  ms = now_ms() - t0;
  CHECK_EQ_U(info.capacity, 777);
  CHECK_EQ_U(c.resent, 1);
  CHECK_MSG(ms >= 190 && ms < 2000, "answered after %.0f ms", ms);
  c.resend = 0;
  CHECK_STATUS(per_net_client_info(&c, &info), PER_ERR_IO);
  CHECK_EQ_U(c.resent, 1);
  per_net_client_close(&c);

  /* A message longer than c->error: cut, NUL-terminated. */
  CHECK_OK(per_net_client_open(&c, ep, "long", 8, NULL, REPLY_MS));
  CHECK_STATUS(per_net_client_info(&c, &info), PER_ERR_ARG);
  CHECK_EQ_U(strlen(c.error), sizeof c.error - 1);
  CHECK_STR(c.error, "fake: xxxx");
  per_net_client_close(&c);

  /* Replies of the wrong shape: PER_ERR_FORMAT, nothing written. */
  CHECK_OK(per_net_client_open(&c, ep, "short", 8, NULL, REPLY_MS));
  memset(&info, 0xCD, sizeof info);
  CHECK_STATUS(per_net_client_info(&c, &info), PER_ERR_FORMAT);
  CHECK_EQ_U(info.capacity, 0xCDCDCDCDu);
  CHECK_STR(c.error, "per_net_client_info: a reply's body of 50 bytes");
  CHECK_STATUS(per_net_client_sample(&c, 1, NULL, NULL, ids, NULL, NULL),
               PER_ERR_FORMAT);
  CHECK_EQ_U(ids[0], 1);
  per_net_client_close(&c);
  CHECK_OK(per_net_client_open(&c, ep, "sample", 8, NULL, REPLY_MS));
  CHECK_STATUS(per_net_client_sample(&c, 4, NULL, NULL, ids, NULL, NULL),
               PER_ERR_FORMAT);
  CHECK_EQ_U(ids[0], 1);
  CHECK_EQ_U(ids[3], 4);
  per_net_client_close(&c);
  CHECK_OK(per_net_client_open(&c, ep, "garbage", 8, NULL, REPLY_MS));
  CHECK_STATUS(per_net_client_info(&c, &info), PER_ERR_FORMAT);
  CHECK(strstr(c.error, "not per's") != NULL);
  per_net_client_close(&c);
  CHECK_OK(per_net_client_open(&c, ep, "badop", 8, NULL, REPLY_MS));
  CHECK_STATUS(per_net_client_info(&c, &info), PER_ERR_FORMAT);
  CHECK(strstr(c.error, "op 4") != NULL);
  per_net_client_close(&c);
  CHECK_STATUS(per_net_client_open(&c, ep, "shorthello", 8, NULL, REPLY_MS),
               PER_ERR_FORMAT);
  CHECK(c.ctx == NULL && c.sock == NULL && c.buf == NULL);
  CHECK_STR(c.error, "per_net_client_open: a reply's body of 40 bytes");
  per_net_client_close(&c);
  CHECK_STATUS(per_net_client_open(&c, ep, "otherhello", 8, NULL, REPLY_MS),
               PER_ERR_FORMAT);
  per_net_client_close(&c);

  /* An INFO body of 80 bytes (a server without the rate limiter). */
  CHECK_OK(per_net_client_open(&c, ep, "info80", 8, NULL, REPLY_MS));
  memset(&info, 0xCD, sizeof info);
  CHECK_OK(per_net_client_info(&c, &info));
  CHECK_EQ_U(info.refused, 111);
  CHECK_EQ_U(info.items_inserted, 0);
  CHECK_EQ_U(info.min_size, 0);
  CHECK_EQ_F(info.error_margin, 0);
  per_net_client_close(&c);

  /* The fake stops (its last reply has no table: PER_ERR_FORMAT). */
  CHECK_STATUS(per_net_client_open(&c, ep, "quit", 8, NULL, REPLY_MS),
               PER_ERR_FORMAT);
  per_net_client_close(&c);
  CHECK_EQ_U(finish(fake), 0);
  fake = -1;
  return 0;
}

/* ---- the real server against a local per_buffer ---- */

/* A table: its client, the local buffer of the same config, and what the
   server's INFO should count. */
typedef struct table_ref {
  per_net_client c;
  per_buffer b;
  uint64_t inserts, samples, updates, refused, items_in, items_out;
  uint64_t ids[64]; /* the last sample's */
  uint32_t nids;
} table_ref;

/* Both statuses equal; when refused, the messages too (the server's is
   the buffer's error) and the counts. */
static int same(table_ref *t, per_status sc, per_status sb, const char *what) {
  CHECK_MSG(sc == sb, "%s: client %s, local %s (%s)", what, per_status_str(sc),
            per_status_str(sb), t->c.error);
  if (sb != PER_OK) {
    ++t->refused;
    CHECK_MSG(strcmp(t->c.error, t->b.error) == 0, "%s: \"%s\" vs \"%s\"", what,
              t->c.error, t->b.error);
  }
  return sc == sb && sb == PER_OK;
}

static void ins(table_ref *t, uint32_t n, const uint8_t *ends, int with_td,
                int nan_at, const char *what) {
  size_t isz = t->b.cfg.item_size;
  unsigned char *items = (unsigned char *)malloc(n * isz);
  float *td = (float *)malloc(n * sizeof(float));
  uint64_t traj = 777, want = t->b.trajs;
  uint32_t j;
  per_status sc, sb;
  REQUIRE(items && td);
  fill(items, n * isz);
  for (j = 0; j < n; ++j) td[j] = td_of();
  if (nan_at >= 0) td[nan_at] = (float)NAN;
  sc = per_net_client_insert(&t->c, items, n, ends, with_td ? td : NULL, &traj);
  sb = with_td ? per_buffer_add_td(&t->b, items, n, ends, td)
               : per_buffer_add_steps(&t->b, items, n, ends);
  if (same(t, sc, sb, what)) {
    CHECK_EQ_U(traj, want);
    ++t->inserts;
    t->items_in += n;
  } else {
    CHECK_EQ_U(traj, 777);
  }
  free(items);
  free(td);
}

static void smp(table_ref *t, uint32_t B, uint32_t flags, double beta,
                uint32_t window, int items, const char *what) {
  size_t s = (flags & PER_SAMPLE_SEQUENCES) ? t->b.cfg.seq_len : 1;
  size_t n = B * s * t->b.cfg.item_size;
  unsigned char *ic = (unsigned char *)malloc(n + 1);
  unsigned char *ib = (unsigned char *)malloc(n + 1);
  unsigned char *mc = (unsigned char *)malloc(B * s + 1);
  unsigned char *mb = (unsigned char *)malloc(B * s + 1);
  uint64_t *idc = (uint64_t *)malloc(B * 8), *idb = (uint64_t *)malloc(B * 8);
  float *wc = (float *)malloc(B * 4), *wb = (float *)malloc(B * 4);
  double bc = -1, bb;
  per_sample_opts oc, ob;
  per_status sc, sb;
  REQUIRE(ic && ib && mc && mb && idc && idb && wc && wb && B <= 64);
  memset(ic, 0xAB, n + 1);
  memset(ib, 0xAB, n + 1);
  memset(mc, 0xAB, B * s);
  memset(mb, 0xAB, B * s);
  memset(idc, 0xAB, B * 8);
  memset(&oc, 0, sizeof oc);
  oc.flags = flags;
  oc.beta = beta;
  oc.window = window;
  ob = oc;
  if (flags & PER_SAMPLE_SEQUENCES) {
    oc.mask = mc;
    ob.mask = mb;
  }
  bb = (flags & PER_SAMPLE_BETA) ? beta : per_buffer_beta(&t->b);
  sc = per_net_client_sample(&t->c, B, &oc, items ? ic : NULL, idc, wc, &bc);
  sb = per_buffer_sample(&t->b, B, &ob, items ? ib : NULL, idb, wb);
  if (same(t, sc, sb, what)) {
    CHECK_MEM(ic, ib, n + 1);
    CHECK_MEM(idc, idb, B * 8);
    CHECK_MEM(wc, wb, B * 4);
    CHECK_MEM(&bc, &bb, sizeof bb);
    if (flags & PER_SAMPLE_SEQUENCES) CHECK_MEM(mc, mb, B * s);
    ++t->samples;
    t->items_out += B;
    memcpy(t->ids, idc, B * 8);
    t->nids = B;
  } else {
    CHECK_EQ_U(idc[0], UINT64_C(0xABABABABABABABAB));
    CHECK_EQ_F(bc, -1);
  }
  free(ic);
  free(ib);
  free(mc);
  free(mb);
  free(idc);
  free(idb);
  free(wc);
  free(wb);
}

/* An update of t's last sample's ids; its stale count. */
static uint32_t upd(table_ref *t, int seq, int nan_at, const char *what) {
  uint32_t k = seq ? t->b.cfg.seq_len : 1, n = t->nids, j;
  float *td = (float *)malloc(n * k * sizeof(float));
  uint32_t sc_stale = 999, sb_stale = 998;
  per_status sc, sb;
  REQUIRE(td && n > 0);
  for (j = 0; j < n * k; ++j) td[j] = td_of();
  if (nan_at >= 0) td[nan_at] = (float)NAN;
  sc = per_net_client_update(&t->c, t->ids, td, n, seq, &sc_stale);
  sb = seq ? per_buffer_update_seq(&t->b, t->ids, td, n, &sb_stale)
           : per_buffer_update(&t->b, t->ids, td, n, &sb_stale);
  if (same(t, sc, sb, what)) {
    CHECK_EQ_U(sc_stale, sb_stale);
    ++t->updates;
  } else {
    CHECK_EQ_U(sc_stale, 999);
  }
  free(td);
  return sb_stale;
}

/* INFO against the local buffer and the counts. */
static void inf(table_ref *t) {
  per_net_info i;
  double beta = per_buffer_beta(&t->b);
  memset(&i, 0xCD, sizeof i);
  CHECK_OK(per_net_client_info(&t->c, &i));
  CHECK_EQ_U(i.capacity, t->b.cfg.capacity);
  CHECK_EQ_U(i.item_size, t->b.cfg.item_size);
  CHECK_EQ_U(i.size, t->b.size);
  CHECK_EQ_U(i.seq_len, t->b.cfg.seq_len);
  CHECK_EQ_U(i.added, t->b.added);
  CHECK_EQ_U(i.trajectories, t->b.trajs);
  CHECK_EQ_U(i.step, t->b.step);
  CHECK_MEM(&i.beta, &beta, sizeof beta);
  CHECK_EQ_U(i.inserts, t->inserts);
  CHECK_EQ_U(i.samples, t->samples);
  CHECK_EQ_U(i.updates, t->updates);
  CHECK_EQ_U(i.refused, t->refused);
  CHECK_EQ_U(i.items_inserted, t->items_in);
  CHECK_EQ_U(i.items_sampled, t->items_out);
  CHECK_EQ_U(i.busy, 0);
}

/* The client's table config equals the local buffer's. */
static void same_cfg(const per_config *a, const per_config *b) {
  CHECK_EQ_U(a->capacity, b->capacity);
  CHECK_EQ_U(a->item_size, b->item_size);
  CHECK_EQ_F(a->alpha, b->alpha);
  CHECK_EQ_F(a->beta0, b->beta0);
  CHECK_EQ_F(a->beta1, b->beta1);
  CHECK_EQ_U(a->beta_steps, b->beta_steps);
  CHECK_EQ_F(a->eps, b->eps);
  CHECK_EQ_F(a->max_priority, b->max_priority);
  CHECK_EQ_U(a->seed, b->seed);
  CHECK_EQ_U(a->flags, b->flags);
  CHECK_EQ_U(a->max_unique, b->max_unique);
  CHECK_EQ_U(a->seq_len, b->seq_len);
  CHECK_EQ_U(a->seq_stride, b->seq_stride);
  CHECK_EQ_F(a->seq_eta, b->seq_eta);
}

/* The client's refusals of its own arguments: nothing sent. */
static void bad_args(table_ref *p, const char *ep) {
  per_net_client *c = &p->c, z;
  per_net_info info;
  unsigned char item[12] = {0};
  uint64_t id = 1;
  float td = 1;
  uint64_t sent = c->requests;
  char layout[600];
  CHECK_STATUS(per_net_client_insert(NULL, item, 1, NULL, NULL, NULL),
               PER_ERR_NULL);
  CHECK_STATUS(per_net_client_insert(c, NULL, 1, NULL, NULL, NULL),
               PER_ERR_NULL);
  CHECK_STR(c->error, "per_net_client_insert: items is NULL");
  CHECK_STATUS(per_net_client_insert(c, item, 0, NULL, NULL, NULL),
               PER_ERR_BATCH);
  CHECK_STR(c->error, "per_net_client_insert: n is 0");
  CHECK_STATUS(per_net_client_sample(NULL, 1, NULL, NULL, NULL, NULL, NULL),
               PER_ERR_NULL);
  CHECK_STATUS(per_net_client_sample(c, 0, NULL, NULL, NULL, NULL, NULL),
               PER_ERR_BATCH);
  CHECK_STR(c->error, "per_net_client_sample: B is 0");
  CHECK_STATUS(per_net_client_update(NULL, &id, &td, 1, 0, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_net_client_update(c, NULL, &td, 1, 0, NULL), PER_ERR_NULL);
  CHECK_STR(c->error, "per_net_client_update: ids or td is NULL");
  CHECK_STATUS(per_net_client_update(c, &id, NULL, 1, 0, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_net_client_update(c, &id, &td, 0, 0, NULL), PER_ERR_BATCH);
  CHECK_STR(c->error, "per_net_client_update: n is 0");
  CHECK_STATUS(per_net_client_update(c, &id, &td, 1, 2, NULL), PER_ERR_ARG);
  CHECK_STR(c->error, "per_net_client_update: sequences is 0 or 1");
  CHECK_STATUS(per_net_client_update(c, &id, &td, 1, 1, NULL), PER_ERR_ARG);
  CHECK_STR(c->error, "per_net_client_update: sequences: table \"plain\" has "
                      "no sequences");
  CHECK_STATUS(per_net_client_info(NULL, &info), PER_ERR_NULL);
  CHECK_STATUS(per_net_client_info(c, NULL), PER_ERR_NULL);
  CHECK_STR(c->error, "per_net_client_info: info is NULL");
  c->timeout_ms = 0;
  CHECK_STATUS(per_net_client_info(c, &info), PER_ERR_ARG);
  CHECK_STR(c->error, "per_net_client_info: timeout_ms is 0 or negative");
  c->timeout_ms = REPLY_MS;
  c->max_message = 100;
  CHECK_STATUS(per_net_client_insert(c, item, 10, NULL, NULL, NULL),
               PER_ERR_BATCH);
  CHECK_STR(c->error, "per_net_client_insert: a request of 150 bytes is "
                      "larger than max_message 100");
  c->max_message = PER_NET_MAX_MESSAGE;
  CHECK_EQ_U(c->requests, sent);

  /* open's */
  CHECK_STATUS(per_net_client_open(NULL, ep, "plain", 12, NULL, 100),
               PER_ERR_NULL);
  CHECK_STATUS(per_net_client_open(&z, NULL, "plain", 12, NULL, 100),
               PER_ERR_NULL);
  CHECK_STR(z.error, "per_net_client_open: endpoint or table is NULL");
  CHECK_STATUS(per_net_client_open(&z, ep, NULL, 12, NULL, 100), PER_ERR_NULL);
  CHECK_STATUS(per_net_client_open(&z, ep, "", 12, NULL, 100), PER_ERR_ARG);
  CHECK_STR(z.error, "per_net_client_open: a table's name is 1 to 63 bytes");
  memset(layout, 'n', 64);
  layout[64] = 0;
  CHECK_STATUS(per_net_client_open(&z, ep, layout, 12, NULL, 100), PER_ERR_ARG);
  CHECK_STR(z.error, "per_net_client_open: a table's name is 1 to 63 bytes "
                     "without control characters, not one of 64 bytes");
  CHECK_STATUS(per_net_client_open(&z, ep, "tab\tle", 12, NULL, 100),
               PER_ERR_ARG);
  CHECK_STATUS(per_net_client_open(&z, ep, "plain", 12, NULL, 0), PER_ERR_ARG);
  CHECK_STR(z.error, "per_net_client_open: timeout_ms is 0 or negative");
  CHECK_STATUS(per_net_client_open(&z, ep, "plain", 12, NULL, -5), PER_ERR_ARG);
  memset(layout, 'f', sizeof layout - 1);
  layout[sizeof layout - 1] = 0;
  CHECK_STATUS(per_net_client_open(&z, ep, "plain", 12, layout, 100),
               PER_ERR_ARG);
  CHECK_STR(z.error, "per_net_client_open: the layout has 599 chars");
  CHECK(z.ctx == NULL && z.endpoint == NULL);
  CHECK_STATUS(per_net_client_open(&z, "bogus://where", "plain", 12, NULL, 100),
               PER_ERR_ARG);
  CHECK_STR(z.error,
            "per_net_client_open: cannot connect to \"bogus://where\"");
  CHECK(z.ctx == NULL && z.sock == NULL && z.endpoint == NULL);
  per_net_client_close(&z);
  per_net_client_close(&z); /* twice: fine */
  per_net_client_close(NULL);
  /* a closed client */
  CHECK_STATUS(per_net_client_info(&z, &info), PER_ERR_ARG);
  CHECK_STR(z.error, "per_net_client_info: the client is not open");
  CHECK_STATUS(per_net_client_insert(&z, item, 1, NULL, NULL, NULL),
               PER_ERR_ARG);
  CHECK_STATUS(per_net_client_update(&z, &id, &td, 1, 1, NULL), PER_ERR_ARG);
  CHECK_STR(z.error, "per_net_client_update: the client is not open");
}

static int server_tests(void) {
  static const char spec_text[] = "table lim\n"
                                  "capacity 16\n"
                                  "item_size 4\n"
                                  "min_size 4\n";
  char ready[128], spec_path[128], ep[256], nobody[160];
  const char *args[64];
  static table_ref plain, seq;
  per_config pc = per_config_default(64, 12), sc = per_config_default(64, 8);
  per_net_client z;
  per_net_info info;
  uint8_t ends[12];
  double t0, ms;
  FILE *f;
  int k = 0;

  snprintf(ready, sizeof ready, "%s/ready", dir);
  snprintf(spec_path, sizeof spec_path, "%s/lim.spec", dir);
  snprintf(nobody, sizeof nobody, "ipc://%s/nobody", dir);
  f = fopen(spec_path, "w");
  REQUIRE(f != NULL);
  REQUIRE(fputs(spec_text, f) >= 0 && fclose(f) == 0);
  args[k++] = "--bind";
  args[k++] = "tcp://127.0.0.1:*";
  args[k++] = "--ready-file";
  args[k++] = ready;
  args[k++] = "--quiet";
  args[k++] = "--table";
  args[k++] = "plain";
  args[k++] = "--capacity";
  args[k++] = "64";
  args[k++] = "--item-size";
  args[k++] = "12";
  args[k++] = "--alpha";
  args[k++] = "0.7";
  args[k++] = "--seed";
  args[k++] = "11";
  args[k++] = "--layout";
  args[k++] = "<u4(3)";
  args[k++] = "--table";
  args[k++] = "seq";
  args[k++] = "--capacity";
  args[k++] = "64";
  args[k++] = "--item-size";
  args[k++] = "8";
  args[k++] = "--seq-len";
  args[k++] = "4";
  args[k++] = "--seq-stride";
  args[k++] = "2";
  args[k++] = "--flags";
  args[k++] = "seq_cross_episodes";
  args[k++] = "--seed";
  args[k++] = "5";
  args[k++] = "--spec";
  args[k++] = spec_path;
  args[k++] = NULL;
  child = start(args, NULL, NULL);
  line_of(wait_ready(ready, NULL), 0, ep, sizeof ep);

  pc.alpha = 0.7;
  pc.seed = 11;
  sc.seq_len = 4;
  sc.seq_stride = 2;
  sc.flags = PER_SEQ_CROSS_EPISODES;
  sc.seed = 5;
  REQUIRE(per_buffer_init(&plain.b, &pc, NULL) == PER_OK);
  REQUIRE(per_buffer_init(&seq.b, &sc, NULL) == PER_OK);

  /* HELLO: another item size or layout, no such table. */
  CHECK_STATUS(per_net_client_open(&z, ep, "plain", 13, NULL, REPLY_MS),
               PER_ERR_MISMATCH);
  CHECK_STR(z.error, "hello: table \"plain\" has items of 12 bytes, layout "
                     "\"<u4(3)\"; the client's are 13 bytes");
  CHECK(z.ctx == NULL);
  CHECK_STATUS(per_net_client_open(&z, ep, "plain", 12, "<f4(3)", REPLY_MS),
               PER_ERR_MISMATCH);
  plain.refused += 2;
  CHECK_STATUS(per_net_client_open(&z, ep, "nope", 12, NULL, REPLY_MS),
               PER_ERR_INDEX);
  CHECK_STR(z.error, "request: no table named \"nope\"");
  per_net_client_close(&z);

  /* Nobody serving: PER_ERR_IO after about timeout_ms. */
  t0 = now_ms();
  CHECK_STATUS(per_net_client_open(&z, nobody, "plain", 12, NULL, 200),
               PER_ERR_IO);
  ms = now_ms() - t0;
  CHECK_MSG(ms >= 190 && ms < 2000, "open's timeout after %.0f ms", ms);
  CHECK_STR(z.error, "per_net_client_open: no reply within 200 ms from ipc://");
  CHECK(z.ctx == NULL && z.sock == NULL);

  /* The plain table, with its layout; the sequence table learning its
     item size. */
  CHECK_OK(per_net_client_open(&plain.c, ep, "plain", 12, "<u4(3)", REPLY_MS));
  same_cfg(&plain.c.table_cfg, &pc);
  CHECK(strcmp(plain.c.layout, "<u4(3)") == 0);
  CHECK_OK(per_net_client_open(&seq.c, ep, "seq", 0, NULL, REPLY_MS));
  CHECK_EQ_U(seq.c.item_size, 8);
  CHECK_EQ_U(seq.c.seq_len, 4);
  CHECK_EQ_U(seq.c.requests, 2); /* INFO, HELLO */
  same_cfg(&seq.c.table_cfg, &sc);
  CHECK(seq.c.layout[0] == 0);
  bad_args(&plain, ep);

  /* The plain table's script. */
  memset(ends, 0, sizeof ends);
  ins(&plain, 10, NULL, 0, -1, "insert");
  ends[3] = PER_END_TRUNCATED;
  ends[6] = PER_END_TERMINATED;
  ins(&plain, 7, ends, 0, -1, "insert with ends");
  ins(&plain, 5, NULL, 1, -1, "insert with td");
  ends[3] = 0;
  ends[5] = PER_END_TERMINATED;
  ins(&plain, 6, ends, 1, -1, "insert with ends and td");
  ins(&plain, 4, NULL, 1, 2, "insert with a NaN td");
  ends[0] = 9;
  ins(&plain, 6, ends, 0, -1, "insert with a bad end");
  ends[0] = 0;
  smp(&plain, 8, 0, 0, 0, 1, "sample");
  upd(&plain, 0, -1, "update");
  smp(&plain, 6, PER_SAMPLE_UNIQUE, 0, 0, 1, "sample unique");
  upd(&plain, 0, 3, "update with a NaN td");
  upd(&plain, 0, -1, "update");
  smp(&plain, 5, PER_SAMPLE_BETA, 0.5, 0, 1, "sample beta 0.5");
  smp(&plain, 5, 0, 0.5, 0, 1, "sample beta without its flag");
  smp(&plain, 7, 0, 0, 10, 1, "sample window 10");
  smp(&plain, 7, PER_SAMPLE_TRAJECTORIES, 0, 2, 1, "sample trajectories 2");
  smp(&plain, 9, PER_SAMPLE_UNIQUE | PER_SAMPLE_BETA, 1.25, 0, 0,
      "sample unique, beta, no items");
  upd(&plain, 0, -1, "update after a sample without items");
  smp(&plain, 3, PER_SAMPLE_SEQUENCES, 0, 0, 1, "sample sequences, none");
  smp(&plain, 60, PER_SAMPLE_UNIQUE, 0, 0, 1, "sample unique, too few");
  smp(&plain, 12, 0, 0, 0, 1, "sample");
  ins(&plain, 40, NULL, 0, -1, "insert 40");
  ins(&plain, 30, NULL, 1, -1, "insert 30: every old item overwritten");
  CHECK_MSG(upd(&plain, 0, -1, "update of stale ids") == 12,
            "12 stale ids expected");
  smp(&plain, 4, 0, 0, 0, 1, "sample");
  inf(&plain);

  /* The sequence table's script. */
  memset(ends, 0, sizeof ends);
  ends[5] = PER_END_TERMINATED;
  ins(&seq, 12, ends, 0, -1, "seq: insert with ends");
  ins(&seq, 10, NULL, 1, -1, "seq: insert with td");
  smp(&seq, 5, PER_SAMPLE_SEQUENCES, 0, 0, 1, "seq: sample sequences");
  upd(&seq, 1, -1, "seq: update sequences");
  smp(&seq, 2, PER_SAMPLE_SEQUENCES | PER_SAMPLE_UNIQUE, 0, 8, 1,
      "seq: sample unique sequences in a window");
  upd(&seq, 1, 5, "seq: update sequences with a NaN td");
  smp(&seq, 6, PER_SAMPLE_SEQUENCES | PER_SAMPLE_BETA, 0.75, 0, 0,
      "seq: sample sequences, no items");
  upd(&seq, 1, -1, "seq: update sequences");
  upd(&seq, 0, -1, "seq: update sequence ids as items");
  smp(&seq, 4, 0, 0, 0, 1, "seq: sample items");
  upd(&seq, 0, -1, "seq: update items");
  ins(&seq, 64, NULL, 0, -1, "seq: insert 64");
  smp(&seq, 3, PER_SAMPLE_SEQUENCES, 0, 0, 1, "seq: sample sequences");
  ins(&seq, 64, NULL, 0, -1, "seq: insert 64");
  CHECK_MSG(upd(&seq, 1, -1, "seq: update stale sequences") == 3,
            "3 stale sequences expected");
  inf(&seq);
  CHECK_EQ_U(seq.c.dropped, 0);
  CHECK_EQ_U(plain.c.dropped, 0);

  /* The rate limiter: min_size 4, an empty table. */
  CHECK_OK(per_net_client_open(&z, ep, "lim", 4, NULL, REPLY_MS));
  z.timeout_ms = 150;
  t0 = now_ms();
  CHECK_STATUS(per_net_client_sample(&z, 1, NULL, NULL, NULL, NULL, NULL),
               PER_ERR_BUSY);
  ms = now_ms() - t0;
  CHECK_MSG(ms >= 100 && ms < 2000, "busy for %.0f ms, timeout 150", ms);
  CHECK_MSG(strstr(z.error, "busy") && strstr(z.error, "\"lim\""), "%s",
            z.error); /* the server's message */
  CHECK(z.retries >= 3);
  z.busy_wait = 0;
  CHECK_STATUS(per_net_client_sample(&z, 1, NULL, NULL, NULL, NULL, NULL),
               PER_ERR_BUSY);
  {
    unsigned char items[16] = {0};
    uint64_t ids[2];
    CHECK_OK(per_net_client_insert(&z, items, 4, NULL, NULL, NULL));
    CHECK_OK(per_net_client_sample(&z, 2, NULL, NULL, ids, NULL, NULL));
  }
  CHECK_OK(per_net_client_info(&z, &info));
  CHECK_EQ_U(info.min_size, 4);
  CHECK_EQ_U(info.busy, z.retries + 2);
  CHECK_EQ_U(info.refused, z.retries + 2);
  CHECK_EQ_U(info.items_inserted, 4);
  CHECK_EQ_U(info.items_sampled, 2);
  per_net_client_close(&z);

  per_net_client_close(&plain.c);
  per_net_client_close(&seq.c);
  per_buffer_free(&plain.b);
  per_buffer_free(&seq.b);
  REQUIRE(kill(child, SIGTERM) == 0);
  CHECK_EQ_U(finish(child), 0);
  child = -1;
  remove(spec_path);
  return 0;
}

static void at_exit(void) {
  kill_children();
  if (dir[0]) {
    char p[128];
    snprintf(p, sizeof p, "%s/ready", dir);
    remove(p);
    snprintf(p, sizeof p, "%s/lim.spec", dir);
    remove(p);
    snprintf(p, sizeof p, "%s/nobody", dir);
    remove(p);
    rmdir(dir);
  }
}

/* A client across per-server's restarts on --checkpoint: its requests
   served after each with no code of its own, one of them sent while the
   server was down (queued, delivered once it is back). */
static void restart_tests(void) {
  char ready[128], ep[160], ck[128], p[192];
  const char *args[20];
  unsigned char items[5 * 8];
  per_net_client c;
  per_net_info info;
  uint64_t traj;
  int k = 0;
  snprintf(ready, sizeof ready, "%s/ready", dir);
  snprintf(ep, sizeof ep, "ipc://%s/rs", dir);
  snprintf(ck, sizeof ck, "%s/ck", dir);
  args[k++] = "--bind";
  args[k++] = ep;
  args[k++] = "--ready-file";
  args[k++] = ready;
  args[k++] = "--quiet";
  args[k++] = "--table";
  args[k++] = "r";
  args[k++] = "--capacity";
  args[k++] = "64";
  args[k++] = "--item-size";
  args[k++] = "8";
  args[k++] = "--checkpoint";
  args[k++] = ck;
  args[k++] = NULL;
  fill(items, sizeof items);
  child = start(args, NULL, NULL);
  wait_ready(ready, NULL);
  CHECK_OK(per_net_client_open(&c, ep, "r", 8, NULL, REPLY_MS));
  CHECK_OK(per_net_client_insert(&c, items, 3, NULL, NULL, &traj));
  CHECK_EQ_U(traj, 0);
  REQUIRE(kill(child, SIGTERM) == 0);
  CHECK_EQ_U(finish(child), 0);
  child = -1;
  /* down: this insert waits in the client's queue for the restart */
  remove(ready);
  child = start(args, NULL, NULL);
  CHECK_OK(per_net_client_insert(&c, items + 24, 2, NULL, NULL, &traj));
  CHECK_EQ_U(traj, 1);
  CHECK_OK(per_net_client_info(&c, &info));
  CHECK_EQ_U(info.size, 5);
  CHECK_EQ_U(info.inserts, 2);
  CHECK_EQ_U(info.trajectories, 2);
  per_net_client_close(&c);
  REQUIRE(kill(child, SIGTERM) == 0);
  CHECK_EQ_U(finish(child), 0);
  child = -1;
  snprintf(p, sizeof p, "%s/server.state", ck);
  CHECK(remove(p) == 0);
  snprintf(p, sizeof p, "%s/table-0.2.per", ck);
  CHECK(remove(p) == 0);
  CHECK(rmdir(ck) == 0);
  snprintf(p, sizeof p, "%s/rs", dir);
  remove(p);
}

/* Whether this machine has an IPv6 loopback (::1) to bind. */
static int ipv6_loopback(void) {
  struct sockaddr_in6 a;
  int ok, fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  memset(&a, 0, sizeof a);
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
  close(fd);
  return ok;
}

/* per-server on tcp://[::1]: the client reaches a bracketed address
   (ZeroMQ's IPV6 option, which both sockets need), no --insecure. */
static void ipv6_tests(void) {
  char ready[128], ep[160];
  const char *args[] = {"--bind",
                        "tcp://[::1]:*",
                        "--ready-file",
                        ready,
                        "--quiet",
                        "--table",
                        "r",
                        "--capacity",
                        "8",
                        "--item-size",
                        "8",
                        NULL};
  unsigned char items[2 * 8];
  per_net_client c;
  per_net_info info;
  uint64_t traj;
  if (!ipv6_loopback()) {
    printf("# no IPv6 loopback (::1) here: tcp://[::1] not tested\n");
    return;
  }
  snprintf(ready, sizeof ready, "%s/ready", dir);
  remove(ready);
  fill(items, sizeof items);
  child = start(args, NULL, NULL);
  line_of(wait_ready(ready, NULL), 0, ep, sizeof ep);
  CHECK(strncmp(ep, "tcp://[::1]:", 12) == 0);
  CHECK_OK(per_net_client_open(&c, ep, "r", 8, NULL, REPLY_MS));
  CHECK_OK(per_net_client_insert(&c, items, 2, NULL, NULL, &traj));
  CHECK_OK(per_net_client_info(&c, &info));
  CHECK_EQ_U(info.size, 2);
  per_net_client_close(&c);
  REQUIRE(kill(child, SIGTERM) == 0);
  CHECK_EQ_U(finish(child), 0);
  child = -1;
}

/* A file's first line (a key), into out (41 bytes). */
static void key_of(const char *path, char *out) {
  char *text = slurp(path);
  REQUIRE(strlen(text) >= 41 && text[40] == '\n');
  memcpy(out, text, 40);
  out[40] = 0;
}

/* per-server with --curve-secret and --curve-clients bound on every
   address: a client with a listed key is served over CURVE; one with
   another key, one without CURVE and one with a wrong server key get no
   reply (PER_ERR_IO); bad keys are refused before anything is sent. */
static void curve_tests(void) {
  char prefix[3][128], path[640], keys[3][2][41], ready[128], ep[256], log[160],
      clients[160], secret[192];
  const char *names[3] = {"srv", "a", "b"};
  const char *args[20];
  per_net_client c;
  per_net_info info;
  per_net_curve k;
  unsigned char items[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  char *text;
  FILE *f;
  int j, n = 0;
  const char *port;
  for (j = 0; j < 3; ++j) {
    const char *kg[] = {"--curve-keygen", prefix[j], NULL};
    snprintf(prefix[j], sizeof prefix[j], "%s/%s", dir, names[j]);
    CHECK_EQ_U(finish(start(kg, NULL, "/dev/null")), 0);
    snprintf(path, sizeof path, "%s.public", prefix[j]);
    key_of(path, keys[j][0]);
    snprintf(path, sizeof path, "%s.secret", prefix[j]);
    key_of(path, keys[j][1]);
    CHECK(strcmp(keys[j][0], keys[j][1]) != 0);
  }
  {
    struct stat st;
    REQUIRE(stat(path, &st) == 0);
    CHECK_EQ_U(st.st_mode & 0777, 0600); /* b.secret */
  }
  snprintf(clients, sizeof clients, "%s/clients", dir);
  f = fopen(clients, "w");
  REQUIRE(f != NULL);
  fprintf(f, "# the learner\n  %s  \n\n", keys[1][0]);
  REQUIRE(fclose(f) == 0);
  snprintf(ready, sizeof ready, "%s/ready", dir);
  snprintf(log, sizeof log, "%s/curve.log", dir);
  snprintf(secret, sizeof secret, "%s.secret", prefix[0]);
  remove(ready);
  args[n++] = "--bind";
  args[n++] = "tcp://0.0.0.0:*"; /* every address: allowed with CURVE */
  args[n++] = "--ready-file";
  args[n++] = ready;
  args[n++] = "--table";
  args[n++] = "r";
  args[n++] = "--capacity";
  args[n++] = "16";
  args[n++] = "--item-size";
  args[n++] = "4";
  args[n++] = "--curve-secret";
  args[n++] = secret;
  args[n++] = "--curve-clients";
  args[n++] = clients;
  args[n] = NULL;
  child = start(args, NULL, log);
  line_of(wait_ready(ready, log), 0, ep, sizeof ep);
  port = strrchr(ep, ':');
  REQUIRE(port != NULL);
  snprintf(path, sizeof path, "tcp://127.0.0.1%s", port);

  /* a listed client: served */
  k.server_public = keys[0][0];
  k.public_key = keys[1][0];
  k.secret_key = keys[1][1];
  CHECK_OK(per_net_client_open_curve(&c, path, "r", 4, NULL, REPLY_MS, &k));
  CHECK_OK(per_net_client_insert(&c, items, 2, NULL, NULL, NULL));
  CHECK_OK(per_net_client_info(&c, &info));
  CHECK_EQ_U(info.size, 2);
  per_net_client_close(&c);
  /* another key, no CURVE, a wrong server key: no reply */
  k.public_key = keys[2][0];
  k.secret_key = keys[2][1];
  CHECK_STATUS(per_net_client_open_curve(&c, path, "r", 4, NULL, 200, &k),
               PER_ERR_IO);
  CHECK_STR(c.error, "per_net_client_open_curve: no reply within 200 ms");
  CHECK(strstr(c.error, "--curve-clients") != NULL);
  CHECK_STATUS(per_net_client_open(&c, path, "r", 4, NULL, 200), PER_ERR_IO);
  k.server_public = keys[2][0];
  k.public_key = keys[1][0];
  k.secret_key = keys[1][1];
  CHECK_STATUS(per_net_client_open_curve(&c, path, "r", 4, NULL, 200, &k),
               PER_ERR_IO);
  /* keys that are not keys: refused, nothing sent */
  k.server_public = "short";
  CHECK_STATUS(per_net_client_open_curve(&c, path, "r", 4, NULL, 200, &k),
               PER_ERR_ARG);
  CHECK_STR(c.error, "per_net_client_open_curve: curve->server_public is "
                     "not a key");
  k.server_public = keys[0][0];
  k.secret_key = "0123456789012345678901234567890123456~~~"; /* not Z85 */
  CHECK_STATUS(per_net_client_open_curve(&c, path, "r", 4, NULL, 200, &k),
               PER_ERR_ARG);
  CHECK_STR(c.error, "per_net_client_open_curve: curve->secret_key");
  REQUIRE(kill(child, SIGTERM) == 0);
  CHECK_EQ_U(finish(child), 0);
  text = slurp(log);
  CHECK_MSG(strstr(text, "CURVE clients refused") != NULL, "%s", text);
  for (j = 0; j < 3; ++j) {
    snprintf(path, sizeof path, "%s.public", prefix[j]);
    remove(path);
    snprintf(path, sizeof path, "%s.secret", prefix[j]);
    remove(path);
  }
  remove(clients);
  remove(log);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: server-client-test PER_SERVER\n");
    return 2;
  }
  server = argv[1];
  snprintf(dir, sizeof dir, "/tmp/per-client-test-XXXXXX");
  REQUIRE(mkdtemp(dir) != NULL);
  atexit(at_exit);
  /* the fake first: it forks before this process has a ZeroMQ context */
  fake_tests();
  server_tests();
  restart_tests();
  curve_tests();
  ipv6_tests();
  return t_done("server client");
}
