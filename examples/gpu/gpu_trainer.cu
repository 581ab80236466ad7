// gpu_trainer.cu - a training loop that keeps the priority tree on the GPU.
//
// The toy problem: N stored items (x_i, y_i) with y = 3x + noise, and a
// "learner" with one parameter theta whose TD error on item i is
// y_i - theta * x_i. Every step runs on the device with no host round trip:
//
//   per_cuda_tree_sample      B indices, stratified, counter kept on the device
//   per_cuda_is_weights  w_j = (N P_j)^-beta / max_k (N P_k)^-beta
//   gather, learn        the items of the batch; TD errors; theta += step
//   per_cuda_tree_set_td   new priorities (|td| + eps)^alpha
//
// The step is captured into a CUDA graph and replayed. beta is a kernel
// argument, so each epoch captures the step again with its new beta and
// updates the executable graph in place (cudaGraphExecUpdate). The host
// looks at the device once per epoch. Exits 77 (a skip) without a device.
#include <cuda_runtime.h>

#include <stdio.h>

#define PER_IMPLEMENTATION
#include "per.h"
#include "per_cuda.h"
#include "check.h"

#define N (1u << 16) // items in the buffer
#define B 256u       // batch
#define EPOCHS 20
#define STEPS 100 // graph replays per epoch

// The items, from per.h's counter-based generator (usable on the device).
__global__ void make_items(float *x, float *y) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x, w[4];
  if (i >= N) return;
  per_rng_block(7, i, w);
  x[i] = 2 * per_u01f(w[0]) - 1;
  y[i] = 3 * x[i] + 0.1f * (per_u01f(w[1]) - 0.5f);
}

// The replay buffer's part: copy the sampled items into the batch.
__global__ void gather(const uint32_t *idx, const float *x, const float *y,
                       float *bx, float *by) {
  uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= B) return;
  bx[j] = x[idx[j]];
  by[j] = y[idx[j]];
}

// The toy learner (one thread: a fixed summation order, deterministic): TD
// errors with the current theta, then one IS-weighted gradient step.
__global__ void learn(const float *bx, const float *by, const float *w,
                      float *td, float *theta) {
  float g = 0, th = *theta;
  uint32_t j;
  for (j = 0; j < B; ++j) {
    td[j] = by[j] - th * bx[j];
    g += w[j] * td[j] * bx[j];
  }
  *theta = th + 0.5f * g / B;
}

// Each per_cuda call overwrites its own status word; keep the first error
// of any step in a sticky word that the host reads once per epoch.
__global__ void keep_error(const unsigned long long *status,
                           unsigned long long *sticky) {
  int k;
  for (k = 0; k < 3 && *sticky == 0; ++k) *sticky = status[k];
}

struct trainer {
  per_cuda_tree tree;
  unsigned long long *d_counter, *d_status, *d_sticky;
  uint32_t *d_idx;
  per_real *d_val; // leaf values of the draws
  float *d_x, *d_y, *d_bx, *d_by, *d_w, *d_td, *d_theta;
  void *d_scratch;
  size_t scratch_bytes;
};

// One training step: only enqueues work on the stream (capturable).
static per_status step(trainer *t, double beta, cudaStream_t st) {
  per_status s;
  s = per_cuda_tree_sample(&t->tree, 42, 0, t->d_counter, B, t->d_idx, t->d_val,
                           &t->d_status[0], st);
  if (s == PER_OK)
    s = per_cuda_is_weights(t->d_val, B, beta, t->d_w, t->d_scratch,
                            &t->scratch_bytes, &t->d_status[1], st);
  if (s != PER_OK) return s;
  gather<<<(B + 127) / 128, 128, 0, st>>>(t->d_idx, t->d_x, t->d_y, t->d_bx,
                                          t->d_by);
  learn<<<1, 1, 0, st>>>(t->d_bx, t->d_by, t->d_w, t->d_td, t->d_theta);
  s = per_cuda_tree_set_td(&t->tree, t->d_idx, t->d_td, B, 1e-6, 0.6,
                           t->d_scratch, &t->scratch_bytes, &t->d_status[2],
                           st);
  keep_error<<<1, 1, 0, st>>>(t->d_status, t->d_sticky);
  return s;
}

