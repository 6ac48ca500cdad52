/* backend_compare.c - a backend against the CPU backend, op by op (see backend_compare.h). */
#include "backend_compare.h"

#include "check.h"
#include "checkpoint.h"
#include "model.h"
#include "optim.h"
#include "rng.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rumor_backend_t *dv, *cp;
static rumor_rng_t rng;
static bool exact_mode;

/* A buffer on both backends with the same contents. */
typedef struct {
    float *d, *c;
    size_t n;
} pair_t;

static pair_t pair_new(size_t n, double scale)
{
    pair_t p = {dv->ops->alloc(dv, n * sizeof(float)), cp->ops->alloc(cp, n * sizeof(float)), n};
    if (!p.d || !p.c) {
        fprintf(stderr, "out of memory for %zu floats\n", n);
        abort();
    }
    if (scale != 0.0) {
        for (size_t i = 0; i < n; i++) p.c[i] = (float)(rumor_rng_normal(&rng) * scale);
        dv->ops->upload(dv, p.d, p.c, n * sizeof(float));
    }
    return p;
}

static void pair_free(pair_t *p)
{
    dv->ops->free(dv, p->d);
    cp->ops->free(cp, p->c);
}

/* Download dev's copy (caller frees). */
static float *fetch(const float *d, size_t n)
{
    float *h = malloc(n * sizeof *h);
    dv->ops->download(dv, h, d, n * sizeof *h);
    return h;
}

/* Largest |a - b| / (|b| + floor), NaN-aware (a NaN where b has none is an infinite error). */
static double worst(const float *a, const float *b, size_t n, double floor_)
{
    double w = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i])) return INFINITY;
        if (isnan(a[i])) continue;
        const double e = a[i] == b[i] ? 0.0 : fabs((double)a[i] - b[i]) / (fabs(b[i]) + floor_);
        if (!(e <= w)) w = e;
    }
    return w;
}

/* Sync dev, then compare its copy of p with the CPU's. */
static void same(const char *what, const pair_t *p, double tol, double floor_)
{
    char err[RUMOR_ERR_LEN] = "";
    CHECK_MSG(dv->ops->sync(dv, err) == RUMOR_OK, "%s: %s", what, err);
    float *h = fetch(p->d, p->n);
    const double w = worst(h, p->c, p->n, floor_), t = exact_mode ? 0.0 : tol;
    CHECK_MSG(w <= t, "%s: max relative error %g > %g over %zu floats", what, w, t, p->n);
    free(h);
}

// ---- memory and copies ----

static void test_memory(void)
{
    const size_t n = 1000003;
    float *h = malloc(n * sizeof *h), *back = malloc(n * sizeof *back);
    float *a = dv->ops->alloc(dv, n * sizeof(float)), *b = dv->ops->alloc(dv, n * sizeof(float));
    dv->ops->download(dv, back, a, n * sizeof(float));
    bool zero = true;
    for (size_t i = 0; i < n; i++) zero &= back[i] == 0.0f;
    CHECK_MSG(zero, "alloc: memory not zeroed");
    for (size_t i = 0; i < n; i++) h[i] = (float)rumor_rng_normal(&rng);
    dv->ops->upload(dv, a, h, n * sizeof(float));
    dv->ops->copy(dv, b, a, n * sizeof(float));
    dv->ops->download(dv, back, b, n * sizeof(float));
    CHECK_MSG(memcmp(back, h, n * sizeof *h) == 0, "upload, copy, download: bytes differ");
    /* Overlapping copies move like memmove, both ways: a <- a shifted down by 7, b <- b
     * shifted up by 1 (then b[0] == b[1]); then a hole of zeros in b. */
    dv->ops->copy(dv, a, a + 7, (n - 7) * sizeof(float));
    dv->ops->download(dv, back, a, (n - 7) * sizeof(float));
    CHECK_MSG(memcmp(back, h + 7, (n - 7) * sizeof *h) == 0, "overlapping copy (down) differs");
    dv->ops->copy(dv, b + 1, b, (n - 1) * sizeof(float));
    dv->ops->zero(dv, b + 5, 100 * sizeof(float));
    float z[110];
    dv->ops->download(dv, z, b, sizeof z);
    CHECK(z[0] == h[0] && z[1] == h[0] && z[2] == h[1] && z[4] == h[3] && z[5] == 0.0f && z[104] == 0.0f &&
          z[105] == h[104]);

    /* Staging: pinned buffers, copies on the side, and a download that sees queued work. */
    float *ph = dv->ops->host_alloc(dv, n * sizeof(float)), *ph2 = dv->ops->host_alloc(dv, n * sizeof(float));
    CHECK(ph && ph2 && ((uintptr_t)ph & 63) == 0);
    for (size_t i = 0; i < n; i++) ph[i] = (float)i;
    dv->ops->upload_async(dv, a, ph, n * sizeof(float));
    dv->ops->wait_copies(dv);
    dv->ops->scale(dv, a, 2.0f, n);
    dv->ops->download_async(dv, ph2, a, n * sizeof(float));
    dv->ops->wait_copies(dv);
    bool ok = true;
    for (size_t i = 0; i < n; i++) ok &= ph2[i] == 2.0f * (float)i;
    CHECK_MSG(ok, "upload_async, scale, download_async: the download did not see the scale");
    char err[RUMOR_ERR_LEN] = "";
    CHECK_MSG(dv->ops->sync(dv, err) == RUMOR_OK, "%s", err);
    dv->ops->host_free(dv, ph);
    dv->ops->host_free(dv, ph2);
    dv->ops->free(dv, a);
    dv->ops->free(dv, b);
    free(h);
    free(back);
}

