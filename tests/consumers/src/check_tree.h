/* The body every consumer runs: the sum tree through per.h's tree API. The
   file that includes this has included per.h the way it wants to test. */
#include <inttypes.h>
#include <stdio.h>

/* Every third leaf of 100 gets priority 1, the others 0: a stratified
   batch may only return those leaves, each with its value. 0 when so. */
static int check_tree(const char *name) {
  per_tree tree;
  per_rng rng;
  uint32_t idx[64], i;
  per_real val[64];
  per_status s = per_tree_init(&tree, 100, NULL);
  if (s != PER_OK) {
    fprintf(stderr, "%s: per_tree_init: %s\n", name, per_status_str(s));
    return 1;
  }
  for (i = 0; i < 100 && s == PER_OK; i += 3) s = per_tree_set(&tree, i, 1);
  per_rng_init(&rng, 42);
  if (s == PER_OK) s = per_tree_sample(&tree, &rng, 64, idx, val);
  per_tree_free(&tree);
  if (s != PER_OK) {
    fprintf(stderr, "%s: %s\n", name, per_status_str(s));
    return 1;
  }
  for (i = 0; i < 64; ++i) {
    if (idx[i] >= 100 || idx[i] % 3 != 0 || val[i] != 1) {
      fprintf(stderr, "%s: draw %" PRIu32 " is leaf %" PRIu32 ", value %g\n",
              name, i, idx[i], val[i]);
      return 1;
    }
  }
  printf("%s: 64 draws, all on leaves of priority 1\n", name);
  return 0;
}
