/* per._per and per._per32: the CPython extension over per.h, compiled
   twice from this one source: per._per with double nodes, per._per32
   (PYPER_F32) with float nodes (PER_REAL float), for the dtype=float32
   classes of per/__init__.py. The two share per.Error (per._per32 takes
   per._per's) and reach each other's buffers through a capsule (the
   "_api" below), so that one NStep or Trajectory adds to a buffer of
   either node type. The types
   here take and fill buffer-protocol objects (NumPy arrays, bytearray,
   memoryview) in place; per/__init__.py allocates and converts the NumPy
   arrays, so this file needs no NumPy header. A per structure is not
   safe for concurrent use: the buffers (ReplayBuffer, FrameBuffer) and
   the trajectory store (_Store, per_store.h) hold a lock of their own in
   every call and release the GIL in the long ones (see NOGIL; the
   store's writer runs beside them, see Store); the other types hold the
   GIL throughout, which keeps two Python threads out of one. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <stdint.h>
#include <string.h>

#ifdef PYPER_F32
#define PER_REAL float
#define PYPER_MODULE "_per32"
#define PYPER_NODES "float"
#else
#define PYPER_MODULE "_per"
#define PYPER_NODES "double"
#endif

/* Private copy: this module's symbols cannot collide with another
   extension that also embeds per.h. */
#define PER_STATIC
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_FRAMES_IMPLEMENTATION
#include "per_frames.h"
#define PER_TRAJ_IMPLEMENTATION
#include "per_traj.h"
#define PER_NET_IMPLEMENTATION
#include "per_net.h"
#if !defined(_WIN32)
/* POSIX only: per_store.h's files and threads (Python.h, first, gives
   the POSIX 2008 declarations it needs). A Windows build of the
   extension has no _Store. */
#define PER_STORE_IMPLEMENTATION
#include "per_store.h"
#endif
#include "shard.h"
#include "pyper_config.h"

static PyObject *per_error; /* per.Error */

/* Bytes of one node value: the element size of the value arrays. */
#define REAL_SIZE ((Py_ssize_t)sizeof(per_real))

/* A Python float as a node value. With float nodes a finite double past
   FLT_MAX becomes +-FLT_MAX (its conversion would be undefined; the tree
   refuses either, PER_ERR_RANGE or PER_ERR_NEGATIVE, as it refuses the
   double), every other value rounds to the nearest float. */
static per_real real_of(double v) {
  if (sizeof(per_real) == sizeof(float)) {
    if (v > FLT_MAX && v <= DBL_MAX) v = FLT_MAX;
    if (v < -FLT_MAX && v >= -DBL_MAX) v = -FLT_MAX;
  }
  return (per_real)v;
}

/* What each module offers the other (the capsule "_api"): its Rng and
   buffer types and the calls NStep and Trajectory make on a buffer, so
   that per._per's adders feed a per._per32 buffer. Neither passes a
   per_real across: the generator, the adder (per_nstep) and the records
   are the same in both modules' builds of per.h (nstep_size checks the
   adder's). */
#define PYPER_API_VERSION 1u
struct pyper_api {
  unsigned version;
  size_t nstep_size; /* sizeof(per_nstep) */
  PyTypeObject *rng_type;
  PyTypeObject *buf_type;
  per_rng *(*rng)(PyObject *rng);
  /* the buffer's item_size; -1 with an exception when it is not ready */
  long long (*item_size)(PyObject *buf);
  /* per_buffer_add_steps under the buffer's lock, the GIL released; on
     an error the buffer's message is copied into why (why_size bytes) */
  per_status (*add_steps)(PyObject *buf, const void *steps, uint32_t n,
                          const uint8_t *ends, char *why, size_t why_size);
  /* per_nstep_step(a, buffer, ...) likewise (a: this build's per_nstep) */
  per_status (*nstep_step)(PyObject *buf, void *a, const void *obs,
                           const void *action, float reward,
                           const void *next_obs, int terminated, int truncated);
};

/* The enum's names, from the same list as the enum. */
#define PYPER_NAME(name, msg) #name,
static const char *const status_names[] = {PER_STATUS_LIST(PYPER_NAME)};
#undef PYPER_NAME

static const char *status_name(per_status s) {
  return (unsigned)s < (unsigned)PER_STATUS_COUNT ? status_names[s]
                                                  : "PER_ERR_UNKNOWN";
}

/* Raise per.Error for status s: message "NAME: what (where)", what being
   `why` when not NULL or "" (a per_buffer's error, which names the
   argument or field), else the status's message; attributes status (the
   int) and name. Returns NULL for `return raise(...)`. */
static PyObject *raise_why(per_status s, const char *where, const char *why) {
  PyObject *msg, *exc, *code, *name;
  msg = PyUnicode_FromFormat("%s: %s (%s)", status_name(s),
                             why && why[0] ? why : per_status_str(s), where);
  if (!msg) return NULL;
  exc = PyObject_CallOneArg(per_error, msg);
  Py_DECREF(msg);
  if (!exc) return NULL;
  code = PyLong_FromLong((long)s);
  name = PyUnicode_FromString(status_name(s));
  if (!code || !name || PyObject_SetAttrString(exc, "status", code) < 0 ||
      PyObject_SetAttrString(exc, "name", name) < 0) {
    Py_XDECREF(code);
    Py_XDECREF(name);
    Py_DECREF(exc);
    return NULL;
  }
  Py_DECREF(code);
  Py_DECREF(name);
  PyErr_SetObject(per_error, exc);
  Py_DECREF(exc);
  return NULL;
}

static PyObject *raise_status(per_status s, const char *where) {
  return raise_why(s, where, NULL);
}

#define CHECK(call, where)                              \
  do {                                                  \
    per_status s_ = (call);                             \
    if (s_ != PER_OK) return raise_status(s_, (where)); \
  } while (0)

/* CHECK for a per_buffer call: the message is b's error. */
#define CHECK_BUF(b, call, where)                                \
  do {                                                           \
    per_status s_ = (call);                                      \
    if (s_ != PER_OK) return raise_why(s_, (where), (b)->error); \
  } while (0)

/* Threads. A ReplayBuffer or FrameBuffer may be shared by Python threads:
   every call on one holds its lock, and the calls that can take long
   (adds, samples, updates, saves, loads, checks) release the GIL while
   they run, so other threads go on meanwhile (on other buffers, or in
   Python). Short reads take the lock with the GIL held, waiting for it
   without the GIL. NOGIL: stmt with the lock held, the GIL released;
   NOGIL_WHY: also, when it set s to an error, the structure's message
   (msg) copied into why before the lock is let go; CHECK_WHY raises it. */
#define NOGIL(lock, ...)                                             \
  do {                                                               \
    Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock((lock), WAIT_LOCK); \
    __VA_ARGS__;                                                     \
    PyThread_release_lock((lock));                                   \
    Py_END_ALLOW_THREADS                                             \
  } while (0)
#define NOGIL_WHY(lock, msg, why, ...) \
  NOGIL(lock, __VA_ARGS__; if (s != PER_OK) memcpy((why), (msg), sizeof(why)))
#define CHECK_WHY(s, why, where)                              \
  do {                                                        \
    if ((s) != PER_OK) return raise_why((s), (where), (why)); \
  } while (0)

static void lock_wait(PyThread_type_lock l) {
  if (!PyThread_acquire_lock(l, NOWAIT_LOCK)) {
    Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(l, WAIT_LOCK);
    Py_END_ALLOW_THREADS
  }
}
#define LOCKED(lock, ...)        \
  do {                           \
    lock_wait(lock);             \
    __VA_ARGS__;                 \
    PyThread_release_lock(lock); \
  } while (0)

/* ---------------------------------------------------------------------
   Arrays through the buffer protocol
   --------------------------------------------------------------------- */

/* A buffer's format (struct module syntax, NULL meaning "B") without
   its byte-order prefix when that order is the native one: '@', '=', '<'
   on a little-endian host, '>' or '!' on a big-endian one. Any other
   prefix stays, so the format matches no native type. */
static const char *native_format(const char *f) {
  if (!f) return "B";
  if (*f == '@' || *f == '=' || *f == (PY_BIG_ENDIAN ? '>' : '<') ||
      (PY_BIG_ENDIAN && *f == '!'))
    f++;
  return f;
}

/* A C-contiguous buffer of elements of `kind` ('u' unsigned integer, 'f'
   floating point, 0 any bytes) and `size` bytes each, in native byte
   order. On success *n is the element count (bytes / size). Sets a
   TypeError or ValueError and returns -1 otherwise (view released). */
static int get_array(PyObject *obj, int writable, char kind, Py_ssize_t size,
                     const char *what, Py_buffer *view, Py_ssize_t *n) {
  int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0) |
              (kind ? PyBUF_FORMAT : 0);
  if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
  if (kind) {
    const char *f = native_format(view->format);
    char c;
    int ok;
    c = f[0];
    ok = f[1] == 0 && view->itemsize == size;
    if (kind == 'u') ok = ok && strchr("BHILQN", c) && c != 0;
    else ok = ok && (c == 'f' || c == 'd');
    if (!ok) {
      PyErr_Format(PyExc_TypeError,
                   "%s: expected a C-contiguous array of %s%d-bit values, "
                   "got format '%s' with %zd-byte elements",
                   what, kind == 'u' ? "unsigned " : "float ", (int)(size * 8),
                   view->format ? view->format : "B", view->itemsize);
      PyBuffer_Release(view);
      return -1;
    }
  }
  if (view->len % size != 0) {
    PyErr_Format(PyExc_ValueError,
                 "%s: %zd bytes is not a whole number of "
                 "%zd-byte elements",
                 what, view->len, size);
    PyBuffer_Release(view);
    return -1;
  }
  *n = view->len / size;
  return 0;
}

/* n must fit in a uint32_t count. */
static int count32(Py_ssize_t n, const char *what) {
  if ((uint64_t)n > UINT32_MAX) {
    PyErr_Format(PyExc_ValueError, "%s: %zd elements, at most 2^32 - 1", what,
                 n);
    return -1;
  }
  return 0;
}

/* An update's arguments: ids (uint64) and td (float32) arrays, per_id td
   values an id (a sequence's seq_len), fewer than 2^32 ids, held in iv
   and tv, their count in *n. -1 with ValueError or TypeError (nothing
   held). */
static int get_ids_td(PyObject *io, PyObject *to, Py_ssize_t per_id,
                      Py_buffer *iv, Py_buffer *tv, uint32_t *n) {
  Py_ssize_t ni, nt;
  if (get_array(io, 0, 'u', 8, "ids", iv, &ni) < 0) return -1;
  if (get_array(to, 0, 'f', 4, "td", tv, &nt) < 0) {
    PyBuffer_Release(iv);
    return -1;
  }
  if (nt != ni * per_id || count32(ni, "ids") < 0) {
    PyBuffer_Release(iv);
    PyBuffer_Release(tv);
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_ValueError, "%zd ids need %zd td values, got %zd", ni,
                   ni * per_id, nt);
    return -1;
  }
  *n = (uint32_t)ni;
  return 0;
}

static int to_u32(PyObject *o, uint32_t *out, const char *what) {
  uint64_t v;
  if (pyper_uint(o, 32, &v, what) < 0) return -1;
  *out = (uint32_t)v;
  return 0;
}

/* An unsigned integer argument for PyArg_Parse's O& with conv_u32 or
   conv_u64: `what` ("Call: name") is set before the parse and names the
   argument in its errors; v holds the value after. */
typedef struct {
  const char *what;
  uint64_t v;
} uint_arg;

static int conv_u32(PyObject *o, void *p) {
  uint_arg *a = (uint_arg *)p;
  return pyper_uint(o, 32, &a->v, a->what) == 0;
}
static int conv_u64(PyObject *o, void *p) {
  uint_arg *a = (uint_arg *)p;
  return pyper_uint(o, 64, &a->v, a->what) == 0;
}

/* 1 when an object's init succeeded; else a RuntimeError (a subclass
   whose __init__ did not call the base's) and 0. */
static int is_ready(int ready, const char *type) {
  if (!ready) PyErr_Format(PyExc_RuntimeError, "%s not initialised", type);
  return ready;
}

/* The type object of a type with NAME_init, NAME_dealloc, NAME_methods
   and NAME_getset, subclassed in per/__init__.py. */
#define STRUCT_TYPE(NAME, OBJ, PYNAME)                                         \
  static PyTypeObject NAME##Type = {                                           \
      PyVarObject_HEAD_INIT(NULL, 0).tp_name = "per." PYPER_MODULE "." PYNAME, \
      .tp_basicsize = sizeof(OBJ),                                             \
      .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,                    \
      .tp_new = PyType_GenericNew,                                             \
      .tp_init = (initproc)NAME##_init,                                        \
      .tp_dealloc = (destructor)NAME##_dealloc,                                \
      .tp_methods = NAME##_methods,                                            \
      .tp_getset = NAME##_getset}

/* The __init__ and dealloc of a type whose per structure (field F of
   object type OBJ) is made from one count (capacity or max_k) by
   INIT(&F, count, NULL) and released by FREE(&F). A second __init__
   releases the first one's structure; `ready` is 1 only after a
   successful init. */
#define COUNT_TYPE(NAME, OBJ, F, INIT, FREE, LABEL, KW)                       \
  static void NAME##_dealloc(OBJ *self) {                                     \
    FREE(&self->F);                                                           \
    Py_TYPE(self)->tp_free((PyObject *)self);                                 \
  }                                                                           \
  static int NAME##_init(OBJ *self, PyObject *args, PyObject *kw) {           \
    static char *kwlist[] = {KW, NULL};                                       \
    uint_arg n = {LABEL ": " KW, 0};                                          \
    per_status s;                                                             \
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&:" LABEL, kwlist, conv_u32, \
                                     &n))                                     \
      return -1;                                                              \
    FREE(&self->F);                                                           \
    self->ready = 0;                                                          \
    if ((s = INIT(&self->F, (uint32_t)n.v, NULL)) != PER_OK) {                \
      raise_status(s, LABEL);                                                 \
      return -1;                                                              \
    }                                                                         \
    self->ready = 1;                                                          \
    return 0;                                                                 \
  }

/* ---------------------------------------------------------------------
   Rng: a per_rng stream
   --------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD per_rng r;
} RngObject;

static int Rng_init(RngObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"seed", NULL};
  uint_arg seed = {"Rng: seed", 0};
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O&:Rng", kwlist, conv_u64,
                                   &seed))
    return -1;
  per_rng_init(&self->r, seed.v);
  return 0;
}

static PyObject *Rng_u32(RngObject *self, PyObject *unused) {
  (void)unused;
  return PyLong_FromUnsignedLong(per_rng_u32(&self->r));
}

static PyObject *Rng_below(RngObject *self, PyObject *arg) {
  uint32_t n;
  if (to_u32(arg, &n, "Rng.below: n") < 0) return NULL;
  if (n == 0) {
    PyErr_SetString(PyExc_ValueError, "Rng.below: n must be >= 1");
    return NULL;
  }
  return PyLong_FromUnsignedLong(per_rng_below(&self->r, n));
}

static PyObject *Rng_random(RngObject *self, PyObject *unused) {
  (void)unused;
  return PyFloat_FromDouble(per_rng_double(&self->r));
}

static PyObject *Rng_get_seed(RngObject *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(self->r.seed);
}
static PyObject *Rng_get_counter(RngObject *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(self->r.counter);
}
static PyObject *Rng_get_state(RngObject *self, void *c) {
  (void)c;
  return PyBytes_FromStringAndSize((const char *)&self->r, sizeof self->r);
}
static int Rng_set_state(RngObject *self, PyObject *v, void *c) {
  Py_buffer view;
  Py_ssize_t n;
  per_rng r;
  (void)c;
  if (!v) {
    PyErr_SetString(PyExc_TypeError, "state cannot be deleted");
    return -1;
  }
  if (get_array(v, 0, 0, 1, "state", &view, &n) < 0) return -1;
  if (n != (Py_ssize_t)sizeof r) {
    PyBuffer_Release(&view);
    PyErr_Format(PyExc_ValueError, "state: %zd bytes, expected %zd", n,
                 (Py_ssize_t)sizeof r);
    return -1;
  }
  memcpy(&r, view.buf, sizeof r);
  PyBuffer_Release(&view);
  if (r.avail > 4 || r.pad != 0) {
    PyErr_SetString(PyExc_ValueError, "state: not an Rng state");
    return -1;
  }
  self->r = r;
  return 0;
}

static PyMethodDef Rng_methods[] = {
    {"u32", (PyCFunction)Rng_u32, METH_NOARGS,
     "u32() -> int: the stream's next 32-bit word."},
    {"below", (PyCFunction)Rng_below, METH_O,
     "below(n) -> int: uniform in [0, n), n >= 1 (one word, Lemire)."},
    {"random", (PyCFunction)Rng_random, METH_NOARGS,
     "random() -> float: uniform in [0, 1) from two words (53 bits)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Rng_getset[] = {
    {"seed", (getter)Rng_get_seed, NULL, "the stream's key", NULL},
    {"counter", (getter)Rng_get_counter, NULL, "next Philox block", NULL},
    {"state", (getter)Rng_get_state, (setter)Rng_set_state,
     "the whole position (bytes of per_rng): save it and set it back to "
     "replay the stream",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject RngType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "per." PYPER_MODULE ".Rng",
    .tp_basicsize = sizeof(RngObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Rng(seed=0): per's counter-based Philox4x32-10 stream, the "
              "one per_rng_init(seed) starts in C.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Rng_init,
    .tp_methods = Rng_methods,
    .tp_getset = Rng_getset,
};

static const struct pyper_api *other_api(void);

/* A per.Rng's generator: per.Rng is per._per's type; per._per32 takes it
   (and its own, which per/__init__.py never makes) through the _api. */
static per_rng *rng_of(PyObject *o) {
  const struct pyper_api *api;
  if (PyObject_TypeCheck(o, &RngType)) return &((RngObject *)o)->r;
  if (PyErr_Occurred()) return NULL;
  api = other_api();
  if (api && PyObject_TypeCheck(o, api->rng_type)) return api->rng(o);
  if (!PyErr_Occurred())
    PyErr_SetString(PyExc_TypeError, "rng must be a per.Rng");
  return NULL;
}

/* ---------------------------------------------------------------------
   SumTree: a per_tree
   --------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD per_tree t;
  int ready;
} TreeObject;

COUNT_TYPE(Tree, TreeObject, t, per_tree_init, per_tree_free, "SumTree",
           "capacity")

#define tree_ready(o) is_ready((o)->ready, "SumTree")

static PyObject *Tree_set(TreeObject *self, PyObject *args) {
  uint_arg i = {"SumTree.set: i", 0};
  double v;
  if (!tree_ready(self) || !PyArg_ParseTuple(args, "O&d:set", conv_u32, &i, &v))
    return NULL;
  CHECK(per_tree_set(&self->t, (uint32_t)i.v, real_of(v)), "SumTree.set");
  Py_RETURN_NONE;
}

static PyObject *Tree_set_batch(TreeObject *self, PyObject *args) {
  PyObject *io, *vo;
  Py_buffer iv, vv;
  Py_ssize_t ni, nv;
  per_status s;
  if (!tree_ready(self) || !PyArg_ParseTuple(args, "OO:set_batch", &io, &vo))
    return NULL;
  if (get_array(io, 0, 'u', 4, "idx", &iv, &ni) < 0) return NULL;
  if (get_array(vo, 0, 'f', REAL_SIZE, "val", &vv, &nv) < 0) {
    PyBuffer_Release(&iv);
    return NULL;
  }
  if (ni != nv) {
    PyBuffer_Release(&iv);
    PyBuffer_Release(&vv);
    PyErr_Format(PyExc_ValueError, "idx has %zd entries, val %zd", ni, nv);
    return NULL;
  }
  s = per_tree_set_batch(&self->t, (const uint32_t *)iv.buf,
                         (const per_real *)vv.buf, (size_t)ni);
  PyBuffer_Release(&iv);
  PyBuffer_Release(&vv);
  CHECK(s, "SumTree.set_batch");
  Py_RETURN_NONE;
}

static PyObject *Tree_set_range(TreeObject *self, PyObject *args) {
  uint_arg first = {"SumTree.set_range: first", 0};
  PyObject *vo;
  Py_buffer vv;
  Py_ssize_t nv;
  per_status s;
  if (!tree_ready(self) ||
      !PyArg_ParseTuple(args, "O&O:set_range", conv_u32, &first, &vo))
    return NULL;
  if (get_array(vo, 0, 'f', REAL_SIZE, "val", &vv, &nv) < 0) return NULL;
  s = per_tree_set_range(&self->t, (uint32_t)first.v, (const per_real *)vv.buf,
                         (size_t)nv);
  PyBuffer_Release(&vv);
  CHECK(s, "SumTree.set_range");
  Py_RETURN_NONE;
}

static PyObject *Tree_build(TreeObject *self, PyObject *vo) {
  Py_buffer vv;
  Py_ssize_t nv;
  per_status s;
  if (!tree_ready(self)) return NULL;
  if (get_array(vo, 0, 'f', REAL_SIZE, "val", &vv, &nv) < 0) return NULL;
  if (count32(nv, "val") < 0) {
    PyBuffer_Release(&vv);
    return NULL;
  }
  s = per_tree_build(&self->t, (const per_real *)vv.buf, (uint32_t)nv);
  PyBuffer_Release(&vv);
  CHECK(s, "SumTree.build");
  Py_RETURN_NONE;
}

static PyObject *Tree_get(TreeObject *self, PyObject *arg) {
  uint32_t i;
  if (!tree_ready(self) || to_u32(arg, &i, "SumTree.get: i") < 0) return NULL;
  if (i >= self->t.capacity) return raise_status(PER_ERR_INDEX, "SumTree.get");
  return PyFloat_FromDouble(per_tree_get(&self->t, i));
}

/* get_into(idx, out): out[j] = leaf idx[j]; validated first. */
static PyObject *Tree_get_into(TreeObject *self, PyObject *args) {
  PyObject *io, *oo;
  Py_buffer iv, ov;
  Py_ssize_t ni, no, j;
  const uint32_t *idx;
  per_real *out;
  if (!tree_ready(self) || !PyArg_ParseTuple(args, "OO:get_into", &io, &oo))
    return NULL;
  if (get_array(io, 0, 'u', 4, "idx", &iv, &ni) < 0) return NULL;
  if (get_array(oo, 1, 'f', REAL_SIZE, "out", &ov, &no) < 0) {
    PyBuffer_Release(&iv);
    return NULL;
  }
  idx = (const uint32_t *)iv.buf;
  out = (per_real *)ov.buf;
  for (j = 0; j < ni; j++)
    if (idx[j] >= self->t.capacity) break;
  if (ni != no || j < ni) {
    PyBuffer_Release(&iv);
    PyBuffer_Release(&ov);
    if (ni != no) {
      PyErr_Format(PyExc_ValueError, "idx has %zd entries, out %zd", ni, no);
      return NULL;
    }
    return raise_status(PER_ERR_INDEX, "SumTree.get");
  }
  for (j = 0; j < ni; j++) out[j] = per_tree_get(&self->t, idx[j]);
  PyBuffer_Release(&iv);
  PyBuffer_Release(&ov);
  Py_RETURN_NONE;
}

