/* per_mpi.h - prioritized replay sharded over MPI ranks, sampling as one
   buffer does. (no warranty; LICENSE: see the end of per.h)

   WHAT IT IS
      A replay buffer spread over the ranks of an MPI communicator: every
      rank owns a per_buffer (its shard) and adds to it with no
      communication at all; a global sample draws a stratified batch from
      all the shards together with the law of one buffer holding every
      item, P(i) = p_i / (sum of every leaf of every shard), as one
      collective; a global update routes each (id, TD error) back to the
      rank that owns the item.

      The global sum tree is a top tree over the shards' totals. A sample
      call gathers every rank's total, size and smallest leaf (one
      allgather of O(world) bytes, which also carries every rank's
      arguments and status), builds the top tree from them the same way on
      every rank, derives the batch's B stratified u's from the buffers'
      common counter-based stream (no u is sent), descends the top tree to
      find the shard of each stratum and lets that shard descend its own
      tree with what is left of u; the items, ids and leaves drawn are
      then gathered to the requesting rank (one gatherv).

      Exactly one buffer's batches: when every shard has the same
      power-of-two capacity C and the number of ranks W is a power of two,
      the top tree's nodes are the top nodes of one tree of W * C leaves,
      bit for bit (each parent is the sum of its two children, in the same
      order), so the ranks draw exactly the ids, items and weights that
      one per_buffer of capacity W * C holding the same leaves draws (rank
      r's slot j as its slot r * C + j). Other shapes draw with the same
      law (the tests check both: tests/mpi/test_mpi.c).

   HOW TO USE IT
      Build with the MPI compiler wrapper (Open MPI: mpicc) or against
      the MPI library (pkg-config ompi-c; Meson: dependency('mpi')), and
      in one file of the program:
        #define PER_IMPLEMENTATION
        #include "per.h"
        #define PER_MPI_IMPLEMENTATION
        #include "per_mpi.h"
      Every function marked collective must be called by every rank of
      the communicator, in the same order, with the same B and root (the
      call checks them and fails on every rank when they differ). The
      status it returns is the same on every rank: a rank's bad argument
      fails the call everywhere, agreed before any state changes, so no
      rank waits for another that gave up. MPI's own failures are MPI's
      error handler's (by default it aborts the job).

      per_mpi m;
      per_config cfg = per_config_default(1 << 20, sizeof(transition));
      per_mpi_init(&m, MPI_COMM_WORLD, &cfg, NULL);       collective
      per_buffer_add(&m.shard, &t);                       local, any rank
      per_mpi_sample(&m, 256, 0, NULL, items, ids, w);    collective
      per_mpi_update(&m, ids, td, n, &stale);             collective
      per_mpi_save(&m, "ckpt/replay");                    collective
      per_mpi_load(&m, "ckpt/replay");    collective, any world size
      per_mpi_free(&m);                                   collective

   CONTRACT
      - Ranks must agree on the config (everything but capacity, which
        may differ from rank to rank), PER_REAL and the architecture's
        byte layout (records travel as bytes): per_mpi_init checks the
        config and PER_REAL.
      - Add to the shard with per.h's add functions (per_buffer_add,
        _add_batch, _add_step, _add_steps, per_nstep_step). Do not sample
        or update the shard with per.h's own functions: its rng, step
        and max_leaf are the global ones, kept equal on every rank by
        the collectives here.
      - Supported: prioritized sampling with replacement of items, the
        beta schedule and PER_SAMPLE_BETA, batch-max and buffer-max
        (PER_WEIGHTS_BUFFER_MAX) weights, the uniform fallback when the
        total mass is 0 or not finite (uniform over every stored item,
        ranks in order, oldest first within a rank). Not supported:
        windows, PER_SAMPLE_UNIQUE, sequences (PER_ERR_ARG).
      - Deterministic: the same seed, adds and calls give the same
        batches on every run and for every rank count whose shards hold
        the same leaves in the same top-tree order.
*/
#ifndef PER_MPI_H_INCLUDED
#define PER_MPI_H_INCLUDED

#include <mpi.h>

#include "per.h"

