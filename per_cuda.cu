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
//     PER_CUDAI_LD / PER_CUDAI_ST (a plain access on the device), so that
//     the shim can log each thread's accesses and report any two threads of
//     one launch that conflict (a plain write and any other access, or a
//     plain read and an atomic), the races a loop would hide. Only per.h's
//     descent reads the tree directly, in the sampling kernel, which writes
//     no node.
// The shim also replaces pow by a second implementation, so that the ulp
// bounds of BIT FOR BIT (per_cuda.h) are exercised against a pow that is
// not the CPU reference's own.
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
#ifndef PER_CUDAI_LD
#define PER_CUDAI_LD(p) (*(p))
#define PER_CUDAI_ST(p, v) (*(p) = (v))
#endif

// >>internals

#define PER_CUDAI_BLOCK 256u

// The unsigned integer type with the size of per_real: atomics on a node's
// bit pattern use it.
template <size_t N> struct per_cudai_uint_of;
template <> struct per_cudai_uint_of<4> { typedef unsigned int type; };
template <> struct per_cudai_uint_of<8> { typedef unsigned long long type; };
typedef per_cudai_uint_of<sizeof(per_real)>::type per_cudai_bits;

// A status word: 0 is PER_OK; otherwise the high half holds
// 0xFFFFFFFF - pos and the low half the code, so that atomicMax keeps the
// smallest batch position: the first bad pair, which is what the CPU
// reports. Positions are < PER_CUDA_MAX_BATCH.
static __host__ __device__ inline unsigned long long per_cudai_word(
    uint32_t pos, per_status code) {
  return ((unsigned long long)(0xFFFFFFFFu - pos) << 32) |
         (unsigned long long)(uint32_t)code;
}

static __host__ __device__ inline per_cudai_bits per_cudai_to_bits(per_real v) {
  per_cudai_bits b;
  memcpy(&b, &v, sizeof b);
  return b;
}

static __host__ __device__ inline per_real per_cudai_from_bits(
    per_cudai_bits b) {
  per_real v;
  memcpy(&v, &b, sizeof v);
  return v;
}

// The storage of a node seen as its bit pattern, for integer atomics.
// (The CUDA guide's own double atomics use this cast.)
static __host__ __device__ inline per_cudai_bits *per_cudai_as_bits(
    per_real *p) {
  return reinterpret_cast<per_cudai_bits *>(p);
}

// A leaf claimed by batch position j during an update holds TAG | j: a
// negative NaN, above every valid leaf's pattern as an unsigned integer
// (valid leaves are >= +0, sign bit clear), and larger for larger j, so
// atomicMax leaves the last position: the last one wins.
#define PER_CUDAI_TAG ((per_cudai_bits)(~(per_cudai_bits)0) << 22)

// The priority, IS weight, TD status, samplable and leaves-for-capacity
// rules are per.h's own PER_HD functions (peri_priority, peri_weight,
// peri_float_status, peri_samplable, peri_leaves_for): one definition for
// the CPU and the kernels.

// The value of pair j: d_val[j], or the priority of d_td[j].
struct per_cudai_values {
  const per_real *val; // one of val / td is NULL
  const float *td;
  double eps, alpha;
};

static __host__ __device__ inline per_real per_cudai_value(
    const per_cudai_values &v, uint32_t j) {
  return v.td ? peri_priority(PER_CUDAI_LD(&v.td[j]), v.eps, v.alpha)
              : PER_CUDAI_LD(&v.val[j]);
}

// Why pair j cannot be applied, or PER_OK, in the CPU's order: for values,
// per_tree_set_batch's (the index, then the value); for TD errors,
// per_buffer_update's (the TD error, then the index; the priority of a
// finite TD error is always a valid leaf).
static __host__ __device__ inline per_status per_cudai_pair_status(
    const per_cudai_values &v, const uint32_t *idx, uint32_t j,
    uint32_t capacity) {
  per_status s;
  if (v.td) {
    s = peri_float_status(PER_CUDAI_LD(&v.td[j]));
    if (s != PER_OK) return s;
    return PER_CUDAI_LD(&idx[j]) >= capacity ? PER_ERR_INDEX : PER_OK;
  }
  if (PER_CUDAI_LD(&idx[j]) >= capacity) return PER_ERR_INDEX;
  return per_leaf_status(PER_CUDAI_LD(&v.val[j]));
}