/* nodes_into(out): the whole node array, 2L per_real values. */
static PyObject *Tree_nodes_into(TreeObject *self, PyObject *oo) {
  Py_buffer ov;
  Py_ssize_t no;
  if (!tree_ready(self)) return NULL;
  if (get_array(oo, 1, 'f', REAL_SIZE, "out", &ov, &no) < 0) return NULL;
  if (no != 2 * (Py_ssize_t)self->t.leaves) {
    PyBuffer_Release(&ov);
    PyErr_Format(PyExc_ValueError, "out has %zd entries, the tree %zd", no,
                 2 * (Py_ssize_t)self->t.leaves);
    return NULL;
  }
  memcpy(ov.buf, self->t.node, (size_t)no * sizeof(per_real));
  PyBuffer_Release(&ov);
  Py_RETURN_NONE;
}

static PyObject *Tree_prefix(TreeObject *self, PyObject *arg) {
  uint32_t i;
  if (!tree_ready(self) || to_u32(arg, &i, "SumTree.prefix: i") < 0)
    return NULL;
  return PyFloat_FromDouble(per_tree_prefix(&self->t, i));
}

static PyObject *Tree_find(TreeObject *self, PyObject *arg) {
  double u = PyFloat_AsDouble(arg);
  uint32_t idx;
  if (!tree_ready(self) || (u == -1.0 && PyErr_Occurred())) return NULL;
  CHECK(per_tree_find(&self->t, real_of(u), &idx), "SumTree.find");
  return PyLong_FromUnsignedLong(idx);
}

/* The output pair (idx, val) of the sampling calls: k entries each, val
   may be None. */
static int get_outputs(PyObject *io, PyObject *vo, Py_ssize_t k, Py_buffer *iv,
                       Py_buffer *vv, int *have_val) {
  Py_ssize_t ni, nv = k;
  if (get_array(io, 1, 'u', 4, "idx", iv, &ni) < 0) return -1;
  *have_val = vo != Py_None;
  if (*have_val && get_array(vo, 1, 'f', REAL_SIZE, "val", vv, &nv) < 0) {
    PyBuffer_Release(iv);
    return -1;
  }
  if (ni != k || nv != k) {
    PyBuffer_Release(iv);
    if (*have_val) PyBuffer_Release(vv);
    PyErr_Format(PyExc_ValueError,
                 "outputs hold %zd and %zd entries; the batch is %zd", ni, nv,
                 k);
    return -1;
  }
  return 0;
}

/* _sample(rng, B, idx_out, val_out): per_tree_sample (stratified), or
   per_tree_sample_iid when iid. */
static PyObject *tree_draw(TreeObject *self, PyObject *args, int iid) {
  PyObject *ro, *io, *vo;
  uint_arg B = {iid ? "SumTree.sample_iid: k" : "SumTree.sample: batch_size",
                0};
  uint32_t n;
  Py_buffer iv, vv;
  int hv;
  per_rng *rng;
  per_status s;
  if (!tree_ready(self) ||
      !PyArg_ParseTuple(args, "OO&OO:sample", &ro, conv_u32, &B, &io, &vo))
    return NULL;
  if (!(rng = rng_of(ro))) return NULL;
  n = (uint32_t)B.v;
  if (get_outputs(io, vo, n, &iv, &vv, &hv) < 0) return NULL;
  s = (iid ? per_tree_sample_iid : per_tree_sample)(
      &self->t, rng, n, (uint32_t *)iv.buf, hv ? (per_real *)vv.buf : NULL);
  PyBuffer_Release(&iv);
  if (hv) PyBuffer_Release(&vv);
  CHECK(s, iid ? "SumTree.sample_iid" : "SumTree.sample");
  Py_RETURN_NONE;
}

static PyObject *Tree_sample(TreeObject *self, PyObject *args) {
  return tree_draw(self, args, 0);
}

static PyObject *Tree_sample_iid(TreeObject *self, PyObject *args) {
  return tree_draw(self, args, 1);
}

static PyObject *Tree_check(TreeObject *self, PyObject *unused) {
  (void)unused;
  if (!tree_ready(self)) return NULL;
  CHECK(per_tree_check(&self->t), "SumTree.check");
  Py_RETURN_NONE;
}

static PyObject *Tree_clear(TreeObject *self, PyObject *unused) {
  (void)unused;
  if (!tree_ready(self)) return NULL;
  per_tree_clear(&self->t);
  Py_RETURN_NONE;
}

static PyObject *Tree_get_total(TreeObject *self, void *c) {
  (void)c;
  if (!tree_ready(self)) return NULL;
  return PyFloat_FromDouble(per_tree_total(&self->t));
}
static PyObject *Tree_get_capacity(TreeObject *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLong(self->t.capacity);
}
static PyObject *Tree_get_leaves(TreeObject *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLong(self->t.leaves);
}

static PyMethodDef Tree_methods[] = {
    {"set", (PyCFunction)Tree_set, METH_VARARGS, NULL},
    {"_set_batch", (PyCFunction)Tree_set_batch, METH_VARARGS, NULL},
    {"_set_range", (PyCFunction)Tree_set_range, METH_VARARGS, NULL},
    {"_build", (PyCFunction)Tree_build, METH_O, NULL},
    {"get", (PyCFunction)Tree_get, METH_O, NULL},
    {"_get_into", (PyCFunction)Tree_get_into, METH_VARARGS, NULL},
    {"_nodes_into", (PyCFunction)Tree_nodes_into, METH_O, NULL},
    {"prefix", (PyCFunction)Tree_prefix, METH_O, NULL},
    {"find", (PyCFunction)Tree_find, METH_O, NULL},
    {"_sample", (PyCFunction)Tree_sample, METH_VARARGS, NULL},
    {"_sample_iid", (PyCFunction)Tree_sample_iid, METH_VARARGS, NULL},
    {"check", (PyCFunction)Tree_check, METH_NOARGS, NULL},
    {"clear", (PyCFunction)Tree_clear, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Tree_getset[] = {
    {"total", (getter)Tree_get_total, NULL, NULL, NULL},
    {"capacity", (getter)Tree_get_capacity, NULL, NULL, NULL},
    {"leaves", (getter)Tree_get_leaves, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

STRUCT_TYPE(Tree, TreeObject, "_SumTree");

/* ---------------------------------------------------------------------
   UniformSampler (per_swap) and CategoricalSampler (per_cat)
   --------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD per_swap s;
  int ready;
} SwapObject;

COUNT_TYPE(Swap, SwapObject, s, per_swap_init, per_swap_free, "UniformSampler",
           "capacity")

#define swap_ready(o) is_ready((o)->ready, "UniformSampler")

static PyObject *Swap_grow(SwapObject *self, PyObject *arg) {
  uint32_t n;
  if (!swap_ready(self) || to_u32(arg, &n, "UniformSampler.grow: n") < 0)
    return NULL;
  CHECK(per_swap_grow(&self->s, n), "UniformSampler.grow");
  Py_RETURN_NONE;
}

static PyObject *Swap_sample(SwapObject *self, PyObject *args) {
  PyObject *ro, *oo;
  uint_arg k = {"UniformSampler.sample: k", 0};
  Py_buffer ov;
  Py_ssize_t no;
  per_rng *rng;
  per_status s;
  if (!swap_ready(self) ||
      !PyArg_ParseTuple(args, "OO&O:sample", &ro, conv_u32, &k, &oo))
    return NULL;
  if (!(rng = rng_of(ro))) return NULL;
  if (get_array(oo, 1, 'u', 4, "out", &ov, &no) < 0) return NULL;
  if (no != (Py_ssize_t)k.v) {
    PyBuffer_Release(&ov);
    PyErr_Format(PyExc_ValueError, "out has %zd entries; k is %u", no,
                 (unsigned)k.v);
    return NULL;
  }
  s = per_swap_sample(&self->s, rng, (uint32_t)k.v, (uint32_t *)ov.buf);
  PyBuffer_Release(&ov);
  CHECK(s, "UniformSampler.sample");
  Py_RETURN_NONE;
}

static PyObject *Swap_get_n(SwapObject *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLong(self->s.n);
}
static PyObject *Swap_get_capacity(SwapObject *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLong(self->s.capacity);
}

static PyMethodDef Swap_methods[] = {
    {"grow", (PyCFunction)Swap_grow, METH_O, NULL},
    {"_sample", (PyCFunction)Swap_sample, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Swap_getset[] = {
    {"n", (getter)Swap_get_n, NULL, NULL, NULL},
    {"capacity", (getter)Swap_get_capacity, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

STRUCT_TYPE(Swap, SwapObject, "_UniformSampler");

typedef struct {
  PyObject_HEAD per_cat c;
  int ready;
} CatObject;

COUNT_TYPE(Cat, CatObject, c, per_cat_init, per_cat_free, "CategoricalSampler",
           "max_k")

static PyObject *Cat_sample(CatObject *self, PyObject *args) {
  PyObject *to, *ro, *io, *vo;
  uint_arg k = {"CategoricalSampler.sample: k", 0};
  Py_buffer iv, vv;
  int hv;
  per_rng *rng;
  TreeObject *tree;
  per_status s;
  if (!is_ready(self->ready, "CategoricalSampler")) return NULL;
  if (!PyArg_ParseTuple(args, "O!OO&OO:sample", &TreeType, &to, &ro, conv_u32,
                        &k, &io, &vo))
    return NULL;
  tree = (TreeObject *)to;
  if (!tree_ready(tree) || !(rng = rng_of(ro))) return NULL;
  if (get_outputs(io, vo, (Py_ssize_t)k.v, &iv, &vv, &hv) < 0) return NULL;
  s = per_cat_sample(&self->c, &tree->t, rng, (uint32_t)k.v, (uint32_t *)iv.buf,
                     hv ? (per_real *)vv.buf : NULL);
  PyBuffer_Release(&iv);
  if (hv) PyBuffer_Release(&vv);
  CHECK(s, "CategoricalSampler.sample");
  Py_RETURN_NONE;
}

static PyObject *Cat_get_max_k(CatObject *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLong(self->c.max_k);
}

static PyMethodDef Cat_methods[] = {
    {"_sample", (PyCFunction)Cat_sample, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Cat_getset[] = {
    {"max_k", (getter)Cat_get_max_k, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

STRUCT_TYPE(Cat, CatObject, "_CategoricalSampler");

/* ---------------------------------------------------------------------
   Buffer: a per_buffer. Exports its item ring (read only) through the
   buffer protocol, so per/__init__.py can view the stored items without
   a copy.
   --------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD per_buffer b;
  int ready;
  Py_ssize_t exports;      /* views of the ring handed out and not released */
  PyThread_type_lock lock; /* held by every call on b (see NOGIL) */
} BufObject;

static void Buf_dealloc(BufObject *self) {
  per_buffer_free(&self->b);
  if (self->lock) PyThread_free_lock(self->lock);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Buffer(config): config a dict of per_config's fields, absent ones
   per_config_default's (pyper_config.h; per/config.py makes it). */
static int Buf_init(BufObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"config", NULL};
  PyObject *d;
  per_config c;
  per_status s;
  if (self->exports > 0) {
    PyErr_SetString(PyExc_BufferError, "Buffer has exported views");
    return -1;
  }
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!:Buffer", kwlist, &PyDict_Type,
                                   &d) ||
      pyper_config(d, "ReplayBuffer", &c) < 0)
    return -1;
  if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
    PyErr_NoMemory();
    return -1;
  }
  LOCKED(self->lock, per_buffer_free(&self->b); self->ready = 0;
         s = per_buffer_init(&self->b, &c, NULL));
  if (s != PER_OK) {
    raise_why(s, "ReplayBuffer", self->b.error);
    return -1;
  }
  self->ready = 1;
  return 0;
}

#define buf_ready(o) is_ready((o)->ready, "ReplayBuffer")

/* _add(items, ends, td=None): n = len(items) / item_size items as one
   trajectory, ends None or n bytes (per_buffer_add_steps), td None or n
   float32 (per_buffer_add_td). */
static PyObject *Buf_add(BufObject *self, PyObject *args) {
  char why[sizeof self->b.error];
  PyObject *io, *eo, *to = Py_None;
  Py_buffer iv, ev, tv;
  Py_ssize_t bytes, ne, nt;
  int have_ends, have_td;
  uint32_t n;
  per_status s;
  if (!buf_ready(self) || !PyArg_ParseTuple(args, "OO|O:add", &io, &eo, &to))
    return NULL;
  if (get_array(io, 0, 0, 1, "items", &iv, &bytes) < 0) return NULL;
  if (bytes % self->b.cfg.item_size != 0 ||
      count32(bytes / self->b.cfg.item_size, "items") < 0) {
    PyBuffer_Release(&iv);
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_ValueError,
                   "items: %zd bytes is not a whole number of %u-byte items",
                   bytes, (unsigned)self->b.cfg.item_size);
    return NULL;
  }
  n = (uint32_t)(bytes / self->b.cfg.item_size);
  have_ends = eo != Py_None;
  if (have_ends) {
    if (get_array(eo, 0, 'u', 1, "ends", &ev, &ne) < 0) {
      PyBuffer_Release(&iv);
      return NULL;
    }
    if (ne != (Py_ssize_t)n) {
      PyBuffer_Release(&iv);
      PyBuffer_Release(&ev);
      PyErr_Format(PyExc_ValueError, "%u items but %zd ends", (unsigned)n, ne);
      return NULL;
    }
  }
  have_td = to != Py_None;
  if (have_td) {
    if (get_array(to, 0, 'f', 4, "td", &tv, &nt) < 0) {
      PyBuffer_Release(&iv);
      if (have_ends) PyBuffer_Release(&ev);
      return NULL;
    }
    if (nt != (Py_ssize_t)n) {
      PyBuffer_Release(&iv);
      if (have_ends) PyBuffer_Release(&ev);
      PyBuffer_Release(&tv);
      PyErr_Format(PyExc_ValueError, "%u items but %zd td", (unsigned)n, nt);
      return NULL;
    }
  }
  NOGIL_WHY(self->lock, self->b.error, why,
            s = have_td ? per_buffer_add_td(&self->b, iv.buf, n,
                                            have_ends ? (const uint8_t *)ev.buf
                                                      : NULL,
                                            (const float *)tv.buf)
                        : per_buffer_add_steps(
                              &self->b, iv.buf, n,
                              have_ends ? (const uint8_t *)ev.buf : NULL));
  PyBuffer_Release(&iv);
  if (have_ends) PyBuffer_Release(&ev);
  if (have_td) PyBuffer_Release(&tv);
  CHECK_WHY(s, why, "ReplayBuffer.add");
  Py_RETURN_NONE;
}

/* _sample(B, flags, beta, window, items_out, ids_out, weights_out,
   mask_out): per_buffer_sample; every output may be None. */
static PyObject *Buf_sample(BufObject *self, PyObject *args) {
  char why[sizeof self->b.error];
  uint_arg Ba = {"ReplayBuffer.sample: batch_size", 0},
           flags = {"ReplayBuffer.sample: flags", 0},
           window = {"ReplayBuffer.sample: window", 0};
  uint32_t B;
  double beta;
  PyObject *o[4];
  Py_buffer v[4];
  int have[4] = {0, 0, 0, 0}, j;
  Py_ssize_t n[4], want[4];
  uint32_t L;
  per_sample_opts opts;
  per_status s;
  static const char *what[4] = {"items_out", "ids_out", "weights_out",
                                "mask_out"};
  static const char kinds[4] = {0, 'u', 'f', 'u'};
  static const Py_ssize_t sizes[4] = {1, 8, 4, 1};
  if (!buf_ready(self) ||
      !PyArg_ParseTuple(args, "O&O&dO&OOOO:sample", conv_u32, &Ba, conv_u32,
                        &flags, &beta, conv_u32, &window, &o[0], &o[1], &o[2],
                        &o[3]))
    return NULL;
  B = (uint32_t)Ba.v;
  L = (flags.v & PER_SAMPLE_SEQUENCES) && self->b.cfg.seq_len
          ? self->b.cfg.seq_len
          : 1;
  want[0] = (Py_ssize_t)B * L * (Py_ssize_t)self->b.cfg.item_size;
  want[1] = B;
  want[2] = B;
  want[3] = (Py_ssize_t)B * L;
  for (j = 0; j < 4; j++) {
    if (o[j] == Py_None) continue;
    if (get_array(o[j], 1, kinds[j], sizes[j], what[j], &v[j], &n[j]) < 0)
      goto fail;
    have[j] = 1;
    if (n[j] != want[j]) {
      PyErr_Format(PyExc_ValueError, "%s holds %zd elements, needs %zd",
                   what[j], n[j], want[j]);
      goto fail;
    }
  }
  memset(&opts, 0, sizeof opts);
  opts.flags = (uint32_t)flags.v;
  opts.beta = beta;
  opts.window = (uint32_t)window.v;
  opts.mask = have[3] ? (uint8_t *)v[3].buf : NULL;
  NOGIL_WHY(self->lock, self->b.error, why,
            s = per_buffer_sample(&self->b, B, &opts, have[0] ? v[0].buf : NULL,
                                  have[1] ? (uint64_t *)v[1].buf : NULL,
                                  have[2] ? (float *)v[2].buf : NULL));
  for (j = 0; j < 4; j++)
    if (have[j]) PyBuffer_Release(&v[j]);
  CHECK_WHY(s, why, "ReplayBuffer.sample");
  Py_RETURN_NONE;
fail:
  for (j = 0; j < 4; j++)
    if (have[j]) PyBuffer_Release(&v[j]);
  return NULL;
}

/* _update(ids, td, seq): per_buffer_update (or _seq); returns the stale
   count. */
static PyObject *Buf_update(BufObject *self, PyObject *args) {
  char why[sizeof self->b.error];
  PyObject *io, *to;
  int seq;
  Py_buffer iv, tv;
  uint32_t ni, stale = 0;
  per_status s;
  if (!buf_ready(self) || !PyArg_ParseTuple(args, "OOp:update", &io, &to, &seq))
    return NULL;
  if (get_ids_td(io, to,
                 seq && self->b.cfg.seq_len ? (Py_ssize_t)self->b.cfg.seq_len
                                            : 1,
                 &iv, &tv, &ni) < 0)
    return NULL;
  NOGIL_WHY(self->lock, self->b.error, why,
            s = seq ? per_buffer_update_seq(&self->b, (const uint64_t *)iv.buf,
                                            (const float *)tv.buf, ni, &stale)
                    : per_buffer_update(&self->b, (const uint64_t *)iv.buf,
                                        (const float *)tv.buf, ni, &stale));
  PyBuffer_Release(&iv);
  PyBuffer_Release(&tv);
  CHECK_WHY(s, why,
            seq ? "ReplayBuffer.update_sequences" : "ReplayBuffer.update");
  return PyLong_FromUnsignedLong(stale);
}

static PyObject *Buf_save(BufObject *self, PyObject *arg) {
  PyObject *bytes;
  per_status s;
  if (!buf_ready(self) || !PyUnicode_FSConverter(arg, &bytes)) return NULL;
  NOGIL(self->lock, s = per_buffer_save(&self->b, PyBytes_AS_STRING(bytes)));
  Py_DECREF(bytes);
  CHECK(s, "ReplayBuffer.save");
  Py_RETURN_NONE;
}

static PyObject *Buf_load(BufObject *self, PyObject *arg) {
  char why[sizeof self->b.error];
  PyObject *bytes;
  per_status s;
  if (!buf_ready(self) || !PyUnicode_FSConverter(arg, &bytes)) return NULL;
  NOGIL_WHY(self->lock, self->b.error, why,
            s = per_buffer_load(&self->b, PyBytes_AS_STRING(bytes)));
  Py_DECREF(bytes);
  CHECK_WHY(s, why, "ReplayBuffer.load");
  Py_RETURN_NONE;
}

static PyObject *Buf_set_layout(BufObject *self, PyObject *arg) {
  const char *text;
  if (!buf_ready(self) || !(text = PyUnicode_AsUTF8(arg))) return NULL;
  {
    per_status s;
    char why[sizeof self->b.error];
    LOCKED(self->lock, s = per_buffer_set_layout(&self->b, text);
           memcpy(why, self->b.error, sizeof why));
    CHECK_WHY(s, why, "ReplayBuffer.layout");
  }
  Py_RETURN_NONE;
}

static PyObject *Buf_layout(BufObject *self, void *c) {
  char text[PER_LAYOUT_MAX];
  (void)c;
  if (!buf_ready(self)) return NULL;
  LOCKED(self->lock, memcpy(text, self->b.layout, sizeof text));
  return PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
}

static PyObject *Buf_load_shard(BufObject *self, PyObject *args) {
  char why[sizeof self->b.error];
  PyObject *bytes;
  uint_arg rank = {"ReplayBuffer.load_shard: rank", 0},
           world = {"ReplayBuffer.load_shard: world", 0};
  per_status s;
  if (!buf_ready(self) ||
      !PyArg_ParseTuple(args, "O&O&O&:load_shard", PyUnicode_FSConverter,
                        &bytes, conv_u32, &rank, conv_u32, &world))
    return NULL;
  NOGIL_WHY(self->lock, self->b.error, why,
            s = per_buffer_load_shard(&self->b, PyBytes_AS_STRING(bytes),
                                      (uint32_t)rank.v, (uint32_t)world.v));
  Py_DECREF(bytes);
  CHECK_WHY(s, why, "ReplayBuffer.load_shard");
  Py_RETURN_NONE;
}

