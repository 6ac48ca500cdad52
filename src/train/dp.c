/* dp.c - DP-SGD: per-sample clipping, Gaussian noise, and its accounting (see dp.h). */
#include "dp.h"

#include "backend.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Buffers marked (backend) are backend memory: on a GPU the per-sample loop stays on the
 * device, and only one norm per sample and the noise cross to and from the host. */
struct rumor_priv {
    rumor_dp_config_t cfg;
    rumor_backend_t *be;
    size_t n_own, P, max_batch;
    double q;              /* sampling rate, min(1, batch / n_own) */
    uint64_t threshold;    /* a sample is drawn when a random word is below it (q < 1) */
    float *sum;        /* (backend) clipped per-sample gradients, summed */
    uint8_t *inputs;   /* (backend) the slice, kept while its samples take turns in slot 0 */
    int32_t *labels;   /* (backend) */
    float *noise;      /* (backend) the step's Gaussian noise */
    float *host_noise; /* drawn here, then uploaded (NULL when backend memory is the host's) */
    rumor_noise_t *ns; /* batches and noise */
    rumor_privacy_accountant_t acc;
    rumor_dp_reserve_cb reserve; /* (NULL: nothing to reserve, a simulation's) */
    void *reserve_arg;
    uint64_t reserved;
    /* The step's noise is drawn on a thread of its own while the per-sample gradients run
     * (begin starts it, finish waits for it): on a machine with a core to spare it costs the
     * step nothing. Nothing else draws from ns meanwhile (the batch was sampled before). */
    pthread_t drawer;
    bool drawing;      /* the thread is running */
    bool drawn;        /* this step's noise is in draw_to (or being drawn there) */
    float *draw_to;    /* noise, or host_noise */
    double draw_sd;
};

static void *draw_noise(void *arg)
{
    rumor_dp_t *dp = arg;
    rumor_noise_gaussian(dp->ns, dp->draw_to, dp->P, dp->draw_sd);
    return NULL;
}

/* The step's noise, drawn: waits for the thread begin started, or draws it now. */
static void noise_drawn(rumor_dp_t *dp)
{
    if (dp->drawing) {
        pthread_join(dp->drawer, NULL);
        dp->drawing = false;
    }
}

rumor_err_t rumor_dp_parse(rumor_dp_config_t *out, const char *spec, char err[RUMOR_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    out->delta = 1e-5;
    bool clip = false, noise = false;
    char buf[256];
    if (!spec || strlen(spec) >= sizeof buf) return rumor_fail(err, RUMOR_EINVAL, "--dp: expected clip=C,noise=S[,delta=D]");
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '='), *end;
        if (!eq) return rumor_fail(err, RUMOR_EINVAL, "--dp %s: '%s' is not key=value", spec, tok);
        *eq = 0;
        errno = 0;
        const double v = strtod(eq + 1, &end);
        if (end == eq + 1 || *end || errno || !isfinite(v))
            return rumor_fail(err, RUMOR_EINVAL, "--dp %s: %s needs a number", spec, tok);
        if (strcmp(tok, "clip") == 0 && v > 0.0 && v <= 1e6) out->clip = v, clip = true;
        else if (strcmp(tok, "noise") == 0 && v >= 0.0 && v <= 1e6) out->noise = v, noise = true;
        else if (strcmp(tok, "delta") == 0 && v > 0.0 && v < 1.0) out->delta = v;
        else
            return rumor_fail(err, RUMOR_EINVAL, "--dp %s: %s=%g is not clip > 0, noise >= 0 or 0 < delta < 1", spec,
                              tok, v);
    }
    if (!clip || !noise) return rumor_fail(err, RUMOR_EINVAL, "--dp %s: needs both clip=C and noise=S", spec);
    out->on = true;
    return RUMOR_OK;
}

