/*
 * backend_cuda_impl.h - the CUDA backend's inside, shared by its files (not an interface):
 * backend_cuda.cu (the host side: errors, launch geometry, the device's memory, streams and
 * staging, and each op's launches) and backend_cuda_kernels.cu (the device helpers and the
 * kernels the ops launch).
 */
#ifndef RUMOR_BACKEND_CUDA_IMPL_H
#define RUMOR_BACKEND_CUDA_IMPL_H

#include <cuda_runtime.h>

#include <stddef.h>
#include <stdint.h>

typedef struct {
    double loss;
    long long correct;
} xent_slot_t;

/* Classes of tokens of k_embed_bwd_wte (the second dimension of its grid). */
#define WTE_CLASSES 64

// ---- kernels (backend_cuda_kernels.cu) ----

__global__ void k_bias_act(float *y, const float *bias, size_t total, int cols, bool relu);
__global__ void k_bias_bwd(float *partial, float *dy, const float *y, int rows, int cols, bool relu);
__global__ void k_add_parts(float *dst, const float *partial, int count, int parts, size_t item_stride,
                            size_t part_stride);
__global__ void k_im2col(float *col, const float *x, int c, int b, int h, int w, int k, int oh, int ow);
__global__ void k_col2im(float *dx, const float *col, int c, int b, int h, int w, int k, int oh, int ow);
__global__ void k_pool(float *y, const float *x, const float *bias, int c, int b, int h, int w);
__global__ void k_pool_bwd(float *xdx, float *partial, const float *dy, const float *y, int c, int b, int h, int w);
__global__ void k_transpose_cb(float *dst, const float *src, int c, int b, int n, bool to_bc);
__global__ void k_xent(float *dlogits, double *row_loss, int *row_hit, const float *logits, const int32_t *labels,
                       int b, int k, float inv_b);
__global__ void k_xent_sum(xent_slot_t *slot, const double *row_loss, const int *row_hit, int b);
__global__ void k_sgd(float *p, float *v, float *g, size_t n, float lr, float momentum, float wd, bool nesterov);
__global__ void k_adamw(float *p, float *m, float *v, float *g, size_t n, float b1, float b2, float eps, float step,
                        float inv_sqrt_bc2, float decay);
__global__ void k_axpy(float *y, const float *x, float a, size_t n);
__global__ void k_scale(float *x, float a, size_t n);
__global__ void k_sumsq(double *part, const float *x, size_t n);
__global__ void k_sum_doubles(double *out, const double *part, int parts);
__global__ void k_embed(float *out, const int32_t *tok, const float *wte, const float *wpe, size_t total, int T,
                        int C);
__global__ void k_embed_bwd_wte(float *dwte, const float *dout, const int32_t *tok, int N, int C);
__global__ void k_embed_bwd_wpe(float *dwpe, const float *dout, int B, int T, int C);
__global__ void k_layernorm(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                            int N, int C);
__global__ void k_layernorm_bwd_x(float *dx, const float *dout, const float *x, const float *w, const float *mean,
                                  const float *rstd, int N, int C);
__global__ void k_layernorm_bwd_wb(float *part_w, float *part_b, const float *dout, const float *x,
                                   const float *mean, const float *rstd, int N, int C);
__global__ void k_softmax_causal(float *att, size_t rows, int T);
__global__ void k_softmax_causal_bwd(float *dp, const float *p, size_t rows, int T);
__global__ void k_gelu(float *y, const float *x, size_t n);
__global__ void k_gelu_bwd(float *dx, const float *x, const float *dy, size_t n);

#endif
