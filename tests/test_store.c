/* test_store.c - the trajectory store (per_store.h) against the contract
   its declarations state, most of it bit for bit against a per_buffer.

   Why a per_buffer: the store keeps its priorities in a per_buffer whose
   item is a sample's place in its trajectory, and promises to draw
   exactly the ids and weights a per_buffer of the same config holding
   the same samples draws. So every test feeds a reference per_buffer
   (item_size = the real sample size, one per_buffer_add_steps per
   trajectory) and one or more stores the same trajectories, and
   compares every batch: ids and weights with memcmp, and the store's
   sample bytes with the reference's. Every sample's bytes encode its
   trajectory and position (and a hash over the rest), so a sample read
   from the wrong place, the wrong trajectory or a stale cache shows.
   The store's index (s->index) is also compared with the reference field
   by field (tree, generations, ends, trajectory ids, rng, step,
   counters), and each index item with the position the reference's
   sample says; per_store_trajectory's answers with the trajectories
   added (shape, live count from the reference, max episode length,
   version-4 uuids, distinct).

   Sections:
   0. init refusals; per_store_stop_writer called before the writer
      thread has entered per_store_run_writer must still stop it.
   1. bitwise: cache 0, small and large; staging small enough that adds
      write, and a store with a writer thread beside one without; alpha
      0.6 and 0, PER_WEIGHTS_BUFFER_MAX, PER_MAX_LIVE; updates (also with
      stale ids) between draws; PER_SAMPLE_UNIQUE; item and trajectory
      windows; evictions, partial ones included; T and B varied.
   2. checkpoint and resume: a store checkpointed, freed and resumed
      (PER_STORE_RESUME) and a store loaded from its directory go on
      drawing exactly what a store that kept running and the reference
      draw, through more adds, updates, a second checkpoint and a second
      resume; the three files and their JSON fields; init without RESUME
      on a store's directory, and with a config that does not fit, are
      refused with the files untouched.
   2b. incremental checkpoints (test_log): 60 checkpoints with alpha 0.6
      and 0 (the swap permutation), each after adds, draws and updates,
      most of them records appended to index.log with index.bin kept,
      some rewriting index.bin (the log outgrew it): after each a load
      of the directory is the reference exactly; a record cut short or
      failing its CRC (a crash while appending) loads as the checkpoint
      before it; a damaged log header is refused with the store kept;
      trajectory_index.json, edited in place, has exactly the stored
      trajectories' rows and live counts; a resumed store goes on
      appending.
   3. sharded loads (world 2 and 3): each stored trajectory on rank id %
      world exactly once, with the global counters, the target's own rng
      and step kept, and each rank drawing bit for bit what per.h's own
      shard stages (peri_load_stage and peri_load_apply with by_traj)
      give from the reference's per_buffer checkpoint.
   4. refused calls (bad arguments, PER_STORE_NOWAIT on a full staging
      area, PER_SAMPLE_SEQUENCES, bad update ids, damaged or truncated
      segments, damaged index.bin, mismatching configs) leave the store
      as a twin that never saw them: same stats, same next batches.
   5. I/O failures: ENOSPC-like (RLIMIT_FSIZE, in a child process); EIO
      injected into each call of each kind that per_store_write and
      per_store_checkpoint make (the wrappers below, disarmed by default):
      PER_ERR_IO, the store keeps every trajectory and draws as before, a
      retry succeeds, a failed checkpoint leaves the old one (or, when
      it failed after its commit, which stats.checkpoints counts, the
      new one) loadable exactly, and
      it stays so while the store goes on evicting until its next
      checkpoint; a failed read during a batch puts the rng and step
      back, so the next batches are the reference's (with alpha 0 and
      PER_SAMPLE_UNIQUE, the documented exception: the permutation stays
      shuffled); a writer thread's failed write leaves the trajectory
      staged.
   6. stats: cache hits and misses per sample (against each trajectory's
      cached flag), bytes read, staged and disk bytes, segment counts,
      and segment files of evicted trajectories deleted by a checkpoint.
   Notes: fsync is not really called (the wrappers check the descriptor
   and return): durability is not under test and real syncs make the
   file slow. The writer-thread helper waits until the writer loop runs
   by peeking at the implementation's writer_on flag (the contract has
   no way to ask), for the tests that need it running before they add.
   Runs with PER_REAL double and float, in a few seconds. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the fault injector: per.h's and per_store.h's I/O calls ---------- */

enum {
  K_OPEN,
  K_PREAD,
  K_PWRITE,
  K_FSYNC,
  K_RENAME,
  K_LINK,
  K_UNLINK,
  K_FOPEN,
  K_FWRITE,
  K_FFLUSH,
  K_FCLOSE,
  K_N
};
static const char *const KNAME[K_N] = {"open",   "pread",  "pwrite", "fsync",
                                       "rename", "link",   "unlink", "fopen",
                                       "fwrite", "fflush", "fclose"};

/* Armed: every call of the library's is counted per kind, and call `at`
   (from 1) of kind `kind` fails with EIO (kind -1: only count). Only
   armed while no writer thread runs. */
static struct {
  int armed;
  int kind;
  long at;
  int fired;
  long calls[K_N];
} F;

static int hit(int k) {
  if (!F.armed) return 0;
  ++F.calls[k];
  if (k == F.kind && F.calls[k] == F.at) {
    F.fired = 1;
    errno = EIO;
    return 1;
  }
  return 0;
}

static inline int t_open(const char *p, int flags, ...) {
  mode_t mode = 0;
  if (flags & O_CREAT) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  return hit(K_OPEN) ? -1 : open(p, flags, mode);
}
static inline ssize_t t_pread(int fd, void *b, size_t n, off_t off) {
  return hit(K_PREAD) ? -1 : pread(fd, b, n, off);
}
static inline ssize_t t_pwrite(int fd, const void *b, size_t n, off_t off) {
  return hit(K_PWRITE) ? -1 : pwrite(fd, b, n, off);
}
/* Nothing is really synced (the tests need no durability, and a sync
   per checkpoint file would make them slow); a bad descriptor still
   fails. */
static inline int t_fsync(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -1;
  return hit(K_FSYNC) ? -1 : 0;
}
static inline int t_rename(const char *a, const char *b) {
  return hit(K_RENAME) ? -1 : rename(a, b);
}
static inline int t_link(const char *a, const char *b) {
  return hit(K_LINK) ? -1 : link(a, b);
}
static inline int t_unlink(const char *p) {
  return hit(K_UNLINK) ? -1 : unlink(p);
}
static inline int t_remove(const char *p) {
  return hit(K_UNLINK) ? -1 : remove(p);
}
static inline FILE *t_fopen(const char *p, const char *mode) {
  return hit(K_FOPEN) ? NULL : fopen(p, mode);
}
static inline size_t t_fwrite(const void *b, size_t s, size_t n, FILE *f) {
  return hit(K_FWRITE) ? 0 : fwrite(b, s, n, f);
}
static inline int t_fflush(FILE *f) { return hit(K_FFLUSH) ? EOF : fflush(f); }
/* A failed close still closes. */
static inline int t_fclose(FILE *f) {
  int h = hit(K_FCLOSE), r = fclose(f);
  return h || r != 0 ? EOF : 0;
}

#define open t_open
#define pread t_pread
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
#undef pread
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

static void arm(int kind, long at) {
  memset(&F, 0, sizeof F);
  F.kind = kind;
  F.at = at;
  F.armed = 1;
}
static void disarm(void) { F.armed = 0; }

/* ---- files and directories -------------------------------------------- */

static char ROOT[64]; /* mkdtemp */

static void dir_of(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/%s", ROOT, name);
}

static int file_exists(const char *dir, const char *name) {
  char p[512];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The whole file (malloc'd, NUL-terminated) and its length; NULL when it
   cannot be read. */
static unsigned char *slurp(const char *path, long *len) {
  FILE *f = fopen(path, "rb");
  unsigned char *buf;
  long n;
  struct stat st;
  *len = -1;
  if (!f) return NULL;
  if (fstat(fileno(f), &st) != 0) {
    fclose(f);
    return NULL;
  }
  buf = (unsigned char *)malloc((size_t)st.st_size + 1);
  n = (long)fread(buf, 1, (size_t)st.st_size, f);
  fclose(f);
  buf[n] = 0;
  *len = n;
  return buf;
}

static unsigned char *slurp_in(const char *dir, const char *name, long *len) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return slurp(p, len);
}

/* A hash of every file of dir but temporary ones (name and bytes), to
   show that a refused call left a directory as it was. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = (const unsigned char *)p;
  size_t i;
  for (i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

static uint64_t dir_hash(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  uint64_t h = 0; /* order independent: a sum of per-file hashes */
  if (!d) return 1;
  while ((e = readdir(d)) != NULL) {
    char p[512];
    long len;
    unsigned char *b;
    uint64_t fh = 1469598103934665603ull;
    if (e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    fh = fnv(fh, e->d_name, strlen(e->d_name));
    b = slurp(p, &len);
    if (b) fh = fnv(fh, b, (size_t)len);
    free(b);
    h += fh;
  }
  closedir(d);
  return h;
}

/* The first segment file of dir holding pat[0..n), its path and the
   offset; 0 when none does. */
static int find_in_segs(const char *dir, const unsigned char *pat, size_t n,
                        char *path, size_t cap, long *off) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int found = 0;
  if (!d) return 0;
  while (!found && (e = readdir(d)) != NULL) {
    long len, i;
    unsigned char *b;
    if (!is_seg(e->d_name)) continue;
    snprintf(path, cap, "%s/%s", dir, e->d_name);
    b = slurp(path, &len);
    for (i = 0; b && i + (long)n <= len; ++i)
      if (memcmp(b + i, pat, n) == 0) {
        *off = i;
        found = 1;
        break;
      }
    free(b);
  }
  closedir(d);
  return found;
}

static void flip_byte(const char *path, long off) {
  long len;
  unsigned char *b = slurp(path, &len);
  REQUIRE(b && off < len);
  b[off] ^= 0x5a;
  REQUIRE(file_write(path, b, len));
  free(b);
}

/* ---- samples: bytes that say which trajectory and position they are -- */

static uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

static uint32_t sample_hash(uint32_t traj, uint32_t j) {
  return mix32(traj * 0x9E3779B1u ^ mix32(j + 0x1234567u));
}

/* Sample j of trajectory traj: traj, j, a hash, then bytes of the hash.
   item_size >= 12. */
static void make_sample(unsigned char *p, uint32_t isz, uint32_t traj,
                        uint32_t j) {
  uint32_t h = sample_hash(traj, j), i;
  memcpy(p, &traj, 4);
  memcpy(p + 4, &j, 4);
  memcpy(p + 8, &h, 4);
  for (i = 12; i < isz; ++i)
    p[i] = (unsigned char)((h >> (8 * (i % 4))) ^ (i * 37u));
}

/* 1 when p is a sample make_sample made; its trajectory and position. */
static int decode_sample(const unsigned char *p, uint32_t isz, uint32_t *traj,
                         uint32_t *j) {
  unsigned char want[256];
  memcpy(traj, p, 4);
  memcpy(j, p + 4, 4);
  make_sample(want, isz, *traj, *j);
  return memcmp(want, p, isz) == 0;
}

/* The episode end of sample j of trajectory traj; trajectories with id %
   5 == 4 are added with ends NULL. */
static uint8_t end_of(uint32_t traj, uint32_t j) {
  uint32_t h = mix32(traj * 131u + j * 7u + 99u);
  if (traj % 5 == 4) return PER_END_NONE;
  return h % 9 == 0    ? (uint8_t)PER_END_TERMINATED
         : h % 13 == 0 ? (uint8_t)PER_END_TRUNCATED
                       : (uint8_t)PER_END_NONE;
}

/* Trajectory traj's T * B samples and ends; returns ends or NULL. */
static const uint8_t *make_traj(unsigned char *items, uint8_t *ends,
                                uint32_t isz, uint32_t traj, uint32_t T,
                                uint32_t B) {
  uint32_t j;
  for (j = 0; j < T * B; ++j) {
    make_sample(items + (size_t)j * isz, isz, traj, j);
    ends[j] = end_of(traj, j);
  }
  return traj % 5 == 4 ? NULL : ends;
}

/* The longest run of one environment's steps ending with an end or the
   trajectory's last step. */
