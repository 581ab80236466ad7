/* Many clients on one per-server at once:

     server-many-test PER_SERVER

   1. 64 actor threads, each its own per_net_client, insert 40
      trajectories of 1 to 8 items (each item names its actor and step)
      while 4 learner threads sample batches of 32 and update their
      priorities. Every call succeeds (a learner's PER_ERR_EMPTY before
      the first insert is counted), every item sampled is one an actor
      sent, and at the end INFO counts exactly what was sent: the items,
      the trajectories, the inserts, the samples and updates, the
      refusals.
   2. A slow learner: a DEALER that sends 1500 SAMPLE requests whose
      replies are 300 KiB each (450 MB in all) and never reads one. With
      --queue 16 the server keeps at most 16 replies for it and drops the
      rest: its resident memory grows by less than 96 MiB, and another
      client is answered meanwhile.
   3. A dead client: a child process connects, sends an INSERT and a
      SAMPLE and exits without closing anything; the server goes on
      serving, the INSERT applied.
   SIGTERM then stops the server: exit status 0. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

#define PER_IMPLEMENTATION
#include "per.h"
#define PER_NET_IMPLEMENTATION
#include "per_net.h"
#include "../tests/t.h"
#include "child.h"

#define ACTORS 64
#define LEARNERS 4
#define TRAJS 40  /* trajectories an actor inserts */
#define ITEM 64   /* bytes an item */
#define B 32      /* a learner's batch */
#define SLOW 1500 /* requests of the slow learner */
#define SLOW_B 4096
#define WAIT_MS 30000

static char endpoint[256];
static volatile int actors_left = ACTORS;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct work {
  int who;
  uint64_t items, trajs, samples, updates, empty, errors, bad_items;
  char error[256];
} work;

/* An item: actor, step, and a check word. */
static void make_item(unsigned char *p, uint32_t actor, uint32_t step) {
  memset(p, 0, ITEM);
  put(p, actor, 4);
  put(p + 4, step, 4);
  put(p + 8, (uint64_t)actor * 1000003u + step, 8);
}

static int item_ok(const unsigned char *p) {
  uint64_t actor = get(p, 4), step = get(p + 4, 4);
  return actor < ACTORS && get(p + 8, 8) == actor * 1000003u + step;
}

static void fail(work *w, const char *what, const per_net_client *c,
                 per_status st) {
  if (!w->errors)
    snprintf(w->error, sizeof w->error, "%s %d: %s (%d)", what, w->who,
             c->error, (int)st);
  w->errors++;
}

