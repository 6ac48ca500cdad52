/*
 * node_impl.h - the ZeroMQ node's inside, shared by its files (not an interface): node.c
 * (sockets, the poll loop, the node's life), node_dial.c (our dials, the paths messages take,
 * sending), node_memb.c (membership on the wire), node_dispatch.c (messages in), node_seen.c
 * (where peers see us from: sites, reachability), node_admit.c (admission: knocks, the ZAP
 * handler, hellos, membership entries' certificates, revocations), node_control.c (the
 * control socket: `rumor status`), node_models.c (models in and out for the engine) and
 * node_relay.c (relays).
 */
#ifndef RUMOR_NODE_IMPL_H
#define RUMOR_NODE_IMPL_H

#include "node.h"

#include "crypto.h"
#include "admit.h"
#include "guard.h"
#include "proto.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define HELD_MAX 64          /* models all handed to libzmq that the node keeps track of (the
                                newest; giving one up drops the connection it waits on, and
                                every older one there with it) */
#define MAX_PEERS 256        /* DEALERs: view, bootstraps and a few transient targets */
#define MAX_CONNS 1024       /* keys we have heard from (admitted or refused) */
#define CONN_INDEX 2048      /* slots of the index of conns by key (a power of two, > MAX_CONNS) */
#define SEND_HWM 64          /* messages queued per peer before sends are dropped */
#define RECV_HWM 8           /* whole messages of one connection libzmq queues for us; with two
                                more in transit, what the guard lets a connection hold (guard.h) */
#define MAX_INFLIGHT 4       /* model chunks queued per peer: the rest of SEND_HWM stays free
                                for pings and acks, so a model in transit never starves them */
#define MAX_MSG_SIZE (RUMOR_PROTO_MAX_HEADER + RUMOR_PROTO_MAX_PAYLOAD + 64)
/* What connections may make libzmq hold, and who may hold one (guard.h; docs/security.md has
 * the figures). A member key's share: its queue of whole messages, one being read, one more
 * of slack; each frame at most MAX_MSG_SIZE, and no honest message has more than two frames.
 * All its connections together (at most GUARD_KEY_CONNS: its dial to us and ours to it, and a
 * restart's new ones beside old ones not yet found dead) hold no more. */
#define GUARD_SHARE ((uint64_t)(RECV_HWM + 2) * MAX_MSG_SIZE)
#define GUARD_KEY_CONNS 4
#define GUARD_NODE_HELD (256ull << 20)  /* every connection together (about 12 shares) */
#define GUARD_STRANGERS 256             /* connections before their first message, in all ... */
#define GUARD_STRANGERS_PER_SOURCE 64   /* ... from one IPv4 address or IPv6 /64 */
#define GUARD_STRANGER_BYTES (16u << 10) /* ... each sending at most this (a handshake is < 1 KiB) */
#define HANDSHAKE_MS 5000               /* ... within this (libzmq's ZMQ_HANDSHAKE_IVL too) */
#define KEY_HANDSHAKE_RATE 4.0          /* handshakes the ZAP handler admits per key a second */
#define ENTRY_CHECKS_RATE 64.0          /* signatures (certificates, records) a member's entries may
                                           make us verify a second, cache misses only: a PEERS of a
                                           swarm's worth of new members is 2 x 64 at most */
#define PULL_INTERVAL_MS 2000 /* one answered pull per peer per interval */
#define BATCH 64             /* messages taken from one socket per loop, for fairness */
#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define KNOCK_RETRY_MS 250   /* a knock unanswered is sent again, at doubling intervals */
#define KNOCK_RETRY_MAX_MS 2000
#define KNOCK_RATE 500.0     /* admission datagrams read per second at most (each costs an X25519
                                and an Ed25519 verification); the rest are dropped and counted */
#define KNOCK_SOURCE_RATE 20.0 /* ... and from one address or IPv6 /64 (a keyed hash into
                                  KNOCK_SOURCES buckets), so one sender cannot spend the node's
                                  budget on its own */
#define KNOCK_SOURCES 256
/* Reaching a peer that cannot be dialled (behind NAT, a firewall): while our DEALER to it has
 * no working connection, what we send it goes back over the connection it opened to our
 * ROUTER; a dial that has not connected after DIAL_GIVE_UP_MS while it talks to us that way
 * is given up, and tried again only after REDIAL_MS (or when it moves). */
