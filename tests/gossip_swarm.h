/* gossip_swarm.h - a swarm of gossip engines in one process, wired by hand: each send's chunks
 * handed straight to its receiver's rumor_gossip_on_chunk (test_gossip.c; with
 * GOSSIP_SWARM_SECURE defined, test_gossip_core.c, which encodes masked sends with real keys). */
#ifndef RUMOR_GOSSIP_SWARM_H
#define RUMOR_GOSSIP_SWARM_H

#include "check.h"
#include "gossip.h"
#include "rng.h"
#include "topology.h"
#ifdef GOSSIP_SWARM_SECURE
#include "crypto.h"
#include "secmix.h"
#endif

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 32

typedef struct {
    int n;
    size_t P, chunk;
    rumor_topology_t *topo;
    rumor_gossip_t *g[MAXN];
    float *x[MAXN];
    uint8_t key[MAXN][RUMOR_KEY_LEN];
    bool dead[MAXN];
#ifdef GOSSIP_SWARM_SECURE
    /* secure mixing: real key pairs (the keys above are their public halves) */
    rumor_secret_key_t *sk[MAXN];
    rumor_secmix_t *sm[MAXN];
#endif
    uint64_t boot[MAXN];                /* each peer's run */
    int lose_from, lose_to, lose_chunk; /* a chunk to lose once; -1: none */
    bool wrong_mix;                     /* deliver the next masked send with another mix id */
    bool refusals_ok;                   /* a receiver may refuse masked chunks (disagreeing sets) */
    int hostile;                        /* masked sends of this peer go scaled by ... */
    float hostile_scale;                /* ... this (0: none) */
    uint64_t choco_bytes, choco_dense;  /* compressed gossip: bytes delivered, and as float32 */
} swarm_t;

static inline void key_of(uint8_t key[RUMOR_KEY_LEN], int i)
{
    memset(key, 0, RUMOR_KEY_LEN);
    key[0] = (uint8_t)i; /* sorted keys give rank i */
    key[31] = 0xa5;
}

static inline void swarm_init(swarm_t *s, int n, const char *topo, const char *algo, size_t P, size_t chunk,
                       uint64_t seed, uint64_t round_timeout)
{
    memset(s, 0, sizeof *s);
    s->n = n, s->P = P, s->chunk = chunk;
    char err[RUMOR_ERR_LEN];
    s->topo = rumor_topology_new(topo, 7, err);
    CHECK(s->topo != NULL);
    rumor_rng_t rng;
    rumor_rng_init(&rng, seed);
    for (int i = 0; i < n; i++) key_of(s->key[i], i);
    for (int i = 0; i < n; i++) {
        s->x[i] = malloc(P * sizeof(float));
        for (size_t j = 0; j < P; j++) s->x[i][j] = (float)(rumor_rng_normal(&rng) + 3.0);
        rumor_gossip_config_t cfg = {.params = P, .layout = 0x1234, .chunk_params = chunk,
                                     .round_timeout_ms = round_timeout};
        /* "dpsgd+overlap": the overlapped form (--overlap); "+clip": with --robust clip */
        char spec[32];
        snprintf(spec, sizeof spec, "%s", algo);
        char *clip = strstr(spec, "+clip");
        if (clip) *clip = '\0';
        char *plus = strstr(spec, "+overlap");
        if (plus) *plus = '\0';
        CHECK_RC(rumor_algo_parse(&cfg.algo, spec, err));
        cfg.algo.overlap = plus != NULL;
        if (clip) CHECK_RC(rumor_robust_parse(&cfg.robust, "clip", err));
        memcpy(cfg.self, s->key[i], RUMOR_KEY_LEN);
        s->g[i] = rumor_gossip_new(&cfg, s->topo, s->x[i], err);
        CHECK(s->g[i] != NULL);
        rumor_gossip_set_view(s->g[i], (const uint8_t(*)[RUMOR_KEY_LEN])s->key, (size_t)n); /* self is ignored */
    }
}

static inline void swarm_fini(swarm_t *s)
{
    for (int i = 0; i < s->n; i++) {
        rumor_gossip_destroy(&s->g[i]);
#ifdef GOSSIP_SWARM_SECURE
        rumor_secmix_destroy(&s->sm[i]);
        rumor_secret_key_destroy(&s->sk[i]);
#endif
        free(s->x[i]);
    }
    rumor_topology_destroy(&s->topo);
}

static inline int find(const swarm_t *s, const uint8_t key[RUMOR_KEY_LEN])
{
    for (int i = 0; i < s->n; i++)
        if (memcmp(s->key[i], key, RUMOR_KEY_LEN) == 0) return i;
    return -1;
}

