/* per_store.h - the trajectory store, a companion of per.h: a prioritized
   replay whose samples live in files on disk, in trajectories, while
   their priorities and places stay in memory; checkpoints that cost the
   index, not the data.
   (no warranty; LICENSE: see the end of per.h)

   Do this, in *one* C or C++ file:
      #define _POSIX_C_SOURCE 200809L   (before any #include; or
                                         _GNU_SOURCE, or -std=gnu99)
      #define PER_IMPLEMENTATION
      #include "per.h"
      #define PER_STORE_IMPLEMENTATION
      #include "per_store.h"
   and link with -pthread. The implementation is compiled in the file
   that compiles per.h's: it loads its sampling state through per.h's
   checkpoint stages (per.h's >>seam). Every other file includes
   per_store.h alone; it includes per.h. POSIX only (files, pread,
   fsync, rename, link, threads); not with PER_NO_STDIO. PER_STATIC,
   PER_MALLOC/PER_FREE and PER_REAL are per.h's options and mean here
   what they mean there.

   CONTENTS
      Declarations ....... per_store_config, per_store_*            >>api
      Implementation: files, ring, writer, sample, checkpoint ..... >>store
      (grep for the >>markers)

   WHAT IT IS
      Seed 002's replay (RLinf's TrajectoryReplayBuffer) in C: rollouts
      of T steps of B environments arrive as trajectories of T * B
      samples (sample t * B + b: step t of environment b), each sample
      item_size bytes. A store keeps:
      - in memory, a per_buffer whose item is a sample's place in its
        trajectory: every priority, IS weight, window, the beta schedule
        and the rng are per_buffer's, so a store draws exactly the ids
        and weights a per_buffer of the same config holding the same
        samples draws (tested bit for bit), and evicts as it does: the
        oldest samples first, a trajectory once none of its samples is
        stored (eviction by bytes is eviction by samples: every sample
        has item_size bytes);
      - on disk, under one directory, segment files to which each
        trajectory is appended once, contiguously, with its episode ends
        and a CRC-32C; a segment file is never rewritten below the
        length a checkpoint recorded, and is deleted once none of its
        trajectories is stored and no checkpoint names it;
      - in memory too, a ring of cache_bytes + staging_bytes that holds
        the newest trajectories: an add copies the trajectory there and
        returns (sampleable at once), a writer appends it to the open
        segment later; a written trajectory stays until the ring needs
        its room (a FIFO cache of the newest). A batch reads the samples
        it needs of the other trajectories with pread, in file order,
        contiguous samples in one read.
      A checkpoint writes the remaining staged trajectories, fsyncs the
      segments written since the last one and then commits the index:
      one record appended to the directory's index.log and fsynced, with
      what changed since the last checkpoint (the trajectories added and
      dropped, the slots added or updated: about 21 bytes a slot, 64 a
      trajectory); once the log is as long as index.bin, index.bin is
      written whole instead (a new file, fsync, rename) and a new log
      begins. Its cost is what changed and the unwritten tail, never
      the data nor, amortised, the whole index. Beside them
      trajectory_index.json and metadata.json say the same for tools and
      people (seed 002's fields; the first edited in place). A load
      checks index.bin against the segments (every trajectory's header,
      length and CRC) before the store changes; by rank and world size it
      takes trajectories rank, rank + world, ... with the global counters.

   THREADS
      One thread (the caller's) calls every function but the writer's;
      per_store_run_writer runs on a thread of the caller's own (the
      library starts none) until per_store_stop_writer, appending what is
      staged as it comes. Without a writer thread, an add that finds the
      staging area full writes the oldest staged trajectories itself,
      and per_store_write writes what is staged on demand. The writer
      allocates too (a new segment file's name): PER_MALLOC and PER_FREE
      must be safe from two threads, as malloc and free are.

   ERRORS
      Every function that can fail returns a per_status; on error the
      store holds every trajectory it held (nothing stored is lost, also
      on ENOSPC or EIO), its sampling state is as before the call, and
      s->error says what was refused and where (the file, the offset,
      the trajectory id, errno's text).

   QUICK START
      typedef struct sample { float obs[4]; int32_t action; float reward;
                              float next_obs[4]; } sample;
      per_store st;
      per_store_config cfg = per_store_config_default(1000000,
                                                      sizeof(sample));
      sample roll[128 * 8];                      // T = 128 steps, B = 8
      sample batch[256];
      uint64_t ids[256];
      float w[256];
      memset(roll, 0, sizeof roll);
      if (per_store_init(&st, "replay.store", &cfg, 0, NULL) != PER_OK)
        return 1;                                // st.error says why
      per_store_add(&st, roll, 128, 8, NULL, 0, NULL);
      per_store_sample(&st, 256, NULL, batch, ids, w);
      // ... compute TD errors td[256] for the batch, then
      // per_store_update(&st, ids, td, 256, NULL);
      per_store_checkpoint(&st, 0);              // what changed, not the data
      per_store_free(&st);

   HISTORY
      0.5.0  first version.
*/
#ifndef PER_STORE_H_INCLUDED
#define PER_STORE_H_INCLUDED

#include "per.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
   Declarations                                                       >>api
   ====================================================================== */

#define per_store_config_default PERI_NAME(per_store_config_default)
#define per_store_init PERI_NAME(per_store_init)
#define per_store_free PERI_NAME(per_store_free)
#define per_store_add PERI_NAME(per_store_add)
#define per_store_add_fill PERI_NAME(per_store_add_fill)
#define per_store_write PERI_NAME(per_store_write)
#define per_store_run_writer PERI_NAME(per_store_run_writer)
#define per_store_stop_writer PERI_NAME(per_store_stop_writer)
#define per_store_writer_error PERI_NAME(per_store_writer_error)
#define per_store_sample PERI_NAME(per_store_sample)
#define per_store_update PERI_NAME(per_store_update)
#define per_store_checkpoint PERI_NAME(per_store_checkpoint)
#define per_store_load PERI_NAME(per_store_load)
#define per_store_size PERI_NAME(per_store_size)
#define per_store_stats_of PERI_NAME(per_store_stats_of)
#define per_store_trajectory PERI_NAME(per_store_trajectory)
#define per_store_check PERI_NAME(per_store_check)

/* per_store_init and per_store_add flags */
enum {
  /* per_store_init: when dir holds a store (its index.bin), load it
     (per_store_load of dir, world 1) instead of refusing */
  PER_STORE_RESUME = 1u << 0,
  /* per_store_add: when the staging area is full, return PER_ERR_BUSY
     (nothing done) instead of waiting for the writer or writing */
  PER_STORE_NOWAIT = 1u << 1,
  /* per_store_load: check the trajectories' headers and lengths but not
     their data's CRCs (a load then reads 64 bytes a trajectory, not the
     whole store) */
  PER_STORE_LOAD_QUICK = 1u << 2,
  /* per_store_checkpoint: commit the index only, not the two JSON
     files (their text grows by about 250 bytes a trajectory) */
  PER_STORE_NO_JSON = 1u << 3
};

/* Start from per_store_config_default() and change what you need. */
typedef struct per_store_config {
  per_config buffer;      /* the sampling, as per_buffer's: capacity in
                             samples (eviction), item_size the bytes of
                             one sample, alpha, beta0, beta1, beta_steps,
                             eps, max_priority, seed, flags, max_unique.
                             seq_len must be 0 */
  uint64_t cache_bytes;   /* default 256 MiB: written trajectories kept in
                             memory, the newest first; 0 allowed */
  uint64_t staging_bytes; /* default 64 MiB: trajectories not written yet;
                             a trajectory needs item_size + 1 bytes a
                             sample here (rounded up to 8), and a larger
                             one is refused */
  uint64_t segment_bytes; /* default 1 GiB: a segment file takes no more
                             trajectories once this long (one larger
                             trajectory gets a segment of its own) */
  const char *layout;     /* what a sample is, as text (per_buffer's
                             layout: "" or NULL for unknown); kept in the
                             checkpoints, and a load of another layout is
                             refused */
} per_store_config;

/* The defaults for `capacity` samples of `item_size` bytes:
   per_config_default's sampling and the sizes above. */
PERDEF per_store_config per_store_config_default(uint32_t capacity,
                                                 uint32_t item_size);

/* A store: per_store_init it, per_store_free it. The fields are
   readable; change them only through the functions. */
typedef struct per_store {
  per_buffer index;   /* the samples' priorities and places: its item is
                         the sample's position in its trajectory (u32) */
  uint32_t item_size; /* bytes of one sample */
  uint32_t flags;     /* per_store_init's */
  struct peri_store_state *st; /* everything else (the implementation's) */
  char error[256];             /* what the last refused call refused, and where;
                                  "" after a successful call */
} per_store;

/* What a store holds and has done (per_store_stats_of). */
typedef struct per_store_stats {
  uint64_t trajectories;       /* stored (at least one sample) */
  uint64_t samples;            /* stored */
  uint64_t added_trajectories; /* added in all, over every rank of a
                                  sharded load: the next one's id */
  uint64_t added_samples;      /* added in all (the same) */
  uint64_t disk_bytes;         /* in segment files, written */
  uint64_t segments;           /* segment files */
  uint64_t staged_bytes;       /* the backlog: added, not yet written */
  uint64_t staged_trajectories;
  uint64_t cached_bytes; /* written trajectories still in memory */
  uint64_t cache_hits;   /* samples a batch copied from memory */
  uint64_t cache_misses; /* samples a batch read from disk */
  uint64_t reads;        /* pread calls of batches */
  uint64_t read_bytes;
  uint64_t written_trajectories; /* appended to segments */
  uint64_t written_bytes;
  uint64_t waits;       /* adds that waited for room */
  uint64_t busy;        /* adds refused with PER_ERR_BUSY */
  uint64_t checkpoints; /* committed by this store */
} per_store_stats;

/* One stored trajectory, as the index has it (per_store_trajectory). */
typedef struct per_store_traj_info {
  uint64_t id;                 /* increasing from 0, in add order */
  unsigned char uuid[16];      /* random (version 4) */
  uint32_t num_samples;        /* T * B */
  uint32_t T, B;               /* its shape */
  uint32_t max_episode_length; /* the longest run of one environment's
                                  steps ending with an end (or the
                                  trajectory's last step) */
  uint32_t live;               /* samples still stored (the oldest evicted
                                  first) */
  uint32_t written;            /* 1 once in a segment file */
  uint32_t cached;             /* 1 while its bytes are in memory */
} per_store_traj_info;

/* Make an empty store in directory dir (created if missing, its parent
   must exist). cfg is validated as per_buffer_init validates a config
   (b->error's messages); seq_len must be 0, staging_bytes >= 8 and
   segment_bytes >= 4096. dir must not hold a store's index.bin, unless
   flags has PER_STORE_RESUME: then that store is loaded (per_store_load,
   world 1) and must fit cfg as per_buffer_load requires (capacity,
   item_size, flags, max_unique, alpha 0 or not; and the layout). Errors
   (*s zeroed but for s->error, nothing left open or allocated; dir as it
   was, but for its creation): PER_ERR_NULL (s, dir or cfg), PER_ERR_ARG,
   PER_ERR_CAPACITY, PER_ERR_NOMEM, PER_ERR_IO (dir cannot be made or
   opened, or holds a store without PER_STORE_RESUME), and those of
   per_store_load (PER_STORE_LOAD_QUICK in flags goes to it). A directory
   holds one store: segment files found in one without index.bin (a store
   killed before its first checkpoint) are taken as this store's line
   when they are all of one, and its first checkpoint deletes them. */
PERDEF per_status per_store_init(per_store *s, const char *dir,
                                 const per_store_config *cfg, uint32_t flags,
                                 void *alloc_ctx);
/* Stop the writer (per_store_stop_writer; waits for it to leave), close
   every file and free everything; *s zeroed. Staged trajectories that no
   checkpoint took are not written (per_store_checkpoint first to keep
   them); the files on disk stay. Safe on a zeroed store and NULL. */
PERDEF void per_store_free(per_store *s);

/* Add a trajectory: T steps of B environments, T * B samples of
   item_size bytes at items (sample t * B + b), ends[t * B + b] the
   PER_END_* of that step (NULL: none). It becomes one trajectory of the
   index, as one per_buffer_add_steps call (its samples at max_leaf, the
   oldest samples evicted when the store is full), gets the next id
   (*id, may be NULL) and a random uuid, is copied into the staging area
   and can be sampled on return. When the staging area has no room for
   it: with PER_STORE_NOWAIT, PER_ERR_BUSY (counted in stats.busy);
   otherwise, while a writer runs, the add waits for room (stats.waits),
   and without one it writes the oldest staged trajectories itself
   (their errors are then its errors). Errors (nothing added):
   PER_ERR_NULL (s, items), PER_ERR_ARG (T or B 0, T * B above the
   capacity, the trajectory above staging_bytes, an ends[j] not a
   PER_END_*, unknown flags), PER_ERR_BUSY, PER_ERR_NOMEM, PER_ERR_IO (a
   write to make room failed: s->error says which file and why). */
PERDEF per_status per_store_add(per_store *s, const void *items, uint32_t T,
                                uint32_t B, const uint8_t *ends, uint32_t flags,
                                uint64_t *id);
/* per_store_add, the samples written straight into the staging area by
   fill(ctx, dst, n), which puts n = T * B samples of item_size bytes at
   dst (sample t * B + b), instead of copied from an array: one copy
   less for a caller that assembles its samples (from fields, say).
   fill runs once, on the calling thread, after every check and when
   the room is held, and must write all n * item_size bytes, not call
   the store and not fail. Errors: those of per_store_add (PER_ERR_NULL
   for a NULL fill), with fill not called. */
PERDEF per_status per_store_add_fill(
    per_store *s, uint32_t T, uint32_t B, const uint8_t *ends, uint32_t flags,
    uint64_t *id, void (*fill)(void *ctx, void *dst, uint32_t n), void *ctx);
/* Append every staged trajectory to the open segment (a new segment
   file when it would pass segment_bytes), in add order, then return: the
   writer's work done on the caller's thread. Errors (the trajectory that
   failed and those after it stay staged; the segment's bytes below the
   last checkpoint's length untouched): PER_ERR_NULL, PER_ERR_IO (ENOSPC,
   EIO: s->error names the file and errno's text). */
PERDEF per_status per_store_write(per_store *s);
/* The writer loop, for a thread of the caller's own: append staged
   trajectories as they come (per_store_write's work), sleeping while
   none is staged, until per_store_stop_writer (or per_store_free) makes
   it return PER_OK. On an I/O error it returns that status (the
   trajectory stays staged; adds then write themselves, and report the
   error if it persists). At most one writer at a time (PER_ERR_ARG
   otherwise). It never writes s->error, which belongs to the caller's
   thread: per_store_writer_error has its text. Join the thread before
   per_store_free. */
PERDEF per_status per_store_run_writer(per_store *s);
/* Make per_store_run_writer return once its current append is done, and
   wait until it has. A stop that comes before the writer has started is
   kept: that per_store_run_writer returns PER_OK at once. A later
   per_store_run_writer runs again. */
PERDEF void per_store_stop_writer(per_store *s);
/* The text of the error the last per_store_run_writer returned (what and
   where, as s->error says it), "" when it returned PER_OK or none has
   returned, into out[0..n) (cut, NUL-terminated; nothing for n == 0).
   Any thread may ask. */
PERDEF void per_store_writer_error(per_store *s, char *out, size_t n);

/* Draw B samples as per_buffer_sample draws from s->index (opts as
   there; PER_SAMPLE_SEQUENCES is refused; PER_SAMPLE_TRAJECTORIES
   windows count trajectories, seed 002's sample_window_size), and copy
   the samples into items_out (B * item_size bytes, in draw order; may be
   NULL: only ids and weights). Samples in memory are copied; the others
   are read from their segments, each sample once, in file order.
   Errors: those of per_buffer_sample, PER_ERR_ARG
   (PER_SAMPLE_SEQUENCES), PER_ERR_IO (a read failed or came short:
   s->error names the file and offset). The outputs may then be written;
   the store keeps every sample, and a read that fails after the draw
   puts the rng and step back (per_buffer_set_shared), so the next call
   draws what this one would have. The one exception: with alpha 0 and
   PER_SAMPLE_UNIQUE, the uniform sampler's permutation, which the draw
   shuffled, stays shuffled: later batches are still uniform without
   replacement, but not the ones a store that never failed draws. */
PERDEF per_status per_store_sample(per_store *s, uint32_t B,
                                   const per_sample_opts *opts, void *items_out,
                                   uint64_t *ids, float *weights);
/* per_buffer_update of s->index: the priorities of the samples drawn
   with ids. Errors: those of per_buffer_update. */
PERDEF per_status per_store_update(per_store *s, const uint64_t *ids,
                                   const float *td, uint32_t n,
                                   uint32_t *stale);
/* Make the directory's checkpoint the store as it is now: write what is
   staged, fsync the segments written since the last checkpoint (and the
   directory when it has new files), then commit: append a record of
   what changed since the last checkpoint to index.log and fsync it, or,
   when the log is as long as index.bin (or this store has not written
   index.bin since it was made or loaded), replace index.bin atomically
   (a new file, fsync, rename, fsync of the directory) and begin a new
   index.log. A kill at any instant leaves the old checkpoint or the new
   one, complete; a record cut short is not a checkpoint. Then update
   trajectory_index.json (in place, not synced; rewritten whole, as
   index.bin is, now and then) and write metadata.json (unless
   PER_STORE_NO_JSON in flags), and delete the segment files that no
   stored trajectory and no checkpoint needs any more: those it dropped,
   those a load superseded, and those of its own that a crash left
   (their names carry its uuid); never another store's. A deletion that
   fails is retried by the next checkpoint. Errors: PER_ERR_NULL,
   PER_ERR_ARG (unknown flags), PER_ERR_NOMEM, PER_ERR_IO: until the
   commit the old checkpoint stands (a record that failed is cut back
   off the log; s->error says when that failed too); s->error says so
   when the new one stands and the directory's fsync after index.bin's
   rename, or a JSON file, failed. stats.checkpoints counts the commits. */
PERDEF per_status per_store_checkpoint(per_store *s, uint32_t flags);
/* Replace s's contents with the checkpoint in directory dir (s's own or
   another store's): all of it (world 1), or rank `rank` of `world`:
   trajectories whose id is rank mod world, with their samples, in age
   order, at generation 1, with the global counters (added samples and
   trajectories), the checkpoint's max_leaf, and s's own rng and step,
   as per_buffer_load_shard. Everything is read and checked first: index.bin
   (its CRC, format, counts) and the records of index.log that continue
   it, up to the first cut short or failing its CRC (a log whose header
   is damaged is refused), every taken trajectory against its segment
   (the file's length, its header: id, uuid, shape, item size; its data's
   CRC-32C unless PER_STORE_LOAD_QUICK), and the sampling state against
   s as per_buffer_load checks it (capacity for world 1, item_size,
   flags, alpha, layout). Segment files of another directory are linked
   into s's (link(2); copied when linking fails). s's own files are not
   changed: its next checkpoint replaces its index.bin, then deletes the
   segment files the load superseded. A directory holds one store: a
   shard (world > 1) goes into a store of another directory, each rank's
   its own. Staged trajectories of s are dropped with the rest of its
   contents. Errors (s unchanged): PER_ERR_NULL, PER_ERR_ARG (world 0,
   rank >= world, unknown flags, world > 1 and dir is s's own),
   PER_ERR_NOMEM, PER_ERR_IO, PER_ERR_FORMAT, PER_ERR_VERSION,
   PER_ERR_TRUNCATED, PER_ERR_CHECKSUM (index.bin's, index.log's header,
   or a trajectory's), PER_ERR_MISMATCH, PER_ERR_CORRUPT. */
