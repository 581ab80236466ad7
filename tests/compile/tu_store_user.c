/* A translation unit that includes per_store.h's declarations alone and
   uses them; linked with tu_store_impl it proves the two halves fit. A
   store in a fresh directory under the system's temporary one: made,
   fed one trajectory, sampled, freed. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "per_store.h"

int main(void) {
  char dir[] = "/tmp/per-compile-store-XXXXXX", sub[64];
  per_store s;
  per_store_config cfg = per_store_config_default(64, 8);
  unsigned char items[4 * 8], out[2 * 8];
  uint64_t ids[2];
  float w[2];
  int ok;
  if (!mkdtemp(dir)) return 1;
  snprintf(sub, sizeof sub, "%s/s", dir);
  memset(items, 7, sizeof items);
  cfg.cache_bytes = 0;
  cfg.staging_bytes = 4096;
  if (per_store_init(&s, sub, &cfg, 0, NULL) != PER_OK) return 1;
  ok = per_store_add(&s, items, 2, 2, NULL, 0, NULL) == PER_OK &&
       per_store_write(&s) == PER_OK &&
       per_store_sample(&s, 2, NULL, out, ids, w) == PER_OK && out[0] == 7 &&
       per_store_size(&s) == 4 && per_store_check(&s) == PER_OK;
  per_store_free(&s);
  {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) ok = 0;
  }
  printf("%s\n", ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}