// ---- dense layers ----

/* Sums of k products in another order: float32's error grows like sqrt(k) (measured on an H200:
 * 1.9e-5 at k = 400 and 1.1e-4 at k = 6400, both against cuBLAS and OpenBLAS alike), so the
 * tolerance does too, with 4x to spare. */
static void gemm_case(bool ta, bool tb, int m, int n, int k, int pad, float alpha, float beta)
{
    const int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    pair_t a = pair_new((size_t)(ta ? k : m) * lda, 1.0), b = pair_new((size_t)(tb ? n : k) * ldb, 1.0);
    pair_t c = pair_new((size_t)m * ldc, 1.0);
    dv->ops->gemm(dv, c.d, a.d, b.d, ta, tb, m, n, k, alpha, beta, lda, ldb, ldc);
    cp->ops->gemm(cp, c.c, a.c, b.c, ta, tb, m, n, k, alpha, beta, lda, ldb, ldc);
    char what[96];
    snprintf(what, sizeof what, "gemm %c%c m=%d n=%d k=%d beta=%g", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k,
             (double)beta);
    /* Summation order differs (cuBLAS tiles, OpenBLAS kernels): relative to sqrt(k)-sized
     * values, float32 rounding over k terms. */
    same(what, &c, fmax(1e-5, 5e-6 * sqrt((double)k)), 1.0);
    pair_free(&a);
    pair_free(&b);
    pair_free(&c);
}

static void test_gemm(void)
{
    for (int t = 0; t < 4; t++) gemm_case(t & 1, t & 2, 37, 53, 71, 3, 1.5f, 0.5f);
    gemm_case(false, true, 100, 10, 800, 0, 1.0f, 0.0f);      /* fc forward */
    gemm_case(true, false, 10, 800, 100, 0, 1.0f, 1.0f);      /* fc weight gradient */
    gemm_case(false, false, 32, 6400, 400, 0, 1.0f, 0.0f);    /* conv2 forward */
    gemm_case(false, true, 32, 400, 6400, 0, 1.0f, 1.0f);     /* conv2 weight gradient */
    gemm_case(true, false, 400, 6400, 32, 0, 1.0f, 0.0f);     /* conv2 input gradient */
}

/* Sums of n terms of about unit size, the CPU's one by one in float32 and a device's in blocks:
 * the CPU's rounding grows like n (some 2e-8 n), and a sum may come out near zero, so its error
 * is measured against sqrt(n), the size of such a sum: SUM_TOL of that is some 7 times what
 * 16 500 rows give, and far below a wrong term's error. */
#define SUM_TOL 2e-5

static void bias_case(int rows, int cols, bool relu)
{
    pair_t y = pair_new((size_t)rows * cols, 1.0), bias = pair_new((size_t)cols, 1.0);
    dv->ops->bias_act(dv, y.d, bias.d, rows, cols, relu);
    cp->ops->bias_act(cp, y.c, bias.c, rows, cols, relu);
    char what[96];
    snprintf(what, sizeof what, "bias_act %dx%d relu=%d", rows, cols, relu);
    same(what, &y, 0.0, 1e-6); /* elementwise, no fused multiply-add: the CPU's bits */
    /* Backward: dy masked where y <= 0, dbias accumulates onto its old value. */
    pair_t dy = pair_new((size_t)rows * cols, 1.0), db = pair_new((size_t)cols, 1.0);
    dv->ops->bias_act_bwd(dv, db.d, dy.d, y.d, rows, cols, relu);
    cp->ops->bias_act_bwd(cp, db.c, dy.c, y.c, rows, cols, relu);
    snprintf(what, sizeof what, "bias_act_bwd dy %dx%d relu=%d", rows, cols, relu);
    same(what, &dy, 0.0, 1.0);
    snprintf(what, sizeof what, "bias_act_bwd dbias %dx%d relu=%d", rows, cols, relu);
    same(what, &db, SUM_TOL, sqrt((double)rows)); /* sums of `rows` terms in another order */
    pair_free(&y);
    pair_free(&bias);
    pair_free(&dy);
    pair_free(&db);
}

static void test_bias(void)
{
    bias_case(37, 300, true);
    bias_case(37, 300, false);
    bias_case(5000, 10, false); /* many row blocks, one column block */
    bias_case(300, 1000, true);
    bias_case(16500, 40, false); /* more row blocks than the reduction has parts (gpt: B*T rows) */
}

// ---- convolution ----

