/* per_store.h's implementation (with per.h's) in one translation unit, as
   its manual asks: POSIX 2008 declared before any include. */
#define _POSIX_C_SOURCE 200809L
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_STORE_IMPLEMENTATION
#include "per_store.h"
