// gpu_dqn.cu - DQN on CartPole-v1 with everything on the GPU: a batch of
// environments, the networks, the optimizer and the prioritized replay
// (per_cuda_buffer). A GPU trainer's skeleton to copy.
//
// One training step is one CUDA graph, captured once and replayed:
//   act     a kernel steps E CartPoles (examples/cartpole.h's dynamics, in
//           double as Gymnasium's), each acting epsilon-greedily on the
//           online network, and writes E transitions;
//   add     per_cuda_buffer_add_batch: the E transitions, at the max
//           priority;
//   sample  per_cuda_buffer_sample: B transitions, their ids and their IS
//           weights, beta annealed on the buffer's device step;
//   learn   plain kernels: the double-DQN targets, the Huber loss times the
//           IS weights, backward, Adam with the gradient norm clipped, the
//           target network following by Polyak averaging;
//   update  per_cuda_buffer_update: priorities from the TD errors;
//   record  finished episodes' returns into a ring, the first error of any
//           per_cuda call into a sticky word.
// Epsilon, Adam's step count and the buffer's counters live on the device,
// so nothing in the graph changes between replays, and the host waits for
// the device only to print progress. A first graph (act, add, record)
// fills the buffer before learning starts.
//
// The agent is dqn_cartpole's (examples/dqn.h): a 4-64-64-2 ReLU network
// with PyTorch's initialisation, double DQN, Huber loss, Adam (gradient
// norm clipped at 10), tau 0.005, epsilon 1 -> 0.01, alpha 0.6, beta 0.4
// -> 1, here with one-step returns, E environments feeding one gradient
// step of B transitions per graph, and Adam's step 5e-4 (at 1e-3 some
// seeds reach an average near 450, then fall back: examples/README.md).
//
// Deterministic for a seed on a given GPU: no float atomics, every sum in
// a fixed order (per_cuda's own results are bitwise the CPU's; the
// network's float arithmetic is the device's). Trains until the last 100
// episodes average 475 (CartPole-v1's threshold; exit 0) or the budget
// runs out (exit 1), then plays greedy episodes on the CPU with the
// trained weights. Exits 77 (a skip) without a CUDA device.
//
// Kernels are launched through LAUNCH so that tests/cuda can build this
// file as host C++ on its CUDA shim, where every launch runs on the CPU
// and the graph is emulated: it runs --smoke there.
#ifndef PER_CUDA_HOST_SHIM
#include <cuda_runtime.h>
#define LAUNCH(kernel, grid, block, stream, ...) \
  kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#else
#define LAUNCH PER_CUDA_LAUNCH
#endif

#include <chrono>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define PER_IMPLEMENTATION
#include "per.h"
#include "per_cuda.h"

#include "../args.h"
#include "../cartpole.h"
#include "check.h"

#define OBS CARTPOLE_OBS
#define ACT CARTPOLE_ACTIONS
#define HID 64
// The network's parameters in one float array, each layer's weights
// input-major (w[i * out + o]) as in examples/mlp.h.
#define W1 0
#define B1 (W1 + OBS * HID)
#define W2 (B1 + HID)
#define B2 (W2 + HID * HID)
#define W3 (B2 + HID)
#define B3 (W3 + HID * ACT)
#define NPARAM (B3 + ACT) // 4610
#define CHUNK 128         // parameters per partial sum of the norm
#define NPART ((NPARAM + CHUNK - 1) / CHUNK)
#define WINDOW 100 // episodes in the moving average
#define SOLVED_AT 475.0
#define THREADS 128 // per block
#define MAX_ENVS 4096
#define MAX_BATCH 4096

// What the replay stores: one step of one environment.
struct transition {
  float obs[OBS], next[OBS];
  float reward;
  float disc; // gamma, or 0 when the episode terminated (no bootstrap)
  uint32_t action;
};

struct env_state {
  double s[4];    // x, x_dot, theta, theta_dot
  uint32_t steps; // in this episode
  float ret;      // return of this episode so far
  float ended;    // return of the episode that ended at the last step; -1
};