#ifdef __cplusplus
extern "C" {
#endif

#define per_mpi_init PERI_NAME(per_mpi_init)
#define per_mpi_free PERI_NAME(per_mpi_free)
#define per_mpi_sample PERI_NAME(per_mpi_sample)
#define per_mpi_update PERI_NAME(per_mpi_update)
#define per_mpi_size PERI_NAME(per_mpi_size)
#define per_mpi_save PERI_NAME(per_mpi_save)
#define per_mpi_load PERI_NAME(per_mpi_load)

/* per_mpi_sample's root for "every rank receives the batch". */
#define PER_MPI_ALL (-1)

/* A global id: the shard's id (slot | generation << 32, as per_buffer
   hands out) and the rank that owns it. */
typedef struct per_mpi_id {
  uint64_t id;
  uint64_t rank;
} per_mpi_id;

/* One rank's view. Fields are readable; `shard` is the rank's buffer (add
   to it directly; see CONTRACT). */
typedef struct per_mpi {
  per_buffer shard; /* this rank's items */
  MPI_Comm comm;    /* a duplicate of the caller's: per's messages never
                       meet the caller's */
  int rank, world;
  void *work; /* O(world) workspace of the collectives */
  void *alloc_ctx;
} per_mpi;

/* Collective. Each rank initialises its shard from its cfg
   (per_buffer_init; capacity and max_unique may differ between ranks,
   every other field must be the same, seq_len must be 0) and duplicates
   comm. The shards' rngs start at the same seed: the stream of the
   global batches.
   Errors, the same on every rank (then *m is zeroed and nothing is
   leaked): PER_ERR_NULL (m or cfg, on any rank), those of
   per_buffer_init on any rank (the first rank's in rank order),
   PER_ERR_ARG (seq_len > 0, or the ranks' configs or PER_REAL differ).
   m == NULL returns PER_ERR_NULL on that rank only, before any
   communication: every rank must pass a valid m. */
PERDEF per_status per_mpi_init(per_mpi *m, MPI_Comm comm, const per_config *cfg,
                               void *alloc_ctx);

/* Collective. Frees the shard and the communicator and zeroes *m. Safe
   on a zeroed per_mpi (then local). */
PERDEF void per_mpi_free(per_mpi *m);

/* Collective: items stored over all ranks (0 for NULL m, then local). */
PERDEF uint64_t per_mpi_size(const per_mpi *m);

/* Collective. Draws B items from all the shards as one buffer of all
   their items would (per_buffer_sample with replacement: B strata of the
   global mass, the beta schedule or opts->beta with PER_SAMPLE_BETA,
   weights (pmin / p)^beta over the batch's or, with
   PER_WEIGHTS_BUFFER_MAX, all shards' smallest leaf; uniform over every
   stored item when the global mass is 0 or not finite, every weight 1).
   The batch goes to rank `root`, or to every rank with PER_MPI_ALL;
   there items_out (B * item_size bytes), ids (B) and weights (B) are
   written, each may be NULL; on other ranks they are not read. Every rank
   advances the shared stream by the batch and the step by one, so the
   state stays equal everywhere. Every rank returns the same status.
   Errors (nothing changed, no output written): PER_ERR_NULL (m NULL:
   local, see per_mpi_init), PER_ERR_ARG (opts->flags other than
   PER_SAMPLE_BETA, beta NaN, infinite or negative, root not a rank or
   PER_MPI_ALL, or the ranks' B, root or beta differ), PER_ERR_BATCH (B
   == 0 or > INT_MAX), PER_ERR_EMPTY (no rank has an item), PER_ERR_NOMEM
   (a rank's workspace: O(B) words, plus B records of item_size + 16
   bytes on the receiving ranks). */
PERDEF per_status per_mpi_sample(per_mpi *m, uint32_t B, int root,
                                 const per_sample_opts *opts, void *items_out,
                                 per_mpi_id *ids, float *weights);

/* Collective. Every rank passes its own n (0 is fine) global ids and TD
   errors; each goes to the rank that owns it and is applied there as
   per_buffer_update applies it: leaf (|td| + eps)^alpha, ids of items
   overwritten since the draw skipped as stale, duplicates the last one
   wins (the owner applies the ranks' batches in rank order, each in
   its own order). Then every shard's max_leaf becomes the largest over
   all shards, as one buffer's would be. *stale (may be NULL) gets the
   stale ids of all ranks together, the same on every rank. Errors, the
   same on every rank, nothing applied anywhere: PER_ERR_NULL (m NULL:
   local; ids or td NULL with n > 0), PER_ERR_NAN, PER_ERR_INF (a td),
   PER_ERR_INDEX (a rank outside the communicator, or an id its owner
   never handed out, as per_buffer_update), PER_ERR_BATCH (n > INT_MAX),
   PER_ERR_NOMEM. */
PERDEF per_status per_mpi_update(per_mpi *m, const per_mpi_id *ids,
                                 const float *td, uint32_t n, uint32_t *stale);

#ifndef PER_NO_STDIO
/* Collective. Checkpoints the whole replay under `path`, the same string
   on every rank. Rank r saves its shard with per_buffer_save to
   "path.S.r", S being this save's number (one more than that of the
   checkpoint now at path, 1 for the first); once every rank has, rank 0
   writes the manifest to path itself with per_file_write: the world size,
   S, each shard file's length, CRC-32C, size, capacity and counters, and
   what the ranks share (the batch stream, step, max_leaf and config).
   Writing the manifest is the commit: a crash at any point leaves path
   naming the previous checkpoint or this one, each whole, since shard
   files are never written in place of ones a manifest names. Then each
   rank removes its share of the previous checkpoint's shard files (a
   crash before that leaves them behind, as files that no manifest names:
   safe to delete). The shards are not changed. Rank 0 needs to see the
   directory of path; loading at another world size needs every rank to
   see every shard file (a shared file system), loading at the same world
   size only its own. One save or load at a time per path.
   Errors, the same on every rank; the checkpoint at path, if any, stays
   as it was and this save's files are removed: PER_ERR_NULL (m: local;
   path NULL on some rank), PER_ERR_ARG (the ranks' paths differ),
   PER_ERR_NOMEM, PER_ERR_IO (a shard file or the manifest could not be
   written; if the manifest was written but not synced, the new
   checkpoint stands and the old files are kept). */
PERDEF per_status per_mpi_save(per_mpi *m, const char *path);

/* Collective. Replaces every rank's shard with the checkpoint at path
   (per_mpi_save's), whatever the world size it was saved with.
   - The same world size: rank r loads "path.S.r" with per_buffer_load,
     and the run goes on exactly as the saved one would have: the same
     batches, and ids drawn before the save still valid. Each rank needs
     the capacity its saved shard had.
   - Another world size (a re-shard): the saved items in order (saved
     rank 0's oldest first, then rank 1's, ...) are cut into `world`
     consecutive blocks whose sizes differ by at most one, larger ones
     first; rank r appends block r with per_buffer_load_append (each item
     with its leaf and episode end), from every file the block spans. The
     batch stream, step, beta schedule, alpha, eps, max_priority, seed and
     max_leaf come from the manifest, so sampling goes on from the saved
     stream with the saved buffer's law. Slots and generations are new:
     ids drawn before the load must not reach per_mpi_update after it.
     Each rank counts the items and trajectories it holds, and rank 0
     also those no longer stored, so the sums of added and trajs over the
     ranks are the saved ones (a trajectory that a block boundary cuts
     counts once on each side).
   Every file a rank reads is checked whole (its CRC-32C against the
   manifest's, then per_buffer_load's checks) into a staged shard before
   any shard changes: a rank holds two shards' memory during the call.
   Errors, the same on every rank, every shard unchanged: PER_ERR_NULL
   (m: local; path NULL on some rank), PER_ERR_ARG (the ranks' paths
   differ), PER_ERR_IO (a file missing or unreadable), PER_ERR_FORMAT,
   PER_ERR_VERSION, PER_ERR_TRUNCATED, PER_ERR_CORRUPT (the manifest or a
   shard file damaged), PER_ERR_CHECKSUM (that, or a shard file is not
   the one the manifest names), PER_ERR_MISMATCH (another item_size or
   PER_REAL, alpha = 0 on one side only, a capacity other than the saved
   one at the same world size, or a block larger than a rank's capacity),
   PER_ERR_NOMEM. */
PERDEF per_status per_mpi_load(per_mpi *m, const char *path);
#endif

#ifdef __cplusplus
}
#endif

#endif /* PER_MPI_H_INCLUDED */

/* ====================================================================== */

#ifdef PER_MPI_IMPLEMENTATION
#ifndef PER_MPI_IMPLEMENTATION_INCLUDED
#define PER_MPI_IMPLEMENTATION_INCLUDED

/* C casts, as in per.h: C++ builds with -Wold-style-cast or
   -Wuseless-cast do not hear about them (pop at the end). */
#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuseless-cast"
#endif
#endif

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifndef PER_NO_STDIO
#include <stdio.h>
#endif

#ifndef PER_MALLOC
#define PERM_MALLOC(sz, ctx) ((void)(ctx), malloc(sz))
#define PERM_FREE(p, ctx) ((void)(ctx), free(p))
#else
#define PERM_MALLOC(sz, ctx) PER_MALLOC(sz, ctx)
#define PERM_FREE(p, ctx) PER_FREE(p, ctx)
#endif

/* Every collective runs the same sequence of MPI calls on every rank,
   whatever a rank's arguments: a rank with bad input still takes part and
   only the agreed status decides what happens next. Statuses are
   exchanged before anything changes; the agreed one is the first error
   in rank order (PER_OK is 0 and errors are positive: a MAX reduction
   also finds whether any rank failed). */

/* What a rank tells the others before a batch: its shard's total mass,
   smallest leaf and size, its arguments and its status. */
typedef struct perm_info {
  double total; /* a per_real, exactly */
  double min_leaf;
  double beta;
  int32_t status;
  uint32_t B;
  int32_t root;
  uint32_t size;
} perm_info;

/* What an owner tells the others after checking its part of an update. */
typedef struct perm_agree {
  double max_leaf; /* a per_real, exactly */
  int32_t status;
  uint32_t stale;
} perm_agree;

/* The O(world) workspace, allocated once by per_mpi_init so that no
   collective can fail to allocate it halfway. */
typedef struct perm_work {
  perm_info *info;    /* world */
  perm_agree *agree;  /* world */
  per_real *top;      /* 2 * top_leaves: the top tree */
  int32_t *hdr, *got; /* 2 * world: (status, count) sent and received */
  int *scount, *sdisp, *rcount, *rdisp; /* world each */
  uint32_t top_leaves;
} perm_work;

