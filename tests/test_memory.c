/* test_memory.c - caller memory: snapshots of a buffer (the checkpoint's
   bytes in caller memory) equal to per_buffer_save's file, written by
   per_snapshot_write from another thread while the buffer keeps adding,
   sampling and updating (the file loads and equals the snapshot); the
   item ring in caller memory (per_buffer_init_mem), also on an mmap'd
   file; the unique-draw workspace in caller memory (per_cat_init_mem).
   Files go to the current directory (the build directory under meson),
   named per PER_REAL. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buffer_util.h"

#define NAME(s) (IS_FLOAT ? "mem_float_" s : "mem_double_" s)

/* Some history in b: adds (with episode ends every 5th step), draws of
   items or sequences, updates. Deterministic from seed. */
static void churn(per_buffer *b, uint32_t adds, uint64_t seed) {
  per_rng r;
  uint32_t i, k, isz = b->cfg.item_size;
  unsigned char item[256];
  per_rng_init(&r, seed);
  for (i = 0; i < adds; ++i) {
    uint8_t end =
        (uint8_t)(per_rng_below(&r, 5) == 0 ? 1 + per_rng_below(&r, 2) : 0);
    for (k = 0; k < isz && k < sizeof item; ++k)
      item[k] = (unsigned char)per_rng_u32(&r);
    CHECK_OK(per_buffer_add_step(b, item, end));
    if (i % 11 == 10) {
      uint64_t ids[4];
      float td[4 * 64];
      uint32_t n = 4, L = 1;
      per_sample_opts o;
      per_status s;
      memset(&o, 0, sizeof o);
      if (b->cfg.seq_len && i % 2) {
        o.flags = PER_SAMPLE_SEQUENCES;
        L = b->cfg.seq_len;
      }
      s = per_buffer_sample(b, n, &o, NULL, ids, NULL);
      if (s == PER_ERR_TOO_FEW) continue; /* no valid sequence yet */
      CHECK_OK(s);
      for (k = 0; k < n * L; ++k) td[k] = per_rng_float(&r) * 4;
      if (L > 1) CHECK_OK(per_buffer_update_seq(b, ids, td, n, NULL));
      else CHECK_OK(per_buffer_update(b, ids, td, n, NULL));
    }
  }
}

/* The configurations the snapshot tests run: plain, alpha = 0 (the swap
   permutation is saved), the buffer-wide weight maximum, sequences. */
static per_config variant_cfg(int v) {
  per_config c = cfg_of(v == 3 ? 60 : 37, 12);
  c.seed = 7 + (uint64_t)v;
  if (v == 1) c.alpha = 0;
  if (v == 2) c.flags = PER_WEIGHTS_BUFFER_MAX;
  if (v == 3) {
    c.seq_len = 6;
    c.seq_stride = 3;
    c.flags = PER_SEQ_CROSS_EPISODES;
  }
  return c;
}

/* A snapshot is per_buffer_save's file with the CRC left 0, and
   per_snapshot_write writes exactly that file: empty, partly filled and
   wrapped buffers of every variant. The buffer is not changed. */
