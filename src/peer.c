/* peer.c - a training peer: node, trainer thread and gossip engine (see peer.h). */
#include "peer.h"

#include "trainer.h"

#include "backend.h"
#include "checkpoint.h"
#include "crypto.h"
#include "fileio.h"
#include "rng.h"
#include "safetensors.h"
#include "topology.h"
#include "train.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define EVAL_BATCH 256
#define MAX_VIEW 256
#define MASK_POOL 16 /* masked send buffers kept for reuse */
#define LATE_JOIN_ROUNDS 4 /* a neighbour this many rounds in means the swarm is running */
#define RESYNC_EVERY 10.0  /* seconds: asked again at most this often */

typedef struct {
    const rumor_peer_config_t *cfg;
    rumor_node_t *node;
    rumor_topology_t *topo;
    rumor_gossip_t *g;
    pthread_mutex_t mu;       /* guards g, view_count, bytes_out */
    pthread_cond_t cv;        /* a chunk arrived, a send finished, or a stop */
    atomic_bool stop;         /* the trainer should stop (signal, or the node ended) */
    atomic_bool trainer_done;
    int view_count;
    uint64_t bytes_out;
    uint8_t view_keys[MAX_VIEW][32]; /* the tick's scratch: admitted members */
    uint64_t view_boots[MAX_VIEW];   /* ... and the boot ids of their runs (secure mixing) */
    /* Members (under mu, from the tick): admitted ones, and how many of them said they
     * finished (PROTOCOL.md "Finishing"); the gossip view is the others. */
    int n_members, n_done;
    /* Pulls (under mu): the trainer wants a member's model, the tick asks one it has not asked
     * in this resync (a finished one when pull_want_done), the chunk callback assembles and
     * verifies the answer. PULL_NOBODY: no member left to ask. */
    enum { PULL_NONE, PULL_WANTED, PULL_ASKED, PULL_DONE, PULL_NOBODY } pull_state;
    uint8_t pull_asked[RUMOR_RESYNC_ASKS][32];
    int n_asked;
    bool pull_want_done;
    uint64_t pull_done;       /* the member asked had finished, at this round (0: training) */
    uint64_t pull_asked_ms;   /* when it was asked (again) */
    int pull_resends;
    uint8_t pull_peer[32];
    float *pull_buf;
    uint64_t *pull_bits;
    size_t pull_chunks, pull_got;
    uint64_t pull_round;
    uint8_t pull_hash[RUMOR_HASH_LEN];
    bool pull_ok;
    /* Once training is over (lingering): the final model is what pulls get (under mu). */
    bool finished;
    const float *final_x;
    uint64_t final_round;
    uint8_t final_hash[RUMOR_HASH_LEN];
    /* trainer's */
    float *ans[RUMOR_RESYNC_ASKS];  /* pulled models kept while a resync looks for two that agree */
    double last_resync;
    bool swarm_over;          /* the swarm finished without us: this peer ends where it is */
    rumor_dataset_t train, test;
    float mean, std;
    size_t *own, n_own;
    rumor_trainer_t *tr;      /* the local steps */
    rumor_backend_t *be;
    rumor_model_t *m;
    rumor_optim_t *o;
    FILE *metrics;
    long k;                   /* gossip rounds done */
    double t0;
    char ckpt_path[1024], model_path[1024];
    rumor_err_t trc;
    char terr[RUMOR_ERR_LEN];
    /* emulated network (node thread only) */
    bool emulate;
    struct send_ctx *delayed[256];
    int n_delayed;
    struct send_ctx *retry[64];   /* compressed-gossip sends the node could not take yet, in order */
    int n_retry;
    uint64_t uplink_free;
    rumor_rng_t emu_rng;
    /* a Byzantine peer (--attack): what it sends instead of each snapshot, per snapshot */
    rumor_poison_t poison;
    rumor_rng_t attack_rng;
    rumor_dp_t *dp;         /* DP-SGD, when on (trainer thread; epsilon read under mu) */
    /* Parameters on a device (the backend's memory is not host memory): the engine mixes host
     * memory, so hx (host_alloc, page-locked) mirrors them at gossip points (NULL on
     * host-memory backends, where the engine mixes the model's buffer). */
    float *hx;
    /* --codec: each snapshot encoded once (node thread), and a chunk decoded on arrival */
    uint8_t *enc[2];
    size_t *enc_off[2];
    uint64_t enc_round[2];
    bool enc_set[2];
    float *dec;
    uint64_t codec_drops;     /* chunks whose encoding did not decode (under mu) */
    rumor_secmix_t *secmix;   /* --secure-mix (node thread) */
    /* Masked buffers of sends released, for the next ones: a fresh 1 MiB buffer costs its page
     * faults on every send (a third of the masking time measured). Under pool_mu. */
    pthread_mutex_t pool_mu;
    uint8_t *mask_pool[MASK_POOL];
    int n_mask_pool;
    uint64_t mask_fails;      /* sends that could not be masked (under mu) */
    /* Masks depend on (pair, receiver, round) only: a round masked twice with two models would
     * give its receiver their difference. Rounds below mask_reserved may have been sent by
     * this life or an earlier one (run_dir/secure-mix.round keeps the bound across restarts);
     * a round is masked only once the file covers it. Node thread. */
    uint64_t mask_reserved;
    char mask_path[1024];
    double epsilon;           /* spent so far (under mu) */
    bool budget_spent;
    bool interrupted;
    double test_acc, test_loss;
} peer_t;

typedef struct send_ctx {
    peer_t *p;
    rumor_gossip_send_t s;
    uint64_t due;             /* emulated network: when it may leave */
    uint8_t *masked;          /* --secure-mix: this send's masked chunks (they differ per receiver) */
    size_t *masked_off;
    bool final;               /* the final model, not a snapshot lent by the engine */
} send_ctx_t;

static void send_ctx_free(send_ctx_t *c)
{
    if (!c) return;
    if (c->masked) {
        peer_t *p = c->p;
        pthread_mutex_lock(&p->pool_mu);
        /* At most MASK_POOL buffers and 256 MiB: large models are not worth keeping many of. */
        if (p->n_mask_pool < MASK_POOL && (size_t)(p->n_mask_pool + 1) * c->s.count * 4 <= ((size_t)256 << 20))
            p->mask_pool[p->n_mask_pool++] = c->masked, c->masked = NULL;
        pthread_mutex_unlock(&p->pool_mu);
    }
    free(c->masked);
    free(c->masked_off);
    free(c);
}

/* ---- the node's side (its thread, and libzmq's for releases) ---- */

static void release_cb(void *arg)
{
    send_ctx_t *c = arg;
    peer_t *p = c->p;
    pthread_mutex_lock(&p->mu);
    if (!c->final) rumor_gossip_release(p->g, &c->s, true);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    send_ctx_free(c);
}

/* A chunk of the model we pulled (under mu). Anything else carrying a hash is ignored: only
 * the peer asked, only the geometry of our model, one hash and round for all chunks. */
static void pull_chunk(peer_t *p, const uint8_t peer[32], const rumor_node_chunk_t *ch, const void *payload,
                       size_t len)
{
    const size_t P = rumor_model_param_count(p->m), cp = RUMOR_GOSSIP_CHUNK_DEFAULT;
    if (p->pull_state != PULL_ASKED || memcmp(peer, p->pull_peer, 32) != 0 || ch->layout != rumor_model_layout_id(p->m) ||
        ch->chunks != p->pull_chunks || ch->chunk >= p->pull_chunks)
        return;
    const size_t off = (size_t)ch->chunk * cp, n = P - off < cp ? P - off : cp;
    if (ch->off != off || ch->n != n || len != n * sizeof(float)) return;
    if (p->pull_got == 0) {
        memcpy(p->pull_hash, ch->hash, RUMOR_HASH_LEN);
        p->pull_round = ch->round;
    } else if (memcmp(p->pull_hash, ch->hash, RUMOR_HASH_LEN) != 0 || p->pull_round != ch->round) {
        return;
    }
    const uint64_t bit = UINT64_C(1) << (ch->chunk % 64);
    if (p->pull_bits[ch->chunk / 64] & bit) return;
    p->pull_bits[ch->chunk / 64] |= bit;
    memcpy(p->pull_buf + off, payload, len);
    if (++p->pull_got < p->pull_chunks) return;
    uint8_t h[RUMOR_HASH_LEN];
    rumor_hash(h, p->pull_buf, P * sizeof(float));
    p->pull_ok = rumor_hash_equal(h, p->pull_hash);
    p->pull_state = PULL_DONE;
    pthread_cond_broadcast(&p->cv);
}

