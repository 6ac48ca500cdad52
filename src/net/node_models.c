/* node_models.c - models in and out for the gossip engine (node_impl.h). */
#include "node_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

/* A chunk libzmq is done with (sent, or dropped with its connection): from its I/O thread. */
static void chunk_free_cb(void *data, void *hint)
{
    (void)data;
    node_outgoing_unref(hint);
}

/* ---- models ---- */

void rumor_node_on_chunk(rumor_node_t *n, rumor_node_chunk_cb cb, void *arg)
{
    n->chunk_cb = cb;
    n->chunk_arg = arg;
}

void rumor_node_on_status(rumor_node_t *n, rumor_node_status_cb cb, void *arg)
{
    n->status_cb = cb;
    n->status_arg = arg;
}

void rumor_node_set_tick_ms(rumor_node_t *n, uint64_t ms) { n->tick_ms = ms ? ms : 1; }

void rumor_node_on_pull(rumor_node_t *n, rumor_node_pull_cb cb, void *arg)
{
    n->pull_cb = cb;
    n->pull_arg = arg;
}

/* The dial of an admitted member in the view, to send it something: *rc EINVAL (not in the
 * view, or no dial to be had), EAUTH (not admitted). */
static dial_t *member_dial(rumor_node_t *n, const uint8_t peer[32], rumor_err_t *rc)
{
    int v = -1;
    for (int i = 0; i < rumor_memb_view_count(n->memb) && v < 0; i++)
        if (same_key(rumor_memb_view_at(n->memb, i)->key, peer)) v = i;
    *rc = RUMOR_EINVAL;
    if (v < 0) return NULL;
    const conn_t *c = node_find_conn(n, peer, false, rumor_now_ms());
    if (!c || !c->admitted) {
        *rc = RUMOR_EAUTH;
        return NULL;
    }
    return node_get_peer(n, peer, rumor_memb_view_at(n->memb, v)->addr, rumor_now_ms());
}

rumor_err_t rumor_node_pull(rumor_node_t *n, const uint8_t peer[32], uint64_t layout)
{
    rumor_err_t rc;
    dial_t *p = member_dial(n, peer, &rc);
    if (!p) return rc;
    rumor_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = RUMOR_MSG_PULL;
    m.u.pull.layout = layout;
    return node_send_msg(n, p, &m);
}

void rumor_node_on_layout(rumor_node_t *n, rumor_node_layout_cb cb, void *arg)
{
    n->layout_cb = cb;
    n->layout_arg = arg;
}

rumor_err_t rumor_node_send_layout(rumor_node_t *n, const uint8_t peer[32], uint64_t layout, const char *text,
                                   size_t len)
{
    rumor_err_t rc;
    dial_t *p = member_dial(n, peer, &rc);
    if (!p) return rc;
    rumor_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = RUMOR_MSG_LAYOUT;
    m.u.layout.layout = layout;
    m.u.layout.text = (const uint8_t *)text;
    m.u.layout.text_len = len;
    return node_send_payload(n, p, &m, text, len);
}

void rumor_node_wake(rumor_node_t *n)
{
    const char b = 1;
    ssize_t k = write(n->wake[1], &b, 1); /* a full pipe already wakes the loop */
    (void)k;
}

void rumor_node_stop(rumor_node_t *n)
{
    atomic_store(&n->stop, true);
    rumor_node_wake(n);
}

void rumor_node_reload(rumor_node_t *n)
{
    atomic_store(&n->reload, true);
    rumor_node_wake(n);
}

void rumor_node_on_tick(rumor_node_t *n, rumor_node_tick_cb cb, void *arg)
{
    n->tick_cb = cb;
    n->tick_arg = arg;
}

int rumor_node_peer_count(const rumor_node_t *n) { return rumor_memb_view_count(n->memb); }

const rumor_secret_key_t *rumor_node_secret_key(const rumor_node_t *n) { return n->key; }

const uint8_t *rumor_node_peer_key(const rumor_node_t *n, int i)
{
    const rumor_memb_member_t *e = rumor_memb_view_at(n->memb, i);
    return e ? e->key : NULL;
}

uint64_t rumor_node_boot(const rumor_node_t *n) { return n->boot_id; }

/* A reach class from a member's signed record and its certificate (PROTOCOL.md
 * "Reachability"): when only members it dials reach it, the site its certificate states, else
 * one of its own (its place, top bit set); 0 when anyone can dial it. Every peer that holds the
 * record and the certificate computes the same, whatever the member said to it alone (a site in
 * its hello, caps): no member can choose a class to share with a victim. */
