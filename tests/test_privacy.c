/* test_privacy.c - the RDP accountant: TensorFlow Privacy's published MNIST figures, closed
 * forms, values of the defining integral, monotonicity, the inverse, accumulation, errors. */
#include "check.h"
#include "privacy.h"
#include "base.h"

#include <math.h>
#include <string.h>

#define MNIST_N 60000.0
#define MNIST_BATCH 256.0

/* Steps of `epochs` passes over MNIST in batches of 256, as TensorFlow Privacy counts them. */
static uint64_t mnist_steps(int epochs) { return (uint64_t)(epochs * MNIST_N / MNIST_BATCH); }

static void known_answers(void)
{
    /* tensorflow/privacy tutorials/README.md, "Select Parameters": MNIST, batch 256,
     * delta 1e-5; noise 1.12 for 60 epochs, 0.6 for 30, 1.2 for 10. */
    const struct {
        double sigma;
        int epochs;
        double eps;
    } cases[] = {{1.12, 60, 2.92}, {0.6, 30, 9.74}, {1.2, 10, 1.20}};
    const double q = MNIST_BATCH / MNIST_N;
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(cases); i++) {
        double eps = NAN, alpha = NAN;
        CHECK_RC(rumor_privacy_epsilon(q, cases[i].sigma, mnist_steps(cases[i].epochs), 1e-5, &eps, &alpha, NULL));
        CHECK_NEAR(eps, cases[i].eps, 0.02);
        CHECK(alpha > 1.0);
        fprintf(stderr, "mnist noise %.2f, %d epochs (%llu steps): epsilon %.4f at order %g\n", cases[i].sigma,
                cases[i].epochs, (unsigned long long)mnist_steps(cases[i].epochs), eps, alpha);
    }
}

static void orders(void)
{
    CHECK(RUMOR_PRIVACY_ORDER_COUNT == 153);
    CHECK(rumor_privacy_order(0) == 1.1);
    CHECK(rumor_privacy_order(9) == 2.0);  /* exact, so it takes the integer formula */
    CHECK_NEAR(rumor_privacy_order(98), 10.9, 1e-14);
    CHECK(rumor_privacy_order(99) == 12.0 && rumor_privacy_order(150) == 63.0);
    CHECK(rumor_privacy_order(151) == 128.0 && rumor_privacy_order(152) == 256.0);
    int ascending = 1;
    for (size_t i = 1; i < RUMOR_PRIVACY_ORDER_COUNT; i++) ascending &= rumor_privacy_order(i) > rumor_privacy_order(i - 1);
    CHECK(ascending);
}

