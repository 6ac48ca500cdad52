/* node_relay.c - relays: two members that cannot reach each other (behind different NATs)
 * talk through a third that reaches both, sealed end to end (PROTOCOL.md, "Relays"; the
 * cryptography is crypto.h's "end to end"). The relay reads only the `relay` header (who to,
 * who from, which kind) and forwards the sealed frame untouched, within its budget. */
#include "node_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static const uint8_t *self_key(const rumor_node_t *n) { return rumor_secret_key_public(n->key); }

/* A peer we reach without a relay: over our dial, or back over its connection to us. */
static bool direct(rumor_node_t *n, const dial_t *q, uint64_t now)
{
    if (q->dealer && q->linked) return true; /* (node_reach's first answer, without its lookup) */
    return node_reach(n, q->key, now) == PATH_ROUTER;
}

static bool serves(rumor_node_t *n, const uint8_t *key, uint64_t now)
{
    const conn_t *c = node_find_conn(n, key, false, now);
    return c && c->admitted && (c->caps & RUMOR_CAP_RELAY_SERVE);
}

const relay_sess_t *node_relay_session(const rumor_node_t *n, const uint8_t key[RUMOR_KEY_LEN])
{
    for (int i = 0; i < RELAY_SESSIONS; i++)
        if (n->sess[i].used && same_key(n->sess[i].key, key)) return &n->sess[i];
    return NULL;
}

static relay_sess_t *sess_find(rumor_node_t *n, const uint8_t *key, bool create, uint64_t now)
{
    relay_sess_t *s = (relay_sess_t *)node_relay_session(n, key);
    if (s || !create) return s;
    relay_sess_t *lru = NULL;
    for (int i = 0; i < RELAY_SESSIONS; i++) {
        relay_sess_t *c = &n->sess[i];
        if (!c->used) {
            lru = c;
            break;
        }
        if (!lru || c->used_ms < lru->used_ms) lru = c;
    }
    rumor_e2e_wipe(lru, sizeof *lru);
    lru->used = true;
    memcpy(lru->key, key, RUMOR_KEY_LEN);
    lru->used_ms = now;
    return lru;
}

/* The relay for p: its session's while we still reach that one directly; else, among the
 * peers we reach directly that relay, but not the ones the session failed through (an init
 * they left unanswered, data that did not open) while there are others, the one the
 * session's tries point at. *fresh (when not NULL) says whether it is one of those others. */
static dial_t *pick_relay(rumor_node_t *n, const uint8_t *to, const relay_sess_t *s, uint64_t now, bool *fresh)
{
    if (fresh) *fresh = false;
    if (s && s->state != SESS_NONE) {
        dial_t *v = node_find_peer(n, s->via);
        if (v && !same_key(v->key, to) && direct(n, v, now) && serves(n, v->key, now) &&
            (s->state == SESS_READY || now - s->init_ms < RELAY_INIT_RETRY_MS))
            return v;
    }
    dial_t *cand[MAX_PEERS];
    int nc = 0, nf = 0;
    dial_t *failed[RELAY_FAILED_MAX];
    for (int i = 0; i < MAX_PEERS; i++) {
        dial_t *q = &n->peers[i];
        if (!q->used || same_key(q->key, to) || !direct(n, q, now) || !serves(n, q->key, now)) continue;
        bool bad = false;
        for (int f = 0; s && f < s->n_failed && !bad; f++) bad = same_key(q->key, s->failed_via[f]);
        if (!bad) cand[nc++] = q;
        else if (nf < RELAY_FAILED_MAX) failed[nf++] = q;
    }
    if (fresh) *fresh = nc > 0;
    if (nc) return cand[(s ? s->tries : 0) % nc];
    return nf ? failed[(s ? s->tries : 0) % nf] : NULL;
}

bool node_relay_possible(rumor_node_t *n, const dial_t *p, uint64_t now)
{
    return pick_relay(n, p->key, node_relay_session(n, p->key), now, NULL) != NULL;
}

/* frame (and payload, consumed either way) to the member `to` over our dial or back over its
 * connection; false when that path is full or gone. */
