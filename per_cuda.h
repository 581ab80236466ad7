/* per_cuda.h - the CUDA companion of per.h: the same sum tree on the GPU.
   (no warranty; LICENSE: see the end of per.h)

   WHAT IT IS
      Deterministic GPU kernels for per.h's sum tree: batch updates, the
      same update fed with TD errors, stratified sampling and importance-
      sampling weights; and per_cuda_buffer, per.h's replay buffer with
      its items, tree and counters all in device memory (section 6). The
      device tree has exactly per.h's layout, so it moves between host
      and device by a plain copy, and the same updates give
      bitwise-identical trees on both sides. The kernels call per.h's
      own PER_HD functions (descent, Philox, parent recomputation, value
      classification): one source of truth.

   HOW TO USE IT
      Compile per_cuda.cu with nvcc (-ftz=false -prec-div=true
      -prec-sqrt=true, nvcc's defaults, never --use_fast_math; -fmad
      changes nothing: every product the kernels add to is rounded by
      __dmul_rn / __fmul_rn, which nvcc never fuses) and link its object. Linked
      by nvcc, nothing else is needed; linked by a C or C++ compiler, add
      the CUDA runtime and libstdc++ that nvcc would have added:
        nvcc -O2 -ftz=false -prec-div=true -prec-sqrt=true \
             -c per_cuda.cu -o per_cuda.o
        cc -std=c99 main.c per_cuda.o -L/usr/local/cuda/lib64 -lcudart \
           -lstdc++ -lm
      Or install per with Meson and use what it installs, which names all
      of that: pkg-config per_cuda (double) or per_cuda_float, CMake's
      find_package(per COMPONENTS cuda) with per::per_cuda, or Meson's
      dependency('per_cuda'). Include this header from C or C++; it needs
      no CUDA header (a stream is `struct CUstream_st *`, which is what
      cudaStream_t is, so a cudaStream_t is passed as it is; 0 is the
      default stream). PER_REAL must be the same here, in per_cuda.cu and
      in every file that shares trees with it: per_cuda_real_bytes() says
      what per_cuda.cu was built with. per_cuda.cu carries a private
      (PER_STATIC) copy of per.h's implementation, so your program may
      also define PER_IMPLEMENTATION in one of its files.

   CONTENTS
      1. Device tree ........ per_cuda_tree, init_mem, clear, upload, download
      2. Status word ........ per_cuda_status_decode, per_cuda_status_clear,
                              per_cuda_status_keep
      3. Update ............. per_cuda_tree_set_batch, per_cuda_tree_set_td
      4. Sample ............. per_cuda_tree_sample, per_cuda_tree_find
      5. IS weights ......... per_cuda_is_weights
      6. Replay buffer ...... per_cuda_buffer: init_mem, add_batch, sample,
                              update, update_seq, counters, upload,
                              download

   CONVENTIONS (every function)
      - d_ pointers are device memory; the function enqueues its work on
        `stream` and returns at once: it never allocates, never
        synchronises, never waits for the device.
      - The return value is what the host can check without the device:
        NULL pointers, sizes, arguments, a failed CUDA launch. When it is
        not PER_OK nothing was enqueued, except for PER_ERR_DEVICE, whose
        cudaError_t per_cuda_last_error returns. It means one of two
        things. (a) A CUDA error was already pending when the call began
        (yours, that cudaGetLastError has not cleared, or a sticky error
        of the context): the call enqueued nothing and the error stays
        pending (cudaPeekAtLastError still returns it): clear it and call
        again. (b) The runtime refused one of the call's own launches or
        copies: that error is the call's status and is cleared, so the
        next call goes ahead. When (b) comes after part of the call's
        work went in (a later launch refused), the call marks what it
        half did, so that nothing reads it as valid: its status word
        reads PER_ERR_CORRUPT (a tree: upload or clear it before its next
        use), its scratch gets the zeros the next call needs, and a
        per_cuda_buffer is marked broken: its calls then change nothing
        and report PER_ERR_CORRUPT, and its download returns
        PER_ERR_CORRUPT, until per_cuda_buffer_upload of a good state.
      - Device pointers must be aligned for their type (d_status and
        d_counter 8 bytes, d_val sizeof(per_real), d_idx, d_td and d_w 4,
        d_scratch 8): a misaligned one is PER_ERR_MEMORY, refused on the
        host, since a misaligned access on the device is an error of the
        whole CUDA context. cudaMalloc's memory is aligned to 256 bytes.
      - Work runs on the current device (cudaSetDevice): the tree's memory,
        the stream and every d_ pointer must belong to it. A call made
        with another device current fails on the device, not on the host.
      - What depends on device data (a NaN in a batch, an empty tree) is
        written by the device to the caller's status word *d_status (one
        unsigned long long in device memory). Every call that takes one
        overwrites it with its own outcome: 0 = PER_OK, otherwise decode it
        with per_cuda_status_decode. When it is not 0 the call changed
        nothing: the tree is byte for byte as it was and no output array
        was written (as on the CPU). Give each call its own word if you
        want to read them all later.
      - Scratch memory follows the two-phase convention: call with
        d_scratch == NULL and *scratch_bytes gets the size needed (never 0);
        nothing else happens. Then call again with at least that many bytes
        (the size for a batch of n is enough for every smaller batch on
        the same tree). Scratch need not be initialised (the call clears
        what it needs with one memset) and is not kept between calls.
      - Calls on one stream run in order. One tree must not be updated by
        two streams at once, nor read (sampled) by one stream while another
        updates it: the update writes marks into the tree while it runs.
        A per_cuda_buffer's calls all go to one stream (its workspace is
        shared); per_cuda_buffer_download is the one call that waits.

   CUDA GRAPHS
      Every call only enqueues kernels and memsets on `stream`, with no host
      round-trip, so a whole trainer step (sample, your network, update_td)
      can be captured with cudaStreamBeginCapture/EndCapture and replayed.
      Kernel arguments are frozen in a graph, so pass the sampling counter
      through d_counter (advanced on the device); beta of
      per_cuda_is_weights is a kernel argument: keep it fixed per graph, or
      re-capture and swap the graph in (cudaGraphExecUpdate), as
      examples/gpu/gpu_trainer.cu does once per epoch. Each call overwrites
      its status word: to keep an error from any replay, fold the words
      into a sticky one on the device (the example's keep_error). Each
      call is a fixed, small number of graph nodes at any tree size: an
      update or the weights a memset and 2 launches, a sample 1 (2 with a
      device counter), a find a memset and 2. A per_cuda_buffer keeps its
      config (alpha, eps, the beta schedule, seq_eta) with its state in
      device memory, so an upload (a checkpoint with another config)
      changes what a graph captured before it does, and it needs no
      memset: add, sample
      (with weights and the gather) and update are 2 launches each, so its
      whole step is one graph of 6 kernels, captured once
      (examples/gpu/gpu_dqn.cu; the tests capture a step and compare
      every replay with per_buffer, and count its launches).

   BIT FOR BIT
      per_cuda_tree_set_batch and per_cuda_tree_sample give exactly the bits of
      per_tree_set_batch and per_tree_sample (PER_REAL double or float)
      whatever nvcc's -fmad (never --use_fast_math); the CPU side may use any
      flags but -ffast-math (per.h rounds every product it later adds to
      through a barrier no compiler fuses, so there is no contraction flag
      to pass on to your code): only IEEE additions, multiplications and
      divisions and integer operations are used. That holds for the two
      formulas with a pow too, the very functions per.h's buffer
      (per_buffer_update, per_buffer_sample) calls:
        priority  p = (|td| + eps)^alpha (1 when alpha == 0, no pow when
                  alpha == 1; capped at PER_LEAF_MAX), rounded to per_real;
        IS weight w = (pmin / p)^beta (1 when beta == 0 or p == pmin),
                  rounded to float.
      Their pow is per.h's own (peri_pow, peri_pow_f), written from those
      operations and run by the kernels as by the CPU, not CUDA's pow or
      the C library's: so the leaf values and weights are the CPU's bits
      too, at every alpha and beta, and so is everything after them.

   VERIFIED WITHOUT A GPU
      The kernels are also compiled as host C++ by a test-only shim that
      runs every thread of every launch as a loop (forwards, backwards and
      shuffled) and compared byte for byte with per.h. The GPU test binary
      does the same comparisons on a device and skips (exit 77) without one.
      The kernels use no shared memory, barriers or warp intrinsics; two
      threads of a launch touch one location only through integer atomics
      (max, min, CAS, exchange, 32-bit add), or in order: a thread that
      is done arrives at a counter (a fence, then an atomicAdd), and the
      arrival that completes the count goes on alone and acquires what the
      others wrote (a fence). Nobody waits for anybody, so running threads
      one by one, each to its end, is a faithful schedule: the shim logs
      every access of every thread, tracks those hand-overs as
      happens-before edges, and fails on any two accesses of a launch that
      conflict without one; tests/cuda/check_ptx.py checks the PTX (no
      fma, ftz or approximate division, no cooperation, only those
      atomics).

   HOW THE UPDATE WORKS (2 launches, a thread per pair, at any size)
      The tree above the leaves is cut into G groups of five levels (the
      top one shorter), bases b_0 = 0 < b_1 < ... < b_G = depth; every
      node of a level b_g (g >= 1) has a counter in the workspace.
      claim:  each pair is checked (a bad one atomicMax'es (position, code)
         into the call's status, so the first bad one in batch order
         wins, as on the CPU), atomicMax'es "NaN tag | position" into its
         leaf's bit pattern (the leaf ends up tagged with its last
         position; the claim that saw the old value keeps it) and counts
         itself up the path: +1 on its level-b_1 ancestor, and on up while
         its increment was that node's first. A counter of level b_g then
         says how many arrivals to expect: the pairs below it (g = 1) or
         the level-b_{g-1} nodes below it that have pairs.
      settle: each counted pair arrives at its level-b_1 ancestor A (a
         decrement); the arrival that brings the counter to 0 leads A: it
         recomputes A's subtree from its 32 base nodes with
         per_tree_recompute on a copy (a node iff one of its children
         changed - a tagged leaf, or a base node published with its sign
         bit set: no valid node has it - as per_tree_set_batch does),
         writes the base back final and the changed nodes, A with its sign
         bit set, and arrives one group up, where the last leader leads
         again, up to the root, whose leader writes it final. The others
         stop at their first arrival that is not the last. Counters end
         at 0, ready for the next call.
      A refused batch (the claim's status not 0) only counts down and puts
      the claimed leaves back: the tree is byte for byte as it was. A
      buffer's update also folds its totals (stale ids, the largest
      priority) through per-block reduction records in the same launch.
      Atomics per address are the claims of one leaf, the arrivals at one
      counter (at most 32 above level 5) and the 256 threads of a block
      on its record. No float atomics anywhere.
*/
#ifndef PER_CUDA_H_INCLUDED
#define PER_CUDA_H_INCLUDED

