/* per_traj.h - the trajectory accumulator, a companion of per.h: a
   rollout's data at any number of named timescales collected in memory
   allocated once, then handed on in one call.
   (no warranty; LICENSE: see the end of per.h)

   Do this, in *one* C or C++ file:
      #define PER_IMPLEMENTATION
      #include "per.h"
      #define PER_TRAJ_IMPLEMENTATION
      #include "per_traj.h"
   The implementation is compiled in the file that compiles per.h's: it
   uses per.h's messages (per.h's >>rules). Every other file includes
   per_traj.h alone; it includes per.h. PER_STATIC, PER_MALLOC/PER_FREE
   and PER_NO_STDIO are per.h's options and mean here what they mean
   there; nothing here depends on PER_REAL.

   CONTENTS
      Declarations ....... per_traj_config, per_traj_*               >>api
      Implementation: checks, init, adds, build ...................  >>traj
      (grep for the >>markers)

   WHAT IT IS
      RL rollout workers make data at several rates: one record per
      environment step, one per N steps, one per episode (its return, the
      observation to bootstrap from). An accumulator holds one block of
      records per *timescale*, each named:
      - a BUFFERED timescale holds `capacity` records; each add writes the
        next one (a rollout of T steps: capacity T), and each record has
        an episode end (PER_END_*), so the timescale's records go to
        per_buffer_add_steps as one trajectory straight from the block;
      - a SINGLE timescale holds one record; an add replaces it.
      Fields are named byte ranges of a timescale's record (obs, action,
      reward); names are unique within a timescale and free across them
      (obs per step and obs at the episode's end). The fields of a record
      may arrive one at a time in any order (each field has its own
      counter; a record is complete once every field of its timescale has
      a value for it) or together (per_traj_add_record). per_traj_build
      hands out every timescale (pointers into the accumulator) and starts
      the next rollout. Everything is allocated at init, in one block;
      adds, builds and resets never allocate. One accumulator per
      environment (worker); not safe for concurrent use.

      A per_traj_spec names the timescales (per_traj_init_spec). per.h
      0.4's two-kind per_traj_config (per_traj_init) is the case of a
      "step" timescale of `capacity` records and a "once" record: its
      fields name PER_TRAJ_STEP or PER_TRAJ_ONCE as their timescale.

   ERRORS
      Every function that can fail returns a per_status and, on error,
      leaves the accumulator byte for byte as it was, except a->error,
      which then says what was refused and why (the timescale's and the
      field's names, the counts, the capacity); a successful call sets it
      to "". The messages are made without <stdio.h> (also with
      PER_NO_STDIO).

   QUICK START (three timescales; in Python, per.TrajectoryAccumulator)
      typedef struct step { float obs[4]; float reward; } step;
      typedef struct episode { float ret; float length; } episode;
      typedef struct last { float obs[4]; int32_t reward; } last;
      per_traj_timescale ts[] = {                // name, kind, capacity, bytes
        {"step", PER_TRAJ_BUFFERED, 64, sizeof(step)},
        {"episode", PER_TRAJ_SINGLE, 1, sizeof(episode)},
        {"final_step", PER_TRAJ_SINGLE, 1, sizeof(last)}};
      per_traj_field fields[] = {                // name, timescale, at, bytes
        {"obs", 0, offsetof(step, obs), sizeof(float[4])},
        {"reward", 0, offsetof(step, reward), sizeof(float)},
        {"return", 1, offsetof(episode, ret), sizeof(float)},
        {"length", 1, offsetof(episode, length), sizeof(float)},
        {"obs", 2, offsetof(last, obs), sizeof(float[4])},
        {"reward", 2, offsetof(last, reward), sizeof(int32_t)}};
      per_traj_spec spec = {3, ts, 6, fields};
      per_traj acc;
      per_traj_out out;
      per_buffer buf;                            // items: step records
      per_config cfg = per_config_default(100000, sizeof(step));
      step s = {{0}, 0};
      episode e = {0, 0};
      last l = {{0}, 0};
      uint32_t t;
      if (per_buffer_init(&buf, &cfg, NULL) != PER_OK) return 1;
      if (per_traj_init_spec(&acc, &spec, NULL) != PER_OK) return 1;
      for (t = 0; t < 64; ++t) per_traj_add_record(&acc, 0, &s);
      per_traj_end_at(&acc, 0, PER_END_TRUNCATED);   // the last step's end
      per_traj_add_record(&acc, 1, &e);          // replaces the record
      per_traj_add_record(&acc, 2, &l);
      if (per_traj_build(&acc, &out) == PER_OK)  // out points into acc
        per_buffer_add_steps(&buf, out.parts[0].records, out.parts[0].n,
                             out.parts[0].ends);  // one trajectory
      per_traj_free(&acc);
      per_buffer_free(&buf);

   HISTORY
      0.5.0  its own file (per.h 0.4.0 held it as its section 9), with
             any number of named timescales (per_traj_spec,
             per_traj_init_spec, per_traj_timescale, per_traj_add_record,
             per_traj_end_at, per_traj_count, per_traj_find,
             per_traj_find_field, per_traj_out.parts); a build right
             after a build clears the SINGLE records as an add does.
             Migration from 0.4: include per_traj.h (and define
             PER_TRAJ_IMPLEMENTATION where PER_IMPLEMENTATION is); the
             member per_traj_field.kind is now .timescale (positional
             initializers are unchanged: PER_TRAJ_STEP and PER_TRAJ_ONCE
             are the two-kind config's timescales 0 and 1); field names
             need only be unique within their timescale; names may be 63
             chars (PER_TRAJ_NAME_MAX). Every other name and behaviour of
             the two-kind config is as in 0.4.
*/
#ifndef PER_TRAJ_H_INCLUDED
#define PER_TRAJ_H_INCLUDED

#include "per.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
   Declarations                                                       >>api
   ====================================================================== */

/* per_traj_timescale.kind */
enum {
  PER_TRAJ_BUFFERED = 0, /* capacity records; an add writes the next */
  PER_TRAJ_SINGLE = 1    /* one record; an add replaces it */
};

/* per_traj_field.timescale in a two-kind per_traj_config */
enum {
  PER_TRAJ_STEP = 0, /* one value per step, in the step record */
  PER_TRAJ_ONCE = 1  /* one value per trajectory, in the once record */
};

/* Longest timescale or field name, in chars (the NUL not counted). */
#define PER_TRAJ_NAME_MAX 63

/* per_traj_timescale: one named block of records. */
typedef struct per_traj_timescale {
  const char *name;      /* 1 .. PER_TRAJ_NAME_MAX chars, unique among the
                            timescales; copied at init */
  uint32_t kind;         /* PER_TRAJ_BUFFERED or PER_TRAJ_SINGLE */
  uint32_t capacity;     /* BUFFERED: records, 1 .. 2^31; SINGLE: 1 */
  uint32_t record_bytes; /* bytes of one record, >= 1 */
} per_traj_timescale;

/* per_traj_field: one named byte range of its timescale's record. Fields
   of one timescale must not overlap; bytes of a record no field covers
   stay 0 (struct padding). */
