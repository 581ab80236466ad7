/* A translation unit that only includes the declarations and uses them;
   linking it with tu_impl proves the headers' two halves fit together
   (per.h's, per_frames.h's, per_traj.h's and per_net.h's). */
#include <stdio.h>
#include "per_frames.h"
#include "per_traj.h"
#include "per_net.h"

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
  {
    static const per_traj_timescale ts[1] = {{"step", PER_TRAJ_BUFFERED, 4, 4}};
    static const per_traj_field fs[1] = {{"x", 0, 0, 4}};
    per_traj_spec sp = {1, ts, 1, fs};
    per_traj a;
    per_traj_out out;
    float x = 1.5f;
    if (per_traj_init_spec(&a, &sp, NULL) != PER_OK) return 1;
    ok = ok && per_traj_add_record(&a, 0, &x) == PER_OK &&
         per_traj_build(&a, &out) == PER_OK && out.n == 1;
    per_traj_free(&a);
  }
  {
    /* an INFO request for table "t", request id 7, and its reply */
    static const unsigned char info[18] = {'P', 'E', 'R', 'Q', 1, 0, 5, 0, 7,
                                           0,   0,   0,   0,   0, 0, 0, 1, 't'};
    per_net_server srv;
    per_config nc = per_config_default(8, 4);
    const void *reply = NULL;
    size_t len = 0;
    if (per_net_init(&srv, PER_NET_MAX_MESSAGE, NULL) != PER_OK) return 1;
    ok = ok && per_net_add_table(&srv, "t", &nc, "") == PER_OK &&
         per_net_handle(&srv, info, sizeof info, &reply, &len) == PER_OK &&
         len == PER_NET_REPLY_HEADER + 128 &&
         ((const unsigned char *)reply)[8] == 7;
    per_net_free(&srv);
  }
  printf("%s\n", ok ? "linked: ok" : "linked: wrong result");
  return ok ? 0 : 1;
}
