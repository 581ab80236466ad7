// A C++ file that only includes the headers (per_frames.h, per_traj.h
// and per_net.h include per.h); impl.cpp holds the implementation.
#include "per_frames.h"
#include "per_traj.h"
#include "per_net.h"

#include "check_tree.h"

int main() {
  // the installed companion: its declarations link to impl.cpp's code
  per_frames_config fc = per_frames_config_default(16, 4, 2, 1);
  per_frames f;
  if (per_frames_init(&f, &fc, NULL) != PER_OK) {
    fprintf(stderr, "per_frames_init: %s\n", f.error);
    return 1;
  }
  per_frames_free(&f);
  static const per_traj_timescale ts[1] = {{"step", PER_TRAJ_BUFFERED, 4, 4}};
  static const per_traj_field fs[1] = {{"x", 0, 0, 4}};
  per_traj_spec sp = {1, ts, 1, fs};
  per_traj a;
  if (per_traj_init_spec(&a, &sp, NULL) != PER_OK) {
    fprintf(stderr, "per_traj_init_spec: %s\n", a.error);
    return 1;
  }
  per_traj_free(&a);
  per_net_server srv;
  per_config nc = per_config_default(8, 4);
  if (per_net_init(&srv, PER_NET_MAX_MESSAGE, NULL) != PER_OK ||
      per_net_add_spec(&srv, "table t\ncapacity 8\nitem_size 4\n") != PER_OK ||
      per_net_add_table(&srv, "u", &nc, "") != PER_OK) {
    fprintf(stderr, "per_net: %s\n", srv.error);
    return 1;
  }
  per_net_free(&srv);
  return check_tree("C++11, implementation in another file");
}
