/* mlp.h - a small fully connected ReLU network with Adam, in plain C.

   Example code for dqn_cartpole.c and seq_cartpole.c (through dqn.h),
   not part of per's API: just enough network to learn CartPole's
   Q-function. Layers are dense; every layer but the last is followed by
   a ReLU; the last is linear. Training is "forward, backward from
   d(loss)/d(output), Adam step"; the loss is the caller's business, so
   importance-sampling weights go into the output gradient the caller
   hands to mlp_backward.

   Weights are stored input-major (w[i * out + o]) so that the inner loops
   run over outputs, contiguous in memory: they vectorize without
   reordering any sum, so results do not depend on the compiler's choices.
   Initialization is PyTorch's nn.Linear default: weights and biases
   uniform in [-1/sqrt(in), 1/sqrt(in)).

   Needs per.h (per_rng) included before it. Everything is static. */
#ifndef PER_EXAMPLE_MLP_H
#define PER_EXAMPLE_MLP_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MLP_MAX_LAYERS 4

typedef struct mlp_layer {
  int in, out;
  float *w, *b;   /* parameters: w[in][out], b[out] */
  float *gw, *gb; /* gradients, same shapes */
  float *mw, *mb; /* Adam first moments */
  float *vw, *vb; /* Adam second moments */
} mlp_layer;

typedef struct mlp {
  int n_layers;
  int max_batch;
  mlp_layer layer[MLP_MAX_LAYERS];
  float *act[MLP_MAX_LAYERS + 1]; /* act[0] input, act[l+1] output of l */
  float *delta[2];                /* backward scratch, max_batch x widest */
  long adam_t;                    /* Adam steps taken */
  float *mem;                     /* one allocation holds everything */
} mlp;

/* sizes[0] inputs, sizes[n_layers] outputs. Returns 0, or -1 when the
   shape is invalid or memory runs out (then *net is empty and mlp_free
   accepts it). */
static int mlp_init(mlp *net, const int *sizes, int n_layers, int max_batch,
                    per_rng *rng) {
  size_t total = 0, widest = 0;
  float *p;
  int l;
  memset(net, 0, sizeof *net);
  if (n_layers < 1 || n_layers > MLP_MAX_LAYERS || max_batch < 1) return -1;
  for (l = 0; l <= n_layers; ++l) {
    if (sizes[l] < 1) return -1;
    if ((size_t)sizes[l] > widest) widest = (size_t)sizes[l];
    total += (size_t)max_batch * (size_t)sizes[l]; /* activations */
  }
  for (l = 0; l < n_layers; ++l) /* w,b + g, m, v */
    total +=
        4 * ((size_t)sizes[l] * (size_t)sizes[l + 1] + (size_t)sizes[l + 1]);
  total += 2 * (size_t)max_batch * widest;
  net->mem = (float *)calloc(total, sizeof(float));
  if (!net->mem) return -1;
  net->n_layers = n_layers;
  net->max_batch = max_batch;
  p = net->mem;
  for (l = 0; l < n_layers; ++l) {
    mlp_layer *L = &net->layer[l];
    size_t nw = (size_t)sizes[l] * (size_t)sizes[l + 1], i;
    size_t nb = (size_t)sizes[l + 1];
    float bound = 1.0f / sqrtf((float)sizes[l]);
    L->in = sizes[l];
    L->out = sizes[l + 1];
    L->w = p, p += nw;
    L->b = p, p += nb;
    L->gw = p, p += nw;
    L->gb = p, p += nb;
    L->mw = p, p += nw;
    L->mb = p, p += nb;
    L->vw = p, p += nw;
    L->vb = p, p += nb;
    for (i = 0; i < nw; ++i)
      L->w[i] = (2.0f * per_rng_float(rng) - 1.0f) * bound;
    for (i = 0; i < nb; ++i)
      L->b[i] = (2.0f * per_rng_float(rng) - 1.0f) * bound;
  }
  for (l = 0; l <= n_layers; ++l) {
    net->act[l] = p;
    p += (size_t)max_batch * (size_t)sizes[l];
  }
  net->delta[0] = p, p += (size_t)max_batch * widest;
  net->delta[1] = p;
  return 0;
}

static void mlp_free(mlp *net) {
  free(net->mem);
  memset(net, 0, sizeof *net);
}

/* Outputs for `batch` (<= max_batch) inputs x[batch][in]; the returned
   array, out[batch][outputs], lives in the network until the next call.
   Keeps the activations for mlp_backward. */
static const float *mlp_forward(mlp *net, const float *x, int batch) {
  int l, n, i, o;
  memcpy(net->act[0], x,
         (size_t)batch * (size_t)net->layer[0].in * sizeof(float));
  for (l = 0; l < net->n_layers; ++l) {
    const mlp_layer *L = &net->layer[l];
    const int in = L->in, out = L->out, relu = l + 1 < net->n_layers;
    for (n = 0; n < batch; ++n) {
      const float *a = net->act[l] + (size_t)n * in;
      float *y = net->act[l + 1] + (size_t)n * out;
      memcpy(y, L->b, (size_t)out * sizeof(float));
      for (i = 0; i < in; ++i) {
        const float ai = a[i];
        const float *wi = L->w + (size_t)i * out;
        if (ai == 0.0f) continue; /* ReLU zeros add nothing */
        for (o = 0; o < out; ++o) y[o] += wi[o] * ai;
      }
      if (relu)
        for (o = 0; o < out; ++o) y[o] = y[o] > 0.0f ? y[o] : 0.0f;
    }
  }
  return net->act[net->n_layers];
}

