/* per_frames.h - frame stacks for pixel replay, a companion of per.h:
   each frame stored once, the stacks rebuilt on sampling.
   (no warranty; LICENSE: see the end of per.h)

   Do this, in *one* C or C++ file:
      #define PER_IMPLEMENTATION
      #include "per.h"
      #define PER_FRAMES_IMPLEMENTATION
      #include "per_frames.h"
   The implementation is compiled in the file that compiles per.h's: it
   uses per.h's checkpoint stages and byte sinks (the seam section of
   per.h's implementation, declared for the companions that compile beside
   it). Every other file includes per_frames.h alone; it includes per.h.
   PER_REAL, PER_STATIC, PER_MALLOC/PER_FREE, PER_ASSERT and PER_NO_STDIO
   are per.h's options and mean here what they mean there (PER_NO_STDIO
   leaves out per_frames_save and per_frames_load).

   CONTENTS
      Declarations ........... per_frames_config, per_frames_*      >>api
      Implementation: the ring, stepping, sampling, checks ..     >>frames
      Implementation: checkpoints (not with PER_NO_STDIO) .......   >>ckpt
      (grep for the >>markers)

   WHAT IT IS
      Replay of stacked frames (Atari: 84x84 uint8, stacks of 4) that
      stores each frame once. A transition's observation is the stack of
      the last k frames of its episode and its next observation the stack n
      steps later (per_nstep's rule); stored naively, both stacks cost 2k
      frames a transition, here about one.

      A per_frames is a ring of frames (every frame an environment step
      shows, written once) plus a per_buffer of transitions whose items are
      small records: the frame counters of both stacks, the action, the
      n-step reward, discount and done flag. Sampling draws records from
      the buffer, so priorities, IS weights, beta, windows,
      PER_SAMPLE_UNIQUE and sequences work as for any per_buffer, and then
      copies the stacks' frames into the caller's batch.

      Episode starts: the frames before an episode's first one are that
      first frame repeated (Gymnasium's FrameStackObservation with its
      default padding, "reset"). Episode ends: a terminated or truncated
      step's next observation is the stack ending in its final frame;
      per_nstep's rule gives done and the discount. Lanes: several
      environments may feed one per_frames (a vector environment), each in
      its own lane, in any order and at any pace.

      Frames are overwritten oldest first. The ring holds `frames` of them,
      a little more than one per transition: a lane stores one frame a step
      plus one more at each episode's start, and the transitions still in
      the buffer need those frames plus k - 1 older ones. A transition
      whose frames are no longer all in the ring is never drawn: sampling
      uses a window over the newest transitions, those after the newest
      transition that lost a frame (per_frames_drawable counts them). With
      the default ring and episodes longer than about 64 steps, every
      stored transition stays drawable. A lane that waits while the others
      write the whole ring over restarts its episode (f->restarts counts
      them): its stacks start again from the step's obs_frame, as at an
      episode's first step.

      Checkpoints: per_frames_save and per_frames_load (frames saved once).
      Not safe for concurrent use. Gaps: per_cuda_buffer and per_mpi.h do
      not take frame records.

   HISTORY
      0.5.0  its own file (per.h 0.4.0 held it as its section 10): the
             same functions, names and checkpoint files
*/
#ifndef PER_FRAMES_H_INCLUDED
#define PER_FRAMES_H_INCLUDED

#include "per.h"

#define per_frames_init PERI_NAME(per_frames_init)
#define per_frames_free PERI_NAME(per_frames_free)
#define per_frames_step PERI_NAME(per_frames_step)
#define per_frames_sample PERI_NAME(per_frames_sample)
#define per_frames_update PERI_NAME(per_frames_update)
#define per_frames_drawable PERI_NAME(per_frames_drawable)
#define per_frames_reset_lane PERI_NAME(per_frames_reset_lane)
#define per_frames_check PERI_NAME(per_frames_check)
#define per_frames_save PERI_NAME(per_frames_save)
#define per_frames_load PERI_NAME(per_frames_load)

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
   Declarations                                                       >>api
   ====================================================================== */

/* What a per_frames stores. Start from per_frames_config_default. */
typedef struct per_frames_config {
  per_config buffer;    /* the transitions' buffer: capacity (transitions),
                           alpha, beta, eps, seed, flags, seq_len, ...;
                           item_size is per_frames_record_size's (any
                           value given is replaced) */
  uint32_t frame_bytes; /* bytes of one frame, >= 1 (84 * 84 for Atari) */
  uint32_t stack;       /* k, frames in an observation: 1 .. 64 */
  uint32_t n;           /* n-step returns: 1 .. 2^16 (default 1) */
  float gamma;          /* discount in [0, 1] (default 0.99) */
  uint32_t action_size; /* bytes a step keeps besides its frame (the
                           action, and anything else): >= 1 */
  uint32_t lanes;       /* environments: 1 .. 2^16 (default 1) */
  uint64_t frames;      /* frames the ring holds: >= lanes * (stack + n +
                           2); 0 (the default) = capacity + capacity / 64
                           + lanes * (stack + n + 2) */
} per_frames_config;

/* The defaults for `capacity` transitions of frames of `frame_bytes`
   stacked `stack` deep with actions of `action_size` bytes: one-step
   (n = 1, gamma 0.99), one lane, the default ring and per_config_default's
   buffer. Nothing is validated (per_frames_init does that). */
PERDEF per_frames_config per_frames_config_default(uint32_t capacity,
                                                   uint32_t frame_bytes,
                                                   uint32_t stack,
                                                   uint32_t action_size);

/* The buffer's item: per_nstep's record with an "observation" of `stack`
   uint64 frame counters (the stack's frames, oldest first); cfg->n,
   gamma, stack and action_size give it (per_frames_layout). 0 when the
   sizes do not fit. */
PERDEF uint32_t per_frames_record_size(const per_frames_config *cfg);
/* The record's byte offsets (obs and next_obs hold the counters). */
PERDEF per_nstep_layout per_frames_layout(const per_frames_config *cfg);

/* A plain struct: per_frames_init it. Fields are readable; change them
   only through the functions. Frame c (counted from 0 over the whole
   run) is at ring + (c % cfg.frames) * cfg.frame_bytes while c +
   cfg.frames > next_frame. */
typedef struct per_frames {
  per_frames_config cfg; /* validated; frames filled in */
  per_buffer buffer;     /* the transitions (records); update their
                            priorities with per_frames_update (or
                            per_buffer_update on it); add only through
                            per_frames_step */
  unsigned char *ring;   /* cfg.frames * cfg.frame_bytes */
  uint64_t next_frame;   /* frames written so far */
  per_nstep *adder;      /* per lane: the pending steps (records) */
  uint64_t *stack;       /* per lane: the current observation's k
                            counters */
  uint8_t *live;         /* per lane: 1 while an episode runs */
  uint64_t *low_idx;     /* the drawable window's bookkeeping: a ring of */
  uint64_t *low_min;     /* (transition, its oldest frame), both rising */
  uint32_t low_head, low_len;
  uint64_t drawable_from; /* transitions added before it are not drawn */
  uint64_t restarts;      /* lanes restarted: their frames were gone */
  void *alloc_ctx;
  char error[192]; /* "" after a successful call, else what the last
                      call refused (names the argument and its value) */
} per_frames;

