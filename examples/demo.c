/* demo.c - a tour of per.h: build a sum tree, sample from it three ways,
   and show that the draws follow the priorities. */
#include <stdio.h>
#define PER_IMPLEMENTATION
#include "per.h"

#define N 8

int main(void) {
  static const per_real prio[N] = {1, 2, 0, 4, 8, 0.5, 0, 16.5};
  per_tree tree;
  per_rng rng;
  per_swap swap;
  per_cat cat;
  uint32_t idx[16], i;
  per_real val[16];
  double counts[N] = {0};
  per_status s;
  const uint32_t draws = 1000000;

  s = per_tree_init(&tree, N, NULL);
  if (s != PER_OK) {
    fprintf(stderr, "per_tree_init: %s\n", per_status_str(s));
    return 1;
  }
  per_tree_build(&tree, prio, N);
  printf("sum tree of %u leaves (node array of %u %s values)\n", tree.capacity,
         2 * tree.leaves,
         sizeof(per_real) == sizeof(float) ? "float" : "double");
  printf("  leaves:");
  for (i = 0; i < N; ++i) printf(" %g", (double)per_tree_get(&tree, i));
  printf("\n  total %g, invariant check: %s\n", (double)per_tree_total(&tree),
         per_status_str(per_tree_check(&tree)));

  per_rng_init(&rng, 42);
  per_tree_sample(&tree, &rng, 8, idx, val);
  printf("\nstratified batch of 8 (seed 42): ");
  for (i = 0; i < 8; ++i) printf(" %u(p=%g)", idx[i], (double)val[i]);
  printf("\n");

  for (i = 0; i < draws / 16; ++i) {
    uint32_t j;
    per_tree_sample(&tree, &rng, 16, idx, NULL);
    for (j = 0; j < 16; ++j) counts[idx[j]] += 1;
  }
  printf("\n%u draws: leaf, priority, expected share, observed share\n", draws);
  for (i = 0; i < N; ++i)
    printf("  %u  %5g  %.4f  %.4f\n", i, (double)prio[i],
           (double)(prio[i] / per_tree_total(&tree)), counts[i] / draws);

  per_cat_init(&cat, N, NULL);
  s = per_cat_sample(&cat, &tree, &rng, 6, idx, NULL);
  printf("\nwithout replacement, all 6 leaves with mass: ");
  for (i = 0; i < 6; ++i) printf(" %u", idx[i]);
  printf("  (%s)\n", per_status_str(s));
  s = per_cat_sample(&cat, &tree, &rng, 7, idx, NULL);
  printf("asking for 7: %s\n", per_status_str(s));

  per_swap_init(&swap, 1000, NULL);
  per_swap_grow(&swap, 10);
  per_swap_sample(&swap, &rng, 10, idx);
  printf("\nuniform without replacement, 10 of 10: ");
  for (i = 0; i < 10; ++i) printf(" %u", idx[i]);
  per_swap_grow(&swap, 1000);
  per_swap_sample(&swap, &rng, 5, idx);
  printf("\nafter growing to 1000, 5 of 1000:     ");
  for (i = 0; i < 5; ++i) printf(" %u", idx[i]);
  printf(
      "\n\nbad input is refused and changes nothing: per_tree_set(-1) -> %s\n",
      per_status_str(per_tree_set(&tree, 0, -1)));

  per_swap_free(&swap);
  per_cat_free(&cat);
  per_tree_free(&tree);
  return 0;
}
