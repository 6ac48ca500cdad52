/* test_header.c - include/rumor.h alone, compiled as C99 and as C11 with -Wpedantic -Werror
 * (tests/meson.build builds it both ways; test_header.cpp as C++11): the one public header
 * needs nothing but itself, and its numbers are the ABI's (header_checks.h). */
#include "header_checks.h"

int main(void)
{
    header_checks();
    return check_done();
}