/* Where per_frames_sample writes; every pointer but ids may be NULL.
   Batch entry j (a sequence's step j * L + s with PER_SAMPLE_SEQUENCES):
     obs, next_obs  stack * frame_bytes bytes at j * stack * frame_bytes,
                    the frames oldest first;
     action         action_size bytes at j * action_size;
     reward         the n-step return sum_{i<m} gamma^i r_{t+i} (float);
     discount       gamma^m (m <= n: fewer at an episode's end);
     done           1 when the episode terminated within the m steps;
     ids            one per draw (required): for per_frames_update;
     weights        one per draw: the IS weights. */
typedef struct per_frames_out {
  void *obs;
  void *next_obs;
  void *action;
  float *reward;
  float *discount;
  uint32_t *done;
  uint64_t *ids;
  float *weights;
} per_frames_out;

/* Validate cfg and allocate the ring, the buffer and the lanes (ring
   not zeroed: no frame is read before it is written). Errors:
   PER_ERR_NULL (f, cfg), PER_ERR_ARG (a field out of its range, named in
   f->error), those of per_buffer_init (f->error gives its message),
   PER_ERR_NOMEM. On error *f is zeroed but for f->error; nothing leaks. */
PERDEF per_status per_frames_init(per_frames *f, const per_frames_config *cfg,
                                  void *alloc_ctx);
/* Release everything and zero *f. Safe on a zeroed per_frames and NULL. */
PERDEF void per_frames_free(per_frames *f);
/* One environment step of lane `lane`: the observation whose newest frame
   is obs_frame, the action taken, the reward, the next observation's
   newest frame and how the step ended. obs_frame is read only at an
   episode's first step (the lane's first step, any step after an end, or
   a restart); next_frame is stored every step, so an episode of T steps
   stores T + 1 frames. Transitions reach the buffer as per_nstep emits
   them: a step n steps later, or at the episode's end (every pending
   step, the last with PER_END_TERMINATED or PER_END_TRUNCATED: sequences
   see the end). No allocation. Errors (nothing changes): PER_ERR_NULL
   (a pointer), PER_ERR_INDEX (lane >= lanes), PER_ERR_NAN, PER_ERR_INF
   (reward). */
PERDEF per_status per_frames_step(per_frames *f, uint32_t lane,
                                  const void *obs_frame, const void *action,
                                  float reward, const void *next_frame,
                                  int terminated, int truncated);
/* Draw B transitions (or B sequences) as per_buffer_sample does on
   f->buffer, among the drawable transitions (opts->window, if any, is
   narrowed to them; PER_SAMPLE_TRAJECTORIES counts transitions here, one
   per record), and rebuild their stacks into out. Errors: those of
   per_buffer_sample (f->error says why), PER_ERR_NULL (f, out or
   out->ids), PER_ERR_EMPTY (no transition drawable). Nothing is written
   and nothing changes on error. */
PERDEF per_status per_frames_sample(per_frames *f, uint32_t B,
                                    const per_sample_opts *opts,
                                    per_frames_out *out);
/* per_buffer_update on f->buffer (f->error says why on error). */
PERDEF per_status per_frames_update(per_frames *f, const uint64_t *ids,
                                    const float *td, uint32_t n,
                                    uint32_t *stale);
/* Transitions that can be drawn now: the newest ones, whose frames are
   all in the ring (0 for NULL). */
PERDEF uint32_t per_frames_drawable(const per_frames *f);
/* Drop lane's pending steps and end its episode without emitting (e.g.
   an environment reset from outside). PER_ERR_NULL, PER_ERR_INDEX. */
PERDEF per_status per_frames_reset_lane(per_frames *f, uint32_t lane);
/* Every invariant: the buffer's (per_buffer_check), each drawable
   transition's frames in the ring and its stacks in order, the lanes'.
   PER_OK or PER_ERR_CORRUPT (PER_ERR_NULL for NULL). O(capacity). */
PERDEF per_status per_frames_check(const per_frames *f);

#ifndef PER_NO_STDIO
/* Write f's whole state to `path`, atomically as per_buffer_save does
   (a temporary file, fsyncs, a rename: path holds the old file or the
   new one, never a mix). The file holds every frame still in the ring
   once, the lanes (their stacks and pending steps), the drawable
   window's bookkeeping, then f->buffer's own checkpoint (the records);
   format in docs/FORMAT.md. f is not changed. Errors: PER_ERR_NULL,
   PER_ERR_NOMEM, PER_ERR_IO (path as it was). */
PERDEF per_status per_frames_save(const per_frames *f, const char *path);
/* Replace f's state with the file's: f must have been made with the
   saved config (frame_bytes, stack, n, gamma, action_size, lanes, frames
   and the buffer's fields, as per_buffer_load requires them). Then f
   steps and samples on exactly as the saved one would have. The frames
   are read twice: once to check everything (checksums, counters, every
   drawable record's frames), once into the ring. Errors (f unchanged but
   for f->error, which names the field): PER_ERR_NULL, PER_ERR_IO,
   PER_ERR_FORMAT (not a per_frames file), PER_ERR_VERSION,
   PER_ERR_TRUNCATED, PER_ERR_CHECKSUM, PER_ERR_CORRUPT, PER_ERR_MISMATCH
   (another config), PER_ERR_NOMEM, and those of per_buffer_load for the
   records. The one exception: when the file changes or fails between
   the two reads, f keeps its old state but no transition is drawable
   and every lane starts a new episode (its ring was partly overwritten),
   with PER_ERR_IO or PER_ERR_CHECKSUM. */
PERDEF per_status per_frames_load(per_frames *f, const char *path);
#endif

#ifdef __cplusplus
}
#endif

#endif /* PER_FRAMES_H_INCLUDED */

/* ======================================================================
   IMPLEMENTATION
   ====================================================================== */
#if defined(PER_FRAMES_IMPLEMENTATION) && \
    !defined(PER_FRAMES_IMPLEMENTATION_INCLUDED)
#define PER_FRAMES_IMPLEMENTATION_INCLUDED

#ifndef PER_IMPLEMENTATION_INCLUDED
#error \
    "per_frames.h: define PER_FRAMES_IMPLEMENTATION in the file that defines PER_IMPLEMENTATION, after including per.h there"
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

/* >>frames */
PERDEF per_frames_config per_frames_config_default(uint32_t capacity,
                                                   uint32_t frame_bytes,
                                                   uint32_t stack,
                                                   uint32_t action_size) {
  per_frames_config c;
  memset(&c, 0, sizeof c);
  c.buffer = per_config_default(capacity, 1);
  c.frame_bytes = frame_bytes;
  c.stack = stack;
  c.n = 1;
  c.gamma = 0.99f;
  c.action_size = action_size;
  c.lanes = 1;
  c.frames = 0;
  return c;
}

