/* per_mpi.h - prioritized replay sharded over MPI ranks, sampling as one
   buffer does. (no warranty; LICENSE: see the end of per.h)

   CONTENTS
      Declarations ............ per_mpi, per_mpi_* (collectives) ..... >>api
      Declarations: the feed .. per_mpi_feed_* (actors) ......... >>feed_api
      Implementation: agreement, the workspace, records ........ >>internals
      Implementation: init .......................................... >>init
      Implementation: sample ...................................... >>sample
      Implementation: update ...................................... >>update
      Implementation: checkpoints (not with PER_NO_STDIO) ........... >>ckpt
      Implementation: the feed ...................................... >>feed
      (grep for the >>markers)

   WHAT IT IS
      A replay buffer spread over the ranks of an MPI communicator: every
      rank owns a per_buffer (its shard) and adds to it with no
      communication at all; a global sample draws a stratified batch from
      all the shards together with the law of one buffer holding every
      item, P(i) = p_i / (sum of every leaf of every shard), as one
      collective; a global update routes each (id, TD error) back to the
      rank that owns the item.

      The global sum tree is a top tree over the shards' totals. A sample
      call gathers every rank's total, smallest leaf, size, capacity and
      adds (one allgather of O(world) bytes, which also carries every rank's
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
      r's slot j as its slot r * C + j); in the uniform fallback too, when
      that buffer's adds number as many as the shards' together (see
      CONTRACT). Other shapes draw with the same law (the tests check
      both: tests/mpi/test_mpi.c).

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

      Actors that never wait (the feed, at the end of this section): an
      actor sends batches to a replay rank, which applies them to its
      shard when it drains (per_mpi_feed_send, per_mpi_feed_drain).

   CONTRACT
      - Ranks must agree on the config (everything but capacity, which
        may differ from rank to rank), PER_REAL and the architecture's
        byte layout (records travel as bytes): per_mpi_init checks the
        config and PER_REAL.
      - Add to the shard with per.h's add functions (per_buffer_add,
        _add_batch, _add_step, _add_steps, _add_td, per_nstep_step). Do
        not sample or update the shard with per.h's own functions: its
        rng, step and max_leaf are the global ones, kept equal on every
        rank by the collectives here. per_buffer_add_td (priorities
        from the actor's TD errors, Ape-X's rule) may raise the shard's
        max_leaf: the other shards take it at the next per_mpi_update,
        so until then their plain adds get the lower one (one buffer's
        adds would get the higher).
      - Supported: prioritized sampling with replacement of items, the
        beta schedule and PER_SAMPLE_BETA, batch-max and buffer-max
        (PER_WEIGHTS_BUFFER_MAX) weights, the uniform fallback when the
        total mass is 0 or not finite. Not supported: windows,
        PER_SAMPLE_UNIQUE, sequences (PER_ERR_ARG).
      - The uniform fallback draws as one buffer does, over one ring made
        of every shard's slots in rank order (capacity: the sum of the
        capacities; write position: the adds of all ranks together
        modulo that): each draw takes the item at position x =
        per_rng_below(n) (per_buffer_draw_uniform), n the items of all
        ranks, counted from the ring's oldest item, which is at its write
        position once every shard is full and at its first slot before
        (a shard's items fill its first slots until it is full). So it is
        one buffer's bit for bit in the shape above whenever that buffer
        had as many adds as the shards together; otherwise the same law,
        uniform over every stored item, with the positions counted from
        another item.
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

/* >>api: one buffer over the ranks */

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
   PER_ERR_ARG (seq_len > 0 or PER_MAX_LIVE, or the ranks' configs or
   PER_REAL differ).
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
   stored item when the global mass is 0 or not finite, as CONTRACT says,
   every weight 1).
   The batch goes to rank `root`, or to every rank with PER_MPI_ALL;
   there items_out (B * item_size bytes), ids (B) and weights (B) are
   written, each may be NULL; on other ranks they are not read. Every rank
   advances the shared stream by the batch and the step by one, so the
   state stays equal everywhere. Every rank returns the same status.
   Errors (nothing changed, no output written): PER_ERR_NULL (m NULL:
   local, see per_mpi_init), PER_ERR_ARG (opts->flags other than
   PER_SAMPLE_BETA, a window (opts->window != 0), beta NaN, infinite or negative, root not a rank or
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
   "path.S.r", S being this save's number: one more than that of the
   checkpoint now at path, 1 only when path does not exist. Once every
   rank has, rank 0 writes the manifest to path itself with
   per_file_write: the world size, S, each shard file's length, CRC-32C,
   size, capacity and counters, and what the ranks share (the batch
   stream, step, max_leaf and config). Writing the manifest is the
   commit: a crash at any point leaves path naming the previous
   checkpoint or this one, each whole, since shard files are never
   written in place of ones a manifest names. Then each rank removes its
   share of the previous checkpoint's shard files. The shards are not
   changed. Rank 0 needs to see the directory of path; loading at another
   world size needs every rank to see every shard file (a shared file
   system), loading at the same world size only its own. One save or load
   at a time per path.
   Files under path afterwards, besides the manifest:
   - PER_OK: this save's files. The previous save's are removed; one that
     cannot be is left (the status stays PER_OK).
   - An error: the checkpoint at path as it was, this save's files
     removed (one whose removal fails is left); except that when the manifest was renamed into place but
     the directory sync after it failed, or its write failed and it
     could not be read back, the new manifest stands or may, and both
     saves' files are kept (until a power loss the new checkpoint is the
     one at path; after one, either may be).
   - A crash: besides the files the manifest names, files that no
     manifest names: the other save's shard files, and temporary files
     "path.tmp-*" and "path.S.r.tmp-*". So may the two error cases above,
     once a later save commits. They are safe to delete while no save
     runs.
   Errors, the same on every rank: PER_ERR_NULL (m: local; path NULL on
   some rank), PER_ERR_ARG (the ranks' paths differ), PER_ERR_NOMEM,
   PER_ERR_IO (a shard file or the manifest could not be written, or the
   manifest now at path could not be read: then nothing is written, since
   the files it names are not known), PER_ERR_FORMAT, PER_ERR_VERSION,
   PER_ERR_TRUNCATED, PER_ERR_CORRUPT, PER_ERR_CHECKSUM (the manifest now
   at path is damaged, as per_mpi_load would find it: nothing is written;
   remove it to save there again, and its shard files "path.S.r" become
   files no manifest names). */
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

/* >>feed_api: asynchronous ingestion (Ape-X's actors)
   Actor ranks hand batches of items (with their episode ends and TD
   errors) to a replay rank without waiting for it: each send copies the
   batch into one of the sender's `slots` message buffers and starts a
   non-blocking send (MPI_Isend). When every slot is in flight the send
   waits for the oldest (back-pressure: counted in f->waits, never a
   drop). A replay rank keeps one receive posted per sender and applies
   what has arrived to its shard when it calls per_mpi_feed_drain (the
   learner's pace, not the actors'): in arrival order, or with
   PER_MPI_FEED_ORDERED one message from each sender in turn (the order
   of a run is then fixed, whatever the timing). A sender's messages
   arrive in the order sent; its per_mpi_feed_close sends an end marker
   after them, so a receiver knows when a sender is done
   (per_mpi_feed_done). Nothing here is collective but init and free. */

#define per_mpi_feed_init PERI_NAME(per_mpi_feed_init)
#define per_mpi_feed_send PERI_NAME(per_mpi_feed_send)
#define per_mpi_feed_drain PERI_NAME(per_mpi_feed_drain)
#define per_mpi_feed_close PERI_NAME(per_mpi_feed_close)
#define per_mpi_feed_done PERI_NAME(per_mpi_feed_done)
#define per_mpi_feed_free PERI_NAME(per_mpi_feed_free)

/* per_mpi_feed_init's dest for a rank that sends nothing. */
#define PER_MPI_FEED_NONE (-1)
/* per_mpi_feed_drain's mode: one message per sender in turn, waiting for
   each (a fixed order). The default applies what has arrived and never
   waits. */
#define PER_MPI_FEED_ORDERED 1u

typedef struct per_mpi_feed {
  MPI_Comm comm; /* a duplicate of the caller's */
  int rank, world;
  int dest;           /* the receiver this rank sends to, or NONE */
  int nsrc;           /* the senders whose dest is this rank */
  uint32_t item_size; /* bytes per item */
  uint32_t max_items; /* items per message at most */
  uint32_t slots;     /* a sender's messages in flight at most */
  /* counters, readable: */
  uint64_t msgs, items; /* sent (sender) or applied (receiver) */
  uint64_t waits;       /* sends that waited for a free slot */
  uint64_t rejected;    /* messages whose items the shard refused (a NaN
                           or infinite td): counted, their items not
                           stored; f->error says why */
  char error[192];      /* the last rejection's message, or "" */
  void *work;           /* buffers and requests */
  void *alloc_ctx;
} per_mpi_feed;

/* Collective over comm (actors, replay ranks, learner alike): this rank
   sends to rank `dest` of comm, or nothing (PER_MPI_FEED_NONE); every
   rank learns which ranks send to it. item_size and max_items (the
   largest batch a send may take) must be the same on every rank; slots
   (>= 1) is the sender's. Errors, the same on every rank (then *f is
   zeroed): PER_ERR_NULL (f: local), PER_ERR_ARG (dest not a rank of comm
   or this rank, item_size or max_items 0 or different between ranks,
   slots 0, a message over INT_MAX bytes), PER_ERR_NOMEM. */
PERDEF per_status per_mpi_feed_init(per_mpi_feed *f, MPI_Comm comm, int dest,
                                    uint32_t item_size, uint32_t max_items,
                                    uint32_t slots, void *alloc_ctx);

/* A sender: n items (n * item_size bytes, 1 <= n <= max_items), their
   ends (NULL: PER_END_NONE) and TD errors (NULL: the receiver gives them
   max_leaf, as per_buffer_add_steps), as one message; returns once they
   are copied (waiting for a slot when all are in flight). Errors (nothing
   sent): PER_ERR_NULL, PER_ERR_ARG (not a sender, closed, n out of
   range). */
PERDEF per_status per_mpi_feed_send(per_mpi_feed *f, const void *items,
                                    uint32_t n, const uint8_t *ends,
                                    const float *td);

/* A receiver: applies up to max_msgs arrived messages to shard
   (per_buffer_add_td or per_buffer_add_steps: one trajectory each) and
   adds their item count to *items (may be NULL). Without
   PER_MPI_FEED_ORDERED it takes what has arrived and returns at once;
   with it, it takes the next message of each sender in turn, waiting
   for it (senders that closed are skipped), until max_msgs or every
   sender is done. A message the shard refuses is counted in
   f->rejected, never stored in part. Errors: PER_ERR_NULL, PER_ERR_ARG
   (flags, or a shard of another item_size). */
PERDEF per_status per_mpi_feed_drain(per_mpi_feed *f, per_buffer *shard,
                                     uint32_t max_msgs, uint32_t flags,
                                     uint64_t *items);

/* A sender: waits for its messages in flight, then sends the end marker
   (after them, in order). Later sends are refused. Errors: PER_ERR_NULL,
   PER_ERR_ARG (not a sender). */
PERDEF per_status per_mpi_feed_close(per_mpi_feed *f);

/* A receiver: 1 once every sender has closed and all its messages were
   drained (0 with senders still open; 1 for a rank nobody sends to). */
PERDEF int per_mpi_feed_done(const per_mpi_feed *f);

/* Collective over the feed's ranks: a sender not yet closed closes; a
   receiver cancels its posted receives (messages not drained are lost:
   drain until per_mpi_feed_done first); frees everything and zeroes *f.
   Safe on a zeroed feed (then local). */
PERDEF void per_mpi_feed_free(per_mpi_feed *f);

#ifdef __cplusplus
}
#endif