#include "per.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PER_CUDA_DEF
#define PER_CUDA_DEF extern
#endif

/* As in per.h, the node type is part of the linker names of the functions
   that take per_real data: a program built with another PER_REAL than
   the per_cuda library fails to link. */
#define per_cuda_tree_bytes PERI_NAME(per_cuda_tree_bytes)
#define per_cuda_tree_init_mem PERI_NAME(per_cuda_tree_init_mem)
#define per_cuda_tree_clear PERI_NAME(per_cuda_tree_clear)
#define per_cuda_tree_upload PERI_NAME(per_cuda_tree_upload)
#define per_cuda_tree_download PERI_NAME(per_cuda_tree_download)
#define per_cuda_tree_set_batch PERI_NAME(per_cuda_tree_set_batch)
#define per_cuda_tree_set_td PERI_NAME(per_cuda_tree_set_td)
#define per_cuda_tree_sample PERI_NAME(per_cuda_tree_sample)
#define per_cuda_tree_find PERI_NAME(per_cuda_tree_find)
#define per_cuda_is_weights PERI_NAME(per_cuda_is_weights)
#define per_cuda_buffer_bytes PERI_NAME(per_cuda_buffer_bytes)
#define per_cuda_buffer_init_mem PERI_NAME(per_cuda_buffer_init_mem)
#define per_cuda_buffer_add_batch PERI_NAME(per_cuda_buffer_add_batch)
#define per_cuda_buffer_sample PERI_NAME(per_cuda_buffer_sample)
#define per_cuda_buffer_update PERI_NAME(per_cuda_buffer_update)
#define per_cuda_buffer_update_seq PERI_NAME(per_cuda_buffer_update_seq)
#define per_cuda_buffer_upload PERI_NAME(per_cuda_buffer_upload)
#define per_cuda_buffer_download PERI_NAME(per_cuda_buffer_download)
#define per_cuda_buffer_counters PERI_NAME(per_cuda_buffer_counters)

