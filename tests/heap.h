/* heap.h - the tests' counting allocator: PER_MALLOC/PER_FREE hooks that
   count calls, live blocks and the largest request per context (NULL: a
   default heap) and can fail the n-th call, to inject allocation
   failures. Include it before per.h; it defines PER_MALLOC and
   PER_FREE. The counts are kept by atomic adds where the compiler has
   them (GCC, Clang): per_store.h's writer thread allocates and frees
   beside the caller's, and a plain ++ from both loses counts. */
#ifndef PER_TEST_HEAP_H
#define PER_TEST_HEAP_H

#include <stdlib.h>

typedef struct t_heap {
  long calls;       /* PER_MALLOC calls so far */
  long live;        /* allocations not freed yet */
  long frees;       /* PER_FREE calls with a non-NULL pointer */
  long fail_at;     /* fail the call with this number (1-based); 0: never */
  size_t max_bytes; /* largest single request so far */
} t_heap;

static t_heap t_default_heap; /* used when alloc_ctx is NULL */

/* *c += d, atomically where it can be; returns the new value. */
static long t_heap_add(long *c, long d) {
#if defined(__GNUC__) || defined(__clang__)
  return __atomic_add_fetch(c, d, __ATOMIC_RELAXED);
#else
  return *c += d;
#endif
}

static void *t_malloc(size_t sz, void *ctx) {
  t_heap *h = ctx ? (t_heap *)ctx : &t_default_heap;
  void *p;
  long call = t_heap_add(&h->calls, 1);
  if (sz > h->max_bytes) h->max_bytes = sz;
  if (h->fail_at != 0 && call == h->fail_at) return NULL;
  p = malloc(sz ? sz : 1);
  if (p) t_heap_add(&h->live, 1);
  return p;
}

static void t_free(void *p, void *ctx) {
  t_heap *h = ctx ? (t_heap *)ctx : &t_default_heap;
  if (p) {
    t_heap_add(&h->live, -1);
    t_heap_add(&h->frees, 1);
  }
  free(p);
}

#define PER_MALLOC(sz, ctx) t_malloc((sz), (ctx))
#define PER_FREE(p, ctx) t_free((p), (ctx))

#endif