#endif /* PER_MPI_H_INCLUDED */

/* ====================================================================== */

#ifdef PER_MPI_IMPLEMENTATION
#ifndef PER_MPI_IMPLEMENTATION_INCLUDED
#define PER_MPI_IMPLEMENTATION_INCLUDED

/* >>internals: agreement, the workspace, records */

/* C casts, as in per.h: C++ builds with -Wold-style-cast or
   -Wuseless-cast do not hear about them (pop at the end). */
#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuseless-cast"
#endif
#endif

/* PER_MALLOC and PER_FREE (the caller's or malloc and free), the
   byte-order helpers and peri_float_status come from per.h's >>internal
   section: this file uses nothing of per.h's implementation, which may
   be in another file. */
#include <limits.h>
#include <math.h>
#include <string.h>
#ifndef PER_NO_STDIO
#include <errno.h>
#include <stdio.h>
#endif

/* Every collective runs the same sequence of MPI calls on every rank,
   whatever a rank's arguments: a rank with bad input still takes part and
   only the agreed status decides what happens next. Statuses are
   exchanged before anything changes; the agreed one is the first error
   in rank order (PER_OK is 0 and errors are positive: a MAX reduction
   also finds whether any rank failed). */

/* What a rank tells the others before a batch: its shard's total mass,
   smallest leaf, adds, size and capacity, its arguments and its status. */
typedef struct peri_mpi_info {
  double total; /* a per_real, exactly */
  double min_leaf;
  double beta;
  uint64_t added;
  int32_t status;
  uint32_t B;
  int32_t root;
  uint32_t size;
  uint32_t capacity;
  uint32_t pad;
} peri_mpi_info;

/* What an owner tells the others after checking its part of an update. */
typedef struct peri_mpi_agree {
  double max_leaf; /* a per_real, exactly */
  int32_t status;
  uint32_t stale;
} peri_mpi_agree;

/* The O(world) workspace, allocated once by per_mpi_init so that no
   collective can fail to allocate it halfway. */
typedef struct peri_mpi_work {
  peri_mpi_info *info;   /* world */
  peri_mpi_agree *agree; /* world */
  per_real *top;         /* 2 * top_leaves: the top tree */
  int32_t *hdr, *got;    /* 2 * world: (status, count) sent and received */
  int *scount, *sdisp, *rcount, *rdisp; /* world each */
  uint32_t top_leaves;
} peri_mpi_work;

/* The first error in rank order among `world` statuses, the int32_t at
   `first` and every `stride` bytes after it (a field of an array of
   records). */
