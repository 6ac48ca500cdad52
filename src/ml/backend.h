/*
 * backend.h - the compute backend: one ops table, implemented for the CPU (OpenBLAS) and,
 * later, CUDA. Models and optimizers are written once against this table.
 *
 * Memory: every float* / uint8_t* argument below is *backend memory* (from ops->alloc):
 * host memory on the CPU backend, device memory on CUDA. Scalars (loss, counts) come back
 * through host pointers. `host_memory` says whether backend memory is host-addressable, so
 * a caller may write into it directly and skip an upload.
 *
 * Errors: ops are void and may run asynchronously. A backend records the first failure
 * (with its call site) and `sync` returns it: call sync at the points where a result is
 * needed (end of a step, before reading parameters). The CPU backend never fails after
 * alloc.
 *
 * Ordering: ops run in the order they are called, as if one after the other (CUDA: one
 * compute stream). upload, download and sumsq return only when done, so their host buffers
 * are free again at once; the async copies below are the one exception, and say so.
 *
 * Conventions: outputs first, then inputs, then sizes (llm.c). Matrices are row-major.
 * Convolution activations use the layout [C][B][H][W] ("CBHW", channel-major across the
 * batch) so one im2col + one sgemm covers a whole batch; fully connected activations are
 * [B][features]. Pooling is 2x2 with stride 2 on even H and W.
 *
 * Non-goals: general tensors, autograd, mixed precision.
 */
#ifndef RUMOR_BACKEND_H
#define RUMOR_BACKEND_H

#include "base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rumor_backend rumor_backend_t;

/* The ops table's shape: a module built against another (gpu/, loaded at run time) is refused.
 * Bump it when the table changes. */
#define RUMOR_BACKEND_ABI 2

struct rumor_backend_ops {
    const char *name;
    bool host_memory;

    /* ---- lifecycle and memory ---- */
    /* Fill be->impl; threads >= 1. */
    rumor_err_t (*open)(rumor_backend_t *be, int threads, char err[RUMOR_ERR_LEN]);
    void (*close)(rumor_backend_t *be);
    /* Zeroed, 64-byte aligned; NULL on failure. len may be 0 (returns a valid pointer). */
    void *(*alloc)(rumor_backend_t *be, size_t len);
    void (*free)(rumor_backend_t *be, void *p);
    void (*upload)(rumor_backend_t *be, void *dst, const void *src_host, size_t len);
    void (*download)(rumor_backend_t *be, void *dst_host, const void *src, size_t len);
    void (*copy)(rumor_backend_t *be, void *dst, const void *src, size_t len);
    void (*zero)(rumor_backend_t *be, void *p, size_t len);
    /* Wait for queued work; return and clear the first error since the last sync. */
    rumor_err_t (*sync)(rumor_backend_t *be, char err[RUMOR_ERR_LEN]);

    /* ---- staging: host buffers the backend copies fastest, and copies that overlap work ----
     * What a trainer uses to feed a device (gather the next batch while this one computes)
     * and a node to take its parameters to the host for gossip. On the CPU backend the copies
     * are plain copies done at once and wait_copies does nothing. */
    /* Page-locked on CUDA, plain aligned memory on the CPU: 64-byte aligned, not zeroed;
     * NULL on failure; len may be 0. Free with host_free, never free(). */
    void *(*host_alloc)(rumor_backend_t *be, size_t len);
    void (*host_free)(rumor_backend_t *be, void *p);
    /* Start copying host_alloc memory into backend memory at once, alongside queued work
     * (CUDA: on a copy stream): no queued work may read or write dst (a staging buffer whose
     * last reader was synced), and src_host must stay unchanged until wait_copies. */
    void (*upload_async)(rumor_backend_t *be, void *dst, const void *src_host, size_t len);
    /* Start copying backend memory into host_alloc memory after the work queued so far (the
     * copy sees its results) and alongside work queued later, which must not write src before
     * wait_copies. dst_host holds the bytes once wait_copies returns. */
    void (*download_async)(rumor_backend_t *be, void *dst_host, const void *src, size_t len);
    /* Block until every copy started above is done; work queued after it sees their results.
     * Failures are recorded for sync. */
    void (*wait_copies)(rumor_backend_t *be);

    /* ---- dense layers ---- */
    /* c = alpha * op(a) * op(b) + beta * c; op(a) is m x k, op(b) is k x n, c is m x n. */
    void (*gemm)(rumor_backend_t *be, float *c, const float *a, const float *b, bool trans_a,
                 bool trans_b, int m, int n, int k, float alpha, float beta, int lda, int ldb,
                 int ldc);
    /* y[r][c] = act(y[r][c] + bias[c]) for a [rows][cols] matrix; act is ReLU or identity. */
    void (*bias_act)(rumor_backend_t *be, float *y, const float *bias, int rows, int cols,
                     bool relu);
    /* Backward of bias_act: if relu, dy[r][c] = 0 where y[r][c] <= 0 (y is the layer's
     * output); then dbias[c] += sum_r dy[r][c] (gradients accumulate, see sgd). */
    void (*bias_act_bwd)(rumor_backend_t *be, float *dbias, float *dy, const float *y,
                         int rows, int cols, bool relu);

