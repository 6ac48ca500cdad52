/* rng.c - xoshiro256** with splitmix64 seeding (Blackman & Vigna). */
#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rumor_rng_init(rumor_rng_t *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&x);
}

void rumor_rng_init2(rumor_rng_t *rng, uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t x = seed;
    uint64_t h = splitmix64(&x);
    x = h ^ (a * 0xd1342543de82ef95ULL);
    h = splitmix64(&x);
    x = h ^ (b * 0xaf251af3b0f025b5ULL);
    rumor_rng_init(rng, splitmix64(&x));
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rumor_rng_next(rumor_rng_t *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t rumor_rng_below(rumor_rng_t *rng, uint64_t n)
{
    /* Rejection on the top of the range removes the modulo bias. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do r = rumor_rng_next(rng);
    while (r >= limit);
    return r % n;
}

double rumor_rng_uniform(rumor_rng_t *rng)
{
    return (double)(rumor_rng_next(rng) >> 11) * 0x1.0p-53;
}

double rumor_rng_normal(rumor_rng_t *rng)
{
    double u1;
    do u1 = rumor_rng_uniform(rng);
    while (u1 <= 0.0);
    double u2 = rumor_rng_uniform(rng);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double rumor_rng_gamma(rumor_rng_t *rng, double shape)
{
    if (shape < 1.0) {
        /* Gamma(a) = Gamma(a + 1) * U^(1/a). */
        double u;
        do u = rumor_rng_uniform(rng);
        while (u <= 0.0);
        return rumor_rng_gamma(rng, shape + 1.0) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = rumor_rng_normal(rng);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = rumor_rng_uniform(rng);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
        if (u > 0.0 && log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
    }
}

void rumor_rng_shuffle(rumor_rng_t *rng, size_t *idx, size_t count)
{
    for (size_t i = count; i > 1; i--) {
        size_t j = (size_t)rumor_rng_below(rng, i);
        size_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}