static uint32_t max_episode(uint32_t traj, uint32_t T, uint32_t B) {
  uint32_t b, t, best = 0;
  for (b = 0; b < B; ++b) {
    uint32_t run = 0;
    for (t = 0; t < T; ++t) {
      ++run;
      if (end_of(traj, t * B + b) != PER_END_NONE) {
        if (run > best) best = run;
        run = 0;
      }
    }
    if (run > best) best = run;
  }
  return best;
}

/* ---- the index against the reference ---------------------------------- */

/* "" when s->index is the reference's state (all but the items and
   item_size) and each index item is the position of the reference's
   sample in that slot; else what differs. */
static const char *index_diff(const per_store *s, const per_buffer *r) {
  const per_buffer *x = &s->index;
  uint32_t cap = r->cfg.capacity, i;
  size_t nodes = (size_t)r->tree.leaves * 2 * sizeof(per_real);
  per_config a = x->cfg, b = r->cfg;
  a.item_size = b.item_size = 0;
  if (memcmp(&a, &b, sizeof a) != 0) return "config";
  if (x->size != r->size || x->pos != r->pos) return "size or pos";
  if (x->added != r->added || x->trajs != r->trajs) return "added or trajs";
  if (x->step != r->step) return "step";
  if (memcmp(&x->max_leaf, &r->max_leaf, sizeof x->max_leaf) != 0)
    return "max_leaf";
  if (memcmp(&x->rng, &r->rng, sizeof x->rng) != 0) return "rng";
  if (x->zero_hint != r->zero_hint) return "zero_hint";
  if (memcmp(x->gen, r->gen, cap * sizeof(uint32_t)) != 0) return "gen";
  if (memcmp(x->ends, r->ends, cap) != 0) return "ends";
  if (memcmp(x->traj, r->traj, cap * sizeof(uint32_t)) != 0) return "traj";
  if (x->tree.leaves != r->tree.leaves ||
      memcmp(x->tree.node, r->tree.node, nodes) != 0)
    return "tree";
  if ((x->min_node != NULL) != (r->min_node != NULL) ||
      (x->min_node && memcmp(x->min_node, r->min_node, nodes) != 0))
    return "min tree";
  if ((x->max_node != NULL) != (r->max_node != NULL) ||
      (x->max_node && memcmp(x->max_node, r->max_node, nodes) != 0))
    return "max tree";
  if ((x->swap.perm != NULL) != (r->swap.perm != NULL) ||
      (x->swap.perm &&
       (x->swap.n != r->swap.n ||
        memcmp(x->swap.perm, r->swap.perm, cap * sizeof(uint32_t)) != 0)))
    return "swap";
  if (x->cfg.item_size != 4) return "index item_size is not 4";
  for (i = 0; i < r->size; ++i) {
    uint32_t tr, j, got;
    if (!decode_sample(r->items + (size_t)i * r->cfg.item_size,
                       r->cfg.item_size, &tr, &j))
      return "reference item (test bug)";
    memcpy(&got, x->items + (size_t)i * 4, 4);
    if (got != j) return "index item (position)";
  }
  return "";
}

static const char *SECTION = ""; /* the test running, for messages */

#define CHECK_INDEX(s, r)                                          \
  do {                                                             \
    const char *t_d = index_diff((s), (r));                        \
    CHECK_MSG(t_d[0] == 0, "%s: index differs: %s", SECTION, t_d); \
  } while (0)

/* ---- a writer thread -------------------------------------------------- */

typedef struct wthread {
  pthread_t th;
  per_store *s;
  per_status st;
  int on;
} wthread;

static void *writer_main(void *p) {
  wthread *w = (wthread *)p;
  w->st = per_store_run_writer(w->s);
  return NULL;
}

/* Whether s's writer loop is running. The contract gives no way to ask
   (a second per_store_run_writer would become the writer), so this
   peeks at the implementation's flag: the tests that need the writer
   running before they add (the I/O faults only the writer may meet,
   the waits counted) start it and wait for it. */
static int writer_running(per_store *s) {
  int on;
  pthread_mutex_lock(&s->st->mu);
  on = s->st->writer_on;
  pthread_mutex_unlock(&s->st->mu);
  return on;
}

static void writer_start(wthread *w, per_store *s) {
  struct timespec ms = {0, 1000000};
  int i;
  w->s = s;
  w->st = PER_ERR_CORRUPT;
  REQUIRE(pthread_create(&w->th, NULL, writer_main, w) == 0);
  w->on = 1;
  for (i = 0; i < 5000 && !writer_running(s); ++i) nanosleep(&ms, NULL);
  REQUIRE(writer_running(s));
}

static void writer_stop(wthread *w) {
  if (!w->on) return;
  per_store_stop_writer(w->s);
  REQUIRE(pthread_join(w->th, NULL) == 0);
  CHECK_OK(w->st);
  w->on = 0;
}

/* ---- a group: a reference per_buffer and stores fed the same ---------- */

#define GMAX 4
#define MAXTRAJ 512
#define MAXB 64 /* largest batch drawn */

typedef struct group {
  per_buffer ref;
  per_store *s[GMAX];
  wthread *w[GMAX]; /* NULL: no writer thread */
  int n;
  uint32_t isz;
  uint64_t ntraj; /* trajectories added (the next id) */
  uint32_t T[MAXTRAJ], B[MAXTRAJ];
  uint32_t rng;
  uint32_t k; /* draws so far */
  uint64_t old_ids[MAXB];
  uint32_t n_old;
  uint32_t shard_w, shard_r, shard_below; /* items of trajectories below
                                             shard_below: id % w == r */
  int saw_partial; /* a trajectory was partly evicted at a check */
  int bad[GMAX];   /* store i drew other batches: no longer compared */
} group;

static uint32_t g_rand(group *g) {
  g->rng = g->rng * 1664525u + 1013904223u;
  return mix32(g->rng);
}

static void g_init(group *g, const per_config *bc, uint32_t seed) {
  memset(g, 0, sizeof *g);
  REQUIRE(per_buffer_init(&g->ref, bc, NULL) == PER_OK);
  g->isz = bc->item_size;
  g->rng = seed;
}

static void g_attach(group *g, per_store *s, wthread *w) {
  REQUIRE(g->n < GMAX);
  g->s[g->n] = s;
  g->w[g->n] = w;
  g->bad[g->n] = 0;
  ++g->n;
}

static void g_detach(group *g, per_store *s) {
  int i, j;
  for (i = 0; i < g->n; ++i)
    if (g->s[i] == s) {
      for (j = i; j + 1 < g->n; ++j) {
        g->s[j] = g->s[j + 1];
        g->w[j] = g->w[j + 1];
        g->bad[j] = g->bad[j + 1];
      }
      --g->n;
      return;
    }
}

static int g_writing(const group *g, int i) { return g->w[i] && g->w[i]->on; }

/* per_store_add_fill's fill for g_try_add: the items, sample by sample
   in reverse order (any order must do), counted. */
typedef struct fill_ctx {
  const unsigned char *items;
  uint32_t isz, n, calls;
} fill_ctx;

static void fill_items(void *ctx, void *dst, uint32_t n) {
  fill_ctx *f = (fill_ctx *)ctx;
  uint32_t j;
  ++f->calls;
  CHECK_EQ_U(n, f->n);
  for (j = n; j-- > 0;)
    memcpy((unsigned char *)dst + (size_t)j * f->isz,
           f->items + (size_t)j * f->isz, f->isz);
}

/* Add trajectory g->ntraj of shape T x B to every store of g (and, when
   all took it, to the reference): per_store_add for the stores at even
   places, per_store_add_fill for the others. Returns the stores'
   status: they must agree. */
static per_status g_try_add(group *g, uint32_t T, uint32_t B, uint32_t flags) {
  uint32_t n = T * B;
  unsigned char *items = (unsigned char *)malloc((size_t)n * g->isz);
  uint8_t *ends = (uint8_t *)malloc(n);
  const uint8_t *e;
  per_status st = PER_OK;
  int i;
  REQUIRE(g->ntraj < MAXTRAJ);
  e = make_traj(items, ends, g->isz, (uint32_t)g->ntraj, T, B);
  for (i = 0; i < g->n; ++i) {
    uint64_t id = ~(uint64_t)0;
    fill_ctx f;
    per_status si;
    f.items = items;
    f.isz = g->isz;
    f.n = n;
    f.calls = 0;
    if (i % 2 == 0) si = per_store_add(g->s[i], items, T, B, e, flags, &id);
    else {
      si = per_store_add_fill(g->s[i], T, B, e, flags, &id, fill_items, &f);
      CHECK_EQ_U(f.calls, si == PER_OK ? 1u : 0u);
    }
    if (i == 0) st = si;
    CHECK_STATUS(si, st);
    if (si == PER_OK) {
      CHECK_EQ_U(id, g->ntraj);
      CHECK_MSG(g->s[i]->error[0] == 0, "error after an add: %s",
                g->s[i]->error);
    } else {
      CHECK_MSG(g->s[i]->error[0] != 0, "no error text for a refused add");
    }
  }
  if (st == PER_OK) {
    REQUIRE(per_buffer_add_steps(&g->ref, items, n, e) == PER_OK);
    g->T[g->ntraj] = T;
    g->B[g->ntraj] = B;
    ++g->ntraj;
  }
  free(items);
  free(ends);
  return st;
}

static void g_add(group *g, uint32_t T, uint32_t B) {
  CHECK_OK(g_try_add(g, T, B, 0));
}

/* Draw k's options: a rotation of plain, unique, item window, trajectory
   window, unique within a trajectory window and scheduled beta. */
static uint32_t opts_of(uint32_t k, per_sample_opts *o) {
  memset(o, 0, sizeof *o);
  switch (k % 6) {
    case 0: return 16;
    case 1: o->flags = PER_SAMPLE_UNIQUE; return 8;
    case 2: o->window = 37; return 12;
    case 3:
      o->flags = PER_SAMPLE_TRAJECTORIES;
      o->window = 3;
      return 10;
    case 4:
      o->flags = PER_SAMPLE_UNIQUE | PER_SAMPLE_TRAJECTORIES;
      o->window = 5;
      return 6;
    default:
      o->flags = PER_SAMPLE_BETA;
      o->beta = 0.7;
      return 20;
  }
}

/* One batch from the reference and every store with the same options:
   the same status, ids, weights and sample bytes (every sample one of
   the stored trajectories'); then, with update, the same TD errors
   applied everywhere (every fifth time to ids of an older batch, some
   of them stale), with the same stale counts. */
static void g_draw_opts(group *g, uint32_t Bn, const per_sample_opts *o,
                        int update) {
  uint64_t rid[MAXB], sid[MAXB];
  float rw[MAXB], sw[MAXB], td[MAXB];
  size_t bytes = (size_t)MAXB * g->isz;
  unsigned char *rx = (unsigned char *)malloc(bytes);
  unsigned char *sx = (unsigned char *)malloc(bytes);
  per_status want;
  uint32_t j, stale_r = 0, n_upd;
  const uint64_t *upd;
  int i;
  REQUIRE(Bn <= MAXB);
  want = per_buffer_sample(&g->ref, Bn, o, rx, rid, rw);
  for (i = 0; i < g->n; ++i) {
    int no_items = g->k % 7 == 6; /* ids and weights only */
    per_status st =
        per_store_sample(g->s[i], Bn, o, no_items ? NULL : sx, sid, sw);
    if (g->bad[i]) continue; /* diverged: said once */
    CHECK_STATUS(st, want);
    if (st != PER_OK || want != PER_OK) continue;
    if (memcmp(sid, rid, Bn * sizeof(uint64_t)) != 0 ||
        memcmp(sw, rw, Bn * sizeof(float)) != 0 ||
        (!no_items && memcmp(sx, rx, (size_t)Bn * g->isz) != 0)) {
      const char *what = memcmp(sid, rid, Bn * sizeof(uint64_t)) ? "ids"
                         : memcmp(sw, rw, Bn * sizeof(float))    ? "weights"
                                                                 : "samples";
      CHECK_MSG(0,
                "%s: store %d draws other %s than the reference at draw "
                "%u (the store's later draws are not compared)",
                SECTION, i, what, g->k);
      g->bad[i] = 1;
      continue;
    }
    ++t_pass_count;
    if (no_items) continue;
    for (j = 0; j < Bn; ++j) {
      uint32_t tr, pos;
      int ok = decode_sample(sx + (size_t)j * g->isz, g->isz, &tr, &pos);
      CHECK_MSG(ok && tr < g->ntraj && pos < g->T[tr] * g->B[tr],
                "store %d drew a sample that is none of the stored ones", i);
      if (ok && g->shard_w && tr < g->shard_below)
        CHECK_MSG(tr % g->shard_w == g->shard_r,
                  "rank %u of %u drew trajectory %u", g->shard_r, g->shard_w,
                  tr);
    }
  }
  ++g->k;
  if (want == PER_OK && update) {
    upd = rid;
    n_upd = Bn;
    if (g->k % 5 == 0 && g->n_old > 0) { /* an old batch's ids */
      upd = g->old_ids;
      n_upd = g->n_old;
    }
    for (j = 0; j < n_upd; ++j)
      td[j] = (g_rand(g) % 4 == 0) ? 0.0f : (float)(g_rand(g) % 1000) / 97.0f;
    CHECK_OK(per_buffer_update(&g->ref, upd, td, n_upd, &stale_r));
    for (i = 0; i < g->n; ++i) {
      uint32_t stale_s = 12345;
      CHECK_OK(per_store_update(g->s[i], upd, td, n_upd, &stale_s));
      CHECK_EQ_U(stale_s, stale_r);
    }
    if (g->k % 3 == 0) {
      memcpy(g->old_ids, rid, Bn * sizeof(uint64_t));
      g->n_old = Bn;
    }
  }
  free(rx);
  free(sx);
}

