/*
 * backend_cpu.c - the CPU backend: OpenBLAS sgemm for every matrix product, plain loops
 * (written so the compiler vectorises them) for everything else.
 *
 * Elementwise work is single-threaded on purpose: for the models here it is a few percent
 * of a step, lives in cache, and threading it would cost more in synchronisation than it
 * saves. `threads` goes to OpenBLAS. Where an elementwise op needs an exponential it is
 * fast_expf's, which vectorises (a gpt step spent a fifth of its time in libm's expf).
 */
#include "backend.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* LAPACK from OpenBLAS. Debian's OpenBLAS ships no lapacke.h, so the Fortran symbol is
 * declared here (LP64: Fortran INTEGER is int). gfortran passes the lengths of CHARACTER
 * arguments as hidden trailing size_t parameters; passing them keeps the call well defined. */
void dsyev_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda,
            double *w, double *work, const int *lwork, int *info, size_t jobz_len,
            size_t uplo_len);

/* The hot elementwise loops are built twice on x86-64, for the baseline and for x86-64-v3
 * (AVX2 and FMA: eight floats a lane instead of four), and the loader picks the clone the CPU
 * runs (an ifunc); the one binary still runs on any x86-64. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define VECTOR_CLONES
#endif

/* e^x within 1.4 ulp for x in [lo, hi] = EXP_RANGE (clamped to it, so that the result is
 * always a normal float), in plain arithmetic so that loops over it vectorise, where libm's
 * expf is a call per element: x = n ln 2 + r with |r| <= ln(2) / 2 (ln 2 in two parts, Cody
 * and Waite), e^r by Cephes' degree-6 polynomial, 2^n put into the exponent bits.
 *
 * Callers read the range from the volatile EXP_RANGE once and pass it in. Given the bounds as
 * constants, GCC evaluates the whole loop body once more for a clamped x, as a constant, and
 * blends it in per element; that constant path divides by e^88 and makes a subnormal in every
 * vector, which cost 4x the loop's time (GELU ran at 2.7 ns an element instead of 0.7). */
static volatile const float EXP_RANGE[2] = {-87.3f, 88.0f};

static inline float fast_expf(float x, float lo, float hi)
{
    x = x > lo ? x : lo;
    x = x < hi ? x : hi;
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
    const float r = x - n * 0.693359375f - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* max without libm's NaN rules (fmaxf is a call on x86-64): on a tie it keeps a. */
static inline float max2(float a, float b) { return b > a ? b : a; }

const char *rumor_backend_cpu_better_core(void)
{
#if defined(__x86_64__)
    if (getenv("OPENBLAS_CORETYPE")) return NULL; /* told: as told */
    const char *core = openblas_get_corename();
    if (!core || strcmp(core, "Prescott") != 0) return NULL; /* its pick, unless its fallback */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return NULL;
}

static rumor_err_t cpu_open(rumor_backend_t *be, int threads, char err[RUMOR_ERR_LEN])
{
    (void)err;
    openblas_set_num_threads(threads);
    be->impl = NULL;
    return RUMOR_OK;
}

static void cpu_close(rumor_backend_t *be) { (void)be; }

static void *cpu_alloc(rumor_backend_t *be, size_t len)
{
    (void)be;
    size_t rounded = (len + 63) & ~(size_t)63;
    if (rounded < len) return NULL;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (p) memset(p, 0, rounded ? rounded : 64);
    return p;
}

static void cpu_free(rumor_backend_t *be, void *p)
{
    (void)be;
    free(p);
}

static void cpu_copy(rumor_backend_t *be, void *dst, const void *src, size_t len)
{
    (void)be;
    if (dst != src && len) memmove(dst, src, len);
}

static void cpu_zero(rumor_backend_t *be, void *p, size_t len)
{
    (void)be;
    if (len) memset(p, 0, len);
}

static rumor_err_t cpu_sync(rumor_backend_t *be, char err[RUMOR_ERR_LEN])
{
    (void)be;
    (void)err;
    return RUMOR_OK;
}

/* Staging: host memory is all there is, so a staging buffer is an aligned buffer and an
 * asynchronous copy is a copy made at once (nothing is queued for it to overlap). */
static void *cpu_host_alloc(rumor_backend_t *be, size_t len)
{
    (void)be;
    size_t rounded = (len + 63) & ~(size_t)63;
    if (rounded < len) return NULL;
    return aligned_alloc(64, rounded ? rounded : 64);
}

static void cpu_wait_copies(rumor_backend_t *be) { (void)be; }

static void cpu_gemm(rumor_backend_t *be, float *c, const float *a, const float *b, bool trans_a,
                     bool trans_b, int m, int n, int k, float alpha, float beta, int lda, int ldb,
                     int ldc)
{
    (void)be;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_bias_act(rumor_backend_t *be, float *y, const float *bias, int rows, int cols,
                         bool relu)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        float *row = y + (size_t)r * cols;
        if (relu)
            for (int c = 0; c < cols; c++) {
                float v = row[c] + bias[c];
                row[c] = v > 0.0f ? v : 0.0f;
            }
        else
            for (int c = 0; c < cols; c++) row[c] += bias[c];
    }
}