/* A joining neighbour asks for our model: lend the latest snapshot, hash it, send it. */
static void pull_cb(void *arg, rumor_node_t *node, const uint8_t peer[32], uint64_t layout)
{
    peer_t *p = arg;
    /* A whole model in the clear is what secure mixing hides: never lent. */
    if (layout != rumor_model_layout_id(p->m) || p->cfg->secure_mix) return;
    send_ctx_t *c = calloc(1, sizeof *c);
    if (!c) return;
    c->p = p;
    pthread_mutex_lock(&p->mu);
    if (p->finished) {
        /* Lingering after training: the final model, hashed once, never changing. */
        const size_t P = rumor_model_param_count(p->m);
        const uint64_t round = p->final_round;
        uint8_t h[RUMOR_HASH_LEN];
        memcpy(h, p->final_hash, sizeof h);
        c->final = true;
        pthread_mutex_unlock(&p->mu);
        if (rumor_node_send_model(node, peer, layout, round, 1.0, NULL, p->final_x, P, RUMOR_GOSSIP_CHUNK_DEFAULT, h,
                                  release_cb, c) != RUMOR_OK)
            send_ctx_free(c);
        else
            rumor_log(RUMOR_LOG_DEBUG, "sent our final model (round %" PRIu64 ") to a late peer", round);
        return;
    }
    rumor_gossip_lend(p->g, &c->s);
    pthread_mutex_unlock(&p->mu);
    uint8_t h[RUMOR_HASH_LEN]; /* the snapshot cannot change while lent */
    rumor_hash(h, c->s.params, c->s.count * sizeof(float));
    const rumor_gossip_send_t s = c->s;
    rumor_err_t rc = rumor_node_send_model(node, peer, s.layout, s.round, 1.0, NULL, s.params, s.count,
                                           s.chunk_params, h, release_cb, c);
    if (rc != RUMOR_OK) {
        pthread_mutex_lock(&p->mu);
        rumor_gossip_release(p->g, &s, false);
        pthread_mutex_unlock(&p->mu);
        send_ctx_free(c);
    } else {
        rumor_log(RUMOR_LOG_DEBUG, "sent our model (round %" PRIu64 ") to a joining peer", s.round);
    }
}