static void g_draw(group *g, int update) {
  per_sample_opts o;
  uint32_t Bn = opts_of(g->k, &o);
  g_draw_opts(g, Bn, &o, update);
}

/* Every store's counts, trajectories and index against the reference. */
static void g_check(group *g) {
  static uint32_t live[MAXTRAJ];
  uint32_t i;
  uint64_t trajs = 0, id;
  int k;
  memset(live, 0, sizeof live);
  for (i = 0; i < g->ref.size; ++i) {
    uint32_t tr, pos;
    REQUIRE(
        decode_sample(g->ref.items + (size_t)i * g->isz, g->isz, &tr, &pos));
    REQUIRE(tr < MAXTRAJ);
    ++live[tr];
  }
  for (id = 0; id < g->ntraj; ++id) {
    trajs += live[id] > 0;
    if (live[id] > 0 && live[id] < g->T[id] * g->B[id]) g->saw_partial = 1;
  }
  for (k = 0; k < g->n; ++k) {
    per_store *s = g->s[k];
    per_store_stats st;
    unsigned char prev_uuid[16];
    int have_prev = 0;
    per_store_stats_of(s, &st);
    CHECK_EQ_U(st.trajectories, trajs);
    CHECK_EQ_U(st.samples, g->ref.size);
    CHECK_EQ_U(per_store_size(s), g->ref.size);
    CHECK_EQ_U(st.added_trajectories, g->ref.trajs);
    CHECK_EQ_U(st.added_samples, g->ref.added);
    for (id = 0; id < g->ntraj; ++id) {
      per_store_traj_info in;
      per_status r;
      memset(&in, 0xee, sizeof in);
      r = per_store_trajectory(s, id, &in);
      if (live[id] == 0) {
        CHECK_STATUS(r, PER_ERR_INDEX);
        continue;
      }
      CHECK_OK(r);
      if (r != PER_OK) continue;
      CHECK_EQ_U(in.id, id);
      CHECK_EQ_U(in.T, g->T[id]);
      CHECK_EQ_U(in.B, g->B[id]);
      CHECK_EQ_U(in.num_samples, g->T[id] * g->B[id]);
      CHECK_EQ_U(in.live, live[id]);
      CHECK_EQ_U(in.max_episode_length,
                 max_episode((uint32_t)id, g->T[id], g->B[id]));
      CHECK_MSG((in.uuid[6] >> 4) == 4 && (in.uuid[8] & 0xc0) == 0x80,
                "trajectory %llu: uuid not version 4", (unsigned long long)id);
      CHECK_MSG(!have_prev || memcmp(prev_uuid, in.uuid, 16) != 0,
                "trajectory %llu: the uuid of the one before",
                (unsigned long long)id);
      memcpy(prev_uuid, in.uuid, 16);
      have_prev = 1;
    }
    if (!g_writing(g, k)) CHECK_OK(per_store_check(s));
    if (!g->bad[k]) {
      const char *d = index_diff(s, &g->ref);
      CHECK_MSG(d[0] == 0,
                "%s: store %d's index differs from the "
                "reference: %s (not compared again)",
                SECTION, k, d);
      if (d[0]) g->bad[k] = 1;
    }
  }
}

static void g_free(group *g) {
  int i;
  for (i = 0; i < g->n; ++i)
    if (g->w[i]) writer_stop(g->w[i]);
  per_buffer_free(&g->ref);
}

/* A store config: capacity, sample size, and the sizes. */
static per_store_config scfg(uint32_t cap, uint32_t isz, uint64_t cache,
                             uint64_t staging, uint64_t seg) {
  per_store_config c = per_store_config_default(cap, isz);
  c.buffer.alpha = 0.6;
  c.buffer.beta0 = 0.4;
  c.buffer.beta_steps = 50;
  c.buffer.seed = 7;
  c.cache_bytes = cache;
  c.staging_bytes = staging;
  c.segment_bytes = seg;
  return c;
}

/* Staging bytes for at least n trajectories of m samples. */
static uint64_t room_for(uint32_t n, uint32_t m, uint32_t isz) {
  return (uint64_t)n * ((uint64_t)m * (isz + 8) + 128);
}

static void store_in(per_store *s, const char *name,
                     const per_store_config *c) {
  char dir[256];
  dir_of(dir, sizeof dir, name);
  REQUIRE(per_store_init(s, dir, c, 0, NULL) == PER_OK);
}

/* per_store_stop_writer while the writer thread has not yet entered
   per_store_run_writer: the contract says stop makes the writer return
   (and per_store_free relies on it); a stop that comes first must not
   be lost, or the thread runs on (and, after per_store_free, on freed
   memory). The thread here enters run_writer 50 ms late. */
typedef struct late_writer {
  per_store *s;
  per_status st;
  volatile int done;
  pthread_mutex_t mu;
} late_writer;

