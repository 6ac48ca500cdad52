/*
 * codec.c - the six wire codecs of a model chunk (codec.h; formats in proto/PROTOCOL.md).
 *
 * Every codec is one ops table below, indexed by its wire number: the protocol numbers the
 * codecs, so a new one starts with a protocol change and then is one table here.
 *
 * The dense loops are written for the auto-vectoriser: conversions are integer arithmetic on
 * bit patterns (memcpy in and out, any alignment) with selects instead of branches, and
 * every reduction is an OR or a max. The finite checks test exponent bits, so no floating
 * point exception is raised and -ffast-math would not change an answer.
 */
#include "codec.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "codec.c assumes a little-endian host (the wire is little-endian)"
#endif

// ---- bits ----

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t load_u32(const uint8_t *p)
{
    uint32_t u;
    memcpy(&u, p, sizeof u);
    return u;
}

static inline uint16_t load_u16(const uint8_t *p)
{
    uint16_t u;
    memcpy(&u, p, sizeof u);
    return u;
}

static inline void store_u16(uint8_t *p, uint32_t v)
{
    const uint16_t h = (uint16_t)v;
    memcpy(p, &h, sizeof h);
}

static inline void store_u32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, sizeof v);
}

/* The entry a codec encodes: x[i], or the difference to the public copy for error feedback.
 * Callers pass ref as a literal NULL or a pointer, so each loop is compiled twice, once
 * without the subtraction. */
static inline float entry(const float *x, const float *ref, size_t i)
{
    return ref ? x[i] - ref[i] : x[i];
}

/* binary32 exponent all ones: Inf or NaN. */
#define NONFINITE_ABS 0x7f800000u

/* Round the binary32 u to binary16, ties to even; finite magnitudes beyond 65504 give 65504.
 * Non-finite u give 65504 too (the encoders reject them first). */
static inline uint32_t f16_round(uint32_t u)
{
    const uint32_t sign = (u >> 16) & 0x8000u;
    const int32_t a = (int32_t)(u & 0x7fffffffu);
    /* Normal halves (a >= 2^-14): keep 10 of the 23 mantissa bits, adding just under half of
     * the dropped part plus the kept part's last bit (ties to even), and rebias the exponent
     * from 127 to 15. A carry out of the mantissa moves the exponent up, as it must. */
    const int32_t nrm = (int32_t)(((uint32_t)a + 0x0fffu + (((uint32_t)a >> 13) & 1u) - 0x38000000u) >> 13);
    /* Below 2^-14 the halves are the multiples of 2^-24 (subnormals). The ulp of 0.5f is
     * 2^-24, so adding 0.5f makes the hardware round a to such a multiple, ties to even;
     * the multiple is then the sum's low bits. 2^-14 itself gives 1024 = 0x0400, the
     * smallest normal half: right too. */
    const int32_t sub = (int32_t)f2u(u2f((uint32_t)a) + 0.5f) - 0x3f000000;
    /* A select by masks: a ?: whose arms hold float arithmetic is not if-converted (the
     * arithmetic might trap), and the loop would not vectorise. */
    const int32_t is_sub = -(int32_t)(a < 0x38800000);
    int32_t h = (sub & is_sub) | (nrm & ~is_sub);
    h = h < 0x7bff ? h : 0x7bff;
    return sign | (uint32_t)h;
}

/* binary16 bits (finite patterns) to binary32, exact. */
static inline float f16_widen(uint32_t h)
{
    const uint32_t sign = (h & 0x8000u) << 16;
    const int32_t em = (int32_t)(h & 0x7fffu);
    const uint32_t nrm = ((uint32_t)em << 13) + 0x38000000u; /* rebias 15 -> 127 */
    const uint32_t sub = f2u((float)em * 0x1p-24f);          /* em < 1024: exact */
    const uint32_t is_sub = -(uint32_t)(em < 0x0400);        /* a mask select, as above */
    return u2f(sign | (sub & is_sub) | (nrm & ~is_sub));
}

/* Round the binary32 u to its upper 16 bits, ties to even; clamp like f16_round. */
static inline uint32_t bf16_round(uint32_t u)
{
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7fffffffu;
    int32_t h = (int32_t)((a + 0x7fffu + ((a >> 16) & 1u)) >> 16);
    h = h < 0x7f7f ? h : 0x7f7f;
    return sign | (uint32_t)h;
}

uint16_t rumor_codec_f16_from_float(float x)
{
    const uint32_t u = f2u(x), a = u & 0x7fffffffu;
    if (a > NONFINITE_ABS) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u); /* quiet NaN */
    if (a == NONFINITE_ABS) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7c00u);
    return (uint16_t)f16_round(u);
}

float rumor_codec_f16_to_float(uint16_t h)
{
    if ((h & 0x7c00u) == 0x7c00u) return u2f(((uint32_t)(h & 0x8000u) << 16) | NONFINITE_ABS | ((uint32_t)(h & 0x3ffu) << 13));
    return f16_widen(h);
}

