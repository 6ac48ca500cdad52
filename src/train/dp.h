/*
 * dp.h - DP-SGD's gradient: per-sample clipping and Gaussian noise (Abadi et al. 2016), the
 * batches it is computed on, and the privacy it spends (src/train/privacy.h's accountant).
 *
 * A private step draws its batch by Poisson sampling: each of the peer's n own samples is in
 * it independently with probability q = min(1, B / n), B the configured batch size, so the
 * batch size is Binomial(n, q) and may be 0 (as Opacus does). It then replaces the batch's
 * mean gradient by
 *     g = (sum_i clip(g_i, C) + N(0, sigma^2 C^2 I)) / (q n),   clip(g, C) = g min(1, C / |g|_2),
 * g_i the gradient of sample i alone (computed by running the model on that one sample: exact
 * for every model, at the price of one small backward pass per sample). A language model's
 * samples are its shard's training windows of T+1 tokens, g_i the gradient of window i's mean
 * next-token loss; windows overlap, so what is protected is a window, not a document. Dividing by the
 * expected batch size q n rather than the drawn one keeps the divisor public; an empty batch
 * is a step of noise alone. The accountant counts each step as one sampled Gaussian mechanism
 * at rate q, which is exactly what was done: its analysis (Mironov, Talwar and Zhang 2019)
 * needs the batch to be Poisson-sampled and secret, so membership is drawn from the same
 * noise source as the noise.
 * What a peer gossips is then post-processing of private steps: its epsilon is what its own
 * data spent, whatever its neighbours do.
 *
 * The noise source (crypto.h's rumor_noise_t) is chosen by whoever creates the DP state: a
 * real node passes a secret one (libsodium; nothing reproduces it, a resumed node draws fresh
 * noise), the virtual-time simulator a seeded one so that a simulation replays exactly (and
 * then protects nothing, which its summary says).
 *
 * A step's noise is drawn on a thread of its own from begin to finish, beside the per-sample
 * gradients (the batch was sampled before, and nothing else draws from the source meanwhile, so
 * a seeded stream is used in the same order): where a core is free it adds almost nothing to
 * the step (`rumor bench dp`).
 *
 * A batch larger than the model's max batch is fed in slices (rumor_dp_accumulate): the
 * batch size has no cap, so nothing beyond q needs accounting, and a device stages each slice
 * through its usual max-batch buffers.
 *
 * Non-goals: user-level privacy across peers, secure aggregation (that is --secure-mix).
 */
#ifndef RUMOR_DP_H
#define RUMOR_DP_H

#include "crypto.h"
#include "model.h"
#include "privacy.h"
#include "base.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    bool on;
    double clip;    /* C > 0 */
    double noise;   /* sigma >= 0 (0: clipping only, no privacy) */
    double delta;   /* in (0, 1) */
    double budget;  /* stop training before epsilon would pass it; 0: no budget */
} rumor_dp_config_t;

/* "clip=C,noise=S[,delta=D]" (delta 1e-5 by default; any order). EINVAL with a sentence. */
rumor_err_t rumor_dp_parse(rumor_dp_config_t *out, const char *spec, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

typedef struct rumor_priv rumor_dp_t;

/* A DP-SGD state for model m, on m's backend (CPU or a device: the per-sample loop runs there,
 * one norm per sample comes back and the noise goes up once a step), whose peer owns n_own
 * samples and samples batches of batch samples on average. It takes *noise (the source of its
 * batches and its noise; *noise is cleared), also on failure. NULL with err. */
rumor_dp_t *rumor_dp_new(const rumor_dp_config_t *cfg, rumor_model_t *m, size_t n_own, int batch,
                             rumor_noise_t **noise, char err[RUMOR_ERR_LEN]);
void rumor_dp_destroy(rumor_dp_t **self_p);

/* The next step's batch by Poisson sampling: the positions (ascending, below n_own) of the
 * samples drawn, in idx (room for n_own), and their count, 0 included. */
size_t rumor_dp_sample(rumor_dp_t *dp, size_t *idx);

/* One private step, in three calls: begin; accumulate for each slice of the batch put in m's
 * input buffer (b samples, at most m's max batch; m's input buffer is left as it was,
 * *loss_sum gets the slice's summed loss added, which is not private: it is only logged);
 * finish, which leaves the private gradient in m's grads (replacing what was there) and
 * counts one step. A batch of 0 samples is begin then finish. */
void rumor_dp_begin(rumor_dp_t *dp);
rumor_err_t rumor_dp_accumulate(rumor_dp_t *dp, rumor_model_t *m, int b, double *loss_sum,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
rumor_err_t rumor_dp_finish(rumor_dp_t *dp, rumor_model_t *m, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* A whole step as a driver takes it: sample the batch (positions into idx, room for n_own; the
 * count in *bn), then begin, accumulate slice by slice of at most m's max batch (the staging
 * buffers' size, so a large draw needs no cap), each slice first put in m's input buffer by
 * load(arg, idx + at, k) (which may rewrite those k entries, e.g. positions into sample
 * indices), and finish. */
typedef void (*rumor_dp_load_cb)(void *arg, size_t *idx, size_t k);
rumor_err_t rumor_dp_step(rumor_dp_t *dp, rumor_model_t *m, size_t *idx, rumor_dp_load_cb load, void *arg,
                            size_t *bn, double *loss_sum, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The three for a batch of b samples already in m's input buffer. */
rumor_err_t rumor_dp_gradient(rumor_dp_t *dp, rumor_model_t *m, int b, double *loss_sum,
                                char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* The sampling rate q = min(1, batch / n_own) of every step. */
double rumor_dp_rate(const rumor_dp_t *dp);
/* Whether the noise is seeded (a simulation's: it protects nothing). */
bool rumor_dp_is_seeded(const rumor_dp_t *dp);
/* epsilon spent so far (at the configured delta); 0 before any step. */
double rumor_dp_epsilon(const rumor_dp_t *dp);
/* Whether one more step would take epsilon past the budget (false without one). */
bool rumor_dp_over_budget(const rumor_dp_t *dp);
/* Steps counted so far, and restoring them on a resume (every step at rate q). */
uint64_t rumor_dp_steps(const rumor_dp_t *dp);
void rumor_dp_restore(rumor_dp_t *dp, uint64_t steps);

/* Privacy reserved before it is spent: a step past `reserved` first has reserve(arg, upto)
 * make durable that up to `upto` steps may have been taken (upto: a few dozen steps on, never
 * past --dp-budget); when it cannot, the step fails (RUMOR_EIO) and nothing is spent.
 * `reserved` is what an earlier life reserved: the count starts there if that is more than
 * it holds (a crash after the last checkpoint forgets none of the steps it took). True when
 * that raised the count. */
typedef bool (*rumor_dp_reserve_cb)(void *arg, uint64_t upto);
bool rumor_dp_set_reserve(rumor_dp_t *dp, rumor_dp_reserve_cb reserve, void *arg, uint64_t reserved);

#endif
