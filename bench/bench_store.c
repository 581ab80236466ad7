/* bench_store.c - the trajectory store (per_store.h) on this machine's
   disk, every figure against a baseline measured in the same run:
   - add: trajectories added with a writer thread until they are written
     and fsynced, in MB/s, against the disk's own sequential write
     bandwidth (1 MiB pwrites of the same bytes into one file, then
     fsync), three rounds of each side alternating, medians: the ratio
     is the store's share of what the disk can take;
   - sample: batches of 256 drawn uniformly (alpha 0) from a store of
     --gib GiB with its cache holding all of it, half of it and none of
     it (the segments' pages dropped from the page cache first, with
     posix_fadvise, so misses are real reads), against the same draws
     from a per_buffer holding the same samples in RAM;
   - checkpoint: a store of --gib and one of --large-gib GiB of 28 KB
     frame stacks, side by side, one trajectory added to each then
     per_store_checkpoint, alternating between the two (medians of 21
     each), first with the stores' pages in the page cache as the adds
     left them, then (the figure compared) after they were dropped
     (posix_fadvise), so that both sizes start from the same page cache
     and the time is the checkpoint's, not the kernel's reclaim of
     gigabytes of cached pages for the new trajectory's; against
     per_buffer_save of a per_buffer of the same samples (its ring an
     mmap'd file, so that RAM does not bound it): the ratio of the two
     sizes' times says whether a checkpoint grows with the data;
   - memory: the process's resident set (VmRSS) beside the store's size.
   Both item sizes: 64-byte transitions and 28,224-byte stacks (84 x 84
   x 4 bytes). Writes CSV rows (--csv FILE) and a table on stdout.
   --quick: tiny sizes, every path once, checks that the store drew what
   the RAM buffer drew (exit status 1 if not); no figure means anything
   then. Usage: bench_store [--dir DIR] [--gib G] [--large-gib G]
   [--quick] [--csv FILE]. DIR (default bench-store.tmp under the
   current directory) must be on the disk to measure; it is removed. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PER_IMPLEMENTATION
#include "per.h"
#define PER_STORE_IMPLEMENTATION
#include "per_store.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static long rss_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0) v = atol(line + strlen(key));
  fclose(f);
  return v;
}

static void die(const char *what, per_status s, const char *err) {
  fprintf(stderr, "bench_store: %s: %s (%s)\n", what, per_status_str(s),
          err ? err : "");
  exit(2);
}

static char root[512];
static FILE *csv;
static int quick, bad;

static void rm_rf(const char *p) {
  char cmd[1100];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
  if (system(cmd) != 0) fprintf(stderr, "bench_store: cannot remove %s\n", p);
}

/* Every file of dir: fsynced (an fsync through any descriptor syncs the
   file's pages), and with drop, its pages then dropped from the page
   cache (posix_fadvise), so that the next reads are the disk's. */
static void each_file(const char *dir, int drop) {
  char cmd[1100], name[1024];
  FILE *p;
  snprintf(cmd, sizeof cmd, "ls '%s'", dir);
  p = popen(cmd, "r");
  if (!p) return;
  while (fgets(name, sizeof name, p)) {
    char path[2048];
    int fd;
    name[strcspn(name, "\n")] = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fd = open(path, O_RDONLY);
    if (fd < 0) continue;
    if (fsync(fd) != 0) die("fsync", PER_ERR_IO, strerror(errno));
    if (drop) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
  pclose(p);
}

/* A sample's bytes: its trajectory and position, then a pattern. */
static void fill_traj(unsigned char *p, uint32_t n, uint32_t isz, uint64_t id) {
  uint32_t j;
  for (j = 0; j < n; ++j) {
    unsigned char *q = p + (size_t)j * isz;
    uint64_t tag = id << 20 | j;
    memset(q, (int)(id * 7 + j) & 0xff, isz);
    memcpy(q, &tag, isz < 8 ? isz : 8);
  }
}

/* ---- the disk's sequential write bandwidth: MB/s ---- */
static double disk_write_mbs(uint64_t bytes, const unsigned char *chunk,
                             size_t chunk_bytes) {
  char path[1024];
  int fd;
  uint64_t off = 0;
  double t0, t;
  snprintf(path, sizeof path, "%s/seq.tmp", root);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) die("open seq.tmp", PER_ERR_IO, strerror(errno));
  t0 = now();
  while (off < bytes) {
    size_t k = bytes - off < chunk_bytes ? (size_t)(bytes - off) : chunk_bytes;
    if (pwrite(fd, chunk, k, (off_t)off) != (ssize_t)k)
      die("pwrite seq.tmp", PER_ERR_IO, strerror(errno));
    off += k;
  }
  if (fsync(fd) != 0) die("fsync seq.tmp", PER_ERR_IO, strerror(errno));
  t = now() - t0;
  close(fd);
  unlink(path);
  return (double)bytes / t / 1e6;
}