uint16_t rumor_codec_bf16_from_float(float x)
{
    const uint32_t u = f2u(x), a = u & 0x7fffffffu;
    if (a > NONFINITE_ABS) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u); /* quiet NaN */
    if (a == NONFINITE_ABS) return (uint16_t)(u >> 16);
    return (uint16_t)bf16_round(u);
}

float rumor_codec_bf16_to_float(uint16_t h)
{
    return u2f((uint32_t)h << 16);
}

// ---- errors ----

static rumor_err_t nonfinite_input(const char *name, const float *x, const float *ref, size_t n, char *err)
{
    size_t i = 0;
    while (i < n && (f2u(entry(x, ref, i)) & 0x7fffffffu) < NONFINITE_ABS) i++;
    return rumor_fail(err, RUMOR_EINVAL, "%s: cannot encode entry %zu: %s is not finite", name, i,
                      ref ? "its difference to the public copy" : "it");
}

// ---- f32 ----

static rumor_err_t f32_encode(const float *x, const float *ref, size_t n, size_t k, uint8_t *out, char *err)
{
    uint32_t bad = 0;
    if (ref)
        for (size_t i = 0; i < n; i++) {
            const float v = x[i] - ref[i];
            bad |= (f2u(v) & 0x7fffffffu) >= NONFINITE_ABS;
            memcpy(out + 4 * i, &v, 4);
        }
    else
        for (size_t i = 0; i < n; i++) {
            bad |= (f2u(x[i]) & 0x7fffffffu) >= NONFINITE_ABS;
            memcpy(out + 4 * i, &x[i], 4);
        }
    return bad ? nonfinite_input("f32", x, ref, n, err) : RUMOR_OK;
}

static rumor_err_t f32_check(const uint8_t *p, size_t len, size_t n, char *err)
{
    /* Independent lanes: the compiler keeps them in registers (an OR-reduction into one
     * variable serialises on it). */
    uint32_t lane[16] = {0}, bad = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) lane[j] |= (load_u32(p + 4 * (i + (size_t)j)) & NONFINITE_ABS) == NONFINITE_ABS;
    for (; i < n; i++) bad |= (load_u32(p + 4 * i) & NONFINITE_ABS) == NONFINITE_ABS;
    for (int j = 0; j < 16; j++) bad |= lane[j];
    if (!bad) return RUMOR_OK;
    for (i = 0; (load_u32(p + 4 * i) & NONFINITE_ABS) != NONFINITE_ABS; i++) {}
    return rumor_fail(err, RUMOR_EPROTO, "f32 chunk: value %zu is not finite", i);
}

static void f32_add(const uint8_t *p, size_t len, size_t n, float w, float *restrict acc)
{
    for (size_t i = 0; i < n; i++) acc[i] += w * u2f(load_u32(p + 4 * i));
}

static void f32_put(const uint8_t *p, size_t len, size_t n, float *out)
{
    memcpy(out, p, 4 * n);
}

// ---- fp16 ----

static inline uint32_t f16_encode_loop(const float *x, const float *ref, size_t n, uint8_t *out)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = f2u(entry(x, ref, i));
        bad |= (u & 0x7fffffffu) >= NONFINITE_ABS;
        store_u16(out + 2 * i, f16_round(u));
    }
    return bad;
}

static rumor_err_t f16_encode(const float *x, const float *ref, size_t n, size_t k, uint8_t *out, char *err)
{
    const uint32_t bad = ref ? f16_encode_loop(x, ref, n, out) : f16_encode_loop(x, NULL, n, out);
    return bad ? nonfinite_input("fp16", x, ref, n, err) : RUMOR_OK;
}

/* Exponent all ones in a 16-bit pattern whose exponent field is `mask`. */
static rumor_err_t half_check(const char *name, uint32_t mask, const uint8_t *p, size_t n, char *err)
{
    uint32_t lane[16] = {0}, bad = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) lane[j] |= (load_u16(p + 2 * (i + (size_t)j)) & mask) == mask;
    for (; i < n; i++) bad |= (load_u16(p + 2 * i) & mask) == mask;
    for (int j = 0; j < 16; j++) bad |= lane[j];
    if (!bad) return RUMOR_OK;
    for (i = 0; (load_u16(p + 2 * i) & mask) != mask; i++) {}
    return rumor_fail(err, RUMOR_EPROTO, "%s chunk: value %zu is not finite", name, i);
}

static rumor_err_t f16_check(const uint8_t *p, size_t len, size_t n, char *err)
{
    return half_check("fp16", 0x7c00u, p, n, err);
}

static void f16_add(const uint8_t *p, size_t len, size_t n, float w, float *restrict acc)
{
    for (size_t i = 0; i < n; i++) acc[i] += w * f16_widen(load_u16(p + 2 * i));
}

static void f16_put(const uint8_t *p, size_t len, size_t n, float *restrict out)
{
    for (size_t i = 0; i < n; i++) out[i] = f16_widen(load_u16(p + 2 * i));
}

// ---- bf16 ----

static inline uint32_t bf16_encode_loop(const float *x, const float *ref, size_t n, uint8_t *out)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = f2u(entry(x, ref, i));
        bad |= (u & 0x7fffffffu) >= NONFINITE_ABS;
        store_u16(out + 2 * i, bf16_round(u));
    }
    return bad;
}

