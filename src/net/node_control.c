/* node_control.c - the control socket (node_impl.h): what `rumor status` shows. */
#include "node_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static const char *drop_name(int i, char buf[48])
{
    if (i < RUMOR_PROTO_REJECT_COUNT) return rumor_proto_reject_name((rumor_proto_reject_t)i);
    if (i == DROP_NO_HELLO) return "no-hello";
    if (i >= DROP_CERT_FIRST && i < DROP_FRAMES) {
        snprintf(buf, 48, "cert-%s", rumor_cert_reject_name((rumor_cert_reject_t)(i - DROP_CERT_FIRST)));
        return buf;
    }
    switch (i) {
    case DROP_FRAMES: return "bad-frames";
    case DROP_NO_USER_ID: return "no-user-id";
    case DROP_SEND_FULL: return "send-queue-full";
    case DROP_UNEXPECTED: return "unexpected";
    case DROP_NOT_ADMITTED: return "not-admitted";
    case DROP_ADMIT_MALFORMED: return "admit-malformed";
    case DROP_ADMIT_UNSEALED: return "admit-unsealed";
    case DROP_ADMIT_RATE: return "admit-rate";
    case DROP_HANDSHAKE_RATE: return "handshake-rate";
    case DROP_ENTRY_CERT: return "entry-cert";
    case DROP_PROOF: return "unsigned-record";
    case DROP_ENTRY_BUDGET: return "entry-budget";
    case DROP_RELAY_REFUSED: return "relay-refused";
    case DROP_RELAY_BUDGET: return "relay-budget"; /* (over the rate, or over what it may hold) */
    case DROP_E2E: return "relayed-unopened";
    case DROP_E2E_STALE: return "relayed-stale";
    }
    return "other";
}

/* ---- status ---- */

typedef struct {
    char *buf;
    size_t cap, len;
} out_t;

