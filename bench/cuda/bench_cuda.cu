// bench_cuda.cu [--csv FILE] [--quick] - per_cuda's operations against a
// cumsum + binary-search baseline, timed with cudaEvents in the same run.
//
//   N (leaves): 2^12, 2^14, 2^16, 100000 (the CUDA coursework's grid),
//               2^20, 2^24;  B (batch): 256, 1024, 4096, and 65536 for
//               N >= 2^20. --quick: N = 2^12 and 2^20, B = 1024 only.
//   update    : per_cuda_tree_set_batch (B pairs)
//   update_td : per_cuda_tree_set_td (B TD errors, alpha 0.6)
//   sample    : per_cuda_tree_sample (B stratified draws)
//   weights   : per_cuda_is_weights of the sampled values (beta 0.4)
//   step      : update_td, sample and weights, one trainer step
//   buffer    : per_cuda_buffer's whole step on a full buffer of N items of
//               16 bytes: add_batch (B items), sample (B draws, weights and
//               the items gathered), update (B TD errors); the baseline is
//               step's
//   baseline  : update = scatter the B values into a flat priority array;
//               sample = CUB DeviceScan::InclusiveSum over all N, then B
//               binary searches of the same stratified u's; step = both.
//   buffer_cpu: the buffer row again, against per.h's own buffer on the
//               CPU (one thread, the same config, N items and B) doing the
//               same step in the same run: where the GPU starts to pay.
//   buf_sample: per_cuda_buffer_sample alone against the scan + search;
//   unique    : the same with PER_SAMPLE_UNIQUE (B <= 1024), against
//               buf_sample.
//   seq_step  : an R2D2 step (sequences of 64 steps every 32) on a full
//               buffer of N items (2^16 and 2^20; --quick 2^20): add 64
//               steps, sample B = 64 sequences (their 4096 steps
//               gathered, weights, masks), update_seq their 4096 TD
//               errors; the baseline is per.h's buffer doing the same
//               step on the CPU in the same run.
//
// Each operation is captured once as a CUDA graph and replayed: the graph
// time is the primary figure (what a trainer that captures its step
// pays); the same calls on a stream (launch overhead included) come
// second. 'launches' counts the kernel and memset nodes of the graph.
// ratio = baseline graph time / per_cuda graph time (above 1: per_cuda is
// faster; weights have no baseline). Exits 77 when there is no device.
#include <cuda_runtime.h>

#include <cub/device/device_scan.cuh>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PER_IMPLEMENTATION
#include "per.h"
#include "per_cuda.h"

#include "tools/cuda_asan.h"

// The buffer step's items (bytes) and its largest batch.
#define BENCH_ITEM 16u
#define BENCH_MAX_B 65536u

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

// One operation, captured as a graph: its launches (graph nodes), then the
// mean microseconds per replay and per call on the stream.
struct bench_times {
  double graph_us, stream_us;
  size_t launches;
};

template <typename Op>
static int bench_time(cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1,
                      int iters, Op op, bench_times *out) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  float ms;
  int it;
  BENCH_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  if (op()) {
    cudaStreamEndCapture(st, &graph);
    return 1;
  }
  BENCH_CHECK(cudaStreamEndCapture(st, &graph));
  BENCH_CHECK(cudaGraphGetNodes(graph, NULL, &out->launches));
  BENCH_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (it = 0; it < 3; ++it) BENCH_CHECK(cudaGraphLaunch(exec, st));
  BENCH_CHECK(cudaEventRecord(e0, st));
  for (it = 0; it < iters; ++it) BENCH_CHECK(cudaGraphLaunch(exec, st));
  BENCH_CHECK(cudaEventRecord(e1, st));
  BENCH_CHECK(cudaEventSynchronize(e1));
  BENCH_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  out->graph_us = 1e3 * ms / iters;
  BENCH_CHECK(cudaGraphExecDestroy(exec));
  BENCH_CHECK(cudaGraphDestroy(graph));
  for (it = 0; it < 3; ++it)
    if (op()) return 1;
  BENCH_CHECK(cudaEventRecord(e0, st));
  for (it = 0; it < iters; ++it)
    if (op()) return 1;
  BENCH_CHECK(cudaEventRecord(e1, st));
  BENCH_CHECK(cudaEventSynchronize(e1));
  BENCH_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  out->stream_us = 1e3 * ms / iters;
  return 0;
}

