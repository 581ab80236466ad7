// The implementation compiled as C++11, in its own translation unit.
#define PER_IMPLEMENTATION
#include "per.h"
