/* test_secmix.c - secure mixing's masks: exact cancellation in the receiver's sum, masked
 * messages that look like uniform noise, no mask reused across receivers, rounds, chunks, runs
 * of a peer (boot ids) or layouts, and refusals (range, offsets, edges, unknown runs). */
#include "check.h"
#include "crypto.h"
#include "rng.h"
#include "secmix.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PEERS 6
#define LAYOUT 0x1234

typedef struct {
    rumor_secret_key_t *key[PEERS];
    rumor_secmix_t *mix[PEERS];
    const uint8_t *pk[PEERS]; /* sorted ascending */
    uint64_t boot[PEERS];     /* each peer's run */
} keys_t;

static int pk_cmp(const void *a, const void *b)
{
    return memcmp(rumor_secret_key_public(*(rumor_secret_key_t *const *)a),
                  rumor_secret_key_public(*(rumor_secret_key_t *const *)b), RUMOR_KEY_LEN);
}

/* Keys from fixed secret bytes. A peer's masks are a function of its key, its neighbours'
 * public keys, runs, round and offset (test_sessions shows they repeat for the same inputs),
 * so fixed keys make every statistic in this file a fixed outcome, not a fresh draw that fails
 * a correct build now and then (keys from rumor_secret_key_generate would: about 5e-5 a run,
 * see test_uniform). The keys are not the point here: the masks derived from them are. */
static void keys_init(keys_t *k)
{
    char err[RUMOR_ERR_LEN];
    for (int i = 0; i < PEERS; i++) {
        uint8_t secret[RUMOR_KEY_LEN];
        for (int j = 0; j < RUMOR_KEY_LEN; j++) secret[j] = (uint8_t)(0xa5 ^ (29 * i + 7 * j + 1));
        k->key[i] = rumor_secret_key_from_seed(secret, err);
        CHECK_MSG(k->key[i] != NULL, "%s", err);
    }
    qsort(k->key, PEERS, sizeof k->key[0], pk_cmp);
    for (int i = 0; i < PEERS; i++) {
        k->boot[i] = 0x100 + (uint64_t)i;
        k->mix[i] = rumor_secmix_new(k->key[i], k->boot[i], LAYOUT, err);
        CHECK(k->mix[i] != NULL);
        k->pk[i] = rumor_secret_key_public(k->key[i]);
    }
}

static void keys_fini(keys_t *k)
{
    for (int i = 0; i < PEERS; i++) {
        rumor_secmix_destroy(&k->mix[i]);
        rumor_secret_key_destroy(&k->key[i]);
    }
}

/* The edges the gossip engine gives sender set[pos] among the n senders set[] (ascending). */
static void ring_edges(const keys_t *k, const int *set, int n, int pos, int receiver, uint64_t round,
                       rumor_secmix_edges_t *e)
{
    memset(e, 0, sizeof *e);
    memcpy(e->receiver, k->pk[receiver], RUMOR_SECMIX_KEY_LEN);
    e->round = round;
    const int next = set[(pos + 1) % n], prev = set[(pos + n - 1) % n];
    memcpy(e->peer[0], k->pk[next], RUMOR_SECMIX_KEY_LEN);
    e->peer_boot[0] = k->boot[next];
    e->count = 1;
    if (prev != next) {
        e->peer_boot[1] = k->boot[prev];
        memcpy(e->peer[e->count++], k->pk[prev], RUMOR_SECMIX_KEY_LEN);
    }
}

static uint32_t word_at(const uint8_t *p, size_t i)
{
    uint32_t w;
    memcpy(&w, p + 4 * i, 4);
    return w;
}

/* n senders (n = 2..5) send one chunk each to peer 0, twice, in two rounds: the messages of
 * the two rounds differ in nearly every word, yet the two sums are equal word for word (the
 * masks cancel exactly) and read back as the weighted sum, each sender's share within one
 * unit of 2^-20 and a half. With parameters as large as `scale`, the shares take the double
 * path, which rounds exactly: the sum is then exactly the sum of the rounded shares. */
