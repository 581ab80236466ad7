// per_cuda.cu - kernels and launchers of per_cuda.h (read its top comment).
//
// Build: nvcc -fmad=false -ftz=false -prec-div=true (never
// --use_fast_math), e.g.
//   nvcc -O2 -fmad=false -ftz=false -prec-div=true
//        -gencode arch=compute_80,code=sm_80
//        -gencode arch=compute_90,code=[sm_90,compute_90] -c per_cuda.cu
//
// The same source also compiles as plain host C++ under the test-only shim
// tests/cuda/cuda_host_shim.h, which defines PER_CUDA_HOST_SHIM, the CUDA
// keywords, the runtime calls used here, integer atomics and
// PER_CUDA_LAUNCH (every block and thread of the grid run as loops). So the
// kernels are written for that to be a faithful emulation:
//   - within one launch every thread's work is independent: no shared
//     memory, no __syncthreads, no warp intrinsics, no reliance on the
//     order in which threads run;
//   - a memory location that two threads of one launch may both touch is
//     touched only by integer atomics (atomicMax/Min/CAS/Exch);
//     plain loads and stores go to locations that, within the launch,
//     only one thread writes and nobody else reads, or that nobody writes;
//   - ordering between phases comes only from kernel boundaries on one
//     stream;
//   - every plain load and store of device memory in a kernel is written
//     PERI_CUDA_LD / PERI_CUDA_ST (a plain access on the device), so that
//     the shim can log each thread's accesses and report any two threads of
//     one launch that conflict (a plain write and any other access, or a
//     plain read and an atomic), the races a loop would hide. Only the
//     descents (per.h's and peri_cuda_descend) read the tree directly, in
//     the sampling kernels, which write no node.
// No float atomics: tree nodes get their values from per_tree_recompute
// (a parent) or from the batch (a leaf); integer atomics on their bit
// patterns only mark, claim and publish.

#define PER_STATIC
#define PER_IMPLEMENTATION
#include "per.h"
#include "per_cuda.h"

#ifndef PER_CUDA_HOST_SHIM
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

// >>internals

#define PERI_CUDA_BLOCK_THREADS 256u

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

static peri_cuda_pairs peri_cuda_pairs_none(void) {
  peri_cuda_pairs v;
  memset(&v, 0, sizeof v);
  return v;
}

static __host__ __device__ inline per_real peri_cuda_pair_value(
    const peri_cuda_pairs &v, uint32_t j) {
  if (v.td) return peri_priority(PERI_CUDA_LD(&v.td[j]), v.eps, v.alpha);
  return v.one ? PERI_CUDA_LD(v.one) : PERI_CUDA_LD(&v.val[j]);
}

static __host__ __device__ inline uint32_t peri_cuda_pair_leaf(
    const peri_cuda_pairs &v, uint32_t j) {
  return v.idx ? PERI_CUDA_LD(&v.idx[j]) : (uint32_t)PERI_CUDA_LD(&v.ids[j]);
}

