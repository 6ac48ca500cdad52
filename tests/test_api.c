/*
 * test_api.c - librumor through its one public header only (linked against librumor.so, not
 * the parts). usage: test_api VERSION SOVERSION PROTOCOL, as meson.build has them (the
 * project's version, librumor's soversion, the protocol's): the library and the header must
 * both say them (a soname bumped without RUMOR_ABI_VERSION, or a release whose header still
 * names the last, fails here); every error code has a description of its own.
 */
#define _GNU_SOURCE /* (dladdr: the file the library was loaded from) */
#include <rumor.h>

#include "check.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *errmsg_elsewhere(void *arg)
{
    *(const char **)arg = rumor_errmsg();
    return NULL;
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
    CHECK_MSG(v && strcmp(v, version) == 0 && strcmp(numbers, version) == 0,
          "rumor_version() and its numbers are the project's version");
    CHECK_MSG(strcmp(header, version) == 0, "the header's RUMOR_VERSION_* are the project's version");
    CHECK_MSG(rumor_version(NULL, NULL, NULL) == v, "rumor_version takes NULL for numbers not wanted");
    CHECK_MSG(rumor_abi_version() == soversion && RUMOR_ABI_VERSION == soversion,
          "rumor_abi_version() and RUMOR_ABI_VERSION are the number in the library's soname");
    CHECK_MSG(rumor_protocol_version() == protocol, "rumor_protocol_version() is the protocol's version");

    /* Every code its own description; unknown codes one too. */
    const char *seen[RUMOR_EAGAIN + 1];
    int distinct = 1;
    for (int c = RUMOR_OK; c <= RUMOR_EAGAIN; c++) {
        seen[c] = rumor_strerror((rumor_err_t)c);
        distinct &= seen[c] && *seen[c] && strcmp(seen[c], "unknown error") != 0;
        for (int d = 0; d < c; d++) distinct &= strcmp(seen[c], seen[d]) != 0;
    }
    CHECK_MSG(distinct, "rumor_strerror: every code from RUMOR_OK to RUMOR_EAGAIN has a description of its own");
    CHECK_MSG(strcmp(rumor_strerror((rumor_err_t)99), "unknown error") == 0, "rumor_strerror(99): \"unknown error\"");
    CHECK_MSG(strcmp(rumor_errmsg(), "") == 0, "rumor_errmsg() is \"\" before anything failed");

    /* The library this program runs with is the file of the soname the header names. */
    Dl_info dl;
    char so[64];
    snprintf(so, sizeof so, "librumor.so.%d", RUMOR_ABI_VERSION);
    const int found = dladdr(v, &dl) != 0 && dl.dli_fname; /* (v: the library's own string) */
    printf("(loaded from %s)\n", found ? dl.dli_fname : "?");
    CHECK_MSG(found && strstr(dl.dli_fname, so) != NULL, "the loaded library is librumor.so.RUMOR_ABI_VERSION");

    /* A failure's sentence is the failing thread's, until its next failure. */
    rumor_peer_t *p = (rumor_peer_t *)1;
    const char *pairs[] = {"bogus-setting", "1", NULL};
    const rumor_err_t rc = rumor_peer_open(NULL, pairs, &p);
    CHECK_MSG(rc == RUMOR_EINVAL && p == NULL && strstr(rumor_errmsg(), "bogus-setting") != NULL,
          "a refused open: EINVAL, *out NULL, and rumor_errmsg() names the setting");
    pthread_t th;
    const char *other = NULL;
    if (pthread_create(&th, NULL, errmsg_elsewhere, &other) == 0) pthread_join(th, NULL);
    CHECK_MSG(other && strcmp(other, "") == 0 && strstr(rumor_errmsg(), "bogus-setting") != NULL,
          "another thread's rumor_errmsg() is its own (\"\"), this one's is kept");
    return check_done();
}
