// test_cuda_gpu.cu - per_cuda on a real device against per.h on the CPU:
// the same cases as the host build (cuda_cases.h). Exits 77 (a skip for
// Meson) when no CUDA device can be used.
#include <cuda_runtime.h>

#define PER_IMPLEMENTATION
#include "per.h"
#include "per_cuda.h"

#include "../t.h"

#include "cuda_cases.h"

#include "cuda_buffer_cases.h"

#include "tools/cuda_asan.h"

int main(void) {
  int n = 0;
  cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    printf("cuda-gpu: SKIP: no CUDA device (%s)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    printf("cuda-gpu: device 0: %s, sm_%d%d, PER_REAL %s\n", prop.name,
           prop.major, prop.minor,
           sizeof(per_real) == sizeof(float) ? "float" : "double");
  CHECK_EQ_U(cudaStreamCreate(&cc_stream), cudaSuccess);
  cc_run_all();
  cb_run_all();
  CHECK_EQ_U(cudaStreamSynchronize(cc_stream), cudaSuccess);
  CHECK_EQ_U(cudaGetLastError(), cudaSuccess);
  cudaStreamDestroy(cc_stream);
  printf("cuda-gpu: %s\n", t_fail_count ? "NOT OK" : "OK");
  return t_done("cuda-gpu");
}
