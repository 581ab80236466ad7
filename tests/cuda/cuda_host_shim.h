// cuda_host_shim.h - test only: lets per_cuda.cu compile and run as host C++.
//
// Include this before per_cuda.cu (and before anything else that uses the
// CUDA names). It provides exactly what per_cuda.cu and the shared test
// cases use, mapped to the host:
//   - __global__/__device__/__host__/__launch_bounds__ become nothing;
//     dim3, blockIdx,
//     threadIdx, blockDim, gridDim are plain globals set by the launcher;
//   - PER_CUDA_LAUNCH(kernel, grid, block, stream, args...) runs every
//     thread of every block, one after the other, each to completion. The
//     order is forwards, backwards or a fixed pseudo-random shuffle
//     (per_shim_order), so a test can check that a result does not depend on
//     the order in which threads run;
//   - integer atomicMax/atomicMin/atomicCAS/atomicExch on unsigned int and
//     unsigned long long, atomicAdd on unsigned int (memcpy on the target,
//     so any object may be the target);
//   - a race detector: per_cuda.cu's kernels access device memory through
//     PERI_CUDA_LD / PERI_CUDA_LDCG / PERI_CUDA_ST, which the shim defines
//     to log every plain load, plain store and atomic of the running
//     thread, and hand work on through PERI_CUDA_ARRIVE / PERI_CUDA_ACQUIRE
//     (an atomicAdd on a counter, and the completing arrival taking over),
//     which the shim turns into happens-before edges. Two different
//     threads of one launch conflict when one stores and the other touches
//     the same location in any way, or one loads plainly what the other
//     changes atomically, and no hand-over orders them: on a GPU those run
//     concurrently and the result would depend on timing, while a loop of
//     whole threads would silently pick one outcome. Every conflict, and
//     every access outside "device" memory, is counted in per_shim_races
//     (the first ten printed); the tests require 0. Pointer arguments of
//     a launch must point into device memory too;
//   - a block's cooperative section (per_cuda.cu's >>block): thread 0
//     of the block runs it alone, playing every lane in turn for each
//     PERI_CUDA_LANES body, in the order per_shim_order says (shuffled:
//     afresh for each body); the race detector sees each lane as its
//     thread; PERI_CUDA_SYNC is a barrier, after which every lane's
//     earlier accesses happen before every lane's later ones; shared
//     memory (PERI_CUDA_SHARED) is a registered static area, garbage and
//     forgotten by the race detector at each block's section;
//   - launches and memsets are counted (per_shim_launches,
//     per_shim_memsets), so the tests pin what each call enqueues, and
//     any one launch can be refused on purpose (per_shim_fail_at);
//   - "device memory" is malloc'd and registered; the runtime calls check
//     that the device side of a copy or memset lies inside an allocation;
//   - cudaGetDeviceCount reports one device, 0: the host;
//   - streams and graphs: cudaStreamBeginCapture records the launches,
//     memsets and copies that follow (their arguments frozen, as CUDA's
//     capture freezes them) instead of running them; cudaGraphLaunch runs
//     them again in order. What CUDA refuses while a stream captures is
//     refused here and breaks the capture, so that EndCapture fails as
//     CUDA's does: a synchronisation (cudaStreamSynchronize,
//     cudaDeviceSynchronize, cudaMemcpy, cudaMemset) and an allocation
//     (cudaMalloc, cudaFree). The shim has one stream in effect: what is
//     enqueued on any stream during a capture is captured.
//
// Running whole threads one at a time is one legal schedule of a launch.
// It is a faithful emulation only for kernels whose threads never wait for
// each other and communicate inside a launch only through atomics and
// hand-overs (the last arrival at a counter goes on; nobody spins):
// per_cuda.cu is written that way, but for its cooperative sections,
// whose lanes meet only at barriers: running each stretch between two
// barriers lane by lane is one legal schedule of it too. The shim
// enforces this as far as a host build can: __shared__, __syncthreads,
// warp intrinsics and float atomics are not defined here, so a kernel
// using them outside the section's macros does not compile in the host
// build; the race detector checks the plain-access rule on every launch
// the tests make (shared memory included); and the tests run every
// launch in three orders.
#ifndef PER_CUDA_HOST_SHIM_H
#define PER_CUDA_HOST_SHIM_H

