/* per.h - prioritized experience replay in one C header.       v0.4.0
   MIT license (no warranty): see the end of this file or LICENSE

   Do this:
      #define PER_IMPLEMENTATION
   before you include this file in *one* C or C++ file to create the
   implementation. Every other file includes it without the define:

      // in exactly one .c file
      #define PER_IMPLEMENTATION
      #include "per.h"

   CONTENTS
      1. Status codes ........ per_status, per_status_str          >>status
      2. Random numbers ...... per_rng, per_philox4x32_10          >>rng
      3. Sum tree ............ per_tree_*                          >>tree
      4. Uniform sampler ..... per_swap_* (without replacement)    >>swap
      5. Categorical sampler . per_tree_sample_iid, per_cat_*      >>cat
      6. Replay buffer ....... per_config, per_buffer_*            >>buffer
      7. n-step adder ........ per_nstep_*                         >>nstep
      8. Checkpoints ......... per_buffer_save/load/snapshot       >>ckpt
      Internals shared with the companion files, not the API:
         in the declarations: byte order, allocator ....           >>internal
         in the implementation: the default allocator ..           >>alloc
         in the implementation: x^y, scalar and in lanes .         >>pow
         in the implementation: what the kernels run too           >>rules
         in the implementation: checkpoint stages, sinks           >>seam
      (grep for the >>markers)

   COMPANIONS (each its own header, using per.h through its seam)
      per_frames.h   frame stacks for pixel replay (per_frames_*)
      per_traj.h     a rollout's data at named timescales, collected in
                     memory allocated once (per_traj_*)
      per_store.h    a replay larger than RAM: trajectories in files,
                     incremental checkpoints (per_store_*; POSIX)
      per_net.h      tables of replay answering requests off the network
                     (per_net_*; the server per-server, docs/PROTOCOL.md)
      per_mpi.h      one buffer sharded over MPI ranks (per_mpi_*)
      per_cuda.h     the tree and the buffer on an NVIDIA GPU (per_cuda_*;
                     kernels in per_cuda.cu)

   QUICK START
      per_tree t;
      per_rng rng;
      uint32_t idx[32];
      per_real val[32];
      if (per_tree_init(&t, 1000, NULL) != PER_OK) return 1;
      per_tree_set(&t, 7, 2.5);                  // leaf 7 gets priority 2.5
      per_rng_init(&rng, 42);                    // seed 42, counter 0
      per_status s = per_tree_sample(&t, &rng, 32, idx, val);  // stratified
      if (s != PER_OK) fprintf(stderr, "%s\n", per_status_str(s));
      per_tree_free(&t);

   QUICK START: THE REPLAY BUFFER (a DQN-style loop)
      typedef struct transition {
        float obs[4], next_obs[4], reward;
        int32_t action;
        uint32_t done;
      } transition;
      transition t = {{0}, {0}, 0, 0, 0}, batch[64];
      uint64_t ids[64];
      float w[64], td[64] = {0};
      per_buffer buf;
      per_config cfg = per_config_default(100000, sizeof(transition));
      cfg.seed = 42;                             // fields are read as written
      if (per_buffer_init(&buf, &cfg, NULL) != PER_OK) return 1;
      per_buffer_add(&buf, &t);                  // every environment step
      if (per_buffer_sample(&buf, 64, NULL, batch, ids, w) == PER_OK) {
        // loss = mean(w[i] * (q - target)^2); td[i] = q - target
        per_buffer_update(&buf, ids, td, 64, NULL);
      }
      per_buffer_free(&buf);

   QUICK START: SEQUENCES (R2D2; steps of 80, a start every 40)
      typedef struct step { float obs[4]; int32_t action; float reward; } step;
      step s = {{0}, 0, 1.0f}, seqs[8 * 80];
      uint8_t mask[8 * 80];
      uint64_t ids[8];
      float w[8], td[8 * 80] = {0};
      per_buffer buf;
      // flags, beta, window, mask
      per_sample_opts opts = {PER_SAMPLE_SEQUENCES, 0.0, 0, mask};
      per_config cfg = per_config_default(4000, sizeof(step));
      cfg.seq_len = 80;
      cfg.seq_stride = 40;                       // divides the capacity
      cfg.flags = PER_SEQ_CROSS_EPISODES;        // masked past an episode end
      if (per_buffer_init(&buf, &cfg, NULL) != PER_OK) return 1;
      // PER_END_NONE, or _TERMINATED or _TRUNCATED at an episode's end
      per_buffer_add_step(&buf, &s, PER_END_NONE);
      if (per_buffer_sample(&buf, 8, &opts, seqs, ids, w) == PER_OK)
        per_buffer_update_seq(&buf, ids, td, 8, NULL);   // 8 * 80 TD errors
      per_buffer_free(&buf);

   THE TREE LAYOUT (shared with the CUDA companion, per_cuda.h)
      capacity C >= 1, L = the smallest power of two >= C, one array of 2L
      per_real values: node[1] is the root (the total), node k has children
      2k and 2k+1, leaf i is node[L+i], padded leaves [L+C, 2L) and node[0]
      are 0. Every internal node is *recomputed* from its two children,
      never patched by a delta, so node[k] == node[2k] + node[2k+1] holds
      exactly, the tree never drifts, and the same leaves always give the
      same bits. A tree can move between host and device by memcpy.

   COMPILE-TIME OPTIONS (define before the first include in a file)
      PER_REAL            node type, `double` (default) or `float`. Double
                          keeps sampling exact at 2^24 leaves; float halves
                          memory. Must be the same in every file and on the
                          GPU side: the node type is part of the linker
                          names (per_tree_set is per_tree_set_double), so
                          files that disagree fail to link.
      PER_STATIC          make every function static to the including file
      PER_MALLOC(sz,ctx)  allocator, default per.h's own over malloc (see
      PER_FREE(p,ctx)     PER_NO_HUGE_PAGES); `ctx` is the alloc_ctx given
                          to the init function. Define both or neither, the
                          same in every file (the companion headers
                          allocate through them too).
      PER_NO_HUGE_PAGES   plain malloc blocks from the default allocator.
                          Without it, a block of 2 MiB or more (a large
                          tree, item ring or generation array, read at
                          random: with 4 KiB pages each level of a
                          descent is a TLB miss too) starts on a 2 MiB
                          boundary and, on Linux, is advised
                          MADV_HUGEPAGE, so that transparent huge pages
                          back it where the kernel allows; it costs at
                          most 2 MiB of address space and 1/8 of the
                          block's size in resident memory
      PER_ASSERT(x)       internal invariant checks, default assert(x)
      PER_NO_VECTOR_POW   leave out the AVX2 lanes that compute the pows
                          of an update's or a sample's batch four at a
                          time (x86-64, GCC or clang, taken when the CPU
                          has AVX2), and the <immintrin.h> they include;
                          the same bits either way
      PER_NO_STDIO        leave out the checkpoint files (per_buffer_save,
                          per_buffer_load, per_buffer_load_shard,
                          per_buffer_load_append, per_file_write,
                          per_snapshot_write, per_nstep_save,
                          per_nstep_load) and <stdio.h>
      PER_REFERENCE       run only the plain paths: one descent at a time,
                          one Philox block at a time, parents recomputed
                          level by level, checkpoint words converted one by
                          one, one pow at a time. Every result is the same
                          bits as without it (CI runs the CPU tests both
                          ways); it is there to check the fast paths and to
                          read the code by.

   BUILD FLAGS
      Results do not depend on the optimization level, -march, C or C++,
      or the compiler's contraction rules (-ffp-contract=fast, GCC's
      default in its GNU modes, included): every product that is later
      added to or subtracted from is either exact or rounded through a
      barrier no compiler can fuse into a multiply-add, so the same seed
      gives the same batches, weights and checkpoints on every build
      (tools/determinism.sh builds one program with gcc, clang, g++,
      clang++ and musl-gcc, -O0 to -O3 -march=native and forced FMA,
      tools/windows.sh with MinGW under Wine, and compares). That
      includes the priorities and IS weights: their pow is per.h's own,
      from the same operations (no libm function whose last bit varies),
      so they are also the bits per_cuda's kernels compute. Not covered:
      32-bit x86 with x87 arithmetic (-m32 without -mfpmath=sse) keeps
      excess precision; -ffast-math is not supported (it removes the
      NaN/infinity checks and reorders sums).

   ERRORS
      Every fallible function returns a per_status (PER_OK == 0). On any
      error the structure is left exactly as it was (byte for byte): batches
      are validated completely before any of them is applied; the one
      exception is the error message of a per_buffer (b->error) and of a
      per_traj (a->error, per_traj.h), which says what was refused and
      why, naming the argument or field and its value ("max_unique 100 >
      capacity 50", "td[3] is NaN", "the checkpoint's capacity 100, the
      buffer's 50"), and is "" after a successful call. No function aborts or exits.

   THREADS
      No global state; every function is reentrant. One structure is not
      safe for concurrent writers, nor for a writer concurrent with readers.
      Const functions (sampling from a const per_tree) may run concurrently
      on one tree; per_tree_sample_strata lets threads split one batch and
      get the same result as one thread. per_snapshot_write reads only its
      snapshot: it may run on any thread while the buffer keeps training.

   REVISION HISTORY
      0.5.0  (unreleased) frame stacks moved to the companion
             per_frames.h: a file that calls per_frames_* includes
             per_frames.h, and the file that defines PER_IMPLEMENTATION
             also defines PER_FRAMES_IMPLEMENTATION and includes it after
             per.h; names, behaviour and checkpoint files unchanged;
             the trajectory accumulator moved to the companion
             per_traj.h (include it; PER_TRAJ_IMPLEMENTATION beside
             PER_IMPLEMENTATION), with any number of named timescales;
             per_traj_field.kind is now .timescale (per_traj.h's
             history says the rest); the trajectory store, a replay
             on disk, is the new companion per_store.h; PER_ERR_BUSY
             (a bounded queue is full: nothing done, try again)
      0.4.0  per.h's own pow (the same bits on every CPU, libm, compiler
             and GPU; no libm); a refused per_buffer call says why in
             b->error; sequence ids carry PER_ID_SEQ and per_buffer_update
             refuses them (per_id_slot, per_id_generation decode ids);
             opts->beta without PER_SAMPLE_BETA is refused; PER_MAX_LIVE;
             checkpoint version 3 keeps the items' layout
             (per_buffer_set_layout; versions 1 and 2 still load) and
             per_ckpt_read_info reads a file's header; frame stacks for
             pixel replay (per_frames_*: each frame stored once, stacks
             rebuilt on sampling, their own checkpoints);
             per_buffer_load_mem (a checkpoint from memory);
             per_buffer_add_td (new items' priorities from TD errors);
             per_tree_find_batch (descents in lockstep); per_mpi.h: a
             shard's draws descend together, a receiver's own are copied
             once; per_cuda.h: distinct draws and sequence replay on the
             device (per_cuda_buffer_update_seq)
      0.3.0  episode ends; sequence replay (R2D2); trajectory ids and
             windows of trajectories; the trajectory accumulator
             (per_traj_*); snapshots written from any thread; the item
             ring and the cat workspace in caller memory; checkpoint
             version 2 (version 1 still loads); for layers that keep one
             replay in several buffers: per_buffer_shared_of,
             per_buffer_set_shared, per_buffer_advance_strata,
             per_buffer_draw_uniform, per_buffer_raise_max_leaf,
             per_buffer_count_evicted; PER_MALLOC and PER_FREE are
             read at a file's first include of per.h (the companions
             allocate through them too); per_mpi.h: one buffer's uniform
             fallback, windows refused; clean under -Wconversion and
             -Wsign-conversion in C and C++
      0.2.0  per_config_default; config fields read as written (PER_ZERO
             and per_config_resolve removed); PER_VERSION; the node type
             in the linker names; clean under C++ -Wold-style-cast,
             -Wuseless-cast and -Wreserved-identifier (internal names are
             peri_ and PERI_); PER_NSTEP_ITEM; per_nstep_save/load;
             checkpoints replace existing files on Windows
      0.1.0  sum tree, Philox RNG, uniform and categorical samplers;
             replay buffer, n-step adder, checkpoints
*/
#ifndef PER_H_INCLUDED
#define PER_H_INCLUDED

/* per.h is C: its casts are C casts, and some are no-ops for one of the
   two node types. C++ builds with -Wold-style-cast or -Wuseless-cast do
   not hear about the header's own code (push here, pop at its end). */
#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuseless-cast"
#endif
#endif

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 0.4.0 as one number, major * 10000 + minor * 100 + patch. */
#define PER_VERSION_MAJOR 0
#define PER_VERSION_MINOR 4
#define PER_VERSION_PATCH 0
#define PER_VERSION 400
#define PER_VERSION_STRING "0.4.0"

#ifndef PER_REAL
#define PER_REAL double
#endif
typedef PER_REAL per_real;

#ifdef PER_STATIC
#if defined(__GNUC__) || defined(__clang__)
#define PERDEF static __attribute__((unused))
#else
#define PERDEF static
#endif
#else
#define PERDEF extern
#endif

/* PER_HD marks the small functions that host and device code share: the
   RNG, the descent and the parent recomputation. One source of truth. */
#if defined(__CUDACC__)
#define PER_HD __host__ __device__
#else
#define PER_HD
#endif
#define PER_INLINE static inline

/* The node type is part of the linker name of every function whose
   arguments or result depend on it: with PER_REAL double, per_tree_set is
   per_tree_set_double (the macros below), so a file compiled with another
   PER_REAL than the implementation fails to link (undefined reference to
   per_tree_set_float) instead of reading trees of the wrong type. Call the
   functions by their plain names; debuggers and nm show the long ones.
   PER_REAL must be a one-word type name (double or float). */
#define PERI_NAME(name) PERI_NAME2(name, PER_REAL)
#define PERI_NAME2(name, real) PERI_NAME3(name, real)
#define PERI_NAME3(name, real) name##_##real
#define per_rng_real PERI_NAME(per_rng_real)
#define per_tree_bytes PERI_NAME(per_tree_bytes)
#define per_tree_init PERI_NAME(per_tree_init)
#define per_tree_init_mem PERI_NAME(per_tree_init_mem)
#define per_tree_free PERI_NAME(per_tree_free)
#define per_tree_clear PERI_NAME(per_tree_clear)
#define per_tree_set PERI_NAME(per_tree_set)
#define per_tree_set_batch PERI_NAME(per_tree_set_batch)
#define per_tree_set_range PERI_NAME(per_tree_set_range)
#define per_tree_build PERI_NAME(per_tree_build)
#define per_tree_get PERI_NAME(per_tree_get)
#define per_tree_total PERI_NAME(per_tree_total)
#define per_tree_prefix PERI_NAME(per_tree_prefix)
#define per_tree_find PERI_NAME(per_tree_find)
#define per_tree_find_batch PERI_NAME(per_tree_find_batch)
#define per_tree_sample PERI_NAME(per_tree_sample)
#define per_tree_sample_strata PERI_NAME(per_tree_sample_strata)
#define per_tree_check PERI_NAME(per_tree_check)
#define per_tree_sample_iid PERI_NAME(per_tree_sample_iid)
#define per_cat_init PERI_NAME(per_cat_init)
#define per_cat_free PERI_NAME(per_cat_free)
#define per_cat_sample PERI_NAME(per_cat_sample)
#define per_buffer_init PERI_NAME(per_buffer_init)
#define per_buffer_free PERI_NAME(per_buffer_free)
#define per_buffer_size PERI_NAME(per_buffer_size)
#define per_buffer_beta PERI_NAME(per_buffer_beta)
#define per_buffer_add PERI_NAME(per_buffer_add)
#define per_buffer_add_batch PERI_NAME(per_buffer_add_batch)
#define per_buffer_add_td PERI_NAME(per_buffer_add_td)
#define per_buffer_sample PERI_NAME(per_buffer_sample)
#define per_buffer_update PERI_NAME(per_buffer_update)
#define per_buffer_update_check PERI_NAME(per_buffer_update_check)
#define per_buffer_shared_of PERI_NAME(per_buffer_shared_of)
#define per_buffer_set_shared PERI_NAME(per_buffer_set_shared)
#define per_buffer_advance_strata PERI_NAME(per_buffer_advance_strata)
#define per_buffer_draw_uniform PERI_NAME(per_buffer_draw_uniform)
#define per_buffer_raise_max_leaf PERI_NAME(per_buffer_raise_max_leaf)
#define per_buffer_count_evicted PERI_NAME(per_buffer_count_evicted)
#define per_is_weight PERI_NAME(per_is_weight)
#define per_buffer_check PERI_NAME(per_buffer_check)
#define per_nstep_step PERI_NAME(per_nstep_step)
#define per_buffer_save PERI_NAME(per_buffer_save)
#define per_buffer_load PERI_NAME(per_buffer_load)
#define per_buffer_load_mem PERI_NAME(per_buffer_load_mem)
#define per_buffer_load_shard PERI_NAME(per_buffer_load_shard)
#define per_buffer_load_append PERI_NAME(per_buffer_load_append)

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
   1. Status codes                                                >>status
   ====================================================================== */

/* One list makes both the enum and the messages. New codes go at the end
   so existing values never change. */
#define PER_STATUS_LIST(X)                                                \
  X(PER_OK, "ok")                                                         \
  X(PER_ERR_NULL, "a required pointer argument is NULL")                  \
  X(PER_ERR_NOMEM, "memory allocation failed")                            \
  X(PER_ERR_CAPACITY, "capacity out of range (1 .. 2^31)")                \
  X(PER_ERR_MEMORY, "caller memory block too small or misaligned")        \
  X(PER_ERR_INDEX, "index out of range")                                  \
  X(PER_ERR_NAN, "value is NaN")                                          \
  X(PER_ERR_INF, "value is infinite")                                     \
  X(PER_ERR_NEGATIVE, "value is negative")                                \
  X(PER_ERR_RANGE, "value too large (above PER_LEAF_MAX)")                \
  X(PER_ERR_BATCH, "batch size is zero or larger than allowed")           \
  X(PER_ERR_EMPTY, "nothing to sample: no items, or zero total priority") \
  X(PER_ERR_DEGENERATE, "the total priority is not finite")               \
  X(PER_ERR_TOO_FEW, "fewer items with positive priority than requested") \
  X(PER_ERR_CORRUPT, "structure is inconsistent (invariant violated)")    \
  X(PER_ERR_ARG, "invalid argument")                                      \
  X(PER_ERR_IO, "file could not be opened, read, written or renamed")     \
  X(PER_ERR_FORMAT, "not a per checkpoint (magic, byte order or header)") \
  X(PER_ERR_VERSION, "checkpoint version not supported")                  \
  X(PER_ERR_TRUNCATED, "checkpoint shorter than its header says")         \
  X(PER_ERR_CHECKSUM, "checkpoint checksum mismatch")                     \
  X(PER_ERR_MISMATCH, "checkpoint does not fit this buffer")              \
  X(PER_ERR_DEVICE, "the CUDA runtime refused a launch or a copy")        \
  X(PER_ERR_BUSY, "a bounded queue is full: nothing done, try again")

/* (clang-format would read the list and the count as one expression) */
/* clang-format off */
typedef enum per_status {
#define PERI_STATUS_ENUM(name, msg) name,
  PER_STATUS_LIST(PERI_STATUS_ENUM)
#undef PERI_STATUS_ENUM
  PER_STATUS_COUNT
} per_status;
/* clang-format on */

/* A static English message for any status; "unknown status" for values
   outside the enum. Never NULL. */
PERDEF const char *per_status_str(per_status s);

/* ======================================================================
   2. Random numbers: Philox4x32-10, counter based                  >>rng
   ======================================================================
   A stream is (seed, counter): block c of seed s is
   philox4x32_10(ctr = {lo(c), hi(c), 0, 0}, key = {lo(s), hi(s)}), four
   32-bit words. The same (seed, counter) gives the same words on every
   machine and on the GPU. per_rng is a caller-owned stream position that
   hands those words out one at a time. */

typedef struct per_rng {
  uint64_t seed;    /* key of the stream */
  uint64_t counter; /* next block to generate */
  uint32_t buf[4];  /* the current block */
  uint32_t avail;   /* words of buf not handed out yet (0..4) */
  uint32_t pad;     /* always 0: the struct has no padding bytes, so its
                       bytes can be compared and saved as they are */
} per_rng;

/* Philox4x32 with 10 rounds (Salmon et al., SC'11), matching Random123's
   philox4x32_10 and its known-answer vectors. */
PER_INLINE PER_HD void per_philox4x32_10(const uint32_t ctr[4],
                                         const uint32_t key[2],
                                         uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  int r;
  for (r = 0; r < 10; ++r) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0;
    uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* Block `counter` of stream `seed`. */
PER_INLINE PER_HD void per_rng_block(uint64_t seed, uint64_t counter,
                                     uint32_t out[4]) {
  uint32_t ctr[4], key[2];
  ctr[0] = (uint32_t)counter;
  ctr[1] = (uint32_t)(counter >> 32);
  ctr[2] = 0;
  ctr[3] = 0;
  key[0] = (uint32_t)seed;
  key[1] = (uint32_t)(seed >> 32);
  per_philox4x32_10(ctr, key, out);
}

/* a * b for a product that is exact (a power-of-two factor, or halves
   of at most 26 bits): nothing is rounded, so no multiply-add formed
   with a later addition can change the result; on the device
   __dmul_rn/__fmul_rn all the same, so that the kernels hold no fma
   whatever nvcc's -fmad says (tests/cuda/check_ptx.py compiles them
   without it too), at no cost on the CPU. */
#if defined(__CUDA_ARCH__)
#define PERI_DMUL_EXACT(a, b) __dmul_rn((a), (b))
#define PERI_FMUL_EXACT(a, b) __fmul_rn((a), (b))
#else
#define PERI_DMUL_EXACT(a, b) ((a) * (b))
#define PERI_FMUL_EXACT(a, b) ((a) * (b))
#endif

/* Uniform float in [0,1) from the top 24 bits of one word:
   (w >> 8) * 2^-24. */
PER_INLINE PER_HD float per_u01f(uint32_t w) {
  return PERI_FMUL_EXACT((float)(w >> 8), 1.0f / 16777216.0f);
}

/* Uniform double in [0,1) from 53 bits of two words: the top 27 bits of
   hi and the top 26 of lo, ((hi >> 5) * 2^26 + (lo >> 6)) * 2^-53. Exact:
   every step is an integer below 2^53 or a multiplication by a power of
   two. */
PER_INLINE PER_HD double per_u01d(uint32_t hi, uint32_t lo) {
  uint64_t m = ((uint64_t)(hi >> 5) << 26) | (uint64_t)(lo >> 6);
  return PERI_DMUL_EXACT((double)m, 1.0 / 9007199254740992.0);
}

/* Uniform per_real in [0,1) from a block: 24 bits (float) or 53 bits
   (double) taken from its first words. */
PER_INLINE PER_HD per_real per_u01_real(const uint32_t w[4]) {
  if (sizeof(per_real) == sizeof(float)) return (per_real)per_u01f(w[0]);
  return (per_real)per_u01d(w[0], w[1]);
}

/* a * b rounded once, in a value the compiler cannot fuse with a later
   addition or subtraction into a multiply-add (FMA), whatever the build's
   contraction rules: GCC contracts across statements by default in its GNU
   modes (-ffp-contract=fast), clang -march=native and nvcc (-fmad=true)
   within expressions, and a fused a*b+c rounds once where the written code
   rounds twice. Every product whose result is later added to or subtracted
   from goes through these, unless it is exact (a multiplication by a power
   of two, as in per_u01f and per_u01d), so that the same inputs give the
   same bits on every build. On the device __fmul_rn/__dmul_rn, which CUDA
   documents as never merged into an FMA; on GCC and clang an empty asm
   that the value must pass through in a register; elsewhere a volatile. */
#if defined(__CUDA_ARCH__)
#define PERI_MUL_RN(T, a, b, intrinsic) return intrinsic(a, b)
#elif (defined(__GNUC__) || defined(__clang__)) && \
    (defined(__x86_64__) || defined(__SSE2_MATH__))
#define PERI_MUL_RN(T, a, b, intrinsic) \
  T p_ = (a) * (b);                     \
  __asm__("" : "+x"(p_));               \
  return p_
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
#define PERI_MUL_RN(T, a, b, intrinsic) \
  T p_ = (a) * (b);                     \
  __asm__("" : "+w"(p_));               \
  return p_
#else
#define PERI_MUL_RN(T, a, b, intrinsic) \
  volatile T p_ = (a) * (b);            \
  return p_
#endif
PER_INLINE PER_HD double peri_dmul_rn(double a, double b) {
  PERI_MUL_RN(double, a, b, __dmul_rn);
}
PER_INLINE PER_HD float peri_fmul_rn(float a, float b) {
  PERI_MUL_RN(float, a, b, __fmul_rn);
}
#undef PERI_MUL_RN
PER_INLINE PER_HD per_real peri_mul_rn(per_real a, per_real b) {
  if (sizeof(per_real) == sizeof(float))
    return (per_real)peri_fmul_rn((float)a, (float)b);
  return (per_real)peri_dmul_rn((double)a, (double)b);
}

/* Start a stream at block 0 of `seed`. */
PERDEF void per_rng_init(per_rng *r, uint64_t seed);
/* Next 32-bit word of the stream (four per block, in order). */
PERDEF uint32_t per_rng_u32(per_rng *r);
/* Uniform integer in [0, n) without modulo bias (Lemire's multiply-shift
   with rejection). n == 0 returns 0. */
PERDEF uint32_t per_rng_below(per_rng *r, uint32_t n);
/* Uniform double in [0,1), 53 random bits (two words). */
PERDEF double per_rng_double(per_rng *r);
/* Uniform float in [0,1), 24 random bits (one word). */
PERDEF float per_rng_float(per_rng *r);
/* Uniform per_real in [0,1): per_rng_float or per_rng_double. */
PERDEF per_real per_rng_real(per_rng *r);

/* ======================================================================
   3. Sum tree                                                       >>tree
   ====================================================================== */

/* Largest capacity: 2^31 leaves (the node array then has 2^32 values). */
#define PER_MAX_CAPACITY 0x80000000u

/* Largest accepted leaf value. Chosen so that the sum of PER_MAX_CAPACITY
   such leaves is still finite: the total of a valid tree is never infinite.
   (1e290 for double, 1e28 for float.) */
#define PER_LEAF_MAX (peri_leaf_max())
PER_INLINE PER_HD per_real peri_leaf_max(void) {
  return (per_real)(sizeof(per_real) == sizeof(float) ? 1e28 : 1e290);
}

typedef struct per_tree {
  per_real *node;    /* 2*leaves values; node[1] is the root */
  uint32_t capacity; /* C: leaves in use are [0, C) */
  uint32_t leaves;   /* L: smallest power of two >= C */
  uint32_t depth;    /* log2(L): levels above the leaves */
  uint32_t owns;     /* 1 when node was allocated with PER_MALLOC */
  void *alloc_ctx;   /* passed to PER_MALLOC / PER_FREE */
  /* Private: how batch updates of a large tree fix its levels (walks or
     level passes, the same bits), timed on its first batches where the
     build has a cycle counter (per_tree_set_batch); zero at init. */
  uint32_t fix_calls, fix_walk;
  uint64_t fix_ticks[2], fix_leaves[2];
} per_tree;

/* PER_OK when v may be a leaf (finite, >= 0, <= PER_LEAF_MAX), else why
   not: PER_ERR_NAN, PER_ERR_INF, PER_ERR_NEGATIVE or PER_ERR_RANGE. Reads
   the bits, so it keeps working under -ffinite-math-only. */
PER_INLINE PER_HD per_status per_leaf_status(per_real v) {
  if (sizeof(per_real) == sizeof(double)) {
    uint64_t b;
    double d = (double)v;
    memcpy(&b, &d, sizeof b);
    if (((b >> 52) & 0x7ffu) == 0x7ffu)
      return (b & 0xfffffffffffffull) ? PER_ERR_NAN : PER_ERR_INF;
  } else {
    uint32_t b;
    float f = (float)v;
    memcpy(&b, &f, sizeof b);
    if (((b >> 23) & 0xffu) == 0xffu)
      return (b & 0x7fffffu) ? PER_ERR_NAN : PER_ERR_INF;
  }
  if (v < 0) return PER_ERR_NEGATIVE;
  if (v > PER_LEAF_MAX) return PER_ERR_RANGE;
  return PER_OK;
}

/* 1 when v is a leaf value that is stored as it is: +0 or positive,
   finite, <= PER_LEAF_MAX; 0 for -0 (valid, stored as +0) and for every
   value per_leaf_status refuses. One unsigned compare of the bits: those
   of non-negative floats order like their values, and every value with
   the sign bit set (-0 included), infinity and NaN have bits above
   PER_LEAF_MAX's. The fast check before per_leaf_status. */
PER_INLINE PER_HD int peri_leaf_plain(per_real v) {
  if (sizeof(per_real) == sizeof(double)) {
    uint64_t b, m;
    double d = (double)v, x = (double)PER_LEAF_MAX;
    memcpy(&b, &d, sizeof b);
    memcpy(&m, &x, sizeof m);
    return b <= m;
  } else {
    uint32_t b, m;
    float f = (float)v, x = (float)PER_LEAF_MAX;
    memcpy(&b, &f, sizeof b);
    memcpy(&m, &x, sizeof m);
    return b <= m;
  }
}

/* The descent rule (docs/DESIGN.md §2), written once: 1 to go to the right
   child, 0 to go left, at a node whose children hold `left` and `right`,
   with `u` the prefix mass still to cover. Go left when u < left;
   otherwise go right, except when the right child has no mass, then go
   left (and go right whenever the left child has no mass). Whenever
   left + right > 0 the child chosen has mass, for every u: 0, the total,
   past the total, even NaN or negative. Branch-free. */
PER_INLINE PER_HD uint32_t peri_tree_go_right(per_real left, per_real right,
                                              per_real u) {
  return ((uint32_t)(!(u < left)) & (uint32_t)(right > 0)) |
         (uint32_t)(!(left > 0));
}

/* One step of the descent by prefix mass `u` from internal node k to the
   child peri_tree_go_right chooses, taking the left mass off *u when it
   goes right. It goes left exactly when left > 0 and (u < left or the
   right child has no mass): the same rule, written as a branch on purpose.
   A lone descent is a chain of dependent loads; a predicted branch lets
   the processor load the next levels before the comparison resolves (both
   children's children share a cache line), where a branch-free step waits
   for every load: 2x faster at 2^16 leaves, 3x at 2^24 (the lockstep
   lanes, whose loads overlap anyway, stay branch-free). */
PER_INLINE PER_HD uint32_t per_tree_step(const per_real *node, uint32_t k,
                                         per_real *u) {
  per_real left = node[2 * k];
  if (left > 0 && (*u < left || !(node[2 * k + 1] > 0))) return 2 * k;
  *u -= left;
  return 2 * k + 1;
}

/* Leaf index of the descent by prefix mass u from the root: per_tree_step
   until a leaf. When node[1] > 0 the leaf has a value > 0. */
PER_INLINE PER_HD uint32_t per_tree_descend(const per_real *node,
                                            uint32_t leaves, per_real u) {
  uint32_t k = 1;
  while (k < leaves) k = per_tree_step(node, k, &u);
  return k - leaves;
}

/* node[k] = node[2k] + node[2k+1]: the only way a parent gets a value. */
PER_INLINE PER_HD void per_tree_recompute(per_real *node, uint32_t k) {
  node[k] = node[2 * k] + node[2 * k + 1];
}

/* Prefix mass of stratum i of a B-batch drawn with block (seed, counter+i):
   u_i = (i + r_i) * seg with seg = total / B and r_i uniform in [0,1). */
PER_INLINE PER_HD per_real per_tree_stratum_u(uint64_t seed, uint64_t counter,
                                              uint32_t i, per_real seg) {
  uint32_t w[4];
  per_rng_block(seed, counter + i, w);
  return peri_mul_rn((per_real)i + per_u01_real(w), seg);
}

/* Bytes of the node array for `capacity` leaves: 2L * sizeof(per_real);
   0 when capacity is 0 or above PER_MAX_CAPACITY (or size_t overflows). */
PERDEF size_t per_tree_bytes(uint32_t capacity);

/* Allocate a tree of `capacity` leaves, all 0. `alloc_ctx` goes to
   PER_MALLOC/PER_FREE (NULL is fine). Errors: PER_ERR_NULL,
   PER_ERR_CAPACITY, PER_ERR_NOMEM. On error *t is set to an empty tree
   that per_tree_free accepts. */
PERDEF per_status per_tree_init(per_tree *t, uint32_t capacity,
                                void *alloc_ctx);

/* Same, in caller-owned memory `mem` of `bytes` >= per_tree_bytes(capacity)
   bytes, aligned for per_real. The tree never frees it. Errors:
   PER_ERR_NULL, PER_ERR_CAPACITY, PER_ERR_MEMORY. */
PERDEF per_status per_tree_init_mem(per_tree *t, uint32_t capacity, void *mem,
                                    size_t bytes);

/* Release the node array (when the tree owns it) and zero *t. Safe on a
   zeroed or already freed tree and on NULL. */
PERDEF void per_tree_free(per_tree *t);

/* Set every node to 0. */
PERDEF void per_tree_clear(per_tree *t);

/* Leaf i = v, then recompute its ancestors. v must be finite, >= 0 and
   <= PER_LEAF_MAX (-0 is stored as +0). Errors: PER_ERR_NULL,
   PER_ERR_INDEX (i >= capacity), PER_ERR_NAN, PER_ERR_INF,
   PER_ERR_NEGATIVE, PER_ERR_RANGE. */
PERDEF per_status per_tree_set(per_tree *t, uint32_t i, per_real v);

/* Leaves idx[j] = val[j] for j in [0,n). The whole batch is validated
   first (same errors as per_tree_set; nothing is written on error).
   Duplicate indices: the last one wins. Every ancestor of a changed leaf
   is then recomputed from its children, its last recompute coming after
   both children are final: level by level, one pass over the batch per
   level (a parent shared by several leaves is recomputed more than once,
   from the same final children, so to the same bits); near the root,
   where the changed ancestors span at most n nodes, that span in order;
   or the levels below the span by walking up from each leaf in turn: in
   a tree of at most 16 MiB always, in a larger one when that was faster
   on the tree's first batches (x86-64 with GCC or clang: the faster of
   the two depends on the processor; elsewhere level by level). O(n log
   L), no allocation. n == 0 is a no-op. The result is bitwise identical
   to applying per_tree_set to each pair in order, whichever way. */
PERDEF per_status per_tree_set_batch(per_tree *t, const uint32_t *idx,
                                     const per_real *val, size_t n);

/* Leaves first + j = val[j] for j in [0, n): a contiguous run, e.g. the
   slots a ring buffer fills next (a run that wraps around the end of the
   ring is two calls). Validated first (same errors as per_tree_set, and
   PER_ERR_INDEX when first + n > capacity; nothing is written on error).
   Consecutive leaves share their parents, so each level recomputes only
   the span of parents above the run: about 2n + log L node writes in
   all, in memory order. n == 0 is a no-op. The result is bitwise
   identical to per_tree_set on each leaf in order. */
PERDEF per_status per_tree_set_range(per_tree *t, uint32_t first,
                                     const per_real *val, size_t n);

/* Replace every leaf: leaf i = val[i] for i < n, 0 for n <= i < capacity,
   then recompute every internal node: O(L). n <= capacity. Validated first
   (PER_ERR_INDEX when n > capacity). */
PERDEF per_status per_tree_build(per_tree *t, const per_real *val, uint32_t n);

/* Leaf i, or 0 when i >= capacity. */
PERDEF per_real per_tree_get(const per_tree *t, uint32_t i);

/* The total (root) of the tree; 0 for an empty tree. */
PERDEF per_real per_tree_total(const per_tree *t);

/* Sum of the leaves [0, i) from the tree's partial sums, O(log L); i is
   clamped to capacity. */
PERDEF per_real per_tree_prefix(const per_tree *t, uint32_t i);

/* Leaf whose prefix interval holds u (per_tree_descend). u >= total gives
   the last leaf with mass. Errors: PER_ERR_NULL, PER_ERR_NAN (u is NaN),
   PER_ERR_NEGATIVE (u < 0), PER_ERR_EMPTY (total 0), PER_ERR_DEGENERATE
   (total not finite). */
PERDEF per_status per_tree_find(const per_tree *t, per_real u, uint32_t *idx);
/* per_tree_find for n values: idx[i] is the leaf of u[i], and val[i] (val
   may be NULL) its value; the descents run in lockstep groups, so their
   cache misses overlap (several times faster than n calls on a tree
   larger than the cache). The whole batch is checked first. Errors
   (nothing written): those of per_tree_find, for the first bad u[i];
   PER_ERR_NULL also for u or idx NULL with n > 0. */
PERDEF per_status per_tree_find_batch(const per_tree *t, const per_real *u,
                                      uint32_t n, uint32_t *idx, per_real *val);

/* Stratified batch of B draws: stratum i in [0,B) draws u_i =
   (i + r_i) * total / B, r_i from block (rng->seed, rng->counter + i), and
   descends. idx[i] gets the leaf, val[i] its value (val may be NULL; the
   probability is val[i] / per_tree_total). On success rng->counter
   advances by B and the stream's buffered words are dropped; on error
   nothing changes. Every index has a value > 0. Errors: PER_ERR_NULL,
   PER_ERR_BATCH (B == 0), PER_ERR_EMPTY, PER_ERR_DEGENERATE. */
PERDEF per_status per_tree_sample(const per_tree *t, per_rng *rng, uint32_t B,
                                  uint32_t *idx, per_real *val);

/* Strata [first, first + count) of the B-batch that per_tree_sample would
   draw from (seed, counter), written to idx[0..count) and val[0..count).
   Threads that split [0,B) among themselves get exactly the batch of one
   per_tree_sample call. count == 0 is a no-op. Errors as per_tree_sample,
   plus PER_ERR_INDEX when first + count > B. */
PERDEF per_status per_tree_sample_strata(const per_tree *t, uint64_t seed,
                                         uint64_t counter, uint32_t B,
                                         uint32_t first, uint32_t count,
                                         uint32_t *idx, per_real *val);

/* Check everything the tree promises: node[0] == 0, leaves finite and in
   [0, PER_LEAF_MAX], padded leaves 0, node[k] == node[2k] + node[2k+1]
   exactly for every internal k. O(L). PER_OK or PER_ERR_CORRUPT (or
   PER_ERR_NULL). For tests, debugging and data from outside. */
PERDEF per_status per_tree_check(const per_tree *t);

/* ======================================================================
   4. Uniform sampling without replacement: partial Fisher-Yates   >>swap
   ======================================================================
   perm[0..n) is always a permutation of [0, n). A batch of k swaps k
   uniformly chosen positions to the front: O(1) per draw, no reset between
   batches. n grows as a buffer fills, without re-initialising. */

typedef struct per_swap {
  uint32_t *perm;    /* capacity entries */
  uint32_t n;        /* items currently eligible: [0, n) */
  uint32_t capacity; /* most items n can grow to */
  uint32_t owns;     /* 1 when perm was allocated with PER_MALLOC */
  void *alloc_ctx;
} per_swap;

/* Bytes for `capacity` entries; 0 when capacity is 0 or too large. */
PERDEF size_t per_swap_bytes(uint32_t capacity);
/* A sampler for up to `capacity` items with n = 0. Errors: PER_ERR_NULL,
   PER_ERR_CAPACITY, PER_ERR_NOMEM (then *s is empty and freeable). */
PERDEF per_status per_swap_init(per_swap *s, uint32_t capacity,
                                void *alloc_ctx);
/* Same in caller memory (aligned for uint32_t). PER_ERR_MEMORY when too
   small or misaligned. */
PERDEF per_status per_swap_init_mem(per_swap *s, uint32_t capacity, void *mem,
                                    size_t bytes);
/* Release and zero. Safe on a zeroed sampler and on NULL. */
PERDEF void per_swap_free(per_swap *s);
/* Let items [0, n) be drawn. n may only grow: PER_ERR_ARG when
   n < s->n, PER_ERR_CAPACITY when n > capacity. O(1). */
PERDEF per_status per_swap_grow(per_swap *s, uint32_t n);
/* k distinct indices, uniform over the k-subsets of [0, n) and in uniform
   random order, into out[0..k). Errors: PER_ERR_NULL, PER_ERR_EMPTY
   (n == 0), PER_ERR_BATCH (k == 0 or k > n). */
PERDEF per_status per_swap_sample(per_swap *s, per_rng *rng, uint32_t k,
                                  uint32_t *out);

/* ======================================================================
   5. Categorical sampling over a tree                                >>cat
   ====================================================================== */

/* k independent draws proportional to the leaves (with replacement):
   u = r * total, r = per_rng_real(rng). val may be NULL. Errors:
   PER_ERR_NULL, PER_ERR_BATCH (k == 0), PER_ERR_EMPTY,
   PER_ERR_DEGENERATE; on error rng is unchanged. */
PERDEF per_status per_tree_sample_iid(const per_tree *t, per_rng *rng,
                                      uint32_t k, uint32_t *idx, per_real *val);

/* Workspace for sampling without replacement, sized for batches up to
   max_k. */
typedef struct per_cat {
  uint32_t max_k;
  uint32_t hbits;        /* table has 2^hbits slots; a batch of k uses the
                            first ones (load factor <= 1/2 for that k) */
  uint32_t *table;       /* open addressing, key = index + 1, 0 = empty */
  per_real *saved;       /* leaf values zeroed by the fallback */
  uint32_t reject_limit; /* repeats tolerated before the fallback; see below */
  uint32_t owns;
  void *alloc_ctx;
} per_cat;

/* Allocate the workspace for batches of up to max_k (>= 1). Errors:
   PER_ERR_NULL, PER_ERR_BATCH (max_k == 0 or > 2^30), PER_ERR_NOMEM (then
   *c is empty and freeable). reject_limit starts at max_k. */
PERDEF per_status per_cat_init(per_cat *c, uint32_t max_k, void *alloc_ctx);
/* Bytes of the workspace for batches up to max_k: a hash table of 2^h
   uint32_t (the least 2^h >= 2 max_k) then max_k per_real. 0 when max_k
   is 0 or > 2^30. */
PERDEF size_t per_cat_bytes(uint32_t max_k);
/* per_cat_init in caller memory `mem` of `bytes` >= per_cat_bytes(max_k),
   aligned for per_real; the workspace never frees it. Errors:
   PER_ERR_NULL, PER_ERR_BATCH, PER_ERR_MEMORY (too small or misaligned). */
PERDEF per_status per_cat_init_mem(per_cat *c, uint32_t max_k, void *mem,
                                   size_t bytes);
/* Release and zero. Safe on a zeroed workspace and on NULL. */
PERDEF void per_cat_free(per_cat *c);

/* k distinct leaves drawn by successive sampling (each pick proportional
   to the leaves not picked yet), in pick order, into idx[0..k); val[j]
   (may be NULL) is the leaf's value. Method: i.i.d. draws keeping first
   occurrences, which has exactly the successive-sampling distribution;
   once a call has seen c->reject_limit repeats (at most 64k + 1024 count;
   0 skips this phase) it switches to zeroing the picked leaves and drawing
   from the rest, then restores them. The tree
   is bitwise unchanged afterwards, on success and on every error (it is
   written to during the call: no concurrent readers). Errors:
   PER_ERR_NULL, PER_ERR_BATCH (k == 0 or k > max_k), PER_ERR_EMPTY,
   PER_ERR_DEGENERATE, PER_ERR_TOO_FEW (fewer than k positive leaves).
   The rng advances on success and may have advanced on PER_ERR_TOO_FEW;
   on the other errors it is unchanged. */
PERDEF per_status per_cat_sample(per_cat *c, per_tree *t, per_rng *rng,
                                 uint32_t k, uint32_t *idx, per_real *val);

/* ======================================================================
   6. Prioritized replay buffer                                   >>buffer
   ======================================================================
   A ring of `capacity` fixed-size items (opaque bytes, copied in on add
   and gathered out on sample) with one sum tree of leaf values
   p = (|td| + eps)^alpha. Sampling is stratified over the priority mass
   and deterministic from the seed. Not safe for concurrent use: sampling
   writes the rng, the beta step and scratch memory. */

/* per_config.flags */
enum {
  /* Normalize IS weights by the buffer-wide maximum weight (that of the
     smallest positive leaf) instead of the batch maximum. Keeps a second
     (min) tree: +2L per_real of memory, O(log L) more per changed leaf. */
  PER_WEIGHTS_BUFFER_MAX = 1u << 0,
  /* Sequence replay (seq_len > 0): a sequence may run past the end of an
     episode; the steps after the end are masked out (see
     PER_SAMPLE_SEQUENCES). Without it a sequence that crosses an episode
     end is never drawn. */
  PER_SEQ_CROSS_EPISODES = 1u << 1,
  /* New items get the largest leaf stored now (max_priority when none is
     > 0), instead of the largest leaf ever written (the paper's rule,
     the default): one huge TD error then sways new items only while its
     leaf is stored. Keeps a (max) tree: +2L per_real of memory, O(log L)
     more per changed leaf. Not with per_cuda_buffer or per_mpi.h
     (PER_ERR_ARG). */
  PER_MAX_LIVE = 1u << 2
};

/* How a stored step ends its episode (per_buffer_add_step). */
enum {
  PER_END_NONE = 0,       /* the episode goes on */
  PER_END_TERMINATED = 1, /* a terminal state: no bootstrap after it */
  PER_END_TRUNCATED = 2   /* cut by a time limit: the state is not terminal */
};

/* Every field is read as written: start from per_config_default(), which
   fills in the defaults noted below, and change what you need. 0 is a
   value like any other (alpha = 0 is uniform replay, beta0 = beta1 = 0 no
   correction, eps = 0 no floor); a config left zeroed is refused by
   per_buffer_init (capacity, item_size and max_priority must be > 0). */
typedef struct per_config {
  uint32_t capacity;   /* items: 1 .. 2^31 */
  uint32_t item_size;  /* bytes per item: >= 1 */
  double alpha;        /* default 0.6; 0 = uniform (every leaf 1) */
  double beta0;        /* default 0.4; IS exponent at step 0 */
  double beta1;        /* default 1.0; IS exponent from beta_steps on.
                          Any finite beta >= 0 is accepted: above 1 the
                          weights over-correct (the paper anneals to 1) */
  uint64_t beta_steps; /* default 200000 sample calls, linear beta0 -> beta1
                          (0: beta1 from the first call) */
  double eps;          /* default 1e-6; 0 allowed (zero-TD items are then
                          never drawn) */
  double max_priority; /* default 1.0: the leaf value new items get until an
                          update raises it (with PER_MAX_LIVE: while no
                          stored leaf is > 0); > 0 (ignored when alpha =
                          0: every leaf is then 1) */
  uint64_t seed;       /* default 0 (0 is a seed like any other) */
  uint32_t flags;      /* PER_WEIGHTS_BUFFER_MAX | PER_SEQ_CROSS_EPISODES
                          | PER_MAX_LIVE; default 0 */
  uint32_t max_unique; /* largest batch PER_SAMPLE_UNIQUE accepts: 1 ..
                          min(capacity, 2^30); default min(capacity, 65536);
                          its workspace is about 20 bytes per unit */
  uint32_t seq_len;    /* default 0 (no sequence replay); L >= 1: the
                          buffer also keeps a sum tree over sequences of L
                          consecutive steps (PER_SAMPLE_SEQUENCES); L <=
                          capacity */
  uint32_t seq_stride; /* with seq_len > 0: a sequence starts at every
                          slot that is a multiple of it (R2D2: L = 80,
                          stride 40); >= 1 and divides capacity; default
                          0 (must be set with seq_len) */
  double seq_eta;      /* default 0.9: a sequence's priority is eta * max +
                          (1 - eta) * mean of its steps' leaves; [0, 1] */
} per_config;

/* The defaults for a buffer of `capacity` items of `item_size` bytes:
     per_config cfg = per_config_default(100000, sizeof(transition));
     cfg.seed = 42;
   Nothing is validated (per_buffer_init does that). Valid C and C++. */
PERDEF per_config per_config_default(uint32_t capacity, uint32_t item_size);

/* Bytes of a per_buffer's layout text, its NUL included. */
#define PER_LAYOUT_MAX 512

/* A plain struct: declare one and per_buffer_init it. Fields are readable
   (tests, tools); change them only through the functions. Item slots
   [0, size) are filled; the newest is slot (pos + capacity - 1) % capacity
   and the oldest is slot pos once the ring is full (slot 0 before). */
typedef struct per_buffer {
  per_config cfg;         /* validated */
  unsigned char *items;   /* capacity * item_size bytes (the caller's with
                             per_buffer_init_mem) */
  uint32_t *gen;          /* per slot: times written (0 = never), counted
                             1..2^32-1 then 1 again (per_buffer_update) */
  per_tree tree;          /* leaf i = priority of slot i; unfilled slots 0 */
  per_real *min_node;     /* with PER_WEIGHTS_BUFFER_MAX: 2L values, node k
                             = min positive leaf below k (PERI_NO_MIN if
                             none); else NULL */
  per_swap swap;          /* alpha == 0 only: uniform without replacement */
  per_cat cat;            /* workspace of PER_SAMPLE_UNIQUE */
  uint8_t *ends;          /* per slot: PER_END_* of the step stored there */
  uint32_t *traj;         /* per slot: the low 32 bits of the id of the
                             trajectory (add call) that stored it */
  per_tree seq_tree;      /* seq_len > 0: leaf j = priority of the sequence
                             starting at slot j * seq_stride, 0 while it is
                             not valid; else empty */
  per_real *max_node;     /* with PER_MAX_LIVE: 2L values, node k = the
                             largest leaf below k (0 if none); else NULL */
  per_real *seq_min_node; /* seq_len > 0 with PER_WEIGHTS_BUFFER_MAX: the
                             min tree of seq_tree; else NULL */
  uint8_t *seq_ok;        /* seq_len > 0: 1 where sequence j is valid */
  uint32_t *scratch_idx;  /* max_unique slots (unique sampling) */
  per_real *scratch_val;  /* max_unique leaf values */
  per_rng rng;            /* every random number of the buffer */
  per_real max_leaf;      /* the leaf new items get: the largest leaf value
                             written (with PER_MAX_LIVE, stored) */
  uint32_t size;          /* items stored */
  uint32_t pos;           /* slot the next add writes */
  uint64_t added;         /* items added in total */
  uint64_t trajs;         /* trajectories added in total (add calls that
                             stored items): the next one's id */
  uint64_t step;          /* sample calls so far (the beta schedule) */
  uint32_t zero_hint;     /* 1 once some leaf may have been set to 0 */
  uint32_t own_items;     /* 1 when items was allocated (per_buffer_init) */
  void *alloc_ctx;
  char layout[PER_LAYOUT_MAX]; /* what the items are, as text, "" for
                                  unknown: per_buffer_set_layout */
  char error[192];             /* what the last refused call refused, naming the
                                  argument or field and its value ("max_unique 100 >
                                  capacity 50"); "" after a successful call; always
                                  NUL-terminated. The one field a refused call writes */
} per_buffer;

/* Bit 31 of the ids per_buffer_sample hands out for sequences
   (PER_SAMPLE_SEQUENCES): slot | PER_ID_SEQ | generation << 32, where an
   item's id is slot | generation << 32 (slots are < 2^31). per_buffer_update
   refuses them (a sequence's steps are updated with per_buffer_update_seq,
   which takes ids with or without the bit). */
#define PER_ID_SEQ ((uint64_t)1 << 31)

/* The slot of an item's or a sequence's id (its first step's slot). */
PER_INLINE uint32_t per_id_slot(uint64_t id) {
  return (uint32_t)id & ~(uint32_t)PER_ID_SEQ;
}
/* The generation of an id: the slot's write count when it was drawn. */
PER_INLINE uint32_t per_id_generation(uint64_t id) {
  return (uint32_t)(id >> 32);
}

/* per_sample_opts.flags */
enum {
  PER_SAMPLE_UNIQUE = 1u << 0,      /* distinct items within the batch */
  PER_SAMPLE_BETA = 1u << 1,        /* use opts->beta instead of the schedule */
  PER_SAMPLE_SEQUENCES = 1u << 2,   /* draw sequences of seq_len steps */
  PER_SAMPLE_TRAJECTORIES = 1u << 3 /* window counts trajectories */
};

typedef struct per_sample_opts {
  uint32_t flags;  /* PER_SAMPLE_UNIQUE | PER_SAMPLE_BETA |
                      PER_SAMPLE_SEQUENCES | PER_SAMPLE_TRAJECTORIES */
  double beta;     /* with PER_SAMPLE_BETA: finite, >= 0 (above 1
                      accepted, as beta1); without it 0, since it would
                      not be used (PER_ERR_ARG otherwise) */
  uint32_t window; /* 0 = whole buffer; W = only the W most recently added
                      items (W > size means the whole buffer); with
                      PER_SAMPLE_TRAJECTORIES, the items of the W most
                      recent trajectories (add calls) among those stored;
                      sequences: those whose first step is one of them */
  uint8_t *mask;   /* output, may be NULL: with PER_SAMPLE_SEQUENCES,
                      B * seq_len bytes, 1 for a step of the sequence's
                      episode, 0 for a step after its end (only with
                      PER_SEQ_CROSS_EPISODES) */
} per_sample_opts;

/* Validate cfg, allocate everything (items are zeroed) and start the rng
   at cfg->seed. alloc_ctx goes to PER_MALLOC/PER_FREE. Errors:
   PER_ERR_NULL (b or cfg), PER_ERR_CAPACITY (capacity 0 or > 2^31, or
   capacity * item_size overflows size_t), PER_ERR_ARG (item_size 0, a
   double field NaN, infinite or negative, max_priority 0 or >
   PER_LEAF_MAX, unknown flags, max_unique 0, > capacity or > 2^30,
   seq_eta outside [0, 1], seq_len > capacity, seq_len > 0 with
   seq_stride 0 or not dividing capacity, seq_len 0 with seq_stride != 0
   or PER_SEQ_CROSS_EPISODES), PER_ERR_NOMEM. On error *b is zeroed but
   for b->error, which names the field and its value (per_buffer_free
   accepts it), and nothing is leaked. */
PERDEF per_status per_buffer_init(per_buffer *b, const per_config *cfg,
                                  void *alloc_ctx);
/* per_buffer_init with the item ring in caller memory: `items`, `bytes`
   >= capacity * item_size, any alignment, e.g. a file mapped with mmap
   (MAP_SHARED) for a ring larger than RAM. Everything else (generations,
   episode ends, trees, workspaces) is allocated as by per_buffer_init.
   The ring is used as it is: not zeroed, and no slot is read before an
   add or a load writes it (a load also zeroes the slots it leaves
   empty). Slot i is at items + i * item_size; per_buffer_free never
   frees it. Errors: those
   of per_buffer_init, plus PER_ERR_NULL (items) and PER_ERR_MEMORY
   (bytes < capacity * item_size). */
PERDEF per_status per_buffer_init_mem(per_buffer *b, const per_config *cfg,
                                      void *items, size_t bytes,
                                      void *alloc_ctx);
/* Release everything and zero *b. Safe on a zeroed buffer and on NULL. */
PERDEF void per_buffer_free(per_buffer *b);
/* Items stored (0 for NULL). */
PERDEF uint32_t per_buffer_size(const per_buffer *b);
/* Say what b's items are, as text: "" (the default) for unknown, or any
   text of up to PER_LAYOUT_MAX - 1 chars that names the item's fields,
   types and shapes (Python writes its NumPy dtype; C may write e.g.
   "float32 obs[4]; int32 action; float32 reward"). Checkpoints keep it
   (version 3), and a load refuses a file whose layout is not "" and
   differs from b's, byte for byte, when b's is not "" (PER_ERR_MISMATCH:
   the same item_size is not enough to read the bytes the same way); a
   load into a buffer with "" gives it the file's. Errors (b unchanged
   but for b->error): PER_ERR_NULL (b, or layout), PER_ERR_ARG (layout
   of PER_LAYOUT_MAX chars or more). */
PERDEF per_status per_buffer_set_layout(per_buffer *b, const char *layout);
/* The beta the next scheduled sample call uses: beta0 + (beta1 - beta0) *
   min(1, step / beta_steps); exactly beta1 once step >= beta_steps. */
PERDEF double per_buffer_beta(const per_buffer *b);

/* Trajectories: every add call that stores items (the four below, n >=
   1) stores one trajectory: its items share the id b->trajs (the low 32
   bits are kept per slot in b->traj), which then grows by one. A window
   can count them (PER_SAMPLE_TRAJECTORIES); checkpoints keep them. */

/* Copy item_size bytes into slot pos, which gets leaf max_leaf and its
   generation bumped; when the ring is full this overwrites the oldest
   item. O(item_size + log L). Errors: PER_ERR_NULL. */
PERDEF per_status per_buffer_add(per_buffer *b, const void *item);
/* n items, contiguous (n * item_size bytes), in order, as one trajectory:
   the same state as n per_buffer_add calls but for the trajectory ids
   (one for the call, not n); the slots' leaves are set as contiguous runs
   (per_tree_set_range: each parent recomputed once per run of <= 256).
   When n > capacity only the last capacity items stay. n == 0 is a no-op.
   Errors: PER_ERR_NULL. */
PERDEF per_status per_buffer_add_batch(per_buffer *b, const void *items,
                                       uint32_t n);
/* per_buffer_add with the step's episode end: PER_END_NONE,
   PER_END_TERMINATED or PER_END_TRUNCATED, kept per slot (b->ends) and in
   checkpoints. per_buffer_add and per_buffer_add_batch store
   PER_END_NONE. The step after an end starts the next episode. Errors
   (nothing stored): PER_ERR_NULL, PER_ERR_ARG (another value of end). */
PERDEF per_status per_buffer_add_step(per_buffer *b, const void *item,
                                      uint8_t end);
/* per_buffer_add_batch with ends[j] for item j (NULL: every step
   PER_END_NONE). The whole batch is validated first. Errors (nothing
   stored): PER_ERR_NULL, PER_ERR_ARG (an ends[j] not a PER_END_*). */
PERDEF per_status per_buffer_add_steps(per_buffer *b, const void *items,
                                       uint32_t n, const uint8_t *ends);
/* per_buffer_add_steps with the items' priorities given as TD errors, as
   Ape-X's actors compute them: item j gets leaf (|td[j]| + eps)^alpha,
   the leaf per_buffer_update would give it, instead of max_leaf, and
   max_leaf grows to the largest leaf written (with PER_MAX_LIVE, the
   largest stored). The same state as per_buffer_add_steps followed by
   per_buffer_update of the kept items with td, but for the leaves'
   history: one write each. When n > capacity only the last capacity
   items and their td count. The whole batch is validated first. Errors
   (nothing stored): PER_ERR_NULL (b, items or td with n > 0),
   PER_ERR_ARG (an ends[j] not a PER_END_*), PER_ERR_NAN, PER_ERR_INF
   (a td[j]; b->error names it). */
PERDEF per_status per_buffer_add_td(per_buffer *b, const void *items,
                                    uint32_t n, const uint8_t *ends,
                                    const float *td);

/* Draw B items. opts may be NULL (whole buffer, with replacement,
   scheduled beta). Outputs (each may be NULL):
     items_out  B * item_size bytes, the items copied out in draw order;
     ids        B ids: slot | (uint64_t)generation << 32; pass them to
                per_buffer_update (needed for updates);
     weights    B IS weights w = (N P(i))^-beta divided by the batch max
                (default; so max w = 1) or by the buffer-wide max (flag
                PER_WEIGHTS_BUFFER_MAX), in [0, 1].
   Method: with replacement, B strata of the priority mass
   (per_tree_sample_strata with the buffer's rng: the same seed gives the
   same batches). With a window, the window's one or two slot ranges are split
   into their O(log L) whole subtrees, and stratum u is located among them
   before descending inside one: exact and O(log L) per draw.
   PER_SAMPLE_UNIQUE draws B distinct items: successive sampling (each pick
   proportional to the leaves not yet picked) with per_cat_sample for the
   whole buffer, by zero-and-restore of the picks within a window; alpha =
   0 uses the swap sampler (O(1) per draw). Once some leaf may be 0
   (zero_hint: eps = 0 or underflow), a unique call first counts the
   positive eligible leaves, O(W). N P(i) = N p_i / total of the eligible
   items, also for unique draws. When the eligible mass is 0 or
   not finite, draws are uniform over the eligible items and every weight
   is 1. On success step advances by one (also with PER_SAMPLE_BETA).
   Errors (then the buffer, rng and step are unchanged and no output is
   written): PER_ERR_NULL (b), PER_ERR_ARG (unknown flags, beta NaN,
   infinite or negative, beta != 0 without PER_SAMPLE_BETA), PER_ERR_BATCH (B == 0, or B > max_unique with
   PER_SAMPLE_UNIQUE), PER_ERR_EMPTY (nothing stored), PER_ERR_TOO_FEW
   (PER_SAMPLE_UNIQUE and B > eligible items, or > eligible items with
   positive priority when the eligible mass is > 0).

   Sequences (PER_SAMPLE_SEQUENCES, a buffer with seq_len = L > 0): the
   drawn unit is a sequence of L consecutive steps starting at a slot
   that is a multiple of seq_stride. A sequence is valid while all its
   steps are stored, in order, and none is overwritten: it never spans
   the ring's write head. Without PER_SEQ_CROSS_EPISODES it is also
   valid only if none of its first L - 1 steps ends an episode; with it,
   the steps after the first end are masked. Its leaf in seq_tree is eta
   * max + (1 - eta) * mean of the leaves of its unmasked steps (0 when
   not valid), recomputed whenever one of them changes, so a draw is
   O(log) like an item's. Draws, windows, PER_SAMPLE_UNIQUE, beta and IS
   weights work as for items, with sequences in place of items (N P(j) =
   N p_j / total over the eligible sequences; PER_WEIGHTS_BUFFER_MAX: the
   smallest positive sequence leaf). When the eligible sequences' mass
   is 0, draws are uniform over the valid eligible sequences. Outputs:
   items_out B * L * item_size bytes, sequence j's steps at [j * L, (j +
   1) * L) in step order; ids B sequence ids (first slot | PER_ID_SEQ |
   generation << 32, for per_buffer_update_seq; per_buffer_update
   refuses them); weights B; opts->mask B * L bytes.
   Extra errors: PER_ERR_ARG (no seq_len), PER_ERR_TOO_FEW (no valid
   eligible sequence, or fewer than B with PER_SAMPLE_UNIQUE). */
PERDEF per_status per_buffer_sample(per_buffer *b, uint32_t B,
                                    const per_sample_opts *opts,
                                    void *items_out, uint64_t *ids,
                                    float *weights);

/* Set leaf (|td[j]| + eps)^alpha (computed in double, capped at
   PER_LEAF_MAX) for ids[j], j < n. The whole batch is validated first.
   Ids of items overwritten since they were sampled (older generation) are
   skipped and counted into *stale (may be NULL; set on success).
   Duplicates: the last one wins. max_leaf becomes the largest leaf
   written if that is larger (it never decreases). n == 0 is a no-op.
   Twin critics: td[j] = 0.5f * (fabsf(d1[j]) + fabsf(d2[j])).
   Generations: a slot's generation counts its writes modulo 2^32 - 1
   (1, 2, ..., 2^32 - 1, then 1 again), so an id held while its slot is
   overwritten exactly a multiple of 2^32 - 1 times is taken as current
   (that needs about (2^32 - 1) * capacity adds between its sample and
   its update: 4.3e14 for a capacity of 10^5); any other number of
   overwrites makes it stale.
   Errors (nothing applied, *stale untouched): PER_ERR_NULL, PER_ERR_NAN,
   PER_ERR_INF (a td), PER_ERR_ARG (a sequence's id, PER_ID_SEQ: its
   steps are updated with per_buffer_update_seq), PER_ERR_INDEX (an id
   that sample never handed out:
   slot >= capacity, generation 0, or newer than the slot's while no slot
   can have wrapped, i.e. fewer than 2^32 - 1 adds in all). */
PERDEF per_status per_buffer_update(per_buffer *b, const uint64_t *ids,
                                    const float *td, uint32_t n,
                                    uint32_t *stale);

/* per_buffer_update's checks without its changes, for a layer that must
   agree on a status before anything changes (per_mpi.h): the status
   per_buffer_update(b, ids, td, n, ...) would return and, on PER_OK, the
   number of stale ids it would skip (*stale) and the max_leaf b would
   have after it (*max_leaf; PER_ERR_ARG when asked of a PER_MAX_LIVE
   buffer, whose max_leaf may also fall); either may be NULL. b is not
   changed. O(n), plus one pow per current id when max_leaf is asked
   for. */
PERDEF per_status per_buffer_update_check(const per_buffer *b,
                                          const uint64_t *ids, const float *td,
                                          uint32_t n, uint32_t *stale,
                                          per_real *max_leaf);

/* The IS weight per_buffer_sample gives a draw of leaf p when the
   smallest leaf of the batch (or of the buffer, PER_WEIGHTS_BUFFER_MAX)
   is pmin: (pmin / p)^beta computed in double, as a float; exactly 1 when
   beta == 0 or p <= pmin. For layers that draw the leaves themselves
   (per_mpi.h). */
PERDEF float per_is_weight(per_real p, per_real pmin, double beta);

/* A layer that keeps one replay in several buffers, its shards
   (per_mpi.h), draws the strata or uniform positions itself and keeps
   what the shards share equal. The functions below change that state as
   per_buffer_sample, per_buffer_update and per_buffer_load do, so that
   such a layer never writes a per_buffer's fields. */

/* What the shards of one replay share: the batch stream, the step,
   max_leaf and the config fields a checkpoint restores besides the
   buffer's shape (per_buffer_load restores these with the items). */
typedef struct per_buffer_shared {
  per_rng rng;                                   /* the batch stream */
  uint64_t step;                                 /* sample calls so far */
  double alpha, beta0, beta1, eps, max_priority; /* as in per_config */
  uint64_t beta_steps, seed;                     /* as in per_config */
  per_real max_leaf;                             /* the leaf new items get */
} per_buffer_shared;

/* b's shared state (all zero for NULL b). */
PERDEF per_buffer_shared per_buffer_shared_of(const per_buffer *b);
/* Replace b's shared state with *s (a checkpoint's, or another shard's):
   the rng, step, max_leaf and the config's alpha, beta0, beta1, eps,
   max_priority, beta_steps and seed; the items and leaves stay. Checked
   first: the config fields as per_buffer_init checks them, alpha 0
   exactly when b's is (then every leaf is 1 and b has its swap sampler),
   rng.avail <= 4 and rng.pad 0, max_leaf a leaf value (per_leaf_status)
   > 0, at least every stored leaf, and 1 when alpha is 0 (with
   PER_MAX_LIVE, b's own: the largest stored leaf). O(size).
   Errors (b unchanged): PER_ERR_NULL (b, s, or b not initialised),
   PER_ERR_ARG (a field outside those bounds). */
PERDEF per_status per_buffer_set_shared(per_buffer *b,
                                        const per_buffer_shared *s);
/* Advance b past a batch of B strata drawn from its stream by the caller
   (stratum i from per_tree_stratum_u(b->rng.seed, b->rng.counter, i,
   seg)): the counter by B with the buffered words dropped, and the step
   by one, as per_buffer_sample leaves them after B strata. Errors (b
   unchanged): PER_ERR_NULL, PER_ERR_BATCH (B == 0). */
PERDEF per_status per_buffer_advance_strata(per_buffer *b, uint32_t B);
/* B positions uniform in [0, n) from b's stream into pos[0..B), in order,
   and the step advanced by one: the draws of per_buffer_sample's uniform
   fallback over n eligible items (per_rng_below(n) each, the item at that
   position counted from the oldest); for n >= 2^32, 64 bits (two words,
   the first the high half) by rejection below the largest multiple of
   n. Errors (b unchanged): PER_ERR_NULL (b, pos), PER_ERR_BATCH (B ==
   0), PER_ERR_EMPTY (n == 0). */
PERDEF per_status per_buffer_draw_uniform(per_buffer *b, uint64_t n, uint32_t B,
                                          uint64_t *pos);
/* max_leaf, the leaf new items get, becomes v if v is larger (it never
   decreases), as after an update that wrote a leaf v. Errors (b
   unchanged): PER_ERR_NULL, those of per_leaf_status(v) (PER_ERR_NAN,
   PER_ERR_INF, PER_ERR_NEGATIVE, PER_ERR_RANGE), PER_ERR_ARG (v == 0, or
   v > 1 with alpha 0, where every leaf is 1, or v > max_leaf with
   PER_MAX_LIVE, where it is the largest stored leaf). */
PERDEF per_status per_buffer_raise_max_leaf(per_buffer *b, per_real v);
/* Count `items` items and `trajs` trajectories as added before every
   item b holds and stored nowhere now: added grows by items, trajs by
   trajs and every stored item's trajectory id by trajs, so that ids stay
   numbered in add order (per_mpi_load: what a re-shard leaves out).
   Errors (b unchanged): PER_ERR_NULL, PER_ERR_ARG (trajs > items, since
   every trajectory stored an item; or added or trajs would pass 2^64 -
   1). */
PERDEF per_status per_buffer_count_evicted(per_buffer *b, uint64_t items,
                                           uint64_t trajs);

/* Update the steps of sequences drawn with PER_SAMPLE_SEQUENCES: for
   ids[j], j < n, the leaf of its step t (t < seq_len) becomes
   (|td[j * seq_len + t]| + eps)^alpha, as per_buffer_update; masked
   steps (after an episode end) are left as they are, but every td must
   be finite. Then every sequence holding a changed step gets its
   priority again. Ids are taken with or without PER_ID_SEQ. Ids whose
   first slot was overwritten since the draw are skipped and counted into *stale (may be NULL; set on success);
   where sequences overlap, the last write of a step wins. Errors
   (nothing applied, *stale untouched): PER_ERR_NULL, PER_ERR_ARG (the
   buffer has no seq_len), PER_ERR_NAN, PER_ERR_INF, PER_ERR_INDEX (an id
   sample never handed out: not a sequence start, generation 0 or newer
   than the slot's, or a current id of a sequence that is not valid). */
PERDEF per_status per_buffer_update_seq(per_buffer *b, const uint64_t *ids,
                                        const float *td, uint32_t n,
                                        uint32_t *stale);

/* Check the buffer's invariants (tests, fuzzing, data from outside): the
   tree (per_tree_check), filled slots [0, size) with generation >= 1 and
   the others 0 with leaf 0, pos, max_leaf >= every leaf, alpha = 0 leaves
   1, the swap permutation, the min tree, the episode ends, the
   trajectory ids (never newer going back in age, none before 0, trajs
   <= added) and every sequence leaf against its steps. O(capacity +
   capacity * seq_len /
   seq_stride). PER_OK or PER_ERR_CORRUPT (PER_ERR_NULL). */
PERDEF per_status per_buffer_check(const per_buffer *b);

/* ======================================================================
   7. n-step adder                                                 >>nstep
   ======================================================================
   Turns environment steps into n-step items: (s_t, a_t, sum_{k<m}
   gamma^k r_{t+k}, gamma^m, done, s_{t+m}), m <= n. A pending ring of n
   steps is allocated at init; steps never allocate. Several adders (one
   per environment) may feed one buffer. */

typedef struct per_nstep_config {
  uint32_t n;           /* steps, >= 1 */
  float gamma;          /* discount in [0, 1] */
  uint32_t obs_size;    /* bytes of one observation, >= 1 */
  uint32_t action_size; /* bytes of one action, >= 1 */
} per_nstep_config;

/* Byte offsets of an emitted item's fields: obs at 0, action at obs_size,
   then at the next multiple of 4: float reward, float discount, uint32_t
   done, then next_obs; size is the item size. The target is
   reward + (done ? 0 : discount * V(next_obs)). */
typedef struct per_nstep_layout {
  uint32_t obs, action, reward, discount, done, next_obs, size;
} per_nstep_layout;

/* The layout for cfg; all zero when cfg is NULL, a size is 0 or the item
   would not fit in 2^32 - 1 bytes. */
PERDEF per_nstep_layout per_nstep_layout_of(const per_nstep_config *cfg);

/* Declare `name`, a struct with exactly the layout per_nstep emits for
   observations of obs_count obs_type values and actions of action_count
   action_type values, and check that at compile time:
     PER_NSTEP_ITEM(cart_item, float, 4, int32_t, 1);
     // cart_item: obs[4], action[1], reward, discount, done, next_obs[4]
     per_nstep_config nc = {3, 0.99f, 4 * sizeof(float), sizeof(int32_t)};
     per_config cfg = per_config_default(100000, sizeof(cart_item));
   At file scope (it declares a typedef and a check array type). The
   layout packs action right after obs and next_obs right after done, so
   the element types must not need more: 1-, 2- and 4-byte types always
   fit (uint8_t frames, float, int32_t); an 8-byte type fits when the
   offsets happen to be multiples of 8. Otherwise the check array has a
   negative size and the build stops at name##_layout_differs_from_per_nstep;
   then read the fields at per_nstep_layout_of's offsets with memcpy. */
#define PER_NSTEP_ITEM(name, obs_type, obs_count, action_type, action_count)   \
  typedef struct name {                                                        \
    obs_type obs[obs_count];                                                   \
    action_type action[action_count];                                          \
    float reward;                                                              \
    float discount;                                                            \
    uint32_t done;                                                             \
    obs_type next_obs[obs_count];                                              \
  } name;                                                                      \
  typedef char name##_layout_differs_from_per_nstep                            \
      [(offsetof(name, action) == sizeof(obs_type) * (obs_count) &&            \
        offsetof(name, reward) == (sizeof(obs_type) * (obs_count) +            \
                                   sizeof(action_type) * (action_count) + 3) / \
                                      4 * 4 &&                                 \
        offsetof(name, next_obs) == offsetof(name, reward) + 12 &&             \
        sizeof(name) ==                                                        \
            offsetof(name, next_obs) + sizeof(obs_type) * (obs_count))         \
           ? 1                                                                 \
           : -1]

typedef struct per_nstep {
  per_nstep_config cfg;
  per_nstep_layout layout;
  float *reward;       /* n pending rewards (ring) */
  unsigned char *obs;  /* n pending observations */
  unsigned char *act;  /* n pending actions */
  unsigned char *item; /* layout.size bytes: the item being emitted */
  uint32_t head;       /* oldest pending step */
  uint32_t count;      /* pending steps, < n between calls */
  void *alloc_ctx;
} per_nstep;

/* Errors: PER_ERR_NULL, PER_ERR_ARG (n == 0 or > 2^24, gamma NaN or
   outside [0, 1], a size 0, sizes overflow), PER_ERR_NOMEM. On error *a is
   zeroed (per_nstep_free accepts it). One allocation. */
PERDEF per_status per_nstep_init(per_nstep *a, const per_nstep_config *cfg,
                                 void *alloc_ctx);
/* Release and zero. Safe on a zeroed adder and on NULL. */
PERDEF void per_nstep_free(per_nstep *a);
/* One environment step: obs, action -> reward, next_obs, terminated,
   truncated. Once n steps are pending the oldest is emitted with m = n,
   done = 0, next_obs this step's next_obs. When the episode ends
   (terminated or truncated, nonzero) every pending step is emitted,
   oldest first, with m = the steps from it to the end: terminated gives
   done = 1 (no bootstrap; both set counts as terminated), truncated gives
   done = 0 and next_obs = this step's next_obs with discount gamma^m.
   Then the adder is empty for the next episode. Rewards are summed in
   double, r_t + gamma r_{t+1} + ..., and stored as float; discount is
   gamma^m (repeated multiplication in double). Items go to b with
   per_buffer_add. No allocation. Errors (nothing changes, nothing is
   added): PER_ERR_NULL, PER_ERR_ARG (b->cfg.item_size != layout.size),
   PER_ERR_NAN, PER_ERR_INF (reward). */
PERDEF per_status per_nstep_step(per_nstep *a, per_buffer *b, const void *obs,
                                 const void *action, float reward,
                                 const void *next_obs, int terminated,
                                 int truncated);
/* Drop pending steps without emitting (e.g. when an environment is reset
   from outside). */
PERDEF void per_nstep_reset(per_nstep *a);

/* ======================================================================
   8. Checkpoints (files not with PER_NO_STDIO)                     >>ckpt
   ======================================================================
   A little-endian binary file (format in docs/FORMAT.md): header with magic,
   version, endianness marker, field sizes, config and counters; then the
   size filled slots' items, generations, leaves (and the swap permutation
   when alpha = 0), episode ends, trajectory ids; then a CRC-32C of all
   the bytes before it. The sequence tree is not stored: it is rebuilt
   from the steps. */

/* CRC-32C (Castagnoli, reflected 0x82F63B78) of p[0..n), continuing from
   crc (start with 0): per_crc32c(per_crc32c(0, a, x), b, y) equals the
   CRC of a followed by b. "123456789" gives 0xE3069283. */
PERDEF uint32_t per_crc32c(uint32_t crc, const void *p, size_t n);

/* Version 2 adds the sequence config, the episode ends and the
   trajectories; version 1 files still load (every item then its own
   trajectory, numbered by its add). */
#define PER_CKPT_VERSION 3u

/* Checkpoints that do not stall training: per_buffer_snapshot copies the
   checkpoint's bytes into caller memory (the training thread waits only
   for that copy: memcpy speed on a little-endian host), and
   per_snapshot_write writes them to a file from any thread, with the
   checksum and the guarantees of per_buffer_save. The library starts no
   thread itself; docs/GUIDE.md shows the pthread pattern. The file written
   is byte for byte the one per_buffer_save would have written at the
   moment of the snapshot.

   per_buffer_snapshot_bytes: the bytes a snapshot of b takes when b is
   full (capacity items), the most any snapshot of b needs: allocate that
   once. 0 for NULL or an uninitialised buffer, or when it does not fit
   in size_t. */
PERDEF size_t per_buffer_snapshot_bytes(const per_buffer *b);
/* The checkpoint of b as it is now, into mem[0..*len): the file's bytes
   (docs/FORMAT.md has the format), its last 4 bytes (the CRC-32C) left 0 for
   per_snapshot_write to fill in its file. b is not changed and mem needs
   no alignment. O(size): a memcpy of the items, generations, leaves (and
   permutation) and ends. Available with PER_NO_STDIO. Errors (nothing
   written): PER_ERR_NULL, PER_ERR_MEMORY (bytes is below the snapshot's
   length; per_buffer_snapshot_bytes(b) is always enough). */
PERDEF per_status per_buffer_snapshot(const per_buffer *b, void *mem,
                                      size_t bytes, size_t *len);

#ifndef PER_NO_STDIO
/* Write the whole state to `path`. The buffer is not changed.

   per_buffer_save writes a new temporary file beside path, named
   path.tmp-XXXXXXXXXXXXXXXX (16 hex digits, different for every save,
   created exclusively: a name that exists is never reused), then fflush,
   fsync (POSIX), rename over path, and fsync of the directory (POSIX,
   where the directory can be opened). What that guarantees:
   - Crash (the process killed at any point): path holds the previous
     file or the new one, each complete; a kill before the rename may
     leave a path.tmp-* file behind (safe to delete).
   - Power loss (POSIX): once the call returned PER_OK, the new file is
     on disk (its data synced before the rename, the rename synced by the
     directory fsync); before that, as for a crash.
   - Concurrent saves to one path, from threads or processes: each writes
     its own temporary file, so the file left is one complete save (the
     last rename wins), never a mix; a concurrent load reads the old or
     the new file, never a partial one.
   On error nothing is renamed and the temporary file is removed, so an
   existing file at path stays as it was; the one exception is a failed
   directory fsync after the rename (PER_ERR_IO too): the new file is
   then in place and complete, but not known to survive a power loss.
   Windows: _commit for fsync and MoveFileExA (replace existing, write
   through) for the rename, so a save replaces an existing file there too;
   a file open in another process (without FILE_SHARE_DELETE) makes the
   replace, and so the save, fail with PER_ERR_IO.
   Errors: PER_ERR_NULL, PER_ERR_NOMEM (the temporary name), PER_ERR_IO
   (create, write, flush, sync or rename failed). */
PERDEF per_status per_buffer_save(const per_buffer *b, const char *path);
/* Write a snapshot (per_buffer_snapshot's mem and len) to `path` as
   per_buffer_save does (the same temporary file, fsyncs and atomic
   replace, with the same guarantees), computing its CRC-32C. Touches
   nothing but the snapshot (read only) and the file system, so it may
   run on any thread, also while the buffer it came from keeps adding
   and sampling; the snapshot memory must not change until it returns.
   Several writes may run at once. alloc_ctx goes to PER_MALLOC/PER_FREE
   (the temporary file's name). Errors: PER_ERR_NULL, PER_ERR_FORMAT (not
   a snapshot of this version: magic, version, byte-order marker, header
   size, or a length other than the header's), PER_ERR_NOMEM, PER_ERR_IO
   (as per_buffer_save; the existing file at path stays as it was). */
PERDEF per_status per_snapshot_write(const void *snap, size_t len,
                                     const char *path, void *alloc_ctx);
/* Write data[0..len) followed by its CRC-32C (4 bytes, little-endian) to
   path, as per_buffer_save writes a checkpoint (the same temporary file,
   fsyncs and atomic replace, with the same guarantees): for files that
   sit beside checkpoints, such as per_mpi.h's manifest. alloc_ctx goes
   to PER_MALLOC/PER_FREE (the temporary file's name). Errors:
   PER_ERR_NULL (path, or data with len > 0), PER_ERR_NOMEM, PER_ERR_IO
   (as per_buffer_save; the existing file at path stays as it was). */
PERDEF per_status per_file_write(const void *data, size_t len, const char *path,
                                 void *alloc_ctx);
/* What a checkpoint holds, from its header and layout text alone (the
   arrays and the CRC are not read: per_buffer_load checks them). cfg is
   the saved buffer's config, every field per_buffer_init takes (a buffer
   made from it, of real_bytes leaves and with layout set, loads the file
   whole). */
typedef struct per_ckpt_info {
  per_config cfg;              /* the saved config */
  uint32_t version;            /* the format's version: 1 .. 3 */
  uint32_t real_bytes;         /* sizeof(PER_REAL) of the writer: 4 or 8 */
  uint32_t size;               /* items stored */
  uint32_t pad;                /* 0 */
  uint64_t added, step;        /* adds and sample calls so far */
  char layout[PER_LAYOUT_MAX]; /* per_buffer_set_layout's text, "" for
                                  none (and in versions 1 and 2) */
} per_ckpt_info;

/* Read the header (and layout text) of the checkpoint at path into
   *info: to make the buffer it loads into without knowing its capacity,
   item size or layout. Errors (*info zeroed): PER_ERR_NULL, PER_ERR_IO,
   PER_ERR_FORMAT, PER_ERR_VERSION, PER_ERR_TRUNCATED, PER_ERR_CORRUPT (a
   header field out of range; as per_buffer_load says them). */
PERDEF per_status per_ckpt_read_info(const char *path, per_ckpt_info *info);

/* Replace the whole state of b (initialised) with the file's: items,
   leaves, generations, episode ends, trajectory ids, ring position,
   counters, rng, beta step, max_leaf
   and the config's alpha, beta0, beta1, beta_steps, eps, max_priority and
   seed (with seq_len > 0 also seq_eta); and b's layout when it is ""
   (per_buffer_set_layout). The file is read and validated completely,
   into temporary memory,
   before b is touched; b then samples exactly the batches the saved
   buffer would have. Nothing is allocated before the header's claimed
   length has been checked against the file's real length (where the
   stream can tell it: a seekable file) and the item size (and, for a
   full load, the capacity) against b's, so the memory used is bounded by
   the real file and by b's own footprint. Errors (b unchanged):
   PER_ERR_NULL, PER_ERR_IO (open or read failed, e.g. path is a
   directory), PER_ERR_NOMEM, PER_ERR_FORMAT (not a per checkpoint:
   magic, endianness marker or header size, and empty files),
   PER_ERR_VERSION, PER_ERR_TRUNCATED (shorter than its header says),
   PER_ERR_CHECKSUM, PER_ERR_MISMATCH (the file's capacity, item_size,
   PER_REAL size, flags, max_unique, alpha = 0, seq_len or seq_stride
   differ from b's, or its layout does: per_buffer_set_layout),
   PER_ERR_CORRUPT (longer than its header says, or a field out of range
   with a valid checksum). */
PERDEF per_status per_buffer_load(per_buffer *b, const char *path);
/* per_buffer_load from memory: mem[0..len) holds a checkpoint file's
   bytes, a file read whole or a snapshot (per_buffer_snapshot) with its
   CRC filled in: per_crc32c(0, mem, len - 4) in its last 4 bytes,
   little-endian. The same checks, the same state and the same errors as
   from a file (PER_ERR_NULL for mem; PER_ERR_TRUNCATED or
   PER_ERR_CORRUPT when len is below or above the checkpoint's length).
   For copies in memory: pickling, messages, shared memory. */
PERDEF per_status per_buffer_load_mem(per_buffer *b, const void *mem,
                                      size_t len);
/* Rank `rank` of `world` loads the items of slots rank, rank + world, ...
   of the file, with their leaves and episode ends, into b (oldest first,
   at slots 0, 1, ...; generations restart at 1; b keeps its own config,
   rng and step; max_leaf comes from the file; with alpha = 0 in b every
   leaf is 1). The global counters stay, the same on every rank: b->added
   and b->trajs become the file's (every item and trajectory added to the
   saved buffer), and each item keeps its trajectory id.
   Ranks 0..world-1 together load every item exactly once. b needs the
   same item_size and PER_REAL and capacity >= the shard's items. Errors
   as per_buffer_load (PER_ERR_MISMATCH for those), plus PER_ERR_ARG
   (world == 0 or rank >= world). */
PERDEF per_status per_buffer_load_shard(per_buffer *b, const char *path,
                                        uint32_t rank, uint32_t world);
/* Append the items first .. first + count - 1 of the checkpoint at path,
   in the file's age order (0 is its oldest item), to b after the items b
   holds, oldest first, without evicting any: b->size + count must not
   exceed b's capacity. Each item keeps its leaf (1 with alpha = 0 in b)
   and its episode end, and its slot's generation counts one write (as an
   add's does); items that arrive next to each other from one trajectory
   of the file share one new trajectory id, numbered on from b->trajs.
   b->added grows by count, b->trajs by the ids used, b->max_leaf becomes
   the larger of its own and the file's; b keeps its config, rng and step.
   With per_buffer_init it merges saved buffers into one or splits one
   into several (per_mpi_load re-shards a sharded replay so). The file is
   read and checked completely, as per_buffer_load does, before b
   changes. Errors (b unchanged): those of per_buffer_load (PER_ERR_MISMATCH:
   another item_size or PER_REAL, or count items do not fit in b), plus
   PER_ERR_ARG (first + count above the file's items). count == 0 only
   checks the file. */
PERDEF per_status per_buffer_load_append(per_buffer *b, const char *path,
                                         uint32_t first, uint32_t count);

/* The pending steps of n-step adders a[0..n) (one per environment, up to
   n_i - 1 steps each) in one file, so that a run resumed from a buffer
   checkpoint loses no transition: save them with the buffer, load them
   into adders initialised with the same configs. Little-endian: magic
   "\x89PERNST\n", u32 version 1, u32 0x01020304, u32 n; per adder u32
   n, gamma (f32 bits), obs_size, action_size, pending count, then each
   pending step, oldest first: f32 reward, obs, action; then the CRC-32C
   of everything before it. Written and replaced as per_buffer_save does
   (same guarantees). Errors: PER_ERR_NULL (a, path, or an adder not
   initialised), PER_ERR_ARG (n == 0), PER_ERR_NOMEM, PER_ERR_IO. */
PERDEF per_status per_nstep_save(const per_nstep *a, uint32_t n,
                                 const char *path);
/* Replace the pending steps of a[0..n) with the file's. The file is read
   and checked completely (into memory bounded by the adders' own rings)
   before any adder changes. Errors (every adder unchanged): PER_ERR_NULL,
   PER_ERR_ARG (n == 0), PER_ERR_NOMEM, PER_ERR_IO, PER_ERR_FORMAT (magic,
   byte order, empty file), PER_ERR_VERSION, PER_ERR_MISMATCH (another
   number of adders, or an adder's n, gamma, obs_size or action_size
   differs), PER_ERR_TRUNCATED, PER_ERR_CHECKSUM, PER_ERR_CORRUPT (a
   pending count >= n, a reward not finite, bytes after the CRC). */
PERDEF per_status per_nstep_load(per_nstep *a, uint32_t n, const char *path);
#endif

#ifdef __cplusplus
}
#endif

/* ======================================================================
   Internals shared with the companion files                    >>internal
   ======================================================================
   Not the API. What per.h's implementation and its companions both use,
   written once where every file that includes per.h sees it: a companion
   may be compiled without per.h's implementation (per_mpi.h's may sit in
   a file of its own). A companion that compiles beside per.h's
   implementation may also use three of the implementation's sections:
   >>pow (x^y), >>rules (what the kernels run too) and >>seam
   (checkpoint stages and byte sinks); tools/seams.py checks that the companions use nothing
   else of per.h's internals. */

/* The allocator: the caller's PER_MALLOC and PER_FREE, or malloc and
   free. Set by a file's first include of per.h. */
#if defined(PER_MALLOC) && defined(PER_FREE)
/* the caller's allocator */
#define PERI_USER_ALLOC 1
#elif !defined(PER_MALLOC) && !defined(PER_FREE)
#include <stdlib.h>
#define PER_MALLOC(sz, ctx) ((void)(ctx), peri_malloc(sz))
#define PER_FREE(p, ctx) ((void)(ctx), peri_free(p))
#define peri_malloc PERI_NAME(peri_malloc)
#define peri_free PERI_NAME(peri_free)
/* The default allocator (the implementation's >>alloc): `bytes` from
   malloc, NULL when it has none; large blocks on huge pages unless
   PER_NO_HUGE_PAGES. peri_free(p) frees such a block; NULL is fine. */
#ifdef __cplusplus
extern "C" {
#endif
PERDEF void *peri_malloc(size_t bytes);
PERDEF void peri_free(void *p);
#ifdef __cplusplus
}
#endif
#else
#error "per.h: define both PER_MALLOC and PER_FREE, or neither"
#endif

/* Little-endian encoding, whatever the host (checkpoints, manifests):
   v into p[0..4) or p[0..8), and back; a double as the u64 of its bits. */
PER_INLINE void peri_put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}
PER_INLINE void peri_put64(unsigned char *p, uint64_t v) {
  peri_put32(p, (uint32_t)v);
  peri_put32(p + 4, (uint32_t)(v >> 32));
}
PER_INLINE void peri_putf64(unsigned char *p, double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  peri_put64(p, u);
}
PER_INLINE uint32_t peri_get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
PER_INLINE uint64_t peri_get64(const unsigned char *p) {
  return (uint64_t)peri_get32(p) | (uint64_t)peri_get32(p + 4) << 32;
}
PER_INLINE double peri_getf64(const unsigned char *p) {
  uint64_t u = peri_get64(p);
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* PER_ERR_NAN or PER_ERR_INF for a float that is not finite (a TD error,
   a reward), else PER_OK; read from the bits so -ffinite-math-only cannot
   drop it. */
PER_INLINE PER_HD per_status peri_float_status(float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  if (((u >> 23) & 0xffu) == 0xffu)
    return (u & 0x7fffffu) ? PER_ERR_NAN : PER_ERR_INF;
  return PER_OK;
}

#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic pop
#endif

#endif /* PER_H_INCLUDED */

/* ======================================================================
   IMPLEMENTATION
   ====================================================================== */
#if defined(PER_IMPLEMENTATION) && !defined(PER_IMPLEMENTATION_INCLUDED)
#define PER_IMPLEMENTATION_INCLUDED

#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuseless-cast"
#endif
#endif

/* Every header the implementation uses, here and only here (string.h,
   the fixed-width types and the default allocator's stdlib.h come with
   the declarations). */
#include <math.h>
#ifndef PER_NO_STDIO
#include <errno.h>
#include <stdio.h>
#include <time.h>
#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <unistd.h>
#define PERI_HAVE_FSYNC 1
#elif defined(_WIN32)
#include <io.h>
#endif
#endif

/* The default allocator's madvise (>>alloc): from <sys/mman.h> where the
   file's feature macros show it (glibc and musl: _DEFAULT_SOURCE or
   _GNU_SOURCE, which g++ and clang++ define), else, in C on x86-64 and
   AArch64, declared here with those kernels' MADV_HUGEPAGE (14): then
   <sys/mman.h> has not declared it, so the declaration cannot clash. */
#if !defined(PERI_USER_ALLOC) && !defined(PER_NO_HUGE_PAGES) && \
    defined(__linux__)
#include <sys/mman.h>
#if defined(MADV_HUGEPAGE)
#define PERI_MADV_HUGEPAGE MADV_HUGEPAGE
#elif !defined(__cplusplus) && (defined(__x86_64__) || defined(__aarch64__))
extern int madvise(void *addr, size_t len, int advice);
#define PERI_MADV_HUGEPAGE 14
#endif
#endif

#ifndef PER_ASSERT
#include <assert.h>
#define PER_ASSERT(x) assert(x)
#endif

/* The fast paths (docs/DESIGN.md §10). Each sits beside a plain path
   that gives the same bits, chosen by the named conditions below; the
   tests compare the two, and PER_REFERENCE (PERI_FAST 0) runs the plain
   paths only. The fast code is still compiled, so it cannot rot. */
#ifdef PER_REFERENCE
#define PERI_FAST 0
#else
#define PERI_FAST 1
#endif

#if (defined(__GNUC__) || defined(__clang__)) && !defined(PER_REFERENCE)
#define PERI_PREFETCH(p) __builtin_prefetch(p)
#else
#define PERI_PREFETCH(p) ((void)(p))
#endif

/* Descents run in lockstep groups of this many (sampling functions), and
   Philox blocks are made this many at a time. 64 keeps enough independent
   loads in flight for a tree that misses the caches; results do not
   depend on it. */
#ifndef PERI_LANES
#define PERI_LANES 64
#endif

/* Lockstep descents (peri_descend_lanes) for groups of at least this
   many draws; fewer go one at a time. A group costs PERI_LANES lanes
   however few are used, so below a quarter of them it loses. */
#define PERI_LOCKSTEP_MIN ((PERI_LANES + 3) / 4)

/* per_swap_sample makes PERI_LANES Philox blocks at once (vectorized) for
   batches of at least this many draws; smaller ones draw one at a time. */
#define PERI_SWAP_LANES_MIN PERI_LANES

/* Batch updates of a tree of at most this many bytes fix the levels
   near the leaves by walking up from each leaf, the running sum in a
   register (fewer loads: a win while the tree is in L2 or L3); the
   levels above the spans go level by level. 16 MiB (2^20 leaves in
   double) won at 10^6 leaves on both an AMD EPYC and an Intel Xeon.
   Above it the two disagreed (before the walks prefetched, the AMD
   wanted level passes and the Intel walks), so a larger tree times both
   ways on its first batches, PERI_FIX_TRIALS of each, alternating, after
   PERI_FIX_WARM untimed ones, and keeps the faster per leaf (where the
   build has a cycle counter: x86-64 with GCC or clang; elsewhere level
   by level). Both ways give the same bits. */
#define PERI_WALK_MAX_BYTES ((size_t)1 << 24)
#define PERI_FIX_WARM 2u
#define PERI_FIX_TRIALS 16u
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && \
    !defined(__CUDACC__)
#define PERI_TICKS() __builtin_ia32_rdtsc()
#endif

/* The walks of a batch update (above) in a tree larger than this (out of
   L2, in L3) prefetch the lines of the walk PERI_WALK_AHEAD leaves on,
   below the top PERI_WALK_PREFETCH_TOP nodes: 1.2-1.35x at 2^19 and 10^6
   leaves in double, nothing from 2^16 to 2^18 (0.93-1.04x, run to run),
   on an AMD EPYC with 1 MiB of L2 per core and 32 MiB of L3
   (bench/versions.sh, both link orders). */
#define PERI_WALK_PREFETCH_BYTES ((size_t)1 << 22)
#define PERI_WALK_AHEAD 8
#define PERI_WALK_PREFETCH_TOP 65536u

/* Lockstep descents prefetch the grandchildren of each lane's node from
   this level down (the levels above are in L1 after the first groups). */
#define PERI_PREFETCH_LEVEL 10

#ifdef __cplusplus
extern "C" {
#endif

#if !defined(PER_NO_STDIO) && defined(_WIN32)
/* kernel32's MoveFileExA as <windows.h> declares it, without including
   <windows.h> (its min/max macros and the rest) into the user's file. */
__declspec(dllimport) int __stdcall MoveFileExA(const char *from,
                                                const char *to,
                                                unsigned long flags);
#endif

/* >>alloc: the default allocator (PER_MALLOC and PER_FREE not defined).
   malloc's block, with its start kept in the pointer-sized word before
   the address handed out (PERI_ALLOC_HEAD bytes keep malloc's
   alignment). A block of at least PERI_HUGE_PAGE bytes (a large tree,
   item ring or generation array, read at random) starts on a
   PERI_HUGE_PAGE boundary, and its whole huge pages are advised
   MADV_HUGEPAGE: with 4 KiB pages each lower level of a descent costs a
   TLB miss too (bench/README: the step at 10^6 items). The size is
   rounded up to whole huge pages when that adds at most 1/8 (the last
   page's rest is resident but unused), else the tail keeps small pages.
   Without PERI_MADV_HUGEPAGE (other systems, PER_NO_HUGE_PAGES) every
   block is a plain one. */
#ifndef PERI_USER_ALLOC
#define PERI_ALLOC_HEAD 16
#define PERI_HUGE_PAGE ((size_t)2 << 20)

PERDEF void *peri_malloc(size_t bytes) {
  unsigned char *base, *p;
  size_t pad = PERI_ALLOC_HEAD, huge = 0;
#ifdef PERI_MADV_HUGEPAGE
  if (bytes >= PERI_HUGE_PAGE && bytes <= (size_t)-1 / 2) {
    size_t down = bytes - bytes % PERI_HUGE_PAGE;
    size_t up = down == bytes ? down : down + PERI_HUGE_PAGE;
    huge = up - bytes <= bytes / 8 ? up : down;
    if (huge > bytes) bytes = huge;
    pad = PERI_HUGE_PAGE;
  }
#endif
  if (bytes > (size_t)-1 - pad) return NULL;
  base = (unsigned char *)malloc(bytes + pad);
  if (!base) return NULL;
  if (huge == 0) {
    p = base + PERI_ALLOC_HEAD;
  } else {
    /* In (base, base + PERI_HUGE_PAGE]: past the word before it, since
       malloc aligns to at least 16 bytes, and p + bytes within the block. */
    p = base + (PERI_HUGE_PAGE - (size_t)((uintptr_t)base % PERI_HUGE_PAGE));
#ifdef PERI_MADV_HUGEPAGE
    /* Advice only: a kernel without huge pages refuses it, and the block
       is as good as any other. */
    (void)madvise(p, huge, PERI_MADV_HUGEPAGE);
#endif
  }
  memcpy(p - sizeof base, &base, sizeof base);
  return p;
}

PERDEF void peri_free(void *p) {
  void *base;
  if (!p) return;
  memcpy(&base, (unsigned char *)p - sizeof base, sizeof base);
  free(base);
}
#endif

/* >>pow: x^y, the one transcendental of the priority and IS-weight
   formulas, written once for the CPU and the device (per_cuda.cu's
   kernels inline it through >>rules): the scalar peri_pow and
   peri_pow_f (PER_HD), the same in AVX2 lanes for a batch's pows
   (peri_pow_many, the CPU's), and last the generated tables. */

/* x^y for the priority and IS-weight formulas, written once for the CPU
   and the device from IEEE basic operations only (+, -, *, / on doubles,
   conversions between doubles and integers, a double's bits): every
   product that is later added to or subtracted from is exact or goes
   through peri_dmul_rn, so the same x and y give the same bits under
   every compiler, libm, flag set (FMA contraction included) and GPU. No
   libm call. x^y = e^(y ln x):
   - ln x = e ln 2 + ln(1/c) + ln(1 + r): x = 2^e m with m in [0.709,
     1.418), c from a table of 128 (10 significant bits, 1 exactly for
     the row holding 1.0, so that ln x near 1 keeps its relative
     accuracy), r = m c - 1 exactly, as two doubles (m's top 43 bits
     times c and the rest times c are exact products), |r| < 2^-7.87, and
     ln(1 + r) by its Taylor series to r^9.
   - t = y ln x and e^t = 2^(k/128) e^z with k = round(t 128 / ln 2),
     |z| <= ln 2 / 256, 2^(j/128) from a second table, e^z - 1 by its
     Taylor series.
   peri_pow carries ln x, t and the table values as double-doubles
   (exact products: peri_two_prod): within 1 ulp of the correctly rounded
   x^y (0.511 measured), results below 2^-1022 included
   (tests/test_pow.c). peri_pow_f is the same in plain doubles, within
   2^-42 relative for |y ln x| <= 104 (2^-43.7 measured), for results
   that are rounded to float: the float is then within 1 ulp of the
   correctly rounded one. Both: x >= 0 or +inf (NaN for x < 0 or NaN), y
   finite and >= 0; x^0 = 1^y = 1; x^1 = x; 0^y = 0 for y > 0. peri_pow:
   overflow gives +inf, underflow 0; peri_pow_f: past |y ln x| = 760,
   and within its relative bound before. The tables and constants are
   tools/pow_tables.py's: the constants here, the tables' rows last. */

/* pow constants: written by tools/pow_tables.py (which says what
   they are), checked in CI; do not edit by hand. */
#define PERI_POW_OFF 0x3FE6B00000000000ULL
#define PERI_POW_LN2_HI 0.6931471805598903
#define PERI_POW_LN2_LO 5.497923018708371e-14
#define PERI_POW_EXP_C_HI 0.005415212347998022
#define PERI_POW_EXP_C_LO 1.2655086083325438e-13
#define PERI_POW_EXP_INV_C 184.6649652337873
#define PERI_POW_LN3 0.3333333333333333
#define PERI_POW_LN4 -0.25
#define PERI_POW_LN5 0.2
#define PERI_POW_LN6 -0.16666666666666666
#define PERI_POW_LN7 0.14285714285714285
#define PERI_POW_LN8 -0.125
#define PERI_POW_LN9 0.1111111111111111
#define PERI_POW_EXP1 1.0
#define PERI_POW_EXP2 0.5
#define PERI_POW_EXP3 0.16666666666666666
#define PERI_POW_EXP4 0.041666666666666664
#define PERI_POW_EXP5 0.008333333333333333
#define PERI_POW_EXP6 0.001388888888888889
/* end of the pow constants */

PER_INLINE PER_HD uint64_t peri_dbits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}
PER_INLINE PER_HD double peri_dfrom(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* a = *hi + *lo, each of at most 26 significant bits (Veltkamp's split;
   |a| < 2^995), so that products of the halves are exact. */
PER_INLINE PER_HD void peri_split(double a, double *hi, double *lo) {
  double t = peri_dmul_rn(134217729.0, a);
  *hi = t - (t - a);
  *lo = a - *hi;
}

/* a * b rounded, and its rounding error in *err exactly, as long as
   |a|, |b| < 2^995 and the error is a normal double (|a b| >= 2^-969):
   by a fused multiply-add where the CPU has one (-mfma, -march=native on
   x86-64, every aarch64), else by Dekker's products of 26-bit halves.
   The same bits either way, the error being exact; the device uses
   Dekker's, so that its kernels hold no fma (tests/cuda/check_ptx.py). */
PER_INLINE PER_HD double peri_two_prod(double a, double b, double *err) {
  double p = peri_dmul_rn(a, b);
#if !defined(__CUDA_ARCH__) && (defined(__GNUC__) || defined(__clang__)) && \
    (defined(__FMA__) || defined(__ARM_FEATURE_FMA))
  *err = __builtin_fma(a, b, -p);
#else
  double a1, a2, b1, b2;
  peri_split(a, &a1, &a2);
  peri_split(b, &b1, &b2);
  *err = ((PERI_DMUL_EXACT(a1, b1) - p) + PERI_DMUL_EXACT(a1, b2) +
          PERI_DMUL_EXACT(a2, b1)) +
         PERI_DMUL_EXACT(a2, b2);
#endif
  return p;
}

/* peri_two_prod(a, a, err), with one split. */
PER_INLINE PER_HD double peri_two_sqr(double a, double *err) {
  double p = peri_dmul_rn(a, a);
#if !defined(__CUDA_ARCH__) && (defined(__GNUC__) || defined(__clang__)) && \
    (defined(__FMA__) || defined(__ARM_FEATURE_FMA))
  *err = __builtin_fma(a, a, -p);
#else
  double a1, a2;
  peri_split(a, &a1, &a2);
  *err = ((PERI_DMUL_EXACT(a1, a1) - p) +
          PERI_DMUL_EXACT(2.0, PERI_DMUL_EXACT(a1, a2))) +
         PERI_DMUL_EXACT(a2, a2);
#endif
  return p;
}

/* a + b rounded, and its rounding error in *err exactly when a is 0 or
   |a| >= |b| (Dekker's Fast2Sum). */
PER_INLINE PER_HD double peri_fast_two_sum(double a, double b, double *err) {
  double s = a + b;
  *err = b - (s - a);
  return s;
}

/* a + b rounded, and its rounding error in *err exactly (Knuth). */
PER_INLINE PER_HD double peri_two_sum(double a, double b, double *err) {
  double s = a + b, v = s - a;
  *err = (a - (s - v)) + (b - v);
  return s;
}

/* Row j (< 128) of the ln table, {c, hi, lo} (hi + lo = -ln c), and of
   the exp table, {hi, lo} (2^(j/128)): the device's copy in device code.
   Defined with the tables, at the end of this section. */
PER_INLINE PER_HD const double *peri_pow_ln_row(uint32_t j);
PER_INLINE PER_HD const double *peri_pow_exp_row(uint32_t j);

/* x (> 0, finite) as 2^e m: the table row of m, e (as a double) in *e and
   r = m c - 1 (c the row's) rounded, with its rounding error in *r_lo
   (exactly: r = return + *r_lo). */
PER_INLINE PER_HD double peri_pow_reduce(double x, const double **row,
                                         double *e, double *r_lo) {
  uint64_t b = peri_dbits(x), u, mb;
  double m_hi, m_lo, c;
  int k;
  *e = 0;
  if (b < (uint64_t)1 << 52) { /* subnormal: times 2^54 */
    b = peri_dbits(x * 18014398509481984.0);
    *e = -54;
  }
  u = b - PERI_POW_OFF + ((uint64_t)1 << 63); /* no wrap: OFF < 2^62 */
  k = (int)(u >> 52) - 2048;
  *row = peri_pow_ln_row((uint32_t)((u >> 45) & 127u));
  mb = b - ((uint64_t)(int64_t)k << 52);
  /* (double)k, from the bits of 1.5 * 2^52 + k: no int-to-double
     conversion, which x86's cvtsi2sd chains to the previous loop trip */
  *e += peri_dfrom((uint64_t)0x4338000000000000 + (uint64_t)(int64_t)k) -
        6755399441055744.0;
  m_hi = peri_dfrom(mb & ~(uint64_t)1023);
  m_lo = peri_dfrom(mb) - m_hi;
  c = (*row)[0];
  return peri_two_sum(PERI_DMUL_EXACT(m_hi, c) - 1.0, PERI_DMUL_EXACT(m_lo, c),
                      r_lo); /* exact products */
}

/* 2^(kd/128) (1 + q) for the integer-valued kd (|kd| < 2^18): the
   table's 2^(j/128) (with its low part when dd), then the power of two,
   in two steps where the result leaves the normal range. */
PER_INLINE PER_HD double peri_pow_scale(double kd, double q, int dd) {
  int64_t k = (int64_t)kd;
  uint64_t j = (uint64_t)k & 127u;
  int sc = (int)((k - (int64_t)j) / 128);
  const double *row = peri_pow_exp_row((uint32_t)j);
  double r = dd ? row[0] + (row[1] + peri_dmul_rn(row[0], q))
                : row[0] + peri_dmul_rn(row[0], q);
  if (sc > 1023) {
    r *= 8.98846567431158e307; /* 2^1023 */
    sc = sc - 1023 > 1023 ? 1023 : sc - 1023;
  } else if (sc < -1022) {
    r *= 2.2250738585072014e-308; /* 2^-1022 */
    sc = sc + 1022 < -1022 ? -1022 : sc + 1022;
  }
  return r * peri_dfrom((uint64_t)(sc + 1023) << 52);
}

/* k = round(t 128 / ln 2) as a double (|t| <= 760), and z = t - k ln 2 /
   128 with the k ln 2 / 128 part exact. */
PER_INLINE PER_HD double peri_pow_k(double t, double *z) {
  const double shift = 6755399441055744.0; /* 1.5 * 2^52 */
  double kd = (peri_dmul_rn(t, PERI_POW_EXP_INV_C) + shift) - shift;
  *z = (t - PERI_DMUL_EXACT(kd, PERI_POW_EXP_C_HI)) -
       peri_dmul_rn(kd, PERI_POW_EXP_C_LO);
  return kd;
}

/* Special cases of x^y (the cases of the top comment): 1 with *v set when
   x, y is one, else 0. */
PER_INLINE PER_HD int peri_pow_special(double x, double y, double *v) {
  if (y == 0 || x == 1) *v = 1;
  else if (y == 1) *v = x;
  else if (x == 0) *v = 0;
  else if (!(x > 0)) *v = (x - x) / (x - x); /* NaN */
  else if (!(x <= 1.7976931348623157e308)) *v = x;
  else return 0;
  return 1;
}

/* e^t for t past +-760: +inf or 0 (*v), 1; else 0. */
PER_INLINE PER_HD int peri_pow_range(double t, double *v) {
  if (t > 760) *v = peri_dfrom((uint64_t)0x7ff << 52);
  else if (t < -760) *v = 0;
  else return 0;
  return 1;
}

PER_INLINE PER_HD double peri_pow(double x, double y) {
  const double *row;
  double v, e, rh, rl, qh, ql, p, s, sl, err, lh, ll, th, tl, kd, z;
  if (peri_pow_special(x, y, &v)) return v;
  /* ln x = lh + ll */
  rh = peri_pow_reduce(x, &row, &e, &rl);
  qh = peri_two_sqr(rh, &ql); /* rh^2 = qh + ql */
  p = (PERI_POW_LN7 + peri_dmul_rn(rh, PERI_POW_LN8)) +
      peri_dmul_rn(qh, PERI_POW_LN9);
  p = (PERI_POW_LN5 + peri_dmul_rn(rh, PERI_POW_LN6)) + peri_dmul_rn(qh, p);
  p = (PERI_POW_LN3 + peri_dmul_rn(rh, PERI_POW_LN4)) + peri_dmul_rn(qh, p);
  p = peri_dmul_rn(peri_dmul_rn(rh, qh), p); /* r^3 (1/3 - r/4 + ...) */
  /* each sum's first term is 0 or the larger (e ln 2 >= 0.69 > |ln c|;
     |ln c| > |r| + r^2 / 2 in every row with c != 1: tools/pow_tables.py
     checks), so Fast2Sum is exact */
  s = peri_fast_two_sum(PERI_DMUL_EXACT(e, PERI_POW_LN2_HI), row[1],
                        &sl); /* exact product */
  s = peri_fast_two_sum(s, rh, &err);
  sl += err;
  s = peri_fast_two_sum(s, PERI_DMUL_EXACT(-0.5, qh), &err);
  sl += err;
  sl += (((peri_dmul_rn(e, PERI_POW_LN2_LO) + row[2]) + rl) -
         (PERI_DMUL_EXACT(0.5, ql) + peri_dmul_rn(rh, rl))) +
        p;
  lh = s + sl;
  ll = sl - (lh - s);
  /* t = y ln x = th + tl */
  th = peri_dmul_rn(y, lh);
  if (peri_pow_range(th, &v)) return v;
  /* |y| < 2^63 here (|lh| >= 2^-53); below 2^-60, e^t rounds to 1 */
  if (th < 8.6736173798840355e-19 && th > -8.6736173798840355e-19) return 1;
  th = peri_two_prod(y, lh, &tl);
  tl += peri_dmul_rn(y, ll);
  /* e^t */
  kd = peri_pow_k(th, &z);
  z += tl;
  p = PERI_POW_EXP5 + peri_dmul_rn(z, PERI_POW_EXP6);
  p = (PERI_POW_EXP3 + peri_dmul_rn(z, PERI_POW_EXP4)) +
      peri_dmul_rn(peri_dmul_rn(z, z), p);
  p = (PERI_POW_EXP1 + peri_dmul_rn(z, PERI_POW_EXP2)) +
      peri_dmul_rn(peri_dmul_rn(z, z), p);
  return peri_pow_scale(kd, peri_dmul_rn(z, p), 1);
}

PER_INLINE PER_HD double peri_pow_f(double x, double y) {
  const double *row;
  double v, e, r, rl, r2, p, t, kd, z;
  if (peri_pow_special(x, y, &v)) return v;
  r = peri_pow_reduce(x, &row, &e, &rl);
  r2 = peri_dmul_rn(r, r);
  p = (PERI_POW_LN5 + peri_dmul_rn(r, PERI_POW_LN6));
  p = (PERI_POW_LN3 + peri_dmul_rn(r, PERI_POW_LN4)) + peri_dmul_rn(r2, p);
  p = (r - PERI_DMUL_EXACT(0.5, r2)) + peri_dmul_rn(peri_dmul_rn(r, r2), p);
  t = peri_dmul_rn(y, ((PERI_DMUL_EXACT(e, PERI_POW_LN2_HI) + row[1]) +
                       (p + (peri_dmul_rn(e, PERI_POW_LN2_LO) + row[2]))));
  if (peri_pow_range(t, &v)) return v;
  kd = peri_pow_k(t, &z);
  p = (PERI_POW_EXP3 + peri_dmul_rn(z, PERI_POW_EXP4));
  p = (PERI_POW_EXP1 + peri_dmul_rn(z, PERI_POW_EXP2)) +
      peri_dmul_rn(peri_dmul_rn(z, z), p);
  return peri_pow_scale(kd, peri_dmul_rn(z, p), 0);
}

/* ---- the same over a batch ----

   peri_pow and peri_pow_f of many x and one y, for the batches of an
   update or a sample (the exponent is the call's alpha or beta): the same
   operations as the scalar functions, in the same order, on the four
   lanes of an AVX2 register (GCC's vector extension; the table rows by
   gathers), so that every result is the scalar function's bits. Products
   go through the same barrier as peri_dmul_rn's, so no contraction can
   change them; the error of an exact product is Dekker's, which is what
   the scalar's FMA gives (both exact). A lane that leaves the main path
   (a special case, a subnormal x, e^t that rounds to 1, a result past the
   normal range) is done over by the scalar function. */
#if !defined(__CUDACC__) && !defined(_WIN32) &&                         \
    (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && \
    !defined(PER_NO_VECTOR_POW)
/* AVX2 lanes, compiled for AVX2 whatever the build's flags and taken
   where the CPU has it (not on Windows, where GCC cannot align the
   stack for them); a fast path (PERI_FAST). */
#define PERI_VPOW 1
#include <immintrin.h>
#define PERI_VW 4
#define PERI_AVX2 static inline __attribute__((target("avx2")))
typedef double peri_vd __attribute__((vector_size(8 * PERI_VW)));
typedef uint64_t peri_vu __attribute__((vector_size(8 * PERI_VW)));
typedef int64_t peri_vi __attribute__((vector_size(8 * PERI_VW)));

/* a * b, rounded once whatever the contraction flags (peri_dmul_rn) */
PERI_AVX2 peri_vd peri_vmul(peri_vd a, peri_vd b) {
  peri_vd p = a * b;
  __asm__("" : "+x"(p));
  return p;
}

PERI_AVX2 peri_vd peri_vsplat(double d) {
  peri_vd v;
  int g;
  for (g = 0; g < PERI_VW; ++g) v[g] = d;
  return v;
}

/* Lane g of the result: table[idx[g] * stride + col]. */
PERI_AVX2 peri_vd peri_vgather(const double *table, peri_vu idx,
                               unsigned stride, unsigned col) {
  return (peri_vd)_mm256_i64gather_pd(table + col, (__m256i)(idx * stride), 8);
}

/* Bit g set when lane g of m is not 0. */
PERI_AVX2 unsigned peri_vmask(peri_vi m) {
  return (unsigned)_mm256_movemask_pd((__m256d)m);
}

/* peri_split in lanes */
PERI_AVX2 peri_vd peri_vsplit(peri_vd a, peri_vd *lo) {
  peri_vd t = peri_vmul(peri_vsplat(134217729.0), a), hi = t - (t - a);
  *lo = a - hi;
  return hi;
}

/* peri_pow_f(x, y) (f) or peri_pow(x, y) (y not 0 or 1) in lanes. Lanes
   off the main path (x not normal, positive and finite, or 1; e^t
   rounding to 1; a scale past the normal range, which every |t| past
   760 has) are set in *redo, their values meaningless. */
PERI_AVX2 peri_vd peri_vpow(peri_vd x, double y, int f, unsigned *redo) {
  const uint64_t one = 1, sbits = 0x4338000000000000u;
  const double shift = 6755399441055744.0; /* 1.5 * 2^52 */
  peri_vu b = (peri_vu)x, u, k;
  peri_vi bad;
  peri_vd rh, rl, e, c0, c1, c2, mh, ml, p, th, tl, z, kd, yv = peri_vsplat(y);
  /* the main path's x: 2^-1022 <= x < inf, x != 1 (others become 2) */
  bad = (b - (one << 52) >= 0x7ff0000000000000u - (one << 52)) |
        (b == 0x3ff0000000000000u);
  b = (b & ~(peri_vu)bad) | ((peri_vu)bad & 0x4000000000000000u);
  /* the reduction (peri_pow_reduce): k, the row, m = x 2^-k */
  u = b - PERI_POW_OFF + (one << 63);
  k = (u >> 52) - 2048u;
  u = (u >> 45) & 127u;
  c0 = peri_vgather(peri_pow_ln_row(0), u, 3, 0);
  c1 = peri_vgather(peri_pow_ln_row(0), u, 3, 1);
  c2 = peri_vgather(peri_pow_ln_row(0), u, 3, 2);
  b -= k << 52;
  e = (peri_vd)(sbits + k) - shift;
  mh = (peri_vd)((b >> 10) << 10);
  ml = (peri_vd)b - mh;
  /* r = m c - 1 = rh + rl (peri_two_sum of the exact products) */
  th = mh * c0 - 1.0;
  tl = ml * c0;
  rh = th + tl;
  p = rh - th;
  rl = (th - (rh - p)) + (tl - p);
  if (f) {
    peri_vd r2 = peri_vmul(rh, rh);
    p = PERI_POW_LN5 + peri_vmul(rh, peri_vsplat(PERI_POW_LN6));
    p = (PERI_POW_LN3 + peri_vmul(rh, peri_vsplat(PERI_POW_LN4))) +
        peri_vmul(r2, p);
    p = (rh - 0.5 * r2) + peri_vmul(peri_vmul(rh, r2), p);
    th = peri_vmul(yv,
                   ((e * PERI_POW_LN2_HI + c1) +
                    (p + (peri_vmul(e, peri_vsplat(PERI_POW_LN2_LO)) + c2))));
  } else {
    peri_vd qh, ql, s, sl, err, lh, ll, yh, yl, a1, a2;
    a1 = peri_vsplit(rh, &a2);
    qh = peri_vmul(rh, rh);
    ql = ((a1 * a1 - qh) + 2.0 * (a1 * a2)) + a2 * a2; /* exact products */
    p = (PERI_POW_LN7 + peri_vmul(rh, peri_vsplat(PERI_POW_LN8))) +
        peri_vmul(qh, peri_vsplat(PERI_POW_LN9));
    p = (PERI_POW_LN5 + peri_vmul(rh, peri_vsplat(PERI_POW_LN6))) +
        peri_vmul(qh, p);
    p = (PERI_POW_LN3 + peri_vmul(rh, peri_vsplat(PERI_POW_LN4))) +
        peri_vmul(qh, p);
    p = peri_vmul(peri_vmul(rh, qh), p);
    s = e * PERI_POW_LN2_HI + c1; /* peri_pow's three Fast2Sums */
    sl = c1 - (s - e * PERI_POW_LN2_HI);
    lh = s + rh;
    err = rh - (lh - s);
    s = lh;
    sl += err;
    lh = s + -0.5 * qh;
    err = -0.5 * qh - (lh - s);
    s = lh;
    sl += err;
    sl += (((peri_vmul(e, peri_vsplat(PERI_POW_LN2_LO)) + c2) + rl) -
           (0.5 * ql + peri_vmul(rh, rl))) +
          p;
    lh = s + sl;
    ll = sl - (lh - s);
    th = peri_vmul(yv, lh);
    bad |= (th < 8.6736173798840355e-19) & (th > -8.6736173798840355e-19);
    /* th + tl = y lh exactly (peri_two_prod: Dekker's error is exact, as
       the FMA's) */
    yh = peri_vsplit(yv, &yl);
    a1 = peri_vsplit(lh, &a2);
    th = peri_vmul(lh, yv);
    tl = ((a1 * yh - th) + a1 * yl + a2 * yh) + a2 * yl;
    tl += peri_vmul(yv, ll);
  }
  /* e^t (peri_pow_k, then peri_pow_scale) */
  kd = (peri_vmul(th, peri_vsplat(PERI_POW_EXP_INV_C)) + shift) - shift;
  z = (th - kd * PERI_POW_EXP_C_HI) -
      peri_vmul(kd, peri_vsplat(PERI_POW_EXP_C_LO));
  if (f) {
    p = PERI_POW_EXP3 + peri_vmul(z, peri_vsplat(PERI_POW_EXP4));
  } else {
    z += tl;
    p = PERI_POW_EXP5 + peri_vmul(z, peri_vsplat(PERI_POW_EXP6));
    p = (PERI_POW_EXP3 + peri_vmul(z, peri_vsplat(PERI_POW_EXP4))) +
        peri_vmul(peri_vmul(z, z), p);
  }
  p = (PERI_POW_EXP1 + peri_vmul(z, peri_vsplat(PERI_POW_EXP2))) +
      peri_vmul(peri_vmul(z, z), p);
  p = peri_vmul(z, p); /* q */
  /* |t| > 709 (peri_pow_range's 760 included): a scale past the normal
     range */
  bad |= (kd > 1023.0 * 128) | (kd < -1022.0 * 128);
  k = (peri_vu)(kd + shift) - sbits; /* kd as an integer */
  u = k & 127u;
  c0 = peri_vgather(peri_pow_exp_row(0), u, 2, 0);
  if (f) {
    z = c0 + peri_vmul(c0, p);
  } else {
    c1 = peri_vgather(peri_pow_exp_row(0), u, 2, 1);
    z = c0 + (c1 + peri_vmul(c0, p));
  }
  *redo = peri_vmask(bad);
  return z * (peri_vd)(((k - u) << 45) + ((uint64_t)1023 << 52));
}
#else
#define PERI_VPOW 0
#endif

#if PERI_VPOW
/* peri_pow_many's lanes: v[j] for j < n - n % PERI_VW. */
__attribute__((target("avx2"))) static void peri_pow_lanes(double *v, size_t n,
                                                           double y, int f) {
  size_t j;
  for (j = 0; j < n - n % PERI_VW; j += PERI_VW) {
    peri_vd x;
    unsigned redo;
    int g;
    memcpy(&x, v + j, sizeof x);
    x = peri_vpow(x, y, f, &redo);
    for (g = 0; redo; ++g, redo >>= 1)
      if (redo & 1u)
        x[g] =
            f ? peri_pow_f(v[j + (size_t)g], y) : peri_pow(v[j + (size_t)g], y);
    memcpy(v + j, &x, sizeof x);
  }
}
#endif

/* 1 when the pows go through the lanes: the build has them, the CPU has
   AVX2 and the fast paths are on. */
static int peri_vpow_on(void) {
#if !PERI_VPOW
  return 0;
#elif defined(__AVX2__)
  return PERI_FAST;
#else
  __builtin_cpu_init(); /* idempotent; needed before constructors have run */
  return PERI_FAST && __builtin_cpu_supports("avx2");
#endif
}

/* v[j] = peri_pow_f(v[j], y) when f, else peri_pow(v[j], y), j < n: the
   same bits, PERI_VW lanes at a time where peri_vpow_on. */
static void peri_pow_many(double *v, size_t n, double y, int f) {
  size_t j = 0;
#if PERI_VPOW
  if (peri_vpow_on() && y != 0 && y != 1) {
    peri_pow_lanes(v, n, y, f);
    j = n - n % PERI_VW;
  }
#endif
  for (; j < n; ++j) v[j] = f ? peri_pow_f(v[j], y) : peri_pow(v[j], y);
}

/* ---- the tables ---- */

/* pow tables: written by tools/pow_tables.py (which says what they
   are), checked in CI; do not edit by hand. */
#define PERI_POW_LN_ROWS                                             \
  {1.40625, -0.3409265869705932, -1.7467136443544747e-17},           \
      {1.3984375, -0.3353555419211378, -1.834564437059473e-17},      \
      {1.390625, -0.329753286372468, -2.122020616196946e-18},        \
      {1.3828125, -0.324119468654212, 7.958214381893813e-18},        \
      {1.376953125, -0.31987317777276086, -4.226777461860662e-18},   \
      {1.369140625, -0.3141832619950823, -1.9945107763958697e-17},   \
      {1.361328125, -0.3084607857210161, -4.0879808229846266e-18},   \
      {1.35546875, -0.3041473354672967, 2.963837507561865e-18},      \
      {1.34765625, -0.2983669725517973, 1.1440869858035824e-18},     \
      {1.33984375, -0.29255300268637746, 2.1327310101814576e-17},    \
      {1.333984375, -0.28817023453128227, -1.3116746400885017e-17},  \
      {1.326171875, -0.28229650251918836, 2.1210941373299616e-17},   \
      {1.3203125, -0.2778684510034563, 9.16018294909263e-19},        \
      {1.3125, -0.27193371548364176, -7.83319637697442e-19},         \
      {1.306640625, -0.26745943508872067, -2.016149769976068e-19},   \
      {1.298828125, -0.26146241561634637, 1.1449266754676084e-17},   \
      {1.29296875, -0.2569409308975004, -6.30788074376329e-18},      \
      {1.287109375, -0.2523989094629994, -1.3243886304043958e-17},   \
      {1.279296875, -0.24631061059574413, -1.4011576532971364e-19},  \
      {1.2734375, -0.24171993688714516, -8.900990022166643e-18},     \
      {1.267578125, -0.23710809166458222, 5.717872604233848e-18},    \
      {1.26171875, -0.23247487874309405, -1.049773658067578e-17},    \
      {1.255859375, -0.2278200991981116, 6.075458515600861e-18},     \
      {1.248046875, -0.22157982933802703, 9.597232225307235e-18},    \
      {1.2421875, -0.21687393830061436, -4.551026193234283e-18},     \
      {1.236328125, -0.2121457971046684, 7.511578341069786e-18},     \
      {1.23046875, -0.2073951943460706, 6.623981508424082e-18},      \
      {1.224609375, -0.20262191559341292, 4.9792806181107735e-18},   \
      {1.21875, -0.19782574332991987, -1.2821194372980142e-17},      \
      {1.212890625, -0.19300645689397097, -6.750015036761848e-18},   \
      {1.20703125, -0.188163832418183, 4.497983271338944e-18},       \
      {1.201171875, -0.18329764276701008, -7.916064890804867e-18},   \
      {1.1953125, -0.1784076574728183, 1.2432553788701131e-17},      \
      {1.19140625, -0.17513433212784915, 3.59146702814679e-18},      \
      {1.185546875, -0.17020416601999047, -5.824871705125833e-18},   \
      {1.1796875, -0.16524957289530717, 1.0094935622322628e-17},     \
      {1.173828125, -0.1602703094956998, -8.056249348852825e-18},    \
      {1.169921875, -0.15693697307594157, 1.925318924654277e-18},    \
      {1.1640625, -0.15191604202584197, -6.4838631244022194e-18},    \
      {1.158203125, -0.14686977395821768, 1.3095486658506112e-17},   \
      {1.15234375, -0.14179791186025734, -1.3587228662372945e-17},   \
      {1.1484375, -0.13840232285911913, -4.447777301357527e-18},     \
      {1.142578125, -0.1332872221923487, -5.4138932268586174e-18},   \
      {1.138671875, -0.1298625613109846, -6.7913679708942475e-18},   \
      {1.1328125, -0.12470347850095724, 4.6522609636496624e-18},     \
      {1.126953125, -0.11951764146859177, -6.317546480577967e-18},   \
      {1.123046875, -0.11604541575784265, -6.523568250648718e-18},   \
      {1.1171875, -0.11081436634029011, -1.183748342825649e-18},     \
      {1.11328125, -0.10731173578908805, -4.480328406815626e-19},    \
      {1.107421875, -0.10203467868824428, -1.270120514141349e-18},   \
      {1.103515625, -0.09850110610693316, 3.2823579183838276e-18},   \
      {1.099609375, -0.0949550031001826, -2.757005002303505e-18},    \
      {1.09375, -0.08961215868968714, 5.4268129336647135e-18},       \
      {1.08984375, -0.08603433734180316, 4.235394883227454e-18},     \
      {1.083984375, -0.08064348870692672, -8.3511763690095115e-19},  \
      {1.080078125, -0.07703337648282702, 5.849476510698109e-19},    \
      {1.076171875, -0.0734101841134067, 1.583444187336235e-18},     \
      {1.0703125, -0.06795066190850775, 1.2802141240611733e-18},     \
      {1.06640625, -0.06429435070539725, -2.607864228825769e-18},    \
      {1.0625, -0.06062462181643484, -2.6424025938726934e-18},       \
      {1.05859375, -0.056941376400138424, -4.849020418096643e-19},   \
      {1.052734375, -0.05139094586948937, 2.507748248897374e-19},    \
      {1.048828125, -0.047673469469356904, 7.870678899236812e-19},   \
      {1.044921875, -0.04394212185649876, -1.6937468575336251e-18},  \
      {1.041015625, -0.04019679912633675, -3.2701228202402602e-18},  \
      {1.037109375, -0.03643739620243105, -6.646489732166908e-19},   \
      {1.033203125, -0.032663806818791594, -3.2137479899873427e-18}, \
      {1.02734375, -0.026976587698202076, 5.651841481310676e-20},    \
      {1.0234375, -0.02316705928153438, 1.1769544932063305e-18},     \
      {1.01953125, -0.019342962843130935, 2.2760589303784623e-19},   \
      {1.015625, -0.015504186535965254, 3.278321022892429e-19},      \
      {1.01171875, -0.011650617219975274, 2.3618788515509035e-19},   \
      {1.0078125, -0.007782140442054949, 1.2819179123343845e-20},    \
      {1.00390625, -0.003898640415657323, -1.2541659038304973e-19},  \
      {1.0, 0.0, 0.0},                                               \
      {0.9921875, 0.007843177461025893, 2.764708154124904e-19},      \
      {0.984375, 0.015748356968139168, 1.0021578630528974e-18},      \
      {0.9775390625, 0.02271702628423251, -1.3787590545321193e-18},  \
      {0.9697265625, 0.030741141554280503, -1.0529562910593368e-18}, \
      {0.962890625, 0.03781545099681768, -1.4251832364060063e-19},   \
      {0.955078125, 0.045962135564635756, 3.29282833444454e-18},     \
      {0.9482421875, 0.053145337308128184, -6.050335379809878e-19},  \
      {0.94140625, 0.06038051098890748, -2.1569637373409678e-18},    \
      {0.9345703125, 0.06766841414649884, -5.482182836575732e-18},   \
      {0.927734375, 0.07500982100486657, 5.762099730680593e-18},     \
      {0.9208984375, 0.0824055229659956, 1.603887941218665e-18},     \
      {0.9140625, 0.08985632912186105, -6.273760163689594e-19},      \
      {0.908203125, 0.09628721945215148, -3.4322603532248472e-18},   \
      {0.9013671875, 0.10384257109660093, 6.5755190594195396e-18},   \
      {0.8955078125, 0.11036433334298824, 9.819437814998601e-19},    \
      {0.888671875, 0.11802720608855737, 3.6022683425363865e-18},    \
      {0.8828125, 0.1246424452072766, -5.808912678940971e-18},       \
      {0.876953125, 0.1313017372972535, -9.789371668371751e-18},     \
      {0.87109375, 0.13800567301944372, -3.082753002960249e-18},     \
      {0.865234375, 0.14475485499437216, -9.638054543649367e-18},    \
      {0.859375, 0.15154989812720093, 5.1669593684615594e-18},       \
      {0.853515625, 0.15839142994391764, -4.805867816472488e-18},    \
      {0.84765625, 0.16528009093910292, -6.262313551919987e-19},     \
      {0.841796875, 0.17221653493576, -4.7047460454344384e-18},      \
      {0.8369140625, 0.1780338870016733, 2.6063282992290672e-18},    \
      {0.8310546875, 0.18505967702607895, 8.68483519512258e-18},     \
      {0.826171875, 0.1909524459932298, 1.2753558105240179e-17},     \
      {0.8203125, 0.1980699137620938, 3.742843482461439e-18},        \
      {0.8154296875, 0.2040400807485976, -8.132171559725503e-19},    \
      {0.810546875, 0.21004610480880948, 1.1583669345998444e-17},    \
      {0.8046875, 0.2173012756899814, 1.6168452453763015e-18},       \
      {0.7998046875, 0.22338772174638366, 9.585954127785412e-18},    \
      {0.794921875, 0.2295114395969128, -1.2166730011885714e-17},    \
      {0.7900390625, 0.2356728885409614, -6.859372869545864e-18},    \
      {0.78515625, 0.24187253642048673, -3.5869293176775316e-18},    \
      {0.7802734375, 0.24811085983317843, -4.963800871206339e-18},   \
      {0.775390625, 0.2543883443523174, -1.428296341374898e-17},     \
      {0.771484375, 0.2594388601383859, 8.775568434888777e-18},      \
      {0.7666015625, 0.26578808781704466, 1.792335018286604e-18},    \
      {0.76171875, 0.27217788591581565, 1.9460544362807653e-17},     \
      {0.7578125, 0.27731928541623435, -7.44528405583513e-18},       \
      {0.7529296875, 0.2837834320361236, -1.8093860415863246e-18},   \
      {0.7490234375, 0.2889850042321969, -1.0625256043011615e-17},   \
      {0.744140625, 0.2955252499128068, 3.2722484018602266e-19},     \
      {0.740234375, 0.30078841995708144, -6.252253064633693e-18},    \
      {0.7353515625, 0.30740657779955954, -2.7314696101195324e-17},  \
      {0.7314453125, 0.31273282208223363, -1.4449475118518507e-17},  \
      {0.7275390625, 0.31808758721989355, 2.5797875611385575e-17},   \
      {0.7236328125, 0.3234711803033662, 1.6391727586494226e-17},    \
      {0.71875, 0.33024168687057687, -1.0828321637483858e-17},       \
      {0.71484375, 0.33569129163814154, -7.183773020381283e-18},     \
      {0.7109375, 0.34117075740276714, -1.9366790062602867e-17}, {   \
    0.70703125, 0.3466804132137367, 1.2904632283500345e-17           \
  }
#define PERI_POW_EXP_ROWS                                  \
  {1.0, 0.0}, {1.0054299011128027, 9.499186535455032e-17}, \
      {1.0108892860517005, -1.5234778603368577e-17},       \
      {1.016378314910953, -5.77217007319966e-17},          \
      {1.0218971486541166, 5.109225028973444e-17},         \
      {1.0274459491187637, -4.9560741746453704e-17},       \
      {1.0330248790212284, 7.600838874027088e-18},         \
      {1.0386341019613787, 5.996273788852511e-17},         \
      {1.0442737824274138, 8.551889705537965e-17},         \
      {1.0499440858006872, 5.592937848127003e-17},         \
      {1.0556451783605572, 1.759325738772092e-18},         \
      {1.061377227289262, -1.1973537085365658e-17},        \
      {1.0671404006768237, -7.899853966841582e-17},        \
      {1.0729348675259756, -3.839668843358824e-18},        \
      {1.0787607977571199, -6.656660436056593e-17},        \
      {1.0846183622133092, 3.166152845816346e-17},         \
      {1.0905077326652577, -3.046782079812471e-17},        \
      {1.0964290818163769, -5.919933484449316e-17},        \
      {1.102382583307841, 5.2660368715706944e-17},         \
      {1.1083684117236787, -8.786813845180527e-17},        \
      {1.1143867425958924, 1.0410278456845571e-16},        \
      {1.1204377524096067, -6.201085906554179e-17},        \
      {1.1265216186082418, 5.165856758795457e-17},         \
      {1.1326385195987192, 3.237356166738e-17},            \
      {1.1387886347566916, 8.912812676025408e-17},         \
      {1.1449721444318042, 4.6412898921700107e-17},        \
      {1.1511892299529827, 3.250710218863827e-17},         \
      {1.1574400736337511, -9.1238712311344e-17},          \
      {1.1637248587775775, 3.8292048369240935e-17},        \
      {1.1700437696832502, -1.8477442017900047e-18},       \
      {1.1763969916502812, 5.554203254218079e-17},         \
      {1.182784710984341, 1.542975430079076e-17},          \
      {1.189207115002721, 3.982015231465646e-17},          \
      {1.1956643920398273, 4.6166036704814814e-17},        \
      {1.202156731452703, 6.644981499252301e-17},          \
      {1.2086843236265816, -4.746725945228984e-17},        \
      {1.215247359980469, -7.712630692681488e-17},         \
      {1.2218460329727576, -1.0611021211402691e-16},       \
      {1.22848053610687, -1.89878163130253e-17},           \
      {1.2351510639369334, -1.0755244344307841e-16},       \
      {1.241857812073484, 4.658027591836937e-17},          \
      {1.2486009771892048, -8.261810999021964e-17},        \
      {1.255380757024691, -6.7113898212968784e-18},        \
      {1.2621973503942507, -3.0844648874738465e-17},       \
      {1.2690509571917332, 2.667932131342186e-18},         \
      {1.275941778396392, 9.91543024421429e-17},           \
      {1.2828700160787783, 1.713594918243561e-17},         \
      {1.2898358734066657, 8.949257530897592e-17},         \
      {1.2968395546510096, 2.5382502794888315e-17},        \
      {1.3038812651919358, 8.647675598267871e-17},         \
      {1.3109612115247644, -7.181536135519454e-17},        \
      {1.318079601266064, -5.4579558271491535e-17},        \
      {1.3252366431597413, -2.8587312100388614e-17},       \
      {1.3324325470831615, -5.101586630916744e-17},        \
      {1.339667524053303, 8.927282594831732e-17},          \
      {1.3469417862329458, 3.224065101254679e-17},         \
      {1.3542555469368927, 7.70094837980299e-17},          \
      {1.3616090206382248, 1.533787661270668e-18},         \
      {1.3690024229745905, 9.593797919118849e-17},         \
      {1.3764359707545302, -6.898588935871801e-17},        \
      {1.383909881963832, -6.770511658794786e-17},         \
      {1.3914243757719262, -4.9061748652889893e-17},       \
      {1.3989796725383112, -9.614213209051323e-17},        \
      {1.4065759938190154, 7.034914812136422e-18},         \
      {1.4142135623730951, -9.667293313452913e-17},        \
      {1.4218926021691656, -1.6077828915890244e-17},       \
      {1.42961333839197, -1.2031642489053655e-17},         \
      {1.4373759974489824, -4.2040340164675566e-17},       \
      {1.4451808069770467, -3.0237581349939873e-17},       \
      {1.4530279958490526, -5.779948609396106e-17},        \
      {1.460917794180647, -5.600377186075216e-17},         \
      {1.4688504333369818, 8.465882756533628e-17},         \
      {1.4768261459394993, -3.483994556892796e-17},        \
      {1.4848451658727524, 1.0780086764407481e-16},        \
      {1.4929077282912648, 1.4192920154284036e-17},        \
      {1.5010140696264256, -6.413767275790235e-17},        \
      {1.5091644275934228, -1.016455327754295e-16},        \
      {1.5173590411982147, -4.308699472043341e-17},        \
      {1.5255981507445384, -1.1024941712342561e-16},       \
      {1.533881997840956, 8.875226844438446e-17},          \
      {1.5422108254079407, 7.949834809697621e-17},         \
      {1.550584877685, -1.4600706590689385e-17},           \
      {1.559004400237837, 3.7812070533575275e-17},         \
      {1.567469639965553, -1.0352061768849722e-16},        \
      {1.5759808451078865, -1.0136916471278304e-17},       \
      {1.5845382652524937, -1.9337717034585703e-17},       \
      {1.593142151342267, -1.0094406542311964e-16},        \
      {1.6017927556826934, -6.054917453527784e-17},        \
      {1.6104903319492543, 2.4707192569797888e-17},        \
      {1.6192351351948637, 2.0941334154229092e-17},        \
      {1.6280274218573478, -6.712955084707084e-17},        \
      {1.6368674497669644, 7.698325071319876e-17},         \
      {1.645755478153965, -1.0125679913674773e-16},        \
      {1.6546917676561943, 9.643294303196029e-17},         \
      {1.6636765803267364, 5.8909926967131e-17},           \
      {1.6727101796415966, -5.476715964599563e-17},        \
      {1.681792830507429, 8.199010020581497e-17},          \
      {1.6909247992693053, -9.66967147439488e-17},         \
      {1.7001063537185235, -8.0237193703977e-18},          \
      {1.709337763100463, -9.868779456632931e-17},         \
      {1.718619298122478, -1.851380418263111e-17},         \
      {1.7279512309618377, -1.0750981861204642e-16},       \
      {1.7373338352737062, 3.164389299292957e-17},         \
      {1.746767386199169, -1.0752290483507515e-16},        \
      {1.7562521603732995, 2.960140695448873e-17},         \
      {1.7657884359332727, 9.461315018083268e-17},         \
      {1.7753764925265212, 6.429731796556572e-17},         \
      {1.785016611318935, 1.5330400121031314e-17},         \
      {1.7947090750031072, 1.8227458427912087e-17},        \
      {1.804454167806624, -5.177222408793318e-17},         \
      {1.8142521755003989, -9.969531538920349e-17},        \
      {1.8241033854070534, -1.0159627862277083e-16},       \
      {1.8340080864093424, 3.283107224245627e-17},         \
      {1.843966568958626, -5.939742026949965e-17},         \
      {1.8539791250833855, 9.761887490727594e-17},         \
      {1.864046048397789, 6.540912680620572e-17},          \
      {1.8741676341103, -6.122763413004143e-17},           \
      {1.8843441790323345, -8.226593125533711e-17},        \
      {1.8945759815869656, 3.4034035352165297e-17},        \
      {1.9048633418176741, 6.533857514718279e-17},         \
      {1.9152065613971474, -1.0619946056195963e-16},       \
      {1.925605943636125, -9.914963769693741e-17},         \
      {1.9360617934922943, 1.0332385960676326e-16},        \
      {1.9465744175792332, 6.811022349533877e-17},         \
      {1.9571441241754002, 8.960767791036668e-17},         \
      {1.9677712232331759, -1.0314928011531132e-16},       \
      {1.978456026387951, 4.0388753109278167e-17}, {       \
    1.9891988469672663, 8.2051326383692e-18                \
  }
/* end of the pow tables */
static const double peri_pow_ln[128][3] = {PERI_POW_LN_ROWS};
static const double peri_pow_exp[128][2] = {PERI_POW_EXP_ROWS};
#ifdef __CUDACC__
static __device__ const double peri_pow_ln_dev[128][3] = {PERI_POW_LN_ROWS};
static __device__ const double peri_pow_exp_dev[128][2] = {PERI_POW_EXP_ROWS};
#endif

PER_INLINE PER_HD const double *peri_pow_ln_row(uint32_t j) {
#ifdef __CUDA_ARCH__
  return peri_pow_ln_dev[j];
#else
  return peri_pow_ln[j];
#endif
}

PER_INLINE PER_HD const double *peri_pow_exp_row(uint32_t j) {
#ifdef __CUDA_ARCH__
  return peri_pow_exp_dev[j];
#else
  return peri_pow_exp[j];
#endif
}

/* >>rules: what the implementation shares with the companions that
   compile it (per_cuda.cu, with PER_STATIC), written once: the formulas
   (over >>pow's x^y), the argument checks and messages, the stream and
   the beta schedule, the min tree and the windows that the kernels run
   too, PER_HD where they do. A companion uses these, the >>pow and
   >>seam sections' and what the declarations define (>>internal among
   it), nothing else of the implementation (tools/seams.py checks). Each
   is per.h's own as well. */

/* ---- formulas ---- */

/* L, the smallest power of two >= capacity, and log2(L) in *depth (when
   not NULL): the tree's shape for a capacity. */
PER_INLINE PER_HD uint32_t peri_leaves_for(uint32_t capacity, uint32_t *depth) {
  uint32_t L = 1, d = 0;
  while (L < capacity) {
    L <<= 1;
    ++d;
  }
  if (depth) *depth = d;
  return L;
}

/* Why a tree whose root is `total` cannot be sampled, or PER_OK. */
PER_INLINE PER_HD per_status peri_samplable(per_real total) {
  per_status s = per_leaf_status(total);
  if (s == PER_ERR_NAN || s == PER_ERR_INF) return PER_ERR_DEGENERATE;
  if (!(total > 0)) return PER_ERR_EMPTY;
  return PER_OK;
}

/* The leaf of a finite TD error: (|td| + eps)^alpha in double (peri_pow,
   or peri_pow_f for float leaves), exactly 1 when alpha == 0 and no pow
   when alpha == 1, capped at PER_LEAF_MAX, rounded to per_real: within
   1 ulp of the correctly rounded leaf. */
PER_INLINE PER_HD per_real peri_priority(float td, double eps, double alpha) {
  double p = fabs((double)td) + eps;
  if (alpha != 1)
    p = alpha == 0                          ? 1.0
        : sizeof(per_real) == sizeof(float) ? peri_pow_f(p, alpha)
                                            : peri_pow(p, alpha);
  if (!(p <= (double)PER_LEAF_MAX)) p = (double)PER_LEAF_MAX;
  return (per_real)p;
}

/* The importance-sampling weight of a draw with leaf p when the smallest
   leaf of the batch (or the buffer) is pmin: (N P)^-beta / max (N P)^-beta
   = (pmin / p)^beta in double (peri_pow_f), as a float within 1 ulp of
   the correctly rounded one; exactly 1 when beta == 0 and for p <= pmin. */
PER_INLINE PER_HD float peri_weight(per_real p, per_real pmin, double beta) {
  if (beta == 0 || !(p > pmin)) return 1.0f;
  return (float)peri_pow_f((double)pmin / (double)p, beta);
}

/* ---- checks ---- */

/* Finite (from the bits: robust under -ffinite-math-only). */
/* Messages for b->error and a->error, built by hand so that PER_NO_STDIO
   builds have them too: strings and unsigned decimals, cut at the
   buffer's end. */
typedef struct peri_msg {
  char *buf;
  size_t len, cap; /* cap includes the NUL */
} peri_msg;

/* A message into buf (cap bytes, the NUL included), emptied. */
static peri_msg peri_msg_into(char *buf, size_t cap) {
  peri_msg m;
  m.buf = buf;
  m.len = 0;
  m.cap = cap;
  buf[0] = 0;
  return m;
}

static void peri_msg_s(peri_msg *m, const char *s) {
  while (*s && m->len + 1 < m->cap) m->buf[m->len++] = *s++;
  m->buf[m->len] = 0;
}

static void peri_msg_u(peri_msg *m, uint64_t v) {
  char d[21];
  int k = 20;
  d[k] = 0;
  do {
    d[--k] = (char)('0' + (int)(v % 10u));
    v /= 10u;
  } while (v);
  peri_msg_s(m, d + k);
}

static PER_HD int peri_dfinite(double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return ((u >> 52) & 0x7ffu) != 0x7ffu;
}

/* m (may be NULL) += "NAME is NaN", "is infinite" or "is negative" and
   PER_ERR_ARG when v is one of them (and, with below_one, "is above 1"
   when v > 1), else PER_OK. */
static per_status peri_check_real(peri_msg *m, const char *name, double v,
                                  int below_one) {
  const char *what = !peri_dfinite(v) ? (v == v ? " is infinite" : " is NaN")
                     : !(v >= 0)      ? " is negative"
                     : below_one && v > 1 ? " is above 1"
                                          : NULL;
  if (!what) return PER_OK;
  if (m) {
    peri_msg_s(m, name);
    peri_msg_s(m, what);
  }
  return PER_ERR_ARG;
}

/* m (may be NULL) += "NAME N" */
static void peri_msg_nu(peri_msg *m, const char *name, uint64_t v) {
  if (!m) return;
  peri_msg_s(m, name);
  peri_msg_s(m, " ");
  peri_msg_u(m, v);
}

/* m (may be NULL) += "NAME[j]" */
static void peri_msg_at(peri_msg *m, const char *name, uint64_t j) {
  if (!m) return;
  peri_msg_s(m, name);
  peri_msg_s(m, "[");
  peri_msg_u(m, j);
  peri_msg_s(m, "]");
}

/* PER_OK when per_buffer_init accepts the config, else why not
   (PER_ERR_CAPACITY or PER_ERR_ARG), said in m (may be NULL) with the
   field's name and value. */
static per_status peri_config_check(const per_config *c, peri_msg *m) {
  uint64_t bytes;
  per_status s = PER_OK;
  if (c->capacity == 0 || c->capacity > PER_MAX_CAPACITY) {
    peri_msg_nu(m, "capacity", c->capacity);
    if (m) peri_msg_s(m, " is not in 1 .. 2^31");
    return PER_ERR_CAPACITY;
  }
  if (c->item_size == 0) {
    if (m) peri_msg_s(m, "item_size is 0 (must be >= 1)");
    return PER_ERR_ARG;
  }
  bytes = (uint64_t)c->capacity * c->item_size;
  if ((uint64_t)(size_t)bytes != bytes) {
    peri_msg_nu(m, "capacity", c->capacity);
    peri_msg_nu(m, " * item_size", c->item_size);
    if (m) peri_msg_s(m, " bytes do not fit in size_t");
    return PER_ERR_CAPACITY;
  }
  if (s == PER_OK) s = peri_check_real(m, "alpha", c->alpha, 0);
  if (s == PER_OK) s = peri_check_real(m, "beta0", c->beta0, 0);
  if (s == PER_OK) s = peri_check_real(m, "beta1", c->beta1, 0);
  if (s == PER_OK) s = peri_check_real(m, "eps", c->eps, 0);
  if (s == PER_OK) s = peri_check_real(m, "max_priority", c->max_priority, 0);
  if (s == PER_OK) s = peri_check_real(m, "seq_eta", c->seq_eta, 1);
  if (s != PER_OK) return s;
  if (!(c->max_priority > 0) || c->max_priority > (double)PER_LEAF_MAX) {
    if (m)
      peri_msg_s(m, c->max_priority > 0 ? "max_priority is above PER_LEAF_MAX"
                                        : "max_priority is 0 (must be > 0)");
    return PER_ERR_ARG;
  }
  if (c->flags & ~(uint32_t)(PER_WEIGHTS_BUFFER_MAX | PER_SEQ_CROSS_EPISODES |
                             PER_MAX_LIVE)) {
    peri_msg_nu(m, "flags", c->flags);
    if (m)
      peri_msg_s(m, " has bits that are no PER_WEIGHTS_BUFFER_MAX, "
                    "PER_SEQ_CROSS_EPISODES or PER_MAX_LIVE");
    return PER_ERR_ARG;
  }
  if (c->max_unique == 0 || c->max_unique > c->capacity ||
      c->max_unique > (1u << 30)) {
    peri_msg_nu(m, "max_unique", c->max_unique);
    if (!m) return PER_ERR_ARG;
    if (c->max_unique == 0) {
      peri_msg_s(m, " (must be >= 1)");
    } else if (c->max_unique > c->capacity) {
      peri_msg_nu(m, " > capacity", c->capacity);
      peri_msg_s(m, " (per_config_default sets it from the capacity it is "
                    "given: set it again after changing capacity)");
    } else {
      peri_msg_s(m, " > 2^30");
    }
    return PER_ERR_ARG;
  }
  if (c->seq_len == 0) {
    if (c->seq_stride != 0) {
      peri_msg_nu(m, "seq_stride", c->seq_stride);
      if (m) peri_msg_s(m, " without seq_len");
      return PER_ERR_ARG;
    }
    if (c->flags & PER_SEQ_CROSS_EPISODES) {
      if (m) peri_msg_s(m, "PER_SEQ_CROSS_EPISODES without seq_len");
      return PER_ERR_ARG;
    }
    return PER_OK;
  }
  if (c->seq_len > c->capacity) {
    peri_msg_nu(m, "seq_len", c->seq_len);
    peri_msg_nu(m, " > capacity", c->capacity);
    return PER_ERR_ARG;
  }
  if (c->seq_stride == 0) {
    peri_msg_nu(m, "seq_len", c->seq_len);
    if (m)
      peri_msg_s(m, " needs seq_stride >= 1 (a sequence starts at every "
                    "multiple of it)");
    return PER_ERR_ARG;
  }
  if (c->capacity % c->seq_stride != 0) {
    peri_msg_nu(m, "seq_stride", c->seq_stride);
    peri_msg_nu(m, " does not divide capacity", c->capacity);
    return PER_ERR_ARG;
  }
  return PER_OK;
}

/* An id's check: PER_ERR_INDEX for one sample never handed out (slot
   outside the ring or not a multiple of stride, generation 0, or newer
   than the slot's while no slot can have wrapped), given the slot's
   generation gen_slot = gen[slot] (anything when slot >= cap) and the
   adds so far. */
static PER_HD per_status peri_id_status_of(uint64_t id, uint32_t cap,
                                           uint32_t stride, uint32_t gen_slot,
                                           uint64_t added) {
  uint32_t slot = (uint32_t)id, g = (uint32_t)(id >> 32);
  /* a generation above the slot's was never handed out, unless some slot
     may have wrapped around (2^32 - 1 writes need that many adds) */
  int wrapped = added >= 0xffffffffull;
  if (slot >= cap || slot % stride != 0 || g == 0 || (g > gen_slot && !wrapped))
    return PER_ERR_INDEX;
  return PER_OK;
}

/* ---- the stream, the beta schedule, generations ---- */

/* per_rng_u32: the stream's next word (a device buffer's degenerate
   draws walk the buffer's stream as per_buffer_sample does). */
PER_INLINE PER_HD uint32_t peri_rng_u32(per_rng *r) {
  if (r->avail == 0) {
    per_rng_block(r->seed, r->counter, r->buf);
    r->counter += 1;
    r->avail = 4;
  }
  return r->buf[4 - r->avail--];
}

/* per_rng_below: uniform in [0, n), Lemire's multiply-shift with
   rejection; 0 for n == 0. */
PER_INLINE PER_HD uint32_t peri_rng_below(per_rng *r, uint32_t n) {
  uint64_t m;
  uint32_t lo;
  if (n == 0) return 0;
  m = (uint64_t)peri_rng_u32(r) * n;
  lo = (uint32_t)m;
  if (lo < n) {
    uint32_t threshold = (uint32_t)(0u - n) % n; /* 2^32 mod n */
    while (lo < threshold) {
      m = (uint64_t)peri_rng_u32(r) * n;
      lo = (uint32_t)m;
    }
  }
  return (uint32_t)(m >> 32);
}

/* per_rng_real: the stream's next real in [0, 1) (one word for float,
   two for double). */
PER_INLINE PER_HD per_real peri_rng_real(per_rng *r) {
  uint32_t hi, lo;
  if (sizeof(per_real) == sizeof(float))
    return (per_real)per_u01f(peri_rng_u32(r));
  hi = peri_rng_u32(r);
  lo = peri_rng_u32(r);
  return (per_real)per_u01d(hi, lo);
}

/* The scheduled beta after `step` sample calls. */
static PER_HD double peri_beta_at(const per_config *c, uint64_t step) {
  if (step >= c->beta_steps) return c->beta1;
  return c->beta0 + peri_dmul_rn(c->beta1 - c->beta0,
                                 (double)step / (double)c->beta_steps);
}

/* Generations cycle through 1 .. 2^32 - 1: g after k more writes. */
static PER_HD uint32_t peri_gen_add(uint32_t g, uint64_t k) {
  return (uint32_t)(((uint64_t)g + k - 1) % 0xffffffffull + 1);
}

/* Writes an add of n items makes to the slot `age` slots after the write
   position (0 for age >= n when n < capacity). */
static PER_HD uint64_t peri_add_writes(uint32_t age, uint32_t n, uint32_t cap) {
  return (uint64_t)(n / cap) + (age < n % cap);
}

/* ---- the min tree (PER_WEIGHTS_BUFFER_MAX) ---- */

/* Value of a min-tree node with no positive leaf below it. */
#define PERI_NO_MIN (PER_LEAF_MAX * 2)

/* The smaller of a and b: a min-tree node from its children. */
static PER_HD per_real peri_min_of(per_real a, per_real b) {
  return a < b ? a : b;
}

/* ---- windows: the slots and subtrees a window samples from ---- */

/* The whole subtrees that exactly cover the eligible leaf ranges, in leaf
   order (oldest range first); a stratum's u is located among their masses
   and then descends inside one of them. */
typedef struct peri_cover {
  uint32_t n;
  uint32_t k[128]; /* 2 ranges, at most 2 * 31 nodes each */
} peri_cover;

/* Append to the cover the subtrees that exactly cover leaves [a, e) of a
   tree of L leaves, in leaf order. */
static PER_HD void peri_cover_range(peri_cover *c, uint32_t L, uint32_t a,
                                    uint32_t e) {
  uint64_t l = (uint64_t)a + L, r = (uint64_t)e + L;
  uint32_t right[64], nr = 0;
  while (l < r) {
    if (l & 1u) c->k[c->n++] = (uint32_t)l++;
    if (r & 1u) right[nr++] = (uint32_t)--r;
    l >>= 1;
    r >>= 1;
  }
  while (nr) c->k[c->n++] = right[--nr];
}

/* The cover's mass: its subtrees' roots summed in order. */
static PER_HD per_real peri_cover_total(const peri_cover *c,
                                        const per_real *node) {
  per_real s = 0;
  uint32_t j;
  for (j = 0; j < c->n; ++j) s += node[c->k[j]];
  return s;
}

/* Leaf of prefix mass u within the cover; requires some mass in it. Past
   the end (rounding) gives the last leaf with mass, like the tree. */
static PER_HD uint32_t peri_cover_find(const peri_cover *c,
                                       const per_real *node, uint32_t L,
                                       per_real u) {
  uint32_t j, last = 0, k;
  for (j = 0; j < c->n; ++j) {
    per_real m = node[c->k[j]];
    if (!(m > 0)) continue;
    last = j;
    if (u < m) break;
    u -= m;
  }
  if (j == c->n) {
    j = last;
    u = node[c->k[j]];
  }
  k = c->k[j];
  while (k < L) k = per_tree_step(node, k, &u);
  return k - L;
}

/* The slots of the W most recently written items of a ring at pos: the
   first in *start, and as one or two ranges [lo, hi) (the count). */
static PER_HD uint32_t peri_window(uint32_t cap, uint32_t pos, uint32_t W,
                                   uint32_t *start, uint32_t lo[2],
                                   uint32_t hi[2]) {
  *start = (uint32_t)(((uint64_t)pos + cap - W) % cap);
  lo[0] = *start;
  hi[0] = *start + W;
  if ((uint64_t)*start + W <= cap) return 1;
  hi[0] = cap;
  lo[1] = 0;
  hi[1] = (uint32_t)((uint64_t)*start + W - cap);
  return 2;
}

/* Bits of the hash table of distinct draws (per_cat's, and a device
   buffer's) for batches up to max_k (1 .. 2^30): load factor <= 1/2. */
static PER_HD uint32_t peri_cat_hbits(uint32_t max_k) {
  uint32_t hbits = 1;
  while ((1u << hbits) < 2u * max_k) ++hbits;
  return hbits;
}

/* Items stored by the w most recent trajectories (w >= 1, size >= 1),
   counted from the newest item's: the newest k items, found by binary
   search over age, since the distance d of an item's trajectory from
   the newest one never decreases with age. O(log size). */
static PER_HD uint32_t peri_traj_window_of(const uint32_t *traj, uint32_t cap,
                                           uint32_t pos, uint32_t size,
                                           uint32_t w) {
  uint32_t lo = 1, hi = size;
  uint32_t ref = traj[((uint64_t)pos + cap - 1) % cap];
  while (lo < hi) { /* ages < lo are in, ages >= hi out */
    uint32_t mid = lo + (hi - lo) / 2;
    uint32_t slot = (uint32_t)(((uint64_t)pos + cap - 1 - mid) % cap);
    if (ref - traj[slot] < w) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The sequence of n steps starting at slot s of a ring of cap slots
   (the item tree's leaves at leaf[k], generations gen, episode ends ends,
   the next write at pos): the number of its steps up to and including
   the first episode end (n when none ends it early), and in *value its
   priority over them, eta * max + (1 - eta) * mean (<= max); 0 when it
   is not valid (not all stored, in order, since s was written; or,
   without `cross` (PER_SEQ_CROSS_EPISODES), an end before its last
   step). O(n). A device buffer refreshes its sequences with it. */
static PER_HD uint32_t peri_seq_steps_of(const per_real *leaf,
                                         const uint32_t *gen,
                                         const uint8_t *ends, uint32_t cap,
                                         uint32_t pos, uint32_t n, int cross,
                                         double eta, uint32_t s,
                                         double *value) {
  uint32_t t;
  double mx = 0, sum = 0, mean, v;
  if (gen[s] == 0 || (uint64_t)(((uint64_t)pos + cap - 1 - s) % cap) + 1 < n)
    return 0; /* empty, or fewer than n steps written since s */
  for (t = 0; t < n; ++t) {
    uint32_t k = (uint32_t)(((uint64_t)s + t) % cap);
    double x = (double)leaf[k];
    if (x > mx) mx = x;
    sum += x;
    if (ends[k] && t + 1 < n) {
      if (!cross) return 0;
      n = t + 1;
    }
  }
  mean = sum / (double)n;
  /* through peri_dmul_rn: no fused multiply-add */
  v = mean + peri_dmul_rn(eta, mx - mean);
  *value = v > mx ? mx : v;
  return n;
}

/* ---- the sampling plan: what a buffer's sample draws from ----

   Written once for per_buffer_sample and the device's draw kernel: the
   eligible leaves (the window's slot ranges, counted in trajectories,
   mapped to sequence starts for sequences), their mass, the uniform
   fallback, the strata's width, the buffer-max weights' minimum, and
   the distinct draws' uniform picks. The callers check the arguments
   first (per.h's peri_plan_sample with messages, per_cuda.cu's
   launchers) and keep what is theirs: the CPU its draw modes, the device
   the stream it hands to the second launch. */

/* How a plan's leaves are drawn (the CPU's modes). */
enum {
  PERI_DRAW_STRATA,  /* B strata of the eligible mass (with replacement) */
  PERI_DRAW_UNIFORM, /* degenerate mass: uniform, with replacement */
  PERI_DRAW_PICKED   /* distinct units, all drawn up front into scratch */
};

/* What a plan reads of a buffer, as plain pointers and sizes: a
   per_buffer's, or a device buffer's memory and state. The plan reads
   the trees, the trajectory ids and the validity flags directly (on the
   device: in the draw launch, which writes none of them before its plan
   is made). */
typedef struct peri_plan_src {
  const per_real *node;         /* the items' tree, L leaves */
  const per_real *min_node;     /* its min tree; NULL without buffer-max
                                   weights (PER_WEIGHTS_BUFFER_MAX) */
  const per_real *seq_node;     /* the sequences' tree, seq_L leaves, and */
  const per_real *seq_min_node; /* its min tree (or NULL), as above */
  const uint8_t *seq_ok;        /* a validity flag per sequence */
  const uint32_t *traj;         /* a trajectory id per slot */
  uint32_t cap, L, pos, size;   /* size > 0 */
  uint32_t seq_L, seq_n, seq_len, seq_stride; /* seq_n sequences */
} peri_plan_src;

/* A sample's plan. */
typedef struct peri_plan {
  const per_real *node, *min_node; /* the tree drawn from (the items' or
                                      the sequences') and its min tree */
  uint32_t L, B;
  uint32_t seq;    /* 1: sequences (PER_SAMPLE_SEQUENCES) */
  uint32_t unit;   /* steps per drawn unit: 1, or seq_len */
  uint32_t stride; /* leaf j is the unit starting at slot j * stride */
  uint32_t nr, lo[2], hi[2]; /* eligible leaves: nr ranges [lo, hi) */
  uint32_t W, start;         /* the window: W items from slot start */
  uint32_t nvalid;           /* what a uniform draw picks from: items, W;
                                sequences, the valid eligible ones (when
                                degenerate, by peri_plan_count_valid) */
  uint32_t unique, whole, degenerate, bufmax, mode;
  double beta;
  per_real total, seg; /* the eligible mass; a stratum's width */
  per_real pmin;       /* bufmax: the buffer's smallest leaf */
  peri_cover cov;      /* !whole: the subtrees of the ranges */
  per_rng next;        /* the device's: the stream after the call */
} peri_plan;

/* The plan of a B-draw sample (B > 0) of a non-empty buffer, with
   `flags` (PER_SAMPLE_SEQUENCES, _TRAJECTORIES, _UNIQUE) and `window`
   (0: every item) and IS exponent beta, all checked: *p but mode and
   next, and nvalid 0 for sequences (peri_plan_count_valid counts them
   when the mass is degenerate: O(sequences)). */
static PER_HD void peri_plan_of(const peri_plan_src *v, uint32_t flags,
                                uint32_t window, uint32_t B, double beta,
                                peri_plan *p) {
  uint32_t q;
  memset(p, 0, sizeof *p);
  p->B = B;
  p->beta = beta;
  p->unique = (flags & PER_SAMPLE_UNIQUE) != 0;
  p->W = window;
  if (p->W && (flags & PER_SAMPLE_TRAJECTORIES))
    p->W = peri_traj_window_of(v->traj, v->cap, v->pos, v->size, p->W);
  if (p->W == 0 || p->W > v->size) p->W = v->size;
  p->whole = p->W == v->size;
  p->nr = peri_window(v->cap, v->pos, p->W, &p->start, p->lo, p->hi);
  if (flags & PER_SAMPLE_SEQUENCES) {
    uint32_t st = v->seq_stride;
    p->seq = 1;
    p->node = v->seq_node;
    p->min_node = v->seq_min_node;
    p->L = v->seq_L;
    p->unit = v->seq_len;
    p->stride = st;
    if (p->whole) { /* every sequence: the invalid ones have leaf 0 */
      p->nr = 1;
      p->lo[0] = 0;
      p->hi[0] = v->seq_n;
    } else { /* the sequences starting in the window's slots */
      for (q = 0; q < p->nr; ++q) {
        p->lo[q] = (uint32_t)(((uint64_t)p->lo[q] + st - 1) / st);
        p->hi[q] = (uint32_t)(((uint64_t)p->hi[q] + st - 1) / st);
      }
    }
  } else {
    p->node = v->node;
    p->min_node = v->min_node;
    p->L = v->L;
    p->unit = 1;
    p->stride = 1;
    p->nvalid = p->W;
  }
  if (p->whole) {
    p->total = p->node[1];
  } else {
    for (q = 0; q < p->nr; ++q)
      peri_cover_range(&p->cov, p->L, p->lo[q], p->hi[q]);
    p->total = peri_cover_total(&p->cov, p->node);
  }
  p->degenerate = !peri_dfinite((double)p->total) || !(p->total > 0);
  if (!p->degenerate) p->seg = p->total / (per_real)B;
  p->bufmax = p->min_node && p->min_node[1] <= PER_LEAF_MAX;
  p->pmin = p->bufmax ? p->min_node[1] : PERI_NO_MIN;
}

/* The valid sequences among a plan's eligible ones (ok: their flags). */
static PER_HD uint32_t peri_plan_count_valid(const peri_plan *p,
                                             const uint8_t *ok) {
  uint32_t q, j, n = 0;
  for (q = 0; q < p->nr; ++q)
    for (j = p->lo[q]; j < p->hi[q]; ++j) n += ok[j] != 0;
  return n;
}

/* The leaf of uniform position r < p->nvalid: items by window position
   (cap: the capacity), sequences by rank among the valid eligible ones
   (ok: their flags; O(sequences): degenerate mass only). */
static PER_HD uint32_t peri_plan_uniform_leaf(const peri_plan *p,
                                              const uint8_t *ok, uint32_t cap,
                                              uint32_t r) {
  uint32_t q, j;
  if (!p->seq) return (uint32_t)(((uint64_t)p->start + r) % cap);
  for (q = 0; q < p->nr; ++q)
    for (j = p->lo[q]; j < p->hi[q]; ++j)
      if (ok[j] && r-- == 0) return j;
  return 0; /* r >= nvalid: not reached */
}

/* Empty the first slots of the set for a batch of k (load factor <= 1/2
   for k) and return their bits: clearing is O(k), not O(max_k). */
static PER_HD uint32_t peri_set_reset(uint32_t *table, uint32_t k) {
  uint32_t hb = peri_cat_hbits(k);
  memset(table, 0, ((size_t)1 << hb) * sizeof(uint32_t));
  return hb;
}

/* The slot of a set of 2^hbits slots where key's probing starts. */
static PER_HD uint32_t peri_set_home(uint32_t key, uint32_t hbits) {
  return (uint32_t)(key * 2654435761u) >> (32u - hbits);
}

/* Insert key into the open-addressing set of 2^hbits words in table (0:
   an empty slot, key + 1 a member); 1 when it was new, 0 when already
   present. The per_cat table and the buffer's unique draws use it. */
static PER_HD int peri_set_insert(uint32_t *table, uint32_t hbits,
                                  uint32_t key) {
  uint32_t mask = (1u << hbits) - 1u;
  uint32_t h = peri_set_home(key, hbits);
  for (;;) {
    uint32_t cur = table[h];
    if (cur == 0) {
      table[h] = key + 1u;
      return 1;
    }
    if (cur == key + 1u) return 0;
    h = (h + 1u) & mask;
  }
}

/* Distinct draws, degenerate mass: p->B distinct uniform positions of
   the p->nvalid (B <= nvalid) by Floyd's algorithm, from the stream r,
   into out[0..B) in pick order (peri_plan_uniform_leaf maps each to its
   leaf); set: 2^peri_cat_hbits(B) words of scratch. */
static PER_HD void peri_plan_floyd(const peri_plan *p, per_rng *r,
                                   uint32_t *set, uint32_t *out) {
  uint32_t j, i = 0, N = p->nvalid, B = p->B;
  uint32_t hb = peri_set_reset(set, B);
  for (j = N - B; j < N; ++j, ++i) {
    uint32_t t = peri_rng_below(r, j + 1u);
    if (!peri_set_insert(set, hb, t)) {
      peri_set_insert(set, hb, j);
      t = j;
    }
    out[i] = t;
  }
}

/* per_tree_set of a plain leaf value v (no checks): the leaf of a tree
   of L leaves, then its ancestors recomputed. */
static PER_HD void peri_put_leaf(per_real *node, uint32_t L, uint32_t leaf,
                                 per_real v) {
  uint32_t k;
  node[L + leaf] = v;
  for (k = (L + leaf) >> 1; k >= 1; k >>= 1) per_tree_recompute(node, k);
}

/* Distinct draws in a window: p->B picks from the stream r, each in
   proportion to the cover's mass in node (the plan's tree, p->L leaves),
   its leaf into idx[j] and value into val[j], then zeroed; then every
   pick put back, so the tree is bitwise as before (each node the sum of
   its children). PER_ERR_TOO_FEW when the mass runs out first (the
   picks made put back too). */
static PER_HD per_status peri_plan_window_picks(const peri_plan *p, per_rng *r,
                                                per_real *node, uint32_t *idx,
                                                per_real *val) {
  uint32_t j, k, L = p->L;
  per_status s = PER_OK;
  for (j = 0; j < p->B; ++j) {
    per_real tot = peri_cover_total(&p->cov, node);
    uint32_t leaf;
    if (!(tot > 0)) {
      s = PER_ERR_TOO_FEW;
      break;
    }
    leaf =
        peri_cover_find(&p->cov, node, L, peri_mul_rn(peri_rng_real(r), tot));
    idx[j] = leaf;
    val[j] = node[L + leaf];
    peri_put_leaf(node, L, leaf, (per_real)0);
  }
  for (k = 0; k < j; ++k) peri_put_leaf(node, L, idx[k], val[k]);
  return s;
}

/* >>seam: the implementation's share for the companions that compile
   beside it in one file (per_frames.h): declared here, defined in their
   own sections (>>ckpt, >>nstep), so that a companion's file format and
   its checkpoints reuse the buffer's instead of copying them. A
   companion calls these and nothing else of >>ckpt (tools/seams.py
   checks). They are per.h's own as well: changing one changes the
   buffer's checkpoints too. */

/* CRC-32C: t filled by peri_crc_table; peri_crc_run is the raw update
   (start from 0xffffffff, invert at the end, as the checkpoints do). */
static void peri_crc_table(uint32_t t[256]);
static uint32_t peri_crc_run(const uint32_t t[256], uint32_t c, const void *p,
                             size_t n);
/* Where checkpoint bytes go: into memory or through a put function. */
typedef struct peri_sink peri_sink;
/* b's whole checkpoint but for the CRC, in file order, into o. */
static void peri_ckpt_emit(const per_buffer *b, peri_sink *o);
/* Its parts, for a companion that writes some slots' bytes only: the
   header (the file's first bytes, before the layout text), the arrays'
   encodings (v[0..n) at p, returning the end) and the file's length. */
static void peri_ckpt_header(const per_buffer *b, unsigned char *h);
static unsigned char *peri_put32s(unsigned char *p, const uint32_t *v,
                                  uint32_t n);
static unsigned char *peri_put_reals(unsigned char *p, const per_real *v,
                                     uint32_t n);
static uint64_t peri_ckpt_bytes(uint32_t version, uint32_t size,
                                uint32_t item_size, uint32_t has_perm,
                                uint32_t layout_len);
/* per_nstep_step's work once its arguments are checked; mark_end stores
   the last step of an episode with its PER_END_* (per_frames.h). */
static void peri_nstep_push(per_nstep *a, per_buffer *b, const void *obs,
                            const void *action, float reward,
                            const void *next_obs, int terminated, int truncated,
                            int mark_end);
#ifndef PER_NO_STDIO
/* An atomic save: open a temporary file beside path, write through
   peri_wbytes (or peri_sink_file as a sink's put), finish with the CRC,
   fsyncs and the rename (per_buffer_save's guarantees). */
typedef struct peri_writer peri_writer;
static per_status peri_writer_open(peri_writer *w, const char *path, void *ctx);
static void peri_wbytes(peri_writer *w, const void *p, size_t n);
static void peri_sink_file(void *w, const void *p, size_t n);
static per_status peri_writer_finish(peri_writer *w, const char *path);
/* A load's stages: a source (a file from its position, or memory), the
   checkpoint read and checked against b (peri_ckpt_take), staged with
   every check that can fail (peri_load_stage), then applied, which
   cannot fail (peri_load_apply). peri_msg_pair: m += "the checkpoint's
   NAME A, the buffer's B". */
typedef struct peri_src peri_src;
typedef struct peri_ckpt peri_ckpt;
typedef struct peri_sel peri_sel;
static peri_src peri_src_of(FILE *f, const void *mem, size_t len);
static per_status peri_ckpt_take(peri_src *src, const per_buffer *b,
                                 uint32_t world, peri_ckpt *k, peri_msg *m);
static per_status peri_load_stage(const per_buffer *b, peri_ckpt *k,
                                  peri_sel sel, per_tree *t, uint32_t *n,
                                  uint32_t *zero, peri_msg *msg);
static void peri_load_apply(per_buffer *b, const peri_ckpt *k, peri_sel sel,
                            per_tree *t, uint32_t n, uint32_t zero);
static void peri_msg_pair(peri_msg *m, const char *name, uint64_t a,
                          uint64_t b);
#endif

/* >>status */
PERDEF const char *per_status_str(per_status s) {
  switch (s) {
#define PERI_STATUS_MSG(name, msg) \
  case name: return msg;
    PER_STATUS_LIST(PERI_STATUS_MSG)
#undef PERI_STATUS_MSG
    default: break;
  }
  return "unknown status";
}

/* >>rng */
PERDEF void per_rng_init(per_rng *r, uint64_t seed) {
  r->seed = seed;
  r->counter = 0;
  r->buf[0] = r->buf[1] = r->buf[2] = r->buf[3] = 0;
  r->avail = 0;
  r->pad = 0;
}

PERDEF uint32_t per_rng_u32(per_rng *r) { return peri_rng_u32(r); }

PERDEF uint32_t per_rng_below(per_rng *r, uint32_t n) {
  return peri_rng_below(r, n);
}

PERDEF double per_rng_double(per_rng *r) {
  uint32_t hi = per_rng_u32(r);
  uint32_t lo = per_rng_u32(r);
  return per_u01d(hi, lo);
}

PERDEF float per_rng_float(per_rng *r) { return per_u01f(per_rng_u32(r)); }

PERDEF per_real per_rng_real(per_rng *r) { return peri_rng_real(r); }

/* Blocks counter .. counter + PERI_LANES - 1 of stream `seed`, block g in
   w[4g .. 4g+3]: per_rng_block for many counters at once. The words live
   in 64-bit lanes (values below 2^32) so that each 32x32->64 product is
   one vector multiply when the compiler vectorizes the lane loops. */
static void peri_philox_lanes(uint64_t seed, uint64_t counter, uint32_t *w) {
  uint64_t c0[PERI_LANES], c1[PERI_LANES], c2[PERI_LANES], c3[PERI_LANES];
  uint64_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  uint32_t g;
  int r;
  for (g = 0; g < PERI_LANES; ++g) {
    uint64_t c = counter + g;
    c0[g] = (uint32_t)c;
    c1[g] = (uint32_t)(c >> 32);
    c2[g] = 0;
    c3[g] = 0;
  }
  for (r = 0; r < 10; ++r) {
    for (g = 0; g < PERI_LANES; ++g) {
      uint64_t p0 = (c0[g] & 0xffffffffu) * 0xD2511F53u;
      uint64_t p1 = (c2[g] & 0xffffffffu) * 0xCD9E8D57u;
      uint64_t n0 = (p1 >> 32) ^ c1[g] ^ k0;
      uint64_t n2 = (p0 >> 32) ^ c3[g] ^ k1;
      c1[g] = p1 & 0xffffffffu;
      c3[g] = p0 & 0xffffffffu;
      c0[g] = n0;
      c2[g] = n2;
    }
    k0 = (uint32_t)(k0 + 0x9E3779B9u);
    k1 = (uint32_t)(k1 + 0xBB67AE85u);
  }
  for (g = 0; g < PERI_LANES; ++g) {
    w[4 * g] = (uint32_t)c0[g];
    w[4 * g + 1] = (uint32_t)c1[g];
    w[4 * g + 2] = (uint32_t)c2[g];
    w[4 * g + 3] = (uint32_t)c3[g];
  }
}

/* The stream state after its next `used` words (1 <= used <= 4 *
   PERI_LANES) were taken from w, filled by peri_philox_lanes at
   r->counter while r had no buffered words: what `used` calls of
   per_rng_u32 would have left. */
static void peri_rng_commit(per_rng *r, const uint32_t *w, uint32_t used) {
  uint32_t blocks = (used + 3) / 4;
  r->counter += blocks;
  memcpy(r->buf, w + 4 * (blocks - 1), sizeof r->buf);
  r->avail = 4 * blocks - used;
}

/* >>tree */

PERDEF size_t per_tree_bytes(uint32_t capacity) {
  uint32_t L;
  uint64_t bytes;
  if (capacity == 0 || capacity > PER_MAX_CAPACITY) return 0;
  L = peri_leaves_for(capacity, NULL);
  bytes = (uint64_t)L * 2u * sizeof(per_real);
  if ((uint64_t)(size_t)bytes != bytes) return 0; /* 32-bit size_t */
  return (size_t)bytes;
}

static void peri_tree_empty(per_tree *t) { memset(t, 0, sizeof *t); }

static void peri_tree_shape(per_tree *t, uint32_t capacity) {
  t->capacity = capacity;
  t->leaves = peri_leaves_for(capacity, &t->depth);
}

/* The end of an allocating init built on its init_mem: st is what the
   init_mem gave for memory `mem` from PER_MALLOC. On success the
   structure owns it (*owns, *ctx); else it goes back (a PER_MALLOC hook
   that does not align) and st is returned. */
static per_status peri_owned(per_status st, void *mem, void *alloc_ctx,
                             uint32_t *owns, void **ctx) {
  if (st != PER_OK) {
    PER_FREE(mem, alloc_ctx);
    return st;
  }
  *owns = 1;
  *ctx = alloc_ctx;
  return PER_OK;
}

PERDEF per_status per_tree_init_mem(per_tree *t, uint32_t capacity, void *mem,
                                    size_t bytes) {
  size_t need;
  if (!t) return PER_ERR_NULL;
  peri_tree_empty(t);
  if (!mem) return PER_ERR_NULL;
  need = per_tree_bytes(capacity);
  if (need == 0) return PER_ERR_CAPACITY;
  if (bytes < need || ((uintptr_t)mem % sizeof(per_real)) != 0)
    return PER_ERR_MEMORY;
  t->node = (per_real *)mem;
  peri_tree_shape(t, capacity);
  per_tree_clear(t);
  return PER_OK;
}

/* per_tree_init_mem on memory of its own from PER_MALLOC. */
PERDEF per_status per_tree_init(per_tree *t, uint32_t capacity,
                                void *alloc_ctx) {
  size_t bytes;
  void *mem;
  if (!t) return PER_ERR_NULL;
  peri_tree_empty(t);
  bytes = per_tree_bytes(capacity);
  if (bytes == 0) return PER_ERR_CAPACITY;
  mem = PER_MALLOC(bytes, alloc_ctx);
  if (!mem) return PER_ERR_NOMEM;
  return peri_owned(per_tree_init_mem(t, capacity, mem, bytes), mem, alloc_ctx,
                    &t->owns, &t->alloc_ctx);
}

PERDEF void per_tree_free(per_tree *t) {
  if (!t) return;
  if (t->owns && t->node) PER_FREE(t->node, t->alloc_ctx);
  peri_tree_empty(t);
}

PERDEF void per_tree_clear(per_tree *t) {
  if (!t || !t->node) return;
  memset(t->node, 0, (size_t)t->leaves * 2 * sizeof(per_real));
}

/* Marks the cases of peri_walk_up's switch that run on into the next (a
   comment would not do: nvcc hands the host compiler the code without
   its comments). */
#if defined(__has_attribute)
#if __has_attribute(fallthrough)
#define PERI_FALLTHROUGH __attribute__((fallthrough))
#endif
#endif
#ifndef PERI_FALLTHROUGH
#define PERI_FALLTHROUGH ((void)0)
#endif
/* The batch loops call it once per leaf: inlined there, not called. */
#if defined(__GNUC__) || defined(__clang__)
#define PERI_WALK_INLINE static inline __attribute__((always_inline))
#else
#define PERI_WALK_INLINE static inline
#endif

/* Recompute the `levels` nearest ancestors of node k, bottom up. The
   running value stays in a register and only the sibling is loaded: cur
   is node[k], so cur + sib is node[2p] + node[2p+1], the same bits as
   per_tree_recompute(node, p) (IEEE addition is commutative: the sum is
   the exactly rounded a + b whichever operand comes first), without
   reloading the value just stored. Unrolled: the switch jumps into a
   straight run of `levels` steps. A loop would end on a branch whose trip
   count the predictor misses on deep trees, and each miss throws away the
   work of the next walks already in flight; the jump goes to the same
   place for every walk of the same length. */
#define PERI_STEP_UP        \
  cur = cur + node[k ^ 1u]; \
  k >>= 1;                  \
  node[k] = cur
PERI_WALK_INLINE void peri_walk_up(per_real *node, size_t k, uint32_t levels) {
  per_real cur = node[k];
  switch (levels) {
    case 31: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 30: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 29: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 28: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 27: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 26: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 25: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 24: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 23: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 22: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 21: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 20: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 19: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 18: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 17: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 16: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 15: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 14: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 13: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 12: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 11: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 10: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 9: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 8: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 7: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 6: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 5: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 4: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 3: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 2: PERI_STEP_UP; PERI_FALLTHROUGH;
    case 1: PERI_STEP_UP; PERI_FALLTHROUGH;
    default: break;
  }
}
#undef PERI_STEP_UP

/* Make the ancestors of leaf i exact again after it changed: the walk,
   or (PER_REFERENCE) per_tree_recompute on each from the bottom. */
static void peri_tree_fix_leaf(per_tree *t, uint32_t i) {
  uint32_t k;
  if (PERI_FAST) peri_walk_up(t->node, (size_t)t->leaves + i, t->depth);
  else
    for (k = (t->leaves + i) >> 1; k >= 1; k >>= 1)
      per_tree_recompute(t->node, k);
}

/* node[k] = node[2k] + node[2k+1] for every k in [lo, hi]. */
static void peri_tree_recompute_range(per_real *node, uint32_t lo,
                                      uint32_t hi) {
  uint32_t k;
  for (k = lo; k <= hi; ++k) per_tree_recompute(node, k);
}

/* Prefetch the lines a walk up from node k will load (the siblings of
   its `levels` ancestors), below the top PERI_WALK_PREFETCH_TOP nodes,
   which stay in cache. */
static inline void peri_prefetch_walk(const per_real *node, size_t k,
                                      uint32_t levels) {
  uint32_t s;
  for (s = 0; s <= levels && k >= PERI_WALK_PREFETCH_TOP; ++s, k >>= 1)
    PERI_PREFETCH(node + (k ^ 1u));
}

/* Write val[j] (when val is not NULL: each leaf's final bits, stored as
   they are) to leaf idx[j] for j in order, so the last of duplicate
   indices wins, and make the tree exact again; with val NULL the leaves
   already hold their final values. Level by level from the bottom: at
   level s every ancestor of a changed leaf is recomputed from its
   children, which are final because level s-1 is done. Two ways to cover
   a level, whichever is less work:
   - one pass over idx recomputing each leaf's ancestor (a parent shared by
     several leaves is recomputed more than once, always from the same
     final children, so to the same bits; no marking, no sorting);
   - once the span [lo, hi] of the ancestors at that level holds at most n
     nodes (always near the root), recompute the whole span in order.
     Nodes of the span that are not ancestors of a changed leaf are
     recomputed from unchanged children: in a valid tree that writes back
     the bits they already hold.
   With walk_ok the levels below the spans are done by writing each leaf
   and walking up from it at once, the running value in a register (fewer
   loads; a walk is a chain of dependent adds, which can cost more than it
   saves once the loads miss: peri_tree_write_fix chooses). Still exact:
   a node's last recompute comes in the walk of the last changed leaf
   below it, after every leaf below it was written and the walks of all
   the others, so both its children are final by then. Either way every
   internal node ends as node[2k] + node[2k+1] of final children, which
   is what per_tree_set one leaf at a time gives. */
static void peri_tree_fix_levels(per_tree *t, const uint32_t *idx,
                                 const per_real *val, size_t n, int walk_ok) {
  per_real *node = t->node;
  uint32_t L = t->leaves, s, lo, hi;
  size_t j;
  lo = hi = idx[0];
  for (j = 1; j < n; ++j) {
    lo = idx[j] < lo ? idx[j] : lo;
    hi = idx[j] > hi ? idx[j] : hi;
  }
  lo += L;
  hi += L;
  s = 1;
  if (walk_ok) {
    uint32_t walk = 0; /* levels 1 .. walk below the spans */
    while (walk < t->depth && (size_t)((hi >> 1) - (lo >> 1)) >= n) {
      lo >>= 1;
      hi >>= 1;
      ++walk;
    }
    if (val && (size_t)L * 2 * sizeof(per_real) > PERI_WALK_PREFETCH_BYTES) {
      for (j = 0; j < n; ++j) {
        if (j + PERI_WALK_AHEAD < n)
          peri_prefetch_walk(node, (size_t)L + idx[j + PERI_WALK_AHEAD], walk);
        node[L + idx[j]] = val[j];
        peri_walk_up(node, (size_t)L + idx[j], walk);
      }
    } else if (val) {
      for (j = 0; j < n; ++j) {
        node[L + idx[j]] = val[j];
        peri_walk_up(node, (size_t)L + idx[j], walk);
      }
    } else if (walk > 0) {
      for (j = 0; j < n; ++j) peri_walk_up(node, (size_t)L + idx[j], walk);
    }
    s = walk + 1;
  } else if (val) {
    for (j = 0; j < n; ++j) node[L + idx[j]] = val[j];
  }
  for (; s <= t->depth; ++s) {
    lo >>= 1;
    hi >>= 1;
    if ((size_t)(hi - lo) < n) {
      peri_tree_recompute_range(node, lo, hi);
    } else {
      for (j = 0; j < n; ++j) per_tree_recompute(node, (L + idx[j]) >> s);
    }
  }
}

/* peri_tree_fix_levels with walks in a tree of at most
   PERI_WALK_MAX_BYTES; in a larger one, the way its first batches found
   faster (PERI_WALK_MAX_BYTES's comment), level by level until then and
   where nothing can time them. */
static void peri_tree_write_fix(per_tree *t, const uint32_t *idx,
                                const per_real *val, size_t n) {
  int walk = 0;
  if (n == 0) return;
  if (PERI_FAST &&
      (size_t)t->leaves * 2 * sizeof(per_real) <= PERI_WALK_MAX_BYTES) {
    walk = 1;
  } else if (PERI_FAST) {
#ifdef PERI_TICKS
    uint32_t c = t->fix_calls;
    if (c >= PERI_FIX_WARM + 2 * PERI_FIX_TRIALS) {
      walk = (int)t->fix_walk;
    } else if (c < PERI_FIX_WARM) {
      t->fix_calls = c + 1;
    } else { /* a trial: the ways alternate */
      int m = (int)((c - PERI_FIX_WARM) & 1u);
      uint64_t t0 = PERI_TICKS();
      peri_tree_fix_levels(t, idx, val, n, m);
      t->fix_ticks[m] += PERI_TICKS() - t0;
      t->fix_leaves[m] += n;
      t->fix_calls = c + 1;
      if (t->fix_calls == PERI_FIX_WARM + 2 * PERI_FIX_TRIALS)
        t->fix_walk = (double)t->fix_ticks[1] * (double)t->fix_leaves[0] <
                              (double)t->fix_ticks[0] * (double)t->fix_leaves[1]
                          ? 1u
                          : 0u;
      return;
    }
#endif
  }
  peri_tree_fix_levels(t, idx, val, n, walk);
}

PERDEF per_status per_tree_set(per_tree *t, uint32_t i, per_real v) {
  per_status s;
  if (!t || !t->node) return PER_ERR_NULL;
  if (i >= t->capacity) return PER_ERR_INDEX;
  if (!peri_leaf_plain(v)) {
    s = per_leaf_status(v);
    if (s != PER_OK) return s;
    v = 0; /* the one valid value that is not plain: -0, stored as +0 */
  }
  t->node[t->leaves + i] = v;
  peri_tree_fix_leaf(t, i);
  return PER_OK;
}

PERDEF per_status per_tree_set_batch(per_tree *t, const uint32_t *idx,
                                     const per_real *val, size_t n) {
  size_t j;
  uint32_t cap;
  int bad = 0;
  if (!t || !t->node) return PER_ERR_NULL;
  cap = t->capacity;
  if (n == 0) return PER_OK;
  if (!idx || !val) return PER_ERR_NULL;
  /* The common case in one branch-free pass (it vectorizes): every index
     in range and every value plain, so the values go in as they are. */
  for (j = 0; j < n; ++j) bad |= (idx[j] >= cap) | !peri_leaf_plain(val[j]);
  if (!bad) {
    peri_tree_write_fix(t, idx, val, n);
    return PER_OK;
  }
  /* Otherwise the first bad pair in order says why, or the batch holds a
     -0, stored as +0. */
  for (j = 0; j < n; ++j) {
    per_status s;
    if (idx[j] >= cap) return PER_ERR_INDEX;
    s = per_leaf_status(val[j]);
    if (s != PER_OK) return s;
  }
  for (j = 0; j < n; ++j) {
    per_real v = val[j];
    t->node[t->leaves + idx[j]] = (v == 0) ? (per_real)0 : v;
  }
  peri_tree_write_fix(t, idx, NULL, n);
  return PER_OK;
}

PERDEF per_status per_tree_set_range(per_tree *t, uint32_t first,
                                     const per_real *val, size_t n) {
  per_real *node;
  uint32_t lo, hi, s;
  size_t j;
  if (!t || !t->node) return PER_ERR_NULL;
  if (n == 0) return PER_OK;
  if (!val) return PER_ERR_NULL;
  if (first >= t->capacity || n > (size_t)(t->capacity - first))
    return PER_ERR_INDEX;
  for (j = 0; j < n; ++j) {
    per_status st = per_leaf_status(val[j]);
    if (st != PER_OK) return st;
  }
  node = t->node + t->leaves + first;
  for (j = 0; j < n; ++j) node[j] = (val[j] == 0) ? (per_real)0 : val[j];
  /* Level by level, the span of parents above the run, each recomputed
     once from children that are final (the level below is done). */
  lo = t->leaves + first;
  hi = lo + (uint32_t)(n - 1);
  for (s = 0; s < t->depth; ++s) {
    lo >>= 1;
    hi >>= 1;
    peri_tree_recompute_range(t->node, lo, hi);
  }
  return PER_OK;
}

PERDEF per_status per_tree_build(per_tree *t, const per_real *val, uint32_t n) {
  uint32_t i, k, L;
  if (!t || !t->node) return PER_ERR_NULL;
  if (n > t->capacity) return PER_ERR_INDEX;
  if (n > 0 && !val) return PER_ERR_NULL;
  for (i = 0; i < n; ++i) {
    per_status s = per_leaf_status(val[i]);
    if (s != PER_OK) return s;
  }
  L = t->leaves;
  for (i = 0; i < n; ++i) t->node[L + i] = (val[i] == 0) ? (per_real)0 : val[i];
  for (i = n; i < L; ++i) t->node[L + i] = 0;
  for (k = L - 1; k >= 1; --k) per_tree_recompute(t->node, k);
  t->node[0] = 0;
  return PER_OK;
}

PERDEF per_real per_tree_get(const per_tree *t, uint32_t i) {
  if (!t || !t->node || i >= t->capacity) return 0;
  return t->node[t->leaves + i];
}

PERDEF per_real per_tree_total(const per_tree *t) {
  if (!t || !t->node) return 0;
  return t->node[1];
}

PERDEF per_real per_tree_prefix(const per_tree *t, uint32_t i) {
  per_real sum = 0;
  uint32_t k;
  if (!t || !t->node) return 0;
  if (i >= t->capacity) return t->node[1];
  for (k = t->leaves + i; k > 1; k >>= 1)
    if (k & 1u) sum += t->node[k - 1];
  return sum;
}

/* PER_OK when the tree has mass to sample from, else why not. */
static per_status peri_tree_samplable(const per_tree *t) {
  return peri_samplable(t->node[1]);
}

PERDEF per_status per_tree_find(const per_tree *t, per_real u, uint32_t *idx) {
  per_status s;
  if (!t || !t->node || !idx) return PER_ERR_NULL;
  if (u != u) return PER_ERR_NAN;
  if (u < 0) return PER_ERR_NEGATIVE;
  s = peri_tree_samplable(t);
  if (s != PER_OK) return s;
  *idx = per_tree_descend(t->node, t->leaves, u);
  return PER_OK;
}

/* u[g] = per_tree_stratum_u(seed, counter, i0 + g, seg) for every lane g,
   bit for bit, from PERI_LANES Philox blocks made at once. (For a spare
   lane past 2^32 strata the counter differs: nobody reads those.) With
   GCC and clang the products are stored to u and then an asm that may
   read and write all memory, so the descent reads the rounded products
   back and no multiply-add can form: peri_mul_rn's guarantee, without
   stopping the loop from vectorizing. */
static void peri_strata_u(uint64_t seed, uint64_t counter, uint32_t i0,
                          per_real seg, per_real *u) {
  uint32_t w[4 * PERI_LANES], g;
  peri_philox_lanes(seed, counter + i0, w);
  for (g = 0; g < PERI_LANES; ++g) {
    per_real r01, x;
    if (sizeof(per_real) == sizeof(float)) r01 = (per_real)per_u01f(w[4 * g]);
    else r01 = (per_real)per_u01d(w[4 * g], w[4 * g + 1]);
    x = (per_real)(uint32_t)(i0 + g) + r01;
#if defined(__GNUC__) || defined(__clang__)
    u[g] = x * seg;
#else
    u[g] = peri_mul_rn(x, seg);
#endif
  }
#if defined(__GNUC__) || defined(__clang__)
  __asm__ __volatile__("" : : "r"(u) : "memory");
#endif
}

/* v when go is 1, +0 when go is 0, by masking the bits: the same value as
   `go ? v : 0` with no branch to mispredict (compilers that do not
   vectorize the lockstep lanes otherwise branch on each lane's coin). */
PER_INLINE per_real peri_keep_if(per_real v, uint32_t go) {
  if (sizeof(per_real) == sizeof(double)) {
    uint64_t b;
    double d = (double)v;
    memcpy(&b, &d, sizeof b);
    b &= (uint64_t)0 - (uint64_t)go;
    memcpy(&d, &b, sizeof d);
    return (per_real)d;
  } else {
    uint32_t b;
    float f = (float)v;
    memcpy(&b, &f, sizeof b);
    b &= 0u - go;
    memcpy(&f, &b, sizeof f);
    return (per_real)f;
  }
}

/* k[g] = node index of the leaf per_tree_descend finds for u[g], for
   PERI_LANES descents run in lockstep, one level at a time: a descent is a
   chain of dependent loads, and the lanes' loads are independent, so their
   cache misses overlap and the lane loop vectorizes (gathers). Each lane
   takes per_tree_step's step, by the same rule. Works on local copies: the
   compiler then knows that the lanes do not alias the tree. */
static void peri_descend_lanes(const per_real *node, uint32_t depth,
                               const per_real *u_in, uint32_t *k_out) {
  per_real u[PERI_LANES];
  uint32_t k[PERI_LANES], g, level;
  for (g = 0; g < PERI_LANES; ++g) {
    u[g] = u_in[g];
    k[g] = 1;
  }
  for (level = 0; level < depth; ++level) {
    uint32_t differ = 0;
    for (g = 0; g < PERI_LANES; ++g) differ |= k[g] ^ k[0];
    if (differ == 0) {
      /* Every lane at the same node (near the root of a stratified
         batch, whose lanes are neighbouring strata): load the pair once.
         The same arithmetic as below. */
      uint32_t c = 2 * k[0];
      per_real left = node[c], right = node[c + 1];
      for (g = 0; g < PERI_LANES; ++g) {
        uint32_t go_right = peri_tree_go_right(left, right, u[g]);
        u[g] -= peri_keep_if(left, go_right);
        k[g] = c + go_right;
      }
      continue;
    }
    for (g = 0; g < PERI_LANES; ++g) {
      uint32_t c = 2 * k[g];
      per_real left = node[c];
      uint32_t go_right = peri_tree_go_right(left, node[c + 1], u[g]);
      u[g] -= peri_keep_if(left, go_right);
      k[g] = c + go_right;
    }
    /* Below the top levels (in L1 by then), fetch the four grandchildren
       of every lane's node: the pair read two levels down is among them
       (one cache line), so its miss overlaps the next level. */
    if (level >= PERI_PREFETCH_LEVEL && level + 2 < depth)
      for (g = 0; g < PERI_LANES; ++g) PERI_PREFETCH(&node[4 * k[g]]);
  }
  for (g = 0; g < PERI_LANES; ++g) k_out[g] = k[g];
}

/* k[g] = node index of the leaf per_tree_descend finds for u[g], g < m
   (m <= PERI_LANES; u holds PERI_LANES values, those past m are
   overwritten): few descents go one at a time, more in lockstep
   (peri_descend_lanes). */
static void peri_find_lanes(const per_tree *t, per_real *u, uint32_t m,
                            uint32_t *k) {
  uint32_t g;
  if (!PERI_FAST || m < PERI_LOCKSTEP_MIN) {
    for (g = 0; g < m; ++g)
      k[g] = t->leaves + per_tree_descend(t->node, t->leaves, u[g]);
    return;
  }
  for (g = m; g < PERI_LANES; ++g) u[g] = 0; /* spare lanes, never read */
  peri_descend_lanes(t->node, t->depth, u, k);
}

/* leaf[g] = per_tree_descend(node, L, per_rng_real(rng) * total) for
   g = 0, 1, ..., m - 1 (m <= PERI_LANES), the reals drawn in that order:
   the same draws and leaves as m calls one after the other. Few draws go
   one at a time; more go in lockstep. */
static void peri_iid_lanes(const per_tree *t, per_rng *rng, per_real total,
                           uint32_t m, uint32_t *leaf) {
  per_real u[PERI_LANES];
  uint32_t k[PERI_LANES], g;
  for (g = 0; g < m; ++g) u[g] = peri_mul_rn(per_rng_real(rng), total);
  peri_find_lanes(t, u, m, k);
  for (g = 0; g < m; ++g) leaf[g] = k[g] - t->leaves;
}

PERDEF per_status per_tree_sample_strata(const per_tree *t, uint64_t seed,
                                         uint64_t counter, uint32_t B,
                                         uint32_t first, uint32_t count,
                                         uint32_t *idx, per_real *val) {
  per_status s;
  per_real seg;
  uint32_t base, L;
  if (!t || !t->node) return PER_ERR_NULL;
  if (B == 0) return PER_ERR_BATCH;
  if (count > B || first > B - count) return PER_ERR_INDEX;
  if (count == 0) return PER_OK;
  if (!idx) return PER_ERR_NULL;
  s = peri_tree_samplable(t);
  if (s != PER_OK) return s;
  L = t->leaves;
  seg = t->node[1] / (per_real)B;
  for (base = 0; base < count; base += PERI_LANES) {
    uint32_t k[PERI_LANES], g;
    per_real u[PERI_LANES];
    uint32_t m = count - base < PERI_LANES ? count - base : PERI_LANES;
    if (!PERI_FAST || m < PERI_LOCKSTEP_MIN) { /* one descent at a time */
      for (g = 0; g < m; ++g)
        k[g] = L + per_tree_descend(t->node, L,
                                    per_tree_stratum_u(seed, counter,
                                                       first + base + g, seg));
    } else {
      /* Whole groups even when m < PERI_LANES: the spare lanes compute a
         valid descent that nobody reads, and the loops keep a fixed trip
         count that compilers vectorize. */
      peri_strata_u(seed, counter, first + base, seg, u);
      peri_descend_lanes(t->node, t->depth, u, k);
    }
    for (g = 0; g < m; ++g) {
      uint32_t leaf = k[g] - L;
      PER_ASSERT(leaf < t->capacity && t->node[k[g]] > 0);
      idx[base + g] = leaf;
      if (val) val[base + g] = t->node[k[g]];
    }
  }
  return PER_OK;
}

PERDEF per_status per_tree_find_batch(const per_tree *t, const per_real *u,
                                      uint32_t n, uint32_t *idx,
                                      per_real *val) {
  per_status s;
  uint32_t i, base, L;
  if (!t || !t->node) return PER_ERR_NULL;
  if (n == 0) return PER_OK;
  if (!u || !idx) return PER_ERR_NULL;
  for (i = 0; i < n; ++i) {
    if (u[i] != u[i]) return PER_ERR_NAN;
    if (u[i] < 0) return PER_ERR_NEGATIVE;
  }
  s = peri_tree_samplable(t);
  if (s != PER_OK) return s;
  L = t->leaves;
  for (base = 0; base < n; base += PERI_LANES) {
    uint32_t k[PERI_LANES], g;
    uint32_t m = n - base < PERI_LANES ? n - base : PERI_LANES;
    per_real v[PERI_LANES];
    for (g = 0; g < m; ++g) v[g] = u[base + g];
    peri_find_lanes(t, v, m, k);
    for (g = 0; g < m; ++g) {
      idx[base + g] = k[g] - L;
      if (val) val[base + g] = t->node[k[g]];
    }
  }
  return PER_OK;
}

PERDEF per_status per_tree_sample(const per_tree *t, per_rng *rng, uint32_t B,
                                  uint32_t *idx, per_real *val) {
  per_status s;
  if (!rng) return PER_ERR_NULL;
  if (B > 0 && !idx) return PER_ERR_NULL;
  s = per_tree_sample_strata(t, rng->seed, rng->counter, B, 0, B, idx, val);
  if (s != PER_OK) return s;
  rng->counter += B;
  rng->avail = 0;
  return PER_OK;
}

PERDEF per_status per_tree_check(const per_tree *t) {
  uint32_t i, k, L;
  const per_real *node;
  if (!t || !t->node) return PER_ERR_NULL;
  L = t->leaves;
  node = t->node;
  if (t->capacity == 0 || t->capacity > L || (L >> t->depth) != 1u ||
      (t->depth > 0 && (L >> 1) >= t->capacity))
    return PER_ERR_CORRUPT;
  if (node[0] != 0) return PER_ERR_CORRUPT;
  for (i = 0; i < t->capacity; ++i)
    if (per_leaf_status(node[L + i]) != PER_OK) return PER_ERR_CORRUPT;
  for (i = t->capacity; i < L; ++i)
    if (node[L + i] != 0) return PER_ERR_CORRUPT;
  for (k = L - 1; k >= 1; --k)
    if (!(node[k] == node[2 * k] + node[2 * k + 1])) return PER_ERR_CORRUPT;
  return PER_OK;
}

/* >>swap */
PERDEF size_t per_swap_bytes(uint32_t capacity) {
  uint64_t bytes;
  if (capacity == 0 || capacity > PER_MAX_CAPACITY) return 0;
  bytes = (uint64_t)capacity * sizeof(uint32_t);
  if ((uint64_t)(size_t)bytes != bytes) return 0; /* 32-bit size_t */
  return (size_t)bytes;
}

static void peri_swap_setup(per_swap *s, uint32_t capacity, uint32_t *perm) {
  uint32_t i;
  s->perm = perm;
  s->capacity = capacity;
  s->n = 0;
  for (i = 0; i < capacity; ++i) perm[i] = i;
}

PERDEF per_status per_swap_init_mem(per_swap *s, uint32_t capacity, void *mem,
                                    size_t bytes) {
  size_t need;
  if (!s) return PER_ERR_NULL;
  memset(s, 0, sizeof *s);
  if (!mem) return PER_ERR_NULL;
  need = per_swap_bytes(capacity);
  if (need == 0) return PER_ERR_CAPACITY;
  if (bytes < need || ((uintptr_t)mem % sizeof(uint32_t)) != 0)
    return PER_ERR_MEMORY;
  peri_swap_setup(s, capacity, (uint32_t *)mem);
  return PER_OK;
}

/* per_swap_init_mem on memory of its own, as per_tree_init. */
PERDEF per_status per_swap_init(per_swap *s, uint32_t capacity,
                                void *alloc_ctx) {
  size_t bytes;
  void *mem;
  if (!s) return PER_ERR_NULL;
  memset(s, 0, sizeof *s);
  bytes = per_swap_bytes(capacity);
  if (bytes == 0) return PER_ERR_CAPACITY;
  mem = PER_MALLOC(bytes, alloc_ctx);
  if (!mem) return PER_ERR_NOMEM;
  return peri_owned(per_swap_init_mem(s, capacity, mem, bytes), mem, alloc_ctx,
                    &s->owns, &s->alloc_ctx);
}

PERDEF void per_swap_free(per_swap *s) {
  if (!s) return;
  if (s->owns && s->perm) PER_FREE(s->perm, s->alloc_ctx);
  memset(s, 0, sizeof *s);
}

PERDEF per_status per_swap_grow(per_swap *s, uint32_t n) {
  if (!s || !s->perm) return PER_ERR_NULL;
  if (n > s->capacity) return PER_ERR_CAPACITY;
  if (n < s->n) return PER_ERR_ARG;
  /* perm[s->n .. n) were never swapped (draws stay inside [0, s->n)), so
     they still hold their own index and [0, n) is a permutation. */
  s->n = n;
  return PER_OK;
}

/* The next word for a Lemire rejection in per_swap_sample: from w while
   it lasts; then the stream takes over (*used is set past the end, so the
   caller commits nothing more and starts a new round). */
static uint32_t peri_swap_word(per_rng *r, const uint32_t *w, uint32_t *used) {
  if (*used < 4 * PERI_LANES) return w[(*used)++];
  if (*used == 4 * PERI_LANES) {
    peri_rng_commit(r, w, *used);
    *used = 4 * PERI_LANES + 1;
  }
  return per_rng_u32(r);
}

PERDEF per_status per_swap_sample(per_swap *s, per_rng *rng, uint32_t k,
                                  uint32_t *out) {
  uint32_t i, n, *perm;
  if (!s || !s->perm || !rng || !out) return PER_ERR_NULL;
  n = s->n;
  if (n == 0) return PER_ERR_EMPTY;
  if (k == 0 || k > n) return PER_ERR_BATCH;
  perm = s->perm;
  i = 0;
  while (i < k) {
    uint32_t w[4 * PERI_LANES], used = 0;
    if (!PERI_FAST || rng->avail > 0 || k < PERI_SWAP_LANES_MIN) {
      /* Words the stream has buffered, or a batch too small to pay for
         PERI_LANES blocks at once: one draw the plain way. */
      uint32_t j = i + per_rng_below(rng, n - i), pick = perm[j];
      perm[j] = perm[i];
      perm[i] = pick;
      out[i++] = pick;
      continue;
    }
    /* Blocks made PERI_LANES at a time (vectorized Philox): the same words
       in the same order as per_rng_below takes them, the same Lemire
       rejections, and the stream left where those calls would leave it
       (blocks made but not reached are dropped). */
    peri_philox_lanes(rng->seed, rng->counter, w);
    while (i < k && used < 4 * PERI_LANES) {
      uint32_t bound = n - i, j, pick;
      uint64_t m = (uint64_t)w[used++] * bound;
      if ((uint32_t)m < bound) {
        uint32_t threshold = (uint32_t)(0u - bound) % bound;
        while ((uint32_t)m < threshold)
          m = (uint64_t)peri_swap_word(rng, w, &used) * bound;
      }
      j = i + (uint32_t)(m >> 32);
      pick = perm[j];
      perm[j] = perm[i];
      perm[i] = pick;
      out[i++] = pick;
    }
    if (used <= 4 * PERI_LANES) peri_rng_commit(rng, w, used);
  }
  return PER_OK;
}

/* >>cat */
PERDEF per_status per_tree_sample_iid(const per_tree *t, per_rng *rng,
                                      uint32_t k, uint32_t *idx,
                                      per_real *val) {
  per_status s;
  per_real total;
  uint32_t i, L;
  if (!t || !t->node || !rng) return PER_ERR_NULL;
  if (k == 0) return PER_ERR_BATCH;
  if (!idx) return PER_ERR_NULL;
  s = peri_tree_samplable(t);
  if (s != PER_OK) return s;
  total = t->node[1];
  L = t->leaves;
  for (i = 0; i < k; i += PERI_LANES) {
    uint32_t leaf[PERI_LANES], g;
    uint32_t m = k - i < PERI_LANES ? k - i : PERI_LANES;
    peri_iid_lanes(t, rng, total, m, leaf);
    for (g = 0; g < m; ++g) {
      idx[i + g] = leaf[g];
      if (val) val[i + g] = t->node[L + leaf[g]];
    }
  }
  return PER_OK;
}

PERDEF size_t per_cat_bytes(uint32_t max_k) {
  size_t slots;
  if (max_k == 0 || max_k > (1u << 30)) return 0;
  slots = (size_t)1 << peri_cat_hbits(max_k);
  if (slots >
      ((size_t)-1 - (size_t)max_k * sizeof(per_real)) / sizeof(uint32_t))
    return 0;
  return slots * sizeof(uint32_t) + (size_t)max_k * sizeof(per_real);
}

PERDEF per_status per_cat_init_mem(per_cat *c, uint32_t max_k, void *mem,
                                   size_t bytes) {
  size_t need;
  if (!c) return PER_ERR_NULL;
  memset(c, 0, sizeof *c);
  if (max_k == 0 || max_k > (1u << 30)) return PER_ERR_BATCH;
  if (!mem) return PER_ERR_NULL;
  need = per_cat_bytes(max_k);
  if (need == 0 || bytes < need || (uintptr_t)mem % sizeof(per_real) != 0)
    return PER_ERR_MEMORY;
  c->hbits = peri_cat_hbits(max_k);
  c->table = (uint32_t *)mem;
  /* 2^hbits >= 2 words of 4 bytes: the values after them stay aligned */
  c->saved =
      (per_real *)(void *)((unsigned char *)mem + ((size_t)4 << c->hbits));
  c->max_k = max_k;
  c->reject_limit = max_k;
  return PER_OK;
}

/* per_cat_init_mem on one block of its own, as per_tree_init. */
PERDEF per_status per_cat_init(per_cat *c, uint32_t max_k, void *alloc_ctx) {
  size_t bytes;
  void *mem;
  if (!c) return PER_ERR_NULL;
  memset(c, 0, sizeof *c);
  if (max_k == 0 || max_k > (1u << 30)) return PER_ERR_BATCH;
  bytes = per_cat_bytes(max_k);
  if (bytes == 0) return PER_ERR_NOMEM;
  mem = PER_MALLOC(bytes, alloc_ctx);
  if (!mem) return PER_ERR_NOMEM;
  return peri_owned(per_cat_init_mem(c, max_k, mem, bytes), mem, alloc_ctx,
                    &c->owns, &c->alloc_ctx);
}

PERDEF void per_cat_free(per_cat *c) {
  if (!c) return;
  if (c->owns && c->table) PER_FREE(c->table, c->alloc_ctx);
  memset(c, 0, sizeof *c);
}

/* Put back the leaves idx[0..m) from c->saved and recompute their
   ancestors: the tree is again exactly what it was. */
static void peri_cat_restore(per_cat *c, per_tree *t, const uint32_t *idx,
                             uint32_t m) {
  peri_tree_write_fix(t, idx, c->saved, m);
}

PERDEF per_status per_cat_sample(per_cat *c, per_tree *t, per_rng *rng,
                                 uint32_t k, uint32_t *idx, per_real *val) {
  per_status s;
  per_real total;
  uint32_t L, m = 0, j, hb;
  uint64_t rejects = 0, limit;
  if (!c || !c->table || !t || !t->node || !rng) return PER_ERR_NULL;
  if (k == 0 || k > c->max_k) return PER_ERR_BATCH;
  if (!idx) return PER_ERR_NULL;
  s = peri_tree_samplable(t);
  if (s != PER_OK) return s;
  if (k > t->capacity) return PER_ERR_TOO_FEW;
  L = t->leaves;
  total = t->node[1];
  hb = peri_set_reset(c->table, k);
  /* A bounded number of repeats: i.i.d. draws can need arbitrarily many
     when a few leaves hold nearly all the mass. */
  limit = (uint64_t)64 * k + 1024;
  if (c->reject_limit < limit) limit = c->reject_limit;

  /* Phase 1: i.i.d. draws, first occurrences kept. Drawn in groups of at
     most min(k - m, limit - rejects): every draw counts as a pick or a
     repeat, so the one-at-a-time loop would make at least that many more
     draws; the draws, picks and rng position are exactly the same. */
  while (m < k && rejects < limit) {
    uint32_t leaf[PERI_LANES], g, want = k - m;
    if (limit - rejects < want) want = (uint32_t)(limit - rejects);
    if (want > PERI_LANES) want = PERI_LANES;
    peri_iid_lanes(t, rng, total, want, leaf);
    for (g = 0; g < want; ++g) {
      if (peri_set_insert(c->table, hb, leaf[g])) {
        c->saved[m] = t->node[L + leaf[g]];
        idx[m++] = leaf[g];
      } else {
        ++rejects;
      }
    }
  }

  if (m < k) {
    /* Phase 2: too many repeats (k is close to the number of leaves with
       mass, or the mass is concentrated). Zero the picks and draw from the
       rest: given the picks so far, the next pick has the same law under
       both methods. */
    for (j = 0; j < m; ++j) t->node[L + idx[j]] = 0;
    peri_tree_write_fix(t, idx, NULL, m);
    while (m < k) {
      uint32_t leaf;
      total = t->node[1];
      if (!(total > 0)) {
        peri_cat_restore(c, t, idx, m);
        return PER_ERR_TOO_FEW;
      }
      leaf =
          per_tree_descend(t->node, L, peri_mul_rn(per_rng_real(rng), total));
      c->saved[m] = t->node[L + leaf];
      idx[m++] = leaf;
      t->node[L + leaf] = 0;
      peri_tree_fix_leaf(t, leaf);
    }
    peri_cat_restore(c, t, idx, m);
  }
  if (val)
    for (j = 0; j < k; ++j) val[j] = c->saved[j];
  return PER_OK;
}

/* >>buffer */

/* b->error emptied, for a message. */
static peri_msg peri_buf_msg(per_buffer *b) {
  return peri_msg_into(b->error, sizeof b->error);
}

/* b->error = what; returns s. */
static per_status peri_buf_fail(per_buffer *b, per_status s, const char *what) {
  peri_msg m = peri_buf_msg(b);
  peri_msg_s(&m, what);
  return s;
}

/* The end of a public call on b (not NULL) that emptied b->error at its
   start: "" on success; per_status_str(s) on a refusal that said
   nothing more specific. Returns s. */
static per_status peri_buf_end(per_buffer *b, per_status s) {
  if (s == PER_OK) b->error[0] = 0;
  else if (!b->error[0]) peri_buf_fail(b, s, per_status_str(s));
  return s;
}

/* Batches are processed in pieces of this many slots (stack arrays: no
   allocation per call). */
#define PERI_CHUNK 256

/* out[j] = peri_priority(td[j], eps, alpha) and w[j] = peri_weight(val[j],
   pmin, beta), j < n <= PERI_CHUNK: the same bits, the pows of a chunk
   at once (peri_pow_many). */
static void peri_priorities(const float *td, uint32_t n, double eps,
                            double alpha, per_real *out) {
  double v[PERI_CHUNK];
  uint32_t j;
  if (!peri_vpow_on() || alpha == 0 || alpha == 1) {
    for (j = 0; j < n; ++j) out[j] = peri_priority(td[j], eps, alpha);
    return;
  }
  for (j = 0; j < n; ++j) v[j] = fabs((double)td[j]) + eps;
  peri_pow_many(v, n, alpha, sizeof(per_real) == sizeof(float));
  for (j = 0; j < n; ++j)
    out[j] = v[j] <= (double)PER_LEAF_MAX ? (per_real)v[j] : PER_LEAF_MAX;
}

static void peri_weights(const per_real *val, uint32_t n, per_real pmin,
                         double beta, float *w) {
  double v[PERI_CHUNK];
  uint32_t j;
  if (!peri_vpow_on() || beta == 0) {
    for (j = 0; j < n; ++j) w[j] = peri_weight(val[j], pmin, beta);
    return;
  }
  for (j = 0; j < n; ++j)
    v[j] = val[j] > pmin ? (double)pmin / (double)val[j] : 1.0;
  peri_pow_many(v, n, beta, 1);
  for (j = 0; j < n; ++j) w[j] = val[j] > pmin ? (float)v[j] : 1.0f;
}

#define PERI_SAMPLE_FLAGS                                       \
  (PER_SAMPLE_UNIQUE | PER_SAMPLE_BETA | PER_SAMPLE_SEQUENCES | \
   PER_SAMPLE_TRAJECTORIES)

PERDEF per_config per_config_default(uint32_t capacity, uint32_t item_size) {
  per_config c;
  memset(&c, 0, sizeof c);
  c.capacity = capacity;
  c.item_size = item_size;
  c.alpha = 0.6;
  c.beta0 = 0.4;
  c.beta1 = 1.0;
  c.beta_steps = 200000;
  c.eps = 1e-6;
  c.max_priority = 1.0;
  c.max_unique = capacity < 65536u ? capacity : 65536u;
  c.seq_eta = 0.9;
  return c;
}

/* ---- min tree (PER_WEIGHTS_BUFFER_MAX) ---- */

/* Leaf i of the min tree m (over a tree of L leaves) for leaf value v. */
static void peri_min_set(per_real *m, uint32_t L, uint32_t i, per_real v) {
  uint32_t k = L + i;
  m[k] = v > 0 ? v : PERI_NO_MIN;
  for (k >>= 1; k >= 1; k >>= 1) {
    per_real nv = peri_min_of(m[2 * k], m[2 * k + 1]);
    if (m[k] == nv) break; /* ancestors depend only on this node */
    m[k] = nv;
  }
}

/* Rebuild the min tree m of sum tree t from t's leaves: O(L). */
static void peri_min_build(per_real *m, const per_tree *t) {
  uint32_t L = t->leaves, i, k;
  if (!m) return;
  for (i = 0; i < L; ++i) {
    per_real v = t->node[L + i];
    m[L + i] = (i < t->capacity && v > 0) ? v : PERI_NO_MIN;
  }
  for (k = L - 1; k >= 1; --k) m[k] = peri_min_of(m[2 * k], m[2 * k + 1]);
  m[0] = PERI_NO_MIN;
}

/* ---- max tree (PER_MAX_LIVE) ---- */

/* Leaf i of the max tree m (over a tree of L leaves) for leaf value v. */
static void peri_max_set(per_real *m, uint32_t L, uint32_t i, per_real v) {
  uint32_t k = L + i;
  m[k] = v;
  for (k >>= 1; k >= 1; k >>= 1) {
    per_real nv = m[2 * k] < m[2 * k + 1] ? m[2 * k + 1] : m[2 * k];
    if (m[k] == nv) break; /* ancestors depend only on this node */
    m[k] = nv;
  }
}

/* Rebuild the max tree m of sum tree t from t's leaves: O(L). */
static void peri_max_build(per_real *m, const per_tree *t) {
  uint32_t L = t->leaves, k;
  if (!m) return;
  memcpy(m + L, t->node + L, (size_t)L * sizeof(per_real));
  for (k = L - 1; k >= 1; --k)
    m[k] = m[2 * k] < m[2 * k + 1] ? m[2 * k + 1] : m[2 * k];
  m[0] = 0;
}

/* max_leaf from the max tree (PER_MAX_LIVE): the largest stored leaf, or
   max_priority (1 with alpha = 0) when none is > 0. */
static void peri_max_live(per_buffer *b) {
  per_real top = b->max_node[1];
  b->max_leaf = top > 0             ? top
                : b->cfg.alpha == 0 ? (per_real)1
                                    : (per_real)b->cfg.max_priority;
}

/* The buffer's own bookkeeping of leaf i having become v (with
   PER_MAX_LIVE the caller then calls peri_max_live). */
static void peri_note_leaf(per_buffer *b, uint32_t i, per_real v) {
  if (b->max_node) peri_max_set(b->max_node, b->tree.leaves, i, v);
  else if (v > b->max_leaf) b->max_leaf = v;
  if (!(v > 0)) b->zero_hint = 1;
  if (b->min_node) peri_min_set(b->min_node, b->tree.leaves, i, v);
}

/* Leaves idx[0..n) = val[0..n) in both trees (values already valid). */
static void peri_set_leaves(per_buffer *b, const uint32_t *idx,
                            const per_real *val, uint32_t n) {
  uint32_t j;
  per_status s = per_tree_set_batch(&b->tree, idx, val, n);
  PER_ASSERT(s == PER_OK);
  (void)s;
  for (j = 0; j < n; ++j) peri_note_leaf(b, idx[j], val[j]);
  if (b->max_node) peri_max_live(b);
}

/* Leaves [first, first + n) = val[0..n) (values already valid, no wrap):
   per_tree_set_range recomputes each parent of the run once. */
static void peri_set_run(per_buffer *b, uint32_t first, const per_real *val,
                         uint32_t n) {
  uint32_t j;
  per_status s = per_tree_set_range(&b->tree, first, val, n);
  PER_ASSERT(s == PER_OK);
  (void)s;
  for (j = 0; j < n; ++j) peri_note_leaf(b, first + j, val[j]);
  if (b->max_node) peri_max_live(b);
}

/* ---- sequences (seq_len > 0) ---- */

/* The sequence starting at slot s (peri_seq_steps_of). */
static uint32_t peri_seq_steps(const per_buffer *b, uint32_t s, double *value) {
  return peri_seq_steps_of(b->tree.node + b->tree.leaves, b->gen, b->ends,
                           b->cfg.capacity, b->pos, b->cfg.seq_len,
                           (b->cfg.flags & PER_SEQ_CROSS_EPISODES) != 0,
                           b->cfg.seq_eta, s, value);
}

/* Sequence j's leaf (and validity) from its steps. */
static void peri_seq_refresh(per_buffer *b, uint32_t j) {
  double v = 0;
  uint32_t n = peri_seq_steps(b, j * b->cfg.seq_stride, &v);
  per_real r = n ? (per_real)v : (per_real)0;
  b->seq_ok[j] = n != 0;
  if (b->seq_tree.node[b->seq_tree.leaves + j] == r) return;
  per_tree_set(&b->seq_tree, j, r);
  if (b->seq_min_node) peri_min_set(b->seq_min_node, b->seq_tree.leaves, j, r);
}

/* Every sequence starting in slots [first, first + count) (mod capacity). */
static void peri_seq_refresh_slots(per_buffer *b, uint32_t first,
                                   uint64_t count) {
  uint32_t cap = b->cfg.capacity, st, ns, j;
  uint64_t off;
  if (!b->seq_ok) return;
  st = b->cfg.seq_stride;
  ns = cap / st;
  if (count >= cap) {
    for (j = 0; j < ns; ++j) peri_seq_refresh(b, j);
    return;
  }
  j = (uint32_t)(((uint64_t)first + st - 1) / st);
  off = (uint64_t)j * st - first;
  if (j == ns) j = 0;
  for (; off < count; off += st) {
    peri_seq_refresh(b, j);
    if (++j == ns) j = 0;
  }
}

/* Every sequence holding one of the steps in slots [first, first + n). */
static void peri_seq_touch(per_buffer *b, uint32_t first, uint64_t n) {
  uint32_t cap = b->cfg.capacity, back;
  if (!b->seq_ok) return;
  back = b->cfg.seq_len - 1;
  peri_seq_refresh_slots(b, (uint32_t)(((uint64_t)first + cap - back) % cap),
                         n + back);
}

/* ---- trajectory ids ---- */

/* Checks the trajectory ids of items fed newest first (the low 32 bits
   kept per slot) against trajs, the trajectories added in all: the
   newest item's trajectory is one of 0 .. trajs - 1, and going back in
   age the ids never grow and never go below 0. Ids are compared as
   distances from the newest one, d = (uint32_t)(ref - id), which are
   exact: the stored items span fewer than 2^31 trajectories. */
typedef struct peri_tcheck {
  uint64_t trajs, oldest_ok; /* the largest d allowed */
  uint32_t ref, prev, n;
  int bad;
} peri_tcheck;

static void peri_tcheck_feed(peri_tcheck *c, uint32_t id) {
  uint32_t d;
  if (c->n++ == 0) {
    /* the newest's distance from trajs - 1 */
    uint32_t off = (uint32_t)(c->trajs - 1) - id;
    if (c->trajs == 0 || off > c->trajs - 1 || off >= 0x80000000u) c->bad = 1;
    c->ref = id;
    c->oldest_ok = c->trajs - 1 - off;
    if (c->oldest_ok > 0x7fffffffu) c->oldest_ok = 0x7fffffffu;
    return;
  }
  d = c->ref - id;
  if (d < c->prev || d > c->oldest_ok) c->bad = 1;
  c->prev = d;
}

/* ---- init ---- */

/* `bytes` from PER_MALLOC, zeroed; NULL when memory ran out. */
static void *peri_zalloc(size_t bytes, void *ctx) {
  void *p = PER_MALLOC(bytes, ctx);
  if (p) memset(p, 0, bytes);
  return p;
}

/* b's per-slot arrays for b->cfg: the item ring (the caller's `items`,
   as they are, or allocated and zeroed), the generations, episode ends
   and trajectory ids (zeroed), and the sum tree. */
static per_status peri_init_slots(per_buffer *b, void *items,
                                  size_t items_bytes) {
  uint32_t cap = b->cfg.capacity;
  size_t bytes = (size_t)cap * b->cfg.item_size;
  void *ctx = b->alloc_ctx;
  if (items) {
    if (items_bytes < bytes) return PER_ERR_MEMORY;
    b->items = (unsigned char *)items;
  } else {
    b->items = (unsigned char *)peri_zalloc(bytes, ctx);
    if (!b->items) return PER_ERR_NOMEM;
    b->own_items = 1;
  }
  b->gen = (uint32_t *)peri_zalloc((size_t)cap * sizeof(uint32_t), ctx);
  if (!b->gen) return PER_ERR_NOMEM;
  b->ends = (uint8_t *)peri_zalloc(cap, ctx);
  if (!b->ends) return PER_ERR_NOMEM;
  b->traj = (uint32_t *)peri_zalloc((size_t)cap * sizeof(uint32_t), ctx);
  if (!b->traj) return PER_ERR_NOMEM;
  return per_tree_init(&b->tree, cap, ctx);
}

/* The trees beside the sum tree: its min tree (PER_WEIGHTS_BUFFER_MAX),
   and with seq_len the sequence tree, its validity flags and its min
   tree. */
static per_status peri_init_trees(per_buffer *b) {
  const per_config *c = &b->cfg;
  void *ctx = b->alloc_ctx;
  uint32_t ns;
  per_status s;
  if (c->flags & PER_WEIGHTS_BUFFER_MAX) {
    b->min_node = (per_real *)PER_MALLOC(per_tree_bytes(c->capacity), ctx);
    if (!b->min_node) return PER_ERR_NOMEM;
    peri_min_build(b->min_node, &b->tree);
  }
  if (c->flags & PER_MAX_LIVE) {
    b->max_node = (per_real *)PER_MALLOC(per_tree_bytes(c->capacity), ctx);
    if (!b->max_node) return PER_ERR_NOMEM;
    peri_max_build(b->max_node, &b->tree);
  }
  if (c->seq_len == 0) return PER_OK;
  ns = c->capacity / c->seq_stride;
  s = per_tree_init(&b->seq_tree, ns, ctx);
  if (s != PER_OK) return s;
  b->seq_ok = (uint8_t *)peri_zalloc(ns, ctx);
  if (!b->seq_ok) return PER_ERR_NOMEM;
  if (c->flags & PER_WEIGHTS_BUFFER_MAX) {
    b->seq_min_node = (per_real *)PER_MALLOC(per_tree_bytes(ns), ctx);
    if (!b->seq_min_node) return PER_ERR_NOMEM;
    peri_min_build(b->seq_min_node, &b->seq_tree);
  }
  return PER_OK;
}

/* The samplers' workspaces: the swap sampler (alpha = 0), the unique
   draws' workspace and scratch. */
static per_status peri_init_samplers(per_buffer *b) {
  const per_config *c = &b->cfg;
  void *ctx = b->alloc_ctx;
  per_status s;
  if (c->alpha == 0) {
    s = per_swap_init(&b->swap, c->capacity, ctx);
    if (s != PER_OK) return s;
  }
  s = per_cat_init(&b->cat, c->max_unique, ctx);
  if (s != PER_OK) return s;
  b->scratch_idx =
      (uint32_t *)PER_MALLOC((size_t)c->max_unique * sizeof(uint32_t), ctx);
  if (!b->scratch_idx) return PER_ERR_NOMEM;
  b->scratch_val =
      (per_real *)PER_MALLOC((size_t)c->max_unique * sizeof(per_real), ctx);
  if (!b->scratch_val) return PER_ERR_NOMEM;
  return PER_OK;
}

/* per_buffer_init (items == NULL: allocated and zeroed) and
   per_buffer_init_mem (the caller's items, as they are): validate, then
   allocate slots, trees and samplers in that order; on error everything
   is freed and *b zeroed. */
static per_status peri_buffer_init(per_buffer *b, const per_config *cfg,
                                   void *items, size_t items_bytes,
                                   void *alloc_ctx) {
  per_status s;
  peri_msg m;
  if (!b) return PER_ERR_NULL;
  memset(b, 0, sizeof *b);
  m = peri_buf_msg(b);
  if (!cfg) return peri_buf_fail(b, PER_ERR_NULL, "cfg is NULL");
  s = peri_config_check(cfg, &m);
  if (s != PER_OK) return s;
  if (items && items_bytes / cfg->item_size < cfg->capacity) {
    peri_msg_nu(&m, "bytes", items_bytes);
    peri_msg_nu(&m, " < capacity", cfg->capacity);
    peri_msg_nu(&m, " * item_size", cfg->item_size);
    return PER_ERR_MEMORY;
  }
  b->alloc_ctx = alloc_ctx;
  b->cfg = *cfg;
  s = peri_init_slots(b, items, items_bytes);
  if (s == PER_OK) s = peri_init_trees(b);
  if (s == PER_OK) s = peri_init_samplers(b);
  if (s != PER_OK) {
    per_buffer_free(b);
    return peri_buf_end(b, s);
  }
  per_rng_init(&b->rng, b->cfg.seed);
  b->max_leaf = b->cfg.alpha == 0 ? (per_real)1 : (per_real)b->cfg.max_priority;
  return PER_OK;
}

PERDEF per_status per_buffer_init(per_buffer *b, const per_config *cfg,
                                  void *alloc_ctx) {
  return peri_buffer_init(b, cfg, NULL, 0, alloc_ctx);
}

PERDEF per_status per_buffer_init_mem(per_buffer *b, const per_config *cfg,
                                      void *items, size_t bytes,
                                      void *alloc_ctx) {
  if (b && !items) {
    memset(b, 0, sizeof *b);
    return peri_buf_fail(b, PER_ERR_NULL, "items is NULL");
  }
  return peri_buffer_init(b, cfg, items, bytes, alloc_ctx);
}

PERDEF void per_buffer_free(per_buffer *b) {
  if (!b) return;
  if (b->items && b->own_items) PER_FREE(b->items, b->alloc_ctx);
  if (b->gen) PER_FREE(b->gen, b->alloc_ctx);
  if (b->ends) PER_FREE(b->ends, b->alloc_ctx);
  if (b->traj) PER_FREE(b->traj, b->alloc_ctx);
  per_tree_free(&b->tree);
  if (b->min_node) PER_FREE(b->min_node, b->alloc_ctx);
  if (b->max_node) PER_FREE(b->max_node, b->alloc_ctx);
  per_tree_free(&b->seq_tree);
  if (b->seq_min_node) PER_FREE(b->seq_min_node, b->alloc_ctx);
  if (b->seq_ok) PER_FREE(b->seq_ok, b->alloc_ctx);
  per_swap_free(&b->swap);
  per_cat_free(&b->cat);
  if (b->scratch_idx) PER_FREE(b->scratch_idx, b->alloc_ctx);
  if (b->scratch_val) PER_FREE(b->scratch_val, b->alloc_ctx);
  memset(b, 0, sizeof *b);
}

PERDEF uint32_t per_buffer_size(const per_buffer *b) { return b ? b->size : 0; }

PERDEF per_status per_buffer_set_layout(per_buffer *b, const char *layout) {
  size_t n;
  if (!b) return PER_ERR_NULL;
  b->error[0] = 0;
  if (!layout) return peri_buf_fail(b, PER_ERR_NULL, "layout is NULL");
  n = strlen(layout);
  if (n >= PER_LAYOUT_MAX) {
    peri_msg m = peri_buf_msg(b);
    peri_msg_nu(&m, "layout has", n);
    peri_msg_nu(&m, " chars, at most", PER_LAYOUT_MAX - 1);
    return PER_ERR_ARG;
  }
  memcpy(b->layout, layout, n + 1);
  return PER_OK;
}

PERDEF double per_buffer_beta(const per_buffer *b) {
  if (!b) return 0;
  return peri_beta_at(&b->cfg, b->step);
}

/* " is N, not PER_END_NONE, PER_END_TERMINATED or PER_END_TRUNCATED" */
static void peri_msg_bad_end(peri_msg *m, uint8_t end) {
  peri_msg_nu(m, " is", end);
  peri_msg_s(m, ", not PER_END_NONE, PER_END_TERMINATED or PER_END_TRUNCATED");
}

/* m (may be NULL) += "NAME[j] is NaN" or "is infinite" for status s. */
static void peri_msg_bad_td(peri_msg *m, const char *name, uint64_t j,
                            per_status s) {
  peri_msg_at(m, name, j);
  if (m) peri_msg_s(m, s == PER_ERR_NAN ? " is NaN" : " is infinite");
}

PERDEF per_status per_buffer_add(per_buffer *b, const void *item) {
  if (b && b->items && !item) {
    b->error[0] = 0;
    return peri_buf_fail(b, PER_ERR_NULL, "item is NULL");
  }
  return per_buffer_add_steps(b, item, 1, NULL);
}

PERDEF per_status per_buffer_add_batch(per_buffer *b, const void *items,
                                       uint32_t n) {
  return per_buffer_add_steps(b, items, n, NULL);
}

PERDEF per_status per_buffer_add_step(per_buffer *b, const void *item,
                                      uint8_t end) {
  if (b && b->items && !item) {
    b->error[0] = 0;
    return peri_buf_fail(b, PER_ERR_NULL, "item is NULL");
  }
  if (b && b->items && end > PER_END_TRUNCATED) {
    peri_msg m = peri_buf_msg(b);
    peri_msg_s(&m, "end");
    peri_msg_bad_end(&m, end);
    return PER_ERR_ARG;
  }
  return per_buffer_add_steps(b, item, 1, &end);
}

/* per_buffer_add_steps and per_buffer_add_td: td NULL gives every item
   max_leaf. */
static per_status peri_add(per_buffer *b, const void *items, uint32_t n,
                           const uint8_t *ends, const float *td, int want_td) {
  uint32_t cap, keep, first, t;
  per_real val[PERI_CHUNK];
  size_t isz;
  const unsigned char *src;
  if (!b) return PER_ERR_NULL;
  b->error[0] = 0;
  if (!b->items) return peri_buf_fail(b, PER_ERR_NULL, "b is not initialised");
  if (n == 0) return PER_OK;
  if (!items) return peri_buf_fail(b, PER_ERR_NULL, "items is NULL");
  if (want_td && !td) return peri_buf_fail(b, PER_ERR_NULL, "td is NULL");
  for (t = 0; td && t < n; ++t) {
    per_status s = peri_float_status(td[t]);
    if (s != PER_OK) {
      peri_msg m = peri_buf_msg(b);
      peri_msg_bad_td(&m, "td", t, s);
      return s;
    }
  }
  if (ends) {
    for (t = 0; t < n; ++t) {
      if (ends[t] > PER_END_TRUNCATED) {
        peri_msg m = peri_buf_msg(b);
        peri_msg_at(&m, "ends", t);
        peri_msg_bad_end(&m, ends[t]);
        return PER_ERR_ARG;
      }
    }
  }
  cap = b->cfg.capacity;
  isz = b->cfg.item_size;
  /* earlier items of the call are overwritten by it */
  keep = n < cap ? n : cap;
  /* generations: every write to a slot counts */
  if (n >= cap) {
    uint32_t s;
    for (s = 0; s < cap; ++s) {
      uint32_t age = (uint32_t)(((uint64_t)s + cap - b->pos) % cap);
      b->gen[s] = peri_gen_add(b->gen[s], peri_add_writes(age, n, cap));
    }
  } else {
    for (t = 0; t < n; ++t) {
      uint32_t s = (uint32_t)(((uint64_t)b->pos + t) % cap);
      b->gen[s] = peri_gen_add(b->gen[s], 1);
    }
  }
  first = (uint32_t)(((uint64_t)b->pos + (n - keep)) % cap);
  src = (const unsigned char *)items + (size_t)(n - keep) * isz;
  if (first + (uint64_t)keep <= cap) {
    memcpy(b->items + (size_t)first * isz, src, (size_t)keep * isz);
  } else {
    uint32_t a = cap - first;
    memcpy(b->items + (size_t)first * isz, src, (size_t)a * isz);
    memcpy(b->items, src + (size_t)a * isz, (size_t)(keep - a) * isz);
  }
  for (t = 0; t < keep; ++t) /* one trajectory: the call's items */
    b->traj[((uint64_t)first + t) % cap] = (uint32_t)b->trajs;
  b->trajs += 1;
  t = cap - first < keep ? cap - first : keep; /* the ends, in the same runs */
  if (ends) {
    memcpy(b->ends + first, ends + (n - keep), t);
    memcpy(b->ends, ends + (n - keep) + t, keep - t);
  } else {
    memset(b->ends + first, 0, t);
    memset(b->ends, 0, keep - t);
  }
  /* the kept slots are one or two contiguous runs (the ring may wrap) */
  for (t = 0; t < PERI_CHUNK; ++t) val[t] = b->max_leaf;
  for (t = 0; t < keep;) {
    uint32_t s = (uint32_t)(((uint64_t)first + t) % cap);
    uint32_t m = keep - t;
    if (m > cap - s) m = cap - s;
    if (m > PERI_CHUNK) m = PERI_CHUNK;
    if (td)
      peri_priorities(td + (n - keep + t), m, b->cfg.eps, b->cfg.alpha, val);
    peri_set_run(b, s, val, m);
    t += m;
  }
  b->pos = (uint32_t)(((uint64_t)b->pos + n) % cap);
  b->size = (uint64_t)b->size + n >= cap ? cap : b->size + n;
  b->added += n;
  if (b->swap.perm) {
    per_status s = per_swap_grow(&b->swap, b->size);
    PER_ASSERT(s == PER_OK);
    (void)s;
  }
  peri_seq_touch(b, first, keep);
  return PER_OK;
}

PERDEF per_status per_buffer_add_steps(per_buffer *b, const void *items,
                                       uint32_t n, const uint8_t *ends) {
  return peri_add(b, items, n, ends, NULL, 0);
}

PERDEF per_status per_buffer_add_td(per_buffer *b, const void *items,
                                    uint32_t n, const uint8_t *ends,
                                    const float *td) {
  return peri_add(b, items, n, ends, td, 1);
}

/* ---- sampling: plan, draw, emit ----
   A call is planned (validated; the eligible leaves, their mass and the
   degenerate case found), then one draw function per mode puts the
   batch's leaves and their values in scratch, and one emit pass writes
   items, ids, weights and the mask. A new mode is a draw function and a
   flag. */

/* The tree a plan draws from. */
static per_tree *peri_plan_tree(per_buffer *b, const peri_plan *p) {
  return p->seq ? &b->seq_tree : &b->tree;
}

/* Eligible leaves with positive value. */
static uint32_t peri_count_positive(const peri_plan *p) {
  uint32_t q, j, n = 0;
  for (q = 0; q < p->nr; ++q)
    for (j = p->lo[q]; j < p->hi[q]; ++j) n += p->node[p->L + j] > 0;
  return n;
}

/* m += "PER_SAMPLE_UNIQUE: batch size B N > K WHAT" */
static void peri_msg_too_few(peri_msg *m, uint32_t B, uint32_t k,
                             const char *what) {
  peri_msg_nu(m, "PER_SAMPLE_UNIQUE: batch size B", B);
  peri_msg_nu(m, " >", k);
  peri_msg_s(m, what);
}

/* Validate the call and find what it draws from. PER_OK: the call
   succeeds from here on; otherwise nothing was changed. */
static per_status peri_plan_sample(per_buffer *b, uint32_t B,
                                   const per_sample_opts *opts, peri_plan *p) {
  uint32_t flags = opts ? opts->flags : 0;
  double beta;
  peri_plan_src v;
  peri_msg m;
  if (!b->items) return peri_buf_fail(b, PER_ERR_NULL, "b is not initialised");
  m = peri_buf_msg(b);
  if (flags & ~(uint32_t)PERI_SAMPLE_FLAGS) {
    peri_msg_nu(&m, "opts->flags", flags);
    peri_msg_s(&m, " has bits that are no PER_SAMPLE_* flag");
    return PER_ERR_ARG;
  }
  if (flags & PER_SAMPLE_BETA) {
    beta = opts->beta;
    if (peri_check_real(&m, "opts->beta", beta, 0) != PER_OK)
      return PER_ERR_ARG;
  } else if (opts && opts->beta != 0) {
    return peri_buf_fail(b, PER_ERR_ARG,
                         "opts->beta is set but PER_SAMPLE_BETA is not in "
                         "opts->flags (the schedule's beta would be used)");
  } else {
    beta = per_buffer_beta(b);
  }
  if ((flags & PER_SAMPLE_SEQUENCES) && !b->seq_ok)
    return peri_buf_fail(b, PER_ERR_ARG,
                         "PER_SAMPLE_SEQUENCES on a buffer without sequences "
                         "(config seq_len 0)");
  if (B == 0) return peri_buf_fail(b, PER_ERR_BATCH, "batch size B is 0");
  if ((flags & PER_SAMPLE_UNIQUE) && B > b->cfg.max_unique) {
    peri_msg_nu(&m, "PER_SAMPLE_UNIQUE: batch size B", B);
    peri_msg_nu(&m, " > config max_unique", b->cfg.max_unique);
    return PER_ERR_BATCH;
  }
  if (b->size == 0)
    return peri_buf_fail(b, PER_ERR_EMPTY, "the buffer is empty: add first");
  memset(&v, 0, sizeof v);
  v.node = b->tree.node;
  v.L = b->tree.leaves;
  v.traj = b->traj;
  v.cap = b->cfg.capacity;
  v.pos = b->pos;
  v.size = b->size;
  if (b->cfg.flags & PER_WEIGHTS_BUFFER_MAX) {
    v.min_node = b->min_node;
    v.seq_min_node = b->seq_min_node;
  }
  if (b->seq_ok) {
    v.seq_node = b->seq_tree.node;
    v.seq_L = b->seq_tree.leaves;
    v.seq_n = b->seq_tree.capacity;
    v.seq_ok = b->seq_ok;
    v.seq_len = b->cfg.seq_len;
    v.seq_stride = b->cfg.seq_stride;
  }
  peri_plan_of(&v, flags, opts ? opts->window : 0, B, beta, p);
  if (p->unique && !p->seq && B > p->W) {
    peri_msg_too_few(&m, B, p->W, " eligible items");
    return PER_ERR_TOO_FEW;
  }
  if (p->degenerate && p->seq) { /* uniform over the valid ones */
    p->nvalid = peri_plan_count_valid(p, b->seq_ok);
    if (p->nvalid == 0)
      return peri_buf_fail(b, PER_ERR_TOO_FEW,
                           "no eligible sequence is complete (each has a "
                           "step not stored, overwritten or after an "
                           "episode's end)");
    if (p->unique && B > p->nvalid) {
      peri_msg_too_few(&m, B, p->nvalid, " complete eligible sequences");
      return PER_ERR_TOO_FEW;
    }
  }
  /* with sequences, invalid ones are 0: a positive leaf is a valid one */
  if (p->unique && !p->degenerate && (b->zero_hint || p->seq)) {
    uint32_t n = peri_count_positive(p);
    if (n < B) {
      peri_msg_too_few(&m, B, n,
                       p->seq ? " complete eligible sequences with priority > 0"
                              : " eligible items with priority > 0");
      return PER_ERR_TOO_FEW;
    }
  }
  if (p->unique) {
    p->mode = PERI_DRAW_PICKED;
  } else if (p->degenerate) {
    p->mode = PERI_DRAW_UNIFORM;
  } else {
    p->mode = PERI_DRAW_STRATA;
  }
  return PER_OK;
}

/* ---- draw functions ---- */

/* PERI_DRAW_PICKED: the whole batch into scratch_idx, before any output.
   On error the rng is as it was. */
static per_status peri_draw_picked(per_buffer *b, const peri_plan *p) {
  per_rng saved = b->rng;
  per_status s = PER_OK;
  if (p->degenerate) {
    uint32_t j, *idx = b->scratch_idx;
    peri_plan_floyd(p, &b->rng, b->cat.table, idx);
    for (j = 0; j < p->B; ++j)
      idx[j] = peri_plan_uniform_leaf(p, b->seq_ok, b->cfg.capacity, idx[j]);
  } else if (p->whole && !p->seq && b->swap.perm) {
    s = per_swap_sample(&b->swap, &b->rng, p->B, b->scratch_idx);
  } else if (p->whole) {
    s = per_cat_sample(&b->cat, peri_plan_tree(b, p), &b->rng, p->B,
                       b->scratch_idx, NULL);
  } else {
    s = peri_plan_window_picks(p, &b->rng, peri_plan_tree(b, p)->node,
                               b->scratch_idx, b->scratch_val);
  }
  if (s != PER_OK) b->rng = saved; /* excluded by the plan; kept anyway */
  return s;
}

/* Units [base, base + m) of the batch: their leaves in idx, values in val. */
static void peri_draw_chunk(per_buffer *b, const peri_plan *p, uint32_t base,
                            uint32_t m, uint32_t *idx, per_real *val) {
  const per_real *node = p->node;
  uint32_t g, L = p->L;
  if (p->mode == PERI_DRAW_STRATA && p->whole) {
    per_status s =
        per_tree_sample_strata(peri_plan_tree(b, p), b->rng.seed,
                               b->rng.counter, p->B, base, m, idx, val);
    PER_ASSERT(s == PER_OK);
    (void)s;
    return;
  }
  for (g = 0; g < m; ++g) {
    if (p->mode == PERI_DRAW_STRATA) {
      per_real u =
          per_tree_stratum_u(b->rng.seed, b->rng.counter, base + g, p->seg);
      idx[g] = peri_cover_find(&p->cov, node, L, u);
    } else if (p->mode == PERI_DRAW_UNIFORM) {
      idx[g] = peri_plan_uniform_leaf(p, b->seq_ok, b->cfg.capacity,
                                      per_rng_below(&b->rng, p->nvalid));
    } else {
      idx[g] = b->scratch_idx[base + g];
    }
    val[g] = node[L + idx[g]];
  }
}

/* ---- emit ---- */

/* The stream after a batch of B strata, which read blocks counter ..
   counter + B - 1 (per_tree_stratum_u): the next call starts at a fresh
   block. */
static void peri_rng_skip(per_rng *r, uint32_t B) {
  r->counter += B;
  r->avail = 0;
}

/* Unit i of the batch, leaf `leaf`: its steps into items_out, its id, its
   mask. */
static void peri_emit_unit(const per_buffer *b, const peri_plan *p, uint32_t i,
                           uint32_t leaf, void *items_out, uint64_t *ids,
                           uint8_t *mask) {
  size_t isz = b->cfg.item_size;
  uint32_t cap = b->cfg.capacity, slot = leaf * p->stride, n = p->unit, t;
  if (items_out) {
    unsigned char *dst = (unsigned char *)items_out + (size_t)i * n * isz;
    uint32_t a = cap - slot < n ? cap - slot : n;
    memcpy(dst, b->items + (size_t)slot * isz, (size_t)a * isz);
    if (a < n) memcpy(dst + (size_t)a * isz, b->items, (size_t)(n - a) * isz);
  }
  if (ids)
    ids[i] = (uint64_t)slot | ((uint64_t)b->gen[slot] << 32) |
             (p->seq ? PER_ID_SEQ : 0);
  if (mask) {
    uint8_t live = 1;
    for (t = 0; t < n; ++t) {
      uint32_t s = (uint32_t)(((uint64_t)slot + t) % cap);
      mask[(size_t)i * n + t] = live;
      if (b->ends[s]) live = 0;
    }
  }
}

/* The emit pass: every unit's outputs, chunk by chunk, and the weights
   (with batch-max weights, once the batch minimum is known: a second
   pass over the values, from the ids or by drawing the same strata). */
static void peri_emit_batch(per_buffer *b, const peri_plan *p, void *items_out,
                            uint64_t *ids, float *weights, uint8_t *mask) {
  uint32_t idx[PERI_CHUNK], base, g, B = p->B, L = p->L;
  per_real val[PERI_CHUNK];
  per_real pmin = p->pmin;
  int now = weights && (p->degenerate || p->bufmax); /* final in pass 1 */
  /* One chunk with batch-min weights: the weights from its values first,
     while the gathers' prefetches below are in flight. */
  int one = weights && !now && B <= PERI_CHUNK;
  for (base = 0; base < B; base += PERI_CHUNK) {
    uint32_t m = B - base < PERI_CHUNK ? B - base : PERI_CHUNK;
    peri_draw_chunk(b, p, base, m, idx, val);
    if (items_out) /* overlap the gather's cache misses */
      for (g = 0; g < m; ++g)
        PERI_PREFETCH(b->items + (size_t)idx[g] * p->stride * b->cfg.item_size);
    if (ids) /* and the generations' */
      for (g = 0; g < m; ++g) PERI_PREFETCH(&b->gen[idx[g] * p->stride]);
    if (one) {
      for (g = 0; g < m; ++g)
        if (val[g] < pmin) pmin = val[g];
      peri_weights(val, m, pmin, p->beta, weights);
    }
    for (g = 0; g < m; ++g) {
      peri_emit_unit(b, p, base + g, idx[g], items_out, ids, mask);
      if (!now && !one && val[g] < pmin) pmin = val[g];
    }
    if (now && p->degenerate) {
      for (g = 0; g < m; ++g) weights[base + g] = 1.0f;
    } else if (now) {
      peri_weights(val, m, pmin, p->beta, weights + base);
    }
  }
  if (weights && !now && !one) {
    for (base = 0; base < B; base += PERI_CHUNK) {
      uint32_t m = B - base < PERI_CHUNK ? B - base : PERI_CHUNK;
      if (ids) {
        for (g = 0; g < m; ++g)
          val[g] =
              p->node[L + ((uint32_t)ids[base + g] & ~(uint32_t)PER_ID_SEQ) /
                              p->stride];
      } else {
        peri_draw_chunk(b, p, base, m, idx, val);
      }
      peri_weights(val, m, pmin, p->beta, weights + base);
    }
  }
  if (p->mode == PERI_DRAW_STRATA) peri_rng_skip(&b->rng, B);
}

PERDEF per_status per_buffer_sample(per_buffer *b, uint32_t B,
                                    const per_sample_opts *opts,
                                    void *items_out, uint64_t *ids,
                                    float *weights) {
  peri_plan p;
  per_status s;
  if (!b) return PER_ERR_NULL;
  b->error[0] = 0;
  s = peri_plan_sample(b, B, opts, &p);
  if (s == PER_OK && p.mode == PERI_DRAW_PICKED) s = peri_draw_picked(b, &p);
  if (s != PER_OK) return peri_buf_end(b, s);
  peri_emit_batch(b, &p, items_out, ids, weights, p.seq ? opts->mask : NULL);
  b->step += 1;
  return PER_OK;
}

/* peri_id_status_of, reading the slot's generation from gen. */
static PER_HD per_status peri_id_status(uint64_t id, uint32_t cap,
                                        uint32_t stride, const uint32_t *gen,
                                        uint64_t added) {
  return peri_id_status_of(id, cap, stride,
                           (uint32_t)id < cap ? gen[(uint32_t)id] : 0u, added);
}

static per_status peri_id_check(const per_buffer *b, uint64_t id,
                                uint32_t stride) {
  return peri_id_status(id, b->cfg.capacity, stride, b->gen, b->added);
}

/* m (may be NULL) += why id (ids[j]) is not one sample handed out:
   "ids[j] (slot S, generation G): REASON". */
static void peri_msg_bad_id(peri_msg *m, const per_buffer *b, uint32_t j,
                            uint64_t id, uint32_t stride) {
  uint32_t slot = (uint32_t)id, g = (uint32_t)(id >> 32);
  if (!m) return;
  peri_msg_at(m, "ids", j);
  peri_msg_nu(m, " (slot", slot);
  peri_msg_nu(m, ", generation", g);
  peri_msg_s(m, ") was never handed out by per_buffer_sample: ");
  if (slot >= b->cfg.capacity) {
    peri_msg_nu(m, "slot >= capacity", b->cfg.capacity);
  } else if (slot % stride != 0) {
    peri_msg_nu(m, "slot is not a multiple of seq_stride", stride);
  } else if (g == 0) {
    peri_msg_s(m, "generation 0");
  } else {
    peri_msg_nu(m, "the slot's generation is", b->gen[slot]);
  }
}

/* per_buffer_update's validation of the whole batch; on a refusal, m (may
   be NULL) says which entry and why. */
static per_status peri_update_valid(const per_buffer *b, const uint64_t *ids,
                                    const float *td, uint32_t n, peri_msg *m) {
  uint32_t j;
  if (!b || !b->items) {
    if (m) peri_msg_s(m, "b is not initialised");
    return PER_ERR_NULL;
  }
  if (n > 0 && (!ids || !td)) {
    if (m) peri_msg_s(m, ids ? "td is NULL" : "ids is NULL");
    return PER_ERR_NULL;
  }
  for (j = 0; j < n; ++j) {
    per_status s = peri_float_status(td[j]);
    if (s != PER_OK) {
      peri_msg_bad_td(m, "td", j, s);
      return s;
    }
    if (ids[j] & PER_ID_SEQ) {
      peri_msg_at(m, "ids", j);
      if (m)
        peri_msg_s(m, " is a sequence's id (PER_SAMPLE_SEQUENCES): "
                      "per_buffer_update_seq updates its steps");
      return PER_ERR_ARG;
    }
    s = peri_id_check(b, ids[j], 1);
    if (s != PER_OK) {
      peri_msg_bad_id(m, b, j, ids[j], 1);
      return s;
    }
  }
  return PER_OK;
}

PERDEF per_status per_buffer_update_check(const per_buffer *b,
                                          const uint64_t *ids, const float *td,
                                          uint32_t n, uint32_t *stale,
                                          per_real *max_leaf) {
  uint32_t j, nstale = 0;
  per_real mx;
  per_status s = peri_update_valid(b, ids, td, n, NULL);
  if (s != PER_OK) return s;
  if (max_leaf && b->max_node) return PER_ERR_ARG; /* PER_MAX_LIVE */
  mx = b->max_leaf;
  for (j = 0; j < n; ++j) {
    if ((uint32_t)(ids[j] >> 32) != b->gen[(uint32_t)ids[j]]) {
      ++nstale;
    } else if (max_leaf) {
      per_real v = peri_priority(td[j], b->cfg.eps, b->cfg.alpha);
      if (v > mx) mx = v;
    }
  }
  if (stale) *stale = nstale;
  if (max_leaf) *max_leaf = mx;
  return PER_OK;
}

PERDEF float per_is_weight(per_real p, per_real pmin, double beta) {
  return peri_weight(p, pmin, beta);
}

PERDEF per_status per_buffer_update(per_buffer *b, const uint64_t *ids,
                                    const float *td, uint32_t n,
                                    uint32_t *stale) {
  uint32_t j, nstale = 0, m = 0, idx[PERI_CHUNK];
  float tdc[PERI_CHUNK];
  per_real val[PERI_CHUNK];
  per_status s;
  peri_msg msg;
  if (!b) return PER_ERR_NULL;
  msg = peri_buf_msg(b);
  s = peri_update_valid(b, ids, td, n, &msg);
  if (s != PER_OK) return s;
  for (j = 0; j < n; ++j) {
    uint32_t slot = (uint32_t)ids[j], g = (uint32_t)(ids[j] >> 32);
    if (g != b->gen[slot]) {
      ++nstale;
      continue;
    }
    idx[m] = slot;
    tdc[m] = td[j];
    if (++m == PERI_CHUNK) {
      peri_priorities(tdc, m, b->cfg.eps, b->cfg.alpha, val);
      peri_set_leaves(b, idx, val, m);
      m = 0;
    }
  }
  if (m > 0) {
    peri_priorities(tdc, m, b->cfg.eps, b->cfg.alpha, val);
    peri_set_leaves(b, idx, val, m);
  }
  if (b->seq_ok) /* the sequences holding a changed step */
    for (j = 0; j < n; ++j)
      if ((uint32_t)(ids[j] >> 32) == b->gen[(uint32_t)ids[j]])
        peri_seq_touch(b, (uint32_t)ids[j], 1);
  if (stale) *stale = nstale;
  return PER_OK;
}

PERDEF per_status per_buffer_update_seq(per_buffer *b, const uint64_t *ids,
                                        const float *td, uint32_t n,
                                        uint32_t *stale) {
  uint32_t j, t, nstale = 0, m = 0, cap, len, idx[PERI_CHUNK];
  float tdc[PERI_CHUNK];
  per_real val[PERI_CHUNK];
  double v;
  peri_msg msg;
  if (!b) return PER_ERR_NULL;
  msg = peri_buf_msg(b);
  if (!b->items) return peri_buf_fail(b, PER_ERR_NULL, "b is not initialised");
  if (!b->seq_ok)
    return peri_buf_fail(b, PER_ERR_ARG,
                         "a buffer without sequences (config seq_len 0)");
  if (n > 0 && (!ids || !td))
    return peri_buf_fail(b, PER_ERR_NULL, ids ? "td is NULL" : "ids is NULL");
  cap = b->cfg.capacity;
  len = b->cfg.seq_len;
  for (j = 0; j < n; ++j) { /* the whole batch first */
    uint64_t id = ids[j] & ~PER_ID_SEQ;
    uint32_t slot = (uint32_t)id;
    per_status s = peri_id_check(b, id, b->cfg.seq_stride);
    if (s != PER_OK) {
      peri_msg_bad_id(&msg, b, j, id, b->cfg.seq_stride);
      return s;
    }
    for (t = 0; t < len; ++t) {
      s = peri_float_status(td[(size_t)j * len + t]);
      if (s != PER_OK) {
        peri_msg_bad_td(&msg, "td", (uint64_t)j * len + t, s);
        return s;
      }
    }
    if ((uint32_t)(id >> 32) == b->gen[slot] &&
        !b->seq_ok[slot / b->cfg.seq_stride]) {
      /* current, but never a valid sequence */
      peri_msg_at(&msg, "ids", j);
      peri_msg_nu(&msg, " (slot", slot);
      peri_msg_s(&msg, ") is no sequence per_buffer_sample handed out");
      return PER_ERR_INDEX;
    }
  }
  for (j = 0; j < n; ++j) {
    uint32_t slot = (uint32_t)ids[j] & ~(uint32_t)PER_ID_SEQ, steps;
    if ((uint32_t)(ids[j] >> 32) != b->gen[slot]) {
      ++nstale;
      continue;
    }
    steps = peri_seq_steps(b, slot, &v);
    for (t = 0; t < steps; ++t) {
      idx[m] = (uint32_t)(((uint64_t)slot + t) % cap);
      tdc[m] = td[(size_t)j * len + t];
      if (++m == PERI_CHUNK) {
        peri_priorities(tdc, m, b->cfg.eps, b->cfg.alpha, val);
        peri_set_leaves(b, idx, val, m);
        m = 0;
      }
    }
  }
  if (m > 0) {
    peri_priorities(tdc, m, b->cfg.eps, b->cfg.alpha, val);
    peri_set_leaves(b, idx, val, m);
  }
  for (j = 0; j < n; ++j) {
    uint32_t slot = (uint32_t)ids[j] & ~(uint32_t)PER_ID_SEQ;
    if ((uint32_t)(ids[j] >> 32) == b->gen[slot]) peri_seq_touch(b, slot, len);
  }
  if (stale) *stale = nstale;
  return PER_OK;
}

/* ---- for layers over several buffers (per_mpi.h) ---- */

PERDEF per_buffer_shared per_buffer_shared_of(const per_buffer *b) {
  per_buffer_shared s;
  memset(&s, 0, sizeof s);
  if (!b) return s;
  s.rng = b->rng;
  s.step = b->step;
  s.alpha = b->cfg.alpha;
  s.beta0 = b->cfg.beta0;
  s.beta1 = b->cfg.beta1;
  s.eps = b->cfg.eps;
  s.max_priority = b->cfg.max_priority;
  s.beta_steps = b->cfg.beta_steps;
  s.seed = b->cfg.seed;
  s.max_leaf = b->max_leaf;
  return s;
}

PERDEF per_status per_buffer_set_shared(per_buffer *b,
                                        const per_buffer_shared *s) {
  per_config c;
  uint32_t i, L;
  peri_msg m;
  if (!b) return PER_ERR_NULL;
  m = peri_buf_msg(b);
  if (!b->items) return peri_buf_fail(b, PER_ERR_NULL, "b is not initialised");
  if (!s) return peri_buf_fail(b, PER_ERR_NULL, "s is NULL");
  c = b->cfg;
  c.alpha = s->alpha;
  c.beta0 = s->beta0;
  c.beta1 = s->beta1;
  c.eps = s->eps;
  c.max_priority = s->max_priority;
  c.beta_steps = s->beta_steps;
  c.seed = s->seed;
  if (peri_config_check(&c, &m) != PER_OK) return PER_ERR_ARG;
  if ((c.alpha == 0) != (b->cfg.alpha == 0))
    return peri_buf_fail(b, PER_ERR_ARG,
                         c.alpha == 0
                             ? "alpha 0 for a buffer whose alpha is not"
                             : "alpha not 0 for a buffer whose alpha is");
  if (s->rng.avail > 4 || s->rng.pad != 0)
    return peri_buf_fail(b, PER_ERR_ARG, "rng is not a per_rng state");
  if (b->max_node && s->max_leaf != b->max_leaf)
    return peri_buf_fail(b, PER_ERR_ARG,
                         "max_leaf differs from the largest stored leaf "
                         "(PER_MAX_LIVE)");
  if (per_leaf_status(s->max_leaf) != PER_OK || !(s->max_leaf > 0) ||
      (c.alpha == 0 && s->max_leaf != 1))
    return peri_buf_fail(b, PER_ERR_ARG,
                         c.alpha == 0 ? "max_leaf is not 1 (alpha is 0)"
                                      : "max_leaf is not a leaf value > 0");
  L = b->tree.leaves;
  for (i = 0; i < b->size; ++i) { /* filled slots: [0, size) */
    if (b->tree.node[L + i] > s->max_leaf) {
      peri_msg_nu(&m, "max_leaf is below the leaf of slot", i);
      return PER_ERR_ARG;
    }
  }
  b->cfg = c;
  b->rng = s->rng;
  b->step = s->step;
  b->max_leaf = s->max_leaf;
  if (b->max_node) peri_max_live(b); /* max_priority may count */
  return PER_OK;
}

PERDEF per_status per_buffer_advance_strata(per_buffer *b, uint32_t B) {
  if (!b) return PER_ERR_NULL;
  b->error[0] = 0;
  if (!b->items) return peri_buf_fail(b, PER_ERR_NULL, "b is not initialised");
  if (B == 0) return peri_buf_fail(b, PER_ERR_BATCH, "batch size B is 0");
  peri_rng_skip(&b->rng, B);
  b->step += 1;
  return PER_OK;
}

/* Uniform in [0, n), n >= 1: per_rng_below's draw when n < 2^32, else
   64 bits (the high word first) by rejection. */
static uint64_t peri_rng_below64(per_rng *r, uint64_t n) {
  uint64_t x, all = ~(uint64_t)0, lim;
  if (n <= 0xffffffffu) return peri_rng_below(r, (uint32_t)n);
  lim = all - all % n;
  do {
    x = (uint64_t)peri_rng_u32(r) << 32;
    x |= peri_rng_u32(r);
  } while (x >= lim);
  return x % n;
}

PERDEF per_status per_buffer_draw_uniform(per_buffer *b, uint64_t n, uint32_t B,
                                          uint64_t *pos) {
  uint32_t i;
  if (!b) return PER_ERR_NULL;
  b->error[0] = 0;
  if (!b->items) return peri_buf_fail(b, PER_ERR_NULL, "b is not initialised");
  if (!pos) return peri_buf_fail(b, PER_ERR_NULL, "pos is NULL");
  if (B == 0) return peri_buf_fail(b, PER_ERR_BATCH, "batch size B is 0");
  if (n == 0) return peri_buf_fail(b, PER_ERR_EMPTY, "n is 0: nothing to draw");
  for (i = 0; i < B; ++i) pos[i] = peri_rng_below64(&b->rng, n);
  b->step += 1;
  return PER_OK;
}

PERDEF per_status per_buffer_raise_max_leaf(per_buffer *b, per_real v) {
  per_status s;
  if (!b) return PER_ERR_NULL;
  b->error[0] = 0;
  if (!b->items) return peri_buf_fail(b, PER_ERR_NULL, "b is not initialised");
  s = per_leaf_status(v);
  if (s != PER_OK) return peri_buf_end(b, s);
  if (!(v > 0) || (b->cfg.alpha == 0 && v > 1))
    return peri_buf_fail(b, PER_ERR_ARG,
                         v > 0 ? "v > 1 while alpha is 0 (every leaf is 1)"
                               : "v is 0 (must be > 0)");
  if (b->max_node && v > b->max_leaf)
    return peri_buf_fail(b, PER_ERR_ARG,
                         "PER_MAX_LIVE: max_leaf is the largest stored leaf");
  if (v > b->max_leaf) b->max_leaf = v;
  return PER_OK;
}

PERDEF per_status per_buffer_count_evicted(per_buffer *b, uint64_t items,
                                           uint64_t trajs) {
  uint64_t all = ~(uint64_t)0;
  uint32_t i;
  if (!b || !b->items) return PER_ERR_NULL;
  if (trajs > items || items > all - b->added || trajs > all - b->trajs)
    return PER_ERR_ARG;
  b->added += items;
  b->trajs += trajs;
  for (i = 0; i < b->size; ++i) b->traj[i] += (uint32_t)trajs;
  return PER_OK;
}

/* A min tree m over t: each leaf the positive leaf of t (PERI_NO_MIN for
   none), each node the min of its children. */
static int peri_min_ok(const per_real *m, const per_tree *t) {
  uint32_t i, k, L = t->leaves;
  for (i = 0; i < L; ++i) {
    per_real v = t->node[L + i];
    if (m[L + i] != ((i < t->capacity && v > 0) ? v : PERI_NO_MIN)) return 0;
  }
  for (k = L - 1; k >= 1; --k)
    if (m[k] != peri_min_of(m[2 * k], m[2 * k + 1])) return 0;
  return 1;
}

/* The sequence tree against the steps: every leaf recomputed. */
static per_status peri_seq_check(const per_buffer *b) {
  uint32_t j, ns;
  int bufmax = (b->cfg.flags & PER_WEIGHTS_BUFFER_MAX) != 0;
  if (b->cfg.seq_len == 0)
    return (b->seq_ok || b->seq_min_node || b->seq_tree.node) ? PER_ERR_CORRUPT
                                                              : PER_OK;
  ns = b->cfg.capacity / b->cfg.seq_stride;
  if (!b->seq_ok || per_tree_check(&b->seq_tree) != PER_OK ||
      b->seq_tree.capacity != ns || (bufmax != (b->seq_min_node != NULL)))
    return PER_ERR_CORRUPT;
  for (j = 0; j < ns; ++j) {
    double v = 0;
    uint32_t n = peri_seq_steps(b, j * b->cfg.seq_stride, &v);
    per_real want = n ? (per_real)v : (per_real)0;
    if (b->seq_ok[j] != (n != 0) ||
        b->seq_tree.node[b->seq_tree.leaves + j] != want)
      return PER_ERR_CORRUPT;
  }
  if (b->seq_min_node && !peri_min_ok(b->seq_min_node, &b->seq_tree))
    return PER_ERR_CORRUPT;
  return PER_OK;
}

PERDEF per_status per_buffer_check(const per_buffer *b) {
  uint32_t i, cap, L;
  const per_real *node;
  if (!b || !b->items || !b->gen) return PER_ERR_NULL;
  cap = b->cfg.capacity;
  if (peri_config_check(&b->cfg, NULL) != PER_OK) return PER_ERR_CORRUPT;
  if (per_tree_check(&b->tree) != PER_OK || b->tree.capacity != cap)
    return PER_ERR_CORRUPT;
  if (b->size > cap || b->pos >= cap || (b->size < cap && b->pos != b->size))
    return PER_ERR_CORRUPT;
  if (b->added < b->size || b->rng.avail > 4 || b->zero_hint > 1)
    return PER_ERR_CORRUPT;
  if (per_leaf_status(b->max_leaf) != PER_OK || !(b->max_leaf > 0) ||
      (b->cfg.alpha == 0 && b->max_leaf != 1))
    return PER_ERR_CORRUPT;
  L = b->tree.leaves;
  node = b->tree.node;
  for (i = 0; i < cap; ++i) {
    per_real v = node[L + i];
    if (!b->ends || b->ends[i] > (i < b->size ? PER_END_TRUNCATED : 0))
      return PER_ERR_CORRUPT;
    if (i < b->size) {
      if (b->gen[i] == 0 || v > b->max_leaf) return PER_ERR_CORRUPT;
      if (b->cfg.alpha == 0 && v != 1) return PER_ERR_CORRUPT;
      if (!(v > 0) && !b->zero_hint) return PER_ERR_CORRUPT;
    } else if (b->gen[i] != 0 || v != 0) {
      return PER_ERR_CORRUPT;
    }
  }
  if ((b->cfg.alpha == 0) != (b->swap.perm != NULL)) return PER_ERR_CORRUPT;
  if (b->swap.perm) {
    /* a permutation of [0, n): in range, with the sums of one (a cheap
       check without memory), identity above n */
    uint64_t s1 = 0, s2 = 0, e1 = 0, e2 = 0;
    if (b->swap.n != b->size || b->swap.capacity != cap) return PER_ERR_CORRUPT;
    for (i = 0; i < cap; ++i) {
      uint32_t v = b->swap.perm[i];
      if (i >= b->swap.n) {
        if (v != i) return PER_ERR_CORRUPT;
        continue;
      }
      if (v >= b->swap.n) return PER_ERR_CORRUPT;
      s1 += v;
      s2 += (uint64_t)v * v;
      e1 += i;
      e2 += (uint64_t)i * i;
    }
    if (s1 != e1 || s2 != e2) return PER_ERR_CORRUPT;
  }
  if (((b->cfg.flags & PER_WEIGHTS_BUFFER_MAX) != 0) != (b->min_node != NULL) ||
      (b->min_node && !peri_min_ok(b->min_node, &b->tree)))
    return PER_ERR_CORRUPT;
  if (((b->cfg.flags & PER_MAX_LIVE) != 0) != (b->max_node != NULL))
    return PER_ERR_CORRUPT;
  if (b->max_node) { /* the max tree, and max_leaf the live maximum */
    const per_real *m = b->max_node;
    per_real top = 0;
    for (i = 0; i < L; ++i) {
      if (m[L + i] != node[L + i]) return PER_ERR_CORRUPT;
      if (node[L + i] > top) top = node[L + i];
    }
    for (i = L - 1; i >= 1; --i)
      if (m[i] != (m[2 * i] < m[2 * i + 1] ? m[2 * i + 1] : m[2 * i]))
        return PER_ERR_CORRUPT;
    if (top > 0 ? b->max_leaf != top
                : b->max_leaf != (b->cfg.alpha == 0
                                      ? (per_real)1
                                      : (per_real)b->cfg.max_priority))
      return PER_ERR_CORRUPT;
  }
  if (!b->traj || b->trajs > b->added) return PER_ERR_CORRUPT;
  {
    peri_tcheck tc;
    memset(&tc, 0, sizeof tc);
    tc.trajs = b->trajs;
    for (i = 0; i < b->size; ++i)
      peri_tcheck_feed(&tc, b->traj[((uint64_t)b->pos + cap - 1 - i) % cap]);
    for (i = b->size; i < cap; ++i)
      if (b->traj[i] != 0) return PER_ERR_CORRUPT;
    if (tc.bad) return PER_ERR_CORRUPT;
  }
  return peri_seq_check(b);
}

/* >>nstep */
PERDEF per_nstep_layout per_nstep_layout_of(const per_nstep_config *cfg) {
  per_nstep_layout l;
  uint64_t off, size;
  memset(&l, 0, sizeof l);
  if (!cfg || cfg->obs_size == 0 || cfg->action_size == 0) return l;
  off = ((uint64_t)cfg->obs_size + cfg->action_size + 3u) & ~(uint64_t)3u;
  size = off + 12u + cfg->obs_size;
  if (size > 0xffffffffull) return l;
  l.obs = 0;
  l.action = cfg->obs_size;
  l.reward = (uint32_t)off;
  l.discount = (uint32_t)off + 4u;
  l.done = (uint32_t)off + 8u;
  l.next_obs = (uint32_t)off + 12u;
  l.size = (uint32_t)size;
  return l;
}

PERDEF per_status per_nstep_init(per_nstep *a, const per_nstep_config *cfg,
                                 void *alloc_ctx) {
  per_nstep_layout l;
  uint64_t bytes;
  unsigned char *mem;
  if (!a) return PER_ERR_NULL;
  memset(a, 0, sizeof *a);
  if (!cfg) return PER_ERR_NULL;
  l = per_nstep_layout_of(cfg);
  if (cfg->n == 0 || cfg->n > (1u << 24) ||
      !(cfg->gamma >= 0.0f && cfg->gamma <= 1.0f) || l.size == 0)
    return PER_ERR_ARG;
  /* one block: rewards (float aligned), observations, actions, the item */
  bytes = (uint64_t)cfg->n *
              (sizeof(float) + (uint64_t)cfg->obs_size + cfg->action_size) +
          l.size;
  if ((uint64_t)(size_t)bytes != bytes) return PER_ERR_ARG;
  mem = (unsigned char *)PER_MALLOC((size_t)bytes, alloc_ctx);
  if (!mem) return PER_ERR_NOMEM;
  a->cfg = *cfg;
  a->layout = l;
  a->reward = (float *)(void *)mem;
  a->obs = mem + (size_t)cfg->n * sizeof(float);
  a->act = a->obs + (size_t)cfg->n * cfg->obs_size;
  a->item = a->act + (size_t)cfg->n * cfg->action_size;
  a->alloc_ctx = alloc_ctx;
  return PER_OK;
}

PERDEF void per_nstep_free(per_nstep *a) {
  if (!a) return;
  if (a->reward) PER_FREE(a->reward, a->alloc_ctx);
  memset(a, 0, sizeof *a);
}

PERDEF void per_nstep_reset(per_nstep *a) {
  if (!a) return;
  a->head = 0;
  a->count = 0;
}

/* Emit the oldest pending step with m rewards summed, then drop it; the
   buffer keeps `end` as its episode end. */
static void peri_nstep_emit(per_nstep *a, per_buffer *b, uint32_t m,
                            uint32_t done, const void *next_obs, uint8_t end) {
  const per_nstep_layout *l = &a->layout;
  uint32_t k, n = a->cfg.n, h = a->head;
  double acc = 0, g = 1, gamma = (double)a->cfg.gamma;
  float r, d;
  for (k = 0; k < m; ++k) {
    acc += peri_dmul_rn(g, (double)a->reward[(h + k) % n]);
    g *= gamma;
  }
  r = (float)acc;
  d = (float)g;
  memcpy(a->item + l->obs, a->obs + (size_t)h * a->cfg.obs_size,
         a->cfg.obs_size);
  memcpy(a->item + l->action, a->act + (size_t)h * a->cfg.action_size,
         a->cfg.action_size);
  memset(a->item + a->cfg.obs_size + a->cfg.action_size, 0,
         l->reward - (a->cfg.obs_size + a->cfg.action_size)); /* padding */
  memcpy(a->item + l->reward, &r, sizeof r);
  memcpy(a->item + l->discount, &d, sizeof d);
  memcpy(a->item + l->done, &done, sizeof done);
  memcpy(a->item + l->next_obs, next_obs, a->cfg.obs_size);
  { /* initialised, not assigned: nvcc warns of a variable set and
       unused under NDEBUG even with the cast */
    per_status s = per_buffer_add_step(b, a->item, end);
    PER_ASSERT(s == PER_OK);
    (void)s;
  }
  a->head = (h + 1) % n;
  a->count -= 1;
}

/* per_nstep_step once its arguments are checked. With mark_end, the
   last step emitted at an episode's end is stored with its
   PER_END_* (per_frames.h); per_nstep stores every item with
   PER_END_NONE. */
static void peri_nstep_push(per_nstep *a, per_buffer *b, const void *obs,
                            const void *action, float reward,
                            const void *next_obs, int terminated, int truncated,
                            int mark_end) {
  uint32_t n, slot;
  uint8_t end = !mark_end    ? (uint8_t)PER_END_NONE
                : terminated ? (uint8_t)PER_END_TERMINATED
                             : (uint8_t)PER_END_TRUNCATED;
  n = a->cfg.n;
  slot = (a->head + a->count) % n;
  memcpy(a->obs + (size_t)slot * a->cfg.obs_size, obs, a->cfg.obs_size);
  memcpy(a->act + (size_t)slot * a->cfg.action_size, action,
         a->cfg.action_size);
  a->reward[slot] = reward;
  a->count += 1;
  if (terminated || truncated) {
    while (a->count > 0)
      peri_nstep_emit(a, b, a->count, terminated ? 1u : 0u, next_obs,
                      a->count == 1 ? end : (uint8_t)PER_END_NONE);
    a->head = 0;
  } else if (a->count == n) {
    peri_nstep_emit(a, b, n, 0, next_obs, PER_END_NONE);
  }
}

PERDEF per_status per_nstep_step(per_nstep *a, per_buffer *b, const void *obs,
                                 const void *action, float reward,
                                 const void *next_obs, int terminated,
                                 int truncated) {
  per_status s;
  if (!a || !a->reward || !b || !obs || !action || !next_obs)
    return PER_ERR_NULL;
  if (!b->items || b->cfg.item_size != a->layout.size) return PER_ERR_ARG;
  s = peri_float_status(reward);
  if (s != PER_OK) return s;
  peri_nstep_push(a, b, obs, action, reward, next_obs, terminated, truncated,
                  0);
  return PER_OK;
}

/* >>ckpt */
static void peri_crc_table(uint32_t t[256]) {
  uint32_t i, k;
  for (i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    t[i] = c;
  }
}

/* Raw (not inverted) table-driven CRC update. */
static uint32_t peri_crc_run(const uint32_t t[256], uint32_t c, const void *p,
                             size_t n) {
  const unsigned char *s = (const unsigned char *)p;
  while (n--) c = t[(c ^ *s++) & 0xffu] ^ (c >> 8);
  return c;
}

PERDEF uint32_t per_crc32c(uint32_t crc, const void *p, size_t n) {
  uint32_t t[256];
  if (!p || n == 0) return crc;
  peri_crc_table(t);
  return ~peri_crc_run(t, ~crc, p, n);
}

/* A per_real in the file's encoding (the byte-order helpers are in
   >>internal). */
static void peri_put_real(unsigned char *p, per_real v) {
  if (sizeof(per_real) == sizeof(float)) {
    uint32_t u;
    float f = (float)v;
    memcpy(&u, &f, sizeof u);
    peri_put32(p, u);
  } else {
    peri_putf64(p, (double)v);
  }
}
#ifndef PER_NO_STDIO
static per_real peri_get_real(const unsigned char *p) {
  if (sizeof(per_real) == sizeof(float)) {
    uint32_t u = peri_get32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return (per_real)f;
  }
  return (per_real)peri_getf64(p);
}

#endif

/* The checkpoint header, in file order, one row a field:
   X(NAME, name, type, since, value). A field is a little-endian `type`
   (u32, u64, or f64: a double's bits as a u64) at the offset the rows
   above it give (PERI_H_NAME), in files of version `since` and later.
   `value` is what a save writes, from `const per_buffer *b` (c = &b->cfg,
   has_perm); a load reads the field into peri_hdr's member `name`. This
   list is the layout: the offsets, the writer (peri_ckpt_header) and the
   reader (peri_hdr_read) are made from it, nowhere else. docs/FORMAT.md
   has it as a table, with what the loader checks. Rows are only ever
   added at the end, with a new version (docs/DESIGN.md §9). */
#define PERI_CKPT_FIELDS(X)                                            \
  X(MAGIC, magic, u64, 1, PERI_MAGIC)                                  \
  X(VERSION, version, u32, 1, PER_CKPT_VERSION)                        \
  X(ENDIAN, endian, u32, 1, PERI_ENDIAN_MARK)                          \
  X(HBYTES, hbytes, u32, 1, PERI_H_BYTES)                              \
  X(REAL, real, u32, 1, (uint32_t)sizeof(per_real))                    \
  X(CAPACITY, capacity, u32, 1, c->capacity)                           \
  X(ITEM, item_size, u32, 1, c->item_size)                             \
  X(SIZE, size, u32, 1, b->size)                                       \
  X(POS, pos, u32, 1, b->pos)                                          \
  X(FLAGS, flags, u32, 1, c->flags)                                    \
  X(MAXU, max_unique, u32, 1, c->max_unique)                           \
  X(ZHINT, zero_hint, u32, 1, b->zero_hint)                            \
  X(PERM, has_perm, u32, 1, has_perm)                                  \
  X(ALPHA, alpha, f64, 1, c->alpha)                                    \
  X(BETA0, beta0, f64, 1, c->beta0)                                    \
  X(BETA1, beta1, f64, 1, c->beta1)                                    \
  X(EPS, eps, f64, 1, c->eps)                                          \
  X(MAXP, max_priority, f64, 1, c->max_priority)                       \
  X(BSTEPS, beta_steps, u64, 1, c->beta_steps)                         \
  X(SEED, seed, u64, 1, c->seed)                                       \
  X(STEP, step, u64, 1, b->step)                                       \
  X(ADDED, added, u64, 1, b->added)                                    \
  X(RSEED, rng_seed, u64, 1, b->rng.seed)                              \
  X(RCTR, rng_counter, u64, 1, b->rng.counter)                         \
  X(RBUF0, rng_buf0, u32, 1, b->rng.buf[0])                            \
  X(RBUF1, rng_buf1, u32, 1, b->rng.buf[1])                            \
  X(RBUF2, rng_buf2, u32, 1, b->rng.buf[2])                            \
  X(RBUF3, rng_buf3, u32, 1, b->rng.buf[3])                            \
  X(RAVAIL, rng_avail, u32, 1, b->rng.avail)                           \
  X(RESERVED, reserved, u32, 1, 0u)                                    \
  X(MAXLEAF, max_leaf, f64, 1, (double)b->max_leaf)                    \
  X(TOTAL, total, f64, 1, (double)b->tree.node[1])                     \
  X(FBYTES, file_bytes, u64, 1,                                        \
    peri_ckpt_bytes(PER_CKPT_VERSION, b->size, c->item_size, has_perm, \
                    (uint32_t)strlen(b->layout)))                      \
  X(SEQLEN, seq_len, u32, 2, c->seq_len)                               \
  X(SEQSTRIDE, seq_stride, u32, 2, c->seq_stride)                      \
  X(SEQETA, seq_eta, f64, 2, c->seq_eta)                               \
  X(TRAJS, trajs, u64, 2, b->trajs)                                    \
  X(LAYOUT, layout_len, u32, 3, (uint32_t)strlen(b->layout))

/* The magic bytes 0x89 "PERBUF\n" as a little-endian u64, and the word
   that tells the writer's byte order. */
#define PERI_MAGIC 0x0a46554252455089ull
#define PERI_ENDIAN_MARK 0x01020304u

/* Bytes, C type, writer and reader of each field type. */
#define PERI_W_u32 4
#define PERI_W_u64 8
#define PERI_W_f64 8
#define PERI_T_u32 uint32_t
#define PERI_T_u64 uint64_t
#define PERI_T_f64 double
#define PERI_PUT_u32 peri_put32
#define PERI_PUT_u64 peri_put64
#define PERI_PUT_f64 peri_putf64
#define PERI_GET_u32 peri_get32
#define PERI_GET_u64 peri_get64
#define PERI_GET_f64 peri_getf64

/* PERI_H_NAME: the field's offset; PERI_H_BYTES: the header's size. */
#define PERI_H_OFFSET(NAME, name, type, since, value) \
  PERI_H_##NAME, PERI_H_END_##NAME = PERI_H_##NAME + PERI_W_##type - 1,
enum { PERI_CKPT_FIELDS(PERI_H_OFFSET) PERI_H_BYTES };
#undef PERI_H_OFFSET
/* Version 1's header ends where the first version 2 field starts, and
   version 2's where the first version 3 field does. */
#define PERI_H_BYTES_V1 PERI_H_SEQLEN
#define PERI_H_BYTES_V2 PERI_H_LAYOUT
/* The sizes every reader of the format relies on: a row inserted or
   widened above the end of any header is a compile error. */
typedef char peri_h_bytes_check[(PERI_H_BYTES_V1 == 192 &&
                                 PERI_H_BYTES_V2 == 216 && PERI_H_BYTES == 220)
                                    ? 1
                                    : -1];

/* The header's size in a version. */
static uint32_t peri_h_bytes(uint32_t version) {
  return version == 1   ? (uint32_t)PERI_H_BYTES_V1
         : version == 2 ? (uint32_t)PERI_H_BYTES_V2
                        : (uint32_t)PERI_H_BYTES;
}

#ifndef PER_NO_STDIO
/* A header as read: a member per row of PERI_CKPT_FIELDS. */
typedef struct peri_hdr {
#define PERI_H_MEMBER(NAME, name, type, since, value) PERI_T_##type name;
  PERI_CKPT_FIELDS(PERI_H_MEMBER)
#undef PERI_H_MEMBER
} peri_hdr;

/* Read the fields of a version `version` header at h (the fields of later
   versions are 0). */
static void peri_hdr_read(const unsigned char *h, uint32_t version,
                          peri_hdr *d) {
#define PERI_H_GET(NAME, name, type, since, value) \
  d->name = version >= (since) ? PERI_GET_##type(h + PERI_H_##NAME) : 0;
  PERI_CKPT_FIELDS(PERI_H_GET)
#undef PERI_H_GET
}
#endif

/* Bytes of the whole file (header, layout text, arrays, CRC) of a
   version. */
static uint64_t peri_ckpt_bytes(uint32_t version, uint32_t size,
                                uint32_t item_size, uint32_t has_perm,
                                uint32_t layout_len) {
  uint64_t v2 = version >= 2;
  return peri_h_bytes(version) + (uint64_t)layout_len + 4u +
         (uint64_t)size * ((uint64_t)item_size + 4u + sizeof(per_real) +
                           4u * has_perm + 5u * v2);
}

/* The header of b's state: every row of PERI_CKPT_FIELDS. */
static void peri_ckpt_header(const per_buffer *b, unsigned char *h) {
  const per_config *c = &b->cfg;
  uint32_t has_perm = b->swap.perm != NULL;
#define PERI_H_PUT(NAME, name, type, since, value) \
  PERI_PUT_##type(h + PERI_H_##NAME, value);
  PERI_CKPT_FIELDS(PERI_H_PUT)
#undef PERI_H_PUT
}

/* ---- snapshots: the file's bytes in caller memory ---- */

/* 1 on a little-endian host (a constant the compiler folds). */
static int peri_host_le(void) {
  const uint32_t one = 1;
  unsigned char c;
  memcpy(&c, &one, 1);
  return c == 1;
}

/* v[0..n) as little-endian 32-bit words at p: one memcpy on a
   little-endian host. Returns the end. */
static unsigned char *peri_put32s(unsigned char *p, const uint32_t *v,
                                  uint32_t n) {
  uint32_t i;
  if (PERI_FAST && peri_host_le()) {
    memcpy(p, v, (size_t)n * 4);
  } else {
    for (i = 0; i < n; ++i) peri_put32(p + (size_t)i * 4, v[i]);
  }
  return p + (size_t)n * 4;
}

/* v[0..n) as the file stores per_real values (peri_put_real). */
static unsigned char *peri_put_reals(unsigned char *p, const per_real *v,
                                     uint32_t n) {
  uint32_t i;
  if (PERI_FAST && peri_host_le()) {
    memcpy(p, v, (size_t)n * sizeof(per_real));
  } else {
    for (i = 0; i < n; ++i)
      peri_put_real(p + (size_t)i * sizeof(per_real), v[i]);
  }
  return p + (size_t)n * sizeof(per_real);
}

/* Where the checkpoint's bytes go: straight into memory (mem != NULL:
   a snapshot), or through `put` in pieces (a file), the words converted
   in `stage` first. */
struct peri_sink {
  unsigned char *mem;
  void (*put)(void *ctx, const void *p, size_t n);
  void *ctx;
  unsigned char stage[4096];
};

static void peri_sink_bytes(peri_sink *o, const void *p, size_t n) {
  if (o->mem) {
    memcpy(o->mem, p, n);
    o->mem += n;
  } else {
    o->put(o->ctx, p, n);
  }
}

static void peri_sink_u32s(peri_sink *o, const uint32_t *v, uint32_t n) {
  uint32_t i, m;
  if (o->mem) {
    o->mem = peri_put32s(o->mem, v, n);
    return;
  }
  for (i = 0; i < n; i += m) {
    m = n - i < sizeof o->stage / 4 ? n - i : (uint32_t)(sizeof o->stage / 4);
    o->put(o->ctx, o->stage,
           (size_t)(peri_put32s(o->stage, v + i, m) - o->stage));
  }
}

static void peri_sink_reals(peri_sink *o, const per_real *v, uint32_t n) {
  uint32_t i, m, per = (uint32_t)(sizeof o->stage / sizeof(per_real));
  if (o->mem) {
    o->mem = peri_put_reals(o->mem, v, n);
    return;
  }
  for (i = 0; i < n; i += m) {
    m = n - i < per ? n - i : per;
    o->put(o->ctx, o->stage,
           (size_t)(peri_put_reals(o->stage, v + i, m) - o->stage));
  }
}

/* b's checkpoint but for the CRC, in file order: the one place that
   knows the layout (per_buffer_snapshot and per_buffer_save). */
static void peri_ckpt_emit(const per_buffer *b, peri_sink *o) {
  unsigned char h[PERI_H_BYTES];
  peri_ckpt_header(b, h);
  peri_sink_bytes(o, h, PERI_H_BYTES);
  if (b->layout[0]) peri_sink_bytes(o, b->layout, strlen(b->layout));
  peri_sink_bytes(o, b->items, (size_t)b->size * b->cfg.item_size);
  peri_sink_u32s(o, b->gen, b->size);
  peri_sink_reals(o, b->tree.node + b->tree.leaves, b->size);
  if (b->swap.perm) peri_sink_u32s(o, b->swap.perm, b->size);
  peri_sink_bytes(o, b->ends, b->size);
  peri_sink_u32s(o, b->traj, b->size);
}

PERDEF size_t per_buffer_snapshot_bytes(const per_buffer *b) {
  uint64_t n;
  if (!b || !b->items) return 0;
  n = peri_ckpt_bytes(PER_CKPT_VERSION, b->cfg.capacity, b->cfg.item_size,
                      b->swap.perm != NULL, (uint32_t)strlen(b->layout));
  return (uint64_t)(size_t)n == n ? (size_t)n : 0;
}

PERDEF per_status per_buffer_snapshot(const per_buffer *b, void *mem,
                                      size_t bytes, size_t *len) {
  peri_sink o;
  uint64_t need;
  if (!b || !b->items || !mem || !len) return PER_ERR_NULL;
  need = peri_ckpt_bytes(PER_CKPT_VERSION, b->size, b->cfg.item_size,
                         b->swap.perm != NULL, (uint32_t)strlen(b->layout));
  if (need > (uint64_t)bytes) return PER_ERR_MEMORY;
  o.mem = (unsigned char *)mem;
  o.put = NULL;
  o.ctx = NULL;
  peri_ckpt_emit(b, &o);
  memset(o.mem, 0, 4); /* the CRC: per_snapshot_write computes it */
  *len = (size_t)need;
  return PER_OK;
}

#ifndef PER_NO_STDIO
/* fsync where POSIX has it. Strict C modes hide the declarations, so they
   are repeated here (compatible with the system's). */
#ifdef PERI_HAVE_FSYNC
#if !defined(__cplusplus)
#ifndef fileno
extern int fileno(FILE *);
#endif
extern int fsync(int);
#endif
#define PERI_FSYNC(f) fsync(fileno(f))
#elif defined(_WIN32)
#define PERI_FSYNC(f) _commit(_fileno(f))
#else
#define PERI_FSYNC(f) 0
#endif

/* Put the finished temporary file in place of path, replacing a file that
   is there. rename does that on POSIX; on Windows rename refuses an
   existing target, so MoveFileExA with REPLACE_EXISTING (1), and
   WRITE_THROUGH (8): it returns once the move is on disk. 0 on success. */
static int peri_replace(const char *tmp, const char *path) {
#if defined(_WIN32)
  return MoveFileExA(tmp, path, 1ul | 8ul) ? 0 : -1;
#else
  return rename(tmp, path);
#endif
}

/* Bytes of the temporary name's suffix: ".tmp-", 16 hex digits, NUL. */
#define PERI_TMP_SUFFIX 22

/* Create path.tmp-XXXXXXXXXXXXXXXX for writing, exclusively (fopen mode
   "x": C11, and glibc, musl, the BSDs, macOS and MSVC in every language
   mode), its name in tmp (len + PERI_TMP_SUFFIX bytes). The 16 digits
   are Philox of the pid, the time, the clock and a stack address, so
   concurrent savers (processes or threads) pick different names; a name
   that exists already is never opened, another is tried instead. NULL
   when no file could be created. */
static FILE *peri_tmp_create(const char *path, size_t len, char *tmp) {
  static const char hex[] = "0123456789abcdef";
  uint64_t key = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
  uint32_t attempt, i, w[4];
  key ^= (uint64_t)(uintptr_t)&key;
#ifdef PERI_HAVE_FSYNC
  key ^= (uint64_t)getpid() << 40;
#endif
  memcpy(tmp, path, len);
  memcpy(tmp + len, ".tmp-", 5);
  tmp[len + PERI_TMP_SUFFIX - 1] = '\0';
  for (attempt = 0; attempt < 64; ++attempt) {
    FILE *f;
    per_rng_block(key, attempt, w);
    for (i = 0; i < 16; ++i)
      tmp[len + 5 + i] = hex[(w[i / 8] >> (4 * (i % 8))) & 15u];
    errno = 0;
    f = fopen(tmp, "wbx");
    if (f || errno != EEXIST) return f;
  }
  return NULL;
}

/* After the rename: fsync the directory holding path, which makes the
   rename itself durable (POSIX). dir holds len + 2 bytes. 0 on success,
   and where the directory cannot be opened for reading or its file
   system cannot sync directories (EINVAL, EBADF); -1 when the sync
   failed. */
static int peri_sync_dir(const char *path, size_t len, char *dir) {
#ifdef PERI_HAVE_FSYNC
  size_t n = len;
  int fd, r, e;
  while (n > 0 && path[n - 1] != '/') --n;
  if (n == 0) {
    dir[n++] = '.';
  } else {
    memcpy(dir, path, n);
  }
  dir[n] = '\0';
  fd = open(dir, O_RDONLY);
  if (fd < 0) return 0;
  r = fsync(fd);
  e = errno;
  close(fd);
  return (r == 0 || e == EINVAL || e == EBADF) ? 0 : -1;
#else
  (void)path;
  (void)len;
  (void)dir;
  return 0;
#endif
}

struct peri_writer {
  FILE *f;
  uint32_t crc; /* raw running CRC */
  int err;
  char *tmp;  /* the temporary file's name */
  size_t len; /* strlen(path) */
  void *ctx;  /* allocator context of tmp */
  uint32_t table[256];
};

static void peri_wbytes(peri_writer *w, const void *p, size_t n) {
  if (w->err || n == 0) return;
  w->crc = peri_crc_run(w->table, w->crc, p, n);
  if (fwrite(p, 1, n, w->f) != n) w->err = 1;
}

/* Start a save to path: a new temporary file beside it. PER_ERR_NOMEM
   (its name) or PER_ERR_IO; on error nothing is left to clean up. */
static per_status peri_writer_open(peri_writer *w, const char *path,
                                   void *ctx) {
  w->len = strlen(path);
  w->ctx = ctx;
  w->crc = 0xffffffffu;
  w->err = 0;
  w->tmp = (char *)PER_MALLOC(w->len + PERI_TMP_SUFFIX, ctx);
  if (!w->tmp) return PER_ERR_NOMEM;
  w->f = peri_tmp_create(path, w->len, w->tmp);
  if (!w->f) {
    PER_FREE(w->tmp, ctx);
    return PER_ERR_IO;
  }
  peri_crc_table(w->table);
  return PER_OK;
}

/* Finish a save: the CRC, flush, sync, close, replace path, sync the
   directory (the guarantees documented at per_buffer_save). On any error
   before the replace the temporary file is removed. */
static per_status peri_writer_finish(peri_writer *w, const char *path) {
  unsigned char crc[4];
  peri_put32(crc, ~w->crc);
  if (!w->err && fwrite(crc, 1, 4, w->f) != 4) w->err = 1;
  if (fflush(w->f) != 0) w->err = 1;
  if (!w->err && PERI_FSYNC(w->f) != 0) w->err = 1;
  if (fclose(w->f) != 0) w->err = 1;
  if (!w->err && peri_replace(w->tmp, path) != 0) w->err = 1;
  if (w->err) remove(w->tmp);
  else if (peri_sync_dir(path, w->len, w->tmp) != 0) w->err = 1;
  PER_FREE(w->tmp, w->ctx);
  return w->err ? PER_ERR_IO : PER_OK;
}

/* A peri_sink's put for a file. */
static void peri_sink_file(void *w, const void *p, size_t n) {
  peri_wbytes((peri_writer *)w, p, n);
}

PERDEF per_status per_buffer_save(const per_buffer *b, const char *path) {
  peri_writer w;
  peri_sink o;
  per_status s;
  if (!b || !b->items || !path) return PER_ERR_NULL;
  s = peri_writer_open(&w, path, b->alloc_ctx);
  if (s != PER_OK) return s;
  o.mem = NULL;
  o.put = peri_sink_file;
  o.ctx = &w;
  peri_ckpt_emit(b, &o);
  return peri_writer_finish(&w, path);
}

PERDEF per_status per_snapshot_write(const void *snap, size_t len,
                                     const char *path, void *alloc_ctx) {
  const unsigned char *p = (const unsigned char *)snap;
  peri_writer w;
  peri_hdr d;
  per_status s;
  if (!snap || !path) return PER_ERR_NULL;
  if (len < PERI_H_BYTES + 4) return PER_ERR_FORMAT;
  peri_hdr_read(p, PER_CKPT_VERSION, &d);
  if (d.magic != PERI_MAGIC || d.version != PER_CKPT_VERSION ||
      d.endian != PERI_ENDIAN_MARK || d.hbytes != PERI_H_BYTES ||
      d.file_bytes != (uint64_t)len)
    return PER_ERR_FORMAT;
  s = peri_writer_open(&w, path, alloc_ctx);
  if (s != PER_OK) return s;
  peri_wbytes(&w, p, len - 4);
  return peri_writer_finish(&w, path);
}

PERDEF per_status per_file_write(const void *data, size_t len, const char *path,
                                 void *alloc_ctx) {
  peri_writer w;
  per_status s;
  if (!path || (!data && len > 0)) return PER_ERR_NULL;
  s = peri_writer_open(&w, path, alloc_ctx);
  if (s != PER_OK) return s;
  peri_wbytes(&w, data, len);
  return peri_writer_finish(&w, path);
}

/* A checkpoint read into memory and checked: everything but the fit with
   the buffer it goes into. */
struct peri_ckpt {
  unsigned char *mem; /* the whole file */
  peri_hdr h;         /* its header */
  const unsigned char *items, *gens, *leaves, *perm;
  const unsigned char *ends, *traj; /* NULL in version 1 */
  uint64_t trajs; /* version 1: added (every item its own trajectory) */
  uint64_t bytes; /* the file's length */
  per_config cfg;
  uint32_t version, hbytes, size, pos, has_perm;
  const char *layout; /* the layout text (not NUL-terminated), h.layout_len
                         chars */
};

/* Bytes from f's position to its end, in *rest: 1 when the stream can
   tell (a seekable file; on 32-bit long platforms other than Windows, one
   below 2 GiB), the position restored; 0 when it cannot; -1 when the
   position could not be restored. */
#if defined(_WIN32)
#define PERI_OFF __int64
#define PERI_TELL _ftelli64
#define PERI_SEEK _fseeki64
#else
#define PERI_OFF long
#define PERI_TELL ftell
#define PERI_SEEK fseek
#endif
static int peri_file_rest(FILE *f, uint64_t *rest) {
  PERI_OFF here = PERI_TELL(f), end;
  if (here < 0 || PERI_SEEK(f, 0, SEEK_END) != 0) return 0;
  end = PERI_TELL(f);
  if (PERI_SEEK(f, here, SEEK_SET) != 0) return -1;
  if (end < here) return 0;
  *rest = (uint64_t)(end - here);
  return 1;
}

/* Read and check the file: the header, then (before any allocation) its
   claimed length against the real one and its item size and capacity
   against b's, then the body and the checksum. */
/* m (may be NULL) += "the checkpoint's NAME A, the buffer's B" */
static void peri_msg_pair(peri_msg *m, const char *name, uint64_t a,
                          uint64_t b) {
  if (!m) return;
  peri_msg_s(m, "the checkpoint's ");
  peri_msg_nu(m, name, a);
  peri_msg_s(m, ", the buffer's ");
  peri_msg_u(m, b);
}

/* Read a checkpoint's header from f (at its start) into h and k->h, and
   check what it says of the file: magic, version, byte order, header
   size, the sizes (k->size, k->has_perm, the layout's length) and the
   file's length (k->bytes) against the bytes f has left, where f can
   tell. */
/* Where a checkpoint's bytes come from: a file (f) or memory (mem, len;
   f NULL), read from the start on. */
struct peri_src {
  FILE *f;
  const unsigned char *mem;
  size_t len, pos;
};

/* A source reading f from where it is, or mem[0..len) when f is NULL. */
static peri_src peri_src_of(FILE *f, const void *mem, size_t len) {
  peri_src r;
  r.f = f;
  r.mem = (const unsigned char *)mem;
  r.len = len;
  r.pos = 0;
  return r;
}

/* Up to n bytes into dst: how many there were; *err = 1 on a read
   error. */
static size_t peri_src_read(peri_src *r, void *dst, size_t n, int *err) {
  size_t got;
  if (r->f) {
    got = fread(dst, 1, n, r->f);
    if (ferror(r->f)) *err = 1;
    return got;
  }
  got = r->len - r->pos < n ? r->len - r->pos : n;
  if (got) memcpy(dst, r->mem + r->pos, got);
  r->pos += got;
  return got;
}

/* peri_file_rest for either kind. */
static int peri_src_rest(peri_src *r, uint64_t *rest) {
  if (r->f) return peri_file_rest(r->f, rest);
  *rest = r->len - r->pos;
  return 1;
}

static per_status peri_ckpt_head(peri_src *f, unsigned char *h, peri_ckpt *k) {
  int err = 0;
  size_t got = peri_src_read(f, h, PERI_H_BYTES_V1, &err), hb;
  uint64_t bytes, rest;
  int known;
  if (err) return PER_ERR_IO;
  if (got >= 8 && peri_get64(h) != PERI_MAGIC) return PER_ERR_FORMAT;
  if (got < PERI_H_BYTES_V1)
    return got < 8 ? (got == 0 ? PER_ERR_FORMAT : PER_ERR_TRUNCATED)
                   : PER_ERR_TRUNCATED;
  peri_hdr_read(h, 1, &k->h);
  k->version = k->h.version;
  if (k->version < 1 || k->version > PER_CKPT_VERSION) return PER_ERR_VERSION;
  k->hbytes = peri_h_bytes(k->version);
  if (k->h.endian != PERI_ENDIAN_MARK || k->h.hbytes != k->hbytes)
    return PER_ERR_FORMAT;
  hb = k->hbytes;
  if (hb > got) { /* the rest of a newer header */
    got += peri_src_read(f, h + got, hb - got, &err);
    if (err) return PER_ERR_IO;
    if (got < hb) return PER_ERR_TRUNCATED;
  }
  peri_hdr_read(h, k->version, &k->h);
  k->size = k->h.size;
  k->has_perm = k->h.has_perm;
  if (k->size > k->h.capacity || k->has_perm > 1 ||
      k->h.layout_len >= PER_LAYOUT_MAX)
    return PER_ERR_CORRUPT;
  if (k->h.real != 4 && k->h.real != 8) return PER_ERR_CORRUPT;
  bytes = peri_ckpt_bytes(k->version, k->size, k->h.item_size, k->has_perm,
                          k->h.layout_len);
  /* the arrays' sizes are those of the file's leaves */
  bytes = bytes - (uint64_t)k->size * sizeof(per_real) +
          (uint64_t)k->size * k->h.real;
  if (k->h.file_bytes != bytes) return PER_ERR_CORRUPT;
  k->bytes = bytes;
  known = peri_src_rest(f, &rest);
  if (known < 0) return PER_ERR_IO;
  if (known && rest < bytes - hb) return PER_ERR_TRUNCATED;
  if (known && rest > bytes - hb) return PER_ERR_CORRUPT;
  return PER_OK;
}

static per_status peri_ckpt_read(peri_src *f, const per_buffer *b,
                                 uint32_t world, peri_ckpt *k, peri_msg *m) {
  unsigned char h[PERI_H_BYTES], one;
  uint64_t bytes;
  size_t got, hb;
  uint32_t crc, t[256];
  int err = 0;
  per_status s = peri_ckpt_head(f, h, k);
  if (s != PER_OK) return s;
  hb = k->hbytes;
  bytes = k->bytes;
  if (k->h.real != sizeof(per_real)) {
    peri_msg_pair(m, "bytes per leaf", k->h.real, sizeof(per_real));
    peri_msg_s(m, " (PER_REAL)");
    return PER_ERR_MISMATCH;
  }
  if (k->h.item_size != b->cfg.item_size) {
    peri_msg_pair(m, "item_size", k->h.item_size, b->cfg.item_size);
    return PER_ERR_MISMATCH;
  }
  if (world == 0 && k->h.capacity != b->cfg.capacity) {
    peri_msg_pair(m, "capacity", k->h.capacity, b->cfg.capacity);
    return PER_ERR_MISMATCH;
  }
  if ((uint64_t)(size_t)bytes != bytes) return PER_ERR_NOMEM;
  k->mem = (unsigned char *)PER_MALLOC((size_t)bytes, b->alloc_ctx);
  if (!k->mem) return PER_ERR_NOMEM;
  memcpy(k->mem, h, hb);
  got = peri_src_read(f, k->mem + hb, (size_t)bytes - hb, &err);
  if (err) return PER_ERR_IO;
  if (got != (size_t)bytes - hb) return PER_ERR_TRUNCATED;
  if (peri_src_read(f, &one, 1, &err) != 0) /* longer than it says */
    return PER_ERR_CORRUPT;
  if (err) return PER_ERR_IO;
  peri_crc_table(t);
  crc = ~peri_crc_run(t, 0xffffffffu, k->mem, (size_t)bytes - 4);
  if (crc != peri_get32(k->mem + bytes - 4)) return PER_ERR_CHECKSUM;
  return PER_OK;
}

/* The config a header of `version` saved (version 1: no sequences). */
static per_config peri_hdr_config(const peri_hdr *h, uint32_t version) {
  per_config c;
  memset(&c, 0, sizeof c);
  c.capacity = h->capacity;
  c.item_size = h->item_size;
  c.flags = h->flags;
  c.max_unique = h->max_unique;
  c.alpha = h->alpha;
  c.beta0 = h->beta0;
  c.beta1 = h->beta1;
  c.eps = h->eps;
  c.max_priority = h->max_priority;
  c.beta_steps = h->beta_steps;
  c.seed = h->seed;
  c.seq_eta = 0.9;
  if (version >= 2) {
    c.seq_len = h->seq_len;
    c.seq_stride = h->seq_stride;
    c.seq_eta = h->seq_eta;
  }
  return c;
}

/* Parse and check every field of a checksummed file. Leaves and
   generations are checked here; the permutation by the caller. */
static per_status peri_ckpt_parse(peri_ckpt *k) {
  const peri_hdr *h = &k->h;
  per_config *c = &k->cfg;
  uint32_t i, zero = 0;
  per_real max_leaf;
  *c = peri_hdr_config(h, k->version);
  if (peri_config_check(c, NULL) != PER_OK) return PER_ERR_CORRUPT;
  if ((c->alpha == 0) != (k->has_perm == 1)) return PER_ERR_CORRUPT;
  k->pos = h->pos;
  if (k->pos >= c->capacity || (k->size < c->capacity && k->pos != k->size))
    return PER_ERR_CORRUPT;
  if (h->zero_hint > 1 || h->rng_avail > 4 || h->reserved != 0 ||
      h->added < k->size)
    return PER_ERR_CORRUPT;
  if (!peri_dfinite(h->max_leaf) || !peri_dfinite(h->total))
    return PER_ERR_CORRUPT;
  max_leaf = (per_real)h->max_leaf;
  if ((double)max_leaf != h->max_leaf || per_leaf_status(max_leaf) != PER_OK ||
      !(max_leaf > 0) || (c->alpha == 0 && max_leaf != 1))
    return PER_ERR_CORRUPT;
  k->layout = (const char *)k->mem + k->hbytes;
  if (memchr(k->layout, 0, h->layout_len)) return PER_ERR_CORRUPT;
  k->items = k->mem + k->hbytes + h->layout_len;
  k->gens = k->items + (size_t)k->size * c->item_size;
  k->leaves = k->gens + (size_t)k->size * 4;
  k->perm = k->has_perm ? k->leaves + (size_t)k->size * sizeof(per_real) : NULL;
  if (k->version >= 2) {
    k->ends =
        k->leaves + (size_t)k->size * (sizeof(per_real) + 4u * k->has_perm);
    for (i = 0; i < k->size; ++i)
      if (k->ends[i] > PER_END_TRUNCATED) return PER_ERR_CORRUPT;
    k->traj = k->ends + k->size;
    k->trajs = h->trajs;
    if (k->trajs > h->added) return PER_ERR_CORRUPT;
  } else {
    k->trajs = h->added;
  }
  for (i = 0; i < k->size; ++i) {
    per_real v = peri_get_real(k->leaves + (size_t)i * sizeof(per_real));
    if (peri_get32(k->gens + (size_t)i * 4) == 0) return PER_ERR_CORRUPT;
    if (per_leaf_status(v) != PER_OK || v > max_leaf ||
        (c->alpha == 0 && v != 1))
      return PER_ERR_CORRUPT;
    if (v == 0) {
      /* -0 is never stored by the tree */
      per_real z = 0;
      if (memcmp(&v, &z, sizeof v) != 0) return PER_ERR_CORRUPT;
      zero = 1;
    }
  }
  if (zero && !h->zero_hint) return PER_ERR_CORRUPT;
  return PER_OK;
}

PERDEF per_status per_ckpt_read_info(const char *path, per_ckpt_info *info) {
  unsigned char h[PERI_H_BYTES];
  peri_ckpt k;
  peri_src src;
  per_status s;
  FILE *f;
  if (!info) return PER_ERR_NULL;
  memset(info, 0, sizeof *info);
  if (!path) return PER_ERR_NULL;
  memset(&k, 0, sizeof k);
  f = fopen(path, "rb");
  if (!f) return PER_ERR_IO;
  src = peri_src_of(f, NULL, 0);
  s = peri_ckpt_head(&src, h, &k);
  if (s == PER_OK && k.h.layout_len > 0) {
    int err = 0;
    size_t got = peri_src_read(&src, info->layout, k.h.layout_len, &err);
    if (err) s = PER_ERR_IO;
    else if (got < k.h.layout_len) s = PER_ERR_TRUNCATED;
    else if (memchr(info->layout, 0, got)) s = PER_ERR_CORRUPT;
  }
  fclose(f);
  if (s != PER_OK) {
    memset(info, 0, sizeof *info);
    return s;
  }
  info->cfg = peri_hdr_config(&k.h, k.version);
  info->version = k.version;
  info->real_bytes = k.h.real;
  info->size = k.size;
  info->added = k.h.added;
  info->step = k.h.step;
  if (peri_config_check(&info->cfg, NULL) != PER_OK) {
    memset(info, 0, sizeof *info);
    return PER_ERR_CORRUPT;
  }
  return PER_OK;
}

/* PER_ERR_MISMATCH when the file and b both name their items' layout
   and the two differ (said in m), else PER_OK. */
static per_status peri_layout_fit(const per_buffer *b, const peri_ckpt *k,
                                  peri_msg *m) {
  size_t n = k->h.layout_len;
  if (n == 0 || !b->layout[0] ||
      (strlen(b->layout) == n && memcmp(b->layout, k->layout, n) == 0))
    return PER_OK;
  if (m) {
    char text[48];
    size_t t = n < sizeof text - 1 ? n : sizeof text - 1;
    memcpy(text, k->layout, t);
    text[t] = 0;
    peri_msg_s(m, "the checkpoint's layout \"");
    peri_msg_s(m, text);
    peri_msg_s(m, t < n ? "...\"" : "\"");
    peri_msg_s(m, " is not the buffer's \"");
    peri_msg_s(m, b->layout);
    peri_msg_s(m, "\"");
  }
  return PER_ERR_MISMATCH;
}

/* A buffer without a layout takes the file's (a loaded buffer knows what
   its items are). */
static void peri_layout_take(per_buffer *b, const peri_ckpt *k) {
  if (b->layout[0] || k->h.layout_len == 0) return;
  memcpy(b->layout, k->layout, k->h.layout_len);
  b->layout[k->h.layout_len] = 0;
}

/* Read, checksum, parse and fit a checkpoint from src (a file or
   memory). On success k->mem must be freed; on failure it is. */
static per_status peri_ckpt_take(peri_src *src, const per_buffer *b,
                                 uint32_t world, peri_ckpt *k, peri_msg *m) {
  per_status s = peri_ckpt_read(src, b, world, k, m);
  if (s == PER_OK) s = peri_ckpt_parse(k);
  if (s == PER_OK) s = peri_layout_fit(b, k, m);
  if (s != PER_OK && k->mem) {
    PER_FREE(k->mem, b->alloc_ctx);
    k->mem = NULL;
  }
  return s;
}

/* peri_ckpt_take from the file at path. */
static per_status peri_ckpt_open(const char *path, const per_buffer *b,
                                 uint32_t world, peri_ckpt *k, peri_msg *m) {
  FILE *f;
  peri_src src;
  per_status s;
  memset(k, 0, sizeof *k);
  f = fopen(path, "rb");
  if (!f) {
    peri_msg_s(m, "the file cannot be opened for reading");
    return PER_ERR_IO;
  }
  src = peri_src_of(f, NULL, 0);
  s = peri_ckpt_take(&src, b, world, k, m);
  fclose(f);
  return s;
}

/* The trajectory id (low 32 bits) of the item in file slot `slot`:
   stored in version 2; in version 1 every item was its own trajectory,
   numbered by its add (added - 1 for the newest). */
static uint32_t peri_ckpt_traj(const peri_ckpt *k, uint32_t slot) {
  uint32_t cap = k->cfg.capacity, age;
  if (k->traj) return peri_get32(k->traj + (size_t)slot * 4);
  age = (uint32_t)(((uint64_t)k->pos + cap - 1 - slot) % cap);
  return (uint32_t)(k->trajs - 1 - age);
}

/* The file's item at age position t (0 = its oldest). */
static uint32_t peri_ckpt_age_slot(const peri_ckpt *k, uint32_t t) {
  uint32_t oldest = k->size == k->cfg.capacity ? k->pos : 0;
  return (uint32_t)(((uint64_t)oldest + t) % k->cfg.capacity);
}

/* A load's selection: world == 0, every file slot in place (a full
   load); else the shard `rank` of `world`: the items of slots rank,
   rank + world, ... or, with by_traj, the items of trajectories rank,
   rank + world, ... (per_store.h: whole trajectories to each rank). */
struct peri_sel {
  uint32_t rank, world, by_traj;
};

/* Which file slot goes to buffer position t: every slot in order for a
   full load; for a shard, the slots of this rank in age order (oldest
   first). Returns 0 when position t of the file's order is not taken. */
static int peri_ckpt_pick(const peri_ckpt *k, uint32_t t, peri_sel sel,
                          uint32_t *slot) {
  if (sel.world == 0) {
    *slot = t;
    return 1;
  }
  *slot = peri_ckpt_age_slot(k, t);
  if (sel.by_traj) { /* the full id: stored ids span fewer than 2^32 */
    uint32_t back = (uint32_t)(k->trajs - 1) - peri_ckpt_traj(k, *slot);
    return (k->trajs - 1 - back) % sel.world == sel.rank;
  }
  return *slot % sel.world == sel.rank;
}

/* Stage a load: every check that can fail, and the loaded tree built in
   t, before b changes. *n: the items taken; *zero: one of their leaves is
   0. On error t is freed. */
static per_status peri_load_stage(const per_buffer *b, peri_ckpt *k,
                                  peri_sel sel, per_tree *t, uint32_t *n,
                                  uint32_t *zero, peri_msg *msg) {
  uint32_t cap = b->cfg.capacity, i, slot, m = 0, idx[PERI_CHUNK];
  per_real val[PERI_CHUNK];
  per_status s;
  *n = 0;
  *zero = 0;
  for (i = 0; i < k->size; ++i)
    *n += (uint32_t)peri_ckpt_pick(k, i, sel, &slot);
  if (*n > cap) {
    peri_msg_nu(msg, "the checkpoint's shard holds", *n);
    peri_msg_nu(msg, " items, the buffer's capacity is", cap);
    return PER_ERR_MISMATCH;
  }
  if (sel.world == 0) {
    if (k->cfg.flags != b->cfg.flags)
      peri_msg_pair(msg, "flags", k->cfg.flags, b->cfg.flags);
    else if (k->cfg.max_unique != b->cfg.max_unique)
      peri_msg_pair(msg, "max_unique", k->cfg.max_unique, b->cfg.max_unique);
    else if ((k->cfg.alpha == 0) != (b->cfg.alpha == 0))
      peri_msg_s(msg, k->cfg.alpha == 0
                          ? "the checkpoint's alpha is 0, the buffer's is not"
                          : "the checkpoint's alpha is not 0, the buffer's is");
    else if (k->cfg.seq_len != b->cfg.seq_len)
      peri_msg_pair(msg, "seq_len", k->cfg.seq_len, b->cfg.seq_len);
    else if (k->cfg.seq_stride != b->cfg.seq_stride)
      peri_msg_pair(msg, "seq_stride", k->cfg.seq_stride, b->cfg.seq_stride);
    else msg = NULL; /* they agree */
    if (msg) return PER_ERR_MISMATCH;
  }
  s = per_tree_init(t, cap, b->alloc_ctx);
  if (s != PER_OK) return s;
  if (k->perm) {
    /* a permutation of [0, size)? Every value < size <= 2^31 leaves bit 31
       free: it marks the values seen, in the file's copy, then is cleared. */
    unsigned char *pm = k->mem + (k->perm - k->mem);
    for (i = 0; i < k->size && s == PER_OK; ++i)
      if (peri_get32(pm + (size_t)i * 4) >= k->size) s = PER_ERR_CORRUPT;
    for (i = 0; i < k->size && s == PER_OK; ++i) {
      uint32_t v = peri_get32(pm + (size_t)i * 4) & 0x7fffffffu;
      if (pm[(size_t)v * 4 + 3] & 0x80u) s = PER_ERR_CORRUPT; /* seen twice */
      pm[(size_t)v * 4 + 3] |= 0x80u;
    }
    for (i = 0; i < k->size; ++i) pm[(size_t)i * 4 + 3] &= 0x7fu;
  }
  for (i = 0, *n = 0; s == PER_OK && i < k->size; ++i) {
    if (!peri_ckpt_pick(k, i, sel, &slot)) continue;
    idx[m] = (*n)++;
    val[m] = b->cfg.alpha == 0
                 ? (per_real)1
                 : peri_get_real(k->leaves + (size_t)slot * sizeof(per_real));
    *zero |= !(val[m] > 0);
    if (++m == PERI_CHUNK) {
      per_tree_set_batch(t, idx, val, m);
      m = 0;
    }
  }
  if (m > 0) per_tree_set_batch(t, idx, val, m);
  if (s == PER_OK && sel.world == 0 && (double)t->node[1] != k->h.total)
    s = PER_ERR_CORRUPT; /* the stored total must be what the leaves give */
  /* the taken items' trajectory ids, newest first */
  if (s == PER_OK && k->traj) {
    peri_tcheck tc;
    peri_sel age = sel; /* a full load is the one shard of a world of 1 */
    if (age.world == 0) age.world = 1;
    memset(&tc, 0, sizeof tc);
    tc.trajs = k->trajs;
    for (i = k->size; i-- > 0;)
      if (peri_ckpt_pick(k, i, age, &slot))
        peri_tcheck_feed(&tc, peri_ckpt_traj(k, slot));
    if (tc.bad) s = PER_ERR_CORRUPT;
  }
  if (s != PER_OK) per_tree_free(t);
  return s;
}

/* Apply a staged load to b: nothing can fail here. */
static void peri_load_apply(per_buffer *b, const peri_ckpt *k, peri_sel sel,
                            per_tree *t, uint32_t n, uint32_t zero) {
  uint32_t cap = b->cfg.capacity, i, j, slot;
  size_t isz = b->cfg.item_size;
  const peri_hdr *h = &k->h;
  peri_layout_take(b, k);
  for (i = 0, j = 0; i < k->size; ++i) {
    if (!peri_ckpt_pick(k, i, sel, &slot)) continue;
    memcpy(b->items + (size_t)j * isz, k->items + (size_t)slot * isz, isz);
    b->gen[j] = sel.world ? 1u : peri_get32(k->gens + (size_t)slot * 4);
    b->ends[j] = k->ends ? k->ends[slot] : (uint8_t)PER_END_NONE;
    b->traj[j] = peri_ckpt_traj(k, slot);
    ++j;
  }
  memset(b->items + (size_t)n * isz, 0, (size_t)(cap - n) * isz);
  memset(b->gen + n, 0, (size_t)(cap - n) * sizeof(uint32_t));
  memset(b->ends + n, 0, cap - n);
  memset(b->traj + n, 0, (size_t)(cap - n) * sizeof(uint32_t));
  b->trajs = k->trajs;
  memcpy(b->tree.node, t->node, per_tree_bytes(cap));
  per_tree_free(t);
  peri_min_build(b->min_node, &b->tree);
  if (b->swap.perm) {
    for (i = 0; i < cap; ++i)
      b->swap.perm[i] =
          (sel.world == 0 && i < n) ? peri_get32(k->perm + (size_t)i * 4) : i;
    b->swap.n = n;
  }
  b->size = n;
  if (sel.world == 0) {
    b->cfg.alpha = k->cfg.alpha;
    b->cfg.beta0 = k->cfg.beta0;
    b->cfg.beta1 = k->cfg.beta1;
    b->cfg.beta_steps = k->cfg.beta_steps;
    b->cfg.eps = k->cfg.eps;
    b->cfg.max_priority = k->cfg.max_priority;
    b->cfg.seed = k->cfg.seed;
    if (k->cfg.seq_len) b->cfg.seq_eta = k->cfg.seq_eta;
    b->pos = k->pos;
    b->added = h->added;
    b->step = h->step;
    b->rng.seed = h->rng_seed;
    b->rng.counter = h->rng_counter;
    b->rng.buf[0] = h->rng_buf0;
    b->rng.buf[1] = h->rng_buf1;
    b->rng.buf[2] = h->rng_buf2;
    b->rng.buf[3] = h->rng_buf3;
    b->rng.avail = h->rng_avail;
    b->zero_hint = h->zero_hint;
  } else {
    b->pos = n % cap;
    b->added = h->added; /* the global count */
    b->zero_hint = zero;
  }
  b->max_leaf = b->cfg.alpha == 0 ? (per_real)1 : (per_real)h->max_leaf;
  if (b->max_node) { /* the stored leaves decide (a shard's, its own) */
    peri_max_build(b->max_node, &b->tree);
    peri_max_live(b);
  }
  if (b->seq_ok) { /* the sequences, from the loaded steps */
    per_tree_clear(&b->seq_tree);
    memset(b->seq_ok, 0, b->seq_tree.capacity);
    peri_min_build(b->seq_min_node, &b->seq_tree);
    peri_seq_refresh_slots(b, 0, cap);
  }
}

/* Read, check, stage, apply, from path or, when path is NULL, from
   mem[0..len): b changes only once everything is checked. */
static per_status peri_load(per_buffer *b, const char *path, const void *mem,
                            size_t len, uint32_t rank, uint32_t world) {
  peri_ckpt k;
  per_tree t;
  peri_sel sel;
  uint32_t n, zero;
  per_status s;
  peri_msg m = peri_buf_msg(b);
  sel.rank = rank;
  sel.world = world;
  sel.by_traj = 0;
  if (path) {
    s = peri_ckpt_open(path, b, world, &k, &m);
  } else {
    peri_src src = peri_src_of(NULL, mem, len);
    memset(&k, 0, sizeof k);
    s = peri_ckpt_take(&src, b, world, &k, &m);
  }
  if (s != PER_OK) return s;
  s = peri_load_stage(b, &k, sel, &t, &n, &zero, &m);
  if (s == PER_OK) peri_load_apply(b, &k, sel, &t, n, zero);
  PER_FREE(k.mem, b->alloc_ctx);
  return s;
}

/* The checks every load starts with: PER_OK, or a refusal said in
   b->error (b not NULL). */
static per_status peri_load_args(per_buffer *b, const char *path) {
  b->error[0] = 0;
  if (!b->items) return peri_buf_fail(b, PER_ERR_NULL, "b is not initialised");
  if (!path) return peri_buf_fail(b, PER_ERR_NULL, "path is NULL");
  return PER_OK;
}

PERDEF per_status per_buffer_load(per_buffer *b, const char *path) {
  per_status s;
  if (!b) return PER_ERR_NULL;
  s = peri_load_args(b, path);
  if (s == PER_OK) s = peri_load(b, path, NULL, 0, 0, 0);
  return peri_buf_end(b, s);
}

PERDEF per_status per_buffer_load_mem(per_buffer *b, const void *mem,
                                      size_t len) {
  if (!b) return PER_ERR_NULL;
  b->error[0] = 0;
  if (!b->items) return peri_buf_fail(b, PER_ERR_NULL, "b is not initialised");
  if (!mem) return peri_buf_fail(b, PER_ERR_NULL, "mem is NULL");
  return peri_buf_end(b, peri_load(b, NULL, mem, len, 0, 0));
}

PERDEF per_status per_buffer_load_shard(per_buffer *b, const char *path,
                                        uint32_t rank, uint32_t world) {
  per_status s;
  if (!b) return PER_ERR_NULL;
  s = peri_load_args(b, path);
  if (s != PER_OK) return s;
  if (world == 0 || rank >= world) {
    peri_msg m = peri_buf_msg(b);
    peri_msg_nu(&m, "rank", rank);
    peri_msg_nu(&m, " is not below world", world);
    return PER_ERR_ARG;
  }
  return peri_buf_end(b, peri_load(b, path, NULL, 0, rank, world));
}

PERDEF per_status per_buffer_load_append(per_buffer *b, const char *path,
                                         uint32_t first, uint32_t count) {
  peri_ckpt k;
  per_real val[PERI_CHUNK];
  uint32_t cap, d0, t, m = 0, prev = 0, runs = 0;
  size_t isz;
  per_status s;
  peri_msg msg;
  if (!b) return PER_ERR_NULL;
  s = peri_load_args(b, path);
  if (s != PER_OK) return s;
  msg = peri_buf_msg(b);
  s = peri_ckpt_open(path, b, 1, &k, &msg); /* any capacity */
  if (s != PER_OK) return peri_buf_end(b, s);
  cap = b->cfg.capacity;
  isz = b->cfg.item_size;
  if (first > k.size || count > k.size - first) {
    peri_msg_nu(&msg, "first", first);
    peri_msg_nu(&msg, " + count", count);
    peri_msg_nu(&msg, " > the checkpoint's items,", k.size);
    s = PER_ERR_ARG;
  } else if (count > cap - b->size) {
    peri_msg_nu(&msg, "count", count);
    peri_msg_nu(&msg, " > the buffer's free slots,", cap - b->size);
    s = PER_ERR_MISMATCH;
  }
  if (s == PER_OK && k.traj) { /* every trajectory id, newest first */
    peri_tcheck tc;
    memset(&tc, 0, sizeof tc);
    tc.trajs = k.trajs;
    for (t = k.size; t-- > 0;)
      peri_tcheck_feed(&tc, peri_ckpt_traj(&k, peri_ckpt_age_slot(&k, t)));
    if (tc.bad) s = PER_ERR_CORRUPT;
  }
  if (s != PER_OK || count == 0) {
    PER_FREE(k.mem, b->alloc_ctx);
    return peri_buf_end(b, s);
  }
  /* b is not full, so it has not wrapped: its free slots are
     [size, capacity) and pos == size */
  d0 = b->size;
  for (t = 0; t < count; ++t) {
    uint32_t slot = peri_ckpt_age_slot(&k, first + t), d = d0 + t;
    uint32_t id = peri_ckpt_traj(&k, slot);
    memcpy(b->items + (size_t)d * isz, k.items + (size_t)slot * isz, isz);
    b->gen[d] = peri_gen_add(b->gen[d], 1);
    b->ends[d] = k.ends ? k.ends[slot] : (uint8_t)PER_END_NONE;
    if (t > 0 && id != prev) ++runs;
    prev = id;
    b->traj[d] = (uint32_t)(b->trajs + runs);
    val[m++] = b->cfg.alpha == 0
                   ? (per_real)1
                   : peri_get_real(k.leaves + (size_t)slot * sizeof(per_real));
    if (m == PERI_CHUNK || t + 1 == count) {
      peri_set_run(b, d + 1 - m, val, m);
      m = 0;
    }
  }
  if (b->cfg.alpha != 0 && !b->max_node && (per_real)k.h.max_leaf > b->max_leaf)
    b->max_leaf = (per_real)k.h.max_leaf;
  b->size += count;
  b->pos = (uint32_t)(((uint64_t)d0 + count) % cap);
  b->added += count;
  b->trajs += (uint64_t)runs + 1;
  if (b->swap.perm) {
    s = per_swap_grow(&b->swap, b->size);
    PER_ASSERT(s == PER_OK);
  }
  peri_seq_touch(b, d0, count);
  peri_layout_take(b, &k);
  PER_FREE(k.mem, b->alloc_ctx);
  return PER_OK;
}

/* ---- n-step adders' pending steps ---- */

static const unsigned char peri_nstep_magic[8] = {0x89, 'P', 'E', 'R',
                                                  'N',  'S', 'T', '\n'};

/* Bytes of one pending step in the file and in the adder's rings. */
static size_t peri_nstep_step_bytes(const per_nstep *a) {
  return 4u + (size_t)a->cfg.obs_size + a->cfg.action_size;
}

static per_status peri_nstep_args(const per_nstep *a, uint32_t n,
                                  const char *path) {
  uint32_t i;
  if (!a || !path) return PER_ERR_NULL;
  if (n == 0) return PER_ERR_ARG;
  for (i = 0; i < n; ++i)
    if (!a[i].reward) return PER_ERR_NULL;
  return PER_OK;
}

static void peri_nstep_cfg_bytes(const per_nstep_config *c, uint32_t count,
                                 unsigned char *p) {
  uint32_t g;
  memcpy(&g, &c->gamma, 4);
  peri_put32(p, c->n);
  peri_put32(p + 4, g);
  peri_put32(p + 8, c->obs_size);
  peri_put32(p + 12, c->action_size);
  peri_put32(p + 16, count);
}

PERDEF per_status per_nstep_save(const per_nstep *a, uint32_t n,
                                 const char *path) {
  peri_writer w;
  unsigned char h[20];
  uint32_t i, j;
  per_status s = peri_nstep_args(a, n, path);
  if (s != PER_OK) return s;
  s = peri_writer_open(&w, path, a[0].alloc_ctx);
  if (s != PER_OK) return s;
  memcpy(h, peri_nstep_magic, 8);
  peri_put32(h + 8, 1u);
  peri_put32(h + 12, PERI_ENDIAN_MARK);
  peri_put32(h + 16, n);
  peri_wbytes(&w, h, 20);
  for (i = 0; i < n; ++i) {
    const per_nstep *ad = &a[i];
    peri_nstep_cfg_bytes(&ad->cfg, ad->count, h);
    peri_wbytes(&w, h, 20);
    for (j = 0; j < ad->count; ++j) {
      uint32_t k = (ad->head + j) % ad->cfg.n, r;
      memcpy(&r, &ad->reward[k], 4);
      peri_put32(h, r);
      peri_wbytes(&w, h, 4);
      peri_wbytes(&w, ad->obs + (size_t)k * ad->cfg.obs_size, ad->cfg.obs_size);
      peri_wbytes(&w, ad->act + (size_t)k * ad->cfg.action_size,
                  ad->cfg.action_size);
    }
  }
  return peri_writer_finish(&w, path);
}

/* Read exactly n bytes into p, adding them to the running CRC. */
static per_status peri_nstep_read(FILE *f, void *p, size_t n, const uint32_t *t,
                                  uint32_t *crc) {
  size_t got = n ? fread(p, 1, n, f) : 0;
  if (ferror(f)) return PER_ERR_IO;
  if (got != n) return PER_ERR_TRUNCATED;
  *crc = peri_crc_run(t, *crc, p, n);
  return PER_OK;
}

/* Read and check the whole file into stage (adder i's pending steps at
   off[i], oldest first; their counts in cnt). */
static per_status peri_nstep_parse(FILE *f, const per_nstep *a, uint32_t n,
                                   unsigned char *stage, const size_t *off,
                                   uint32_t *cnt) {
  unsigned char h[20], want[20];
  uint32_t t[256], crc = 0xffffffffu, i, j;
  per_status s;
  size_t got = fread(h, 1, 20, f);
  if (ferror(f)) return PER_ERR_IO;
  /* as much of the magic as was read must match; then a short file is cut */
  if (got == 0 || memcmp(h, peri_nstep_magic, got < 8 ? got : 8) != 0)
    return PER_ERR_FORMAT;
  if (got < 20) return PER_ERR_TRUNCATED;
  if (peri_get32(h + 8) != 1u) return PER_ERR_VERSION;
  if (peri_get32(h + 12) != PERI_ENDIAN_MARK) return PER_ERR_FORMAT;
  if (peri_get32(h + 16) != n) return PER_ERR_MISMATCH;
  peri_crc_table(t);
  crc = peri_crc_run(t, crc, h, 20);
  for (i = 0; i < n; ++i) {
    size_t step = peri_nstep_step_bytes(&a[i]);
    s = peri_nstep_read(f, h, 20, t, &crc);
    if (s != PER_OK) return s;
    peri_nstep_cfg_bytes(&a[i].cfg, 0, want);
    if (memcmp(h, want, 16) != 0) return PER_ERR_MISMATCH;
    cnt[i] = peri_get32(h + 16);
    if (cnt[i] >= a[i].cfg.n) return PER_ERR_CORRUPT;
    s = peri_nstep_read(f, stage + off[i], (size_t)cnt[i] * step, t, &crc);
    if (s != PER_OK) return s;
    for (j = 0; j < cnt[i]; ++j) {
      uint32_t r = peri_get32(stage + off[i] + (size_t)j * step);
      float v;
      memcpy(&v, &r, 4);
      if (peri_float_status(v) != PER_OK) return PER_ERR_CORRUPT;
    }
  }
  got = fread(h, 1, 4, f);
  if (ferror(f)) return PER_ERR_IO;
  if (got != 4) return PER_ERR_TRUNCATED;
  if (peri_get32(h) != ~crc) return PER_ERR_CHECKSUM;
  if (fgetc(f) != EOF) return PER_ERR_CORRUPT;
  return ferror(f) ? PER_ERR_IO : PER_OK;
}

PERDEF per_status per_nstep_load(per_nstep *a, uint32_t n, const char *path) {
  FILE *f;
  unsigned char *stage = NULL;
  size_t *off = NULL, total = 0;
  uint32_t *cnt, i, j;
  per_status s = peri_nstep_args(a, n, path);
  if (s != PER_OK) return s;
  /* offsets and counts, then room for n_i - 1 steps per adder */
  for (i = 0; i < n; ++i) {
    size_t room = (size_t)(a[i].cfg.n - 1) * peri_nstep_step_bytes(&a[i]);
    if (room > (size_t)-1 - total) return PER_ERR_NOMEM;
    total += room;
  }
  if ((size_t)n > ((size_t)-1 - total) / (sizeof(size_t) + 4))
    return PER_ERR_NOMEM;
  off = (size_t *)PER_MALLOC((size_t)n * (sizeof(size_t) + 4) + total,
                             a[0].alloc_ctx);
  if (!off) return PER_ERR_NOMEM;
  cnt = (uint32_t *)(void *)(off + n);
  stage = (unsigned char *)(cnt + n);
  for (i = 0, total = 0; i < n; ++i) {
    off[i] = total;
    total += (size_t)(a[i].cfg.n - 1) * peri_nstep_step_bytes(&a[i]);
  }
  f = fopen(path, "rb");
  if (!f) {
    PER_FREE(off, a[0].alloc_ctx);
    return PER_ERR_IO;
  }
  s = peri_nstep_parse(f, a, n, stage, off, cnt);
  fclose(f);
  if (s == PER_OK) {
    for (i = 0; i < n; ++i) {
      per_nstep *ad = &a[i];
      size_t step = peri_nstep_step_bytes(ad);
      for (j = 0; j < cnt[i]; ++j) {
        const unsigned char *p = stage + off[i] + (size_t)j * step;
        uint32_t r = peri_get32(p);
        memcpy(&ad->reward[j], &r, 4);
        memcpy(ad->obs + (size_t)j * ad->cfg.obs_size, p + 4, ad->cfg.obs_size);
        memcpy(ad->act + (size_t)j * ad->cfg.action_size,
               p + 4 + ad->cfg.obs_size, ad->cfg.action_size);
      }
      ad->head = 0;
      ad->count = cnt[i];
    }
  }
  PER_FREE(off, a[0].alloc_ctx);
  return s;
}
#endif /* PER_NO_STDIO */

#ifdef __cplusplus
}
#endif

#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic pop
#endif

#endif /* PER_IMPLEMENTATION */

/*
------------------------------------------------------------------------------
LICENSE (MIT)
Copyright (c) 2026 the per authors
Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:
The above copyright notice and this permission notice shall be included in
all copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
*/