// The counters, in device memory.
struct control {
  unsigned long long step;     // graph steps done (E environment steps each)
  unsigned long long updates;  // gradient steps done (Adam's t)
  unsigned long long episodes; // episodes ended
  unsigned long long status;   // first non-zero per_cuda status word
  float returns[WINDOW];       // the last WINDOW returns, a ring
};

struct hyper { // frozen in the graph
  uint64_t seed;
  uint32_t envs, batch;
  float gamma, lr, tau, clip, eps_final;
  double explore; // environment steps over which epsilon decays
};

// Q-values of one observation x under parameters p; when h1 and h2 are not
// NULL they get the hidden activations (after the ReLU). Host and device.
PER_HD static void q_forward(const float *p, const float *x, float *h1,
                             float *h2, float q[ACT]) {
  float a1[HID], a2[HID];
  int i, o;
  for (o = 0; o < HID; ++o) a1[o] = p[B1 + o];
  for (i = 0; i < OBS; ++i)
    for (o = 0; o < HID; ++o) a1[o] += p[W1 + i * HID + o] * x[i];
  for (o = 0; o < HID; ++o) a1[o] = a1[o] > 0.0f ? a1[o] : 0.0f;
  for (o = 0; o < HID; ++o) a2[o] = p[B2 + o];
  for (i = 0; i < HID; ++i)
    for (o = 0; o < HID; ++o) a2[o] += p[W2 + i * HID + o] * a1[i];
  for (o = 0; o < HID; ++o) a2[o] = a2[o] > 0.0f ? a2[o] : 0.0f;
  for (o = 0; o < ACT; ++o) q[o] = p[B3 + o];
  for (i = 0; i < HID; ++i)
    for (o = 0; o < ACT; ++o) q[o] += p[W3 + i * ACT + o] * a2[i];
  if (h1)
    for (o = 0; o < HID; ++o) h1[o] = a1[o], h2[o] = a2[o];
}

PER_HD static uint32_t greedy(const float *p, const float *x) {
  float q[ACT];
  q_forward(p, x, NULL, NULL, q);
  return q[1] > q[0] ? 1u : 0u;
}

static __device__ uint32_t thread_id(void) {
  return blockIdx.x * blockDim.x + threadIdx.x;
}

// Two uniform doubles in [0, 0.1) - 0.05 from one Philox block: reset noise.
static __device__ void reset_pair(uint64_t seed, uint64_t ctr, double *a,
                                  double *b) {
  uint32_t w[4];
  per_rng_block(seed, ctr, w);
  *a = per_u01d(w[0], w[1]) * 0.1 - 0.05;
  *b = per_u01d(w[2], w[3]) * 0.1 - 0.05;
}

// act: environment e takes one epsilon-greedy step and writes its
// transition. Random numbers: Philox blocks at counters 3t, 3t+1, 3t+2 for
// environment step t (a function of the seed and t alone).
static __global__ void k_act(hyper hp, const float *params, env_state *envs,
                             const control *ctl, transition *out) {
  uint32_t e = thread_id(), w[4], a;
  unsigned long long t;
  env_state *v;
  transition *tr;
  double eps;
  float x[OBS];
  int term, trunc, i;
  if (e >= hp.envs) return;
  v = &envs[e];
  tr = &out[e];
  t = ctl->step * hp.envs + e;
  eps = (double)t >= hp.explore
            ? hp.eps_final
            : 1.0 - (1.0 - hp.eps_final) * (double)t / hp.explore;
  for (i = 0; i < OBS; ++i) x[i] = (float)v->s[i];
  per_rng_block(hp.seed, 3 * t, w);
  a = per_u01d(w[0], w[1]) < eps ? w[2] >> 31 : greedy(params, x);
  cartpole_physics(v->s, (int)a);
  v->steps += 1;
  term = cartpole_out_of_bounds(v->s);
  trunc = !term && v->steps >= CARTPOLE_MAX_STEPS;
  for (i = 0; i < OBS; ++i) {
    tr->obs[i] = x[i];
    tr->next[i] = (float)v->s[i];
  }
  tr->reward = 1.0f;
  tr->disc = term ? 0.0f : hp.gamma;
  tr->action = a;
  v->ret += 1.0f;
  v->ended = -1.0f;
  if (term || trunc) {
    v->ended = v->ret;
    v->ret = 0.0f;
    v->steps = 0;
    reset_pair(hp.seed, 3 * t + 1, &v->s[0], &v->s[1]);
    reset_pair(hp.seed, 3 * t + 2, &v->s[2], &v->s[3]);
  }
}