static uint64_t reach_class(bool undialable, const uint8_t *cert, size_t cert_len, uint64_t place)
{
    if (!undialable) return 0;
    const uint64_t site = rumor_cert_site_class(cert, cert_len);
    return site ? site : place | UINT64_C(1) << 63;
}

uint64_t rumor_node_place(const rumor_node_t *n)
{
    return rumor_member_place(n->cert, n->cert_len, rumor_secret_key_public(n->key));
}

uint64_t rumor_node_reach(const rumor_node_t *n)
{
    return reach_class(rumor_memb_undialable(n->memb), n->cert, n->cert_len, rumor_node_place(n));
}

bool rumor_node_member(rumor_node_t *n, int i, rumor_node_member_t *out)
{
    memset(out, 0, sizeof *out);
    const rumor_memb_member_t *e = rumor_memb_view_at(n->memb, i);
    if (!e) return false;
    const conn_t *c = node_find_conn(n, e->key, false, rumor_now_ms());
    out->key = e->key;
    out->admitted = c && c->admitted && (!c->expires_at || unix_now() < c->expires_at);
    /* Its signed record's (its hello, or an entry it signed); a knock's only until we hold one:
     * a knock replayed within the clock window after our restart must not set an old run's. */
    out->boot = e->boot ? e->boot : c && c->knocked ? c->boot : 0;
    out->done = c ? c->done : 0;
    size_t cert_len;
    const uint8_t *cert = rumor_memb_view_cert(n->memb, i, &cert_len);
    out->place = rumor_member_place(cert, cert_len, e->key);
    out->reach = reach_class(e->undialable, cert, cert_len, out->place);
    out->suspect = e->state != RUMOR_MEMB_ALIVE;
    out->doubted = e->doubted;
    out->layout = c && c->admitted ? c->layout : 0;
    return true;
}

void rumor_node_set_done(rumor_node_t *n, uint64_t round)
{
    atomic_store(&n->done_round, round ? round : 1);
    rumor_node_wake(n);
}

void rumor_node_set_layout(rumor_node_t *n, uint64_t layout)
{
    n->cfg.layout = layout;
}

/* Tell every member we hold a connection to that we finished (node thread). */
void node_announce_done(rumor_node_t *n)
{
    const uint64_t d = atomic_load(&n->done_round);
    if (d == n->done_sent) return;
    n->done_sent = d;
    rumor_msg_t hello;
    for (int i = 0; i < MAX_PEERS; i++) {
        dial_t *p = &n->peers[i];
        if (!p->used) continue;
        node_fill_hello(n, &hello);
        (void)node_send_msg(n, p, &hello);
    }
}

/* Queue as many chunks as the peer's path takes without blocking: our DEALER to it, or its
 * own connection to our ROUTER (node_peer_path). A path that is full is tried again at the
 * loop's next turn: the DEALER says when it drains; the ROUTER does not, so the loop looks
 * again soon (n->router_blocked). */
