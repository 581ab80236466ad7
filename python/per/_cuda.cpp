/* per._cuda: per_cuda.h for Python (per/cuda.py wraps it). Compiled
   four times from this one source:
     - per._cuda, against the nvcc-built per_cuda library and the CUDA
       runtime: device memory, streams and graphs are CUDA's;
     - per._cuda_host (PYPER_CUDA_HOST, tests only), against per_cuda.cu
       compiled as host C++ through tests/cuda/cuda_host_shim.h: "device
       memory" is host memory the shim allocated, every launch runs its
       threads as loops under the shim's race detector. The tests of
       per.cuda run on it without a GPU;
     - per._cuda32 and per._cuda_host32 (PYPER_F32), the same two with
       float nodes (PER_REAL float; per._cuda32 against per_cuda_float),
       for per.cuda's dtype=float32 and nodes=float32. Their tree values
       are float32 and they take the buffers of per._per32 (a
       per.ReplayBuffer made with nodes=float32) only; everything else is
       the same. Each host build has its own shim, so its own "device
       memory": an array for one is not in the other's.
   This layer moves pointers and sizes only: per/cuda.py checks every
   array (device, dtype, shape, strides) before a pointer gets here, and
   turns the per_status codes returned here into per.Error.

   Every call runs with the object's device current (a guard sets it and
   puts the caller's back) and enqueues on the stream it is given (an
   integer handle, as torch.cuda.Stream.cuda_stream; 0 and 1 are the
   legacy default stream, 2 the per-thread one: per/cuda.py never picks
   one of them unasked). stream_wait orders a call's stream after an
   input's producer stream (the "stream" of its
   __cuda_array_interface__). Only status(), the downloads and the
   constructors wait for the device. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The node type: PYPER_F32 is float (the build passes PER_REAL=float
   too), else per.h's default, double. PYPER_PER is the module whose
   buffers this one takes (shard.h's capsule names it), PYPER_NODES their
   node type as per.cuda names it. */
#ifdef PYPER_F32
#ifndef PER_REAL
#define PER_REAL float
#endif
#define PYPER_PER "per._per32"
#define PYPER_NODES "float32"
#else
#define PYPER_PER "per._per"
#define PYPER_NODES "float64"
#endif

#ifdef PYPER_CUDA_HOST
#include "cuda_host_shim.h"
#include "per_cuda.cu"
#ifdef PYPER_F32
#define PYPER_MODULE "_cuda_host32"
#define PYPER_INIT PyInit__cuda_host32
#else
#define PYPER_MODULE "_cuda_host"
#define PYPER_INIT PyInit__cuda_host
#endif
#define PYPER_DLPACK_DEVICE 1 /* kDLCPU */
#else
#define PER_STATIC
#define PER_IMPLEMENTATION
#include "per.h"
#include "per_cuda.h"
#include <cuda_runtime_api.h>
#ifdef PYPER_F32
#define PYPER_MODULE "_cuda32"
#define PYPER_INIT PyInit__cuda32
#else
#define PYPER_MODULE "_cuda"
#define PYPER_INIT PyInit__cuda
#endif
#define PYPER_DLPACK_DEVICE 2 /* kDLCUDA */
#endif

/* a PER_REAL that is not PYPER_F32's would name the module of one node
   type and build it with the other's */
#ifdef PYPER_F32
static_assert(sizeof(per_real) == 4, "PYPER_F32 builds PER_REAL float");
#else
static_assert(sizeof(per_real) == 8, "without PYPER_F32, PER_REAL double");
#endif

#include "shard.h"
#include "pyper_config.h"

#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------------
   DLPack (the data-exchange protocol of the array libraries), the
   structs as its specification lays them out (ABI version 0.x, the
   "dltensor" capsule every producer supports).
   --------------------------------------------------------------------- */
struct pyper_dldevice {
  int32_t device_type; /* 1 CPU, 2 CUDA, 3 CUDA host, 13 CUDA managed */
  int32_t device_id;
};
struct pyper_dldtype {
  uint8_t code; /* 0 int, 1 uint, 2 float, 5 complex, 6 bool */
  uint8_t bits;
  uint16_t lanes;
};
struct pyper_dltensor {
  void *data;
  pyper_dldevice device;
  int32_t ndim;
  pyper_dldtype dtype;
  int64_t *shape;
  int64_t *strides; /* in elements; NULL: C-contiguous */
  uint64_t byte_offset;
};
struct pyper_dlmanaged {
  pyper_dltensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(pyper_dlmanaged *self);
};

/* ---------------------------------------------------------------------
   The device guard and the stream
   --------------------------------------------------------------------- */
struct pyper_guard {
  int prev, set;
  explicit pyper_guard(int dev) : prev(0), set(0) {
    if (cudaGetDevice(&prev) == cudaSuccess && prev != dev)
      set = cudaSetDevice(dev) == cudaSuccess;
  }
  ~pyper_guard() {
    if (set) (void)cudaSetDevice(prev);
  }
};

static int last_cuda_error; /* the cudaError_t behind the last PER_ERR_DEVICE */

static int note_cuda(cudaError_t e) {
  if (e != cudaSuccess) last_cuda_error = (int)e;
  return e == cudaSuccess ? (int)PER_OK : (int)PER_ERR_DEVICE;
}

/* per_cuda's own PER_ERR_DEVICE keeps its cudaError_t there */
static int note_per(per_status s) {
  if (s == PER_ERR_DEVICE) last_cuda_error = per_cuda_last_error();
  return (int)s;
}

static int conv_stream(PyObject *o, void *out) {
  unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return 0;
  *(cudaStream_t *)out = (cudaStream_t)(uintptr_t)v;
  return 1;
}

static int conv_ptr(PyObject *o, void *out) {
  unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return 0;
  *(void **)out = (void *)(uintptr_t)v;
  return 1;
}

static size_t round256(size_t n) { return (n + 255u) / 256u * 256u; }

/* ---------------------------------------------------------------------
   DeviceArray: a view of device memory that array libraries take
   without a copy (__dlpack__, and __cuda_array_interface__ on a GPU or
   __array_interface__ on the host backend). It keeps its owner alive.
   --------------------------------------------------------------------- */
typedef struct {
  PyObject_HEAD PyObject *owner;
  void *ptr;
  int device_id;
  pyper_dldtype dtype;
  PyObject *typestr; /* NumPy's, e.g. "<f4" */
  int ndim;
  int64_t shape[8];
  int64_t strides[8]; /* in elements */
} ArrObject;

static void Arr_dealloc(ArrObject *self) {
  Py_XDECREF(self->owner);
  Py_XDECREF(self->typestr);
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free((PyObject *)self);
  Py_DECREF(tp);
}

static PyTypeObject *ArrType;

/* what the capsule's deleter frees: the tensor, its shape and strides,
   and a reference to the view */
typedef struct {
  pyper_dlmanaged m;
  int64_t shape[8];
  int64_t strides[8];
} pyper_export;

static void export_deleter(pyper_dlmanaged *m) {
  PyGILState_STATE g = PyGILState_Ensure();
  Py_XDECREF((PyObject *)m->manager_ctx);
  PyMem_RawFree(m);
  PyGILState_Release(g);
}

static void capsule_destructor(PyObject *capsule) {
  /* not consumed: the producer frees it (DLPack's rule) */
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    pyper_dlmanaged *m =
        (pyper_dlmanaged *)PyCapsule_GetPointer(capsule, "dltensor");
    if (m && m->deleter) m->deleter(m);
  }
}

/* __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None):
   the legacy capsule. The data is ready on the stream the buffer's call
   used; the consumer reads it there (the default: the same current
   stream), so no synchronisation is added. copy=True is refused. */
