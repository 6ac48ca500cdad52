/*
 * node.h - a rumor node on the network: the ZeroMQ driver of the membership state machine.
 *
 * One thread, one poll loop (zyre style): a ROUTER socket bound as CURVE server receives
 * everything; one DEALER per peer, a CURVE client that knows the peer's key from its address,
 * sends; a UDP socket on the same port takes knocks; a ZAP handler sees every CURVE
 * handshake (and refuses keys that did not knock, or are revoked, before any message of theirs
 * is read); an optional control socket answers `rumor status`.
 *
 * Admission (docs/ARCHITECTURE.md): a connection's CURVE key is its identity. Until a valid
 * `hello` arrives from a key, with a certificate of this swarm for that very key, nothing
 * else from it is processed; a refused hello is answered with a `bye` that says why, logged
 * once per key and counted by reason. Everything a peer sends is decoded strictly
 * (proto/); malformed input is dropped and counted, never fatal.
 *
 * Memory is bounded: peers and connections are capped tables, each DEALER has a send
 * high-water mark (a slow or dead peer holds at most that many messages), a model in transit
 * keeps at most a few chunks queued, the ROUTER holds at most RECV_HWM messages per peer of at
 * most ZMQ_MAXMSGSIZE per frame, and the membership state machine is fixed-size.
 *
 * Admission before the connection (PROTOCOL.md, "Admission"): libzmq holds every frame of a
 * message until its last one arrives, whatever the high-water mark, and a ZAP request carries
 * nothing the client chooses. So a node knocks (net/admit.h: one sealed UDP datagram with its
 * certificate) before it dials, and the ZAP handler lets in only keys whose certificate passed
 * in a knock or a hello: a stranger's handshake fails before libzmq reads a message of its.
 * A peer whose certificate is valid can still send such messages; revoking its key is the
 * remedy (the ZAP handler and the knock both honour the list).
 *
 * This is the only module that includes zmq.h (the code style, docs/ARCHITECTURE.md).
 */
#ifndef RUMOR_NET_NODE_H
#define RUMOR_NET_NODE_H

#include "crypto.h"
#include "membership.h"
#include "proto.h"
#include "wire.h"
#include "base.h"

#include <stdbool.h>
#include <stddef.h>

#define RUMOR_NODE_MAX_BOOTSTRAPS 16

typedef struct {
    const char *listen;      /* tcp://HOST:PORT to bind; port 0 picks a free one */
    const char *advertise;   /* tcp://IP:PORT peers use; NULL: the bound address (not a wildcard) */
    const char *key_path;    /* PATH.key, the node's Curve25519 secret key */
    const char *cert_path;   /* the node's certificate from the swarm authority */
    const char *swarm;       /* the authority's public key: authority.pub or its Z85 text */
    const char *revoked_path;/* revocation list, re-read on reload; NULL: none */
    const char *control;     /* ipc://PATH for `rumor status`; NULL: none */
    const char *bootstraps[RUMOR_NODE_MAX_BOOTSTRAPS]; /* rumor://KEY@HOST:PORT */
    int n_bootstraps;
    rumor_memb_config_t memb;
    int exit_on_refusal;     /* exit with an error when every bootstrap refused us */
    uint64_t join_timeout_ms;/* give up (and say why) when no bootstrap let us in by then; 0: wait */
    uint64_t layout;         /* the layout id of the model it trains, for its hellos (0: none) */
    bool no_relay;           /* forward nothing for peers that cannot reach each other (--relay no) */
    double relay_budget_mbps;/* forward at most this many MB/s for others; 0: RELAY_BUDGET_MBPS */
    bool relay_tamper;       /* --attack relay-tamper (experiments): flip a bit of what we relay */
    bool relay_forge;        /* --attack relay-forge (experiments): forge handshakes of what we relay */
} rumor_node_config_t;

typedef struct rumor_node rumor_node_t;

/* Load keys and certificate, bind the sockets. NULL with err ("PATH: ...", "cannot bind
 * tcp://...: Address already in use") on failure. */
rumor_node_t *rumor_node_new(const rumor_node_config_t *cfg, char err[RUMOR_ERR_LEN]);
void rumor_node_destroy(rumor_node_t **self_p);

/* The address others reach this node at: rumor://KEY@HOST:PORT. */
const char *rumor_node_address(const rumor_node_t *self);
/* The node's own key (borrowed, valid until destroy): for secure mixing's key agreement
 * (secmix.h), which reads the secret in place. */
const rumor_secret_key_t *rumor_node_secret_key(const rumor_node_t *self);

/* Run until a stop is requested (then leave gracefully: bye to every peer) or a fatal
 * condition: every bootstrap refused us (RUMOR_EAUTH), or none let us in within the join
 * timeout (RUMOR_ETIMEDOUT: connection refused, a failed handshake from a wrong bootstrap
 * key, or silence); err says which and what to try. */