#define PER_CUDA_HOST_SHIM 1

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include <functional>
#include <unordered_map>
#include <vector>

#define __global__
#define __launch_bounds__(...)
#define __device__
#define __host__

struct dim3 {
  unsigned x, y, z;
};

static dim3 blockIdx, threadIdx, blockDim, gridDim;

typedef struct CUstream_st *cudaStream_t;

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNoDevice = 100,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901
} cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3
};

// >>launch emulation

// 0: threads in index order, 1: reverse order, 2: shuffled (a fixed
// permutation per launch, from a counter).
static int per_shim_order = 0;
static unsigned long long per_shim_launches; // launches so far
static unsigned long long per_shim_threads;  // thread runs so far
static cudaError_t per_shim_last_error = cudaSuccess;

static inline uint64_t per_shim_mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// >>race detector
// Every plain load, plain store and atomic of the running launch, per
// 4-byte word: which thread did it, to which bytes (byte-exact, so that
// accesses of different sizes that overlap are seen, and threads that
// write neighbouring bytes - legal on a GPU: stores never touch the bytes
// beside them - are not), and the thread's release count at the time.
// Two accesses of different threads conflict (a store and anything, or a
// plain load and an atomic) unless the first happens before the second:
// its thread released (PERI_CUDA_ARRIVE on a counter) after it, and the
// second's thread acquired that counter (PERI_CUDA_ACQUIRE, which
// per_cuda.cu does only as the arrival that completed a count) before it,
// directly or through a chain of such hand-overs. Threads run whole, one
// after the other, so a happens-before edge always goes from a thread that
// ran earlier to one that runs later, and checking each access against
// those before it finds every conflict.
enum { PER_SHIM_LD = 0, PER_SHIM_ST = 1, PER_SHIM_AT = 2 };
struct per_shim_access {
  size_t thread;
  unsigned stamp; // the thread's releases before the access
  unsigned mask;  // bytes of the word
};
// The accesses of one kind to a word: the first one in place, the rest
// (rare: most words are touched by one thread) in a vector.
struct per_shim_kind {
  per_shim_access first;
  size_t n;
  std::vector<per_shim_access> more;
  per_shim_kind() : n(0) {}
  const per_shim_access &at(size_t i) const {
    return i == 0 ? first : more[i - 1];
  }
  per_shim_access &last() { return n == 1 ? first : more.back(); }
  void add(const per_shim_access &a) {
    if (n++ == 0) first = a;
    else more.push_back(a);
  }
};
struct per_shim_touch {
  per_shim_kind by[3]; // per kind
};
typedef std::unordered_map<size_t, unsigned> per_shim_clock;
static std::unordered_map<uintptr_t, per_shim_touch> per_shim_touched;
// Per thread of the launch: its releases so far and what it has acquired
// (thread -> accesses with a stamp below this happen before it); per
// counter: what the threads that arrived at it released.
static per_shim_clock per_shim_rel;
static std::unordered_map<size_t, per_shim_clock> per_shim_know;
static std::unordered_map<uintptr_t, per_shim_clock> per_shim_released;
// Per lane of a cooperative section: its releases when its block last
// met at a barrier. A barrier orders everything every lane of the block
// did before it with everything any of them does after it; it is kept
// apart from the clocks (256 lanes each knowing 256 others at every
// barrier would be slow), so an edge from a barrier to another block's
// thread through a later hand-over is not known: a race reported, never
// one missed. per_cuda.cu's sections hand nothing on after a barrier.
static per_shim_clock per_shim_bar_rel;
static unsigned long long per_shim_barriers;  // barriers met, in all
static unsigned long long per_shim_stretches; // lanes' stretches played
static size_t per_shim_thread;            // the running thread of the launch
static int per_shim_in_kernel;            // 1 while a kernel runs
static unsigned long long per_shim_races; // conflicts and stray accesses
// Atomic operations: in all, and the most any one address got in one
// launch (the hot spot), with the count per address of the running launch.
static unsigned long long per_shim_atomics;
static unsigned long long per_shim_atomic_peak;
static std::unordered_map<uintptr_t, unsigned long long> per_shim_atomic_at;
// Hand-overs (acquires) in all.
static unsigned long long per_shim_acquires;

