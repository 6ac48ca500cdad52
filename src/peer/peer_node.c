/* peer_node.c - a training peer's side in the node's thread (peer_impl.h): chunks in, sends
 * out (codec, secure mixing's masks, the emulated network), pulls, the tick, status. */
#include "peer_impl.h"

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

void peer_send_ctx_free(send_ctx_t *c)
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
    peer_send_ctx_free(c);
}

/* A chunk of the model we pulled (under mu). Anything else carrying a hash is ignored: only
 * the peer asked, only the geometry of our model, one hash and round for all chunks. */
static void pull_chunk(peer_t *p, const uint8_t peer[32], const rumor_msg_model_t *ch)
{
    const void *payload = ch->payload;
    const size_t len = ch->payload_len;
    const size_t P = p->P, cp = RUMOR_GOSSIP_CHUNK_DEFAULT;
    if (p->pull_state != PULL_ASKED || memcmp(peer, p->pull_peer, 32) != 0 || ch->layout != p->layout ||
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

/* An answer to a pull: a whole model in float32, every chunk carrying its hash. */
static rumor_err_t send_answer(rumor_node_t *node, const uint8_t peer[32], uint64_t layout, uint64_t round,
                               const float *x, size_t count, size_t chunk_params, const uint8_t hash[RUMOR_HASH_LEN],
                               send_ctx_t *c)
{
    rumor_wire_model_t m = {.head = {.round = round, .layout = layout, .codec = RUMOR_CODEC_F32, .has_hash = true},
                            .w = 1.0, .params = x, .count = count, .chunk_params = chunk_params};
    memcpy(m.head.hash, hash, RUMOR_HASH_LEN);
    return rumor_node_send(node, peer, &m, release_cb, c);
}

/* A joining neighbour asks for our model: lend the latest snapshot, hash it, send it. */
void peer_pull_cb(void *arg, rumor_node_t *node, const uint8_t peer[32], uint64_t layout)
{
    peer_t *p = arg;
    /* A whole model in the clear is what secure mixing hides: never lent. */
    if (layout != p->layout || p->cfg->secure_mix) return;
    send_ctx_t *c = calloc(1, sizeof *c);
    if (!c) return;
    c->p = p;
    c->made = rumor_now_ms();
    pthread_mutex_lock(&p->mu);
    if (p->finished) {
        /* Lingering after training: the final model, hashed once, never changing. */
        const size_t P = p->P;
        const uint64_t round = p->final_round;
        uint8_t h[RUMOR_HASH_LEN];
        memcpy(h, p->final_hash, sizeof h);
        c->final = true;
        pthread_mutex_unlock(&p->mu);
        if (send_answer(node, peer, layout, round, p->final_x, P, RUMOR_GOSSIP_CHUNK_DEFAULT, h, c) != RUMOR_OK)
            peer_send_ctx_free(c);
        else
            rumor_log(RUMOR_LOG_DEBUG, "sent our final model (round %" PRIu64 ") to a late peer", round);
        return;
    }
    rumor_gossip_lend(p->g, &c->s);
    pthread_mutex_unlock(&p->mu);
    uint8_t h[RUMOR_HASH_LEN]; /* the snapshot cannot change while lent */
    rumor_hash(h, c->s.params, c->s.count * sizeof(float));
    const rumor_gossip_send_t s = c->s;
    rumor_err_t rc = send_answer(node, peer, s.layout, s.round, s.params, s.count, s.chunk_params, h, c);
    if (rc != RUMOR_OK) {
        pthread_mutex_lock(&p->mu);
        rumor_gossip_release(p->g, &s, false);
        pthread_mutex_unlock(&p->mu);
        peer_send_ctx_free(c);
    } else {
        rumor_log(RUMOR_LOG_DEBUG, "sent our model (round %" PRIu64 ") to a joining peer", s.round);
    }
}

void peer_chunk_cb(void *arg, const uint8_t peer[32], const rumor_msg_model_t *m)
{
    peer_t *p = arg;
    pthread_mutex_lock(&p->mu);
    if (m->has_hash)
        pull_chunk(p, peer, m);
    else {
        rumor_trace_arrive(p->trace, rumor_now_us(), peer, m->round, m->chunk);
        if (rumor_wire_receive(&p->wire_in, p->g, peer, m, rumor_now_ms())) pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
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
rumor_err_t peer_mask_floor(peer_t *p, char err[RUMOR_ERR_LEN])
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
    const bool ok = rumor_secmix_mask_model(p->secmix, &s->edges, x, s->count, s->chunk_params, s->share, s->w,
                                            c->masked, c->masked_off, err) == RUMOR_OK;
    if (!ok) rumor_log(RUMOR_LOG_WARN, "%s: round %" PRIu64 " not sent", err, s->round);
    return ok;
}

/* The emulated network takes a send (under mu): lost (released as if sent: the network ate
 * it), or delayed until it is due, its bytes on the wire at the emulated bandwidth. true: the
 * caller must not send it now. */
static bool emulate(peer_t *p, send_ctx_t *c, uint64_t now)
{
    const rumor_peer_config_t *cfg = p->cfg;
    if (cfg->emu_loss > 0 && rumor_rng_uniform(&p->emu_rng) < cfg->emu_loss) {
        rumor_gossip_release(p->g, &c->s, true);
        peer_send_ctx_free(c);
        return true;
    }
    const uint64_t due_us = rumor_wire_link_send(&p->uplink, now * 1000, rumor_wire_send_bytes(&c->s, &cfg->codec),
                                                 cfg->emu_bandwidth_mbps, (uint64_t)(cfg->emu_latency_ms * 1e3 + 0.5));
    c->due = (due_us + 999) / 1000; /* (the node's clock counts milliseconds) */
    if (p->n_delayed == (int)RUMOR_ARRAY_LEN(p->delayed)) return false; /* full: send now */
    p->delayed[p->n_delayed++] = c;
    return true;
}

/* Hand send c to the node (node thread, outside mu): its bytes on the wire in *wire. */
static rumor_err_t send_now(peer_t *p, rumor_node_t *node, send_ctx_t *c, size_t *wire_out, bool *mask_failed_out,
                            bool *relayed_out)
{
    rumor_gossip_send_t s = c->s;
    const float *params = s.params;
    if (rumor_attack_poisons(&p->cfg->attack) && !s.pulled && s.snap >= 0 && s.snap < 2) {
        params = rumor_poison_get(&p->poison, &p->cfg->attack, s.snap, s.round, s.params, &p->attack_rng);
        s.round = rumor_attack_round(&p->cfg->attack, s.round);
    }
    size_t wire;
    rumor_err_t rc = RUMOR_EINVAL;
    bool mask_failed = false;
    /* (masked once: a send that waited for the node is not masked again) */
    if (s.masked && !c->masked_off) mask_failed = !(mask_reserve(p, s.round) && mask_send(p, c, params));
    const rumor_wire_model_t m =
        rumor_wire_model_for(&s, params, &p->enc, (const uint8_t *)c->masked, c->masked_off, &wire, NULL);
    /* (asked before the send: once sent, c may be released, and freed, at any moment) */
    *relayed_out = rumor_node_relayed(node, s.peer);
    if (!mask_failed) rc = rumor_node_send(node, s.peer, &m, release_cb, c);
    *wire_out = wire;
    *mask_failed_out = mask_failed;
    return rc;
}

/* A send the node could not take yet (its previous model to that peer is still leaving: the
 * round ended when the neighbours' models were in, ours may still be on the wire): it waits
 * here, in order, rather than being lost. A lost model leaves the neighbour waiting for it
 * until its round's deadline (on a shallow-buffered link, where one direction lags, that was
 * round after round), and a lost compressed-gossip delta costs the receiver a keyframe. The
 * engine's two snapshots bound what waits; given up (released as not sent) after the round
 * timeout. Node thread. */
static bool retry_waiting_for(const peer_t *p, const uint8_t peer[32])
{
    for (int i = 0; i < p->n_retry; i++)
        if (memcmp(p->retry[i]->s.peer, peer, 32) == 0) return true;
    return false;
}

/* The bookkeeping after a send attempt: counted, or released as not sent. */
static void send_done(peer_t *p, send_ctx_t *c, rumor_err_t rc, size_t wire, bool mask_failed, bool relayed)
{
    pthread_mutex_lock(&p->mu);
    p->mask_fails += mask_failed;
    if (rc != RUMOR_OK) {
        rumor_gossip_release(p->g, &c->s, false);
        pthread_cond_broadcast(&p->cv);
    } else {
        p->bytes_out += wire;
        p->relayed_out += relayed;
    }
    pthread_mutex_unlock(&p->mu);
    if (rc != RUMOR_OK) peer_send_ctx_free(c);
}

/* What a gossip point waits for: snapshot `snap`, from sends lent more than `patience` ms ago. */
typedef struct {
    int snap;
    uint64_t now, patience;
} wanted_t;

static bool holds_wanted(void *arg, void *ctx)
{
    const send_ctx_t *c = arg;
    const wanted_t *w = ctx;
    return !c->final && c->s.snap == w->snap && w->now >= c->made + w->patience;
}

/* The trainer waits at a gossip point for the buffer of its next snapshot, which sends still
 * hold: a model on a link that died under it stays in libzmq until the connection's heartbeat
 * gives up (seconds), and the trainer with it. Sends that had a whole round's deadline to
 * leave are given up at once, waiting ones and those in the node alike (a live link delivers a
 * model within the deadline its receiver waits for it), so that no round waits past its own
 * deadline for one that is over. */
static void give_up_wanted(peer_t *p, rumor_node_t *node, uint64_t now)
{
    uint64_t patience = 0;
    pthread_mutex_lock(&p->mu);
    const int snap = rumor_gossip_snap_wanted(p->g, &patience);
    pthread_mutex_unlock(&p->mu);
    if (snap < 0) return;
    wanted_t w = {.snap = snap, .now = now, .patience = patience};
    int kept = 0;
    for (int i = 0; i < p->n_retry; i++) {
        send_ctx_t *c = p->retry[i];
        if (holds_wanted(c, &w)) send_done(p, c, RUMOR_ECLOSED, 0, false, false);
        else p->retry[kept++] = c;
    }
    p->n_retry = kept;
    (void)rumor_node_give_up(node, holds_wanted, &w);
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
            bool mf = false, relayed = false;
            const rumor_err_t rc = send_now(p, node, c, &wire, &mf, &relayed);
            if (rc != RUMOR_ECLOSED || now >= c->due) {
                /* The model before it did not leave in a whole round timeout: the link is
                 * stuck, and that model's buffer with it (the engine's two snapshots); let
                 * both go, so the trainer never waits past a deadline for a dead link. */
                const uint64_t since = rc == RUMOR_ECLOSED ? rumor_node_sending_since(node, c->s.peer) : 0;
                if (since && now >= since + p->cfg->round_timeout_ms) rumor_node_abandon(node, c->s.peer);
                send_done(p, c, rc, wire, mf, relayed);
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
    uint64_t cand_done[MAX_VIEW];
    rumor_node_member_t m;
    for (int i = 0; i < members && nc < MAX_VIEW; i++) {
        if (!rumor_node_member(node, i, &m) || !m.admitted || (p->pull_want_done && !m.done)) continue;
        bool asked = false;
        for (int a = 0; a < p->n_asked && !asked; a++) asked = memcmp(p->pull_asked[a], m.key, 32) == 0;
        if (!asked) cand_done[nc] = m.done, cand[nc++] = i;
    }
    if (nc == 0 || p->n_asked == RUMOR_RESYNC_ASKS) {
        p->pull_state = PULL_NOBODY;
        pthread_cond_broadcast(&p->cv);
        return;
    }
    const int pick = (int)(now % (uint64_t)nc);
    memcpy(p->pull_peer, rumor_node_peer_key(node, cand[pick]), 32);
    p->pull_done = cand_done[pick];
    /* Refused for now (its connection is on the way): asked again at a later tick. */
    if (rumor_node_pull(node, p->pull_peer, p->layout) != RUMOR_OK) return;
    memcpy(p->pull_asked[p->n_asked++], p->pull_peer, 32);
    p->pull_asked_ms = now;
    p->pull_resends = 0;
    p->pull_got = 0;
    memset(p->pull_bits, 0, (p->pull_chunks + 63) / 64 * sizeof *p->pull_bits);
    p->pull_state = PULL_ASKED;
}

void peer_tick_cb(void *arg, rumor_node_t *node, uint64_t now)
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
    const uint64_t layout = p->layout;
    int n = 0, admitted = 0, done = 0, finished = 0, others = 0;
    bool asked_there = false; /* (the member a pull went to is still an admitted member) */
    rumor_node_member_t m;
    for (int i = 0; i < members; i++) {
        if (!rumor_node_member(node, i, &m)) continue;
        /* A member training another model (its hello's layout) is never mixed with: out of the
         * view, the graph and the count of members a round or a start waits for. */
        if (m.layout && m.layout != layout) {
            others += m.admitted;
            if (m.admitted) peer_layout_member(p, node, &m); /* (it learns which tensor differs) */
            continue;
        }
        finished += m.admitted && m.done && !m.suspect;
        if (!m.admitted) continue;
        asked_there |= memcmp(m.key, p->pull_peer, 32) == 0;
        if (n == MAX_VIEW) continue;
        admitted++;
        if (m.done) {
            done++;
            continue;
        }
        /* Said to be gone by another member, while our ping checks: not waited for (it answers
         * within a round trip if alive; a dead one would hold up every round until our own
         * silence of --suspect declares it, where SWIM's word of a death used to end it). */
        if (m.doubted) continue;
        p->view_boots[n] = m.boot;
        p->view_reach[n] = m.reach;
        p->view_place[n] = m.place;
        memcpy(keys[n++], m.key, 32);
    }
    pthread_mutex_lock(&p->mu);
    p->n_other_layout = others;
    p->n_members = admitted;
    if (done != p->n_done) rumor_trace_done(p->trace, rumor_now_us(), done);
    p->n_done = done;
    p->all_finished = finished == members - others;
    if (p->pull_state == PULL_ASKED) {
        /* The member asked left (or was found dead): no answer will come, ask another. */
        if (!asked_there) {
            p->pull_state = PULL_WANTED;
        } else if (p->pull_got == 0 && now - p->pull_asked_ms >= 1000 && p->pull_resends < 4) {
            /* Nothing yet: it may not have had our hello when the ask came (a pull from a key
             * without one is dropped), so ask again; it answers one pull in 2 s at most. */
            p->pull_asked_ms = now;
            p->pull_resends++;
            (void)rumor_node_pull(node, p->pull_peer, p->layout);
        }
    }
    if (p->pull_state == PULL_WANTED) pull_ask(p, node, now);
    pthread_mutex_unlock(&p->mu);
    send_ctx_t *batch[64];
    give_up_wanted(p, node, now);
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
        rumor_gossip_set_view_reach(p->g, (const uint8_t(*)[32])keys, p->view_boots, p->view_reach, p->view_place,
                                    (size_t)n, rumor_node_reach(node), rumor_node_place(node));
        p->view_count = n;
        if (p->trace && (n != p->traced_n || memcmp(p->traced_view, keys, (size_t)n * 32) != 0)) {
            rumor_trace_view(p->trace, rumor_now_us(), (const uint8_t(*)[32])keys, n);
            memcpy(p->traced_view, keys, (size_t)n * 32);
            p->traced_n = n;
        }
        while (nb < 64) {
            send_ctx_t *c = calloc(1, sizeof *c);
            if (!c) break;
            c->p = p;
            c->made = now;
            if (!rumor_gossip_next_send(p->g, &c->s)) {
                peer_send_ctx_free(c);
                break;
            }
            if (p->trace && !c->s.pulled) rumor_trace_send(p->trace, rumor_now_us(), c->s.peer, c->s.round);
            if (p->emulate && emulate(p, c, now)) continue;
            batch[nb++] = c;
        }
        pthread_mutex_unlock(&p->mu);
        if (nb == 0) break;
    send:
        /* Outside the lock: a send may release at once, and release takes the lock. */
        for (int i = 0; i < nb; i++) {
            send_ctx_t *c = batch[i];
            const bool waits = !c->s.pulled; /* (an answer to a pull is not worth waiting for) */
            if (waits && retry_waiting_for(p, c->s.peer) && p->n_retry < (int)RUMOR_ARRAY_LEN(p->retry)) {
                c->due = now + p->cfg->round_timeout_ms;
                p->retry[p->n_retry++] = c; /* behind an older one to the same peer */
                continue;
            }
            size_t wire = 0;
            bool mask_failed = false, relayed = false;
            const rumor_err_t rc = send_now(p, node, c, &wire, &mask_failed, &relayed);
            if (rc == RUMOR_ECLOSED && waits && p->n_retry < (int)RUMOR_ARRAY_LEN(p->retry)) {
                /* Given up a round timeout after the model it waits behind left (not after
                 * it came): a stuck link holds the trainer one deadline, not two. */
                const uint64_t since = rumor_node_sending_since(node, c->s.peer);
                c->due = (since && since < now ? since : now) + p->cfg->round_timeout_ms;
                p->retry[p->n_retry++] = c;
                continue;
            }
            send_done(p, c, rc, wire, mask_failed, relayed);
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

size_t peer_status_cb(void *arg, bool json, char *buf, size_t cap)
{
    peer_t *p = arg;
    if (!p->g) { /* (no engine yet: a library peer before its start) */
        size_t len = 0;
        if (json) put(buf, cap, &len, "null");
        return len;
    }
    rumor_gossip_stats_t st;
    char algo[32];
    rumor_algo_format(algo, sizeof algo, &p->cfg->algo);
    pthread_mutex_lock(&p->mu);
    rumor_gossip_stats(p->g, &st);
    const uint64_t out = p->bytes_out;
    const uint64_t round = rumor_gossip_round(p->g);
    const double eps = p->epsilon;
    const uint64_t mask_fails = p->mask_fails;
    const int other_layout = p->n_other_layout;
    char mismatch[RUMOR_ERR_LEN]; /* (printable, no quote or backslash: layout names and numbers) */
    snprintf(mismatch, sizeof mismatch, "%s", p->layout_mismatch);
    pthread_mutex_unlock(&p->mu);
    size_t len = 0;
    if (json) {
        put(buf, cap, &len, "{\"layout\":\"%016" PRIx64 "\",\"other_layout\":%d,", p->layout,
            other_layout);
        if (mismatch[0]) put(buf, cap, &len, "\"layout_mismatch\":\"%s\",", mismatch);
        else put(buf, cap, &len, "\"layout_mismatch\":null,");
        put(buf, cap, &len,
            "\"algo\":\"%s\",\"topology\":\"%s\",\"round\":%" PRIu64 ",\"gossip_round\":%" PRIu64
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
        if (st.clipping)
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
        if (mismatch[0]) put(buf, cap, &len, "another model: %s\n", mismatch);
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