static rumor_err_t bf16_encode(const float *x, const float *ref, size_t n, size_t k, uint8_t *out, char *err)
{
    const uint32_t bad = ref ? bf16_encode_loop(x, ref, n, out) : bf16_encode_loop(x, NULL, n, out);
    return bad ? nonfinite_input("bf16", x, ref, n, err) : RUMOR_OK;
}

static rumor_err_t bf16_check(const uint8_t *p, size_t len, size_t n, char *err)
{
    return half_check("bf16", 0x7f80u, p, n, err);
}

static void bf16_add(const uint8_t *p, size_t len, size_t n, float w, float *restrict acc)
{
    for (size_t i = 0; i < n; i++) acc[i] += w * u2f((uint32_t)load_u16(p + 2 * i) << 16);
}

static void bf16_put(const uint8_t *p, size_t len, size_t n, float *restrict out)
{
    for (size_t i = 0; i < n; i++) out[i] = u2f((uint32_t)load_u16(p + 2 * i) << 16);
}

// ---- int8 ----

/* The largest magnitude's bit pattern (magnitudes order like their patterns); a result
 * >= NONFINITE_ABS means some entry is Inf or NaN. */
static inline int32_t max_abs_bits(const float *x, const float *ref, size_t n)
{
    int32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const int32_t a = (int32_t)(f2u(entry(x, ref, i)) & 0x7fffffffu);
        m = a > m ? a : m;
    }
    return m;
}

/* q = round(v * inv), ties to even: adding 1.5 * 2^23 (whose ulp is 1) makes the hardware
 * round r to an integer held in the sum's low bits. |v| <= max|v| = 127 s, so |r| <= 127 (1 +
 * 5 * 2^-24) rounds to at most 127; the integer clamp is a second line of defence (a float
 * clamp would not vectorise: float compares may trap). */
static inline void int8_quantise(const float *x, const float *ref, size_t n, float inv, int8_t *restrict q)
{
    for (size_t i = 0; i < n; i++) {
        int32_t r = (int32_t)f2u(entry(x, ref, i) * inv + 0x1.8p23f) - 0x4b400000;
        r = r < 127 ? r : 127;
        r = r > -127 ? r : -127;
        q[i] = (int8_t)r;
    }
}

static rumor_err_t int8_encode(const float *x, const float *ref, size_t n, size_t k, uint8_t *out, char *err)
{
    const int32_t m = ref ? max_abs_bits(x, ref, n) : max_abs_bits(x, NULL, n);
    if ((uint32_t)m >= NONFINITE_ABS) return nonfinite_input("int8", x, ref, n, err);
    float s = u2f((uint32_t)m) / 127.0f;
    if (!(s * 127.0f <= FLT_MAX)) s = nextafterf(s, 0.0f); /* so that s * 127 stays finite */
    store_u32(out, f2u(s));
    int8_t *q = (int8_t *)(out + 4);
    if (s == 0.0f) {
        memset(q, 0, n);
    } else if (s >= FLT_MIN) {
        /* Multiplying by 1/s instead of dividing by s moves x/s by at most 2^-16 (|x/s| <=
         * 127), so |x - s q| <= s (1/2 + 2^-16). */
        const float inv = 1.0f / s;
        if (ref)
            int8_quantise(x, ref, n, inv, q);
        else
            int8_quantise(x, NULL, n, inv, q);
    } else {
        /* A subnormal scale (every |x| below 127 * 2^-126): 1/s may not be finite; divide in
         * double instead. Rare, so plain. */
        for (size_t i = 0; i < n; i++) {
            double r = nearbyint((double)entry(x, ref, i) / (double)s);
            q[i] = (int8_t)(r > 127.0 ? 127.0 : r < -127.0 ? -127.0 : r);
        }
    }
    return RUMOR_OK;
}

static rumor_err_t int8_check(const uint8_t *p, size_t len, size_t n, char *err)
{
    const float s = u2f(load_u32(p));
    if (!isfinite(s)) return rumor_fail(err, RUMOR_EPROTO, "int8 chunk: the scale is not finite");
    if (isfinite(fabsf(s) * 128.0f)) return RUMOR_OK; /* |q| <= 128: no product overflows */
    /* A huge scale: the products overflow only if some |q| is large enough. Rounding is
     * monotonic, so the largest |q| decides. */
    const int8_t *q = (const int8_t *)(p + 4);
    int32_t qmax = 0;
    for (size_t i = 0; i < n; i++) {
        const int32_t a = q[i] < 0 ? -(int32_t)q[i] : q[i];
        qmax = a > qmax ? a : qmax;
    }
    if (isfinite(fabsf(s) * (float)qmax)) return RUMOR_OK;
    size_t i = 0;
    while (isfinite(fabsf(s) * fabsf((float)q[i]))) i++;
    return rumor_fail(err, RUMOR_EPROTO, "int8 chunk: value %zu (scale %g times %d) is not finite", i, (double)s,
                      (int)q[i]);
}

