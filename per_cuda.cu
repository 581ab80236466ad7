// per_cuda.cu - kernels and launchers of per_cuda.h (read its top comment).
//
// Build: nvcc -fmad=false -ftz=false -prec-div=true (never
// --use_fast_math), e.g.
//   nvcc -O2 -fmad=false -ftz=false -prec-div=true
//        -gencode arch=compute_80,code=sm_80
//        -gencode arch=compute_90,code=[sm_90,compute_90] -c per_cuda.cu
//
// CONTENTS
//    Internals: types and helpers the kernels share ........... >>internals
//    Kernels: hand-overs through arrival counters ............... >>arrival
//    Kernels: a block's cooperative section ........................ >>block
//    Kernels: the tree's update (claim, settle) .................. >>update
//    Kernels: the tree's stratified sample ....................... >>sample
//    Kernels: importance-sampling weights ....................... >>weights
//    Kernels: a buffer's state, add and sampling plan ............ >>buffer
//    Kernels: sequence replay ................................. >>sequences
//    Kernels: a buffer's sample (distinct draws, draw, deliver) .... >>draw
//    Launchers: launch shapes, the tree's ........................ >>launch
//    Launchers: a buffer's device memory and calls ........ >>launch_buffer
//    The API: per_cuda.h's functions ................................ >>api
//    (grep for the >>markers)
//
// The same source also compiles as plain host C++ under the test-only shim
// tests/cuda/cuda_host_shim.h, which defines PER_CUDA_HOST_SHIM, the CUDA
// keywords, the runtime calls used here, integer atomics and
// PER_CUDA_LAUNCH (every block and thread of the grid run as loops). So the
// kernels are written for that to be a faithful emulation:
//   - no warp intrinsics, no reliance on the order in which threads run,
//     and no thread ever waits for another, but at the barriers of a
//     block's cooperative section (>>block: one block's threads as lanes,
//     shared memory, PERI_CUDA_SYNC), which the shim runs as lanes in
//     turn, barrier by barrier;
//   - a memory location that two threads of one launch may both touch is
//     touched by integer atomics only (atomicMax/Min/CAS/Exch/Add), or in
//     order through a hand-over: a thread that is done with its part
//     arrives at a counter (PERI_CUDA_ARRIVE: a release fetch_add), and
//     only the arrival that completes the count goes on, after
//     PERI_CUDA_ACQUIRE (an acquire fence), reading what the arrived
//     threads wrote (PERI_CUDA_LDCG: from L2, never a stale L1 line);
//   - ordering between launches comes from kernel boundaries on one
//     stream;
//   - every plain load and store of device memory in a kernel is written
//     PERI_CUDA_LD / PERI_CUDA_LDCG / PERI_CUDA_ST, so that the shim can
//     log each thread's accesses and report any two of one launch that
//     conflict (a plain write and any other access, or a plain read and
//     an atomic) unless a hand-over orders them: the races a loop of whole
//     threads would hide. Only the descents (per.h's and
//     peri_cuda_descend) and a sample's plan (per.h's peri_plan_of)
//     read the tree, the trajectory ids and the sequences' flags
//     directly, in launches that write none of them, or where one thread
//     alone writes them, after a barrier of its block's section that
//     orders the reads before (a sample's distinct draws: per.h's
//     peri_plan_window_picks, the fallback of the whole tree's).
// No float atomics: tree nodes get their values from per_tree_recompute
// (a parent) or from the batch (a leaf); integer atomics on their bit
// patterns only claim leaves.
#define PER_STATIC
#define PER_IMPLEMENTATION
#include "per.h"
#include "per_cuda.h"

#ifndef PER_CUDA_HOST_SHIM
#include <cuda/atomic>
#include <cuda_runtime.h>
#endif

#include <math.h>
#include <string.h>

#ifndef PER_CUDA_LAUNCH
#define PER_CUDA_LAUNCH(kernel, grid, block, stream, ...) \
  kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#endif
#ifndef PERI_CUDA_LD
#define PERI_CUDA_LD(p) (*(p))
#define PERI_CUDA_ST(p, v) (*(p) = (v))
#endif

/* >>internals: the types and helpers the kernels share */

#define PERI_CUDA_BLOCK_THREADS 256u