static void *writer(void *arg) {
  per_status s = per_store_run_writer((per_store *)arg);
  if (s != PER_OK) fprintf(stderr, "writer: %s\n", per_status_str(s));
  return NULL;
}

typedef struct shape {
  const char *name;
  uint32_t isz, T, B;
} shape;

/* A store in root/name of `bytes` bytes of samples, filled with a writer
   thread; the seconds until every sample is written and its segment
   fsynced in *secs (the index is not checkpointed: bench_ckpt times
   that). */
static void fill_store(per_store *s, const char *name, const shape *sh,
                       uint64_t bytes, uint64_t cache, uint64_t staging,
                       per_buffer *ram, double *secs, long *rss) {
  char dir[1024];
  per_store_config c;
  uint32_t n = sh->T * sh->B, k, trajs;
  uint64_t cap = bytes / sh->isz;
  unsigned char *roll = (unsigned char *)malloc((size_t)n * sh->isz);
  pthread_t th;
  per_status r;
  double t0;
  if (!roll) die("malloc", PER_ERR_NOMEM, "");
  if (cap < n) cap = n;
  trajs = (uint32_t)(cap / n);
  cap = (uint64_t)trajs * n;
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  c = per_store_config_default((uint32_t)cap, sh->isz);
  c.buffer.alpha = 0; /* uniform: the hit rate is the cached share */
  c.buffer.seed = 7;
  c.cache_bytes = cache;
  c.staging_bytes = staging;
  if (c.staging_bytes < 2 * ((uint64_t)n * (sh->isz + 1) + 8))
    c.staging_bytes = 2 * ((uint64_t)n * (sh->isz + 1) + 8);
  r = per_store_init(s, dir, &c, 0, NULL);
  if (r != PER_OK) die("per_store_init", r, s->error);
  pthread_create(&th, NULL, writer, s);
  t0 = now();
  for (k = 0; k < trajs; ++k) {
    fill_traj(roll, n, sh->isz, k);
    r = per_store_add(s, roll, sh->T, sh->B, NULL, 0, NULL);
    if (r != PER_OK) die("per_store_add", r, s->error);
  }
  r = per_store_write(s); /* the rest of the staged ones, then synced */
  if (r != PER_OK) die("per_store_write", r, s->error);
  each_file(dir, 0);
  *secs = now() - t0;
  per_store_stop_writer(s);
  pthread_join(th, NULL);
  if (ram) { /* the same samples in RAM, after the caller's RSS reading */
    per_config rc = c.buffer;
    *rss = rss_kib("VmRSS:");
    r = per_buffer_init(ram, &rc, NULL);
    if (r != PER_OK) die("per_buffer_init", r, ram->error);
    for (k = 0; k < trajs; ++k) {
      fill_traj(roll, n, sh->isz, k);
      per_buffer_add_steps(ram, roll, n, NULL);
    }
  }
  free(roll);
}

/* ---- add throughput against the disk ---- */