static void per_shim_race(const char *what, const void *p) {
  if (per_shim_races++ < 10) // the first ten
    fprintf(stderr, "cuda shim: launch %llu, thread %zu: %s at %p\n",
            per_shim_launches, per_shim_thread, what, p);
}

// 1 when [p, p + n) lies inside one "device" allocation.
static inline int per_shim_on_device(const void *p, size_t n);

static inline void per_shim_merge(per_shim_clock &to,
                                  const per_shim_clock &from) {
  per_shim_clock::const_iterator i;
  for (i = from.begin(); i != from.end(); ++i)
    if (to[i->first] < i->second) to[i->first] = i->second;
}

// An access of kind k by another thread, to a byte of mask m, that does
// not happen before the running thread's present one.
static inline int per_shim_unordered(const per_shim_touch &r, int k,
                                     unsigned m) {
  size_t t = per_shim_thread, i;
  const per_shim_kind &v = r.by[k];
  const per_shim_clock *know = NULL;
  int looked = 0;
  for (i = 0; i < v.n; ++i) {
    const per_shim_access &a = v.at(i);
    per_shim_clock::const_iterator e;
    if (a.thread == t || !(a.mask & m)) continue;
    if (!looked) { // what t acquired: looked up once, when needed
      std::unordered_map<size_t, per_shim_clock>::const_iterator kn =
          per_shim_know.find(t);
      if (kn != per_shim_know.end()) know = &kn->second;
      looked = 1;
    }
    if (know && (e = know->find(a.thread)) != know->end() &&
        e->second > a.stamp)
      continue;
    if (a.thread / blockDim.x == t / blockDim.x) { // a barrier of the block
      per_shim_clock::const_iterator b = per_shim_bar_rel.find(a.thread);
      if (b != per_shim_bar_rel.end() && b->second > a.stamp) continue;
    }
    return 1;
  }
  return 0;
}

// The access of `kind` to bytes m of word w; 1 when it conflicts.
static inline int per_shim_note_word(uintptr_t w, unsigned m, int kind) {
  size_t t = per_shim_thread;
  per_shim_touch &r = per_shim_touched[w];
  per_shim_kind &v = r.by[kind];
  per_shim_clock::const_iterator rel = per_shim_rel.find(t);
  unsigned stamp = rel == per_shim_rel.end() ? 0u : rel->second;
  int clash;
  if (kind == PER_SHIM_ST) // a store clashes with anything another does
    clash = per_shim_unordered(r, PER_SHIM_LD, m) ||
            per_shim_unordered(r, PER_SHIM_ST, m) ||
            per_shim_unordered(r, PER_SHIM_AT, m);
  else if (kind == PER_SHIM_LD) // a load with another's store or atomic
    clash = per_shim_unordered(r, PER_SHIM_ST, m) ||
            per_shim_unordered(r, PER_SHIM_AT, m);
  else // an atomic with another's plain store or load
    clash = per_shim_unordered(r, PER_SHIM_ST, m) ||
            per_shim_unordered(r, PER_SHIM_LD, m);
  if (v.n && v.last().thread == t && v.last().stamp == stamp) {
    v.last().mask |= m;
  } else {
    per_shim_access a;
    a.thread = t;
    a.stamp = stamp;
    a.mask = m;
    v.add(a);
  }
  return clash;
}

static inline void per_shim_note(const void *p, size_t n, int kind) {
  uintptr_t a = (uintptr_t)p, e = a + n, w;
  int clash = 0;
  if (!per_shim_in_kernel) return;
  if (!per_shim_on_device(p, n))
    per_shim_race("access outside device memory", p);
  for (w = a & ~(uintptr_t)3; w < e; w += 4) {
    unsigned m = 0, i;
    for (i = 0; i < 4; ++i)
      if (w + i >= a && w + i < e) m |= 1u << i;
    clash |= per_shim_note_word(w, m, kind);
  }
  if (clash) // one report per access
    per_shim_race(kind == PER_SHIM_ST   ? "plain store races with a thread"
                  : kind == PER_SHIM_LD ? "plain load races with a thread"
                                        : "atomic races with a plain access",
                  p);
}