static void conv_case(int c, int b, int h, int w, int k)
{
    const int oh = h - k + 1, ow = w - k + 1;
    const size_t nx = (size_t)c * b * h * w, ncol = (size_t)c * k * k * b * oh * ow;
    pair_t x = pair_new(nx, 1.0), col = pair_new(ncol, 0.0);
    dv->ops->im2col(dv, col.d, x.d, c, b, h, w, k);
    cp->ops->im2col(cp, col.c, x.c, c, b, h, w, k);
    char what[96];
    snprintf(what, sizeof what, "im2col c=%d b=%d %dx%d k=%d", c, b, h, w, k);
    same(what, &col, 0.0, 1.0);
    pair_t g = pair_new(ncol, 1.0), dx = pair_new(nx, 1.0); /* col2im overwrites dx */
    dv->ops->col2im(dv, dx.d, g.d, c, b, h, w, k);
    cp->ops->col2im(cp, dx.c, g.c, c, b, h, w, k);
    snprintf(what, sizeof what, "col2im c=%d b=%d %dx%d k=%d", c, b, h, w, k);
    same(what, &dx, 0.0, 1e-6); /* the same sums in the same order: the same bits */
    pair_free(&x);
    pair_free(&col);
    pair_free(&g);
    pair_free(&dx);
}

static void test_conv(void)
{
    conv_case(3, 5, 13, 11, 5);
    conv_case(16, 64, 12, 12, 5);
    conv_case(1, 256, 28, 28, 5); /* conv1 of the cnn at batch 256: 3.7M floats of col */
    conv_case(2, 3, 4, 4, 4);     /* one output pixel */
}

static void pool_case(int c, int b, int h, int w, bool ties)
{
    const size_t nx = (size_t)c * b * h * w, ny = (size_t)c * b * (h / 2) * (w / 2);
    pair_t x = pair_new(nx, 1.0), bias = pair_new((size_t)c, 0.5), y = pair_new(ny, 0.0);
    if (ties) { /* equal maxima inside windows: the first (row-major) takes the gradient */
        const size_t ph = (size_t)h / 2, pw = (size_t)w / 2;
        for (size_t o = 0; o < ny; o += 3) {
            const size_t px = o % pw, t = o / pw, py = t % ph, cb = t / ph;
            const size_t tl = (cb * (size_t)h + 2 * py) * (size_t)w + 2 * px;
            const float v = fabsf(x.c[tl]) + 3.0f;
            x.c[tl + 1] = v;
            x.c[tl + (size_t)w] = v;
            if (o % 2 == 0) x.c[tl] = v;
            if (o % 5 == 0) x.c[tl + (size_t)w + 1] = v;
        }
        dv->ops->upload(dv, x.d, x.c, nx * sizeof(float));
    }
    dv->ops->pool_bias_relu(dv, y.d, x.d, bias.d, c, b, h, w);
    cp->ops->pool_bias_relu(cp, y.c, x.c, bias.c, c, b, h, w);
    char what[96];
    snprintf(what, sizeof what, "pool_bias_relu c=%d b=%d %dx%d", c, b, h, w);
    same(what, &y, 0.0, 1e-6);
    pair_t dy = pair_new(ny, 1.0), db = pair_new((size_t)c, 1.0);
    dv->ops->pool_bias_relu_bwd(dv, x.d, db.d, dy.d, y.d, c, b, h, w);
    cp->ops->pool_bias_relu_bwd(cp, x.c, db.c, dy.c, y.c, c, b, h, w);
    snprintf(what, sizeof what, "pool_bias_relu_bwd dx c=%d b=%d %dx%d", c, b, h, w);
    same(what, &x, 0.0, 1.0);
    snprintf(what, sizeof what, "pool_bias_relu_bwd dbias c=%d b=%d %dx%d", c, b, h, w);
    same(what, &db, 1e-4, 1.0); /* b*h*w/4 terms summed in another order */
    pair_free(&x);
    pair_free(&bias);
    pair_free(&y);
    pair_free(&dy);
    pair_free(&db);
}

static void test_pool(void)
{
    pool_case(7, 9, 10, 14, true);
    pool_case(16, 256, 24, 24, true); /* pool1 of the cnn at batch 256: 2.4M floats */
    pool_case(32, 256, 8, 8, false);
    pool_case(1, 1, 2, 2, true);
}

static void test_transpose(void)
{
    const int c = 5, b = 7, n = 33;
    pair_t src = pair_new((size_t)c * b * n, 1.0), t = pair_new((size_t)c * b * n, 0.0), back = pair_new((size_t)c * b * n, 0.0);
    dv->ops->transpose_cb(dv, t.d, src.d, c, b, n, true);
    cp->ops->transpose_cb(cp, t.c, src.c, c, b, n, true);
    same("transpose_cb to_bc", &t, 0.0, 1.0);
    dv->ops->transpose_cb(dv, back.d, t.d, c, b, n, false);
    cp->ops->transpose_cb(cp, back.c, t.c, c, b, n, false);
    same("transpose_cb back", &back, 0.0, 1.0);
    pair_free(&src);
    pair_free(&t);
    pair_free(&back);
}

