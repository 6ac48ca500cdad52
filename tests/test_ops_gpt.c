/* test_ops_gpt.c - the CPU backend's transformer ops (GPT-2's: embeddings, LayerNorm, causal
 * attention, GELU) against direct double-precision versions written here, and every backward
 * against finite differences of those: the loss is <out, R> for a random R, the backward op is
 * given dout = R, and each gradient entry checked must match (L(x + h) - L(x - h)) / 2h of the
 * double-precision forward. */
#include "backend.h"
#include "check.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static rumor_backend_t *be;
static rumor_rng_t rng;

static float *randn(size_t n, double scale)
{
    float *p = be->ops->alloc(be, n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (float)(rumor_rng_normal(&rng) * scale);
    return p;
}

static float *zeros(size_t n) { return be->ops->alloc(be, n * sizeof(float)); }

/* Largest |a - b| / (|b| + floor). */
static double worst(const float *a, const double *b, size_t n, double floor_)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs(a[i] - b[i]) / (fabs(b[i]) + floor_);
        if (!(e <= w)) w = e;
    }
    return w;
}

/* ---- direct versions, in double ---- */

static void ref_layernorm(double *out, const double *x, const double *w, const double *b, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const double *r = x + (size_t)n * C;
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += r[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (r[c] - m) * (r[c] - m);
        v /= C;
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (r[c] - m) / sqrt(v + 1e-5) * w[c] + b[c];
    }
}

static void ref_attention(double *out, const double *qkv, int B, int T, int C, int NH)
{
    const int hs = C / NH;
    double *s = malloc((size_t)T * sizeof *s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *q = qkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * hs;
                    double dot = 0;
                    for (int i = 0; i < hs; i++) dot += q[i] * k[i];
                    s[j] = dot / sqrt((double)hs);
                    if (s[j] > mx) mx = s[j];
                }
                for (int j = 0; j <= t; j++) sum += s[j] = exp(s[j] - mx);
                double *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int i = 0; i < hs; i++) {
                    double acc = 0;
                    for (int j = 0; j <= t; j++) acc += s[j] / sum * qkv[((size_t)b * T + j) * 3 * C + 2 * C + (size_t)h * hs + i];
                    o[i] = acc;
                }
            }
    free(s);
}

static double ref_gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* ---- finite differences ----
 * fwd(out, in, ctx) computes the op's output from all its inputs laid end to end in `in`
 * (double); the loss is <out, r>. For `checks` entries of in spread over [lo, hi), the analytic
 * gradient grad[i - lo] must match the central difference. */
typedef void (*fwd_t)(double *out, const double *in, const void *ctx);

static void finite_diff(const char *what, fwd_t fwd, const void *ctx, double *in, size_t n_in, const double *r,
                        size_t n_out, const float *grad, size_t lo, size_t hi, int checks, double tol)
{
    double *out = malloc(n_out * sizeof *out);
    double worst_err = 0;
    size_t worst_at = lo;
    for (int k = 0; k < checks; k++) {
        const size_t i = lo + (size_t)rumor_rng_below(&rng, hi - lo);
        const double x0 = in[i], h = 1e-4 * (fabs(x0) > 1 ? fabs(x0) : 1);
        double l[2];
        for (int s = 0; s < 2; s++) {
            in[i] = x0 + (s ? -h : h);
            fwd(out, in, ctx);
            l[s] = 0;
            for (size_t j = 0; j < n_out; j++) l[s] += out[j] * r[j];
        }
        in[i] = x0;
        const double num = (l[0] - l[1]) / (2 * h), e = fabs(grad[i - lo] - num) / (fabs(num) + 1e-2);
        if (e > worst_err) worst_err = e, worst_at = i;
    }
    CHECK_MSG(worst_err <= tol, "%s: gradient against finite differences off by %g (relative) at %zu", what,
              worst_err, worst_at);
    free(out);
}

static double *to_double(const float *x, size_t n, double *dst)
{
    for (size_t i = 0; i < n; i++) dst[i] = x[i];
    return dst;
}

/* ---- embeddings ---- */

typedef struct {
    int B, T, C, V;
    const int32_t *tok;
} embed_ctx_t;

static void fwd_embed(double *out, const double *in, const void *p)
{
    const embed_ctx_t *c = p;
    const double *wte = in, *wpe = in + (size_t)c->V * c->C;
    for (int n = 0; n < c->B * c->T; n++)
        for (int j = 0; j < c->C; j++)
            out[(size_t)n * c->C + j] = wte[(size_t)c->tok[n] * c->C + j] + wpe[(size_t)(n % c->T) * c->C + j];
}

