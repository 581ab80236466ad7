/* bench_traj.c - the trajectory accumulator (per_traj.h) against plain
   arrays of structs, on the three-timescale rollout, in one process.

   The accumulator has three timescales, the layout of the Python
   example in bench/accumulator.py:
     step        BUFFERED, T records of {float obs[4]; float reward;}
     episode     SINGLE, {float return; float length;}
     final_step  SINGLE, {float obs[4]; int32 reward;}
   One iteration is one rollout: T steps added, then the episode record
   (the rollout's return, T), then the final step (the last obs, reward
   1), then the build. Figures are ns per environment step (the rollout's
   time / T) and steps/s.

   Ops:
     record  per_traj_add_record once per record (each step's struct
             filled from the observation and the reward first), against
             an array of T structs written by assignment with a slot
             counter, the single records by assignment, and a build that
             hands out the array and sets the counter to 0.
     field   per_traj_add once per field (obs, reward; return, length;
             obs, reward), against the same arrays written field by field
             (memcpy of the obs, assignment of the rest).
   Both sides check the slot counter against T on each step. The inputs
   (16 rollouts of observations and rewards) are drawn before any
   timing; both sides cycle through them. After the timing, each side
   runs one more rollout from the same inputs and the two results are
   compared byte for byte (the exit status says whether they agree).
   --n sets T (default 64; --quick 16). */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define PER_IMPLEMENTATION
#include "per.h"
#define PER_TRAJ_IMPLEMENTATION
#include "per_traj.h"

#include "bench_common.h"

#define OBS 4u
#define POOL_R 16u /* rollouts of inputs the loops cycle through */

typedef struct step_rec {
  float obs[OBS];
  float reward;
} step_rec;

typedef struct episode_rec {
  float ret;
  float length;
} episode_rec;

typedef struct final_rec {
  float obs[OBS];
  int32_t reward;
} final_rec;

static const char *usage =
    "usage: bench_traj [options]\n"
    "  ops: record, field; --n: steps per rollout T (default 64)\n";

static int failures;
/* Each build reads one value of what it handed out into here. */
static volatile float sink;

static void fail(const char *op, const char *what) {
  fprintf(stderr, "bench_traj %s: %s\n", op, what);
  ++failures;
}

/* The inputs: POOL_R rollouts of T steps. */
typedef struct pool {
  uint32_t T;
  float *obs;    /* POOL_R * T * OBS */
  float *reward; /* POOL_R * T */
  float ret[POOL_R];
} pool;

/* The per_traj side. */
typedef struct side_traj {
  const pool *p;
  uint32_t at; /* the next rollout of the pool */
  per_traj acc;
  per_traj_out out;
  uint32_t f_obs, f_rew, f_ret, f_len, f_fobs, f_frew; /* field indices */
} side_traj;

/* The plain side. */
typedef struct side_plain {
  const pool *p;
  uint32_t at;
  step_rec *steps; /* T */
  uint32_t n;      /* the slot counter */
  episode_rec ep;
  final_rec fin;
  const step_rec *out; /* what the last build handed out */
  uint32_t out_n;
} side_plain;

static void pool_init(pool *p, uint32_t T, uint64_t seed) {
  uint64_t s = seed * 0x100000001B3ull + T;
  uint32_t r, t, k;
  p->T = T;
  p->obs = (float *)bc_xmalloc((size_t)POOL_R * T * OBS * sizeof(float));
  p->reward = (float *)bc_xmalloc((size_t)POOL_R * T * sizeof(float));
  for (r = 0; r < POOL_R; ++r) {
    float ret = 0;
    for (t = 0; t < T; ++t) {
      size_t i = (size_t)r * T + t;
      for (k = 0; k < OBS; ++k) p->obs[i * OBS + k] = 2.0f * bc_prio(&s) - 1.0f;
      p->reward[i] = bc_prio(&s);
      ret += p->reward[i];
    }
    p->ret[r] = ret;
  }
}

static void pool_free(pool *p) {
  free(p->obs);
  free(p->reward);
}