/* A CUDA stream; identical to cudaStream_t. */
typedef struct CUstream_st *per_cuda_stream;

/* Largest batch of per_cuda_tree_set_batch / per_cuda_tree_set_td /
   per_cuda_is_weights; larger is PER_ERR_BATCH. (2^22 = 4194304.) */
#define PER_CUDA_MAX_BATCH 0x400000u

/* How far a device result may be from the CPU's, in ulp: 0, since the
   kernels compute pow with per.h's own code (BIT FOR BIT above). Kept for
   code written when the device used CUDA's pow (then 2, 3 or 1, and 1). */
#define PER_CUDA_POW_ULP 0
#define PER_CUDA_TD_ULP 0
#define PER_CUDA_W_ULP 0

/* sizeof(per_real) that per_cuda.cu was compiled with; it must equal
   sizeof(per_real) in your files. */
PER_CUDA_DEF size_t per_cuda_real_bytes(void);

/* The cudaError_t (as an int) behind the most recent PER_ERR_DEVICE that
   a per_cuda call returned to this thread; 0 (cudaSuccess) when none has:
   a call's own failure, or an error already pending when it began
   (CONVENTIONS). Like errno, a later successful call does not reset it.
   Pass it to cudaGetErrorString for a message. */
PER_CUDA_DEF int per_cuda_last_error(void);

/* ======================================================================
   1. Device tree
   ====================================================================== */

/* A tree in device memory, in per.h's layout: d_node[1] is the root,
   leaf i is d_node[leaves + i], 2 * leaves values in all. The descriptor
   lives on the host; it owns nothing. */
typedef struct per_cuda_tree {
  per_real *d_node;  /* device memory, 2 * leaves values */
  uint32_t capacity; /* C: leaves in use are [0, C) */
  uint32_t leaves;   /* L: smallest power of two >= C */
  uint32_t depth;    /* log2(L) */
} per_cuda_tree;

/* Bytes of device memory for `capacity` leaves: per_tree_bytes(capacity)
   (0 when capacity is 0 or above PER_MAX_CAPACITY). */
PER_CUDA_DEF size_t per_cuda_tree_bytes(uint32_t capacity);

