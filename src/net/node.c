/* node.c - the ZeroMQ driver: sockets, the poll loop, and the membership state machine on the
 * wire; admission, the control socket and models are in node_admit.c, node_control.c and
 * node_models.c (node_impl.h). */
#include "net/node_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

/* ---- sockets ---- */

static rumor_err_t dealer_send(rumor_node_t *n, dial_t *p, rumor_msg_t *msg);

static int set_curve_keys(rumor_node_t *n, void *s)
{
    return zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, rumor_secret_key_public(n->key), RUMOR_KEY_LEN) |
           zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, rumor_secret_key_bytes(n->key), RUMOR_KEY_LEN);
}

void node_set_int(void *s, int opt, int v) { (void)zmq_setsockopt(s, opt, &v, sizeof v); }

static void set_common(void *s)
{
    node_set_int(s, ZMQ_LINGER, 0);
    node_set_int(s, ZMQ_IPV6, 1);
    int64_t max = MAX_MSG_SIZE;
    (void)zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof max);
    /* ZeroMQ heartbeats find a dead TCP connection without waiting for the kernel. */
    node_set_int(s, ZMQ_HEARTBEAT_IVL, 1000);
    node_set_int(s, ZMQ_HEARTBEAT_TIMEOUT, 5000);
    node_set_int(s, ZMQ_HEARTBEAT_TTL, 10000);
}

/* From any thread (libzmq's I/O thread frees chunks). When one reference is left, it may be
 * the node's on a held model (held_t): the node is woken to let the model go. Nothing of o is
 * read after the decrement: the node may free o the moment one reference is left. */
void node_outgoing_unref(outgoing_t *o)
{
    const int wake_fd = o->wake_fd;
    const int left = atomic_fetch_sub(&o->refs, 1) - 1;
    if (left == 0) {
        if (o->release) o->release(o->arg);
        free(o);
    } else if (left == 1 && wake_fd >= 0) {
        const char b = 1;
        ssize_t k = write(wake_fd, &b, 1); /* (a full pipe already wakes the loop) */
        (void)k;
    }
}

/* Held models that libzmq has sent (or dropped) all of: our reference goes, and with the last
 * one each model's buffer. */
void node_release_held(rumor_node_t *n)
{
    int kept = 0;
    for (int i = 0; i < n->n_held; i++) {
        if (atomic_load(&n->held[i].o->refs) == 1) node_outgoing_unref(n->held[i].o);
        else n->held[kept++] = n->held[i];
    }
    n->n_held = kept;
}

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

static void close_peer(dial_t *p)
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
    m->u.hello.done = atomic_load(&n->done_round);
    /* A node nobody can dial relays for nobody: it reaches only members it dials itself (a
     * peer behind another NAT is not one of them), and would only refuse. */
    m->u.hello.caps = RUMOR_CAP_RELAY | (n->relay_serve && !n->warned_unreachable ? RUMOR_CAP_RELAY_SERVE : 0) |
                      (n->warned_unreachable ? RUMOR_CAP_UNDIALABLE : 0);
    m->u.hello.site = n->site;
}


/* The DEALER to an admitting peer, with a monitor (a refused handshake is how a peer that
 * restarted, and so forgot our knock, shows), greeted with our hello. */
bool node_open_dealer(rumor_node_t *n, dial_t *p)
{
    void *d = zmq_socket(n->ctx, ZMQ_DEALER);
    if (!d) return false;
    set_common(d);
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
    if (!p->monitor || set_curve_keys(n, d) != 0 || zmq_setsockopt(d, ZMQ_CURVE_SERVERKEY, p->key, RUMOR_KEY_LEN) != 0 ||
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
    p->hello_due = dealer_send(n, p, &hello) != RUMOR_OK;
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
    if (p) close_peer(p); /* it moved: reconnect to the new address */
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
        close_peer(lru);
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
        close_peer(p);
        return NULL;
    }
    return p;
}

/* Encode msg into n->buf (its seq set): its length, 0 when it cannot be encoded. */
static size_t encode(rumor_node_t *n, rumor_msg_t *msg)
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
 * DEALER is full (not counted: dealer_send counts it a drop, a retried hello does not). */
static rumor_err_t dealer_put(rumor_node_t *n, dial_t *p, rumor_msg_t *msg)
{
    const size_t len = encode(n, msg);
    if (!len) return RUMOR_EINVAL;
    if (!node_dealer_send(n, p, n->buf, len, NULL)) return RUMOR_ETIMEDOUT;
    n->msgs_out++;
    n->bytes_out += len;
    return RUMOR_OK;
}

static rumor_err_t dealer_send(rumor_node_t *n, dial_t *p, rumor_msg_t *msg)
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
    if (path == PATH_DEALER) return dealer_send(n, p, msg);
    if (path == PATH_RELAY) {
        const size_t len = encode(n, msg);
        if (!len) return RUMOR_EINVAL;
        return node_relay_send(n, p, n->buf, len, NULL, 0, NULL, msg->type == RUMOR_MSG_HELLO, now) ? RUMOR_OK
                                                                                                 : RUMOR_ETIMEDOUT;
    }
    conn_t *c = node_find_conn(n, p->key, false, now);
    if (msg->type != RUMOR_MSG_HELLO && !node_router_hello(n, c)) return RUMOR_ETIMEDOUT;
    const size_t len = encode(n, msg);
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

/* m back through the ROUTER on the connection a message came in on (rid), with no hello
 * first: a bye, or the hello itself. */
static void reply(rumor_node_t *n, zmq_msg_t *rid, rumor_msg_t *m)
{
    m->seq = ++n->seq;
    size_t len;
    if (rumor_proto_encode(m, n->buf, RUMOR_PROTO_MAX_HEADER, &len) != RUMOR_OK) return;
    zmq_msg_t id;
    zmq_msg_init(&id);
    zmq_msg_copy(&id, rid);
    if (zmq_msg_send(&id, n->router, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&id);
        return;
    }
    (void)zmq_send(n->router, n->buf, len, ZMQ_DONTWAIT);
}

/* A refusal, or a request to say hello first, on the connection rid names. */
void node_reply_bye(rumor_node_t *n, zmq_msg_t *rid, const char *why)
{
    if (!rid) return; /* (it came on our own DEALER: the peer we dialled is told nothing) */
    rumor_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = RUMOR_MSG_BYE;
    snprintf(m.u.bye.why, sizeof m.u.bye.why, "%s", why);
    reply(n, rid, &m);
}

/* ---- membership <-> wire ---- */

static void upd_to_wire(rumor_proto_peer_t *w, const rumor_memb_update_t *u)
{
    memcpy(w->key, u->key, RUMOR_KEY_LEN);
    snprintf(w->addr, sizeof w->addr, "%s", u->addr);
    w->inc = u->inc;
    w->state = (rumor_proto_state_t)u->state;
    w->boot = u->boot;
    w->cert_len = u->cert_len;
    memcpy(w->cert, u->cert, u->cert_len);
}

static void upd_from_wire(rumor_memb_update_t *u, const rumor_proto_peer_t *w)
{
    memcpy(u->key, w->key, RUMOR_KEY_LEN);
    snprintf(u->addr, sizeof u->addr, "%s", w->addr);
    u->inc = w->inc;
    u->state = (rumor_memb_state_t)w->state;
    u->boot = w->boot;
    /* A certificate too long for membership cannot be a valid one: none, then (dropped). */
    u->cert_len = w->cert_len <= RUMOR_MEMB_CERT_MAX ? (uint16_t)w->cert_len : 0;
    memcpy(u->cert, w->cert, u->cert_len);
}

static void memb_to_wire(rumor_node_t *n, rumor_msg_t *w, const rumor_memb_msg_t *m)
{
    memset(w, 0, sizeof *w);
    switch (m->kind) {
    case RUMOR_MEMB_HELLO: node_fill_hello(n, w); break;
    case RUMOR_MEMB_PEERS:
        w->type = RUMOR_MSG_PEERS;
        w->u.peers.count = (size_t)m->n_peers;
        for (int i = 0; i < m->n_peers; i++) upd_to_wire(&w->u.peers.peers[i], &m->peers[i]);
        break;
    case RUMOR_MEMB_PING:
        w->type = RUMOR_MSG_PING;
        w->seq = m->seq;
        w->u.ping.inc = m->inc;
        w->u.ping.upd_count = (size_t)m->n_upd;
        for (int i = 0; i < m->n_upd; i++) upd_to_wire(&w->u.ping.upd[i], &m->upd[i]);
        break;
    case RUMOR_MEMB_PING_REQ:
        w->type = RUMOR_MSG_PING_REQ;
        w->seq = m->seq;
        memcpy(w->u.ping_req.target, m->target, RUMOR_KEY_LEN);
        snprintf(w->u.ping_req.target_addr, sizeof w->u.ping_req.target_addr, "%s", m->target_addr);
        w->u.ping_req.upd_count = (size_t)m->n_upd;
        for (int i = 0; i < m->n_upd; i++) upd_to_wire(&w->u.ping_req.upd[i], &m->upd[i]);
        break;
    case RUMOR_MEMB_ACK:
        w->type = RUMOR_MSG_ACK;
        w->u.ack.ack = m->ack;
        w->u.ack.has_target = m->has_target;
        memcpy(w->u.ack.target, m->target, RUMOR_KEY_LEN);
        w->u.ack.upd_count = (size_t)m->n_upd;
        for (int i = 0; i < m->n_upd; i++) upd_to_wire(&w->u.ack.upd[i], &m->upd[i]);
        break;
    case RUMOR_MEMB_BYE: w->type = RUMOR_MSG_BYE; break;
    }
}