static PyObject *Buf_check(BufObject *self, PyObject *unused) {
  (void)unused;
  if (!buf_ready(self)) return NULL;
  {
    per_status s;
    NOGIL(self->lock, s = per_buffer_check(&self->b));
    CHECK(s, "ReplayBuffer.check");
  }
  Py_RETURN_NONE;
}

/* _leaves_into(out, seq): the leaves of the item tree (capacity per_real
   values) or of the sequence tree (capacity / seq_stride). */
static PyObject *Buf_leaves_into(BufObject *self, PyObject *args) {
  PyObject *oo;
  int seq;
  Py_buffer ov;
  Py_ssize_t no;
  const per_tree *t;
  if (!buf_ready(self) || !PyArg_ParseTuple(args, "Op:leaves", &oo, &seq))
    return NULL;
  t = seq ? &self->b.seq_tree : &self->b.tree;
  if (get_array(oo, 1, 'f', REAL_SIZE, "out", &ov, &no) < 0) return NULL;
  if (no != (Py_ssize_t)t->capacity) {
    PyBuffer_Release(&ov);
    PyErr_Format(PyExc_ValueError, "out has %zd entries, the tree %u", no,
                 (unsigned)t->capacity);
    return NULL;
  }
  if (no)
    NOGIL(self->lock,
          memcpy(ov.buf, t->node + t->leaves, (size_t)no * sizeof(per_real)));
  PyBuffer_Release(&ov);
  Py_RETURN_NONE;
}

/* _snapshot(crc) -> bytes: the checkpoint's bytes (per_buffer_snapshot),
   with their CRC filled in when crc is true (what per_buffer_save would
   write: for pickling) or left 0 (for snapshot_write, which computes it).
   Only the copy holds the buffer's lock; the GIL is released throughout. */
static PyObject *Buf_snapshot(BufObject *self, PyObject *arg) {
  size_t cap, len = 0;
  PyObject *out;
  unsigned char *mem;
  int crc;
  per_status s;
  if (!buf_ready(self) || (crc = PyObject_IsTrue(arg)) < 0) return NULL;
  LOCKED(self->lock, cap = per_buffer_snapshot_bytes(&self->b));
  if (cap == 0 || cap > (size_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
  out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)cap);
  if (!out) return NULL;
  mem = (unsigned char *)PyBytes_AS_STRING(out);
  NOGIL(self->lock, s = per_buffer_snapshot(&self->b, mem, cap, &len));
  if (s != PER_OK) {
    Py_DECREF(out);
    return raise_status(s, "ReplayBuffer.snapshot");
  }
  if (crc) {
    Py_BEGIN_ALLOW_THREADS peri_put32(mem + len - 4,
                                      per_crc32c(0, mem, len - 4));
    Py_END_ALLOW_THREADS
  }
  if (_PyBytes_Resize(&out, (Py_ssize_t)len) < 0) return NULL;
  return out;
}

/* _load_mem(data): per_buffer_load_mem. */
static PyObject *Buf_load_mem(BufObject *self, PyObject *arg) {
  char why[sizeof self->b.error];
  Py_buffer v;
  Py_ssize_t n;
  per_status s;
  if (!buf_ready(self)) return NULL;
  if (self->exports > 0) {
    PyErr_SetString(PyExc_BufferError, "ReplayBuffer has exported views");
    return NULL;
  }
  if (get_array(arg, 0, 0, 1, "data", &v, &n) < 0) return NULL;
  NOGIL_WHY(self->lock, self->b.error, why,
            s = per_buffer_load_mem(&self->b, v.buf, (size_t)n));
  PyBuffer_Release(&v);
  CHECK_WHY(s, why, "ReplayBuffer.load");
  Py_RETURN_NONE;
}

/* _clear(): the buffer as per_buffer_init makes it from its config, its
   layout kept. */
static PyObject *Buf_clear(BufObject *self, PyObject *unused) {
  per_config c;
  char layout[PER_LAYOUT_MAX];
  per_buffer fresh;
  per_status s;
  (void)unused;
  if (!buf_ready(self)) return NULL;
  if (self->exports > 0) {
    PyErr_SetString(PyExc_BufferError, "ReplayBuffer has exported views");
    return NULL;
  }
  c = self->b.cfg; /* fixed for the buffer's life */
  /* the new one first: on failure the old one stays */
  s = per_buffer_init(&fresh, &c, NULL);
  if (s != PER_OK) return raise_why(s, "ReplayBuffer.clear", fresh.error);
  LOCKED(self->lock, memcpy(layout, self->b.layout, sizeof layout);
         per_buffer_set_layout(&fresh, layout); per_buffer_free(&self->b);
         self->b = fresh);
  Py_RETURN_NONE;
}

/* _ends_into(ids, seq, ends_out, traj_out): the episode end and the
   trajectory id (low 32 bits) of each drawn item, or of each step of
   each drawn sequence (seq). */
static PyObject *Buf_ends_into(BufObject *self, PyObject *args) {
  PyObject *io, *eo, *to;
  int seq;
  Py_buffer iv, ev, tv;
  Py_ssize_t ni, ne, nt, j, L;
  uint32_t cap;
  if (!buf_ready(self) ||
      !PyArg_ParseTuple(args, "OpOO:ends_into", &io, &seq, &eo, &to))
    return NULL;
  if (get_array(io, 0, 'u', 8, "ids", &iv, &ni) < 0) return NULL;
  if (get_array(eo, 1, 'u', 1, "ends_out", &ev, &ne) < 0) {
    PyBuffer_Release(&iv);
    return NULL;
  }
  if (get_array(to, 1, 'u', 4, "traj_out", &tv, &nt) < 0) {
    PyBuffer_Release(&iv);
    PyBuffer_Release(&ev);
    return NULL;
  }
  L = seq && self->b.cfg.seq_len ? self->b.cfg.seq_len : 1;
  cap = self->b.cfg.capacity;
  if (ne != ni * L || nt != ni * L) {
    PyBuffer_Release(&iv);
    PyBuffer_Release(&ev);
    PyBuffer_Release(&tv);
    PyErr_Format(PyExc_ValueError, "%zd ids need %zd outputs", ni, ni * L);
    return NULL;
  }
  lock_wait(self->lock);
  for (j = 0; j < ni; ++j) {
    uint32_t slot = per_id_slot(((const uint64_t *)iv.buf)[j]);
    Py_ssize_t k;
    for (k = 0; k < L; ++k) {
      uint32_t at = slot < cap ? (uint32_t)((slot + (uint64_t)k) % cap) : 0;
      ((uint8_t *)ev.buf)[j * L + k] = self->b.ends[at];
      ((uint32_t *)tv.buf)[j * L + k] = self->b.traj[at];
    }
  }
  PyThread_release_lock(self->lock);
  PyBuffer_Release(&iv);
  PyBuffer_Release(&ev);
  PyBuffer_Release(&tv);
  Py_RETURN_NONE;
}

static PyObject *Buf_beta(BufObject *self, void *c) {
  double beta;
  (void)c;
  if (!buf_ready(self)) return NULL;
  LOCKED(self->lock, beta = per_buffer_beta(&self->b));
  return PyFloat_FromDouble(beta);
}

static PyObject *Buf_counters(BufObject *self, void *c) {
  per_buffer b; /* the counters, read under the lock */
  double total = 0;
  (void)c;
  if (!buf_ready(self)) return NULL;
  LOCKED(self->lock, b = self->b;
         total = (double)per_tree_total(&self->b.tree));
  return Py_BuildValue("{s:I,s:I,s:K,s:K,s:K,s:d,s:d}", "size", b.size, "pos",
                       b.pos, "added", (unsigned long long)b.added,
                       "trajectories", (unsigned long long)b.trajs, "step",
                       (unsigned long long)b.step, "max_leaf",
                       (double)b.max_leaf, "total", total);
}

static PyObject *Buf_size(BufObject *self, void *c) {
  uint32_t n = 0;
  (void)c;
  if (self->lock) LOCKED(self->lock, n = per_buffer_size(&self->b));
  return PyLong_FromUnsignedLong(n);
}

static PyObject *Buf_config(BufObject *self, void *c) {
  (void)c;
  if (!buf_ready(self)) return NULL;
  return pyper_config_dict(&self->b.cfg);
}

static int Buf_getbuffer(BufObject *self, Py_buffer *view, int flags) {
  size_t bytes;
  if (!self->ready) {
    PyErr_SetString(PyExc_BufferError, "ReplayBuffer not initialised");
    view->obj = NULL;
    return -1;
  }
  bytes = (size_t)self->b.cfg.capacity * self->b.cfg.item_size;
  if (PyBuffer_FillInfo(view, (PyObject *)self, self->b.items,
                        (Py_ssize_t)bytes, 1, flags) < 0)
    return -1;
  self->exports++;
  return 0;
}

static void Buf_releasebuffer(BufObject *self, Py_buffer *view) {
  (void)view;
  self->exports--;
}

static PyBufferProcs Buf_as_buffer = {(getbufferproc)Buf_getbuffer,
                                      (releasebufferproc)Buf_releasebuffer};

static void shard_free(PyObject *capsule) {
  PyMem_Free(PyCapsule_GetPointer(capsule, PYPER_SHARD_NAME));
}

/* _shard(): the capsule per._mpi works through (shard.h). The caller
   keeps the buffer alive while it uses the capsule. */
static PyObject *Buf_shard(BufObject *self, PyObject *unused) {
  pyper_shard *sh;
  PyObject *c;
  (void)unused;
  if (!buf_ready(self)) return NULL;
  sh = (pyper_shard *)PyMem_Malloc(sizeof *sh);
  if (!sh) return PyErr_NoMemory();
  sh->version = PER_VERSION;
  sh->size = sizeof(per_buffer);
  sh->b = &self->b;
  sh->lock = self->lock;
  sh->exports = &self->exports;
  c = PyCapsule_New(sh, PYPER_SHARD_NAME, shard_free);
  if (!c) PyMem_Free(sh);
  return c;
}