static void chunk_cb(void *arg, const uint8_t peer[32], const rumor_node_chunk_t *ch, const void *payload,
                     size_t len)
{
    peer_t *p = arg;
    rumor_gossip_chunk_t h = {.round = ch->round, .layout = ch->layout, .w = ch->w, .chunk = ch->chunk,
                              .chunks = ch->chunks, .off = ch->off, .n = ch->n};
    pthread_mutex_lock(&p->mu);
    if (ch->codec == RUMOR_CODEC_MASKED) {
        /* Words for the engine to sum as they are. */
        h.masked = true;
        h.mix = ch->mix;
    } else if (ch->has_copy && !ch->has_hash) {
        /* A piece of a neighbour's public copy: the engine applies it to its copy. */
        h.choco = true, h.codec = ch->codec, h.ver = ch->ver, h.lin = ch->lin, h.base = ch->base, h.need = ch->need;
        h.wire_bytes = len;
    } else if (ch->codec != RUMOR_CODEC_F32 && !ch->has_hash) {
        /* Decoded into floats first (p->dec holds the largest chunk there is); a chunk of
         * another geometry than ours is the engine's to refuse. */
        if (!p->dec || ch->n > RUMOR_GOSSIP_CHUNK_DEFAULT ||
            rumor_codec_decode((rumor_proto_codec_t)ch->codec, payload, len, (size_t)ch->n, p->dec, NULL) != RUMOR_OK) {
            p->codec_drops++;
            pthread_mutex_unlock(&p->mu);
            return;
        }
        h.wire_bytes = len;
        payload = p->dec;
        len = (size_t)ch->n * sizeof(float);
    }
    if (ch->has_hash)
        pull_chunk(p, peer, ch, payload, len);
    else if (rumor_gossip_on_chunk(p->g, peer, &h, payload, len, rumor_now_ms()))
        pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Encode snapshot s (its parameters x, poisoned or not) once per round, chunk by chunk, into
 * the buffer of its snapshot index (rewritten only for a later round of that snapshot, when
 * every send of this one is released). false when it cannot be encoded: it goes as float32. */
static bool encode_snapshot(peer_t *p, const rumor_gossip_send_t *s, const float *x)
{
    const int k = s->snap;
    if (p->enc_set[k] && p->enc_round[k] == s->round) return true;
    const size_t chunks = rumor_chunks(s->count, s->chunk_params);
    size_t at = 0;
    p->enc_off[k][0] = 0;
    for (size_t c = 0; c < chunks; c++) {
        const size_t off = c * s->chunk_params, n = s->count - off < s->chunk_params ? s->count - off : s->chunk_params;
        size_t len = 0;
        if (rumor_codec_encode(&p->cfg->codec, x + off, n, p->enc[k] + at, &len, NULL) != RUMOR_OK) {
            p->enc_set[k] = false;
            return false;
        }
        at += len;
        p->enc_off[k][c + 1] = at;
    }
    p->enc_round[k] = s->round;
    p->enc_set[k] = true;
    return true;
}

bool rumor_peer_gossip_fits(const rumor_peer_config_t *cfg, char err[RUMOR_ERR_LEN])
{
    if (cfg->codec.id == RUMOR_CODEC_TOPK && cfg->attack.kind != RUMOR_ATTACK_NONE) {
        rumor_fail(err, RUMOR_EINVAL, "--codec topk (compressed gossip) and --attack exclude each other");
        return false;
    }
    return rumor_gossip_check_modes(&cfg->algo, &cfg->robust, cfg->secure_mix, &cfg->codec, cfg->consensus_step, err) ==
           RUMOR_OK;
}

/* Rounds reserved at a time in secure-mix.round: one fsync every MASK_RESERVE rounds. */
#define MASK_RESERVE 64

/* Whether round `round` may be masked: the file must say that it may have been, before it is. */
static bool mask_reserve(peer_t *p, uint64_t round)
{
    if (round < p->mask_reserved) return true;
    char buf[32], err[RUMOR_ERR_LEN];
    const uint64_t upto = round + MASK_RESERVE;
    const int n = snprintf(buf, sizeof buf, "%" PRIu64 "\n", upto);
    if (rumor_write_atomic(p->mask_path, &(rumor_piece_t){buf, (uint64_t)n}, 1, 0600, true, err) != RUMOR_OK) {
        rumor_log(RUMOR_LOG_WARN, "secure mix: %s: round %" PRIu64 " not sent", err, round);
        return false;
    }
    p->mask_reserved = upto;
    return true;
}

/* At start: the rounds an earlier life of this peer may have masked are never masked again,
 * so the engine starts past them (neighbours behind it catch up, gossip.h). */
static rumor_err_t mask_floor(peer_t *p, char err[RUMOR_ERR_LEN])
{
    FILE *f = fopen(p->mask_path, "r");
    if (!f) return errno == ENOENT ? RUMOR_OK : rumor_fail(err, RUMOR_EIO, "%s: %s", p->mask_path, strerror(errno));
    unsigned long long v = 0;
    const int got = fscanf(f, "%llu", &v);
    fclose(f);
    if (got != 1) return rumor_fail(err, RUMOR_EFORMAT, "%s: not a round number", p->mask_path);
    p->mask_reserved = v; /* reserved by the earlier life: this one reserves its own from there */
    if (rumor_gossip_round(p->g) >= v) return RUMOR_OK;
    rumor_log(RUMOR_LOG_INFO, "secure mix: rounds up to %llu may have been masked before; starting past them", v - 1);
    return rumor_gossip_restore(p->g, v, rumor_gossip_weights(p->g), rumor_gossip_chunk_count(p->g), err);
}

/* --secure-mix: mask every chunk of send c for its receiver into the send's own buffer. false
 * when it cannot be (a parameter beyond the fixed-point range, a key that is not one, no
 * memory): the send is then dropped, not sent in the clear. */
static bool mask_send(peer_t *p, send_ctx_t *c, const float *x)
{
    const rumor_gossip_send_t *s = &c->s;
    const size_t chunks = rumor_chunks(s->count, s->chunk_params);
    pthread_mutex_lock(&p->pool_mu);
    if (p->n_mask_pool > 0) c->masked = p->mask_pool[--p->n_mask_pool];
    pthread_mutex_unlock(&p->pool_mu);
    if (!c->masked) c->masked = malloc(s->count * sizeof(uint32_t));
    c->masked_off = malloc((chunks + 1) * sizeof *c->masked_off);
    if (!c->masked || !c->masked_off) return false;
    char err[RUMOR_ERR_LEN];
    rumor_secmix_send_t snd;
    if (rumor_secmix_send_init(p->secmix, &s->edges, &snd, err) != RUMOR_OK) {
        rumor_log(RUMOR_LOG_WARN, "%s", err);
        return false;
    }
    bool ok = true;
    c->masked_off[0] = 0;
    for (size_t k = 0; k < chunks && ok; k++) {
        const size_t off = k * s->chunk_params, n = s->count - off < s->chunk_params ? s->count - off : s->chunk_params;
        ok = rumor_secmix_encode(&snd, off, x + off, n, s->share * s->w[k], c->masked + off * sizeof(uint32_t), err) ==
             RUMOR_OK;
        c->masked_off[k + 1] = (off + n) * sizeof(uint32_t);
    }
    rumor_secmix_send_fini(&snd);
    if (!ok) rumor_log(RUMOR_LOG_WARN, "%s: round %" PRIu64 " not sent", err, s->round);
    return ok;
}

/* The emulated network takes a send (under mu): lost (released as if sent: the network ate
 * it), or delayed until it is due. true: the caller must not send it now. */
static bool emulate(peer_t *p, send_ctx_t *c, uint64_t now)
{
    const rumor_peer_config_t *cfg = p->cfg;
    if (cfg->emu_loss > 0 && rumor_rng_uniform(&p->emu_rng) < cfg->emu_loss) {
        rumor_gossip_release(p->g, &c->s, true);
        send_ctx_free(c);
        return true;
    }
    uint64_t start = p->uplink_free > now ? p->uplink_free : now;
    if (cfg->emu_bandwidth_mbps > 0)
        start += (uint64_t)((double)c->s.count * 32.0 / (cfg->emu_bandwidth_mbps * 1e3) + 0.5);
    p->uplink_free = start;
    c->due = start + (uint64_t)(cfg->emu_latency_ms + 0.5);
    if (p->n_delayed == (int)RUMOR_ARRAY_LEN(p->delayed)) return false; /* full: send now */
    p->delayed[p->n_delayed++] = c;
    return true;
}

/* Hand send c to the node (node thread, outside mu): its bytes on the wire in *wire. */
static rumor_err_t send_now(peer_t *p, rumor_node_t *node, send_ctx_t *c, size_t *wire_out, bool *mask_failed_out)
{
    const rumor_gossip_send_t s = c->s;
    const float *params = s.params;
    if (p->cfg->attack.kind != RUMOR_ATTACK_NONE && !s.pulled && s.snap >= 0 && s.snap < 2) {
        params = rumor_poison_get(&p->poison, &p->cfg->attack, s.snap, s.round, s.params, &p->attack_rng);
    }
    const rumor_codec_t *cd = &p->cfg->codec;
    size_t wire = s.count * sizeof(float);
    rumor_err_t rc;
    bool mask_failed = false;
    if (s.masked) {
        rc = RUMOR_EINVAL;
        const rumor_node_model_ext_t ext = {.mix = s.mix};
        if (mask_reserve(p, s.round) && mask_send(p, c, params))
            rc = rumor_node_send_encoded(node, s.peer, s.layout, s.round, s.share, s.w, RUMOR_CODEC_MASKED,
                                         &ext, c->masked, c->masked_off, s.count, s.chunk_params, release_cb, c);
        else
            mask_failed = true;
    } else if (s.choco) {
        /* A delta of our public copy, or the copy whole (a keyframe). */
        const rumor_node_model_ext_t ext = {.has_copy = true, .ver = s.ver, .lin = s.lin, .base = s.base,
                                            .need = s.need};
        if (s.enc) {
            wire = s.enc_off[rumor_chunks(s.count, s.chunk_params)];
            rc = rumor_node_send_encoded(node, s.peer, s.layout, s.round, s.share, s.w, s.codec, &ext, s.enc,
                                         s.enc_off, s.count, s.chunk_params, release_cb, c);
        } else {
            rc = rumor_node_send_model_ext(node, s.peer, s.layout, s.round, s.share, s.w, s.params, s.count,
                                           s.chunk_params, &ext, release_cb, c);
        }
    } else if (cd->id != RUMOR_CODEC_F32 && !s.pulled && s.snap >= 0 && s.snap < 2 && encode_snapshot(p, &s, params)) {
        wire = p->enc_off[s.snap][rumor_chunks(s.count, s.chunk_params)];
        rc = rumor_node_send_encoded(node, s.peer, s.layout, s.round, s.share, s.w, (int)cd->id, NULL, p->enc[s.snap],
                                     p->enc_off[s.snap], s.count, s.chunk_params, release_cb, c);
    } else {
        rc = rumor_node_send_model(node, s.peer, s.layout, s.round, s.share, s.w, params, s.count,
                                   s.chunk_params, NULL, release_cb, c);
    }
    *wire_out = wire;
    *mask_failed_out = mask_failed;
    return rc;
}

/* A compressed-gossip send the node could not take yet (its previous model to that peer is
 * still leaving): it waits here, in order, rather than being lost, since a lost delta costs
 * the receiver a keyframe, and a keyframe on a slow link would keep the next ones waiting
 * too. Given up (released as not sent) after the round timeout. Node thread. */
static bool retry_waiting_for(const peer_t *p, const uint8_t peer[32])
{
    for (int i = 0; i < p->n_retry; i++)
        if (memcmp(p->retry[i]->s.peer, peer, 32) == 0) return true;
    return false;
}

/* The bookkeeping after a send attempt: counted, or released as not sent. */
static void send_done(peer_t *p, send_ctx_t *c, rumor_err_t rc, size_t wire, bool mask_failed)
{
    pthread_mutex_lock(&p->mu);
    p->mask_fails += mask_failed;
    if (rc != RUMOR_OK) {
        rumor_gossip_release(p->g, &c->s, false);
        pthread_cond_broadcast(&p->cv);
    } else {
        p->bytes_out += wire;
    }
    pthread_mutex_unlock(&p->mu);
    if (rc != RUMOR_OK) send_ctx_free(c);
}

/* Try the waiting sends again, oldest first, one per peer at a time. */
static void retry_sends(peer_t *p, rumor_node_t *node, uint64_t now)
{
    int kept = 0;
    for (int i = 0; i < p->n_retry; i++) {
        send_ctx_t *c = p->retry[i];
        bool behind = false; /* an older send to the same peer still waits */
        for (int j = 0; j < kept && !behind; j++) behind = memcmp(p->retry[j]->s.peer, c->s.peer, 32) == 0;
        if (!behind) {
            size_t wire = 0;
            bool mf = false;
            const rumor_err_t rc = send_now(p, node, c, &wire, &mf);
            if (rc != RUMOR_ECLOSED || now >= c->due) {
                send_done(p, c, rc, wire, mf);
                continue;
            }
        }
        p->retry[kept++] = c;
    }
    p->n_retry = kept;
}

/* Ask one member for its model (under mu): one not asked yet in this resync, finished ones
 * only when the trainer wants the swarm's final model, chosen by the clock so that peers
 * spread their asks. */
static void pull_ask(peer_t *p, rumor_node_t *node, uint64_t now)
{
    const int members = rumor_node_peer_count(node);
    int cand[MAX_VIEW], nc = 0;
    for (int i = 0; i < members && nc < MAX_VIEW; i++) {
        if (!rumor_node_peer_admitted(node, i)) continue;
        if (p->pull_want_done && !rumor_node_peer_done(node, i)) continue;
        const uint8_t *key = rumor_node_peer_key(node, i);
        bool asked = false;
        for (int a = 0; a < p->n_asked && !asked; a++) asked = memcmp(p->pull_asked[a], key, 32) == 0;
        if (!asked) cand[nc++] = i;
    }
    if (nc == 0 || p->n_asked == RUMOR_RESYNC_ASKS) {
        p->pull_state = PULL_NOBODY;
        pthread_cond_broadcast(&p->cv);
        return;
    }
    const int i = cand[now % (uint64_t)nc];
    memcpy(p->pull_peer, rumor_node_peer_key(node, i), 32);
    p->pull_done = rumor_node_peer_done(node, i);
    /* Refused for now (its connection is on the way): asked again at a later tick. */
    if (rumor_node_pull(node, p->pull_peer, rumor_model_layout_id(p->m)) != RUMOR_OK) return;
    memcpy(p->pull_asked[p->n_asked++], p->pull_peer, 32);
    p->pull_asked_ms = now;
    p->pull_resends = 0;
    p->pull_got = 0;
    memset(p->pull_bits, 0, (p->pull_chunks + 63) / 64 * sizeof *p->pull_bits);
    p->pull_state = PULL_ASKED;
}

static void tick_cb(void *arg, rumor_node_t *node, uint64_t now)
{
    peer_t *p = arg;
    if (p->cfg->stop && atomic_load(p->cfg->stop)) rumor_node_stop(node);
    if (p->cfg->reload && atomic_exchange(p->cfg->reload, false)) rumor_node_reload(node);
    uint8_t (*keys)[32] = p->view_keys;
    /* The gossip view: members whose hello we verified, the ones models can go to. A member
     * learnt from gossip whose hello is still on its way joins at a later tick; until then
     * peers would disagree on the graph and wait for models that cannot be sent. */
    /* A member that finished training sends no more models: nobody waits for it. */
    const int members = rumor_node_peer_count(node);
    int n = 0, admitted = 0, done = 0;
    for (int i = 0; i < members && n < MAX_VIEW; i++) {
        if (!rumor_node_peer_admitted(node, i)) continue;
        admitted++;
        if (rumor_node_peer_done(node, i)) {
            done++;
            continue;
        }
        p->view_boots[n] = rumor_node_peer_boot(node, i);
        memcpy(keys[n++], rumor_node_peer_key(node, i), 32);
    }
    pthread_mutex_lock(&p->mu);
    p->n_members = admitted;
    p->n_done = done;
    if (p->pull_state == PULL_ASKED) {
        /* The member asked left (or was found dead): no answer will come, ask another. */
        bool there = false;
        for (int i = 0; i < members && !there; i++)
            there = rumor_node_peer_admitted(node, i) && memcmp(rumor_node_peer_key(node, i), p->pull_peer, 32) == 0;
        if (!there) {
            p->pull_state = PULL_WANTED;
        } else if (p->pull_got == 0 && now - p->pull_asked_ms >= 1000 && p->pull_resends < 4) {
            /* Nothing yet: it may not have had our hello when the ask came (a pull from a key
             * without one is dropped), so ask again; it answers one pull in 2 s at most. */
            p->pull_asked_ms = now;
            p->pull_resends++;
            (void)rumor_node_pull(node, p->pull_peer, rumor_model_layout_id(p->m));
        }
    }
    if (p->pull_state == PULL_WANTED) pull_ask(p, node, now);
    pthread_mutex_unlock(&p->mu);
    send_ctx_t *batch[64];
    retry_sends(p, node, now);
    for (;;) {
        int nb = 0;
        if (p->emulate) { /* due delayed sends first, in order */
            while (nb < 64 && p->n_delayed > 0 && p->delayed[0]->due <= now) {
                batch[nb++] = p->delayed[0];
                memmove(p->delayed, p->delayed + 1, (size_t)--p->n_delayed * sizeof *p->delayed);
            }
            if (nb) goto send;
        }
        pthread_mutex_lock(&p->mu);
        rumor_gossip_set_view_boots(p->g, (const uint8_t(*)[32])keys, p->view_boots, (size_t)n);
        p->view_count = n;
        while (nb < 64) {
            send_ctx_t *c = calloc(1, sizeof *c);
            if (!c) break;
            c->p = p;
            if (!rumor_gossip_next_send(p->g, &c->s)) {
                send_ctx_free(c);
                break;
            }
            if (p->emulate && emulate(p, c, now)) continue;
            batch[nb++] = c;
        }
        pthread_mutex_unlock(&p->mu);
        if (nb == 0) break;
    send:
        /* Outside the lock: a send may release at once, and release takes the lock. */
        for (int i = 0; i < nb; i++) {
            send_ctx_t *c = batch[i];
            const bool choco = c->s.choco && !c->s.pulled;
            if (choco && retry_waiting_for(p, c->s.peer) && p->n_retry < (int)RUMOR_ARRAY_LEN(p->retry)) {
                c->due = now + p->cfg->round_timeout_ms;
                p->retry[p->n_retry++] = c; /* behind an older one to the same peer */
                continue;
            }
            size_t wire = 0;
            bool mask_failed = false;
            const rumor_err_t rc = send_now(p, node, c, &wire, &mask_failed);
            if (rc == RUMOR_ECLOSED && choco && p->n_retry < (int)RUMOR_ARRAY_LEN(p->retry)) {
                c->due = now + p->cfg->round_timeout_ms;
                p->retry[p->n_retry++] = c;
                continue;
            }
            send_done(p, c, rc, wire, mask_failed);
        }
    }
}

/* snprintf into buf at *len, never past cap. */
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...) RUMOR_PRINTF(4, 5);
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (k > 0) *len += (size_t)k < cap - *len ? (size_t)k : cap - *len - 1;
}