// learn, 1: thread 3r + k runs a forward pass for row r: k = 0 the online
// network on s (keeping the activations for backward), 1 the online one
// on s', 2 the target one on s'. q[6r ..] = Q(s), Q(s'), Qt(s').
static __global__ void k_forward(uint32_t B, const float *params,
                                 const float *target, const transition *rows,
                                 float *q, float *h1, float *h2) {
  uint32_t id = thread_id(), r, k;
  if (id >= 3 * B) return;
  r = id / 3;
  k = id % 3;
  if (k == 0)
    q_forward(params, rows[r].obs, h1 + (size_t)r * HID, h2 + (size_t)r * HID,
              q + 6 * r);
  else
    q_forward(k == 1 ? params : target, rows[r].next, NULL, NULL,
              q + 6 * r + 2 * k);
}

// learn, 2: row r's TD error and its gradient back to the hidden layers:
// dout = w * huber'(Q(s, a) - y) / B with y = R + disc Qt(s', argmax Q(s',
// .)); d2 and d1 the gradients at the second and first hidden layers.
static __global__ void k_backward(uint32_t B, const float *params,
                                  const transition *rows, const float *weight,
                                  const float *q, const float *h1,
                                  const float *h2, float *td, float *dout,
                                  float *d1, float *d2) {
  uint32_t r = thread_id(), a, best, i, o;
  const float *qr, *a1, *a2;
  float y, d, *g1, *g2, *dr;
  if (r >= B) return;
  qr = q + 6 * r;
  a = rows[r].action;
  best = qr[3] > qr[2] ? 1u : 0u;
  y = rows[r].reward + rows[r].disc * qr[4 + best];
  d = qr[a] - y;
  td[r] = d;
  if (d > 1.0f) d = 1.0f;
  if (d < -1.0f) d = -1.0f;
  dr = dout + 2 * r;
  dr[a] = weight[r] * d * (1.0f / (float)B);
  dr[a ^ 1u] = 0.0f;
  a1 = h1 + (size_t)r * HID;
  a2 = h2 + (size_t)r * HID;
  g1 = d1 + (size_t)r * HID;
  g2 = d2 + (size_t)r * HID;
  for (i = 0; i < HID; ++i) {
    float s = 0.0f;
    if (a2[i] > 0.0f)
      for (o = 0; o < ACT; ++o) s += params[W3 + i * ACT + o] * dr[o];
    g2[i] = s;
  }
  for (i = 0; i < HID; ++i) {
    float s = 0.0f;
    if (a1[i] > 0.0f)
      for (o = 0; o < HID; ++o) s += params[W2 + i * HID + o] * g2[o];
    g1[i] = s;
  }
}

// learn, 3: one thread per parameter sums its gradient over the rows, in
// row order.
static __global__ void k_grad(uint32_t B, const transition *rows,
                              const float *h1, const float *h2,
                              const float *dout, const float *d1,
                              const float *d2, float *grad) {
  uint32_t p = thread_id(), r, i, o, width;
  const float *in = NULL, *delta;
  float g = 0.0f;
  int bias;
  if (p >= NPARAM) return;
  if (p < W2) { // layer 1: inputs the observations, deltas d1
    bias = p >= B1;
    i = bias ? 0 : (p - W1) / HID;
    o = bias ? p - B1 : (p - W1) % HID;
    delta = d1, width = HID;
  } else if (p < W3) { // layer 2: inputs h1, deltas d2
    bias = p >= B2;
    i = bias ? 0 : (p - W2) / HID;
    o = bias ? p - B2 : (p - W2) % HID;
    in = h1, delta = d2, width = HID;
  } else { // layer 3: inputs h2, deltas dout
    bias = p >= B3;
    i = bias ? 0 : (p - W3) / ACT;
    o = bias ? p - B3 : (p - W3) % ACT;
    in = h2, delta = dout, width = ACT;
  }
  for (r = 0; r < B; ++r) {
    float dv = delta[(size_t)r * width + o];
    if (bias) g += dv;
    else g += dv * (in ? in[(size_t)r * HID + i] : rows[r].obs[i]);
  }
  grad[p] = g;
}

