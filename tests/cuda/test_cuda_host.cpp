// test_cuda_host.cpp - per_cuda.cu compiled as host C++ (cuda_host_shim.h)
// and compared with per.h on the CPU: trees byte for byte, sampled indices
// exactly, every launch run with its threads forwards, backwards and
// shuffled. Runs in every CI build; needs no GPU and no nvcc.
#include "cuda_host_shim.h"

#include "per_cuda.cu"

#include "../t.h"

#include "cuda_cases.h"

#include "cuda_buffer_cases.h"

// The race detector catches what a loop of whole threads would hide.
static __global__ void host_k_store_same(uint32_t *x) {
  PERI_CUDA_ST(&x[0], (uint32_t)threadIdx.x); // every thread: one location
}
static __global__ void host_k_load_vs_atomic(unsigned int *x) {
  if (threadIdx.x == 0) (void)PERI_CUDA_LD(&x[0]);
  else atomicMax(&x[0], 1u);
}
static __global__ void host_k_private(unsigned int *x, unsigned int *m) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  PERI_CUDA_ST(&x[t], 1u); // each thread its own location,
  (void)PERI_CUDA_LD(&x[t]);
  atomicMax(m, t); // shared ones only atomically
  atomicCAS(m, 0u, 0u);
}
static __global__ void host_k_read(const unsigned int *x) {
  (void)PERI_CUDA_LD(&x[0]);
}
static __global__ void host_k_overlap(const double *v, float *w) {
  (void)PERI_CUDA_LD(&v[threadIdx.x]); // w[1] is half of v[0]
  PERI_CUDA_ST(&w[threadIdx.x], 1.0f);
}

// A hand-over: every thread writes its own word and arrives; the last to
// arrive reads them all and resets the counter. Ordered: no race. With
// `skip`, thread 0 writes but does not arrive, so the last one's read of
// its word races; with `early`, the thread that arrives first reads too,
// before the others have written.
static __global__ void host_k_handover(unsigned int *x, unsigned int *c,
                                       int skip, int early) {
  unsigned t = threadIdx.x, n = blockDim.x, i, sum = 0, old;
  PERI_CUDA_ST(&x[t], t + 1);
  if (skip && t == 0) return;
  old = PERI_CUDA_ARRIVE(c, 1u);
  if (old != n - 1 - (unsigned)skip && !(early && old == 0)) return;
  PERI_CUDA_ACQUIRE(c);
  for (i = 0; i < n; ++i) sum += PERI_CUDA_LD(&x[i]);
  if (old != 0 || !early) PERI_CUDA_ST(c, 0u);
  (void)sum;
}

// A cooperative section: each lane stores its number to shared memory,
// then reads its neighbour's, with a barrier between (sync) or not.
static __global__ void host_k_section(uint32_t *out, int sync) {
  if (!PERI_CUDA_BLOCK_SECTION()) return;
  PERI_CUDA_SHARED(uint32_t, a, PERI_CUDA_BLOCK_THREADS);
  PERI_CUDA_LANES(t) PERI_CUDA_ST(&a[t], t + 1000u * blockIdx.x);
  if (sync) PERI_CUDA_SYNC();
  PERI_CUDA_LANES(t) {
    PERI_CUDA_ST(&out[blockIdx.x * blockDim.x + t],
                 PERI_CUDA_LD(&a[(t + 1) % blockDim.x]));
  }
}

// The section of the uniform draws alone, in block 0 of the grid.
static __global__ void host_k_uniform_ranks(const per_rng *r0, uint32_t n,
                                            uint32_t B, uint32_t *out,
                                            per_rng *after) {
  per_rng r, a;
  if (blockIdx.x != 0 || !PERI_CUDA_BLOCK_SECTION()) return;
  PERI_CUDA_BLOCK_MEM(sm);
  r = PERI_CUDA_LD(r0);
  a = peri_cuda_uniform_ranks(&r, n, B, out, sm);
  if (threadIdx.x == 0) PERI_CUDA_ST(after, a);
}

// A stream at block `counter` of seed, with `avail` (0 .. 4) words of
// the block before it still to come.
static per_rng host_stream(uint64_t seed, uint64_t counter, uint32_t avail) {
  per_rng r;
  per_rng_init(&r, seed);
  r.counter = counter;
  if (avail) {
    per_rng_block(r.seed, r.counter - 1, r.buf);
    r.avail = avail;
  }
  return r;
}

// Floyd's positions by the lanes alone, in block 0 of the grid.
static __global__ void host_k_floyd(const per_rng *r0, uint32_t N, uint32_t B,
                                    unsigned long long *set, uint32_t *out,
                                    per_rng *after) {
  per_rng r, a;
  if (blockIdx.x != 0 || !PERI_CUDA_BLOCK_SECTION()) return;
  PERI_CUDA_BLOCK_MEM(sm);
  r = PERI_CUDA_LD(r0);
  peri_cuda_floyd(N, B, &r, set, out, sm, &a);
  if (threadIdx.x == 0) PERI_CUDA_ST(after, a);
}

// peri_cuda_floyd against per.h's peri_plan_floyd, pick by pick, and the
// stream after them byte for byte: N = B (every draw's value below its
// j: long chains of picks that are some earlier draw's j), N a little
// above B and far above it, and N = 3 * 2^30 and 2^32 - 1, where a word
// is rejected a quarter and half of the time (a round cut short); streams
// with 0 to 4 words left in their block; batches within one round, at
// its edge and over several rounds.
static void host_case_floyd(void) {
  static const uint32_t Bs[] = {1, 2, 255, 256, 257, 1000, 3000};
  const uint32_t most = 3000;
  per_rng *d_r = (per_rng *)cc_dmalloc(2 * sizeof(per_rng));
  uint32_t *d_out = (uint32_t *)cc_dmalloc(most * sizeof(uint32_t));
  unsigned long long *d_set = (unsigned long long *)cc_dmalloc(
      ((size_t)1 << peri_cat_hbits(most)) * sizeof(unsigned long long));
  uint32_t *got = (uint32_t *)malloc(most * sizeof(uint32_t));
  uint32_t *want = (uint32_t *)malloc(most * sizeof(uint32_t));
  uint32_t *set = (uint32_t *)malloc(((size_t)1 << peri_cat_hbits(most)) * 4);
  unsigned long long chained = 0, rejected = 0, bad = 0;
  uint32_t a, b, c, k;
  if (!d_r || !d_out || !d_set || !got || !want || !set) return;
  for (c = 0; c < 5; ++c)
    for (a = 0; a <= 4; ++a)
      for (b = 0; b < sizeof Bs / sizeof Bs[0]; ++b) {
        uint32_t B = Bs[b];
        uint32_t N = c == 0   ? B
                     : c == 1 ? B + 3
                     : c == 2 ? 40 * B
                     : c == 3 ? 3u << 30
                              : 0xFFFFFFFFu;
        per_rng r, after;
        peri_plan p;
        uint64_t words;
        memset(&p, 0, sizeof p);
        p.nvalid = N;
        p.B = B;
        r = host_stream(7000 + 10 * c + a, 5 + b, a);
        cc_h2d(d_r, &r, sizeof r);
        PER_CUDA_LAUNCH(host_k_floyd, 2, PERI_CUDA_BLOCK_THREADS, cc_stream,
                        (const per_rng *)d_r, N, B, d_set, d_out, d_r + 1);
        cc_d2h(got, d_out, B * sizeof(uint32_t));
        cc_d2h(&after, d_r + 1, sizeof after);
        words = 4 * r.counter - r.avail;
        peri_plan_floyd(&p, &r, set, want);
        rejected += 4 * r.counter - r.avail - words - B;
        for (k = 0; k < B; ++k) {
          chained += want[k] == N - B + k && k > 0;
          if (got[k] != want[k] && bad++ < 5)
            fprintf(stderr, "N %u, avail %u, B %u: pick %u is %u, not %u\n", N,
                    a, B, k, got[k], want[k]);
        }
        CHECK_MSG(memcmp(&after, &r, sizeof r) == 0,
                  "N %u, avail %u, B %u: the stream after differs", N, a, B);
      }
  CHECK_EQ_U(bad, 0);
  CHECK(chained > 10000 && rejected > 1000);
  printf("  Floyd's picks of a section: %llu picks of a j, %llu words "
         "rejected on the way\n",
         chained, rejected);
  free(got);
  free(want);
  free(set);
  cudaFree(d_r);
  cudaFree(d_out);
  cudaFree(d_set);
}

