/* args.h - the command-line helpers the examples share (example code,
   not per's API): numbers parsed whole and within bounds, and option
   names looked up in a list. Static functions; include once. */
#ifndef PER_EXAMPLES_ARGS_H
#define PER_EXAMPLES_ARGS_H

#include <errno.h>
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

/* 1 when a is one of names[0..n). */
static int arg_listed(const char *a, const char *const *names, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i)
    if (!strcmp(a, names[i])) return 1;
  return 0;
}

#endif
