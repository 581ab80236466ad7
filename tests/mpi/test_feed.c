/* per_mpi.h's feed under mpirun -np 1, 2, 3 and 4: actors hand batches
   to replay ranks without waiting for them. Rank 0 (and rank 1 from four
   ranks on) receive; the others send, each to receiver r % R.
   - ordered: a receiver that drains with PER_MPI_FEED_ORDERED holds
     exactly the buffer built by adding every message in the fixed order
     (one per sender in turn), bit for bit, TD priorities and ends
     included; the receiver starts late on purpose, so that senders with
     two slots of 16 KB messages must wait (back-pressure, counted);
   - arrival order: every message stored exactly once, each sender's in
     the order sent;
   - shutdown: free with messages still in flight neither hangs nor
     leaks; a message the shard refuses (a NaN td) is counted, not
     stored;
   - errors agreed at init, and a send or drain refused locally. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdlib.h>
#include <time.h>

#include "heap.h"

#define PER_IMPLEMENTATION
#include "per.h"
#define PER_MPI_IMPLEMENTATION
#include "per_mpi.h"

#include "t.h"

#define ISZ 256 /* bytes per item: 64 items a message are 16 KB + */
#define MAXN 64
#define MSGS 40

static int me, W, R;

typedef struct item {
  uint32_t sender, msg, j;
  unsigned char pad[ISZ - 12];
} item;

static int receiver(int r) { return r < R; }

/* Message m of sender a: its size, items, TD errors and ends. */
static uint32_t msg_n(int a, uint32_t m) {
  return 1 + (uint32_t)((a * 7 + (int)m * 13) % MAXN);
}
static void msg_fill(int a, uint32_t m, item *it, float *td, uint8_t *ends) {
  uint32_t j, n = msg_n(a, m);
  for (j = 0; j < n; ++j) {
    memset(&it[j], 0, sizeof it[j]);
    it[j].sender = (uint32_t)a;
    it[j].msg = m;
    it[j].j = j;
    it[j].pad[j % sizeof it[j].pad] = (unsigned char)(a + m);
    td[j] = (float)((a + 1) * 0.25 + m * 0.125 - j * 0.01);
    ends[j] =
        (uint8_t)(j + 1 == n && m % 3 == 2 ? PER_END_TERMINATED : PER_END_NONE);
  }
}

static per_config cfg_of(uint32_t capacity) {
  per_config c = per_config_default(capacity, sizeof(item));
  c.alpha = 0.6;
  c.eps = 1e-3;
  return c;
}

static void nap(long ms) {
  struct timespec t;
  t.tv_sec = ms / 1000;
  t.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&t, NULL);
}

/* Every message of every sender of receiver `me`, added in the fixed
   order: one per sender in turn (ascending ranks). */
static void reference(per_buffer *ref, int *senders, int ns) {
  static item it[MAXN];
  static float td[MAXN];
  static uint8_t ends[MAXN];
  uint32_t m;
  int k;
  for (m = 0; m < MSGS; ++m)
    for (k = 0; k < ns; ++k) {
      msg_fill(senders[k], m, it, td, ends);
      REQUIRE(per_buffer_add_td(ref, it, msg_n(senders[k], m), ends, td) ==
              PER_OK);
    }
}

static int same_buffer(const per_buffer *a, const per_buffer *b) {
  size_t cap = a->cfg.capacity;
  return a->size == b->size && a->pos == b->pos && a->added == b->added &&
         a->trajs == b->trajs && a->max_leaf == b->max_leaf &&
         memcmp(a->items, b->items, cap * sizeof(item)) == 0 &&
         memcmp(a->ends, b->ends, cap) == 0 &&
         memcmp(a->tree.node, b->tree.node,
                2 * (size_t)a->tree.leaves * sizeof(per_real)) == 0;
}