static PyMethodDef Buf_methods[] = {
    {"_add", (PyCFunction)Buf_add, METH_VARARGS, NULL},
    {"_sample", (PyCFunction)Buf_sample, METH_VARARGS, NULL},
    {"_update", (PyCFunction)Buf_update, METH_VARARGS, NULL},
    {"_save", (PyCFunction)Buf_save, METH_O, NULL},
    {"_load", (PyCFunction)Buf_load, METH_O, NULL},
    {"_load_shard", (PyCFunction)Buf_load_shard, METH_VARARGS, NULL},
    {"_set_layout", (PyCFunction)Buf_set_layout, METH_O, NULL},
    {"check", (PyCFunction)Buf_check, METH_NOARGS, NULL},
    {"_leaves_into", (PyCFunction)Buf_leaves_into, METH_VARARGS, NULL},
    {"_snapshot", (PyCFunction)Buf_snapshot, METH_O, NULL},
    {"_load_mem", (PyCFunction)Buf_load_mem, METH_O, NULL},
    {"_clear", (PyCFunction)Buf_clear, METH_NOARGS, NULL},
    {"_ends_into", (PyCFunction)Buf_ends_into, METH_VARARGS, NULL},
    {"_shard", (PyCFunction)Buf_shard, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Buf_getset[] = {
    {"beta", (getter)Buf_beta, NULL,
     "the beta the next scheduled sample uses (per_buffer_beta)", NULL},
    {"counters", (getter)Buf_counters, NULL, NULL, NULL},
    {"config", (getter)Buf_config, NULL, NULL, NULL},
    {"layout", (getter)Buf_layout, NULL,
     "what the items are, as text (per_buffer_set_layout)", NULL},
    {"size", (getter)Buf_size, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject BufType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "per." PYPER_MODULE "._Buffer",
    .tp_basicsize = sizeof(BufObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Buf_init,
    .tp_dealloc = (destructor)Buf_dealloc,
    .tp_methods = Buf_methods,
    .tp_getset = Buf_getset,
    .tp_as_buffer = &Buf_as_buffer,
};

/* ---------------------------------------------------------------------
   The _api (struct pyper_api): this module's calls for the other one
   --------------------------------------------------------------------- */

static per_rng *api_rng(PyObject *o) { return &((RngObject *)o)->r; }

static long long api_item_size(PyObject *o) {
  BufObject *b = (BufObject *)o;
  if (!buf_ready(b)) return -1;
  return (long long)b->b.cfg.item_size;
}

static per_status api_add_steps(PyObject *o, const void *steps, uint32_t n,
                                const uint8_t *ends, char *why,
                                size_t why_size) {
  BufObject *b = (BufObject *)o;
  per_status s;
  NOGIL(
      b->lock, s = per_buffer_add_steps(&b->b, steps, n, ends);
      if (s != PER_OK) {
        size_t k = why_size < sizeof b->b.error ? why_size : sizeof b->b.error;
        if (k) {
          memcpy(why, b->b.error, k);
          why[k - 1] = 0;
        }
      });
  return s;
}

static per_status api_nstep_step(PyObject *o, void *a, const void *obs,
                                 const void *action, float reward,
                                 const void *next_obs, int terminated,
                                 int truncated) {
  BufObject *b = (BufObject *)o;
  per_status s;
  NOGIL(b->lock, s = per_nstep_step((per_nstep *)a, &b->b, obs, action, reward,
                                    next_obs, terminated, truncated));
  return s;
}

static const struct pyper_api this_api = {
    PYPER_API_VERSION, sizeof(per_nstep), &RngType,      &BufType,
    api_rng,           api_item_size,     api_add_steps, api_nstep_step};

#ifdef PYPER_F32
#define PYPER_OTHER "per._per"
#else
#define PYPER_OTHER "per._per32"
#endif

/* The other module's _api, imported at the first need; NULL (no
   exception) when it cannot be (a build without it) or does not match
   (then a buffer of it is refused as not a buffer). */
static const struct pyper_api *other_api(void) {
  static const struct pyper_api *api;
  static int tried;
  PyObject *m, *cap;
  const struct pyper_api *got;
  if (tried) return api;
  tried = 1;
  m = PyImport_ImportModule(PYPER_OTHER);
  if (!m) {
    PyErr_Clear();
    return NULL;
  }
  cap = PyObject_GetAttrString(m, "_api");
  Py_DECREF(m);
  got = cap ? (const struct pyper_api *)PyCapsule_GetPointer(cap, PYPER_OTHER
                                                             "._api")
            : NULL;
  Py_XDECREF(cap); /* the module keeps the capsule, the types, the calls */
  if (!got) {
    PyErr_Clear();
    return NULL;
  }
  if (got->version == PYPER_API_VERSION && got->nstep_size == sizeof(per_nstep))
    api = got;
  return api;
}

/* The buffer a call adds to and the calls on it: this module's _api
   for a buffer of its own, the other module's for one of the other. */
typedef struct {
  const struct pyper_api *api;
  PyObject *obj;
  long long item_size;
} buf_target;

/* Fill t from o, a ready per.ReplayBuffer of either node type; -1 with
   an exception otherwise. */
static int get_target(PyObject *o, const char *call, buf_target *t) {
  t->obj = o;
  t->api = PyObject_TypeCheck(o, &BufType) ? &this_api : other_api();
  if (!t->api || !PyObject_TypeCheck(o, t->api->buf_type)) {
    PyErr_Format(PyExc_TypeError, "%s: expected a per.ReplayBuffer, got %s",
                 call, Py_TYPE(o)->tp_name);
    return -1;
  }
  t->item_size = t->api->item_size(o);
  return t->item_size < 0 ? -1 : 0;
}

/* ---------------------------------------------------------------------
   NStep: a per_nstep adder
   --------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD per_nstep a;
  int ready;
} NStepObject;

static void NStep_dealloc(NStepObject *self) {
  per_nstep_free(&self->a);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int NStep_init(NStepObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"n", "gamma", "obs_size", "action_size", NULL};
  per_nstep_config c;
  per_status s;
  uint_arg n = {"NStep: n", 0}, obs_size = {"NStep: obs_size", 0},
           action_size = {"NStep: action_size", 0};
  memset(&c, 0, sizeof c);
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&fO&O&:NStep", kwlist, conv_u32,
                                   &n, &c.gamma, conv_u32, &obs_size, conv_u32,
                                   &action_size))
    return -1;
  c.n = (uint32_t)n.v;
  c.obs_size = (uint32_t)obs_size.v;
  c.action_size = (uint32_t)action_size.v;
  per_nstep_free(&self->a);
  self->ready = 0;
  if ((s = per_nstep_init(&self->a, &c, NULL)) != PER_OK) {
    raise_status(s, "NStep");
    return -1;
  }
  self->ready = 1;
  return 0;
}

#define nstep_ready(o) is_ready((o)->ready, "NStep")

/* _step(buffer, obs, action, reward, next_obs, terminated, truncated) */
static PyObject *NStep_step(NStepObject *self, PyObject *args) {
  PyObject *bo, *oo, *ao, *no;
  float reward;
  int term, trunc;
  Py_buffer ov, av, nv;
  Py_ssize_t on, an, nn;
  buf_target bt;
  per_status s;
  if (!nstep_ready(self) || !PyArg_ParseTuple(args, "OOOfOpp:step", &bo, &oo,
                                              &ao, &reward, &no, &term, &trunc))
    return NULL;
  if (get_target(bo, "NStep.step", &bt) < 0) return NULL;
  if (get_array(oo, 0, 0, 1, "obs", &ov, &on) < 0) return NULL;
  if (get_array(ao, 0, 0, 1, "action", &av, &an) < 0) {
    PyBuffer_Release(&ov);
    return NULL;
  }
  if (get_array(no, 0, 0, 1, "next_obs", &nv, &nn) < 0) {
    PyBuffer_Release(&ov);
    PyBuffer_Release(&av);
    return NULL;
  }
  if (on != (Py_ssize_t)self->a.cfg.obs_size ||
      nn != (Py_ssize_t)self->a.cfg.obs_size ||
      an != (Py_ssize_t)self->a.cfg.action_size) {
    PyBuffer_Release(&ov);
    PyBuffer_Release(&av);
    PyBuffer_Release(&nv);
    PyErr_Format(PyExc_ValueError,
                 "obs, action, next_obs are %zd, %zd, %zd bytes; the adder "
                 "takes %u, %u, %u",
                 on, an, nn, (unsigned)self->a.cfg.obs_size,
                 (unsigned)self->a.cfg.action_size,
                 (unsigned)self->a.cfg.obs_size);
    return NULL;
  }
  s = bt.api->nstep_step(bo, &self->a, ov.buf, av.buf, reward, nv.buf, term,
                         trunc);
  PyBuffer_Release(&ov);
  PyBuffer_Release(&av);
  PyBuffer_Release(&nv);
  CHECK(s, "NStep.step");
  Py_RETURN_NONE;
}

static PyObject *NStep_reset(NStepObject *self, PyObject *unused) {
  (void)unused;
  if (!nstep_ready(self)) return NULL;
  per_nstep_reset(&self->a);
  Py_RETURN_NONE;
}

static PyObject *NStep_layout(NStepObject *self, void *c) {
  const per_nstep_layout *l = &self->a.layout;
  (void)c;
  if (!nstep_ready(self)) return NULL;
  return Py_BuildValue("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "obs", l->obs, "action",
                       l->action, "reward", l->reward, "discount", l->discount,
                       "done", l->done, "next_obs", l->next_obs, "size",
                       l->size);
}

static PyObject *NStep_pending(NStepObject *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLong(self->a.count);
}

static PyMethodDef NStep_methods[] = {
    {"_step", (PyCFunction)NStep_step, METH_VARARGS, NULL},
    {"reset", (PyCFunction)NStep_reset, METH_NOARGS,
     "reset(): drop the pending steps without emitting them."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef NStep_getset[] = {
    {"layout", (getter)NStep_layout, NULL, NULL, NULL},
    {"pending", (getter)NStep_pending, NULL, "steps waiting to be emitted",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

STRUCT_TYPE(NStep, NStepObject, "_NStep");

/* ---------------------------------------------------------------------
   Frames: a per_frames (frame stacks stored once)
   --------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD per_frames f;
  int ready;
  PyThread_type_lock lock; /* held by every call on f (see NOGIL) */
} FramesObject;

static void Frames_dealloc(FramesObject *self) {
  per_frames_free(&self->f);
  if (self->lock) PyThread_free_lock(self->lock);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* per_frames_config's own fields (the buffer's are pyper_config_keys),
   in the struct's order */
static const pyper_key frames_keys[] = {
    PYPER_KEY(per_frames_config, frame_bytes, 'I'),
    PYPER_KEY(per_frames_config, stack, 'I'),
    PYPER_KEY(per_frames_config, n, 'I'),
    PYPER_KEY(per_frames_config, gamma, 'f'),
    PYPER_KEY(per_frames_config, action_size, 'I'),
    PYPER_KEY(per_frames_config, lanes, 'I'),
    PYPER_KEY(per_frames_config, frames, 'K'),
};

/* The sections of a per_frames_config: its own fields and its buffer's */
static void frames_sections(per_frames_config *c, pyper_section s[2]) {
  s[0].base = c;
  s[0].keys = frames_keys;
  s[0].n = PYPER_NKEYS(frames_keys);
  s[1].base = &c->buffer;
  s[1].keys = pyper_config_keys;
  s[1].n = PYPER_NKEYS(pyper_config_keys);
}

/* *c from a dict of per_frames_config's fields and its buffer's (one
   level: "capacity", "alpha" and "stack" alike): per_frames_config_default
   of its capacity, frame_bytes, stack and action_size, then every field
   the dict names (pyper_config.h). */
static int frames_config(PyObject *d, const char *label, per_frames_config *c) {
  pyper_section s[2];
  per_frames_config given;
  memset(&given, 0, sizeof given);
  frames_sections(&given, s);
  if (pyper_fill(d, label, s, 2) < 0) return -1;
  *c = per_frames_config_default(given.buffer.capacity, given.frame_bytes,
                                 given.stack, given.action_size);
  frames_sections(c, s);
  return pyper_fill(d, label, s, 2);
}

/* _Frames(config): config a dict for frames_config (per/config.py makes
   it); the buffer's item_size is per_frames_init's own. */
static int Frames_init(FramesObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"config", NULL};
  PyObject *d;
  per_frames_config c;
  per_status s;
  const char *w = "FrameBuffer";
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!:FrameBuffer", kwlist,
                                   &PyDict_Type, &d) ||
      frames_config(d, w, &c) < 0)
    return -1;
  if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
    PyErr_NoMemory();
    return -1;
  }
  LOCKED(self->lock, per_frames_free(&self->f); self->ready = 0;
         s = per_frames_init(&self->f, &c, NULL));
  if (s != PER_OK) {
    raise_why(s, w, self->f.error);
    return -1;
  }
  self->ready = 1;
  return 0;
}

#define frames_ready(o) is_ready((o)->ready, "FrameBuffer")

/* A read-only C-contiguous buffer of exactly `bytes` bytes, or -1. */
static int get_bytes(PyObject *o, Py_ssize_t bytes, const char *what,
                     Py_buffer *v) {
  Py_ssize_t n;
  if (get_array(o, 0, 0, 1, what, v, &n) < 0) return -1;
  if (n != bytes) {
    PyBuffer_Release(v);
    PyErr_Format(PyExc_ValueError, "%s is %zd bytes, needs %zd", what, n,
                 bytes);
    return -1;
  }
  return 0;
}

/* _step(lane, obs_frame, action, reward, next_frame, terminated,
   truncated): per_frames_step. */
static PyObject *Frames_step(FramesObject *self, PyObject *args) {
  char why[sizeof self->f.error];
  uint_arg lane = {"FrameBuffer.step: lane", 0};
  PyObject *oo, *ao, *no;
  Py_buffer ov, av, nv;
  float reward;
  int term, trunc;
  per_status s;
  if (!frames_ready(self) ||
      !PyArg_ParseTuple(args, "O&OOfOpp:step", conv_u32, &lane, &oo, &ao,
                        &reward, &no, &term, &trunc))
    return NULL;
  if (get_bytes(oo, self->f.cfg.frame_bytes, "obs_frame", &ov) < 0) return NULL;
  if (get_bytes(ao, self->f.cfg.action_size, "action", &av) < 0) {
    PyBuffer_Release(&ov);
    return NULL;
  }
  if (get_bytes(no, self->f.cfg.frame_bytes, "next_frame", &nv) < 0) {
    PyBuffer_Release(&ov);
    PyBuffer_Release(&av);
    return NULL;
  }
  NOGIL_WHY(self->lock, self->f.error, why,
            s = per_frames_step(&self->f, (uint32_t)lane.v, ov.buf, av.buf,
                                reward, nv.buf, term, trunc));
  PyBuffer_Release(&ov);
  PyBuffer_Release(&av);
  PyBuffer_Release(&nv);
  CHECK_WHY(s, why, "FrameBuffer.step");
  Py_RETURN_NONE;
}

/* _step_lanes(obs_frames, actions, rewards, next_frames, terminated,
   truncated): one step of every lane, 0 first; every reward is checked
   before any lane steps. */
static PyObject *Frames_step_lanes(FramesObject *self, PyObject *args) {
  char why[sizeof self->f.error];
  PyObject *o[6];
  Py_buffer v[6];
  int have = 0, j;
  uint32_t L, i;
  Py_ssize_t fb, ab;
  per_status s = PER_OK;
  static const char *what[6] = {"obs_frames",  "actions",    "rewards",
                                "next_frames", "terminated", "truncated"};
  if (!frames_ready(self) ||
      !PyArg_ParseTuple(args, "OOOOOO:step_lanes", &o[0], &o[1], &o[2], &o[3],
                        &o[4], &o[5]))
    return NULL;
  L = self->f.cfg.lanes;
  fb = self->f.cfg.frame_bytes;
  ab = self->f.cfg.action_size;
  {
    const Py_ssize_t bytes[6] = {fb * L, ab * L, 4 * (Py_ssize_t)L,
                                 fb * L, L,      L};
    for (j = 0; j < 6; ++j) {
      if (get_bytes(o[j], bytes[j], what[j], &v[j]) < 0) goto fail;
      have = j + 1;
    }
  }
  for (i = 0; i < L; ++i) {
    float r;
    memcpy(&r, (const char *)v[2].buf + 4 * i, sizeof r);
    if (!(r - r == 0)) {
      PyErr_Format(PyExc_ValueError,
                   "FrameBuffer.step_lanes: rewards[%u] is not finite; no "
                   "lane stepped",
                   (unsigned)i);
      goto fail;
    }
  }
  NOGIL_WHY(self->lock, self->f.error, why,
            for (i = 0; i < L && s == PER_OK; ++i) s = per_frames_step(
                &self->f, i, (const char *)v[0].buf + fb * i,
                (const char *)v[1].buf + ab * i, ((const float *)v[2].buf)[i],
                (const char *)v[3].buf + fb * i,
                ((const uint8_t *)v[4].buf)[i] != 0,
                ((const uint8_t *)v[5].buf)[i] != 0););
  for (j = 0; j < have; ++j) PyBuffer_Release(&v[j]);
  CHECK_WHY(s, why, "FrameBuffer.step_lanes");
  Py_RETURN_NONE;
fail:
  for (j = 0; j < have; ++j) PyBuffer_Release(&v[j]);
  return NULL;
}

/* _sample(B, flags, beta, window, obs, next_obs, action, reward,
   discount, done, ids, weights, mask): per_frames_sample; ids required,
   the other outputs may be None. */
static PyObject *Frames_sample(FramesObject *self, PyObject *args) {
  char why[sizeof self->f.error];
  uint_arg Ba = {"FrameBuffer.sample: batch_size", 0},
           flags = {"FrameBuffer.sample: flags", 0},
           window = {"FrameBuffer.sample: window", 0};
  double beta;
  PyObject *o[9];
  Py_buffer v[9];
  int have[9] = {0}, j;
  Py_ssize_t n, want[9], E;
  uint32_t B, L;
  per_sample_opts opts;
  per_frames_out out;
  per_status s;
  static const char *what[9] = {"obs",    "next_obs", "action",
                                "reward", "discount", "done",
                                "ids",    "weights",  "mask"};
  if (!frames_ready(self) ||
      !PyArg_ParseTuple(args, "O&O&dO&OOOOOOOOO:sample", conv_u32, &Ba,
                        conv_u32, &flags, &beta, conv_u32, &window, &o[0],
                        &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8]))
    return NULL;
  B = (uint32_t)Ba.v;
  L = (flags.v & PER_SAMPLE_SEQUENCES) && self->f.buffer.cfg.seq_len
          ? self->f.buffer.cfg.seq_len
          : 1;
  E = (Py_ssize_t)B * L;
  want[0] = want[1] = E * self->f.cfg.stack * self->f.cfg.frame_bytes;
  want[2] = E * self->f.cfg.action_size;
  want[3] = want[4] = want[5] = E * 4;
  want[6] = (Py_ssize_t)B * 8;
  want[7] = (Py_ssize_t)B * 4;
  want[8] = E;
  for (j = 0; j < 9; ++j) {
    if (o[j] == Py_None) continue;
    if (get_array(o[j], 1, 0, 1, what[j], &v[j], &n) < 0) goto fail;
    have[j] = 1;
    if (n != want[j]) {
      PyErr_Format(PyExc_ValueError, "%s is %zd bytes, needs %zd", what[j], n,
                   want[j]);
      goto fail;
    }
  }
  memset(&opts, 0, sizeof opts);
  opts.flags = (uint32_t)flags.v;
  opts.beta = beta;
  opts.window = (uint32_t)window.v;
  opts.mask = have[8] ? (uint8_t *)v[8].buf : NULL;
  memset(&out, 0, sizeof out);
  out.obs = have[0] ? v[0].buf : NULL;
  out.next_obs = have[1] ? v[1].buf : NULL;
  out.action = have[2] ? v[2].buf : NULL;
  out.reward = have[3] ? (float *)v[3].buf : NULL;
  out.discount = have[4] ? (float *)v[4].buf : NULL;
  out.done = have[5] ? (uint32_t *)v[5].buf : NULL;
  out.ids = have[6] ? (uint64_t *)v[6].buf : NULL;
  out.weights = have[7] ? (float *)v[7].buf : NULL;
  NOGIL_WHY(self->lock, self->f.error, why,
            s = per_frames_sample(&self->f, B, &opts, &out));
  for (j = 0; j < 9; ++j)
    if (have[j]) PyBuffer_Release(&v[j]);
  CHECK_WHY(s, why, "FrameBuffer.sample");
  Py_RETURN_NONE;
fail:
  for (j = 0; j < 9; ++j)
    if (have[j]) PyBuffer_Release(&v[j]);
  return NULL;
}

/* _update(ids, td): per_frames_update; returns the stale count. */
static PyObject *Frames_update(FramesObject *self, PyObject *args) {
  char why[sizeof self->f.error];
  PyObject *io, *to;
  Py_buffer iv, tv;
  uint32_t ni, stale = 0;
  per_status s;
  if (!frames_ready(self) || !PyArg_ParseTuple(args, "OO:update", &io, &to) ||
      get_ids_td(io, to, 1, &iv, &tv, &ni) < 0)
    return NULL;
  NOGIL_WHY(self->lock, self->f.error, why,
            s = per_frames_update(&self->f, (const uint64_t *)iv.buf,
                                  (const float *)tv.buf, ni, &stale));
  PyBuffer_Release(&iv);
  PyBuffer_Release(&tv);
  CHECK_WHY(s, why, "FrameBuffer.update");
  return PyLong_FromUnsignedLong(stale);
}

static PyObject *Frames_save(FramesObject *self, PyObject *arg) {
  PyObject *bytes;
  per_status s;
  if (!frames_ready(self) || !PyUnicode_FSConverter(arg, &bytes)) return NULL;
  NOGIL(self->lock, s = per_frames_save(&self->f, PyBytes_AS_STRING(bytes)));
  Py_DECREF(bytes);
  CHECK(s, "FrameBuffer.save");
  Py_RETURN_NONE;
}

static PyObject *Frames_load(FramesObject *self, PyObject *arg) {
  char why[sizeof self->f.error];
  PyObject *bytes;
  per_status s;
  if (!frames_ready(self) || !PyUnicode_FSConverter(arg, &bytes)) return NULL;
  NOGIL_WHY(self->lock, self->f.error, why,
            s = per_frames_load(&self->f, PyBytes_AS_STRING(bytes)));
  Py_DECREF(bytes);
  CHECK_WHY(s, why, "FrameBuffer.load");
  Py_RETURN_NONE;
}

static PyObject *Frames_reset_lane(FramesObject *self, PyObject *arg) {
  uint_arg lane = {"FrameBuffer.reset_lane: lane", 0};
  if (!frames_ready(self) || !conv_u32(arg, &lane)) return NULL;
  {
    per_status s;
    char why[sizeof self->f.error];
    LOCKED(self->lock, s = per_frames_reset_lane(&self->f, (uint32_t)lane.v);
           memcpy(why, self->f.error, sizeof why));
    CHECK_WHY(s, why, "FrameBuffer.reset_lane");
  }
  Py_RETURN_NONE;
}

static PyObject *Frames_check(FramesObject *self, PyObject *unused) {
  (void)unused;
  if (!frames_ready(self)) return NULL;
  {
    per_status s;
    NOGIL(self->lock, s = per_frames_check(&self->f));
    CHECK(s, "FrameBuffer.check");
  }
  Py_RETURN_NONE;
}

static PyObject *Frames_counters(FramesObject *self, void *c) {
  uint64_t v[7];
  (void)c;
  if (!frames_ready(self)) return NULL;
  LOCKED(self->lock, v[0] = self->f.buffer.size;
         v[1] = per_frames_drawable(&self->f); v[2] = self->f.buffer.added;
         v[3] = self->f.buffer.step; v[4] = self->f.next_frame;
         v[5] = self->f.restarts; v[6] = self->f.cfg.frames);
  return Py_BuildValue(
      "{s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "size", (unsigned long long)v[0],
      "drawable", (unsigned long long)v[1], "added", (unsigned long long)v[2],
      "step", (unsigned long long)v[3], "next_frame", (unsigned long long)v[4],
      "restarts", (unsigned long long)v[5], "frames", (unsigned long long)v[6]);
}

/* A per_frames_config as a dict: its own fields and "buffer", the
   buffer's. */
static PyObject *frames_config_dict(const per_frames_config *g) {
  pyper_section s[2];
  PyObject *d;
  frames_sections((per_frames_config *)(uintptr_t)g, s); /* read only */
  d = pyper_dict(&s[0]);
  if (d && pyper_set_item(d, "buffer", pyper_dict(&s[1])) < 0) Py_CLEAR(d);
  return d;
}

static PyObject *Frames_config(FramesObject *self, void *c) {
  (void)c;
  if (!frames_ready(self)) return NULL;
  return frames_config_dict(&self->f.cfg);
}

static PyMethodDef Frames_methods[] = {
    {"_step", (PyCFunction)Frames_step, METH_VARARGS, NULL},
    {"_step_lanes", (PyCFunction)Frames_step_lanes, METH_VARARGS, NULL},
    {"_sample", (PyCFunction)Frames_sample, METH_VARARGS, NULL},
    {"_update", (PyCFunction)Frames_update, METH_VARARGS, NULL},
    {"_save", (PyCFunction)Frames_save, METH_O, NULL},
    {"_load", (PyCFunction)Frames_load, METH_O, NULL},
    {"reset_lane", (PyCFunction)Frames_reset_lane, METH_O,
     "reset_lane(lane): drop the lane's pending steps and end its episode "
     "(per_frames_reset_lane)."},
    {"check", (PyCFunction)Frames_check, METH_NOARGS,
     "check(): every invariant (per_frames_check); raises per.Error."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Frames_getset[] = {
    {"counters", (getter)Frames_counters, NULL, NULL, NULL},
    {"config", (getter)Frames_config, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

STRUCT_TYPE(Frames, FramesObject, "_Frames");

/* ---------------------------------------------------------------------
   Traj: a per_traj accumulator
   --------------------------------------------------------------------- */

/* One leaf of a timescale, for TrajectoryAccumulator.add: the field it
   fills and what a value must be to be copied as it is (the fast path);
   any other value goes to the Python side (_add_slow), which converts or
   refuses it by per's rules. */
#define TRAJ_MAX_DIMS 8
typedef struct {
  PyObject *key;  /* the key in a flat dict timescale; NULL: nested */
  uint32_t field; /* index into a.fields */
  char kind;      /* 'f' float, 'i' signed, 'u' unsigned, 'b' bool */
  int itemsize;   /* bytes of an element */
  int ndim;       /* the stored shape (the record's field): ndim */
  Py_ssize_t shape[TRAJ_MAX_DIMS];
  Py_ssize_t count; /* elements */
  int single;       /* a SINGLE timescale's leaf */
} traj_leaf;

typedef struct {
  traj_leaf *leaves; /* nleaves, or NULL before _plan */
  Py_ssize_t nleaves;
  int fast;               /* a flat dict of leaves whose shapes allow it */
  unsigned char *staging; /* one record: the values of one add */
} traj_plan;

/* The accumulator's block as a buffer (per._per._TrajMemory): the arrays
   of a TrajectoryAccumulator are views of it and keep it alive, not the
   accumulator (no reference cycle through the arrays). While views are
   out, the accumulator's dealloc leaves the block to this object, which
   frees it with the last view. */
typedef struct {
  PyObject_HEAD void *block; /* the per_traj's PER_MALLOC block */
  Py_ssize_t len;            /* its bytes */
  Py_ssize_t exports;        /* views handed out, not released */
  int owned;                 /* 1: the accumulator is gone, free it here */
} TrajMemObject;

static void TrajMem_dealloc(TrajMemObject *self) {
  if (self->owned && self->block) PER_FREE(self->block, NULL);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int TrajMem_getbuffer(TrajMemObject *self, Py_buffer *view, int flags) {
  if (!self->block) {
    PyErr_SetString(PyExc_BufferError, "the accumulator is gone");
    view->obj = NULL;
    return -1;
  }
  if (PyBuffer_FillInfo(view, (PyObject *)self, self->block, self->len, 0,
                        flags) < 0)
    return -1;
  self->exports++;
  return 0;
}

static void TrajMem_releasebuffer(TrajMemObject *self, Py_buffer *view) {
  (void)view;
  self->exports--;
}

static PyBufferProcs TrajMem_as_buffer = {
    (getbufferproc)TrajMem_getbuffer, (releasebufferproc)TrajMem_releasebuffer};

static PyTypeObject TrajMemType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "per." PYPER_MODULE "._TrajMemory",
    .tp_basicsize = sizeof(TrajMemObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)TrajMem_dealloc,
    .tp_as_buffer = &TrajMem_as_buffer,
};

typedef struct {
  PyObject_HEAD per_traj a;
  int ready;
  traj_plan *plans;   /* a.nscales, from _plan (TrajectoryAccumulator) */
  PyObject *names;    /* dict: timescale name -> index */
  TrajMemObject *mem; /* the block's buffer, once asked for (_memory) */
  Py_ssize_t block;   /* bytes of the accumulator's block */
} TrajObject;

/* Release self->a, or leave its block to self->mem while views of it
   are out. */
static void traj_release(TrajObject *self) {
  if (self->mem && self->mem->exports > 0) {
    self->mem->owned = 1;
    memset(&self->a, 0, sizeof self->a);
  } else {
    if (self->mem) self->mem->block = NULL; /* no views: none to come */
    per_traj_free(&self->a);
  }
  Py_CLEAR(self->mem);
}

static void traj_plans_free(TrajObject *self) {
  uint32_t t;
  Py_ssize_t i;
  if (self->plans) {
    for (t = 0; t < self->a.nscales; ++t) {
      traj_plan *p = &self->plans[t];
      for (i = 0; p->leaves && i < p->nleaves; ++i)
        Py_XDECREF(p->leaves[i].key);
      PyMem_Free(p->leaves);
      PyMem_Free(p->staging);
    }
    PyMem_Free(self->plans);
    self->plans = NULL;
  }
  Py_CLEAR(self->names);
}

static void Traj_dealloc(TrajObject *self) {
  traj_plans_free(self);
  traj_release(self);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _Traj(capacity, step_bytes, once_bytes, fields, timescales=None):
   without timescales, a two-kind per_traj_config (fields (name, kind,
   offset, bytes), kind 0 STEP, 1 ONCE); with them, a per_traj_spec
   (timescales (name, kind, capacity, record_bytes), kind 0 BUFFERED, 1
   SINGLE; fields (name, timescale, offset, bytes); capacity, step_bytes
   and once_bytes 0). */
static int Traj_init(TrajObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"capacity", "step_bytes", "once_bytes",
                           "fields",   "timescales", NULL};
  uint_arg cap = {"Trajectory: capacity", 0},
           sb = {"Trajectory: step_bytes", 0},
           ob = {"Trajectory: once_bytes", 0};
  PyObject *fo, *to = Py_None, *fast = NULL, *tfast = NULL;
  per_traj_field *fields = NULL;
  per_traj_timescale *ts = NULL;
  per_traj_config c;
  per_traj_spec sp;
  Py_ssize_t n, nt = 0, i;
  per_status s;
  uint32_t t;
  int rc = -1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&O&O|O:Trajectory", kwlist,
                                   conv_u32, &cap, conv_u32, &sb, conv_u32, &ob,
                                   &fo, &to))
    return -1;
  fast = PySequence_Fast(fo, "Trajectory: fields must be a sequence");
  if (!fast) return -1;
  n = PySequence_Fast_GET_SIZE(fast);
  if (count32(n, "Trajectory: fields") < 0) goto done;
  fields = (per_traj_field *)PyMem_Calloc((size_t)(n ? n : 1), sizeof *fields);
  if (!fields) {
    PyErr_NoMemory();
    goto done;
  }
  for (i = 0; i < n; ++i) {
    unsigned int kind, off, bytes;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "sIII:field",
                          &fields[i].name, &kind, &off, &bytes))
      goto done;
    fields[i].timescale = kind;
    fields[i].offset = off;
    fields[i].bytes = bytes;
  }
  if (to != Py_None) {
    tfast = PySequence_Fast(to, "Trajectory: timescales must be a sequence");
    if (!tfast) goto done;
    nt = PySequence_Fast_GET_SIZE(tfast);
    if (count32(nt, "Trajectory: timescales") < 0) goto done;
    ts = (per_traj_timescale *)PyMem_Calloc((size_t)(nt ? nt : 1), sizeof *ts);
    if (!ts) {
      PyErr_NoMemory();
      goto done;
    }
    for (i = 0; i < nt; ++i) {
      unsigned int kind, capacity, bytes;
      if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(tfast, i),
                            "sIII:timescale", &ts[i].name, &kind, &capacity,
                            &bytes))
        goto done;
      ts[i].kind = kind;
      ts[i].capacity = capacity;
      ts[i].record_bytes = bytes;
    }
  }
  traj_plans_free(self);
  traj_release(self);
  self->ready = 0;
  if (to == Py_None) {
    memset(&c, 0, sizeof c);
    c.capacity = (uint32_t)cap.v;
    c.step_bytes = (uint32_t)sb.v;
    c.once_bytes = (uint32_t)ob.v;
    c.nfields = (uint32_t)n;
    c.fields = fields;
    s = per_traj_init(&self->a, &c, NULL);
  } else {
    sp.ntimescales = (uint32_t)nt;
    sp.timescales = ts;
    sp.nfields = (uint32_t)n;
    sp.fields = fields;
    s = per_traj_init_spec(&self->a, &sp, NULL);
  }
  if (s != PER_OK) {
    raise_why(s, "Trajectory", self->a.error);
    goto done;
  }
  /* the block ends where the last records or ends end */
  self->block = 0;
  for (t = 0; t < self->a.nscales; ++t) {
    const per_traj_scale *sc = &self->a.scales[t];
    const unsigned char *base = (const unsigned char *)self->a.fields;
    Py_ssize_t end = (Py_ssize_t)(sc->records - base) +
                     (Py_ssize_t)((size_t)sc->capacity * sc->record_bytes);
    if (end > self->block) self->block = end;
    if (sc->ends && (Py_ssize_t)(sc->ends - base) + sc->capacity > self->block)
      self->block = (Py_ssize_t)(sc->ends - base) + sc->capacity;
  }
  self->ready = 1;
  rc = 0;
done:
  PyMem_Free(fields);
  PyMem_Free(ts);
  Py_XDECREF(fast);
  Py_XDECREF(tfast);
  return rc;
}