// per.h's buffer step on the CPU (add B, sample B with the items and
// weights, update B), mean µs over iters after 3 unmeasured steps.
static int bench_cpu_step(per_buffer *cb, uint32_t B, int iters,
                          const unsigned char *items, unsigned char *out,
                          uint64_t *ids, float *w, const float *td,
                          bench_times *t) {
  struct timespec a, b;
  int it;
  for (it = -3; it < iters; ++it) {
    if (it == 0) clock_gettime(CLOCK_MONOTONIC, &a);
    BENCH_OK(per_buffer_add_batch(cb, items, B));
    BENCH_OK(per_buffer_sample(cb, B, NULL, out, ids, w));
    BENCH_OK(per_buffer_update(cb, ids, td, B, NULL));
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  t->graph_us =
      ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) /
      1e3 / iters;
  t->stream_us = t->graph_us;
  t->launches = 0;
  return 0;
}

static void bench_row(FILE *csv, uint32_t N, uint32_t B, const char *op,
                      const bench_times &t, const bench_times *base);

// The seq_step row at N items (a multiple of 4096).
#define BENCH_SEQ_LEN 64u
#define BENCH_SEQ_B 64u
#define BENCH_SEQ_MAX_B 4096u
static int bench_seq(FILE *csv, uint32_t N, cudaStream_t st, cudaEvent_t e0,
                     cudaEvent_t e1, int iters) {
  const uint32_t L = BENCH_SEQ_LEN, B = BENCH_SEQ_B, MB = BENCH_SEQ_MAX_B;
  per_config c = per_config_default(N, BENCH_ITEM);
  per_cuda_buffer buf;
  per_buffer cb;
  per_sample_opts o, co;
  size_t bytes;
  void *d_mem;
  unsigned char *d_in, *d_out, *h_in, *h_out;
  uint8_t *d_mask, *h_mask;
  uint64_t *d_ids, *h_ids;
  float *d_w, *d_td, *h_w, *h_td;
  unsigned long long *d_status, status = 0;
  bench_times gpu, cpu;
  struct timespec a, b;
  uint32_t i;
  int it;
  c.seq_len = L;
  c.seq_stride = L / 2;
  bytes = per_cuda_buffer_bytes(&c, MB);
  if (bytes == 0) {
    fprintf(stderr, "bench_cuda: the sequence buffer's config is refused\n");
    return 1;
  }
  h_in = (unsigned char *)malloc((size_t)MB * BENCH_ITEM);
  h_out = (unsigned char *)malloc((size_t)B * L * BENCH_ITEM);
  h_mask = (uint8_t *)malloc((size_t)B * L);
  h_ids = (uint64_t *)malloc((size_t)B * 8);
  h_w = (float *)malloc((size_t)B * 4);
  h_td = (float *)malloc((size_t)B * L * 4);
  if (!h_in || !h_out || !h_mask || !h_ids || !h_w || !h_td) return 1;
  memset(h_in, 1, (size_t)MB * BENCH_ITEM);
  for (i = 0; i < B * L; ++i) h_td[i] = 0.1f * (float)(i % 7) - 0.3f;
  BENCH_CHECK(cudaMalloc(&d_mem, bytes));
  BENCH_CHECK(cudaMalloc((void **)&d_in, (size_t)MB * BENCH_ITEM));
  BENCH_CHECK(cudaMalloc((void **)&d_out, (size_t)B * L * BENCH_ITEM));
  BENCH_CHECK(cudaMalloc((void **)&d_mask, (size_t)B * L));
  BENCH_CHECK(cudaMalloc((void **)&d_ids, (size_t)B * 8));
  BENCH_CHECK(cudaMalloc((void **)&d_w, (size_t)B * 4));
  BENCH_CHECK(cudaMalloc((void **)&d_td, (size_t)B * L * 4));
  BENCH_CHECK(cudaMalloc((void **)&d_status, 8));
  BENCH_CHECK(cudaMemcpyAsync(d_in, h_in, (size_t)MB * BENCH_ITEM,
                              cudaMemcpyHostToDevice, st));
  BENCH_CHECK(cudaMemcpyAsync(d_td, h_td, (size_t)B * L * 4,
                              cudaMemcpyHostToDevice, st));
  BENCH_OK(per_cuda_buffer_init_mem(&buf, &c, MB, d_mem, bytes, st));
  BENCH_OK(per_buffer_init(&cb, &c, NULL));
  for (i = 0; i < N; i += MB) { // full: N steps on both
    BENCH_OK(per_cuda_buffer_add_batch(&buf, d_in, MB, NULL, d_status, st));
    BENCH_OK(per_buffer_add_steps(&cb, h_in, MB, NULL));
  }
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_SEQUENCES;
  co = o;
  o.mask = d_mask;
  co.mask = h_mask;
  auto op = [&]() -> int {
    BENCH_OK(per_cuda_buffer_add_batch(&buf, d_in, B, NULL, d_status, st));
    BENCH_OK(
        per_cuda_buffer_sample(&buf, B, &o, d_out, d_ids, d_w, d_status, st));
    BENCH_OK(
        per_cuda_buffer_update_seq(&buf, d_ids, d_td, B, NULL, d_status, st));
    return 0;
  };
  if (bench_time(st, e0, e1, iters, op, &gpu)) return 1;
  BENCH_CHECK(cudaMemcpy(&status, d_status, 8, cudaMemcpyDeviceToHost));
  BENCH_OK(per_cuda_status_decode(status, NULL));
  for (it = -3; it < iters; ++it) {
    if (it == 0) clock_gettime(CLOCK_MONOTONIC, &a);
    BENCH_OK(per_buffer_add_steps(&cb, h_in, B, NULL));
    BENCH_OK(per_buffer_sample(&cb, B, &co, h_out, h_ids, h_w));
    BENCH_OK(per_buffer_update_seq(&cb, h_ids, h_td, B, NULL));
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  cpu.graph_us =
      ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) /
      1e3 / iters;
  cpu.stream_us = cpu.graph_us;
  cpu.launches = 0;
  bench_row(csv, N, B, "seq_step", gpu, &cpu);
  per_buffer_free(&cb);
  cudaFree(d_mem);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_mask);
  cudaFree(d_ids);
  cudaFree(d_w);
  cudaFree(d_td);
  cudaFree(d_status);
  free(h_in);
  free(h_out);
  free(h_mask);
  free(h_ids);
  free(h_w);
  free(h_td);
  return 0;
}