/* The first error in rank order among `world` statuses, the int32_t at
   `first` and every `stride` bytes after it (a field of an array of
   records). */
static int perm_first_error(const void *first, size_t stride, int world) {
  int32_t st;
  int r;
  for (r = 0; r < world; ++r) {
    memcpy(&st, (const unsigned char *)first + (size_t)r * stride, sizeof st);
    if (st != PER_OK) return st;
  }
  return PER_OK;
}

/* displ[r] = count[0] + ... + count[r - 1] for every rank; the sum of
   all. */
static int perm_displs(const int *count, int *displ, int world) {
  int r, off = 0;
  for (r = 0; r < world; ++r) {
    displ[r] = off;
    off += count[r];
  }
  return off;
}

/* The status every rank agrees on from its own (one MAX reduction). */
static int perm_any_error(MPI_Comm comm, int s) {
  int32_t v = s, worst = PER_OK;
  MPI_Allreduce(&v, &worst, 1, MPI_INT32_T, MPI_MAX, comm);
  return worst;
}

static int perm_float_status(float v) {
  if (v != v) return PER_ERR_NAN;
  if (v - v != 0) return PER_ERR_INF;
  return PER_OK;
}

static void perm_work_free(perm_work *w, void *ctx) {
  if (!w) return;
  PERM_FREE(w->info, ctx);
  PERM_FREE(w->agree, ctx);
  PERM_FREE(w->top, ctx);
  PERM_FREE(w->hdr, ctx);
  PERM_FREE(w->scount, ctx);
  PERM_FREE(w, ctx);
}

static perm_work *perm_work_new(int world, void *ctx) {
  perm_work *w;
  uint32_t L = 1;
  size_t W = (size_t)world;
  while (L < (uint32_t)world) L *= 2;
  w = (perm_work *)PERM_MALLOC(sizeof *w, ctx);
  if (!w) return NULL;
  memset(w, 0, sizeof *w);
  w->top_leaves = L;
  w->info = (perm_info *)PERM_MALLOC(W * sizeof *w->info, ctx);
  w->agree = (perm_agree *)PERM_MALLOC(W * sizeof *w->agree, ctx);
  w->top = (per_real *)PERM_MALLOC(2 * (size_t)L * sizeof *w->top, ctx);
  w->hdr = (int32_t *)PERM_MALLOC(4 * W * sizeof *w->hdr, ctx);
  w->scount = (int *)PERM_MALLOC(4 * W * sizeof *w->scount, ctx);
  if (!w->info || !w->agree || !w->top || !w->hdr || !w->scount) {
    perm_work_free(w, ctx);
    return NULL;
  }
  w->got = w->hdr + 2 * W;
  w->sdisp = w->scount + W;
  w->rcount = w->scount + 2 * W;
  w->rdisp = w->scount + 3 * W;
  return w;
}

/* ---- init ---- */

/* What ranks must agree on at init: the config but its capacity and
   max_unique (which follow the shard's size), and PER_REAL, as integers
   (doubles by their bits). */
enum { PERM_CFG_WORDS = 11 };

static void perm_cfg_words(const per_config *c, uint64_t *w) {
  memset(w, 0, PERM_CFG_WORDS * sizeof *w);
  w[0] = sizeof(per_real);
  w[1] = c->item_size;
  memcpy(&w[2], &c->alpha, 8);
  memcpy(&w[3], &c->beta0, 8);
  memcpy(&w[4], &c->beta1, 8);
  w[5] = c->beta_steps;
  memcpy(&w[6], &c->eps, 8);
  memcpy(&w[7], &c->max_priority, 8);
  w[8] = c->seed;
  w[9] = c->flags;
  w[10] = c->seq_len;
}

PERDEF per_status per_mpi_init(per_mpi *m, MPI_Comm comm, const per_config *cfg,
                               void *alloc_ctx) {
  enum { N = PERM_CFG_WORDS + 1 };
  uint64_t mine[N], *all;
  int s, r, k;
  if (!m) return PER_ERR_NULL;
  memset(m, 0, sizeof *m);
  MPI_Comm_dup(comm, &m->comm);
  MPI_Comm_rank(m->comm, &m->rank);
  MPI_Comm_size(m->comm, &m->world);
  m->alloc_ctx = alloc_ctx;
  if (!cfg) s = PER_ERR_NULL;
  else if (cfg->seq_len > 0) s = PER_ERR_ARG;
  else s = per_buffer_init(&m->shard, cfg, alloc_ctx);
  all = (uint64_t *)PERM_MALLOC((size_t)m->world * sizeof mine, alloc_ctx);
  m->work = perm_work_new(m->world, alloc_ctx);
  /* 1. whether every rank has room to hear the others */
  if (perm_any_error(m->comm, !all || !m->work ? PER_ERR_NOMEM : PER_OK) !=
      PER_OK) {
    s = PER_ERR_NOMEM;
  } else {
    /* 2. every rank's status and config: the first error in rank order,
       else the configs must match */
    mine[0] = (uint64_t)(int64_t)s;
    if (cfg) perm_cfg_words(cfg, mine + 1);
    else memset(mine + 1, 0, sizeof mine - sizeof mine[0]);
    MPI_Allgather(mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine,
                  MPI_BYTE, m->comm);
    s = PER_OK;
    for (r = 0; r < m->world && s == PER_OK; ++r)
      s = (int)(int64_t)all[(size_t)r * N];
    for (r = 1; r < m->world && s == PER_OK; ++r)
      for (k = 1; k < N; ++k)
        if (all[(size_t)r * N + k] != all[k]) s = PER_ERR_ARG;
  }
  PERM_FREE(all, alloc_ctx);
  if (s != PER_OK) {
    per_buffer_free(&m->shard);
    perm_work_free((perm_work *)m->work, alloc_ctx);
    MPI_Comm_free(&m->comm);
    memset(m, 0, sizeof *m);
  }
  return (per_status)s;
}

PERDEF void per_mpi_free(per_mpi *m) {
  if (!m) return;
  per_buffer_free(&m->shard);
  perm_work_free((perm_work *)m->work, m->alloc_ctx);
  if (m->world > 0) MPI_Comm_free(&m->comm);
  memset(m, 0, sizeof *m);
}

PERDEF uint64_t per_mpi_size(const per_mpi *m) {
  uint64_t mine, all = 0;
  if (!m || m->world == 0) return 0;
  mine = per_buffer_size(&m->shard);
  MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM, m->comm);
  return all;
}

/* ---- sample ---- */

/* A batch record: the id, the leaf, then the item's bytes. */
#define PERM_REC_HEAD (8 + sizeof(per_real))

typedef struct perm_batch {
  uint32_t *owner; /* B: the rank of each draw */
  per_real *u;     /* B: the mass left for the owner's descent; then the
                      leaf drawn */
  uint32_t *pos;   /* B: uniform fallback: position among the owner's
                      items, oldest first */
  unsigned char *send, *recv; /* B records each (recv: receivers only) */
} perm_batch;

static void perm_batch_free(perm_batch *t, void *ctx) {
  PERM_FREE(t->owner, ctx);
  PERM_FREE(t->u, ctx);
  PERM_FREE(t->pos, ctx);
  PERM_FREE(t->send, ctx);
  PERM_FREE(t->recv, ctx);
}