// The picks of given draws alone, in block 0 of the grid.
static __global__ void host_k_floyd_picks(uint32_t N, uint32_t B,
                                          unsigned long long *set,
                                          uint32_t *idx) {
  if (blockIdx.x != 0 || !PERI_CUDA_BLOCK_SECTION()) return;
  PERI_CUDA_BLOCK_MEM(sm);
  peri_cuda_floyd_picks(N, B, set, idx, sm);
}

// peri_cuda_floyd_picks on draws made to order, against Floyd's rule
// applied in turn (a pick is j when its draw is taken, per.h's set): the
// chain where draw i is j_{i-1} (every pick j, each taken because the
// one before picked its j: a chain through 255 lanes of a round, the
// doubling's longest, and on across rounds), draws that alternate
// between that and a fresh value, and random draws below each j + 1 for
// N = B and N = B + 5.
static void host_case_floyd_picks(void) {
  enum { B = 1000 };
  uint32_t *d_idx = (uint32_t *)cc_dmalloc(B * sizeof(uint32_t));
  unsigned long long *d_set = (unsigned long long *)cc_dmalloc(
      ((size_t)1 << peri_cat_hbits(B)) * sizeof(unsigned long long));
  uint32_t t[B], got[B], want[B],
      *set = (uint32_t *)malloc(((size_t)1 << peri_cat_hbits(B)) * 4);
  uint32_t pat, i, bad = 0, longest = 0;
  per_rng r;
  per_rng_init(&r, 4711);
  if (!d_idx || !d_set || !set) return;
  for (pat = 0; pat < 4; ++pat) {
    uint32_t N = pat == 3 ? B + 5 : B, base = N - B, hb, run = 0;
    for (i = 0; i < B; ++i)
      t[i] = pat == 0   ? (i ? base + i - 1 : 0)
             : pat == 1 ? (i % 2 ? base + i - 1 : i / 2)
                        : per_rng_below(&r, base + i + 1);
    hb = peri_set_reset(set, B);
    for (i = 0; i < B; ++i) { // Floyd's rule
      want[i] = t[i];
      if (!peri_set_insert(set, hb, t[i])) {
        peri_set_insert(set, hb, base + i);
        want[i] = base + i;
      }
      run = want[i] == base + i && t[i] != want[i] ? run + 1 : 0;
      if (run > longest) longest = run;
    }
    cc_h2d(d_idx, t, sizeof t);
    PER_CUDA_LAUNCH(host_k_floyd_picks, 1, PERI_CUDA_BLOCK_THREADS, cc_stream,
                    N, (uint32_t)B, d_set, d_idx);
    cc_d2h(got, d_idx, sizeof got);
    for (i = 0; i < B; ++i)
      if (got[i] != want[i] && bad++ < 5)
        fprintf(stderr, "pattern %u: pick %u is %u, not %u\n", pat, i, got[i],
                want[i]);
  }
  CHECK_EQ_U(bad, 0);
  CHECK(longest >= 900); // the chain ran on through the rounds
  free(set);
  cudaFree(d_idx);
  cudaFree(d_set);
}

// peri_cuda_uniform_ranks against per.h's peri_rng_below, value by value,
// and the stream after them byte for byte: n that reject few words or
// many (2^32 mod n: 2^30 of every 2^32 words for 3 * 2^30, almost half
// for 2^31 + 1), streams with 0 to 4 words left in their block, batches
// within one round of 1024 words, at its edge and over several rounds.
static void host_case_uniform_ranks(void) {
  static const uint32_t ns[] = {
      1, 2, 3, 1000, 3u << 30, (1u << 31) + 1, 0xFFFFFFFFu};
  static const uint32_t Bs[] = {1, 7, 1023, 1024, 1025, 3000};
  const uint32_t most = 3000;
  per_rng *d_r = (per_rng *)cc_dmalloc(2 * sizeof(per_rng));
  uint32_t *d_out = (uint32_t *)cc_dmalloc(most * sizeof(uint32_t));
  uint32_t *got = (uint32_t *)malloc(most * sizeof(uint32_t));
  unsigned long long rejected = 0, bad = 0;
  uint32_t a, i, b, k;
  if (!d_r || !d_out || !got) return;
  for (i = 0; i < sizeof ns / sizeof ns[0]; ++i)
    for (a = 0; a <= 4; ++a)
      for (b = 0; b < sizeof Bs / sizeof Bs[0]; ++b) {
        per_rng r, after;
        uint64_t words;
        r = host_stream(1000 + 10 * i + a, 77 + b, a);
        cc_h2d(d_r, &r, sizeof r);
        PER_CUDA_LAUNCH(host_k_uniform_ranks, 2, PERI_CUDA_BLOCK_THREADS,
                        cc_stream, (const per_rng *)d_r, ns[i], Bs[b], d_out,
                        d_r + 1);
        cc_d2h(got, d_out, Bs[b] * sizeof(uint32_t));
        cc_d2h(&after, d_r + 1, sizeof after);
        words = 4 * r.counter - r.avail;
        for (k = 0; k < Bs[b]; ++k) {
          uint32_t want = peri_rng_below(&r, ns[i]);
          if (got[k] != want && bad++ < 5)
            fprintf(stderr, "n %u, avail %u, B %u: draw %u is %u, not %u\n",
                    ns[i], a, Bs[b], k, got[k], want);
        }
        rejected += 4 * r.counter - r.avail - words - Bs[b];
        CHECK_MSG(memcmp(&after, &r, sizeof r) == 0,
                  "n %u, avail %u, B %u: the stream after differs (counter "
                  "%llu vs %llu, avail %u vs %u)",
                  ns[i], a, Bs[b], (unsigned long long)after.counter,
                  (unsigned long long)r.counter, after.avail, r.avail);
      }
  CHECK_EQ_U(bad, 0);
  CHECK(rejected > 1000); // the rejected words were there to skip
  printf("  uniform draws of a section: %llu words rejected on the way\n",
         rejected);
  free(got);
  cudaFree(d_r);
  cudaFree(d_out);
}

