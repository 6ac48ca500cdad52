/* secmix.c - neighbourhood secure averaging: masks and fixed point (see secmix.h). */
#include "secmix.h"

#include <math.h>
#include <stdbool.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_WORDS 1024 /* keystream generated 4 KiB at a time, on the stack */

static const char PAIR_DOMAIN[] = "rumor secure-mix pair v2";

struct rumor_secmix {
    const rumor_secret_key_t *key;
    uint8_t pk[RUMOR_SECMIX_KEY_LEN];
    uint64_t boot, layout;
};

rumor_secmix_t *rumor_secmix_new(const rumor_secret_key_t *key, uint64_t boot, uint64_t layout,
                                 char err[RUMOR_ERR_LEN])
{
    if (boot == 0) {
        rumor_fail(err, RUMOR_EINVAL, "secure mix: no boot id for this run");
        return NULL;
    }
    if (sodium_init() < 0) {
        rumor_fail(err, RUMOR_ENOTSUP, "libsodium failed to initialise");
        return NULL;
    }
    rumor_secmix_t *s = malloc(sizeof *s);
    if (!s) {
        rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        return NULL;
    }
    s->key = key;
    s->boot = boot;
    s->layout = layout;
    memcpy(s->pk, rumor_secret_key_public(key), sizeof s->pk);
    return s;
}