static void test_snapshot_is_the_file(void) {
  static unsigned char file[65536], written[65536];
  int v, k;
  for (v = 0; v < 4; ++v) {
    per_config c = variant_cfg(v);
    per_buffer b;
    unsigned char *snap;
    size_t cap, len = 0;
    CHECK_OK(per_buffer_init(&b, &c, NULL));
    cap = per_buffer_snapshot_bytes(&b);
    REQUIRE(cap > 0 && cap <= sizeof file);
    snap = (unsigned char *)malloc(cap);
    REQUIRE(snap != NULL);
    for (k = 0; k < 3; ++k) {
      long n, m;
      bsnap s;
      if (k == 1) churn(&b, c.capacity / 2, 3);
      if (k == 2) churn(&b, 3 * c.capacity, 4);
      if (v == 1 && k > 0) /* shuffle the swap permutation */
        CHECK_OK(sample_unique(&b, 5));
      CHECK_OK(per_buffer_save(&b, NAME("ref.bin")));
      n = file_read(NAME("ref.bin"), file, (long)sizeof file);
      s = bsnap_take(&b);
      memset(snap, 0xA5, cap);
      CHECK_OK(per_buffer_snapshot(&b, snap, cap, &len));
      CHECK_UNCHANGED(s, &b);
      CHECK_EQ_U(len, (size_t)n);
      CHECK_MEM(snap, file, len - 4);
      CHECK(snap[len - 1] == 0 && snap[len - 2] == 0 && snap[len - 3] == 0 &&
            snap[len - 4] == 0);
      if (len < cap) CHECK_EQ_U(snap[len], 0xA5); /* nothing past len */
      CHECK(k < 2 || len == cap);                 /* full: the largest */
      CHECK_OK(per_snapshot_write(snap, len, NAME("snap.bin"), NULL));
      m = file_read(NAME("snap.bin"), written, (long)sizeof written);
      CHECK_EQ_U(m, n);
      CHECK_MEM(written, file, (size_t)n);
    }
    free(snap);
    per_buffer_free(&b);
  }
  remove(NAME("ref.bin"));
  remove(NAME("snap.bin"));
}