#define traj_ready(o) is_ready((o)->ready, "Trajectory")

/* _add(field, value): per_traj_add; value is the field's bytes. */
static PyObject *Traj_add(TrajObject *self, PyObject *args) {
  uint_arg field = {"Trajectory.add: field", 0};
  PyObject *vo;
  Py_buffer v;
  Py_ssize_t n;
  per_status s;
  if (!traj_ready(self) ||
      !PyArg_ParseTuple(args, "O&O:add", conv_u32, &field, &vo))
    return NULL;
  if (field.v < self->a.cfg.nfields) {
    if (get_bytes(vo, self->a.fields[field.v].bytes, "value", &v) < 0)
      return NULL;
  } else if (get_array(vo, 0, 0, 1, "value", &v, &n) < 0) {
    return NULL;
  }
  s = per_traj_add(&self->a, (uint32_t)field.v, v.buf);
  PyBuffer_Release(&v);
  CHECK_BUF(&self->a, s, "Trajectory.add");
  Py_RETURN_NONE;
}

/* _add_step(record, end): per_traj_add_step. */
static PyObject *Traj_add_step(TrajObject *self, PyObject *args) {
  PyObject *ro;
  Py_buffer v;
  unsigned char end;
  per_status s;
  if (!traj_ready(self) || !PyArg_ParseTuple(args, "Ob:add_step", &ro, &end))
    return NULL;
  if (get_bytes(ro, self->a.cfg.step_bytes, "record", &v) < 0) return NULL;
  s = per_traj_add_step(&self->a, v.buf, end);
  PyBuffer_Release(&v);
  CHECK_BUF(&self->a, s, "Trajectory.add_step");
  Py_RETURN_NONE;
}

static PyObject *Traj_end(TrajObject *self, PyObject *arg) {
  uint_arg end = {"Trajectory.end: end", 0};
  if (!traj_ready(self) || !conv_u32(arg, &end)) return NULL;
  if (end.v > 255) end.v = 255; /* refused by per_traj_end as not a PER_END_* */
  CHECK_BUF(&self->a, per_traj_end(&self->a, (uint8_t)end.v), "Trajectory.end");
  Py_RETURN_NONE;
}

/* _build(steps_out, ends_out, once_out) -> (n, id): per_traj_build, the
   built records, ends and once record copied into the outputs (steps_out
   and ends_out of capacity entries, once_out of once_bytes or None). */
static PyObject *Traj_build(TrajObject *self, PyObject *args) {
  PyObject *o[3];
  Py_buffer v[3];
  int have[3] = {0, 0, 0}, j;
  Py_ssize_t n[3], want[3];
  per_traj_out out;
  per_status s;
  static const char *what[3] = {"steps_out", "ends_out", "once_out"};
  if (!traj_ready(self) ||
      !PyArg_ParseTuple(args, "OOO:build", &o[0], &o[1], &o[2]))
    return NULL;
  want[0] = (Py_ssize_t)self->a.cfg.capacity * self->a.cfg.step_bytes;
  want[1] = self->a.cfg.capacity;
  want[2] = self->a.cfg.once_bytes;
  for (j = 0; j < 3; ++j) {
    if (o[j] == Py_None) continue;
    if (get_array(o[j], 1, 0, 1, what[j], &v[j], &n[j]) < 0) goto fail;
    have[j] = 1;
    if (n[j] != want[j]) {
      PyErr_Format(PyExc_ValueError, "%s is %zd bytes, needs %zd", what[j],
                   n[j], want[j]);
      goto fail;
    }
  }
  s = per_traj_build(&self->a, &out);
  if (s == PER_OK) {
    if (have[0])
      memcpy(v[0].buf, out.steps, (size_t)out.n * self->a.cfg.step_bytes);
    if (have[1]) memcpy(v[1].buf, out.ends, out.n);
    if (have[2] && out.once) memcpy(v[2].buf, out.once, self->a.cfg.once_bytes);
  }
  for (j = 0; j < 3; ++j)
    if (have[j]) PyBuffer_Release(&v[j]);
  CHECK_BUF(&self->a, s, "Trajectory.build");
  return Py_BuildValue("(IK)", out.n, (unsigned long long)out.id);
fail:
  for (j = 0; j < 3; ++j)
    if (have[j]) PyBuffer_Release(&v[j]);
  return NULL;
}

/* _add_to(buffer, once_out) -> (n, id): per_traj_build, then the steps
   and ends straight into the buffer (per_buffer_add_steps, one
   trajectory), without a copy; the once record copied into once_out (or
   None). The buffer's item_size must be step_bytes. */
static PyObject *Traj_add_to(TrajObject *self, PyObject *args) {
  PyObject *bo, *oo;
  buf_target b;
  Py_buffer ov;
  int have = 0;
  per_traj_out out;
  per_status s;
  char why[sizeof self->a.error];
  if (!traj_ready(self) || !PyArg_ParseTuple(args, "OO:add_to", &bo, &oo))
    return NULL;
  if (get_target(bo, "Trajectory.add_to", &b) < 0) return NULL;
  if (b.item_size != (long long)self->a.cfg.step_bytes) {
    PyErr_Format(PyExc_ValueError,
                 "Trajectory.add_to: the buffer's items are %u bytes, the "
                 "trajectory's steps %u",
                 (unsigned)b.item_size, (unsigned)self->a.cfg.step_bytes);
    return NULL;
  }
  if (oo != Py_None) {
    if (get_bytes(oo, self->a.cfg.once_bytes, "once_out", &ov) < 0) return NULL;
    have = 1;
  }
  if (per_traj_steps(&self->a) == 0) {
    if (have) PyBuffer_Release(&ov);
    return raise_why(PER_ERR_EMPTY, "Trajectory.add_to", "no step to add");
  }
  s = per_traj_build(&self->a, &out);
  if (s != PER_OK) {
    if (have) PyBuffer_Release(&ov);
    CHECK_BUF(&self->a, s, "Trajectory.add_to");
  }
  if (have && out.once) memcpy(ov.buf, out.once, self->a.cfg.once_bytes);
  if (have) PyBuffer_Release(&ov);
  s = b.api->add_steps(b.obj, out.steps, out.n, out.ends, why, sizeof why);
  CHECK_WHY(s, why, "Trajectory.add_to");
  return Py_BuildValue("(IK)", out.n, (unsigned long long)out.id);
}

static PyObject *Traj_reset(TrajObject *self, PyObject *unused) {
  (void)unused;
  if (!traj_ready(self)) return NULL;
  per_traj_reset(&self->a);
  Py_RETURN_NONE;
}

static PyObject *Traj_steps(TrajObject *self, void *c) {
  (void)c;
  if (!traj_ready(self)) return NULL;
  return PyLong_FromUnsignedLong(per_traj_steps(&self->a));
}

static PyObject *Traj_counts(TrajObject *self, void *c) {
  PyObject *t;
  uint32_t i;
  (void)c;
  if (!traj_ready(self)) return NULL;
  t = PyTuple_New((Py_ssize_t)self->a.cfg.nfields);
  if (!t) return NULL;
  for (i = 0; i < self->a.cfg.nfields; ++i) {
    PyObject *v = PyLong_FromUnsignedLong(self->a.count[i]);
    if (!v) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SET_ITEM(t, (Py_ssize_t)i, v);
  }
  return t;
}

static PyObject *Traj_built(TrajObject *self, void *c) {
  (void)c;
  if (!traj_ready(self)) return NULL;
  return PyLong_FromUnsignedLongLong((unsigned long long)self->a.built);
}

/* The TrajectoryAccumulator's side: plans, the fast add, builds. */

#define traj_planned(o) \
  (traj_ready(o) &&     \
   ((o)->plans ? 1 : (PyErr_SetString(PyExc_RuntimeError, "no _plan"), 0)))

/* _plan(t, name, keys, leaves): timescale t's name and leaves, in its
   fields' order: keys a tuple of str (a flat dict of leaves) or None
   (nested: every add goes to _add_slow); leaves a sequence of (field,
   kind, itemsize, shape), kind one of "f", "i", "u", "b" (else "" and
   no fast path), shape the stored field's shape. */
static PyObject *Traj_plan(TrajObject *self, PyObject *args) {
  uint_arg t = {"_plan: t", 0};
  PyObject *name, *keys, *lo, *fast = NULL, *idx = NULL;
  traj_plan *p;
  Py_ssize_t n, i;
  if (!traj_ready(self) ||
      !PyArg_ParseTuple(args, "O&UOO:_plan", conv_u32, &t, &name, &keys, &lo))
    return NULL;
  if (t.v >= self->a.nscales)
    return PyErr_Format(PyExc_IndexError, "_plan: timescale %u", (unsigned)t.v);
  if (!self->plans) {
    self->plans = (traj_plan *)PyMem_Calloc(self->a.nscales, sizeof(traj_plan));
    if (!self->plans) return PyErr_NoMemory();
  }
  if (!self->names && !(self->names = PyDict_New())) return NULL;
  p = &self->plans[t.v];
  if (p->leaves) return PyErr_Format(PyExc_ValueError, "_plan: twice");
  fast = PySequence_Fast(lo, "_plan: leaves");
  if (!fast) return NULL;
  n = PySequence_Fast_GET_SIZE(fast);
  if (keys != Py_None &&
      (!PyTuple_Check(keys) || PyTuple_GET_SIZE(keys) != n)) {
    Py_DECREF(fast);
    return PyErr_Format(PyExc_ValueError, "_plan: keys");
  }
  p->staging =
      (unsigned char *)PyMem_Calloc(self->a.scales[t.v].record_bytes, 1);
  p->leaves = (traj_leaf *)PyMem_Calloc((size_t)(n ? n : 1), sizeof(traj_leaf));
  if (!p->staging || !p->leaves) {
    Py_DECREF(fast);
    return PyErr_NoMemory();
  }
  p->nleaves = n;
  p->fast = keys != Py_None;
  for (i = 0; i < n; ++i) {
    traj_leaf *L = &p->leaves[i];
    unsigned int field;
    int itemsize;
    const char *kind;
    PyObject *shape;
    Py_ssize_t d;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "IsiO!:leaf",
                          &field, &kind, &itemsize, &PyTuple_Type, &shape))
      goto fail;
    if (field >= self->a.cfg.nfields ||
        self->a.fields[field].timescale != (uint32_t)t.v) {
      PyErr_Format(PyExc_ValueError, "_plan: field %u", field);
      goto fail;
    }
    L->field = field;
    L->kind = kind[0];
    L->itemsize = itemsize;
    L->single = self->a.scales[t.v].kind == PER_TRAJ_SINGLE;
    L->ndim = (int)PyTuple_GET_SIZE(shape);
    L->count = 1;
    if (L->ndim > TRAJ_MAX_DIMS || !strchr("fiub", L->kind) || L->kind == 0)
      p->fast = 0;
    for (d = 0; d < L->ndim && d < TRAJ_MAX_DIMS; ++d) {
      L->shape[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
      if (L->shape[d] < 0) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "_plan: shape");
        goto fail;
      }
      L->count *= L->shape[d];
    }
    if (p->fast && (Py_ssize_t)L->count * itemsize !=
                       (Py_ssize_t)self->a.fields[field].bytes) {
      PyErr_Format(PyExc_ValueError, "_plan: field %u's bytes", field);
      goto fail;
    }
    if (keys != Py_None) {
      L->key = PyTuple_GET_ITEM(keys, i);
      Py_INCREF(L->key);
    }
  }
  Py_DECREF(fast);
  idx = PyLong_FromUnsignedLong((unsigned long)t.v);
  if (!idx || PyDict_SetItem(self->names, name, idx) < 0) {
    Py_XDECREF(idx);
    return NULL;
  }
  Py_DECREF(idx);
  Py_RETURN_NONE;
fail:
  Py_DECREF(fast);
  return NULL;
}

/* IndexError for an add to full BUFFERED timescale t. */
static PyObject *traj_full(TrajObject *self, uint32_t t) {
  const per_traj_scale *sc = &self->a.scales[t];
  return PyErr_Format(PyExc_IndexError,
                      "TrajectoryAccumulator.add: timescale '%s' is full: "
                      "capacity %u, index %u (build() takes the rollout, "
                      "reset() drops it)",
                      sc->name, (unsigned)sc->capacity, (unsigned)sc->capacity);
}

/* 1: a BUFFERED timescale t holds capacity records. */
static int traj_is_full(TrajObject *self, uint32_t t) {
  const per_traj_scale *sc = &self->a.scales[t];
  return sc->kind == PER_TRAJ_BUFFERED &&
         per_traj_count(&self->a, t) >= sc->capacity;
}

/* The buffer format's kind ('f', 'i', 'u', 'b'), or 0. */
static char traj_format_kind(const char *f) {
  f = native_format(f);
  if (!f[0] || f[1]) return 0;
  if (strchr("fde", f[0])) return 'f';
  if (strchr("bhilq", f[0])) return 'i';
  if (strchr("BHILQ", f[0])) return 'u';
  if (f[0] == '?') return 'b';
  return 0;
}

/* 1 when a value of shape (ndim, shape) fills leaf L as it is: the
   stored shape, or it with a leading 1, or (a SINGLE leaf whose shape
   starts with 1) without it. */
static int traj_shape_ok(const traj_leaf *L, int ndim,
                         const Py_ssize_t *shape) {
  int d, off;
  if (ndim == L->ndim) off = 0;
  else if (ndim == L->ndim + 1 && shape[0] == 1) off = 1;
  else if (L->single && ndim + 1 == L->ndim && L->shape[0] == 1) off = -1;
  else return 0;
  for (d = 0; d < L->ndim; ++d) {
    if (off == -1) {
      if (d > 0 && shape[d - 1] != L->shape[d]) return 0;
    } else if (shape[d + off] != L->shape[d]) {
      return 0;
    }
  }
  return 1;
}

/* One value on its way into a leaf: a float (d), a signed (i) or
   unsigned (u) integer, or a bool (i 0 or 1). */
typedef struct {
  char kind; /* 'f', 'i', 'u' or 'b' */
  double d;
  long long i;
  unsigned long long u;
} traj_val;

/* x into an element of leaf L at dst when ReplayBuffer.add's rule keeps
   it exactly (floats into floats rounded, refused where a finite value
   would become inf): 1 stored, 0 not (the slow path decides and names
   the value). */
static int traj_store(const traj_leaf *L, const traj_val *x,
                      unsigned char *dst) {
  int bits = L->itemsize * 8;
  if (L->kind == 'f') {
    /* integers up to 2^24 (float) or 2^53 (double) are exact there */
    long long lim = L->itemsize == 4 ? 1ll << 24 : 1ll << 53;
    double d;
    if (L->itemsize != 4 && L->itemsize != 8) return 0;
    if (x->kind == 'f') {
      d = x->d;
      if (L->itemsize == 4 && d == d && fabs(d) > 3.4028234663852886e38 &&
          fabs(d) != HUGE_VAL)
        return 0;
    } else if (x->kind == 'u') {
      if (x->u > (unsigned long long)lim) return 0;
      d = (double)x->u;
    } else {
      if (x->i > lim || x->i < -lim) return 0;
      d = (double)x->i;
    }
    if (L->itemsize == 4) {
      float f = (float)d;
      memcpy(dst, &f, 4);
    } else {
      memcpy(dst, &d, 8);
    }
    return 1;
  }
  if (L->kind == 'b') {
    int one = x->kind == 'f'   ? x->d == 1
              : x->kind == 'u' ? x->u == 1
                               : x->i == 1;
    int zero = x->kind == 'f'   ? x->d == 0
               : x->kind == 'u' ? x->u == 0
                                : x->i == 0;
    if (!one && !zero) return 0;
    dst[0] = (unsigned char)one;
    return 1;
  }
  if (L->kind == 'i' || L->kind == 'u') {
    unsigned long long bitsv; /* the value's bits, two's complement */
    if (bits != 8 && bits != 16 && bits != 32 && bits != 64) return 0;
    if (x->kind == 'f') {
      double d = x->d, lo, hi; /* [lo, hi): exact powers of two */
      if (L->kind == 'i') {
        hi = ldexp(1.0, bits - 1);
        lo = -hi;
      } else {
        hi = ldexp(1.0, bits);
        lo = 0;
      }
      if (!(d >= lo && d < hi) || d != floor(d)) return 0;
      bitsv = L->kind == 'i' ? (unsigned long long)(long long)d
                             : (unsigned long long)d;
    } else if (x->kind == 'u') {
      unsigned long long top = L->kind == 'i'
                                   ? (1ull << (bits - 1)) - 1
                                   : (bits == 64 ? ~0ull : (1ull << bits) - 1);
      if (x->u > top) return 0;
      bitsv = x->u;
    } else {
      long long v = x->i;
      if (L->kind == 'i') {
        long long lo = bits == 64 ? INT64_MIN : -(1ll << (bits - 1));
        long long hi = bits == 64 ? INT64_MAX : (1ll << (bits - 1)) - 1;
        if (v < lo || v > hi) return 0;
      } else if (v < 0 ||
                 (bits < 64 && (unsigned long long)v > (1ull << bits) - 1)) {
        return 0;
      }
      bitsv = (unsigned long long)v;
    }
    switch (bits) {
      case 8: {
        uint8_t y = (uint8_t)bitsv;
        memcpy(dst, &y, 1);
        break;
      }
      case 16: {
        uint16_t y = (uint16_t)bitsv;
        memcpy(dst, &y, 2);
        break;
      }
      case 32: {
        uint32_t y = (uint32_t)bitsv;
        memcpy(dst, &y, 4);
        break;
      }
      default: {
        uint64_t y = (uint64_t)bitsv;
        memcpy(dst, &y, 8);
        break;
      }
    }
    return 1;
  }
  return 0;
}

/* Element p of a native buffer of format char c and `size` bytes into
   *x: 1, or 0 for a format read nowhere here (float16, complex, ...). */
static int traj_read(char c, Py_ssize_t size, const unsigned char *p,
                     traj_val *x) {
  if ((c == 'f' && size == 4) || (c == 'd' && size == 8)) {
    x->kind = 'f';
    if (size == 4) {
      float f;
      memcpy(&f, p, 4);
      x->d = f;
    } else {
      memcpy(&x->d, p, 8);
    }
    return 1;
  }
  if (c == '?' && size == 1) {
    x->kind = 'b';
    x->i = p[0] != 0;
    return 1;
  }
  if (strchr("bhilq", c)) {
    x->kind = 'i';
    if (size == 1) {
      int8_t v;
      memcpy(&v, p, 1);
      x->i = v;
    } else if (size == 2) {
      int16_t v;
      memcpy(&v, p, 2);
      x->i = v;
    } else if (size == 4) {
      int32_t v;
      memcpy(&v, p, 4);
      x->i = v;
    } else if (size == 8) {
      int64_t v;
      memcpy(&v, p, 8);
      x->i = v;
    } else {
      return 0;
    }
    return 1;
  }
  if (strchr("BHILQ", c)) {
    x->kind = 'u';
    if (size == 1) {
      x->u = p[0];
    } else if (size == 2) {
      uint16_t v;
      memcpy(&v, p, 2);
      x->u = v;
    } else if (size == 4) {
      uint32_t v;
      memcpy(&v, p, 4);
      x->u = v;
    } else if (size == 8) {
      uint64_t v;
      memcpy(&v, p, 8);
      x->u = v;
    } else {
      return 0;
    }
    return 1;
  }
  return 0;
}

/* A Python float, int or bool v into *x: 1, 0 for anything else (an int
   beyond 64 bits too), -1 a Python error. */
static int traj_scalar(PyObject *v, traj_val *x) {
  if (PyFloat_CheckExact(v)) {
    x->kind = 'f';
    x->d = PyFloat_AS_DOUBLE(v);
    return 1;
  }
  if (PyBool_Check(v)) {
    x->kind = 'b';
    x->i = v == Py_True;
    return 1;
  }
  if (PyLong_CheckExact(v)) {
    int over;
    x->kind = 'i';
    x->i = PyLong_AsLongLongAndOverflow(v, &over);
    if (x->i == -1 && PyErr_Occurred()) return -1;
    if (over > 0) {
      x->kind = 'u';
      x->u = PyLong_AsUnsignedLongLong(v);
      if (x->u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
      }
    } else if (over < 0) {
      return 0;
    }
    return 1;
  }
  return 0;
}

/* Leaf L's value v into dst (the field in the staging record) when it
   goes in unchanged by ReplayBuffer.add's rule: a Python float, int or
   bool for a one-element leaf; a list or tuple of them for a leaf of one
   dim (with or without a leading 1); or a buffer of the leaf's shape
   (copied as it is when of the leaf's type, else converted element by
   element, C-contiguous then). 1 stored, 0 not (the slow path converts
   or refuses, naming the value), -1 a Python error. */
static int traj_put(const traj_leaf *L, PyObject *v, unsigned char *dst) {
  Py_buffer view;
  traj_val x;
  const char *f;
  int ok;
  if (PyFloat_CheckExact(v) || PyLong_CheckExact(v) || PyBool_Check(v)) {
    if (L->count != 1) return 0;
    ok = traj_scalar(v, &x);
    return ok <= 0 ? ok : traj_store(L, &x, dst);
  }
  if (PyList_CheckExact(v) || PyTuple_CheckExact(v)) {
    Py_ssize_t k, n = PySequence_Fast_GET_SIZE(v);
    Py_ssize_t shape[1];
    shape[0] = n;
    if (n != L->count || !traj_shape_ok(L, 1, shape)) return 0;
    for (k = 0; k < n; ++k) {
      ok = traj_scalar(PySequence_Fast_GET_ITEM(v, k), &x);
      if (ok <= 0) return ok;
      if (!traj_store(L, &x, dst + k * L->itemsize)) return 0;
    }
    return 1;
  }
  if (!PyObject_CheckBuffer(v)) return 0;
  if (PyObject_GetBuffer(v, &view, PyBUF_RECORDS_RO) < 0) {
    PyErr_Clear();
    return 0;
  }
  ok = traj_shape_ok(L, view.ndim, view.shape);
  if (ok && view.itemsize == L->itemsize &&
      traj_format_kind(view.format) == L->kind &&
      view.len == (Py_ssize_t)L->count * L->itemsize) {
    if (PyBuffer_IsContiguous(&view, 'C')) {
      memcpy(dst, view.buf, (size_t)view.len);
    } else if (PyBuffer_ToContiguous(dst, &view, view.len, 'C') < 0) {
      PyBuffer_Release(&view);
      return -1;
    }
  } else if (ok && PyBuffer_IsContiguous(&view, 'C') && view.itemsize > 0 &&
             view.len == (Py_ssize_t)L->count * view.itemsize) {
    Py_ssize_t k;
    f = native_format(view.format);
    ok = f[0] && !f[1];
    for (k = 0; ok && k < L->count; ++k)
      ok = traj_read(f[0], view.itemsize,
                     (const unsigned char *)view.buf + k * view.itemsize, &x) &&
           traj_store(L, &x, dst + k * L->itemsize);
  } else {
    ok = 0;
  }
  PyBuffer_Release(&view);
  return ok;
}