static void *late_writer_main(void *p) {
  late_writer *w = (late_writer *)p;
  struct timespec d = {0, 50000000};
  per_status st;
  nanosleep(&d, NULL);
  st = per_store_run_writer(w->s);
  pthread_mutex_lock(&w->mu);
  w->st = st;
  w->done = 1;
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

static int late_done(late_writer *w) {
  int d;
  pthread_mutex_lock(&w->mu);
  d = w->done;
  pthread_mutex_unlock(&w->mu);
  return d;
}

static void test_writer_stop_race(void) {
  SECTION = "writer_stop_race";
  per_store_config cfg = scfg(64, 16, 0, 4096, 4096);
  per_store s;
  late_writer w;
  pthread_t th;
  struct timespec ms = {0, 1000000};
  int i;
  store_in(&s, "stop-race", &cfg);
  memset(&w, 0, sizeof w);
  w.s = &s;
  pthread_mutex_init(&w.mu, NULL);
  REQUIRE(pthread_create(&th, NULL, late_writer_main, &w) == 0);
  per_store_stop_writer(&s); /* before the thread is in run_writer */
  for (i = 0; i < 1000 && !late_done(&w); ++i) nanosleep(&ms, NULL);
  CHECK_MSG(late_done(&w), "per_store_stop_writer before the writer "
                           "started was lost: the writer still runs 1 s later");
  while (!late_done(&w)) { /* release it, to go on */
    per_store_stop_writer(&s);
    nanosleep(&ms, NULL);
  }
  REQUIRE(pthread_join(th, NULL) == 0);
  CHECK_OK(w.st);
  pthread_mutex_destroy(&w.mu);
  per_store_free(&s);
}

/* ======================================================================
   1. bit for bit against per_buffer
   ====================================================================== */

static void test_bitwise(void) {
  SECTION = "bitwise";
  static const struct {
    uint32_t cache; /* 0: none, 1: a few trajectories, 2: everything */
    double alpha;
    uint32_t isz, flags;
    uint64_t seg;
  } C[] = {{0, 0.6, 16, 0, 4096},
           {1, 0.6, 28, 0, 1u << 20},
           {2, 0.6, 41, PER_WEIGHTS_BUFFER_MAX, 4096},
           {0, 0.0, 28, 0, 1u << 20},
           {1, 0.0, 41, 0, 4096},
           {2, 0.0, 16, 0, 1u << 20},
           {1, 0.6, 20, PER_MAX_LIVE, 4096}};
  uint32_t c;
  for (c = 0; c < sizeof C / sizeof C[0]; ++c) {
    uint32_t isz = C[c].isz, t;
    uint64_t cache = C[c].cache == 0   ? 0
                     : C[c].cache == 1 ? (uint64_t)3 * 32 * isz
                                       : (uint64_t)1 << 24;
    per_store_config cfg =
        scfg(300, isz, cache, room_for(3, 32, isz), C[c].seg);
    per_store a, b;
    wthread wb;
    group g;
    char name[32];
    per_store_stats st;
    memset(&wb, 0, sizeof wb);
    cfg.buffer.alpha = C[c].alpha;
    cfg.buffer.flags = C[c].flags;
    cfg.buffer.seed = 100 + c;
    g_init(&g, &cfg.buffer, 77 + c);
    snprintf(name, sizeof name, "bw-%u-a", c);
    store_in(&a, name, &cfg);
    snprintf(name, sizeof name, "bw-%u-b", c);
    store_in(&b, name, &cfg);
    writer_start(&wb, &b);
    g_attach(&g, &a, NULL);
    g_attach(&g, &b, &wb);
    for (t = 0; t < 60; ++t) {
      uint32_t T = 1 + g_rand(&g) % 8, B = 1 + g_rand(&g) % 4;
      g_add(&g, T, B);
      g_draw(&g, 1);
      if (t % 3 == 2) g_draw(&g, 1);
      if (t % 4 == 3) g_check(&g);
    }
    CHECK_MSG(g.saw_partial, "config %u: no partly evicted trajectory", c);
    CHECK(g.ref.added > 2 * 300); /* evicted more than a whole capacity */
    /* writing everything changes no draw */
    CHECK_OK(per_store_write(&a));
    per_store_stats_of(&a, &st);
    CHECK_EQ_U(st.staged_bytes, 0);
    CHECK_EQ_U(st.staged_trajectories, 0);
    CHECK_EQ_U(st.written_trajectories, g.ntraj);
    for (t = 0; t < 12; ++t) g_draw(&g, 1);
    writer_stop(&wb); /* after its current append: some may be staged */
    per_store_stats_of(&b, &st);
    CHECK_EQ_U(st.staged_trajectories + st.written_trajectories, g.ntraj);
    CHECK_OK(per_store_write(&b));
    per_store_stats_of(&b, &st);
    CHECK_EQ_U(st.staged_trajectories, 0);
    CHECK_EQ_U(st.written_trajectories, g.ntraj);
    g_check(&g);
    for (t = 0; t < 6; ++t) g_draw(&g, 1);
    /* a writer may start again */
    writer_start(&wb, &b);
    g_add(&g, 4, 3);
    g_draw(&g, 1);
    writer_stop(&wb);
    g_check(&g);
    g_free(&g);
    per_store_free(&a);
    per_store_free(&b);
    CHECK(a.st == NULL && b.st == NULL);
  }
}

/* ======================================================================
   2. checkpoint, resume, load
   ====================================================================== */

/* The uuids of trajectories [0, n) of s (zeros where not stored). */
static void uuids_of(const per_store *s, uint64_t n, unsigned char (*u)[16]) {
  uint64_t id;
  for (id = 0; id < n; ++id) {
    per_store_traj_info in;
    memset(u[id], 0, 16);
    if (per_store_trajectory(s, id, &in) == PER_OK) memcpy(u[id], in.uuid, 16);
  }
}

static int zeroed_but_error(const per_store *s) {
  per_store z;
  memset(&z, 0, sizeof z);
  memcpy(z.error, s->error, sizeof z.error);
  return memcmp(&z, s, sizeof z) == 0 && s->error[0] != 0;
}

/* uuid as text (8-4-4-4-12 lowercase hex) into out[37]. */
static void uuid_text(const unsigned char *u, char *out) {
  static const char hex[] = "0123456789abcdef";
  int i, j = 0;
  for (i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[j++] = '-';
    out[j++] = hex[u[i] >> 4];
    out[j++] = hex[u[i] & 15];
  }
  out[j] = 0;
}

static void check_json(const char *dir, const group *g, const per_store *s) {
  long len;
  per_store_traj_info in;
  char u[40];
  char *tj = (char *)slurp_in(dir, "trajectory_index.json", &len);
  char *md = (char *)slurp_in(dir, "metadata.json", &len);
  char want[64];
  REQUIRE(tj && md);
  CHECK(strstr(tj, "\"uuid\"") != NULL);
  CHECK(strstr(tj, "\"trajectory_id\"") != NULL);
  CHECK(strstr(tj, "\"num_samples\"") != NULL);
  CHECK(strstr(tj, "\"shape\"") != NULL);
  CHECK(strstr(tj, "\"max_episode_length\"") != NULL);
  /* the newest trajectory's id and sample count */
  snprintf(want, sizeof want, "%llu", (unsigned long long)(g->ntraj - 1));
  CHECK(strstr(tj, want) != NULL);
  /* the newest trajectory's uuid, as text */
  REQUIRE(per_store_trajectory(s, g->ntraj - 1, &in) == PER_OK);
  uuid_text(in.uuid, u);
  CHECK_MSG(strstr(tj, u) != NULL, "trajectory_index.json lacks uuid %s", u);
  CHECK(strstr(md, "\"seed\"") != NULL);
  CHECK(strstr(md, "\"format\"") != NULL);
  CHECK(strstr(md, "total") != NULL);
  snprintf(want, sizeof want, "%llu", (unsigned long long)g->ref.added);
  CHECK_MSG(strstr(md, want) != NULL, "metadata.json lacks the total %s", want);
  free(tj);
  free(md);
}

static void test_checkpoint(void) {
  SECTION = "checkpoint";
  per_store_config cfg = scfg(256, 24, 3 * 24 * 24, room_for(3, 24, 24), 4096);
  per_store x, y, z, bad;
  group g;
  char dy[256], dz[256];
  static unsigned char uy[MAXTRAJ][16], uy2[MAXTRAJ][16], uz[MAXTRAJ][16];
  uint64_t h0;
  uint32_t t;
  per_store_stats st;
  cfg.buffer.flags = PER_WEIGHTS_BUFFER_MAX;
  cfg.buffer.seed = 31;
  cfg.layout = "u32 traj; u32 pos; u32 hash; u8 fill[12]";
  g_init(&g, &cfg.buffer, 5);
  REQUIRE(per_buffer_set_layout(&g.ref, cfg.layout) == PER_OK);
  store_in(&x, "ck-x", &cfg);
  store_in(&y, "ck-y", &cfg);
  dir_of(dy, sizeof dy, "ck-y");
  dir_of(dz, sizeof dz, "ck-z");
  g_attach(&g, &x, NULL);
  g_attach(&g, &y, NULL);
  /* a fresh directory resumes as an empty store */
  {
    char de[256];
    per_store e;
    dir_of(de, sizeof de, "ck-empty");
    CHECK_OK(per_store_init(&e, de, &cfg, PER_STORE_RESUME, NULL));
    CHECK_EQ_U(per_store_size(&e), 0);
    per_store_free(&e);
  }
  for (t = 0; t < 30; ++t) {
    g_add(&g, 1 + g_rand(&g) % 6, 1 + g_rand(&g) % 5);
    g_draw(&g, 1);
  }
  g_check(&g);
  CHECK_OK(per_store_checkpoint(&y, 0));
  CHECK(y.error[0] == 0);
  per_store_stats_of(&y, &st);
  CHECK_EQ_U(st.checkpoints, 1);
  CHECK_EQ_U(st.staged_trajectories, 0);
  CHECK(file_exists(dy, "index.bin"));
  CHECK(file_exists(dy, "trajectory_index.json"));
  CHECK(file_exists(dy, "metadata.json"));
  CHECK_EQ_U(count_segs(dy), st.segments);
  check_json(dy, &g, &y);
  CHECK_STATUS(per_store_checkpoint(&y, 1u << 9), PER_ERR_ARG);
  uuids_of(&y, g.ntraj, uy);
  per_store_free(&y);
  g_detach(&g, &y);
  h0 = dir_hash(dy);
  /* a store's directory is refused without RESUME, and resuming with a
     config that does not fit is refused; the files stay */
  memset(&bad, 0x55, sizeof bad);
  CHECK_STATUS(per_store_init(&bad, dy, &cfg, 0, NULL), PER_ERR_IO);
  CHECK(zeroed_but_error(&bad));
  {
    per_store_config c2 = cfg;
    c2.buffer.capacity = 300;
    c2.buffer.max_unique = cfg.buffer.max_unique;
    memset(&bad, 0x55, sizeof bad);
    CHECK_STATUS(per_store_init(&bad, dy, &c2, PER_STORE_RESUME, NULL),
                 PER_ERR_MISMATCH);
    CHECK(zeroed_but_error(&bad));
    c2 = cfg;
    c2.layout = "float32 obs[6]";
    memset(&bad, 0x55, sizeof bad);
    CHECK_STATUS(per_store_init(&bad, dy, &c2, PER_STORE_RESUME, NULL),
                 PER_ERR_MISMATCH);
    CHECK(zeroed_but_error(&bad));
    c2 = cfg;
    c2.buffer.item_size = 28;
    memset(&bad, 0x55, sizeof bad);
    CHECK_STATUS(per_store_init(&bad, dy, &c2, PER_STORE_RESUME, NULL),
                 PER_ERR_MISMATCH);
    CHECK(zeroed_but_error(&bad));
  }
  CHECK_EQ_U(dir_hash(dy), h0);
  /* resume y; load its checkpoint into z (another directory) */
  CHECK_OK(per_store_init(&y, dy, &cfg, PER_STORE_RESUME, NULL));
  CHECK_EQ_U(dir_hash(dy), h0);
  uuids_of(&y, g.ntraj, uy2);
  CHECK_MEM(uy2, uy, g.ntraj * 16);
  CHECK_OK(per_store_init(&z, dz, &cfg, 0, NULL));
  g_add(&g, 2, 2); /* z gets its own trajectory first: the load drops it */
  CHECK_OK(per_store_add(&z, g.ref.items, 1, 1, NULL, 0, NULL));
  CHECK_OK(per_store_load(&z, dy, 0, 1, 0));
  CHECK_EQ_U(dir_hash(dy), h0);
  uuids_of(&z, g.ntraj - 1, uy2);
  CHECK_MEM(uy2, uy, (g.ntraj - 1) * 16);
  /* x took one more trajectory meanwhile: bring y and z level */
  {
    unsigned char items[4 * 24];
    uint8_t ends[4];
    const uint8_t *e =
        make_traj(items, ends, 24, (uint32_t)(g.ntraj - 1), 2, 2);
    CHECK_OK(per_store_add(&y, items, 2, 2, e, 0, NULL));
    CHECK_OK(per_store_add(&z, items, 2, 2, e, 0, NULL));
  }
  g_attach(&g, &y, NULL);
  g_attach(&g, &z, NULL);
  g_check(&g);
  for (t = 0; t < 25; ++t) {
    g_add(&g, 1 + g_rand(&g) % 6, 1 + g_rand(&g) % 5);
    g_draw(&g, 1);
    if (t % 5 == 4) g_check(&g);
  }
  /* second checkpoints: y into its directory, z into its own */
  CHECK_OK(per_store_checkpoint(&y, 0));
  CHECK_OK(per_store_checkpoint(&z, PER_STORE_NO_JSON));
  CHECK(file_exists(dz, "index.bin"));
  CHECK(!file_exists(dz, "metadata.json"));
  check_json(dy, &g, &y);
  uuids_of(&y, g.ntraj, uy);
  uuids_of(&z, g.ntraj, uz);
  per_store_free(&y);
  per_store_free(&z);
  g_detach(&g, &y);
  g_detach(&g, &z);
  for (t = 0; t < 3; ++t) g_draw(&g, 0); /* x draws on... */
  CHECK_OK(per_store_init(&y, dy, &cfg, PER_STORE_RESUME, NULL));
  CHECK_OK(per_store_init(&z, dz, &cfg, PER_STORE_RESUME, NULL));
  uuids_of(&y, g.ntraj, uy2);
  CHECK_MEM(uy2, uy, g.ntraj * 16);
  uuids_of(&z, g.ntraj, uy2);
  CHECK_MEM(uy2, uz, g.ntraj * 16);
  /* ...so y and z, resumed, must draw those three batches first */
  {
    per_sample_opts o;
    uint64_t ia[MAXB], ib[MAXB];
    float wa[MAXB], wb[MAXB];
    uint32_t k, Bn;
    for (k = g.k - 3; k < g.k; ++k) {
      Bn = opts_of(k, &o);
      CHECK_OK(per_store_sample(&y, Bn, &o, NULL, ia, wa));
      CHECK_OK(per_store_sample(&z, Bn, &o, NULL, ib, wb));
      CHECK_MEM(ia, ib, Bn * sizeof(uint64_t));
      CHECK_MEM(wa, wb, Bn * sizeof(float));
    }
  }
  CHECK_INDEX(&y, &g.ref);
  CHECK_INDEX(&z, &g.ref);
  g_attach(&g, &y, NULL);
  g_attach(&g, &z, NULL);
  for (t = 0; t < 15; ++t) {
    g_add(&g, 1 + g_rand(&g) % 6, 1 + g_rand(&g) % 5);
    g_draw(&g, 1);
  }
  g_check(&g);
  g_free(&g);
  per_store_free(&x);
  per_store_free(&y);
  per_store_free(&z);
}

/* ======================================================================
   3. sharded loads
   ====================================================================== */

/* What per.h's peri_load does for a shard, but by trajectory: the
   reference of rank r of w from a per_buffer checkpoint. */
static per_status shard_ref(per_buffer *b, const char *path, uint32_t r,
                            uint32_t w) {
  peri_ckpt k;
  per_tree t;
  peri_sel sel;
  uint32_t n, zero;
  per_status s;
  peri_msg m = peri_buf_msg(b);
  sel.rank = r;
  sel.world = w;
  sel.by_traj = 1;
  s = peri_ckpt_open(path, b, w, &k, &m);
  if (s != PER_OK) return s;
  s = peri_load_stage(b, &k, sel, &t, &n, &zero, &m);
  if (s == PER_OK) peri_load_apply(b, &k, sel, &t, n, zero);
  PER_FREE(k.mem, b->alloc_ctx);
  return s;
}

/* trajectory_index.json of directory dir against store s: valid in the
   ways a reader needs (one object, every stored trajectory's row once
   with its live count, no row of an evicted one). uu[id]: every added
   trajectory's uuid. */
static void check_json_rows(const char *dir, const per_store *s, uint64_t added,
                            unsigned char (*uu)[16]) {
  long len;
  char *tj = (char *)slurp_in(dir, "trajectory_index.json", &len), u[40];
  const char *p;
  uint64_t id, rows = 0;
  per_store_stats st;
  REQUIRE(tj);
  per_store_stats_of(s, &st);
  p = tj + strspn(tj, " ");
  CHECK_MSG(*p == '{', "trajectory_index.json does not begin an object");
  CHECK(len >= 4 && strcmp(tj + len - 4, "\n]}\n") == 0);
  for (p = tj; (p = strstr(p, "\"uuid\"")) != NULL; ++p) ++rows;
  CHECK_EQ_U(rows, st.trajectories);
  for (id = 0; id < added; ++id) {
    per_store_traj_info in;
    const char *at;
    uuid_text(uu[id], u);
    at = strstr(tj, u);
    if (per_store_trajectory(s, id, &in) != PER_OK) {
      CHECK_MSG(at == NULL, "evicted trajectory %llu still has a row",
                (unsigned long long)id);
      continue;
    }
    CHECK_MSG(at != NULL, "trajectory %llu has no row", (unsigned long long)id);
    if (!at) continue;
    at = strstr(at, "\"live_samples\": ");
    CHECK(at != NULL);
    if (at)
      CHECK_EQ_U(strtoul(at + strlen("\"live_samples\": "), NULL, 10), in.live);
  }
  free(tj);
}

/* g_add, and the new trajectory's uuid into uu. */
static void g_add_uuid(group *g, per_store *s, uint32_t T, uint32_t B,
                       unsigned char (*uu)[16]) {
  per_store_traj_info in;
  g_add(g, T, B);
  REQUIRE(per_store_trajectory(s, g->ntraj - 1, &in) == PER_OK);
  memcpy(uu[g->ntraj - 1], in.uuid, 16);
}

/* The offset of index.log's last record (lg[0..n)), or 0 for none. */
static long last_record(const unsigned char *lg, long n) {
  long at = 64, last = 0;
  while (at + 28 <= n) {
    uint64_t P = 0;
    int i;
    for (i = 7; i >= 0; --i) P = P << 8 | lg[at + 16 + i];
    last = at;
    at += (long)((P + 28 + 7) & ~(uint64_t)7);
  }
  return at == n ? last : 0;
}

/* Incremental checkpoints: each checkpoint after the one that wrote
   index.bin is a record appended to index.log (index.bin untouched),
   until the log outgrows index.bin and index.bin is written whole again.
   After every checkpoint a load of the directory into another store
   gives the reference exactly (ids, priorities, rng, permutation), with
   alpha 0.6 and alpha 0 (the swap permutation, changed by unique draws),
   across evictions and a partly evicted oldest trajectory; the JSON
   files follow in place. A record cut short (a crash while appending)
   loads as the checkpoint before it; a damaged log header is refused
   with the store unchanged. */
static void test_log(void) {
  int a;
  SECTION = "log";
  for (a = 0; a < 2; ++a) {
    per_store_config cfg =
        scfg(200, 24, 2 * 24 * 24, room_for(3, 24, 24), 4096);
    per_store x, y;
    group g;
    char dx[256], dy[256], name[32], path[600];
    static unsigned char uu[MAXTRAJ][16];
    uint32_t round, appended = 0, rewritten = 0;
    long blen = 0, llen = 0, n;
    cfg.buffer.alpha = a ? 0.0 : 0.6;
    cfg.buffer.seed = 40 + (uint64_t)a;
    g_init(&g, &cfg.buffer, 9 + (uint32_t)a);
    snprintf(name, sizeof name, "lg-x%d", a);
    store_in(&x, name, &cfg);
    dir_of(dx, sizeof dx, name);
    snprintf(name, sizeof name, "lg-y%d", a);
    store_in(&y, name, &cfg);
    dir_of(dy, sizeof dy, name);
    g_attach(&g, &x, NULL);
    for (round = 0; round < 60; ++round) {
      uint32_t t, adds = 1 + g_rand(&g) % 3;
      unsigned char *b0, *b1;
      for (t = 0; t < adds; ++t) {
        uint32_t T = 1 + g_rand(&g) % 5;
        g_add_uuid(&g, &x, T, 1 + g_rand(&g) % 4, uu);
        g_draw(&g, 1);
      }
      snprintf(path, sizeof path, "%s/index.bin", dx);
      b0 = slurp(path, &blen);
      CHECK_OK(
          per_store_checkpoint(&x, round % 7 == 3 ? PER_STORE_NO_JSON : 0));
      b1 = slurp(path, &n);
      REQUIRE(b1);
      if (b0 && n == blen && memcmp(b0, b1, (size_t)n) == 0) {
        long ln;
        unsigned char *lg;
        snprintf(path, sizeof path, "%s/index.log", dx);
        lg = slurp(path, &ln);
        REQUIRE(lg);
        CHECK_MSG(ln > llen, "round %u: index.bin kept, index.log not longer",
                  round);
        ++appended;
        free(lg);
        llen = ln;
      } else {
        ++rewritten;
        llen = 0;
      }
      free(b0);
      free(b1);
      g_check(&g);
      if (round % 7 != 3) check_json_rows(dx, &x, g.ntraj, uu);
      /* the directory as a load sees it */
      CHECK_OK(per_store_load(&y, dx, 0, 1, 0));
      CHECK_MSG(index_diff(&y, &g.ref)[0] == 0, "alpha %s, round %u: %s",
                a ? "0" : "0.6", round, index_diff(&y, &g.ref));
      CHECK_OK(per_store_check(&y));
      /* a record being appended when a crash came (cut short, or whole
         but failing its CRC) is not a checkpoint: the one before it */
      if (llen > 0 && round % 5 == 1) {
        long ln, last;
        unsigned char *lg;
        FILE *f;
        snprintf(path, sizeof path, "%s/index.log", dx);
        lg = slurp(path, &ln);
        REQUIRE(lg);
        last = last_record(lg, ln);
        REQUIRE(last > 0);
        ++lg[last + 8]; /* the next checkpoint's number */
        f = fopen(path, "ab");
        REQUIRE(f && fwrite(lg + last, 1, (size_t)(ln - last) / 2, f) ==
                         (size_t)(ln - last) / 2);
        fclose(f);
        CHECK_OK(per_store_load(&y, dx, 0, 1, 0));
        CHECK_MSG(index_diff(&y, &g.ref)[0] == 0,
                  "round %u, a record cut short: %s", round,
                  index_diff(&y, &g.ref));
        lg[last + 40] ^= 1; /* whole, its CRC failing */
        REQUIRE(truncate(path, (off_t)ln) == 0);
        f = fopen(path, "ab");
        REQUIRE(f && fwrite(lg + last, 1, (size_t)(ln - last), f) ==
                         (size_t)(ln - last));
        fclose(f);
        CHECK_OK(per_store_load(&y, dx, 0, 1, 0));
        CHECK_MSG(index_diff(&y, &g.ref)[0] == 0,
                  "round %u, a record failing its CRC: %s", round,
                  index_diff(&y, &g.ref));
        /* a damaged header: refused, y unchanged */
        REQUIRE(truncate(path, (off_t)ln) == 0);
        flip_byte(path, 20);
        CHECK_STATUS(per_store_load(&y, dx, 0, 1, 0), PER_ERR_CHECKSUM);
        CHECK(strstr(y.error, "index.log") != NULL);
        CHECK_MSG(index_diff(&y, &g.ref)[0] == 0,
                  "round %u: a refused load changed the store", round);
        flip_byte(path, 20);
        free(lg);
      }
    }
    g_check(&g);
    CHECK(g.saw_partial);
    CHECK_MSG(appended >= 20 && rewritten >= 2,
              "alpha %s: %u checkpoints appended, %u wrote index.bin",
              a ? "0" : "0.6", appended, rewritten);
    /* resumed in its own directory, the store goes on appending */
    per_store_free(&x);
    g_detach(&g, &x);
    REQUIRE(per_store_init(&x, dx, &cfg, PER_STORE_RESUME, NULL) == PER_OK);
    g_attach(&g, &x, NULL);
    g_check(&g);
    g_add_uuid(&g, &x, 2, 2, uu);
    g_draw(&g, 1);
    CHECK_OK(per_store_checkpoint(&x, 0));
    g_add_uuid(&g, &x, 2, 2, uu);
    g_draw(&g, 1);
    CHECK_OK(per_store_checkpoint(&x, 0));
    CHECK_OK(per_store_load(&y, dx, 0, 1, 0));
    CHECK_MSG(index_diff(&y, &g.ref)[0] == 0, "after a resume: %s",
              index_diff(&y, &g.ref));
    check_json_rows(dx, &x, g.ntraj, uu);
    per_store_free(&y);
    per_store_free(&x);
    g_free(&g);
  }
}

static void test_shards(void) {
  SECTION = "shards";
  per_store_config cfg = scfg(200, 20, 4 * 20 * 20, room_for(3, 20, 20), 4096);
  per_store s;
  group g;
  char ds[256], refpath[256];
  per_store_stats ss;
  uint32_t t, w, r;
  cfg.buffer.seed = 5;
  g_init(&g, &cfg.buffer, 9);
  store_in(&s, "sh-src", &cfg);
  dir_of(ds, sizeof ds, "sh-src");
  g_attach(&g, &s, NULL);
  for (t = 0; t < 40; ++t) {
    g_add(&g, 1 + g_rand(&g) % 5, 1 + g_rand(&g) % 4);
    g_draw(&g, 1);
  }
  g_check(&g);
  CHECK(g.saw_partial);
  CHECK_OK(per_store_checkpoint(&s, 0));
  dir_of(refpath, sizeof refpath, "sh-ref.ckpt");
  REQUIRE(per_buffer_save(&g.ref, refpath) == PER_OK);
  per_store_stats_of(&s, &ss);
  for (w = 2; w <= 3; ++w) {
    uint64_t sum_t = 0, sum_s = 0;
    static uint32_t owner[MAXTRAJ];
    uint64_t id;
    memset(owner, 0, sizeof owner);
    for (r = 0; r < w; ++r) {
      per_store q;
      per_store_stats qs;
      group h;
      char name[32];
      snprintf(name, sizeof name, "sh-%u-%u", w, r);
      store_in(&q, name, &cfg);
      /* q and its reference draw first: a shard load keeps the target's
         own rng and step (as per_buffer_load_shard) */
      memset(&h, 0, sizeof h);
      REQUIRE(per_buffer_init(&h.ref, &cfg.buffer, NULL) == PER_OK);
      h.isz = g.isz;
      h.rng = 1000 + r;
      g_attach(&h, &q, NULL);
      g_add(&h, 1, 2 + r);
      for (t = 0; t <= r; ++t) g_draw(&h, 1);
      CHECK_OK(per_store_load(&q, ds, r, w, 0));
      CHECK_OK(per_store_check(&q));
      per_store_stats_of(&q, &qs);
      CHECK_EQ_U(qs.added_trajectories, ss.added_trajectories);
      CHECK_EQ_U(qs.added_samples, ss.added_samples);
      sum_t += qs.trajectories;
      sum_s += qs.samples;
      for (id = 0; id < g.ntraj; ++id) {
        per_store_traj_info a, b;
        per_status in_s = per_store_trajectory(&s, id, &a);
        per_status in_q = per_store_trajectory(&q, id, &b);
        if (in_q == PER_OK) ++owner[id];
        if (in_s != PER_OK || id % w != r) {
          CHECK_STATUS(in_q, PER_ERR_INDEX);
          continue;
        }
        CHECK_OK(in_q);
        if (in_q != PER_OK) continue;
        CHECK_MEM(b.uuid, a.uuid, 16);
        CHECK_EQ_U(b.live, a.live);
        CHECK_EQ_U(b.num_samples, a.num_samples);
        CHECK_EQ_U(b.T, a.T);
        CHECK_EQ_U(b.B, a.B);
        CHECK_EQ_U(b.max_episode_length, a.max_episode_length);
      }
      /* bit for bit: per.h's shard stages by trajectory */
      CHECK_OK(shard_ref(&h.ref, refpath, r, w));
      h.ntraj = g.ntraj;
      memcpy(h.T, g.T, sizeof h.T);
      memcpy(h.B, g.B, sizeof h.B);
      h.shard_w = w;
      h.shard_r = r;
      h.shard_below = (uint32_t)g.ntraj;
      g_check(&h);
      for (t = 0; t < 8; ++t) g_draw(&h, 1);
      g_add(&h, 3, 2); /* the next global id */
      for (t = 0; t < 4; ++t) g_draw(&h, 1);
      g_check(&h);
      g_free(&h);
      per_store_free(&q);
    }
    CHECK_EQ_U(sum_t, ss.trajectories);
    CHECK_EQ_U(sum_s, ss.samples);
    for (id = 0; id < g.ntraj; ++id) {
      per_store_traj_info a;
      CHECK_EQ_U(owner[id], per_store_trajectory(&s, id, &a) == PER_OK);
    }
  }
  /* argument errors leave the target as it was */
  {
    per_store q;
    store_in(&q, "sh-args", &cfg);
    CHECK_STATUS(per_store_load(&q, ds, 0, 0, 0), PER_ERR_ARG);
    CHECK_STATUS(per_store_load(&q, ds, 3, 3, 0), PER_ERR_ARG);
    CHECK_STATUS(per_store_load(&q, ds, 0, 1, 1u << 9), PER_ERR_ARG);
    CHECK_STATUS(per_store_load(&q, NULL, 0, 1, 0), PER_ERR_NULL);
    CHECK_STATUS(per_store_load(NULL, ds, 0, 1, 0), PER_ERR_NULL);
    CHECK_EQ_U(per_store_size(&q), 0);
    per_store_free(&q);
  }
  g_free(&g);
  per_store_free(&s);
}

/* ======================================================================
   4. refused calls leave the store as a twin that never saw them
   ====================================================================== */

/* a and b: the same stats but for the ones a refusal may count. */
static void check_twins(const per_store *a, const per_store *b) {
  per_store_stats x, y;
  per_store_stats_of(a, &x);
  per_store_stats_of(b, &y);
  x.busy = y.busy = 0;
  x.waits = y.waits = 0;
  CHECK_MEM(&x, &y, sizeof x);
}

static void test_errors(void) {
  SECTION = "errors";
  per_store_config cfg = scfg(64, 20, 0, 1000, 4096);
  per_store a, b, q;
  group g;
  unsigned char items[80 * 20];
  uint8_t ends[80];
  char da[256], dsrc[256], path[512];
  per_store_stats st;
  per_sample_opts o;
  uint64_t ids[8];
  float td[8];
  uint32_t i;
  cfg.buffer.seed = 3;
  g_init(&g, &cfg.buffer, 4);
  store_in(&a, "er-a", &cfg);
  store_in(&b, "er-b", &cfg);
  dir_of(da, sizeof da, "er-a");
  g_attach(&g, &a, NULL);
  g_attach(&g, &b, NULL);
  for (i = 0; i < 80; ++i) {
    make_sample(items + i * 20, 20, 900, i);
    ends[i] = PER_END_NONE;
  }
  /* 16 samples of 20 bytes: two fit in 1000 staging bytes, three do not */
  g_add(&g, 8, 2);
  g_add(&g, 4, 4);
  g_draw(&g, 1);
  CHECK_STATUS(per_store_add(&a, items, 0, 4, NULL, 0, NULL), PER_ERR_ARG);
  CHECK(a.error[0] != 0);
  CHECK_STATUS(per_store_add(&a, items, 4, 0, NULL, 0, NULL), PER_ERR_ARG);
  CHECK_STATUS(per_store_add(&a, items, 13, 5, NULL, 0, NULL), PER_ERR_ARG);
  CHECK_STATUS(per_store_add(&a, items, 48, 1, NULL, 0, NULL), PER_ERR_ARG);
  ends[5] = 3;
  CHECK_STATUS(per_store_add(&a, items, 3, 2, ends, 0, NULL), PER_ERR_ARG);
  ends[5] = PER_END_NONE;
  CHECK_STATUS(per_store_add(&a, items, 3, 2, ends, 1u << 9, NULL),
               PER_ERR_ARG);
  CHECK_STATUS(per_store_add(&a, NULL, 3, 2, ends, 0, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_store_add(NULL, items, 3, 2, ends, 0, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_store_add_fill(&a, 3, 2, ends, 0, NULL, NULL, NULL),
               PER_ERR_NULL);
  CHECK(strstr(a.error, "fill") != NULL);
  /* a full staging area: NOWAIT is refused and counted */
  CHECK_STATUS(per_store_add(&a, items, 4, 4, NULL, PER_STORE_NOWAIT, NULL),
               PER_ERR_BUSY);
  per_store_stats_of(&a, &st);
  CHECK_EQ_U(st.busy, 1);
  CHECK_EQ_U(st.staged_trajectories, 2);
  check_twins(&a, &b);
  g_check(&g);
  for (i = 0; i < 6; ++i) g_draw(&g, 1);
  /* without NOWAIT the add writes to make room */
  g_add(&g, 4, 4);
  per_store_stats_of(&a, &st);
  CHECK(st.written_trajectories >= 1);
  /* sampling and update refusals */
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_SEQUENCES;
  CHECK_STATUS(per_store_sample(&a, 4, &o, NULL, ids, NULL), PER_ERR_ARG);
  o.flags = 1u << 12;
  CHECK_STATUS(per_store_sample(&a, 4, &o, NULL, ids, NULL), PER_ERR_ARG);
  CHECK_STATUS(per_store_sample(&a, 0, NULL, NULL, ids, NULL), PER_ERR_BATCH);
  CHECK_STATUS(per_store_sample(NULL, 4, NULL, NULL, ids, NULL), PER_ERR_NULL);
  memset(&o, 0, sizeof o);
  CHECK_OK(per_store_sample(&b, 4, NULL, NULL, ids, NULL)); /* both, */
  CHECK_OK(per_store_sample(&a, 4, NULL, NULL, ids, NULL)); /* then: */
  CHECK_OK(per_buffer_sample(&g.ref, 4, NULL, NULL, ids, NULL));
  for (i = 0; i < 4; ++i) td[i] = 1.0f;
  td[2] = (float)NAN;
  CHECK_STATUS(per_store_update(&a, ids, td, 4, NULL), PER_ERR_NAN);
  ids[1] = (uint64_t)63 | ((uint64_t)9999 << 32);
  td[2] = 1.0f;
  CHECK_STATUS(per_store_update(&a, ids, td, 4, NULL), PER_ERR_INDEX);
  CHECK_STATUS(per_store_checkpoint(&a, 1u << 9), PER_ERR_ARG);
  CHECK(!file_exists(da, "index.bin"));
  check_twins(&a, &b);
  g_check(&g);
  for (i = 0; i < 6; ++i) g_draw(&g, 1);

  /* damaged sources: a checkpoint of another store, a byte flipped in a
     trajectory's data, the segment cut short, index.bin damaged */
  {
    group s;
    per_store src;
    unsigned char pat[20];
    long off, len;
    unsigned char *orig;
    uint32_t tr;
    per_store_config c2 = scfg(64, 20, 0, room_for(2, 16, 20), 4096);
    c2.buffer.seed = 3;
    g_init(&s, &c2.buffer, 11);
    store_in(&src, "er-src", &c2);
    dir_of(dsrc, sizeof dsrc, "er-src");
    g_attach(&s, &src, NULL);
    for (i = 0; i < 9; ++i) g_add(&s, 3, 2);
    CHECK_OK(per_store_checkpoint(&src, 0));
    /* the newest trajectory's sample 2 */
    tr = (uint32_t)s.ntraj - 1;
    make_sample(pat, 20, tr, 2);
    REQUIRE(find_in_segs(dsrc, pat, 20, path, sizeof path, &off));
    flip_byte(path, off + 13);
    CHECK_STATUS(per_store_load(&a, dsrc, 0, 1, 0), PER_ERR_CHECKSUM);
    CHECK_MSG(strstr(a.error, "seg-") != NULL,
              "the error does not name the segment: %s", a.error);
    memset(&q, 0x55, sizeof q);
    CHECK_STATUS(per_store_init(&q, dsrc, &c2, PER_STORE_RESUME, NULL),
                 PER_ERR_CHECKSUM);
    CHECK(zeroed_but_error(&q));
    store_in(&q, "er-quick", &c2);
    CHECK_OK(per_store_load(&q, dsrc, 0, 1, PER_STORE_LOAD_QUICK));
    CHECK_EQ_U(per_store_size(&q), per_store_size(&src));
    per_store_free(&q);
    flip_byte(path, off + 13); /* repaired */
    /* the segment holding it cut short */
    orig = slurp(path, &len);
    REQUIRE(orig && truncate(path, (off_t)(len - 7)) == 0);
    CHECK(per_store_load(&a, dsrc, 0, 1, 0) != PER_OK);
    CHECK(per_store_load(&a, dsrc, 0, 1, PER_STORE_LOAD_QUICK) != PER_OK);
    CHECK(a.error[0] != 0);
    REQUIRE(file_write(path, orig, len));
    free(orig);
    /* index.bin damaged */
    snprintf(path, sizeof path, "%s/index.bin", dsrc);
    orig = slurp(path, &len);
    REQUIRE(orig && len > 40);
    flip_byte(path, len / 2);
    CHECK_STATUS(per_store_load(&a, dsrc, 0, 1, 0), PER_ERR_CHECKSUM);
    CHECK_MSG(strstr(a.error, "index.bin") != NULL,
              "the error does not name index.bin: %s", a.error);
    REQUIRE(file_write(path, orig, len));
    free(orig);
    /* a missing directory, and a missing index.bin */
    CHECK_STATUS(per_store_load(&a, "/nonexistent/per-store", 0, 1, 0),
                 PER_ERR_IO);
    CHECK_MSG(strstr(a.error, "/nonexistent/per-store") != NULL,
              "the error does not name the directory: %s", a.error);
    CHECK_STATUS(per_store_load(&a, da, 0, 1, 0), PER_ERR_IO);
    CHECK_MSG(strstr(a.error, "index.bin") != NULL,
              "the error does not name index.bin: %s", a.error);
    /* another sample size, another layout */
    {
      per_store_config c3 = scfg(64, 24, 0, 1000, 4096);
      per_store m;
      store_in(&m, "er-isz", &c3);
      CHECK_STATUS(per_store_load(&m, dsrc, 0, 1, 0), PER_ERR_MISMATCH);
      CHECK_EQ_U(per_store_size(&m), 0);
      per_store_free(&m);
      c3 = c2;
      c3.layout = "u8 other[20]";
      store_in(&m, "er-layout", &c3);
      /* a checkpoint without a layout loads into any (per_buffer's rule) */
      CHECK_OK(per_store_load(&m, dsrc, 0, 1, 0));
      per_store_free(&m);
    }
    g_free(&s);
    per_store_free(&src);
  }
  check_twins(&a, &b);
  g_check(&g);
  for (i = 0; i < 6; ++i) g_draw(&g, 1);
  g_free(&g);
  per_store_free(&a);
  per_store_free(&b);
  per_store_free(NULL);
  CHECK_EQ_U(per_store_size(NULL), 0);
  per_store_stats_of(NULL, &st);
  CHECK_EQ_U(st.samples + st.added_samples, 0);
}

/* ======================================================================
   5. I/O failures
   ====================================================================== */

/* ENOSPC-like: a file size limit (writes past it fail with EFBIG). In a
   child; it exits 0 when every check passed. */
static int enospc_child(void) {
  unsigned fails0 = t_fail_count;
  per_store_config cfg =
      scfg(4096, 64, 2 * 32 * 64, room_for(3, 32, 64), 1u << 20);
  per_store a, q;
  group g;
  struct rlimit rl;
  per_status st = PER_OK;
  uint32_t i, tries;
  char da[256];
  cfg.buffer.seed = 17;
  g_init(&g, &cfg.buffer, 3);
  store_in(&a, "nospc", &cfg);
  dir_of(da, sizeof da, "nospc");
  g_attach(&g, &a, NULL);
  signal(SIGXFSZ, SIG_IGN);
  REQUIRE(getrlimit(RLIMIT_FSIZE, &rl) == 0);
  rl.rlim_cur = 40000;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &rl) == 0);
  for (tries = 0; tries < 200; ++tries) {
    st = g_try_add(&g, 8, 4, 0);
    if (st != PER_OK) break;
    if (tries % 3 == 0) g_draw(&g, 1);
  }
  CHECK_STATUS(st, PER_ERR_IO);
  CHECK_MSG(strstr(a.error, "seg-") != NULL,
            "the error does not name the segment: %s", a.error);
  CHECK(g.ntraj * 32 * 64 > 40000);
  g_check(&g);
  for (i = 0; i < 12; ++i) g_draw(&g, 1);
  CHECK_STATUS(per_store_write(&a), PER_ERR_IO);
  g_check(&g);
  g_draw(&g, 1);
  /* room again: the retry writes it all */
  rl.rlim_cur = rl.rlim_max;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &rl) == 0);
  CHECK_OK(per_store_write(&a));
  g_add(&g, 8, 4);
  g_add(&g, 2, 3);
  for (i = 0; i < 6; ++i) g_draw(&g, 1);
  CHECK_OK(per_store_checkpoint(&a, 0));
  store_in(&q, "nospc-q", &cfg);
  CHECK_OK(per_store_load(&q, da, 0, 1, 0));
  g_attach(&g, &q, NULL);
  for (i = 0; i < 6; ++i) g_draw(&g, 1);
  g_check(&g);
  g_free(&g);
  per_store_free(&a);
  per_store_free(&q);
  return t_fail_count == fails0 ? 0 : 1;
}

