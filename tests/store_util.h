/* store_util.h - the directory helpers of the trajectory store's tests
   (test_store.c, test_store_kill.c): remove a tree, tell and count
   segment files. Include after the I/O wrappers are #undef'ed: these use
   the C library's own calls. Needs _POSIX_C_SOURCE 200809L. */
#ifndef PER_STORE_UTIL_H
#define PER_STORE_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Remove path and everything under it (no error when it is missing). */
static void rm_rf(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    struct dirent *e;
    char sub[512];
    if (d) {
      while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        rm_rf(sub);
      }
      closedir(d);
    }
    rmdir(path);
  } else {
    unlink(path);
  }
}

/* Whether name is a segment file's (seg-*.per). */
static int is_seg(const char *name) {
  size_t n = strlen(name);
  return strncmp(name, "seg-", 4) == 0 && n > 8 &&
         strcmp(name + n - 4, ".per") == 0;
}

/* seg-*.per files in dir. */
static uint32_t count_segs(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  uint32_t n = 0;
  if (!d) return 0;
  while ((e = readdir(d)) != NULL) n += (uint32_t)is_seg(e->d_name);
  closedir(d);
  return n;
}

#endif
