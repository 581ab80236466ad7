/* The one translation unit with the implementation, per.h's and its
   companions per_frames.h's and per_traj.h's. */
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_FRAMES_IMPLEMENTATION
#include "per_frames.h"
#define PER_TRAJ_IMPLEMENTATION
#include "per_traj.h"
