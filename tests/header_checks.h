/* header_checks.h - what include/rumor.h promises as ABI, checked the same way from C (C99 and
 * C11: test_header.c) and C++ (test_header.cpp): every error code and log level has the number
 * the header documents, and the library's functions are reached through it (from C++: with C
 * linkage) and answer. Each is a check of check.h: the caller ends with check_done(). */
#include <rumor.h>

#include "check.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define HEADER_PIN(name, value) CHECK_MSG((int)(name) == (value), "%s is %d, the header says %d", #name, (int)(name), value)

static void header_checks(void)
{
    HEADER_PIN(RUMOR_OK, 0);
    HEADER_PIN(RUMOR_EINVAL, 1);
    HEADER_PIN(RUMOR_ENOMEM, 2);
    HEADER_PIN(RUMOR_EPROTO, 3);
    HEADER_PIN(RUMOR_EAUTH, 4);
    HEADER_PIN(RUMOR_ECLOSED, 5);
    HEADER_PIN(RUMOR_ETIMEDOUT, 6);
    HEADER_PIN(RUMOR_ELAYOUT, 7);
    HEADER_PIN(RUMOR_ENOTSUP, 8);
    HEADER_PIN(RUMOR_EIO, 9);
    HEADER_PIN(RUMOR_EFORMAT, 10);
    HEADER_PIN(RUMOR_ENODEV, 11);
    HEADER_PIN(RUMOR_ESTATE, 12);
    HEADER_PIN(RUMOR_EAGAIN, 13);
    HEADER_PIN(RUMOR_LOG_ERROR, 0);
    HEADER_PIN(RUMOR_LOG_WARN, 1);
    HEADER_PIN(RUMOR_LOG_INFO, 2);
    HEADER_PIN(RUMOR_LOG_DEBUG, 3);
    HEADER_PIN(RUMOR_MIX_STATE, 1);
    /* rumor_round_t is the one struct of the ABI: a field moved, retyped or put before another
     * changes these (new fields go at the end, where size tells them apart). LP64 numbers. */
    if (sizeof(void *) == 8) {
        HEADER_PIN(offsetof(rumor_round_t, steps), 8);
        HEADER_PIN(offsetof(rumor_round_t, loss_sum), 16);
        HEADER_PIN(offsetof(rumor_round_t, samples), 24);
        HEADER_PIN(offsetof(rumor_round_t, round), 32);
        HEADER_PIN(offsetof(rumor_round_t, landed), 40);
        HEADER_PIN(offsetof(rumor_round_t, checkpoint_due), 52);
        HEADER_PIN(offsetof(rumor_round_t, missing), 60);
        HEADER_PIN(offsetof(rumor_round_t, consensus), 64);
        HEADER_PIN(offsetof(rumor_round_t, wait_s), 72);
        HEADER_PIN(offsetof(rumor_round_t, evaluated), 80);
        HEADER_PIN(offsetof(rumor_round_t, test_acc), 96);
        HEADER_PIN(sizeof(rumor_round_t), 104);
    }
    const rumor_round_t init = RUMOR_ROUND_INIT;
    HEADER_PIN(init.size == sizeof(rumor_round_t) && init.steps == 0 && init.evaluated == 0, 1);
    const char *s = rumor_strerror(RUMOR_ELAYOUT);
    CHECK_MSG(s && strcmp(s, "parameter layout mismatch") == 0 && rumor_abi_version() == RUMOR_ABI_VERSION,
              "the library answers through the header: rumor_strerror(RUMOR_ELAYOUT) = \"%s\"", s ? s : "(null)");
}