static bool send_direct(rumor_node_t *n, const uint8_t *to, const uint8_t *frame, size_t len, zmq_msg_t *payload,
                        uint64_t now)
{
    dial_t *q = node_find_peer(n, to);
    if (q && q->dealer && q->linked) return node_dealer_send(n, q, frame, len, payload);
    conn_t *c = node_find_conn(n, to, false, now);
    if (!c || !c->admitted || !c->rid_len || !node_router_hello(n, c)) {
        if (payload) zmq_msg_close(payload);
        return false;
    }
    return node_router_send(n, c, frame, len, payload);
}

/* A relay header (no frame 2, or frame 2 of payload_len bytes) into buf; its length, 0 when it
 * cannot be encoded. */
/* A relay header; for a handshake (eph given) with its proof and, for an init, when it was
 * signed. */
static size_t relay_header(uint8_t *buf, size_t cap, bool to, const uint8_t *peer, rumor_relay_kind_t kind,
                           const uint8_t *eph, const uint8_t *proof, uint64_t sent, uint64_t ctr, size_t payload_len,
                           uint32_t seq)
{
    rumor_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = RUMOR_MSG_RELAY;
    m.seq = seq;
    m.u.relay.to = to;
    memcpy(m.u.relay.peer, peer, RUMOR_KEY_LEN);
    m.u.relay.kind = kind;
    if (eph) memcpy(m.u.relay.eph, eph, RUMOR_KEY_LEN);
    if (proof) memcpy(m.u.relay.proof, proof, RUMOR_PROTO_PROOF_LEN);
    m.u.relay.sent = sent;
    m.u.relay.ctr = ctr;
    m.u.relay.payload_len = payload_len;
    size_t len = 0;
    return rumor_proto_encode(&m, buf, cap, &len) == RUMOR_OK ? len : 0;
}

/* What an end signs of a handshake (PROTOCOL.md "Relays"): an init, both ends, the
 * initiator's ephemeral key and when it was sent; an accept, both ends and both ephemeral
 * keys. So a relay can forge neither, and a replayed init is older than the last taken. */
static size_t handshake_bytes(uint8_t out[160], rumor_relay_kind_t kind, const uint8_t *sender,
                              const uint8_t *receiver, const uint8_t *eph, const uint8_t *eph_other, uint64_t sent)
{
    memcpy(out, kind == RUMOR_RELAY_INIT ? "rumor-relay-init-1\0\0" : "rumor-relay-accept-1", 20);
    memcpy(out + 20, sender, RUMOR_KEY_LEN);
    memcpy(out + 52, receiver, RUMOR_KEY_LEN);
    memcpy(out + 84, eph, RUMOR_KEY_LEN);
    if (kind == RUMOR_RELAY_ACCEPT) {
        memcpy(out + 116, eph_other, RUMOR_KEY_LEN);
        return 148;
    }
    for (int i = 0; i < 8; i++) out[116 + i] = (uint8_t)(sent >> (56 - 8 * i));
    return 124;
}

static void handshake_sign(const rumor_node_t *n, uint8_t proof[RUMOR_PROTO_PROOF_LEN], rumor_relay_kind_t kind,
                           const uint8_t *to, const uint8_t *eph, const uint8_t *eph_other, uint64_t sent)
{
    uint8_t b[160];
    const size_t len = handshake_bytes(b, kind, self_key(n), to, eph, eph_other, sent);
    memcpy(proof, rumor_secret_key_signer(n->key), RUMOR_KEY_LEN);
    rumor_secret_key_sign(n->key, proof + RUMOR_KEY_LEN, b, len);
}

static bool handshake_signed(const rumor_node_t *n, const uint8_t *from, const rumor_msg_relay_t *r,
                             const uint8_t *eph_other)
{
    uint8_t b[160];
    const size_t len = handshake_bytes(b, r->kind, from, self_key(n), r->eph, eph_other, r->sent);
    return rumor_member_signed(from, r->proof, r->proof + RUMOR_KEY_LEN, b, len);
}

/* A sealed message on its way: freed by libzmq once sent, releasing what it held. */
typedef struct {
    outgoing_t *hold;
    uint8_t data[];
} sealed_t;