// Pair j is applied: not a stale id.
static __host__ __device__ inline int peri_cuda_pair_live(
    const peri_cuda_pairs &v, uint32_t j) {
  uint64_t id;
  if (!v.ids) return 1;
  id = PERI_CUDA_LD(&v.ids[j]);
  return (uint32_t)(id >> 32) == PERI_CUDA_LD(&v.gen[(uint32_t)id]);
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

// >>kernels: update
// Phase 1. Validate every pair; the first bad one (smallest j) ends up in
// *status. Writes: *status, by atomicMax only.
static __global__ void peri_cuda_validate_pairs_kernel(
    peri_cuda_pairs v, uint32_t n, uint32_t capacity,
    unsigned long long *status) {
  uint32_t j = peri_cuda_thread_id();
  per_status s;
  if (j >= n) return;
  s = peri_cuda_pair_status(v, j, capacity);
  if (s != PER_OK) atomicMax(status, peri_cuda_status_word(j, s));
}

// Phase 2. Each pair claims its leaf with atomicMax(TAG | j): afterwards the
// leaf holds TAG | (last position with that index). Only atomics touch the
// leaves in this launch. For TD errors (prio not NULL) each pair also
// stores its priority in prio[j], so that the pows run here, one per
// thread, and not one after another in the thread that leads a subtree.
static __global__ void peri_cuda_claim_leaves_kernel(
    per_real *node, uint32_t L, peri_cuda_pairs v, uint32_t n, per_real *prio,
    const unsigned long long *status) {
  uint32_t j = peri_cuda_thread_id();
  if (j >= n || PERI_CUDA_LD(status) || !peri_cuda_pair_live(v, j)) return;
  if (prio) PERI_CUDA_ST(&prio[j], peri_cuda_pair_value(v, j));
  atomicMax(peri_cuda_as_bits(&node[L + peri_cuda_pair_leaf(v, j)]),
            PERI_CUDA_CLAIM_TAG | j);
}

// Phase 3, once per group of levels. The tree above the leaves is cut
// into G groups of at most PERI_CUDA_GROUP_LEVELS levels, bases
// b_0 = 0 < b_1 < ... < b_G = depth (b_g = g * PERI_CUDA_GROUP_LEVELS, the
// last one shorter).
// A node of level b_g recomputed by group g is published with its sign
// bit set (no valid node has it: nodes are >= +0), and a claimed leaf
// carries its tag (also negative): in both cases "changed". So each group
// reads its base level to learn what changed, and nobody needs an atomic:
//   - pair j wins its leaf when the leaf holds TAG | j (group 1 reads it;
//     the value is written by the winner two groups later);
//   - in group g < G, every pair alive at level b_{g-1} (the winners at
//     g = 1, then the leaders of group g - 1) looks at its ancestor A at
//     level b_g: the one whose base node is the leftmost changed one under
//     A is A's leader and recomputes A's subtree, level by level, from the
//     2^(b_g - b_{g-1}) base nodes (sign cleared, tags replaced by their
//     values), with per_tree_recompute on a copy: a node is recomputed iff
//     a child changed, others keep their stored value, exactly the nodes
//     per_tree_set_batch recomputes. It writes the changed nodes, A with
//     its sign bit set. Losers stop climbing.
//   - the last group (the top of the tree, at most
//     2^PERI_CUDA_GROUP_LEVELS base nodes) is one thread's: it also writes
//     its base nodes back with the sign cleared (the leaves' values when
//     G == 1);
//   - in group g, a pair that led group g - 2 (or g - 1, which implies it)
//     clears the sign of its level-b_{g-2} node, or at g = 2 writes its
//     leaf's value (-0 as +0). Nobody reads that level in group g.
// win[j] holds the last group pair j led (0: it won its leaf), or
// PERI_CUDA_LOST. Per launch, every location is written by one thread and
// read only by threads that do not write it: no race, no atomics, and the
// launch count is 2 + G with G = ceil(depth / PERI_CUDA_GROUP_LEVELS).
#define PERI_CUDA_GROUP_LEVELS 5u
#define PERI_CUDA_LOST 0xFFFFFFFFu
#define PERI_CUDA_SIGN_BIT ((peri_cuda_bits)1 << (8 * sizeof(per_real) - 1))

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

// A claimed leaf's value x as the leaf stores it: -0 as +0.
static __host__ __device__ inline per_real peri_cuda_leaf_final(per_real x) {
  return x == 0 ? (per_real)0 : x;
}

// The final value a changed node or claimed leaf stands for.
static __host__ __device__ inline per_real peri_cuda_final_value(
    peri_cuda_bits b, int leaf, const peri_cuda_pairs &v) {
  if (leaf)
    return peri_cuda_leaf_final(
        peri_cuda_pair_value(v, (uint32_t)(b & ~PERI_CUDA_CLAIM_TAG)));
  return peri_cuda_from_bits(b & ~PERI_CUDA_SIGN_BIT);
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

// Recompute the subtree of node `top` from its base nodes LV levels below
// (2^LV <= 2^PERI_CUDA_GROUP_LEVELS of them), as described above, when the
// caller leads it: `own` is the base position (0 .. 2^LV - 1) of the
// caller's node, and the caller leads when no base node left of it
// changed (own = 0: always). Returns whether it led. The base nodes are
// written back in their final form when `rewrite_base`, and `top` keeps
// its sign bit when `mark_top`. With a min tree (MIN; a buffer's, for
// buffer-max weights: node = the smallest positive leaf below it, or
// PERI_NO_MIN) the same nodes of it are recomputed, by the same thread:
// a changed leaf's min is written here, and a min node above the leaves
// is final once written (the min tree carries no marks).
// LV is a constant so that the loops unroll: every load of the subtree
// (its base, the stored values above it, then the batch values of the
// claimed leaves) is issued before the first is used, and the thread
// waits for memory about three times, not once per node.

template <uint32_t LV, bool MIN>
static __device__ int peri_cuda_recompute_subtree_fixed(
    per_real *node, per_real *mn, uint32_t top, uint32_t own, int leaf,
    const peri_cuda_pairs &v, int rewrite_base, int mark_top) {
  const uint32_t W = 1u << LV, first = top << LV;
  per_real t[2 * W], m[2 * W];
  peri_cuda_bits b[W];
  bool chg[2 * W];
  uint32_t k;
  PERI_CUDA_UNROLL
  for (k = 0; k < W; ++k)
    b[k] = peri_cuda_to_bits(PERI_CUDA_LD(&node[first + k]));
  PERI_CUDA_UNROLL
  for (k = 0; k < W; ++k) { // a changed base node left of the caller's
    chg[W + k] = (b[k] & PERI_CUDA_SIGN_BIT) != 0;
    if (k < own && chg[W + k]) return 0;
  }
  // The stored values, kept where no child changed.
  PERI_CUDA_UNROLL
  for (k = 1; k < W; ++k)
    t[k] = PERI_CUDA_LD(&node[peri_cuda_subtree_node(top, k)]);
  if (MIN) {
    PERI_CUDA_UNROLL
    for (k = 1; k < 2 * W; ++k)
      m[k] = PERI_CUDA_LD(&mn[peri_cuda_subtree_node(top, k)]);
  }
  if (leaf) { // claimed leaves take their pair's value
    // Loaded for every leaf (pair 0's for an unclaimed one, then
    // dropped): a load under a branch would wait before the next.
    PERI_CUDA_UNROLL
    for (k = 0; k < W; ++k)
      t[W + k] = peri_cuda_pair_value(
          v, chg[W + k] ? (uint32_t)(b[k] & ~PERI_CUDA_CLAIM_TAG) : 0u);
    PERI_CUDA_UNROLL
    for (k = 0; k < W; ++k) {
      if (!chg[W + k]) {
        t[W + k] = peri_cuda_from_bits(b[k]);
        continue;
      }
      t[W + k] = peri_cuda_leaf_final(t[W + k]);
      if (MIN) m[W + k] = t[W + k] > 0 ? t[W + k] : PERI_NO_MIN;
    }
  } else {
    PERI_CUDA_UNROLL
    for (k = 0; k < W; ++k)
      t[W + k] = chg[W + k] ? peri_cuda_final_value(b[k], 0, v)
                            : peri_cuda_from_bits(b[k]);
  }
  PERI_CUDA_UNROLL
  for (k = W - 1; k >= 1; --k) { // children before parents
    chg[k] = chg[2 * k] || chg[2 * k + 1];
    if (!chg[k]) continue;
    if (MIN) m[k] = peri_min_of(m[2 * k], m[2 * k + 1]);
    per_tree_recompute(t, k);
  }
  PERI_CUDA_UNROLL
  for (k = 0; k < W; ++k) { // the stores, after every load
    if (!chg[W + k]) continue;
    if (rewrite_base) PERI_CUDA_ST(&node[first + k], t[W + k]);
    if (MIN && leaf) PERI_CUDA_ST(&mn[first + k], m[W + k]);
  }
  PERI_CUDA_UNROLL
  for (k = 1; k < W; ++k) {
    uint32_t at = peri_cuda_subtree_node(top, k);
    if (!chg[k]) continue;
    if (MIN) PERI_CUDA_ST(&mn[at], m[k]);
    if (k == 1 && mark_top)
      PERI_CUDA_ST(&node[at], peri_cuda_from_bits(peri_cuda_to_bits(t[1]) |
                                                  PERI_CUDA_SIGN_BIT));
    else PERI_CUDA_ST(&node[at], t[k]);
  }
  return 1;
}

// peri_cuda_recompute_subtree_fixed for `levels`
// (0 .. PERI_CUDA_GROUP_LEVELS) known at run time.
template <bool MIN>
static __device__ int peri_cuda_recompute_subtree(
    per_real *node, per_real *mn, uint32_t top, uint32_t levels, uint32_t own,
    int leaf, const peri_cuda_pairs &v, int rewrite_base, int mark_top) {
#define PERI_CUDA_RECOMPUTE_SUBTREE(LV)                                       \
  return peri_cuda_recompute_subtree_fixed<LV, MIN>(node, mn, top, own, leaf, \
                                                    v, rewrite_base, mark_top)
  switch (levels) {
    case 0: PERI_CUDA_RECOMPUTE_SUBTREE(0);
    case 1: PERI_CUDA_RECOMPUTE_SUBTREE(1);
    case 2: PERI_CUDA_RECOMPUTE_SUBTREE(2);
    case 3: PERI_CUDA_RECOMPUTE_SUBTREE(3);
    case 4: PERI_CUDA_RECOMPUTE_SUBTREE(4);
    default: PERI_CUDA_RECOMPUTE_SUBTREE(PERI_CUDA_GROUP_LEVELS);
  }
#undef PERI_CUDA_RECOMPUTE_SUBTREE
}

// Phase 3, group g of the update, as described above. MIN: with the min
// tree mn (a buffer's); a kernel of its own, since its registers would
// otherwise be the plain tree's too.
template <bool MIN>
static __global__ void peri_cuda_recompute_levels_kernel(
    per_real *node, per_real *mn, uint32_t L, uint32_t depth, uint32_t g,
    peri_cuda_pairs v, uint32_t n, const unsigned long long *status,
    uint32_t *win) {
  uint32_t j = peri_cuda_thread_id(), G = peri_cuda_group_count(depth), led;
  uint32_t leaf, lo, hi, A, m;
  if (j >= n || PERI_CUDA_LD(status)) return;
  if (g == G) { // the top: one thread
    if (j == 0)
      peri_cuda_recompute_subtree<MIN>(
          node, mn, 1, depth - peri_cuda_group_base(G - 1, depth), 0, G == 1, v,
          1, 0);
    if (G == 1) return;
  }
  leaf = L + peri_cuda_pair_leaf(v, j); // a stale pair's leaf never has its tag
  if (g == 1) {
    led = peri_cuda_to_bits(PERI_CUDA_LD(&node[leaf])) ==
                  (PERI_CUDA_CLAIM_TAG | j)
              ? 0u
              : PERI_CUDA_LOST;
    PERI_CUDA_ST(&win[j], led);
  } else {
    led = PERI_CUDA_LD(&win[j]);
  }
  if (led == PERI_CUDA_LOST) return;
  if (g >= 2 && led + 2 >= g) { // led group g - 2 (or g - 1): clean up
    uint32_t c = leaf >> peri_cuda_group_base(g - 2, depth);
    peri_cuda_bits b = peri_cuda_to_bits(PERI_CUDA_LD(&node[c]));
    PERI_CUDA_ST(&node[c], peri_cuda_final_value(b, g == 2, v));
  }
  if (g == G || led + 1 != g) return; // not alive at level b_{g-1}
  lo = peri_cuda_group_base(g - 1, depth);
  hi = peri_cuda_group_base(g, depth);
  A = leaf >> hi;
  m = leaf >> lo;
  if (peri_cuda_recompute_subtree<MIN>(node, mn, A, hi - lo,
                                       m - (A << (hi - lo)), lo == 0, v, 0, 1))
    PERI_CUDA_ST(&win[j], g);
}

// >>kernels: sample
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

// Stratum i of a B-batch, exactly per_tree_sample_strata's arithmetic. On an
// unsamplable root every thread writes the same status and nothing else.
static __global__ void peri_cuda_sample_strata_kernel(
    const per_real *node, uint32_t L, uint64_t seed, uint64_t counter,
    const unsigned long long *d_counter, uint32_t B, uint32_t *idx,
    per_real *val, unsigned long long *status) {
  uint32_t i = peri_cuda_thread_id(), leaf;
  per_real total, seg, u;
  per_status s;
  if (i >= B) return;
  total = PERI_CUDA_LD(&node[1]);
  s = peri_samplable(total);
  if (s != PER_OK) { // every thread sees it; the first one says it
    if (i == 0) PERI_CUDA_ST(status, peri_cuda_status_word(0, s));
    return;
  }
  if (d_counter) counter = PERI_CUDA_LD(d_counter);
  seg = total / (per_real)B;
  u = per_tree_stratum_u(seed, counter, i, seg);
  leaf = peri_cuda_descend(node, L, u);
  PERI_CUDA_ST(&idx[i], leaf);
  if (val) PERI_CUDA_ST(&val[i], PERI_CUDA_LD(&node[L + leaf]));
}

// per_tree_find_batch's checks: the first u (in order) that is NaN or
// negative, else (position n) an unsamplable root.
static __global__ void peri_cuda_validate_u_kernel(const per_real *node,
                                                   const per_real *u,
                                                   uint32_t n,
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
static __global__ void peri_cuda_find_kernel(const per_real *node, uint32_t L,
                                             const per_real *u, uint32_t n,
                                             uint32_t *idx, per_real *val,
                                             const unsigned long long *status) {
  uint32_t j = peri_cuda_thread_id(), leaf;
  if (j >= n || PERI_CUDA_LD(status)) return;
  leaf = peri_cuda_descend(node, L, PERI_CUDA_LD(&u[j]));
  PERI_CUDA_ST(&idx[j], leaf);
  if (val) PERI_CUDA_ST(&val[j], PERI_CUDA_LD(&node[L + leaf]));
}

// One thread: on success the device counter moves on by B.
static __global__ void peri_cuda_advance_counter_kernel(
    unsigned long long *d_counter, uint32_t B,
    const unsigned long long *status) {
  if (peri_cuda_thread_id() != 0 || PERI_CUDA_LD(status)) return;
  PERI_CUDA_ST(d_counter, PERI_CUDA_LD(d_counter) + B);
}

// One thread: the first failure of many calls stays in keep[0..1].
static __global__ void peri_cuda_keep_status_kernel(
    unsigned long long *keep, const unsigned long long *status,
    unsigned long long tag) {
  unsigned long long w;
  if (peri_cuda_thread_id() != 0 || PERI_CUDA_LD(&keep[0])) return;
  w = PERI_CUDA_LD(status);
  if (!w) return;
  PERI_CUDA_ST(&keep[0], w);
  PERI_CUDA_ST(&keep[1], tag);
}

// >>kernels: IS weights
// Validate every value (> 0 and a valid leaf; the first bad one wins, as in
// an update) and find the batch minimum: positive reals order like their
// bit patterns, so an integer atomicMin on the patterns finds it exactly,
// whatever the order of the threads. Each thread takes the values i = t,
// t + T, t + 2T, ... (T threads, PERI_CUDA_VALUES_PER_THREAD values each)
// and does at most one atomicMin and one atomicMax:
// B / PERI_CUDA_VALUES_PER_THREAD atomics on the minimum's address instead
// of B.
#define PERI_CUDA_VALUES_PER_THREAD 32u

static __host__ __device__ inline uint32_t peri_cuda_reduce_threads(
    uint32_t B) {
  return B / PERI_CUDA_VALUES_PER_THREAD +
         (B % PERI_CUDA_VALUES_PER_THREAD != 0);
}

// What a replay buffer's sample call draws from, found by its first kernel
// (one thread): peri_plan_sample's plan for items, with replacement.
struct peri_cuda_sample_plan {
  peri_cover cov; // !whole: the window's subtrees
  double beta;
  per_real total, seg, pmin;        // pmin: buffer-max weights' minimum
  unsigned long long seed, counter; // the strata's stream
  uint32_t W, start, whole, degenerate, bufmax, pad;
};

// The weights kernels serve per_cuda_is_weights (plan NULL) and a replay
// buffer's sample, which passes its plan: beta is the plan's, and nothing
// is left to do when the call already failed (an empty buffer) or the draw
// kernel wrote the weights (degenerate mass: 1; buffer-max weights).
static __device__ inline int peri_cuda_weights_done(
    const peri_cuda_sample_plan *plan, const unsigned long long *status) {
  return plan && (PERI_CUDA_LD(status) || PERI_CUDA_LD(&plan->degenerate) ||
                  PERI_CUDA_LD(&plan->bufmax));
}

static __global__ void peri_cuda_batch_min_kernel(
    const peri_cuda_sample_plan *plan, const per_real *val, uint32_t B,
    peri_cuda_bits *minbits, unsigned long long *status) {
  uint32_t t = peri_cuda_thread_id(), T = peri_cuda_reduce_threads(B), i;
  peri_cuda_bits m = ~(peri_cuda_bits)0; // above every valid pattern
  unsigned long long bad = 0;
  if (t >= T || peri_cuda_weights_done(plan, status)) return;
  for (i = t; i < B; i += T) {
    per_real x = PERI_CUDA_LD(&val[i]);
    per_status s = per_leaf_status(x);
    if (s == PER_OK && !(x > 0)) s = PER_ERR_ARG;
    if (s != PER_OK) {
      if (!bad) bad = peri_cuda_status_word(i, s); // i grows: the first is kept
    } else if (peri_cuda_to_bits(x) < m) {
      m = peri_cuda_to_bits(x);
    }
    if (B - i <= T) break; // i + T would be past B (or wrap)
  }
  if (bad) atomicMax(status, bad);
  else atomicMin(minbits, m);
}

// w[i] = peri_weight(val[i], min, beta); thread i alone writes w[i].
static __global__ void peri_cuda_is_weights_kernel(
    const peri_cuda_sample_plan *plan, const per_real *val, uint32_t B,
    double beta, float *w, const peri_cuda_bits *minbits,
    const unsigned long long *status) {
  uint32_t i = peri_cuda_thread_id();
  if (i >= B || PERI_CUDA_LD(status) || peri_cuda_weights_done(plan, status))
    return;
  if (plan) beta = PERI_CUDA_LD(&plan->beta);
  PERI_CUDA_ST(&w[i],
               peri_weight(PERI_CUDA_LD(&val[i]),
                           peri_cuda_from_bits(PERI_CUDA_LD(minbits)), beta));
}

// bytes rounded up to a multiple of 256 (at least 256).
static __host__ __device__ inline size_t peri_cuda_round256(size_t bytes) {
  size_t r = (bytes + 255u) & ~(size_t)255u;
  return r ? r : 256u;
}

// >>kernels: replay buffer
// The device buffer's counters (per_cuda_buffer.d_state): per_buffer's
// fields of the same names.
struct peri_cuda_buffer_state {
  per_rng rng;
  unsigned long long step, added, trajs;
  per_real max_leaf;
  uint32_t size, pos, zero_hint, pad;
};

// An update's totals over its live pairs, or over part of them (the
// partial records in per_cuda_buffer.d_work).
struct peri_cuda_totals {
  unsigned long long maxbits; // the largest priority's pattern
  unsigned int stale, zero;
};

// The workspace: the sample's plan and weights' minimum, three arrays of
// max_batch (win and val serve an update too: its subtree leaders and its
// pairs' priorities), then an update's partial totals: part[t] of its
// T = peri_cuda_reduce_threads(n) aggregating threads, part2[u] of 32 of
// those each.
struct peri_cuda_workspace {
  peri_cuda_sample_plan *plan;
  peri_cuda_bits *minbits;
  uint32_t *win, *idx;
  per_real *val;
  peri_cuda_totals *part, *part2;
};

// The next `bytes` (rounded to 256) of a block at base, from *off; NULL
// when base is (a size query).
static unsigned char *peri_cuda_carve(unsigned char *base, size_t *off,
                                      size_t bytes) {
  unsigned char *p = base ? base + *off : NULL;
  *off += peri_cuda_round256(bytes);
  return p;
}

// The workspace for batches of up to max_batch laid out from base into *w
// (base NULL: only the size); returns the bytes it spans.
static size_t peri_cuda_workspace_layout(unsigned char *base,
                                         uint32_t max_batch,
                                         peri_cuda_workspace *w) {
  size_t off = 0, t1 = peri_cuda_reduce_threads(max_batch);
  size_t t2 = peri_cuda_reduce_threads((uint32_t)t1);
  w->plan = (peri_cuda_sample_plan *)peri_cuda_carve(
      base, &off, sizeof(peri_cuda_sample_plan));
  w->minbits =
      (peri_cuda_bits *)peri_cuda_carve(base, &off, sizeof(peri_cuda_bits));
  w->win = (uint32_t *)peri_cuda_carve(base, &off,
                                       (size_t)max_batch * sizeof(uint32_t));
  w->idx = (uint32_t *)peri_cuda_carve(base, &off,
                                       (size_t)max_batch * sizeof(uint32_t));
  w->val = (per_real *)peri_cuda_carve(base, &off,
                                       (size_t)max_batch * sizeof(per_real));
  w->part = (peri_cuda_totals *)peri_cuda_carve(base, &off,
                                                t1 * sizeof(peri_cuda_totals));
  w->part2 = (peri_cuda_totals *)peri_cuda_carve(base, &off,
                                                 t2 * sizeof(peri_cuda_totals));
  return off;
}

static size_t peri_cuda_workspace_bytes(uint32_t max_batch) {
  peri_cuda_workspace w;
  return peri_cuda_workspace_layout(NULL, max_batch, &w);
}

static peri_cuda_workspace peri_cuda_workspace_of(const per_cuda_buffer *b) {
  peri_cuda_workspace w;
  peri_cuda_workspace_layout((unsigned char *)b->d_work, b->max_batch, &w);
  return w;
}

// The state record = s; with a min tree mn of L leaves (a reset), every
// node of it PERI_NO_MIN: no positive leaf anywhere.
static __global__ void peri_cuda_set_state_kernel(peri_cuda_buffer_state *st,
                                                  peri_cuda_buffer_state s,
                                                  per_real *mn, uint32_t L) {
  uint32_t k = peri_cuda_thread_id();
  if (k == 0) PERI_CUDA_ST(st, s);
  if (mn && k < L) { // node k and leaf k
    PERI_CUDA_ST(&mn[k], PERI_NO_MIN);
    PERI_CUDA_ST(&mn[L + k], PERI_NO_MIN);
  }
}

// Rows of item bytes in units of U (1 or 4 bytes: the host picks 4 when
// every address allows it), a grid-stride loop over the units. An add
// copies call row skip + t to ring slot (pos + skip + t) % cap, a sample
// ring slot idx[t] to batch row t.
template <typename U>
static __global__ void peri_cuda_copy_rows_kernel(
    U *dst, const U *src, const peri_cuda_buffer_state *st, const uint32_t *idx,
    uint32_t rows, uint32_t skip, uint32_t units, uint32_t cap, int add,
    const unsigned long long *status) {
  uint64_t e = peri_cuda_thread_id(), all = (uint64_t)rows * units;
  uint64_t step = (uint64_t)gridDim.x * blockDim.x;
  uint32_t pos;
  if (e >= all || PERI_CUDA_LD(status)) return;
  pos = add ? PERI_CUDA_LD(&st->pos) : 0;
  for (; e < all; e += step) {
    uint32_t t = (uint32_t)(e / units), u = (uint32_t)(e % units);
    uint64_t from, to;
    if (add) {
      from = (uint64_t)skip + t;
      to = ((uint64_t)pos + skip + t) % cap;
    } else {
      from = PERI_CUDA_LD(&idx[t]);
      to = t;
    }
    PERI_CUDA_ST(&dst[to * units + u], PERI_CUDA_LD(&src[from * units + u]));
  }
}

// add: the first bad episode end wins.
static __global__ void peri_cuda_check_ends_kernel(const uint8_t *ends,
                                                   uint32_t n,
                                                   unsigned long long *status) {
  uint32_t j = peri_cuda_thread_id();
  if (j >= n) return;
  if (PERI_CUDA_LD(&ends[j]) > PER_END_TRUNCATED)
    atomicMax(status, peri_cuda_status_word(j, PER_ERR_ARG));
}

// add: slot t of the kept ones, as per_buffer_add_steps: its generation,
// trajectory id, episode end, and its index for the tree update.
static __global__ void peri_cuda_fill_slots_kernel(
    const peri_cuda_buffer_state *st, uint32_t *gen, uint32_t *traj,
    uint8_t *ends, const uint8_t *in, uint32_t *idx, uint32_t n, uint32_t cap,
    const unsigned long long *status) {
  uint32_t t = peri_cuda_thread_id(), keep = n < cap ? n : cap, pos, age;
  uint32_t slot;
  if (t >= keep || PERI_CUDA_LD(status)) return;
  pos = PERI_CUDA_LD(&st->pos);
  age = (uint32_t)(((uint64_t)(n - keep) + t) % cap); // from pos
  slot = (uint32_t)(((uint64_t)pos + age) % cap);
  PERI_CUDA_ST(&gen[slot], peri_gen_add(PERI_CUDA_LD(&gen[slot]),
                                        peri_add_writes(age, n, cap)));
  PERI_CUDA_ST(&traj[slot], (uint32_t)PERI_CUDA_LD(&st->trajs));
  PERI_CUDA_ST(&ends[slot],
               in ? PERI_CUDA_LD(&in[n - keep + t]) : (uint8_t)PER_END_NONE);
  PERI_CUDA_ST(&idx[t], slot);
}

// add, one thread: the ring position, size and counters moved on by the
// n added items (a trajectory more).
static __global__ void peri_cuda_record_add_kernel(
    peri_cuda_buffer_state *st, uint32_t n, uint32_t cap,
    const unsigned long long *status) {
  peri_cuda_buffer_state s;
  if (peri_cuda_thread_id() != 0 || PERI_CUDA_LD(status)) return;
  s = PERI_CUDA_LD(st);
  s.pos = (uint32_t)(((uint64_t)s.pos + n) % cap);
  s.size = (uint64_t)s.size + n >= cap ? cap : s.size + n;
  s.added += n;
  s.trajs += 1;
  PERI_CUDA_ST(st, s);
}

// sample, one thread: the plan (peri_plan_sample for items, with
// replacement), the stream and step advanced. Degenerate mass: the
// uniform draws here, in order, as the CPU's.
static __global__ void peri_cuda_plan_sample_kernel(
    peri_cuda_buffer_state *st, per_config cfg, uint32_t cap, uint32_t L,
    const per_real *node, const per_real *mn, const uint32_t *traj, uint32_t B,
    uint32_t flags, double beta, uint32_t window, peri_cuda_sample_plan *plan,
    uint32_t *idx, unsigned long long *status) {
  peri_cuda_buffer_state s;
  peri_cuda_sample_plan p;
  uint32_t q, nr, lo[2], hi[2], i;
  if (peri_cuda_thread_id() != 0) return;
  s = PERI_CUDA_LD(st);
  if (s.size == 0) {
    PERI_CUDA_ST(status, peri_cuda_status_word(0, PER_ERR_EMPTY));
    return;
  }
  memset(&p, 0, sizeof p);
  p.beta = (flags & PER_SAMPLE_BETA) ? beta : peri_beta_at(&cfg, s.step);
  p.W = window;
  if (p.W && (flags & PER_SAMPLE_TRAJECTORIES))
    p.W = peri_traj_window_of(traj, cap, s.pos, s.size, p.W);
  if (p.W == 0 || p.W > s.size) p.W = s.size;
  p.whole = p.W == s.size;
  nr = peri_window(cap, s.pos, p.W, &p.start, lo, hi);
  if (p.whole) {
    p.total = node[1];
  } else {
    for (q = 0; q < nr; ++q) peri_cover_range(&p.cov, L, lo[q], hi[q]);
    p.total = peri_cover_total(&p.cov, node);
  }
  p.degenerate = !peri_dfinite((double)p.total) || !(p.total > 0);
  p.bufmax = mn && mn[1] <= PER_LEAF_MAX;
  p.pmin = p.bufmax ? mn[1] : PERI_NO_MIN;
  p.seed = s.rng.seed;
  p.counter = s.rng.counter;
  if (p.degenerate) {
    for (i = 0; i < B; ++i)
      PERI_CUDA_ST(
          &idx[i],
          (uint32_t)(((uint64_t)p.start + peri_rng_below(&s.rng, p.W)) % cap));
  } else {
    p.seg = p.total / (per_real)B;
    s.rng.counter += B;
    s.rng.avail = 0;
  }
  s.step += 1;
  PERI_CUDA_ST(plan, p);
  PERI_CUDA_ST(st, s);
}

// sample: draw i (stratum i, or the plan's uniform pick), its id and, when
// they need no batch minimum, its weight.
static __global__ void peri_cuda_draw_batch_kernel(
    const peri_cuda_sample_plan *plan, const per_real *node, uint32_t L,
    const uint32_t *gen, uint32_t B, uint32_t *idx, per_real *val,
    uint64_t *ids, float *w, const unsigned long long *status) {
  uint32_t i = peri_cuda_thread_id(), leaf;
  per_real v;
  if (i >= B || PERI_CUDA_LD(status)) return;
  if (PERI_CUDA_LD(&plan->degenerate)) {
    leaf = PERI_CUDA_LD(&idx[i]);
  } else {
    per_real u = per_tree_stratum_u(PERI_CUDA_LD(&plan->seed),
                                    PERI_CUDA_LD(&plan->counter), i,
                                    PERI_CUDA_LD(&plan->seg));
    leaf = PERI_CUDA_LD(&plan->whole) ? peri_cuda_descend(node, L, u)
                                      : peri_cover_find(&plan->cov, node, L, u);
    PERI_CUDA_ST(&idx[i], leaf);
  }
  v = node[L + leaf];
  PERI_CUDA_ST(&val[i], v);
  if (ids)
    PERI_CUDA_ST(&ids[i],
                 (uint64_t)leaf | ((uint64_t)PERI_CUDA_LD(&gen[leaf]) << 32));
  if (w && PERI_CUDA_LD(&plan->degenerate)) PERI_CUDA_ST(&w[i], 1.0f);
  else if (w && PERI_CUDA_LD(&plan->bufmax))
    PERI_CUDA_ST(&w[i], peri_weight(v, PERI_CUDA_LD(&plan->pmin),
                                    PERI_CUDA_LD(&plan->beta)));
}

// update, 32 pairs a thread: each pair checked (the first bad one in
// batch order wins the status word), and over the good ones the stale
// count, the largest priority and whether one is 0, written to the
// thread's own part[t]: no atomic unless a pair is bad. A live pair's
// priority also goes to prio[j], for the tree update. The totals are
// used only when no pair was bad.
static __global__ void peri_cuda_pair_totals_kernel(
    peri_cuda_pairs v, const peri_cuda_buffer_state *st, uint32_t n,
    uint32_t cap, peri_cuda_totals *part, per_real *prio,
    unsigned long long *status) {
  uint32_t t = peri_cuda_thread_id(), T = peri_cuda_reduce_threads(n), k, count;
  unsigned int stale = 0, zero = 0, live = 0;
  unsigned long long mx = 0, bad = 0, added;
  uint64_t id[PERI_CUDA_VALUES_PER_THREAD];
  uint32_t gen[PERI_CUDA_VALUES_PER_THREAD];
  float td[PERI_CUDA_VALUES_PER_THREAD];
  peri_cuda_totals a;
  if (t >= T) return;
  // Pair k < count of this thread is j = t + k T (k T < n - t: no
  // overflow). The loads first, all of them, then the generations they
  // name, so the thread waits for memory twice, not twice per pair.
  count = (n - t + T - 1) / T;
  added = PERI_CUDA_LD(&st->added);
  PERI_CUDA_UNROLL
  for (k = 0; k < PERI_CUDA_VALUES_PER_THREAD; ++k) {
    if (k >= count) break;
    id[k] = PERI_CUDA_LD(&v.ids[t + k * T]);
    td[k] = PERI_CUDA_LD(&v.td[t + k * T]);
  }
  PERI_CUDA_UNROLL
  for (k = 0; k < PERI_CUDA_VALUES_PER_THREAD; ++k) {
    if (k >= count) break;
    gen[k] = (uint32_t)id[k] < cap ? PERI_CUDA_LD(&v.gen[(uint32_t)id[k]]) : 0u;
  }
  PERI_CUDA_UNROLL
  for (k = 0; k < PERI_CUDA_VALUES_PER_THREAD; ++k) {
    per_status s;
    if (k >= count) break;
    // per_buffer_update's checks, then liveness, on the values read
    s = peri_float_status(td[k]);
    if (s == PER_OK) s = peri_id_status_of(id[k], cap, 1, gen[k], added);
    if (s != PER_OK) {
      if (!bad) bad = peri_cuda_status_word(t + k * T, s); // the first is kept
    } else if ((uint32_t)(id[k] >> 32) != gen[k]) {
      ++stale;
    } else {
      per_real p = peri_priority(td[k], v.eps, v.alpha);
      unsigned long long b = (unsigned long long)peri_cuda_to_bits(p);
      PERI_CUDA_ST(&prio[t + k * T], p); // the tree update's value
      live = 1;
      if (b > mx) mx = b;
      if (!(p > 0)) zero = 1;
    }
  }
  if (bad) atomicMax(status, bad);
  a.maxbits = live ? mx : 0;
  a.stale = stale;
  a.zero = zero;
  PERI_CUDA_ST(&part[t], a);
}

// The totals of part[first, first + count): stale counts added, the
// largest pattern and the zero flag kept (a pattern of 0 is no live pair:
// every live priority's pattern is above it or is +0, which adds nothing).
static __device__ inline peri_cuda_totals peri_cuda_combine_totals(
    const peri_cuda_totals *part, uint32_t first, uint32_t count) {
  peri_cuda_totals a;
  uint32_t i;
  a.maxbits = 0;
  a.stale = 0;
  a.zero = 0;
  for (i = first; i < first + count; ++i) {
    peri_cuda_totals x = PERI_CUDA_LD(&part[i]);
    a.stale += x.stale;
    if (x.maxbits > a.maxbits) a.maxbits = x.maxbits;
    if (x.zero) a.zero = 1;
  }
  return a;
}

// update: thread u folds part[32u, 32u + 32) of the T partial totals into
// part2[u].
static __global__ void peri_cuda_fold_totals_kernel(
    const peri_cuda_totals *part, uint32_t T, peri_cuda_totals *part2,
    const unsigned long long *status) {
  uint32_t u = peri_cuda_thread_id(), first = u * PERI_CUDA_VALUES_PER_THREAD;
  if (first >= T || PERI_CUDA_LD(status)) return;
  PERI_CUDA_ST(&part2[u],
               peri_cuda_combine_totals(part, first,
                                        T - first < PERI_CUDA_VALUES_PER_THREAD
                                            ? T - first
                                            : PERI_CUDA_VALUES_PER_THREAD));
}

// update, one thread: the U folded totals into the state and *stale.
static __global__ void peri_cuda_apply_totals_kernel(
    peri_cuda_buffer_state *st, const peri_cuda_totals *part2, uint32_t U,
    uint32_t *stale, const unsigned long long *status) {
  peri_cuda_totals a;
  per_real mx;
  if (peri_cuda_thread_id() != 0 || PERI_CUDA_LD(status)) return;
  a = peri_cuda_combine_totals(part2, 0, U);
  if (stale) PERI_CUDA_ST(stale, a.stale);
  mx = peri_cuda_from_bits((peri_cuda_bits)a.maxbits);
  if (mx > PERI_CUDA_LD(&st->max_leaf)) PERI_CUDA_ST(&st->max_leaf, mx);
  if (a.zero) PERI_CUDA_ST(&st->zero_hint, 1u);
}

// >>launchers
// Blocks for n threads; no overflow for n up to UINT32_MAX (a sample's B).
static uint32_t peri_cuda_blocks_for(uint32_t n) {
  return n / PERI_CUDA_BLOCK_THREADS + (n % PERI_CUDA_BLOCK_THREADS != 0);
}

// The cudaError_t behind the last PER_ERR_DEVICE of this thread.
static thread_local int peri_cuda_last_error = 0;

// PER_OK for cudaSuccess; otherwise keep e for per_cuda_last_error and
// return PER_ERR_DEVICE.
static per_status peri_cuda_device_status(cudaError_t e) {
  if (e == cudaSuccess) return PER_OK;
  peri_cuda_last_error = (int)e;
  return PER_ERR_DEVICE;
}

static per_status peri_cuda_launch_status(void) {
  return peri_cuda_device_status(cudaPeekAtLastError());
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

// Enqueue an update's kernels after its checks (n >= 1; *d_status
// already cleared): validate (when `validate`), claim, the groups. With
// TD errors, prio (n values) receives the pairs' priorities in the claim
// and the groups read them from there.
static void peri_cuda_enqueue_update(const per_cuda_tree *t, per_real *d_min,
                                     peri_cuda_pairs v, uint32_t n,
                                     int validate, uint32_t *win,
                                     per_real *prio,
                                     unsigned long long *d_status,
                                     per_cuda_stream stream) {
  uint32_t g = peri_cuda_blocks_for(n), lv;
  peri_cuda_pairs vg = v;
  if (validate)
    PER_CUDA_LAUNCH(peri_cuda_validate_pairs_kernel, g, PERI_CUDA_BLOCK_THREADS,
                    stream, v, n, t->capacity, d_status);
  PER_CUDA_LAUNCH(peri_cuda_claim_leaves_kernel, g, PERI_CUDA_BLOCK_THREADS,
                  stream, t->d_node, t->leaves, v, n,
                  v.td ? prio : (per_real *)NULL, d_status);
  if (v.td) {
    vg.td = NULL;
    vg.val = prio;
  }
  for (lv = 1; lv <= peri_cuda_group_count(t->depth); ++lv) {
    if (d_min)
      PER_CUDA_LAUNCH(peri_cuda_recompute_levels_kernel<true>, g,
                      PERI_CUDA_BLOCK_THREADS, stream, t->d_node, d_min,
                      t->leaves, t->depth, lv, vg, n, d_status, win);
    else
      PER_CUDA_LAUNCH(peri_cuda_recompute_levels_kernel<false>, g,
                      PERI_CUDA_BLOCK_THREADS, stream, t->d_node, d_min,
                      t->leaves, t->depth, lv, vg, n, d_status, win);
  }
}

static per_status peri_cuda_tree_update(const per_cuda_tree *t,
                                        const uint32_t *d_idx,
                                        peri_cuda_pairs v, uint32_t n,
                                        void *d_scratch, size_t *scratch_bytes,
                                        unsigned long long *d_status,
                                        per_cuda_stream stream) {
  per_status s;
  size_t win_bytes = peri_cuda_round256((size_t)n * sizeof(uint32_t));
  size_t prio_bytes =
      v.td ? peri_cuda_round256((size_t)n * sizeof(per_real)) : 0;
  uint32_t *win = (uint32_t *)d_scratch;
  per_real *prio = (per_real *)((unsigned char *)d_scratch + win_bytes);
  int go;
  if ((s = peri_cuda_check_tree(t)) != PER_OK) return s;
  if (n > PER_CUDA_MAX_BATCH) return PER_ERR_BATCH;
  s = peri_cuda_check_scratch(d_scratch, scratch_bytes, win_bytes + prio_bytes,
                              &go);
  if (s != PER_OK || !go) return s;
  if (!d_status) return PER_ERR_NULL;
  if (n > 0 && (!d_idx || (!v.val && !v.td))) return PER_ERR_NULL;
  if (!peri_cuda_aligned(d_status, sizeof *d_status) ||
      !peri_cuda_aligned(d_scratch, sizeof(uint32_t)) ||
      !peri_cuda_aligned(d_idx, sizeof *d_idx) ||
      !peri_cuda_aligned(v.val, sizeof *v.val) ||
      !peri_cuda_aligned(v.td, sizeof *v.td))
    return PER_ERR_MEMORY;
  s = peri_cuda_device_status(
      cudaMemsetAsync(d_status, 0, sizeof *d_status, stream));
  if (s != PER_OK || n == 0) return s;
  v.idx = d_idx;
  peri_cuda_enqueue_update(t, NULL, v, n, 1, win, prio, d_status, stream);
  return peri_cuda_launch_status();
}

// >>launchers: replay buffer
// The parts of a buffer's device memory, in order, each 256-byte aligned:
// items, generations, ends, trajectory ids, tree, min tree, state, work.
static size_t peri_cuda_buffer_parts(const per_config *c, uint32_t max_batch,
                                     size_t part[8]) {
  size_t total = 0, cap = c->capacity, tb = per_tree_bytes(c->capacity);
  int i;
  if (tb == 0 || cap * c->item_size / c->item_size != cap) return 0;
  part[0] = peri_cuda_round256(cap * c->item_size);
  part[1] = peri_cuda_round256(cap * sizeof(uint32_t));
  part[2] = peri_cuda_round256(cap);
  part[3] = part[1];
  part[4] = peri_cuda_round256(tb);
  part[5] = (c->flags & PER_WEIGHTS_BUFFER_MAX) ? part[4] : 0;
  part[6] = peri_cuda_round256(sizeof(peri_cuda_buffer_state));
  part[7] = peri_cuda_workspace_bytes(max_batch);
  for (i = 0; i < 8; ++i) {
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
  if (cfg->seq_len || (cfg->flags & PER_MAX_LIVE)) return PER_ERR_ARG;
  if (max_batch == 0 || max_batch > PER_CUDA_MAX_BATCH) return PER_ERR_BATCH;
  return PER_OK;
}

// 4-byte units when the item size and every base address allow them.
static uint32_t peri_cuda_copy_unit(const per_cuda_buffer *b, const void *p) {
  return (b->cfg.item_size % 4 == 0 && peri_cuda_aligned(p, 4)) ? 4u : 1u;
}

static void peri_cuda_copy_rows(const per_cuda_buffer *b, void *dst,
                                const void *src, const uint32_t *idx,
                                uint32_t rows, uint32_t skip, int add,
                                const unsigned long long *d_status,
                                per_cuda_stream stream) {
  uint32_t unit = peri_cuda_copy_unit(b, add ? src : dst);
  uint32_t units = b->cfg.item_size / unit;
  uint64_t all = (uint64_t)rows * units;
  uint64_t blocks =
      all / PERI_CUDA_BLOCK_THREADS + (all % PERI_CUDA_BLOCK_THREADS != 0);
  peri_cuda_buffer_state *st = (peri_cuda_buffer_state *)b->d_state;
  if (blocks > (1u << 20)) blocks = 1u << 20; // the rest by the loop
  if (unit == 4)
    PER_CUDA_LAUNCH(peri_cuda_copy_rows_kernel<uint32_t>, (uint32_t)blocks,
                    PERI_CUDA_BLOCK_THREADS, stream, (uint32_t *)dst,
                    (const uint32_t *)src, (const peri_cuda_buffer_state *)st,
                    idx, rows, skip, units, b->cfg.capacity, add, d_status);
  else
    PER_CUDA_LAUNCH(peri_cuda_copy_rows_kernel<unsigned char>, (uint32_t)blocks,
                    PERI_CUDA_BLOCK_THREADS, stream, (unsigned char *)dst,
                    (const unsigned char *)src,
                    (const peri_cuda_buffer_state *)st, idx, rows, skip, units,
                    b->cfg.capacity, add, d_status);
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
      h->cfg.seq_len != 0 || (h->cfg.alpha == 0) != (b->cfg.alpha == 0) ||
      (h->min_node == NULL) != (b->d_min_node == NULL))
    return PER_ERR_ARG;
  return PER_OK;
}

// The state's copies between a CPU buffer and the device, in the order of
// peri_cuda_buffer_parts (items, gen, ends, traj, tree, min tree).
static per_status peri_cuda_buffer_copy(const per_cuda_buffer *b,
                                        const per_buffer *h, int up,
                                        per_cuda_stream stream) {
  size_t cap = b->cfg.capacity, tb = per_tree_bytes(b->cfg.capacity);
  void *dev[6] = {b->d_items, b->d_gen,       b->d_ends,
                  b->d_traj,  b->tree.d_node, b->d_min_node};
  void *host[6] = {h->items, h->gen,       h->ends,
                   h->traj,  h->tree.node, h->min_node};
  size_t n[6] = {cap * b->cfg.item_size,
                 cap * sizeof(uint32_t),
                 cap,
                 cap * sizeof(uint32_t),
                 tb,
                 tb};
  int i;
  for (i = 0; i < 6; ++i) {
    cudaError_t e;
    if (!dev[i]) continue;
    e = up ? cudaMemcpyAsync(dev[i], host[i], n[i], cudaMemcpyHostToDevice,
                             stream)
           : cudaMemcpyAsync(host[i], dev[i], n[i], cudaMemcpyDeviceToHost,
                             stream);
    if (e != cudaSuccess) return peri_cuda_device_status(e);
  }
  return PER_OK;
}

// >>api
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
  if (s != PER_OK) return s;
  return peri_cuda_device_status(
      cudaMemsetAsync(t->d_node, 0, per_tree_bytes(t->capacity), stream));
}

static per_status peri_cuda_tree_copy(const per_cuda_tree *t,
                                      const per_tree *host, int upload,
                                      per_cuda_stream stream) {
  per_status s = peri_cuda_check_tree(t);
  cudaError_t e;
  size_t bytes;
  if (s != PER_OK) return s;
  if (!host || !host->node) return PER_ERR_NULL;
  if (host->capacity != t->capacity || host->leaves != t->leaves)
    return PER_ERR_CAPACITY;
  bytes = per_tree_bytes(t->capacity);
  if (upload)
    e = cudaMemcpyAsync(t->d_node, host->node, bytes, cudaMemcpyHostToDevice,
                        stream);
  else
    e = cudaMemcpyAsync(host->node, t->d_node, bytes, cudaMemcpyDeviceToHost,
                        stream);
  return peri_cuda_device_status(e);
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
  if (!d_status) return PER_ERR_NULL;
  if (!peri_cuda_aligned(d_status, sizeof *d_status)) return PER_ERR_MEMORY;
  return peri_cuda_device_status(
      cudaMemsetAsync(d_status, 0, sizeof *d_status, stream));
}

PER_CUDA_DEF per_status per_cuda_status_keep(unsigned long long *d_keep,
                                             const unsigned long long *d_status,
                                             unsigned long long tag,
                                             per_cuda_stream stream) {
  if (!d_keep || !d_status) return PER_ERR_NULL;
  if (!peri_cuda_aligned(d_keep, sizeof *d_keep) ||
      !peri_cuda_aligned(d_status, sizeof *d_status))
    return PER_ERR_MEMORY;
  if (d_status == d_keep || d_status == d_keep + 1) return PER_ERR_ARG;
  PER_CUDA_LAUNCH(peri_cuda_keep_status_kernel, 1u, 1u, stream, d_keep,
                  d_status, tag);
  return peri_cuda_launch_status();
}

PER_CUDA_DEF per_status per_cuda_tree_set_batch(
    const per_cuda_tree *t, const uint32_t *d_idx, const per_real *d_val,
    uint32_t n, void *d_scratch, size_t *scratch_bytes,
    unsigned long long *d_status, per_cuda_stream stream) {
  peri_cuda_pairs v = peri_cuda_pairs_none();
  v.val = d_val;
  return peri_cuda_tree_update(t, d_idx, v, n, d_scratch, scratch_bytes,
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
  return peri_cuda_tree_update(t, d_idx, v, n, d_scratch, scratch_bytes,
                               d_status, stream);
}

PER_CUDA_DEF per_status per_cuda_tree_sample(
    const per_cuda_tree *t, uint64_t seed, uint64_t counter,
    unsigned long long *d_counter, uint32_t B, uint32_t *d_idx, per_real *d_val,
    unsigned long long *d_status, per_cuda_stream stream) {
  per_status s = peri_cuda_check_tree(t);
  if (s != PER_OK) return s;
  if (!d_idx || !d_status) return PER_ERR_NULL;
  if (B == 0) return PER_ERR_BATCH;
  if (!peri_cuda_aligned(d_status, sizeof *d_status) ||
      !peri_cuda_aligned(d_counter, sizeof *d_counter) ||
      !peri_cuda_aligned(d_idx, sizeof *d_idx) ||
      !peri_cuda_aligned(d_val, sizeof *d_val))
    return PER_ERR_MEMORY;
  s = peri_cuda_device_status(
      cudaMemsetAsync(d_status, 0, sizeof *d_status, stream));
  if (s != PER_OK) return s;
  PER_CUDA_LAUNCH(peri_cuda_sample_strata_kernel, peri_cuda_blocks_for(B),
                  PERI_CUDA_BLOCK_THREADS, stream, t->d_node, t->leaves, seed,
                  counter, d_counter, B, d_idx, d_val, d_status);
  if (d_counter)
    PER_CUDA_LAUNCH(peri_cuda_advance_counter_kernel, 1u, 1u, stream, d_counter,
                    B, d_status);
  return peri_cuda_launch_status();
}

PER_CUDA_DEF per_status per_cuda_tree_find(const per_cuda_tree *t,
                                           const per_real *d_u, uint32_t n,
                                           uint32_t *d_idx, per_real *d_val,
                                           unsigned long long *d_status,
                                           per_cuda_stream stream) {
  per_status s = peri_cuda_check_tree(t);
  if (s != PER_OK) return s;
  if (!d_status || (n > 0 && (!d_u || !d_idx))) return PER_ERR_NULL;
  if (n > PER_CUDA_MAX_BATCH) return PER_ERR_BATCH;
  if (!peri_cuda_aligned(d_status, sizeof *d_status) ||
      !peri_cuda_aligned(d_u, sizeof *d_u) ||
      !peri_cuda_aligned(d_idx, sizeof *d_idx) ||
      !peri_cuda_aligned(d_val, sizeof *d_val))
    return PER_ERR_MEMORY;
  s = peri_cuda_device_status(
      cudaMemsetAsync(d_status, 0, sizeof *d_status, stream));
  if (s != PER_OK || n == 0) return s;
  PER_CUDA_LAUNCH(peri_cuda_validate_u_kernel, peri_cuda_blocks_for(n),
                  PERI_CUDA_BLOCK_THREADS, stream, (const per_real *)t->d_node,
                  d_u, n, d_status);
  PER_CUDA_LAUNCH(peri_cuda_find_kernel, peri_cuda_blocks_for(n),
                  PERI_CUDA_BLOCK_THREADS, stream, (const per_real *)t->d_node,
                  t->leaves, d_u, n, d_idx, d_val,
                  (const unsigned long long *)d_status);
  return peri_cuda_launch_status();
}

PER_CUDA_DEF per_status per_cuda_is_weights(const per_real *d_val, uint32_t B,
                                            double beta, float *d_w,
                                            void *d_scratch,
                                            size_t *scratch_bytes,
                                            unsigned long long *d_status,
                                            per_cuda_stream stream) {
  peri_cuda_bits *minbits = (peri_cuda_bits *)d_scratch;
  per_status s;
  uint32_t g;
  int go;
  if (B == 0 || B > PER_CUDA_MAX_BATCH) return PER_ERR_BATCH;
  if (!peri_cuda_nonneg_finite(beta)) return PER_ERR_ARG;
  s = peri_cuda_check_scratch(d_scratch, scratch_bytes, peri_cuda_round256(0),
                              &go);
  if (s != PER_OK || !go) return s;
  if (!d_val || !d_w || !d_status) return PER_ERR_NULL;
  if (!peri_cuda_aligned(d_status, sizeof *d_status) ||
      !peri_cuda_aligned(minbits, sizeof *minbits) ||
      !peri_cuda_aligned(d_val, sizeof *d_val) ||
      !peri_cuda_aligned(d_w, sizeof *d_w))
    return PER_ERR_MEMORY;
  // minbits starts above every valid pattern (all ones: a negative NaN)
  s = peri_cuda_device_status(
      cudaMemsetAsync(d_status, 0, sizeof *d_status, stream));
  if (s == PER_OK)
    s = peri_cuda_device_status(
        cudaMemsetAsync(minbits, 0xFF, sizeof *minbits, stream));
  if (s != PER_OK) return s;
  g = peri_cuda_blocks_for(B);
  PER_CUDA_LAUNCH(peri_cuda_batch_min_kernel,
                  peri_cuda_blocks_for(peri_cuda_reduce_threads(B)),
                  PERI_CUDA_BLOCK_THREADS, stream,
                  (const peri_cuda_sample_plan *)NULL, d_val, B, minbits,
                  d_status);
  PER_CUDA_LAUNCH(peri_cuda_is_weights_kernel, g, PERI_CUDA_BLOCK_THREADS,
                  stream, (const peri_cuda_sample_plan *)NULL, d_val, B, beta,
                  d_w, (const peri_cuda_bits *)minbits, d_status);
  return peri_cuda_launch_status();
}

PER_CUDA_DEF size_t per_cuda_buffer_bytes(const per_config *cfg,
                                          uint32_t max_batch) {
  size_t part[8];
  if (peri_cuda_check_buffer_config(cfg, max_batch) != PER_OK) return 0;
  return peri_cuda_buffer_parts(cfg, max_batch, part);
}

PER_CUDA_DEF per_status per_cuda_buffer_init_mem(per_cuda_buffer *b,
                                                 const per_config *cfg,
                                                 uint32_t max_batch,
                                                 void *d_mem, size_t bytes,
                                                 per_cuda_stream stream) {
  size_t part[8], need;
  unsigned char *p = (unsigned char *)d_mem;
  peri_cuda_buffer_state st;
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
  b->d_state = (p += part[5]);
  b->d_work = p + part[6];
  // everything but the min tree and the state is zero when empty
  if (s == PER_OK)
    s = peri_cuda_device_status(
        cudaMemsetAsync(d_mem, 0, need - part[7], stream));
  if (s != PER_OK) {
    memset(b, 0, sizeof *b);
    return s;
  }
  memset(&st, 0, sizeof st); // empty, as per_buffer_init leaves it
  per_rng_init(&st.rng, cfg->seed);
  st.max_leaf = cfg->alpha == 0 ? (per_real)1 : (per_real)cfg->max_priority;
  L = b->tree.leaves;
  PER_CUDA_LAUNCH(peri_cuda_set_state_kernel, peri_cuda_blocks_for(L),
                  PERI_CUDA_BLOCK_THREADS, stream,
                  (peri_cuda_buffer_state *)b->d_state, st, b->d_min_node, L);
  s = peri_cuda_launch_status();
  if (s != PER_OK) memset(b, 0, sizeof *b);
  return s;
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
  peri_cuda_pairs v = peri_cuda_pairs_none();
  uint32_t cap, keep;
  if (s != PER_OK) return s;
  if (!d_status || (n > 0 && !d_items)) return PER_ERR_NULL;
  if (n > b->max_batch) return PER_ERR_BATCH;
  if (!peri_cuda_aligned(d_status, sizeof *d_status)) return PER_ERR_MEMORY;
  s = peri_cuda_device_status(
      cudaMemsetAsync(d_status, 0, sizeof *d_status, stream));
  if (s != PER_OK || n == 0) return s;
  st = (peri_cuda_buffer_state *)b->d_state;
  w = peri_cuda_workspace_of(b);
  cap = b->cfg.capacity;
  keep = n < cap ? n : cap;
  if (d_ends)
    PER_CUDA_LAUNCH(peri_cuda_check_ends_kernel, peri_cuda_blocks_for(n),
                    PERI_CUDA_BLOCK_THREADS, stream, d_ends, n, d_status);
  PER_CUDA_LAUNCH(peri_cuda_fill_slots_kernel, peri_cuda_blocks_for(keep),
                  PERI_CUDA_BLOCK_THREADS, stream,
                  (const peri_cuda_buffer_state *)st, b->d_gen, b->d_traj,
                  b->d_ends, d_ends, w.idx, n, cap,
                  (const unsigned long long *)d_status);
  peri_cuda_copy_rows(b, b->d_items, d_items, NULL, keep, n - keep, 1, d_status,
                      stream);
  v.idx = w.idx;
  v.one = &st->max_leaf;
  peri_cuda_enqueue_update(&b->tree, b->d_min_node, v, keep, 0, w.win, NULL,
                           d_status, stream);
  PER_CUDA_LAUNCH(peri_cuda_record_add_kernel, 1u, 1u, stream, st, n, cap,
                  (const unsigned long long *)d_status);
  return peri_cuda_launch_status();
}

PER_CUDA_DEF per_status per_cuda_buffer_sample(
    const per_cuda_buffer *b, uint32_t B, const per_sample_opts *opts,
    void *d_items_out, uint64_t *d_ids, float *d_weights,
    unsigned long long *d_status, per_cuda_stream stream) {
  per_status s = peri_cuda_check_buffer(b);
  uint32_t flags = opts ? opts->flags : 0, g;
  double beta = 0;
  peri_cuda_workspace w;
  peri_cuda_buffer_state *st;
  if (s != PER_OK) return s;
  if (flags & ~(uint32_t)(PER_SAMPLE_BETA | PER_SAMPLE_TRAJECTORIES))
    return PER_ERR_ARG;
  if (flags & PER_SAMPLE_BETA) {
    beta = opts->beta;
    if (!peri_cuda_nonneg_finite(beta)) return PER_ERR_ARG;
  }
  if (B == 0 || B > b->max_batch) return PER_ERR_BATCH;
  if (!d_status) return PER_ERR_NULL;
  if (!peri_cuda_aligned(d_status, sizeof *d_status) ||
      !peri_cuda_aligned(d_ids, sizeof *d_ids) ||
      !peri_cuda_aligned(d_weights, sizeof *d_weights))
    return PER_ERR_MEMORY;
  w = peri_cuda_workspace_of(b);
  st = (peri_cuda_buffer_state *)b->d_state;
  s = peri_cuda_device_status(
      cudaMemsetAsync(d_status, 0, sizeof *d_status, stream));
  if (s == PER_OK)
    s = peri_cuda_device_status(
        cudaMemsetAsync(w.minbits, 0xFF, sizeof *w.minbits, stream));
  if (s != PER_OK) return s;
  g = peri_cuda_blocks_for(B);
  PER_CUDA_LAUNCH(
      peri_cuda_plan_sample_kernel, 1u, 1u, stream, st, b->cfg, b->cfg.capacity,
      b->tree.leaves, (const per_real *)b->tree.d_node,
      (const per_real *)b->d_min_node, (const uint32_t *)b->d_traj, B, flags,
      beta, opts ? opts->window : 0u, w.plan, w.idx, d_status);
  PER_CUDA_LAUNCH(peri_cuda_draw_batch_kernel, g, PERI_CUDA_BLOCK_THREADS,
                  stream, (const peri_cuda_sample_plan *)w.plan,
                  (const per_real *)b->tree.d_node, b->tree.leaves,
                  (const uint32_t *)b->d_gen, B, w.idx, w.val, d_ids, d_weights,
                  (const unsigned long long *)d_status);
  if (d_weights) {
    PER_CUDA_LAUNCH(peri_cuda_batch_min_kernel,
                    peri_cuda_blocks_for(peri_cuda_reduce_threads(B)),
                    PERI_CUDA_BLOCK_THREADS, stream,
                    (const peri_cuda_sample_plan *)w.plan,
                    (const per_real *)w.val, B, w.minbits, d_status);
    PER_CUDA_LAUNCH(peri_cuda_is_weights_kernel, g, PERI_CUDA_BLOCK_THREADS,
                    stream, (const peri_cuda_sample_plan *)w.plan,
                    (const per_real *)w.val, B, 0.0, d_weights,
                    (const peri_cuda_bits *)w.minbits,
                    (const unsigned long long *)d_status);
  }
  if (d_items_out)
    peri_cuda_copy_rows(b, d_items_out, b->d_items, w.idx, B, 0, 0, d_status,
                        stream);
  return peri_cuda_launch_status();
}

PER_CUDA_DEF per_status per_cuda_buffer_update(const per_cuda_buffer *b,
                                               const uint64_t *d_ids,
                                               const float *d_td, uint32_t n,
                                               uint32_t *d_stale,
                                               unsigned long long *d_status,
                                               per_cuda_stream stream) {
  per_status s = peri_cuda_check_buffer(b);
  peri_cuda_pairs v = peri_cuda_pairs_none();
  peri_cuda_buffer_state *st;
  peri_cuda_workspace w;
  uint32_t T, U;
  if (s != PER_OK) return s;
  if (!d_status || (n > 0 && (!d_ids || !d_td))) return PER_ERR_NULL;
  if (n > b->max_batch) return PER_ERR_BATCH;
  if (!peri_cuda_aligned(d_status, sizeof *d_status) ||
      !peri_cuda_aligned(d_ids, sizeof *d_ids) ||
      !peri_cuda_aligned(d_td, sizeof *d_td) ||
      !peri_cuda_aligned(d_stale, sizeof *d_stale))
    return PER_ERR_MEMORY;
  w = peri_cuda_workspace_of(b);
  st = (peri_cuda_buffer_state *)b->d_state;
  s = peri_cuda_device_status(
      cudaMemsetAsync(d_status, 0, sizeof *d_status, stream));
  if (s == PER_OK && n == 0 && d_stale)
    s = peri_cuda_device_status(
        cudaMemsetAsync(d_stale, 0, sizeof *d_stale, stream));
  if (s != PER_OK || n == 0) return s;
  v.ids = d_ids;
  v.gen = b->d_gen;
  v.td = d_td;
  v.eps = b->cfg.eps;
  v.alpha = b->cfg.alpha;
  T = peri_cuda_reduce_threads(n);
  U = peri_cuda_reduce_threads(T);
  PER_CUDA_LAUNCH(peri_cuda_pair_totals_kernel, peri_cuda_blocks_for(T),
                  PERI_CUDA_BLOCK_THREADS, stream, v,
                  (const peri_cuda_buffer_state *)st, n, b->cfg.capacity,
                  w.part, w.val, d_status);
  // the tree update takes the priorities the checks computed (one pow a
  // pair), not the TD errors
  v.td = NULL;
  v.val = w.val;
  peri_cuda_enqueue_update(&b->tree, b->d_min_node, v, n, 0, w.win, NULL,
                           d_status, stream);
  PER_CUDA_LAUNCH(peri_cuda_fold_totals_kernel, peri_cuda_blocks_for(U),
                  PERI_CUDA_BLOCK_THREADS, stream,
                  (const peri_cuda_totals *)w.part, T, w.part2,
                  (const unsigned long long *)d_status);
  PER_CUDA_LAUNCH(peri_cuda_apply_totals_kernel, 1u, 1u, stream, st,
                  (const peri_cuda_totals *)w.part2, U, d_stale,
                  (const unsigned long long *)d_status);
  return peri_cuda_launch_status();
}

// One thread: the counters out of the state.
static __global__ void peri_cuda_counters_kernel(
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
  if (s != PER_OK) return s;
  if (!d_out) return PER_ERR_NULL;
  if (!peri_cuda_aligned(d_out, 8)) return PER_ERR_MEMORY;
  PER_CUDA_LAUNCH(peri_cuda_counters_kernel, 1u, 1u, stream,
                  (const peri_cuda_buffer_state *)b->d_state, d_out);
  return peri_cuda_launch_status();
}

PER_CUDA_DEF per_status per_cuda_buffer_upload(per_cuda_buffer *b,
                                               const per_buffer *host,
                                               per_cuda_stream stream) {
  per_status s = peri_cuda_check_buffer(b);
  peri_cuda_buffer_state st;
  if (s != PER_OK) return s;
  if ((s = peri_cuda_host_match(b, host)) != PER_OK) return s;
  s = peri_cuda_buffer_copy(b, host, 1, stream);
  if (s != PER_OK) return s;
  memset(&st, 0, sizeof st);
  st.rng = host->rng;
  st.step = host->step;
  st.added = host->added;
  st.trajs = host->trajs;
  st.max_leaf = host->max_leaf;
  st.size = host->size;
  st.pos = host->pos;
  st.zero_hint = host->zero_hint;
  PER_CUDA_LAUNCH(peri_cuda_set_state_kernel, 1u, 1u, stream,
                  (peri_cuda_buffer_state *)b->d_state, st, (per_real *)NULL,
                  0u);
  s = peri_cuda_launch_status();
  if (s == PER_OK) b->cfg = host->cfg;
  return s;
}

PER_CUDA_DEF per_status per_cuda_buffer_download(const per_cuda_buffer *b,
                                                 per_buffer *host,
                                                 per_cuda_stream stream) {
  per_status s = peri_cuda_check_buffer(b);
  peri_cuda_buffer_state st;
  uint32_t i;
  if (s != PER_OK) return s;
  if ((s = peri_cuda_host_match(b, host)) != PER_OK) return s;
  s = peri_cuda_buffer_copy(b, host, 0, stream);
  if (s == PER_OK)
    s = peri_cuda_device_status(cudaMemcpyAsync(
        &st, b->d_state, sizeof st, cudaMemcpyDeviceToHost, stream));
  if (s == PER_OK) s = peri_cuda_device_status(cudaStreamSynchronize(stream));
  if (s != PER_OK) return s;
  host->cfg = b->cfg;
  host->rng = st.rng;
  host->step = st.step;
  host->added = st.added;
  host->trajs = st.trajs;
  host->max_leaf = st.max_leaf;
  host->size = st.size;
  host->pos = st.pos;
  host->zero_hint = st.zero_hint;
  if (host->swap.perm) { // as after adds only: [0, size) unswapped
    for (i = 0; i < b->cfg.capacity; ++i) host->swap.perm[i] = i;
    host->swap.n = st.size <= b->cfg.capacity ? st.size : 0;
  }
  return per_buffer_check(host);
}

} // extern "C"
