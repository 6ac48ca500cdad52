/* test_dp.c - DP-SGD's gradient against a closed form (logistic regression, per-sample
 * gradients by hand), clipping at the boundary, the noise's scale measured, the accounting. */
#include "backend.h"
#include "check.h"
#include "dp.h"
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FEAT 4
#define CLASSES 10
#define B 6

static void test_parse(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_priv_config_t c;
    CHECK_RC(rumor_priv_parse(&c, "clip=1.0,noise=1.1,delta=1e-5", err));
    CHECK(c.on && c.clip == 1.0 && c.noise == 1.1 && c.delta == 1e-5);
    CHECK_RC(rumor_priv_parse(&c, "noise=0.5,clip=2", err));
    CHECK(c.clip == 2.0 && c.noise == 0.5 && c.delta == 1e-5);
    const char *bad[] = {"clip=1", "noise=1", "clip=0,noise=1", "clip=1,noise=-1", "clip=1,noise=1,delta=1",
                         "clip=1,noise=x", "clip=1,noise=1,frob=2", "clip", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK(rumor_priv_parse(&c, bad[i], err) == RUMOR_EINVAL);
}

/* Logistic regression's per-sample gradient of the cross-entropy: dW[k][j] = x_j (p_k - y_k),
 * db[k] = p_k - y_k, p = softmax(W x + b). */
static void per_sample(const rumor_tensor_info_t *W, const rumor_tensor_info_t *bias, const float *params,
                       const float *x, int y, double *g, size_t P)
{
    double z[CLASSES], mx = -1e300, s = 0.0;
    for (int k = 0; k < CLASSES; k++) {
        z[k] = params[bias->offset + (size_t)k];
        for (int j = 0; j < FEAT; j++) z[k] += (double)params[W->offset + (size_t)k * FEAT + (size_t)j] * x[j];
        if (z[k] > mx) mx = z[k];
    }
    for (int k = 0; k < CLASSES; k++) s += exp(z[k] - mx);
    memset(g, 0, P * sizeof *g);
    for (int k = 0; k < CLASSES; k++) {
        const double d = exp(z[k] - mx) / s - (k == y ? 1.0 : 0.0);
        g[bias->offset + (size_t)k] = d;
        for (int j = 0; j < FEAT; j++) g[W->offset + (size_t)k * FEAT + (size_t)j] = d * x[j];
    }
}

static void test_closed_form(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_backend_t *be = rumor_backend_new("cpu", 1, err);
    rumor_model_spec_t spec;
    CHECK_RC(rumor_model_spec_parse(&spec, "logreg", err));
    const rumor_model_input_t in = {1, 2, 2, CLASSES};
    rumor_model_t *m = rumor_model_new(&spec, in, be, B, err);
    CHECK(m != NULL);
    if (!m) return;
    CHECK_RC(rumor_model_init(m, 3));
    const rumor_tensor_info_t *W = NULL, *bias = NULL;
    for (int i = 0; i < rumor_model_tensor_count(m); i++) {
        const rumor_tensor_info_t *t = rumor_model_tensor(m, i);
        if (t->ndim == 2) W = t;
        else bias = t;
    }
    CHECK(W && bias && W->shape[0] == CLASSES && W->shape[1] == FEAT);
    if (!W || !bias) return;
    const size_t P = rumor_model_param_count(m);
    float *params = rumor_model_params(m);
    for (size_t k = 0; k < P; k++) params[k] = (float)(0.1 * sin((double)k));
    /* Sample 2 is scaled up so that its gradient is clipped; the others are not. */
    float x[B][FEAT];
    uint8_t y[B];
    for (int i = 0; i < B; i++) {
        for (int j = 0; j < FEAT; j++) x[i][j] = (float)(0.5 * cos(i * 3.0 + j)) * (i == 2 ? 40.0f : 1.0f);
        y[i] = (uint8_t)((i * 7) % CLASSES);
    }
    const double C = 1.5;
    double *gi = malloc(P * sizeof *gi), *want = calloc(P, sizeof *want);
    int clipped = 0;
    for (int i = 0; i < B; i++) {
        per_sample(W, bias, params, x[i], y[i], gi, P);
        double n2 = 0.0;
        for (size_t k = 0; k < P; k++) n2 += gi[k] * gi[k];
        const double f = sqrt(n2) > C ? C / sqrt(n2) : 1.0;
        clipped += f < 1.0;
        for (size_t k = 0; k < P; k++) want[k] += f * gi[k] / B;
    }
    CHECK(clipped == 1);
    rumor_priv_config_t cfg;
    CHECK_RC(rumor_priv_parse(&cfg, "clip=1.5,noise=0", err));
    rumor_priv_t *dp = rumor_priv_new(&cfg, m, 600, 9, err);
    CHECK(dp != NULL);
    float *inb = rumor_model_input_buf(m);
    uint8_t *lab = rumor_model_label_buf(m);
    memcpy(inb, x, sizeof x);
    memcpy(lab, y, sizeof y);
    double loss = 0.0;
    CHECK_RC(rumor_priv_gradient(dp, m, B, &loss, err));
    const float *g = rumor_model_grads(m);
    double maxerr = 0.0;
    for (size_t k = 0; k < P; k++) maxerr = fmax(maxerr, fabs(g[k] - want[k]));
    CHECK_MSG(maxerr < 1e-5, "DP gradient against the closed form: max error %g", maxerr);
    CHECK(memcmp(inb, x, sizeof x) == 0 && memcmp(lab, y, sizeof y) == 0); /* the batch is left as it was */
    CHECK(loss > 0.0 && isfinite(loss));
    CHECK(rumor_priv_steps(dp) == 1 && isinf(rumor_priv_epsilon(dp))); /* no noise: no privacy */

    /* The noise: g(noise) - g(no noise) is N(0, (sigma C / b)^2) in every coordinate. */
    rumor_priv_destroy(&dp);
    CHECK_RC(rumor_priv_parse(&cfg, "clip=1.5,noise=2.0,delta=1e-5", err));
    dp = rumor_priv_new(&cfg, m, 600, 9, err);
    double s1 = 0.0, s2 = 0.0;
    long cnt = 0;
    for (int rep = 0; rep < 40; rep++) {
        CHECK_RC(rumor_priv_gradient(dp, m, B, &loss, err));
        for (size_t k = 0; k < P; k++) {
            if (k >= W->offset + W->count && (k < bias->offset || k >= bias->offset + bias->count)) continue;
            const double d = (double)g[k] - want[k];
            s1 += d, s2 += d * d, cnt++;
        }
    }
    const double mean = s1 / (double)cnt, sd = sqrt(s2 / (double)cnt - mean * mean), want_sd = 2.0 * 1.5 / B;
    CHECK_MSG(fabs(mean) < 3.0 * want_sd / sqrt((double)cnt), "noise mean %g", mean);
    CHECK_MSG(fabs(sd / want_sd - 1.0) < 0.06, "noise sd %g against %g (%ld draws)", sd, want_sd, cnt);
    /* Accounting: 40 steps at q = 6/600, sigma 2, as the accountant computes it directly. */
    double eps = 0.0;
    CHECK_RC(rumor_dp_epsilon(6.0 / 600.0, 2.0, 40, 1e-5, &eps, NULL, err));
    CHECK(rumor_priv_steps(dp) == 40);
    CHECK_NEAR(rumor_priv_epsilon(dp), eps, 1e-9);
    rumor_priv_restore(dp, 40, B);
    CHECK_NEAR(rumor_priv_epsilon(dp), eps, 1e-9);
    /* A budget: the step that would pass it is refused, the one below is not. */
    rumor_priv_destroy(&dp);
    cfg.budget = eps;
    dp = rumor_priv_new(&cfg, m, 600, 9, err);
    rumor_priv_restore(dp, 39, B);
    CHECK(!rumor_priv_over_budget(dp, B));
    rumor_priv_restore(dp, 40, B);
    CHECK(rumor_priv_over_budget(dp, B));
    rumor_priv_destroy(&dp);
    free(gi);
    free(want);
    rumor_model_destroy(&m);
    rumor_backend_destroy(&be);
}

int main(void)
{
    test_parse();
    test_closed_form();
    return check_done();
}
