/* The smoke tests of per-server (server/per_server.c): the built program
   as a child process, spoken to over real ZeroMQ sockets with requests
   built byte by byte from docs/PROTOCOL.md (little-endian, no
   alignment).

     server-smoke PER_SERVER smoke    every op over a DEALER on an
                                      ephemeral loopback port, refusals,
                                      garbage, a message of the wrong
                                      shape, a REQ client, SIGTERM
     server-smoke PER_SERVER options  --help, --version and the refused
                                      options (exit 2: non-loopback bind
                                      without --insecure, a table option
                                      before --table, ...)
     server-smoke PER_SERVER spec     --spec with two tables, --load of a
                                      checkpoint, ipc and tcp at once,
                                      the ready and stopped lines, SIGINT

   Every wait is bounded (the ready file 10 s, a reply 5 s, an exit 10 s):
   a broken server fails the test instead of hanging it. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

/* per.h for its status codes and, in mode spec, a checkpoint to load. */
#define PER_IMPLEMENTATION
#include "per.h"
#include "../tests/t.h"
#include "child.h"

#define REPLY_MS 5000

static void kill_child(void) {
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    child = -1;
  }
}

/* ---- bytes ---- */

static void put_f32(unsigned char *p, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  put(p, u, 4);
}

static float get_f32(const unsigned char *p) {
  uint32_t u = (uint32_t)get(p, 4);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static double get_f64(const unsigned char *p) {
  uint64_t u = get(p, 8);
  double d;
  memcpy(&d, &u, 8);
  return d;
}

/* A request's header (magic, version 1, op, id, table name) at p; returns
   its length, where the body starts. */
static size_t head(unsigned char *p, unsigned op, uint64_t id,
                   const char *table) {
  size_t k = strlen(table);
  memcpy(p, "PERQ", 4);
  put(p + 4, 1, 2);
  put(p + 6, op, 2);
  put(p + 8, id, 8);
  p[16] = (unsigned char)k;
  memcpy(p + 17, table, k);
  return 17 + k;
}

/* HELLO: item size, layout. */
static size_t hello(unsigned char *p, uint64_t id, const char *table,
                    uint32_t item_size, const char *layout) {
  size_t n = head(p, 1, id, table), m = strlen(layout);
  put(p + n, item_size, 4);
  put(p + n + 4, m, 2);
  memcpy(p + n + 6, layout, m);
  return n + 6 + m;
}

static size_t info(unsigned char *p, uint64_t id, const char *table) {
  return head(p, 5, id, table);
}

/* ---- sockets ---- */

typedef struct reply {
  unsigned char *p;
  size_t n;
} reply;

static void *connect_to(void *ctx, int type, const char *endpoint) {
  void *s = zmq_socket(ctx, type);
  int zero = 0;
  REQUIRE(s != NULL);
  REQUIRE(zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) == 0);
  REQUIRE(zmq_connect(s, endpoint) == 0);
  return s;
}

/* Send one frame; the reply within REPLY_MS, or fail (exit). */
static reply ask(void *s, const unsigned char *req, size_t n) {
  zmq_pollitem_t it;
  zmq_msg_t m;
  reply r;
  REQUIRE(zmq_send(s, req, n, 0) == (int)n);
  memset(&it, 0, sizeof it);
  it.socket = s;
  it.events = ZMQ_POLLIN;
  if (zmq_poll(&it, 1, REPLY_MS) != 1) {
    T_FAIL_AT("no reply within %d ms", REPLY_MS);
    exit(1);
  }
  zmq_msg_init(&m);
  REQUIRE(zmq_msg_recv(&m, s, 0) >= 0);
  REQUIRE(!zmq_msg_more(&m)); /* one frame */
  r.n = zmq_msg_size(&m);
  r.p = (unsigned char *)malloc(r.n ? r.n : 1);
  REQUIRE(r.p != NULL);
  memcpy(r.p, zmq_msg_data(&m), r.n);
  zmq_msg_close(&m);
  return r;
}

/* The reply's header checked: magic, version, op, id; its status. A
   refusal has a message and no body; a success exactly body bytes
   (body < 0: any length). */
