/*
 * api.c - librumor's own functions (include/rumor.h): the versions. The error messages and
 * the log sink are base's (src/base/base.c), exported as they are.
 */
#include "base.h"
#include "config.h"

#include <stdio.h>

RUMOR_API const char *rumor_version(int *major, int *minor, int *patch)
{
    int v[3] = {0, 0, 0};
    (void)sscanf(RUMOR_VERSION, "%d.%d.%d", &v[0], &v[1], &v[2]);
    if (major) *major = v[0];
    if (minor) *minor = v[1];
    if (patch) *patch = v[2];
    return RUMOR_VERSION;
}

RUMOR_API int rumor_abi_version(void) { return RUMOR_ABI_VERSION; }

RUMOR_API int rumor_protocol_version(void) { return RUMOR_PROTO_VERSION; }