/* Describe the tree of `capacity` leaves held by d_mem (`bytes` >=
   per_cuda_tree_bytes(capacity), aligned for per_real). No device work:
   d_mem keeps what it holds (use per_cuda_tree_clear or an upload).
   Errors: PER_ERR_NULL, PER_ERR_CAPACITY, PER_ERR_MEMORY; then *t (when
   not NULL) is zeroed, as per_tree_init_mem does. */
PER_CUDA_DEF per_status per_cuda_tree_init_mem(per_cuda_tree *t,
                                               uint32_t capacity, void *d_mem,
                                               size_t bytes);

/* Enqueue: every node = 0 (an empty tree). Errors: PER_ERR_NULL,
   PER_ERR_CAPACITY (bad descriptor), PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_tree_clear(const per_cuda_tree *t,
                                            per_cuda_stream stream);

/* Enqueue a copy of the CPU tree's 2L values to the device tree
   (cudaMemcpyAsync). Both must have the same capacity (PER_ERR_CAPACITY).
   The host array must stay untouched until the copy is done; from
   pageable memory the copy is synchronous (CUDA's rule), from pinned
   memory (cudaHostRegister / cudaMallocHost) it is asynchronous.
   Errors: PER_ERR_NULL, PER_ERR_CAPACITY, PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_tree_upload(const per_cuda_tree *t,
                                             const per_tree *host,
                                             per_cuda_stream stream);

/* Enqueue a copy of the device tree into the CPU tree (same capacity).
   Read `host` only after the stream has reached this point
   (cudaStreamSynchronize or an event). Errors as per_cuda_tree_upload. */
PER_CUDA_DEF per_status per_cuda_tree_download(const per_cuda_tree *t,
                                               per_tree *host,
                                               per_cuda_stream stream);

/* ======================================================================
   2. Status word
   ====================================================================== */

/* The status in a word written by the device (copy it to the host first).
   0 is PER_OK. For an update, *pos (may be NULL) gets the batch position
   of the first bad pair, the one the CPU reports; 0 otherwise. */
PER_CUDA_DEF per_status per_cuda_status_decode(unsigned long long word,
                                               uint32_t *pos);

/* Enqueue *d_status = 0. (Each call sets its word anyway; this is for
   words you read before any call ran.) Errors: PER_ERR_NULL,
   PER_ERR_MEMORY (d_status not 8-byte aligned), PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_status_clear(unsigned long long *d_status,
                                              per_cuda_stream stream);

/* Enqueue one thread that keeps the first error of many calls: when
   d_keep[0] is 0 and *d_status is not, d_keep[0] = *d_status and
   d_keep[1] = tag; otherwise nothing. d_keep is two words (16 bytes,
   8-byte aligned) that you zero once (cudaMemsetAsync); call this after
   each call whose word you want kept, with a tag that names the call, and
   d_keep then holds the first failure of them all and its tag, through
   any number of graph replays (each call overwrites its own word; this
   one is sticky). Decode d_keep[0] with per_cuda_status_decode. Errors:
   PER_ERR_NULL, PER_ERR_ARG (d_status inside d_keep), PER_ERR_MEMORY (a
   pointer not 8-byte aligned), PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_status_keep(unsigned long long *d_keep,
                                             const unsigned long long *d_status,
                                             unsigned long long tag,
                                             per_cuda_stream stream);

/* ======================================================================
   3. Update
   ====================================================================== */

/* Enqueue leaves d_idx[j] = d_val[j] for j in [0, n), then recompute every
   touched ancestor once from its two children (HOW THE UPDATE WORKS: a
   memset and 2 launches): O(n log L) work, no rebuild. Exactly
   per_tree_set_batch: duplicate indices, the last one wins; -0 is stored
   as +0; the resulting tree has the same bits.
   The whole batch is validated on the device first; the first bad pair in
   batch order sets *d_status (PER_ERR_INDEX when d_idx[j] >= capacity,
   then per_leaf_status of the value: PER_ERR_NAN, PER_ERR_INF,
   PER_ERR_NEGATIVE, PER_ERR_RANGE) and then nothing is written.
   n == 0 sets *d_status = 0 and does nothing else.
   Scratch: for the grid's reduction records, the tree's group counters
   (about capacity / 31 words: 2.2 MB at 2^24 leaves), and a flag and an
   old leaf value per pair; ask with d_scratch NULL.
   Errors returned: PER_ERR_NULL, PER_ERR_CAPACITY (bad descriptor),
   PER_ERR_BATCH (n > PER_CUDA_MAX_BATCH), PER_ERR_MEMORY (scratch too
   small, or a misaligned pointer), PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_tree_set_batch(
    const per_cuda_tree *t, const uint32_t *d_idx, const per_real *d_val,
    uint32_t n, void *d_scratch, size_t *scratch_bytes,
    unsigned long long *d_status, per_cuda_stream stream);

/* per_cuda_tree_set_batch with the leaf values computed on the device from TD
   errors, as per_buffer_update does on the CPU: leaf j =
   (fabs((double)d_td[j]) + eps)^alpha with per.h's pow (exactly 1 when
   alpha == 0), capped at PER_LEAF_MAX, rounded to per_real: the CPU's
   bits (BIT FOR BIT), and the tree is then the exact per_tree_set_batch
   of those values. Validated per pair in
   per_buffer_update's order: a TD error that is NaN (PER_ERR_NAN) or
   infinite (PER_ERR_INF), then PER_ERR_INDEX; the first bad pair in batch
   order sets *d_status and nothing is written. eps and alpha must be
   finite and >= 0 (PER_ERR_ARG). Scratch: per_cuda_tree_set_batch's and
   round_up(sizeof(per_real) n, 256) bytes more (each pair's priority is
   computed once, by its own thread, before the tree is written).
   Duplicates and the other errors as per_cuda_tree_set_batch. */
