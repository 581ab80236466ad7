/* The one translation unit with the implementation, per.h's and its
   companion per_frames.h's. */
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_FRAMES_IMPLEMENTATION
#include "per_frames.h"
