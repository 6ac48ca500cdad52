/* node.c - the ZeroMQ driver: sockets, admission, and the membership state machine. */
#include "net/node.h"

#include "crypto.h"
#include "net/admit.h"
#include "net/guard.h"
#include "proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
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

#define MAX_PEERS 256        /* DEALERs: view, bootstraps and a few transient targets */
#define MAX_CONNS 1024       /* keys we have heard from (admitted or refused) */
#define SEND_HWM 64          /* messages queued per peer before sends are dropped */
#define RECV_HWM 8           /* whole messages of one connection libzmq queues for us; with two
                                more in transit, what the guard lets a connection hold (guard.h) */
#define MAX_INFLIGHT 4       /* model chunks queued per peer: the rest of SEND_HWM stays free
                                for pings and acks, so a model in transit never starves them */
#define MAX_MSG_SIZE (RUMOR_PROTO_MAX_HEADER + RUMOR_PROTO_MAX_PAYLOAD + 64)
/* What one connection may make libzmq hold (guard.h): its queue of whole messages, one being
 * read, one more of slack; each frame at most MAX_MSG_SIZE, and no honest message has more
 * than two frames. Anything beyond is a message that never ends: the connection is cut. */
#define GUARD_LIMIT ((uint64_t)(RECV_HWM + 2) * MAX_MSG_SIZE)
#define PULL_INTERVAL_MS 2000 /* one answered pull per peer per interval */
#define BATCH 64             /* messages taken from one socket per loop, for fairness */
#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define KNOCK_RETRY_MS 250   /* a knock unanswered is sent again, at doubling intervals */
#define KNOCK_RETRY_MAX_MS 2000
#define KNOCK_RATE 500.0     /* admission datagrams read per second at most (each costs an X25519
                                and an Ed25519 verification); the rest are dropped and counted */
#define KNOCK_SOURCE_RATE 20.0 /* ... and from one address (hashed into KNOCK_SOURCES buckets), so
                                  one sender cannot spend the node's budget on its own */
#define KNOCK_SOURCES 256

_Static_assert(RUMOR_CERT_MAX_LEN <= RUMOR_MEMB_CERT_MAX, "membership must hold a whole certificate");

#define CERT_CACHE 512            /* membership entries' certificates checked, by key */
#define CERT_BAD_RECHECK_MS 60000 /* a refused one is checked again after this long */

/* A certificate checked for a membership entry: a ping's updates name the same members
 * again and again, and each check costs an Ed25519 verification. */
typedef struct {
    bool used, ok;
    uint8_t key[RUMOR_KEY_LEN];
    uint8_t cert[RUMOR_CERT_MAX_LEN];
    size_t cert_len;
    uint64_t expires_at; /* unix seconds, when ok */
    uint64_t checked_ms, used_ms;
} cert_seen_t;

/* A token bucket (admission datagrams from one source). */
typedef struct {
    double tokens;
    uint64_t refill_ms; /* 0: never used (full) */
} bucket_t;

/* Why something from the network was dropped, for `rumor status`. */
enum {
    DROP_NO_HELLO = RUMOR_PROTO_REJECT_COUNT, /* after the proto reasons */
    DROP_CERT_FIRST,                            /* + rumor_cert_reject_t */
    DROP_FRAMES = DROP_CERT_FIRST + 16,         /* not 2 or 3 frames */
    DROP_NO_USER_ID,
    DROP_SEND_FULL,
    DROP_UNEXPECTED,                            /* a type that this node does not take here */
    DROP_NOT_ADMITTED,                          /* a CURVE handshake from a key that never knocked */
    DROP_ADMIT_MALFORMED,                       /* an admission datagram of the wrong shape */
    DROP_ADMIT_UNSEALED,                        /* one that does not open with our key */
    DROP_ADMIT_RATE,                            /* over KNOCK_RATE */
    DROP_HELD,                                  /* a connection held more than GUARD_LIMIT: cut */
    DROP_CONNS,                                 /* a connection beyond GUARD_MAX: cut */
    DROP_ENTRY_CERT,                            /* a membership entry without a valid certificate */
    DROP_COUNT
};

/* A model being sent: chunks reference the caller's buffer; the last one released by libzmq
 * (from its I/O thread, hence the atomic count) hands the buffer back. */
typedef struct {
    atomic_int refs;
    void (*release)(void *);
    void *arg;
} outgoing_t;

typedef struct {
    outgoing_t *out;                 /* NULL when nothing is in flight to this peer */
    const float *params;
    size_t n, chunk_params;
    uint32_t next, chunks;
    uint64_t layout, round;
    double w;
    const double *chunk_w;           /* per-chunk factors of w, or NULL */
    bool has_hash;                   /* an answer to a pull: every chunk carries the hash */
    uint8_t hash[RUMOR_PROTO_HASH_LEN];
    rumor_proto_codec_t codec;       /* f32: chunks point into params; else into enc */
    const uint8_t *enc;              /* encoded chunks, back to back */
    const size_t *enc_off;           /* chunks + 1 byte offsets into enc */
    rumor_node_model_ext_t ext;      /* mix id, copy version: what every chunk carries */
} sending_t;

typedef struct {
    bool used;
    uint8_t key[RUMOR_KEY_LEN];
    char addr[RUMOR_MEMB_ADDR_LEN];  /* zmq endpoint we connect to */
    sending_t send;
    void *dealer;
    uint64_t last_used;
    bool refused;                    /* it refused us (knock answer, or a bye to our hello) */
    char refusal[128];
    void *monitor;                   /* the DEALER's connection events */
    int conn_refused, handshake_failed, handshakes;
    bool auth_failed;                /* its ZAP handler refused our handshake: knock again */
    /* Admission: we knock (from a UDP socket connected to it) before and while we dial. */
    bool knocking;
    int knock_fd;
    uint8_t knock[RUMOR_ADMIT_MAX];  /* the datagram, resent unchanged until answered */
    size_t knock_len;
    uint8_t knock_nonce[RUMOR_ADMIT_NONCE_LEN];
    uint64_t knock_next, knock_gap, knock_since;
    uint64_t retry_at;               /* knock again then (after a refusal or a failure); 0: no */
    int fails;                       /* refused handshakes since the last one that passed */
    bool answered;                   /* it admitted us, and its own certificate passed */
    bool unreachable;                /* the knock met an ICMP port-unreachable */
    bool wrong_key;                  /* the node there has another key: real_key */
    uint8_t real_key[RUMOR_KEY_LEN];
} peer_t;

typedef struct {
    bool used;
    bool knocked;                    /* its certificate passed in a knock: the ZAP handler lets it in */
    bool admitted;                   /* its certificate passed in a hello on its connection */
    uint64_t boot;                   /* its boot id from its last knock (a restart changes it) */
    uint64_t knock_ms;               /* when its newest knock was sealed (its clock): older ones
                                        are replays, and change nothing */
    uint8_t key[RUMOR_KEY_LEN];
    char addr[RUMOR_MEMB_ADDR_LEN];  /* from its hello */
    uint64_t expires_at;             /* its certificate's, unix seconds */
    uint64_t last_seen;
    uint64_t last_pull;              /* when we last answered its pull */
    uint64_t done;                   /* its hello said it finished at this round; 0: training */
    uint64_t done_boot;              /* ... in the run of this boot id (a new run trains again) */
} conn_t;

struct rumor_node {
    rumor_node_config_t cfg;
    void *ctx, *router, *zap, *control;
    void *router_mon;                /* the ROUTER's connection events, for the guard */
    rumor_guard_t *guard;            /* what each connection makes libzmq hold (guard.h) */
    uint64_t guard_next;             /* when the guard checks next */
    int udp;                         /* admission datagrams: knocks in, answers out */
    uint64_t boot_id;                /* this run's, in knocks and answers */
    _Atomic uint64_t done_round;     /* we finished training at this round (trainer's); 0: not */
    uint64_t done_sent;              /* the done_round our members have been told of */
    double knock_tokens;
    uint64_t knock_refill_ms, knocks_in, knocks_out, stale_knocks;
    uint64_t revoke_errors;          /* reloads of a broken or unreadable revocation list */
    bucket_t knock_src[KNOCK_SOURCES];
    unsigned mon_seq;
    rumor_secret_key_t *key;
    uint8_t authority[RUMOR_KEY_LEN];
    uint8_t cert[RUMOR_CERT_MAX_LEN];
    size_t cert_len;
    rumor_revoked_t *revoked;
    rumor_memb_t *memb;
    cert_seen_t *certs;              /* CERT_CACHE */
    char self_addr[RUMOR_MEMB_ADDR_LEN];   /* tcp://IP:PORT, advertised */
    char address[RUMOR_ADDR_LEN];          /* rumor://KEY@HOST:PORT */
    char id[RUMOR_SHORT_ID_LEN + 1];
    char control_path[512];
    rumor_addr_t boot[RUMOR_NODE_MAX_BOOTSTRAPS];
    int n_boot;
    peer_t peers[MAX_PEERS];
    conn_t conns[MAX_CONNS];
    uint32_t seq;
    uint64_t start_ms;
    uint64_t msgs_in, msgs_out, bytes_in, bytes_out;
    uint64_t drops[DROP_COUNT];
    uint8_t *buf; /* frame 1 encoding buffer */
    rumor_node_chunk_cb chunk_cb;
    void *chunk_arg;
    rumor_node_tick_cb tick_cb;
    void *tick_arg;
    rumor_node_status_cb status_cb;
    void *status_arg;
    rumor_node_pull_cb pull_cb;
    void *pull_arg;
    uint64_t tick_ms;                /* longest sleep between ticks */
    int wake[2];                     /* a pipe: another thread's byte ends our poll early */
    atomic_bool stop, reload;        /* asked for by rumor_node_stop, rumor_node_reload */
    /* Scratch space for the loop (large; per node, so two nodes can share a process). */
    rumor_memb_action_t act;
    rumor_memb_msg_t mmsg;
    rumor_msg_t wmsg, wmsg2;
    char status_buf[256 * 1024];
    int refusals_logged;             /* refusals are counted always, logged a bounded number of times */
    /* Reachability: a ping that reached us through our ROUTER proves our advertised address
     * works; in a swarm where nobody pings us, it probably does not. */
    uint64_t joined_at, last_pinged;
    bool warned_unreachable;
    bool joined; /* once in a swarm, an empty view later is churn, not a failed join */
};