// learn, 4: partial sums of the squared gradient, CHUNK parameters each.
static __global__ void k_norm(const float *grad, double *part) {
  uint32_t k = thread_id(), p, end;
  double s = 0.0;
  if (k >= NPART) return;
  end = (k + 1) * CHUNK < NPARAM ? (k + 1) * CHUNK : NPARAM;
  for (p = k * CHUNK; p < end; ++p) s += (double)grad[p] * grad[p];
  part[k] = s;
}

// learn, 5: Adam (beta1 0.9, beta2 0.999, eps 1e-8, bias-corrected) on the
// gradient scaled to norm <= clip, then the target follows by tau. Every
// thread adds the partial sums in the same order: the same norm.
static __global__ void k_adam(hyper hp, const control *ctl, const float *grad,
                              const double *part, float *params, float *m,
                              float *v, float *target) {
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  uint32_t p = thread_id(), k;
  double sq = 0.0, t;
  float norm, scale = 1.0f, c1, c2, g;
  if (p >= NPARAM) return;
  for (k = 0; k < NPART; ++k) sq += part[k];
  norm = (float)sqrt(sq);
  if (hp.clip > 0.0f && norm > hp.clip) scale = hp.clip / norm;
  t = (double)(ctl->updates + 1);
  c1 = 1.0f - (float)pow((double)b1, t);
  c2 = 1.0f - (float)pow((double)b2, t);
  g = grad[p] * scale;
  m[p] = b1 * m[p] + (1.0f - b1) * g;
  v[p] = b2 * v[p] + (1.0f - b2) * g * g;
  params[p] -= hp.lr * (m[p] / c1) / (sqrtf(v[p] / c2) + eps);
  target[p] += hp.tau * (params[p] - target[p]);
}

// record: one thread, after everything else in the step.
static __global__ void k_record(hyper hp, env_state *envs, control *ctl,
                                const unsigned long long *status, int nstatus,
                                int learned) {
  uint32_t e;
  int k;
  for (e = 0; e < hp.envs; ++e)
    if (envs[e].ended >= 0.0f) {
      ctl->returns[ctl->episodes % WINDOW] = envs[e].ended;
      ctl->episodes += 1;
    }
  for (k = 0; k < nstatus && ctl->status == 0; ++k) ctl->status = status[k];
  ctl->step += 1;
  ctl->updates += (unsigned long long)learned;
}

static uint32_t blocks(uint32_t n) { return (n + THREADS - 1) / THREADS; }

struct options {
  uint64_t seed;
  uint32_t envs, batch, capacity;
  long steps;       // environment steps budget
  long learn_start; // environment steps before the first update
  long every;       // graph steps between progress lines
  long eval;        // greedy episodes on the CPU after training
  double alpha, explore;
  float lr;
  int smoke, quiet;
};

struct trainer {
  options o;
  hyper hp;
  per_cuda_buffer buf;
  void *d_buf;
  float *d_params, *d_target, *d_m, *d_v, *d_grad;
  double *d_part;
  env_state *d_envs;
  control *d_ctl;
  transition *d_new, *d_rows;
  uint64_t *d_ids;
  float *d_w, *d_q, *d_h1, *d_h2, *d_td, *d_dout, *d_d1, *d_d2;
  unsigned long long *d_status; // add, sample, update
};