static void test_enospc(void) {
  SECTION = "enospc";
  int status = -1;
  pid_t pid;
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int r = enospc_child();
    fflush(stderr);
    exit(r);
  }
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "the ENOSPC child failed (status %d)", status);
}

/* A store's checkpoint as a load sees it: counts, trajectories and three
   batches (ids, weights, samples) drawn with updates, hashed. 0 when it
   does not load. */
static uint64_t fp_dir(const per_store_config *cfg, const char *dir) {
  static unsigned n;
  per_store q;
  char name[32], d[256];
  uint64_t h = 1469598103934665603ull, id;
  per_store_stats st;
  uint32_t k;
  per_status s;
  snprintf(name, sizeof name, "fp-%u", n++);
  dir_of(d, sizeof d, name);
  REQUIRE(per_store_init(&q, d, cfg, 0, NULL) == PER_OK);
  s = per_store_load(&q, dir, 0, 1, 0);
  if (s != PER_OK) {
    per_store_free(&q);
    rm_rf(d);
    return 0;
  }
  per_store_stats_of(&q, &st);
  h = fnv(h, &st.trajectories, 8);
  h = fnv(h, &st.samples, 8);
  h = fnv(h, &st.added_trajectories, 8);
  h = fnv(h, &st.added_samples, 8);
  for (id = 0; id < st.added_trajectories; ++id) {
    per_store_traj_info in;
    if (per_store_trajectory(&q, id, &in) != PER_OK) continue;
    h = fnv(h, &in.id, 8);
    h = fnv(h, &in.num_samples, 4);
    h = fnv(h, &in.T, 4);
    h = fnv(h, &in.B, 4);
    h = fnv(h, &in.live, 4);
    h = fnv(h, &in.max_episode_length, 4);
  }
  for (k = 0; k < 3; ++k) {
    per_sample_opts o;
    uint64_t ids[MAXB];
    float w[MAXB], td[MAXB];
    unsigned char x[MAXB * 64];
    uint32_t Bn = opts_of(k, &o), j;
    REQUIRE(q.item_size <= 64);
    s = per_store_sample(&q, Bn, &o, x, ids, w);
    h = fnv(h, &s, sizeof s);
    if (s != PER_OK) continue;
    h = fnv(h, ids, Bn * 8);
    h = fnv(h, w, Bn * 4);
    h = fnv(h, x, (size_t)Bn * q.item_size);
    for (j = 0; j < Bn; ++j) td[j] = (float)(j % 5) * 0.75f;
    CHECK_OK(per_store_update(&q, ids, td, Bn, NULL));
  }
  per_store_free(&q);
  rm_rf(d);
  return h ? h : 1;
}