PER_CUDA_DEF per_status
per_cuda_tree_set_td(const per_cuda_tree *t, const uint32_t *d_idx,
                     const float *d_td, uint32_t n, double eps, double alpha,
                     void *d_scratch, size_t *scratch_bytes,
                     unsigned long long *d_status, per_cuda_stream stream);

/* ======================================================================
   4. Sample
   ====================================================================== */

/* Enqueue the stratified batch of B draws that per_tree_sample draws from
   a per_rng at (seed, counter): stratum i uses u_i = (i + r_i) * seg,
   seg = total / B, r_i from Philox block (seed, counter + i), descends with
   per_tree_descend; d_idx[i] gets the leaf and d_val[i] (may be NULL) its
   value, so its probability is d_val[i] / d_node[1] (per_cuda_is_weights
   takes d_val as it is). The indices and values are exactly the CPU's;
   every index has a value > 0.
   d_counter: NULL to use `counter`; otherwise the counter is read from
   *d_counter on the device (`counter` is ignored) and, on success,
   advanced by B there, as per_tree_sample advances rng->counter (for CUDA
   graphs). On the host, with d_counter NULL, add B to your counter after
   each call (the CPU does so only on success: check the status).
   *d_status: PER_ERR_EMPTY (total 0) or PER_ERR_DEGENERATE (total not
   finite); then nothing is written and *d_counter is not advanced.
   Errors returned: PER_ERR_NULL, PER_ERR_CAPACITY (bad descriptor),
   PER_ERR_BATCH (B == 0), PER_ERR_MEMORY (a misaligned pointer),
   PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_tree_sample(
    const per_cuda_tree *t, uint64_t seed, uint64_t counter,
    unsigned long long *d_counter, uint32_t B, uint32_t *d_idx, per_real *d_val,
    unsigned long long *d_status, per_cuda_stream stream);

/* Enqueue per_tree_find_batch: d_idx[i] = the leaf whose prefix interval
   holds d_u[i] (per_tree_descend; u >= total gives the last leaf with
   mass) and d_val[i] (may be NULL) its value, for i < n: the CPU's leaves
   exactly. *d_status, checked as the CPU checks: the first d_u[i] in
   order that is NaN (PER_ERR_NAN) or negative (PER_ERR_NEGATIVE), its
   position; else PER_ERR_EMPTY (total 0) or PER_ERR_DEGENERATE (total
   not finite), position n; then nothing is written. n == 0 sets
   *d_status = 0. A memset and 2 launches. Errors returned: PER_ERR_NULL,
   PER_ERR_CAPACITY (bad descriptor), PER_ERR_BATCH (n >
   PER_CUDA_MAX_BATCH), PER_ERR_MEMORY (a misaligned pointer),
   PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_tree_find(const per_cuda_tree *t,
                                           const per_real *d_u, uint32_t n,
                                           uint32_t *d_idx, per_real *d_val,
                                           unsigned long long *d_status,
                                           per_cuda_stream stream);

/* ======================================================================
   5. Importance-sampling weights
   ====================================================================== */