#define RID_MAX 32
#define DIAL_GIVE_UP_MS 3000
#define REDIAL_MS 300000
#define HELLO_ORDER_MS 60000 /* a member's hellos are ordered by seq when they come this close */
/* Relays (node_relay.c): end-to-end sessions with peers reached through a third. */
#define RELAY_SESSIONS 64          /* sessions held; the least recently used makes room */
#define RELAY_INIT_RETRY_MS 1500   /* an unanswered init is sent again (through the next relay) */
#define RELAY_FAILED_MAX 4         /* relays a session remembers having failed through */
#define RELAY_INIT_TRIES 8         /* ... that often at most unprompted (node_relay_tick) */
#define RELAY_INITS_PER_S 8.0      /* inits one relay may bring us a second (each costs an
                                      accept and a sealed hello, and may take a session slot) */
#define RELAY_INIT_MIN_MS 250      /* inits taken from one peer at most this often */
#define FORGED_PAIRS 8             /* --attack relay-forge: sessions whose handshakes it forges */
#define FORGE_MS 250               /* ... every so often */
#define HELLO_ASK_MS 1000          /* a member whose messages come without a hello is asked for
                                      one at most this often (strangers: all of them together) */
#define RELAY_HELLO_MS 5000        /* our hello goes again through a session this often: a lost
                                      one (a message that overtook its accept on another
                                      connection to the relay) would leave us unadmitted */
#define RELAY_BAD_MAX 1            /* data of a session that does not open through its relay before
                                      we agree new keys (the ends' keys drifted apart: a late
                                      accept, crossed inits, a forged init; or the relay alters
                                      what it carries): at once, since a session whose relay
                                      tampers may see only a few messages before membership
                                      gives the far end up */
#define RELAY_BUDGET_MBPS 10.0     /* what a node forwards for others by default, MB/s */
#define RELAY_HELD_MAX (32u << 20) /* bytes forwarded for others that libzmq may hold at once: a
                                      destination that stops reading cannot make a relay hold more */
#define RELAY_USER_MS 2000         /* a member that asked us to forward this recently shares the
                                      budget: each has budget / (such members) a second */

_Static_assert(RUMOR_CERT_MAX_LEN <= RUMOR_MEMB_CERT_MAX, "membership must hold a whole certificate");
_Static_assert(RUMOR_MEMB_PROOF_LEN == RUMOR_PROTO_PROOF_LEN && RUMOR_MEMB_PROOF_LEN == RUMOR_KEY_LEN + RUMOR_SIG_LEN,
               "a proof is an Ed25519 key and a signature, the same on the wire");

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
    uint64_t record;     /* the last signed record of this key that verified: a hash of
                            (inc, boot, undialable, addr, proof) salted per node; 0 none */
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
    DROP_HANDSHAKE_RATE,                        /* a key's handshakes over KEY_HANDSHAKE_RATE */
    DROP_ENTRY_CERT,                            /* a membership entry without a valid certificate */
    DROP_PROOF,                                 /* a record (hello, entry) its member did not sign */
    DROP_ENTRY_BUDGET,                          /* an entry past its sender's ENTRY_CHECKS_RATE */
    DROP_RELAY_REFUSED,                         /* asked to forward: relaying off, no route, a loop */
    DROP_RELAY_BUDGET,                          /* asked to forward beyond --relay-budget */
    DROP_E2E_STALE,                             /* a relayed message not taken now: data before
                                                   its session or behind its counter (overtaken
                                                   through another relay, or replayed), an init
                                                   or accept out of turn */
    DROP_E2E,                                   /* a relayed message that does not open (altered,
                                                   replayed, no session) */
    DROP_COUNT
};

/* A model being sent: chunks reference the caller's buffer; the last one released by libzmq
 * (from its I/O thread, hence the atomic count) hands the buffer back. */
typedef struct {
    atomic_int refs;
    void (*release)(void *);
    void *arg;
    int wake_fd;                     /* the node's wake pipe: libzmq sending a chunk wakes the
                                        node when only the node's reference is left */
} outgoing_t;

