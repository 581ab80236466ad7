/* test_traj.c - the trajectory accumulator (per_traj_*): rollouts filled
   field by field in several orders and by whole steps, the built records
   against records written by hand byte for byte (padding 0), episode
   ends, once fields replaced and cleared, ids; partial steps and full
   fields refused with their exact messages and the accumulator left byte
   for byte as it was; reset; every init error; allocation failure; no
   allocation after init; trajectories fed to a buffer with
   per_buffer_add_steps. Runs with PER_REAL double and float (the
   accumulator does not depend on it). */
#include "buffer_util.h"
#define PER_TRAJ_IMPLEMENTATION
#include "per_traj.h"

/* The step record: padding after flag (3 bytes) and after action (4
   bytes) that no field covers. */
typedef struct tstep {
  float obs[3];
  uint8_t flag;
  int32_t action;
  double value;
} tstep;

/* The once record: ret at 0, final_obs at 4, 4 bytes no field covers. */
#define ONCE_BYTES 20u

static const unsigned char ONCE_ZEROS[ONCE_BYTES] = {0};

/* Field numbers: a ONCE field first, so that "the first STEP field" is
   not field 0. */
enum { F_RET, F_OBS, F_FLAG, F_ACTION, F_VALUE, F_FINAL, NF };

static const per_traj_field FIELDS[NF] = {
    {"ret", PER_TRAJ_ONCE, 0, sizeof(float)},
    {"obs", PER_TRAJ_STEP, offsetof(tstep, obs), sizeof(float[3])},
    {"flag", PER_TRAJ_STEP, offsetof(tstep, flag), sizeof(uint8_t)},
    {"action", PER_TRAJ_STEP, offsetof(tstep, action), sizeof(int32_t)},
    {"value", PER_TRAJ_STEP, offsetof(tstep, value), sizeof(double)},
    {"final_obs", PER_TRAJ_ONCE, 4, sizeof(float[3])}};

static per_traj_config cfg_with(uint32_t capacity, const per_traj_field *fields,
                                uint32_t n) {
  per_traj_config c;
  c.capacity = capacity;
  c.step_bytes = sizeof(tstep);
  c.once_bytes = ONCE_BYTES;
  c.nfields = n;
  c.fields = fields;
  return c;
}

/* ---- the values of step t of trajectory k ------------------------------ */

static void obs_of(uint32_t k, uint32_t t, float obs[3]) {
  uint32_t i;
  for (i = 0; i < 3; ++i) obs[i] = (float)(k * 1000u + t * 10u + i) + 0.25f;
}
static uint8_t flag_of(uint32_t k, uint32_t t) {
  return (uint8_t)(t * 7u + k + 1u);
}
static int32_t action_of(uint32_t k, uint32_t t) {
  return -(int32_t)(t + 100u * k) - 1;
}
static double value_of(uint32_t k, uint32_t t) {
  return (double)t * 0.5 + (double)k + 1e-9;
}

/* Field f's value for step t of trajectory k, as bytes. */
static const void *field_value(uint32_t k, uint32_t t, uint32_t f,
                               unsigned char buf[16]) {
  float obs[3];
  uint8_t flag = flag_of(k, t);
  int32_t act = action_of(k, t);
  double v = value_of(k, t);
  switch (f) {
    case F_OBS:
      obs_of(k, t, obs);
      memcpy(buf, obs, sizeof obs);
      break;
    case F_FLAG: memcpy(buf, &flag, 1); break;
    case F_ACTION: memcpy(buf, &act, 4); break;
    default: memcpy(buf, &v, 8); break;
  }
  return buf;
}

/* The record as it must come out: zeros, then each field at its offset. */
static void expect_record(uint32_t k, uint32_t t,
                          unsigned char rec[sizeof(tstep)]) {
  unsigned char v[16];
  uint32_t f;
  memset(rec, 0, sizeof(tstep));
  for (f = F_OBS; f <= F_VALUE; ++f)
    memcpy(rec + FIELDS[f].offset, field_value(k, t, f, v), FIELDS[f].bytes);
}

/* The same step as a struct whose padding is garbage (add_step must not
   copy it). */
static void make_step(uint32_t k, uint32_t t, tstep *s) {
  memset(s, 0xAB, sizeof *s);
  obs_of(k, t, s->obs);
  s->flag = flag_of(k, t);
  s->action = action_of(k, t);
  s->value = value_of(k, t);
}

/* ---- snapshots: the struct (but its error message) and its block ------- */

typedef struct tsnap {
  per_traj head;
  regions r;
} tsnap;

static int tsnap_regions(const per_traj *a, const void **p, size_t *n) {
  size_t nf = a->fields ? a->cfg.nfields : 0;
  int k = 0;
  p[k] = a->fields;
  n[k++] = nf * sizeof(per_traj_field);
  p[k] = a->count;
  n[k++] = a->count ? nf * sizeof(uint32_t) : 0;
  p[k] = a->steps;
  n[k++] = a->steps ? (size_t)a->cfg.capacity * a->cfg.step_bytes : 0;
  p[k] = a->once;
  n[k++] = a->once ? a->cfg.once_bytes : 0;
  p[k] = a->ends;
  n[k++] = a->ends ? a->cfg.capacity : 0;
  return k;
}

static tsnap tsnap_take(const per_traj *a) {
  tsnap s;
  const void *p[5];
  size_t len[5];
  int n = tsnap_regions(a, p, len);
  memcpy(&s.head, a, sizeof *a);
  memset(s.head.error, 0, sizeof s.head.error);
  regions_take(&s.r, p, len, n);
  return s;
}

/* 1 when a is as when s was taken (its names too), but for a->error.
   Frees s. */
static int tsnap_same(tsnap *s, const per_traj *a) {
  const void *p[5];
  size_t len[5];
  per_traj head;
  uint32_t f;
  int n, same;
  memcpy(&head, a, sizeof head);
  memset(head.error, 0, sizeof head.error);
  n = tsnap_regions(a, p, len);
  same = regions_same(&s->r, p, len, n) &
         (memcmp(&s->head, &head, sizeof head) == 0);
  for (f = 0; same && a->fields && f < a->cfg.nfields; ++f)
    if (strcmp(a->fields[f].name, FIELDS[f].name) != 0) same = 0;
  return same;
}

#define CHECK_TRAJ_UNCHANGED(s, a) \
  CHECK_MSG(tsnap_same(&(s), (a)), "accumulator changed by a failing call")

#define CHECK_ERROR(a, want)                                  \
  do {                                                        \
    const char *t_e = per_traj_error(a);                      \
    if (strcmp(t_e, (want)) == 0) ++t_pass_count;             \
    else T_FAIL_AT("error \"%s\", want \"%s\"", t_e, (want)); \
  } while (0)

/* The accumulator after a failed init: zero but for its message. */
static int zero_but_error(const per_traj *a) {
  per_traj z, c;
  memset(&z, 0, sizeof z);
  memcpy(&c, a, sizeof c);
  memset(c.error, 0, sizeof c.error);
  return memcmp(&c, &z, sizeof z) == 0;
}

/* Check a built trajectory: records of trajectory k, steps [0, n), ends,
   once record (ret, final_obs or zeros), id. */
