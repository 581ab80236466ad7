#define PER_STATIC
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_FRAMES_IMPLEMENTATION
#include "per_frames.h"
#define PER_TRAJ_IMPLEMENTATION
#include "per_traj.h"
#define PER_NET_IMPLEMENTATION
#include "per_net.h"
#include <stdio.h>

int static_a_total(void);

int main(void) {
  int ok = static_a_total() == 3 &&
           per_status_str(PER_ERR_NAN) != per_status_str(PER_OK) &&
           per_net_find(NULL, "t", 1) == NULL;
  printf("%s\n", ok ? "static: ok" : "static: wrong result");
  return ok ? 0 : 1;
}