// peri_cuda_stream_real (a distinct draw's real, found from its index
// without the draws before it) against per.h's peri_rng_real called in
// turn, bit for bit: streams with 0 to 4 words left in their block (a
// double's two words then lie across two blocks every other block), and
// the place peri_cuda_stream_at gives the last word, against where the
// walk left the stream.
static void host_case_stream_reals(void) {
  uint32_t a, e, bad = 0, across = 0;
  for (a = 0; a <= 4; ++a) {
    per_rng r0 = host_stream(5000 + a, 11, a), r;
    r = r0;
    for (e = 0; e < 64; ++e) {
      per_real want = peri_rng_real(&r), got = peri_cuda_stream_real(&r0, e);
      uint64_t k;
      uint32_t j;
      per_rng after;
      if (memcmp(&want, &got, sizeof want) != 0 && bad++ < 5)
        fprintf(stderr, "avail %u: real %u is %.17g, not %.17g\n", a, e,
                (double)got, (double)want);
      peri_cuda_stream_at(&r0, (e + 1) * PERI_CUDA_REAL_WORDS - 1, &k, &j);
      after = peri_cuda_stream_after(&r0, k, j);
      CHECK_MSG(memcmp(&after, &r, sizeof r) == 0,
                "avail %u: the stream after real %u differs", a, e);
      across += PERI_CUDA_REAL_WORDS == 2 && r.avail == 3;
    }
  }
  CHECK_EQ_U(bad, 0);
  CHECK(PERI_CUDA_REAL_WORDS == 1 || across > 50);
}

static void host_case_race_detector(void) {
  unsigned int *d = (unsigned int *)cc_dmalloc(64 * sizeof(unsigned int));
  double *dv = (double *)cc_dmalloc(2 * sizeof(double));
  static unsigned int host_mem[4];
  unsigned long long r0 = per_shim_races;
  int o;
  if (!d || !dv) return;
  per_shim_order = 0;
  fprintf(stderr, "(reports of deliberate races follow)\n");
  PER_CUDA_LAUNCH(host_k_private, 2, 31, cc_stream, d, d + 63);
  CHECK_EQ_U(per_shim_races - r0, 0);
  CHECK_EQ_U(cudaMemset(d, 0, 64 * sizeof(unsigned int)), cudaSuccess);
  for (o = 0; o < 3; ++o) { // hand-overs, in every order: ordered
    per_shim_order = o;
    PER_CUDA_LAUNCH(host_k_handover, 1, 16, cc_stream, d, d + 32, 0, 0);
  }
  per_shim_order = 0;
  CHECK_EQ_U(per_shim_races - r0, 0);
  // a writer that never arrives: its word is read unordered
  PER_CUDA_LAUNCH(host_k_handover, 1, 16, cc_stream, d, d + 32, 1, 0);
  CHECK_EQ_U(per_shim_races - r0, 1);
  CHECK_EQ_U(cudaMemset(d + 32, 0, sizeof(unsigned int)), cudaSuccess);
  // the first arrival reads before thread 1 has written
  PER_CUDA_LAUNCH(host_k_handover, 1, 2, cc_stream, d, d + 32, 0, 1);
  CHECK_EQ_U(per_shim_races - r0, 2);
  CHECK_EQ_U(cudaMemset(d, 0, 64 * sizeof(unsigned int)), cudaSuccess);
  PER_CUDA_LAUNCH(host_k_store_same, 1, 2, cc_stream, d); // store vs store
  CHECK_EQ_U(per_shim_races - r0, 3);
  PER_CUDA_LAUNCH(host_k_load_vs_atomic, 1, 2, cc_stream, d); // load/atomic
  CHECK_EQ_U(per_shim_races - r0, 4);
  PER_CUDA_LAUNCH(host_k_store_same, 1, 1, cc_stream, d); // one thread: fine
  CHECK_EQ_U(per_shim_races - r0, 4);
  // a host pointer: refused as an argument and again at the access
  PER_CUDA_LAUNCH(host_k_read, 1, 1, cc_stream, host_mem);
  CHECK_EQ_U(per_shim_races - r0, 6);
  // accesses of different sizes that overlap
  PER_CUDA_LAUNCH(host_k_overlap, 1, 2, cc_stream, (const double *)dv,
                  (float *)dv);
  CHECK_EQ_U(per_shim_races - r0, 7);
  { // a cooperative section: a barrier orders its lanes, within a block
    uint32_t *o = (uint32_t *)cc_dmalloc(2 * PERI_CUDA_BLOCK_THREADS * 4);
    uint32_t h[2 * PERI_CUDA_BLOCK_THREADS], t;
    if (!o) return;
    for (t = 0; t < 3; ++t) {
      per_shim_order = (int)t;
      PER_CUDA_LAUNCH(host_k_section, 2, PERI_CUDA_BLOCK_THREADS, cc_stream, o,
                      1);
    }
    per_shim_order = 0;
    CHECK_EQ_U(per_shim_races - r0, 7);
    cc_d2h(h, o, sizeof h);
    for (t = 0; t < 2 * PERI_CUDA_BLOCK_THREADS; ++t)
      CHECK_EQ_U(h[t], (t + 1) % PERI_CUDA_BLOCK_THREADS +
                           1000u * (t / PERI_CUDA_BLOCK_THREADS));
    // without the barrier: lane t reads what lane t + 1 stores, unordered
    PER_CUDA_LAUNCH(host_k_section, 1, PERI_CUDA_BLOCK_THREADS, cc_stream, o,
                    0);
    CHECK(per_shim_races - r0 > 7);
    cudaFree(o);
  }
  cudaFree(d);
  cudaFree(dv);
  per_shim_races = r0;
}

// Launches and memsets each call enqueues: what a CUDA graph of it holds.
static unsigned long long host_steps(void) {
  return per_shim_launches + per_shim_memsets;
}

// The tree's own calls, at every depth: an update is a memset (its
// scratch) and 2 launches of ceil(n / 256) blocks (O(n log L) work, never
// a pass over the tree); a sample 1 launch (2 with a device counter); the
// weights a memset and 2.
static void host_case_launches(void) {
  static const uint32_t caps[] = {1, 33, 1000, 65539, 1u << 21};
  size_t c;
  for (c = 0; c < sizeof caps / sizeof caps[0]; ++c) {
    cc_dev_tree d;
    cc_batch b;
    size_t sb;
    unsigned long long l0, t0;
    unsigned long long *d_counter;
    uint32_t j, n = 300;
    per_rng r;
    if (!cc_dev_tree_make(&d, caps[c]) || !cc_batch_make(&b, n)) return;
    d_counter = (unsigned long long *)cc_dmalloc(8);
    per_rng_init(&r, c);
    sb = b.scratch_bytes;
    CHECK_OK(per_cuda_tree_clear(&d.t, cc_stream));
    cc_batch_fill(&b, &r, n, caps[c], 0);
    for (j = 0; j < n; ++j) b.val[j] = 1;
    cc_batch_upload(&b, n);
    l0 = host_steps();
    t0 = per_shim_threads;
    CHECK_OK(per_cuda_tree_set_batch(&d.t, b.d_idx, b.d_val, n, b.d_scratch,
                                     &sb, b.d_status, cc_stream));
    CHECK_EQ_U(host_steps() - l0, 3);
    CHECK_EQ_U(per_shim_threads - t0, 2 * 512ull);
    l0 = host_steps();
    CHECK_OK(per_cuda_tree_set_td(&d.t, b.d_idx, b.d_td, n, 0.01, 0.6,
                                  b.d_scratch, &sb, b.d_status, cc_stream));
    CHECK_EQ_U(host_steps() - l0, 3);
    l0 = host_steps();
    CHECK_OK(per_cuda_tree_sample(&d.t, 1, 2, NULL, 64, b.d_idx, NULL,
                                  b.d_status, cc_stream));
    CHECK_EQ_U(host_steps() - l0, 1);
    l0 = host_steps();
    CHECK_OK(per_cuda_tree_sample(&d.t, 1, 2, d_counter, 64, b.d_idx, NULL,
                                  b.d_status, cc_stream));
    CHECK_EQ_U(host_steps() - l0, 2);
    l0 = host_steps();
    CHECK_OK(per_cuda_is_weights(b.d_val, 64, 0.5, b.d_td, b.d_scratch, &sb,
                                 b.d_status, cc_stream));
    CHECK_EQ_U(host_steps() - l0, 3);
    CHECK_STATUS(per_cuda_status_decode(cc_status_word(b.d_status), NULL),
                 PER_OK);
    cudaFree(d_counter);
    cc_batch_free(&b);
    cc_dev_tree_free(&d);
  }
}

