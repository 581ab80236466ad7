// The implementation compiled as C++11, in its own translation unit:
// per.h's and its companions per_frames.h's, per_traj.h's and per_net.h's.
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_FRAMES_IMPLEMENTATION
#include "per_frames.h"
#define PER_TRAJ_IMPLEMENTATION
#include "per_traj.h"
#define PER_NET_IMPLEMENTATION
#include "per_net.h"
