/* test_cuda_link.c - a C user of per_cuda: compiled by the C compiler, with
   its own copy of per.h's implementation, linked with the nvcc-built
   per_cuda (which has a private PER_STATIC copy): no duplicate symbols.
   Every function of per_cuda.h is called, on paths that need no device
   (descriptors, size queries, refused arguments). */
#include <stdio.h>

#define PER_IMPLEMENTATION
#include "per.h"
#include "per_cuda.h"

int main(void) {
  per_cuda_tree dt;
  per_tree t;
  static per_real mem[16];
  static uint32_t idx[8];
  static float td[8], w[8];
  size_t bytes = 0;
  uint32_t pos = 1;
  int ok = 1;
  ok &= per_cuda_real_bytes() == sizeof(per_real);
  ok &= per_cuda_tree_bytes(7) == per_tree_bytes(7);
  ok &= per_cuda_tree_init_mem(&dt, 7, mem, sizeof mem) == PER_OK;
  ok &= dt.leaves == 8 && dt.depth == 3;
  ok &= per_cuda_tree_clear(NULL, 0) == PER_ERR_NULL;
  ok &= per_cuda_tree_upload(&dt, NULL, 0) == PER_ERR_NULL;
  ok &= per_cuda_tree_download(&dt, NULL, 0) == PER_ERR_NULL;
  ok &= per_cuda_status_decode(0, &pos) == PER_OK && pos == 0;
  ok &= per_cuda_status_decode(((unsigned long long)(0xFFFFFFFFu - 5) << 32) |
                                   PER_ERR_NAN,
                               &pos) == PER_ERR_NAN &&
        pos == 5;
  ok &= per_cuda_status_clear(NULL, 0) == PER_ERR_NULL;
  /* scratch, each part rounded up to 256 bytes: reduction records (two of
     40 bytes), the tree's one group counter, a flag and an old value per
     pair, and from TD errors the priorities */
  ok &= per_cuda_tree_set_batch(&dt, idx, mem, 8, NULL, &bytes, NULL, 0) ==
            PER_OK &&
        bytes == 4 * 256;
  bytes = 0;
  ok &= per_cuda_tree_set_td(&dt, idx, td, 100, 1e-6, 0.6, NULL, &bytes, NULL,
                             0) == PER_OK &&
        bytes == 256 + 256 + 512 + 2 * (sizeof(per_real) == 8 ? 1024 : 512);
  ok &= per_cuda_tree_set_td(&dt, idx, td, 8, -1, 0.6, NULL, &bytes, NULL, 0) ==
        PER_ERR_ARG;
  ok &= per_cuda_tree_sample(&dt, 1, 0, NULL, 0, NULL, NULL, NULL, 0) ==
        PER_ERR_NULL;
  bytes = 0;
  ok &= per_cuda_is_weights(mem, 8, 0.4, w, NULL, &bytes, NULL, 0) == PER_OK &&
        bytes == 2 * 40;
  ok &= per_cuda_is_weights(mem, 0, 0.4, w, NULL, &bytes, NULL, 0) ==
        PER_ERR_BATCH;
  ok &= per_tree_init(&t, 7, NULL) == PER_OK;
  ok &= per_tree_set(&t, 3, (per_real)2) == PER_OK && per_tree_total(&t) == 2;
  per_tree_free(&t);
  printf("cuda-link: %s\n", ok ? "OK" : "NOT OK");
  return ok ? 0 : 1;
}
