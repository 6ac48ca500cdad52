/*
 * secmix_sum.h - secure mixing's arithmetic, with no keys (secmix.h has the keys and the
 * sender's side): the fixed point, the edges a sender masks along, and the receiver's sum of
 * masked words mod 2^32 read back as a real number. Pure: the gossip engine uses it without
 * libsodium.
 */
#ifndef RUMOR_SECMIX_SUM_H
#define RUMOR_SECMIX_SUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RUMOR_SECMIX_KEY_LEN 32
#define RUMOR_SECMIX_FRAC_BITS 20
#define RUMOR_SECMIX_RANGE 2048.0  /* |share * x| and the sum must stay below this */

/* The mask edges a sender has towards one receiver in one round (gossip.h fills it). */
typedef struct {
    uint8_t receiver[RUMOR_SECMIX_KEY_LEN];
    uint64_t round;
    int count;                                 /* 1 (|S| = 2) or 2 */
    uint8_t peer[2][RUMOR_SECMIX_KEY_LEN];     /* the sender's ring neighbours in S */
    uint64_t peer_boot[2];                     /* their boot ids as this sender knows them */
} rumor_secmix_edges_t;

/* The receiver's side, pure arithmetic: acc[i] += word i of payload (mod 2^32). */
static inline void rumor_secmix_add(uint32_t *restrict acc, const uint8_t *restrict payload, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, payload + 4 * i, 4);
        acc[i] += w;
    }
}
/* A fixed-point sum back to a real number. */
static inline double rumor_secmix_value(uint32_t v)
{
    const int64_t s = v >= 0x80000000u ? (int64_t)v - 4294967296LL : (int64_t)v;
    return (double)s * (1.0 / (double)(1u << RUMOR_SECMIX_FRAC_BITS));
}

#endif