static __device__ inline uint32_t per_cudai_thread_id(void) {
  return (uint32_t)blockIdx.x * (uint32_t)blockDim.x + (uint32_t)threadIdx.x;
}

// >>kernels: update
// Phase 1. Validate every pair; the first bad one (smallest j) ends up in
// *status. Writes: *status, by atomicMax only.
static __global__ void per_cudai_k_validate(per_cudai_values v,
                                            const uint32_t *idx, uint32_t n,
                                            uint32_t capacity,
                                            unsigned long long *status) {
  uint32_t j = per_cudai_thread_id();
  per_status s;
  if (j >= n) return;
  s = per_cudai_pair_status(v, idx, j, capacity);
  if (s != PER_OK) atomicMax(status, per_cudai_word(j, s));
}

// Phase 2. Each pair claims its leaf with atomicMax(TAG | j): afterwards the
// leaf holds TAG | (last position with that index). Only atomics touch the
// leaves in this launch.
static __global__ void per_cudai_k_claim(per_real *node, uint32_t L,
                                         const uint32_t *idx, uint32_t n,
                                         const unsigned long long *status) {
  uint32_t j = per_cudai_thread_id();
  if (j >= n || PER_CUDAI_LD(status)) return;
  atomicMax(per_cudai_as_bits(&node[L + PER_CUDAI_LD(&idx[j])]),
            PER_CUDAI_TAG | j);
}

// Phase 3, once per group of levels. The tree above the leaves is cut
// into G groups of at most PER_CUDAI_GROUP levels, bases b_0 = 0 < b_1 <
// ... < b_G = depth (b_g = g * PER_CUDAI_GROUP, the last one shorter).
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
//   - the last group (the top of the tree, at most 2^PER_CUDAI_GROUP base
//     nodes) is one thread's: it also writes its base nodes back with the
//     sign cleared (the leaves' values when G == 1);
//   - in group g, a pair that led group g - 2 (or g - 1, which implies it)
//     clears the sign of its level-b_{g-2} node, or at g = 2 writes its
//     leaf's value (-0 as +0). Nobody reads that level in group g.
// win[j] holds the last group pair j led (0: it won its leaf), or
// PER_CUDAI_LOST. Per launch, every location is written by one thread and
// read only by threads that do not write it: no race, no atomics, and the
// launch count is 2 + G with G = ceil(depth / PER_CUDAI_GROUP).
#define PER_CUDAI_GROUP 5u
#define PER_CUDAI_LOST 0xFFFFFFFFu
#define PER_CUDAI_SIGN ((per_cudai_bits)1 << (8 * sizeof(per_real) - 1))

static __host__ __device__ inline uint32_t per_cudai_groups(uint32_t depth) {
  return depth == 0 ? 1u : (depth + PER_CUDAI_GROUP - 1) / PER_CUDAI_GROUP;
}

static __host__ __device__ inline uint32_t per_cudai_base(uint32_t g,
                                                          uint32_t depth) {
  uint32_t b = g * PER_CUDAI_GROUP;
  return b < depth ? b : depth;
}

// The final value a changed node or claimed leaf stands for.
static __host__ __device__ inline per_real per_cudai_final(
    per_cudai_bits b, int leaf, const per_cudai_values &v) {
  per_real x;
  if (leaf) {
    x = per_cudai_value(v, (uint32_t)(b & ~PER_CUDAI_TAG));
    return x == 0 ? (per_real)0 : x; // -0 as +0
  }
  return per_cudai_from_bits(b & ~PER_CUDAI_SIGN);
}