static per_status check_head(const reply *r, unsigned op, uint64_t id,
                             long body) {
  per_status st;
  size_t msg;
  REQUIRE(r->n >= 24);
  CHECK(memcmp(r->p, "PERR", 4) == 0);
  CHECK_EQ_U(get(r->p + 4, 2), 1);
  CHECK_EQ_U(get(r->p + 6, 2), op);
  CHECK_EQ_U(get(r->p + 8, 8), id);
  st = (per_status)(int32_t)(uint32_t)get(r->p + 16, 4);
  msg = (size_t)get(r->p + 20, 2);
  CHECK_EQ_U(get(r->p + 22, 2), 0);
  if (st == PER_OK) {
    CHECK_EQ_U(msg, 0);
    if (body >= 0) CHECK_EQ_U(r->n, 24 + (size_t)body);
  } else {
    CHECK(msg > 0);
    CHECK_EQ_U(r->n, 24 + msg);
  }
  return st;
}

/* ---- processes ---- */

static void ready_path(char *out, size_t n) {
  snprintf(out, n, "%s/ready", dir);
}

/* Run per-server with args to its end; its exit status. */
static int run(const char *const *args, const char *out, const char *err) {
  return finish(start(args, out, err));
}

/* ---- smoke: every op over a DEALER, then a REQ ---- */