// The step's work, enqueued on st (captured into a graph by the caller).
static per_status enqueue_step(trainer *t, int learn, cudaStream_t st) {
  const hyper hp = t->hp;
  const uint32_t B = hp.batch;
  per_status s;
  LAUNCH(k_act, blocks(hp.envs), THREADS, st, hp, (const float *)t->d_params,
         t->d_envs, (const control *)t->d_ctl, t->d_new);
  s = per_cuda_buffer_add_batch(&t->buf, t->d_new, hp.envs, NULL,
                                &t->d_status[0], st);
  if (s == PER_OK && learn)
    s = per_cuda_buffer_sample(&t->buf, B, NULL, t->d_rows, t->d_ids, t->d_w,
                               &t->d_status[1], st);
  if (s != PER_OK) return s;
  if (learn) {
    LAUNCH(k_forward, blocks(3 * B), THREADS, st, B, (const float *)t->d_params,
           (const float *)t->d_target, (const transition *)t->d_rows, t->d_q,
           t->d_h1, t->d_h2);
    LAUNCH(k_backward, blocks(B), THREADS, st, B, (const float *)t->d_params,
           (const transition *)t->d_rows, (const float *)t->d_w,
           (const float *)t->d_q, (const float *)t->d_h1,
           (const float *)t->d_h2, t->d_td, t->d_dout, t->d_d1, t->d_d2);
    LAUNCH(k_grad, blocks(NPARAM), THREADS, st, B,
           (const transition *)t->d_rows, (const float *)t->d_h1,
           (const float *)t->d_h2, (const float *)t->d_dout,
           (const float *)t->d_d1, (const float *)t->d_d2, t->d_grad);
    LAUNCH(k_norm, blocks(NPART), THREADS, st, (const float *)t->d_grad,
           t->d_part);
    LAUNCH(k_adam, blocks(NPARAM), THREADS, st, hp, (const control *)t->d_ctl,
           (const float *)t->d_grad, (const double *)t->d_part, t->d_params,
           t->d_m, t->d_v, t->d_target);
    s = per_cuda_buffer_update(&t->buf, t->d_ids, t->d_td, B, NULL,
                               &t->d_status[2], st);
    if (s != PER_OK) return s;
  }
  LAUNCH(k_record, 1u, 1u, st, hp, t->d_envs, t->d_ctl,
         (const unsigned long long *)t->d_status, learn ? 3 : 1, learn);
  return PER_OK;
}

// Capture one step (with or without learning) as an executable graph.
static int capture(trainer *t, int learn, cudaStream_t st,
                   cudaGraphExec_t *exec) {
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  if (enqueue_step(t, learn, st) != PER_OK) {
    if (cudaStreamEndCapture(st, &g) == cudaSuccess) cudaGraphDestroy(g);
    fprintf(stderr, "gpu_dqn: a per_cuda call refused its arguments\n");
    return 1;
  }
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(exec, g, 0));
  CK(cudaGraphDestroy(g));
  return 0;
}

template <typename T> static int dalloc(T **p, size_t n) {
  return cudaMalloc((void **)p, n * sizeof(T)) == cudaSuccess ? 0 : 1;
}

static int trainer_alloc(trainer *t) {
  const uint32_t E = t->o.envs, B = t->o.batch;
  int bad = 0;
  bad |= dalloc(&t->d_params, NPARAM) | dalloc(&t->d_target, NPARAM);
  bad |= dalloc(&t->d_m, NPARAM) | dalloc(&t->d_v, NPARAM);
  bad |= dalloc(&t->d_grad, NPARAM) | dalloc(&t->d_part, NPART);
  bad |= dalloc(&t->d_envs, E) | dalloc(&t->d_ctl, 1);
  bad |= dalloc(&t->d_new, E) | dalloc(&t->d_rows, B);
  bad |= dalloc(&t->d_ids, B) | dalloc(&t->d_w, B);
  bad |= dalloc(&t->d_q, 6 * (size_t)B) | dalloc(&t->d_td, B);
  bad |= dalloc(&t->d_h1, (size_t)B * HID) | dalloc(&t->d_h2, (size_t)B * HID);
  bad |= dalloc(&t->d_d1, (size_t)B * HID) | dalloc(&t->d_d2, (size_t)B * HID);
  bad |= dalloc(&t->d_dout, 2 * (size_t)B) | dalloc(&t->d_status, 3);
  return bad;
}

