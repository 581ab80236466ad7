// A C++ file that only includes the headers (per_frames.h includes
// per.h); impl.cpp holds the implementation.
#include "per_frames.h"

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
  return check_tree("C++11, implementation in another file");
}