static per_nstep_config peri_frames_nstep(const per_frames_config *c) {
  per_nstep_config nc;
  nc.n = c->n;
  nc.gamma = c->gamma;
  nc.obs_size = c->stack <= 64 ? c->stack * 8u : 0u;
  nc.action_size = c->action_size;
  return nc;
}

PERDEF per_nstep_layout per_frames_layout(const per_frames_config *cfg) {
  per_nstep_config nc;
  per_nstep_layout l;
  if (!cfg) {
    memset(&l, 0, sizeof l);
    return l;
  }
  nc = peri_frames_nstep(cfg);
  return per_nstep_layout_of(&nc);
}

PERDEF uint32_t per_frames_record_size(const per_frames_config *cfg) {
  return per_frames_layout(cfg).size;
}

/* f->error emptied, for a message. */
static peri_msg peri_frames_msg(per_frames *f) {
  return peri_msg_into(f->error, sizeof f->error);
}

static per_status peri_frames_fail(per_frames *f, per_status s,
                                   const char *what) {
  peri_msg m = peri_frames_msg(f);
  peri_msg_s(&m, what);
  return s;
}

/* The least ring the lanes need: each lane's pending steps, their stacks'
   older frames and the frames one step writes. */
static uint64_t peri_frames_floor(const per_frames_config *c) {
  return (uint64_t)c->lanes * ((uint64_t)c->stack + c->n + 2u);
}

/* PER_OK when per_frames_init accepts c's own fields (the buffer's are
   per_buffer_init's to check), else why not, in m. */
static per_status peri_frames_config_check(const per_frames_config *c,
                                           peri_msg *m) {
  if (c->frame_bytes == 0) {
    peri_msg_nu(m, "frame_bytes", 0);
    peri_msg_s(m, ": must be >= 1");
    return PER_ERR_ARG;
  }
  if (c->stack == 0 || c->stack > 64) {
    peri_msg_nu(m, "stack", c->stack);
    peri_msg_s(m, ": must be 1 .. 64");
    return PER_ERR_ARG;
  }
  if (c->n == 0 || c->n > (1u << 16)) {
    peri_msg_nu(m, "n", c->n);
    peri_msg_s(m, ": must be 1 .. 65536");
    return PER_ERR_ARG;
  }
  if (!(c->gamma >= 0.0f && c->gamma <= 1.0f)) {
    peri_msg_s(m, "gamma must be in [0, 1]");
    return PER_ERR_ARG;
  }
  if (c->action_size == 0) {
    peri_msg_nu(m, "action_size", 0);
    peri_msg_s(m, ": must be >= 1");
    return PER_ERR_ARG;
  }
  if (c->lanes == 0 || c->lanes > (1u << 16)) {
    peri_msg_nu(m, "lanes", c->lanes);
    peri_msg_s(m, ": must be 1 .. 65536");
    return PER_ERR_ARG;
  }
  if (per_frames_record_size(c) == 0) {
    peri_msg_nu(m, "action_size", c->action_size);
    peri_msg_s(m, ": the record would not fit in 2^32 - 1 bytes");
    return PER_ERR_ARG;
  }
  if (c->frames != 0 && c->frames < peri_frames_floor(c)) {
    peri_msg_nu(m, "frames", c->frames);
    peri_msg_nu(m, " < lanes * (stack + n + 2) =", peri_frames_floor(c));
    return PER_ERR_ARG;
  }
  if (c->frames != 0 && c->frames > ((uint64_t)SIZE_MAX) / c->frame_bytes) {
    peri_msg_nu(m, "frames", c->frames);
    peri_msg_nu(m, " * frame_bytes", c->frame_bytes);
    peri_msg_s(m, " overflows size_t");
    return PER_ERR_CAPACITY;
  }
  return PER_OK;
}

PERDEF void per_frames_free(per_frames *f) {
  uint32_t i;
  if (!f) return;
  if (f->adder)
    for (i = 0; i < f->cfg.lanes; ++i) per_nstep_free(&f->adder[i]);
  if (f->adder) PER_FREE(f->adder, f->alloc_ctx);
  if (f->ring) PER_FREE(f->ring, f->alloc_ctx);
  if (f->stack) PER_FREE(f->stack, f->alloc_ctx);
  if (f->live) PER_FREE(f->live, f->alloc_ctx);
  if (f->low_idx) PER_FREE(f->low_idx, f->alloc_ctx);
  if (f->low_min) PER_FREE(f->low_min, f->alloc_ctx);
  per_buffer_free(&f->buffer);
  memset(f, 0, sizeof *f);
}

/* n * size bytes from the allocator, or NULL (also when they overflow). */
static void *peri_frames_alloc(uint64_t n, uint64_t size, void *ctx) {
  uint64_t bytes = n * size;
  if (size != 0 && bytes / size != n) return NULL;
  if ((uint64_t)(size_t)bytes != bytes) return NULL;
  return PER_MALLOC((size_t)(bytes ? bytes : 1), ctx);
}

PERDEF per_status per_frames_init(per_frames *f, const per_frames_config *cfg,
                                  void *alloc_ctx) {
  per_frames_config c;
  per_nstep_config nc;
  peri_msg m;
  per_status s;
  uint32_t i, cap;
  if (!f) return PER_ERR_NULL;
  memset(f, 0, sizeof *f);
  m = peri_frames_msg(f);
  if (!cfg) return peri_frames_fail(f, PER_ERR_NULL, "cfg is NULL");
  c = *cfg;
  s = peri_frames_config_check(&c, &m);
  if (s != PER_OK) return s;
  c.buffer.item_size = per_frames_record_size(&c);
  if (c.frames == 0) {
    uint64_t cap64 = c.buffer.capacity;
    c.frames = cap64 + cap64 / 64u + peri_frames_floor(&c);
    if (c.frames > ((uint64_t)SIZE_MAX) / c.frame_bytes) {
      peri_msg_nu(&m, "frames", c.frames);
      peri_msg_nu(&m, " * frame_bytes", c.frame_bytes);
      peri_msg_s(&m, " overflows size_t");
      return PER_ERR_CAPACITY;
    }
  }
  f->alloc_ctx = alloc_ctx;
  s = per_buffer_init(&f->buffer, &c.buffer, alloc_ctx);
  if (s != PER_OK) {
    peri_msg_s(&m, "buffer: ");
    peri_msg_s(&m, f->buffer.error);
    memset(&f->buffer, 0, sizeof f->buffer);
    return s;
  }
  f->cfg = c;
  cap = c.buffer.capacity;
  nc = peri_frames_nstep(&c);
  f->ring =
      (unsigned char *)peri_frames_alloc(c.frames, c.frame_bytes, alloc_ctx);
  f->adder =
      (per_nstep *)peri_frames_alloc(c.lanes, sizeof(per_nstep), alloc_ctx);
  f->stack = (uint64_t *)peri_frames_alloc((uint64_t)c.lanes * c.stack,
                                           sizeof(uint64_t), alloc_ctx);
  f->live = (uint8_t *)peri_frames_alloc(c.lanes, 1, alloc_ctx);
  f->low_idx = (uint64_t *)peri_frames_alloc(cap, sizeof(uint64_t), alloc_ctx);
  f->low_min = (uint64_t *)peri_frames_alloc(cap, sizeof(uint64_t), alloc_ctx);
  s = f->ring && f->adder && f->stack && f->live && f->low_idx && f->low_min
          ? PER_OK
          : PER_ERR_NOMEM;
  if (f->adder) memset(f->adder, 0, (size_t)c.lanes * sizeof(per_nstep));
  for (i = 0; s == PER_OK && i < c.lanes; ++i)
    s = per_nstep_init(&f->adder[i], &nc, alloc_ctx);
  if (s != PER_OK) {
    per_frames_free(f);
    return peri_frames_fail(f, s, per_status_str(s));
  }
  memset(f->live, 0, c.lanes);
  memset(f->stack, 0, (size_t)c.lanes * c.stack * sizeof(uint64_t));
  return PER_OK;
}