static void sealed_free(void *data, void *hint)
{
    (void)data;
    sealed_t *b = hint;
    if (b->hold) node_outgoing_unref(b->hold);
    free(b);
}

/* Seal one message (frame, and payload when payload_len > 0) to s's far end and hand it to
 * the relay r. */
static bool seal_send(rumor_node_t *n, relay_sess_t *s, const uint8_t *r, const uint8_t *frame, size_t len,
                      const uint8_t *payload, size_t payload_len, outgoing_t *hold, uint64_t now)
{
    /* Inside: the count of frames (1 or 2), frame 1's length (uint32, little-endian), frame 1,
     * frame 2. */
    const size_t inner = 5 + len + payload_len, total = inner + RUMOR_E2E_TAG;
    if (len > UINT32_MAX || total > RUMOR_PROTO_MAX_PAYLOAD) return false;
    sealed_t *b = malloc(sizeof *b + total);
    if (!b) return false;
    uint8_t *in = n->e2e_out;
    in[0] = payload_len ? 2 : 1;
    for (int i = 0; i < 4; i++) in[1 + i] = (uint8_t)(len >> (8 * i));
    memcpy(in + 5, frame, len);
    if (payload_len) memcpy(in + 5 + len, payload, payload_len);
    const uint64_t ctr = ++s->tx_ctr;
    rumor_e2e_seal(b->data, s->k.tx, self_key(n), s->key, ctr, in, inner);
    uint8_t hdr[256];
    const size_t hl = relay_header(hdr, sizeof hdr, true, s->key, RUMOR_RELAY_DATA, NULL, NULL, 0, ctr, total, ++n->seq);
    b->hold = hold;
    if (hold) atomic_fetch_add(&hold->refs, 1);
    zmq_msg_t pm;
    if (!hl || zmq_msg_init_data(&pm, b->data, total, sealed_free, b) != 0) {
        sealed_free(b->data, b);
        return false;
    }
    if (!send_direct(n, r, hdr, hl, &pm, now)) return false; /* (the counter is spent: gaps are fine) */
    n->msgs_out++;
    n->bytes_out += hl + total;
    n->e2e_msgs_out++;
    n->e2e_bytes_out += hl + total;
    s->used_ms = now;
    return true;
}

/* Our hello through s's relay r: first in every session, and again now and then. */
static bool seal_hello(rumor_node_t *n, relay_sess_t *s, const uint8_t *r, uint64_t now)
{
    rumor_msg_t h;
    node_fill_hello(n, &h);
    h.seq = ++n->seq;
    uint8_t hb[RUMOR_PROTO_CERT_MAX + 512]; /* (its own buffer: a caller's frame may be n->buf) */
    size_t hl = 0;
    if (rumor_proto_encode(&h, hb, sizeof hb, &hl) != RUMOR_OK || !seal_send(n, s, r, hb, hl, NULL, 0, NULL, now))
        return false;
    s->hello_sent = true;
    s->hello_ms = now;
    return true;
}

/* s failed through relay via: remembered (the oldest forgotten), so that the next init avoids
 * it while there are others. */
static void sess_failed(relay_sess_t *s, const uint8_t *via)
{
    for (int f = 0; f < s->n_failed; f++)
        if (same_key(s->failed_via[f], via)) return;
    if (s->n_failed == RELAY_FAILED_MAX) {
        memmove(s->failed_via[0], s->failed_via[1], (RELAY_FAILED_MAX - 1) * sizeof s->failed_via[0]);
        s->n_failed--;
    }
    memcpy(s->failed_via[s->n_failed++], via, RUMOR_KEY_LEN);
}

