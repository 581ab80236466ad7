/* heap.h - the tests' counting allocator: PER_MALLOC/PER_FREE hooks that
   count calls, live blocks and the largest request per context (NULL: a
   default heap) and can fail the n-th call, to inject allocation
   failures. Include it before per.h; it defines PER_MALLOC and
   PER_FREE. */
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

static void *t_malloc(size_t sz, void *ctx) {
  t_heap *h = ctx ? (t_heap *)ctx : &t_default_heap;
  void *p;
  ++h->calls;
  if (sz > h->max_bytes) h->max_bytes = sz;
  if (h->fail_at != 0 && h->calls == h->fail_at) return NULL;
  p = malloc(sz ? sz : 1);
  if (p) ++h->live;
  return p;
}

static void t_free(void *p, void *ctx) {
  t_heap *h = ctx ? (t_heap *)ctx : &t_default_heap;
  if (p) {
    --h->live;
    ++h->frees;
  }
  free(p);
}

#define PER_MALLOC(sz, ctx) t_malloc((sz), (ctx))
#define PER_FREE(p, ctx) t_free((p), (ctx))

#endif
