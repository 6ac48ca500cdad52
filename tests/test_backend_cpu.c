/* test_backend_cpu.c - every CPU backend op against a direct, obviously-correct version. */
#include "backend.h"
#include "check.h"
#include "rng.h"

#include <stdlib.h>
#include <string.h>

static rumor_backend_t *be;
static rumor_rng_t rng;

static float *randn(size_t n)
{
    float *p = be->ops->alloc(be, n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (float)rumor_rng_normal(&rng);
    return p;
}

/* Direct convolution: y[o][b][i][j] = sum_{c,ki,kj} w[o][c][ki][kj] x[c][b][i+ki][j+kj]. */
static void conv_direct(double *y, const float *x, const float *w, int c, int b, int h, int wd,
                        int k, int out)
{
    int oh = h - k + 1, ow = wd - k + 1;
    for (int o = 0; o < out; o++)
        for (int bi = 0; bi < b; bi++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    double s = 0;
                    for (int ci = 0; ci < c; ci++)
                        for (int ki = 0; ki < k; ki++)
                            for (int kj = 0; kj < k; kj++)
                                s += (double)w[((o * c + ci) * k + ki) * k + kj] *
                                     x[((size_t)ci * b + bi) * h * wd + (size_t)(i + ki) * wd + j + kj];
                    y[(((size_t)o * b + bi) * oh + i) * ow + j] = s;
                }
}

static void test_conv_im2col(void)
{
    const int c = 3, b = 2, h = 9, w = 7, k = 5, out = 4, oh = h - k + 1, ow = w - k + 1;
    const int K = c * k * k, N = b * oh * ow;
    float *x = randn((size_t)c * b * h * w), *wt = randn((size_t)out * K);
    float *col = be->ops->alloc(be, (size_t)K * N * sizeof(float));
    float *y = be->ops->alloc(be, (size_t)out * N * sizeof(float));
    double *ref = malloc((size_t)out * N * sizeof *ref);
    be->ops->im2col(be, col, x, c, b, h, w, k);
    be->ops->gemm(be, y, wt, col, false, false, out, N, K, 1.0f, 0.0f, K, N, N);
    conv_direct(ref, x, wt, c, b, h, w, k, out);
    double worst = 0;
    for (int i = 0; i < out * N; i++) worst = fmax(worst, fabs(y[i] - ref[i]));
    CHECK_MSG(worst < 1e-4, "im2col+gemm vs direct convolution: max error %g", worst);

    /* col2im is the adjoint of im2col: <col2im(g), x> == <g, im2col(x)>. */
    float *g = randn((size_t)K * N), *dx = be->ops->alloc(be, (size_t)c * b * h * w * sizeof(float));
    be->ops->col2im(be, dx, g, c, b, h, w, k);
    double lhs = 0, rhs = 0;
    for (int i = 0; i < c * b * h * w; i++) lhs += (double)dx[i] * x[i];
    for (int i = 0; i < K * N; i++) rhs += (double)g[i] * col[i];
    CHECK_NEAR(lhs, rhs, 1e-3 * fabs(rhs) + 1e-3);
    /* A known value: a 1x1x3x3 input with k=2 puts x[1][1] in all four windows. */
    float x3[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, col3[16], ones[16], d3[9];
    be->ops->im2col(be, col3, x3, 1, 1, 3, 3, 2);
    const float want[16] = {1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9};
    CHECK(memcmp(col3, want, sizeof want) == 0);
    for (int i = 0; i < 16; i++) ones[i] = 1;
    be->ops->col2im(be, d3, ones, 1, 1, 3, 3, 2);
    const float cover[9] = {1, 2, 1, 2, 4, 2, 1, 2, 1};
    CHECK(memcmp(d3, cover, sizeof cover) == 0);
    be->ops->free(be, x);
    be->ops->free(be, wt);
    be->ops->free(be, col);
    be->ops->free(be, y);
    be->ops->free(be, g);
    be->ops->free(be, dx);
    free(ref);
}

static void test_pool(void)
{
    const int c = 2, b = 3, h = 4, w = 6, ph = 2, pw = 3, n = c * b * h * w, m = c * b * ph * pw;
    float *x = randn((size_t)n), bias[2] = {0.3f, -0.2f};
    /* A tie inside one window: the first maximum (row-major) must take the gradient. */
    x[0] = x[1] = x[w] = x[w + 1] = 2.5f;
    float *y = be->ops->alloc(be, (size_t)m * sizeof(float));
    float *xdx = be->ops->alloc(be, (size_t)n * sizeof(float));
    be->ops->pool_bias_relu(be, y, x, bias, c, b, h, w);
    int ok = 1;
    for (int ci = 0; ci < c; ci++)
        for (int bi = 0; bi < b; bi++)
            for (int i = 0; i < ph; i++)
                for (int j = 0; j < pw; j++) {
                    const float *p = x + ((size_t)ci * b + bi) * h * w;
                    float mx = -INFINITY;
                    for (int di = 0; di < 2; di++)
                        for (int dj = 0; dj < 2; dj++) mx = fmaxf(mx, p[(2 * i + di) * w + 2 * j + dj]);
                    ok &= y[(((size_t)ci * b + bi) * ph + i) * pw + j] == fmaxf(mx + bias[ci], 0.0f);
                }
    CHECK(ok);
    /* Backward, in place over a copy of x: each window's gradient lands on its first maximum
     * where the output is positive; the bias gradient accumulates the sum. */
    float *dy = randn((size_t)m), db[2] = {1.0f, -1.0f};
    memcpy(xdx, x, (size_t)n * sizeof(float));
    be->ops->pool_bias_relu_bwd(be, xdx, db, dy, y, c, b, h, w);
    double want_db[2] = {1.0, -1.0};
    ok = 1;
    for (int ci = 0; ci < c; ci++)
        for (int bi = 0; bi < b; bi++)
            for (int i = 0; i < ph; i++)
                for (int j = 0; j < pw; j++) {
                    const size_t base = ((size_t)ci * b + bi) * h * w;
                    const size_t o = (((size_t)ci * b + bi) * ph + i) * pw + j;
                    const float g = y[o] > 0 ? dy[o] : 0.0f;
                    want_db[ci] += g;
                    int first = -1;
                    float mx = -INFINITY;
                    for (int q = 0; q < 4; q++) {
                        float v = x[base + (size_t)(2 * i + q / 2) * w + 2 * j + q % 2];
                        if (v > mx) mx = v, first = q;
                    }
                    for (int q = 0; q < 4; q++)
                        ok &= xdx[base + (size_t)(2 * i + q / 2) * w + 2 * j + q % 2] == (q == first ? g : 0.0f);
                }
    CHECK(ok);
    CHECK(xdx[0] == (y[0] > 0 ? dy[0] : 0.0f) && xdx[1] == 0.0f && xdx[w] == 0.0f);
    CHECK_NEAR(db[0], want_db[0], 1e-5);
    CHECK_NEAR(db[1], want_db[1], 1e-5);
    be->ops->free(be, x);
    be->ops->free(be, y);
    be->ops->free(be, xdx);
    be->ops->free(be, dy);
}

static void test_transpose(void)
{
    const int c = 3, b = 4, n = 5;
    float *src = randn((size_t)c * b * n), *t = be->ops->alloc(be, (size_t)c * b * n * 4);
    float *back = be->ops->alloc(be, (size_t)c * b * n * 4);
    be->ops->transpose_cb(be, t, src, c, b, n, true);
    CHECK(t[((size_t)2 * c + 1) * n + 3] == src[((size_t)1 * b + 2) * n + 3]); /* b=2, c=1, i=3 */
    be->ops->transpose_cb(be, back, t, c, b, n, false);
    CHECK(memcmp(back, src, (size_t)c * b * n * 4) == 0);
    be->ops->free(be, src);
    be->ops->free(be, t);
    be->ops->free(be, back);
}

static void test_softmax_xent(void)
{
    /* Zero logits: loss log(k) per sample, gradient (1/k - onehot)/b. */
    float z[2 * 4] = {0}, d[8];
    int32_t y[2] = {1, 3};
    double loss = 0;
    long right = 0;
    be->ops->softmax_xent(be, d, &loss, &right, z, y, 2, 4);
    CHECK_NEAR(loss, 2 * log(4.0), 1e-6);
    CHECK_NEAR(d[1], (0.25 - 1) / 2, 1e-7);
    CHECK_NEAR(d[0], 0.25 / 2, 1e-7);
    /* Known logits: [1, 2, 3] with label 2: loss = log(e + e^2 + e^3) - 3. */
    float z2[3] = {1, 2, 3}, d2[3];
    int32_t y2[1] = {2};
    loss = 0;
    right = 0;
    be->ops->softmax_xent(be, d2, &loss, &right, z2, y2, 1, 3);
    double s = exp(1) + exp(2) + exp(3);
    CHECK_NEAR(loss, log(s) - 3, 1e-6);
    CHECK(right == 1);
    CHECK_NEAR(d2[0], exp(1) / s, 1e-6);
    CHECK_NEAR(d2[2], exp(3) / s - 1, 1e-6);
    /* Large logits do not overflow. */
    float z3[2] = {1000, -1000};
    int32_t y3[1] = {1};
    loss = 0;
    be->ops->softmax_xent(be, NULL, &loss, &right, z3, y3, 1, 2);
    CHECK_NEAR(loss, 2000, 1e-3);
    /* A label past a byte (a token of a 50304-word vocabulary): the loss of a uniform row is
     * log(k), the gradient's -1 lands on that label. */
    enum { K = 50304 };
    float *zk = calloc(K, sizeof *zk), *dk = calloc(K, sizeof *dk);
    int32_t yk[1] = {50000};
    loss = 0;
    be->ops->softmax_xent(be, dk, &loss, &right, zk, yk, 1, K);
    CHECK_NEAR(loss, log((double)K), 1e-6);
    CHECK_NEAR(dk[50000], 1.0 / K - 1, 1e-6);
    CHECK_NEAR(dk[50000 - 256], 1.0 / K, 1e-9);
    free(zk);
    free(dk);
}

static void test_dense(void)
{
    /* bias_act and its backward on a known matrix. */
    float y[6] = {-1, 2, 0.5f, 3, -4, 1}, b[3] = {0.5f, -1, 0}, dy[6] = {1, 1, 1, 2, 2, 2};
    float db[3] = {10, 20, 30}; /* bias gradients accumulate */
    be->ops->bias_act(be, y, b, 2, 3, true);
    const float want[6] = {0, 1, 0.5f, 3.5f, 0, 1};
    CHECK(memcmp(y, want, sizeof want) == 0);
    be->ops->bias_act_bwd(be, db, dy, y, 2, 3, true);
    CHECK(db[0] == 12 && db[1] == 21 && db[2] == 33);
    CHECK(dy[0] == 0 && dy[4] == 0 && dy[3] == 2);
    /* gemm with transposes against a direct product. */
    const int m = 5, n = 7, k = 3;
    float *a = randn((size_t)k * m), *bb = randn((size_t)n * k), c[35];
    be->ops->gemm(be, c, a, bb, true, true, m, n, k, 2.0f, 0.0f, m, k, n);
    double worst = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int l = 0; l < k; l++) s += (double)a[l * m + i] * bb[j * k + l];
            worst = fmax(worst, fabs(c[i * n + j] - 2 * s));
        }
    CHECK(worst < 1e-5);
    be->ops->free(be, a);
    be->ops->free(be, bb);
}

