// check.h - the GPU examples' error checks (example code, not per's API):
// in a function returning int, a failed CUDA call or per call prints the
// call and the reason on stderr and returns 1.
#ifndef PER_EXAMPLES_GPU_CHECK_H
#define PER_EXAMPLES_GPU_CHECK_H

#include <stdio.h>

#define CK(x)                                                    \
  do {                                                           \
    cudaError_t ck_e = (x);                                      \
    if (ck_e != cudaSuccess) {                                   \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(ck_e)); \
      return 1;                                                  \
    }                                                            \
  } while (0)
#define OK(x)                                                \
  do {                                                       \
    per_status ok_s = (x);                                   \
    if (ok_s != PER_OK) {                                    \
      fprintf(stderr, "%s: %s\n", #x, per_status_str(ok_s)); \
      return 1;                                              \
    }                                                        \
  } while (0)

#endif
