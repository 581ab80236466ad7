/* A per_config from the dict per/config.py builds, and a dict from a
   per_config: the C half of per.config, shared by per._per (ReplayBuffer,
   FrameBuffer) and per._cuda (per.cuda.ReplayBuffer). Include it after
   Python.h and per.h.

   The dict's keys are the C fields' names. A field the dict does not
   name keeps per_config_default(capacity, item_size)'s value; a key that
   names no field is a TypeError. Integers are checked here, named as the
   extension's other arguments are ("ReplayBuffer: seed must be in [0,
   2^64), got -1"); reals arrive checked by per/config.py. A field added
   to per_config is one line of pyper_config_keys here and one Key of
   per/config.py. */
#ifndef PYPER_CONFIG_H
#define PYPER_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A field of a C struct that a dict key names: where it is in the struct
   and its type ('I' uint32_t, 'K' uint64_t, 'd' double, 'f' float). */
typedef struct {
  const char *key;
  size_t offset;
  char type;
} pyper_key;

/* The struct at base and the keys that name its fields. */
typedef struct {
  void *base;
  const pyper_key *keys;
  size_t n;
} pyper_section;

#define PYPER_KEY(type, field, kind) \
  { #field, offsetof(type, field), kind }
#define PYPER_NKEYS(keys) (sizeof(keys) / sizeof((keys)[0]))

/* per_config's fields, in the struct's order (the order of the dicts
   made here) */
static const pyper_key pyper_config_keys[] = {
    PYPER_KEY(per_config, capacity, 'I'),
    PYPER_KEY(per_config, item_size, 'I'),
    PYPER_KEY(per_config, alpha, 'd'),
    PYPER_KEY(per_config, beta0, 'd'),
    PYPER_KEY(per_config, beta1, 'd'),
    PYPER_KEY(per_config, beta_steps, 'K'),
    PYPER_KEY(per_config, eps, 'd'),
    PYPER_KEY(per_config, max_priority, 'd'),
    PYPER_KEY(per_config, seed, 'K'),
    PYPER_KEY(per_config, flags, 'I'),
    PYPER_KEY(per_config, max_unique, 'I'),
    PYPER_KEY(per_config, seq_len, 'I'),
    PYPER_KEY(per_config, seq_stride, 'I'),
    PYPER_KEY(per_config, seq_eta, 'd'),
};

/* An integer (anything with __index__: int, NumPy integers) in [0,
   2^bits) into *out; else -1 and a TypeError ("what must be an int, not
   float") or an OverflowError ("what must be in [0, 2^32), got -1"),
   `what` being "Call: argument". */
static int pyper_uint(PyObject *o, int bits, uint64_t *out, const char *what) {
  unsigned long long v;
  PyObject *i = PyNumber_Index(o);
  if (!i) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "%s must be an int, not %.200s", what,
                   Py_TYPE(o)->tp_name);
    }
    return -1;
  }
  v = PyLong_AsUnsignedLongLong(i);
  if ((v == (unsigned long long)-1 && PyErr_Occurred()) ||
      (bits < 64 && v >> bits)) {
    PyErr_Clear();
    PyErr_Format(PyExc_OverflowError, "%s must be in [0, 2^%d), got %S", what,
                 bits, i);
    Py_DECREF(i);
    return -1;
  }
  Py_DECREF(i);
  *out = (uint64_t)v;
  return 0;
}

/* Value o into the field f at `at`; `what` names it in errors. */
static int pyper_set(PyObject *o, const pyper_key *f, char *at,
                     const char *what) {
  uint64_t u;
  uint32_t u32;
  double x;
  float x32;
  switch (f->type) {
    case 'I':
      if (pyper_uint(o, 32, &u, what) < 0) return -1;
      u32 = (uint32_t)u;
      memcpy(at, &u32, sizeof u32);
      return 0;
    case 'K':
      if (pyper_uint(o, 64, &u, what) < 0) return -1;
      memcpy(at, &u, sizeof u);
      return 0;
    default:
      x = PyFloat_AsDouble(o);
      if (x == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
          PyErr_Clear();
          PyErr_Format(PyExc_TypeError, "%s must be a real number, not %.200s",
                       what, Py_TYPE(o)->tp_name);
        }
        return -1;
      }
      if (f->type == 'f') {
        x32 = (float)x;
        memcpy(at, &x32, sizeof x32);
      } else {
        memcpy(at, &x, sizeof x);
      }
      return 0;
  }
}