typedef struct {
    outgoing_t *out;                 /* NULL when nothing is in flight to this peer */
    rumor_wire_model_t m;            /* what goes (rumor_node_send) */
    uint32_t next, chunks;
    uint64_t since;                  /* when rumor_node_send took it */
    bool on_dealer;                  /* some of its chunks went into our DEALER to the peer */
    bool on_router;                  /* ... or back over the connection it opened to us */
    bool on_relay;                   /* ... or, sealed, to the relay `relay` */
    uint8_t relay[RUMOR_KEY_LEN];
} sending_t;

/* A model all handed to libzmq while libzmq still holds chunks of it: a reference of ours, so
 * that it can be given up (rumor_node_give_up); dropped once ours is the last. */
typedef struct {
    outgoing_t *o;
    uint8_t key[RUMOR_KEY_LEN];      /* the member whose connections hold the chunks (the
                                        model's receiver, or the relay it went through) */
    bool dealer, router;             /* ... in our DEALER to it / on its connection to us */
} held_t;

/* Our dial to a member: the DEALER we connect to it with, its monitor, the knock that goes
 * first, and the model on its way to it (the training peer's own state is src/peer/peer_impl.h's). */
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
    bool linked;                     /* the DEALER's handshake passed and it is still connected */
    uint64_t dial_since;             /* when the DEALER was opened */
    bool outbound;                   /* we gave up dialling it: it is reached over its own
                                        connection to us (peer_path) until REDIAL_MS */
    bool relayed;                    /* reached through a relay while our dial keeps trying */
    bool hello_due;                  /* our hello changed and has not gone on the DEALER since */
    bool dialled_noted;              /* its entry (conn_t dialled) knows our dial reached it here */
} dial_t;

/* How a message reaches a peer: over our dial, back over its connection to us, or sealed end
 * to end through a third peer that reaches both. */
typedef enum { PATH_NONE, PATH_DEALER, PATH_ROUTER, PATH_RELAY } path_t;

