/* privacy.c - Rényi-DP of the sampled Gaussian mechanism, composition over steps, and the
 * conversion to (epsilon, delta); see privacy.h for the model and the references. */
#include "privacy.h"

#include <assert.h>
#include <math.h>

/* ---- orders ---- */

/* 1 + x / 10 is computed as a division so that 2.0, 3.0, ... come out exact and take the
 * integer formula, as in the published figures. */
double rumor_privacy_order(size_t i)
{
    assert(i < RUMOR_PRIVACY_ORDER_COUNT);
    if (i < 99) return 1.0 + (double)(i + 1) / 10.0;
    if (i < 99 + 52) return (double)(12 + (i - 99));
    return i == 99 + 52 ? 128.0 : 256.0;
}

/* ---- log-space arithmetic ---- */

/* log(e^a + e^b), exact for -INFINITY (a zero) and INFINITY. */
static double log_add(double a, double b)
{
    double hi = a > b ? a : b, lo = a > b ? b : a;
    if (lo == -INFINITY || hi == INFINITY) return hi;
    return hi + log1p(exp(lo - hi));
}

/* A signed number sign * e^mag, sign in {-1, 0, 1}: the fractional-order series have
 * terms of both signs (generalised binomial coefficients), and a partial sum must not be
 * forced through a logarithm of a negative number. */
typedef struct {
    double mag;
    int sign;
} slog_t;

static void slog_add(slog_t *s, double mag, int sign)
{
    if (sign == 0 || mag == -INFINITY) return;
    if (s->sign == 0) {
        s->mag = mag, s->sign = sign;
        return;
    }
    if (s->sign == sign) {
        s->mag = log_add(s->mag, mag);
        return;
    }
    /* Opposite signs: |e^a - e^b| = e^max (1 - e^(min - max)); the larger one's sign wins. */
    double hi = s->mag > mag ? s->mag : mag, lo = s->mag > mag ? mag : s->mag;
    int hi_sign = s->mag > mag ? s->sign : sign;
    if (hi == lo) {
        s->mag = -INFINITY, s->sign = 0;
        return;
    }
    s->mag = hi + log(-expm1(lo - hi));
    s->sign = hi_sign;
}

/* log(erfc(x)). glibc's erfc keeps its relative accuracy down to the underflow near x = 26;
 * beyond 25 the asymptotic expansion erfc(x) = e^(-x^2) / (x sqrt(pi)) (1 - 1/(2x^2) +
 * 3/(2x^2)^2 - 15/(2x^2)^3 + ...) is used instead, whose terms there fall by 1000 each. */
static double log_erfc(double x)
{
    if (x < 25.0) return log(erfc(x));
    const double u = 1.0 / (2.0 * x * x);
    double term = 1.0, series = 1.0;
    for (int n = 1; n <= 5; n++) {
        term *= -(2.0 * n - 1.0) * u;
        series += term;
    }
    return -x * x - log(x) - 0.5 * log(M_PI) + log(series);
}

/* ---- RDP of one step ---- */

/* log A_alpha for an integer order: A = E_{z ~ N(0, s^2)} [((1 - q) + q e^((2z - 1) / 2s^2))^alpha]
 * expands into sum_k C(alpha, k) (1 - q)^(alpha - k) q^k e^((k^2 - k) / 2s^2), all terms
 * positive. */
static double log_a_int(double q, double sigma, uint64_t alpha)
{
    const double log_q = log(q), log_1q = log1p(-q), two_s2 = 2.0 * sigma * sigma;
    const double a = (double)alpha;
    double log_a = -INFINITY, log_binom = 0.0; /* log C(alpha, k) */
    for (uint64_t k = 0; k <= alpha; k++) {
        const double kd = (double)k;
        double t = log_binom + kd * log_q + (kd * kd - kd) / two_s2;
        if (k < alpha) t += (a - kd) * log_1q; /* q = 1 leaves only k = alpha */
        log_a = log_add(log_a, t);
        log_binom += log(a - kd) - log(kd + 1.0);
    }
    return log_a;
}

/* log A_alpha for any order alpha > 1 (Mironov, Talwar, Zhang 2019, section 3.3). The
 * binomial expansion of a non-integer power converges only where its second term is the
 * smaller, so the integral over z is cut at z0, where (1 - q) N(0, s^2) = q N(1, s^2):
 *   A1 = sum_i C(alpha, i) (1 - q)^(alpha - i) q^i e^((i^2 - i) / 2s^2) P[N(i, s^2) <= z0]
 *   A2 = sum_i C(alpha, i) q^(alpha - i) (1 - q)^i e^((j^2 - j) / 2s^2) P[N(j, s^2) > z0],
 * j = alpha - i, with P[N(m, s^2) <= z0] = erfc((m - z0) / (s sqrt 2)) / 2. Both are sums of
 * positive integrals, and A >= 1 (Jensen). Past i = alpha, C(alpha, i) alternates in sign and
 * every term shrinks: |C(alpha, i)| falls, and with r = N(1, s^2) / N(0, s^2), which is at most
 * r(z0) = (1 - q) / q below z0, the first integral is (1 - q)^alpha E[(r / r(z0))^i; z <= z0],
 * falling in i (the second likewise above z0). So a partial sum that ends on a positive term
 * is above the limit by less than that term: stop there once the terms are below e^-32 A
 * (about 1e-14, the accuracy of the sum itself), or after 2^20 terms, where the terms still
 * fall only as i^-(alpha + 1) (rates near 1/2 with much noise); the result is then an upper
 * bound within its last term, ~1e-14 A at worst for the default orders. */