static void cpu_bias_act_bwd(rumor_backend_t *be, float *dbias, float *dy, const float *y,
                             int rows, int cols, bool relu)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        float *drow = dy + (size_t)r * cols;
        if (relu) {
            const float *yrow = y + (size_t)r * cols;
            for (int c = 0; c < cols; c++) {
                float d = yrow[c] > 0.0f ? drow[c] : 0.0f;
                drow[c] = d;
                dbias[c] += d;
            }
        } else {
            for (int c = 0; c < cols; c++) dbias[c] += drow[c];
        }
    }
}

static void cpu_im2col(rumor_backend_t *be, float *col, const float *x, int c, int b, int h, int w,
                       int k)
{
    (void)be;
    const int oh = h - k + 1, ow = w - k + 1;
    const size_t plane = (size_t)h * w, out_plane = (size_t)oh * ow;
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *dst = col + ((size_t)(ci * k + ki) * k + kj) * b * out_plane;
                for (int bi = 0; bi < b; bi++) {
                    const float *src = x + ((size_t)ci * b + bi) * plane + (size_t)ki * w + kj;
                    /* Rows are short (8 to 24 floats): a loop the compiler vectorises
                     * beats a memcpy call per row. */
                    for (int oy = 0; oy < oh; oy++) {
                        const float *s = src + (size_t)oy * w;
                        for (int ox = 0; ox < ow; ox++) dst[ox] = s[ox];
                        dst += ow;
                    }
                }
            }
}

static void cpu_col2im(rumor_backend_t *be, float *dx, const float *col, int c, int b, int h, int w,
                       int k)
{
    (void)be;
    const int oh = h - k + 1, ow = w - k + 1;
    const size_t plane = (size_t)h * w, out_plane = (size_t)oh * ow;
    memset(dx, 0, (size_t)c * b * plane * sizeof *dx);
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                const float *src = col + ((size_t)(ci * k + ki) * k + kj) * b * out_plane;
                for (int bi = 0; bi < b; bi++) {
                    float *dst = dx + ((size_t)ci * b + bi) * plane + (size_t)ki * w + kj;
                    for (int oy = 0; oy < oh; oy++) {
                        float *drow = dst + (size_t)oy * w;
                        for (int ox = 0; ox < ow; ox++) drow[ox] += src[ox];
                        src += ow;
                    }
                }
            }
}