static int smoke(void) {
  static const char *const args[] = {"--bind",       "tcp://127.0.0.1:*",
                                     "--ready-file", NULL /* below */,
                                     "--table",      "replay",
                                     "--capacity",   "64",
                                     "--item-size",  "8",
                                     "--quiet",      NULL};
  const char *argv_[sizeof args / sizeof args[0]];
  char ready[128], endpoint[256];
  unsigned char req[1024];
  void *ctx, *dealer, *rq;
  reply r;
  size_t n, k;
  uint64_t ids[4];
  memcpy(argv_, args, sizeof args);
  ready_path(ready, sizeof ready);
  argv_[3] = ready;
  child = start(argv_, NULL, NULL);
  line_of(wait_ready(ready, NULL), 0, endpoint, sizeof endpoint);
  CHECK(strncmp(endpoint, "tcp://127.0.0.1:", 16) == 0);
  CHECK(strcmp(endpoint, "tcp://127.0.0.1:*") != 0);
  CHECK(strcmp(endpoint, "tcp://127.0.0.1:0") != 0);

  ctx = zmq_ctx_new();
  REQUIRE(ctx != NULL);
  dealer = connect_to(ctx, ZMQ_DEALER, endpoint);

  /* HELLO, matching: the table's config back. */
  n = hello(req, 1, "replay", 8, "");
  r = ask(dealer, req, n);
  CHECK_STATUS(check_head(&r, 1, 1, 90), PER_OK);
  CHECK_EQ_U(get(r.p + 24, 4), 64);     /* capacity */
  CHECK_EQ_U(get(r.p + 28, 4), 8);      /* item size */
  CHECK_EQ_U(get(r.p + 24 + 88, 2), 0); /* layout length */
  free(r.p);

  /* HELLO, another item size: PER_ERR_MISMATCH. */
  n = hello(req, 2, "replay", 12, "");
  r = ask(dealer, req, n);
  CHECK_STATUS(check_head(&r, 1, 2, -1), PER_ERR_MISMATCH);
  free(r.p);

  /* INSERT 10 items, item j holding j as a u64: one trajectory. */
  n = head(req, 2, 3, "replay");
  put(req + n, 10, 4);
  put(req + n + 4, 0, 4);
  n += 8;
  for (k = 0; k < 10; ++k) put(req + n + 8 * k, 100 + k, 8);
  n += 80;
  r = ask(dealer, req, n);
  CHECK_STATUS(check_head(&r, 2, 3, 16), PER_OK);
  CHECK_EQ_U(get(r.p + 24, 8), 0);  /* the first trajectory's id */
  CHECK_EQ_U(get(r.p + 32, 4), 10); /* size */
  free(r.p);

  /* SAMPLE 4: ids, weights in (0, 1], the items of their slots. */
  n = head(req, 3, 4, "replay");
  put(req + n, 4, 4);      /* B */
  put(req + n + 4, 0, 4);  /* flags */
  put(req + n + 8, 0, 8);  /* beta (0: the schedule's) */
  put(req + n + 16, 0, 4); /* window */
  put(req + n + 20, 0, 4); /* want: items too */
  n += 24;
  r = ask(dealer, req, n);
  CHECK_STATUS(check_head(&r, 3, 4, 16 + 4 * (8 + 4 + 8)), PER_OK);
  if (r.n == 24 + 16 + 4 * 20) {
    double beta = get_f64(r.p + 32);
    CHECK_EQ_U(get(r.p + 24, 4), 4); /* B */
    CHECK_EQ_U(get(r.p + 28, 4), 1); /* steps per unit */
    CHECK(beta > 0 && beta <= 1);
    for (k = 0; k < 4; ++k) {
      uint64_t id = get(r.p + 40 + 8 * k, 8);
      float w = get_f32(r.p + 72 + 4 * k);
      uint64_t item = get(r.p + 88 + 8 * k, 8);
      ids[k] = id;
      CHECK_MSG(per_id_slot(id) < 10, "slot %u", (unsigned)per_id_slot(id));
      CHECK_EQ_U(per_id_generation(id), 1);
      CHECK_MSG(w > 0 && w <= 1, "weight %g", (double)w);
      CHECK_EQ_U(item, 100 + per_id_slot(id));
    }
  } else {
    memset(ids, 0, sizeof ids);
  }
  free(r.p);

  /* UPDATE those ids: none stale. */
  n = head(req, 4, 5, "replay");
  put(req + n, 4, 4);
  put(req + n + 4, 0, 4);
  n += 8;
  for (k = 0; k < 4; ++k) put(req + n + 8 * k, ids[k], 8);
  n += 32;
  for (k = 0; k < 4; ++k) put_f32(req + n + 4 * k, 0.5f + (float)k);
  n += 16;
  r = ask(dealer, req, n);
  CHECK_STATUS(check_head(&r, 4, 5, 8), PER_OK);
  CHECK_EQ_U(get(r.p + 24, 4), 0); /* stale */
  free(r.p);

  /* INFO: size 10, one request of each kind, the mismatch refused. */
  n = info(req, 6, "replay");
  r = ask(dealer, req, n);
  CHECK_STATUS(check_head(&r, 5, 6, 128), PER_OK);
  CHECK_EQ_U(get(r.p + 24, 4), 64);     /* capacity */
  CHECK_EQ_U(get(r.p + 28, 4), 8);      /* item size */
  CHECK_EQ_U(get(r.p + 32, 4), 10);     /* size */
  CHECK_EQ_U(get(r.p + 40, 8), 10);     /* items added */
  CHECK_EQ_U(get(r.p + 48, 8), 1);      /* trajectories */
  CHECK_EQ_U(get(r.p + 56, 8), 1);      /* sample calls */
  CHECK_EQ_U(get(r.p + 24 + 48, 8), 1); /* inserts */
  CHECK_EQ_U(get(r.p + 24 + 56, 8), 1); /* samples */
  CHECK_EQ_U(get(r.p + 24 + 64, 8), 1); /* updates */
  CHECK_EQ_U(get(r.p + 24 + 72, 8), 1); /* refused */
  free(r.p);

  /* Garbage: PER_ERR_FORMAT, op and id 0. Then the server still answers. */
  r = ask(dealer, (const unsigned char *)"not a request at all", 20);
  CHECK_STATUS(check_head(&r, 0, 0, -1), PER_ERR_FORMAT);
  free(r.p);
  r = ask(dealer, (const unsigned char *)"", 0);
  CHECK_STATUS(check_head(&r, 0, 0, -1), PER_ERR_FORMAT);
  free(r.p);
  /* Another version, another table, a body too long, an unknown op. */
  n = info(req, 7, "replay");
  put(req + 4, 2, 2);
  r = ask(dealer, req, n);
  CHECK_STATUS(check_head(&r, 5, 7, -1), PER_ERR_VERSION);
  free(r.p);
  n = info(req, 8, "other");
  r = ask(dealer, req, n);
  CHECK_STATUS(check_head(&r, 5, 8, -1), PER_ERR_INDEX);
  free(r.p);
  n = info(req, 9, "replay");
  req[n++] = 0;
  r = ask(dealer, req, n);
  CHECK_STATUS(check_head(&r, 5, 9, -1), PER_ERR_FORMAT);
  free(r.p);
  n = head(req, 77, 10, "replay");
  r = ask(dealer, req, n);
  CHECK_STATUS(check_head(&r, 77, 10, -1), PER_ERR_FORMAT);
  free(r.p);

  /* A message of two frames is not a request: no reply; the next
     request's reply is the next one to come. */
  REQUIRE(zmq_send(dealer, "two", 3, ZMQ_SNDMORE) == 3);
  REQUIRE(zmq_send(dealer, "frames", 6, 0) == 6);
  n = info(req, 11, "replay");
  r = ask(dealer, req, n);
  CHECK_STATUS(check_head(&r, 5, 11, 128), PER_OK);
  CHECK_EQ_U(get(r.p + 32, 4), 10);     /* size: unchanged */
  CHECK_EQ_U(get(r.p + 24 + 72, 8), 3); /* refused: + the long body and
                                           the unknown op (the version and
                                           the garbage name no table) */
  free(r.p);

  /* A REQ client: the server keeps its empty delimiter frame. */
  rq = connect_to(ctx, ZMQ_REQ, endpoint);
  n = info(req, 12, "replay");
  r = ask(rq, req, n);
  CHECK_STATUS(check_head(&r, 5, 12, 128), PER_OK);
  CHECK_EQ_U(get(r.p + 32, 4), 10);
  free(r.p);
  n = hello(req, 13, "replay", 8, "");
  r = ask(rq, req, n);
  CHECK_STATUS(check_head(&r, 1, 13, 90), PER_OK);
  free(r.p);

  zmq_close(rq);
  zmq_close(dealer);
  zmq_ctx_term(ctx);

  /* SIGTERM: a clean stop, the ready file removed. */
  REQUIRE(kill(child, SIGTERM) == 0);
  CHECK_EQ_U(finish(child), 0);
  CHECK(access(ready, F_OK) != 0);
  return t_done("server smoke");
}