// Every kernel is launched with at most PERI_CUDA_BLOCK_THREADS threads a
// block, and says so, with at least 2 such blocks resident on an SM:
// ptxas keeps each within the registers that leaves a thread (128), so
// no launch of a call is ever refused for them, and an SM holds 16 warps
// of the settle, not 8 (tests/cuda/check_resources.py reads what ptxas
// made of each: fewer than 128, no spills).
#define PERI_CUDA_BOUNDS __launch_bounds__(PERI_CUDA_BLOCK_THREADS, 2)
// The draw (its strata and its block's sections in one kernel) is capped
// at 96 registers instead (__maxnreg__, from nvcc 12.4; it excludes
// __launch_bounds__): 2 blocks of 256 fit as well, and ptxas needs no
// spills, where 3 blocks' 80 made it spill. Older nvcc: PERI_CUDA_BOUNDS.
#if defined(__CUDACC_VER_MAJOR__) && \
    (__CUDACC_VER_MAJOR__ > 12 ||    \
     (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
#define PERI_CUDA_BOUNDS_DRAW __maxnreg__(96)
#else
#define PERI_CUDA_BOUNDS_DRAW PERI_CUDA_BOUNDS
#endif

// The unsigned integer type with the size of per_real: atomics on a node's
// bit pattern use it.
template <size_t N> struct peri_cuda_uint_of;
template <> struct peri_cuda_uint_of<4> { typedef unsigned int type; };
template <> struct peri_cuda_uint_of<8> { typedef unsigned long long type; };
typedef peri_cuda_uint_of<sizeof(per_real)>::type peri_cuda_bits;

// A status word: 0 is PER_OK; otherwise the high half holds
// 0xFFFFFFFF - pos and the low half the code, so that atomicMax keeps the
// smallest batch position: the first bad pair, which is what the CPU
// reports. Positions are < PER_CUDA_MAX_BATCH.
static __host__ __device__ inline unsigned long long peri_cuda_status_word(
    uint32_t pos, per_status code) {
  return ((unsigned long long)(0xFFFFFFFFu - pos) << 32) |
         (unsigned long long)(uint32_t)code;
}

// Word w with its position divided by div (a key that orders several
// checks per batch entry, back to the entry).
static __host__ __device__ inline unsigned long long peri_cuda_status_per(
    unsigned long long w, uint32_t div) {
  uint32_t pos = 0xFFFFFFFFu - (uint32_t)(w >> 32);
  if (!w || div <= 1u) return w;
  return ((unsigned long long)(0xFFFFFFFFu - pos / div) << 32) |
         (w & 0xFFFFFFFFull);
}

static __host__ __device__ inline peri_cuda_bits peri_cuda_to_bits(per_real v) {
  peri_cuda_bits b;
  memcpy(&b, &v, sizeof b);
  return b;
}

static __host__ __device__ inline per_real peri_cuda_from_bits(
    peri_cuda_bits b) {
  per_real v;
  memcpy(&v, &b, sizeof v);
  return v;
}

// The storage of a node seen as its bit pattern, for integer atomics.
// (The CUDA guide's own double atomics use this cast.)
static __host__ __device__ inline peri_cuda_bits *peri_cuda_as_bits(
    per_real *p) {
  return reinterpret_cast<peri_cuda_bits *>(p);
}

// A leaf claimed by batch position j during an update holds TAG | j
// (TAG: PERI_CUDA_CLAIM_TAG): a negative NaN, above every valid leaf's
// pattern as an unsigned integer (valid leaves are >= +0, sign bit clear),
// and larger for larger j, so atomicMax leaves the last position: the last
// one wins.
#define PERI_CUDA_CLAIM_TAG ((peri_cuda_bits)(~(peri_cuda_bits)0) << 22)
static_assert(PER_CUDA_MAX_BATCH <= ((peri_cuda_bits)1 << 22),
              "a claim tag's 22 low bits must hold every batch position");

// The priority, IS weight, TD status, samplable and leaves-for-capacity
// rules are per.h's own PER_HD functions (peri_priority, peri_weight,
// peri_float_status, peri_samplable, peri_leaves_for): one definition for
// the CPU and the kernels.

// The pairs (leaf, value) of an update. Leaf j is idx[j], or the slot of
// ids[j] (a buffer's ids: slot | generation << 32; a pair whose generation
// is not its slot's, gen[slot], is stale: it takes part in nothing). Value
// j is val[j], the priority of td[j], or *one for every pair (an add).
struct peri_cuda_pairs {
  const uint32_t *idx; // one of idx / ids is NULL
  const uint64_t *ids;
  const uint32_t *gen; // with ids
  const per_real *val; // one of val / td / one is not NULL
  const float *td;
  const per_real *one;
  double eps, alpha;
};

static __host__ __device__ inline peri_cuda_pairs peri_cuda_pairs_none(void) {
  peri_cuda_pairs v;
  memset(&v, 0, sizeof v);
  return v;
}

static __host__ __device__ inline per_real peri_cuda_pair_value(
    const peri_cuda_pairs &v, uint32_t j) {
  if (v.td) return peri_priority(PERI_CUDA_LD(&v.td[j]), v.eps, v.alpha);
  return v.one ? PERI_CUDA_LD(v.one) : PERI_CUDA_LD(&v.val[j]);
}

// The values a lead (the settle's subtree rebuild) gives claimed leaves:
// val[j], or *one for every pair (an add). Never TD errors: the claim
// turns those into priorities first, so no pow is inlined into the
// unrolled rebuild (its 32 leaves would each carry one).
struct peri_cuda_vals {
  const per_real *val, *one;
};

static __host__ __device__ inline peri_cuda_vals peri_cuda_vals_of(
    const peri_cuda_pairs &v) {
  peri_cuda_vals x;
  x.val = v.val;
  x.one = v.one;
  return x;
}

static __host__ __device__ inline per_real peri_cuda_val_at(
    const peri_cuda_vals &v, uint32_t j) {
  return v.one ? PERI_CUDA_LD(v.one) : PERI_CUDA_LD(&v.val[j]);
}

static __host__ __device__ inline uint32_t peri_cuda_pair_leaf(
    const peri_cuda_pairs &v, uint32_t j) {
  return v.idx ? PERI_CUDA_LD(&v.idx[j]) : (uint32_t)PERI_CUDA_LD(&v.ids[j]);
}

// Why pair j cannot be applied, or PER_OK, in the CPU's order: for values,
// per_tree_set_batch's (the index, then the value); for TD errors,
// per_buffer_update's (the TD error, then the index; the priority of a
// finite TD error is always a valid leaf).
static __host__ __device__ inline per_status peri_cuda_pair_status(
    const peri_cuda_pairs &v, uint32_t j, uint32_t capacity) {
  per_status s;
  if (v.td) {
    s = peri_float_status(PERI_CUDA_LD(&v.td[j]));
    if (s != PER_OK) return s;
    return peri_cuda_pair_leaf(v, j) >= capacity ? PER_ERR_INDEX : PER_OK;
  }
  if (peri_cuda_pair_leaf(v, j) >= capacity) return PER_ERR_INDEX;
  return per_leaf_status(peri_cuda_pair_value(v, j));
}

static __device__ inline uint32_t peri_cuda_thread_id(void) {
  return (uint32_t)blockIdx.x * (uint32_t)blockDim.x + (uint32_t)threadIdx.x;
}

/* >>arrival: hand-overs between a launch's threads */
// A launch's threads hand work on through arrival counters (unsigned int
// in device memory): a thread that is done with its part arrives
// (PERI_CUDA_ARRIVE: a release fetch_add), and the one whose arrival
// completes the count - the last of those the counter waits for - acquires
// (PERI_CUDA_ACQUIRE: an acquire fence) and so sees everything they wrote before
// arriving; it goes on alone, nobody waits. Loads of what other threads of
// the launch wrote go through PERI_CUDA_LDCG (the L2, never a stale L1
// line). The host shim turns each of these into a happens-before edge of
// its race detector.
// On a GPU an arrival is a release fetch_add at device scope, and the
// completing one's acquire an acquire fence at device scope after it (its
// fetch_add read the release sequence of every arrival before it): PTX
// atom.add.release.gpu and fence.acq_rel.gpu, not membar.gl (sequentially
// consistent: the SM's L1 invalidated at every arrival). The _BLOCK pair
// is the same at block scope, for a counter that one block's threads
// alone arrive at.
#ifndef PERI_CUDA_ARRIVE
#define PERI_CUDA_ARRIVE(c, v)                                                \
  (cuda::atomic_ref<unsigned int, cuda::thread_scope_device>(*(c)).fetch_add( \
      (v), cuda::memory_order_release))
#define PERI_CUDA_ACQUIRE(c)                            \
  cuda::atomic_thread_fence(cuda::memory_order_acquire, \
                            cuda::thread_scope_device)
#define PERI_CUDA_ARRIVE_BLOCK(c, v)                                         \
  (cuda::atomic_ref<unsigned int, cuda::thread_scope_block>(*(c)).fetch_add( \
      (v), cuda::memory_order_release))
#define PERI_CUDA_ACQUIRE_BLOCK(c)                      \
  cuda::atomic_thread_fence(cuda::memory_order_acquire, \
                            cuda::thread_scope_block)
#define PERI_CUDA_LDCG(p) __ldcg(p)
#endif

/* >>block: a block's cooperative section */
// Where a block's threads work together (a sample's uniform draws of
// degenerate mass and its distinct draws: counts by prefix sums, first
// occurrences by atomics on a set), they do it in a section that
// every thread of the block enters (PERI_CUDA_BLOCK_SECTION() is true in
// each; in the shim, in thread 0 alone, which then plays every lane):
//   - PERI_CUDA_LANES(t) { ... } is one thread's part, t its lane
//     (threadIdx.x); in the shim the body runs for every t < blockDim.x
//     in turn (forwards, backwards or shuffled, as the shim's thread
//     order), each as that thread. Nothing a body sets outlives it but
//     what it stores (shared memory, PERI_CUDA_SHARED, or device memory),
//     and no break leaves it (continue ends the lane's part);
//   - PERI_CUDA_SYNC() is __syncthreads(): whatever a lane stored before
//     it, every lane sees after it (the shim orders them so);
//   - the code between them is the same in every thread (it reads what
//     the lanes stored, stores nothing): the section's control flow is
//     uniform, so every thread meets every barrier.
// Shared memory is only ever touched through PERI_CUDA_LD / _ST, and
// the lanes' atomics on device memory (a sample's set) are ordered with
// plain accesses by the barriers as well.
// PERI_CUDA_BLOCK_ALL: 1 where every thread of a block must reach the
// section to meet its barriers (a GPU); 0 in the shim, where thread 0
// plays them all, so the others need not come.
#ifndef PERI_CUDA_SYNC
#define PERI_CUDA_BLOCK_ALL 1
#define PERI_CUDA_BLOCK_SECTION() true
#define PERI_CUDA_LANES(t) \
  for (uint32_t t = threadIdx.x, t##_once = 1; t##_once; t##_once = 0)
#define PERI_CUDA_SYNC() __syncthreads()
#define PERI_CUDA_SHARED(type, name, n) __shared__ type name[n]
#endif

// A reduction record: what a launch's threads report (each field through
// an integer atomic, 0 when a thread has nothing to say), per block and
// for the whole grid. Every field starts 0 and is left 0 (see
// peri_cuda_finish).
//   status  the first failure (peri_cuda_status_word; atomicMax);
//   minc    the complement of the smallest positive value's pattern
//           (atomicMax: positive reals order like their patterns);
//   maxbits the largest priority's pattern;
//   stale   stale pairs (atomicAdd); zero: a priority of 0 (atomicMax);
//   arrived the threads (per block) or blocks (grid) that arrived.
struct peri_cuda_acc {
  unsigned long long status, minc, maxbits;
  unsigned int stale, zero, arrived, pad;
};

static __device__ inline void peri_cuda_acc_add(peri_cuda_acc *a,
                                                const peri_cuda_acc &x) {
  if (x.status) atomicMax(&a->status, x.status);
  if (x.minc) atomicMax(&a->minc, x.minc);
  if (x.maxbits) atomicMax(&a->maxbits, x.maxbits);
  if (x.stale) atomicAdd(&a->stale, x.stale);
  if (x.zero) atomicMax(&a->zero, 1u);
}

// A record read by the thread that acquired it (its fields were changed
// by atomics of the arrived threads).
static __device__ inline peri_cuda_acc peri_cuda_acc_load(
    const peri_cuda_acc *a) {
  peri_cuda_acc x;
  x.status = PERI_CUDA_LDCG(&a->status);
  x.minc = PERI_CUDA_LDCG(&a->minc);
  x.maxbits = PERI_CUDA_LDCG(&a->maxbits);
  x.stale = PERI_CUDA_LDCG(&a->stale);
  x.zero = PERI_CUDA_LDCG(&a->zero);
  x.arrived = 0;
  x.pad = 0;
  return x;
}

static __device__ inline void peri_cuda_acc_clear(peri_cuda_acc *a) {
  PERI_CUDA_ST(&a->status, 0ull);
  PERI_CUDA_ST(&a->minc, 0ull);
  PERI_CUDA_ST(&a->maxbits, 0ull);
  PERI_CUDA_ST(&a->stale, 0u);
  PERI_CUDA_ST(&a->zero, 0u);
  PERI_CUDA_ST(&a->arrived, 0u);
}

static __device__ inline peri_cuda_acc peri_cuda_acc_none(void) {
  peri_cuda_acc x;
  memset(&x, 0, sizeof x);
  return x;
}

// Every thread of the grid calls this once, as its last step, with what
// it has to report: the last thread of each block folds the block's record
// (acc[1 + block]) into the grid's (acc[0]) and clears it; the last
// block's last thread gets the grid's record in *out, sets acc[0].arrived
// back to 0 and returns 1 (everybody else 0). So a launch has at most 256
// atomics on one block record and one per block on the grid's. The other
// fields of acc[0] are the caller's to clear.
static __device__ int peri_cuda_finish(peri_cuda_acc *acc,
                                       const peri_cuda_acc &mine,
                                       peri_cuda_acc *out) {
  peri_cuda_acc *blk = &acc[1u + blockIdx.x], x;
  peri_cuda_acc_add(blk, mine);
  if (PERI_CUDA_ARRIVE_BLOCK(&blk->arrived, 1u) != blockDim.x - 1u) return 0;
  PERI_CUDA_ACQUIRE_BLOCK(&blk->arrived);
  x = peri_cuda_acc_load(blk);
  peri_cuda_acc_clear(blk);
  peri_cuda_acc_add(&acc[0], x);
  if (PERI_CUDA_ARRIVE(&acc[0].arrived, 1u) != gridDim.x - 1u) return 0;
  PERI_CUDA_ACQUIRE(&acc[0].arrived);
  *out = peri_cuda_acc_load(&acc[0]);
  PERI_CUDA_ST(&acc[0].arrived, 0u);
  return 1;
}

// The device buffer's state (per_cuda_buffer.d_state): per_buffer's
// counters of the same names; broken: not 0 after a call that failed
// halfway (peri_cuda_end) until an upload: the buffer's kernels then
// change nothing and report PERI_CUDA_CORRUPT; cfg: the config the
// kernels read (alpha, eps, the beta schedule, seq_eta), in device memory
// so that an upload changes what a captured graph does.
struct peri_cuda_buffer_state {
  per_rng rng;
  unsigned long long step, added, trajs;
  per_real max_leaf;
  uint32_t size, pos, zero_hint, broken;
  per_config cfg;
};

// A status word that decodes as PER_ERR_CORRUPT (its code is not a
// per_status), written by memset as 0xFF bytes: a call that failed
// halfway leaves it, and a broken buffer's calls report it.
#define PERI_CUDA_CORRUPT (~0ull)

// st is a broken buffer's state (never for a tree call's NULL).
static __device__ inline int peri_cuda_broken(
    const peri_cuda_buffer_state *st) {
  return st && PERI_CUDA_LD(&st->broken) != 0u;
}

/* >>update: the tree's update (claim, settle) */
// An update is two launches, a thread per pair.
// Claim: each pair is checked (a bad one atomicMax'es its status word into
// acc[0].status: the first bad one in batch order wins) and claims its
// leaf with atomicMax(TAG | j): afterwards the leaf holds TAG | (the last
// position with that index). The one claim that found the leaf's old value
// keeps it (orig[j]), so that a refused batch can put it back. Each pair
// also counts itself on the path above its leaf: the tree above the
// leaves is cut into G groups of at most PERI_CUDA_GROUP_LEVELS levels,
// bases b_0 = 0 < b_1 < ... < b_G = depth, and every node A of a level
// b_g (g >= 1) has a counter: the pairs below it when g = 1, otherwise
// the nodes of level b_{g-1} below it that have pairs below them (a pair
// climbs on while its increment was the node's first).
// Settle: each counted pair arrives at its level-b_1 node's counter
// (decrementing it); the last to arrive leads that node: it recomputes
// the node's subtree from its base (the 2^5 leaves below, the tagged ones
// taking their pair's value) with per_tree_recompute on a copy, a node
// iff one of its children changed, as per_tree_set_batch does, writes the
// base back final and the changed nodes, the top one with its sign bit
// set ("changed": no valid node has it), then arrives one group up, where
// the last leader leads again, up to the root. The counters end where
// they started: at 0. When the claim found a bad pair, the settle only
// counts down and puts the claimed leaves back.
#define PERI_CUDA_GROUP_LEVELS 5u
#define PERI_CUDA_SIGN_BIT ((peri_cuda_bits)1 << (8 * sizeof(per_real) - 1))

// flag[j] of an update: the pair counted itself (and claimed its leaf),
// found the leaf's old value, or is a stale id.
#define PERI_CUDA_F_CLIMB 1u
#define PERI_CUDA_F_OWN 2u
#define PERI_CUDA_F_STALE 4u

static __host__ __device__ inline uint32_t peri_cuda_group_count(
    uint32_t depth) {
  return depth == 0
             ? 1u
             : (depth + PERI_CUDA_GROUP_LEVELS - 1) / PERI_CUDA_GROUP_LEVELS;
}

static __host__ __device__ inline uint32_t peri_cuda_group_base(
    uint32_t g, uint32_t depth) {
  uint32_t b = g * PERI_CUDA_GROUP_LEVELS;
  return b < depth ? b : depth;
}

// Where the counters of group g (1 .. G) start in the counter array, and
// (g = G + 1) how many counters a tree of L leaves has: L >> b_g for each
// group, about L / 31 in all.
static __host__ __device__ inline size_t peri_cuda_counter_base(
    uint32_t g, uint32_t L, uint32_t depth) {
  size_t off = 0;
  uint32_t h;
  for (h = 1; h < g; ++h) off += L >> peri_cuda_group_base(h, depth);
  return off;
}

// The counter of leaf's ancestor at level b_g.
static __device__ inline unsigned int *peri_cuda_counter(
    unsigned int *cnt, uint32_t L, uint32_t depth, uint32_t g, uint32_t leaf) {
  return &cnt[peri_cuda_counter_base(g, L, depth) +
              (leaf >> peri_cuda_group_base(g, depth))];
}

// The claim's count of a pair (or an added slot) with this leaf.
static __device__ inline void peri_cuda_count_path(unsigned int *cnt,
                                                   uint32_t L, uint32_t depth,
                                                   uint32_t leaf) {
  uint32_t g, G = peri_cuda_group_count(depth);
  for (g = 1; g <= G; ++g)
    if (atomicAdd(peri_cuda_counter(cnt, L, depth, g, leaf), 1u) != 0) return;
}

// A claimed leaf's value x as the leaf stores it: -0 as +0.
static __host__ __device__ inline per_real peri_cuda_leaf_final(per_real x) {
  return x == 0 ? (per_real)0 : x;
}

// Unrolled by nvcc; the host build runs the same loops as written.
#if defined(__CUDACC__) && !defined(PER_CUDA_HOST_SHIM)
#define PERI_CUDA_UNROLL _Pragma("unroll")
#else
#define PERI_CUDA_UNROLL
#endif

// The tree node of local node k (k >= 1) of the subtree of `top`: local
// level d = floor(log2 k) holds local nodes [2^d, 2^(d+1)), tree nodes
// (top << d) + k - 2^d. A constant once the loops below unroll.
static __host__ __device__ inline uint32_t peri_cuda_subtree_node(uint32_t top,
                                                                  uint32_t k) {
  uint32_t d = 0;
  while ((k >> d) > 1) ++d;
  return (top << d) + k - (1u << d);
}

// How the base of a lead's subtree marks what changed: nodes above the
// leaves, and a sequence tree's leaves, with the sign bit (their value
// is the rest); an update's leaves with a claim tag (their value is their
// pair's).
#define PERI_CUDA_BASE_MARKED 0
#define PERI_CUDA_BASE_TAGGED 1
#define PERI_CUDA_BASE_MARKED_LEAVES 2

// Lead node `top`: recompute its subtree from its base nodes LV levels
// below (2^LV <= 2^PERI_CUDA_GROUP_LEVELS of them; leaves unless `leaf`
// is PERI_CUDA_BASE_MARKED; tagged ones take their pair's value from v),
// as described above: the changed base nodes are written back final, the
// changed nodes above them recomputed and written, `top` with its sign bit
// set when `mark_top`. With a min tree (MIN; a buffer's, for buffer-max
// weights: node = the smallest positive leaf below it, or PERI_NO_MIN) the
// same nodes of it are recomputed and written.
// The subtree is rebuilt in parts of at most PERI_CUDA_PART_LEVELS levels
// (peri_cuda_part): the parts at the bottom first, each whole (its top
// value handed up, not stored by it), then the levels above them, whose
// base is the parts' tops. A part holds 2^3 base nodes and 7 above them,
// sums and mins: the whole subtree of 2^5 at once took 250 registers
// (a block of 8 warps on an SM); parts keep every kernel under 128
// (PERI_CUDA_BOUNDS: 2 blocks of 256 threads on an SM), with no spills.
// Each part issues its loads (its base, the stored values above it, then
// the batch values of claimed leaves) before the first is used, and its
// min tree's after its sums are stored: three waits for memory a part.
// LV is a constant so that the loops unroll (a constant subtree_node).
#define PERI_CUDA_PART_LEVELS 3u

// The part of `top` down LV <= PERI_CUDA_PART_LEVELS levels, or (SPLIT)
// the parts LV - PERI_CUDA_PART_LEVELS levels below top and then the
// levels above them: the changed nodes strictly below `top` written;
// returns whether top changed, and then its new sum in *s and (MIN) min
// in *m.
template <uint32_t LV, bool MIN, bool SPLIT = (LV > PERI_CUDA_PART_LEVELS)>
struct peri_cuda_part;

template <uint32_t LV, bool MIN> struct peri_cuda_part<LV, MIN, false> {
  static __device__ bool run(per_real *node, per_real *mn, uint32_t top,
                             int leaf, const peri_cuda_vals &v, per_real *s,
                             per_real *m) {
    const uint32_t W = 1u << LV, first = top << LV;
    per_real t[2 * W], mt[2 * W];
    peri_cuda_bits b[W];
    bool chg[2 * W];
    uint32_t k;
    t[1] = mt[1] = 0; // top's: set when it changed
    PERI_CUDA_UNROLL
    for (k = 0; k < W; ++k)
      b[k] = peri_cuda_to_bits(PERI_CUDA_LDCG(&node[first + k]));
    // The stored values, kept where no child changed (not top's own).
    PERI_CUDA_UNROLL
    for (k = 2; k < W; ++k)
      t[k] = PERI_CUDA_LDCG(&node[peri_cuda_subtree_node(top, k)]);
    PERI_CUDA_UNROLL
    for (k = 0; k < W; ++k) chg[W + k] = (b[k] & PERI_CUDA_SIGN_BIT) != 0;
    if (leaf == PERI_CUDA_BASE_TAGGED) { // claimed leaves: their pair's value
      // Loaded for every leaf (pair 0's for an unclaimed one, then
      // dropped): a load under a branch would wait before the next.
      PERI_CUDA_UNROLL
      for (k = 0; k < W; ++k)
        t[W + k] = peri_cuda_val_at(
            v, chg[W + k] ? (uint32_t)(b[k] & ~PERI_CUDA_CLAIM_TAG) : 0u);
      PERI_CUDA_UNROLL
      for (k = 0; k < W; ++k)
        t[W + k] = chg[W + k] ? peri_cuda_leaf_final(t[W + k])
                              : peri_cuda_from_bits(b[k]);
    } else {
      PERI_CUDA_UNROLL
      for (k = 0; k < W; ++k)
        t[W + k] = peri_cuda_from_bits(b[k] & ~PERI_CUDA_SIGN_BIT);
    }
    PERI_CUDA_UNROLL
    for (k = W - 1; k >= 1; --k) { // children before parents
      chg[k] = chg[2 * k] || chg[2 * k + 1];
      if (chg[k]) per_tree_recompute(t, k);
    }
    // The stores, after every load: the changed nodes below top (with
    // LV = 0 the base is top itself, which the caller writes).
    PERI_CUDA_UNROLL
    for (k = (LV ? 2u : 2u * W); k < 2 * W; ++k)
      if (chg[k]) PERI_CUDA_ST(&node[peri_cuda_subtree_node(top, k)], t[k]);
    if (MIN) { // the min tree's same nodes, once the sums are stored
      PERI_CUDA_UNROLL
      for (k = (LV ? 2u : 1u); k < 2 * W; ++k)
        mt[k] = PERI_CUDA_LDCG(&mn[peri_cuda_subtree_node(top, k)]);
      if (leaf) { // a changed leaf's min: its final value when positive
        PERI_CUDA_UNROLL
        for (k = 0; k < W; ++k)
          if (chg[W + k]) mt[W + k] = t[W + k] > 0 ? t[W + k] : PERI_NO_MIN;
      }
      PERI_CUDA_UNROLL
      for (k = W - 1; k >= 1; --k)
        if (chg[k]) mt[k] = peri_min_of(mt[2 * k], mt[2 * k + 1]);
      PERI_CUDA_UNROLL
      for (k = (LV ? 2u : 2u * W); k < 2 * W; ++k)
        if (chg[k] && (k < W || leaf))
          PERI_CUDA_ST(&mn[peri_cuda_subtree_node(top, k)], mt[k]);
    }
    *s = t[1];
    if (MIN) *m = mt[1];
    return chg[1];
  }
};

template <uint32_t LV, bool MIN> struct peri_cuda_part<LV, MIN, true> {
  static __device__ bool run(per_real *node, per_real *mn, uint32_t top,
                             int leaf, const peri_cuda_vals &v, per_real *s,
                             per_real *m) {
    const uint32_t U = LV - PERI_CUDA_PART_LEVELS, W = 1u << U;
    per_real t[2 * W], mt[2 * W];
    bool chg[2 * W];
    uint32_t k;
    PERI_CUDA_UNROLL
    for (k = 0; k < W; ++k) { // the parts, tops handed up
      uint32_t at = (top << U) + k;
      chg[W + k] = peri_cuda_part<PERI_CUDA_PART_LEVELS, MIN>::run(
          node, mn, at, leaf, v, &t[W + k], &mt[W + k]);
      if (!chg[W + k]) {
        t[W + k] = PERI_CUDA_LDCG(&node[at]);
        if (MIN) mt[W + k] = PERI_CUDA_LDCG(&mn[at]);
      }
    }
    PERI_CUDA_UNROLL
    for (k = 2; k < W; ++k) {
      t[k] = PERI_CUDA_LDCG(&node[peri_cuda_subtree_node(top, k)]);
      if (MIN) mt[k] = PERI_CUDA_LDCG(&mn[peri_cuda_subtree_node(top, k)]);
    }
    PERI_CUDA_UNROLL
    for (k = W - 1; k >= 1; --k) {
      chg[k] = chg[2 * k] || chg[2 * k + 1];
      if (!chg[k]) continue;
      per_tree_recompute(t, k);
      if (MIN) mt[k] = peri_min_of(mt[2 * k], mt[2 * k + 1]);
    }
    PERI_CUDA_UNROLL
    for (k = 2; k < 2 * W; ++k) {
      uint32_t at = peri_cuda_subtree_node(top, k);
      if (!chg[k]) continue;
      PERI_CUDA_ST(&node[at], t[k]);
      if (MIN) PERI_CUDA_ST(&mn[at], mt[k]);
    }
    *s = t[1];
    if (MIN) *m = mt[1];
    return chg[1];
  }
};

template <uint32_t LV, bool MIN>
static __device__ void peri_cuda_lead_fixed(per_real *node, per_real *mn,
                                            uint32_t top, int leaf,
                                            const peri_cuda_vals &v,
                                            int mark_top) {
  per_real s, m = 0;
  if (!peri_cuda_part<LV, MIN>::run(node, mn, top, leaf, v, &s, &m)) return;
  if (mark_top)
    s = peri_cuda_from_bits(peri_cuda_to_bits(s) | PERI_CUDA_SIGN_BIT);
  PERI_CUDA_ST(&node[top], s);
  if (MIN) PERI_CUDA_ST(&mn[top], m);
}

// peri_cuda_lead_fixed for `levels` (0 .. PERI_CUDA_GROUP_LEVELS) known at
// run time.
template <bool MIN>
static __device__ void peri_cuda_lead(per_real *node, per_real *mn,
                                      uint32_t top, uint32_t levels, int leaf,
                                      const peri_cuda_vals &v, int mark_top) {
#define PERI_CUDA_LEAD(LV) \
  peri_cuda_lead_fixed<LV, MIN>(node, mn, top, leaf, v, mark_top)
  switch (levels) {
    case 0: PERI_CUDA_LEAD(0); break;
    case 1: PERI_CUDA_LEAD(1); break;
    case 2: PERI_CUDA_LEAD(2); break;
    case 3: PERI_CUDA_LEAD(3); break;
    case 4: PERI_CUDA_LEAD(4); break;
    default: PERI_CUDA_LEAD(PERI_CUDA_GROUP_LEVELS); break;
  }
#undef PERI_CUDA_LEAD
}

// The settle's climb of a counted pair (or added slot) with this leaf:
// arrive at each group's counter, lead where the arrival was the last
// (recompute only when `apply`), stop where it was not. `base`: how the
// leaves mark a change (PERI_CUDA_BASE_TAGGED or _MARKED_LEAVES).
template <bool MIN>
static __device__ void peri_cuda_climb(per_real *node, per_real *mn,
                                       unsigned int *cnt, uint32_t L,
                                       uint32_t depth, uint32_t leaf,
                                       const peri_cuda_vals &v, int apply,
                                       int base) {
  uint32_t g, G = peri_cuda_group_count(depth);
  for (g = 1; g <= G; ++g) {
    unsigned int *c = peri_cuda_counter(cnt, L, depth, g, leaf);
    uint32_t lo = peri_cuda_group_base(g - 1, depth);
    uint32_t hi = peri_cuda_group_base(g, depth);
    if (PERI_CUDA_ARRIVE(c, 0xFFFFFFFFu) != 1u) return; // not the last
    PERI_CUDA_ACQUIRE(c);
    if (apply)
      peri_cuda_lead<MIN>(node, mn, (L + leaf) >> hi, hi - lo,
                          g == 1 ? base : PERI_CUDA_BASE_MARKED, v, g < G);
  }
}

// The claim, thread j for pair j. For a buffer's update (v.ids, with its
// state st, whose eps and alpha replace v's) the checks are
// per_buffer_update's, a stale id is flagged and takes no part, and the
// priority goes to prio[j]; for TD errors (v.td) too. A broken buffer's
// claim does nothing.
static __global__ void PERI_CUDA_BOUNDS peri_cuda_claim_kernel(
    per_real *node, uint32_t L, uint32_t depth, uint32_t cap, peri_cuda_pairs v,
    uint32_t n, const peri_cuda_buffer_state *st, unsigned int *cnt,
    uint32_t *flag, per_real *prio, per_real *orig, peri_cuda_acc *acc) {
  uint32_t j = peri_cuda_thread_id(), f = 0, leaf;
  per_status s;
  int live;
  if (j >= n || peri_cuda_broken(st)) return;
  if (st) { // a buffer's: its config, as the last upload left it
    v.eps = PERI_CUDA_LD(&st->cfg.eps);
    v.alpha = PERI_CUDA_LD(&st->cfg.alpha);
  }
  if (v.ids) {
    uint64_t id = PERI_CUDA_LD(&v.ids[j]);
    float td = PERI_CUDA_LD(&v.td[j]);
    uint32_t gen;
    leaf = (uint32_t)id;
    gen = leaf < cap ? PERI_CUDA_LD(&v.gen[leaf]) : 0u;
    s = peri_float_status(td);
    if (s == PER_OK && (id & PER_ID_SEQ)) s = PER_ERR_ARG; // a sequence's
    if (s == PER_OK)
      s = peri_id_status_of(id, cap, 1, gen, PERI_CUDA_LD(&st->added));
    live = s == PER_OK && (uint32_t)(id >> 32) == gen;
    if (s == PER_OK && !live) f = PERI_CUDA_F_STALE;
  } else {
    s = peri_cuda_pair_status(v, j, cap);
    leaf = peri_cuda_pair_leaf(v, j);
    live = leaf < cap;
  }
  if (s != PER_OK) atomicMax(&acc->status, peri_cuda_status_word(j, s));
  if (live) {
    peri_cuda_bits old;
    if (v.td) PERI_CUDA_ST(&prio[j], peri_cuda_pair_value(v, j));
    old =
        atomicMax(peri_cuda_as_bits(&node[L + leaf]), PERI_CUDA_CLAIM_TAG | j);
    if (old < PERI_CUDA_CLAIM_TAG) { // the leaf's value before the batch
      PERI_CUDA_ST(&orig[j], peri_cuda_from_bits(old));
      f |= PERI_CUDA_F_OWN;
    }
    f |= PERI_CUDA_F_CLIMB;
    peri_cuda_count_path(cnt, L, depth, leaf);
  }
  PERI_CUDA_ST(&flag[j], f);
}

// The settle, thread j for pair j (values: v, with the priorities in
// v.val for TD errors). Without a buffer state (st NULL: the tree's own
// update) thread 0 writes the outcome to *d_status; a buffer's update
// also folds its totals (stale count, largest priority, a priority of 0)
// into the state and *stale, and leaves acc[0] cleared (a broken
// buffer's: only PERI_CUDA_CORRUPT to *d_status). The status's
// position is divided by pos_div (1; an update_seq's key: its entry).
template <bool MIN>
static __global__ void PERI_CUDA_BOUNDS peri_cuda_settle_kernel(
    per_real *node, per_real *mn, uint32_t L, uint32_t depth, peri_cuda_pairs v,
    uint32_t n, unsigned int *cnt, const uint32_t *flag, const per_real *orig,
    peri_cuda_acc *acc, peri_cuda_buffer_state *st, uint32_t *stale,
    unsigned long long *d_status, uint32_t pos_div) {
  uint32_t j = peri_cuda_thread_id();
  unsigned long long bad = PERI_CUDA_LD(&acc[0].status);
  peri_cuda_acc mine = peri_cuda_acc_none(), tot;
  if (peri_cuda_broken(st)) {
    if (j == 0) PERI_CUDA_ST(d_status, PERI_CUDA_CORRUPT);
    return;
  }
  if (j < n) {
    uint32_t f = PERI_CUDA_LD(&flag[j]);
    if (f & PERI_CUDA_F_CLIMB) {
      uint32_t leaf = peri_cuda_pair_leaf(v, j);
      if (bad && (f & PERI_CUDA_F_OWN))
        PERI_CUDA_ST(&node[L + leaf], PERI_CUDA_LD(&orig[j]));
      peri_cuda_climb<MIN>(node, mn, cnt, L, depth, leaf, peri_cuda_vals_of(v),
                           !bad, PERI_CUDA_BASE_TAGGED);
      if (st && !bad) {
        per_real p = PERI_CUDA_LD(&v.val[j]);
        mine.maxbits = (unsigned long long)peri_cuda_to_bits(p);
        mine.zero = !(p > 0);
      }
    }
    if (f & PERI_CUDA_F_STALE) mine.stale = 1;
  }
  if (!st) {
    if (j == 0) PERI_CUDA_ST(d_status, bad);
    return;
  }
  if (!peri_cuda_finish(acc, mine, &tot)) return;
  if (!tot.status) {
    per_real mx = peri_cuda_from_bits((peri_cuda_bits)tot.maxbits);
    if (stale) PERI_CUDA_ST(stale, tot.stale);
    if (mx > PERI_CUDA_LD(&st->max_leaf)) PERI_CUDA_ST(&st->max_leaf, mx);
    if (tot.zero) PERI_CUDA_ST(&st->zero_hint, 1u);
  }
  PERI_CUDA_ST(d_status, peri_cuda_status_per(tot.status, pos_div));
  peri_cuda_acc_clear(&acc[0]);
}

/* >>sample: the tree's stratified sample */
// x[j] of four values, j in 0 .. 3, without an indexed array (which
// would go to local memory).
static __host__ __device__ inline per_real peri_cuda_pick4(
    per_real x0, per_real x1, per_real x2, per_real x3, uint32_t j) {
  return j & 2u ? (j & 1u ? x3 : x2) : (j & 1u ? x1 : x0);
}

// per_tree_descend, three levels per memory round trip: from node k the
// 2 children, 4 grandchildren and 8 great-grandchildren are three
// contiguous runs, all loaded before the first step, then per_tree_step's
// rule (peri_tree_go_right, the left mass taken off u) runs on them three
// times: the same values, the same steps, the same leaf. At 2^24 leaves a
// draw waits for memory 8 times instead of 24. The last levels (fewer
// than three above the leaves) go one at a time.
static __host__ __device__ inline uint32_t peri_cuda_descend(
    const per_real *node, uint32_t L, per_real u) {
  uint32_t k = 1, r, j;
  while (k < L / 4u) { // 4k + 3 < L: k, its children and grandchildren
    const per_real *c = &node[2u * k], *g = &node[4u * k], *h = &node[8u * k];
    per_real c0 = c[0], c1 = c[1], g0 = g[0], g1 = g[1], g2 = g[2], g3 = g[3];
    per_real h0 = h[0], h1 = h[1], h2 = h[2], h3 = h[3], h4 = h[4], h5 = h[5];
    per_real h6 = h[6], h7 = h[7], left;
    r = peri_tree_go_right(c0, c1, u);
    u -= r ? c0 : (per_real)0;
    j = r; // the grandchildren g[2j], g[2j + 1]
    left = r ? g2 : g0;
    r = peri_tree_go_right(left, r ? g3 : g1, u);
    u -= r ? left : (per_real)0;
    j = 2u * j + r; // the great-grandchildren h[2j], h[2j + 1]
    left = peri_cuda_pick4(h0, h2, h4, h6, j);
    r = peri_tree_go_right(left, peri_cuda_pick4(h1, h3, h5, h7, j), u);
    u -= r ? left : (per_real)0;
    k = 8u * k + 2u * j + r;
  }
  while (k < L) k = per_tree_step(node, k, &u);
  return k - L;
}

// Stratum i of a B-batch, exactly per_tree_sample_strata's arithmetic.
// Thread 0 writes the outcome to *status (every thread sees the same
// root); on an unsamplable root nothing else is written.
static __global__ void PERI_CUDA_BOUNDS peri_cuda_sample_strata_kernel(
    const per_real *node, uint32_t L, uint64_t seed, uint64_t counter,
    const unsigned long long *d_counter, uint32_t B, uint32_t *idx,
    per_real *val, unsigned long long *status) {
  uint32_t i = peri_cuda_thread_id(), leaf;
  per_real total, seg, u;
  per_status s;
  if (i >= B) return;
  total = PERI_CUDA_LD(&node[1]);
  s = peri_samplable(total);
  if (i == 0)
    PERI_CUDA_ST(status, s == PER_OK ? 0ull : peri_cuda_status_word(0, s));
  if (s != PER_OK) return;
  if (d_counter) counter = PERI_CUDA_LD(d_counter);
  seg = total / (per_real)B;
  u = per_tree_stratum_u(seed, counter, i, seg);
  leaf = peri_cuda_descend(node, L, u);
  PERI_CUDA_ST(&idx[i], leaf);
  if (val) PERI_CUDA_ST(&val[i], PERI_CUDA_LD(&node[L + leaf]));
}

// per_tree_find_batch's checks: the first u (in order) that is NaN or
// negative, else (position n) an unsamplable root.
static __global__ void PERI_CUDA_BOUNDS
peri_cuda_validate_u_kernel(const per_real *node, const per_real *u, uint32_t n,
                            unsigned long long *status) {
  uint32_t j = peri_cuda_thread_id();
  per_real x;
  per_status s;
  if (j >= n) return;
  x = PERI_CUDA_LD(&u[j]);
  s = x != x ? PER_ERR_NAN : x < 0 ? PER_ERR_NEGATIVE : PER_OK;
  if (s != PER_OK) atomicMax(status, peri_cuda_status_word(j, s));
  if (j == 0) {
    s = peri_samplable(PERI_CUDA_LD(&node[1]));
    if (s != PER_OK) atomicMax(status, peri_cuda_status_word(n, s));
  }
}

// The leaf of each u, exactly per_tree_descend's.
static __global__ void PERI_CUDA_BOUNDS peri_cuda_find_kernel(
    const per_real *node, uint32_t L, const per_real *u, uint32_t n,
    uint32_t *idx, per_real *val, const unsigned long long *status) {
  uint32_t j = peri_cuda_thread_id(), leaf;
  if (j >= n || PERI_CUDA_LD(status)) return;
  leaf = peri_cuda_descend(node, L, PERI_CUDA_LD(&u[j]));
  PERI_CUDA_ST(&idx[j], leaf);
  if (val) PERI_CUDA_ST(&val[j], PERI_CUDA_LD(&node[L + leaf]));
}

// One thread: on success the device counter moves on by B.
static __global__ void PERI_CUDA_BOUNDS
peri_cuda_advance_counter_kernel(unsigned long long *d_counter, uint32_t B,
                                 const unsigned long long *status) {
  if (peri_cuda_thread_id() != 0 || PERI_CUDA_LD(status)) return;
  PERI_CUDA_ST(d_counter, PERI_CUDA_LD(d_counter) + B);
}

// One thread: the first failure of many calls stays in keep[0..1].
static __global__ void PERI_CUDA_BOUNDS peri_cuda_keep_status_kernel(
    unsigned long long *keep, const unsigned long long *status,
    unsigned long long tag) {
  unsigned long long w;
  if (peri_cuda_thread_id() != 0 || PERI_CUDA_LD(&keep[0])) return;
  w = PERI_CUDA_LD(status);
  if (!w) return;
  PERI_CUDA_ST(&keep[0], w);
  PERI_CUDA_ST(&keep[1], tag);
}

/* >>weights: importance-sampling weights */
// A value's check for the weights (> 0 and a valid leaf) and its part in
// the batch minimum, as a reduction record.
static __device__ inline peri_cuda_acc peri_cuda_weight_report(per_real x,
                                                               uint32_t i) {
  peri_cuda_acc a = peri_cuda_acc_none();
  per_status s = per_leaf_status(x);
  if (s == PER_OK && !(x > 0)) s = PER_ERR_ARG;
  if (s != PER_OK) a.status = peri_cuda_status_word(i, s);
  else a.minc = (unsigned long long)(peri_cuda_bits)~peri_cuda_to_bits(x);
  return a;
}

// The batch minimum from a record's minc.
static __device__ inline per_real peri_cuda_min_of(unsigned long long minc) {
  return peri_cuda_from_bits((peri_cuda_bits) ~(peri_cuda_bits)minc);
}

// per_cuda_is_weights, launch 1: every value checked (the first bad one
// wins) and the minimum found, through the reduction records.
static __global__ void PERI_CUDA_BOUNDS peri_cuda_batch_min_kernel(
    const per_real *val, uint32_t B, peri_cuda_acc *acc) {
  uint32_t i = peri_cuda_thread_id();
  peri_cuda_acc tot;
  (void)peri_cuda_finish(acc,
                         i < B
                             ? peri_cuda_weight_report(PERI_CUDA_LD(&val[i]), i)
                             : peri_cuda_acc_none(),
                         &tot);
}

// Launch 2: w[i] = peri_weight(val[i], min, beta); thread 0 writes the
// outcome.
static __global__ void PERI_CUDA_BOUNDS peri_cuda_is_weights_kernel(
    const per_real *val, uint32_t B, double beta, float *w,
    const peri_cuda_acc *acc, unsigned long long *status) {
  uint32_t i = peri_cuda_thread_id();
  unsigned long long bad;
  if (i >= B) return;
  bad = PERI_CUDA_LD(&acc[0].status);
  if (i == 0) PERI_CUDA_ST(status, bad);
  if (bad) return;
  PERI_CUDA_ST(&w[i],
               peri_weight(PERI_CUDA_LD(&val[i]),
                           peri_cuda_min_of(PERI_CUDA_LD(&acc[0].minc)), beta));
}

// bytes rounded up to a multiple of 256 (at least 256).
static __host__ __device__ inline size_t peri_cuda_round256(size_t bytes) {
  size_t r = (bytes + 255u) & ~(size_t)255u;
  return r ? r : 256u;
}

/* >>buffer: the replay buffer's state, add and plan */
// A buffer's sequences (seq_len > 0) as the kernels see them: the
// sequence tree, its min tree (or NULL), the validity flags; len steps
// each, sequence q starting at slot q * stride, ns of them.
struct peri_cuda_seqs {
  per_real *node;
  const per_real *mn;
  uint8_t *ok;
  uint32_t L, depth, ns, len, stride;
};

// The workspace of a buffer (or the scratch of a tree call): the sample's
// plan, the reduction records (1 + the most blocks of a launch), the
// group counters of the tree (peri_cuda_counter_base) and of a buffer's
// sequence tree (scnt), and arrays of its most pairs (max_batch, times
// seq_len for a buffer with sequences: an update_seq's TD errors):
// flags, drawn leaves (an update_seq's leaves), values (a draw's leaf
// values, an update's priorities) and an update's old leaf values; a
// buffer's also has the set of its distinct draws
// (2^peri_cat_hbits(max_batch) 64-bit words: a leaf or a position and
// its first draw; each call clearing what it uses first) and, with sequences, a word per sequence (own: 0 between
// calls) and the rank table of a degenerate sample (one word per 32
// sequences, and one). Everything but the arrays starts 0 and every call
// leaves it 0.
struct peri_cuda_workspace {
  peri_plan *plan; // what a sample draws from (per.h's peri_plan_of),
                   // kept by the draw's thread 0 for the deliver launch
  peri_cuda_acc *acc;
  unsigned int *cnt, *scnt;
  uint32_t *flag, *idx, *own, *rank;
  unsigned long long *set;
  per_real *val, *orig;
};

// The state record = s; with a min tree mn of L leaves (a reset), every
// node of it PERI_NO_MIN: no positive leaf anywhere, and the same for the
// sequences' smn of sL leaves; with a permutation perm of cap slots (a
// reset), the identity.
static __global__ void PERI_CUDA_BOUNDS peri_cuda_set_state_kernel(
    peri_cuda_buffer_state *st, peri_cuda_buffer_state s, per_real *mn,
    uint32_t L, per_real *smn, uint32_t sL, uint32_t *perm, uint32_t cap) {
  uint32_t k = peri_cuda_thread_id();
  if (k == 0) PERI_CUDA_ST(st, s);
  if (mn && k < L) { // node k and leaf k
    PERI_CUDA_ST(&mn[k], PERI_NO_MIN);
    PERI_CUDA_ST(&mn[L + k], PERI_NO_MIN);
  }
  if (smn && k < sL) {
    PERI_CUDA_ST(&smn[k], PERI_NO_MIN);
    PERI_CUDA_ST(&smn[sL + k], PERI_NO_MIN);
  }
  if (perm && k < cap) PERI_CUDA_ST(&perm[k], k);
}

// 16 bytes: the widest unit of a copy (one 128-bit load and store).
struct alignas(16) peri_cuda_u128 {
  unsigned long long lo, hi;
};

// Rows of item bytes in units of U, a grid-stride loop over the units:
// row t of `rows` from src row from + t to dst row (to + t) % cap (an
// add), or to dst row t from src row (idx[t / n] * stride + t % n) % cap:
// step t % n of the unit of n rows starting at slot idx[t / n] * stride
// (a sample's gather: idx not NULL; items n = stride = 1). A thread
// divides its first position by units once and then moves on by
// additions; the rows' wrap is a subtraction (every source and target
// is below 2 cap).
template <typename U>
static __device__ inline void peri_cuda_copy_units(
    unsigned char *dst8, const unsigned char *src8, const uint32_t *idx,
    uint32_t rows, uint32_t units, uint64_t from, uint64_t to, uint32_t cap,
    uint32_t n, uint32_t stride) {
  U *dst = reinterpret_cast<U *>(dst8);
  const U *src = reinterpret_cast<const U *>(src8);
  uint64_t e = peri_cuda_thread_id(), all = (uint64_t)rows * units;
  uint64_t step = (uint64_t)gridDim.x * blockDim.x, to0 = idx ? 0 : to % cap;
  uint32_t t, u, st, su;
  if (e >= all) return;
  t = (uint32_t)(e / units);
  u = (uint32_t)(e % units);
  st = (uint32_t)(step / units);
  su = (uint32_t)(step % units);
  for (;;) {
    uint64_t a, b;
    if (idx) { // a unit starts below cap and n <= cap
      uint32_t k = n == 1u ? t : t / n;
      a = (uint64_t)PERI_CUDA_LD(&idx[k]) * stride + (t - k * n);
      if (a >= cap) a -= cap;
      b = t;
    } else { // t < rows <= cap
      a = from + t;
      b = to0 + t;
      if (b >= cap) b -= cap;
    }
    PERI_CUDA_ST(&dst[b * units + u], PERI_CUDA_LD(&src[a * units + u]));
    e += step;
    if (e >= all) return;
    t += st;
    u += su;
    if (u >= units) {
      u -= units;
      ++t;
    }
  }
}

// peri_cuda_copy_units in units of `unit` bytes (16, 8, 4 or 1: the host
// picks the widest that the item size and every address allow),
// `units` of them a row.
static __device__ inline void peri_cuda_copy_rows(
    void *dst, const void *src, uint32_t unit, const uint32_t *idx,
    uint32_t rows, uint32_t units, uint64_t from, uint64_t to, uint32_t cap,
    uint32_t n, uint32_t stride) {
  unsigned char *d = (unsigned char *)dst;
  const unsigned char *s = (const unsigned char *)src;
  switch (unit) {
    case 16:
      peri_cuda_copy_units<peri_cuda_u128>(d, s, idx, rows, units, from, to,
                                           cap, n, stride);
      break;
    case 8:
      peri_cuda_copy_units<unsigned long long>(d, s, idx, rows, units, from, to,
                                               cap, n, stride);
      break;
    case 4:
      peri_cuda_copy_units<uint32_t>(d, s, idx, rows, units, from, to, cap, n,
                                     stride);
      break;
    default:
      peri_cuda_copy_units<unsigned char>(d, s, idx, rows, units, from, to, cap,
                                          n, stride);
  }
}

// add, launch 1 ("count"): the first bad episode end wins acc[0].status;
// slot t of the kept ones counts itself on its path (as an update's
// pairs do). The kept items are the last keep = min(n, cap) of the call:
// kept item t is added at age n - keep + t (mod cap), into the slot that
// many places on from the ring position.
static __host__ __device__ inline uint32_t peri_cuda_add_age(uint32_t n,
                                                             uint32_t cap,
                                                             uint32_t t) {
  uint32_t keep = n < cap ? n : cap;
  return (uint32_t)(((uint64_t)(n - keep) + t) % cap);
}

static __host__ __device__ inline uint32_t peri_cuda_add_slot(uint32_t pos,
                                                              uint32_t age,
                                                              uint32_t cap) {
  return (uint32_t)(((uint64_t)pos + age) % cap);
}

static __global__ void PERI_CUDA_BOUNDS peri_cuda_add_count_kernel(
    const peri_cuda_buffer_state *st, const uint8_t *ends, uint32_t n,
    uint32_t cap, uint32_t L, uint32_t depth, unsigned int *cnt,
    peri_cuda_acc *acc) {
  uint32_t t = peri_cuda_thread_id(), keep = n < cap ? n : cap;
  if (t >= n || peri_cuda_broken(st)) return;
  if (ends && PERI_CUDA_LD(&ends[t]) > PER_END_TRUNCATED)
    atomicMax(&acc[0].status, peri_cuda_status_word(t, PER_ERR_ARG));
  if (t < keep)
    peri_cuda_count_path(cnt, L, depth,
                         peri_cuda_add_slot(PERI_CUDA_LD(&st->pos),
                                            peri_cuda_add_age(n, cap, t), cap));
}

// add, launch 2: unless the ends were refused, slot t as
// per_buffer_add_steps leaves it (generation, trajectory, end, its item
// row copied, its leaf claimed for the state's max_leaf), then the climb
// (as an update's settle); the last thread moves the ring position, size
// and counters on, writes *d_status and clears acc[0]. A broken buffer's
// add (and its count) change nothing: thread 0 writes PERI_CUDA_CORRUPT.
template <bool MIN>
static __global__ void PERI_CUDA_BOUNDS peri_cuda_add_kernel(
    peri_cuda_buffer_state *st, per_real *node, per_real *mn, uint32_t L,
    uint32_t depth, uint32_t *gen, uint32_t *traj, uint8_t *ends,
    const uint8_t *in, void *items, const void *src, uint32_t unit,
    uint32_t units, uint32_t n, uint32_t cap, unsigned int *cnt,
    peri_cuda_acc *acc, unsigned long long *d_status) {
  uint32_t t = peri_cuda_thread_id(), keep = n < cap ? n : cap;
  unsigned long long bad = PERI_CUDA_LD(&acc[0].status);
  uint32_t pos = PERI_CUDA_LD(&st->pos);
  peri_cuda_acc tot;
  if (peri_cuda_broken(st)) {
    if (t == 0) PERI_CUDA_ST(d_status, PERI_CUDA_CORRUPT);
    return;
  }
  if (!bad)
    peri_cuda_copy_rows(items, src, unit, (const uint32_t *)NULL, keep, units,
                        (uint64_t)(n - keep), (uint64_t)pos + (n - keep), cap,
                        1u, 1u);
  if (t < keep) {
    uint32_t age = peri_cuda_add_age(n, cap, t);
    uint32_t slot = peri_cuda_add_slot(pos, age, cap);
    peri_cuda_vals v;
    v.val = NULL;
    v.one = &st->max_leaf;
    if (!bad) {
      PERI_CUDA_ST(&gen[slot], peri_gen_add(PERI_CUDA_LD(&gen[slot]),
                                            peri_add_writes(age, n, cap)));
      PERI_CUDA_ST(&traj[slot], (uint32_t)PERI_CUDA_LD(&st->trajs));
      PERI_CUDA_ST(&ends[slot], in ? PERI_CUDA_LD(&in[n - keep + t])
                                   : (uint8_t)PER_END_NONE);
      PERI_CUDA_ST(peri_cuda_as_bits(&node[L + slot]), PERI_CUDA_CLAIM_TAG | t);
    }
    peri_cuda_climb<MIN>(node, mn, cnt, L, depth, slot, v, !bad,
                         PERI_CUDA_BASE_TAGGED);
  }
  if (!peri_cuda_finish(acc, peri_cuda_acc_none(), &tot)) return;
  if (!tot.status) {
    peri_cuda_buffer_state s = PERI_CUDA_LD(st);
    s.pos = (uint32_t)(((uint64_t)s.pos + n) % cap);
    s.size = (uint64_t)s.size + n >= cap ? cap : s.size + n;
    s.added += n;
    s.trajs += 1;
    PERI_CUDA_ST(st, s);
  }
  PERI_CUDA_ST(d_status, tot.status);
  peri_cuda_acc_clear(&acc[0]);
}

/* >>sequences: sequence replay (seq_len > 0) */
// A buffer with seq_len = len > 0 also keeps per_buffer's sequence tree
// (leaf q: the priority of the sequence starting at slot q * stride, 0
// while it is not valid), its min tree (buffer-max weights) and validity
// flags. After an add's or an update's two launches on the item tree, two
// more refresh the sequences holding a changed step, the ones
// peri_seq_touch refreshes: each of them gets its leaf from the final
// item leaves (peri_seq_steps_of), then the sequence tree settles as an
// update's tree does. A refresh of a sequence whose steps did not change
// writes the bits it holds (its leaf is always that function of the
// state), so the set refreshed may be larger than the set changed: it
// costs time, never bits.
// Refresh ("own"): a thread per candidate (touch j, its k-th sequence
// start; touch j a run of slots [first, first + count) mod cap). It
// computes sequence q's leaf r and exchanges the leaf for r with the sign
// bit set, the mark of a changed node; every candidate of q writes the
// same bits, and the one that found the leaf unmarked owns q: it sets
// q's validity, own[q] = 1, and counts itself on q's path.
// Settle: the same threads; the one that takes own[q] back to 0 climbs.
// Both do nothing when the call's status word is not 0 (the call was
// refused and changed nothing, or the buffer is broken). Eta is the
// state's (cfg.seq_eta).
#define PERI_CUDA_SEQ_ADD 0u   // the slots of the add just made
#define PERI_CUDA_SEQ_ITEMS 1u // the slot of each current item id
#define PERI_CUDA_SEQ_SEQS 2u  // the steps of each current sequence id
#define PERI_CUDA_NONE 0xFFFFFFFFu

struct peri_cuda_seq_job {
  const peri_cuda_buffer_state *st;
  const uint64_t *ids; // ITEMS, SEQS: the call's ids
  const uint32_t *gen;
  const unsigned long long *status; // the call's status word
  uint32_t kind, n, per, cap, len, stride, ns;
};

// The sequences of touch (first, count): per candidates at most, count
// >= cap: all ns; else ceil(count / stride).
static uint32_t peri_cuda_seq_per(uint64_t count, uint32_t cap, uint32_t st) {
  return count >= cap ? cap / st : (uint32_t)((count + st - 1) / st);
}

// The sequence of candidate t (< touches * per), or PERI_CUDA_NONE.
static __device__ uint32_t peri_cuda_seq_candidate(const peri_cuda_seq_job &jb,
                                                   uint32_t t) {
  uint32_t j = t / jb.per, k = t % jb.per, slot, first;
  uint64_t count, m;
  if (jb.kind == PERI_CUDA_SEQ_ADD) {
    uint32_t keep = jb.n < jb.cap ? jb.n : jb.cap; // after the add's pos
    slot = (uint32_t)(((uint64_t)PERI_CUDA_LD(&jb.st->pos) + jb.cap - keep) %
                      jb.cap);
    count = keep;
  } else {
    uint64_t id = PERI_CUDA_LD(&jb.ids[j]);
    slot = (uint32_t)id;
    if (jb.kind == PERI_CUDA_SEQ_SEQS) slot &= ~(uint32_t)PER_ID_SEQ;
    if (slot >= jb.cap || (uint32_t)(id >> 32) != PERI_CUDA_LD(&jb.gen[slot]))
      return PERI_CUDA_NONE; // stale: nothing of it changed
    count = jb.kind == PERI_CUDA_SEQ_SEQS ? jb.len : 1u;
  }
  count += jb.len - 1u; // and the sequences that start before it
  if (count >= jb.cap) return k < jb.ns ? k : PERI_CUDA_NONE;
  first = (uint32_t)(((uint64_t)slot + jb.cap - (jb.len - 1u)) % jb.cap);
  m = ((uint64_t)first + jb.stride - 1u) / jb.stride + k;
  if (m * jb.stride >= (uint64_t)first + count) return PERI_CUDA_NONE;
  return (uint32_t)(m % jb.ns);
}

static __global__ void PERI_CUDA_BOUNDS
peri_cuda_seq_own_kernel(peri_cuda_seq_job jb, uint32_t threads,
                         const per_real *leaf, const uint8_t *ends, int cross,
                         peri_cuda_seqs sq, uint32_t *own, unsigned int *scnt) {
  uint32_t t = peri_cuda_thread_id(), q, steps;
  double v = 0;
  per_real r;
  if (t >= threads || PERI_CUDA_LD(jb.status) != 0) return;
  q = peri_cuda_seq_candidate(jb, t);
  if (q == PERI_CUDA_NONE) return;
  steps = peri_seq_steps_of(
      leaf, jb.gen, ends, jb.cap, PERI_CUDA_LD(&jb.st->pos), jb.len, cross,
      PERI_CUDA_LD(&jb.st->cfg.seq_eta), q * jb.stride, &v);
  r = steps ? (per_real)v : (per_real)0;
  if (atomicExch(peri_cuda_as_bits(&sq.node[sq.L + q]),
                 peri_cuda_to_bits(r) | PERI_CUDA_SIGN_BIT) &
      PERI_CUDA_SIGN_BIT)
    return; // another candidate of q owns it
  PERI_CUDA_ST(&sq.ok[q], (uint8_t)(steps != 0));
  PERI_CUDA_ST(&own[q], 1u);
  peri_cuda_count_path(scnt, sq.L, sq.depth, q);
}

template <bool MIN>
static __global__ void PERI_CUDA_BOUNDS peri_cuda_seq_settle_kernel(
    peri_cuda_seq_job jb, uint32_t threads, peri_cuda_seqs sq, uint32_t *own,
    unsigned int *scnt) {
  uint32_t t = peri_cuda_thread_id(), q;
  if (t >= threads || PERI_CUDA_LD(jb.status) != 0) return;
  q = peri_cuda_seq_candidate(jb, t);
  if (q == PERI_CUDA_NONE || atomicExch(&own[q], 0u) != 1u) return;
  peri_cuda_climb<MIN>(sq.node, (per_real *)sq.mn, scnt, sq.L, sq.depth, q,
                       peri_cuda_vals_of(peri_cuda_pairs_none()), 1,
                       PERI_CUDA_BASE_MARKED_LEAVES);
}

// update_seq, launch 1 ("claim"): thread p for TD error p = j * len + t,
// step t of ids[j]. per_buffer_update_seq's checks, in its order through
// the key j * (len + 2) + c: c = 0 the id (a sequence's id, sample
// handed out), 1 + t the TD error, len + 1 a current id whose sequence
// is not valid (the settle divides the key back to j). A current id's
// step before its sequence's first episode end (peri_seq_steps_of's
// steps) is the pair (slot + t, the priority of td[p]), claimed as an
// update's pair is (its leaf in idx[p]); step 0 flags a stale id. The
// priorities take the state's eps and alpha; a broken buffer's claim does
// nothing.
static __global__ void PERI_CUDA_BOUNDS peri_cuda_claim_seq_kernel(
    per_real *node, uint32_t L, uint32_t depth, uint32_t cap,
    const uint64_t *ids, const float *td, const uint32_t *gen,
    const uint8_t *ends, const uint8_t *ok, uint32_t len, uint32_t stride,
    uint32_t pairs, const peri_cuda_buffer_state *st, unsigned int *cnt,
    uint32_t *flag, uint32_t *idx, per_real *prio, per_real *orig,
    peri_cuda_acc *acc) {
  uint32_t p = peri_cuda_thread_id(), j, t, u, slot, g, f = 0, key;
  uint64_t id;
  per_status s, sf;
  int current, live;
  if (p >= pairs || peri_cuda_broken(st)) return;
  j = p / len;
  t = p % len;
  key = j * (len + 2u);
  id = PERI_CUDA_LD(&ids[j]) & ~PER_ID_SEQ;
  slot = (uint32_t)id;
  g = slot < cap ? PERI_CUDA_LD(&gen[slot]) : 0u;
  s = peri_id_status_of(id, cap, stride, g, PERI_CUDA_LD(&st->added));
  if (s != PER_OK && t == 0)
    atomicMax(&acc->status, peri_cuda_status_word(key, s));
  sf = peri_float_status(PERI_CUDA_LD(&td[p]));
  if (sf != PER_OK)
    atomicMax(&acc->status, peri_cuda_status_word(key + 1u + t, sf));
  current = s == PER_OK && (uint32_t)(id >> 32) == g;
  live = current && PERI_CUDA_LD(&ok[slot / stride]);
  if (t == 0 && current && !live)
    atomicMax(&acc->status,
              peri_cuda_status_word(key + len + 1u, PER_ERR_INDEX));
  if (t == 0 && s == PER_OK && !current) f = PERI_CUDA_F_STALE;
  for (u = 0; live && u < t; ++u) // an episode end before step t
    if (PERI_CUDA_LD(&ends[((uint64_t)slot + u) % cap])) live = 0;
  if (live && sf == PER_OK) {
    uint32_t leaf = (uint32_t)(((uint64_t)slot + t) % cap);
    peri_cuda_bits old;
    PERI_CUDA_ST(&idx[p], leaf);
    PERI_CUDA_ST(&prio[p],
                 peri_priority(PERI_CUDA_LD(&td[p]), PERI_CUDA_LD(&st->cfg.eps),
                               PERI_CUDA_LD(&st->cfg.alpha)));
    old =
        atomicMax(peri_cuda_as_bits(&node[L + leaf]), PERI_CUDA_CLAIM_TAG | p);
    if (old < PERI_CUDA_CLAIM_TAG) {
      PERI_CUDA_ST(&orig[p], peri_cuda_from_bits(old));
      f |= PERI_CUDA_F_OWN;
    }
    f |= PERI_CUDA_F_CLIMB;
    peri_cuda_count_path(cnt, L, depth, leaf);
  }
  PERI_CUDA_ST(&flag[p], f);
}

/* >>draw: a buffer's sample (distinct draws, draw, deliver) */
// A sample's PER_SAMPLE_UNIQUE picks and its degenerate uniform draws are
// made by block 0's threads together, in a cooperative section (>>block)
// with per_buffer_sample's methods and the same use of the stream, so
// the same leaves in the same order. Where a method changes the tree or
// the permutation at every pick (the fallback after too many repeats,
// the window's picks, alpha 0's swaps), lane 0 makes the picks in order and the others wait at the next barrier: no other
// thread of the launch touches what it writes (the tree's zeroed picks
// are put back before the barrier).

// The shared memory of the draw kernel's section: the scans' arrays (a
// word a lane each: sa and sb the two buffers of peri_cuda_block_scan,
// sc a lane's own count), four words a lane (sv), a lane's smallest
// value (mn), and what lane 0's serial part hands on (a stream, a
// status).
struct peri_cuda_block_mem {
  uint32_t *sa, *sb, *sc, *sv;
  per_real *mn;
  per_rng *next;
  uint32_t *status;
};

// Declares the section's shared memory, and sm over it (once a block, in
// the section).
#define PERI_CUDA_BLOCK_MEM(sm)                                     \
  PERI_CUDA_SHARED(uint32_t, sm##_a, PERI_CUDA_BLOCK_THREADS);      \
  PERI_CUDA_SHARED(uint32_t, sm##_b, PERI_CUDA_BLOCK_THREADS);      \
  PERI_CUDA_SHARED(uint32_t, sm##_c, PERI_CUDA_BLOCK_THREADS);      \
  PERI_CUDA_SHARED(uint32_t, sm##_v, 4 * PERI_CUDA_BLOCK_THREADS);  \
  PERI_CUDA_SHARED(per_real, sm##_mn, PERI_CUDA_BLOCK_THREADS);     \
  PERI_CUDA_SHARED(per_rng, sm##_next, 1);                          \
  PERI_CUDA_SHARED(uint32_t, sm##_status, 1);                       \
  peri_cuda_block_mem sm = {sm##_a,  sm##_b,    sm##_c,     sm##_v, \
                            sm##_mn, sm##_next, sm##_status}

// The picks idx[0..m) put back from val[0..m): the tree is bitwise what
// it was (every node is the sum of its children).
static __device__ void peri_cuda_put_back(per_real *node, uint32_t L,
                                          const uint32_t *idx,
                                          const per_real *val, uint32_t m) {
  uint32_t j;
  for (j = 0; j < m; ++j)
    peri_put_leaf(node, L, PERI_CUDA_LD(&idx[j]), PERI_CUDA_LD(&val[j]));
}

// Pick j: leaf into idx, its value into val.
static __device__ void peri_cuda_keep_pick(const per_real *node, uint32_t L,
                                           uint32_t j, uint32_t leaf,
                                           uint32_t *idx, per_real *val) {
  PERI_CUDA_ST(&idx[j], leaf);
  PERI_CUDA_ST(&val[j], PERI_CUDA_LD(&node[L + leaf]));
}

// The id of a drawn leaf: its unit's first slot, that slot's generation,
// PER_ID_SEQ for a sequence.
static __device__ uint64_t peri_cuda_id_of(const peri_plan *p,
                                           const uint32_t *gen, uint32_t stride,
                                           uint32_t leaf) {
  uint32_t slot = leaf * stride;
  return (uint64_t)slot | ((uint64_t)PERI_CUDA_LD(&gen[slot]) << 32) |
         (p->seq ? PER_ID_SEQ : 0u);
}

// alpha = 0, the whole buffer (per_swap_sample): partial Fisher-Yates on
// the permutation of the n stored slots, which keeps the swaps. Its own
// and not per.h's: per_swap_sample works on a per_swap and takes its
// words in Philox lanes on the CPU; this is its plain path, word for
// word, on the permutation in the device buffer's memory.
static __device__ void peri_cuda_pick_swap(per_rng *r, const per_real *node,
                                           uint32_t L, uint32_t *perm,
                                           uint32_t n, uint32_t B,
                                           uint32_t *idx, per_real *val) {
  uint32_t i;
  for (i = 0; i < B; ++i) {
    uint32_t j = i + peri_rng_below(r, n - i), pick = PERI_CUDA_LD(&perm[j]);
    PERI_CUDA_ST(&perm[j], PERI_CUDA_LD(&perm[i]));
    PERI_CUDA_ST(&perm[i], pick);
    peri_cuda_keep_pick(node, L, i, pick, idx, val);
  }
}

// Block k of the words stream r hands out from here on: k = 0 is r->buf
// (of which word j is still to come iff j >= 4 - r->avail), k >= 1
// per_rng_block(seed, counter + k - 1).
static __device__ void peri_cuda_stream_block(const per_rng *r, uint64_t k,
                                              uint32_t w[4]) {
  if (k == 0) memcpy(w, r->buf, sizeof r->buf);
  else per_rng_block(r->seed, r->counter + k - 1, w);
}

// Stream r as peri_rng_u32 leaves it once word j of block k was the last
// handed out.
static __device__ per_rng peri_cuda_stream_after(const per_rng *r, uint64_t k,
                                                 uint32_t j) {
  per_rng n = *r;
  if (k) {
    n.counter = r->counter + k;
    per_rng_block(r->seed, r->counter + k - 1, n.buf);
  }
  n.avail = 3u - j;
  return n;
}

// Where word g of the stream r lies (g = 0: the word peri_rng_u32(r)
// returns next): word *j of block *k.
static __device__ void peri_cuda_stream_at(const per_rng *r, uint64_t g,
                                           uint64_t *k, uint32_t *j) {
  if (g < r->avail) {
    *k = 0;
    *j = 4u - r->avail + (uint32_t)g;
  } else {
    *k = (g - r->avail) / 4u + 1u;
    *j = (uint32_t)((g - r->avail) % 4u);
  }
}

// Real e of the stream r (e = 0: what peri_rng_real(r) returns next): it
// takes a fixed number of words (PERI_CUDA_REAL_WORDS), so its words
// are known without drawing those before it. One block made at a time:
// a double's second word is the first's neighbour, or the next block's
// first word.
#define PERI_CUDA_REAL_WORDS (sizeof(per_real) == sizeof(float) ? 1u : 2u)
static __device__ per_real peri_cuda_stream_real(const per_rng *r, uint64_t e) {
  uint32_t wd[4], got[2], j, q;
  uint64_t k;
  peri_cuda_stream_at(r, e * PERI_CUDA_REAL_WORDS, &k, &j);
  for (q = 0; q < PERI_CUDA_REAL_WORDS; ++q, ++j) {
    if (q == 0 || j == 4) {
      if (q) k += 1, j = 0;
      peri_cuda_stream_block(r, k, wd);
    }
    got[q] = wd[j];
  }
  if (PERI_CUDA_REAL_WORDS == 1u) return (per_real)per_u01f(got[0]);
  return (per_real)per_u01d(got[0], got[1]);
}

// Inclusive prefix sums of a[0 .. blockDim.x) (stored, a barrier met
// since) by Hillis and Steele's doubling, with b the other buffer:
// returns the one holding them, after a barrier.
static __device__ uint32_t *peri_cuda_block_scan(uint32_t *a, uint32_t *b) {
  uint32_t d;
  for (d = 1; d < blockDim.x; d <<= 1) {
    uint32_t *c;
    PERI_CUDA_LANES(t) {
      uint32_t x = PERI_CUDA_LD(&a[t]);
      PERI_CUDA_ST(&b[t], t >= d ? x + PERI_CUDA_LD(&a[t - d]) : x);
    }
    PERI_CUDA_SYNC();
    c = a;
    a = b;
    b = c;
  }
  return a;
}

// The lanes a round of a section gives `left` draws still to make.
static __device__ uint32_t peri_cuda_round_lanes(uint32_t left) {
  return left < blockDim.x ? left : blockDim.x;
}

// The set of a section's distinct draws: 2^hb 64-bit words, each empty
// (0) or (key + 1) << 32 | the smallest draw index d entered with that
// key, in slot peri_set_home(key, hb) or after it (peri_set_insert's
// probing). The lanes empty it (a barrier to follow); a lane enters
// (key, d) with a CAS that claims an empty slot and an atomicMin that
// keeps the first draw, returning the slot; after a barrier,
// peri_cuda_set_slot finds a key entered.
static __device__ void peri_cuda_set_clear(unsigned long long *set,
                                           uint32_t hb) {
  PERI_CUDA_LANES(t) {
    uint32_t h;
    for (h = t; h < (1u << hb); h += blockDim.x) PERI_CUDA_ST(&set[h], 0ull);
  }
}

static __device__ uint32_t peri_cuda_set_first(unsigned long long *set,
                                               uint32_t hb, uint32_t key,
                                               uint32_t d) {
  unsigned long long mine = (unsigned long long)(key + 1u) << 32 | d, old;
  uint32_t h = peri_set_home(key, hb);
  while ((old = atomicCAS(&set[h], 0ull, mine)) != 0ull) {
    if ((uint32_t)(old >> 32) == key + 1u) {
      atomicMin(&set[h], mine);
      break;
    }
    h = (h + 1u) & ((1u << hb) - 1u);
  }
  return h;
}

static __device__ uint32_t peri_cuda_set_slot(const unsigned long long *set,
                                              uint32_t hb, uint32_t key) {
  uint32_t h = peri_set_home(key, hb);
  while ((uint32_t)(PERI_CUDA_LDCG(&set[h]) >> 32) != key + 1u)
    h = (h + 1u) & ((1u << hb) - 1u);
  return h;
}

// The whole tree's distinct draws (per_cat_sample's method, with the
// buffer's repeat limit max_unique), phase 1 by the block's lanes: draw
// e = 0, 1, ... is the leaf under real e of stream *r0 times the mass
// node[1] (> 0), and a pick when no earlier draw has that leaf; the
// phase ends at B picks or `limit` (>= 1) repeats. Each round, lane
// t < n makes draw e + t, n no more than the picks or the repeats still
// allowed (so no round runs past the end: the CPU's groups), and enters
// it in the set (peri_cuda_set_first, 2^peri_cat_hbits(B) words: its
// leaf and the smallest draw with it). After the barrier a draw is a pick when it is
// its leaf's first, and a prefix sum over the lanes writes the picks in
// draw order into idx and val. Returns the picks; *next: the stream
// after the phase's last draw. Called by every thread of the block
// (uniform).
static __device__ uint32_t peri_cuda_cat_iid(
    const per_rng *r0, const per_real *node, uint32_t L, uint32_t B,
    uint32_t limit, unsigned long long *set, uint32_t *idx, per_real *val,
    peri_cuda_block_mem sm, per_rng *next) {
  uint32_t hb = peri_cat_hbits(B), m = 0, rej = 0, e = 0, n, j, *inc;
  uint64_t k;
  per_real total = PERI_CUDA_LD(&node[1]);
  peri_cuda_set_clear(set, hb);
  PERI_CUDA_SYNC();
  while (m < B && rej < limit) {
    n = peri_cuda_round_lanes(B - m);
    if (limit - rej < n) n = limit - rej;
    PERI_CUDA_LANES(t) {
      uint32_t leaf;
      if (t >= n) continue;
      leaf = peri_cuda_descend(
          node, L, peri_mul_rn(peri_cuda_stream_real(r0, e + t), total));
      PERI_CUDA_ST(&sm.sv[t], peri_cuda_set_first(set, hb, leaf, e + t));
      PERI_CUDA_ST(&sm.sv[blockDim.x + t], leaf);
    }
    PERI_CUDA_SYNC();
    PERI_CUDA_LANES(t) {
      uint32_t c = t < n && (uint32_t)PERI_CUDA_LDCG(
                                &set[PERI_CUDA_LD(&sm.sv[t])]) == e + t;
      PERI_CUDA_ST(&sm.sa[t], c);
      PERI_CUDA_ST(&sm.sc[t], c);
    }
    PERI_CUDA_SYNC();
    inc = peri_cuda_block_scan(sm.sa, sm.sb);
    PERI_CUDA_LANES(t) {
      if (PERI_CUDA_LD(&sm.sc[t]))
        peri_cuda_keep_pick(node, L, m + PERI_CUDA_LD(&inc[t]) - 1u,
                            PERI_CUDA_LD(&sm.sv[blockDim.x + t]), idx, val);
    }
    j = PERI_CUDA_LD(&inc[blockDim.x - 1]);
    m += j;
    rej += n - j;
    e += n;
    PERI_CUDA_SYNC();
  }
  peri_cuda_stream_at(r0, (uint64_t)e * PERI_CUDA_REAL_WORDS - 1u, &k, &j);
  *next = peri_cuda_stream_after(r0, k, j);
  return m;
}

// Phase 2 of the whole tree's distinct draws, after m < B picks in idx
// and val: the picks zeroed, the rest drawn one at a time from stream r,
// each zeroed, then every pick put back (the tree bitwise as before).
// PER_ERR_TOO_FEW when the mass runs out first. One thread.
static __device__ per_status peri_cuda_cat_rest(per_rng *r, per_real *node,
                                                uint32_t L, uint32_t B,
                                                uint32_t m, uint32_t *idx,
                                                per_real *val) {
  uint32_t j;
  for (j = 0; j < m; ++j)
    peri_put_leaf(node, L, PERI_CUDA_LD(&idx[j]), (per_real)0);
  while (m < B) {
    uint32_t leaf;
    per_real total = PERI_CUDA_LD(&node[1]);
    if (!(total > 0)) {
      peri_cuda_put_back(node, L, idx, val, m);
      return PER_ERR_TOO_FEW;
    }
    leaf = per_tree_descend(node, L, peri_mul_rn(peri_rng_real(r), total));
    peri_cuda_keep_pick(node, L, m++, leaf, idx, val);
    peri_put_leaf(node, L, leaf, (per_real)0);
  }
  peri_cuda_put_back(node, L, idx, val, m);
  return PER_OK;
}

// The draws t_i in idx[0..B) (t_i <= N - B + i) into Floyd's picks (see
// peri_cuda_floyd, next).
static __device__ void peri_cuda_floyd_picks(uint32_t N, uint32_t B,
                                             unsigned long long *set,
                                             uint32_t *idx,
                                             peri_cuda_block_mem sm) {
  uint32_t i0, n, d, base = N - B, hb = peri_cat_hbits(B);
  uint32_t *xa, *xb, *pa, *pb, *c;
  peri_cuda_set_clear(set, hb); // each value's first draw
  PERI_CUDA_SYNC();
  PERI_CUDA_LANES(t) {
    uint32_t i;
    for (i = t; i < B; i += blockDim.x)
      (void)peri_cuda_set_first(set, hb, PERI_CUDA_LD(&idx[i]), i);
  }
  PERI_CUDA_SYNC();
  for (i0 = 0; i0 < B; i0 += blockDim.x) { // the repeats, round by round
    n = peri_cuda_round_lanes(B - i0);
    xa = sm.sa; // taken so far, and the lane whose taken decides the rest
    xb = sm.sb;
    pa = sm.sv;
    pb = sm.sv + blockDim.x;
    PERI_CUDA_LANES(t) {
      uint32_t i = i0 + t, v, x = 0, p = PERI_CUDA_NONE;
      if (t < n) {
        v = PERI_CUDA_LD(&idx[i]);
        x = (uint32_t)PERI_CUDA_LDCG(&set[peri_cuda_set_slot(set, hb, v)]) < i;
        if (!x && v >= base && v - base < i) { // v is j_k of k < i
          uint32_t kd = v - base;
          // k picked j_k: an earlier round's pick is final; in this
          // round, k drew t_k = j_k, or k's taken decides (lane kd - i0)
          x = PERI_CUDA_LD(&idx[kd]) == v;
          if (kd >= i0) p = kd - i0;
        }
        if (x) p = PERI_CUDA_NONE;
      }
      PERI_CUDA_ST(&xa[t], x);
      PERI_CUDA_ST(&pa[t], p);
    }
    PERI_CUDA_SYNC();
    for (d = 1; d < blockDim.x; d <<= 1) {
      PERI_CUDA_LANES(t) {
        uint32_t x = PERI_CUDA_LD(&xa[t]), p = PERI_CUDA_LD(&pa[t]);
        if (p != PERI_CUDA_NONE) {
          x |= PERI_CUDA_LD(&xa[p]);
          p = PERI_CUDA_LD(&pa[p]);
        }
        PERI_CUDA_ST(&xb[t], x);
        PERI_CUDA_ST(&pb[t], p);
      }
      PERI_CUDA_SYNC();
      c = xa;
      xa = xb;
      xb = c;
      c = pa;
      pa = pb;
      pb = c;
    }
    PERI_CUDA_LANES(t) {
      if (t < n && PERI_CUDA_LD(&xa[t]))
        PERI_CUDA_ST(&idx[i0 + t], base + i0 + t);
    }
    PERI_CUDA_SYNC();
  }
}

// Floyd's B distinct positions of N (B <= N: per.h's peri_plan_floyd)
// by the block's lanes, into idx in pick order; *next: the stream after
// them. Draw i is t_i = peri_rng_below(stream, j_i + 1), j_i = N - B + i,
// and its pick is j_i when t_i is taken already, else t_i.
//   - The draws: a word is rejected when its low product is under
//     2^32 mod n, and the draw takes the next word. Each round lane t
//     takes word g + t for draw i + t; the first lane whose word is
//     rejected (an atomicMin) ends what the round settled, and the next
//     round starts at the word after it (one round in most: a word is
//     rejected with probability below n / 2^32).
//   - The repeats (peri_cuda_floyd_picks): t_i is taken when an earlier
//     draw had the same value (the set: each value's first draw), or
//     when it is j_k of an earlier k whose pick was j_k. In rounds of a
//     lane per draw, in order: an earlier round's picks are final in
//     idx; a lane whose k is in its own round takes "taken" from lane k's
//     by pointer jumping (log2 blockDim.x doubling steps): taken_i is
//     true when any draw down the chain had its value first elsewhere or
//     drew its own j.
// Called by every thread of the block (uniform).
static __device__ void peri_cuda_floyd(uint32_t N, uint32_t B,
                                       const per_rng *r0,
                                       unsigned long long *set, uint32_t *idx,
                                       peri_cuda_block_mem sm, per_rng *next) {
  uint32_t i0 = 0, n, f, j, base = N - B;
  uint64_t g0 = 0, k;
  while (i0 < B) { // the draws
    n = peri_cuda_round_lanes(B - i0);
    PERI_CUDA_LANES(t) {
      if (t == 0) PERI_CUDA_ST(sm.status, n);
    }
    PERI_CUDA_SYNC();
    PERI_CUDA_LANES(t) {
      uint32_t nt = base + i0 + t + 1u, wd[4], jj;
      uint64_t m, kk;
      if (t >= n) continue;
      peri_cuda_stream_at(r0, g0 + t, &kk, &jj);
      peri_cuda_stream_block(r0, kk, wd);
      m = (uint64_t)wd[jj] * nt;
      if ((uint32_t)m < (0u - nt) % nt) atomicMin(sm.status, t);
      else PERI_CUDA_ST(&idx[i0 + t], (uint32_t)(m >> 32));
    }
    PERI_CUDA_SYNC();
    f = PERI_CUDA_LD(sm.status); // lanes before f settled their draws
    g0 += f + (f < n);
    i0 += f;
    PERI_CUDA_SYNC(); // (read before lane 0 stores again)
  }
  peri_cuda_stream_at(r0, g0 - 1u, &k, &j);
  *next = peri_cuda_stream_after(r0, k, j);
  peri_cuda_floyd_picks(N, B, set, idx, sm);
}

// The eligible sequences of a plan, positions e = 0, 1, ... over its
// ranges in order: how many, and the sequence at e.
static __device__ uint32_t peri_cuda_seq_count(const peri_plan *p) {
  uint32_t q, n = 0;
  for (q = 0; q < p->nr; ++q) n += p->hi[q] - p->lo[q];
  return n;
}

static __device__ uint32_t peri_cuda_seq_pos(const peri_plan *p, uint32_t e) {
  uint32_t n0 = p->hi[0] - p->lo[0];
  return e < n0 ? p->lo[0] + e : p->lo[1] + (e - n0);
}

// Positions a rank table entry covers, and the entries of E positions.
#define PERI_CUDA_RANK_CHUNK 32u
static __device__ uint32_t peri_cuda_rank_chunks(uint32_t E) {
  return (E + PERI_CUDA_RANK_CHUNK - 1) / PERI_CUDA_RANK_CHUNK;
}

// The rank table of a plan's eligible sequences (ok: their flags), by
// the block's lanes: rank[c] = the valid ones before position 32c, for
// each of the ceil(eligible / 32) chunks. Each lane counts a run of
// chunks; a prefix sum over the lanes (sa, sb, sc: shared, a lane each)
// gives each run its start. Returns the valid ones in all (nvalid).
static __device__ uint32_t peri_cuda_seq_ranks(const peri_plan *p,
                                               const uint8_t *ok,
                                               uint32_t *rank, uint32_t *sa,
                                               uint32_t *sb, uint32_t *sc) {
  uint32_t E = peri_cuda_seq_count(p), valid, *inc;
  uint32_t nch = peri_cuda_rank_chunks(E);
  uint32_t per = (nch + blockDim.x - 1) / blockDim.x;
  PERI_CUDA_LANES(t) {
    uint32_t c, sum = 0;
    for (c = t * per; c < nch && c < (t + 1) * per; ++c) {
      uint32_t e = c * PERI_CUDA_RANK_CHUNK, n = 0,
               end =
                   E - e < PERI_CUDA_RANK_CHUNK ? E : e + PERI_CUDA_RANK_CHUNK;
      for (; e < end; ++e) n += ok[peri_cuda_seq_pos(p, e)] != 0;
      PERI_CUDA_ST(&rank[c], n);
      sum += n;
    }
    PERI_CUDA_ST(&sa[t], sum);
    PERI_CUDA_ST(&sc[t], sum);
  }
  PERI_CUDA_SYNC();
  inc = peri_cuda_block_scan(sa, sb);
  PERI_CUDA_LANES(t) {
    uint32_t c, run = PERI_CUDA_LD(&inc[t]) - PERI_CUDA_LD(&sc[t]);
    for (c = t * per; c < nch && c < (t + 1) * per; ++c) {
      uint32_t n = PERI_CUDA_LD(&rank[c]);
      PERI_CUDA_ST(&rank[c], run);
      run += n;
    }
  }
  valid = PERI_CUDA_LD(&inc[blockDim.x - 1]); // read before the barrier:
  PERI_CUDA_SYNC(); // the lanes may store to sa, sb next
  return valid;
}

// The valid eligible sequence of rank r (< nvalid): per.h's
// peri_plan_uniform_leaf, by a search of the rank table and a scan of
// one chunk.
static __device__ uint32_t peri_cuda_seq_at_rank(const peri_plan *p,
                                                 const uint8_t *ok,
                                                 const uint32_t *rank,
                                                 uint32_t r) {
  uint32_t E = peri_cuda_seq_count(p), lo = 0, e;
  uint32_t hi = peri_cuda_rank_chunks(E);
  while (hi - lo > 1) { // rank[lo] <= r < rank[hi] (or hi the end)
    uint32_t mid = lo + (hi - lo) / 2;
    if (PERI_CUDA_LD(&rank[mid]) <= r) lo = mid;
    else hi = mid;
  }
  r -= PERI_CUDA_LD(&rank[lo]);
  for (e = lo * PERI_CUDA_RANK_CHUNK; e < E; ++e) {
    uint32_t j = peri_cuda_seq_pos(p, e);
    if (ok[j] && r-- == 0) return j;
  }
  return 0; // r >= nvalid: not reached
}

// The lanes' part of a section's batch once its picks are in idx (and,
// but for degenerate mass, their values in val): ids, and weights by the
// buffer's minimum; or the batch's minimum over the lanes, which thread
// 0 reports (the record returned). Degenerate mass: each entry of idx is
// a uniform position, turned into its leaf (sequences through the rank
// table) with its value into val, and every weight is 1. Called by every
// thread of the block (uniform).
static __device__ peri_cuda_acc peri_cuda_emit(
    const peri_plan *p, const uint8_t *ok, uint32_t cap, const uint32_t *rank,
    const per_real *node, const uint32_t *gen, uint32_t B, uint32_t *idx,
    per_real *val, uint64_t *ids, float *w, peri_cuda_block_mem sm) {
  peri_cuda_acc a = peri_cuda_acc_none();
  per_real pmin = PERI_NO_MIN;
  uint32_t L = p->L, j;
  PERI_CUDA_LANES(t) {
    uint32_t k;
    per_real mn = PERI_NO_MIN;
    for (k = t; k < B; k += blockDim.x) {
      uint32_t leaf = PERI_CUDA_LD(&idx[k]);
      per_real x;
      if (p->degenerate) {
        leaf = p->seq ? peri_cuda_seq_at_rank(p, ok, rank, leaf)
                      : peri_plan_uniform_leaf(p, ok, cap, leaf);
        PERI_CUDA_ST(&idx[k], leaf);
        x = PERI_CUDA_LD(&node[L + leaf]);
        PERI_CUDA_ST(&val[k], x);
      } else {
        x = PERI_CUDA_LD(&val[k]);
      }
      if (ids) PERI_CUDA_ST(&ids[k], peri_cuda_id_of(p, gen, p->stride, leaf));
      if (w && p->degenerate) PERI_CUDA_ST(&w[k], 1.0f);
      else if (w && p->bufmax)
        PERI_CUDA_ST(&w[k], peri_weight(x, p->pmin, p->beta));
      else if (x < mn) mn = x;
    }
    PERI_CUDA_ST(&sm.mn[t], mn);
  }
  PERI_CUDA_SYNC();
  if (w && !p->degenerate && !p->bufmax) {
    for (j = 0; j < blockDim.x; ++j) {
      per_real x = PERI_CUDA_LD(&sm.mn[j]);
      if (x < pmin) pmin = x;
    }
    a = peri_cuda_weight_report(pmin, 0);
  }
  return a;
}

// A PER_SAMPLE_UNIQUE sample's picks (p->next: from *r0, over the stream
// they read), their ids and weights, as the draw kernel writes a
// batch's; returns what thread 0 reports (a status, or the batch minimum
// when the weights wait for it). node: the tree drawn from (items' or
// sequences'); perm: items only; rank: the sequences' rank table. The
// whole tree's phase 1 is the lanes' (peri_cuda_cat_iid), as are
// Floyd's picks of degenerate mass (peri_cuda_floyd, sequences' rank
// table first) and the rest (peri_cuda_emit); the other methods are lane
// 0's. Called by every thread
// of the block (uniform).
static __device__ peri_cuda_acc
peri_cuda_pick(peri_plan *p, const per_rng *r0, uint32_t max_unique,
               uint32_t cap, uint32_t size, per_real *node, uint32_t *perm,
               const uint32_t *gen, const uint8_t *ok, unsigned long long *set,
               uint32_t *rank, uint32_t B, uint32_t *idx, per_real *val,
               uint64_t *ids, float *w, peri_cuda_block_mem sm) {
  peri_cuda_acc a = peri_cuda_acc_none();
  per_status s = PER_OK;
  uint32_t m = 0, L = p->L;
  int cat = p->whole && !p->degenerate && !(perm && !p->seq);
  p->next = *r0;
  if (p->degenerate && p->seq) { // uniform over the valid ones
    p->nvalid = peri_cuda_seq_ranks(p, ok, rank, sm.sa, sm.sb, sm.sc);
    if (p->nvalid == 0) s = PER_ERR_TOO_FEW;
  }
  if ((!p->seq || p->degenerate) && B > p->nvalid) s = PER_ERR_TOO_FEW;
  if (s != PER_OK) {
    a.status = peri_cuda_status_word(0, s);
    return a;
  }
  if (cat) {
    uint64_t limit = (uint64_t)64 * B + 1024;
    if (max_unique < limit) limit = max_unique;
    m = peri_cuda_cat_iid(r0, node, L, B, (uint32_t)limit, set, idx, val, sm,
                          &p->next);
  } else if (p->degenerate) {
    peri_cuda_floyd(p->nvalid, B, r0, set, idx, sm, &p->next);
  }
  if (cat ? m < B : !p->degenerate) { // lane 0 alone, in order
    PERI_CUDA_LANES(t) {
      per_rng r = p->next;
      per_status u = PER_OK;
      if (t != 0) continue;
      if (cat) u = peri_cuda_cat_rest(&r, node, L, B, m, idx, val);
      else if (p->whole)
        peri_cuda_pick_swap(&r, node, L, perm, size, B, idx, val);
      else u = peri_plan_window_picks(p, &r, node, idx, val);
      PERI_CUDA_ST(sm.next, r);
      PERI_CUDA_ST(sm.status, (uint32_t)u);
    }
    PERI_CUDA_SYNC();
    p->next = PERI_CUDA_LD(sm.next);
    s = (per_status)PERI_CUDA_LD(sm.status);
    if (s != PER_OK) {
      a.status = peri_cuda_status_word(0, s);
      return a;
    }
  }
  return peri_cuda_emit(p, ok, cap, rank, node, gen, B, idx, val, ids, w, sm);
}

// Degenerate mass, without PER_SAMPLE_UNIQUE: the B uniform draws of
// per_buffer_sample, made by block 0's threads together (a cooperative
// section, >>block). per.h draws each with peri_rng_below(stream, nvalid),
// which takes words until one is not rejected (its low product at or
// above 2^32 mod nvalid): so draw k is the value of the k-th word of the
// stream that is not rejected. Each round, every lane takes a block of 4
// words, counts those not rejected, a prefix sum over the lanes ranks
// them, and each lane writes its draws; the lane with draw B - 1 leaves
// the stream as peri_rng_u32 would after that word. O(B / lanes) rounds,
// not B draws on one thread.
// Sequences: draw r is the valid eligible sequence of rank r, looked up
// in a table of ranks the lanes build first (peri_cuda_seq_ranks), not
// found by a scan of every sequence.

// The section's draws (see above): out[k] = the k-th value below n
// (n >= 1) that peri_rng_below(stream, n) would return, for k < B, from
// stream *r0; returns the stream after them. Called by every thread of
// the block (uniform: the same result in each). In sm.sv, each lane's 4
// values, or PERI_CUDA_NONE for a rejected word (a value is below
// n <= 2^32 - 1: never that).
static __device__ per_rng peri_cuda_uniform_ranks(const per_rng *r0, uint32_t n,
                                                  uint32_t B, uint32_t *out,
                                                  peri_cuda_block_mem sm) {
  uint32_t *sa = sm.sa, *sb = sm.sb, *sc = sm.sc, *sv = sm.sv;
  per_rng *snext = sm.next;
  uint32_t thr = (0u - n) % n, drawn = 0, *inc; // thr: 2^32 mod n
  uint64_t base;
  for (base = 0; drawn < B; base += blockDim.x) {
    PERI_CUDA_LANES(t) {
      uint32_t wd[4], j, c = 0, first = base + t == 0 ? 4u - r0->avail : 0u;
      peri_cuda_stream_block(r0, base + t, wd);
      for (j = 0; j < 4; ++j) {
        uint64_t m = (uint64_t)wd[j] * n;
        int take = j >= first && (uint32_t)m >= thr;
        PERI_CUDA_ST(&sv[4 * t + j],
                     take ? (uint32_t)(m >> 32) : PERI_CUDA_NONE);
        c += (uint32_t)take;
      }
      PERI_CUDA_ST(&sa[t], c);
      PERI_CUDA_ST(&sc[t], c);
    }
    PERI_CUDA_SYNC();
    inc = peri_cuda_block_scan(sa, sb);
    PERI_CUDA_LANES(t) {
      uint32_t j, k = drawn + PERI_CUDA_LD(&inc[t]) - PERI_CUDA_LD(&sc[t]);
      for (j = 0; j < 4 && k < B; ++j) {
        uint32_t r = PERI_CUDA_LD(&sv[4 * t + j]);
        if (r == PERI_CUDA_NONE) continue;
        PERI_CUDA_ST(&out[k], r);
        if (k == B - 1)
          PERI_CUDA_ST(snext, peri_cuda_stream_after(r0, base + t, j));
        ++k;
      }
    }
    drawn += PERI_CUDA_LD(&inc[blockDim.x - 1]);
    PERI_CUDA_SYNC();
  }
  return PERI_CUDA_LD(snext);
}

// The section's draws into idx, val, ids and w (weights 1) as the draw
// kernel writes a batch's, and p->next the stream after them:
// peri_cuda_uniform_ranks into idx, then peri_cuda_emit turns each
// position into its leaf, as for distinct draws. Sequences: p->nvalid and the rank table
// first (rank), and PER_ERR_TOO_FEW when no sequence is valid. Called by
// every thread of the block (uniform).
static __device__ per_status peri_cuda_uniform_draws(
    peri_plan *p, const per_rng *r0, const uint8_t *ok, uint32_t cap,
    const per_real *node, const uint32_t *gen, uint32_t *rank, uint32_t B,
    uint32_t *idx, per_real *val, uint64_t *ids, float *w,
    peri_cuda_block_mem sm) {
  if (p->seq) {
    p->nvalid = peri_cuda_seq_ranks(p, ok, rank, sm.sa, sm.sb, sm.sc);
    if (p->nvalid == 0) return PER_ERR_TOO_FEW;
  }
  p->next = peri_cuda_uniform_ranks(r0, p->nvalid, B, idx, sm);
  (void)peri_cuda_emit(p, ok, cap, rank, node, gen, B, idx, val, ids, w, sm);
  return PER_OK;
}

// sample, launch 1 ("draw"): thread i works out the plan from the state
// (every thread the same: per.h's peri_plan_of, on the sequence tree with
// PER_SAMPLE_SEQUENCES), then draws i: stratum i's leaf, its value, id
// and, when it needs no batch minimum, its weight; otherwise it reports
// the value for the minimum. Degenerate mass and PER_SAMPLE_UNIQUE: block
// 0's threads make the draws together, as the CPU's, in a section
// (peri_cuda_uniform_draws: weights 1, sequences PER_ERR_TOO_FEW when
// none is valid; peri_cuda_pick: the distinct picks; set: their set,
// rank: the sequences' rank table). An empty buffer: thread 0 reports
// PER_ERR_EMPTY. Thread 0 keeps the plan. The beta schedule and
// max_unique are the state's config; a broken buffer's draw does nothing.
static __global__ void PERI_CUDA_BOUNDS_DRAW peri_cuda_draw_kernel(
    const peri_cuda_buffer_state *st, uint32_t cap, uint32_t L_items,
    per_real *items_node, const per_real *items_mn, peri_cuda_seqs sq,
    const uint32_t *traj, const uint32_t *gen, uint32_t *perm, uint32_t B,
    uint32_t flags, double beta, uint32_t window, peri_plan *plan,
    unsigned long long *set, uint32_t *rank, uint32_t *idx, per_real *val,
    uint64_t *ids, float *w, peri_cuda_acc *acc) {
  uint32_t i = peri_cuda_thread_id(), leaf, L, stride;
  uint32_t unique = flags & PER_SAMPLE_UNIQUE;
  peri_cuda_acc mine = peri_cuda_acc_none(), tot;
  peri_cuda_buffer_state s;
  peri_plan_src v;
  peri_plan p;
  per_real x, *node;
  if (peri_cuda_broken(st)) return;
  // (block 0 whole: its threads past B may have draws to make together)
  if ((i >= B && (blockIdx.x != 0 || !PERI_CUDA_BLOCK_ALL)) ||
      (unique && (blockIdx.x != 0 || !PERI_CUDA_BLOCK_SECTION())))
    goto done;
  s = PERI_CUDA_LD(st);
  if (s.size == 0) {
    if (i == 0) mine.status = peri_cuda_status_word(0, PER_ERR_EMPTY);
    goto done;
  }
  memset(&v, 0, sizeof v);
  v.node = items_node;
  v.min_node = items_mn;
  v.seq_node = sq.node;
  v.seq_min_node = sq.mn;
  v.seq_ok = sq.ok;
  v.traj = traj;
  v.cap = cap;
  v.L = L_items;
  v.pos = s.pos;
  v.size = s.size;
  v.seq_L = sq.L;
  v.seq_n = sq.ns;
  v.seq_len = sq.len;
  v.seq_stride = sq.stride;
  peri_plan_of(&v, flags, window, B,
               (flags & PER_SAMPLE_BETA) ? beta : peri_beta_at(&s.cfg, s.step),
               &p);
  node = p.seq ? sq.node : items_node;
  L = p.L;
  stride = p.stride;
  if (p.degenerate || unique) { // the section
    peri_cuda_acc a = peri_cuda_acc_none();
    if (blockIdx.x != 0 || !PERI_CUDA_BLOCK_SECTION()) goto done;
    PERI_CUDA_BLOCK_MEM(sm);
    if (unique) {
      a = peri_cuda_pick(&p, &s.rng, s.cfg.max_unique, cap, s.size, node, perm,
                         gen, sq.ok, set, rank, B, idx, val, ids, w, sm);
    } else {
      per_status u = peri_cuda_uniform_draws(&p, &s.rng, sq.ok, cap, node, gen,
                                             rank, B, idx, val, ids, w, sm);
      if (u != PER_OK) a.status = peri_cuda_status_word(0, u);
    }
    if (threadIdx.x == 0) {
      mine = a;
      PERI_CUDA_ST(plan, p);
    }
    goto done;
  }
  if (i >= B) goto done;
  p.next = s.rng;
  {
    per_real u;
    p.next.counter += B;
    p.next.avail = 0;
    u = per_tree_stratum_u(s.rng.seed, s.rng.counter, i, p.seg);
    leaf = p.whole ? peri_cuda_descend(node, L, u)
                   : peri_cover_find(&p.cov, node, L, u);
    x = node[L + leaf];
    PERI_CUDA_ST(&idx[i], leaf);
    PERI_CUDA_ST(&val[i], x);
    if (ids) PERI_CUDA_ST(&ids[i], peri_cuda_id_of(&p, gen, stride, leaf));
    if (w && p.bufmax) PERI_CUDA_ST(&w[i], peri_weight(x, p.pmin, p.beta));
    else if (w) mine = peri_cuda_weight_report(x, i);
  }
  if (i == 0) PERI_CUDA_ST(plan, p);
done:
  (void)peri_cuda_finish(acc, mine, &tot);
}

// sample, launch 2 ("deliver"): unless the draw failed, weight i from
// the batch minimum (when the draw left it to this launch), the gather of
// the drawn units (n rows each: n = seq_len for sequences, whose mask
// row i writes), and (thread 0) the state's stream and step moved on;
// the last thread writes *d_status and clears acc[0]. A broken buffer's:
// thread 0 writes PERI_CUDA_CORRUPT, nothing else.
static __global__ void PERI_CUDA_BOUNDS peri_cuda_deliver_kernel(
    peri_cuda_buffer_state *st, const peri_plan *plan, const uint32_t *idx,
    const per_real *val, uint32_t B, float *w, void *out, const void *items,
    uint32_t unit, uint32_t units, uint32_t cap, uint32_t n, uint32_t stride,
    const uint8_t *ends, uint8_t *mask, peri_cuda_acc *acc,
    unsigned long long *d_status) {
  uint32_t i = peri_cuda_thread_id();
  unsigned long long bad = PERI_CUDA_LD(&acc[0].status);
  peri_cuda_acc tot;
  if (peri_cuda_broken(st)) {
    if (i == 0) PERI_CUDA_ST(d_status, PERI_CUDA_CORRUPT);
    return;
  }
  if (!bad) {
    if (w && i < B && !PERI_CUDA_LD(&plan->degenerate) &&
        !PERI_CUDA_LD(&plan->bufmax))
      PERI_CUDA_ST(&w[i],
                   peri_weight(PERI_CUDA_LD(&val[i]),
                               peri_cuda_min_of(PERI_CUDA_LD(&acc[0].minc)),
                               PERI_CUDA_LD(&plan->beta)));
    if (out)
      peri_cuda_copy_rows(out, items, unit, idx, B * n, units, 0, 0, cap, n,
                          stride);
    if (mask && i < B) { // 1 up to and including the first episode end
      uint32_t slot = PERI_CUDA_LD(&idx[i]) * stride, t;
      uint8_t live = 1;
      for (t = 0; t < n; ++t) {
        PERI_CUDA_ST(&mask[(size_t)i * n + t], live);
        if (PERI_CUDA_LD(&ends[((uint64_t)slot + t) % cap])) live = 0;
      }
    }
    if (i == 0) { // (not the fields every thread reads: broken)
      PERI_CUDA_ST(&st->rng, PERI_CUDA_LD(&plan->next));
      PERI_CUDA_ST(&st->step, PERI_CUDA_LD(&st->step) + 1ull);
    }
  }
  if (!peri_cuda_finish(acc, peri_cuda_acc_none(), &tot)) return;
  PERI_CUDA_ST(d_status, tot.status);
  peri_cuda_acc_clear(&acc[0]);
}

/* >>launch: launch shapes and the tree's launchers */
// Blocks for n threads; no overflow for n up to UINT32_MAX (a sample's B).
static uint32_t peri_cuda_blocks_for(uint32_t n) {
  return n / PERI_CUDA_BLOCK_THREADS + (n % PERI_CUDA_BLOCK_THREADS != 0);
}

// The most blocks a copy of rows uses (a grid-stride loop does the rest);
// a launch of a call with batches of up to max_batch has at most
// peri_cuda_max_blocks(max_batch) blocks.
#define PERI_CUDA_COPY_BLOCKS 4096u

static uint32_t peri_cuda_max_blocks(uint32_t max_batch) {
  uint32_t b = peri_cuda_blocks_for(max_batch);
  return b > PERI_CUDA_COPY_BLOCKS ? b : PERI_CUDA_COPY_BLOCKS;
}

// The grid of a launch with a thread per row that also copies rows of
// `units` units.
static uint32_t peri_cuda_copy_grid(uint32_t rows, uint32_t units) {
  uint64_t all = (uint64_t)rows * units;
  uint64_t b =
      all / PERI_CUDA_BLOCK_THREADS + (all % PERI_CUDA_BLOCK_THREADS != 0);
  uint32_t least = peri_cuda_blocks_for(rows);
  if (b > PERI_CUDA_COPY_BLOCKS) b = PERI_CUDA_COPY_BLOCKS;
  if (b < least) b = least;
  return b ? (uint32_t)b : 1u;
}

// The next `bytes` (rounded to 256) of a block at base, from *off; NULL
// when base is (a size query).
static unsigned char *peri_cuda_carve(unsigned char *base, size_t *off,
                                      size_t bytes) {
  unsigned char *p = base ? base + *off : NULL;
  *off += peri_cuda_round256(bytes);
  return p;
}

// A workspace for calls of up to `pairs` pairs (a tree call's n; a
// buffer's max_batch, times seq_len with sequences) on a tree of L
// leaves, laid out from base into *w (base NULL: only the sizes).
// Returns the bytes it spans; *zeroed gets the bytes of its start that
// must be 0 before a call (plan, reduction records, counters). A
// buffer's (`buffer`) has the plan, records for its largest grid, the
// drawn leaves, the set of distinct draws (batches up to max_batch) and,
// with sequences (ns of them, a tree of sL leaves, depth sdepth; else
// ns = 0), their counters and words; a tree update's records for its n
// pairs' grid, and values only when `val` (TD errors).
// In that order: plan, records, counters, sequence counters, flags,
// leaves, set, sequence words, rank table, values, old values.
static size_t peri_cuda_workspace_layout(
    unsigned char *base, uint32_t max_batch, uint32_t pairs, uint32_t L,
    uint32_t depth, uint32_t ns, uint32_t sL, uint32_t sdepth, int buffer,
    int val, peri_cuda_workspace *w, size_t *zeroed) {
  size_t off = 0,
         slots =
             peri_cuda_counter_base(peri_cuda_group_count(depth) + 1, L, depth),
         sslots = ns ? peri_cuda_counter_base(peri_cuda_group_count(sdepth) + 1,
                                              sL, sdepth)
                     : 0;
  size_t nb = 1u + (size_t)(buffer ? peri_cuda_max_blocks(pairs)
                                   : peri_cuda_blocks_for(pairs));
  w->plan = buffer ? (peri_plan *)peri_cuda_carve(base, &off, sizeof(peri_plan))
                   : NULL;
  w->acc =
      (peri_cuda_acc *)peri_cuda_carve(base, &off, nb * sizeof(peri_cuda_acc));
  w->cnt =
      (unsigned int *)peri_cuda_carve(base, &off, slots * sizeof(unsigned int));
  w->scnt = ns ? (unsigned int *)peri_cuda_carve(base, &off,
                                                 sslots * sizeof(unsigned int))
               : NULL;
  if (zeroed) *zeroed = off;
  w->flag =
      (uint32_t *)peri_cuda_carve(base, &off, (size_t)pairs * sizeof(uint32_t));
  w->idx = buffer ? (uint32_t *)peri_cuda_carve(
                        base, &off, (size_t)pairs * sizeof(uint32_t))
                  : NULL;
  w->set = buffer ? (unsigned long long *)peri_cuda_carve(
                        base, &off,
                        ((size_t)1 << peri_cat_hbits(max_batch)) *
                            sizeof(unsigned long long))
                  : NULL;
  w->own = ns ? (uint32_t *)peri_cuda_carve(base, &off,
                                            (size_t)ns * sizeof(uint32_t))
              : NULL;
  w->rank =
      ns && buffer
          ? (uint32_t *)peri_cuda_carve(
                base, &off,
                ((size_t)ns / PERI_CUDA_RANK_CHUNK + 1) * sizeof(uint32_t))
          : NULL;
  w->val = val ? (per_real *)peri_cuda_carve(base, &off,
                                             (size_t)pairs * sizeof(per_real))
               : NULL;
  w->orig =
      (per_real *)peri_cuda_carve(base, &off, (size_t)pairs * sizeof(per_real));
  return off;
}

// The most pairs of a buffer's call: max_batch, times seq_len with
// sequences (<= PER_CUDA_MAX_BATCH: checked with the config).
static uint32_t peri_cuda_max_pairs(const per_config *c, uint32_t max_batch) {
  return max_batch * (c->seq_len ? c->seq_len : 1u);
}

// A buffer's workspace; *zeroed (when not NULL) gets the bytes of its
// start that are 0 between calls.
static peri_cuda_workspace peri_cuda_workspace_of(const per_cuda_buffer *b,
                                                  size_t *zeroed) {
  peri_cuda_workspace w;
  peri_cuda_workspace_layout(
      (unsigned char *)b->d_work, b->max_batch,
      peri_cuda_max_pairs(&b->cfg, b->max_batch), b->tree.leaves, b->tree.depth,
      b->cfg.seq_len ? b->seq_tree.capacity : 0u, b->seq_tree.leaves,
      b->seq_tree.depth, 1, 1, &w, zeroed);
  return w;
}

// The cudaError_t behind the last PER_ERR_DEVICE of this thread.
static thread_local int peri_cuda_last_error = 0;

// PER_OK for cudaSuccess; otherwise keep e for per_cuda_last_error, clear
// it (the call reports it in its status; left pending, it would refuse
// the next call: peri_cuda_begin) and return PER_ERR_DEVICE.
static per_status peri_cuda_device_status(cudaError_t e) {
  if (e == cudaSuccess) return PER_OK;
  peri_cuda_last_error = (int)e;
  (void)cudaGetLastError();
  return PER_ERR_DEVICE;
}

// What a call has enqueued on its stream: its status so far (after a
// failure nothing more is enqueued) and how many steps that change a
// tree or a buffer went in (launches, an upload's copies).
struct peri_cuda_q {
  per_cuda_stream stream;
  per_status s;
  unsigned went;
};

// A call's start, before it enqueues anything: PER_ERR_DEVICE, and then
// nothing is enqueued, when a CUDA error is already pending in this
// thread (a caller's that cudaGetLastError has not cleared, or a sticky
// error of the context); it stays pending, and per_cuda_last_error names
// it. So every error the runtime reports afterwards is the call's own.
static per_status peri_cuda_begin(peri_cuda_q *q, per_cuda_stream stream) {
  cudaError_t e = cudaPeekAtLastError();
  q->stream = stream;
  q->went = 0;
  q->s = PER_OK;
  if (e != cudaSuccess) {
    peri_cuda_last_error = (int)e;
    q->s = PER_ERR_DEVICE;
  }
  return q->s;
}

// Launch kernel on q's stream unless q has failed, and take the launch's
// own status (cudaGetLastError: nothing was pending at peri_cuda_begin).
#define PERI_CUDA_GO(q, kernel, grid, block, ...)                     \
  do {                                                                \
    if ((q)->s == PER_OK) {                                           \
      PER_CUDA_LAUNCH(kernel, grid, block, (q)->stream, __VA_ARGS__); \
      (q)->s = peri_cuda_device_status(cudaGetLastError());           \
      (q)->went += (q)->s == PER_OK;                                  \
    }                                                                 \
  } while (0)

// A memset of n bytes at p to byte v on q's stream unless q has failed.
static void peri_cuda_memset(peri_cuda_q *q, void *p, int v, size_t n) {
  if (q->s == PER_OK)
    q->s = peri_cuda_device_status(cudaMemsetAsync(p, v, n, q->stream));
}

// A call's end: its status. A failure after part of its work went in (a
// launch refused after another ran) would leave half a change: leaves
// claimed, counters moved, a stream advanced. So the call marks it, with
// memsets (which a launch refused for its shape or resources does not
// stop): *d_status gets PERI_CUDA_CORRUPT, the zero bytes of its scratch
// or workspace (records, counters) get their 0 back for the next call,
// and a buffer's state (st) is marked broken: its calls change nothing
// and report PERI_CUDA_CORRUPT until per_cuda_buffer_upload. (A context
// whose errors are sticky refuses everything afterwards anyway.)
static per_status peri_cuda_end(peri_cuda_q *q, unsigned long long *d_status,
                                void *zero, size_t zero_bytes,
                                peri_cuda_buffer_state *st) {
  if (q->s == PER_OK || q->went == 0) return q->s;
  if (zero && zero_bytes) (void)cudaMemsetAsync(zero, 0, zero_bytes, q->stream);
  if (d_status)
    (void)cudaMemsetAsync(d_status, 0xFF, sizeof *d_status, q->stream);
  if (st)
    (void)cudaMemsetAsync(&st->broken, 0xFF, sizeof st->broken, q->stream);
  (void)cudaGetLastError();
  return q->s;
}

// p is NULL or aligned to `align` bytes: a misaligned atomic or vector
// access is a sticky error of the whole CUDA context, so it is refused
// on the host first.
static int peri_cuda_aligned(const void *p, size_t align) {
  return ((uintptr_t)p % align) == 0;
}

static per_status peri_cuda_check_tree(const per_cuda_tree *t) {
  uint32_t d, L;
  if (!t || !t->d_node) return PER_ERR_NULL;
  if (t->capacity == 0 || t->capacity > PER_MAX_CAPACITY)
    return PER_ERR_CAPACITY;
  L = peri_leaves_for(t->capacity, &d);
  if (t->leaves != L || t->depth != d) return PER_ERR_CAPACITY;
  return PER_OK;
}

// The two-phase scratch protocol: PER_OK with *go = 0 for a size query.
static per_status peri_cuda_check_scratch(void *d_scratch,
                                          size_t *scratch_bytes, size_t need,
                                          int *go) {
  *go = 0;
  if (!scratch_bytes) return PER_ERR_NULL;
  if (!d_scratch) {
    *scratch_bytes = need;
    return PER_OK;
  }
  if (*scratch_bytes < need) return PER_ERR_MEMORY;
  *go = 1;
  return PER_OK;
}

// Enqueue an update's settle of n pairs with values vs (after a claim).
static void peri_cuda_enqueue_settle(
    peri_cuda_q *q, const per_cuda_tree *t, per_real *d_min, peri_cuda_pairs vs,
    uint32_t n, const peri_cuda_workspace *w, peri_cuda_buffer_state *st,
    uint32_t *d_stale, unsigned long long *d_status, uint32_t pos_div) {
  uint32_t g = peri_cuda_blocks_for(n);
  if (d_min)
    PERI_CUDA_GO(q, peri_cuda_settle_kernel<true>, g, PERI_CUDA_BLOCK_THREADS,
                 t->d_node, d_min, t->leaves, t->depth, vs, n, w->cnt,
                 (const uint32_t *)w->flag, (const per_real *)w->orig, w->acc,
                 st, d_stale, d_status, pos_div);
  else
    PERI_CUDA_GO(q, peri_cuda_settle_kernel<false>, g, PERI_CUDA_BLOCK_THREADS,
                 t->d_node, d_min, t->leaves, t->depth, vs, n, w->cnt,
                 (const uint32_t *)w->flag, (const per_real *)w->orig, w->acc,
                 st, d_stale, d_status, pos_div);
}

// Enqueue an update's two launches (n >= 1; the workspace's counters and
// records 0): the claim, then the settle. With TD errors the claim puts
// the pairs' priorities in w->val, where the settle reads them. st: a
// buffer's state (its update; NULL for the tree's own).
static void peri_cuda_enqueue_update(peri_cuda_q *q, const per_cuda_tree *t,
                                     per_real *d_min, peri_cuda_pairs v,
                                     uint32_t n, const peri_cuda_workspace *w,
                                     peri_cuda_buffer_state *st,
                                     uint32_t *d_stale,
                                     unsigned long long *d_status) {
  peri_cuda_pairs vs = v;
  PERI_CUDA_GO(q, peri_cuda_claim_kernel, peri_cuda_blocks_for(n),
               PERI_CUDA_BLOCK_THREADS, t->d_node, t->leaves, t->depth,
               t->capacity, v, n, (const peri_cuda_buffer_state *)st, w->cnt,
               w->flag, w->val, w->orig, w->acc);
  if (v.td) {
    vs.td = NULL;
    vs.val = w->val;
  }
  peri_cuda_enqueue_settle(q, t, d_min, vs, n, w, st, d_stale, d_status, 1u);
}

// An update of n pairs (td: TD errors, which need room for their
// priorities, whether or not v.td is given yet: a size query).
static per_status peri_cuda_tree_update(const per_cuda_tree *t,
                                        const uint32_t *d_idx,
                                        peri_cuda_pairs v, int td, uint32_t n,
                                        void *d_scratch, size_t *scratch_bytes,
                                        unsigned long long *d_status,
                                        per_cuda_stream stream) {
  per_status s;
  peri_cuda_workspace w;
  peri_cuda_q q;
  size_t need, zeroed;
  int go;
  if ((s = peri_cuda_check_tree(t)) != PER_OK) return s;
  if (n > PER_CUDA_MAX_BATCH) return PER_ERR_BATCH;
  need = peri_cuda_workspace_layout(NULL, n ? n : 1u, n ? n : 1u, t->leaves,
                                    t->depth, 0u, 0u, 0u, 0, td, &w, &zeroed);
  s = peri_cuda_check_scratch(d_scratch, scratch_bytes, need, &go);
  if (s != PER_OK || !go) return s;
  if (!d_status) return PER_ERR_NULL;
  if (n > 0 && (!d_idx || (td ? !v.td : !v.val))) return PER_ERR_NULL;
  if (!peri_cuda_aligned(d_status, sizeof *d_status) ||
      !peri_cuda_aligned(d_scratch, 8) ||
      !peri_cuda_aligned(d_idx, sizeof *d_idx) ||
      !peri_cuda_aligned(v.val, sizeof *v.val) ||
      !peri_cuda_aligned(v.td, sizeof *v.td))
    return PER_ERR_MEMORY;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  if (n == 0) {
    peri_cuda_memset(&q, d_status, 0, sizeof *d_status);
    return q.s;
  }
  peri_cuda_workspace_layout((unsigned char *)d_scratch, n, n, t->leaves,
                             t->depth, 0u, 0u, 0u, 0, td, &w, &zeroed);
  peri_cuda_memset(&q, d_scratch, 0, zeroed);
  v.idx = d_idx;
  peri_cuda_enqueue_update(&q, t, NULL, v, n, &w, NULL, NULL, d_status);
  return peri_cuda_end(&q, d_status, d_scratch, zeroed, NULL);
}

/* >>launch_buffer: a buffer's device memory and launchers */
// The parts of a buffer's device memory, in order, each 256-byte aligned:
// items, generations, ends, trajectory ids, tree, min tree, permutation,
// sequence tree, its min tree, sequence flags, state, work.
#define PERI_CUDA_PARTS 12
static size_t peri_cuda_buffer_parts(const per_config *c, uint32_t max_batch,
                                     size_t part[PERI_CUDA_PARTS]) {
  size_t total = 0, cap = c->capacity, tb = per_tree_bytes(c->capacity);
  uint32_t ns = c->seq_len ? c->capacity / c->seq_stride : 0u;
  peri_cuda_workspace w;
  uint32_t L, depth, sL = 0, sdepth = 0;
  int i;
  if (tb == 0 || cap * c->item_size / c->item_size != cap) return 0;
  L = peri_leaves_for(c->capacity, &depth);
  if (ns) sL = peri_leaves_for(ns, &sdepth);
  part[0] = peri_cuda_round256(cap * c->item_size);
  part[1] = peri_cuda_round256(cap * sizeof(uint32_t));
  part[2] = peri_cuda_round256(cap);
  part[3] = part[1];
  part[4] = peri_cuda_round256(tb);
  part[5] = (c->flags & PER_WEIGHTS_BUFFER_MAX) ? part[4] : 0;
  part[6] = c->alpha == 0 ? part[1] : 0;
  part[7] = ns ? peri_cuda_round256(per_tree_bytes(ns)) : 0;
  part[8] = (c->flags & PER_WEIGHTS_BUFFER_MAX) ? part[7] : 0;
  part[9] = ns ? peri_cuda_round256(ns) : 0;
  part[10] = peri_cuda_round256(sizeof(peri_cuda_buffer_state));
  part[11] = peri_cuda_workspace_layout(NULL, max_batch,
                                        peri_cuda_max_pairs(c, max_batch), L,
                                        depth, ns, sL, sdepth, 1, 1, &w, NULL);
  for (i = 0; i < PERI_CUDA_PARTS; ++i) {
    if (total + part[i] < total) return 0;
    total += part[i];
  }
  return total;
}

static per_status peri_cuda_check_buffer_config(const per_config *cfg,
                                                uint32_t max_batch) {
  per_status s;
  if (!cfg) return PER_ERR_NULL;
  s = peri_config_check(cfg, NULL);
  if (s != PER_OK) return s;
  if (cfg->flags & PER_MAX_LIVE) return PER_ERR_ARG;
  if (max_batch == 0 || max_batch > PER_CUDA_MAX_BATCH) return PER_ERR_BATCH;
  if (cfg->seq_len && max_batch > PER_CUDA_MAX_BATCH / cfg->seq_len)
    return PER_ERR_BATCH; // an update_seq's max_batch * seq_len TD errors
  return PER_OK;
}

// The widest unit of a copy of rows (16, 8, 4 or 1 bytes) that the item
// size and both addresses (p, and d_items: 256-byte aligned) allow.
static uint32_t peri_cuda_copy_unit(const per_cuda_buffer *b, const void *p) {
  uint32_t u;
  for (u = 16; u > 1; u /= 2)
    if (b->cfg.item_size % u == 0 && peri_cuda_aligned(p, u)) return u;
  return 1u;
}

static per_status peri_cuda_check_buffer(const per_cuda_buffer *b) {
  if (!b || !b->d_items || !b->d_state || !b->d_work) return PER_ERR_NULL;
  return peri_cuda_check_tree(&b->tree);
}

// A CPU buffer that can trade state with b.
static per_status peri_cuda_host_match(const per_cuda_buffer *b,
                                       const per_buffer *h) {
  if (!h || !h->items || !h->gen || !h->tree.node) return PER_ERR_NULL;
  if (h->cfg.capacity != b->cfg.capacity ||
      h->cfg.item_size != b->cfg.item_size || h->cfg.flags != b->cfg.flags ||
      h->cfg.seq_len != b->cfg.seq_len ||
      h->cfg.seq_stride != b->cfg.seq_stride ||
      (h->cfg.alpha == 0) != (b->cfg.alpha == 0) ||
      (h->min_node == NULL) != (b->d_min_node == NULL) ||
      (h->swap.perm == NULL) != (b->d_perm == NULL) ||
      (h->seq_min_node == NULL) != (b->d_seq_min_node == NULL))
    return PER_ERR_ARG;
  return PER_OK;
}

// What a buffer takes of another's config when it takes its state, as
// per_buffer_load does: the rest (the shape, max_unique: what memory was
// sized for) stays its own.
static void peri_cuda_take_cfg(per_config *to, const per_config *from) {
  if (to->seq_len) to->seq_eta = from->seq_eta;
  to->alpha = from->alpha;
  to->beta0 = from->beta0;
  to->beta1 = from->beta1;
  to->beta_steps = from->beta_steps;
  to->eps = from->eps;
  to->max_priority = from->max_priority;
  to->seed = from->seed;
}

// The state's copies between a CPU buffer and the device, in the order of
// peri_cuda_buffer_parts (items, gen, ends, traj, tree, min tree,
// permutation, sequence tree, its min tree, sequence flags).
static void peri_cuda_buffer_copy(peri_cuda_q *q, const per_cuda_buffer *b,
                                  const per_buffer *h, int up) {
  size_t cap = b->cfg.capacity, tb = per_tree_bytes(b->cfg.capacity);
  size_t ns = b->cfg.seq_len ? b->seq_tree.capacity : 0;
  size_t sb = ns ? per_tree_bytes((uint32_t)ns) : 0;
  void *dev[10] = {b->d_items,        b->d_gen,
                   b->d_ends,         b->d_traj,
                   b->tree.d_node,    b->d_min_node,
                   b->d_perm,         ns ? b->seq_tree.d_node : NULL,
                   b->d_seq_min_node, b->d_seq_ok};
  void *host[10] = {h->items,     h->gen,           h->ends,
                    h->traj,      h->tree.node,     h->min_node,
                    h->swap.perm, h->seq_tree.node, h->seq_min_node,
                    h->seq_ok};
  size_t n[10] = {cap * b->cfg.item_size,
                  cap * sizeof(uint32_t),
                  cap,
                  cap * sizeof(uint32_t),
                  tb,
                  tb,
                  cap * sizeof(uint32_t),
                  sb,
                  sb,
                  ns};
  int i;
  for (i = 0; i < 10 && q->s == PER_OK; ++i) {
    if (!dev[i]) continue;
    q->s = peri_cuda_device_status(
        up ? cudaMemcpyAsync(dev[i], host[i], n[i], cudaMemcpyHostToDevice,
                             q->stream)
           : cudaMemcpyAsync(host[i], dev[i], n[i], cudaMemcpyDeviceToHost,
                             q->stream));
    q->went += up && q->s == PER_OK; // an upload's copies change b
  }
}

// The sequences of b as the kernels see them.
static peri_cuda_seqs peri_cuda_seqs_of(const per_cuda_buffer *b) {
  peri_cuda_seqs q;
  memset(&q, 0, sizeof q);
  if (!b->cfg.seq_len) return q;
  q.node = b->seq_tree.d_node;
  q.mn = b->d_seq_min_node;
  q.ok = b->d_seq_ok;
  q.L = b->seq_tree.leaves;
  q.depth = b->seq_tree.depth;
  q.ns = b->seq_tree.capacity;
  q.len = b->cfg.seq_len;
  q.stride = b->cfg.seq_stride;
  return q;
}

// Enqueue the refresh of the sequences a call changed (b has sequences;
// kind PERI_CUDA_SEQ_*, n the call's n, d_ids its ids, d_status its
// status word, written by its last launch before): two launches.
static void peri_cuda_enqueue_seq(peri_cuda_q *q, const per_cuda_buffer *b,
                                  uint32_t kind, uint32_t n,
                                  const uint64_t *d_ids,
                                  const unsigned long long *d_status,
                                  const peri_cuda_workspace *w) {
  uint32_t cap = b->cfg.capacity, len = b->cfg.seq_len;
  uint64_t count = kind == PERI_CUDA_SEQ_ADD     ? (uint64_t)(n < cap ? n : cap)
                   : kind == PERI_CUDA_SEQ_ITEMS ? 1u
                                                 : len;
  peri_cuda_seqs sq = peri_cuda_seqs_of(b);
  peri_cuda_seq_job jb;
  uint32_t threads, g;
  jb.st = (const peri_cuda_buffer_state *)b->d_state;
  jb.ids = d_ids;
  jb.gen = b->d_gen;
  jb.status = d_status;
  jb.kind = kind;
  jb.n = n;
  jb.per = peri_cuda_seq_per(count + len - 1u, cap, b->cfg.seq_stride);
  jb.cap = cap;
  jb.len = len;
  jb.stride = b->cfg.seq_stride;
  jb.ns = sq.ns;
  // at most PER_CUDA_MAX_BATCH * 2 (update_seq: 2 len - 1 slots each)
  threads = (kind == PERI_CUDA_SEQ_ADD ? 1u : n) * jb.per;
  g = peri_cuda_blocks_for(threads);
  PERI_CUDA_GO(q, peri_cuda_seq_own_kernel, g, PERI_CUDA_BLOCK_THREADS, jb,
               threads, (const per_real *)(b->tree.d_node + b->tree.leaves),
               (const uint8_t *)b->d_ends,
               (int)((b->cfg.flags & PER_SEQ_CROSS_EPISODES) != 0), sq, w->own,
               w->scnt);
  if (sq.mn)
    PERI_CUDA_GO(q, peri_cuda_seq_settle_kernel<true>, g,
                 PERI_CUDA_BLOCK_THREADS, jb, threads, sq, w->own, w->scnt);
  else
    PERI_CUDA_GO(q, peri_cuda_seq_settle_kernel<false>, g,
                 PERI_CUDA_BLOCK_THREADS, jb, threads, sq, w->own, w->scnt);
}

/* >>api: per_cuda.h's functions */
extern "C" {

PER_CUDA_DEF size_t per_cuda_real_bytes(void) { return sizeof(per_real); }

PER_CUDA_DEF int per_cuda_last_error(void) { return peri_cuda_last_error; }

PER_CUDA_DEF size_t per_cuda_tree_bytes(uint32_t capacity) {
  return per_tree_bytes(capacity);
}

PER_CUDA_DEF per_status per_cuda_tree_init_mem(per_cuda_tree *t,
                                               uint32_t capacity, void *d_mem,
                                               size_t bytes) {
  size_t need;
  if (!t) return PER_ERR_NULL;
  memset(t, 0, sizeof *t);
  if (!d_mem) return PER_ERR_NULL;
  need = per_tree_bytes(capacity);
  if (need == 0) return PER_ERR_CAPACITY;
  if (bytes < need || ((uintptr_t)d_mem % sizeof(per_real)) != 0)
    return PER_ERR_MEMORY;
  t->d_node = (per_real *)d_mem;
  t->capacity = capacity;
  t->leaves = peri_leaves_for(capacity, &t->depth);
  return PER_OK;
}

PER_CUDA_DEF per_status per_cuda_tree_clear(const per_cuda_tree *t,
                                            per_cuda_stream stream) {
  per_status s = peri_cuda_check_tree(t);
  peri_cuda_q q;
  if (s != PER_OK) return s;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  peri_cuda_memset(&q, t->d_node, 0, per_tree_bytes(t->capacity));
  return q.s;
}

static per_status peri_cuda_tree_copy(const per_cuda_tree *t,
                                      const per_tree *host, int upload,
                                      per_cuda_stream stream) {
  per_status s = peri_cuda_check_tree(t);
  peri_cuda_q q;
  size_t bytes;
  if (s != PER_OK) return s;
  if (!host || !host->node) return PER_ERR_NULL;
  if (host->capacity != t->capacity || host->leaves != t->leaves)
    return PER_ERR_CAPACITY;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  bytes = per_tree_bytes(t->capacity);
  if (upload)
    return peri_cuda_device_status(cudaMemcpyAsync(
        t->d_node, host->node, bytes, cudaMemcpyHostToDevice, stream));
  return peri_cuda_device_status(cudaMemcpyAsync(
      host->node, t->d_node, bytes, cudaMemcpyDeviceToHost, stream));
}

PER_CUDA_DEF per_status per_cuda_tree_upload(const per_cuda_tree *t,
                                             const per_tree *host,
                                             per_cuda_stream stream) {
  return peri_cuda_tree_copy(t, host, 1, stream);
}

PER_CUDA_DEF per_status per_cuda_tree_download(const per_cuda_tree *t,
                                               per_tree *host,
                                               per_cuda_stream stream) {
  return peri_cuda_tree_copy(t, host, 0, stream);
}

PER_CUDA_DEF per_status per_cuda_status_decode(unsigned long long word,
                                               uint32_t *pos) {
  uint32_t code = (uint32_t)(word & 0xFFFFFFFFu);
  if (pos) *pos = word ? 0xFFFFFFFFu - (uint32_t)(word >> 32) : 0;
  if (word == 0) return PER_OK;
  if (code == 0 || code >= (uint32_t)PER_STATUS_COUNT) return PER_ERR_CORRUPT;
  return (per_status)code;
}

PER_CUDA_DEF per_status per_cuda_status_clear(unsigned long long *d_status,
                                              per_cuda_stream stream) {
  peri_cuda_q q;
  if (!d_status) return PER_ERR_NULL;
  if (!peri_cuda_aligned(d_status, sizeof *d_status)) return PER_ERR_MEMORY;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  peri_cuda_memset(&q, d_status, 0, sizeof *d_status);
  return q.s;
}

PER_CUDA_DEF per_status per_cuda_status_keep(unsigned long long *d_keep,
                                             const unsigned long long *d_status,
                                             unsigned long long tag,
                                             per_cuda_stream stream) {
  peri_cuda_q q;
  if (!d_keep || !d_status) return PER_ERR_NULL;
  if (!peri_cuda_aligned(d_keep, sizeof *d_keep) ||
      !peri_cuda_aligned(d_status, sizeof *d_status))
    return PER_ERR_MEMORY;
  if (d_status == d_keep || d_status == d_keep + 1) return PER_ERR_ARG;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  PERI_CUDA_GO(&q, peri_cuda_keep_status_kernel, 1u, 1u, d_keep, d_status, tag);
  return q.s;
}

PER_CUDA_DEF per_status per_cuda_tree_set_batch(
    const per_cuda_tree *t, const uint32_t *d_idx, const per_real *d_val,
    uint32_t n, void *d_scratch, size_t *scratch_bytes,
    unsigned long long *d_status, per_cuda_stream stream) {
  peri_cuda_pairs v = peri_cuda_pairs_none();
  v.val = d_val;
  return peri_cuda_tree_update(t, d_idx, v, 0, n, d_scratch, scratch_bytes,
                               d_status, stream);
}

// x is finite and >= 0 (read from the bits: immune to -ffast-math).
static int peri_cuda_nonneg_finite(double x) {
  return peri_dfinite(x) && x >= 0;
}

PER_CUDA_DEF per_status
per_cuda_tree_set_td(const per_cuda_tree *t, const uint32_t *d_idx,
                     const float *d_td, uint32_t n, double eps, double alpha,
                     void *d_scratch, size_t *scratch_bytes,
                     unsigned long long *d_status, per_cuda_stream stream) {
  peri_cuda_pairs v = peri_cuda_pairs_none();
  if (!peri_cuda_nonneg_finite(eps) || !peri_cuda_nonneg_finite(alpha))
    return PER_ERR_ARG;
  v.td = d_td;
  v.eps = eps;
  v.alpha = alpha;
  return peri_cuda_tree_update(t, d_idx, v, 1, n, d_scratch, scratch_bytes,
                               d_status, stream);
}

PER_CUDA_DEF per_status per_cuda_tree_sample(
    const per_cuda_tree *t, uint64_t seed, uint64_t counter,
    unsigned long long *d_counter, uint32_t B, uint32_t *d_idx, per_real *d_val,
    unsigned long long *d_status, per_cuda_stream stream) {
  per_status s = peri_cuda_check_tree(t);
  peri_cuda_q q;
  if (s != PER_OK) return s;
  if (!d_idx || !d_status) return PER_ERR_NULL;
  if (B == 0) return PER_ERR_BATCH;
  if (!peri_cuda_aligned(d_status, sizeof *d_status) ||
      !peri_cuda_aligned(d_counter, sizeof *d_counter) ||
      !peri_cuda_aligned(d_idx, sizeof *d_idx) ||
      !peri_cuda_aligned(d_val, sizeof *d_val))
    return PER_ERR_MEMORY;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  PERI_CUDA_GO(&q, peri_cuda_sample_strata_kernel, peri_cuda_blocks_for(B),
               PERI_CUDA_BLOCK_THREADS, t->d_node, t->leaves, seed, counter,
               (const unsigned long long *)d_counter, B, d_idx, d_val,
               d_status);
  if (d_counter)
    PERI_CUDA_GO(&q, peri_cuda_advance_counter_kernel, 1u, 1u, d_counter, B,
                 (const unsigned long long *)d_status);
  return peri_cuda_end(&q, d_status, NULL, 0, NULL);
}

PER_CUDA_DEF per_status per_cuda_tree_find(const per_cuda_tree *t,
                                           const per_real *d_u, uint32_t n,
                                           uint32_t *d_idx, per_real *d_val,
                                           unsigned long long *d_status,
                                           per_cuda_stream stream) {
  per_status s = peri_cuda_check_tree(t);
  peri_cuda_q q;
  if (s != PER_OK) return s;
  if (!d_status || (n > 0 && (!d_u || !d_idx))) return PER_ERR_NULL;
  if (n > PER_CUDA_MAX_BATCH) return PER_ERR_BATCH;
  if (!peri_cuda_aligned(d_status, sizeof *d_status) ||
      !peri_cuda_aligned(d_u, sizeof *d_u) ||
      !peri_cuda_aligned(d_idx, sizeof *d_idx) ||
      !peri_cuda_aligned(d_val, sizeof *d_val))
    return PER_ERR_MEMORY;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  peri_cuda_memset(&q, d_status, 0, sizeof *d_status);
  if (n == 0) return q.s;
  PERI_CUDA_GO(&q, peri_cuda_validate_u_kernel, peri_cuda_blocks_for(n),
               PERI_CUDA_BLOCK_THREADS, (const per_real *)t->d_node, d_u, n,
               d_status);
  PERI_CUDA_GO(&q, peri_cuda_find_kernel, peri_cuda_blocks_for(n),
               PERI_CUDA_BLOCK_THREADS, (const per_real *)t->d_node, t->leaves,
               d_u, n, d_idx, d_val, (const unsigned long long *)d_status);
  return peri_cuda_end(&q, d_status, NULL, 0, NULL);
}

PER_CUDA_DEF per_status per_cuda_is_weights(const per_real *d_val, uint32_t B,
                                            double beta, float *d_w,
                                            void *d_scratch,
                                            size_t *scratch_bytes,
                                            unsigned long long *d_status,
                                            per_cuda_stream stream) {
  peri_cuda_acc *acc = (peri_cuda_acc *)d_scratch;
  per_status s;
  peri_cuda_q q;
  uint32_t g;
  size_t need;
  int go;
  if (B == 0 || B > PER_CUDA_MAX_BATCH) return PER_ERR_BATCH;
  if (!peri_cuda_nonneg_finite(beta)) return PER_ERR_ARG;
  g = peri_cuda_blocks_for(B);
  need = (1u + (size_t)g) * sizeof(peri_cuda_acc);
  s = peri_cuda_check_scratch(d_scratch, scratch_bytes, need, &go);
  if (s != PER_OK || !go) return s;
  if (!d_val || !d_w || !d_status) return PER_ERR_NULL;
  if (!peri_cuda_aligned(d_status, sizeof *d_status) ||
      !peri_cuda_aligned(d_scratch, 8) ||
      !peri_cuda_aligned(d_val, sizeof *d_val) ||
      !peri_cuda_aligned(d_w, sizeof *d_w))
    return PER_ERR_MEMORY;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  peri_cuda_memset(&q, d_scratch, 0, need);
  PERI_CUDA_GO(&q, peri_cuda_batch_min_kernel, g, PERI_CUDA_BLOCK_THREADS,
               d_val, B, acc);
  PERI_CUDA_GO(&q, peri_cuda_is_weights_kernel, g, PERI_CUDA_BLOCK_THREADS,
               d_val, B, beta, d_w, (const peri_cuda_acc *)acc, d_status);
  return peri_cuda_end(&q, d_status, d_scratch, need, NULL);
}

PER_CUDA_DEF size_t per_cuda_buffer_bytes(const per_config *cfg,
                                          uint32_t max_batch) {
  size_t part[PERI_CUDA_PARTS];
  if (peri_cuda_check_buffer_config(cfg, max_batch) != PER_OK) return 0;
  return peri_cuda_buffer_parts(cfg, max_batch, part);
}

PER_CUDA_DEF per_status per_cuda_buffer_init_mem(per_cuda_buffer *b,
                                                 const per_config *cfg,
                                                 uint32_t max_batch,
                                                 void *d_mem, size_t bytes,
                                                 per_cuda_stream stream) {
  size_t part[PERI_CUDA_PARTS], need;
  unsigned char *p = (unsigned char *)d_mem;
  peri_cuda_buffer_state st;
  peri_cuda_q q;
  per_status s;
  uint32_t L;
  if (!b) return PER_ERR_NULL;
  memset(b, 0, sizeof *b);
  if ((s = peri_cuda_check_buffer_config(cfg, max_batch)) != PER_OK) return s;
  if (!d_mem) return PER_ERR_NULL;
  need = peri_cuda_buffer_parts(cfg, max_batch, part);
  if (need == 0) return PER_ERR_CAPACITY;
  if (bytes < need || !peri_cuda_aligned(d_mem, 256)) return PER_ERR_MEMORY;
  b->cfg = *cfg;
  b->max_batch = max_batch;
  b->d_items = p;
  b->d_gen = (uint32_t *)(p += part[0]);
  b->d_ends = (uint8_t *)(p += part[1]);
  b->d_traj = (uint32_t *)(p += part[2]);
  s = per_cuda_tree_init_mem(&b->tree, cfg->capacity, p += part[3], part[4]);
  p += part[4];
  b->d_min_node = part[5] ? (per_real *)p : NULL;
  p += part[5];
  b->d_perm = part[6] ? (uint32_t *)p : NULL;
  p += part[6];
  if (part[7] && s == PER_OK)
    s = per_cuda_tree_init_mem(&b->seq_tree, cfg->capacity / cfg->seq_stride, p,
                               part[7]);
  p += part[7];
  b->d_seq_min_node = part[8] ? (per_real *)p : NULL;
  p += part[8];
  b->d_seq_ok = part[9] ? (uint8_t *)p : NULL;
  b->d_state = (p += part[9]);
  b->d_work = p + part[10];
  if (s == PER_OK) s = peri_cuda_begin(&q, stream);
  if (s != PER_OK) {
    memset(b, 0, sizeof *b);
    return s;
  }
  // everything but the min trees, the permutation and the state is zero
  // when empty (the workspace too: its records, counters and sequence
  // words start 0)
  peri_cuda_memset(&q, d_mem, 0, need);
  memset(&st, 0, sizeof st); // empty, as per_buffer_init leaves it
  per_rng_init(&st.rng, cfg->seed);
  st.max_leaf = cfg->alpha == 0 ? (per_real)1 : (per_real)cfg->max_priority;
  st.cfg = *cfg;
  L = b->tree.leaves;
  PERI_CUDA_GO(&q, peri_cuda_set_state_kernel, peri_cuda_blocks_for(L),
               PERI_CUDA_BLOCK_THREADS, (peri_cuda_buffer_state *)b->d_state,
               st, b->d_min_node, L, b->d_seq_min_node, b->seq_tree.leaves,
               b->d_perm, b->cfg.capacity);
  if (q.s != PER_OK) memset(b, 0, sizeof *b);
  return q.s;
}

PER_CUDA_DEF per_status per_cuda_buffer_add_batch(const per_cuda_buffer *b,
                                                  const void *d_items,
                                                  uint32_t n,
                                                  const uint8_t *d_ends,
                                                  unsigned long long *d_status,
                                                  per_cuda_stream stream) {
  per_status s = peri_cuda_check_buffer(b);
  peri_cuda_buffer_state *st;
  peri_cuda_workspace w;
  peri_cuda_q q;
  uint32_t cap, keep, unit, units, L, depth, grid;
  size_t zeroed;
  if (s != PER_OK) return s;
  if (!d_status || (n > 0 && !d_items)) return PER_ERR_NULL;
  if (n > b->max_batch) return PER_ERR_BATCH;
  if (!peri_cuda_aligned(d_status, sizeof *d_status)) return PER_ERR_MEMORY;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  if (n == 0) {
    peri_cuda_memset(&q, d_status, 0, sizeof *d_status);
    return q.s;
  }
  st = (peri_cuda_buffer_state *)b->d_state;
  w = peri_cuda_workspace_of(b, &zeroed);
  cap = b->cfg.capacity;
  keep = n < cap ? n : cap;
  L = b->tree.leaves;
  depth = b->tree.depth;
  unit = peri_cuda_copy_unit(b, d_items);
  units = b->cfg.item_size / unit;
  grid = peri_cuda_copy_grid(keep, units);
  PERI_CUDA_GO(&q, peri_cuda_add_count_kernel, peri_cuda_blocks_for(n),
               PERI_CUDA_BLOCK_THREADS, (const peri_cuda_buffer_state *)st,
               d_ends, n, cap, L, depth, w.cnt, w.acc);
#define PERI_CUDA_ADD(MIN)                                                     \
  PERI_CUDA_GO(&q, peri_cuda_add_kernel<MIN>, grid, PERI_CUDA_BLOCK_THREADS,   \
               st, b->tree.d_node, b->d_min_node, L, depth, b->d_gen,          \
               b->d_traj, b->d_ends, d_ends, b->d_items, d_items, unit, units, \
               n, cap, w.cnt, w.acc, d_status)
  if (b->d_min_node) PERI_CUDA_ADD(true);
  else PERI_CUDA_ADD(false);
#undef PERI_CUDA_ADD
  if (b->cfg.seq_len)
    peri_cuda_enqueue_seq(&q, b, PERI_CUDA_SEQ_ADD, n, NULL, d_status, &w);
  return peri_cuda_end(&q, d_status, b->d_work, zeroed, st);
}

PER_CUDA_DEF per_status per_cuda_buffer_sample(
    const per_cuda_buffer *b, uint32_t B, const per_sample_opts *opts,
    void *d_items_out, uint64_t *d_ids, float *d_weights,
    unsigned long long *d_status, per_cuda_stream stream) {
  per_status s = peri_cuda_check_buffer(b);
  uint32_t flags = opts ? opts->flags : 0, unit, units, grid, n = 1, stride = 1;
  double beta = 0;
  peri_cuda_workspace w;
  peri_cuda_buffer_state *st;
  peri_cuda_q q;
  uint8_t *d_mask = NULL;
  size_t zeroed;
  if (s != PER_OK) return s;
  if (flags & ~(uint32_t)(PER_SAMPLE_UNIQUE | PER_SAMPLE_BETA |
                          PER_SAMPLE_TRAJECTORIES | PER_SAMPLE_SEQUENCES))
    return PER_ERR_ARG;
  if (flags & PER_SAMPLE_SEQUENCES) {
    if (!b->cfg.seq_len) return PER_ERR_ARG;
    n = b->cfg.seq_len;
    stride = b->cfg.seq_stride;
    d_mask = opts->mask;
  }
  if (flags & PER_SAMPLE_BETA) {
    beta = opts->beta;
    if (!peri_cuda_nonneg_finite(beta)) return PER_ERR_ARG;
  }
  if (B == 0 || B > b->max_batch) return PER_ERR_BATCH;
  if ((flags & PER_SAMPLE_UNIQUE) && B > b->cfg.max_unique)
    return PER_ERR_BATCH;
  if (!d_status) return PER_ERR_NULL;
  if (!peri_cuda_aligned(d_status, sizeof *d_status) ||
      !peri_cuda_aligned(d_ids, sizeof *d_ids) ||
      !peri_cuda_aligned(d_weights, sizeof *d_weights))
    return PER_ERR_MEMORY;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  w = peri_cuda_workspace_of(b, &zeroed);
  st = (peri_cuda_buffer_state *)b->d_state;
  unit = d_items_out ? peri_cuda_copy_unit(b, d_items_out) : 4u;
  units = b->cfg.item_size / unit;
  grid =
      d_items_out ? peri_cuda_copy_grid(B * n, units) : peri_cuda_blocks_for(B);
  PERI_CUDA_GO(&q, peri_cuda_draw_kernel, peri_cuda_blocks_for(B),
               PERI_CUDA_BLOCK_THREADS, (const peri_cuda_buffer_state *)st,
               b->cfg.capacity, b->tree.leaves, b->tree.d_node,
               (const per_real *)b->d_min_node, peri_cuda_seqs_of(b),
               (const uint32_t *)b->d_traj, (const uint32_t *)b->d_gen,
               b->d_perm, B, flags, beta, opts ? opts->window : 0u, w.plan,
               w.set, w.rank, w.idx, w.val, d_ids, d_weights, w.acc);
  PERI_CUDA_GO(&q, peri_cuda_deliver_kernel, grid, PERI_CUDA_BLOCK_THREADS, st,
               (const peri_plan *)w.plan, (const uint32_t *)w.idx,
               (const per_real *)w.val, B, d_weights, d_items_out,
               (const void *)b->d_items, unit, units, b->cfg.capacity, n,
               stride, (const uint8_t *)b->d_ends, d_mask, w.acc, d_status);
  return peri_cuda_end(&q, d_status, b->d_work, zeroed, st);
}

// The arguments update and update_seq check alike, and their n == 0 (the
// status and stale words zeroed): PER_OK with *go = 1 when there are
// pairs to enqueue (after peri_cuda_begin on q).
static per_status peri_cuda_update_args(
    const per_cuda_buffer *b, const uint64_t *d_ids, const float *d_td,
    uint32_t n, uint32_t *d_stale, unsigned long long *d_status, peri_cuda_q *q,
    per_cuda_stream stream, int *go) {
  *go = 0;
  if (!d_status || (n > 0 && (!d_ids || !d_td))) return PER_ERR_NULL;
  if (n > b->max_batch) return PER_ERR_BATCH;
  if (!peri_cuda_aligned(d_status, sizeof *d_status) ||
      !peri_cuda_aligned(d_ids, sizeof *d_ids) ||
      !peri_cuda_aligned(d_td, sizeof *d_td) ||
      !peri_cuda_aligned(d_stale, sizeof *d_stale))
    return PER_ERR_MEMORY;
  if (peri_cuda_begin(q, stream) != PER_OK) return q->s;
  if (n == 0) {
    peri_cuda_memset(q, d_status, 0, sizeof *d_status);
    if (d_stale) peri_cuda_memset(q, d_stale, 0, sizeof *d_stale);
    return q->s;
  }
  *go = 1;
  return PER_OK;
}

PER_CUDA_DEF per_status per_cuda_buffer_update(const per_cuda_buffer *b,
                                               const uint64_t *d_ids,
                                               const float *d_td, uint32_t n,
                                               uint32_t *d_stale,
                                               unsigned long long *d_status,
                                               per_cuda_stream stream) {
  per_status s = peri_cuda_check_buffer(b);
  peri_cuda_pairs v = peri_cuda_pairs_none();
  peri_cuda_buffer_state *st = (peri_cuda_buffer_state *)b->d_state;
  peri_cuda_workspace w;
  peri_cuda_q q;
  size_t zeroed;
  int go;
  if (s != PER_OK) return s;
  s = peri_cuda_update_args(b, d_ids, d_td, n, d_stale, d_status, &q, stream,
                            &go);
  if (s != PER_OK || !go) return s;
  w = peri_cuda_workspace_of(b, &zeroed);
  v.ids = d_ids;
  v.gen = b->d_gen;
  v.td = d_td; // eps and alpha: the state's
  peri_cuda_enqueue_update(&q, &b->tree, b->d_min_node, v, n, &w, st, d_stale,
                           d_status);
  if (b->cfg.seq_len)
    peri_cuda_enqueue_seq(&q, b, PERI_CUDA_SEQ_ITEMS, n, d_ids, d_status, &w);
  return peri_cuda_end(&q, d_status, b->d_work, zeroed, st);
}

PER_CUDA_DEF per_status per_cuda_buffer_update_seq(
    const per_cuda_buffer *b, const uint64_t *d_ids, const float *d_td,
    uint32_t n, uint32_t *d_stale, unsigned long long *d_status,
    per_cuda_stream stream) {
  per_status s = peri_cuda_check_buffer(b);
  peri_cuda_pairs v = peri_cuda_pairs_none();
  peri_cuda_buffer_state *st = (peri_cuda_buffer_state *)b->d_state;
  peri_cuda_workspace w;
  peri_cuda_q q;
  uint32_t len, pairs;
  size_t zeroed;
  int go;
  if (s != PER_OK) return s;
  if (!b->cfg.seq_len) return PER_ERR_ARG;
  s = peri_cuda_update_args(b, d_ids, d_td, n, d_stale, d_status, &q, stream,
                            &go);
  if (s != PER_OK || !go) return s;
  w = peri_cuda_workspace_of(b, &zeroed);
  len = b->cfg.seq_len;
  pairs = n * len; // <= PER_CUDA_MAX_BATCH: checked at init
  PERI_CUDA_GO(&q, peri_cuda_claim_seq_kernel, peri_cuda_blocks_for(pairs),
               PERI_CUDA_BLOCK_THREADS, b->tree.d_node, b->tree.leaves,
               b->tree.depth, b->cfg.capacity, d_ids, d_td,
               (const uint32_t *)b->d_gen, (const uint8_t *)b->d_ends,
               (const uint8_t *)b->d_seq_ok, len, b->cfg.seq_stride, pairs,
               (const peri_cuda_buffer_state *)st, w.cnt, w.flag, w.idx, w.val,
               w.orig, w.acc);
  v.idx = w.idx;
  v.val = w.val;
  peri_cuda_enqueue_settle(&q, &b->tree, b->d_min_node, v, pairs, &w, st,
                           d_stale, d_status, len + 2u);
  peri_cuda_enqueue_seq(&q, b, PERI_CUDA_SEQ_SEQS, n, d_ids, d_status, &w);
  return peri_cuda_end(&q, d_status, b->d_work, zeroed, st);
}

// One thread: the counters out of the state.
static __global__ void PERI_CUDA_BOUNDS peri_cuda_counters_kernel(
    const peri_cuda_buffer_state *st, per_cuda_counters *out) {
  per_cuda_counters c;
  if (peri_cuda_thread_id() != 0) return;
  c.size = PERI_CUDA_LD(&st->size);
  c.pos = PERI_CUDA_LD(&st->pos);
  c.added = PERI_CUDA_LD(&st->added);
  c.trajs = PERI_CUDA_LD(&st->trajs);
  c.step = PERI_CUDA_LD(&st->step);
  c.max_leaf = (double)PERI_CUDA_LD(&st->max_leaf);
  PERI_CUDA_ST(out, c);
}

PER_CUDA_DEF per_status per_cuda_buffer_counters(const per_cuda_buffer *b,
                                                 per_cuda_counters *d_out,
                                                 per_cuda_stream stream) {
  per_status s = peri_cuda_check_buffer(b);
  peri_cuda_q q;
  if (s != PER_OK) return s;
  if (!d_out) return PER_ERR_NULL;
  if (!peri_cuda_aligned(d_out, 8)) return PER_ERR_MEMORY;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  PERI_CUDA_GO(&q, peri_cuda_counters_kernel, 1u, 1u,
               (const peri_cuda_buffer_state *)b->d_state, d_out);
  return q.s;
}

PER_CUDA_DEF per_status per_cuda_buffer_upload(per_cuda_buffer *b,
                                               const per_buffer *host,
                                               per_cuda_stream stream) {
  per_status s = peri_cuda_check_buffer(b);
  peri_cuda_buffer_state st;
  peri_cuda_q q;
  per_config cfg;
  size_t zeroed;
  if (s != PER_OK) return s;
  if ((s = peri_cuda_host_match(b, host)) != PER_OK) return s;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  peri_cuda_buffer_copy(&q, b, host, 1);
  cfg = b->cfg;
  peri_cuda_take_cfg(&cfg, &host->cfg);
  memset(&st, 0, sizeof st); // not broken
  st.rng = host->rng;
  st.step = host->step;
  st.added = host->added;
  st.trajs = host->trajs;
  st.max_leaf = host->max_leaf;
  st.size = host->size;
  st.pos = host->pos;
  st.zero_hint = host->zero_hint;
  st.cfg = cfg;
  // the workspace as a call needs it, whatever a broken call left there
  (void)peri_cuda_workspace_of(b, &zeroed);
  peri_cuda_memset(&q, b->d_work, 0, zeroed);
  PERI_CUDA_GO(&q, peri_cuda_set_state_kernel, 1u, 1u,
               (peri_cuda_buffer_state *)b->d_state, st, (per_real *)NULL, 0u,
               (per_real *)NULL, 0u, (uint32_t *)NULL, 0u);
  if (q.s == PER_OK) b->cfg = cfg;
  return peri_cuda_end(&q, NULL, NULL, 0, (peri_cuda_buffer_state *)b->d_state);
}

PER_CUDA_DEF per_status per_cuda_buffer_download(const per_cuda_buffer *b,
                                                 per_buffer *host,
                                                 per_cuda_stream stream) {
  per_status s = peri_cuda_check_buffer(b);
  peri_cuda_buffer_state st;
  peri_cuda_q q;
  if (s != PER_OK) return s;
  if ((s = peri_cuda_host_match(b, host)) != PER_OK) return s;
  if (peri_cuda_begin(&q, stream) != PER_OK) return q.s;
  // the state first: a broken buffer's arrays are not copied
  s = peri_cuda_device_status(cudaMemcpyAsync(&st, b->d_state, sizeof st,
                                              cudaMemcpyDeviceToHost, stream));
  if (s == PER_OK) s = peri_cuda_device_status(cudaStreamSynchronize(stream));
  if (s != PER_OK) return s;
  if (st.broken) return PER_ERR_CORRUPT;
  peri_cuda_buffer_copy(&q, b, host, 0);
  if (q.s == PER_OK)
    q.s = peri_cuda_device_status(cudaStreamSynchronize(stream));
  if (q.s != PER_OK) return q.s;
  peri_cuda_take_cfg(&host->cfg, &st.cfg);
  host->rng = st.rng;
  host->step = st.step;
  host->added = st.added;
  host->trajs = st.trajs;
  host->max_leaf = st.max_leaf;
  host->size = st.size;
  host->pos = st.pos;
  host->zero_hint = st.zero_hint;
  if (host->swap.perm) // the sampler of [0, size), grown by every add
    host->swap.n = st.size <= b->cfg.capacity ? st.size : 0;
  return per_buffer_check(host);
}

} // extern "C"