static int peri_mpi_first_error(const void *first, size_t stride, int world) {
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
static int peri_mpi_displs(const int *count, int *displ, int world) {
  int r, off = 0;
  for (r = 0; r < world; ++r) {
    displ[r] = off;
    off += count[r];
  }
  return off;
}

/* The status every rank agrees on from its own (one MAX reduction). */
static int peri_mpi_any_error(MPI_Comm comm, int s) {
  int32_t v = s, worst = PER_OK;
  MPI_Allreduce(&v, &worst, 1, MPI_INT32_T, MPI_MAX, comm);
  return worst;
}

static void peri_mpi_work_free(peri_mpi_work *w, void *ctx) {
  if (!w) return;
  PER_FREE(w->info, ctx);
  PER_FREE(w->agree, ctx);
  PER_FREE(w->top, ctx);
  PER_FREE(w->hdr, ctx);
  PER_FREE(w->scount, ctx);
  PER_FREE(w, ctx);
}

static peri_mpi_work *peri_mpi_work_new(int world, void *ctx) {
  peri_mpi_work *w;
  uint32_t L = 1;
  size_t W = (size_t)world;
  while (L < (uint32_t)world) L *= 2;
  w = (peri_mpi_work *)PER_MALLOC(sizeof *w, ctx);
  if (!w) return NULL;
  memset(w, 0, sizeof *w);
  w->top_leaves = L;
  w->info = (peri_mpi_info *)PER_MALLOC(W * sizeof *w->info, ctx);
  w->agree = (peri_mpi_agree *)PER_MALLOC(W * sizeof *w->agree, ctx);
  w->top = (per_real *)PER_MALLOC(2 * (size_t)L * sizeof *w->top, ctx);
  w->hdr = (int32_t *)PER_MALLOC(4 * W * sizeof *w->hdr, ctx);
  w->scount = (int *)PER_MALLOC(4 * W * sizeof *w->scount, ctx);
  if (!w->info || !w->agree || !w->top || !w->hdr || !w->scount) {
    peri_mpi_work_free(w, ctx);
    return NULL;
  }
  w->got = w->hdr + 2 * W;
  w->sdisp = w->scount + W;
  w->rcount = w->scount + 2 * W;
  w->rdisp = w->scount + 3 * W;
  return w;
}

/* >>init */

/* What ranks must agree on at init: the config but its capacity and
   max_unique (which follow the shard's size), and PER_REAL, as integers
   (doubles by their bits). */
enum { PERI_MPI_CFG_WORDS = 11 };

static void peri_mpi_cfg_words(const per_config *c, uint64_t *w) {
  memset(w, 0, PERI_MPI_CFG_WORDS * sizeof *w);
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
  enum { N = PERI_MPI_CFG_WORDS + 1 };
  uint64_t mine[N], *all;
  int s, r, k;
  if (!m) return PER_ERR_NULL;
  memset(m, 0, sizeof *m);
  MPI_Comm_dup(comm, &m->comm);
  MPI_Comm_rank(m->comm, &m->rank);
  MPI_Comm_size(m->comm, &m->world);
  m->alloc_ctx = alloc_ctx;
  if (!cfg) s = PER_ERR_NULL;
  else if (cfg->seq_len > 0 || (cfg->flags & PER_MAX_LIVE)) s = PER_ERR_ARG;
  else s = (int)per_buffer_init(&m->shard, cfg, alloc_ctx);
  all = (uint64_t *)PER_MALLOC((size_t)m->world * sizeof mine, alloc_ctx);
  m->work = peri_mpi_work_new(m->world, alloc_ctx);
  /* 1. whether every rank has room to hear the others */
  if (peri_mpi_any_error(m->comm, !all || !m->work ? PER_ERR_NOMEM : PER_OK) !=
      PER_OK) {
    s = PER_ERR_NOMEM;
  } else {
    /* 2. every rank's status and config: the first error in rank order,
       else the configs must match */
    mine[0] = (uint64_t)(int64_t)s;
    if (cfg) peri_mpi_cfg_words(cfg, mine + 1);
    else memset(mine + 1, 0, sizeof mine - sizeof mine[0]);
    MPI_Allgather(mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine,
                  MPI_BYTE, m->comm);
    s = PER_OK;
    for (r = 0; r < m->world && s == PER_OK; ++r)
      s = (int)(int64_t)all[(size_t)r * N];
    for (r = 1; r < m->world && s == PER_OK; ++r)
      for (k = 1; k < N; ++k)
        if (all[(size_t)r * N + (size_t)k] != all[k]) s = PER_ERR_ARG;
  }
  PER_FREE(all, alloc_ctx);
  if (s != PER_OK) {
    per_buffer_free(&m->shard);
    peri_mpi_work_free((peri_mpi_work *)m->work, alloc_ctx);
    MPI_Comm_free(&m->comm);
    memset(m, 0, sizeof *m);
  }
  return (per_status)s;
}

PERDEF void per_mpi_free(per_mpi *m) {
  if (!m) return;
  per_buffer_free(&m->shard);
  peri_mpi_work_free((peri_mpi_work *)m->work, m->alloc_ctx);
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

/* >>sample
   A call runs in phases, each its own function: every rank's info
   (peri_mpi_sample_info, one allgather, peri_mpi_sample_agree); the
   batch's plan, alike on every rank (peri_mpi_plan_of: the top tree);
   every draw's owner (peri_mpi_owners); this rank's draws as records
   (peri_mpi_pack); the records to the receivers (peri_mpi_gather); the
   batch in order with its weights (peri_mpi_unpack); then the stream
   and the step advance. */

/* A batch record: the id, the leaf, then the item's bytes. */
#define PERI_MPI_REC_HEAD (8 + sizeof(per_real))

typedef struct peri_mpi_batch {
  uint32_t *owner;     /* B: the rank of each draw */
  per_real *u;         /* B: the mass left for the owner's descent; then the
                          leaf drawn */
  uint64_t *pos;       /* B: uniform fallback: the position drawn; then, for
                          this rank's draws, the slot in its shard */
  per_real *mu;        /* B: this rank's draws' u, in batch order */
  uint32_t *mslot;     /* B: their slots (per_tree_find_batch) */
  unsigned char *send; /* non-receivers: their records */
  unsigned char *recv; /* receivers: every rank's records (their own
                          draws are read from the shard instead) */
} peri_mpi_batch;

static void peri_mpi_batch_free(peri_mpi_batch *t, void *ctx) {
  PER_FREE(t->owner, ctx);
  PER_FREE(t->u, ctx);
  PER_FREE(t->pos, ctx);
  PER_FREE(t->mu, ctx);
  PER_FREE(t->mslot, ctx);
  PER_FREE(t->send, ctx);
  PER_FREE(t->recv, ctx);
}

static int peri_mpi_batch_alloc(peri_mpi_batch *t, uint32_t B, size_t rec,
                                int receive, void *ctx) {
  unsigned char **buf = receive ? &t->recv : &t->send;
  if ((size_t)B > ((size_t)-1) / rec) return PER_ERR_NOMEM;
  t->owner = (uint32_t *)PER_MALLOC((size_t)B * sizeof *t->owner, ctx);
  t->u = (per_real *)PER_MALLOC((size_t)B * sizeof *t->u, ctx);
  t->pos = (uint64_t *)PER_MALLOC((size_t)B * sizeof *t->pos, ctx);
  t->mu = (per_real *)PER_MALLOC((size_t)B * sizeof *t->mu, ctx);
  t->mslot = (uint32_t *)PER_MALLOC((size_t)B * sizeof *t->mslot, ctx);
  *buf = (unsigned char *)PER_MALLOC((size_t)B * rec, ctx);
  if (!t->owner || !t->u || !t->pos || !t->mu || !t->mslot || !*buf)
    return PER_ERR_NOMEM;
  return PER_OK;
}

/* This rank's info for a sample call: its arguments and their status,
   its shard's total, smallest leaf, adds, size and capacity. */
static void peri_mpi_sample_info(const per_mpi *m, uint32_t B, int root,
                                 const per_sample_opts *opts,
                                 peri_mpi_info *in) {
  const per_buffer *b = &m->shard;
  uint32_t flags = opts ? opts->flags : 0;
  int s = PER_OK;
  memset(in, 0, sizeof *in);
  in->B = B;
  in->root = root;
  in->beta = per_buffer_beta(b);
  if ((flags & ~(uint32_t)PER_SAMPLE_BETA) || (opts && opts->window != 0)) {
    s = PER_ERR_ARG;
  } else if (flags & PER_SAMPLE_BETA) {
    in->beta = opts->beta;
    if (!(in->beta >= 0) || in->beta - in->beta != 0) s = PER_ERR_ARG;
  }
  if (s == PER_OK && (root < PER_MPI_ALL || root >= m->world)) s = PER_ERR_ARG;
  if (s == PER_OK && (B == 0 || B > (uint32_t)INT_MAX)) s = PER_ERR_BATCH;
  in->status = s;
  in->total = (double)b->tree.node[1];
  in->min_leaf = b->min_node ? (double)b->min_node[1] : HUGE_VAL;
  in->added = b->added;
  in->size = per_buffer_size(b);
  in->capacity = b->cfg.capacity;
}

/* The agreed status of a sample call, from every rank's info. */
static int peri_mpi_sample_agree(const peri_mpi_info *in, int world) {
  int r, s = peri_mpi_first_error(&in[0].status, sizeof *in, world);
  if (s != PER_OK) return s;
  for (r = 1; r < world; ++r)
    if (in[r].B != in[0].B || in[r].root != in[0].root ||
        memcmp(&in[r].beta, &in[0].beta, sizeof(double)) != 0)
      return PER_ERR_ARG;
  return PER_OK;
}

/* What every rank knows alike about an agreed batch. */
typedef struct peri_mpi_plan {
  uint32_t B;
  int root;
  double beta;
  per_real total, seg; /* the global mass; total / B */
  per_real pmin;       /* PER_WEIGHTS_BUFFER_MAX: the smallest leaf */
  int degenerate;      /* mass 0 or not finite: the uniform fallback */
  int bufmax;          /* weights over pmin (else the batch's smallest) */
  uint64_t n;          /* items over all ranks */
  uint64_t head;       /* uniform: the position of the oldest item */
  size_t isz, rec;     /* item and record bytes */
} peri_mpi_plan;

/* The plan of the batch every rank's info in[] agreed on: the top tree
   (leaf r = rank r's total, parents as per_tree's), its mass, the
   weights' minimum and the uniform fallback's ring. */
static void peri_mpi_plan_of(per_mpi *m, const peri_mpi_info *in,
                             peri_mpi_plan *p) {
  peri_mpi_work *w = (peri_mpi_work *)m->work;
  uint32_t i, Lt = w->top_leaves;
  uint64_t cap = 0, added = 0;
  int r, world = m->world;
  p->B = in[0].B;
  p->root = in[0].root;
  p->beta = in[0].beta;
  p->isz = m->shard.cfg.item_size;
  p->rec = PERI_MPI_REC_HEAD + p->isz;
  for (i = 0; i < Lt; ++i)
    w->top[Lt + i] = i < (uint32_t)world ? (per_real)in[i].total : 0;
  for (i = Lt - 1; i >= 1; --i) per_tree_recompute(w->top, i);
  p->total = w->top[1];
  p->degenerate = !(p->total > 0) || p->total - p->total != 0;
  p->seg = p->degenerate ? 0 : p->total / (per_real)p->B;
  p->pmin = (per_real)HUGE_VAL;
  p->bufmax = 0;
  if (m->shard.cfg.flags & PER_WEIGHTS_BUFFER_MAX) {
    for (r = 0; r < world; ++r)
      if ((per_real)in[r].min_leaf < p->pmin)
        p->pmin = (per_real)in[r].min_leaf;
    p->bufmax = p->pmin <= PER_LEAF_MAX;
  }
  /* one ring of every shard's slots in rank order: its items are n, its
     capacity cap, its write position (adds over all ranks) % cap; as one
     buffer's, its oldest item is at that position once it is full, at
     its first slot before */
  p->n = 0;
  for (r = 0; r < world; ++r) {
    p->n += in[r].size;
    cap += in[r].capacity;
  }
  for (r = 0; r < world; ++r) added = (added + in[r].added % cap) % cap;
  p->head = p->n == cap ? added : 0;
}

/* Every draw's owner, found alike by every rank: a stratum's by the top
   tree (and in u what is left of its mass), a uniform draw's by its
   position in the ring of peri_mpi_plan_of, counted from the oldest item
   (and in pos its slot). The uniform draws advance the shard's stream
   and step (per_buffer_draw_uniform: PER_OK for the agreed B >= 1 and n
   >= 1; were it not, every position would be 0, so that every rank still
   runs the same collectives). */
static per_status peri_mpi_owners(per_mpi *m, const peri_mpi_plan *p,
                                  peri_mpi_batch *t) {
  per_buffer *b = &m->shard;
  const peri_mpi_work *w = (const peri_mpi_work *)m->work;
  uint32_t i, Lt = w->top_leaves;
  per_status s = PER_OK;
  if (p->degenerate) {
    s = per_buffer_draw_uniform(b, p->n, p->B, t->pos);
    if (s != PER_OK) memset(t->pos, 0, (size_t)p->B * sizeof *t->pos);
    for (i = 0; i < p->B; ++i) {
      uint64_t x = (t->pos[i] + p->head) % p->n;
      int r = 0;
      while (x >= w->info[r].size) x -= w->info[r].size, ++r;
      t->owner[i] = (uint32_t)r;
      t->pos[i] = x;
    }
    return s;
  }
  for (i = 0; i < p->B; ++i) {
    per_real u = per_tree_stratum_u(b->rng.seed, b->rng.counter, i, p->seg);
    uint32_t k = 1;
    while (k < Lt) k = per_tree_step(w->top, k, &u);
    t->owner[i] = k - Lt;
    t->u[i] = u;
  }
  return s;
}

/* How many draws each rank owns (w->rcount) and where its records go in
   a receiver's t->recv (w->rdisp): rank r's draws in batch order. */
static void peri_mpi_counts(per_mpi *m, const peri_mpi_plan *p,
                            const peri_mpi_batch *t) {
  peri_mpi_work *w = (peri_mpi_work *)m->work;
  uint32_t i;
  int r;
  for (r = 0; r < m->world; ++r) w->rcount[r] = 0;
  for (i = 0; i < p->B; ++i) ++w->rcount[t->owner[i]];
  peri_mpi_displs(w->rcount, w->rdisp, m->world);
}

/* This rank's draws: the shard descends its own tree with what is left of
   each stratum's mass, all of them together (per_tree_find_batch; a
   uniform draw has its slot already), and each draw's slot goes to
   t->pos. With dst, their records are written there in batch order (the
   others' receivers read them; this rank reads its own from the shard). */
static void peri_mpi_pack(const per_mpi *m, const peri_mpi_plan *p,
                          peri_mpi_batch *t, unsigned char *dst) {
  const per_buffer *b = &m->shard;
  uint32_t i, j, n = 0, L = b->tree.leaves;
  for (i = 0; i < p->B; ++i)
    if (t->owner[i] == (uint32_t)m->rank) {
      if (!p->degenerate) t->mu[n] = t->u[i];
      else t->mslot[n] = (uint32_t)t->pos[i];
      ++n;
    }
  if (!p->degenerate && n > 0) {
    /* the owner's tree has mass (the top tree chose it) and every u is
       a finite mass >= 0: PER_OK */
    per_status s = per_tree_find_batch(&b->tree, t->mu, n, t->mslot, NULL);
    PER_ASSERT(s == PER_OK);
    (void)s;
  }
  for (i = 0, j = 0; i < p->B; ++i) {
    unsigned char *q;
    uint32_t slot;
    uint64_t id;
    per_real v;
    if (t->owner[i] != (uint32_t)m->rank) continue;
    slot = t->mslot[j];
    t->pos[i] = slot;
    if (dst) {
      id = (uint64_t)slot | ((uint64_t)b->gen[slot] << 32);
      v = b->tree.node[L + slot];
      q = dst + (size_t)j * p->rec;
      memcpy(q, &id, 8);
      memcpy(q + 8, &v, sizeof v);
      memcpy(q + PERI_MPI_REC_HEAD, b->items + (size_t)slot * p->isz, p->isz);
    }
    ++j;
  }
}

/* Every rank's records to the root, or to every rank: rank r's are its
   draws in batch order, at w->rdisp[r] in t->recv. A receiver's own are
   in place (MPI_IN_PLACE: not copied, not read). */
static void peri_mpi_gather(per_mpi *m, const peri_mpi_plan *p,
                            peri_mpi_batch *t) {
  peri_mpi_work *w = (peri_mpi_work *)m->work;
  MPI_Datatype dt;
  int nmine = w->rcount[m->rank];
  MPI_Type_contiguous((int)p->rec, MPI_BYTE, &dt);
  MPI_Type_commit(&dt);
  if (p->root == PER_MPI_ALL)
    MPI_Allgatherv(MPI_IN_PLACE, 0, dt, t->recv, w->rcount, w->rdisp, dt,
                   m->comm);
  else if (p->root == m->rank)
    MPI_Gatherv(MPI_IN_PLACE, nmine, dt, t->recv, w->rcount, w->rdisp, dt,
                p->root, m->comm);
  else MPI_Gatherv(t->send, nmine, dt, NULL, NULL, NULL, dt, p->root, m->comm);
  MPI_Type_free(&dt);
}

/* A receiver hands the draws out in batch order, its own from its shard
   (one copy of each item), the others' from their records: items, ids,
   and the weights over the batch's or the shards' smallest leaf. */
static void peri_mpi_unpack(per_mpi *m, const peri_mpi_plan *p,
                            peri_mpi_batch *t, void *items_out, per_mpi_id *ids,
                            float *weights) {
  peri_mpi_work *w = (peri_mpi_work *)m->work;
  const per_buffer *b = &m->shard;
  per_real bmin = (per_real)HUGE_VAL, pmin = p->pmin;
  uint32_t i, L = b->tree.leaves;
  int r;
  for (r = 0; r < m->world; ++r) w->rcount[r] = 0;
  for (i = 0; i < p->B; ++i) {
    uint32_t o = t->owner[i];
    const unsigned char *item;
    uint64_t id;
    per_real v;
    if (o == (uint32_t)m->rank) {
      uint32_t slot = (uint32_t)t->pos[i];
      id = (uint64_t)slot | ((uint64_t)b->gen[slot] << 32);
      v = b->tree.node[L + slot];
      item = b->items + (size_t)slot * p->isz;
    } else {
      const unsigned char *q =
          t->recv + (size_t)(w->rdisp[o] + w->rcount[o]++) * p->rec;
      memcpy(&id, q, 8);
      memcpy(&v, q + 8, sizeof v);
      item = q + PERI_MPI_REC_HEAD;
    }
    t->u[i] = v;
    if (v < bmin) bmin = v;
    if (ids) {
      ids[i].id = id;
      ids[i].rank = o;
    }
    if (items_out)
      memcpy((unsigned char *)items_out + (size_t)i * p->isz, item, p->isz);
  }
  if (!p->bufmax) pmin = bmin;
  if (weights)
    for (i = 0; i < p->B; ++i)
      weights[i] = p->degenerate ? 1.0f : per_is_weight(t->u[i], pmin, p->beta);
}

PERDEF per_status per_mpi_sample(per_mpi *m, uint32_t B, int root,
                                 const per_sample_opts *opts, void *items_out,
                                 per_mpi_id *ids, float *weights) {
  peri_mpi_work *w;
  peri_mpi_info mine;
  peri_mpi_batch t;
  peri_mpi_plan p;
  int s, r, receive;
  uint64_t n = 0;
  if (!m || m->world == 0) return PER_ERR_NULL;
  w = (peri_mpi_work *)m->work;
  receive = root == PER_MPI_ALL || root == m->rank;
  memset(&t, 0, sizeof t);
  /* 1. every rank's info and status */
  peri_mpi_sample_info(m, B, root, opts, &mine);
  if (mine.status == PER_OK)
    mine.status =
        peri_mpi_batch_alloc(&t, B, PERI_MPI_REC_HEAD + m->shard.cfg.item_size,
                             receive, m->alloc_ctx);
  MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, w->info, (int)sizeof mine,
                MPI_BYTE, m->comm);
  s = peri_mpi_sample_agree(w->info, m->world);
  for (r = 0; r < m->world; ++r) n += w->info[r].size;
  if (s == PER_OK && n == 0) s = PER_ERR_EMPTY;
  if (s != PER_OK) goto done;
  /* 2. the batch, alike on every rank, then each owner's draws */
  peri_mpi_plan_of(m, w->info, &p);
  s = (int)peri_mpi_owners(m, &p, &t);
  peri_mpi_counts(m, &p, &t);
  /* a receiver's own records are in place in recv (for the others, with
     PER_MPI_ALL; none are needed at a single root) */
  peri_mpi_pack(m, &p, &t,
                !receive ? t.send
                : p.root == PER_MPI_ALL
                    ? t.recv + (size_t)w->rdisp[m->rank] * p.rec
                    : NULL);
  peri_mpi_gather(m, &p, &t);
  if (receive) peri_mpi_unpack(m, &p, &t, items_out, ids, weights);
  /* 3. the strata's stream and the step, as one buffer's (the uniform
     draws advanced them as they drew); B >= 1: PER_OK */
  if (s == PER_OK && !p.degenerate)
    s = (int)per_buffer_advance_strata(&m->shard, B);
done:
  peri_mpi_batch_free(&t, m->alloc_ctx);
  return (per_status)s;
}

/* >>update
   Four collectives, a phase each: every rank's status and counts per
   owner (one alltoall), room to receive (one allreduce), the records
   routed to their owners (one alltoallv), and each owner's check of its
   part (one allgather), after which every owner applies its part. */

/* A routed update record: the shard's id and the TD error. */
#define PERI_MPI_UREC 12

/* An update's own memory: the records this rank sends and receives, and
   the received ones as ids and TD errors. */
typedef struct peri_mpi_route {
  unsigned char *send, *recv;
  uint64_t *rid;
  float *rtd;
  uint32_t nrecv;
} peri_mpi_route;

static void peri_mpi_route_free(peri_mpi_route *q, void *ctx) {
  PER_FREE(q->send, ctx);
  PER_FREE(q->recv, ctx);
  PER_FREE(q->rid, ctx);
  PER_FREE(q->rtd, ctx);
}

/* This rank's part before any exchange: its arguments' status, how many
   records go to each owner (w->scount) and the memory to send them. */
static int peri_mpi_update_args(per_mpi *m, const per_mpi_id *ids,
                                const float *td, uint32_t n,
                                peri_mpi_route *q) {
  peri_mpi_work *w = (peri_mpi_work *)m->work;
  uint32_t j;
  int s = PER_OK, r;
  for (r = 0; r < m->world; ++r) w->scount[r] = 0;
  if (n > (uint32_t)INT_MAX) s = PER_ERR_BATCH;
  else if (n > 0 && (!ids || !td)) s = PER_ERR_NULL;
  for (j = 0; j < n && s == PER_OK; ++j) {
    s = (int)peri_float_status(td[j]);
    if (s == PER_OK && ids[j].rank >= (uint64_t)m->world) s = PER_ERR_INDEX;
    if (s == PER_OK) ++w->scount[ids[j].rank];
  }
  if (s == PER_OK && n > 0) {
    q->send =
        (unsigned char *)PER_MALLOC((size_t)n * PERI_MPI_UREC, m->alloc_ctx);
    if (!q->send) s = PER_ERR_NOMEM;
  }
  return s;
}

/* Room for the records the other ranks announced (w->got), agreed: a
   rank without it must not be sent to. */
static int peri_mpi_update_room(per_mpi *m, peri_mpi_route *q) {
  peri_mpi_work *w = (peri_mpi_work *)m->work;
  void *ctx = m->alloc_ctx;
  int s = PER_OK, r;
  for (r = 0; r < m->world; ++r) w->rcount[r] = w->got[2 * r + 1];
  q->nrecv = (uint32_t)peri_mpi_displs(w->rcount, w->rdisp, m->world);
  if (q->nrecv > 0) {
    q->recv =
        (unsigned char *)PER_MALLOC((size_t)q->nrecv * PERI_MPI_UREC, ctx);
    q->rid = (uint64_t *)PER_MALLOC((size_t)q->nrecv * sizeof *q->rid, ctx);
    q->rtd = (float *)PER_MALLOC((size_t)q->nrecv * sizeof *q->rtd, ctx);
    if (!q->recv || !q->rid || !q->rtd) s = PER_ERR_NOMEM;
  }
  return peri_mpi_any_error(m->comm, s);
}

/* The records to their owners: a stable counting sort by owner, then one
   alltoallv; the received ones into rid and rtd. */
static void peri_mpi_update_route(per_mpi *m, const per_mpi_id *ids,
                                  const float *td, uint32_t n,
                                  peri_mpi_route *q) {
  peri_mpi_work *w = (peri_mpi_work *)m->work;
  MPI_Datatype dt;
  uint32_t j;
  int r;
  peri_mpi_displs(w->scount, w->sdisp, m->world);
  for (r = 0; r < m->world; ++r) w->scount[r] = 0;
  for (j = 0; j < n; ++j) {
    int o = (int)ids[j].rank;
    unsigned char *p =
        q->send + (size_t)(w->sdisp[o] + w->scount[o]++) * PERI_MPI_UREC;
    memcpy(p, &ids[j].id, 8);
    memcpy(p + 8, &td[j], 4);
  }
  MPI_Type_contiguous(PERI_MPI_UREC, MPI_BYTE, &dt);
  MPI_Type_commit(&dt);
  MPI_Alltoallv(q->send, w->scount, w->sdisp, dt, q->recv, w->rcount, w->rdisp,
                dt, m->comm);
  MPI_Type_free(&dt);
  for (j = 0; j < q->nrecv; ++j) {
    memcpy(&q->rid[j], q->recv + (size_t)j * PERI_MPI_UREC, 8);
    memcpy(&q->rtd[j], q->recv + (size_t)j * PERI_MPI_UREC + 8, 4);
  }
}

/* Each owner checks its part; the statuses, stale counts and new max
   leaves are agreed in one exchange; then every owner applies its part
   and takes the largest max_leaf of all, as one buffer's would be. */
static int peri_mpi_update_apply(per_mpi *m, const peri_mpi_route *q,
                                 uint32_t *stale) {
  peri_mpi_work *w = (peri_mpi_work *)m->work;
  per_buffer *b = &m->shard;
  peri_mpi_agree a;
  uint64_t nstale = 0;
  uint32_t st = 0;
  per_real mx = b->max_leaf;
  int s, r;
  memset(&a, 0, sizeof a);
  a.status =
      (int)per_buffer_update_check(b, q->rid, q->rtd, q->nrecv, &st, &mx);
  a.stale = st;
  a.max_leaf = (double)mx;
  MPI_Allgather(&a, (int)sizeof a, MPI_BYTE, w->agree, (int)sizeof a, MPI_BYTE,
                m->comm);
  s = peri_mpi_first_error(&w->agree[0].status, sizeof *w->agree, m->world);
  if (s != PER_OK) return s;
  for (r = 0; r < m->world; ++r) {
    nstale += w->agree[r].stale;
    if ((per_real)w->agree[r].max_leaf > mx)
      mx = (per_real)w->agree[r].max_leaf;
  }
  /* checked: PER_OK; mx is a leaf some owner's check found, or b's */
  s = (int)per_buffer_update(b, q->rid, q->rtd, q->nrecv, NULL);
  if (s == PER_OK) s = (int)per_buffer_raise_max_leaf(b, mx);
  if (stale) *stale = nstale > UINT32_MAX ? UINT32_MAX : (uint32_t)nstale;
  return s;
}

PERDEF per_status per_mpi_update(per_mpi *m, const per_mpi_id *ids,
                                 const float *td, uint32_t n, uint32_t *stale) {
  peri_mpi_work *w;
  peri_mpi_route q;
  int s, r;
  if (!m || m->world == 0) return PER_ERR_NULL;
  w = (peri_mpi_work *)m->work;
  memset(&q, 0, sizeof q);
  s = peri_mpi_update_args(m, ids, td, n, &q);
  /* 1. every rank's status and what it sends to each, in one exchange */
  for (r = 0; r < m->world; ++r) {
    w->hdr[2 * r] = s;
    w->hdr[2 * r + 1] = s == PER_OK ? w->scount[r] : 0;
  }
  MPI_Alltoall(w->hdr, 2, MPI_INT32_T, w->got, 2, MPI_INT32_T, m->comm);
  s = peri_mpi_first_error(w->got, 2 * sizeof *w->got, m->world);
  /* 2. room to receive; 3. route; 4. check, agree and apply */
  if (s == PER_OK) s = peri_mpi_update_room(m, &q);
  if (s == PER_OK) {
    peri_mpi_update_route(m, ids, td, n, &q);
    s = peri_mpi_update_apply(m, &q, stale);
  }
  peri_mpi_route_free(&q, m->alloc_ctx);
  return (per_status)s;
}

#ifndef PER_NO_STDIO
/* >>ckpt: checkpoints (not with PER_NO_STDIO) */

/* The manifest, little-endian: the head, one record per saved rank, then
   the CRC-32C of everything before it (per_file_write). */
enum { PERI_MPI_MF_HEAD = 152, PERI_MPI_MF_REC = 40, PERI_MPI_MF_VERSION = 1 };
static const unsigned char peri_mpi_mf_magic[8] = {0x89, 'P', 'E', 'R',
                                                   'M',  'P', 'I', '\n'};

/* Head: 0 magic, 8 u32 version, 12 u32 0x01020304, 16 u32 world, 20 u32
   sizeof(per_real), 24 u32 item_size, 28 u32 0, 32 u64 save number, 40
   u64 step, 48 rng (u64 seed, u64 counter, 4 x u32 buf, u32 avail, u32
   0), 88 f64 max_leaf, 96 f64 alpha, beta0, beta1, eps, max_priority,
   136 u64 beta_steps, 144 u64 seed. Record: u64 file bytes, u64 added,
   u64 trajs, u32 CRC-32C of the file, u32 size, u32 capacity, u32 0.
   Written and read with per.h's peri_put32 / peri_get32 family. */

/* One saved rank's record, as the manifest holds it. */
typedef struct peri_mpi_rec {
  uint64_t bytes, added, trajs;
  uint32_t crc, size, capacity;
} peri_mpi_rec;

static peri_mpi_rec peri_mpi_mf_rec(const unsigned char *mf, uint32_t q) {
  const unsigned char *p = mf + PERI_MPI_MF_HEAD + (size_t)q * PERI_MPI_MF_REC;
  peri_mpi_rec r;
  r.bytes = peri_get64(p);
  r.added = peri_get64(p + 8);
  r.trajs = peri_get64(p + 16);
  r.crc = peri_get32(p + 24);
  r.size = peri_get32(p + 28);
  r.capacity = peri_get32(p + 32);
  return r;
}

/* The manifest's bytes for the shards' records rec[0..world) and rank
   0's shared state, from b, CRC not included (per_file_write adds it). */
static void peri_mpi_mf_build(unsigned char *mf, const per_buffer *b,
                              uint64_t save, const peri_mpi_rec *rec,
                              int world) {
  per_buffer_shared sh = per_buffer_shared_of(b);
  int q, i;
  memset(mf, 0, PERI_MPI_MF_HEAD + (size_t)world * PERI_MPI_MF_REC);
  memcpy(mf, peri_mpi_mf_magic, 8);
  peri_put32(mf + 8, PERI_MPI_MF_VERSION);
  peri_put32(mf + 12, 0x01020304u);
  peri_put32(mf + 16, (uint32_t)world);
  peri_put32(mf + 20, (uint32_t)sizeof(per_real));
  peri_put32(mf + 24, b->cfg.item_size);
  peri_put64(mf + 32, save);
  peri_put64(mf + 40, sh.step);
  peri_put64(mf + 48, sh.rng.seed);
  peri_put64(mf + 56, sh.rng.counter);
  for (i = 0; i < 4; ++i) peri_put32(mf + 64 + 4 * i, sh.rng.buf[i]);
  peri_put32(mf + 80, sh.rng.avail);
  peri_putf64(mf + 88, (double)sh.max_leaf);
  peri_putf64(mf + 96, sh.alpha);
  peri_putf64(mf + 104, sh.beta0);
  peri_putf64(mf + 112, sh.beta1);
  peri_putf64(mf + 120, sh.eps);
  peri_putf64(mf + 128, sh.max_priority);
  peri_put64(mf + 136, sh.beta_steps);
  peri_put64(mf + 144, sh.seed);
  for (q = 0; q < world; ++q) {
    unsigned char *p = mf + PERI_MPI_MF_HEAD + (size_t)q * PERI_MPI_MF_REC;
    peri_put64(p, rec[q].bytes);
    peri_put64(p + 8, rec[q].added);
    peri_put64(p + 16, rec[q].trajs);
    peri_put32(p + 24, rec[q].crc);
    peri_put32(p + 28, rec[q].size);
    peri_put32(p + 32, rec[q].capacity);
  }
}

/* Read and check the manifest at path into *mf (allocated; *len bytes,
   CRC included). Checks what needs no shard: magic, version, byte order,
   length, CRC, and every record (size <= capacity, counters). *absent
   (may be NULL): 1 when the status is PER_ERR_IO because path does not
   exist (ENOENT), else 0. */
static int peri_mpi_mf_read(const char *path, void *ctx, unsigned char **mf,
                            size_t *len, int *absent) {
  unsigned char head[PERI_MPI_MF_HEAD];
  FILE *f;
  size_t got, n;
  uint32_t world, q;
  int s = PER_OK;
  *mf = NULL;
  *len = 0;
  if (absent) *absent = 0;
  errno = 0;
  f = fopen(path, "rb");
  if (!f) {
    if (absent) *absent = errno == ENOENT;
    return PER_ERR_IO;
  }
  got = fread(head, 1, sizeof head, f);
  if (ferror(f)) s = PER_ERR_IO;
  else if (got == 0 || (got >= 8 && memcmp(head, peri_mpi_mf_magic, 8) != 0))
    s = PER_ERR_FORMAT;
  else if (got < sizeof head) s = PER_ERR_TRUNCATED;
  else if (peri_get32(head + 8) != PERI_MPI_MF_VERSION) s = PER_ERR_VERSION;
  else if (peri_get32(head + 12) != 0x01020304u) s = PER_ERR_FORMAT;
  world = s == PER_OK ? peri_get32(head + 16) : 0;
  if (s == PER_OK &&
      (world == 0 ||
       world > ((uint32_t)INT_MAX - PERI_MPI_MF_HEAD - 4) / PERI_MPI_MF_REC))
    s = PER_ERR_CORRUPT;
  n = PERI_MPI_MF_HEAD + (size_t)world * PERI_MPI_MF_REC + 4;
  if (s == PER_OK) {
    *mf = (unsigned char *)PER_MALLOC(n, ctx);
    if (!*mf) s = PER_ERR_NOMEM;
  }
  if (s == PER_OK) {
    memcpy(*mf, head, sizeof head);
    got = fread(*mf + sizeof head, 1, n - sizeof head, f);
    if (ferror(f)) s = PER_ERR_IO;
    else if (got < n - sizeof head) s = PER_ERR_TRUNCATED;
    else if (fgetc(f) != EOF) s = PER_ERR_CORRUPT; /* longer than it says */
    else if (per_crc32c(0, *mf, n - 4) != peri_get32(*mf + n - 4))
      s = PER_ERR_CHECKSUM;
  }
  fclose(f);
  for (q = 0; q < world && s == PER_OK; ++q) {
    peri_mpi_rec r = peri_mpi_mf_rec(*mf, q);
    if (r.capacity == 0 || r.size > r.capacity || r.added < r.size ||
        r.trajs > r.added)
      s = PER_ERR_CORRUPT;
  }
  if (s != PER_OK) {
    PER_FREE(*mf, ctx);
    *mf = NULL;
  } else {
    *len = n;
  }
  return s;
}

/* The shard file of rank q in save `save` under path: "path.save.q"
   (allocated; NULL when memory ran out). */
static char *peri_mpi_shard_name(const char *path, uint64_t save, uint32_t q,
                                 void *ctx) {
  size_t n = strlen(path) + 2 * 21 + 3;
  char *name = (char *)PER_MALLOC(n, ctx);
  if (name)
    snprintf(name, n, "%s.%llu.%lu", path, (unsigned long long)save,
             (unsigned long)q);
  return name;
}

/* A file's length and its last 4 bytes (a per file's CRC-32C). */
static int peri_mpi_file_tail(const char *name, uint64_t *bytes,
                              uint32_t *crc) {
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
    *crc = peri_get32(t);
  }
  fclose(f);
  return s;
}