static void closed_forms(void)
{
    /* q = 1 is the Gaussian mechanism: alpha / (2 sigma^2), at every order. */
    const double sigmas[] = {0.5, 1.0, 3.7};
    for (size_t s = 0; s < RUMOR_ARRAY_LEN(sigmas); s++)
        for (size_t i = 0; i < RUMOR_PRIVACY_ORDER_COUNT; i += 7) {
            const double a = rumor_privacy_order(i), sg = sigmas[s];
            CHECK_NEAR(rumor_privacy_rdp(1.0, sg, a), a / (2.0 * sg * sg), 1e-12 * a);
        }
    /* ... and both series tend to it as q -> 1 (integer and fractional orders). */
    const double near_orders[] = {1.5, 2.0, 3.3, 7.0, 10.9, 32.0};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(near_orders); i++) {
        const double a = near_orders[i];
        CHECK_NEAR(rumor_privacy_rdp(1.0 - 1e-12, 1.3, a), a / (2.0 * 1.3 * 1.3), 1e-8 * a);
    }

    /* Integer orders by hand (the binomial weights sum to 1): A_2 = 1 + q^2 (e^(1/s^2) - 1),
     * A_3 = 1 + 3q^2(1-q) (e^(1/s^2) - 1) + q^3 (e^(3/s^2) - 1). */
    const double qs[] = {1e-4, 256.0 / 60000.0, 0.1, 0.7};
    for (size_t k = 0; k < RUMOR_ARRAY_LEN(qs); k++) {
        const double q = qs[k], s = 0.9, e1 = exp(1.0 / (s * s)), e3 = exp(3.0 / (s * s));
        const double a2 = log1p(q * q * (e1 - 1.0));
        const double a3 = log1p(3.0 * q * q * (1.0 - q) * (e1 - 1.0) + q * q * q * (e3 - 1.0)) / 2.0;
        /* A is within 1e-7 of 1 at q = 1e-4, where log A keeps ~1e-16 absolute: 1e-9 relative. */
        CHECK_NEAR(rumor_privacy_rdp(q, s, 2.0), a2, 1e-9 * a2);
        CHECK_NEAR(rumor_privacy_rdp(q, s, 3.0), a3, 1e-9 * a3);
        /* The fractional series agrees with the integer sum next to an integer. */
        CHECK_NEAR(rumor_privacy_rdp(q, s, 2.0 + 1e-9), a2, 1e-6 * a2);
        CHECK_NEAR(rumor_privacy_rdp(q, s, 3.0 - 1e-9), a3, 1e-6 * a3);
    }

    /* The defining integral log E_{z~N(0,s^2)}[((1-q) + q e^((2z-1)/2s^2))^alpha] / (alpha - 1),
     * evaluated by adaptive quadrature at 40 digits (mpmath), independently of the series. */
    const struct {
        double q, sigma, alpha, rdp;
    } integral[] = {
        {256.0 / 60000.0, 0.6, 2.9, 0.000525285958495604},
        {256.0 / 60000.0, 1.12, 9.1, 0.000106733739134052},
        {256.0 / 60000.0, 1.2, 15.0, 0.000160429103311291},
        {0.3, 0.7, 2.5, 0.832722336464926},
        {0.5, 0.5, 1.1, 0.79263177957152},
        {0.9, 3.0, 5.5, 0.257814585124854},
        {0.1, 2.0, 256.0, 29.6883851615432},
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(integral); i++) {
        const double r = rumor_privacy_rdp(integral[i].q, integral[i].sigma, integral[i].alpha);
        CHECK_MSG(fabs(r - integral[i].rdp) <= 1e-9 * integral[i].rdp, "q %g sigma %g alpha %g: %.15g, integral %.15g",
                  integral[i].q, integral[i].sigma, integral[i].alpha, r, integral[i].rdp);
    }
}

static void shape(void)
{
    /* Increasing in the order, and in q; decreasing in sigma. */
    const double qs[] = {0.001, 0.01, 0.1, 0.5};
    const double sigmas[] = {0.4, 0.8, 1.5, 4.0};
    for (size_t k = 0; k < RUMOR_ARRAY_LEN(qs); k++)
        for (size_t s = 0; s < RUMOR_ARRAY_LEN(sigmas); s++) {
            const double q = qs[k], sg = sigmas[s];
            int up_order = 1, up_q = 1, down_sigma = 1, finite = 1;
            double prev = 0.0;
            for (size_t i = 0; i < RUMOR_PRIVACY_ORDER_COUNT; i++) {
                const double a = rumor_privacy_order(i), r = rumor_privacy_rdp(q, sg, a);
                finite &= isfinite(r) && r > 0.0;
                up_order &= r >= prev;
                prev = r;
                up_q &= rumor_privacy_rdp(q * 1.5, sg, a) > r;
                down_sigma &= rumor_privacy_rdp(q, sg * 1.2, a) < r;
            }
            CHECK_MSG(finite, "q %g sigma %g", q, sg);
            CHECK_MSG(up_order, "q %g sigma %g: not increasing in the order", q, sg);
            CHECK_MSG(up_q, "q %g sigma %g: not increasing in q", q, sg);
            CHECK_MSG(down_sigma, "q %g sigma %g: not decreasing in sigma", q, sg);
        }
    /* Log space: little noise at order 256 is large but finite; none is unbounded. */
    CHECK(isfinite(rumor_privacy_rdp(0.01, 0.3, 256.0)) && rumor_privacy_rdp(0.01, 0.3, 256.0) > 100.0);
    CHECK(isfinite(rumor_privacy_rdp(0.01, 1e-3, 256.0)));
    CHECK(isfinite(rumor_privacy_rdp(0.01, 1e-3, 10.9)));
    CHECK(rumor_privacy_rdp(0.01, 1e-200, 2.0) == INFINITY);
    CHECK(rumor_privacy_rdp(0.01, 1.0, INFINITY) == INFINITY);
}