// ---- loss ----

static void xent_case(int b, int k)
{
    pair_t z = pair_new((size_t)b * k, 3.0), dz = pair_new((size_t)b * k, 0.0);
    int32_t *y = malloc((size_t)b * sizeof *y);
    for (int i = 0; i < b; i++) {
        y[i] = (int32_t)rumor_rng_below(&rng, (uint64_t)k);
        if (i % 4 == 0 && k > 2) { /* a tie for the maximum: the first one is the prediction */
            float *row = z.c + (size_t)i * k;
            float mx = row[0];
            for (int j = 1; j < k; j++) mx = row[j] > mx ? row[j] : mx;
            row[(i / 4) % k] = mx;
            row[k - 1] = mx;
            if (i % 8 == 0) y[i] = k - 1; /* the label on the later of the tied */
        }
    }
    dv->ops->upload(dv, z.d, z.c, (size_t)b * k * sizeof(float));
    int32_t *yd = dv->ops->alloc(dv, (size_t)b * sizeof *yd), *yc = cp->ops->alloc(cp, (size_t)b * sizeof *yc);
    dv->ops->upload(dv, yd, y, (size_t)b * sizeof *y);
    memcpy(yc, y, (size_t)b * sizeof *y);
    /* Two calls before one sync: the sums accumulate (the second without a gradient). */
    double ld = 0.25, lc = 0.25;
    long rd = 3, rc = 3;
    dv->ops->softmax_xent(dv, dz.d, &ld, &rd, z.d, yd, b, k);
    dv->ops->softmax_xent(dv, NULL, &ld, &rd, z.d, yd, b, k);
    cp->ops->softmax_xent(cp, dz.c, &lc, &rc, z.c, yc, b, k);
    cp->ops->softmax_xent(cp, NULL, &lc, &rc, z.c, yc, b, k);
    char what[96];
    snprintf(what, sizeof what, "softmax_xent dlogits b=%d k=%d", b, k);
    same(what, &dz, 1e-6, 1e-7); /* exp in double, then rounded to float */
    const double lt = exact_mode ? 0.0 : 1e-9 * fabs(lc);
    CHECK_MSG(fabs(ld - lc) <= lt, "softmax_xent b=%d k=%d: loss %.12g, cpu %.12g", b, k, ld, lc);
    CHECK_MSG(rd == rc, "softmax_xent b=%d k=%d: %ld correct, cpu %ld", b, k, rd, rc);
    pair_free(&z);
    pair_free(&dz);
    dv->ops->free(dv, yd);
    cp->ops->free(cp, yc);
    free(y);
}

static void test_xent(void)
{
    xent_case(1000, 10);
    xent_case(77, 100); /* rows wider than a warp */
    xent_case(33, 7);
    xent_case(1, 2);
    xent_case(64, 50304); /* token files' vocabulary: labels far past 255 */
    xent_case(16500, 256); /* gpt's B*T rows of bytes: more rows than the sums have slots */
}

// ---- transformer ----

/* The same tokens on both backends (caller frees with both). */
static int32_t *tokens_on(rumor_backend_t *be, const int32_t *host_tok, size_t n)
{
    int32_t *t = be->ops->alloc(be, n * sizeof *t);
    be->ops->upload(be, t, host_tok, n * sizeof *t);
    return t;
}

