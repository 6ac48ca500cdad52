/* backend_staged.c - the CPU backend with a device's contract (see backend_staged.h). */
#include "backend_staged.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bit 55: set, the address is non-canonical on x86-64 and kernel space on arm64 (whose
 * top-byte-ignore covers bits 56-63 only), so every access through it faults. */
#define TAG ((uintptr_t)1 << 55)
#define PENDING 16

static const struct rumor_backend_ops *const cpu = &rumor_backend_cpu_ops;

/* Deferred asynchronous copies; one test process drives one staged backend at a time. */
static struct {
    void *dst;
    const void *src;
    size_t len;
} pending[PENDING];
static int n_pending;

/* Backend memory that work queued since the device was last known idle reads or writes: on
 * a device that work may still be running, so an upload_async into it (a copy on another
 * stream, starting at once) would race with it. The device is known idle after sync, upload,
 * download, sumsq, alloc and free (each waits for the compute stream on CUDA); wait_copies
 * after a download_async also means that everything queued before the download is done (the
 * copy waited for it). A violation is recorded, and the next sync returns it. */
static struct {
    uintptr_t lo, hi;
    const char *op;
} *queued;
static size_t n_queued, cap_queued, fence; /* fence: the entries before the last download_async */
static rumor_err_t violation;
static char violation_err[RUMOR_ERR_LEN];

/* softmax_xent's sums wait for sync, as on a device: the caller's doubles and longs hold NaN
 * and LONG_MIN until then, so a loss read before sync is unmistakable (and a step computed
 * from it is NaN). value and right are what the caller's will hold once sync lands them. */
#define XENT_PENDING 64
static struct {
    double *loss;
    long *correct;
    double value;
    long right;
} xent[XENT_PENDING];
static int n_xent;

static void *tag(void *p) { return p ? (void *)((uintptr_t)p | TAG) : NULL; }

/* Backend memory back to an address the CPU backend can use; NULL stays NULL. */
static void *dev(const void *p)
{
    if (!p) return NULL;
    assert(((uintptr_t)p & TAG) && "host memory passed where backend memory belongs");
    return (void *)((uintptr_t)p & ~TAG);
}

static const void *host(const void *p)
{
    assert(!((uintptr_t)p & TAG) && "backend memory passed where host memory belongs");
    return p;
}

static void use(const char *op, const void *p, size_t len)
{
    if (!p || !len) return;
    if (n_queued == cap_queued) {
        cap_queued = cap_queued ? 2 * cap_queued : 256;
        queued = realloc(queued, cap_queued * sizeof *queued);
        assert(queued && "out of memory");
    }
    queued[n_queued].lo = (uintptr_t)p;
    queued[n_queued].hi = (uintptr_t)p + len;
    queued[n_queued].op = op;
    n_queued++;
}

/* The dense extent of a row-major matrix of rows x cols with leading dimension ld, in bytes. */
static size_t extent(int rows, int cols, int ld)
{
    return rows > 0 && cols > 0 ? ((size_t)(rows - 1) * (size_t)ld + (size_t)cols) * sizeof(float) : 0;
}

static void idle(void)
{
    n_queued = 0;
    fence = 0;
}

static void land_xent(void)
{
    for (int i = 0; i < n_xent; i++) {
        *xent[i].loss = xent[i].value;
        *xent[i].correct = xent[i].right;
    }
    n_xent = 0;
}

static void run_pending(void)
{
    for (int i = 0; i < n_pending; i++) memmove(pending[i].dst, pending[i].src, pending[i].len);
    n_pending = 0;
}

static void defer(void *dst, const void *src, size_t len)
{
    if (n_pending == PENDING) run_pending();
    pending[n_pending].dst = dst;
    pending[n_pending].src = src;
    pending[n_pending].len = len;
    n_pending++;
}