void node_pump(rumor_node_t *n, dial_t *p)
{
    sending_t *s = &p->send;
    const uint64_t now = rumor_now_ms();
    const path_t path = s->out ? node_peer_path(n, p, now) : PATH_NONE;
    /* Chunks wait for our dial to connect (or for another path once it is stale): a DEALER
     * that never connects would hold them, and the model's buffer with them, for good. */
    if (path == PATH_NONE || (path == PATH_DEALER && !p->linked)) return;
    conn_t *c = path == PATH_ROUTER ? node_find_conn(n, p->key, false, now) : NULL;
    if (c && !c->rid_hello) {
        rumor_msg_t hello; /* our hello first on that connection (node_send_msg sends it) */
        node_fill_hello(n, &hello);
        if (node_send_msg(n, p, &hello) != RUMOR_OK) {
            n->router_blocked = true;
            return;
        }
    }
    while (s->out && s->next < s->chunks) {
        rumor_msg_t m;
        memset(&m, 0, sizeof m);
        m.type = RUMOR_MSG_MODEL;
        m.seq = ++n->seq;
        rumor_wire_chunk(&s->m, s->next, &m.u.model);
        const uint8_t *data = m.u.model.payload; /* frame 2, zero copy; the header goes without it */
        const size_t dlen = m.u.model.payload_len;
        m.u.model.payload = NULL;
        size_t len;
        if (rumor_proto_encode(&m, n->buf, RUMOR_PROTO_MAX_HEADER, &len) != RUMOR_OK) {
            s->next = s->chunks; /* cannot happen after rumor_node_send's checks; never spin on it */
            break;
        }
        if (atomic_load(&s->out->refs) - 1 >= MAX_INFLIGHT) return; /* resumes as chunks go out */
        zmq_msg_t payload;
        if (path == PATH_RELAY) {
            /* Sealed (a copy) and handed to the relay; the copy holds a reference until sent. */
            if (!node_relay_send(n, p, n->buf, len, data, dlen, s->out, false, now)) {
                n->router_blocked = true;
                return;
            }
            const relay_sess_t *rs = node_relay_session(n, p->key);
            if (rs) {
                s->on_relay = true;
                memcpy(s->relay, rs->via, RUMOR_KEY_LEN);
            }
        } else if (c) {
            atomic_fetch_add(&s->out->refs, 1);
            zmq_msg_init_data(&payload, (void *)data, dlen, chunk_free_cb, s->out);
            if (!node_router_send(n, c, n->buf, len, &payload)) { /* (the payload is released) */
                n->router_blocked = true;
                return;
            }
            s->on_router = true;
        } else {
            atomic_fetch_add(&s->out->refs, 1);
            zmq_msg_init_data(&payload, (void *)data, dlen, chunk_free_cb, s->out);
            if (!node_dealer_send(n, p, n->buf, len, &payload)) return; /* full: resume when it drains */
            s->on_dealer = true;
        }
        if (path != PATH_RELAY) { /* (node_relay_send counts what it sends) */
            n->msgs_out++;
            n->bytes_out += len + dlen;
        }
        s->next++;
    }
    if (s->out && s->next >= s->chunks) {
        /* All handed over: while libzmq holds some of it, our reference stays (held), so that
         * a link that dies under it can be let go of (rumor_node_give_up). */
        if (atomic_load(&s->out->refs) == 1) {
            node_outgoing_unref(s->out); /* (all sent already) */
        } else {
            if (n->n_held == HELD_MAX) node_release_held(n);
            if (n->n_held == HELD_MAX) { /* (the oldest is no longer tracked; its chunks still go) */
                node_outgoing_unref(n->held[0].o);
                memmove(n->held, n->held + 1, (HELD_MAX - 1) * sizeof n->held[0]);
                n->n_held--;
            }
            held_t *h = &n->held[n->n_held++];
            h->o = s->out;
            /* (relayed: the chunks wait on the relay's connection, either way) */
            memcpy(h->key, s->on_relay ? s->relay : p->key, RUMOR_KEY_LEN);
            h->dealer = s->on_relay || s->on_dealer;
            h->router = s->on_relay || s->on_router;
        }
        s->out = NULL;
    }
}

bool rumor_node_relayed(rumor_node_t *n, const uint8_t peer[32])
{
    return node_reach(n, peer, rumor_now_ms()) == PATH_RELAY;
}

uint64_t rumor_node_sending_since(rumor_node_t *n, const uint8_t peer[32])
{
    const dial_t *p = node_find_peer(n, peer);
    return p && p->send.out ? p->send.since : 0;
}

/* What libzmq holds on the connections to key (our dial, and its connection to us) goes: the
 * dial is closed (libzmq drops what it holds, releasing the buffers) and dialled again at
 * once; its connection to us is shut down (it dials again). */
static void let_go(rumor_node_t *n, const uint8_t *key, bool dealer, bool router, uint64_t now)
{
    dial_t *q = dealer ? node_find_peer(n, key) : NULL;
    if (q && q->dealer) {
        node_close_dealer(q); /* (a newer model in that DEALER goes with it) */
        q->retry_at = now;
    }
    const conn_t *c = router ? node_find_conn(n, key, false, now) : NULL;
    if (c) (void)rumor_guard_cut(n->guard, c->fd, c->fd_serial);
}

/* p's model still being handed to libzmq: the rest is not sent, and what libzmq holds of it
 * goes with the connection it waits on (p's, or the relay's). */
static void give_up_out(rumor_node_t *n, dial_t *p, uint64_t now)
{
    char id[RUMOR_SHORT_ID_LEN + 1];
    rumor_key_short_id(id, p->key);
    rumor_log(RUMOR_LOG_DEBUG, "a model to %s is stuck on its link: given up", id);
    n->models_given_up++;
    const bool dealer = p->send.on_dealer, router = p->send.on_router, relay = p->send.on_relay;
    uint8_t via[RUMOR_KEY_LEN];
    memcpy(via, p->send.relay, RUMOR_KEY_LEN);
    node_outgoing_unref(p->send.out);
    p->send.out = NULL;
    let_go(n, p->key, dealer, router, now);
    if (relay) let_go(n, via, true, true, now);
}