/* An end-to-end session with a peer reached through a relay (crypto.h, "end to end"). */
typedef enum { SESS_NONE, SESS_INIT, SESS_READY } sess_state_t;
typedef struct {
    bool used;
    uint8_t key[RUMOR_KEY_LEN];      /* the far end */
    uint8_t via[RUMOR_KEY_LEN];      /* the relay it goes through */
    sess_state_t state;
    bool initiator;
    rumor_e2e_eph_t eph;             /* ours while our init is unanswered (kept for its resends) */
    uint8_t eph_far[RUMOR_KEY_LEN];  /* the far end's ephemeral public key of this session */
    uint8_t eph_ours[RUMOR_KEY_LEN]; /* ... and ours (what an accept of ours carried) */
    rumor_e2e_keys_t k;
    uint64_t tx_ctr, rx_ctr;         /* the last counter sent, received */
    uint64_t init_ms, init_in_ms, used_ms;
    uint64_t init_sent;              /* the `sent` of the last init from the far end we took:
                                        an older one is a replay */
    int tries;                       /* sessions tried: the next goes through another relay */
    int inits;                       /* times this init was sent (RELAY_INIT_TRIES unprompted) */
    int n_failed;                    /* ... than these, the last RELAY_FAILED_MAX it failed through */
    uint8_t failed_via[RELAY_FAILED_MAX][RUMOR_KEY_LEN];
    int bad;                         /* data that did not open since the last that did */
    bool hello_sent;                 /* our hello went first in this session */
    uint64_t hello_ms;               /* ... last at this time */
} relay_sess_t;

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
    uint64_t last_layout;            /* when we last took its layout text */
    uint64_t done;                   /* its hello said it finished at this round; 0: training */
    uint64_t done_boot;              /* ... in the run of this boot id (a new run trains again) */
    uint8_t rid[RID_MAX];            /* the ROUTER's routing id of its newest connection to us */
    uint8_t rid_len;                 /* 0: none known */
    bool rid_hello;                  /* our hello went on that connection */
    uint64_t rid_ms;                 /* when a message of its last came in on it */
    char dialled[RUMOR_MEMB_ADDR_LEN]; /* the address our dial last reached it at ("": none) */
    int fd;                          /* that connection's descriptor ... */
    uint64_t fd_serial;              /* ... and the guard's name for it (0: unknown) */
    uint64_t caps;                   /* its hello's capability bits */
    uint64_t site;                   /* its hello's site (behind NAT; 0: none said) */
    uint64_t layout;                 /* its hello's model layout id (0: none) */
    uint64_t hello_boot;             /* the run, the seq and the time of the hello those came */
    uint32_t hello_seq;              /* ... from: an older one of that run, soon after, changes */
    uint64_t hello_ms;               /* ... nothing (node_handle_hello) */
    bool hello_taken;
    char seen[RUMOR_PROTO_SEEN_MAX + 1];    /* the IP its last ping to us on its own
                                               connection came from ... */
    bool seen_fresh;                 /* ... which our next ack to it answers (then cleared) */
    char seen_us[RUMOR_PROTO_SEEN_MAX + 1]; /* the IP it says ours came from (its acks) */
    uint64_t seen_us_ms;             /* ... since (it may change once a period) */
    uint64_t lan_ms;                 /* when a message on its own connection last came from the
                                        LAN IP it advertises (no NAT between: our segment); 0:
                                        the last came from elsewhere, or none yet */
    uint64_t hello_asked_ms;         /* when we last asked it for its hello */
    uint64_t greeted_ms;             /* when we last answered its request for ours */
    bucket_t relay_inits;            /* inits it relays to us (RELAY_INITS_PER_S) */
    bucket_t handshakes;             /* handshakes its key passes (KEY_HANDSHAKE_RATE) */
    bucket_t entry_checks;           /* verifications its entries cost us (ENTRY_CHECKS_RATE) */
    uint64_t hello_record;           /* salted hash of the record its last hello carried (checked) */
    double relay_tokens;             /* bytes it may still have us forward now (its share of
                                        --relay-budget: node_relay.c, budget()) ... */
    uint64_t relay_refill_ms;        /* ... as of then (0: never asked) */
    uint64_t relay_asked_ms;         /* when it last asked us to forward */
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
    uint64_t stale_hellos;           /* hellos older than one taken from that member (node_handle_hello) */
    uint64_t revoke_errors;          /* reloads of a broken or unreadable revocation list */
    bucket_t knock_src[KNOCK_SOURCES];
    uint8_t source_salt[GUARD_SALT_LEN]; /* keys the hash of sources (knocks, strangers) */
    unsigned mon_seq;
    rumor_secret_key_t *key;
    uint8_t authority[RUMOR_KEY_LEN];
    uint8_t cert[RUMOR_CERT_MAX_LEN];
    size_t cert_len;
    rumor_revoked_t *revoked;
    rumor_memb_t *memb;
    cert_seen_t *certs;              /* CERT_CACHE */
    char self_addr[RUMOR_MEMB_ADDR_LEN];   /* tcp://IP:PORT, advertised */
    char self_ip[RUMOR_PROTO_SEEN_MAX + 1];/* ... its IP, as an ack's `seen` writes it */
    char address[RUMOR_ADDR_LEN];          /* rumor://KEY@HOST:PORT */
    char id[RUMOR_SHORT_ID_LEN + 1];
    char control_path[512];
    rumor_addr_t boot[RUMOR_NODE_MAX_BOOTSTRAPS];
    int n_boot;
    dial_t peers[MAX_PEERS];
    conn_t conns[MAX_CONNS];   /* used ones first: an entry is never freed, only taken over */
    int n_conns;
    int16_t conn_index[CONN_INDEX]; /* conns by a salted hash of their key, linear probing; -1: empty */
    uint64_t conn_salt;
    uint8_t record_salt[16];         /* keys the hashes of records verified (cert_seen_t) */
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
    rumor_node_layout_cb layout_cb;
    void *layout_arg;
    uint64_t tick_ms;                /* longest sleep between ticks */
    int wake[2];                     /* a pipe: another thread's byte ends our poll early */
    atomic_bool stop, reload;        /* asked for by rumor_node_stop, rumor_node_reload */
    /* Scratch space for the loop (large; per node, so two nodes can share a process). */
    rumor_memb_action_t act;
    rumor_memb_msg_t mmsg;
    rumor_msg_t wmsg, wmsg2;
    char status_buf[256 * 1024];
    /* rumor_node_status from another thread: the request (1 text, 2 JSON; 0 none), served by
     * the loop into status_buf, whose length it sets once done (under status_mu). */
    atomic_int status_req;
    pthread_mutex_t status_mu;
    pthread_cond_t status_cv;
    size_t status_len;
    bool status_done;
    int refusals_logged;             /* refusals are counted always, logged a bounded number of times */
    /* Reachability: a ping that reached us through our ROUTER proves our advertised address
     * works; in a swarm where nobody pings us, it probably does not. */
    uint64_t joined_at, last_pinged;
    uint64_t hello_asked_ms;         /* ... a key with no entry (HELLO_ASK_MS) */
    bool warned_unreachable;
    char seen_as[RUMOR_PROTO_SEEN_MAX + 1]; /* the IP most members see us at, when that is not
                                               our advertised one (behind NAT); "" */
    uint64_t site;                   /* ... named for hellos (site_of); 0 with none */
    uint64_t seen_next;              /* when to count members' reports again (once a period) */
    uint64_t seen_changes;           /* times seen_as changed (logged the first few) */
    uint64_t dials_given_up;         /* peers' addresses we stopped dialling (peer_path) */
    int rx_fd;                       /* the connection of the message being handled (-1: none) */
    uint64_t rx_serial;              /* ... and the guard's name for it */
    held_t held[HELD_MAX];           /* models libzmq still holds part of, oldest first */
    int n_held;
    uint64_t models_given_up;        /* models to a stuck link let go, with what libzmq held of
                                        them (rumor_node_abandon, rumor_node_give_up) */
    uint64_t reverse_msgs;           /* messages sent back over peers' own connections */
    bool router_blocked;             /* a model back over a peer's connection waits for room */
    /* Relays (node_relay.c). */
    relay_sess_t *sess;              /* RELAY_SESSIONS */
    uint8_t *e2e_buf;                /* an opened relayed message (RUMOR_PROTO_MAX_PAYLOAD) */
    uint8_t *e2e_out;                /* one being sealed (RUMOR_PROTO_MAX_PAYLOAD) */
    bool relay_serve;                /* forward for others */
    bool relay_tamper;               /* ... altered (an experiment's hostile relay) */
    bool relay_forge;                /* ... with handshakes forged (another) */
    struct {                         /* relay_forge: the last init forwarded between two ends */
        uint8_t from[RUMOR_KEY_LEN], to[RUMOR_KEY_LEN], eph[RUMOR_KEY_LEN], proof[RUMOR_PROTO_PROOF_LEN];
        uint64_t sent;
    } forged[FORGED_PAIRS];
    int n_forged;
    uint64_t forge_ms;               /* ... when its last forgeries went out */
    double relay_rate;               /* bytes per second forwarded at most */
    double relay_tokens;
    uint64_t relay_refill_ms;
    int relay_users;                 /* members that asked us to forward in the last RELAY_USER_MS */
    uint64_t relay_users_ms;         /* ... counted then */
    uint64_t relayed_msgs, relayed_bytes;   /* forwarded for others */
    _Atomic uint64_t relay_held;            /* ... still held by libzmq (freed from its I/O thread) */
    uint64_t e2e_msgs_out, e2e_bytes_out;   /* sent through relays */
    uint64_t e2e_msgs_in;                   /* received through relays and opened */
    bool joined; /* once in a swarm, an empty view later is churn, not a failed join */
};

