/*
 * privacy.h - a Rényi-DP accountant for the sampled Gaussian mechanism: what DP-SGD's
 * steps cost in (epsilon, delta)-differential privacy.
 *
 * One step of DP-SGD samples each example with probability q (Poisson sampling), sums the
 * clipped per-example gradients and adds Gaussian noise of standard deviation sigma times
 * the clipping norm. Its Rényi divergence of order alpha, RDP(alpha), follows Mironov,
 * Talwar and Zhang 2019 ("Rényi Differential Privacy of the Sampled Gaussian Mechanism"):
 * for integer orders a finite binomial sum, for fractional orders two series with erfc
 * factors, both evaluated in log space so that orders up to 256 and small sigma neither
 * overflow nor lose the small terms. RDP adds up over steps (composition), and T steps are
 * (eps, delta)-DP with eps = min over alpha of T RDP(alpha) + log(1/delta) / (alpha - 1)
 * (Mironov 2017, Proposition 3), the conversion behind TensorFlow Privacy's published
 * figures. The orders tried are 1.1, 1.2, ..., 10.9, the integers 12 to 63, 128 and 256.
 *
 * Non-goals: per-example clipping and the noise itself (that is training's business), other
 * samplers (fixed-size batches, shuffling), the tighter RDP-to-DP conversions.
 *
 * Invariants: every function is pure (no globals, no allocation) and uses only libm; an
 * accountant's per-order sums only grow.
 */
#ifndef RUMOR_PRIVACY_H
#define RUMOR_PRIVACY_H

#include "base.h"

#include <stddef.h>
#include <stdint.h>

/* 99 fractional orders 1.1..10.9, 52 integers 12..63, then 128 and 256. */
#define RUMOR_PRIVACY_ORDER_COUNT 153

/* The i-th order, ascending, for i < RUMOR_PRIVACY_ORDER_COUNT. */
double rumor_privacy_order(size_t i);

/* RDP of one step of the sampled Gaussian mechanism at order alpha > 1, for a sampling
 * rate q in (0, 1] and a noise multiplier sigma > 0. q = 1 is the plain Gaussian mechanism,
 * alpha / (2 sigma^2). INFINITY when alpha is infinite or sigma so small that the sum cannot
 * be evaluated in doubles (no bound, never a small one); NAN for arguments out of range. */
double rumor_privacy_rdp(double q, double sigma, double alpha);

/* epsilon of `steps` steps at rate q and noise sigma, for delta in (0, 1); *alpha (may be
 * NULL) is the order that gave it. *eps is INFINITY when no order gives a finite bound.
 * RUMOR_EINVAL with a sentence in err for arguments out of range. */
rumor_err_t rumor_privacy_epsilon(double q, double sigma, uint64_t steps, double delta, double *eps, double *alpha,
                             char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* The smallest noise multiplier whose epsilon after `steps` steps at rate q is at most
 * target_eps (to a relative 1e-9 in sigma: bisection, epsilon falls as sigma grows).
 * RUMOR_EINVAL when the target is out of reach: below log(1/delta) / 255, which no noise
 * reaches with these orders, or needing a noise outside [1e-3, 1e7]. */
rumor_err_t rumor_privacy_noise_for(double q, uint64_t steps, double delta, double target_eps, double *sigma,
                               char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* ---- accumulating accountant ---- */

/* The privacy spent so far by one party, step by step, where rate and noise may change
 * between steps (a node that joins late, a schedule). Caller's storage; nothing to free. */
typedef struct {
    double rdp[RUMOR_PRIVACY_ORDER_COUNT]; /* sum of the steps' RDP, one per order */
    uint64_t steps;                   /* steps counted so far */
} rumor_privacy_accountant_t;

void rumor_privacy_accountant_init(rumor_privacy_accountant_t *acc);
/* Count `count` steps at rate q and noise sigma (count 0 counts nothing). */
rumor_err_t rumor_privacy_accountant_step(rumor_privacy_accountant_t *acc, double q, double sigma, uint64_t count,
                                     char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* epsilon of the steps counted so far, as rumor_privacy_epsilon (0 before any step). */
rumor_err_t rumor_privacy_accountant_epsilon(const rumor_privacy_accountant_t *acc, double delta, double *eps, double *alpha,
                                        char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
