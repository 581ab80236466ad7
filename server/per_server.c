/* per-server: per_net.h's tables over ZeroMQ. One ROUTER socket, one
   thread: each request (the last frame of a message) goes to
   per_net_handle, and its reply goes back to the client that sent it.
   The wire format is docs/PROTOCOL.md; `per-server --help` lists the
   options. SIGINT or SIGTERM stops it cleanly (exit status 0), after a
   last checkpoint with --checkpoint.

   Exit status: 0 after a signal, 1 on a failure at run time (a bind, a
   checkpoint's load or save, the ready file, ZeroMQ), 2 on bad options
   or specs. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#define PER_IMPLEMENTATION
#include "per.h"
#define PER_NET_IMPLEMENTATION
#include "per_net.h"

#define DEFAULT_BIND "tcp://127.0.0.1:50051"
/* Frames of a message kept: identities, the delimiter, the payload. A
   message with more is dropped (no reply). */
#define MAX_FRAMES 16
/* Messages served per wakeup before the stop flag is looked at again. */
#define BURST 256

static const char usage_text[] =
    "Usage: per-server [OPTION]...\n"
    "Serve prioritized replay tables (per.h's per_buffer, by name) over\n"
    "ZeroMQ: a ROUTER socket answering the requests of docs/PROTOCOL.md\n"
    "(HELLO, INSERT, SAMPLE, UPDATE, INFO) from DEALER or REQ clients.\n"
    "\n"
    "Tables (at least one; in the order given):\n"
    "  --spec FILE           tables from a spec file (format below); may\n"
    "                        repeat\n"
    "  --table NAME          start a table named NAME (1 to 63 bytes); the\n"
    "                        options below set the latest table's config:\n"
    "    --capacity N        items it holds (required)\n"
    "    --item-size N       bytes of an item (required)\n"
    "    --alpha X           priority exponent\n"
    "    --beta0 X           importance-sampling exponent at the start,\n"
    "    --beta1 X           at the end,\n"
    "    --beta-steps N      reached after N samples\n"
    "    --eps X             added to |TD error|\n"
    "    --max-priority X    priority cap\n"
    "    --seed N            the table's random stream\n"
    "    --flags F           a number, or names joined by |:\n"
    "                        weights_buffer_max, seq_cross_episodes,\n"
    "                        max_live\n"
    "    --max-unique N      PER_SAMPLE_UNIQUE's bound\n"
    "    --seq-len N         steps of a sequence (0: no sequences)\n"
    "    --seq-stride N      steps between sequence starts\n"
    "    --seq-eta X         sequence priority mix (max vs mean)\n"
    "    --layout TEXT       the items' layout, as HELLO checks it\n"
    "                        (per_buffer_set_layout)\n"
    "                        Unset fields keep per_config_default's value.\n"
    "    --min-size N        rate limiter: items stored before a sample\n"
    "                        (default 0)\n"
    "    --samples-per-insert X  items sampled an item inserted (default 0:\n"
    "                        no ratio); the side ahead by more than\n"
    "    --error-margin X    items is answered busy (docs/PROTOCOL.md)\n"
    "  --load NAME=PATH      load the checkpoint at PATH (per_buffer_save)\n"
    "                        into table NAME before serving (per_net_load:\n"
    "                        the rate limiter's counts start in the middle\n"
    "                        of its range); may repeat\n";