static size_t status_cb(void *arg, bool json, char *buf, size_t cap)
{
    peer_t *p = arg;
    rumor_gossip_stats_t st;
    char algo[32];
    rumor_algo_format(algo, sizeof algo, &p->cfg->algo);
    pthread_mutex_lock(&p->mu);
    rumor_gossip_stats(p->g, &st);
    const uint64_t out = p->bytes_out;
    const uint64_t round = rumor_gossip_round(p->g);
    const double eps = p->epsilon;
    const uint64_t mask_fails = p->mask_fails;
    pthread_mutex_unlock(&p->mu);
    size_t len = 0;
    if (json) {
        put(buf, cap, &len,
            "{\"algo\":\"%s\",\"topology\":\"%s\",\"round\":%" PRIu64 ",\"gossip_round\":%" PRIu64
            ",\"rounds\":%ld,\"w\":%.6g,\"consensus\":%.6g,\"models_in\":%" PRIu64 ",\"bytes_in\":%" PRIu64
            ",\"bytes_out\":%" PRIu64 ",\"missing\":%" PRIu64 ",\"sends\":%" PRIu64 ",\"sends_failed\":%" PRIu64
            ",\"deadline_ms\":%" PRIu64 ",\"drops\":{",
            algo, p->cfg->topology, st.round, round, p->cfg->rounds, st.w, st.consensus, st.models_in, st.bytes_in, out,
            st.missing_total, st.sends, st.sends_failed, st.deadline_ms);
        bool first = true;
        for (int d = 0; d < RUMOR_GOSSIP_DROP_COUNT; d++)
            if (st.drops[d]) {
                put(buf, cap, &len, "%s\"%s\":%" PRIu64, first ? "" : ",",
                    rumor_gossip_drop_name((rumor_gossip_drop_t)d), st.drops[d]);
                first = false;
            }
        put(buf, cap, &len, "}");
        if (p->cfg->dp.on) put(buf, cap, &len, ",\"epsilon\":%.6g,\"delta\":%g", eps, p->cfg->dp.delta);
        if (p->cfg->robust.clip)
            put(buf, cap, &len, ",\"clip_radius\":%.6g,\"chunks_clipped\":%" PRIu64 ",\"strikes\":%" PRIu64
                ",\"bans\":%" PRIu64, st.clip_radius, st.chunks_clipped, st.strikes, st.bans);
        if (p->cfg->secure_mix)
            put(buf, cap, &len, ",\"secure_mix\":{\"chunks_unmixed\":%" PRIu64 ",\"sends_unmasked\":%" PRIu64
                ",\"mask_failures\":%" PRIu64 "}", st.chunks_unmixed, st.sends_unmasked, mask_fails);
        put(buf, cap, &len, "}");
    } else {
        put(buf, cap, &len,
            "training: %s on %s, %" PRIu64 " rounds done of %ld, consensus %.4g, %" PRIu64
            " models in, %.1f MB in, %.1f MB out, %" PRIu64 " neighbours left out\n",
            algo, p->cfg->topology, st.round, p->cfg->rounds, st.consensus, st.models_in, (double)st.bytes_in / 1e6,
            (double)out / 1e6, st.missing_total);
        if (p->cfg->dp.on) put(buf, cap, &len, "privacy spent: epsilon %.4g at delta %g\n", eps, p->cfg->dp.delta);
        if (p->cfg->secure_mix)
            put(buf, cap, &len,
                "secure mixing: %" PRIu64 " chunks left unmixed (a sender missing), %" PRIu64
                " sends skipped (a receiver with one sender), %" PRIu64 " sends not maskable\n",
                st.chunks_unmixed, st.sends_unmasked, mask_fails);
        for (int d = 0; d < RUMOR_GOSSIP_DROP_COUNT; d++)
            if (st.drops[d])
                put(buf, cap, &len, "model chunks dropped (%s): %" PRIu64 "\n",
                    rumor_gossip_drop_name((rumor_gossip_drop_t)d), st.drops[d]);
    }
    return len;
}

/* ---- checkpoints ---- */

