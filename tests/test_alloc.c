/* test_alloc.c - per.h's default allocator (PER_MALLOC and PER_FREE left
   undefined; per.h's >>alloc).

   Every block is usable to its last byte, aligned as malloc aligns, and
   goes back through PER_FREE. On Linux, unless PER_NO_HUGE_PAGES (this
   file is also built with it), a block of 2 MiB or more starts on a 2
   MiB boundary, and where the kernel has transparent huge pages
   (/sys/kernel/mm/transparent_hugepage exists) /proc/self/smaps shows
   the MADV_HUGEPAGE advice ("hg" in VmFlags) on its memory; built with
   PER_NO_HUGE_PAGES, it shows none. The trees and per-slot arrays that
   per_tree_init and per_buffer_init allocate get the same.

   Built three ways: as strict C99 (per.h declares madvise itself), with
   _GNU_SOURCE (the C library's declaration) and with PER_NO_HUGE_PAGES. */
#define PER_IMPLEMENTATION
#include "per.h"

#include <stdio.h>
#include <stdlib.h>

#include "t.h"

#define MIB ((size_t)1 << 20)

#if defined(__linux__) && !defined(PER_NO_HUGE_PAGES)
#define HUGE_EXPECTED 1
#else
#define HUGE_EXPECTED 0
#endif

/* 1 when the kernel has transparent huge pages at all. */
static int thp_kernel(void) {
#ifdef __linux__
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return 0;
  fclose(f);
  return 1;
#else
  return 0;
#endif
}

/* 1 when the mapping holding address p carries the MADV_HUGEPAGE advice,
   0 when it does not, -1 when /proc/self/smaps cannot tell. */
static int advised_huge(const void *p) {
#ifdef __linux__
  char line[512];
  int in = 0, found = -1;
  uintptr_t a = (uintptr_t)p;
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char c;
    if (sscanf(line, "%lx-%lx %c", &lo, &hi, &c) == 3) { /* a mapping */
      in = a >= (uintptr_t)lo && a < (uintptr_t)hi;
    } else if (in && strncmp(line, "VmFlags:", 8) == 0) {
      found = strstr(line, " hg") != NULL;
      break;
    }
  }
  fclose(f);
  return found;
#else
  (void)p;
  return -1;
#endif
}

/* A block of n bytes: aligned, every byte written and read back, freed. */
static void block(size_t n) {
  unsigned char *p = (unsigned char *)PER_MALLOC(n, NULL);
  size_t i, bad = 0;
  CHECK_MSG(p != NULL, "PER_MALLOC(%lu) gave NULL", (unsigned long)n);
  if (!p) return;
  CHECK_MSG((uintptr_t)p % 16 == 0, "%lu bytes at %p: not 16-byte aligned",
            (unsigned long)n, (void *)p);
  if (n >= 2 * MIB && HUGE_EXPECTED)
    CHECK_MSG((uintptr_t)p % (2 * MIB) == 0,
              "%lu bytes at %p: not on a 2 MiB boundary", (unsigned long)n,
              (void *)p);
  for (i = 0; i < n; ++i) p[i] = (unsigned char)(i * 7u + 1u);
  for (i = 0; i < n; ++i) bad += p[i] != (unsigned char)(i * 7u + 1u);
  CHECK_EQ_U(bad, 0);
  if (n >= 2 * MIB && thp_kernel()) {
    int h = advised_huge(p);
    CHECK_MSG(h == HUGE_EXPECTED,
              "%lu bytes: MADV_HUGEPAGE advice %d, want %d (smaps)",
              (unsigned long)n, h, HUGE_EXPECTED);
  }
  PER_FREE(p, NULL);
}

static void test_blocks(void) {
  static const size_t sizes[] = {
      0,           1,           15,      16,          17, 4096,
      MIB,         2 * MIB - 1, 2 * MIB, 2 * MIB + 1, /* tail: small pages */
      5 * MIB / 2,                                    /* the same */
      4000000,                                        /* rounded up: 1/21 */
      4 * MIB,     9 * MIB + 3, 64 * MIB};
  size_t i;
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) block(sizes[i]);
  PER_FREE(NULL, NULL); /* as free(NULL) */
  CHECK(PER_MALLOC((size_t)-1, NULL) == NULL);
  CHECK(PER_MALLOC((size_t)-1 - 8, NULL) == NULL);
}

/* The arrays of a large tree and buffer come from the same allocator. */
static void test_structures(void) {
  per_tree t;
  per_buffer b;
  per_config c = per_config_default(1000000, 4);
  per_status s = per_tree_init(&t, 1u << 18, NULL);
  CHECK_STATUS(s, PER_OK);
  if (s == PER_OK) {
    CHECK(per_tree_bytes(1u << 18) >= 2 * MIB);
    if (HUGE_EXPECTED) CHECK((uintptr_t)t.node % (2 * MIB) == 0);
    CHECK_STATUS(per_tree_set(&t, (1u << 18) - 1, 2.5), PER_OK);
    CHECK(t.node[1] == 2.5);
    per_tree_free(&t);
  }
  s = per_buffer_init(&b, &c, NULL);
  CHECK_STATUS(s, PER_OK);
  if (s == PER_OK) {
    if (HUGE_EXPECTED) {
      CHECK((uintptr_t)b.tree.node % (2 * MIB) == 0);
      CHECK((uintptr_t)b.items % (2 * MIB) == 0); /* 4,000,000 bytes */
      CHECK((uintptr_t)b.gen % (2 * MIB) == 0);
    }
    CHECK_STATUS(per_buffer_check(&b), PER_OK);
    per_buffer_free(&b);
  }
}

int main(void) {
  test_blocks();
  test_structures();
#if defined(PER_NO_HUGE_PAGES)
  return t_done("alloc (PER_NO_HUGE_PAGES)");
#elif defined(_GNU_SOURCE)
  return t_done("alloc (_GNU_SOURCE)");
#else
  return t_done("alloc");
#endif
}