/* Enqueue the IS weights of a sampled batch (d_val[0..B):
   per_cuda_tree_sample's values), normalized by the batch maximum as
   per_buffer_sample does:
      w_i = (N P_i)^-beta / max_j (N P_j)^-beta = (pmin / d_val[i])^beta
   with pmin the smallest d_val (N and the total cancel out), computed in
   double with per.h's pow and rounded to float into d_w[i]: exactly 1 for
   the smallest value and when beta == 0, every weight in [0, 1], never
   NaN; the CPU's bits (BIT FOR BIT). The minimum is exact and
   order-independent (integer atomics on the bit patterns, per block then
   per grid). A memset and 2 launches. d_w must
   not overlap d_val. beta finite and >= 0 (PER_ERR_ARG).
   *d_status: for the first d_val[i] that is not a valid positive leaf,
   per_leaf_status's code, or PER_ERR_ARG for 0; then d_w is not written.
   Scratch: 40 (1 + ceil(B / 256)) bytes. Errors returned: PER_ERR_NULL,
   PER_ERR_BATCH
   (B == 0 or > PER_CUDA_MAX_BATCH), PER_ERR_ARG, PER_ERR_MEMORY (scratch
   too small, or a misaligned pointer), PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_is_weights(const per_real *d_val, uint32_t B,
                                            double beta, float *d_w,
                                            void *d_scratch,
                                            size_t *scratch_bytes,
                                            unsigned long long *d_status,
                                            per_cuda_stream stream);

/* ======================================================================
   6. Replay buffer
   ======================================================================
   per_buffer on the device: the item ring, the generations, the episode
   ends and trajectory ids, the sum tree (and the min tree of
   PER_WEIGHTS_BUFFER_MAX), the Philox stream, the beta step and every
   counter (size, write position, max leaf) live in device memory and are
   read and advanced by the kernels, so no call waits for the device and
   a whole trainer step (add, sample, your network, update) can be
   captured once and replayed as a CUDA graph: arguments frozen in the
   graph are the batch sizes, the device pointers and the sample options,
   never the buffer's state or config (both in device memory: an upload
   changes what a graph captured before it does).

   BIT FOR BIT with per_buffer: the same config, seed and sequence of
   add_batch / sample / update calls give the same ids, items, weights,
   stale counts, statuses and state (download it and compare per_buffer's
   bytes) as on the CPU, at every alpha and beta (one pow, per.h's: BIT
   FOR BIT above). The host test, and the GPU test on a device, hold the
   kernels to the CPU's bits over random sequences of calls, both node
   types.

   Not on the device (PER_ERR_ARG): the live maximum for new items
   (PER_MAX_LIVE). Sequence replay (seq_len, PER_SAMPLE_SEQUENCES,
   per_cuda_buffer_update_seq), distinct draws (PER_SAMPLE_UNIQUE),
   windows, trajectory windows (PER_SAMPLE_TRAJECTORIES),
   PER_SAMPLE_BETA, buffer-max weights, episode ends, alpha = 0 and the
   degenerate case (eligible mass 0 or not finite: uniform draws,
   weights 1) are as on the CPU.

   SEQUENCES (config seq_len > 0, R2D2): the device keeps per_buffer's
   sequence tree, its min tree and validity flags, and refreshes the
   sequences holding a step that an add or an update changed, as
   per_buffer does: each such call is 2 more launches (4 in all), and a
   sequence's leaf is recomputed from its seq_len steps by one thread.
   max_batch bounds an update_seq's sequences, and max_batch * seq_len
   (its TD errors, and a sample's rows) must be <= PER_CUDA_MAX_BATCH.

   DISTINCT DRAWS (PER_SAMPLE_UNIQUE) are made by one device thread, in
   order, by per_buffer_sample's methods (successive sampling by i.i.d.
   draws keeping first occurrences, then zeroing the picks; in a window,
   zeroing each pick; alpha = 0, the swap sampler's permutation, which the
   device buffer keeps as per_buffer does; degenerate mass, Floyd's
   uniform picks): each pick is a descent of dependent loads, so a batch
   costs about B times one descent's latency (about a millisecond for B
   = 1024 at 2^24 items), where a draw with replacement costs one. Use it
   where the batch must not repeat an item, not in the hot loop of a
   large batch.

   LAUNCHES: add_batch, sample (with weights and the gather) and update
   are 2 kernels each and no memset (n == 0: a memset of the status), at
   any capacity and batch size: a trainer step of add, sample and update
   is 6 kernels (with sequences: add_batch, update and update_seq are 4,
   a step 10). The second kernel of each call writes *d_status; the
   workspace's counters and reduction records (in d_mem, about capacity
   / 31 words of it) start at 0 and every call, refused or not, leaves
   them at 0 again.

   Calls on one buffer must be enqueued on one stream (or ordered by
   events): they share the buffer's workspace. */

/* The descriptor lives on the host and owns nothing; every pointer is
   into the caller's device memory given to per_cuda_buffer_init_mem. */
typedef struct per_cuda_buffer {
  per_config cfg;           /* validated as by per_buffer_init */
  uint32_t max_batch;       /* largest n of an add or update, B of a sample,
                               sequences of an update_seq */
  unsigned char *d_items;   /* capacity * item_size bytes: slot i at
                               d_items + i * item_size */
  uint32_t *d_gen;          /* capacity: as per_buffer.gen */
  uint8_t *d_ends;          /* capacity: as per_buffer.ends */
  uint32_t *d_traj;         /* capacity: as per_buffer.traj */
  per_cuda_tree tree;       /* leaf i = priority of slot i */
  per_real *d_min_node;     /* PER_WEIGHTS_BUFFER_MAX: 2L values; else NULL */
  void *d_state;            /* the counters (private layout) */
  void *d_work;             /* the calls' workspace (private layout) */
  uint32_t *d_perm;         /* alpha = 0: capacity, as per_buffer.swap.perm
                               (distinct draws); else NULL */
  per_cuda_tree seq_tree;   /* seq_len > 0: as per_buffer.seq_tree (leaf j:
                               the sequence starting at slot j * seq_stride);
                               else zeroed */
  per_real *d_seq_min_node; /* seq_len > 0 with PER_WEIGHTS_BUFFER_MAX: its
                               min tree; else NULL */
  uint8_t *d_seq_ok;        /* seq_len > 0: capacity / seq_stride bytes, as
                               per_buffer.seq_ok; else NULL */
} per_cuda_buffer;