/* Start (or, unanswered for a while, restart through the next relay) a session with p. */
static void maybe_init(rumor_node_t *n, dial_t *p, relay_sess_t *s, uint64_t now)
{
    if (s->state == SESS_INIT && now - s->init_ms < RELAY_INIT_RETRY_MS) return;
    if (s->state == SESS_INIT) {
        /* Sent again with the same ephemeral key: an accept of any of our inits agrees the
         * same keys, so one that comes late does not leave the two ends apart. Through
         * another relay, if there is one: that one did not pass it on (or the far end is
         * gone). */
        s->tries++;
        s->inits++;
        sess_failed(s, s->via);
    } else {
        rumor_e2e_wipe(&s->k, sizeof s->k);
        rumor_e2e_eph_new(&s->eph);
        s->inits = 1;
    }
    dial_t *r = pick_relay(n, p->key, s, now, NULL);
    if (!r) {
        s->state = SESS_NONE;
        return;
    }
    uint8_t hdr[384], proof[RUMOR_PROTO_PROOF_LEN];
    const uint64_t sent = rumor_unix_ms();
    handshake_sign(n, proof, RUMOR_RELAY_INIT, p->key, s->eph.pub, NULL, sent);
    const size_t hl =
        relay_header(hdr, sizeof hdr, true, p->key, RUMOR_RELAY_INIT, s->eph.pub, proof, sent, 0, 0, ++n->seq);
    s->state = SESS_INIT;
    s->initiator = true;
    s->init_ms = now;
    memcpy(s->via, r->key, RUMOR_KEY_LEN);
    if (hl && send_direct(n, r->key, hdr, hl, NULL, now)) {
        n->msgs_out++;
        n->bytes_out += hl;
    }
}

bool node_relay_send(rumor_node_t *n, dial_t *p, const uint8_t *frame, size_t len, const uint8_t *payload,
                     size_t payload_len, outgoing_t *hold, bool hello, uint64_t now)
{
    relay_sess_t *s = sess_find(n, p->key, true, now);
    if (s->state != SESS_READY) {
        maybe_init(n, p, s, now);
        return false;
    }
    dial_t *r = pick_relay(n, p->key, s, now, NULL);
    if (!r) {
        s->state = SESS_NONE; /* its relay is gone: a new session through another */
        rumor_e2e_wipe(&s->k, sizeof s->k);
        return false;
    }
    if ((!s->hello_sent || now - s->hello_ms >= RELAY_HELLO_MS) && !hello && !seal_hello(n, s, r->key, now))
        return false;
    if (!seal_send(n, s, r->key, frame, len, payload, payload_len, hold, now)) return false;
    if (hello) {
        s->hello_sent = true;
        s->hello_ms = now;
    }
    return true;
}

/* A token bucket of rate bytes a second holding burst_s seconds of it, and at least two
 * largest messages; whether bytes fit in it now (spent when spend). */
static bool bucket_bytes(double *tokens, uint64_t *refill_ms, double rate, double burst_s, size_t bytes, bool spend,
                         uint64_t now)
{
    const double cap = rate * burst_s > 2.0 * RUMOR_PROTO_MAX_PAYLOAD ? rate * burst_s : 2.0 * RUMOR_PROTO_MAX_PAYLOAD;
    double t = *refill_ms ? *tokens + rate * (double)(now - *refill_ms) / 1000.0 : cap;
    if (t > cap) t = cap;
    const bool fits = t >= (double)bytes;
    if (fits && spend) t -= (double)bytes;
    *tokens = t;
    *refill_ms = now ? now : 1;
    return fits;
}

/* The forwarding budget (--relay-budget), shared: each member that asked us to forward in the
 * last RELAY_USER_MS may use its share, budget / (those members), so one member that asks
 * for all of it leaves the others theirs; one alone may use all. Whether `bytes` from c fit
 * in both its share and the whole budget now (then spent from both). */
static bool budget(rumor_node_t *n, conn_t *c, size_t bytes, uint64_t now)
{
    /* (counted a few times a second, and at once when a member starts asking: until it counts,
     * the others' shares are larger than they should be) */
    const bool new_user = !c->relay_asked_ms || now - c->relay_asked_ms >= RELAY_USER_MS;
    c->relay_asked_ms = now ? now : 1;
    if (new_user || now - n->relay_users_ms >= 250 || n->relay_users == 0) {
        n->relay_users = 0;
        for (int i = 0; i < n->n_conns; i++)
            n->relay_users += n->conns[i].used && n->conns[i].relay_asked_ms && now - n->conns[i].relay_asked_ms < RELAY_USER_MS;
        n->relay_users_ms = now;
    }
    const double share = n->relay_rate / (n->relay_users > 1 ? n->relay_users : 1);
    /* A member's bucket holds a second of its share (a share that shrinks caps what it holds);
     * the node's holds two of the whole, so that what one member took in a burst before the
     * others counted leaves theirs (measured: a member asking for all of it took the first
     * quarter second's budget, and the first of another's messages was dropped). */
    if (!bucket_bytes(&c->relay_tokens, &c->relay_refill_ms, share, 1.0, bytes, false, now)) return false;
    if (!bucket_bytes(&n->relay_tokens, &n->relay_refill_ms, n->relay_rate, 2.0, bytes, true, now)) return false;
    (void)bucket_bytes(&c->relay_tokens, &c->relay_refill_ms, share, 1.0, bytes, true, now);
    return true;
}