/* Every key of the dict d into the field of the sections s[0..ns) that it
   names, in d's order; -1 with an exception set at the first key that
   names no field or whose value does not fit. `label` ("ReplayBuffer")
   names the call in the messages. */
static int pyper_fill(PyObject *d, const char *label, const pyper_section *s,
                      size_t ns) {
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  char what[160];
  int r = 0;
  while (r == 0 && PyDict_Next(d, &pos, &k, &v)) {
    const char *name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
    const pyper_key *f = NULL;
    char *at = NULL;
    size_t i, j;
    if (!name) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "%s: config keys are str, not %.200s",
                     label, Py_TYPE(k)->tp_name);
      return -1;
    }
    for (i = 0; i < ns && !f; ++i)
      for (j = 0; j < s[i].n && !f; ++j)
        if (strcmp(s[i].keys[j].key, name) == 0) {
          f = &s[i].keys[j];
          at = (char *)s[i].base + f->offset;
        }
    if (!f) {
      PyErr_Format(PyExc_TypeError, "%s: %R is not a config field", label, k);
      return -1;
    }
    snprintf(what, sizeof what, "%s: %s", label, name);
    /* the conversion may run Python code (__index__, __float__): the
       value is held while it does */
    Py_INCREF(v);
    r = pyper_set(v, f, at, what);
    Py_DECREF(v);
  }
  return r;
}

/* d[key] = o, taking o's reference (o NULL: its error is already set);
   0, or -1 with an exception set. */
static int pyper_set_item(PyObject *d, const char *key, PyObject *o) {
  int r;
  if (!o) return -1;
  r = PyDict_SetItemString(d, key, o);
  Py_DECREF(o);
  return r;
}

/* A new dict of the fields the keys of s name, in their order. */
static PyObject *pyper_dict(const pyper_section *s) {
  PyObject *d = PyDict_New(), *o;
  size_t j;
  if (!d) return NULL;
  for (j = 0; j < s->n; ++j) {
    const pyper_key *f = &s->keys[j];
    const char *at = (const char *)s->base + f->offset;
    uint32_t u32;
    uint64_t u;
    double x;
    float x32;
    switch (f->type) {
      case 'I':
        memcpy(&u32, at, sizeof u32);
        o = PyLong_FromUnsignedLong(u32);
        break;
      case 'K':
        memcpy(&u, at, sizeof u);
        o = PyLong_FromUnsignedLongLong(u);
        break;
      case 'f':
        memcpy(&x32, at, sizeof x32);
        o = PyFloat_FromDouble((double)x32);
        break;
      default: memcpy(&x, at, sizeof x); o = PyFloat_FromDouble(x);
    }
    if (pyper_set_item(d, f->key, o) < 0) {
      Py_DECREF(d);
      return NULL;
    }
  }
  return d;
}

/* *c from the dict d (see the top): per_config_default of d's capacity
   and item_size (0 when absent: per_buffer_init refuses them), then
   every field d names. -1 with an exception set. */
static int pyper_config(PyObject *d, const char *label, per_config *c) {
  pyper_section s;
  per_config given;
  memset(&given, 0, sizeof given);
  s.base = &given;
  s.keys = pyper_config_keys;
  s.n = PYPER_NKEYS(pyper_config_keys);
  if (pyper_fill(d, label, &s, 1) < 0) return -1;
  *c = per_config_default(given.capacity, given.item_size);
  s.base = c;
  return pyper_fill(d, label, &s, 1);
}

/* A per_config as a dict of its fields. */
static PyObject *pyper_config_dict(const per_config *c) {
  pyper_section s;
  s.base = (void *)(uintptr_t)c; /* read only */
  s.keys = pyper_config_keys;
  s.n = PYPER_NKEYS(pyper_config_keys);
  return pyper_dict(&s);
}

#endif
