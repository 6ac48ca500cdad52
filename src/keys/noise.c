/* noise.c - DP-SGD's noise (crypto.h, "noise for differential privacy"): a ChaCha20 stream with
 * fast key erasure, and normals from it, a batch at a time with glibc's vector math where the
 * CPU has it. */
#include "crypto.h"
#include "crypto_impl.h"

#include "config.h"

#include <sodium.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if RUMOR_HAVE_MVEC
#include <immintrin.h>
#endif

#define NOISE_BUF 16384 /* output bytes per refill; a multiple of 8 (16 KiB: ChaCha20 8% faster than at 4) */
#define NOISE_BATCH 256 /* normals per batch of rumor_noise_gaussian: 512 Box-Muller pairs */

struct rumor_noise {
    uint8_t key[crypto_stream_chacha20_ietf_KEYBYTES]; /* the next refill's key */
    uint8_t block[crypto_stream_chacha20_ietf_KEYBYTES + NOISE_BUF];
    size_t pos;                                        /* bytes of block's output used */
    bool seeded;
};

static rumor_noise_t *noise_new(const uint8_t key[crypto_stream_chacha20_ietf_KEYBYTES], bool seeded,
                                char err[RUMOR_ERR_LEN])
{
    rumor_noise_t *ns = calloc(1, sizeof *ns);
    if (!ns) {
        rumor_fail(err, RUMOR_ENOMEM, "out of memory for a noise source");
        return NULL;
    }
    memcpy(ns->key, key, sizeof ns->key);
    ns->pos = NOISE_BUF; /* empty: the first draw refills */
    ns->seeded = seeded;
    return ns;
}

rumor_noise_t *rumor_noise_new_secret(char err[RUMOR_ERR_LEN])
{
    if (crypto_sodium_ready(err) != RUMOR_OK) return NULL;
    uint8_t key[crypto_stream_chacha20_ietf_KEYBYTES];
    crypto_stream_chacha20_ietf_keygen(key); /* randombytes_buf */
    rumor_noise_t *ns = noise_new(key, false, err);
    sodium_memzero(key, sizeof key);
    return ns;
}

rumor_noise_t *rumor_noise_new_seeded(uint64_t seed, uint64_t a, uint64_t b, char err[RUMOR_ERR_LEN])
{
    if (crypto_sodium_ready(err) != RUMOR_OK) return NULL;
    uint8_t in[16 + 24], key[crypto_stream_chacha20_ietf_KEYBYTES];
    memcpy(in, "rumor dp noise\0\0", 16);
    const uint64_t v[3] = {seed, a, b};
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 8; j++) in[16 + 8 * k + j] = (uint8_t)(v[k] >> (8 * j));
    crypto_generichash(key, sizeof key, in, sizeof in, NULL, 0);
    return noise_new(key, true, err);
}

bool rumor_noise_is_seeded(const rumor_noise_t *ns) { return ns->seeded; }

/* Fast key erasure: the block's first 32 bytes key the next refill, the rest is output. */
static void noise_refill(rumor_noise_t *ns)
{
    static const uint8_t nonce[crypto_stream_chacha20_ietf_NONCEBYTES]; /* each key is used once */
    crypto_stream_chacha20_ietf(ns->block, sizeof ns->block, nonce, ns->key);
    memcpy(ns->key, ns->block, sizeof ns->key);
    sodium_memzero(ns->block, sizeof ns->key);
    ns->pos = 0;
}

uint64_t rumor_noise_u64(rumor_noise_t *ns)
{
    if (ns->pos == NOISE_BUF) noise_refill(ns);
    uint64_t v; /* the host's byte order: a seeded stream replays on the same kind of machine */
    memcpy(&v, ns->block + crypto_stream_chacha20_ietf_KEYBYTES + ns->pos, sizeof v);
    ns->pos += 8;
    return v;
}

/* The output drawn so far from the current block, wiped: what was drawn is not kept. */
static void noise_wipe_used(rumor_noise_t *ns)
{
    sodium_memzero(ns->block + crypto_stream_chacha20_ietf_KEYBYTES, ns->pos);
}

/* k + 1 <= 2^53 is exact in a double; (k + 1/2) 2^-53 would round its largest value to 1. */
static inline double uniform_of(uint64_t w) { return ((double)(w >> 11) + 1.0) * 0x1p-53; }

double rumor_noise_uniform(rumor_noise_t *ns) { return uniform_of(rumor_noise_u64(ns)); }

#define TWO_PI 6.283185307179586476925286766559

/* Two independent standard normals from two uniforms (Box-Muller, both outputs). */
static void box_muller(rumor_noise_t *ns, double *z0, double *z1)
{
    const double r = sqrt(-2.0 * log(rumor_noise_uniform(ns)));
    const double t = TWO_PI * rumor_noise_uniform(ns);
    *z0 = r * cos(t);
    *z1 = r * sin(t);
}

double rumor_noise_normal(rumor_noise_t *ns)
{
    double a, b, c, d;
    box_muller(ns, &a, &b);
    box_muller(ns, &c, &d);
    return 0.5 * ((a + b) + (c + d)); /* the sum of four has variance 4 */
}

/* ---- a batch at a time ----
 * The same normals as rumor_noise_normal, from the same words of the stream in the same order:
 * pair j of a batch takes its radius from ur[j] and its angle from ut[j] (the two uniforms
 * rumor_noise_normal's box_muller draws one after the other), and normal k sums pairs 2k and
 * 2k + 1. What differs is only the libm behind log, sin and cos: glibc's vector math (within 4
 * ulp, as its manual states) where the CPU has AVX2 or AVX-512, the scalar one otherwise. */