/* The failure sweeps' store: 10 trajectories, a checkpoint (C1), 12 more
   (the oldest evicted, segment files freed) with draws; staged ones at
   the end. fp1: C1's fingerprint. */
static per_store_config fault_cfg(void) {
  per_store_config c = scfg(120, 24, 2 * 24 * 24, room_for(4, 12, 24), 4096);
  c.buffer.seed = 41;
  return c;
}

static void fault_build(group *g, per_store *s, const char *name,
                        uint64_t *fp1) {
  per_store_config cfg = fault_cfg();
  char d[256];
  uint32_t t;
  dir_of(d, sizeof d, name);
  rm_rf(d);
  g_init(g, &cfg.buffer, 8);
  REQUIRE(per_store_init(s, d, &cfg, 0, NULL) == PER_OK);
  g_attach(g, s, NULL);
  for (t = 0; t < 10; ++t) {
    g_add(g, 2 + t % 3, 1 + t % 4);
    g_draw(g, 1);
  }
  REQUIRE(per_store_checkpoint(s, 0) == PER_OK);
  if (fp1) *fp1 = fp_dir(&cfg, d);
  for (t = 0; t < 12; ++t) {
    g_add(g, 3 + t % 4, 2 + t % 3);
    g_draw(g, 1);
  }
}