static rumor_err_t st_open(rumor_backend_t *be, int threads, char err[RUMOR_ERR_LEN])
{
    n_pending = 0;
    n_xent = 0;
    idle();
    violation = RUMOR_OK;
    return cpu->open(be, threads, err);
}

static void st_close(rumor_backend_t *be)
{
    run_pending();
    n_xent = 0; /* never synced: the sums never land, as on a device */
    free(queued);
    queued = NULL;
    cap_queued = 0;
    idle();
    cpu->close(be);
}

static void *st_alloc(rumor_backend_t *be, size_t len)
{
    idle();
    return tag(cpu->alloc(be, len));
}

static void st_free(rumor_backend_t *be, void *p)
{
    idle();
    cpu->free(be, dev(p));
}

static void st_upload(rumor_backend_t *be, void *dst, const void *src, size_t len)
{
    (void)be;
    idle();
    if (len) memmove(dev(dst), host(src), len);
}

static void st_download(rumor_backend_t *be, void *dst, const void *src, size_t len)
{
    (void)be;
    idle();
    if (len) memmove((void *)host(dst), dev(src), len);
}

static void st_copy(rumor_backend_t *be, void *dst, const void *src, size_t len)
{
    use("copy", dst, len);
    use("copy", src, len);
    cpu->copy(be, dev(dst), dev(src), len);
}

static void st_zero(rumor_backend_t *be, void *p, size_t len)
{
    use("zero", p, len);
    cpu->zero(be, dev(p), len);
}

static rumor_err_t st_sync(rumor_backend_t *be, char err[RUMOR_ERR_LEN])
{
    run_pending();
    idle();
    rumor_err_t rc = cpu->sync(be, err);
    if (rc == RUMOR_OK && violation != RUMOR_OK) {
        rc = rumor_fail(err, violation, "%s", violation_err);
        violation = RUMOR_OK;
    }
    if (rc == RUMOR_OK) land_xent();
    else n_xent = 0; /* a failed sync adds nothing */
    return rc;
}

static void *st_host_alloc(rumor_backend_t *be, size_t len) { return cpu->host_alloc(be, len); }
static void st_host_free(rumor_backend_t *be, void *p) { cpu->host_free(be, (void *)host(p)); }

static void st_upload_async(rumor_backend_t *be, void *dst, const void *src, size_t len)
{
    (void)be;
    if (!len) return;
    const uintptr_t lo = (uintptr_t)dst, hi = lo + len;
    for (size_t i = 0; i < n_queued && violation == RUMOR_OK; i++)
        if (queued[i].lo < hi && lo < queued[i].hi) {
            violation = RUMOR_EINVAL;
            snprintf(violation_err, sizeof violation_err,
                     "upload_async of %zu bytes into backend memory that queued work (%s) still uses: on a device "
                     "the copy races with it (sync first, or upload into a staging buffer)",
                     len, queued[i].op);
        }
    defer(dev(dst), host(src), len);
}

static void st_download_async(rumor_backend_t *be, void *dst, const void *src, size_t len)
{
    (void)be;
    if (!len) return;
    fence = n_queued;
    defer((void *)host(dst), dev(src), len);
}

static void st_wait_copies(rumor_backend_t *be)
{
    (void)be;
    run_pending();
    /* The copy stream waited for the work queued before its last download: that work is done. */
    if (fence > 0 && n_queued > fence) memmove(queued, queued + fence, (n_queued - fence) * sizeof *queued);
    n_queued -= fence;
    fence = 0;
}

static void st_gemm(rumor_backend_t *be, float *c, const float *a, const float *b, bool ta, bool tb, int m, int n,
                    int k, float alpha, float beta, int lda, int ldb, int ldc)
{
    use("gemm", a, ta ? extent(k, m, lda) : extent(m, k, lda));
    use("gemm", b, tb ? extent(n, k, ldb) : extent(k, n, ldb));
    use("gemm", c, extent(m, n, ldc));
    cpu->gemm(be, dev(c), dev(a), dev(b), ta, tb, m, n, k, alpha, beta, lda, ldb, ldc);
}

