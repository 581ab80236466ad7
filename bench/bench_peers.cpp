/* bench_peers.cpp - per.h against its peers, in one process, on the same
   inputs, interleaved (bc_measure_n): the C++ sum trees of TorchRL and
   cpprb, and the textbook float32 tree of classic_tree.h. The peers'
   headers are fetched from their published packages at bench time by
   bench/peers.sh (never part of this repository), which builds this
   program with the flags of the other benchmarks and runs it.

   Sides:
     per.h     per_tree, per_buffer (PER_REAL)
     textbook  classic_tree.h, float32 whatever PER_REAL is
     torchrl   torchrl::SumSegmentTree<per_real> from TorchRL 0.10.0
               (torchrl/csrc/segment_tree.h, its Python glue removed by
               bench/peers_prep.py); the step adds its MinSegmentTree, as
               TorchRL's PrioritizedSampler keeps both
     cpprb     ymd::SegmentTree<per_real> with std::plus from cpprb 11.0.0
               (SegmentTree.hh), the sum tree of its CppPrioritizedSampler;
               the step is that sampler itself (ReplayBuffer.hh)

   Ops, ns per item, for N in {2^10, 2^12, 2^14, 2^16, 10^5, 10^6, 2^20,
   2^22, 2^24} and B in {256, 1024, 4096}:
     update  B (index, value) pairs from one shared pool: per_tree_set_batch
             vs B classic_update vs B torchrl Update(i, v) vs B cpprb
             set(i, v); no write gives a leaf the value it holds (cpprb
             would then stop its walk up early: see pool_next)
     set     one leaf at a time, filling a ring (bench_tree's add; no B):
             per_tree_set(pos, v) vs classic_add vs Update(pos, v) vs
             set(pos, v)
     sample  stratified batch of B, each draw's index and leaf value:
             per_tree_sample vs classic_sample (its own xorshift) vs, for
             each peer, u_j = (j + U_j) * total / B with U_j from
             per_rng_real (per.h's Philox; one stream per side, same seed)
             and the peer's descent: TorchRL's ScanLowerBound clamped to
             N - 1 (its sampler clamps), cpprb's largest_region_index with
             the condition v <= u of CppPrioritizedSampler's
             sample_proportional
     step    the PER training step of B on a full buffer of N: stratified
             sample, IS weights, priorities (|td| + eps)^alpha from B TD
             errors, batch update; alpha 0.6, beta 0.4, eps 1e-6 on every
             side. per.h: per_buffer_sample (ids, weights normalized by the
             batch max; by the buffer max with --buffer-max) +
             per_buffer_update (bench_tree's cycle). textbook: bench_tree's
             classic cycle. torchrl: TorchRL's PrioritizedSampler in C++:
             total and minimum from the sum and min trees, ScanLowerBound
             (on stratified u's as in sample; its Python sampler draws
             them iid with numpy), weights (p / p_min)^-beta, priorities
             written to the sum tree then to the min tree. cpprb:
             CppPrioritizedSampler::sample (its own mt19937, weights
             normalized by its min tree) + update_priorities.
   The ratio printed is best peer / per.h, the best peer being the fastest
   of the textbook tree, TorchRL and cpprb (above 1: per.h is faster).

   CSV (--csv), one row per (op, N, B, side) measured:
     real,op,n,b,side,ns,min,max,batch_ns,reps,iters,vs_per
   ns, min, max: median, fastest and slowest loop in ns per item; batch_ns
   = ns * B (set: B = 0, per item); side in {per.h, textbook, torchrl,
   cpprb}; vs_per = ns / per.h's ns in the same figure (0 when per.h was
   not measured).

   Checks after each figure (never the time): every sampled index is a
   used leaf with the leaf's value (> 0); after re-applying the whole pool
   (update) or a full lap of the ring (set), per.h, TorchRL and cpprb hold
   identical leaves and identical totals (each recomputes a parent from
   its two children, so the trees agree bit for bit), the textbook the
   same leaves in float, and per_tree_check passes; the step's weights
   are in (0, 1] (per.h's with a 1 in every batch when normalized by the
   batch max) and per_buffer_check passes. Per N, for a stratified batch
   of 4096 with per.h's own u's (per_tree_stratum_u), the fraction of u
   for which each side's descent finds per.h's leaf; --quick requires 98%
   (ties at a boundary may go either way: TorchRL and the textbook go
   left, per.h and cpprb right; cpprb compares running prefix sums where
   the others subtract, which rounds differently, visibly in float at
   large N). Exit status 0 only when every check passes. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#define PER_IMPLEMENTATION
#include "per.h"

#include "bench_common.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include <torchrl/segment_tree.h>
#include <cpprb/ReplayBuffer.hh>

typedef torchrl::SumSegmentTree<per_real> TrSum;
typedef torchrl::MinSegmentTree<per_real> TrMin;
typedef ymd::SegmentTree<per_real> CpTree;
typedef ymd::CppPrioritizedSampler<per_real> CpSampler;

static const char *usage =
    "usage: bench_peers [options]\n"
    "  per.h vs TorchRL's and cpprb's C++ sum trees and the textbook "
    "float32 tree,\n"
    "  ns per item. ops: update, set, sample, step.\n"
    "  --sides LIST     only these sides: per,textbook,torchrl,cpprb "
    "(default all)\n"
    "  --buffer-max     step: per.h's weights normalized by the buffer max\n"
    "                   (PER_WEIGHTS_BUFFER_MAX, a min tree, as the peers)\n";

enum { PER, TEXTBOOK, TORCHRL, CPPRB, NSIDES };
static const char *side_name[NSIDES] = {"per.h", "textbook", "torchrl",
                                        "cpprb"};

/* The step's constants, the same on every side. */
static const double k_alpha = 0.6, k_beta = 0.4, k_eps = 1e-6;