/* Gradients of the loss for the batch of the last mlp_forward, given
   dout[batch][outputs] = d(loss)/d(output). Overwrites the gradients
   (they are not accumulated across calls). */
static void mlp_backward(mlp *net, const float *dout, int batch) {
  int l, n, i, o, cur = 0;
  const float *d = dout;
  for (l = net->n_layers - 1; l >= 0; --l) {
    mlp_layer *L = &net->layer[l];
    const int in = L->in, out = L->out;
    float *dx = net->delta[cur];
    memset(L->gw, 0, (size_t)in * (size_t)out * sizeof(float));
    memset(L->gb, 0, (size_t)out * sizeof(float));
    for (n = 0; n < batch; ++n) {
      const float *a = net->act[l] + (size_t)n * in;
      const float *dn = d + (size_t)n * out;
      for (o = 0; o < out; ++o) L->gb[o] += dn[o];
      for (i = 0; i < in; ++i) {
        const float ai = a[i];
        float *gwi = L->gw + (size_t)i * out;
        if (ai == 0.0f) continue;
        for (o = 0; o < out; ++o) gwi[o] += dn[o] * ai;
      }
      if (l > 0) {
        /* gradient for the layer below, through its ReLU (a > 0) */
        float *dxn = dx + (size_t)n * in;
        for (i = 0; i < in; ++i) {
          const float *wi = L->w + (size_t)i * out;
          float s = 0.0f;
          if (a[i] > 0.0f)
            for (o = 0; o < out; ++o) s += wi[o] * dn[o];
          dxn[i] = s;
        }
      }
    }
    d = dx;
    cur ^= 1;
  }
}

/* One Adam step (Kingma & Ba, with bias correction; beta1 0.9, beta2
   0.999, eps 1e-8 as PyTorch) on the gradients of the last mlp_backward,
   after scaling them so that their global L2 norm is at most max_norm
   (max_norm <= 0: no clipping). Returns the norm before clipping. */
static float mlp_adam(mlp *net, float lr, float max_norm) {
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  double sq = 0.0;
  float norm, scale = 1.0f, c1, c2;
  int l;
  size_t i;
  for (l = 0; l < net->n_layers; ++l) {
    const mlp_layer *L = &net->layer[l];
    size_t nw = (size_t)L->in * (size_t)L->out;
    for (i = 0; i < nw; ++i) sq += (double)L->gw[i] * L->gw[i];
    for (i = 0; i < (size_t)L->out; ++i) sq += (double)L->gb[i] * L->gb[i];
  }
  norm = (float)sqrt(sq);
  if (max_norm > 0.0f && norm > max_norm) scale = max_norm / norm;
  net->adam_t += 1;
  c1 = 1.0f - (float)pow(b1, (double)net->adam_t);
  c2 = 1.0f - (float)pow(b2, (double)net->adam_t);
  for (l = 0; l < net->n_layers; ++l) {
    mlp_layer *L = &net->layer[l];
    float *par[2], *g[2], *m[2], *v[2];
    size_t len[2];
    int k;
    par[0] = L->w, g[0] = L->gw, m[0] = L->mw, v[0] = L->vw;
    par[1] = L->b, g[1] = L->gb, m[1] = L->mb, v[1] = L->vb;
    len[0] = (size_t)L->in * (size_t)L->out;
    len[1] = (size_t)L->out;
    for (k = 0; k < 2; ++k)
      for (i = 0; i < len[k]; ++i) {
        float gi = g[k][i] * scale;
        m[k][i] = b1 * m[k][i] + (1.0f - b1) * gi;
        v[k][i] = b2 * v[k][i] + (1.0f - b2) * gi * gi;
        par[k][i] -= lr * (m[k][i] / c1) / (sqrtf(v[k][i] / c2) + eps);
      }
  }
  return norm;
}

/* dst's parameters = tau * src's + (1 - tau) * dst's; tau = 1 copies.
   Both networks must have the same shape. */
static void mlp_blend(mlp *dst, const mlp *src, float tau) {
  int l;
  size_t i;
  for (l = 0; l < src->n_layers; ++l) {
    const mlp_layer *S = &src->layer[l];
    mlp_layer *D = &dst->layer[l];
    size_t nw = (size_t)S->in * (size_t)S->out;
    if (tau >= 1.0f) {
      memcpy(D->w, S->w, nw * sizeof(float));
      memcpy(D->b, S->b, (size_t)S->out * sizeof(float));
      continue;
    }
    for (i = 0; i < nw; ++i) D->w[i] += tau * (S->w[i] - D->w[i]);
    for (i = 0; i < (size_t)S->out; ++i) D->b[i] += tau * (S->b[i] - D->b[i]);
  }
}

#endif /* PER_EXAMPLE_MLP_H */
