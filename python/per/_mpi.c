/* per._mpi: per_mpi.h for Python (per/mpi.py wraps it). The shard is a
   per.ReplayBuffer's own per_buffer, reached through the capsule of
   shard.h, so adds, views and counters are the ReplayBuffer's; this
   module keeps the rest of a per_mpi (the communicator, the workspace)
   and runs the collectives on the shard: for each call the shard is
   moved into the per_mpi and back, under the buffer's lock, with the GIL
   released. The communicator comes from mpi4py as its Fortran handle
   (Comm.py2f()), so no mpi4py header is needed; this module and mpi4py
   must use the same MPI library.

   Every collective here is entered by every rank: a rank whose Python
   refused its arguments enters it poisoned (a NULL argument), so every
   rank fails the call with the same status instead of some waiting
   forever. Calls return (status, message, value) and per/mpi.py raises
   per.Error. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PER_STATIC
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_MPI_IMPLEMENTATION
#include "per_mpi.h"
#include "shard.h"

static PyObject *none(void) {
  Py_INCREF(Py_None);
  return Py_None;
}

typedef struct {
  PyObject_HEAD per_mpi m; /* m.shard is empty between calls */
  PyObject *owner;         /* the ReplayBuffer whose shard this is */
  PyObject *capsule;       /* its _shard() */
  pyper_shard *sh;         /* NULL until init succeeded, and after close */
} ShardsObject;

static PyTypeObject ShardsType;

/* Run stmt on the per_mpi with the shard moved in, the buffer's lock
   held and the GIL released; the shard goes back to the buffer after. */
#define COLLECTIVE(self, ...)                                           \
  do {                                                                  \
    pyper_shard *sh_ = (self)->sh;                                      \
    Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(sh_->lock, WAIT_LOCK); \
    (self)->m.shard = *sh_->b;                                          \
    __VA_ARGS__;                                                        \
    *sh_->b = (self)->m.shard;                                          \
    memset(&(self)->m.shard, 0, sizeof(self)->m.shard);                 \
    PyThread_release_lock(sh_->lock);                                   \
    Py_END_ALLOW_THREADS                                                \
  } while (0)

/* After a failed collective (its status is the same on every rank, so
   every rank gets here): the lowest rank that entered it poisoned, or
   -1. Collective. */
static int refused_rank(MPI_Comm comm, int poison, int rank, int world) {
  int mine = poison ? world - rank : 0, top = 0;
  MPI_Allreduce(&mine, &top, 1, MPI_INT, MPI_MAX, comm);
  return top ? world - top : -1;
}

/* The message of a failed call s on the ranks that did not refuse their
   arguments: PER_ERR_ARG naming the rank that did, when one did; else
   the shard's message (per_mpi's calls leave it ""). */
#define FAILED(self, poison)                                          \
  do {                                                                \
    if (s != PER_OK) {                                                \
      int k_ = refused_rank((self)->m.comm, (poison), (self)->m.rank, \
                            (self)->m.world);                         \
      if (k_ >= 0 && !(poison)) {                                     \
        s = PER_ERR_ARG;                                              \
        snprintf(why, sizeof why,                                     \
                 "rank %d refused its arguments to this call "        \
                 "(it raised why)",                                   \
                 k_);                                                 \
      } else {                                                        \
        memcpy(why, (self)->m.shard.error, sizeof why);               \
      }                                                               \
    }                                                                 \
  } while (0)

/* (status, message: the given one or the status's, value) */
static PyObject *result(per_status s, const char *why, PyObject *value) {
  PyObject *r;
  if (!value) return NULL;
  r = Py_BuildValue("(isO)", (int)s,
                    s == PER_OK     ? ""
                    : why && why[0] ? why
                                    : per_status_str(s),
                    value);
  Py_DECREF(value);
  return r;
}

static int ready(ShardsObject *self) {
  if (self->sh) return 1;
  PyErr_SetString(PyExc_RuntimeError,
                  "per.mpi: the buffer is closed (or was never opened)");
  return 0;
}