template <typename T> struct per_shim_same { typedef T type; };

template <typename T> static inline T per_shim_ld(const T *p) {
  per_shim_note(p, sizeof *p, PER_SHIM_LD);
  return *p;
}
template <typename T>
static inline void per_shim_st(T *p, typename per_shim_same<T>::type v) {
  per_shim_note(p, sizeof *p, PER_SHIM_ST);
  *p = v;
}
#define PERI_CUDA_LD(p) per_shim_ld(p)
#define PERI_CUDA_LDCG(p) per_shim_ld(p)
#define PERI_CUDA_ST(p, v) per_shim_st((p), (v))

// Pointer arguments of a kernel must be NULL or device memory.
template <typename T> static inline void per_shim_arg(T *p) {
  if (p && !per_shim_on_device(p, 1))
    per_shim_race("kernel argument is not device memory", p);
}
template <typename T> static inline void per_shim_arg(const T &) {}

// order = 0 .. n - 1 in per_shim_order's order (shuffled: Fisher-Yates
// from seed).
template <typename T>
static inline void per_shim_ordered(std::vector<T> &order, size_t n,
                                    uint64_t seed) {
  size_t t;
  order.resize(n);
  for (t = 0; t < n; ++t) order[t] = (T)(per_shim_order == 1 ? n - 1 - t : t);
  if (per_shim_order == 2) {
    uint64_t s = per_shim_mix(seed);
    for (t = n; t > 1; --t) {
      size_t r;
      T tmp;
      s = per_shim_mix(s);
      r = (size_t)(s % t);
      tmp = order[t - 1];
      order[t - 1] = order[r];
      order[r] = tmp;
    }
  }
}

template <typename Kernel, typename... Args>
static inline void per_shim_run(Kernel kernel, unsigned grid, unsigned block,
                                Args... args) {
  size_t total = (size_t)grid * block, t;
  std::vector<size_t> order;
  // a fixed seed per launch
  per_shim_ordered(order, total, per_shim_launches + 0x9e3779b97f4a7c15ull);
  {
    int check[] = {0, (per_shim_arg(args), 0)...};
    (void)check;
  }
  if (per_shim_touched.bucket_count() > 4096) {
    // a large launch's table: dropped, not cleared (clear() would walk
    // its buckets again at every small launch after it)
    std::unordered_map<uintptr_t, per_shim_touch> fresh;
    per_shim_touched.swap(fresh);
  } else {
    per_shim_touched.clear();
  }
  per_shim_rel.clear();
  per_shim_know.clear();
  per_shim_released.clear();
  per_shim_bar_rel.clear();
  per_shim_atomic_at.clear();
  per_shim_in_kernel = 1;
  gridDim.x = grid;
  gridDim.y = gridDim.z = 1;
  blockDim.x = block;
  blockDim.y = blockDim.z = 1;
  for (t = 0; t < total; ++t) {
    blockIdx.x = (unsigned)(order[t] / block);
    blockIdx.y = blockIdx.z = 0;
    threadIdx.x = (unsigned)(order[t] % block);
    threadIdx.y = threadIdx.z = 0;
    per_shim_thread = order[t];
    kernel(args...);
  }
  per_shim_in_kernel = 0;
  ++per_shim_launches;
  per_shim_threads += total;
}

// >>capture: the graph a stream capture records (see the top comment).
struct CUgraph_st {
  std::vector<std::function<void()>> ops;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> ops;
};
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
static CUgraph_st *per_shim_capture; // the graph being recorded, or NULL
static int per_shim_capture_broken;  // a refused call broke the capture
static unsigned long long per_shim_captured; // operations recorded so far

// Run op now, or record it when a capture is on.
static inline void per_shim_enqueue(const std::function<void()> &op) {
  if (per_shim_capture) {
    per_shim_capture->ops.push_back(op);
    ++per_shim_captured;
  } else {
    op();
  }
}

// A call CUDA refuses while a stream captures: breaks the capture.
static inline int per_shim_refused_in_capture(void) {
  if (!per_shim_capture) return 0;
  per_shim_capture_broken = 1;
  per_shim_last_error = cudaErrorStreamCaptureUnsupported;
  return 1;
}