// The update at the size a GPU trainer uses, counted: N = 2^24 leaves, B =
// 65536 pairs, random (with duplicates) and contiguous. A memset and 2
// launches (the first design took 1 + 4 + 24 = 29, the second 10), at
// most 40 atomics on any one address in a launch (a counter: the pairs
// below one node of level 5, or the 32 nodes below one node higher up,
// or one reduction record's block), and the tree is byte for byte
// per_tree_set_batch's.
static void host_case_update_targets(void) {
  const uint32_t C = 1u << 24, B = 65536;
  cc_dev_tree d;
  cc_batch b;
  per_tree cpu;
  per_rng r;
  size_t sb;
  int round;
  if (per_tree_init(&cpu, C, NULL) != PER_OK) return;
  if (!cc_dev_tree_make(&d, C) || !cc_batch_make(&b, B)) return;
  per_rng_init(&r, 0x7a59u);
  cc_random_tree(&cpu, &d, &r, 0);
  for (round = 0; round < 2; ++round) {
    unsigned long long l0 = host_steps(), a0 = per_shim_atomics;
    uint32_t j;
    per_shim_atomic_peak = 0;
    cc_batch_fill(&b, &r, B, C, 0);
    if (round == 1) // contiguous: every leaf of a run of B
      for (j = 0; j < B; ++j) b.idx[j] = 12345u + j;
    cc_batch_upload(&b, B);
    sb = b.scratch_bytes;
    CHECK_OK(per_cuda_tree_set_batch(&d.t, b.d_idx, b.d_val, B, b.d_scratch,
                                     &sb, b.d_status, cc_stream));
    CHECK_OK(per_tree_set_batch(&cpu, b.idx, b.val, B));
    cc_same_tree(round ? "2^24, contiguous" : "2^24, random", &cpu,
                 cc_download(&d));
    CHECK_EQ_U(host_steps() - l0, 3);
    CHECK_MSG(per_shim_atomic_peak <= 40, "%llu atomics on one address",
              per_shim_atomic_peak);
    printf("  update at N = 2^24, B = %u %s: %llu launches with the memset, "
           "%llu atomics, at most %llu on one address in a launch\n",
           B, round ? "contiguous" : "random", host_steps() - l0,
           per_shim_atomics - a0, per_shim_atomic_peak);
  }
  per_tree_free(&cpu);
  cc_batch_free(&b);
  cc_dev_tree_free(&d);
}

// A replay-buffer step against per_buffer at 2^20 and 2^21 slots (2^21:
// as many level groups as 2^24, five): add B,
// sample B with weights and gather, update B, each call 2 launches and no
// memset, 6 in all, at any depth and batch size; the most atomics on one
// address in a launch is a block's reduction record (256) or a counter
// (at most 32 arrivals above level 5).
static void host_case_buffer_step(void) {
  static const uint32_t Cs[] = {1u << 20, 1u << 21}, Bs[] = {4096, 300};
  size_t c;
  for (c = 0; c < 2; ++c) {
    const uint32_t C = Cs[c], B = Bs[c];
    per_config cfg = per_config_default(C, 8);
    uint32_t j, k;
    cb_dev d;
    cb_host h;
    per_buffer cpu;
    per_rng r;
    unsigned long long l0, peak = 0, steps[3] = {0, 0, 0};
    cfg.seed = 99;
    cfg.flags = c == 0 ? PER_WEIGHTS_BUFFER_MAX : 0;
    if (!cb_dev_make(&d, &cfg, B)) return;
    REQUIRE(per_buffer_init(&cpu, &cfg, NULL) == PER_OK);
    memset(&h, 0, sizeof h);
    REQUIRE(cb_host_make(&h, B, B, 8));
    per_rng_init(&r, 5);
    for (k = 0; k < 3; ++k) {
      for (j = 0; j < B * 8; ++j) h.items[j] = (unsigned char)per_rng_u32(&r);
      cc_h2d(d.d_in, h.items, (size_t)B * 8);
      per_shim_atomic_peak = 0;
      l0 = host_steps();
      CHECK_OK(per_cuda_buffer_add_batch(&d.b, d.d_in, B, NULL, d.d_status,
                                         cc_stream));
      steps[0] = host_steps() - l0;
      CHECK_OK(per_buffer_add_batch(&cpu, h.items, B));
      l0 = host_steps();
      CHECK_OK(per_cuda_buffer_sample(&d.b, B, NULL, d.d_out, d.d_ids, d.d_w,
                                      d.d_status, cc_stream));
      steps[1] = host_steps() - l0;
      CHECK_OK(per_buffer_sample(&cpu, B, NULL, h.out_cpu, h.ids, h.w_cpu));
      cc_d2h(h.ids_dev, d.d_ids, (size_t)B * 8);
      CHECK(memcmp(h.ids, h.ids_dev, (size_t)B * 8) == 0);
      for (j = 0; j < B; ++j) h.td[j] = cb_td(&r, 0);
      cc_h2d(d.d_ids, h.ids, (size_t)B * 8);
      cc_h2d(d.d_td, h.td, (size_t)B * 4);
      l0 = host_steps();
      CHECK_OK(per_cuda_buffer_update(&d.b, d.d_ids, d.d_td, B, d.d_stale,
                                      d.d_status, cc_stream));
      steps[2] = host_steps() - l0;
      CHECK_OK(per_buffer_update(&cpu, h.ids, h.td, B, NULL));
      if (per_shim_atomic_peak > peak) peak = per_shim_atomic_peak;
      CHECK_STATUS(per_cuda_status_decode(cc_status_word(d.d_status), NULL),
                   PER_OK);
    }
    cb_compare(c ? "a buffer step at 2^21" : "a buffer step at 2^20", &cpu, &d);
    CHECK_EQ_U(steps[0], 2);
    CHECK_EQ_U(steps[1], 2);
    CHECK_EQ_U(steps[2], 2);
    CHECK(peak <= PERI_CUDA_BLOCK_THREADS);
    printf("  buffer at N = 2^%d, B = %u: add %llu, sample %llu, update %llu "
           "launches (%llu in a step); at most %llu atomics on one address\n",
           c ? 21 : 20, B, steps[0], steps[1], steps[2],
           steps[0] + steps[1] + steps[2], peak);
    per_buffer_free(&cpu);
    cb_dev_free(&d);
    cb_host_free(&h);
  }
}