rumor_err_t rumor_node_run(rumor_node_t *self, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* Ask this node's loop, from any thread or a signal handler (an atomic store and a write
 * to its wake pipe), to stop (leaving gracefully), or to re-read its revocation list. Only
 * this node: two nodes in one process stop independently. */
void rumor_node_stop(rumor_node_t *self);
void rumor_node_reload(rumor_node_t *self);

/* ---- models (how the gossip engine uses the node) ----
 *
 * A model travels as chunks, mixed as they arrive: per chunk one `model` header frame and one
 * raw payload frame sent zero-copy straight from the caller's parameters. A peer's chunks go
 * out as its socket drains, never more than the send high-water mark at once, so a slow peer
 * costs a bounded queue, not a copy of the model. */


/* Called in the node's loop for every admitted model chunk, with the protocol's own header
 * (proto.h): its payload (m->payload, m->payload_len: n float32, little-endian, not aligned, or
 * another codec's encoding, see m->codec; its length is checked against the codec, its values
 * are not) is valid only during the call. wire.h takes it from there. */
typedef void (*rumor_node_chunk_cb)(void *arg, const uint8_t peer[32], const rumor_msg_model_t *m);
/* Called once per loop turn, with the time: where a driver above starts sends. */
typedef void (*rumor_node_tick_cb)(void *arg, rumor_node_t *node, uint64_t now_ms);
void rumor_node_on_chunk(rumor_node_t *self, rumor_node_chunk_cb cb, void *arg);
void rumor_node_on_tick(rumor_node_t *self, rumor_node_tick_cb cb, void *arg);


/* Queue model m (wire.h) for peer, in chunks (rumor_wire_chunk). Zero copy: what m points to (params, chunk_w, enc,
 * enc_off) must stay valid and unchanged until release(arg) runs (once, from any thread, when
 * the last chunk is sent or dropped). RUMOR_EINVAL for a peer not in the view or bad sizes or
 * weights; RUMOR_EAUTH for a peer whose own valid hello we have not seen; RUMOR_ECLOSED when a
 * model to it is still in flight. Call from the node's thread (a tick or chunk callback). */
rumor_err_t rumor_node_send(rumor_node_t *self, const uint8_t peer[32], const rumor_wire_model_t *m,
                            void (*release)(void *arg), void *arg);
/* Give up what is still on its way to peer: a model that could not leave within a whole
 * round's deadline holds its buffer (zero copy) for as long as the link is stuck. The model
 * being queued is dropped, and the connection its chunks wait on goes with them (libzmq drops
 * what it holds, releasing the buffer): our dial is closed and dialled again, a connection
 * the peer opened to us is shut down. Counted (status: models_given_up). Node's thread. */
void rumor_node_abandon(rumor_node_t *self, const uint8_t peer[32]);
/* The same for every model on its way, to any peer, for which which(arg, ctx) is true (arg:
 * what its rumor_node_send was given), including models handed to libzmq in full and still
 * held there: a buffer the caller needs back from a link that died under it. How many were
 * given up. Node's thread. */
int rumor_node_give_up(rumor_node_t *self, bool (*which)(void *arg, void *ctx), void *ctx);
/* Whether what goes to peer goes through a relay now (neither our dial nor its connection to
 * us works). Node's thread. */
bool rumor_node_relayed(rumor_node_t *self, const uint8_t peer[32]);
/* When the model still on its way to peer was handed to rumor_node_send (ms); 0: none. */
uint64_t rumor_node_sending_since(rumor_node_t *self, const uint8_t peer[32]);
/* Late join: ask peer (admitted, in the view) for its current model of this layout; the
 * answer arrives as chunks with has_hash. RUMOR_EINVAL / RUMOR_EAUTH as for rumor_node_send. */
rumor_err_t rumor_node_pull(rumor_node_t *self, const uint8_t peer[32], uint64_t layout);
/* A peer asks for our model (at most once per peer every 2 s reaches the callback); the
 * callback answers with rumor_node_send and a hash, or not at all. Node's thread. */
typedef void (*rumor_node_pull_cb)(void *arg, rumor_node_t *node, const uint8_t peer[32], uint64_t layout);
void rumor_node_on_pull(rumor_node_t *self, rumor_node_pull_cb cb, void *arg);
/* Layouts that differ (PROTOCOL.md "layout"): an admitted member's layout text arrived (at most
 * one a member every 2 s is handed on): cb(arg, peer, its layout id, text, len) on the node's
 * thread; the text is borrowed for the call, its bytes printable ASCII and newlines, and is
 * the callback's to parse and check against the id. */
