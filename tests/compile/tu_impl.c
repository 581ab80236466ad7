/* The one translation unit with the implementation. */
#define PER_IMPLEMENTATION
#include "per.h"