/* False for messages membership does not take (model, ...). */
bool node_memb_from_wire(rumor_memb_msg_t *m, const rumor_msg_t *w)
{
    memset(m, 0, sizeof *m);
    switch (w->type) {
    case RUMOR_MSG_HELLO:
        m->kind = RUMOR_MEMB_HELLO;
        m->inc = w->u.hello.inc;
        snprintf(m->addr, sizeof m->addr, "%s", w->u.hello.addr);
        m->boot = w->u.hello.boot;
        m->cert_len = w->u.hello.cert_len <= RUMOR_MEMB_CERT_MAX ? (uint16_t)w->u.hello.cert_len : 0;
        memcpy(m->cert, w->u.hello.cert, m->cert_len);
        return true;
    case RUMOR_MSG_PEERS:
        m->kind = RUMOR_MEMB_PEERS;
        m->n_peers = (int)w->u.peers.count;
        for (size_t i = 0; i < w->u.peers.count; i++) upd_from_wire(&m->peers[i], &w->u.peers.peers[i]);
        return true;
    case RUMOR_MSG_PING:
        m->kind = RUMOR_MEMB_PING;
        m->seq = w->seq;
        m->inc = w->u.ping.inc;
        m->n_upd = (int)w->u.ping.upd_count;
        for (size_t i = 0; i < w->u.ping.upd_count; i++) upd_from_wire(&m->upd[i], &w->u.ping.upd[i]);
        return true;
    case RUMOR_MSG_PING_REQ:
        m->kind = RUMOR_MEMB_PING_REQ;
        m->seq = w->seq;
        m->has_target = true;
        memcpy(m->target, w->u.ping_req.target, RUMOR_KEY_LEN);
        snprintf(m->target_addr, sizeof m->target_addr, "%s", w->u.ping_req.target_addr);
        m->n_upd = (int)w->u.ping_req.upd_count;
        for (size_t i = 0; i < w->u.ping_req.upd_count; i++) upd_from_wire(&m->upd[i], &w->u.ping_req.upd[i]);
        return true;
    case RUMOR_MSG_ACK:
        m->kind = RUMOR_MEMB_ACK;
        m->ack = w->u.ack.ack;
        m->has_target = w->u.ack.has_target;
        memcpy(m->target, w->u.ack.target, RUMOR_KEY_LEN);
        m->n_upd = (int)w->u.ack.upd_count;
        for (size_t i = 0; i < w->u.ack.upd_count; i++) upd_from_wire(&m->upd[i], &w->u.ack.upd[i]);
        return true;
    case RUMOR_MSG_BYE: m->kind = RUMOR_MEMB_BYE; return true;
    default: return false;
    }
}



/* Carry out what membership asks for. */
static void run_actions(rumor_node_t *n, uint64_t now)
{
    rumor_memb_action_t *ap = &n->act;
    rumor_msg_t *wp = &n->wmsg2;
    while (rumor_memb_next_action(n->memb, ap)) {
        char id[RUMOR_SHORT_ID_LEN + 1];
        rumor_key_short_id(id, ap->key);
        if (ap->kind == RUMOR_MEMB_ACT_UP) {
            rumor_log(RUMOR_LOG_INFO, "peer %s up at %s", id, ap->addr);
            continue;
        }
        if (ap->kind == RUMOR_MEMB_ACT_DOWN) {
            rumor_log(RUMOR_LOG_INFO, "peer %s %s", id, rumor_memb_state_name(ap->state));
            dial_t *p = node_find_peer(n, ap->key);
            if (p && ap->state != RUMOR_MEMB_ALIVE) close_peer(p);
            if (ap->state == RUMOR_MEMB_LEFT) {
                /* It said bye: if it comes back it says hello again; until then we do not
                 * know where it listens. (Admission itself is per handshake.) */
                conn_t *c = node_find_conn(n, ap->key, false, now);
                if (c) c->addr[0] = 0;
            }
            continue;
        }
        dial_t *p = node_get_peer(n, ap->key, ap->addr, now);
        if (!p) continue;
        memb_to_wire(n, wp, &ap->msg);
        if (wp->type == RUMOR_MSG_ACK) { /* (where the ping it answers came from, as we saw it) */
            conn_t *c = node_find_conn(n, ap->key, false, now);
            if (c && c->seen_fresh) memcpy(wp->u.ack.seen, c->seen, sizeof c->seen);
            if (c) c->seen_fresh = false;
        }
        (void)node_send_msg(n, p, wp);
    }
}

/* ---- admission ---- */


/* One event from a socket monitor: false when none is waiting. value is the event's value
 * (the descriptor for connection events). */
static bool monitor_event(void *mon, uint16_t *event, uint32_t *value)
{
    zmq_msg_t ev, ep;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return false;
    }
    *event = 0;
    *value = 0;
    if (zmq_msg_size(&ev) >= 6) {
        memcpy(event, zmq_msg_data(&ev), 2);
        memcpy(value, (const uint8_t *)zmq_msg_data(&ev) + 2, 4);
    }
    bool more = zmq_msg_more(&ev);
    zmq_msg_close(&ev);
    if (more) {
        zmq_msg_init(&ep);
        (void)zmq_msg_recv(&ep, mon, 0);
        zmq_msg_close(&ep);
    }
    return true;
}

/* A connection opened or closed, for the guard: on our ROUTER (p NULL: a stranger until its
 * first message), or on the DEALER we dialled p with. */
static void guard_event(rumor_node_t *n, const dial_t *p, uint16_t event, uint32_t fd, uint64_t now)
{
    if (event == ZMQ_EVENT_ACCEPTED || event == ZMQ_EVENT_CONNECTED)
        (void)rumor_guard_open(n->guard, (int)fd, p ? p->key : NULL, now); /* (a refusal is counted there) */
    else if (event == ZMQ_EVENT_DISCONNECTED || event == ZMQ_EVENT_CLOSED)
        rumor_guard_close(n->guard, (int)fd);
}

static void handle_router_monitor(rumor_node_t *n, uint64_t now)
{
    uint16_t event;
    uint32_t value;
    while (monitor_event(n->router_mon, &event, &value)) guard_event(n, NULL, event, value, now);
}

/* Connection events of a bootstrap's DEALER: counts that explain a failed join. A
 * disconnection before any handshake succeeded means the CURVE handshake failed: with
 * CURVE that is what a wrong server key looks like from the client. */
static void handle_monitor(rumor_node_t *n, dial_t *p, uint64_t now)
{
    uint16_t event;
    uint32_t value;
    while (monitor_event(p->monitor, &event, &value)) {
        guard_event(n, p, event, value, now);
        switch (event) {
        case ZMQ_EVENT_CONNECT_RETRIED: p->conn_refused++; break;
        case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
            /* A new connection (not the first: our hello went first on that one) starts with
             * our hello too, so that the far end knows it as ours at once (guard.h: until its
             * first message, a connection is a stranger's). */
            if (p->handshakes++ > 0) p->hello_due = true;
            p->fails = 0;
            p->linked = true;
            p->dialled_noted = false; /* (note_dialled) */
            break;
        case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
            /* Its ZAP handler refused our key: our knock did not reach it (lost, or it
             * restarted since), or it now refuses us. libzmq gives up on this connection;
             * the loop knocks again and dials anew, and the answer says which. */
            p->auth_failed = true;
            break;
        case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL: p->handshake_failed++; break;
        case ZMQ_EVENT_DISCONNECTED:
            if (p->handshakes == 0) p->handshake_failed++;
            if (p->linked) p->dial_since = now; /* libzmq dials again: that try gets its own time */
            p->linked = false;
            break;
        case ZMQ_EVENT_CLOSED: p->linked = false; break;
        default: break;
        }
    }
}