static void int8_add(const uint8_t *p, size_t len, size_t n, float w, float *restrict acc)
{
    const float s = u2f(load_u32(p)), ws = w * s;
    const int8_t *q = (const int8_t *)(p + 4);
    if (isfinite(ws))
        for (size_t i = 0; i < n; i++) acc[i] += ws * (float)q[i];
    else /* a huge scale and weight: (w s) 0 would be NaN where w (s 0) is 0 */
        for (size_t i = 0; i < n; i++) acc[i] += w * (s * (float)q[i]);
}

static void int8_put(const uint8_t *p, size_t len, size_t n, float *restrict out)
{
    const float s = u2f(load_u32(p));
    const int8_t *q = (const int8_t *)(p + 4);
    for (size_t i = 0; i < n; i++) out[i] = s * (float)q[i];
}

// ---- int4 ----

/* Blocks of RUMOR_CODEC_INT4_BLOCK entries, each a bfloat16 scale s then its q in nibbles (the
 * even entry in the low nibble), symmetric: s = max|x| / 7 rounded to bfloat16, q = round(x /
 * s) within [-7, 7]. A block of m entries takes 2 + ceil(m / 2) bytes. */
enum { INT4_BLOCK = RUMOR_CODEC_INT4_BLOCK };

static size_t int4_len(size_t n) { return (size_t)rumor_codec_int4_len(n); }

static rumor_err_t int4_encode(const float *x, const float *ref, size_t n, size_t k, uint8_t *out, char *err)
{
    (void)k;
    for (size_t b = 0; b < n; b += INT4_BLOCK) {
        const size_t m = n - b < INT4_BLOCK ? n - b : INT4_BLOCK;
        const float *xb = x + b, *rb = ref ? ref + b : NULL;
        const int32_t mx = rb ? max_abs_bits(xb, rb, m) : max_abs_bits(xb, NULL, m);
        if ((uint32_t)mx >= NONFINITE_ABS) return nonfinite_input("int4", x, ref, n, err);
        uint32_t h = bf16_round(f2u(u2f((uint32_t)mx) / 7.0f));
        if (!(u2f(h << 16) * 7.0f <= FLT_MAX)) h--; /* the next bfloat16 down: s * 7 stays finite */
        const float s = u2f(h << 16);
        store_u16(out, h);
        int8_t v[INT4_BLOCK] = {0};
        if (s >= FLT_MIN) { /* as int8: |x / s - x inv| <= 2^-20, and |x / s| <= 7 (1 + 2^-8) rounds to 7 */
            const float inv = 1.0f / s;
            for (size_t i = 0; i < m; i++) {
                int32_t r = (int32_t)f2u(entry(xb, rb, i) * inv + 0x1.8p23f) - 0x4b400000;
                r = r < 7 ? r : 7;
                r = r > -7 ? r : -7;
                v[i] = (int8_t)r;
            }
        } else if (s > 0.0f) { /* a subnormal scale: 1/s may not be finite; divide in double */
            for (size_t i = 0; i < m; i++) {
                const double r = nearbyint((double)entry(xb, rb, i) / (double)s);
                v[i] = (int8_t)(r > 7.0 ? 7.0 : r < -7.0 ? -7.0 : r);
            }
        }
        uint8_t *q = out + 2;
        for (size_t i = 0; i < m; i += 2) q[i / 2] = (uint8_t)(((unsigned)v[i] & 0xfu) | ((unsigned)v[i + 1] & 0xfu) << 4);
        out += 2 + (m + 1) / 2;
    }
    return RUMOR_OK;
}

/* A byte's two values, sign-extended from their nibbles: the even entry's (low), the odd one's. */
static inline int32_t int4_lo(uint8_t b) { return (int32_t)(int8_t)(uint8_t)(b << 4) >> 4; }
static inline int32_t int4_hi(uint8_t b) { return (int32_t)(int8_t)b >> 4; }

static rumor_err_t int4_check(const uint8_t *p, size_t len, size_t n, char *err)
{
    (void)len;
    for (size_t b = 0; b < n; b += INT4_BLOCK) {
        const size_t m = n - b < INT4_BLOCK ? n - b : INT4_BLOCK, bytes = (m + 1) / 2;
        const float s = u2f((uint32_t)load_u16(p) << 16);
        if (!isfinite(s) || !isfinite(fabsf(s) * 7.0f))
            return rumor_fail(err, RUMOR_EPROTO, "int4 chunk: the scale of the block at %zu is not finite (or times 7)", b);
        const uint8_t *q = p + 2;
        uint32_t eight = 0; /* a nibble 8 is -8, outside -7..7 */
        for (size_t i = 0; i < bytes; i++) eight |= (uint32_t)((q[i] & 0xfu) == 8u) | (uint32_t)((q[i] >> 4) == 8u);
        if (eight) {
            size_t i = 0;
            while ((i % 2 ? q[i / 2] >> 4 : q[i / 2] & 0xfu) != 8u) i++;
            return rumor_fail(err, RUMOR_EPROTO, "int4 chunk: value %zu is -8 (outside -7..7)", b + i);
        }
        if (m % 2 && q[m / 2] >> 4)
            return rumor_fail(err, RUMOR_EPROTO, "int4 chunk: the padding nibble after value %zu is not 0", b + m - 1);
        p += 2 + bytes;
    }
    return RUMOR_OK;
}