static void test_cancellation(const keys_t *k, int n, size_t off, size_t len, double scale)
{
    char err[RUMOR_ERR_LEN];
    rumor_rng_t rng;
    rumor_rng_init(&rng, (uint64_t)(n * 1000 + len));
    int set[PEERS];
    for (int i = 0; i < n; i++) set[i] = i + 1; /* senders 1..n, receiver 0 */
    float *x = malloc(len * sizeof *x);
    uint8_t *out[2] = {malloc(4 * len), malloc(4 * len)};
    uint32_t *acc[2] = {calloc(len, sizeof(uint32_t)), calloc(len, sizeof(uint32_t))};
    int64_t *want = calloc(len, sizeof *want);
    double *real = calloc(len, sizeof *real);
    size_t differ = 0;
    for (int p = 0; p < n; p++) {
        const double share = 0.05 + 0.2 * rumor_rng_uniform(&rng);
        for (size_t i = 0; i < len; i++) x[i] = (float)(scale * rumor_rng_normal(&rng));
        for (int r = 0; r < 2; r++) {
            rumor_secmix_edges_t e;
            ring_edges(k, set, n, p, 0, 17 + (uint64_t)r, &e);
            CHECK(e.count == (n == 2 ? 1 : 2));
            rumor_secmix_send_t snd;
            CHECK_RC(rumor_secmix_send_init(k->mix[set[p]], &e, &snd, err));
            CHECK_RC(rumor_secmix_encode(&snd, off, x, len, share, out[r], err));
            rumor_secmix_send_fini(&snd);
            rumor_secmix_add(acc[r], out[r], len);
        }
        for (size_t i = 0; i < len; i++) {
            differ += memcmp(out[0] + 4 * i, out[1] + 4 * i, 4) != 0;
            want[i] += llround((double)x[i] * share * 1048576.0);
            real[i] += (double)x[i] * share;
        }
    }
    size_t same = 0, exact = 0;
    double worst = 0.0;
    for (size_t i = 0; i < len; i++) {
        same += acc[0][i] == acc[1][i];
        exact += acc[0][i] == (uint32_t)want[i];
        const double d = fabs(rumor_secmix_value(acc[0][i]) - real[i]);
        if (d > worst) worst = d;
    }
    CHECK_MSG(same == len, "%d senders: %zu of %zu sums agree between rounds", n, same, len);
    CHECK_MSG(differ > (size_t)n * len - 4, "%d senders: only %zu of %zu words differ between rounds", n, differ,
              (size_t)n * len);
    if (scale > 100.0) CHECK_MSG(exact == len, "%d senders: %zu of %zu sums are the rounded shares'", n, exact, len);
    CHECK_MSG(worst <= n * 1.5 / 1048576.0 + 1e-12, "%d senders: error %g", n, worst);
    free(x), free(out[0]), free(out[1]), free(acc[0]), free(acc[1]), free(want), free(real);
}

/* The chi-square statistic of the byte histogram of len bytes (255 degrees of freedom). */
static double chi2_bytes(const uint8_t *p, size_t len)
{
    double h[256] = {0};
    for (size_t i = 0; i < len; i++) h[p[i]]++;
    const double e = (double)len / 256.0;
    double c = 0.0;
    for (int b = 0; b < 256; b++) c += (h[b] - e) * (h[b] - e) / e;
    return c;
}

/* One masked message of a model that is all zeros (or all one value) looks uniform: bytes,
 * bits and pairs of successive words show no structure. The same statistics on the unmasked
 * fixed-point words fail by orders of magnitude (the test can see structure).
 *
 * False failures: the keys are fixed (keys_init), so each statistic below has one value and
 * the outcome is the same on every run. Only a change to the mask derivation (or to the keys)
 * draws them again; for truly uniform masks each check then fails with the probability stated
 * beside it, about 5e-5 for all of them together (the two chi-square tests 1.6e-5 each, the
 * 32 bit counts 1.8e-5, the repeated-word check 1.9e-6), once per change, not per run. */