/* Why no bootstrap let us in, in words a user can act on; false while there is hope. */
static bool join_failed(rumor_node_t *n, uint64_t waited_ms, char why[400], size_t len)
{
    if (rumor_memb_view_count(n->memb) > 0) n->joined = true;
    if (n->joined || n->n_boot == 0 || rumor_memb_view_count(n->memb) > 0) return false;
    if (n->cfg.join_timeout_ms == 0 || waited_ms < n->cfg.join_timeout_ms) return false;
    const rumor_addr_t *b = &n->boot[0];
    dial_t *p = node_find_peer(n, b->key);
    char host[64]; /* shortened for the message; the full address is in the user's command */
    snprintf(host, sizeof host, "%.63s", b->endpoint + 6);
    const char *port = strrchr(b->endpoint, ':');
    char real[RUMOR_KEY_Z85_LEN + 1] = "";
    if (p && p->wrong_key) rumor_key_to_z85(real, p->real_key);
    if (p && p->wrong_key)
        snprintf(why, len, "the node at %s has the key %s, not the key in its rumor:// address (copy the "
                           "address the node printed)", host, real);
    else if (p && p->unreachable && !p->answered)
        snprintf(why, len, "cannot reach the bootstrap at %s: connection refused (is a rumor node listening "
                           "there, on that port?)", host);
    else if (p && !p->answered)
        snprintf(why, len, "no answer from the bootstrap at %s within %.0f s (wrong host, or a firewall? a node "
                           "needs TCP and UDP port %s open)", host, (double)n->cfg.join_timeout_ms / 1000.0,
                 port ? port + 1 : "?");
    else if (p && p->handshake_failed > 0 && p->handshakes == 0)
        snprintf(why, len, "the bootstrap at %s did not complete the encrypted handshake: the key in its "
                           "rumor:// address is probably wrong (copy the address the node printed)", host);
    else if (p && p->conn_refused > 0 && p->handshakes == 0)
        snprintf(why, len, "cannot reach the bootstrap at %s: connection refused (is a rumor node listening "
                           "there, on that port?)", host);
    else if (p && p->handshakes > 0)
        snprintf(why, len, "the bootstrap at %s accepted the connection but no answer came back within %.0f s: "
                           "it answers at the address this node advertises (%.64s); check that it can "
                           "dial it, or give --advertise", host, (double)n->cfg.join_timeout_ms / 1000.0, n->self_addr);
    else
        snprintf(why, len, "no answer from the bootstrap at %s within %.0f s (wrong host, or a firewall?)", host,
                 (double)n->cfg.join_timeout_ms / 1000.0);
    return true;
}

/* A decoded message (n->wmsg) from the admitted-or-not member `key`: over our ROUTER (rid,
 * its connection) or over the DEALER we dialled it with (rid NULL: a member reached by its own
 * address answers there only when it cannot dial us back). The same rules either way: nothing
 * but a hello counts before a valid hello. */
/* A message of ours (frame) to the member `key` the way its message came: through the relay
 * session, or on our dial (PATH_ROUTER is answered on the connection, by the caller). Whether
 * it went. */
static bool send_back(rumor_node_t *n, const uint8_t *key, path_t via, rumor_msg_t *m)
{
    dial_t *p = node_find_peer(n, key);
    if (!p) return false;
    if (via == PATH_DEALER) return p->dealer && dealer_send(n, p, m) == RUMOR_OK;
    const size_t len = encode(n, m);
    return len && node_relay_send(n, p, n->buf, len, NULL, 0, NULL, m->type == RUMOR_MSG_HELLO, rumor_now_ms());
}

/* A bye (a refusal, or the request for a hello) to the member `key` on the way its message
 * came; whether it went. */
static bool bye_to(rumor_node_t *n, const uint8_t *key, path_t via, zmq_msg_t *rid, const char *why)
{
    if (via == PATH_ROUTER) {
        node_reply_bye(n, rid, why);
        return true;
    }
    rumor_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = RUMOR_MSG_BYE;
    snprintf(m.u.bye.why, sizeof m.u.bye.why, "%s", why);
    return send_back(n, key, via, &m);
}

/* Our hello to the member `key`, whose own we do not hold, on the way its message came. */
static void hello_to(rumor_node_t *n, const uint8_t *key, path_t via, zmq_msg_t *rid)
{
    rumor_msg_t hello;
    node_fill_hello(n, &hello);
    if (via == PATH_ROUTER) {
        if (rid) reply(n, rid, &hello);
        return;
    }
    (void)send_back(n, key, via, &hello);
}

/* Our hello again to the member c that asked for it, on the way its request came, at most
 * every HELLO_ASK_MS. */
static void greet_again(rumor_node_t *n, conn_t *c, path_t via, uint64_t now)
{
    if (c->greeted_ms && now - c->greeted_ms < HELLO_ASK_MS) return;
    c->greeted_ms = now;
    if (via == PATH_ROUTER) {
        c->rid_hello = false;
        (void)node_router_hello(n, c);
        return;
    }
    rumor_msg_t hello;
    node_fill_hello(n, &hello);
    (void)send_back(n, c->key, via, &hello);
}

/* ---- where peers see us from (PROTOCOL.md "Reachability": sites) ---- */

/* The IP in b (AF_INET: 4 bytes, AF_INET6: 16) in inet_ntop's form, IPv4 mapped into IPv6
 * written as IPv4; false (out untouched) when it does not fit. */
static bool ip_form(int family, const uint8_t *b, char out[RUMOR_PROTO_SEEN_MAX + 1])
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char t[INET6_ADDRSTRLEN];
    if (family == AF_INET6 && memcmp(b, mapped, sizeof mapped) == 0) family = AF_INET, b += 12;
    if (!inet_ntop(family, b, t, sizeof t) || strlen(t) > RUMOR_PROTO_SEEN_MAX) return false;
    memcpy(out, t, strlen(t) + 1);
    return true;
}

/* ip (an IP literal) in ip_form's form; false (out untouched) when it is not one. */
static bool ip_text(const char *ip, char out[RUMOR_PROTO_SEEN_MAX + 1])
{
    uint8_t b[16];
    if (inet_pton(AF_INET, ip, b) == 1) return ip_form(AF_INET, b, out);
    return inet_pton(AF_INET6, ip, b) == 1 && ip_form(AF_INET6, b, out);
}

/* A site's name in hellos: a 64-bit hash (FNV-1a) of the address and of the smallest key on
 * the node's own segment, top bit clear, never 0 (so it cannot be taken for the class of a
 * member nobody can dial, rumor_node_reach). The key tells apart two LANs behind one
 * carrier-grade NAT: they share the address, but not their members. */
static uint64_t site_of(const char *ip, const uint8_t lan[RUMOR_KEY_LEN])
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const char *s = "rumor site v2:"; *s; s++) h = (h ^ (uint8_t)*s) * UINT64_C(0x100000001b3);
    for (; *ip; ip++) h = (h ^ (uint8_t)*ip) * UINT64_C(0x100000001b3);
    for (int i = 0; i < RUMOR_KEY_LEN; i++) h = (h ^ lan[i]) * UINT64_C(0x100000001b3);
    return (h & ~(UINT64_C(1) << 63)) | 1;
}

/* Whether ip (ip_text's form) is not globally routable: private, shared (carrier-grade NAT),
 * loopback or link-local IPv4; unique-local, link-local or loopback IPv6. A node there is
 * likely behind NAT, and its LAN's members dialling it say nothing of how others see it. */
static bool ip_private(const char *ip)
{
    uint8_t b[16];
    if (inet_pton(AF_INET, ip, b) == 1)
        return b[0] == 10 || b[0] == 127 || (b[0] == 172 && (b[1] & 0xf0) == 16) || (b[0] == 192 && b[1] == 168) ||
               (b[0] == 100 && (b[1] & 0xc0) == 64) || (b[0] == 169 && b[1] == 254);
    if (inet_pton(AF_INET6, ip, b) != 1) return false;
    static const uint8_t loop[16] = {[15] = 1};
    return (b[0] & 0xfe) == 0xfc || (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || memcmp(b, loop, 16) == 0;
}

/* The IP of the connection the message being handled came in on (ip_form's form); false when
 * it came otherwise (over our dial, through a relay). */
static bool rx_ip(const rumor_node_t *n, char out[RUMOR_PROTO_SEEN_MAX + 1])
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (n->rx_fd < 0 || getpeername(n->rx_fd, (struct sockaddr *)&sa, &len) != 0) return false;
    if (sa.ss_family == AF_INET)
        return ip_form(AF_INET, (const uint8_t *)&((const struct sockaddr_in *)&sa)->sin_addr, out);
    return sa.ss_family == AF_INET6 && ip_form(AF_INET6, ((const struct sockaddr_in6 *)&sa)->sin6_addr.s6_addr, out);
}

