/* test_store_kill.c - the trajectory store (per_store.h) killed at every
   I/O call: what a resumed store finds in the directory.

   Why: per_store.h promises that a kill at any instant leaves the
   directory's checkpoint as the last committed one or, when the kill
   came inside the next per_store_checkpoint after its commit (index.bin
   replaced, or its index.log record synced), the new one: complete
   either way, never a mix, and loadable
   (segment files are never rewritten below the length a checkpoint
   recorded, and deleted only once no checkpoint names them).

   How: a deterministic scenario (adds of trajectories of several
   shapes, with draws and updates; a per_store_write; a per_store_load
   of another store's directory, which links its segment files; six
   checkpoints: the first and the one after the load write index.bin,
   the others append to index.log while it is shorter, the fourth
   without JSON) runs once without faults, every
   I/O call of the library counted by kind, and after each checkpoint i
   the directory is resumed (per_store_init with PER_STORE_RESUME, read
   only) into a fresh store whose fingerprint F[i] is taken: its counts,
   every stored trajectory's shape, live count and episode length, and
   three batches (ids, weights, sample bytes) drawn with updates between.
   Then, for each kind (open, pwrite, fsync, rename, link, unlink and
   remove, and per.h's fopen, fwrite, fflush, fclose) and each call
   number k of the dry run's count (up to KCAP of a kind, spread evenly),
   a child runs the scenario and dies (_exit) just before call k of that
   kind; for pwrite also, in a second variant, after writing only the
   first half of that call's bytes. The child reports through a pipe
   when it begins and when it commits each checkpoint. The parent then
   resumes the directory (PER_STORE_RESUME) into a fresh store:
   - its fingerprint is F[last committed] exactly, or F[last committed +
     1] when the child died inside that checkpoint call; before any
     commit, an empty store (no index.bin: RESUME starts empty), or F[0]
     when the death came inside the first checkpoint;
   - then that store takes one more trajectory and its checkpoint
     succeeds; a second resume draws exactly what it draws, and the
     directory holds exactly the segment files the store counts (the
     dead run's leftovers swept).
   Cases: KCAP (40) per kind at most (per pwrite variant), spread evenly
   over the dry run's calls: 194 cases with the implementation as it is
   (dry run: open 70, pwrite 147, fsync 54, rename 17, link 2, unlink 15
   calls; the store writes its files with open/pwrite/rename, so
   per.h's fopen, fwrite, fflush and fclose have no calls and no cases
   then). The count is printed at the end. About 5 s with ASan. Runs with
   PER_REAL double and float. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the killer: the library's I/O calls, counted; death at one ----- */

enum {
  K_OPEN,
  K_PWRITE,
  K_FSYNC,
  K_RENAME,
  K_LINK,
  K_UNLINK, /* unlink and remove */
  K_FOPEN,
  K_FWRITE,
  K_FFLUSH,
  K_FCLOSE,
  K_N
};
static const char *const KNAME[K_N] = {"open",   "pwrite", "fsync", "rename",
                                       "link",   "unlink", "fopen", "fwrite",
                                       "fflush", "fclose"};

static struct {
  int armed; /* count calls */
  int kind;  /* die at call `at` of this kind (-1: only count) */
  long at;
  int half; /* pwrite: write the first half of the bytes, then die */
  long calls[K_N];
} K;

/* Count a call of kind k; die before it when it is the one. */
static void at_call(int k) {
  if (!K.armed) return;
  if (++K.calls[k] == K.at && k == K.kind) _exit(0);
}

static inline int t_open(const char *p, int flags, ...) {
  mode_t mode = 0;
  if (flags & O_CREAT) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  at_call(K_OPEN);
  return open(p, flags, mode);
}
static inline ssize_t t_pwrite(int fd, const void *b, size_t n, off_t off) {
  if (K.armed && K.half && K.kind == K_PWRITE &&
      K.calls[K_PWRITE] + 1 == K.at) {
    if (pwrite(fd, b, n / 2, off) < 0) _exit(0);
    _exit(0);
  }
  at_call(K_PWRITE);
  return pwrite(fd, b, n, off);
}
/* Nothing is really synced: a kill, unlike a power loss, does not need
   it (and the campaign would be slow). A bad descriptor still fails. */
