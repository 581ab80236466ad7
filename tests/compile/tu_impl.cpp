// The implementation (per.h's and per_frames.h's) compiled as C++11;
// tu_user.c (C) links against it.
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_FRAMES_IMPLEMENTATION
#include "per_frames.h"