/* LayerNorm of N rows x of C and its backward with output gradient dy, onto old gradients. */
static void layernorm_case(const pair_t *x, const pair_t *dy, int N, int C)
{
    char what[96];
    const size_t n = (size_t)N * C;
    pair_t w = pair_new((size_t)C, 1.0), b = pair_new((size_t)C, 1.0), y = pair_new(n, 0.0);
    pair_t mean = pair_new((size_t)N, 0.0), rstd = pair_new((size_t)N, 0.0);
    dv->ops->layernorm(dv, y.d, mean.d, rstd.d, x->d, w.d, b.d, N, C);
    cp->ops->layernorm(cp, y.c, mean.c, rstd.c, x->c, w.c, b.c, N, C);
    snprintf(what, sizeof what, "layernorm %dx%d", N, C);
    same(what, &y, 1e-5, 1e-3);
    pair_t dx = pair_new(n, 1.0), dw = pair_new((size_t)C, 1.0), db = pair_new((size_t)C, 1.0);
    dv->ops->layernorm_bwd(dv, dx.d, dw.d, db.d, dy->d, x->d, w.d, mean.d, rstd.d, N, C);
    cp->ops->layernorm_bwd(cp, dx.c, dw.c, db.c, dy->c, x->c, w.c, mean.c, rstd.c, N, C);
    snprintf(what, sizeof what, "layernorm_bwd dx %dx%d", N, C);
    same(what, &dx, 1e-4, 1e-2);
    snprintf(what, sizeof what, "layernorm_bwd dw %dx%d", N, C);
    same(what, &dw, SUM_TOL, sqrt((double)N)); /* sums over the N rows */
    snprintf(what, sizeof what, "layernorm_bwd db %dx%d", N, C);
    same(what, &db, SUM_TOL, sqrt((double)N));
    pair_t *all[] = {&w, &b, &y, &mean, &rstd, &dx, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
}

static void transformer_case(int B, int T, int C, int NH, int V)
{
    const size_t N = (size_t)B * T;
    char what[96];
    int32_t *tok = malloc(N * sizeof *tok);
    for (size_t n = 0; n < N; n++) tok[n] = (int32_t)rumor_rng_below(&rng, (uint64_t)V);
    int32_t *td = tokens_on(dv, tok, N), *tc = tokens_on(cp, tok, N);
    /* embeddings, and their gradients onto old values */
    pair_t wte = pair_new((size_t)V * C, 0.02), wpe = pair_new((size_t)T * C, 0.02), x = pair_new(N * C, 0.0);
    dv->ops->embed(dv, x.d, td, wte.d, wpe.d, B, T, C);
    cp->ops->embed(cp, x.c, tc, wte.c, wpe.c, B, T, C);
    snprintf(what, sizeof what, "embed %d,%d,%d", B, T, C);
    same(what, &x, 0.0, 1e-6);
    pair_t dx = pair_new(N * C, 1.0), dwte = pair_new((size_t)V * C, 1.0), dwpe = pair_new((size_t)T * C, 1.0);
    dv->ops->embed_bwd(dv, dwte.d, dwpe.d, dx.d, td, B, T, C);
    cp->ops->embed_bwd(cp, dwte.c, dwpe.c, dx.c, tc, B, T, C);
    snprintf(what, sizeof what, "embed_bwd dwte %d,%d,%d", B, T, C);
    same(what, &dwte, 0.0, 1.0); /* the same sums in the same order */
    snprintf(what, sizeof what, "embed_bwd dwpe %d,%d,%d", B, T, C);
    same(what, &dwpe, 0.0, 1.0);
    /* LayerNorm of dx; its output gradient dy is left for attention's backward */
    pair_t dy = pair_new(N * C, 1.0);
    layernorm_case(&dx, &dy, (int)N, C);
    /* attention */
    pair_t qkv = pair_new(N * 3 * C, 1.0), att = pair_new((size_t)B * NH * T * T, 0.0), o = pair_new(N * C, 0.0);
    dv->ops->attention(dv, o.d, att.d, qkv.d, B, T, C, NH);
    cp->ops->attention(cp, o.c, att.c, qkv.c, B, T, C, NH);
    snprintf(what, sizeof what, "attention %d,%d,%d,%d", B, T, C, NH);
    same(what, &o, 1e-4, 1e-3);
    same(what, &att, 1e-4, 1e-6);
    pair_t dqkv = pair_new(N * 3 * C, 1.0), datt = pair_new((size_t)B * NH * T * T, 0.0);
    dv->ops->attention_bwd(dv, dqkv.d, datt.d, dy.d, qkv.d, att.d, B, T, C, NH);
    cp->ops->attention_bwd(cp, dqkv.c, datt.c, dy.c, qkv.c, att.c, B, T, C, NH);
    snprintf(what, sizeof what, "attention_bwd %d,%d,%d,%d", B, T, C, NH);
    same(what, &dqkv, 1e-3, 1e-2);
    /* GELU, and its backward in place */
    pair_t g = pair_new(N * C, 0.0);
    dv->ops->gelu(dv, g.d, qkv.d, N * C);
    cp->ops->gelu(cp, g.c, qkv.c, N * C);
    snprintf(what, sizeof what, "gelu %zu", N * C);
    same(what, &g, 1e-6, 0.1);
    dv->ops->gelu_bwd(dv, dy.d, qkv.d, dy.d, N * C);
    cp->ops->gelu_bwd(cp, dy.c, qkv.c, dy.c, N * C);
    snprintf(what, sizeof what, "gelu_bwd %zu", N * C);
    same(what, &dy, 1e-5, 0.1);
    pair_t *all[] = {&wte, &wpe, &x, &dx, &dwte, &dwpe, &dy, &qkv, &att, &o, &dqkv, &datt, &g};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    dv->ops->free(dv, td);
    cp->ops->free(cp, tc);
    free(tok);
}

static void test_transformer(void)
{
    if (!dv->ops->embed || !dv->ops->layernorm || !dv->ops->attention || !dv->ops->gelu) {
        check_skip("%s has no transformer ops: not compared", dv->ops->name);
        return;
    }
    transformer_case(2, 16, 64, 4, 300);
    transformer_case(3, 64, 128, 4, 256); /* gpt:4,4,128,64's shapes */
    transformer_case(1, 5, 12, 3, 7);
    transformer_case(2, 256, 384, 6, 300); /* gpt:6,6,384,256's: heads of 64, 256 positions */
    transformer_case(1, 200, 64, 2, 50304); /* a context no multiple of 32; token files' vocabulary */
    /* LayerNorm's weight gradients over gpt's B*T rows: more than its reduction has parts */
    pair_t x = pair_new((size_t)16500 * 96, 1.0), dy = pair_new((size_t)16500 * 96, 1.0);
    layernorm_case(&x, &dy, 16500, 96);
    pair_free(&x);
    pair_free(&dy);
}

// ---- optimizers and mixing ----

static void test_streams(void)
{
    const size_t n = 3000017; /* odd, and more than a grid's worth of threads */
    char err[RUMOR_ERR_LEN] = "";
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        pair_t p = pair_new(n, 1.0), v = pair_new(n, 0.1), g = pair_new(n, 1.0);
        dv->ops->sgd(dv, p.d, v.d, g.d, n, 0.05f, 0.9f, 1e-4f, nesterov);
        cp->ops->sgd(cp, p.c, v.c, g.c, n, 0.05f, 0.9f, 1e-4f, nesterov);
        same(nesterov ? "sgd nesterov p" : "sgd p", &p, 0.0, 1e-6);
        same(nesterov ? "sgd nesterov v" : "sgd v", &v, 0.0, 1e-6);
        same("sgd leaves g zero", &g, 0.0, 1.0);
        pair_free(&p);
        pair_free(&v);
        pair_free(&g);
    }
    pair_t p = pair_new(n, 1.0), m = pair_new(n, 0.1), v = pair_new(n, 0.0), g = pair_new(n, 1.0);
    for (size_t i = 0; i < n; i++) v.c[i] = m.c[i] * m.c[i];
    dv->ops->upload(dv, v.d, v.c, n * sizeof(float));
    const float bc1 = (float)(1.0 - pow(0.9, 3)), bc2 = (float)(1.0 - pow(0.999, 3));
    dv->ops->adamw(dv, p.d, m.d, v.d, g.d, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, bc1, bc2);
    cp->ops->adamw(cp, p.c, m.c, v.c, g.c, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, bc1, bc2);
    same("adamw p", &p, 0.0, 1e-6);
    same("adamw m", &m, 0.0, 1e-6);
    same("adamw v", &v, 0.0, 1e-9);
    same("adamw leaves g zero", &g, 0.0, 1.0);

    dv->ops->axpy(dv, p.d, m.d, -0.75f, n);
    cp->ops->axpy(cp, p.c, m.c, -0.75f, n);
    same("axpy", &p, 0.0, 1e-6);
    dv->ops->scale(dv, p.d, 1.0f / 3.0f, n);
    cp->ops->scale(cp, p.c, 1.0f / 3.0f, n);
    same("scale", &p, 0.0, 1e-6);

    double sd = -1, sc = -2;
    dv->ops->sumsq(dv, &sd, p.d, n);
    cp->ops->sumsq(cp, &sc, p.c, n);
    CHECK_MSG(fabs(sd - sc) <= (exact_mode ? 0.0 : 1e-12 * sc), "sumsq %.17g, cpu %.17g", sd, sc);
    dv->ops->sumsq(dv, &sd, p.d, 1);
    cp->ops->sumsq(cp, &sc, p.c, 1);
    CHECK_MSG(sd == sc, "sumsq of one float %.17g, cpu %.17g", sd, sc);
    const float bad[2] = {NAN, INFINITY};
    for (int i = 0; i < 2; i++) {
        dv->ops->upload(dv, p.d + n / 2, &bad[i], sizeof(float));
        dv->ops->sumsq(dv, &sd, p.d, n);
        CHECK_MSG(!isfinite(sd), "sumsq with a %s: %g", i ? "inf" : "NaN", sd);
    }
    CHECK_MSG(dv->ops->sync(dv, err) == RUMOR_OK, "%s", err);
    pair_free(&p);
    pair_free(&m);
    pair_free(&v);
    pair_free(&g);
}

