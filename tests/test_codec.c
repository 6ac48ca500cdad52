/* test_codec.c - the model-chunk codecs: known answers and every rounding boundary of fp16
 * and bf16, round trips within their proven error bounds, topk against a brute-force sort,
 * decode_add's arithmetic, rejection of bad payloads without side effects, error feedback,
 * int4's block layout and bounds. */
#include "check.h"
#include "codec.h"
#include "rng.h"
#include "base.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static rumor_codec_t codec(const char *spec)
{
    rumor_codec_t c;
    char err[RUMOR_ERR_LEN];
    if (rumor_codec_parse(&c, spec, err) != RUMOR_OK) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    return c;
}

/* n floats, log-uniform magnitudes over [2^lo, 2^hi), random signs. */
static void fill_log(rumor_rng_t *rng, float *x, size_t n, int lo, int hi)
{
    for (size_t i = 0; i < n; i++) {
        const double m = ldexp(1.0 + rumor_rng_uniform(rng), lo + (int)rumor_rng_below(rng, (uint64_t)(hi - lo)));
        x[i] = (float)(rumor_rng_below(rng, 2) ? -m : m);
    }
}

// ---- spec ----

static void parse(void)
{
    char err[RUMOR_ERR_LEN], buf[64];
    rumor_codec_t c;
    const struct {
        const char *spec, *canonical;
        rumor_proto_codec_t id;
    } ok[] = {{"f32", "f32", RUMOR_CODEC_F32},    {"fp32", "f32", RUMOR_CODEC_F32},
              {"fp16", "fp16", RUMOR_CODEC_F16},  {"f16", "fp16", RUMOR_CODEC_F16},
              {"bf16", "bf16", RUMOR_CODEC_BF16}, {"int8", "int8", RUMOR_CODEC_INT8},
              {"int4", "int4", RUMOR_CODEC_INT4},
              {"topk:0.01", "topk:0.01", RUMOR_CODEC_TOPK}, {"topk:1", "topk:1", RUMOR_CODEC_TOPK},
              {"topk:.25", "topk:0.25", RUMOR_CODEC_TOPK},  {"topk:1e-3", "topk:0.001", RUMOR_CODEC_TOPK}};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(ok); i++) {
        CHECK_MSG(rumor_codec_parse(&c, ok[i].spec, err) == RUMOR_OK, "%s", ok[i].spec);
        CHECK(c.id == ok[i].id);
        rumor_codec_format(buf, sizeof buf, &c);
        CHECK_MSG(strcmp(buf, ok[i].canonical) == 0, "%s formats as %s", ok[i].spec, buf);
        rumor_codec_t back;
        CHECK(rumor_codec_parse(&back, buf, err) == RUMOR_OK && back.id == c.id && back.fraction == c.fraction);
    }
    CHECK(codec("topk:0.01").fraction == 0.01);
    const char *bad[] = {"", "F32", "fp64", "int3", "topk", "topk:", "topk:0", "topk:0.0", "topk:-0.1", "topk:1.5",
                         "topk:nan", "topk:inf", "topk:0x1p-3", "topk:0.1x", "topk: 0.1", "int8:1", "fp16 "};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad); i++) {
        err[0] = 0;
        CHECK_MSG(rumor_codec_parse(&c, bad[i], err) == RUMOR_EINVAL, "'%s' accepted", bad[i]);
        CHECK(err[0] != 0);
    }
    CHECK(rumor_codec_parse(&c, NULL, NULL) == RUMOR_EINVAL);
    CHECK(strcmp(rumor_codec_name(RUMOR_CODEC_INT8), "int8") == 0);
    CHECK(strcmp(rumor_codec_name(RUMOR_CODEC_MASKED), "masked") == 0);
    CHECK(strcmp(rumor_codec_name((rumor_proto_codec_t)(RUMOR_CODEC_LAST + 1)), "?") == 0);
}

static void sizes(void)
{
    const rumor_codec_t f32 = codec("f32"), f16 = codec("fp16"), bf16 = codec("bf16"), i8 = codec("int8");
    CHECK(rumor_codec_encoded_len(&f32, 7) == 28);
    CHECK(rumor_codec_encoded_len(&f16, 7) == 14);
    CHECK(rumor_codec_encoded_len(&bf16, 7) == 14);
    CHECK(rumor_codec_encoded_len(&i8, 7) == 11);
    const rumor_codec_t i4 = codec("int4"); /* 2 bytes of scale a block of 64, then nibbles */
    CHECK(rumor_codec_encoded_len(&i4, 1) == 3);
    CHECK(rumor_codec_encoded_len(&i4, 7) == 6);
    CHECK(rumor_codec_encoded_len(&i4, 64) == 34);
    CHECK(rumor_codec_encoded_len(&i4, 65) == 37);
    CHECK(rumor_codec_encoded_len(&i4, 262144) == 139264); /* 4.25 bits a parameter */
    const rumor_codec_t t = codec("topk:0.01");
    CHECK(rumor_codec_topk_count(&t, 300) == 3); /* 0.01 * 300 is 3.0000000000000004 in double */
    CHECK(rumor_codec_topk_count(&t, 301) == 4);
    CHECK(rumor_codec_topk_count(&t, 262144) == 2622);
    CHECK(rumor_codec_topk_count(&t, 1) == 1);
    CHECK(rumor_codec_topk_count(&t, 99) == 1);
    CHECK(rumor_codec_topk_count(&t, 0) == 0);
    CHECK(rumor_codec_encoded_len(&t, 300) == 24);
    const rumor_codec_t half = codec("topk:0.5"), all = codec("topk:1"), tiny = codec("topk:1e-9");
    CHECK(rumor_codec_topk_count(&half, 3) == 2);
    CHECK(rumor_codec_topk_count(&half, 4) == 2);
    CHECK(rumor_codec_topk_count(&all, 7) == 7);
    CHECK(rumor_codec_topk_count(&tiny, 1000) == 1);
    CHECK(rumor_codec_topk_count(&f16, 7) == 7);
}

// ---- fp16 ----

/* An independent reference: round |x| to binary16 in double arithmetic (exact here), ties to
 * even by nearbyint, then clamp at 65504. */