// An R2D2 step against per_buffer at 256,000 slots holding 51,200 steps,
// sequences of 80 steps every 40: add 256 steps (with an episode end),
// sample 64 sequences
// with weights, gather and masks, update_seq their 64 * 80 TD errors.
// With sequences an add and an update_seq are 4 launches each (the
// item tree's 2, then the sequences' refresh and settle), a sample 2:
// 10 in a step. At most 256 atomics on one address, as for items, while
// the draws spread over many sequences (each step is in 2 of them; a
// leaf that many pairs write takes an atomic per pair).
static void host_case_seq_step(void) {
  const uint32_t C = 256000, LEN = 80, ADD = 256, B = 64;
  per_config cfg = per_config_default(C, 8);
  uint32_t j, k;
  cb_dev d;
  cb_host h;
  per_buffer cpu;
  per_rng r;
  per_sample_opts o;
  unsigned long long l0, peak = 0, steps[3] = {0, 0, 0};
  cfg.seed = 7;
  cfg.seq_len = LEN;
  cfg.seq_stride = LEN / 2;
  cfg.flags = PER_WEIGHTS_BUFFER_MAX;
  if (!cb_dev_make(&d, &cfg, ADD)) return;
  REQUIRE(per_buffer_init(&cpu, &cfg, NULL) == PER_OK);
  memset(&h, 0, sizeof h);
  memset(&o, 0, sizeof o);
  o.flags = PER_SAMPLE_SEQUENCES;
  REQUIRE(cb_host_make(&h, ADD, ADD * LEN, 8));
  per_rng_init(&r, 6);
  for (k = 0; k < 200; ++k) { // 51,200 steps, uploaded: 1280 sequences
    for (j = 0; j < ADD * 8; ++j) h.items[j] = (unsigned char)per_rng_u32(&r);
    CHECK_OK(per_buffer_add_steps(&cpu, h.items, ADD, NULL));
  }
  CHECK_OK(per_cuda_buffer_upload(&d.b, &cpu, cc_stream));
  for (k = 0; k < 4; ++k) {
    for (j = 0; j < ADD * 8; ++j) h.items[j] = (unsigned char)per_rng_u32(&r);
    for (j = 0; j < ADD; ++j) h.ends[j] = j == 100 ? PER_END_TERMINATED : 0;
    cc_h2d(d.d_in, h.items, (size_t)ADD * 8);
    cc_h2d(d.d_ends, h.ends, ADD);
    per_shim_atomic_peak = 0;
    l0 = host_steps();
    CHECK_OK(per_cuda_buffer_add_batch(&d.b, d.d_in, ADD, d.d_ends, d.d_status,
                                       cc_stream));
    steps[0] = host_steps() - l0;
    CHECK_OK(per_buffer_add_steps(&cpu, h.items, ADD, h.ends));
    o.mask = d.d_mask;
    l0 = host_steps();
    CHECK_OK(per_cuda_buffer_sample(&d.b, B, &o, d.d_out, d.d_ids, d.d_w,
                                    d.d_status, cc_stream));
    steps[1] = host_steps() - l0;
    o.mask = h.mask_cpu;
    CHECK_OK(per_buffer_sample(&cpu, B, &o, h.out_cpu, h.ids, h.w_cpu));
    cc_d2h(h.ids_dev, d.d_ids, (size_t)B * 8);
    cc_d2h(h.out_dev, d.d_out, (size_t)B * LEN * 8);
    cc_d2h(h.mask_dev, d.d_mask, (size_t)B * LEN);
    CHECK(memcmp(h.ids, h.ids_dev, (size_t)B * 8) == 0);
    CHECK(memcmp(h.out_cpu, h.out_dev, (size_t)B * LEN * 8) == 0);
    CHECK(memcmp(h.mask_cpu, h.mask_dev, (size_t)B * LEN) == 0);
    for (j = 0; j < B * LEN; ++j) h.td[j] = cb_td(&r, 0);
    cc_h2d(d.d_ids, h.ids, (size_t)B * 8);
    cc_h2d(d.d_td, h.td, (size_t)B * LEN * 4);
    l0 = host_steps();
    CHECK_OK(per_cuda_buffer_update_seq(&d.b, d.d_ids, d.d_td, B, d.d_stale,
                                        d.d_status, cc_stream));
    steps[2] = host_steps() - l0;
    CHECK_OK(per_buffer_update_seq(&cpu, h.ids, h.td, B, NULL));
    if (per_shim_atomic_peak > peak) peak = per_shim_atomic_peak;
    CHECK_STATUS(per_cuda_status_decode(cc_status_word(d.d_status), NULL),
                 PER_OK);
  }
  cb_compare("an R2D2 step at 256,000 slots", &cpu, &d);
  CHECK_EQ_U(steps[0], 4);
  CHECK_EQ_U(steps[1], 2);
  CHECK_EQ_U(steps[2], 4);
  CHECK(peak <= PERI_CUDA_BLOCK_THREADS);
  printf("  sequences at N = 256000, L = %u, B = %u: add %llu, sample %llu, "
         "update_seq %llu launches (%llu in a step); at most %llu atomics on "
         "one address\n",
         LEN, B, steps[0], steps[1], steps[2], steps[0] + steps[1] + steps[2],
         peak);
  per_buffer_free(&cpu);
  cb_dev_free(&d);
  cb_host_free(&h);
}

// The IS weights' minimum takes one atomic per block on the grid's record
// (the rest on the blocks' own), and a sample of an empty tree reports its
// status with one store (no atomic).
static void host_case_weights_sample_atomics(void) {
  const uint32_t B = 65536;
  cc_dev_tree d;
  cc_batch b;
  per_rng r;
  size_t sb;
  uint32_t j;
  unsigned long long a0;
  if (!cc_dev_tree_make(&d, 1000) || !cc_batch_make(&b, B)) return;
  per_rng_init(&r, 0x3e1u);
  for (j = 0; j < B; ++j) b.val[j] = (per_real)(1 + per_rng_below(&r, 1000));
  cc_batch_upload(&b, B);
  sb = b.scratch_bytes;
  per_shim_atomic_peak = 0;
  CHECK_OK(per_cuda_is_weights(b.d_val, B, 0.5, b.d_td, b.d_scratch, &sb,
                               b.d_status, cc_stream));
  CHECK_STATUS(per_cuda_status_decode(cc_status_word(b.d_status), NULL),
               PER_OK);
  CHECK_EQ_U(per_shim_atomic_peak, PERI_CUDA_BLOCK_THREADS);
  CHECK_OK(per_cuda_tree_clear(&d.t, cc_stream));
  per_shim_atomic_peak = 0;
  a0 = per_shim_atomics;
  CHECK_OK(per_cuda_tree_sample(&d.t, 1, 0, NULL, B, b.d_idx, b.d_val,
                                b.d_status, cc_stream));
  CHECK_STATUS(per_cuda_status_decode(cc_status_word(b.d_status), NULL),
               PER_ERR_EMPTY);
  CHECK_EQ_U(per_shim_atomics - a0, 0);
  cc_batch_free(&b);
  cc_dev_tree_free(&d);
}