rumor_dp_t *rumor_dp_new(const rumor_dp_config_t *cfg, rumor_model_t *m, size_t n_own, int batch,
                             rumor_noise_t **noise, char err[RUMOR_ERR_LEN])
{
    rumor_dp_t *dp = NULL;
    if (n_own == 0 || batch < 1) {
        rumor_fail(err, RUMOR_EINVAL, n_own ? "--dp: batch %d is below 1" : "--dp: this peer owns no samples", batch);
        rumor_noise_destroy(noise);
        return NULL;
    }
    if (!(dp = calloc(1, sizeof *dp))) goto nomem;
    dp->ns = *noise;
    *noise = NULL;
    dp->cfg = *cfg;
    dp->be = rumor_model_backend(m);
    dp->n_own = n_own;
    dp->q = (size_t)batch >= n_own ? 1.0 : (double)batch / (double)n_own;
    /* P(word < threshold) = threshold / 2^64, within 2^-64 of q (q < 1 here). */
    dp->threshold = dp->q < 1.0 ? (uint64_t)ldexp(dp->q, 64) : UINT64_MAX;
    dp->P = rumor_model_param_count(m);
    size_t xb, yn; /* a sample's input bytes and labels */
    (void)rumor_model_sample_buf(m, &xb, &yn);
    dp->max_batch = (size_t)rumor_model_max_batch(m);
    const size_t B = dp->max_batch;
    rumor_backend_t *be = dp->be;
    dp->sum = be->ops->alloc(be, dp->P * sizeof *dp->sum);
    dp->inputs = be->ops->alloc(be, B * xb);
    dp->labels = be->ops->alloc(be, B * yn * sizeof *dp->labels);
    dp->noise = be->ops->alloc(be, dp->P * sizeof *dp->noise);
    if (!be->ops->host_memory) dp->host_noise = malloc(dp->P * sizeof *dp->host_noise);
    if (!dp->ns || !dp->sum || !dp->inputs || !dp->labels || !dp->noise || (!be->ops->host_memory && !dp->host_noise))
        goto nomem;
    dp->draw_to = be->ops->host_memory ? dp->noise : dp->host_noise;
    dp->draw_sd = cfg->noise * cfg->clip;
    rumor_privacy_accountant_init(&dp->acc);
    return dp;
nomem:
    rumor_noise_destroy(noise);
    rumor_dp_destroy(&dp);
    rumor_fail(err, RUMOR_ENOMEM, "out of memory for DP-SGD");
    return NULL;
}

void rumor_dp_destroy(rumor_dp_t **self_p)
{
    rumor_dp_t *dp = *self_p;
    if (!dp) return;
    noise_drawn(dp); /* (a step that failed half-way) */
    rumor_backend_t *be = dp->be;
    if (be) {
        be->ops->free(be, dp->sum);
        be->ops->free(be, dp->inputs);
        be->ops->free(be, dp->labels);
        be->ops->free(be, dp->noise);
    }
    free(dp->host_noise);
    rumor_noise_destroy(&dp->ns);
    free(dp);
    *self_p = NULL;
}

size_t rumor_dp_sample(rumor_dp_t *dp, size_t *idx)
{
    size_t n = 0;
    if (dp->q >= 1.0) {
        for (size_t i = 0; i < dp->n_own; i++) idx[n++] = i;
        return n;
    }
    /* One word per sample, whatever is drawn: the work does not depend on the batch. */
    for (size_t i = 0; i < dp->n_own; i++) {
        const bool in = rumor_noise_u64(dp->ns) < dp->threshold;
        idx[n] = i;
        n += in;
    }
    return n;
}

void rumor_dp_begin(rumor_dp_t *dp)
{
    noise_drawn(dp); /* (a step begun again after one that failed) */
    dp->be->ops->zero(dp->be, dp->sum, dp->P * sizeof *dp->sum);
    if (dp->draw_sd > 0.0) dp->drawing = dp->drawn = pthread_create(&dp->drawer, NULL, draw_noise, dp) == 0;
}

