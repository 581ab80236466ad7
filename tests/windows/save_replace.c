/* save_replace.c - checkpoints on Windows (built with MinGW-w64, run with
   Wine by tools/windows.sh): a save over an existing file replaces it
   (MoveFileExA; rename alone refuses there), the file loads back, and the
   n-step adders' file does the same. Exit 0 when all of it holds. */
#include <stdio.h>
#define PER_IMPLEMENTATION
#include "per.h"

static int fails;

static void expect(per_status got, per_status want, const char *what) {
  if (got == want) return;
  fprintf(stderr, "FAIL: %s: %s, want %s\n", what, per_status_str(got),
          per_status_str(want));
  ++fails;
}

int main(void) {
  per_config cfg = per_config_default(16, 4);
  per_nstep_config nc = {3, 0.5f, 4, 4};
  per_buffer b, c;
  per_nstep a, r;
  uint32_t i, o = 1, act = 2;
  expect(per_buffer_init(&b, &cfg, NULL), PER_OK, "init");
  expect(per_buffer_init(&c, &cfg, NULL), PER_OK, "init");
  for (i = 0; i < 10; ++i) per_buffer_add(&b, &i);
  remove("win_replace.bin");
  expect(per_buffer_save(&b, "win_replace.bin"), PER_OK, "first save");
  per_buffer_add(&b, &i);
  expect(per_buffer_save(&b, "win_replace.bin"), PER_OK,
         "save over an existing file");
  expect(per_buffer_load(&c, "win_replace.bin"), PER_OK, "load");
  if (c.size != 11) {
    fprintf(stderr, "FAIL: loaded %u items, want 11 (the second save)\n",
            c.size);
    ++fails;
  }
  expect(per_nstep_init(&a, &nc, NULL), PER_OK, "nstep init");
  expect(per_nstep_init(&r, &nc, NULL), PER_OK, "nstep init");
  expect(per_nstep_save(&a, 1, "win_replace.nst"), PER_OK, "nstep save");
  {
    per_buffer nb;
    per_config ncfg = per_config_default(8, per_nstep_layout_of(&nc).size);
    expect(per_buffer_init(&nb, &ncfg, NULL), PER_OK, "nstep buffer");
    expect(per_nstep_step(&a, &nb, &o, &act, 1.0f, &o, 0, 0), PER_OK,
           "nstep step");
    expect(per_nstep_save(&a, 1, "win_replace.nst"), PER_OK,
           "nstep save over a file");
    per_buffer_free(&nb);
  }
  expect(per_nstep_load(&r, 1, "win_replace.nst"), PER_OK, "nstep load");
  if (r.count != 1) {
    fprintf(stderr, "FAIL: loaded %u pending steps, want 1\n", r.count);
    ++fails;
  }
  remove("win_replace.bin");
  remove("win_replace.nst");
  per_nstep_free(&a);
  per_nstep_free(&r);
  per_buffer_free(&b);
  per_buffer_free(&c);
  printf("windows checkpoints: %s\n", fails ? "FAILED" : "ok");
  return fails ? 1 : 0;
}
