// test_header.cpp - include/rumor.h in C++11 with -Wall -Wextra -Wpedantic -Werror: the one
// public header is usable from C++ (its extern "C" guards), and needs nothing but itself.
#include <rumor.h>

int main()
{
    rumor_log_fn sink = nullptr;
    (void)sink;
    return static_cast<int>(RUMOR_OK) + RUMOR_ABI_VERSION;
}