static inline int t_fsync(int fd) {
  struct stat st;
  at_call(K_FSYNC);
  return fstat(fd, &st);
}
static inline int t_rename(const char *a, const char *b) {
  at_call(K_RENAME);
  return rename(a, b);
}
static inline int t_link(const char *a, const char *b) {
  at_call(K_LINK);
  return link(a, b);
}
static inline int t_unlink(const char *p) {
  at_call(K_UNLINK);
  return unlink(p);
}
static inline int t_remove(const char *p) {
  at_call(K_UNLINK);
  return remove(p);
}
static inline FILE *t_fopen(const char *p, const char *mode) {
  at_call(K_FOPEN);
  return fopen(p, mode);
}
static inline size_t t_fwrite(const void *b, size_t s, size_t n, FILE *f) {
  at_call(K_FWRITE);
  return fwrite(b, s, n, f);
}
static inline int t_fflush(FILE *f) {
  at_call(K_FFLUSH);
  return fflush(f);
}
static inline int t_fclose(FILE *f) {
  at_call(K_FCLOSE);
  return fclose(f);
}

#define open t_open
#define pwrite t_pwrite
#define fsync t_fsync
#define rename t_rename
#define link t_link
#define unlink t_unlink
#define remove t_remove
#define fopen t_fopen
#define fwrite t_fwrite
#define fflush t_fflush
#define fclose t_fclose

#include "buffer_util.h" /* heap.h, then per.h with PER_IMPLEMENTATION */
#define PER_STORE_IMPLEMENTATION
#include "per_store.h"

#undef open
#undef pwrite
#undef fsync
#undef rename
#undef link
#undef unlink
#undef remove
#undef fopen
#undef fwrite
#undef fflush
#undef fclose
#include "store_util.h" /* after the #undefs: the C library's calls */

/* ---- directories ------------------------------------------------------ */

static char ROOT[64];
static char SRC[256];  /* another store's checkpoint, loaded by the scenario */
static char CASE[256]; /* the scenario's directory */

/* ---- the scenario ----------------------------------------------------- */

#define ISZ 64u
#define NCK 6 /* checkpoints */

static per_store_config kcfg(void) {
  per_store_config c = per_store_config_default(96, ISZ);
  c.buffer.alpha = 0.6;
  c.buffer.beta_steps = 30;
  c.buffer.seed = 21;
  c.cache_bytes = 2 * 24 * ISZ;
  c.staging_bytes = 3 * (24 * (ISZ + 8) + 128);
  c.segment_bytes = 4096;
  return c;
}

static uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

/* Sample j of trajectory id: the id, j, then bytes of a hash. */
static void make_sample(unsigned char *p, uint32_t id, uint32_t j) {
  uint32_t h = mix32(id * 0x9E3779B1u ^ mix32(j + 77u)), i;
  memcpy(p, &id, 4);
  memcpy(p + 4, &j, 4);
  for (i = 8; i < ISZ; ++i)
    p[i] = (unsigned char)(h >> (8 * (i % 4))) ^ (unsigned char)i;
}

/* Add the next trajectory (its shape, samples and ends follow from its
   id). */
static per_status add_next(per_store *s) {
  unsigned char items[24 * ISZ];
  uint8_t ends[24];
  per_store_stats st;
  uint32_t id, T, B, j;
  per_store_stats_of(s, &st);
  id = (uint32_t)st.added_trajectories;
  T = 1 + id % 6;
  B = 1 + (id / 6) % 4;
  for (j = 0; j < T * B; ++j) {
    make_sample(items + j * ISZ, id, j);
    ends[j] = mix32(id * 31u + j) % 5 == 0 ? (uint8_t)PER_END_TERMINATED
                                           : (uint8_t)PER_END_NONE;
  }
  return per_store_add(s, items, T, B, id % 3 == 2 ? NULL : ends, 0, NULL);
}