void rumor_secmix_destroy(rumor_secmix_t **self_p)
{
    rumor_secmix_t *s = *self_p;
    if (!s) return;
    sodium_memzero(s, sizeof *s);
    free(s);
    *self_p = NULL;
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The stream key of the pair (us, peer) for one receiver and round, in our two runs. */
static rumor_err_t stream_key(const rumor_secmix_t *s, const uint8_t peer[RUMOR_SECMIX_KEY_LEN], uint64_t peer_boot,
                              const uint8_t receiver[RUMOR_SECMIX_KEY_LEN], uint64_t round,
                              uint8_t out[RUMOR_SECMIX_KEY_LEN], char err[RUMOR_ERR_LEN])
{
    if (peer_boot == 0) return rumor_fail(err, RUMOR_EINVAL, "secure mix: a neighbour's run (boot id) is unknown");
    uint8_t shared[crypto_scalarmult_BYTES], pair[RUMOR_SECMIX_KEY_LEN];
    if (crypto_scalarmult(shared, rumor_secret_key_bytes(s->key), peer) != 0)
        return rumor_fail(err, RUMOR_EINVAL, "secure mix: a neighbour's key is not a usable X25519 key");
    /* Both ends hash the same bytes: the public keys go in sorted order. */
    const bool lo = memcmp(s->pk, peer, RUMOR_SECMIX_KEY_LEN) < 0;
    crypto_generichash_state h;
    crypto_generichash_init(&h, NULL, 0, sizeof pair);
    crypto_generichash_update(&h, (const uint8_t *)PAIR_DOMAIN, sizeof PAIR_DOMAIN - 1);
    crypto_generichash_update(&h, shared, sizeof shared);
    crypto_generichash_update(&h, lo ? s->pk : peer, RUMOR_SECMIX_KEY_LEN);
    crypto_generichash_update(&h, lo ? peer : s->pk, RUMOR_SECMIX_KEY_LEN);
    crypto_generichash_final(&h, pair, sizeof pair);
    uint8_t msg[RUMOR_SECMIX_KEY_LEN + 32];
    memcpy(msg, receiver, RUMOR_SECMIX_KEY_LEN);
    put_le64(msg + RUMOR_SECMIX_KEY_LEN, round);
    put_le64(msg + RUMOR_SECMIX_KEY_LEN + 8, s->layout);
    put_le64(msg + RUMOR_SECMIX_KEY_LEN + 16, lo ? s->boot : peer_boot);
    put_le64(msg + RUMOR_SECMIX_KEY_LEN + 24, lo ? peer_boot : s->boot);
    crypto_generichash(out, RUMOR_SECMIX_KEY_LEN, msg, sizeof msg, pair, sizeof pair);
    sodium_memzero(shared, sizeof shared);
    sodium_memzero(pair, sizeof pair);
    sodium_memzero(&h, sizeof h);
    return RUMOR_OK;
}

rumor_err_t rumor_secmix_send_init(rumor_secmix_t *s, const rumor_secmix_edges_t *e, rumor_secmix_send_t *out,
                                   char err[RUMOR_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    if (e->count < 1 || e->count > 2 || (e->count == 2 && memcmp(e->peer[0], e->peer[1], RUMOR_SECMIX_KEY_LEN) == 0))
        return rumor_fail(err, RUMOR_EINVAL, "secure mix: %d mask edges", e->count);
    for (int k = 0; k < e->count; k++) {
        const int c = memcmp(s->pk, e->peer[k], RUMOR_SECMIX_KEY_LEN);
        if (c == 0) return rumor_fail(err, RUMOR_EINVAL, "secure mix: a mask edge to this peer itself");
        rumor_err_t rc = stream_key(s, e->peer[k], e->peer_boot[k], e->receiver, e->round, out->key[k], err);
        if (rc != RUMOR_OK) {
            rumor_secmix_send_fini(out);
            return rc;
        }
        out->sign[k] = c < 0 ? 1 : -1;
    }
    out->count = e->count;
    return RUMOR_OK;
}

void rumor_secmix_send_fini(rumor_secmix_send_t *snd) { sodium_memzero(snd, sizeof *snd); }

/* The first parameter whose share is beyond the range or not finite, for the error. */
static size_t first_bad(const float *x, size_t n, double scale, double lim)
{
    size_t i = 0;
    while (i < n && fabs((double)x[i] * scale) < lim) i++;
    return i;
}

rumor_err_t rumor_secmix_encode(const rumor_secmix_send_t *snd, size_t off, const float *x, size_t n, double share,
                                uint8_t *out, char err[RUMOR_ERR_LEN])
{
    if (off % 16 != 0 || (off + n) / 16 > UINT32_MAX)
        return rumor_fail(err, RUMOR_EINVAL, "secure mix: chunk offset %zu is not a multiple of 16", off);
    const double scale = share * (double)(1u << RUMOR_SECMIX_FRAC_BITS);
    const double lim = RUMOR_SECMIX_RANGE * (double)(1u << RUMOR_SECMIX_FRAC_BITS); /* 2^31 */
    /* The range first, in one branch-free pass (a NaN fails the comparison), so that the
     * conversion below needs no branch and vectorises: it then costs less than the keystream. */
    float mx = 0.0f;
    int nan = 0;
#pragma omp simd reduction(max : mx) reduction(| : nan)
    for (size_t i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        mx = a > mx ? a : mx;
        nan |= a != a;
    }
    if (nan || !((double)mx * fabs(scale) < lim - 1.0)) {
        const size_t i = first_bad(x, n, scale, lim - 1.0);
        return rumor_fail(err, RUMOR_EINVAL, "secure mix: parameter %zu (%g) is beyond the fixed-point range of +-%g",
                          off + i, i < n ? (double)x[i] : 0.0, RUMOR_SECMIX_RANGE);
    }
    static const uint8_t nonce[crypto_stream_chacha20_ietf_NONCEBYTES];
    static const uint8_t zeros[4 * BLOCK_WORDS]; /* the keystream is the XOR with zeros */
    uint32_t mask[2][BLOCK_WORDS], q[BLOCK_WORDS];
    /* Below 2^23 units v + 0.5 is exact in float, and x * scale rounded to float is off by
     * less than one unit of 2^-20: the conversion then runs four lanes wide instead of two. */
    const bool narrow = (double)mx * fabs(scale) < 8388608.0;
    const float fscale = (float)scale;
    /* Each mask enters with its sign as a wrapping multiplier: 1 or 2^32 - 1. */
    const uint32_t u0 = snd->sign[0] > 0 ? 1u : UINT32_MAX, u1 = snd->count > 1 && snd->sign[1] < 0 ? UINT32_MAX : 1u;
    for (size_t b = 0; b < n; b += BLOCK_WORDS) {
        const size_t m = n - b < BLOCK_WORDS ? n - b : BLOCK_WORDS;
        /* Keystream from block (off + b) / 16; a partial last block is generated whole. */
        const size_t words = (m + 15) / 16 * 16;
        for (int k = 0; k < 2; k++) {
            if (k < snd->count) /* little-endian host, as everywhere: keystream bytes are words */
                crypto_stream_chacha20_ietf_xor_ic((uint8_t *)mask[k], zeros, words * sizeof(uint32_t), nonce,
                                                   (uint32_t)((off + b) / 16), snd->key[k]);
            else
                memset(mask[k], 0, words * sizeof(uint32_t));
        }
        const float *restrict xb = x + b;
        /* Nearest, ties away from zero (PROTOCOL.md allows either tie rule); |v| < 2^31 - 1. */
        if (narrow) {
#pragma omp simd
            for (size_t i = 0; i < m; i++) {
                const float v = xb[i] * fscale;
                q[i] = (uint32_t)(int32_t)(v + copysignf(0.5f, v)) + mask[0][i] * u0 + mask[1][i] * u1;
            }
        } else {
#pragma omp simd
            for (size_t i = 0; i < m; i++) {
                const double v = (double)xb[i] * scale;
                q[i] = (uint32_t)(int32_t)(v + copysign(0.5, v)) + mask[0][i] * u0 + mask[1][i] * u1;
            }
        }
        memcpy(out + 4 * b, q, 4 * m);
    }
    sodium_memzero(mask, sizeof mask);
    return RUMOR_OK;
}

rumor_err_t rumor_secmix_encode_model(const rumor_secmix_send_t *snd, const float *x, size_t count, size_t chunk_params,
                                      double share, const double *w, uint8_t *out, size_t *out_off,
                                      char err[RUMOR_ERR_LEN])
{
    out_off[0] = 0;
    for (size_t k = 0, off = 0; off < count; k++, off += chunk_params) {
        const size_t n = count - off < chunk_params ? count - off : chunk_params;
        const rumor_err_t rc =
            rumor_secmix_encode(snd, off, x + off, n, w ? share * w[k] : share, out + off * sizeof(uint32_t), err);
        if (rc != RUMOR_OK) return rc;
        out_off[k + 1] = (off + n) * sizeof(uint32_t);
    }
    return RUMOR_OK;
}

rumor_err_t rumor_secmix_mask_model(rumor_secmix_t *s, const rumor_secmix_edges_t *e, const float *x, size_t count,
                                    size_t chunk_params, double share, const double *w, uint8_t *out,
                                    size_t *out_off, char err[RUMOR_ERR_LEN])
{
    rumor_secmix_send_t snd;
    rumor_err_t rc = rumor_secmix_send_init(s, e, &snd, err);
    if (rc != RUMOR_OK) return rc;
    rc = rumor_secmix_encode_model(&snd, x, count, chunk_params, share, w, out, out_off, err);
    rumor_secmix_send_fini(&snd);
    return rc;
}