static int perm_batch_alloc(perm_batch *t, uint32_t B, size_t rec, int receive,
                            void *ctx) {
  if ((size_t)B > ((size_t)-1) / rec) return PER_ERR_NOMEM;
  t->owner = (uint32_t *)PERM_MALLOC((size_t)B * sizeof *t->owner, ctx);
  t->u = (per_real *)PERM_MALLOC((size_t)B * sizeof *t->u, ctx);
  t->pos = (uint32_t *)PERM_MALLOC((size_t)B * sizeof *t->pos, ctx);
  t->send = (unsigned char *)PERM_MALLOC((size_t)B * rec, ctx);
  if (receive) t->recv = (unsigned char *)PERM_MALLOC((size_t)B * rec, ctx);
  if (!t->owner || !t->u || !t->pos || !t->send || (receive && !t->recv))
    return PER_ERR_NOMEM;
  return PER_OK;
}

/* The agreed status of a sample call, from every rank's info. */
static int perm_sample_agree(const perm_info *in, int world) {
  int r, s = perm_first_error(&in[0].status, sizeof *in, world);
  if (s != PER_OK) return s;
  for (r = 1; r < world; ++r)
    if (in[r].B != in[0].B || in[r].root != in[0].root ||
        memcmp(&in[r].beta, &in[0].beta, sizeof(double)) != 0)
      return PER_ERR_ARG;
  return PER_OK;
}

/* A uniform integer below n (n >= 1): per_rng_below's draw when n fits
   32 bits (one buffer of up to 2^31 items draws the same); else 64 bits
   by rejection. */
static uint64_t perm_below(per_rng *rng, uint64_t n) {
  uint64_t x, lim;
  if (n <= UINT32_MAX) return per_rng_below(rng, (uint32_t)n);
  lim = UINT64_MAX - UINT64_MAX % n;
  do {
    x = (uint64_t)per_rng_u32(rng) << 32;
    x |= per_rng_u32(rng);
  } while (x >= lim);
  return x % n;
}

PERDEF per_status per_mpi_sample(per_mpi *m, uint32_t B, int root,
                                 const per_sample_opts *opts, void *items_out,
                                 per_mpi_id *ids, float *weights) {
  per_buffer *b;
  perm_work *w;
  perm_info mine;
  perm_batch t;
  per_real total, seg = 0, pmin = (per_real)HUGE_VAL;
  uint64_t ntotal = 0;
  uint32_t i, L, Lt, cap, start, flags = opts ? opts->flags : 0, nmine = 0;
  size_t isz, rec;
  int s = PER_OK, r, world, receive, degenerate, bufmax = 0;
  if (!m || m->world == 0) return PER_ERR_NULL;
  b = &m->shard;
  w = (perm_work *)m->work;
  world = m->world;
  isz = b->cfg.item_size;
  rec = PERM_REC_HEAD + isz;
  receive = root == PER_MPI_ALL || root == m->rank;
  memset(&mine, 0, sizeof mine);
  memset(&t, 0, sizeof t);
  mine.B = B;
  mine.root = root;
  mine.beta = per_buffer_beta(b);
  if (flags & ~(uint32_t)PER_SAMPLE_BETA) {
    s = PER_ERR_ARG;
  } else if (flags & PER_SAMPLE_BETA) {
    mine.beta = opts->beta;
    if (!(mine.beta >= 0) || mine.beta - mine.beta != 0) s = PER_ERR_ARG;
  }
  if (s == PER_OK && (root < PER_MPI_ALL || root >= world)) s = PER_ERR_ARG;
  if (s == PER_OK && (B == 0 || B > (uint32_t)INT_MAX)) s = PER_ERR_BATCH;
  if (s == PER_OK) s = perm_batch_alloc(&t, B, rec, receive, m->alloc_ctx);
  mine.status = s;
  mine.total = (double)b->tree.node[1];
  mine.min_leaf = b->min_node ? (double)b->min_node[1] : HUGE_VAL;
  mine.size = b->size;
  MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, w->info, (int)sizeof mine,
                MPI_BYTE, m->comm);
  s = perm_sample_agree(w->info, world);
  for (r = 0; r < world; ++r) ntotal += w->info[r].size;
  if (s == PER_OK && ntotal == 0) s = PER_ERR_EMPTY;
  if (s != PER_OK) goto done;

  /* the top tree: leaf r = rank r's total, parents as per_tree's */
  Lt = w->top_leaves;
  for (i = 0; i < Lt; ++i)
    w->top[Lt + i] = i < (uint32_t)world ? (per_real)w->info[i].total : 0;
  for (i = Lt - 1; i >= 1; --i) per_tree_recompute(w->top, i);
  total = w->top[1];
  degenerate = !(total > 0) || total - total != 0;
  if (b->cfg.flags & PER_WEIGHTS_BUFFER_MAX) {
    for (r = 0; r < world; ++r)
      if ((per_real)w->info[r].min_leaf < pmin)
        pmin = (per_real)w->info[r].min_leaf;
    bufmax = pmin <= PER_LEAF_MAX;
  }
  if (!degenerate) seg = total / (per_real)B;

  /* every draw's owner, found alike by every rank */
  for (i = 0; i < B; ++i) {
    if (!degenerate) {
      per_real u = per_tree_stratum_u(b->rng.seed, b->rng.counter, i, seg);
      uint32_t k = 1;
      while (k < Lt) k = per_tree_step(w->top, k, &u);
      t.owner[i] = k - Lt;
      t.u[i] = u;
    } else {
      uint64_t x = perm_below(&b->rng, ntotal);
      r = 0;
      while (x >= w->info[r].size) x -= w->info[r].size, ++r;
      t.owner[i] = (uint32_t)r;
      t.pos[i] = (uint32_t)x;
    }
  }

  /* this rank's draws, in batch order, as records (the uniform
     fallback's positions count from the oldest item, at slot start) */
  L = b->tree.leaves;
  cap = b->cfg.capacity;
  start = (uint32_t)(((uint64_t)b->pos + cap - b->size) % cap);
  for (i = 0; i < B; ++i) {
    unsigned char *p;
    uint32_t slot;
    uint64_t id;
    per_real v;
    if (t.owner[i] != (uint32_t)m->rank) continue;
    if (!degenerate) slot = per_tree_descend(b->tree.node, L, t.u[i]);
    else slot = (uint32_t)(((uint64_t)start + t.pos[i]) % cap);
    id = (uint64_t)slot | ((uint64_t)b->gen[slot] << 32);
    v = b->tree.node[L + slot];
    p = t.send + (size_t)nmine * rec;
    memcpy(p, &id, 8);
    memcpy(p + 8, &v, sizeof v);
    memcpy(p + PERM_REC_HEAD, b->items + (size_t)slot * isz, isz);
    ++nmine;
  }
  {
    MPI_Datatype dt;
    for (r = 0; r < world; ++r) w->rcount[r] = 0;
    for (i = 0; i < B; ++i) ++w->rcount[t.owner[i]];
    perm_displs(w->rcount, w->rdisp, world);
    MPI_Type_contiguous((int)rec, MPI_BYTE, &dt);
    MPI_Type_commit(&dt);
    if (root == PER_MPI_ALL)
      MPI_Allgatherv(t.send, (int)nmine, dt, t.recv, w->rcount, w->rdisp, dt,
                     m->comm);
    else
      MPI_Gatherv(t.send, (int)nmine, dt, t.recv, w->rcount, w->rdisp, dt, root,
                  m->comm);
    MPI_Type_free(&dt);
  }

  if (receive) {
    /* rank r's records are its draws in batch order: hand them out */
    per_real bmin = (per_real)HUGE_VAL;
    for (r = 0; r < world; ++r) w->rcount[r] = 0;
    for (i = 0; i < B; ++i) {
      uint32_t o = t.owner[i];
      const unsigned char *p =
          t.recv + (size_t)(w->rdisp[o] + w->rcount[o]++) * rec;
      per_real v;
      memcpy(&v, p + 8, sizeof v);
      t.u[i] = v;
      if (v < bmin) bmin = v;
      if (ids) {
        memcpy(&ids[i].id, p, 8);
        ids[i].rank = o;
      }
      if (items_out)
        memcpy((unsigned char *)items_out + (size_t)i * isz, p + PERM_REC_HEAD,
               isz);
    }
    if (!bufmax) pmin = bmin;
    if (weights)
      for (i = 0; i < B; ++i)
        weights[i] =
            degenerate ? 1.0f : per_is_weight(t.u[i], pmin, w->info[0].beta);
  }
  if (!degenerate) {
    b->rng.counter += B;
    b->rng.avail = 0;
  }
  b->step += 1;

