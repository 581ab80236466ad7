/* replay.c - runs a fuzz target over every file of the directories given
   on the command line (the kept corpus), without libFuzzer: the same
   LLVMFuzzerTestOneInput, as a regular test. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  unsigned char *buf;
  long n;
  if (!f) return 0;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) {
    fclose(f);
    return 0;
  }
  rewind(f);
  buf = (unsigned char *)malloc((size_t)n + 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    fclose(f);
    return 0;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, (size_t)n);
  free(buf);
  return 1;
}

int main(int argc, char **argv) {
  int i, files = 0;
  for (i = 1; i < argc; ++i) {
    DIR *d = opendir(argv[i]);
    struct dirent *e;
    if (!d) {
      files += run_file(argv[i]);
      continue;
    }
    while ((e = readdir(d)) != NULL) {
      char path[4096];
      if (e->d_name[0] == '.') continue;
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      files += run_file(path);
    }
    closedir(d);
  }
  printf("replayed %d inputs: no failure\n", files);
  return files > 0 ? 0 : 1;
}