/* A forwarded frame 2: a copy, counted while libzmq holds it. */
typedef struct {
    rumor_node_t *n;
    size_t len;
    uint8_t data[];
} fwd_copy_t;

static void held_free(void *data, void *hint)
{
    (void)data;
    fwd_copy_t *h = hint;
    atomic_fetch_sub(&h->n->relay_held, h->len);
    free(h);
}

/* Asked by `from` to forward to r->peer: only between two admitted members we reach directly
 * (one hop: never through another relay), within the budget. */
/* --attack relay-forge: the last init forwarded between two ends, kept to be replayed. */
static void forge_note(rumor_node_t *n, const uint8_t *from, const rumor_msg_relay_t *r)
{
    int i = 0;
    while (i < n->n_forged && !(same_key(n->forged[i].from, from) && same_key(n->forged[i].to, r->peer))) i++;
    if (i == FORGED_PAIRS) i = (int)(r->sent % FORGED_PAIRS); /* full: any one goes */
    if (i == n->n_forged) n->n_forged++;
    memcpy(n->forged[i].from, from, RUMOR_KEY_LEN);
    memcpy(n->forged[i].to, r->peer, RUMOR_KEY_LEN);
    memcpy(n->forged[i].eph, r->eph, RUMOR_KEY_LEN);
    memcpy(n->forged[i].proof, r->proof, RUMOR_PROTO_PROOF_LEN);
    n->forged[i].sent = r->sent;
}

/* --attack relay-forge, every FORGE_MS: each end of a session we carried an init for gets,
 * in the other end's name, that init again, an init made up (a fresh ephemeral key, a proof
 * of random bytes, now) and an accept made up. The ends must take none of them. */
static void forge_send(rumor_node_t *n, uint64_t now)
{
    if (!n->relay_forge || now - n->forge_ms < FORGE_MS) return;
    n->forge_ms = now;
    for (int i = 0; i < n->n_forged; i++) {
        uint8_t hdr[384], eph[RUMOR_KEY_LEN], proof[RUMOR_PROTO_PROOF_LEN];
        const uint8_t *from = n->forged[i].from, *to = n->forged[i].to;
        size_t hl = relay_header(hdr, sizeof hdr, false, from, RUMOR_RELAY_INIT, n->forged[i].eph,
                                 n->forged[i].proof, n->forged[i].sent, 0, 0, ++n->seq);
        if (hl && send_direct(n, to, hdr, hl, NULL, now)) n->msgs_out++;
        rumor_random_bytes(eph, sizeof eph);
        rumor_random_bytes(proof, sizeof proof);
        hl = relay_header(hdr, sizeof hdr, false, from, RUMOR_RELAY_INIT, eph, proof, rumor_unix_ms(), 0, 0, ++n->seq);
        if (hl && send_direct(n, to, hdr, hl, NULL, now)) n->msgs_out++;
        hl = relay_header(hdr, sizeof hdr, false, to, RUMOR_RELAY_ACCEPT, eph, proof, 0, 0, 0, ++n->seq);
        if (hl && send_direct(n, from, hdr, hl, NULL, now)) n->msgs_out++;
    }
}