struct Ctx {
  uint32_t n, B;
  bool on[NSIDES]; /* timed sides */
  per_tree t;      /* always built: the reference of the checks */
  per_rng rng;
  void *per_mem;
  classic_tree ct;
  std::unique_ptr<TrSum> tr;
  std::unique_ptr<CpTree> cp;
  per_rng urng[NSIDES]; /* the peers' U_j */
  /* step */
  per_buffer buf;
  bool have_buf;
  std::unique_ptr<TrMin> trmin;
  std::unique_ptr<CpSampler> cps;
  std::vector<uint64_t> ids;
  std::vector<float> w_p, w_c, prio_c;
  std::vector<per_real> w_tr, prio_tr, w_cp;
  std::vector<std::size_t> idx_cp;
  /* inputs: a pool of (index, value) pairs, walked through by each side;
     odd passes take the second set of values (see pool_next) */
  size_t pool;
  std::vector<uint32_t> pool_idx;
  std::vector<per_real> pool_val, pool_val2;
  std::vector<float> pool_valf, pool_valf2;
  size_t off[NSIDES];
  uint64_t pass[NSIDES];
  uint32_t pos[NSIDES]; /* ring positions of set (textbook: ct.next) */
  /* outputs */
  std::vector<uint32_t> idx[NSIDES];
  std::vector<per_real> val[NSIDES]; /* textbook: val_c */
  std::vector<float> val_c;
  per_status err;
};

static int failures = 0;

static void fail(const char *what, uint32_t n, uint32_t B) {
  fprintf(stderr, "CHECK FAILED (N=%u, B=%u): %s\n", n, B, what);
  ++failures;
}

static Ctx *ctx_of(void *p) { return static_cast<Ctx *>(p); }

/* Side s's pool offset after n more values: back to 0, and on to the next
   pass, where the next n would run past the pool's end.
   Why two sets of values and an odd pool length: cpprb's set stops walking
   up at the first ancestor whose sum did not change, so rewriting a leaf
   with the value it holds costs it one level where the others pay log N.
   A second pass over the same pairs would mostly rewrite the values of
   the first; odd passes take other values instead. And the ring of set
   would take the same values lap after lap if the pool's length divided
   N; an odd length divides no power of two. */
static void pool_next(Ctx *c, int s, uint32_t n) {
  c->off[s] += n;
  if (c->off[s] + n > c->pool) {
    c->off[s] = 0;
    ++c->pass[s];
  }
}

/* The values of side s's current pass. */
static const per_real *vals(const Ctx *c, int s) {
  return (c->pass[s] & 1 ? c->pool_val2 : c->pool_val).data() + c->off[s];
}

static const float *valsf(const Ctx *c, int s) {
  return (c->pass[s] & 1 ? c->pool_valf2 : c->pool_valf).data() + c->off[s];
}

/* ---- update ------------------------------------------------------------ */

static void k_update_per(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  for (uint64_t i = 0; i < iters; ++i) {
    per_status s = per_tree_set_batch(&c->t, c->pool_idx.data() + c->off[PER],
                                      vals(c, PER), c->B);
    if (s != PER_OK) c->err = s;
    pool_next(c, PER, c->B);
  }
}

static void k_update_textbook(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  for (uint64_t i = 0; i < iters; ++i) {
    classic_update_batch(&c->ct, c->pool_idx.data() + c->off[TEXTBOOK],
                         valsf(c, TEXTBOOK), c->B);
    pool_next(c, TEXTBOOK, c->B);
  }
}