/* Device bytes per_cuda_buffer_init_mem needs for cfg and batches of up
   to max_batch; 0 when cfg is not valid (per_buffer_init's rules, plus
   the device's: no PER_MAX_LIVE), max_batch is 0 or above
   PER_CUDA_MAX_BATCH (or, with seq_len > 0, max_batch * seq_len is), or
   the size overflows. */
PER_CUDA_DEF size_t per_cuda_buffer_bytes(const per_config *cfg,
                                          uint32_t max_batch);

/* Lay out a buffer in d_mem (`bytes` >= per_cuda_buffer_bytes, 256-byte
   aligned, e.g. from cudaMalloc) and enqueue its reset: empty, items
   zeroed, the stream at cfg->seed, max leaf cfg->max_priority (1 with
   alpha 0), as per_buffer_init. Errors: PER_ERR_NULL, the config errors
   of per_buffer_init, PER_ERR_ARG (PER_MAX_LIVE), PER_ERR_BATCH
   (max_batch 0 or > PER_CUDA_MAX_BATCH, or max_batch * seq_len >
   PER_CUDA_MAX_BATCH), PER_ERR_MEMORY (bytes too few,
   d_mem not 256-byte aligned), PER_ERR_DEVICE; then *b is zeroed. */
PER_CUDA_DEF per_status per_cuda_buffer_init_mem(per_cuda_buffer *b,
                                                 const per_config *cfg,
                                                 uint32_t max_batch,
                                                 void *d_mem, size_t bytes,
                                                 per_cuda_stream stream);

/* Enqueue per_buffer_add_steps: n items from d_items (device memory, n *
   item_size bytes, any alignment) as one trajectory, with episode ends
   d_ends[j] (device memory; NULL: every step PER_END_NONE), at the max
   leaf; when n > capacity only the last capacity stay. n == 0 sets
   *d_status = 0 and does nothing else. *d_status: PER_ERR_ARG (the first
   d_ends[j] that is not a PER_END_*; its position), then nothing is
   stored. Errors returned: PER_ERR_NULL, PER_ERR_BATCH (n > max_batch),
   PER_ERR_MEMORY (d_status not 8-byte aligned), PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_buffer_add_batch(const per_cuda_buffer *b,
                                                  const void *d_items,
                                                  uint32_t n,
                                                  const uint8_t *d_ends,
                                                  unsigned long long *d_status,
                                                  per_cuda_stream stream);

/* Enqueue per_buffer_sample of B draws (opts: NULL, or flags among
   PER_SAMPLE_UNIQUE, PER_SAMPLE_BETA, PER_SAMPLE_TRAJECTORIES and
   PER_SAMPLE_SEQUENCES, beta, window, mask; read on the host, so they
   are frozen in a graph). Outputs, device memory, each may be NULL:
   d_items_out B * item_size bytes (any alignment), d_ids B ids (slot |
   generation << 32), d_weights B IS weights. With PER_SAMPLE_SEQUENCES
   (a buffer with seq_len = L > 0) B sequences, as per_buffer_sample
   draws them: d_items_out B * L * item_size bytes, sequence j's steps
   at [j * L, (j + 1) * L); d_ids sequence ids (with PER_ID_SEQ, for
   per_cuda_buffer_update_seq); opts->mask, when not NULL, device memory
   of B * L bytes (1 up to and including a sequence's first episode end,
   then 0). The beta schedule reads the device's step, which a
   successful call advances, as it does the stream. *d_status:
   PER_ERR_EMPTY (nothing stored), PER_ERR_TOO_FEW (PER_SAMPLE_UNIQUE and
   fewer than B eligible items (sequences) with priority > 0, or, with
   degenerate mass, fewer than B eligible ones; sequences: none of the
   eligible ones is valid); then nothing is written or advanced. Errors
   returned: PER_ERR_NULL, PER_ERR_ARG (unknown flags,
   PER_SAMPLE_SEQUENCES on a buffer without seq_len, beta NaN, infinite
   or negative), PER_ERR_BATCH (B == 0 or > max_batch; PER_SAMPLE_UNIQUE
   and B > config max_unique), PER_ERR_MEMORY (a misaligned d_ids,
   d_weights or d_status), PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_buffer_sample(
    const per_cuda_buffer *b, uint32_t B, const per_sample_opts *opts,
    void *d_items_out, uint64_t *d_ids, float *d_weights,
    unsigned long long *d_status, per_cuda_stream stream);

/* Enqueue per_buffer_update: leaf (|d_td[j]| + eps)^alpha for the id
   d_ids[j], j < n; stale ids (slot overwritten since the draw) skipped
   and their count written to *d_stale (device memory, may be NULL) on
   success; duplicates: the last one wins; the max leaf grows to the
   largest value written. *d_status: the first bad pair in batch order,
   PER_ERR_NAN or PER_ERR_INF (a TD error), PER_ERR_INDEX (an id sample
   never handed out); then nothing is applied and *d_stale is untouched.
   n == 0 sets *d_status = 0 and *d_stale = 0. Errors returned:
   PER_ERR_NULL, PER_ERR_BATCH (n > max_batch), PER_ERR_MEMORY (a
   misaligned pointer), PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_buffer_update(const per_cuda_buffer *b,
                                               const uint64_t *d_ids,
                                               const float *d_td, uint32_t n,
                                               uint32_t *d_stale,
                                               unsigned long long *d_status,
                                               per_cuda_stream stream);

/* Enqueue per_buffer_update_seq: for the sequence ids d_ids[j], j < n
   (from a PER_SAMPLE_SEQUENCES sample), step t's leaf becomes (|d_td[j *
   seq_len + t]| + eps)^alpha for the steps up to the sequence's first
   episode end (the masked ones are not written, but their TD errors must
   be finite); where sequences overlap, the last write of a step wins;
   then every sequence holding a changed step gets its priority again.
   Stale ids are skipped and counted in *d_stale (device memory, may be
   NULL) on success. *d_status: the first bad sequence in batch order
   (its position j), checked as the CPU checks it: PER_ERR_INDEX (an id
   sample never handed out, or a current id whose sequence is not
   valid), PER_ERR_NAN or PER_ERR_INF (one of its TD errors); then nothing
   is applied and *d_stale is untouched. n == 0 sets *d_status = 0 and
   *d_stale = 0. 4 launches. Errors returned: PER_ERR_NULL, PER_ERR_ARG (a
   buffer without seq_len), PER_ERR_BATCH (n > max_batch), PER_ERR_MEMORY
   (a misaligned pointer), PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_buffer_update_seq(
    const per_cuda_buffer *b, const uint64_t *d_ids, const float *d_td,
    uint32_t n, uint32_t *d_stale, unsigned long long *d_status,
    per_cuda_stream stream);

/* A device buffer's counters: per_buffer's fields of the same names. */
typedef struct per_cuda_counters {
  uint64_t size;   /* items stored */
  uint64_t pos;    /* the slot the next item goes to */
  uint64_t added;  /* items added in total */
  uint64_t trajs;  /* trajectories added in total */
  uint64_t step;   /* scheduled samples so far (the beta step) */
  double max_leaf; /* the leaf new items get */
} per_cuda_counters;