// ---- models: a training step, mixing, checkpoints ----

/* Classifiers see 28x28 images of 10 classes; gpt models token ids of a 300-token vocabulary
 * (targets past 255, as token files give). */
#define GPT_VOCAB 300

static rumor_model_t *model_on(rumor_backend_t *be, const char *spec_s, int max_batch)
{
    rumor_model_spec_t spec;
    char err[RUMOR_ERR_LEN];
    if (rumor_model_spec_parse(&spec, spec_s, err) != RUMOR_OK) abort();
    const rumor_model_input_t in = spec.kind == RUMOR_MODEL_GPT ? (rumor_model_input_t){1, 1, spec.ctx, GPT_VOCAB, true}
                                                                : (rumor_model_input_t){1, 28, 28, 10, false};
    rumor_model_t *m = rumor_model_new(&spec, in, be, max_batch, err);
    if (!m) fprintf(stderr, "%s: %s\n", spec_s, err);
    return m;
}

/* b samples: images x and labels y, or (x NULL) windows of tokens and their next tokens y, T
 * each. */
static void put_batch(rumor_model_t *m, const float *x, const int32_t *tok, const int32_t *y, int b)
{
    rumor_backend_t *be = rumor_model_backend(m);
    const size_t ys = x ? (size_t)b : (size_t)b * (size_t)rumor_model_input(m).w;
    if (x) be->ops->upload(be, rumor_model_input_buf(m), x, (size_t)b * 784 * sizeof(float));
    else be->ops->upload(be, rumor_model_token_buf(m), tok, ys * sizeof *tok);
    be->ops->upload(be, rumor_model_label_buf(m), y, ys * sizeof *y);
}