static inline uint64_t unix_now(void) { return (uint64_t)time(NULL); }


static inline bool same_key(const uint8_t *a, const uint8_t *b) { return memcmp(a, b, RUMOR_KEY_LEN) == 0; }

/* Milliseconds from now to a deadline, 0 once it has passed (never a wrapped difference). */
static inline uint64_t until(uint64_t deadline, uint64_t now) { return deadline > now ? deadline - now : 0; }

/* node.c: sockets */
void node_set_int(void *s, int opt, int v);
int node_set_curve_keys(rumor_node_t *n, void *s);
void node_set_common(void *s);
void node_outgoing_unref(outgoing_t *o);
void node_release_held(rumor_node_t *n);

/* node_dial.c: our dials, the paths messages take, sending */
void node_close_dealer(dial_t *p);
void node_stop_knocking(dial_t *p);
void node_close_peer(dial_t *p);
dial_t *node_find_peer(rumor_node_t *n, const uint8_t *key);
void node_fill_hello(rumor_node_t *n, rumor_msg_t *m);
bool node_open_dealer(rumor_node_t *n, dial_t *p);
dial_t *node_get_peer(rumor_node_t *n, const uint8_t *key, const char *addr, uint64_t now);
size_t node_encode(rumor_node_t *n, rumor_msg_t *msg);
rumor_err_t node_send_dealer(rumor_node_t *n, dial_t *p, rumor_msg_t *msg);
rumor_err_t node_send_msg(rumor_node_t *n, dial_t *p, rumor_msg_t *msg);
path_t node_peer_path(rumor_node_t *n, dial_t *p, uint64_t now);
bool node_router_send(rumor_node_t *n, conn_t *c, const void *frame, size_t len, zmq_msg_t *payload);
void node_note_rid(rumor_node_t *n, conn_t *c, zmq_msg_t *rid, uint64_t now);
bool node_router_hello(rumor_node_t *n, conn_t *c);
bool node_dealer_send(rumor_node_t *n, dial_t *p, const void *frame, size_t len, zmq_msg_t *payload);
path_t node_reach(rumor_node_t *n, const uint8_t *key, uint64_t now);
void node_resend_hello(rumor_node_t *n, dial_t *p);
void node_greet_all(rumor_node_t *n);