static PyObject *Arr_dlpack(ArrObject *self, PyObject *args, PyObject *kw) {
  static const char *kwlist[] = {"stream", "max_version", "dl_device", "copy",
                                 NULL};
  PyObject *stream = Py_None, *maxv = Py_None, *dev = Py_None, *copy = Py_None;
  pyper_export *e;
  PyObject *cap;
  int i;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__",
                                   (char **)kwlist, &stream, &maxv, &dev,
                                   &copy))
    return NULL;
  if (copy == Py_True) {
    PyErr_SetString(PyExc_BufferError,
                    "DeviceArray.__dlpack__: copy=True is not supported");
    return NULL;
  }
  e = (pyper_export *)PyMem_RawMalloc(sizeof *e);
  if (!e) return PyErr_NoMemory();
  memset(e, 0, sizeof *e);
  for (i = 0; i < self->ndim; ++i) {
    e->shape[i] = self->shape[i];
    e->strides[i] = self->strides[i];
  }
  e->m.dl_tensor.data = self->ptr;
  e->m.dl_tensor.device.device_type = PYPER_DLPACK_DEVICE;
  e->m.dl_tensor.device.device_id = self->device_id;
  e->m.dl_tensor.ndim = self->ndim;
  e->m.dl_tensor.dtype = self->dtype;
  e->m.dl_tensor.shape = e->shape;
  e->m.dl_tensor.strides = e->strides;
  e->m.dl_tensor.byte_offset = 0;
  Py_INCREF(self);
  e->m.manager_ctx = self;
  e->m.deleter = export_deleter;
  cap = PyCapsule_New(&e->m, "dltensor", capsule_destructor);
  if (!cap) export_deleter(&e->m);
  return cap;
}

static PyObject *Arr_dlpack_device(ArrObject *self, PyObject *unused) {
  (void)unused;
  return Py_BuildValue("(ii)", PYPER_DLPACK_DEVICE, self->device_id);
}

/* the interface dict of NumPy (host) or Numba/CuPy (CUDA), version 3 */
static PyObject *Arr_interface(ArrObject *self) {
  PyObject *shape, *strides, *d;
  Py_ssize_t es = self->dtype.bits / 8;
  int i;
  shape = PyTuple_New(self->ndim);
  strides = PyTuple_New(self->ndim);
  if (!shape || !strides) {
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return NULL;
  }
  for (i = 0; i < self->ndim; ++i) {
    PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(self->shape[i]));
    PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(self->strides[i] * es));
  }
  d = Py_BuildValue("{s:(Ni),s:N,s:O,s:N,s:i}", "data",
                    PyLong_FromUnsignedLongLong((uintptr_t)self->ptr), 0,
                    "shape", shape, "typestr", self->typestr, "strides",
                    strides, "version", 3);
  return d;
}

static PyObject *Arr_cai(ArrObject *self, void *unused) {
  (void)unused;
  if (PYPER_DLPACK_DEVICE != 2) {
    PyErr_SetString(PyExc_AttributeError,
                    "__cuda_array_interface__: host memory");
    return NULL;
  }
  return Arr_interface(self);
}

static PyObject *Arr_ai(ArrObject *self, void *unused) {
  (void)unused;
  if (PYPER_DLPACK_DEVICE != 1) {
    PyErr_SetString(PyExc_AttributeError, "__array_interface__: device memory");
    return NULL;
  }
  return Arr_interface(self);
}

static PyObject *Arr_shape(ArrObject *self, void *unused) {
  PyObject *t = PyTuple_New(self->ndim);
  int i;
  (void)unused;
  if (!t) return NULL;
  for (i = 0; i < self->ndim; ++i)
    PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(self->shape[i]));
  return t;
}

static PyObject *Arr_ptr(ArrObject *self, void *unused) {
  (void)unused;
  return PyLong_FromUnsignedLongLong((uintptr_t)self->ptr);
}

static PyObject *Arr_typestr(ArrObject *self, void *unused) {
  (void)unused;
  Py_INCREF(self->typestr);
  return self->typestr;
}

static PyObject *Arr_repr(ArrObject *self) {
  PyObject *shape = Arr_shape(self, NULL), *r;
  if (!shape) return NULL;
  r = PyUnicode_FromFormat("per.cuda.DeviceArray(shape=%R, typestr=%R, "
                           "device=%d, ptr=%p)",
                           shape, self->typestr, self->device_id, self->ptr);
  Py_DECREF(shape);
  return r;
}

static PyMethodDef Arr_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))Arr_dlpack,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"__dlpack_device__", (PyCFunction)Arr_dlpack_device, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Arr_getset[] = {
    {(char *)"__cuda_array_interface__", (getter)Arr_cai, NULL, NULL, NULL},
    {(char *)"__array_interface__", (getter)Arr_ai, NULL, NULL, NULL},
    {(char *)"shape", (getter)Arr_shape, NULL, NULL, NULL},
    {(char *)"ptr", (getter)Arr_ptr, NULL, NULL, NULL},
    {(char *)"typestr", (getter)Arr_typestr, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* view(owner, ptr, device, (code, bits), typestr, shape, strides): a
   DeviceArray; strides in elements. */
static PyObject *mod_view(PyObject *mod, PyObject *args) {
  PyObject *owner, *typestr, *shape, *strides;
  void *ptr;
  int dev, code, bits, i;
  ArrObject *a;
  (void)mod;
  if (!PyArg_ParseTuple(args, "OO&i(ii)UO!O!:view", &owner, conv_ptr, &ptr,
                        &dev, &code, &bits, &typestr, &PyTuple_Type, &shape,
                        &PyTuple_Type, &strides))
    return NULL;
  if (PyTuple_GET_SIZE(shape) > 8 ||
      PyTuple_GET_SIZE(shape) != PyTuple_GET_SIZE(strides)) {
    PyErr_SetString(PyExc_ValueError, "view: at most 8 dimensions");
    return NULL;
  }
  a = (ArrObject *)ArrType->tp_alloc(ArrType, 0);
  if (!a) return NULL;
  Py_INCREF(owner);
  a->owner = owner;
  Py_INCREF(typestr);
  a->typestr = typestr;
  a->ptr = ptr;
  a->device_id = dev;
  a->dtype.code = (uint8_t)code;
  a->dtype.bits = (uint8_t)bits;
  a->dtype.lanes = 1;
  a->ndim = (int)PyTuple_GET_SIZE(shape);
  for (i = 0; i < a->ndim; ++i) {
    a->shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
    a->strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i));
  }
  if (PyErr_Occurred()) {
    Py_DECREF(a);
    return NULL;
  }
  return (PyObject *)a;
}

/* dlpack_info(obj, stream): what obj.__dlpack__(stream=stream) describes,
   (ptr, device_type, device_id, code, bits, lanes, shape, strides) with
   strides in elements (None: C-contiguous) and the byte offset folded
   into ptr. The capsule is consumed and its deleter called before this
   returns: the pointer stays valid while obj lives. */