static void forward(rumor_node_t *n, const uint8_t *from, const rumor_msg_relay_t *r, uint64_t now)
{
    const conn_t *dc = node_find_conn(n, r->peer, false, now);
    conn_t *fc = node_find_conn(n, from, false, now);
    const path_t way = node_reach(n, r->peer, now);
    const bool reach = dc && dc->admitted && (way == PATH_DEALER || way == PATH_ROUTER);
    if (!n->relay_serve || !fc || same_key(r->peer, from) || same_key(r->peer, self_key(n)) || !reach) {
        n->drops[DROP_RELAY_REFUSED]++;
        return;
    }
    uint8_t hdr[384];
    const bool hs = r->kind != RUMOR_RELAY_DATA;
    const size_t hl = relay_header(hdr, sizeof hdr, false, from, r->kind, hs ? r->eph : NULL, hs ? r->proof : NULL,
                                   r->sent, r->ctr, r->payload_len, ++n->seq);
    if (!hl) return;
    if (atomic_load(&n->relay_held) + r->payload_len > RELAY_HELD_MAX || !budget(n, fc, hl + r->payload_len, now)) {
        n->drops[DROP_RELAY_BUDGET]++;
        return;
    }
    zmq_msg_t pm;
    if (r->payload_len) {
        fwd_copy_t *h = malloc(sizeof *h + r->payload_len);
        if (!h) return;
        h->n = n;
        h->len = r->payload_len;
        memcpy(h->data, r->payload, r->payload_len);
        if (n->relay_tamper) h->data[h->len / 2] ^= 0x01; /* (--attack relay-tamper) */
        atomic_fetch_add(&n->relay_held, h->len);
        if (zmq_msg_init_data(&pm, h->data, h->len, held_free, h) != 0) {
            held_free(h->data, h);
            return;
        }
    }
    if (!send_direct(n, r->peer, hdr, hl, r->payload_len ? &pm : NULL, now)) {
        n->drops[DROP_SEND_FULL]++;
        return;
    }
    if (n->relay_forge && r->kind == RUMOR_RELAY_INIT) forge_note(n, from, r);
    n->msgs_out++;
    n->bytes_out += hl + r->payload_len;
    n->relayed_msgs++;
    n->relayed_bytes += hl + r->payload_len;
}

/* A session agreed on keys k (wiped here, with the ephemeral secret) through relay via, with
 * the far end's ephemeral key far and ours. */
static void sess_ready(relay_sess_t *s, rumor_e2e_keys_t *k, const uint8_t *via, const uint8_t *far,
                       const uint8_t *ours, uint64_t now)
{
    memcpy(s->eph_far, far, RUMOR_KEY_LEN);
    memcpy(s->eph_ours, ours, RUMOR_KEY_LEN);
    s->k = *k;
    rumor_e2e_wipe(k, sizeof *k);
    rumor_e2e_wipe(&s->eph, sizeof s->eph);
    s->state = SESS_READY;
    s->tx_ctr = s->rx_ctr = 0;
    s->hello_sent = false;
    s->tries = s->bad = s->inits = 0; /* (the relays it failed through stay avoided) */
    s->used_ms = now;
    memcpy(s->via, via, RUMOR_KEY_LEN);
}