static void test_optimizers(void)
{
    /* SGD momentum, two steps by hand: p0 = 1, g = 0.5, lr 0.1, m 0.9, wd 0.01. */
    float p = 1, v = 0, g = 0.5f;
    be->ops->sgd(be, &p, &v, &g, 1, 0.1f, 0.9f, 0.01f, false);
    double v1 = 0.5 + 0.01, p1 = 1 - 0.1 * v1;
    CHECK_NEAR(v, v1, 1e-7);
    CHECK_NEAR(p, p1, 1e-7);
    CHECK(g == 0.0f); /* a step consumes the gradient */
    g = 0.5f;
    be->ops->sgd(be, &p, &v, &g, 1, 0.1f, 0.9f, 0.01f, false);
    double v2 = 0.9 * v1 + 0.5 + 0.01 * p1, p2 = p1 - 0.1 * v2;
    CHECK_NEAR(v, v2, 1e-6);
    CHECK_NEAR(p, p2, 1e-6);
    /* Nesterov: p -= lr * (g + m * v). */
    p = 1, v = 0, g = 0.5f;
    be->ops->sgd(be, &p, &v, &g, 1, 0.1f, 0.9f, 0.0f, true);
    CHECK_NEAR(p, 1 - 0.1 * (0.5 + 0.9 * 0.5), 1e-7);
    /* AdamW first step: update is lr * sign(g) (up to eps), decay applied to p. */
    float pa = 2, ma = 0, va = 0, ga = -0.3f;
    be->ops->adamw(be, &pa, &ma, &va, &ga, 1, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 1 - 0.9f, 1 - 0.999f);
    CHECK_NEAR(pa, 2 * (1 - 0.01 * 0.1) + 0.01, 1e-6);
    CHECK_NEAR(ma, 0.1 * -0.3, 1e-7);
    CHECK(ga == 0.0f);
    CHECK_NEAR(va, 0.001 * 0.09, 1e-4 * 0.001 * 0.09); /* 1 - 0.999 in float is 1e-3 to 1.3e-5 */
    /* axpy, scale, sumsq */
    float xs[5] = {1, -2, 3, -4, 5}, ys[5] = {1, 1, 1, 1, 1};
    be->ops->axpy(be, ys, xs, 0.5f, 5);
    CHECK(ys[1] == 0 && ys[4] == 3.5f);
    be->ops->scale(be, xs, -2, 5);
    CHECK(xs[0] == -2 && xs[3] == 8);
    double ss;
    be->ops->sumsq(be, &ss, xs, 5);
    CHECK_NEAR(ss, 4 * 55, 1e-9);
    xs[2] = NAN;
    be->ops->sumsq(be, &ss, xs, 5);
    CHECK(!isfinite(ss));
}