rumor_err_t rumor_dp_accumulate(rumor_dp_t *dp, rumor_model_t *m, int b, double *loss_sum,
                                  char err[RUMOR_ERR_LEN])
{
    if (b < 0 || (size_t)b > dp->max_batch)
        return rumor_fail(err, RUMOR_EINVAL, "DP-SGD slice of %d samples: at most %zu at a time", b, dp->max_batch);
    rumor_backend_t *be = dp->be;
    const struct rumor_backend_ops *o = be->ops;
    size_t xb, yn;
    uint8_t *in = rumor_model_sample_buf(m, &xb, &yn);
    float *g = rumor_model_grads(m);
    int32_t *lab = rumor_model_label_buf(m);
    const size_t P = dp->P, lb = yn * sizeof *lab;
    o->copy(be, dp->inputs, in, (size_t)b * xb);
    o->copy(be, dp->labels, lab, (size_t)b * lb);
    rumor_err_t rc = RUMOR_OK;
    for (int i = 0; i < b && rc == RUMOR_OK; i++) {
        o->copy(be, in, dp->inputs + (size_t)i * xb, xb);
        o->copy(be, lab, dp->labels + (size_t)i * yn, lb);
        rumor_model_zero_grads(m);
        if ((rc = rumor_model_run(m, 1, true, loss_sum, NULL, err)) != RUMOR_OK) break;
        double n2 = 0.0;
        o->sumsq(be, &n2, g, P); /* the one value per sample that comes back to the host */
        const double norm = sqrt(n2);
        const float f = norm > dp->cfg.clip ? (float)(dp->cfg.clip / norm) : 1.0f;
        o->axpy(be, dp->sum, g, f, P);
    }
    /* The slice back where the caller left it. */
    o->copy(be, in, dp->inputs, (size_t)b * xb);
    o->copy(be, lab, dp->labels, (size_t)b * lb);
    return rc;
}

rumor_err_t rumor_dp_finish(rumor_dp_t *dp, rumor_model_t *m, char err[RUMOR_ERR_LEN])
{
    rumor_backend_t *be = dp->be;
    const struct rumor_backend_ops *o = be->ops;
    float *g = rumor_model_grads(m);
    const size_t P = dp->P;
    /* g = (sum + N(0, (noise clip)^2)) / (q n) */
    const double sd = dp->draw_sd;
    o->copy(be, g, dp->sum, P * sizeof *g);
    noise_drawn(dp);
    if (sd > 0.0) {
        if (!dp->drawn) draw_noise(dp); /* no thread to be had (or no begin): here */
        dp->drawn = false;
        const float *h = dp->draw_to;
        if (!o->host_memory) o->upload(be, dp->noise, h, P * sizeof *h);
        o->axpy(be, g, dp->noise, 1.0f, P);
    }
    o->scale(be, g, (float)(1.0 / (dp->q * (double)dp->n_own)), P);
    rumor_err_t rc = o->sync(be, err);
    if (rc == RUMOR_OK && dp->cfg.noise > 0.0) rc = rumor_privacy_accountant_step(&dp->acc, dp->q, dp->cfg.noise, 1, err);
    else if (rc == RUMOR_OK) dp->acc.steps++;
    /* The noise is not kept: a later look at this memory must not give it away. */
    if (sd > 0.0) {
        o->zero(be, dp->noise, P * sizeof *dp->noise);
        if (!o->host_memory) memset(dp->host_noise, 0, P * sizeof *dp->host_noise);
    }
    return rc;
}

#define DP_RESERVE 64 /* steps reserved at a time: one durable write per 64 private steps */

/* epsilon after `steps` steps in all (steps >= those taken). */
static double epsilon_at(const rumor_dp_t *dp, uint64_t steps)
{
    rumor_privacy_accountant_t a = dp->acc;
    double eps = INFINITY;
    if (steps > a.steps && rumor_privacy_accountant_step(&a, dp->q, dp->cfg.noise, steps - a.steps, NULL) != RUMOR_OK)
        return INFINITY;
    if (rumor_privacy_accountant_epsilon(&a, dp->cfg.delta, &eps, NULL, NULL) != RUMOR_OK) return INFINITY;
    return eps;
}