static void *actor(void *arg) {
  work *w = (work *)arg;
  per_net_client c;
  unsigned char items[8 * ITEM];
  uint64_t rng = 977u * (uint64_t)w->who + 1u;
  uint32_t step = 0, k, j;
  per_status st = per_net_client_open(&c, endpoint, "r", ITEM, "", WAIT_MS);
  if (st != PER_OK) {
    fail(w, "actor open", &c, st);
  } else {
    for (k = 0; k < TRAJS; ++k) {
      uint32_t n;
      rng = rng * 6364136223846793005u + 1442695040888963407u;
      n = 1u + (uint32_t)((rng >> 33) % 8u);
      for (j = 0; j < n; ++j)
        make_item(items + (size_t)j * ITEM, (uint32_t)w->who, step++);
      st = per_net_client_insert(&c, items, n, NULL, NULL, NULL);
      if (st != PER_OK) {
        fail(w, "actor insert", &c, st);
        break;
      }
      w->items += n;
      w->trajs++;
    }
  }
  per_net_client_close(&c);
  pthread_mutex_lock(&mu);
  actors_left--;
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void *learner(void *arg) {
  work *w = (work *)arg;
  per_net_client c;
  static unsigned char items[LEARNERS][B * ITEM];
  uint64_t ids[B];
  float td[B];
  uint32_t j;
  int left;
  per_status st = per_net_client_open(&c, endpoint, "r", ITEM, "", WAIT_MS);
  if (st != PER_OK) {
    fail(w, "learner open", &c, st);
    return NULL;
  }
  do {
    pthread_mutex_lock(&mu);
    left = actors_left;
    pthread_mutex_unlock(&mu);
    st = per_net_client_sample(&c, B, NULL, items[w->who], ids, NULL, NULL);
    if (st == PER_ERR_EMPTY) {
      w->empty++;
      sleep_ms(1);
      continue;
    }
    if (st != PER_OK) {
      fail(w, "learner sample", &c, st);
      break;
    }
    w->samples++;
    for (j = 0; j < B; ++j) {
      if (!item_ok(items[w->who] + (size_t)j * ITEM)) w->bad_items++;
      td[j] = (float)(j % 7) * 0.5f;
    }
    st = per_net_client_update(&c, ids, td, B, 0, NULL);
    if (st != PER_OK) {
      fail(w, "learner update", &c, st);
      break;
    }
    w->updates++;
  } while (left > 0);
  per_net_client_close(&c);
  return NULL;
}

/* The server's resident memory, KiB (VmRSS), or 0. */
static long rss_kib(pid_t pid) {
  char path[64], line[256];
  long kib = 0;
  FILE *f;
  snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
  f = fopen(path, "r");
  if (!f) return 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

static void info_now(per_net_client *c, per_net_info *info) {
  CHECK_STATUS(per_net_client_info(c, info), PER_OK);
}

/* A request's header for table "r": its length. */
static size_t req_head(unsigned char *p, unsigned op, uint64_t id) {
  memcpy(p, "PERQ", 4);
  put(p + 4, 1, 2);
  put(p + 6, op, 2);
  put(p + 8, id, 8);
  p[16] = 1;
  p[17] = 'r';
  return 18;
}

static size_t sample_req(unsigned char *p, uint64_t id, uint32_t b) {
  size_t n = req_head(p, PER_NET_SAMPLE, id);
  put(p + n, b, 4);
  memset(p + n + 4, 0, 20); /* flags, beta, window, want: items too */
  return n + 24;
}

static void many(void) {
  pthread_t th[ACTORS + LEARNERS];
  static work w[ACTORS + LEARNERS];
  uint64_t items = 0, trajs = 0, samples = 0, updates = 0, empty = 0;
  per_net_client c;
  per_net_info info;
  int k;
  for (k = 0; k < ACTORS + LEARNERS; ++k) {
    w[k].who = k < ACTORS ? k : k - ACTORS;
    REQUIRE(pthread_create(&th[k], NULL, k < ACTORS ? actor : learner, &w[k]) ==
            0);
  }
  for (k = 0; k < ACTORS + LEARNERS; ++k) {
    REQUIRE(pthread_join(th[k], NULL) == 0);
    CHECK_MSG(w[k].errors == 0, "%s", w[k].error);
    CHECK_EQ_U(w[k].bad_items, 0);
    items += w[k].items;
    trajs += w[k].trajs;
    samples += w[k].samples;
    updates += w[k].updates;
    empty += w[k].empty;
  }
  CHECK_EQ_U(trajs, ACTORS * TRAJS);
  CHECK(samples > 0 && updates == samples);
  CHECK_OK(per_net_client_open(&c, endpoint, "r", ITEM, "", WAIT_MS));
  info_now(&c, &info);
  CHECK_EQ_U(info.added, items);
  CHECK_EQ_U(info.trajectories, trajs);
  CHECK_EQ_U(info.inserts, trajs);
  CHECK_EQ_U(info.samples, samples);
  CHECK_EQ_U(info.updates, updates);
  CHECK_EQ_U(info.refused, empty);
  printf("many: %d actors inserted %llu items in %llu trajectories while "
         "%d learners sampled %llu batches of %d\n",
         ACTORS, (unsigned long long)items, (unsigned long long)trajs, LEARNERS,
         (unsigned long long)samples, B);
  per_net_client_close(&c);
}

static void slow_learner(pid_t server_pid) {
  void *ctx = zmq_ctx_new(), *s;
  unsigned char req[64];
  per_net_client c;
  per_net_info info;
  long before, after;
  int k, hwm = 100000, zero = 0, one = 1, small = 4096;
  double t0;
  REQUIRE(ctx != NULL);
  s = zmq_socket(ctx, ZMQ_DEALER);
  REQUIRE(s != NULL);
  REQUIRE(zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) == 0);
  REQUIRE(zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm) == 0);
  /* it takes in (and so holds) as little as it can itself */
  REQUIRE(zmq_setsockopt(s, ZMQ_RCVHWM, &one, sizeof one) == 0);
  REQUIRE(zmq_setsockopt(s, ZMQ_RCVBUF, &small, sizeof small) == 0);
  REQUIRE(zmq_connect(s, endpoint) == 0);
  CHECK_OK(per_net_client_open(&c, endpoint, "r", ITEM, "", WAIT_MS));
  info_now(&c, &info);
  CHECK(info.size >= SLOW_B);
  before = rss_kib(server_pid);
  for (k = 0; k < SLOW; ++k) {
    size_t n = sample_req(req, (uint64_t)k + 1u, SLOW_B);
    REQUIRE(zmq_send(s, req, n, 0) == (int)n);
  }
  /* the server has read them all when another client's INFO, sent
     after, comes back; meanwhile it is answered */
  t0 = (double)time(NULL);
  for (k = 0; k < 200; ++k) {
    info_now(&c, &info);
    if (info.samples >= (uint64_t)SLOW) break;
    sleep_ms(50);
  }
  CHECK_MSG(info.samples >= (uint64_t)SLOW, "%llu samples",
            (unsigned long long)info.samples);
  after = rss_kib(server_pid);
  CHECK_MSG(after - before < 96 * 1024,
            "per-server grew by %ld KiB for a client that reads nothing",
            after - before);
  printf("slow learner: %d replies of %d items unread; per-server's memory "
         "%ld KiB before, %ld KiB after (%.0f s)\n",
         SLOW, SLOW_B, before, after, (double)time(NULL) - t0);
  zmq_close(s);
  zmq_ctx_term(ctx);
  info_now(&c, &info); /* still served after it left */
  per_net_client_close(&c);
}

