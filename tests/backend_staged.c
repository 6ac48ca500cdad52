/* backend_staged.c - the CPU backend with a device's contract (see backend_staged.h). */
#include "backend_staged.h"

#include <assert.h>
#include <stdint.h>
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
    return cpu->open(be, threads, err);
}

static void st_close(rumor_backend_t *be)
{
    run_pending();
    cpu->close(be);
}

static void *st_alloc(rumor_backend_t *be, size_t len) { return tag(cpu->alloc(be, len)); }
static void st_free(rumor_backend_t *be, void *p) { cpu->free(be, dev(p)); }

static void st_upload(rumor_backend_t *be, void *dst, const void *src, size_t len)
{
    (void)be;
    if (len) memmove(dev(dst), host(src), len);
}

static void st_download(rumor_backend_t *be, void *dst, const void *src, size_t len)
{
    (void)be;
    if (len) memmove((void *)host(dst), dev(src), len);
}

static void st_copy(rumor_backend_t *be, void *dst, const void *src, size_t len) { cpu->copy(be, dev(dst), dev(src), len); }
static void st_zero(rumor_backend_t *be, void *p, size_t len) { cpu->zero(be, dev(p), len); }

static rumor_err_t st_sync(rumor_backend_t *be, char err[RUMOR_ERR_LEN])
{
    run_pending();
    return cpu->sync(be, err);
}

static void *st_host_alloc(rumor_backend_t *be, size_t len) { return cpu->host_alloc(be, len); }
static void st_host_free(rumor_backend_t *be, void *p) { cpu->host_free(be, (void *)host(p)); }

static void st_upload_async(rumor_backend_t *be, void *dst, const void *src, size_t len)
{
    (void)be;
    if (len) defer(dev(dst), host(src), len);
}

static void st_download_async(rumor_backend_t *be, void *dst, const void *src, size_t len)
{
    (void)be;
    if (len) defer((void *)host(dst), dev(src), len);
}

static void st_wait_copies(rumor_backend_t *be)
{
    (void)be;
    run_pending();
}

static void st_gemm(rumor_backend_t *be, float *c, const float *a, const float *b, bool ta, bool tb, int m, int n,
                    int k, float alpha, float beta, int lda, int ldb, int ldc)
{
    cpu->gemm(be, dev(c), dev(a), dev(b), ta, tb, m, n, k, alpha, beta, lda, ldb, ldc);
}

static void st_bias_act(rumor_backend_t *be, float *y, const float *bias, int rows, int cols, bool relu)
{
    cpu->bias_act(be, dev(y), dev(bias), rows, cols, relu);
}

static void st_bias_act_bwd(rumor_backend_t *be, float *dbias, float *dy, const float *y, int rows, int cols, bool relu)
{
    cpu->bias_act_bwd(be, dev(dbias), dev(dy), dev(y), rows, cols, relu);
}

static void st_im2col(rumor_backend_t *be, float *col, const float *x, int c, int b, int h, int w, int k)
{
    cpu->im2col(be, dev(col), dev(x), c, b, h, w, k);
}

static void st_col2im(rumor_backend_t *be, float *dx, const float *col, int c, int b, int h, int w, int k)
{
    cpu->col2im(be, dev(dx), dev(col), c, b, h, w, k);
}

static void st_pool(rumor_backend_t *be, float *y, const float *x, const float *bias, int c, int b, int h, int w)
{
    cpu->pool_bias_relu(be, dev(y), dev(x), dev(bias), c, b, h, w);
}

static void st_pool_bwd(rumor_backend_t *be, float *xdx, float *dbias, const float *dy, const float *y, int c, int b,
                        int h, int w)
{
    cpu->pool_bias_relu_bwd(be, dev(xdx), dev(dbias), dev(dy), dev(y), c, b, h, w);
}

static void st_transpose(rumor_backend_t *be, float *dst, const float *src, int c, int b, int n, bool to_bc)
{
    cpu->transpose_cb(be, dev(dst), dev(src), c, b, n, to_bc);
}

static void st_xent(rumor_backend_t *be, float *dlogits, double *loss, long *correct, const float *logits,
                    const uint8_t *labels, int b, int k)
{
    cpu->softmax_xent(be, dev(dlogits), (double *)host(loss), (long *)host(correct), dev(logits), dev(labels), b, k);
}

static void st_sgd(rumor_backend_t *be, float *p, float *v, float *g, size_t n, float lr, float m, float wd, bool nest)
{
    cpu->sgd(be, dev(p), dev(v), dev(g), n, lr, m, wd, nest);
}

static void st_adamw(rumor_backend_t *be, float *p, float *m, float *v, float *g, size_t n, float lr, float b1, float b2,
                     float eps, float wd, float bc1, float bc2)
{
    cpu->adamw(be, dev(p), dev(m), dev(v), dev(g), n, lr, b1, b2, eps, wd, bc1, bc2);
}

static void st_axpy(rumor_backend_t *be, float *y, const float *x, float a, size_t n) { cpu->axpy(be, dev(y), dev(x), a, n); }
static void st_scale(rumor_backend_t *be, float *x, float a, size_t n) { cpu->scale(be, dev(x), a, n); }

static void st_sumsq(rumor_backend_t *be, double *out, const float *x, size_t n)
{
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
    .softmax_xent = st_xent,
    .sgd = st_sgd,
    .adamw = st_adamw,
    .axpy = st_axpy,
    .scale = st_scale,
    .sumsq = st_sumsq,
};
