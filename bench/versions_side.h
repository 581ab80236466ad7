/* versions_side.h - the two sides of bench_versions: the same program
   (versions_side.c) compiled against two copies of per.h, each side's
   per.h static to its own translation unit (PER_STATIC), so that both
   live in one process under names of their own (vs_this_*, vs_other_*).
   Only per_buffer's public calls that every per.h since 0.3 has are used,
   so that an earlier per.h builds as the other side. */
#ifndef VERSIONS_SIDE_H
#define VERSIONS_SIDE_H

#include <stddef.h>
#include <stdint.h>

/* A side's calls. open: a buffer of n 4-byte items (item i holds i),
   filled, seed `seed`, for batches up to max_b; NULL on failure, with
   the reason in err. step: the training step (per_buffer_sample of B
   ids and IS weights into the side's arrays, then per_buffer_update of
   those ids from td[0..B)); update: per_buffer_update of B given ids from
   td; last: the ids and weights of the side's last step. Each returns
   per.h's status (0 = PER_OK). check: per_buffer_check. version: per.h's
   PER_VERSION_STRING. */
#define VS_DECLARE(side)                                                  \
  void *side##_open(uint32_t n, uint32_t max_b, uint64_t seed, char *err, \
                    size_t err_len);                                      \
  int side##_step(void *h, uint32_t B, const float *td);                  \
  int side##_update(void *h, uint32_t B, const uint64_t *ids,             \
                    const float *td);                                     \
  void side##_last(const void *h, const uint64_t **ids, const float **w); \
  int side##_check(const void *h);                                        \
  const char *side##_version(void);                                       \
  void side##_close(void *h);

VS_DECLARE(vs_this)
VS_DECLARE(vs_other)

#endif