/* The next step reserved before it is taken (rumor_dp_set_reserve). */
static rumor_err_t reserve_next(rumor_dp_t *dp, char err[RUMOR_ERR_LEN])
{
    if (!dp->reserve || dp->acc.steps < dp->reserved) return RUMOR_OK;
    uint64_t upto = dp->acc.steps + DP_RESERVE;
    /* Never reserved past the budget: a restart would count steps it may not take as taken. */
    if (dp->cfg.budget > 0.0 && dp->cfg.noise > 0.0)
        while (upto > dp->acc.steps + 1 && epsilon_at(dp, upto) > dp->cfg.budget)
            upto = dp->acc.steps + (upto - dp->acc.steps) / 2;
    if (!dp->reserve(dp->reserve_arg, upto))
        return rumor_fail(err, RUMOR_EIO, "the private steps to come could not be reserved on disk (the log says why): "
                          "no private step is taken without");
    dp->reserved = upto;
    return RUMOR_OK;
}

bool rumor_dp_set_reserve(rumor_dp_t *dp, rumor_dp_reserve_cb reserve, void *arg, uint64_t reserved)
{
    dp->reserve = reserve;
    dp->reserve_arg = arg;
    dp->reserved = reserved;
    if (reserved <= dp->acc.steps) return false;
    rumor_dp_restore(dp, reserved);
    return true;
}

rumor_err_t rumor_dp_gradient(rumor_dp_t *dp, rumor_model_t *m, int b, double *loss_sum, char err[RUMOR_ERR_LEN])
{
    const rumor_err_t r = reserve_next(dp, err);
    if (r != RUMOR_OK) return r;
    rumor_dp_begin(dp);
    rumor_err_t rc = rumor_dp_accumulate(dp, m, b, loss_sum, err);
    return rc == RUMOR_OK ? rumor_dp_finish(dp, m, err) : rc;
}

rumor_err_t rumor_dp_step(rumor_dp_t *dp, rumor_model_t *m, size_t *idx, rumor_dp_load_cb load, void *arg,
                            size_t *bn, double *loss_sum, char err[RUMOR_ERR_LEN])
{
    *bn = 0;
    const rumor_err_t r = reserve_next(dp, err);
    if (r != RUMOR_OK) return r;
    const size_t n = rumor_dp_sample(dp, idx), slice = (size_t)rumor_model_max_batch(m);
    *bn = n;
    rumor_dp_begin(dp);
    for (size_t at = 0; at < n; at += slice) {
        const size_t k = n - at < slice ? n - at : slice;
        load(arg, idx + at, k);
        rumor_err_t rc = rumor_dp_accumulate(dp, m, (int)k, loss_sum, err);
        if (rc != RUMOR_OK) return rc;
    }
    return rumor_dp_finish(dp, m, err);
}

double rumor_dp_rate(const rumor_dp_t *dp) { return dp->q; }

bool rumor_dp_is_seeded(const rumor_dp_t *dp) { return rumor_noise_is_seeded(dp->ns); }

double rumor_dp_epsilon(const rumor_dp_t *dp)
{
    if (dp->cfg.noise <= 0.0) return dp->acc.steps ? INFINITY : 0.0;
    double eps = 0.0;
    if (rumor_privacy_accountant_epsilon(&dp->acc, dp->cfg.delta, &eps, NULL, NULL) != RUMOR_OK) return INFINITY;
    return eps;
}

bool rumor_dp_over_budget(const rumor_dp_t *dp)
{
    if (!(dp->cfg.budget > 0.0)) return false;
    if (dp->cfg.noise <= 0.0) return true;
    rumor_privacy_accountant_t next = dp->acc;
    double eps = 0.0;
    if (rumor_privacy_accountant_step(&next, dp->q, dp->cfg.noise, 1, NULL) != RUMOR_OK ||
        rumor_privacy_accountant_epsilon(&next, dp->cfg.delta, &eps, NULL, NULL) != RUMOR_OK)
        return true;
    return eps > dp->cfg.budget;
}

uint64_t rumor_dp_steps(const rumor_dp_t *dp) { return dp->acc.steps; }

void rumor_dp_restore(rumor_dp_t *dp, uint64_t steps)
{
    rumor_privacy_accountant_init(&dp->acc);
    if (steps == 0) return;
    if (dp->cfg.noise > 0.0) {
        if (rumor_privacy_accountant_step(&dp->acc, dp->q, dp->cfg.noise, steps, NULL) != RUMOR_OK)
            dp->acc.steps = steps; /* cannot happen: the arguments were checked when parsed */
    } else {
        dp->acc.steps = steps;
    }
}