static void int4_add(const uint8_t *p, size_t len, size_t n, float w, float *restrict acc)
{
    (void)len;
    for (size_t b = 0; b < n; b += INT4_BLOCK) {
        const size_t m = n - b < INT4_BLOCK ? n - b : INT4_BLOCK;
        const float s = u2f((uint32_t)load_u16(p) << 16), ws = w * s;
        const uint8_t *q = p + 2;
        float *restrict a = acc + b;
        if (isfinite(ws)) {
            for (size_t i = 0; i < m / 2; i++) {
                a[2 * i] += ws * (float)int4_lo(q[i]);
                a[2 * i + 1] += ws * (float)int4_hi(q[i]);
            }
            if (m % 2) a[m - 1] += ws * (float)int4_lo(q[m / 2]);
        } else { /* as int8: (w s) 0 would be NaN where w (s 0) is 0 */
            for (size_t i = 0; i < m; i++) a[i] += w * (s * (float)(i % 2 ? int4_hi(q[i / 2]) : int4_lo(q[i / 2])));
        }
        p += 2 + (m + 1) / 2;
    }
}

static void int4_put(const uint8_t *p, size_t len, size_t n, float *restrict out)
{
    memset(out, 0, n * sizeof *out);
    int4_add(p, len, n, 1.0f, out);
}

// ---- topk ----

/* |entry| as an ordered key: for finite floats, a larger magnitude has a larger pattern. */
static inline uint32_t mag_key(const float *x, const float *ref, size_t i)
{
    return f2u(entry(x, ref, i)) & 0x7fffffffu;
}

/* The bucket, from the top, that holds the *need-th largest key; *need becomes the rank
 * inside that bucket. */
static uint32_t pick_bucket(const uint32_t *hist, uint32_t bins, size_t *need)
{
    for (uint32_t b = bins; b-- > 0;) {
        if (hist[b] >= *need) return b;
        *need -= hist[b];
    }
    assert(!"pick_bucket: fewer keys than asked for");
    return 0;
}

/*
 * Radix select of T, the k-th largest key (key bit 31 is always 0), then one pass that
 * writes every entry with key > T and the first `need` entries with key == T (ties: lowest
 * index first), in index order. O(n) whatever the data, no allocation, 32 KiB of stack.
 *
 * Pass 1 counts the top 12 key bits (exponent and 4 mantissa bits: buckets 6% wide) in two
 * interleaved histograms, so that runs of one bucket do not wait on each other's increments.
 * The bucket holding T is usually small; when it has fewer than 2k entries its indices fit
 * in out (8k bytes) and pass 2 gathers them there, and the remaining 19 bits are selected
 * among those few. Otherwise (many equal magnitudes, k tiny) two more full passes count bits
 * 18..9 and 8..0 of the keys in the bucket. Passes that pick out few entries (the gather,
 * the writing) first test a block of entries at once, a loop the compiler vectorises, and
 * look at single entries only in blocks that hold one.
 */
enum { GATHER_BLOCK = 64, WRITE_BLOCK = 32 }; /* entries tested at once (measured best) */