/* A batch (options by k) and its update. */
static per_status draw(per_store *s, uint32_t k, uint64_t *h) {
  per_sample_opts o;
  uint64_t ids[16];
  float w[16], td[16];
  unsigned char x[16 * ISZ];
  uint32_t B = 10, j;
  per_status st;
  memset(&o, 0, sizeof o);
  if (k % 3 == 1 && per_store_size(s) >= 2 * B) o.flags = PER_SAMPLE_UNIQUE;
  if (k % 3 == 2) {
    o.flags = PER_SAMPLE_TRAJECTORIES;
    o.window = 3;
  }
  st = per_store_sample(s, B, &o, x, ids, w);
  if (h) {
    uint32_t i;
    const unsigned char *c;
    *h = (*h ^ (uint64_t)st) * 1099511628211ull;
    if (st == PER_OK) {
      c = (const unsigned char *)ids;
      for (i = 0; i < B * sizeof(uint64_t); ++i)
        *h = (*h ^ c[i]) * 1099511628211ull;
      c = (const unsigned char *)w;
      for (i = 0; i < B * sizeof(float); ++i)
        *h = (*h ^ c[i]) * 1099511628211ull;
      for (i = 0; i < B * ISZ; ++i) *h = (*h ^ x[i]) * 1099511628211ull;
    }
  }
  if (st != PER_OK) return st;
  for (j = 0; j < B; ++j) td[j] = (float)((k * 7 + j * 3) % 11) * 0.3f;
  return per_store_update(s, ids, td, B, NULL);
}

static void report(int fd, char what, int i) {
  char rec[2];
  rec[0] = what;
  rec[1] = (char)i;
  if (fd >= 0 && write(fd, rec, 2) != 2) _exit(9);
}