typedef void bm_fn(const double *ur, const double *ut, double *zc, double *zs, size_t m);

static void bm_portable(const double *ur, const double *ut, double *zc, double *zs, size_t m)
{
    for (size_t j = 0; j < m; j++) {
        const double r = sqrt(-2.0 * log(ur[j])), t = TWO_PI * ut[j];
        zc[j] = r * cos(t);
        zs[j] = r * sin(t);
    }
}

#if RUMOR_HAVE_MVEC
/* glibc's vector ABI entry points (libmvec): 4 doubles with AVX2, 8 with AVX-512. */
__m256d _ZGVdN4v_log(__m256d x);
__m256d _ZGVdN4v_sin(__m256d x);
__m256d _ZGVdN4v_cos(__m256d x);
__m512d _ZGVeN8v_log(__m512d x);
__m512d _ZGVeN8v_sin(__m512d x);
__m512d _ZGVeN8v_cos(__m512d x);

__attribute__((target("avx2,fma"))) static void bm_avx2(const double *ur, const double *ut, double *zc, double *zs,
                                                        size_t m)
{
    const __m256d m2 = _mm256_set1_pd(-2.0), tau = _mm256_set1_pd(TWO_PI);
    for (size_t j = 0; j < m; j += 4) { /* (m: a multiple of 8) */
        const __m256d r = _mm256_sqrt_pd(_mm256_mul_pd(m2, _ZGVdN4v_log(_mm256_loadu_pd(ur + j))));
        const __m256d t = _mm256_mul_pd(tau, _mm256_loadu_pd(ut + j));
        _mm256_storeu_pd(zc + j, _mm256_mul_pd(r, _ZGVdN4v_cos(t)));
        _mm256_storeu_pd(zs + j, _mm256_mul_pd(r, _ZGVdN4v_sin(t)));
    }
}

__attribute__((target("avx512f,avx512dq"))) static void bm_avx512(const double *ur, const double *ut, double *zc,
                                                                  double *zs, size_t m)
{
    const __m512d m2 = _mm512_set1_pd(-2.0), tau = _mm512_set1_pd(TWO_PI);
    for (size_t j = 0; j < m; j += 8) {
        const __m512d r = _mm512_sqrt_pd(_mm512_mul_pd(m2, _ZGVeN8v_log(_mm512_loadu_pd(ur + j))));
        const __m512d t = _mm512_mul_pd(tau, _mm512_loadu_pd(ut + j));
        _mm512_storeu_pd(zc + j, _mm512_mul_pd(r, _ZGVeN8v_cos(t)));
        _mm512_storeu_pd(zs + j, _mm512_mul_pd(r, _ZGVeN8v_sin(t)));
    }
}
#endif

static bm_fn *bm_for_cpu(void)
{
#if RUMOR_HAVE_MVEC
    switch (rumor_isa()) {
    case RUMOR_ISA_AVX512: return bm_avx512;
    case RUMOR_ISA_AVX2: return bm_avx2;
    case RUMOR_ISA_PORTABLE: break;
    }
#endif
    return bm_portable;
}

/* The next count words of the stream into w (across refills). */
static void noise_words(rumor_noise_t *ns, uint64_t *w, size_t count)
{
    while (count) {
        if (ns->pos == NOISE_BUF) noise_refill(ns);
        size_t k = (NOISE_BUF - ns->pos) / 8;
        k = k < count ? k : count;
        memcpy(w, ns->block + crypto_stream_chacha20_ietf_KEYBYTES + ns->pos, k * 8);
        ns->pos += k * 8;
        w += k, count -= k;
    }
}

void rumor_noise_gaussian(rumor_noise_t *ns, float *out, size_t count, double sd)
{
    enum { PAIRS = 2 * NOISE_BATCH };
    /* A batch's words, uniforms and normals: 24 KiB on the stack, wiped before returning. */
    uint64_t w[2 * PAIRS];
    double ur[PAIRS], ut[PAIRS], zc[PAIRS], zs[PAIRS];
    bm_fn *bm = bm_for_cpu();
    for (size_t done = 0; done < count;) {
        const size_t n = count - done < NOISE_BATCH ? count - done : NOISE_BATCH, m = 2 * n;
        noise_words(ns, w, 2 * m);
        for (size_t j = 0; j < m; j++) {
            ur[j] = uniform_of(w[2 * j]);
            ut[j] = uniform_of(w[2 * j + 1]);
        }
        const size_t mv = (m + 7) & ~(size_t)7; /* padded to whole vectors: log 1 = 0, no draws */
        for (size_t j = m; j < mv; j++) ur[j] = ut[j] = 1.0;
        bm(ur, ut, zc, zs, mv);
        for (size_t k = 0; k < n; k++)
            out[done + k] = (float)(sd * (0.5 * ((zc[2 * k] + zs[2 * k]) + (zc[2 * k + 1] + zs[2 * k + 1]))));
        done += n;
    }
    noise_wipe_used(ns); /* (earlier blocks were written over by their refills) */
    sodium_memzero(w, sizeof w);
    sodium_memzero(ur, sizeof ur);
    sodium_memzero(ut, sizeof ut);
    sodium_memzero(zc, sizeof zc);
    sodium_memzero(zs, sizeof zs);
}

void rumor_noise_destroy(rumor_noise_t **ns_p)
{
    rumor_noise_t *ns = *ns_p;
    if (!ns) return;
    sodium_memzero(ns, sizeof *ns);
    free(ns);
    *ns_p = NULL;
}