static void run(uint32_t flags) {
  static item it[MAXN];
  static float td[MAXN];
  static uint8_t ends[MAXN];
  per_mpi_feed f;
  per_buffer shard;
  int dest = receiver(me) ? PER_MPI_FEED_NONE : me % R;
  int senders[8], ns = 0, r;
  uint64_t got = 0;
  uint32_t m;
  for (r = R; r < W; ++r)
    if (r % R == me) senders[ns++] = r;
  CHECK_OK(
      per_mpi_feed_init(&f, MPI_COMM_WORLD, dest, sizeof(item), MAXN, 2, NULL));
  CHECK_EQ_U((uint32_t)f.nsrc, (uint32_t)ns);
  if (!receiver(me)) {
    for (m = 0; m < MSGS; ++m) {
      msg_fill(me, m, it, td, ends);
      CHECK_OK(per_mpi_feed_send(&f, it, msg_n(me, m), ends, td));
    }
    CHECK_OK(per_mpi_feed_close(&f));
    CHECK_EQ_U(f.msgs, MSGS);
    /* the receiver napped through the first sends: with two slots of
       16 KB (above Open MPI's and MPICH's eager limits, so a send
       completes only once the receiver takes part) the third one waited */
    if (flags & PER_MPI_FEED_ORDERED)
      CHECK_MSG(f.waits >= 1, "no send waited (%llu)",
                (unsigned long long)f.waits);
    CHECK_EQ_U(per_mpi_feed_send(&f, it, 1, NULL, NULL), PER_ERR_ARG);
  } else {
    per_buffer ref;
    uint32_t cap = 1u << 14; /* every message fits: nothing overwritten */
    per_config c = cfg_of(cap);
    CHECK_OK(per_buffer_init(&shard, &c, NULL));
    CHECK_OK(per_buffer_init(&ref, &c, NULL));
    if (flags & PER_MPI_FEED_ORDERED) nap(300);
    while (!per_mpi_feed_done(&f)) {
      CHECK_OK(per_mpi_feed_drain(&f, &shard, 7, flags, &got));
      if (!(flags & PER_MPI_FEED_ORDERED)) nap(1);
    }
    CHECK_EQ_U(f.msgs, (uint64_t)ns * MSGS);
    CHECK_EQ_U(got, shard.size);
    CHECK_EQ_U(f.rejected, 0);
    reference(&ref, senders, ns);
    if (flags & PER_MPI_FEED_ORDERED) {
      CHECK_MSG(same_buffer(&shard, &ref),
                "ordered drain: not the fixed order");
    } else { /* each message once, each sender's in order */
      uint32_t s, next[8] = {0}, bad = 0;
      CHECK_EQ_U(shard.size, ref.size);
      CHECK_EQ_U(shard.trajs, ref.trajs);
      for (s = 0; s < shard.size; ++s) {
        const item *x = (const item *)(const void *)(shard.items +
                                                     (size_t)s * sizeof(item));
        int k;
        for (k = 0; k < ns && senders[k] != (int)x->sender; ++k)
          ;
        if (k == ns) {
          ++bad;
          continue;
        }
        if (x->j == 0) bad += x->msg != next[k]++;
      }
      for (r = 0; r < ns; ++r) bad += next[r] != MSGS;
      CHECK_EQ_U(bad, 0);
      CHECK_OK(per_buffer_check(&shard));
    }
    per_buffer_free(&ref);
    per_buffer_free(&shard);
  }
  per_mpi_feed_free(&f);
  CHECK(f.work == NULL);
}