static double median3(double a, double b, double c) {
  return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

/* Three rounds, the two sides alternating (disk, store, store, disk,
   disk, store): the median of each side's three, so that a shared
   disk's drift falls on both. */
static void bench_add(const shape *sh, uint64_t bytes) {
  per_store s;
  per_store_stats st;
  double secs, store_mbs[3], disk_mbs[3], sm, dm;
  unsigned char *chunk = (unsigned char *)malloc((size_t)1 << 20);
  char dir[1024];
  int k, order[6] = {0, 1, 1, 0, 0, 1}, di = 0, si = 0;
  uint64_t waits = 0, trajs = 0;
  if (!chunk) die("malloc", PER_ERR_NOMEM, "");
  fill_traj(chunk, (1u << 20) / 64, 64, 1);
  snprintf(dir, sizeof dir, "%s/add", root);
  for (k = 0; k < (quick ? 2 : 6); ++k) {
    if (order[k] == 0) {
      disk_mbs[di++] = disk_write_mbs(bytes, chunk, (size_t)1 << 20);
      continue;
    }
    fill_store(&s, "add", sh, bytes, 0, (uint64_t)64 << 20, NULL, &secs, NULL);
    per_store_stats_of(&s, &st);
    store_mbs[si++] = (double)st.written_bytes / secs / 1e6;
    waits = st.waits;
    trajs = st.written_trajectories;
    per_store_free(&s);
    rm_rf(dir);
  }
  sm = quick ? store_mbs[0] : median3(store_mbs[0], store_mbs[1], store_mbs[2]);
  dm = quick ? disk_mbs[0] : median3(disk_mbs[0], disk_mbs[1], disk_mbs[2]);
  printf("add %-8s %8.1f MB/s written and synced (%llu trajectories, %llu "
         "waits for room); the disk alone %8.1f MB/s: ratio %.2f (medians "
         "of %d)\n",
         sh->name, sm, (unsigned long long)trajs, (unsigned long long)waits, dm,
         sm / dm, quick ? 1 : 3);
  if (csv)
    fprintf(csv, "add,%s,%u,%llu,%.3f,%.3f,%.4f\n", sh->name, sh->isz,
            (unsigned long long)bytes, sm, dm, sm / dm);
  free(chunk);
}

/* ---- sampling at three hit rates ---- */
static void bench_sample(const shape *sh, uint64_t bytes) {
  static const char *const label[3] = {"all", "half", "none"};
  int c;
  const uint32_t B = 256;
  uint32_t batches = quick ? 4 : 0;
  unsigned char *a = (unsigned char *)malloc((size_t)B * sh->isz);
  unsigned char *b = (unsigned char *)malloc((size_t)B * sh->isz);
  uint64_t ia[256], ib[256];
  float wa[256], wb[256];
  if (!a || !b) die("malloc", PER_ERR_NOMEM, "");
  for (c = 0; c < 3; ++c) {
    per_store s;
    per_buffer ram;
    per_store_stats st0, st1;
    uint64_t cache = c == 0 ? bytes + (bytes >> 3) : c == 1 ? bytes / 2 : 0;
    double secs, t0, ts, tr;
    uint32_t k, n;
    char dir[1024];
    long rss;
    fill_store(&s, "sample", sh, bytes, cache, (uint64_t)8 << 20, &ram, &secs,
               &rss);
    snprintf(dir, sizeof dir, "%s/sample", root);
    each_file(dir, 1);
    n = batches;
    if (n == 0) { /* about 0.5 s of the slowest side, at least 20 batches */
      t0 = now();
      for (k = 0; k < 10; ++k) per_store_sample(&s, B, NULL, a, ia, wa);
      ts = (now() - t0) / 10;
      n = (uint32_t)(0.5 / ts) + 20;
      if (n > 20000) n = 20000;
      each_file(dir, 1);
      /* the RAM buffer draws what the store drew: keep them in step */
      for (k = 0; k < 10; ++k) per_buffer_sample(&ram, B, NULL, b, ib, wb);
    }
    per_store_stats_of(&s, &st0);
    t0 = now();
    for (k = 0; k < n; ++k) {
      per_status r = per_store_sample(&s, B, NULL, a, ia, wa);
      if (r != PER_OK) die("per_store_sample", r, s.error);
    }
    ts = now() - t0;
    per_store_stats_of(&s, &st1);
    t0 = now();
    for (k = 0; k < n; ++k) per_buffer_sample(&ram, B, NULL, b, ib, wb);
    tr = now() - t0;
    if (memcmp(a, b, (size_t)B * sh->isz) || memcmp(ia, ib, sizeof ia) ||
        memcmp(wa, wb, sizeof wa)) {
      fprintf(stderr,
              "bench_store: the store's last batch is not the RAM "
              "buffer's (%s, cache %s)\n",
              sh->name, label[c]);
      bad = 1;
    }
    {
      double hits = (double)(st1.cache_hits - st0.cache_hits);
      double all = hits + (double)(st1.cache_misses - st0.cache_misses);
      double sps = (double)n * B / ts, rps = (double)n * B / tr;
      printf("sample %-8s cache %-4s: %5.1f %% hits, %11.0f samples/s; the "
             "RAM buffer %11.0f samples/s: ratio %.3f; the store's RSS %.0f "
             "MiB for %.0f MiB of samples\n",
             sh->name, label[c], 100 * hits / all, sps, rps, sps / rps,
             (double)rss / 1024, (double)bytes / (1 << 20));
      if (csv)
        fprintf(csv, "sample,%s,%u,%llu,%s,%.4f,%.1f,%.1f,%.4f,%ld\n", sh->name,
                sh->isz, (unsigned long long)bytes, label[c], hits / all, sps,
                rps, sps / rps, rss);
    }
    per_store_free(&s);
    per_buffer_free(&ram);
    rm_rf(dir);
  }
  free(a);
  free(b);
}

/* ---- checkpoints: the store against per_buffer_save ---- */

#define CKPT_N 21 /* checkpoints timed per size and page-cache state */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One more trajectory into s, then a timed per_store_checkpoint. */
static double ckpt_once(per_store *s, unsigned char *roll, const shape *sh,
                        uint64_t seed) {
  double t0;
  per_status r;
  fill_traj(roll, sh->T * sh->B, sh->isz, seed);
  r = per_store_add(s, roll, sh->T, sh->B, NULL, 0, NULL);
  if (r != PER_OK) die("per_store_add", r, s->error);
  t0 = now();
  r = per_store_checkpoint(s, 0);
  t0 = now() - t0;
  if (r != PER_OK) die("per_store_checkpoint", r, s->error);
  return t0;
}

/* per_buffer_save of a per_buffer of `bytes` of the same samples, its
   ring an mmap'd file (so that RAM does not bound it): seconds. */
static double save_time(uint64_t bytes, const shape *sh) {
  per_buffer pb;
  per_config pc;
  char ring[1024], save[1024];
  uint32_t n = sh->T * sh->B, k, trajs;
  uint64_t cap = bytes / sh->isz;
  unsigned char *roll = (unsigned char *)malloc((size_t)n * sh->isz), *mem;
  double t0;
  int fd;
  per_status r;
  if (!roll) die("malloc", PER_ERR_NOMEM, "");
  trajs = (uint32_t)(cap / n);
  cap = (uint64_t)trajs * n;
  snprintf(ring, sizeof ring, "%s/ring.bin", root);
  snprintf(save, sizeof save, "%s/buffer.ckpt", root);
  fd = open(ring, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, (off_t)(cap * sh->isz)) != 0)
    die("ring file", PER_ERR_IO, strerror(errno));
  mem = (unsigned char *)mmap(NULL, (size_t)(cap * sh->isz),
                              PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) die("mmap", PER_ERR_IO, strerror(errno));
  pc = per_config_default((uint32_t)cap, sh->isz);
  r = per_buffer_init_mem(&pb, &pc, mem, (size_t)(cap * sh->isz), NULL);
  if (r != PER_OK) die("per_buffer_init_mem", r, pb.error);
  for (k = 0; k < trajs + 1; ++k) {
    fill_traj(roll, n, sh->isz, k);
    per_buffer_add_steps(&pb, roll, n, NULL);
  }
  msync(mem, (size_t)(cap * sh->isz), MS_SYNC);
  t0 = now();
  r = per_buffer_save(&pb, save);
  t0 = now() - t0;
  if (r != PER_OK) die("per_buffer_save", r, pb.error);
  per_buffer_free(&pb);
  munmap(mem, (size_t)(cap * sh->isz));
  close(fd);
  unlink(ring);
  unlink(save);
  free(roll);
  return t0;
}