/* The oldest frame counter f still needs for transitions not yet emitted
   by lane i (its pending steps' stacks, else its current stack). */
static uint64_t peri_frames_lane_low(const per_frames *f, uint32_t i) {
  const per_nstep *a = &f->adder[i];
  uint64_t c;
  if (a->count > 0) {
    memcpy(&c, a->obs + (size_t)a->head * a->cfg.obs_size, sizeof c);
    return c;
  }
  return f->stack[(size_t)i * f->cfg.stack];
}

/* The first frame counter still in the ring. */
static uint64_t peri_frames_first(const per_frames *f) {
  return f->next_frame > f->cfg.frames ? f->next_frame - f->cfg.frames : 0;
}

/* The oldest frame of the record in slot `slot`. */
static uint64_t peri_frames_record_low(const per_frames *f, uint32_t slot) {
  uint64_t c;
  memcpy(&c, f->buffer.items + (size_t)slot * f->buffer.cfg.item_size,
         sizeof c);
  return c;
}

/* Window bookkeeping: low_idx/low_min hold, oldest first, the
   transitions (added index) whose oldest frame is below that of every
   later transition. A transition is drawable when it and every later
   one keep their frames: drawable_from passes every entry whose frame
   has left the ring. */
static void peri_frames_note(per_frames *f, uint64_t idx, uint64_t low) {
  uint32_t cap = f->buffer.cfg.capacity;
  while (f->low_len > 0) {
    uint32_t back = (f->low_head + f->low_len - 1u) % cap;
    if (f->low_min[back] < low) break;
    f->low_len -= 1;
  }
  if (f->low_len == cap) { /* the oldest entry's slot is overwritten */
    f->low_head = (f->low_head + 1u) % cap;
    f->low_len -= 1;
  }
  {
    uint32_t at = (f->low_head + f->low_len) % cap;
    f->low_idx[at] = idx;
    f->low_min[at] = low;
    f->low_len += 1;
  }
}

static void peri_frames_advance(per_frames *f) {
  uint32_t cap = f->buffer.cfg.capacity;
  uint64_t first = peri_frames_first(f);
  while (f->low_len > 0 && f->low_min[f->low_head] < first) {
    f->drawable_from = f->low_idx[f->low_head] + 1u;
    f->low_head = (f->low_head + 1u) % cap;
    f->low_len -= 1;
  }
}

/* Copy frame data into the ring as frame counter next_frame. */
static uint64_t peri_frames_put(per_frames *f, const void *frame) {
  uint64_t c = f->next_frame;
  memcpy(f->ring + (size_t)(c % f->cfg.frames) * f->cfg.frame_bytes, frame,
         f->cfg.frame_bytes);
  f->next_frame = c + 1u;
  return c;
}

PERDEF per_status per_frames_step(per_frames *f, uint32_t lane,
                                  const void *obs_frame, const void *action,
                                  float reward, const void *next_frame,
                                  int terminated, int truncated) {
  uint64_t obs[64], next[64], added0, a;
  uint64_t *st;
  uint32_t k, i, cap;
  per_status s;
  if (!f) return PER_ERR_NULL;
  f->error[0] = 0;
  if (!f->ring)
    return peri_frames_fail(f, PER_ERR_NULL, "f is not initialised");
  if (!obs_frame || !action || !next_frame)
    return peri_frames_fail(f, PER_ERR_NULL,
                            !obs_frame ? "obs_frame is NULL"
                            : !action  ? "action is NULL"
                                       : "next_frame is NULL");
  if (lane >= f->cfg.lanes) {
    peri_msg m = peri_frames_msg(f);
    peri_msg_nu(&m, "lane", lane);
    peri_msg_nu(&m, " >= lanes", f->cfg.lanes);
    return PER_ERR_INDEX;
  }
  s = peri_float_status(reward);
  if (s != PER_OK) {
    peri_msg m = peri_frames_msg(f);
    peri_msg_s(&m, s == PER_ERR_NAN ? "reward is NaN" : "reward is infinite");
    return s;
  }
  k = f->cfg.stack;
  st = f->stack + (size_t)lane * k;
  /* A lane whose oldest needed frame would leave the ring with this
     step's writes restarts its episode. */
  if (f->live[lane] &&
      peri_frames_lane_low(f, lane) + f->cfg.frames < f->next_frame + 1u) {
    per_nstep_reset(&f->adder[lane]);
    f->live[lane] = 0;
    f->restarts += 1;
  }
  if (!f->live[lane]) {
    uint64_t c0 = peri_frames_put(f, obs_frame);
    for (i = 0; i < k; ++i) st[i] = c0;
    f->live[lane] = 1;
  }
  memcpy(obs, st, (size_t)k * sizeof *obs);
  for (i = 0; i + 1u < k; ++i) next[i] = st[i + 1u];
  next[k - 1u] = peri_frames_put(f, next_frame);
  added0 = f->buffer.added;
  peri_nstep_push(&f->adder[lane], &f->buffer, obs, action, reward, next,
                  terminated, truncated, 1);
  memcpy(st, next, (size_t)k * sizeof *st);
  if (terminated || truncated) f->live[lane] = 0;
  cap = f->buffer.cfg.capacity;
  for (a = added0; a < f->buffer.added; ++a)
    peri_frames_note(f, a, peri_frames_record_low(f, (uint32_t)(a % cap)));
  peri_frames_advance(f);
  return PER_OK;
}

/* The first added index of a transition still stored and drawable. */
static uint64_t peri_frames_from(const per_frames *f) {
  uint64_t stored = f->buffer.added - f->buffer.size;
  return f->drawable_from > stored ? f->drawable_from : stored;
}

PERDEF uint32_t per_frames_drawable(const per_frames *f) {
  if (!f || !f->ring) return 0;
  return (uint32_t)(f->buffer.added - peri_frames_from(f));
}