// Launches refused on purpose: the per_shim_fail_at-th launch asked for
// (counted in per_shim_launch_calls; 0: none) is refused with
// cudaErrorLaunchOutOfResources, as a GPU refuses a kernel whose
// registers a block cannot have, and runs nothing.
static unsigned long long per_shim_launch_calls, per_shim_fail_at;

template <typename Kernel, typename... Args>
static inline void per_shim_launch(Kernel kernel, unsigned grid, unsigned block,
                                   cudaStream_t stream, Args... args) {
  (void)stream;
  if (++per_shim_launch_calls == per_shim_fail_at) {
    per_shim_last_error = cudaErrorLaunchOutOfResources;
    return;
  }
  if (grid == 0 || block == 0 || block > 1024) {
    per_shim_last_error = cudaErrorInvalidValue;
    return;
  }
  per_shim_enqueue(
      std::bind(per_shim_run<Kernel, Args...>, kernel, grid, block, args...));
}

#define PER_CUDA_LAUNCH(kernel, grid, block, stream, ...) \
  per_shim_launch(kernel, (grid), (block), (stream), __VA_ARGS__)

// >>atomics: each is one indivisible step of the thread that runs it.
template <typename T> static inline T per_shim_rmw_load(const T *a) {
  T v;
  per_shim_note(a, sizeof v, PER_SHIM_AT);
  if (per_shim_in_kernel) {
    unsigned long long c = ++per_shim_atomic_at[(uintptr_t)a];
    if (c > per_shim_atomic_peak) per_shim_atomic_peak = c;
    ++per_shim_atomics;
  }
  memcpy(&v, a, sizeof v);
  return v;
}
template <typename T> static inline void per_shim_rmw_store(T *a, T v) {
  memcpy(a, &v, sizeof v);
}

static inline unsigned int atomicMax(unsigned int *a, unsigned int v) {
  unsigned int old = per_shim_rmw_load(a);
  if (v > old) per_shim_rmw_store(a, v);
  return old;
}
static inline unsigned long long atomicMax(unsigned long long *a,
                                           unsigned long long v) {
  unsigned long long old = per_shim_rmw_load(a);
  if (v > old) per_shim_rmw_store(a, v);
  return old;
}
static inline unsigned int atomicMin(unsigned int *a, unsigned int v) {
  unsigned int old = per_shim_rmw_load(a);
  if (v < old) per_shim_rmw_store(a, v);
  return old;
}
static inline unsigned long long atomicMin(unsigned long long *a,
                                           unsigned long long v) {
  unsigned long long old = per_shim_rmw_load(a);
  if (v < old) per_shim_rmw_store(a, v);
  return old;
}
static inline unsigned int atomicCAS(unsigned int *a, unsigned int cmp,
                                     unsigned int v) {
  unsigned int old = per_shim_rmw_load(a);
  if (old == cmp) per_shim_rmw_store(a, v);
  return old;
}
static inline unsigned long long atomicCAS(unsigned long long *a,
                                           unsigned long long cmp,
                                           unsigned long long v) {
  unsigned long long old = per_shim_rmw_load(a);
  if (old == cmp) per_shim_rmw_store(a, v);
  return old;
}
static inline unsigned int atomicAdd(unsigned int *a, unsigned int v) {
  unsigned int old = per_shim_rmw_load(a);
  per_shim_rmw_store(a, old + v);
  return old;
}

// PERI_CUDA_ARRIVE: the atomicAdd, then a release of everything the
// thread did so far (and what it acquired) to whoever acquires c.
static inline unsigned int per_shim_arrive(unsigned int *c, unsigned int v) {
  unsigned int old = atomicAdd(c, v);
  if (per_shim_in_kernel) {
    size_t t = per_shim_thread;
    per_shim_clock &to = per_shim_released[(uintptr_t)c];
    unsigned r = per_shim_rel[t];
    std::unordered_map<size_t, per_shim_clock>::const_iterator kn =
        per_shim_know.find(t);
    if (kn != per_shim_know.end()) per_shim_merge(to, kn->second);
    if (to[t] < r + 1) to[t] = r + 1;
    per_shim_rel[t] = r + 1;
  }
  return old;
}