/* The rest of --help (ISO C99 strings are at most 4095 bytes). */
static const char usage_text2[] =
    "Durability:\n"
    "  --checkpoint DIR      keep the whole server in DIR (created when\n"
    "                        missing): when DIR holds a checkpoint, start\n"
    "                        from it (every table, its counters and the\n"
    "                        once-only requests it applied, so a client's\n"
    "                        request sent again across the restart is not\n"
    "                        applied twice); save at SIGINT or SIGTERM, and\n"
    "                        with --every. The tables must be the\n"
    "                        checkpoint's, by name (not with --load)\n"
    "  --every SECONDS       also save every SECONDS (> 0) while requests\n"
    "                        come; the server does not serve during a save\n"
    "\n"
    "Transport:\n"
    "  --bind ENDPOINT       a ZeroMQ endpoint to bind; may repeat (default\n"
    "                        " DEFAULT_BIND "). tcp://127.0.0.1:* takes a\n"
    "                        free port (see --ready-file); ipc://PATH and\n"
    "                        inproc:// are fine too.\n"
    "  --insecure            allow binding tcp on an address other than\n"
    "                        loopback (127.x.x.x, ::1, localhost) without\n"
    "                        CURVE: anyone who can reach the port can read\n"
    "                        and change the tables\n"
    "  --max-message BYTES   the largest request or reply (default 67108864,\n"
    "                        at least 4096); ZMQ_MAXMSGSIZE of the socket\n"
    "  --queue N             messages queued for each client, each way\n"
    "                        (default 16; ZMQ_SNDHWM and ZMQ_RCVHWM): a\n"
    "                        client that sends more without reading waits,\n"
    "                        and replies past N to one that does not read\n"
    "                        are dropped (it times out), so the server's\n"
    "                        memory stays within N largest messages a\n"
    "                        client\n"
    "  --ready-file PATH     once bound, write the bound endpoints (ports\n"
    "                        resolved) to PATH, one a line, atomically (a\n"
    "                        temporary file renamed); removed at a clean stop\n"
    "  --quiet               no ready and no stopped line on stderr\n"
    "\n"
    "Security (ZeroMQ CURVE: encryption, and clients known by their keys):\n"
    "  --curve-secret FILE   the server's secret key (40 characters of Z85,\n"
    "                        the file's only text): connections are CURVE\n"
    "  --curve-clients FILE  the public keys of the clients allowed, one a\n"
    "                        line (# comments); any other is refused. With\n"
    "                        both, tcp may bind any address\n"
    "  --curve-keygen PREFIX write a new key pair to PREFIX.secret (mode\n"
    "                        0600) and PREFIX.public, and exit\n"
    "  --help                this text\n"
    "  --version             per's version, the wire format's and ZeroMQ's\n"
    "\n"
    "Spec format (--spec): lines of `key value`. `table NAME` starts a\n"
    "table; the keys after it, each at most once, are the options above\n"
    "with _ for - (capacity, item_size, alpha, beta0, beta1, beta_steps,\n"
    "eps, max_priority, seed, flags, max_unique, seq_len, seq_stride,\n"
    "seq_eta, min_size, samples_per_insert, error_margin) and layout, whose\n"
    "value is the rest of its line. Blank lines\n"
    "and lines starting with # are skipped. For example:\n"
    "    # replay for the learner\n"
    "    table replay\n"
    "    capacity 1000000\n"
    "    item_size 44\n"
    "    alpha 0.6\n"
    "    flags weights_buffer_max|max_live\n"
    "\n"
    "SIGINT or SIGTERM stops the server: exit status 0 (after the last\n"
    "save with --checkpoint). Exit status 1 is a failure while starting\n"
    "or serving (bind, --load, --checkpoint's load or last save,\n"
    "--ready-file), 2 bad options or specs.\n";

/* The per_config keys of an inline table, as options (- for the spec's
   _). */
static const char *const table_keys[] = {"capacity",
                                         "item-size",
                                         "alpha",
                                         "beta0",
                                         "beta1",
                                         "beta-steps",
                                         "eps",
                                         "max-priority",
                                         "seed",
                                         "flags",
                                         "max-unique",
                                         "seq-len",
                                         "seq-stride",
                                         "seq-eta",
                                         "layout",
                                         "min-size",
                                         "samples-per-insert",
                                         "error-margin"};
#define NKEYS (sizeof table_keys / sizeof table_keys[0])

/* A growing text. */
typedef struct text {
  char *p;
  size_t n, cap;
} text;

static void out_of_memory(void) {
  fprintf(stderr, "per-server: out of memory\n");
  exit(1);
}

static void text_add(text *t, const char *s, size_t n) {
  if (t->n + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    char *p;
    while (cap < t->n + n + 1) cap *= 2;
    p = (char *)realloc(t->p, cap);
    if (!p) out_of_memory();
    t->p = p;
    t->cap = cap;
  }
  memcpy(t->p + t->n, s, n);
  t->n += n;
  t->p[t->n] = 0;
}

static void text_adds(text *t, const char *s) { text_add(t, s, strlen(s)); }

/* Where tables come from: a spec file, or an inline --table. */
typedef struct source {
  const char *file;  /* --spec FILE, or NULL */
  const char *table; /* --table NAME */
  text spec;         /* the inline table as spec text */
  text given;        /* its options as given, one a line as in spec */
} source;

typedef struct options {
  const char **binds;
  size_t nbinds;
  source *sources;
  size_t nsources;
  const char **loads; /* NAME=PATH */
  size_t nloads;
  uint64_t max_message;
  uint64_t queue; /* --queue: ZMQ_SNDHWM and ZMQ_RCVHWM */
  const char *ready_file;
  const char *checkpoint; /* --checkpoint DIR, or NULL */
  double every;           /* --every SECONDS; 0: at the stop only */
  const char *curve_secret, *curve_clients, *keygen; /* files, PREFIX */
  int quiet, insecure;
} options;

static void *grow(void *p, size_t n, size_t size) {
  void *q = realloc(p, (n + 1) * size);
  if (!q) out_of_memory();
  return q;
}

/* A bad option: one line, the hint, exit 2. */
static void bad_usage(const char *what, const char *arg) {
  fprintf(stderr, "per-server: %s%s%s\n", what, arg ? ": " : "",
          arg ? arg : "");
  fprintf(stderr, "Try 'per-server --help' for the options.\n");
  exit(2);
}

/* An unsigned decimal, the whole of s. */
static int parse_u64(const char *s, uint64_t *out) {
  uint64_t x = 0;
  if (!*s) return 0;
  for (; *s; ++s) {
    unsigned d = (unsigned)(unsigned char)*s - (unsigned)'0';
    if (d > 9u || x > (UINT64_MAX - d) / 10u) return 0;
    x = x * 10u + d;
  }
  *out = x;
  return 1;
}