bool backend_same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        const int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

static void train_case(const char *spec, rumor_opt_kind_t kind, const char *tmpdir)
{
    char err[RUMOR_ERR_LEN] = "";
    const bool gpt = strncmp(spec, "gpt:", 4) == 0;
    const int B = gpt ? 6 : 100;
    rumor_model_t *md = model_on(dv, spec, B), *mc = model_on(cp, spec, B);
    CHECK(md && mc);
    if (!md || !mc) goto out_models;
    rumor_optim_config_t oc = rumor_optim_defaults();
    oc.kind = kind;
    oc.lr = kind == RUMOR_OPT_SGD ? 0.05f : 1e-3f;
    oc.weight_decay = 1e-4f;
    const size_t P = rumor_model_param_count(md);
    rumor_optim_t *od = rumor_optim_new(&oc, dv, P, err), *oc_ = rumor_optim_new(&oc, cp, P, err);
    CHECK(od && oc_);
    CHECK_RC(rumor_model_init(md, 11));
    CHECK_RC(rumor_model_init(mc, 11));
    /* per sample: 784 pixels and a label, or T tokens and T next ones */
    const size_t T = (size_t)rumor_model_input(md).w, ys = gpt ? T : 1;
    float *x = gpt ? NULL : malloc((size_t)B * 784 * sizeof *x);
    int32_t *tok = gpt ? malloc((size_t)B * T * sizeof *tok) : NULL, *y = malloc((size_t)B * ys * sizeof *y);
    /* Three steps, the last on a partial batch (37 samples; a gpt model's 4 windows). */
    for (int step = 0; step < 3; step++) {
        const int b = step == 2 ? (gpt ? 4 : 37) : B;
        for (size_t i = 0; x && i < (size_t)b * 784; i++) x[i] = (float)rumor_rng_normal(&rng);
        for (size_t i = 0; tok && i < (size_t)b * T; i++) tok[i] = (int32_t)rumor_rng_below(&rng, GPT_VOCAB);
        for (size_t i = 0; i < (size_t)b * ys; i++) y[i] = (int32_t)rumor_rng_below(&rng, gpt ? GPT_VOCAB : 10);
        put_batch(md, x, tok, y, b);
        put_batch(mc, x, tok, y, b);
        double ld = 0, lc = 0;
        long rd = 0, rc = 0;
        CHECK_RC(rumor_model_run(md, b, true, &ld, &rd, err));
        CHECK_RC(rumor_model_run(mc, b, true, &lc, &rc, err));
        CHECK_MSG(fabs(ld - lc) <= (exact_mode ? 0.0 : 1e-5 * fabs(lc)), "%s step %d: loss %.9g, cpu %.9g", spec,
                  step, ld, lc);
        pair_t gr = {rumor_model_grads(md), rumor_model_grads(mc), P};
        char what[96];
        snprintf(what, sizeof what, "%s step %d gradients", spec, step);
        /* Gradients are differences of similar numbers: an absolute floor, for a gpt model the
         * size of its gradients (most are far below 1e-2: a wrong term is still seen). */
        double floor_ = 1e-2;
        if (gpt) {
            double ss = 0;
            for (size_t i = 0; i < P; i++) ss += (double)gr.c[i] * gr.c[i];
            floor_ = sqrt(ss / (double)P);
        }
        same(what, &gr, 1e-3, floor_);
        rumor_optim_step(od, rumor_model_params(md), rumor_model_grads(md), oc.lr);
        rumor_optim_step(oc_, rumor_model_params(mc), rumor_model_grads(mc), oc.lr);
        pair_t pr = {rumor_model_params(md), rumor_model_params(mc), P};
        snprintf(what, sizeof what, "%s %s step %d parameters", spec, rumor_optim_kind_name(kind), step);
        same(what, &pr, 1e-4, 1e-2);
    }
    /* A mixing step as gossip does it: x <- (x + y) / 2 with y another peer's parameters. */
    {
        pair_t other = pair_new(P, 0.1), pr = {rumor_model_params(md), rumor_model_params(mc), P};
        dv->ops->scale(dv, pr.d, 0.5f, P);
        dv->ops->axpy(dv, pr.d, other.d, 0.5f, P);
        cp->ops->scale(cp, pr.c, 0.5f, P);
        cp->ops->axpy(cp, pr.c, other.c, 0.5f, P);
        char what[96];
        snprintf(what, sizeof what, "%s mixed parameters", spec);
        same(what, &pr, 1e-4, 1e-2);
        pair_free(&other);
    }
    /* Checkpoints: one backend's file loads in the other and is written back byte for byte. */
    if (od && oc_) {
        char a[512], b[512], c[512];
        snprintf(a, sizeof a, "%s/dev.safetensors", tmpdir);
        snprintf(b, sizeof b, "%s/cpu.safetensors", tmpdir);
        snprintf(c, sizeof c, "%s/dev2.safetensors", tmpdir);
        rumor_checkpoint_info_t info = {.input_mean = 0.25f, .input_std = 0.5f, .epoch = 1, .seed = 11};
        CHECK_RC(rumor_checkpoint_save(a, md, od, &info, err));
        rumor_model_t *m2 = model_on(cp, spec, B);
        rumor_optim_t *o2 = rumor_optim_new(&oc, cp, P, err);
        CHECK_RC(rumor_checkpoint_load(a, m2, o2, NULL, err));
        CHECK_RC(rumor_checkpoint_save(b, m2, o2, &info, err));
        CHECK_MSG(backend_same_file(a, b), "%s: checkpoint written by %s, loaded and written by cpu, differs", spec,
                  dv->ops->name);
        rumor_model_t *m3 = model_on(dv, spec, B);
        rumor_optim_t *o3 = rumor_optim_new(&oc, dv, P, err);
        CHECK_RC(rumor_checkpoint_load(b, m3, o3, NULL, err));
        CHECK_RC(rumor_checkpoint_save(c, m3, o3, &info, err));
        CHECK_MSG(backend_same_file(a, c), "%s: checkpoint written by cpu, loaded and written by %s, differs", spec,
                  dv->ops->name);
        remove(a);
        remove(b);
        remove(c);
        rumor_optim_destroy(&o2);
        rumor_optim_destroy(&o3);
        rumor_model_destroy(&m2);
        rumor_model_destroy(&m3);
    }
    free(x);
    free(tok);
    free(y);
    rumor_optim_destroy(&od);
    rumor_optim_destroy(&oc_);
out_models:
    rumor_model_destroy(&md);
    rumor_model_destroy(&mc);
}

