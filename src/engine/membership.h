/*
 * membership.h - who is in the swarm: join, peer exchange, failure detection, leave.
 *
 * A sans-I/O state machine (docs/ARCHITECTURE.md). It owns no sockets, threads, clock or
 * global randomness: the driver feeds it events (rumor_memb_tick with the time, messages
 * from admitted peers, join and leave requests) and carries out the actions it queues (send
 * this message to that peer; this member came up; that one went down). The same code runs
 * under the ZeroMQ driver and under the virtual-time simulator, and tests drive it directly.
 *
 * Protocol (after SWIM, Das, Gupta, Motivala 2002, with a HyParView-style bounded view):
 * - Join: HELLO to every bootstrap; a node answers a HELLO from a member it did not know with
 *   PEERS, a sample of its view, and spreads the newcomer as an `alive` update.
 * - Failure detection: every period one view member is probed in a shuffled round-robin
 *   order: PING, and if no ACK within ping_timeout, PING-REQ to k others who ping it on our
 *   behalf and relay the ACK. No answer by the end of the period makes the member SUSPECT;
 *   a suspect not cleared within suspect_ms is DEAD and leaves the view.
 * - Incarnations: a member that hears itself suspected or declared dead, or hears an
 *   incarnation of its own above its current one, refutes it with an ALIVE update under a
 *   higher incarnation. Precedence for one member: a higher incarnation wins; at equal
 *   incarnation dead/left > suspect > alive.
 * - Strict mode (a real node's; proto/PROTOCOL.md, "Member records"): a member's incarnation,
 *   boot id and address are its signed record (the driver checked the proof and set proven;
 *   membership treats proofs as opaque and signs its own through cfg.sign). An entry about
 *   another member without a proven record is refused; a newer record is taken from any
 *   entry (its address at most once a period), and of two records signed at one incarnation
 *   the greater (compared as bytes), so that every peer ends with the same one however the
 *   member told them apart (an honest member signs one record per incarnation). Suspect, dead or left said by another member
 *   about one in the view only makes it suspect here (not one heard from within the last
 *   period), with a ping to check (at most once a period): any message from the member
 *   clears it and counts against the claimant, whose claims are ignored for MUTE_PERIODS
 *   once RUMOR_MEMB_LIES_MAX were disproved within that long. Dead: after our own silence of
 *   suspect_ms since the check that began it, or on a claim of death about a member our own
 *   probe already suspects (`doubted` tells a claimed suspicion from our own). A claim about
 *   ourselves is refuted at most once a period, and only one at our own incarnation. Without
 *   strict mode (the virtual simulator) the rules below stand alone.
 * - Who may say what (claims are what others say about a member; its own word is what the
 *   member says itself, in a message whose sender `from` is its key, which the driver has
 *   authenticated by CURVE):
 *   . A claim whose incarnation is more than RUMOR_MEMB_INC_STEP above the last one we hold
 *     for that member (view, reservoir or tomb) is refused and counted (refused_claims). For
 *     a member we hold nothing about, the reference is the clock incarnations are drawn
 *     from: our own incarnation plus the seconds we have run (a start time in seconds, as
 *     the driver passes), and the claim may be at most RUMOR_MEMB_INC_SLACK above it. A
 *     claim about ourselves more than RUMOR_MEMB_INC_STEP ahead of our own incarnation is
 *     refused too, so forged claims can neither push an incarnation to the top of the range
 *     nor place one out of its owner's reach.
 *   . A member's own word always wins: any message from it (hello, ping, an entry about
 *     itself, any answer) puts it in the view alive, whatever tomb or claim we hold, under
 *     the higher of its incarnation and ours (a restarted node comes back with a much higher
 *     incarnation, its start time, and is let in however far that is); a tomb it had is
 *     told to it in the PEERS answering its hello, so it refutes the claim swarm-wide.
 *   . A member's address changes only on its own word (the hello address of the connection
 *     its message came on), and at most once a period (every new address is a dial). A
 *     claim sets the address of a member we knew nothing of; it never changes one we hold.
 *   . Boot ids: a member's own hello always sets its boot id; a claim sets it only for a
 *     member with none known, or together with a higher incarnation it was accepted with.
 * - Certificates and dialling (strict mode, which the ZeroMQ driver always sets): every entry
 *   passed on (PEERS samples, piggybacked updates) carries the member's admission
 *   certificate, learnt from its own hello or from an entry whose certificate the driver
 *   verified; an entry we hold no certificate for is never passed on, and a received entry
 *   without one is dropped. Dials to members heard of second hand (the reservoir) are
 *   budgeted: members never dialled before are dialled at most one a period after a burst
 *   of RUMOR_MEMB_DIAL_BURST (so a joining node greets a few at once), a member asked again only
 *   after a back-off that doubles from one period to RUMOR_MEMB_BACKOFF_MAX periods, and a
 *   member that leaves RUMOR_MEMB_MAX_INVITES hellos unanswered is forgotten (a DOWN action
 *   with state dead, so the driver closes its connection) and held dead at its incarnation
 *   for at least 4 * RUMOR_MEMB_BACKOFF_MAX periods, so the same claim repeated does not
 *   bring it back to be dialled. (A member's own word still does.)
 * - Dissemination: updates ride on every PING, PING-REQ and ACK (at most max_piggyback each),
 *   each sent about retransmit_mult * log2(n + 1) times, least-sent first.
 * - View: at most view_size members are probed and gossiped with (the active view). A member
 *   enters it only on a message from the member itself (the driver passes on messages only
 *   from peers whose certificate it checked): one merely heard of waits in a passive
 *   reservoir of at most passive_size, and while the view has room it is sent a HELLO
 *   (at most once a period; in strict mode on the dial budget above), whose answer lets it
 *   in. Members that die are replaced so.
 *   Every exchange_ms a random member gets PEERS, a sample of both views, so views stay mixed.
 * - Leave: BYE to every member of the view; receivers drop the sender at once.
 * - Rejoin: while a bootstrap is not in the view, HELLO is retried every rejoin_ms, so a node
 *   cut off by a partition finds its way back when the network heals; every period while the
 *   view is empty (a joining node whose hello, or its answer, was lost).
 *
 * Invariants: memory is bounded by the configuration (view, reservoir, update queue, outbox
 * and pending probes are fixed-size); no input can grow it. Updates about unknown members
 * go into the reservoir only; the view holds only members heard from directly, and the
 * driver passes on a peer's messages only after its certificate verified (that check is
 * not this module's).
 */
