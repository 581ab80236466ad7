/* fuzz_common.h - shared by the fuzz targets: the test kit's allocator and
   snapshots (buffer_util.h), a failure that stops the fuzzer, and a
   per-process scratch file name. */
#ifndef PER_FUZZ_COMMON_H
#define PER_FUZZ_COMMON_H

#define _POSIX_C_SOURCE 200809L
#include <unistd.h>

#include "../buffer_util.h"

/* Any failed CHECK is a finding: print and abort so the fuzzer keeps it. */
static void fuzz_assert_clean(const char *target) {
  if (t_fail_count == 0) return;
  fprintf(stderr, "%s: %u check(s) failed\n", target, t_fail_count);
  (void)t_done;
  abort();
}

static void fuzz_path(char *buf, size_t n, const char *what) {
  snprintf(buf, n, "/tmp/per_fuzz_%s_%ld.bin", what, (long)getpid());
}

#endif
