// gpu_probes.cu [--small] [--only NAME[,NAME...]] - what per_cuda must do
// on a real device that neither the host build of the kernels nor the GPU
// test (test_cuda_gpu.cu) can show: hand-overs between blocks that are
// not all resident, the memory ordering of the arrival pattern, captured
// graphs replayed many times and after an upload, a CUDA error already
// pending when a call is made, and a tree of PER_MAX_CAPACITY leaves.
//
// Each probe prints one line, "PASS name: ..." or "FAIL name: ..." (or
// "SKIP name: why" when the device cannot run it), with its numbers; the
// program exits 1 when a probe FAILs, 0 otherwise, and 77 (a skip for
// Meson) without a CUDA device. tools/gpu-check.sh --all runs it for both
// node types (a SKIP counts as a failure there), and its --small mode
// under compute-sanitizer.
//
//   update  per_cuda_tree_set_batch of 2^22 pairs (random leaves, many
//           duplicates; zeros, -0, subnormals, large values) on a random
//           tree of 2^24 leaves, while a kernel on another stream keeps
//           most of the SMs spinning (~20 ms), so the update's blocks
//           run a few at a time on the SMs left free; the tree downloaded
//           equals per_tree_set_batch's byte for byte (memcmp of all 2L
//           nodes), three rounds.
//   litmus  the hand-over of per_cuda.cu's >>arrival section, measured:
//           each run has 4 writer threads in 4 different blocks; each
//           stores a value (its own 128-byte line), then arrives at the
//           run's counter (a line of its own) with PERI_CUDA_ARRIVE; the
//           last arrival acquires (PERI_CUDA_ACQUIRE) and reads the four
//           values with PERI_CUDA_LDCG. A run is stale when it sees an
//           older value. Every writer first reads the others' lines
//           (plain loads, which fill its SM's L1), so a last arrival that
//           read its L1 could find old copies. 10^6 runs (250 launches
//           of 4000), then the same without the fences and with plain
//           loads (the control). FAIL when a fenced run is stale; "WEAK:
//           control saw no reordering" when the control is never stale
//           either (the litmus then cannot tell the pattern from its
//           absence here).
//   graph   a per_cuda_buffer step (add_batch 32, sample 256 with items
//           and weights, update 256 TD errors) captured once as a CUDA
//           graph and replayed 10^4 times, the items and TD errors put
//           into the graph's device inputs before each replay
//           (cudaMemcpyAsync); per_buffer takes the same calls on the
//           CPU. Every 1000 replays the outputs are compared (ids, items,
//           weights, stale count, statuses), and at the end the whole
//           state (per_cuda_buffer_download against per_buffer, and their
//           checkpoint bytes).
//   graph-upload  then per_cuda_buffer_upload of a per_buffer made with
//           another alpha, eps, beta0, beta1, beta_steps, max_priority and
//           seed (and its own history), and 1000 more replays of the SAME
//           graph against that per_buffer: an upload changes what a
//           captured graph does (its config included).
//   error   a CUDA error left pending by the caller (a launch of 2048
//           threads per block: cudaErrorInvalidConfiguration, not
//           cleared): per_cuda_buffer_add_batch refuses with
//           PER_ERR_DEVICE, enqueues nothing (its status word and the
//           buffer stay as they were), per_cuda_last_error() names that
//           error, which is still pending for the caller; once the caller
//           clears it, the same call returns PER_OK, and with no error
//           pending every call returns PER_OK; the buffer then equals the
//           per_buffer that made each add once.
//   huge    a tree of PER_MAX_CAPACITY = 2^31 leaves (32 GiB of nodes for
//           double, 16 for float; SKIP when the device has less free):
//           every leaf set to 1 by per_cuda_tree_set_batch in 512 batches
//           of 2^22, so the root is exactly 2^31; a sample of 2^20 draws
//           (every index in range, value 1, in its stratum); 16 aligned
//           runs of 256 leaves set to 2 (every sum stays exact, float
//           too: root 2^31 + 4096); per_cuda_tree_find of u = 0, root -
//           0.5 and root: leaf 0, then the last leaf.
//   api     every other call once, on small trees and buffers, for the
//           sanitizers to watch (set_td, sample with a device counter,
//           find, is_weights, a buffer with the min tree: ends, windows,
//           trajectories, distinct draws, a fixed beta, counters; a
//           sequence buffer: sequences with masks, update_seq), each
//           status as the CPU's, and the buffers equal per_buffer's after
//           a download.
//   uniform degenerate mass (every leaf 0, per.cuda's uniform draws made
//           by block 0's lanes together, per_cuda.cu's
//           peri_cuda_uniform_draws): a buffer of 2^22 items sampled
//           with B = 2^22, whole and in a window that wraps, and one of
//           2^22 steps (seq_len 4, stride 4, an episode end every 7 steps:
//           some sequences invalid) sampled with B = 2^18 sequences; the
//           ids equal per_buffer's, and so does the state after (the
//           stream's place too). Prints each sample's time beside a
//           stratified sample of the same B made before the leaves were
//           zeroed.
//   unique  distinct draws (PER_SAMPLE_UNIQUE, per_cuda.cu's
//           peri_cuda_pick): B = 2^16 from 2^22 items with TD errors
//           spread over 1000 values, whole (the lanes' first phase) and
//           in a window (one thread's picks); ids and the state after
//           equal per_buffer's. Prints both times beside a stratified
//           sample's.
//
// --small: the sizes for compute-sanitizer (a tree of 2^18 leaves and
// 2^16 pairs, two rounds; 10^3 litmus runs; a buffer of 2^12 items, 100
// replays then 20; huge not run; uniform at 2^12 items, B 2^12 and 2^10
// sequences; unique B 2^10 of 2^12). --only runs the named probes. Each
// probe's seconds go to stderr.
//
// This file includes per_cuda.cu itself (as the host build does), so the
// litmus runs the very macros of its >>arrival section, and per.h's
// implementation (PER_STATIC there) is the CPU reference; it is built
// with per_cuda.cu's flags and linked with nothing of per_cuda.
#include <cuda_runtime.h>

#include "per_cuda.cu"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/cuda_asan.h"

#if !defined(PERI_CUDA_ARRIVE) || !defined(PERI_CUDA_ACQUIRE) || \
    !defined(PERI_CUDA_LDCG) || !defined(PERI_CUDA_ST)
#error "per_cuda.cu no longer defines the hand-over macros the litmus runs"
#endif

// >>harness: options, verdicts and the calls that must succeed
static int pr_small;        // --small
static const char *pr_only; // --only, comma-separated names, or NULL
static int pr_sms;          // the device's multiprocessors
static unsigned pr_pass, pr_fail, pr_skip;
static char pr_why[512]; // the first failed call of a probe

static int pr_selected(const char *name) {
  const char *p = pr_only;
  size_t n = strlen(name);
  if (!pr_only) return !(pr_small && strcmp(name, "huge") == 0);
  while (*p) {
    const char *e = strchr(p, ',');
    size_t k = e ? (size_t)(e - p) : strlen(p);
    if (k == n && strncmp(p, name, n) == 0) return 1;
    p += k + (e != NULL);
  }
  return 0;
}

static double pr_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// Keeps the first failure of a probe's calls in pr_why.
static void pr_note(int line, const char *call, const char *why) {
  if (pr_why[0]) return;
  snprintf(pr_why, sizeof pr_why, "line %d: %s: %s", line, call, why);
}

// One probe's line: "PASS name: ...", "FAIL name: ..." or "SKIP name: ...".
enum { PR_PASS, PR_FAIL, PR_SKIP };
static void pr_result(int verdict, const char *name, const char *fmt, ...) {
  static const char *const word[] = {"PASS", "FAIL", "SKIP"};
  va_list ap;
  printf("%s %s: ", word[verdict], name);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
  if (verdict == PR_PASS) ++pr_pass;
  else if (verdict == PR_FAIL) ++pr_fail;
  else ++pr_skip;
}

// Inside a probe: a call that must succeed, else the probe fails with
// where and why (pr_why) and goes to its cleanup (label done).
#define PR_CUDA(x)                                      \
  do {                                                  \
    cudaError_t pr_e_ = (x);                            \
    if (pr_e_ != cudaSuccess) {                         \
      pr_note(__LINE__, #x, cudaGetErrorString(pr_e_)); \
      goto done;                                        \
    }                                                   \
  } while (0)
#define PR_OK(x)                                    \
  do {                                              \
    per_status pr_s_ = (x);                         \
    if (pr_s_ != PER_OK) {                          \
      pr_note(__LINE__, #x, pr_status_name(pr_s_)); \
      goto done;                                    \
    }                                               \
  } while (0)
#define PR_REQUIRE(cond, ...)                                       \
  do {                                                              \
    if (!(cond)) {                                                  \
      if (!pr_why[0]) snprintf(pr_why, sizeof pr_why, __VA_ARGS__); \
      goto done;                                                    \
    }                                                               \
  } while (0)

static void *pr_dmalloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) return NULL;
  return p;
}

// A status's name, as per.h's enum spells it.
static const char *pr_status_name(per_status s) {
#define PR_STATUS_NAME(name, msg) \
  case name: return #name;
  switch (s) {
    PER_STATUS_LIST(PR_STATUS_NAME)
    default: return "(not a per_status)";
  }
#undef PR_STATUS_NAME
}

static const char *pr_real_name(void) {
  return sizeof(per_real) == sizeof(float) ? "float" : "double";
}

// The index of the first node where two trees of L leaves differ, or -1.
static long long pr_first_diff(const per_real *a, const per_real *b,
                               uint32_t leaves) {
  size_t n = 2 * (size_t)leaves, i;
  if (memcmp(a, b, n * sizeof(per_real)) == 0) return -1;
  for (i = 0; i < n; ++i)
    if (memcmp(&a[i], &b[i], sizeof(per_real)) != 0) return (long long)i;
  return -1;
}