static int traj_init(side_traj *d, const pool *p) {
  per_traj_timescale ts[3];
  per_traj_field f[6];
  per_traj_spec spec;
  memset(d, 0, sizeof *d);
  d->p = p;
  ts[0].name = "step";
  ts[0].kind = PER_TRAJ_BUFFERED;
  ts[0].capacity = p->T;
  ts[0].record_bytes = (uint32_t)sizeof(step_rec);
  ts[1].name = "episode";
  ts[1].kind = PER_TRAJ_SINGLE;
  ts[1].capacity = 1;
  ts[1].record_bytes = (uint32_t)sizeof(episode_rec);
  ts[2].name = "final_step";
  ts[2].kind = PER_TRAJ_SINGLE;
  ts[2].capacity = 1;
  ts[2].record_bytes = (uint32_t)sizeof(final_rec);
  f[0].name = "obs";
  f[0].timescale = 0;
  f[0].offset = (uint32_t)offsetof(step_rec, obs);
  f[0].bytes = (uint32_t)sizeof(float[OBS]);
  f[1].name = "reward";
  f[1].timescale = 0;
  f[1].offset = (uint32_t)offsetof(step_rec, reward);
  f[1].bytes = (uint32_t)sizeof(float);
  f[2].name = "return";
  f[2].timescale = 1;
  f[2].offset = (uint32_t)offsetof(episode_rec, ret);
  f[2].bytes = (uint32_t)sizeof(float);
  f[3].name = "length";
  f[3].timescale = 1;
  f[3].offset = (uint32_t)offsetof(episode_rec, length);
  f[3].bytes = (uint32_t)sizeof(float);
  f[4].name = "obs";
  f[4].timescale = 2;
  f[4].offset = (uint32_t)offsetof(final_rec, obs);
  f[4].bytes = (uint32_t)sizeof(float[OBS]);
  f[5].name = "reward";
  f[5].timescale = 2;
  f[5].offset = (uint32_t)offsetof(final_rec, reward);
  f[5].bytes = (uint32_t)sizeof(int32_t);
  spec.ntimescales = 3;
  spec.timescales = ts;
  spec.nfields = 6;
  spec.fields = f;
  if (per_traj_init_spec(&d->acc, &spec, NULL) != PER_OK) {
    fail("init", per_traj_error(&d->acc));
    return 0;
  }
  d->f_obs = per_traj_find_field(&d->acc, 0, "obs");
  d->f_rew = per_traj_find_field(&d->acc, 0, "reward");
  d->f_ret = per_traj_find_field(&d->acc, 1, "return");
  d->f_len = per_traj_find_field(&d->acc, 1, "length");
  d->f_fobs = per_traj_find_field(&d->acc, 2, "obs");
  d->f_frew = per_traj_find_field(&d->acc, 2, "reward");
  return 1;
}

static void plain_init(side_plain *d, const pool *p) {
  memset(d, 0, sizeof *d);
  d->p = p;
  d->steps = (step_rec *)bc_xmalloc((size_t)p->T * sizeof(step_rec));
  memset(d->steps, 0, (size_t)p->T * sizeof(step_rec));
}

/* ---- record: one call per record --------------------------------------- */

static void k_record_traj(void *c, uint64_t iters) {
  side_traj *d = (side_traj *)c;
  const pool *p = d->p;
  uint32_t T = p->T, t;
  while (iters--) {
    size_t base = (size_t)d->at * T;
    const float *last = p->obs + (base + T - 1) * OBS;
    step_rec s;
    episode_rec e;
    final_rec l;
    for (t = 0; t < T; ++t) {
      memcpy(s.obs, p->obs + (base + t) * OBS, sizeof s.obs);
      s.reward = p->reward[base + t];
      if (per_traj_add_record(&d->acc, 0, &s) != PER_OK)
        fail("record", per_traj_error(&d->acc));
    }
    e.ret = p->ret[d->at];
    e.length = (float)T;
    if (per_traj_add_record(&d->acc, 1, &e) != PER_OK)
      fail("record", per_traj_error(&d->acc));
    memcpy(l.obs, last, sizeof l.obs);
    l.reward = 1;
    if (per_traj_add_record(&d->acc, 2, &l) != PER_OK)
      fail("record", per_traj_error(&d->acc));
    if (per_traj_build(&d->acc, &d->out) != PER_OK)
      fail("record", per_traj_error(&d->acc));
    sink = ((const step_rec *)d->out.parts[0].records)[d->out.n - 1].reward;
    d->at = (d->at + 1) % POOL_R;
  }
}

