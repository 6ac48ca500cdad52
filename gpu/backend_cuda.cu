/*
 * backend_cuda.cu - the CUDA backend: cuBLAS for every matrix product, kernels for the rest,
 * behind the ops table of src/ml/backend.h. This file is the host side (errors, launch geometry,
 * the device's memory, streams and staging, each op's launches); the kernels are in
 * backend_cuda_kernels.cu (backend_cuda_impl.h). The CPU backend (src/ml/backend_cpu.c) is the
 * oracle: each kernel computes what its CPU twin computes, in the same arithmetic where that
 * is cheap, so tests compare tightly (tests/test_backend_cuda.c).
 *
 * Non-goals: several devices (device 0 of those CUDA_VISIBLE_DEVICES shows), mixed precision
 * (TF32 matrix products only when RUMOR_CUDA_TF32=1 asks), CUDA graphs, kernels tuned for
 * models much larger than the ones rumor trains.
 *
 * Streams. Everything an op does runs on one non-blocking compute stream, in call order, so
 * ops need no synchronisation between them. A second stream carries the staging copies
 * (upload_async, download_async): a trainer uploads batch k+1 while batch k computes, and a
 * node downloads its parameters for gossip after its last step without a device-wide wait.
 * download_async orders itself after the compute stream with an event; upload_async does not
 * (its destination is a staging buffer nothing queued uses, which is the whole point).
 *
 * Memory. alloc is cudaMalloc (256-byte aligned) zeroed before it returns; host_alloc is
 * cudaMallocHost (page-locked, so copies are DMA at full link speed and can be asynchronous).
 * Parameters, gradients and optimizer state stay on the device in the model's flat layout;
 * checkpoints download them, so a file is the same whichever backend wrote it.
 *
 * Errors. Every CUDA and cuBLAS call is checked. The first failure is kept, with its call
 * site (file:line and the call) and CUDA's own sentence, and sync returns it; later ops still
 * run (their results are not used: sync has failed). A kernel fault surfaces at the next
 * stream synchronisation, which is the call site then recorded. Nothing fails silently: a
 * loss or a sum of squares that could not be read comes back as NaN besides the error.
 * open fails with one sentence ("no CUDA driver", "no CUDA device", a device this build has
 * no code for, or CUDA's error) so that `--device auto` can fall back and say why; the first
 * two, and only they, return RUMOR_ENODEV (the machine has no GPU, not a broken one).
 *
 * Scalars to the host. softmax_xent reduces its loss and count on the device into a slot and
 * copies it back in sync, which adds it to the caller's sums: a training step then has no
 * wait in its middle. sumsq copies its result back at once (a sync point).
 *
 * Determinism and exactness. Reductions use fixed grids and fixed orders (per-block partial
 * sums, then one pass in order), never atomics, so a run repeats bit for bit on one device.
 * --fmad=false (gpu/meson.build) keeps a*b+c as two roundings, as the CPU computes it: the
 * elementwise ops (optimizers, mixing, bias, pooling, im2col/col2im) then match the CPU
 * backend bit for bit; matrix products and reductions differ by summation order only.
 *
 * Invariants: sizes are size_t wherever a count can pass 2^31 (flat buffers up to 2^36
 * floats); every loop is grid-stride, so any n runs on a bounded grid; kernels read and write
 * only inside the buffers the ops contract names.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend.h"
}

#include "backend_cuda_impl.h"

#define THREADS 256      /* threads per block of the 1-D kernels (a multiple of 32) */
#define XENT_SLOTS 64    /* softmax_xent results waiting for the next sync */
#define REDUCE_PARTS 64  /* most per-channel partial sums of a bias gradient */

typedef struct {
    cudaStream_t stream; /* compute: every op */
    cudaStream_t copy;   /* staging copies */
    cudaEvent_t queued;  /* "the compute stream up to here", for download_async */
    cublasHandle_t blas;
    int max_blocks;      /* grid cap of the streaming kernels: enough to fill the device */
    void *scratch;       /* partial sums and per-row results of the op running; grows */
    size_t scratch_len;
    xent_slot_t *xent_dev, *xent_host; /* device slots and their pinned mirror */
    struct {
        double *loss;
        long *correct;
    } pending[XENT_SLOTS];
    int n_pending;
    double *scalar_host; /* pinned: sumsq's result */
    rumor_err_t rc;      /* the first failure since the last sync */
    char err[RUMOR_ERR_LEN];
} cuda_t;

static cuda_t *impl(rumor_backend_t *be) { return (cuda_t *)be->impl; }

// ---- errors ----