static void st_bias_act(rumor_backend_t *be, float *y, const float *bias, int rows, int cols, bool relu)
{
    use("bias_act", y, extent(rows, cols, cols));
    use("bias_act", bias, extent(1, cols, cols));
    cpu->bias_act(be, dev(y), dev(bias), rows, cols, relu);
}

static void st_bias_act_bwd(rumor_backend_t *be, float *dbias, float *dy, const float *y, int rows, int cols, bool relu)
{
    use("bias_act_bwd", dbias, extent(1, cols, cols));
    use("bias_act_bwd", dy, extent(rows, cols, cols));
    use("bias_act_bwd", y, extent(rows, cols, cols));
    cpu->bias_act_bwd(be, dev(dbias), dev(dy), dev(y), rows, cols, relu);
}

static void st_im2col(rumor_backend_t *be, float *col, const float *x, int c, int b, int h, int w, int k)
{
    use("im2col", col, extent(c * k * k, b * (h - k + 1) * (w - k + 1), b * (h - k + 1) * (w - k + 1)));
    use("im2col", x, extent(c * b, h * w, h * w));
    cpu->im2col(be, dev(col), dev(x), c, b, h, w, k);
}

static void st_col2im(rumor_backend_t *be, float *dx, const float *col, int c, int b, int h, int w, int k)
{
    use("col2im", dx, extent(c * b, h * w, h * w));
    use("col2im", col, extent(c * k * k, b * (h - k + 1) * (w - k + 1), b * (h - k + 1) * (w - k + 1)));
    cpu->col2im(be, dev(dx), dev(col), c, b, h, w, k);
}

static void st_pool(rumor_backend_t *be, float *y, const float *x, const float *bias, int c, int b, int h, int w)
{
    use("pool_bias_relu", y, extent(c * b, (h / 2) * (w / 2), (h / 2) * (w / 2)));
    use("pool_bias_relu", x, extent(c * b, h * w, h * w));
    use("pool_bias_relu", bias, extent(1, c, c));
    cpu->pool_bias_relu(be, dev(y), dev(x), dev(bias), c, b, h, w);
}

static void st_pool_bwd(rumor_backend_t *be, float *xdx, float *dbias, const float *dy, const float *y, int c, int b,
                        int h, int w)
{
    use("pool_bias_relu_bwd", xdx, extent(c * b, h * w, h * w));
    use("pool_bias_relu_bwd", dbias, extent(1, c, c));
    use("pool_bias_relu_bwd", dy, extent(c * b, (h / 2) * (w / 2), (h / 2) * (w / 2)));
    use("pool_bias_relu_bwd", y, extent(c * b, (h / 2) * (w / 2), (h / 2) * (w / 2)));
    cpu->pool_bias_relu_bwd(be, dev(xdx), dev(dbias), dev(dy), dev(y), c, b, h, w);
}

static void st_transpose(rumor_backend_t *be, float *dst, const float *src, int c, int b, int n, bool to_bc)
{
    use("transpose_cb", dst, extent(c * b, n, n));
    use("transpose_cb", src, extent(c * b, n, n));
    cpu->transpose_cb(be, dev(dst), dev(src), c, b, n, to_bc);
}

static void st_embed(rumor_backend_t *be, float *out, const int32_t *tok, const float *wte, const float *wpe, int B,
                     int T, int C)
{
    const size_t n = (size_t)B * T;
    use("embed", out, n * C * sizeof *out);
    use("embed", tok, n * sizeof *tok);
    use("embed", wpe, (size_t)T * C * sizeof *wpe);
    use("embed", wte, sizeof *wte); /* the rows read depend on tok: the table's start stands for it */
    cpu->embed(be, dev(out), dev(tok), dev(wte), dev(wpe), B, T, C);
}