done:
  perm_batch_free(&t, m->alloc_ctx);
  return (per_status)s;
}

/* ---- update ---- */

/* A routed update record: the shard's id and the TD error. */
#define PERM_UREC 12

PERDEF per_status per_mpi_update(per_mpi *m, const per_mpi_id *ids,
                                 const float *td, uint32_t n, uint32_t *stale) {
  perm_work *w;
  unsigned char *send = NULL, *recv = NULL;
  uint64_t *rid = NULL, nstale = 0;
  float *rtd = NULL;
  uint32_t j, nrecv = 0, st = 0;
  int s = PER_OK, r, world;
  per_real mx;
  perm_agree a;
  MPI_Datatype dt;
  void *ctx;
  if (!m || m->world == 0) return PER_ERR_NULL;
  w = (perm_work *)m->work;
  world = m->world;
  ctx = m->alloc_ctx;
  for (r = 0; r < world; ++r) w->scount[r] = 0;
  if (n > (uint32_t)INT_MAX) s = PER_ERR_BATCH;
  else if (n > 0 && (!ids || !td)) s = PER_ERR_NULL;
  for (j = 0; j < n && s == PER_OK; ++j) {
    s = perm_float_status(td[j]);
    if (s == PER_OK && ids[j].rank >= (uint64_t)world) s = PER_ERR_INDEX;
    if (s == PER_OK) ++w->scount[ids[j].rank];
  }
  if (s == PER_OK && n > 0) {
    send = (unsigned char *)PERM_MALLOC((size_t)n * PERM_UREC, ctx);
    if (!send) s = PER_ERR_NOMEM;
  }
  /* 1. every rank's status and what it sends to each, in one exchange */
  for (r = 0; r < world; ++r) {
    w->hdr[2 * r] = s;
    w->hdr[2 * r + 1] = s == PER_OK ? w->scount[r] : 0;
  }
  MPI_Alltoall(w->hdr, 2, MPI_INT32_T, w->got, 2, MPI_INT32_T, m->comm);
  s = perm_first_error(w->got, 2 * sizeof *w->got, world);
  if (s != PER_OK) goto done;

  /* 2. room to receive, agreed (a rank without it must not be sent to) */
  for (r = 0; r < world; ++r) w->rcount[r] = w->got[2 * r + 1];
  nrecv = (uint32_t)perm_displs(w->rcount, w->rdisp, world);
  if (nrecv > 0) {
    recv = (unsigned char *)PERM_MALLOC((size_t)nrecv * PERM_UREC, ctx);
    rid = (uint64_t *)PERM_MALLOC((size_t)nrecv * sizeof *rid, ctx);
    rtd = (float *)PERM_MALLOC((size_t)nrecv * sizeof *rtd, ctx);
    if (!recv || !rid || !rtd) s = PER_ERR_NOMEM;
  }
  s = perm_any_error(m->comm, s);
  if (s != PER_OK) goto done;

  /* 3. route: a stable counting sort by owner, then one alltoallv */
  perm_displs(w->scount, w->sdisp, world);
  for (r = 0; r < world; ++r) w->scount[r] = 0;
  for (j = 0; j < n; ++j) {
    int o = (int)ids[j].rank;
    unsigned char *p =
        send + (size_t)(w->sdisp[o] + w->scount[o]++) * PERM_UREC;
    memcpy(p, &ids[j].id, 8);
    memcpy(p + 8, &td[j], 4);
  }
  MPI_Type_contiguous(PERM_UREC, MPI_BYTE, &dt);
  MPI_Type_commit(&dt);
  MPI_Alltoallv(send, w->scount, w->sdisp, dt, recv, w->rcount, w->rdisp, dt,
                m->comm);
  MPI_Type_free(&dt);

  /* 4. each owner checks its part; the statuses, stale counts and new
     max leaves are agreed in one exchange; then every owner applies */
  for (j = 0; j < nrecv; ++j) {
    memcpy(&rid[j], recv + (size_t)j * PERM_UREC, 8);
    memcpy(&rtd[j], recv + (size_t)j * PERM_UREC + 8, 4);
  }
  mx = m->shard.max_leaf;
  memset(&a, 0, sizeof a);
  a.status = per_buffer_update_check(&m->shard, rid, rtd, nrecv, &st, &mx);
  a.stale = st;
  a.max_leaf = (double)mx;
  MPI_Allgather(&a, (int)sizeof a, MPI_BYTE, w->agree, (int)sizeof a, MPI_BYTE,
                m->comm);
  s = perm_first_error(&w->agree[0].status, sizeof *w->agree, world);
  if (s != PER_OK) goto done;
  for (r = 0; r < world; ++r) {
    nstale += w->agree[r].stale;
    if ((per_real)w->agree[r].max_leaf > mx)
      mx = (per_real)w->agree[r].max_leaf;
  }
  s = per_buffer_update(&m->shard, rid, rtd, nrecv, NULL); /* checked: OK */
  if (mx > m->shard.max_leaf) m->shard.max_leaf = mx;
  if (stale) *stale = nstale > UINT32_MAX ? UINT32_MAX : (uint32_t)nstale;

done:
  PERM_FREE(send, ctx);
  PERM_FREE(recv, ctx);
  PERM_FREE(rid, ctx);
  PERM_FREE(rtd, ctx);
  return (per_status)s;
}

#ifndef PER_NO_STDIO
/* ---- checkpoints ---- */

/* The manifest, little-endian: the head, one record per saved rank, then
   the CRC-32C of everything before it (per_file_write). */
enum { PERM_MF_HEAD = 152, PERM_MF_REC = 40, PERM_MF_VERSION = 1 };
static const unsigned char perm_mf_magic[8] = {0x89, 'P', 'E', 'R',
                                               'M',  'P', 'I', '\n'};

