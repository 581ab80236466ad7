// per_store.h's implementation (with per.h's) compiled as C++11, POSIX
// 2008 declared before any include; tu_store_user.c (C) links against it.
#define _POSIX_C_SOURCE 200809L
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_STORE_IMPLEMENTATION
#include "per_store.h"
