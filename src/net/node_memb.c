/* node_memb.c - membership on the wire (node_impl.h): membership's messages to and from the
 * wire's, and what membership asks the node to do. */
#include "node_impl.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

/* ---- membership <-> wire ---- */

static void upd_to_wire(rumor_proto_peer_t *w, const rumor_memb_update_t *u)
{
    memcpy(w->key, u->key, RUMOR_KEY_LEN);
    snprintf(w->addr, sizeof w->addr, "%s", u->addr);
    w->inc = u->inc;
    w->state = (rumor_proto_state_t)u->state;
    w->boot = u->boot;
    w->undialable = u->undialable;
    w->cert_len = u->cert_len;
    memcpy(w->cert, u->cert, u->cert_len);
    w->has_proof = u->proven;
    memcpy(w->proof, u->proof, RUMOR_PROTO_PROOF_LEN);
}

static void upd_from_wire(rumor_memb_update_t *u, const rumor_proto_peer_t *w)
{
    memcpy(u->key, w->key, RUMOR_KEY_LEN);
    snprintf(u->addr, sizeof u->addr, "%s", w->addr);
    u->inc = w->inc;
    u->state = (rumor_memb_state_t)w->state;
    u->boot = w->boot;
    u->undialable = w->undialable;
    /* A certificate too long for membership cannot be a valid one: none, then (dropped). */
    u->cert_len = w->cert_len <= RUMOR_MEMB_CERT_MAX ? (uint16_t)w->cert_len : 0;
    memcpy(u->cert, w->cert, u->cert_len);
    u->proven = false; /* (until node_vet_entries checks the signature) */
    if (w->has_proof) memcpy(u->proof, w->proof, RUMOR_MEMB_PROOF_LEN);
    else memset(u->proof, 0, RUMOR_MEMB_PROOF_LEN);
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
        m->undialable = rumor_proto_hello_undialable(&w->u.hello);
        m->cert_len = w->u.hello.cert_len <= RUMOR_MEMB_CERT_MAX ? (uint16_t)w->u.hello.cert_len : 0;
        memcpy(m->cert, w->u.hello.cert, m->cert_len);
        memcpy(m->proof, w->u.hello.proof, RUMOR_MEMB_PROOF_LEN);
        m->proven = false; /* (node_handle_hello checks it) */
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
void node_run_actions(rumor_node_t *n, uint64_t now)
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
            if (p && ap->state != RUMOR_MEMB_ALIVE) node_close_peer(p);
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