// A CUDA runtime failure (here: a "device" pointer that is host memory) is
// reported as PER_ERR_DEVICE, and an update refused that way before
// its first launch changes nothing.
static void host_case_runtime_errors(void) {
  static unsigned long long host_word, host_scratch[512];
  cc_dev_tree d;
  cc_batch b;
  per_tree cpu;
  size_t sb;
  uint32_t j;
  CHECK_EQ_U(per_cuda_last_error(), 0); // no call has failed on the device
  if (!cc_dev_tree_make(&d, 50) || !cc_batch_make(&b, 8)) return;
  if (per_tree_init(&cpu, 50, NULL) != PER_OK) return;
  CHECK_OK(per_cuda_tree_clear(&d.t, cc_stream));
  for (j = 0; j < 8; ++j) {
    b.idx[j] = j;
    b.val[j] = 1;
  }
  cc_batch_upload(&b, 8);
  CHECK_STATUS(per_cuda_status_clear(&host_word, cc_stream), PER_ERR_DEVICE);
  sb = sizeof host_scratch; // a host array as scratch: its memset fails
  CHECK_STATUS(per_cuda_tree_set_batch(&d.t, b.d_idx, b.d_val, 8, host_scratch,
                                       &sb, b.d_status, cc_stream),
               PER_ERR_DEVICE);
  // a call's own failure is its status: it is not left pending, so the
  // next call goes ahead
  CHECK_EQ_U(cudaPeekAtLastError(), cudaSuccess);
  CHECK_STATUS(per_cuda_tree_download(&d.t, &cpu, cc_stream), PER_OK);
  // per_cuda_last_error names the cudaError_t behind PER_ERR_DEVICE
  CHECK_EQ_U(per_cuda_last_error(), cudaErrorInvalidValue);
  per_tree_clear(&cpu);
  cc_same_tree("after a refused memset", &cpu, cc_download(&d));
  per_tree_free(&cpu);
  cc_batch_free(&b);
  cc_dev_tree_free(&d);
}

static __global__ void host_k_nothing(unsigned int x) { (void)x; }

// >>case: an error already pending (here a launch of the caller's with
// 2048 threads a block, never cleared) refuses every call before it
// enqueues anything, leaves the error pending and names it; once the
// caller clears it the same call goes ahead.
static void host_case_pending(void) {
  per_config cfg = per_config_default(16, 4);
  unsigned long long before;
  unsigned char items[16];
  per_buffer cpu;
  cb_dev d;
  memset(items, 7, sizeof items);
  if (!cb_dev_make(&d, &cfg, 4)) return;
  CHECK_OK(per_buffer_init(&cpu, &cfg, NULL));
  cc_h2d(d.d_in, items, sizeof items);
  PER_CUDA_LAUNCH(host_k_nothing, 1u, 2048u, cc_stream, 0u);
  before = per_shim_launch_calls;
  CHECK_STATUS(
      per_cuda_buffer_add_batch(&d.b, d.d_in, 4, NULL, d.d_status, cc_stream),
      PER_ERR_DEVICE);
  CHECK_STATUS(per_cuda_tree_clear(&d.b.tree, cc_stream), PER_ERR_DEVICE);
  CHECK_EQ_U(per_shim_launch_calls, before); // nothing enqueued
  CHECK_EQ_U(per_cuda_last_error(), cudaErrorInvalidValue);
  CHECK_EQ_U(cudaPeekAtLastError(), cudaErrorInvalidValue); // still pending
  CHECK_EQ_U(cudaGetLastError(), cudaErrorInvalidValue);    // the caller's
  CHECK_OK(
      per_cuda_buffer_add_batch(&d.b, d.d_in, 4, NULL, d.d_status, cc_stream));
  CHECK_OK(per_buffer_add_steps(&cpu, items, 4, NULL));
  CHECK_STATUS(cb_status(&d), PER_OK);
  cb_compare("after a pending error, cleared", &cpu, &d);
  per_buffer_free(&cpu);
  cb_dev_free(&d);
}

// The fault script's calls, each with its inputs from its own seed (so
// they are the same whatever happened before): 0 add, 1 sample (items,
// weights), 2 update of the last sample's ids, 3 sample of sequences,
// 4 update_seq of the last sequence sample, 5 distinct sample.
static const int hf_script[] = {0, 0, 1, 2, 0, 3, 4, 5, 2, 0, 1};
enum { HF_OPS = sizeof hf_script / sizeof hf_script[0], HF_MAXB = 6 };

// Op i on the device (returns what the call returned) and, when that is
// PER_OK, on the CPU, the status words and sample ids compared.
static per_status hf_op(per_buffer *cpu, cb_dev *d, cb_host *h, uint32_t i) {
  int op = hf_script[i];
  uint32_t isz = cpu->cfg.item_size, j, n = 1 + i % HF_MAXB, len;
  per_sample_opts o;
  per_status rc, want = PER_OK;
  uint32_t stale = 0;
  per_rng r;
  per_rng_init(&r, 100 + i);
  memset(&o, 0, sizeof o);
  len = cpu->cfg.seq_len ? cpu->cfg.seq_len : 1u;
  if (op == 0) {
    for (j = 0; j < n * isz; ++j) h->items[j] = (unsigned char)per_rng_u32(&r);
    cc_h2d(d->d_in, h->items, (size_t)n * isz);
    rc = per_cuda_buffer_add_batch(&d->b, d->d_in, n, NULL, d->d_status,
                                   cc_stream);
    if (rc == PER_OK) want = per_buffer_add_steps(cpu, h->items, n, NULL);
  } else if (op == 1 || op == 3 || op == 5) {
    if (op == 3 && !cpu->cfg.seq_len) op = 1;
    o.flags = op == 3 ? PER_SAMPLE_SEQUENCES : op == 5 ? PER_SAMPLE_UNIQUE : 0;
    rc = per_cuda_buffer_sample(&d->b, n, &o, d->d_out, d->d_ids, d->d_w,
                                d->d_status, cc_stream);
    if (rc == PER_OK) {
      want = per_buffer_sample(cpu, n, &o, h->out_cpu, h->ids, h->w_cpu);
      h->seq_ids = op == 3;
      if (want == PER_OK) {
        cc_d2h(h->ids_dev, d->d_ids, (size_t)n * 8);
        CHECK(memcmp(h->ids, h->ids_dev, (size_t)n * 8) == 0);
      }
    }
  } else {
    int seq = op == 4 && h->seq_ids;
    for (j = 0; j < n * len; ++j) h->td[j] = cb_td(&r, 0);
    cc_h2d(d->d_ids, h->ids, (size_t)n * 8);
    cc_h2d(d->d_td, h->td, (size_t)n * len * 4);
    rc = seq ? per_cuda_buffer_update_seq(&d->b, d->d_ids, d->d_td, n,
                                          d->d_stale, d->d_status, cc_stream)
             : per_cuda_buffer_update(&d->b, d->d_ids, d->d_td, n, d->d_stale,
                                      d->d_status, cc_stream);
    if (rc == PER_OK)
      want = seq ? per_buffer_update_seq(cpu, h->ids, h->td, n, &stale)
                 : per_buffer_update(cpu, h->ids, h->td, n, &stale);
  }
  if (rc == PER_OK) CHECK_STATUS(cb_status(d), want);
  return rc;
}

