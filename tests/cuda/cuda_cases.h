// cuda_cases.h - the GPU-vs-CPU comparisons, shared by the host build of the
// kernels (test_cuda_host.cpp, through cuda_host_shim.h) and the GPU test
// binary (test_cuda_gpu.cu, on a real device). Every case runs the same
// operation with per.h on the CPU and with per_cuda on the "device", and
// compares trees byte for byte and indices exactly, printing the first
// difference.
//
// Needs before it: per.h with its implementation, per_cuda.h, the CUDA
// runtime names (real or shimmed) and t.h.
#ifndef PER_CUDA_CASES_H
#define PER_CUDA_CASES_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cudaStream_t cc_stream = 0;

// Evidence: how much was compared, printed by cc_run_all.
static unsigned long long cc_trees, cc_nodes, cc_draws;

// >>utilities
static void *cc_dmalloc(size_t bytes) {
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
  CHECK_MSG(e == cudaSuccess, "cudaMalloc(%zu): %s", bytes,
            cudaGetErrorString(e));
  return e == cudaSuccess ? p : NULL;
}

static void cc_h2d(void *d, const void *h, size_t bytes) {
  cudaError_t e = cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
  CHECK_MSG(e == cudaSuccess, "cudaMemcpy H2D: %s", cudaGetErrorString(e));
}

static void cc_d2h(void *h, const void *d, size_t bytes) {
  cudaError_t e = cudaStreamSynchronize(cc_stream);
  CHECK_MSG(e == cudaSuccess, "cudaStreamSynchronize: %s",
            cudaGetErrorString(e));
  e = cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
  CHECK_MSG(e == cudaSuccess, "cudaMemcpy D2H: %s", cudaGetErrorString(e));
}

static unsigned long long cc_status_word(const unsigned long long *d_status) {
  unsigned long long w = 0;
  cc_d2h(&w, d_status, sizeof w);
  return w;
}

static per_real cc_bits_real(uint64_t b) {
  per_real v;
  if (sizeof(per_real) == sizeof(float)) {
    uint32_t b32 = (uint32_t)b;
    memcpy(&v, &b32, sizeof v);
  } else {
    memcpy(&v, &b, sizeof v);
  }
  return v;
}

// Distance in ulps (representable values between a and b; 0 when bitwise
// equal or both zero); huge when either is NaN.
static uint64_t cc_ulps_f(float a, float b) {
  int32_t x, y;
  int64_t ia, ib;
  if (a != a || b != b) return UINT64_MAX;
  memcpy(&x, &a, 4);
  memcpy(&y, &b, 4);
  ia = x < 0 ? (int64_t)INT32_MIN - x : x;
  ib = y < 0 ? (int64_t)INT32_MIN - y : y;
  return ia > ib ? (uint64_t)(ia - ib) : (uint64_t)(ib - ia);
}

static uint64_t cc_ulps_d(double a, double b) {
  int64_t ia, ib;
  if (a != a || b != b) return UINT64_MAX;
  memcpy(&ia, &a, 8);
  memcpy(&ib, &b, 8);
  ia = ia < 0 ? INT64_MIN - ia : ia;
  ib = ib < 0 ? INT64_MIN - ib : ib;
  return ia > ib ? (uint64_t)ia - (uint64_t)ib : (uint64_t)ib - (uint64_t)ia;
}

static uint64_t cc_ulps(per_real a, per_real b) {
  return sizeof(per_real) == sizeof(float) ? cc_ulps_f((float)a, (float)b)
                                           : cc_ulps_d((double)a, (double)b);
}

// The CPU's side of each comparison is per.h's own rule (peri_priority,
// peri_weight: the functions the kernels run, per.h's pow included) called
// on the host: the device must give the same bits. The pow's accuracy is
// tests/test_pow.c's.

// Compare a CPU tree with a copy of the device's nodes; on a difference
// print the first differing node, both values and how many differ.
static void cc_same_tree(const char *what, const per_tree *cpu,
                         const per_real *dev) {
  size_t n = (size_t)2 * cpu->leaves, k, diff = 0, first = 0;
  ++cc_trees;
  cc_nodes += n;
  for (k = 0; k < n; ++k)
    if (memcmp(&cpu->node[k], &dev[k], sizeof(per_real)) != 0) {
      if (diff++ == 0) first = k;
    }
  CHECK_MSG(diff == 0,
            "%s (capacity %u): %zu of %zu nodes differ, first node %zu: cpu "
            "%.17g device %.17g",
            what, cpu->capacity, diff, n, first,
            diff ? (double)cpu->node[first] : 0.0,
            diff ? (double)dev[first] : 0.0);
}

// A random valid leaf value: zeros (both signs), tiny, huge, the maximum,
// and values spread over many binades.
static per_real cc_value(per_rng *r) {
  uint32_t k = per_rng_below(r, 20);
  per_real u = per_rng_real(r);
  switch (k) {
    case 0: return (per_real)0;
    case 1: return -(per_real)0;
    case 2: return cc_bits_real(1); // the smallest subnormal
    case 3: return PER_LEAF_MAX;
    case 4: return PER_LEAF_MAX * u;
    case 5: return (per_real)1;
    default: break;
  }
  return u * (per_real)ldexp(1.0, (int)per_rng_below(r, 40) - 20);
}

struct cc_dev_tree {
  per_cuda_tree t;
  per_real *host; // a host buffer of 2L values for downloads
};

static int cc_dev_tree_make(cc_dev_tree *d, uint32_t capacity) {
  size_t bytes = per_cuda_tree_bytes(capacity);
  void *mem = cc_dmalloc(bytes);
  d->host = (per_real *)malloc(bytes);
  CHECK(d->host != NULL);
  if (!mem || !d->host) return 0;
  CHECK_OK(per_cuda_tree_init_mem(&d->t, capacity, mem, bytes));
  return 1;
}

static void cc_dev_tree_free(cc_dev_tree *d) {
  cudaFree(d->t.d_node);
  free(d->host);
}

static const per_real *cc_download(cc_dev_tree *d) {
  cc_d2h(d->host, d->t.d_node, per_cuda_tree_bytes(d->t.capacity));
  return d->host;
}

static const uint32_t cc_caps[] = {
    1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 1000, 1024, 1025, 65536, 65537, 65539};
#define CC_NCAPS (sizeof cc_caps / sizeof cc_caps[0])

// >>case: plain API (no device work)
static void cc_case_api(void) {
  per_cuda_tree t;
  static per_real fake[8];
  uint32_t pos = 7;
  uint32_t caps[] = {0, 1, 2, 3, 1000, PER_MAX_CAPACITY, PER_MAX_CAPACITY + 1u};
  size_t i;
  CHECK_EQ_U(per_cuda_real_bytes(), sizeof(per_real));
  for (i = 0; i < sizeof caps / sizeof caps[0]; ++i)
    CHECK_EQ_U(per_cuda_tree_bytes(caps[i]), per_tree_bytes(caps[i]));
  CHECK_STATUS(per_cuda_tree_init_mem(NULL, 3, fake, sizeof fake),
               PER_ERR_NULL);
  CHECK_STATUS(per_cuda_tree_init_mem(&t, 3, NULL, sizeof fake), PER_ERR_NULL);
  CHECK_STATUS(per_cuda_tree_init_mem(&t, 0, fake, sizeof fake),
               PER_ERR_CAPACITY);
  CHECK_STATUS(per_cuda_tree_init_mem(&t, 5, fake, sizeof fake),
               PER_ERR_MEMORY);
  CHECK_STATUS(per_cuda_tree_init_mem(&t, 3, (char *)fake + 1, sizeof fake - 1),
               PER_ERR_MEMORY);
  CHECK_OK(per_cuda_tree_init_mem(&t, 3, fake, sizeof fake));
  CHECK(t.capacity == 3 && t.leaves == 4 && t.depth == 2 && t.d_node == fake);
  CHECK_OK(per_cuda_tree_init_mem(&t, 1, fake, sizeof fake));
  CHECK(t.leaves == 1 && t.depth == 0);
  CHECK_STATUS(per_cuda_status_decode(0, &pos), PER_OK);
  CHECK_EQ_U(pos, 0);
  CHECK_STATUS(per_cuda_status_decode(0xFFFFFFFF00000000ull, NULL),
               PER_ERR_CORRUPT);
  CHECK_STATUS(per_cuda_status_decode(0xFFFFFFFF00000000ull | 9999u, NULL),
               PER_ERR_CORRUPT);
  // a descriptor that does not describe a tree
  t.leaves = 8;
  CHECK_STATUS(per_cuda_tree_clear(&t, cc_stream), PER_ERR_CAPACITY);
  CHECK_STATUS(per_cuda_tree_clear(NULL, cc_stream), PER_ERR_NULL);
  CHECK_STATUS(per_cuda_status_clear(NULL, cc_stream), PER_ERR_NULL);
}

