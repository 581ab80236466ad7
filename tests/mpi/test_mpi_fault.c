/* test_mpi_fault.c - per_mpi_save and per_mpi_load under faults, under
   mpirun (tests/mpi/meson.build). Every I/O call the library makes goes
   through this file's wrappers (macros set before per.h and per_mpi.h
   are included; the test's own I/O is the C library's), and so do the
   collectives. A dry run counts each rank's calls of each kind; then, for
   each rank in turn, each of its calls of each kind (open, read, write,
   fsync, rename, unlink, directory sync) is made to fail with EIO, or
   the rank dies there: after a death the rank has no further effect on
   any file, and the other ranks die at their next collective (as under
   mpirun, they cannot get past it). Every rank also dies in turn at each
   of its collectives. After each case:
   - every rank returned the same status (a failure, not a death);
   - the checkpoint at path loads, at the saved world size and at one
     rank fewer, as the old save or the new one, bit for bit; the new one
     after PER_OK, the old one after an error, but for a failed directory
     sync after the manifest's rename (per_mpi.h);
   - the files under path are the ones per_mpi.h documents: after a
     failure exactly the old save's (both saves' when the new manifest
     stands), after a success the new save's (and an old file whose
     removal failed); after a death nothing but the two saves' files and
     temporary files, and the next save succeeds.
   Loads under the same faults fail on every rank alike with every shard
   unchanged, or give the saved replay exactly; a load never changes a
   file. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

/* Every block per and per_mpi allocate, counted (heap.h): all freed at
   the end, a death included (the dying rank runs on, without effects). */
#include "heap.h"

static int me, W;

/* ---- the fault injector ---- */

enum {
  OP_OPEN,
  OP_READ,
  OP_WRITE,
  OP_SYNC,
  OP_RENAME,
  OP_UNLINK,
  OP_DIRSYNC,
  OP_COLL,
  OP_N
};
static const char *const op_name[OP_N] = {"open",     "read",      "write",
                                          "fsync",    "rename",    "unlink",
                                          "dir sync", "collective"};

/* One fault: call `at` (from 1) of kind op on world rank `rank` fails with
   EIO, or with `die` the rank dies there (OP_COLL: only a death). */
typedef struct fault {
  int rank, op;
  long at;
  int die;
} fault;

static struct {
  int armed;        /* count calls and inject */
  long calls[OP_N]; /* this rank's calls of each kind since armed */
  fault f[2];       /* f[1].op < 0: none */
  int fired;        /* this rank's fault happened */
  int dead;         /* no more effects: this rank died, or another did */
  int opens_fail;   /* after the first fault fired, every open fails */
  FILE *bad[8];     /* streams whose error flag is set by a fault */
} F;

static void mark_bad(FILE *f) {
  int i;
  for (i = 0; i < 8; ++i)
    if (!F.bad[i]) {
      F.bad[i] = f;
      return;
    }
}

static int is_bad(FILE *f) {
  int i;
  for (i = 0; i < 8; ++i)
    if (F.bad[i] == f) return 1;
  return 0;
}

static void unmark(FILE *f) {
  int i;
  for (i = 0; i < 8; ++i)
    if (F.bad[i] == f) F.bad[i] = NULL;
}

/* Whether this call of kind op fails (errno EIO) or must have no effect
   (the rank is dead). */
static int hit(int op) {
  int i;
  if (!F.armed) return 0;
  ++F.calls[op];
  for (i = 0; i < 2 && !F.dead; ++i) {
    const fault *f = &F.f[i];
    if (f->op == op && f->rank == me && f->at == F.calls[op]) {
      F.fired = 1;
      if (f->die) F.dead = 1;
      errno = EIO;
      return 1;
    }
  }
  if (F.dead || (op == OP_OPEN && F.opens_fail && F.fired)) {
    errno = EIO;
    return 1;
  }
  return 0;
}