static void test_uniform(const keys_t *k)
{
    char err[RUMOR_ERR_LEN];
    const size_t n = 1u << 20;
    float *x = calloc(n, sizeof *x);
    uint8_t *out = malloc(4 * n), *plain = malloc(4 * n);
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.01 * (double)(i % 7));
    const int set[3] = {1, 2, 3};
    rumor_secmix_edges_t e;
    ring_edges(k, set, 3, 1, 0, 5, &e);
    rumor_secmix_send_t snd;
    CHECK_RC(rumor_secmix_send_init(k->mix[2], &e, &snd, err));
    CHECK_RC(rumor_secmix_encode(&snd, 0, x, n, 0.5, out, err));
    for (size_t i = 0; i < n; i++) {
        const uint32_t q = (uint32_t)(int64_t)llround((double)x[i] * 0.5 * 1048576.0);
        memcpy(plain + 4 * i, &q, 4);
    }
    /* 255 degrees of freedom: P(chi2 > 360) = 1.6e-5 for uniform bytes. */
    const double c = chi2_bytes(out, 4 * n), cp = chi2_bytes(plain, 4 * n);
    CHECK_MSG(c < 360.0, "masked bytes: chi2 %.1f", c);
    CHECK_MSG(cp > 100000.0, "plain bytes: chi2 %.1f", cp);
    /* Every bit position of a word is set half the time: |ones - n/2| < 5 sigma (sigma = 512;
     * P(beyond 5 sigma) = 5.7e-7 a position, 1.8e-5 for the 32). */
    int bad_bits = 0;
    for (int b = 0; b < 32; b++) {
        size_t ones = 0;
        for (size_t i = 0; i < n; i++) ones += (word_at(out, i) >> b) & 1u;
        bad_bits += fabs((double)ones - (double)n / 2.0) > 5.0 * 512.0;
    }
    CHECK_MSG(bad_bits == 0, "%d bit positions are biased", bad_bits);
    /* Successive words are uncorrelated: the top nibbles of (w_i, w_i+1) over 256 cells. */
    double cells[256] = {0};
    for (size_t i = 0; i + 1 < n; i += 2) cells[(word_at(out, i) >> 28) << 4 | word_at(out, i + 1) >> 28]++;
    const double ec = (double)(n / 2) / 256.0;
    double cc = 0.0;
    for (int b = 0; b < 256; b++) cc += (cells[b] - ec) * (cells[b] - ec) / ec;
    CHECK_MSG(cc < 360.0, "pairs of words: chi2 %.1f", cc); /* 255 degrees of freedom, as above */

    /* No mask is used twice: another round, another receiver, another offset give other words
     * (equal words by chance: 2^-32 each, 1.9e-6 for the 8192 compared). */
    uint8_t *other = malloc(4 * 4096);
    rumor_secmix_edges_t e2 = e;
    size_t same = 0;
    e2.round = 6;
    rumor_secmix_send_t s2;
    CHECK_RC(rumor_secmix_send_init(k->mix[2], &e2, &s2, err));
    CHECK_RC(rumor_secmix_encode(&s2, 0, x, 4096, 0.5, other, err));
    for (size_t i = 0; i < 4096; i++) same += word_at(other, i) == word_at(out, i);
    rumor_secmix_send_fini(&s2);
    e2 = e;
    memcpy(e2.receiver, k->pk[4], RUMOR_SECMIX_KEY_LEN);
    CHECK_RC(rumor_secmix_send_init(k->mix[2], &e2, &s2, err));
    CHECK_RC(rumor_secmix_encode(&s2, 0, x, 4096, 0.5, other, err));
    for (size_t i = 0; i < 4096; i++) same += word_at(other, i) == word_at(out, i);
    rumor_secmix_send_fini(&s2);
    CHECK_MSG(same == 0, "%zu words repeat across rounds or receivers", same);
    /* A chunk encodes the same whether alone or inside a bigger one (random access). */
    CHECK_RC(rumor_secmix_encode(&snd, 4096, x + 4096, 1000, 0.5, other, err));
    CHECK(memcmp(other, out + 4 * 4096, 4 * 1000) == 0);
    rumor_secmix_send_fini(&snd);
    free(other), free(x), free(out), free(plain);
}

