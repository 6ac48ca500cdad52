/* test_header.c - include/rumor.h alone, compiled as C99 and as C11 with -Wpedantic -Werror
 * (tests/meson.build builds it both ways; test_header.cpp as C++11): the one public header
 * needs nothing but itself, and its numbers are the ABI's. The assertions are header_checks.h's
 * (shared with the C++ build): every error code and log level, rumor_round_t's offsets and
 * size, and the library answering through the header; any one that moves fails this test. */
#include "header_checks.h"

int main(void)
{
    header_checks();
    /* (all of them ran: 19 pins, 12 offsets on LP64, the initialiser, the library's answer) */
    CHECK_MSG(check_count_ >= 21, "header_checks ran %d checks", check_count_);
    return check_done();
}
