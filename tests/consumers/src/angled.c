/* per.h included through its directory: the flags name include too. */
#define PER_IMPLEMENTATION
#include <per/per.h>

#include "check_tree.h"

int main(void) { return check_tree("#include <per/per.h>"); }