static void cpu_pool_bias_relu(rumor_backend_t *be, float *restrict y, const float *restrict x,
                               const float *bias, int c, int b, int h, int w)
{
    (void)be;
    const int ph = h / 2, pw = w / 2;
    for (int ci = 0; ci < c; ci++) {
        const float bc = bias[ci];
        for (int bi = 0; bi < b; bi++) {
            const float *in = x + ((size_t)ci * b + bi) * h * w;
            float *out = y + ((size_t)ci * b + bi) * ph * pw;
            for (int py = 0; py < ph; py++) {
                const float *r0 = in + (size_t)(2 * py) * w, *r1 = r0 + w;
                float *o = out + (size_t)py * pw;
                for (int px = 0; px < pw; px++) {
                    float m0 = max2(r0[2 * px], r0[2 * px + 1]);
                    float m1 = max2(r1[2 * px], r1[2 * px + 1]);
                    float m = max2(m0, m1) + bc;
                    o[px] = m > 0.0f ? m : 0.0f;
                }
            }
        }
    }
}

static void cpu_pool_bias_relu_bwd(rumor_backend_t *be, float *restrict xdx, float *dbias,
                                   const float *restrict dy, const float *restrict y, int c, int b,
                                   int h, int w)
{
    (void)be;
    const int ph = h / 2, pw = w / 2;
    for (int ci = 0; ci < c; ci++) {
        float db = 0.0f;
        for (int bi = 0; bi < b; bi++) {
            const size_t o = ((size_t)ci * b + bi) * ph * pw;
            float *d = xdx + ((size_t)ci * b + bi) * h * w;
            for (int py = 0; py < ph; py++) {
                float *r0 = d + (size_t)(2 * py) * w, *r1 = r0 + w;
                const float *gy = dy + o + (size_t)py * pw, *yy = y + o + (size_t)py * pw;
                /* The bias sum is the only reduction; letting it be vectorised (reordered)
                 * is what makes this loop SIMD. */
#pragma omp simd reduction(+ : db)
                for (int px = 0; px < pw; px++) {
                    const float a = r0[2 * px], bb = r0[2 * px + 1], cc = r1[2 * px], dd = r1[2 * px + 1];
                    const float g = yy[px] > 0.0f ? gy[px] : 0.0f;
                    /* The first maximum in row-major order takes the gradient; written as
                     * selects, not branches, so the loop vectorises. */
                    const float m = max2(max2(a, bb), max2(cc, dd));
                    const float ga = a == m ? g : 0.0f;
                    const float rest = a == m ? 0.0f : g;
                    const float gb = bb == m ? rest : 0.0f;
                    const float rest2 = bb == m ? 0.0f : rest;
                    const float gc = cc == m ? rest2 : 0.0f;
                    const float gd = cc == m ? 0.0f : rest2;
                    db += g;
                    r0[2 * px] = ga;
                    r0[2 * px + 1] = gb;
                    r1[2 * px] = gc;
                    r1[2 * px + 1] = gd;
                }
            }
        }
        dbias[ci] += db;
    }
}

static void cpu_transpose_cb(rumor_backend_t *be, float *dst, const float *src, int c, int b, int n,
                             bool to_bc)
{
    (void)be;
    const size_t row = (size_t)n * sizeof(float);
    for (int ci = 0; ci < c; ci++)
        for (int bi = 0; bi < b; bi++) {
            const size_t cb = ((size_t)ci * b + bi) * n, bc = ((size_t)bi * c + ci) * n;
            if (to_bc)
                memcpy(dst + bc, src + cb, row);
            else
                memcpy(dst + cb, src + bc, row);
        }
}

/* Per row: e_j = e^(z_j - max z) in float (fast_expf, vectorised), their sum in double; the
 * loss log(sum) - (z_y - max z), and dlogits (e_j / sum - [j = y]) / b. */