static uint64_t fnv_mix(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = (const unsigned char *)p;
  size_t i;
  for (i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

static uint64_t F[NCK]; /* the checkpoints as a resume sees them */
static uint64_t fingerprint(per_store *s);

/* The scenario in dir; fd: where to report (-1: none); with dry, F[i] is
   taken after checkpoint i (the count paused meanwhile). */
static void scenario(int fd, int dry) {
  per_store_config cfg = kcfg();
  per_store s;
  uint32_t p, t, k = 0;
  REQUIRE(per_store_init(&s, CASE, &cfg, 0, NULL) == PER_OK);
  for (p = 0; p < NCK; ++p) {
    for (t = 0; t < 8; ++t) {
      REQUIRE(add_next(&s) == PER_OK);
      REQUIRE(draw(&s, k++, NULL) == PER_OK);
    }
    if (p == 1) REQUIRE(per_store_write(&s) == PER_OK);
    if (p == 2) { /* another store's checkpoint: its segments linked */
      REQUIRE(per_store_load(&s, SRC, 0, 1, 0) == PER_OK);
      REQUIRE(add_next(&s) == PER_OK);
      REQUIRE(draw(&s, k++, NULL) == PER_OK);
    }
    report(fd, 'B', (int)p);
    REQUIRE(per_store_checkpoint(&s, p == 3 ? PER_STORE_NO_JSON : 0) == PER_OK);
    report(fd, 'C', (int)p);
    if (dry) {
      per_store r;
      int armed = K.armed;
      K.armed = 0;
      REQUIRE(per_store_init(&r, CASE, &cfg, PER_STORE_RESUME, NULL) == PER_OK);
      F[p] = fingerprint(&r);
      per_store_free(&r);
      K.armed = armed;
    }
  }
  report(fd, 'E', 0);
  per_store_free(&s);
}

/* The source store: 16 trajectories and a checkpoint, in SRC. */
static void make_src(void) {
  per_store_config cfg = kcfg();
  per_store s;
  uint32_t t;
  cfg.buffer.seed = 5;
  REQUIRE(per_store_init(&s, SRC, &cfg, 0, NULL) == PER_OK);
  for (t = 0; t < 16; ++t) {
    REQUIRE(add_next(&s) == PER_OK);
    REQUIRE(draw(&s, t, NULL) == PER_OK);
  }
  REQUIRE(per_store_checkpoint(&s, 0) == PER_OK);
  per_store_free(&s);
}

/* What a resumed store holds and draws: counts, every trajectory's
   shape and live count, three batches with updates. Changes s's rng. */
static uint64_t fingerprint(per_store *s) {
  per_store_stats st;
  uint64_t h = 1469598103934665603ull, id, v[5];
  uint32_t k;
  per_store_stats_of(s, &st);
  v[0] = st.trajectories;
  v[1] = st.samples;
  v[2] = st.added_trajectories;
  v[3] = st.added_samples;
  v[4] = per_store_check(s);
  h = fnv_mix(h, v, sizeof v);
  for (id = 0; id < st.added_trajectories; ++id) {
    per_store_traj_info in;
    uint32_t w[6];
    if (per_store_trajectory(s, id, &in) != PER_OK) continue;
    w[0] = (uint32_t)in.id;
    w[1] = in.num_samples;
    w[2] = in.T;
    w[3] = in.B;
    w[4] = in.live;
    w[5] = in.max_episode_length;
    h = fnv_mix(h, w, sizeof w);
  }
  for (k = 0; k < 3; ++k) (void)draw(s, 100 + k, &h);
  return h;
}

/* ---- the campaign ----------------------------------------------------- */

#define KCAP 40 /* cases per kind (and per pwrite variant) at most */

static uint64_t F_EMPTY;        /* a resume of a directory without index.bin */
static unsigned n_cases, n_new; /* cases; those that resumed the newer */

/* One case: the child dies at call `at` of `kind` (half: after half a
   pwrite). */
static void run_case(int kind, long at, int half) {
  per_store_config cfg = kcfg();
  int fds[2], status = 0, c = -1, began = -1, ended = 0;
  pid_t pid;
  char rec[2];
  per_store r, r2;
  per_status st;
  uint64_t fp;
  rm_rf(CASE);
  REQUIRE(pipe(fds) == 0);
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    memset(&K, 0, sizeof K);
    K.kind = kind;
    K.at = at;
    K.half = half;
    K.armed = 1;
    scenario(fds[1], 0);
    _exit(3); /* lived through it */
  }
  close(fds[1]);
  while (read(fds[0], rec, 2) == 2) {
    if (rec[0] == 'B') began = rec[1];
    if (rec[0] == 'C') c = rec[1];
    if (rec[0] == 'E') ended = 1;
  }
  close(fds[0]);
  REQUIRE(waitpid(pid, &status, 0) == pid);
  ++n_cases;
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0 && !ended,
            "%s call %ld%s: the child did not die there (status %d)",
            KNAME[kind], at, half ? " (half)" : "", status);
  /* what the directory resumes as */
  st = per_store_init(&r, CASE, &cfg, PER_STORE_RESUME, NULL);
  CHECK_MSG(st == PER_OK, "%s call %ld%s (committed %d, in %d): resume: %s: %s",
            KNAME[kind], at, half ? " (half)" : "", c, began,
            per_status_str(st), r.error);
  if (st != PER_OK) return;
  fp = fingerprint(&r);
  {
    uint64_t old = c >= 0 ? F[c] : F_EMPTY;
    int inside = began == c + 1 && c + 1 < NCK;
    int ok = fp == old || (inside && fp == F[c + 1]);
    n_new += inside && fp == F[c + 1] && fp != old;
    CHECK_MSG(ok,
              "%s call %ld%s: died with checkpoint %d committed%s: the "
              "resumed store is neither it%s",
              KNAME[kind], at, half ? " (half)" : "", c,
              inside ? ", inside the next" : "", inside ? " nor the next" : "");
  }
  /* the resumed store goes on: one more trajectory, a checkpoint; a
     second resume draws what it draws; no leftover segment files */
  CHECK_OK(add_next(&r));
  CHECK_OK(per_store_checkpoint(&r, 0));
  st = per_store_init(&r2, CASE, &cfg, PER_STORE_RESUME, NULL);
  CHECK_MSG(st == PER_OK, "%s call %ld%s: resume after the checkpoint: %s",
            KNAME[kind], at, half ? " (half)" : "", r2.error);
  if (st == PER_OK) {
    uint64_t h1 = 1, h2 = 1;
    per_store_stats a, b;
    per_store_stats_of(&r, &a);
    per_store_stats_of(&r2, &b);
    CHECK_EQ_U(a.samples, b.samples);
    CHECK_EQ_U(a.added_trajectories, b.added_trajectories);
    CHECK_OK(draw(&r, 7, &h1));
    CHECK_OK(draw(&r2, 7, &h2));
    CHECK_MSG(h1 == h2,
              "%s call %ld%s: the store and its resumed copy draw "
              "differently",
              KNAME[kind], at, half ? " (half)" : "");
    CHECK_MSG(count_segs(CASE) == a.segments,
              "%s call %ld%s: %u segment files, the store counts %llu",
              KNAME[kind], at, half ? " (half)" : "", count_segs(CASE),
              (unsigned long long)a.segments);
    per_store_free(&r2);
  }
  per_store_free(&r);
}

