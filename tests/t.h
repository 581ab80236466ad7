/* t.h - the tiny assertion kit of per's tests.
   Each CHECK prints both sides when it fails and counts; t_done() prints
   "<name>: N passed, N failed" and returns the exit status. */
#ifndef PER_T_H
#define PER_T_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned t_pass_count, t_fail_count;

#define T_FAIL_AT(...)                                    \
  do {                                                    \
    ++t_fail_count;                                       \
    fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                         \
    fputc('\n', stderr);                                  \
  } while (0)

#define CHECK(cond)              \
  do {                           \
    if (cond) ++t_pass_count;    \
    else T_FAIL_AT("%s", #cond); \
  } while (0)

#define CHECK_MSG(cond, ...)     \
  do {                           \
    if (cond) ++t_pass_count;    \
    else T_FAIL_AT(__VA_ARGS__); \
  } while (0)

/* A setup step the rest of the test cannot do without: fail and exit. */
#define REQUIRE(cond)                 \
  do {                                \
    if (cond) break;                  \
    T_FAIL_AT("required: %s", #cond); \
    exit(1);                          \
  } while (0)

/* integers, compared as unsigned long long / long long */
#define CHECK_EQ_U(a, b)                                        \
  do {                                                          \
    unsigned long long t_a = (unsigned long long)(a);           \
    unsigned long long t_b = (unsigned long long)(b);           \
    if (t_a == t_b) ++t_pass_count;                             \
    else T_FAIL_AT("%s == %s: %llu != %llu", #a, #b, t_a, t_b); \
  } while (0)

/* statuses: prints both codes and their messages */
#define CHECK_STATUS(got, want)                                      \
  do {                                                               \
    per_status t_g = (got), t_w = (want);                            \
    if (t_g == t_w) ++t_pass_count;                                  \
    else                                                             \
      T_FAIL_AT("%s: got %d (%s), want %d (%s)", #got, (int)t_g,     \
                per_status_str(t_g), (int)t_w, per_status_str(t_w)); \
  } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, PER_OK)

/* floating point, exact */
#define CHECK_EQ_F(a, b)                                          \
  do {                                                            \
    double t_a = (double)(a), t_b = (double)(b);                  \
    if (t_a == t_b) ++t_pass_count;                               \
    else T_FAIL_AT("%s == %s: %.17g != %.17g", #a, #b, t_a, t_b); \
  } while (0)

/* floating point within an absolute tolerance */
#define CHECK_NEAR(a, b, tol)                                                \
  do {                                                                       \
    double t_a = (double)(a), t_b = (double)(b), t_t = (double)(tol);        \
    double t_d = t_a > t_b ? t_a - t_b : t_b - t_a;                          \
    if (t_d <= t_t) ++t_pass_count;                                          \
    else                                                                     \
      T_FAIL_AT("%s ~ %s: %.17g vs %.17g (|diff| %.3g > %.3g)", #a, #b, t_a, \
                t_b, t_d, t_t);                                              \
  } while (0)

/* memory, byte for byte; reports the first differing byte */
#define CHECK_MEM(a, b, n)                                       \
  do {                                                           \
    const unsigned char *t_x = (const unsigned char *)(a);       \
    const unsigned char *t_y = (const unsigned char *)(b);       \
    size_t t_n = (size_t)(n), t_i = 0;                           \
    while (t_i < t_n && t_x[t_i] == t_y[t_i]) ++t_i;             \
    if (t_i == t_n) ++t_pass_count;                              \
    else                                                         \
      T_FAIL_AT("%s vs %s: first difference at byte %zu of %zu " \
                "(%02x != %02x)",                                \
                #a, #b, t_i, t_n, t_x[t_i], t_y[t_i]);           \
  } while (0)

/* strings: got starts with want (so a test can name the part of a
   message that matters) */
#define CHECK_STR(got, want)                                      \
  do {                                                            \
    const char *t_g = (got), *t_w = (want);                       \
    if (strncmp(t_g, t_w, strlen(t_w)) == 0) ++t_pass_count;      \
    else T_FAIL_AT("%s: \"%s\", want \"%s...\"", #got, t_g, t_w); \
  } while (0)

static int t_done(const char *name) {
  printf("%s: %u passed, %u failed\n", name, t_pass_count, t_fail_count);
  return t_fail_count ? 1 : 0;
}

#endif