/* The host of an address "tcp://HOST:PORT" (an IPv6 one without its brackets), cut to fit. */
static void addr_host(const char *addr, char host[RUMOR_HOST_MAX + 3])
{
    const char *h = strncmp(addr, "tcp://", 6) == 0 ? addr + 6 : addr, *colon = strrchr(h, ':');
    const size_t hl = colon && colon > h ? (size_t)(colon - h) : 0;
    snprintf(host, RUMOR_HOST_MAX + 3, "%.*s", (int)(hl < RUMOR_HOST_MAX + 2 ? hl : RUMOR_HOST_MAX + 2), h);
    const size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') memmove(host, host + 1, n - 2), host[n - 2] = 0;
}

/* The IP of an address "tcp://IP:PORT" in ip_form's form; false when its host is no IP. */
static bool addr_ip(const char *addr, char out[RUMOR_PROTO_SEEN_MAX + 1])
{
    char host[RUMOR_HOST_MAX + 3];
    addr_host(addr, host);
    return ip_text(host, out);
}

/* A member's message on its own connection to us (a ping or its hello): where it came from.
 * A ping's source answers our next ack (`seen`); and a member whose connection comes from the
 * LAN IP it advertises reached us with no NAT between: it shares our segment (its key may
 * name our site, recount_seen). What the kernel says of a connection, no member can forge. */
static void note_seen(rumor_node_t *n, conn_t *c, bool ping, uint64_t now)
{
    char ip[RUMOR_PROTO_SEEN_MAX + 1], adv[RUMOR_PROTO_SEEN_MAX + 1];
    if (!rx_ip(n, ip)) return;
    if (ping) {
        memcpy(c->seen, ip, sizeof ip);
        c->seen_fresh = true;
    }
    c->lan_ms = addr_ip(c->addr, adv) && ip_private(adv) && strcmp(ip, adv) == 0 ? now : 0;
}


static int str_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void greet_all(rumor_node_t *n);

/* The address members see us at, from the acks of the members in our view: the one most of
 * them name that is not our advertised IP. A node whose advertised IP is private takes it when
 * any member names it (the members of its LAN name its own); a public node only when at least
 * two do, and more than name its own (one member cannot move it). A new one names our site in
 * every hello (members behind the same NAT share it: gossip graphs put them side by side); a
 * change of it means our address changed, and whether peers can dial us is found out anew.
 * The site also names our segment by its smallest key, ours or that of a member whose own
 * connection to us lately came from the LAN IP it advertises (note_seen): the members of a LAN
 * dial each other as they meet, so they find the same key from the start, and two LANs behind
 * one carrier-grade NAT find different ones. Once a period (housekeeping), so a member's
 * reports cannot make it work more. */
static void recount_seen(rumor_node_t *n, uint64_t now)
{
    char was[RUMOR_PROTO_SEEN_MAX + 1];
    const char *self = n->self_ip, *rep[MAX_CONNS];
    const uint8_t *lan = rumor_secret_key_public(n->key);
    int k = 0, own = 0;
    const int nv = rumor_memb_view_count(n->memb);
    /* A member on our segment pings us at least once in its round of the view (membership
     * probes every member in turn): one not heard from there for four such rounds left it. */
    const uint64_t lan_fresh = 4 * (uint64_t)(nv + 1) * n->cfg.memb.period_ms;
    for (int i = 0; i < nv && k < (int)RUMOR_ARRAY_LEN(rep); i++) {
        const rumor_memb_member_t *e = rumor_memb_view_at(n->memb, i);
        const conn_t *c = e ? node_find_conn(n, e->key, false, now) : NULL;
        if (!c || !c->admitted) continue;
        if (c->lan_ms && now - c->lan_ms <= lan_fresh && memcmp(e->key, lan, RUMOR_KEY_LEN) < 0) lan = e->key;
        if (!c->seen_us[0]) continue;
        if (strcmp(c->seen_us, self) == 0) own++;
        else rep[k++] = c->seen_us;
    }
    qsort(rep, (size_t)k, sizeof *rep, str_cmp);
    const char *best = "";
    int best_k = 0;
    for (int i = 0, run = 1; i < k; i++, run++) {
        if (i + 1 < k && strcmp(rep[i], rep[i + 1]) == 0) continue;
        if (run > best_k) best = rep[i], best_k = run; /* (ties: the first in order) */
        run = 0;
    }
    if (!(best_k >= 1 && (ip_private(self) || (best_k >= 2 && best_k > own)))) best = "";
    const uint64_t site = best[0] ? site_of(best, lan) : 0;
    if (strcmp(best, n->seen_as) != 0) {
        memcpy(was, n->seen_as, sizeof was);
        snprintf(n->seen_as, sizeof n->seen_as, "%s", best);
        const bool log = ++n->seen_changes <= 10;
        if (was[0]) {
            if (log)
                rumor_log(RUMOR_LOG_INFO, "peers now see this node at %s (was %s): its address changed; finding out "
                          "again whether peers can dial it%s", best[0] ? best : self, was,
                          n->seen_changes == 10 ? " (further changes are only counted)" : "");
            n->last_pinged = 0;
            n->joined_at = now;
        } else if (log) {
            rumor_log(RUMOR_LOG_INFO, "peers see this node at %s, not at its address %s: it is behind NAT, and the "
                      "gossip graph puts it beside members it reaches directly", best, self);
        }
    } else if (site == n->site) {
        return; /* (else the same address, and who shares our segment changed) */
    }
    n->site = site;
    greet_all(n); /* (our hello names the site) */
}

/* An ack's word on where our pings came from: a member's may change once a period. */
static void note_seen_us(rumor_node_t *n, conn_t *c, const char *seen, uint64_t now)
{
    char ip[RUMOR_PROTO_SEEN_MAX + 1];
    if (!ip_text(seen, ip) || strcmp(ip, c->seen_us) == 0) return;
    if (c->seen_us[0] && now - c->seen_us_ms < n->cfg.memb.period_ms) return;
    memcpy(c->seen_us, ip, sizeof ip);
    c->seen_us_ms = now;
}

void node_dispatch(rumor_node_t *n, const uint8_t key[RUMOR_KEY_LEN], path_t via, zmq_msg_t *rid, uint64_t now)
{
    rumor_msg_t *wp = &n->wmsg;
    rumor_memb_msg_t *mp = &n->mmsg;
    if (wp->type == RUMOR_MSG_HELLO) {
        node_handle_hello(n, key, rid, wp, now);
        conn_t *c = node_find_conn(n, key, false, now);
        if (rid && c && c->admitted) {
            node_note_rid(n, c, rid, now);
            note_seen(n, c, false, now);
        }
        return;
    }
    conn_t *c = node_find_conn(n, key, false, now);
    if (!c || !c->admitted || !c->addr[0] || (c->expires_at && unix_now() >= c->expires_at)) {
        /* No valid hello from this key (yet, or since we restarted, or since it expired, or
         * was revoked): nothing it says counts. Ask it for one, on the way it came, at most
         * every HELLO_ASK_MS (keys without an entry share one such pace). */
        n->drops[DROP_NO_HELLO]++;
        uint64_t *asked = c ? &c->hello_asked_ms : &n->hello_asked_ms;
        if (*asked && now - *asked < HELLO_ASK_MS) return;
        /* It asks for our hello while we lack its own (both lost the other's): answer first,
         * or the two would only ask each other. */
        if (wp->type == RUMOR_MSG_BYE && strcmp(wp->u.bye.why, "hello") == 0) {
            hello_to(n, key, via, rid);
            *asked = now; /* (paced whether or not the request below goes) */
        }
        if (bye_to(n, key, via, rid, "hello")) *asked = now;
        return;
    }
    c->last_seen = now;
    if (rid) node_note_rid(n, c, rid, now);
    if (wp->type == RUMOR_MSG_BYE && wp->u.bye.why[0]) {
        /* A member we reach back over its connection, or through a relay, asks for our hello
         * there (it lost it: it restarted, or forgot us); refusals belong on our DEALERs. */
        if (strcmp(wp->u.bye.why, "hello") == 0 && via != PATH_DEALER) greet_again(n, c, via, now);
        else n->drops[DROP_UNEXPECTED]++;
        return;
    }
    if (node_memb_from_wire(mp, wp)) {
        if (wp->type == RUMOR_MSG_PING && rid) {
            n->last_pinged = now; /* (a dial reached us) */
            note_seen(n, c, true, now);
        }
        if (wp->type == RUMOR_MSG_ACK && wp->u.ack.seen[0]) note_seen_us(n, c, wp->u.ack.seen, now);
        node_vet_entries(n, mp, now);
        rumor_memb_recv(n->memb, key, c->addr, mp, now);
    } else if (wp->type == RUMOR_MSG_MODEL && n->chunk_cb) {
        n->chunk_cb(n->chunk_arg, key, &wp->u.model);
    } else if (wp->type == RUMOR_MSG_RELAY) {
        node_relay_handle(n, key, now);
    } else if (wp->type == RUMOR_MSG_PULL && n->pull_cb && now - c->last_pull >= PULL_INTERVAL_MS) {
        /* At most one answer per peer per interval: a pull costs a whole model. */
        c->last_pull = now;
        n->pull_cb(n->pull_arg, n, key, wp->u.pull.layout);
    } else {
        n->drops[DROP_UNEXPECTED]++;
    }
}