static rumor_err_t save_checkpoint(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_checkpoint_info_t info = {.input_mean = p->mean, .input_std = p->std, .seed = c->seed};
    char buf[64];
    pthread_mutex_lock(&p->mu);
    const size_t nc = rumor_gossip_chunk_count(p->g);
    float *w = malloc(nc * sizeof *w);
    if (!w) {
        pthread_mutex_unlock(&p->mu);
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    const double *gw = rumor_gossip_weights(p->g);
    for (size_t i = 0; i < nc; i++) w[i] = (float)gw[i];
    const uint64_t ground = rumor_gossip_round(p->g);
    pthread_mutex_unlock(&p->mu);
    /* theta and momentum change only in the trainer's own gossip points: no lock needed. */
    rumor_st_out_t t[3] = {{.name = "gossip.w", .ndim = 1, .shape = {nc}, .data = w}};
    size_t nt = 1;
    if (c->algo.kind == RUMOR_ALGO_DILOCO) {
        const uint64_t P = rumor_model_param_count(p->m);
        t[nt++] = (rumor_st_out_t){.name = "gossip.theta", .ndim = 1, .shape = {P}, .data = rumor_gossip_outer(p->g)};
        t[nt++] = (rumor_st_out_t){.name = "gossip.momentum", .ndim = 1, .shape = {P}, .data = rumor_gossip_momentum(p->g)};
    }
    info.tensors = t;
    info.n_tensors = nt;
    rumor_checkpoint_extra_add(&info, "train.round", "%ld", p->k);
    rumor_checkpoint_extra_add(&info, "train.gossip_round", "%" PRIu64, ground);
    rumor_algo_format(buf, sizeof buf, &c->algo);
    rumor_checkpoint_extra_add(&info, "train.algo", "%s", buf);
    rumor_checkpoint_extra_add(&info, "train.topology", "%s", c->topology);
    rumor_checkpoint_extra_add(&info, "train.batch", "%d", c->batch);
    if (p->dp) rumor_checkpoint_extra_add(&info, "train.dp_steps", "%" PRIu64, rumor_dp_steps(p->dp));
    rumor_checkpoint_extra_add(&info, "train.init_seed", "%" PRIu64, c->init_seed);
    if (c->partitioned) {
        rumor_partition_format(buf, sizeof buf, &c->partition);
        rumor_checkpoint_extra_add(&info, "train.partition", "%s", buf);
        rumor_checkpoint_extra_add(&info, "train.rank", "%d", c->rank);
        rumor_checkpoint_extra_add(&info, "train.peers", "%d", c->of);
    } else {
        rumor_checkpoint_extra_add(&info, "train.partition", "none");
    }
    rumor_err_t rc = rumor_checkpoint_save(p->ckpt_path, p->m, p->o, &info, err);
    free(w);
    return rc;
}

static rumor_err_t load_checkpoint(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_checkpoint_info_t info;
    rumor_err_t rc = rumor_checkpoint_load(p->ckpt_path, p->m, p->o, &info, err);
    if (rc != RUMOR_OK) return rc;
    long k, gr, batch;
    const char *algo = rumor_checkpoint_extra(&info, "train.algo"), *topo = rumor_checkpoint_extra(&info, "train.topology");
    if (!rumor_checkpoint_extra_long(&info, "train.round", 0, LONG_MAX, &k) ||
        !rumor_checkpoint_extra_long(&info, "train.gossip_round", 0, LONG_MAX, &gr) || !algo || !topo ||
        !rumor_checkpoint_extra_long(&info, "train.batch", 1, 65536, &batch))
        return rumor_fail(err, RUMOR_EFORMAT, "%s: not a checkpoint of rumor node (no train.round)", p->ckpt_path);
    char mine[32];
    rumor_algo_format(mine, sizeof mine, &c->algo);
    if (strcmp(mine, algo) != 0 || strcmp(c->topology, topo) != 0 || batch != c->batch || info.seed != c->seed)
        return rumor_fail(err, RUMOR_EINVAL,
                          "%s: made with --algo %s --topology %s --batch %ld --seed %" PRIu64
                          "; resume with the same settings",
                          p->ckpt_path, algo, topo, batch, info.seed);
    rumor_st_file_t *f = rumor_st_open(p->ckpt_path, err);
    if (!f) return RUMOR_EFORMAT;
    const size_t nc = rumor_gossip_chunk_count(p->g), P = rumor_model_param_count(p->m);
    const rumor_st_tensor_t *tw = rumor_st_find(f, "gossip.w");
    double *w = malloc(nc * sizeof *w);
    if (!tw || strcmp(tw->dtype, "F32") != 0 || tw->ndim != 1 || tw->shape[0] != nc || !w) {
        rc = rumor_fail(err, RUMOR_ELAYOUT, "%s: gossip.w missing or not %zu floats", p->ckpt_path, nc);
        goto out;
    }
    for (size_t i = 0; i < nc; i++) {
        float v;
        memcpy(&v, (const uint8_t *)tw->data + 4 * i, 4);
        w[i] = v;
    }
    if ((rc = rumor_gossip_restore(p->g, (uint64_t)gr, w, nc, err)) != RUMOR_OK) goto out;
    if (p->dp) {
        /* The privacy already spent is spent: a resumed peer counts on from it. */
        long steps;
        if (!rumor_checkpoint_extra_long(&info, "train.dp_steps", 0, LONG_MAX, &steps)) {
            rc = rumor_fail(err, RUMOR_EINVAL, "%s: written without --dp; its privacy spent is unknown", p->ckpt_path);
            goto out;
        }
        rumor_dp_restore(p->dp, (uint64_t)steps);
        p->epsilon = rumor_dp_epsilon(p->dp);
    }
    if (c->algo.kind == RUMOR_ALGO_DILOCO) {
        const char *names[2] = {"gossip.theta", "gossip.momentum"};
        float *dst[2] = {rumor_gossip_outer(p->g), rumor_gossip_momentum(p->g)};
        for (int i = 0; i < 2; i++) {
            const rumor_st_tensor_t *t = rumor_st_find(f, names[i]);
            if (!t || strcmp(t->dtype, "F32") != 0 || t->ndim != 1 || t->shape[0] != P) {
                rc = rumor_fail(err, RUMOR_ELAYOUT, "%s: %s missing or not %zu floats", p->ckpt_path, names[i], P);
                goto out;
            }
            memcpy(dst[i], t->data, P * sizeof(float));
        }
    }
    p->k = k;
out:
    free(w);
    rumor_st_destroy(&f);
    return rc;
}

/* ---- the trainer ---- */

static rumor_err_t evaluate(peer_t *p, char err[RUMOR_ERR_LEN])
{
    return rumor_train_evaluate(p->m, &p->test, p->mean, p->std, &p->test_loss, &p->test_acc, err);
}

/* Wait on p->cv (p->mu held) for a wake-up or at most ms milliseconds. */
static void wait_cv(peer_t *p, uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&p->cv, &p->mu, &ts);
}

/* One gossip point: returns false when stopped while waiting. */
static bool gossip_point(peer_t *p, float *x)
{
    bool done = false;
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stop)) {
        const uint64_t now = rumor_now_ms();
        if (rumor_gossip_step(p->g, x, now) == RUMOR_GOSSIP_DONE) {
            done = true;
            break;
        }
        uint64_t until = rumor_gossip_deadline(p->g);
        if (until > now + 100) until = now + 100; /* look at the stop flag now and then */
        wait_cv(p, until > now ? until - now : 1);
    }
    pthread_mutex_unlock(&p->mu);
    rumor_node_wake(p->node); /* the new snapshot's sends */
    return done;
}

/* ---- parameters on a device ---- */

static rumor_err_t device_setup(peer_t *p, char err[RUMOR_ERR_LEN])
{
    rumor_backend_t *be = p->be;
    if (be->ops->host_memory) return RUMOR_OK;
    const size_t P = rumor_model_param_count(p->m);
    p->hx = be->ops->host_alloc(be, P * sizeof(float));
    if (!p->hx) return rumor_fail(err, RUMOR_ENOMEM, "out of pinned host memory for the parameters");
    be->ops->download(be, p->hx, rumor_model_params(p->m), P * sizeof(float));
    return be->ops->sync(be, err);
}

static void device_fini(peer_t *p)
{
    if (!p->be) return;
    if (p->hx) p->be->ops->host_free(p->be, p->hx);
}

/* Put the host mirror's parameters back on the device. */
static rumor_err_t device_push(peer_t *p, char err[RUMOR_ERR_LEN])
{
    rumor_backend_t *be = p->be;
    be->ops->upload(be, rumor_model_params(p->m), p->hx, rumor_model_param_count(p->m) * sizeof(float));
    return be->ops->sync(be, err);
}

/* A gossip point on any backend. With parameters on a device, they go to the mirror on the
 * copy stream once the last step has run, the engine mixes the mirror, and the result goes
 * back. *done as gossip_point returns. */
static rumor_err_t gossip_point_any(peer_t *p, float *x, bool *done, char err[RUMOR_ERR_LEN])
{
    if (!p->hx) {
        *done = gossip_point(p, x);
        return RUMOR_OK;
    }
    rumor_backend_t *be = p->be;
    be->ops->download_async(be, p->hx, x, rumor_model_param_count(p->m) * sizeof(float));
    be->ops->wait_copies(be);
    rumor_err_t rc = be->ops->sync(be, err);
    if (rc != RUMOR_OK) return rc;
    *done = gossip_point(p, p->hx);
    return *done ? device_push(p, err) : RUMOR_OK;
}

/* Ask one more member for its model (see pull_ask); true when a whole answer whose hash
 * matches is in pull_buf, with its round and whether that member had finished. *nobody: no
 * member is left to ask. */
static bool ask_one(peer_t *p, bool want_done, uint64_t *round, uint64_t *done, bool *nobody)
{
    pthread_mutex_lock(&p->mu);
    p->pull_want_done = want_done;
    p->pull_state = PULL_WANTED;
    pthread_mutex_unlock(&p->mu);
    rumor_node_wake(p->node);
    const uint64_t until = rumor_now_ms() + (p->cfg->round_timeout_ms > 5000 ? p->cfg->round_timeout_ms : 5000);
    pthread_mutex_lock(&p->mu);
    while (p->pull_state != PULL_DONE && p->pull_state != PULL_NOBODY && !atomic_load(&p->stop) && rumor_now_ms() < until)
        wait_cv(p, 50);
    const bool ok = p->pull_state == PULL_DONE && p->pull_got == p->pull_chunks && p->pull_ok;
    if (p->pull_state == PULL_DONE && !p->pull_ok)
        rumor_log(RUMOR_LOG_WARN, "a member's model did not match its hash: not taken");
    *nobody = p->pull_state == PULL_NOBODY;
    *round = p->pull_round;
    *done = p->pull_done;
    p->pull_state = PULL_NONE; /* late chunks are ignored from now on */
    pthread_mutex_unlock(&p->mu);
    return ok;
}

typedef enum {
    RESYNC_JOIN,     /* a fresh peer: take the swarm's model if it is running */
    RESYNC_BEHIND,   /* a resumed peer: take the swarm's model if it has moved on */
    RESYNC_FINISHED, /* every member finished: take the swarm's final model and end */
} resync_why_t;

/* Fall into step with the swarm: ask up to RUMOR_RESYNC_ASKS members for their models and take one
 * only when two of them confirm each other (their mean, at the lower of their rounds): one
 * member alone can never hand this peer a model. Models are checked whole (hash), finite and
 * of a plausible scale against ours. Otherwise this peer keeps its own. *took: it did. */