/* The communicator behind an mpi4py Comm.py2f() handle. */
static int comm_of(PyObject *o, MPI_Comm *c) {
  long f = PyLong_AsLong(o);
  int init = 0;
  if (f == -1 && PyErr_Occurred()) return -1;
  MPI_Initialized(&init);
  if (!init) {
    PyErr_SetString(PyExc_RuntimeError,
                    "per.mpi: MPI is not initialized (import mpi4py.MPI)");
    return -1;
  }
  *c = MPI_Comm_f2c((MPI_Fint)f);
  if (*c == MPI_COMM_NULL) {
    PyErr_SetString(PyExc_ValueError, "per.mpi: comm is MPI.COMM_NULL");
    return -1;
  }
  return 0;
}

static void Shards_dealloc(ShardsObject *self) {
  int fin = 0;
  /* Dropped without close(): the workspace is freed here; the
     communicator too while MPI runs (MPI_Comm_free marks it for
     deallocation, which Open MPI and MPICH do without waiting on other
     ranks). The shard is the ReplayBuffer's. */
  memset(&self->m.shard, 0, sizeof self->m.shard);
  if (self->m.world > 0) {
    MPI_Finalized(&fin);
    if (fin) self->m.world = 0; /* no MPI call after MPI_Finalize */
    per_mpi_free(&self->m);
  }
  Py_XDECREF(self->capsule);
  Py_XDECREF(self->owner);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* owner's shard through its _shard() capsule, kept in *capsule: NULL
   with an exception set when it has none, or when per._per was built
   from another per.h (ImportError). */
static pyper_shard *shard_of(PyObject *owner, PyObject **capsule) {
  pyper_shard *sh;
  *capsule = PyObject_CallMethod(owner, "_shard", NULL);
  if (!*capsule) return NULL;
  sh = (pyper_shard *)PyCapsule_GetPointer(*capsule, PYPER_SHARD_NAME);
  if (sh && (sh->version != PER_VERSION || sh->size != sizeof(per_buffer))) {
    PyErr_SetString(PyExc_ImportError, "per._mpi and per._per were built "
                                       "from different per.h: reinstall per");
    sh = NULL;
  }
  if (!sh) Py_CLEAR(*capsule);
  return sh;
}

/* open(comm_handle, owner): collective per_mpi_init with the owner's
   config; the shard it makes takes the place of the owner's (same
   config, empty). owner None enters poisoned. Value: the _Shards. */
static PyObject *mpi_open(PyObject *mod, PyObject *args) {
  PyObject *fo, *owner, *capsule = NULL;
  pyper_shard *sh = NULL;
  ShardsObject *self;
  MPI_Comm comm;
  per_config cfg;
  per_status s;
  int refused = -1;
  char why[96];
  (void)mod;
  if (!PyArg_ParseTuple(args, "OO:open", &fo, &owner)) return NULL;
  if (comm_of(fo, &comm) < 0) return NULL;
  self = (ShardsObject *)ShardsType.tp_alloc(&ShardsType, 0);
  if (!self) return NULL;
  /* without a shard the call is entered poisoned; the error is raised
     after */
  if (owner != Py_None) sh = shard_of(owner, &capsule);
  Py_BEGIN_ALLOW_THREADS;
  if (sh) {
    PyThread_acquire_lock(sh->lock, WAIT_LOCK);
    cfg = sh->b->cfg;
  }
  s = per_mpi_init(&self->m, comm, sh ? &cfg : NULL, NULL);
  if (s != PER_OK) {
    int rank = 0, world = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    refused = refused_rank(comm, !sh, rank, world);
    if (refused == rank) refused = -1;
  }
  if (s == PER_OK && sh) {
    memcpy(self->m.shard.layout, sh->b->layout, sizeof sh->b->layout);
    per_buffer_free(sh->b);
    *sh->b = self->m.shard;
    memset(&self->m.shard, 0, sizeof self->m.shard);
  }
  if (sh) PyThread_release_lock(sh->lock);
  Py_END_ALLOW_THREADS;
  if (s != PER_OK) {
    Py_XDECREF(capsule);
    Py_DECREF(self);
    if (PyErr_Occurred()) return NULL;
    why[0] = 0;
    if (refused >= 0) {
      s = PER_ERR_ARG;
      snprintf(why, sizeof why,
               "rank %d refused its arguments to this call (it raised why)",
               refused);
    }
    return result(s, why, none());
  }
  Py_INCREF(owner);
  self->owner = owner;
  self->capsule = capsule;
  self->sh = sh;
  return result(PER_OK, "", (PyObject *)self);
}

/* sample(B, root, flags, beta, items, ids, weights, poison): per_mpi_sample
   into the buffers given (None on ranks that receive nothing). */
static PyObject *Shards_sample(ShardsObject *self, PyObject *args) {
  unsigned long B;
  int root, poison, j;
  unsigned flags;
  double beta;
  PyObject *o[3];
  Py_buffer v[3];
  int have[3] = {0, 0, 0};
  per_sample_opts opts;
  per_status s;
  char why[sizeof(((per_buffer *)0)->error)];
  if (!ready(self) ||
      !PyArg_ParseTuple(args, "kiIdOOOp:sample", &B, &root, &flags, &beta,
                        &o[0], &o[1], &o[2], &poison))
    return NULL;
  for (j = 0; j < 3; j++) {
    if (o[j] == Py_None) continue;
    if (PyObject_GetBuffer(o[j], &v[j], PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) <
        0)
      goto fail;
    have[j] = 1;
  }
  memset(&opts, 0, sizeof opts);
  opts.flags = flags;
  opts.beta = beta;
  why[0] = 0;
  COLLECTIVE(self, s = per_mpi_sample(&self->m, poison ? 0 : (uint32_t)B, root,
                                      &opts, have[0] ? v[0].buf : NULL,
                                      have[1] ? (per_mpi_id *)v[1].buf : NULL,
                                      have[2] ? (float *)v[2].buf : NULL);
             FAILED(self, poison));
  for (j = 0; j < 3; j++)
    if (have[j]) PyBuffer_Release(&v[j]);
  return result(s, why, none());
fail:
  for (j = 0; j < 3; j++)
    if (have[j]) PyBuffer_Release(&v[j]);
  return NULL;
}

/* update(ids, td, poison): per_mpi_update; ids and td are n records of 16
   bytes and n floats (per/mpi.py checked them). Value: the stale count. */
static PyObject *Shards_update(ShardsObject *self, PyObject *args) {
  PyObject *io, *to;
  Py_buffer iv, tv;
  int poison;
  uint32_t n = 0, stale = 0;
  per_status s;
  char why[sizeof(((per_buffer *)0)->error)];
  if (!ready(self) || !PyArg_ParseTuple(args, "OOp:update", &io, &to, &poison))
    return NULL;
  if (PyObject_GetBuffer(io, &iv, PyBUF_C_CONTIGUOUS) < 0) return NULL;
  if (PyObject_GetBuffer(to, &tv, PyBUF_C_CONTIGUOUS) < 0) {
    PyBuffer_Release(&iv);
    return NULL;
  }
  if (!poison) {
    if (iv.len % (Py_ssize_t)sizeof(per_mpi_id) != 0 ||
        tv.len != iv.len / (Py_ssize_t)sizeof(per_mpi_id) * 4 ||
        iv.len / (Py_ssize_t)sizeof(per_mpi_id) > (Py_ssize_t)INT32_MAX) {
      PyBuffer_Release(&iv);
      PyBuffer_Release(&tv);
      PyErr_SetString(PyExc_ValueError, "update: ids and td do not match");
      return NULL;
    }
    n = (uint32_t)(iv.len / (Py_ssize_t)sizeof(per_mpi_id));
  }
  why[0] = 0;
  COLLECTIVE(self,
             s = poison ? per_mpi_update(&self->m, NULL, NULL, 1, &stale)
                        : per_mpi_update(&self->m, (const per_mpi_id *)iv.buf,
                                         (const float *)tv.buf, n, &stale);
             FAILED(self, poison));
  PyBuffer_Release(&iv);
  PyBuffer_Release(&tv);
  return result(s, why, PyLong_FromUnsignedLong(stale));
}

/* save(path or None) and load(path or None): None enters poisoned. A load
   moves the item ring: it is refused (poisoned, value True) while views
   of it are alive. */
static PyObject *save_load(ShardsObject *self, PyObject *arg, int load) {
  PyObject *bytes = NULL;
  const char *path = NULL;
  int busy = 0;
  per_status s;
  char why[sizeof(((per_buffer *)0)->error)];
  if (!ready(self)) return NULL;
  if (arg != Py_None) {
    if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
    path = PyBytes_AS_STRING(bytes);
  }
  why[0] = 0;
  COLLECTIVE(self, busy = load && *self->sh->exports > 0; if (busy) path = NULL;
             s = load ? per_mpi_load(&self->m, path)
                      : per_mpi_save(&self->m, path);
             FAILED(self, !path));
  Py_XDECREF(bytes);
  return result(s, why, PyBool_FromLong(busy));
}

static PyObject *Shards_save(ShardsObject *self, PyObject *arg) {
  return save_load(self, arg, 0);
}

static PyObject *Shards_load(ShardsObject *self, PyObject *arg) {
  return save_load(self, arg, 1);
}

/* size(): per_mpi_size, collective. */
static PyObject *Shards_size(ShardsObject *self, PyObject *unused) {
  uint64_t n = 0;
  (void)unused;
  if (!ready(self)) return NULL;
  COLLECTIVE(self, n = per_mpi_size(&self->m));
  return PyLong_FromUnsignedLongLong(n);
}

/* close(): collective; frees the communicator and the workspace (the
   shard stays the ReplayBuffer's). */
static PyObject *Shards_close(ShardsObject *self, PyObject *unused) {
  (void)unused;
  if (self->sh) {
    Py_BEGIN_ALLOW_THREADS memset(&self->m.shard, 0, sizeof self->m.shard);
    per_mpi_free(&self->m);
    Py_END_ALLOW_THREADS self->sh = NULL;
  }
  Py_RETURN_NONE;
}

static PyObject *Shards_rank(ShardsObject *self, void *c) {
  (void)c;
  return PyLong_FromLong(self->m.rank);
}

static PyObject *Shards_world(ShardsObject *self, void *c) {
  (void)c;
  return PyLong_FromLong(self->m.world);
}

static PyMethodDef Shards_methods[] = {
    {"sample", (PyCFunction)Shards_sample, METH_VARARGS, NULL},
    {"update", (PyCFunction)Shards_update, METH_VARARGS, NULL},
    {"save", (PyCFunction)Shards_save, METH_O, NULL},
    {"load", (PyCFunction)Shards_load, METH_O, NULL},
    {"size", (PyCFunction)Shards_size, METH_NOARGS, NULL},
    {"close", (PyCFunction)Shards_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Shards_getset[] = {
    {"rank", (getter)Shards_rank, NULL, NULL, NULL},
    {"world", (getter)Shards_world, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ShardsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "per._mpi._Shards",
    .tp_basicsize = sizeof(ShardsObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)Shards_dealloc,
    .tp_methods = Shards_methods,
    .tp_getset = Shards_getset,
};

/* ---------------------------------------------------------------------
   Feed: a per_mpi_feed (per.mpi.Feed). Sends and drains release the GIL;
   a drain holds the receiving buffer's lock while it adds.
   --------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD per_mpi_feed f;
  int open;
  PyThread_type_lock lock; /* held by every call on f: a feed is one
                              rank's, but may be shared by its threads */
} FeedObject;

static PyTypeObject FeedType;

static void Feed_dealloc(FeedObject *self) {
  /* Not freed (free() is collective): the memory only; MPI's requests
     and communicator stay with MPI until it finalizes. */
  if (self->open && self->f.work) {
    peri_mpi_feed_work_free((peri_mpi_feed_work *)self->f.work, NULL);
    self->f.work = NULL;
  }
  if (self->lock) PyThread_free_lock(self->lock);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int feed_ready(FeedObject *self) {
  if (self->open) return 1;
  PyErr_SetString(PyExc_RuntimeError, "per.mpi.Feed: freed");
  return 0;
}

/* feed_open(comm_handle, dest, item_size, max_items, slots, poison):
   collective per_mpi_feed_init; a poisoned rank passes item_size 0, so
   every rank fails. Value: the _Feed. */
static PyObject *mpi_feed_open(PyObject *mod, PyObject *args) {
  PyObject *fo;
  int dest, poison;
  unsigned item_size, max_items, slots;
  MPI_Comm comm;
  per_status s;
  FeedObject *self;
  (void)mod;
  if (!PyArg_ParseTuple(args, "OiIIIp:feed_open", &fo, &dest, &item_size,
                        &max_items, &slots, &poison))
    return NULL;
  if (comm_of(fo, &comm) < 0) return NULL;
  self = (FeedObject *)FeedType.tp_alloc(&FeedType, 0);
  if (!self) return NULL;
  /* the lock first: a failure after init would leave the ranks apart */
  if (!(self->lock = PyThread_allocate_lock())) poison = 1;
  Py_BEGIN_ALLOW_THREADS s = per_mpi_feed_init(
      &self->f, comm, dest, poison ? 0 : item_size, max_items, slots, NULL);
  Py_END_ALLOW_THREADS if (s != PER_OK) {
    int nomem = !self->lock;
    Py_DECREF(self);
    if (nomem) return PyErr_NoMemory();
    return result(s, "", none());
  }
  self->open = 1;
  return result(PER_OK, "", (PyObject *)self);
}

/* send(items, n, ends or None, td or None): per_mpi_feed_send (per/mpi.py
   checked the sizes). */
static PyObject *Feed_send(FeedObject *self, PyObject *args) {
  PyObject *io, *eo, *to;
  Py_buffer iv, ev, tv;
  unsigned n;
  int he, ht;
  per_status s;
  if (!feed_ready(self) ||
      !PyArg_ParseTuple(args, "OIOO:send", &io, &n, &eo, &to))
    return NULL;
  he = eo != Py_None;
  ht = to != Py_None;
  if (PyObject_GetBuffer(io, &iv, PyBUF_C_CONTIGUOUS) < 0) return NULL;
  if (he && PyObject_GetBuffer(eo, &ev, PyBUF_C_CONTIGUOUS) < 0) {
    PyBuffer_Release(&iv);
    return NULL;
  }
  if (ht && PyObject_GetBuffer(to, &tv, PyBUF_C_CONTIGUOUS) < 0) {
    PyBuffer_Release(&iv);
    if (he) PyBuffer_Release(&ev);
    return NULL;
  }
  if (iv.len != (Py_ssize_t)n * (Py_ssize_t)self->f.item_size ||
      (he && ev.len != (Py_ssize_t)n) || (ht && tv.len != (Py_ssize_t)n * 4)) {
    PyBuffer_Release(&iv);
    if (he) PyBuffer_Release(&ev);
    if (ht) PyBuffer_Release(&tv);
    PyErr_SetString(PyExc_ValueError, "send: items, ends and td do not match");
    return NULL;
  }
  Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(self->lock, WAIT_LOCK);
  s = per_mpi_feed_send(&self->f, iv.buf, n,
                        he ? (const uint8_t *)ev.buf : NULL,
                        ht ? (const float *)tv.buf : NULL);
  PyThread_release_lock(self->lock);
  Py_END_ALLOW_THREADS PyBuffer_Release(&iv);
  if (he) PyBuffer_Release(&ev);
  if (ht) PyBuffer_Release(&tv);
  return result(s, "", none());
}

/* drain(buffer, max_msgs, ordered): per_mpi_feed_drain into a
   ReplayBuffer's per_buffer (its capsule), under its lock. Value: the
   items stored. */
static PyObject *Feed_drain(FeedObject *self, PyObject *args) {
  PyObject *owner, *capsule;
  pyper_shard *sh;
  unsigned max_msgs;
  int ordered;
  uint64_t items = 0;
  per_status s;
  if (!feed_ready(self) ||
      !PyArg_ParseTuple(args, "OIp:drain", &owner, &max_msgs, &ordered))
    return NULL;
  if (!(sh = shard_of(owner, &capsule))) return NULL;
  Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(self->lock, WAIT_LOCK);
  PyThread_acquire_lock(sh->lock, WAIT_LOCK);
  s = per_mpi_feed_drain(&self->f, sh->b, max_msgs,
                         ordered ? PER_MPI_FEED_ORDERED : 0, &items);
  PyThread_release_lock(sh->lock);
  PyThread_release_lock(self->lock);
  Py_END_ALLOW_THREADS Py_DECREF(capsule);
  return result(s, "", PyLong_FromUnsignedLongLong(items));
}

static PyObject *Feed_close(FeedObject *self, PyObject *unused) {
  per_status s;
  (void)unused;
  if (!feed_ready(self)) return NULL;
  Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(self->lock, WAIT_LOCK);
  s = per_mpi_feed_close(&self->f);
  PyThread_release_lock(self->lock);
  Py_END_ALLOW_THREADS return result(s, "", none());
}

/* free(): collective per_mpi_feed_free. */
static PyObject *Feed_free(FeedObject *self, PyObject *unused) {
  (void)unused;
  if (self->open) {
    Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(self->lock, WAIT_LOCK);
    per_mpi_feed_free(&self->f);
    PyThread_release_lock(self->lock);
    Py_END_ALLOW_THREADS self->open = 0;
  }
  Py_RETURN_NONE;
}

static PyObject *Feed_state(FeedObject *self, void *c) {
  (void)c;
  return Py_BuildValue(
      "{s:i,s:i,s:K,s:K,s:K,s:K,s:s,s:i}", "dest", self->f.dest, "senders",
      self->f.nsrc, "msgs", (unsigned long long)self->f.msgs, "items",
      (unsigned long long)self->f.items, "waits",
      (unsigned long long)self->f.waits, "rejected",
      (unsigned long long)self->f.rejected, "error", self->f.error, "done",
      self->open ? per_mpi_feed_done(&self->f) : 1);
}

static PyMethodDef Feed_methods[] = {
    {"send", (PyCFunction)Feed_send, METH_VARARGS, NULL},
    {"drain", (PyCFunction)Feed_drain, METH_VARARGS, NULL},
    {"close", (PyCFunction)Feed_close, METH_NOARGS, NULL},
    {"free", (PyCFunction)Feed_free, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Feed_getset[] = {
    {"state", (getter)Feed_state, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject FeedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "per._mpi._Feed",
    .tp_basicsize = sizeof(FeedObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)Feed_dealloc,
    .tp_methods = Feed_methods,
    .tp_getset = Feed_getset,
};

static PyMethodDef mpi_functions[] = {
    {"open", mpi_open, METH_VARARGS, NULL},
    {"feed_open", mpi_feed_open, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef mpi_module = {
    PyModuleDef_HEAD_INIT,
    "per._mpi",
    "per_mpi.h for per.mpi (see per/mpi.py)",
    -1,
    mpi_functions,
    NULL,
    NULL,
    NULL,
    NULL};

PyMODINIT_FUNC PyInit__mpi(void) {
  PyObject *m;
  if (PyType_Ready(&ShardsType) < 0 || PyType_Ready(&FeedType) < 0) return NULL;
  m = PyModule_Create(&mpi_module);
  if (!m) return NULL;
  if (PyModule_AddIntConstant(m, "ALL", PER_MPI_ALL) < 0 ||
      PyModule_AddIntConstant(m, "ID_BYTES", (long)sizeof(per_mpi_id)) < 0 ||
      PyModule_AddIntConstant(m, "FEED_NONE", PER_MPI_FEED_NONE) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