static FILE *t_fopen(const char *p, const char *mode) {
  return hit(OP_OPEN) ? NULL : fopen(p, mode);
}
static int t_open(const char *p, int flags) {
  return hit(OP_OPEN) ? -1 : open(p, flags);
}
static size_t t_fread(void *b, size_t s, size_t n, FILE *f) {
  if (!hit(OP_READ)) return fread(b, s, n, f);
  mark_bad(f);
  return 0;
}
static int t_fgetc(FILE *f) {
  if (!hit(OP_READ)) return fgetc(f);
  mark_bad(f);
  return EOF;
}
static int t_fseek(FILE *f, long off, int whence) {
  return hit(OP_READ) ? -1 : fseek(f, off, whence);
}
static long t_ftell(FILE *f) { return hit(OP_READ) ? -1L : ftell(f); }
static int t_ferror(FILE *f) { return is_bad(f) || ferror(f); }
static size_t t_fwrite(const void *b, size_t s, size_t n, FILE *f) {
  return hit(OP_WRITE) ? 0 : fwrite(b, s, n, f);
}
static int t_fflush(FILE *f) { return hit(OP_WRITE) ? EOF : fflush(f); }
/* A failed close still closes (the data may be written); a dead rank's
   buffered bytes are dropped, as a killed process's are. */
static int t_fclose(FILE *f) {
  int h = hit(OP_WRITE), r;
  unmark(f);
  if (F.dead) __fpurge(f);
  r = fclose(f);
  return h || r != 0 ? EOF : 0;
}
/* Nothing is really synced: the tests need no durability. */
static int t_fsync(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    errno = EBADF;
    return -1;
  }
  return hit(S_ISDIR(st.st_mode) ? OP_DIRSYNC : OP_SYNC) ? -1 : 0;
}
static int t_rename(const char *a, const char *b) {
  return hit(OP_RENAME) ? -1 : rename(a, b);
}
static int t_remove(const char *p) { return hit(OP_UNLINK) ? -1 : remove(p); }

/* Before every collective of the library's: a rank dies at its fault;
   then all learn whether one has died (an extra collective, the same on
   every rank: the library calls the same collectives on all), and the
   living die here, where they would wait for the dead one forever. */
static void t_coll(MPI_Comm c) {
  int any;
  if (!F.armed) return;
  (void)hit(OP_COLL);
  MPI_Allreduce(&F.dead, &any, 1, MPI_INT, MPI_MAX, c);
  F.dead = any;
}
static int t_allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o,
                       MPI_Comm c) {
  t_coll(c);
  return MPI_Allreduce(s, r, n, t, o, c);
}
static int t_allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn,
                       MPI_Datatype rt, MPI_Comm c) {
  t_coll(c);
  return MPI_Allgather(s, sn, st, r, rn, rt, c);
}
static int t_bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  t_coll(c);
  return MPI_Bcast(b, n, t, root, c);
}

#define fopen t_fopen
#define open t_open
#define fread t_fread
#define fgetc t_fgetc
#define fseek t_fseek
#define ftell t_ftell
#define ferror t_ferror
#define fwrite t_fwrite
#define fflush t_fflush
#define fclose t_fclose
#define fsync t_fsync
#define rename t_rename
#define remove t_remove
#define MPI_Allreduce t_allreduce
#define MPI_Allgather t_allgather
#define MPI_Bcast t_bcast

#define PER_IMPLEMENTATION
#include "per.h"
#define PER_MPI_IMPLEMENTATION
#include "per_mpi.h"

#undef fopen
#undef open
#undef fread
#undef fgetc
#undef fseek
#undef ftell
#undef ferror
#undef fwrite
#undef fflush
#undef fclose
#undef fsync
#undef rename
#undef remove
#undef MPI_Allreduce
#undef MPI_Allgather
#undef MPI_Bcast

#include "t.h"

static void arm(const fault *f0, const fault *f1, int opens_fail) {
  memset(&F, 0, sizeof F);
  F.f[0] = *f0;
  F.f[1].op = -1;
  if (f1) F.f[1] = *f1;
  F.opens_fail = opens_fail;
  F.armed = 1;
}

/* Disarm; whether the fault fired on some rank of c. */
static int disarm(MPI_Comm c) {
  int any;
  F.armed = 0;
  MPI_Allreduce(&F.fired, &any, 1, MPI_INT, MPI_MAX, c);
  return any;
}

/* ---- the replay and its fingerprint ---- */

typedef struct item {
  uint32_t rank, slot, tag;
} item;

static char P[64]; /* the checkpoint's path */

static per_config cfg(uint32_t cap) {
  per_config c = per_config_default(cap, sizeof(item));
  c.alpha = 0.7;
  c.beta0 = 0.5;
  c.beta_steps = 40;
  c.seed = 99;
  return c;
}

static uint32_t cap_of(int rank) { return 12 + 4 * (uint32_t)rank; }

