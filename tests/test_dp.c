/* test_dp.c - DP-SGD's gradient against a closed form (logistic regression, per-sample
 * gradients by hand), and over a language model's windows (each window's own gradient), clipping at the boundary, the noise's scale measured, the accounting;
 * the secret noise source's normals tested against N(0, 1); Poisson batches against
 * Binomial(n, q); and whole runs of a real node: with --dp two runs of the same --seed differ
 * (noise and batches are secret), without it they are identical. */
#include "backend.h"
#include "check.h"
#include "config.h"
#include "crypto.h"
#include "dp.h"
#include "model.h"
#include "peer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FEAT 4
#define CLASSES 10
#define B 6

static void test_parse(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_dp_config_t c;
    CHECK_RC(rumor_dp_parse(&c, "clip=1.0,noise=1.1,delta=1e-5", err));
    CHECK(c.on && c.clip == 1.0 && c.noise == 1.1 && c.delta == 1e-5);
    CHECK_RC(rumor_dp_parse(&c, "noise=0.5,clip=2", err));
    CHECK(c.clip == 2.0 && c.noise == 0.5 && c.delta == 1e-5);
    const char *bad[] = {"clip=1", "noise=1", "clip=0,noise=1", "clip=1,noise=-1", "clip=1,noise=1,delta=1",
                         "clip=1,noise=x", "clip=1,noise=1,frob=2", "clip", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK(rumor_dp_parse(&c, bad[i], err) == RUMOR_EINVAL);
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
    const rumor_model_input_t in = {1, 2, 2, CLASSES, false};
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
    int32_t y[B];
    for (int i = 0; i < B; i++) {
        for (int j = 0; j < FEAT; j++) x[i][j] = (float)(0.5 * cos(i * 3.0 + j)) * (i == 2 ? 40.0f : 1.0f);
        y[i] = (int32_t)((i * 7) % CLASSES);
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
    rumor_dp_config_t cfg;
    CHECK_RC(rumor_dp_parse(&cfg, "clip=1.5,noise=0", err));
    rumor_noise_t *ns = rumor_noise_new_seeded(9, 0, 0, err);
    rumor_dp_t *dp = rumor_dp_new(&cfg, m, 600, B, &ns, err);
    CHECK(dp != NULL && ns == NULL && rumor_dp_is_seeded(dp) && rumor_dp_rate(dp) == (double)B / 600.0);
    float *inb = rumor_model_input_buf(m);
    int32_t *lab = rumor_model_label_buf(m);
    memcpy(inb, x, sizeof x);
    memcpy(lab, y, sizeof y);
    double loss = 0.0;
    CHECK_RC(rumor_dp_gradient(dp, m, B, &loss, err));
    const float *g = rumor_model_grads(m);
    double maxerr = 0.0;
    for (size_t k = 0; k < P; k++) maxerr = fmax(maxerr, fabs(g[k] - want[k]));
    CHECK_MSG(maxerr < 1e-5, "DP gradient against the closed form: max error %g", maxerr);
    CHECK(memcmp(inb, x, sizeof x) == 0 && memcmp(lab, y, sizeof y) == 0); /* the batch is left as it was */
    CHECK(loss > 0.0 && isfinite(loss));
    CHECK(rumor_dp_steps(dp) == 1 && isinf(rumor_dp_epsilon(dp))); /* no noise: no privacy */

    /* The noise: g(noise) - g(no noise) is N(0, (sigma C / b)^2) in every coordinate. */
    rumor_dp_destroy(&dp);
    CHECK_RC(rumor_dp_parse(&cfg, "clip=1.5,noise=2.0,delta=1e-5", err));
    ns = rumor_noise_new_seeded(9, 0, 0, err);
    dp = rumor_dp_new(&cfg, m, 600, B, &ns, err);
    double s1 = 0.0, s2 = 0.0;
    long cnt = 0;
    for (int rep = 0; rep < 40; rep++) {
        CHECK_RC(rumor_dp_gradient(dp, m, B, &loss, err));
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
    CHECK_RC(rumor_privacy_epsilon(6.0 / 600.0, 2.0, 40, 1e-5, &eps, NULL, err));
    CHECK(rumor_dp_steps(dp) == 40);
    CHECK_NEAR(rumor_dp_epsilon(dp), eps, 1e-9);
    rumor_dp_restore(dp, 40);
    CHECK_NEAR(rumor_dp_epsilon(dp), eps, 1e-9);
    /* An empty batch is a step of noise alone, over the expected batch size: g is
     * N(0, (sigma C / b)^2) around 0, and it counts as a step. */
    s1 = s2 = 0.0;
    cnt = 0;
    for (int rep = 0; rep < 40; rep++) {
        rumor_dp_begin(dp);
        CHECK_RC(rumor_dp_finish(dp, m, err));
        for (size_t k = 0; k < P; k++) s1 += g[k], s2 += (double)g[k] * g[k], cnt++;
    }
    CHECK(rumor_dp_steps(dp) == 80);
    const double sd0 = sqrt(s2 / (double)cnt);
    CHECK_MSG(fabs(sd0 / want_sd - 1.0) < 0.1 && fabs(s1 / (double)cnt) < 4.0 * want_sd / sqrt((double)cnt),
              "noise alone: sd %g against %g, mean %g", sd0, want_sd, s1 / (double)cnt);
    /* A budget: the step that would pass it is refused, the one below is not. */
    rumor_dp_destroy(&dp);
    cfg.budget = eps;
    ns = rumor_noise_new_seeded(9, 0, 0, err);
    dp = rumor_dp_new(&cfg, m, 600, B, &ns, err);
    rumor_dp_restore(dp, 39);
    CHECK(!rumor_dp_over_budget(dp));
    rumor_dp_restore(dp, 40);
    CHECK(rumor_dp_over_budget(dp));
    rumor_dp_destroy(&dp);
    free(gi);
    free(want);
    rumor_model_destroy(&m);
    rumor_backend_destroy(&be);
}

static int cmp_double(const void *a, const void *b);

/* A language model's examples are its windows: DP-SGD's gradient on a batch of windows is the
 * mean of each window's own gradient (its T tokens' mean loss, as the model computes it on that
 * window alone), clipped. Half the windows are clipped. */
static void test_windows(void)
{
    enum { W = 4, T = 6 };
    char err[RUMOR_ERR_LEN];
    rumor_backend_t *be = rumor_backend_new("cpu", 1, err);
    rumor_model_spec_t spec;
    CHECK_RC(rumor_model_spec_parse(&spec, "gpt:1,2,8,6", err));
    rumor_model_t *m = rumor_model_new(&spec, (rumor_model_input_t){1, 1, T, 256, false}, be, W, err);
    CHECK(m != NULL);
    if (!m) return;
    CHECK_RC(rumor_model_init(m, 5));
    const size_t P = rumor_model_param_count(m);
    int32_t x[W][T], y[W][T];
    for (int i = 0; i < W; i++)
        for (int j = 0; j < T; j++) x[i][j] = (i * 37 + j * 11) % 256, y[i][j] = (i * 13 + j * 29 + 1) % 256;
    size_t xb, yn;
    int32_t *tok = rumor_model_sample_buf(m, &xb, &yn), *lab = rumor_model_label_buf(m);
    CHECK(xb == T * sizeof(int32_t) && yn == T);
    float *g = rumor_model_grads(m);
    double *gi = malloc(W * P * sizeof *gi), norm[W], *want = calloc(P, sizeof *want);
    for (int i = 0; i < W; i++) { /* each window alone */
        memcpy(tok, x[i], sizeof x[i]);
        memcpy(lab, y[i], sizeof y[i]);
        rumor_model_zero_grads(m);
        double l = 0.0;
        CHECK_RC(rumor_model_run(m, 1, true, &l, NULL, err));
        double n2 = 0.0;
        for (size_t k = 0; k < P; k++) gi[i * P + k] = g[k], n2 += (double)g[k] * g[k];
        norm[i] = sqrt(n2);
    }
    double sorted[W];
    memcpy(sorted, norm, sizeof norm);
    qsort(sorted, W, sizeof *sorted, cmp_double);
    const double C = (sorted[W / 2 - 1] + sorted[W / 2]) / 2;
    for (int i = 0; i < W; i++)
        for (size_t k = 0; k < P; k++) want[k] += gi[i * P + k] * (norm[i] > C ? C / norm[i] : 1.0) / W;
    char spec_dp[64];
    snprintf(spec_dp, sizeof spec_dp, "clip=%.17g,noise=0", C);
    rumor_dp_config_t cfg;
    CHECK_RC(rumor_dp_parse(&cfg, spec_dp, err));
    rumor_noise_t *ns = rumor_noise_new_seeded(9, 0, 0, err);
    rumor_dp_t *dp = rumor_dp_new(&cfg, m, W, W, &ns, err); /* q = 1: every window */
    CHECK(dp != NULL);
    memcpy(tok, x, sizeof x);
    memcpy(lab, y, sizeof y);
    double loss = 0.0;
    if (dp) CHECK_RC(rumor_dp_gradient(dp, m, W, &loss, err));
    double maxerr = 0.0, scale = 0.0;
    for (size_t k = 0; k < P; k++) maxerr = fmax(maxerr, fabs(g[k] - want[k])), scale = fmax(scale, fabs(want[k]));
    CHECK_MSG(maxerr <= 1e-6 * scale, "DP gradient over windows: max error %g of %g", maxerr, scale);
    CHECK(memcmp(tok, x, sizeof x) == 0 && memcmp(lab, y, sizeof y) == 0); /* the batch is left as it was */
    CHECK(loss > 0.0 && isfinite(loss));
    rumor_dp_destroy(&dp);
    free(gi);
    free(want);
    rumor_model_destroy(&m);
    rumor_backend_destroy(&be);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Draws x[0..n) are N(0, 1): mean, variance, the tail beyond 3 and the Kolmogorov-Smirnov
 * distance. The draws are fresh each run (that is the point), so each check is bounded: |z| <
 * 5.5 for mean, variance and tail (each fails a correct sampler with probability 4e-8) and
 * sqrt(n) D < 2.9 for KS (2 exp(-2 2.9^2) = 1e-7): below 1e-6 in all. Sorts x. */
static void check_normal(double *x, size_t n, const char *what)
{
    double s1 = 0.0, s2 = 0.0;
    size_t tail = 0;
    for (size_t i = 0; i < n; i++) {
        s1 += x[i];
        tail += fabs(x[i]) > 3.0;
    }
    const double mean = s1 / (double)n;
    for (size_t i = 0; i < n; i++) s2 += (x[i] - mean) * (x[i] - mean);
    const double var = s2 / (double)(n - 1);
    CHECK_MSG(fabs(mean) < 5.5 / sqrt((double)n), "%s: mean %g over %zu draws", what, mean, n);
    CHECK_MSG(fabs(var - 1.0) < 5.5 * sqrt(2.0 / (double)(n - 1)), "%s: variance %g", what, var);
    const double pt = erfc(3.0 / sqrt(2.0)), et = pt * (double)n;
    CHECK_MSG(fabs((double)tail - et) < 5.5 * sqrt(et * (1.0 - pt)), "%s: %zu draws beyond 3, expected %.0f", what,
              tail, et);
    qsort(x, n, sizeof *x, cmp_double);
    double d = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double f = 0.5 * erfc(-x[i] / sqrt(2.0));
        d = fmax(d, fmax(f - (double)i / (double)n, (double)(i + 1) / (double)n - f));
    }
    CHECK_MSG(sqrt((double)n) * d < 2.9, "%s: Kolmogorov-Smirnov sqrt(n) D = %g", what, sqrt((double)n) * d);
}

/* rumor_noise_gaussian makes, a batch at a time (with vector math where the CPU has it), the
 * normals rumor_noise_normal makes one at a time from the same words of the stream: from two
 * seeded sources alike, within a float's rounding of sd times each (libmvec's log, sin and cos
 * are within 4 ulp of a double), and the two streams are at the same word after. Counts that
 * end a batch early and cross refills. */
static void test_gaussian_batch(void)
{
    char err[RUMOR_ERR_LEN];
    const size_t counts[] = {1, 7, 256, 1000, 4099};
    float out[4099];
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        rumor_noise_t *a = rumor_noise_new_seeded(5, c, 0, err), *b = rumor_noise_new_seeded(5, c, 0, err);
        CHECK(a && b);
        if (!a || !b) return;
        (void)rumor_noise_u64(a), (void)rumor_noise_u64(b); /* (not at a block's start) */
        rumor_noise_gaussian(a, out, counts[c], 2.5);
        size_t off = 0, same = 0;
        for (size_t k = 0; k < counts[c]; k++) {
            const float want = (float)(2.5 * rumor_noise_normal(b));
            same += out[k] == want;
            off += !(fabsf(out[k] - want) <= 0x1p-23f * fabsf(want));
        }
        CHECK_MSG(off == 0 && rumor_noise_u64(a) == rumor_noise_u64(b),
                  "%s path, %zu normals: %zu beyond a float's rounding of one at a time (%zu the same)",
                  rumor_isa_name(rumor_isa()), counts[c], off, same);
        rumor_noise_destroy(&a);
        rumor_noise_destroy(&b);
    }
}

/* The secret source's normals are N(0, 1), one at a time and a batch at a time, 2^20 draws
 * each (check_normal). */
static void test_normal(void)
{
    char err[RUMOR_ERR_LEN];
    const size_t n = (size_t)1 << 20;
    double *x = malloc(n * sizeof *x);
    float *f = malloc(n * sizeof *f);
    rumor_noise_t *ns = rumor_noise_new_secret(err);
    CHECK(x && f && ns && !rumor_noise_is_seeded(ns));
    if (!x || !f || !ns) return;
    for (size_t i = 0; i < n; i++) x[i] = rumor_noise_normal(ns);
    check_normal(x, n, "one at a time");
    rumor_noise_gaussian(ns, f, n, 1.0);
    for (size_t i = 0; i < n; i++) x[i] = f[i];
    check_normal(x, n, rumor_isa_name(rumor_isa()));
    free(f);
    /* Uniforms stay in (0, 1], exactly, even for the extreme words (rumor_noise_uniform's
     * formula on 0 and on all ones). */
    CHECK(rumor_noise_uniform(ns) > 0.0 && rumor_noise_uniform(ns) <= 1.0);
    CHECK((0.0 + 1.0) * 0x1p-53 > 0.0 && ((double)(UINT64_MAX >> 11) + 1.0) * 0x1p-53 == 1.0 &&
          (double)(UINT64_MAX >> 11) + 1.0 > (double)(UINT64_MAX >> 11));
    /* Two secret sources differ (256 equal bits by chance: 2^-256); seeded ones replay. */
    rumor_noise_t *ns2 = rumor_noise_new_secret(err), *a = rumor_noise_new_seeded(7, 1, 2, err),
                  *b = rumor_noise_new_seeded(7, 1, 2, err), *c = rumor_noise_new_seeded(7, 1, 3, err);
    int same_secret = 0, same_seeded = 0, same_other = 0;
    for (int k = 0; k < 4; k++) {
        const uint64_t va = rumor_noise_u64(a);
        same_secret += rumor_noise_u64(ns) == rumor_noise_u64(ns2);
        same_seeded += va == rumor_noise_u64(b);
        same_other += va == rumor_noise_u64(c);
    }
    CHECK(same_secret < 4 && same_seeded == 4 && same_other < 4 && rumor_noise_is_seeded(a));
    rumor_noise_destroy(&ns);
    rumor_noise_destroy(&ns2);
    rumor_noise_destroy(&a);
    rumor_noise_destroy(&b);
    rumor_noise_destroy(&c);
    CHECK(ns == NULL && a == NULL);
    free(x);
}

/* Poisson batches from a secret source: T draws of n = 600 samples at q = 30 / 600 have sizes
 * of Binomial(600, 0.05) (mean 30, variance 28.5): the sample mean within 5.5 standard errors,
 * the sample variance within 6 of its standard error sigma^2 sqrt(2 / (T - 1) + kappa / T)
 * (kappa the binomial's excess kurtosis): false failures below 1e-7. Every sample is drawn
 * about T q times (each within 6.5 standard deviations: 600 x 8e-11). Two secret states draw
 * different batches; two seeded ones (virtual mode) the same. */
static void test_sampling(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_backend_t *be = rumor_backend_new("cpu", 1, err);
    rumor_model_spec_t spec;
    CHECK_RC(rumor_model_spec_parse(&spec, "logreg", err));
    rumor_model_t *m = rumor_model_new(&spec, (rumor_model_input_t){1, 2, 2, CLASSES, false}, be, B, err);
    rumor_dp_config_t cfg;
    CHECK_RC(rumor_dp_parse(&cfg, "clip=1,noise=1", err));
    enum { N = 600, BATCH = 30, T = 20000 };
    rumor_noise_t *ns = rumor_noise_new_secret(err);
    rumor_dp_t *dp = m ? rumor_dp_new(&cfg, m, N, BATCH, &ns, err) : NULL;
    CHECK(dp != NULL);
    if (!dp) goto out;
    size_t *idx = malloc(N * sizeof *idx), *idx2 = malloc(N * sizeof *idx2);
    long *hits = calloc(N, sizeof *hits);
    double s1 = 0.0, s2 = 0.0;
    bool ordered = true;
    for (int t = 0; t < T; t++) {
        const size_t b = rumor_dp_sample(dp, idx);
        s1 += (double)b, s2 += (double)b * (double)b;
        for (size_t j = 0; j < b; j++) {
            ordered &= idx[j] < N && (j == 0 || idx[j] > idx[j - 1]);
            if (idx[j] < N) hits[idx[j]]++;
        }
    }
    const double q = (double)BATCH / N, mu = N * q, var = N * q * (1 - q), kappa = (1 - 6 * q * (1 - q)) / var;
    const double mean = s1 / T, svar = (s2 - T * mean * mean) / (T - 1);
    CHECK(ordered);
    CHECK_MSG(fabs(mean - mu) < 5.5 * sqrt(var / T), "batch size mean %g, expected %g", mean, mu);
    CHECK_MSG(fabs(svar - var) < 6.0 * var * sqrt(2.0 / (T - 1) + kappa / T), "batch size variance %g, expected %g",
              svar, var);
    long lo = T, hi = 0;
    for (int i = 0; i < N; i++) lo = hits[i] < lo ? hits[i] : lo, hi = hits[i] > hi ? hits[i] : hi;
    const double sdh = sqrt(T * q * (1 - q));
    CHECK_MSG(lo > T * q - 6.5 * sdh && hi < T * q + 6.5 * sdh, "samples drawn %ld..%ld times, expected %g", lo, hi, T * q);
    /* Membership is secret: another state with the same settings draws another batch (the
     * same one has probability (q^2 + (1 - q)^2)^600 < 1e-25). */
    ns = rumor_noise_new_secret(err);
    rumor_dp_t *dp2 = rumor_dp_new(&cfg, m, N, BATCH, &ns, err);
    const size_t b1 = rumor_dp_sample(dp, idx), b2 = dp2 ? rumor_dp_sample(dp2, idx2) : 0;
    CHECK(dp2 && (b1 != b2 || memcmp(idx, idx2, b1 * sizeof *idx) != 0));
    rumor_dp_destroy(&dp2);
    /* Seeded states replay. */
    rumor_dp_destroy(&dp);
    ns = rumor_noise_new_seeded(3, 0xd9, 1, err);
    dp = rumor_dp_new(&cfg, m, N, BATCH, &ns, err);
    ns = rumor_noise_new_seeded(3, 0xd9, 1, err);
    dp2 = rumor_dp_new(&cfg, m, N, BATCH, &ns, err);
    CHECK(dp && dp2 && rumor_dp_sample(dp, idx) == rumor_dp_sample(dp2, idx2));
    /* A batch as large as the data: every sample, every step. */
    rumor_dp_destroy(&dp);
    ns = rumor_noise_new_secret(err);
    dp = rumor_dp_new(&cfg, m, 20, 64, &ns, err);
    CHECK(dp && rumor_dp_rate(dp) == 1.0 && rumor_dp_sample(dp, idx) == 20 && idx[19] == 19);
    rumor_dp_destroy(&dp2);
    free(idx);
    free(idx2);
    free(hits);
out:
    rumor_dp_destroy(&dp);
    rumor_model_destroy(&m);
    rumor_backend_destroy(&be);
}

/* ---- whole runs of a real node ---- */

static char dir[] = "/tmp/rumor-test-dp-XXXXXX";
static char swarm[128], key[128], cert[128];

static bool swarm_setup(void)
{
    char err[RUMOR_ERR_LEN] = "";
    rumor_authority_t *auth = rumor_authority_generate(err);
    rumor_secret_key_t *k = rumor_secret_key_generate(err);
    uint8_t c[RUMOR_CERT_MAX_LEN];
    size_t len = 0;
    const uint64_t now = (uint64_t)time(NULL);
    snprintf(swarm, sizeof swarm, "%s/authority.pub", dir);
    snprintf(key, sizeof key, "%s/peer.key", dir);
    snprintf(cert, sizeof cert, "%s/peer.cert", dir);
    bool ok = auth && k && rumor_public_key_save(swarm, rumor_authority_public(auth), NULL, true, err) == RUMOR_OK &&
              rumor_secret_key_save(k, key, true, err) == RUMOR_OK &&
              rumor_cert_issue(c, &len, auth, rumor_secret_key_public(k), "peer", now - 60, now + 3600, err) == RUMOR_OK &&
              rumor_cert_save(cert, c, len, true, err) == RUMOR_OK;
    if (!ok) fprintf(stderr, "swarm setup: %s\n", err);
    rumor_secret_key_destroy(&k);
    rumor_authority_destroy(&auth);
    return ok;
}

/* A one-peer swarm, --seed 5, 4 rounds of 3 steps; its exported model into *model (malloc). */
static bool node_run(const char *name, const char *dp, uint8_t **model, long *len)
{
    char err[RUMOR_ERR_LEN] = "", run[160], path[200];
    rumor_peer_config_t pc;
    memset(&pc, 0, sizeof pc);
    pc.node = (rumor_node_config_t){.listen = "tcp://127.0.0.1:0", .key_path = key, .cert_path = cert,
                                    .swarm = swarm, .memb = rumor_memb_defaults()};
    pc.data_dir = RUMOR_DEFAULT_DATA;
    pc.limit = 640;
    if (rumor_model_spec_parse(&pc.spec, "logreg", err) != RUMOR_OK || rumor_algo_parse(&pc.algo, "dpsgd", err) != RUMOR_OK ||
        (dp && rumor_dp_parse(&pc.dp, dp, err) != RUMOR_OK))
        abort();
    pc.algo.local_steps = 3;
    pc.device = "cpu";
    pc.threads = 1;
    pc.batch = 32;
    pc.seed = pc.init_seed = 5;
    pc.opt = rumor_optim_defaults();
    pc.sched.kind = RUMOR_SCHED_CONSTANT;
    pc.topology = "ring";
    pc.rounds = 4;
    snprintf(run, sizeof run, "%s/%s", dir, name);
    pc.run_dir = run;
    pc.min_peers = 1;
    rumor_peer_result_t res;
    const mode_t old = umask(022);
    const rumor_err_t rc = rumor_peer_run(&pc, &res, err);
    umask(old);
    CHECK_MSG(rc == RUMOR_OK && res.rounds == 4, "node %s: %s", name, err);
    /* What the run folder holds of the training data is its owner's alone (0600); the steps
     * of privacy spent too, under --dp. */
    const char *files[] = {"model.safetensors", "checkpoint.safetensors", "metrics.jsonl", "dp.steps"};
    for (size_t f = 0; f < sizeof files / sizeof *files - !dp; f++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", run, files[f]);
        CHECK_MSG(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "%s: mode %o, expected 600", path,
                  (unsigned)(st.st_mode & 0777));
    }
    snprintf(path, sizeof path, "%s/model.safetensors", run);
    FILE *f = fopen(path, "rb");
    *model = NULL;
    *len = 0;
    if (f && fseek(f, 0, SEEK_END) == 0 && (*len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (*model = malloc((size_t)*len)) && fread(*model, 1, (size_t)*len, f) != (size_t)*len) {
        free(*model);
        *model = NULL;
    }
    if (f) fclose(f);
    for (size_t k = 0; k < sizeof files / sizeof *files; k++) {
        snprintf(path, sizeof path, "%s/%s", run, files[k]);
        remove(path);
    }
    rmdir(run);
    return *model != NULL;
}

/* Two runs of the same settings and --seed: without --dp bit for bit the same model; with it
 * different ones, from the noise (noise=1.1) and from the batches alone (noise=0: only their
 * membership is random). */
static void test_node_runs(void)
{
    struct stat st;
    if (stat(RUMOR_DEFAULT_DATA, &st) != 0) {
        check_skip("no dataset at %s: the node runs (secret noise, Poisson batches, file modes) not checked",
                   RUMOR_DEFAULT_DATA);
        return;
    }
    if (!mkdtemp(dir) || !swarm_setup()) {
        CHECK_MSG(false, "cannot set up a swarm in %s", dir);
        return;
    }
    const char *dps[] = {NULL, "clip=1,noise=1.1", "clip=1,noise=0"};
    for (int d = 0; d < 3; d++) {
        uint8_t *a = NULL, *b = NULL;
        long la = 0, lb = 0;
        const bool ok = node_run("a", dps[d], &a, &la) && node_run("b", dps[d], &b, &lb);
        const bool same = ok && la == lb && memcmp(a, b, (size_t)la) == 0;
        if (!dps[d]) CHECK_MSG(ok && same, "rumor node without --dp: two runs of --seed 5 differ");
        else CHECK_MSG(ok && !same, "rumor node --dp %s: two runs of --seed 5 gave the same model", dps[d]);
        free(a);
        free(b);
    }
    remove(swarm);
    remove(key);
    remove(cert);
    rmdir(dir);
}

int main(void)
{
    test_parse();
    test_closed_form();
    test_windows();
    test_normal();
    test_gaussian_batch();
    test_sampling();
    test_node_runs();
    return check_done();
}