PERDEF per_status per_store_load(per_store *s, const char *dir, uint32_t rank,
                                 uint32_t world, uint32_t flags);

/* Samples stored (0 for NULL). */
PERDEF uint32_t per_store_size(const per_store *s);
/* s's counters into *out (zeroed for NULL s). */
PERDEF void per_store_stats_of(const per_store *s, per_store_stats *out);
/* The stored trajectory with the given id into *out. Errors:
   PER_ERR_NULL, PER_ERR_INDEX (no stored trajectory has that id). */
PERDEF per_status per_store_trajectory(const per_store *s, uint64_t id,
                                       per_store_traj_info *out);
/* Check the invariants (tests, tools): s->index (per_buffer_check),
   every stored sample's trajectory and position, the live counts, the
   ring and the segments' counts. PER_OK or PER_ERR_CORRUPT (PER_ERR_NULL).
   Not while a writer runs. */
PERDEF per_status per_store_check(const per_store *s);

#ifdef __cplusplus
}
#endif

#endif /* PER_STORE_H_INCLUDED */

/* ======================================================================
   IMPLEMENTATION
   ====================================================================== */
#if defined(PER_STORE_IMPLEMENTATION) && \
    !defined(PER_STORE_IMPLEMENTATION_INCLUDED)
#define PER_STORE_IMPLEMENTATION_INCLUDED

#ifndef PER_IMPLEMENTATION_INCLUDED
#error \
    "per_store.h: define PER_STORE_IMPLEMENTATION in the file that defines PER_IMPLEMENTATION, after including per.h there"
#endif
#ifdef PER_NO_STDIO
#error "per_store.h: the store keeps files; not with PER_NO_STDIO"
#endif
#if !defined(__unix__) && !defined(__APPLE__)
#error "per_store.h: POSIX only (pread, fsync, link, threads)"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Starting the writeback of a file's range without waiting for it and
   without dropping its pages: Linux's sync_file_range, declared by
   <fcntl.h> with _GNU_SOURCE (g++ defines it), else here, as its libc
   has it (64-bit offsets; SYNC_FILE_RANGE_WRITE is 2). Elsewhere
   nothing: the checkpoint's fsync writes everything back. */
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
#define PERI_STORE_WRITEBACK(fd, off, n)                     \
  ((void)sync_file_range((fd), (off64_t)(off), (off64_t)(n), \
                         SYNC_FILE_RANGE_WRITE))
#elif defined(__linux__) && !defined(__cplusplus)
extern int sync_file_range(int fd, int64_t off, int64_t n, unsigned flags);
#define PERI_STORE_WRITEBACK(fd, off, n) \
  ((void)sync_file_range((fd), (int64_t)(off), (int64_t)(n), 2u))
#else
#define PERI_STORE_WRITEBACK(fd, off, n) ((void)(fd), (void)(off), (void)(n))
#endif

/* per.h's casts are C casts; so are these (see per.h). */
#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuseless-cast"
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* >>store */

/* The files (docs/FORMAT.md, "The trajectory store"): all little-endian.
   A segment starts with a 64-byte header; each trajectory is a 64-byte
   header, its samples, its ends (one byte a sample), zeros to a multiple
   of 8. index.bin, continued by the records of index.log, is the
   checkpoint. */
#define PERI_STORE_HDR 64u          /* a trajectory's and a segment's */
#define PERI_STORE_NAME 64u         /* a segment file's name, NUL included */
#define PERI_STORE_NONE 0xffffffffu /* no segment */
#define PERI_STORE_TRAJ_MAGIC 0x4a525450u /* "PTRJ" */
#define PERI_STORE_VERSION 1u
#define PERI_STORE_IDX_HDR 128u        /* index.bin's header */
#define PERI_STORE_SEG_ROW 80u         /* index.bin: a segment */
#define PERI_STORE_REC_ROW 64u         /* index.bin: a trajectory */
#define PERI_STORE_LOG_HDR 64u         /* index.log's header */
#define PERI_STORE_LOG_REC 0x474f4c50u /* "PLOG": an index.log record */
static const unsigned char peri_store_seg_magic[8] = {0x89, 'P', 'E', 'R',
                                                      'S',  'E', 'G', '\n'};
static const unsigned char peri_store_idx_magic[8] = {0x89, 'P', 'E', 'R',
                                                      'S',  'T', 'O', '\n'};
static const unsigned char peri_store_log_magic[8] = {0x89, 'P', 'E', 'R',
                                                      'L',  'O', 'G', '\n'};

/* A ring entry's state: its bytes are being copied in by the add, wait
   for the writer, are being written, or are in a segment. */
enum {
  PERI_STORE_COPYING,
  PERI_STORE_STAGED,
  PERI_STORE_WRITING,
  PERI_STORE_DONE
};

/* A stored trajectory. */
typedef struct peri_store_rec {
  uint64_t id;
  unsigned char uuid[16];
  uint32_t n, T, B, max_ep, live;
  uint32_t seg;    /* its segment (index in the table), PERI_STORE_NONE
                      until written */
  uint32_t crc;    /* CRC-32C of its samples and ends, once written */
  uint32_t cached; /* its payload is in the ring at `ring` */
  uint64_t off;    /* its header's offset in the segment */
  uint64_t ring;
  uint32_t ck_live;   /* live as the directory's checkpoint has it; 0: not
                         in it */
  uint32_t j_live;    /* live as trajectory_index.json has it */
  uint64_t j_off;     /* its row's first byte there; 0: not there */
  uint64_t j_live_at; /* where its live_samples value is written */
} peri_store_rec;

/* A segment file. */
typedef struct peri_store_seg {
  char name[PERI_STORE_NAME];
  uint64_t len;     /* bytes in use; the next append's offset */
  uint64_t live;    /* stored trajectories written in it */
  int fd;           /* -1 once deleted */
  uint32_t open;    /* takes appends */
  uint32_t dirty;   /* written since its last fsync */
  uint32_t in_ckpt; /* named by the directory's checkpoint */
  uint64_t advised; /* [advised, len) written since the writer last
                       started the kernel's writeback of the file */
} peri_store_seg;

/* A trajectory's bytes in the ring: samples, ends, zeros to 8. */
typedef struct peri_store_ent {
  uint64_t id, off, bytes;
  uint32_t state, pad;
} peri_store_ent;

struct peri_store_state {
  void *ctx;
  char *dir;
  per_store_config cfg;
  unsigned char uuid[16]; /* the store's: its segment files' names */
  uint32_t next_seg;      /* the next segment file's number */
  uint32_t new_files;     /* files made since the directory's last fsync */
  uint64_t ckpt_seq;      /* checkpoints of this store's line */
  unsigned tmp_counter;   /* temporary files' names */
  /* the stored trajectories, oldest first: rec[rh .. rh + rn) */
  peri_store_rec *rec;
  size_t rh, rn, rcap;
  peri_store_seg *seg;
  uint32_t nseg, segcap, open_seg;
  uint32_t loading; /* a load is replacing the segments: no appends */
  /* the ring and its entries, oldest first: ent[eh .. eh + en), entry
     ent[eh + i] numbered e0 + i; those from `wnext` on are not written */
  unsigned char *ring;
  uint64_t ring_bytes;
  peri_store_ent *ent;
  size_t eh, en, ecap;
  uint64_t e0, wnext;
  uint64_t staged, staged_n, cached;
  uint32_t *iota; /* 0, 1, ..., max_n - 1: an add's items */
  uint32_t max_n;
  /* per_store_sample's workspace */
  uint32_t *pos;
  uint64_t *ids;
  struct peri_store_miss *miss;
  unsigned char *rbuf;
  size_t scratch_b, rbuf_bytes;
  /* the writer */
  pthread_mutex_t mu;
  pthread_cond_t cv_room, cv_work, cv_idle;
  int writer_on, stop, appending;
  per_store_stats stats;
  char werr[256];
  /* incremental checkpoints: index.log, appended to by each checkpoint
     after the one that wrote index.bin (peri_store_log_*) */
  int log_fd;          /* open for appends; -1: none */
  uint32_t log_ok;     /* the next checkpoint may append a record */
  uint64_t log_len;    /* its committed bytes */
  uint64_t base_len;   /* index.bin's */
  uint64_t *dirty;     /* index slots changed since the last checkpoint,
                          one bit each */
  uint32_t *ck_perm;   /* the swap permutation as the checkpoint has it */
  unsigned char *lbuf; /* a record being made */
  size_t lbuf_cap;
  /* trajectory_index.json, edited in place between full rewrites */
  int json_fd;          /* -1: the next checkpoint rewrites it whole */
  uint32_t json_rows;   /* rows in its array */
  uint64_t json_head;   /* where its header (fixed length) begins */
  uint64_t json_tail;   /* where its closing text begins */
  uint32_t crc[8][256]; /* CRC-32C, eight bytes a step (peri_store_crc) */
  int crc_hw;           /* peri_store_crc_hw instead */
};

typedef struct peri_store_miss {
  uint32_t seg, j;
  uint64_t off;
  int fd;
} peri_store_miss;

/* ---- messages ---- */

static per_status peri_store_fail(char *err, per_status st, const char *fmt,
                                  ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, 256, fmt, ap);
  va_end(ap);
  return st;
}

/* ---- small helpers ---- */

/* The tables of CRC-32C (reflected 0x82F63B78) eight bytes a step:
   t[0] is the byte-wise table, t[k][i] the CRC of byte i followed by k
   zero bytes. */
static void peri_store_crc_init(uint32_t t[8][256]) {
  uint32_t i, k;
  for (i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    t[0][i] = c;
  }
  for (i = 0; i < 256; ++i)
    for (k = 1; k < 8; ++k)
      t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xffu];
}

/* The same with the CPU's own CRC-32C instruction (x86-64's SSE4.2),
   eight bytes an instruction: the writer and a load run a CRC over every
   byte, and the tables' 1.7 GB/s take a quarter of a core at a disk's
   write speed. Chosen at run time (peri_store_crc_hw_ok). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PERI_STORE_CRC_HW 1
__attribute__((target("sse4.2"))) static uint32_t peri_store_crc_hw(
    uint32_t crc, const void *p, size_t n) {
  const unsigned char *s = (const unsigned char *)p;
  unsigned long long c = ~crc & 0xffffffffu;
  uint64_t v;
  while (n >= 8) {
    memcpy(&v, s, 8);
    c = __builtin_ia32_crc32di(c, v);
    s += 8;
    n -= 8;
  }
  while (n--) c = __builtin_ia32_crc32qi((unsigned)c, *s++);
  return ~(uint32_t)c;
}
#endif

/* 1 when peri_store_crc_hw runs on this CPU. */
static int peri_store_crc_hw_ok(void) {
#ifdef PERI_STORE_CRC_HW
  return __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
  return 0;
#endif
}

/* per_crc32c's value (crc continued over p[0..n)): st's instruction
   where the CPU has one, else eight bytes a step through st's tables
   (about eight times per_crc32c's speed). */
static uint32_t peri_store_crc(const struct peri_store_state *st, uint32_t crc,
                               const void *p, size_t n) {
  const unsigned char *s = (const unsigned char *)p;
  const uint32_t(*t)[256] = (const uint32_t(*)[256])st->crc;
  uint32_t c = ~crc;
#ifdef PERI_STORE_CRC_HW
  if (st->crc_hw) return peri_store_crc_hw(crc, p, n);
#endif
  while (n >= 8) {
    uint32_t lo = c ^ ((uint32_t)s[0] | (uint32_t)s[1] << 8 |
                       (uint32_t)s[2] << 16 | (uint32_t)s[3] << 24);
    uint32_t hi = (uint32_t)s[4] | (uint32_t)s[5] << 8 | (uint32_t)s[6] << 16 |
                  (uint32_t)s[7] << 24;
    c = t[7][lo & 0xffu] ^ t[6][(lo >> 8) & 0xffu] ^ t[5][(lo >> 16) & 0xffu] ^
        t[4][lo >> 24] ^ t[3][hi & 0xffu] ^ t[2][(hi >> 8) & 0xffu] ^
        t[1][(hi >> 16) & 0xffu] ^ t[0][hi >> 24];
    s += 8;
    n -= 8;
  }
  while (n--) c = t[0][(c ^ *s++) & 0xffu] ^ (c >> 8);
  return ~c;
}

static uint64_t peri_store_pad8(uint64_t v) { return (v + 7u) & ~(uint64_t)7u; }

static uint64_t peri_store_mix(uint64_t x) { /* splitmix64's finaliser */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The store's uuid: /dev/urandom, else the clock, pid and an address. */
static void peri_store_new_uuid(unsigned char u[16]) {
  int fd = open("/dev/urandom", O_RDONLY), ok = 0;
  if (fd >= 0) {
    ok = read(fd, u, 16) == 16;
    close(fd);
  }
  if (!ok) {
    uint64_t a = peri_store_mix((uint64_t)time(NULL) ^
                                (uint64_t)getpid() << 32 ^ (uint64_t)(size_t)u);
    uint64_t b = peri_store_mix(a ^ (uint64_t)clock());
    peri_put64(u, a);
    peri_put64(u + 8, b);
  }
  u[6] = (unsigned char)((u[6] & 0x0f) | 0x40); /* version 4 */
  u[8] = (unsigned char)((u[8] & 0x3f) | 0x80); /* RFC 4122 variant */
}

/* A trajectory's uuid: a function of the store's and the id (unique per
   store line), in version 4 form. */
static void peri_store_traj_uuid(const unsigned char store[16], uint64_t id,
                                 unsigned char u[16]) {
  uint64_t a = peri_get64(store), b = peri_get64(store + 8);
  peri_put64(u, peri_store_mix(a ^ peri_store_mix(id)));
  peri_put64(u + 8, peri_store_mix(b ^ peri_store_mix(~id)));
  u[6] = (unsigned char)((u[6] & 0x0f) | 0x40);
  u[8] = (unsigned char)((u[8] & 0x3f) | 0x80);
}

static void peri_store_uuid_text(const unsigned char u[16], char out[37]) {
  static const char hex[] = "0123456789abcdef";
  int i, k = 0;
  for (i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[k++] = '-';
    out[k++] = hex[u[i] >> 4];
    out[k++] = hex[u[i] & 15];
  }
  out[k] = 0;
}

/* dir + "/" + name into a new string (NULL: no memory). */
static char *peri_store_path(void *ctx, const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *p = (char *)PER_MALLOC(a + b + 2, ctx);
  if (!p) return NULL;
  memcpy(p, dir, a);
  p[a] = '/';
  memcpy(p + a + 1, name, b + 1);
  return p;
}

static int peri_store_pwrite_all(int fd, const void *p, size_t n,
                                 uint64_t off) {
  const unsigned char *c = (const unsigned char *)p;
  while (n > 0) {
    ssize_t w = pwrite(fd, c, n, (off_t)off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return -1;
    }
    c += w;
    n -= (size_t)w;
    off += (uint64_t)w;
  }
  return 0;
}

/* 0, or -1 with errno (EIO for an early end of file). */
static int peri_store_pread_all(int fd, void *p, size_t n, uint64_t off) {
  unsigned char *c = (unsigned char *)p;
  while (n > 0) {
    ssize_t r = pread(fd, c, n, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO;
      return -1;
    }
    c += r;
    n -= (size_t)r;
    off += (uint64_t)r;
  }
  return 0;
}

static int peri_store_dir_sync(const char *dir) {
  int fd = open(dir, O_RDONLY), r;
  if (fd < 0) return -1;
  r = fsync(fd);
  close(fd);
  return r;
}

/* Write file `name` of directory `dir` atomically: a new temporary file
   beside it (name.tmp-PID-N, created exclusively), fsync, rename over
   name, fsync of the directory. 0; -1 with errno when nothing was
   renamed (the temporary file removed: the old file stands); -2 with
   errno when the new file is in place but the directory's fsync failed
   (not known to survive a power loss). */
static int peri_store_put_file(void *ctx, const char *dir, const char *name,
                               unsigned *counter, const void *data,
                               size_t len) {
  char *path = peri_store_path(ctx, dir, name);
  size_t pl = path ? strlen(path) : 0;
  char *tmp = path ? (char *)PER_MALLOC(pl + 40, ctx) : NULL;
  int fd, e;
  if (!tmp) {
    PER_FREE(path, ctx);
    errno = ENOMEM;
    return -1;
  }
  snprintf(tmp, pl + 40, "%s.tmp-%ld-%u", path, (long)getpid(), ++*counter);
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC, 0644);
  if (fd < 0) {
    e = errno;
    PER_FREE(tmp, ctx);
    PER_FREE(path, ctx);
    errno = e;
    return -1;
  }
  if (peri_store_pwrite_all(fd, data, len, 0) != 0 || fsync(fd) != 0) {
    e = errno;
    close(fd);
    unlink(tmp);
    PER_FREE(tmp, ctx);
    PER_FREE(path, ctx);
    errno = e;
    return -1;
  }
  if (close(fd) != 0 || rename(tmp, path) != 0) {
    e = errno;
    unlink(tmp);
    PER_FREE(tmp, ctx);
    PER_FREE(path, ctx);
    errno = e;
    return -1;
  }
  PER_FREE(tmp, ctx);
  PER_FREE(path, ctx);
  return peri_store_dir_sync(dir) == 0 ? 0 : -2;
}

/* ---- records, segments, ring ---- */

