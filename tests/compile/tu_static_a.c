/* PER_STATIC: each unit gets its own private copy; they must not clash. */
#define PER_STATIC
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_FRAMES_IMPLEMENTATION
#include "per_frames.h"
#define PER_TRAJ_IMPLEMENTATION
#include "per_traj.h"
#define PER_NET_IMPLEMENTATION
#include "per_net.h"

int static_a_total(void);
int static_a_total(void) {
  per_tree t;
  per_frames_config fc;
  int total;
  if (per_tree_init(&t, 3, NULL) != PER_OK) return -1;
  per_tree_set(&t, 0, (per_real)1);
  per_tree_set(&t, 2, (per_real)2);
  total = (int)per_tree_total(&t);
  per_tree_free(&t);
  fc = per_frames_config_default(8, 4, 2, 1); /* the companion's copy too */
  if (per_frames_record_size(&fc) == 0) return -1;
  if (per_traj_count(NULL, 0) != 0) return -1;       /* and per_traj.h's */
  if (per_net_find(NULL, "t", 1) != NULL) return -1; /* and per_net.h's */
  return total;
}