static int has_newline(const char *s) { return strpbrk(s, "\r\n") != NULL; }

static void parse_args(int argc, char **argv, options *o) {
  int i;
  memset(o, 0, sizeof *o);
  o->max_message = PER_NET_MAX_MESSAGE;
  o->queue = 16;
  for (i = 1; i < argc; ++i) {
    const char *arg = argv[i], *name, *value = NULL, *eq;
    char opt[32];
    size_t len, k;
    if (strncmp(arg, "--", 2) != 0 || arg[2] == 0)
      bad_usage("not an option (they all start with --)", arg);
    name = arg + 2;
    eq = strchr(name, '=');
    len = eq ? (size_t)(eq - name) : strlen(name);
    if (len >= sizeof opt) bad_usage("unknown option", arg);
    memcpy(opt, name, len);
    opt[len] = 0;
    if (!strcmp(opt, "help") || !strcmp(opt, "version") ||
        !strcmp(opt, "quiet") || !strcmp(opt, "insecure")) {
      if (eq) bad_usage("this option takes no value", arg);
      if (!strcmp(opt, "help")) {
        fputs(usage_text, stdout);
        fputs("\n", stdout);
        fputs(usage_text2, stdout);
        exit(fflush(stdout) == 0 ? 0 : 1);
      }
      if (!strcmp(opt, "version")) {
        int major, minor, patch;
        zmq_version(&major, &minor, &patch);
        printf("per-server %s (wire format %d, ZeroMQ %d.%d.%d)\n",
               PER_VERSION_STRING, PER_NET_VERSION, major, minor, patch);
        exit(fflush(stdout) == 0 ? 0 : 1);
      }
      if (!strcmp(opt, "quiet")) o->quiet = 1;
      else o->insecure = 1;
      continue;
    }
    /* Every other option takes a value: --opt=VALUE or --opt VALUE. */
    for (k = 0; k < NKEYS; ++k)
      if (!strcmp(opt, table_keys[k])) break;
    if (k == NKEYS && strcmp(opt, "bind") && strcmp(opt, "spec") &&
        strcmp(opt, "table") && strcmp(opt, "load") &&
        strcmp(opt, "max-message") && strcmp(opt, "ready-file") &&
        strcmp(opt, "checkpoint") && strcmp(opt, "every") &&
        strcmp(opt, "queue") && strcmp(opt, "curve-secret") &&
        strcmp(opt, "curve-clients") && strcmp(opt, "curve-keygen"))
      bad_usage("unknown option", arg);
    if (eq) {
      value = eq + 1;
    } else {
      if (i + 1 >= argc) bad_usage("this option needs a value", arg);
      value = argv[++i];
    }
    if (has_newline(value)) bad_usage("a value with a line break", arg);
    if (k < NKEYS) {
      source *src;
      char key[32];
      size_t j;
      if (o->nsources == 0 || !o->sources[o->nsources - 1].table) {
        fprintf(stderr, "per-server: --%s before any --table: %s\n", opt,
                "a table's options follow its --table NAME");
        fprintf(stderr, "Try 'per-server --help' for the options.\n");
        exit(2);
      }
      src = &o->sources[o->nsources - 1];
      for (j = 0; opt[j]; ++j) key[j] = opt[j] == '-' ? '_' : opt[j];
      key[j] = 0;
      text_adds(&src->spec, key);
      text_adds(&src->spec, " ");
      text_adds(&src->spec, value);
      text_adds(&src->spec, "\n");
      text_adds(&src->given, "--");
      text_adds(&src->given, opt);
      text_adds(&src->given, " ");
      text_adds(&src->given, value);
      text_adds(&src->given, "\n");
    } else if (!strcmp(opt, "table") || !strcmp(opt, "spec")) {
      source *src;
      o->sources = (source *)grow(o->sources, o->nsources, sizeof *src);
      src = &o->sources[o->nsources++];
      memset(src, 0, sizeof *src);
      if (opt[0] == 's') {
        src->file = value;
      } else {
        src->table = value;
        text_adds(&src->spec, "table ");
        text_adds(&src->spec, value);
        text_adds(&src->spec, "\n");
        text_adds(&src->given, "\n");
      }
    } else if (!strcmp(opt, "bind")) {
      o->binds = (const char **)grow(o->binds, o->nbinds, sizeof *o->binds);
      o->binds[o->nbinds++] = value;
    } else if (!strcmp(opt, "load")) {
      const char *at = strchr(value, '=');
      if (!at || at == value || !at[1])
        bad_usage("--load takes NAME=PATH", value);
      o->loads = (const char **)grow(o->loads, o->nloads, sizeof *o->loads);
      o->loads[o->nloads++] = value;
    } else if (!strcmp(opt, "max-message")) {
      if (!parse_u64(value, &o->max_message))
        bad_usage("--max-message takes a number of bytes", value);
    } else if (!strcmp(opt, "curve-secret")) {
      o->curve_secret = value;
    } else if (!strcmp(opt, "curve-clients")) {
      o->curve_clients = value;
    } else if (!strcmp(opt, "curve-keygen")) {
      if (!*value) bad_usage("--curve-keygen takes a path prefix", value);
      o->keygen = value;
    } else if (!strcmp(opt, "queue")) {
      if (!parse_u64(value, &o->queue) || o->queue < 1 || o->queue > 1000000)
        bad_usage("--queue takes a number of messages, 1 to 1000000", value);
    } else if (!strcmp(opt, "checkpoint")) {
      if (!*value) bad_usage("--checkpoint takes a directory", value);
      o->checkpoint = value;
    } else if (!strcmp(opt, "every")) {
      char *end;
      o->every = strtod(value, &end);
      if (end == value || *end || !(o->every > 0) || o->every > 1e9)
        bad_usage("--every takes seconds, a number above 0", value);
    } else {
      o->ready_file = value;
    }
  }
  if (o->keygen) return;
  if (o->curve_clients && !o->curve_secret)
    bad_usage("--curve-clients needs --curve-secret FILE", NULL);
  if (o->nsources == 0)
    bad_usage("no table: give --table NAME --capacity N --item-size N, or "
              "--spec FILE",
              NULL);
  if (o->every > 0 && !o->checkpoint)
    bad_usage("--every needs --checkpoint DIR", NULL);
  if (o->checkpoint && o->nloads)
    bad_usage("--load and --checkpoint: a checkpoint directory holds the "
              "tables' state",
              NULL);
  if (o->nbinds == 0) {
    o->binds = (const char **)grow(NULL, 0, sizeof *o->binds);
    o->binds[o->nbinds++] = DEFAULT_BIND;
  }
}