static void test_embed(void)
{
    const int B = 3, T = 7, C = 8, V = 11, N = B * T;
    int32_t *tok = be->ops->alloc(be, (size_t)N * sizeof *tok);
    for (int n = 0; n < N; n++) tok[n] = (int32_t)rumor_rng_below(&rng, V);
    tok[0] = tok[5] = tok[9] = 4; /* a token seen several times: its gradient sums them */
    float *wte = randn((size_t)V * C, 1), *wpe = randn((size_t)T * C, 1), *out = zeros((size_t)N * C);
    be->ops->embed(be, out, tok, wte, wpe, B, T, C);
    const size_t n_in = (size_t)(V + T) * C;
    double *in = malloc(n_in * sizeof *in), *ref = malloc((size_t)N * C * sizeof *ref);
    to_double(wte, (size_t)V * C, in);
    to_double(wpe, (size_t)T * C, in + (size_t)V * C);
    const embed_ctx_t ctx = {B, T, C, V, tok};
    fwd_embed(ref, in, &ctx);
    CHECK(worst(out, ref, (size_t)N * C, 1e-6) < 1e-6); /* one float addition */
    /* backward: gradients accumulate onto what is there */
    float *r = randn((size_t)N * C, 1), *g = zeros(n_in);
    double *rd = malloc((size_t)N * C * sizeof *rd);
    to_double(r, (size_t)N * C, rd);
    be->ops->embed_bwd(be, g, g + (size_t)V * C, r, tok, B, T, C);
    finite_diff("embed_bwd", fwd_embed, &ctx, in, n_in, rd, (size_t)N * C, g, 0, n_in, 200, 1e-4);
    float before = g[4 * C];
    be->ops->embed_bwd(be, g, g + (size_t)V * C, r, tok, B, T, C);
    CHECK(g[4 * C] == 2 * before);
    free(in), free(ref), free(rd);
    be->ops->free(be, tok), be->ops->free(be, wte), be->ops->free(be, wpe), be->ops->free(be, out);
    be->ops->free(be, r), be->ops->free(be, g);
}

/* ---- LayerNorm ---- */

typedef struct {
    int N, C;
} ln_ctx_t;

static void fwd_ln(double *out, const double *in, const void *p)
{
    const ln_ctx_t *c = p;
    ref_layernorm(out, in, in + (size_t)c->N * c->C, in + (size_t)c->N * c->C + c->C, c->N, c->C);
}

static void test_layernorm(void)
{
    const int N = 6, C = 40;
    float *x = randn((size_t)N * C, 2), *w = randn(C, 1), *b = randn(C, 1), *out = zeros((size_t)N * C);
    for (int c = 0; c < C; c++) x[c] += 3.0f; /* a row far from zero mean */
    float *mean = zeros(N), *rstd = zeros(N);
    be->ops->layernorm(be, out, mean, rstd, x, w, b, N, C);
    const size_t n_in = (size_t)N * C + 2 * (size_t)C;
    double *in = malloc(n_in * sizeof *in), *ref = malloc((size_t)N * C * sizeof *ref);
    to_double(x, (size_t)N * C, in);
    to_double(w, C, in + (size_t)N * C);
    to_double(b, C, in + (size_t)N * C + C);
    const ln_ctx_t ctx = {N, C};
    fwd_ln(ref, in, &ctx);
    CHECK_MSG(worst(out, ref, (size_t)N * C, 1e-3) < 1e-4, "layernorm: %g", worst(out, ref, (size_t)N * C, 1e-3));
    /* backward: dx accumulates (start from an old value and take it off), dw and db too */
    float *r = randn((size_t)N * C, 1), *g = zeros(n_in);
    double *rd = malloc((size_t)N * C * sizeof *rd);
    to_double(r, (size_t)N * C, rd);
    for (size_t i = 0; i < (size_t)N * C; i++) g[i] = 0.5f;
    be->ops->layernorm_bwd(be, g, g + (size_t)N * C, g + (size_t)N * C + C, r, x, w, mean, rstd, N, C);
    for (size_t i = 0; i < (size_t)N * C; i++) g[i] -= 0.5f;
    finite_diff("layernorm_bwd", fwd_ln, &ctx, in, n_in, rd, (size_t)N * C, g, 0, n_in, 300, 2e-3);
    free(in), free(ref), free(rd);
    float *bufs[] = {x, w, b, out, mean, rstd, r, g};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->free(be, bufs[i]);
}

/* ---- causal attention ---- */

typedef struct {
    int B, T, C, NH;
} attn_ctx_t;