/* add(name, tree): TrajectoryAccumulator.add. A flat dict of leaves that
   are exactly of their leaf's type and shape is copied here; anything
   else goes to self._add_slow(name, tree), which converts or refuses. */
static PyObject *Traj_add_tree(TrajObject *self, PyObject *const *args,
                               Py_ssize_t nargs) {
  PyObject *ti, *tree;
  traj_plan *p;
  uint32_t t;
  Py_ssize_t i;
  per_status s;
  if (!traj_planned(self)) return NULL;
  if (nargs != 2)
    return PyErr_Format(PyExc_TypeError,
                        "TrajectoryAccumulator.add(name, tree) takes 2 "
                        "arguments (%zd given)",
                        nargs);
  ti = PyDict_GetItemWithError(self->names, args[0]);
  if (!ti) {
    if (PyErr_Occurred()) PyErr_Clear();
    goto slow;
  }
  t = (uint32_t)PyLong_AsUnsignedLong(ti);
  if (traj_is_full(self, t)) return traj_full(self, t);
  p = &self->plans[t];
  tree = args[1];
  if (!p->fast || !PyDict_CheckExact(tree) ||
      PyDict_GET_SIZE(tree) != p->nleaves)
    goto slow;
  for (i = 0; i < p->nleaves; ++i) {
    const traj_leaf *L = &p->leaves[i];
    PyObject *v = PyDict_GetItemWithError(tree, L->key);
    int r;
    if (!v) {
      if (PyErr_Occurred()) PyErr_Clear();
      goto slow;
    }
    r = traj_put(L, v, p->staging + self->a.fields[L->field].offset);
    if (r < 0) return NULL;
    if (r == 0) goto slow;
  }
  s = per_traj_add_record(&self->a, t, p->staging);
  CHECK_BUF(&self->a, s, "TrajectoryAccumulator.add");
  Py_RETURN_NONE;
slow:
  return PyObject_CallMethod((PyObject *)self, "_add_slow", "OO", args[0],
                             args[1]);
}

/* _add_leaves(t, values): the slow path's copy: values[i] (C-contiguous,
   exactly leaf i's field bytes) into timescale t's next record or its
   record. */
static PyObject *Traj_add_leaves(TrajObject *self, PyObject *args) {
  uint_arg t = {"_add_leaves: t", 0};
  PyObject *vo, *fast;
  traj_plan *p;
  Py_ssize_t i;
  per_status s;
  if (!traj_planned(self) ||
      !PyArg_ParseTuple(args, "O&O:_add_leaves", conv_u32, &t, &vo))
    return NULL;
  if (t.v >= self->a.nscales)
    return PyErr_Format(PyExc_IndexError, "_add_leaves: timescale %u",
                        (unsigned)t.v);
  if (traj_is_full(self, (uint32_t)t.v)) return traj_full(self, (uint32_t)t.v);
  p = &self->plans[t.v];
  fast = PySequence_Fast(vo, "_add_leaves: values");
  if (!fast) return NULL;
  if (PySequence_Fast_GET_SIZE(fast) != p->nleaves) {
    Py_DECREF(fast);
    return PyErr_Format(PyExc_ValueError, "_add_leaves: %zd values, %zd leaves",
                        PySequence_Fast_GET_SIZE(fast), p->nleaves);
  }
  for (i = 0; i < p->nleaves; ++i) {
    const per_traj_field *f = &self->a.fields[p->leaves[i].field];
    Py_buffer v;
    if (get_bytes(PySequence_Fast_GET_ITEM(fast, i), f->bytes, "value", &v) <
        0) {
      Py_DECREF(fast);
      return NULL;
    }
    memcpy(p->staging + f->offset, v.buf, f->bytes);
    PyBuffer_Release(&v);
  }
  Py_DECREF(fast);
  s = per_traj_add_record(&self->a, (uint32_t)t.v, p->staging);
  CHECK_BUF(&self->a, s, "TrajectoryAccumulator.add");
  Py_RETURN_NONE;
}

/* _room(t): None, or the IndexError of an add to timescale t when it is
   a full buffered one (the converting add asks first, so that a full
   timescale is what it reports, as the C add does). */
static PyObject *Traj_room(TrajObject *self, PyObject *arg) {
  uint_arg t = {"_room: t", 0};
  if (!traj_ready(self) || !conv_u32(arg, &t)) return NULL;
  if (t.v >= self->a.nscales)
    return PyErr_Format(PyExc_IndexError, "_room: timescale %u", (unsigned)t.v);
  if (traj_is_full(self, (uint32_t)t.v)) return traj_full(self, (uint32_t)t.v);
  Py_RETURN_NONE;
}

/* _count(t): per_traj_count. */
static PyObject *Traj_count(TrajObject *self, PyObject *arg) {
  uint_arg t = {"_count: t", 0};
  if (!traj_ready(self) || !conv_u32(arg, &t)) return NULL;
  return PyLong_FromUnsignedLong(per_traj_count(&self->a, (uint32_t)t.v));
}

/* _end_at(t, end): per_traj_end_at. */
static PyObject *Traj_end_at(TrajObject *self, PyObject *args) {
  uint_arg t = {"end: timescale", 0}, end = {"end: end", 0};
  if (!traj_ready(self) ||
      !PyArg_ParseTuple(args, "O&O&:end", conv_u32, &t, conv_u32, &end))
    return NULL;
  if (end.v > 255) end.v = 255; /* refused as not a PER_END_* */
  CHECK_BUF(&self->a, per_traj_end_at(&self->a, (uint32_t)t.v, (uint8_t)end.v),
            "TrajectoryAccumulator.end");
  Py_RETURN_NONE;
}

/* _build_parts() -> id: per_traj_build; the parts stay in the
   accumulator (_part_n reads them). */
static PyObject *Traj_build_parts(TrajObject *self, PyObject *unused) {
  per_traj_out out;
  (void)unused;
  if (!traj_ready(self)) return NULL;
  CHECK_BUF(&self->a, per_traj_build(&self->a, &out),
            "TrajectoryAccumulator.build");
  return PyLong_FromUnsignedLongLong((unsigned long long)out.id);
}

/* _part_n(t): records of timescale t in the last build. */
static PyObject *Traj_part_n(TrajObject *self, PyObject *arg) {
  uint_arg t = {"_part_n: t", 0};
  if (!traj_ready(self) || !conv_u32(arg, &t)) return NULL;
  if (t.v >= self->a.nscales)
    return PyErr_Format(PyExc_IndexError, "_part_n: timescale %u",
                        (unsigned)t.v);
  return PyLong_FromUnsignedLong(self->a.parts[t.v].n);
}

/* _add_part(buffer, t) -> (n, id): per_traj_build, then timescale t's
   records and ends straight into the buffer (per_buffer_add_steps, one
   trajectory), without a copy. The buffer's item_size must be t's
   record_bytes and t must hold a record, both checked first. */
static PyObject *Traj_add_part(TrajObject *self, PyObject *args) {
  uint_arg t = {"add_to: step", 0};
  PyObject *bo;
  buf_target b;
  per_traj_out out;
  const per_traj_part *part;
  per_status s;
  char why[sizeof self->a.error];
  if (!traj_ready(self) ||
      !PyArg_ParseTuple(args, "OO&:add_to", &bo, conv_u32, &t))
    return NULL;
  if (get_target(bo, "TrajectoryAccumulator.add_to", &b) < 0) return NULL;
  if (t.v >= self->a.nscales || self->a.scales[t.v].kind != PER_TRAJ_BUFFERED)
    return PyErr_Format(PyExc_ValueError,
                        "add_to: timescale %u is not a buffered one",
                        (unsigned)t.v);
  if (b.item_size != (long long)self->a.scales[t.v].record_bytes)
    return PyErr_Format(PyExc_ValueError,
                        "TrajectoryAccumulator.add_to: the buffer's items are "
                        "%u bytes, timescale '%s''s records %u",
                        (unsigned)b.item_size, self->a.scales[t.v].name,
                        (unsigned)self->a.scales[t.v].record_bytes);
  if (per_traj_count(&self->a, (uint32_t)t.v) == 0)
    return raise_why(PER_ERR_EMPTY, "TrajectoryAccumulator.add_to",
                     "no record to add");
  s = per_traj_build(&self->a, &out);
  CHECK_BUF(&self->a, s, "TrajectoryAccumulator.add_to");
  part = &out.parts[t.v];
  s = b.api->add_steps(b.obj, part->records, part->n, part->ends, why,
                       sizeof why);
  CHECK_WHY(s, why, "TrajectoryAccumulator.add_to");
  return Py_BuildValue("(IK)", part->n, (unsigned long long)out.id);
}

/* _offset(t): where timescale t's records start in the block (the
   object's buffer). */
static PyObject *Traj_offset(TrajObject *self, PyObject *arg) {
  uint_arg t = {"_offset: t", 0};
  if (!traj_ready(self) || !conv_u32(arg, &t)) return NULL;
  if (t.v >= self->a.nscales)
    return PyErr_Format(PyExc_IndexError, "_offset: timescale %u",
                        (unsigned)t.v);
  return PyLong_FromSsize_t(
      (Py_ssize_t)(self->a.scales[t.v].records -
                   (const unsigned char *)self->a.fields));
}

/* _ends_offset(t): where buffered timescale t's episode ends start in
   the block; -1 for a single-item one. */
static PyObject *Traj_ends_offset(TrajObject *self, PyObject *arg) {
  uint_arg t = {"_ends_offset: t", 0};
  const per_traj_scale *sc;
  if (!traj_ready(self) || !conv_u32(arg, &t)) return NULL;
  if (t.v >= self->a.nscales)
    return PyErr_Format(PyExc_IndexError, "_ends_offset: timescale %u",
                        (unsigned)t.v);
  sc = &self->a.scales[t.v];
  return PyLong_FromSsize_t(
      sc->ends ? (Py_ssize_t)(sc->ends - (const unsigned char *)self->a.fields)
               : -1);
}

/* _memory(): the accumulator's block, writable (a _TrajMemory). */
static PyObject *Traj_memory(TrajObject *self, PyObject *unused) {
  (void)unused;
  if (!traj_ready(self)) return NULL;
  if (!self->mem) {
    self->mem = PyObject_New(TrajMemObject, &TrajMemType);
    if (!self->mem) return NULL;
    self->mem->block = self->a.fields;
    self->mem->len = self->block;
    self->mem->exports = 0;
    self->mem->owned = 0;
  }
  Py_INCREF(self->mem);
  return (PyObject *)self->mem;
}