int main(void)
{
    char err[RUMOR_ERR_LEN];
    be = rumor_backend_new("cpu", 1, err);
    CHECK(be != NULL);
    if (!be) return check_done();
    rumor_rng_init(&rng, 7);
    test_conv_im2col();
    test_pool();
    test_transpose();
    test_softmax_xent();
    test_dense();
    test_optimizers();
    /* Registry: unknown devices and (in builds without CUDA) cuda are clear errors. */
    CHECK(rumor_backend_new("tpu", 1, err) == NULL && strstr(err, "unknown device"));
    rumor_backend_t *c = rumor_backend_new("cuda", 1, err);
    if (!c) CHECK(strstr(err, "CUDA") || strstr(err, "cuda"));
    rumor_backend_destroy(&c);
    /* The same with codes: RUMOR_ENODEV means "no GPU on this machine" and nothing else (the
     * CUDA test skips on it alone), so a build without CUDA says ENOTSUP, and auto falls back. */
    CHECK(rumor_backend_create(&c, "tpu", 1, err) == RUMOR_EINVAL && c == NULL);
    CHECK(rumor_backend_create(&c, "cpu", 1, err) == RUMOR_OK && c != NULL);
    rumor_backend_destroy(&c);
    CHECK(rumor_backend_create(&c, "auto", 1, err) == RUMOR_OK && c != NULL);
    rumor_backend_destroy(&c);
    const rumor_err_t rc = rumor_backend_create(&c, "cuda", 1, err);
    if (!strstr(rumor_backend_compiled(), "cuda"))
        CHECK_MSG(rc == RUMOR_ENOTSUP && c == NULL && strstr(err, "built without CUDA"), "cuda: %d (%s)", (int)rc, err);
    else
        CHECK_MSG(rc == RUMOR_OK ? c != NULL : c == NULL && rc != RUMOR_EINVAL, "cuda: %d (%s)", (int)rc, err);
    rumor_backend_destroy(&c);
    rumor_backend_destroy(&be);
    CHECK(be == NULL);
    return check_done();
}
