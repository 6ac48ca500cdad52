/*
 * test_api.c - librumor through its one public header only (linked against librumor.so, not
 * the parts). usage: test_api VERSION SOVERSION PROTOCOL, as meson.build has them (the
 * project's version, librumor's soversion, the protocol's): the library and the header must
 * both say them (a soname bumped without RUMOR_ABI_VERSION, or a release whose header still
 * names the last, fails here); every error code has a description of its own.
 */
#include <rumor.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks, failed;

static void check(int cond, const char *what)
{
    checks++;
    if (!cond) failed++;
    printf("%s %s\n", cond ? "ok  " : "FAIL", what);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_api VERSION SOVERSION PROTOCOL\n");
        return 2;
    }
    const char *version = argv[1];
    const int soversion = atoi(argv[2]), protocol = atoi(argv[3]);
    int major = -1, minor = -1, patch = -1;
    const char *v = rumor_version(&major, &minor, &patch);
    char header[64], numbers[64];
    snprintf(header, sizeof header, "%d.%d.%d", RUMOR_VERSION_MAJOR, RUMOR_VERSION_MINOR, RUMOR_VERSION_PATCH);
    snprintf(numbers, sizeof numbers, "%d.%d.%d", major, minor, patch);
    printf("(the build: version %s, soversion %d, protocol %d; the library: %s; the header: %s, abi %d)\n", version,
           soversion, protocol, v ? v : "(null)", header, RUMOR_ABI_VERSION);
    check(v && strcmp(v, version) == 0 && strcmp(numbers, version) == 0,
          "rumor_version() and its numbers are the project's version");
    check(strcmp(header, version) == 0, "the header's RUMOR_VERSION_* are the project's version");
    check(rumor_version(NULL, NULL, NULL) == v, "rumor_version takes NULL for numbers not wanted");
    check(rumor_abi_version() == soversion && RUMOR_ABI_VERSION == soversion,
          "rumor_abi_version() and RUMOR_ABI_VERSION are the number in the library's soname");
    check(rumor_protocol_version() == protocol, "rumor_protocol_version() is the protocol's version");

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
