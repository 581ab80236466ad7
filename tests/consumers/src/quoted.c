/* per.h included by its name alone: the flags name include/per. */
#define PER_IMPLEMENTATION
#include "per.h"

#include "check_tree.h"

int main(void) { return check_tree("#include \"per.h\""); }