static inline rumor_err_t topk_select(const float *x, const float *ref, size_t n, size_t k, uint8_t *out,
                                      char *err)
{
    uint32_t hist[2][4096];
    size_t need = k;
    uint32_t bad = 0;

    memset(hist, 0, sizeof hist);
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
        const uint32_t k0 = mag_key(x, ref, i), k1 = mag_key(x, ref, i + 1);
        bad |= (k0 >= NONFINITE_ABS) | (k1 >= NONFINITE_ABS);
        hist[0][k0 >> 19]++;
        hist[1][k1 >> 19]++;
    }
    for (; i < n; i++) {
        const uint32_t k0 = mag_key(x, ref, i);
        bad |= k0 >= NONFINITE_ABS;
        hist[0][k0 >> 19]++;
    }
    if (bad) return nonfinite_input("topk", x, ref, n, err);
    for (uint32_t b = 0; b < 4096; b++) hist[0][b] += hist[1][b];
    const uint32_t b1 = pick_bucket(hist[0], 4096, &need);
    const size_t in_bucket = hist[0][b1];

    uint32_t t;
    if (in_bucket < 2 * k) {
        /* Gather the bucket's indices into out as uint32: fewer than 2k of them fit in its 8k
         * bytes, and the pairs written at the end overwrite them only once they are used. */
        size_t c = 0;
        for (i = 0; i < n; i += GATHER_BLOCK) {
            const size_t end = n - i < GATHER_BLOCK ? n : i + GATHER_BLOCK;
            uint32_t any = 0;
            if (end - i == GATHER_BLOCK)
                for (size_t q = i; q < i + GATHER_BLOCK; q++) any |= (mag_key(x, ref, q) >> 19) == b1;
            else
                any = 1;
            if (any)
                for (size_t q = i; q < end; q++)
                    if ((mag_key(x, ref, q) >> 19) == b1) store_u32(out + 4 * c++, (uint32_t)q);
        }
        assert(c == in_bucket);
        memset(hist[0], 0, sizeof hist[0]);
        for (size_t j = 0; j < c; j++) hist[0][(mag_key(x, ref, load_u32(out + 4 * j)) >> 9) & 0x3ffu]++;
        const uint32_t p2 = b1 << 10 | pick_bucket(hist[0], 1024, &need);
        memset(hist[0], 0, sizeof hist[0]);
        for (size_t j = 0; j < c; j++) {
            const uint32_t key = mag_key(x, ref, load_u32(out + 4 * j));
            if ((key >> 9) == p2) hist[0][key & 0x1ffu]++;
        }
        t = p2 << 9 | pick_bucket(hist[0], 512, &need);
    } else {
        memset(hist[0], 0, sizeof hist[0]);
        for (i = 0; i < n; i++) {
            const uint32_t key = mag_key(x, ref, i);
            if ((key >> 19) == b1) hist[0][(key >> 9) & 0x3ffu]++;
        }
        const uint32_t p2 = b1 << 10 | pick_bucket(hist[0], 1024, &need);
        memset(hist[0], 0, sizeof hist[0]);
        for (i = 0; i < n; i++) {
            const uint32_t key = mag_key(x, ref, i);
            if ((key >> 9) == p2) hist[0][key & 0x1ffu]++;
        }
        t = p2 << 9 | pick_bucket(hist[0], 512, &need);
    }

    size_t j = 0;
    for (i = 0; i < n; i += WRITE_BLOCK) {
        const size_t end = n - i < WRITE_BLOCK ? n : i + WRITE_BLOCK;
        uint32_t any = 0;
        if (end - i == WRITE_BLOCK)
            for (size_t q = i; q < i + WRITE_BLOCK; q++) any |= mag_key(x, ref, q) >= t;
        else
            any = 1;
        if (any)
            for (size_t q = i; q < end; q++) {
                const float v = entry(x, ref, q);
                const uint32_t key = f2u(v) & 0x7fffffffu;
                if (key > t || (key == t && need > 0)) {
                    need -= key == t;
                    store_u32(out + 8 * j, (uint32_t)q);
                    store_u32(out + 8 * j + 4, f2u(v));
                    j++;
                }
            }
    }
    assert(j == k && need == 0);
    return RUMOR_OK;
}

static rumor_err_t topk_encode(const float *x, const float *ref, size_t n, size_t k, uint8_t *out, char *err)
{
    if ((uint64_t)n > UINT32_MAX) /* indices are uint32, and so are the histogram's counts */
        return rumor_fail(err, RUMOR_EINVAL, "topk: a chunk of %zu parameters is more than 2^32 - 1", n);
    if (k == n) { /* everything goes: no selection */
        uint32_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            const float v = entry(x, ref, i);
            bad |= (f2u(v) & 0x7fffffffu) >= NONFINITE_ABS;
            store_u32(out + 8 * i, (uint32_t)i);
            store_u32(out + 8 * i + 4, f2u(v));
        }
        return bad ? nonfinite_input("topk", x, ref, n, err) : RUMOR_OK;
    }
    return ref ? topk_select(x, ref, n, k, out, err) : topk_select(x, NULL, n, k, out, err);
}

static int cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static rumor_err_t topk_check(const uint8_t *p, size_t len, size_t n, char *err)
{
    const size_t k = len / 8;
    bool ascending = true;
    for (size_t j = 0; j < k; j++) {
        const uint32_t idx = load_u32(p + 8 * j);
        if ((load_u32(p + 8 * j + 4) & NONFINITE_ABS) == NONFINITE_ABS)
            return rumor_fail(err, RUMOR_EPROTO, "topk chunk: value %zu (index %" PRIu32 ") is not finite", j, idx);
        if (idx >= n)
            return rumor_fail(err, RUMOR_EPROTO, "topk chunk: index %" PRIu32 " is beyond the chunk's %zu parameters",
                              idx, n);
        if (j && idx <= load_u32(p + 8 * (j - 1))) ascending = false;
    }
    if (ascending) return RUMOR_OK;
    /* Any order is allowed as long as no index repeats: sort a copy and compare neighbours. */
    uint32_t *idx = malloc(k * sizeof *idx);
    if (!idx) return rumor_fail(err, RUMOR_ENOMEM, "topk chunk: no memory to check %zu indices", k);
    for (size_t j = 0; j < k; j++) idx[j] = load_u32(p + 8 * j);
    qsort(idx, k, sizeof *idx, cmp_u32);
    rumor_err_t rc = RUMOR_OK;
    for (size_t j = 1; j < k; j++)
        if (idx[j] == idx[j - 1]) {
            rc = rumor_fail(err, RUMOR_EPROTO, "topk chunk: index %" PRIu32 " is listed twice", idx[j]);
            break;
        }
    free(idx);
    return rc;
}

static void topk_add(const uint8_t *p, size_t len, size_t n, float w, float *acc)
{
    for (size_t j = 0; j < len / 8; j++) acc[load_u32(p + 8 * j)] += w * u2f(load_u32(p + 8 * j + 4));
}

