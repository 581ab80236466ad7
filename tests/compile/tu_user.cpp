// A C++ user of the whole API, compiled with the warnings C++ shops turn
// on (-Wold-style-cast, -Wuseless-cast, -Wreserved-identifier where the
// compiler has them): nothing in per.h may trip them, neither the
// declarations and inline functions nor the public macros.
#include <cstdio>
#include "per_frames.h"
#include "per_traj.h"
#include "per_net.h"

int main() {
  per_config cfg = per_config_default(64, 4);
  per_buffer b;
  per_tree t;
  per_rng rng;
  uint32_t idx[4], item = 7;
  uint64_t ids[4];
  float w[4], td[4] = {1, 2, 3, 4};
  per_real v = PER_LEAF_MAX;
  bool ok = true;
  cfg.seed = 3;
  if (per_buffer_init(&b, &cfg, NULL) != PER_OK) return 1;
  ok = ok && per_buffer_add(&b, &item) == PER_OK;
  ok = ok && per_buffer_sample(&b, 4, NULL, NULL, ids, w) == PER_OK;
  ok = ok && per_buffer_update(&b, ids, td, 4, NULL) == PER_OK;
  per_buffer_free(&b);
  if (per_tree_init(&t, 5, NULL) != PER_OK) return 1;
  ok = ok && per_tree_set(&t, 3, v) == PER_OK;
  per_rng_init(&rng, 1);
  ok = ok && per_tree_sample(&t, &rng, 4, idx, NULL) == PER_OK && idx[0] == 3;
  per_tree_free(&t);
  per_frames f;
  per_frames_config fc = per_frames_config_default(16, 4, 2, 1);
  if (per_frames_init(&f, &fc, NULL) != PER_OK) return 1;
  ok = ok && per_frames_drawable(&f) == 0 && per_frames_check(&f) == PER_OK;
  per_frames_free(&f);
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
  // an INFO request for table "t", request id 7, and its reply
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
       static_cast<const unsigned char *>(reply)[8] == 7;
  per_net_free(&srv);
  std::printf("per %s: %s\n", PER_VERSION_STRING, ok ? "ok" : "wrong result");
  return ok ? 0 : 1;
}