/* Copy the k frames whose counters are at rec (memcpy'd uint64s) to
   out, oldest first; a run of consecutive frames that does not wrap the
   ring is one copy. */
static void peri_frames_gather(const per_frames *f, const unsigned char *rec,
                               unsigned char *out) {
  uint32_t i = 0, k = f->cfg.stack;
  size_t fb = f->cfg.frame_bytes;
  uint64_t nf = f->cfg.frames;
  while (i < k) {
    uint64_t c, d;
    uint32_t j = i + 1u;
    memcpy(&c, rec + (size_t)i * sizeof c, sizeof c);
    while (j < k) {
      memcpy(&d, rec + (size_t)j * sizeof d, sizeof d);
      if (d != c + (j - i) || (c % nf) + (j - i) >= nf) break;
      ++j;
    }
    memcpy(out + (size_t)i * fb, f->ring + (size_t)(c % nf) * fb,
           (size_t)(j - i) * fb);
    i = j;
  }
}

PERDEF per_status per_frames_sample(per_frames *f, uint32_t B,
                                    const per_sample_opts *opts,
                                    per_frames_out *out) {
  per_sample_opts o;
  per_nstep_layout l;
  uint32_t drawable, L, j, s, cap;
  size_t sb;
  per_status st;
  if (!f) return PER_ERR_NULL;
  f->error[0] = 0;
  if (!f->ring)
    return peri_frames_fail(f, PER_ERR_NULL, "f is not initialised");
  if (!out || !out->ids)
    return peri_frames_fail(f, PER_ERR_NULL,
                            !out ? "out is NULL" : "out->ids is NULL");
  drawable = per_frames_drawable(f);
  if (drawable == 0)
    return peri_frames_fail(f, PER_ERR_EMPTY,
                            f->buffer.size == 0
                                ? "the buffer is empty: step first"
                                : "no stored transition has all its frames");
  if (opts) o = *opts;
  else memset(&o, 0, sizeof o);
  if (drawable < f->buffer.size && (o.window == 0 || o.window > drawable))
    o.window = drawable;
  st = per_buffer_sample(&f->buffer, B, &o, NULL, out->ids, out->weights);
  if (st != PER_OK) return peri_frames_fail(f, st, f->buffer.error);
  l = per_frames_layout(&f->cfg);
  L = (o.flags & PER_SAMPLE_SEQUENCES) ? f->buffer.cfg.seq_len : 1u;
  cap = f->buffer.cfg.capacity;
  sb = (size_t)f->cfg.stack * f->cfg.frame_bytes;
  for (j = 0; j < B; ++j) {
    uint32_t first = per_id_slot(out->ids[j]);
    for (s = 0; s < L; ++s) {
      size_t e = (size_t)j * L + s;
      const unsigned char *rec = f->buffer.items + (size_t)((first + s) % cap) *
                                                       f->buffer.cfg.item_size;
      if (out->obs)
        peri_frames_gather(f, rec + l.obs, (unsigned char *)out->obs + e * sb);
      if (out->next_obs)
        peri_frames_gather(f, rec + l.next_obs,
                           (unsigned char *)out->next_obs + e * sb);
      if (out->action)
        memcpy((unsigned char *)out->action + e * f->cfg.action_size,
               rec + l.action, f->cfg.action_size);
      if (out->reward) memcpy(&out->reward[e], rec + l.reward, sizeof(float));
      if (out->discount)
        memcpy(&out->discount[e], rec + l.discount, sizeof(float));
      if (out->done) memcpy(&out->done[e], rec + l.done, sizeof(uint32_t));
    }
  }
  return PER_OK;
}

PERDEF per_status per_frames_update(per_frames *f, const uint64_t *ids,
                                    const float *td, uint32_t n,
                                    uint32_t *stale) {
  per_status s;
  if (!f) return PER_ERR_NULL;
  f->error[0] = 0;
  if (!f->ring)
    return peri_frames_fail(f, PER_ERR_NULL, "f is not initialised");
  s = per_buffer_update(&f->buffer, ids, td, n, stale);
  if (s != PER_OK) return peri_frames_fail(f, s, f->buffer.error);
  return PER_OK;
}

PERDEF per_status per_frames_reset_lane(per_frames *f, uint32_t lane) {
  if (!f) return PER_ERR_NULL;
  f->error[0] = 0;
  if (!f->ring)
    return peri_frames_fail(f, PER_ERR_NULL, "f is not initialised");
  if (lane >= f->cfg.lanes) {
    peri_msg m = peri_frames_msg(f);
    peri_msg_nu(&m, "lane", lane);
    peri_msg_nu(&m, " >= lanes", f->cfg.lanes);
    return PER_ERR_INDEX;
  }
  per_nstep_reset(&f->adder[lane]);
  f->live[lane] = 0;
  return PER_OK;
}

/* 1 when the k counters at rec rise by at most one a frame, within
   [first, next_frame), and repeat only their first (an episode's start). */
static int peri_frames_stack_ok(const per_frames *f, const unsigned char *rec,
                                uint64_t first) {
  uint32_t i, k = f->cfg.stack;
  uint64_t prev = 0, c0 = 0, c;
  for (i = 0; i < k; ++i) {
    memcpy(&c, rec + (size_t)i * sizeof c, sizeof c);
    if (c < first || c >= f->next_frame) return 0;
    if (i == 0) c0 = c;
    else if (c < prev || (c == prev && c != c0)) return 0;
    prev = c;
  }
  return 1;
}

PERDEF per_status per_frames_check(const per_frames *f) {
  per_nstep_layout l;
  uint64_t first, from, a;
  uint32_t cap, i;
  per_status s;
  if (!f) return PER_ERR_NULL;
  if (!f->ring) return PER_ERR_CORRUPT;
  s = per_buffer_check(&f->buffer);
  if (s != PER_OK) return s;
  l = per_frames_layout(&f->cfg);
  if (f->buffer.cfg.item_size != l.size) return PER_ERR_CORRUPT;
  cap = f->buffer.cfg.capacity;
  first = peri_frames_first(f);
  from = peri_frames_from(f);
  for (a = from; a < f->buffer.added; ++a) {
    const unsigned char *rec =
        f->buffer.items + (size_t)(a % cap) * f->buffer.cfg.item_size;
    uint64_t last, nlast;
    if (!peri_frames_stack_ok(f, rec + l.obs, first) ||
        !peri_frames_stack_ok(f, rec + l.next_obs, first))
      return PER_ERR_CORRUPT;
    memcpy(&last, rec + l.obs + (size_t)(f->cfg.stack - 1u) * 8u, 8);
    memcpy(&nlast, rec + l.next_obs + (size_t)(f->cfg.stack - 1u) * 8u, 8);
    if (nlast <= last) return PER_ERR_CORRUPT;
  }
  if (f->low_len > cap) return PER_ERR_CORRUPT;
  for (i = 0; i + 1u < f->low_len; ++i) {
    uint32_t p = (f->low_head + i) % cap, q = (p + 1u) % cap;
    if (f->low_idx[p] >= f->low_idx[q] || f->low_min[p] >= f->low_min[q])
      return PER_ERR_CORRUPT;
  }
  for (i = 0; i < f->cfg.lanes; ++i) /* an idle lane's frames may be gone */
    if (f->live[i] > 1 ||
        (f->live[i] && peri_frames_lane_low(f, i) >= f->next_frame))
      return PER_ERR_CORRUPT;
  return PER_OK;
}