typedef struct per_traj_field {
  const char *name;   /* 1 .. PER_TRAJ_NAME_MAX chars, unique within its
                         timescale; copied at init */
  uint32_t timescale; /* its timescale: an index into spec.timescales; in a
                         two-kind config PER_TRAJ_STEP or PER_TRAJ_ONCE */
  uint32_t offset;    /* bytes into its timescale's record */
  uint32_t bytes;     /* >= 1; offset + bytes <= the record's size */
} per_traj_field;

/* per_traj_config: per.h 0.4's two-kind config: timescale 0 is "step",
   BUFFERED, `capacity` records of step_bytes, with at least one field;
   when once_bytes > 0, timescale 1 is "once", SINGLE, a record of
   once_bytes (it may have no field). No defaults, every field is read as
   written. A struct laid out like a record is the natural way to get its
   size and the fields' offsets (sizeof, offsetof). */
typedef struct per_traj_config {
  uint32_t capacity;            /* T: most steps per trajectory, 1 .. 2^31 */
  uint32_t step_bytes;          /* bytes of one step record, >= 1 */
  uint32_t once_bytes;          /* bytes of the once record; 0: none */
  uint32_t nfields;             /* >= 1, at least one of them STEP */
  const per_traj_field *fields; /* nfields fields; copied at init */
} per_traj_config;

/* per_traj_spec: any number of named timescales (per_traj_init_spec).
   No defaults, every field is read as written. */
typedef struct per_traj_spec {
  uint32_t ntimescales;                 /* 1 .. 2^16 */
  const per_traj_timescale *timescales; /* copied at init */
  uint32_t nfields;                     /* >= 1; every timescale has one */
  const per_traj_field *fields;         /* copied at init */
} per_traj_spec;

/* One timescale of an accumulator (readable; change it only through the
   functions). */
typedef struct per_traj_scale {
  const char *name;       /* in the accumulator's block */
  uint32_t kind;          /* PER_TRAJ_BUFFERED or PER_TRAJ_SINGLE */
  uint32_t capacity;      /* records (1 for SINGLE) */
  uint32_t record_bytes;  /* bytes of a record */
  uint32_t nfields;       /* its fields */
  uint32_t dense;         /* 1: its fields cover the whole record (no
                             padding), so a record is copied whole */
  unsigned char *records; /* capacity * record_bytes: record i at records +
                             i * record_bytes, zeroed at init; a multiple
                             of 16 bytes into the one PER_MALLOC block, so
                             a record struct may be read in place where
                             malloc's memory allows */
  uint8_t *ends;          /* BUFFERED: capacity PER_END_* (each record's
                             episode end); SINGLE: NULL */
  uint32_t *fields;       /* its nfields fields' indices, in order */
} per_traj_scale;

/* One timescale of a built trajectory. */
typedef struct per_traj_part {
  const void *records;   /* the records, in order (the timescale's block) */
  const uint8_t *ends;   /* BUFFERED: n episode ends; SINGLE: NULL */
  uint32_t n;            /* BUFFERED: complete records; SINGLE: 1 when it
                            was added since the last build, else 0 (then
                            its record reads 0) */
  uint32_t record_bytes; /* bytes of a record */
} per_traj_part;

/* per_traj: a plain struct; declare one and per_traj_init it. Fields are
   readable; change them only through the functions. Between a build and
   the next add, build or reset, the ends and the SINGLE records still
   hold the built trajectory's values (the per_traj_out points at them);
   the next add, build or reset clears them. */
typedef struct per_traj {
  per_traj_config cfg;    /* validated; cfg.fields == fields; a spec's
                             accumulator has capacity, step_bytes and
                             once_bytes 0 */
  per_traj_field *fields; /* the copied fields; names in owned memory */
  per_traj_scale *scales; /* nscales timescales (a two-kind config's:
                             "step" and, with once_bytes, "once") */
  uint32_t nscales;
  uint32_t two_kind;    /* 1 when made from a per_traj_config */
  unsigned char *steps; /* scales[0].records */
  unsigned char *once;  /* a two-kind config's once record (NULL when
                           once_bytes is 0); else NULL */
  uint8_t *ends;        /* scales[0].ends (NULL when SINGLE) */
  uint32_t *count;      /* per field, since the last build or reset:
                           BUFFERED, the values added; SINGLE, 1 once it
                           has a value, else 0 */
  per_traj_part *parts; /* nscales: what the last build handed out */
  uint64_t built;       /* trajectories built so far: the next one's id */
  uint32_t stale;       /* 1 after a build until the next add, build or
                           reset: ends and SINGLE records hold the built
                           ones */
  uint32_t pad;         /* always 0 */
  void *alloc_ctx;      /* passed to PER_MALLOC / PER_FREE */
  char error[256];      /* what the last refused call refused; "" after
                           a successful call; always NUL-terminated */
} per_traj;

/* per_traj_out: a built trajectory. It points into the accumulator and
   stays valid until the next add, build, reset or free: copy it, or hand
   it to per_buffer_add_steps(b, out.steps, out.n, out.ends) right away. */
typedef struct per_traj_out {
  const void *steps;   /* timescale 0's records: n * its record_bytes */
  const uint8_t *ends; /* timescale 0's n episode ends (NULL when SINGLE) */
  const void *once;    /* a two-kind config's once record (NULL when
                          once_bytes == 0; a ONCE field not added since the
                          last build is 0); else NULL */
  uint32_t n;          /* timescale 0's parts[0].n */
  uint64_t id;         /* the trajectory's number in this accumulator:
                          0, 1, 2, ... (not the buffer's trajectory id) */
  const per_traj_part *parts; /* every timescale, nparts of them */
  uint32_t nparts;
} per_traj_out;

/* The two-kind config: validate cfg, copy it and its fields (names
   included), and allocate the records, ends and counters in one block
   (zeroed). alloc_ctx goes to PER_MALLOC/PER_FREE. Init is O(nfields^2)
   (the name and overlap checks). Errors: PER_ERR_NULL (a, cfg or
   cfg->fields), PER_ERR_CAPACITY (capacity 0 or > 2^31, or the block's
   size overflows size_t), PER_ERR_ARG (step_bytes 0; nfields 0; a field
   whose name is NULL, empty, longer than PER_TRAJ_NAME_MAX or another
   field's of the same timescale; a timescale that is not PER_TRAJ_STEP
   or PER_TRAJ_ONCE; bytes 0; offset + bytes beyond its record, including
   a ONCE field with once_bytes 0; two fields of the same record
   overlapping; no STEP field), PER_ERR_NOMEM. On error *a is zeroed but
   for a->error, which says which field and why (for a NULL a, nothing is
   written), and nothing is leaked; per_traj_free accepts it. */
PERDEF per_status per_traj_init(per_traj *a, const per_traj_config *cfg,
                                void *alloc_ctx);