    /* ---- convolution (stride 1, no padding) ---- */
    /* x [c][b][h][w] -> col [c*k*k][b*oh*ow], oh = h-k+1, ow = w-k+1; rows ordered
     * (c, ki, kj) to match a [out][in][kh][kw] weight. */
    void (*im2col)(rumor_backend_t *be, float *col, const float *x, int c, int b, int h, int w,
                   int k);
    /* The adjoint of im2col: dx = sum of col entries that came from each x (overwrites). */
    void (*col2im)(rumor_backend_t *be, float *dx, const float *col, int c, int b, int h, int w,
                   int k);
    /* y[c][b][h/2][w/2] = relu(max over the 2x2 window of x[c][b][..][..] + bias[c]). Bias
     * and ReLU commute with the max, so applying them after pooling is exact and touches a
     * quarter of the data. */
    void (*pool_bias_relu)(rumor_backend_t *be, float *y, const float *x, const float *bias,
                           int c, int b, int h, int w);
    /* Backward, in place: xdx holds the forward input x and is overwritten with dx: dy at
     * each window's first maximum (row-major order, as PyTorch breaks ties) where y > 0, 0
     * elsewhere; dbias[c] += sum of dy where y > 0. Recomputing the argmax from x costs less
     * than storing and reloading it. */
    void (*pool_bias_relu_bwd)(rumor_backend_t *be, float *xdx, float *dbias, const float *dy,
                               const float *y, int c, int b, int h, int w);
    /* [c][b][n] <-> [b][c][n]: to_bc = true maps CBHW to per-sample rows (PyTorch's flatten
     * order), false maps back. */
    void (*transpose_cb)(rumor_backend_t *be, float *dst, const float *src, int c, int b, int n,
                         bool to_bc);

    /* ---- transformer (GPT-2) ----
     * Activations are [N][C] rows, N = B*T (B sequences of T positions). Parameter gradients
     * accumulate (+=), as everywhere; an activation gradient is overwritten unless said.
     * Each op may be NULL in a backend that lacks it: a model that needs one refuses to be made
     * there (model.c). */
    /* out[n] = wte[tok[n]] + wpe[n mod T]: token and position embeddings, rows of C; every
     * tok[n] < the vocabulary (the caller checks). */
    void (*embed)(rumor_backend_t *be, float *out, const int32_t *tok, const float *wte, const float *wpe,
                  int B, int T, int C);
    /* dwte[tok[n]] += dout[n], dwpe[n mod T] += dout[n], summed in n's order (the same sums,
     * bit for bit, every run). */
    void (*embed_bwd)(rumor_backend_t *be, float *dwte, float *dwpe, const float *dout, const int32_t *tok,
                      int B, int T, int C);
    /* LayerNorm of each row of x (eps 1e-5, PyTorch's): out = (x - mean) * rstd * w + b, with
     * each row's mean and rstd = 1 / sqrt(var + eps) kept for the backward. */
    void (*layernorm)(rumor_backend_t *be, float *out, float *mean, float *rstd, const float *x, const float *w,
                      const float *b, int N, int C);
    /* Backward: dx += (a residual stream's gradient gathers both of its branches), dw += and
     * db +=. */
    void (*layernorm_bwd)(rumor_backend_t *be, float *dx, float *dw, float *db, const float *dout,
                          const float *x, const float *w, const float *mean, const float *rstd, int N, int C);
    /* Causal self-attention: qkv [B][T][3C] holds each position's query, key and value, each
     * NH heads of C/NH; out [B][T][C] gets the heads' outputs side by side; att [B][NH][T][T]
     * the softmax of q.k / sqrt(C/NH) over the positions up to each one (zero beyond). */
    void (*attention)(rumor_backend_t *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH);
    /* Backward: dqkv [B][T][3C] overwritten; datt [B][NH][T][T] is scratch. */
    void (*attention_bwd)(rumor_backend_t *be, float *dqkv, float *datt, const float *dout, const float *qkv,
                          const float *att, int B, int T, int C, int NH);
    /* y = GELU of x, tanh approximation (GPT-2's; PyTorch's approximate='tanh'); n elements. */
    void (*gelu)(rumor_backend_t *be, float *y, const float *x, size_t n);
    /* dx = dy * GELU'(x); dx may be dy. */
    void (*gelu_bwd)(rumor_backend_t *be, float *dx, const float *x, const float *dy, size_t n);

    /* ---- loss ---- */
    /* Softmax cross-entropy over [b][k] logits with labels[b] < k (int32: a class, or a token
     * of a vocabulary of up to 65536). Adds the summed loss
     * (host double) and the number of correct argmax predictions to *loss_sum, *correct.
     * If dlogits is not NULL it gets (softmax - onehot) / b, the gradient of the mean loss.
     * The sums are in place once the next sync returns RUMOR_OK (an asynchronous backend
     * adds them there, so a step needs no wait in its middle): both pointers must stay valid
     * until then, and neither is read before. */
    void (*softmax_xent)(rumor_backend_t *be, float *dlogits, double *loss_sum, long *correct,
                         const float *logits, const int32_t *labels, int b, int k);