/* ---- options ---- */

/* per-server with args: its exit status, and its stdout and stderr
   (in out and err, 64 KiB each at most). */
static int run_captured(const char *const *args, char **out, char **err) {
  static char o[65536], e[65536];
  char po[128], pe[128];
  int st;
  snprintf(po, sizeof po, "%s/out", dir);
  snprintf(pe, sizeof pe, "%s/err", dir);
  st = run(args, po, pe);
  snprintf(o, sizeof o, "%s", slurp(po));
  snprintf(e, sizeof e, "%s", slurp(pe));
  *out = o;
  *err = e;
  return st;
}

/* A refused command line: exit 2, one line of error and the hint (or
   one line when hint is 0), its error containing `says`. */
static void refused(const char *const *args, const char *says, int hint) {
  char *out, *err, *nl;
  int st = run_captured(args, &out, &err);
  CHECK_MSG(st == 2, "%s ...: exit %d, not 2 (stderr: %s)", args[0], st, err);
  CHECK_MSG(strstr(err, says) != NULL, "%s ...: stderr \"%s\" lacks \"%s\"",
            args[0], err, says);
  CHECK_MSG(strncmp(err, "per-server: ", 12) == 0, "stderr: %s", err);
  nl = strchr(err, '\n');
  CHECK(nl != NULL);
  if (nl && hint) CHECK(strstr(nl + 1, "--help") != NULL);
  CHECK_EQ_U(strlen(out), 0);
}

