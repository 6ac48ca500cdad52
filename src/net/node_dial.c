/* node_dial.c - dials and paths (node_impl.h): our DEALERs to members and the table of them,
 * the way a message reaches a member (over our dial, back over its connection to us, or through
 * a relay), sending it there, and our hellos on each way. */
#include "node_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

void node_close_dealer(dial_t *p)
{
    if (p->send.out) node_outgoing_unref(p->send.out); /* chunks not yet queued are dropped */
    p->send.out = NULL;
    /* Stop the monitor before closing its reader: libzmq's I/O thread sends monitor events
     * blocking, and with nobody left to read them it would hang, and every socket with it. */
    if (p->monitor && p->dealer) zmq_socket_monitor(p->dealer, NULL, 0);
    if (p->dealer) zmq_close(p->dealer);
    if (p->monitor) zmq_close(p->monitor);
    p->dealer = p->monitor = NULL;
}

void node_stop_knocking(dial_t *p)
{
    if (p->knocking) close(p->knock_fd);
    p->knocking = false;
    p->knock_fd = -1;
}

void node_close_peer(dial_t *p)
{
    node_close_dealer(p);
    node_stop_knocking(p);
    memset(p, 0, sizeof *p);
    p->knock_fd = -1;
}

dial_t *node_find_peer(rumor_node_t *n, const uint8_t *key)
{
    for (int i = 0; i < MAX_PEERS; i++)
        if (n->peers[i].used && same_key(n->peers[i].key, key)) return &n->peers[i];
    return NULL;
}


void node_fill_hello(rumor_node_t *n, rumor_msg_t *m)
{
    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_HELLO;
    memcpy(m->u.hello.cert, n->cert, n->cert_len);
    m->u.hello.cert_len = n->cert_len;
    snprintf(m->u.hello.addr, sizeof m->u.hello.addr, "%s", n->self_addr);
    m->u.hello.inc = rumor_memb_incarnation(n->memb);
    m->u.hello.boot = n->boot_id;
    const uint8_t *proof = rumor_memb_proof(n->memb);
    if (proof) memcpy(m->u.hello.proof, proof, RUMOR_PROTO_PROOF_LEN);
    m->u.hello.done = atomic_load(&n->done_round);
    /* A node nobody can dial relays for nobody: it reaches only members it dials itself (a
     * peer behind another NAT is not one of them), and would only refuse. */
    m->u.hello.caps = RUMOR_CAP_RELAY | (n->relay_serve && !n->warned_unreachable ? RUMOR_CAP_RELAY_SERVE : 0) |
                      (n->warned_unreachable ? RUMOR_CAP_UNDIALABLE : 0);
    m->u.hello.site = n->site;
    m->u.hello.layout = n->cfg.layout;
}


/* The DEALER to an admitting peer, with a monitor (a refused handshake is how a peer that
 * restarted, and so forgot our knock, shows), greeted with our hello. */
bool node_open_dealer(rumor_node_t *n, dial_t *p)
{
    void *d = zmq_socket(n->ctx, ZMQ_DEALER);
    if (!d) return false;
    node_set_common(d);
    node_set_int(d, ZMQ_SNDHWM, SEND_HWM);
    node_set_int(d, ZMQ_RCVHWM, RECV_HWM); /* it may send us models (node_peer_path) */
    node_set_int(d, ZMQ_RECONNECT_IVL, 100);
    node_set_int(d, ZMQ_RECONNECT_IVL_MAX, 5000); /* exponential backoff up to 5 s */
    /* The monitor is listening before the dial starts: an event sent before its reader is
     * connected is lost, and a lost "handshake succeeded" would leave a working connection
     * unused for good (libzmq's I/O thread can connect before this thread gets on). */
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://monitor-%u", n->mon_seq++);
    if (zmq_socket_monitor(d, ep, ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                                      ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                      ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_DISCONNECTED |
                                      ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CLOSED) == 0) {
        p->monitor = zmq_socket(n->ctx, ZMQ_PAIR);
        if (p->monitor && zmq_connect(p->monitor, ep) != 0) {
            zmq_close(p->monitor);
            p->monitor = NULL;
        }
    }
    if (!p->monitor || node_set_curve_keys(n, d) != 0 || zmq_setsockopt(d, ZMQ_CURVE_SERVERKEY, p->key, RUMOR_KEY_LEN) != 0 ||
        zmq_connect(d, p->addr) != 0) {
        /* Without its monitor a refused handshake would go unseen, and an unread monitor
         * blocks libzmq's I/O thread: no DEALER then. */
        rumor_log(RUMOR_LOG_DEBUG, "cannot connect to %s: %s", p->addr, zmq_strerror(errno));
        zmq_socket_monitor(d, NULL, 0);
        if (p->monitor) zmq_close(p->monitor);
        p->monitor = NULL;
        zmq_close(d);
        return false;
    }
    p->dealer = d;
    p->auth_failed = false;
    p->linked = p->outbound = false;
    p->dial_since = rumor_now_ms();
    rumor_msg_t hello;
    node_fill_hello(n, &hello);
    /* A connection starts with our hello, whatever path others take. */
    p->hello_due = node_send_dealer(n, p, &hello) != RUMOR_OK;
    return true;
}

