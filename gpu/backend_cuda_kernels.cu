/* backend_cuda_kernels.cu - the CUDA backend's kernels (backend_cuda_impl.h): the device
 * helpers, and a kernel for each op that is not a matrix product, launched by its op in
 * backend_cuda.cu; each computes what its CPU twin (src/ml/backend_cpu.c) computes. */
#include "backend_cuda_impl.h"

#include <math.h>
#include <stdint.h>

#define GRID_STRIDE(i, n)                                                                      \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                    \
         i += (size_t)gridDim.x * blockDim.x)

// ---- device helpers ----

/* The block's sum of v in thread 0 (blockDim.x a multiple of 32, every thread calls it). */
template <typename T> __device__ T block_sum(T v)
{
    __shared__ T part[32];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? part[lane] : T(0);
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    }
    __syncthreads(); /* part is free for the next call */
    return v;
}

/* The CPU backend's max: on a tie it keeps a (no libm NaN rules). */
__device__ __forceinline__ float max2(float a, float b) { return b > a ? b : a; }

// ---- kernels ----

__global__ void k_bias_act(float *y, const float *bias, size_t total, int cols, bool relu)
{
    GRID_STRIDE(i, total)
    {
        const float v = y[i] + bias[i % (size_t)cols];
        y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

/* Bias gradient of a [rows][cols] matrix, part 1: block (32, 8) owns 32 columns and the rows
 * blockIdx.y, +gridDim.y, ... (in steps of 8 per thread row); masks dy by the ReLU and writes
 * its column sums to partial[blockIdx.y][cols]. */
__global__ void k_bias_bwd(float *partial, float *dy, const float *y, int rows, int cols, bool relu)
{
    __shared__ float s[8][33];
    const int col = (int)(blockIdx.x * 32 + threadIdx.x);
    float acc = 0.0f;
    if (col < cols)
        for (int r = (int)(blockIdx.y * 8 + threadIdx.y); r < rows; r += (int)(gridDim.y * 8)) {
            const size_t o = (size_t)r * cols + col;
            float d = dy[o];
            if (relu) {
                d = y[o] > 0.0f ? d : 0.0f;
                dy[o] = d;
            }
            acc += d;
        }
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
        float t = 0.0f;
        for (int j = 0; j < 8; j++) t += s[j][threadIdx.x];
        partial[(size_t)blockIdx.y * cols + col] = t;
    }
}

/* dst[i] += sum over p < parts of partial[i * item_stride + p * part_stride], in p order. */
__global__ void k_add_parts(float *dst, const float *partial, int count, int parts, size_t item_stride,
                            size_t part_stride)
{
    GRID_STRIDE(i, (size_t)count)
    {
        float s = 0.0f;
        for (int p = 0; p < parts; p++) s += partial[i * item_stride + (size_t)p * part_stride];
        dst[i] += s;
    }
}

/* x [c][b][h][w] -> col [c*k*k][b*oh*ow]: blockIdx.y walks the rows (c, ki, kj), x the
 * columns (b, oy, ox); n = b*oh*ow fits an int (the model's contract), so the column index is
 * 32-bit (n plus the grid's stride stays below 2^32). */
__global__ void k_im2col(float *col, const float *x, int c, int b, int h, int w, int k, int oh, int ow)
{
    const int kk = k * k, rows = c * kk;
    const unsigned ohw = (unsigned)oh * (unsigned)ow, n = (unsigned)b * ohw;
    for (int r = (int)blockIdx.y; r < rows; r += (int)gridDim.y) {
        const int ci = r / kk, rem = r - ci * kk, ki = rem / k, kj = rem - ki * k;
        float *dst = col + (size_t)r * n;
        const float *src = x + (size_t)ci * b * h * w + (size_t)ki * w + kj;
        for (unsigned j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
            const unsigned bi = j / ohw, p = j - bi * ohw, oy = p / (unsigned)ow, ox = p - oy * (unsigned)ow;
            dst[j] = src[((size_t)bi * h + oy) * w + ox];
        }
    }
}

/* The adjoint, gathered: each dx element sums the col entries that copied it, in (ki, kj)
 * order from zero, which is the order the CPU's scatter adds them in. No atomics. */
__global__ void k_col2im(float *dx, const float *col, int c, int b, int h, int w, int k, int oh, int ow)
{
    const size_t total = (size_t)c * b * h * w, n = (size_t)b * oh * ow;
    GRID_STRIDE(i, total)
    {
        const int xx = (int)(i % (size_t)w);
        size_t t = i / (size_t)w;
        const int yy = (int)(t % (size_t)h);
        t /= (size_t)h;
        const size_t bi = t % (size_t)b, ci = t / (size_t)b;
        const float *base = col + ci * (size_t)k * k * n + bi * (size_t)oh * ow;
        float s = 0.0f;
        for (int ki = 0; ki < k; ki++) {
            const int oy = yy - ki;
            if (oy < 0 || oy >= oh) continue;
            for (int kj = 0; kj < k; kj++) {
                const int ox = xx - kj;
                if (ox < 0 || ox >= ow) continue;
                s += base[(size_t)(ki * k + kj) * n + (size_t)oy * ow + ox];
            }
        }
        dx[i] = s;
    }
}

__global__ void k_pool(float *y, const float *x, const float *bias, int c, int b, int h, int w)
{
    const int ph = h / 2, pw = w / 2;
    const size_t total = (size_t)c * b * ph * pw;
    GRID_STRIDE(i, total)
    {
        const size_t px = i % (size_t)pw, t = i / (size_t)pw, py = t % (size_t)ph, cb = t / (size_t)ph;
        const size_t ci = cb / (size_t)b;
        const float *r0 = x + (cb * h + 2 * py) * w + 2 * px, *r1 = r0 + w;
        const float m0 = max2(r0[0], r0[1]), m1 = max2(r1[0], r1[1]);
        const float m = max2(m0, m1) + bias[ci];
        y[i] = m > 0.0f ? m : 0.0f;
    }
}

/* Pooling backward for the channels blockIdx.y, +gridDim.y, ...: the outputs of one channel
 * are contiguous ([c][b][ph][pw]) and split over gridDim.x blocks; each block writes its sum
 * of the passed gradient to partial[channel][blockIdx.x]. */
__global__ void k_pool_bwd(float *xdx, float *partial, const float *dy, const float *y, int c, int b, int h, int w)
{
    const int ph = h / 2, pw = w / 2;
    const size_t per = (size_t)b * ph * pw;
    for (int ci = (int)blockIdx.y; ci < c; ci += (int)gridDim.y) {
        float acc = 0.0f;
        GRID_STRIDE(i, per)
        {
            const size_t o = (size_t)ci * per + i;
            const size_t px = i % (size_t)pw, t = i / (size_t)pw, py = t % (size_t)ph, bi = t / (size_t)ph;
            float *r0 = xdx + (((size_t)ci * b + bi) * h + 2 * py) * w + 2 * px, *r1 = r0 + w;
            const float a = r0[0], bb = r0[1], cc = r1[0], dd = r1[1];
            const float g = y[o] > 0.0f ? dy[o] : 0.0f;
            /* The first maximum in row-major order takes the gradient (as the CPU does). */
            const float m = max2(max2(a, bb), max2(cc, dd));
            const float ga = a == m ? g : 0.0f;
            const float rest = a == m ? 0.0f : g;
            const float gb = bb == m ? rest : 0.0f;
            const float rest2 = bb == m ? 0.0f : rest;
            const float gc = cc == m ? rest2 : 0.0f;
            const float gd = cc == m ? 0.0f : rest2;
            r0[0] = ga;
            r0[1] = gb;
            r1[0] = gc;
            r1[1] = gd;
            acc += g;
        }
        acc = block_sum(acc);
        if (threadIdx.x == 0) partial[(size_t)ci * gridDim.x + blockIdx.x] = acc;
    }
}

__global__ void k_transpose_cb(float *dst, const float *src, int c, int b, int n, bool to_bc)
{
    const size_t total = (size_t)c * b * n;
    GRID_STRIDE(i, total)
    {
        const size_t j = i % (size_t)n, t = i / (size_t)n;
        size_t from;
        if (to_bc) { /* dst row t = bi*c + ci takes src row ci*b + bi */
            const size_t bi = t / (size_t)c, ci = t % (size_t)c;
            from = (ci * b + bi) * n + j;
        } else { /* dst row t = ci*b + bi takes src row bi*c + ci */
            const size_t ci = t / (size_t)b, bi = t % (size_t)b;
            from = (bi * c + ci) * n + j;
        }
        dst[i] = src[from];
    }
}

/* Softmax cross-entropy, one warp per row: the first maximum (as the CPU's strict >), the sum
 * of exponentials in double, the row's loss and hit, and the gradient when asked. A label out
 * of range (a broken contract) gives a NaN loss rather than a read out of bounds. */
__global__ void k_xent(float *dlogits, double *row_loss, int *row_hit, const float *logits, const int32_t *labels,
                       int b, int k, float inv_b)
{
    const unsigned lane = threadIdx.x & 31u, warps = blockDim.x >> 5;
    for (int i = (int)(blockIdx.x * warps + (threadIdx.x >> 5)); i < b; i += (int)(gridDim.x * warps)) {
        const float *z = logits + (size_t)i * k;
        int have = (int)lane < k; /* int: the shuffles take no bool */
        float best = have ? z[lane] : 0.0f;
        int at = have ? (int)lane : k;
        for (int j = (int)lane + 32; j < k; j += 32)
            if (z[j] > best) best = z[j], at = j;
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(0xffffffffu, best, o);
            const int oat = __shfl_xor_sync(0xffffffffu, at, o);
            const int ohave = __shfl_xor_sync(0xffffffffu, have, o);
            if (ohave && (!have || ob > best || (ob == best && oat < at))) best = ob, at = oat, have = 1;
        }
        const float zmax = best;
        double sum = 0.0;
        for (int j = (int)lane; j < k; j += 32) sum += exp((double)(z[j] - zmax));
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        const int y = labels[i];
        if (lane == 0) {
            row_loss[i] = y >= 0 && y < k ? log(sum) - (double)(z[y] - zmax) : (double)NAN;
            row_hit[i] = at == y;
        }
        if (dlogits) {
            float *d = dlogits + (size_t)i * k;
            const double inv_sum = 1.0 / sum;
            for (int j = (int)lane; j < k; j += 32) {
                float v = (float)(exp((double)(z[j] - zmax)) * inv_sum) * inv_b;
                if (j == y) v -= inv_b;
                d[j] = v;
            }
        }
    }
}