/* Whether host (n bytes) is a loopback address: 127.x.x.x, ::1 or
   localhost. */
static int loopback_host(const char *h, size_t n) {
  size_t k;
  if (n == 9 && !memcmp(h, "localhost", 9)) return 1;
  if (n == 3 && !memcmp(h, "::1", 3)) return 1;
  if (n < 5 || memcmp(h, "127.", 4)) return 0;
  for (k = 4; k < n; ++k)
    if (h[k] != '.' && (h[k] < '0' || h[k] > '9')) return 0;
  return 1;
}

/* 1 when endpoint may be bound without --insecure: ipc, inproc, or tcp
   on a loopback address. *ipv6 is set for a bracketed tcp address. */
static int endpoint_local(const char *ep, int *ipv6) {
  const char *h, *e;
  if (!strncmp(ep, "ipc://", 6) || !strncmp(ep, "inproc://", 9)) return 1;
  if (strncmp(ep, "tcp://", 6)) return 0;
  h = ep + 6;
  if (*h == '[') {
    e = strchr(h, ']');
    if (!e) return 0;
    *ipv6 = 1;
    return loopback_host(h + 1, (size_t)(e - h - 1));
  }
  e = strrchr(h, ':');
  if (!e) return 0;
  return loopback_host(h, (size_t)(e - h));
}

/* The whole file at path as a string (NULL with errno on failure). */
static char *read_file(const char *path, int *nul) {
  FILE *f = fopen(path, "rb");
  text t = {NULL, 0, 0};
  char chunk[4096];
  size_t got;
  *nul = 0;
  if (!f) return NULL;
  text_add(&t, "", 0);
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (memchr(chunk, 0, got)) *nul = 1;
    text_add(&t, chunk, got);
  }
  if (ferror(f)) {
    int e = errno;
    fclose(f);
    free(t.p);
    errno = e ? e : EIO;
    return NULL;
  }
  fclose(f);
  return t.p;
}

/* An inline table's refusal, said of the option that made the line it
   names: "per_net_add_spec: line N: why" of the spec text, whose line 1
   is --table NAME and line k + 1 the table's k-th option. */
static void inline_error(const source *src, const char *error) {
  static const char pre[] = "per_net_add_spec: line ";
  const char *why = error, *opt = "";
  int len = 0;
  if (!strncmp(error, pre, sizeof pre - 1)) {
    char *end;
    unsigned long line = strtoul(error + sizeof pre - 1, &end, 10);
    if (!strncmp(end, ": ", 2)) {
      const char *p = src->given.p;
      why = end + 2;
      while (p && --line > 0 && (p = strchr(p, '\n')) != NULL) ++p;
      if (p && line == 0) {
        opt = p;
        len = (int)strcspn(p, "\n");
      }
    }
  }
  fprintf(stderr, "per-server: --table %s%s%.*s: %s\n", src->table,
          len ? ", " : "", len, opt, why);
}

/* The tables of every source, in order; exits 2 on an error. */
static void add_tables(per_net_server *srv, const options *o) {
  size_t k;
  for (k = 0; k < o->nsources; ++k) {
    const source *src = &o->sources[k];
    if (src->file) {
      int nul;
      char *spec = read_file(src->file, &nul);
      if (!spec) {
        fprintf(stderr, "per-server: --spec %s: %s\n", src->file,
                strerror(errno));
        exit(2);
      }
      if (nul) {
        fprintf(stderr, "per-server: --spec %s: a NUL byte: not a text\n",
                src->file);
        exit(2);
      }
      if (per_net_add_spec(srv, spec) != PER_OK) {
        fprintf(stderr, "per-server: --spec %s: %s\n", src->file, srv->error);
        exit(2);
      }
      free(spec);
    } else if (per_net_add_spec(srv, src->spec.p) != PER_OK) {
      inline_error(src, srv->error);
      exit(2);
    }
  }
}