VECTOR_CLONES
static void cpu_softmax_xent(rumor_backend_t *be, float *dlogits, double *loss_sum, long *correct,
                             const float *logits, const int32_t *labels, int b, int k)
{
    (void)be;
    const float lo = EXP_RANGE[0], hi = EXP_RANGE[1];
    double loss = 0.0;
    long right = 0;
    const float inv_b = 1.0f / (float)b;
    for (int i = 0; i < b; i++) {
        const float *z = logits + (size_t)i * k;
        const int y = labels[i];
        float zmax = z[0];
        int amax = 0;
        for (int j = 1; j < k; j++)
            if (z[j] > zmax) zmax = z[j], amax = j;
        double sum = 0.0;
        if (dlogits) {
            float *d = dlogits + (size_t)i * k;
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < k; j++) sum += d[j] = fast_expf(z[j] - zmax, lo, hi);
            const float f = (float)(1.0 / sum) * inv_b;
#pragma omp simd
            for (int j = 0; j < k; j++) d[j] *= f;
            d[y] -= inv_b;
        } else {
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < k; j++) sum += fast_expf(z[j] - zmax, lo, hi);
        }
        /* -log softmax_y = log(sum) - (z_y - zmax), computed stably. */
        loss += log(sum) - (double)(z[y] - zmax);
        right += amax == y;
    }
    *loss_sum += loss;
    *correct += right;
}

VECTOR_CLONES
static void cpu_sgd(rumor_backend_t *be, float *restrict p, float *restrict v, float *restrict g,
                    size_t n, float lr, float momentum, float wd, bool nesterov)
{
    (void)be;
    if (nesterov) {
        for (size_t i = 0; i < n; i++) {
            const float gi = g[i] + wd * p[i];
            const float vi = momentum * v[i] + gi;
            v[i] = vi;
            p[i] -= lr * (gi + momentum * vi);
            g[i] = 0.0f;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            const float vi = momentum * v[i] + g[i] + wd * p[i];
            v[i] = vi;
            p[i] -= lr * vi;
            g[i] = 0.0f;
        }
    }
}

VECTOR_CLONES
static void cpu_adamw(rumor_backend_t *be, float *restrict p, float *restrict m, float *restrict v,
                      float *restrict g, size_t n, float lr, float b1, float b2, float eps,
                      float wd, float bc1, float bc2)
{
    (void)be;
    const float step = lr / bc1, inv_sqrt_bc2 = 1.0f / sqrtf(bc2), decay = 1.0f - lr * wd;
    for (size_t i = 0; i < n; i++) {
        const float gi = g[i];
        const float mi = b1 * m[i] + (1.0f - b1) * gi;
        const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        g[i] = 0.0f;
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}

static void cpu_axpy(rumor_backend_t *be, float *restrict y, const float *restrict x, float a,
                     size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void cpu_scale(rumor_backend_t *be, float *x, float a, size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++) x[i] *= a;
}

static void cpu_sumsq(rumor_backend_t *be, double *out, const float *x, size_t n)
{
    (void)be;
    /* Four partial sums let the compiler keep several lanes busy without -ffast-math. */
    double s[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) s[j] += (double)x[i + j] * x[i + j];
    for (; i < n; i++) s[0] += (double)x[i] * x[i];
    *out = (s[0] + s[1]) + (s[2] + s[3]);
}

/* ---- transformer ---- */

static void cpu_embed(rumor_backend_t *be, float *out, const int32_t *tok, const float *wte, const float *wpe,
                      int B, int T, int C)
{
    (void)be;
    for (int n = 0; n < B * T; n++) {
        const float *e = wte + (size_t)tok[n] * C, *p = wpe + (size_t)(n % T) * C;
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
}

static void cpu_embed_bwd(rumor_backend_t *be, float *dwte, float *dwpe, const float *dout, const int32_t *tok,
                          int B, int T, int C)
{
    (void)be;
    for (int n = 0; n < B * T; n++) {
        const float *d = dout + (size_t)n * C;
        float *e = dwte + (size_t)tok[n] * C, *p = dwpe + (size_t)(n % T) * C;
        for (int c = 0; c < C; c++) e[c] += d[c];
        for (int c = 0; c < C; c++) p[c] += d[c];
    }
}

VECTOR_CLONES
static void cpu_layernorm(rumor_backend_t *be, float *out, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, int N, int C)
{
    (void)be;
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float m = 0.0f, v = 0.0f;
#pragma omp simd reduction(+ : m)
        for (int c = 0; c < C; c++) m += xr[c];
        m /= (float)C;
#pragma omp simd reduction(+ : v)
        for (int c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
        const float r = 1.0f / sqrtf(v / (float)C + 1e-5f);
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = (xr[c] - m) * r * w[c] + b[c];
        mean[n] = m, rstd[n] = r;
    }
}

VECTOR_CLONES
static void cpu_layernorm_bwd(rumor_backend_t *be, float *dx, float *dw, float *db, const float *dout, const float *x,
                              const float *w, const float *mean, const float *rstd, int N, int C)
{
    (void)be;
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C, *d = dout + (size_t)n * C;
        float *g = dx + (size_t)n * C;
        const float m = mean[n], r = rstd[n];
        float dmean = 0.0f, dnorm_mean = 0.0f; /* means of dnorm and of dnorm * norm */
#pragma omp simd reduction(+ : dmean, dnorm_mean)
        for (int c = 0; c < C; c++) {
            const float norm = (xr[c] - m) * r, dn = w[c] * d[c];
            dmean += dn, dnorm_mean += dn * norm;
        }
        dmean /= (float)C, dnorm_mean /= (float)C;
#pragma omp simd
        for (int c = 0; c < C; c++) {
            const float norm = (xr[c] - m) * r, dn = w[c] * d[c];
            db[c] += d[c];
            dw[c] += norm * d[c];
            g[c] += (dn - dmean - norm * dnorm_mean) * r;
        }
    }
}

/* One row of causal attention scores to probabilities: softmax over row[0..t], zero beyond. */
VECTOR_CLONES
static void softmax_causal_row(float *row, int t, int T)
{
    const float lo = EXP_RANGE[0], hi = EXP_RANGE[1];
    float mx = row[0], sum = 0.0f;
#pragma omp simd reduction(max : mx)
    for (int j = 1; j <= t; j++) mx = max2(mx, row[j]);
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j <= t; j++) sum += row[j] = fast_expf(row[j] - mx, lo, hi);
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j <= t; j++) row[j] *= inv;
    for (int j = t + 1; j < T; j++) row[j] = 0.0f;
}