/* A refusal, or a request for our hello, on the DEALER we dialled p with. */
static void dealer_bye(rumor_node_t *n, dial_t *p, const rumor_msg_t *w)
{
    if (strcmp(w->u.bye.why, "hello") == 0) {
        /* It lost our hello (it restarted, or forgot us): greet it again. */
        rumor_msg_t hello;
        node_fill_hello(n, &hello);
        (void)dealer_send(n, p, &hello);
        return;
    }
    char id[RUMOR_SHORT_ID_LEN + 1];
    rumor_key_short_id(id, p->key);
    if (!p->refused)
        rumor_log(RUMOR_LOG_WARN, "peer %s at %s refused us: %s", id, p->addr,
                  w->u.bye.why[0] ? w->u.bye.why : "no reason given");
    p->refused = true;
    snprintf(p->refusal, sizeof p->refusal, "%s", w->u.bye.why[0] ? w->u.bye.why : "refused");
}

/* Read one message of at most three frames from s into parts; the count of frames (parts
 * beyond the fourth are closed as they come), 0 when none is waiting. */
static int recv_parts(void *s, zmq_msg_t parts[4])
{
    int count = 0;
    bool more = true;
    while (more) {
        zmq_msg_t *part = &parts[count < 4 ? count : 3];
        if (count >= 4) zmq_msg_close(part);
        zmq_msg_init(part);
        if (zmq_msg_recv(part, s, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(part);
            break;
        }
        more = zmq_msg_more(part);
        count++;
    }
    return count;
}

/* Decode frames[0] (header) and frames[1] (payload, when count is 2) into n->wmsg; false
 * (counted) when it does not decode. */
static bool decode(rumor_node_t *n, zmq_msg_t *frames, int count)
{
    rumor_proto_reject_t why = RUMOR_PROTO_REJECT_NONE;
    const uint8_t *payload = count == 2 ? zmq_msg_data(&frames[1]) : NULL;
    const size_t payload_len = count == 2 ? zmq_msg_size(&frames[1]) : 0;
    if (rumor_proto_decode(&n->wmsg, zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]), payload, payload_len,
                           &why) != RUMOR_OK) {
        n->drops[why < RUMOR_PROTO_REJECT_COUNT ? why : RUMOR_PROTO_REJECT_MALFORMED]++;
        return false;
    }
    return true;
}

/* The messages waiting on one socket: our ROUTER (p NULL: frame 0 is the connection's routing
 * id, and the ZAP handler set the key as User-Id), or the DEALER we dialled p with (its key is
 * the one the CURVE handshake proved; it sends refusals and hello requests there, and, when it
 * cannot dial us, everything it has for us). */
static void handle_socket(rumor_node_t *n, dial_t *p, uint64_t now)
{
    const int skip = p ? 0 : 1; /* frames before the header */
    for (int k = 0; k < BATCH && (!p || p->dealer); k++) {
        zmq_msg_t parts[4];
        /* (read anew each turn: what a message sets off may close and reopen p's DEALER) */
        const int count = recv_parts(p ? p->dealer : n->router, parts);
        if (count == 0) return;
        const int held = count < 4 ? count : 4;
        n->msgs_in++;
        for (int i = skip; i < held; i++) n->bytes_in += zmq_msg_size(&parts[i]);
        uint8_t key[RUMOR_KEY_LEN];
        const char *uid = !p && count >= 2 ? zmq_msg_gets(&parts[1], "User-Id") : NULL;
        const bool keyed = p || (uid && rumor_key_from_z85(key, uid, NULL) == RUMOR_OK);
        /* The connection it came on is that key's from now on (guard.h). */
        n->rx_fd = zmq_msg_get(&parts[held - 1], ZMQ_SRCFD);
        n->rx_serial = keyed ? rumor_guard_delivered(n->guard, n->rx_fd, p ? p->key : key, !p, now) : 0;
        if (count < 1 + skip || count > 2 + skip) n->drops[DROP_FRAMES]++;
        else if (!keyed) n->drops[DROP_NO_USER_ID]++;
        else if (decode(n, parts + skip, count - skip)) {
            if (p && n->wmsg.type == RUMOR_MSG_BYE && n->wmsg.u.bye.why[0]) dealer_bye(n, p, &n->wmsg);
            else node_dispatch(n, p ? p->key : key, p ? PATH_DEALER : PATH_ROUTER, p ? NULL : &parts[0], now);
        }
        for (int i = 0; i < held; i++) zmq_msg_close(&parts[i]);
        n->rx_fd = -1;
        run_actions(n, now);
    }
}


/* ---- lifecycle ---- */

static bool is_wildcard(const char *host)
{
    return strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 || strcmp(host, "*") == 0;
}

/* Our key, the swarm's authority, our certificate (which must admit us, or every peer will
 * refuse us: said now), the revocation list and the bootstraps. */
static rumor_err_t load_identity(rumor_node_t *n, char err[RUMOR_ERR_LEN])
{
    const rumor_node_config_t *cfg = &n->cfg;
    rumor_err_t rc;
    if ((rc = rumor_secret_key_load(&n->key, cfg->key_path, err)) != RUMOR_OK ||
        (rc = rumor_public_key_load(n->authority, cfg->swarm, err)) != RUMOR_OK ||
        (rc = rumor_cert_load(n->cert, &n->cert_len, cfg->cert_path, err)) != RUMOR_OK)
        return rc;
    rumor_cert_t c;
    rumor_cert_reject_t why;
    if (rumor_cert_verify(n->cert, n->cert_len, n->authority, rumor_secret_key_public(n->key), unix_now(), &c, &why) !=
        RUMOR_OK)
        return rumor_fail(err, RUMOR_EAUTH, "%s: this certificate would be refused: %s%s", cfg->cert_path,
                          rumor_cert_reject_name(why),
                          why == RUMOR_CERT_KEY_MISMATCH ? " (it was issued for another key than --key)"
                          : why == RUMOR_CERT_OTHER_SWARM ? " (it was issued by another authority than --swarm)"
                                                          : "");
    if (cfg->revoked_path && (rc = rumor_revoked_load(&n->revoked, cfg->revoked_path, err)) != RUMOR_OK) return rc;
    for (int i = 0; i < cfg->n_bootstraps; i++) {
        if ((rc = rumor_addr_parse(&n->boot[n->n_boot], cfg->bootstraps[i], err)) != RUMOR_OK) return rc;
        /* The same command line on every machine names this node too: skip ourselves. */
        if (!same_key(n->boot[n->n_boot].key, rumor_secret_key_public(n->key))) n->n_boot++;
    }
    return RUMOR_OK;
}

/* Descriptors: every connection the guard may watch, a DEALER, its monitor and its mailbox
 * per peer, and a few of our own. Raised to that where the hard limit allows; said where it
 * does not (then the kernel refuses connections beyond it, and libzmq counts them). */
#define FDS_NEEDED (GUARD_MAX + 4 * MAX_PEERS + 64)
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    if (rl.rlim_cur < FDS_NEEDED && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max < FDS_NEEDED ? rl.rlim_max : FDS_NEEDED;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < FDS_NEEDED)
        rumor_log(RUMOR_LOG_WARN, "this node may open %llu descriptors and needs up to %d (connections, and "
                  "sockets for %d peers): raise the hard limit (ulimit -Hn, or LimitNOFILE= of a service)",
                  (unsigned long long)rl.rlim_cur, FDS_NEEDED, MAX_PEERS);
    else
        rumor_log(RUMOR_LOG_DEBUG, "descriptors: %llu allowed, up to %d needed", (unsigned long long)rl.rlim_cur,
                  FDS_NEEDED);
}