/* Head: 0 magic, 8 u32 version, 12 u32 0x01020304, 16 u32 world, 20 u32
   sizeof(per_real), 24 u32 item_size, 28 u32 0, 32 u64 save number, 40
   u64 step, 48 rng (u64 seed, u64 counter, 4 x u32 buf, u32 avail, u32
   0), 88 f64 max_leaf, 96 f64 alpha, beta0, beta1, eps, max_priority,
   136 u64 beta_steps, 144 u64 seed. Record: u64 file bytes, u64 added,
   u64 trajs, u32 CRC-32C of the file, u32 size, u32 capacity, u32 0. */

static void perm_put32(unsigned char *p, uint32_t v) {
  int i;
  for (i = 0; i < 4; ++i) p[i] = (unsigned char)(v >> (8 * i));
}
static void perm_put64(unsigned char *p, uint64_t v) {
  perm_put32(p, (uint32_t)v);
  perm_put32(p + 4, (uint32_t)(v >> 32));
}
static uint32_t perm_get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static uint64_t perm_get64(const unsigned char *p) {
  return (uint64_t)perm_get32(p) | (uint64_t)perm_get32(p + 4) << 32;
}
static void perm_putf(unsigned char *p, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  perm_put64(p, u);
}
static double perm_getf(const unsigned char *p) {
  uint64_t u = perm_get64(p);
  double v;
  memcpy(&v, &u, 8);
  return v;
}

/* One saved rank's record, as the manifest holds it. */
typedef struct perm_rec {
  uint64_t bytes, added, trajs;
  uint32_t crc, size, capacity;
} perm_rec;

static perm_rec perm_mf_rec(const unsigned char *mf, uint32_t q) {
  const unsigned char *p = mf + PERM_MF_HEAD + (size_t)q * PERM_MF_REC;
  perm_rec r;
  r.bytes = perm_get64(p);
  r.added = perm_get64(p + 8);
  r.trajs = perm_get64(p + 16);
  r.crc = perm_get32(p + 24);
  r.size = perm_get32(p + 28);
  r.capacity = perm_get32(p + 32);
  return r;
}

/* The manifest's bytes for the shards' records rec[0..world) and rank
   0's shared state b, CRC not included (per_file_write adds it). */
static void perm_mf_build(unsigned char *mf, const per_buffer *b, uint64_t save,
                          const perm_rec *rec, int world) {
  const per_config *c = &b->cfg;
  int q, i;
  memset(mf, 0, PERM_MF_HEAD + (size_t)world * PERM_MF_REC);
  memcpy(mf, perm_mf_magic, 8);
  perm_put32(mf + 8, PERM_MF_VERSION);
  perm_put32(mf + 12, 0x01020304u);
  perm_put32(mf + 16, (uint32_t)world);
  perm_put32(mf + 20, (uint32_t)sizeof(per_real));
  perm_put32(mf + 24, c->item_size);
  perm_put64(mf + 32, save);
  perm_put64(mf + 40, b->step);
  perm_put64(mf + 48, b->rng.seed);
  perm_put64(mf + 56, b->rng.counter);
  for (i = 0; i < 4; ++i) perm_put32(mf + 64 + 4 * i, b->rng.buf[i]);
  perm_put32(mf + 80, b->rng.avail);
  perm_putf(mf + 88, (double)b->max_leaf);
  perm_putf(mf + 96, c->alpha);
  perm_putf(mf + 104, c->beta0);
  perm_putf(mf + 112, c->beta1);
  perm_putf(mf + 120, c->eps);
  perm_putf(mf + 128, c->max_priority);
  perm_put64(mf + 136, c->beta_steps);
  perm_put64(mf + 144, c->seed);
  for (q = 0; q < world; ++q) {
    unsigned char *p = mf + PERM_MF_HEAD + (size_t)q * PERM_MF_REC;
    perm_put64(p, rec[q].bytes);
    perm_put64(p + 8, rec[q].added);
    perm_put64(p + 16, rec[q].trajs);
    perm_put32(p + 24, rec[q].crc);
    perm_put32(p + 28, rec[q].size);
    perm_put32(p + 32, rec[q].capacity);
  }
}

/* Read and check the manifest at path into *mf (allocated; *len bytes,
   CRC included). Checks what needs no shard: magic, version, byte order,
   length, CRC, and every record (size <= capacity, counters). */
static int perm_mf_read(const char *path, void *ctx, unsigned char **mf,
                        size_t *len) {
  unsigned char head[PERM_MF_HEAD];
  FILE *f;
  size_t got, n;
  uint32_t world, q;
  int s = PER_OK;
  *mf = NULL;
  *len = 0;
  f = fopen(path, "rb");
  if (!f) return PER_ERR_IO;
  got = fread(head, 1, sizeof head, f);
  if (ferror(f)) s = PER_ERR_IO;
  else if (got == 0 || (got >= 8 && memcmp(head, perm_mf_magic, 8) != 0))
    s = PER_ERR_FORMAT;
  else if (got < sizeof head) s = PER_ERR_TRUNCATED;
  else if (perm_get32(head + 8) != PERM_MF_VERSION) s = PER_ERR_VERSION;
  else if (perm_get32(head + 12) != 0x01020304u) s = PER_ERR_FORMAT;
  world = s == PER_OK ? perm_get32(head + 16) : 0;
  if (s == PER_OK &&
      (world == 0 ||
       world > ((uint32_t)INT_MAX - PERM_MF_HEAD - 4) / PERM_MF_REC))
    s = PER_ERR_CORRUPT;
  n = PERM_MF_HEAD + (size_t)world * PERM_MF_REC + 4;
  if (s == PER_OK) {
    *mf = (unsigned char *)PERM_MALLOC(n, ctx);
    if (!*mf) s = PER_ERR_NOMEM;
  }
  if (s == PER_OK) {
    memcpy(*mf, head, sizeof head);
    got = fread(*mf + sizeof head, 1, n - sizeof head, f);
    if (ferror(f)) s = PER_ERR_IO;
    else if (got < n - sizeof head) s = PER_ERR_TRUNCATED;
    else if (fgetc(f) != EOF) s = PER_ERR_CORRUPT; /* longer than it says */
    else if (per_crc32c(0, *mf, n - 4) != perm_get32(*mf + n - 4))
      s = PER_ERR_CHECKSUM;
  }
  fclose(f);
  for (q = 0; q < world && s == PER_OK; ++q) {
    perm_rec r = perm_mf_rec(*mf, q);
    if (r.capacity == 0 || r.size > r.capacity || r.added < r.size ||
        r.trajs > r.added)
      s = PER_ERR_CORRUPT;
  }
  if (s != PER_OK) {
    PERM_FREE(*mf, ctx);
    *mf = NULL;
  } else {
    *len = n;
  }
  return s;
}

/* The shard file of rank q in save `save` under path: "path.save.q"
   (allocated; NULL when memory ran out). */
static char *perm_shard_name(const char *path, uint64_t save, uint32_t q,
                             void *ctx) {
  size_t n = strlen(path) + 2 * 21 + 3;
  char *name = (char *)PERM_MALLOC(n, ctx);
  if (name)
    snprintf(name, n, "%s.%llu.%lu", path, (unsigned long long)save,
             (unsigned long)q);
  return name;
}