int main(void) {
  trainer t;
  per_tree host;
  cudaStream_t st;
  cudaGraphExec_t exec = NULL;
  size_t bytes = per_cuda_tree_bytes(N), sb;
  void *d_tree;
  int ndev = 0, epoch, k;
  float theta = 0;
  unsigned long long sticky = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("gpu_trainer: SKIP: no CUDA device\n");
    return 77;
  }
  CK(cudaStreamCreate(&st));

  // The tree: every item enters with priority 1 (the maximum so far), built
  // on the host and copied to the device once; from then on it stays there.
  OK(per_tree_init(&host, N, NULL));
  for (k = 0; k < (int)N; ++k) OK(per_tree_set(&host, (uint32_t)k, 1));
  CK(cudaMalloc(&d_tree, bytes));
  OK(per_cuda_tree_init_mem(&t.tree, N, d_tree, bytes));
  OK(per_cuda_tree_upload(&t.tree, &host, st));

  CK(cudaMalloc((void **)&t.d_counter, 8));
  CK(cudaMalloc((void **)&t.d_status, 3 * 8));
  CK(cudaMalloc((void **)&t.d_sticky, 8));
  CK(cudaMalloc((void **)&t.d_idx, B * sizeof(uint32_t)));
  CK(cudaMalloc((void **)&t.d_x, N * sizeof(float)));
  CK(cudaMalloc((void **)&t.d_y, N * sizeof(float)));
  CK(cudaMalloc((void **)&t.d_bx, B * sizeof(float)));
  CK(cudaMalloc((void **)&t.d_by, B * sizeof(float)));
  CK(cudaMalloc((void **)&t.d_val, B * sizeof(per_real)));
  CK(cudaMalloc((void **)&t.d_w, B * sizeof(float)));
  CK(cudaMalloc((void **)&t.d_td, B * sizeof(float)));
  CK(cudaMalloc((void **)&t.d_theta, sizeof(float)));
  CK(cudaMemsetAsync(t.d_counter, 0, 8, st));
  CK(cudaMemsetAsync(t.d_sticky, 0, 8, st));
  CK(cudaMemsetAsync(t.d_theta, 0, sizeof(float), st));
  // valid indices even if a sample failed (its outputs are then unwritten;
  // the sticky status says so at the end of the epoch)
  CK(cudaMemsetAsync(t.d_idx, 0, B * sizeof(uint32_t), st));
  make_items<<<(N + 255) / 256, 256, 0, st>>>(t.d_x, t.d_y);

  // Two-phase scratch: ask both users, allocate the larger once.
  OK(per_cuda_tree_set_td(&t.tree, t.d_idx, t.d_td, B, 0, 0, NULL,
                          &t.scratch_bytes, t.d_status, st));
  OK(per_cuda_is_weights(t.d_val, B, 0, t.d_w, NULL, &sb, t.d_status, st));
  if (sb > t.scratch_bytes) t.scratch_bytes = sb;
  CK(cudaMalloc(&t.d_scratch, t.scratch_bytes));

  for (epoch = 0; epoch < EPOCHS; ++epoch) {
    double beta = 0.4 + 0.6 * epoch / (EPOCHS - 1);
    per_real total;
    cudaGraph_t graph;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    OK(step(&t, beta, st));
    CK(cudaStreamEndCapture(st, &graph));
    if (!exec) {
      CK(cudaGraphInstantiate(&exec, graph, 0));
    } else { // same shape, new beta: update the executable graph in place
      cudaGraphExecUpdateResultInfo info;
      CK(cudaGraphExecUpdate(exec, graph, &info));
    }
    CK(cudaGraphDestroy(graph));
    for (k = 0; k < STEPS; ++k) CK(cudaGraphLaunch(exec, st));

    // Once per epoch: the sticky status, theta and the root (the total).
    CK(cudaMemcpyAsync(&sticky, t.d_sticky, 8, cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(&theta, t.d_theta, sizeof theta, cudaMemcpyDeviceToHost,
                       st));
    CK(cudaMemcpyAsync(&total, &t.tree.d_node[1], sizeof total,
                       cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    OK(per_cuda_status_decode(sticky, NULL));
    if (epoch % 4 == 0 || epoch == EPOCHS - 1)
      printf("step %5d  beta %.2f  theta %.4f  total priority %.2f\n",
             (epoch + 1) * STEPS, beta, (double)theta, (double)total);
  }

  // The tree comes back by a plain copy and is a valid per.h tree.
  OK(per_cuda_tree_download(&t.tree, &host, st));
  CK(cudaStreamSynchronize(st));
  OK(per_tree_check(&host));
  printf("gpu_trainer: theta %.4f (want 3), tree valid: %s\n", (double)theta,
         theta > 2.95 && theta < 3.05 ? "OK" : "NOT OK");

  per_tree_free(&host);
  cudaGraphExecDestroy(exec);
  cudaFree(d_tree);
  cudaFree(t.d_counter);
  cudaFree(t.d_status);
  cudaFree(t.d_sticky);
  cudaFree(t.d_idx);
  cudaFree(t.d_x);
  cudaFree(t.d_y);
  cudaFree(t.d_bx);
  cudaFree(t.d_by);
  cudaFree(t.d_val);
  cudaFree(t.d_w);
  cudaFree(t.d_td);
  cudaFree(t.d_theta);
  cudaFree(t.d_scratch);
  cudaStreamDestroy(st);
  return theta > 2.95 && theta < 3.05 ? 0 : 1;
}