static uint16_t f16_reference(float x)
{
    const double a = fabs((double)x);
    uint32_t h;
    if (a < 0x1p-14) {
        h = (uint32_t)nearbyint(a * 0x1p24); /* 1024 is 2^-14, the smallest normal: 0x0400 */
    } else {
        int e;
        frexp(a, &e); /* a = m 2^e, m in [0.5, 1): the half's exponent is e - 1 */
        double q = nearbyint(ldexp(a, 11 - e)); /* in [1024, 2048] */
        int E = e - 1;
        if (q == 2048.0) q = 1024.0, E++;
        h = E > 15 ? 0x7bffu : (uint32_t)(E + 15) << 10 | (uint32_t)(q - 1024.0);
        if (h > 0x7bffu) h = 0x7bffu;
    }
    return (uint16_t)(h | (signbit(x) ? 0x8000u : 0u));
}

static void f16_known(void)
{
    const struct {
        float x;
        uint16_t h;
    } kat[] = {
        {1.0f, 0x3c00},          {-2.0f, 0xc000},         {0.0f, 0x0000},           {-0.0f, 0x8000},
        {65504.0f, 0x7bff},      {-65504.0f, 0xfbff},     {0x1p-24f, 0x0001},       {0x1p-25f, 0x0000}, /* tie to 0 */
        {0x1.8p-24f, 0x0002},    {0x1.4p-23f, 0x0002},    {0x1p-14f, 0x0400},       {0x1.ffcp-15f, 0x0400}, /* 1023.5 ulps: tie to even */
        {0x1.ffap-15f, 0x03ff},  {1.0f + 0x1p-11f, 0x3c00}, {1.0f + 0x3p-11f, 0x3c02}, {1.0f + 0x1p-10f, 0x3c01},
        {0.1f, 0x2e66},          {1.0f / 3.0f, 0x3555},   {65519.0f, 0x7bff},       {65520.0f, 0x7bff}, /* not inf */
        {1e10f, 0x7bff},         {-FLT_MAX, 0xfbff},      {FLT_MIN, 0x0000},        {-0x1p-149f, 0x8000},
        {0x1.ffcp-1f, 0x3bff},   {0x1.ffep-1f, 0x3c00},   {2049.0f, 0x6800},        {2051.0f, 0x6802},
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(kat); i++) {
        const uint16_t h = rumor_codec_f16_from_float(kat[i].x);
        CHECK_MSG(h == kat[i].h, "fp16(%a) = 0x%04x, expected 0x%04x", (double)kat[i].x, h, kat[i].h);
        CHECK(f16_reference(kat[i].x) == kat[i].h);
    }
    CHECK(rumor_codec_f16_from_float(INFINITY) == 0x7c00);
    CHECK(rumor_codec_f16_from_float(-INFINITY) == 0xfc00);
    CHECK((rumor_codec_f16_from_float(NAN) & 0x7fff) > 0x7c00);
    CHECK(rumor_codec_f16_to_float(0x7c00) == INFINITY);
    CHECK(isnan(rumor_codec_f16_to_float(0x7e00)));
    CHECK(rumor_codec_f16_to_float(0x0001) == 0x1p-24f);
    CHECK(rumor_codec_f16_to_float(0x3555) == 0x1.554p-2f);
    CHECK(bits(rumor_codec_f16_to_float(0x8000)) == 0x80000000u);

    /* Every finite half: widening is exact and rounds back to itself; the midpoint with its
     * successor (exact in binary32) rounds to the even one of the two, and one binary32 ulp
     * either side rounds to the nearer. */
    int bad = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        const float v = rumor_codec_f16_to_float((uint16_t)h);
        bad += rumor_codec_f16_from_float(v) != h || rumor_codec_f16_from_float(-v) != (h | 0x8000);
        if (h == 0x7bff) break;
        const float next = rumor_codec_f16_to_float((uint16_t)(h + 1));
        const float mid = (float)(((double)v + (double)next) / 2);
        bad += (double)mid * 2 != (double)v + (double)next; /* the midpoint is exact */
        const uint32_t even = (h & 1) ? h + 1 : h;
        bad += rumor_codec_f16_from_float(mid) != even;
        bad += rumor_codec_f16_from_float(from_bits(bits(mid) - 1)) != h;
        bad += rumor_codec_f16_from_float(from_bits(bits(mid) + 1)) != h + 1;
    }
    CHECK_MSG(bad == 0, "%d halves round wrongly", bad);

    /* Against the reference on every 211th binary32 pattern (all exponents, both signs). */
    bad = 0;
    for (uint64_t u = 0; u < 0x7f800000u; u += 211) {
        const float x = from_bits((uint32_t)u);
        bad += rumor_codec_f16_from_float(x) != f16_reference(x);
        bad += rumor_codec_f16_from_float(-x) != f16_reference(-x);
    }
    CHECK_MSG(bad == 0, "%d floats differ from the reference rounding", bad);
}

// ---- bf16 ----