// >>compare: a device buffer's state against per_buffer's
// Every field of two buffers' state (arrays byte for byte, the trees as
// memory, the streams, the counters, the config per_buffer_load replaces)
// and their checkpoint bytes. 1 when equal; otherwise 0 and the first
// difference in why.
static int pr_same_buffer(const per_buffer *a, const per_buffer *b, char *why,
                          size_t why_bytes) {
  uint32_t cap = a->cfg.capacity;
  size_t tb = per_tree_bytes(cap), n, la = 0, lb = 0;
  unsigned char *sa = NULL, *sb = NULL;
  long long k;
  int same = 0;
#define PR_DIFF(...)                       \
  do {                                     \
    snprintf(why, why_bytes, __VA_ARGS__); \
    goto out;                              \
  } while (0)
  if (a->step != b->step || a->added != b->added || a->trajs != b->trajs ||
      a->size != b->size || a->pos != b->pos || a->zero_hint != b->zero_hint)
    PR_DIFF("counters differ (CPU/device: step %llu/%llu, added %llu/%llu, "
            "size %u/%u, pos %u/%u)",
            (unsigned long long)a->step, (unsigned long long)b->step,
            (unsigned long long)a->added, (unsigned long long)b->added, a->size,
            b->size, a->pos, b->pos);
  if (memcmp(a->items, b->items, (size_t)cap * a->cfg.item_size) != 0)
    PR_DIFF("items differ");
  if (memcmp(a->gen, b->gen, (size_t)cap * 4) != 0)
    PR_DIFF("generations differ");
  if (memcmp(a->ends, b->ends, cap) != 0) PR_DIFF("episode ends differ");
  if (memcmp(a->traj, b->traj, (size_t)cap * 4) != 0)
    PR_DIFF("trajectory ids differ");
  k = pr_first_diff(a->tree.node, b->tree.node, a->tree.leaves);
  if (k >= 0)
    PR_DIFF("trees differ first at node %lld: %.17g vs %.17g", k,
            (double)a->tree.node[k], (double)b->tree.node[k]);
  if ((a->min_node == NULL) != (b->min_node == NULL) ||
      (a->min_node && memcmp(a->min_node, b->min_node, tb) != 0))
    PR_DIFF("min trees differ");
  if (memcmp(&a->rng, &b->rng, sizeof a->rng) != 0)
    PR_DIFF("streams differ (counter %llu vs %llu)",
            (unsigned long long)a->rng.counter,
            (unsigned long long)b->rng.counter);
  if (memcmp(&a->max_leaf, &b->max_leaf, sizeof a->max_leaf) != 0)
    PR_DIFF("max leaf %.17g vs %.17g", (double)a->max_leaf,
            (double)b->max_leaf);
  if (a->cfg.alpha != b->cfg.alpha || a->cfg.eps != b->cfg.eps ||
      a->cfg.beta0 != b->cfg.beta0 || a->cfg.beta1 != b->cfg.beta1 ||
      a->cfg.beta_steps != b->cfg.beta_steps ||
      a->cfg.max_priority != b->cfg.max_priority || a->cfg.seed != b->cfg.seed)
    PR_DIFF("configs differ (alpha %g/%g, eps %g/%g)", a->cfg.alpha,
            b->cfg.alpha, a->cfg.eps, b->cfg.eps);
  if (a->seq_ok || b->seq_ok) {
    uint32_t ns = a->seq_tree.capacity;
    if (!a->seq_ok || !b->seq_ok || memcmp(a->seq_ok, b->seq_ok, ns) != 0)
      PR_DIFF("sequence flags differ");
    k = pr_first_diff(a->seq_tree.node, b->seq_tree.node, a->seq_tree.leaves);
    if (k >= 0) PR_DIFF("sequence trees differ first at node %lld", k);
  }
  n = per_buffer_snapshot_bytes(a);
  sa = (unsigned char *)malloc(n);
  sb = (unsigned char *)malloc(n);
  if (!sa || !sb) PR_DIFF("out of host memory for the checkpoints");
  if (per_buffer_snapshot(a, sa, n, &la) != PER_OK ||
      per_buffer_snapshot(b, sb, n, &lb) != PER_OK || la != lb ||
      memcmp(sa, sb, la) != 0)
    PR_DIFF("checkpoint bytes differ");
  same = 1;
#undef PR_DIFF
out:
  free(sa);
  free(sb);
  return same;
}

// Download d into a per_buffer of cpu's config and compare (1: equal).
static int pr_compare_device(const per_cuda_buffer *d, const per_buffer *cpu,
                             cudaStream_t s, char *why, size_t why_bytes) {
  per_buffer h;
  per_status st;
  int same;
  if (per_buffer_init(&h, &cpu->cfg, NULL) != PER_OK) {
    snprintf(why, why_bytes, "per_buffer_init failed");
    return 0;
  }
  st = per_cuda_buffer_download(d, &h, s);
  if (st != PER_OK) {
    snprintf(why, why_bytes, "per_cuda_buffer_download: %s (cuda: %s)",
             pr_status_name(st),
             cudaGetErrorString((cudaError_t)per_cuda_last_error()));
    per_buffer_free(&h);
    return 0;
  }
  same = pr_same_buffer(cpu, &h, why, why_bytes);
  per_buffer_free(&h);
  return same;
}

// A status word written by the device (the stream synchronized first).
static per_status pr_device_status(const unsigned long long *d_status,
                                   cudaStream_t s) {
  unsigned long long w = 0;
  if (cudaStreamSynchronize(s) != cudaSuccess ||
      cudaMemcpy(&w, d_status, sizeof w, cudaMemcpyDeviceToHost) != cudaSuccess)
    return PER_ERR_DEVICE;
  return per_cuda_status_decode(w, NULL);
}

// A valid leaf value: mostly ordinary, sometimes 0, -0, subnormal or large.
static per_real pr_leaf(per_rng *r) {
  uint32_t k = per_rng_below(r, 256);
  if (k < 8) return (per_real)0;
  if (k < 12) return -(per_real)0;
  if (k < 14) // subnormal: 2^-1060 (double) or 2^-140 (float), times [1, 2)
    return (per_real)ldexp(1.0 + per_rng_double(r),
                           sizeof(per_real) == sizeof(float) ? -140 : -1060);
  if (k < 15) return (per_real)((double)PER_LEAF_MAX * per_rng_double(r));
  return per_rng_real(r) * (per_real)8;
}

// A finite TD error: mostly ordinary, sometimes 0, -0, tiny or huge.
static float pr_td(per_rng *r) {
  uint32_t k = per_rng_below(r, 32);
  if (k == 0) return 0.0f;
  if (k == 1) return -0.0f;
  if (k == 2) return 1e-30f;
  if (k == 3) return 3e38f;
  return (per_rng_float(r) - 0.5f) * (float)ldexp(1.0, (int)(k % 16) - 8);
}

// >>update: set_batch while most SMs are busy
// One block per thread slot's worth of an SM, spinning until ns
// nanoseconds of the global timer have passed.
static __device__ inline unsigned long long pr_globaltimer(void) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __global__ void pr_spin_kernel(unsigned long long ns,
                                      unsigned int *d_spun) {
  unsigned long long t0 = pr_globaltimer();
  while (pr_globaltimer() - t0 < ns) {
  }
  if (threadIdx.x == 0) atomicAdd(d_spun, 1u);
}

static void pr_probe_update(void) {
  const uint32_t cap = pr_small ? 1u << 18 : 1u << 24;
  const uint32_t n = pr_small ? 1u << 16 : PER_CUDA_MAX_BATCH;
  const uint32_t rounds = pr_small ? 2 : 3, hot = 4096;
  const unsigned long long spin_ns = 20000000ull;
  per_tree cpu;
  per_cuda_tree dt;
  per_rng r;
  per_real *vals = NULL, *got = NULL, *bval = NULL, *d_val = NULL;
  uint32_t *idx = NULL, *hot_leaf = NULL, *d_idx = NULL, i, round,
           overlapped = 0;
  unsigned spun = 0;
  void *d_tree = NULL, *d_scratch = NULL;
  unsigned int *d_spun = NULL;
  unsigned long long *d_status = NULL;
  size_t sb = 0;
  cudaStream_t s1 = NULL, s2 = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  int per_sm = 0, spin_blocks, ok = 0, cpu_made = 0;
  float ms, ms_max = 0;
  long long k = -1;
  pr_why[0] = 0;
  PR_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pr_spin_kernel,
                                                        1024, 0));
  // every SM but an eighth of them filled with spinning threads
  spin_blocks = per_sm * (pr_sms - pr_sms / 8);
  if (spin_blocks < 1) spin_blocks = 1;
  PR_OK(per_tree_init(&cpu, cap, NULL));
  cpu_made = 1;
  vals = (per_real *)malloc(sizeof(per_real) * cap);
  got = (per_real *)malloc(per_tree_bytes(cap));
  idx = (uint32_t *)malloc(4 * (size_t)n);
  bval = (per_real *)malloc(sizeof(per_real) * n);
  hot_leaf = (uint32_t *)malloc(4 * hot);
  PR_REQUIRE(vals && got && idx && bval && hot_leaf, "out of host memory");
  per_rng_init(&r, 55);
  for (i = 0; i < cap; ++i) vals[i] = pr_leaf(&r);
  PR_OK(per_tree_build(&cpu, vals, cap));
  d_tree = pr_dmalloc(per_cuda_tree_bytes(cap));
  d_idx = (uint32_t *)pr_dmalloc(4 * (size_t)n);
  d_val = (per_real *)pr_dmalloc(sizeof(per_real) * n);
  d_status = (unsigned long long *)pr_dmalloc(8);
  d_spun = (unsigned int *)pr_dmalloc(4);
  PR_REQUIRE(d_tree && d_idx && d_val && d_status && d_spun,
             "cudaMalloc failed");
  PR_CUDA(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  PR_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  PR_CUDA(cudaEventCreate(&e0));
  PR_CUDA(cudaEventCreate(&e1));
  PR_OK(per_cuda_tree_init_mem(&dt, cap, d_tree, per_cuda_tree_bytes(cap)));
  PR_OK(per_cuda_tree_upload(&dt, &cpu, s1));
  PR_OK(per_cuda_tree_set_batch(&dt, NULL, NULL, n, NULL, &sb, NULL, s1));
  d_scratch = pr_dmalloc(sb);
  PR_REQUIRE(d_scratch != NULL, "cudaMalloc of %zu bytes of scratch", sb);
  PR_CUDA(cudaStreamSynchronize(s1));
  for (round = 0; round < rounds; ++round) {
    for (i = 0; i < hot; ++i) hot_leaf[i] = per_rng_below(&r, cap);
    for (i = 0; i < n; ++i) { // 3 in 4 pairs on 4096 hot leaves
      idx[i] = per_rng_below(&r, 4) == 0 ? per_rng_below(&r, cap)
                                         : hot_leaf[per_rng_below(&r, hot)];
      bval[i] = pr_leaf(&r);
    }
    PR_CUDA(cudaMemcpy(d_idx, idx, 4 * (size_t)n, cudaMemcpyHostToDevice));
    PR_CUDA(
        cudaMemcpy(d_val, bval, sizeof(per_real) * n, cudaMemcpyHostToDevice));
    PR_CUDA(cudaMemset(d_spun, 0, 4));
    PR_CUDA(cudaDeviceSynchronize());
    pr_spin_kernel<<<spin_blocks, 1024, 0, s2>>>(spin_ns, d_spun);
    PR_CUDA(cudaGetLastError());
    PR_CUDA(cudaEventRecord(e0, s1));
    PR_OK(per_cuda_tree_set_batch(&dt, d_idx, d_val, n, d_scratch, &sb,
                                  d_status, s1));
    PR_CUDA(cudaEventRecord(e1, s1));
    // the spinning blocks done once the update was: fewer than all, and
    // the update ran beside the spinner
    PR_CUDA(cudaMemcpyAsync(&spun, d_spun, 4, cudaMemcpyDeviceToHost, s1));
    PR_CUDA(cudaStreamSynchronize(s1));
    overlapped += spun < (unsigned)spin_blocks;
    PR_CUDA(cudaStreamSynchronize(s2));
    PR_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (ms > ms_max) ms_max = ms;
    PR_REQUIRE(pr_device_status(d_status, s1) == PER_OK,
               "round %u: the device refused the batch", round);
    PR_OK(per_tree_set_batch(&cpu, idx, bval, n));
    PR_CUDA(
        cudaMemcpy(got, d_tree, per_tree_bytes(cap), cudaMemcpyDeviceToHost));
    k = pr_first_diff(cpu.node, got, cpu.leaves);
    PR_REQUIRE(k < 0,
               "round %u: node %lld differs: %.17g (device) vs %.17g (CPU)",
               round, k, (double)got[k], (double)cpu.node[k]);
  }
  ok = 1;
done:
  if (ok)
    pr_result(PR_PASS, "update",
              "%u rounds of %u pairs on %u leaves, every node equal (memcmp "
              "of %zu bytes); %d spinning blocks of 1024 threads on %d SMs, "
              "%u of %u updates done while they spun; slowest update %.2f ms",
              rounds, n, cap, per_tree_bytes(cap), spin_blocks, pr_sms,
              overlapped, rounds, (double)ms_max);
  else pr_result(PR_FAIL, "update", "%s", pr_why);
  if (cpu_made) per_tree_free(&cpu);
  free(vals);
  free(got);
  free(idx);
  free(bval);
  free(hot_leaf);
  cudaFree(d_tree);
  cudaFree(d_idx);
  cudaFree(d_val);
  cudaFree(d_status);
  cudaFree(d_spun);
  cudaFree(d_scratch);
  if (s1) cudaStreamDestroy(s1);
  if (s2) cudaStreamDestroy(s2);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
}

