/* node_dispatch.c - messages in (node_impl.h): read from our ROUTER and our DEALERs, decoded,
 * and handed by type to membership, models, relays and pulls; answers on the way a message
 * came (byes, hellos). */
#include "node_impl.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

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

/* A message of ours (frame) to the member `key` the way its message came: through the relay
 * session, or on our dial (PATH_ROUTER is answered on the connection, by the caller). Whether
 * it went. */
static bool send_back(rumor_node_t *n, const uint8_t *key, path_t via, rumor_msg_t *m)
{
    dial_t *p = node_find_peer(n, key);
    if (!p) return false;
    if (via == PATH_DEALER) return p->dealer && node_send_dealer(n, p, m) == RUMOR_OK;
    const size_t len = node_encode(n, m);
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

/* A decoded message (n->wmsg) from the admitted-or-not member `key`: over our ROUTER (rid,
 * its connection) or over the DEALER we dialled it with (rid NULL: a member reached by its own
 * address answers there only when it cannot dial us back). The same rules either way: nothing
 * but a hello counts before a valid hello. */
void node_dispatch(rumor_node_t *n, const uint8_t key[RUMOR_KEY_LEN], path_t via, zmq_msg_t *rid, uint64_t now)
{
    rumor_msg_t *wp = &n->wmsg;
    rumor_memb_msg_t *mp = &n->mmsg;
    if (wp->type == RUMOR_MSG_HELLO) {
        node_handle_hello(n, key, rid, wp, now);
        conn_t *c = node_find_conn(n, key, false, now);
        if (rid && c && c->admitted) {
            node_note_rid(n, c, rid, now);
            node_note_seen(n, c, false, now);
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
            node_note_seen(n, c, true, now);
        }
        if (wp->type == RUMOR_MSG_ACK && wp->u.ack.seen[0]) node_note_seen_us(n, c, wp->u.ack.seen, now);
        node_vet_entries(n, c, mp, now);
        rumor_memb_recv(n->memb, key, c->addr, mp, now);
    } else if (wp->type == RUMOR_MSG_MODEL && n->chunk_cb) {
        n->chunk_cb(n->chunk_arg, key, &wp->u.model);
    } else if (wp->type == RUMOR_MSG_RELAY) {
        node_relay_handle(n, key, now);
    } else if (wp->type == RUMOR_MSG_PULL && n->pull_cb && now - c->last_pull >= PULL_INTERVAL_MS) {
        /* At most one answer per peer per interval: a pull costs a whole model. */
        c->last_pull = now;
        n->pull_cb(n->pull_arg, n, key, wp->u.pull.layout);
    } else if (wp->type == RUMOR_MSG_LAYOUT && n->layout_cb && now - c->last_layout >= PULL_INTERVAL_MS) {
        c->last_layout = now; /* (one text a member per interval: parsing it costs its length) */
        n->layout_cb(n->layout_arg, key, wp->u.layout.layout, (const char *)wp->u.layout.text, wp->u.layout.text_len);
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
        (void)node_send_dealer(n, p, &hello);
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
void node_handle_socket(rumor_node_t *n, dial_t *p, uint64_t now)
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
        node_run_actions(n, now);
    }
}