static double log_a_frac(double q, double sigma, double alpha)
{
    const double log_q = log(q), log_1q = log1p(-q), two_s2 = 2.0 * sigma * sigma;
    const double z0 = sigma * sigma * (log_1q - log_q) + 0.5;
    const double rt2s = M_SQRT2 * sigma, log_half = -M_LN2;
    slog_t a1 = {-INFINITY, 0}, a2 = {-INFINITY, 0};
    double log_binom = 0.0; /* log |C(alpha, i)| */
    int sign = 1;           /* sign of C(alpha, i) */
    for (long i = 0;; i++) {
        const double id = (double)i, j = alpha - id;
        const double base = log_binom + log_half;
        const double s1 = base + (j * log_1q + id * log_q) + (id * id - id) / two_s2 + log_erfc((id - z0) / rt2s);
        const double s2 = base + (j * log_q + id * log_1q) + (j * j - j) / two_s2 + log_erfc((z0 - j) / rt2s);
        slog_add(&a1, s1, sign);
        slog_add(&a2, s2, sign);
        if (id > alpha + 1.0 && sign > 0) {
            if (a1.sign <= 0 || a2.sign <= 0 || isnan(a1.mag) || isnan(a2.mag)) return NAN;
            const double total = log_add(a1.mag, a2.mag);
            if ((s1 > s2 ? s1 : s2) < total - 32.0 || i >= (1L << 20)) return total;
        }
        /* C(alpha, i + 1) = C(alpha, i) (alpha - i) / (i + 1) */
        if (j < 0) sign = -sign;
        log_binom += log(fabs(j)) - log(id + 1.0);
    }
}

double rumor_privacy_rdp(double q, double sigma, double alpha)
{
    if (!(q > 0.0 && q <= 1.0) || !(sigma > 0.0) || isinf(sigma) || !(alpha > 1.0)) return NAN;
    /* So little noise that 1 / (2 sigma^2) overflows: no finite bound. */
    if (isinf(alpha) || isinf(1.0 / (2.0 * sigma * sigma))) return INFINITY;
    /* Without subsampling the Rényi divergence of N(0, s^2) from N(1, s^2) is closed. */
    if (q == 1.0) return alpha / (2.0 * sigma * sigma);
    double log_a;
    if (alpha == floor(alpha) && alpha <= 1e6) log_a = log_a_int(q, sigma, (uint64_t)alpha);
    else log_a = log_a_frac(q, sigma, alpha);
    /* A series that cannot be evaluated in doubles bounds nothing: no bound, never a small one. */
    if (isnan(log_a)) return INFINITY;
    /* A >= 1 by Jensen; rounding can leave log A a hair below 0 for tiny q. */
    return log_a > 0.0 ? log_a / (alpha - 1.0) : 0.0;
}

/* ---- (epsilon, delta) ---- */

static rumor_err_t check_rate_noise(double q, double sigma, char err[RUMOR_ERR_LEN])
{
    if (!(q > 0.0 && q <= 1.0))
        return rumor_fail(err, RUMOR_EINVAL, "sample rate %g: expected 0 < q <= 1 (batch size over data set size)", q);
    if (!(sigma > 0.0) || isinf(sigma))
        return rumor_fail(err, RUMOR_EINVAL, "noise multiplier %g: expected a finite number above 0", sigma);
    return RUMOR_OK;
}

static rumor_err_t check_delta(double delta, char err[RUMOR_ERR_LEN])
{
    if (!(delta > 0.0 && delta < 1.0))
        return rumor_fail(err, RUMOR_EINVAL, "delta %g: expected 0 < delta < 1 (usually below 1 / data set size)", delta);
    return RUMOR_OK;
}

/* eps = min over orders of rdp + log(1/delta) / (alpha - 1); the first order wins a tie. */
static void convert(const double *rdp, double delta, double *eps, double *alpha)
{
    const double log_inv_delta = -log(delta);
    double best = INFINITY, best_alpha = NAN;
    for (size_t i = 0; i < RUMOR_PRIVACY_ORDER_COUNT; i++) {
        const double a = rumor_privacy_order(i), e = rdp[i] + log_inv_delta / (a - 1.0);
        if (e < best) best = e, best_alpha = a;
    }
    *eps = best;
    if (alpha) *alpha = best_alpha;
}