static rumor_err_t resync(peer_t *p, float *x, resync_why_t why, bool *took, int *answered, char err[RUMOR_ERR_LEN])
{
    const size_t P = rumor_model_param_count(p->m);
    *took = false;
    *answered = 0;
    pthread_mutex_lock(&p->mu);
    if (!p->pull_buf) {
        p->pull_chunks = rumor_chunks(P, RUMOR_GOSSIP_CHUNK_DEFAULT);
        p->pull_buf = malloc(P * sizeof *p->pull_buf);
        p->pull_bits = calloc((p->pull_chunks + 63) / 64, sizeof *p->pull_bits);
    }
    p->n_asked = 0;
    const uint64_t own = rumor_gossip_round(p->g);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < RUMOR_RESYNC_ASKS; i++)
        if (!p->ans[i]) p->ans[i] = malloc(P * sizeof *p->ans[i]);
    if (!p->pull_buf || !p->pull_bits || !p->ans[RUMOR_RESYNC_ASKS - 1])
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory for pulled models");
    p->last_resync = rumor_now();
    uint64_t rounds[RUMOR_RESYNC_ASKS];
    int n = 0, a = -1, b = -1, answers = 0;
    for (int ask = 0; ask < RUMOR_RESYNC_ASKS && a < 0 && !atomic_load(&p->stop); ask++) {
        uint64_t r, done;
        bool nobody;
        if (!ask_one(p, why == RESYNC_FINISHED, &r, &done, &nobody)) {
            if (nobody) break;
            continue;
        }
        answers++;
        pthread_mutex_lock(&p->mu);
        const bool sane = rumor_gossip_plausible(p->g, p->pull_buf);
        pthread_mutex_unlock(&p->mu);
        if (!sane) {
            rumor_log(RUMOR_LOG_WARN, "a member's model is not finite or out of all scale with ours: not taken");
            continue;
        }
        if (why == RESYNC_JOIN && r < LATE_JOIN_ROUNDS) break; /* the swarm is starting together */
        if (why == RESYNC_FINISHED ? !done : why == RESYNC_JOIN ? false : r < own + RUMOR_RESYNC_AHEAD) continue;
        memcpy(p->ans[n], p->pull_buf, P * sizeof *x);
        rounds[n] = r;
        for (int k = 0; k < n && a < 0; k++)
            if (rumor_models_agree(p->ans[k], p->ans[n], P, RUMOR_MODELS_AGREE)) a = k, b = n;
        n++;
    }
    *answered = answers;
    if (a < 0) {
        if (why == RESYNC_JOIN && answers > 0 && n > 0)
            rumor_log(RUMOR_LOG_INFO, "no two members' models confirmed each other: starting from our own");
        else if (why == RESYNC_JOIN && answers == 0)
            rumor_log(RUMOR_LOG_INFO, "no member sent its model in time: starting from our own");
        else if (why == RESYNC_BEHIND && n > 0)
            rumor_log(RUMOR_LOG_INFO, "a member is ahead of us but no second one confirmed its model: keeping our own");
        return RUMOR_OK;
    }
    for (size_t i = 0; i < P; i++) x[i] = 0.5f * (p->ans[a][i] + p->ans[b][i]);
    const uint64_t r = rounds[a] < rounds[b] ? rounds[a] : rounds[b];
    pthread_mutex_lock(&p->mu);
    rumor_gossip_adopt(p->g, x, why == RESYNC_FINISHED ? own : r);
    pthread_mutex_unlock(&p->mu);
    *took = true;
    /* Into step with the swarm: its round too, so this peer ends with it (and its schedule is
     * the swarm's). Two confirming members vouch for the round as for the model. */
    if (why != RESYNC_FINISHED && (long)r > p->k) p->k = (long)r < p->cfg->rounds ? (long)r : p->cfg->rounds - 1;
    if (why == RESYNC_FINISHED)
        rumor_log(RUMOR_LOG_INFO, "the swarm finished (round %" PRIu64 "): took the mean of two members' final models, "
                  "which confirm each other (hashes verified)", r);
    else
        rumor_log(RUMOR_LOG_INFO, "%s the swarm at round %" PRIu64 ": took the mean of two members' models, which "
                  "confirm each other (hashes verified)", why == RESYNC_JOIN ? "joined" : "fell back into step with", r);
    return RUMOR_OK;
}

static void metrics_write(peer_t *p, const rumor_metrics_line_t *l)
{
    char line[512];
    fwrite(line, 1, rumor_metrics_line(line, sizeof line, l), p->metrics);
    fflush(p->metrics);
}

/* A metrics line about the model alone, evaluated now: the one it starts from, or one it took
 * from the swarm (flag "resync", "swarm_final"). */
static rumor_err_t model_line(peer_t *p, const char *flag, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = evaluate(p, err);
    if (rc != RUMOR_OK) return rc;
    const rumor_metrics_line_t l = {.t = rumor_now() - p->t0, .t_decimals = 3, .round = p->k,
                                    .step = rumor_optim_steps(p->o), .evaluated = true, .test_loss = p->test_loss,
                                    .test_acc = p->test_acc, .flag = flag};
    metrics_write(p, &l);
    return RUMOR_OK;
}

/* Whether the swarm is over for this peer: every member finished (and there is one), or, out
 * of secure mixing, two did. Two members vouch for the end as they vouch for a pulled model;
 * a peer behind them would otherwise train on, with fewer neighbours each round and a
 * learning rate of its own, into a model of its own. */
static bool swarm_done(peer_t *p)
{
    pthread_mutex_lock(&p->mu);
    const bool over = p->n_members > 0 && (p->n_done == p->n_members || (!p->cfg->secure_mix && p->n_done >= 2));
    pthread_mutex_unlock(&p->mu);
    return over;
}

/* The swarm finished without us (we were behind, or down): take its final model when two
 * members confirm it, else keep ours; either way this peer ends here, as finished
 * (p->swarm_over). Only when no finished member answers at all (they have left) does it go
 * on training alone. */
static rumor_err_t finish_with_swarm(peer_t *p, float *x, char err[RUMOR_ERR_LEN])
{
    bool took = false;
    rumor_err_t rc;
    if (p->cfg->secure_mix) {
        rumor_log(RUMOR_LOG_INFO, "every member finished; under secure mixing no model is lent in the clear: this "
                  "peer ends with its own (round %ld)", p->k);
    } else {
        int answered;
        if ((rc = resync(p, p->hx ? p->hx : x, RESYNC_FINISHED, &took, &answered, err)) != RUMOR_OK) return rc;
        if (!took && answered == 0) {
            rumor_log(RUMOR_LOG_INFO, "every member finished and none answered: training on alone");
            return RUMOR_OK;
        }
        if (!took)
            rumor_log(RUMOR_LOG_INFO, "every member finished, and no two of their final models confirmed each other: "
                      "this peer ends with its own (round %ld)", p->k);
        if (took && p->hx && (rc = device_push(p, err)) != RUMOR_OK) return rc;
    }
    p->swarm_over = true;
    if (!took) return RUMOR_OK;
    p->k = p->cfg->rounds;
    return model_line(p, "swarm_final", err);
}