/* The stored trajectory with id `id`, or NULL (binary search). */
static peri_store_rec *peri_store_find(const struct peri_store_state *st,
                                       uint64_t id) {
  size_t lo = 0, hi = st->rn;
  if (hi > 0 && id >= st->rec[st->rh].id && id - st->rec[st->rh].id < hi &&
      st->rec[st->rh + (size_t)(id - st->rec[st->rh].id)].id == id)
    return &st->rec[st->rh + (size_t)(id - st->rec[st->rh].id)]; /* dense */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint64_t v = st->rec[st->rh + mid].id;
    if (v == id) return &st->rec[st->rh + mid];
    if (v < id) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

/* The full trajectory id of the sample in slot `slot` of the index (it
   keeps the low 32 bits; stored ids span fewer than 2^32). */
static uint64_t peri_store_slot_traj(const per_buffer *b, uint32_t slot) {
  uint32_t back = (uint32_t)(b->trajs - 1) - b->traj[slot];
  return b->trajs - 1 - back;
}

/* Room for one more record and one more ring entry (compacting first). */
static per_status peri_store_reserve(struct peri_store_state *st) {
  if (st->rh > 0 && st->rh >= st->rn) {
    memmove(st->rec, st->rec + st->rh, st->rn * sizeof *st->rec);
    st->rh = 0;
  }
  if (st->rh + st->rn == st->rcap) {
    size_t cap = st->rcap ? st->rcap * 2 : 64;
    peri_store_rec *r = (peri_store_rec *)PER_MALLOC(cap * sizeof *r, st->ctx);
    if (!r) return PER_ERR_NOMEM;
    if (st->rn) memcpy(r, st->rec + st->rh, st->rn * sizeof *r);
    PER_FREE(st->rec, st->ctx);
    st->rec = r;
    st->rh = 0;
    st->rcap = cap;
  }
  if (st->eh > 0 && st->eh >= st->en) {
    memmove(st->ent, st->ent + st->eh, st->en * sizeof *st->ent);
    st->eh = 0;
  }
  if (st->eh + st->en == st->ecap) {
    size_t cap = st->ecap ? st->ecap * 2 : 64;
    peri_store_ent *e = (peri_store_ent *)PER_MALLOC(cap * sizeof *e, st->ctx);
    if (!e) return PER_ERR_NOMEM;
    if (st->en) memcpy(e, st->ent + st->eh, st->en * sizeof *e);
    PER_FREE(st->ent, st->ctx);
    st->ent = e;
    st->eh = 0;
    st->ecap = cap;
  }
  return PER_OK;
}

static peri_store_ent *peri_store_entry(struct peri_store_state *st,
                                        uint64_t number) {
  if (number < st->e0 || number - st->e0 >= st->en) return NULL;
  return &st->ent[st->eh + (size_t)(number - st->e0)];
}

/* Where `bytes` contiguous bytes fit in the ring now, or UINT64_MAX. */
static uint64_t peri_store_ring_place(const struct peri_store_state *st,
                                      uint64_t bytes) {
  const peri_store_ent *first, *last;
  uint64_t a, e;
  if (bytes > st->ring_bytes) return UINT64_MAX;
  if (st->en == 0) return 0;
  first = &st->ent[st->eh];
  last = &st->ent[st->eh + st->en - 1];
  a = first->off;
  e = last->off + last->bytes;
  if (last->off >= a) { /* [a, e) in use */
    if (e + bytes <= st->ring_bytes) return e;
    if (bytes <= a) return 0;
    return UINT64_MAX;
  }
  return e + bytes <= a ? e : UINT64_MAX; /* [a, R) and [0, e) in use */
}

/* Drop the oldest ring entry (written): its trajectory is no longer in
   memory. */
static void peri_store_ring_pop(struct peri_store_state *st) {
  peri_store_ent *e = &st->ent[st->eh];
  peri_store_rec *r = peri_store_find(st, e->id);
  if (r && r->cached && r->ring == e->off) r->cached = 0;
  st->cached -= e->bytes;
  ++st->eh;
  --st->en;
  ++st->e0;
  if (st->en == 0) st->eh = 0;
}

/* Close and delete segment i (no trajectory stored in it and no
   checkpoint names it): an error is left for the next checkpoint's sweep
   of the directory. */
static void peri_store_seg_drop(struct peri_store_state *st, uint32_t i) {
  peri_store_seg *g = &st->seg[i];
  char *p;
  if (g->fd < 0) return;
  close(g->fd);
  g->fd = -1;
  p = peri_store_path(st->ctx, st->dir, g->name);
  if (p) {
    unlink(p);
    PER_FREE(p, st->ctx);
  }
}

/* Forget the oldest trajectories none of whose samples is stored. */
static void peri_store_drop_dead(struct peri_store_state *st) {
  while (st->rn > 0 && st->rec[st->rh].live == 0) {
    peri_store_rec *r = &st->rec[st->rh];
    if (r->seg != PERI_STORE_NONE) {
      peri_store_seg *g = &st->seg[r->seg];
      if (--g->live == 0 && !g->open && !g->in_ckpt)
        peri_store_seg_drop(st, r->seg);
    }
    ++st->rh;
    --st->rn;
  }
  if (st->rn == 0) st->rh = 0;
}

/* ---- the writer's work ---- */

static void peri_store_traj_header(const per_store *s, const peri_store_rec *r,
                                   uint32_t crc, unsigned char h[64]) {
  memset(h, 0, 64);
  peri_put32(h, PERI_STORE_TRAJ_MAGIC);
  peri_put32(h + 4, PERI_STORE_VERSION);
  peri_put64(h + 8, r->id);
  memcpy(h + 16, r->uuid, 16);
  peri_put32(h + 32, r->n);
  peri_put32(h + 36, r->T);
  peri_put32(h + 40, r->B);
  peri_put32(h + 44, s->item_size);
  peri_put32(h + 48, r->max_ep);
  peri_put32(h + 52, crc);
  peri_put32(h + 60, peri_store_crc(s->st, 0, h, 60));
}

/* Make a new segment file (its header written); its descriptor in *fd,
   its name in name. 0, or -1 with errno. */
static int peri_store_seg_create(struct peri_store_state *st, uint32_t number,
                                 char name[PERI_STORE_NAME], int *fd) {
  unsigned char h[64];
  char u[37], *p;
  int tries;
  peri_store_uuid_text(st->uuid, u);
  for (tries = 0; tries < 64; ++tries, ++number) {
    snprintf(name, PERI_STORE_NAME, "seg-%s-%08x.per", u, number);
    p = peri_store_path(st->ctx, st->dir, name);
    if (!p) {
      errno = ENOMEM;
      return -1;
    }
    *fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0644);
    PER_FREE(p, st->ctx);
    if (*fd >= 0) break;
    if (errno != EEXIST) return -1;
  }
  if (*fd < 0) return -1;
  memset(h, 0, sizeof h);
  memcpy(h, peri_store_seg_magic, 8);
  peri_put32(h + 8, PERI_STORE_VERSION);
  peri_put32(h + 12, PERI_STORE_HDR);
  memcpy(h + 16, st->uuid, 16);
  peri_put32(h + 32, number);
  peri_put32(h + 60, peri_store_crc(st, 0, h, 60));
  if (peri_store_pwrite_all(*fd, h, sizeof h, 0) != 0) {
    int e = errno;
    close(*fd);
    p = peri_store_path(st->ctx, st->dir, name);
    if (p) unlink(p);
    PER_FREE(p, st->ctx);
    errno = e;
    return -1;
  }
  st->next_seg = number + 1;
  return 0;
}

/* Append the oldest staged trajectory. Called with st->mu held; it is
   released during the I/O. *did: 1 when an entry was written (or
   skipped: its trajectory is no longer stored), 0 when none is staged.
   Errors (the entry stays staged) into err. */
static per_status peri_store_append(per_store *s, int *did, char *err) {
  struct peri_store_state *st = s->st;
  peri_store_ent *e;
  peri_store_rec *r, rc;
  uint64_t number, off, need, data, bytes, at, adv;
  unsigned char h[64];
  uint32_t g, crc;
  int fd, made = 0, fail = 0, errnum = 0;
  char name[PERI_STORE_NAME];
  *did = 0;
  while (st->appending) pthread_cond_wait(&st->cv_idle, &st->mu);
  number = st->wnext;
  e = peri_store_entry(st, number);
  if (!e || e->state != PERI_STORE_STAGED || st->loading) return PER_OK;
  r = peri_store_find(st, e->id);
  if (!r) { /* evicted before it was written */
    e->state = PERI_STORE_DONE;
    st->staged -= e->bytes;
    --st->staged_n;
    st->cached += e->bytes;
    ++st->wnext;
    *did = 1;
    pthread_cond_broadcast(&st->cv_room);
    return PER_OK;
  }
  rc = *r;
  at = e->off;
  bytes = e->bytes;
  data = (uint64_t)rc.n * s->item_size + rc.n;
  need = PERI_STORE_HDR + bytes;
  g = st->open_seg;
  if (g != PERI_STORE_NONE && st->seg[g].len > PERI_STORE_HDR &&
      st->seg[g].len + need > st->cfg.segment_bytes) {
    st->seg[g].open = 0; /* sealed: no more appends */
    if (st->seg[g].live == 0 && !st->seg[g].in_ckpt) peri_store_seg_drop(st, g);
    g = st->open_seg = PERI_STORE_NONE;
  }
  if (g == PERI_STORE_NONE && st->nseg == st->segcap) {
    uint32_t cap = st->segcap ? st->segcap * 2 : 16;
    peri_store_seg *t = (peri_store_seg *)PER_MALLOC(cap * sizeof *t, st->ctx);
    if (!t)
      return peri_store_fail(err, PER_ERR_NOMEM, "no memory for a segment");
    if (st->nseg) memcpy(t, st->seg, st->nseg * sizeof *t);
    PER_FREE(st->seg, st->ctx);
    st->seg = t;
    st->segcap = cap;
  }
  e->state = PERI_STORE_WRITING;
  st->appending = 1;
  fd = g == PERI_STORE_NONE ? -1 : st->seg[g].fd;
  off = g == PERI_STORE_NONE ? PERI_STORE_HDR : st->seg[g].len;
  adv = g == PERI_STORE_NONE ? 0 : st->seg[g].advised;
  pthread_mutex_unlock(&st->mu);

  name[0] = 0;
  if (fd < 0) {
    if (peri_store_seg_create(st, st->next_seg, name, &fd) != 0) fail = 1;
    else made = 1;
  }
  if (!fail) {
    crc = peri_store_crc(st, 0, st->ring + at, (size_t)data);
    peri_store_traj_header(s, &rc, crc, h);
    if (peri_store_pwrite_all(fd, h, sizeof h, off) != 0 ||
        peri_store_pwrite_all(fd, st->ring + at, (size_t)bytes,
                              off + PERI_STORE_HDR) != 0)
      fail = 1;
  }
  /* every 8 MiB: start writing the file's new pages back, so that the
     disk works while adds go on and a checkpoint's fsync finds little to
     do; the pages stay in the page cache, a second cache for reads */
  if (!fail && off + need - adv >= ((uint64_t)8 << 20)) {
    PERI_STORE_WRITEBACK(fd, adv, off + need - adv);
    adv = off + need;
  }
  errnum = fail ? errno : 0;

  pthread_mutex_lock(&st->mu);
  st->appending = 0;
  pthread_cond_broadcast(&st->cv_idle);
  e = peri_store_entry(st, number);
  if (made) { /* the table has room (reserved above) */
    peri_store_seg *ng = &st->seg[st->nseg];
    memset(ng, 0, sizeof *ng);
    memcpy(ng->name, name, PERI_STORE_NAME);
    ng->fd = fd;
    ng->open = 1;
    ng->len = PERI_STORE_HDR;
    g = st->open_seg = st->nseg++;
    st->new_files = 1;
    ++st->stats.segments;
  }
  if (fail) {
    e->state = PERI_STORE_STAGED;
    return peri_store_fail(
        err, PER_ERR_IO,
        "writing trajectory %llu (%llu bytes) to %s/%s at "
        "offset %llu: %s",
        (unsigned long long)rc.id, (unsigned long long)need, st->dir,
        g == PERI_STORE_NONE ? "(a new segment)" : st->seg[g].name,
        (unsigned long long)off, strerror(errnum));
  }
  st->seg[g].len = off + need;
  st->seg[g].dirty = 1;
  if (adv > st->seg[g].advised) st->seg[g].advised = adv;
  r = peri_store_find(st, rc.id);
  if (r) {
    r->seg = g;
    r->off = off;
    r->crc = crc;
    ++st->seg[g].live;
  }
  e->state = PERI_STORE_DONE;
  st->staged -= bytes;
  --st->staged_n;
  st->cached += bytes;
  ++st->wnext;
  ++st->stats.written_trajectories;
  st->stats.written_bytes += need;
  *did = 1;
  pthread_cond_broadcast(&st->cv_room);
  return PER_OK;
}

/* The uuid and number of a segment file's name "seg-UUID-NNNNNNNN.per";
   0 when name is not one. */
static int peri_store_parse_name(const char *name, unsigned char u[16],
                                 uint32_t *number) {
  static const char hex[] = "0123456789abcdef";
  size_t i, k = 0;
  uint32_t v = 0;
  if (strlen(name) != 4 + 36 + 1 + 8 + 4 || strncmp(name, "seg-", 4) != 0 ||
      strcmp(name + 49, ".per") != 0 || name[40] != '-')
    return 0;
  for (i = 4; i < 40; ++i) {
    const char *h, *l;
    if (i == 12 || i == 17 || i == 22 || i == 27) {
      if (name[i] != '-') return 0;
      continue;
    }
    h = strchr(hex, name[i]);
    l = strchr(hex, name[i + 1]);
    if (!name[i] || !name[i + 1] || !h || !l) return 0;
    u[k++] = (unsigned char)((h - hex) << 4 | (l - hex));
    ++i;
  }
  for (i = 41; i < 49; ++i) {
    const char *h = name[i] ? strchr(hex, name[i]) : NULL;
    if (!h) return 0;
    v = v << 4 | (uint32_t)(h - hex);
  }
  *number = v;
  return k == 16;
}

/* A new store in a directory without index.bin: segment files there are
   a store's that never committed a checkpoint (killed before its first).
   When they are all of one line, the new store continues that line (its
   uuid, numbers after theirs), so that its first checkpoint's sweep
   deletes them; files of several lines are left alone. */
static void peri_store_adopt(struct peri_store_state *st) {
  DIR *d = opendir(st->dir);
  struct dirent *de;
  unsigned char u[16], line[16];
  uint32_t number, next = 0;
  int seen = 0, mixed = 0;
  if (!d) return;
  while ((de = readdir(d)) != NULL)
    if (peri_store_parse_name(de->d_name, u, &number)) {
      if (seen && memcmp(u, line, 16) != 0) mixed = 1;
      memcpy(line, u, 16);
      seen = 1;
      if (number + 1 > next) next = number + 1;
    }
  closedir(d);
  if (seen && !mixed) {
    memcpy(st->uuid, line, 16);
    st->next_seg = next;
  }
}

/* ---- config, init, free ---- */

PERDEF per_store_config per_store_config_default(uint32_t capacity,
                                                 uint32_t item_size) {
  per_store_config c;
  memset(&c, 0, sizeof c);
  c.buffer = per_config_default(capacity, item_size);
  c.cache_bytes = (uint64_t)256 << 20;
  c.staging_bytes = (uint64_t)64 << 20;
  c.segment_bytes = (uint64_t)1 << 30;
  c.layout = NULL;
  return c;
}

static void peri_store_release(per_store *s) {
  struct peri_store_state *st = s->st;
  uint32_t i;
  if (!st) return;
  for (i = 0; i < st->nseg; ++i)
    if (st->seg[i].fd >= 0) close(st->seg[i].fd);
  PER_FREE(st->seg, st->ctx);
  PER_FREE(st->rec, st->ctx);
  PER_FREE(st->ent, st->ctx);
  PER_FREE(st->ring, st->ctx);
  PER_FREE(st->iota, st->ctx);
  PER_FREE(st->pos, st->ctx);
  PER_FREE(st->ids, st->ctx);
  PER_FREE(st->miss, st->ctx);
  PER_FREE(st->rbuf, st->ctx);
  PER_FREE(st->dir, st->ctx);
  if (st->log_fd >= 0) close(st->log_fd);
  if (st->json_fd >= 0) close(st->json_fd);
  PER_FREE(st->dirty, st->ctx);
  PER_FREE(st->ck_perm, st->ctx);
  PER_FREE(st->lbuf, st->ctx);
  pthread_cond_destroy(&st->cv_room);
  pthread_cond_destroy(&st->cv_work);
  pthread_cond_destroy(&st->cv_idle);
  pthread_mutex_destroy(&st->mu);
  PER_FREE(st, st->ctx);
  s->st = NULL;
}

PERDEF void per_store_free(per_store *s) {
  if (!s) return;
  if (s->st) per_store_stop_writer(s);
  peri_store_release(s);
  per_buffer_free(&s->index);
  memset(s, 0, sizeof *s);
}

static per_status peri_store_init_fail(per_store *s, per_status r) {
  char keep[256];
  memcpy(keep, s->error, sizeof keep);
  peri_store_release(s);
  per_buffer_free(&s->index);
  memset(s, 0, sizeof *s);
  memcpy(s->error, keep, sizeof keep);
  return r;
}