/* Whether the file `name` is the one record r names (PER_ERR_CHECKSUM
   when it is another). */
static int peri_mpi_file_is(const char *name, const peri_mpi_rec *r) {
  uint64_t bytes = 0;
  uint32_t crc = 0;
  int s = peri_mpi_file_tail(name, &bytes, &crc);
  if (s == PER_OK && (bytes != r->bytes || crc != r->crc)) s = PER_ERR_CHECKSUM;
  return s;
}

/* What a rank tells the others after its part of a save or a load. */
enum { PERI_MPI_CK_WORDS = 8 };

/* The first error in rank order among words[r * PERI_MPI_CK_WORDS] (a
   status as int64). */
static int peri_mpi_ck_first(const uint64_t *all, int world) {
  int r;
  for (r = 0; r < world; ++r)
    if (all[(size_t)r * PERI_MPI_CK_WORDS] != 0)
      return (int)(int64_t)all[(size_t)r * PERI_MPI_CK_WORDS];
  return PER_OK;
}

/* Every rank's words[PERI_MPI_CK_WORDS] (status first) into all; the
   agreed status, with PER_ERR_ARG when the ranks' words[1] (the path's
   CRC) differ. */
static int peri_mpi_ck_gather(per_mpi *m, uint64_t *mine, uint64_t *all) {
  int r, s;
  MPI_Allgather(mine, PERI_MPI_CK_WORDS, MPI_UINT64_T, all, PERI_MPI_CK_WORDS,
                MPI_UINT64_T, m->comm);
  s = peri_mpi_ck_first(all, m->world);
  for (r = 1; r < m->world && s == PER_OK; ++r)
    if (all[(size_t)r * PERI_MPI_CK_WORDS + 1] != all[1]) s = PER_ERR_ARG;
  return s;
}

