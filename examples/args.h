/* args.h - the command-line helpers the examples share (example code,
   not per's API): numbers parsed whole and within bounds, and a table of
   flags, each naming the variable it sets. Static functions (the flag
   constructors inline, so that a program need not use every kind);
   include once. */
#ifndef PER_EXAMPLES_ARGS_H
#define PER_EXAMPLES_ARGS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* s as a decimal long in [lo, hi] into *out: 0, or -1 (*out unchanged)
   for anything else (trailing characters, overflow, out of bounds). */
static int parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

/* s as a double in [lo, hi] (not NaN) into *out: 0, or -1. */
static int parse_double(const char *s, double lo, double hi, double *out) {
  char *end;
  double v;
  errno = 0;
  v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
  *out = v;
  return 0;
}

/* What a flag sets: 1 into an int (a flag without a value), its value as
   given, or its value as a number of one of the types below. */
enum {
  ARG_SWITCH,
  ARG_TEXT,
  ARG_LONG,
  ARG_U32,
  ARG_U64,
  ARG_DOUBLE,
  ARG_FLOAT
};

/* One flag: its name, its kind, the variable it sets and the bounds of
   its value (lo, hi for the integer kinds, dlo, dhi for the real ones). */
typedef struct arg_flag {
  const char *name;
  int kind;
  void *dst;
  long lo, hi;
  double dlo, dhi;
} arg_flag;

static inline arg_flag arg_make(const char *name, int kind, void *dst, long lo,
                                long hi, double dlo, double dhi) {
  arg_flag f;
  f.name = name;
  f.kind = kind;
  f.dst = dst;
  f.lo = lo;
  f.hi = hi;
  f.dlo = dlo;
  f.dhi = dhi;
  return f;
}

static inline arg_flag arg_switch(const char *name, int *dst) {
  return arg_make(name, ARG_SWITCH, dst, 0, 0, 0.0, 0.0);
}

static inline arg_flag arg_text(const char *name, const char **dst) {
  return arg_make(name, ARG_TEXT, dst, 0, 0, 0.0, 0.0);
}

static inline arg_flag arg_long(const char *name, long *dst, long lo, long hi) {
  return arg_make(name, ARG_LONG, dst, lo, hi, 0.0, 0.0);
}

static inline arg_flag arg_u32(const char *name, uint32_t *dst, long lo,
                               long hi) {
  return arg_make(name, ARG_U32, dst, lo, hi, 0.0, 0.0);
}

static inline arg_flag arg_u64(const char *name, uint64_t *dst, long lo,
                               long hi) {
  return arg_make(name, ARG_U64, dst, lo, hi, 0.0, 0.0);
}

static inline arg_flag arg_double(const char *name, double *dst, double lo,
                                  double hi) {
  return arg_make(name, ARG_DOUBLE, dst, 0, 0, lo, hi);
}

static inline arg_flag arg_float(const char *name, float *dst, double lo,
                                 double hi) {
  return arg_make(name, ARG_FLOAT, dst, 0, 0, lo, hi);
}

/* The flag named a among flags[0..n), or NULL. */
static const arg_flag *arg_find(const char *a, const arg_flag *flags,
                                size_t n) {
  size_t i;
  for (i = 0; i < n; ++i)
    if (!strcmp(a, flags[i].name)) return &flags[i];
  return NULL;
}

/* v as f's value into f's variable: 0, or -1 (the variable unchanged). */
static int arg_set(const arg_flag *f, const char *v) {
  long l;
  double d;
  switch (f->kind) {
    case ARG_TEXT: *(const char **)f->dst = v; return 0;
    case ARG_LONG: return parse_long(v, f->lo, f->hi, (long *)f->dst);
    case ARG_U32:
    case ARG_U64:
      if (parse_long(v, f->lo, f->hi, &l)) return -1;
      if (f->kind == ARG_U32) *(uint32_t *)f->dst = (uint32_t)l;
      else *(uint64_t *)f->dst = (uint64_t)l;
      return 0;
    case ARG_DOUBLE: return parse_double(v, f->dlo, f->dhi, (double *)f->dst);
    case ARG_FLOAT:
      if (parse_double(v, f->dlo, f->dhi, &d)) return -1;
      *(float *)f->dst = (float)d;
      return 0;
    default: return -1;
  }
}

/* argv against flags[0..n): a switch sets its int to 1, any other flag
   takes the next argument as its value; --help (or -h) prints the usage
   on stdout and exits with status 0. Returns 0, or -1 after printing what
   is wrong (prog: the program's name, to start the line). */
static int arg_parse(int argc, char **argv, const arg_flag *flags, size_t n,
                     const char *prog, void (*usage)(FILE *)) {
  int i;
  for (i = 1; i < argc; ++i) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    const arg_flag *f = arg_find(a, flags, n);
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    }
    if (!f) {
      fprintf(stderr, "%s: unknown option %s\n", prog, a);
      return -1;
    }
    if (f->kind == ARG_SWITCH) {
      *(int *)f->dst = 1;
      continue;
    }
    if (!v) {
      fprintf(stderr, "%s: %s needs a value\n", prog, a);
      return -1;
    }
    if (arg_set(f, v)) {
      fprintf(stderr, "%s: bad value for %s: %s\n", prog, a, v);
      return -1;
    }
    ++i;
  }
  return 0;
}

#endif