void rumor_node_abandon(rumor_node_t *n, const uint8_t peer[32])
{
    dial_t *p = node_find_peer(n, peer);
    if (p && p->send.out) give_up_out(n, p, rumor_now_ms());
}

int rumor_node_give_up(rumor_node_t *n, bool (*which)(void *arg, void *ctx), void *ctx)
{
    const uint64_t now = rumor_now_ms();
    int k = 0;
    node_release_held(n);
    for (int i = 0; i < n->n_held; i++)
        if (which(n->held[i].o->arg, ctx)) {
            let_go(n, n->held[i].key, n->held[i].dealer, n->held[i].router, now);
            n->models_given_up++;
            k++;
        }
    for (int i = 0; i < MAX_PEERS; i++) {
        dial_t *p = &n->peers[i];
        if (p->used && p->send.out && which(p->send.out->arg, ctx)) {
            give_up_out(n, p, now);
            k++;
        }
    }
    return k;
}

/* Whether m is a model the protocol can carry: sizes, weights, and for encoded chunks the
 * length its codec implies for each. */
static bool model_fits(const rumor_wire_model_t *m)
{
    const size_t count = m->count, cp = m->chunk_params;
    const rumor_proto_codec_t codec = m->head.codec;
    if (count == 0 || cp == 0 || count > RUMOR_PROTO_MAX_PARAMS || rumor_chunks(count, cp) > RUMOR_PROTO_MAX_CHUNKS ||
        !(m->w > 0.0 && m->w <= RUMOR_PROTO_MAX_WEIGHT) || codec < RUMOR_CODEC_F32 || codec > RUMOR_CODEC_LAST)
        return false;
    const size_t chunks = rumor_chunks(count, cp);
    for (size_t c = 0; m->chunk_w && c < chunks; c++)
        if (!(m->w * m->chunk_w[c] > 0.0 && m->w * m->chunk_w[c] <= RUMOR_PROTO_MAX_WEIGHT)) return false;
    if (codec == RUMOR_CODEC_F32) return m->params && cp * sizeof(float) <= RUMOR_PROTO_MAX_PAYLOAD;
    if (!m->enc || !m->enc_off) return false;
    for (size_t c = 0; c < chunks; c++) {
        const size_t nc = count - c * cp < cp ? count - c * cp : cp, len = m->enc_off[c + 1] - m->enc_off[c];
        size_t want = 0;
        if (m->enc_off[c + 1] < m->enc_off[c] || len > RUMOR_PROTO_MAX_PAYLOAD ||
            rumor_proto_payload_len(codec, nc, len / 8, &want) != RUMOR_OK || want != len)
            return false; /* the header must never disagree with the frame after it */
    }
    return true;
}

rumor_err_t rumor_node_send(rumor_node_t *n, const uint8_t peer[32], const rumor_wire_model_t *m,
                            void (*release)(void *), void *arg)
{
    int v = -1;
    for (int i = 0; i < rumor_memb_view_count(n->memb) && v < 0; i++)
        if (same_key(rumor_memb_view_at(n->memb, i)->key, peer)) v = i;
    if (v < 0 || !model_fits(m)) return RUMOR_EINVAL;
    /* Parameters go only to a key whose own hello we verified (gossip alone is not enough),
     * and whose certificate is still valid. */
    const conn_t *c = node_find_conn(n, peer, false, rumor_now_ms());
    if (!c || !c->admitted || (c->expires_at && unix_now() >= c->expires_at)) return RUMOR_EAUTH;
    dial_t *p = node_get_peer(n, peer, rumor_memb_view_at(n->memb, v)->addr, rumor_now_ms());
    if (!p) return RUMOR_EINVAL;
    if (p->send.out || node_peer_path(n, p, rumor_now_ms()) == PATH_NONE) return RUMOR_ECLOSED;
    outgoing_t *o = malloc(sizeof *o);
    if (!o) return RUMOR_ENOMEM;
    atomic_init(&o->refs, 1);
    o->release = release;
    o->arg = arg;
    o->wake_fd = n->wake[1];
    p->send = (sending_t){.out = o, .m = *m, .next = 0, .chunks = (uint32_t)rumor_chunks(m->count, m->chunk_params),
                          .since = rumor_now_ms()};
    node_pump(n, p);
    return RUMOR_OK;
}