static uint64_t peri_mpi_path_crc(const char *path) {
  return path ? 1u + (uint64_t)per_crc32c(0, path, strlen(path)) : 0;
}

/* Remove the shard files of ranks q = rank, rank + world, ... below
   saved of save `save` under path (errors ignored: they are files no
   manifest names). */
static void peri_mpi_remove_save(const per_mpi *m, const char *path,
                                 uint64_t save, uint64_t saved) {
  uint64_t q;
  for (q = (uint64_t)m->rank; q < saved; q += (uint64_t)m->world) {
    char *name = peri_mpi_shard_name(path, save, (uint32_t)q, m->alloc_ctx);
    if (name) remove(name);
    PER_FREE(name, m->alloc_ctx);
  }
}

/* ---- save ----
   Phases: the checkpoint at path now (rank 0, peri_mpi_current) and
   every rank's status and path, agreed; every rank's shard file and its
   record, agreed (peri_mpi_save_shard); the manifest, the commit (rank 0,
   peri_mpi_commit), broadcast; then the files no manifest names. */

/* The save number and world size of the checkpoint at path now: PER_OK
   with both 0 only when path does not exist. Any other failure to read
   the manifest (PER_ERR_IO, NOMEM, a damaged file's status) is returned:
   then which files the checkpoint names is not known, and a save number
   taken blindly could be the live checkpoint's. */