/* One leaf of a peer's tree, its own way: TorchRL's Update, cpprb's set.
   The peer kernels below are written once for both. */
static void peer_set(TrSum &t, uint32_t i, per_real v) { t.Update(i, v); }
static void peer_set(CpTree &t, uint32_t i, per_real v) { t.set(i, v); }
static TrSum &peer_tree(Ctx *c, std::integral_constant<int, TORCHRL>) {
  return *c->tr;
}
static CpTree &peer_tree(Ctx *c, std::integral_constant<int, CPPRB>) {
  return *c->cp;
}

/* B one-leaf updates: TorchRL's batch update (BatchUpdateImpl) is this
   loop, and cpprb has no other. */
template <int S> static void k_update_peer(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  auto &t = peer_tree(c, std::integral_constant<int, S>());
  for (uint64_t i = 0; i < iters; ++i) {
    const uint32_t *idx = c->pool_idx.data() + c->off[S];
    const per_real *v = vals(c, S);
    for (uint32_t j = 0; j < c->B; ++j) peer_set(t, idx[j], v[j]);
    pool_next(c, S, c->B);
  }
}

/* ---- set: one iteration = one leaf ------------------------------------- */

static void k_set_per(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  for (uint64_t i = 0; i < iters; ++i) {
    per_status s = per_tree_set(&c->t, c->pos[PER], *vals(c, PER));
    if (s != PER_OK) c->err = s;
    if (++c->pos[PER] == c->n) c->pos[PER] = 0;
    pool_next(c, PER, 1);
  }
}

static void k_set_textbook(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  for (uint64_t i = 0; i < iters; ++i) {
    classic_add(&c->ct, *valsf(c, TEXTBOOK));
    pool_next(c, TEXTBOOK, 1);
  }
}

template <int S> static void k_set_peer(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  auto &t = peer_tree(c, std::integral_constant<int, S>());
  for (uint64_t i = 0; i < iters; ++i) {
    peer_set(t, c->pos[S], *vals(c, S));
    if (++c->pos[S] == c->n) c->pos[S] = 0;
    pool_next(c, S, 1);
  }
}

/* ---- sample ------------------------------------------------------------ */

static void k_sample_per(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  per_status s = bc_sample_per(&c->t, &c->rng, c->B, c->idx[PER].data(),
                               c->val[PER].data(), iters);
  if (s != PER_OK) c->err = s;
}

static void k_sample_textbook(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  for (uint64_t i = 0; i < iters; ++i)
    classic_sample(&c->ct, c->B, c->idx[TEXTBOOK].data(), c->val_c.data());
}

/* TorchRL's descent for u: the first leaf whose inclusive prefix sum is
   >= u, N when u is past the total, clamped to N - 1 as its
   PrioritizedSampler does. */
static int64_t torchrl_find(const TrSum &tr, per_real u, int64_t last) {
  return std::min(tr.ScanLowerBound(u), last);
}

/* cpprb's descent for mass u, with CppPrioritizedSampler's condition: the
   largest index whose exclusive prefix sum is <= u, at most N - 1. */
static std::size_t cpprb_find(CpTree &cp, per_real u, std::size_t n) {
  return cp.largest_region_index([=](auto v) { return v <= u; }, n);
}

/* The rest of a peer's sampling, its own way, for k_sample_peer. */
static per_real peer_total(const TrSum &t, uint32_t n) { return t.Query(0, n); }
static per_real peer_total(CpTree &t, uint32_t n) { return t.reduce(0, n); }
static uint32_t peer_find(const TrSum &t, per_real u, uint32_t n) {
  return (uint32_t)torchrl_find(t, u, (int64_t)n - 1);
}
static uint32_t peer_find(CpTree &t, per_real u, uint32_t n) {
  return (uint32_t)cpprb_find(t, u, n);
}
static per_real peer_get(const TrSum &t, uint32_t k) { return t.At(k); }
static per_real peer_get(CpTree &t, uint32_t k) { return t.get(k); }

/* A stratified batch: u_j = (j + U_j) * total / B from per.h's generator
   (one stream per side), each found by the peer's descent. */
template <int S> static void k_sample_peer(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  auto &t = peer_tree(c, std::integral_constant<int, S>());
  uint32_t *idx = c->idx[S].data();
  per_real *val = c->val[S].data();
  for (uint64_t i = 0; i < iters; ++i) {
    const per_real seg = peer_total(t, c->n) / (per_real)c->B;
    for (uint32_t j = 0; j < c->B; ++j) {
      per_real u = ((per_real)j + per_rng_real(&c->urng[S])) * seg;
      idx[j] = peer_find(t, u, c->n);
      val[j] = peer_get(t, idx[j]);
    }
  }
}

