// A C++ file that only includes per.h; impl.cpp holds the implementation.
#include "per.h"

#include "check_tree.h"

int main() { return check_tree("C++11, implementation in another file"); }