/* The connection to a peer, made on first use: a knock, and at once the DEALER (the knock
 * travels half a round trip, the CURVE handshake two or more, so the knock is there first;
 * if it was lost, the refused handshake makes us knock and dial again). The table is
 * bounded: when full, the least recently used peer outside the view makes room. */
dial_t *node_get_peer(rumor_node_t *n, const uint8_t *key, const char *addr, uint64_t now)
{
    dial_t *p = node_find_peer(n, key);
    if (p && (!addr || !*addr || strcmp(p->addr, addr) == 0)) {
        p->last_used = now;
        return p;
    }
    if (p) node_close_peer(p); /* it moved: reconnect to the new address */
    if (!addr || !*addr) return NULL;
    for (int i = 0; i < MAX_PEERS && !p; i++)
        if (!n->peers[i].used) p = &n->peers[i];
    if (!p) {
        dial_t *lru = NULL;
        for (int i = 0; i < MAX_PEERS; i++) {
            bool in_view = false;
            for (int k = 0; k < rumor_memb_view_count(n->memb) && !in_view; k++)
                in_view = same_key(rumor_memb_view_at(n->memb, k)->key, n->peers[i].key);
            if (!in_view && (!lru || n->peers[i].last_used < lru->last_used)) lru = &n->peers[i];
        }
        if (!lru) return NULL;
        node_close_peer(lru);
        p = lru;
    }
    memset(p, 0, sizeof *p);
    p->used = true;
    p->knock_fd = -1;
    memcpy(p->key, key, RUMOR_KEY_LEN);
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    p->last_used = now;
    node_knock_start(n, p, now);
    if (!node_open_dealer(n, p)) {
        node_close_peer(p);
        return NULL;
    }
    return p;
}

/* Encode msg into n->buf (its seq set): its length, 0 when it cannot be encoded. */
size_t node_encode(rumor_node_t *n, rumor_msg_t *msg)
{
    size_t len;
    msg->seq = msg->type == RUMOR_MSG_PING || msg->type == RUMOR_MSG_PING_REQ ? msg->seq : ++n->seq;
    if (rumor_proto_encode(msg, n->buf, RUMOR_PROTO_MAX_HEADER, &len) != RUMOR_OK) {
        rumor_log(RUMOR_LOG_WARN, "not sending an invalid %s", rumor_proto_type_name(msg->type));
        return 0;
    }
    return len;
}

/* One message (frame, and payload when not NULL: consumed either way) on our DEALER to p,
 * without blocking; false when it is full (then nothing went). */