int main(void) {
  long dry[K_N];
  int kind, i;
  strcpy(ROOT, "/tmp/per-store-kill-XXXXXX");
  REQUIRE(mkdtemp(ROOT) != NULL);
  snprintf(SRC, sizeof SRC, "%s/src", ROOT);
  snprintf(CASE, sizeof CASE, "%s/case", ROOT);
  make_src();
  /* an empty store's fingerprint */
  {
    per_store_config cfg = kcfg();
    per_store e;
    REQUIRE(per_store_init(&e, CASE, &cfg, 0, NULL) == PER_OK);
    F_EMPTY = fingerprint(&e);
    per_store_free(&e);
    rm_rf(CASE);
  }
  /* the dry run: the calls, and F */
  memset(&K, 0, sizeof K);
  K.kind = -1;
  K.armed = 1;
  scenario(-1, 1);
  K.armed = 0;
  memcpy(dry, K.calls, sizeof dry);
  for (i = 0; i < NCK; ++i) {
    CHECK(F[i] != F_EMPTY);
    if (i > 0) CHECK(F[i] != F[i - 1]);
  }
  CHECK(dry[K_LINK] > 0);
  CHECK(dry[K_RENAME] >= NCK);
  /* the campaign */
  for (kind = 0; kind < K_N; ++kind) {
    int variants = kind == K_PWRITE ? 2 : 1, v;
    for (v = 0; v < variants; ++v) {
      long n = dry[kind], m = n < KCAP ? n : KCAP, j;
      for (j = 0; j < m; ++j) {
        long at = m == n ? j + 1 : 1 + (j * (n - 1)) / (m - 1);
        run_case(kind, at, v);
      }
    }
  }
  printf("store kill: %u cases (dry run calls:", n_cases);
  for (kind = 0; kind < K_N; ++kind) printf(" %s %ld", KNAME[kind], dry[kind]);
  printf("); %u resumed the checkpoint being written\n", n_new);
  CHECK(n_cases > 50);
  rm_rf(ROOT);
  CHECK_EQ_U(t_default_heap.live, 0);
  return t_done(IS_FLOAT ? "store kill (float)" : "store kill (double)");
}