static void st_embed_bwd(rumor_backend_t *be, float *dwte, float *dwpe, const float *dout, const int32_t *tok, int B,
                         int T, int C)
{
    const size_t n = (size_t)B * T;
    use("embed_bwd", dwte, sizeof *dwte);
    use("embed_bwd", dwpe, (size_t)T * C * sizeof *dwpe);
    use("embed_bwd", dout, n * C * sizeof *dout);
    use("embed_bwd", tok, n * sizeof *tok);
    cpu->embed_bwd(be, dev(dwte), dev(dwpe), dev(dout), dev(tok), B, T, C);
}

static void st_layernorm(rumor_backend_t *be, float *out, float *mean, float *rstd, const float *x, const float *w,
                         const float *b, int N, int C)
{
    use("layernorm", out, extent(N, C, C));
    use("layernorm", mean, extent(1, N, N));
    use("layernorm", rstd, extent(1, N, N));
    use("layernorm", x, extent(N, C, C));
    use("layernorm", w, extent(1, C, C));
    use("layernorm", b, extent(1, C, C));
    cpu->layernorm(be, dev(out), dev(mean), dev(rstd), dev(x), dev(w), dev(b), N, C);
}

static void st_layernorm_bwd(rumor_backend_t *be, float *dx, float *dw, float *db, const float *dout, const float *x,
                             const float *w, const float *mean, const float *rstd, int N, int C)
{
    use("layernorm_bwd", dx, extent(N, C, C));
    use("layernorm_bwd", dw, extent(1, C, C));
    use("layernorm_bwd", db, extent(1, C, C));
    use("layernorm_bwd", dout, extent(N, C, C));
    use("layernorm_bwd", x, extent(N, C, C));
    use("layernorm_bwd", w, extent(1, C, C));
    use("layernorm_bwd", mean, extent(1, N, N));
    use("layernorm_bwd", rstd, extent(1, N, N));
    cpu->layernorm_bwd(be, dev(dx), dev(dw), dev(db), dev(dout), dev(x), dev(w), dev(mean), dev(rstd), N, C);
}

static void st_attention(rumor_backend_t *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    use("attention", out, extent(B * T, C, C));
    use("attention", att, extent(B * NH * T, T, T));
    use("attention", qkv, extent(B * T, 3 * C, 3 * C));
    cpu->attention(be, dev(out), dev(att), dev(qkv), B, T, C, NH);
}

static void st_attention_bwd(rumor_backend_t *be, float *dqkv, float *datt, const float *dout, const float *qkv,
                             const float *att, int B, int T, int C, int NH)
{
    use("attention_bwd", dqkv, extent(B * T, 3 * C, 3 * C));
    use("attention_bwd", datt, extent(B * NH * T, T, T));
    use("attention_bwd", dout, extent(B * T, C, C));
    use("attention_bwd", qkv, extent(B * T, 3 * C, 3 * C));
    use("attention_bwd", att, extent(B * NH * T, T, T));
    cpu->attention_bwd(be, dev(dqkv), dev(datt), dev(dout), dev(qkv), dev(att), B, T, C, NH);
}

static void st_gelu(rumor_backend_t *be, float *y, const float *x, size_t n)
{
    use("gelu", y, n * sizeof *y);
    use("gelu", x, n * sizeof *x);
    cpu->gelu(be, dev(y), dev(x), n);
}

static void st_gelu_bwd(rumor_backend_t *be, float *dx, const float *x, const float *dy, size_t n)
{
    use("gelu_bwd", dx, n * sizeof *dx);
    use("gelu_bwd", x, n * sizeof *x);
    use("gelu_bwd", dy, n * sizeof *dy);
    cpu->gelu_bwd(be, dev(dx), dev(x), dev(dy), n);
}