static rumor_err_t train_loop(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_err_t rc = RUMOR_OK;
    float *x = rumor_model_params(p->m);
    const long H = c->algo.local_steps;
    double last_ckpt = rumor_now();
    long last_ckpt_k = p->k;

    /* Wait for the swarm, so that round 0 is a round with neighbours; a resumed peer only for
     * two members (or one, in a swarm of two) to ask where the swarm is. */
    bool said = false;
    const double wait_from = rumor_now();
    const int need = c->resume ? (c->min_peers - 1 < 2 ? c->min_peers - 1 : 2) : c->min_peers - 1;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        const int view = p->n_members;
        pthread_mutex_unlock(&p->mu);
        if (view >= need || atomic_load(&p->stop)) break;
        if (!said && rumor_now() - wait_from > 2.0) {
            rumor_log(RUMOR_LOG_INFO, "waiting for %d peers before training (%d in view)", c->min_peers - 1, view);
            said = true;
        }
        /* Not forever: peers that finished or never came must not hold the others. */
        const double limit = c->node.join_timeout_ms ? (double)c->node.join_timeout_ms / 1000.0 : 30.0;
        if (rumor_now() - wait_from > limit) {
            rumor_log(RUMOR_LOG_WARN, "training with %d peers in view after %.0f s (--min-peers %d)", view, limit,
                      c->min_peers);
            break;
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    /* A fresh peer joining a running swarm, or a resumed one: the swarm's model, if two members
     * confirm it (secure mixing never lends a model in the clear: such a peer keeps its own
     * and catches up through gossip). */
    const bool fresh = p->k == 0 && !c->resume;
    const long k0 = p->k;
    if (!atomic_load(&p->stop) && !c->secure_mix && ((fresh && c->late_join) || c->resume) && !swarm_done(p)) {
        bool took;
        int answered;
        if ((rc = resync(p, p->hx ? p->hx : x, fresh ? RESYNC_JOIN : RESYNC_BEHIND, &took, &answered, err)) != RUMOR_OK)
            return rc;
        if (took && p->hx && (rc = device_push(p, err)) != RUMOR_OK) return rc;
    }
    /* The model it starts from: the initial one, or the swarm's it fell into step with. */
    if ((p->k == 0 || p->k != k0) && !atomic_load(&p->stop) &&
        (rc = model_line(p, p->k != k0 ? "resync" : NULL, err)) != RUMOR_OK)
        return rc;
    while (p->k < c->rounds && !atomic_load(&p->stop)) {
        if (swarm_done(p) && rumor_now() - p->last_resync >= RESYNC_EVERY) {
            if ((rc = finish_with_swarm(p, x, err)) != RUMOR_OK) return rc;
            if (p->swarm_over) break;
        }
        pthread_mutex_lock(&p->mu);
        const long kr = rumor_gossip_schedule_round(p->g, p->k);
        pthread_mutex_unlock(&p->mu);
        const double work0 = rumor_now();
        rumor_trainer_stats_t ts;
        if ((rc = rumor_trainer_steps(p->tr, H, kr * H, &ts, err)) != RUMOR_OK) return rc;
        p->budget_spent = ts.budget_spent;
        if (c->slowdown > 1.0) { /* a straggler: make the local phase last slowdown times as long */
            const double extra = (rumor_now() - work0) * (c->slowdown - 1.0);
            struct timespec d = {(time_t)extra, (long)((extra - (double)(time_t)extra) * 1e9)};
            nanosleep(&d, NULL);
        }
        if (p->budget_spent) {
            if (rumor_dp_steps(p->dp) == 0)
                rumor_log(RUMOR_LOG_WARN, "--dp-budget %g is below what one private step spends at noise %g: raise "
                          "the budget or the noise (rumor privacy computes either)", c->dp.budget, c->dp.noise);
            else
                rumor_log(RUMOR_LOG_INFO, "privacy budget spent: epsilon %.4g after %" PRIu64 " private steps (budget "
                          "%g); this peer stops training", rumor_dp_epsilon(p->dp), rumor_dp_steps(p->dp),
                          c->dp.budget);
            break;
        }
        bool done = false;
        if ((rc = gossip_point_any(p, x, &done, err)) != RUMOR_OK) return rc;
        if (!done) break;
        p->k++;
        rumor_gossip_stats_t st;
        pthread_mutex_lock(&p->mu);
        rumor_gossip_stats(p->g, &st);
        const uint64_t out = p->bytes_out;
        const int view = p->view_count;
        pthread_mutex_unlock(&p->mu);
        const bool eval = p->k == c->rounds || (c->eval_every > 0 && p->k % c->eval_every == 0);
        if (eval && (rc = evaluate(p, err)) != RUMOR_OK) return rc;
        rumor_metrics_line_t ml = {.t = rumor_now() - p->t0, .t_decimals = 3, .round = p->k,
                                   .step = rumor_optim_steps(p->o), .trained = true,
                                   .loss = ts.loss_sum / (double)(ts.samples ? ts.samples : 1), .lr = ts.lr,
                                   .consensus = st.consensus, .w = st.w, .peers = view + 1,
                                   .neighbours = st.last_peers, .missing = st.last_missing, .bytes_out = out,
                                   .bytes_in = st.bytes_in, .evaluated = eval, .test_loss = p->test_loss,
                                   .test_acc = p->test_acc, .private = p->dp != NULL, .secure_mix = c->secure_mix,
                                   .unmixed = st.chunks_unmixed,
                                   .implausible = st.drops[RUMOR_GOSSIP_DROP_IMPLAUSIBLE]};
        if (p->dp) {
            ml.epsilon = rumor_dp_epsilon(p->dp);
            pthread_mutex_lock(&p->mu);
            p->epsilon = ml.epsilon;
            pthread_mutex_unlock(&p->mu);
        }
        metrics_write(p, &ml);
        /* Every N rounds when asked; otherwise once a minute, so that a killed peer loses at
         * most a minute of work whatever its round time. */
        const bool due = c->checkpoint_every > 0 ? p->k - last_ckpt_k >= c->checkpoint_every
                                                 : rumor_now() - last_ckpt >= 60.0;
        if (due && p->k < c->rounds) {
            if ((rc = save_checkpoint(p, err)) != RUMOR_OK) return rc;
            last_ckpt = rumor_now();
            last_ckpt_k = p->k;
        }
    }
    p->interrupted = p->k < c->rounds && !p->budget_spent && !p->swarm_over;
    if ((rc = save_checkpoint(p, err)) != RUMOR_OK) return rc;
    if (!p->interrupted) {
        rumor_checkpoint_info_t info = {.input_mean = p->mean, .input_std = p->std, .seed = c->seed};
        if ((rc = rumor_checkpoint_save(p->model_path, p->m, NULL, &info, err)) != RUMOR_OK) return rc;
    }
    return RUMOR_OK;
}

/* Training is over: say so to every member, and stay --linger seconds (or until stopped) to
 * answer late peers' pulls with the final model. */
static void linger(peer_t *p)
{
    const float *x = p->hx ? p->hx : rumor_model_params(p->m);
    const size_t P = rumor_model_param_count(p->m);
    char err[RUMOR_ERR_LEN];
    if (p->hx) { /* the mirror is behind by the steps since the last gossip point, if any */
        p->be->ops->download(p->be, p->hx, rumor_model_params(p->m), P * sizeof(float));
        if (p->be->ops->sync(p->be, err) != RUMOR_OK) {
            rumor_log(RUMOR_LOG_WARN, "%s: not lingering", err);
            return;
        }
    }
    uint8_t h[RUMOR_HASH_LEN];
    rumor_hash(h, x, P * sizeof *x);
    pthread_mutex_lock(&p->mu);
    p->final_x = x;
    p->final_round = rumor_gossip_round(p->g);
    memcpy(p->final_hash, h, sizeof h);
    p->finished = true;
    const uint64_t round = p->final_round;
    pthread_mutex_unlock(&p->mu);
    rumor_node_set_done(p->node, round ? round : 1);
    if (p->cfg->linger_ms == 0) return;
    rumor_log(RUMOR_LOG_INFO, "training done; staying %.0f s to answer late peers with the final model (--linger)",
              (double)p->cfg->linger_ms / 1000.0);
    const uint64_t until = rumor_now_ms() + p->cfg->linger_ms;
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stop) && rumor_now_ms() < until) wait_cv(p, 100);
    pthread_mutex_unlock(&p->mu);
}

static void *trainer_main(void *arg)
{
    peer_t *p = arg;
    p->trc = train_loop(p, p->terr);
    if (p->trc == RUMOR_OK && !p->interrupted && !p->swarm_over && !atomic_load(&p->stop)) linger(p);
    atomic_store(&p->trainer_done, true);
    rumor_node_stop(p->node);
    return NULL;
}

/* ---- setup ---- */

/* The data (this peer's shard, or all of its folder), the backend, model and optimizer
 * (initial parameters from --init-seed), and the topology. */
static rumor_err_t setup_model(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_err_t rc;
    if ((rc = rumor_data_load_dir(&p->train, &p->test, c->data_dir, err)) != RUMOR_OK) return rc;
    rumor_data_stats(&p->train, &p->mean, &p->std);
    if (c->limit && c->limit < p->train.count) p->train.count = c->limit;
    p->n_own = p->train.count;
    if (c->partitioned) {
        if ((rc = rumor_partition_indices(&p->own, &p->n_own, &c->partition, p->train.labels, p->train.count, c->seed,
                                          c->rank, c->of, err)) != RUMOR_OK)
            return rc;
        if (p->n_own == 0)
            return rumor_fail(err, RUMOR_EINVAL, "peer %d of %d owns no samples under this partition", c->rank, c->of);
    }
    p->be = c->backend_ops ? rumor_backend_open(c->backend_ops, c->threads, err)
                           : rumor_backend_new(c->device, c->threads, err);
    if (!p->be) return rumor_last_error();
    const rumor_model_input_t in = {1, (int)p->train.rows, (int)p->train.cols, RUMOR_DATA_CLASSES};
    const int max_batch = c->batch > EVAL_BATCH ? c->batch : EVAL_BATCH;
    if (!(p->m = rumor_model_new(&c->spec, in, p->be, max_batch, err)) ||
        !(p->o = rumor_optim_new(&c->opt, p->be, rumor_model_param_count(p->m), err)))
        return rumor_last_error();
    if ((rc = rumor_model_init(p->m, c->init_seed)) != RUMOR_OK) return rc;
    if (!(p->topo = rumor_topology_new(c->topology, c->seed, err))) return rumor_last_error();
    return RUMOR_OK;
}

/* The send side's buffers: codec encodings of each snapshot, a decoded chunk, the attack's
 * poisoned copies; and the engine's configuration for them into gc. */