static void inverse(void)
{
    const double q = MNIST_BATCH / MNIST_N;
    const double targets[] = {0.5, 1.0, 2.92, 8.0, 50.0};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(targets); i++) {
        double sigma = NAN, eps = NAN;
        CHECK_RC(rumor_privacy_noise_for(q, mnist_steps(60), 1e-5, targets[i], &sigma, NULL));
        CHECK_RC(rumor_privacy_epsilon(q, sigma, mnist_steps(60), 1e-5, &eps, NULL, NULL));
        CHECK_NEAR(eps, targets[i], 1e-3);
        CHECK_MSG(eps <= targets[i], "noise %g gives %g above the target %g", sigma, eps, targets[i]);
    }
    /* Round trip through the published figure: 2.92 after 60 epochs needs about 1.12. */
    double sigma = NAN;
    CHECK_RC(rumor_privacy_noise_for(q, mnist_steps(60), 1e-5, 2.92, &sigma, NULL));
    CHECK_NEAR(sigma, 1.12, 0.01);
    /* Without subsampling: eps = T alpha / 2s^2 + log(1/delta) / (alpha - 1) at the best order. */
    CHECK_RC(rumor_privacy_noise_for(1.0, 1, 1e-5, 4.0, &sigma, NULL));
    double eps = NAN;
    CHECK_RC(rumor_privacy_epsilon(1.0, sigma, 1, 1e-5, &eps, NULL, NULL));
    CHECK_NEAR(eps, 4.0, 1e-3);
}

static void accountant(void)
{
    const double q = MNIST_BATCH / MNIST_N;
    /* Epoch by epoch equals all at once. */
    rumor_privacy_accountant_t acc;
    rumor_privacy_accountant_init(&acc);
    double eps = NAN, alpha = NAN, one = NAN, one_alpha = NAN;
    CHECK_RC(rumor_privacy_accountant_epsilon(&acc, 1e-5, &eps, &alpha, NULL));
    CHECK(eps == 0.0);
    const uint64_t per_epoch = 234, total = mnist_steps(60);
    uint64_t done = 0;
    while (done < total) {
        uint64_t n = total - done < per_epoch ? total - done : per_epoch;
        CHECK_RC(rumor_privacy_accountant_step(&acc, q, 1.12, n, NULL));
        done += n;
    }
    CHECK(acc.steps == total);
    CHECK_RC(rumor_privacy_accountant_epsilon(&acc, 1e-5, &eps, &alpha, NULL));
    CHECK_RC(rumor_privacy_epsilon(q, 1.12, total, 1e-5, &one, &one_alpha, NULL));
    CHECK_NEAR(eps, one, 1e-10 * one);
    CHECK(alpha == one_alpha);
    /* A step with count 0 counts nothing. */
    CHECK_RC(rumor_privacy_accountant_step(&acc, q, 1.12, 0, NULL));
    CHECK(acc.steps == total);

    /* Two phases (say, more noise later) compose in either order, and cost more than either. */
    rumor_privacy_accountant_t ab, ba;
    rumor_privacy_accountant_init(&ab);
    rumor_privacy_accountant_init(&ba);
    CHECK_RC(rumor_privacy_accountant_step(&ab, 0.01, 0.8, 1000, NULL));
    CHECK_RC(rumor_privacy_accountant_step(&ab, 0.02, 1.5, 3000, NULL));
    CHECK_RC(rumor_privacy_accountant_step(&ba, 0.02, 1.5, 3000, NULL));
    CHECK_RC(rumor_privacy_accountant_step(&ba, 0.01, 0.8, 1000, NULL));
    double e_ab, e_ba, e_a, e_b;
    CHECK_RC(rumor_privacy_accountant_epsilon(&ab, 1e-6, &e_ab, NULL, NULL));
    CHECK_RC(rumor_privacy_accountant_epsilon(&ba, 1e-6, &e_ba, NULL, NULL));
    CHECK_RC(rumor_privacy_epsilon(0.01, 0.8, 1000, 1e-6, &e_a, NULL, NULL));
    CHECK_RC(rumor_privacy_epsilon(0.02, 1.5, 3000, 1e-6, &e_b, NULL, NULL));
    CHECK_NEAR(e_ab, e_ba, 1e-12 * e_ab);
    CHECK(e_ab > e_a && e_ab > e_b && e_ab < e_a + e_b);
}