static void record(cuda_t *c, rumor_err_t code, const char *fmt, ...) RUMOR_PRINTF(3, 4);
static void record(cuda_t *c, rumor_err_t code, const char *fmt, ...)
{
    if (c->rc != RUMOR_OK) return;
    c->rc = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

static bool cuda_ok(cuda_t *c, cudaError_t e, const char *file, int line, const char *call)
{
    if (e == cudaSuccess) return true;
    /* CUDA keeps a failed call's error as its "last error" too: take it, or the next launch's
     * cudaGetLastError reports it again under that launch, after sync has returned it. */
    (void)cudaGetLastError();
    record(c, e == cudaErrorMemoryAllocation ? RUMOR_ENOMEM : RUMOR_EIO, "CUDA %s at %s:%d (%.80s): %s",
           cudaGetErrorName(e), file, line, call, cudaGetErrorString(e));
    return false;
}

static bool blas_ok(cuda_t *c, cublasStatus_t s, const char *file, int line, const char *call)
{
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    record(c, s == CUBLAS_STATUS_ALLOC_FAILED ? RUMOR_ENOMEM : RUMOR_EIO, "cuBLAS %s at %s:%d (%.80s)",
           cublasGetStatusString(s), file, line, call);
    return false;
}

#define CUDA_OK(c, call) cuda_ok((c), (call), __FILE__, __LINE__, #call)
#define BLAS_OK(c, call) blas_ok((c), (call), __FILE__, __LINE__, #call)
/* After a launch: a bad configuration shows here, a fault in the kernel at the next sync. */
#define LAUNCHED(c, kernel) cuda_ok((c), cudaGetLastError(), __FILE__, __LINE__, "launch " kernel)

// ---- launch geometry ----

/* Blocks for n elements, one per THREADS, capped (the loops are grid-stride); 0 when n is 0. */
static unsigned grid_for(const cuda_t *c, size_t n)
{
    const size_t blocks = (n + THREADS - 1) / THREADS;
    return (unsigned)(blocks < (size_t)c->max_blocks ? blocks : (size_t)c->max_blocks);
}

/* Scratch device memory for one op's intermediates. Ops run in stream order, so one buffer
 * serves them all; growing it waits for the stream first (a kernel may still read the old
 * one). NULL (and the error recorded) when the device is out of memory. */
static void *scratch(cuda_t *c, size_t len)
{
    if (len <= c->scratch_len) return c->scratch;
    if (!CUDA_OK(c, cudaStreamSynchronize(c->stream))) return NULL;
    if (c->scratch) CUDA_OK(c, cudaFree(c->scratch));
    c->scratch = NULL;
    c->scratch_len = 0;
    size_t want = (size_t)1 << 20;
    while (want < len) want *= 2;
    if (!CUDA_OK(c, cudaMalloc(&c->scratch, want))) return NULL;
    c->scratch_len = want;
    return c->scratch;
}

// ---- lifecycle ----

static void release(cuda_t *c)
{
    /* Teardown: errors here change nothing, so none is recorded. */
    if (c->stream) (void)cudaStreamSynchronize(c->stream);
    if (c->copy) (void)cudaStreamSynchronize(c->copy);
    if (c->blas) cublasDestroy(c->blas);
    if (c->scratch) (void)cudaFree(c->scratch);
    if (c->xent_dev) (void)cudaFree(c->xent_dev);
    if (c->xent_host) (void)cudaFreeHost(c->xent_host);
    if (c->scalar_host) (void)cudaFreeHost(c->scalar_host);
    if (c->queued) (void)cudaEventDestroy(c->queued);
    if (c->stream) (void)cudaStreamDestroy(c->stream);
    if (c->copy) (void)cudaStreamDestroy(c->copy);
    (void)cudaGetLastError();
    free(c);
}

static rumor_err_t cuda_open(rumor_backend_t *be, int threads, char err[RUMOR_ERR_LEN])
{
    (void)threads; /* host threads only gather batches; the device needs none */
    int driver = 0, count = 0;
    (void)cudaDriverGetVersion(&driver);
    /* Only these two are RUMOR_ENODEV, "this machine has no GPU": a driver too old, a device
     * this build cannot run or a failing call is a problem on a machine that has one. */
    if (driver == 0) return rumor_fail(err, RUMOR_ENODEV, "no CUDA driver (libcuda.so.1 not found)");
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0)) {
        (void)cudaGetLastError();
        return rumor_fail(err, RUMOR_ENODEV, "no CUDA device");
    }
    if (e == cudaErrorInsufficientDriver) {
        (void)cudaGetLastError();
        return rumor_fail(err, RUMOR_ENOTSUP,
                          "the CUDA driver (%d.%d) is older than the CUDA runtime rumor was built with (%d.%d)",
                          driver / 1000, driver % 1000 / 10, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rumor_fail(err, RUMOR_ENOTSUP, "CUDA unusable: %s", cudaGetErrorString(e));
    }
    cudaDeviceProp prop;
    if ((e = cudaSetDevice(0)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) {
        (void)cudaGetLastError();
        return rumor_fail(err, RUMOR_ENOTSUP, "CUDA device 0 unusable: %s", cudaGetErrorString(e));
    }
    /* A device this build has no code for fails every launch: say so now, once. */
    cudaFuncAttributes fa;
    if ((e = cudaFuncGetAttributes(&fa, k_axpy)) != cudaSuccess) {
        (void)cudaGetLastError();
        return rumor_fail(err, RUMOR_ENOTSUP,
                          "CUDA device %s (sm_%d%d) cannot run this build (sm_80, sm_90, PTX compute_90): %s",
                          prop.name, prop.major, prop.minor, cudaGetErrorString(e));
    }
    cuda_t *c = (cuda_t *)calloc(1, sizeof *c);
    if (!c) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    c->max_blocks = prop.multiProcessorCount * 32;
    const char *tf32 = getenv("RUMOR_CUDA_TF32");
    const bool use_tf32 = tf32 && strcmp(tf32, "1") == 0;
    bool ok = CUDA_OK(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) &&
              CUDA_OK(c, cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking)) &&
              CUDA_OK(c, cudaEventCreateWithFlags(&c->queued, cudaEventDisableTiming)) &&
              CUDA_OK(c, cudaMalloc(&c->xent_dev, XENT_SLOTS * sizeof *c->xent_dev)) &&
              CUDA_OK(c, cudaMallocHost(&c->xent_host, XENT_SLOTS * sizeof *c->xent_host)) &&
              CUDA_OK(c, cudaMallocHost(&c->scalar_host, sizeof *c->scalar_host)) &&
              BLAS_OK(c, cublasCreate(&c->blas)) && BLAS_OK(c, cublasSetStream(c->blas, c->stream)) &&
              BLAS_OK(c, cublasSetMathMode(c->blas, use_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    if (!ok) {
        rumor_err_t rc = rumor_fail(err, c->rc, "CUDA device %s: %s", prop.name, c->err);
        release(c);
        return rc;
    }
    be->impl = c;
    rumor_log(RUMOR_LOG_INFO, "cuda: %s (sm_%d%d, %d SMs, %.1f GiB), matrix products in %s", prop.name, prop.major,
              prop.minor, prop.multiProcessorCount, (double)prop.totalGlobalMem / 1073741824.0,
              use_tf32 ? "TF32 (RUMOR_CUDA_TF32=1)" : "exact float32");
    return RUMOR_OK;
}

static void cuda_close(rumor_backend_t *be)
{
    if (be->impl) release(impl(be));
    be->impl = NULL;
}

static void *cuda_alloc(rumor_backend_t *be, size_t len)
{
    cuda_t *c = impl(be);
    size_t rounded = (len + 255) & ~(size_t)255;
    if (rounded < len) return NULL;
    if (!rounded) rounded = 256;
    void *p = NULL;
    if (cudaMalloc(&p, rounded) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is the caller's to report, not a failed op */
        return NULL;
    }
    /* Zeroed when it returns, whichever stream touches it first. */
    if (!CUDA_OK(c, cudaMemsetAsync(p, 0, rounded, c->stream)) || !CUDA_OK(c, cudaStreamSynchronize(c->stream))) {
        (void)cudaFree(p);
        return NULL;
    }
    return p;
}

static void cuda_free(rumor_backend_t *be, void *p)
{
    cuda_t *c = impl(be);
    if (!p) return;
    /* Work still queued may use p: let it finish first. */
    CUDA_OK(c, cudaStreamSynchronize(c->stream));
    CUDA_OK(c, cudaStreamSynchronize(c->copy));
    CUDA_OK(c, cudaFree(p));
}

static void cuda_upload(rumor_backend_t *be, void *dst, const void *src_host, size_t len)
{
    cuda_t *c = impl(be);
    if (!len) return;
    if (CUDA_OK(c, cudaMemcpyAsync(dst, src_host, len, cudaMemcpyHostToDevice, c->stream)))
        CUDA_OK(c, cudaStreamSynchronize(c->stream));
}

static void cuda_download(rumor_backend_t *be, void *dst_host, const void *src, size_t len)
{
    cuda_t *c = impl(be);
    if (!len) return;
    if (CUDA_OK(c, cudaMemcpyAsync(dst_host, src, len, cudaMemcpyDeviceToHost, c->stream)))
        CUDA_OK(c, cudaStreamSynchronize(c->stream));
}

static void cuda_copy(rumor_backend_t *be, void *dst, const void *src, size_t len)
{
    cuda_t *c = impl(be);
    if (dst == src || !len) return;
    const uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (d < s + len && s < d + len) { /* overlapping (memmove semantics): through scratch */
        void *tmp = scratch(c, len);
        if (!tmp) return;
        CUDA_OK(c, cudaMemcpyAsync(tmp, src, len, cudaMemcpyDeviceToDevice, c->stream));
        src = tmp;
    }
    CUDA_OK(c, cudaMemcpyAsync(dst, src, len, cudaMemcpyDeviceToDevice, c->stream));
}

static void cuda_zero(rumor_backend_t *be, void *p, size_t len)
{
    cuda_t *c = impl(be);
    if (len) CUDA_OK(c, cudaMemsetAsync(p, 0, len, c->stream));
}

/* Copy the pending softmax_xent slots home and add them to their sums (only when nothing
 * failed: a failed step's numbers are not numbers). Waits for the compute stream. */
static void flush(cuda_t *c)
{
    const int n = c->n_pending;
    c->n_pending = 0;
    if (n && !CUDA_OK(c, cudaMemcpyAsync(c->xent_host, c->xent_dev, (size_t)n * sizeof *c->xent_host,
                                         cudaMemcpyDeviceToHost, c->stream)))
        return;
    if (!CUDA_OK(c, cudaStreamSynchronize(c->stream)) || c->rc != RUMOR_OK) return;
    for (int i = 0; i < n; i++) {
        if (c->pending[i].loss) *c->pending[i].loss += c->xent_host[i].loss;
        if (c->pending[i].correct) *c->pending[i].correct += (long)c->xent_host[i].correct;
    }
}

static rumor_err_t cuda_sync(rumor_backend_t *be, char err[RUMOR_ERR_LEN])
{
    cuda_t *c = impl(be);
    flush(c);
    CUDA_OK(c, cudaStreamSynchronize(c->copy));
    const rumor_err_t rc = c->rc;
    if (rc != RUMOR_OK) {
        rumor_fail(err, rc, "%s", c->err);
        c->rc = RUMOR_OK;
        c->err[0] = 0;
    }
    return rc;
}

// ---- staging ----

static void *cuda_host_alloc(rumor_backend_t *be, size_t len)
{
    (void)be;
    void *p = NULL;
    if (cudaMallocHost(&p, len ? len : 64) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

static void cuda_host_free(rumor_backend_t *be, void *p)
{
    cuda_t *c = impl(be);
    if (!p) return;
    CUDA_OK(c, cudaStreamSynchronize(c->copy)); /* an async copy may still read or write it */
    CUDA_OK(c, cudaFreeHost(p));
}

static void cuda_upload_async(rumor_backend_t *be, void *dst, const void *src_host, size_t len)
{
    cuda_t *c = impl(be);
    if (len) CUDA_OK(c, cudaMemcpyAsync(dst, src_host, len, cudaMemcpyHostToDevice, c->copy));
}

static void cuda_download_async(rumor_backend_t *be, void *dst_host, const void *src, size_t len)
{
    cuda_t *c = impl(be);
    if (!len) return;
    if (CUDA_OK(c, cudaEventRecord(c->queued, c->stream)) && CUDA_OK(c, cudaStreamWaitEvent(c->copy, c->queued, 0)))
        CUDA_OK(c, cudaMemcpyAsync(dst_host, src, len, cudaMemcpyDeviceToHost, c->copy));
}

static void cuda_wait_copies(rumor_backend_t *be)
{
    cuda_t *c = impl(be);
    CUDA_OK(c, cudaStreamSynchronize(c->copy));
}

// ---- dense layers ----

static void cuda_gemm(rumor_backend_t *be, float *cm, const float *a, const float *b, bool trans_a, bool trans_b,
                      int m, int n, int k, float alpha, float beta, int lda, int ldb, int ldc)
{
    cuda_t *c = impl(be);
    if (m <= 0 || n <= 0) return;
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the same memory with
     * the operands swapped and m, n exchanged; the transposes keep their meaning. */
    BLAS_OK(c, cublasSgemm(c->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
                           k, &alpha, b, ldb, a, lda, &beta, cm, ldc));
}

static void cuda_bias_act(rumor_backend_t *be, float *y, const float *bias, int rows, int cols, bool relu)
{
    cuda_t *c = impl(be);
    const size_t total = (size_t)(rows > 0 ? rows : 0) * (size_t)(cols > 0 ? cols : 0);
    if (!total) return;
    k_bias_act<<<grid_for(c, total), THREADS, 0, c->stream>>>(y, bias, total, cols, relu);
    LAUNCHED(c, "k_bias_act");
}

static void cuda_bias_act_bwd(rumor_backend_t *be, float *dbias, float *dy, const float *y, int rows, int cols,
                              bool relu)
{
    cuda_t *c = impl(be);
    if (rows <= 0 || cols <= 0) return;
    /* Row blocks of 8 rows per thread row; at most REDUCE_PARTS of them per column. */
    int parts = (rows + 255) / 256;
    if (parts > REDUCE_PARTS) parts = REDUCE_PARTS;
    float *part = (float *)scratch(c, (size_t)parts * cols * sizeof(float));
    if (!part) return;
    const dim3 grid((unsigned)((cols + 31) / 32), (unsigned)parts), block(32, 8);
    k_bias_bwd<<<grid, block, 0, c->stream>>>(part, dy, y, rows, cols, relu);
    if (!LAUNCHED(c, "k_bias_bwd")) return;
    k_add_parts<<<grid_for(c, (size_t)cols), THREADS, 0, c->stream>>>(dbias, part, cols, parts, 1, (size_t)cols);
    LAUNCHED(c, "k_add_parts");
}

// ---- convolution ----

static void cuda_im2col(rumor_backend_t *be, float *col, const float *x, int ch, int b, int h, int w, int k)
{
    cuda_t *c = impl(be);
    const int oh = h - k + 1, ow = w - k + 1;
    if (ch <= 0 || b <= 0 || k <= 0 || oh <= 0 || ow <= 0) return;
    const size_t n = (size_t)b * oh * ow, rows = (size_t)ch * k * k;
    const size_t bx = (n + THREADS - 1) / THREADS;
    const dim3 grid((unsigned)(bx < 1024 ? bx : 1024), (unsigned)(rows < 1024 ? rows : 1024));
    k_im2col<<<grid, THREADS, 0, c->stream>>>(col, x, ch, b, h, w, k, oh, ow);
    LAUNCHED(c, "k_im2col");
}

static void cuda_col2im(rumor_backend_t *be, float *dx, const float *col, int ch, int b, int h, int w, int k)
{
    cuda_t *c = impl(be);
    const int oh = h - k + 1, ow = w - k + 1;
    if (ch <= 0 || b <= 0 || h <= 0 || w <= 0 || k <= 0 || oh <= 0 || ow <= 0) return;
    const size_t total = (size_t)ch * b * h * w;
    k_col2im<<<grid_for(c, total), THREADS, 0, c->stream>>>(dx, col, ch, b, h, w, k, oh, ow);
    LAUNCHED(c, "k_col2im");
}

static void cuda_pool_bias_relu(rumor_backend_t *be, float *y, const float *x, const float *bias, int ch, int b,
                                int h, int w)
{
    cuda_t *c = impl(be);
    if (ch <= 0 || b <= 0 || h < 2 || w < 2) return;
    const size_t total = (size_t)ch * b * (h / 2) * (w / 2);
    k_pool<<<grid_for(c, total), THREADS, 0, c->stream>>>(y, x, bias, ch, b, h, w);
    LAUNCHED(c, "k_pool");
}

static void cuda_pool_bias_relu_bwd(rumor_backend_t *be, float *xdx, float *dbias, const float *dy, const float *y,
                                    int ch, int b, int h, int w)
{
    cuda_t *c = impl(be);
    if (ch <= 0 || b <= 0 || h < 2 || w < 2) return;
    const size_t per = (size_t)b * (h / 2) * (w / 2);
    /* Enough blocks per channel to fill the device, at most REDUCE_PARTS (partial sums). */
    size_t parts = (per + THREADS * 4 - 1) / (THREADS * 4);
    const size_t want = ((size_t)c->max_blocks + (size_t)ch - 1) / (size_t)ch;
    if (parts > want) parts = want;
    if (parts > REDUCE_PARTS) parts = REDUCE_PARTS;
    if (parts < 1) parts = 1;
    float *part = (float *)scratch(c, parts * (size_t)ch * sizeof(float));
    if (!part) return;
    const dim3 grid((unsigned)parts, (unsigned)(ch < 65535 ? ch : 65535));
    k_pool_bwd<<<grid, THREADS, 0, c->stream>>>(xdx, part, dy, y, ch, b, h, w);
    if (!LAUNCHED(c, "k_pool_bwd")) return;
    k_add_parts<<<grid_for(c, (size_t)ch), THREADS, 0, c->stream>>>(dbias, part, ch, (int)parts, parts, 1);
    LAUNCHED(c, "k_add_parts");
}

static void cuda_transpose_cb(rumor_backend_t *be, float *dst, const float *src, int ch, int b, int n, bool to_bc)
{
    cuda_t *c = impl(be);
    if (ch <= 0 || b <= 0 || n <= 0) return;
    const size_t total = (size_t)ch * b * n;
    k_transpose_cb<<<grid_for(c, total), THREADS, 0, c->stream>>>(dst, src, ch, b, n, to_bc);
    LAUNCHED(c, "k_transpose_cb");
}

// ---- loss ----

static void cuda_softmax_xent(rumor_backend_t *be, float *dlogits, double *loss_sum, long *correct,
                              const float *logits, const int32_t *labels, int b, int k)
{
    cuda_t *c = impl(be);
    if (b <= 0 || k <= 0) return;
    if (c->n_pending == XENT_SLOTS) flush(c); /* many calls without a sync: make room */
    /* Per-row results: b doubles, then b ints. */
    double *row_loss = (double *)scratch(c, (size_t)b * (sizeof(double) + sizeof(int)));
    if (!row_loss) return; /* recorded: sync fails */
    int *row_hit = (int *)(row_loss + b);
    const int warps = THREADS / 32;
    const size_t blocks = ((size_t)b + warps - 1) / warps;
    k_xent<<<(unsigned)(blocks < (size_t)c->max_blocks ? blocks : (size_t)c->max_blocks), THREADS, 0, c->stream>>>(
        dlogits, row_loss, row_hit, logits, labels, b, k, 1.0f / (float)b);
    if (!LAUNCHED(c, "k_xent")) return;
    const int slot = c->n_pending;
    k_xent_sum<<<1, THREADS, 0, c->stream>>>(c->xent_dev + slot, row_loss, row_hit, b);
    if (!LAUNCHED(c, "k_xent_sum")) return;
    c->pending[slot].loss = loss_sum;
    c->pending[slot].correct = correct;
    c->n_pending = slot + 1;
}

// ---- transformer ----

/* Blocks for `rows` rows at one warp a row, capped. */
static unsigned grid_rows(const cuda_t *c, size_t rows)
{
    const size_t warps = THREADS / 32, blocks = (rows + warps - 1) / warps;
    return (unsigned)(blocks < (size_t)c->max_blocks ? blocks : (size_t)c->max_blocks);
}

static void cuda_embed(rumor_backend_t *be, float *out, const int32_t *tok, const float *wte, const float *wpe, int B,
                       int T, int C)
{
    cuda_t *c = impl(be);
    const size_t total = (size_t)B * T * C;
    if (!total) return;
    k_embed<<<grid_for(c, total), THREADS, 0, c->stream>>>(out, tok, wte, wpe, total, T, C);
    LAUNCHED(c, "k_embed");
}

static void cuda_embed_bwd(rumor_backend_t *be, float *dwte, float *dwpe, const float *dout, const int32_t *tok,
                           int B, int T, int C)
{
    cuda_t *c = impl(be);
    if (B <= 0 || T <= 0 || C <= 0) return;
    const dim3 grid((unsigned)((C + THREADS - 1) / THREADS), WTE_CLASSES);
    k_embed_bwd_wte<<<grid, THREADS, 0, c->stream>>>(dwte, dout, tok, B * T, C);
    if (!LAUNCHED(c, "k_embed_bwd_wte")) return;
    k_embed_bwd_wpe<<<grid_for(c, (size_t)T * C), THREADS, 0, c->stream>>>(dwpe, dout, B, T, C);
    LAUNCHED(c, "k_embed_bwd_wpe");
}

static void cuda_layernorm(rumor_backend_t *be, float *out, float *mean, float *rstd, const float *x, const float *w,
                           const float *b, int N, int C)
{
    cuda_t *c = impl(be);
    if (N <= 0 || C <= 0) return;
    k_layernorm<<<grid_rows(c, (size_t)N), THREADS, 0, c->stream>>>(out, mean, rstd, x, w, b, N, C);
    LAUNCHED(c, "k_layernorm");
}

static void cuda_layernorm_bwd(rumor_backend_t *be, float *dx, float *dw, float *db, const float *dout,
                               const float *x, const float *w, const float *mean, const float *rstd, int N, int C)
{
    cuda_t *c = impl(be);
    if (N <= 0 || C <= 0) return;
    k_layernorm_bwd_x<<<grid_rows(c, (size_t)N), THREADS, 0, c->stream>>>(dx, dout, x, w, mean, rstd, N, C);
    if (!LAUNCHED(c, "k_layernorm_bwd_x")) return;
    int parts = (N + 255) / 256;
    if (parts > REDUCE_PARTS) parts = REDUCE_PARTS;
    float *part = (float *)scratch(c, 2 * (size_t)parts * C * sizeof(float));
    if (!part) return;
    const dim3 grid((unsigned)((C + 31) / 32), (unsigned)parts), block(32, 8);
    k_layernorm_bwd_wb<<<grid, block, 0, c->stream>>>(part, part + (size_t)parts * C, dout, x, mean, rstd, N, C);
    if (!LAUNCHED(c, "k_layernorm_bwd_wb")) return;
    k_add_parts<<<grid_for(c, (size_t)C), THREADS, 0, c->stream>>>(dw, part, C, parts, 1, (size_t)C);
    if (!LAUNCHED(c, "k_add_parts")) return;
    k_add_parts<<<grid_for(c, (size_t)C), THREADS, 0, c->stream>>>(db, part + (size_t)parts * C, C, parts, 1,
                                                                   (size_t)C);
    LAUNCHED(c, "k_add_parts");
}

/* Row-major C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, each operand a fixed stride
 * from the last: cuBLAS's column-major product with the operands swapped (as cuda_gemm). */
static void gemm_batched(cuda_t *c, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                         int lda, long long sa, const float *b, int ldb, long long sb, float beta, float *cm, int ldc,
                         long long sc, int batch)
{
    BLAS_OK(c, cublasSgemmStridedBatched(c->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                         trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, sb, a, lda, sa,
                                         &beta, cm, ldc, sc, batch));
}

/* Attention's shapes: a head's width, qkv's row, the scores' scale, and the strides from one
 * sequence to the next in qkv, att and out. */
typedef struct {
    int hs, C3;
    float scale;
    long long sq, sa, so;
} attn_t;

static attn_t attn_geometry(int T, int C, int NH)
{
    const int hs = C / NH;
    return attn_t{hs, 3 * C, 1.0f / sqrtf((float)hs), (long long)T * 3 * C, (long long)NH * T * T, (long long)T * C};
}

/* Per head, batched over the sequences: scores q.k^T / sqrt(hs) into att, the causal softmax
 * of every row, then P V into the head's columns of out (the CPU backend's products). */
static void cuda_attention(rumor_backend_t *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    cuda_t *c = impl(be);
    if (B <= 0 || T <= 0 || NH <= 0) return;
    const attn_t g = attn_geometry(T, C, NH);
    const int hs = g.hs, C3 = g.C3;
    const float scale = g.scale;
    const long long sq = g.sq, sa = g.sa, so = g.so;
    for (int h = 0; h < NH; h++) {
        const float *q = qkv + (size_t)h * hs;
        gemm_batched(c, false, true, T, T, hs, scale, q, C3, sq, q + C, C3, sq, 0.0f, att + (size_t)h * T * T, T, sa,
                     B);
    }
    const size_t rows = (size_t)B * NH * T;
    k_softmax_causal<<<grid_rows(c, rows), THREADS, 0, c->stream>>>(att, rows, T);
    if (!LAUNCHED(c, "k_softmax_causal")) return;
    for (int h = 0; h < NH; h++)
        gemm_batched(c, false, false, T, hs, T, 1.0f, att + (size_t)h * T * T, T, sa, qkv + 2 * C + (size_t)h * hs, C3,
                     sq, 0.0f, out + (size_t)h * hs, C, so, B);
}

static void cuda_attention_bwd(rumor_backend_t *be, float *dqkv, float *datt, const float *dout, const float *qkv,
                               const float *att, int B, int T, int C, int NH)
{
    cuda_t *c = impl(be);
    if (B <= 0 || T <= 0 || NH <= 0) return;
    const attn_t g = attn_geometry(T, C, NH);
    const int hs = g.hs, C3 = g.C3;
    const long long sq = g.sq, sa = g.sa, so = g.so;
    for (int h = 0; h < NH; h++) {
        const size_t at = (size_t)h * hs, ah = (size_t)h * T * T;
        /* dP = dO V^T, dV = P^T dO */
        gemm_batched(c, false, true, T, T, hs, 1.0f, dout + at, C, so, qkv + 2 * C + at, C3, sq, 0.0f, datt + ah, T,
                     sa, B);
        gemm_batched(c, true, false, T, hs, T, 1.0f, att + ah, T, sa, dout + at, C, so, 0.0f, dqkv + 2 * C + at, C3,
                     sq, B);
    }
    const size_t rows = (size_t)B * NH * T;
    k_softmax_causal_bwd<<<grid_rows(c, rows), THREADS, 0, c->stream>>>(datt, att, rows, T);
    if (!LAUNCHED(c, "k_softmax_causal_bwd")) return;
    for (int h = 0; h < NH; h++) {
        const size_t at = (size_t)h * hs, ah = (size_t)h * T * T;
        /* dQ = dS K / sqrt(hs), dK = dS^T Q / sqrt(hs) */
        gemm_batched(c, false, false, T, hs, T, g.scale, datt + ah, T, sa, qkv + C + at, C3, sq, 0.0f, dqkv + at, C3,
                     sq, B);
        gemm_batched(c, true, false, T, hs, T, g.scale, datt + ah, T, sa, qkv + at, C3, sq, 0.0f, dqkv + C + at, C3,
                     sq, B);
    }
}

static void cuda_gelu(rumor_backend_t *be, float *y, const float *x, size_t n)
{
    cuda_t *c = impl(be);
    if (!n) return;
    k_gelu<<<grid_for(c, n), THREADS, 0, c->stream>>>(y, x, n);
    LAUNCHED(c, "k_gelu");
}

static void cuda_gelu_bwd(rumor_backend_t *be, float *dx, const float *x, const float *dy, size_t n)
{
    cuda_t *c = impl(be);
    if (!n) return;
    k_gelu_bwd<<<grid_for(c, n), THREADS, 0, c->stream>>>(dx, x, dy, n);
    LAUNCHED(c, "k_gelu_bwd");
}

// ---- optimizers and mixing ----

static void cuda_sgd(rumor_backend_t *be, float *p, float *v, float *g, size_t n, float lr, float momentum, float wd,
                     bool nesterov)
{
    cuda_t *c = impl(be);
    if (!n) return;
    k_sgd<<<grid_for(c, n), THREADS, 0, c->stream>>>(p, v, g, n, lr, momentum, wd, nesterov);
    LAUNCHED(c, "k_sgd");
}

static void cuda_adamw(rumor_backend_t *be, float *p, float *m, float *v, float *g, size_t n, float lr, float b1,
                       float b2, float eps, float wd, float bc1, float bc2)
{
    cuda_t *c = impl(be);
    if (!n) return;
    /* The per-step constants exactly as the CPU backend computes them. */
    const float step = lr / bc1, inv_sqrt_bc2 = 1.0f / sqrtf(bc2), decay = 1.0f - lr * wd;
    k_adamw<<<grid_for(c, n), THREADS, 0, c->stream>>>(p, m, v, g, n, b1, b2, eps, step, inv_sqrt_bc2, decay);
    LAUNCHED(c, "k_adamw");
}

static void cuda_axpy(rumor_backend_t *be, float *y, const float *x, float a, size_t n)
{
    cuda_t *c = impl(be);
    if (!n) return;
    k_axpy<<<grid_for(c, n), THREADS, 0, c->stream>>>(y, x, a, n);
    LAUNCHED(c, "k_axpy");
}

static void cuda_scale(rumor_backend_t *be, float *x, float a, size_t n)
{
    cuda_t *c = impl(be);
    if (!n) return;
    k_scale<<<grid_for(c, n), THREADS, 0, c->stream>>>(x, a, n);
    LAUNCHED(c, "k_scale");
}

static void cuda_sumsq(rumor_backend_t *be, double *out, const float *x, size_t n)
{
    cuda_t *c = impl(be);
    if (!n) {
        *out = 0.0;
        return;
    }
    *out = NAN;
    const unsigned parts = grid_for(c, n);
    double *part = (double *)scratch(c, ((size_t)parts + 1) * sizeof(double));
    if (!part) return;
    k_sumsq<<<parts, THREADS, 0, c->stream>>>(part + 1, x, n);
    if (!LAUNCHED(c, "k_sumsq")) return;
    k_sum_doubles<<<1, THREADS, 0, c->stream>>>(part, part + 1, (int)parts);
    if (!LAUNCHED(c, "k_sum_doubles")) return;
    if (CUDA_OK(c, cudaMemcpyAsync(c->scalar_host, part, sizeof(double), cudaMemcpyDeviceToHost, c->stream)) &&
        CUDA_OK(c, cudaStreamSynchronize(c->stream)) && c->rc == RUMOR_OK)
        *out = *c->scalar_host;
}

/* What the loader checks before it takes the table (backend.c). */
extern "C" const unsigned rumor_backend_cuda_abi[2] = {RUMOR_BACKEND_ABI, sizeof(struct rumor_backend_ops)};

extern "C" const struct rumor_backend_ops rumor_backend_cuda_ops = {
    .name = "cuda",
    .host_memory = false,
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .zero = cuda_zero,
    .sync = cuda_sync,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .upload_async = cuda_upload_async,
    .download_async = cuda_download_async,
    .wait_copies = cuda_wait_copies,
    .gemm = cuda_gemm,
    .bias_act = cuda_bias_act,
    .bias_act_bwd = cuda_bias_act_bwd,
    .im2col = cuda_im2col,
    .col2im = cuda_col2im,
    .pool_bias_relu = cuda_pool_bias_relu,
    .pool_bias_relu_bwd = cuda_pool_bias_relu_bwd,
    .transpose_cb = cuda_transpose_cb,
    .embed = cuda_embed,
    .embed_bwd = cuda_embed_bwd,
    .layernorm = cuda_layernorm,
    .layernorm_bwd = cuda_layernorm_bwd,
    .attention = cuda_attention,
    .attention_bwd = cuda_attention_bwd,
    .gelu = cuda_gelu,
    .gelu_bwd = cuda_gelu_bwd,
    .softmax_xent = cuda_softmax_xent,
    .sgd = cuda_sgd,
    .adamw = cuda_adamw,
    .axpy = cuda_axpy,
    .scale = cuda_scale,
    .sumsq = cuda_sumsq,
};