static int peri_mpi_current(const char *path, void *ctx, uint64_t *save,
                            uint64_t *world) {
  unsigned char *mf = NULL;
  size_t len;
  int absent, s = peri_mpi_mf_read(path, ctx, &mf, &len, &absent);
  *save = 0;
  *world = 0;
  if (s != PER_OK) return absent ? PER_OK : s;
  *save = peri_get64(mf + 32);
  *world = peri_get32(mf + 16);
  PER_FREE(mf, ctx);
  return PER_OK;
}

/* This rank saves its shard to its file of save `save` (*name, allocated;
   *saved: whether the file may be there, even after an error: a failed
   directory sync comes after the rename) and fills its record words:
   status, the path's CRC, the file's length and CRC, added, trajs, size
   and capacity. */
static void peri_mpi_save_shard(per_mpi *m, const char *path, uint64_t save,
                                char **name, int *saved, uint64_t *mine) {
  const per_buffer *b = &m->shard;
  int s;
  memset(mine, 0, PERI_MPI_CK_WORDS * sizeof *mine);
  *name = peri_mpi_shard_name(path, save, (uint32_t)m->rank, m->alloc_ctx);
  s = *name ? (int)per_buffer_save(b, *name) : (int)PER_ERR_NOMEM;
  *saved = *name != NULL;
  if (s == PER_OK) {
    uint32_t crc = 0;
    s = peri_mpi_file_tail(*name, &mine[2], &crc);
    mine[3] = crc;
  }
  mine[0] = (uint64_t)(int64_t)s;
  mine[1] = peri_mpi_path_crc(path);
  mine[4] = b->added;
  mine[5] = b->trajs;
  mine[6] = per_buffer_size(b);
  mine[7] = b->cfg.capacity;
}

/* Rank 0 writes the manifest of save `save` from every rank's record
   words `all`: fin[0] its status; fin[1] 1 when the manifest at path is
   this save's (also when only the directory sync failed after the
   rename), 0 when it is not (the write failed before the rename), -1
   when that cannot be told (the write failed, then so did reading the
   manifest back). */
static void peri_mpi_commit(per_mpi *m, const char *path, uint64_t save,
                            const uint64_t *all, int64_t fin[2]) {
  void *ctx = m->alloc_ctx;
  size_t n = PERI_MPI_MF_HEAD + (size_t)m->world * PERI_MPI_MF_REC;
  peri_mpi_rec *rec =
      (peri_mpi_rec *)PER_MALLOC((size_t)m->world * sizeof *rec, ctx);
  unsigned char *mf = (unsigned char *)PER_MALLOC(n, ctx);
  int r;
  fin[0] = rec && mf ? PER_OK : PER_ERR_NOMEM;
  if (fin[0] == PER_OK) {
    for (r = 0; r < m->world; ++r) {
      const uint64_t *w = all + (size_t)r * PERI_MPI_CK_WORDS;
      rec[r].bytes = w[2];
      rec[r].crc = (uint32_t)w[3];
      rec[r].added = w[4];
      rec[r].trajs = w[5];
      rec[r].size = (uint32_t)w[6];
      rec[r].capacity = (uint32_t)w[7];
    }
    peri_mpi_mf_build(mf, &m->shard, save, rec, m->world);
    fin[0] = per_file_write(mf, n, path, ctx);
  }
  PER_FREE(rec, ctx);
  PER_FREE(mf, ctx);
  if (fin[0] == PER_OK) {
    fin[1] = 1;
  } else { /* the rename may have happened: what the manifest says now */
    uint64_t now, world;
    if (peri_mpi_current(path, ctx, &now, &world) != PER_OK) fin[1] = -1;
    else fin[1] = now == save;
  }
}

PERDEF per_status per_mpi_save(per_mpi *m, const char *path) {
  uint64_t mine[PERI_MPI_CK_WORDS], *all = NULL, save, old_save = 0,
                                    old_world = 0;
  char *name = NULL;
  int s = PER_OK, saved = 0;
  int64_t fin[2] = {PER_OK, 0};
  void *ctx;
  if (!m || m->world == 0) return PER_ERR_NULL;
  ctx = m->alloc_ctx;
  memset(mine, 0, sizeof mine);
  all = (uint64_t *)PER_MALLOC((size_t)m->world * sizeof mine, ctx);
  if (!path) s = PER_ERR_NULL;
  else if (!all) s = PER_ERR_NOMEM;
  if (s == PER_OK && m->rank == 0)
    s = peri_mpi_current(path, ctx, &old_save, &old_world);
  /* 1. every rank's status and path; rank 0's numbers */
  mine[0] = (uint64_t)(int64_t)s;
  mine[1] = peri_mpi_path_crc(path);
  mine[2] = old_save;
  mine[3] = old_world;
  if (peri_mpi_any_error(m->comm, all ? PER_OK : PER_ERR_NOMEM) != PER_OK) {
    PER_FREE(all, ctx);
    return PER_ERR_NOMEM; /* no rank can hear the others */
  }
  s = peri_mpi_ck_gather(m, mine, all);
  if (s != PER_OK) goto done;
  old_save = all[2];
  old_world = all[3];
  save = old_save + 1;
  /* 2. every rank saves its shard; the files' records are agreed */
  peri_mpi_save_shard(m, path, save, &name, &saved, mine);
  s = peri_mpi_ck_gather(m, mine, all);
  /* 3. rank 0 writes the manifest: the commit */
  if (s == PER_OK && m->rank == 0) peri_mpi_commit(m, path, save, all, fin);
  if (s == PER_OK) {
    MPI_Bcast(fin, 2, MPI_INT64_T, 0, m->comm);
    s = (int)fin[0];
  }
  /* 4. the files no manifest names any more: the old save's once the
     new manifest is durable; this save's when it is certain that the
     manifest does not name them. Anything else is kept: after a failed
     directory sync the old manifest may come back, and after a failed
     write that cannot be read back the new one may be in place. */
  if (fin[1] == 1 && fin[0] == PER_OK) {
    if (old_save != 0 && old_save != save)
      peri_mpi_remove_save(m, path, old_save, old_world);
  } else if (fin[1] == 0 && saved) {
    remove(name);
  }
done:
  PER_FREE(name, ctx);
  PER_FREE(all, ctx);
  return (per_status)s;
}

/* ---- load ----
   Phases: the manifest from rank 0 to every rank, room and path agreed
   (peri_mpi_mf_share); every rank's staged shard, agreed
   (peri_mpi_stage); a re-shard's count of what no rank holds, checked
   alike by every rank and counted by rank 0 (peri_mpi_evicted); then the
   staged shards replace the old ones. */

/* Rank 0 reads the manifest at path and every rank gets it (*mf, *len
   bytes), with the record words' memory *all; the status agreed first:
   rank 0's reading, whether every rank has room, and the same path. */
static int peri_mpi_mf_share(per_mpi *m, const char *path, unsigned char **mf,
                             size_t *len, uint64_t **all) {
  int64_t hdr[2] = {PER_OK, 0}, v[4], top[4];
  void *ctx = m->alloc_ctx;
  int s;
  if (m->rank == 0) {
    hdr[0] = path ? peri_mpi_mf_read(path, ctx, mf, len, NULL) : PER_ERR_NULL;
    hdr[1] = (int64_t)*len;
  }
  MPI_Bcast(hdr, 2, MPI_INT64_T, 0, m->comm);
  s = (int)hdr[0];
  if (s == PER_OK && m->rank != 0) {
    *len = (size_t)hdr[1];
    *mf = (unsigned char *)PER_MALLOC(*len, ctx);
  }
  *all = (uint64_t *)PER_MALLOC(
      (size_t)m->world * PERI_MPI_CK_WORDS * sizeof **all, ctx);
  /* whether every rank has room, and the same path */
  v[0] = *all && (s != PER_OK || *mf) ? PER_OK : PER_ERR_NOMEM;
  v[1] = !path;
  v[2] = (int64_t)peri_mpi_path_crc(path);
  v[3] = -v[2];
  MPI_Allreduce(v, top, 4, MPI_INT64_T, MPI_MAX, m->comm);
  if (top[0] != PER_OK) s = PER_ERR_NOMEM;
  else if (s == PER_OK && top[1]) s = PER_ERR_NULL;
  else if (s == PER_OK && top[2] != -top[3]) s = PER_ERR_ARG;
  if (s == PER_OK) MPI_Bcast(*mf, (int)*len, MPI_BYTE, 0, m->comm);
  return s;
}

/* At the saved world size: this rank's own file, checked against its
   record, loaded whole. */
static int peri_mpi_stage_own(const per_mpi *m, const char *path,
                              const unsigned char *mf, per_buffer *st) {
  peri_mpi_rec r = peri_mpi_mf_rec(mf, (uint32_t)m->rank);
  char *name = peri_mpi_shard_name(path, peri_get64(mf + 32), (uint32_t)m->rank,
                                   m->alloc_ctx);
  int s;
  if (!name) return PER_ERR_NOMEM;
  s = peri_mpi_file_is(name, &r);
  if (s == PER_OK) s = (int)per_buffer_load(st, name);
  PER_FREE(name, m->alloc_ctx);
  return s;
}

/* At another world size: this rank's block of the S saved items, in
   order (sizes per + 1 first), appended from every file it spans. */
