// test_header.cpp - include/rumor.h in C++11 with -Wpedantic -Werror: the one public header is
// usable from C++ (its extern "C" guards: the library's functions link and answer), and its
// numbers are the ABI's (header_checks.h).
#include "header_checks.h"

int main()
{
    header_checks();
    return check_done();
}