static PyObject *mod_dlpack_info(PyObject *mod, PyObject *args) {
  PyObject *obj, *stream, *meth, *kw = NULL, *empty = NULL, *cap = NULL,
                                 *shape = NULL, *strides = NULL, *out = NULL;
  pyper_dlmanaged *m;
  pyper_dltensor *t;
  int i;
  (void)mod;
  if (!PyArg_ParseTuple(args, "OO:dlpack_info", &obj, &stream)) return NULL;
  meth = PyObject_GetAttrString(obj, "__dlpack__");
  if (!meth) return NULL;
  empty = PyTuple_New(0);
  if (empty && stream != Py_None) kw = Py_BuildValue("{s:O}", "stream", stream);
  if (empty && (stream == Py_None || kw)) cap = PyObject_Call(meth, empty, kw);
  Py_DECREF(meth);
  Py_XDECREF(empty);
  Py_XDECREF(kw);
  if (!cap) return NULL;
  m = (pyper_dlmanaged *)PyCapsule_GetPointer(cap, "dltensor");
  if (!m) {
    Py_DECREF(cap);
    return NULL;
  }
  t = &m->dl_tensor;
  if (t->ndim < 0 || t->ndim > 32) {
    PyErr_SetString(PyExc_ValueError, "__dlpack__: a tensor of more than 32 "
                                      "dimensions");
    goto done;
  }
  shape = PyTuple_New(t->ndim);
  if (!shape) goto done;
  for (i = 0; i < t->ndim; ++i)
    PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(t->shape[i]));
  if (t->strides) {
    strides = PyTuple_New(t->ndim);
    if (!strides) goto done;
    for (i = 0; i < t->ndim; ++i)
      PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(t->strides[i]));
  } else {
    Py_INCREF(Py_None);
    strides = Py_None;
  }
  out = Py_BuildValue(
      "(NiiiiiOO)",
      PyLong_FromUnsignedLongLong((uintptr_t)t->data + t->byte_offset),
      (int)t->device.device_type, (int)t->device.device_id, (int)t->dtype.code,
      (int)t->dtype.bits, (int)t->dtype.lanes, shape, strides);
done:
  /* consumed: the consumer calls the deleter */
  if (PyCapsule_SetName(cap, "used_dltensor") == 0 && m->deleter) m->deleter(m);
  Py_DECREF(cap);
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  return out;
}

/* ---------------------------------------------------------------------
   Memory: one device allocation, freed with its object
   --------------------------------------------------------------------- */
typedef struct {
  PyObject_HEAD void *d;
  size_t bytes;
  int device;
} MemObject;

static void mem_release(void **d, int device) {
  if (*d) {
    pyper_guard g(device);
    (void)cudaFree(*d);
    *d = NULL;
  }
}

static int mem_alloc(void **d, size_t bytes, int device) {
  pyper_guard g(device);
  return note_cuda(cudaMalloc(d, bytes ? bytes : 1));
}

static void Mem_dealloc(MemObject *self) {
  mem_release(&self->d, self->device);
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free((PyObject *)self);
  Py_DECREF(tp);
}

static PyTypeObject *MemType;

/* Memory(bytes, device): a device allocation (cudaMalloc: 256-byte
   aligned). */
static PyObject *Mem_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  unsigned long long bytes;
  int device, s;
  MemObject *self;
  (void)kw;
  if (!PyArg_ParseTuple(args, "Ki:Memory", &bytes, &device)) return NULL;
  self = (MemObject *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->device = device;
  self->bytes = (size_t)bytes;
  s = mem_alloc(&self->d, self->bytes, device);
  if (s != PER_OK) {
    Py_DECREF(self);
    return Py_BuildValue("i", s);
  }
  return (PyObject *)self;
}

static PyObject *Mem_ptr(MemObject *self, void *unused) {
  (void)unused;
  return PyLong_FromUnsignedLongLong((uintptr_t)self->d);
}