#ifndef RUMOR_MEMBERSHIP_H
#define RUMOR_MEMBERSHIP_H

#include "rng.h"
#include "base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUMOR_MEMB_ADDR_LEN 256 /* "tcp://HOST:PORT" and its NUL (proto: at most 255 bytes) */
#define RUMOR_MEMB_MAX_UPD 16 /* piggybacked updates per message */
#define RUMOR_MEMB_MAX_PEERS 64
#define RUMOR_MEMB_CERT_MAX 256 /* an admission certificate, opaque here (crypto.h: at most 213) */
#define RUMOR_MEMB_INC_STEP 1000u /* a claim's incarnation above the last one held: at most */
#define RUMOR_MEMB_INC_SLACK 86400u /* ... above our clock, for a member we hold nothing about */
#define RUMOR_MEMB_MAX_INVITES 5 /* unanswered hellos before a reservoir member is forgotten */
#define RUMOR_MEMB_DIAL_BURST 4 /* members never dialled that may be dialled at once */
#define RUMOR_MEMB_BACKOFF_MAX 32 /* periods between two hellos to one reservoir member, at most */
#define RUMOR_MEMB_PROOF_LEN 96 /* a member's signature of its record (opaque here: the driver's) */
#define RUMOR_MEMB_RECORD_MAX (16 + RUMOR_KEY_LEN + 4 + 8 + 1 + 1 + RUMOR_MEMB_ADDR_LEN)
#define RUMOR_MEMB_LIES_MAX 3 /* strict: claims a member's own word disproved before its claims are ignored */