/* free with messages in flight; a refused message; the errors. */
static void shutdown_and_errors(void) {
  static item it[MAXN];
  static float td[MAXN];
  static uint8_t ends[MAXN];
  per_mpi_feed f;
  per_buffer shard;
  per_config c = cfg_of(256);
  int dest = receiver(me) ? PER_MPI_FEED_NONE : me % R;
  uint32_t m;
  CHECK_OK(per_buffer_init(&shard, &c, NULL));
  /* a NaN td: the message is counted and nothing of it stored */
  CHECK_OK(
      per_mpi_feed_init(&f, MPI_COMM_WORLD, dest, sizeof(item), MAXN, 3, NULL));
  if (!receiver(me)) {
    msg_fill(me, 0, it, td, ends);
    td[0] = (float)NAN;
    CHECK_OK(per_mpi_feed_send(&f, it, 4, ends, td));
    td[0] = 1;
    CHECK_OK(per_mpi_feed_send(&f, it, 4, NULL, td));
    CHECK_EQ_U(per_mpi_feed_send(&f, it, 0, NULL, NULL), PER_ERR_ARG);
    CHECK_EQ_U(per_mpi_feed_send(&f, it, MAXN + 1, NULL, NULL), PER_ERR_ARG);
    CHECK_EQ_U(per_mpi_feed_send(&f, NULL, 1, NULL, NULL), PER_ERR_NULL);
    CHECK_OK(per_mpi_feed_close(&f));
  } else {
    per_buffer other;
    per_config c2 = per_config_default(16, 8);
    uint32_t want = (uint32_t)f.nsrc;
    CHECK_OK(per_buffer_init(&other, &c2, NULL));
    CHECK_EQ_U(per_mpi_feed_drain(&f, &other, 1, 0, NULL), PER_ERR_ARG);
    CHECK_EQ_U(per_mpi_feed_drain(&f, &shard, 1, 2, NULL), PER_ERR_ARG);
    CHECK_EQ_U(per_mpi_feed_send(&f, it, 1, NULL, NULL), PER_ERR_ARG);
    per_buffer_free(&other);
    while (!per_mpi_feed_done(&f))
      CHECK_OK(per_mpi_feed_drain(&f, &shard, 100, PER_MPI_FEED_ORDERED, NULL));
    CHECK_EQ_U(f.rejected, want);
    CHECK_EQ_U(shard.size, 4 * want);
    CHECK(want == 0 || strstr(f.error, "td[0] is NaN") != NULL);
  }
  per_mpi_feed_free(&f);
  /* free while the senders' messages are in flight: the receivers never
     drain; nothing hangs, nothing leaks */
  CHECK_OK(
      per_mpi_feed_init(&f, MPI_COMM_WORLD, dest, sizeof(item), MAXN, 2, NULL));
  if (!receiver(me))
    for (m = 0; m < 10; ++m) {
      msg_fill(me, m, it, td, ends);
      CHECK_OK(per_mpi_feed_send(&f, it, msg_n(me, m), NULL, NULL));
    }
  per_mpi_feed_free(&f);
  per_mpi_feed_free(&f); /* zeroed: a no-op */
  per_buffer_free(&shard);
  /* init errors, on every rank */
  CHECK_EQ_U(
      per_mpi_feed_init(&f, MPI_COMM_WORLD, me, sizeof(item), MAXN, 2, NULL),
      PER_ERR_ARG); /* dest: itself */
  CHECK(f.work == NULL);
  CHECK_EQ_U(per_mpi_feed_init(&f, MPI_COMM_WORLD, PER_MPI_FEED_NONE,
                               me == W - 1 ? 8 : 16, MAXN, 2, NULL),
             W > 1 ? PER_ERR_ARG : PER_OK); /* item sizes differ */
  per_mpi_feed_free(&f);
  CHECK_EQ_U(per_mpi_feed_init(&f, MPI_COMM_WORLD, W, 8, 1, 1, NULL),
             PER_ERR_ARG); /* not a rank */
  CHECK_EQ_U(per_mpi_feed_init(&f, MPI_COMM_WORLD, PER_MPI_FEED_NONE, 8, 1,
                               me == 0 ? 0 : 1, NULL),
             PER_ERR_ARG); /* rank 0's slots 0 */
  CHECK_EQ_U(per_mpi_feed_init(NULL, MPI_COMM_WORLD, 0, 8, 1, 1, NULL),
             PER_ERR_NULL);
}

int main(int argc, char **argv) {
  int rc;
  char name[64];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  R = W >= 4 ? 2 : 1;
  run(PER_MPI_FEED_ORDERED);
  run(0);
  shutdown_and_errors();
  CHECK_MSG(t_default_heap.live == 0, "%ld blocks of per's not freed",
            t_default_heap.live);
  snprintf(name, sizeof name, "mpi feed rank %d of %d (%s)", me, W,
           sizeof(per_real) == 8 ? "double" : "float");
  rc = t_done(name);
  MPI_Finalize();
  return rc;
}