/* Stores of `small` and `large` bytes of 28 KB stacks, both kept, each
   checkpointed once (every segment synced); then CKPT_N rounds of one
   trajectory and a checkpoint in each, alternating (so that the disk's
   drift over the minutes falls on both alike), first with the pages as
   the adds left them, then after the stores' pages were dropped (both
   sizes from the same page cache: the checkpoint's time, not the
   kernel's reclaim of gigabytes of cached pages for the new
   trajectory's). Medians into st[size][state] (state 0 dropped, 1
   cached); then per_buffer_save of each size. */
static void bench_ckpt(uint64_t small, uint64_t large) {
  static const shape stack = {"28KB", 28224, 8, 4};
  static double t[2][2][CKPT_N];
  per_store s[2];
  unsigned char *roll;
  double med[2][2], save[2], secs;
  long rss;
  uint64_t bytes[2];
  static const char *const name[2] = {"ckpt-small", "ckpt-large"};
  char dir[1024];
  int z, state, i;
  bytes[0] = small;
  bytes[1] = large;
  roll = (unsigned char *)malloc((size_t)stack.T * stack.B * stack.isz);
  if (!roll) die("malloc", PER_ERR_NOMEM, "");
  for (z = 0; z < 2; ++z) {
    per_status r;
    fill_store(&s[z], name[z], &stack, bytes[z], 0, (uint64_t)64 << 20, NULL,
               &secs, NULL);
    r = per_store_checkpoint(&s[z], 0);
    if (r != PER_OK) die("per_store_checkpoint", r, s[z].error);
  }
  for (state = 1; state >= 0; --state) {
    if (state == 0)
      for (z = 0; z < 2; ++z) {
        snprintf(dir, sizeof dir, "%s/%s", root, name[z]);
        each_file(dir, 1);
      }
    for (i = 0; i < CKPT_N; ++i)
      for (z = 0; z < 2; ++z)
        t[z][state][i] = ckpt_once(&s[z], roll, &stack,
                                   1000 * (uint64_t)(state + 1) + (uint64_t)i);
    for (z = 0; z < 2; ++z) {
      qsort(t[z][state], CKPT_N, sizeof(double), cmp_double);
      med[z][state] = t[z][state][CKPT_N / 2];
    }
  }
  rss = rss_kib("VmRSS:");
  for (z = 0; z < 2; ++z) {
    per_store_free(&s[z]);
    snprintf(dir, sizeof dir, "%s/%s", root, name[z]);
    rm_rf(dir);
  }
  for (z = 0; z < 2; ++z) save[z] = save_time(bytes[z], &stack);
  free(roll);
  printf("checkpoint 28KB: %.0f MiB store %.4f s, %.0f MiB store %.4f s: "
         "ratio %.2f (medians of %d, alternating; the stores' pages dropped "
         "first; cached: %.4f s and %.4f s, ratio %.2f); per_buffer_save "
         "%.3f s and %.3f s: ratio %.2f; RSS with both stores %.0f MiB\n",
         (double)small / (1 << 20), med[0][0], (double)large / (1 << 20),
         med[1][0], med[1][0] / med[0][0], CKPT_N, med[0][1], med[1][1],
         med[1][1] / med[0][1], save[0], save[1], save[1] / save[0],
         (double)rss / 1024);
  if (csv)
    for (z = 0; z < 2; ++z)
      fprintf(csv,
              "ckpt,28KB,28224,%llu,store,%.6f,save,%.6f,%ld,cached,%.6f\n",
              (unsigned long long)bytes[z], med[z][0], save[z], rss, med[z][1]);
}

