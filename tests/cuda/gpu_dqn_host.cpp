// gpu_dqn_host.cpp - the GPU DQN example (examples/gpu/gpu_dqn.cu) built
// as host C++ on the CUDA shim: its kernels, per_cuda's kernels and its
// graphs run on the CPU. Runs the example with the arguments given (the
// test: --smoke), then checks what only the shim sees: no two threads of
// a per_cuda launch raced, nothing was refused during the captures, every
// device allocation was freed.
#include "cuda_host_shim.h"

#include "per_cuda.cu"

#define main gpu_dqn_main // the example's own main, called below
#include "../../examples/gpu/gpu_dqn.cu"
#undef main

int main(int argc, char **argv) {
  int rc = gpu_dqn_main(argc, argv);
  printf("gpu_dqn on the host shim: exit %d, %llu launches (%llu captured "
         "once), %llu races, %zu allocations left\n",
         rc, per_shim_launches, per_shim_captured, per_shim_races,
         per_shim_allocs.size());
  if (rc == 0 && (per_shim_races != 0 || per_shim_allocs.size() != 0 ||
                  per_shim_captured == 0))
    rc = 1;
  return rc;
}