static void dead_client(void) {
  per_net_client c;
  per_net_info before, after;
  pid_t pid;
  int status;
  CHECK_OK(per_net_client_open(&c, endpoint, "r", ITEM, "", WAIT_MS));
  info_now(&c, &before);
  fflush(stdout);
  pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) { /* connects, sends, leaves without closing anything */
    void *ctx = zmq_ctx_new(), *s = ctx ? zmq_socket(ctx, ZMQ_DEALER) : NULL;
    unsigned char req[64 + ITEM];
    size_t n;
    if (!s || zmq_connect(s, endpoint) != 0) _exit(3);
    n = req_head(req, PER_NET_INSERT, PER_NET_ONCE | 42u);
    put(req + n, 1, 4);
    put(req + n + 4, 0, 4);
    make_item(req + n + 8, 0, 999999);
    if (zmq_send(s, req, n + 8 + ITEM, 0) < 0) _exit(3);
    n = sample_req(req, 43, 8);
    if (zmq_send(s, req, n, 0) < 0) _exit(3);
    sleep_ms(200); /* time for ZeroMQ to send both */
    _exit(0);
  }
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  sleep_ms(100);
  info_now(&c, &after);
  CHECK_EQ_U(after.added, before.added + 1u);
  CHECK_EQ_U(after.inserts, before.inserts + 1u);
  per_net_client_close(&c);
}

static void clean(void) {
  char p[128];
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    child = -1;
  }
  if (!dir[0]) return;
  snprintf(p, sizeof p, "%s/ready", dir);
  remove(p);
  rmdir(dir);
}

int main(int argc, char **argv) {
  const char *args[] = {"--bind",
                        "tcp://127.0.0.1:*",
                        "--ready-file",
                        NULL,
                        "--quiet",
                        "--queue",
                        "16",
                        "--table",
                        "r",
                        "--capacity",
                        "100000",
                        "--item-size",
                        "64",
                        "--seed",
                        "3",
                        NULL};
  char ready[128];
  if (argc != 2) {
    fprintf(stderr, "usage: server-many-test PER_SERVER\n");
    return 2;
  }
  server = argv[1];
  snprintf(dir, sizeof dir, "/tmp/per-many-test-XXXXXX");
  REQUIRE(mkdtemp(dir) != NULL);
  atexit(clean);
  snprintf(ready, sizeof ready, "%s/ready", dir);
  args[3] = ready;
  { /* under AddressSanitizer, freed replies would stay in its quarantine
       and count as the server's memory: none for this server */
    static char asan[1024];
    const char *had = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "%s%squarantine_size_mb=0", had ? had : "",
             had && *had ? ":" : "");
    REQUIRE(setenv("ASAN_OPTIONS", asan, 1) == 0);
  }
  child = start(args, NULL, NULL);
  line_of(wait_ready(ready, NULL), 0, endpoint, sizeof endpoint);
  many();
  slow_learner(child);
  dead_client();
  REQUIRE(kill(child, SIGTERM) == 0);
  CHECK_EQ_U(finish(child), 0);
  return t_done("server many clients");
}