typedef void (*rumor_node_layout_cb)(void *arg, const uint8_t peer[32], uint64_t layout, const char *text, size_t len);
void rumor_node_on_layout(rumor_node_t *self, rumor_node_layout_cb cb, void *arg);
/* Send our layout text (len bytes, at most RUMOR_PROTO_MAX_LAYOUT_TEXT) and id to an admitted
 * member in the view, over our dial or its own connection (not through relays). Node's thread
 * (the tick). RUMOR_EINVAL: not in the view; RUMOR_EAUTH: not admitted; RUMOR_ECLOSED: no path
 * now but a relay; RUMOR_ETIMEDOUT: the path is full. */
rumor_err_t rumor_node_send_layout(rumor_node_t *self, const uint8_t peer[32], uint64_t layout, const char *text,
                                   size_t len);
/* Wake the node's loop now (from any thread): its tick callback runs soon after. */
void rumor_node_wake(rumor_node_t *self);
/* The longest the loop sleeps between two ticks (default 100 ms); a driver that times its
 * own work (an emulated network delay) asks for finer ticks. */
void rumor_node_set_tick_ms(rumor_node_t *self, uint64_t ms);
/* Status of the driver above, appended to `rumor status`: with json, write one JSON value
 * (it becomes "train"); else text lines. Returns the bytes written (< cap). */
typedef size_t (*rumor_node_status_cb)(void *arg, bool json, char *buf, size_t cap);
void rumor_node_on_status(rumor_node_t *self, rumor_node_status_cb cb, void *arg);
/* The active view, for a driver above: count and the i-th key. */
int rumor_node_peer_count(const rumor_node_t *self);
const uint8_t *rumor_node_peer_key(const rumor_node_t *self, int i);
/* What the node knows of the i-th member of its view (one lookup; the node's thread). */
typedef struct {
    const uint8_t *key; /* its key (as rumor_node_peer_key) */
    /* Whether it has been admitted (its own valid hello seen, its certificate not expired):
     * only those can be sent models. */
    bool admitted;
    /* The boot id of its current run, from its own freshest knock (sealed with its key,
     * PROTOCOL.md "Admission"), else what membership holds (its hello, or a peer entry); 0
     * when unknown. Secure mixing binds masks to it. */
    uint64_t boot;
    /* The round at which it said it finished training (its hello's `done`, PROTOCOL.md
     * "Finishing"); 0 while it trains. */
    uint64_t done;
    /* Who can dial it, by its signed record (PROTOCOL.md "Reachability";
     * rumor_gossip_set_view_reach): 0 when anyone can, else the site its certificate states,
     * else a class of its own (its place with the top bit set). */
    uint64_t reach;
    /* Its place in the graph's rank order (rumor_member_place of the certificate held). */
    uint64_t place;
    /* Whether membership suspects it (it did not answer a probe in time), and whether only on
     * another member's word, while a ping of ours checks (doubted). */
    bool suspect, doubted;
    /* The layout id of the model it trains, by its hello (0: none said, or not admitted):
     * a member of another layout cannot be mixed with. */
    uint64_t layout;
} rumor_node_member_t;
/* false (and *out zeroed) when i is not in the view. */
bool rumor_node_member(rumor_node_t *self, int i, rumor_node_member_t *out);
/* This node's boot id: random, new at every start. */
uint64_t rumor_node_boot(const rumor_node_t *self);
/* Who can dial this node, as its record says: its reach class. 0: anyone; for a node behind
 * NAT or one nobody has dialled in its first ten periods of membership, the site its
 * certificate states, else a class of its own (its place with the top bit set). Node's
 * thread. */
uint64_t rumor_node_reach(const rumor_node_t *self);
/* This node's place in the graph's rank order (rumor_member_place of its certificate). */
uint64_t rumor_node_place(const rumor_node_t *self);
/* Say that this node finished training at `round`: every member is told at once (a fresh
 * hello) and every later hello says it. Any thread. */
void rumor_node_set_done(rumor_node_t *self, uint64_t round);

/* The layout id its hellos announce (rumor_node_config_t.layout), once the model is known:
 * before rumor_node_run. */
void rumor_node_set_layout(rumor_node_t *self, uint64_t layout);

/* The node's status, as `rumor status` prints it (json: the --json object), into out (cap
 * bytes, NUL-terminated). running: rumor_node_run is looping on another thread, which
 * answers within timeout_ms (else RUMOR_ETIMEDOUT); false: computed here. Any thread. */
rumor_err_t rumor_node_status(rumor_node_t *self, bool running, bool json, char *out, size_t cap, int timeout_ms,
                              char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* `rumor status`: ask the node at control endpoint for its status, JSON or text, into out. */
rumor_err_t rumor_node_query_status(const char *control, bool json, char *out, size_t cap,
                                    char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