static void bench_row(FILE *csv, uint32_t N, uint32_t B, const char *op,
                      const bench_times &t, const bench_times *base) {
  const char *real = sizeof(per_real) == sizeof(float) ? "float" : "double";
  double ratio = base ? base->graph_us / t.graph_us : 0;
  printf("%9u %6u  %-9s %9.1f %9.1f %8zu", N, B, op, t.graph_us, t.stream_us,
         t.launches);
  if (base) printf(" %9.1f %7.2f\n", base->graph_us, ratio);
  else printf(" %9s %7s\n", "-", "-");
  if (csv) {
    fprintf(csv, "%s,%u,%u,%s,%.3f,%.3f,%zu,", real, N, B, op, t.graph_us,
            t.stream_us, t.launches);
    if (base) fprintf(csv, "%.3f,%.4f\n", base->graph_us, ratio);
    else fprintf(csv, ",\n");
  }
}

int main(int argc, char **argv) {
  static const uint32_t Ns_full[] = {1u << 12, 1u << 14, 1u << 16,
                                     100000,   1u << 20, 1u << 24};
  static const uint32_t Ns_quick[] = {1u << 12, 1u << 20};
  static const uint32_t Bs_full[] = {256, 1024, 4096, 65536};
  static const uint32_t Bs_quick[] = {1024};
  const uint32_t *Ns = Ns_full, *Bs = Bs_full;
  size_t nN = 6, nB = 4, ni, bi;
  const int iters = 50;
  int ndev = 0, a;
  FILE *csv = NULL;
  const char *csv_path = NULL;
  cudaStream_t st;
  cudaEvent_t e0, e1;
  cudaError_t e;
  cudaDeviceProp prop;
  for (a = 1; a < argc; ++a) {
    if (strcmp(argv[a], "--quick") == 0) {
      Ns = Ns_quick;
      Bs = Bs_quick;
      nN = 2;
      nB = 1;
    } else if (strcmp(argv[a], "--csv") == 0 && a + 1 < argc) {
      csv_path = argv[++a];
    } else {
      fprintf(stderr, "usage: bench_cuda [--csv FILE] [--quick]\n");
      return 2;
    }
  }
  e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("bench_cuda: SKIP: no CUDA device (%s)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  if (csv_path) { // only once there is a device: no empty CSV on a skip
    csv = fopen(csv_path, "w");
    if (!csv) {
      fprintf(stderr, "bench_cuda: cannot write %s\n", csv_path);
      return 1;
    }
    fprintf(csv, "real,N,B,op,graph_us,stream_us,launches,"
                 "baseline_graph_us,ratio\n");
  }
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("bench_cuda: %s (sm_%d%d), PER_REAL %s, %d replays per timing\n",
         prop.name, prop.major, prop.minor,
         sizeof(per_real) == sizeof(float) ? "float" : "double", iters);
  printf("%9s %6s  %-9s %9s %9s %8s %9s %7s\n", "N", "B", "op", "graph us",
         "stream us", "launches", "base us", "ratio");
  BENCH_CHECK(cudaStreamCreate(&st));
  BENCH_CHECK(cudaEventCreate(&e0));
  BENCH_CHECK(cudaEventCreate(&e1));
  for (ni = 0; ni < nN; ++ni) {
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
    // the replay buffer, filled to N items by adds of BENCH_MAX_B
    per_config bc = per_config_default(N, BENCH_ITEM);
    per_cuda_buffer buf;
    size_t bbytes = per_cuda_buffer_bytes(&bc, BENCH_MAX_B);
    void *d_bmem;
    unsigned char *d_bin, *d_bout;
    uint64_t *d_bids;
    float *d_bw;
    unsigned long long *d_bstatus, bstatus = 0;
    // the same buffer on the CPU, filled the same way
    per_buffer cbuf;
    unsigned char *h_in =
                      (unsigned char *)malloc((size_t)BENCH_MAX_B * BENCH_ITEM),
                  *h_out =
                      (unsigned char *)malloc((size_t)BENCH_MAX_B * BENCH_ITEM);
    uint64_t *h_ids = (uint64_t *)malloc((size_t)BENCH_MAX_B * 8);
    float *h_w = (float *)malloc((size_t)BENCH_MAX_B * 4);
    if (!h_in || !h_out || !h_ids || !h_w) return 1;
    memset(h_in, 1, (size_t)BENCH_MAX_B * BENCH_ITEM);
    BENCH_OK(per_buffer_init(&cbuf, &bc, NULL));
    for (i = 0; i < N; i += BENCH_MAX_B)
      BENCH_OK(per_buffer_add_batch(&cbuf, h_in,
                                    N - i < BENCH_MAX_B ? N - i : BENCH_MAX_B));
    BENCH_CHECK(cudaMalloc(&d_bmem, bbytes));
    BENCH_CHECK(cudaMalloc((void **)&d_bin, (size_t)BENCH_MAX_B * BENCH_ITEM));
    BENCH_CHECK(cudaMalloc((void **)&d_bout, (size_t)BENCH_MAX_B * BENCH_ITEM));
    BENCH_CHECK(cudaMalloc((void **)&d_bids, (size_t)BENCH_MAX_B * 8));
    BENCH_CHECK(cudaMalloc((void **)&d_bw, (size_t)BENCH_MAX_B * 4));
    BENCH_CHECK(cudaMalloc((void **)&d_bstatus, 8));
    BENCH_CHECK(
        cudaMemsetAsync(d_bin, 1, (size_t)BENCH_MAX_B * BENCH_ITEM, st));
    BENCH_OK(
        per_cuda_buffer_init_mem(&buf, &bc, BENCH_MAX_B, d_bmem, bbytes, st));
    for (i = 0; i < N; i += BENCH_MAX_B)
      BENCH_OK(per_cuda_buffer_add_batch(
          &buf, d_bin, N - i < BENCH_MAX_B ? N - i : BENCH_MAX_B, NULL,
          d_bstatus, st));
    for (bi = 0; bi < nB; ++bi) {
      uint32_t B = Bs[bi], *idx, *d_idx, *d_out;
      per_real *d_val, *d_sval, *val;
      float *td, *d_td, *d_w;
      void *d_scratch;
      size_t sb = 0, sbw = 0;
      unsigned long long *d_status, *d_counter, status = 0;
      bench_times upd, upd_td, smp, wts, step, bstep, b_upd, b_smp, b_step;
      bench_times cpu, bsmp, uniq;
      per_sample_opts uo;
      if (B == 65536 && N < (1u << 20)) continue;
      idx = (uint32_t *)malloc(4 * (size_t)B);
      val = (per_real *)malloc(sizeof(per_real) * B);
      td = (float *)malloc(sizeof(float) * B);
      if (!idx || !val || !td) return 1;
      for (i = 0; i < B; ++i) {
        idx[i] = per_rng_below(&r, N);
        val[i] = per_rng_real(&r) + (per_real)0.01;
        td[i] = (float)per_rng_real(&r) - 0.5f;
      }
      BENCH_CHECK(cudaMalloc((void **)&d_idx, 4 * (size_t)B));
      BENCH_CHECK(cudaMalloc((void **)&d_out, 4 * (size_t)B));
      BENCH_CHECK(cudaMalloc((void **)&d_val, sizeof(per_real) * B));
      BENCH_CHECK(cudaMalloc((void **)&d_sval, sizeof(per_real) * B));
      BENCH_CHECK(cudaMalloc((void **)&d_td, sizeof(float) * B));
      BENCH_CHECK(cudaMalloc((void **)&d_w, sizeof(float) * B));
      BENCH_CHECK(cudaMalloc((void **)&d_status, 8));
      BENCH_CHECK(cudaMalloc((void **)&d_counter, 8));
      BENCH_CHECK(cudaMemsetAsync(d_counter, 0, 8, st));
      BENCH_CHECK(cudaMemcpyAsync(d_idx, idx, 4 * (size_t)B,
                                  cudaMemcpyHostToDevice, st));
      BENCH_CHECK(cudaMemcpyAsync(d_val, val, sizeof(per_real) * B,
                                  cudaMemcpyHostToDevice, st));
      BENCH_CHECK(cudaMemcpyAsync(d_td, td, sizeof(float) * B,
                                  cudaMemcpyHostToDevice, st));
      BENCH_OK(per_cuda_tree_set_td(&dt, d_idx, d_td, B, 1e-6, 0.6, NULL, &sb,
                                    d_status, st));
      BENCH_OK(
          per_cuda_is_weights(d_sval, B, 0.4, d_w, NULL, &sbw, d_status, st));
      if (sbw > sb) sb = sbw;
      BENCH_CHECK(cudaMalloc(&d_scratch, sb));
      // the sampled values the weights read
      BENCH_OK(per_cuda_tree_sample(&dt, 7, 0, NULL, B, d_out, d_sval, d_status,
                                    st));

      auto op_upd = [&]() -> int {
        BENCH_OK(per_cuda_tree_set_batch(&dt, d_idx, d_val, B, d_scratch, &sb,
                                         d_status, st));
        return 0;
      };
      auto op_upd_td = [&]() -> int {
        BENCH_OK(per_cuda_tree_set_td(&dt, d_idx, d_td, B, 1e-6, 0.6, d_scratch,
                                      &sb, d_status, st));
        return 0;
      };
      auto op_smp = [&]() -> int {
        BENCH_OK(per_cuda_tree_sample(&dt, 7, 0, d_counter, B, d_out, d_sval,
                                      d_status, st));
        return 0;
      };
      auto op_wts = [&]() -> int {
        BENCH_OK(per_cuda_is_weights(d_sval, B, 0.4, d_w, d_scratch, &sb,
                                     d_status, st));
        return 0;
      };
      auto op_step = [&]() -> int {
        return op_upd_td() || op_smp() || op_wts();
      };
      auto op_buffer = [&]() -> int {
        BENCH_OK(
            per_cuda_buffer_add_batch(&buf, d_bin, B, NULL, d_bstatus, st));
        BENCH_OK(per_cuda_buffer_sample(&buf, B, NULL, d_bout, d_bids, d_bw,
                                        d_bstatus, st));
        BENCH_OK(
            per_cuda_buffer_update(&buf, d_bids, d_td, B, NULL, d_bstatus, st));
        return 0;
      };
      auto op_bsmp = [&]() -> int {
        BENCH_OK(per_cuda_buffer_sample(&buf, B, NULL, d_bout, d_bids, d_bw,
                                        d_bstatus, st));
        return 0;
      };
      memset(&uo, 0, sizeof uo);
      uo.flags = PER_SAMPLE_UNIQUE;
      auto op_uniq = [&]() -> int {
        BENCH_OK(per_cuda_buffer_sample(&buf, B, &uo, d_bout, d_bids, d_bw,
                                        d_bstatus, st));
        return 0;
      };
      auto op_b_upd = [&]() -> int {
        bench_scatter<<<(B + 255) / 256, 256, 0, st>>>(d_p, d_idx, d_val, B);
        BENCH_CHECK(cudaGetLastError());
        return 0;
      };
      auto op_b_smp = [&]() -> int {
        BENCH_CHECK(cub::DeviceScan::InclusiveSum(d_cub, cub_bytes, d_p, d_cdf,
                                                  (int)N, st));
        bench_search<<<(B + 255) / 256, 256, 0, st>>>(d_cdf, N, 7, 0, B, d_out);
        BENCH_CHECK(cudaGetLastError());
        return 0;
      };
      auto op_b_step = [&]() -> int { return op_b_upd() || op_b_smp(); };
      if (bench_time(st, e0, e1, iters, op_upd, &upd) ||
          bench_time(st, e0, e1, iters, op_upd_td, &upd_td) ||
          bench_time(st, e0, e1, iters, op_smp, &smp) ||
          bench_time(st, e0, e1, iters, op_wts, &wts) ||
          bench_time(st, e0, e1, iters, op_step, &step) ||
          bench_time(st, e0, e1, iters, op_buffer, &bstep) ||
          bench_time(st, e0, e1, iters, op_bsmp, &bsmp) ||
          (B <= 1024 && bench_time(st, e0, e1, iters, op_uniq, &uniq)) ||
          bench_time(st, e0, e1, iters, op_b_upd, &b_upd) ||
          bench_time(st, e0, e1, iters, op_b_smp, &b_smp) ||
          bench_time(st, e0, e1, iters, op_b_step, &b_step) ||
          bench_cpu_step(&cbuf, B, iters, h_in, h_out, h_ids, h_w, td, &cpu))
        return 1;
      BENCH_CHECK(cudaMemcpy(&status, d_status, 8, cudaMemcpyDeviceToHost));
      BENCH_OK(per_cuda_status_decode(status, NULL));
      BENCH_CHECK(cudaMemcpy(&bstatus, d_bstatus, 8, cudaMemcpyDeviceToHost));
      BENCH_OK(per_cuda_status_decode(bstatus, NULL));
      bench_row(csv, N, B, "update", upd, &b_upd);
      bench_row(csv, N, B, "update_td", upd_td, &b_upd);
      bench_row(csv, N, B, "sample", smp, &b_smp);
      bench_row(csv, N, B, "weights", wts, NULL);
      bench_row(csv, N, B, "step", step, &b_step);
      bench_row(csv, N, B, "buffer", bstep, &b_step);
      bench_row(csv, N, B, "buffer_cpu", bstep, &cpu);
      bench_row(csv, N, B, "buf_sample", bsmp, &b_smp);
      if (B <= 1024) bench_row(csv, N, B, "unique", uniq, &bsmp);
      cudaFree(d_idx);
      cudaFree(d_out);
      cudaFree(d_val);
      cudaFree(d_sval);
      cudaFree(d_td);
      cudaFree(d_w);
      cudaFree(d_status);
      cudaFree(d_counter);
      cudaFree(d_scratch);
      free(idx);
      free(val);
      free(td);
    }
    per_buffer_free(&cbuf);
    free(h_in);
    free(h_out);
    free(h_ids);
    free(h_w);
    cudaFree(d_bmem);
    cudaFree(d_bin);
    cudaFree(d_bout);
    cudaFree(d_bids);
    cudaFree(d_bw);
    cudaFree(d_bstatus);
    cudaFree(d_tree);
    cudaFree(d_p);
    cudaFree(d_cdf);
    cudaFree(d_cub);
    free(vals);
    per_tree_free(&host);
  }
  for (ni = 0; ni < nN; ++ni) // the R2D2 step at 2^16 and 2^20
    if (Ns[ni] == (1u << 16) || Ns[ni] == (1u << 20))
      if (bench_seq(csv, Ns[ni], st, e0, e1, iters)) return 1;
  printf("graph us: one replay of the captured operation; stream us: the "
         "same calls launched one by one; ratio: baseline / per_cuda "
         "(graph times; above 1: per_cuda is faster)\n");
  cudaStreamDestroy(st);
  if (csv && fclose(csv) != 0) {
    fprintf(stderr, "bench_cuda: error writing the CSV\n");
    return 1;
  }
  return 0;
}