/* Named timescales: as per_traj_init, from spec. Init is O(nfields^2 +
   ntimescales^2). Errors: PER_ERR_NULL (a, spec, spec->timescales,
   spec->fields), PER_ERR_CAPACITY (ntimescales 0 or > 2^16; a BUFFERED
   capacity 0 or > 2^31, a SINGLE one other than 1; the block's size
   overflows size_t), PER_ERR_ARG (a timescale or field whose name is
   NULL, empty, longer than PER_TRAJ_NAME_MAX or another's in the same
   place (timescales; fields of one timescale); a kind that is not
   PER_TRAJ_BUFFERED or PER_TRAJ_SINGLE; record_bytes 0; nfields 0; a
   field's timescale out of range; bytes 0; offset + bytes beyond its
   record; two fields of one timescale overlapping; a timescale without a
   field), PER_ERR_NOMEM; *a as per_traj_init's. */
PERDEF per_status per_traj_init_spec(per_traj *a, const per_traj_spec *spec,
                                     void *alloc_ctx);
/* Release and zero. Safe on a zeroed accumulator and on NULL. */
PERDEF void per_traj_free(per_traj *a);
/* Field `field`'s next value, `bytes` bytes from value. A BUFFERED
   timescale's field goes to its offset in record count[field], and
   count[field] grows by one; a SINGLE one's replaces its value in the
   record (count[field] becomes 1). value may point into the last
   per_traj_out (the first add after a build may take the bootstrap
   observation from a SINGLE record): it is read before that
   trajectory's ends and SINGLE records are cleared. O(bytes). Errors
   (nothing changes but a->error): PER_ERR_NULL (a not initialised,
   value), PER_ERR_INDEX (field >= nfields), PER_ERR_BATCH (a BUFFERED
   field already has capacity values; a->error: per_traj_add: field
   "obs" is full: capacity 64, index 64). */
PERDEF per_status per_traj_add(per_traj *a, uint32_t field, const void *value);
/* A whole record of timescale t: every field of t read from `record` at
   the field's offset (record is record_bytes bytes laid out like the
   timescale's record; its padding is not copied). BUFFERED: the next
   record, its episode end PER_END_NONE (per_traj_end_at sets it);
   SINGLE: replaces the record. record may point into the last
   per_traj_out. O(record_bytes + nfields). Errors (nothing changes but
   a->error): PER_ERR_NULL (a not initialised, record), PER_ERR_INDEX (t
   >= nscales), PER_ERR_ARG (the fields of a BUFFERED t have different
   counts: a->error names a field whose count differs from the first
   one's, and both counts), PER_ERR_BATCH (a BUFFERED t holds capacity
   records: a->error: per_traj_add_record: timescale "step" is full:
   capacity 64, index 64). */
PERDEF per_status per_traj_add_record(per_traj *a, uint32_t t,
                                      const void *record);
/* A whole step: per_traj_add_record on timescale 0, which must be
   BUFFERED, and its episode end (PER_END_NONE, PER_END_TERMINATED or
   PER_END_TRUNCATED). Errors (nothing changes but a->error):
   PER_ERR_NULL (a not initialised, record), PER_ERR_ARG (end not a
   PER_END_*, timescale 0 SINGLE, or its fields' counts differ: a->error
   names a field whose count differs from the first's, and both counts),
   PER_ERR_BATCH (capacity steps already: a->error as per_traj_add's,
   naming timescale 0's first field). */
PERDEF per_status per_traj_add_step(per_traj *a, const void *record,
                                    uint8_t end);
/* Set the episode end of the last complete record of BUFFERED timescale
   t (record per_traj_count(a, t) - 1) to `end`, PER_END_NONE,
   PER_END_TERMINATED or PER_END_TRUNCATED; a later call replaces it.
   Records start as PER_END_NONE. Errors (nothing changes but a->error):
   PER_ERR_NULL (a not initialised), PER_ERR_INDEX (t >= nscales),
   PER_ERR_ARG (another value of end; t SINGLE), PER_ERR_EMPTY (no
   complete record). */
PERDEF per_status per_traj_end_at(per_traj *a, uint32_t t, uint8_t end);
/* per_traj_end_at(a, 0, end). */
PERDEF per_status per_traj_end(per_traj *a, uint8_t end);
/* Complete records of timescale t so far: the smallest count over its
   fields (SINGLE: 1 when every field has a value since the last build,
   else 0); 0 for NULL, an accumulator not initialised, t >= nscales or a
   timescale without fields (a two-kind once record).
   O(nfields). */
PERDEF uint32_t per_traj_count(const per_traj *a, uint32_t t);
/* per_traj_count(a, 0): complete steps. */
PERDEF uint32_t per_traj_steps(const per_traj *a);
/* The timescale named `name` (its index), or nscales when there is none
   (also for NULL arguments). O(nscales). */
PERDEF uint32_t per_traj_find(const per_traj *a, const char *name);
/* The field named `name` in timescale t (its index into fields), or
   cfg.nfields when there is none (also for NULL arguments and t out of
   range). O(nfields). */
PERDEF uint32_t per_traj_find_field(const per_traj *a, uint32_t t,
                                    const char *name);
/* The trajectory so far into *out (pointers into the accumulator, valid
   until the next add, build, reset or free), with out->id = a->built; then
   built grows by one and every count becomes 0. The ends and SINGLE
   records are cleared by the next add, build or reset, so out->parts
   stay as built until then; a SINGLE field not added since the last
   build reads 0. Needs, in each BUFFERED timescale, every field at the
   same count, so that no record is half written. Errors (nothing changes
   but a->error; *out is not written): PER_ERR_NULL (a not initialised,
   out), PER_ERR_ARG (a BUFFERED timescale's fields' counts differ:
   a->error names a field whose count differs from its timescale's first
   field's, and both counts), PER_ERR_EMPTY (a per_traj_config's
   accumulator only: no step; a spec's builds empty timescales as n 0). */
PERDEF per_status per_traj_build(per_traj *a, per_traj_out *out);
/* Drop the partial rollout: every count 0, every end PER_END_NONE, the
   SINGLE records zeroed; built stays. Any per_traj_out is invalid after
   it. Safe on NULL and on a zeroed accumulator. */
PERDEF void per_traj_reset(per_traj *a);
/* a->error: "" after a successful call, else what the last call refused.
   Never NULL: "" for NULL a. */
PERDEF const char *per_traj_error(const per_traj *a);

#ifdef __cplusplus
}
#endif

#endif /* PER_TRAJ_H_INCLUDED */

/* ======================================================================
   IMPLEMENTATION
   ====================================================================== */
#if defined(PER_TRAJ_IMPLEMENTATION) && \
    !defined(PER_TRAJ_IMPLEMENTATION_INCLUDED)
#define PER_TRAJ_IMPLEMENTATION_INCLUDED

#ifndef PER_IMPLEMENTATION_INCLUDED
#error \
    "per_traj.h: define PER_TRAJ_IMPLEMENTATION in the file that defines PER_IMPLEMENTATION, after including per.h there"
#endif

/* per.h's casts are C casts; so are these (see per.h). */
#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuseless-cast"
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* >>traj */

/* The most timescales of a named config. */
#define PERI_TRAJ_MAX_SCALES 65536u