static PyGetSetDef Mem_getset[] = {
    {(char *)"ptr", (getter)Mem_ptr, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* ---------------------------------------------------------------------
   Module functions
   --------------------------------------------------------------------- */

/* copy(dst, src, bytes, kind, stream): cudaMemcpyAsync; kind 0 host to
   device, 1 device to host, 2 device to device. Returns the status. A
   copy to or from the host waits for the stream (pageable memory). */
static PyObject *mod_copy(PyObject *mod, PyObject *args) {
  void *dst, *src;
  unsigned long long n;
  int kind, dev, s;
  cudaStream_t st;
  cudaMemcpyKind k;
  (void)mod;
  if (!PyArg_ParseTuple(args, "O&O&KiiO&:copy", conv_ptr, &dst, conv_ptr, &src,
                        &n, &kind, &dev, conv_stream, &st))
    return NULL;
  k = kind == 0   ? cudaMemcpyHostToDevice
      : kind == 1 ? cudaMemcpyDeviceToHost
                  : cudaMemcpyDeviceToDevice;
  {
    pyper_guard g(dev);
    s = note_cuda(cudaMemcpyAsync(dst, src, (size_t)n, k, st));
    if (s == PER_OK && kind != 2) s = note_cuda(cudaStreamSynchronize(st));
  }
  return PyLong_FromLong(s);
}

/* copy2d(dst, dpitch, src, spitch, width, height, device, stream): a
   device-to-device cudaMemcpy2DAsync (the fields of items in and out of
   the item rows). Returns the status. */
static PyObject *mod_copy2d(PyObject *mod, PyObject *args) {
  void *dst, *src;
  unsigned long long dp, sp, w, h;
  int dev, s;
  cudaStream_t st;
  (void)mod;
  if (!PyArg_ParseTuple(args, "O&KO&KKKiO&:copy2d", conv_ptr, &dst, &dp,
                        conv_ptr, &src, &sp, &w, &h, &dev, conv_stream, &st))
    return NULL;
  {
    pyper_guard g(dev);
    s = note_cuda(cudaMemcpy2DAsync(dst, (size_t)dp, src, (size_t)sp, (size_t)w,
                                    (size_t)h, cudaMemcpyDeviceToDevice, st));
  }
  return PyLong_FromLong(s);
}

/* memset(dst, value, bytes, device, stream): cudaMemsetAsync. */
static PyObject *mod_memset(PyObject *mod, PyObject *args) {
  void *dst;
  unsigned long long n;
  int v, dev, s;
  cudaStream_t st;
  (void)mod;
  if (!PyArg_ParseTuple(args, "O&iKiO&:memset", conv_ptr, &dst, &v, &n, &dev,
                        conv_stream, &st))
    return NULL;
  {
    pyper_guard g(dev);
    s = note_cuda(cudaMemsetAsync(dst, v, (size_t)n, st));
  }
  return PyLong_FromLong(s);
}

/* synchronize(device, stream): cudaStreamSynchronize; the status. */
static PyObject *mod_synchronize(PyObject *mod, PyObject *args) {
  int dev, s;
  cudaStream_t st;
  (void)mod;
  if (!PyArg_ParseTuple(args, "iO&:synchronize", &dev, conv_stream, &st))
    return NULL;
  Py_BEGIN_ALLOW_THREADS;
  {
    pyper_guard g(dev);
    s = note_cuda(cudaStreamSynchronize(st));
  }
  Py_END_ALLOW_THREADS;
  return PyLong_FromLong(s);
}

/* ---------------------------------------------------------------------
   Ordering a call after its inputs' producers
   --------------------------------------------------------------------- */
static unsigned long long stream_waits; /* waits enqueued so far */

#ifdef PYPER_CUDA_HOST
/* The shim runs the work of every stream in order as it is enqueued:
   what a producer enqueued is done before the call, so a wait only
   counts (the tests check which calls wait). */
static int stream_wait(int device, cudaStream_t producer, cudaStream_t stream) {
  (void)device;
  if (producer == stream) return PER_OK;
  ++stream_waits;
  return PER_OK;
}
#else
/* Two events per device, made on first use and kept for the process:
   [0] for the waits of work that runs now, [1] for those a graph
   capture records as external event nodes (the graph refers to its
   event for as long as it lives). */
enum { PYPER_EVENT_DEVICES = 64 };
static cudaEvent_t stream_events[2][PYPER_EVENT_DEVICES];

/* Makes what is enqueued on stream from now on wait for what producer
   has been given so far: an event recorded on producer, waited for by
   stream, on the device. Nothing waits on the host, so it may run
   inside a graph capture of stream: where producer is not part of that
   capture, the wait is recorded as an external event node
   (cudaEventWaitExternal; CUDA refuses a plain wait on an event recorded
   outside the capture); where it is (a stream the capture forked), the
   event joins the two in the graph. */
static int stream_wait(int device, cudaStream_t producer, cudaStream_t stream) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone,
                          ps = cudaStreamCaptureStatusNone;
  cudaEvent_t *ev;
  int s, external;
  if (producer == stream) return PER_OK;
  if (device < 0 || device >= PYPER_EVENT_DEVICES) return (int)PER_ERR_ARG;
  pyper_guard g(device);
  s = note_cuda(cudaStreamIsCapturing(stream, &cs));
  if (s == PER_OK && cs == cudaStreamCaptureStatusActive)
    s = note_cuda(cudaStreamIsCapturing(producer, &ps));
  if (s != PER_OK) return s;
  external = cs == cudaStreamCaptureStatusActive &&
             ps != cudaStreamCaptureStatusActive;
  ev = &stream_events[external][device];
  if (!*ev) s = note_cuda(cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
  if (s == PER_OK) s = note_cuda(cudaEventRecord(*ev, producer));
  if (s == PER_OK)
    s = note_cuda(cudaStreamWaitEvent(
        stream, *ev, external ? cudaEventWaitExternal : cudaEventWaitDefault));
  if (s == PER_OK) ++stream_waits;
  return s;
}
#endif

/* stream_wait(device, producer, stream): the status of stream_wait */
static PyObject *mod_stream_wait(PyObject *mod, PyObject *args) {
  cudaStream_t producer, st;
  int dev;
  (void)mod;
  if (!PyArg_ParseTuple(args, "iO&O&:stream_wait", &dev, conv_stream, &producer,
                        conv_stream, &st))
    return NULL;
  return PyLong_FromLong(stream_wait(dev, producer, st));
}

/* stream_waits(): the waits stream_wait enqueued so far */
static PyObject *mod_stream_waits(PyObject *mod, PyObject *unused) {
  (void)mod;
  (void)unused;
  return PyLong_FromUnsignedLongLong(stream_waits);
}

static PyObject *mod_device_count(PyObject *mod, PyObject *unused) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  (void)mod;
  (void)unused;
  if (e != cudaSuccess) {
    last_cuda_error = (int)e;
    n = 0;
  }
  return PyLong_FromLong(n);
}

static PyObject *mod_current_device(PyObject *mod, PyObject *unused) {
  int d = 0;
  (void)mod;
  (void)unused;
  if (cudaGetDevice(&d) != cudaSuccess) d = 0;
  return PyLong_FromLong(d);
}

/* last_error(): (code, text) of the cudaError_t behind the last
   PER_ERR_DEVICE, (0, "") when none. */
static PyObject *mod_last_error(PyObject *mod, PyObject *unused) {
  (void)mod;
  (void)unused;
  if (!last_cuda_error) return Py_BuildValue("(is)", 0, "");
  return Py_BuildValue("(is)", last_cuda_error,
                       cudaGetErrorString((cudaError_t)last_cuda_error));
}

static PyObject *mod_real_bytes(PyObject *mod, PyObject *unused) {
  (void)mod;
  (void)unused;
  return PyLong_FromSize_t(per_cuda_real_bytes());
}

#ifdef PYPER_CUDA_HOST
/* shim_races(): the shim's race count so far (0 when every launch kept
   per_cuda's rules) */
static PyObject *mod_shim_races(PyObject *mod, PyObject *unused) {
  (void)mod;
  (void)unused;
  return PyLong_FromUnsignedLongLong(per_shim_races);
}

/* shim_order(k): the order threads run in (0 forwards, 1 backwards, 2
   shuffled) */
static PyObject *mod_shim_order(PyObject *mod, PyObject *arg) {
  long k = PyLong_AsLong(arg);
  (void)mod;
  if (k == -1 && PyErr_Occurred()) return NULL;
  per_shim_order = (int)(k % 3);
  Py_RETURN_NONE;
}

/* on_device(ptr, bytes): whether [ptr, ptr + bytes) lies in memory the
   shim allocated (its "device memory") */
static PyObject *mod_on_device(PyObject *mod, PyObject *args) {
  void *p;
  unsigned long long n;
  (void)mod;
  if (!PyArg_ParseTuple(args, "O&K:on_device", conv_ptr, &p, &n)) return NULL;
  return PyBool_FromLong(per_shim_on_device(p, (size_t)n));
}

/* capture_begin(stream) / capture_end(stream): a graph of what the
   stream is given in between (the shim's capture; a GPU trainer uses
   torch.cuda.graph or cudaStreamBeginCapture); replay(graph): run it. */
static PyObject *mod_capture_begin(PyObject *mod, PyObject *arg) {
  (void)mod;
  (void)arg;
  return PyLong_FromLong(
      note_cuda(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal)));
}

static void graph_free(PyObject *cap) {
  cudaGraphExec_t x = (cudaGraphExec_t)PyCapsule_GetPointer(cap, "per.graph");
  if (x) (void)cudaGraphExecDestroy(x);
}

static PyObject *mod_capture_end(PyObject *mod, PyObject *arg) {
  cudaGraph_t g = NULL;
  cudaGraphExec_t x = NULL;
  int s;
  (void)mod;
  (void)arg;
  s = note_cuda(cudaStreamEndCapture(0, &g));
  if (s == PER_OK) s = note_cuda(cudaGraphInstantiate(&x, g));
  if (g) (void)cudaGraphDestroy(g);
  if (s != PER_OK) return PyLong_FromLong(s);
  return PyCapsule_New(x, "per.graph", graph_free);
}

static PyObject *mod_replay(PyObject *mod, PyObject *cap) {
  cudaGraphExec_t x = (cudaGraphExec_t)PyCapsule_GetPointer(cap, "per.graph");
  (void)mod;
  if (!x) return NULL;
  return PyLong_FromLong(note_cuda(cudaGraphLaunch(x, 0)));
}
#endif

/* ---------------------------------------------------------------------
   _Buffer: a per_cuda_buffer in one allocation with its inputs, outputs
   and status words:
     core   per_cuda_buffer_bytes(cfg, max_batch)
     stage  max_batch items: fields packed here, then added
     out    rows items: what sample() drew (rows: max_batch, times
            seq_len with sequences)
     mask   rows bytes: a sequence sample's mask
     ids    max_batch uint64, weights max_batch float
     extra  bytes the caller asked for (fields unpacked from out)
     words  status of add, sample, update, update_seq; the kept first
            error (word and tag); the stale count; the counters of
            counters()
   --------------------------------------------------------------------- */
enum {
  W_ADD = 0,
  W_SAMPLE = 1,
  W_UPDATE = 2,
  W_UPDATE_SEQ = 3,
  W_KEEP = 4,
  W_STALE = 6,
  W_COUNTERS = 8 /* a per_cuda_counters, 48 bytes */
};

typedef struct {
  PyObject_HEAD per_cuda_buffer b;
  void *d;
  int device;
  int ready;
  size_t off_stage, off_out, off_mask, off_ids, off_w, off_extra, off_words,
      bytes;
} BufObject;

static PyTypeObject *BufType;

static void Buf_dealloc(BufObject *self) {
  mem_release(&self->d, self->device);
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free((PyObject *)self);
  Py_DECREF(tp);
}

static unsigned long long *buf_words(BufObject *self) {
  return (unsigned long long *)((char *)self->d + self->off_words);
}

static int buf_ready(BufObject *self) {
  if (self->ready) return 1;
  PyErr_SetString(PyExc_RuntimeError, "per.cuda buffer not initialised");
  return 0;
}

