/* A translation unit that only includes the declarations and uses them;
   linking it with tu_impl proves the header's two halves fit together. */
#include <stdio.h>
#include "per.h"

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
  printf("%s\n", ok ? "linked: ok" : "linked: wrong result");
  return ok ? 0 : 1;
}