/* --load NAME=PATH, each; exits 2 for an unknown table, 1 when a load
   fails. */
static void load_tables(per_net_server *srv, const options *o) {
  size_t k;
  for (k = 0; k < o->nloads; ++k) {
    const char *spec = o->loads[k], *eq = strchr(spec, '=');
    per_net_table *t = per_net_find(srv, spec, (size_t)(eq - spec));
    per_status st;
    if (!t) {
      fprintf(stderr, "per-server: --load %s: no table named \"%.*s\"\n", spec,
              (int)(eq - spec), spec);
      exit(2);
    }
    st = per_net_load(srv, t, eq + 1);
    if (st != PER_OK) {
      fprintf(stderr, "per-server: --load %s: %s\n", spec, srv->error);
      exit(1);
    }
  }
}

static void zmq_fail(const char *what) {
  fprintf(stderr, "per-server: %s: %s\n", what, zmq_strerror(zmq_errno()));
  exit(1);
}

typedef struct counts {
  uint64_t dropped; /* messages of a shape other than a request's */
  uint64_t denied;  /* CURVE clients refused (--curve-clients) */
} counts;

/* ---- CURVE ---- */

/* --curve-keygen PREFIX: a new pair into PREFIX.secret (0600) and
   PREFIX.public, each the key and a line break; exits (0, or 1). */
static void keygen(const char *prefix) {
  char pub[41], sec[41];
  text path = {NULL, 0, 0};
  int k;
  if (!zmq_has("curve")) {
    fprintf(stderr, "per-server: --curve-keygen: this libzmq has no CURVE\n");
    exit(1);
  }
  if (zmq_curve_keypair(pub, sec) != 0) zmq_fail("zmq_curve_keypair");
  for (k = 0; k < 2; ++k) {
    const char *key = k ? pub : sec;
    int fd;
    FILE *f;
    path.n = 0;
    text_adds(&path, prefix);
    text_adds(&path, k ? ".public" : ".secret");
    fd = open(path.p, O_WRONLY | O_CREAT | O_TRUNC, k ? 0644 : 0600);
    f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f || fprintf(f, "%s\n", key) < 0 || fclose(f) != 0) {
      fprintf(stderr, "per-server: --curve-keygen %s: %s\n", path.p,
              strerror(errno));
      exit(1);
    }
    fprintf(stderr, "per-server: wrote %s\n", path.p);
  }
  free(path.p);
  exit(0);
}

/* The keys of a file: 40 characters of Z85 a line, blanks around them
   and lines that are blank or start with # skipped; each decoded into
   out (32 bytes each, grown), their count in *n. Exits 2 on a bad line
   (one key at most when `one`). */
static unsigned char *read_keys(const char *opt, const char *path, int one,
                                size_t *n) {
  int nul;
  char *file = read_file(path, &nul), *line;
  unsigned char *keys = NULL;
  unsigned no = 0;
  *n = 0;
  if (!file || nul) {
    fprintf(stderr, "per-server: %s %s: %s\n", opt, path,
            nul ? "a NUL byte: not a text" : strerror(errno));
    exit(2);
  }
  for (line = file; line && *line;) {
    char *end = strchr(line, '\n'), *a = line, *b;
    if (end) *end = 0;
    ++no;
    while (*a == ' ' || *a == '\t' || *a == '\r') ++a;
    b = a + strlen(a);
    while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r')) *--b = 0;
    if (*a && *a != '#') {
      keys = (unsigned char *)grow(keys, *n, 32);
      if (b - a != 40 || !zmq_z85_decode(keys + 32 * *n, a) ||
          (one && *n == 1)) {
        fprintf(stderr, "per-server: %s %s: line %u: %s\n", opt, path, no,
                one && *n == 1 ? "a second key (the file holds one)"
                               : "not a key: 40 characters of Z85");
        exit(2);
      }
      ++*n;
    }
    line = end ? end + 1 : NULL;
  }
  free(file);
  if (*n == 0) {
    fprintf(stderr, "per-server: %s %s: no key in it\n", opt, path);
    exit(2);
  }
  return keys;
}

/* One ZAP request (RFC 27) on zap, answered: 200 for a CURVE client
   whose public key is among the n keys, 400 otherwise. 0 when none was
   waiting. */