int main(int argc, char **argv) {
  static const shape shapes[2] = {{"64B", 64, 128, 8}, {"28KB", 28224, 8, 4}};
  double gib = 1, large_gib = 10;
  const char *dir = "bench-store.tmp", *csv_path = NULL;
  uint64_t bytes, large;
  int i;
  for (i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
    else if (!strcmp(argv[i], "--gib") && i + 1 < argc) gib = atof(argv[++i]);
    else if (!strcmp(argv[i], "--large-gib") && i + 1 < argc)
      large_gib = atof(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_store [--dir DIR] [--gib G] "
                      "[--large-gib G] [--quick] [--csv FILE]\n");
      return 2;
    }
  }
  snprintf(root, sizeof root, "%s", dir);
  rm_rf(root);
  if (mkdir(root, 0755) != 0) die("mkdir", PER_ERR_IO, strerror(errno));
  bytes = quick ? (uint64_t)4 << 20 : (uint64_t)(gib * (1 << 30));
  large = quick ? (uint64_t)8 << 20 : (uint64_t)(large_gib * (1 << 30));
  if (csv_path) {
    csv = fopen(csv_path, "w");
    if (!csv) die("csv", PER_ERR_IO, strerror(errno));
    fprintf(csv, "what,item,item_bytes,bytes,a,b,c,d,e,f,g,h\n");
  }
  printf("bench_store: %s, %.2f GiB stores (checkpoints also %.2f GiB), "
         "batches of 256, PER_REAL=%s\n",
         root, (double)bytes / (1 << 30), (double)large / (1 << 30),
         sizeof(per_real) == 8 ? "double" : "float");
  for (i = 0; i < 2; ++i) bench_add(&shapes[i], bytes);
  for (i = 0; i < 2; ++i) bench_sample(&shapes[i], bytes);
  bench_ckpt(bytes, large);
  if (csv) fclose(csv);
  rm_rf(root);
  if (bad)
    fprintf(stderr, "bench_store: FAILED: the store and the RAM "
                    "buffer drew different batches\n");
  return bad;
}