/* Deliver every chunk of send `m` from peer `from` (unless dead) and release it. */
static inline void deliver(swarm_t *s, int from, const rumor_gossip_send_t *m, uint64_t now)
{
    const int to = find(s, m->peer);
    CHECK(to >= 0 && to != from);
    const uint32_t chunks = (uint32_t)rumor_chunks(m->count, m->chunk_params);
    if (to >= 0 && !s->dead[to] && !s->dead[from])
        for (uint32_t c = 0; c < chunks; c++) {
            const size_t off = (size_t)c * m->chunk_params;
            const size_t n = m->count - off < m->chunk_params ? m->count - off : m->chunk_params;
            rumor_gossip_chunk_t h = {.round = m->round, .layout = m->layout, .w = m->share * m->w[c],
                                      .chunk = c, .chunks = chunks, .off = off, .n = n};
            if (m->choco) {
                if (s->lose_from == from && s->lose_to == to && s->lose_chunk == (int)c) {
                    s->lose_from = -1;
                    continue;
                }
                h.choco = true, h.codec = m->codec, h.ver = m->ver, h.lin = m->lin, h.base = m->base, h.need = m->need;
                const uint8_t *pl = m->enc ? m->enc + m->enc_off[c] : (const uint8_t *)(m->params + off);
                const size_t len = m->enc ? m->enc_off[c + 1] - m->enc_off[c] : n * sizeof(float);
                s->choco_bytes += len;
                s->choco_dense += n * sizeof(float);
                (void)rumor_gossip_on_chunk(s->g[to], s->key[from], &h, pl, len, now);
                continue;
            }
            if (m->masked) {
#ifdef GOSSIP_SWARM_SECURE
                if (s->lose_from == from && s->lose_to == to && s->lose_chunk == (int)c) {
                    s->lose_from = -1;
                    continue;
                }
                char err[RUMOR_ERR_LEN];
                rumor_secmix_send_t snd;
                uint8_t *buf = malloc(4 * n);
                CHECK_RC(rumor_secmix_send_init(s->sm[from], &m->edges, &snd, err));
                float *scaled = NULL;
                const float *v = m->params + off;
                if (s->hostile_scale != 0.0f && from == s->hostile) {
                    scaled = malloc(n * sizeof *scaled);
                    for (size_t j = 0; j < n; j++) scaled[j] = s->hostile_scale * v[j];
                    v = scaled;
                }
                CHECK_RC(rumor_secmix_encode(&snd, off, v, n, h.w, buf, err));
                free(scaled);
                rumor_secmix_send_fini(&snd);
                h.masked = true;
                h.mix = m->mix ^ (s->wrong_mix ? 1 : 0);
                const bool taken = rumor_gossip_on_chunk(s->g[to], s->key[from], &h, buf, 4 * n, now);
                CHECK(taken || s->refusals_ok);
                free(buf);
#else
                CHECK_MSG(false, "a masked send: secure mixing is test_gossip_core's");
#endif
                continue;
            }
            CHECK(rumor_gossip_on_chunk(s->g[to], s->key[from], &h, m->params + off, n * sizeof(float), now));
        }
    if (m->masked) s->wrong_mix = false;
    rumor_gossip_release(s->g[from], m, true);
}

static inline void drain(swarm_t *s, int i, uint64_t now)
{
    rumor_gossip_send_t m;
    while (rumor_gossip_next_send(s->g[i], &m)) deliver(s, i, &m, now);
}

/* One pass: every live peer reaches its gossip point, in rank order, and those that waited
 * there for a neighbour later in the order (a round that is not overlapped waits for this
 * round's models) try once more; returns false if one still waits. */
static inline bool pass(swarm_t *s, uint64_t now)
{
    bool waited[MAXN] = {false}, all = true;
    for (int i = 0; i < s->n; i++) {
        if (s->dead[i]) continue;
        waited[i] = rumor_gossip_step(s->g[i], s->x[i], now) != RUMOR_GOSSIP_DONE;
        drain(s, i, now);
    }
    for (int i = 0; i < s->n; i++) {
        if (!waited[i]) continue;
        if (rumor_gossip_step(s->g[i], s->x[i], now) != RUMOR_GOSSIP_DONE) all = false;
        drain(s, i, now);
    }
    return all;
}

static inline double dist_to_mean(const swarm_t *s, const double *mean)
{
    double d = 0;
    for (int i = 0; i < s->n; i++)
        for (size_t j = 0; j < s->P; j++) {
            const double e = s->x[i][j] - mean[j];
            d += e * e;
        }
    return sqrt(d);
}

static inline void mean_of(const swarm_t *s, double *mean)
{
    for (size_t j = 0; j < s->P; j++) {
        double m = 0;
        for (int i = 0; i < s->n; i++) m += s->x[i][j];
        mean[j] = m / s->n;
    }
}

/* What a model's loss would see: a float32 sum of squares (an L2 loss), which overflows to
 * Inf long before the parameters themselves do. */
static inline bool loss_finite(const float *x, size_t n)
{
    float l = 0.0f;
    for (size_t j = 0; j < n; j++) l += x[j] * x[j];
    return isfinite(l);
}

#endif
