/* dp.c - DP-SGD: per-sample clipping, Gaussian noise, and its accounting (see dp.h). */
#include "dp.h"

#include "backend.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rumor_priv {
    rumor_priv_config_t cfg;
    size_t n_own, P, feat;
    float *sum;        /* clipped per-sample gradients, summed */
    float *inputs;     /* the batch, kept while its samples take turns in slot 0 */
    uint8_t *labels;
    rumor_rng_t rng;
    rumor_dp_accountant_t acc;
};

rumor_err_t rumor_priv_parse(rumor_priv_config_t *out, const char *spec, char err[RUMOR_ERR_LEN])
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

rumor_priv_t *rumor_priv_new(const rumor_priv_config_t *cfg, rumor_model_t *m, size_t n_own, uint64_t seed,
                         char err[RUMOR_ERR_LEN])
{
    if (!rumor_model_backend(m)->ops->host_memory) {
        rumor_fail(err, RUMOR_ENOTSUP, "--dp computes per-sample gradients on the host: use --device cpu");
        return NULL;
    }
    if (n_own == 0) {
        rumor_fail(err, RUMOR_EINVAL, "--dp: this peer owns no samples");
        return NULL;
    }
    rumor_priv_t *dp = calloc(1, sizeof *dp);
    if (!dp) goto nomem;
    dp->cfg = *cfg;
    dp->n_own = n_own;
    dp->P = rumor_model_param_count(m);
    const rumor_model_input_t in = rumor_model_input(m);
    dp->feat = (size_t)in.c * (size_t)in.h * (size_t)in.w;
    const size_t B = (size_t)rumor_model_max_batch(m);
    dp->sum = malloc(dp->P * sizeof *dp->sum);
    dp->inputs = malloc(B * dp->feat * sizeof *dp->inputs);
    dp->labels = malloc(B);
    if (!dp->sum || !dp->inputs || !dp->labels) goto nomem;
    rumor_rng_init2(&dp->rng, seed, 0xd9, 0);
    rumor_dp_accountant_init(&dp->acc);
    return dp;
nomem:
    rumor_priv_destroy(&dp);
    rumor_fail(err, RUMOR_ENOMEM, "out of memory for DP-SGD");
    return NULL;
}

void rumor_priv_destroy(rumor_priv_t **self_p)
{
    rumor_priv_t *dp = *self_p;
    if (!dp) return;
    free(dp->sum);
    free(dp->inputs);
    free(dp->labels);
    free(dp);
    *self_p = NULL;
}

rumor_err_t rumor_priv_gradient(rumor_priv_t *dp, rumor_model_t *m, int b, double *loss_sum, char err[RUMOR_ERR_LEN])
{
    float *in = rumor_model_input_buf(m), *g = rumor_model_grads(m);
    uint8_t *lab = rumor_model_label_buf(m);
    const size_t P = dp->P, feat = dp->feat;
    memcpy(dp->inputs, in, (size_t)b * feat * sizeof *in);
    memcpy(dp->labels, lab, (size_t)b);
    memset(dp->sum, 0, P * sizeof *dp->sum);
    rumor_err_t rc = RUMOR_OK;
    for (int i = 0; i < b && rc == RUMOR_OK; i++) {
        memcpy(in, dp->inputs + (size_t)i * feat, feat * sizeof *in);
        lab[0] = dp->labels[i];
        rumor_model_zero_grads(m);
        if ((rc = rumor_model_run(m, 1, true, loss_sum, NULL, err)) != RUMOR_OK) break;
        double n2 = 0.0;
        for (size_t k = 0; k < P; k++) n2 += (double)g[k] * (double)g[k];
        const double norm = sqrt(n2);
        const float f = norm > dp->cfg.clip ? (float)(dp->cfg.clip / norm) : 1.0f;
        float *restrict s = dp->sum;
#pragma omp simd
        for (size_t k = 0; k < P; k++) s[k] += f * g[k];
    }
    /* The batch back where the caller left it. */
    memcpy(in, dp->inputs, (size_t)b * feat * sizeof *in);
    memcpy(lab, dp->labels, (size_t)b);
    if (rc != RUMOR_OK) return rc;
    const double sd = dp->cfg.noise * dp->cfg.clip;
    const float inv = 1.0f / (float)b;
    for (size_t k = 0; k < P; k++) g[k] = (float)((double)dp->sum[k] + (sd > 0.0 ? sd * rumor_rng_normal(&dp->rng) : 0.0)) * inv;
    if (dp->cfg.noise > 0.0) {
        const double q = (double)b / (double)dp->n_own;
        if ((rc = rumor_dp_accountant_step(&dp->acc, q < 1.0 ? q : 1.0, dp->cfg.noise, 1, err)) != RUMOR_OK) return rc;
    } else {
        dp->acc.steps++;
    }
    return RUMOR_OK;
}

double rumor_priv_epsilon(const rumor_priv_t *dp)
{
    if (dp->cfg.noise <= 0.0) return dp->acc.steps ? INFINITY : 0.0;
    double eps = 0.0;
    if (rumor_dp_accountant_epsilon(&dp->acc, dp->cfg.delta, &eps, NULL, NULL) != RUMOR_OK) return INFINITY;
    return eps;
}

bool rumor_priv_over_budget(const rumor_priv_t *dp, int b)
{
    if (!(dp->cfg.budget > 0.0)) return false;
    if (dp->cfg.noise <= 0.0) return true;
    rumor_dp_accountant_t next = dp->acc;
    const double q = (double)b / (double)dp->n_own;
    double eps = 0.0;
    if (rumor_dp_accountant_step(&next, q < 1.0 ? q : 1.0, dp->cfg.noise, 1, NULL) != RUMOR_OK ||
        rumor_dp_accountant_epsilon(&next, dp->cfg.delta, &eps, NULL, NULL) != RUMOR_OK)
        return true;
    return eps > dp->cfg.budget;
}

uint64_t rumor_priv_steps(const rumor_priv_t *dp) { return dp->acc.steps; }

void rumor_priv_restore(rumor_priv_t *dp, uint64_t steps, int b)
{
    rumor_dp_accountant_init(&dp->acc);
    if (steps == 0) return;
    if (dp->cfg.noise > 0.0) {
        const double q = (double)b / (double)dp->n_own;
        if (rumor_dp_accountant_step(&dp->acc, q < 1.0 ? q : 1.0, dp->cfg.noise, steps, NULL) != RUMOR_OK)
            dp->acc.steps = steps; /* cannot happen: the arguments were checked when parsed */
    } else {
        dp->acc.steps = steps;
    }
}