/* A file's length and its last 4 bytes (a per file's CRC-32C). */
static int perm_file_tail(const char *name, uint64_t *bytes, uint32_t *crc) {
  unsigned char t[4];
  long end;
  int s = PER_OK;
  FILE *f = fopen(name, "rb");
  if (!f) return PER_ERR_IO;
  if (fseek(f, 0, SEEK_END) != 0 || (end = ftell(f)) < 4 ||
      fseek(f, end - 4, SEEK_SET) != 0 || fread(t, 1, 4, f) != 4)
    s = PER_ERR_IO;
  else {
    *bytes = (uint64_t)end;
    *crc = perm_get32(t);
  }
  fclose(f);
  return s;
}

/* Whether the file `name` is the one record r names (PER_ERR_CHECKSUM
   when it is another). */
static int perm_file_is(const char *name, const perm_rec *r) {
  uint64_t bytes = 0;
  uint32_t crc = 0;
  int s = perm_file_tail(name, &bytes, &crc);
  if (s == PER_OK && (bytes != r->bytes || crc != r->crc)) s = PER_ERR_CHECKSUM;
  return s;
}

/* What a rank tells the others after its part of a save or a load. */
enum { PERM_CK_WORDS = 8 };

/* The first error in rank order among words[r * PERM_CK_WORDS] (a
   status as int64). */
static int perm_ck_first(const uint64_t *all, int world) {
  int r;
  for (r = 0; r < world; ++r)
    if (all[(size_t)r * PERM_CK_WORDS] != 0)
      return (int)(int64_t)all[(size_t)r * PERM_CK_WORDS];
  return PER_OK;
}

/* Every rank's words[PERM_CK_WORDS] (status first) into all; the agreed
   status, with PER_ERR_ARG when the ranks' words[1] (the path's CRC)
   differ. */
static int perm_ck_gather(per_mpi *m, uint64_t *mine, uint64_t *all) {
  int r, s;
  MPI_Allgather(mine, PERM_CK_WORDS, MPI_UINT64_T, all, PERM_CK_WORDS,
                MPI_UINT64_T, m->comm);
  s = perm_ck_first(all, m->world);
  for (r = 1; r < m->world && s == PER_OK; ++r)
    if (all[(size_t)r * PERM_CK_WORDS + 1] != all[1]) s = PER_ERR_ARG;
  return s;
}

static uint64_t perm_path_crc(const char *path) {
  return path ? 1u + (uint64_t)per_crc32c(0, path, strlen(path)) : 0;
}

/* Remove the shard files of ranks q = rank, rank + world, ... below
   saved of save `save` under path (errors ignored: they are files no
   manifest names). */
static void perm_remove_save(const per_mpi *m, const char *path, uint64_t save,
                             uint64_t saved) {
  uint64_t q;
  for (q = (uint64_t)m->rank; q < saved; q += (uint64_t)m->world) {
    char *name = perm_shard_name(path, save, (uint32_t)q, m->alloc_ctx);
    if (name) remove(name);
    PERM_FREE(name, m->alloc_ctx);
  }
}

PERDEF per_status per_mpi_save(per_mpi *m, const char *path) {
  uint64_t mine[PERM_CK_WORDS], *all = NULL, save, old_save = 0, old_world = 0;
  unsigned char *mf = NULL;
  char *name = NULL;
  int s = PER_OK, r, saved = 0, world;
  int64_t fin[2] = {PER_OK, 0};
  void *ctx;
  if (!m || m->world == 0) return PER_ERR_NULL;
  world = m->world;
  ctx = m->alloc_ctx;
  memset(mine, 0, sizeof mine);
  all = (uint64_t *)PERM_MALLOC((size_t)world * sizeof mine, ctx);
  if (!path) s = PER_ERR_NULL;
  else if (!all) s = PER_ERR_NOMEM;
  if (s == PER_OK && m->rank == 0) { /* the checkpoint there now, if any */
    size_t len;
    if (perm_mf_read(path, ctx, &mf, &len) == PER_OK) {
      old_save = perm_get64(mf + 32);
      old_world = perm_get32(mf + 16);
      PERM_FREE(mf, ctx);
      mf = NULL;
    }
  }
  /* 1. every rank's status and path; rank 0's numbers */
  mine[0] = (uint64_t)(int64_t)s;
  mine[1] = perm_path_crc(path);
  mine[2] = old_save;
  mine[3] = old_world;
  if (perm_any_error(m->comm, all ? PER_OK : PER_ERR_NOMEM) != PER_OK) {
    PERM_FREE(all, ctx);
    return PER_ERR_NOMEM; /* no rank can hear the others */
  }
  s = perm_ck_gather(m, mine, all);
  if (s != PER_OK) goto done;
  old_save = all[2];
  old_world = all[3];
  save = old_save + 1;

  /* 2. every rank saves its shard; the files' records are agreed */
  memset(mine, 0, sizeof mine);
  name = perm_shard_name(path, save, (uint32_t)m->rank, ctx);
  s = name ? per_buffer_save(&m->shard, name) : PER_ERR_NOMEM;
  saved = s == PER_OK;
  if (s == PER_OK) {
    uint32_t crc = 0;
    s = perm_file_tail(name, &mine[2], &crc);
    mine[3] = crc;
  }
  mine[0] = (uint64_t)(int64_t)s;
  mine[1] = perm_path_crc(path);
  mine[4] = m->shard.added;
  mine[5] = m->shard.trajs;
  mine[6] = m->shard.size;
  mine[7] = m->shard.cfg.capacity;
  s = perm_ck_gather(m, mine, all);

  /* 3. rank 0 writes the manifest: the commit */
  if (s == PER_OK && m->rank == 0) {
    perm_rec *rec = (perm_rec *)PERM_MALLOC((size_t)world * sizeof *rec, ctx);
    size_t n = PERM_MF_HEAD + (size_t)world * PERM_MF_REC;
    mf = (unsigned char *)PERM_MALLOC(n, ctx);
    fin[0] = rec && mf ? PER_OK : PER_ERR_NOMEM;
    if (fin[0] == PER_OK) {
      for (r = 0; r < world; ++r) {
        const uint64_t *w = all + (size_t)r * PERM_CK_WORDS;
        rec[r].bytes = w[2];
        rec[r].crc = (uint32_t)w[3];
        rec[r].added = w[4];
        rec[r].trajs = w[5];
        rec[r].size = (uint32_t)w[6];
        rec[r].capacity = (uint32_t)w[7];
      }
      perm_mf_build(mf, &m->shard, save, rec, world);
      fin[0] = per_file_write(mf, n, path, ctx);
    }
    PERM_FREE(rec, ctx);
    PERM_FREE(mf, ctx);
    mf = NULL;
    /* committed: the manifest at path is this save's (also when only
       the directory sync failed after the rename) */
    if (fin[0] == PER_OK) {
      fin[1] = 1;
    } else {
      size_t len;
      if (perm_mf_read(path, ctx, &mf, &len) == PER_OK)
        fin[1] = perm_get64(mf + 32) == save;
      PERM_FREE(mf, ctx);
      mf = NULL;
    }
  }
  if (s == PER_OK) {
    MPI_Bcast(fin, 2, MPI_INT64_T, 0, m->comm);
    s = (int)fin[0];
  }

  /* 4. the files no manifest names any more */
  if (fin[1]) {
    if (old_save != 0 && old_save != save)
      perm_remove_save(m, path, old_save, old_world);
  } else if (saved) {
    remove(name);
  }
done:
  PERM_FREE(name, ctx);
  PERM_FREE(all, ctx);
  return (per_status)s;
}

/* Stage this rank's part of a load into st (initialised by the caller
   with the shard's config): its own file at the same world size, else
   its block of the saved items. */