static rumor_err_t setup_sending(peer_t *p, rumor_gossip_config_t *gc, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    const size_t P = rumor_model_param_count(p->m);
    *gc = (rumor_gossip_config_t){.algo = c->algo, .params = P, .layout = rumor_model_layout_id(p->m),
                                  .round_timeout_ms = c->round_timeout_ms, .robust = c->robust,
                                  .chunk_params = rumor_codec_chunk_params(&c->codec), .secure_mix = c->secure_mix};
    if (c->codec.id == RUMOR_CODEC_TOPK) {
        /* Top-k travels as compressed differences of a public copy (CHOCO-SGD), whose lineage
         * is new at every start. */
        gc->choco = c->codec;
        gc->choco_gamma = c->consensus_step;
        gc->lineage = rumor_random_u64();
        gc->choco_resumed = c->resume;
    } else if (c->codec.id != RUMOR_CODEC_F32) {
        const size_t cp = gc->chunk_params ? gc->chunk_params : RUMOR_GOSSIP_CHUNK_DEFAULT;
        const size_t chunks = rumor_chunks(P, cp);
        for (int k = 0; k < 2; k++) {
            p->enc[k] = malloc(chunks * rumor_codec_encoded_len(&c->codec, cp));
            p->enc_off[k] = malloc((chunks + 1) * sizeof *p->enc_off[k]);
            if (!p->enc[k] || !p->enc_off[k]) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        }
    }
    /* Any neighbour's codec decodes here: a chunk of at most our chunk size. */
    if (!(p->dec = malloc(RUMOR_GOSSIP_CHUNK_DEFAULT * sizeof *p->dec)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    if (c->attack.kind != RUMOR_ATTACK_NONE) {
        rumor_err_t rc = rumor_poison_init(&p->poison, P);
        if (rc != RUMOR_OK) return rumor_fail(err, rc, "out of memory");
        rumor_rng_init2(&p->attack_rng, c->seed, 0xa77ac, (uint64_t)c->rank);
    }
    return RUMOR_OK;
}

/* The node (whose identity is the engine's "self"), secure mixing's keys, the engine (from
 * the initial parameters, or the checkpoint's), DP-SGD and the trainer. */
static rumor_err_t setup_node(peer_t *p, rumor_gossip_config_t *gc, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_err_t rc;
    if (!(p->node = rumor_node_new(&c->node, err))) return rumor_last_error();
    rumor_addr_t self;
    if ((rc = rumor_addr_parse(&self, rumor_node_address(p->node), err)) != RUMOR_OK) return rc;
    memcpy(gc->self, self.key, 32);
    gc->boot = rumor_node_boot(p->node);
    if (c->secure_mix &&
        !(p->secmix = rumor_secmix_new(rumor_node_secret_key(p->node), rumor_node_boot(p->node), gc->layout, err)))
        return rumor_last_error();
    if (c->listening) c->listening(rumor_node_address(p->node));
    if (c->resume && (rc = rumor_checkpoint_load(p->ckpt_path, p->m, NULL, NULL, err)) != RUMOR_OK) return rc;
    if ((rc = device_setup(p, err)) != RUMOR_OK) return rc;
    if (!(p->g = rumor_gossip_new(gc, p->topo, p->hx ? p->hx : rumor_model_params(p->m), err)))
        return rumor_last_error();
    if (c->dp.on) {
        /* A real node's batches and noise are secret: from libsodium, never from --seed, so
         * neither a neighbour who knows the settings nor this node's own restart redraws them. */
        rumor_noise_t *ns = rumor_noise_new_secret(err);
        if (!ns || !(p->dp = rumor_dp_new(&c->dp, p->m, p->n_own, c->batch, &ns, err))) return rumor_last_error();
    }
    const rumor_trainer_config_t tc = {.data = &p->train, .own = p->own, .n = p->n_own, .mean = p->mean,
                                       .std = p->std, .batch = c->batch, .seed = c->seed, .sched = c->sched,
                                       .lr = c->opt.lr, .total_steps = c->rounds * c->algo.local_steps, .dp = p->dp};
    return (p->tr = rumor_trainer_new(&tc, p->m, p->o, err)) ? RUMOR_OK : rumor_last_error();
}

/* A resumed run's state, secure mixing's round floor, the metrics file (a resumed one cut back
 * to the checkpoint's round) and command.txt. */
static rumor_err_t setup_files(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_err_t rc;
    if (c->resume && (rc = load_checkpoint(p, err)) != RUMOR_OK) return rc;
    if (c->secure_mix) {
        snprintf(p->mask_path, sizeof p->mask_path, "%s/secure-mix.round", c->run_dir);
        if ((rc = mask_floor(p, err)) != RUMOR_OK) return rc;
    }
    if (c->resume && p->k >= c->rounds)
        return rumor_fail(err, RUMOR_EINVAL, "%s: already %ld rounds in; give a larger --rounds to go on", p->ckpt_path,
                          p->k);
    char mpath[1100];
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", c->run_dir);
    if (c->resume && (rc = rumor_trim_lines(mpath, "round", (uint64_t)p->k, err)) != RUMOR_OK) return rc;
    if (!(p->metrics = rumor_fopen_private(mpath, c->resume)))
        return rumor_fail(err, RUMOR_EIO, "%s: %s", mpath, strerror(errno));
    if (c->command_line) {
        char cpath[1100];
        snprintf(cpath, sizeof cpath, "%s/command.txt", c->run_dir);
        FILE *f = fopen(cpath, "w");
        if (f) {
            fprintf(f, "%s\n", c->command_line);
            fclose(f);
        }
    }
    return RUMOR_OK;
}

/* Everything setup made, in the order that frees nothing still in use. */
static void teardown(peer_t *p, bool mu_init)
{
    /* Sends the emulated network still held never left. */
    for (int i = 0; i < p->n_delayed; i++) {
        rumor_gossip_release(p->g, &p->delayed[i]->s, true);
        free(p->delayed[i]);
    }
    for (int i = 0; i < p->n_retry; i++) {
        rumor_gossip_release(p->g, &p->retry[i]->s, false);
        send_ctx_free(p->retry[i]);
    }
    /* The node first: closing its sockets releases every snapshot the engine lent. */
    rumor_secmix_destroy(&p->secmix); /* it borrows the node's key */
    rumor_node_destroy(&p->node);
    rumor_gossip_destroy(&p->g);
    if (mu_init) {
        pthread_mutex_destroy(&p->mu);
        pthread_mutex_destroy(&p->pool_mu);
        pthread_cond_destroy(&p->cv);
    }
    for (int i = 0; i < p->n_mask_pool; i++) free(p->mask_pool[i]);
    if (p->metrics) fclose(p->metrics);
    rumor_topology_destroy(&p->topo);
    rumor_trainer_destroy(&p->tr); /* its buffers are the backend's, as the others' below */
    rumor_dp_destroy(&p->dp);
    rumor_optim_destroy(&p->o);
    rumor_model_destroy(&p->m);
    device_fini(p);
    rumor_backend_destroy(&p->be);
    free(p->own);
    free(p->pull_buf);
    free(p->pull_bits);
    for (int i = 0; i < RUMOR_RESYNC_ASKS; i++) free(p->ans[i]);
    rumor_poison_fini(&p->poison);
    for (int k = 0; k < 2; k++) {
        free(p->enc[k]);
        free(p->enc_off[k]);
    }
    free(p->dec);
    rumor_dataset_fini(&p->train);
    rumor_dataset_fini(&p->test);
}

rumor_err_t rumor_peer_run(const rumor_peer_config_t *c, rumor_peer_result_t *res, char err[RUMOR_ERR_LEN])
{
    peer_t p = {.cfg = c};
    rumor_err_t rc = RUMOR_OK;
    bool mu_init = false;
    memset(res, 0, sizeof *res);
    res->test_acc = res->test_loss = NAN;
    p.test_acc = p.test_loss = NAN;
    if (c->rounds < 1 || c->rounds > 100000000)
        return rumor_fail(err, RUMOR_EINVAL, "--rounds %ld: expected 1..100000000", c->rounds);
    if (c->batch < 1 || c->batch > 65536) return rumor_fail(err, RUMOR_EINVAL, "--batch %d: expected 1..65536", c->batch);
    if ((rc = rumor_optim_config_check(&c->opt, err)) != RUMOR_OK) return rc;
    if ((rc = rumor_make_dirs(c->run_dir, 0755, err)) != RUMOR_OK) return rc;
    snprintf(p.ckpt_path, sizeof p.ckpt_path, "%s/checkpoint.safetensors", c->run_dir);
    snprintf(p.model_path, sizeof p.model_path, "%s/model.safetensors", c->run_dir);
    struct stat sb;
    if (!c->resume && stat(p.ckpt_path, &sb) == 0)
        return rumor_fail(err, RUMOR_EINVAL, "%s exists: continue that run with --resume, or use another --run-dir",
                          p.ckpt_path);
    if (c->resume && stat(p.ckpt_path, &sb) != 0)
        return rumor_fail(err, RUMOR_EINVAL, "--resume: %s: %s", p.ckpt_path, strerror(errno));
    rumor_gossip_config_t gc;
    if ((rc = setup_model(&p, err)) != RUMOR_OK || (rc = setup_sending(&p, &gc, err)) != RUMOR_OK ||
        (rc = setup_node(&p, &gc, err)) != RUMOR_OK || (rc = setup_files(&p, err)) != RUMOR_OK)
        goto out;
    pthread_mutex_init(&p.mu, NULL);
    pthread_mutex_init(&p.pool_mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    mu_init = true;
    rumor_node_on_chunk(p.node, chunk_cb, &p);
    rumor_node_on_tick(p.node, tick_cb, &p);
    rumor_node_on_status(p.node, status_cb, &p);
    rumor_node_on_pull(p.node, pull_cb, &p);
    p.emulate = c->emu_latency_ms > 0 || c->emu_bandwidth_mbps > 0 || c->emu_loss > 0;
    if (p.emulate) {
        rumor_rng_init2(&p.emu_rng, c->seed, 0xe3a1, (uint64_t)c->rank);
        rumor_node_set_tick_ms(p.node, 1);
    }
    p.t0 = rumor_now();
    pthread_t th;
    if (pthread_create(&th, NULL, trainer_main, &p) != 0) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "cannot start the trainer thread");
        goto out;
    }
    char nerr[RUMOR_ERR_LEN];
    rumor_err_t nrc = rumor_node_run(p.node, nerr);
    atomic_store(&p.stop, true);
    pthread_mutex_lock(&p.mu);
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    pthread_join(th, NULL);
    if (p.trc != RUMOR_OK) {
        rc = p.trc;
        snprintf(err, RUMOR_ERR_LEN, "%s", p.terr);
    } else if (nrc != RUMOR_OK) {
        rc = nrc;
        snprintf(err, RUMOR_ERR_LEN, "%s", nerr);
    }
    res->rounds = p.k;
    res->test_acc = p.test_acc;
    res->test_loss = p.test_loss;
    res->interrupted = p.interrupted;
out:
    teardown(&p, mu_init);
    return rc;
}