/* Bad arguments: statuses, and nothing written or changed. */
static void test_snapshot_errors(void) {
  per_config c = variant_cfg(0);
  per_buffer b, z;
  unsigned char mem[4096], bad[4096];
  size_t len = 12345, need;
  bsnap s;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  churn(&b, 20, 5);
  memset(&z, 0, sizeof z);
  CHECK_EQ_U(per_buffer_snapshot_bytes(NULL), 0);
  CHECK_EQ_U(per_buffer_snapshot_bytes(&z), 0);
  /* header 220 + capacity * (item + generation + leaf + end + trajectory)
     + CRC */
  CHECK_EQ_U(per_buffer_snapshot_bytes(&b),
             220 + 37 * (12 + 4 + sizeof(per_real) + 1 + 4) + 4);
  CHECK_STATUS(per_buffer_snapshot(NULL, mem, sizeof mem, &len), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_snapshot(&z, mem, sizeof mem, &len), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_snapshot(&b, NULL, sizeof mem, &len), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_snapshot(&b, mem, sizeof mem, NULL), PER_ERR_NULL);
  CHECK_EQ_U(len, 12345);
  need = 220 + 20 * (12 + 4 + sizeof(per_real) + 1 + 4) + 4;
  memset(mem, 0x5A, sizeof mem);
  s = bsnap_take(&b);
  CHECK_STATUS(per_buffer_snapshot(&b, mem, need - 1, &len), PER_ERR_MEMORY);
  CHECK_UNCHANGED(s, &b);
  CHECK_EQ_U(len, 12345);
  CHECK_EQ_U(mem[0], 0x5A);
  CHECK_OK(per_buffer_snapshot(&b, mem, need, &len));
  CHECK_EQ_U(len, need);
  /* the writer takes only this version's snapshots, of their own length */
  CHECK_STATUS(per_snapshot_write(NULL, len, NAME("e.bin"), NULL),
               PER_ERR_NULL);
  CHECK_STATUS(per_snapshot_write(mem, len, NULL, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_snapshot_write(mem, len - 1, NAME("e.bin"), NULL),
               PER_ERR_FORMAT);
  CHECK_STATUS(per_snapshot_write(mem, len + 1, NAME("e.bin"), NULL),
               PER_ERR_FORMAT);
  CHECK_STATUS(per_snapshot_write(mem, 100, NAME("e.bin"), NULL),
               PER_ERR_FORMAT);
  {
    size_t at[4] = {0, 8, 12, 16}; /* magic, version, byte order, header size */
    int k;
    for (k = 0; k < 4; ++k) {
      memcpy(bad, mem, len);
      bad[at[k]] ^= 1;
      CHECK_STATUS(per_snapshot_write(bad, len, NAME("e.bin"), NULL),
                   PER_ERR_FORMAT);
    }
  }
  CHECK(access(NAME("e.bin"), F_OK) != 0); /* nothing was created */
  /* a directory that does not exist: PER_ERR_IO */
  CHECK_STATUS(per_snapshot_write(mem, len, "no-such-dir/x.bin", NULL),
               PER_ERR_IO);
  per_buffer_free(&b);
}

/* The pattern of docs/GUIDE.md: the training thread snapshots, a writer
   thread writes the file while training goes on. */
typedef struct save_job {
  const unsigned char *snap;
  size_t len;
  const char *path;
  per_status status;
} save_job;

static void *save_thread(void *arg) {
  save_job *j = (save_job *)arg;
  j->status = per_snapshot_write(j->snap, j->len, j->path, NULL);
  return NULL;
}

/* Async save under load: each round snapshots b, starts a writer thread,
   and keeps adding, sampling and updating b while the thread writes.
   After the join, the file loads (its CRC checks) into a fresh buffer
   whose own snapshot equals the one written, byte for byte, and that
   buffer draws what b would have drawn from the snapshot's state (a
   second buffer, loaded from a synchronous save taken at the same
   moment, draws the same). */
static void test_async_save(void) {
  int v, round;
  for (v = 0; v < 4; ++v) {
    per_config c = variant_cfg(v);
    per_buffer b, x, y;
    size_t cap, len = 0, len2 = 0;
    unsigned char *snap, *again;
    c.capacity *= 40; /* a few thousand items */
    c.max_unique = c.capacity < 65536 ? c.capacity : 65536;
    CHECK_OK(per_buffer_init(&b, &c, NULL));
    CHECK_OK(per_buffer_init(&x, &c, NULL));
    CHECK_OK(per_buffer_init(&y, &c, NULL));
    cap = per_buffer_snapshot_bytes(&b);
    snap = (unsigned char *)malloc(cap);
    again = (unsigned char *)malloc(cap);
    REQUIRE(snap && again);
    for (round = 0; round < 3; ++round) {
      save_job job;
      pthread_t th;
      churn(&b, c.capacity / 2 + 17 * (uint32_t)round, 10 + (uint64_t)round);
      CHECK_OK(per_buffer_snapshot(&b, snap, cap, &len));
      CHECK_OK(per_buffer_save(&b, NAME("sync.bin")));
      job.snap = snap;
      job.len = len;
      job.path = NAME("async.bin");
      job.status = PER_ERR_ARG;
      REQUIRE(pthread_create(&th, NULL, save_thread, &job) == 0);
      churn(&b, c.capacity / 3, 20 + (uint64_t)round); /* training goes on */
      REQUIRE(pthread_join(th, NULL) == 0);
      CHECK_OK(job.status);
      CHECK_OK(per_buffer_load(&x, NAME("async.bin")));
      CHECK_OK(per_buffer_check(&x));
      CHECK_OK(per_buffer_snapshot(&x, again, cap, &len2));
      CHECK_EQ_U(len2, len);
      CHECK_MEM(again, snap, len);
      CHECK_OK(per_buffer_load(&y, NAME("sync.bin")));
      CHECK(state_equal(&x, &y));
      {
        uint64_t ix[8], iy[8];
        float wx[8], wy[8];
        CHECK_OK(per_buffer_sample(&x, 8, NULL, NULL, ix, wx));
        CHECK_OK(per_buffer_sample(&y, 8, NULL, NULL, iy, wy));
        CHECK_MEM(ix, iy, sizeof ix);
        CHECK_MEM(wx, wy, sizeof wx);
      }
    }
    free(snap);
    free(again);
    per_buffer_free(&b);
    per_buffer_free(&x);
    per_buffer_free(&y);
  }
  remove(NAME("sync.bin"));
  remove(NAME("async.bin"));
}

/* Several writer threads at once, each its own snapshot and file, while
   the main thread trains: every file loads and equals its snapshot. */
static void test_parallel_writers(void) {
  enum { W = 4 };
  per_config c = variant_cfg(2);
  per_buffer b, x;
  unsigned char *snap[W], *again;
  save_job job[W];
  pthread_t th[W];
  size_t cap, len = 0;
  int k;
  static const char *const names[2][W] = {
      {"mem_double_p0.bin", "mem_double_p1.bin", "mem_double_p2.bin",
       "mem_double_p3.bin"},
      {"mem_float_p0.bin", "mem_float_p1.bin", "mem_float_p2.bin",
       "mem_float_p3.bin"}};
  c.capacity = 2000;
  c.max_unique = 2000;
  CHECK_OK(per_buffer_init(&b, &c, NULL));
  CHECK_OK(per_buffer_init(&x, &c, NULL));
  cap = per_buffer_snapshot_bytes(&b);
  again = (unsigned char *)malloc(cap);
  REQUIRE(again != NULL);
  for (k = 0; k < W; ++k) {
    snap[k] = (unsigned char *)malloc(cap);
    REQUIRE(snap[k] != NULL);
    churn(&b, 700, 30 + (uint64_t)k);
    CHECK_OK(per_buffer_snapshot(&b, snap[k], cap, &job[k].len));
    job[k].snap = snap[k];
    job[k].path = names[IS_FLOAT][k];
    job[k].status = PER_ERR_ARG;
    REQUIRE(pthread_create(&th[k], NULL, save_thread, &job[k]) == 0);
  }
  churn(&b, 3000, 40);
  for (k = 0; k < W; ++k) {
    REQUIRE(pthread_join(th[k], NULL) == 0);
    CHECK_OK(job[k].status);
    CHECK_OK(per_buffer_load(&x, job[k].path));
    CHECK_OK(per_buffer_snapshot(&x, again, cap, &len));
    CHECK_EQ_U(len, job[k].len);
    CHECK_MEM(again, snap[k], len);
    remove(job[k].path);
    free(snap[k]);
  }
  free(again);
  per_buffer_free(&b);
  per_buffer_free(&x);
}

/* Sharded loads keep the global counters: the count of adds, the count
   of trajectories and every item's trajectory id; a window of
   trajectories then works on the shard. */
static void test_shard_counts(void) {
  per_config c = variant_cfg(0), d = cfg_of(30, 12);
  per_buffer a, b;
  uint32_t r, i;
  unsigned char items[12 * 5];
  memset(items, 3, sizeof items);
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  churn(&a, 80, 6);
  for (i = 0; i < 6; ++i) CHECK_OK(per_buffer_add_batch(&a, items, 1 + i % 5));
  CHECK_EQ_U(a.added, 80 + 1 + 2 + 3 + 4 + 5 + 1);
  CHECK_EQ_U(a.trajs, 80 + 6);
  CHECK_OK(per_buffer_save(&a, NAME("shard.bin")));
  for (r = 0; r < 3; ++r) {
    uint32_t j = 0;
    per_sample_opts o;
    uint64_t ids[4];
    CHECK_OK(per_buffer_init(&b, &d, NULL));
    CHECK_OK(per_buffer_load_shard(&b, NAME("shard.bin"), r, 3));
    CHECK_EQ_U(b.added, a.added);
    CHECK_EQ_U(b.trajs, a.trajs);
    for (i = 0; i < a.size; ++i) { /* the file's slots, oldest first */
      uint32_t slot =
          ((a.size == a.cfg.capacity ? a.pos : 0) + i) % a.cfg.capacity;
      if (slot % 3 != r) continue;
      CHECK_EQ_U(b.traj[j], a.traj[slot]);
      ++j;
    }
    CHECK_EQ_U(j, b.size);
    CHECK_OK(per_buffer_check(&b));
    memset(&o, 0, sizeof o);
    o.flags = PER_SAMPLE_TRAJECTORIES;
    o.window = 2;
    CHECK_OK(per_buffer_sample(&b, 4, &o, NULL, ids, NULL));
    for (i = 0; i < 4; ++i)
      CHECK(b.traj[b.pos == 0 ? b.size - 1 : b.pos - 1] -
                b.traj[(uint32_t)ids[i]] <
            2);
    per_buffer_free(&b);
  }
  per_buffer_free(&a);
  remove(NAME("shard.bin"));
}

/* per_buffer_init_mem: the ring lives in the caller's memory, which is
   used as it is (not zeroed, never freed); the buffer behaves as one
   from per_buffer_init. Errors leave *b zeroed. */
static void test_init_mem(void) {
  per_config c = cfg_of(300, 24);
  per_buffer a, b;
  unsigned char *ring, *raw;
  size_t bytes = 300 * 24;
  uint32_t i;
  t_heap heap;
  long k, calls;
  raw = (unsigned char *)malloc(bytes + 1);
  REQUIRE(raw != NULL);
  ring = raw + 1; /* any alignment */
  memset(ring, 0xAB, bytes);
  c.seed = 3;
  memset(&b, 0x77, sizeof b);
  CHECK_STATUS(per_buffer_init_mem(&b, &c, NULL, bytes, NULL), PER_ERR_NULL);
  CHECK_EQ_U(b.items == NULL && b.tree.node == NULL, 1);
  CHECK_STATUS(per_buffer_init_mem(NULL, &c, ring, bytes, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_init_mem(&b, NULL, ring, bytes, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_buffer_init_mem(&b, &c, ring, bytes - 1, NULL),
               PER_ERR_MEMORY);
  CHECK(b.items == NULL);
  c.item_size = 0;
  CHECK_STATUS(per_buffer_init_mem(&b, &c, ring, bytes, NULL), PER_ERR_ARG);
  c.item_size = 24;
  CHECK_OK(per_buffer_init_mem(&b, &c, ring, bytes, NULL));
  CHECK(b.items == ring && b.own_items == 0);
  for (i = 0; i < bytes; ++i)
    if (ring[i] != 0xAB) break;
  CHECK_EQ_U(i, bytes); /* not zeroed */
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  CHECK_EQ_U(a.own_items, 1);
  for (i = 0; i < 1000; ++i) {
    unsigned char item[24];
    uint32_t j;
    for (j = 0; j < 24; ++j) item[j] = (unsigned char)(i * 7 + j);
    CHECK_OK(per_buffer_add(&a, item));
    CHECK_OK(per_buffer_add(&b, item));
  }
  CHECK_MEM(ring, a.items, bytes); /* slot i at items + i * item_size */
  same_draws(&a, &b, 40, 50);
  CHECK_OK(per_buffer_check(&b));
  per_buffer_free(&b); /* leaves the ring to its owner */
  CHECK_MEM(ring, a.items, bytes);
  /* an allocation failure at each allocation: PER_ERR_NOMEM, nothing
     leaked, the caller's ring untouched */
  memset(&heap, 0, sizeof heap);
  CHECK_OK(per_buffer_init_mem(&b, &c, ring, bytes, &heap));
  per_buffer_free(&b);
  calls = heap.calls;
  CHECK(calls >= 5);
  CHECK_EQ_U(heap.live, 0);
  for (k = 1; k <= calls; ++k) {
    heap.fail_at = heap.calls + k;
    CHECK_STATUS(per_buffer_init_mem(&b, &c, ring, bytes, &heap),
                 PER_ERR_NOMEM);
    CHECK(b.items == NULL);
    CHECK_EQ_U(heap.live, 0);
  }
  CHECK_MEM(ring, a.items, bytes);
  per_buffer_free(&a);
  free(raw);
}

/* A buffer whose ring is a file mapped with mmap (MAP_SHARED): it runs
   as a malloc'd one, its items land in the file, and a checkpoint of it
   loads into an ordinary buffer. */
static void test_mmap(void) {
  per_config c = cfg_of(4096, 32);
  per_buffer a, b, x;
  size_t bytes = (size_t)4096 * 32;
  unsigned char *map, *back;
  int fd;
  uint32_t i;
  c.seed = 11;
  c.flags = PER_WEIGHTS_BUFFER_MAX;
  remove(NAME("ring.map"));
  fd = open(NAME("ring.map"), O_RDWR | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, (off_t)bytes) == 0);
  map = (unsigned char *)mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                              fd, 0);
  REQUIRE(map != MAP_FAILED);
  CHECK_OK(per_buffer_init_mem(&b, &c, map, bytes, NULL));
  CHECK_OK(per_buffer_init(&a, &c, NULL));
  for (i = 0; i < 10000; ++i) { /* wraps the ring twice */
    unsigned char item[32];
    uint32_t j;
    for (j = 0; j < 32; ++j) item[j] = (unsigned char)(i ^ (j * 13));
    CHECK_OK(per_buffer_add(&a, item));
    CHECK_OK(per_buffer_add(&b, item));
  }
  same_draws(&a, &b, 30, 50);
  CHECK_OK(per_buffer_save(&b, NAME("ring.bin")));
  CHECK_OK(per_buffer_init(&x, &c, NULL));
  CHECK_OK(per_buffer_load(&x, NAME("ring.bin")));
  CHECK(state_equal(&a, &x));
  CHECK(msync(map, bytes, MS_SYNC) == 0);
  per_buffer_free(&b);
  CHECK(munmap(map, bytes) == 0);
  close(fd);
  /* the items are in the file */
  back = (unsigned char *)malloc(bytes);
  REQUIRE(back != NULL);
  CHECK_EQ_U(file_read(NAME("ring.map"), back, (long)bytes), bytes);
  CHECK_MEM(back, a.items, bytes);
  free(back);
  per_buffer_free(&a);
  per_buffer_free(&x);
  remove(NAME("ring.map"));
  remove(NAME("ring.bin"));
}

/* per_cat_init_mem: the same draws as per_cat_init's workspace; size,
   alignment and argument errors. */
static void test_cat_mem(void) {
  per_tree t;
  per_cat own, mem;
  per_rng r1, r2;
  uint32_t i, k, ia[50], ib[50];
  per_real va[50], vb[50];
  size_t bytes = per_cat_bytes(50);
  unsigned char *raw;
  CHECK_EQ_U(per_cat_bytes(0), 0);
  CHECK_EQ_U(per_cat_bytes((1u << 30) + 1), 0);
  CHECK_EQ_U(bytes, 128 * 4 + 50 * sizeof(per_real)); /* 2^7 >= 100 slots */
  CHECK_EQ_U(per_cat_bytes(1), 2 * 4 + sizeof(per_real));
  raw = (unsigned char *)malloc(bytes + 2 * sizeof(per_real));
  REQUIRE(raw != NULL);
  CHECK_STATUS(per_cat_init_mem(NULL, 50, raw, bytes), PER_ERR_NULL);
  CHECK_STATUS(per_cat_init_mem(&mem, 50, NULL, bytes), PER_ERR_NULL);
  CHECK_STATUS(per_cat_init_mem(&mem, 0, raw, bytes), PER_ERR_BATCH);
  CHECK_STATUS(per_cat_init_mem(&mem, 50, raw, bytes - 1), PER_ERR_MEMORY);
  CHECK_STATUS(per_cat_init_mem(&mem, 50, raw + 1, bytes), PER_ERR_MEMORY);
  CHECK(mem.table == NULL);
  CHECK_OK(per_cat_init_mem(&mem, 50, raw + sizeof(per_real), bytes));
  CHECK_OK(per_cat_init(&own, 50, NULL));
  CHECK_OK(per_tree_init(&t, 200, NULL));
  for (i = 0; i < 200; ++i)
    CHECK_OK(per_tree_set(&t, i, (per_real)(1 + i % 9)));
  per_rng_init(&r1, 5);
  per_rng_init(&r2, 5);
  for (k = 1; k <= 50; k += 7) {
    own.reject_limit = mem.reject_limit = k % 2 ? k : 0; /* both phases */
    CHECK_OK(per_cat_sample(&own, &t, &r1, k, ia, va));
    CHECK_OK(per_cat_sample(&mem, &t, &r2, k, ib, vb));
    CHECK_MEM(ia, ib, k * sizeof(uint32_t));
    CHECK_MEM(va, vb, k * sizeof(per_real));
  }
  per_cat_free(&mem); /* frees nothing */
  per_cat_free(&own);
  per_tree_free(&t);
  free(raw);
}

int main(void) {
  test_snapshot_is_the_file();
  test_snapshot_errors();
  test_async_save();
  test_parallel_writers();
  test_shard_counts();
  test_init_mem();
  test_mmap();
  test_cat_mem();
  return t_done(IS_FLOAT ? "memory (float)" : "memory (double)");
}