bool node_dealer_send(rumor_node_t *n, dial_t *p, const void *frame, size_t len, zmq_msg_t *payload)
{
    int events = 0;
    size_t sz = sizeof events;
    zmq_getsockopt(p->dealer, ZMQ_EVENTS, &events, &sz);
    if (!(events & ZMQ_POLLOUT) || zmq_send(p->dealer, frame, len, (payload ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0) {
        if (payload) zmq_msg_close(payload);
        return false;
    }
    /* After the first frame of a message the second goes too: HWM counts messages. */
    if (payload && zmq_msg_send(payload, p->dealer, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(payload);
        n->drops[DROP_SEND_FULL]++;
    }
    return true;
}

/* msg on p's DEALER, counted as sent; EINVAL when it does not encode, ETIMEDOUT when the
 * DEALER is full (not counted: node_send_dealer counts it a drop, a retried hello does not). */
static rumor_err_t dealer_put(rumor_node_t *n, dial_t *p, rumor_msg_t *msg)
{
    const size_t len = node_encode(n, msg);
    if (!len) return RUMOR_EINVAL;
    if (!node_dealer_send(n, p, n->buf, len, NULL)) return RUMOR_ETIMEDOUT;
    n->msgs_out++;
    n->bytes_out += len;
    return RUMOR_OK;
}

rumor_err_t node_send_dealer(rumor_node_t *n, dial_t *p, rumor_msg_t *msg)
{
    const rumor_err_t rc = dealer_put(n, p, msg);
    if (rc == RUMOR_ETIMEDOUT) n->drops[DROP_SEND_FULL]++;
    return rc;
}

/* How the member `key` is reached now, without node_peer_path's side effects (status,
 * metrics, choosing relays): PATH_DEALER over our dial once it connected, PATH_ROUTER back
 * over the connection it opened to us, PATH_RELAY through a relay (node_peer_path chose one,
 * or, for a member we do not dial, a session is up), else PATH_NONE. */
path_t node_reach(rumor_node_t *n, const uint8_t *key, uint64_t now)
{
    const dial_t *p = node_find_peer(n, key);
    if (p && p->dealer && p->linked) return PATH_DEALER;
    const conn_t *c = node_find_conn(n, key, false, now);
    if (c && c->admitted && c->rid_len) return PATH_ROUTER;
    if (p && p->relayed) return PATH_RELAY;
    const relay_sess_t *s = node_relay_session(n, key);
    return s && s->state == SESS_READY && (!p || !p->dealer) ? PATH_RELAY : PATH_NONE;
}

/* How a message reaches p now: over our DEALER once its handshake passed; before that, and
 * for good once we gave up dialling, back over the connection p opened to our ROUTER if it
 * has one (a peer behind NAT is reached that way: PROTOCOL.md, "Reachability"); else the
 * DEALER, which holds messages until it connects. A dial that has not connected after
 * DIAL_GIVE_UP_MS while p talks to us over its own connection is given up (counted), and
 * tried again after REDIAL_MS, unless it connected before at this address. */
path_t node_peer_path(rumor_node_t *n, dial_t *p, uint64_t now)
{
    if (p->dealer && p->linked) {
        p->relayed = false;
        return PATH_DEALER;
    }
    const conn_t *c = node_find_conn(n, p->key, false, now);
    const bool back = c && c->admitted && c->rid_len > 0;
    /* Our dial is stale after DIAL_GIVE_UP_MS, or at once when nothing listens at its address
     * (the knock met a port-unreachable): membership's hellos must not queue unanswered in a
     * DEALER that cannot connect, or the peer is forgotten before a relay carries them. */
    const bool stale = p->dealer && (now - p->dial_since >= DIAL_GIVE_UP_MS || (p->unreachable && !p->answered));
    /* Given up only for a member our dial never reached at this address, while it talks to us
     * over its own connection (a message came on it since our dial began). One we reached before
     * can be dialled, and a dial to it that fails now is the network's: it goes on (libzmq
     * connects again once the link is back). And a connection the member opened long ago may be
     * as dead as our dial: a partition cuts both ways, and a quiet member sends nothing that
     * would find out. Giving dials up on such evidence left a quiet swarm's halves apart after
     * a partition healed, until REDIAL_MS. */
    const bool talks = back && c->rid_ms >= p->dial_since;
    char id[RUMOR_SHORT_ID_LEN + 1];
    if (stale && talks && strcmp(c->dialled, p->addr) != 0) {
        /* It talks to us over its own connection, and we cannot dial it: stop trying. */
        rumor_key_short_id(id, p->key);
        rumor_log(RUMOR_LOG_INFO, "peer %s cannot be dialled at %s: reaching it over its own connection", id, p->addr);
        n->dials_given_up++;
        /* A model on its way goes on over that connection, from its first chunk: what the
         * DEALER held never left (it never connected), and closing it drops those. */
        const sending_t keep = p->send;
        p->send.out = NULL;
        node_close_dealer(p);
        p->send = keep;
        p->send.next = 0;
        p->send.on_dealer = false;
        node_stop_knocking(p);
        p->outbound = true;
        p->retry_at = now + REDIAL_MS;
    }
    if (back) {
        p->relayed = false;
        return PATH_ROUTER;
    }
    if (p->dealer && !stale) return PATH_DEALER;
    /* Neither way works (yet): through a relay, while our dial keeps trying at libzmq's
     * bounded pace (a partition that heals, or a peer that is down for now, is dialled
     * again as soon as it can be). */
    if (node_relay_possible(n, p, now)) {
        if (!p->relayed) {
            rumor_key_short_id(id, p->key);
            rumor_log(RUMOR_LOG_INFO, "peer %s cannot be dialled at %s (yet): reaching it through a relay", id, p->addr);
        }
        p->relayed = true;
        return PATH_RELAY;
    }
    return p->dealer ? PATH_DEALER : PATH_NONE;
}

/* One message (frame, and payload when not NULL: consumed either way) back over c's own
 * connection to our ROUTER. false when it cannot go now (that connection is full: EAGAIN; or
 * gone: forgotten). */
bool node_router_send(rumor_node_t *n, conn_t *c, const void *frame, size_t len, zmq_msg_t *payload)
{
    if (zmq_send(n->router, c->rid, c->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        if (errno == EHOSTUNREACH) c->rid_len = 0; /* that connection is gone */
        if (payload) zmq_msg_close(payload);
        return false;
    }
    /* After the routing frame the rest of the message goes (the high-water mark counts
     * messages). */
    const bool ok = zmq_send(n->router, frame, len, (payload ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) >= 0 &&
                    (!payload || zmq_msg_send(payload, n->router, ZMQ_DONTWAIT) >= 0);
    if (!ok && payload) zmq_msg_close(payload);
    n->reverse_msgs += ok;
    return ok;
}

/* Our hello goes first on every connection of a peer's we answer over. */
bool node_router_hello(rumor_node_t *n, conn_t *c)
{
    if (c->rid_hello) return true;
    rumor_msg_t hello;
    node_fill_hello(n, &hello);
    hello.seq = ++n->seq;
    /* (its own buffer: a caller may hold a frame in n->buf) */
    uint8_t hb[RUMOR_PROTO_CERT_MAX + 512];
    size_t len = 0;
    if (rumor_proto_encode(&hello, hb, sizeof hb, &len) != RUMOR_OK || !node_router_send(n, c, hb, len, NULL))
        return false;
    n->msgs_out++;
    n->bytes_out += len;
    c->rid_hello = true;
    return true;
}

rumor_err_t node_send_msg(rumor_node_t *n, dial_t *p, rumor_msg_t *msg)
{
    const uint64_t now = rumor_now_ms();
    const path_t path = node_peer_path(n, p, now);
    if (path == PATH_NONE) return RUMOR_ECLOSED; /* knocking again: membership copes with a lost message */
    if (path == PATH_DEALER) return node_send_dealer(n, p, msg);
    if (path == PATH_RELAY) {
        const size_t len = node_encode(n, msg);
        if (!len) return RUMOR_EINVAL;
        return node_relay_send(n, p, n->buf, len, NULL, 0, NULL, msg->type == RUMOR_MSG_HELLO, now) ? RUMOR_OK
                                                                                                 : RUMOR_ETIMEDOUT;
    }
    conn_t *c = node_find_conn(n, p->key, false, now);
    if (msg->type != RUMOR_MSG_HELLO && !node_router_hello(n, c)) return RUMOR_ETIMEDOUT;
    const size_t len = node_encode(n, msg);
    if (!len) return RUMOR_EINVAL;
    if (!node_router_send(n, c, n->buf, len, NULL)) {
        n->drops[DROP_SEND_FULL]++;
        return RUMOR_ETIMEDOUT;
    }
    c->rid_hello |= msg->type == RUMOR_MSG_HELLO;
    n->msgs_out++;
    n->bytes_out += len;
    return RUMOR_OK;
}

/* msg with a frame 2 (plen bytes of payload, copied) on our DEALER to p or back over its own
 * connection; not through a relay (ECLOSED), whose sealed frames are for models' chunks. */
rumor_err_t node_send_payload(rumor_node_t *n, dial_t *p, rumor_msg_t *msg, const void *payload, size_t plen)
{
    const uint64_t now = rumor_now_ms();
    const path_t path = node_peer_path(n, p, now);
    if (path == PATH_NONE || path == PATH_RELAY) return RUMOR_ECLOSED;
    conn_t *c = path == PATH_ROUTER ? node_find_conn(n, p->key, false, now) : NULL;
    if (c && !node_router_hello(n, c)) return RUMOR_ETIMEDOUT; /* (our hello first on that connection) */
    const size_t len = node_encode(n, msg);
    if (!len) return RUMOR_EINVAL;
    zmq_msg_t z;
    if (zmq_msg_init_size(&z, plen) != 0) return RUMOR_ENOMEM;
    memcpy(zmq_msg_data(&z), payload, plen);
    if (!(c ? node_router_send(n, c, n->buf, len, &z) : node_dealer_send(n, p, n->buf, len, &z))) {
        n->drops[DROP_SEND_FULL]++;
        return RUMOR_ETIMEDOUT;
    }
    n->msgs_out++;
    n->bytes_out += len + plen;
    return RUMOR_OK;
}

/* The connection a member's message came in on: where we answer it when we cannot dial it. A
 * routing id that another key held is not that key's any more. */
void node_note_rid(rumor_node_t *n, conn_t *c, zmq_msg_t *rid, uint64_t now)
{
    c->rid_ms = now;
    if (n->rx_fd >= 0) {
        c->fd = n->rx_fd;
        c->fd_serial = n->rx_serial;
    }
    const size_t len = zmq_msg_size(rid);
    if (len == 0 || len > RID_MAX || (c->rid_len == len && memcmp(c->rid, zmq_msg_data(rid), len) == 0)) return;
    for (int i = 0; i < n->n_conns; i++) {
        conn_t *o = &n->conns[i];
        if (o->used && o != c && o->rid_len == len && memcmp(o->rid, zmq_msg_data(rid), len) == 0) o->rid_len = 0;
    }
    memcpy(c->rid, zmq_msg_data(rid), len);
    c->rid_len = (uint8_t)len;
    c->rid_hello = false;
}

/* Our hello on p's DEALER once it is connected, if it changed since the DEALER's first one
 * (a DEALER still connecting holds that one, with what we said then) or did not go (a full
 * DEALER: tried again each turn of the loop until it goes, not counted as a drop each time). */
void node_resend_hello(rumor_node_t *n, dial_t *p)
{
    if (!p->hello_due || !p->dealer || !p->linked) return;
    rumor_msg_t hello;
    node_fill_hello(n, &hello);
    p->hello_due = dealer_put(n, p, &hello) != RUMOR_OK;
}

/* Our hello again to every member we reach: what it says of us changed. Over our dials now,
 * back over members' connections now (and first on any new one), first in every relay
 * session. */
void node_greet_all(rumor_node_t *n)
{
    /* Whether only members we dial reach us is part of our signed record: a change is a new
     * incarnation, signed before any hello says it (node_fill_hello, hello_undialable). */
    rumor_memb_set_undialable(n->memb, n->warned_unreachable || n->site != 0);
    for (int i = 0; i < MAX_PEERS; i++) {
        dial_t *p = &n->peers[i];
        if (!p->used || !p->dealer) continue;
        p->hello_due = true;
        node_resend_hello(n, p);
    }
    for (int i = 0; i < n->n_conns; i++) {
        conn_t *c = &n->conns[i];
        if (!c->used) continue;
        c->rid_hello = false;
        if (c->admitted && c->rid_len) (void)node_router_hello(n, c);
    }
    for (int i = 0; i < RELAY_SESSIONS; i++) n->sess[i].hello_sent = false;
}