/* The ZAP handler, and the ROUTER peers connect to (CURVE server, watched by the guard). */
static rumor_err_t open_router(rumor_node_t *n, char err[RUMOR_ERR_LEN])
{
    raise_fd_limit();
    n->ctx = zmq_ctx_new();
    if (!n->ctx) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    (void)zmq_ctx_set(n->ctx, ZMQ_MAX_SOCKETS, 4 * MAX_PEERS + 64);
    /* The ZAP handler must be bound before any CURVE server socket. */
    n->zap = zmq_socket(n->ctx, ZMQ_REP);
    if (!n->zap || zmq_bind(n->zap, ZAP_ENDPOINT) != 0)
        return rumor_fail(err, RUMOR_EIO, "cannot start the ZAP handler: %s", zmq_strerror(errno));
    node_set_int(n->zap, ZMQ_LINGER, 0);
    n->router = zmq_socket(n->ctx, ZMQ_ROUTER);
    set_common(n->router);
    node_set_int(n->router, ZMQ_CURVE_SERVER, 1);
    node_set_int(n->router, ZMQ_HANDSHAKE_IVL, HANDSHAKE_MS); /* (the guard's deadline too) */
    /* Connections the kernel completes before libzmq accepts them: a burst of strangers must
     * not fill the queue, or an honest dial waits for TCP's retry of its SYN (a second). */
    node_set_int(n->router, ZMQ_BACKLOG, 1024);
    node_set_int(n->router, ZMQ_RCVHWM, RECV_HWM);
    node_set_int(n->router, ZMQ_SNDHWM, SEND_HWM);
    /* Sends back over a peer's own connection (node_peer_path) must fail, not vanish, when
     * that connection is full or gone. */
    node_set_int(n->router, ZMQ_ROUTER_MANDATORY, 1);
    (void)zmq_setsockopt(n->router, ZMQ_ZAP_DOMAIN, "rumor", 5);
    /* Every connection the ROUTER accepts is watched by the guard (guard.h). */
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://monitor-router-%p", (void *)n);
    const rumor_guard_limits_t limits = {
        .share = GUARD_SHARE, .node_held = GUARD_NODE_HELD, .stranger_bytes = GUARD_STRANGER_BYTES,
        .handshake_ms = HANDSHAKE_MS, .strangers = GUARD_STRANGERS, .strangers_per_source = GUARD_STRANGERS_PER_SOURCE,
        .key_conns = GUARD_KEY_CONNS};
    rumor_random_bytes(n->source_salt, sizeof n->source_salt);
    if (!(n->guard = rumor_guard_new(&limits, n->source_salt))) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    if (zmq_socket_monitor(n->router, ep, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED) != 0 ||
        !(n->router_mon = zmq_socket(n->ctx, ZMQ_PAIR)) || zmq_connect(n->router_mon, ep) != 0)
        return rumor_fail(err, RUMOR_EIO, "cannot monitor the listening socket: %s", zmq_strerror(errno));
    if (set_curve_keys(n, n->router) != 0)
        return rumor_fail(err, RUMOR_EIO, "cannot set CURVE keys: %s", zmq_strerror(errno));
    return RUMOR_OK;
}

/* Listen: TCP for ZeroMQ and UDP of the same number for knocks (a free TCP port may have its
 * UDP twin taken: then another). Then the address peers are told (the configured host with
 * the port actually bound, or --advertise): an IP literal they can dial. */
static rumor_err_t listen_and_advertise(rumor_node_t *n, char err[RUMOR_ERR_LEN])
{
    const rumor_node_config_t *cfg = &n->cfg;
    /* Port 0 asks the kernel for a free port, written as "*" for ZeroMQ. */
    char bind_ep[RUMOR_ENDPOINT_LEN];
    snprintf(bind_ep, sizeof bind_ep, "%s", cfg->listen);
    size_t bl = strlen(bind_ep);
    const bool any_port = bl > 2 && strcmp(bind_ep + bl - 2, ":0") == 0;
    if (any_port) snprintf(bind_ep + bl - 1, sizeof bind_ep - (bl - 1), "*");
    char last[RUMOR_ENDPOINT_LEN], bound[RUMOR_ENDPOINT_LEN];
    const char *port = NULL;
    for (int attempt = 0; n->udp < 0; attempt++) {
        if (strncmp(bind_ep, "tcp://", 6) != 0 || zmq_bind(n->router, bind_ep) != 0)
            return rumor_fail(err, RUMOR_EIO, "cannot listen on %s: %s", cfg->listen,
                              strncmp(bind_ep, "tcp://", 6) ? "expected tcp://HOST:PORT" : zmq_strerror(errno));
        size_t blen = sizeof last;
        zmq_getsockopt(n->router, ZMQ_LAST_ENDPOINT, last, &blen);
        port = strrchr(last, ':');
        n->udp = rumor_admit_listen(cfg->listen, port ? (uint16_t)atoi(port + 1) : 0, err);
        if (n->udp < 0) {
            if (!any_port || attempt == 20) return rumor_last_error();
            (void)zmq_unbind(n->router, last);
        }
    }
    /* ZeroMQ reports an IPv4 host as ::ffff:a.b.c.d on a dual-stack socket, which is not what
     * peers should be told: the configured host, with the bound port. */
    const char *listen_colon = strrchr(cfg->listen, ':');
    snprintf(bound, sizeof bound, "%.*s%s", (int)(listen_colon - cfg->listen), cfg->listen, port ? port : ":0");
    const char *adv = cfg->advertise ? cfg->advertise : bound;
    char host[RUMOR_HOST_MAX + 3];
    addr_host(adv, host);
    if (is_wildcard(host))
        return rumor_fail(err, RUMOR_EINVAL, "listening on %s, which peers cannot dial: give --advertise tcp://IP:PORT",
                          bound);
    if (!rumor_proto_addr_is_valid(adv, strlen(adv)))
        return rumor_fail(err, RUMOR_EINVAL, "advertised address %s: expected tcp://IP:PORT (an IP, not a name)", adv);
    snprintf(n->self_addr, sizeof n->self_addr, "%.255s", adv); /* valid addresses are short */
    const rumor_err_t rc = rumor_addr_format(n->address, rumor_secret_key_public(n->key), n->self_addr, err);
    rumor_addr_t self;
    char perr[RUMOR_ERR_LEN];
    if (rc == RUMOR_OK && rumor_addr_parse(&self, n->address, perr) == RUMOR_OK)
        (void)ip_text(self.host, n->self_ip); /* (what members who see us directly name) */
    return rc;
}

/* --control ipc://PATH: a socket only its owner may use (the status names every peer). */
static rumor_err_t open_control(rumor_node_t *n, char err[RUMOR_ERR_LEN])
{
    const char *control = n->cfg.control;
    if (strncmp(control, "ipc://", 6) != 0 || !control[6] || strlen(control) - 6 >= sizeof n->control_path)
        return rumor_fail(err, RUMOR_EINVAL, "--control %s: expected ipc://PATH", control);
    if (control[6] == '@') /* Linux's abstract namespace has no file, so no permissions */
        return rumor_fail(err, RUMOR_EINVAL, "--control %s: an abstract socket (ipc://@...) is open to every local "
                          "user; give a file path, ipc://PATH", control);
    snprintf(n->control_path, sizeof n->control_path, "%s", control + 6);
    n->control = zmq_socket(n->ctx, ZMQ_REP);
    node_set_int(n->control, ZMQ_LINGER, 0);
    /* Owner-only from the start. */
    mode_t old = umask(0077);
    int brc = zmq_bind(n->control, control);
    umask(old);
    if (brc != 0) return rumor_fail(err, RUMOR_EIO, "cannot open control socket %s: %s", control, zmq_strerror(errno));
    /* The umask made it owner-only. No chmod by name afterwards: a path swapped for a symbolic
     * link in between would have the link's target changed. Check instead, without following
     * links, that what is there is our socket and nobody else may use it. */
    struct stat st;
    if (lstat(n->control_path, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077) != 0) {
        n->control_path[0] = 0; /* not ours to remove */
        return rumor_fail(err, RUMOR_EIO, "control socket %s: not an owner-only socket of this user after binding "
                          "(replaced by someone?)", control);
    }
    return RUMOR_OK;
}