static PyMethodDef Traj_methods[] = {
    {"_add", (PyCFunction)Traj_add, METH_VARARGS, NULL},
    {"_add_step", (PyCFunction)Traj_add_step, METH_VARARGS, NULL},
    {"_end", (PyCFunction)Traj_end, METH_O, NULL},
    {"_build", (PyCFunction)Traj_build, METH_VARARGS, NULL},
    {"_add_to", (PyCFunction)Traj_add_to, METH_VARARGS, NULL},
    {"reset", (PyCFunction)Traj_reset, METH_NOARGS,
     "reset(): drop the partial rollout: every count 0, the single-item\n"
     "(once) records and the episode ends cleared (per_traj_reset)."},
    {"_plan", (PyCFunction)Traj_plan, METH_VARARGS, NULL},
    {"_add_tree", (PyCFunction)(void (*)(void))Traj_add_tree, METH_FASTCALL,
     "add(name, tree): the next record of buffered timescale `name`, or\n"
     "the record of a single-item one, from a tree shaped as the\n"
     "example's. IndexError when a buffered timescale is full; ValueError\n"
     "or TypeError naming the timescale and leaf when a value does not\n"
     "fit; the accumulator unchanged then."},
    {"_add_leaves", (PyCFunction)Traj_add_leaves, METH_VARARGS, NULL},
    {"_room", (PyCFunction)Traj_room, METH_O, NULL},
    {"_count", (PyCFunction)Traj_count, METH_O, NULL},
    {"_end_at", (PyCFunction)Traj_end_at, METH_VARARGS, NULL},
    {"_build_parts", (PyCFunction)Traj_build_parts, METH_NOARGS, NULL},
    {"_part_n", (PyCFunction)Traj_part_n, METH_O, NULL},
    {"_add_part", (PyCFunction)Traj_add_part, METH_VARARGS, NULL},
    {"_offset", (PyCFunction)Traj_offset, METH_O, NULL},
    {"_memory", (PyCFunction)Traj_memory, METH_NOARGS, NULL},
    {"_ends_offset", (PyCFunction)Traj_ends_offset, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Traj_getset[] = {
    {"steps", (getter)Traj_steps, NULL,
     "complete steps so far (per_traj_steps)", NULL},
    {"counts", (getter)Traj_counts, NULL,
     "values added per field since the last build", NULL},
    {"built", (getter)Traj_built, NULL, "trajectories built so far", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject TrajType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "per." PYPER_MODULE "._Traj",
    .tp_basicsize = sizeof(TrajObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Traj_init,
    .tp_dealloc = (destructor)Traj_dealloc,
    .tp_methods = Traj_methods,
    .tp_getset = Traj_getset,
};

/* ---------------------------------------------------------------------
   Store: a per_store (per_store.h), the trajectory store under
   per.TrajectoryStore. Every call but run_writer and stop_writer holds
   the object's lock, taken with the GIL released, and the calls that
   can do I/O or wait (add, write, sample, checkpoint, load) keep the GIL
   released while they run; short ones (update, stats, size, trajectory)
   release it only to take the lock. run_writer runs per_store_run_writer
   without the GIL and without the lock, beside the other calls, as
   per_store.h's THREADS allow: one writer thread, every other call on
   the caller's threads, one at a time (the lock). close() (and dealloc)
   stops the writer, then frees the store; a closed store refuses every
   call with ValueError.
   --------------------------------------------------------------------- */
#if !defined(_WIN32)

typedef struct {
  PyObject_HEAD per_store s;
  uint32_t item_size;       /* s's, kept after close (argument checks) */
  int open;                 /* initialised and not closed; written with
                               both locks held */
  int writer;               /* a thread is in run_writer (under wlock) */
  PyThread_type_lock lock;  /* held by every call on s but the writer's */
  PyThread_type_lock wlock; /* guards open, writer, and s.st for
                               stop_writer and close */
} StoreObject;

static int store_ready(StoreObject *self) {
  return is_ready(self->lock != NULL && self->item_size != 0,
                  "TrajectoryStore");
}

static PyObject *store_closed(const char *where) {
  PyErr_Format(PyExc_ValueError, "%s: the store is closed", where);
  return NULL;
}

/* STORE_CALL(self, closed, stmt): stmt with self's lock held and the GIL
   released, when the store is open; else closed = 1 (stmt not run). */
#define STORE_CALL(self, closed, ...) \
  NOGIL((self)->lock, if (!(self)->open) closed = 1; else { __VA_ARGS__; })
/* the same, and on an error status s the store's message copied into
   why before the lock is let go */
#define STORE_CALL_WHY(self, closed, why, ...) \
  STORE_CALL(self, closed, __VA_ARGS__;        \
             if (s != PER_OK) memcpy((why), (self)->s.error, sizeof(why)))

/* Stop the writer: when a thread has registered in run_writer,
   per_store_stop_writer once (a stop that comes before that thread has
   entered per_store_run_writer is kept for it), then wait until the
   thread has left run_writer. Nothing when none has registered (a stop
   then would be kept for the next writer). The GIL released; not with
   wlock held. */
static void store_stop(StoreObject *self) {
  int busy, stopped = 0;
  for (;;) {
    struct timespec ms = {0, 1000000};
    PyThread_acquire_lock(self->wlock, WAIT_LOCK);
    busy = self->writer;
    /* under wlock: the writer cannot leave between the test and the
       stop, which would keep the stop for the next writer */
    if (busy && !stopped && self->s.st) per_store_stop_writer(&self->s);
    PyThread_release_lock(self->wlock);
    if (!busy) return;
    stopped = 1;
    nanosleep(&ms, NULL);
  }
}

/* Close: wait for the call in progress (the lock), refuse every later
   one, stop the writer, free the store. Idempotent. The GIL released. */
static void store_close(StoreObject *self) {
  PyThread_acquire_lock(self->lock, WAIT_LOCK);
  PyThread_acquire_lock(self->wlock, WAIT_LOCK);
  self->open = 0;
  PyThread_release_lock(self->wlock);
  store_stop(self);
  PyThread_acquire_lock(self->wlock, WAIT_LOCK);
  per_store_free(&self->s);
  PyThread_release_lock(self->wlock);
  PyThread_release_lock(self->lock);
}

static void Store_dealloc(StoreObject *self) {
  /* no thread is in run_writer: it would hold a reference */
  if (self->lock && self->wlock) {
    Py_BEGIN_ALLOW_THREADS store_close(self);
    Py_END_ALLOW_THREADS
  }
  if (self->lock) PyThread_free_lock(self->lock);
  if (self->wlock) PyThread_free_lock(self->wlock);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* An optional byte count: None keeps the default *out. */
static int store_bytes(PyObject *o, uint64_t *out, const char *what) {
  return o == Py_None ? 0 : pyper_uint(o, 64, out, what);
}

/* _Store(path, config, cache_bytes, staging_bytes, segment_bytes, layout,
   resume): per_store_init of directory path; config the per_config dict
   (pyper_config.h: capacity, item_size, the sampling fields), the byte
   counts None for per_store_config_default's, layout the samples' text
   or None, resume PER_STORE_RESUME. */
static int Store_init(StoreObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {
      "path",          "config", "cache_bytes", "staging_bytes",
      "segment_bytes", "layout", "resume",      NULL};
  char why[sizeof self->s.error];
  PyObject *po, *d, *co = Py_None, *so = Py_None, *go = Py_None, *path;
  const char *layout = NULL;
  int resume = 0;
  per_config c;
  per_store_config cfg;
  per_status s;
  if (self->lock) {
    PyErr_SetString(PyExc_RuntimeError, "TrajectoryStore: initialised already");
    return -1;
  }
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!|OOOzp:TrajectoryStore",
                                   kwlist, &po, &PyDict_Type, &d, &co, &so, &go,
                                   &layout, &resume) ||
      pyper_config(d, "TrajectoryStore", &c) < 0)
    return -1;
  cfg = per_store_config_default(c.capacity, c.item_size);
  cfg.buffer = c;
  cfg.layout = layout;
  if (store_bytes(co, &cfg.cache_bytes, "TrajectoryStore: cache_bytes") < 0 ||
      store_bytes(so, &cfg.staging_bytes, "TrajectoryStore: staging_bytes") <
          0 ||
      store_bytes(go, &cfg.segment_bytes, "TrajectoryStore: segment_bytes") <
          0 ||
      !PyUnicode_FSConverter(po, &path))
    return -1;
  if (!(self->lock = PyThread_allocate_lock()) ||
      !(self->wlock = PyThread_allocate_lock())) {
    Py_DECREF(path);
    PyErr_NoMemory();
    return -1;
  }
  Py_BEGIN_ALLOW_THREADS s =
      per_store_init(&self->s, PyBytes_AS_STRING(path), &cfg,
                     resume ? (uint32_t)PER_STORE_RESUME : 0u, NULL);
  memcpy(why, self->s.error, sizeof why);
  Py_END_ALLOW_THREADS Py_DECREF(path);
  if (s != PER_OK) {
    /* a later __init__ may try again */
    PyThread_free_lock(self->lock);
    PyThread_free_lock(self->wlock);
    self->lock = self->wlock = NULL;
    raise_why(s, "TrajectoryStore", why);
    return -1;
  }
  self->item_size = self->s.item_size;
  self->open = 1;
  return 0;
}

/* add(items, T, B, ends, nowait) -> id: per_store_add of T * B samples
   (items: T * B * item_size bytes, sample t * B + b), ends None or T * B
   bytes of PER_END_*, nowait PER_STORE_NOWAIT. */
static PyObject *Store_add(StoreObject *self, PyObject *args) {
  char why[sizeof self->s.error];
  uint_arg Ta = {"TrajectoryStore.add: T", 0},
           Ba = {"TrajectoryStore.add: B", 0};
  PyObject *io, *eo;
  Py_buffer iv, ev;
  Py_ssize_t bytes, ne = 0;
  uint64_t n, id = 0;
  int nowait, closed = 0, have_ends;
  per_status s = PER_OK;
  if (!store_ready(self) ||
      !PyArg_ParseTuple(args, "OO&O&Op:add", &io, conv_u32, &Ta, conv_u32, &Ba,
                        &eo, &nowait))
    return NULL;
  n = Ta.v * Ba.v;
  if (get_array(io, 0, 0, 1, "items", &iv, &bytes) < 0) return NULL;
  if (n > UINT32_MAX || (uint64_t)bytes != n * self->item_size) {
    PyBuffer_Release(&iv);
    PyErr_Format(PyExc_ValueError,
                 "TrajectoryStore.add: items hold %zd bytes; T %u x B %u "
                 "samples of %u bytes are %llu",
                 bytes, (unsigned)Ta.v, (unsigned)Ba.v,
                 (unsigned)self->item_size,
                 (unsigned long long)(n * self->item_size));
    return NULL;
  }
  have_ends = eo != Py_None;
  if (have_ends) {
    if (get_array(eo, 0, 'u', 1, "ends", &ev, &ne) < 0) {
      PyBuffer_Release(&iv);
      return NULL;
    }
    if ((uint64_t)ne != n) {
      PyBuffer_Release(&iv);
      PyBuffer_Release(&ev);
      PyErr_Format(PyExc_ValueError,
                   "TrajectoryStore.add: %llu samples but %zd ends",
                   (unsigned long long)n, ne);
      return NULL;
    }
  }
  STORE_CALL_WHY(
      self, closed, why,
      s = per_store_add(&self->s, iv.buf, (uint32_t)Ta.v, (uint32_t)Ba.v,
                        have_ends ? (const uint8_t *)ev.buf : NULL,
                        nowait ? (uint32_t)PER_STORE_NOWAIT : 0u, &id));
  PyBuffer_Release(&iv);
  if (have_ends) PyBuffer_Release(&ev);
  if (closed) return store_closed("TrajectoryStore.add");
  CHECK_WHY(s, why, "TrajectoryStore.add");
  return PyLong_FromUnsignedLongLong(id);
}

/* add_fields' samples, assembled in the staging area (per_store_add_fill's
   fill): field k's n values of size[k] bytes from src[k], at byte off[k]
   of each sample; the samples zeroed first when the fields leave gaps. */
typedef struct store_fields {
  uint32_t nf, isz, zero;
  const unsigned char **src;
  uint32_t *off, *size;
} store_fields;

static void store_fill(void *ctx, void *dst, uint32_t n) {
  const store_fields *f = (const store_fields *)ctx;
  unsigned char *d = (unsigned char *)dst;
  size_t isz = f->isz, j;
  uint32_t k;
  if (f->zero) memset(d, 0, (size_t)n * isz);
  for (k = 0; k < f->nf; ++k) {
    const unsigned char *sp = f->src[k];
    unsigned char *dp = d + f->off[k];
    size_t sz = f->size[k];
    if (sz == isz) {
      memcpy(dp, sp, (size_t)n * sz);
    } else if (sz == 1) {
      for (j = 0; j < n; ++j) dp[j * isz] = sp[j];
    } else if (sz == 4) {
      for (j = 0; j < n; ++j) memcpy(dp + j * isz, sp + j * 4, 4);
    } else if (sz == 8) {
      for (j = 0; j < n; ++j) memcpy(dp + j * isz, sp + j * 8, 8);
    } else {
      for (j = 0; j < n; ++j) memcpy(dp + j * isz, sp + j * sz, sz);
    }
  }
}

/* add_fields(fields, T, B, ends, nowait, zero) -> id: add's trajectory
   from its fields, each (array, offset, size): a C-contiguous buffer of
   T * B values of `size` bytes, written at byte `offset` of each sample
   (per_store_add_fill: one copy, into the staging area); zero: the
   fields leave gaps, zeroed. */
static PyObject *Store_add_fields(StoreObject *self, PyObject *args) {
  char why[sizeof self->s.error];
  uint_arg Ta = {"TrajectoryStore.add_fields: T", 0},
           Ba = {"TrajectoryStore.add_fields: B", 0};
  PyObject *fo, *eo, *seq = NULL;
  Py_buffer *views = NULL, ev;
  const unsigned char **src = NULL;
  uint32_t *off = NULL, *size = NULL;
  store_fields f;
  Py_ssize_t nf = 0, got = 0, i, ne = 0;
  uint64_t n, id = 0;
  int nowait, zero, closed = 0, have_ends = 0;
  per_status s = PER_OK;
  PyObject *res = NULL;
  if (!store_ready(self) ||
      !PyArg_ParseTuple(args, "OO&O&Opp:add_fields", &fo, conv_u32, &Ta,
                        conv_u32, &Ba, &eo, &nowait, &zero))
    return NULL;
  n = Ta.v * Ba.v;
  seq = PySequence_Fast(fo, "TrajectoryStore.add_fields: a list of fields");
  if (!seq) return NULL;
  nf = PySequence_Fast_GET_SIZE(seq);
  views = (Py_buffer *)PyMem_Calloc((size_t)(nf ? nf : 1), sizeof *views);
  src =
      (const unsigned char **)PyMem_Calloc((size_t)(nf ? nf : 1), sizeof *src);
  off = (uint32_t *)PyMem_Calloc((size_t)(nf ? nf : 1), sizeof *off);
  size = (uint32_t *)PyMem_Calloc((size_t)(nf ? nf : 1), sizeof *size);
  if (!views || !src || !off || !size) {
    PyErr_NoMemory();
    goto done;
  }
  for (i = 0; i < nf; ++i) {
    PyObject *it = PySequence_Fast_GET_ITEM(seq, i), *arr;
    unsigned long long o, z;
    Py_ssize_t bytes;
    if (!PyArg_ParseTuple(it, "OKK:add_fields", &arr, &o, &z)) goto done;
    if (get_array(arr, 0, 0, 1, "TrajectoryStore.add_fields: a field",
                  &views[i], &bytes) < 0)
      goto done;
    ++got;
    if (z == 0 || o + z > self->item_size || (uint64_t)bytes != n * z) {
      PyErr_Format(PyExc_ValueError,
                   "TrajectoryStore.add_fields: field %zd holds %zd bytes at "
                   "offset %llu, size %llu; T %u x B %u samples of %u bytes",
                   i, bytes, o, z, (unsigned)Ta.v, (unsigned)Ba.v,
                   (unsigned)self->item_size);
      goto done;
    }
    src[i] = (const unsigned char *)views[i].buf;
    off[i] = (uint32_t)o;
    size[i] = (uint32_t)z;
  }
  if (n > UINT32_MAX) {
    PyErr_SetString(PyExc_ValueError,
                    "TrajectoryStore.add_fields: T x B is above 2^32 - 1");
    goto done;
  }
  have_ends = eo != Py_None;
  if (have_ends) {
    if (get_array(eo, 0, 'u', 1, "ends", &ev, &ne) < 0) {
      have_ends = 0;
      goto done;
    }
    if ((uint64_t)ne != n) {
      PyErr_Format(PyExc_ValueError,
                   "TrajectoryStore.add_fields: %llu samples but %zd ends",
                   (unsigned long long)n, ne);
      goto done;
    }
  }
  f.nf = (uint32_t)nf;
  f.isz = self->item_size;
  f.zero = (uint32_t)zero;
  f.src = src;
  f.off = off;
  f.size = size;
  STORE_CALL_WHY(
      self, closed, why,
      s = per_store_add_fill(&self->s, (uint32_t)Ta.v, (uint32_t)Ba.v,
                             have_ends ? (const uint8_t *)ev.buf : NULL,
                             nowait ? (uint32_t)PER_STORE_NOWAIT : 0u, &id,
                             store_fill, &f));
  if (closed) {
    res = store_closed("TrajectoryStore.add_fields");
    goto done;
  }
  res = s != PER_OK ? raise_why(s, "TrajectoryStore.add_fields", why)
                    : PyLong_FromUnsignedLongLong(id);
done:
  for (i = 0; i < got; ++i) PyBuffer_Release(&views[i]);
  if (have_ends) PyBuffer_Release(&ev);
  PyMem_Free(views);
  PyMem_Free(src);
  PyMem_Free(off);
  PyMem_Free(size);
  Py_XDECREF(seq);
  return res;
}

/* write(): per_store_write, on the caller's thread. */
static PyObject *Store_write(StoreObject *self, PyObject *unused) {
  char why[sizeof self->s.error];
  int closed = 0;
  per_status s = PER_OK;
  (void)unused;
  if (!store_ready(self)) return NULL;
  STORE_CALL_WHY(self, closed, why, s = per_store_write(&self->s));
  if (closed) return store_closed("TrajectoryStore.write");
  CHECK_WHY(s, why, "TrajectoryStore.write");
  Py_RETURN_NONE;
}

/* run_writer(): per_store_run_writer on the calling thread, the GIL
   released throughout, until stop_writer or close. One writer at a time
   (per.Error PER_ERR_ARG for a second). */
static PyObject *Store_run_writer(StoreObject *self, PyObject *unused) {
  char why[sizeof self->s.error];
  int state;
  per_status s = PER_OK;
  (void)unused;
  if (!store_ready(self)) return NULL;
  why[0] = 0;
  /* state: -1 closed, 1 a writer runs, 0 this thread is the writer */
  LOCKED(self->wlock, state = self->open ? self->writer : -1;
         if (state == 0) self->writer = 1);
  if (state < 0) return store_closed("TrajectoryStore.run_writer");
  if (state > 0)
    return raise_why(PER_ERR_ARG, "TrajectoryStore.run_writer",
                     "a writer runs already");
  Py_BEGIN_ALLOW_THREADS s = per_store_run_writer(&self->s);
  /* The writer's own message (s.error belongs to the caller's thread);
     the store stays allocated until `writer` is 0 (store_close waits). */
  if (s != PER_OK) per_store_writer_error(&self->s, why, sizeof why);
  PyThread_acquire_lock(self->wlock, WAIT_LOCK);
  self->writer = 0;
  PyThread_release_lock(self->wlock);
  Py_END_ALLOW_THREADS CHECK_WHY(s, why, "TrajectoryStore.run_writer");
  Py_RETURN_NONE;
}

/* stop_writer(): make run_writer return (after its current append) and
   wait until it has; nothing when none runs. */
static PyObject *Store_stop_writer(StoreObject *self, PyObject *unused) {
  (void)unused;
  if (!store_ready(self)) return NULL;
  Py_BEGIN_ALLOW_THREADS store_stop(self);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* sample(B, unique, beta, window, trajectories) -> (items, ids, weights):
   per_store_sample into new bytearrays of B * item_size bytes, B uint64
   and B float32; beta None for the schedule's. */
static PyObject *Store_sample(StoreObject *self, PyObject *args) {
  char why[sizeof self->s.error];
  uint_arg Ba = {"TrajectoryStore.sample: num_chunks", 0},
           wa = {"TrajectoryStore.sample: window", 0};
  PyObject *bo, *items = NULL, *ids = NULL, *w = NULL;
  int unique, traj, closed = 0;
  per_sample_opts opts;
  per_status s = PER_OK;
  uint64_t bytes;
  if (!store_ready(self) ||
      !PyArg_ParseTuple(args, "O&pOO&p:sample", conv_u32, &Ba, &unique, &bo,
                        conv_u32, &wa, &traj))
    return NULL;
  memset(&opts, 0, sizeof opts);
  opts.flags = (unique ? (uint32_t)PER_SAMPLE_UNIQUE : 0u) |
               (traj ? (uint32_t)PER_SAMPLE_TRAJECTORIES : 0u);
  opts.window = (uint32_t)wa.v;
  if (bo != Py_None) {
    opts.beta = PyFloat_AsDouble(bo);
    if (opts.beta == -1.0 && PyErr_Occurred()) return NULL;
    opts.flags |= PER_SAMPLE_BETA;
  }
  bytes = Ba.v * self->item_size;
  if (bytes > (uint64_t)PY_SSIZE_T_MAX || Ba.v * 8 > (uint64_t)PY_SSIZE_T_MAX)
    return PyErr_NoMemory();
  items = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)bytes);
  ids = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(Ba.v * 8));
  w = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(Ba.v * 4));
  if (!items || !ids || !w) goto fail;
  {
    void *ip = PyByteArray_AS_STRING(items);
    uint64_t *dp = (uint64_t *)(void *)PyByteArray_AS_STRING(ids);
    float *wp = (float *)(void *)PyByteArray_AS_STRING(w);
    STORE_CALL_WHY(
        self, closed, why,
        s = per_store_sample(&self->s, (uint32_t)Ba.v, &opts, ip, dp, wp));
  }
  if (closed) {
    store_closed("TrajectoryStore.sample");
    goto fail;
  }
  if (s != PER_OK) {
    raise_why(s, "TrajectoryStore.sample", why);
    goto fail;
  }
  return Py_BuildValue("(NNN)", items, ids, w);
fail:
  Py_XDECREF(items);
  Py_XDECREF(ids);
  Py_XDECREF(w);
  return NULL;
}

/* update(ids, td) -> stale: per_store_update (ids uint64, td float32, as
   many). */
static PyObject *Store_update(StoreObject *self, PyObject *args) {
  char why[sizeof self->s.error];
  PyObject *io, *to;
  Py_buffer iv, tv;
  uint32_t ni, stale = 0;
  int closed = 0;
  per_status s = PER_OK;
  if (!store_ready(self) || !PyArg_ParseTuple(args, "OO:update", &io, &to) ||
      get_ids_td(io, to, 1, &iv, &tv, &ni) < 0)
    return NULL;
  STORE_CALL_WHY(self, closed, why,
                 s = per_store_update(&self->s, (const uint64_t *)iv.buf,
                                      (const float *)tv.buf, ni, &stale));
  PyBuffer_Release(&iv);
  PyBuffer_Release(&tv);
  if (closed) return store_closed("TrajectoryStore.update");
  CHECK_WHY(s, why, "TrajectoryStore.update");
  return PyLong_FromUnsignedLong(stale);
}

/* checkpoint(json=True): per_store_checkpoint (PER_STORE_NO_JSON when
   json is false). */
static PyObject *Store_checkpoint(StoreObject *self, PyObject *args,
                                  PyObject *kw) {
  static char *kwlist[] = {"json", NULL};
  char why[sizeof self->s.error];
  int json = 1, closed = 0;
  per_status s = PER_OK;
  if (!store_ready(self) ||
      !PyArg_ParseTupleAndKeywords(args, kw, "|p:checkpoint", kwlist, &json))
    return NULL;
  STORE_CALL_WHY(self, closed, why,
                 s = per_store_checkpoint(
                     &self->s, json ? 0u : (uint32_t)PER_STORE_NO_JSON));
  if (closed) return store_closed("TrajectoryStore.save_checkpoint");
  CHECK_WHY(s, why, "TrajectoryStore.save_checkpoint");
  Py_RETURN_NONE;
}

/* load(path, rank, world, quick): per_store_load. */
static PyObject *Store_load(StoreObject *self, PyObject *args) {
  char why[sizeof self->s.error];
  PyObject *po, *path;
  uint_arg ra = {"TrajectoryStore.load_checkpoint: rank", 0},
           wa = {"TrajectoryStore.load_checkpoint: world_size", 0};
  int quick, closed = 0;
  per_status s = PER_OK;
  if (!store_ready(self) ||
      !PyArg_ParseTuple(args, "OO&O&p:load", &po, conv_u32, &ra, conv_u32, &wa,
                        &quick) ||
      !PyUnicode_FSConverter(po, &path))
    return NULL;
  STORE_CALL_WHY(
      self, closed, why,
      s = per_store_load(&self->s, PyBytes_AS_STRING(path), (uint32_t)ra.v,
                         (uint32_t)wa.v,
                         quick ? (uint32_t)PER_STORE_LOAD_QUICK : 0u));
  Py_DECREF(path);
  if (closed) return store_closed("TrajectoryStore.load_checkpoint");
  CHECK_WHY(s, why, "TrajectoryStore.load_checkpoint");
  Py_RETURN_NONE;
}

/* stats() -> dict: every per_store_stats field. */
static PyObject *Store_stats(StoreObject *self, PyObject *unused) {
  per_store_stats t;
  int closed = 0;
  (void)unused;
  if (!store_ready(self)) return NULL;
  STORE_CALL(self, closed, per_store_stats_of(&self->s, &t));
  if (closed) return store_closed("TrajectoryStore.stats");
#define STAT(f) #f, (unsigned long long)t.f
  return Py_BuildValue(
      "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,"
      "s:K,s:K}",
      STAT(trajectories), STAT(samples), STAT(added_trajectories),
      STAT(added_samples), STAT(disk_bytes), STAT(segments), STAT(staged_bytes),
      STAT(staged_trajectories), STAT(cached_bytes), STAT(cache_hits),
      STAT(cache_misses), STAT(reads), STAT(read_bytes),
      STAT(written_trajectories), STAT(written_bytes), STAT(waits), STAT(busy),
      STAT(checkpoints));
#undef STAT
}

/* trajectory(id) -> dict: per_store_trajectory. */
static PyObject *Store_trajectory(StoreObject *self, PyObject *arg) {
  per_store_traj_info t;
  per_status s = PER_OK;
  uint64_t id;
  int closed = 0, i, k = 0;
  char u[37];
  static const char hex[] = "0123456789abcdef";
  if (!store_ready(self) ||
      pyper_uint(arg, 64, &id, "TrajectoryStore.trajectory: id") < 0)
    return NULL;
  STORE_CALL(self, closed, s = per_store_trajectory(&self->s, id, &t));
  if (closed) return store_closed("TrajectoryStore.trajectory");
  if (s == PER_ERR_INDEX) {
    char why[96];
    snprintf(why, sizeof why, "no stored trajectory has id %llu",
             (unsigned long long)id);
    return raise_why(s, "TrajectoryStore.trajectory", why);
  }
  CHECK(s, "TrajectoryStore.trajectory");
  for (i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) u[k++] = '-';
    u[k++] = hex[t.uuid[i] >> 4];
    u[k++] = hex[t.uuid[i] & 15];
  }
  u[k] = 0;
  return Py_BuildValue(
      "{s:K,s:s,s:I,s:(II),s:I,s:I,s:O,s:O}", "id", (unsigned long long)t.id,
      "uuid", u, "num_samples", t.num_samples, "shape", t.T, t.B,
      "max_episode_length", t.max_episode_length, "live", t.live, "written",
      t.written ? Py_True : Py_False, "cached", t.cached ? Py_True : Py_False);
}

/* check(): per_store_check; not while a writer runs (RuntimeError). */
static PyObject *Store_check(StoreObject *self, PyObject *unused) {
  int closed = 0, busy = 0;
  per_status s = PER_OK;
  (void)unused;
  if (!store_ready(self)) return NULL;
  STORE_CALL(self, closed, PyThread_acquire_lock(self->wlock, WAIT_LOCK);
             busy = self->writer; if (!busy) s = per_store_check(&self->s);
             PyThread_release_lock(self->wlock));
  if (closed) return store_closed("TrajectoryStore.check");
  if (busy) {
    PyErr_SetString(PyExc_RuntimeError,
                    "TrajectoryStore.check: not while the writer runs "
                    "(stop_writer first)");
    return NULL;
  }
  CHECK(s, "TrajectoryStore.check");
  Py_RETURN_NONE;
}

/* close(): stop the writer, free the store (its files stay); again:
   nothing. */
static PyObject *Store_close(StoreObject *self, PyObject *unused) {
  (void)unused;
  if (!store_ready(self)) return NULL;
  Py_BEGIN_ALLOW_THREADS store_close(self);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

static PyObject *Store_size(StoreObject *self, void *c) {
  uint32_t n = 0;
  int closed = 0;
  (void)c;
  if (!store_ready(self)) return NULL;
  STORE_CALL(self, closed, n = per_store_size(&self->s));
  if (closed) return store_closed("TrajectoryStore.size");
  return PyLong_FromUnsignedLong(n);
}

static PyObject *Store_closed(StoreObject *self, void *c) {
  int open = 0;
  (void)c;
  if (self->wlock) LOCKED(self->wlock, open = self->open);
  return PyBool_FromLong(!open);
}

static PyObject *Store_item_size(StoreObject *self, void *c) {
  (void)c;
  return PyLong_FromUnsignedLong(self->item_size);
}

static PyMethodDef Store_methods[] = {
    {"add", (PyCFunction)Store_add, METH_VARARGS,
     "add(items, T, B, ends, nowait) -> id (per_store_add)"},
    {"add_fields", (PyCFunction)Store_add_fields, METH_VARARGS,
     "add_fields(fields, T, B, ends, nowait, zero) -> id "
     "(per_store_add_fill)"},
    {"write", (PyCFunction)Store_write, METH_NOARGS,
     "write(): append what is staged now (per_store_write)"},
    {"run_writer", (PyCFunction)Store_run_writer, METH_NOARGS,
     "run_writer(): the writer loop, the GIL released, until stop_writer "
     "(per_store_run_writer)"},
    {"stop_writer", (PyCFunction)Store_stop_writer, METH_NOARGS,
     "stop_writer(): make run_writer return and wait for it"},
    {"sample", (PyCFunction)Store_sample, METH_VARARGS,
     "sample(B, unique, beta, window, trajectories) -> (items, ids, "
     "weights) bytearrays (per_store_sample)"},
    {"update", (PyCFunction)Store_update, METH_VARARGS,
     "update(ids, td) -> stale (per_store_update)"},
    {"checkpoint", (PyCFunction)(void (*)(void))Store_checkpoint,
     METH_VARARGS | METH_KEYWORDS,
     "checkpoint(json=True) (per_store_checkpoint)"},
    {"load", (PyCFunction)Store_load, METH_VARARGS,
     "load(path, rank, world, quick) (per_store_load)"},
    {"stats", (PyCFunction)Store_stats, METH_NOARGS,
     "stats() -> dict (per_store_stats_of)"},
    {"trajectory", (PyCFunction)Store_trajectory, METH_O,
     "trajectory(id) -> dict (per_store_trajectory)"},
    {"check", (PyCFunction)Store_check, METH_NOARGS,
     "check() (per_store_check; not while a writer runs)"},
    {"close", (PyCFunction)Store_close, METH_NOARGS,
     "close(): stop the writer and free the store (per_store_free)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Store_getset[] = {
    {"size", (getter)Store_size, NULL, "samples stored (per_store_size)", NULL},
    {"closed", (getter)Store_closed, NULL, "True once closed", NULL},
    {"item_size", (getter)Store_item_size, NULL, "bytes of one sample", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject StoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "per." PYPER_MODULE "._Store",
    .tp_basicsize = sizeof(StoreObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Store_init,
    .tp_dealloc = (destructor)Store_dealloc,
    .tp_methods = Store_methods,
    .tp_getset = Store_getset,
};

#endif /* !_WIN32 */

/* ---------------------------------------------------------------------
   NetServer: a per_net_server (per_net.h), the request handling of
   per.net.Server: named tables from a spec text, one request (bytes) in,
   one reply (bytes) out. The transport (ZeroMQ) is per/net.py's. Every
   call holds the object's lock; handle, save, load, save_all and
   restore_all release
   the GIL while per_net.h works, so the serving thread and the process's
   other threads go on meanwhile.
   --------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD per_net_server s;
  int ready;
  PyThread_type_lock lock; /* held by every call on s */
} NetObject;

static void NetServer_dealloc(NetObject *self) {
  per_net_free(&self->s);
  if (self->lock) PyThread_free_lock(self->lock);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _NetServer(spec, max_message): per_net_init(max_message), then the
   tables of the spec text (per_net_add_spec). per.Error on a refusal,
   with the server's message (the spec's line). */
static int NetServer_init(NetObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"spec", "max_message", NULL};
  char why[sizeof self->s.error];
  PyObject *so;
  const char *text;
  Py_ssize_t len;
  uint_arg mm = {"per.net.Server: max_message", 0};
  per_status s;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "UO&:_NetServer", kwlist, &so,
                                   conv_u64, &mm) ||
      !(text = PyUnicode_AsUTF8AndSize(so, &len)))
    return -1;
  if (strlen(text) != (size_t)len) {
    PyErr_SetString(PyExc_ValueError,
                    "per.net.Server: the spec text holds a NUL character");
    return -1;
  }
  if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
    PyErr_NoMemory();
    return -1;
  }
  LOCKED(self->lock, per_net_free(&self->s); self->ready = 0;
         s = per_net_init(&self->s, mm.v, NULL);
         if (s == PER_OK) s = per_net_add_spec(&self->s, text);
         memcpy(why, self->s.error, sizeof why);
         if (s != PER_OK) per_net_free(&self->s));
  if (s != PER_OK) {
    raise_why(s, "per.net.Server", why);
    return -1;
  }
  self->ready = 1;
  return 0;
}

