/* fuzz_admit.c - libFuzzer target for the admission datagram parser (run by tests/run_fuzz.sh).
 *
 * The port a node knocks on is the one part of it any stranger reaches, before any handshake.
 * Input layout:
 *   byte 0      mode: even = the rest is a datagram, as it arrives on the UDP port;
 *               odd = the rest is a plaintext, sealed here from a fixed sender to the node's
 *               key as a knock (odd mode & 2: as an answer), so that the parser behind the
 *               MAC (lengths, padding, certificate) is reached too
 * The datagram is copied into a buffer of exactly its size, so AddressSanitizer catches a read
 * one byte past it. What must hold: rumor_admit_is_knock never accepts what rumor_admit_open
 * calls malformed for that reason; an opened datagram has a known kind, a certificate length
 * within bounds, and for a knock exactly the fixed size; a certificate that opened goes through
 * rumor_cert_check without harm. Anything else traps.
 * The seed corpus is tests/fuzz/admit/.
 */
#include "crypto.h"

#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rumor_secret_key_t *node_key, *peer_key;

static void keys(void)
{
    if (node_key) return;
    uint8_t a[32], b[32];
    for (int i = 0; i < 32; i++) a[i] = (uint8_t)(i + 1), b[i] = (uint8_t)(200 - i);
    char err[RUMOR_ERR_LEN];
    node_key = rumor_secret_key_from_seed(a, err);
    peer_key = rumor_secret_key_from_seed(b, err);
    if (!node_key || !peer_key) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    keys();
    if (size < 1) return 0;
    const uint8_t mode = data[0];
    data++, size--;
    uint8_t *dgram = NULL;
    size_t len = 0;
    if (!(mode & 1)) {
        dgram = malloc(size ? size : 1);
        if (!dgram) abort();
        if (size) memcpy(dgram, data, size);
        len = size;
    } else {
        /* Seal the plaintext as the given kind: header, then crypto_box_easy. */
        if (size > RUMOR_ADMIT_MAX) return 0;
        const uint8_t kind = (mode & 2) ? RUMOR_ADMIT_ANSWER : RUMOR_ADMIT_KNOCK;
        len = RUMOR_ADMIT_HEAD + crypto_box_MACBYTES + size;
        dgram = malloc(len);
        if (!dgram) abort();
        memcpy(dgram, "RMA2", 4);
        dgram[4] = kind;
        memcpy(dgram + 5, rumor_secret_key_public(peer_key), 32);
        memset(dgram + 37, 0x5a, RUMOR_ADMIT_NONCE_LEN);
        if (crypto_box_easy(dgram + RUMOR_ADMIT_HEAD, data, size, dgram + 37, rumor_secret_key_public(node_key),
                            rumor_secret_key_bytes(peer_key)) != 0)
            abort();
    }
    rumor_admit_msg_t m;
    const bool shaped = rumor_admit_is_knock(dgram, len);
    const rumor_err_t rc = rumor_admit_open(&m, node_key, dgram, len);
    if (rc == RUMOR_OK) {
        if (m.kind != RUMOR_ADMIT_KNOCK && m.kind != RUMOR_ADMIT_ANSWER && m.kind != RUMOR_ADMIT_WRONG_KEY)
            __builtin_trap();
        if (m.cert_len > RUMOR_CERT_MAX_LEN) __builtin_trap();
        /* A knock that opens is knock-shaped: the cheap check never drops a real one. */
        if (m.kind == RUMOR_ADMIT_KNOCK && (len != RUMOR_ADMIT_KNOCK_LEN || !shaped)) __builtin_trap();
        if (m.cert_len) {
            uint8_t authority[32] = {0};
            rumor_cert_t cert;
            rumor_cert_reject_t why;
            (void)rumor_cert_check(m.cert, m.cert_len, authority, m.from, 1767225600, NULL, &cert, &why);
        }
    } else if (rc != RUMOR_EINVAL && rc != RUMOR_EAUTH) {
        __builtin_trap();
    }
    free(dgram);
    return 0;
}