void node_relay_handle(rumor_node_t *n, const uint8_t via[RUMOR_KEY_LEN], uint64_t now)
{
    const rumor_msg_relay_t *r = &n->wmsg.u.relay;
    if (r->to) {
        forward(n, via, r, now);
        return;
    }
    uint8_t far[RUMOR_KEY_LEN];
    memcpy(far, r->peer, RUMOR_KEY_LEN);
    if (same_key(far, self_key(n)) || same_key(far, via)) {
        n->drops[DROP_E2E]++;
        return;
    }
    if (r->kind == RUMOR_RELAY_INIT) {
        /* Inits are paced per relay: one that makes up far ends cannot have us answer
         * without bound, nor push the sessions we use out of the table. Only the far end can
         * sign one, within the certificate clock skew of our time: a relay cannot open or
         * re-key a session (it would take it, or break the one that works). */
        conn_t *vc = node_find_conn(n, via, false, now);
        if (!vc || !node_bucket_take(&vc->relay_inits, RELAY_INITS_PER_S, now)) {
            n->drops[DROP_E2E_STALE]++;
            return;
        }
        const uint64_t wall = rumor_unix_ms(), skew = 1000u * RUMOR_CERT_SKEW;
        if (!handshake_signed(n, far, r, NULL) || r->sent + skew < wall || r->sent > wall + skew) {
            n->drops[DROP_E2E]++;
            return;
        }
    }
    relay_sess_t *s = sess_find(n, far, r->kind == RUMOR_RELAY_INIT, now);
    if (r->kind == RUMOR_RELAY_INIT) {
        if ((s->init_in_ms && now - s->init_in_ms < RELAY_INIT_MIN_MS) || r->sent <= s->init_sent) {
            n->drops[DROP_E2E_STALE]++; /* inits come at most that often; an older one is a replay */
            return;
        }
        s->init_sent = r->sent;
        if (s->state == SESS_READY && !s->initiator && same_key(r->eph, s->eph_far)) {
            /* The init we accepted, again: our accept (or what followed it) did not get
             * there. The same accept again (the session stands, through the relay this
             * init took), and our hello. */
            memcpy(s->via, via, RUMOR_KEY_LEN);
            uint8_t hdr[384], proof[RUMOR_PROTO_PROOF_LEN];
            handshake_sign(n, proof, RUMOR_RELAY_ACCEPT, far, s->eph_ours, s->eph_far, 0);
            const size_t hl =
                relay_header(hdr, sizeof hdr, true, far, RUMOR_RELAY_ACCEPT, s->eph_ours, proof, 0, 0, 0, ++n->seq);
            s->init_in_ms = now;
            if (hl && send_direct(n, via, hdr, hl, NULL, now)) {
                n->msgs_out++;
                n->bytes_out += hl;
                (void)seal_hello(n, s, via, now);
            }
            return;
        }
        /* Both began at once: the init of the smaller key stands, also when its accept came
         * back before the other init arrived. */
        if (s->initiator && memcmp(self_key(n), far, RUMOR_KEY_LEN) < 0 &&
            (s->state == SESS_INIT || (s->state == SESS_READY && now - s->init_ms < 2 * RELAY_INIT_RETRY_MS)))
            return;
        s->init_in_ms = now;
        rumor_e2e_eph_t e;
        rumor_e2e_eph_new(&e);
        rumor_e2e_keys_t k;
        uint8_t hdr[384], proof[RUMOR_PROTO_PROOF_LEN];
        size_t hl = 0;
        handshake_sign(n, proof, RUMOR_RELAY_ACCEPT, far, e.pub, r->eph, 0);
        if (rumor_e2e_keys(&k, n->key, &e, far, r->eph, false) != RUMOR_OK ||
            !(hl = relay_header(hdr, sizeof hdr, true, far, RUMOR_RELAY_ACCEPT, e.pub, proof, 0, 0, 0, ++n->seq)) ||
            !send_direct(n, via, hdr, hl, NULL, now)) {
            n->drops[DROP_E2E_STALE]++; /* (a degenerate ephemeral, or no way back to it) */
            rumor_e2e_wipe(&e, sizeof e);
            rumor_e2e_wipe(&k, sizeof k);
            return;
        }
        n->msgs_out++;
        n->bytes_out += hl;
        s->initiator = false;
        sess_ready(s, &k, via, r->eph, e.pub, now);
        rumor_e2e_wipe(&e, sizeof e);
        (void)seal_hello(n, s, via, now); /* (so it admits us now, not at our next message) */
        return;
    }
    if (r->kind == RUMOR_RELAY_ACCEPT) {
        if (s && s->state == SESS_READY && s->initiator && same_key(r->eph, s->eph_far))
            return; /* a copy of the accept we took (it answered an init we sent again) */
        bool ours = s && same_key(via, s->via); /* an accept comes back the way an init of ours went */
        for (int f = 0; s && f < s->n_failed && !ours; f++) ours = same_key(via, s->failed_via[f]);
        rumor_e2e_keys_t k;
        if (!s || s->state != SESS_INIT || !s->initiator || !ours || !handshake_signed(n, far, r, s->eph.pub) ||
            rumor_e2e_keys(&k, n->key, &s->eph, far, r->eph, true) != RUMOR_OK) {
            n->drops[DROP_E2E_STALE]++;
            return;
        }
        sess_ready(s, &k, via, r->eph, s->eph.pub, now);
        (void)seal_hello(n, s, via, now);
        return;
    }
    /* data: opens only under this session's key, from that peer to us, at a counter past the
     * last (so nothing is replayed), unaltered. */
    if (!s || s->state != SESS_READY || r->ctr <= s->rx_ctr) {
        /* Before its session is agreed here, or overtaken by a later one through another
         * relay (a session's messages may take two relays while an init is resent), or a
         * replay: not taken, and no sign that the keys differ. */
        n->drops[DROP_E2E_STALE]++;
        return;
    }
    if (rumor_e2e_open(n->e2e_buf, s->k.rx, far, self_key(n), r->ctr, r->payload, r->payload_len) != RUMOR_OK) {
        n->drops[DROP_E2E]++;
        /* (only what comes through the session's own relay counts against it: another
         * member cannot make us leave a relay that works) */
        if (same_key(via, s->via) && ++s->bad >= RELAY_BAD_MAX) {
            /* The two ends hold different keys, or the relay alters what it carries: our next
             * message agrees new ones, through the next relay. */
            s->state = SESS_NONE;
            s->bad = 0;
            s->tries++;
            sess_failed(s, s->via);
            rumor_e2e_wipe(&s->k, sizeof s->k);
        }
        return;
    }
    s->bad = 0;
    s->rx_ctr = r->ctr;
    s->used_ms = now;
    const uint8_t *in = n->e2e_buf;
    const size_t mlen = r->payload_len - RUMOR_E2E_TAG;
    const size_t flen = mlen >= 5 ? (size_t)in[1] | (size_t)in[2] << 8 | (size_t)in[3] << 16 | (size_t)in[4] << 24 : 0;
    if (mlen < 5 || (in[0] != 1 && in[0] != 2) || flen > mlen - 5 || (in[0] == 1 && flen != mlen - 5)) {
        n->drops[RUMOR_PROTO_REJECT_MALFORMED]++; /* sealed by the member itself: it sent nonsense */
        return;
    }
    rumor_proto_reject_t why = RUMOR_PROTO_REJECT_NONE;
    const uint8_t *pl = in[0] == 2 ? in + 5 + flen : NULL;
    if (rumor_proto_decode(&n->wmsg, in + 5, flen, pl, pl ? mlen - 5 - flen : 0, &why) != RUMOR_OK) {
        n->drops[why < RUMOR_PROTO_REJECT_COUNT ? why : RUMOR_PROTO_REJECT_MALFORMED]++;
        return;
    }
    if (n->wmsg.type == RUMOR_MSG_RELAY) {
        n->drops[DROP_UNEXPECTED]++; /* one hop only */
        return;
    }
    n->e2e_msgs_in++;
    node_dispatch(n, far, PATH_RELAY, NULL, now);
}