// Recompute the subtree of node `top` from its base nodes `levels` below
// (at most 2^PER_CUDAI_GROUP), as described above. The base nodes are
// written back in their final form when `rewrite_base`, and `top` keeps
// its sign bit when `mark_top`.
static __device__ void per_cudai_subtree(per_real *node, uint32_t top,
                                         uint32_t levels, int leaf,
                                         const per_cudai_values &v,
                                         int rewrite_base, int mark_top) {
  per_real t[2u << PER_CUDAI_GROUP];
  unsigned char chg[2u << PER_CUDAI_GROUP];
  uint32_t w = 1u << levels, k, d, first = top << levels;
  for (k = 0; k < w; ++k) { // the base, a contiguous run of nodes
    per_cudai_bits b = per_cudai_to_bits(PER_CUDAI_LD(&node[first + k]));
    chg[w + k] = (b & PER_CUDAI_SIGN) != 0;
    t[w + k] =
        chg[w + k] ? per_cudai_final(b, leaf, v) : per_cudai_from_bits(b);
    if (rewrite_base && chg[w + k]) PER_CUDAI_ST(&node[first + k], t[w + k]);
  }
  for (d = levels; d-- > 0;) { // local level d holds local nodes [2^d, 2^d+1)
    for (k = 1u << d; k < (2u << d); ++k) {
      uint32_t at = (top << d) + (k - (1u << d)); // its node in the tree
      chg[k] = chg[2 * k] | chg[2 * k + 1];
      if (!chg[k]) {
        t[k] = PER_CUDAI_LD(&node[at]);
        continue;
      }
      per_tree_recompute(t, k);
      if (k == 1 && mark_top)
        PER_CUDAI_ST(&node[at], per_cudai_from_bits(per_cudai_to_bits(t[1]) |
                                                    PER_CUDAI_SIGN));
      else PER_CUDAI_ST(&node[at], t[k]);
    }
  }
}

static __global__ void per_cudai_k_group(per_real *node, uint32_t L,
                                         uint32_t depth, uint32_t g,
                                         per_cudai_values v,
                                         const uint32_t *idx, uint32_t n,
                                         const unsigned long long *status,
                                         uint32_t *win) {
  uint32_t j = per_cudai_thread_id(), G = per_cudai_groups(depth), led;
  uint32_t leaf, lo, hi, A, m, first;
  if (j >= n || PER_CUDAI_LD(status)) return;
  leaf = L + PER_CUDAI_LD(&idx[j]);
  if (g == G) { // the top: one thread
    if (j == 0)
      per_cudai_subtree(node, 1, depth - per_cudai_base(G - 1, depth), G == 1,
                        v, 1, 0);
    if (G == 1) return;
  }
  if (g == 1) {
    led = per_cudai_to_bits(PER_CUDAI_LD(&node[leaf])) == (PER_CUDAI_TAG | j)
              ? 0u
              : PER_CUDAI_LOST;
    PER_CUDAI_ST(&win[j], led);
  } else {
    led = PER_CUDAI_LD(&win[j]);
  }
  if (led == PER_CUDAI_LOST) return;
  if (g >= 2 && led + 2 >= g) { // led group g - 2 (or g - 1): clean up
    uint32_t c = leaf >> per_cudai_base(g - 2, depth);
    per_cudai_bits b = per_cudai_to_bits(PER_CUDAI_LD(&node[c]));
    PER_CUDAI_ST(&node[c], per_cudai_final(b, g == 2, v));
  }
  if (g == G || led + 1 != g) return; // not alive at level b_{g-1}
  lo = per_cudai_base(g - 1, depth);
  hi = per_cudai_base(g, depth);
  A = leaf >> hi;
  m = leaf >> lo;
  for (first = A << (hi - lo); first < m; ++first) // a changed node left of m
    if (per_cudai_to_bits(PER_CUDAI_LD(&node[first])) & PER_CUDAI_SIGN) return;
  per_cudai_subtree(node, A, hi - lo, lo == 0, v, 0, 1);
  PER_CUDAI_ST(&win[j], g);
}

// >>kernels: sample
// Stratum i of a B-batch, exactly per_tree_sample_strata's arithmetic. On an
// unsamplable root every thread writes the same status and nothing else.
static __global__ void per_cudai_k_sample(const per_real *node, uint32_t L,
                                          uint64_t seed, uint64_t counter,
                                          const unsigned long long *d_counter,
                                          uint32_t B, uint32_t *idx,
                                          per_real *val,
                                          unsigned long long *status) {
  uint32_t i = per_cudai_thread_id(), leaf;
  per_real total, seg, u;
  per_status s;
  if (i >= B) return;
  total = PER_CUDAI_LD(&node[1]);
  s = peri_samplable(total);
  if (s != PER_OK) { // every thread sees it; the first one says it
    if (i == 0) PER_CUDAI_ST(status, per_cudai_word(0, s));
    return;
  }
  if (d_counter) counter = PER_CUDAI_LD(d_counter);
  seg = total / (per_real)B;
  u = per_tree_stratum_u(seed, counter, i, seg);
  leaf = per_tree_descend(node, L, u);
  PER_CUDAI_ST(&idx[i], leaf);
  if (val) PER_CUDAI_ST(&val[i], PER_CUDAI_LD(&node[L + leaf]));
}