static void test_eio(void) {
  SECTION = "eio";
  per_store_config cfg = fault_cfg();
  long dry_w[K_N], dry_c[K_N];
  uint64_t fp1, fp2, fp1b;
  int kind;
  uint32_t cases = 0;
  char d[256];
  /* the dry runs: the calls per_store_write and per_store_checkpoint
     make on the sweeps' store */
  {
    group g;
    per_store s;
    fault_build(&g, &s, "eio-dry", &fp1);
    arm(-1, 0);
    CHECK_OK(per_store_write(&s));
    disarm();
    memcpy(dry_w, F.calls, sizeof dry_w);
    g_free(&g);
    per_store_free(&s);
    fault_build(&g, &s, "eio-dry", NULL);
    g_add(&g, 3, 3);
    arm(-1, 0);
    CHECK_OK(per_store_checkpoint(&s, 0));
    disarm();
    memcpy(dry_c, F.calls, sizeof dry_c);
    dir_of(d, sizeof d, "eio-dry");
    fp2 = fp_dir(&cfg, d);
    CHECK(fp1 != 0 && fp2 != 0 && fp1 != fp2);
    CHECK(dry_w[K_PWRITE] > 0);
    CHECK(dry_c[K_RENAME] > 0);
    g_free(&g);
    per_store_free(&s);
    rm_rf(d);
  }
  /* per_store_write: each call of each kind it makes fails in turn */
  for (kind = 0; kind < K_N; ++kind) {
    long k;
    for (k = 1; k <= dry_w[kind] && k <= 6; ++k) {
      group g;
      per_store s, q;
      per_status st;
      per_store_stats before, after;
      fault_build(&g, &s, "eio-w", NULL);
      per_store_stats_of(&s, &before);
      arm(kind, k);
      st = per_store_write(&s);
      disarm();
      ++cases;
      if (F.fired) {
        CHECK_MSG(st == PER_ERR_IO, "write: %s call %ld failed: status %s",
                  KNAME[kind], k, per_status_str(st));
        CHECK_MSG(s.error[0] != 0, "write: %s call %ld: no error text",
                  KNAME[kind], k);
        if (kind == K_PWRITE || kind == K_OPEN)
          CHECK_MSG(strstr(s.error, "seg-") != NULL,
                    "write: %s call %ld: the error names no segment file: %s",
                    KNAME[kind], k, s.error);
        per_store_stats_of(&s, &after);
        CHECK(after.staged_trajectories >= 1);
        CHECK(after.written_trajectories + after.staged_trajectories ==
              before.written_trajectories + before.staged_trajectories);
        g_check(&g);
        g_draw(&g, 1);
        g_draw(&g, 1);
        CHECK_OK(per_store_write(&s));
        per_store_stats_of(&s, &after);
        CHECK_EQ_U(after.staged_trajectories, 0);
        g_draw(&g, 1);
        CHECK_OK(per_store_checkpoint(&s, 0));
        store_in(&q, "eio-w-q", &cfg);
        dir_of(d, sizeof d, "eio-w");
        CHECK_OK(per_store_load(&q, d, 0, 1, 0));
        g_attach(&g, &q, NULL);
        g_draw(&g, 1);
        g_draw(&g, 1);
        g_check(&g);
        per_store_free(&q);
        dir_of(d, sizeof d, "eio-w-q");
        rm_rf(d);
      }
      g_free(&g);
      per_store_free(&s);
    }
  }
  /* per_store_checkpoint: each call of each kind fails in turn (up to 24
     of a kind, spread over its calls) */
  dir_of(d, sizeof d, "eio-c");
  for (kind = 0; kind < K_N; ++kind) {
    long k, step = dry_c[kind] > 24 ? (dry_c[kind] + 23) / 24 : 1;
    for (k = 1; k <= dry_c[kind]; k += step) {
      group g;
      per_store s;
      per_status st;
      per_store_stats sa, sb;
      int unlink_left;
      char ipath[512];
      uint64_t got;
      fault_build(&g, &s, "eio-c", &fp1b);
      CHECK_EQ_U(fp1b, fp1);
      g_add(&g, 3, 3);
      per_store_stats_of(&s, &sb);
      arm(kind, k);
      st = per_store_checkpoint(&s, 0);
      disarm();
      per_store_stats_of(&s, &sa);
      ++cases;
      got = fp_dir(&cfg, d);
      if (st == PER_OK) {
        CHECK_MSG(got == fp2,
                  "checkpoint, %s call %ld failed, PER_OK: "
                  "the new checkpoint does not load",
                  KNAME[kind], k);
      } else {
        CHECK_MSG(st == PER_ERR_IO, "checkpoint: %s call %ld: status %s",
                  KNAME[kind], k, per_status_str(st));
        CHECK(s.error[0] != 0);
        if (sa.checkpoints == sb.checkpoints)
          CHECK_MSG(got == fp1,
                    "checkpoint: %s call %ld failed: the old "
                    "checkpoint does not load as it was",
                    KNAME[kind], k);
        else
          CHECK_MSG(got == fp2,
                    "checkpoint: %s call %ld failed after "
                    "its commit: the new one does not load",
                    KNAME[kind], k);
      }
      /* a segment file whose deletion failed is left for the next
         checkpoint's sweep (per_store_checkpoint's contract): the
         checkpoint itself stands */
      unlink_left = kind == K_UNLINK && F.fired && st == PER_OK;
      /* the store kept everything; it goes on, evicting every trajectory
         the directory's checkpoint names, and that checkpoint stays
         loadable as it was until the next one */
      g_check(&g);
      {
        uint32_t t;
        per_store q;
        for (t = 0; t < 15; ++t) {
          g_add(&g, 3, 4);
          if (t % 4 == 0) g_draw(&g, 1);
        }
        CHECK_OK(per_store_write(&s));
        CHECK_MSG(fp_dir(&cfg, d) == got,
                  "checkpoint: %s call %ld failed "
                  "(%s): after more adds the directory's checkpoint no "
                  "longer loads as it did",
                  KNAME[kind], k, per_status_str(st));
        /* a retry succeeds, and loads as the store is; it also deletes
           what a failed deletion left */
        CHECK_OK(per_store_checkpoint(&s, 0));
        if (unlink_left) {
          per_store_stats ss;
          per_store_stats_of(&s, &ss);
          CHECK_EQ_U(count_segs(d), ss.segments);
        }
        store_in(&q, "eio-c-q", &cfg);
        CHECK_OK(per_store_load(&q, d, 0, 1, 0));
        g_attach(&g, &q, NULL);
        g_draw(&g, 1);
        g_draw(&g, 1);
        g_check(&g);
        per_store_free(&q);
        dir_of(ipath, sizeof ipath, "eio-c-q");
        rm_rf(ipath);
      }
      g_free(&g);
      per_store_free(&s);
    }
  }
  rm_rf(d);
  CHECK(cases > 10);
}

/* A read that fails during a batch: PER_ERR_IO naming the segment and
   the offset, and nothing changed (the next batches are the reference's,
   which never drew that one), with alpha 0.6 and 0, plain and unique. */
static void test_read_errors(void) {
  uint32_t v;
  SECTION = "read_errors";
  for (v = 0; v < 4; ++v) {
    per_store_config cfg = scfg(200, 20, 0, room_for(2, 12, 20), 4096);
    per_store s;
    group g;
    per_sample_opts o;
    unsigned char x[16 * 20];
    uint64_t ids[16];
    float w[16];
    uint32_t t, tries;
    int fired = 0;
    char name[32];
    cfg.buffer.alpha = v < 2 ? 0.6 : 0.0;
    cfg.buffer.seed = 60 + v;
    g_init(&g, &cfg.buffer, 6);
    snprintf(name, sizeof name, "rd-%u", v);
    store_in(&s, name, &cfg);
    g_attach(&g, &s, NULL);
    for (t = 0; t < 12; ++t) g_add(&g, 3, 4);
    CHECK_OK(per_store_write(&s));
    g_add(&g, 3, 4); /* pushes written ones out of the ring */
    g_add(&g, 3, 4);
    g_draw(&g, 1);
    memset(&o, 0, sizeof o);
    o.flags = v % 2 ? PER_SAMPLE_UNIQUE : 0;
    for (tries = 0; tries < 5 && !fired; ++tries) {
      per_status st;
      arm(K_PREAD, 1);
      st = per_store_sample(&s, 16, &o, x, ids, w);
      disarm();
      fired = F.fired;
      if (!fired) { /* all from memory: the reference draws it too */
        CHECK_OK(st);
        CHECK_OK(per_buffer_sample(&g.ref, 16, &o, NULL, ids, NULL));
        continue;
      }
      CHECK_STATUS(st, PER_ERR_IO);
      CHECK_MSG(strstr(s.error, "seg-") && strstr(s.error, "offset"),
                "a failed read's error names no segment and offset: %s",
                s.error);
    }
    CHECK(fired);
    if (v == 3) { /* alpha 0, unique: per_store_sample's one exception,
                     the swap sampler's permutation stays shuffled; the
                     rng and step are back, and the store is valid */
      CHECK(memcmp(&s.index.rng, &g.ref.rng, sizeof s.index.rng) == 0);
      CHECK_EQ_U(s.index.step, g.ref.step);
      CHECK_OK(per_store_check(&s));
      CHECK_OK(per_store_sample(&s, 16, &o, x, ids, w));
      g_free(&g);
      per_store_free(&s);
      continue;
    }
    g_check(&g);
    for (t = 0; t < 8; ++t) {
      per_sample_opts u;
      memset(&u, 0, sizeof u);
      u.flags = t % 2 ? PER_SAMPLE_UNIQUE : 0;
      g_draw_opts(&g, 12, &u, 1);
    }
    g_check(&g);
    g_free(&g);
    per_store_free(&s);
  }
}