PERDEF per_status per_store_init(per_store *s, const char *dir,
                                 const per_store_config *cfg, uint32_t flags,
                                 void *alloc_ctx) {
  struct peri_store_state *st;
  per_config ic;
  per_status r;
  struct stat sb;
  char *idx;
  uint64_t ring, n;
  uint32_t i;
  if (!s) return PER_ERR_NULL;
  memset(s, 0, sizeof *s);
  if (!dir || !cfg)
    return peri_store_fail(s->error, PER_ERR_NULL, "%s is NULL",
                           dir ? "cfg" : "dir");
  if (flags & ~(uint32_t)(PER_STORE_RESUME | PER_STORE_LOAD_QUICK))
    return peri_store_fail(s->error, PER_ERR_ARG, "unknown flags 0x%x", flags);
  if (cfg->buffer.seq_len != 0)
    return peri_store_fail(s->error, PER_ERR_ARG,
                           "seq_len %u: a store draws samples, not sequences",
                           cfg->buffer.seq_len);
  if (cfg->staging_bytes < 8 || cfg->staging_bytes > ((uint64_t)1 << 48))
    return peri_store_fail(s->error, PER_ERR_ARG,
                           "staging_bytes %llu is not in 8 .. 2^48",
                           (unsigned long long)cfg->staging_bytes);
  if (cfg->cache_bytes > ((uint64_t)1 << 48))
    return peri_store_fail(s->error, PER_ERR_ARG,
                           "cache_bytes %llu is above 2^48",
                           (unsigned long long)cfg->cache_bytes);
  if (cfg->segment_bytes < 4096)
    return peri_store_fail(s->error, PER_ERR_ARG,
                           "segment_bytes %llu is below 4096",
                           (unsigned long long)cfg->segment_bytes);
  if (cfg->layout && strlen(cfg->layout) >= PER_LAYOUT_MAX)
    return peri_store_fail(s->error, PER_ERR_ARG, "layout of %u chars or more",
                           PER_LAYOUT_MAX);
  ic = cfg->buffer;
  ic.item_size = 4; /* the index's item: a sample's position */
  if (cfg->buffer.item_size == 0)
    return peri_store_fail(s->error, PER_ERR_ARG, "item_size 0");
  r = per_buffer_init(&s->index, &ic, alloc_ctx);
  if (r != PER_OK) {
    memcpy(s->error, s->index.error, sizeof s->index.error);
    memset(&s->index, 0, sizeof s->index);
    return r;
  }
  if (cfg->layout && cfg->layout[0])
    per_buffer_set_layout(&s->index, cfg->layout);
  s->item_size = cfg->buffer.item_size;
  s->flags = flags;
  st = (struct peri_store_state *)PER_MALLOC(sizeof *st, alloc_ctx);
  if (!st) {
    per_buffer_free(&s->index);
    return peri_store_fail(s->error, PER_ERR_NOMEM, "no memory");
  }
  memset(st, 0, sizeof *st);
  st->ctx = alloc_ctx;
  st->log_fd = st->json_fd = -1;
  peri_store_crc_init(st->crc);
  st->crc_hw = peri_store_crc_hw_ok();
  pthread_mutex_init(&st->mu, NULL);
  pthread_cond_init(&st->cv_room, NULL);
  pthread_cond_init(&st->cv_work, NULL);
  pthread_cond_init(&st->cv_idle, NULL);
  s->st = st;
  st->cfg = *cfg;
  st->cfg.layout = NULL; /* the index keeps it */
  st->open_seg = PERI_STORE_NONE;
  st->dir = (char *)PER_MALLOC(strlen(dir) + 1, alloc_ctx);
  ring =
      peri_store_pad8(cfg->staging_bytes) + peri_store_pad8(cfg->cache_bytes);
  n = cfg->staging_bytes / ((uint64_t)s->item_size + 1);
  if (n > cfg->buffer.capacity) n = cfg->buffer.capacity;
  if (n == 0) n = 1;
  st->max_n = (uint32_t)n;
  st->ring_bytes = ring;
  if (ring > (uint64_t)(size_t)-1 ||
      n * sizeof(uint32_t) > (uint64_t)(size_t)-1)
    return peri_store_init_fail(s, peri_store_fail(s->error, PER_ERR_NOMEM,
                                                   "the ring of %llu bytes "
                                                   "does not fit in memory",
                                                   (unsigned long long)ring));
  st->ring = (unsigned char *)PER_MALLOC((size_t)ring, alloc_ctx);
  st->iota = (uint32_t *)PER_MALLOC((size_t)n * sizeof(uint32_t), alloc_ctx);
  st->dirty = (uint64_t *)PER_MALLOC(
      ((size_t)cfg->buffer.capacity + 63) / 64 * 8, alloc_ctx);
  if (!st->dir || !st->ring || !st->iota || !st->dirty)
    return peri_store_init_fail(
        s, peri_store_fail(s->error, PER_ERR_NOMEM,
                           "no memory for the ring (%llu bytes)",
                           (unsigned long long)ring));
  memcpy(st->dir, dir, strlen(dir) + 1);
  for (i = 0; i < st->max_n; ++i) st->iota[i] = i;
  memset(st->dirty, 0, ((size_t)cfg->buffer.capacity + 63) / 64 * 8);
  peri_store_new_uuid(st->uuid);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return peri_store_init_fail(s, peri_store_fail(s->error, PER_ERR_IO,
                                                   "cannot make %s: %s", dir,
                                                   strerror(errno)));
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return peri_store_init_fail(
        s, peri_store_fail(s->error, PER_ERR_IO, "%s is not a directory", dir));
  idx = peri_store_path(alloc_ctx, dir, "index.bin");
  if (!idx)
    return peri_store_init_fail(
        s, peri_store_fail(s->error, PER_ERR_NOMEM, "no memory"));
  r = stat(idx, &sb) == 0 ? PER_ERR_IO : PER_OK;
  PER_FREE(idx, alloc_ctx);
  if (r != PER_OK && !(flags & PER_STORE_RESUME))
    return peri_store_init_fail(
        s, peri_store_fail(s->error, PER_ERR_IO,
                           "%s holds a store (index.bin): pass "
                           "PER_STORE_RESUME to load it, or use another "
                           "directory",
                           dir));
  if (r != PER_OK) {
    r = per_store_load(s, dir, 0, 1, flags & PER_STORE_LOAD_QUICK);
    if (r != PER_OK) return peri_store_init_fail(s, r);
  } else {
    peri_store_adopt(st);
  }
  s->error[0] = 0;
  return PER_OK;
}

/* ---- adds ---- */

/* per_store_add and per_store_add_fill: the samples from items, or by
   fill when items is NULL. */
static per_status peri_store_add(per_store *s, const void *items, uint32_t T,
                                 uint32_t B, const uint8_t *ends,
                                 uint32_t flags, uint64_t *id,
                                 void (*fill)(void *ctx, void *dst, uint32_t n),
                                 void *ctx) {
  struct peri_store_state *st;
  uint64_t n64, data, bytes, at, number, tid;
  uint32_t n, j, b, max_ep = 0, cap, size, k, slot, waited = 0;
  peri_store_rec *r;
  peri_store_ent *e;
  per_status res;
  if (!s || !s->st) return PER_ERR_NULL;
  st = s->st;
  s->error[0] = 0;
  if (!items && !fill)
    return peri_store_fail(s->error, PER_ERR_NULL, "items is NULL");
  if (flags & ~(uint32_t)PER_STORE_NOWAIT)
    return peri_store_fail(s->error, PER_ERR_ARG, "unknown flags 0x%x", flags);
  n64 = (uint64_t)T * B;
  if (T == 0 || B == 0)
    return peri_store_fail(s->error, PER_ERR_ARG,
                           "T %u, B %u: both must be "
                           ">= 1",
                           T, B);
  if (n64 > s->index.cfg.capacity)
    return peri_store_fail(s->error, PER_ERR_ARG,
                           "trajectory of %llu "
                           "samples (T %u x B %u) is above the capacity %u",
                           (unsigned long long)n64, T, B,
                           s->index.cfg.capacity);
  n = (uint32_t)n64;
  data = n64 * s->item_size + n64;
  bytes = peri_store_pad8(data);
  if (bytes > st->cfg.staging_bytes || n > st->max_n)
    return peri_store_fail(s->error, PER_ERR_ARG,
                           "trajectory of %llu bytes "
                           "(%u samples of %u bytes, and their ends) is above "
                           "staging_bytes %llu",
                           (unsigned long long)bytes, n, s->item_size,
                           (unsigned long long)st->cfg.staging_bytes);
  if (ends)
    for (j = 0; j < n; ++j)
      if (ends[j] > PER_END_TRUNCATED)
        return peri_store_fail(s->error, PER_ERR_ARG,
                               "ends[%u] is %u, not a PER_END_*", j,
                               (unsigned)ends[j]);
  if (ends) /* the longest run of one environment's steps */
    for (b = 0; b < B; ++b) {
      uint32_t run = 0, t;
      for (t = 0; t < T; ++t) {
        ++run;
        if (ends[(size_t)t * B + b] != PER_END_NONE) {
          if (run > max_ep) max_ep = run;
          run = 0;
        }
      }
      if (run > max_ep) max_ep = run;
    }
  else max_ep = T;

  pthread_mutex_lock(&st->mu);
  res = peri_store_reserve(st);
  for (;;) {
    int did;
    if (res != PER_OK) break;
    if (st->staged + bytes <= st->cfg.staging_bytes) {
      at = peri_store_ring_place(st, bytes);
      if (at != UINT64_MAX) break;
      if (st->en > 0 && st->ent[st->eh].state == PERI_STORE_DONE) {
        peri_store_ring_pop(st);
        continue;
      }
    }
    if (flags & PER_STORE_NOWAIT) {
      ++st->stats.busy;
      pthread_mutex_unlock(&st->mu);
      return peri_store_fail(s->error, PER_ERR_BUSY,
                             "the staging area is "
                             "full (%llu bytes staged): try again",
                             (unsigned long long)st->staged);
    }
    if (st->writer_on) {
      if (!waited) ++st->stats.waits;
      waited = 1;
      pthread_cond_signal(&st->cv_work);
      pthread_cond_wait(&st->cv_room, &st->mu);
      continue;
    }
    res = peri_store_append(s, &did, s->error);
    if (res == PER_OK && !did) /* cannot happen: room is held by staged */
      res = peri_store_fail(s->error, PER_ERR_CORRUPT,
                            "no room and nothing "
                            "staged");
  }
  if (res != PER_OK) {
    pthread_mutex_unlock(&st->mu);
    if (res == PER_ERR_NOMEM && !s->error[0])
      peri_store_fail(s->error, res, "no memory for the index");
    return res;
  }
  /* the ring entry, being copied into */
  number = st->e0 + st->en;
  e = &st->ent[st->eh + st->en++];
  e->id = tid = s->index.trajs;
  e->off = at;
  e->bytes = bytes;
  e->state = PERI_STORE_COPYING;
  st->staged += bytes;
  ++st->staged_n;
  pthread_mutex_unlock(&st->mu);
  if (items) memcpy(st->ring + at, items, (size_t)n * s->item_size);
  else fill(ctx, st->ring + at, n);
  if (ends) memcpy(st->ring + at + (size_t)n * s->item_size, ends, n);
  else memset(st->ring + at + (size_t)n * s->item_size, 0, n);
  memset(st->ring + at + data, 0, (size_t)(bytes - data));

  pthread_mutex_lock(&st->mu);
  /* the samples this add evicts: the oldest (size + n - capacity) */
  cap = s->index.cfg.capacity;
  size = s->index.size;
  if ((uint64_t)size + n > cap) {
    k = size + n - cap;
    slot = (uint32_t)(((uint64_t)s->index.pos + cap - size) % cap);
    while (k > 0) {
      uint64_t t = peri_store_slot_traj(&s->index, slot);
      uint32_t run = 0;
      while (k > 0 && peri_store_slot_traj(&s->index, slot) == t) {
        ++run;
        --k;
        slot = slot + 1 == cap ? 0 : slot + 1;
      }
      r = peri_store_find(st, t);
      if (r) r->live -= run < r->live ? run : r->live;
    }
  }
  slot = s->index.pos;
  res = per_buffer_add_steps(&s->index, st->iota, n, ends);
  PER_ASSERT(res == PER_OK); /* its arguments were checked */
  for (j = 0; j < n; ++j, slot = slot + 1 == cap ? 0 : slot + 1)
    st->dirty[slot >> 6] |= (uint64_t)1 << (slot & 63);
  r = &st->rec[st->rh + st->rn++];
  memset(r, 0, sizeof *r);
  r->id = tid;
  peri_store_traj_uuid(st->uuid, tid, r->uuid);
  r->n = n;
  r->T = T;
  r->B = B;
  r->max_ep = max_ep;
  r->live = n;
  r->seg = PERI_STORE_NONE;
  r->cached = 1;
  r->ring = at;
  peri_store_drop_dead(st);
  e = peri_store_entry(st, number);
  e->state = PERI_STORE_STAGED;
  pthread_cond_signal(&st->cv_work);
  pthread_mutex_unlock(&st->mu);
  if (id) *id = tid;
  return PER_OK;
}

PERDEF per_status per_store_add(per_store *s, const void *items, uint32_t T,
                                uint32_t B, const uint8_t *ends, uint32_t flags,
                                uint64_t *id) {
  if (s && s->st && !items) {
    s->error[0] = 0;
    return peri_store_fail(s->error, PER_ERR_NULL, "items is NULL");
  }
  return peri_store_add(s, items, T, B, ends, flags, id, NULL, NULL);
}

PERDEF per_status per_store_add_fill(
    per_store *s, uint32_t T, uint32_t B, const uint8_t *ends, uint32_t flags,
    uint64_t *id, void (*fill)(void *ctx, void *dst, uint32_t n), void *ctx) {
  if (s && s->st && !fill) {
    s->error[0] = 0;
    return peri_store_fail(s->error, PER_ERR_NULL, "fill is NULL");
  }
  return peri_store_add(s, NULL, T, B, ends, flags, id, fill, ctx);
}

/* ---- the writer ---- */

PERDEF per_status per_store_write(per_store *s) {
  struct peri_store_state *st;
  per_status r = PER_OK;
  int did = 1;
  if (!s || !s->st) return PER_ERR_NULL;
  st = s->st;
  s->error[0] = 0;
  pthread_mutex_lock(&st->mu);
  while (r == PER_OK && did) r = peri_store_append(s, &did, s->error);
  pthread_mutex_unlock(&st->mu);
  return r;
}

PERDEF per_status per_store_run_writer(per_store *s) {
  struct peri_store_state *st;
  per_status r = PER_OK;
  if (!s || !s->st) return PER_ERR_NULL;
  st = s->st;
  pthread_mutex_lock(&st->mu);
  if (st->writer_on) {
    pthread_mutex_unlock(&st->mu);
    return PER_ERR_ARG;
  }
  st->writer_on = 1;
  st->werr[0] = 0;
  while (!st->stop) {
    int did;
    r = peri_store_append(s, &did, st->werr);
    if (r != PER_OK) break;
    if (!did) pthread_cond_wait(&st->cv_work, &st->mu);
  }
  st->writer_on = 0;
  st->stop = 0;                         /* consumed: a later run_writer runs */
  pthread_cond_broadcast(&st->cv_room); /* adds now write themselves */
  pthread_cond_broadcast(&st->cv_idle);
  pthread_mutex_unlock(&st->mu);
  return r;
}

PERDEF void per_store_writer_error(per_store *s, char *out, size_t n) {
  if (!out || n == 0) return;
  out[0] = 0;
  if (!s || !s->st) return;
  pthread_mutex_lock(&s->st->mu);
  snprintf(out, n, "%s", s->st->werr);
  pthread_mutex_unlock(&s->st->mu);
}

PERDEF void per_store_stop_writer(per_store *s) {
  struct peri_store_state *st;
  if (!s || !s->st) return;
  st = s->st;
  pthread_mutex_lock(&st->mu);
  st->stop = 1;
  pthread_cond_broadcast(&st->cv_work);
  while (st->writer_on) pthread_cond_wait(&st->cv_idle, &st->mu);
  pthread_mutex_unlock(&st->mu);
}

/* ---- sampling ---- */

static int peri_store_miss_cmp(const void *a, const void *b) {
  const peri_store_miss *x = (const peri_store_miss *)a;
  const peri_store_miss *y = (const peri_store_miss *)b;
  if (x->seg != y->seg) return x->seg < y->seg ? -1 : 1;
  if (x->off != y->off) return x->off < y->off ? -1 : 1;
  return x->j < y->j ? -1 : x->j > y->j;
}

/* Room for a batch of B in the sample workspace. */
static per_status peri_store_scratch(struct peri_store_state *st, uint32_t B,
                                     size_t isz) {
  if (B <= st->scratch_b) return PER_OK;
  PER_FREE(st->pos, st->ctx);
  PER_FREE(st->ids, st->ctx);
  PER_FREE(st->miss, st->ctx);
  PER_FREE(st->rbuf, st->ctx);
  st->scratch_b = 0;
  st->rbuf_bytes =
      (size_t)B * isz < ((size_t)1 << 20) ? (size_t)B * isz : ((size_t)1 << 20);
  if (st->rbuf_bytes < isz) st->rbuf_bytes = isz;
  st->pos = (uint32_t *)PER_MALLOC((size_t)B * sizeof(uint32_t), st->ctx);
  st->ids = (uint64_t *)PER_MALLOC((size_t)B * sizeof(uint64_t), st->ctx);
  st->miss = (peri_store_miss *)PER_MALLOC((size_t)B * sizeof(peri_store_miss),
                                           st->ctx);
  st->rbuf = (unsigned char *)PER_MALLOC(st->rbuf_bytes, st->ctx);
  if (!st->pos || !st->ids || !st->miss || !st->rbuf) {
    PER_FREE(st->pos, st->ctx);
    PER_FREE(st->ids, st->ctx);
    PER_FREE(st->miss, st->ctx);
    PER_FREE(st->rbuf, st->ctx);
    st->pos = NULL;
    st->ids = NULL;
    st->miss = NULL;
    st->rbuf = NULL;
    return PER_ERR_NOMEM;
  }
  st->scratch_b = B;
  return PER_OK;
}

PERDEF per_status per_store_sample(per_store *s, uint32_t B,
                                   const per_sample_opts *opts, void *items_out,
                                   uint64_t *ids, float *weights) {
  struct peri_store_state *st;
  per_buffer_shared before;
  unsigned char *out = (unsigned char *)items_out;
  size_t isz;
  uint32_t j, nm = 0, i;
  per_status r;
  if (!s || !s->st) return PER_ERR_NULL;
  st = s->st;
  s->error[0] = 0;
  isz = s->item_size;
  if (opts && (opts->flags & PER_SAMPLE_SEQUENCES))
    return peri_store_fail(s->error, PER_ERR_ARG,
                           "PER_SAMPLE_SEQUENCES: a store draws samples");
  if (B > 0 && peri_store_scratch(st, B, isz) != PER_OK)
    return peri_store_fail(s->error, PER_ERR_NOMEM,
                           "no memory for a batch of %u", B);
  before = per_buffer_shared_of(&s->index);
  r = per_buffer_sample(&s->index, B, opts, st->pos, st->ids, weights);
  if (r != PER_OK) {
    memcpy(s->error, s->index.error, sizeof s->index.error);
    return r;
  }
  if (ids) memcpy(ids, st->ids, (size_t)B * sizeof *ids);
  if (!out) return PER_OK;
  pthread_mutex_lock(&st->mu);
  for (j = 0; j < B; ++j) {
    uint32_t slot = per_id_slot(st->ids[j]);
    const peri_store_rec *rec =
        peri_store_find(st, peri_store_slot_traj(&s->index, slot));
    uint32_t t = st->pos[j];
    PER_ASSERT(rec && t < rec->n);
    if (rec->cached) {
      memcpy(out + (size_t)j * isz, st->ring + rec->ring + (size_t)t * isz,
             isz);
      ++st->stats.cache_hits;
    } else {
      st->miss[nm].seg = rec->seg;
      st->miss[nm].fd = st->seg[rec->seg].fd;
      st->miss[nm].off = rec->off + PERI_STORE_HDR + (uint64_t)t * isz;
      st->miss[nm].j = j;
      ++nm;
    }
  }
  st->stats.cache_misses += nm;
  pthread_mutex_unlock(&st->mu);
  if (nm == 0) return PER_OK;
  /* the others from their segments: in file order, a run of contiguous
     samples in one read (of at most rbuf_bytes), each sample read once */
  qsort(st->miss, nm, sizeof *st->miss, peri_store_miss_cmp);
  for (i = 0; i < nm;) {
    const peri_store_miss *m0 = &st->miss[i];
    uint64_t end = m0->off + isz;
    uint32_t k = i + 1, q;
    int fd = m0->fd;
    unsigned char *dst;
    while (
        k < nm && st->miss[k].seg == m0->seg &&
        (st->miss[k].off == end - isz ||
         (st->miss[k].off == end && end + isz - m0->off <= st->rbuf_bytes))) {
      if (st->miss[k].off == end) end += isz;
      ++k;
    }
    dst = end - m0->off == isz ? out + (size_t)m0->j * isz : st->rbuf;
    if (peri_store_pread_all(fd, dst, (size_t)(end - m0->off), m0->off) != 0) {
      int e = errno;
      per_buffer_set_shared(&s->index, &before);
      pthread_mutex_lock(&st->mu);
      peri_store_fail(s->error, PER_ERR_IO,
                      "reading %llu bytes of %s/%s at offset %llu: %s",
                      (unsigned long long)(end - m0->off), st->dir,
                      st->seg[m0->seg].name, (unsigned long long)m0->off,
                      strerror(e));
      pthread_mutex_unlock(&st->mu);
      return PER_ERR_IO;
    }
    ++st->stats.reads;
    st->stats.read_bytes += end - m0->off;
    for (q = i; q < k; ++q) {
      unsigned char *to = out + (size_t)st->miss[q].j * isz;
      if (to != dst) memcpy(to, dst + (st->miss[q].off - m0->off), isz);
    }
    i = k;
  }
  return PER_OK;
}