static void trainer_free(trainer *t) {
  void *p[] = {t->d_buf,   t->d_params, t->d_target, t->d_m,   t->d_v,
               t->d_grad,  t->d_part,   t->d_envs,   t->d_ctl, t->d_new,
               t->d_rows,  t->d_ids,    t->d_w,      t->d_q,   t->d_h1,
               t->d_h2,    t->d_td,     t->d_dout,   t->d_d1,  t->d_d2,
               t->d_status};
  size_t i;
  for (i = 0; i < sizeof p / sizeof p[0]; ++i) cudaFree(p[i]);
}

// The networks (PyTorch's nn.Linear initialisation, target = online), Adam's
// moments, the environments (cartpole.h's reset, seeds seed + e) and the
// counters, set up on the host and copied once.
static int trainer_start(trainer *t, cudaStream_t st) {
  static float host[NPARAM];
  static const int in[3] = {OBS, HID, HID}, w0[3] = {W1, W2, W3},
                   b0[3] = {B1, B2, B3}, out[3] = {HID, HID, ACT};
  static env_state envs[MAX_ENVS];
  control ctl;
  per_rng rng;
  uint32_t e;
  int l, k;
  per_rng_init(&rng, t->o.seed ^ 0x9e3779b97f4a7c15ull);
  for (l = 0; l < 3; ++l) {
    float bound = 1.0f / sqrtf((float)in[l]);
    for (k = 0; k < in[l] * out[l]; ++k)
      host[w0[l] + k] = (2.0f * per_rng_float(&rng) - 1.0f) * bound;
    for (k = 0; k < out[l]; ++k)
      host[b0[l] + k] = (2.0f * per_rng_float(&rng) - 1.0f) * bound;
  }
  for (e = 0; e < t->o.envs; ++e) {
    cartpole env;
    float obs[OBS];
    cartpole_init(&env, t->o.seed + e);
    cartpole_reset(&env, obs);
    envs[e].s[0] = env.x;
    envs[e].s[1] = env.x_dot;
    envs[e].s[2] = env.theta;
    envs[e].s[3] = env.theta_dot;
    envs[e].steps = 0;
    envs[e].ret = 0.0f;
    envs[e].ended = -1.0f;
  }
  memset(&ctl, 0, sizeof ctl);
  CK(cudaMemcpy(t->d_params, host, sizeof host, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(t->d_target, host, sizeof host, cudaMemcpyHostToDevice));
  CK(cudaMemset(t->d_m, 0, NPARAM * sizeof(float)));
  CK(cudaMemset(t->d_v, 0, NPARAM * sizeof(float)));
  CK(cudaMemcpy(t->d_envs, envs, t->o.envs * sizeof(env_state),
                cudaMemcpyHostToDevice));
  CK(cudaMemcpy(t->d_ctl, &ctl, sizeof ctl, cudaMemcpyHostToDevice));
  CK(cudaMemset(t->d_status, 0, 3 * sizeof(unsigned long long)));
  CK(cudaStreamSynchronize(st));
  return 0;
}

static double avg_return(const control *c) {
  unsigned long long n = c->episodes < WINDOW ? c->episodes : WINDOW, k;
  double s = 0.0;
  for (k = 0; k < n; ++k) s += c->returns[k];
  return n ? s / (double)n : 0.0;
}

// Mean return of k greedy episodes on the CPU (cartpole.h, seeded apart
// from training) with the trained parameters p.
static double evaluate(const float *p, uint64_t seed, long k) {
  cartpole env;
  float obs[OBS];
  double total = 0.0;
  long e;
  cartpole_init(&env, seed);
  for (e = 0; e < k; ++e) {
    int term = 0, trunc = 0;
    cartpole_reset(&env, obs);
    while (!term && !trunc)
      total += cartpole_step(&env, (int)greedy(p, obs), obs, &term, &trunc);
  }
  return k > 0 ? total / (double)k : 0.0;
}

static void usage(FILE *f) {
  fprintf(f, "usage: gpu_dqn [--seed S] [--envs E] [--batch B] [--capacity C]\n"
             "               [--steps N] [--every K] [--eval K] [--alpha A]\n"
             "               [--lr LR] [--smoke] [--quiet]\n"
             "  --lr LR       Adam's step (default 5e-4)\n"
             "  --envs E      CartPoles stepped per graph (default 8)\n"
             "  --batch B     transitions per gradient step (default 128)\n"
             "  --capacity C  replay capacity (default 100000)\n"
             "  --steps N     environment steps budget (default 600000)\n"
             "  --every K     graph steps between progress lines (default "
             "2000)\n"
             "  --eval K      greedy episodes on the CPU at the end (default "
             "10)\n"
             "  --smoke       a short run that only checks the machinery\n");
}

static int parse(int argc, char **argv, options *o) {
  arg_flag f[11];
  size_t n = 0;
  memset(o, 0, sizeof *o);
  o->seed = 1;
  o->envs = 8;
  o->batch = 128;
  o->capacity = 100000;
  o->steps = 600000;
  o->learn_start = 1000;
  o->every = 2000;
  o->eval = 10;
  o->alpha = 0.6;
  o->explore = 10000;
  o->lr = 5e-4f;
  f[n++] = arg_u64("--seed", &o->seed, 0, 1L << 62);
  f[n++] = arg_u32("--envs", &o->envs, 1, MAX_ENVS);
  f[n++] = arg_u32("--batch", &o->batch, 1, MAX_BATCH);
  f[n++] = arg_u32("--capacity", &o->capacity, 1, 1L << 24);
  f[n++] = arg_long("--steps", &o->steps, 1, 1L << 40);
  f[n++] = arg_long("--every", &o->every, 1, 1L << 40);
  f[n++] = arg_long("--eval", &o->eval, 0, 100000);
  f[n++] = arg_double("--alpha", &o->alpha, 0.0, 10.0);
  f[n++] = arg_float("--lr", &o->lr, 1e-7, 1.0);
  f[n++] = arg_switch("--smoke", &o->smoke);
  f[n++] = arg_switch("--quiet", &o->quiet);
  if (arg_parse(argc, argv, f, n, "gpu_dqn", usage)) return 2;
  if (o->smoke) { // the machinery, briefly: see tests/cuda/meson.build
    o->steps = 3000;
    o->every = 100;
    o->eval = 3;
  }
  return 0;
}

int main(int argc, char **argv) {
  trainer t;
  cudaStream_t st;
  cudaGraphExec_t collect = NULL, train = NULL;
  per_config cfg;
  per_buffer host_buf;
  control ctl;
  static float params[NPARAM];
  size_t bytes;
  uint32_t max_batch; // the largest add (envs) or sample (batch)
  int ndev = 0, rc;
  long warm, step = 0, env_steps = 0, last_env = 0, last_upd = 0;
  double avg = 0.0, eval;
  std::chrono::steady_clock::time_point t0, tl;
  memset(&t, 0, sizeof t);
  if ((rc = parse(argc, argv, &t.o)) != 0) return rc;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("gpu_dqn: SKIP: no CUDA device\n");
    return 77;
  }
  t.hp.seed = t.o.seed;
  t.hp.envs = t.o.envs;
  t.hp.batch = t.o.batch;
  t.hp.gamma = 0.99f;
  t.hp.lr = t.o.lr;
  t.hp.tau = 0.005f;
  t.hp.clip = 10.0f;
  t.hp.eps_final = 0.01f;
  t.hp.explore = t.o.explore;
  warm = (t.o.learn_start + t.o.envs - 1) / t.o.envs; // graph steps

  // The replay: per_buffer's config, beta annealed over the updates.
  cfg = per_config_default(t.o.capacity, sizeof(transition));
  cfg.alpha = t.o.alpha;
  cfg.beta0 = 0.4;
  cfg.beta1 = 1.0;
  cfg.beta_steps =
      (uint64_t)(t.o.steps / t.o.envs > warm ? t.o.steps / t.o.envs - warm : 1);
  cfg.seed = t.o.seed;
  max_batch = t.o.envs > t.o.batch ? t.o.envs : t.o.batch;
  bytes = per_cuda_buffer_bytes(&cfg, max_batch);
  if (bytes == 0) {
    fprintf(stderr, "gpu_dqn: replay config refused\n");
    return 2;
  }
  CK(cudaStreamCreate(&st));
  CK(cudaMalloc(&t.d_buf, bytes));
  if (trainer_alloc(&t)) {
    fprintf(stderr, "gpu_dqn: out of device memory\n");
    trainer_free(&t);
    return 1;
  }
  OK(per_cuda_buffer_init_mem(&t.buf, &cfg, max_batch, t.d_buf, bytes, st));
  if (trainer_start(&t, st) || capture(&t, 0, st, &collect) ||
      capture(&t, 1, st, &train))
    return 1;
  if (!t.o.quiet)
    printf("gpu_dqn: %u environments, batch %u, capacity %u, seed %llu, "
           "budget %ld steps\n",
           t.o.envs, t.o.batch, t.o.capacity, (unsigned long long)t.o.seed,
           t.o.steps);

  t0 = tl = std::chrono::steady_clock::now();
  memset(&ctl, 0, sizeof ctl);
  while (env_steps < t.o.steps) {
    CK(cudaGraphLaunch(step < warm ? collect : train, st));
    ++step;
    env_steps += t.o.envs;
    if (step % t.o.every == 0 || env_steps >= t.o.steps) {
      double dt;
      std::chrono::steady_clock::time_point now;
      CK(cudaMemcpy(&ctl, t.d_ctl, sizeof ctl, cudaMemcpyDeviceToHost));
      now = std::chrono::steady_clock::now();
      dt = std::chrono::duration<double>(now - tl).count();
      OK(per_cuda_status_decode(ctl.status, NULL));
      avg = avg_return(&ctl);
      if (!t.o.quiet)
        printf("step %8ld  episodes %6llu  avg100 %6.1f  %8.0f env steps/s  "
               "%7.0f updates/s\n",
               env_steps, ctl.episodes, avg,
               dt > 0 ? (double)(env_steps - last_env) / dt : 0.0,
               dt > 0 ? (double)((long)ctl.updates - last_upd) / dt : 0.0);
      fflush(stdout);
      tl = now;
      last_env = env_steps;
      last_upd = (long)ctl.updates;
      if (ctl.episodes >= WINDOW && avg >= SOLVED_AT) break;
    }
  }
  CK(cudaMemcpy(&ctl, t.d_ctl, sizeof ctl, cudaMemcpyDeviceToHost));
  OK(per_cuda_status_decode(ctl.status, NULL));
  avg = avg_return(&ctl);
  if (ctl.episodes >= WINDOW && avg >= SOLVED_AT)
    printf("solved at step %ld (episode %llu): avg100 %.1f, %.1f s\n",
           env_steps, ctl.episodes, avg,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
               .count());
  else
    printf("not solved in %ld steps (%llu episodes): avg100 %.1f\n", env_steps,
           ctl.episodes, avg);

  // The replay comes back as a CPU per_buffer (checked on the way) that
  // per_buffer_save could write; the network plays on the CPU.
  OK(per_buffer_init(&host_buf, &cfg, NULL));
  OK(per_cuda_buffer_download(&t.buf, &host_buf, st));
  CK(cudaMemcpy(params, t.d_params, sizeof params, cudaMemcpyDeviceToHost));
  eval = evaluate(params, t.o.seed + 1000003u, t.o.eval);
  printf("replay: %u items, %llu updates; greedy evaluation on the CPU: "
         "mean return %.1f over %ld episodes\n",
         host_buf.size, ctl.updates, eval, t.o.eval);
  rc = ctl.episodes >= WINDOW && avg >= SOLVED_AT ? 0 : 1;
  if (t.o.smoke) // the machinery ran: every step, learning, no error
    rc = step == (t.o.steps + t.o.envs - 1) / t.o.envs &&
                 ctl.updates == (unsigned long long)(step - warm) &&
                 ctl.step == (unsigned long long)step
             ? 0
             : 1;
  per_buffer_free(&host_buf);
  cudaGraphExecDestroy(collect);
  cudaGraphExecDestroy(train);
  trainer_free(&t);
  cudaStreamDestroy(st);
  return rc;
}