/* node_memb.c: membership on the wire */
bool node_memb_from_wire(rumor_memb_msg_t *m, const rumor_msg_t *w);
void node_run_actions(rumor_node_t *n, uint64_t now);

/* node_dispatch.c: messages in */
void node_reply_bye(rumor_node_t *n, zmq_msg_t *rid, const char *why);
void node_dispatch(rumor_node_t *n, const uint8_t key[RUMOR_KEY_LEN], path_t via, zmq_msg_t *rid, uint64_t now);
void node_handle_socket(rumor_node_t *n, dial_t *p, uint64_t now);

/* node_seen.c: where peers see us from */
bool node_ip_text(const char *ip, char out[RUMOR_PROTO_SEEN_MAX + 1]);
void node_addr_host(const char *addr, char host[RUMOR_HOST_MAX + 3]);
void node_note_seen(rumor_node_t *n, conn_t *c, bool ping, uint64_t now);
void node_recount_seen(rumor_node_t *n, uint64_t now);
void node_note_seen_us(rumor_node_t *n, conn_t *c, const char *seen, uint64_t now);
void node_check_reachable(rumor_node_t *n, uint64_t now);

/* node_admit.c: admission */
void node_knock_send(rumor_node_t *n, dial_t *p, uint64_t now);
void node_knock_start(rumor_node_t *n, dial_t *p, uint64_t now);
void node_vet_entries(rumor_node_t *n, conn_t *from, rumor_memb_msg_t *m, uint64_t now);
/* One token from b, refilled at rate a second up to rate; false (nothing taken) when empty. */
bool node_bucket_take(bucket_t *b, double rate, uint64_t now);
conn_t *node_find_conn(rumor_node_t *n, const uint8_t *key, bool create, uint64_t now);
/* The index of node_find_conn, empty, with a fresh salt (at the node's start). */
void node_conn_index_init(rumor_node_t *n);
void node_handle_hello(rumor_node_t *n, const uint8_t *key, zmq_msg_t *rid, const rumor_msg_t *w,
                       uint64_t now);
void node_handle_knock_answer(rumor_node_t *n, dial_t *p, uint64_t now);
void node_handle_udp(rumor_node_t *n, uint64_t now);
void node_handle_zap(rumor_node_t *n);
void node_reload_revocations(rumor_node_t *n);

/* node_relay.c: relays */
bool node_relay_possible(rumor_node_t *n, const dial_t *p, uint64_t now);
bool node_relay_send(rumor_node_t *n, dial_t *p, const uint8_t *frame, size_t len, const uint8_t *payload,
                     size_t payload_len, outgoing_t *hold, bool hello, uint64_t now);
void node_relay_handle(rumor_node_t *n, const uint8_t from[RUMOR_KEY_LEN], uint64_t now);
void node_relay_tick(rumor_node_t *n, uint64_t now);
const relay_sess_t *node_relay_session(const rumor_node_t *n, const uint8_t key[RUMOR_KEY_LEN]);

/* node_control.c: the control socket */
void node_handle_control(rumor_node_t *n, uint64_t now);
void node_serve_status(rumor_node_t *n, uint64_t now);
rumor_err_t node_send_payload(rumor_node_t *n, dial_t *p, rumor_msg_t *msg, const void *payload, size_t plen);

/* node_models.c: models */
void node_announce_done(rumor_node_t *n);
void node_pump(rumor_node_t *n, dial_t *p);

#endif