static void bf16_known(void)
{
    const struct {
        float x;
        uint16_t h;
    } kat[] = {
        {1.0f, 0x3f80},           {-1.0f, 0xbf80},         {3.0f, 0x4040},         {-0.0f, 0x8000},
        {1.0f + 0x1p-8f, 0x3f80},   /* tie: stays at even 0x3f80 */
        {1.0f + 0x3p-8f, 0x3f82},   /* tie: 0x3f81 is odd, goes up */
        {1.0f + 0x1p-8f + 0x1p-20f, 0x3f81},
        {1.0f + 0x1p-7f - 0x1p-23f, 0x3f81},
        {FLT_MAX, 0x7f7f},        {-FLT_MAX, 0xff7f},      /* would round to infinity: clamped */
        {0x1.fefp127f, 0x7f7f},   {0.1f, 0x3dcd},          {FLT_MIN, 0x0080},      {0x1p-133f, 0x0001},
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(kat); i++) {
        const uint16_t h = rumor_codec_bf16_from_float(kat[i].x);
        CHECK_MSG(h == kat[i].h, "bf16(%a) = 0x%04x, expected 0x%04x", (double)kat[i].x, h, kat[i].h);
    }
    CHECK(rumor_codec_bf16_from_float(INFINITY) == 0x7f80);
    CHECK((rumor_codec_bf16_from_float(NAN) & 0x7fff) > 0x7f80);
    CHECK(rumor_codec_bf16_to_float(0x3f80) == 1.0f);

    /* Every finite bfloat16 and its midpoint with the next one, as for fp16. */
    int bad = 0;
    for (uint32_t h = 0; h < 0x7f7f; h++) {
        const uint32_t mid = h << 16 | 0x8000u; /* exactly halfway to h + 1 */
        const uint32_t even = (h & 1) ? h + 1 : h;
        bad += rumor_codec_bf16_from_float(from_bits(h << 16)) != h;
        bad += rumor_codec_bf16_from_float(from_bits(mid)) != even;
        bad += rumor_codec_bf16_from_float(from_bits(mid - 1)) != h;
        bad += rumor_codec_bf16_from_float(from_bits(mid + 1)) != h + 1;
        bad += rumor_codec_bf16_from_float(from_bits(mid | 0x80000000u)) != (even | 0x8000u);
    }
    CHECK_MSG(bad == 0, "%d bfloat16 roundings wrong", bad);
}

// ---- round trips ----