/* The same key files in a second run (a fresh process: a new boot id, any run folder) never
 * repeat a mask of the first, so a receiver that kept both runs' messages learns no difference
 * of models; and the same holds for another model layout. A sender that knows a stale run of
 * its ring neighbour makes masks that do not cancel (the receiver's sum is noise, never a
 * model: the mix id tells it to leave them out, see test_gossip). */
static void test_sessions(keys_t *k)
{
    char err[RUMOR_ERR_LEN];
    const size_t n = 4096;
    float x[4096];
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.001 * (double)(i % 13));
    uint8_t *run1 = malloc(4 * n), *run2 = malloc(4 * n), *other = malloc(4 * n);
    const int set[3] = {1, 2, 3};
    rumor_secmix_edges_t e;
    ring_edges(k, set, 3, 1, 0, 9, &e);
    rumor_secmix_send_t snd;
    CHECK_RC(rumor_secmix_send_init(k->mix[2], &e, &snd, err));
    CHECK_RC(rumor_secmix_encode(&snd, 0, x, n, 0.5, run1, err));
    rumor_secmix_send_fini(&snd);
    /* Run 2 of peer 2: same key, same receiver, round, chunk and model; a new boot id. */
    rumor_secmix_t *again = rumor_secmix_new(k->key[2], 0x9999, LAYOUT, err);
    CHECK(again != NULL);
    CHECK_RC(rumor_secmix_send_init(again, &e, &snd, err));
    CHECK_RC(rumor_secmix_encode(&snd, 0, x, n, 0.5, run2, err));
    rumor_secmix_send_fini(&snd);
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += word_at(run1, i) == word_at(run2, i);
    CHECK_MSG(same == 0, "%zu of %zu words repeat in a second run with the same keys", same, n);
    /* Run 1 again (the same boot id): the very same words, so the difference is the run's. */
    rumor_secmix_t *same_run = rumor_secmix_new(k->key[2], k->boot[2], LAYOUT, err);
    CHECK_RC(rumor_secmix_send_init(same_run, &e, &snd, err));
    CHECK_RC(rumor_secmix_encode(&snd, 0, x, n, 0.5, other, err));
    rumor_secmix_send_fini(&snd);
    CHECK(memcmp(other, run1, 4 * n) == 0);
    /* Another layout: other masks. */
    rumor_secmix_t *lay = rumor_secmix_new(k->key[2], k->boot[2], LAYOUT + 1, err);
    CHECK_RC(rumor_secmix_send_init(lay, &e, &snd, err));
    CHECK_RC(rumor_secmix_encode(&snd, 0, x, n, 0.5, other, err));
    rumor_secmix_send_fini(&snd);
    same = 0;
    for (size_t i = 0; i < n; i++) same += word_at(other, i) == word_at(run1, i);
    CHECK_MSG(same == 0, "%zu words repeat under another layout", same);
    /* Sender 1's neighbour 2 restarted (run 0x9999), but 1 still knows its old run: the pair's
     * masks no longer cancel in the receiver's sum. */
    rumor_secmix_edges_t e1;
    ring_edges(k, set, 3, 0, 0, 9, &e1);
    uint32_t *acc = calloc(n, sizeof *acc);
    const rumor_secmix_t *who[3] = {k->mix[1], again, k->mix[3]};
    for (int p = 0; p < 3; p++) {
        rumor_secmix_edges_t ep;
        ring_edges(k, set, 3, p, 0, 9, &ep);
        CHECK_RC(rumor_secmix_send_init((rumor_secmix_t *)who[p], &ep, &snd, err));
        CHECK_RC(rumor_secmix_encode(&snd, 0, x, n, 0.25, other, err));
        rumor_secmix_send_fini(&snd);
        rumor_secmix_add(acc, other, n);
    }
    size_t near = 0;
    for (size_t i = 0; i < n; i++) near += fabs(rumor_secmix_value(acc[i]) - 0.75 * (double)x[i]) < 1e-3;
    CHECK_MSG(near < 8, "%zu of %zu sums are right although one pair disagrees on a run", near, n);
    rumor_secmix_destroy(&again);
    rumor_secmix_destroy(&same_run);
    rumor_secmix_destroy(&lay);
    free(acc), free(run1), free(run2), free(other);
}