static void out(out_t *o, const char *fmt, ...) RUMOR_PRINTF(2, 3);
static void out(out_t *o, const char *fmt, ...)
{
    if (o->len >= o->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (k > 0) o->len += (size_t)k;
    if (o->len >= o->cap) o->len = o->cap - 1;
}

/* How a member is reached now (node_reach): "direct" over our dial, "outbound" back over the
 * connection it opened to us (it cannot be dialled, or not yet), "relay:ID" sealed through
 * that member, "dialling" while none of these works yet, "none". */
static const char *reach_name(rumor_node_t *n, const uint8_t *key, uint64_t now, char buf[32])
{
    const path_t r = node_reach(n, key, now);
    if (r == PATH_DEALER) return "direct";
    if (r == PATH_ROUTER) return "outbound";
    const relay_sess_t *s = node_relay_session(n, key);
    if (r == PATH_RELAY && s && s->state != SESS_NONE) {
        char id[RUMOR_SHORT_ID_LEN + 1];
        rumor_key_short_id(id, s->via);
        snprintf(buf, 32, "relay:%s", id);
        return buf;
    }
    const dial_t *p = node_find_peer(n, key);
    return r == PATH_RELAY ? "relay" : p && p->dealer ? "dialling" : "none";
}

static void status_text(rumor_node_t *n, bool json, out_t *o, uint64_t now)
{
    char nb[48], rb[32];
    const rumor_memb_stats_t ms = rumor_memb_stats(n->memb);
    int nv = rumor_memb_view_count(n->memb);
    char z85[RUMOR_KEY_Z85_LEN + 1];
    if (json) {
        rumor_key_to_z85(z85, rumor_secret_key_public(n->key));
        out(o, "{\"id\":\"%s\",\"key\":\"%s\",\"address\":\"%s\",\"incarnation\":%" PRIu32
               ",\"uptime_s\":%.1f,\"reachable\":%s,\"seen_as\":\"%s\",\"site\":\"%016" PRIx64
               "\",\"place\":\"%016" PRIx64 "\",\"dumpable\":%s,\"peers\":%d,\"passive\":%d,\"view\":[",
            n->id, z85, n->address, rumor_memb_incarnation(n->memb), (double)(now - n->start_ms) / 1000.0,
            n->last_pinged ? "true" : "false", n->seen_as, n->site, rumor_node_place(n),
            prctl(PR_GET_DUMPABLE) == 0 ? "false" : "true", nv, rumor_memb_passive_count(n->memb));
        for (int i = 0; i < nv; i++) {
            const rumor_memb_member_t *e = rumor_memb_view_at(n->memb, i);
            char id[RUMOR_SHORT_ID_LEN + 1];
            rumor_key_to_z85(z85, e->key);
            rumor_key_short_id(id, e->key);
            const conn_t *c = node_find_conn(n, e->key, false, now);
            size_t cert_len;
            const uint8_t *cert = rumor_memb_view_cert(n->memb, i, &cert_len);
            /* dialable and place: what the graph is dealt from (its signed record, its
             * certificate); site: what its hello to us says */
            out(o, "%s{\"id\":\"%s\",\"key\":\"%s\",\"addr\":\"%s\",\"state\":\"%s\",\"inc\":%" PRIu32
                   ",\"rtt_ms\":%" PRIu32 ",\"last_seen_ms\":%" PRIu64 ",\"via\":\"%s\",\"relays\":%s"
                   ",\"dialable\":%s,\"site\":\"%016" PRIx64 "\",\"boot\":\"%016" PRIx64 "\",\"place\":\"%016" PRIx64
                   "\"}",
                i ? "," : "", id, z85, e->addr, rumor_memb_state_name(e->state), e->inc, e->rtt_ms,
                now - e->last_seen_ms, reach_name(n, e->key, now, rb),
                c && c->admitted && (c->caps & RUMOR_CAP_RELAY_SERVE) ? "true" : "false",
                e->undialable ? "false" : "true", c && c->admitted ? c->site : 0, e->boot,
                rumor_member_place(cert, cert_len, e->key));
        }
        out(o, "],\"counters\":{\"msgs_in\":%" PRIu64 ",\"msgs_out\":%" PRIu64 ",\"bytes_in\":%" PRIu64
               ",\"bytes_out\":%" PRIu64 ",\"pings_sent\":%" PRIu64 ",\"acks_received\":%" PRIu64
               ",\"suspicions\":%" PRIu64 ",\"deaths\":%" PRIu64 ",\"refutations\":%" PRIu64
               ",\"knocks_in\":%" PRIu64 ",\"knocks_out\":%" PRIu64 ",\"stale_knocks\":%" PRIu64
               ",\"connections\":%d,\"strangers\":%d,\"held_peak\":%" PRIu64 ",\"held_total_peak\":%" PRIu64
               ",\"revocation_errors\":%" PRIu64
               ",\"dials_given_up\":%" PRIu64 ",\"msgs_back\":%" PRIu64 ",\"relayed_msgs\":%" PRIu64
               ",\"relayed_bytes\":%" PRIu64 ",\"sent_via_relay_msgs\":%" PRIu64 ",\"sent_via_relay_bytes\":%" PRIu64
               ",\"received_via_relay_msgs\":%" PRIu64 ",\"models_given_up\":%" PRIu64 ",\"stale_hellos\":%" PRIu64
               ",\"disproved\":%" PRIu64 ",\"muted\":%" PRIu64 "},\"rejected\":{",
            n->msgs_in, n->msgs_out, n->bytes_in, n->bytes_out, ms.pings_sent, ms.acks_received, ms.suspicions,
            ms.deaths, ms.refutations, n->knocks_in, n->knocks_out, n->stale_knocks, rumor_guard_count(n->guard),
            rumor_guard_strangers(n->guard), rumor_guard_peak(n->guard), rumor_guard_total_peak(n->guard), n->revoke_errors, n->dials_given_up, n->reverse_msgs, n->relayed_msgs,
            n->relayed_bytes, n->e2e_msgs_out, n->e2e_bytes_out, n->e2e_msgs_in, n->models_given_up, n->stale_hellos,
            ms.disproved, ms.muted);
        bool first = true;
        for (int i = 1; i < DROP_COUNT; i++)
            if (n->drops[i]) {
                out(o, "%s\"%s\":%" PRIu64, first ? "" : ",", drop_name(i, nb), n->drops[i]);
                first = false;
            }
        for (int i = 0; i < GUARD_CUT_COUNT; i++)
            if (rumor_guard_cuts(n->guard, (rumor_guard_cut_t)i)) {
                out(o, "%s\"%s\":%" PRIu64, first ? "" : ",", rumor_guard_cut_name((rumor_guard_cut_t)i),
                    rumor_guard_cuts(n->guard, (rumor_guard_cut_t)i));
                first = false;
            }
        if (ms.dropped_input) {
            out(o, "%s\"membership\":%" PRIu64, first ? "" : ",", ms.dropped_input);
            first = false;
        }
        /* claims beyond the incarnation step; reservoir members that never answered */
        if (ms.refused_claims) {
            out(o, "%s\"membership-claim\":%" PRIu64, first ? "" : ",", ms.refused_claims);
            first = false;
        }
        if (ms.forgotten) out(o, "%s\"membership-silent\":%" PRIu64, first ? "" : ",", ms.forgotten);
        out(o, "}");
        if (n->status_cb) {
            out(o, ",\"train\":");
            if (o->len < o->cap) o->len += n->status_cb(n->status_arg, true, o->buf + o->len, o->cap - o->len);
        }
        out(o, "}\n");
        return;
    }
    out(o, "node %s at %s, incarnation %" PRIu32 ", up %.0f s\n", n->id, n->address,
        rumor_memb_incarnation(n->memb), (double)(now - n->start_ms) / 1000.0);
    out(o, "%d peers in view, %d in reserve; %s\n", nv, rumor_memb_passive_count(n->memb),
        n->last_pinged ? "reachable (peers dial this node)"
        : n->warned_unreachable ? "cannot be dialled: works through its own connections to its peers"
                                : "not yet dialled by any peer");
    if (n->seen_as[0]) out(o, "behind NAT: peers see it at %s\n", n->seen_as);
    if (nv) out(o, "  %-8s  %-28s  %-7s  %7s  %9s  %s\n", "peer", "address", "state", "rtt ms", "seen ms", "via");
    for (int i = 0; i < nv; i++) {
        const rumor_memb_member_t *e = rumor_memb_view_at(n->memb, i);
        char id[RUMOR_SHORT_ID_LEN + 1];
        rumor_key_short_id(id, e->key);
        out(o, "  %-8s  %-28s  %-7s  %7" PRIu32 "  %9" PRIu64 "  %s\n", id, e->addr, rumor_memb_state_name(e->state),
            e->rtt_ms, now - e->last_seen_ms, reach_name(n, e->key, now, rb));
    }
    if (n->dials_given_up || n->reverse_msgs)
        out(o, "dials given up %" PRIu64 ", messages sent back over peers' own connections %" PRIu64 "\n",
            n->dials_given_up, n->reverse_msgs);
    if (n->models_given_up)
        out(o, "models given up on stuck links %" PRIu64 "\n", n->models_given_up);
    if (n->relayed_msgs || n->e2e_msgs_out || n->e2e_msgs_in)
        out(o, "relayed for others %" PRIu64 " messages (%" PRIu64 " bytes); through relays: sent %" PRIu64
               " (%" PRIu64 " bytes), received %" PRIu64 "\n",
            n->relayed_msgs, n->relayed_bytes, n->e2e_msgs_out, n->e2e_bytes_out, n->e2e_msgs_in);
    out(o, "messages in %" PRIu64 " (%" PRIu64 " bytes), out %" PRIu64 " (%" PRIu64 " bytes)\n", n->msgs_in,
        n->bytes_in, n->msgs_out, n->bytes_out);
    for (int i = 1; i < DROP_COUNT; i++)
        if (n->drops[i]) out(o, "rejected %s: %" PRIu64 "\n", drop_name(i, nb), n->drops[i]);
    for (int i = 0; i < GUARD_CUT_COUNT; i++)
        if (rumor_guard_cuts(n->guard, (rumor_guard_cut_t)i))
            out(o, "connections cut, %s: %" PRIu64 "\n", rumor_guard_cut_name((rumor_guard_cut_t)i),
                rumor_guard_cuts(n->guard, (rumor_guard_cut_t)i));
    if (n->status_cb && o->len < o->cap) o->len += n->status_cb(n->status_arg, false, o->buf + o->len, o->cap - o->len);
}

void node_handle_control(rumor_node_t *n, uint64_t now)
{
    char req[32];
    int len = zmq_recv(n->control, req, sizeof req - 1, ZMQ_DONTWAIT);
    if (len < 0) return;
    int more = 0;
    size_t sz = sizeof more;
    zmq_getsockopt(n->control, ZMQ_RCVMORE, &more, &sz);
    while (more) {
        zmq_msg_t x;
        zmq_msg_init(&x);
        zmq_msg_recv(&x, n->control, 0);
        more = zmq_msg_more(&x);
        zmq_msg_close(&x);
    }
    req[len < (int)sizeof req ? len : (int)sizeof req - 1] = 0;
    pthread_mutex_lock(&n->status_mu); /* (the buffer rumor_node_status copies out of) */
    out_t o = {n->status_buf, sizeof n->status_buf, 0};
    status_text(n, strcmp(req, "status json") == 0, &o, now);
    zmq_send(n->control, n->status_buf, o.len, 0);
    pthread_mutex_unlock(&n->status_mu);
}

/* A status asked for by another thread (rumor_node_status): answered from the loop. */
void node_serve_status(rumor_node_t *n, uint64_t now)
{
    const int req = atomic_exchange(&n->status_req, 0);
    if (!req) return;
    pthread_mutex_lock(&n->status_mu);
    out_t o = {n->status_buf, sizeof n->status_buf, 0};
    status_text(n, req == 2, &o, now);
    n->status_len = o.len;
    n->status_done = true;
    pthread_cond_broadcast(&n->status_cv);
    pthread_mutex_unlock(&n->status_mu);
}

rumor_err_t rumor_node_status(rumor_node_t *n, bool running, bool json, char *outbuf, size_t cap, int timeout_ms,
                              char err[RUMOR_ERR_LEN])
{
    pthread_mutex_lock(&n->status_mu);
    if (!running) { /* (no loop to ask: this thread is the node's only one) */
        out_t o = {n->status_buf, sizeof n->status_buf, 0};
        status_text(n, json, &o, rumor_now_ms());
        n->status_len = o.len;
    } else {
        n->status_done = false;
        atomic_store(&n->status_req, json ? 2 : 1);
        rumor_node_wake(n);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        while (!n->status_done)
            if (pthread_cond_timedwait(&n->status_cv, &n->status_mu, &ts) != 0) break;
        if (!n->status_done) {
            pthread_mutex_unlock(&n->status_mu);
            return rumor_fail(err, RUMOR_ETIMEDOUT, "the peer's node did not answer within %d ms", timeout_ms);
        }
    }
    const size_t len = n->status_len < cap - 1 ? n->status_len : cap - 1;
    memcpy(outbuf, n->status_buf, len);
    outbuf[len] = 0;
    pthread_mutex_unlock(&n->status_mu);
    return RUMOR_OK;
}

rumor_err_t rumor_node_query_status(const char *control, bool json, char *outbuf, size_t cap,
                                    char err[RUMOR_ERR_LEN])
{
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_REQ);
    rumor_err_t rc = RUMOR_OK;
    node_set_int(s, ZMQ_LINGER, 0);
    node_set_int(s, ZMQ_RCVTIMEO, 3000);
    node_set_int(s, ZMQ_SNDTIMEO, 3000);
    if (zmq_connect(s, control) != 0) {
        rc = rumor_fail(err, RUMOR_EINVAL, "%s: %s (expected ipc://PATH)", control, zmq_strerror(errno));
        goto out;
    }
    const char *req = json ? "status json" : "status";
    if (zmq_send(s, req, strlen(req), 0) < 0) {
        rc = rumor_fail(err, RUMOR_ETIMEDOUT, "%s: no node answers (%s)", control, zmq_strerror(errno));
        goto out;
    }
    int len = zmq_recv(s, outbuf, cap - 1, 0);
    if (len < 0) {
        rc = rumor_fail(err, RUMOR_ETIMEDOUT, "%s: no node answered within 3 s; is it running?", control);
        goto out;
    }
    outbuf[(size_t)len < cap - 1 ? (size_t)len : cap - 1] = 0;
out:
    zmq_close(s);
    zmq_ctx_term(ctx);
    return rc;
}
