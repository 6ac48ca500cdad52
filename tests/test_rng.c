/* test_rng.c - the seeded generator: known answers, ranges, distributions. */
#include "check.h"
#include "rng.h"
#include "base.h"

#include <stdlib.h>
#include <string.h>

int main(void)
{
    rumor_rng_t r;
    /* xoshiro256** seeded through splitmix64: published reference outputs for seed 0. */
    rumor_rng_init(&r, 0);
    CHECK(rumor_rng_next(&r) == 0x99ec5f36cb75f2b4ULL);
    CHECK(rumor_rng_next(&r) == 0xbf6e1f784956452aULL);
    CHECK(rumor_rng_next(&r) == 0x1a5f849d4933e6e0ULL);
    rumor_rng_init(&r, 12345);
    CHECK(rumor_rng_next(&r) == 0xbe6a36374160d49bULL);

    /* Derived streams: deterministic, and distinct for distinct (a, b). */
    rumor_rng_t a, b, c;
    rumor_rng_init2(&a, 7, 1, 2);
    rumor_rng_init2(&b, 7, 1, 2);
    rumor_rng_init2(&c, 7, 2, 1);
    uint64_t xa = rumor_rng_next(&a), xb = rumor_rng_next(&b), xc = rumor_rng_next(&c);
    CHECK(xa == xb && xa != xc);

    /* below(n): in range, and uniform (chi-square over 10 bins, 99.9% quantile 27.9). */
    long bins[10] = {0};
    const int n = 100000;
    int in_range = 1;
    for (int i = 0; i < n; i++) {
        uint64_t v = rumor_rng_below(&r, 10);
        in_range &= v < 10;
        bins[v % 10]++;
    }
    double chi = 0;
    for (int i = 0; i < 10; i++) chi += (bins[i] - n / 10.0) * (bins[i] - n / 10.0) / (n / 10.0);
    CHECK(in_range);
    CHECK_MSG(chi < 27.9, "chi-square %g", chi);

    /* uniform in [0,1) with mean 1/2; normal with mean 0 and variance 1. */
    double su = 0, sn = 0, sn2 = 0, umin = 1, umax = 0;
    for (int i = 0; i < n; i++) {
        double u = rumor_rng_uniform(&r), z = rumor_rng_normal(&r);
        su += u, sn += z, sn2 += z * z;
        umin = u < umin ? u : umin, umax = u > umax ? u : umax;
    }
    CHECK(umin >= 0 && umax < 1);
    CHECK_NEAR(su / n, 0.5, 0.01);
    CHECK_NEAR(sn / n, 0.0, 0.02);
    CHECK_NEAR(sn2 / n, 1.0, 0.03);

    /* Gamma(k): mean k and variance k, for shapes below and above 1. */
    const double shapes[] = {0.1, 0.5, 2.0, 7.5};
    for (size_t s = 0; s < RUMOR_ARRAY_LEN(shapes); s++) {
        double k = shapes[s], m1 = 0, m2 = 0;
        for (int i = 0; i < n; i++) {
            double g = rumor_rng_gamma(&r, k);
            m1 += g, m2 += g * g;
        }
        m1 /= n, m2 = m2 / n - m1 * m1;
        CHECK_NEAR(m1, k, 0.03 * k + 0.005);
        CHECK_NEAR(m2, k, 0.08 * k + 0.005);
    }

    /* shuffle is a permutation, and not the identity. */
    size_t idx[1000];
    for (size_t i = 0; i < 1000; i++) idx[i] = i;
    rumor_rng_shuffle(&r, idx, 1000);
    int seen[1000] = {0}, moved = 0;
    for (size_t i = 0; i < 1000; i++) {
        seen[idx[i]]++;
        moved += idx[i] != i;
    }
    int perm = 1;
    for (int i = 0; i < 1000; i++) perm &= seen[i] == 1;
    CHECK(perm && moved > 900);
    return check_done();
}
