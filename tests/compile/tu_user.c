/* A translation unit that only includes the declarations and uses them;
   linking it with tu_impl proves the headers' two halves fit together
   (per.h's and per_frames.h's). */
#include <stdio.h>
#include "per_frames.h"

int main(void) {
  per_tree t;
  per_rng rng;
  uint32_t idx[4];
  int ok;
  if (per_tree_init(&t, 5, NULL) != PER_OK) return 1;
  per_tree_set(&t, 3, (per_real)2);
  per_rng_init(&rng, 1);
  ok = per_tree_sample(&t, &rng, 4, idx, NULL) == PER_OK && idx[0] == 3 &&
       idx[3] == 3 && per_tree_total(&t) == 2;
  per_tree_free(&t);
  {
    per_frames f;
    per_frames_config fc = per_frames_config_default(16, 4, 2, 1);
    if (per_frames_init(&f, &fc, NULL) != PER_OK) return 1;
    ok = ok && per_frames_drawable(&f) == 0 && per_frames_check(&f) == PER_OK;
    per_frames_free(&f);
  }
  printf("%s\n", ok ? "linked: ok" : "linked: wrong result");
  return ok ? 0 : 1;
}