PERDEF per_status per_store_update(per_store *s, const uint64_t *ids,
                                   const float *td, uint32_t n,
                                   uint32_t *stale) {
  per_status r;
  if (!s || !s->st) return PER_ERR_NULL;
  r = per_buffer_update(&s->index, ids, td, n, stale);
  if (ids) { /* the slots whose leaves may have changed */
    uint32_t i, slot;
    for (i = 0; i < n; ++i) {
      slot = (uint32_t)ids[i];
      if (slot < s->index.cfg.capacity)
        s->st->dirty[slot >> 6] |= (uint64_t)1 << (slot & 63);
    }
  }
  memcpy(s->error, s->index.error, sizeof s->index.error);
  return r;
}

/* ---- checkpoints ---- */

/* A growing text (the JSON files). */
typedef struct peri_store_text {
  char *p;
  size_t len, cap;
  int bad;
  void *ctx;
} peri_store_text;

static void peri_store_put(peri_store_text *t, const char *fmt, ...) {
  va_list ap;
  int n;
  if (t->bad) return;
  for (;;) {
    size_t room = t->cap - t->len;
    va_start(ap, fmt);
    n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? room : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->bad = 1;
      return;
    }
    if ((size_t)n < room) {
      t->len += (size_t)n;
      return;
    } else {
      size_t cap = (t->cap ? t->cap * 2 : 4096) + (size_t)n;
      char *q = (char *)PER_MALLOC(cap, t->ctx);
      if (!q) {
        t->bad = 1;
        return;
      }
      if (t->len) memcpy(q, t->p, t->len);
      PER_FREE(t->p, t->ctx);
      t->p = q;
      t->cap = cap;
    }
  }
}

/* A JSON string of s's text. */
static void peri_store_put_str(peri_store_text *t, const char *s) {
  peri_store_put(t, "\"");
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') peri_store_put(t, "\\%c", c);
    else if (c < 0x20) peri_store_put(t, "\\u%04x", c);
    else peri_store_put(t, "%c", c);
  }
  peri_store_put(t, "\"");
}

/* trajectory_index.json: one JSON object, {header "trajectories": [
   rows ]}, whose header has a fixed length and whose rows' live counts a
   fixed width, so that a checkpoint edits it in place: rows dropped
   become spaces and the header moves down to the first row still
   stored, a changed live count is written over the old one, rows added
   go before the closing text. A full rewrite (atomic, as index.bin)
   when it has no open copy or its spaces outgrow its rows. */
#define PERI_STORE_JSON_TAIL "\n]}\n"

/* The header text into out (128 bytes); returns its length. */
static size_t peri_store_json_head(const struct peri_store_state *st,
                                   char *out) {
  int n = snprintf(out, 128,
                   "{\"format\": \"per-store\", \"format_version\": %u, "
                   "\"checkpoint\": %-20llu, \"trajectories\": [",
                   PERI_STORE_VERSION, (unsigned long long)st->ckpt_seq);
  return n > 0 ? (size_t)n : 0;
}

/* Trajectory r's row (',' first, or ' ' for the array's first) into out
   (512 bytes); *live_at: where its live count's 10 characters begin. */
static size_t peri_store_json_row(const struct peri_store_state *st,
                                  const peri_store_rec *r, int first, char *out,
                                  size_t *live_at) {
  char u[37];
  int a, b;
  peri_store_uuid_text(r->uuid, u);
  a = snprintf(out, 512,
               "%c\n{\"uuid\": \"%s\", \"trajectory_id\": %llu, "
               "\"num_samples\": %u, \"shape\": [%u, %u], "
               "\"max_episode_length\": %u, \"live_samples\": ",
               first ? ' ' : ',', u, (unsigned long long)r->id, r->n, r->T,
               r->B, r->max_ep);
  b = snprintf(out + a, (size_t)(512 - a),
               "%-10u, \"segment\": \"%s\", \"offset\": %llu, "
               "\"crc32c\": %u}",
               r->live, st->seg[r->seg].name, (unsigned long long)r->off,
               r->crc);
  *live_at = (size_t)a;
  return (size_t)(a + b);
}

/* The rows of the trajectories from the from-th on (not in the file
   yet), then the closing text, into t (its start at file offset `at`). */
static void peri_store_json_new_rows(struct peri_store_state *st,
                                     peri_store_text *t, uint64_t at,
                                     size_t from) {
  char row[512];
  size_t i, live_at;
  int first = st->json_rows == 0;
  for (i = from; i < st->rn; ++i) {
    peri_store_rec *r = &st->rec[st->rh + i];
    (void)peri_store_json_row(st, r, first, row, &live_at);
    r->j_off = at + t->len;
    r->j_live_at = r->j_off + live_at;
    r->j_live = r->live;
    peri_store_put(t, "%s", row);
    first = 0;
    ++st->json_rows;
  }
  peri_store_put(t, "%s", PERI_STORE_JSON_TAIL);
}

/* trajectory_index.json written whole, atomically. 0, or -1 with errno. */
static int peri_store_json_whole(per_store *s) {
  struct peri_store_state *st = s->st;
  peri_store_text t;
  char head[128], *path;
  size_t i;
  int w;
  peri_store_json_head(st, head);
  if (st->json_fd >= 0) close(st->json_fd);
  st->json_fd = -1;
  memset(&t, 0, sizeof t);
  t.ctx = st->ctx;
  peri_store_put(&t, "%s", head);
  for (i = 0; i < st->rn; ++i) st->rec[st->rh + i].j_off = 0;
  st->json_rows = 0;
  peri_store_json_new_rows(st, &t, 0, 0); /* t holds the header */
  if (t.bad) {
    PER_FREE(t.p, st->ctx);
    errno = ENOMEM;
    return -1;
  }
  w = peri_store_put_file(st->ctx, st->dir, "trajectory_index.json",
                          &st->tmp_counter, t.p, t.len);
  PER_FREE(t.p, st->ctx);
  if (w != 0) return -1;
  st->json_head = 0;
  st->json_tail = t.len - strlen(PERI_STORE_JSON_TAIL);
  path = peri_store_path(st->ctx, st->dir, "trajectory_index.json");
  st->json_fd = path ? open(path, O_WRONLY) : -1; /* -1: whole next time */
  PER_FREE(path, st->ctx);
  return 0;
}

/* trajectory_index.json brought to the store's trajectories in place
   (not synced: the index is the checkpoint, this file its account). 0,
   or -1 with errno. */
static int peri_store_json_edit(per_store *s) {
  struct peri_store_state *st = s->st;
  char head[128], blank[256], num[16];
  peri_store_text t;
  size_t h = peri_store_json_head(st, head), nnew = 0;
  uint64_t target, at;
  int fd = st->json_fd, r;
  peri_store_rec *q;
  memset(blank, ' ', sizeof blank);
  /* the rows the file has: the stored trajectories but the newest added
     since (no row yet); those of the dropped, the oldest, go: the
     header moves down to the first row still there */
  while (nnew < st->rn && !st->rec[st->rh + st->rn - 1 - nnew].j_off) ++nnew;
  st->json_rows = (uint32_t)(st->rn - nnew);
  target = st->json_rows ? st->rec[st->rh].j_off : st->json_tail;
  if (target - h != st->json_head) {
    for (at = st->json_head; at < target - h;) {
      size_t k = target - h - at < sizeof blank ? (size_t)(target - h - at)
                                                : sizeof blank;
      if (peri_store_pwrite_all(fd, blank, k, at) != 0) return -1;
      at += k;
    }
    if (st->json_rows && peri_store_pwrite_all(fd, " ", 1, target) != 0)
      return -1;
    st->json_head = target - h;
  }
  if (peri_store_pwrite_all(fd, head, h, st->json_head) != 0) return -1;
  /* the oldest's live count (eviction lowers no other's) */
  q = st->json_rows ? &st->rec[st->rh] : NULL;
  if (q && q->j_live != q->live) {
    snprintf(num, sizeof num, "%-10u", q->live);
    if (peri_store_pwrite_all(fd, num, 10, q->j_live_at) != 0) return -1;
    q->j_live = q->live;
  }
  /* rows added */
  memset(&t, 0, sizeof t);
  t.ctx = st->ctx;
  peri_store_json_new_rows(st, &t, st->json_tail, st->rn - nnew);
  r = t.bad ? -1 : peri_store_pwrite_all(fd, t.p, t.len, st->json_tail);
  if (t.bad) errno = ENOMEM;
  if (r == 0) st->json_tail += t.len - strlen(PERI_STORE_JSON_TAIL);
  PER_FREE(t.p, st->ctx);
  return r;
}

static per_status peri_store_json(per_store *s) {
  struct peri_store_state *st = s->st;
  peri_store_text t;
  char u[37];
  int bad;
  if (st->json_fd < 0 || st->json_head > st->json_tail - st->json_head)
    bad = peri_store_json_whole(s);
  else bad = peri_store_json_edit(s);
  if (bad) {
    int e = errno;
    if (st->json_fd >= 0) close(st->json_fd);
    st->json_fd = -1;
    return peri_store_fail(s->error, PER_ERR_IO,
                           "the checkpoint stands, but "
                           "%s/trajectory_index.json was not written: %s",
                           st->dir, strerror(e));
  }
  memset(&t, 0, sizeof t);
  t.ctx = st->ctx;
  peri_store_uuid_text(st->uuid, u);
  peri_store_put(&t,
                 "{\n  \"format\": \"per-store\",\n  \"format_version\": %u,"
                 "\n  \"checkpoint\": %llu,\n  \"store_uuid\": \"%s\",\n"
                 "  \"item_size\": %u,\n  \"layout\": ",
                 PERI_STORE_VERSION, (unsigned long long)st->ckpt_seq, u,
                 s->item_size);
  peri_store_put_str(&t, s->index.layout);
  peri_store_put(&t,
                 ",\n  \"capacity\": %u,\n  \"size\": %u,\n"
                 "  \"num_trajectories\": %llu,\n  \"total_samples\": %llu,\n"
                 "  \"trajectory_counter\": %llu,\n  \"seed\": %llu,\n"
                 "  \"alpha\": %.17g,\n  \"beta0\": %.17g,\n  \"beta1\": %.17g,"
                 "\n  \"beta_steps\": %llu,\n  \"eps\": %.17g,\n"
                 "  \"sample_calls\": %llu\n}\n",
                 s->index.cfg.capacity, s->index.size,
                 (unsigned long long)st->rn, (unsigned long long)s->index.added,
                 (unsigned long long)s->index.trajs,
                 (unsigned long long)s->index.cfg.seed, s->index.cfg.alpha,
                 s->index.cfg.beta0, s->index.cfg.beta1,
                 (unsigned long long)s->index.cfg.beta_steps, s->index.cfg.eps,
                 (unsigned long long)s->index.step);
  bad = t.bad || peri_store_put_file(st->ctx, st->dir, "metadata.json",
                                     &st->tmp_counter, t.p, t.len) != 0;
  PER_FREE(t.p, st->ctx);
  if (bad)
    return peri_store_fail(s->error, PER_ERR_IO,
                           "the checkpoint stands, but "
                           "%s/metadata.json was not written: %s",
                           st->dir, strerror(errno));
  return PER_OK;
}

/* segments.pending: the names of the segment files a load links into
   the directory or supersedes there, one a line, written before the
   load links anything, so that a crash between a load and the next
   checkpoint leaves nothing the sweep cannot name. Read whole into a
   new NUL-terminated string (NULL: none, or unreadable). */
static char *peri_store_journal_read(struct peri_store_state *st) {
  char *p = peri_store_path(st->ctx, st->dir, "segments.pending"), *t = NULL;
  struct stat sb;
  int fd = p ? open(p, O_RDONLY) : -1;
  PER_FREE(p, st->ctx);
  if (fd < 0) return NULL;
  if (fstat(fd, &sb) == 0 && sb.st_size >= 0 && sb.st_size < (1 << 30)) {
    t = (char *)PER_MALLOC((size_t)sb.st_size + 1, st->ctx);
    if (t && peri_store_pread_all(fd, t, (size_t)sb.st_size, 0) == 0)
      t[sb.st_size] = 0;
    else {
      PER_FREE(t, st->ctx);
      t = NULL;
    }
  }
  close(fd);
  return t;
}

/* Add n names to segments.pending (atomically). 0, or -1 with errno. */
static int peri_store_journal_add(struct peri_store_state *st,
                                  char (*names)[PERI_STORE_NAME], uint32_t n) {
  char *old = peri_store_journal_read(st), *t;
  size_t ol = old ? strlen(old) : 0, at = ol;
  uint32_t i;
  int r;
  t = (char *)PER_MALLOC(ol + (size_t)n * PERI_STORE_NAME + 1, st->ctx);
  if (!t) {
    PER_FREE(old, st->ctx);
    errno = ENOMEM;
    return -1;
  }
  if (ol) memcpy(t, old, ol);
  PER_FREE(old, st->ctx);
  for (i = 0; i < n; ++i) {
    size_t l = strlen(names[i]);
    memcpy(t + at, names[i], l);
    t[at + l] = '\n';
    at += l + 1;
  }
  r = peri_store_put_file(st->ctx, st->dir, "segments.pending",
                          &st->tmp_counter, t, at);
  PER_FREE(t, st->ctx);
  return r == 0 ? 0 : -1;
}

static int peri_store_known(const struct peri_store_state *st,
                            const char *name);

/* The sweep's part for segments.pending: every file it names that the
   table does not is deleted, then the journal. */
static void peri_store_journal_sweep(struct peri_store_state *st) {
  char *t = peri_store_journal_read(st), *line, *p;
  if (!t) return;
  for (line = t; *line;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    if (strncmp(line, "seg-", 4) == 0 && !strchr(line, '/') &&
        !peri_store_known(st, line)) {
      p = peri_store_path(st->ctx, st->dir, line);
      if (p) unlink(p);
      PER_FREE(p, st->ctx);
    }
    if (!nl) break;
    line = nl + 1;
  }
  PER_FREE(t, st->ctx);
  p = peri_store_path(st->ctx, st->dir, "segments.pending");
  if (p) unlink(p);
  PER_FREE(p, st->ctx);
}

/* Whether segment file name is in s's table now. */
static int peri_store_known(const struct peri_store_state *st,
                            const char *name) {
  uint32_t i;
  for (i = 0; i < st->nseg; ++i)
    if (st->seg[i].fd >= 0 && strcmp(st->seg[i].name, name) == 0) return 1;
  return 0;
}

/* After a checkpoint stands: delete the segment files of the directory
   that it does not name and no stored trajectory needs. Those this
   store dropped (its table), those a load linked or superseded
   (segments.pending), and
   files of this store's own line (its uuid in the name) that a crash or
   a failed deletion left; never another store's files. */
static void peri_store_sweep(struct peri_store_state *st) {
  DIR *d;
  struct dirent *de;
  uint32_t i;
  char own[48], u[37];
  for (i = 0; i < st->nseg; ++i) {
    peri_store_seg *g = &st->seg[i];
    if (g->fd >= 0 && !g->in_ckpt && !g->open && g->live == 0)
      peri_store_seg_drop(st, i);
  }
  peri_store_journal_sweep(st);
  peri_store_uuid_text(st->uuid, u);
  snprintf(own, sizeof own, "seg-%s-", u);
  d = opendir(st->dir);
  if (!d) return;
  while ((de = readdir(d)) != NULL) {
    const char *nm = de->d_name;
    size_t l = strlen(nm);
    if (l < 8 || strncmp(nm, own, strlen(own)) != 0 ||
        strcmp(nm + l - 4, ".per") != 0 || peri_store_known(st, nm))
      continue;
    {
      char *p = peri_store_path(st->ctx, st->dir, nm);
      if (p) unlink(p);
      PER_FREE(p, st->ctx);
    }
  }
  closedir(d);
}

/* index.bin's header for checkpoint seq (PERI_STORE_IDX_HDR bytes). */
static void peri_store_idx_header(const per_store *s, unsigned char *h,
                                  uint64_t seq, uint32_t nsel, uint64_t rn,
                                  uint64_t snap_len) {
  memset(h, 0, PERI_STORE_IDX_HDR);
  memcpy(h, peri_store_idx_magic, 8);
  peri_put32(h + 8, PERI_STORE_VERSION);
  peri_put32(h + 12, 0x01020304u);
  peri_put32(h + 16, PERI_STORE_IDX_HDR);
  peri_put32(h + 20, s->item_size);
  memcpy(h + 24, s->st->uuid, 16);
  peri_put64(h + 40, seq);
  peri_put32(h + 48, s->st->next_seg);
  peri_put32(h + 52, nsel);
  peri_put64(h + 56, rn);
  peri_put64(h + 64, snap_len);
  peri_put64(h + 72, s->index.added);
  peri_put64(h + 80, s->index.trajs);
}

/* The rows of the segments that segmap selects, at p; returns the end. */
static unsigned char *peri_store_seg_rows(const struct peri_store_state *st,
                                          const uint32_t *segmap,
                                          unsigned char *p) {
  uint32_t i;
  for (i = 0; i < st->nseg; ++i) {
    const peri_store_seg *g = &st->seg[i];
    if (segmap[i] == PERI_STORE_NONE) continue;
    memset(p, 0, PERI_STORE_SEG_ROW);
    memcpy(p, g->name, strlen(g->name));
    peri_put64(p + 64, g->len);
    peri_put64(p + 72, g->live);
    p += PERI_STORE_SEG_ROW;
  }
  return p;
}

/* A trajectory's row at q (PERI_STORE_REC_ROW bytes). */
static void peri_store_rec_row(const peri_store_rec *rr, const uint32_t *segmap,
                               unsigned char *q) {
  memset(q, 0, PERI_STORE_REC_ROW);
  peri_put64(q, rr->id);
  memcpy(q + 8, rr->uuid, 16);
  peri_put32(q + 24, rr->n);
  peri_put32(q + 28, rr->T);
  peri_put32(q + 32, rr->B);
  peri_put32(q + 36, rr->max_ep);
  peri_put32(q + 40, rr->live);
  peri_put32(q + 44, segmap[rr->seg]);
  peri_put64(q + 48, rr->off);
  peri_put32(q + 56, rr->crc);
}

/* Room for n bytes in st->lbuf. 0, or -1 (no memory). */
static int peri_store_lbuf(struct peri_store_state *st, size_t n) {
  unsigned char *p;
  if (n <= st->lbuf_cap) return 0;
  p = (unsigned char *)PER_MALLOC(n, st->ctx);
  if (!p) return -1;
  PER_FREE(st->lbuf, st->ctx);
  st->lbuf = p;
  st->lbuf_cap = n;
  return 0;
}

/* The state the next checkpoint's index.log record is made against:
   every stored trajectory and slot as the directory's checkpoint has
   them. */
static void peri_store_log_mark(per_store *s) {
  struct peri_store_state *st = s->st;
  const per_buffer *b = &s->index;
  size_t i;
  memset(st->dirty, 0, ((size_t)b->cfg.capacity + 63) / 64 * 8);
  for (i = 0; i < st->rn; ++i)
    st->rec[st->rh + i].ck_live = st->rec[st->rh + i].live;
  if (b->swap.perm && st->ck_perm) {
    memcpy(st->ck_perm, b->swap.perm, (size_t)b->size * 4);
    memset(st->ck_perm + b->size, 0, (size_t)(b->cfg.capacity - b->size) * 4);
  }
}