/* dS = P (dP - rowsum(P dP)) over row[0..t], zero beyond; r holds dP and becomes dS. */
VECTOR_CLONES
static void softmax_causal_row_bwd(float *restrict r, const float *restrict pr, int t, int T)
{
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j <= t; j++) dot += pr[j] * r[j];
#pragma omp simd
    for (int j = 0; j <= t; j++) r[j] = pr[j] * (r[j] - dot);
    for (int j = t + 1; j < T; j++) r[j] = 0.0f;
}

/* Per sequence and head: scores q.k^T from the strided rows of qkv (one sgemm), the softmax
 * over each row's causal part (the rest set to zero, so that the product with V ignores it),
 * then P V (a second sgemm) into the head's columns of out. */
static void cpu_attention(rumor_backend_t *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    (void)be;
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs, *k = q + C, *v = q + 2 * C;
            float *a = att + ((size_t)b * NH + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3, 0.0f, a, T);
            for (int t = 0; t < T; t++) softmax_causal_row(a + (size_t)t * T, t, T);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, v, C3, 0.0f,
                        out + (size_t)b * T * C + (size_t)h * hs, C);
        }
}

static void cpu_attention_bwd(rumor_backend_t *be, float *dqkv, float *datt, const float *dout, const float *qkv,
                              const float *att, int B, int T, int C, int NH)
{
    (void)be;
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const size_t at = (size_t)b * T * C3 + (size_t)h * hs;
            const float *q = qkv + at, *k = q + C, *v = q + 2 * C, *d = dout + (size_t)b * T * C + (size_t)h * hs;
            float *dq = dqkv + at, *dk = dq + C, *dv = dq + 2 * C;
            const float *p = att + ((size_t)b * NH + h) * T * T;
            float *dp = datt + ((size_t)b * NH + h) * T * T;
            /* dP = dO V^T, dV = P^T dO */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, d, C, v, C3, 0.0f, dp, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, d, C, 0.0f, dv, C3);
            /* dS = P (dP - rowsum(P dP)) over the causal part, zero beyond */
            for (int t = 0; t < T; t++) softmax_causal_row_bwd(dp + (size_t)t * T, p + (size_t)t * T, t, T);
            /* dQ = dS K / sqrt(hs), dK = dS^T Q / sqrt(hs) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dp, T, k, C3, 0.0f, dq, C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dp, T, q, C3, 0.0f, dk, C3);
        }
}

#define GELU_S 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_K 0.044715f

/* GELU's tanh form as a sigmoid: 0.5 (1 + tanh u) = 1 / (1 + e^-2u), one exponential where
 * libm's tanhf costs an expm1f and more (GELU was half of a gpt step with tanhf), and exact in
 * relative terms on both sides, where 1 + tanh u cancels for negative u. e^-2u is capped
 * below float's overflow (fast_expf clamps), so that a * s below stays finite. */