/* `field "name"` */
static void peri_traj_msg_field(peri_msg *m, const char *name) {
  peri_msg_s(m, "field \"");
  peri_msg_s(m, name);
  peri_msg_s(m, "\"");
}

/* `timescale "name"` */
static void peri_traj_msg_scale(peri_msg *m, const char *name) {
  peri_msg_s(m, "timescale \"");
  peri_msg_s(m, name);
  peri_msg_s(m, "\"");
}

/* Start a->error with "fn: " (and the rest of the message after it). */
static peri_msg peri_traj_msg(per_traj *a, const char *fn) {
  peri_msg m = peri_msg_into(a->error, sizeof a->error);
  peri_msg_s(&m, fn);
  peri_msg_s(&m, ": ");
  return m;
}

/* a->error = "fn: what"; returns s. */
static per_status peri_traj_fail(per_traj *a, per_status s, const char *fn,
                                 const char *what) {
  peri_msg m = peri_traj_msg(a, fn);
  peri_msg_s(&m, what);
  return s;
}

/* PER_ERR_NULL with "fn: the accumulator is not initialised". */
static per_status peri_traj_unready(per_traj *a, const char *fn) {
  return peri_traj_fail(a, PER_ERR_NULL, fn,
                        "the accumulator is not initialised");
}

/* The first field of timescale t (init guarantees one). */
static uint32_t peri_traj_first_of(const per_traj *a, uint32_t t) {
  return a->scales[t].fields[0];
}

/* PER_OK when every field of BUFFERED timescale t has the same count
   (*n), else PER_ERR_ARG and a->error names a field whose count differs
   from the first's. */
static per_status peri_traj_even(per_traj *a, const char *fn, uint32_t t,
                                 uint32_t *n) {
  const per_traj_scale *sc = &a->scales[t];
  uint32_t f0 = sc->fields[0], k, f;
  for (k = 1; k < sc->nfields; ++k) {
    f = sc->fields[k];
    if (a->count[f] != a->count[f0]) {
      peri_msg m = peri_traj_msg(a, fn);
      if (a->two_kind) {
        peri_msg_s(&m, "step ");
      } else {
        peri_traj_msg_scale(&m, a->scales[t].name);
        peri_msg_s(&m, ": ");
      }
      peri_traj_msg_field(&m, a->fields[f].name);
      peri_msg_s(&m, " has ");
      peri_msg_u(&m, a->count[f]);
      peri_msg_s(&m, " values but \"");
      peri_msg_s(&m, a->fields[f0].name);
      peri_msg_s(&m, "\" has ");
      peri_msg_u(&m, a->count[f0]);
      return PER_ERR_ARG;
    }
  }
  *n = a->count[f0];
  return PER_OK;
}

/* PER_ERR_ARG with "fn: end E is not PER_END_NONE, ...". */
static per_status peri_traj_bad_end(per_traj *a, const char *fn, uint8_t end) {
  peri_msg m = peri_traj_msg(a, fn);
  peri_msg_s(&m, "end ");
  peri_msg_u(&m, end);
  peri_msg_s(&m,
             " is not PER_END_NONE, PER_END_TERMINATED or PER_END_TRUNCATED");
  return PER_ERR_ARG;
}

/* PER_ERR_BATCH with "fn: field "name" is full: capacity C, index C". */
static per_status peri_traj_full(per_traj *a, const char *fn, uint32_t f) {
  peri_msg m = peri_traj_msg(a, fn);
  peri_traj_msg_field(&m, a->fields[f].name);
  peri_msg_s(&m, " is full: capacity ");
  peri_msg_u(&m, a->scales[a->fields[f].timescale].capacity);
  peri_msg_s(&m, ", index ");
  peri_msg_u(&m, a->count[f]);
  return PER_ERR_BATCH;
}

/* PER_ERR_INDEX with "fn: timescale t out of range: n timescales". */
static per_status peri_traj_no_scale(per_traj *a, const char *fn, uint32_t t) {
  peri_msg m = peri_traj_msg(a, fn);
  peri_msg_s(&m, "timescale ");
  peri_msg_u(&m, t);
  peri_msg_s(&m, " out of range: ");
  peri_msg_u(&m, a->nscales);
  peri_msg_s(&m, " timescales");
  return PER_ERR_INDEX;
}

/* After a build, the first add clears what the built trajectory left:
   every BUFFERED timescale's ends, and every SINGLE record but for
   [keep, keep + keep_bytes) of timescale `keep_t` (the value just written
   there, which may have come from the old record; keep_t nscales: keep
   nothing). */
static void peri_traj_clear(per_traj *a, uint32_t keep_t, uint32_t keep,
                            uint32_t keep_bytes) {
  uint32_t t;
  if (!a->stale) return;
  for (t = 0; t < a->nscales; ++t) {
    per_traj_scale *s = &a->scales[t];
    if (s->kind == PER_TRAJ_BUFFERED) {
      memset(s->ends, 0, s->capacity);
    } else if (t != keep_t) {
      memset(s->records, 0, s->record_bytes);
    } else {
      memset(s->records, 0, keep);
      memset(s->records + keep + keep_bytes, 0,
             s->record_bytes - keep - keep_bytes);
    }
  }
  a->stale = 0;
}

/* Start init's message about field i: "per_traj_init: field i: " or,
   once its name is known to be valid, "per_traj_init: field i ("name"): ". */
static peri_msg peri_traj_field_msg(per_traj *a, const char *what, uint32_t i,
                                    const char *name) {
  peri_msg m = peri_traj_msg(a, "per_traj_init");
  peri_msg_s(&m, what);
  peri_msg_s(&m, " ");
  peri_msg_u(&m, i);
  if (name) {
    peri_msg_s(&m, " (\"");
    peri_msg_s(&m, name);
    peri_msg_s(&m, "\")");
  }
  peri_msg_s(&m, ": ");
  return m;
}

/* PER_ERR_ARG with init's message "... <what> i ...: why". */
static per_status peri_traj_bad(per_traj *a, const char *what, uint32_t i,
                                const char *name, const char *why) {
  peri_msg m = peri_traj_field_msg(a, what, i, name);
  peri_msg_s(&m, why);
  return PER_ERR_ARG;
}

/* The checks of a name: PER_OK, or PER_ERR_ARG with the message. */
static per_status peri_traj_check_name(per_traj *a, const char *what,
                                       uint32_t i, const char *name) {
  uint32_t len = 0;
  if (!name) return peri_traj_bad(a, what, i, NULL, "name is NULL");
  while (len <= PER_TRAJ_NAME_MAX && name[len]) ++len;
  if (len == 0) return peri_traj_bad(a, what, i, NULL, "name is empty");
  if (len > PER_TRAJ_NAME_MAX)
    return peri_traj_bad(a, what, i, NULL,
                         "name is longer than PER_TRAJ_NAME_MAX (63) chars");
  return PER_OK;
}