static int peri_mpi_stage_block(const per_mpi *m, const char *path,
                                const unsigned char *mf, per_buffer *st) {
  uint32_t sw = peri_get32(mf + 16), q;
  uint64_t save = peri_get64(mf + 32), S = 0, lo, hi, start = 0, per, rem;
  uint64_t rank = (uint64_t)m->rank, world = (uint64_t)m->world;
  int s = PER_OK;
  for (q = 0; q < sw; ++q) S += peri_mpi_mf_rec(mf, q).size;
  per = S / world;
  rem = S % world;
  lo = per * rank + (rank < rem ? rank : rem);
  hi = lo + per + (rank < rem);
  if (hi - lo > st->cfg.capacity) return PER_ERR_MISMATCH;
  for (q = 0; q < sw && s == PER_OK; ++q) {
    peri_mpi_rec r = peri_mpi_mf_rec(mf, q);
    uint64_t a = lo > start ? lo : start, e = start + r.size;
    if (hi < e) e = hi;
    if (a < e) { /* file q holds [a, e) of the block */
      char *name = peri_mpi_shard_name(path, save, q, m->alloc_ctx);
      if (!name) return PER_ERR_NOMEM;
      s = peri_mpi_file_is(name, &r);
      if (s == PER_OK)
        s = (int)per_buffer_load_append(st, name, (uint32_t)(a - start),
                                        (uint32_t)(e - a));
      PER_FREE(name, m->alloc_ctx);
    }
    start += r.size;
  }
  return s;
}

/* What the ranks share, as the manifest saved it, into st (the block's
   leaves must not exceed its max_leaf): PER_ERR_CORRUPT when it cannot
   be a buffer's. */
static int peri_mpi_restore(per_buffer *st, const unsigned char *mf) {
  per_buffer_shared sh = per_buffer_shared_of(st);
  int i;
  sh.step = peri_get64(mf + 40);
  sh.rng.seed = peri_get64(mf + 48);
  sh.rng.counter = peri_get64(mf + 56);
  for (i = 0; i < 4; ++i) sh.rng.buf[i] = peri_get32(mf + 64 + 4 * i);
  sh.rng.avail = peri_get32(mf + 80);
  sh.alpha = peri_getf64(mf + 96);
  sh.beta0 = peri_getf64(mf + 104);
  sh.beta1 = peri_getf64(mf + 112);
  sh.eps = peri_getf64(mf + 120);
  sh.max_priority = peri_getf64(mf + 128);
  sh.beta_steps = peri_get64(mf + 136);
  sh.seed = peri_get64(mf + 144);
  if (sh.alpha != 0) sh.max_leaf = (per_real)peri_getf64(mf + 88);
  return per_buffer_set_shared(st, &sh) == PER_OK ? PER_OK : PER_ERR_CORRUPT;
}

/* Stage this rank's part of a load into st (initialised by the caller
   with the shard's config): its own file at the same world size, else
   its block of the saved items with the shared state of the manifest. */
static int peri_mpi_stage(const per_mpi *m, const char *path,
                          const unsigned char *mf, per_buffer *st) {
  int s;
  if (peri_get32(mf + 20) != sizeof(per_real) ||
      peri_get32(mf + 24) != st->cfg.item_size ||
      (peri_getf64(mf + 96) == 0) != (st->cfg.alpha == 0))
    return PER_ERR_MISMATCH;
  if (peri_get32(mf + 16) == (uint32_t)m->world)
    return peri_mpi_stage_own(m, path, mf, st);
  s = peri_mpi_stage_block(m, path, mf, st);
  if (s == PER_OK) s = peri_mpi_restore(st, mf);
  return s;
}

/* A re-shard's count of the saved replay's items and trajectories that
   no rank holds now, alike on every rank from the manifest and every
   rank's trajectories held (the record words' all[r * WORDS + 2]): the
   saved sums of added less the items, and of trajs less those held.
   PER_ERR_CORRUPT when the manifest's counters cannot be its files'
   (a sum past 2^64 - 1, more trajectories than items left out). */
static int peri_mpi_evicted(const unsigned char *mf, const uint64_t *all,
                            int world, uint64_t *items, uint64_t *trajs) {
  uint64_t added = 0, tr = 0, S = 0, held = 0, top = ~(uint64_t)0;
  uint32_t q, sw = peri_get32(mf + 16);
  int r;
  for (q = 0; q < sw; ++q) {
    peri_mpi_rec rc = peri_mpi_mf_rec(mf, q);
    if (rc.added > top - added || rc.trajs > top - tr) return PER_ERR_CORRUPT;
    added += rc.added;
    tr += rc.trajs;
    S += rc.size;
  }
  for (r = 0; r < world; ++r) held += all[(size_t)r * PERI_MPI_CK_WORDS + 2];
  *items = added - S; /* every record's added >= its size */
  *trajs = tr > held ? tr - held : 0;
  return *trajs > *items ? PER_ERR_CORRUPT : PER_OK;
}

PERDEF per_status per_mpi_load(per_mpi *m, const char *path) {
  uint64_t mine[PERI_MPI_CK_WORDS], *all = NULL, items = 0, trajs = 0;
  unsigned char *mf = NULL;
  size_t len = 0;
  int s, reshard = 0;
  per_buffer st;
  if (!m || m->world == 0) return PER_ERR_NULL;
  memset(&st, 0, sizeof st);
  memset(mine, 0, sizeof mine);
  /* 1. rank 0 reads the manifest; every rank gets it */
  s = peri_mpi_mf_share(m, path, &mf, &len, &all);
  if (s != PER_OK) goto done;
  /* 2. every rank stages its part; the statuses are agreed */
  s = (int)per_buffer_init(&st, &m->shard.cfg, m->alloc_ctx);
  if (s == PER_OK) s = peri_mpi_stage(m, path, mf, &st);
  mine[0] = (uint64_t)(int64_t)s;
  mine[1] = peri_mpi_path_crc(path);
  mine[2] = st.trajs;
  s = peri_mpi_ck_gather(m, mine, all);
  /* 3. a re-shard: rank 0 also counts what no rank holds (checked by
     every rank alike, so that the count cannot fail) */
  reshard = peri_get32(mf + 16) != (uint32_t)m->world;
  if (s == PER_OK && reshard)
    s = peri_mpi_evicted(mf, all, m->world, &items, &trajs);
  if (s == PER_OK && reshard && m->rank == 0)
    s = (int)per_buffer_count_evicted(&st, items, trajs);
  if (s != PER_OK) goto done;
  /* 4. the staged shard replaces the old one */
  per_buffer_free(&m->shard);
  m->shard = st;
  memset(&st, 0, sizeof st);
done:
  per_buffer_free(&st);
  PER_FREE(mf, m->alloc_ctx);
  PER_FREE(all, m->alloc_ctx);
  return (per_status)s;
}
#endif /* PER_NO_STDIO */

/* >>feed
   A message: n (u32), flags (u32: PERI_MPI_FEED_ENDS, _TD, _CLOSE), the n
   items, then their n float TD errors (at the next multiple of 4 bytes)
   and their n ends, each when flagged; the architecture's byte order (as
   the records of a sample). One tag for
   every message, so that a sender's end marker never overtakes its data
   (MPI keeps the order of one sender's messages of one tag). */
#define PERI_MPI_FEED_TAG 0x7065
#define PERI_MPI_FEED_HEAD 8
#define PERI_MPI_FEED_ENDS 1u
#define PERI_MPI_FEED_TD 2u
#define PERI_MPI_FEED_CLOSE 4u

typedef struct peri_mpi_feed_work {
  size_t msg;          /* bytes of one message buffer */
  unsigned char *sbuf; /* sender: slots buffers */
  MPI_Request *sreq;   /* sender: slots requests (MPI_REQUEST_NULL: free) */
  uint32_t snext;      /* sender: the slot the next send takes */
  int closed;          /* sender: closed */
  unsigned char *rbuf; /* receiver: one buffer per sender */
  MPI_Request *rreq;   /* receiver: one posted receive per open sender */
  int *src;            /* receiver: the senders' ranks, ascending */
  uint8_t *ended;      /* receiver: per sender, its end marker applied */
  int rnext;           /* receiver: the sender whose turn is next */
} peri_mpi_feed_work;

static void peri_mpi_feed_work_free(peri_mpi_feed_work *w, void *ctx) {
  if (!w) return;
  PER_FREE(w->sbuf, ctx);
  PER_FREE(w->sreq, ctx);
  PER_FREE(w->rbuf, ctx);
  PER_FREE(w->rreq, ctx);
  PER_FREE(w->src, ctx);
  PER_FREE(w->ended, ctx);
  PER_FREE(w, ctx);
}