// >>case: a launch refused at each launch of every call of a script, in
// turn (the shim's per_shim_fail_at). The call returns PER_ERR_DEVICE,
// per_cuda_last_error names the refusal and nothing stays pending. Then
// the buffer is either exactly per_buffer's state without that call, or
// it says it is not: its download is PER_ERR_CORRUPT and its calls report
// PER_ERR_CORRUPT and change nothing, until an upload of the CPU's state,
// after which the script goes on equal to the CPU's. Never silently apart.
// Tree calls likewise: either the tree is as before the call, or the
// call's status word reads PER_ERR_CORRUPT.
static void host_case_faults(void) {
  static const uint32_t seq_lens[] = {0, 4};
  unsigned long long clean = 0, broken = 0, injected = 0;
  uint32_t c;
  for (c = 0; c < 2; ++c) {
    per_config cfg = per_config_default(32, 8);
    unsigned long long launches, f, start;
    cb_host h;
    cfg.seed = 5 + c;
    cfg.flags = c ? 0 : PER_WEIGHTS_BUFFER_MAX;
    cfg.seq_len = seq_lens[c];
    cfg.seq_stride = c ? 2 : 0;
    memset(&h, 0, sizeof h);
    REQUIRE(cb_host_make(&h, HF_MAXB, cb_rows(&cfg, HF_MAXB), cfg.item_size));
    for (f = 0;; ++f) { // f = 0: no refusal, to count the launches
      per_buffer cpu;
      cb_dev d;
      uint32_t i;
      int hit = 0;
      if (!cb_dev_make(&d, &cfg, HF_MAXB)) break;
      CHECK_OK(per_buffer_init(&cpu, &cfg, NULL));
      h.seq_ids = 0;
      start = per_shim_launch_calls;
      per_shim_fail_at = f ? start + f : 0;
      for (i = 0; i < HF_OPS; ++i) {
        per_buffer got;
        per_status s;
        if (hf_op(&cpu, &d, &h, i) == PER_OK) continue;
        hit = 1;
        ++injected;
        per_shim_fail_at = 0;
        CHECK_EQ_U(per_cuda_last_error(), cudaErrorLaunchOutOfResources);
        CHECK_EQ_U(cudaPeekAtLastError(), cudaSuccess);
        CHECK_OK(per_buffer_init(&got, &cfg, NULL));
        s = per_cuda_buffer_download(&d.b, &got, cc_stream);
        if (s == PER_OK) { // as if the call had not been made
          ++clean;
          cb_same_state("a call refused before any change", &cpu, &got);
        } else {
          ++broken;
          CHECK_STATUS(s, PER_ERR_CORRUPT);
          CHECK_STATUS(cb_status(&d), PER_ERR_CORRUPT);
          CHECK_OK(per_cuda_buffer_add_batch(&d.b, d.d_in, 1, NULL, d.d_status,
                                             cc_stream));
          CHECK_STATUS(cb_status(&d), PER_ERR_CORRUPT);
          CHECK_OK(per_cuda_buffer_sample(&d.b, 1, NULL, d.d_out, d.d_ids,
                                          d.d_w, d.d_status, cc_stream));
          CHECK_STATUS(cb_status(&d), PER_ERR_CORRUPT);
          CHECK_STATUS(per_cuda_buffer_download(&d.b, &got, cc_stream),
                       PER_ERR_CORRUPT);
          CHECK_OK(per_cuda_buffer_upload(&d.b, &cpu, cc_stream));
          cb_compare("a broken buffer after an upload", &cpu, &d);
        }
        per_buffer_free(&got);
      }
      launches = per_shim_launch_calls - start;
      per_shim_fail_at = 0;
      cb_compare("the fault script's end", &cpu, &d);
      per_buffer_free(&cpu);
      cb_dev_free(&d);
      if (f > 0 && !hit) { // past the script's last launch
        CHECK_EQ_U(f, launches + 1);
        break;
      }
      if (f == 0)
        printf("  faults: the script (seq_len %u) makes %llu "
               "launches\n",
               cfg.seq_len, launches);
    }
    cb_host_free(&h);
  }
  // the trees' calls: a refusal at each launch of each
  {
    cc_dev_tree d;
    cc_batch b;
    per_tree cpu;
    per_rng r;
    per_real *before;
    unsigned long long *d_counter = (unsigned long long *)cc_dmalloc(8);
    uint32_t call, j;
    float *d_w = (float *)cc_dmalloc(8 * 4);
    REQUIRE(cc_dev_tree_make(&d, 50) && cc_batch_make(&b, 8) && d_counter &&
            d_w);
    REQUIRE(per_tree_init(&cpu, 50, NULL) == PER_OK);
    before = (per_real *)malloc(per_cuda_tree_bytes(50));
    REQUIRE(before != NULL);
    per_rng_init(&r, 77);
    cc_random_tree(&cpu, &d, &r, 0);
    cc_batch_fill(&b, &r, 8, 50, 10);
    cc_batch_upload(&b, 8);
    for (call = 0; call < 5; ++call)
      for (j = 1; j <= 2; ++j) {
        size_t sb = b.scratch_bytes;
        per_status s = PER_OK;
        memcpy(before, cc_download(&d), per_cuda_tree_bytes(50));
        per_shim_fail_at = per_shim_launch_calls + j;
        if (call == 0)
          s = per_cuda_tree_set_batch(&d.t, b.d_idx, b.d_val, 8, b.d_scratch,
                                      &sb, b.d_status, cc_stream);
        else if (call == 1)
          s = per_cuda_tree_set_td(&d.t, b.d_idx, b.d_td, 8, 0.01, 0.6,
                                   b.d_scratch, &sb, b.d_status, cc_stream);
        else if (call == 2)
          s = per_cuda_tree_sample(&d.t, 3, 0, d_counter, 8, b.d_idx, b.d_val,
                                   b.d_status, cc_stream);
        else if (call == 3)
          s = per_cuda_tree_find(&d.t, b.d_val, 8, b.d_idx, NULL, b.d_status,
                                 cc_stream);
        else
          s = per_cuda_is_weights(b.d_val, 8, 0.5, d_w, b.d_scratch, &sb,
                                  b.d_status, cc_stream);
        per_shim_fail_at = 0;
        CHECK_STATUS(s, PER_ERR_DEVICE);
        CHECK_EQ_U(cudaPeekAtLastError(), cudaSuccess);
        ++injected;
        if (memcmp(before, cc_download(&d), per_cuda_tree_bytes(50)) == 0) {
          ++clean;
        } else {
          ++broken;
          CHECK_STATUS(per_cuda_status_decode(cc_status_word(b.d_status), NULL),
                       PER_ERR_CORRUPT);
          CHECK_OK(per_cuda_tree_upload(&d.t, &cpu, cc_stream));
        }
        cc_batch_upload(&b, 8); // (a sample or find wrote idx)
      }
    free(before);
    per_tree_free(&cpu);
    cudaFree(d_counter);
    cudaFree(d_w);
    cc_batch_free(&b);
    cc_dev_tree_free(&d);
  }
  printf("  faults: %llu launches refused; afterwards %llu states equal to "
         "the CPU's, %llu marked broken\n",
         injected, clean, broken);
  CHECK(clean > 0 && broken > 0);
}