/* ---- step: one iteration = one training step of B items ---------------- */

/* The TD errors come from the pool (values in (0, 1]), the same for every
   side. */
static void k_step_per(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  for (uint64_t i = 0; i < iters; ++i) {
    per_status s = per_buffer_sample(&c->buf, c->B, NULL, NULL, c->ids.data(),
                                     c->w_p.data());
    if (s == PER_OK)
      s = per_buffer_update(&c->buf, c->ids.data(),
                            c->pool_valf.data() + c->off[PER], c->B, NULL);
    if (s != PER_OK) c->err = s;
    pool_next(c, PER, c->B);
  }
}

static void k_step_textbook(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  for (uint64_t i = 0; i < iters; ++i) {
    classic_step(&c->ct, c->n, c->B, c->pool_valf.data() + c->off[TEXTBOOK],
                 (float)k_alpha, (float)k_beta, (float)k_eps,
                 c->idx[TEXTBOOK].data(), c->val_c.data(), c->w_c.data(),
                 c->prio_c.data());
    pool_next(c, TEXTBOOK, c->B);
  }
}

static void k_step_torchrl(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  TrSum &tr = *c->tr;
  TrMin &trmin = *c->trmin;
  const per_real alpha = (per_real)k_alpha, beta = (per_real)k_beta;
  const per_real eps = (per_real)k_eps;
  const int64_t last = (int64_t)c->n - 1;
  uint32_t *idx = c->idx[TORCHRL].data();
  for (uint64_t i = 0; i < iters; ++i) {
    const float *td = c->pool_valf.data() + c->off[TORCHRL];
    const per_real total = tr.Query(0, c->n), pmin = trmin.Query(0, c->n);
    const per_real seg = total / (per_real)c->B;
    for (uint32_t j = 0; j < c->B; ++j) {
      per_real u = ((per_real)j + per_rng_real(&c->urng[TORCHRL])) * seg;
      idx[j] = (uint32_t)torchrl_find(tr, u, last);
      c->w_tr[j] = std::pow(tr.At(idx[j]) / pmin, -beta);
    }
    for (uint32_t j = 0; j < c->B; ++j)
      c->prio_tr[j] = std::pow((per_real)std::fabs(td[j]) + eps, alpha);
    for (uint32_t j = 0; j < c->B; ++j) tr.Update(idx[j], c->prio_tr[j]);
    for (uint32_t j = 0; j < c->B; ++j) trmin.Update(idx[j], c->prio_tr[j]);
    pool_next(c, TORCHRL, c->B);
  }
}

static void k_step_cpprb(void *p, uint64_t iters) {
  Ctx *c = ctx_of(p);
  CpSampler &cps = *c->cps;
  for (uint64_t i = 0; i < iters; ++i) {
    const float *td = c->pool_valf.data() + c->off[CPPRB];
    cps.sample(c->B, (per_real)k_beta, c->w_cp, c->idx_cp, c->n);
    cps.update_priorities(c->idx_cp.data(), td, c->B);
    pool_next(c, CPPRB, c->B);
  }
}

/* ---- checks (never timed) ---------------------------------------------- */

/* per.h's tree is valid; TorchRL and cpprb hold its leaves and its total
   bit for bit, the textbook its leaves in float. */
static void check_trees(Ctx *c) {
  per_status s = per_tree_check(&c->t);
  per_real total = per_tree_total(&c->t);
  if (s != PER_OK) fail(per_status_str(s), c->n, c->B);
  for (uint32_t i = 0; i < c->n; ++i) {
    per_real v = per_tree_get(&c->t, i);
    if (c->tr->At(i) != v || c->cp->get(i) != v) {
      fail("per.h, TorchRL and cpprb leaves differ after the same inputs", c->n,
           c->B);
      break;
    }
    if ((float)v != c->ct.node[c->ct.leaves + i]) {
      fail("per.h and textbook leaves differ after the same inputs", c->n,
           c->B);
      break;
    }
  }
  if (c->tr->Query(0, c->n) != total ||
      c->cp->reduce(0, ymd::PowerOf2(c->n)) != total)
    fail("per.h, TorchRL and cpprb totals differ", c->n, c->B);
}

/* Apply the whole pool once to every tree, in order: every leaf any side
   touched now holds the value of its last occurrence in the pool,
   whatever number of loops each side ran. */
