/*
 * crypto_impl.h - what crypto.c lends cert.c and noise.c (not an interface): libsodium's start, the
 * small-file reader and its line helpers, and the certificate's integer fields.
 */
#ifndef RUMOR_CRYPTO_IMPL_H
#define RUMOR_CRYPTO_IMPL_H

#include "crypto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Key and certificate files are small; anything bigger is not one of ours. */
#define CERT_FILE_MAX 65536
/* Z85 of a certificate padded to a multiple of 4: 216 bytes, 270 characters. */
#define CERT_PADDED_MAX ((RUMOR_CERT_MAX_LEN + 3) / 4 * 4)

rumor_err_t crypto_sodium_ready(char *err);
bool crypto_is_blank(char c);
rumor_err_t crypto_read_small_file(const char *path, bool secret, uint8_t *buf, size_t cap, size_t *len,
                                   char *err);
rumor_err_t crypto_data_line(const char *buf, size_t len, const char *path, const char **line,
                             size_t *line_len, size_t *line_no, char *err);

static inline void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static inline uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

#endif