void rumor_privacy_accountant_init(rumor_privacy_accountant_t *acc)
{
    for (size_t i = 0; i < RUMOR_PRIVACY_ORDER_COUNT; i++) acc->rdp[i] = 0.0;
    acc->steps = 0;
}

rumor_err_t rumor_privacy_accountant_step(rumor_privacy_accountant_t *acc, double q, double sigma, uint64_t count,
                                     char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = check_rate_noise(q, sigma, err);
    if (rc != RUMOR_OK || count == 0) return rc;
    for (size_t i = 0; i < RUMOR_PRIVACY_ORDER_COUNT; i++)
        acc->rdp[i] += (double)count * rumor_privacy_rdp(q, sigma, rumor_privacy_order(i));
    acc->steps += count;
    return RUMOR_OK;
}

rumor_err_t rumor_privacy_accountant_epsilon(const rumor_privacy_accountant_t *acc, double delta, double *eps, double *alpha,
                                        char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = check_delta(delta, err);
    if (rc != RUMOR_OK) return rc;
    if (acc->steps == 0) {
        *eps = 0.0;
        if (alpha) *alpha = NAN;
        return RUMOR_OK;
    }
    convert(acc->rdp, delta, eps, alpha);
    return RUMOR_OK;
}

rumor_err_t rumor_privacy_epsilon(double q, double sigma, uint64_t steps, double delta, double *eps, double *alpha,
                             char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc;
    if ((rc = check_rate_noise(q, sigma, err)) != RUMOR_OK) return rc;
    if ((rc = check_delta(delta, err)) != RUMOR_OK) return rc;
    if (steps == 0) return rumor_fail(err, RUMOR_EINVAL, "steps 0: expected at least one step");
    rumor_privacy_accountant_t acc;
    rumor_privacy_accountant_init(&acc);
    if ((rc = rumor_privacy_accountant_step(&acc, q, sigma, steps, err)) != RUMOR_OK) return rc;
    return rumor_privacy_accountant_epsilon(&acc, delta, eps, alpha, err);
}

#define NOISE_MIN 1e-3
#define NOISE_MAX 1e7

rumor_err_t rumor_privacy_noise_for(double q, uint64_t steps, double delta, double target_eps, double *sigma,
                               char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc;
    if ((rc = check_rate_noise(q, 1.0, err)) != RUMOR_OK) return rc;
    if ((rc = check_delta(delta, err)) != RUMOR_OK) return rc;
    if (steps == 0) return rumor_fail(err, RUMOR_EINVAL, "steps 0: expected at least one step");
    if (!(target_eps > 0.0) || isinf(target_eps))
        return rumor_fail(err, RUMOR_EINVAL, "epsilon %g: expected a finite number above 0", target_eps);
    /* However much noise, the conversion leaves log(1/delta) / (alpha - 1) at the largest order. */
    const double max_alpha = rumor_privacy_order(RUMOR_PRIVACY_ORDER_COUNT - 1);
    const double floor_eps = -log(delta) / (max_alpha - 1.0);
    if (target_eps <= floor_eps)
        return rumor_fail(err, RUMOR_EINVAL,
                          "epsilon %g is out of reach at delta %g: no noise gives less than %.4g with orders up to %g",
                          target_eps, delta, floor_eps, max_alpha);

    /* Bracket from sigma = 1 by doubling or halving, then bisect in log sigma: epsilon falls
     * as sigma grows. hi always meets the target, lo never does. */
    double lo = 1.0, hi = 1.0, e;
    if ((rc = rumor_privacy_epsilon(q, 1.0, steps, delta, &e, NULL, err)) != RUMOR_OK) return rc;
    if (e > target_eps) {
        do {
            lo = hi, hi *= 2.0;
            if (hi > NOISE_MAX)
                return rumor_fail(err, RUMOR_EINVAL, "epsilon %g needs a noise multiplier above %g", target_eps,
                                  NOISE_MAX);
            if ((rc = rumor_privacy_epsilon(q, hi, steps, delta, &e, NULL, err)) != RUMOR_OK) return rc;
        } while (e > target_eps);
    } else {
        do {
            hi = lo, lo /= 2.0;
            if (lo < NOISE_MIN)
                return rumor_fail(err, RUMOR_EINVAL, "epsilon %g is met by any noise multiplier, even %g", target_eps,
                                  NOISE_MIN);
            if ((rc = rumor_privacy_epsilon(q, lo, steps, delta, &e, NULL, err)) != RUMOR_OK) return rc;
        } while (e <= target_eps);
    }
    while (hi - lo > 1e-9 * hi) {
        const double mid = sqrt(lo * hi);
        if ((rc = rumor_privacy_epsilon(q, mid, steps, delta, &e, NULL, err)) != RUMOR_OK) return rc;
        if (e > target_eps) lo = mid;
        else hi = mid;
    }
    *sigma = hi;
    return RUMOR_OK;
}
