/* dp.c - DP-SGD: per-sample clipping, Gaussian noise, and its accounting (see dp.h). */
#include "dp.h"

#include "backend.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Buffers marked (backend) are backend memory: on a GPU the per-sample loop stays on the
 * device, and only one norm per sample and the noise cross to and from the host. */
struct rumor_priv {
    rumor_priv_config_t cfg;
    rumor_backend_t *be;
    size_t n_own, P, feat;
    float *sum;        /* (backend) clipped per-sample gradients, summed */
    float *inputs;     /* (backend) the batch, kept while its samples take turns in slot 0 */
    uint8_t *labels;   /* (backend) */
    float *noise;      /* (backend) the batch's Gaussian noise */
    float *host_noise; /* drawn here, then uploaded (NULL when backend memory is the host's) */
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
    if (n_own == 0) {
        rumor_fail(err, RUMOR_EINVAL, "--dp: this peer owns no samples");
        return NULL;
    }
    rumor_priv_t *dp = calloc(1, sizeof *dp);
    if (!dp) goto nomem;
    dp->cfg = *cfg;
    dp->be = rumor_model_backend(m);
    dp->n_own = n_own;
    dp->P = rumor_model_param_count(m);
    const rumor_model_input_t in = rumor_model_input(m);
    dp->feat = (size_t)in.c * (size_t)in.h * (size_t)in.w;
    const size_t B = (size_t)rumor_model_max_batch(m);
    rumor_backend_t *be = dp->be;
    dp->sum = be->ops->alloc(be, dp->P * sizeof *dp->sum);
    dp->inputs = be->ops->alloc(be, B * dp->feat * sizeof *dp->inputs);
    dp->labels = be->ops->alloc(be, B);
    dp->noise = be->ops->alloc(be, dp->P * sizeof *dp->noise);
    if (!be->ops->host_memory) dp->host_noise = malloc(dp->P * sizeof *dp->host_noise);
    if (!dp->sum || !dp->inputs || !dp->labels || !dp->noise || (!be->ops->host_memory && !dp->host_noise)) goto nomem;
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
    rumor_backend_t *be = dp->be;
    if (be) {
        be->ops->free(be, dp->sum);
        be->ops->free(be, dp->inputs);
        be->ops->free(be, dp->labels);
        be->ops->free(be, dp->noise);
    }
    free(dp->host_noise);
    free(dp);
    *self_p = NULL;
}

rumor_err_t rumor_priv_gradient(rumor_priv_t *dp, rumor_model_t *m, int b, double *loss_sum, char err[RUMOR_ERR_LEN])
{
    rumor_backend_t *be = dp->be;
    const struct rumor_backend_ops *o = be->ops;
    float *in = rumor_model_input_buf(m), *g = rumor_model_grads(m);
    uint8_t *lab = rumor_model_label_buf(m);
    const size_t P = dp->P, feat = dp->feat;
    o->copy(be, dp->inputs, in, (size_t)b * feat * sizeof *in);
    o->copy(be, dp->labels, lab, (size_t)b);
    o->zero(be, dp->sum, P * sizeof *dp->sum);
    rumor_err_t rc = RUMOR_OK;
    for (int i = 0; i < b && rc == RUMOR_OK; i++) {
        o->copy(be, in, dp->inputs + (size_t)i * feat, feat * sizeof *in);
        o->copy(be, lab, dp->labels + i, 1);
        rumor_model_zero_grads(m);
        if ((rc = rumor_model_run(m, 1, true, loss_sum, NULL, err)) != RUMOR_OK) break;
        double n2 = 0.0;
        o->sumsq(be, &n2, g, P); /* the one value per sample that comes back to the host */
        const double norm = sqrt(n2);
        const float f = norm > dp->cfg.clip ? (float)(dp->cfg.clip / norm) : 1.0f;
        o->axpy(be, dp->sum, g, f, P);
    }
    /* The batch back where the caller left it. */
    o->copy(be, in, dp->inputs, (size_t)b * feat * sizeof *in);
    o->copy(be, lab, dp->labels, (size_t)b);
    if (rc != RUMOR_OK) return rc;
    /* g = (sum + N(0, (noise clip)^2)) / b */
    const double sd = dp->cfg.noise * dp->cfg.clip;
    o->copy(be, g, dp->sum, P * sizeof *g);
    if (sd > 0.0) {
        float *h = o->host_memory ? dp->noise : dp->host_noise;
        for (size_t k = 0; k < P; k++) h[k] = (float)(sd * rumor_rng_normal(&dp->rng));
        if (!o->host_memory) o->upload(be, dp->noise, h, P * sizeof *h);
        o->axpy(be, g, dp->noise, 1.0f, P);
    }
    o->scale(be, g, 1.0f / (float)b, P);
    if ((rc = o->sync(be, err)) != RUMOR_OK) return rc;
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