static uint64_t unix_now(void) { return (uint64_t)time(NULL); }

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
    case DROP_HELD: return "held-too-much";
    case DROP_CONNS: return "too-many-connections";
    case DROP_ENTRY_CERT: return "entry-cert";
    }
    return "other";
}

static bool same_key(const uint8_t *a, const uint8_t *b) { return memcmp(a, b, RUMOR_KEY_LEN) == 0; }

/* Milliseconds from now to a deadline, 0 once it has passed (never a wrapped difference). */
static uint64_t until(uint64_t deadline, uint64_t now) { return deadline > now ? deadline - now : 0; }

/* ---- sockets ---- */

static int set_curve_keys(rumor_node_t *n, void *s)
{
    return zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, rumor_secret_key_public(n->key), RUMOR_KEY_LEN) |
           zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, rumor_secret_key_bytes(n->key), RUMOR_KEY_LEN);
}

static void set_int(void *s, int opt, int v) { (void)zmq_setsockopt(s, opt, &v, sizeof v); }

static void set_common(void *s)
{
    set_int(s, ZMQ_LINGER, 0);
    set_int(s, ZMQ_IPV6, 1);
    int64_t max = MAX_MSG_SIZE;
    (void)zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof max);
    /* ZeroMQ heartbeats find a dead TCP connection without waiting for the kernel. */
    set_int(s, ZMQ_HEARTBEAT_IVL, 1000);
    set_int(s, ZMQ_HEARTBEAT_TIMEOUT, 5000);
    set_int(s, ZMQ_HEARTBEAT_TTL, 10000);
}

static void outgoing_unref(outgoing_t *o)
{
    if (atomic_fetch_sub(&o->refs, 1) == 1) {
        if (o->release) o->release(o->arg);
        free(o);
    }
}

static void chunk_free_cb(void *data, void *hint)
{
    (void)data;
    outgoing_unref(hint);
}

static void close_dealer(peer_t *p)
{
    if (p->send.out) outgoing_unref(p->send.out); /* chunks not yet queued are dropped */
    p->send.out = NULL;
    /* Stop the monitor before closing its reader: libzmq's I/O thread sends monitor events
     * blocking, and with nobody left to read them it would hang, and every socket with it. */
    if (p->monitor && p->dealer) zmq_socket_monitor(p->dealer, NULL, 0);
    if (p->dealer) zmq_close(p->dealer);
    if (p->monitor) zmq_close(p->monitor);
    p->dealer = p->monitor = NULL;
}

static void stop_knocking(peer_t *p)
{
    if (p->knocking) close(p->knock_fd);
    p->knocking = false;
    p->knock_fd = -1;
}

static void close_peer(peer_t *p)
{
    close_dealer(p);
    stop_knocking(p);
    memset(p, 0, sizeof *p);
    p->knock_fd = -1;
}

static peer_t *find_peer(rumor_node_t *n, const uint8_t *key)
{
    for (int i = 0; i < MAX_PEERS; i++)
        if (n->peers[i].used && same_key(n->peers[i].key, key)) return &n->peers[i];
    return NULL;
}

static rumor_err_t send_msg(rumor_node_t *n, peer_t *p, rumor_msg_t *msg);

static void fill_hello(rumor_node_t *n, rumor_msg_t *m)
{
    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_HELLO;
    memcpy(m->u.hello.cert, n->cert, n->cert_len);
    m->u.hello.cert_len = n->cert_len;
    snprintf(m->u.hello.addr, sizeof m->u.hello.addr, "%s", n->self_addr);
    m->u.hello.inc = rumor_memb_incarnation(n->memb);
    m->u.hello.boot = n->boot_id;
    m->u.hello.done = atomic_load(&n->done_round);
}

static void knock_send(rumor_node_t *n, peer_t *p, uint64_t now)
{
    if (send(p->knock_fd, p->knock, p->knock_len, 0) < 0 && errno == ECONNREFUSED) p->unreachable = true;
    n->knocks_out++;
    p->knock_next = now + p->knock_gap;
    p->knock_gap = p->knock_gap * 2 < KNOCK_RETRY_MAX_MS ? p->knock_gap * 2 : KNOCK_RETRY_MAX_MS;
}

/* Knock at the peer's UDP port: our certificate, sealed for its key. Its answer lets our
 * handshakes through its ZAP handler and tells us whether it admits us, and why not. */
static void knock_start(rumor_node_t *n, peer_t *p, uint64_t now)
{
    if (p->knocking) return;
    char why[RUMOR_ERR_LEN];
    int fd = rumor_admit_connect(p->addr, why);
    if (fd < 0) {
        rumor_log(RUMOR_LOG_DEBUG, "cannot knock at %s: %s", p->addr, why);
        p->retry_at = now + 1000; /* a transient failure (no descriptor, no route): again soon */
        return;
    }
    p->retry_at = 0;
    p->knock_since = now;
    p->knocking = true;
    p->knock_fd = fd;
    p->knock_len = rumor_admit_knock(p->knock, n->key, p->key, n->boot_id, rumor_unix_ms(), n->cert, n->cert_len,
                                     p->knock_nonce);
    p->knock_gap = KNOCK_RETRY_MS;
    knock_send(n, p, now);
}

/* The DEALER to an admitting peer, with a monitor (a refused handshake is how a peer that
 * restarted, and so forgot our knock, shows), greeted with our hello. */
static bool open_dealer(rumor_node_t *n, peer_t *p)
{
    void *d = zmq_socket(n->ctx, ZMQ_DEALER);
    if (!d) return false;
    set_common(d);
    set_int(d, ZMQ_SNDHWM, SEND_HWM);
    set_int(d, ZMQ_RCVHWM, 16);
    set_int(d, ZMQ_RECONNECT_IVL, 100);
    set_int(d, ZMQ_RECONNECT_IVL_MAX, 5000); /* exponential backoff up to 5 s */
    if (set_curve_keys(n, d) != 0 || zmq_setsockopt(d, ZMQ_CURVE_SERVERKEY, p->key, RUMOR_KEY_LEN) != 0 ||
        zmq_connect(d, p->addr) != 0) {
        rumor_log(RUMOR_LOG_DEBUG, "cannot connect to %s: %s", p->addr, zmq_strerror(errno));
        zmq_close(d);
        return false;
    }
    p->dealer = d;
    p->auth_failed = false;
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
    if (!p->monitor) {
        /* Without its monitor a refused handshake would go unseen, and an unread monitor
         * blocks libzmq's I/O thread: no DEALER then. */
        zmq_socket_monitor(d, NULL, 0);
        zmq_close(d);
        p->dealer = NULL;
        return false;
    }
    rumor_msg_t hello;
    fill_hello(n, &hello);
    (void)send_msg(n, p, &hello);
    return true;
}

/* The connection to a peer, made on first use: a knock, and at once the DEALER (the knock
 * travels half a round trip, the CURVE handshake two or more, so the knock is there first;
 * if it was lost, the refused handshake makes us knock and dial again). The table is
 * bounded: when full, the least recently used peer outside the view makes room. */