/* >>ckpt */
#ifndef PER_NO_STDIO
/* The frames section's fixed header (docs/FORMAT.md). */
#define PERI_FRAMES_MAGIC "PERFRAME"
#define PERI_FRAMES_VERSION 1u
#define PERI_FRAMES_HEAD 96u

/* The frame counters the file holds: every frame still in the ring. */
static uint64_t peri_frames_saved_first(const per_frames *f) {
  return peri_frames_first(f);
}

static void peri_frames_head(const per_frames *f, unsigned char *h) {
  uint32_t g;
  memset(h, 0, PERI_FRAMES_HEAD);
  memcpy(h, PERI_FRAMES_MAGIC, 8);
  peri_put32(h + 8, PERI_FRAMES_VERSION);
  peri_put32(h + 12, PERI_FRAMES_HEAD);
  peri_put32(h + 16, f->cfg.frame_bytes);
  peri_put32(h + 20, f->cfg.stack);
  peri_put32(h + 24, f->cfg.n);
  memcpy(&g, &f->cfg.gamma, sizeof g);
  peri_put32(h + 28, g);
  peri_put32(h + 32, f->cfg.action_size);
  peri_put32(h + 36, f->cfg.lanes);
  peri_put64(h + 40, f->cfg.frames);
  peri_put64(h + 48, f->next_frame);
  peri_put64(h + 56, f->restarts);
  peri_put64(h + 64, f->drawable_from);
  peri_put64(h + 72, peri_frames_saved_first(f));
  peri_put64(h + 80, f->next_frame - peri_frames_saved_first(f));
  peri_put32(h + 88, f->low_len);
}

/* A lane's bytes in the file: live, pending count, its stack, then each
   pending step (oldest first): stack, action, reward. */
static size_t peri_frames_step_bytes(const per_frames_config *c) {
  return (size_t)c->stack * 8u + c->action_size + 4u;
}

PERDEF per_status per_frames_save(const per_frames *f, const char *path) {
  peri_writer w;
  peri_sink o;
  unsigned char h[PERI_FRAMES_HEAD], b8[8];
  uint32_t i, j, k;
  uint64_t c, first;
  per_status s;
  if (!f || !f->ring || !path) return PER_ERR_NULL;
  s = peri_writer_open(&w, path, f->alloc_ctx);
  if (s != PER_OK) return s;
  k = f->cfg.stack;
  peri_frames_head(f, h);
  peri_wbytes(&w, h, PERI_FRAMES_HEAD);
  for (i = 0; i < f->cfg.lanes; ++i) {
    const per_nstep *a = &f->adder[i];
    peri_put32(b8, f->live[i]);
    peri_put32(b8 + 4, a->count);
    peri_wbytes(&w, b8, 8);
    for (j = 0; j < k; ++j) {
      peri_put64(b8, f->stack[(size_t)i * k + j]);
      peri_wbytes(&w, b8, 8);
    }
    for (j = 0; j < a->count; ++j) {
      uint32_t at = (a->head + j) % a->cfg.n, r, q;
      for (q = 0; q < k; ++q) {
        memcpy(&c, a->obs + (size_t)at * a->cfg.obs_size + (size_t)q * 8u, 8);
        peri_put64(b8, c);
        peri_wbytes(&w, b8, 8);
      }
      peri_wbytes(&w, a->act + (size_t)at * a->cfg.action_size,
                  a->cfg.action_size);
      memcpy(&r, &a->reward[at], sizeof r);
      peri_put32(b8, r);
      peri_wbytes(&w, b8, 4);
    }
  }
  for (i = 0; i < f->low_len; ++i) {
    uint32_t at = (f->low_head + i) % f->buffer.cfg.capacity;
    peri_put64(b8, f->low_idx[at]);
    peri_wbytes(&w, b8, 8);
    peri_put64(b8, f->low_min[at]);
    peri_wbytes(&w, b8, 8);
  }
  first = peri_frames_saved_first(f);
  for (c = first; c < f->next_frame;) { /* at most two runs */
    uint64_t at = c % f->cfg.frames, run = f->cfg.frames - at;
    if (run > f->next_frame - c) run = f->next_frame - c;
    peri_wbytes(&w, f->ring + (size_t)at * f->cfg.frame_bytes,
                (size_t)run * f->cfg.frame_bytes);
    c += run;
  }
  peri_put32(b8, ~w.crc); /* the section's CRC-32C */
  peri_wbytes(&w, b8, 4);
  w.crc = 0xffffffffu; /* the records: a checkpoint of their own */
  o.mem = NULL;
  o.put = peri_sink_file;
  o.ctx = &w;
  peri_ckpt_emit(&f->buffer, &o);
  return peri_writer_finish(&w, path);
}

/* Reads for the load: n bytes into p (or only through the CRC when p is
   NULL), the running CRC updated. */
typedef struct peri_frames_rd {
  FILE *f;
  uint32_t crc, table[256];
  per_status s;
} peri_frames_rd;

static void peri_frames_rd_read(peri_frames_rd *r, void *p, size_t n) {
  unsigned char tmp[4096];
  while (r->s == PER_OK && n > 0) {
    size_t part = p ? n : (n < sizeof tmp ? n : sizeof tmp), got;
    unsigned char *dst = p ? (unsigned char *)p : tmp;
    got = fread(dst, 1, part, r->f);
    r->crc = peri_crc_run(r->table, r->crc, dst, got);
    if (got != part) r->s = ferror(r->f) ? PER_ERR_IO : PER_ERR_TRUNCATED;
    n -= got;
    if (p) p = dst + got;
  }
}

static uint64_t peri_frames_rd_u64(peri_frames_rd *r) {
  unsigned char b[8] = {0};
  peri_frames_rd_read(r, b, 8);
  return peri_get64(b);
}

static uint32_t peri_frames_rd_u32(peri_frames_rd *r) {
  unsigned char b[4] = {0};
  peri_frames_rd_read(r, b, 4);
  return peri_get32(b);
}

/* Everything a load reads before it changes f. */
typedef struct peri_frames_stage {
  unsigned char *mem; /* lanes' live, count, stacks, pending; low queue */
  uint8_t *live;
  uint32_t *count;
  uint64_t *stack;
  unsigned char *pend; /* per lane: n steps of peri_frames_step_bytes */
  uint64_t *low_idx, *low_min;
  uint64_t next_frame, restarts, drawable_from, first, nframes;
  uint32_t low_len;
  uint32_t crc_frames; /* the section's running CRC where the frames start */
} peri_frames_stage;