static inline float gelu_a(float v, float lo, float hi)
{
    return fast_expf(-2.0f * GELU_S * (v + GELU_K * v * v * v), lo, hi);
}

VECTOR_CLONES
static void cpu_gelu(rumor_backend_t *be, float *y, const float *x, size_t n)
{
    (void)be;
    const float lo = EXP_RANGE[0], hi = EXP_RANGE[1];
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = v / (1.0f + gelu_a(v, lo, hi));
    }
}

VECTOR_CLONES
static void cpu_gelu_bwd(rumor_backend_t *be, float *dx, const float *x, const float *dy, size_t n)
{
    (void)be;
    const float lo = EXP_RANGE[0], hi = EXP_RANGE[1];
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        /* s = sigmoid(2u), 1 - s = a s; d/dv [v s] = s + v s (1 - s) 2 u' */
        const float v = x[i], a = gelu_a(v, lo, hi), s = 1.0f / (1.0f + a);
        const float g = s + v * s * (a * s) * 2.0f * GELU_S * (1.0f + 3.0f * GELU_K * v * v);
        dx[i] = dy[i] * g;
    }
}

int rumor_lapack_eigvals_sym(double *w, double *a, int n)
{
    if (n < 0) return -3;
    if (n == 0) return 0;
    int lda = n, info = 0, lwork = -1;
    double query = 0;
    /* Eigenvalues only (jobz 'N'); a is symmetric, so which triangle is read does not
     * depend on row- or column-major storage. First ask LAPACK for its workspace size. */
    dsyev_("N", "U", &n, a, &lda, w, &query, &lwork, &info, 1, 1);
    if (info != 0) return info;
    lwork = query > 3.0 * n ? (int)query : 3 * n;
    double *work = malloc((size_t)lwork * sizeof *work);
    if (!work) return -1;
    dsyev_("N", "U", &n, a, &lda, w, work, &lwork, &info, 1, 1);
    free(work);
    return info;
}

const struct rumor_backend_ops rumor_backend_cpu_ops = {
    .name = "cpu",
    .host_memory = true,
    .open = cpu_open,
    .close = cpu_close,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_free,
    .upload_async = cpu_copy,
    .download_async = cpu_copy,
    .wait_copies = cpu_wait_copies,
    .gemm = cpu_gemm,
    .bias_act = cpu_bias_act,
    .bias_act_bwd = cpu_bias_act_bwd,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .pool_bias_relu = cpu_pool_bias_relu,
    .pool_bias_relu_bwd = cpu_pool_bias_relu_bwd,
    .transpose_cb = cpu_transpose_cb,
    .embed = cpu_embed,
    .embed_bwd = cpu_embed_bwd,
    .layernorm = cpu_layernorm,
    .layernorm_bwd = cpu_layernorm_bwd,
    .attention = cpu_attention,
    .attention_bwd = cpu_attention_bwd,
    .gelu = cpu_gelu,
    .gelu_bwd = cpu_gelu_bwd,
    .softmax_xent = cpu_softmax_xent,
    .sgd = cpu_sgd,
    .adamw = cpu_adamw,
    .axpy = cpu_axpy,
    .scale = cpu_scale,
    .sumsq = cpu_sumsq,
};