static peer_t *get_peer(rumor_node_t *n, const uint8_t *key, const char *addr, uint64_t now)
{
    peer_t *p = find_peer(n, key);
    if (p && (!addr || !*addr || strcmp(p->addr, addr) == 0)) {
        p->last_used = now;
        return p;
    }
    if (p) close_peer(p); /* it moved: reconnect to the new address */
    if (!addr || !*addr) return NULL;
    for (int i = 0; i < MAX_PEERS && !p; i++)
        if (!n->peers[i].used) p = &n->peers[i];
    if (!p) {
        peer_t *lru = NULL;
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
    knock_start(n, p, now);
    if (!open_dealer(n, p)) {
        close_peer(p);
        return NULL;
    }
    return p;
}

static rumor_err_t send_msg(rumor_node_t *n, peer_t *p, rumor_msg_t *msg)
{
    size_t len;
    if (!p->dealer) return RUMOR_ECLOSED; /* knocking again: membership copes with a lost message */
    msg->seq = msg->type == RUMOR_MSG_PING || msg->type == RUMOR_MSG_PING_REQ ? msg->seq : ++n->seq;
    rumor_err_t rc = rumor_proto_encode(msg, n->buf, RUMOR_PROTO_MAX_HEADER, &len);
    if (rc != RUMOR_OK) {
        rumor_log(RUMOR_LOG_WARN, "not sending an invalid %s", rumor_proto_type_name(msg->type));
        return rc;
    }
    if (zmq_send(p->dealer, n->buf, len, ZMQ_DONTWAIT) < 0) {
        n->drops[DROP_SEND_FULL]++;
        return RUMOR_ETIMEDOUT;
    }
    n->msgs_out++;
    n->bytes_out += len;
    return RUMOR_OK;
}

/* Reply through the ROUTER on the connection a message came in on (a refusal, or a request
 * to say hello first). */
static void reply_bye(rumor_node_t *n, zmq_msg_t *rid, const char *why)
{
    rumor_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = RUMOR_MSG_BYE;
    m.seq = ++n->seq;
    snprintf(m.u.bye.why, sizeof m.u.bye.why, "%s", why);
    size_t len;
    if (rumor_proto_encode(&m, n->buf, RUMOR_PROTO_MAX_HEADER, &len) != RUMOR_OK) return;
    zmq_msg_t id;
    zmq_msg_init(&id);
    zmq_msg_copy(&id, rid);
    if (zmq_msg_send(&id, n->router, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&id);
        return;
    }
    (void)zmq_send(n->router, n->buf, len, ZMQ_DONTWAIT);
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
    case RUMOR_MEMB_HELLO: fill_hello(n, w); break;
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
static bool memb_from_wire(rumor_memb_msg_t *m, const rumor_msg_t *w)
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

/* Whether a membership entry's certificate is of this swarm, for that very key, valid now
 * and not revoked; results are cached per key (until the certificate bytes change, or it
 * expires, or the revocation list is reloaded). */
static bool entry_cert_ok(rumor_node_t *n, const rumor_memb_update_t *u, uint64_t now)
{
    if (u->cert_len == 0 || u->cert_len > RUMOR_CERT_MAX_LEN) return false;
    cert_seen_t *slot = NULL, *lru = NULL;
    for (int i = 0; i < CERT_CACHE; i++) {
        cert_seen_t *c = &n->certs[i];
        if (c->used && same_key(c->key, u->key)) {
            slot = c;
            break;
        }
        if (!lru || !c->used || (lru->used && c->used_ms < lru->used_ms)) lru = c;
    }
    if (slot && slot->cert_len == u->cert_len && memcmp(slot->cert, u->cert, u->cert_len) == 0) {
        slot->used_ms = now;
        if (slot->ok) return unix_now() < slot->expires_at;
        if (now < slot->checked_ms + CERT_BAD_RECHECK_MS) return false;
    }
    if (!slot) slot = lru;
    rumor_cert_t cert;
    rumor_cert_reject_t why;
    const bool ok = rumor_cert_check(u->cert, u->cert_len, n->authority, u->key, unix_now(), n->revoked, &cert,
                                     &why) == RUMOR_OK;
    memset(slot, 0, sizeof *slot);
    slot->used = true;
    slot->ok = ok;
    memcpy(slot->key, u->key, RUMOR_KEY_LEN);
    memcpy(slot->cert, u->cert, u->cert_len);
    slot->cert_len = u->cert_len;
    slot->expires_at = ok ? cert.expires_at : 0;
    slot->checked_ms = slot->used_ms = now;
    return ok;
}

/* Keep only the entries whose certificate passes: membership must never dial, keep or pass
 * on a key no certificate vouches for (an address of a forger's choosing). */
static void vet_entries(rumor_node_t *n, rumor_memb_msg_t *m, uint64_t now)
{
    rumor_memb_update_t *list = m->kind == RUMOR_MEMB_PEERS ? m->peers : m->upd;
    int *count = m->kind == RUMOR_MEMB_PEERS ? &m->n_peers : &m->n_upd;
    int kept = 0;
    for (int i = 0; i < *count; i++) {
        if (!entry_cert_ok(n, &list[i], now)) {
            n->drops[DROP_ENTRY_CERT]++;
            continue;
        }
        if (kept != i) list[kept] = list[i];
        kept++;
    }
    *count = kept;
}

static conn_t *find_conn(rumor_node_t *n, const uint8_t *key, bool create, uint64_t now);

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
            peer_t *p = find_peer(n, ap->key);
            if (p && ap->state != RUMOR_MEMB_ALIVE) close_peer(p);
            if (ap->state == RUMOR_MEMB_LEFT) {
                /* It said bye: if it comes back it says hello again; until then we do not
                 * know where it listens. (Admission itself is per handshake.) */
                conn_t *c = find_conn(n, ap->key, false, now);
                if (c) c->addr[0] = 0;
            }
            continue;
        }
        peer_t *p = get_peer(n, ap->key, ap->addr, now);
        if (!p) continue;
        memb_to_wire(n, wp, &ap->msg);
        (void)send_msg(n, p, wp);
    }
}

/* ---- admission ---- */

static conn_t *find_conn(rumor_node_t *n, const uint8_t *key, bool create, uint64_t now)
{
    conn_t *free_slot = NULL, *oldest = NULL;
    for (int i = 0; i < MAX_CONNS; i++) {
        conn_t *c = &n->conns[i];
        if (c->used && same_key(c->key, key)) return c;
        if (!c->used && !free_slot) free_slot = c;
        if (c->used && (!oldest || c->last_seen < oldest->last_seen)) oldest = c;
        /* (only handshakes that passed the certificate check create entries, so a flood of
         * strangers cannot push admitted peers out) */
    }
    if (!create) return NULL;
    conn_t *c = free_slot ? free_slot : oldest; /* a full table forgets the longest silent */
    memset(c, 0, sizeof *c);
    c->used = true;
    memcpy(c->key, key, RUMOR_KEY_LEN);
    c->last_seen = now;
    return c;
}

/* Count every refusal; log a bounded number, so a flood cannot fill the disk. */
static void refusal(rumor_node_t *n, const uint8_t *key, rumor_cert_reject_t why, const char *where, bool forget,
                    uint64_t now)
{
    char id[RUMOR_SHORT_ID_LEN + 1];
    rumor_key_short_id(id, key);
    n->drops[DROP_CERT_FIRST + (int)why]++;
    if (n->refusals_logged < 50)
        rumor_log(RUMOR_LOG_WARN, "refused %s (%s): certificate %s%s", id, where, rumor_cert_reject_name(why),
                  ++n->refusals_logged == 50 ? " (further refusals are only counted)" : "");
    /* A hello comes over the key's own connection; a knock may be a stranger's replay of an
     * old one (say, with a certificate since renewed), which must not undo a valid admission:
     * expiry and revocation are enforced anyway, at the ZAP handler and on every message. */
    conn_t *old = forget ? find_conn(n, key, false, now) : NULL;
    if (old) old->knocked = old->admitted = false;
}

/* A hello: the certificate must be of this swarm, valid now, not revoked, and issued for the
 * CURVE key of this very connection. Only then does the key get an entry (so a flood of
 * strangers cannot push admitted peers out of the table), and membership hear of it. */
static void handle_hello(rumor_node_t *n, const uint8_t *key, zmq_msg_t *rid, const rumor_msg_t *w, uint64_t now)
{
    rumor_cert_t cert;
    rumor_cert_reject_t why = RUMOR_CERT_OK;
    char id[RUMOR_SHORT_ID_LEN + 1];
    rumor_key_short_id(id, key);
    if (rumor_cert_check(w->u.hello.cert, w->u.hello.cert_len, n->authority, key, unix_now(), n->revoked, &cert,
                         &why) != RUMOR_OK) {
        refusal(n, key, why, "hello", true, now);
        char reason[64];
        snprintf(reason, sizeof reason, "certificate %s", rumor_cert_reject_name(why));
        reply_bye(n, rid, reason);
        return;
    }
    conn_t *c = find_conn(n, key, true, now);
    if (!c->admitted) rumor_log(RUMOR_LOG_INFO, "admitted %s (%s) from %s", id, cert.name, w->u.hello.addr);
    c->admitted = true;
    c->expires_at = cert.expires_at;
    c->last_seen = now;
    snprintf(c->addr, sizeof c->addr, "%s", w->u.hello.addr);
    if (w->u.hello.done) {
        if (!c->done) rumor_log(RUMOR_LOG_INFO, "%s finished training at round %" PRIu64, id, w->u.hello.done);
        c->done = w->u.hello.done, c->done_boot = w->u.hello.boot;
    } else if (w->u.hello.boot != c->done_boot) {
        c->done = 0; /* a new run of that member: it trains again */
    }
    memb_from_wire(&n->mmsg, w);
    rumor_memb_recv(n->memb, c->key, c->addr, &n->mmsg, now);
}

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

/* A connection opened or closed, for the guard. */
static void guard_event(rumor_node_t *n, uint16_t event, uint32_t fd, uint64_t now)
{
    if (event == ZMQ_EVENT_ACCEPTED || event == ZMQ_EVENT_CONNECTED) {
        if (!rumor_guard_open(n->guard, (int)fd, now)) n->drops[DROP_CONNS]++;
    } else if (event == ZMQ_EVENT_DISCONNECTED || event == ZMQ_EVENT_CLOSED) {
        rumor_guard_close(n->guard, (int)fd);
    }
}

static void handle_router_monitor(rumor_node_t *n, uint64_t now)
{
    uint16_t event;
    uint32_t value;
    while (monitor_event(n->router_mon, &event, &value)) guard_event(n, event, value, now);
}

/* Connection events of a bootstrap's DEALER: counts that explain a failed join. A
 * disconnection before any handshake succeeded means the CURVE handshake failed: with
 * CURVE that is what a wrong server key looks like from the client. */