/* One block: the batch's loss and hits, summed in a fixed order, into a slot. */
__global__ void k_xent_sum(xent_slot_t *slot, const double *row_loss, const int *row_hit, int b)
{
    double l = 0.0;
    long long r = 0;
    for (int i = (int)threadIdx.x; i < b; i += (int)blockDim.x) {
        l += row_loss[i];
        r += row_hit[i];
    }
    l = block_sum(l);
    r = block_sum(r);
    if (threadIdx.x == 0) {
        slot->loss = l;
        slot->correct = r;
    }
}

__global__ void k_sgd(float *p, float *v, float *g, size_t n, float lr, float momentum, float wd, bool nesterov)
{
    GRID_STRIDE(i, n)
    {
        if (nesterov) {
            const float gi = g[i] + wd * p[i];
            const float vi = momentum * v[i] + gi;
            v[i] = vi;
            p[i] -= lr * (gi + momentum * vi);
        } else {
            const float vi = momentum * v[i] + g[i] + wd * p[i];
            v[i] = vi;
            p[i] -= lr * vi;
        }
        g[i] = 0.0f;
    }
}

__global__ void k_adamw(float *p, float *m, float *v, float *g, size_t n, float b1, float b2, float eps, float step,
                        float inv_sqrt_bc2, float decay)
{
    GRID_STRIDE(i, n)
    {
        const float gi = g[i];
        const float mi = b1 * m[i] + (1.0f - b1) * gi;
        const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        g[i] = 0.0f;
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}

__global__ void k_axpy(float *y, const float *x, float a, size_t n)
{
    GRID_STRIDE(i, n) y[i] += a * x[i];
}

__global__ void k_scale(float *x, float a, size_t n)
{
    GRID_STRIDE(i, n) x[i] *= a;
}

__global__ void k_sumsq(double *part, const float *x, size_t n)
{
    double s = 0.0;
    GRID_STRIDE(i, n)
    {
        const double v = x[i];
        s += v * v;
    }
    s = block_sum(s);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* One block: out = the sum of part[0..parts) in a fixed order. */
__global__ void k_sum_doubles(double *out, const double *part, int parts)
{
    double s = 0.0;
    for (int i = (int)threadIdx.x; i < parts; i += (int)blockDim.x) s += part[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *out = s;
}

// ---- transformer kernels ----

__global__ void k_embed(float *out, const int32_t *tok, const float *wte, const float *wpe, size_t total, int T,
                        int C)
{
    GRID_STRIDE(i, total)
    {
        const size_t n = i / (size_t)C, ch = i % (size_t)C;
        out[i] = wte[(size_t)tok[n] * C + ch] + wpe[(n % (size_t)T) * C + ch];
    }
}

/* dwte: one thread a channel and a class of tokens (token mod WTE_CLASSES), over the positions
 * in their order, adding the rows of its class's tokens: a token's rows add up in the order the
 * CPU adds them, no two threads write one entry, and the adds to global memory that depend on
 * each other are a class's share of the positions, not all of them. Every thread reads every
 * token (a warp's lanes the same one), which is cheap beside those adds. */
__global__ void k_embed_bwd_wte(float *dwte, const float *dout, const int32_t *tok, int N, int C)
{
    const int ch = (int)(blockIdx.x * blockDim.x + threadIdx.x), k = (int)blockIdx.y;
    if (ch >= C) return;
    for (int n = 0; n < N; n++) {
        const int32_t t = tok[n];
        if (t % WTE_CLASSES == k) dwte[(size_t)t * C + ch] += dout[(size_t)n * C + ch];
    }
}

/* dwpe[t][c] += dout[b][t][c] over b in order. */
__global__ void k_embed_bwd_wpe(float *dwpe, const float *dout, int B, int T, int C)
{
    GRID_STRIDE(i, (size_t)T * C)
    {
        const size_t t = i / (size_t)C, ch = i % (size_t)C;
        float s = dwpe[i];
        for (int b = 0; b < B; b++) s += dout[((size_t)b * T + t) * C + ch];
        dwpe[i] = s;
    }
}

/* A warp's sum (every lane gets it). */
__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = max2(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* One warp a row. */
__global__ void k_layernorm(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                            int N, int C)
{
    const int lane = (int)(threadIdx.x & 31u), warps = (int)(blockDim.x >> 5);
    for (int n = (int)(blockIdx.x * warps + (threadIdx.x >> 5)); n < N; n += (int)(gridDim.x * warps)) {
        const float *xr = x + (size_t)n * C;
        float s = 0.0f;
        for (int c = lane; c < C; c += 32) s += xr[c];
        const float m = warp_sum(s) / (float)C;
        float v = 0.0f;
        for (int c = lane; c < C; c += 32) v += (xr[c] - m) * (xr[c] - m);
        const float r = 1.0f / sqrtf(warp_sum(v) / (float)C + 1e-5f);
        float *o = out + (size_t)n * C;
        for (int c = lane; c < C; c += 32) o[c] = (xr[c] - m) * r * w[c] + b[c];
        if (lane == 0) mean[n] = m, rstd[n] = r;
    }
}

/* dx += per row (one warp a row). */
__global__ void k_layernorm_bwd_x(float *dx, const float *dout, const float *x, const float *w, const float *mean,
                                  const float *rstd, int N, int C)
{
    const int lane = (int)(threadIdx.x & 31u), warps = (int)(blockDim.x >> 5);
    for (int n = (int)(blockIdx.x * warps + (threadIdx.x >> 5)); n < N; n += (int)(gridDim.x * warps)) {
        const float *xr = x + (size_t)n * C, *d = dout + (size_t)n * C;
        const float m = mean[n], r = rstd[n];
        float a = 0.0f, bb = 0.0f;
        for (int c = lane; c < C; c += 32) {
            const float norm = (xr[c] - m) * r, dn = w[c] * d[c];
            a += dn, bb += dn * norm;
        }
        const float dmean = warp_sum(a) / (float)C, dnorm_mean = warp_sum(bb) / (float)C;
        float *g = dx + (size_t)n * C;
        for (int c = lane; c < C; c += 32) {
            const float norm = (xr[c] - m) * r, dn = w[c] * d[c];
            g[c] += (dn - dmean - norm * dnorm_mean) * r;
        }
    }
}

/* dw and db, part 1 (as k_bias_bwd): block (32, 8) owns 32 channels and the rows blockIdx.y,
 * +gridDim.y, ... in steps of 8 a thread row; partial sums to part_w and part_b. */
__global__ void k_layernorm_bwd_wb(float *part_w, float *part_b, const float *dout, const float *x,
                                   const float *mean, const float *rstd, int N, int C)
{
    __shared__ float sw[8][33], sb[8][33];
    const int col = (int)(blockIdx.x * 32 + threadIdx.x);
    float aw = 0.0f, ab = 0.0f;
    if (col < C)
        for (int r = (int)(blockIdx.y * 8 + threadIdx.y); r < N; r += (int)(gridDim.y * 8)) {
            const size_t o = (size_t)r * C + col;
            const float d = dout[o];
            aw += (x[o] - mean[r]) * rstd[r] * d;
            ab += d;
        }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && col < C) {
        float tw = 0.0f, tb = 0.0f;
        for (int j = 0; j < 8; j++) tw += sw[j][threadIdx.x], tb += sb[j][threadIdx.x];
        part_w[(size_t)blockIdx.y * C + col] = tw;
        part_b[(size_t)blockIdx.y * C + col] = tb;
    }
}

/* Rows of T scores, row r at position t = r mod T: the softmax over 0..t, zero beyond. One
 * warp a row. */
__global__ void k_softmax_causal(float *att, size_t rows, int T)
{
    const int lane = (int)(threadIdx.x & 31u), warps = (int)(blockDim.x >> 5);
    for (size_t r = (size_t)blockIdx.x * warps + (threadIdx.x >> 5); r < rows; r += (size_t)gridDim.x * warps) {
        float *row = att + r * T;
        const int t = (int)(r % (size_t)T);
        float mx = -INFINITY;
        for (int j = lane; j <= t; j += 32) mx = max2(mx, row[j]);
        mx = warp_max(mx);
        float s = 0.0f;
        for (int j = lane; j <= t; j += 32) s += row[j] = expf(row[j] - mx);
        const float inv = 1.0f / warp_sum(s);
        for (int j = lane; j < T; j += 32) row[j] = j <= t ? row[j] * inv : 0.0f;
    }
}

/* dS = P (dP - rowsum(P dP)) over 0..t, zero beyond; dp holds dP and becomes dS. */
__global__ void k_softmax_causal_bwd(float *dp, const float *p, size_t rows, int T)
{
    const int lane = (int)(threadIdx.x & 31u), warps = (int)(blockDim.x >> 5);
    for (size_t r = (size_t)blockIdx.x * warps + (threadIdx.x >> 5); r < rows; r += (size_t)gridDim.x * warps) {
        float *d = dp + r * T;
        const float *pr = p + r * T;
        const int t = (int)(r % (size_t)T);
        float dot = 0.0f;
        for (int j = lane; j <= t; j += 32) dot += pr[j] * d[j];
        dot = warp_sum(dot);
        for (int j = lane; j < T; j += 32) d[j] = j <= t ? pr[j] * (d[j] - dot) : 0.0f;
    }
}

#define GELU_S 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_K 0.044715f

/* As the CPU backend: GELU's tanh form as x / (1 + e^-2u), e^-2u capped below overflow. */
__device__ __forceinline__ float gelu_a(float v)
{
    const float m = -2.0f * GELU_S * (v + GELU_K * v * v * v);
    return expf(m < 88.0f ? m : 88.0f);
}

__global__ void k_gelu(float *y, const float *x, size_t n)
{
    GRID_STRIDE(i, n)
    {
        const float v = x[i];
        y[i] = v / (1.0f + gelu_a(v));
    }
}

__global__ void k_gelu_bwd(float *dx, const float *x, const float *dy, size_t n)
{
    GRID_STRIDE(i, n)
    {
        const float v = x[i], a = gelu_a(v), s = 1.0f / (1.0f + a);
        dx[i] = dy[i] * (s + v * s * (a * s) * 2.0f * GELU_S * (1.0f + 3.0f * GELU_K * v * v));
    }
}