/* Timescale i of a named config alone. */
static per_status peri_traj_check_scale(per_traj *a,
                                        const per_traj_timescale *ts,
                                        uint32_t i) {
  const per_traj_timescale *s = &ts[i];
  per_status st = peri_traj_check_name(a, "timescale", i, s->name);
  uint32_t j;
  peri_msg m;
  if (st != PER_OK) return st;
  if (s->kind != PER_TRAJ_BUFFERED && s->kind != PER_TRAJ_SINGLE) {
    m = peri_traj_field_msg(a, "timescale", i, s->name);
    peri_msg_s(&m, "kind ");
    peri_msg_u(&m, s->kind);
    peri_msg_s(&m, " is not PER_TRAJ_BUFFERED or PER_TRAJ_SINGLE");
    return PER_ERR_ARG;
  }
  if (s->kind == PER_TRAJ_BUFFERED &&
      (s->capacity == 0 || s->capacity > (1u << 31))) {
    m = peri_traj_field_msg(a, "timescale", i, s->name);
    peri_msg_s(&m, "capacity must be 1 .. 2^31");
    return PER_ERR_CAPACITY;
  }
  if (s->kind == PER_TRAJ_SINGLE && s->capacity != 1) {
    m = peri_traj_field_msg(a, "timescale", i, s->name);
    peri_msg_s(&m, "capacity ");
    peri_msg_u(&m, s->capacity);
    peri_msg_s(&m, ": a PER_TRAJ_SINGLE timescale holds 1 record");
    return PER_ERR_CAPACITY;
  }
  if (s->record_bytes == 0)
    return peri_traj_bad(a, "timescale", i, s->name, "record_bytes is 0");
  for (j = 0; j < i; ++j)
    if (strcmp(ts[j].name, s->name) == 0) {
      m = peri_traj_msg(a, "per_traj_init");
      peri_msg_s(&m, "two timescales are named \"");
      peri_msg_s(&m, s->name);
      peri_msg_s(&m, "\"");
      return PER_ERR_ARG;
    }
  return PER_OK;
}

/* What init reads: a spec, or a two-kind config as one (ntimescales 0:
   the timescales are made from capacity, step_bytes and once_bytes). */
typedef struct peri_traj_in {
  uint32_t capacity, step_bytes, once_bytes, nfields;
  const per_traj_field *fields;
  uint32_t ntimescales;
  const per_traj_timescale *timescales;
} peri_traj_in;

/* The timescales of cfg as init sees them: a spec's own, or the two-kind
   config's "step" and "once". */
static const per_traj_timescale *peri_traj_scales_of(const peri_traj_in *cfg,
                                                     per_traj_timescale two[2],
                                                     uint32_t *n) {
  if (cfg->ntimescales) {
    *n = cfg->ntimescales;
    return cfg->timescales;
  }
  two[0].name = "step";
  two[0].kind = PER_TRAJ_BUFFERED;
  two[0].capacity = cfg->capacity;
  two[0].record_bytes = cfg->step_bytes;
  two[1].name = "once";
  two[1].kind = PER_TRAJ_SINGLE;
  two[1].capacity = 1;
  two[1].record_bytes = cfg->once_bytes;
  *n = cfg->once_bytes ? 2u : 1u;
  return two;
}

/* Field i of cfg alone: its name, timescale, size and place in its
   record. */
static per_status peri_traj_check_field(per_traj *a, const peri_traj_in *cfg,
                                        const per_traj_timescale *ts,
                                        uint32_t nts, uint32_t i) {
  const per_traj_field *f = &cfg->fields[i];
  const per_traj_timescale *s;
  per_status st = peri_traj_check_name(a, "field", i, f->name);
  peri_msg m;
  if (st != PER_OK) return st;
  if (!cfg->ntimescales) {
    if (f->timescale != PER_TRAJ_STEP && f->timescale != PER_TRAJ_ONCE) {
      m = peri_traj_field_msg(a, "field", i, f->name);
      peri_msg_s(&m, "timescale ");
      peri_msg_u(&m, f->timescale);
      peri_msg_s(&m, " is not PER_TRAJ_STEP or PER_TRAJ_ONCE");
      return PER_ERR_ARG;
    }
  } else if (f->timescale >= nts) {
    m = peri_traj_field_msg(a, "field", i, f->name);
    peri_msg_s(&m, "timescale ");
    peri_msg_u(&m, f->timescale);
    peri_msg_s(&m, " out of range: ");
    peri_msg_u(&m, nts);
    peri_msg_s(&m, " timescales");
    return PER_ERR_ARG;
  }
  if (f->bytes == 0) return peri_traj_bad(a, "field", i, f->name, "bytes is 0");
  if (!cfg->ntimescales && f->timescale == PER_TRAJ_ONCE && nts < 2)
    return peri_traj_bad(a, "field", i, f->name,
                         "a PER_TRAJ_ONCE field, but once_bytes is 0");
  s = &ts[f->timescale];
  if ((uint64_t)f->offset + f->bytes > s->record_bytes) {
    m = peri_traj_field_msg(a, "field", i, f->name);
    peri_msg_s(&m, "offset ");
    peri_msg_u(&m, f->offset);
    peri_msg_s(&m, " + bytes ");
    peri_msg_u(&m, f->bytes);
    if (!cfg->ntimescales) {
      peri_msg_s(&m, f->timescale == PER_TRAJ_STEP ? " is beyond step_bytes "
                                                   : " is beyond once_bytes ");
    } else {
      peri_msg_s(&m, " is beyond ");
      peri_traj_msg_scale(&m, s->name);
      peri_msg_s(&m, "'s record_bytes ");
    }
    peri_msg_u(&m, s->record_bytes);
    return PER_ERR_ARG;
  }
  return PER_OK;
}

/* Fields x before y (each valid alone) of one timescale: distinct names,
   no overlap. */
static per_status peri_traj_check_pair(per_traj *a, const peri_traj_in *cfg,
                                       const per_traj_timescale *ts,
                                       const per_traj_field *x,
                                       const per_traj_field *y) {
  peri_msg m;
  if (x->timescale != y->timescale) return PER_OK;
  if (strcmp(x->name, y->name) == 0) {
    m = peri_traj_msg(a, "per_traj_init");
    if (cfg->ntimescales) {
      peri_msg_s(&m, "two fields of ");
      peri_traj_msg_scale(&m, ts[x->timescale].name);
      peri_msg_s(&m, " are named \"");
    } else {
      peri_msg_s(&m, "two fields are named \"");
    }
    peri_msg_s(&m, x->name);
    peri_msg_s(&m, "\"");
    return PER_ERR_ARG;
  }
  if ((uint64_t)x->offset + x->bytes > y->offset &&
      (uint64_t)y->offset + y->bytes > x->offset) {
    m = peri_traj_msg(a, "per_traj_init");
    peri_traj_msg_field(&m, y->name);
    peri_msg_s(&m, " [");
    peri_msg_u(&m, y->offset);
    peri_msg_s(&m, ", ");
    peri_msg_u(&m, (uint64_t)y->offset + y->bytes);
    peri_msg_s(&m, ") overlaps ");
    peri_traj_msg_field(&m, x->name);
    peri_msg_s(&m, " [");
    peri_msg_u(&m, x->offset);
    peri_msg_s(&m, ", ");
    peri_msg_u(&m, (uint64_t)x->offset + x->bytes);
    if (!cfg->ntimescales) {
      peri_msg_s(&m, x->timescale == PER_TRAJ_STEP ? ") in the step record"
                                                   : ") in the once record");
    } else {
      peri_msg_s(&m, ") in ");
      peri_traj_msg_scale(&m, ts[x->timescale].name);
      peri_msg_s(&m, "'s record");
    }
    return PER_ERR_ARG;
  }
  return PER_OK;
}