static void round_trips(void)
{
    rumor_rng_t rng;
    rumor_rng_init(&rng, 7);
    enum { N = 20000 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint8_t *buf = malloc(4 * N + 8);
    size_t len;
    char err[RUMOR_ERR_LEN];

    /* fp16: relative error <= 2^-11 over the normal range, absolute <= 2^-25 below it. */
    const rumor_codec_t f16 = codec("fp16"), bf16 = codec("bf16"), i8 = codec("int8"), f32 = codec("f32");
    fill_log(&rng, x, N, -30, 16);
    CHECK_RC(rumor_codec_encode(&f16, x, N, buf, &len, err));
    CHECK(len == 2 * N);
    CHECK_RC(rumor_codec_decode(RUMOR_CODEC_F16, buf, len, N, y, err));
    int bad = 0;
    for (size_t i = 0; i < N; i++) {
        const double e = fabs((double)y[i] - x[i]), a = fabs((double)x[i]);
        bad += a >= 0x1p-14 ? e > 0x1p-11 * a : e > 0x1p-25;
        bad += signbit(x[i]) != signbit(y[i]);
    }
    CHECK_MSG(bad == 0, "%d fp16 round trips beyond the bound", bad);

    /* bf16: relative error <= 2^-8 for normal binary32. */
    fill_log(&rng, x, N, -126, 127);
    CHECK_RC(rumor_codec_encode(&bf16, x, N, buf, &len, err));
    CHECK(len == 2 * N);
    CHECK_RC(rumor_codec_decode(RUMOR_CODEC_BF16, buf, len, N, y, err));
    bad = 0;
    for (size_t i = 0; i < N; i++) bad += fabs((double)y[i] - x[i]) > 0x1p-8 * fabs((double)x[i]);
    CHECK_MSG(bad == 0, "%d bf16 round trips beyond the bound", bad);

    /* f32: exact. */
    CHECK_RC(rumor_codec_encode(&f32, x, N, buf, &len, err));
    CHECK(len == 4 * N && memcmp(buf, x, len) == 0);
    CHECK_RC(rumor_codec_decode(RUMOR_CODEC_F32, buf, len, N, y, err));
    CHECK(memcmp(x, y, N * sizeof *x) == 0);

    /* int8: s = max|x| / 127 and |x - s q| <= s/2 (plus 2^-15 s for the float arithmetic:
     * x/s taken as x * (1/s), and the decoded product's rounding). Several spreads, and the
     * extremes of binary32. */
    const struct {
        int lo, hi;
    } spreads[] = {{-3, 2}, {-20, 0}, {60, 100}, {-100, -90}};
    for (size_t sp = 0; sp < RUMOR_ARRAY_LEN(spreads); sp++) {
        fill_log(&rng, x, N, spreads[sp].lo, spreads[sp].hi);
        float m = 0;
        for (size_t i = 0; i < N; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
        CHECK_RC(rumor_codec_encode(&i8, x, N, buf, &len, err));
        CHECK(len == 4 + N);
        float s;
        memcpy(&s, buf, 4);
        CHECK(s == m / 127.0f);
        CHECK_RC(rumor_codec_decode(RUMOR_CODEC_INT8, buf, len, N, y, err));
        bad = 0;
        int hit127 = 0;
        for (size_t i = 0; i < N; i++) {
            const int8_t q = (int8_t)buf[4 + i];
            bad += q == -128 || fabs((double)y[i] - x[i]) > (0.5 + 0x1p-15) * s;
            hit127 += q == 127 || q == -127;
        }
        CHECK_MSG(bad == 0, "%d int8 round trips beyond s/2 (spread %zu)", bad, sp);
        CHECK(hit127 >= 1);
    }
    /* q = round(x / s), ties to even: x = {127, 0.5, 1.5, 2.5, -2.5} has s = 1 exactly. */
    const float ties[] = {127.0f, 0.5f, 1.5f, 2.5f, -2.5f, -127.0f, 0.0f, -0.0f};
    CHECK_RC(rumor_codec_encode(&i8, ties, 8, buf, &len, err));
    const int8_t want[] = {127, 0, 2, 2, -2, -127, 0, 0};
    CHECK(memcmp(buf + 4, want, 8) == 0);
    /* All zero: scale 0, every q 0, decodes to zeros. */
    const float zeros[4] = {0.0f, -0.0f, 0.0f, 0.0f};
    CHECK_RC(rumor_codec_encode(&i8, zeros, 4, buf, &len, err));
    CHECK(len == 8 && bits(from_bits(buf[0] | buf[1] << 8 | buf[2] << 16 | (uint32_t)buf[3] << 24)) == 0);
    CHECK(buf[4] == 0 && buf[5] == 0 && buf[6] == 0 && buf[7] == 0);
    /* The extremes: a scale near FLT_MAX / 127 stays decodable, a subnormal scale works. */
    const float big[] = {FLT_MAX, -FLT_MAX, 1.0f, 0x1p120f};
    CHECK_RC(rumor_codec_encode(&i8, big, 4, buf, &len, err));
    CHECK_RC(rumor_codec_decode(RUMOR_CODEC_INT8, buf, len, 4, y, err));
    for (int i = 0; i < 4; i++) CHECK(isfinite(y[i]));
    CHECK(y[0] > 0.99f * FLT_MAX && y[1] < -0.99f * FLT_MAX);
    const float small[] = {1e-40f, -3e-41f, 0.0f, 5e-39f};
    CHECK_RC(rumor_codec_encode(&i8, small, 4, buf, &len, err));
    CHECK_RC(rumor_codec_decode(RUMOR_CODEC_INT8, buf, len, 4, y, err));
    for (int i = 0; i < 4; i++) CHECK(fabsf(y[i] - small[i]) <= 5e-39f / 127.0f);

    /* fp16 clamps instead of overflowing; bf16 likewise at the top of binary32. */
    const float huge[] = {1e6f, -70000.0f, 65519.0f, FLT_MAX};
    CHECK_RC(rumor_codec_encode(&f16, huge, 4, buf, &len, err));
    CHECK_RC(rumor_codec_decode(RUMOR_CODEC_F16, buf, len, 4, y, err));
    CHECK(y[0] == 65504.0f && y[1] == -65504.0f && y[2] == 65504.0f && y[3] == 65504.0f);
    CHECK_RC(rumor_codec_encode(&bf16, huge + 3, 1, buf, &len, err));
    CHECK_RC(rumor_codec_decode(RUMOR_CODEC_BF16, buf, len, 1, y, err));
    CHECK(y[0] == 0x1.fep127f);

    free(x);
    free(y);
    free(buf);
}

/* Non-finite input is never encoded, whatever the codec and position. */
static void encode_rejects(void)
{
    const char *specs[] = {"f32", "fp16", "bf16", "int8", "int4", "topk:0.3", "topk:1"};
    const float bad_values[] = {NAN, INFINITY, -INFINITY};
    uint8_t buf[64];
    char err[RUMOR_ERR_LEN];
    for (size_t s = 0; s < RUMOR_ARRAY_LEN(specs); s++) {
        const rumor_codec_t c = codec(specs[s]);
        for (int pos = 0; pos < 5; pos++)
            for (size_t b = 0; b < RUMOR_ARRAY_LEN(bad_values); b++) {
                float x[5] = {1, -2, 3, -4, 5};
                x[pos] = bad_values[b];
                size_t len = 0;
                err[0] = 0;
                CHECK_MSG(rumor_codec_encode(&c, x, 5, buf, &len, err) == RUMOR_EINVAL, "%s pos %d", specs[s], pos);
                CHECK(strstr(err, "not finite") != NULL);
            }
        /* A difference that overflows: x - xhat is -Inf although both are finite. */
        float x[3] = {1, -FLT_MAX, 2}, xhat[3] = {0.5f, FLT_MAX, 1};
        const float keep[3] = {0.5f, FLT_MAX, 1};
        size_t len;
        CHECK(rumor_codec_encode_delta(&c, x, xhat, 3, buf, &len, err) == RUMOR_EINVAL);
        CHECK(memcmp(xhat, keep, sizeof keep) == 0);
        CHECK(rumor_codec_encode(&c, x, 0, buf, &len, err) == RUMOR_EINVAL);
    }
}

// ---- topk ----

static const float *sort_x;

/* Larger magnitude first, then the lower index. */
static int by_magnitude(const void *a, const void *b)
{
    const size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const float u = fabsf(sort_x[i]), v = fabsf(sort_x[j]);
    if (u != v) return u > v ? -1 : 1;
    return (i > j) - (i < j);
}

static int ascending(const void *a, const void *b)
{
    const size_t i = *(const size_t *)a, j = *(const size_t *)b;
    return (i > j) - (i < j);
}

static void topk(void)
{
    rumor_rng_t rng;
    rumor_rng_init(&rng, 11);
    const size_t ns[] = {1, 2, 3, 7, 64, 1000, 4099, 50000};
    const char *fractions[] = {"topk:0.001", "topk:0.01", "topk:0.1", "topk:0.5", "topk:0.99", "topk:1"};
    char err[RUMOR_ERR_LEN];
    int cases = 0;
    for (size_t a = 0; a < RUMOR_ARRAY_LEN(ns); a++)
        for (size_t f = 0; f < RUMOR_ARRAY_LEN(fractions); f++)
            for (int kind = 0; kind < 4; kind++) {
                const size_t n = ns[a];
                const rumor_codec_t c = codec(fractions[f]);
                const size_t k = rumor_codec_topk_count(&c, n);
                float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
                size_t *order = malloc(n * sizeof *order);
                uint8_t *buf = malloc(8 * n);
                for (size_t i = 0; i < n; i++) {
                    switch (kind) {
                    case 0: x[i] = (float)(2 * rumor_rng_uniform(&rng) - 1); break;
                    /* many ties, zeros of both signs */
                    case 1: x[i] = (float)((int)rumor_rng_below(&rng, 9) - 4); break;
                    /* magnitudes that differ only in the low mantissa bits (the last radix pass) */
                    case 2: x[i] = from_bits((0x3f800000u + (uint32_t)rumor_rng_below(&rng, 3000)) |
                                             (rumor_rng_below(&rng, 2) ? 0x80000000u : 0u));
                        break;
                    /* all equal: the lowest indices win */
                    default: x[i] = i % 2 ? -0.5f : 0.5f;
                    }
                    order[i] = i;
                }
                sort_x = x;
                qsort(order, n, sizeof *order, by_magnitude);
                qsort(order, k, sizeof *order, ascending);
                size_t len = 0;
                CHECK_RC(rumor_codec_encode(&c, x, n, buf, &len, err));
                CHECK(len == 8 * k);
                int bad = 0;
                for (size_t j = 0; j < k && 8 * j < len; j++) {
                    uint32_t idx, v;
                    memcpy(&idx, buf + 8 * j, 4);
                    memcpy(&v, buf + 8 * j + 4, 4);
                    bad += idx != order[j] || v != bits(x[order[j]]);
                }
                CHECK_MSG(bad == 0, "topk n %zu k %zu kind %d: %d pairs differ from the sort", n, k, kind, bad);
                /* decode writes the listed values and zeros elsewhere */
                CHECK_RC(rumor_codec_decode(RUMOR_CODEC_TOPK, buf, len, n, y, err));
                size_t listed = 0;
                bad = 0;
                for (size_t i = 0; i < n; i++) {
                    const bool is_listed = listed < k && order[listed] == i;
                    bad += is_listed ? bits(y[i]) != bits(x[i]) : bits(y[i]) != 0;
                    listed += is_listed;
                }
                CHECK(bad == 0);
                free(x);
                free(y);
                free(order);
                free(buf);
                cases++;
            }
    CHECK(cases == 192);
}

// ---- decode_add ----

static void decode_add(void)
{
    rumor_rng_t rng;
    rumor_rng_init(&rng, 5);
    enum { N = 1000 };
    float x[N], y[N], acc[N], acc0[N];
    uint8_t buf[8 * N];
    char err[RUMOR_ERR_LEN];
    fill_log(&rng, x, N, -8, 4);
    for (size_t i = 0; i < N; i++) acc0[i] = (float)rumor_rng_uniform(&rng);
    const char *specs[] = {"f32", "fp16", "bf16", "int8", "topk:0.05"};
    const float ws[] = {1.0f, 0.25f, 0.3f, 1048576.0f, -0.5f};
    for (size_t s = 0; s < RUMOR_ARRAY_LEN(specs); s++) {
        const rumor_codec_t c = codec(specs[s]);
        size_t len;
        CHECK_RC(rumor_codec_encode(&c, x, N, buf, &len, err));
        CHECK_RC(rumor_codec_decode(c.id, buf, len, N, y, err));
        float scale = 0;
        memcpy(&scale, buf, 4);
        for (size_t wi = 0; wi < RUMOR_ARRAY_LEN(ws); wi++) {
            const float w = ws[wi];
            memcpy(acc, acc0, sizeof acc);
            CHECK_RC(rumor_codec_decode_add(c.id, buf, len, N, w, acc, err));
            int bad = 0;
            for (size_t i = 0; i < N; i++) {
                /* The documented products: (w s) q for int8, w v otherwise. */
                const float add = c.id == RUMOR_CODEC_INT8 ? (w * scale) * (float)(int8_t)buf[4 + i] : w * y[i];
                bad += bits(acc[i]) != bits(acc0[i] + add);
                bad += fabs((double)acc[i] - (acc0[i] + (double)w * y[i])) > 1e-6 * (fabs(acc0[i]) + fabs(w * y[i]));
            }
            CHECK_MSG(bad == 0, "%s w %g: %d entries", specs[s], (double)w, bad);
        }
    }
    /* topk indices in any order are fine when distinct; only those entries move. */
    uint8_t pairs[24];
    const uint32_t idx[3] = {4, 0, 2};
    const float val[3] = {1.5f, -2.0f, 0.25f};
    for (int j = 0; j < 3; j++) {
        memcpy(pairs + 8 * j, &idx[j], 4);
        memcpy(pairs + 8 * j + 4, &val[j], 4);
    }
    float a[6] = {1, 1, 1, 1, 1, 1};
    CHECK_RC(rumor_codec_decode_add(RUMOR_CODEC_TOPK, pairs, 24, 6, 2.0f, a, err));
    CHECK(a[0] == -3.0f && a[1] == 1.0f && a[2] == 1.5f && a[3] == 1.0f && a[4] == 4.0f && a[5] == 1.0f);
    /* int8 with a huge scale and weight: w s overflows, yet q = 0 adds nothing (no NaN). */
    uint8_t i8[4 + 3];
    const float big = 1e36f;
    memcpy(i8, &big, 4);
    i8[4] = 0, i8[5] = 1, i8[6] = 0xff; /* q = 0, 1, -1 */
    float b[3] = {1, 1, 1};
    CHECK_RC(rumor_codec_decode_add(RUMOR_CODEC_INT8, i8, 7, 3, 1048576.0f, b, err));
    CHECK(b[0] == 1.0f && b[1] == INFINITY && b[2] == -INFINITY);
}

/* Every rejection leaves the accumulator (and decode's output) exactly as it was. */
static int rejects_cleanly(rumor_proto_codec_t codec_id, const uint8_t *p, size_t len, size_t n, const char *what)
{
    float acc[16], before[16];
    char err[RUMOR_ERR_LEN];
    for (int i = 0; i < 16; i++) acc[i] = before[i] = (float)i + 0.5f;
    err[0] = 0;
    const rumor_err_t rc1 = rumor_codec_decode_add(codec_id, p, len, n, 1.0f, acc, err);
    const bool untouched1 = memcmp(acc, before, sizeof acc) == 0, said = err[0] != 0;
    const rumor_err_t rc2 = rumor_codec_decode(codec_id, p, len, n, acc, NULL);
    const rumor_err_t rc3 = rumor_codec_check(codec_id, p, len, n, NULL);
    const bool ok = rc1 == RUMOR_EPROTO && rc2 == RUMOR_EPROTO && rc3 == RUMOR_EPROTO && untouched1 && said &&
                    memcmp(acc, before, sizeof acc) == 0;
    CHECK_MSG(ok, "%s: rc %d/%d/%d, untouched %d, err '%s'", what, rc1, rc2, rc3, untouched1, err);
    return ok;
}

static void rejects(void)
{
    enum { N = 5 };
    uint8_t p[64];
    char what[64];
    const uint32_t f32_bad[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffffffffu};
    const uint16_t f16_bad[] = {0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xffff};
    const uint16_t bf16_bad[] = {0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffff};
    for (int pos = 0; pos < N; pos++)
        for (int b = 0; b < 5; b++) {
            /* f32 */
            for (int i = 0; i < N; i++) {
                const float one = 1.0f;
                memcpy(p + 4 * i, &one, 4);
            }
            memcpy(p + 4 * pos, &f32_bad[b], 4);
            snprintf(what, sizeof what, "f32 0x%08x at %d", f32_bad[b], pos);
            rejects_cleanly(RUMOR_CODEC_F32, p, 4 * N, N, what);
            /* fp16 and bf16 */
            for (int i = 0; i < N; i++) p[2 * i] = 0x00, p[2 * i + 1] = 0x3c;
            memcpy(p + 2 * pos, &f16_bad[b], 2);
            snprintf(what, sizeof what, "fp16 0x%04x at %d", f16_bad[b], pos);
            rejects_cleanly(RUMOR_CODEC_F16, p, 2 * N, N, what);
            for (int i = 0; i < N; i++) p[2 * i] = 0x80, p[2 * i + 1] = 0x3f;
            memcpy(p + 2 * pos, &bf16_bad[b], 2);
            snprintf(what, sizeof what, "bf16 0x%04x at %d", bf16_bad[b], pos);
            rejects_cleanly(RUMOR_CODEC_BF16, p, 2 * N, N, what);
            /* topk: a bad value in any pair */
            for (uint32_t j = 0; j < N; j++) {
                const float one = 1.0f;
                memcpy(p + 8 * j, &j, 4);
                memcpy(p + 8 * j + 4, &one, 4);
            }
            memcpy(p + 8 * pos + 4, &f32_bad[b], 4);
            snprintf(what, sizeof what, "topk value 0x%08x at %d", f32_bad[b], pos);
            rejects_cleanly(RUMOR_CODEC_TOPK, p, 8 * N, N + 2, what);
        }
    /* int8: a scale that is not finite, or whose product with some q overflows. */
    const struct {
        uint32_t scale;
        int8_t q;
        bool ok;
    } i8[] = {{0x7f800000u, 1, false}, {0x7fc00000u, 0, false}, {0xff800000u, 0, false},
              {bits(3e36f), 127, false}, {bits(3e36f), -128, false}, {bits(-3e36f), 100, true},
              {bits(1e36f), -128, true}, {bits(FLT_MAX), 1, true}, {bits(FLT_MAX), 2, false}};
    for (size_t t = 0; t < RUMOR_ARRAY_LEN(i8); t++)
        for (int pos = 0; pos < N; pos++) {
            memcpy(p, &i8[t].scale, 4);
            memset(p + 4, 1, N);
            p[4 + pos] = (uint8_t)i8[t].q;
            snprintf(what, sizeof what, "int8 scale 0x%08x q %d at %d", i8[t].scale, i8[t].q, pos);
            if (i8[t].ok) {
                float y[N];
                CHECK_MSG(rumor_codec_decode(RUMOR_CODEC_INT8, p, 4 + N, N, y, NULL) == RUMOR_OK, "%s", what);
                for (int i = 0; i < N; i++) CHECK(isfinite(y[i]));
            } else {
                rejects_cleanly(RUMOR_CODEC_INT8, p, 4 + N, N, what);
            }
        }
    /* topk indices: beyond n, repeated (in order and out of order). */
    const struct {
        uint32_t idx[4];
        size_t k, n;
        const char *what;
    } tk[] = {{{0, 1, 5}, 3, 5, "index == n"},          {{7}, 1, 5, "index > n"},
              {{0xffffffffu, 0}, 2, 5, "index 2^32-1"},  {{1, 3, 3}, 3, 5, "repeat, ascending"},
              {{3, 1, 3}, 3, 5, "repeat, unsorted"},     {{4, 0, 2, 0}, 4, 5, "repeat far apart"},
              {{2, 2}, 2, 2, "repeat, k = n"}};
    for (size_t t = 0; t < RUMOR_ARRAY_LEN(tk); t++) {
        for (size_t j = 0; j < tk[t].k; j++) {
            const float v = 1.0f;
            memcpy(p + 8 * j, &tk[t].idx[j], 4);
            memcpy(p + 8 * j + 4, &v, 4);
        }
        rejects_cleanly(RUMOR_CODEC_TOPK, p, 8 * tk[t].k, tk[t].n, tk[t].what);
    }
    /* lengths */
    memset(p, 0, sizeof p);
    const struct {
        rumor_proto_codec_t id;
        size_t len, n;
    } lens[] = {{RUMOR_CODEC_F32, 19, 5},  {RUMOR_CODEC_F32, 24, 5},  {RUMOR_CODEC_F32, 0, 5},  {RUMOR_CODEC_F32, 0, 0},
                {RUMOR_CODEC_F16, 11, 5},  {RUMOR_CODEC_F16, 8, 5},   {RUMOR_CODEC_BF16, 12, 5}, {RUMOR_CODEC_BF16, 5, 5},
                {RUMOR_CODEC_INT8, 3, 0},  {RUMOR_CODEC_INT8, 8, 5},  {RUMOR_CODEC_INT8, 10, 5}, {RUMOR_CODEC_INT8, 4, 0},
                {RUMOR_CODEC_TOPK, 0, 5},  {RUMOR_CODEC_TOPK, 7, 5},  {RUMOR_CODEC_TOPK, 12, 5}, {RUMOR_CODEC_TOPK, 48, 5},
                {RUMOR_CODEC_TOPK, 8, 0},  {RUMOR_CODEC_MASKED, 20, 5}, {(rumor_proto_codec_t)-1, 20, 5}};
    for (size_t t = 0; t < RUMOR_ARRAY_LEN(lens); t++) {
        snprintf(what, sizeof what, "codec %d, %zu bytes for %zu", (int)lens[t].id, lens[t].len, lens[t].n);
        rejects_cleanly(lens[t].id, p, lens[t].len, lens[t].n, what);
    }
    /* and the right lengths of zeros are accepted (zero is a fine value) */
    CHECK_RC(rumor_codec_check(RUMOR_CODEC_F32, p, 20, 5, NULL));
    CHECK_RC(rumor_codec_check(RUMOR_CODEC_F16, p, 10, 5, NULL));
    CHECK_RC(rumor_codec_check(RUMOR_CODEC_BF16, p, 10, 5, NULL));
    CHECK_RC(rumor_codec_check(RUMOR_CODEC_INT8, p, 9, 5, NULL));
    CHECK_RC(rumor_codec_check(RUMOR_CODEC_TOPK, p, 8, 5, NULL));
}

// ---- error feedback ----

static void error_feedback(void)
{
    rumor_rng_t rng;
    rumor_rng_init(&rng, 3);
    enum { N = 1000 };
    float x[N], xhat[N], peer[N];
    uint8_t buf[8 * N];
    char err[RUMOR_ERR_LEN];
    fill_log(&rng, x, N, -6, 3);

    /* topk from zero: each call sends the k largest remaining differences exactly, so x is
     * reached after ceil(n/k) calls and not before. A receiver applying the same payloads
     * with weight 1 holds the same copy, bit for bit. */
    const rumor_codec_t t = codec("topk:0.03");
    const size_t k = rumor_codec_topk_count(&t, N), steps = (N + k - 1) / k;
    CHECK(k == 30 && steps == 34);
    memset(xhat, 0, sizeof xhat);
    memset(peer, 0, sizeof peer);
    for (size_t s = 1; s <= steps; s++) {
        size_t len;
        CHECK_RC(rumor_codec_encode_delta(&t, x, xhat, N, buf, &len, err));
        CHECK_RC(rumor_codec_decode_add(RUMOR_CODEC_TOPK, buf, len, N, 1.0f, peer, err));
        size_t equal = 0;
        for (size_t i = 0; i < N; i++) equal += x[i] == xhat[i];
        CHECK_MSG(equal == (s < steps ? s * k : N), "step %zu: %zu entries reached", s, equal);
    }
    CHECK(memcmp(x, xhat, sizeof x) == 0);
    CHECK(memcmp(peer, xhat, sizeof x) == 0);

    /* int8: the largest difference r shrinks by 1/254 per call (s/2 with s = r / 127), plus
     * the rounding of xhat's update, until it reaches that floor. */
    const rumor_codec_t i8 = codec("int8");
    float xmax = 0;
    for (size_t i = 0; i < N; i++) {
        xhat[i] = peer[i] = (float)(rumor_rng_uniform(&rng) - 0.5); /* any common start */
        xmax = fabsf(x[i]) > xmax ? fabsf(x[i]) : xmax;
    }
    double r = 0;
    for (size_t i = 0; i < N; i++) r = fmax(r, fabs((double)x[i] - xhat[i]));
    for (int s = 0; s < 6; s++) {
        size_t len;
        CHECK_RC(rumor_codec_encode_delta(&i8, x, xhat, N, buf, &len, err));
        CHECK_RC(rumor_codec_decode_add(RUMOR_CODEC_INT8, buf, len, N, 1.0f, peer, err));
        double next = 0;
        for (size_t i = 0; i < N; i++) next = fmax(next, fabs((double)x[i] - xhat[i]));
        const double bound = r * (0.5 / 127 + 0x1p-15) + 0x1p-23 * (xmax + 1);
        CHECK_MSG(next <= bound, "int8 step %d: residual %g, bound %g", s, next, bound);
        r = next;
    }
    CHECK(r <= 0x1p-21 * xmax);
    CHECK(memcmp(peer, xhat, sizeof x) == 0);

    /* fp16 and bf16 of the difference: the copies agree, and the residual shrinks to the
     * rounding of xhat itself (fp16: down to its subnormal spacing, 2^-24). */
    const char *dense[] = {"fp16", "bf16", "f32"};
    for (size_t d = 0; d < RUMOR_ARRAY_LEN(dense); d++) {
        const rumor_codec_t c = codec(dense[d]);
        memset(xhat, 0, sizeof xhat);
        memset(peer, 0, sizeof peer);
        for (int s = 0; s < 3; s++) {
            size_t len;
            CHECK_RC(rumor_codec_encode_delta(&c, x, xhat, N, buf, &len, err));
            CHECK_RC(rumor_codec_decode_add(c.id, buf, len, N, 1.0f, peer, err));
        }
        CHECK(memcmp(peer, xhat, sizeof x) == 0);
        int bad = 0;
        for (size_t i = 0; i < N; i++) bad += fabs((double)x[i] - xhat[i]) > 0x1p-22 * fabs((double)x[i]) + 0x1p-25;
        CHECK_MSG(bad == 0, "%s: %d entries not within 2^-22 |x| + 2^-25 after 3 steps", dense[d], bad);
    }
}

// ---- int4 ----

/* The scale of int4 block b of buf (after whole blocks of 34 bytes). */
static float int4_scale(const uint8_t *buf, size_t b)
{
    return from_bits((uint32_t)(buf[34 * b] | buf[34 * b + 1] << 8) << 16);
}

static void int4(void)
{
    char err[RUMOR_ERR_LEN];
    const rumor_codec_t i4 = codec("int4");
    uint8_t buf[4096];
    size_t len;
    /* Known answer: max 7 gives s = 1 (bfloat16 0x3f80); q = round(x), ties to even, two to a
     * byte with the even entry low; the odd count pads the last high nibble with 0. */
    const float x[] = {7.0f, -7.0f, 3.5f, 2.5f, -1.5f, 0.4f, -0.0f, 1.0f, 6.6f};
    CHECK_RC(rumor_codec_encode(&i4, x, 9, buf, &len, err));
    const uint8_t want[] = {0x80, 0x3f, 0x97, 0x24, 0x0e, 0x10, 0x07};
    CHECK(len == sizeof want && memcmp(buf, want, sizeof want) == 0);
    float y[9];
    CHECK_RC(rumor_codec_decode(RUMOR_CODEC_INT4, buf, len, 9, y, err));
    const float back[] = {7, -7, 4, 2, -2, 0, 0, 1, 7};
    CHECK(memcmp(y, back, sizeof y) == 0);
    /* decode_add: w s q, added. */
    float acc[9];
    for (int i = 0; i < 9; i++) acc[i] = 1.0f;
    CHECK_RC(rumor_codec_decode_add(RUMOR_CODEC_INT4, buf, len, 9, 0.5f, acc, err));
    for (int i = 0; i < 9; i++) CHECK(acc[i] == 1.0f + 0.5f * back[i]);

    /* Round trips: per block s = bfloat16(max|x| / 7), |x - s q| <= s/2 (+ 2^-15 s), q never -8,
     * and every block's largest entry reaches +-7 or +-6 (bfloat16 rounds the scale by <= 2^-9). */
    rumor_rng_t rng;
    rumor_rng_init(&rng, 11);
    enum { N = 1000 };
    float v[N], w[N];
    const struct {
        int lo, hi;
    } spreads[] = {{-3, 2}, {-20, 0}, {60, 100}, {-130, -120}};
    for (size_t sp = 0; sp < RUMOR_ARRAY_LEN(spreads); sp++) {
        fill_log(&rng, v, N, spreads[sp].lo, spreads[sp].hi);
        CHECK_RC(rumor_codec_encode(&i4, v, N, buf, &len, err));
        CHECK(len == rumor_codec_encoded_len(&i4, N));
        CHECK_RC(rumor_codec_decode(RUMOR_CODEC_INT4, buf, len, N, w, err));
        int bad = 0;
        for (size_t b = 0; b * 64 < N; b++) {
            const size_t m = N - b * 64 < 64 ? N - b * 64 : 64;
            float mx = 0;
            for (size_t i = 0; i < m; i++) mx = fmaxf(mx, fabsf(v[b * 64 + i]));
            const float s = int4_scale(buf, b);
            bad += s != rumor_codec_bf16_to_float(rumor_codec_bf16_from_float(mx / 7.0f));
            for (size_t i = 0; i < m; i++) {
                const size_t k = b * 64 + i;
                const int q = (buf[34 * b + 2 + i / 2] >> (4 * (i & 1))) & 0xf;
                bad += q == 8 || fabs((double)w[k] - v[k]) > (0.5 + 0x1p-15) * s + 0x1p-149;
            }
        }
        CHECK_MSG(bad == 0, "%d int4 round trips beyond s/2 (spread %zu)", bad, sp);
    }
    /* The extremes: a scale near FLT_MAX / 7 stays decodable (rounded down where bfloat16
     * would make 7 s overflow); all zero gives scale 0. */
    const float big[] = {FLT_MAX, -FLT_MAX, 1.0f, 0x1p120f};
    CHECK_RC(rumor_codec_encode(&i4, big, 4, buf, &len, err));
    CHECK_RC(rumor_codec_decode(RUMOR_CODEC_INT4, buf, len, 4, y, err));
    for (int i = 0; i < 4; i++) CHECK(isfinite(y[i]));
    CHECK(y[0] > 0.99f * FLT_MAX && y[1] < -0.99f * FLT_MAX);
    const float zeros[3] = {0.0f, -0.0f, 0.0f};
    CHECK_RC(rumor_codec_encode(&i4, zeros, 3, buf, &len, err));
    CHECK(len == 4 && buf[0] == 0 && buf[1] == 0 && buf[2] == 0 && buf[3] == 0);

    /* Rejected without side effects: a scale that is not finite or whose 7 s overflows, a q of
     * -8, a padding nibble that is not 0, a length that is not the codec's. */
    uint8_t p[16];
    const struct {
        uint16_t scale;
        uint8_t byte1, pad;
        const char *what;
    } bad[] = {{0x7f80, 0x11, 0, "scale +inf"}, {0xffc0, 0x11, 0, "scale NaN"},     {0x7f7f, 0x11, 0, "7 s overflows"},
               {0x3f80, 0x18, 0, "q -8 (high)"}, {0x3f80, 0x81, 0, "q -8 (low)"},   {0x3f80, 0x11, 1, "padding"}};
    for (size_t t = 0; t < RUMOR_ARRAY_LEN(bad); t++) {
        memset(p, 0x11, sizeof p);
        p[0] = (uint8_t)bad[t].scale, p[1] = (uint8_t)(bad[t].scale >> 8);
        p[3] = bad[t].byte1;
        p[4] = bad[t].pad ? 0x11 : 0x01; /* n = 5: the last byte holds one value */
        rejects_cleanly(RUMOR_CODEC_INT4, p, 5, 5, bad[t].what);
    }
    p[0] = 0x80, p[1] = 0x3f, p[4] = 0x01;
    CHECK_RC(rumor_codec_check(RUMOR_CODEC_INT4, p, 5, 5, NULL));
    rejects_cleanly(RUMOR_CODEC_INT4, p, 4, 5, "int4 one byte short");
    rejects_cleanly(RUMOR_CODEC_INT4, p, 6, 5, "int4 one byte long");
    rejects_cleanly(RUMOR_CODEC_INT4, p, 0, 0, "int4 of 0 values");

    /* Error feedback: the largest difference shrinks by 1/14 or better per call (s/2 with
     * s = r / 7, up to bfloat16's rounding of s), and the receiver's copy is the sender's. */
    float xhat[N], peer[N];
    fill_log(&rng, v, N, -6, 3);
    float xmax = 0;
    for (size_t i = 0; i < N; i++) {
        xhat[i] = peer[i] = (float)(rumor_rng_uniform(&rng) - 0.5);
        xmax = fmaxf(xmax, fabsf(v[i]));
    }
    double r = 0;
    for (size_t i = 0; i < N; i++) r = fmax(r, fabs((double)v[i] - xhat[i]));
    for (int st = 0; st < 8; st++) {
        CHECK_RC(rumor_codec_encode_delta(&i4, v, xhat, N, buf, &len, err));
        CHECK_RC(rumor_codec_decode_add(RUMOR_CODEC_INT4, buf, len, N, 1.0f, peer, err));
        double next = 0;
        for (size_t i = 0; i < N; i++) next = fmax(next, fabs((double)v[i] - xhat[i]));
        const double bound = r * (1.0 + 0x1p-8) / 14.0 + 0x1p-23 * (xmax + 1);
        CHECK_MSG(next <= bound, "int4 step %d: residual %g, bound %g", st, next, bound);
        r = next;
    }
    CHECK(r <= 0x1p-21 * xmax);
    CHECK(memcmp(peer, xhat, sizeof xhat) == 0);
}

int main(void)
{
    parse();
    sizes();
    f16_known();
    bf16_known();
    round_trips();
    encode_rejects();
    topk();
    decode_add();
    rejects();
    error_feedback();
    int4();
    return check_done();
}