static void check_out(const per_traj_out *out, uint32_t k, uint32_t n,
                      const uint8_t *ends, const float *ret,
                      const float *final_obs, uint64_t id) {
  unsigned char rec[sizeof(tstep)], once[ONCE_BYTES];
  uint32_t t;
  CHECK_EQ_U(out->n, n);
  CHECK_EQ_U(out->id, id);
  for (t = 0; t < n && t < out->n; ++t) {
    expect_record(k, t, rec);
    CHECK_MSG(
        memcmp((const unsigned char *)out->steps + (size_t)t * sizeof(tstep),
               rec, sizeof rec) == 0,
        "trajectory %u step %u differs", (unsigned)k, (unsigned)t);
  }
  CHECK_MEM(out->ends, ends, n);
  memset(once, 0, sizeof once);
  if (ret) memcpy(once, ret, sizeof *ret);
  if (final_obs) memcpy(once + 4, final_obs, 3 * sizeof(float));
  CHECK_MEM(out->once, once, sizeof once);
}

/* ---- rollouts ----------------------------------------------------------- */

/* Four trajectories through one accumulator (capacity 8): step by step,
   field by field (each field's whole column before the next), whole steps
   with add_step, and a mix; lengths 8, 5, 8, 3; ends inside and at the
   end; once fields replaced, left out (then 0), and ids 0..3. */
static void test_rollouts(void) {
  per_traj_config c = cfg_with(8, FIELDS, NF);
  per_traj a;
  per_traj_out out;
  unsigned char v[16];
  uint8_t ends[8];
  float ret, fin[3];
  uint32_t t, f;
  REQUIRE(per_traj_init(&a, &c, NULL) == PER_OK);
  CHECK_ERROR(&a, "");
  CHECK_EQ_U(a.built, 0);
  CHECK_EQ_U(per_traj_steps(&a), 0);
  for (t = 0; t < 8 * sizeof(tstep); ++t) CHECK_EQ_U(a.steps[t], 0);
  CHECK(a.cfg.fields == a.fields);
  for (f = 0; f < NF; ++f) {
    CHECK(strcmp(a.fields[f].name, FIELDS[f].name) == 0);
    CHECK(a.fields[f].name != FIELDS[f].name); /* copied */
  }

  /* trajectory 0: step by step, fields in record order; a TERMINATED end
     inside (step 3), TRUNCATED at the end; ret added twice (the second
     wins), final_obs once */
  memset(ends, 0, sizeof ends);
  for (t = 0; t < 8; ++t) {
    for (f = F_OBS; f <= F_VALUE; ++f)
      CHECK_OK(per_traj_add(&a, f, field_value(0, t, f, v)));
    CHECK_EQ_U(per_traj_steps(&a), t + 1);
    if (t == 3) CHECK_OK(per_traj_end(&a, PER_END_TERMINATED));
  }
  ends[3] = PER_END_TERMINATED;
  CHECK_OK(per_traj_end(&a, PER_END_NONE)); /* replaced below */
  CHECK_OK(per_traj_end(&a, PER_END_TRUNCATED));
  ends[7] = PER_END_TRUNCATED;
  ret = 1.5f;
  CHECK_OK(per_traj_add(&a, F_RET, &ret));
  CHECK_EQ_U(a.count[F_RET], 1);
  ret = -7.25f;
  CHECK_OK(per_traj_add(&a, F_RET, &ret));
  CHECK_EQ_U(a.count[F_RET], 1);
  obs_of(1, 0, fin); /* the bootstrap observation: trajectory 1's first */
  CHECK_OK(per_traj_add(&a, F_FINAL, fin));
  CHECK_OK(per_traj_build(&a, &out));
  check_out(&out, 0, 8, ends, &ret, fin, 0);
  CHECK_EQ_U(a.built, 1);
  CHECK_EQ_U(per_traj_steps(&a), 0);
  for (f = 0; f < NF; ++f) CHECK_EQ_U(a.count[f], 0);
  CHECK(out.steps == a.steps && out.ends == a.ends && out.once == a.once);
  /* still valid after the build, and after a failed call */
  CHECK_STATUS(per_traj_end(&a, PER_END_TERMINATED), PER_ERR_EMPTY);
  CHECK_STATUS(per_traj_build(&a, &out), PER_ERR_EMPTY);
  check_out(&out, 0, 8, ends, &ret, fin, 0);

  /* trajectory 1: field by field, the whole column of each field, in a
     scrambled field order; 5 steps. Its first obs is read from the built
     once record (the bootstrap observation), by the add that clears that
     record; no final_obs (then 0) */
  CHECK_OK(per_traj_add(&a, F_OBS, (const unsigned char *)out.once + 4));
  CHECK_EQ_U(a.ends[7], PER_END_NONE); /* the first add cleared the ends */
  CHECK_MEM(a.once, ONCE_ZEROS, ONCE_BYTES); /* and the once record */
  CHECK_EQ_U(a.count[F_OBS], 1);
  {
    static const uint32_t order[4] = {F_VALUE, F_FLAG, F_OBS, F_ACTION};
    uint32_t i;
    for (i = 0; i < 4; ++i) {
      f = order[i];
      for (t = f == F_OBS ? 1 : 0; t < 5; ++t) {
        CHECK_EQ_U(per_traj_steps(&a), i == 3 ? t : 0);
        CHECK_OK(per_traj_add(&a, f, field_value(1, t, f, v)));
        CHECK_EQ_U(a.count[f], t + 1);
      }
    }
  }
  CHECK_EQ_U(per_traj_steps(&a), 5);
  ret = 4.5f;
  CHECK_OK(per_traj_add(&a, F_RET, &ret));
  memset(ends, 0, sizeof ends);
  CHECK_OK(per_traj_build(&a, &out));
  check_out(&out, 1, 5, ends, &ret, NULL, 1);

  /* trajectory 2: whole steps, structs with garbage padding; the ends
     given with them; first ret from the built once record, into its own
     place (the rest of the record is cleared around it), then final_obs */
  CHECK_OK(per_traj_add(&a, F_RET, out.once));
  {
    unsigned char once[ONCE_BYTES];
    memset(once, 0, sizeof once);
    memcpy(once, &ret, sizeof ret);
    CHECK_MEM(a.once, once, ONCE_BYTES);
  }
  obs_of(2, 8, fin);
  CHECK_OK(per_traj_add(&a, F_FINAL, fin));
  memset(ends, 0, sizeof ends);
  for (t = 0; t < 8; ++t) {
    tstep s;
    make_step(2, t, &s);
    ends[t] = (uint8_t)(t % 3);
    CHECK_OK(per_traj_add_step(&a, &s, ends[t]));
    CHECK_EQ_U(per_traj_steps(&a), t + 1);
  }
  CHECK_OK(per_traj_build(&a, &out));
  check_out(&out, 2, 8, ends, &ret, fin, 2);

  /* trajectory 3: a mix: add_step, then fields one by one, then
     add_step again, then end on the last */
  {
    tstep s;
    memset(ends, 0, sizeof ends);
    make_step(3, 0, &s);
    CHECK_OK(per_traj_add_step(&a, &s, PER_END_TERMINATED));
    ends[0] = PER_END_TERMINATED;
    for (f = F_VALUE; f >= F_OBS; --f)
      CHECK_OK(per_traj_add(&a, f, field_value(3, 1, f, v)));
    make_step(3, 2, &s);
    CHECK_OK(per_traj_add_step(&a, &s, PER_END_NONE));
    CHECK_OK(per_traj_end(&a, PER_END_TRUNCATED));
    ends[2] = PER_END_TRUNCATED;
    ret = 3.0f;
    CHECK_OK(per_traj_add(&a, F_RET, &ret));
    CHECK_OK(per_traj_build(&a, &out));
    check_out(&out, 3, 3, ends, &ret, NULL, 3);
  }
  CHECK_EQ_U(a.built, 4);
  per_traj_free(&a);
  CHECK(zero_but_error(&a) && a.error[0] == 0);
}

