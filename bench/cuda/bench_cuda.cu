// bench_cuda.cu - latency of per_cuda's update and sample against a
// cumsum + binary-search baseline, measured with cudaEvents in the same run.
//
//   N (leaves) in {2^16, 2^20, 2^24}, B (batch) in {256, 1024, 4096}
//   tree update   : per_cuda_tree_set_batch (B pairs, O(B log N)), plain launches
//                   and replayed as a CUDA graph
//   tree sample   : per_cuda_tree_sample (B stratified draws, O(B log N))
//   cumsum update : scatter the B values into a flat priority array
//   cumsum sample : CUB DeviceScan::InclusiveSum over all N priorities,
//                   then B binary searches of the same stratified u's
//
// Prints microseconds per call and the ratio baseline / tree (above 1: the
// tree is faster) for update, sample, and one trainer step (update then
// sample). Exits 77 when there is no CUDA device.
#include <cuda_runtime.h>

#include <cub/device/device_scan.cuh>

#include <stdio.h>
#include <stdlib.h>

#define PER_IMPLEMENTATION
#include "per.h"
#include "per_cuda.h"

#include "tools/cuda_asan.h"

// What went wrong in a call: NULL when it succeeded.
static const char *bench_cuda_why(cudaError_t e) {
  return e == cudaSuccess ? NULL : cudaGetErrorString(e);
}
static const char *bench_per_why(per_status s) {
  return s == PER_OK ? NULL : per_status_str(s);
}

// A call that must succeed (text: as written): otherwise where and why on
// stderr, and the function returns 1 (main: the exit status).
#define BENCH_TRY(why_of, x, text)                                             \
  do {                                                                         \
    const char *bench_why = why_of(x);                                         \
    if (bench_why) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, text, bench_why); \
      return 1;                                                                \
    }                                                                          \
  } while (0)
#define BENCH_CHECK(x) BENCH_TRY(bench_cuda_why, x, #x)
#define BENCH_OK(x) BENCH_TRY(bench_per_why, x, #x)

// baseline: p[idx[j]] = val[j]
static __global__ void bench_scatter(per_real *p, const uint32_t *idx,
                                     const per_real *val, uint32_t n) {
  uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < n) p[idx[j]] = val[j];
}

// baseline: stratum i draws the same u as per_tree_sample, then the first k
// with cdf[k] > u (clamped to N - 1).
static __global__ void bench_search(const per_real *cdf, uint32_t N,
                                    uint64_t seed, uint64_t counter, uint32_t B,
                                    uint32_t *out) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x, lo = 0, hi = N;
  per_real u;
  if (i >= B) return;
  u = per_tree_stratum_u(seed, counter, i, cdf[N - 1] / (per_real)B);
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (cdf[mid] > u) hi = mid;
    else lo = mid + 1;
  }
  out[i] = lo < N ? lo : N - 1;
}