    /* ---- optimizers and mixing (one pass over flat buffers of n floats) ----
     * Gradients accumulate (weight-gradient products run with beta = 1), and an optimizer
     * step consumes them: it leaves g zeroed. Zeroing inside the pass that already streams
     * g costs almost nothing, where a separate beta = 0 pass in sgemm cost 5-7% of a step. */
    /* g' = g + wd*p; v = momentum*v + g'; p -= lr * (nesterov ? g' + momentum*v : v); g = 0. */
    void (*sgd)(rumor_backend_t *be, float *p, float *v, float *g, size_t n, float lr,
                float momentum, float wd, bool nesterov);
    /* AdamW (Loshchilov & Hutter): m,v moments; bc1 = 1-b1^t, bc2 = 1-b2^t; g = 0. */
    void (*adamw)(rumor_backend_t *be, float *p, float *m, float *v, float *g, size_t n,
                  float lr, float b1, float b2, float eps, float wd, float bc1, float bc2);
    /* y += a * x */
    void (*axpy)(rumor_backend_t *be, float *y, const float *x, float a, size_t n);
    /* x *= a */
    void (*scale)(rumor_backend_t *be, float *x, float a, size_t n);
    /* Sum of squares into *out (host), in double; NaN or inf if any element is not finite.
     * Returns when *out is set (a sync point on a device; NaN if the device failed). */
    void (*sumsq)(rumor_backend_t *be, double *out, const float *x, size_t n);
};

struct rumor_backend {
    const struct rumor_backend_ops *ops;
    void *impl;   /* the implementation's state */
    int threads;
};

/* ---- registry ---- */

/* name: "cpu", "cuda" or "auto" (CUDA when built and a device is usable, else CPU).
 * threads <= 0 means all cores. NULL with err on failure ("built without CUDA", ...). */
rumor_backend_t *rumor_backend_new(const char *name, int threads, char err[RUMOR_ERR_LEN]);
/* rumor_backend_new with the reason as a code, for a caller that must tell "this machine has no
 * such device" from "the device is broken" (a GPU test skips on the first, fails on the
 * second): RUMOR_ENODEV only when the machine has no device for it (no CUDA driver, no CUDA
 * device); RUMOR_ENOTSUP when this build lacks the backend or cannot use the device (a driver
 * older than the runtime, a device it has no code for); RUMOR_EINVAL for an unknown name;
 * otherwise the backend's own code. *be_p is the backend on RUMOR_OK and NULL otherwise. */
RUMOR_MUST_CHECK rumor_err_t rumor_backend_create(rumor_backend_t **be_p, const char *name, int threads,
                                                  char err[RUMOR_ERR_LEN]);
/* A backend from an ops table of the caller's (tests wrap the CPU backend in one whose
 * memory is not host memory). threads <= 0 means all cores. NULL with err on failure. */
rumor_backend_t *rumor_backend_open(const struct rumor_backend_ops *ops, int threads,
                                    char err[RUMOR_ERR_LEN]);
void rumor_backend_destroy(rumor_backend_t **be_p);
/* OpenBLAS picks its kernels when it loads, by the CPU's model: a release older than the CPU
 * takes it for a Prescott and runs sgemm on SSE3 (Debian 12's OpenBLAS 0.3.21 on a Xeon of
 * family 6 model 207, at half the speed). The OPENBLAS_CORETYPE its features call for
 * ("SkylakeX", "Haswell") in that case; NULL when OpenBLAS chose itself or was told. */
const char *rumor_backend_cpu_better_core(void);
/* Space-separated names of the compiled backends, e.g. "cpu" or "cpu cuda". */
const char *rumor_backend_compiled(void);
int rumor_backend_default_threads(void);

extern const struct rumor_backend_ops rumor_backend_cpu_ops;
/* gpu/backend_cuda.cu, in the module the registry loads (RUMOR_CUDA_MODULE) in builds with
 * CUDA (config.h's RUMOR_HAVE_CUDA): reach it through rumor_backend_create. */
extern const struct rumor_backend_ops rumor_backend_cuda_ops;

/* ---- dense linear algebra for analysis (LAPACK from OpenBLAS) ---- */

/* Eigenvalues of the symmetric n x n matrix a (either storage order: it is symmetric) into
 * w[0..n), ascending (LAPACK dsyev, eigenvalues only). a is overwritten. Host memory, not
 * backend memory: this serves analysis tools such as the topology spectral gap, not
 * training. Returns 0 on success; otherwise LAPACK's info (> 0: no convergence, < 0: a bad
 * argument) or -1 when the workspace cannot be allocated. */
int rumor_lapack_eigvals_sym(double *w, double *a, int n);

#endif