// PERI_CUDA_ACQUIRE: what the threads that arrived at c released now
// happens before the running thread's next accesses.
static inline void per_shim_acquire(const unsigned int *c) {
  std::unordered_map<uintptr_t, per_shim_clock>::const_iterator i;
  if (!per_shim_in_kernel) return;
  ++per_shim_acquires;
  i = per_shim_released.find((uintptr_t)c);
  if (i != per_shim_released.end())
    per_shim_merge(per_shim_know[per_shim_thread], i->second);
}
#define PERI_CUDA_ARRIVE(c, v) per_shim_arrive((c), (v))
#define PERI_CUDA_ACQUIRE(c) per_shim_acquire(c)
// (block scope or device scope: one in the shim, where every thread of a
// launch is one after the other on the host)
#define PERI_CUDA_ARRIVE_BLOCK(c, v) per_shim_arrive((c), (v))
#define PERI_CUDA_ACQUIRE_BLOCK(c) per_shim_acquire(c)

static inline unsigned int atomicExch(unsigned int *a, unsigned int v) {
  unsigned int old = per_shim_rmw_load(a);
  per_shim_rmw_store(a, v);
  return old;
}
static inline unsigned long long atomicExch(unsigned long long *a,
                                            unsigned long long v) {
  unsigned long long old = per_shim_rmw_load(a);
  per_shim_rmw_store(a, v);
  return old;
}

// >>device memory
struct per_shim_alloc {
  char *p; // 256-byte aligned, as cudaMalloc's
  size_t n;
  char *base; // what malloc returned
};
static std::vector<per_shim_alloc> per_shim_allocs;

static size_t per_shim_hit; // the allocation found last (a cache)

static inline int per_shim_inside(const per_shim_alloc &a, const char *c,
                                  size_t n) {
  return c >= a.p && c <= a.p + a.n && n <= (size_t)(a.p + a.n - c);
}

// The cooperative sections' shared memory (PERI_CUDA_SHARED): static
// areas, "device memory" for the race detector too.
static std::vector<per_shim_alloc> per_shim_shared_areas;

static inline int per_shim_on_device(const void *p, size_t n) {
  size_t i;
  const char *c = (const char *)p;
  if (per_shim_hit < per_shim_allocs.size() &&
      per_shim_inside(per_shim_allocs[per_shim_hit], c, n))
    return 1;
  for (i = 0; i < per_shim_allocs.size(); ++i)
    if (per_shim_inside(per_shim_allocs[i], c, n)) {
      per_shim_hit = i;
      return 1;
    }
  for (i = 0; i < per_shim_shared_areas.size(); ++i)
    if (per_shim_inside(per_shim_shared_areas[i], c, n)) return 1;
  return 0;
}

// >>blocks: a cooperative section (see the top comment).
// The i-th lane played of a stretch: *t, in the order of per_shim_order
// (forwards, backwards, or shuffled afresh for each stretch), becomes the
// running thread; past the last, lane 0 again and 0 (the loop of
// PERI_CUDA_LANES ends). On a GPU a stretch's lanes run at once: no
// result may depend on the order they are played in.
static std::vector<uint32_t> per_shim_lane_order;
static inline int per_shim_lane(uint32_t i, uint32_t *t) {
  size_t base = (size_t)blockIdx.x * blockDim.x;
  uint32_t n = blockDim.x;
  if (i == 0) // seeded by the stretch
    per_shim_ordered(per_shim_lane_order, n,
                     per_shim_launches * 0x100000001b3ull + per_shim_barriers +
                         ++per_shim_stretches);
  if (i < n) {
    *t = per_shim_lane_order[i];
    threadIdx.x = *t;
    per_shim_thread = base + *t;
    return 1;
  }
  threadIdx.x = 0;
  per_shim_thread = base;
  return 0;
}

// __syncthreads: every lane of the block releases (what each did so far
// happens before what any does next: per_shim_bar_rel).
static inline void per_shim_block_sync(void) {
  size_t base = (size_t)blockIdx.x * blockDim.x, t;
  for (t = base; t < base + blockDim.x; ++t)
    per_shim_bar_rel[t] = ++per_shim_rel[t];
  ++per_shim_barriers;
}