/* A field of the file's header against f's config. */
static int peri_frames_same(peri_msg *m, const char *name, uint64_t file,
                            uint64_t mine) {
  if (file == mine) return 1;
  peri_msg_pair(m, name, file, mine);
  return 0;
}

/* Read and check the frames section's header, lanes and queue into st,
   then the frames through the CRC only. */
static per_status peri_frames_read_section(const per_frames *f,
                                           peri_frames_rd *r,
                                           peri_frames_stage *st,
                                           fpos_t *frames_at, peri_msg *m) {
  unsigned char h[PERI_FRAMES_HEAD];
  const per_frames_config *c = &f->cfg;
  uint32_t i, j, g, L = c->lanes, k = c->stack, cap;
  size_t sb = peri_frames_step_bytes(c), bytes;
  uint64_t first;
  peri_frames_rd_read(r, h, PERI_FRAMES_HEAD);
  if (r->s != PER_OK) {
    if (r->s == PER_ERR_TRUNCATED) r->s = PER_ERR_FORMAT;
    peri_msg_s(m, "shorter than a per_frames header");
    return r->s;
  }
  if (memcmp(h, PERI_FRAMES_MAGIC, 8) != 0) {
    peri_msg_s(m, "not a per_frames checkpoint (magic)");
    return PER_ERR_FORMAT;
  }
  if (peri_get32(h + 8) != PERI_FRAMES_VERSION) {
    peri_msg_nu(m, "version", peri_get32(h + 8));
    peri_msg_s(m, ": this build reads version 1");
    return PER_ERR_VERSION;
  }
  memcpy(&g, &c->gamma, sizeof g);
  if (peri_get32(h + 12) != PERI_FRAMES_HEAD) {
    peri_msg_nu(m, "header bytes", peri_get32(h + 12));
    return PER_ERR_FORMAT;
  }
  if (!peri_frames_same(m, "frame_bytes", peri_get32(h + 16), c->frame_bytes) ||
      !peri_frames_same(m, "stack", peri_get32(h + 20), k) ||
      !peri_frames_same(m, "n", peri_get32(h + 24), c->n) ||
      !peri_frames_same(m, "gamma (bits)", peri_get32(h + 28), g) ||
      !peri_frames_same(m, "action_size", peri_get32(h + 32), c->action_size) ||
      !peri_frames_same(m, "lanes", peri_get32(h + 36), L) ||
      !peri_frames_same(m, "frames", peri_get64(h + 40), c->frames))
    return PER_ERR_MISMATCH;
  st->next_frame = peri_get64(h + 48);
  st->restarts = peri_get64(h + 56);
  st->drawable_from = peri_get64(h + 64);
  st->first = peri_get64(h + 72);
  st->nframes = peri_get64(h + 80);
  st->low_len = peri_get32(h + 88);
  cap = f->buffer.cfg.capacity;
  first = st->next_frame > c->frames ? st->next_frame - c->frames : 0;
  if (st->first != first || st->nframes != st->next_frame - first ||
      st->low_len > cap || peri_get32(h + 92) != 0) {
    peri_msg_s(m, "the frame counters do not agree");
    return PER_ERR_CORRUPT;
  }
  bytes = (size_t)L * (1u + 4u + (size_t)k * 8u + (size_t)c->n * sb) +
          (size_t)st->low_len * 16u;
  st->mem = (unsigned char *)PER_MALLOC(bytes ? bytes : 1, f->alloc_ctx);
  if (!st->mem) return PER_ERR_NOMEM;
  /* the uint64 arrays first (aligned by the allocator), then the rest */
  st->stack = (uint64_t *)(void *)st->mem;
  st->low_idx = st->stack + (size_t)L * k;
  st->low_min = st->low_idx + st->low_len;
  st->count = (uint32_t *)(void *)(st->low_min + st->low_len);
  st->live = (uint8_t *)(st->count + L);
  st->pend = st->live + L;
  for (i = 0; i < L; ++i) {
    uint32_t live = peri_frames_rd_u32(r);
    st->count[i] = peri_frames_rd_u32(r);
    st->live[i] = (uint8_t)live;
    for (j = 0; j < k; ++j)
      st->stack[(size_t)i * k + j] = peri_frames_rd_u64(r);
    if (r->s != PER_OK) return r->s;
    if (live > 1 || st->count[i] >= c->n || (!live && st->count[i] != 0)) {
      peri_msg_at(m, "lane", i);
      peri_msg_s(m, ": live or pending count out of range");
      return PER_ERR_CORRUPT;
    }
    for (j = 0; j < st->count[i]; ++j) {
      unsigned char *p = st->pend + ((size_t)i * c->n + j) * sb;
      uint32_t q;
      for (q = 0; q < k; ++q) {
        uint64_t v = peri_frames_rd_u64(r);
        memcpy(p + (size_t)q * 8u, &v, 8);
      }
      peri_frames_rd_read(r, p + (size_t)k * 8u, c->action_size + 4u);
    }
  }
  for (i = 0; i < st->low_len; ++i) {
    st->low_idx[i] = peri_frames_rd_u64(r);
    st->low_min[i] = peri_frames_rd_u64(r);
  }
  if (r->s != PER_OK) return r->s;
  if (fgetpos(r->f, frames_at) != 0) return PER_ERR_IO;
  st->crc_frames = r->crc;
  peri_frames_rd_read(r, NULL, (size_t)st->nframes * c->frame_bytes);
  if (r->s == PER_OK) {
    uint32_t want = ~r->crc, got = peri_frames_rd_u32(r);
    if (r->s == PER_OK && got != want) {
      peri_msg_s(m, "the frames section's checksum does not match");
      return PER_ERR_CHECKSUM;
    }
  }
  return r->s;
}

/* Every counter the staged state and the staged records hold lies in
   the staged ring; lanes' stacks rise; the queue rises. */