typedef enum {
    RUMOR_MEMB_ALIVE = 0,
    RUMOR_MEMB_SUSPECT = 1,
    RUMOR_MEMB_DEAD = 2,
    RUMOR_MEMB_LEFT = 3,
} rumor_memb_state_t;

/* What one peer says about one member. In strict mode inc, boot, undialable and addr are the
 * member's record, which it signed (proof; the driver checked it and set proven), and state is
 * what the sender says of it. */
typedef struct {
    uint8_t key[RUMOR_KEY_LEN];
    char addr[RUMOR_MEMB_ADDR_LEN];
    uint32_t inc;
    rumor_memb_state_t state;
    uint64_t boot;     /* the member's boot id; 0: unknown */
    bool undialable;   /* its record says only members it dials reach it (behind NAT) */
    uint16_t cert_len; /* 0: no certificate */
    uint8_t cert[RUMOR_MEMB_CERT_MAX];
    bool proven;       /* proof is the member's signature of (key, inc, boot, undialable, addr) */
    uint8_t proof[RUMOR_MEMB_PROOF_LEN];
} rumor_memb_update_t;

/* The bytes a member signs of itself (its record): "rumor-member-2\0\0", its key, inc
 * (big-endian), boot (big-endian), one byte of flags (1: undialable), the address's length
 * and bytes. Its length. */
size_t rumor_memb_record(uint8_t out[RUMOR_MEMB_RECORD_MAX], const uint8_t key[RUMOR_KEY_LEN], uint32_t inc,
                         uint64_t boot, bool undialable, const char *addr);

typedef enum {
    RUMOR_MEMB_HELLO,
    RUMOR_MEMB_PEERS,
    RUMOR_MEMB_PING,
    RUMOR_MEMB_PING_REQ,
    RUMOR_MEMB_ACK,
    RUMOR_MEMB_BYE,
} rumor_memb_kind_t;

/* A membership message, as the driver encodes it on the wire (proto/) and decodes it back.
 * Fields a kind does not use are ignored. */
typedef struct {
    rumor_memb_kind_t kind;
    uint32_t seq;                       /* ping, ping-req: probe number; others: 0 */
    uint32_t inc;                       /* hello, ping: the sender's incarnation */
    char addr[RUMOR_MEMB_ADDR_LEN];          /* hello: the sender's listen address */
    uint64_t boot;                      /* hello: the sender's boot id (nonzero) */
    bool undialable;                    /* hello: the sender says only members it dials reach it */
    uint16_t cert_len;                  /* hello: the sender's certificate, which the */
    uint8_t cert[RUMOR_MEMB_CERT_MAX];  /* driver verified for `from` */
    bool proven;                        /* hello: proof is the sender's signature of its */
    uint8_t proof[RUMOR_MEMB_PROOF_LEN]; /* record (inc, boot, addr), which the driver checked */
    uint32_t ack;                       /* ack: the seq it answers */
    bool has_target;                    /* ping-req; ack relayed for a ping-req */
    uint8_t target[RUMOR_KEY_LEN];
    char target_addr[RUMOR_MEMB_ADDR_LEN];   /* ping-req */
    int n_upd;                          /* ping, ping-req, ack: piggybacked updates */
    rumor_memb_update_t upd[RUMOR_MEMB_MAX_UPD];
    int n_peers;                        /* peers */
    rumor_memb_update_t peers[RUMOR_MEMB_MAX_PEERS];
} rumor_memb_msg_t;