static int serve_zap(void *zap, const unsigned char *keys, size_t n,
                     counts *c) {
  zmq_msg_t f[8], spare;
  int nf = 0, more = 1, k, ok = 0;
  const char *status = "400", *why = "unknown client key";
  while (more) {
    zmq_msg_t *m = nf < 8 ? &f[nf] : &spare;
    zmq_msg_init(m);
    if (zmq_msg_recv(m, zap, nf == 0 ? ZMQ_DONTWAIT : 0) < 0) {
      zmq_msg_close(m);
      if (nf == 0) return 0;
      if (zmq_errno() == EINTR) continue;
      zmq_fail("ZAP receive");
    }
    more = zmq_msg_more(m);
    if (m == &spare) zmq_msg_close(m);
    else ++nf;
  }
  /* version, request id, domain, address, identity, mechanism, key */
  if (nf == 7 && zmq_msg_size(&f[5]) == 5 &&
      memcmp(zmq_msg_data(&f[5]), "CURVE", 5) == 0 &&
      zmq_msg_size(&f[6]) == 32) {
    size_t j;
    for (j = 0; j < n && !ok; ++j)
      ok = memcmp(keys + 32 * j, zmq_msg_data(&f[6]), 32) == 0;
  }
  if (ok) {
    status = "200";
    why = "OK";
  } else {
    c->denied++;
  }
  if (nf >= 2) {
    zmq_send(zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(zap, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
    zmq_send(zap, status, 3, ZMQ_SNDMORE);
    zmq_send(zap, why, strlen(why), ZMQ_SNDMORE);
    zmq_send(zap, "", 0, ZMQ_SNDMORE);
    zmq_send(zap, "", 0, 0);
  }
  for (k = 0; k < nf; ++k) zmq_msg_close(&f[k]);
  return 1;
}

/* --checkpoint DIR: restore from it when it holds a checkpoint, else
   make it when missing; exits 1 on failure. */
static void open_checkpoint(per_net_server *srv, const options *o) {
  char *state;
  size_t n;
  struct stat st;
  if (!o->checkpoint) return;
  n = strlen(o->checkpoint) + sizeof PER_NET_STATE_FILE + 2;
  state = (char *)malloc(n);
  if (!state) out_of_memory();
  snprintf(state, n, "%s/%s", o->checkpoint, PER_NET_STATE_FILE);
  if (stat(state, &st) == 0) {
    if (per_net_restore(srv, o->checkpoint) != PER_OK) {
      fprintf(stderr, "per-server: --checkpoint %s: %s\n", o->checkpoint,
              srv->error);
      exit(1);
    }
    if (!o->quiet)
      fprintf(stderr, "per-server: restored generation %llu from %s\n",
              (unsigned long long)srv->generation, o->checkpoint);
  } else if (mkdir(o->checkpoint, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "per-server: --checkpoint %s: %s\n", o->checkpoint,
            strerror(errno));
    exit(1);
  }
  free(state);
}

/* Save into --checkpoint's directory: 1 done, 0 failed (said on stderr). */
static int save_checkpoint(per_net_server *srv, const options *o) {
  if (per_net_save(srv, o->checkpoint) != PER_OK) {
    fprintf(stderr, "per-server: --checkpoint %s: %s\n", o->checkpoint,
            srv->error);
    return 0;
  }
  return 1;
}

/* Seconds on a monotonic clock. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile sig_atomic_t stop = 0;

static void on_signal(int sig) { stop = sig; }

static void install_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_signal; /* no SA_RESTART: zmq_poll returns EINTR */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sa.sa_handler = SIG_IGN; /* a closed stderr or ready file's reader */
  sigaction(SIGPIPE, &sa, NULL);
}

/* The endpoints into path, one a line: a temporary file renamed. */
static int write_ready(const char *path, const text *endpoints) {
  text tmp = {NULL, 0, 0};
  char pid[32];
  FILE *f;
  int ok;
  snprintf(pid, sizeof pid, ".tmp.%ld", (long)getpid());
  text_adds(&tmp, path);
  text_adds(&tmp, pid);
  f = fopen(tmp.p, "w");
  if (!f) {
    free(tmp.p);
    return 0;
  }
  ok = fwrite(endpoints->p, 1, endpoints->n, f) == endpoints->n;
  ok = (fclose(f) == 0) && ok;
  ok = ok && rename(tmp.p, path) == 0;
  if (!ok) {
    int e = errno;
    remove(tmp.p);
    errno = e;
  }
  free(tmp.p);
  return ok;
}

/* Send a reply as the last frame: one of ZERO_COPY bytes or more in the
   server's own memory, taken from it (per_net_take_reply) and freed by
   ZeroMQ once sent or dropped; a smaller one copied (the copy costs less
   than a block a reply). zmq_send's result. */
#define ZERO_COPY (64u << 10)
static int send_reply(void *sock, per_net_server *srv, const void *reply,
                      size_t len) {
  zmq_msg_t m;
  void *block = len >= ZERO_COPY ? per_net_take_reply(srv, reply) : NULL;
  int r;
  if (!block) return zmq_send(sock, reply, len, ZMQ_DONTWAIT);
  if (zmq_msg_init_data(&m, block, len, per_net_reply_free, srv->alloc_ctx)) {
    per_net_reply_free(block, srv->alloc_ctx);
    return -1;
  }
  r = zmq_msg_send(&m, sock, ZMQ_DONTWAIT);
  if (r < 0) { /* not sent: closing it frees the block */
    int e = errno;
    zmq_msg_close(&m);
    errno = e;
  }
  return r;
}

/* Serve one message if one is waiting: 1 served (or dropped), 0 none
   waiting, -1 the socket failed. The payload is read in place from its
   zmq_msg_t; the reply goes out by send_reply (ZeroMQ may still be
   sending it at the next request, which is why a reply in the server's
   memory is either copied or taken from it). */
static int serve_one(void *sock, per_net_server *srv, counts *c) {
  zmq_msg_t f[MAX_FRAMES], spare;
  int n = 0, more = 1, over = 0, k, delim, ok = 1;
  while (more) {
    zmq_msg_t *m = n < MAX_FRAMES ? &f[n] : &spare;
    zmq_msg_init(m);
    if (zmq_msg_recv(m, sock, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
      int e = zmq_errno();
      zmq_msg_close(m);
      if (n == 0 && (e == EAGAIN || e == EINTR)) return 0;
      if (e == EINTR) continue; /* the rest of a message is there */
      for (k = 0; k < n; ++k) zmq_msg_close(&f[k]);
      return -1;
    }
    more = zmq_msg_more(m);
    if (m == &spare) {
      zmq_msg_close(m);
      over = 1;
    } else {
      ++n;
    }
  }
  /* [identity, payload] from a DEALER; [identities..., "", payload] from
     a REQ (directly or through ROUTER-DEALER proxies). */
  delim = n >= 3;
  if (over || n < 2) ok = 0;
  if (ok && delim) {
    if (zmq_msg_size(&f[n - 2]) != 0) ok = 0;
    for (k = 0; ok && k < n - 2; ++k)
      if (zmq_msg_size(&f[k]) == 0) ok = 0;
  }
  if (!ok) {
    c->dropped++;
  } else {
    const void *reply;
    size_t reply_len;
    per_net_handle(srv, zmq_msg_data(&f[n - 1]), zmq_msg_size(&f[n - 1]),
                   &reply, &reply_len);
    /* A ROUTER without ZMQ_ROUTER_MANDATORY drops a reply to a client
       that left, or whose queue is full, and never blocks. */
    for (k = 0; k < n - 1; ++k)
      if (zmq_msg_send(&f[k], sock, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) break;
    if (k == n - 1 && send_reply(sock, srv, reply, reply_len) < 0 &&
        zmq_errno() == ETERM)
      ok = -1;
  }
  for (k = 0; k < n; ++k) zmq_msg_close(&f[k]);
  return ok < 0 ? -1 : 1;
}

int main(int argc, char **argv) {
  options o;
  per_net_server srv;
  text endpoints = {NULL, 0, 0}, tables = {NULL, 0, 0};
  void *ctx, *sock;
  counts c = {0};
  size_t k;
  int ipv6 = 0, opt;
  int64_t maxmsg;
  unsigned char *secret = NULL, *clients = NULL;
  size_t nkeys = 0, nclients = 0;
  void *zap = NULL;
  double saved_at;
  uint64_t saved_requests;
  parse_args(argc, argv, &o);
  if (o.keygen) keygen(o.keygen);
  install_signals();
  if (o.curve_secret) {
    secret = read_keys("--curve-secret", o.curve_secret, 1, &nkeys);
    if (!zmq_has("curve")) {
      fprintf(stderr, "per-server: --curve-secret: this libzmq has no "
                      "CURVE\n");
      exit(2);
    }
  }
  if (o.curve_clients)
    clients = read_keys("--curve-clients", o.curve_clients, 0, &nclients);

  for (k = 0; k < o.nbinds; ++k)
    if (!endpoint_local(o.binds[k], &ipv6) && !o.insecure && !clients) {
      fprintf(stderr,
              "per-server: --bind %s: not a loopback address (127.x.x.x, "
              "::1, localhost), ipc:// or inproc://: anyone who reaches it "
              "could read and change the tables. Give --curve-secret and "
              "--curve-clients (only clients with those keys get in), or "
              "--insecure\n",
              o.binds[k]);
      exit(2);
    }
  if (per_net_init(&srv, o.max_message, NULL) != PER_OK) {
    fprintf(stderr, "per-server: --max-message: %s\n", srv.error);
    exit(2);
  }
  add_tables(&srv, &o);
  load_tables(&srv, &o);
  open_checkpoint(&srv, &o);

  ctx = zmq_ctx_new();
  if (!ctx) zmq_fail("zmq_ctx_new");
  if (clients) { /* the ZAP handler, before any connection */
    zap = zmq_socket(ctx, ZMQ_REP);
    opt = 0;
    if (!zap || zmq_setsockopt(zap, ZMQ_LINGER, &opt, sizeof opt) ||
        zmq_bind(zap, "inproc://zeromq.zap.01") != 0)
      zmq_fail("the ZAP handler (inproc://zeromq.zap.01)");
  }
  sock = zmq_socket(ctx, ZMQ_ROUTER);
  if (!sock) zmq_fail("zmq_socket");
  if (secret) {
    opt = 1;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &opt, sizeof opt) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, secret, 32) ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "per", 3))
      zmq_fail("zmq_setsockopt CURVE");
  }
  opt = 0;
  if (zmq_setsockopt(sock, ZMQ_LINGER, &opt, sizeof opt) ||
      zmq_setsockopt(sock, ZMQ_ROUTER_MANDATORY, &opt, sizeof opt))
    zmq_fail("zmq_setsockopt");
  opt = (int)o.queue;
  if (zmq_setsockopt(sock, ZMQ_SNDHWM, &opt, sizeof opt) ||
      zmq_setsockopt(sock, ZMQ_RCVHWM, &opt, sizeof opt))
    zmq_fail("zmq_setsockopt");
  maxmsg = (int64_t)o.max_message;
  if (zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg))
    zmq_fail("zmq_setsockopt ZMQ_MAXMSGSIZE");
  if (ipv6) {
    opt = 1;
    if (zmq_setsockopt(sock, ZMQ_IPV6, &opt, sizeof opt))
      zmq_fail("zmq_setsockopt ZMQ_IPV6");
  }
  for (k = 0; k < o.nbinds; ++k) {
    char last[1024];
    size_t len = sizeof last;
    if (zmq_bind(sock, o.binds[k]) != 0) {
      fprintf(stderr, "per-server: --bind %s: %s\n", o.binds[k],
              zmq_strerror(zmq_errno()));
      exit(1);
    }
    if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, last, &len) != 0 || !len)
      zmq_fail("zmq_getsockopt ZMQ_LAST_ENDPOINT");
    last[sizeof last - 1] = 0;
    text_adds(&endpoints, last);
    text_adds(&endpoints, "\n");
  }
  if (o.ready_file && !write_ready(o.ready_file, &endpoints)) {
    fprintf(stderr, "per-server: --ready-file %s: %s\n", o.ready_file,
            strerror(errno));
    exit(1);
  }
  if (!o.quiet) {
    char one[PER_NET_NAME_MAX + 64];
    for (k = 0; k < srv.ntables; ++k) {
      const per_net_table *t = srv.tables[k];
      snprintf(one, sizeof one, "%s%s(%lu, %lu)", k ? ", " : "", t->name,
               (unsigned long)t->buf.cfg.capacity,
               (unsigned long)t->buf.cfg.item_size);
      text_adds(&tables, one);
    }
    text_adds(&tables, " on ");
    for (k = 0; k < endpoints.n; ++k)
      if (endpoints.p[k] != '\n') text_add(&tables, endpoints.p + k, 1);
      else if (k + 1 < endpoints.n) text_adds(&tables, ", ");
    fprintf(stderr, "per-server: serving %s\n", tables.p);
  }

  saved_at = now_s();
  saved_requests = srv.requests;
  while (!stop) {
    zmq_pollitem_t item[2];
    int rc, burst;
    if (o.every > 0 && srv.requests != saved_requests &&
        now_s() - saved_at >= o.every) {
      save_checkpoint(&srv, &o); /* a failure is said; the next may work */
      saved_at = now_s();
      saved_requests = srv.requests;
    }
    memset(item, 0, sizeof item);
    item[0].socket = sock;
    item[0].events = ZMQ_POLLIN;
    item[1].socket = zap;
    item[1].events = ZMQ_POLLIN;
    rc = zmq_poll(item, zap ? 2 : 1, 200);
    if (rc < 0) {
      if (zmq_errno() == EINTR) continue;
      zmq_fail("zmq_poll");
    }
    while (zap && serve_zap(zap, clients, nclients, &c)) continue;
    for (burst = 0; rc > 0 && burst < BURST && !stop; ++burst) {
      int got = serve_one(sock, &srv, &c);
      if (got < 0) zmq_fail("receive");
      if (got == 0) break;
    }
  }

  zmq_close(sock);
  if (zap) zmq_close(zap);
  zmq_ctx_term(ctx);
  if (o.ready_file) remove(o.ready_file);
  if (o.checkpoint) {
    if (!save_checkpoint(&srv, &o)) {
      per_net_free(&srv);
      exit(1);
    }
    if (!o.quiet)
      fprintf(stderr, "per-server: saved generation %llu to %s\n",
              (unsigned long long)srv.generation, o.checkpoint);
  }
  if (!o.quiet) {
    fprintf(stderr, "per-server: stopped after %llu requests (%llu refused",
            (unsigned long long)srv.requests, (unsigned long long)srv.refused);
    if (srv.repeats)
      fprintf(stderr, "; %llu once-only repeats answered from memory",
              (unsigned long long)srv.repeats);
    if (c.dropped)
      fprintf(stderr, "; %llu messages not shaped as requests dropped",
              (unsigned long long)c.dropped);
    if (c.denied)
      fprintf(stderr, "; %llu CURVE clients refused",
              (unsigned long long)c.denied);
    fprintf(stderr, ")\n");
  }
  per_net_free(&srv);
  for (k = 0; k < o.nsources; ++k) {
    free(o.sources[k].spec.p);
    free(o.sources[k].given.p);
  }
  free(o.sources);
  free(o.binds);
  free(o.loads);
  free(endpoints.p);
  free(tables.p);
  free(secret);
  free(clients);
  return 0;
}