static int options(void) {
  char *out, *err;
  int st;
  {
    static const char *const a[] = {"--help", NULL};
    st = run_captured(a, &out, &err);
    CHECK_EQ_U(st, 0);
    CHECK(strstr(out, "--bind") != NULL);
    CHECK(strstr(out, "--table") != NULL);
    CHECK(strstr(out, "--spec") != NULL);
    CHECK(strstr(out, "--insecure") != NULL);
    CHECK(strstr(out, "--ready-file") != NULL);
    CHECK(strstr(out, "--checkpoint") != NULL);
    CHECK(strstr(out, "--queue") != NULL);
    CHECK(strstr(out, "--curve-clients") != NULL);
    CHECK(strstr(out, "item_size") != NULL); /* the spec format */
    CHECK_EQ_U(strlen(err), 0);
  }
  {
    static const char *const a[] = {"--version", NULL};
    st = run_captured(a, &out, &err);
    CHECK_EQ_U(st, 0);
    CHECK(strstr(out, PER_VERSION_STRING) != NULL);
  }
  {
    static const char *const a[] = {
        "--bind", "tcp://0.0.0.0:*", "--table", "r", "--capacity",
        "8",      "--item-size",     "4",       NULL};
    refused(a, "--insecure", 0);
    refused(a, "--curve-secret and --curve-clients", 0);
  }
  {
    static const char *const a[] = {"--bind",      "tcp://192.168.1.1:5000",
                                    "--table",     "r",
                                    "--capacity",  "8",
                                    "--item-size", "4",
                                    NULL};
    refused(a, "--insecure", 0);
  }
  {
    static const char *const a[] = {"--bind",      "tcp://127.0.0.1.evil.com:5",
                                    "--table",     "r",
                                    "--capacity",  "8",
                                    "--item-size", "4",
                                    NULL};
    refused(a, "--insecure", 0);
  }
  {
    static const char *const a[] = {"--capacity",  "8", "--table", "r",
                                    "--item-size", "4", NULL};
    refused(a, "before any --table", 1);
  }
  {
    static const char *const a[] = {"--table", "r",           "--capacity",
                                    "8",       "--item-size", "4",
                                    "--every", "5",           NULL};
    refused(a, "--every needs --checkpoint DIR", 1);
  }
  {
    static const char *const a[] = {
        "--table",      "r",      "--capacity", "8", "--item-size", "4",
        "--checkpoint", "/tmp/x", "--every",    "0", NULL};
    refused(a, "--every takes seconds", 1);
  }
  {
    static const char *const a[] = {
        "--table", "r",      "--capacity",   "8",      "--item-size", "4",
        "--load",  "r=/x/y", "--checkpoint", "/tmp/x", NULL};
    refused(a, "--load and --checkpoint", 1);
  }
  {
    static const char *const a[] = {"--table", "r",           "--capacity",
                                    "8",       "--item-size", "4",
                                    "--queue", "0",           NULL};
    refused(a, "--queue takes a number of messages, 1 to 1000000", 1);
  }
  { /* CURVE: key files, and what binding every address needs */
    char key[128], bad[128], pub[41], sec[41];
    FILE *f;
    const char *a[] = {"--table",
                       "r",
                       "--capacity",
                       "8",
                       "--item-size",
                       "4",
                       "--bind",
                       "tcp://0.0.0.0:5",
                       "--curve-secret",
                       NULL,
                       NULL,
                       NULL,
                       NULL};
    snprintf(key, sizeof key, "%s/key", dir);
    snprintf(bad, sizeof bad, "%s/badkey", dir);
    REQUIRE(zmq_curve_keypair(pub, sec) == 0);
    f = fopen(key, "w");
    REQUIRE(f && fprintf(f, "%s\n", sec) > 0 && fclose(f) == 0);
    f = fopen(bad, "w");
    REQUIRE(f && fprintf(f, "# a comment\nnot a key\n") > 0 && fclose(f) == 0);
    a[9] = key;
    refused(a, "Give --curve-secret and --curve-clients", 0);
    a[9] = bad;
    refused(a, "badkey: line 2: not a key: 40 characters of Z85", 0);
    a[8] = "--curve-clients";
    a[9] = key;
    refused(a, "--curve-clients needs --curve-secret FILE", 1);
    a[8] = "--curve-secret";
    a[10] = "--curve-clients";
    a[11] = bad;
    refused(a, "badkey: line 2: not a key", 0);
    remove(key);
    remove(bad);
  }
  {
    static const char *const a[] = {"--bogus", NULL};
    refused(a, "unknown option", 1);
  }
  {
    static const char *const a[] = {"--table", NULL};
    refused(a, "needs a value", 1);
  }
  {
    static const char *const a[] = {"--quiet", NULL};
    refused(a, "no table", 1);
  }
  {
    static const char *const a[] = {"--table",     "r", "--capacity", "x8",
                                    "--item-size", "4", NULL};
    refused(a, "capacity", 0);
  }
  {
    static const char *const a[] = {"--table", "r", "--capacity", "8", NULL};
    refused(a, "item_size", 0);
  }
  {
    static const char *const a[] = {"--table",     "r",          "--capacity",
                                    "8",           "--capacity", "9",
                                    "--item-size", "4",          NULL};
    refused(a, "second value", 0);
  }
  {
    static const char *const a[] = {"--table",     "r", "--capacity",    "8",
                                    "--item-size", "4", "--max-message", "100",
                                    NULL};
    refused(a, "max_message", 0);
  }
  {
    static const char *const a[] = {
        "--table", "r",      "--capacity",        "8", "--item-size",
        "4",       "--load", "nope=/nonexistent", NULL};
    refused(a, "no table named", 0);
  }
  {
    static const char *const a[] = {"--spec", "/nonexistent/spec", NULL};
    refused(a, "/nonexistent/spec", 0);
  }
  {
    /* A checkpoint that is not there: exit 1, per's message. */
    static const char *const a[] = {
        "--table", "r",      "--capacity",          "8", "--item-size",
        "4",       "--load", "r=/nonexistent/ckpt", NULL};
    st = run_captured(a, &out, &err);
    CHECK_EQ_U(st, 1);
    CHECK(strstr(err, "/nonexistent/ckpt") != NULL);
  }
  return t_done("server options");
}

/* ---- spec: a spec file, a checkpoint, ipc and tcp, SIGINT ---- */