static void sync_updates(Ctx *c) {
  for (size_t off = 0; off + c->B <= c->pool; off += c->B) {
    const uint32_t *idx = c->pool_idx.data() + off;
    if (per_tree_set_batch(&c->t, idx, c->pool_val.data() + off, c->B) !=
        PER_OK)
      fail("per_tree_set_batch", c->n, c->B);
    classic_update_batch(&c->ct, idx, c->pool_valf.data() + off, c->B);
    for (uint32_t j = 0; j < c->B; ++j) {
      c->tr->Update(idx[j], c->pool_val[off + j]);
      c->cp->set(idx[j], c->pool_val[off + j]);
    }
  }
}

/* One full lap of the ring from position 0 on every tree. */
static void sync_sets(Ctx *c) {
  c->ct.next = 0;
  for (uint32_t i = 0; i < c->n; ++i) {
    size_t j = i % c->pool;
    if (per_tree_set(&c->t, i, c->pool_val[j]) != PER_OK)
      fail("per_tree_set", c->n, 0);
    classic_add(&c->ct, c->pool_valf[j]);
    c->tr->Update(i, c->pool_val[j]);
    c->cp->set(i, c->pool_val[j]);
  }
}

/* Every timed side sampled used leaves, with their values (> 0). */
static void check_samples(Ctx *c) {
  for (int s = 0; s < NSIDES; ++s) {
    if (!c->on[s]) continue;
    for (uint32_t j = 0; j < c->B; ++j) {
      uint32_t k = c->idx[s][j];
      bool ok = k < c->n;
      if (ok && s != TEXTBOOK) {
        per_real v = c->val[s][j];
        ok = v > 0 && v == per_tree_get(&c->t, k);
      }
      if (!ok) {
        char what[64];
        snprintf(what, sizeof what, "%s sampled an invalid leaf", side_name[s]);
        fail(what, c->n, c->B);
        break;
      }
    }
  }
}

/* Weights w[0..B) in (0, max_w]. */
static bool weights_ok(const Ctx *c, const per_real *w, double max_w) {
  for (uint32_t j = 0; j < c->B; ++j)
    if (!(w[j] > 0 && (double)w[j] <= max_w)) return false;
  return true;
}

static void check_step(Ctx *c, int buffer_max) {
  if (c->on[PER]) {
    uint32_t ones = 0;
    per_status s = per_buffer_check(&c->buf);
    if (s != PER_OK) fail(per_status_str(s), c->n, c->B);
    for (uint32_t j = 0; j < c->B; ++j) {
      if (!(c->w_p[j] > 0 && c->w_p[j] <= 1) || (uint32_t)c->ids[j] >= c->n) {
        fail("per.h buffer weight or id out of range", c->n, c->B);
        break;
      }
      ones += c->w_p[j] == 1.0f;
    }
    if (!buffer_max && ones == 0)
      fail("per.h buffer weights not normalized by the batch max", c->n, c->B);
  }
  if (c->on[TORCHRL]) {
    for (uint32_t j = 0; j < c->B; ++j)
      if (c->idx[TORCHRL][j] >= c->n) {
        fail("torchrl step sampled an unused leaf", c->n, c->B);
        break;
      }
    /* p >= p_min, so (p / p_min)^-beta <= 1 exactly. */
    if (!weights_ok(c, c->w_tr.data(), 1.0))
      fail("torchrl step weight out of (0, 1]", c->n, c->B);
  }
  if (c->on[CPPRB]) {
    if (c->idx_cp.size() != c->B || c->w_cp.size() != c->B)
      fail("cpprb step returned a short batch", c->n, c->B);
    for (std::size_t k : c->idx_cp)
      if (k >= c->n) {
        fail("cpprb step sampled an unused leaf", c->n, c->B);
        break;
      }
    /* cpprb divides by the largest weight computed separately: a few ulps
       above 1 are its rounding. */
    if (c->w_cp.size() == c->B && !weights_ok(c, c->w_cp.data(), 1.0001))
      fail("cpprb step weight out of (0, 1]", c->n, c->B);
  }
}

/* For a stratified batch of `draws` drawn by per_tree_sample, the fraction
   of its u (rebuilt with per_tree_stratum_u, bit for bit per.h's) for
   which per_tree_find, TorchRL, cpprb and the textbook (u scaled to its
   float total) find per.h's leaf: agree[PER..CPPRB]. */
