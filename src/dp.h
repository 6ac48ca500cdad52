/*
 * dp.h - DP-SGD's gradient: per-sample clipping and Gaussian noise (Abadi et al. 2016), and
 * the privacy it spends (src/privacy.h's accountant).
 *
 * A private step replaces the batch's mean gradient by
 *     g = (sum_i clip(g_i, C) + N(0, sigma^2 C^2 I)) / b,   clip(g, C) = g min(1, C / |g|_2),
 * g_i the gradient of sample i alone (computed by running the model on that one sample: exact
 * for every model, at the price of b small backward passes instead of one large one). The
 * accountant counts each step as one sampled Gaussian mechanism with rate q = b / n, n the
 * peer's own samples; batches are drawn by shuffling an epoch, as in TensorFlow Privacy's
 * tutorial, for which the Poisson-sampling analysis is the customary approximation.
 * What a peer gossips is then post-processing of private steps: its epsilon is what its own
 * data spent, whatever its neighbours do.
 *
 * Non-goals: user-level privacy across peers, secure aggregation (that is --secure-mix).
 */
#ifndef RUMOR_DP_H
#define RUMOR_DP_H

#include "model.h"
#include "privacy.h"
#include "rng.h"
#include "rumor.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    bool on;
    double clip;    /* C > 0 */
    double noise;   /* sigma >= 0 (0: clipping only, no privacy) */
    double delta;   /* in (0, 1) */
    double budget;  /* stop training before epsilon would pass it; 0: no budget */
} rumor_priv_config_t;

/* "clip=C,noise=S[,delta=D]" (delta 1e-5 by default; any order). EINVAL with a sentence. */
rumor_err_t rumor_priv_parse(rumor_priv_config_t *out, const char *spec, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

typedef struct rumor_priv rumor_priv_t;

/* A DP-SGD state for model m, on m's backend (CPU or a device: the per-sample loop runs there,
 * one norm per sample comes back and the noise goes up once a batch), whose peer owns n_own
 * samples; the noise draws come from seed. NULL with err. */
rumor_priv_t *rumor_priv_new(const rumor_priv_config_t *cfg, rumor_model_t *m, size_t n_own, uint64_t seed,
                         char err[RUMOR_ERR_LEN]);
void rumor_priv_destroy(rumor_priv_t **self_p);

/* The private gradient of the b samples in m's input buffer, left in m's grads (replacing
 * what was there), and one step counted. *loss_sum gets the summed loss (not private: it is
 * only logged). m's input buffer is left as it was. */
rumor_err_t rumor_priv_gradient(rumor_priv_t *dp, rumor_model_t *m, int b, double *loss_sum,
                              char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* epsilon spent so far (at the configured delta); 0 before any step. */
double rumor_priv_epsilon(const rumor_priv_t *dp);
/* Whether one more step of b samples would take epsilon past the budget (false without one). */
bool rumor_priv_over_budget(const rumor_priv_t *dp, int b);
/* Steps counted so far, and restoring them on a resume (the rate of each step is b / n_own). */
uint64_t rumor_priv_steps(const rumor_priv_t *dp);
void rumor_priv_restore(rumor_priv_t *dp, uint64_t steps, int b);

#endif