/* The writer thread meets a failing write: per_store_run_writer returns
   PER_ERR_IO, the trajectory stays staged (and sampleable), a
   per_store_write on the caller's thread later writes it, and a writer
   may start again. */
static void test_writer_error(void) {
  per_store_config cfg = scfg(200, 20, 1u << 16, 1u << 16, 4096);
  per_store s;
  group g;
  wthread w;
  per_store_stats st;
  uint32_t t;
  SECTION = "writer_error";
  memset(&w, 0, sizeof w);
  g_init(&g, &cfg.buffer, 12);
  store_in(&s, "wr-err", &cfg);
  g_attach(&g, &s, &w);
  arm(K_PWRITE, 1); /* only the writer thread does I/O until the join */
  writer_start(&w, &s);
  g_add(&g, 3, 3);
  g_add(&g, 2, 5);
  REQUIRE(pthread_join(w.th, NULL) == 0);
  w.on = 0;
  disarm();
  CHECK(F.fired);
  CHECK_STATUS(w.st, PER_ERR_IO);
  g_add(&g, 4, 2);
  per_store_stats_of(&s, &st);
  CHECK_EQ_U(st.staged_trajectories, 3);
  CHECK_EQ_U(st.written_trajectories, 0);
  g_check(&g);
  for (t = 0; t < 4; ++t) g_draw(&g, 1);
  CHECK_OK(per_store_write(&s));
  per_store_stats_of(&s, &st);
  CHECK_EQ_U(st.staged_trajectories, 0);
  writer_start(&w, &s);
  g_add(&g, 2, 2);
  g_draw(&g, 1);
  writer_stop(&w);
  g_check(&g);
  g_free(&g);
  per_store_free(&s);
}

/* ======================================================================
   6. stats
   ====================================================================== */

/* A unique batch of n from g's store and reference (the same ids): the
   store's cache hits and misses must be the samples whose trajectory is
   cached and those whose is not, and the bytes read the misses'. */
static void check_hits(group *g, uint32_t n, uint64_t *hits_out) {
  per_store *s = g->s[0];
  per_sample_opts o;
  uint64_t ids[MAXB], rids[MAXB];
  unsigned char x[MAXB * 64];
  static uint8_t cached[MAXTRAJ];
  per_store_stats a, b;
  uint64_t id, want_hits = 0;
  uint32_t j, isz = s->item_size;
  REQUIRE(n <= MAXB && isz <= 64);
  per_store_stats_of(s, &a);
  for (id = 0; id < a.added_trajectories && id < MAXTRAJ; ++id) {
    per_store_traj_info in;
    cached[id] = per_store_trajectory(s, id, &in) == PER_OK && in.cached;
  }
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_UNIQUE;
  CHECK_OK(per_store_sample(s, n, &o, x, ids, NULL));
  CHECK_OK(per_buffer_sample(&g->ref, n, &o, NULL, rids, NULL));
  CHECK_MEM(ids, rids, n * sizeof(uint64_t));
  for (j = 0; j < n; ++j) {
    uint32_t tr, pos;
    CHECK(decode_sample(x + (size_t)j * isz, isz, &tr, &pos));
    if (tr < MAXTRAJ) want_hits += cached[tr];
  }
  per_store_stats_of(s, &b);
  CHECK_EQ_U(b.cache_hits - a.cache_hits, want_hits);
  CHECK_EQ_U(b.cache_misses - a.cache_misses, n - want_hits);
  CHECK_EQ_U(b.read_bytes - a.read_bytes, (n - want_hits) * isz);
  CHECK((b.reads > a.reads) == (want_hits < n));
  *hits_out = want_hits;
}

static void test_stats(void) {
  SECTION = "stats";
  char d[256];
  uint32_t t;
  uint64_t hits;
  per_store_stats st;
  /* no cache: written and pushed out of the ring, samples come from disk */
  {
    per_store_config cfg = scfg(400, 32, 0, room_for(2, 20, 32), 1u << 20);
    per_store s;
    group g;
    g_init(&g, &cfg.buffer, 1);
    store_in(&s, "st-nocache", &cfg);
    g_attach(&g, &s, NULL);
    for (t = 0; t < 10; ++t) g_add(&g, 4, 5);
    CHECK_OK(per_store_write(&s));
    per_store_stats_of(&s, &st);
    CHECK_EQ_U(st.staged_bytes, 0);
    CHECK_EQ_U(st.staged_trajectories, 0);
    CHECK_EQ_U(st.written_trajectories, 10);
    CHECK(st.disk_bytes >= 200 * 32);
    CHECK(st.written_bytes >= 200 * 32);
    CHECK(st.cached_bytes <= room_for(2, 20, 32));
    CHECK_EQ_U(st.segments, 1);
    check_hits(&g, 64, &hits);
    CHECK(hits < 64);
    g_add(&g, 4, 5);
    g_add(&g, 4, 5);
    g_add(&g, 4, 5);
    check_hits(&g, 64, &hits);
    CHECK(hits < 64);
    g_check(&g);
    g_free(&g);
    per_store_free(&s);
  }
  /* a cache for everything: every sample from memory */
  {
    per_store_config cfg =
        scfg(400, 32, 1u << 20, room_for(2, 20, 32), 1u << 20);
    per_store s;
    group g;
    g_init(&g, &cfg.buffer, 2);
    store_in(&s, "st-cache", &cfg);
    g_attach(&g, &s, NULL);
    for (t = 0; t < 10; ++t) g_add(&g, 4, 5);
    CHECK_OK(per_store_write(&s));
    per_store_stats_of(&s, &st);
    CHECK_EQ_U(st.cached_bytes >= 200 * 32, 1);
    check_hits(&g, 64, &hits);
    CHECK_EQ_U(hits, 64);
    per_store_stats_of(&s, &st);
    CHECK_EQ_U(st.cache_misses, 0);
    CHECK_EQ_U(st.reads, 0);
    g_free(&g);
    per_store_free(&s);
  }
  /* small segments: many files; evicted ones deleted by a checkpoint */
  {
    per_store_config cfg = scfg(100, 64, 0, room_for(2, 20, 64), 4096);
    per_store s;
    group g;
    uint32_t most = 0, n;
    g_init(&g, &cfg.buffer, 3);
    store_in(&s, "st-seg", &cfg);
    dir_of(d, sizeof d, "st-seg");
    g_attach(&g, &s, NULL);
    for (t = 0; t < 5; ++t) g_add(&g, 5, 4);
    CHECK_OK(per_store_write(&s));
    CHECK_OK(per_store_checkpoint(&s, 0));
    per_store_stats_of(&s, &st);
    CHECK(st.segments >= 2);
    CHECK_EQ_U(count_segs(d), st.segments);
    CHECK_EQ_U(st.checkpoints, 1);
    for (t = 0; t < 30; ++t) {
      g_add(&g, 5, 4);
      if (t % 3 == 0) g_draw(&g, 1);
      n = count_segs(d);
      if (n > most) most = n;
    }
    CHECK_OK(per_store_write(&s));
    n = count_segs(d);
    if (n > most) most = n;
    CHECK_OK(per_store_checkpoint(&s, 0));
    per_store_stats_of(&s, &st);
    CHECK_EQ_U(st.trajectories, 5);
    CHECK_EQ_U(count_segs(d), st.segments);
    CHECK_MSG(count_segs(d) <= 6 && count_segs(d) < most,
              "%u segment files after the checkpoint (at most %u before)",
              count_segs(d), most);
    CHECK_EQ_U(st.checkpoints, 2);
    g_check(&g);
    for (t = 0; t < 4; ++t) g_draw(&g, 1);
    /* the directory still loads */
    CHECK(fp_dir(&cfg, d) != 0);
    g_free(&g);
    per_store_free(&s);
  }
}

/* ======================================================================
   init errors
   ====================================================================== */

static void test_init_errors(void) {
  SECTION = "init_errors";
  per_store_config cfg = scfg(64, 16, 0, 1000, 4096);
  per_store s;
  char d[256];
  dir_of(d, sizeof d, "init");
  memset(&s, 0x55, sizeof s);
  CHECK_STATUS(per_store_init(&s, NULL, &cfg, 0, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_store_init(&s, d, NULL, 0, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_store_init(NULL, d, &cfg, 0, NULL), PER_ERR_NULL);
  cfg.buffer.seq_len = 4;
  cfg.buffer.seq_stride = 4;
  memset(&s, 0x55, sizeof s);
  CHECK_STATUS(per_store_init(&s, d, &cfg, 0, NULL), PER_ERR_ARG);
  CHECK(zeroed_but_error(&s));
  cfg = scfg(64, 16, 0, 4, 4096);
  CHECK_STATUS(per_store_init(&s, d, &cfg, 0, NULL), PER_ERR_ARG);
  cfg = scfg(64, 16, 0, 1000, 4095);
  CHECK_STATUS(per_store_init(&s, d, &cfg, 0, NULL), PER_ERR_ARG);
  cfg = scfg(64, 16, 0, 1000, 4096);
  cfg.buffer.capacity = 0;
  CHECK_STATUS(per_store_init(&s, d, &cfg, 0, NULL), PER_ERR_CAPACITY);
  cfg = scfg(64, 16, 0, 1000, 4096);
  cfg.buffer.alpha = -1;
  CHECK_STATUS(per_store_init(&s, d, &cfg, 0, NULL), PER_ERR_ARG);
  CHECK(zeroed_but_error(&s));
  cfg = scfg(64, 16, 0, 1000, 4096);
  CHECK_STATUS(per_store_init(&s, "/nonexistent/a/b", &cfg, 0, NULL),
               PER_ERR_IO);
  CHECK(zeroed_but_error(&s));
  CHECK_OK(per_store_init(&s, d, &cfg, 0, NULL));
  CHECK(s.error[0] == 0);
  CHECK_EQ_U(s.item_size, 16);
  per_store_free(&s);
  /* no checkpoint was made: the directory holds no store */
  CHECK_OK(per_store_init(&s, d, &cfg, 0, NULL));
  per_store_free(&s);
}

/* The store's CRC-32C (tables, and the CPU's instruction where it has
   one) against per.h's per_crc32c: every length 0..72 at every
   alignment 0..7, 1 MiB, and continued over two pieces. */
static void test_crc(void) {
  static struct peri_store_state st;
  static unsigned char buf[(1 << 20) + 16];
  uint32_t i, len, al, want, x = 12345;
  int hw;
  SECTION = "crc";
  for (i = 0; i < sizeof buf; ++i) {
    x = x * 1664525u + 1013904223u;
    buf[i] = (unsigned char)(x >> 24);
  }
  peri_store_crc_init(st.crc);
  for (hw = 0; hw <= peri_store_crc_hw_ok(); ++hw) {
    st.crc_hw = hw;
    for (al = 0; al < 8; ++al)
      for (len = 0; len <= 72; ++len)
        CHECK_EQ_U(peri_store_crc(&st, 0, buf + al, len),
                   per_crc32c(0, buf + al, len));
    want = per_crc32c(0, buf + 3, 1 << 20);
    CHECK_EQ_U(peri_store_crc(&st, 0, buf + 3, 1 << 20), want);
    CHECK_EQ_U(peri_store_crc(&st, peri_store_crc(&st, 0, buf + 3, 1001),
                              buf + 1004, (1 << 20) - 1001),
               want);
  }
  CHECK_EQ_U(peri_store_crc(&st, 0, "123456789", 9), 0xE3069283u);
}

int main(void) {
  strcpy(ROOT, "/tmp/per-store-XXXXXX");
  REQUIRE(mkdtemp(ROOT) != NULL);
  test_crc();
  test_init_errors();
  test_writer_stop_race();
  test_bitwise();
  test_checkpoint();
  test_log();
  test_shards();
  test_errors();
  test_enospc();
  test_eio();
  test_read_errors();
  test_writer_error();
  test_stats();
  CHECK_EQ_U(t_default_heap.live, 0);
  rm_rf(ROOT);
  return t_done(IS_FLOAT ? "store (float)" : "store (double)");
}