static void st_xent(rumor_backend_t *be, float *dlogits, double *loss, long *correct, const float *logits,
                    const int32_t *labels, int b, int k)
{
    use("softmax_xent", dlogits, extent(b, k, k));
    use("softmax_xent", logits, extent(b, k, k));
    use("softmax_xent", labels, b > 0 ? (size_t)b * sizeof *labels : 0);
    int i = 0;
    while (i < n_xent && (xent[i].loss != host(loss) || xent[i].correct != host(correct))) i++;
    if (i == XENT_PENDING) { /* as many as a device holds: they land, as if a sync had come */
        land_xent();
        i = 0;
    }
    if (i == n_xent) {
        xent[i].loss = loss, xent[i].correct = correct;
        xent[i].value = *loss, xent[i].right = *correct;
        n_xent++;
    }
    cpu->softmax_xent(be, dev(dlogits), &xent[i].value, &xent[i].right, dev(logits), dev(labels), b, k);
    *loss = NAN;
    *correct = LONG_MIN;
}

static void st_sgd(rumor_backend_t *be, float *p, float *v, float *g, size_t n, float lr, float m, float wd, bool nest)
{
    use("sgd", p, n * sizeof *p);
    use("sgd", v, n * sizeof *v);
    use("sgd", g, n * sizeof *g);
    cpu->sgd(be, dev(p), dev(v), dev(g), n, lr, m, wd, nest);
}

static void st_adamw(rumor_backend_t *be, float *p, float *m, float *v, float *g, size_t n, float lr, float b1, float b2,
                     float eps, float wd, float bc1, float bc2)
{
    use("adamw", p, n * sizeof *p);
    use("adamw", m, n * sizeof *m);
    use("adamw", v, n * sizeof *v);
    use("adamw", g, n * sizeof *g);
    cpu->adamw(be, dev(p), dev(m), dev(v), dev(g), n, lr, b1, b2, eps, wd, bc1, bc2);
}

static void st_axpy(rumor_backend_t *be, float *y, const float *x, float a, size_t n)
{
    use("axpy", y, n * sizeof *y);
    use("axpy", x, n * sizeof *x);
    cpu->axpy(be, dev(y), dev(x), a, n);
}

static void st_scale(rumor_backend_t *be, float *x, float a, size_t n)
{
    use("scale", x, n * sizeof *x);
    cpu->scale(be, dev(x), a, n);
}

static void st_sumsq(rumor_backend_t *be, double *out, const float *x, size_t n)
{
    idle(); /* it waits for its result, and so for everything queued before */
    cpu->sumsq(be, (double *)host(out), dev(x), n);
}

const struct rumor_backend_ops rumor_test_staged_ops = {
    .name = "staged",
    .host_memory = false,
    .open = st_open,
    .close = st_close,
    .alloc = st_alloc,
    .free = st_free,
    .upload = st_upload,
    .download = st_download,
    .copy = st_copy,
    .zero = st_zero,
    .sync = st_sync,
    .host_alloc = st_host_alloc,
    .host_free = st_host_free,
    .upload_async = st_upload_async,
    .download_async = st_download_async,
    .wait_copies = st_wait_copies,
    .gemm = st_gemm,
    .bias_act = st_bias_act,
    .bias_act_bwd = st_bias_act_bwd,
    .im2col = st_im2col,
    .col2im = st_col2im,
    .pool_bias_relu = st_pool,
    .pool_bias_relu_bwd = st_pool_bwd,
    .transpose_cb = st_transpose,
    .embed = st_embed,
    .embed_bwd = st_embed_bwd,
    .layernorm = st_layernorm,
    .layernorm_bwd = st_layernorm_bwd,
    .attention = st_attention,
    .attention_bwd = st_attention_bwd,
    .gelu = st_gelu,
    .gelu_bwd = st_gelu_bwd,
    .softmax_xent = st_xent,
    .sgd = st_sgd,
    .adamw = st_adamw,
    .axpy = st_axpy,
    .scale = st_scale,
    .sumsq = st_sumsq,
};