static void agreement(Ctx *c, uint32_t draws, double *agree) {
  per_rng r;
  std::vector<uint32_t> ip(draws);
  uint32_t same[NSIDES] = {0, 0, 0, 0};
  for (int s = 0; s < NSIDES; ++s)
    agree[s] = 0; /* also when the sample fails */
  per_rng_init(&r, 0x5EED);
  if (per_tree_sample(&c->t, &r, draws, ip.data(), NULL) != PER_OK) {
    fail("per_tree_sample", c->n, draws);
    return;
  }
  const per_real total = per_tree_total(&c->t);
  const per_real seg = total / (per_real)draws;
  const float ctotal = classic_total(&c->ct);
  for (uint32_t j = 0; j < draws; ++j) {
    per_real u = per_tree_stratum_u(0x5EED, 0, j, seg);
    uint32_t a = UINT32_MAX;
    if (per_tree_find(&c->t, u, &a) != PER_OK) a = UINT32_MAX;
    same[PER] += a == ip[j];
    same[TORCHRL] += torchrl_find(*c->tr, u, (int64_t)c->n - 1) == ip[j];
    same[CPPRB] += cpprb_find(*c->cp, u, c->n) == ip[j];
    float uc = (float)((double)u / (double)total) * ctotal;
    same[TEXTBOOK] += classic_find(&c->ct, uc) == ip[j];
  }
  for (int s = 0; s < NSIDES; ++s) agree[s] = (double)same[s] / draws;
}

/* ---- set-up ------------------------------------------------------------ */

static void setup(Ctx *c, const bc_opts *o, uint32_t n, uint32_t maxB,
                  const bool *on) {
  c->n = n;
  for (int s = 0; s < NSIDES; ++s) c->on[s] = on[s];
  /* per.h's and the textbook's trees from bench_common's leaves; the
     peers get per.h's leaves one Update / set at a time. */
  uint64_t s = bc_build_trees(o, n, 1, 1, &c->t, &c->per_mem, &c->ct);
  per_rng_init(&c->rng, o->seed);
  for (int k = 0; k < NSIDES; ++k) per_rng_init(&c->urng[k], o->seed);
  c->tr.reset(new TrSum(n));
  c->cp.reset(new CpTree(ymd::PowerOf2(n), std::plus<per_real>()));
  for (uint32_t i = 0; i < n; ++i) {
    per_real v = per_tree_get(&c->t, i);
    c->tr->Update(i, v);
    c->cp->set(i, v);
  }

  /* The pool: enough pairs that batches do not repeat within a short loop
     (bench_tree's pairs from the same generator state, one more), then
     the values of odd passes. */
  c->pool = bc_pool_size(maxB) + 1; /* odd: see pool_next */
  c->pool_idx.resize(c->pool);
  c->pool_val.resize(c->pool);
  c->pool_valf.resize(c->pool);
  bc_fill_pool(&s, n, c->pool, c->pool_idx.data(), c->pool_val.data(),
               c->pool_valf.data());
  c->pool_val2.resize(c->pool);
  c->pool_valf2.resize(c->pool);
  for (size_t i = 0; i < c->pool; ++i) {
    c->pool_valf2[i] = bc_prio(&s);
    c->pool_val2[i] = (per_real)c->pool_valf2[i];
  }
  for (int k = 0; k < NSIDES; ++k) {
    c->idx[k].assign(maxB, 0);
    c->val[k].assign(maxB, 0);
  }
  c->val_c.assign(maxB, 0);
  c->err = PER_OK;
}

/* The step's state: per.h's buffer of n 4-byte items at the initial
   priority (1), and every other side's leaves at 1 too: the textbook
   rebuilt, TorchRL's sum tree rewritten and a min tree beside it, cpprb's
   sampler filled through its own path (max priority 1, eps 0 while
   filling, so (1 + 0)^alpha = 1). */
static void setup_step(Ctx *c, const bc_opts *o, uint32_t maxB,
                       int buffer_max) {
  per_config cfg = per_config_default(c->n, sizeof(uint32_t));
  cfg.seed = o->seed;
  cfg.alpha = k_alpha;
  cfg.beta0 = cfg.beta1 = k_beta; /* the peers' fixed beta */
  cfg.eps = k_eps;
  if (buffer_max) cfg.flags |= PER_WEIGHTS_BUFFER_MAX;
  per_status s = per_buffer_init(&c->buf, &cfg, NULL);
  const uint32_t chunk = 4096;
  std::vector<uint32_t> items(chunk);
  for (uint32_t i = 0; i < c->n && s == PER_OK; i += chunk) {
    uint32_t m = c->n - i < chunk ? c->n - i : chunk;
    for (uint32_t j = 0; j < m; ++j) items[j] = i + j;
    s = per_buffer_add_batch(&c->buf, items.data(), m);
  }
  if (s != PER_OK) {
    fprintf(stderr, "per.h buffer of %u: %s\n", c->n, per_status_str(s));
    exit(2);
  }
  c->have_buf = true;
  c->ids.assign(maxB, 0);
  c->w_p.assign(maxB, 0);
  c->w_c.assign(maxB, 0);
  c->prio_c.assign(maxB, 0);
  c->w_tr.assign(maxB, 0);
  c->prio_tr.assign(maxB, 0);

  std::vector<float> one(c->n, 1.0f);
  classic_build(&c->ct, one.data(), c->n);

  c->cp.reset(); /* the sampler has its own trees */
  c->trmin.reset(new TrMin(c->n));
  for (uint32_t i = 0; i < c->n; ++i) {
    c->tr->Update(i, (per_real)1);
    c->trmin->Update(i, (per_real)1);
  }
  c->cps.reset(new CpSampler(c->n, (per_real)k_alpha));
  c->cps->set_eps(0);
  c->cps->set_priorities(0, c->n, c->n);
  c->cps->set_eps((per_real)k_eps);
}