/* _Buffer(config, max_batch, extra_bytes, device, stream) -> (buffer,
   status, why): config a dict of per_config's fields, absent ones
   per_config_default's (pyper_config.h; per/config.py makes it); the
   buffer is None unless status is 0; why names a bad config's field as
   per.ReplayBuffer does ("" otherwise). Waits for the reset to finish. */
static PyObject *mod_buffer(PyObject *mod, PyObject *args) {
  PyObject *d;
  per_config c;
  unsigned mb, seq_len, item_size;
  unsigned long long extra;
  int device, s;
  cudaStream_t st;
  size_t core, rows;
  BufObject *self;
  (void)mod;
  if (!PyArg_ParseTuple(args, "O!IKiO&:_Buffer", &PyDict_Type, &d, &mb, &extra,
                        &device, conv_stream, &st) ||
      pyper_config(d, "per.cuda.ReplayBuffer", &c) < 0)
    return NULL;
  seq_len = c.seq_len;
  item_size = c.item_size;
  self = (BufObject *)BufType->tp_alloc(BufType, 0);
  if (!self) return NULL;
  self->device = device;
  core = per_cuda_buffer_bytes(&c, mb);
  if (core == 0) {
    /* the config's own error, named as the CPU names it: per.h validates
       before it allocates, so a valid config stops at the empty ring
       (PER_ERR_MEMORY) and then the device's own rule is the reason */
    per_buffer probe;
    unsigned char ring = 0;
    s = (int)per_buffer_init_mem(&probe, &c, &ring, 0, NULL);
    if (s == PER_ERR_MEMORY) {
      per_cuda_buffer dp;
      s = (int)per_cuda_buffer_init_mem(&dp, &c, mb, NULL, 0, st);
      if (s == PER_OK || s == PER_ERR_NULL) s = PER_ERR_ARG;
      probe.error[0] = 0;
    }
    Py_DECREF(self);
    return Py_BuildValue("(Ois)", Py_None, s, probe.error);
  }
  rows = (size_t)mb * (seq_len ? seq_len : 1u); /* <= PER_CUDA_MAX_BATCH */
  self->off_stage = round256(core);
  self->off_out = self->off_stage + round256((size_t)mb * item_size);
  self->off_mask = self->off_out + round256(rows * item_size);
  self->off_ids = self->off_mask + round256(seq_len ? rows : 0u);
  self->off_w = self->off_ids + round256((size_t)mb * 8u);
  self->off_extra = self->off_w + round256((size_t)mb * 4u);
  self->off_words = self->off_extra + round256((size_t)extra);
  self->bytes = self->off_words + 256u;
  s = mem_alloc(&self->d, self->bytes, device);
  if (s == PER_OK) {
    pyper_guard g(device);
    s = note_per(
        per_cuda_buffer_init_mem(&self->b, &c, mb, self->d, self->bytes, st));
    if (s == PER_OK)
      s = note_cuda(cudaMemsetAsync(buf_words(self), 0, 256u, st));
    /* the padding between fields is never written by a field: zero, as
       per.ReplayBuffer's records are */
    if (s == PER_OK)
      s = note_cuda(cudaMemsetAsync((char *)self->d + self->off_stage, 0,
                                    (size_t)mb * item_size, st));
    if (s == PER_OK) s = note_cuda(cudaStreamSynchronize(st));
  }
  if (s != PER_OK) {
    Py_DECREF(self);
    return Py_BuildValue("(Ois)", Py_None, s, "");
  }
  self->ready = 1;
  return Py_BuildValue("(Nis)", (PyObject *)self, 0, "");
}

/* keep the call's status word in the buffer's first-error word */
static int buf_keep(BufObject *self, int word, cudaStream_t st) {
  unsigned long long *w = buf_words(self);
  return note_per(per_cuda_status_keep(w + W_KEEP, w + word,
                                       (unsigned long long)word + 1u, st));
}

/* add(items_ptr, n, ends_ptr, stream): per_cuda_buffer_add_batch from
   items_ptr (0: the stage), ends_ptr 0 for none. */
static PyObject *Buf_add(BufObject *self, PyObject *args) {
  void *items, *ends;
  unsigned n;
  int s;
  cudaStream_t st;
  if (!buf_ready(self) ||
      !PyArg_ParseTuple(args, "O&IO&O&:add", conv_ptr, &items, &n, conv_ptr,
                        &ends, conv_stream, &st))
    return NULL;
  if (!items) items = (char *)self->d + self->off_stage;
  {
    pyper_guard g(self->device);
    s = note_per(per_cuda_buffer_add_batch(&self->b, items, n,
                                           (const uint8_t *)ends,
                                           buf_words(self) + W_ADD, st));
    if (s == PER_OK) s = buf_keep(self, W_ADD, st);
  }
  return PyLong_FromLong(s);
}

/* sample(B, flags, beta, window, stream): per_cuda_buffer_sample into
   the buffer's out, ids and weights (and mask, for sequences); flags 0
   and window 0 take the defaults (opts NULL). */
static PyObject *Buf_sample(BufObject *self, PyObject *args) {
  unsigned B, flags, window;
  double beta;
  int s, use_opts;
  cudaStream_t st;
  per_sample_opts o;
  if (!buf_ready(self) ||
      !PyArg_ParseTuple(args, "IIdIpO&:sample", &B, &flags, &beta, &window,
                        &use_opts, conv_stream, &st))
    return NULL;
  memset(&o, 0, sizeof o);
  o.flags = flags;
  o.beta = beta;
  o.window = window;
  if (flags & PER_SAMPLE_SEQUENCES)
    o.mask = (uint8_t *)self->d + self->off_mask;
  {
    pyper_guard g(self->device);
    s = note_per(per_cuda_buffer_sample(
        &self->b, B, use_opts ? &o : NULL, (char *)self->d + self->off_out,
        (uint64_t *)((char *)self->d + self->off_ids),
        (float *)((char *)self->d + self->off_w), buf_words(self) + W_SAMPLE,
        st));
    if (s == PER_OK) s = buf_keep(self, W_SAMPLE, st);
  }
  return PyLong_FromLong(s);
}

/* update(ids_ptr, td_ptr, n, stream): per_cuda_buffer_update, the stale
   count into the buffer's word. */
static PyObject *Buf_update(BufObject *self, PyObject *args) {
  void *ids, *td;
  unsigned n;
  int s;
  cudaStream_t st;
  if (!buf_ready(self) ||
      !PyArg_ParseTuple(args, "O&O&IO&:update", conv_ptr, &ids, conv_ptr, &td,
                        &n, conv_stream, &st))
    return NULL;
  {
    pyper_guard g(self->device);
    s = note_per(per_cuda_buffer_update(&self->b, (const uint64_t *)ids,
                                        (const float *)td, n,
                                        (uint32_t *)(buf_words(self) + W_STALE),
                                        buf_words(self) + W_UPDATE, st));
    if (s == PER_OK) s = buf_keep(self, W_UPDATE, st);
  }
  return PyLong_FromLong(s);
}

/* update_seq(ids_ptr, td_ptr, n, stream): per_cuda_buffer_update_seq,
   the stale count into the buffer's word. */
static PyObject *Buf_update_seq(BufObject *self, PyObject *args) {
  void *ids, *td;
  unsigned n;
  int s;
  cudaStream_t st;
  if (!buf_ready(self) ||
      !PyArg_ParseTuple(args, "O&O&IO&:update_seq", conv_ptr, &ids, conv_ptr,
                        &td, &n, conv_stream, &st))
    return NULL;
  {
    pyper_guard g(self->device);
    s = note_per(per_cuda_buffer_update_seq(
        &self->b, (const uint64_t *)ids, (const float *)td, n,
        (uint32_t *)(buf_words(self) + W_STALE), buf_words(self) + W_UPDATE_SEQ,
        st));
    if (s == PER_OK) s = buf_keep(self, W_UPDATE_SEQ, st);
  }
  return PyLong_FromLong(s);
}