#define net_ready(o) is_ready((o)->ready, "per.net.Server")

/* handle(request) -> bytes: the reply to one request (per_net_handle),
   a copy. The request is any C-contiguous buffer; every request has a
   reply (a refusal's says why). */
static PyObject *NetServer_handle(NetObject *self, PyObject *arg) {
  Py_buffer v;
  const void *reply = NULL;
  size_t len = 0;
  PyObject *out;
  per_status s;
  if (!net_ready(self) || PyObject_GetBuffer(arg, &v, PyBUF_C_CONTIGUOUS) < 0)
    return NULL;
  /* the reply is the server's memory until its next call: copied before
     the lock is let go (s is in the reply) */
  lock_wait(self->lock);
  Py_BEGIN_ALLOW_THREADS s =
      per_net_handle(&self->s, v.buf, (size_t)v.len, &reply, &len);
  Py_END_ALLOW_THREADS out =
      PyBytes_FromStringAndSize((const char *)reply, (Py_ssize_t)len);
  PyThread_release_lock(self->lock);
  PyBuffer_Release(&v);
  (void)s;
  return out;
}

/* tables() -> list of the tables' names, in the order added. */
static PyObject *NetServer_tables(NetObject *self, PyObject *unused) {
  PyObject *list;
  uint32_t k;
  (void)unused;
  if (!net_ready(self) || !(list = PyList_New(0))) return NULL;
  lock_wait(self->lock);
  for (k = 0; k < self->s.ntables; ++k) {
    PyObject *name = PyUnicode_DecodeUTF8(
        self->s.tables[k]->name, (Py_ssize_t)strlen(self->s.tables[k]->name),
        "replace");
    if (!name || PyList_Append(list, name) < 0) {
      Py_XDECREF(name);
      Py_DECREF(list);
      list = NULL;
      break;
    }
    Py_DECREF(name);
  }
  PyThread_release_lock(self->lock);
  return list;
}

/* The table named by the str name (the lock held); NULL with a KeyError
   when there is none. */
static per_net_table *net_table(NetObject *self, PyObject *name,
                                const char *call) {
  Py_ssize_t len;
  const char *n = PyUnicode_AsUTF8AndSize(name, &len);
  per_net_table *t;
  if (!n) return NULL;
  t = per_net_find(&self->s, n, (size_t)len);
  if (!t) PyErr_Format(PyExc_KeyError, "%s: no table named %R", call, name);
  return t;
}

/* config(name) -> dict: the table's per_config (pyper_config.h's keys)
   and "layout", its layout text. */
static PyObject *NetServer_config(NetObject *self, PyObject *name) {
  per_net_table *t;
  PyObject *d = NULL, *lay;
  if (!net_ready(self)) return NULL;
  if (!PyUnicode_Check(name))
    return PyErr_Format(PyExc_TypeError,
                        "per.net.Server.config: a table's name is a str, not "
                        "%.200s",
                        Py_TYPE(name)->tp_name);
  lock_wait(self->lock);
  t = net_table(self, name, "per.net.Server.config");
  if (t && (d = pyper_config_dict(&t->buf.cfg)) != NULL) {
    lay = PyUnicode_DecodeUTF8(t->buf.layout, (Py_ssize_t)strlen(t->buf.layout),
                               "replace");
    if (!lay || PyDict_SetItemString(d, "layout", lay) < 0) Py_CLEAR(d);
    Py_XDECREF(lay);
  }
  PyThread_release_lock(self->lock);
  return d;
}

/* save(name, path) and load(name, path): per_buffer_save of table
   name's buffer, and per_net_load into it (its rate limiter's counts
   set from what it holds). */
static PyObject *net_file(NetObject *self, PyObject *args, int load) {
  char why[sizeof self->s.error];
  const char *call = load ? "per.net.Server.load" : "per.net.Server.save";
  PyObject *name, *path;
  per_net_table *t;
  per_status s = PER_OK;
  if (!net_ready(self) ||
      !PyArg_ParseTuple(args, load ? "UO&:load" : "UO&:save", &name,
                        PyUnicode_FSConverter, &path))
    return NULL;
  lock_wait(self->lock);
  t = net_table(self, name, call);
  if (t) {
    Py_BEGIN_ALLOW_THREADS s =
        load ? per_net_load(&self->s, t, PyBytes_AS_STRING(path))
             : per_buffer_save(&t->buf, PyBytes_AS_STRING(path));
    memcpy(why, load ? self->s.error : t->buf.error, sizeof why);
    Py_END_ALLOW_THREADS
  }
  PyThread_release_lock(self->lock);
  Py_DECREF(path);
  if (!t) return NULL;
  CHECK_WHY(s, why, call);
  Py_RETURN_NONE;
}

/* save_all(dir) and restore_all(dir): per_net_save of the whole server
   into the directory dir, and per_net_restore from it. */
static PyObject *net_dir(NetObject *self, PyObject *args, int restore) {
  char why[sizeof self->s.error];
  const char *call =
      restore ? "per.net.Server.restore_all" : "per.net.Server.save_all";
  PyObject *dir;
  per_status s;
  if (!net_ready(self) ||
      !PyArg_ParseTuple(args, restore ? "O&:restore_all" : "O&:save_all",
                        PyUnicode_FSConverter, &dir))
    return NULL;
  lock_wait(self->lock);
  Py_BEGIN_ALLOW_THREADS s =
      restore ? per_net_restore(&self->s, PyBytes_AS_STRING(dir))
              : per_net_save(&self->s, PyBytes_AS_STRING(dir));
  memcpy(why, self->s.error, sizeof why);
  Py_END_ALLOW_THREADS PyThread_release_lock(self->lock);
  Py_DECREF(dir);
  CHECK_WHY(s, why, call);
  Py_RETURN_NONE;
}

static PyObject *NetServer_save(NetObject *self, PyObject *args) {
  return net_file(self, args, 0);
}

static PyObject *NetServer_save_all(NetObject *self, PyObject *args) {
  return net_dir(self, args, 0);
}

static PyObject *NetServer_restore_all(NetObject *self, PyObject *args) {
  return net_dir(self, args, 1);
}

static PyObject *NetServer_load(NetObject *self, PyObject *args) {
  return net_file(self, args, 1);
}

static PyObject *NetServer_max_message(NetObject *self, void *c) {
  (void)c;
  if (!net_ready(self)) return NULL;
  return PyLong_FromUnsignedLongLong(self->s.max_message);
}

/* generation and repeats: s->generation (the checkpoint last saved or
   restored, 0 for none) and s->repeats (once-only requests answered
   from memory), read under the lock. */
static PyObject *NetServer_count(NetObject *self, void *c) {
  uint64_t v;
  if (!net_ready(self)) return NULL;
  LOCKED(self->lock, v = c ? self->s.repeats : self->s.generation);
  return PyLong_FromUnsignedLongLong(v);
}

static PyMethodDef NetServer_methods[] = {
    {"handle", (PyCFunction)NetServer_handle, METH_O,
     "handle(request) -> bytes: the reply to one request (per_net_handle)"},
    {"tables", (PyCFunction)NetServer_tables, METH_NOARGS,
     "tables() -> list of str: the tables' names"},
    {"config", (PyCFunction)NetServer_config, METH_O,
     "config(name) -> dict: a table's per_config and layout"},
    {"save", (PyCFunction)NetServer_save, METH_VARARGS,
     "save(name, path): per_buffer_save of a table"},
    {"save_all", (PyCFunction)NetServer_save_all, METH_VARARGS,
     "save_all(dir): per_net_save of the whole server"},
    {"load", (PyCFunction)NetServer_load, METH_VARARGS,
     "load(name, path): per_buffer_load of a table"},
    {"restore_all", (PyCFunction)NetServer_restore_all, METH_VARARGS,
     "restore_all(dir): per_net_restore of the whole server"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef NetServer_getset[] = {
    {"max_message", (getter)NetServer_max_message, NULL,
     "the largest request or reply, bytes", NULL},
    {"generation", (getter)NetServer_count, NULL,
     "the checkpoint last saved or restored (0: none)", NULL},
    {"repeats", (getter)NetServer_count, NULL,
     "once-only requests answered from memory", (void *)1},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject NetServerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "per." PYPER_MODULE "._NetServer",
    .tp_basicsize = sizeof(NetObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)NetServer_init,
    .tp_dealloc = (destructor)NetServer_dealloc,
    .tp_methods = NetServer_methods,
    .tp_getset = NetServer_getset,
};

/* nstep_save(adders, path) / nstep_load(adders, path): per_nstep_save and
   per_nstep_load over a list of adders (one file). The structs are
   copied into one array for the call (their rings are shared, not
   copied) and copied back after a load. */
static per_nstep *nstep_array(PyObject *seq, Py_ssize_t *n) {
  Py_ssize_t i;
  per_nstep *arr;
  PyObject *fast = PySequence_Fast(seq, "adders must be a sequence of NStep");
  if (!fast) return NULL;
  *n = PySequence_Fast_GET_SIZE(fast);
  if (*n == 0 || count32(*n, "adders") < 0) {
    Py_DECREF(fast);
    if (!PyErr_Occurred()) raise_status(PER_ERR_ARG, "no adders");
    return NULL;
  }
  arr = PyMem_Malloc((size_t)*n * sizeof *arr);
  if (!arr) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return NULL;
  }
  for (i = 0; i < *n; i++) {
    PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
    if (!PyObject_TypeCheck(o, &NStepType) || !nstep_ready((NStepObject *)o)) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "adders must be NStep objects");
      PyMem_Free(arr);
      Py_DECREF(fast);
      return NULL;
    }
    arr[i] = ((NStepObject *)o)->a;
  }
  Py_DECREF(fast);
  return arr;
}

static PyObject *mod_nstep_save(PyObject *m, PyObject *args) {
  PyObject *seq, *bytes;
  Py_ssize_t n;
  per_nstep *arr;
  per_status s;
  (void)m;
  if (!PyArg_ParseTuple(args, "OO&:nstep_save", &seq, PyUnicode_FSConverter,
                        &bytes))
    return NULL;
  if (!(arr = nstep_array(seq, &n))) {
    Py_DECREF(bytes);
    return NULL;
  }
  s = per_nstep_save(arr, (uint32_t)n, PyBytes_AS_STRING(bytes));
  PyMem_Free(arr);
  Py_DECREF(bytes);
  CHECK(s, "nstep_save");
  Py_RETURN_NONE;
}

static PyObject *mod_nstep_load(PyObject *m, PyObject *args) {
  PyObject *seq, *bytes, *fast;
  Py_ssize_t n, i;
  per_nstep *arr;
  per_status s;
  (void)m;
  if (!PyArg_ParseTuple(args, "OO&:nstep_load", &seq, PyUnicode_FSConverter,
                        &bytes))
    return NULL;
  if (!(arr = nstep_array(seq, &n))) {
    Py_DECREF(bytes);
    return NULL;
  }
  s = per_nstep_load(arr, (uint32_t)n, PyBytes_AS_STRING(bytes));
  Py_DECREF(bytes);
  if (s == PER_OK) {
    fast = PySequence_Fast(seq, "adders must be a sequence of NStep");
    if (!fast) {
      PyMem_Free(arr);
      return NULL;
    }
    for (i = 0; i < n; i++)
      ((NStepObject *)PySequence_Fast_GET_ITEM(fast, i))->a = arr[i];
    Py_DECREF(fast);
  }
  PyMem_Free(arr);
  CHECK(s, "nstep_load");
  Py_RETURN_NONE;
}

/* config_default(capacity, item_size) -> dict: per_config_default. */
static PyObject *mod_config_default(PyObject *m, PyObject *args) {
  uint_arg capacity = {"config_default: capacity", 0},
           item_size = {"config_default: item_size", 0};
  per_config g;
  (void)m;
  if (!PyArg_ParseTuple(args, "O&O&:config_default", conv_u32, &capacity,
                        conv_u32, &item_size))
    return NULL;
  g = per_config_default((uint32_t)capacity.v, (uint32_t)item_size.v);
  return pyper_config_dict(&g);
}

/* frames_config_default(capacity, frame_bytes, stack, action_size) ->
   dict: per_frames_config_default, as FrameBuffer.config names it. */
static PyObject *mod_frames_config_default(PyObject *m, PyObject *args) {
  uint_arg capacity = {"frames_config_default: capacity", 0},
           frame_bytes = {"frames_config_default: frame_bytes", 0},
           stack = {"frames_config_default: stack", 0},
           action_size = {"frames_config_default: action_size", 0};
  per_frames_config g;
  (void)m;
  if (!PyArg_ParseTuple(args, "O&O&O&O&:frames_config_default", conv_u32,
                        &capacity, conv_u32, &frame_bytes, conv_u32, &stack,
                        conv_u32, &action_size))
    return NULL;
  g = per_frames_config_default((uint32_t)capacity.v, (uint32_t)frame_bytes.v,
                                (uint32_t)stack.v, (uint32_t)action_size.v);
  return frames_config_dict(&g);
}

/* ckpt_info(path) -> dict: per_ckpt_read_info; the config's fields (as
   config_default's dict) and version, real_bytes, size, added, step,
   layout. */
static PyObject *mod_ckpt_info(PyObject *m, PyObject *arg) {
  PyObject *bytes, *d;
  per_ckpt_info info;
  per_status s;
  (void)m;
  if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
  s = per_ckpt_read_info(PyBytes_AS_STRING(bytes), &info);
  Py_DECREF(bytes);
  CHECK(s, "ckpt_info");
  d = pyper_config_dict(&info.cfg);
  if (!d) return NULL;
#define PY_SET(key, obj)                     \
  do {                                       \
    if (pyper_set_item(d, key, (obj)) < 0) { \
      Py_DECREF(d);                          \
      return NULL;                           \
    }                                        \
  } while (0)
  PY_SET("version", PyLong_FromUnsignedLong(info.version));
  PY_SET("real_bytes", PyLong_FromUnsignedLong(info.real_bytes));
  PY_SET("size", PyLong_FromUnsignedLong(info.size));
  PY_SET("added", PyLong_FromUnsignedLongLong(info.added));
  PY_SET("step", PyLong_FromUnsignedLongLong(info.step));
  PY_SET("layout",
         PyUnicode_DecodeUTF8(info.layout, (Py_ssize_t)strlen(info.layout),
                              "replace"));
#undef PY_SET
  return d;
}

static PyObject *mod_status_name(PyObject *m, PyObject *arg) {
  long v = PyLong_AsLong(arg);
  (void)m;
  if (v == -1 && PyErr_Occurred()) return NULL;
  if (v < 0 || v >= PER_STATUS_COUNT)
    return PyUnicode_FromString("PER_ERR_UNKNOWN");
  return PyUnicode_FromString(status_names[v]);
}

static PyObject *mod_crc32c(PyObject *m, PyObject *args) {
  PyObject *o;
  uint_arg crc = {"crc32c: crc", 0};
  uint32_t out;
  Py_buffer v;
  Py_ssize_t n;
  (void)m;
  if (!PyArg_ParseTuple(args, "O|O&:crc32c", &o, conv_u32, &crc)) return NULL;
  if (get_array(o, 0, 0, 1, "data", &v, &n) < 0) return NULL;
  out = per_crc32c((uint32_t)crc.v, v.buf, (size_t)n);
  PyBuffer_Release(&v);
  return PyLong_FromUnsignedLong(out);
}

/* snapshot_write(data, path): per_snapshot_write, the GIL released (for
   ReplayBuffer.save_async's thread). */
static PyObject *mod_snapshot_write(PyObject *m, PyObject *args) {
  Py_buffer v;
  PyObject *bytes;
  per_status s;
  (void)m;
  if (!PyArg_ParseTuple(args, "y*O&:snapshot_write", &v, PyUnicode_FSConverter,
                        &bytes))
    return NULL;
  Py_BEGIN_ALLOW_THREADS s =
      per_snapshot_write(v.buf, (size_t)v.len, PyBytes_AS_STRING(bytes), NULL);
  Py_END_ALLOW_THREADS PyBuffer_Release(&v);
  Py_DECREF(bytes);
  CHECK(s, "ReplayBuffer.save_async");
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"ckpt_info", mod_ckpt_info, METH_O,
     "ckpt_info(path) -> dict: a checkpoint's header (per_ckpt_read_info)"},
    {"config_default", mod_config_default, METH_VARARGS,
     "config_default(capacity, item_size) -> dict: per_config_default."},
    {"frames_config_default", mod_frames_config_default, METH_VARARGS,
     "frames_config_default(capacity, frame_bytes, stack, action_size) -> "
     "dict: per_frames_config_default."},
    {"status_name", mod_status_name, METH_O,
     "status_name(code) -> str: the per_status enumerator's name."},
    {"crc32c", mod_crc32c, METH_VARARGS,
     "crc32c(data, crc=0) -> int: per_crc32c."},
    {"snapshot_write", mod_snapshot_write, METH_VARARGS, NULL},
    {"nstep_save", mod_nstep_save, METH_VARARGS, NULL},
    {"nstep_load", mod_nstep_load, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    PYPER_MODULE,
    "per.h's sum tree, samplers, replay buffer and n-step adder (" PYPER_NODES
    " nodes). Use them through the per package.",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL};

static int add_type(PyObject *m, PyTypeObject *t, const char *name) {
  if (PyType_Ready(t) < 0) return -1;
  Py_INCREF(t);
  if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
    Py_DECREF(t);
    return -1;
  }
  return 0;
}

#ifdef PYPER_F32
PyMODINIT_FUNC PyInit__per32(void) {
#else
PyMODINIT_FUNC PyInit__per(void) {
#endif
  PyObject *m = PyModule_Create(&module_def);
  PyObject *cap;
  int i;
  if (!m) return NULL;
#ifdef PYPER_F32
  { /* one per.Error for both modules: per._per's */
    PyObject *d = PyImport_ImportModule("per._per");
    per_error = d ? PyObject_GetAttrString(d, "Error") : NULL;
    Py_XDECREF(d);
  }
#else
  per_error = PyErr_NewExceptionWithDoc(
      "per.Error",
      "A per call failed: status (the per_status code) and name (its "
      "enumerator, e.g. 'PER_ERR_INDEX') say why. The structure is as it "
      "was before the call.",
      NULL, NULL);
#endif
  if (!per_error) goto fail;
  Py_INCREF(per_error);
  if (PyModule_AddObject(m, "Error", per_error) < 0) {
    Py_DECREF(per_error);
    goto fail;
  }
  if (add_type(m, &RngType, "Rng") < 0 ||
      add_type(m, &TreeType, "_SumTree") < 0 ||
      add_type(m, &SwapType, "_UniformSampler") < 0 ||
      add_type(m, &CatType, "_CategoricalSampler") < 0 ||
      add_type(m, &BufType, "_Buffer") < 0 ||
      add_type(m, &NStepType, "_NStep") < 0 ||
      add_type(m, &FramesType, "_Frames") < 0 ||
      add_type(m, &TrajType, "_Traj") < 0 ||
      add_type(m, &NetServerType, "_NetServer") < 0 ||
      PyType_Ready(&TrajMemType) < 0)
    goto fail;
#if !defined(_WIN32)
  if (add_type(m, &StoreType, "_Store") < 0) goto fail;
#endif
  cap = PyCapsule_New((void *)&this_api, "per." PYPER_MODULE "._api", NULL);
  if (!cap || PyModule_AddObject(m, "_api", cap) < 0) {
    Py_XDECREF(cap);
    goto fail;
  }
  if (PyModule_AddIntConstant(m, "REAL_SIZE", (long)sizeof(per_real)) < 0)
    goto fail;
  for (i = 0; i < PER_STATUS_COUNT; i++)
    if (PyModule_AddIntConstant(m, status_names[i], i) < 0) goto fail;
  if (PyModule_AddStringConstant(m, "PER_VERSION_STRING", PER_VERSION_STRING) <
          0 ||
      PyModule_AddIntConstant(m, "SAMPLE_UNIQUE", PER_SAMPLE_UNIQUE) < 0 ||
      PyModule_AddIntConstant(m, "SAMPLE_BETA", PER_SAMPLE_BETA) < 0 ||
      PyModule_AddIntConstant(m, "SAMPLE_SEQUENCES", PER_SAMPLE_SEQUENCES) <
          0 ||
      PyModule_AddIntConstant(m, "SAMPLE_TRAJECTORIES",
                              PER_SAMPLE_TRAJECTORIES) < 0 ||
      PyModule_AddIntConstant(m, "WEIGHTS_BUFFER_MAX", PER_WEIGHTS_BUFFER_MAX) <
          0 ||
      PyModule_AddIntConstant(m, "SEQ_CROSS_EPISODES", PER_SEQ_CROSS_EPISODES) <
          0 ||
      PyModule_AddIntConstant(m, "MAX_LIVE", PER_MAX_LIVE) < 0 ||
      PyModule_AddIntConstant(m, "END_NONE", PER_END_NONE) < 0 ||
      PyModule_AddIntConstant(m, "END_TERMINATED", PER_END_TERMINATED) < 0 ||
      PyModule_AddIntConstant(m, "END_TRUNCATED", PER_END_TRUNCATED) < 0)
    goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