static void test_models(const char *tmpdir)
{
    train_case("logreg", RUMOR_OPT_SGD, tmpdir);
    train_case("mlp:37,19", RUMOR_OPT_ADAMW, tmpdir);
    train_case("cnn:6,10", RUMOR_OPT_SGD, tmpdir);
    train_case("cnn", RUMOR_OPT_ADAMW, tmpdir);
    /* A context that is no power of two, heads of 16. SGD: the keys' bias gets a gradient that
     * is zero but for rounding (a constant added to a row of scores leaves its softmax as it
     * is), which AdamW's first step turns into +-lr of either sign on two backends; the
     * adamw op itself is compared above, bit for bit. */
    train_case("gpt:2,2,32,24", RUMOR_OPT_SGD, tmpdir);
}

// ---- errors ----

static void test_errors(void)
{
    /* A call the library refuses (lda below the matrix's width) is reported by the next sync,
     * with where it happened; the sync after that is clean again. */
    char err[RUMOR_ERR_LEN] = "";
    float *a = dv->ops->alloc(dv, 64 * sizeof(float));
    CHECK(dv->ops->sync(dv, err) == RUMOR_OK);
    dv->ops->gemm(dv, a, a, a, false, false, 4, 4, 4, 1.0f, 0.0f, 1, 4, 4);
    const rumor_err_t rc = dv->ops->sync(dv, err);
    CHECK_MSG(rc != RUMOR_OK && strstr(err, "backend_cuda.cu:") && strstr(err, "cublasSgemm"),
              "a refused gemm: sync returned %d (%s)", (int)rc, err);
    fprintf(stderr, "a refused gemm is reported as: %s\n", err);
    CHECK(dv->ops->sync(dv, err) == RUMOR_OK);
    /* A failed runtime call (a copy from NULL) is reported once, where it happened: the next
     * launch must not report it again (CUDA keeps it as its last error too). */
    float h[4] = {0};
    dv->ops->upload(dv, NULL, h, sizeof h);
    const rumor_err_t rc2 = dv->ops->sync(dv, err);
    CHECK_MSG(rc2 != RUMOR_OK && strstr(err, "cudaMemcpy"), "a failed upload: sync returned %d (%s)", (int)rc2, err);
    dv->ops->scale(dv, a, 2.0f, 64);
    CHECK_MSG(dv->ops->sync(dv, err) == RUMOR_OK, "a clean scale after a failed upload: %s", err);
    dv->ops->free(dv, a);
}

int backend_compare_all(rumor_backend_t *dev, bool exact, bool errors, const char *tmpdir)
{
    char err[RUMOR_ERR_LEN] = "";
    dv = dev;
    exact_mode = exact;
    cp = rumor_backend_new("cpu", 0, err);
    CHECK_MSG(cp != NULL, "%s", err);
    if (!cp) return check_failures_;
    rumor_rng_init(&rng, 2024);
    test_memory();
    test_gemm();
    test_bias();
    test_conv();
    test_pool();
    test_transpose();
    test_xent();
    test_transformer();
    test_streams();
    test_models(tmpdir);
    if (errors) test_errors();
    rumor_backend_destroy(&cp);
    fprintf(stderr, "%s against cpu: ", dev->ops->name);
    check_done();
    return check_failures_;
}