// The shared memory p of n bytes at the start of a block's section:
// registered once, then garbage again (as a new block's is) and
// forgotten by the race detector (each block has its own).
template <typename T> static inline T *per_shim_shared(T *p, size_t n) {
  size_t i;
  uintptr_t w;
  for (i = 0; i < per_shim_shared_areas.size(); ++i)
    if (per_shim_shared_areas[i].p == (char *)p) break;
  if (i == per_shim_shared_areas.size()) {
    per_shim_alloc a;
    a.p = a.base = (char *)p;
    a.n = n;
    per_shim_shared_areas.push_back(a);
  }
  memset((void *)p, 0xA5, n);
  for (w = (uintptr_t)p & ~(uintptr_t)3; w < (uintptr_t)p + n; w += 4)
    per_shim_touched.erase(w);
  return p;
}

#define PERI_CUDA_BLOCK_ALL 0
#define PERI_CUDA_BLOCK_SECTION() (threadIdx.x == 0)
#define PERI_CUDA_LANES(t) \
  for (uint32_t t##_i = 0, t = 0; per_shim_lane(t##_i, &t); ++t##_i)
#define PERI_CUDA_SYNC() per_shim_block_sync()
#define PERI_CUDA_SHARED(type, name, n) \
  static type name##_area[n];           \
  type *const name = per_shim_shared(name##_area, sizeof name##_area)

static inline cudaError_t per_shim_fail(cudaError_t e) {
  per_shim_last_error = e;
  return e;
}

static inline cudaError_t cudaMalloc(void **p, size_t n) {
  per_shim_alloc a;
  if (per_shim_refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  if (!p) return per_shim_fail(cudaErrorInvalidValue);
  a.base = (char *)malloc(n + 256);
  a.n = n;
  if (!a.base) return per_shim_fail(cudaErrorMemoryAllocation);
  a.p = a.base + (256 - (uintptr_t)a.base % 256);
  memset(a.p, 0xA5, n); // device memory starts as garbage
  per_shim_allocs.push_back(a);
  *p = a.p;
  return cudaSuccess;
}

static inline cudaError_t cudaFree(void *p) {
  size_t i;
  if (per_shim_refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  if (!p) return cudaSuccess;
  for (i = 0; i < per_shim_allocs.size(); ++i)
    if (per_shim_allocs[i].p == (char *)p) {
      free(per_shim_allocs[i].base);
      per_shim_allocs.erase(per_shim_allocs.begin() + (ptrdiff_t)i);
      return cudaSuccess;
    }
  return per_shim_fail(cudaErrorInvalidValue);
}

static inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
                                          cudaMemcpyKind kind,
                                          cudaStream_t stream) {
  int dst_dev =
      kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  int src_dev =
      kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  (void)stream;
  if (n == 0) return cudaSuccess;
  if (!dst || !src || (dst_dev && !per_shim_on_device(dst, n)) ||
      (src_dev && !per_shim_on_device(src, n)) ||
      (!dst_dev && per_shim_on_device(dst, n)) ||
      (!src_dev && per_shim_on_device(src, n)))
    return per_shim_fail(cudaErrorInvalidValue);
  per_shim_enqueue(std::bind(memmove, dst, src, n));
  return cudaSuccess;
}

static inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n,
                                     cudaMemcpyKind kind) {
  if (per_shim_refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  return cudaMemcpyAsync(dst, src, n, kind, (cudaStream_t)0);
}

// Rows of `width` bytes, device to device only (what the Python binding
// uses to move an item's fields in and out of the item rows).
static inline void per_shim_copy2d(char *dst, size_t dp, const char *src,
                                   size_t sp, size_t w, size_t h) {
  size_t r;
  for (r = 0; r < h; ++r) memmove(dst + r * dp, src + r * sp, w);
}

static inline cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch,
                                            const void *src, size_t spitch,
                                            size_t width, size_t height,
                                            cudaMemcpyKind kind,
                                            cudaStream_t stream) {
  (void)stream;
  if (width == 0 || height == 0) return cudaSuccess;
  if (kind != cudaMemcpyDeviceToDevice || !dst || !src || width > dpitch ||
      width > spitch ||
      !per_shim_on_device(dst, (height - 1) * dpitch + width) ||
      !per_shim_on_device(src, (height - 1) * spitch + width))
    return per_shim_fail(cudaErrorInvalidValue);
  per_shim_enqueue(std::bind(per_shim_copy2d, (char *)dst, dpitch,
                             (const char *)src, spitch, width, height));
  return cudaSuccess;
}

// A memset on the stream: counted with the launches (on a GPU it is one
// more node of a graph, one more step of the stream).
static unsigned long long per_shim_memsets; // memsets run so far
static inline void per_shim_memset(void *p, int v, size_t n) {
  memset(p, v, n);
  ++per_shim_memsets;
}

static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n,
                                          cudaStream_t stream) {
  (void)stream;
  if (n == 0) return cudaSuccess;
  if (!p || !per_shim_on_device(p, n))
    return per_shim_fail(cudaErrorInvalidValue);
  per_shim_enqueue(std::bind(per_shim_memset, p, v, n));
  return cudaSuccess;
}

static inline cudaError_t cudaMemset(void *p, int v, size_t n) {
  if (per_shim_refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  return cudaMemsetAsync(p, v, n, (cudaStream_t)0);
}

static inline cudaError_t cudaPeekAtLastError(void) {
  return per_shim_last_error;
}

static inline cudaError_t cudaGetLastError(void) {
  cudaError_t e = per_shim_last_error;
  per_shim_last_error = cudaSuccess;
  return e;
}

static inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  (void)stream;
  if (per_shim_refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  return per_shim_last_error;
}

static inline cudaError_t cudaDeviceSynchronize(void) {
  if (per_shim_refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
  return per_shim_last_error;
}

// >>streams and graphs (the shim runs everything in order: a stream is a
// name only)
static char per_shim_streams[64];
static unsigned per_shim_stream_count;
static inline cudaError_t cudaStreamCreate(cudaStream_t *s) {
  if (!s) return per_shim_fail(cudaErrorInvalidValue);
  *s = (cudaStream_t)(void *)&per_shim_streams[per_shim_stream_count++ % 64];
  return cudaSuccess;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  (void)s;
  return cudaSuccess;
}
static inline cudaError_t cudaStreamBeginCapture(cudaStream_t s,
                                                 cudaStreamCaptureMode mode) {
  (void)s;
  (void)mode;
  if (per_shim_capture) return per_shim_fail(cudaErrorStreamCaptureInvalidated);
  per_shim_capture = new CUgraph_st;
  per_shim_capture_broken = 0;
  return cudaSuccess;
}
// The graph recorded since BeginCapture; cudaErrorStreamCaptureInvalidated
// (and no graph) when a refused call broke the capture.
static inline cudaError_t cudaStreamEndCapture(cudaStream_t s,
                                               cudaGraph_t *graph) {
  (void)s;
  if (!per_shim_capture || !graph) return per_shim_fail(cudaErrorInvalidValue);
  if (per_shim_capture_broken) {
    delete per_shim_capture;
    per_shim_capture = NULL;
    *graph = NULL;
    return per_shim_fail(cudaErrorStreamCaptureInvalidated);
  }
  *graph = per_shim_capture;
  per_shim_capture = NULL;
  return cudaSuccess;
}
static inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec,
                                               cudaGraph_t graph,
                                               unsigned long long flags = 0) {
  (void)flags;
  if (!exec || !graph) return per_shim_fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st;
  (*exec)->ops = graph->ops;
  return cudaSuccess;
}
static inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec,
                                          cudaStream_t s) {
  size_t i;
  (void)s;
  if (!exec) return per_shim_fail(cudaErrorInvalidValue);
  for (i = 0; i < exec->ops.size(); ++i) per_shim_enqueue(exec->ops[i]);
  return cudaSuccess;
}
static inline cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
static inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

static inline cudaError_t cudaGetDeviceCount(int *n) {
  *n = 1;
  return cudaSuccess;
}

static inline cudaError_t cudaGetDevice(int *d) {
  if (!d) return per_shim_fail(cudaErrorInvalidValue);
  *d = 0;
  return cudaSuccess;
}

static inline cudaError_t cudaSetDevice(int d) {
  return d == 0 ? cudaSuccess : per_shim_fail(cudaErrorInvalidValue);
}

static inline const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error (host shim)" : "error (host shim)";
}

#endif