static void fwd_attn(double *out, const double *in, const void *p)
{
    const attn_ctx_t *c = p;
    ref_attention(out, in, c->B, c->T, c->C, c->NH);
}

static void attention_case(int B, int T, int C, int NH)
{
    const size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C, n_att = (size_t)B * NH * T * T;
    float *qkv = randn(n_qkv, 1), *out = zeros(n_out), *att = zeros(n_att);
    be->ops->attention(be, out, att, qkv, B, T, C, NH);
    double *in = malloc(n_qkv * sizeof *in), *ref = malloc(n_out * sizeof *ref);
    to_double(qkv, n_qkv, in);
    const attn_ctx_t ctx = {B, T, C, NH};
    fwd_attn(ref, in, &ctx);
    CHECK_MSG(worst(out, ref, n_out, 1e-3) < 1e-4, "attention %d,%d,%d,%d: %g", B, T, C, NH,
              worst(out, ref, n_out, 1e-3));
    /* every row of att a distribution over the positions up to its own, zero beyond */
    bool causal = true;
    for (size_t r = 0; r < (size_t)B * NH * T; r++) {
        const int t = (int)(r % (size_t)T);
        double sum = 0;
        for (int j = 0; j < T; j++) {
            const float a = att[r * T + j];
            if (j > t) causal &= a == 0.0f;
            else sum += a, causal &= a >= 0.0f;
        }
        causal &= fabs(sum - 1) < 1e-5;
    }
    CHECK(causal);
    float *r = randn(n_out, 1), *dqkv = zeros(n_qkv), *datt = zeros(n_att);
    for (size_t i = 0; i < n_qkv; i++) dqkv[i] = 7.0f; /* overwritten */
    double *rd = malloc(n_out * sizeof *rd);
    to_double(r, n_out, rd);
    be->ops->attention_bwd(be, dqkv, datt, r, qkv, att, B, T, C, NH);
    char what[64];
    snprintf(what, sizeof what, "attention_bwd %d,%d,%d,%d", B, T, C, NH);
    finite_diff(what, fwd_attn, &ctx, in, n_qkv, rd, n_out, dqkv, 0, n_qkv, 300, 2e-3);
    /* the first position's key and query get no gradient from its own softmax of one */
    free(in), free(ref), free(rd);
    float *bufs[] = {qkv, out, att, r, dqkv, datt};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->free(be, bufs[i]);
}

/* ---- GELU ---- */

typedef struct {
    size_t n;
} gelu_ctx_t;

static void fwd_gelu(double *out, const double *in, const void *p)
{
    const gelu_ctx_t *c = p;
    for (size_t i = 0; i < c->n; i++) out[i] = ref_gelu(in[i]);
}

static void test_gelu(void)
{
    const size_t n = 1000;
    float *x = randn(n, 3), *y = zeros(n);
    x[0] = 0.0f, x[1] = -10.0f, x[2] = 10.0f;
    be->ops->gelu(be, y, x, n);
    double *in = malloc(n * sizeof *in), *ref = malloc(n * sizeof *ref);
    to_double(x, n, in);
    const gelu_ctx_t ctx = {n};
    fwd_gelu(ref, in, &ctx);
    /* float's 1 + tanh(u) cancels for negative x: an absolute error of about 1e-7 there */
    CHECK_MSG(worst(y, ref, n, 0.1) < 1e-5, "gelu: %g", worst(y, ref, n, 0.1));
    CHECK(y[0] == 0.0f && fabsf(y[1]) < 1e-6f && y[2] == 10.0f);
    float *r = randn(n, 1), *dx = zeros(n);
    double *rd = malloc(n * sizeof *rd);
    to_double(r, n, rd);
    be->ops->gelu_bwd(be, dx, x, r, n);
    finite_diff("gelu_bwd", fwd_gelu, &ctx, in, n, rd, n, dx, 0, n, 300, 1e-4);
    be->ops->gelu_bwd(be, r, x, r, n); /* in place: dx may be dy */
    CHECK(memcmp(r, dx, n * sizeof *dx) == 0);
    free(in), free(ref), free(rd);
    float *bufs[] = {x, y, r, dx};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->free(be, bufs[i]);
}

int main(void)
{
    char err[RUMOR_ERR_LEN];
    be = rumor_backend_new("cpu", 1, err);
    if (!be) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    rumor_rng_init(&rng, 77);
    test_embed();
    test_layernorm();
    attention_case(2, 5, 12, 3);
    attention_case(1, 17, 32, 2); /* more positions than a head's size */
    attention_case(3, 1, 8, 1);   /* a single position: attention is the value itself */
    test_gelu();
    rumor_backend_destroy(&be);
    return check_done();
}