/* After index.bin was replaced (base_len bytes): a new index.log (its
   header names that checkpoint), which the next checkpoints append to.
   On failure log_ok stays 0 and the next checkpoint writes index.bin
   again; the old index.log names an older checkpoint and is ignored. */
static void peri_store_log_start(per_store *s, uint64_t base_len) {
  struct peri_store_state *st = s->st;
  const per_buffer *b = &s->index;
  unsigned char h[PERI_STORE_LOG_HDR];
  char *path;
  int fd;
  st->log_ok = 0;
  if (st->log_fd >= 0) close(st->log_fd);
  st->log_fd = -1;
  if (b->swap.perm && !st->ck_perm) {
    st->ck_perm = (uint32_t *)PER_MALLOC((size_t)b->cfg.capacity * 4, st->ctx);
    if (!st->ck_perm) return;
  }
  memset(h, 0, sizeof h);
  memcpy(h, peri_store_log_magic, 8);
  peri_put32(h + 8, PERI_STORE_VERSION);
  peri_put32(h + 12, 0x01020304u);
  memcpy(h + 16, st->uuid, 16);
  peri_put64(h + 32, st->ckpt_seq);
  peri_put32(h + 60, peri_store_crc(st, 0, h, 60));
  if (peri_store_put_file(st->ctx, st->dir, "index.log", &st->tmp_counter, h,
                          sizeof h) != 0)
    return;
  path = peri_store_path(st->ctx, st->dir, "index.log");
  fd = path ? open(path, O_RDWR) : -1;
  PER_FREE(path, st->ctx);
  if (fd < 0) return;
  st->log_fd = fd;
  st->log_len = PERI_STORE_LOG_HDR;
  st->base_len = base_len;
  peri_store_log_mark(s);
  st->log_ok = 1;
}

/* The checkpoint as one record appended to index.log: index.bin's
   header and segment table as they would be now, the trajectories
   dropped (those below the first stored id), those whose live count
   changed, those added, then the index's checkpoint header and the
   bytes of the slots changed since the last checkpoint (those added or
   updated since; the swap permutation compared whole), in the layout
   of per.h's checkpoints. Committed once the record is fsynced; on
   failure the log is cut back to its committed length and the next
   checkpoint writes index.bin whole. */
static per_status peri_store_ckpt_delta(per_store *s, const uint32_t *segmap,
                                        uint32_t nsel) {
  struct peri_store_state *st = s->st;
  const per_buffer *b = &s->index;
  uint32_t cap = b->cfg.capacity, size = b->size, isz = b->cfg.item_size;
  uint32_t ll = (uint32_t)strlen(b->layout), perm = b->swap.perm != NULL;
  uint32_t nw = (cap + 63) / 64, w, w2, npatch = 0, n;
  size_t per = (size_t)isz + 4u + sizeof(per_real) + 1u + 4u, i, j, e;
  size_t nlive = 0, nnew = 0, words = 0, need, at, hlen, pat;
  uint64_t snap_len = peri_ckpt_bytes(PER_CKPT_VERSION, size, isz, perm, ll);
  unsigned char *p;
  int errnum;
  hlen = (size_t)peri_ckpt_bytes(PER_CKPT_VERSION, 0, isz, perm, ll) - 4;
  /* the trajectories changed since: those added (the newest, not in the
     checkpoint yet) and the oldest, whose live count eviction lowers
     (eviction takes the oldest samples first: no other stored
     trajectory loses any, and a load checks every live count) */
  while (nnew < st->rn && !st->rec[st->rh + st->rn - 1 - nnew].ck_live) ++nnew;
  nlive = st->rn > nnew && st->rec[st->rh].ck_live != st->rec[st->rh].live;
  for (w = 0; w < nw; ++w) words += st->dirty[w] != 0;
  need = 24 + PERI_STORE_IDX_HDR + (size_t)nsel * PERI_STORE_SEG_ROW + 24 +
         nlive * 16 + nnew * PERI_STORE_REC_ROW + 8 + hlen +
         words * (16 + 64 * per) +
         (perm ? (size_t)size * 4 + ((size_t)size / 64 + 1) * 16 : 0) + 12;
  if (peri_store_lbuf(st, need) != 0)
    return peri_store_fail(s->error, PER_ERR_NOMEM,
                           "no memory for the checkpoint (%llu bytes)",
                           (unsigned long long)need);
  p = st->lbuf;
  memset(p, 0, 24);
  peri_put32(p, PERI_STORE_LOG_REC);
  peri_put64(p + 8, st->ckpt_seq + 1);
  peri_store_idx_header(s, p + 24, st->ckpt_seq + 1, nsel, st->rn, snap_len);
  at = (size_t)(peri_store_seg_rows(st, segmap, p + 24 + PERI_STORE_IDX_HDR) -
                p);
  peri_put64(p + at, st->rn ? st->rec[st->rh].id : b->trajs);
  peri_put64(p + at + 8, nlive);
  peri_put64(p + at + 16, nnew);
  at += 24;
  if (nlive) {
    peri_put64(p + at, st->rec[st->rh].id);
    peri_put32(p + at + 8, st->rec[st->rh].live);
    peri_put32(p + at + 12, 0);
    at += 16;
  }
  for (i = st->rn - nnew; i < st->rn; ++i) {
    peri_store_rec_row(&st->rec[st->rh + i], segmap, p + at);
    at += PERI_STORE_REC_ROW;
  }
  peri_put32(p + at, (uint32_t)hlen);
  pat = at + 4; /* the number of patches, once known */
  at += 8;
  peri_ckpt_header(b, p + at);
  if (ll) memcpy(p + at + hlen - ll, b->layout, ll);
  at += hlen;
  for (w = 0; w < nw; w = w2) { /* runs of words with a changed slot */
    uint64_t first, end;
    w2 = w + 1;
    if (!st->dirty[w]) continue;
    while (w2 < nw && st->dirty[w2]) ++w2;
    first = (uint64_t)w * 64;
    end = (uint64_t)w2 * 64 < size ? (uint64_t)w2 * 64 : size;
    if (first >= end) continue;
    n = (uint32_t)(end - first);
    peri_put32(p + at, 0);
    peri_put32(p + at + 4, (uint32_t)first);
    peri_put32(p + at + 8, n);
    peri_put32(p + at + 12, 0);
    at += 16;
    memcpy(p + at, b->items + (size_t)first * isz, (size_t)n * isz);
    at += (size_t)n * isz;
    at = (size_t)(peri_put32s(p + at, b->gen + first, n) - p);
    at = (size_t)(peri_put_reals(p + at, b->tree.node + b->tree.leaves + first,
                                 n) -
                  p);
    memcpy(p + at, b->ends + first, n);
    at += n;
    at = (size_t)(peri_put32s(p + at, b->traj + first, n) - p);
    ++npatch;
  }
  for (i = 0; perm && i < size; i = j) { /* runs of changed 64-blocks */
    e = i + 64 < size ? i + 64 : size;
    j = e;
    if (memcmp(b->swap.perm + i, st->ck_perm + i, (e - i) * 4) == 0) continue;
    while (j < size) {
      e = j + 64 < size ? j + 64 : size;
      if (memcmp(b->swap.perm + j, st->ck_perm + j, (e - j) * 4) == 0) break;
      j = e;
    }
    peri_put32(p + at, 1);
    peri_put32(p + at + 4, (uint32_t)i);
    peri_put32(p + at + 8, (uint32_t)(j - i));
    peri_put32(p + at + 12, 0);
    at += 16;
    at = (size_t)(peri_put32s(p + at, b->swap.perm + i, (uint32_t)(j - i)) - p);
    memcpy(st->ck_perm + i, b->swap.perm + i, (j - i) * 4);
    ++npatch;
  }
  peri_put32(p + pat, npatch);
  peri_put64(p + 16, (uint64_t)(at - 24));
  peri_put32(p + at, peri_store_crc(st, 0, p, at));
  at += 4;
  while (at & 7) p[at++] = 0;
  if (peri_store_pwrite_all(st->log_fd, p, at, st->log_len) != 0 ||
      fsync(st->log_fd) != 0) {
    errnum = errno;
    st->log_ok = 0;
    if (ftruncate(st->log_fd, (off_t)st->log_len) == 0 &&
        fsync(st->log_fd) == 0)
      return peri_store_fail(s->error, PER_ERR_IO,
                             "appending to %s/index.log: %s; the last "
                             "checkpoint stands",
                             st->dir, strerror(errnum));
    return peri_store_fail(s->error, PER_ERR_IO,
                           "appending to %s/index.log: %s; it could not "
                           "be cut back, and may hold this checkpoint",
                           st->dir, strerror(errnum));
  }
  st->log_len += at;
  memset(st->dirty, 0, (size_t)nw * 8);
  if (st->rn) st->rec[st->rh].ck_live = st->rec[st->rh].live;
  for (i = st->rn - nnew; i < st->rn; ++i)
    st->rec[st->rh + i].ck_live = st->rec[st->rh + i].live;
  return PER_OK;
}

PERDEF per_status per_store_checkpoint(per_store *s, uint32_t flags) {
  struct peri_store_state *st;
  per_status r = PER_OK;
  uint32_t i, nsel = 0, *segmap = NULL;
  size_t snap_max, snap_len = 0, img_len = 0, at;
  unsigned char *img = NULL;
  int did = 1, w, errnum = 0, full = 0;
  if (!s || !s->st) return PER_ERR_NULL;
  st = s->st;
  s->error[0] = 0;
  if (flags & ~(uint32_t)PER_STORE_NO_JSON)
    return peri_store_fail(s->error, PER_ERR_ARG, "unknown flags 0x%x", flags);
  pthread_mutex_lock(&st->mu);
  while (r == PER_OK && did) r = peri_store_append(s, &did, s->error);
  while (st->appending) pthread_cond_wait(&st->cv_idle, &st->mu);
  pthread_mutex_unlock(&st->mu);
  if (r != PER_OK) return r;
  /* the writer is idle: nothing is staged, and only this thread adds */
  for (i = 0; i < st->nseg; ++i) {
    peri_store_seg *g = &st->seg[i];
    if (g->fd >= 0 && g->dirty) {
      if (fsync(g->fd) != 0)
        return peri_store_fail(s->error, PER_ERR_IO, "fsync of %s/%s: %s",
                               st->dir, g->name, strerror(errno));
      g->dirty = 0;
    }
  }
  if (st->new_files) {
    if (peri_store_dir_sync(st->dir) != 0)
      return peri_store_fail(s->error, PER_ERR_IO, "fsync of directory %s: %s",
                             st->dir, strerror(errno));
    st->new_files = 0;
  }
  /* index.bin: header, the segments that hold stored trajectories, the
     trajectories, the index's checkpoint */
  segmap =
      (uint32_t *)PER_MALLOC((size_t)(st->nseg ? st->nseg : 1) * 4, st->ctx);
  snap_max = per_buffer_snapshot_bytes(&s->index);
  if (!segmap) return peri_store_fail(s->error, PER_ERR_NOMEM, "no memory");
  for (i = 0; i < st->nseg; ++i)
    segmap[i] =
        st->seg[i].fd >= 0 && st->seg[i].live > 0 ? nsel++ : PERI_STORE_NONE;
  { /* the files the old checkpoint names and this one will not: journaled
       before the commit, so that a kill between the commit and the sweep
       leaves them named (segments.pending) */
    uint32_t nd = 0;
    char(*dropped)[PERI_STORE_NAME] = NULL;
    for (i = 0; i < st->nseg; ++i)
      nd += st->seg[i].fd >= 0 && st->seg[i].in_ckpt &&
            segmap[i] == PERI_STORE_NONE;
    if (nd)
      dropped = (char(*)[PERI_STORE_NAME])PER_MALLOC(
          (size_t)nd * PERI_STORE_NAME, st->ctx);
    if (nd && !dropped) {
      PER_FREE(segmap, st->ctx);
      return peri_store_fail(s->error, PER_ERR_NOMEM, "no memory");
    }
    for (i = 0, nd = 0; i < st->nseg; ++i)
      if (st->seg[i].fd >= 0 && st->seg[i].in_ckpt &&
          segmap[i] == PERI_STORE_NONE)
        memcpy(dropped[nd++], st->seg[i].name, PERI_STORE_NAME);
    w = nd ? peri_store_journal_add(st, dropped, nd) : 0;
    errnum = errno;
    PER_FREE(dropped, st->ctx);
    if (w != 0) {
      PER_FREE(segmap, st->ctx);
      return peri_store_fail(s->error, PER_ERR_IO,
                             "writing %s/segments.pending: %s; the last "
                             "checkpoint stands",
                             st->dir, strerror(errnum));
    }
  }
  if (st->log_ok && st->log_len < st->base_len) {
    /* a record appended to index.log, while the log is shorter than
       index.bin (then index.bin is written whole again) */
    r = peri_store_ckpt_delta(s, segmap, nsel);
    if (r != PER_OK) {
      PER_FREE(segmap, st->ctx);
      return r;
    }
    w = 0;
  } else {
    full = 1;
    img_len = PERI_STORE_IDX_HDR + (size_t)nsel * PERI_STORE_SEG_ROW +
              st->rn * PERI_STORE_REC_ROW + snap_max + 4;
    img = (unsigned char *)PER_MALLOC(img_len, st->ctx);
    if (!img) {
      PER_FREE(segmap, st->ctx);
      return peri_store_fail(s->error, PER_ERR_NOMEM,
                             "no memory for the index "
                             "(%llu bytes)",
                             (unsigned long long)img_len);
    }
    at = (size_t)(peri_store_seg_rows(st, segmap, img + PERI_STORE_IDX_HDR) -
                  img);
    for (i = 0; i < st->rn; ++i, at += PERI_STORE_REC_ROW)
      peri_store_rec_row(&st->rec[st->rh + i], segmap, img + at);
    r = per_buffer_snapshot(&s->index, img + at, snap_max, &snap_len);
    if (r != PER_OK) {
      PER_FREE(segmap, st->ctx);
      PER_FREE(img, st->ctx);
      return peri_store_fail(s->error, r, "the index's snapshot: %s",
                             per_status_str(r));
    }
    peri_put32(img + at + snap_len - 4,
               peri_store_crc(st, 0, img + at, snap_len - 4));
    peri_store_idx_header(s, img, st->ckpt_seq + 1, nsel, st->rn, snap_len);
    img_len = at + snap_len;
    peri_put32(img + img_len, peri_store_crc(st, 0, img, img_len));
    img_len += 4;
    w = peri_store_put_file(st->ctx, st->dir, "index.bin", &st->tmp_counter,
                            img, img_len);
    errnum = errno;
    PER_FREE(img, st->ctx);
    if (w == -1) {
      PER_FREE(segmap, st->ctx);
      return peri_store_fail(s->error, PER_ERR_IO,
                             "writing %s/index.bin: %s; the last checkpoint "
                             "stands",
                             st->dir, strerror(errnum));
    }
  }
  /* committed */
  ++st->ckpt_seq;
  ++st->stats.checkpoints;
  for (i = 0; i < st->nseg; ++i)
    st->seg[i].in_ckpt = segmap[i] != PERI_STORE_NONE;
  PER_FREE(segmap, st->ctx);
  if (w == -2) { /* in place, but maybe not after a power loss: keep
                    every file the previous checkpoint names, and write
                    index.bin whole next time */
    st->log_ok = 0;
    return peri_store_fail(s->error, PER_ERR_IO,
                           "%s/index.bin is replaced, but the directory's "
                           "fsync failed: %s",
                           st->dir, strerror(errnum));
  }
  if (full) peri_store_log_start(s, (uint64_t)img_len);
  peri_store_sweep(st);
  return (flags & PER_STORE_NO_JSON) ? PER_OK : peri_store_json(s);
}

/* ---- loads ---- */

/* What a load stages before s changes. */
typedef struct peri_store_staged {
  per_buffer index;
  peri_store_rec *rec;
  size_t rn;
  peri_store_seg *seg;
  uint32_t nseg;
  unsigned char uuid[16];
  uint32_t next_seg;
  uint64_t seq;
} peri_store_staged;

static void peri_store_staged_free(peri_store_staged *g, void *ctx) {
  uint32_t i;
  for (i = 0; i < g->nseg; ++i)
    if (g->seg[i].fd >= 0) close(g->seg[i].fd);
  PER_FREE(g->seg, ctx);
  PER_FREE(g->rec, ctx);
  per_buffer_free(&g->index);
}

/* Read a whole file into memory. */
static per_status peri_store_slurp(void *ctx, const char *path,
                                   unsigned char **mem, size_t *len,
                                   char *err) {
  struct stat sb;
  int fd = open(path, O_RDONLY);
  *mem = NULL;
  if (fd < 0)
    return peri_store_fail(err, PER_ERR_IO, "cannot open %s: %s", path,
                           strerror(errno));
  if (fstat(fd, &sb) != 0 || sb.st_size < 0 ||
      (uint64_t)sb.st_size > (uint64_t)(size_t)-1) {
    close(fd);
    return peri_store_fail(err, PER_ERR_IO, "cannot size %s", path);
  }
  *len = (size_t)sb.st_size;
  *mem = (unsigned char *)PER_MALLOC(*len ? *len : 1, ctx);
  if (!*mem) {
    close(fd);
    return peri_store_fail(err, PER_ERR_NOMEM,
                           "no memory for %s (%llu "
                           "bytes)",
                           path, (unsigned long long)*len);
  }
  if (*len && peri_store_pread_all(fd, *mem, *len, 0) != 0) {
    int e = errno;
    close(fd);
    PER_FREE(*mem, ctx);
    *mem = NULL;
    return peri_store_fail(err, PER_ERR_IO, "reading %s: %s", path,
                           strerror(e));
  }
  close(fd);
  return PER_OK;
}

/* Check a taken trajectory against its segment file: length, header,
   and (unless quick) its data's CRC. */
static per_status peri_store_check_traj(const per_store *s,
                                        const peri_store_rec *r,
                                        const peri_store_seg *g,
                                        const char *dir, unsigned char *buf,
                                        size_t bufn, int quick, char *err) {
  unsigned char h[64];
  uint64_t data = (uint64_t)r->n * s->item_size + r->n, done = 0;
  uint32_t crc = 0;
  if (r->off < PERI_STORE_HDR ||
      r->off + PERI_STORE_HDR + peri_store_pad8(data) > g->len)
    return peri_store_fail(err, PER_ERR_CORRUPT,
                           "trajectory %llu: offset "
                           "%llu + its %llu bytes pass %s's length %llu",
                           (unsigned long long)r->id,
                           (unsigned long long)r->off, (unsigned long long)data,
                           g->name, (unsigned long long)g->len);
  if (peri_store_pread_all(g->fd, h, 64, r->off) != 0)
    return peri_store_fail(err, PER_ERR_IO, "reading %s/%s at %llu: %s", dir,
                           g->name, (unsigned long long)r->off,
                           strerror(errno));
  if (peri_get32(h + 60) != peri_store_crc(s->st, 0, h, 60) ||
      peri_get32(h) != PERI_STORE_TRAJ_MAGIC || peri_get64(h + 8) != r->id ||
      memcmp(h + 16, r->uuid, 16) != 0 || peri_get32(h + 32) != r->n ||
      peri_get32(h + 36) != r->T || peri_get32(h + 40) != r->B ||
      peri_get32(h + 44) != s->item_size || peri_get32(h + 48) != r->max_ep ||
      peri_get32(h + 52) != r->crc)
    return peri_store_fail(err, PER_ERR_CHECKSUM,
                           "%s/%s at %llu: the header "
                           "of trajectory %llu is not the index's",
                           dir, g->name, (unsigned long long)r->off,
                           (unsigned long long)r->id);
  if (quick) return PER_OK;
  while (done < data) {
    size_t k = data - done < bufn ? (size_t)(data - done) : bufn;
    if (peri_store_pread_all(g->fd, buf, k, r->off + 64 + done) != 0)
      return peri_store_fail(err, PER_ERR_IO, "reading %s/%s at %llu: %s", dir,
                             g->name, (unsigned long long)(r->off + 64 + done),
                             strerror(errno));
    crc = peri_store_crc(s->st, crc, buf, k);
    done += k;
  }
  if (crc != r->crc)
    return peri_store_fail(err, PER_ERR_CHECKSUM,
                           "%s/%s at %llu: trajectory "
                           "%llu's data does not match its CRC-32C",
                           dir, g->name, (unsigned long long)r->off,
                           (unsigned long long)r->id);
  return PER_OK;
}