static int spec(void) {
  static const char text[] = "# two tables\n"
                             "table a\n"
                             "capacity 32\n"
                             "item_size 4\n"
                             "  alpha   0.7  \n"
                             "\n"
                             "table b\n"
                             "capacity 16\n"
                             "item_size 12\n"
                             "layout <f4(3)\n"
                             "flags max_live\n";
  char spec_path[128], ckpt[128], ipc[160], ready[128], log[128], load[160],
      endpoint[256], tcp[256];
  const char *args[16];
  unsigned char req[512], items[5 * 4];
  per_buffer b;
  per_config cfg = per_config_default(32, 4);
  FILE *f;
  void *ctx, *s, *s2;
  reply r;
  size_t n;
  char *log_text;
  uint32_t k;

  snprintf(spec_path, sizeof spec_path, "%s/tables.spec", dir);
  snprintf(ckpt, sizeof ckpt, "%s/a.ckpt", dir);
  snprintf(ipc, sizeof ipc, "ipc://%s/sock", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  snprintf(load, sizeof load, "a=%s", ckpt);
  ready_path(ready, sizeof ready);
  f = fopen(spec_path, "w");
  REQUIRE(f != NULL);
  REQUIRE(fputs(text, f) >= 0 && fclose(f) == 0);
  /* The checkpoint of table a: 5 items. */
  cfg.alpha = 0.7;
  REQUIRE(per_buffer_init(&b, &cfg, NULL) == PER_OK);
  for (k = 0; k < 5; ++k) put(items + 4 * k, 1000 + k, 4);
  REQUIRE(per_buffer_add_steps(&b, items, 5, NULL) == PER_OK);
  CHECK_STATUS(per_buffer_save(&b, ckpt), PER_OK);
  per_buffer_free(&b);

  k = 0;
  args[k++] = "--spec";
  args[k++] = spec_path;
  args[k++] = "--load";
  args[k++] = load;
  args[k++] = "--bind";
  args[k++] = ipc;
  args[k++] = "--bind=tcp://127.0.0.1:*";
  args[k++] = "--ready-file";
  args[k++] = ready;
  args[k++] = NULL;
  child = start(args, NULL, log);
  {
    const char *lines = wait_ready(ready, log);
    line_of(lines, 0, endpoint, sizeof endpoint);
    line_of(lines, 1, tcp, sizeof tcp);
    CHECK_MSG(strcmp(endpoint, ipc) == 0, "%s", endpoint);
    CHECK_MSG(strncmp(tcp, "tcp://", 6) == 0, "%s", tcp);
  }
  ctx = zmq_ctx_new();
  REQUIRE(ctx != NULL);
  s = connect_to(ctx, ZMQ_DEALER, endpoint);
  s2 = connect_to(ctx, ZMQ_DEALER, tcp);

  /* a: the checkpoint's 5 items. */
  n = info(req, 1, "a");
  r = ask(s, req, n);
  CHECK_STATUS(check_head(&r, 5, 1, 128), PER_OK);
  CHECK_EQ_U(get(r.p + 24, 4), 32);
  CHECK_EQ_U(get(r.p + 28, 4), 4);
  CHECK_EQ_U(get(r.p + 32, 4), 5);
  free(r.p);
  n = hello(req, 2, "a", 4, "");
  r = ask(s, req, n);
  CHECK_STATUS(check_head(&r, 1, 2, 90), PER_OK);
  CHECK(get_f64(r.p + 24 + 24) == 0.7); /* alpha */
  free(r.p);
  /* b: its layout, checked by HELLO. */
  n = hello(req, 3, "b", 12, "<f4(3)");
  r = ask(s2, req, n);
  CHECK_STATUS(check_head(&r, 1, 3, 90 + 6), PER_OK);
  CHECK_EQ_U(get(r.p + 24 + 16, 4), PER_MAX_LIVE); /* config flags */
  CHECK(r.n == 24 + 96 && memcmp(r.p + 24 + 90, "<f4(3)", 6) == 0);
  free(r.p);
  n = hello(req, 4, "b", 12, "<f8(3)");
  r = ask(s2, req, n);
  CHECK_STATUS(check_head(&r, 1, 4, -1), PER_ERR_MISMATCH);
  free(r.p);
  n = info(req, 5, "b");
  r = ask(s, req, n);
  CHECK_STATUS(check_head(&r, 5, 5, 128), PER_OK);
  CHECK_EQ_U(get(r.p + 24, 4), 16);
  CHECK_EQ_U(get(r.p + 32, 4), 0);
  free(r.p);

  zmq_close(s);
  zmq_close(s2);
  zmq_ctx_term(ctx);
  REQUIRE(kill(child, SIGINT) == 0);
  CHECK_EQ_U(finish(child), 0);
  log_text = slurp(log);
  CHECK_MSG(strstr(log_text,
                   "per-server: serving a(32, 4), b(16, 12) on ipc://") != NULL,
            "%s", log_text);
  CHECK_MSG(strstr(log_text,
                   "per-server: stopped after 5 requests (1 refused)") != NULL,
            "%s", log_text);
  return t_done("server spec");
}

/* ---- restart: --checkpoint, once-only requests across a restart ---- */

/* INSERT of n items (item j holds base + j) with request id id. */
static size_t insert3(unsigned char *req, uint64_t id, uint64_t base,
                      uint32_t n) {
  size_t len = head(req, 2, id, "r"), k;
  put(req + len, n, 4);
  put(req + len + 4, 0, 4);
  len += 8;
  for (k = 0; k < n; ++k) put(req + len + 8 * k, base + k, 8);
  return len + 8u * n;
}

/* The generation in ck's state file (0 when it cannot be read). */
static uint64_t state_gen(const char *ck) {
  char p[192];
  unsigned char b[24];
  FILE *f;
  size_t got;
  snprintf(p, sizeof p, "%s/server.state", ck);
  f = fopen(p, "rb");
  if (!f) return 0;
  got = fread(b, 1, sizeof b, f);
  fclose(f);
  return got == sizeof b ? get(b + 16, 8) : 0;
}

/* Start per-server on ck and return the endpoint; log in log. */
static void start_ck(const char *ck, const char *every, const char *table,
                     const char *log, char *endpoint, size_t cap) {
  char ready[128];
  const char *args[20];
  int k = 0;
  ready_path(ready, sizeof ready);
  remove(ready);
  args[k++] = "--bind";
  args[k++] = "tcp://127.0.0.1:*";
  args[k++] = "--ready-file";
  args[k++] = ready;
  args[k++] = "--table";
  args[k++] = table;
  args[k++] = "--capacity";
  args[k++] = "64";
  args[k++] = "--item-size";
  args[k++] = "8";
  args[k++] = "--checkpoint";
  args[k++] = ck;
  if (every) {
    args[k++] = "--every";
    args[k++] = every;
  }
  args[k] = NULL;
  child = start(args, NULL, log);
  line_of(wait_ready(ready, log), 0, endpoint, cap);
}

/* INFO of table r: its size and inserts. */
static void info_r(void *s, uint64_t id, uint64_t *size, uint64_t *inserts,
                   uint64_t *added) {
  unsigned char req[64];
  size_t n = info(req, id, "r");
  reply r = ask(s, req, n);
  CHECK_STATUS(check_head(&r, 5, id, 128), PER_OK);
  *size = get(r.p + 32, 4);
  *added = get(r.p + 40, 8);
  *inserts = get(r.p + 72, 8);
  free(r.p);
}

static int restart(void) {
  const uint64_t once = UINT64_C(1) << 63;
  char ck[128], log[128], endpoint[256];
  unsigned char req[256], first[40];
  void *ctx, *s;
  reply r;
  size_t n;
  uint64_t size, inserts, added;
  char *text;
  snprintf(ck, sizeof ck, "%s/ck", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  ctx = zmq_ctx_new();
  REQUIRE(ctx != NULL);

  /* a fresh server makes ck; a once-only INSERT, a plain one, the
     once-only one again (a repeat: its first reply, nothing applied) */
  start_ck(ck, NULL, "r", log, endpoint, sizeof endpoint);
  s = connect_to(ctx, ZMQ_DEALER, endpoint);
  n = insert3(req, once | 5u, 100, 3);
  r = ask(s, req, n);
  CHECK_STATUS(check_head(&r, 2, once | 5u, 16), PER_OK);
  REQUIRE(r.n == 40);
  memcpy(first, r.p, 40);
  free(r.p);
  n = insert3(req, 6, 200, 2);
  r = ask(s, req, n);
  CHECK_STATUS(check_head(&r, 2, 6, 16), PER_OK);
  CHECK_EQ_U(get(r.p + 32, 4), 5);
  free(r.p);
  n = insert3(req, once | 5u, 100, 3);
  r = ask(s, req, n);
  CHECK(r.n == 40 && memcmp(r.p, first, 40) == 0);
  free(r.p);
  info_r(s, 7, &size, &inserts, &added);
  CHECK_EQ_U(size, 5);
  CHECK_EQ_U(inserts, 2);
  zmq_close(s);
  REQUIRE(kill(child, SIGTERM) == 0);
  CHECK_EQ_U(finish(child), 0);
  text = slurp(log);
  CHECK_MSG(strstr(text, "saved generation 1 to ") != NULL, "%s", text);
  CHECK_MSG(strstr(text, "1 once-only repeats answered") != NULL, "%s", text);
  CHECK_EQ_U(state_gen(ck), 1);

  /* restarted on ck: the tables as they were; the once-only INSERT sent
     again (a request in flight across the restart) answered from memory,
     a new one applied */
  start_ck(ck, NULL, "r", log, endpoint, sizeof endpoint);
  text = slurp(log);
  CHECK_MSG(strstr(text, "restored generation 1 from ") != NULL, "%s", text);
  s = connect_to(ctx, ZMQ_DEALER, endpoint);
  info_r(s, 8, &size, &inserts, &added);
  CHECK_EQ_U(size, 5);
  CHECK_EQ_U(added, 5);
  CHECK_EQ_U(inserts, 2);
  n = insert3(req, once | 5u, 100, 3);
  r = ask(s, req, n);
  CHECK(r.n == 40 && memcmp(r.p, first, 40) == 0);
  free(r.p);
  n = insert3(req, once | 9u, 300, 1);
  r = ask(s, req, n);
  CHECK_STATUS(check_head(&r, 2, once | 9u, 16), PER_OK);
  CHECK_EQ_U(get(r.p + 24, 8), 2); /* the third trajectory */
  CHECK_EQ_U(get(r.p + 32, 4), 6);
  free(r.p);
  zmq_close(s);
  REQUIRE(kill(child, SIGINT) == 0);
  CHECK_EQ_U(finish(child), 0);
  CHECK_EQ_U(state_gen(ck), 2);

  /* --every: a save while serving */
  start_ck(ck, "0.05", "r", log, endpoint, sizeof endpoint);
  s = connect_to(ctx, ZMQ_DEALER, endpoint);
  n = insert3(req, once | 10u, 400, 1);
  r = ask(s, req, n);
  CHECK_STATUS(check_head(&r, 2, once | 10u, 16), PER_OK);
  free(r.p);
  {
    int k;
    for (k = 0; k < 100 && state_gen(ck) < 3; ++k) sleep_ms(20);
  }
  CHECK_EQ_U(state_gen(ck), 3);
  zmq_close(s);
  REQUIRE(kill(child, SIGTERM) == 0);
  CHECK_EQ_U(finish(child), 0);
  CHECK_EQ_U(state_gen(ck), 4);

  /* another table than the checkpoint's: exit 1, nothing served */
  {
    const char *args[] = {"--table",     "other", "--capacity",   "64",
                          "--item-size", "8",     "--checkpoint", ck,
                          "--quiet",     NULL};
    CHECK_EQ_U(finish(start(args, NULL, log)), 1);
    text = slurp(log);
    CHECK_MSG(strstr(text, "table \"r\" is not the server's") != NULL, "%s",
              text);
  }
  CHECK_EQ_U(state_gen(ck), 4);
  zmq_ctx_term(ctx);
  {
    char p[192];
    snprintf(p, sizeof p, "%s/server.state", ck);
    CHECK(remove(p) == 0);
    snprintf(p, sizeof p, "%s/table-0.4.per", ck);
    CHECK(remove(p) == 0);
    CHECK(rmdir(ck) == 0);
  }
  return t_done("server restart");
}

/* The temporary directory and what is in it. */
static void clean_dir(void) {
  static const char *const names[] = {"ready", "out",    "err",        "log",
                                      "sock",  "a.ckpt", "tables.spec"};
  char p[128];
  size_t k;
  for (k = 0; k < sizeof names / sizeof names[0]; ++k) {
    snprintf(p, sizeof p, "%s/%s", dir, names[k]);
    remove(p);
  }
  rmdir(dir);
}

static void at_exit(void) {
  kill_child();
  if (dir[0]) clean_dir();
}

int main(int argc, char **argv) {
  const char *mode;
  if (argc != 3) {
    fprintf(stderr,
            "usage: server-smoke PER_SERVER smoke|options|spec|restart\n");
    return 2;
  }
  server = argv[1];
  mode = argv[2];
  snprintf(dir, sizeof dir, "/tmp/per-server-smoke-XXXXXX");
  REQUIRE(mkdtemp(dir) != NULL);
  atexit(at_exit);
  if (!strcmp(mode, "smoke")) return smoke();
  if (!strcmp(mode, "options")) return options();
  if (!strcmp(mode, "spec")) return spec();
  if (!strcmp(mode, "restart")) return restart();
  fprintf(stderr, "server-smoke: no mode %s\n", mode);
  return 2;
}