typedef enum {
    RUMOR_MEMB_ACT_SEND, /* send msg to key at addr */
    RUMOR_MEMB_ACT_UP,   /* key (at addr) joined the view: a neighbour candidate */
    RUMOR_MEMB_ACT_DOWN, /* key left the view; state says why (dead, left, or alive when
                            it was only moved to the reservoir) */
} rumor_memb_act_kind_t;

typedef struct {
    rumor_memb_act_kind_t kind;
    uint8_t key[RUMOR_KEY_LEN];
    char addr[RUMOR_MEMB_ADDR_LEN];
    rumor_memb_state_t state;
    rumor_memb_msg_t msg;
} rumor_memb_action_t;

typedef struct {
    uint32_t period_ms;       /* protocol period: one probe each (default 1000) */
    uint32_t ping_timeout_ms; /* direct ping before indirect probes (default 300) */
    uint32_t suspect_ms;      /* suspect to dead (default 5000) */
    int indirect_k;           /* members asked to ping on our behalf (default 3) */
    int view_size;            /* active view (default 64; a swarm that fits sees everyone) */
    int passive_size;         /* reservoir (default 256) */
    int exchange_size;        /* entries per PEERS (default 16, at most 64) */
    uint32_t exchange_ms;     /* peer exchange period (default 5000) */
    uint32_t rejoin_ms;       /* HELLO to missing bootstraps (default 5000) */
    int max_piggyback;        /* updates per message (default 8, at most 16) */
    int retransmit_mult;      /* dissemination factor lambda (default 3) */
    uint64_t seed;            /* for probe order and sampling (the ZeroMQ driver draws it from
                                 libsodium, so no one can predict a node's probes) */
    bool strict;              /* certificates and signed records on every entry passed on,
                                 claims bounded by them, a dial budget (see the header); default
                                 off, for the virtual-time simulator whose members are all its
                                 own; the ZeroMQ driver always sets it */
    /* strict: sign our record (rumor_memb_record's bytes) into proof; called when our
     * incarnation, address or boot id change */
    void (*sign)(void *arg, const uint8_t *record, size_t len, uint8_t proof[RUMOR_MEMB_PROOF_LEN]);
    void *sign_arg;
    /* Which of two certificates of one member to keep (> 0: a, < 0: b): the later issued, so
     * that every peer ends holding the same one (a member's place in the gossip graph is drawn
     * from it) however a member shows them. NULL: a member's own word replaces the one held. */
    int (*cert_order)(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len);
} rumor_memb_config_t;

rumor_memb_config_t rumor_memb_defaults(void);

typedef struct rumor_memb rumor_memb_t;

/* A membership for the local node `self_key` listening at `self_addr`, starting with
 * incarnation `inc` (the driver passes something that grows across restarts, such as the
 * start time in seconds, so a restarted node outranks what others remember of it).
 * NULL with err when the configuration is out of range. */
rumor_memb_t *rumor_memb_new(const rumor_memb_config_t *cfg, const uint8_t self_key[RUMOR_KEY_LEN],
                             const char *self_addr, uint32_t inc, char err[RUMOR_ERR_LEN]);
void rumor_memb_destroy(rumor_memb_t **self_p);
/* The local node's own certificate and boot id, carried in the entries about itself that
 * it passes on (strict mode passes on none without). cert_len <= RUMOR_MEMB_CERT_MAX. */
void rumor_memb_set_identity(rumor_memb_t *self, const uint8_t *cert, size_t cert_len, uint64_t boot);

/* ---- events ---- */

/* Ask to join through a bootstrap (call once per --bootstrap address). */
void rumor_memb_join(rumor_memb_t *self, const uint8_t key[RUMOR_KEY_LEN], const char *addr,
                     uint64_t now_ms);
/* A member known by other means than messages (a simulation that starts with its swarm
 * formed): into the view when there is room, else the reservoir; nothing is sent and no view
 * event is queued. */
void rumor_memb_add(rumor_memb_t *self, const uint8_t key[RUMOR_KEY_LEN], const char *addr, uint32_t inc,
                    uint64_t now_ms);