/* ---- refusals ----------------------------------------------------------- */

/* Partial steps at build and add_step, full fields, bad ends, an unknown
   field: each refused with its exact message, the accumulator unchanged
   but for the message; the next good call clears the message. */
static void test_refusals(void) {
  per_traj_config c = cfg_with(8, FIELDS, NF);
  per_traj a;
  per_traj_out out, before;
  unsigned char v[16];
  tstep s;
  tsnap snap;
  uint32_t t, f;
  REQUIRE(per_traj_init(&a, &c, NULL) == PER_OK);
  make_step(0, 0, &s);

  /* nothing yet */
  snap = tsnap_take(&a);
  CHECK_STATUS(per_traj_build(&a, &out), PER_ERR_EMPTY);
  CHECK_ERROR(&a, "per_traj_build: no step to build");
  CHECK_STATUS(per_traj_end(&a, PER_END_TERMINATED), PER_ERR_EMPTY);
  CHECK_ERROR(
      &a,
      "per_traj_end: no complete step (every step field needs a value) to end");
  CHECK_TRAJ_UNCHANGED(snap, &a);

  /* 3 obs, 2 flags, 3 actions, 3 values: 2 complete steps */
  for (f = F_OBS; f <= F_VALUE; ++f)
    for (t = 0; t < (f == F_FLAG ? 2u : 3u); ++t)
      CHECK_OK(per_traj_add(&a, f, field_value(0, t, f, v)));
  CHECK_EQ_U(per_traj_steps(&a), 2);
  /* step 1, the last complete */
  CHECK_OK(per_traj_end(&a, PER_END_TERMINATED));
  CHECK_EQ_U(a.ends[1], PER_END_TERMINATED);
  CHECK_EQ_U(a.ends[2], PER_END_NONE);
  CHECK_ERROR(&a, "");
  memset(&out, 0x5A, sizeof out);
  before = out;
  snap = tsnap_take(&a);
  CHECK_STATUS(per_traj_build(&a, &out), PER_ERR_ARG);
  CHECK_ERROR(
      &a, "per_traj_build: step field \"flag\" has 2 values but \"obs\" has 3");
  CHECK_STATUS(per_traj_add_step(&a, &s, PER_END_NONE), PER_ERR_ARG);
  CHECK_ERROR(
      &a,
      "per_traj_add_step: step field \"flag\" has 2 values but \"obs\" has 3");
  CHECK_STATUS(per_traj_end(&a, 3), PER_ERR_ARG);
  CHECK_ERROR(&a,
              "per_traj_end: end 3 is not PER_END_NONE, PER_END_TERMINATED or "
              "PER_END_TRUNCATED");
  CHECK_STATUS(per_traj_add(&a, NF, v), PER_ERR_INDEX);
  CHECK_ERROR(&a, "per_traj_add: field 6 out of range: 6 fields");
  CHECK_STATUS(per_traj_add(&a, 0xffffffffu, v), PER_ERR_INDEX);
  CHECK_ERROR(&a, "per_traj_add: field 4294967295 out of range: 6 fields");
  CHECK_STATUS(per_traj_add(&a, F_OBS, NULL), PER_ERR_NULL);
  CHECK_ERROR(&a, "per_traj_add: value is NULL");
  CHECK_STATUS(per_traj_add_step(&a, NULL, PER_END_NONE), PER_ERR_NULL);
  CHECK_ERROR(&a, "per_traj_add_step: record is NULL");
  CHECK_STATUS(per_traj_build(&a, NULL), PER_ERR_NULL);
  CHECK_ERROR(&a, "per_traj_build: out is NULL");
  CHECK_TRAJ_UNCHANGED(snap, &a);
  CHECK_MEM(&out, &before, sizeof out);

  /* a field that runs ahead: obs at 0 while value has 1 (the first STEP
     field is the reference) */
  per_traj_reset(&a);
  CHECK_OK(per_traj_add(&a, F_VALUE, field_value(0, 0, F_VALUE, v)));
  snap = tsnap_take(&a);
  CHECK_STATUS(per_traj_build(&a, &out), PER_ERR_ARG);
  CHECK_ERROR(
      &a,
      "per_traj_build: step field \"value\" has 1 values but \"obs\" has 0");
  CHECK_STATUS(per_traj_end(&a, PER_END_TERMINATED), PER_ERR_EMPTY);
  CHECK_TRAJ_UNCHANGED(snap, &a);

  /* full: every field at capacity (a ONCE field never is) */
  per_traj_reset(&a);
  for (t = 0; t < 8; ++t) {
    make_step(0, t, &s);
    CHECK_OK(per_traj_add_step(&a, &s, PER_END_NONE));
  }
  snap = tsnap_take(&a);
  CHECK_STATUS(per_traj_add(&a, F_OBS, v), PER_ERR_BATCH);
  CHECK_ERROR(&a, "per_traj_add: field \"obs\" is full: capacity 8, index 8");
  CHECK_STATUS(per_traj_add(&a, F_ACTION, v), PER_ERR_BATCH);
  CHECK_ERROR(&a,
              "per_traj_add: field \"action\" is full: capacity 8, index 8");
  CHECK_STATUS(per_traj_add_step(&a, &s, PER_END_NONE), PER_ERR_BATCH);
  CHECK_ERROR(&a,
              "per_traj_add_step: field \"obs\" is full: capacity 8, index 8");
  CHECK_STATUS(per_traj_add_step(&a, &s, 7),
               PER_ERR_ARG); /* end checked first */
  CHECK_ERROR(
      &a, "per_traj_add_step: end 7 is not PER_END_NONE, PER_END_TERMINATED or "
          "PER_END_TRUNCATED");
  CHECK_TRAJ_UNCHANGED(snap, &a);
  {
    float r = 2.0f;
    CHECK_OK(per_traj_add(&a, F_RET, &r));
    CHECK_ERROR(&a, "");
    CHECK_OK(per_traj_add(&a, F_RET, &r));
  }
  CHECK_OK(per_traj_build(&a, &out));
  CHECK_EQ_U(out.n, 8);
  CHECK_EQ_U(out.id, 0);

  /* a stale (built) accumulator is restored by a failing call too: the
     ends and once record it still shows stay */
  snap = tsnap_take(&a);
  CHECK_STATUS(per_traj_add(&a, F_OBS, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_traj_add_step(&a, &s, 9), PER_ERR_ARG);
  CHECK_STATUS(per_traj_build(&a, &out), PER_ERR_EMPTY);
  CHECK_TRAJ_UNCHANGED(snap, &a);
  CHECK_EQ_U(a.stale, 1);

  /* a field at capacity while another lags: add_step names the uneven
     field, not the full one */
  per_traj_reset(&a);
  for (t = 0; t < 8; ++t)
    CHECK_OK(per_traj_add(&a, F_OBS, field_value(0, t, F_OBS, v)));
  snap = tsnap_take(&a);
  CHECK_STATUS(per_traj_add(&a, F_OBS, v), PER_ERR_BATCH);
  CHECK_STATUS(per_traj_add_step(&a, &s, PER_END_NONE), PER_ERR_ARG);
  CHECK_ERROR(
      &a,
      "per_traj_add_step: step field \"flag\" has 0 values but \"obs\" has 8");
  CHECK_TRAJ_UNCHANGED(snap, &a);
  per_traj_free(&a);
}

/* Reset drops a partial rollout (counts, ends, once record), keeps built,
   and clears the built trajectory's ends and once record at once. */
static void test_reset(void) {
  per_traj_config c = cfg_with(4, FIELDS, NF);
  per_traj a;
  per_traj_out out;
  unsigned char v[16], zero[ONCE_BYTES];
  uint8_t ends[4] = {0, 0, 0, PER_END_TERMINATED};
  float ret = 9.0f;
  uint32_t t, f;
  memset(zero, 0, sizeof zero);
  REQUIRE(per_traj_init(&a, &c, NULL) == PER_OK);
  for (t = 0; t < 3; ++t)
    for (f = F_OBS; f <= F_VALUE; ++f)
      CHECK_OK(per_traj_add(&a, f, field_value(5, t, f, v)));
  CHECK_OK(per_traj_add(&a, F_OBS, field_value(5, 3, F_OBS, v)));
  CHECK_OK(per_traj_end(&a, PER_END_TRUNCATED));
  CHECK_OK(per_traj_add(&a, F_RET, &ret));
  CHECK_STATUS(per_traj_add(&a, NF, v), PER_ERR_INDEX);
  per_traj_reset(&a);
  CHECK_ERROR(&a, "");
  CHECK_EQ_U(per_traj_steps(&a), 0);
  for (f = 0; f < NF; ++f) CHECK_EQ_U(a.count[f], 0);
  for (t = 0; t < 4; ++t) CHECK_EQ_U(a.ends[t], PER_END_NONE);
  CHECK_MEM(a.once, zero, ONCE_BYTES);
  CHECK_EQ_U(a.built, 0);
  CHECK_STATUS(per_traj_build(&a, &out), PER_ERR_EMPTY);
  /* the next rollout is whole on its own */
  for (t = 0; t < 4; ++t)
    for (f = F_VALUE; f >= F_OBS; --f)
      CHECK_OK(per_traj_add(&a, f, field_value(6, t, f, v)));
  CHECK_OK(per_traj_end(&a, PER_END_TERMINATED));
  CHECK_OK(per_traj_build(&a, &out));
  check_out(&out, 6, 4, ends, NULL, NULL, 0);
  /* reset after a build: ends and once cleared now, built stays */
  CHECK_OK(per_traj_add(&a, F_RET, &ret));
  CHECK_OK(per_traj_add(&a, F_OBS, v));
  per_traj_reset(&a);
  CHECK_EQ_U(a.built, 1);
  CHECK_EQ_U(a.ends[3], PER_END_NONE);
  CHECK_MEM(a.once, zero, ONCE_BYTES);
  CHECK_EQ_U(a.stale, 0);
  per_traj_free(&a);
}

/* ---- init --------------------------------------------------------------- */

/* An init (of *a, filled with 0x77 before it) that returned `got` must
   have failed with `want` and message `msg` (NULL: any non-empty one),
   leaving *a zero but for the message. Frees *a. */
static void check_failed_init(per_traj *a, per_status got, per_status want,
                              const char *msg, int line) {
  if (got == want) ++t_pass_count;
  else
    T_FAIL_AT("line %d: got %s, want %s", line, per_status_str(got),
              per_status_str(want));
  if (zero_but_error(a)) ++t_pass_count;
  else T_FAIL_AT("line %d: a failed init left more than a message", line);
  if (msg ? strcmp(a->error, msg) == 0 : a->error[0] != 0) ++t_pass_count;
  else
    T_FAIL_AT("line %d: error \"%s\", want \"%s\"", line, a->error,
              msg ? msg : "(any)");
  per_traj_free(a);
}

/* Init with config c must fail with `want` and message `msg` (NULL: any
   non-empty one), leaving *a zero but for the message. */
static void init_fails(per_traj_config c, per_status want, const char *msg,
                       int line) {
  per_traj a;
  memset(&a, 0x77, sizeof a);
  check_failed_init(&a, per_traj_init(&a, &c, NULL), want, msg, line);
}
#define INIT_FAILS(c, want, msg) init_fails((c), (want), (msg), __LINE__)

static void test_init_errors(void) {
  per_traj_field fs[NF];
  per_traj_config good = cfg_with(8, FIELDS, NF), c;
  per_traj a;
  char name[72];
  t_heap heap;

  CHECK_STATUS(per_traj_init(NULL, &good, NULL), PER_ERR_NULL);
  memset(&a, 0x77, sizeof a);
  CHECK_STATUS(per_traj_init(&a, NULL, NULL), PER_ERR_NULL);
  CHECK(zero_but_error(&a));
  CHECK_ERROR(&a, "per_traj_init: cfg is NULL");

  c = good;
  c.capacity = 0;
  INIT_FAILS(c, PER_ERR_CAPACITY, "per_traj_init: capacity must be 1 .. 2^31");
  c = good;
  c.capacity = (1u << 31) + 1u;
  INIT_FAILS(c, PER_ERR_CAPACITY, NULL);
  c = good;
  c.step_bytes = 0;
  INIT_FAILS(c, PER_ERR_ARG, "per_traj_init: step_bytes is 0");
  c = good;
  c.nfields = 0;
  INIT_FAILS(c, PER_ERR_ARG, "per_traj_init: nfields is 0");
  c = good;
  c.fields = NULL;
  INIT_FAILS(c, PER_ERR_NULL, "per_traj_init: cfg->fields is NULL");

  c = good;
  c.fields = fs;
#define FIELD_FAILS(stmt, want, msg) \
  do {                               \
    memcpy(fs, FIELDS, sizeof fs);   \
    stmt;                            \
    INIT_FAILS(c, want, msg);        \
  } while (0)
  FIELD_FAILS(fs[2].name = NULL, PER_ERR_ARG,
              "per_traj_init: field 2: name is NULL");
  FIELD_FAILS(fs[2].name = "", PER_ERR_ARG,
              "per_traj_init: field 2: name is empty");
  memset(name, 'x', 64);
  name[64] = 0;
  FIELD_FAILS(fs[3].name = name, PER_ERR_ARG,
              "per_traj_init: field 3: name is longer than PER_TRAJ_NAME_MAX "
              "(63) chars");
  {
    char *unterminated = (char *)malloc(64); /* no NUL: read no further */
    REQUIRE(unterminated != NULL);
    memset(unterminated, 'u', 64);
    FIELD_FAILS(fs[3].name = unterminated, PER_ERR_ARG, NULL);
    free(unterminated);
  }
  FIELD_FAILS(fs[4].name = "obs", PER_ERR_ARG,
              "per_traj_init: two fields are named \"obs\"");
  FIELD_FAILS(
      fs[1].timescale = 2, PER_ERR_ARG,
      "per_traj_init: field 1 (\"obs\"): timescale 2 is not PER_TRAJ_STEP "
      "or PER_TRAJ_ONCE");
  FIELD_FAILS(fs[3].bytes = 0, PER_ERR_ARG,
              "per_traj_init: field 3 (\"action\"): bytes is 0");
  FIELD_FAILS(fs[1].offset = 24, PER_ERR_ARG,
              "per_traj_init: field 1 (\"obs\"): offset 24 + bytes 12 is "
              "beyond step_bytes 32");
  FIELD_FAILS(fs[2].offset = 0xffffffffu, PER_ERR_ARG,
              "per_traj_init: field 2 (\"flag\"): offset 4294967295 + bytes 1 "
              "is beyond "
              "step_bytes 32");
  FIELD_FAILS(
      fs[5].offset = 9, PER_ERR_ARG,
      "per_traj_init: field 5 (\"final_obs\"): offset 9 + bytes 12 is beyond "
      "once_bytes 20");
  FIELD_FAILS(fs[3].offset = 10, PER_ERR_ARG,
              "per_traj_init: field \"action\" [10, 14) overlaps field \"obs\" "
              "[0, 12) in the "
              "step record");
  FIELD_FAILS(fs[5].offset = 2, PER_ERR_ARG,
              "per_traj_init: field \"final_obs\" [2, 14) overlaps field "
              "\"ret\" [0, 4) in the "
              "once record");
  FIELD_FAILS(fs[0].timescale = PER_TRAJ_STEP, PER_ERR_ARG,
              "per_traj_init: field \"obs\" [0, 12) overlaps field \"ret\" [0, "
              "4) in the "
              "step record"); /* the later field is named first */
  memcpy(fs, FIELDS, sizeof fs);
  c.nfields = 2; /* ret and obs */
  c.once_bytes = 0;
  INIT_FAILS(c, PER_ERR_ARG,
             "per_traj_init: field 0 (\"ret\"): a PER_TRAJ_ONCE field, but "
             "once_bytes is 0");
  c.once_bytes = ONCE_BYTES;
  fs[1].timescale = PER_TRAJ_ONCE;
  INIT_FAILS(c, PER_ERR_ARG,
             NULL); /* obs [0, 12) overlaps ret in the once record */
  fs[1].offset = 4;
  INIT_FAILS(c, PER_ERR_ARG,
             "per_traj_init: no PER_TRAJ_STEP field: a step would be empty");
#undef FIELD_FAILS

  /* what is allowed: a STEP and a ONCE field at the same offset (different
     records), touching fields, a 63-char name (copied: the caller's
     string may change), once_bytes without ONCE fields, capacity 1 */
  memcpy(fs, FIELDS, sizeof fs);
  c = good;
  c.fields = fs;
  memset(name, 'n', 63);
  name[63] = 0;
  fs[2].name = name;
  fs[2].offset = 12;
  fs[2].bytes = 4; /* flag [12, 16) touches obs and action */
  CHECK_OK(per_traj_init(&a, &c, NULL));
  CHECK_ERROR(&a, "");
  name[0] = 'Z';
  CHECK_EQ_U(strlen(a.fields[2].name), 63);
  CHECK_EQ_U(a.fields[2].name[0], 'n');
  CHECK_EQ_U(a.fields[2].offset, 12);
  per_traj_free(&a);
  c = cfg_with(1, FIELDS + 1, 1); /* obs alone */
  CHECK_OK(per_traj_init(&a, &c, NULL));
  CHECK(a.once != NULL);
  {
    per_traj_out out;
    unsigned char v[16];
    CHECK_OK(per_traj_add(&a, 0, field_value(0, 0, F_OBS, v)));
    CHECK_STATUS(per_traj_add(&a, 0, v), PER_ERR_BATCH);
    CHECK_ERROR(&a, "per_traj_add: field \"obs\" is full: capacity 1, index 1");
    CHECK_EQ_U(per_traj_count(&a, 1), 0); /* a once record, no field */
    CHECK_OK(per_traj_build(&a, &out));
    CHECK_EQ_U(out.n, 1);
    CHECK_EQ_U(out.nparts, 2);
    CHECK_EQ_U(out.parts[1].n, 0);
  }
  per_traj_free(&a);
  c.once_bytes = 0;
  CHECK_OK(per_traj_init(&a, &c, NULL));
  CHECK(a.once == NULL);
  per_traj_free(&a);

  /* the largest capacity with the largest records: the block does not fit
     in a 32-bit size_t (PER_ERR_CAPACITY); on 64 bits it asks for about
     2^63 bytes, which the counting allocator refuses before malloc */
  memset(&heap, 0, sizeof heap);
  heap.fail_at = 1;
  c = good;
  c.capacity = 1u << 31;
  c.step_bytes = 0xffffffffu;
  memset(&a, 0x77, sizeof a);
  CHECK_STATUS(per_traj_init(&a, &c, &heap),
               sizeof(size_t) >= 8 ? PER_ERR_NOMEM : PER_ERR_CAPACITY);
  CHECK(zero_but_error(&a));
  CHECK(a.error[0] != 0);
  CHECK_EQ_U(heap.live, 0);
}

/* ---- memory ------------------------------------------------------------- */

/* One allocation: failing it gives PER_ERR_NOMEM, a zeroed accumulator
   (but the message) and no leak; after init nothing allocates. */
static void test_memory(void) {
  per_traj_config c = cfg_with(16, FIELDS, NF);
  per_traj a;
  per_traj_out out;
  t_heap heap;
  unsigned char v[16];
  long calls;
  uint32_t k, t, f;
  memset(&heap, 0, sizeof heap);
  heap.fail_at = 1;
  memset(&a, 0x77, sizeof a);
  CHECK_STATUS(per_traj_init(&a, &c, &heap), PER_ERR_NOMEM);
  CHECK(zero_but_error(&a));
  CHECK(strncmp(a.error, "per_traj_init: could not allocate ", 34) == 0);
  CHECK_EQ_U(heap.live, 0);
  per_traj_free(&a);
  heap.fail_at = 0;
  heap.calls = 0;
  CHECK_OK(per_traj_init(&a, &c, &heap));
  CHECK_EQ_U(heap.calls, 1);
  CHECK_EQ_U(heap.live, 1);
  CHECK(a.alloc_ctx == &heap);
  /* the step records are 16-byte aligned in the block (malloc's) */
  CHECK_EQ_U((uintptr_t)a.steps % 16u, 0);
  CHECK_EQ_U((uintptr_t)a.once % 16u, 0);
  calls = heap.calls;
  for (k = 0; k < 50; ++k) {
    for (t = 0; t < 1 + k % 16; ++t)
      for (f = F_OBS; f <= F_VALUE; ++f)
        CHECK_OK(per_traj_add(&a, f, field_value(k, t, f, v)));
    CHECK_OK(per_traj_end(&a, PER_END_TRUNCATED));
    if (k % 7 == 3) {
      per_traj_reset(&a);
      continue;
    }
    CHECK_OK(per_traj_build(&a, &out));
  }
  CHECK_EQ_U(heap.calls, calls);
  per_traj_free(&a);
  CHECK_EQ_U(heap.live, 0);
  CHECK_EQ_U(heap.frees, 1);
  per_traj_free(&a); /* twice: zeroed */
  CHECK_EQ_U(heap.frees, 1);
}

/* ---- NULL and uninitialised ---------------------------------------------- */

static void test_null(void) {
  per_traj z;
  per_traj_out out;
  unsigned char v[16] = {0};
  memset(&z, 0, sizeof z);
  per_traj_free(NULL);
  per_traj_reset(NULL);
  CHECK(per_traj_error(NULL) != NULL && per_traj_error(NULL)[0] == 0);
  CHECK_EQ_U(per_traj_steps(NULL), 0);
  CHECK_STATUS(per_traj_add(NULL, 0, v), PER_ERR_NULL);
  CHECK_STATUS(per_traj_add_step(NULL, v, PER_END_NONE), PER_ERR_NULL);
  CHECK_STATUS(per_traj_end(NULL, PER_END_NONE), PER_ERR_NULL);
  CHECK_STATUS(per_traj_build(NULL, &out), PER_ERR_NULL);
  /* a zeroed accumulator: refused, with a message, nothing else written */
  CHECK_EQ_U(per_traj_steps(&z), 0);
  CHECK_STATUS(per_traj_add(&z, 0, v), PER_ERR_NULL);
  CHECK_ERROR(&z, "per_traj_add: the accumulator is not initialised");
  CHECK_STATUS(per_traj_add_step(&z, v, PER_END_NONE), PER_ERR_NULL);
  CHECK_ERROR(&z, "per_traj_add_step: the accumulator is not initialised");
  CHECK_STATUS(per_traj_end(&z, PER_END_NONE), PER_ERR_NULL);
  CHECK_ERROR(&z, "per_traj_end: the accumulator is not initialised");
  CHECK_STATUS(per_traj_build(&z, &out), PER_ERR_NULL);
  CHECK_ERROR(&z, "per_traj_build: the accumulator is not initialised");
  CHECK(zero_but_error(&z));
  per_traj_reset(&z);
  CHECK_ERROR(&z, "");
  CHECK(zero_but_error(&z));
  per_traj_free(&z);
}

/* ---- into a buffer ------------------------------------------------------- */

/* Trajectories handed to per_buffer_add_steps: the buffer's items and
   ends are the trajectory's, each call one buffer trajectory; a buffer
   smaller than a trajectory keeps its last steps. */
static void test_buffer(void) {
  static const uint32_t lens[4] = {8, 5, 1, 8};
  per_traj_config c = cfg_with(8, FIELDS, NF);
  per_config bc = cfg_of(64, sizeof(tstep));
  per_traj a;
  per_traj_out out;
  per_buffer b, small;
  uint32_t k, t, slot = 0;
  uint8_t want_end;
  REQUIRE(per_traj_init(&a, &c, NULL) == PER_OK);
  REQUIRE(per_buffer_init(&b, &bc, NULL) == PER_OK);
  bc = cfg_of(4, sizeof(tstep));
  REQUIRE(per_buffer_init(&small, &bc, NULL) == PER_OK);
  for (k = 0; k < 4; ++k) {
    for (t = 0; t < lens[k]; ++t) {
      tstep s;
      make_step(k, t, &s);
      want_end = t + 1 == lens[k]
                     ? (k % 2 ? PER_END_TERMINATED : PER_END_TRUNCATED)
                     : PER_END_NONE;
      CHECK_OK(per_traj_add_step(&a, &s, want_end));
    }
    CHECK_OK(per_traj_build(&a, &out));
    CHECK_OK(per_buffer_add_steps(&b, out.steps, out.n, out.ends));
    CHECK_OK(per_buffer_add_steps(&small, out.steps, out.n, out.ends));
    CHECK_EQ_U(b.trajs, k + 1);
    CHECK_MEM(b.items + (size_t)slot * sizeof(tstep), out.steps,
              (size_t)out.n * sizeof(tstep));
    CHECK_MEM(b.ends + slot, out.ends, out.n);
    for (t = 0; t < out.n; ++t) CHECK_EQ_U(b.traj[slot + t], k);
    slot += out.n;
    CHECK_EQ_U(per_buffer_size(&b), slot);
  }
  /* the small buffer holds the last 4 steps of the last trajectory, step
     t at slot (14 + t) % 4 (14 steps came before it) */
  for (t = 4; t < 8; ++t) {
    CHECK_MEM(small.items + (size_t)((14 + t) % 4) * sizeof(tstep),
              (const unsigned char *)out.steps + (size_t)t * sizeof(tstep),
              sizeof(tstep));
    CHECK_EQ_U(small.ends[(14 + t) % 4], out.ends[t]);
  }
  CHECK_OK(per_buffer_check(&b));
  CHECK_OK(per_buffer_check(&small));
  per_buffer_free(&small);
  per_buffer_free(&b);
  per_traj_free(&a);
}

/* ---- named timescales (per_traj_init_spec) ------------------------------ */

/* The three timescales of a Reverb-style client as C: "step" buffered (T records), "episode" and
   "final_step" single; "obs" and "reward" named in two timescales. */
typedef struct sstep {
  float obs[4];
  float reward;
} sstep;
typedef struct sepisode {
  float ret, length;
} sepisode;
typedef struct sfinal {
  float obs[4];
  int32_t reward;
} sfinal;

enum { S_STEP, S_EPISODE, S_FINAL, NS };
enum { G_OBS, G_REWARD, G_RET, G_LEN, G_FOBS, G_FREWARD, NG };

static const per_traj_timescale SCALES[NS] = {
    {"step", PER_TRAJ_BUFFERED, 6, sizeof(sstep)},
    {"episode", PER_TRAJ_SINGLE, 1, sizeof(sepisode)},
    {"final_step", PER_TRAJ_SINGLE, 1, sizeof(sfinal)}};
/* the fields of step and final_step interleaved (any order is allowed) */
static const per_traj_field GFIELDS[NG] = {
    {"obs", S_STEP, offsetof(sstep, obs), sizeof(float[4])},
    {"reward", S_STEP, offsetof(sstep, reward), sizeof(float)},
    {"return", S_EPISODE, offsetof(sepisode, ret), sizeof(float)},
    {"length", S_EPISODE, offsetof(sepisode, length), sizeof(float)},
    {"obs", S_FINAL, offsetof(sfinal, obs), sizeof(float[4])},
    {"reward", S_FINAL, offsetof(sfinal, reward), sizeof(int32_t)}};

static per_traj_spec spec_with(const per_traj_timescale *ts, uint32_t nts,
                               const per_traj_field *fs, uint32_t nf) {
  per_traj_spec s;
  s.ntimescales = nts;
  s.timescales = ts;
  s.nfields = nf;
  s.fields = fs;
  return s;
}

static sstep sstep_of(uint32_t k, uint32_t t) {
  sstep s;
  uint32_t i;
  memset(&s, 0, sizeof s);
  for (i = 0; i < 4; ++i) s.obs[i] = (float)(k * 100u + t * 4u + i);
  s.reward = (float)t * 0.5f - (float)k;
  return s;
}

/* Rollouts of several lengths: records by add_record and field by field,
   the single-item records replaced, ends, ids, parts; a single record not
   added since the last build reads 0; the buffered one goes to a buffer
   as one trajectory equal to per_buffer_add_steps of the same records. */
static void test_timescales(void) {
  per_traj_spec sp = spec_with(SCALES, NS, GFIELDS, NG);
  per_config bc = cfg_of(64, sizeof(sstep));
  per_traj a;
  per_traj_out out;
  per_buffer b, want;
  sstep rec[6];
  sepisode ep;
  sfinal fin, zf;
  uint8_t ends[6];
  uint32_t k, t, n;
  memset(&zf, 0, sizeof zf);
  REQUIRE(per_traj_init_spec(&a, &sp, NULL) == PER_OK);
  REQUIRE(per_buffer_init(&b, &bc, NULL) == PER_OK);
  REQUIRE(per_buffer_init(&want, &bc, NULL) == PER_OK);
  CHECK_EQ_U(a.nscales, NS);
  CHECK(a.two_kind == 0 && a.once == NULL);
  CHECK(strcmp(a.scales[S_FINAL].name, "final_step") == 0);
  CHECK(a.scales[S_EPISODE].ends == NULL && a.scales[S_STEP].ends != NULL);
  CHECK_EQ_U(a.scales[S_STEP].nfields, 2);
  CHECK_EQ_U(per_traj_find(&a, "episode"), S_EPISODE);
  CHECK_EQ_U(per_traj_find(&a, "nope"), NS);
  CHECK_EQ_U(per_traj_find(NULL, "step"), 0);
  CHECK_EQ_U(per_traj_find_field(&a, S_FINAL, "reward"), G_FREWARD);
  CHECK_EQ_U(per_traj_find_field(&a, S_STEP, "reward"), G_REWARD);
  CHECK_EQ_U(per_traj_find_field(&a, S_EPISODE, "obs"), NG);
  CHECK_EQ_U(per_traj_find_field(&a, 9, "obs"), NG);
  for (k = 0; k < 5; ++k) {
    n = 1 + (k * 5) % 6; /* 1, 6, 5, 4, 3 */
    for (t = 0; t < n; ++t) {
      rec[t] = sstep_of(k, t);
      ends[t] = PER_END_NONE;
      if (t % 2) {
        CHECK_OK(per_traj_add_record(&a, S_STEP, &rec[t]));
      } else { /* field by field, reward first */
        CHECK_OK(per_traj_add(&a, G_REWARD, &rec[t].reward));
        CHECK_EQ_U(per_traj_count(&a, S_STEP), t);
        CHECK_OK(per_traj_add(&a, G_OBS, rec[t].obs));
      }
      CHECK_EQ_U(per_traj_count(&a, S_STEP), t + 1);
    }
    ends[n - 1] = k % 2 ? PER_END_TERMINATED : PER_END_TRUNCATED;
    CHECK_OK(per_traj_end_at(&a, S_STEP, ends[n - 1]));
    ep.ret = 1.0f + (float)k;
    ep.length = (float)n;
    CHECK_EQ_U(per_traj_count(&a, S_EPISODE), 0);
    CHECK_OK(per_traj_add_record(&a, S_EPISODE, &ep));
    ep.ret += 0.25f; /* a later add replaces it */
    CHECK_OK(per_traj_add_record(&a, S_EPISODE, &ep));
    CHECK_EQ_U(per_traj_count(&a, S_EPISODE), 1);
    memset(&fin, 0, sizeof fin);
    if (k != 2) { /* trajectory 2 has no final_step */
      fin.obs[0] = (float)k;
      fin.reward = -(int32_t)k;
      CHECK_OK(per_traj_add(&a, G_FREWARD, &fin.reward));
      CHECK_EQ_U(per_traj_count(&a, S_FINAL), 0); /* obs still missing */
      CHECK_OK(per_traj_add(&a, G_FOBS, fin.obs));
    }
    CHECK_OK(per_traj_build(&a, &out));
    CHECK_EQ_U(out.id, k);
    CHECK_EQ_U(out.nparts, NS);
    CHECK_EQ_U(out.n, n);
    CHECK(out.steps == out.parts[S_STEP].records && out.once == NULL);
    CHECK_EQ_U(out.parts[S_STEP].n, n);
    CHECK_EQ_U(out.parts[S_STEP].record_bytes, sizeof(sstep));
    CHECK_MEM(out.parts[S_STEP].records, rec, n * sizeof(sstep));
    CHECK_MEM(out.parts[S_STEP].ends, ends, n);
    CHECK_EQ_U(out.parts[S_EPISODE].n, 1);
    CHECK(out.parts[S_EPISODE].ends == NULL);
    CHECK_MEM(out.parts[S_EPISODE].records, &ep, sizeof ep);
    CHECK_EQ_U(out.parts[S_FINAL].n, k != 2);
    CHECK_MEM(out.parts[S_FINAL].records, &fin, sizeof fin);
    CHECK_OK(per_buffer_add_steps(&b, out.parts[S_STEP].records,
                                  out.parts[S_STEP].n, out.parts[S_STEP].ends));
    CHECK_OK(per_buffer_add_steps(&want, rec, n, ends));
    CHECK_EQ_U(per_traj_count(&a, S_STEP), 0);
    /* the built single records stay until the next add clears them */
    if (k == 4) {
      CHECK_OK(per_traj_add(&a, G_FOBS, fin.obs)); /* from the built one */
      CHECK_EQ_U(((const sfinal *)out.parts[S_FINAL].records)->reward, 0);
      CHECK_MEM(out.parts[S_EPISODE].records, &zf, sizeof(sepisode));
      CHECK_EQ_U(out.parts[S_STEP].ends[n - 1], PER_END_NONE);
    }
  }
  CHECK_EQ_U(b.trajs, want.trajs);
  CHECK_MEM(b.items, want.items, (size_t)per_buffer_size(&b) * sizeof(sstep));
  CHECK_MEM(b.ends, want.ends, per_buffer_size(&b));
  CHECK_MEM(b.traj, want.traj, per_buffer_size(&b) * sizeof(uint32_t));
  {
    uint64_t i1[8], i2[8];
    float w1[8], w2[8];
    sstep s1[8], s2[8];
    CHECK_OK(per_buffer_sample(&b, 8, NULL, s1, i1, w1));
    CHECK_OK(per_buffer_sample(&want, 8, NULL, s2, i2, w2));
    CHECK_MEM(i1, i2, sizeof i1);
    CHECK_MEM(w1, w2, sizeof w1);
    CHECK_MEM(s1, s2, sizeof s1);
  }
  per_buffer_free(&want);
  per_buffer_free(&b);
  per_traj_free(&a);
}

/* A refused call of a spec's accumulator changes nothing but its message. */
static void test_timescale_refusals(void) {
  per_traj_spec sp = spec_with(SCALES, NS, GFIELDS, NG);
  per_traj a;
  per_traj_out out;
  sstep s = sstep_of(1, 1);
  uint32_t t;
  unsigned char *copy;
  size_t bytes;
  REQUIRE(per_traj_init_spec(&a, &sp, NULL) == PER_OK);
  for (t = 0; t < 6; ++t) CHECK_OK(per_traj_add_record(&a, S_STEP, &s));
  CHECK_OK(per_traj_add(&a, G_RET, &s.reward));
  bytes = (size_t)((a.scales[S_STEP].ends + 6) - (unsigned char *)a.fields);
  copy = (unsigned char *)malloc(bytes);
  REQUIRE(copy != NULL);
  memcpy(copy, a.fields, bytes);
#define UNCHANGED() CHECK_MEM(a.fields, copy, bytes)
  CHECK_STATUS(per_traj_add_record(&a, S_STEP, &s), PER_ERR_BATCH);
  CHECK_ERROR(&a, "per_traj_add_record: timescale \"step\" is full: "
                  "capacity 6, index 6");
  UNCHANGED();
  CHECK_STATUS(per_traj_add(&a, G_OBS, s.obs), PER_ERR_BATCH);
  CHECK_ERROR(&a, "per_traj_add: field \"obs\" is full: capacity 6, index 6");
  CHECK_STATUS(per_traj_add_record(&a, NS, &s), PER_ERR_INDEX);
  CHECK_ERROR(&a, "per_traj_add_record: timescale 3 out of range: 3 "
                  "timescales");
  CHECK_STATUS(per_traj_add_record(&a, S_STEP, NULL), PER_ERR_NULL);
  CHECK_STATUS(per_traj_end_at(&a, S_EPISODE, PER_END_TERMINATED), PER_ERR_ARG);
  CHECK_ERROR(&a, "per_traj_end_at: timescale \"episode\" is "
                  "PER_TRAJ_SINGLE: "
                  "its record has no episode end");
  CHECK_STATUS(per_traj_end_at(&a, NS, PER_END_TERMINATED), PER_ERR_INDEX);
  UNCHANGED();
  /* a half-written episode record: length missing; the build still goes
     (single records are replaced field by field), the count says 0 */
  per_traj_reset(&a);
  CHECK_OK(per_traj_add(&a, G_OBS, s.obs));
  memcpy(copy, a.fields, bytes);
  CHECK_STATUS(per_traj_add_record(&a, S_STEP, &s), PER_ERR_ARG);
  CHECK_ERROR(&a, "per_traj_add_record: timescale \"step\": field \"reward\" "
                  "has 0 values but \"obs\" has 1");
  CHECK_STATUS(per_traj_build(&a, &out), PER_ERR_ARG);
  CHECK_ERROR(&a, "per_traj_build: timescale \"step\": field \"reward\" has 0 "
                  "values but \"obs\" has 1");
  CHECK_STATUS(per_traj_end_at(&a, S_STEP, PER_END_TERMINATED), PER_ERR_EMPTY);
  CHECK_ERROR(&a, "per_traj_end_at: no complete record in timescale "
                  "\"step\" "
                  "(every field needs a value) to end");
  UNCHANGED();
#undef UNCHANGED
  CHECK_STATUS(per_traj_add_step(&a, &s, 3), PER_ERR_ARG);
  /* an empty rollout builds (every n 0), also right after a build: the
     single records read 0 then */
  per_traj_reset(&a);
  CHECK_OK(per_traj_build(&a, &out));
  CHECK_EQ_U(out.n, 0);
  CHECK_EQ_U(out.parts[S_EPISODE].n, 0);
  CHECK_OK(per_traj_add_record(&a, S_FINAL, &s));
  CHECK_OK(per_traj_build(&a, &out));
  CHECK_EQ_U(out.parts[S_FINAL].n, 1);
  CHECK_OK(per_traj_build(&a, &out));
  CHECK_EQ_U(out.parts[S_FINAL].n, 0);
  {
    static const unsigned char zero[sizeof(sfinal)] = {0};
    CHECK_MEM(out.parts[S_FINAL].records, zero, sizeof zero);
  }
  free(copy);
  per_traj_free(&a);
}

/* init_spec's refusals: a zeroed accumulator with the message. */
static void spec_fails(per_traj_spec sp, per_status want, const char *msg,
                       int line) {
  per_traj a;
  memset(&a, 0x77, sizeof a);
  check_failed_init(&a, per_traj_init_spec(&a, &sp, NULL), want, msg, line);
}
#define SPEC_FAILS(sp, want, msg) spec_fails((sp), (want), (msg), __LINE__)

static void test_spec_errors(void) {
  per_traj_timescale ts[NS];
  per_traj_field fs[NG];
  per_traj_spec sp, c;
  per_traj a;
  t_heap heap;
  per_traj_out out;
  sstep s = sstep_of(0, 0);
  long calls;
  uint32_t k, t;
  memcpy(ts, SCALES, sizeof ts);
  memcpy(fs, GFIELDS, sizeof fs);
  sp = spec_with(ts, NS, fs, NG);
  CHECK_STATUS(per_traj_init_spec(NULL, &sp, NULL), PER_ERR_NULL);
  memset(&a, 0x77, sizeof a);
  CHECK_STATUS(per_traj_init_spec(&a, NULL, NULL), PER_ERR_NULL);
  CHECK_ERROR(&a, "per_traj_init: spec is NULL");
#define TS_FAILS(stmt, want, msg)   \
  do {                              \
    memcpy(ts, SCALES, sizeof ts);  \
    memcpy(fs, GFIELDS, sizeof fs); \
    c = sp;                         \
    stmt;                           \
    SPEC_FAILS(c, want, msg);       \
  } while (0)
  TS_FAILS(c.ntimescales = 0, PER_ERR_CAPACITY,
           "per_traj_init: ntimescales must be 1 .. 2^16");
  TS_FAILS(c.ntimescales = 65537, PER_ERR_CAPACITY,
           "per_traj_init: ntimescales must be 1 .. 2^16");
  TS_FAILS(c.timescales = NULL, PER_ERR_NULL,
           "per_traj_init: spec->timescales is NULL");
  TS_FAILS(c.fields = NULL, PER_ERR_NULL,
           "per_traj_init: spec->fields is NULL");
  TS_FAILS(c.nfields = 0, PER_ERR_ARG, "per_traj_init: nfields is 0");
  TS_FAILS(ts[1].name = "", PER_ERR_ARG,
           "per_traj_init: timescale 1: name is empty");
  TS_FAILS(ts[2].name = "step", PER_ERR_ARG,
           "per_traj_init: two timescales are named \"step\"");
  TS_FAILS(ts[1].kind = 7, PER_ERR_ARG,
           "per_traj_init: timescale 1 (\"episode\"): kind 7 is not "
           "PER_TRAJ_BUFFERED or PER_TRAJ_SINGLE");
  TS_FAILS(ts[0].capacity = 0, PER_ERR_CAPACITY,
           "per_traj_init: timescale 0 (\"step\"): capacity must be 1 .. 2^31");
  TS_FAILS(ts[1].capacity = 2, PER_ERR_CAPACITY,
           "per_traj_init: timescale 1 (\"episode\"): capacity 2: a "
           "PER_TRAJ_SINGLE timescale holds 1 record");
  TS_FAILS(ts[2].record_bytes = 0, PER_ERR_ARG,
           "per_traj_init: timescale 2 (\"final_step\"): record_bytes is 0");
  TS_FAILS(fs[3].timescale = 3, PER_ERR_ARG,
           "per_traj_init: field 3 (\"length\"): timescale 3 out of range: 3 "
           "timescales");
  TS_FAILS(fs[5].offset = 17, PER_ERR_ARG,
           "per_traj_init: field 5 (\"reward\"): offset 17 + bytes 4 is beyond "
           "timescale \"final_step\"'s record_bytes 20");
  TS_FAILS(fs[5].name = "obs", PER_ERR_ARG,
           "per_traj_init: two fields of timescale \"final_step\" are named "
           "\"obs\"");
  TS_FAILS(fs[3].offset = 2, PER_ERR_ARG,
           "per_traj_init: field \"length\" [2, 6) overlaps field \"return\" "
           "[0, 4) in timescale \"episode\"'s record");
  TS_FAILS((fs[2].timescale = S_STEP, fs[2].offset = 32, fs[3].timescale = 0,
            fs[3].offset = 36, ts[0].record_bytes = 40),
           PER_ERR_ARG, "per_traj_init: timescale \"episode\" has no field");
#undef TS_FAILS
  /* one block; nothing allocates after init, over 1,000 rollouts */
  memset(&heap, 0, sizeof heap);
  sp = spec_with(SCALES, NS, GFIELDS, NG);
  heap.fail_at = 1;
  memset(&a, 0x77, sizeof a);
  CHECK_STATUS(per_traj_init_spec(&a, &sp, &heap), PER_ERR_NOMEM);
  CHECK(zero_but_error(&a));
  CHECK_EQ_U(heap.live, 0);
  heap.fail_at = 0;
  heap.calls = 0;
  CHECK_OK(per_traj_init_spec(&a, &sp, &heap));
  CHECK_EQ_U(heap.calls, 1);
  for (t = 0; t < NS; ++t) CHECK_EQ_U((uintptr_t)a.scales[t].records % 16u, 0);
  calls = heap.calls;
  for (k = 0; k < 1000; ++k) {
    for (t = 0; t < 1 + k % 6; ++t)
      CHECK_OK(per_traj_add_record(&a, S_STEP, &s));
    CHECK_OK(per_traj_add_record(&a, S_FINAL, &s));
    CHECK_OK(per_traj_build(&a, &out));
  }
  CHECK_EQ_U(heap.calls, calls);
  per_traj_free(&a);
  CHECK_EQ_U(heap.live, 0);
}

int main(void) {
  test_rollouts();
  test_refusals();
  test_reset();
  test_init_errors();
  test_memory();
  test_null();
  test_buffer();
  test_timescales();
  test_timescale_refusals();
  test_spec_errors();
  return t_done(IS_FLOAT ? "traj (float)" : "traj (double)");
}