static void test_refusals(const keys_t *k)
{
    char err[RUMOR_ERR_LEN];
    const int set[3] = {1, 2, 3};
    rumor_secmix_edges_t e;
    ring_edges(k, set, 3, 0, 0, 1, &e);
    rumor_secmix_send_t snd;
    CHECK_RC(rumor_secmix_send_init(k->mix[1], &e, &snd, err));
    float x[32] = {0};
    uint8_t out[128];
    x[3] = 1500.0f;
    CHECK_RC(rumor_secmix_encode(&snd, 0, x, 32, 1.0, out, err)); /* inside the range */
    x[3] = 2100.0f;
    CHECK(rumor_secmix_encode(&snd, 0, x, 32, 1.0, out, err) == RUMOR_EINVAL && strstr(err, "range"));
    CHECK_RC(rumor_secmix_encode(&snd, 0, x, 32, 0.5, out, err)); /* the share brings it in */
    x[3] = NAN;
    CHECK(rumor_secmix_encode(&snd, 0, x, 32, 0.5, out, err) == RUMOR_EINVAL);
    x[3] = 0.0f;
    CHECK(rumor_secmix_encode(&snd, 8, x, 32, 0.5, out, err) == RUMOR_EINVAL); /* off % 16 */
    rumor_secmix_send_fini(&snd);
    /* An edge to oneself, two equal edges, a low-order point for a key. */
    rumor_secmix_edges_t b = e;
    memcpy(b.peer[0], k->pk[1], RUMOR_SECMIX_KEY_LEN);
    CHECK(rumor_secmix_send_init(k->mix[1], &b, &snd, err) == RUMOR_EINVAL);
    b = e;
    memcpy(b.peer[1], b.peer[0], RUMOR_SECMIX_KEY_LEN);
    CHECK(rumor_secmix_send_init(k->mix[1], &b, &snd, err) == RUMOR_EINVAL);
    b = e;
    memset(b.peer[1], 0, RUMOR_SECMIX_KEY_LEN);
    CHECK(rumor_secmix_send_init(k->mix[1], &b, &snd, err) == RUMOR_EINVAL);
    b.count = 0;
    CHECK(rumor_secmix_send_init(k->mix[1], &b, &snd, err) == RUMOR_EINVAL);
    /* A ring neighbour whose run is unknown, and a context without a run of its own. */
    b = e;
    b.peer_boot[1] = 0;
    CHECK(rumor_secmix_send_init(k->mix[1], &b, &snd, err) == RUMOR_EINVAL && strstr(err, "boot"));
    CHECK(rumor_secmix_new(k->key[1], 0, LAYOUT, err) == NULL);
    /* Fixed point back to real numbers, both signs. */
    CHECK(rumor_secmix_value(1u << 20) == 1.0);
    CHECK(rumor_secmix_value(0xffffffffu) == -1.0 / 1048576.0);
    CHECK(rumor_secmix_value(0x80000000u) == -2048.0);
}

int main(void)
{
    keys_t k;
    keys_init(&k);
    for (int n = 2; n <= 5; n++) test_cancellation(&k, n, 0, 5000, 3.0);
    test_cancellation(&k, 3, 262144, 1001, 3.0); /* a later chunk, a length not a multiple of 16 */
    test_cancellation(&k, 4, 16, 3000, 150.0);   /* shares beyond 2^24 units: the double path */
    test_uniform(&k);
    test_sessions(&k);
    test_refusals(&k);
    keys_fini(&k);
    return check_done();
}