static void k_record_plain(void *c, uint64_t iters) {
  side_plain *d = (side_plain *)c;
  const pool *p = d->p;
  uint32_t T = p->T, t;
  while (iters--) {
    size_t base = (size_t)d->at * T;
    const float *last = p->obs + (base + T - 1) * OBS;
    step_rec s;
    for (t = 0; t < T; ++t) {
      memcpy(s.obs, p->obs + (base + t) * OBS, sizeof s.obs);
      s.reward = p->reward[base + t];
      if (d->n == T) {
        fail("record", "plain: full");
        continue;
      }
      d->steps[d->n++] = s;
    }
    d->ep.ret = p->ret[d->at];
    d->ep.length = (float)T;
    memcpy(d->fin.obs, last, sizeof d->fin.obs);
    d->fin.reward = 1;
    d->out = d->steps;
    d->out_n = d->n;
    d->n = 0;
    sink = d->out[d->out_n - 1].reward;
    d->at = (d->at + 1) % POOL_R;
  }
}

/* ---- field: one call per field ------------------------------------------ */

static void k_field_traj(void *c, uint64_t iters) {
  side_traj *d = (side_traj *)c;
  const pool *p = d->p;
  uint32_t T = p->T, t;
  const int32_t one = 1;
  while (iters--) {
    size_t base = (size_t)d->at * T;
    const float *last = p->obs + (base + T - 1) * OBS;
    float len = (float)T;
    for (t = 0; t < T; ++t) {
      if (per_traj_add(&d->acc, d->f_obs, p->obs + (base + t) * OBS) !=
              PER_OK ||
          per_traj_add(&d->acc, d->f_rew, p->reward + base + t) != PER_OK)
        fail("field", per_traj_error(&d->acc));
    }
    if (per_traj_add(&d->acc, d->f_ret, &p->ret[d->at]) != PER_OK ||
        per_traj_add(&d->acc, d->f_len, &len) != PER_OK ||
        per_traj_add(&d->acc, d->f_fobs, last) != PER_OK ||
        per_traj_add(&d->acc, d->f_frew, &one) != PER_OK)
      fail("field", per_traj_error(&d->acc));
    if (per_traj_build(&d->acc, &d->out) != PER_OK)
      fail("field", per_traj_error(&d->acc));
    sink = ((const step_rec *)d->out.parts[0].records)[d->out.n - 1].reward;
    d->at = (d->at + 1) % POOL_R;
  }
}

static void k_field_plain(void *c, uint64_t iters) {
  side_plain *d = (side_plain *)c;
  const pool *p = d->p;
  uint32_t T = p->T, t;
  while (iters--) {
    size_t base = (size_t)d->at * T;
    const float *last = p->obs + (base + T - 1) * OBS;
    for (t = 0; t < T; ++t) {
      if (d->n == T) {
        fail("field", "plain: full");
        continue;
      }
      memcpy(d->steps[d->n].obs, p->obs + (base + t) * OBS,
             sizeof d->steps[0].obs);
      d->steps[d->n].reward = p->reward[base + t];
      d->n += 1;
    }
    d->ep.ret = p->ret[d->at];
    d->ep.length = (float)T;
    memcpy(d->fin.obs, last, sizeof d->fin.obs);
    d->fin.reward = 1;
    d->out = d->steps;
    d->out_n = d->n;
    d->n = 0;
    sink = d->out[d->out_n - 1].reward;
    d->at = (d->at + 1) % POOL_R;
  }
}