/* The first error kept in keep[0..1] since the last clear, as (status,
   code, tag, pos): waits for the stream, reads the pair and, with clear,
   zeroes it. */
static PyObject *read_keep(unsigned long long *keep, int device,
                           PyObject *args) {
  cudaStream_t st;
  int clear, s;
  unsigned long long w[2] = {0, 0};
  uint32_t pos = 0;
  per_status code;
  if (!PyArg_ParseTuple(args, "O&p:check", conv_stream, &st, &clear))
    return NULL;
  Py_BEGIN_ALLOW_THREADS;
  {
    pyper_guard g(device);
    s = note_cuda(
        cudaMemcpyAsync(w, keep, sizeof w, cudaMemcpyDeviceToHost, st));
    if (s == PER_OK) s = note_cuda(cudaStreamSynchronize(st));
    if (s == PER_OK && clear && w[0])
      s = note_cuda(cudaMemsetAsync(keep, 0, sizeof w, st));
  }
  Py_END_ALLOW_THREADS;
  code = per_cuda_status_decode(w[0], &pos);
  return Py_BuildValue("(iiKI)", s, (int)code, w[1], (unsigned)pos);
}

/* check(stream, clear) -> (status, code, tag, pos): read_keep of the
   buffer's pair (tag 1 add, 2 sample, 3 update, 4 update_seq; 0 none). */
static PyObject *Buf_check(BufObject *self, PyObject *args) {
  if (!buf_ready(self)) return NULL;
  return read_keep(buf_words(self) + W_KEEP, self->device, args);
}

/* counters(stream) -> (status, size, pos, added, trajs, step, max_leaf):
   per_cuda_buffer_counters, waited for. */
static PyObject *Buf_counters(BufObject *self, PyObject *arg) {
  cudaStream_t st;
  per_cuda_counters c;
  per_cuda_counters *d_c;
  int s;
  if (!buf_ready(self) || !conv_stream(arg, &st)) return NULL;
  memset(&c, 0, sizeof c);
  d_c = (per_cuda_counters *)(void *)(buf_words(self) + W_COUNTERS);
  Py_BEGIN_ALLOW_THREADS;
  {
    pyper_guard g(self->device);
    s = note_per(per_cuda_buffer_counters(&self->b, d_c, st));
    if (s == PER_OK)
      s = note_cuda(
          cudaMemcpyAsync(&c, d_c, sizeof c, cudaMemcpyDeviceToHost, st));
    if (s == PER_OK) s = note_cuda(cudaStreamSynchronize(st));
  }
  Py_END_ALLOW_THREADS;
  return Py_BuildValue("(iKKKKKd)", s, (unsigned long long)c.size,
                       (unsigned long long)c.pos, (unsigned long long)c.added,
                       (unsigned long long)c.trajs, (unsigned long long)c.step,
                       c.max_leaf);
}

/* the per_buffer of a per.ReplayBuffer, and its lock held */
static pyper_shard *shard_of(PyObject *owner, PyObject **capsule) {
  pyper_shard *sh;
  *capsule = PyObject_CallMethod(owner, "_shard", NULL);
  if (!*capsule) return NULL;
  if (!PyCapsule_IsValid(*capsule, PYPER_SHARD_NAME)) {
    /* another module's buffer: the other node type */
    Py_CLEAR(*capsule);
    PyErr_SetString(PyExc_TypeError, "per." PYPER_MODULE
                                     " takes a per.ReplayBuffer of " PYPER_NODES
                                     " nodes (" PYPER_PER "'s) only");
    return NULL;
  }
  sh = (pyper_shard *)PyCapsule_GetPointer(*capsule, PYPER_SHARD_NAME);
  if (sh && (sh->version != PER_VERSION || sh->size != sizeof(per_buffer))) {
    PyErr_SetString(PyExc_ImportError,
                    "per." PYPER_MODULE " and " PYPER_PER " were built from "
                    "different per.h: reinstall per");
    sh = NULL;
  }
  if (!sh) Py_CLEAR(*capsule);
  return sh;
}

/* download(cpu_buffer, stream): per_cuda_buffer_download into the
   per.ReplayBuffer's per_buffer (made for it, with no views out); its
   layout text is kept. Waits. Returns the status. */
static PyObject *Buf_download(BufObject *self, PyObject *args) {
  PyObject *owner, *cap;
  cudaStream_t st;
  pyper_shard *sh;
  int s;
  if (!buf_ready(self) ||
      !PyArg_ParseTuple(args, "OO&:download", &owner, conv_stream, &st))
    return NULL;
  if (!(sh = shard_of(owner, &cap))) return NULL;
  if (*sh->exports > 0) {
    Py_DECREF(cap);
    PyErr_SetString(PyExc_BufferError, "ReplayBuffer has exported views");
    return NULL;
  }
  Py_BEGIN_ALLOW_THREADS;
  PyThread_acquire_lock(sh->lock, WAIT_LOCK);
  {
    char layout[PER_LAYOUT_MAX];
    pyper_guard g(self->device);
    memcpy(layout, sh->b->layout, sizeof layout);
    s = note_per(per_cuda_buffer_download(&self->b, sh->b, st));
    memcpy(sh->b->layout, layout, sizeof layout);
  }
  PyThread_release_lock(sh->lock);
  Py_END_ALLOW_THREADS;
  Py_DECREF(cap);
  return PyLong_FromLong(s);
}

/* upload(cpu_buffer, stream): per_cuda_buffer_upload from the
   per.ReplayBuffer, then the stream is waited for (the copies read the
   CPU buffer: it may change after). Returns the status. */
static PyObject *Buf_upload(BufObject *self, PyObject *args) {
  PyObject *owner, *cap;
  cudaStream_t st;
  pyper_shard *sh;
  int s;
  if (!buf_ready(self) ||
      !PyArg_ParseTuple(args, "OO&:upload", &owner, conv_stream, &st))
    return NULL;
  if (!(sh = shard_of(owner, &cap))) return NULL;
  Py_BEGIN_ALLOW_THREADS;
  PyThread_acquire_lock(sh->lock, WAIT_LOCK);
  {
    pyper_guard g(self->device);
    s = note_per(per_cuda_buffer_upload(&self->b, sh->b, st));
    if (s == PER_OK) s = note_cuda(cudaStreamSynchronize(st));
  }
  PyThread_release_lock(sh->lock);
  Py_END_ALLOW_THREADS;
  Py_DECREF(cap);
  return PyLong_FromLong(s);
}

/* reset(stream): empty again, as a new buffer of the same config */
static PyObject *Buf_reset(BufObject *self, PyObject *arg) {
  cudaStream_t st;
  per_config c;
  uint32_t mb;
  int s;
  if (!buf_ready(self) || !conv_stream(arg, &st)) return NULL;
  c = self->b.cfg;
  mb = self->b.max_batch;
  {
    pyper_guard g(self->device);
    s = note_per(
        per_cuda_buffer_init_mem(&self->b, &c, mb, self->d, self->bytes, st));
    if (s == PER_OK)
      s = note_cuda(cudaMemsetAsync(buf_words(self), 0, 256u, st));
  }
  if (s != PER_OK) self->ready = 0;
  return PyLong_FromLong(s);
}

static PyObject *Buf_ptrs(BufObject *self, void *unused) {
  char *d = (char *)self->d;
  (void)unused;
  return Py_BuildValue(
      "{s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "stage",
      (unsigned long long)(uintptr_t)(d + self->off_stage), "out",
      (unsigned long long)(uintptr_t)(d + self->off_out), "mask",
      (unsigned long long)(uintptr_t)(d + self->off_mask), "ids",
      (unsigned long long)(uintptr_t)(d + self->off_ids), "weights",
      (unsigned long long)(uintptr_t)(d + self->off_w), "extra",
      (unsigned long long)(uintptr_t)(d + self->off_extra), "stale",
      (unsigned long long)(uintptr_t)(buf_words(self) + W_STALE));
}

