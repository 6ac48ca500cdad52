/* fuzz_proto.c - libFuzzer target for the wire protocol decoder (run by tests/run_fuzz.sh).
 *
 * Input layout, so one byte string covers both frames:
 *   byte 0      flags: bit 0 set = a frame 2 is present
 *   bytes 1-2   frame 1 length, big-endian (clamped to what remains)
 *   then        frame 1, then the rest of the input as frame 2 (when the flag says so)
 * Each frame is copied into a buffer of exactly its size, so AddressSanitizer catches a read
 * one byte past either. A decoded message must encode, decode to the same bytes again and
 * report no reason; a rejected one must give RUMOR_EPROTO and a reason. Anything else traps.
 * The seed corpus (tests/fuzz/proto/) is written by `test_proto --write-corpus DIR`.
 */
#include "proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *copy_exact(const uint8_t *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    if (!c) abort();
    if (n) memcpy(c, p, n);
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static rumor_msg_t a, b;
    static uint8_t re1[RUMOR_PROTO_MAX_HEADER], re2[RUMOR_PROTO_MAX_HEADER];
    if (size < 3) return 0;
    bool has_payload = data[0] & 1;
    size_t len1 = ((size_t)data[1] << 8) | data[2];
    data += 3;
    size -= 3;
    if (len1 > size) len1 = size;

    uint8_t *f1 = copy_exact(data, len1);
    uint8_t *pl = has_payload ? copy_exact(data + len1, size - len1) : NULL;
    size_t pl_len = has_payload ? size - len1 : 0;

    rumor_proto_reject_t why = RUMOR_PROTO_REJECT_COUNT;
    rumor_err_t rc = rumor_proto_decode(&a, f1, len1, pl, pl_len, &why);
    if (rc == RUMOR_OK) {
        size_t n1 = 0, n2 = 0;
        rumor_proto_reject_t why2;
        if (why != RUMOR_PROTO_REJECT_NONE) __builtin_trap();
        if (rumor_proto_encode(&a, re1, sizeof re1, &n1) != RUMOR_OK) __builtin_trap();
        if (rumor_proto_decode(&b, re1, n1, pl, pl_len, &why2) != RUMOR_OK) __builtin_trap();
        if (rumor_proto_encode(&b, re2, sizeof re2, &n2) != RUMOR_OK) __builtin_trap();
        if (n1 != n2 || memcmp(re1, re2, n1) != 0) __builtin_trap();
        /* Zero copy: the payload is the caller's frame, not a copy of it. */
        if (a.type == RUMOR_MSG_MODEL &&
            (a.u.model.payload != pl || a.u.model.payload_len != pl_len))
            __builtin_trap();
    } else if (rc != RUMOR_EPROTO || why == RUMOR_PROTO_REJECT_NONE ||
               why >= RUMOR_PROTO_REJECT_COUNT || a.type != 0) {
        __builtin_trap();
    }
    free(f1);
    free(pl);
    return 0;
}