/* One more rollout on each side from the same inputs: the built records
   must be the same bytes. */
static void check_same(const char *op, side_traj *a, side_plain *b,
                       bc_kernel ka, bc_kernel kb) {
  const per_traj_part *pt;
  uint32_t T = a->p->T;
  a->at = b->at = 3;
  ka(a, 1);
  kb(b, 1);
  pt = a->out.parts;
  if (a->out.nparts != 3 || pt[0].n != T || pt[1].n != 1 || pt[2].n != 1 ||
      b->out_n != T) {
    fail(op, "a rollout did not build T steps and both single records");
    return;
  }
  if (pt[0].record_bytes != sizeof(step_rec) ||
      memcmp(pt[0].records, b->out, (size_t)T * sizeof(step_rec)) != 0)
    fail(op, "the step records differ from the plain side's");
  if (memcmp(pt[1].records, &b->ep, sizeof b->ep) != 0)
    fail(op, "the episode record differs from the plain side's");
  if (memcmp(pt[2].records, &b->fin, sizeof b->fin) != 0)
    fail(op, "the final_step record differs from the plain side's");
}

static void report(FILE *csv, const char *op, uint32_t T, const bc_result *r,
                   const char *a_name) {
  printf("%-7s T %4u  per_traj %7.2f ns/step (%6.2f M steps/s)   plain "
         "%7.2f ns/step (%6.2f M steps/s)",
         op, T, r->a_ns, r->a_ns > 0 ? 1e3 / r->a_ns : 0, r->b_ns,
         r->b_ns > 0 ? 1e3 / r->b_ns : 0);
  bc_print_ratio(r);
  bc_csv_row(csv, op, T, 0, r, T, a_name, "plain_structs");
}

int main(int argc, char **argv) {
  static const uint64_t def_n[] = {64}, quick_n[] = {16};
  bc_opts o;
  FILE *csv;
  int j;
  if (!bc_parse(&o, argc, argv, usage, NULL)) return 2;
  bc_default_list(o.n, &o.nn, o.quick ? quick_n : def_n, 1);
  for (j = 0; j < o.nn; ++j)
    if (o.n[j] == 0 || o.n[j] > (1u << 20)) {
      fprintf(stderr, "T must be 1 .. 2^20\n");
      return 2;
    }
  csv = bc_csv_open(&o);
  printf(
      "bench_traj: per_traj.h, the three-timescale rollout: T steps of {float "
      "obs[4]; float reward}, an episode {return, length}, a final "
      "step {float obs[4]; int32 reward}, build\n");
  bc_print_setup(&o, "rollouts", "");
  printf("ratio: plain / per_traj (above 1: per_traj is faster)\n");
  for (j = 0; j < o.nn; ++j) {
    uint32_t T = (uint32_t)o.n[j];
    pool p;
    side_traj a;
    side_plain b;
    bc_result r;
    pool_init(&p, T, o.seed);
    plain_init(&b, &p);
    if (traj_init(&a, &p)) {
      if (bc_want_op(&o, "record")) {
        r = bc_measure(&o, o.side == 2 ? NULL : k_record_traj, &a,
                       o.side == 1 ? NULL : k_record_plain, &b, T);
        report(csv, "record", T, &r, "per_traj_add_record");
        check_same("record", &a, &b, k_record_traj, k_record_plain);
      }
      if (bc_want_op(&o, "field")) {
        r = bc_measure(&o, o.side == 2 ? NULL : k_field_traj, &a,
                       o.side == 1 ? NULL : k_field_plain, &b, T);
        report(csv, "field", T, &r, "per_traj_add");
        check_same("field", &a, &b, k_field_traj, k_field_plain);
      }
    }
    per_traj_free(&a.acc);
    free(b.steps);
    pool_free(&p);
  }
  return bc_finish(csv, "bench_traj", failures,
                   "every rollout built T steps; per_traj's records equal "
                   "the plain side's, byte for byte");
}
