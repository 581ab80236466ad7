/* versions_side.c - one side of bench_versions (versions_side.h): the
   per.h that the include path finds first, behind the names VS_SIDE_*.
   Built twice, with -DVS_SIDE=vs_this and -DVS_SIDE=vs_other. */
#define PER_STATIC
#define PER_IMPLEMENTATION
#include "per.h"

#include <stdio.h>
#include <stdlib.h>

#include "versions_side.h"

#ifndef VS_SIDE
#error "build with -DVS_SIDE=vs_this or -DVS_SIDE=vs_other"
#endif

#define VS_CAT2(a, b) a##_##b
#define VS_CAT(a, b) VS_CAT2(a, b)
#define VS(name) VS_CAT(VS_SIDE, name)

typedef struct vs_buf {
  per_buffer b;
  uint64_t *ids;
  float *w;
} vs_buf;

void *VS(open)(uint32_t n, uint32_t max_b, uint64_t seed, char *err,
               size_t err_len) {
  enum { CHUNK = 4096 };
  uint32_t items[CHUNK], i, j;
  per_config cfg = per_config_default(n, sizeof(uint32_t));
  per_status s;
  vs_buf *v = (vs_buf *)calloc(1, sizeof *v);
  if (!v) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  cfg.seed = seed;
  s = per_buffer_init(&v->b, &cfg, NULL);
  if (s != PER_OK) {
    snprintf(err, err_len, "per_buffer_init: %s", per_status_str(s));
    free(v);
    return NULL;
  }
  for (i = 0; i < n && s == PER_OK; i += CHUNK) {
    uint32_t m = n - i < CHUNK ? n - i : CHUNK;
    for (j = 0; j < m; ++j) items[j] = i + j;
    s = per_buffer_add_batch(&v->b, items, m);
  }
  v->ids = (uint64_t *)malloc((size_t)max_b * sizeof *v->ids);
  v->w = (float *)malloc((size_t)max_b * sizeof *v->w);
  if (s != PER_OK || !v->ids || !v->w) {
    snprintf(err, err_len, "filling %u items: %s", n,
             s != PER_OK ? per_status_str(s) : "out of memory");
    VS(close)(v);
    return NULL;
  }
  return v;
}

int VS(step)(void *h, uint32_t B, const float *td) {
  vs_buf *v = (vs_buf *)h;
  per_status s = per_buffer_sample(&v->b, B, NULL, NULL, v->ids, v->w);
  if (s == PER_OK) s = per_buffer_update(&v->b, v->ids, td, B, NULL);
  return (int)s;
}

int VS(update)(void *h, uint32_t B, const uint64_t *ids, const float *td) {
  return (int)per_buffer_update(&((vs_buf *)h)->b, ids, td, B, NULL);
}

void VS(last)(const void *h, const uint64_t **ids, const float **w) {
  *ids = ((const vs_buf *)h)->ids;
  *w = ((const vs_buf *)h)->w;
}

int VS(check)(const void *h) {
  return (int)per_buffer_check(&((const vs_buf *)h)->b);
}

const char *VS(version)(void) { return PER_VERSION_STRING; }

void VS(close)(void *h) {
  vs_buf *v = (vs_buf *)h;
  if (!v) return;
  per_buffer_free(&v->b);
  free(v->ids);
  free(v->w);
  free(v);
}