static PyObject *Buf_bytes(BufObject *self, void *unused) {
  (void)unused;
  return PyLong_FromSize_t(self->bytes);
}

/* config: the per_config's fields (pyper_config.h) and max_batch */
static PyObject *Buf_config(BufObject *self, void *unused) {
  PyObject *d = pyper_config_dict(&self->b.cfg);
  (void)unused;
  if (d && pyper_set_item(d, "max_batch",
                          PyLong_FromUnsignedLong(self->b.max_batch)) < 0)
    Py_CLEAR(d);
  return d;
}

static PyObject *Buf_beta(BufObject *self, void *unused) {
  (void)unused;
  return PyFloat_FromDouble(self->b.cfg.beta0);
}

static PyMethodDef Buf_methods[] = {
    {"add", (PyCFunction)Buf_add, METH_VARARGS, NULL},
    {"sample", (PyCFunction)Buf_sample, METH_VARARGS, NULL},
    {"update", (PyCFunction)Buf_update, METH_VARARGS, NULL},
    {"update_seq", (PyCFunction)Buf_update_seq, METH_VARARGS, NULL},
    {"check", (PyCFunction)Buf_check, METH_VARARGS, NULL},
    {"counters", (PyCFunction)Buf_counters, METH_O, NULL},
    {"download", (PyCFunction)Buf_download, METH_VARARGS, NULL},
    {"upload", (PyCFunction)Buf_upload, METH_VARARGS, NULL},
    {"reset", (PyCFunction)Buf_reset, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Buf_getset[] = {
    {(char *)"ptrs", (getter)Buf_ptrs, NULL, NULL, NULL},
    {(char *)"bytes", (getter)Buf_bytes, NULL, NULL, NULL},
    {(char *)"config", (getter)Buf_config, NULL, NULL, NULL},
    {(char *)"beta0", (getter)Buf_beta, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* ---------------------------------------------------------------------
   _Tree: a per_cuda_tree with scratch for max_batch pairs, sample
   outputs (max_batch indices and values), the sampling counter and
   status words, in one allocation:
     nodes  per_cuda_tree_bytes(capacity)
     scratch  per_cuda_tree_set_batch's for max_batch
     idx    max_batch uint32, val max_batch per_real
     words  status of set, sample and find; the kept first error (word,
            tag); the counter
   --------------------------------------------------------------------- */
enum { T_SET = 0, T_SAMPLE = 1, T_FIND = 2, T_KEEP = 4, T_COUNTER = 6 };

typedef struct {
  PyObject_HEAD per_cuda_tree t;
  void *d;
  int device;
  uint32_t max_batch;
  size_t scratch_bytes, off_scratch, off_idx, off_val, off_words;
} TreeObject;

static PyTypeObject *TreeType;

static void Tree_dealloc(TreeObject *self) {
  mem_release(&self->d, self->device);
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free((PyObject *)self);
  Py_DECREF(tp);
}

static unsigned long long *tree_words(TreeObject *self) {
  return (unsigned long long *)((char *)self->d + self->off_words);
}

/* _Tree(capacity, max_batch, device, stream) -> (tree, status): empty
   (every node 0), counter 0. Waits. */
static PyObject *mod_tree(PyObject *mod, PyObject *args) {
  unsigned capacity, mb;
  int device, s;
  cudaStream_t st;
  size_t nodes;
  TreeObject *self;
  (void)mod;
  if (!PyArg_ParseTuple(args, "IIiO&:_Tree", &capacity, &mb, &device,
                        conv_stream, &st))
    return NULL;
  nodes = per_cuda_tree_bytes(capacity);
  if (nodes == 0) return Py_BuildValue("(Oi)", Py_None, (int)PER_ERR_CAPACITY);
  if (mb == 0 || mb > PER_CUDA_MAX_BATCH)
    return Py_BuildValue("(Oi)", Py_None, (int)PER_ERR_BATCH);
  self = (TreeObject *)TreeType->tp_alloc(TreeType, 0);
  if (!self) return NULL;
  self->device = device;
  self->max_batch = mb;
  /* per_cuda_tree_set_batch's scratch for mb pairs on this tree: its size
     query, on a descriptor of the tree's shape (init_mem does no device
     work; the query touches no memory) */
  {
    per_cuda_tree probe;
    per_status q = per_cuda_tree_init_mem(&probe, capacity, (void *)256, nodes);
    self->scratch_bytes = 0;
    if (q == PER_OK)
      q = per_cuda_tree_set_batch(&probe, NULL, NULL, mb, NULL,
                                  &self->scratch_bytes, NULL, st);
    if (q != PER_OK) {
      Py_DECREF(self);
      return Py_BuildValue("(Oi)", Py_None, (int)q);
    }
  }
  self->off_scratch = round256(nodes);
  self->off_idx = self->off_scratch + round256(self->scratch_bytes);
  self->off_val = self->off_idx + round256((size_t)mb * 4u);
  self->off_words = self->off_val + round256((size_t)mb * sizeof(per_real));
  s = mem_alloc(&self->d, self->off_words + 256u, device);
  if (s == PER_OK) {
    pyper_guard g(device);
    s = note_per(per_cuda_tree_init_mem(&self->t, capacity, self->d, nodes));
    if (s == PER_OK) s = note_per(per_cuda_tree_clear(&self->t, st));
    if (s == PER_OK)
      s = note_cuda(cudaMemsetAsync(tree_words(self), 0, 256u, st));
    if (s == PER_OK) s = note_cuda(cudaStreamSynchronize(st));
  }
  if (s != PER_OK) {
    Py_DECREF(self);
    return Py_BuildValue("(Oi)", Py_None, s);
  }
  return Py_BuildValue("(Ni)", (PyObject *)self, 0);
}

static int tree_keep(TreeObject *self, int word, cudaStream_t st) {
  unsigned long long *w = tree_words(self);
  return note_per(per_cuda_status_keep(w + T_KEEP, w + word,
                                       (unsigned long long)word + 1u, st));
}

/* set(idx_ptr, val_ptr, n, stream): per_cuda_tree_set_batch */
static PyObject *Tree_set(TreeObject *self, PyObject *args) {
  void *idx, *val;
  unsigned n;
  int s;
  cudaStream_t st;
  size_t sb = self->scratch_bytes;
  if (!PyArg_ParseTuple(args, "O&O&IO&:set", conv_ptr, &idx, conv_ptr, &val, &n,
                        conv_stream, &st))
    return NULL;
  if (n > self->max_batch) return PyLong_FromLong((int)PER_ERR_BATCH);
  {
    pyper_guard g(self->device);
    s = note_per(per_cuda_tree_set_batch(&self->t, (const uint32_t *)idx,
                                         (const per_real *)val, n,
                                         (char *)self->d + self->off_scratch,
                                         &sb, tree_words(self) + T_SET, st));
    if (s == PER_OK) s = tree_keep(self, T_SET, st);
  }
  return PyLong_FromLong(s);
}

/* sample(B, seed, stream): per_cuda_tree_sample with the device counter
   into the tree's idx and val outputs */
static PyObject *Tree_sample(TreeObject *self, PyObject *args) {
  unsigned B;
  unsigned long long seed;
  int s;
  cudaStream_t st;
  if (!PyArg_ParseTuple(args, "IKO&:sample", &B, &seed, conv_stream, &st))
    return NULL;
  if (B > self->max_batch) return PyLong_FromLong((int)PER_ERR_BATCH);
  {
    pyper_guard g(self->device);
    s = note_per(
        per_cuda_tree_sample(&self->t, seed, 0, tree_words(self) + T_COUNTER, B,
                             (uint32_t *)((char *)self->d + self->off_idx),
                             (per_real *)((char *)self->d + self->off_val),
                             tree_words(self) + T_SAMPLE, st));
    if (s == PER_OK) s = tree_keep(self, T_SAMPLE, st);
  }
  return PyLong_FromLong(s);
}

/* find(u_ptr, n, stream): per_cuda_tree_find into the tree's idx and val
   outputs */
static PyObject *Tree_find(TreeObject *self, PyObject *args) {
  void *u;
  unsigned n;
  int s;
  cudaStream_t st;
  if (!PyArg_ParseTuple(args, "O&IO&:find", conv_ptr, &u, &n, conv_stream, &st))
    return NULL;
  if (n > self->max_batch) return PyLong_FromLong((int)PER_ERR_BATCH);
  {
    pyper_guard g(self->device);
    s = note_per(
        per_cuda_tree_find(&self->t, (const per_real *)u, n,
                           (uint32_t *)((char *)self->d + self->off_idx),
                           (per_real *)((char *)self->d + self->off_val),
                           tree_words(self) + T_FIND, st));
    if (s == PER_OK) s = tree_keep(self, T_FIND, st);
  }
  return PyLong_FromLong(s);
}

/* check(stream, clear) -> (status, code, tag, pos): read_keep of the
   tree's pair (tag 1 set, 2 sample, 3 find). */
static PyObject *Tree_check(TreeObject *self, PyObject *args) {
  return read_keep(tree_words(self) + T_KEEP, self->device, args);
}

static PyObject *Tree_ptrs(TreeObject *self, void *unused) {
  char *d = (char *)self->d;
  (void)unused;
  return Py_BuildValue(
      "{s:K,s:K,s:K,s:K}", "nodes", (unsigned long long)(uintptr_t)d, "idx",
      (unsigned long long)(uintptr_t)(d + self->off_idx), "val",
      (unsigned long long)(uintptr_t)(d + self->off_val), "counter",
      (unsigned long long)(uintptr_t)(tree_words(self) + T_COUNTER));
}

static PyObject *Tree_shape(TreeObject *self, void *unused) {
  (void)unused;
  return Py_BuildValue("(III)", self->t.capacity, self->t.leaves,
                       self->max_batch);
}

static PyMethodDef Tree_methods[] = {
    {"set", (PyCFunction)Tree_set, METH_VARARGS, NULL},
    {"sample", (PyCFunction)Tree_sample, METH_VARARGS, NULL},
    {"find", (PyCFunction)Tree_find, METH_VARARGS, NULL},
    {"check", (PyCFunction)Tree_check, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Tree_getset[] = {
    {(char *)"ptrs", (getter)Tree_ptrs, NULL, NULL, NULL},
    {(char *)"shape", (getter)Tree_shape, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* ---------------------------------------------------------------------
   The module
   --------------------------------------------------------------------- */
static PyMethodDef mod_methods[] = {
    {"view", mod_view, METH_VARARGS, NULL},
    {"dlpack_info", mod_dlpack_info, METH_VARARGS, NULL},
    {"copy", mod_copy, METH_VARARGS, NULL},
    {"copy2d", mod_copy2d, METH_VARARGS, NULL},
    {"memset", mod_memset, METH_VARARGS, NULL},
    {"synchronize", mod_synchronize, METH_VARARGS, NULL},
    {"stream_wait", mod_stream_wait, METH_VARARGS, NULL},
    {"stream_waits", mod_stream_waits, METH_NOARGS, NULL},
    {"device_count", mod_device_count, METH_NOARGS, NULL},
    {"current_device", mod_current_device, METH_NOARGS, NULL},
    {"last_error", mod_last_error, METH_NOARGS, NULL},
    {"real_bytes", mod_real_bytes, METH_NOARGS, NULL},
    {"_Buffer", mod_buffer, METH_VARARGS, NULL},
    {"_Tree", mod_tree, METH_VARARGS, NULL},
#ifdef PYPER_CUDA_HOST
    {"shim_races", mod_shim_races, METH_NOARGS, NULL},
    {"shim_order", mod_shim_order, METH_O, NULL},
    {"on_device", mod_on_device, METH_VARARGS, NULL},
    {"capture_begin", mod_capture_begin, METH_O, NULL},
    {"capture_end", mod_capture_end, METH_O, NULL},
    {"replay", mod_replay, METH_O, NULL},
#endif
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT,
                                    PYPER_MODULE,
                                    NULL,
                                    -1,
                                    mod_methods,
                                    NULL,
                                    NULL,
                                    NULL,
                                    NULL};

static PyTypeObject *make_type(const char *name, size_t size,
                               destructor dealloc, PyMethodDef *methods,
                               PyGetSetDef *getset, reprfunc repr,
                               newfunc tp_new) {
  PyType_Slot slots[6];
  PyType_Spec spec;
  int k = 0;
  slots[k].slot = Py_tp_dealloc;
  slots[k++].pfunc = (void *)dealloc;
  if (methods) {
    slots[k].slot = Py_tp_methods;
    slots[k++].pfunc = (void *)methods;
  }
  if (getset) {
    slots[k].slot = Py_tp_getset;
    slots[k++].pfunc = (void *)getset;
  }
  if (repr) {
    slots[k].slot = Py_tp_repr;
    slots[k++].pfunc = (void *)repr;
  }
  if (tp_new) {
    slots[k].slot = Py_tp_new;
    slots[k++].pfunc = (void *)tp_new;
  }
  slots[k].slot = 0;
  slots[k].pfunc = NULL;
  spec.name = name;
  spec.basicsize = (int)size;
  spec.itemsize = 0;
  spec.flags = Py_TPFLAGS_DEFAULT;
  spec.slots = slots;
  return (PyTypeObject *)PyType_FromSpec(&spec);
}

PyMODINIT_FUNC PYPER_INIT(void) {
  PyObject *m;
  if (!(ArrType = make_type("per.cuda.DeviceArray", sizeof(ArrObject),
                            (destructor)Arr_dealloc, Arr_methods, Arr_getset,
                            (reprfunc)Arr_repr, NULL)) ||
      !(MemType = make_type("per." PYPER_MODULE ".Memory", sizeof(MemObject),
                            (destructor)Mem_dealloc, NULL, Mem_getset, NULL,
                            Mem_new)) ||
      !(BufType = make_type("per." PYPER_MODULE "._Buffer", sizeof(BufObject),
                            (destructor)Buf_dealloc, Buf_methods, Buf_getset,
                            NULL, NULL)) ||
      !(TreeType = make_type("per." PYPER_MODULE "._Tree", sizeof(TreeObject),
                             (destructor)Tree_dealloc, Tree_methods,
                             Tree_getset, NULL, NULL)))
    return NULL;
  m = PyModule_Create(&moddef);
  if (!m) return NULL;
  Py_INCREF(ArrType);
  Py_INCREF(MemType);
  if (PyModule_AddObject(m, "DeviceArray", (PyObject *)ArrType) < 0 ||
      PyModule_AddObject(m, "Memory", (PyObject *)MemType) < 0 ||
      PyModule_AddStringConstant(
          m, "backend", PYPER_DLPACK_DEVICE == 2 ? "cuda" : "host") < 0 ||
      PyModule_AddIntConstant(m, "DLPACK_DEVICE", PYPER_DLPACK_DEVICE) < 0 ||
      PyModule_AddIntConstant(m, "MAX_BATCH", (long)PER_CUDA_MAX_BATCH) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