static void topk_put(const uint8_t *p, size_t len, size_t n, float *out)
{
    memset(out, 0, n * sizeof *out);
    for (size_t j = 0; j < len / 8; j++) out[load_u32(p + 8 * j)] = u2f(load_u32(p + 8 * j + 4));
}

// ---- the table ----

/* One codec. encode: v = x - ref (ref NULL: v = x), n >= 1 entries (k pairs for topk) into
 * out, which has room; RUMOR_EINVAL when some v is not finite. check: validate a payload
 * whose length already matches the codec and n, writing nothing. add / put: apply a payload
 * that passed check (acc += w * value; out = value). */
typedef struct {
    const char *name;
    rumor_err_t (*encode)(const float *x, const float *ref, size_t n, size_t k, uint8_t *out, char *err);
    rumor_err_t (*check)(const uint8_t *p, size_t len, size_t n, char *err);
    void (*add)(const uint8_t *p, size_t len, size_t n, float w, float *acc);
    void (*put)(const uint8_t *p, size_t len, size_t n, float *out);
} codec_ops_t;

static const codec_ops_t codecs[] = {
    [RUMOR_CODEC_F32] = {"f32", f32_encode, f32_check, f32_add, f32_put},
    [RUMOR_CODEC_F16] = {"fp16", f16_encode, f16_check, f16_add, f16_put},
    [RUMOR_CODEC_BF16] = {"bf16", bf16_encode, bf16_check, bf16_add, bf16_put},
    [RUMOR_CODEC_INT8] = {"int8", int8_encode, int8_check, int8_add, int8_put},
    [RUMOR_CODEC_TOPK] = {"topk", topk_encode, topk_check, topk_add, topk_put},
    [RUMOR_CODEC_INT4] = {"int4", int4_encode, int4_check, int4_add, int4_put},
};

static const codec_ops_t *ops_of(rumor_proto_codec_t id)
{
    return (unsigned)id < RUMOR_ARRAY_LEN(codecs) && codecs[id].name ? &codecs[id] : NULL; /* 5, masked, is no codec's */
}

const char *rumor_codec_name(rumor_proto_codec_t id)
{
    const codec_ops_t *ops = ops_of(id);
    return ops ? ops->name : id == RUMOR_CODEC_MASKED ? "masked" : "?";
}

// ---- spec ----

rumor_err_t rumor_codec_parse(rumor_codec_t *out, const char *spec, char err[RUMOR_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    if (!spec) spec = "";
    static const struct {
        const char *name;
        rumor_proto_codec_t id;
    } names[] = {{"f32", RUMOR_CODEC_F32},   {"fp32", RUMOR_CODEC_F32}, {"fp16", RUMOR_CODEC_F16},
                 {"f16", RUMOR_CODEC_F16},   {"bf16", RUMOR_CODEC_BF16}, {"int8", RUMOR_CODEC_INT8},
                 {"int4", RUMOR_CODEC_INT4}};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(names); i++)
        if (strcmp(spec, names[i].name) == 0) {
            out->id = names[i].id;
            return RUMOR_OK;
        }
    if (strncmp(spec, "topk:", 5) == 0) {
        const char *a = spec + 5;
        char *end;
        errno = 0;
        /* Plain decimals only: strtod would also take "nan", "inf" and hex. */
        const bool decimal = ((*a >= '0' && *a <= '9') || *a == '.') && a[strspn(a, "0123456789.eE+-")] == 0;
        const double f = decimal ? strtod(a, &end) : -1.0;
        if (f == -1.0 || errno || *end || !(f > 0.0) || !(f <= 1.0))
            return rumor_fail(err, RUMOR_EINVAL,
                              "--codec %s: topk needs a fraction of the entries in (0, 1], e.g. topk:0.01", spec);
        out->id = RUMOR_CODEC_TOPK;
        out->fraction = f;
        return RUMOR_OK;
    }
    if (strcmp(spec, "topk") == 0)
        return rumor_fail(err, RUMOR_EINVAL, "--codec topk needs the fraction of entries sent, e.g. topk:0.01");
    return rumor_fail(err, RUMOR_EINVAL, "unknown --codec '%s' (expected f32, fp16, bf16, int8, int4 or topk:FRACTION)",
                      spec);
}

size_t rumor_codec_chunk_params(const rumor_codec_t *c) { return c->id == RUMOR_CODEC_INT8 ? 32768 : 0; }

void rumor_codec_format(char *buf, size_t len, const rumor_codec_t *c)
{
    if (c->id != RUMOR_CODEC_TOPK) {
        snprintf(buf, len, "%s", rumor_codec_name(c->id));
        return;
    }
    /* The shortest of %.15g, %.16g, %.17g that reads back as the same double. */
    char num[32];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(num, sizeof num, "%.*g", digits, c->fraction);
        if (strtod(num, NULL) == c->fraction) break;
    }
    snprintf(buf, len, "topk:%s", num);
}

// ---- sizes ----

