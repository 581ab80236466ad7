// The implementation compiled as C++11, in its own translation unit:
// per.h's and its companions per_frames.h's and per_traj.h's.
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_FRAMES_IMPLEMENTATION
#include "per_frames.h"
#define PER_TRAJ_IMPLEMENTATION
#include "per_traj.h"