static int perm_load_stage(const per_mpi *m, const char *path,
                           const unsigned char *mf, per_buffer *st) {
  uint32_t sw = perm_get32(mf + 16), q;
  uint64_t save = perm_get64(mf + 32), S = 0, lo, hi, start = 0, per, rem;
  void *ctx = m->alloc_ctx;
  int s = PER_OK, i;
  if (perm_get32(mf + 20) != sizeof(per_real) ||
      perm_get32(mf + 24) != st->cfg.item_size ||
      (perm_getf(mf + 96) == 0) != (st->cfg.alpha == 0))
    return PER_ERR_MISMATCH;
  if (sw == (uint32_t)m->world) {
    perm_rec r = perm_mf_rec(mf, (uint32_t)m->rank);
    char *name = perm_shard_name(path, save, (uint32_t)m->rank, ctx);
    if (!name) return PER_ERR_NOMEM;
    s = perm_file_is(name, &r);
    if (s == PER_OK) s = per_buffer_load(st, name);
    PERM_FREE(name, ctx);
    return s;
  }
  /* block rank of world of the S saved items: sizes per + 1 first */
  for (q = 0; q < sw; ++q) S += perm_mf_rec(mf, q).size;
  per = S / (uint64_t)m->world;
  rem = S % (uint64_t)m->world;
  lo = per * (uint64_t)m->rank +
       ((uint64_t)m->rank < rem ? (uint64_t)m->rank : rem);
  hi = lo + per + ((uint64_t)m->rank < rem);
  if (hi - lo > st->cfg.capacity) return PER_ERR_MISMATCH;
  if (st->cfg.alpha != 0) st->max_leaf = 0; /* then the files' largest */
  for (q = 0; q < sw && s == PER_OK; ++q) {
    perm_rec r = perm_mf_rec(mf, q);
    uint64_t a = lo > start ? lo : start, e = start + r.size;
    if (hi < e) e = hi;
    if (a < e) { /* file q holds [a, e) of the block */
      char *name = perm_shard_name(path, save, q, ctx);
      if (!name) return PER_ERR_NOMEM;
      s = perm_file_is(name, &r);
      if (s == PER_OK)
        s = per_buffer_load_append(st, name, (uint32_t)(a - start),
                                   (uint32_t)(e - a));
      PERM_FREE(name, ctx);
    }
    start += r.size;
  }
  if (s != PER_OK) return s;
  /* what the ranks share, as saved */
  st->step = perm_get64(mf + 40);
  st->rng.seed = perm_get64(mf + 48);
  st->rng.counter = perm_get64(mf + 56);
  for (i = 0; i < 4; ++i) st->rng.buf[i] = perm_get32(mf + 64 + 4 * i);
  st->rng.avail = perm_get32(mf + 80);
  st->cfg.alpha = perm_getf(mf + 96);
  st->cfg.beta0 = perm_getf(mf + 104);
  st->cfg.beta1 = perm_getf(mf + 112);
  st->cfg.eps = perm_getf(mf + 120);
  st->cfg.max_priority = perm_getf(mf + 128);
  st->cfg.beta_steps = perm_get64(mf + 136);
  st->cfg.seed = perm_get64(mf + 144);
  if (st->rng.avail > 4) return PER_ERR_CORRUPT;
  if (st->cfg.alpha != 0) {
    per_real mx = (per_real)perm_getf(mf + 88);
    if (!(mx > 0) || per_leaf_status(mx) != PER_OK || mx < st->max_leaf)
      return PER_ERR_CORRUPT; /* a leaf above the saved max_leaf */
    st->max_leaf = mx;
  }
  return PER_OK;
}

PERDEF per_status per_mpi_load(per_mpi *m, const char *path) {
  uint64_t mine[PERM_CK_WORDS], *all = NULL;
  unsigned char *mf = NULL;
  size_t len = 0;
  int64_t hdr[2] = {PER_OK, 0};
  int s = PER_OK, r, world;
  per_buffer st;
  void *ctx;
  if (!m || m->world == 0) return PER_ERR_NULL;
  world = m->world;
  ctx = m->alloc_ctx;
  memset(&st, 0, sizeof st);
  memset(mine, 0, sizeof mine);
  /* 1. rank 0 reads the manifest; every rank gets it */
  if (m->rank == 0) {
    hdr[0] = path ? perm_mf_read(path, ctx, &mf, &len) : PER_ERR_NULL;
    hdr[1] = (int64_t)len;
  }
  MPI_Bcast(hdr, 2, MPI_INT64_T, 0, m->comm);
  s = (int)hdr[0];
  if (s == PER_OK && m->rank != 0) {
    len = (size_t)hdr[1];
    mf = (unsigned char *)PERM_MALLOC(len, ctx);
  }
  all = (uint64_t *)PERM_MALLOC((size_t)world * sizeof mine, ctx);
  /* whether every rank has room, and the same path */
  {
    int64_t v[4], top[4];
    v[0] = all && (s != PER_OK || mf) ? PER_OK : PER_ERR_NOMEM;
    v[1] = !path;
    v[2] = (int64_t)perm_path_crc(path);
    v[3] = -v[2];
    MPI_Allreduce(v, top, 4, MPI_INT64_T, MPI_MAX, m->comm);
    if (top[0] != PER_OK) s = PER_ERR_NOMEM;
    else if (s == PER_OK && top[1]) s = PER_ERR_NULL;
    else if (s == PER_OK && top[2] != -top[3]) s = PER_ERR_ARG;
  }
  if (s != PER_OK) goto done;
  MPI_Bcast(mf, (int)len, MPI_BYTE, 0, m->comm);

  /* 2. every rank stages its part; the statuses are agreed */
  s = per_buffer_init(&st, &m->shard.cfg, ctx);
  if (s == PER_OK) s = perm_load_stage(m, path, mf, &st);
  mine[0] = (uint64_t)(int64_t)s;
  mine[1] = perm_path_crc(path);
  mine[2] = st.trajs;
  s = perm_ck_gather(m, mine, all);
  if (s != PER_OK) goto done;

  /* 3. rank 0 of a re-shard also counts what is no longer stored */
  if (m->rank == 0 && perm_get32(mf + 16) != (uint32_t)world) {
    uint64_t added = 0, trajs = 0, held = 0, S = 0;
    uint32_t q, i;
    for (q = 0; q < perm_get32(mf + 16); ++q) {
      perm_rec rc = perm_mf_rec(mf, q);
      added += rc.added;
      trajs += rc.trajs;
      S += rc.size;
    }
    for (r = 0; r < world; ++r) held += all[(size_t)r * PERM_CK_WORDS + 2];
    st.added += added - S;
    if (trajs > held) {
      uint64_t more = trajs - held;
      for (i = 0; i < st.size; ++i) st.traj[i] += (uint32_t)more;
      st.trajs += more;
    }
  }
  per_buffer_free(&m->shard);
  m->shard = st;
  memset(&st, 0, sizeof st);
done:
  per_buffer_free(&st);
  PERM_FREE(mf, ctx);
  PERM_FREE(all, ctx);
  return (per_status)s;
}
#endif /* PER_NO_STDIO */

#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic pop
#endif

#endif /* PER_MPI_IMPLEMENTATION_INCLUDED */
#endif /* PER_MPI_IMPLEMENTATION */