/* While the far end is still reached only through relays, inits that went unanswered are
 * sent again (through the next relay), a few times; and a session that failed (its relays
 * left every init unanswered, or altered what they carried) starts again as soon as a relay
 * it has not failed through is there. Neither waits for the next message membership happens
 * to have for that member: that may come only after membership gave it up. */
void node_relay_tick(rumor_node_t *n, uint64_t now)
{
    forge_send(n, now);
    for (int i = 0; i < RELAY_SESSIONS; i++) {
        relay_sess_t *s = &n->sess[i];
        if (!s->used || now - s->init_ms < RELAY_INIT_RETRY_MS) continue;
        const bool resend = s->state == SESS_INIT && s->initiator && s->inits < RELAY_INIT_TRIES;
        const bool failed = s->n_failed > 0 && (s->state == SESS_NONE || (s->state == SESS_INIT && !resend));
        if (!resend && !failed) continue;
        dial_t *p = node_find_peer(n, s->key);
        if (!p || !p->relayed) continue;
        if (failed) {
            bool fresh;
            if (!pick_relay(n, p->key, s, now, &fresh) || !fresh) {
                s->init_ms = now; /* (looked at again a retry later) */
                continue;
            }
            s->state = SESS_NONE; /* a new session, with new keys, through that relay */
        }
        maybe_init(n, p, s, now);
    }
}