/* The index's checkpoint into g->index: whole, or rank's trajectories. */
static per_status peri_store_load_index(per_store *s, peri_store_staged *g,
                                        const unsigned char *snap, size_t len,
                                        uint32_t rank, uint32_t world,
                                        char *err) {
  per_config c = s->index.cfg;
  per_status r = per_buffer_init(&g->index, &c, s->st->ctx);
  if (r == PER_OK && s->index.layout[0])
    r = per_buffer_set_layout(&g->index, s->index.layout);
  if (r != PER_OK) return peri_store_fail(err, r, "%s", g->index.error);
  if (world == 1) {
    r = per_buffer_load_mem(&g->index, snap, len);
  } else {
    peri_src src = peri_src_of(NULL, snap, len);
    peri_ckpt k;
    per_tree t;
    peri_sel sel;
    uint32_t n, zero;
    peri_msg m = peri_msg_into(g->index.error, sizeof g->index.error);
    memset(&k, 0, sizeof k);
    sel.rank = rank;
    sel.world = world;
    sel.by_traj = 1;
    r = peri_ckpt_take(&src, &g->index, world, &k, &m);
    if (r == PER_OK) {
      r = peri_load_stage(&g->index, &k, sel, &t, &n, &zero, &m);
      if (r == PER_OK) peri_load_apply(&g->index, &k, sel, &t, n, zero);
      PER_FREE(k.mem, s->st->ctx);
    }
    if (r == PER_OK) { /* s's own batch stream and step, as
                          per_buffer_load_shard keeps b's */
      per_buffer_shared sh = per_buffer_shared_of(&g->index);
      sh.rng = s->index.rng;
      sh.step = s->index.step;
      r = per_buffer_set_shared(&g->index, &sh);
    }
  }
  if (r != PER_OK)
    return peri_store_fail(err, r, "index.bin's sampling state: %s (%s)",
                           g->index.error, per_status_str(r));
  return PER_OK;
}

/* 1 when files a and b hold the same first `len` bytes. */
static int peri_store_same_bytes(int a, int b, uint64_t len) {
  unsigned char x[1 << 14], y[1 << 14];
  uint64_t off = 0;
  while (off < len) {
    size_t k = len - off < sizeof x ? (size_t)(len - off) : sizeof x;
    if (peri_store_pread_all(a, x, k, off) != 0 ||
        peri_store_pread_all(b, y, k, off) != 0 || memcmp(x, y, k) != 0)
      return 0;
    off += k;
  }
  return 1;
}

/* Segment file `name` of directory src into directory dst: a hard link,
   or a copy (fsynced) where linking fails. A file of that name already
   in dst is taken when it is the same file, or holds the same first
   `len` bytes (a copy of a store loaded back into it). 0, or -1 with
   errno. */
static int peri_store_link(void *ctx, const char *src, const char *dst,
                           const char *name, uint64_t len) {
  char *a = peri_store_path(ctx, src, name),
       *b = peri_store_path(ctx, dst, name);
  struct stat sa, sb;
  int r = -1, in = -1, out = -1;
  if (!a || !b) {
    errno = ENOMEM;
    goto done;
  }
  if (link(a, b) == 0) {
    r = 0;
    goto done;
  }
  if (errno == EEXIST) {
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
        sa.st_ino == sb.st_ino) {
      r = 0;
      goto done;
    }
    in = open(a, O_RDONLY);
    out = in < 0 ? -1 : open(b, O_RDONLY);
    r = out >= 0 && peri_store_same_bytes(in, out, len) ? 0 : -1;
    if (r) errno = EEXIST;
    goto done;
  }
  in = open(a, O_RDONLY);
  out = in < 0 ? -1 : open(b, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (out >= 0) {
    unsigned char buf[1 << 16];
    uint64_t off = 0;
    for (;;) {
      ssize_t k = pread(in, buf, sizeof buf, (off_t)off);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) break;
      if (k == 0) {
        r = fsync(out);
        break;
      }
      if (peri_store_pwrite_all(out, buf, (size_t)k, off) != 0) break;
      off += (uint64_t)k;
    }
    if (r != 0) {
      int e = errno;
      unlink(b);
      errno = e;
    }
  }
done:
  if (in >= 0) close(in);
  if (out >= 0) close(out);
  PER_FREE(a, ctx);
  PER_FREE(b, ctx);
  return r;
}

/* The checkpoint a directory's index.bin (*img, *len: its CRC checked)
   and index.log make together. When index.log continues that index.bin
   (its header names the same store and checkpoint), its records are
   applied in turn, up to the first that is incomplete or fails its CRC
   (a record cut by a crash was never committed), and *img, *len are
   replaced by the image the last one makes, as index.bin would hold it
   (CRCs included). A log of another checkpoint is ignored: the
   index.bin that replaced it came after. Errors (*img unchanged):
   PER_ERR_NOMEM, PER_ERR_IO, PER_ERR_CHECKSUM (the log's header),
   PER_ERR_VERSION, PER_ERR_FORMAT, PER_ERR_CORRUPT (a record that
   passes its CRC but does not fit the index). */
static per_status peri_store_log_apply(per_store *s, const char *dir,
                                       unsigned char **img, size_t *len,
                                       char *err) {
  struct peri_store_state *st = s->st;
  unsigned char *log = NULL, *rows = NULL, *arr = NULL, *out = NULL;
  unsigned char *sec[6]; /* items, gens, leaves, perm, ends, trajs */
  const unsigned char *m = *img, *ihdr = *img, *segs, *snap, *shdr, *q;
  size_t loglen = 0, at, rn, rcap = 0, nseg, hlen, wid[6], per = 0, i, k;
  uint64_t seq, snap_len, size, cap, isz, perm, ll, P = 0;
  uint32_t *map = NULL, applied = 0;
  struct stat sb;
  per_status r = PER_OK;
  char *path = peri_store_path(st->ctx, dir, "index.log");
  if (!path) return peri_store_fail(err, PER_ERR_NOMEM, "no memory");
  if (stat(path, &sb) != 0) {
    PER_FREE(path, st->ctx);
    return PER_OK; /* none */
  }
  r = peri_store_slurp(st->ctx, path, &log, &loglen, err);
  PER_FREE(path, st->ctx);
  if (r != PER_OK) return r;
  if (loglen < PERI_STORE_LOG_HDR || memcmp(log, peri_store_log_magic, 8) ||
      peri_get32(log + 60) != peri_store_crc(st, 0, log, 60)) {
    PER_FREE(log, st->ctx);
    return peri_store_fail(err, PER_ERR_CHECKSUM,
                           "%s/index.log: its header is damaged", dir);
  }
  if (peri_get32(log + 8) != PERI_STORE_VERSION) {
    uint32_t v = peri_get32(log + 8);
    PER_FREE(log, st->ctx);
    return peri_store_fail(err, PER_ERR_VERSION,
                           "%s/index.log: version %u, this reads %u", dir, v,
                           PERI_STORE_VERSION);
  }
  seq = peri_get64(m + 40);
  if (memcmp(log + 16, m + 24, 16) != 0 || peri_get64(log + 32) != seq) {
    PER_FREE(log, st->ctx);
    return PER_OK; /* an older checkpoint's */
  }
  /* the base: index.bin's tables and its index checkpoint */
  nseg = peri_get32(m + 52);
  rn = (size_t)peri_get64(m + 56);
  snap_len = peri_get64(m + 64);
  segs = m + PERI_STORE_IDX_HDR;
  snap = shdr = m + *len - 4 - snap_len;
  cap = peri_get32(snap + 24);
  isz = peri_get32(snap + 28);
  size = peri_get32(snap + 32);
  perm = peri_get32(snap + 52) != 0;
  ll = peri_get32(snap + 8) >= 3 ? peri_get32(snap + 216) : 0;
  hlen = (size_t)peri_ckpt_bytes(PER_CKPT_VERSION, 0, (uint32_t)isz,
                                 (uint32_t)perm, (uint32_t)ll) -
         4;
  wid[0] = (size_t)isz;
  wid[1] = 4;
  wid[2] = sizeof(per_real);
  wid[3] = perm ? 4 : 0;
  wid[4] = 1;
  wid[5] = 4;
  for (i = 0; i < 6; ++i) per += wid[i];
  for (at = PERI_STORE_LOG_HDR;; at += (size_t)peri_store_pad8(P + 28)) {
    size_t nsel, nlive, nnew, keep, npatch, end;
    uint64_t first_id, new_size;
    if (loglen - at < 28 || peri_get32(log + at) != PERI_STORE_LOG_REC ||
        peri_get64(log + at + 8) != seq + 1)
      break;
    P = peri_get64(log + at + 16);
    if (P > loglen - at - 28 ||
        peri_get32(log + at + 24 + P) !=
            peri_store_crc(st, 0, log + at, (size_t)P + 24))
      break; /* not committed */
    q = log + at + 24;
    end = (size_t)P;
    if (!applied) { /* the base's arrays, once a record needs them */
      const unsigned char *from = snap + hlen;
      unsigned char *to;
      if (peri_get32(snap + 8) != PER_CKPT_VERSION ||
          peri_get32(snap + 20) != sizeof(per_real) || size > cap ||
          snap_len != peri_ckpt_bytes(PER_CKPT_VERSION, (uint32_t)size,
                                      (uint32_t)isz, (uint32_t)perm,
                                      (uint32_t)ll)) {
        r = peri_store_fail(err, PER_ERR_FORMAT,
                            "%s/index.bin: its index is not one this "
                            "build continues with index.log",
                            dir);
        goto done;
      }
      rcap = rn + 64;
      rows = (unsigned char *)PER_MALLOC(rcap * PERI_STORE_REC_ROW, st->ctx);
      arr = (unsigned char *)PER_MALLOC((size_t)cap * per + 1, st->ctx);
      if (!rows || !arr) {
        r = peri_store_fail(err, PER_ERR_NOMEM,
                            "no memory for the index (%llu samples)",
                            (unsigned long long)cap);
        goto done;
      }
      memcpy(rows, segs + nseg * PERI_STORE_SEG_ROW, rn * PERI_STORE_REC_ROW);
      for (i = 0, to = arr; i < 6; ++i) {
        sec[i] = to;
        memset(to, 0, (size_t)cap * wid[i]);
        memcpy(to, from, (size_t)size * wid[i]);
        from += (size_t)size * wid[i];
        to += (size_t)cap * wid[i];
      }
    }
    r = PER_ERR_CORRUPT; /* until the record is applied */
    /* index.bin's header and segment table as they are now */
    if (end < PERI_STORE_IDX_HDR + 24 || memcmp(q, peri_store_idx_magic, 8) ||
        peri_get64(q + 40) != seq + 1 ||
        peri_get32(q + 20) != peri_get32(m + 20))
      goto bad;
    nsel = peri_get32(q + 52);
    k = PERI_STORE_IDX_HDR;
    if ((uint64_t)nsel * PERI_STORE_SEG_ROW > end - k - 24) goto bad;
    PER_FREE(map, st->ctx);
    map = (uint32_t *)PER_MALLOC((nseg ? nseg : 1) * 4, st->ctx);
    if (!map) {
      r = peri_store_fail(err, PER_ERR_NOMEM, "no memory");
      goto done;
    }
    for (i = 0; i < nseg; ++i) { /* the old table's rows in the new, by name */
      size_t j;
      map[i] = PERI_STORE_NONE;
      for (j = 0; j < nsel && map[i] == PERI_STORE_NONE; ++j)
        if (memcmp(segs + i * PERI_STORE_SEG_ROW,
                   q + k + j * PERI_STORE_SEG_ROW, PERI_STORE_NAME) == 0)
          map[i] = (uint32_t)j;
    }
    /* the trajectories: those dropped, those whose live count changed,
       those added */
    first_id = peri_get64(q + k + nsel * PERI_STORE_SEG_ROW);
    nlive = (size_t)peri_get64(q + k + nsel * PERI_STORE_SEG_ROW + 8);
    nnew = (size_t)peri_get64(q + k + nsel * PERI_STORE_SEG_ROW + 16);
    for (keep = 0;
         keep < rn && peri_get64(rows + keep * PERI_STORE_REC_ROW) < first_id;
         ++keep) {
    }
    memmove(rows, rows + keep * PERI_STORE_REC_ROW,
            (rn - keep) * PERI_STORE_REC_ROW);
    rn -= keep;
    for (i = 0; i < rn; ++i) {
      unsigned char *row = rows + i * PERI_STORE_REC_ROW;
      uint32_t sg = peri_get32(row + 44);
      if (sg >= nseg || map[sg] == PERI_STORE_NONE) goto bad;
      peri_put32(row + 44, map[sg]);
    }
    segs = q + k;
    nseg = nsel;
    k += nsel * PERI_STORE_SEG_ROW + 24;
    if ((uint64_t)nlive > (end - k) / 16 ||
        (uint64_t)nnew > (end - k - nlive * 16) / PERI_STORE_REC_ROW)
      goto bad;
    for (i = 0; i < nlive; ++i, k += 16) {
      uint64_t id = peri_get64(q + k);
      size_t lo = 0, hi = rn;
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (peri_get64(rows + mid * PERI_STORE_REC_ROW) < id) lo = mid + 1;
        else hi = mid;
      }
      if (lo == rn || peri_get64(rows + lo * PERI_STORE_REC_ROW) != id)
        goto bad;
      peri_put32(rows + lo * PERI_STORE_REC_ROW + 40, peri_get32(q + k + 8));
    }
    if (rn + nnew > rcap) {
      unsigned char *more;
      rcap = (rn + nnew) * 2;
      more = (unsigned char *)PER_MALLOC(rcap * PERI_STORE_REC_ROW, st->ctx);
      if (!more) {
        r = peri_store_fail(err, PER_ERR_NOMEM, "no memory");
        goto done;
      }
      memcpy(more, rows, rn * PERI_STORE_REC_ROW);
      PER_FREE(rows, st->ctx);
      rows = more;
    }
    memcpy(rows + rn * PERI_STORE_REC_ROW, q + k, nnew * PERI_STORE_REC_ROW);
    rn += nnew;
    k += nnew * PERI_STORE_REC_ROW;
    if (rn != peri_get64(q + 56)) goto bad;
    /* the index's checkpoint: its header, then the slots changed */
    if (end - k < 8 || peri_get32(q + k) != hlen || end - k - 8 < hlen)
      goto bad;
    npatch = peri_get32(q + k + 4);
    k += 8;
    if (memcmp(q + k + 20, shdr + 20, 12) != 0 || /* real, cap, isz */
        peri_get32(q + k + 52) != perm)
      goto bad;
    shdr = q + k;
    new_size = peri_get32(shdr + 32);
    k += hlen;
    if (new_size > cap) goto bad;
    for (i = 0; i < npatch; ++i) {
      uint32_t kind, first, n, j;
      if (end - k < 16) goto bad;
      kind = peri_get32(q + k);
      first = peri_get32(q + k + 4);
      n = peri_get32(q + k + 8);
      k += 16;
      if (kind > 1 || (kind == 1 && !perm) || first > new_size ||
          n > new_size - first ||
          (uint64_t)n * (kind ? 4 : per - wid[3]) > end - k)
        goto bad;
      for (j = 0; j < 6; ++j) {
        if ((kind == 1) != (j == 3) || !wid[j]) continue;
        memcpy(sec[j] + (size_t)first * wid[j], q + k, (size_t)n * wid[j]);
        k += (size_t)n * wid[j];
      }
    }
    if (k != end ||
        peri_get64(q + 64) != peri_ckpt_bytes(PER_CKPT_VERSION,
                                              (uint32_t)new_size, (uint32_t)isz,
                                              (uint32_t)perm, (uint32_t)ll))
      goto bad;
    size = new_size;
    snap_len = peri_get64(q + 64);
    ihdr = q;
    r = PER_OK;
    ++seq;
    ++applied;
  }
  if (applied) { /* the image, as index.bin would hold it */
    size_t o, out_len = PERI_STORE_IDX_HDR + nseg * PERI_STORE_SEG_ROW +
                        rn * PERI_STORE_REC_ROW + (size_t)snap_len + 4;
    out = (unsigned char *)PER_MALLOC(out_len, st->ctx);
    if (!out) {
      r = peri_store_fail(err, PER_ERR_NOMEM, "no memory for the index");
      goto done;
    }
    memcpy(out, ihdr, PERI_STORE_IDX_HDR);
    o = PERI_STORE_IDX_HDR;
    memcpy(out + o, segs, nseg * PERI_STORE_SEG_ROW);
    o += nseg * PERI_STORE_SEG_ROW;
    memcpy(out + o, rows, rn * PERI_STORE_REC_ROW);
    o += rn * PERI_STORE_REC_ROW;
    k = o; /* the index's checkpoint */
    memcpy(out + o, shdr, hlen);
    o += hlen;
    for (i = 0; i < 6; ++i) {
      memcpy(out + o, sec[i], (size_t)size * wid[i]);
      o += (size_t)size * wid[i];
    }
    peri_put32(out + o, peri_store_crc(st, 0, out + k, o - k));
    o += 4;
    peri_put32(out + o, peri_store_crc(st, 0, out, o));
    PER_FREE(*img, st->ctx);
    *img = out;
    *len = out_len;
  }
  goto done;
bad:
  r = peri_store_fail(err, PER_ERR_CORRUPT,
                      "%s/index.log: checkpoint %llu's record does not fit "
                      "the index",
                      dir, (unsigned long long)(seq + 1));
done:
  PER_FREE(map, st->ctx);
  PER_FREE(rows, st->ctx);
  PER_FREE(arr, st->ctx);
  PER_FREE(log, st->ctx);
  return r;
}