/* An error is RUMOR_EINVAL with a sentence that names the bad value's quantity. */
static void expect_einval(rumor_err_t rc, const char *err, const char *word)
{
    CHECK(rc == RUMOR_EINVAL);
    CHECK_MSG(strstr(err, word) != NULL, "'%s' does not mention %s", err, word);
}

static void errors(void)
{
    char err[RUMOR_ERR_LEN];
    double x = 0.0;
    expect_einval(rumor_privacy_epsilon(0.0, 1.0, 10, 1e-5, &x, NULL, err), err, "sample rate");
    expect_einval(rumor_privacy_epsilon(1.5, 1.0, 10, 1e-5, &x, NULL, err), err, "sample rate");
    expect_einval(rumor_privacy_epsilon(NAN, 1.0, 10, 1e-5, &x, NULL, err), err, "sample rate");
    expect_einval(rumor_privacy_epsilon(0.01, 0.0, 10, 1e-5, &x, NULL, err), err, "noise");
    expect_einval(rumor_privacy_epsilon(0.01, -1.0, 10, 1e-5, &x, NULL, err), err, "noise");
    expect_einval(rumor_privacy_epsilon(0.01, INFINITY, 10, 1e-5, &x, NULL, err), err, "noise");
    expect_einval(rumor_privacy_epsilon(0.01, 1.0, 10, 0.0, &x, NULL, err), err, "delta");
    expect_einval(rumor_privacy_epsilon(0.01, 1.0, 10, 1.0, &x, NULL, err), err, "delta");
    expect_einval(rumor_privacy_epsilon(0.01, 1.0, 0, 1e-5, &x, NULL, err), err, "steps");
    expect_einval(rumor_privacy_noise_for(0.01, 10, 1e-5, 0.0, &x, err), err, "epsilon");
    expect_einval(rumor_privacy_noise_for(0.01, 10, 1e-5, -2.0, &x, err), err, "epsilon");
    expect_einval(rumor_privacy_noise_for(0.01, 10, 1e-5, NAN, &x, err), err, "epsilon");
    /* log(1e5) / 255 = 0.045: no noise certifies less with these orders. */
    expect_einval(rumor_privacy_noise_for(0.01, 10, 1e-5, 0.04, &x, err), err, "out of reach");
    expect_einval(rumor_privacy_noise_for(0.0, 10, 1e-5, 1.0, &x, err), err, "sample rate");
    expect_einval(rumor_privacy_noise_for(0.01, 0, 1e-5, 1.0, &x, err), err, "steps");
    expect_einval(rumor_privacy_noise_for(0.01, 10, 2.0, 1.0, &x, err), err, "delta");
    rumor_privacy_accountant_t acc;
    rumor_privacy_accountant_init(&acc);
    expect_einval(rumor_privacy_accountant_step(&acc, 2.0, 1.0, 5, err), err, "sample rate");
    expect_einval(rumor_privacy_accountant_epsilon(&acc, -1.0, &x, NULL, err), err, "delta");
    CHECK(acc.steps == 0);
    CHECK(isnan(rumor_privacy_rdp(0.0, 1.0, 2.0)) && isnan(rumor_privacy_rdp(0.1, 0.0, 2.0)));
    CHECK(isnan(rumor_privacy_rdp(0.1, 1.0, 1.0)) && isnan(rumor_privacy_rdp(0.1, 1.0, NAN)));
    /* err may be NULL. */
    CHECK(rumor_privacy_epsilon(0.0, 1.0, 10, 1e-5, &x, NULL, NULL) == RUMOR_EINVAL);
}

int main(void)
{
    known_answers();
    orders();
    closed_forms();
    shape();
    inverse();
    accountant();
    errors();
    return check_done();
}
