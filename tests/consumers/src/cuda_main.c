/* A C program using per_cuda, compiled by the C compiler and linked with
   the nvcc-built library. What needs no GPU is checked always; with a CUDA
   device, one batch is sampled on it and compared with the CPU's. Without
   a device (CI, most build machines) it prints why and exits 0: that is
   the expected outcome there. Exits 1 on anything wrong. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

/* per_cuda.cu keeps a private copy of the implementation: a program may
   have its own without duplicate symbols. */
#define PER_IMPLEMENTATION
#include "per_cuda.h"

enum { N = 1000, B = 64 };

/* per_cuda_tree_sample against per_tree_sample for the same seed: same leaves,
   same values. */
static int round_trip(void) {
  per_tree tree;
  per_rng rng;
  per_cuda_tree dt;
  uint32_t idx[B], gidx[B], i;
  per_real val[B], gval[B];
  unsigned long long st = 1, *d_st = NULL;
  void *d_mem = NULL, *d_idx = NULL, *d_val = NULL;
  size_t bytes = per_cuda_tree_bytes(N);
  int bad = 1;
  per_status s = per_tree_init(&tree, N, NULL);
  for (i = 0; i < N && s == PER_OK; ++i) s = per_tree_set(&tree, i, 1 + i % 7);
  per_rng_init(&rng, 42);
  if (s == PER_OK) s = per_tree_sample(&tree, &rng, B, idx, val);
  if (s != PER_OK) {
    fprintf(stderr, "CPU tree: %s\n", per_status_str(s));
    per_tree_free(&tree);
    return 1;
  }
  if (cudaMalloc(&d_mem, bytes) != cudaSuccess ||
      cudaMalloc(&d_idx, sizeof idx) != cudaSuccess ||
      cudaMalloc(&d_val, sizeof val) != cudaSuccess ||
      cudaMalloc((void **)&d_st, sizeof st) != cudaSuccess) {
    fprintf(stderr, "cudaMalloc failed\n");
  } else if ((s = per_cuda_tree_init_mem(&dt, N, d_mem, bytes)) != PER_OK ||
             (s = per_cuda_tree_upload(&dt, &tree, 0)) != PER_OK ||
             (s = per_cuda_tree_sample(&dt, 42, 0, NULL, B, (uint32_t *)d_idx,
                                       (per_real *)d_val, d_st, 0)) != PER_OK) {
    fprintf(stderr, "per_cuda: %s\n", per_status_str(s));
  } else if (cudaMemcpy(gidx, d_idx, sizeof gidx, cudaMemcpyDeviceToHost) !=
                 cudaSuccess ||
             cudaMemcpy(gval, d_val, sizeof gval, cudaMemcpyDeviceToHost) !=
                 cudaSuccess ||
             cudaMemcpy(&st, d_st, sizeof st, cudaMemcpyDeviceToHost) !=
                 cudaSuccess) {
    fprintf(stderr, "cudaMemcpy: %s\n", cudaGetErrorString(cudaGetLastError()));
  } else if (st != 0) {
    fprintf(stderr, "per_cuda_tree_sample: device status %s\n",
            per_status_str(per_cuda_status_decode(st, NULL)));
  } else if (memcmp(idx, gidx, sizeof idx) != 0 ||
             memcmp(val, gval, sizeof val) != 0) {
    fprintf(stderr, "the GPU's batch differs from the CPU's\n");
  } else {
    printf("the GPU sampled the CPU's batch of %d, bit for bit\n", B);
    bad = 0;
  }
  cudaFree(d_st);
  cudaFree(d_val);
  cudaFree(d_idx);
  cudaFree(d_mem);
  per_tree_free(&tree);
  return bad;
}

int main(void) {
  per_cuda_tree dt;
  int devices = 0;
  cudaError_t e;
  size_t bytes = per_cuda_tree_bytes(N);

  /* No device needed for these. */
  if (per_cuda_real_bytes() != sizeof(per_real)) {
    fprintf(stderr,
            "per_cuda was built with a %u-byte PER_REAL, this file "
            "with %u\n",
            (unsigned)per_cuda_real_bytes(), (unsigned)sizeof(per_real));
    return 1;
  }
  if (bytes != 2 * 1024 * sizeof(per_real) ||
      per_cuda_tree_init_mem(&dt, N, NULL, bytes) != PER_ERR_NULL ||
      per_cuda_status_decode(0, NULL) != PER_OK) {
    fprintf(stderr,
            "per_cuda's host-side functions disagree with per_cuda.h\n");
    return 1;
  }
  printf("per_cuda: PER_REAL of %u bytes, a tree of %d leaves takes %u bytes\n",
         (unsigned)per_cuda_real_bytes(), N, (unsigned)bytes);

  /* No GPU reads as no device, or as no driver at all. */
  e = cudaGetDeviceCount(&devices);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
      (e == cudaSuccess && devices == 0)) {
    printf("no CUDA device (%s), as expected without a GPU\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return 0;
  }
  if (e != cudaSuccess) {
    fprintf(stderr, "cudaGetDeviceCount: %s\n", cudaGetErrorString(e));
    return 1;
  }
  return round_trip();
}