// One thread: on success the device counter moves on by B.
static __global__ void per_cudai_k_advance(unsigned long long *d_counter,
                                           uint32_t B,
                                           const unsigned long long *status) {
  if (per_cudai_thread_id() != 0 || PER_CUDAI_LD(status)) return;
  PER_CUDAI_ST(d_counter, PER_CUDAI_LD(d_counter) + B);
}

// >>kernels: IS weights
// Validate every value (> 0 and a valid leaf; the first bad one wins, as in
// an update) and find the batch minimum: positive reals order like their
// bit patterns, so an integer atomicMin on the patterns finds it exactly,
// whatever the order of the threads. Each thread takes the values i = t,
// t + T, t + 2T, ... (T threads, PER_CUDAI_W_EACH values each) and does at
// most one atomicMin and one atomicMax: B / PER_CUDAI_W_EACH atomics on the
// minimum's address instead of B.
#define PER_CUDAI_W_EACH 32u

static __host__ __device__ inline uint32_t per_cudai_w_threads(uint32_t B) {
  return B / PER_CUDAI_W_EACH + (B % PER_CUDAI_W_EACH != 0);
}

static __global__ void per_cudai_k_w_min(const per_real *val, uint32_t B,
                                         per_cudai_bits *minbits,
                                         unsigned long long *status) {
  uint32_t t = per_cudai_thread_id(), T = per_cudai_w_threads(B), i;
  per_cudai_bits m = ~(per_cudai_bits)0; // above every valid pattern
  unsigned long long bad = 0;
  if (t >= T) return;
  for (i = t; i < B; i += T) {
    per_real x = PER_CUDAI_LD(&val[i]);
    per_status s = per_leaf_status(x);
    if (s == PER_OK && !(x > 0)) s = PER_ERR_ARG;
    if (s != PER_OK) {
      if (!bad) bad = per_cudai_word(i, s); // i grows: the first is kept
    } else if (per_cudai_to_bits(x) < m) {
      m = per_cudai_to_bits(x);
    }
    if (B - i <= T) break; // i + T would be past B (or wrap)
  }
  if (bad) atomicMax(status, bad);
  else atomicMin(minbits, m);
}

// w[i] = peri_weight(val[i], min, beta); thread i alone writes w[i].
static __global__ void per_cudai_k_w_apply(const per_real *val, uint32_t B,
                                           double beta, float *w,
                                           const per_cudai_bits *minbits,
                                           const unsigned long long *status) {
  uint32_t i = per_cudai_thread_id();
  if (i >= B || PER_CUDAI_LD(status)) return;
  PER_CUDAI_ST(&w[i],
               peri_weight(PER_CUDAI_LD(&val[i]),
                           per_cudai_from_bits(PER_CUDAI_LD(minbits)), beta));
}

// >>launchers
// Blocks for n threads; no overflow for n up to UINT32_MAX (a sample's B).
static uint32_t per_cudai_grid(uint32_t n) {
  return n / PER_CUDAI_BLOCK + (n % PER_CUDAI_BLOCK != 0);
}

// The cudaError_t behind the last PER_ERR_DEVICE of this thread.
static thread_local int per_cudai_last_error = 0;

// PER_OK for cudaSuccess; otherwise keep e for per_cuda_last_error and
// return PER_ERR_DEVICE.
static per_status per_cudai_device(cudaError_t e) {
  if (e == cudaSuccess) return PER_OK;
  per_cudai_last_error = (int)e;
  return PER_ERR_DEVICE;
}

static per_status per_cudai_launched(void) {
  return per_cudai_device(cudaPeekAtLastError());
}

// p is NULL or aligned to `align` bytes: a misaligned atomic or vector
// access is a sticky error of the whole CUDA context, so it is refused
// on the host first.
static int per_cudai_aligned(const void *p, size_t align) {
  return ((uintptr_t)p % align) == 0;
}

static per_status per_cudai_check_tree(const per_cuda_tree *t) {
  uint32_t d, L;
  if (!t || !t->d_node) return PER_ERR_NULL;
  if (t->capacity == 0 || t->capacity > PER_MAX_CAPACITY)
    return PER_ERR_CAPACITY;
  L = peri_leaves_for(t->capacity, &d);
  if (t->leaves != L || t->depth != d) return PER_ERR_CAPACITY;
  return PER_OK;
}