static void teardown(Ctx *c) {
  if (c->have_buf) per_buffer_free(&c->buf);
  per_tree_free(&c->t);
  free(c->per_mem);
  classic_free(&c->ct);
}

/* ---- driver ------------------------------------------------------------ */

static FILE *csv_open(const char *path) {
  if (!path) return NULL;
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
    exit(2);
  }
  fprintf(f, "real,op,n,b,side,ns,min,max,batch_ns,reps,iters,vs_per\n");
  return f;
}

static void report(FILE *csv, const char *op, uint32_t n, uint32_t B,
                   const bc_result_n *r) {
  char bs[16];
  double per = r->ns[PER], best = 0;
  int best_side = -1;
  if (B) snprintf(bs, sizeof bs, "%u", B);
  else snprintf(bs, sizeof bs, "-");
  printf("%-6s %10u %5s", op, n, bs);
  for (int s = 0; s < NSIDES; ++s) {
    if (r->ns[s] > 0) printf("  %9.2f", r->ns[s]);
    else printf("  %9s", "-");
  }
  for (int s = TEXTBOOK; s <= CPPRB; ++s)
    if (r->ns[s] > 0 && (best_side < 0 || r->ns[s] < best)) {
      best = r->ns[s];
      best_side = s;
    }
  if (per > 0 && best_side >= 0)
    printf("  %6.2fx (%s)\n", best / per, side_name[best_side]);
  else printf("  %7s\n", "-");
  fflush(stdout);
  if (!csv) return;
  for (int s = 0; s < NSIDES; ++s) {
    if (!(r->ns[s] > 0)) continue;
    fprintf(csv, "%s,%s,%u,%u,%s,%.4f,%.4f,%.4f,%.1f,%d,%llu,%.4f\n",
            bc_real_name(), op, n, B, side_name[s], r->ns[s], r->min[s],
            r->max[s], r->ns[s] * (B ? B : 1), r->reps,
            (unsigned long long)r->iters[s], per > 0 ? r->ns[s] / per : 0.0);
  }
  fflush(csv);
}

/* One figure: op on batches of B (0: one item at a time), every side timed
   from the start of the pool and ring, reported, its errors failed. */
static void run_op(const bc_opts *o, FILE *csv, Ctx *c, const char *op,
                   uint32_t B, const bc_kernel *k) {
  bc_kernel kk[NSIDES];
  void *cc[NSIDES];
  c->B = B;
  c->ct.next = 0;
  for (int s = 0; s < NSIDES; ++s) {
    kk[s] = c->on[s] ? k[s] : NULL;
    cc[s] = c;
    c->off[s] = 0;
    c->pass[s] = 0;
    c->pos[s] = 0;
  }
  bc_result_n r = bc_measure_n(o, NSIDES, kk, cc, B ? B : 1);
  report(csv, op, c->n, B, &r);
  if (c->err != PER_OK) fail(per_status_str(c->err), c->n, B);
  c->err = PER_OK;
}

static bool g_on[NSIDES] = {true, true, true, true};
static int g_buffer_max = 0;

/* --sides LIST and --buffer-max. */
static int extra_opt(const char *opt, const char *val, int *bad) {
  if (strcmp(opt, "--buffer-max") == 0) {
    g_buffer_max = 1;
    return 2;
  }
  if (strcmp(opt, "--sides") != 0) return 0;
  if (!val) {
    *bad = 1;
    return 1;
  }
  bool on[NSIDES] = {false, false, false, false};
  const char *p = val;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    int found = -1;
    for (int s = 0; s < NSIDES; ++s)
      if (strlen(side_name[s]) == len && strncmp(p, side_name[s], len) == 0)
        found = s;
    if (len == 3 && strncmp(p, "per", 3) == 0) found = PER;
    if (found < 0) {
      *bad = 1;
      return 1;
    }
    on[found] = true;
    if (!e) break;
    p = e + 1;
  }
  for (int s = 0; s < NSIDES; ++s) g_on[s] = on[s];
  return 1;
}

