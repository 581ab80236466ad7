/* PER_STATIC: each unit gets its own private copy; they must not clash. */
#define PER_STATIC
#define PER_IMPLEMENTATION
#include "per.h"

int static_a_total(void);
int static_a_total(void) {
  per_tree t;
  int total;
  if (per_tree_init(&t, 3, NULL) != PER_OK) return -1;
  per_tree_set(&t, 0, (per_real)1);
  per_tree_set(&t, 2, (per_real)2);
  total = (int)per_tree_total(&t);
  per_tree_free(&t);
  return total;
}