// >>litmus: the arrival hand-over, measured
#define PR_WRITERS 4u // writers of one run, each in its own block
#define PR_LINE 32u   // unsigned ints per 128-byte line
#define PR_BLOCK 32u  // threads per block: one warp of 32 runs

// A plain load that the compiler keeps where it is written and may not
// merge with another: ld.global, which the L1 may serve.
static __device__ inline unsigned pr_ld_plain(const unsigned *p) {
  unsigned v;
  asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

static __device__ inline uint32_t pr_mix(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t h = a * 0x9E3779B1u ^ b * 0x85EBCA77u ^ c * 0xC2B2AE3Du;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  return h ^ (h >> 13);
}

// Run i's writer w is thread i % 32 of block w * per_writer + i / 32, so
// the writers of a run are per_writer blocks apart. out[0] counts the
// runs whose last arrival read, out[1] the stale ones among them.
template <int FENCED>
static __global__ void pr_litmus_kernel(unsigned *data, unsigned *cnt,
                                        unsigned long long *out, unsigned epoch,
                                        uint32_t runs, uint32_t per_writer) {
  uint32_t w = blockIdx.x / per_writer;
  uint32_t i = (blockIdx.x % per_writer) * blockDim.x + threadIdx.x;
  unsigned *run, *c, old, k, stale = 0, peek = 0;
  long long t0, wait;
  if (i >= runs) return;
  run = data + (size_t)i * PR_WRITERS * PR_LINE;
  c = cnt + (size_t)i * PR_LINE;
  for (k = 0; k < PR_WRITERS; ++k) peek += pr_ld_plain(run + k * PR_LINE);
  // a wait that differs from run to run and writer to writer, so that
  // every writer is sometimes the last
  wait = (long long)(pr_mix(epoch, i, w) & 2047u);
  t0 = clock64();
  while (clock64() - t0 < wait) {
  }
  PERI_CUDA_ST(run + w * PR_LINE, epoch);
  if (FENCED) old = PERI_CUDA_ARRIVE(c, 1u);
  else old = atomicAdd(c, 1u);
  if (old != PR_WRITERS - 1) return;
  if (FENCED) PERI_CUDA_ACQUIRE(c);
  for (k = 0; k < PR_WRITERS; ++k) {
    unsigned v = FENCED ? PERI_CUDA_LDCG(run + k * PR_LINE)
                        : pr_ld_plain(run + k * PR_LINE);
    stale += v != epoch;
  }
  PERI_CUDA_ST(c, 0u); // the next launch finds it 0 (kernel boundary)
  atomicAdd(&out[0], 1ull);
  if (stale) atomicAdd(&out[1], 1ull);
  if (peek == 0xFFFFFFFFu) atomicAdd(&out[2], 1ull); // keeps the peeks
}

static void pr_probe_litmus(void) {
  const uint32_t runs = pr_small ? 1000 : 4000;
  const uint32_t launches = pr_small ? 1 : 250;
  const uint32_t per_writer = (runs + PR_BLOCK - 1) / PR_BLOCK;
  unsigned *d_data = NULL, *d_cnt = NULL;
  unsigned long long *d_out = NULL, got[2][3];
  uint32_t l, v;
  unsigned epoch = 0;
  int ok = 0;
  double t0 = pr_now();
  pr_why[0] = 0;
  memset(got, 0, sizeof got);
  d_data = (unsigned *)pr_dmalloc((size_t)runs * PR_WRITERS * PR_LINE * 4);
  d_cnt = (unsigned *)pr_dmalloc((size_t)runs * PR_LINE * 4);
  d_out = (unsigned long long *)pr_dmalloc(2 * 3 * 8);
  PR_REQUIRE(d_data && d_cnt && d_out, "cudaMalloc failed");
  PR_CUDA(cudaMemset(d_data, 0, (size_t)runs * PR_WRITERS * PR_LINE * 4));
  PR_CUDA(cudaMemset(d_cnt, 0, (size_t)runs * PR_LINE * 4));
  PR_CUDA(cudaMemset(d_out, 0, 2 * 3 * 8));
  for (v = 0; v < 2; ++v) { // 0: fenced (per_cuda.cu's macros), 1: control
    for (l = 0; l < launches; ++l) {
      ++epoch;
      if (v == 0)
        pr_litmus_kernel<1><<<PR_WRITERS * per_writer, PR_BLOCK>>>(
            d_data, d_cnt, d_out, epoch, runs, per_writer);
      else
        pr_litmus_kernel<0><<<PR_WRITERS * per_writer, PR_BLOCK>>>(
            d_data, d_cnt, d_out + 3, epoch, runs, per_writer);
      PR_CUDA(cudaGetLastError());
    }
  }
  PR_CUDA(cudaDeviceSynchronize());
  PR_CUDA(cudaMemcpy(got, d_out, sizeof got, cudaMemcpyDeviceToHost));
  PR_REQUIRE(got[0][0] == (unsigned long long)runs * launches &&
                 got[1][0] == (unsigned long long)runs * launches,
             "%llu and %llu runs completed, want %llu each", got[0][0],
             got[1][0], (unsigned long long)runs * launches);
  PR_REQUIRE(got[0][1] == 0,
             "fenced: %llu stale of %llu runs (control: %llu stale of %llu)",
             got[0][1], got[0][0], got[1][1], got[1][0]);
  ok = 1;
done:
  if (ok)
    pr_result(PR_PASS, "litmus",
              "fenced (PERI_CUDA_ARRIVE / ACQUIRE / LDCG): %llu stale of %llu "
              "runs; control (no fences, plain loads): %llu stale of %llu "
              "runs; %u writers in different blocks, %u runs per launch, "
              "%.2f s",
              got[0][1], got[0][0], got[1][1], got[1][0], PR_WRITERS, runs,
              pr_now() - t0);
  else pr_result(PR_FAIL, "litmus", "%s", pr_why);
  if (ok && got[1][1] == 0)
    printf("WEAK: control saw no reordering (%llu runs without fences, none "
           "stale: the litmus cannot tell the fences' effect on this "
           "device)\n",
           got[1][0]);
  cudaFree(d_data);
  cudaFree(d_cnt);
  cudaFree(d_out);
}

// >>graph: a captured buffer step replayed, then after an upload
// The device side of the graph probe: the buffer, the graph's inputs and
// outputs, and the status words (three calls, kept sticky in keep).
struct pr_graph_dev {
  per_cuda_buffer b;
  void *mem;
  unsigned char *d_in, *d_out;
  float *d_td, *d_w;
  uint64_t *d_ids;
  uint32_t *d_stale;
  unsigned long long *d_st, *d_keep;
};

// One step on the CPU and the inputs of the device's replay; the CPU's
// outputs in out, ids, w, *stale.
struct pr_graph_host {
  unsigned char *in, *out, *out_dev;
  float *td, *w, *w_dev;
  uint64_t *ids, *ids_dev;
};

// Replays 1..count of exec, each after new inputs (items, TD errors) are
// put in place, beside the same step of cpu; outputs compared every
// `every` replays and after the last. 1 when all equal, else 0 with why.
static int pr_graph_replays(cudaGraphExec_t exec, cudaStream_t s,
                            pr_graph_dev *d, pr_graph_host *h, per_buffer *cpu,
                            per_rng *r, uint32_t add, uint32_t B,
                            uint32_t count, uint32_t every, char *why,
                            size_t why_bytes) {
  uint32_t i, j, isz = cpu->cfg.item_size, stale = 0, stale_dev = 0;
  unsigned long long keep[2];
  per_status st;
  for (i = 1; i <= count; ++i) {
    for (j = 0; j < add * isz; ++j) h->in[j] = (unsigned char)per_rng_u32(r);
    for (j = 0; j < B; ++j) h->td[j] = pr_td(r);
    if (cudaMemcpyAsync(d->d_in, h->in, (size_t)add * isz,
                        cudaMemcpyHostToDevice, s) != cudaSuccess ||
        cudaMemcpyAsync(d->d_td, h->td, (size_t)B * 4, cudaMemcpyHostToDevice,
                        s) != cudaSuccess ||
        cudaGraphLaunch(exec, s) != cudaSuccess) {
      snprintf(why, why_bytes, "replay %u: %s", i,
               cudaGetErrorString(cudaGetLastError()));
      return 0;
    }
    st = per_buffer_add_steps(cpu, h->in, add, NULL);
    if (st == PER_OK)
      st = per_buffer_sample(cpu, B, NULL, h->out, h->ids, h->w);
    if (st == PER_OK) st = per_buffer_update(cpu, h->ids, h->td, B, &stale);
    if (st != PER_OK) {
      snprintf(why, why_bytes, "replay %u: the CPU's step: %s", i,
               pr_status_name(st));
      return 0;
    }
    if (i % every != 0 && i != count) continue;
    if (cudaStreamSynchronize(s) != cudaSuccess ||
        cudaMemcpy(keep, d->d_keep, sizeof keep, cudaMemcpyDeviceToHost) !=
            cudaSuccess ||
        cudaMemcpy(h->out_dev, d->d_out, (size_t)B * isz,
                   cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(h->ids_dev, d->d_ids, (size_t)B * 8,
                   cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(h->w_dev, d->d_w, (size_t)B * 4, cudaMemcpyDeviceToHost) !=
            cudaSuccess ||
        cudaMemcpy(&stale_dev, d->d_stale, 4, cudaMemcpyDeviceToHost) !=
            cudaSuccess) {
      snprintf(why, why_bytes, "replay %u: %s", i,
               cudaGetErrorString(cudaGetLastError()));
      return 0;
    }
    if (keep[0] != 0) {
      snprintf(why, why_bytes,
               "by replay %u: call %llu failed on the device: "
               "%s",
               i, keep[1],
               pr_status_name(per_cuda_status_decode(keep[0], NULL)));
      return 0;
    }
    for (j = 0; j < B && h->ids[j] == h->ids_dev[j]; ++j) {
    }
    if (j < B) {
      snprintf(why, why_bytes,
               "replay %u, draw %u: id %llx (CPU) vs %llx "
               "(device)",
               i, j, (unsigned long long)h->ids[j],
               (unsigned long long)h->ids_dev[j]);
      return 0;
    }
    if (memcmp(h->w, h->w_dev, (size_t)B * 4) != 0) {
      for (j = 0; j < B && memcmp(&h->w[j], &h->w_dev[j], 4) == 0; ++j) {
      }
      snprintf(why, why_bytes,
               "replay %u, draw %u: weight %.9g (CPU) vs "
               "%.9g (device)",
               i, j, (double)h->w[j], (double)h->w_dev[j]);
      return 0;
    }
    if (memcmp(h->out, h->out_dev, (size_t)B * isz) != 0 ||
        stale != stale_dev) {
      snprintf(why, why_bytes,
               "replay %u: items or stale counts (%u vs %u) "
               "differ",
               i, stale, stale_dev);
      return 0;
    }
  }
  return 1;
}

static void pr_probe_graph(void) {
  const uint32_t cap = pr_small ? 1u << 12 : 1u << 16, isz = 16, add = 32;
  const uint32_t B = pr_small ? 64 : 256;
  const uint32_t replays = pr_small ? 100 : 10000;
  const uint32_t more = pr_small ? 20 : 1000;
  const uint32_t every = pr_small ? 25 : 1000;
  per_config cfg = per_config_default(cap, isz), cfg2;
  per_buffer cpu, other;
  pr_graph_dev d;
  pr_graph_host h;
  per_rng r;
  size_t bytes;
  cudaStream_t s = NULL;
  cudaGraph_t g = NULL;
  cudaGraphExec_t exec = NULL;
  uint32_t i, j;
  int cpu_made = 0, other_made = 0, first_ok = 0, second_ok = 0, uploaded = 0;
  double t0 = pr_now(), t_first = 0, t_second = 0;
  char why2[512];
  memset(&d, 0, sizeof d);
  memset(&h, 0, sizeof h);
  why2[0] = 0;
  pr_why[0] = 0;
  cfg.seed = 7;
  cfg.beta_steps = replays / 2; // beta moves through the whole schedule
  // the "checkpoint" config: every field an upload takes, changed
  cfg2 = cfg;
  cfg2.alpha = 0.9;
  cfg2.eps = 0.01;
  cfg2.beta0 = 0.1;
  cfg2.beta1 = 0.7;
  cfg2.beta_steps = more / 2;
  cfg2.max_priority = 3.0;
  cfg2.seed = 99;
  bytes = per_cuda_buffer_bytes(&cfg, B);
  PR_REQUIRE(bytes > 0, "per_cuda_buffer_bytes is 0");
  d.mem = pr_dmalloc(bytes);
  d.d_in = (unsigned char *)pr_dmalloc((size_t)add * isz);
  d.d_out = (unsigned char *)pr_dmalloc((size_t)B * isz);
  d.d_td = (float *)pr_dmalloc((size_t)B * 4);
  d.d_w = (float *)pr_dmalloc((size_t)B * 4);
  d.d_ids = (uint64_t *)pr_dmalloc((size_t)B * 8);
  d.d_stale = (uint32_t *)pr_dmalloc(4);
  d.d_st = (unsigned long long *)pr_dmalloc(3 * 8);
  d.d_keep = (unsigned long long *)pr_dmalloc(2 * 8);
  PR_REQUIRE(d.mem && d.d_in && d.d_out && d.d_td && d.d_w && d.d_ids &&
                 d.d_stale && d.d_st && d.d_keep,
             "cudaMalloc failed");
  h.in = (unsigned char *)malloc((size_t)add * isz);
  h.out = (unsigned char *)malloc((size_t)B * isz);
  h.out_dev = (unsigned char *)malloc((size_t)B * isz);
  h.td = (float *)malloc((size_t)B * 4);
  h.w = (float *)malloc((size_t)B * 4);
  h.w_dev = (float *)malloc((size_t)B * 4);
  h.ids = (uint64_t *)malloc((size_t)B * 8);
  h.ids_dev = (uint64_t *)malloc((size_t)B * 8);
  PR_REQUIRE(h.in && h.out && h.out_dev && h.td && h.w && h.w_dev && h.ids &&
                 h.ids_dev,
             "out of host memory");
  PR_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  PR_OK(per_cuda_buffer_init_mem(&d.b, &cfg, B, d.mem, bytes, s));
  PR_CUDA(cudaMemsetAsync(d.d_keep, 0, 2 * 8, s));
  PR_OK(per_buffer_init(&cpu, &cfg, NULL));
  cpu_made = 1;
  PR_CUDA(cudaStreamSynchronize(s));
  PR_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  PR_OK(per_cuda_buffer_add_batch(&d.b, d.d_in, add, NULL, &d.d_st[0], s));
  PR_OK(per_cuda_status_keep(d.d_keep, &d.d_st[0], 1, s));
  PR_OK(per_cuda_buffer_sample(&d.b, B, NULL, d.d_out, d.d_ids, d.d_w,
                               &d.d_st[1], s));
  PR_OK(per_cuda_status_keep(d.d_keep, &d.d_st[1], 2, s));
  PR_OK(per_cuda_buffer_update(&d.b, d.d_ids, d.d_td, B, d.d_stale, &d.d_st[2],
                               s));
  PR_OK(per_cuda_status_keep(d.d_keep, &d.d_st[2], 3, s));
  PR_CUDA(cudaStreamEndCapture(s, &g));
  PR_CUDA(cudaGraphInstantiate(&exec, g, 0));
  per_rng_init(&r, 2026);
  first_ok = pr_graph_replays(exec, s, &d, &h, &cpu, &r, add, B, replays, every,
                              pr_why, sizeof pr_why);
  if (first_ok)
    first_ok = pr_compare_device(&d.b, &cpu, s, pr_why, sizeof pr_why);
  t_first = pr_now() - t0;
  // a buffer of the other config with a history of its own, uploaded
  PR_OK(per_buffer_init(&other, &cfg2, NULL));
  other_made = 1;
  for (i = 0; i < 3 * cap / 4; i += add) {
    for (j = 0; j < add * isz; ++j) h.in[j] = (unsigned char)per_rng_u32(&r);
    PR_OK(per_buffer_add_steps(&other, h.in, add, NULL));
    if (i % (8 * add) == 0) {
      for (j = 0; j < B; ++j) h.td[j] = pr_td(&r);
      PR_OK(per_buffer_sample(&other, B, NULL, h.out, h.ids, h.w));
      PR_OK(per_buffer_update(&other, h.ids, h.td, B, NULL));
    }
  }
  PR_CUDA(cudaStreamSynchronize(s));
  PR_OK(per_cuda_buffer_upload(&d.b, &other, s));
  uploaded = pr_compare_device(&d.b, &other, s, why2, sizeof why2);
  if (uploaded) {
    second_ok = pr_graph_replays(exec, s, &d, &h, &other, &r, add, B, more,
                                 more / 4 ? more / 4 : 1, why2, sizeof why2);
    if (second_ok)
      second_ok = pr_compare_device(&d.b, &other, s, why2, sizeof why2);
  }
  t_second = pr_now() - t0 - t_first;
done:
  if (first_ok)
    pr_result(PR_PASS, "graph",
              "a step of add %u + sample %u (items, weights) + update %u "
              "captured once, replayed %u times on a buffer of %u items "
              "with new inputs each time: outputs equal every %u replays, "
              "the whole state and checkpoint equal at the end; %.1f s",
              add, B, B, replays, cap, every, t_first);
  else pr_result(PR_FAIL, "graph", "%s", pr_why[0] ? pr_why : "not run");
  if (second_ok)
    pr_result(PR_PASS, "graph-upload",
              "after per_cuda_buffer_upload of a per_buffer with alpha %g, eps "
              "%g, beta %g -> %g over %llu steps, max_priority %g, seed %llu, "
              "%u more replays of the same graph equal that buffer's steps; "
              "%.1f s",
              cfg2.alpha, cfg2.eps, cfg2.beta0, cfg2.beta1,
              (unsigned long long)cfg2.beta_steps, cfg2.max_priority,
              (unsigned long long)cfg2.seed, more, t_second);
  else if (first_ok)
    pr_result(PR_FAIL, "graph-upload",
              "an upload must change what a captured graph does (alpha %g -> "
              "%g, eps %g -> %g, betas, seed): %s%s",
              cfg.alpha, cfg2.alpha, cfg.eps, cfg2.eps,
              uploaded || !why2[0] ? "" : "right after the upload: ",
              why2[0] ? why2 : pr_why);
  else pr_result(PR_FAIL, "graph-upload", "not run: the graph probe failed");
  if (exec) cudaGraphExecDestroy(exec);
  if (g) cudaGraphDestroy(g);
  if (s) cudaStreamDestroy(s);
  if (cpu_made) per_buffer_free(&cpu);
  if (other_made) per_buffer_free(&other);
  cudaFree(d.mem);
  cudaFree(d.d_in);
  cudaFree(d.d_out);
  cudaFree(d.d_td);
  cudaFree(d.d_w);
  cudaFree(d.d_ids);
  cudaFree(d.d_stale);
  cudaFree(d.d_st);
  cudaFree(d.d_keep);
  free(h.in);
  free(h.out);
  free(h.out_dev);
  free(h.td);
  free(h.w);
  free(h.w_dev);
  free(h.ids);
  free(h.ids_dev);
}

// >>error: a CUDA error the caller left pending
static __global__ void pr_empty_kernel(void) {}

static void pr_probe_error(void) {
  const uint32_t cap = 64, isz = 8, maxb = 16, n = 5;
  const unsigned long long sentinel = 0x5E57A11EDull;
  per_config cfg = per_config_default(cap, isz);
  per_buffer cpu;
  per_cuda_buffer b;
  per_rng r;
  void *mem = NULL;
  unsigned char *d_in = NULL, *d_out = NULL, in[n * 8];
  uint64_t *d_ids = NULL, ids[maxb];
  float *d_td = NULL, *d_w = NULL, td[maxb], w[maxb];
  unsigned long long *d_status = NULL, word = 0;
  size_t bytes = per_cuda_buffer_bytes(&cfg, maxb);
  cudaStream_t s = NULL;
  cudaError_t injected = cudaSuccess, left = cudaSuccess, before;
  per_status refused = PER_OK, retried = PER_ERR_DEVICE, later = PER_OK;
  int last = 0, cpu_made = 0, ok = 0, same = 0;
  uint32_t j;
  char why[512];
  why[0] = 0;
  pr_why[0] = 0;
  before = cudaGetLastError(); // nothing of ours may be pending
  PR_REQUIRE(before == cudaSuccess, "an error was pending before the probe: %s",
             cudaGetErrorString(before));
  mem = pr_dmalloc(bytes);
  d_in = (unsigned char *)pr_dmalloc(n * isz);
  d_out = (unsigned char *)pr_dmalloc(maxb * isz);
  d_ids = (uint64_t *)pr_dmalloc(maxb * 8);
  d_td = (float *)pr_dmalloc(maxb * 4);
  d_w = (float *)pr_dmalloc(maxb * 4);
  d_status = (unsigned long long *)pr_dmalloc(8);
  PR_REQUIRE(mem && d_in && d_out && d_ids && d_td && d_w && d_status,
             "cudaMalloc failed");
  PR_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  PR_OK(per_cuda_buffer_init_mem(&b, &cfg, maxb, mem, bytes, s));
  PR_OK(per_buffer_init(&cpu, &cfg, NULL));
  cpu_made = 1;
  per_rng_init(&r, 9);
  for (j = 0; j < n * isz; ++j) in[j] = (unsigned char)per_rng_u32(&r);
  PR_CUDA(cudaMemcpy(d_in, in, n * isz, cudaMemcpyHostToDevice));
  PR_CUDA(cudaMemcpy(d_status, &sentinel, 8, cudaMemcpyHostToDevice));
  PR_CUDA(cudaStreamSynchronize(s));
  // the caller's error: a launch the runtime refuses, left pending
  pr_empty_kernel<<<1, 2048, 0, s>>>();
  injected = cudaPeekAtLastError();
  PR_REQUIRE(injected != cudaSuccess, // (CUDA 13: invalid argument)
             "could not make a pending error: a launch of 2048 threads per "
             "block was accepted");
  refused = per_cuda_buffer_add_batch(&b, d_in, n, NULL, d_status, s);
  last = per_cuda_last_error();
  left = cudaGetLastError(); // the caller clears it
  PR_CUDA(cudaStreamSynchronize(s));
  PR_CUDA(cudaMemcpy(&word, d_status, 8, cudaMemcpyDeviceToHost));
  retried = per_cuda_buffer_add_batch(&b, d_in, n, NULL, d_status, s);
  PR_OK(per_buffer_add_steps(&cpu, in, n, NULL));
  PR_REQUIRE(pr_device_status(d_status, s) == PER_OK,
             "the add after the clear failed on the device");
  // no error pending: every call returns PER_OK
  for (j = 0; j < maxb; ++j) td[j] = pr_td(&r);
  PR_CUDA(cudaMemcpy(d_td, td, maxb * 4, cudaMemcpyHostToDevice));
  later =
      per_cuda_buffer_sample(&b, maxb, NULL, d_out, d_ids, d_w, d_status, s);
  if (later == PER_OK)
    later = per_cuda_buffer_update(&b, d_ids, d_td, maxb, NULL, d_status, s);
  if (later == PER_OK)
    later = per_cuda_buffer_add_batch(&b, d_in, n, NULL, d_status, s);
  PR_OK(per_buffer_sample(&cpu, maxb, NULL, NULL, ids, w));
  PR_OK(per_buffer_update(&cpu, ids, td, maxb, NULL));
  PR_OK(per_buffer_add_steps(&cpu, in, n, NULL));
  same = pr_compare_device(&b, &cpu, s, why, sizeof why);
  ok = refused == PER_ERR_DEVICE && last == (int)injected && word == sentinel &&
       left == injected && retried == PER_OK && later == PER_OK && same;
done:
  if (ok)
    pr_result(PR_PASS, "error",
              "with %s pending, add_batch returned PER_ERR_DEVICE, "
              "per_cuda_last_error() = %d, enqueued nothing, left the error "
              "pending; cleared, the same add returned PER_OK, as did a "
              "sample, an update and an add; the buffer equals per_buffer's",
              cudaGetErrorName(injected), last);
  else if (pr_why[0]) pr_result(PR_FAIL, "error", "%s", pr_why);
  else
    pr_result(PR_FAIL, "error",
              "with %s pending: add_batch returned %s (want PER_ERR_DEVICE), "
              "per_cuda_last_error() = %d (want %d), status word %s (want "
              "untouched: nothing enqueued), the error %s for the caller "
              "(want still pending); cleared: the same add returned %s, "
              "then sample/update/add %s (want PER_OK); buffer vs per_buffer "
              "with each add once: %s",
              cudaGetErrorName(injected), pr_status_name(refused), last,
              (int)injected, word == sentinel ? "untouched" : "written",
              left == injected ? "still pending"
                               : (left == cudaSuccess ? "no longer pending"
                                                      : cudaGetErrorName(left)),
              pr_status_name(retried), pr_status_name(later),
              same ? "equal" : why);
  (void)cudaGetLastError();
  if (s) cudaStreamDestroy(s);
  if (cpu_made) per_buffer_free(&cpu);
  cudaFree(mem);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_ids);
  cudaFree(d_td);
  cudaFree(d_w);
  cudaFree(d_status);
}

// >>huge: a tree of PER_MAX_CAPACITY leaves
// d_idx[j] = base + j, d_val[j] = v for j < n.
static __global__ void pr_fill_kernel(uint32_t *d_idx, per_real *d_val,
                                      uint32_t base, uint32_t n, per_real v) {
  uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  d_idx[j] = base + j;
  d_val[j] = v;
}

static void pr_probe_huge(void) {
  const uint32_t cap = PER_MAX_CAPACITY, chunk = PER_CUDA_MAX_BATCH;
  const uint32_t B = 1u << 20, runs = 16, run_len = 256;
  const double limit_s = 60;
  size_t bytes = per_cuda_tree_bytes(cap), sb = 0, free_b = 0, total_b = 0,
         need;
  per_cuda_tree t;
  void *d_tree = NULL, *d_scratch = NULL;
  uint32_t *d_idx = NULL, *sidx = NULL, c, j, found[3];
  per_real *d_val = NULL, *sval = NULL, root = 0, want, u[3];
  unsigned long long *d_status = NULL, *d_keep = NULL, keep[2];
  cudaStream_t s = NULL;
  double t0 = pr_now(), t_fill = 0;
  int ok = 0;
  pr_why[0] = 0;
  PR_CUDA(cudaMemGetInfo(&free_b, &total_b));
  // the nodes, and room for the scratch of a full batch (about cap / 31
  // words), the batch and the sample's outputs
  need = bytes + ((size_t)2 << 30);
  if (free_b < need) {
    pr_result(PR_SKIP, "huge",
              "a tree of 2^31 leaves needs %.1f GiB of device memory (nodes "
              "%.1f and 2 of room), %.1f GiB free of %.1f",
              (double)need / (1u << 30), (double)bytes / (1u << 30),
              (double)free_b / (1u << 30), (double)total_b / (1u << 30));
    return;
  }
  d_tree = pr_dmalloc(bytes);
  PR_REQUIRE(d_tree != NULL, "cudaMalloc of %.1f GiB failed (%.1f GiB free)",
             (double)bytes / (1u << 30), (double)free_b / (1u << 30));
  PR_OK(per_cuda_tree_init_mem(&t, cap, d_tree, bytes));
  PR_OK(per_cuda_tree_set_batch(&t, NULL, NULL, chunk, NULL, &sb, NULL, 0));
  d_scratch = pr_dmalloc(sb);
  d_idx = (uint32_t *)pr_dmalloc((size_t)chunk * 4);
  d_val = (per_real *)pr_dmalloc((size_t)chunk * sizeof(per_real));
  d_status = (unsigned long long *)pr_dmalloc(8);
  d_keep = (unsigned long long *)pr_dmalloc(16);
  sidx = (uint32_t *)malloc((size_t)B * 4);
  sval = (per_real *)malloc((size_t)B * sizeof(per_real));
  PR_REQUIRE(d_scratch && d_idx && d_val && d_status && d_keep && sidx && sval,
             "allocation failed (scratch %.2f GiB; %.1f GiB free before)",
             (double)sb / (1u << 30), (double)free_b / (1u << 30));
  PR_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  PR_OK(per_cuda_tree_clear(&t, s));
  PR_CUDA(cudaMemsetAsync(d_keep, 0, 16, s));
  // every leaf 1, in 512 batches: every node is a power of two, exact
  for (c = 0; c < cap / chunk; ++c) {
    pr_fill_kernel<<<chunk / 256, 256, 0, s>>>(d_idx, d_val, c * chunk, chunk,
                                               (per_real)1);
    PR_CUDA(cudaGetLastError());
    PR_OK(per_cuda_tree_set_batch(&t, d_idx, d_val, chunk, d_scratch, &sb,
                                  d_status, s));
    PR_OK(per_cuda_status_keep(d_keep, d_status, c + 1, s));
    if (c % 64 == 63) {
      PR_CUDA(cudaStreamSynchronize(s));
      PR_REQUIRE(pr_now() - t0 < limit_s,
                 "filling took over %.0f s (%u of %u batches done)", limit_s,
                 c + 1, cap / chunk);
    }
  }
  PR_CUDA(cudaStreamSynchronize(s));
  t_fill = pr_now() - t0;
  PR_CUDA(cudaMemcpy(keep, d_keep, 16, cudaMemcpyDeviceToHost));
  PR_REQUIRE(keep[0] == 0, "fill batch %llu refused: %s", keep[1],
             pr_status_name(per_cuda_status_decode(keep[0], NULL)));
  PR_CUDA(cudaMemcpy(&root, t.d_node + 1, sizeof root, cudaMemcpyDeviceToHost));
  PR_REQUIRE(root == (per_real)cap,
             "root %.17g after the fill, want "
             "2^31",
             (double)root);
  // a sample: indices in range, values 1, draw i in stratum i
  PR_OK(per_cuda_tree_sample(&t, 11, 0, NULL, B, d_idx, d_val, d_status, s));
  PR_REQUIRE(pr_device_status(d_status, s) == PER_OK, "the sample failed");
  PR_CUDA(cudaMemcpy(sidx, d_idx, (size_t)B * 4, cudaMemcpyDeviceToHost));
  PR_CUDA(cudaMemcpy(sval, d_val, (size_t)B * sizeof(per_real),
                     cudaMemcpyDeviceToHost));
  for (j = 0; j < B; ++j) {
    // u = (j + r) * seg with r in [0, 1): on leaves of 1 the leaf is
    // floor(u), in [j * seg, (j + 1) * seg] (j + r may round up to j + 1)
    uint64_t lo = (uint64_t)j * (cap / B), hi = lo + cap / B;
    if (hi > cap - 1) hi = cap - 1;
    PR_REQUIRE(sidx[j] < cap && sval[j] == (per_real)1 && sidx[j] >= lo &&
                   sidx[j] <= hi,
               "draw %u: leaf %u (value %g), want one in [%llu, %llu] of "
               "value 1",
               j, sidx[j], (double)sval[j], (unsigned long long)lo,
               (unsigned long long)hi);
  }
  // 16 aligned runs of 256 leaves set to 2, the last at the end
  for (c = 0; c < runs; ++c) {
    uint32_t base = c + 1 < runs ? c * (cap / runs) : cap - run_len;
    pr_fill_kernel<<<1, run_len, 0, s>>>(
        d_idx + c * run_len, d_val + c * run_len, base, run_len, (per_real)2);
    PR_CUDA(cudaGetLastError());
  }
  PR_OK(per_cuda_tree_set_batch(&t, d_idx, d_val, runs * run_len, d_scratch,
                                &sb, d_status, s));
  PR_REQUIRE(pr_device_status(d_status, s) == PER_OK, "the update failed");
  PR_CUDA(cudaMemcpy(&root, t.d_node + 1, sizeof root, cudaMemcpyDeviceToHost));
  want = (per_real)((double)cap + runs * run_len);
  PR_REQUIRE(root == want, "root %.17g after the update, want %.17g",
             (double)root, (double)want);
  // finds: u = 0 is leaf 0; root - 0.5 and root are the last leaf
  u[0] = 0;
  u[1] = root - (per_real)0.5;
  u[2] = root;
  PR_CUDA(cudaMemcpy(d_val, u, sizeof u, cudaMemcpyHostToDevice));
  PR_OK(per_cuda_tree_find(&t, d_val, 3, d_idx, NULL, d_status, s));
  PR_REQUIRE(pr_device_status(d_status, s) == PER_OK, "the find failed");
  PR_CUDA(cudaMemcpy(found, d_idx, sizeof found, cudaMemcpyDeviceToHost));
  PR_REQUIRE(found[0] == 0 && found[1] == cap - 1 && found[2] == cap - 1,
             "find: u = 0 -> %u (want 0), root - 0.5 -> %u and root -> %u "
             "(want %u)",
             found[0], found[1], found[2], cap - 1);
  ok = 1;
done:
  if (ok)
    pr_result(PR_PASS, "huge",
              "2^31 leaves (%.1f GiB): filled with 1 by %u batches of %u in "
              "%.2f s, root 2^31 exactly; %u draws in range and stratum; %u "
              "leaves set to 2: root 2^31 + %u exactly; find of 0, root - "
              "0.5 and root: leaves 0, %u, %u; %.1f s in all",
              (double)bytes / (1u << 30), cap / chunk, chunk, t_fill, B,
              runs * run_len, runs * run_len, cap - 1, cap - 1, pr_now() - t0);
  else pr_result(PR_FAIL, "huge", "%s", pr_why);
  if (s) cudaStreamDestroy(s);
  cudaFree(d_tree);
  cudaFree(d_scratch);
  cudaFree(d_idx);
  cudaFree(d_val);
  cudaFree(d_status);
  cudaFree(d_keep);
  free(sidx);
  free(sval);
}

// >>api: every other call once, for the sanitizers
// A device buffer made for cfg with its call arrays (items in and out,
// ends, ids, TD errors, weights, mask, status).
struct pr_api_buf {
  per_cuda_buffer b;
  void *mem;
  unsigned char *d_in, *d_out;
  uint8_t *d_ends, *d_mask;
  uint64_t *d_ids;
  float *d_td, *d_w;
  unsigned long long *d_status;
};

static int pr_api_make(pr_api_buf *a, const per_config *cfg, uint32_t maxb,
                       cudaStream_t s) {
  uint32_t rows = maxb * (cfg->seq_len ? cfg->seq_len : 1u);
  size_t bytes = per_cuda_buffer_bytes(cfg, maxb);
  memset(a, 0, sizeof *a);
  if (bytes == 0) return 0;
  a->mem = pr_dmalloc(bytes);
  a->d_in = (unsigned char *)pr_dmalloc((size_t)maxb * cfg->item_size);
  a->d_out = (unsigned char *)pr_dmalloc((size_t)rows * cfg->item_size);
  a->d_ends = (uint8_t *)pr_dmalloc(maxb);
  a->d_mask = (uint8_t *)pr_dmalloc(rows);
  a->d_ids = (uint64_t *)pr_dmalloc((size_t)maxb * 8);
  a->d_td = (float *)pr_dmalloc((size_t)rows * 4);
  a->d_w = (float *)pr_dmalloc((size_t)maxb * 4);
  a->d_status = (unsigned long long *)pr_dmalloc(8);
  if (!a->mem || !a->d_in || !a->d_out || !a->d_ends || !a->d_mask ||
      !a->d_ids || !a->d_td || !a->d_w || !a->d_status)
    return 0;
  return per_cuda_buffer_init_mem(&a->b, cfg, maxb, a->mem, bytes, s) == PER_OK;
}

static void pr_api_free(pr_api_buf *a) {
  void *p[] = {a->mem,   a->d_in, a->d_out, a->d_ends,  a->d_mask,
               a->d_ids, a->d_td, a->d_w,   a->d_status};
  size_t i;
  for (i = 0; i < sizeof p / sizeof p[0]; ++i) cudaFree(p[i]);
  memset(a, 0, sizeof *a);
}

// The calls of the api probe, each on the CPU and the device with the same
// inputs; a status that differs is recorded in pr_why.
static unsigned pr_api_calls;
static void pr_api_expect(per_status cpu, per_status dev, const char *what) {
  ++pr_api_calls;
  if (cpu != dev && !pr_why[0])
    snprintf(pr_why, sizeof pr_why, "%s: %s on the CPU, %s on the device", what,
             pr_status_name(cpu), pr_status_name(dev));
}

static void pr_api_add(per_buffer *cpu, pr_api_buf *a, per_rng *r, uint32_t n,
                       cudaStream_t s) {
  unsigned char in[64 * 16];
  uint8_t ends[64];
  uint32_t j, isz = cpu->cfg.item_size;
  per_status want, got;
  for (j = 0; j < n * isz; ++j) in[j] = (unsigned char)per_rng_u32(r);
  for (j = 0; j < n; ++j) // an episode end now and then
    ends[j] = per_rng_below(r, 8) == 0 ? (uint8_t)(1 + per_rng_below(r, 2))
                                       : (uint8_t)PER_END_NONE;
  want = per_buffer_add_steps(cpu, in, n, ends);
  if (cudaMemcpy(a->d_in, in, (size_t)n * isz, cudaMemcpyHostToDevice) !=
          cudaSuccess ||
      cudaMemcpy(a->d_ends, ends, n, cudaMemcpyHostToDevice) != cudaSuccess)
    got = PER_ERR_DEVICE;
  else
    got =
        per_cuda_buffer_add_batch(&a->b, a->d_in, n, a->d_ends, a->d_status, s);
  if (got == PER_OK) got = pr_device_status(a->d_status, s);
  pr_api_expect(want, got, "add_batch");
}

// A sample with opts on both; the ids in ids (on the CPU's side) and
// returns B on success.
static uint32_t pr_api_sample(per_buffer *cpu, pr_api_buf *a, uint32_t B,
                              per_sample_opts o, uint64_t *ids,
                              cudaStream_t s) {
  static unsigned char out[64 * 16 * 8];
  static uint8_t mask[64 * 8];
  static uint64_t ids_dev[64];
  static float w[64];
  per_status want, got;
  int seq = (o.flags & PER_SAMPLE_SEQUENCES) != 0;
  if (seq) o.mask = mask;
  want = per_buffer_sample(cpu, B, &o, out, ids, w);
  if (seq) o.mask = a->d_mask;
  got = per_cuda_buffer_sample(&a->b, B, &o, a->d_out, a->d_ids, a->d_w,
                               a->d_status, s);
  if (got == PER_OK) got = pr_device_status(a->d_status, s);
  pr_api_expect(want, got, seq ? "sample of sequences" : "sample");
  if (want != PER_OK || got != PER_OK) return 0;
  if (cudaMemcpy(ids_dev, a->d_ids, (size_t)B * 8, cudaMemcpyDeviceToHost) !=
          cudaSuccess ||
      memcmp(ids, ids_dev, (size_t)B * 8) != 0)
    pr_api_expect(PER_OK, PER_ERR_CORRUPT, "sampled ids");
  return B;
}

static void pr_api_update(per_buffer *cpu, pr_api_buf *a, per_rng *r,
                          const uint64_t *ids, uint32_t n, int seq,
                          cudaStream_t s) {
  static float td[64 * 8];
  uint32_t j, rows = n * (seq ? cpu->cfg.seq_len : 1u);
  per_status want, got = PER_ERR_DEVICE;
  for (j = 0; j < rows; ++j) td[j] = pr_td(r);
  want = seq ? per_buffer_update_seq(cpu, ids, td, n, NULL)
             : per_buffer_update(cpu, ids, td, n, NULL);
  if (cudaMemcpy(a->d_ids, ids, (size_t)n * 8, cudaMemcpyHostToDevice) ==
          cudaSuccess &&
      cudaMemcpy(a->d_td, td, (size_t)rows * 4, cudaMemcpyHostToDevice) ==
          cudaSuccess)
    got = seq ? per_cuda_buffer_update_seq(&a->b, a->d_ids, a->d_td, n, NULL,
                                           a->d_status, s)
              : per_cuda_buffer_update(&a->b, a->d_ids, a->d_td, n, NULL,
                                       a->d_status, s);
  if (got == PER_OK) got = pr_device_status(a->d_status, s);
  pr_api_expect(want, got, seq ? "update_seq" : "update");
}

// The tree's calls: set_td, sample with a device counter, find, weights.
static void pr_api_tree(cudaStream_t s) {
  const uint32_t cap = 1000, n = 300;
  per_tree cpu;
  per_cuda_tree t;
  per_rng r;
  per_real vals[cap], u[4], *d_val = NULL;
  uint32_t idx[n], j, *d_idx = NULL;
  float td[n], *d_td = NULL, *d_w = NULL;
  void *d_tree = NULL, *d_scratch = NULL;
  unsigned long long *d_status = NULL, *d_counter = NULL;
  size_t sb = 0, sbw = 0;
  int cpu_made = 0;
  per_rng_init(&r, 3);
  for (j = 0; j < cap; ++j) vals[j] = pr_leaf(&r);
  for (j = 0; j < n; ++j) {
    idx[j] = per_rng_below(&r, cap);
    td[j] = pr_td(&r);
  }
  PR_OK(per_tree_init(&cpu, cap, NULL));
  cpu_made = 1;
  PR_OK(per_tree_build(&cpu, vals, cap));
  d_tree = pr_dmalloc(per_cuda_tree_bytes(cap));
  d_idx = (uint32_t *)pr_dmalloc(n * 4);
  d_val = (per_real *)pr_dmalloc(n * sizeof(per_real));
  d_td = (float *)pr_dmalloc(n * 4);
  d_w = (float *)pr_dmalloc(n * 4);
  d_status = (unsigned long long *)pr_dmalloc(8);
  d_counter = (unsigned long long *)pr_dmalloc(8);
  PR_REQUIRE(d_tree && d_idx && d_val && d_td && d_w && d_status && d_counter,
             "cudaMalloc failed");
  PR_OK(per_cuda_tree_init_mem(&t, cap, d_tree, per_cuda_tree_bytes(cap)));
  PR_OK(per_cuda_tree_upload(&t, &cpu, s));
  PR_CUDA(cudaMemcpy(d_idx, idx, n * 4, cudaMemcpyHostToDevice));
  PR_CUDA(cudaMemcpy(d_td, td, n * 4, cudaMemcpyHostToDevice));
  PR_CUDA(cudaMemset(d_counter, 0, 8));
  PR_OK(
      per_cuda_tree_set_td(&t, d_idx, d_td, n, 1e-6, 0.6, NULL, &sb, NULL, s));
  PR_OK(per_cuda_is_weights(NULL, n, 0.4, NULL, NULL, &sbw, NULL, s));
  d_scratch = pr_dmalloc(sb > sbw ? sb : sbw);
  PR_REQUIRE(d_scratch != NULL, "cudaMalloc of the scratch failed");
  if (sbw > sb) sb = sbw;
  PR_OK(per_cuda_tree_set_td(&t, d_idx, d_td, n, 1e-6, 0.6, d_scratch, &sb,
                             d_status, s));
  pr_api_expect(PER_OK, pr_device_status(d_status, s), "set_td");
  PR_OK(
      per_cuda_tree_sample(&t, 5, 0, d_counter, n, d_idx, d_val, d_status, s));
  pr_api_expect(PER_OK, pr_device_status(d_status, s), "tree sample");
  PR_OK(per_cuda_is_weights(d_val, n, 0.4, d_w, d_scratch, &sb, d_status, s));
  pr_api_expect(PER_OK, pr_device_status(d_status, s), "is_weights");
  PR_CUDA(cudaMemcpy(&u[0], t.d_node + 1, sizeof u[0], cudaMemcpyDeviceToHost));
  u[3] = u[0];
  u[0] = 0;
  u[1] = u[3] / 3;
  u[2] = u[3] / 2;
  PR_CUDA(cudaMemcpy(d_val, u, sizeof u, cudaMemcpyHostToDevice));
  PR_OK(per_cuda_tree_find(&t, d_val, 4, d_idx, NULL, d_status, s));
  pr_api_expect(PER_OK, pr_device_status(d_status, s), "find");
done:
  if (cpu_made) per_tree_free(&cpu);
  cudaFree(d_tree);
  cudaFree(d_idx);
  cudaFree(d_val);
  cudaFree(d_td);
  cudaFree(d_w);
  cudaFree(d_status);
  cudaFree(d_counter);
  cudaFree(d_scratch);
}

static void pr_api_buffers(cudaStream_t s, char *why, size_t why_bytes,
                           unsigned *states) {
  static uint64_t ids[64];
  per_config cfg[2];
  uint32_t k, i;
  cfg[0] = per_config_default(512, 12); // the min tree: buffer-max weights
  cfg[0].flags = PER_WEIGHTS_BUFFER_MAX;
  cfg[0].alpha = 0.7;
  cfg[0].seed = 4;
  cfg[0].max_unique = 64;
  cfg[1] = per_config_default(256, 8); // sequences of 8 steps every 4
  cfg[1].flags = PER_SEQ_CROSS_EPISODES;
  cfg[1].seq_len = 8;
  cfg[1].seq_stride = 4;
  cfg[1].seed = 5;
  cfg[1].max_unique = 16;
  for (k = 0; k < 2 && !pr_why[0]; ++k) {
    per_buffer cpu;
    pr_api_buf a;
    per_rng r;
    int seq = cfg[k].seq_len > 0;
    if (!pr_api_make(&a, &cfg[k], 64, s) ||
        per_buffer_init(&cpu, &cfg[k], NULL) != PER_OK) {
      snprintf(pr_why, sizeof pr_why, "buffer %u: could not be made", k);
      pr_api_free(&a);
      return;
    }
    per_rng_init(&r, 40 + k);
    for (i = 0; i < 24 && !pr_why[0]; ++i) {
      per_sample_opts o;
      uint32_t got;
      memset(&o, 0, sizeof o);
      pr_api_add(&cpu, &a, &r, 1 + per_rng_below(&r, 40), s);
      switch (i % 6) { // the sample's options, in turn
        case 1: o.window = 50; break;
        case 2:
          o.window = 3;
          o.flags = PER_SAMPLE_TRAJECTORIES;
          break;
        case 3: o.flags = PER_SAMPLE_UNIQUE; break;
        case 4:
          o.flags = PER_SAMPLE_BETA;
          o.beta = 0.5;
          break;
        default: break;
      }
      if (seq && i % 2 == 0) o.flags |= PER_SAMPLE_SEQUENCES;
      got = pr_api_sample(&cpu, &a, (o.flags & PER_SAMPLE_UNIQUE) ? 8 : 32, o,
                          ids, s);
      if (got)
        pr_api_update(&cpu, &a, &r, ids, got,
                      (o.flags & PER_SAMPLE_SEQUENCES) != 0, s);
    }
    if (!pr_why[0]) {
      per_cuda_counters *d_c =
          (per_cuda_counters *)pr_dmalloc(sizeof(per_cuda_counters));
      per_cuda_counters c;
      per_status st =
          d_c ? per_cuda_buffer_counters(&a.b, d_c, s) : PER_ERR_DEVICE;
      if (st == PER_OK &&
          (cudaStreamSynchronize(s) != cudaSuccess ||
           cudaMemcpy(&c, d_c, sizeof c, cudaMemcpyDeviceToHost) !=
               cudaSuccess ||
           c.size != cpu.size || c.added != cpu.added || c.step != cpu.step))
        st = PER_ERR_CORRUPT;
      pr_api_expect(PER_OK, st, "counters");
      cudaFree(d_c);
    }
    if (!pr_why[0] && !pr_compare_device(&a.b, &cpu, s, why, why_bytes))
      snprintf(pr_why, sizeof pr_why, "buffer %u after %u calls: %s", k,
               pr_api_calls, why);
    *states += !pr_why[0];
    per_buffer_free(&cpu);
    pr_api_free(&a);
  }
}

// A stream of its own for probe `name` (non-blocking), or NULL once the
// probe is reported failed.
static cudaStream_t pr_probe_stream(const char *name) {
  cudaStream_t s = NULL;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess)
    return s;
  pr_result(PR_FAIL, name, "cudaStreamCreate failed");
  return NULL;
}

static void pr_probe_api(void) {
  cudaStream_t s = NULL;
  unsigned states = 0;
  char why[400];
  double t0 = pr_now();
  pr_why[0] = 0;
  pr_api_calls = 0;
  if (!(s = pr_probe_stream("api"))) return;
  pr_api_tree(s);
  if (!pr_why[0]) pr_api_buffers(s, why, sizeof why, &states);
  if (pr_why[0]) pr_result(PR_FAIL, "api", "%s", pr_why);
  else
    pr_result(PR_PASS, "api",
              "%u calls with the CPU's statuses (tree: set_td, sample with a "
              "device counter, is_weights, find; buffers: ends, windows, "
              "trajectories, distinct draws, fixed beta, sequences with "
              "masks, update_seq, counters), %u buffers equal to per_buffer "
              "after a download; %.2f s",
              pr_api_calls, states, pr_now() - t0);
  cudaStreamDestroy(s);
}

// >>uniform: a degenerate sample's draws, block 0's lanes together
// One buffer of cfg: filled with n steps (an episode end every 7),
// sampled once with mass (o[0] without PER_SAMPLE_UNIQUE: its time into
// *t_mass), then every leaf set to 0 (zero; else to TD errors spread
// over 1000 values) and sampled with each option set of o[0..no) (times
// into t[]): ids compared with per_buffer's each time, the state at the
// end. Returns 1 when all is equal, else 0 with why.
static int pr_uniform_one(const per_config *cfg, uint32_t B,
                          const per_sample_opts *o, int no, int zero,
                          double *t_mass, double *t, cudaStream_t s, char *why,
                          size_t why_bytes) {
  pr_api_buf a;
  per_buffer cpu;
  uint32_t n = cfg->capacity, rows = B * (cfg->seq_len ? cfg->seq_len : 1u), j;
  // a call's most items (a sequence buffer's max_batch * seq_len is at
  // most PER_CUDA_MAX_BATCH); capacity is a multiple of it here
  uint32_t maxb = cfg->seq_len ? PER_CUDA_MAX_BATCH / cfg->seq_len : n, at;
  unsigned char *in = (unsigned char *)malloc((size_t)n * cfg->item_size);
  uint8_t *ends = (uint8_t *)malloc(n), *mask = (uint8_t *)malloc(rows);
  uint64_t *ids = (uint64_t *)malloc((size_t)(n > B ? n : B) * 8);
  uint64_t *ids_dev = (uint64_t *)malloc((size_t)B * 8);
  unsigned char *out = (unsigned char *)malloc((size_t)rows * cfg->item_size);
  float *td = (float *)malloc((size_t)n * 4), *w = (float *)malloc(B * 4);
  int ok = 0, k;
  per_status st;
  double t0;
  why[0] = 0;
  memset(&a, 0, sizeof a); // (both free as they are)
  memset(&cpu, 0, sizeof cpu);
#define PR_U(cond, ...)                      \
  do {                                       \
    if (!(cond)) {                           \
      snprintf(why, why_bytes, __VA_ARGS__); \
      goto out;                              \
    }                                        \
  } while (0)
  PR_U(per_buffer_init(&cpu, cfg, NULL) == PER_OK, "per_buffer_init failed");
  PR_U(in && ends && mask && ids && ids_dev && out && td && w, "host memory");
  if (maxb > n) maxb = n;
  PR_U(B <= maxb && pr_api_make(&a, cfg, maxb, s), "device buffer");
  for (j = 0; j < n * cfg->item_size; ++j) in[j] = (unsigned char)(j * 7u);
  for (j = 0; j < n; ++j) ends[j] = j % 7 == 6;
  for (at = 0; at < n; at += maxb) { // adds of maxb
    unsigned char *ia = in + (size_t)at * cfg->item_size;
    PR_U(per_buffer_add_steps(&cpu, ia, maxb, ends + at) == PER_OK,
         "add on the CPU");
    PR_U(cudaMemcpy(a.d_in, ia, (size_t)maxb * cfg->item_size,
                    cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(a.d_ends, ends + at, maxb, cudaMemcpyHostToDevice) ==
                 cudaSuccess,
         "copies");
    st = per_cuda_buffer_add_batch(&a.b, a.d_in, maxb, a.d_ends, a.d_status, s);
    PR_U(st == PER_OK && pr_device_status(a.d_status, s) == PER_OK,
         "add_batch");
  }
  for (k = -1; k < no; ++k) {
    per_sample_opts q = k < 0 ? o[0] : o[k];
    per_status want, got;
    if (k < 0) q.flags &= ~(uint32_t)PER_SAMPLE_UNIQUE;
    if (k == 0) { // every leaf 0 (eps 0, TD errors 0), maxb at a time
      for (j = 0; j < n; ++j) {
        ids[j] = (uint64_t)j | (uint64_t)cpu.gen[j] << 32;
        td[j] = zero ? 0.0f : 0.01f * (float)(1u + (j * 2654435761u) % 1000u);
      }
      for (at = 0; at < n; at += maxb) {
        want = per_buffer_update(&cpu, ids + at, td + at, maxb, NULL);
        PR_U(cudaMemcpy(a.d_ids, ids + at, (size_t)maxb * 8,
                        cudaMemcpyHostToDevice) == cudaSuccess &&
                 cudaMemcpy(a.d_td, td + at, (size_t)maxb * 4,
                            cudaMemcpyHostToDevice) == cudaSuccess,
             "copies");
        got = per_cuda_buffer_update(&a.b, a.d_ids, a.d_td, maxb, NULL,
                                     a.d_status, s);
        if (got == PER_OK) got = pr_device_status(a.d_status, s);
        PR_U(want == PER_OK && got == PER_OK, "zeroing update: %s, %s",
             pr_status_name(want), pr_status_name(got));
      }
      PR_U(!(cpu.tree.node[1] > 0) == !!zero, "the mass is %s0",
           zero ? "not " : "");
    }
    if (cfg->seq_len) q.mask = mask;
    want = per_buffer_sample(&cpu, B, &q, out, ids, w);
    if (cfg->seq_len) q.mask = a.d_mask;
    cudaStreamSynchronize(s);
    t0 = pr_now();
    got = per_cuda_buffer_sample(&a.b, B, &q, a.d_out, a.d_ids, a.d_w,
                                 a.d_status, s);
    if (got == PER_OK) got = pr_device_status(a.d_status, s);
    if (k < 0) *t_mass = pr_now() - t0;
    else t[k] = pr_now() - t0;
    PR_U(want == PER_OK && got == PER_OK, "sample %d: %s on the CPU, %s", k,
         pr_status_name(want), pr_status_name(got));
    PR_U(cudaMemcpy(ids_dev, a.d_ids, (size_t)B * 8, cudaMemcpyDeviceToHost) ==
             cudaSuccess,
         "copy of ids");
    for (j = 0; j < B && ids[j] == ids_dev[j]; ++j) {
    }
    PR_U(j == B, "sample %d: draw %u of %u: id %llx on the CPU, %llx", k, j, B,
         (unsigned long long)ids[j], (unsigned long long)ids_dev[j]);
  }
  ok = pr_compare_device(&a.b, &cpu, s, why, why_bytes);
out:
#undef PR_U
  pr_api_free(&a);
  per_buffer_free(&cpu);
  free(in);
  free(ends);
  free(mask);
  free(ids);
  free(ids_dev);
  free(out);
  free(td);
  free(w);
  return ok;
}

static void pr_probe_uniform(void) {
  uint32_t n = pr_small ? 1u << 12 : 1u << 22;
  uint32_t Bs = pr_small ? 1u << 10 : 1u << 18;
  per_config ci = per_config_default(n, 4), cs = ci;
  per_sample_opts o[2];
  double tm, ti[2], ts[2];
  cudaStream_t s = NULL;
  char why[400];
  if (!(s = pr_probe_stream("uniform"))) return;
  ci.eps = cs.eps = 0;
  ci.seed = 31;
  cs.seed = 32;
  cs.seq_len = 4;
  cs.seq_stride = 4;
  memset(o, 0, sizeof o);
  o[1].window = n / 2 + 5;
  if (!pr_uniform_one(&ci, n, o, 2, 1, &tm, ti, s, why, sizeof why)) {
    pr_result(PR_FAIL, "uniform", "items: %s", why);
  } else {
    double tms = tm;
    o[0].flags = o[1].flags = PER_SAMPLE_SEQUENCES;
    if (!pr_uniform_one(&cs, Bs, o, 2, 1, &tm, ts, s, why, sizeof why))
      pr_result(PR_FAIL, "uniform", "sequences: %s", why);
    else
      pr_result(PR_PASS, "uniform",
                "degenerate mass bitwise as per_buffer: %u items drawn from "
                "%u in %.2f ms (whole) and %.2f ms (window), against %.2f ms "
                "for a stratified sample; %u sequences in %.2f and %.2f ms, "
                "against %.2f ms",
                n, n, 1e3 * ti[0], 1e3 * ti[1], 1e3 * tms, Bs, 1e3 * ts[0],
                1e3 * ts[1], 1e3 * tm);
  }
  cudaStreamDestroy(s);
}

// >>unique: distinct draws, block 0's lanes together
static void pr_probe_unique(void) {
  uint32_t n = pr_small ? 1u << 12 : 1u << 22;
  uint32_t B = pr_small ? 1u << 10 : 1u << 16;
  per_config c = per_config_default(n, 4);
  per_sample_opts o[2];
  double tm, t[2];
  cudaStream_t s = NULL;
  char why[400];
  if (!(s = pr_probe_stream("unique"))) return;
  c.eps = 0;
  c.seed = 33;
  c.max_unique = B;
  memset(o, 0, sizeof o);
  o[0].flags = o[1].flags = PER_SAMPLE_UNIQUE;
  o[1].window = n / 2 + 5;
  if (!pr_uniform_one(&c, B, o, 2, 0, &tm, t, s, why, sizeof why))
    pr_result(PR_FAIL, "unique", "%s", why);
  else
    pr_result(PR_PASS, "unique",
              "distinct draws bitwise as per_buffer: %u of %u items in %.2f "
              "ms (whole: the lanes' first phase) and %.2f ms (a window: one "
              "thread's picks), against %.2f ms for a stratified sample",
              B, n, 1e3 * t[0], 1e3 * t[1], 1e3 * tm);
  cudaStreamDestroy(s);
}

// >>main
int main(int argc, char **argv) {
  static const struct {
    const char *name;
    void (*run)(void);
  } probes[] = {{"update", pr_probe_update},   {"litmus", pr_probe_litmus},
                {"graph", pr_probe_graph},     {"error", pr_probe_error},
                {"huge", pr_probe_huge},       {"api", pr_probe_api},
                {"uniform", pr_probe_uniform}, {"unique", pr_probe_unique}};
  cudaDeviceProp prop;
  cudaError_t e;
  int ndev = 0, a;
  size_t p;
  double t0 = pr_now();
  for (a = 1; a < argc; ++a) {
    if (strcmp(argv[a], "--small") == 0) {
      pr_small = 1;
    } else if (strcmp(argv[a], "--only") == 0 && a + 1 < argc) {
      pr_only = argv[++a];
    } else {
      fprintf(stderr, "usage: gpu_probes [--small] [--only NAME[,NAME...]]\n"
                      "  NAME: update litmus graph error huge api "
                      "uniform unique\n");
      return 2;
    }
  }
  if (pr_only) { // every name must be a probe's
    const char *q = pr_only;
    while (*q) {
      const char *end = strchr(q, ',');
      size_t k = end ? (size_t)(end - q) : strlen(q), i, known = 0;
      for (i = 0; i < sizeof probes / sizeof probes[0]; ++i)
        known |=
            strlen(probes[i].name) == k && strncmp(q, probes[i].name, k) == 0;
      if (!known) {
        fprintf(stderr, "gpu_probes: no probe named '%.*s'\n", (int)k, q);
        return 2;
      }
      q += k + (end != NULL);
    }
  }
  e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("gpu_probes: SKIP: no CUDA device (%s)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&pr_sms, cudaDevAttrMultiProcessorCount, 0) !=
          cudaSuccess) {
    printf("gpu_probes: SKIP: no CUDA device (device 0 does not answer)\n");
    return 77;
  }
  printf("gpu_probes: %s (sm_%d%d, %d SMs), PER_REAL %s%s\n", prop.name,
         prop.major, prop.minor, pr_sms, pr_real_name(),
         pr_small ? ", --small" : "");
  fflush(stdout);
  for (p = 0; p < sizeof probes / sizeof probes[0]; ++p) {
    double t = pr_now();
    if (!pr_selected(probes[p].name)) continue;
    probes[p].run();
    fprintf(stderr, "gpu_probes: %s took %.1f s\n", probes[p].name,
            pr_now() - t);
    // per_cuda refuses every call while an error is pending: the next
    // probe starts with none (a sticky error stays, and fails them all)
    e = cudaGetLastError();
    if (e != cudaSuccess)
      printf("gpu_probes: %s left %s pending (cleared)\n", probes[p].name,
             cudaGetErrorName(e));
  }
  printf("gpu_probes: PER_REAL %s: %u passed, %u failed, %u skipped; %.1f s\n",
         pr_real_name(), pr_pass, pr_fail, pr_skip, pr_now() - t0);
  return pr_fail ? 1 : 0;
}