size_t rumor_codec_topk_count(const rumor_codec_t *c, size_t n)
{
    if (c->id != RUMOR_CODEC_TOPK) return n;
    if (n == 0) return 0;
    /* fraction * n carries a rounding error of one ulp or so (0.01 * 300 is 3.0000000000000004):
     * forgive relative excesses below 1e-12 before rounding up. */
    const double t = c->fraction * (double)n * (1.0 - 1e-12);
    double k = ceil(t);
    if (k < 1.0) k = 1.0;
    return k >= (double)n ? n : (size_t)k;
}

size_t rumor_codec_encoded_len(const rumor_codec_t *c, size_t n)
{
    switch (c->id) {
    case RUMOR_CODEC_F32:
    case RUMOR_CODEC_MASKED: return 4 * n;
    case RUMOR_CODEC_F16:
    case RUMOR_CODEC_BF16: return 2 * n;
    case RUMOR_CODEC_INT8: return 4 + n;
    case RUMOR_CODEC_TOPK: return 8 * rumor_codec_topk_count(c, n);
    case RUMOR_CODEC_INT4: return int4_len(n);
    }
    assert(!"rumor_codec_encoded_len: unknown codec");
    return 0;
}

// ---- encode ----

static rumor_err_t encode(const rumor_codec_t *c, const float *x, const float *ref, size_t n, uint8_t *out,
                          size_t *out_len, char *err)
{
    const codec_ops_t *ops = ops_of(c->id);
    assert(ops && "rumor_codec_encode: unknown codec");
    if (n == 0) return rumor_fail(err, RUMOR_EINVAL, "%s: a chunk needs at least one parameter", ops->name);
    rumor_err_t rc = ops->encode(x, ref, n, rumor_codec_topk_count(c, n), out, err);
    if (rc == RUMOR_OK) *out_len = rumor_codec_encoded_len(c, n);
    return rc;
}

rumor_err_t rumor_codec_encode(const rumor_codec_t *c, const float *x, size_t n, uint8_t *out, size_t *out_len,
                               char err[RUMOR_ERR_LEN])
{
    return encode(c, x, NULL, n, out, out_len, err);
}

rumor_err_t rumor_codec_encode_delta(const rumor_codec_t *c, const float *x, float *xhat, size_t n, uint8_t *out,
                                     size_t *out_len, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = encode(c, x, xhat, n, out, out_len, err);
    if (rc != RUMOR_OK) return rc;
    /* What every receiver does with the payload, on the sender's copy: a valid payload by
     * construction, so no check. */
    ops_of(c->id)->add(out, *out_len, n, 1.0f, xhat);
    return RUMOR_OK;
}

// ---- decode ----

/* The length rule of PROTOCOL.md's codec table, overflow-free. */
static rumor_err_t check_len(const codec_ops_t *ops, rumor_proto_codec_t id, size_t len, size_t n, char *err)
{
    if (n == 0) return rumor_fail(err, RUMOR_EPROTO, "%s chunk: a chunk of 0 parameters", ops->name);
    bool ok = false;
    switch (id) {
    case RUMOR_CODEC_F32: ok = len % 4 == 0 && len / 4 == n; break;
    case RUMOR_CODEC_F16:
    case RUMOR_CODEC_BF16: ok = len % 2 == 0 && len / 2 == n; break;
    case RUMOR_CODEC_INT8: ok = len >= 4 && len - 4 == n; break;
    case RUMOR_CODEC_INT4: ok = len == int4_len(n); break;
    case RUMOR_CODEC_TOPK:
        if (len % 8 != 0 || len == 0 || len / 8 > n)
            return rumor_fail(err, RUMOR_EPROTO, "topk chunk: %zu bytes are not 1 to %zu pairs of 8 bytes", len, n);
        return RUMOR_OK;
    case RUMOR_CODEC_MASKED: break; /* not this module's: the gossip engine sums masked words */
    }
    if (ok) return RUMOR_OK;
    return rumor_fail(err, RUMOR_EPROTO, "%s chunk: %zu bytes for %zu parameters", ops->name, len, n);
}

rumor_err_t rumor_codec_check(rumor_proto_codec_t codec, const uint8_t *payload, size_t len, size_t n,
                              char err[RUMOR_ERR_LEN])
{
    const codec_ops_t *ops = ops_of(codec);
    if (!ops) return rumor_fail(err, RUMOR_EPROTO, "unknown codec %d", (int)codec);
    rumor_err_t rc = check_len(ops, codec, len, n, err);
    if (rc == RUMOR_OK) rc = ops->check(payload, len, n, err);
    return rc;
}

rumor_err_t rumor_codec_decode_add(rumor_proto_codec_t codec, const uint8_t *payload, size_t len, size_t n,
                                   float w, float *acc, char err[RUMOR_ERR_LEN])
{
    assert(isfinite(w));
    rumor_err_t rc = rumor_codec_check(codec, payload, len, n, err);
    if (rc == RUMOR_OK) ops_of(codec)->add(payload, len, n, w, acc);
    return rc;
}

rumor_err_t rumor_codec_decode(rumor_proto_codec_t codec, const uint8_t *payload, size_t len, size_t n, float *out,
                               char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = rumor_codec_check(codec, payload, len, n, err);
    if (rc == RUMOR_OK) ops_of(codec)->put(payload, len, n, out);
    return rc;
}