// >>case: per_cuda_status_keep keeps the first failure of many calls
static void cc_case_status_keep(void) {
  unsigned long long *d = (unsigned long long *)cc_dmalloc(4 * 8);
  unsigned long long h[4], z[4] = {0, 0, 0, 0};
  uint32_t pos = 7;
  if (!d) return;
  cc_h2d(d, z, sizeof z);
  // d[0..1] keeps, d[2] is a call's word
  CHECK_OK(per_cuda_status_keep(d, d + 2, 5, cc_stream)); // 0: nothing kept
  cc_d2h(h, d, sizeof h);
  CHECK(h[0] == 0 && h[1] == 0);
  h[2] = ((unsigned long long)(0xFFFFFFFFu - 3u) << 32) | (unsigned)PER_ERR_NAN;
  cc_h2d(d + 2, &h[2], 8);
  CHECK_OK(per_cuda_status_keep(d, d + 2, 6, cc_stream)); // kept, tag 6
  h[3] = (unsigned)PER_ERR_EMPTY;
  cc_h2d(d + 3, &h[3], 8);
  CHECK_OK(per_cuda_status_keep(d, d + 3, 7, cc_stream)); // not the first
  cc_d2h(h, d, sizeof h);
  CHECK_STATUS(per_cuda_status_decode(h[0], &pos), PER_ERR_NAN);
  CHECK_EQ_U(pos, 3);
  CHECK_EQ_U(h[1], 6);
  CHECK_STATUS(per_cuda_status_keep(NULL, d + 2, 1, cc_stream), PER_ERR_NULL);
  CHECK_STATUS(per_cuda_status_keep(d, NULL, 1, cc_stream), PER_ERR_NULL);
  CHECK_STATUS(per_cuda_status_keep(d, d + 1, 1, cc_stream), PER_ERR_ARG);
  CHECK_STATUS(per_cuda_status_keep(d, d, 1, cc_stream), PER_ERR_ARG);
  CHECK_STATUS(
      per_cuda_status_keep((unsigned long long *)(void *)((char *)d + 4), d + 2,
                           1, cc_stream),
      PER_ERR_MEMORY);
  cudaFree(d);
}

static size_t cc_round256(size_t n) { return (n + 255) / 256 * 256; }