rumor_node_t *rumor_node_new(const rumor_node_config_t *cfg, char err[RUMOR_ERR_LEN])
{
    rumor_node_t *n = calloc(1, sizeof *n);
    if (!n) {
        rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        return NULL;
    }
    n->cfg = *cfg;
    n->udp = -1;
    atomic_init(&n->stop, false);
    atomic_init(&n->reload, false);
    n->start_ms = rumor_now_ms();
    n->wake[0] = n->wake[1] = -1;
    n->tick_ms = 100;
    n->rx_fd = -1;
    node_conn_index_init(n);
    if (pipe(n->wake) != 0) {
        rumor_fail(err, RUMOR_EIO, "pipe: %s", strerror(errno));
        goto fail;
    }
    for (int k = 0; k < 2; k++) {
        fcntl(n->wake[k], F_SETFL, O_NONBLOCK);
        fcntl(n->wake[k], F_SETFD, FD_CLOEXEC);
    }
    n->buf = malloc(RUMOR_PROTO_MAX_HEADER);
    n->certs = calloc(CERT_CACHE, sizeof *n->certs);
    n->sess = calloc(RELAY_SESSIONS, sizeof *n->sess);
    n->e2e_buf = malloc(RUMOR_PROTO_MAX_PAYLOAD);
    n->e2e_out = malloc(RUMOR_PROTO_MAX_PAYLOAD);
    n->relay_serve = !cfg->no_relay;
    n->relay_tamper = cfg->relay_tamper;
    n->relay_rate = (cfg->relay_budget_mbps > 0 ? cfg->relay_budget_mbps : RELAY_BUDGET_MBPS) * 1e6;
    if (!n->buf || !n->certs || !n->sess || !n->e2e_buf || !n->e2e_out) {
        rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        goto fail;
    }
    if (load_identity(n, err) != RUMOR_OK) goto fail;
    rumor_key_short_id(n->id, rumor_secret_key_public(n->key));
    rumor_log_set_id(n->id);
    do n->boot_id = rumor_random_u64(); /* nonzero: 0 means none on the wire */
    while (n->boot_id == 0);
    n->knock_tokens = KNOCK_RATE;
    n->knock_refill_ms = rumor_now_ms();
    if (open_router(n, err) != RUMOR_OK || listen_and_advertise(n, err) != RUMOR_OK ||
        (cfg->control && open_control(n, err) != RUMOR_OK))
        goto fail;
    /* A real node is among strangers: certificates on every membership entry, a dial budget
     * (membership.h), and a probe order no one can predict (libsodium, not a setting). */
    rumor_memb_config_t mc = cfg->memb;
    mc.strict = true;
    mc.seed = rumor_random_u64();
    n->memb = rumor_memb_new(&mc, rumor_secret_key_public(n->key), n->self_addr,
                             (uint32_t)(unix_now() & 0x7fffffff), err);
    if (!n->memb) goto fail;
    rumor_memb_set_identity(n->memb, n->cert, n->cert_len, n->boot_id);
    return n;
fail:
    rumor_node_destroy(&n);
    return NULL;
}

const char *rumor_node_address(const rumor_node_t *n) { return n->address; }

void rumor_node_destroy(rumor_node_t **self_p)
{
    if (!self_p || !*self_p) return;
    rumor_node_t *n = *self_p;
    for (int i = 0; i < MAX_PEERS; i++)
        if (n->peers[i].used) close_peer(&n->peers[i]);
    for (int i = 0; i < n->n_held; i++) node_outgoing_unref(n->held[i].o); /* (libzmq drops the rest) */
    n->n_held = 0;
    /* As for a DEALER's monitor: stop it before its reader goes. */
    if (n->router && n->router_mon) zmq_socket_monitor(n->router, NULL, 0);
    if (n->router) zmq_close(n->router);
    if (n->router_mon) zmq_close(n->router_mon);
    if (n->zap) zmq_close(n->zap);
    if (n->control) zmq_close(n->control);
    if (n->ctx) zmq_ctx_term(n->ctx);
    if (n->udp >= 0) close(n->udp);
    if (n->control_path[0]) unlink(n->control_path);
    if (n->wake[0] >= 0) close(n->wake[0]);
    if (n->wake[1] >= 0) close(n->wake[1]);
    rumor_memb_destroy(&n->memb);
    rumor_guard_destroy(&n->guard);
    rumor_secret_key_destroy(&n->key);
    rumor_revoked_destroy(&n->revoked);
    free(n->buf);
    free(n->certs);
    if (n->sess) rumor_e2e_wipe(n->sess, RELAY_SESSIONS * sizeof *n->sess);
    free(n->sess);
    if (n->e2e_buf) rumor_e2e_wipe(n->e2e_buf, RUMOR_PROTO_MAX_PAYLOAD);
    if (n->e2e_out) rumor_e2e_wipe(n->e2e_out, RUMOR_PROTO_MAX_PAYLOAD);
    free(n->e2e_buf);
    free(n->e2e_out);
    free(n);
    *self_p = NULL;
}

/* That our dial reached p at its address, in its entry (which outlives p: node_peer_path reads
 * it), once it has one (the member's hello may come after our handshake). */
static void note_dialled(rumor_node_t *n, dial_t *p, uint64_t now)
{
    if (p->dialled_noted || !p->linked) return;
    conn_t *c = node_find_conn(n, p->key, false, now);
    if (!c) return;
    snprintf(c->dialled, sizeof c->dialled, "%s", p->addr);
    p->dialled_noted = true;
}

/* Our hello on p's DEALER once it is connected, if it changed since the DEALER's first one
 * (a DEALER still connecting holds that one, with what we said then) or did not go (a full
 * DEALER: tried again each turn of the loop until it goes, not counted as a drop each time). */
static void resend_hello(rumor_node_t *n, dial_t *p)
{
    if (!p->hello_due || !p->dealer || !p->linked) return;
    rumor_msg_t hello;
    node_fill_hello(n, &hello);
    p->hello_due = dealer_put(n, p, &hello) != RUMOR_OK;
}

/* Our hello again to every member we reach: what it says of us changed. Over our dials now,
 * back over members' connections now (and first on any new one), first in every relay
 * session. */
static void greet_all(rumor_node_t *n)
{
    for (int i = 0; i < MAX_PEERS; i++) {
        dial_t *p = &n->peers[i];
        if (!p->used || !p->dealer) continue;
        p->hello_due = true;
        resend_hello(n, p);
    }
    for (int i = 0; i < n->n_conns; i++) {
        conn_t *c = &n->conns[i];
        if (!c->used) continue;
        c->rid_hello = false;
        if (c->admitted && c->rid_len) (void)node_router_hello(n, c);
    }
    for (int i = 0; i < RELAY_SESSIONS; i++) n->sess[i].hello_sent = false;
}

/* Once in a swarm, peers probe us; if none has for a while, our advertised address is
 * probably not one they can dial (NAT, firewall, a private address): say so, stop offering to
 * relay, and tell every member in our hello (caps bits 2 and 4: gossip graphs keep members
 * that cannot be dialled apart). A peer that dials us later
 * proves the opposite. */
static void check_reachable(rumor_node_t *n, uint64_t now)
{
    if (rumor_memb_view_count(n->memb) == 0) {
        n->joined_at = 0;
        return;
    }
    if (!n->joined_at) n->joined_at = now;
    /* Peers dial a member within a period of hearing of it; give them ten, at most 10 s. */
    uint64_t grace = 10 * (uint64_t)n->cfg.memb.period_ms;
    if (grace > 10000) grace = 10000;
    if (!n->warned_unreachable && !n->last_pinged && now - n->joined_at > grace) {
        n->warned_unreachable = true;
        rumor_log(RUMOR_LOG_WARN, "no peer has dialled this node at %s in %.0f s of membership: it cannot be "
                  "dialled (behind NAT or a firewall?), and works through its own connections to its peers; "
                  "give --advertise with an address they can dial, or open the port, to be reached directly",
                  n->self_addr, (double)grace / 1000.0);
        greet_all(n); /* (our hello says it now: caps bits 2 and 4) */
    }
    if (n->warned_unreachable && n->last_pinged) {
        n->warned_unreachable = false;
        rumor_log(RUMOR_LOG_INFO, "a peer dialled this node at %s: it is reachable", n->self_addr);
        greet_all(n);
    }
}

/* What each turn of the loop does besides reading sockets: the guard's look at what
 * connections hold, models libzmq has sent all of, the trainer's tick, membership's timers and what they ask for, relay
 * inits to resend, and whether peers can dial us. */
static void housekeeping(rumor_node_t *n, uint64_t now)
{
    if (now >= n->guard_next) {
        (void)rumor_guard_check(n->guard, now); /* (cuts are counted there) */
        n->guard_next = now + GUARD_CHECK_MS;
    }
    node_release_held(n);
    if (n->tick_cb) n->tick_cb(n->tick_arg, n, now);
    node_announce_done(n);
    rumor_memb_tick(n->memb, now);
    run_actions(n, now);
    node_relay_tick(n, now);
    if (now >= n->seen_next) {
        n->seen_next = now + n->cfg.memb.period_ms;
        recount_seen(n, now);
    }
    check_reachable(n, now);
}

