/*
 * rng.h - a small seeded PRNG (xoshiro256**, seeded through splitmix64).
 *
 * Every random choice in rumor (init, shuffles, partitions, later topologies and
 * simulations) draws from an explicit rumor_rng_t, never from global state, so the same
 * seed gives the same run. Streams are derived by mixing a seed with integers
 * (rumor_rng_init2), e.g. (seed, epoch) for an epoch's shuffle.
 * Not for cryptography: keys come from libsodium.
 */
#ifndef RUMOR_RNG_H
#define RUMOR_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct { uint64_t s[4]; } rumor_rng_t;

void rumor_rng_init(rumor_rng_t *rng, uint64_t seed);
/* A stream for (seed, a, b): independent streams for different (a, b). */
void rumor_rng_init2(rumor_rng_t *rng, uint64_t seed, uint64_t a, uint64_t b);
uint64_t rumor_rng_next(rumor_rng_t *rng);
/* Uniform in [0, n), unbiased; n > 0. */
uint64_t rumor_rng_below(rumor_rng_t *rng, uint64_t n);
/* Uniform double in [0, 1). */
double rumor_rng_uniform(rumor_rng_t *rng);
/* Standard normal (Box-Muller, no cached second value so streams stay simple). */
double rumor_rng_normal(rumor_rng_t *rng);
/* Gamma(shape, 1), shape > 0 (Marsaglia-Tsang; boosted for shape < 1). */
double rumor_rng_gamma(rumor_rng_t *rng, double shape);
/* Fisher-Yates shuffle of idx[0..count). */
void rumor_rng_shuffle(rumor_rng_t *rng, size_t *idx, size_t count);

#endif