PERDEF per_status per_mpi_feed_init(per_mpi_feed *f, MPI_Comm comm, int dest,
                                    uint32_t item_size, uint32_t max_items,
                                    uint32_t slots, void *alloc_ctx) {
  int rank, world, r, s = PER_OK, k;
  int *all = NULL;
  uint32_t mine[2], *other = NULL;
  peri_mpi_feed_work *w = NULL;
  size_t msg = 0;
  if (!f) return PER_ERR_NULL;
  memset(f, 0, sizeof *f);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  if (dest != PER_MPI_FEED_NONE && (dest < 0 || dest >= world || dest == rank))
    s = PER_ERR_ARG;
  if (item_size == 0 || max_items == 0 || slots == 0) s = PER_ERR_ARG;
  if (s == PER_OK) {
    /* the head, the items, 3 bytes of padding, the TD errors and ends,
       rounded up to 8 bytes: every buffer starts 8-aligned */
    double bytes =
        PERI_MPI_FEED_HEAD + (double)max_items * (item_size + 5.0) + 10;
    if (bytes > (double)INT_MAX) s = PER_ERR_ARG;
    else msg = (size_t)bytes & ~(size_t)7;
  }
  all = (int *)PER_MALLOC((size_t)world * 2 * sizeof *all, alloc_ctx);
  other = (uint32_t *)PER_MALLOC((size_t)world * 2 * sizeof *other, alloc_ctx);
  if (!all || !other) { /* the exchange needs them: give up on every rank */
    int bad = 1, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm);
    PER_FREE(all, alloc_ctx);
    PER_FREE(other, alloc_ctx);
    return PER_ERR_NOMEM;
  } else {
    int bad = 0, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm);
    if (any) {
      PER_FREE(all, alloc_ctx);
      PER_FREE(other, alloc_ctx);
      return PER_ERR_NOMEM;
    }
  }
  /* every rank's dest and status, and item_size and max_items alike */
  {
    int pair[2];
    pair[0] = dest;
    pair[1] = s;
    MPI_Allgather(pair, 2, MPI_INT, all, 2, MPI_INT, comm);
  }
  mine[0] = item_size;
  mine[1] = max_items;
  MPI_Allgather(mine, 2, MPI_UINT32_T, other, 2, MPI_UINT32_T, comm);
  s = PER_OK;
  for (r = 0; r < world && s == PER_OK; ++r) {
    if (all[2 * r + 1] != PER_OK) s = all[2 * r + 1];
    else if (other[2 * r] != other[0] || other[2 * r + 1] != other[1])
      s = PER_ERR_ARG;
  }
  if (s == PER_OK) {
    w = (peri_mpi_feed_work *)PER_MALLOC(sizeof *w, alloc_ctx);
    if (w) {
      memset(w, 0, sizeof *w);
      w->msg = msg;
      for (r = 0; r < world; ++r) f->nsrc += all[2 * r] == rank;
      if (dest != PER_MPI_FEED_NONE) {
        w->sbuf = (unsigned char *)PER_MALLOC((size_t)slots * msg, alloc_ctx);
        w->sreq = (MPI_Request *)PER_MALLOC((size_t)slots * sizeof *w->sreq,
                                            alloc_ctx);
        if (!w->sbuf || !w->sreq) s = PER_ERR_NOMEM;
      }
      if (s == PER_OK && f->nsrc > 0) {
        size_t n = (size_t)f->nsrc;
        w->rbuf = (unsigned char *)PER_MALLOC(n * msg, alloc_ctx);
        w->rreq = (MPI_Request *)PER_MALLOC(n * sizeof *w->rreq, alloc_ctx);
        w->src = (int *)PER_MALLOC(n * sizeof *w->src, alloc_ctx);
        w->ended = (uint8_t *)PER_MALLOC(n, alloc_ctx);
        if (!w->rbuf || !w->rreq || !w->src || !w->ended) s = PER_ERR_NOMEM;
      }
    } else {
      s = PER_ERR_NOMEM;
    }
  }
  /* agree on the allocations */
  {
    int any = 0;
    MPI_Allreduce(&s, &any, 1, MPI_INT, MPI_MAX, comm);
    if (s == PER_OK && any != PER_OK) s = any;
  }
  PER_FREE(other, alloc_ctx);
  if (s != PER_OK) {
    PER_FREE(all, alloc_ctx);
    peri_mpi_feed_work_free(w, alloc_ctx);
    memset(f, 0, sizeof *f);
    return (per_status)s;
  }
  MPI_Comm_dup(comm, &f->comm);
  f->rank = rank;
  f->world = world;
  f->dest = dest;
  f->item_size = item_size;
  f->max_items = max_items;
  f->slots = slots;
  f->alloc_ctx = alloc_ctx;
  f->work = w;
  if (w->sreq)
    for (k = 0; k < (int)slots; ++k) w->sreq[k] = MPI_REQUEST_NULL;
  for (r = 0, k = 0; r < world; ++r)
    if (all[2 * r] == rank) {
      w->src[k] = r;
      w->ended[k] = 0;
      MPI_Irecv(w->rbuf + (size_t)k * msg, (int)msg, MPI_BYTE, r,
                PERI_MPI_FEED_TAG, f->comm, &w->rreq[k]);
      ++k;
    }
  PER_FREE(all, alloc_ctx);
  return PER_OK;
}

/* A slot to fill: the next in turn, once its send completed. */
static unsigned char *peri_mpi_feed_slot(per_mpi_feed *f, MPI_Request **req) {
  peri_mpi_feed_work *w = (peri_mpi_feed_work *)f->work;
  uint32_t k = w->snext;
  if (w->sreq[k] != MPI_REQUEST_NULL) {
    int done = 0;
    MPI_Test(&w->sreq[k], &done, MPI_STATUS_IGNORE);
    if (!done) {
      ++f->waits;
      MPI_Wait(&w->sreq[k], MPI_STATUS_IGNORE);
    }
  }
  w->snext = (k + 1) % f->slots;
  *req = &w->sreq[k];
  return w->sbuf + (size_t)k * w->msg;
}

PERDEF per_status per_mpi_feed_send(per_mpi_feed *f, const void *items,
                                    uint32_t n, const uint8_t *ends,
                                    const float *td) {
  peri_mpi_feed_work *w;
  unsigned char *q;
  MPI_Request *req;
  uint32_t head[2];
  size_t at;
  if (!f || !f->work || !items) return PER_ERR_NULL;
  w = (peri_mpi_feed_work *)f->work;
  if (f->dest == PER_MPI_FEED_NONE || w->closed || n == 0 || n > f->max_items)
    return PER_ERR_ARG;
  q = peri_mpi_feed_slot(f, &req);
  head[0] = n;
  head[1] = (ends ? PERI_MPI_FEED_ENDS : 0u) | (td ? PERI_MPI_FEED_TD : 0u);
  memcpy(q, head, sizeof head);
  at = PERI_MPI_FEED_HEAD;
  memcpy(q + at, items, (size_t)n * f->item_size);
  at = (at + (size_t)n * f->item_size + 3) & ~(size_t)3;
  if (td) {
    memcpy(q + at, td, (size_t)n * sizeof *td);
    at += (size_t)n * sizeof *td;
  }
  if (ends) {
    memcpy(q + at, ends, n);
    at += n;
  }
  MPI_Isend(q, (int)at, MPI_BYTE, f->dest, PERI_MPI_FEED_TAG, f->comm, req);
  ++f->msgs;
  f->items += n;
  return PER_OK;
}

PERDEF per_status per_mpi_feed_close(per_mpi_feed *f) {
  peri_mpi_feed_work *w;
  uint32_t head[2], k;
  if (!f || !f->work) return PER_ERR_NULL;
  w = (peri_mpi_feed_work *)f->work;
  if (f->dest == PER_MPI_FEED_NONE) return PER_ERR_ARG;
  if (w->closed) return PER_OK;
  for (k = 0; k < f->slots; ++k) MPI_Wait(&w->sreq[k], MPI_STATUS_IGNORE);
  head[0] = 0;
  head[1] = PERI_MPI_FEED_CLOSE;
  memcpy(w->sbuf, head, sizeof head);
  MPI_Send(w->sbuf, PERI_MPI_FEED_HEAD, MPI_BYTE, f->dest, PERI_MPI_FEED_TAG,
           f->comm);
  w->closed = 1;
  return PER_OK;
}

/* Sender k's message, arrived: applied to shard (NULL: dropped, by
   per_mpi_feed_free), its receive posted again unless it was the end
   marker. 1 for a data message, 0 for the marker. */
static int peri_mpi_feed_apply(per_mpi_feed *f, int k, per_buffer *shard,
                               uint64_t *items) {
  peri_mpi_feed_work *w = (peri_mpi_feed_work *)f->work;
  const unsigned char *q = w->rbuf + (size_t)k * w->msg;
  uint32_t head[2], n;
  const uint8_t *ends = NULL;
  const float *td = NULL;
  size_t at = PERI_MPI_FEED_HEAD;
  per_status s;
  memcpy(head, q, sizeof head);
  if (head[1] & PERI_MPI_FEED_CLOSE) {
    w->ended[k] = 1;
    w->rreq[k] = MPI_REQUEST_NULL;
    return 0;
  }
  n = head[0];
  at = (at + (size_t)n * f->item_size + 3) & ~(size_t)3;
  if (head[1] & PERI_MPI_FEED_TD) {
    td = (const float *)(const void *)(q + at); /* 4-aligned: malloc'd */
    at += (size_t)n * sizeof *td;
  }
  if (head[1] & PERI_MPI_FEED_ENDS) ends = q + at;
  if (shard) {
    s = td ? per_buffer_add_td(shard, q + PERI_MPI_FEED_HEAD, n, ends, td)
           : per_buffer_add_steps(shard, q + PERI_MPI_FEED_HEAD, n, ends);
    if (s == PER_OK) {
      ++f->msgs;
      f->items += n;
      if (items) *items += n;
    } else {
      ++f->rejected;
      memcpy(f->error, shard->error, sizeof f->error);
    }
  }
  MPI_Irecv(w->rbuf + (size_t)k * w->msg, (int)w->msg, MPI_BYTE, w->src[k],
            PERI_MPI_FEED_TAG, f->comm, &w->rreq[k]);
  return 1;
}

PERDEF per_status per_mpi_feed_drain(per_mpi_feed *f, per_buffer *shard,
                                     uint32_t max_msgs, uint32_t flags,
                                     uint64_t *items) {
  peri_mpi_feed_work *w;
  uint32_t got = 0;
  int idle = 0;
  if (!f || !f->work || !shard) return PER_ERR_NULL;
  w = (peri_mpi_feed_work *)f->work;
  if ((flags & ~PER_MPI_FEED_ORDERED) != 0 ||
      shard->cfg.item_size != f->item_size)
    return PER_ERR_ARG;
  /* one message per sender in turn: ordered, each waited for; else
     taken when there, until a whole round finds nothing */
  while (got < max_msgs && f->nsrc > 0 && idle < f->nsrc) {
    int k = w->rnext, done = 1;
    w->rnext = (k + 1) % f->nsrc;
    if (w->ended[k]) {
      ++idle;
      continue;
    }
    if (flags & PER_MPI_FEED_ORDERED) MPI_Wait(&w->rreq[k], MPI_STATUS_IGNORE);
    else MPI_Test(&w->rreq[k], &done, MPI_STATUS_IGNORE);
    if (!done) {
      ++idle;
      continue;
    }
    if (peri_mpi_feed_apply(f, k, shard, items)) { /* an end marker: not one */
      ++got;
      idle = 0;
    }
  }
  return PER_OK;
}

PERDEF int per_mpi_feed_done(const per_mpi_feed *f) {
  const peri_mpi_feed_work *w;
  int k;
  if (!f || !f->work) return 1;
  w = (const peri_mpi_feed_work *)f->work;
  for (k = 0; k < f->nsrc; ++k)
    if (!w->ended[k]) return 0;
  return 1;
}

PERDEF void per_mpi_feed_free(per_mpi_feed *f) {
  peri_mpi_feed_work *w;
  int k;
  if (!f || !f->work) {
    if (f) memset(f, 0, sizeof *f);
    return;
  }
  w = (peri_mpi_feed_work *)f->work;
  if (f->dest != PER_MPI_FEED_NONE) per_mpi_feed_close(f);
  /* every sender's messages are received, up to its end marker, and
     dropped: none is left unmatched */
  for (k = 0; k < f->nsrc; ++k)
    while (!w->ended[k]) {
      MPI_Wait(&w->rreq[k], MPI_STATUS_IGNORE);
      peri_mpi_feed_apply(f, k, NULL, NULL);
    }
  MPI_Comm_free(&f->comm);
  peri_mpi_feed_work_free(w, f->alloc_ctx);
  memset(f, 0, sizeof *f);
}

#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic pop
#endif

#endif /* PER_MPI_IMPLEMENTATION_INCLUDED */
#endif /* PER_MPI_IMPLEMENTATION */