/* When every bootstrap has refused us there is no way in: say why and stop. */
static bool all_bootstraps_refused(rumor_node_t *n, char *why, size_t len)
{
    if (n->joined || n->n_boot == 0 || rumor_memb_view_count(n->memb) > 0) return false;
    for (int b = 0; b < n->n_boot; b++) {
        dial_t *p = node_find_peer(n, n->boot[b].key);
        if (!p || !p->refused) return false;
        snprintf(why, len, "%s", p->refusal);
    }
    return true;
}


rumor_err_t rumor_node_run(rumor_node_t *n, char err[RUMOR_ERR_LEN])
{
    /* A stop asked for between the node's making and now (a trainer that failed at once, a
     * Ctrl-C during set-up) still stops the loop. */
    uint64_t now = rumor_now_ms();
    for (int b = 0; b < n->n_boot; b++) {
        if (same_key(n->boot[b].key, rumor_secret_key_public(n->key))) continue; /* ourselves */
        rumor_memb_join(n->memb, n->boot[b].key, n->boot[b].endpoint, now);
    }
    run_actions(n, now);
    const uint64_t started = now;
    zmq_pollitem_t items[5 + 3 * MAX_PEERS];
    /* Each peer's sockets in this turn's poll: its DEALER, the DEALER's monitor, and its knock
     * socket while it knocks (-1: not polled). */
    struct {
        dial_t *p;
        int dealer, monitor, knock;
    } polled[MAX_PEERS];
    rumor_err_t rc = RUMOR_OK;
    while (!atomic_load(&n->stop)) {
        if (atomic_exchange(&n->reload, false)) {
            node_reload_revocations(n);
        }
        int ni = 0, np = 0;
        bool sending_capped = false;
        items[ni++] = (zmq_pollitem_t){.socket = n->router, .events = ZMQ_POLLIN};
        items[ni++] = (zmq_pollitem_t){.socket = n->zap, .events = ZMQ_POLLIN};
        if (n->control) items[ni++] = (zmq_pollitem_t){.socket = n->control, .events = ZMQ_POLLIN};
        const int wake_item = ni;
        items[ni++] = (zmq_pollitem_t){.socket = NULL, .fd = n->wake[0], .events = ZMQ_POLLIN};
        const int udp_item = ni;
        items[ni++] = (zmq_pollitem_t){.socket = NULL, .fd = n->udp, .events = ZMQ_POLLIN};
        const int mon_item = ni;
        items[ni++] = (zmq_pollitem_t){.socket = n->router_mon, .events = ZMQ_POLLIN};
        uint64_t next_knock = UINT64_MAX;
        for (int i = 0; i < MAX_PEERS; i++) {
            dial_t *p = &n->peers[i];
            if (!p->used) continue;
            /* A refused handshake: libzmq has given up on that connection. Knock, and dial
             * again once it answers. */
            if (p->auth_failed) {
                node_close_dealer(p);
                p->auth_failed = false;
                p->answered = false;
                /* Again at once, but a node that keeps refusing handshakes it admitted
                 * (evicted us, restarting in a loop) is asked less and less often. */
                if (++p->fails <= 3) node_knock_start(n, p, now);
                else p->retry_at = now + (p->fails < 8 ? 1000u << (p->fails - 3) : 30000u);
            }
            if (!p->dealer && !p->knocking && p->retry_at && now >= p->retry_at) node_knock_start(n, p, now);
            resend_hello(n, p);
            note_dialled(n, p, now);
            if (p->knocking && now - p->knock_since > 30000) {
                /* Silence for 30 s: stop, and ask again in 30 s (it may be down for now), or
                 * much later when it reaches us over its own connection. */
                node_stop_knocking(p);
                p->retry_at = now + (p->outbound ? REDIAL_MS : 30000);
            }
            if (p->knocking && p->knock_next <= now) node_knock_send(n, p, now);
            if (p->knocking && p->knock_next < next_knock) next_knock = p->knock_next;
            if (!p->dealer && !p->knocking && p->retry_at && p->retry_at < next_knock) next_knock = p->retry_at;

            polled[np].p = p;
            polled[np].dealer = polled[np].monitor = polled[np].knock = -1;
            if (p->dealer) {
                const outgoing_t *o = p->send.out;
                const bool capped = o && atomic_load(&((outgoing_t *)o)->refs) - 1 >= MAX_INFLIGHT;
                if (capped) sending_capped = true;
                polled[np].dealer = ni;
                /* (chunks go on a DEALER only once it is linked, and an unconnected one
                 * always says it can take more: asking then would spin) */
                items[ni++] = (zmq_pollitem_t){.socket = p->dealer,
                                               .events = ZMQ_POLLIN | (o && !capped && p->linked ? ZMQ_POLLOUT : 0)};
            }
            if (p->monitor) {
                polled[np].monitor = ni;
                items[ni++] = (zmq_pollitem_t){.socket = p->monitor, .events = ZMQ_POLLIN};
            }
            if (p->knocking) {
                polled[np].knock = ni;
                items[ni++] = (zmq_pollitem_t){.socket = NULL, .fd = p->knock_fd, .events = ZMQ_POLLIN};
            }
            np++;
        }
        uint64_t wait = rumor_memb_next_deadline(n->memb, rumor_now_ms());
        if (wait > n->tick_ms) wait = n->tick_ms;
        if (next_knock != UINT64_MAX && until(next_knock, now) < wait) wait = until(next_knock, now);
        if (sending_capped) wait = 1; /* libzmq frees chunks without waking us: look again soon */
        if (n->router_blocked) wait = wait < 2 ? wait : 2; /* ... nor says when a peer's connection drains */
        n->router_blocked = false;
        /* A message that never ends wakes nobody: the guard looks on its own schedule. */
        if (rumor_guard_count(n->guard) > 0 && until(n->guard_next, now) < wait) wait = until(n->guard_next, now);
        if (zmq_poll(items, ni, (long)wait) < 0 && errno != EINTR) {
            rc = rumor_fail(err, RUMOR_EIO, "poll: %s", zmq_strerror(errno));
            break;
        }
        now = rumor_now_ms();
        /* Knocks before ZAP requests: a knock and the handshake it clears may arrive together. */
        if (items[udp_item].revents & ZMQ_POLLIN) node_handle_udp(n, now);
        if (items[mon_item].revents & ZMQ_POLLIN) handle_router_monitor(n, now);
        for (int i = 0; i < np; i++) {
            dial_t *p = polled[i].p;
            if (polled[i].knock >= 0 && (items[polled[i].knock].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
                node_handle_knock_answer(n, p, now);
            if (polled[i].monitor >= 0 && (items[polled[i].monitor].revents & ZMQ_POLLIN) && p->monitor)
                handle_monitor(n, p, now);
        }
        if (items[1].revents & ZMQ_POLLIN) node_handle_zap(n);
        if (items[0].revents & ZMQ_POLLIN) handle_socket(n, NULL, now);
        if (n->control && (items[2].revents & ZMQ_POLLIN)) node_handle_control(n, now);
        if (items[wake_item].revents & ZMQ_POLLIN) {
            char drain[64];
            while (read(n->wake[0], drain, sizeof drain) > 0) {
            }
        }
        for (int i = 0; i < np; i++) {
            dial_t *p = polled[i].p;
            if (polled[i].dealer >= 0 && (items[polled[i].dealer].revents & ZMQ_POLLIN) && p->used && p->dealer)
                handle_socket(n, p, now);
            if (p->used && p->send.out) node_pump(n, p);
        }
        housekeeping(n, now);
        char why[400];
        if (n->cfg.exit_on_refusal && all_bootstraps_refused(n, why, sizeof why)) {
            rc = rumor_fail(err, RUMOR_EAUTH,
                            "the bootstrap refused this node: %s; check --swarm, or ask the swarm's authority for "
                            "a certificate (rumor swarm admit)", why);
            break;
        }
        if (join_failed(n, now - started, why, sizeof why)) {
            rc = rumor_fail(err, RUMOR_ETIMEDOUT, "%s", why);
            break;
        }
    }
    if (n->relayed_msgs)
        rumor_log(RUMOR_LOG_INFO, "relayed %" PRIu64 " messages (%.1f MB) between members that cannot reach each other",
                  n->relayed_msgs, (double)n->relayed_bytes / 1e6);
    /* Leave: bye to everyone, and give the bytes a moment to go out. */
    rumor_memb_leave(n->memb, rumor_now_ms());
    run_actions(n, rumor_now_ms());
    for (int i = 0; i < MAX_PEERS; i++)
        if (n->peers[i].used) node_set_int(n->peers[i].dealer, ZMQ_LINGER, 500);
    return rc;
}