int main(void) {
  static const uint32_t Ns[] = {1u << 16, 1u << 20, 1u << 24};
  static const uint32_t Bs[] = {256, 1024, 4096};
  const int iters = 50, warm = 5;
  int ndev = 0, it;
  size_t ni, bi;
  cudaStream_t st;
  cudaEvent_t e0, e1;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  cudaDeviceProp prop;
  if (e != cudaSuccess || ndev == 0) {
    printf("bench_cuda: SKIP: no CUDA device (%s)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("bench_cuda: %s (sm_%d%d), PER_REAL %s, %d calls per timing\n",
         prop.name, prop.major, prop.minor,
         sizeof(per_real) == sizeof(float) ? "float" : "double", iters);
  printf("%9s %5s | %9s %9s %9s | %9s %9s | %7s %7s %7s\n", "N", "B", "upd us",
         "upd graph", "cum upd", "smp us", "cum smp", "upd x", "smp x",
         "step x");
  BENCH_CHECK(cudaStreamCreate(&st));
  BENCH_CHECK(cudaEventCreate(&e0));
  BENCH_CHECK(cudaEventCreate(&e1));
  for (ni = 0; ni < sizeof Ns / sizeof Ns[0]; ++ni) {
    uint32_t N = Ns[ni], i;
    per_tree host;
    per_cuda_tree dt;
    per_rng r;
    per_real *vals, *d_p, *d_cdf;
    void *d_tree, *d_cub = NULL;
    size_t cub_bytes = 0;
    BENCH_OK(per_tree_init(&host, N, NULL));
    vals = (per_real *)malloc(sizeof(per_real) * N);
    if (!vals) return 1;
    per_rng_init(&r, 1);
    for (i = 0; i < N; ++i) vals[i] = per_rng_real(&r) + (per_real)0.01;
    BENCH_OK(per_tree_build(&host, vals, N));
    BENCH_CHECK(cudaMalloc(&d_tree, per_cuda_tree_bytes(N)));
    BENCH_OK(per_cuda_tree_init_mem(&dt, N, d_tree, per_cuda_tree_bytes(N)));
    BENCH_OK(per_cuda_tree_upload(&dt, &host, st));
    BENCH_CHECK(cudaMalloc(&d_p, sizeof(per_real) * N));
    BENCH_CHECK(cudaMalloc(&d_cdf, sizeof(per_real) * N));
    BENCH_CHECK(cudaMemcpyAsync(d_p, vals, sizeof(per_real) * N,
                                cudaMemcpyHostToDevice, st));
    BENCH_CHECK(
        cub::DeviceScan::InclusiveSum(NULL, cub_bytes, d_p, d_cdf, (int)N, st));
    BENCH_CHECK(cudaMalloc(&d_cub, cub_bytes));
    for (bi = 0; bi < sizeof Bs / sizeof Bs[0]; ++bi) {
      uint32_t B = Bs[bi], *idx, *d_idx, *d_out;
      per_real *d_val, *val;
      void *d_scratch;
      size_t sb = 0;
      unsigned long long *d_status, status = 0;
      float ms_upd, ms_graph, ms_smp, ms_cupd, ms_csmp;
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      idx = (uint32_t *)malloc(4 * (size_t)B);
      val = (per_real *)malloc(sizeof(per_real) * B);
      if (!idx || !val) return 1;
      for (i = 0; i < B; ++i) {
        idx[i] = per_rng_below(&r, N);
        val[i] = per_rng_real(&r) + (per_real)0.01;
      }
      BENCH_CHECK(cudaMalloc((void **)&d_idx, 4 * (size_t)B));
      BENCH_CHECK(cudaMalloc((void **)&d_out, 4 * (size_t)B));
      BENCH_CHECK(cudaMalloc((void **)&d_val, sizeof(per_real) * B));
      BENCH_CHECK(cudaMalloc((void **)&d_status, 8));
      BENCH_CHECK(cudaMemcpyAsync(d_idx, idx, 4 * (size_t)B,
                                  cudaMemcpyHostToDevice, st));
      BENCH_CHECK(cudaMemcpyAsync(d_val, val, sizeof(per_real) * B,
                                  cudaMemcpyHostToDevice, st));
      BENCH_OK(per_cuda_tree_set_batch(&dt, d_idx, d_val, B, NULL, &sb,
                                       d_status, st));
      BENCH_CHECK(cudaMalloc(&d_scratch, sb));

      // tree update, plain launches
      for (it = 0; it < warm; ++it)
        BENCH_OK(per_cuda_tree_set_batch(&dt, d_idx, d_val, B, d_scratch, &sb,
                                         d_status, st));
      BENCH_CHECK(cudaEventRecord(e0, st));
      for (it = 0; it < iters; ++it)
        BENCH_OK(per_cuda_tree_set_batch(&dt, d_idx, d_val, B, d_scratch, &sb,
                                         d_status, st));
      BENCH_CHECK(cudaEventRecord(e1, st));
      BENCH_CHECK(cudaEventSynchronize(e1));
      BENCH_CHECK(cudaEventElapsedTime(&ms_upd, e0, e1));

      // tree update, one graph per call
      BENCH_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      BENCH_OK(per_cuda_tree_set_batch(&dt, d_idx, d_val, B, d_scratch, &sb,
                                       d_status, st));
      BENCH_CHECK(cudaStreamEndCapture(st, &graph));
      BENCH_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      for (it = 0; it < warm; ++it) BENCH_CHECK(cudaGraphLaunch(exec, st));
      BENCH_CHECK(cudaEventRecord(e0, st));
      for (it = 0; it < iters; ++it) BENCH_CHECK(cudaGraphLaunch(exec, st));
      BENCH_CHECK(cudaEventRecord(e1, st));
      BENCH_CHECK(cudaEventSynchronize(e1));
      BENCH_CHECK(cudaEventElapsedTime(&ms_graph, e0, e1));
      BENCH_CHECK(cudaGraphExecDestroy(exec));
      BENCH_CHECK(cudaGraphDestroy(graph));
      BENCH_CHECK(cudaMemcpy(&status, d_status, 8, cudaMemcpyDeviceToHost));
      BENCH_OK(per_cuda_status_decode(status, NULL));

      // tree sample
      for (it = 0; it < warm; ++it)
        BENCH_OK(per_cuda_tree_sample(&dt, 7, (uint64_t)it * B, NULL, B, d_out,
                                      NULL, d_status, st));
      BENCH_CHECK(cudaEventRecord(e0, st));
      for (it = 0; it < iters; ++it)
        BENCH_OK(per_cuda_tree_sample(&dt, 7, (uint64_t)it * B, NULL, B, d_out,
                                      NULL, d_status, st));
      BENCH_CHECK(cudaEventRecord(e1, st));
      BENCH_CHECK(cudaEventSynchronize(e1));
      BENCH_CHECK(cudaEventElapsedTime(&ms_smp, e0, e1));

      // baseline update: scatter
      for (it = 0; it < warm + iters; ++it) {
        if (it == warm) BENCH_CHECK(cudaEventRecord(e0, st));
        bench_scatter<<<(B + 255) / 256, 256, 0, st>>>(d_p, d_idx, d_val, B);
      }
      BENCH_CHECK(cudaEventRecord(e1, st));
      BENCH_CHECK(cudaEventSynchronize(e1));
      BENCH_CHECK(cudaEventElapsedTime(&ms_cupd, e0, e1));

      // baseline sample: scan of all N, then B binary searches
      for (it = 0; it < warm + iters; ++it) {
        if (it == warm) BENCH_CHECK(cudaEventRecord(e0, st));
        BENCH_CHECK(cub::DeviceScan::InclusiveSum(d_cub, cub_bytes, d_p, d_cdf,
                                                  (int)N, st));
        bench_search<<<(B + 255) / 256, 256, 0, st>>>(
            d_cdf, N, 7, (uint64_t)it * B, B, d_out);
      }
      BENCH_CHECK(cudaEventRecord(e1, st));
      BENCH_CHECK(cudaEventSynchronize(e1));
      BENCH_CHECK(cudaEventElapsedTime(&ms_csmp, e0, e1));
      BENCH_CHECK(cudaGetLastError());

      printf("%9u %5u | %9.1f %9.1f %9.1f | %9.1f %9.1f | %7.2f %7.2f %7.2f\n",
             N, B, 1e3 * ms_upd / iters, 1e3 * ms_graph / iters,
             1e3 * ms_cupd / iters, 1e3 * ms_smp / iters, 1e3 * ms_csmp / iters,
             ms_cupd / ms_upd, ms_csmp / ms_smp,
             (ms_cupd + ms_csmp) / (ms_upd + ms_smp));
      cudaFree(d_idx);
      cudaFree(d_out);
      cudaFree(d_val);
      cudaFree(d_status);
      cudaFree(d_scratch);
      free(idx);
      free(val);
    }
    cudaFree(d_tree);
    cudaFree(d_p);
    cudaFree(d_cdf);
    cudaFree(d_cub);
    free(vals);
    per_tree_free(&host);
  }
  printf("ratios are baseline time / tree time (above 1: the tree wins); "
         "'upd graph' is the update replayed as a CUDA graph\n");
  cudaStreamDestroy(st);
  return 0;
}
