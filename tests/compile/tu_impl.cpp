// The implementation compiled as C++11; tu_user.c (C) links against it.
#define PER_IMPLEMENTATION
#include "per.h"