static void handle_monitor(rumor_node_t *n, peer_t *p, uint64_t now)
{
    uint16_t event;
    uint32_t value;
    while (monitor_event(p->monitor, &event, &value)) {
        guard_event(n, event, value, now);
        switch (event) {
        case ZMQ_EVENT_CONNECT_RETRIED: p->conn_refused++; break;
        case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
            p->handshakes++;
            p->fails = 0;
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
            break;
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
    peer_t *p = find_peer(n, b->key);
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

/* A bye on one of our DEALERs: a peer refusing us, or asking for our hello again. */
static void handle_dealer(rumor_node_t *n, peer_t *p, uint64_t now)
{
    for (int k = 0; k < BATCH; k++) {
        uint8_t f1[1024];
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, p->dealer, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            return;
        }
        const size_t len = zmq_msg_size(&part);
        if (len <= sizeof f1) memcpy(f1, zmq_msg_data(&part), len);
        int more = zmq_msg_more(&part);
        rumor_guard_delivered(n->guard, zmq_msg_get(&part, ZMQ_SRCFD), now);
        zmq_msg_close(&part);
        while (more) { /* a second frame is never expected here: drain it */
            zmq_msg_init(&part);
            more = zmq_msg_recv(&part, p->dealer, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&part);
            zmq_msg_close(&part);
        }
        rumor_msg_t w;
        rumor_proto_reject_t why;
        if (len > sizeof f1 || rumor_proto_decode(&w, f1, len, NULL, 0, &why) != RUMOR_OK ||
            w.type != RUMOR_MSG_BYE) {
            n->drops[DROP_UNEXPECTED]++;
            continue;
        }
        if (strcmp(w.u.bye.why, "hello") == 0) {
            /* It lost our hello (it restarted, or forgot us): greet it again. */
            rumor_msg_t hello;
            fill_hello(n, &hello);
            (void)send_msg(n, p, &hello);
            continue;
        }
        char id[RUMOR_SHORT_ID_LEN + 1];
        rumor_key_short_id(id, p->key);
        if (!p->refused)
            rumor_log(RUMOR_LOG_WARN, "peer %s at %s refused us: %s", id, p->addr,
                      w.u.bye.why[0] ? w.u.bye.why : "no reason given");
        p->refused = true;
        snprintf(p->refusal, sizeof p->refusal, "%s", w.u.bye.why[0] ? w.u.bye.why : "refused");
        (void)now;
    }
}

static void handle_router(rumor_node_t *n, uint64_t now)
{
    rumor_msg_t *wp = &n->wmsg;
    rumor_memb_msg_t *mp = &n->mmsg;
    for (int k = 0; k < BATCH; k++) {
        zmq_msg_t parts[4];
        int count = 0;
        bool more = true;
        while (more) {
            zmq_msg_t *part = &parts[count < 4 ? count : 3];
            if (count >= 4) zmq_msg_close(part);
            zmq_msg_init(part);
            if (zmq_msg_recv(part, n->router, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(part);
                if (count == 0) return;
                break;
            }
            more = zmq_msg_more(part);
            count++;
        }
        int held = count < 4 ? count : 4;
        n->msgs_in++;
        rumor_guard_delivered(n->guard, zmq_msg_get(&parts[held - 1], ZMQ_SRCFD), now);
        for (int i = 1; i < held; i++) n->bytes_in += zmq_msg_size(&parts[i]);
        if (count < 2 || count > 3) {
            n->drops[DROP_FRAMES]++;
            goto next;
        }
        /* The ZAP handler set User-Id to the Z85 of the connection's CURVE key. */
        const char *uid = zmq_msg_gets(&parts[1], "User-Id");
        uint8_t key[RUMOR_KEY_LEN];
        if (!uid || rumor_key_from_z85(key, uid, NULL) != RUMOR_OK) {
            n->drops[DROP_NO_USER_ID]++;
            goto next;
        }
        rumor_proto_reject_t why = RUMOR_PROTO_REJECT_NONE;
        const uint8_t *payload = count == 3 ? zmq_msg_data(&parts[2]) : NULL;
        size_t payload_len = count == 3 ? zmq_msg_size(&parts[2]) : 0;
        if (rumor_proto_decode(wp, zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), payload, payload_len,
                               &why) != RUMOR_OK) {
            n->drops[why < RUMOR_PROTO_REJECT_COUNT ? why : RUMOR_PROTO_REJECT_MALFORMED]++;
            goto next;
        }
        if (wp->type == RUMOR_MSG_HELLO) {
            handle_hello(n, key, &parts[0], wp, now);
            goto next;
        }
        conn_t *c = find_conn(n, key, false, now);
        if (!c || !c->admitted || !c->addr[0] || (c->expires_at && unix_now() >= c->expires_at)) {
            /* No valid hello from this key (yet, or since we restarted, or since it expired):
             * nothing it says counts. Ask it for one, once in a while. */
            n->drops[DROP_NO_HELLO]++;
            if (n->drops[DROP_NO_HELLO] % 16 == 1) reply_bye(n, &parts[0], "hello");
            goto next;
        }
        c->last_seen = now;
        if (wp->type == RUMOR_MSG_BYE && wp->u.bye.why[0]) {
            n->drops[DROP_UNEXPECTED]++; /* refusals and hello requests belong on our DEALERs */
            goto next;
        }
        if (memb_from_wire(mp, wp)) {
            if (wp->type == RUMOR_MSG_PING) n->last_pinged = now;
            vet_entries(n, mp, now);
            rumor_memb_recv(n->memb, key, c->addr, mp, now);
        } else if (wp->type == RUMOR_MSG_MODEL && n->chunk_cb) {
            const rumor_msg_model_t *mm = &wp->u.model;
            rumor_node_chunk_t ch = {.round = mm->round, .layout = mm->layout, .w = mm->w, .chunk = mm->chunk,
                                     .chunks = mm->chunks, .off = mm->off, .n = mm->n, .has_hash = mm->has_hash,
                                     .codec = (int)mm->codec, .mix = mm->mix, .has_copy = mm->has_copy,
                                     .ver = mm->ver, .lin = mm->lin, .base = mm->base, .need = mm->need};
            if (mm->has_hash) memcpy(ch.hash, mm->hash, sizeof ch.hash);
            n->chunk_cb(n->chunk_arg, key, &ch, mm->payload, mm->payload_len);
        } else if (wp->type == RUMOR_MSG_PULL && n->pull_cb && now - c->last_pull >= PULL_INTERVAL_MS) {
            /* At most one answer per peer per interval: a pull costs a whole model. */
            c->last_pull = now;
            n->pull_cb(n->pull_arg, n, key, wp->u.pull.layout);
        } else {
            n->drops[DROP_UNEXPECTED]++;
        }
    next:
        for (int i = 0; i < held; i++) zmq_msg_close(&parts[i]);
        run_actions(n, now);
    }
}

/* Datagrams on a peer's knock socket: its answer (or a diagnosis). */
static void handle_knock_answer(rumor_node_t *n, peer_t *p, uint64_t now)
{
    for (int k = 0; k < 8 && p->knocking; k++) {
        uint8_t buf[RUMOR_ADMIT_MAX + 1];
        ssize_t len = recv(p->knock_fd, buf, sizeof buf, MSG_DONTWAIT);
        if (len < 0) {
            if (errno == ECONNREFUSED) p->unreachable = true; /* nothing listens there (yet) */
            if (errno != ECONNREFUSED && errno != EINTR) return;
            continue;
        }
        rumor_admit_msg_t m;
        rumor_err_t rc = rumor_admit_open(&m, n->key, buf, (size_t)len);
        if (rc != RUMOR_OK) {
            n->drops[rc == RUMOR_EAUTH ? DROP_ADMIT_UNSEALED : DROP_ADMIT_MALFORMED]++;
            continue;
        }
        if (memcmp(m.nonce, p->knock_nonce, sizeof m.nonce) != 0) continue; /* not for this knock */
        char id[RUMOR_SHORT_ID_LEN + 1];
        rumor_key_short_id(id, p->key);
        if (m.kind == RUMOR_ADMIT_WRONG_KEY) {
            /* Unsealed, so only a diagnosis: we keep knocking in case it is not true. */
            p->wrong_key = true;
            memcpy(p->real_key, m.from, RUMOR_KEY_LEN);
            continue;
        }
        if (m.kind != RUMOR_ADMIT_ANSWER || !same_key(m.from, p->key)) continue;
        stop_knocking(p);
        p->unreachable = p->wrong_key = false;
        if (m.status != RUMOR_ADMIT_OK) {
            const int why = m.status;
            if (!p->refused)
                rumor_log(RUMOR_LOG_WARN, "peer %s at %s refused us: certificate %s", id, p->addr,
                          why <= RUMOR_CERT_REVOKED ? rumor_cert_reject_name((rumor_cert_reject_t)why) : "refused");
            p->refused = true;
            snprintf(p->refusal, sizeof p->refusal, "certificate %s",
                     why <= RUMOR_CERT_REVOKED ? rumor_cert_reject_name((rumor_cert_reject_t)why) : "refused");
            p->retry_at = now + 30000; /* a clock set right, a revocation lifted: ask again later */
            continue;
        }
        rumor_cert_t cert;
        rumor_cert_reject_t why;
        if (rumor_cert_check(m.cert, m.cert_len, n->authority, p->key, unix_now(), n->revoked, &cert, &why) !=
            RUMOR_OK) {
            /* It lets us in, but it is not of our swarm (or no longer): we do not go in. */
            refusal(n, p->key, why, "its answer", false, now);
            p->retry_at = now + 30000;
            p->refused = true;
            snprintf(p->refusal, sizeof p->refusal, "its own certificate is %s", rumor_cert_reject_name(why));
            close_dealer(p);
            continue;
        }
        p->answered = true;
        p->refused = false;
        if (!p->dealer && !open_dealer(n, p)) {
            rumor_log(RUMOR_LOG_DEBUG, "cannot dial %s at %s", id, p->addr);
            p->retry_at = now + 1000;
        }
    }
}

/* Knocks at our UDP port. A knock whose certificate passes lets its key through the ZAP
 * handler; every knock that opens gets an answer that says so or says why not. */
static void handle_udp(rumor_node_t *n, uint64_t now)
{
    for (int k = 0; k < BATCH; k++) {
        uint8_t buf[RUMOR_ADMIT_MAX + 1], out[RUMOR_ADMIT_MAX];
        rumor_admit_from_t from;
        ssize_t len = rumor_admit_recv(n->udp, buf, sizeof buf, &from);
        if (len < 0) return;
        /* Only knocks come to this port. What is not even shaped like one (length, magic,
         * kind) costs nothing to drop, so it must not spend the budget below that protects
         * the cryptography: junk never crowds out a real knock. */
        if (!rumor_admit_is_knock(buf, (size_t)len)) {
            n->drops[DROP_ADMIT_MALFORMED]++;
            continue;
        }
        const uint32_t src = rumor_admit_source_hash(&from);
        if (src) {
            bucket_t *b = &n->knock_src[src % KNOCK_SOURCES];
            b->tokens = b->refill_ms ? b->tokens + (double)(now - b->refill_ms) * KNOCK_SOURCE_RATE / 1000.0
                                     : KNOCK_SOURCE_RATE;
            if (b->tokens > KNOCK_SOURCE_RATE) b->tokens = KNOCK_SOURCE_RATE;
            b->refill_ms = now ? now : 1;
            if (b->tokens < 1.0) {
                n->drops[DROP_ADMIT_RATE]++;
                continue;
            }
            b->tokens -= 1.0;
        }
        /* A token bucket: a flood of datagrams costs a bounded amount of cryptography. */
        n->knock_tokens += (double)(now - n->knock_refill_ms) * KNOCK_RATE / 1000.0;
        if (n->knock_tokens > KNOCK_RATE) n->knock_tokens = KNOCK_RATE;
        n->knock_refill_ms = now;
        if (n->knock_tokens < 1.0) {
            n->drops[DROP_ADMIT_RATE]++;
            continue;
        }
        n->knock_tokens -= 1.0;
        rumor_admit_msg_t m;
        rumor_err_t rc = rumor_admit_open(&m, n->key, buf, (size_t)len);
        if (rc == RUMOR_EAUTH && buf[4] == RUMOR_ADMIT_KNOCK) {
            /* Sealed for another key: the knocker has a wrong address for us. Say which key
             * is ours (no larger than what came in, so it amplifies nothing). */
            n->drops[DROP_ADMIT_UNSEALED]++;
            rumor_admit_reply(n->udp, &from, out,
                              rumor_admit_wrong_key(out, rumor_secret_key_public(n->key), m.nonce));
            continue;
        }
        if (rc != RUMOR_OK || m.kind != RUMOR_ADMIT_KNOCK) {
            n->drops[rc == RUMOR_EAUTH ? DROP_ADMIT_UNSEALED : DROP_ADMIT_MALFORMED]++;
            continue;
        }
        n->knocks_in++;
        rumor_cert_t cert;
        rumor_cert_reject_t why = RUMOR_CERT_OK;
        uint8_t status = RUMOR_ADMIT_OK;
        if (rumor_cert_check(m.cert, m.cert_len, n->authority, m.from, unix_now(), n->revoked, &cert, &why) !=
            RUMOR_OK) {
            refusal(n, m.from, why, "knock", false, now);
            status = (uint8_t)why;
        } else {
            conn_t *c = find_conn(n, m.from, true, now);
            /* Only a knock newer than any seen from that key, and sealed within the
             * certificate clock skew of our time, speaks for the peer's current run: a replayed
             * knock is answered (it admits nothing the key could not have) and changes nothing. */
            const uint64_t wall = rumor_unix_ms(), skew = 1000u * RUMOR_CERT_SKEW;
            const bool fresh = m.sent_ms > c->knock_ms && m.sent_ms + skew > wall && m.sent_ms < wall + skew;
            const bool restarted = fresh && c->boot && c->boot != m.boot;
            c->knocked = true;
            c->expires_at = cert.expires_at;
            c->last_seen = now;
            if (fresh) {
                c->boot = m.boot;
                c->knock_ms = m.sent_ms;
            } else {
                n->stale_knocks++;
            }
            /* A peer that restarted forgot our knock: knock again before our DEALER's
             * reconnection reaches its ZAP handler. */
            peer_t *p = restarted ? find_peer(n, m.from) : NULL;
            if (p && !p->knocking) knock_start(n, p, now);
        }
        const size_t alen = rumor_admit_answer(out, n->key, m.from, m.nonce, status, n->boot_id,
                                               status == RUMOR_ADMIT_OK ? n->cert : NULL, n->cert_len);
        rumor_admit_reply(n->udp, &from, out, alen);
    }
}

/* ZAP (RFC 27): a CURVE client gets in only with a key whose certificate passed in a knock
 * (or in a hello since), not revoked and not expired. Everyone else is refused before libzmq
 * reads a byte of theirs past the handshake: ZAP requests carry the client's key but nothing
 * the client chooses, so the certificate travels in the knock. The User-Id we return travels
 * with each of the client's messages: that is how a message's sender is known. */
static void handle_zap(rumor_node_t *n)
{
    zmq_msg_t f[8];
    int count = 0;
    bool more = true;
    while (more && count < 8) {
        zmq_msg_init(&f[count]);
        if (zmq_msg_recv(&f[count], n->zap, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f[count]);
            if (count == 0) return;
            break;
        }
        more = zmq_msg_more(&f[count]);
        count++;
    }
    while (more) { /* a request longer than RFC 27's: drain, then refuse */
        zmq_msg_t x;
        zmq_msg_init(&x);
        if (zmq_msg_recv(&x, n->zap, ZMQ_DONTWAIT) < 0) more = false;
        else more = zmq_msg_more(&x);
        zmq_msg_close(&x);
    }
    const char *status = "400", *text = "bad request";
    char user[RUMOR_KEY_Z85_LEN + 1] = "";
    if (count == 7 && zmq_msg_size(&f[5]) == 5 && memcmp(zmq_msg_data(&f[5]), "CURVE", 5) == 0 &&
        zmq_msg_size(&f[6]) == RUMOR_KEY_LEN) {
        const uint8_t *key = zmq_msg_data(&f[6]);
        const conn_t *c = find_conn(n, key, false, rumor_now_ms());
        if (n->revoked && rumor_revoked_has(n->revoked, key)) {
            n->drops[DROP_CERT_FIRST + RUMOR_CERT_REVOKED]++;
            text = "revoked";
        } else if (!c || !(c->knocked || c->admitted) || (c->expires_at && unix_now() >= c->expires_at)) {
            n->drops[DROP_NOT_ADMITTED]++;
            text = "knock first";
        } else {
            status = "200";
            text = "OK";
            rumor_key_to_z85(user, key);
        }
    }
    /* Reply: version, request id, status code, status text, user id, metadata. */
    zmq_send(n->zap, "1.0", 3, ZMQ_SNDMORE);
    if (count >= 2)
        zmq_send(n->zap, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
    else
        zmq_send(n->zap, "", 0, ZMQ_SNDMORE);
    zmq_send(n->zap, status, 3, ZMQ_SNDMORE);
    zmq_send(n->zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(n->zap, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(n->zap, "", 0, 0);
    for (int i = 0; i < count; i++) zmq_msg_close(&f[i]);
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

static void status_text(rumor_node_t *n, bool json, out_t *o, uint64_t now)
{
    char nb[48];
    const rumor_memb_stats_t ms = rumor_memb_stats(n->memb);
    int nv = rumor_memb_view_count(n->memb);
    char z85[RUMOR_KEY_Z85_LEN + 1];
    if (json) {
        rumor_key_to_z85(z85, rumor_secret_key_public(n->key));
        out(o, "{\"id\":\"%s\",\"key\":\"%s\",\"address\":\"%s\",\"incarnation\":%" PRIu32
               ",\"uptime_s\":%.1f,\"reachable\":%s,\"peers\":%d,\"passive\":%d,\"view\":[",
            n->id, z85, n->address, rumor_memb_incarnation(n->memb), (double)(now - n->start_ms) / 1000.0,
            n->last_pinged ? "true" : "false", nv, rumor_memb_passive_count(n->memb));
        for (int i = 0; i < nv; i++) {
            const rumor_memb_member_t *e = rumor_memb_view_at(n->memb, i);
            char id[RUMOR_SHORT_ID_LEN + 1];
            rumor_key_to_z85(z85, e->key);
            rumor_key_short_id(id, e->key);
            out(o, "%s{\"id\":\"%s\",\"key\":\"%s\",\"addr\":\"%s\",\"state\":\"%s\",\"inc\":%" PRIu32
                   ",\"rtt_ms\":%" PRIu32 ",\"last_seen_ms\":%" PRIu64 "}",
                i ? "," : "", id, z85, e->addr, rumor_memb_state_name(e->state), e->inc, e->rtt_ms,
                now - e->last_seen_ms);
        }
        out(o, "],\"counters\":{\"msgs_in\":%" PRIu64 ",\"msgs_out\":%" PRIu64 ",\"bytes_in\":%" PRIu64
               ",\"bytes_out\":%" PRIu64 ",\"pings_sent\":%" PRIu64 ",\"acks_received\":%" PRIu64
               ",\"suspicions\":%" PRIu64 ",\"deaths\":%" PRIu64 ",\"refutations\":%" PRIu64
               ",\"knocks_in\":%" PRIu64 ",\"knocks_out\":%" PRIu64 ",\"stale_knocks\":%" PRIu64
               ",\"connections\":%d,\"held_peak\":%" PRIu64 ",\"revocation_errors\":%" PRIu64 "},\"rejected\":{",
            n->msgs_in, n->msgs_out, n->bytes_in, n->bytes_out, ms.pings_sent, ms.acks_received, ms.suspicions,
            ms.deaths, ms.refutations, n->knocks_in, n->knocks_out, n->stale_knocks, rumor_guard_count(n->guard),
            rumor_guard_peak(n->guard), n->revoke_errors);
        bool first = true;
        for (int i = 1; i < DROP_COUNT; i++)
            if (n->drops[i]) {
                out(o, "%s\"%s\":%" PRIu64, first ? "" : ",", drop_name(i, nb), n->drops[i]);
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
        n->last_pinged ? "reachable (peers probe this node)" : "not yet probed by any peer");
    if (nv) out(o, "  %-8s  %-28s  %-7s  %7s  %9s\n", "peer", "address", "state", "rtt ms", "seen ms");
    for (int i = 0; i < nv; i++) {
        const rumor_memb_member_t *e = rumor_memb_view_at(n->memb, i);
        char id[RUMOR_SHORT_ID_LEN + 1];
        rumor_key_short_id(id, e->key);
        out(o, "  %-8s  %-28s  %-7s  %7" PRIu32 "  %9" PRIu64 "\n", id, e->addr, rumor_memb_state_name(e->state),
            e->rtt_ms, now - e->last_seen_ms);
    }
    out(o, "messages in %" PRIu64 " (%" PRIu64 " bytes), out %" PRIu64 " (%" PRIu64 " bytes)\n", n->msgs_in,
        n->bytes_in, n->msgs_out, n->bytes_out);
    for (int i = 1; i < DROP_COUNT; i++)
        if (n->drops[i]) out(o, "rejected %s: %" PRIu64 "\n", drop_name(i, nb), n->drops[i]);
    if (n->status_cb && o->len < o->cap) o->len += n->status_cb(n->status_arg, false, o->buf + o->len, o->cap - o->len);
}

static void handle_control(rumor_node_t *n, uint64_t now)
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
    out_t o = {n->status_buf, sizeof n->status_buf, 0};
    status_text(n, strcmp(req, "status json") == 0, &o, now);
    zmq_send(n->control, n->status_buf, o.len, 0);
}

rumor_err_t rumor_node_query_status(const char *control, bool json, char *outbuf, size_t cap,
                                    char err[RUMOR_ERR_LEN])
{
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_REQ);
    rumor_err_t rc = RUMOR_OK;
    set_int(s, ZMQ_LINGER, 0);
    set_int(s, ZMQ_RCVTIMEO, 3000);
    set_int(s, ZMQ_SNDTIMEO, 3000);
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

rumor_err_t rumor_node_pull(rumor_node_t *n, const uint8_t peer[32], uint64_t layout)
{
    int v = -1;
    for (int i = 0; i < rumor_memb_view_count(n->memb) && v < 0; i++)
        if (same_key(rumor_memb_view_at(n->memb, i)->key, peer)) v = i;
    if (v < 0) return RUMOR_EINVAL;
    const conn_t *c = find_conn(n, peer, false, rumor_now_ms());
    if (!c || !c->admitted) return RUMOR_EAUTH;
    peer_t *p = get_peer(n, peer, rumor_memb_view_at(n->memb, v)->addr, rumor_now_ms());
    if (!p) return RUMOR_EINVAL;
    rumor_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = RUMOR_MSG_PULL;
    m.u.pull.layout = layout;
    return send_msg(n, p, &m);
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

bool rumor_node_peer_admitted(rumor_node_t *n, int i)
{
    const rumor_memb_member_t *e = rumor_memb_view_at(n->memb, i);
    if (!e) return false;
    const conn_t *c = find_conn(n, e->key, false, rumor_now_ms());
    return c && c->admitted && (!c->expires_at || unix_now() < c->expires_at);
}

uint64_t rumor_node_peer_boot(rumor_node_t *n, int i)
{
    const rumor_memb_member_t *e = rumor_memb_view_at(n->memb, i);
    const conn_t *c = e ? find_conn(n, e->key, false, rumor_now_ms()) : NULL;
    if (c && c->knocked && c->boot) return c->boot;
    return e ? e->boot : 0; /* from its hello, or second hand (membership.h) */
}

uint64_t rumor_node_boot(const rumor_node_t *n) { return n->boot_id; }

uint64_t rumor_node_peer_done(rumor_node_t *n, int i)
{
    const rumor_memb_member_t *e = rumor_memb_view_at(n->memb, i);
    const conn_t *c = e ? find_conn(n, e->key, false, rumor_now_ms()) : NULL;
    return c ? c->done : 0;
}

void rumor_node_set_done(rumor_node_t *n, uint64_t round)
{
    atomic_store(&n->done_round, round ? round : 1);
    rumor_node_wake(n);
}

/* Tell every member we hold a connection to that we finished (node thread). */
static void announce_done(rumor_node_t *n)
{
    const uint64_t d = atomic_load(&n->done_round);
    if (d == n->done_sent) return;
    n->done_sent = d;
    rumor_msg_t hello;
    for (int i = 0; i < MAX_PEERS; i++) {
        peer_t *p = &n->peers[i];
        if (!p->used || !p->dealer) continue;
        fill_hello(n, &hello);
        (void)send_msg(n, p, &hello);
    }
}

/* Queue as many chunks as the peer's socket takes without blocking. */
static void pump(rumor_node_t *n, peer_t *p)
{
    sending_t *s = &p->send;
    if (!p->dealer) return;
    while (s->out && s->next < s->chunks) {
        uint64_t off = (uint64_t)s->next * s->chunk_params;
        uint64_t cnt = s->n - off < s->chunk_params ? s->n - off : s->chunk_params;
        rumor_msg_t m;
        memset(&m, 0, sizeof m);
        m.type = RUMOR_MSG_MODEL;
        m.seq = ++n->seq;
        const double w = s->chunk_w ? s->w * s->chunk_w[s->next] : s->w;
        const uint8_t *data = s->codec == RUMOR_CODEC_F32 ? (const uint8_t *)(s->params + off) : s->enc + s->enc_off[s->next];
        const size_t dlen = s->codec == RUMOR_CODEC_F32 ? (size_t)cnt * sizeof(float)
                                                        : s->enc_off[s->next + 1] - s->enc_off[s->next];
        m.u.model = (rumor_msg_model_t){.round = s->round, .w = w, .codec = s->codec,
                                        .layout = s->layout, .chunk = s->next, .chunks = s->chunks,
                                        .off = off, .n = cnt, .payload_len = dlen, .has_hash = s->has_hash,
                                        .mix = s->ext.mix, .has_copy = s->ext.has_copy, .ver = s->ext.ver,
                                        .lin = s->ext.lin, .base = s->ext.base, .need = s->ext.need};
        if (s->has_hash) memcpy(m.u.model.hash, s->hash, sizeof m.u.model.hash);
        size_t len;
        if (rumor_proto_encode(&m, n->buf, RUMOR_PROTO_MAX_HEADER, &len) != RUMOR_OK) {
            s->next = s->chunks; /* cannot happen after send_model's checks; never spin on it */
            break;
        }
        if (atomic_load(&s->out->refs) - 1 >= MAX_INFLIGHT) return; /* resumes as chunks go out */
        int events = 0;
        size_t sz = sizeof events;
        zmq_getsockopt(p->dealer, ZMQ_EVENTS, &events, &sz);
        if (!(events & ZMQ_POLLOUT)) return; /* full: resume when it drains */
        zmq_msg_t payload;
        atomic_fetch_add(&s->out->refs, 1);
        zmq_msg_init_data(&payload, (void *)data, dlen, chunk_free_cb, s->out);
        if (zmq_send(p->dealer, n->buf, len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&payload); /* releases the reference taken above */
            return;
        }
        /* After the first frame of a message the second goes too: HWM counts messages. */
        if (zmq_msg_send(&payload, p->dealer, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&payload);
            n->drops[DROP_SEND_FULL]++;
        }
        n->msgs_out++;
        n->bytes_out += len + dlen;
        s->next++;
    }
    if (s->out && s->next >= s->chunks) {
        outgoing_unref(s->out); /* our own reference; libzmq holds the rest */
        s->out = NULL;
    }
}

static rumor_err_t send_model(rumor_node_t *n, const uint8_t peer[32], uint64_t layout, uint64_t round, double w,
                              const double *chunk_w, const float *params, rumor_proto_codec_t codec, const uint8_t *enc,
                              const size_t *enc_off, const rumor_node_model_ext_t *ext, size_t count,
                              size_t chunk_params, const uint8_t *hash, void (*release)(void *), void *arg);

rumor_err_t rumor_node_send_model(rumor_node_t *n, const uint8_t peer[32], uint64_t layout, uint64_t round,
                                  double w, const double *chunk_w, const float *params, size_t count,
                                  size_t chunk_params, const uint8_t *hash, void (*release)(void *), void *arg)
{
    return send_model(n, peer, layout, round, w, chunk_w, params, RUMOR_CODEC_F32, NULL, NULL, NULL, count,
                      chunk_params, hash, release, arg);
}

rumor_err_t rumor_node_send_model_ext(rumor_node_t *n, const uint8_t peer[32], uint64_t layout, uint64_t round,
                                      double w, const double *chunk_w, const float *params, size_t count,
                                      size_t chunk_params, const rumor_node_model_ext_t *ext,
                                      void (*release)(void *), void *arg)
{
    return send_model(n, peer, layout, round, w, chunk_w, params, RUMOR_CODEC_F32, NULL, NULL, ext, count,
                      chunk_params, NULL, release, arg);
}

rumor_err_t rumor_node_send_encoded(rumor_node_t *n, const uint8_t peer[32], uint64_t layout, uint64_t round,
                                    double w, const double *chunk_w, int codec, const rumor_node_model_ext_t *ext,
                                    const uint8_t *enc, const size_t *enc_off, size_t count, size_t chunk_params,
                                    void (*release)(void *), void *arg)
{
    const size_t chunks = chunk_params ? rumor_chunks(count, chunk_params) : 0;
    if (codec <= RUMOR_CODEC_F32 || codec > RUMOR_CODEC_LAST || !enc || !enc_off || chunks == 0 ||
        chunks > RUMOR_PROTO_MAX_CHUNKS)
        return RUMOR_EINVAL;
    for (size_t c = 0; c < chunks; c++) {
        const size_t nc = count - c * chunk_params < chunk_params ? count - c * chunk_params : chunk_params;
        size_t want = 0;
        if (enc_off[c + 1] < enc_off[c] || enc_off[c + 1] - enc_off[c] > RUMOR_PROTO_MAX_PAYLOAD ||
            rumor_proto_payload_len((rumor_proto_codec_t)codec, nc, (enc_off[c + 1] - enc_off[c]) / 8, &want) != RUMOR_OK ||
            want != enc_off[c + 1] - enc_off[c])
            return RUMOR_EINVAL; /* the header must never disagree with the frame after it */
    }
    return send_model(n, peer, layout, round, w, chunk_w, NULL, (rumor_proto_codec_t)codec, enc, enc_off, ext, count,
                      chunk_params, NULL, release, arg);
}

static rumor_err_t send_model(rumor_node_t *n, const uint8_t peer[32], uint64_t layout, uint64_t round, double w,
                              const double *chunk_w, const float *params, rumor_proto_codec_t codec, const uint8_t *enc,
                              const size_t *enc_off, const rumor_node_model_ext_t *ext, size_t count,
                              size_t chunk_params, const uint8_t *hash, void (*release)(void *), void *arg)
{
    int v = -1;
    for (int i = 0; i < rumor_memb_view_count(n->memb) && v < 0; i++)
        if (same_key(rumor_memb_view_at(n->memb, i)->key, peer)) v = i;
    if (v < 0 || count == 0 || chunk_params == 0 ||
        (codec == RUMOR_CODEC_F32 && chunk_params * sizeof(float) > RUMOR_PROTO_MAX_PAYLOAD) ||
        rumor_chunks(count, chunk_params) > RUMOR_PROTO_MAX_CHUNKS || count > RUMOR_PROTO_MAX_PARAMS ||
        !(w > 0.0 && w <= RUMOR_PROTO_MAX_WEIGHT))
        return RUMOR_EINVAL;
    for (size_t c = 0; chunk_w && c < rumor_chunks(count, chunk_params); c++)
        if (!(w * chunk_w[c] > 0.0 && w * chunk_w[c] <= RUMOR_PROTO_MAX_WEIGHT)) return RUMOR_EINVAL;
    /* Parameters go only to a key whose own hello we verified (gossip alone is not enough),
     * and whose certificate is still valid. */
    const conn_t *c = find_conn(n, peer, false, rumor_now_ms());
    if (!c || !c->admitted || (c->expires_at && unix_now() >= c->expires_at)) return RUMOR_EAUTH;
    peer_t *p = get_peer(n, peer, rumor_memb_view_at(n->memb, v)->addr, rumor_now_ms());
    if (!p) return RUMOR_EINVAL;
    if (p->send.out || !p->dealer) return RUMOR_ECLOSED;
    outgoing_t *o = malloc(sizeof *o);
    if (!o) return RUMOR_ENOMEM;
    atomic_init(&o->refs, 1);
    o->release = release;
    o->arg = arg;
    p->send = (sending_t){.out = o, .params = params, .n = count, .chunk_params = chunk_params, .next = 0,
                          .chunks = (uint32_t)rumor_chunks(count, chunk_params), .layout = layout,
                          .round = round, .w = w, .chunk_w = chunk_w, .has_hash = hash != NULL, .codec = codec,
                          .enc = enc, .enc_off = enc_off};
    if (ext) p->send.ext = *ext;
    if (hash) memcpy(p->send.hash, hash, sizeof p->send.hash);
    pump(n, p);
    return RUMOR_OK;
}

/* ---- lifecycle ---- */

static bool is_wildcard(const char *host)
{
    return strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 || strcmp(host, "*") == 0;
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
    if (pipe(n->wake) != 0) {
        rumor_fail(err, RUMOR_EIO, "pipe: %s", strerror(errno));
        goto fail;
    }
    fcntl(n->wake[0], F_SETFL, O_NONBLOCK);
    fcntl(n->wake[1], F_SETFL, O_NONBLOCK);
    fcntl(n->wake[0], F_SETFD, FD_CLOEXEC);
    fcntl(n->wake[1], F_SETFD, FD_CLOEXEC);
    n->buf = malloc(RUMOR_PROTO_MAX_HEADER);
    n->certs = calloc(CERT_CACHE, sizeof *n->certs);
    if (!n->buf || !n->certs) goto nomem;
    if (rumor_secret_key_load(&n->key, cfg->key_path, err) != RUMOR_OK) goto fail;
    if (rumor_public_key_load(n->authority, cfg->swarm, err) != RUMOR_OK) goto fail;
    if (rumor_cert_load(n->cert, &n->cert_len, cfg->cert_path, err) != RUMOR_OK) goto fail;
    {
        /* Our own certificate must admit us, or every peer will refuse us: say so now. */
        rumor_cert_t c;
        rumor_cert_reject_t why;
        if (rumor_cert_verify(n->cert, n->cert_len, n->authority, rumor_secret_key_public(n->key), unix_now(), &c,
                              &why) != RUMOR_OK) {
            rumor_fail(err, RUMOR_EAUTH, "%s: this certificate would be refused: %s%s", cfg->cert_path,
                       rumor_cert_reject_name(why),
                       why == RUMOR_CERT_KEY_MISMATCH ? " (it was issued for another key than --key)"
                       : why == RUMOR_CERT_OTHER_SWARM ? " (it was issued by another authority than --swarm)"
                                                       : "");
            goto fail;
        }
    }
    if (cfg->revoked_path && rumor_revoked_load(&n->revoked, cfg->revoked_path, err) != RUMOR_OK) goto fail;
    for (int i = 0; i < cfg->n_bootstraps; i++) {
        if (rumor_addr_parse(&n->boot[n->n_boot], cfg->bootstraps[i], err) != RUMOR_OK) goto fail;
        /* The same command line on every machine names this node too: skip ourselves. */
        if (!same_key(n->boot[n->n_boot].key, rumor_secret_key_public(n->key))) n->n_boot++;
    }
    rumor_key_short_id(n->id, rumor_secret_key_public(n->key));
    rumor_log_set_id(n->id);

    do n->boot_id = rumor_random_u64(); /* nonzero: 0 means none on the wire */
    while (n->boot_id == 0);
    n->knock_tokens = KNOCK_RATE;
    n->knock_refill_ms = rumor_now_ms();
    {
        /* A DEALER, its monitor and its connection per peer: more descriptors than the
         * usual soft limit of 1024 allows at MAX_PEERS. */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 8192 && rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max < 8192 ? rl.rlim_max : 8192;
            (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    n->ctx = zmq_ctx_new();
    if (!n->ctx) goto nomem;
    (void)zmq_ctx_set(n->ctx, ZMQ_MAX_SOCKETS, 4 * MAX_PEERS + 64);
    /* The ZAP handler must be bound before any CURVE server socket. */
    n->zap = zmq_socket(n->ctx, ZMQ_REP);
    if (!n->zap || zmq_bind(n->zap, ZAP_ENDPOINT) != 0) {
        rumor_fail(err, RUMOR_EIO, "cannot start the ZAP handler: %s", zmq_strerror(errno));
        goto fail;
    }
    set_int(n->zap, ZMQ_LINGER, 0);
    n->router = zmq_socket(n->ctx, ZMQ_ROUTER);
    set_common(n->router);
    set_int(n->router, ZMQ_CURVE_SERVER, 1);
    set_int(n->router, ZMQ_RCVHWM, RECV_HWM);
    set_int(n->router, ZMQ_SNDHWM, 16);
    (void)zmq_setsockopt(n->router, ZMQ_ZAP_DOMAIN, "rumor", 5);
    {
        /* Every connection the ROUTER accepts is watched by the guard (guard.h). */
        char ep[64];
        snprintf(ep, sizeof ep, "inproc://monitor-router-%p", (void *)n);
        if (!(n->guard = rumor_guard_new(GUARD_LIMIT))) goto nomem;
        if (zmq_socket_monitor(n->router, ep, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED) != 0 ||
            !(n->router_mon = zmq_socket(n->ctx, ZMQ_PAIR)) || zmq_connect(n->router_mon, ep) != 0) {
            rumor_fail(err, RUMOR_EIO, "cannot monitor the listening socket: %s", zmq_strerror(errno));
            goto fail;
        }
    }
    if (set_curve_keys(n, n->router) != 0) {
        rumor_fail(err, RUMOR_EIO, "cannot set CURVE keys: %s", zmq_strerror(errno));
        goto fail;
    }
    /* Port 0 asks the kernel for a free port, written as "*" for ZeroMQ. */
    char bind_ep[RUMOR_ENDPOINT_LEN];
    snprintf(bind_ep, sizeof bind_ep, "%s", cfg->listen);
    size_t bl = strlen(bind_ep);
    const bool any_port = bl > 2 && strcmp(bind_ep + bl - 2, ":0") == 0;
    if (any_port) snprintf(bind_ep + bl - 1, sizeof bind_ep - (bl - 1), "*");
    char last[RUMOR_ENDPOINT_LEN], bound[RUMOR_ENDPOINT_LEN];
    const char *port = NULL;
    /* TCP for ZeroMQ and UDP of the same number for knocks. A free TCP port may have its UDP
     * twin taken: then try another. */
    for (int attempt = 0; n->udp < 0; attempt++) {
        if (strncmp(bind_ep, "tcp://", 6) != 0 || zmq_bind(n->router, bind_ep) != 0) {
            rumor_fail(err, RUMOR_EIO, "cannot listen on %s: %s", cfg->listen,
                       strncmp(bind_ep, "tcp://", 6) ? "expected tcp://HOST:PORT" : zmq_strerror(errno));
            goto fail;
        }
        size_t blen = sizeof last;
        zmq_getsockopt(n->router, ZMQ_LAST_ENDPOINT, last, &blen);
        port = strrchr(last, ':');
        n->udp = rumor_admit_listen(cfg->listen, port ? (uint16_t)atoi(port + 1) : 0, err);
        if (n->udp < 0) {
            if (!any_port || attempt == 20) goto fail;
            (void)zmq_unbind(n->router, last);
        }
    }
    /* The address we listen on: the configured host with the port actually bound (ZeroMQ
     * reports an IPv4 host as ::ffff:a.b.c.d on a dual-stack socket, which is not what peers
     * should be told). */
    const char *listen_colon = strrchr(cfg->listen, ':');
    snprintf(bound, sizeof bound, "%.*s%s", (int)(listen_colon - cfg->listen), cfg->listen, port ? port : ":0");
    const char *adv = cfg->advertise ? cfg->advertise : bound;
    {
        /* Peers must be able to reach what we advertise: not a wildcard, an IP literal. */
        char host[RUMOR_HOST_MAX + 3];
        const char *h = adv + 6, *colon = strrchr(adv, ':');
        size_t hl = colon && colon > h ? (size_t)(colon - h) : 0;
        snprintf(host, sizeof host, "%.*s", (int)(hl < sizeof host - 1 ? hl : sizeof host - 1), h);
        if (host[0] == '[') memmove(host, host + 1, strlen(host)), host[strlen(host) - 1] = 0;
        if (is_wildcard(host)) {
            rumor_fail(err, RUMOR_EINVAL,
                       "listening on %s, which peers cannot dial: give --advertise tcp://IP:PORT", bound);
            goto fail;
        }
        if (!rumor_proto_addr_is_valid(adv, strlen(adv))) {
            rumor_fail(err, RUMOR_EINVAL, "advertised address %s: expected tcp://IP:PORT (an IP, not a name)", adv);
            goto fail;
        }
    }
    snprintf(n->self_addr, sizeof n->self_addr, "%.255s", adv); /* valid addresses are short */
    if (rumor_addr_format(n->address, rumor_secret_key_public(n->key), n->self_addr, err) != RUMOR_OK) goto fail;

    if (cfg->control) {
        if (strncmp(cfg->control, "ipc://", 6) != 0 || !cfg->control[6] ||
            strlen(cfg->control) - 6 >= sizeof n->control_path) {
            rumor_fail(err, RUMOR_EINVAL, "--control %s: expected ipc://PATH", cfg->control);
            goto fail;
        }
        if (cfg->control[6] == '@') {
            /* Linux's abstract namespace has no file, so no permissions: any local user could
             * read the node's status. */
            rumor_fail(err, RUMOR_EINVAL, "--control %s: an abstract socket (ipc://@...) is open to every local "
                       "user; give a file path, ipc://PATH", cfg->control);
            goto fail;
        }
        snprintf(n->control_path, sizeof n->control_path, "%s", cfg->control + 6);
        n->control = zmq_socket(n->ctx, ZMQ_REP);
        set_int(n->control, ZMQ_LINGER, 0);
        /* Owner-only from the start: the status names every peer. */
        mode_t old = umask(0077);
        int brc = zmq_bind(n->control, cfg->control);
        umask(old);
        if (brc != 0) {
            rumor_fail(err, RUMOR_EIO, "cannot open control socket %s: %s", cfg->control, zmq_strerror(errno));
            goto fail;
        }
        /* The umask made it owner-only. No chmod by name afterwards: a path swapped for a
         * symbolic link in between would have the link's target changed. Check instead, without
         * following links, that what is there is our socket and nobody else may use it. */
        struct stat st;
        if (lstat(n->control_path, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid() ||
            (st.st_mode & 077) != 0) {
            rumor_fail(err, RUMOR_EIO, "control socket %s: not an owner-only socket of this user after binding "
                       "(replaced by someone?)", cfg->control);
            n->control_path[0] = 0; /* not ours to remove */
            goto fail;
        }
    }

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
nomem:
    rumor_fail(err, RUMOR_ENOMEM, "out of memory");
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
    free(n);
    *self_p = NULL;
}

/* Once in a swarm, peers probe us; if none has for a while, our advertised address is
 * probably not one they can dial (NAT, firewall, a private address): say so once. */
static void check_reachable(rumor_node_t *n, uint64_t now)
{
    if (rumor_memb_view_count(n->memb) == 0) {
        n->joined_at = 0;
        return;
    }
    if (!n->joined_at) n->joined_at = now;
    const uint64_t grace = 10 * (uint64_t)n->cfg.memb.period_ms;
    if (!n->warned_unreachable && !n->last_pinged && now - n->joined_at > grace) {
        n->warned_unreachable = true;
        rumor_log(RUMOR_LOG_WARN, "no peer has reached this node at %s in %.0f s of membership: if it is behind "
                  "NAT or a firewall, give --advertise with an address peers can dial", n->self_addr,
                  (double)grace / 1000.0);
    }
}

/* When every bootstrap has refused us there is no way in: say why and stop. */
static bool all_bootstraps_refused(rumor_node_t *n, char *why, size_t len)
{
    if (n->joined || n->n_boot == 0 || rumor_memb_view_count(n->memb) > 0) return false;
    for (int b = 0; b < n->n_boot; b++) {
        peer_t *p = find_peer(n, n->boot[b].key);
        if (!p || !p->refused) return false;
        snprintf(why, len, "%s", p->refusal);
    }
    return true;
}

/* SIGHUP: read the revocation list again (rumor_revoked_reload: never more permissive than
 * the list in force, and said loudly when the file is broken or unreadable). */
static void reload_revocations(rumor_node_t *n)
{
    rumor_revoked_t *fresh = NULL;
    char rerr[RUMOR_ERR_LEN];
    size_t bad = 0;
    const rumor_err_t rrc =
        n->cfg.revoked_path ? rumor_revoked_reload(&fresh, n->cfg.revoked_path, n->revoked, &bad, rerr) : RUMOR_OK;
    if (fresh) {
        rumor_revoked_destroy(&n->revoked);
        n->revoked = fresh;
        memset(n->certs, 0, CERT_CACHE * sizeof *n->certs); /* checked against the old list */
        /* Admitted peers now revoked are admitted no more. */
        for (int i = 0; i < MAX_CONNS; i++)
            if (n->conns[i].used && rumor_revoked_has(n->revoked, n->conns[i].key))
                n->conns[i].admitted = n->conns[i].knocked = false;
    }
    if (rrc == RUMOR_OK && fresh) {
        rumor_log(RUMOR_LOG_INFO, "revocation list reloaded: %zu keys", rumor_revoked_count(n->revoked));
    } else if (rrc == RUMOR_EFORMAT) {
        /* Never silently: a broken file must not leave a newly revoked key admitted. */
        rumor_log(RUMOR_LOG_ERROR, "revocation list %s is broken (%zu lines are not keys; first: %s): refusing "
                  "the %zu keys of the previous list and of every line that could be read; fix the file and "
                  "send SIGHUP again", n->cfg.revoked_path, bad, rerr, rumor_revoked_count(n->revoked));
    } else if (rrc != RUMOR_OK) {
        rumor_log(RUMOR_LOG_ERROR, "revocation list cannot be read: %s: still refusing the %zu keys of the "
                  "previous list and whatever was read", rerr, rumor_revoked_count(n->revoked));
    }
    n->revoke_errors += rrc != RUMOR_OK;
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
        peer_t *p;
        int dealer, monitor, knock;
    } polled[MAX_PEERS];
    rumor_err_t rc = RUMOR_OK;
    while (!atomic_load(&n->stop)) {
        if (atomic_exchange(&n->reload, false)) {
            reload_revocations(n);
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
            peer_t *p = &n->peers[i];
            if (!p->used) continue;
            /* A refused handshake: libzmq has given up on that connection. Knock, and dial
             * again once it answers. */
            if (p->auth_failed) {
                close_dealer(p);
                p->auth_failed = false;
                p->answered = false;
                /* Again at once, but a node that keeps refusing handshakes it admitted
                 * (evicted us, restarting in a loop) is asked less and less often. */
                if (++p->fails <= 3) knock_start(n, p, now);
                else p->retry_at = now + (p->fails < 8 ? 1000u << (p->fails - 3) : 30000u);
            }
            if (!p->dealer && !p->knocking && p->retry_at && now >= p->retry_at) knock_start(n, p, now);
            if (p->knocking && now - p->knock_since > 30000) {
                /* Silence for 30 s: stop, and ask again in 30 s (it may be down for now). */
                stop_knocking(p);
                p->retry_at = now + 30000;
            }
            if (p->knocking && p->knock_next <= now) knock_send(n, p, now);
            if (p->knocking && p->knock_next < next_knock) next_knock = p->knock_next;
            if (!p->dealer && !p->knocking && p->retry_at && p->retry_at < next_knock) next_knock = p->retry_at;

            polled[np].p = p;
            polled[np].dealer = polled[np].monitor = polled[np].knock = -1;
            if (p->dealer) {
                const outgoing_t *o = p->send.out;
                const bool capped = o && atomic_load(&((outgoing_t *)o)->refs) - 1 >= MAX_INFLIGHT;
                if (capped) sending_capped = true;
                polled[np].dealer = ni;
                items[ni++] = (zmq_pollitem_t){.socket = p->dealer, .events = ZMQ_POLLIN | (o && !capped ? ZMQ_POLLOUT : 0)};
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
        /* A message that never ends wakes nobody: the guard looks on its own schedule. */
        if (rumor_guard_count(n->guard) > 0 && until(n->guard_next, now) < wait) wait = until(n->guard_next, now);
        if (zmq_poll(items, ni, (long)wait) < 0 && errno != EINTR) {
            rc = rumor_fail(err, RUMOR_EIO, "poll: %s", zmq_strerror(errno));
            break;
        }
        now = rumor_now_ms();
        /* Knocks before ZAP requests: a knock and the handshake it clears may arrive together. */
        if (items[udp_item].revents & ZMQ_POLLIN) handle_udp(n, now);
        if (items[mon_item].revents & ZMQ_POLLIN) handle_router_monitor(n, now);
        for (int i = 0; i < np; i++) {
            peer_t *p = polled[i].p;
            if (polled[i].knock >= 0 && (items[polled[i].knock].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
                handle_knock_answer(n, p, now);
            if (polled[i].monitor >= 0 && (items[polled[i].monitor].revents & ZMQ_POLLIN) && p->monitor)
                handle_monitor(n, p, now);
        }
        if (items[1].revents & ZMQ_POLLIN) handle_zap(n);
        if (items[0].revents & ZMQ_POLLIN) handle_router(n, now);
        if (n->control && (items[2].revents & ZMQ_POLLIN)) handle_control(n, now);
        if (items[wake_item].revents & ZMQ_POLLIN) {
            char drain[64];
            while (read(n->wake[0], drain, sizeof drain) > 0) {
            }
        }
        for (int i = 0; i < np; i++) {
            peer_t *p = polled[i].p;
            if (polled[i].dealer >= 0 && (items[polled[i].dealer].revents & ZMQ_POLLIN) && p->used && p->dealer)
                handle_dealer(n, p, now);
            if (p->used && p->send.out) pump(n, p);
        }
        if (now >= n->guard_next) {
            n->drops[DROP_HELD] += (uint64_t)rumor_guard_check(n->guard, now);
            n->guard_next = now + GUARD_CHECK_MS;
        }
        if (n->tick_cb) n->tick_cb(n->tick_arg, n, now);
        announce_done(n);
        rumor_memb_tick(n->memb, now);
        run_actions(n, now);
        check_reachable(n, now);
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
    /* Leave: bye to everyone, and give the bytes a moment to go out. */
    rumor_memb_leave(n->memb, rumor_now_ms());
    run_actions(n, rumor_now_ms());
    for (int i = 0; i < MAX_PEERS; i++)
        if (n->peers[i].used) set_int(n->peers[i].dealer, ZMQ_LINGER, 500);
    return rc;
}