/* 1 when timescale t of cfg has a field. */
static int peri_traj_has_field(const peri_traj_in *cfg, uint32_t t) {
  uint32_t f;
  for (f = 0; f < cfg->nfields; ++f)
    if (cfg->fields[f].timescale == t) return 1;
  return 0;
}

/* The checks of cfg that need no memory. */
static per_status peri_traj_check(per_traj *a, const peri_traj_in *cfg,
                                  const per_traj_timescale *ts, uint32_t nts) {
  uint32_t i, j;
  per_status s;
  if (cfg->ntimescales) {
    if (!cfg->timescales)
      return peri_traj_fail(a, PER_ERR_NULL, "per_traj_init",
                            "spec->timescales is NULL");
    if (cfg->ntimescales > PERI_TRAJ_MAX_SCALES)
      return peri_traj_fail(a, PER_ERR_CAPACITY, "per_traj_init",
                            "ntimescales must be 1 .. 2^16");
    for (i = 0; i < nts; ++i) {
      s = peri_traj_check_scale(a, ts, i);
      if (s != PER_OK) return s;
    }
  } else {
    if (cfg->capacity == 0 || cfg->capacity > (1u << 31))
      return peri_traj_fail(a, PER_ERR_CAPACITY, "per_traj_init",
                            "capacity must be 1 .. 2^31");
    if (cfg->step_bytes == 0)
      return peri_traj_fail(a, PER_ERR_ARG, "per_traj_init", "step_bytes is 0");
  }
  if (cfg->nfields == 0)
    return peri_traj_fail(a, PER_ERR_ARG, "per_traj_init", "nfields is 0");
  if (!cfg->fields)
    return peri_traj_fail(a, PER_ERR_NULL, "per_traj_init",
                          cfg->ntimescales ? "spec->fields is NULL"
                                           : "cfg->fields is NULL");
  for (i = 0; i < cfg->nfields; ++i) {
    s = peri_traj_check_field(a, cfg, ts, nts, i);
    if (s != PER_OK) return s;
  }
  for (i = 0; i < cfg->nfields; ++i)
    for (j = i + 1; j < cfg->nfields; ++j) {
      s = peri_traj_check_pair(a, cfg, ts, &cfg->fields[i], &cfg->fields[j]);
      if (s != PER_OK) return s;
    }
  for (i = 0; i < nts; ++i) {
    if (peri_traj_has_field(cfg, i)) continue;
    if (!cfg->ntimescales) {
      if (i == 0)
        return peri_traj_fail(a, PER_ERR_ARG, "per_traj_init",
                              "no PER_TRAJ_STEP field: a step would be empty");
    } else {
      peri_msg m = peri_traj_msg(a, "per_traj_init");
      peri_traj_msg_scale(&m, ts[i].name);
      peri_msg_s(&m, " has no field");
      return PER_ERR_ARG;
    }
  }
  return PER_OK;
}

/* One block: fields, counts, scales, parts, the timescales' field
   indices, names, then (each at a multiple of 16) every timescale's
   records, then the ends. */
#define PERI_TRAJ_ALIGN(x) (((x) + 15u) & ~(uint64_t)15u)

static per_status peri_traj_init(per_traj *a, const peri_traj_in *cfg,
                                 void *alloc_ctx) {
  per_traj_timescale two[2];
  const per_traj_timescale *ts;
  uint64_t nf, ns, off_count, off_scales, off_parts, off_ids, off_names,
      off_rec, at, total;
  uint32_t i, nts = 0;
  unsigned char *mem;
  char *names;
  per_status s;
  ts = peri_traj_scales_of(cfg, two, &nts);
  s = peri_traj_check(a, cfg, ts, nts);
  if (s != PER_OK) return s;
  nf = cfg->nfields;
  ns = nts;
  off_count = nf * sizeof(per_traj_field);
  off_scales = PERI_TRAJ_ALIGN(off_count + nf * sizeof(uint32_t));
  off_parts = off_scales + ns * sizeof(per_traj_scale);
  off_ids = off_parts + ns * sizeof(per_traj_part);
  off_names = off_ids + nf * sizeof(uint32_t);
  off_rec = PERI_TRAJ_ALIGN(off_names + (nf + ns) * (PER_TRAJ_NAME_MAX + 1u));
  total = off_rec;
  for (i = 0; i < nts; ++i)
    total =
        PERI_TRAJ_ALIGN(total + (uint64_t)ts[i].capacity * ts[i].record_bytes);
  for (i = 0; i < nts; ++i)
    if (ts[i].kind == PER_TRAJ_BUFFERED) total += ts[i].capacity;
  if ((uint64_t)(size_t)total != total)
    return peri_traj_fail(
        a, PER_ERR_CAPACITY, "per_traj_init",
        "capacity * record bytes does not fit in memory (size_t)");
  mem = (unsigned char *)PER_MALLOC((size_t)total, alloc_ctx);
  if (!mem) {
    peri_msg m = peri_traj_msg(a, "per_traj_init");
    peri_msg_s(&m, "could not allocate ");
    peri_msg_u(&m, total);
    peri_msg_s(&m, " bytes");
    return PER_ERR_NOMEM;
  }
  memset(mem, 0, (size_t)total);
  a->cfg.capacity = cfg->capacity;
  a->cfg.step_bytes = cfg->step_bytes;
  a->cfg.once_bytes = cfg->once_bytes;
  a->cfg.nfields = cfg->nfields;
  a->fields = (per_traj_field *)(void *)mem;
  a->count = (uint32_t *)(void *)(mem + off_count);
  a->scales = (per_traj_scale *)(void *)(mem + off_scales);
  a->parts = (per_traj_part *)(void *)(mem + off_parts);
  a->nscales = nts;
  a->two_kind = cfg->ntimescales ? 0u : 1u;
  a->alloc_ctx = alloc_ctx;
  names = (char *)(mem + off_names);
  for (i = 0; i < cfg->nfields; ++i, names += PER_TRAJ_NAME_MAX + 1u) {
    a->fields[i] = cfg->fields[i];
    memcpy(names, cfg->fields[i].name, strlen(cfg->fields[i].name) + 1);
    a->fields[i].name = names;
    a->scales[cfg->fields[i].timescale].nfields += 1;
  }
  /* each timescale's field indices, in order, in one array */
  at = 0;
  for (i = 0; i < nts; ++i) {
    a->scales[i].fields = (uint32_t *)(void *)(mem + off_ids) + at;
    at += a->scales[i].nfields;
    a->scales[i].nfields = 0;
  }
  for (i = 0; i < cfg->nfields; ++i) {
    per_traj_scale *sc = &a->scales[cfg->fields[i].timescale];
    sc->fields[sc->nfields++] = i;
  }
  at = off_rec;
  for (i = 0; i < nts; ++i, names += PER_TRAJ_NAME_MAX + 1u) {
    per_traj_scale *sc = &a->scales[i];
    uint64_t covered = 0;
    uint32_t k;
    for (k = 0; k < sc->nfields; ++k) covered += a->fields[sc->fields[k]].bytes;
    /* fields never overlap: covering record_bytes bytes, they tile it */
    sc->dense = covered == ts[i].record_bytes;
    memcpy(names, ts[i].name, strlen(ts[i].name) + 1);
    sc->name = names;
    sc->kind = ts[i].kind;
    sc->capacity = ts[i].capacity;
    sc->record_bytes = ts[i].record_bytes;
    sc->records = mem + at;
    at = PERI_TRAJ_ALIGN(at + (uint64_t)sc->capacity * sc->record_bytes);
  }
  for (i = 0; i < nts; ++i) {
    if (a->scales[i].kind != PER_TRAJ_BUFFERED) continue;
    a->scales[i].ends = mem + at;
    at += a->scales[i].capacity;
  }
  a->cfg.fields = a->fields;
  a->steps = a->scales[0].records;
  a->ends = a->scales[0].ends;
  a->once = a->two_kind && nts == 2 ? a->scales[1].records : NULL;
  a->error[0] = 0;
  return PER_OK;
}
#undef PERI_TRAJ_ALIGN