static per_status peri_frames_stage_check(const per_frames *f,
                                          const peri_frames_stage *st,
                                          const peri_ckpt *k, peri_msg *m) {
  const per_frames_config *c = &f->cfg;
  per_nstep_layout l = per_frames_layout(c);
  uint32_t i, j, kk = c->stack;
  uint64_t added = k->h.added, size = k->size, a, from;
  uint64_t lo = st->first, hi = st->next_frame;
  size_t sb = peri_frames_step_bytes(c);
  for (i = 0; i < c->lanes; ++i) {
    for (j = 0; j < kk && st->live[i]; ++j) {
      uint64_t v = st->stack[(size_t)i * kk + j];
      if (v >= hi || (j > 0 && v < st->stack[(size_t)i * kk + j - 1])) break;
    }
    if (st->live[i] && j < kk) {
      peri_msg_at(m, "lane", i);
      peri_msg_s(m, ": its stack's frames are not in the file");
      return PER_ERR_CORRUPT;
    }
    for (j = 0; j < st->count[i]; ++j) {
      uint64_t v;
      memcpy(&v, st->pend + ((size_t)i * c->n + j) * sb, 8);
      if (v >= hi) {
        peri_msg_at(m, "lane", i);
        peri_msg_s(m, ": a pending step's frames are not in the file");
        return PER_ERR_CORRUPT;
      }
    }
  }
  for (i = 0; i + 1u < st->low_len; ++i)
    if (st->low_idx[i] >= st->low_idx[i + 1u] ||
        st->low_min[i] >= st->low_min[i + 1u]) {
      peri_msg_s(m, "the drawable window's queue does not rise");
      return PER_ERR_CORRUPT;
    }
  if (st->low_len > 0 && st->low_idx[st->low_len - 1u] >= added) {
    peri_msg_s(m, "the drawable window's queue names a record not added");
    return PER_ERR_CORRUPT;
  }
  if (st->drawable_from > added) {
    peri_msg_nu(m, "drawable_from", st->drawable_from);
    peri_msg_nu(m, " > records added", added);
    return PER_ERR_CORRUPT;
  }
  from = st->drawable_from > added - size ? st->drawable_from : added - size;
  for (a = from; a < added; ++a) {
    const unsigned char *rec =
        k->items + (size_t)(a % k->cfg.capacity) * l.size;
    uint32_t q;
    for (q = 0; q < kk; ++q) {
      uint64_t v, w;
      memcpy(&v, rec + l.obs + (size_t)q * 8u, 8);
      memcpy(&w, rec + l.next_obs + (size_t)q * 8u, 8);
      if (v < lo || v >= hi || w < lo || w >= hi) {
        peri_msg_nu(m, "record", a);
        peri_msg_s(m, ": drawable, but its frames are not in the file");
        return PER_ERR_CORRUPT;
      }
    }
  }
  return PER_OK;
}

/* No transition drawable, no lane in an episode: what f is after its
   ring was partly overwritten by a failed second read. */
static void peri_frames_forget(per_frames *f) {
  uint32_t i;
  f->drawable_from = f->buffer.added;
  f->low_len = 0;
  for (i = 0; i < f->cfg.lanes; ++i) {
    per_nstep_reset(&f->adder[i]);
    f->live[i] = 0;
  }
}

PERDEF per_status per_frames_load(per_frames *f, const char *path) {
  peri_frames_rd r;
  peri_frames_stage st;
  peri_ckpt k;
  per_tree t;
  peri_sel sel;
  fpos_t frames_at;
  uint32_t n = 0, zero = 0, i, j;
  int have_tree = 0;
  per_status s;
  peri_msg m;
  if (!f) return PER_ERR_NULL;
  m = peri_frames_msg(f);
  if (!f->ring)
    return peri_frames_fail(f, PER_ERR_NULL, "f is not initialised");
  if (!path) return peri_frames_fail(f, PER_ERR_NULL, "path is NULL");
  memset(&st, 0, sizeof st);
  memset(&k, 0, sizeof k);
  memset(&r, 0, sizeof r);
  r.f = fopen(path, "rb");
  if (!r.f)
    return peri_frames_fail(f, PER_ERR_IO,
                            "the file cannot be opened for reading");
  r.crc = 0xffffffffu;
  peri_crc_table(r.table);
  s = peri_frames_read_section(f, &r, &st, &frames_at, &m);
  /* the records: a buffer checkpoint to the end of the file */
  if (s == PER_OK) {
    peri_src src = peri_src_of(r.f, NULL, 0);
    s = peri_ckpt_take(&src, &f->buffer, 0, &k, &m);
  }
  sel.rank = 0;
  sel.world = 0;
  sel.by_traj = 0;
  if (s == PER_OK) {
    s = peri_load_stage(&f->buffer, &k, sel, &t, &n, &zero, &m);
    have_tree = s == PER_OK;
  }
  if (s == PER_OK) s = peri_frames_stage_check(f, &st, &k, &m);
  /* the frames into the ring, checked again on the way */
  if (s == PER_OK) {
    uint64_t c;
    r.crc = st.crc_frames;
    r.s = fsetpos(r.f, &frames_at) == 0 ? PER_OK : PER_ERR_IO;
    for (c = st.first; r.s == PER_OK && c < st.next_frame;) {
      uint64_t at = c % f->cfg.frames, run = f->cfg.frames - at;
      if (run > st.next_frame - c) run = st.next_frame - c;
      peri_frames_rd_read(&r, f->ring + (size_t)at * f->cfg.frame_bytes,
                          (size_t)run * f->cfg.frame_bytes);
      c += run;
    }
    if (r.s == PER_OK) {
      uint32_t want = ~r.crc;
      if (peri_frames_rd_u32(&r) != want && r.s == PER_OK)
        r.s = PER_ERR_CHECKSUM;
    }
    if (r.s != PER_OK) {
      peri_frames_forget(f);
      s = r.s;
      peri_msg_s(&m, "the file changed between its two reads");
    }
  }
  fclose(r.f);
  if (s == PER_OK) {
    size_t sb = peri_frames_step_bytes(&f->cfg);
    uint32_t kk = f->cfg.stack;
    peri_load_apply(&f->buffer, &k, sel, &t, n, zero);
    have_tree = 0;
    f->next_frame = st.next_frame;
    f->restarts = st.restarts;
    f->drawable_from = st.drawable_from;
    f->low_head = 0;
    f->low_len = st.low_len;
    for (i = 0; i < st.low_len; ++i) {
      f->low_idx[i] = st.low_idx[i];
      f->low_min[i] = st.low_min[i];
    }
    for (i = 0; i < f->cfg.lanes; ++i) {
      per_nstep *a = &f->adder[i];
      f->live[i] = st.live[i];
      memcpy(f->stack + (size_t)i * kk, st.stack + (size_t)i * kk,
             (size_t)kk * 8u);
      per_nstep_reset(a);
      for (j = 0; j < st.count[i]; ++j) {
        const unsigned char *p = st.pend + ((size_t)i * f->cfg.n + j) * sb;
        uint32_t rb;
        memcpy(a->obs + (size_t)j * a->cfg.obs_size, p, (size_t)kk * 8u);
        memcpy(a->act + (size_t)j * a->cfg.action_size, p + (size_t)kk * 8u,
               a->cfg.action_size);
        rb = peri_get32(p + (size_t)kk * 8u + a->cfg.action_size);
        memcpy(&a->reward[j], &rb, sizeof rb);
      }
      a->count = st.count[i];
    }
  }
  if (have_tree) per_tree_free(&t);
  if (k.mem) PER_FREE(k.mem, f->buffer.alloc_ctx);
  if (st.mem) PER_FREE(st.mem, f->alloc_ctx);
  if (s == PER_OK) f->error[0] = 0;
  else if (!f->error[0]) peri_msg_s(&m, per_status_str(s));
  return s;
}
#endif /* PER_NO_STDIO */

#ifdef __cplusplus
}
#endif

#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic pop
#endif

#endif /* PER_FRAMES_IMPLEMENTATION */