// >>case: two-phase scratch and host-side argument errors
static void cc_case_scratch(void) {
  cc_dev_tree d;
  per_tree cpu;
  unsigned long long *d_status = (unsigned long long *)cc_dmalloc(8);
  unsigned long long sentinel = 0x1234567ull;
  uint32_t *d_idx = (uint32_t *)cc_dmalloc(4 * 8);
  per_real *d_val = (per_real *)cc_dmalloc(sizeof(per_real) * 8);
  float *d_td = (float *)cc_dmalloc(sizeof(float) * 8);
  float *d_w = (float *)cc_dmalloc(sizeof(float) * 8);
  void *d_scratch = cc_dmalloc(4096);
  uint32_t ns[] = {0, 1, 64, 65, 1000, PER_CUDA_MAX_BATCH};
  // The layout (per_cuda.cu): 40-byte reduction records for the grid and
  // one more, the group counters of the tree (100 leaves: L = 128, levels
  // 5 and 7: 4 + 1), a flag and an old value per pair, and for set_td the
  // priorities; each part rounded up to 256 bytes.
  size_t want[6], want_prio[6];
  size_t bytes, i;
  uint32_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  per_real val[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  float td[8] = {1, 2, 3, 4, 5, 6, 7, 8}, wsentinel[8];
  if (!d_status || !d_idx || !d_val || !d_td || !d_w || !d_scratch) return;
  for (i = 0; i < 8; ++i) wsentinel[i] = -3;
  if (!cc_dev_tree_make(&d, 100)) return;
  if (per_tree_init(&cpu, 100, NULL) != PER_OK) return;
  CHECK_OK(per_cuda_tree_clear(&d.t, cc_stream));
  cc_h2d(d_status, &sentinel, 8);
  cc_h2d(d_idx, idx, sizeof idx);
  cc_h2d(d_val, val, sizeof val);
  cc_h2d(d_td, td, sizeof td);
  cc_h2d(d_w, wsentinel, sizeof wsentinel);
  for (i = 0; i < sizeof ns / sizeof ns[0]; ++i) {
    size_t n = ns[i] ? ns[i] : 1, blocks = (n + 255) / 256;
    want[i] = cc_round256((1 + blocks) * 40) + cc_round256(5 * 4) +
              cc_round256(4 * n) + cc_round256(sizeof(per_real) * n);
    want_prio[i] = cc_round256(sizeof(per_real) * n);
  }
  for (i = 0; i < sizeof ns / sizeof ns[0]; ++i) {
    bytes = 1;
    CHECK_OK(per_cuda_tree_set_batch(&d.t, d_idx, d_val, ns[i], NULL, &bytes,
                                     d_status, cc_stream));
    CHECK_EQ_U(bytes, want[i]);
    bytes = 1;
    CHECK_OK(per_cuda_tree_set_td(&d.t, d_idx, d_td, ns[i], 0.01, 0.5, NULL,
                                  &bytes, d_status, cc_stream));
    CHECK_EQ_U(bytes, want[i] + want_prio[i]);
    bytes = 1; // the size depends on n and the tree, never on the pointers
    CHECK_OK(per_cuda_tree_set_td(&d.t, NULL, NULL, ns[i], 0.01, 0.5, NULL,
                                  &bytes, NULL, cc_stream));
    CHECK_EQ_U(bytes, want[i] + want_prio[i]);
  }
  bytes = 0;
  CHECK_OK(per_cuda_is_weights(d_val, 8, 0.4, d_w, NULL, &bytes, d_status,
                               cc_stream));
  CHECK_EQ_U(bytes, 2 * 40); // the grid's record and its block's
  // a query did nothing: the tree is still zero and the word untouched
  cc_same_tree("after size queries", &cpu, cc_download(&d));
  CHECK_EQ_U(cc_status_word(d_status), sentinel);
  // host-side errors: nothing enqueued
  bytes = 255;
  CHECK_STATUS(per_cuda_tree_set_batch(&d.t, d_idx, d_val, 8, d_scratch, &bytes,
                                       d_status, cc_stream),
               PER_ERR_MEMORY);
  bytes = 4096;
  CHECK_STATUS(per_cuda_tree_set_batch(&d.t, d_idx, d_val, 8, d_scratch, NULL,
                                       d_status, cc_stream),
               PER_ERR_NULL);
  CHECK_STATUS(per_cuda_tree_set_batch(&d.t, d_idx, d_val,
                                       PER_CUDA_MAX_BATCH + 1, d_scratch,
                                       &bytes, d_status, cc_stream),
               PER_ERR_BATCH);
  CHECK_STATUS(per_cuda_tree_set_batch(&d.t, NULL, d_val, 8, d_scratch, &bytes,
                                       d_status, cc_stream),
               PER_ERR_NULL);
  CHECK_STATUS(per_cuda_tree_set_batch(&d.t, d_idx, NULL, 8, d_scratch, &bytes,
                                       d_status, cc_stream),
               PER_ERR_NULL);
  CHECK_STATUS(per_cuda_tree_set_batch(&d.t, d_idx, d_val, 8, d_scratch, &bytes,
                                       NULL, cc_stream),
               PER_ERR_NULL);
  CHECK_STATUS(per_cuda_tree_set_batch(NULL, d_idx, d_val, 8, d_scratch, &bytes,
                                       d_status, cc_stream),
               PER_ERR_NULL);
  CHECK_STATUS(per_cuda_tree_set_td(&d.t, d_idx, d_td, 8, NAN, 0.5, d_scratch,
                                    &bytes, d_status, cc_stream),
               PER_ERR_ARG);
  CHECK_STATUS(per_cuda_tree_set_td(&d.t, d_idx, d_td, 8, -1e-6, 0.5, d_scratch,
                                    &bytes, d_status, cc_stream),
               PER_ERR_ARG);
  CHECK_STATUS(per_cuda_tree_set_td(&d.t, d_idx, d_td, 8, 0.1, -0.5, d_scratch,
                                    &bytes, d_status, cc_stream),
               PER_ERR_ARG);
  CHECK_STATUS(per_cuda_tree_set_td(&d.t, d_idx, d_td, 8, 0.1, INFINITY,
                                    d_scratch, &bytes, d_status, cc_stream),
               PER_ERR_ARG);
  CHECK_STATUS(per_cuda_tree_set_td(&d.t, d_idx, NULL, 8, 0.1, 0.5, d_scratch,
                                    &bytes, d_status, cc_stream),
               PER_ERR_NULL);
  CHECK_STATUS(per_cuda_tree_sample(&d.t, 1, 0, NULL, 0, d_idx, d_val, d_status,
                                    cc_stream),
               PER_ERR_BATCH);
  CHECK_STATUS(per_cuda_tree_sample(&d.t, 1, 0, NULL, 8, NULL, d_val, d_status,
                                    cc_stream),
               PER_ERR_NULL);
  CHECK_STATUS(
      per_cuda_tree_sample(&d.t, 1, 0, NULL, 8, d_idx, d_val, NULL, cc_stream),
      PER_ERR_NULL);
  CHECK_STATUS(per_cuda_is_weights(d_val, 8, -0.5, d_w, d_scratch, &bytes,
                                   d_status, cc_stream),
               PER_ERR_ARG);
  CHECK_STATUS(per_cuda_is_weights(d_val, 8, NAN, d_w, d_scratch, &bytes,
                                   d_status, cc_stream),
               PER_ERR_ARG);
  CHECK_STATUS(per_cuda_is_weights(d_val, 8, INFINITY, d_w, d_scratch, &bytes,
                                   d_status, cc_stream),
               PER_ERR_ARG);
  CHECK_STATUS(per_cuda_is_weights(d_val, 0, 0.4, d_w, d_scratch, &bytes,
                                   d_status, cc_stream),
               PER_ERR_BATCH);
  CHECK_STATUS(per_cuda_is_weights(d_val, PER_CUDA_MAX_BATCH + 1, 0.4, d_w,
                                   d_scratch, &bytes, d_status, cc_stream),
               PER_ERR_BATCH);
  CHECK_STATUS(per_cuda_is_weights(NULL, 8, 0.4, d_w, d_scratch, &bytes,
                                   d_status, cc_stream),
               PER_ERR_NULL);
  CHECK_STATUS(per_cuda_is_weights(d_val, 8, 0.4, NULL, d_scratch, &bytes,
                                   d_status, cc_stream),
               PER_ERR_NULL);
  CHECK_STATUS(per_cuda_is_weights(d_val, 8, 0.4, d_w, d_scratch, NULL,
                                   d_status, cc_stream),
               PER_ERR_NULL);
  bytes = 79; // the two 40-byte records need 80
  CHECK_STATUS(per_cuda_is_weights(d_val, 8, 0.4, d_w, d_scratch, &bytes,
                                   d_status, cc_stream),
               PER_ERR_MEMORY);
  {
    // a misaligned device pointer is refused on the host: on a GPU it
    // would be a sticky error of the whole context
    unsigned long long *st4 = (unsigned long long *)((char *)d_status + 4);
    uint32_t *idx2 = (uint32_t *)((char *)d_idx + 2);
    per_real *val2 = (per_real *)((char *)d_val + 2);
    float *td2 = (float *)((char *)d_td + 2), *w2 = (float *)((char *)d_w + 2);
    void *scr2 = (char *)d_scratch + 2;
    bytes = 4096;
    CHECK_STATUS(per_cuda_status_clear(st4, cc_stream), PER_ERR_MEMORY);
    CHECK_STATUS(per_cuda_tree_set_batch(&d.t, d_idx, d_val, 8, d_scratch,
                                         &bytes, st4, cc_stream),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_cuda_tree_set_batch(&d.t, idx2, d_val, 8, d_scratch,
                                         &bytes, d_status, cc_stream),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_cuda_tree_set_batch(&d.t, d_idx, val2, 8, d_scratch,
                                         &bytes, d_status, cc_stream),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_cuda_tree_set_batch(&d.t, d_idx, d_val, 8, scr2, &bytes,
                                         d_status, cc_stream),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_cuda_tree_set_td(&d.t, d_idx, td2, 8, 0.1, 0.5, d_scratch,
                                      &bytes, d_status, cc_stream),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_cuda_tree_sample(&d.t, 1, 0, st4, 8, d_idx, d_val,
                                      d_status, cc_stream),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_cuda_tree_sample(&d.t, 1, 0, NULL, 8, idx2, d_val,
                                      d_status, cc_stream),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_cuda_tree_sample(&d.t, 1, 0, NULL, 8, d_idx, val2,
                                      d_status, cc_stream),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_cuda_is_weights(val2, 8, 0.4, d_w, d_scratch, &bytes,
                                     d_status, cc_stream),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_cuda_is_weights(d_val, 8, 0.4, w2, d_scratch, &bytes,
                                     d_status, cc_stream),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_cuda_is_weights(d_val, 8, 0.4, d_w, scr2, &bytes, d_status,
                                     cc_stream),
                 PER_ERR_MEMORY);
    CHECK_STATUS(per_cuda_is_weights(d_val, 8, 0.4, d_w, d_scratch, &bytes, st4,
                                     cc_stream),
                 PER_ERR_MEMORY);
  }
  cc_same_tree("after refused calls", &cpu, cc_download(&d));
  CHECK_EQ_U(cc_status_word(d_status), sentinel);
  {
    float w[8];
    cc_d2h(w, d_w, sizeof w);
    CHECK_MEM(w, wsentinel, sizeof w);
  }
  // n == 0: the word is set to PER_OK and nothing else happens
  bytes = 4096;
  CHECK_OK(per_cuda_tree_set_batch(&d.t, d_idx, d_val, 0, d_scratch, &bytes,
                                   d_status, cc_stream));
  CHECK_EQ_U(cc_status_word(d_status), 0);
  cc_same_tree("after n == 0", &cpu, cc_download(&d));
  per_tree_free(&cpu);
  cc_dev_tree_free(&d);
  cudaFree(d_status);
  cudaFree(d_idx);
  cudaFree(d_val);
  cudaFree(d_td);
  cudaFree(d_w);
  cudaFree(d_scratch);
}

// Device buffers for batches up to `max` pairs.
struct cc_batch {
  uint32_t max;
  uint32_t *idx, *d_idx;
  per_real *val, *d_val;
  float *td, *d_td; // TD errors for update_td
  void *d_scratch;
  size_t scratch_bytes;
  unsigned long long *d_status;
};

static int cc_batch_make(cc_batch *b, uint32_t max) {
  b->max = max;
  b->idx = (uint32_t *)malloc(sizeof(uint32_t) * max);
  b->val = (per_real *)malloc(sizeof(per_real) * max);
  b->d_idx = (uint32_t *)cc_dmalloc(sizeof(uint32_t) * max);
  b->d_val = (per_real *)cc_dmalloc(sizeof(per_real) * max);
  b->td = (float *)malloc(sizeof(float) * max);
  b->d_td = (float *)cc_dmalloc(sizeof(float) * max);
  // what the queries say for the largest tree of the tests (2^24 leaves;
  // set_td's is the larger), and the weights'
  {
    per_cuda_tree big;
    size_t w = 0;
    big.d_node = b->d_val;
    big.capacity = big.leaves = 1u << 24;
    big.depth = 24;
    b->scratch_bytes = 0;
    if (per_cuda_tree_set_td(&big, NULL, NULL, max, 0, 1, NULL,
                             &b->scratch_bytes, NULL, cc_stream) != PER_OK ||
        per_cuda_is_weights(NULL, max, 0, NULL, NULL, &w, NULL, cc_stream) !=
            PER_OK)
      return 0;
    if (w > b->scratch_bytes) b->scratch_bytes = w;
  }
  b->d_scratch = cc_dmalloc(b->scratch_bytes);
  b->d_status = (unsigned long long *)cc_dmalloc(8);
  return b->idx && b->val && b->td && b->d_idx && b->d_val && b->d_td &&
         b->d_scratch && b->d_status;
}

static void cc_batch_free(cc_batch *b) {
  free(b->idx);
  free(b->val);
  free(b->td);
  cudaFree(b->d_idx);
  cudaFree(b->d_val);
  cudaFree(b->d_td);
  cudaFree(b->d_scratch);
  cudaFree(b->d_status);
}

static void cc_batch_upload(cc_batch *b, uint32_t n) {
  cc_h2d(b->d_idx, b->idx, sizeof(uint32_t) * n);
  cc_h2d(b->d_val, b->val, sizeof(per_real) * n);
  cc_h2d(b->d_td, b->td, sizeof(float) * n);
}

// A random batch of n valid pairs; `spread` bounds the indices used, so
// small spreads give many duplicates.
static void cc_batch_fill(cc_batch *b, per_rng *r, uint32_t n,
                          uint32_t capacity, uint32_t spread) {
  uint32_t j, base;
  if (spread == 0 || spread > capacity) spread = capacity;
  base = per_rng_below(r, capacity - spread + 1);
  for (j = 0; j < n; ++j) {
    b->idx[j] = base + per_rng_below(r, spread);
    b->val[j] = cc_value(r);
    b->td[j] = (float)per_rng_real(r) - 0.5f;
  }
}

// A random starting tree on both sides (some leaves zero).
static void cc_random_tree(per_tree *cpu, cc_dev_tree *d, per_rng *r,
                           int zero_edges) {
  uint32_t i, C = cpu->capacity;
  per_real *v = (per_real *)malloc(sizeof(per_real) * C);
  if (!v) return;
  for (i = 0; i < C; ++i) v[i] = cc_value(r);
  if (zero_edges)
    for (i = 0; i < C; ++i)
      if (i < C / 4 + 1 || i + C / 4 + 1 >= C) v[i] = 0;
  CHECK_OK(per_tree_build(cpu, v, C));
  CHECK_OK(per_cuda_tree_upload(&d->t, cpu, cc_stream));
  free(v);
}

// >>case: batch updates, byte for byte against per_tree_set_batch
static void cc_case_update(void) {
  per_rng r;
  size_t c;
  cc_batch b;
  per_rng_init(&r, 0x5eedu);
  if (!cc_batch_make(&b, 5000)) return;
  for (c = 0; c < CC_NCAPS; ++c) {
    uint32_t C = cc_caps[c], round;
    per_tree cpu;
    cc_dev_tree d;
    char what[96];
    if (per_tree_init(&cpu, C, NULL) != PER_OK) continue;
    if (!cc_dev_tree_make(&d, C)) continue;
    CHECK_OK(per_cuda_tree_clear(&d.t, cc_stream));
    cc_same_tree("cleared", &cpu, cc_download(&d));
    for (round = 0; round < 12; ++round) {
      static const uint32_t ns[] = {1, 2, 3, 255, 256, 257, 1000, 5000};
      uint32_t n = ns[per_rng_below(&r, sizeof ns / sizeof ns[0])];
      uint32_t spread = round % 3 == 0 ? 2 : round % 3 == 1 ? 50 : 0;
      size_t sb = b.scratch_bytes;
      if (round == 6) cc_random_tree(&cpu, &d, &r, 0);
      cc_batch_fill(&b, &r, n, C, spread);
      cc_batch_upload(&b, n);
      CHECK_OK(per_tree_set_batch(&cpu, b.idx, b.val, n));
      CHECK_OK(per_cuda_tree_set_batch(&d.t, b.d_idx, b.d_val, n, b.d_scratch,
                                       &sb, b.d_status, cc_stream));
      CHECK_STATUS(per_cuda_status_decode(cc_status_word(b.d_status), NULL),
                   PER_OK);
      snprintf(what, sizeof what, "update round %u, n %u, spread %u", round, n,
               spread);
      cc_same_tree(what, &cpu, cc_download(&d));
    }
    {
      per_tree view = cpu;
      view.node = d.host;
      view.owns = 0;
      CHECK_OK(per_tree_check(&view));
    }
    per_tree_free(&cpu);
    cc_dev_tree_free(&d);
  }
  cc_batch_free(&b);
}

// >>case: bad batches leave both trees exactly as they were, same status
static void cc_case_bad(void) {
  per_rng r;
  size_t c;
  cc_batch b;
  per_rng_init(&r, 0xbadu);
  if (!cc_batch_make(&b, 600)) return;
  for (c = 0; c < CC_NCAPS; ++c) {
    uint32_t C = cc_caps[c], round;
    per_tree cpu;
    cc_dev_tree d;
    per_real *before;
    if (per_tree_init(&cpu, C, NULL) != PER_OK) continue;
    if (!cc_dev_tree_make(&d, C)) continue;
    before = (per_real *)malloc(per_tree_bytes(C));
    if (!before) continue;
    cc_random_tree(&cpu, &d, &r, 0);
    for (round = 0; round < 20; ++round) {
      uint32_t n = 1 + per_rng_below(&r, 600), nbad = 1 + per_rng_below(&r, 3);
      uint32_t k, first = n, pos = 12345;
      size_t sb = b.scratch_bytes;
      per_status want, got;
      cc_batch_fill(&b, &r, n, C, round % 2 ? 3 : 0);
      for (k = 0; k < nbad; ++k) {
        uint32_t j = per_rng_below(&r, n);
        switch (per_rng_below(&r, 9)) {
          case 0: b.val[j] = (per_real)NAN; break;
          case 1: b.val[j] = -(per_real)NAN; break;
          case 2: b.val[j] = (per_real)INFINITY; break;
          case 3: b.val[j] = -(per_real)INFINITY; break;
          case 4: b.val[j] = (per_real)-1; break;
          case 5: b.val[j] = -cc_bits_real(1); break; // -(smallest subnormal)
          case 6: b.val[j] = PER_LEAF_MAX * (per_real)2; break;
          case 7: b.idx[j] = C; break;
          default: b.idx[j] = UINT32_MAX; break;
        }
        if (j < first) first = j;
      }
      memcpy(before, cpu.node, per_tree_bytes(C));
      want = per_tree_set_batch(&cpu, b.idx, b.val, n);
      CHECK(want != PER_OK);
      CHECK_MEM(before, cpu.node, per_tree_bytes(C));
      cc_batch_upload(&b, n);
      CHECK_OK(per_cuda_tree_set_batch(&d.t, b.d_idx, b.d_val, n, b.d_scratch,
                                       &sb, b.d_status, cc_stream));
      got = per_cuda_status_decode(cc_status_word(b.d_status), &pos);
      CHECK_STATUS(got, want);
      CHECK_MSG(pos == first, "capacity %u: first bad pair %u, device says %u",
                C, first, pos);
      cc_same_tree("after a refused batch", &cpu, cc_download(&d));
      // through update_td, in per_buffer_update's order: a NaN or
      // infinite TD error, then an index out of range
      {
        uint32_t first_idx = n, want_pos = first;
        for (k = 0; k < n && first_idx == n; ++k)
          if (b.idx[k] >= C) first_idx = k;
        switch (round % 3) {
          case 0:
            b.td[first] = NAN;
            want = PER_ERR_NAN;
            break;
          case 1:
            b.td[first] = -INFINITY;
            want = PER_ERR_INF;
            break;
          default:
            want = PER_ERR_INDEX;
            want_pos = first_idx;
            break;
        }
        if (want_pos < n) {
          cc_batch_upload(&b, n);
          CHECK_OK(per_cuda_tree_set_td(&d.t, b.d_idx, b.d_td, n, 1e-6, 0.6,
                                        b.d_scratch, &sb, b.d_status,
                                        cc_stream));
          got = per_cuda_status_decode(cc_status_word(b.d_status), &pos);
          CHECK_STATUS(got, want);
          CHECK_EQ_U(pos, want_pos);
          cc_same_tree("after a refused td batch", &cpu, cc_download(&d));
        }
      }
    }
    free(before);
    per_tree_free(&cpu);
    cc_dev_tree_free(&d);
  }
  cc_batch_free(&b);
}

// >>case: priorities from TD errors, fused with the update
static void cc_case_td(void) {
  static const double params[][2] = {
      {1e-6, 0.6}, {0, 1}, {0.01, 0}, {1e-3, 0.5}, {0, 0.4}, {0, 3}, {0, 8}};
  per_rng r;
  cc_batch b;
  uint32_t caps[] = {1, 3, 17, 1025, 65539};
  size_t c, p;
  uint64_t worst = 0;
  per_real *dev_val;
  uint32_t *last;
  per_rng_init(&r, 0x7du);
  if (!cc_batch_make(&b, 3000)) return;
  dev_val = (per_real *)malloc(sizeof(per_real) * 3000);
  last = (uint32_t *)malloc(sizeof(uint32_t) * 65539);
  if (!dev_val || !last) return;
  for (c = 0; c < sizeof caps / sizeof caps[0]; ++c)
    for (p = 0; p < sizeof params / sizeof params[0]; ++p) {
      uint32_t C = caps[c], n = 1 + per_rng_below(&r, 3000), j;
      double eps = params[p][0], alpha = params[p][1];
      per_tree cpu;
      cc_dev_tree d;
      size_t sb = b.scratch_bytes;
      const per_real *dn;
      if (per_tree_init(&cpu, C, NULL) != PER_OK) continue;
      if (!cc_dev_tree_make(&d, C)) continue;
      cc_random_tree(&cpu, &d, &r, 0);
      cc_batch_fill(&b, &r, n, C, p % 2 ? 40 : 0);
      for (j = 0; j < n; ++j) { // TD errors of both signs, 0, tiny, huge
        float u = (float)per_rng_real(&r) - 0.5f;
        switch (per_rng_below(&r, 8)) {
          case 0: b.td[j] = 0; break;
          case 1: b.td[j] = -0.0f; break;
          case 2: b.td[j] = u * 1000; break;
          case 3: // 2^-80 .. 2^80
            b.td[j] = u * ldexpf(1, (int)per_rng_below(&r, 161) - 80);
            break;
          case 4: b.td[j] = u < 0 ? -3.4e38f : 3.4e38f; break; // capped
          case 5: b.td[j] = u * 1e-40f; break;                 // subnormal
          default: b.td[j] = u * 4; break;
        }
      }
      cc_batch_upload(&b, n);
      CHECK_OK(per_cuda_tree_set_td(&d.t, b.d_idx, b.d_td, n, eps, alpha,
                                    b.d_scratch, &sb, b.d_status, cc_stream));
      CHECK_STATUS(per_cuda_status_decode(cc_status_word(b.d_status), NULL),
                   PER_OK);
      dn = cc_download(&d);
      // the device's leaf values against the CPU's formula, within the bound
      for (j = 0; j < n; ++j) last[b.idx[j]] = j;
      for (j = 0; j < n; ++j) {
        per_real want = peri_priority(b.td[j], eps, alpha);
        dev_val[j] = dn[d.t.leaves + b.idx[j]];
        if (alpha == 0) { // alpha = 0: exactly 1, as on the CPU
          CHECK_MSG(dev_val[j] == 1 || last[b.idx[j]] != j,
                    "alpha 0: leaf %.17g", (double)dev_val[j]);
        }
        if (want == 0) want = 0; // -0 is stored as +0
        // only the last pair of an index shows in the tree
        if (last[b.idx[j]] == j) {
          uint64_t u = cc_ulps(dev_val[j], want);
          if (u > worst) worst = u;
          // one pow (per.h's) on both sides: the same bits at every alpha
          CHECK_MSG(u == 0,
                    "td %.9g eps %g alpha %g: device %.17g cpu %.17g "
                    "(%llu ulp)",
                    (double)b.td[j], eps, alpha, (double)dev_val[j],
                    (double)want, (unsigned long long)u);
          CHECK(per_leaf_status(dev_val[j]) == PER_OK);
        }
      }
      // the tree is the exact per_tree_set_batch of those values
      CHECK_OK(per_tree_set_batch(&cpu, b.idx, dev_val, n));
      cc_same_tree("update_td", &cpu, dn);
      per_tree_free(&cpu);
      cc_dev_tree_free(&d);
    }
  printf("  update_td: worst leaf difference from the CPU: %llu ulp (bound "
         "0)\n",
         (unsigned long long)worst);
  // a NaN or infinite TD error is refused whatever alpha, also alpha = 0
  // where the priority would be 1; the first bad pair is reported
  {
    static const double alphas[] = {0, 0.6};
    per_tree cpu;
    cc_dev_tree d;
    size_t sb = b.scratch_bytes, a, k;
    if (per_tree_init(&cpu, 100, NULL) == PER_OK && cc_dev_tree_make(&d, 100)) {
      cc_random_tree(&cpu, &d, &r, 0);
      for (a = 0; a < 2; ++a)
        for (k = 0; k < 4; ++k) {
          static const float bad[4] = {NAN, -NAN, INFINITY, -INFINITY};
          uint32_t j, pos = 0;
          for (j = 0; j < 50; ++j) {
            b.idx[j] = j;
            b.td[j] = (float)j - 25;
          }
          b.td[7] = bad[k];
          b.td[30] = NAN;  // a later bad pair does not count
          b.idx[40] = 100; // nor a later bad index
          cc_batch_upload(&b, 50);
          CHECK_OK(per_cuda_tree_set_td(&d.t, b.d_idx, b.d_td, 50, 0, alphas[a],
                                        b.d_scratch, &sb, b.d_status,
                                        cc_stream));
          CHECK_STATUS(per_cuda_status_decode(cc_status_word(b.d_status), &pos),
                       k < 2 ? PER_ERR_NAN : PER_ERR_INF);
          CHECK_EQ_U(pos, 7);
          cc_same_tree("refused non-finite td", &cpu, cc_download(&d));
        }
      per_tree_free(&cpu);
      cc_dev_tree_free(&d);
    }
  }
  free(dev_val);
  free(last);
  cc_batch_free(&b);
}

// >>case: sampling, indices and values exactly per_tree_sample's
struct cc_sample_bufs {
  uint32_t *idx, *d_idx, *cidx;
  per_real *val, *d_val, *cval;
  unsigned long long *d_status, *d_counter;
};

static int cc_sample_make(cc_sample_bufs *s, uint32_t max) {
  s->idx = (uint32_t *)malloc(4 * (size_t)max);
  s->cidx = (uint32_t *)malloc(4 * (size_t)max);
  s->val = (per_real *)malloc(sizeof(per_real) * max);
  s->cval = (per_real *)malloc(sizeof(per_real) * max);
  s->d_idx = (uint32_t *)cc_dmalloc(4 * (size_t)max);
  s->d_val = (per_real *)cc_dmalloc(sizeof(per_real) * max);
  s->d_status = (unsigned long long *)cc_dmalloc(8);
  s->d_counter = (unsigned long long *)cc_dmalloc(8);
  return s->idx && s->cidx && s->val && s->cval && s->d_idx && s->d_val &&
         s->d_status && s->d_counter;
}

static void cc_sample_free(cc_sample_bufs *s) {
  free(s->idx);
  free(s->cidx);
  free(s->val);
  free(s->cval);
  cudaFree(s->d_idx);
  cudaFree(s->d_val);
  cudaFree(s->d_status);
  cudaFree(s->d_counter);
}

// One sample on both sides; compares status, indices and values.
static void cc_sample_one(const per_tree *cpu, const cc_dev_tree *d,
                          cc_sample_bufs *s, uint64_t seed, uint64_t counter,
                          uint32_t B, const char *what) {
  per_rng rng;
  per_status want, got;
  uint32_t i, bad = 0, first = 0;
  per_rng_init(&rng, seed);
  rng.counter = counter;
  memset(s->cidx, 0xEE, 4 * (size_t)B);
  want = per_tree_sample(cpu, &rng, B, s->cidx, s->cval);
  memset(s->idx, 0xEE, 4 * (size_t)B);
  cc_h2d(s->d_idx, s->idx, 4 * (size_t)B); // sentinels: must stay on error
  CHECK_OK(per_cuda_tree_sample(&d->t, seed, counter, NULL, B, s->d_idx,
                                s->d_val, s->d_status, cc_stream));
  got = per_cuda_status_decode(cc_status_word(s->d_status), NULL);
  CHECK_STATUS(got, want);
  cc_d2h(s->idx, s->d_idx, 4 * (size_t)B);
  cc_d2h(s->val, s->d_val, sizeof(per_real) * B);
  cc_draws += B;
  for (i = 0; i < B; ++i) {
    int same = s->idx[i] == s->cidx[i] &&
               (want != PER_OK ||
                memcmp(&s->val[i], &s->cval[i], sizeof(per_real)) == 0);
    if (!same && bad++ == 0) first = i;
  }
  CHECK_MSG(bad == 0,
            "%s: capacity %u seed %llu counter %llu B %u: %u of %u draws "
            "differ, first stratum %u: cpu %u (%.17g) device %u (%.17g)",
            what, cpu->capacity, (unsigned long long)seed,
            (unsigned long long)counter, B, bad, B, first, s->cidx[first],
            (double)s->cval[first], s->idx[first], (double)s->val[first]);
  if (want == PER_OK)
    for (i = 0; i < B; ++i)
      if (!(s->idx[i] < cpu->capacity && s->val[i] > 0)) {
        CHECK_MSG(0, "%s: draw %u is leaf %u of value %.17g", what, i,
                  s->idx[i], (double)s->val[i]);
        break;
      }
}

static void cc_case_sample(void) {
  static const uint32_t Bs[] = {1, 2, 3, 7, 64, 255, 256, 257, 1000, 4096};
  static const uint64_t seeds[] = {0, 1, 42, 0xDEADBEEFCAFEF00Dull, UINT64_MAX};
  static const uint64_t counters[] = {0, 1, 1000003, UINT64_MAX - 3};
  per_rng r;
  cc_sample_bufs s;
  size_t c;
  per_rng_init(&r, 0x5a3b1eu);
  if (!cc_sample_make(&s, 4096)) return;
  for (c = 0; c < CC_NCAPS; ++c) {
    uint32_t C = cc_caps[c], kind;
    per_tree cpu;
    cc_dev_tree d;
    if (per_tree_init(&cpu, C, NULL) != PER_OK) continue;
    if (!cc_dev_tree_make(&d, C)) continue;
    for (kind = 0; kind < 6; ++kind) {
      const char *what = "random tree";
      size_t k;
      switch (kind) {
        case 0: cc_random_tree(&cpu, &d, &r, 0); break;
        case 1:
          cc_random_tree(&cpu, &d, &r, 1);
          what = "zero edges";
          break;
        case 2: // one leaf with mass: the first
          per_tree_clear(&cpu);
          CHECK_OK(per_tree_set(&cpu, 0, (per_real)0.5));
          CHECK_OK(per_cuda_tree_upload(&d.t, &cpu, cc_stream));
          what = "only leaf 0";
          break;
        case 3: // one leaf with mass: the last
          per_tree_clear(&cpu);
          CHECK_OK(per_tree_set(&cpu, C - 1, PER_LEAF_MAX));
          CHECK_OK(per_cuda_tree_upload(&d.t, &cpu, cc_stream));
          what = "only the last leaf";
          break;
        case 4: // every leaf the smallest subnormal
          per_tree_clear(&cpu);
          {
            uint32_t i;
            for (i = 0; i < C; ++i)
              CHECK_OK(per_tree_set(&cpu, i, cc_bits_real(1)));
          }
          CHECK_OK(per_cuda_tree_upload(&d.t, &cpu, cc_stream));
          what = "subnormal leaves";
          break;
        default: // all zero: PER_ERR_EMPTY on both sides
          per_tree_clear(&cpu);
          CHECK_OK(per_cuda_tree_clear(&d.t, cc_stream));
          what = "all zero";
          break;
      }
      for (k = 0; k < 12; ++k) {
        uint32_t B = Bs[(k + kind + c) % (sizeof Bs / sizeof Bs[0])];
        uint64_t seed = seeds[(k + c) % (sizeof seeds / sizeof seeds[0])];
        uint64_t ctr = counters[(k / 3 + kind) % 4];
        cc_sample_one(&cpu, &d, &s, seed, ctr, B, what);
      }
    }
    // a root that is not finite (a corrupt tree): PER_ERR_DEGENERATE
    {
      per_real bad[2];
      bad[0] = (per_real)INFINITY;
      bad[1] = (per_real)NAN;
      for (kind = 0; kind < 2; ++kind) {
        cc_random_tree(&cpu, &d, &r, 0);
        cpu.node[1] = bad[kind];
        CHECK_OK(per_cuda_tree_upload(&d.t, &cpu, cc_stream));
        cc_sample_one(&cpu, &d, &s, 7, 9, 33, "non-finite root");
      }
    }
    per_tree_free(&cpu);
    cc_dev_tree_free(&d);
  }
  // the device counter: three calls advance it like three per_tree_sample
  {
    per_tree cpu;
    cc_dev_tree d;
    per_rng rng;
    unsigned long long ctr = 77, got = 0;
    int call;
    if (per_tree_init(&cpu, 1000, NULL) == PER_OK &&
        cc_dev_tree_make(&d, 1000)) {
      cc_random_tree(&cpu, &d, &r, 1);
      per_rng_init(&rng, 99);
      rng.counter = ctr;
      cc_h2d(s.d_counter, &ctr, 8);
      for (call = 0; call < 3; ++call) {
        uint32_t B = 100 + 50 * (uint32_t)call;
        CHECK_OK(per_tree_sample(&cpu, &rng, B, s.cidx, s.cval));
        CHECK_OK(per_cuda_tree_sample(&d.t, 99, 0, s.d_counter, B, s.d_idx,
                                      s.d_val, s.d_status, cc_stream));
        CHECK_EQ_U(cc_status_word(s.d_status), 0);
        cc_d2h(s.idx, s.d_idx, 4 * (size_t)B);
        CHECK_MEM(s.idx, s.cidx, 4 * (size_t)B);
        cc_draws += B;
      }
      cc_d2h(&got, s.d_counter, 8);
      CHECK_EQ_U(got, rng.counter);
      // on an empty tree the counter does not move
      per_tree_clear(&cpu);
      CHECK_OK(per_cuda_tree_clear(&d.t, cc_stream));
      CHECK_STATUS(per_tree_sample(&cpu, &rng, 5, s.cidx, NULL), PER_ERR_EMPTY);
      CHECK_OK(per_cuda_tree_sample(&d.t, 99, 0, s.d_counter, 5, s.d_idx, NULL,
                                    s.d_status, cc_stream));
      CHECK_STATUS(per_cuda_status_decode(cc_status_word(s.d_status), NULL),
                   PER_ERR_EMPTY);
      cc_d2h(&got, s.d_counter, 8);
      CHECK_EQ_U(got, rng.counter);
      per_tree_free(&cpu);
      cc_dev_tree_free(&d);
    }
  }
  cc_sample_free(&s);
}

// >>case: draws that land on a leaf boundary. Two leaves (x, R) with x chosen
// as a fixed point of x = u_1 for B = 3, so that stratum 1 falls within an
// ulp of the boundary between them (or exactly on it): a result that is off
// by one ulp anywhere in seg, u or the descent picks the other leaf.
static void cc_case_sample_edges(void) {
  cc_sample_bufs s;
  per_tree cpu;
  cc_dev_tree d;
  uint64_t seed;
  unsigned close = 0, exact = 0;
  if (!cc_sample_make(&s, 8)) return;
  if (per_tree_init(&cpu, 2, NULL) != PER_OK || !cc_dev_tree_make(&d, 2))
    return;
  for (seed = 0; seed < 400; ++seed) {
    per_real R = (per_real)0.75 + (per_real)seed / (per_real)512, x = R, u = 0;
    int it;
    for (it = 0; it < 200; ++it) {
      u = per_tree_stratum_u(seed, 0, 1, (x + R) / (per_real)3);
      if (u == x) break;
      x = u;
    }
    CHECK_OK(per_tree_set(&cpu, 0, x));
    CHECK_OK(per_tree_set(&cpu, 1, R));
    u = per_tree_stratum_u(seed, 0, 1, per_tree_total(&cpu) / (per_real)3);
    close += cc_ulps(u, x) <= 1;
    exact += u == x;
    CHECK_OK(per_cuda_tree_upload(&d.t, &cpu, cc_stream));
    cc_sample_one(&cpu, &d, &s, seed, 0, 3, "draw on a leaf boundary");
  }
  printf("  sample: %u of 400 draws within 1 ulp of a leaf boundary, %u on "
         "it\n",
         close, exact);
  CHECK(close >= 200);
  per_tree_free(&cpu);
  cc_dev_tree_free(&d);
  cc_sample_free(&s);
}

// >>case: per_cuda_tree_find against per_tree_find_batch
static void cc_case_find(void) {
  enum { N = 600 };
  per_rng r;
  per_real *u = (per_real *)malloc(sizeof(per_real) * N);
  per_real *cv = (per_real *)malloc(sizeof(per_real) * N);
  per_real *gv = (per_real *)malloc(sizeof(per_real) * N);
  uint32_t *ci = (uint32_t *)malloc(4 * N), *gi = (uint32_t *)malloc(4 * N);
  per_real *d_u = (per_real *)cc_dmalloc(sizeof(per_real) * N);
  per_real *d_val = (per_real *)cc_dmalloc(sizeof(per_real) * N);
  uint32_t *d_idx = (uint32_t *)cc_dmalloc(4 * N), pos = 0;
  unsigned long long *d_status = (unsigned long long *)cc_dmalloc(8);
  size_t c;
  per_rng_init(&r, 0xf1d);
  if (!u || !cv || !gv || !ci || !gi || !d_u || !d_val || !d_idx || !d_status)
    return;
  for (c = 0; c < CC_NCAPS; ++c) {
    uint32_t C = cc_caps[c], i;
    per_tree cpu;
    cc_dev_tree d;
    per_real total;
    if (per_tree_init(&cpu, C, NULL) != PER_OK || !cc_dev_tree_make(&d, C))
      continue;
    cc_random_tree(&cpu, &d, &r, (int)(c % 2));
    if (!(per_tree_total(&cpu) > 0)) {
      CHECK_OK(per_tree_set(&cpu, C / 2, (per_real)0.5));
      CHECK_OK(per_cuda_tree_upload(&d.t, &cpu, cc_stream));
    }
    total = per_tree_total(&cpu);
    for (i = 0; i < N; ++i) { // inside, on prefix sums, the ends and past
      uint32_t k = per_rng_below(&r, 6);
      u[i] = k == 0   ? (per_real)0
             : k == 1 ? total
             : k == 2 ? total * (per_real)2
             : k == 3 ? per_tree_prefix(&cpu, per_rng_below(&r, C + 1))
                      : (per_real)per_rng_real(&r) * total;
    }
    cc_h2d(d_u, u, sizeof(per_real) * N);
    CHECK_OK(per_tree_find_batch(&cpu, u, N, ci, cv));
    CHECK_OK(
        per_cuda_tree_find(&d.t, d_u, N, d_idx, d_val, d_status, cc_stream));
    cc_d2h(gi, d_idx, 4 * N);
    cc_d2h(gv, d_val, sizeof(per_real) * N);
    CHECK_EQ_U(cc_status_word(d_status), 0);
    CHECK(memcmp(ci, gi, 4 * N) == 0);
    CHECK(memcmp(cv, gv, sizeof(per_real) * N) == 0);
    cc_draws += N;
    // the first bad u wins, and nothing is written
    memset(gi, 0xEE, 4 * N);
    cc_h2d(d_idx, gi, 4 * N);
    u[5] = -(per_real)1;
    u[3] = (per_real)NAN;
    u[9] = (per_real)NAN;
    cc_h2d(d_u, u, sizeof(per_real) * N);
    CHECK_STATUS(per_tree_find_batch(&cpu, u, N, ci, cv), PER_ERR_NAN);
    CHECK_OK(
        per_cuda_tree_find(&d.t, d_u, N, d_idx, NULL, d_status, cc_stream));
    CHECK_STATUS(per_cuda_status_decode(cc_status_word(d_status), &pos),
                 PER_ERR_NAN);
    CHECK_EQ_U(pos, 3);
    u[3] = (per_real)1;
    cc_h2d(d_u, u, sizeof(per_real) * N);
    CHECK_OK(
        per_cuda_tree_find(&d.t, d_u, N, d_idx, NULL, d_status, cc_stream));
    CHECK_STATUS(per_cuda_status_decode(cc_status_word(d_status), &pos),
                 PER_ERR_NEGATIVE);
    CHECK_EQ_U(pos, 5);
    cc_d2h(ci, d_idx, 4 * N);
    CHECK(memcmp(ci, gi, 4 * N) == 0);
    // an empty tree: after the u checks, at position n
    CHECK_OK(per_cuda_tree_clear(&d.t, cc_stream));
    u[5] = u[9] = (per_real)0;
    cc_h2d(d_u, u, sizeof(per_real) * N);
    CHECK_OK(
        per_cuda_tree_find(&d.t, d_u, N, d_idx, NULL, d_status, cc_stream));
    CHECK_STATUS(per_cuda_status_decode(cc_status_word(d_status), &pos),
                 PER_ERR_EMPTY);
    CHECK_EQ_U(pos, N);
    CHECK_OK(
        per_cuda_tree_find(&d.t, d_u, 0, d_idx, NULL, d_status, cc_stream));
    CHECK_EQ_U(cc_status_word(d_status), 0);
    per_tree_free(&cpu);
    cc_dev_tree_free(&d);
  }
  {
    cc_dev_tree d;
    if (cc_dev_tree_make(&d, 4)) {
      CHECK_STATUS(
          per_cuda_tree_find(&d.t, NULL, 1, d_idx, NULL, d_status, cc_stream),
          PER_ERR_NULL);
      CHECK_STATUS(per_cuda_tree_find(&d.t, d_u, PER_CUDA_MAX_BATCH + 1, d_idx,
                                      NULL, d_status, cc_stream),
                   PER_ERR_BATCH);
      CHECK_STATUS(per_cuda_tree_find(&d.t, d_u, 1,
                                      (uint32_t *)(void *)((char *)d_idx + 2),
                                      NULL, d_status, cc_stream),
                   PER_ERR_MEMORY);
      cc_dev_tree_free(&d);
    }
  }
  free(u);
  free(cv);
  free(gv);
  free(ci);
  free(gi);
  cudaFree(d_u);
  cudaFree(d_val);
  cudaFree(d_idx);
  cudaFree(d_status);
}

// >>case: IS weights against the CPU formula
static void cc_case_weights(void) {
  static const double betas[] = {0, 0.4, 0.7, 1, 2.5};
  per_rng r;
  cc_sample_bufs s;
  float *w, *cw, *d_w;
  void *d_scratch;
  size_t sb = 0, c;
  uint64_t worst = 0;
  per_rng_init(&r, 0x3e1u);
  if (!cc_sample_make(&s, 4096)) return;
  w = (float *)malloc(sizeof(float) * 4096);
  cw = (float *)malloc(sizeof(float) * 4096);
  d_w = (float *)cc_dmalloc(sizeof(float) * 4096);
  // the scratch for the largest batch is enough for every smaller one
  REQUIRE(per_cuda_is_weights(NULL, 4096, 0.5, NULL, NULL, &sb, NULL,
                              cc_stream) == PER_OK);
  d_scratch = cc_dmalloc(sb);
  if (!w || !cw || !d_w || !d_scratch) return;
  for (c = 0; c < CC_NCAPS; ++c) {
    uint32_t C = cc_caps[c], k;
    per_tree cpu;
    cc_dev_tree d;
    if (per_tree_init(&cpu, C, NULL) != PER_OK) continue;
    if (!cc_dev_tree_make(&d, C)) continue;
    cc_random_tree(&cpu, &d, &r, (int)(c % 2));
    if (!(per_tree_total(&cpu) > 0)) { // weights need a sample
      CHECK_OK(per_tree_set(&cpu, C - 1, (per_real)0.25));
      CHECK_OK(per_cuda_tree_upload(&d.t, &cpu, cc_stream));
    }
    for (k = 0; k < 10; ++k) {
      uint32_t B = 1 + per_rng_below(&r, 4096), i, nmin = 0;
      double beta = betas[k % 5];
      per_real pmin;
      per_rng rng;
      per_rng_init(&rng, k);
      CHECK_OK(per_tree_sample(&cpu, &rng, B, s.cidx, s.cval));
      CHECK_OK(per_cuda_tree_sample(&d.t, k, 0, NULL, B, s.d_idx, s.d_val,
                                    s.d_status, cc_stream));
      CHECK_OK(per_cuda_is_weights(s.d_val, B, beta, d_w, d_scratch, &sb,
                                   s.d_status, cc_stream));
      CHECK_EQ_U(cc_status_word(s.d_status), 0);
      cc_d2h(w, d_w, sizeof(float) * B);
      pmin = s.cval[0];
      for (i = 1; i < B; ++i)
        if (s.cval[i] < pmin) pmin = s.cval[i];
      for (i = 0; i < B; ++i) {
        uint64_t u;
        cw[i] = peri_weight(s.cval[i], pmin, beta);
        u = cc_ulps_f(w[i], cw[i]);
        if (u > worst) worst = u;
        nmin += s.cval[i] == pmin;
        if (u != 0 || !(w[i] >= 0 && w[i] <= 1) ||
            ((beta == 0 || s.cval[i] == pmin) && w[i] != 1)) {
          CHECK_MSG(0,
                    "weight %u of %u (capacity %u, beta %g): device "
                    "%.9g cpu %.9g (%llu ulp)",
                    i, B, C, beta, (double)w[i], (double)cw[i],
                    (unsigned long long)u);
          break;
        }
      }
      CHECK(i == B);
      CHECK(nmin >= 1);
    }
    per_tree_free(&cpu);
    cc_dev_tree_free(&d);
  }
  printf("  is_weights: worst difference from the CPU: %llu ulp (bound 0)\n",
         (unsigned long long)worst);
  // bad values: the first one is reported and d_w is not written
  {
    static const per_real tail[] = {0,
                                    (per_real)NAN,
                                    (per_real)-1,
                                    -(per_real)0,
                                    (per_real)INFINITY,
                                    PER_LEAF_MAX * 2};
    static const per_status want[] = {PER_ERR_ARG,      PER_ERR_NAN,
                                      PER_ERR_NEGATIVE, PER_ERR_ARG,
                                      PER_ERR_INF,      PER_ERR_RANGE};
    float sentinel[5];
    size_t k;
    for (k = 0; k < 5; ++k) sentinel[k] = -7;
    for (k = 0; k < sizeof tail / sizeof tail[0]; ++k) {
      per_real v[5];
      uint32_t pos = 99;
      v[0] = 1;
      v[1] = 2;
      v[2] = tail[k];
      v[3] = (per_real)NAN; // a later bad value does not count
      v[4] = 1;
      cc_h2d(d_w, sentinel, sizeof sentinel);
      cc_h2d(s.d_val, v, sizeof v);
      CHECK_OK(per_cuda_is_weights(s.d_val, 5, 0.5, d_w, d_scratch, &sb,
                                   s.d_status, cc_stream));
      CHECK_STATUS(per_cuda_status_decode(cc_status_word(s.d_status), &pos),
                   want[k]);
      CHECK_EQ_U(pos, 2);
      cc_d2h(w, d_w, sizeof sentinel);
      CHECK_MEM(w, sentinel, sizeof sentinel);
    }
  }
  // extreme ratios (for double, pmin / p underflows to 0): tiny weights or
  // 0, never NaN
  {
    per_real v[3];
    uint32_t i;
    v[0] = PER_LEAF_MAX;
    v[1] = cc_bits_real(1); // the smallest subnormal
    v[2] = 1;
    cc_h2d(s.d_val, v, sizeof v);
    CHECK_OK(per_cuda_is_weights(s.d_val, 3, 0.5, d_w, d_scratch, &sb,
                                 s.d_status, cc_stream));
    CHECK_EQ_U(cc_status_word(s.d_status), 0);
    cc_d2h(w, d_w, 3 * sizeof(float));
    CHECK(w[0] >= 0 && w[0] < 1e-30f);
    CHECK_EQ_F(w[1], 1);
    for (i = 0; i < 3; ++i)
      CHECK_MSG(cc_ulps_f(w[i], peri_weight(v[i], v[1], 0.5)) == 0,
                "extreme weight %u: device %.9g cpu %.9g", i, (double)w[i],
                (double)peri_weight(v[i], v[1], 0.5));
  }
  free(w);
  free(cw);
  cudaFree(d_w);
  cudaFree(d_scratch);
  cc_sample_free(&s);
}

// >>case: a tree moves between the sides by a plain copy
static void cc_case_transfer(void) {
  per_rng r;
  per_tree a, b;
  cc_dev_tree d;
  per_rng_init(&r, 0x7ae5u);
  if (per_tree_init(&a, 1025, NULL) != PER_OK ||
      per_tree_init(&b, 1025, NULL) != PER_OK || !cc_dev_tree_make(&d, 1025))
    return;
  cc_random_tree(&a, &d, &r, 0);
  CHECK_OK(per_cuda_tree_download(&d.t, &b, cc_stream));
  CHECK_EQ_U(cudaStreamSynchronize(cc_stream), cudaSuccess);
  CHECK_MEM(a.node, b.node, per_tree_bytes(1025));
  CHECK_OK(per_tree_check(&b));
  per_tree_free(&b);
  CHECK_OK(per_tree_init(&b, 1024, NULL));
  CHECK_STATUS(per_cuda_tree_download(&d.t, &b, cc_stream), PER_ERR_CAPACITY);
  CHECK_STATUS(per_cuda_tree_upload(&d.t, &b, cc_stream), PER_ERR_CAPACITY);
  CHECK_STATUS(per_cuda_tree_upload(&d.t, NULL, cc_stream), PER_ERR_NULL);
  per_tree_free(&a);
  per_tree_free(&b);
  cc_dev_tree_free(&d);
}

// Everything that needs a "device".
static void cc_run_all(void) {
  unsigned long long t0 = cc_trees, n0 = cc_nodes, d0 = cc_draws;
  cc_case_api();
  cc_case_scratch();
  cc_case_status_keep();
  cc_case_transfer();
  cc_case_update();
  cc_case_bad();
  cc_case_td();
  cc_case_sample();
  cc_case_sample_edges();
  cc_case_find();
  cc_case_weights();
  printf("  compared %llu trees (%llu nodes) byte for byte and %llu draws "
         "exactly\n",
         cc_trees - t0, cc_nodes - n0, cc_draws - d0);
}

#endif