/* A message from an admitted peer `from` (its CURVE key) that listens at from_addr (the
 * address of its hello on this connection: the driver processes nothing before a hello, so
 * it always knows it). Malformed content is dropped and counted. */
void rumor_memb_recv(rumor_memb_t *self, const uint8_t from[RUMOR_KEY_LEN], const char *from_addr,
                     const rumor_memb_msg_t *msg, uint64_t now_ms);
/* Advance time: probes, timeouts, exchanges, rejoins. Call at least every period/4. */
void rumor_memb_tick(rumor_memb_t *self, uint64_t now_ms);
/* Leave gracefully: BYE to every view member; afterwards the machine is inert. */
void rumor_memb_leave(rumor_memb_t *self, uint64_t now_ms);

/* ---- actions ---- */

/* Take the next queued action; false when none. The outbox is bounded: when the driver
 * falls behind, the oldest sends are dropped (and counted), never the view changes. */
bool rumor_memb_next_action(rumor_memb_t *self, rumor_memb_action_t *out);
/* Milliseconds until the next tick matters (for the driver's poll timeout). */
uint64_t rumor_memb_next_deadline(const rumor_memb_t *self, uint64_t now_ms);

/* ---- the view ---- */

typedef struct {
    uint8_t key[RUMOR_KEY_LEN];
    const char *addr;      /* at most RUMOR_MEMB_ADDR_LEN - 1 bytes; the membership's, valid
                              until its next call (the next event may move or free it) */
    uint32_t inc;
    rumor_memb_state_t state;
    uint64_t last_seen_ms; /* last message or ack from it */
    uint32_t rtt_ms;       /* smoothed round trip of direct pings; 0 until measured */
    uint64_t boot;         /* its boot id (its own hello sets it); 0: unknown */
    bool undialable;       /* its record says only members it dials reach it (strict: signed) */
    bool doubted;          /* strict: suspect on another member's word, while we check it */
} rumor_memb_member_t;

/* Members of the active view (alive and suspect), in no particular order. */
int rumor_memb_view_count(const rumor_memb_t *self);
const rumor_memb_member_t *rumor_memb_view_at(const rumor_memb_t *self, int i);
int rumor_memb_passive_count(const rumor_memb_t *self);
uint32_t rumor_memb_incarnation(const rumor_memb_t *self);
/* Strict: our record at rumor_memb_incarnation signed (cfg.sign), for our hello; NULL before. */
const uint8_t *rumor_memb_proof(const rumor_memb_t *self);
/* The certificate held for view member i (*len 0: none); NULL when i is out of range. */
const uint8_t *rumor_memb_view_cert(const rumor_memb_t *self, int i, size_t *len);
/* Whether only members this node dials reach it (behind NAT, or never dialled): part of its
 * record, so a change moves its incarnation on and signs the record again (the driver then
 * sends its hello again). */
void rumor_memb_set_undialable(rumor_memb_t *self, bool undialable);
bool rumor_memb_undialable(const rumor_memb_t *self);

typedef struct {
    uint64_t pings_sent, acks_received, ping_reqs_sent, suspicions, deaths, refutations;
    uint64_t dropped_input;   /* malformed or self-contradicting messages */
    uint64_t dropped_actions; /* sends dropped because the outbox was full */
    uint64_t refused_claims;  /* claims beyond the incarnation step; strict: claims without
                                 the member's signed record, or from a member whose claims
                                 are ignored */
    uint64_t disproved;       /* strict: second-hand suspicions the member's own word cleared */
    uint64_t muted;           /* strict: members whose claims are ignored for a while */
    uint64_t forgotten;       /* reservoir members that never answered */
} rumor_memb_stats_t;

rumor_memb_stats_t rumor_memb_stats(const rumor_memb_t *self);

const char *rumor_memb_state_name(rumor_memb_state_t state);

#endif
