// check.h - the GPU examples' error checks (example code, not per's API):
// in a function returning int, a failed CUDA call or per call prints the
// call and the reason on stderr and returns 1.
#ifndef PER_EXAMPLES_GPU_CHECK_H
#define PER_EXAMPLES_GPU_CHECK_H

#include <stdio.h>

// A call whose result has type T fails when it is not GOOD; STR names
// the failure.
#define CHECK_CALL(T, GOOD, STR, x)                  \
  do {                                               \
    T check_r = (x);                                 \
    if (check_r != (GOOD)) {                         \
      fprintf(stderr, "%s: %s\n", #x, STR(check_r)); \
      return 1;                                      \
    }                                                \
  } while (0)
#define CK(x) CHECK_CALL(cudaError_t, cudaSuccess, cudaGetErrorString, x)
#define OK(x) CHECK_CALL(per_status, PER_OK, per_status_str, x)

#endif