// The shim's stream capture: captured work runs only when the graph is
// launched (arguments as at capture), and what CUDA refuses during a
// capture (a synchronisation, an allocation) breaks it as on a GPU, so a
// call that waits for the device cannot pass the buffer's graph test.
static __global__ void host_k_add(unsigned int *x, unsigned int v) {
  PERI_CUDA_ST(&x[threadIdx.x], PERI_CUDA_LD(&x[threadIdx.x]) + v);
}

// peri_cuda_descend (three levels per round trip) finds per_tree_descend's
// leaf for every u: trees of 1 to 2^11 leaves with runs of zero leaves,
// u on every leaf's prefix boundary and one ulp either side, 0, the
// total, past it, negative and NaN.
static void host_case_descend(void) {
  static const uint32_t caps[] = {1, 2, 3, 4, 5, 7, 8, 9, 31, 33, 100, 2048};
  per_rng r;
  size_t c;
  per_rng_init(&r, 0xd35c);
  for (c = 0; c < sizeof caps / sizeof caps[0]; ++c) {
    per_tree t;
    uint32_t i, k, mism = 0, n = 0;
    per_real pre = 0;
    if (per_tree_init(&t, caps[c], NULL) != PER_OK) return;
    for (i = 0; i < caps[c]; ++i) { // about a third zero, in runs
      per_real v = per_rng_below(&r, 3) == 0 ? (per_real)0
                                             : per_rng_real(&r) + (per_real)0.5;
      if (i % 16 < 5 && caps[c] > 16) v = 0;
      CHECK_OK(per_tree_set(&t, i, v));
    }
    for (i = 0; i <= caps[c]; ++i) {
      per_real us[6];
      us[0] = pre;
      us[1] = nextafter(pre, (per_real)-1);
      us[2] = nextafter(pre, (per_real)1e30);
      us[3] = per_tree_total(&t) * per_rng_real(&r);
      us[4] = i == 0 ? (per_real)-1 : per_tree_total(&t) * (per_real)2;
      us[5] = i == 0 ? (per_real)NAN : per_tree_total(&t);
      for (k = 0; k < 6; ++k, ++n)
        mism += peri_cuda_descend(t.node, t.leaves, us[k]) !=
                per_tree_descend(t.node, t.leaves, us[k]);
      if (i < caps[c]) pre += t.node[t.leaves + i];
    }
    CHECK_EQ_U(mism, 0);
    CHECK(n == 6 * (caps[c] + 1));
    per_tree_free(&t);
  }
}

static void host_case_capture(void) {
  unsigned int *d = (unsigned int *)cc_dmalloc(4 * sizeof(unsigned int));
  unsigned int h[4] = {1, 2, 3, 4}, v = 10;
  cudaStream_t s;
  cudaGraph_t g = NULL;
  cudaGraphExec_t e = NULL;
  void *p = NULL;
  if (!d) return;
  CHECK_EQ_U(cudaStreamCreate(&s), cudaSuccess);
  CHECK_EQ_U(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice), cudaSuccess);
  CHECK_EQ_U(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal),
             cudaSuccess);
  PER_CUDA_LAUNCH(host_k_add, 1, 4, s, d, v);
  v = 1000; // frozen in the graph at 10
  CHECK_EQ_U(cudaMemsetAsync(d, 0, 4, s), cudaSuccess);
  CHECK_EQ_U(cudaStreamEndCapture(s, &g), cudaSuccess);
  CHECK_EQ_U(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
  CHECK(h[0] == 1 && h[3] == 4); // nothing ran yet
  CHECK_EQ_U(cudaGraphInstantiate(&e, g, 0), cudaSuccess);
  CHECK_EQ_U(cudaGraphLaunch(e, s), cudaSuccess);
  CHECK_EQ_U(cudaGraphLaunch(e, s), cudaSuccess);
  CHECK_EQ_U(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
  CHECK(h[0] == 0 && h[1] == 22 && h[3] == 24); // in order, twice
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  // refused inside a capture: each breaks it
  CHECK_EQ_U(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal),
             cudaSuccess);
  CHECK_EQ_U(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  CHECK_EQ_U(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  CHECK(g == NULL);
  CHECK_EQ_U(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal),
             cudaSuccess);
  CHECK_EQ_U(cudaMalloc(&p, 8), cudaErrorStreamCaptureUnsupported);
  CHECK_EQ_U(cudaMemcpy(h, d, 4, cudaMemcpyDeviceToHost),
             cudaErrorStreamCaptureUnsupported);
  CHECK_EQ_U(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  CHECK(p == NULL);
  CHECK_EQ_U(cudaGetLastError(), cudaErrorStreamCaptureInvalidated);
  cudaStreamDestroy(s);
  cudaFree(d);
}

// With --once (the sanitizer build's run, meson.build): the cases in one
// thread order (shuffled) instead of three, and without the 2^24 update,
// whose launch counts the 2^21 cases pin at the same depth; every other
// case as without it. The three orders are for the race detector and run
// in every build without sanitizers.
int main(int argc, char **argv) {
  static const char *names[] = {"forwards", "backwards", "shuffled"};
  int order, once = argc > 1 && strcmp(argv[1], "--once") == 0;
  if (argc > 1 && !once) {
    fprintf(stderr, "usage: %s [--once]\n", argv[0]);
    return 2;
  }
  printf("cuda-host: per_cuda.cu built as host C++, PER_REAL %s%s\n",
         sizeof(per_real) == sizeof(float) ? "float" : "double",
         once ? " (--once: one thread order, no 2^24 update)" : "");
  for (order = once ? 2 : 0; order < 3; ++order) {
    unsigned before = t_fail_count;
    unsigned long long races = per_shim_races;
    per_shim_order = order;
    cc_run_all();
    cb_run_all();
    CHECK_EQ_U(per_shim_races - races, 0);
    printf("  threads run %s: %s (%llu races)\n", names[order],
           t_fail_count == before ? "OK" : "NOT OK", per_shim_races - races);
  }
  host_case_launches();
  if (!once) host_case_update_targets();
  host_case_weights_sample_atomics();
  host_case_buffer_step();
  host_case_seq_step();
  host_case_race_detector();
  host_case_capture();
  host_case_runtime_errors();
  host_case_pending();
  host_case_faults();
  host_case_descend();
  host_case_uniform_ranks();
  host_case_stream_reals();
  host_case_floyd();
  host_case_floyd_picks();
  CHECK_EQ_U(sizeof(peri_cuda_acc), 40); // the scratch sizes the cases expect
  // grid sizes up to the largest sample (B = UINT32_MAX) do not overflow
  CHECK_EQ_U(peri_cuda_blocks_for(1), 1);
  CHECK_EQ_U(peri_cuda_blocks_for(256), 1);
  CHECK_EQ_U(peri_cuda_blocks_for(257), 2);
  CHECK_EQ_U(peri_cuda_blocks_for(UINT32_MAX), 16777216);
  CHECK_EQ_U(per_shim_races, 0);
  CHECK_EQ_U(per_shim_allocs.size(), 0); // every "device" buffer was freed
  CHECK_EQ_U(cudaGetLastError(), cudaSuccess);
  printf("  %llu launches, %llu thread runs, %llu block barriers\n",
         per_shim_launches, per_shim_threads, per_shim_barriers);
  return t_done("cuda-host");
}