static void adds(per_mpi *m, uint32_t from, uint32_t n) {
  uint32_t j;
  for (j = from; j < from + n; ++j) {
    item it;
    it.rank = (uint32_t)me;
    it.slot = j;
    it.tag = 5;
    REQUIRE(per_buffer_add_step(&m->shard, &it,
                                j % 3 == 2 ? PER_END_TRUNCATED
                                           : PER_END_NONE) == PER_OK);
  }
}

static void round_of(per_mpi *m, uint32_t k) {
  per_mpi_id ids[8];
  float td[8];
  uint32_t j;
  REQUIRE(per_mpi_sample(m, 8, PER_MPI_ALL, NULL, NULL, ids, NULL) == PER_OK);
  for (j = 0; j < 8; ++j) td[j] = 0.5f * (float)((j * 5 + k) % 7);
  REQUIRE(per_mpi_update(m, ids, td, m->rank == 0 ? 8 : 0, NULL) == PER_OK);
}

/* State A on every rank (rank q: 14 + 3q adds, wrapped), then with b
   state B: 5 more adds and another round. */
static void fill(per_mpi *m, int b) {
  per_config c = cfg(cap_of(me));
  REQUIRE(per_mpi_init(m, MPI_COMM_WORLD, &c, NULL) == PER_OK);
  adds(m, 0, 14 + 3 * (uint32_t)me);
  round_of(m, 0);
  round_of(m, 1);
  if (b) {
    adds(m, 100, 5);
    round_of(m, 2);
  }
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = (const unsigned char *)p;
  size_t i;
  for (i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

/* Everything a load restores, over every rank of m's communicator in
   rank order: the items oldest first with their generations, leaves,
   episode ends and trajectory ids, the counters, the tree's root and
   the shared state. The same value on every rank. */
static uint64_t fingerprint(const per_mpi *m) {
  const per_buffer *b = &m->shard;
  per_buffer_shared sh = per_buffer_shared_of(b);
  uint32_t cap = b->cfg.capacity, i, start = (b->pos + cap - b->size) % cap;
  uint64_t h = 1469598103934665603ull, *all, out = h;
  double d;
  int r;
  for (i = 0; i < b->size; ++i) {
    uint32_t s = (start + i) % cap;
    per_real leaf = per_tree_get(&b->tree, s);
    h = fnv(h, b->items + (size_t)s * sizeof(item), sizeof(item));
    h = fnv(h, &b->gen[s], 4);
    h = fnv(h, &leaf, sizeof leaf);
    h = fnv(h, &b->ends[s], 1);
    h = fnv(h, &b->traj[s], 4);
  }
  h = fnv(h, &b->size, 4);
  h = fnv(h, &b->added, 8);
  h = fnv(h, &b->trajs, 8);
  h = fnv(h, &b->tree.node[1], sizeof(per_real));
  h = fnv(h, &sh.step, 8);
  h = fnv(h, &sh.rng.seed, 8);
  h = fnv(h, &sh.rng.counter, 8);
  h = fnv(h, sh.rng.buf, sizeof sh.rng.buf);
  h = fnv(h, &sh.rng.avail, 4);
  h = fnv(h, &sh.max_leaf, sizeof sh.max_leaf);
  d = sh.alpha + 3 * sh.beta0 + 5 * sh.eps + 7 * sh.max_priority;
  h = fnv(h, &d, 8);
  all = (uint64_t *)malloc((size_t)m->world * sizeof *all);
  REQUIRE(all);
  MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, m->comm);
  for (r = 0; r < m->world; ++r) out = fnv(out, &all[r], 8);
  free(all);
  return out;
}

/* Whether every rank of c has the same status s (collective over c). */
static int agreed(int s, MPI_Comm c) {
  int lo, hi;
  MPI_Allreduce(&s, &lo, 1, MPI_INT, MPI_MIN, c);
  MPI_Allreduce(&s, &hi, 1, MPI_INT, MPI_MAX, c);
  return lo == hi;
}

/* The first wl ranks' communicator (MPI_COMM_NULL on the others). */
static MPI_Comm first(int wl) {
  MPI_Comm c;
  MPI_Comm_split(MPI_COMM_WORLD, me < wl ? 0 : MPI_UNDEFINED, me, &c);
  return c;
}

/* A load of the checkpoint at P on the first wl ranks (the saved
   capacities at the saved world size, room for any block at another):
   its status, the same on every rank of c (else a failed check), and
   the fingerprint of what it loaded (0 when it failed). Collective over
   c; ranks outside it get 0. */
static uint64_t load_on(MPI_Comm c, int wl, int *status) {
  per_mpi l;
  per_config k = cfg(wl == W ? cap_of(me) : 256);
  uint64_t fp = 0;
  int s;
  *status = PER_OK;
  if (c == MPI_COMM_NULL) return 0;
  k.alpha = 0.2; /* a re-shard takes alpha and the rest from the manifest */
  k.seed = 3;
  REQUIRE(per_mpi_init(&l, c, &k, NULL) == PER_OK);
  s = per_mpi_load(&l, P);
  CHECK_MSG(agreed(s, c), "load on %d ranks: the statuses differ", wl);
  if (s == PER_OK) {
    CHECK_OK(per_buffer_check(&l.shard));
    fp = fingerprint(&l);
  }
  per_mpi_free(&l);
  *status = s;
  return fp;
}

/* ---- the files under P ---- */

/* Remove every file of the current directory whose name starts with P
   (rank 0), then wait. */
static void clean(void) {
  if (me == 0) {
    DIR *d = opendir(".");
    struct dirent *e;
    size_t n = strlen(P);
    REQUIRE(d);
    while ((e = readdir(d)) != NULL)
      if (strncmp(e->d_name, P, n) == 0) remove(e->d_name);
    closedir(d);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* What the directory holds under P: the manifest, each save's shard
   files, temporary files and anything else. */
typedef struct files {
  int manifest, shard[3][8]; /* shard[s][q]: "P.s.q" for s 1, 2 */
  int tmp, other;
  uint64_t bytes; /* FNV-1a of every file's name and contents, in order */
} files;

static uint64_t file_hash(uint64_t h, const char *name) {
  unsigned char buf[4096];
  size_t n;
  FILE *f = fopen(name, "rb");
  if (!f) return fnv(h, "?", 1);
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) h = fnv(h, buf, n);
  fclose(f);
  return h;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The files under P, on rank 0 (zero elsewhere). */
static files list(void) {
  files fs;
  char *names[256];
  int n = 0, i;
  size_t len = strlen(P);
  memset(&fs, 0, sizeof fs);
  fs.bytes = 1469598103934665603ull;
  if (me == 0) {
    DIR *d = opendir(".");
    struct dirent *e;
    REQUIRE(d);
    while ((e = readdir(d)) != NULL && n < 256)
      if (strncmp(e->d_name, P, len) == 0) {
        names[n] = (char *)malloc(strlen(e->d_name) + 1);
        REQUIRE(names[n]);
        strcpy(names[n++], e->d_name);
      }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (i = 0; i < n; ++i) {
      const char *rest = names[i] + len;
      unsigned s, q;
      char tail;
      fs.bytes =
          file_hash(fnv(fs.bytes, names[i], strlen(names[i]) + 1), names[i]);
      if (*rest == '\0') fs.manifest = 1;
      else if (strstr(rest, ".tmp-")) ++fs.tmp;
      else if (sscanf(rest, ".%u.%u%c", &s, &q, &tail) == 2 && s >= 1 &&
               s <= 2 && q < 8 && (int)q < W)
        fs.shard[s][q] = 1;
      else ++fs.other;
      free(names[i]);
    }
  }
  return fs;
}

/* How many of save s's W shard files are there. */
static int count(const files *fs, int s) {
  int q, n = 0;
  for (q = 0; q < W; ++q) n += fs->shard[s][q];
  return n;
}

/* ---- the cases ---- */

static uint64_t ref[2][2]; /* [A, B][at W, at W - 1] */
static long n_cases[2];    /* saves and loads under faults */
static MPI_Comm sub;       /* the first W - 1 ranks (W > 1) */

static void describe(char *out, size_t n, const fault *f) {
  snprintf(out, n, "%s at %s call %ld of rank %d", f->die ? "death" : "EIO",
           op_name[f->op], f->at, f->rank);
}

/* Which save the checkpoint at P loads as, at W and at W - 1 ranks: 0
   A, 1 B, -1 neither or a failed load (checked). */
static int which(const char *what) {
  int s, v = -1, k;
  uint64_t fp = load_on(MPI_COMM_WORLD, W, &s);
  CHECK_MSG(s == PER_OK, "%s: the load at %d ranks failed: %s", what, W,
            per_status_str((per_status)s));
  for (k = 0; k < 2; ++k)
    if (s == PER_OK && fp == ref[k][0]) v = k;
  CHECK_MSG(v >= 0 || s != PER_OK, "%s: at %d ranks the load is neither save",
            what, W);
  if (W > 1) {
    int v1 = -2;
    fp = load_on(sub, W - 1, &s);
    MPI_Bcast(&s, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(&fp, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    for (k = 0; k < 2; ++k)
      if (s == PER_OK && fp == ref[k][1]) v1 = k;
    CHECK_MSG(v1 == v, "%s: at %d ranks the load is %s, at %d %s", what, W - 1,
              v1 < 0 ? "neither save" : (v1 ? "B" : "A"), W,
              v < 0 ? "neither" : (v ? "B" : "A"));
  }
  return v;
}

/* A save of B over the checkpoint A at P under the faults f0 (and f1),
   judged as the file's header says. */
static void save_case(const fault *f0, const fault *f1, int opens_fail,
                      const char *what) {
  per_mpi m;
  files fs;
  int s, same, got, fired, dies = f0->die || (f1 && f1->die);
  ++n_cases[0];
  clean();
  fill(&m, 0);
  REQUIRE(per_mpi_save(&m, P) == PER_OK);
  per_mpi_free(&m);
  fill(&m, 1);
  arm(f0, f1, opens_fail);
  s = per_mpi_save(&m, P);
  fired = disarm(MPI_COMM_WORLD);
  CHECK_MSG(fired, "%s: the fault never happened", what);
  same = agreed(s, MPI_COMM_WORLD);
  if (!dies) CHECK_MSG(same, "%s: the statuses differ", what);
  got = which(what);
  fs = list();
  if (me == 0 && !dies) {
    /* the one error after the manifest's rename: its directory sync */
    int stands = f0->op == OP_DIRSYNC && f0->rank == 0;
    CHECK_MSG(fs.tmp == 0 && fs.other == 0 && fs.manifest,
              "%s: %d temporary and %d other files, manifest %d", what, fs.tmp,
              fs.other, fs.manifest);
    if (s == PER_OK) {
      CHECK_MSG(got == 1, "%s: PER_OK, but the checkpoint is not B", what);
      CHECK_MSG(count(&fs, 2) == W, "%s: %d of save 2's files", what,
                count(&fs, 2));
      CHECK_MSG(count(&fs, 1) == (f0->op == OP_UNLINK),
                "%s: %d of save 1's files left", what, count(&fs, 1));
    } else if (got == 1) { /* the manifest renamed, then an error */
      CHECK_MSG(stands, "%s: %s, yet the checkpoint is the new one", what,
                per_status_str((per_status)s));
      CHECK_MSG(count(&fs, 1) == W && count(&fs, 2) == W,
                "%s: the new manifest stands: both saves' files must be "
                "kept (%d, %d)",
                what, count(&fs, 1), count(&fs, 2));
    } else {
      CHECK_MSG(got == 0, "%s: %s and the checkpoint is not A", what,
                per_status_str((per_status)s));
      CHECK_MSG(count(&fs, 1) == W && count(&fs, 2) == 0,
                "%s: a failed save leaves the old save's files only (%d, %d)",
                what, count(&fs, 1), count(&fs, 2));
    }
  }
  if (me == 0 && dies)
    CHECK_MSG(fs.other == 0, "%s: %d files of neither save", what, fs.other);
  if (dies) { /* the next save over what a death left */
    CHECK_OK(per_mpi_save(&m, P));
    CHECK_MSG(which(what) == 1, "%s: the save after it is not B", what);
  }
  per_mpi_free(&m);
}

/* Every rank's count of each kind of call in one save or load (all:
   W * OP_N, rank-major). */
static void dry_count(long *all, int load, int wl, MPI_Comm c) {
  fault none = {-1, -1, 0, 0};
  per_mpi m;
  int s = PER_OK;
  memset(F.calls, 0, sizeof F.calls);
  if (load) {
    if (c != MPI_COMM_NULL) {
      per_config k = cfg(wl == W ? cap_of(me) : 256);
      REQUIRE(per_mpi_init(&m, c, &k, NULL) == PER_OK);
      arm(&none, NULL, 0);
      s = per_mpi_load(&m, P);
      F.armed = 0;
      per_mpi_free(&m);
    }
  } else {
    clean();
    fill(&m, 0);
    REQUIRE(per_mpi_save(&m, P) == PER_OK);
    per_mpi_free(&m);
    fill(&m, 1);
    arm(&none, NULL, 0);
    s = per_mpi_save(&m, P);
    F.armed = 0;
    per_mpi_free(&m);
  }
  REQUIRE(s == PER_OK);
  MPI_Allgather(F.calls, OP_N, MPI_LONG, all, OP_N, MPI_LONG, MPI_COMM_WORLD);
}

/* The faults of a dry run's counts `all` on ranks 0..ranks-1, in turn:
   every call of every kind fails, or its rank dies there; and every
   rank dies at each of its collectives. run(f, arg) for each. */
static void each_fault(const long *all, int ranks,
                       void (*run)(const fault *, void *), void *arg) {
  int r, op, die;
  long k;
  for (r = 0; r < ranks; ++r)
    for (op = 0; op < OP_N; ++op)
      for (die = 0; die < 2; ++die)
        for (k = 1; k <= all[r * OP_N + op] && (die || op != OP_COLL); ++k) {
          fault f;
          f.rank = r;
          f.op = op;
          f.at = k;
          f.die = die;
          run(&f, arg);
        }
}

static void save_one(const fault *f, void *arg) {
  char what[96];
  (void)arg;
  describe(what, sizeof what, f);
  save_case(f, NULL, 0, what);
}

static void save_matrix(void) {
  long *all = (long *)calloc((size_t)W * OP_N, sizeof *all);
  int r;
  REQUIRE(all);
  dry_count(all, 0, W, MPI_COMM_WORLD);
  if (me == 0)
    for (r = 0; r < W; ++r)
      CHECK_MSG(all[r * OP_N + OP_WRITE] > 0 && all[r * OP_N + OP_RENAME] > 0 &&
                    all[r * OP_N + OP_COLL] >= 4,
                "rank %d: the dry run saw no writes, renames or collectives",
                r);
  each_fault(all, W, save_one, NULL);
  free(all);
}

/* A load of B under the fault f on the first wl ranks: the statuses
   agree, and it either gives B exactly or fails with every shard as it
   was; no file changes. */
static void load_case(const fault *f, int wl, MPI_Comm c) {
  char what[128];
  per_mpi l;
  files before = list(), after;
  uint64_t h0 = 0, h1 = 0, fp;
  int s = PER_OK, same = 0, ok = 0;
  ++n_cases[1];
  describe(what, sizeof what, f);
  if (c != MPI_COMM_NULL) {
    per_config k = cfg(wl == W ? cap_of(me) : 256);
    REQUIRE(per_mpi_init(&l, c, &k, NULL) == PER_OK);
    adds(&l, 50, 3);
    h0 = fingerprint(&l);
  }
  arm(f, NULL, 0); /* every rank: the others' F stays clear */
  if (c != MPI_COMM_NULL) s = per_mpi_load(&l, P);
  ok = disarm(MPI_COMM_WORLD);
  CHECK_MSG(ok, "load at %d ranks, %s: the fault never happened", wl, what);
  if (c != MPI_COMM_NULL) {
    same = agreed(s, c);
    fp = fingerprint(&l);
    h1 = s == PER_OK ? ref[1][wl == W ? 0 : 1] : h0;
    if (!f->die) {
      CHECK_MSG(same, "load at %d ranks, %s: the statuses differ", wl, what);
      CHECK_MSG(fp == h1, "load at %d ranks, %s: %s, yet %s", wl, what,
                per_status_str((per_status)s),
                s == PER_OK ? "not the saved replay" : "a shard changed");
    }
    per_mpi_free(&l);
  }
  after = list();
  if (me == 0)
    CHECK_MSG(after.bytes == before.bytes,
              "load at %d ranks, %s: the files changed", wl, what);
}

/* load_case's world: wl ranks on c. */
typedef struct load_at {
  int wl;
  MPI_Comm c;
} load_at;

static void load_one(const fault *f, void *arg) {
  const load_at *at = (const load_at *)arg;
  load_case(f, at->wl, at->c);
}

static void load_matrix(void) {
  long *all = (long *)calloc((size_t)W * OP_N, sizeof *all);
  load_at at;
  per_mpi m;
  REQUIRE(all);
  clean();
  fill(&m, 1);
  REQUIRE(per_mpi_save(&m, P) == PER_OK);
  per_mpi_free(&m);
  for (at.wl = W; at.wl >= 1 && at.wl >= W - 1; --at.wl) {
    at.c = at.wl == W ? MPI_COMM_WORLD : sub;
    dry_count(all, 1, at.wl, at.c);
    each_fault(all, at.wl, load_one, &at);
  }
  free(all);
}

/* The reported defects, each by name:
   1. a manifest that cannot be read (EIO) or is damaged refuses the save
      on every rank with nothing written, even when the job then dies
      after the shards would have been written;
   2. a failed directory sync after the manifest's rename keeps the old
      save's files beside the new ones;
   3. when the manifest's write fails and it cannot be read back either,
      no file is removed: the new manifest may be the one in place. */
static void defects(void) {
  fault eio = {0, OP_OPEN, 1, 0}, die3 = {0, OP_COLL, 3, 1};
  fault dsync = {0, OP_DIRSYNC, 2, 0};
  per_mpi m;
  files before, after;
  save_case(&eio, NULL, 0, "rank 0's manifest read fails");
  save_case(&eio, &die3, 0,
            "rank 0's manifest read fails, then all die after the shards");
  save_case(&dsync, NULL, 0, "the manifest's directory sync fails");
  save_case(&dsync, NULL, 1,
            "the manifest's directory sync fails, then reading it back");
  /* a damaged manifest: the save refused, no file touched */
  clean();
  fill(&m, 0);
  REQUIRE(per_mpi_save(&m, P) == PER_OK);
  if (me == 0) {
    FILE *f = fopen(P, "r+b");
    REQUIRE(f && fseek(f, 40, SEEK_SET) == 0 && fputc(0x5a, f) != EOF);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  before = list();
  {
    int s = per_mpi_save(&m, P);
    CHECK_MSG(agreed(s, MPI_COMM_WORLD) && s == PER_ERR_CHECKSUM,
              "save over a damaged manifest: %s, want PER_ERR_CHECKSUM",
              per_status_str((per_status)s));
  }
  after = list();
  if (me == 0)
    CHECK_MSG(after.bytes == before.bytes,
              "save over a damaged manifest changed the files");
  /* no manifest at all is no checkpoint: the first save */
  clean();
  CHECK_OK(per_mpi_save(&m, P));
  after = list();
  if (me == 0)
    CHECK_MSG(after.manifest && count(&after, 1) == W,
              "the first save: manifest %d, %d shard files", after.manifest,
              count(&after, 1));
  per_mpi_free(&m);
}

int main(int argc, char **argv) {
  int rc, k;
  char name[64];
  per_mpi m;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  REQUIRE(W <= 8);
  snprintf(P, sizeof P, "mpi_fault_%s_%d",
           sizeof(per_real) == 8 ? "double" : "float", W);
  sub = first(W - 1);
  /* the two saves' fingerprints at W and W - 1 ranks */
  for (k = 0; k < 2; ++k) {
    int s;
    clean();
    fill(&m, k);
    REQUIRE(per_mpi_save(&m, P) == PER_OK);
    ref[k][0] = load_on(MPI_COMM_WORLD, W, &s);
    REQUIRE(s == PER_OK);
    CHECK_MSG(ref[k][0] == fingerprint(&m),
              "a clean load at %d ranks is not the saved replay", W);
    if (W > 1) {
      ref[k][1] = load_on(sub, W - 1, &s);
      MPI_Bcast(&s, 1, MPI_INT, 0, MPI_COMM_WORLD);
      MPI_Bcast(&ref[k][1], 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
      REQUIRE(s == PER_OK);
    }
    per_mpi_free(&m);
  }
  CHECK(ref[0][0] != ref[1][0]);
  defects();
  save_matrix();
  load_matrix();
  clean();
  if (sub != MPI_COMM_NULL) MPI_Comm_free(&sub);
  CHECK_MSG(t_default_heap.live == 0, "%ld blocks of per's not freed",
            t_default_heap.live);
  if (me == 0)
    printf("%ld saves and %ld loads under a fault\n", n_cases[0], n_cases[1]);
  snprintf(name, sizeof name, "mpi faults, rank %d of %d (%s)", me, W,
           sizeof(per_real) == 8 ? "double" : "float");
  rc = t_done(name);
  MPI_Finalize();
  return rc;
}