static size_t per_cudai_round(size_t bytes) {
  size_t r = (bytes + 255u) & ~(size_t)255u;
  return r ? r : 256u;
}

// The two-phase scratch protocol: PER_OK with *go = 0 for a size query.
static per_status per_cudai_scratch(void *d_scratch, size_t *scratch_bytes,
                                    size_t need, int *go) {
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

static per_status per_cudai_update(const per_cuda_tree *t,
                                   const uint32_t *d_idx, per_cudai_values v,
                                   uint32_t n, void *d_scratch,
                                   size_t *scratch_bytes,
                                   unsigned long long *d_status,
                                   per_cuda_stream stream) {
  per_status s;
  uint32_t *win = (uint32_t *)d_scratch, g, lv;
  int go;
  if ((s = per_cudai_check_tree(t)) != PER_OK) return s;
  if (n > PER_CUDA_MAX_BATCH) return PER_ERR_BATCH;
  s = per_cudai_scratch(d_scratch, scratch_bytes,
                        per_cudai_round((size_t)n * sizeof(uint32_t)), &go);
  if (s != PER_OK || !go) return s;
  if (!d_status) return PER_ERR_NULL;
  if (n > 0 && (!d_idx || (!v.val && !v.td))) return PER_ERR_NULL;
  if (!per_cudai_aligned(d_status, sizeof *d_status) ||
      !per_cudai_aligned(d_scratch, sizeof(uint32_t)) ||
      !per_cudai_aligned(d_idx, sizeof *d_idx) ||
      !per_cudai_aligned(v.val, sizeof *v.val) ||
      !per_cudai_aligned(v.td, sizeof *v.td))
    return PER_ERR_MEMORY;
  s = per_cudai_device(cudaMemsetAsync(d_status, 0, sizeof *d_status, stream));
  if (s != PER_OK || n == 0) return s;
  g = per_cudai_grid(n);
  PER_CUDA_LAUNCH(per_cudai_k_validate, g, PER_CUDAI_BLOCK, stream, v, d_idx, n,
                  t->capacity, d_status);
  PER_CUDA_LAUNCH(per_cudai_k_claim, g, PER_CUDAI_BLOCK, stream, t->d_node,
                  t->leaves, d_idx, n, d_status);
  for (lv = 1; lv <= per_cudai_groups(t->depth); ++lv)
    PER_CUDA_LAUNCH(per_cudai_k_group, g, PER_CUDAI_BLOCK, stream, t->d_node,
                    t->leaves, t->depth, lv, v, d_idx, n, d_status, win);
  return per_cudai_launched();
}

// >>api
extern "C" {

PER_CUDA_DEF size_t per_cuda_real_bytes(void) { return sizeof(per_real); }

PER_CUDA_DEF int per_cuda_last_error(void) { return per_cudai_last_error; }

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
  per_status s = per_cudai_check_tree(t);
  if (s != PER_OK) return s;
  return per_cudai_device(
      cudaMemsetAsync(t->d_node, 0, per_tree_bytes(t->capacity), stream));
}

static per_status per_cudai_copy(const per_cuda_tree *t, const per_tree *host,
                                 int upload, per_cuda_stream stream) {
  per_status s = per_cudai_check_tree(t);
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
  return per_cudai_device(e);
}

PER_CUDA_DEF per_status per_cuda_tree_upload(const per_cuda_tree *t,
                                             const per_tree *host,
                                             per_cuda_stream stream) {
  return per_cudai_copy(t, host, 1, stream);
}

PER_CUDA_DEF per_status per_cuda_tree_download(const per_cuda_tree *t,
                                               per_tree *host,
                                               per_cuda_stream stream) {
  return per_cudai_copy(t, host, 0, stream);
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
  if (!per_cudai_aligned(d_status, sizeof *d_status)) return PER_ERR_MEMORY;
  return per_cudai_device(
      cudaMemsetAsync(d_status, 0, sizeof *d_status, stream));
}

PER_CUDA_DEF per_status per_cuda_tree_set_batch(
    const per_cuda_tree *t, const uint32_t *d_idx, const per_real *d_val,
    uint32_t n, void *d_scratch, size_t *scratch_bytes,
    unsigned long long *d_status, per_cuda_stream stream) {
  per_cudai_values v;
  v.val = d_val;
  v.td = NULL;
  v.eps = 0;
  v.alpha = 0;
  return per_cudai_update(t, d_idx, v, n, d_scratch, scratch_bytes, d_status,
                          stream);
}

// x is finite and >= 0 (read from the bits: immune to -ffast-math).
static int per_cudai_nonneg_finite(double x) {
  return peri_dfinite(x) && x >= 0;
}

PER_CUDA_DEF per_status
per_cuda_tree_set_td(const per_cuda_tree *t, const uint32_t *d_idx,
                     const float *d_td, uint32_t n, double eps, double alpha,
                     void *d_scratch, size_t *scratch_bytes,
                     unsigned long long *d_status, per_cuda_stream stream) {
  per_cudai_values v;
  if (!per_cudai_nonneg_finite(eps) || !per_cudai_nonneg_finite(alpha))
    return PER_ERR_ARG;
  v.val = NULL;
  v.td = d_td;
  v.eps = eps;
  v.alpha = alpha;
  return per_cudai_update(t, d_idx, v, n, d_scratch, scratch_bytes, d_status,
                          stream);
}

PER_CUDA_DEF per_status per_cuda_tree_sample(
    const per_cuda_tree *t, uint64_t seed, uint64_t counter,
    unsigned long long *d_counter, uint32_t B, uint32_t *d_idx, per_real *d_val,
    unsigned long long *d_status, per_cuda_stream stream) {
  per_status s = per_cudai_check_tree(t);
  if (s != PER_OK) return s;
  if (!d_idx || !d_status) return PER_ERR_NULL;
  if (B == 0) return PER_ERR_BATCH;
  if (!per_cudai_aligned(d_status, sizeof *d_status) ||
      !per_cudai_aligned(d_counter, sizeof *d_counter) ||
      !per_cudai_aligned(d_idx, sizeof *d_idx) ||
      !per_cudai_aligned(d_val, sizeof *d_val))
    return PER_ERR_MEMORY;
  s = per_cudai_device(cudaMemsetAsync(d_status, 0, sizeof *d_status, stream));
  if (s != PER_OK) return s;
  PER_CUDA_LAUNCH(per_cudai_k_sample, per_cudai_grid(B), PER_CUDAI_BLOCK,
                  stream, t->d_node, t->leaves, seed, counter, d_counter, B,
                  d_idx, d_val, d_status);
  if (d_counter)
    PER_CUDA_LAUNCH(per_cudai_k_advance, 1u, 1u, stream, d_counter, B,
                    d_status);
  return per_cudai_launched();
}

PER_CUDA_DEF per_status per_cuda_is_weights(const per_real *d_val, uint32_t B,
                                            double beta, float *d_w,
                                            void *d_scratch,
                                            size_t *scratch_bytes,
                                            unsigned long long *d_status,
                                            per_cuda_stream stream) {
  per_cudai_bits *minbits = (per_cudai_bits *)d_scratch;
  per_status s;
  uint32_t g;
  int go;
  if (B == 0 || B > PER_CUDA_MAX_BATCH) return PER_ERR_BATCH;
  if (!per_cudai_nonneg_finite(beta)) return PER_ERR_ARG;
  s = per_cudai_scratch(d_scratch, scratch_bytes, per_cudai_round(0), &go);
  if (s != PER_OK || !go) return s;
  if (!d_val || !d_w || !d_status) return PER_ERR_NULL;
  if (!per_cudai_aligned(d_status, sizeof *d_status) ||
      !per_cudai_aligned(minbits, sizeof *minbits) ||
      !per_cudai_aligned(d_val, sizeof *d_val) ||
      !per_cudai_aligned(d_w, sizeof *d_w))
    return PER_ERR_MEMORY;
  // minbits starts above every valid pattern (all ones: a negative NaN)
  s = per_cudai_device(cudaMemsetAsync(d_status, 0, sizeof *d_status, stream));
  if (s == PER_OK)
    s = per_cudai_device(
        cudaMemsetAsync(minbits, 0xFF, sizeof *minbits, stream));
  if (s != PER_OK) return s;
  g = per_cudai_grid(B);
  PER_CUDA_LAUNCH(per_cudai_k_w_min, per_cudai_grid(per_cudai_w_threads(B)),
                  PER_CUDAI_BLOCK, stream, d_val, B, minbits, d_status);
  PER_CUDA_LAUNCH(per_cudai_k_w_apply, g, PER_CUDAI_BLOCK, stream, d_val, B,
                  beta, d_w, (const per_cudai_bits *)minbits, d_status);
  return per_cudai_launched();
}

} // extern "C"