PERDEF per_status per_traj_init(per_traj *a, const per_traj_config *cfg,
                                void *alloc_ctx) {
  peri_traj_in in;
  if (!a) return PER_ERR_NULL;
  memset(a, 0, sizeof *a);
  if (!cfg)
    return peri_traj_fail(a, PER_ERR_NULL, "per_traj_init", "cfg is NULL");
  in.capacity = cfg->capacity;
  in.step_bytes = cfg->step_bytes;
  in.once_bytes = cfg->once_bytes;
  in.nfields = cfg->nfields;
  in.fields = cfg->fields;
  in.ntimescales = 0;
  in.timescales = NULL;
  return peri_traj_init(a, &in, alloc_ctx);
}

PERDEF per_status per_traj_init_spec(per_traj *a, const per_traj_spec *spec,
                                     void *alloc_ctx) {
  peri_traj_in in;
  if (!a) return PER_ERR_NULL;
  memset(a, 0, sizeof *a);
  if (!spec)
    return peri_traj_fail(a, PER_ERR_NULL, "per_traj_init", "spec is NULL");
  if (spec->ntimescales == 0)
    return peri_traj_fail(a, PER_ERR_CAPACITY, "per_traj_init",
                          "ntimescales must be 1 .. 2^16");
  in.capacity = 0;
  in.step_bytes = 0;
  in.once_bytes = 0;
  in.nfields = spec->nfields;
  in.fields = spec->fields;
  in.ntimescales = spec->ntimescales;
  in.timescales = spec->timescales;
  return peri_traj_init(a, &in, alloc_ctx);
}

PERDEF void per_traj_free(per_traj *a) {
  if (!a) return;
  if (a->fields) PER_FREE(a->fields, a->alloc_ctx);
  memset(a, 0, sizeof *a);
}

PERDEF per_status per_traj_add(per_traj *a, uint32_t field, const void *value) {
  const per_traj_field *f;
  per_traj_scale *sc;
  if (!a) return PER_ERR_NULL;
  if (!a->scales) return peri_traj_unready(a, "per_traj_add");
  if (field >= a->cfg.nfields) {
    peri_msg m = peri_traj_msg(a, "per_traj_add");
    peri_msg_s(&m, "field ");
    peri_msg_u(&m, field);
    peri_msg_s(&m, " out of range: ");
    peri_msg_u(&m, a->cfg.nfields);
    peri_msg_s(&m, " fields");
    return PER_ERR_INDEX;
  }
  if (!value)
    return peri_traj_fail(a, PER_ERR_NULL, "per_traj_add", "value is NULL");
  f = &a->fields[field];
  sc = &a->scales[f->timescale];
  if (sc->kind == PER_TRAJ_BUFFERED) {
    if (a->count[field] == sc->capacity)
      return peri_traj_full(a, "per_traj_add", field);
    memmove(sc->records + (size_t)a->count[field] * sc->record_bytes +
                f->offset,
            value, f->bytes);
    a->count[field] += 1;
    peri_traj_clear(a, a->nscales, 0, 0);
  } else {
    memmove(sc->records + f->offset, value, f->bytes);
    a->count[field] = 1;
    peri_traj_clear(a, f->timescale, f->offset, f->bytes);
  }
  a->error[0] = 0;
  return PER_OK;
}

/* Every field of timescale t from src into dst (dst may overlap src:
   a SINGLE record added from the last build's). */
static void peri_traj_copy_fields(per_traj *a, uint32_t t, unsigned char *dst,
                                  const unsigned char *src) {
  const per_traj_scale *sc = &a->scales[t];
  uint32_t k;
  if (sc->dense) memmove(dst, src, sc->record_bytes);
  for (k = 0; k < sc->nfields; ++k) {
    uint32_t f = sc->fields[k];
    const per_traj_field *fd = &a->fields[f];
    if (!sc->dense) memmove(dst + fd->offset, src + fd->offset, fd->bytes);
    a->count[f] = sc->kind == PER_TRAJ_BUFFERED ? a->count[f] + 1 : 1;
  }
}

/* per_traj_add_record and per_traj_add_step: the next BUFFERED record or
   the SINGLE one; a full BUFFERED timescale is named as a timescale, or
   (by_field) as its first field. */
static per_status peri_traj_add_record(per_traj *a, const char *fn, uint32_t t,
                                       const void *record, int by_field,
                                       uint32_t *at) {
  per_traj_scale *sc = &a->scales[t];
  uint32_t n;
  per_status s;
  if (sc->kind == PER_TRAJ_SINGLE) {
    peri_traj_copy_fields(a, t, sc->records, (const unsigned char *)record);
    peri_traj_clear(a, t, 0, sc->record_bytes);
    *at = 0;
    return PER_OK;
  }
  s = peri_traj_even(a, fn, t, &n);
  if (s != PER_OK) return s;
  if (n == sc->capacity) {
    peri_msg m;
    if (by_field) return peri_traj_full(a, fn, peri_traj_first_of(a, t));
    m = peri_traj_msg(a, fn);
    peri_traj_msg_scale(&m, sc->name);
    peri_msg_s(&m, " is full: capacity ");
    peri_msg_u(&m, sc->capacity);
    peri_msg_s(&m, ", index ");
    peri_msg_u(&m, n);
    return PER_ERR_BATCH;
  }
  peri_traj_copy_fields(a, t, sc->records + (size_t)n * sc->record_bytes,
                        (const unsigned char *)record);
  peri_traj_clear(a, a->nscales, 0, 0);
  sc->ends[n] = PER_END_NONE;
  *at = n;
  return PER_OK;
}