/* Enqueue a copy of the buffer's counters to *d_out (device memory,
   8-byte aligned; one thread), as they are once the stream has run what
   was enqueued before: read it after that (len() without a download).
   Errors: PER_ERR_NULL, PER_ERR_MEMORY, PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_buffer_counters(const per_cuda_buffer *b,
                                                 per_cuda_counters *d_out,
                                                 per_cuda_stream stream);

/* Enqueue a copy of a CPU buffer's state (items, generations, ends,
   trajectory ids, trees, the swap permutation of alpha = 0, sequence
   tree and flags, stream, counters) to the device buffer; the device
   buffer takes host->cfg's alpha, betas, beta_steps, eps, max_priority
   and seed (and seq_eta), as per_buffer_load does, and keeps its
   max_unique. host must have the device buffer's capacity, item_size,
   flags, seq_len and seq_stride, and alpha 0 on both or neither
   (PER_ERR_ARG). The copies are from pageable memory: they have
   read host when this returns. It also repairs a broken buffer
   (CONVENTIONS: PER_ERR_DEVICE): its workspace is reset and its state
   replaced. Errors: PER_ERR_NULL, PER_ERR_ARG, PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_buffer_upload(per_cuda_buffer *b,
                                               const per_buffer *host,
                                               per_cuda_stream stream);

/* Copy the device buffer's state into a CPU buffer (initialised with
   per_buffer_init for a config with the same capacity, item_size, flags,
   seq_len and seq_stride, and alpha 0 on both or neither; PER_ERR_ARG
   otherwise),
   which then holds exactly what a per_buffer given the same calls holds
   (the swap permutation of alpha = 0 too), and takes the device buffer's
   alpha, betas, beta_steps, eps, max_priority and seed (and seq_eta;
   host keeps its
   max_unique, which its memory was sized for): per_buffer_save works on
   it. The one call here that waits: it
   synchronises `stream`. PER_ERR_CORRUPT with host untouched: the
   buffer is broken (a call failed halfway: CONVENTIONS, PER_ERR_DEVICE).
   The result is checked (per_buffer_check): PER_ERR_CORRUPT then means
   the device state was not valid (device memory overwritten by
   something else). After that PER_ERR_CORRUPT or PER_ERR_DEVICE host
   holds a partial copy: per_buffer_free it. Errors:
   PER_ERR_NULL, PER_ERR_ARG, PER_ERR_CORRUPT, PER_ERR_DEVICE. */
PER_CUDA_DEF per_status per_cuda_buffer_download(const per_cuda_buffer *b,
                                                 per_buffer *host,
                                                 per_cuda_stream stream);

#ifdef __cplusplus
}
#endif

#endif /* PER_CUDA_H_INCLUDED */