PERDEF per_status per_store_load(per_store *s, const char *dir, uint32_t rank,
                                 uint32_t world, uint32_t flags) {
  struct peri_store_state *st;
  peri_store_staged g;
  unsigned char *mem = NULL, *buf = NULL;
  size_t len = 0, at, i, nrec_all;
  uint64_t snap_len, seq, prev = 0;
  char(*gone)[PERI_STORE_NAME] = NULL;
  uint32_t ngone;
  int loading = 0;
  uint32_t nseg_all, j, *map = NULL;
  char *path, err[256];
  per_status r;
  int same_dir;
  struct stat s1, s2;
  if (!s || !s->st) return PER_ERR_NULL;
  st = s->st;
  s->error[0] = 0;
  err[0] = 0;
  if (!dir) return peri_store_fail(s->error, PER_ERR_NULL, "dir is NULL");
  if (world == 0 || rank >= world)
    return peri_store_fail(s->error, PER_ERR_ARG,
                           "rank %u is not below "
                           "world %u",
                           rank, world);
  if (flags & ~(uint32_t)PER_STORE_LOAD_QUICK)
    return peri_store_fail(s->error, PER_ERR_ARG, "unknown flags 0x%x", flags);
  memset(&g, 0, sizeof g);
  path = peri_store_path(st->ctx, dir, "index.bin");
  if (!path) return peri_store_fail(s->error, PER_ERR_NOMEM, "no memory");
  r = peri_store_slurp(st->ctx, path, &mem, &len, err);
  PER_FREE(path, st->ctx);
  if (r != PER_OK) goto fail;
  /* the header */
  r = PER_ERR_FORMAT;
  if (len < PERI_STORE_IDX_HDR + 4 || memcmp(mem, peri_store_idx_magic, 8) ||
      peri_get32(mem + 12) != 0x01020304u ||
      peri_get32(mem + 16) != PERI_STORE_IDX_HDR) {
    peri_store_fail(err, r, "%s/index.bin is not a store's index", dir);
    goto fail;
  }
  if (peri_get32(mem + 8) != PERI_STORE_VERSION) {
    r = peri_store_fail(err, PER_ERR_VERSION,
                        "%s/index.bin: version %u, "
                        "this reads %u",
                        dir, peri_get32(mem + 8), PERI_STORE_VERSION);
    goto fail;
  }
  if (peri_get32(mem + len - 4) != peri_store_crc(st, 0, mem, len - 4)) {
    r = peri_store_fail(err, PER_ERR_CHECKSUM,
                        "%s/index.bin: checksum "
                        "mismatch",
                        dir);
    goto fail;
  }
  if (peri_get32(mem + 20) != s->item_size) {
    r = peri_store_fail(err, PER_ERR_MISMATCH,
                        "%s/index.bin: samples of %u "
                        "bytes, the store's are %u",
                        dir, peri_get32(mem + 20), s->item_size);
    goto fail;
  }
  r = peri_store_log_apply(s, dir, &mem, &len, err);
  if (r != PER_OK) goto fail;
  memcpy(g.uuid, mem + 24, 16);
  seq = peri_get64(mem + 40);
  g.next_seg = peri_get32(mem + 48);
  nseg_all = peri_get32(mem + 52);
  nrec_all = (size_t)peri_get64(mem + 56);
  snap_len = peri_get64(mem + 64);
  if ((uint64_t)nseg_all * PERI_STORE_SEG_ROW +
          (uint64_t)nrec_all * PERI_STORE_REC_ROW + snap_len + 4 +
          PERI_STORE_IDX_HDR !=
      len) {
    r = peri_store_fail(err, PER_ERR_CORRUPT,
                        "%s/index.bin: its counts do "
                        "not add up to its length",
                        dir);
    goto fail;
  }
  /* the segments */
  g.seg = (peri_store_seg *)PER_MALLOC(
      (size_t)(nseg_all ? nseg_all : 1) * sizeof *g.seg, st->ctx);
  map = (uint32_t *)PER_MALLOC((size_t)(nseg_all ? nseg_all : 1) * 4, st->ctx);
  g.rec = (peri_store_rec *)PER_MALLOC(
      (nrec_all ? nrec_all : 1) * sizeof *g.rec, st->ctx);
  buf = (unsigned char *)PER_MALLOC((size_t)1 << 20, st->ctx);
  if (!g.seg || !map || !g.rec || !buf) {
    r = peri_store_fail(err, PER_ERR_NOMEM, "no memory for the index");
    goto fail;
  }
  at = PERI_STORE_IDX_HDR;
  for (j = 0; j < nseg_all; ++j, at += PERI_STORE_SEG_ROW) map[j] = 0;
  /* the trajectories this rank takes, and which segments they need */
  at = PERI_STORE_IDX_HDR + (size_t)nseg_all * PERI_STORE_SEG_ROW;
  for (i = 0; i < nrec_all; ++i, at += PERI_STORE_REC_ROW) {
    const unsigned char *q = mem + at;
    peri_store_rec *rr = &g.rec[g.rn];
    uint64_t id = peri_get64(q);
    uint32_t sg = peri_get32(q + 44);
    if ((i > 0 && id <= prev) || sg >= nseg_all || peri_get32(q + 24) == 0 ||
        (uint64_t)peri_get32(q + 28) * peri_get32(q + 32) !=
            peri_get32(q + 24) ||
        peri_get32(q + 40) == 0 || peri_get32(q + 40) > peri_get32(q + 24)) {
      r = peri_store_fail(err, PER_ERR_CORRUPT,
                          "%s/index.bin: trajectory "
                          "row %llu is out of range",
                          dir, (unsigned long long)i);
      goto fail;
    }
    prev = id;
    if (id % world != rank) continue;
    memset(rr, 0, sizeof *rr);
    rr->id = id;
    memcpy(rr->uuid, q + 8, 16);
    rr->n = peri_get32(q + 24);
    rr->T = peri_get32(q + 28);
    rr->B = peri_get32(q + 32);
    rr->max_ep = peri_get32(q + 36);
    rr->live = peri_get32(q + 40);
    rr->seg = sg;
    rr->off = peri_get64(q + 48);
    rr->crc = peri_get32(q + 56);
    map[sg] = 1;
    ++g.rn;
  }
  /* open the segments taken, renumbered */
  at = PERI_STORE_IDX_HDR;
  for (j = 0; j < nseg_all; ++j, at += PERI_STORE_SEG_ROW) {
    peri_store_seg *sgm;
    struct stat sb;
    char *p;
    if (!map[j]) {
      map[j] = PERI_STORE_NONE;
      continue;
    }
    sgm = &g.seg[g.nseg];
    memset(sgm, 0, sizeof *sgm);
    sgm->fd = -1;
    memcpy(sgm->name, mem + at, PERI_STORE_NAME);
    sgm->name[PERI_STORE_NAME - 1] = 0;
    sgm->len = peri_get64(mem + at + 64);
    if (strchr(sgm->name, '/') || strncmp(sgm->name, "seg-", 4) != 0) {
      r = peri_store_fail(err, PER_ERR_CORRUPT,
                          "%s/index.bin: a segment "
                          "name is not a segment's",
                          dir);
      goto fail;
    }
    map[j] = g.nseg++;
    p = peri_store_path(st->ctx, dir, sgm->name);
    if (!p) {
      r = peri_store_fail(err, PER_ERR_NOMEM, "no memory");
      goto fail;
    }
    sgm->fd = open(p, O_RDONLY);
    PER_FREE(p, st->ctx);
    if (sgm->fd < 0) {
      r = peri_store_fail(err, PER_ERR_IO, "cannot open %s/%s: %s", dir,
                          sgm->name, strerror(errno));
      goto fail;
    }
    if (fstat(sgm->fd, &sb) != 0 || (uint64_t)sb.st_size < sgm->len) {
      r = peri_store_fail(err, PER_ERR_TRUNCATED,
                          "%s/%s is shorter than the "
                          "%llu bytes index.bin says",
                          dir, sgm->name, (unsigned long long)sgm->len);
      goto fail;
    }
  }
  for (i = 0; i < g.rn; ++i) {
    g.rec[i].seg = map[g.rec[i].seg];
    r = peri_store_check_traj(s, &g.rec[i], &g.seg[g.rec[i].seg], dir, buf,
                              (size_t)1 << 20, flags & PER_STORE_LOAD_QUICK,
                              err);
    if (r != PER_OK) goto fail;
    ++g.seg[g.rec[i].seg].live;
  }
  /* the sampling state, and every stored sample against the trajectories */
  r = peri_store_load_index(s, &g, mem + len - 4 - snap_len, (size_t)snap_len,
                            rank, world, err);
  if (r != PER_OK) goto fail;
  {
    const per_buffer *b = &g.index;
    uint32_t cap = b->cfg.capacity, k, slot;
    uint32_t oldest = b->size == cap ? b->pos : 0;
    for (i = 0; i < g.rn; ++i) g.rec[i].cached = 0; /* a count, for now */
    for (k = 0; k < b->size; ++k) {
      uint64_t tid;
      size_t lo = 0, hi = g.rn;
      uint32_t t;
      slot = (uint32_t)(((uint64_t)oldest + k) % cap);
      tid = peri_store_slot_traj(b, slot);
      memcpy(&t, b->items + (size_t)slot * 4, 4);
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g.rec[mid].id < tid) lo = mid + 1;
        else hi = mid;
      }
      if (lo == g.rn || g.rec[lo].id != tid || t >= g.rec[lo].n) {
        r = peri_store_fail(err, PER_ERR_CORRUPT,
                            "%s/index.bin: a stored "
                            "sample (trajectory %llu, position %u) has no "
                            "trajectory",
                            dir, (unsigned long long)tid, t);
        goto fail;
      }
      ++g.rec[lo].cached;
    }
    for (i = 0; i < g.rn; ++i) {
      if (g.rec[i].cached != g.rec[i].live) {
        r = peri_store_fail(err, PER_ERR_CORRUPT,
                            "%s/index.bin: trajectory "
                            "%llu has %u stored samples, its row says %u",
                            dir, (unsigned long long)g.rec[i].id,
                            g.rec[i].cached, g.rec[i].live);
        goto fail;
      }
      g.rec[i].cached = 0;
    }
  }
  /* segment files of another directory: linked into s's */
  same_dir = stat(dir, &s1) == 0 && stat(st->dir, &s2) == 0 &&
             s1.st_dev == s2.st_dev && s1.st_ino == s2.st_ino;
  if (same_dir && world > 1) {
    r = peri_store_fail(err, PER_ERR_ARG,
                        "rank %u of %u: a shard needs a "
                        "directory of its own (its checkpoints would delete "
                        "the other ranks' segments from %s)",
                        rank, world, dir);
    goto fail;
  }
  /* the segment table holds still (no appends) while the files this
     load links or supersedes are journaled, before any is linked */
  pthread_mutex_lock(&st->mu);
  while (st->appending) pthread_cond_wait(&st->cv_idle, &st->mu);
  st->loading = 1;
  pthread_mutex_unlock(&st->mu);
  loading = 1;
  gone = (char(*)[PERI_STORE_NAME])PER_MALLOC(
      ((size_t)st->nseg + g.nseg + 1) * PERI_STORE_NAME, st->ctx);
  if (!gone) {
    r = peri_store_fail(err, PER_ERR_NOMEM, "no memory");
    goto fail;
  }
  ngone = 0;
  for (j = 0; j < st->nseg; ++j)
    if (st->seg[j].fd >= 0) {
      uint32_t q;
      int kept = 0;
      for (q = 0; q < g.nseg && !kept; ++q)
        kept = strcmp(g.seg[q].name, st->seg[j].name) == 0;
      if (!kept) memcpy(gone[ngone++], st->seg[j].name, PERI_STORE_NAME);
    }
  if (!same_dir)
    for (j = 0; j < g.nseg; ++j)
      memcpy(gone[ngone++], g.seg[j].name, PERI_STORE_NAME);
  if (ngone && peri_store_journal_add(st, gone, ngone) != 0) {
    r = peri_store_fail(err, PER_ERR_IO, "writing %s/segments.pending: %s",
                        st->dir, strerror(errno));
    goto fail;
  }
  if (!same_dir) /* then read through s's own names */
    for (j = 0; j < g.nseg; ++j) {
      char *own;
      int fd = -1;
      if (peri_store_link(st->ctx, dir, st->dir, g.seg[j].name, g.seg[j].len) !=
          0) {
        r = peri_store_fail(err, PER_ERR_IO,
                            "cannot link or copy %s/%s into "
                            "%s: %s",
                            dir, g.seg[j].name, st->dir, strerror(errno));
        goto fail;
      }
      own = peri_store_path(st->ctx, st->dir, g.seg[j].name);
      if (own) fd = open(own, O_RDONLY);
      PER_FREE(own, st->ctx);
      if (fd < 0) {
        r = peri_store_fail(err, PER_ERR_IO, "cannot open %s/%s: %s", st->dir,
                            g.seg[j].name, strerror(errno));
        goto fail;
      }
      close(g.seg[j].fd);
      g.seg[j].fd = fd;
    }
  /* apply: nothing fails from here */
  pthread_mutex_lock(&st->mu);
  while (st->appending) pthread_cond_wait(&st->cv_idle, &st->mu);
  for (j = 0; j < st->nseg; ++j)
    if (st->seg[j].fd >= 0) close(st->seg[j].fd);
  PER_FREE(st->seg, st->ctx);
  PER_FREE(st->rec, st->ctx);
  for (j = 0; j < g.nseg; ++j) g.seg[j].in_ckpt = same_dir ? 1u : 0u;
  st->seg = g.seg;
  st->nseg = st->segcap = g.nseg;
  st->open_seg = PERI_STORE_NONE;
  st->rec = g.rec;
  st->rh = 0;
  st->rn = st->rcap = g.rn;
  if (st->rcap == 0) st->rcap = 1; /* g.rec holds at least one */
  st->eh = st->en = 0;
  st->e0 = st->wnext = 0;
  st->staged = st->staged_n = st->cached = 0;
  if (!same_dir) st->new_files = 1; /* the links: synced at a checkpoint */
  if (same_dir) {
    memcpy(st->uuid, g.uuid, 16);
    st->ckpt_seq = seq;
    if (g.next_seg > st->next_seg) st->next_seg = g.next_seg;
  }
  st->stats.segments = g.nseg;
  st->loading = 0;
  /* the next checkpoint writes index.bin and trajectory_index.json whole */
  st->log_ok = 0;
  if (st->log_fd >= 0) close(st->log_fd);
  if (st->json_fd >= 0) close(st->json_fd);
  st->log_fd = st->json_fd = -1;
  pthread_mutex_unlock(&st->mu);
  per_buffer_free(&s->index);
  s->index = g.index;
  PER_FREE(gone, st->ctx);
  PER_FREE(map, st->ctx);
  PER_FREE(buf, st->ctx);
  PER_FREE(mem, st->ctx);
  return PER_OK;
fail:
  if (loading) {
    pthread_mutex_lock(&st->mu);
    st->loading = 0;
    pthread_mutex_unlock(&st->mu);
  }
  PER_FREE(gone, st->ctx);
  peri_store_staged_free(&g, st->ctx);
  PER_FREE(map, st->ctx);
  PER_FREE(buf, st->ctx);
  PER_FREE(mem, st->ctx);
  memcpy(s->error, err, sizeof err);
  return r;
}

/* ---- queries ---- */

PERDEF uint32_t per_store_size(const per_store *s) {
  return s && s->st ? s->index.size : 0;
}

PERDEF void per_store_stats_of(const per_store *s, per_store_stats *out) {
  struct peri_store_state *st;
  uint32_t i;
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!s || !s->st) return;
  st = s->st;
  pthread_mutex_lock(&st->mu);
  *out = st->stats;
  out->trajectories = st->rn;
  out->samples = s->index.size;
  out->added_trajectories = s->index.trajs;
  out->added_samples = s->index.added;
  out->staged_bytes = st->staged;
  out->staged_trajectories = st->staged_n;
  out->cached_bytes = st->cached;
  out->segments = 0;
  out->disk_bytes = 0;
  for (i = 0; i < st->nseg; ++i)
    if (st->seg[i].fd >= 0) {
      ++out->segments;
      out->disk_bytes += st->seg[i].len;
    }
  pthread_mutex_unlock(&st->mu);
}

PERDEF per_status per_store_trajectory(const per_store *s, uint64_t id,
                                       per_store_traj_info *out) {
  const peri_store_rec *r;
  if (!s || !s->st || !out) return PER_ERR_NULL;
  pthread_mutex_lock(&s->st->mu);
  r = peri_store_find(s->st, id);
  if (r) {
    memset(out, 0, sizeof *out);
    out->id = r->id;
    memcpy(out->uuid, r->uuid, 16);
    out->num_samples = r->n;
    out->T = r->T;
    out->B = r->B;
    out->max_episode_length = r->max_ep;
    out->live = r->live;
    out->written = r->seg != PERI_STORE_NONE;
    out->cached = r->cached;
  }
  pthread_mutex_unlock(&s->st->mu);
  return r ? PER_OK : PER_ERR_INDEX;
}

PERDEF per_status per_store_check(const per_store *s) {
  const struct peri_store_state *st;
  const per_buffer *b;
  uint32_t cap, oldest, k, *count = NULL;
  uint64_t staged = 0, cached = 0, staged_n = 0;
  size_t i;
  per_status r = PER_OK;
  if (!s || !s->st) return PER_ERR_NULL;
  st = s->st;
  b = &s->index;
  if (per_buffer_check(b) != PER_OK) return PER_ERR_CORRUPT;
  cap = b->cfg.capacity;
  oldest = b->size == cap ? b->pos : 0;
  count = (uint32_t *)PER_MALLOC((st->rn ? st->rn : 1) * 4, st->ctx);
  if (!count) return PER_ERR_NOMEM;
  memset(count, 0, (st->rn ? st->rn : 1) * 4);
  for (i = 1; i < st->rn; ++i)
    if (st->rec[st->rh + i].id <= st->rec[st->rh + i - 1].id)
      r = PER_ERR_CORRUPT;
  for (k = 0; k < b->size && r == PER_OK; ++k) {
    uint32_t slot = (uint32_t)(((uint64_t)oldest + k) % cap), t;
    const peri_store_rec *rr =
        peri_store_find(st, peri_store_slot_traj(b, slot));
    memcpy(&t, b->items + (size_t)slot * 4, 4);
    if (!rr || t >= rr->n) r = PER_ERR_CORRUPT;
    else ++count[rr - (st->rec + st->rh)];
  }
  for (i = 0; i < st->rn && r == PER_OK; ++i) {
    const peri_store_rec *rr = &st->rec[st->rh + i];
    if (count[i] != rr->live || rr->live == 0 ||
        (rr->seg != PERI_STORE_NONE &&
         (rr->seg >= st->nseg || st->seg[rr->seg].fd < 0)))
      r = PER_ERR_CORRUPT;
  }
  for (i = 0; i < st->en && r == PER_OK; ++i) {
    const peri_store_ent *e = &st->ent[st->eh + i];
    if (e->off + e->bytes > st->ring_bytes) r = PER_ERR_CORRUPT;
    if (e->state == PERI_STORE_DONE) cached += e->bytes;
    else {
      staged += e->bytes;
      ++staged_n;
    }
  }
  if (r == PER_OK && (staged != st->staged || cached != st->cached ||
                      staged_n != st->staged_n))
    r = PER_ERR_CORRUPT;
  PER_FREE(count, st->ctx);
  return r;
}

#ifdef __cplusplus
}
#endif

#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic pop
#endif

#endif /* PER_STORE_IMPLEMENTATION */
