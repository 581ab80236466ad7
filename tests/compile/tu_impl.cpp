// The implementation (per.h's, per_frames.h's, per_traj.h's and per_net.h's)
// compiled as C++11;
// tu_user.c (C) links against it.
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_FRAMES_IMPLEMENTATION
#include "per_frames.h"
#define PER_TRAJ_IMPLEMENTATION
#include "per_traj.h"
#define PER_NET_IMPLEMENTATION
#include "per_net.h"