int main(int argc, char **argv) {
  static const uint64_t def_n[] = {1024,    4096,    16384,   65536,   100000,
                                   1000000, 1048576, 4194304, 16777216};
  static const uint64_t def_b[] = {256, 1024, 4096};
  static const uint64_t quick_n[] = {1000, 4096};
  static const uint64_t quick_b[] = {16, 64};
  bc_opts o;
  uint32_t maxB = 0;

  if (!bc_parse(&o, argc, argv, usage, extra_opt)) return 2;
  if (o.huge) {
    fprintf(stderr, "--huge: the peers allocate their own trees; not "
                    "supported here\n");
    return 2;
  }
  if (o.side == 1) g_on[TEXTBOOK] = g_on[TORCHRL] = g_on[CPPRB] = false;
  if (o.side == 2) g_on[PER] = false;
  bc_default_list(o.n, &o.nn, o.quick ? quick_n : def_n, o.quick ? 2 : 9);
  bc_default_list(o.b, &o.nb, o.quick ? quick_b : def_b, o.quick ? 2 : 3);
  if (!bc_check_sizes(&o, &maxB)) return 2;
  FILE *csv = csv_open(o.csv);

  printf("bench_peers: per.h (PER_REAL=%s) vs TorchRL 0.10.0 and cpprb "
         "11.0.0 sum trees (T = %s) and the textbook float32 tree\n",
         bc_real_name(), bc_real_name());
  bc_print_setup(&o, "iterations", "");
  printf("%-6s %10s %5s  %9s  %9s  %9s  %9s  %s\n", "op", "N", "B", "per.h",
         "textbook", "torchrl", "cpprb", "best peer/per.h");
  printf("%-6s %10s %5s  %9s  %9s  %9s  %9s\n", "", "", "", "ns/item",
         "ns/item", "ns/item", "ns/item");

  static const bc_kernel k_update[NSIDES] = {k_update_per, k_update_textbook,
                                             k_update_peer<TORCHRL>,
                                             k_update_peer<CPPRB>};
  static const bc_kernel k_set[NSIDES] = {
      k_set_per, k_set_textbook, k_set_peer<TORCHRL>, k_set_peer<CPPRB>};
  static const bc_kernel k_sample[NSIDES] = {k_sample_per, k_sample_textbook,
                                             k_sample_peer<TORCHRL>,
                                             k_sample_peer<CPPRB>};
  static const bc_kernel k_step[NSIDES] = {k_step_per, k_step_textbook,
                                           k_step_torchrl, k_step_cpprb};

  for (int in = 0; in < o.nn; ++in) {
    Ctx c{};
    uint32_t n = (uint32_t)o.n[in];
    double agree[NSIDES];
    setup(&c, &o, n, maxB, g_on);
    agreement(&c, 4096, agree);
    printf("  (N=%u: per.h's leaf found for %.2f%% (per_tree_find), %.2f%% "
           "(torchrl), %.2f%% (cpprb), %.2f%% (textbook, float32) of 4096 "
           "stratified u)\n",
           n, 100 * agree[PER], 100 * agree[TORCHRL], 100 * agree[CPPRB],
           100 * agree[TEXTBOOK]);
    if (o.quick)
      for (int s = 0; s < NSIDES; ++s)
        if (agree[s] < 0.98) {
          char what[80];
          snprintf(what, sizeof what, "%s and per.h descents disagree",
                   side_name[s]);
          fail(what, n, 4096);
        }
    if (bc_want_op(&o, "sample"))
      for (int ib = 0; ib < o.nb; ++ib) {
        run_op(&o, csv, &c, "sample", (uint32_t)o.b[ib], k_sample);
        check_samples(&c);
      }
    if (bc_want_op(&o, "update"))
      for (int ib = 0; ib < o.nb; ++ib) {
        run_op(&o, csv, &c, "update", (uint32_t)o.b[ib], k_update);
        sync_updates(&c);
        check_trees(&c);
      }
    if (bc_want_op(&o, "set")) {
      run_op(&o, csv, &c, "set", 0, k_set);
      sync_sets(&c);
      check_trees(&c);
    }
    /* Last: it replaces the trees' leaves with the buffer's. */
    if (bc_want_op(&o, "step")) {
      setup_step(&c, &o, maxB, g_buffer_max);
      for (int ib = 0; ib < o.nb; ++ib) {
        run_op(&o, csv, &c, "step", (uint32_t)o.b[ib], k_step);
        check_step(&c, g_buffer_max);
      }
    }
    teardown(&c);
  }
  return bc_finish(csv, "bench_peers", failures,
                   "all sampled indices valid, per.h, TorchRL and cpprb trees "
                   "identical after the same inputs, step weights in (0, 1]");
}