PERDEF per_status per_traj_add_record(per_traj *a, uint32_t t,
                                      const void *record) {
  uint32_t at = 0;
  per_status s;
  if (!a) return PER_ERR_NULL;
  if (!a->scales) return peri_traj_unready(a, "per_traj_add_record");
  if (t >= a->nscales) return peri_traj_no_scale(a, "per_traj_add_record", t);
  if (!record)
    return peri_traj_fail(a, PER_ERR_NULL, "per_traj_add_record",
                          "record is NULL");
  s = peri_traj_add_record(a, "per_traj_add_record", t, record, 0, &at);
  if (s == PER_OK) a->error[0] = 0;
  return s;
}

PERDEF per_status per_traj_add_step(per_traj *a, const void *record,
                                    uint8_t end) {
  uint32_t at = 0;
  per_status s;
  if (!a) return PER_ERR_NULL;
  if (!a->scales) return peri_traj_unready(a, "per_traj_add_step");
  if (!record)
    return peri_traj_fail(a, PER_ERR_NULL, "per_traj_add_step",
                          "record is NULL");
  if (end > PER_END_TRUNCATED)
    return peri_traj_bad_end(a, "per_traj_add_step", end);
  if (a->scales[0].kind != PER_TRAJ_BUFFERED)
    return peri_traj_fail(a, PER_ERR_ARG, "per_traj_add_step",
                          "timescale 0 is PER_TRAJ_SINGLE: no steps");
  s = peri_traj_add_record(a, "per_traj_add_step", 0, record, 1, &at);
  if (s != PER_OK) return s;
  a->scales[0].ends[at] = end;
  a->error[0] = 0;
  return PER_OK;
}

PERDEF uint32_t per_traj_count(const per_traj *a, uint32_t t) {
  uint32_t f, k, n = 0xffffffffu;
  if (!a || !a->scales || t >= a->nscales || a->scales[t].nfields == 0)
    return 0; /* a two-kind once record may have no field */
  for (k = 0; k < a->scales[t].nfields; ++k) {
    f = a->scales[t].fields[k];
    if (a->count[f] < n) n = a->count[f];
  }
  return n;
}

PERDEF uint32_t per_traj_steps(const per_traj *a) {
  return per_traj_count(a, 0);
}

PERDEF uint32_t per_traj_find(const per_traj *a, const char *name) {
  uint32_t t;
  if (!a || !a->scales || !name) return a ? a->nscales : 0;
  for (t = 0; t < a->nscales; ++t)
    if (strcmp(a->scales[t].name, name) == 0) return t;
  return a->nscales;
}

PERDEF uint32_t per_traj_find_field(const per_traj *a, uint32_t t,
                                    const char *name) {
  uint32_t f;
  if (!a || !a->scales || !name) return a ? a->cfg.nfields : 0;
  for (f = 0; f < a->cfg.nfields; ++f)
    if (a->fields[f].timescale == t && strcmp(a->fields[f].name, name) == 0)
      return f;
  return a->cfg.nfields;
}

/* per_traj_end_at, its messages naming fn. */
static per_status peri_traj_end(per_traj *a, const char *fn, uint32_t t,
                                uint8_t end) {
  uint32_t n;
  if (!a) return PER_ERR_NULL;
  if (!a->scales) return peri_traj_unready(a, fn);
  if (t >= a->nscales) return peri_traj_no_scale(a, fn, t);
  if (end > PER_END_TRUNCATED) return peri_traj_bad_end(a, fn, end);
  if (a->scales[t].kind != PER_TRAJ_BUFFERED) {
    peri_msg m = peri_traj_msg(a, fn);
    peri_traj_msg_scale(&m, a->scales[t].name);
    peri_msg_s(&m, " is PER_TRAJ_SINGLE: its record has no episode end");
    return PER_ERR_ARG;
  }
  n = per_traj_count(a, t);
  if (n == 0) {
    peri_msg m = peri_traj_msg(a, fn);
    if (a->two_kind) {
      peri_msg_s(&m,
                 "no complete step (every step field needs a value) to end");
    } else {
      peri_msg_s(&m, "no complete record in ");
      peri_traj_msg_scale(&m, a->scales[t].name);
      peri_msg_s(&m, " (every field needs a value) to end");
    }
    return PER_ERR_EMPTY;
  }
  a->scales[t].ends[n - 1] = end;
  a->error[0] = 0;
  return PER_OK;
}

PERDEF per_status per_traj_end_at(per_traj *a, uint32_t t, uint8_t end) {
  return peri_traj_end(a, "per_traj_end_at", t, end);
}

PERDEF per_status per_traj_end(per_traj *a, uint8_t end) {
  return peri_traj_end(a, "per_traj_end", 0, end);
}

PERDEF per_status per_traj_build(per_traj *a, per_traj_out *out) {
  uint32_t t, n;
  per_status s;
  if (!a) return PER_ERR_NULL;
  if (!a->scales) return peri_traj_unready(a, "per_traj_build");
  if (!out)
    return peri_traj_fail(a, PER_ERR_NULL, "per_traj_build", "out is NULL");
  for (t = 0; t < a->nscales; ++t) {
    if (a->scales[t].kind != PER_TRAJ_BUFFERED) continue;
    s = peri_traj_even(a, "per_traj_build", t, &n);
    if (s != PER_OK) return s;
  }
  if (a->two_kind && per_traj_count(a, 0) == 0)
    return peri_traj_fail(a, PER_ERR_EMPTY, "per_traj_build",
                          "no step to build");
  peri_traj_clear(a, a->nscales, 0, 0); /* a build right after a build */
  for (t = 0; t < a->nscales; ++t) {
    per_traj_part *p = &a->parts[t];
    p->records = a->scales[t].records;
    p->ends = a->scales[t].ends;
    p->record_bytes = a->scales[t].record_bytes;
    p->n = per_traj_count(a, t);
  }
  out->steps = a->parts[0].records;
  out->ends = a->parts[0].ends;
  out->once = a->once;
  out->n = a->parts[0].n;
  out->id = a->built;
  out->parts = a->parts;
  out->nparts = a->nscales;
  a->built += 1;
  memset(a->count, 0, (size_t)a->cfg.nfields * sizeof(uint32_t));
  a->stale = 1;
  a->error[0] = 0;
  return PER_OK;
}

PERDEF void per_traj_reset(per_traj *a) {
  if (!a) return;
  a->error[0] = 0;
  if (!a->scales) return;
  memset(a->count, 0, (size_t)a->cfg.nfields * sizeof(uint32_t));
  a->stale = 1;
  peri_traj_clear(a, a->nscales, 0, 0);
}

PERDEF const char *per_traj_error(const per_traj *a) {
  return a ? a->error : "";
}

#undef PERI_TRAJ_MAX_SCALES

#ifdef __cplusplus
}
#endif

#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic pop
#endif

#endif /* PER_TRAJ_IMPLEMENTATION */
