/* test_header.c - include/rumor.h alone, compiled as C99 and C11 with -Wall -Wextra -Wpedantic
 * -Werror (tests/meson.build builds it both ways; test_header.cpp as C++11): the one public
 * header needs nothing but itself. Runs to say so. */
#include <rumor.h>

int main(void)
{
    rumor_err_t e = RUMOR_OK;
    rumor_log_level_t l = RUMOR_LOG_ERROR;
    return (int)e + (int)l + RUMOR_ABI_VERSION;
}
