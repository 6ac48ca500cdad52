/*
 * guard.h - a bound on what connections can make libzmq hold for us, and on who may hold a
 * connection at all.
 *
 * Why it exists: ZMQ_MAXMSGSIZE limits one frame, not the number of frames of a message, and
 * libzmq holds every frame of a message in memory until its last frame arrives (libzmq 4.3 has
 * no limit on frames per message, and the receive high-water mark counts only complete
 * messages). libzmq also accepts every TCP connection and keeps it until its handshake ends
 * or times out. Without a guard, a member could send one message of a thousand 2 MiB frames,
 * or open sixty connections each holding its queue; and anyone who reaches the port could
 * hold connections that crowd members out.
 *
 * How much a connection holds: every connection of the node's sockets (accepted by the
 * ROUTER, or made by a DEALER) is registered here with its file descriptor, from the sockets'
 * monitor events. For each one the guard compares what the kernel says libzmq has read from it
 * (TCP_INFO's bytes received less the bytes still queued in the socket) with what the node has
 * taken from libzmq (every message's ZMQ_SRCFD names the connection it came from). Whatever
 * libzmq has read and not yet handed over is what it holds for that connection. Every time a
 * message is handed over the comparison starts again from what has been read by then, so the
 * count covers only the bytes read since the last whole message, less an allowance for
 * protocol commands such as heartbeats (GUARD_IDLE_RATE bytes a second, at most GUARD_IDLE_MAX).
 *
 * Two kinds of connection:
 *  - A stranger: accepted, and no whole message from it yet (its CURVE handshake may still be
 *    running; the ZAP handler admits only keys that knocked). Strangers have their own pool,
 *    `strangers` in all and `strangers_per_source` from one source (an IPv4 address or an IPv6
 *    /64, loopback included); when a pool is full, a newcomer makes room by cutting the idlest
 *    stranger: one that never sent a byte, the oldest first, then the one whose last byte is
 *    oldest. An honest handshake sends a byte every round trip and ends within a few, so it is
 *    never the idlest for long. A stranger may send `stranger_bytes` (a handshake's worth)
 *    and take `handshake_ms`: past either it becomes a member if the ZAP handler admitted a key
 *    from its address that no connection has claimed yet (rumor_guard_approved: a member whose
 *    first message is large, or that has nothing to say yet), and is cut otherwise.
 *  - A member: one that delivered a message (its key is the message's User-Id), one we dialled
 *    (its key is the one we dialled), or a stranger that claimed an admission. All connections
 *    of one key share `share` bytes (what one connection's honest traffic needs): when they
 *    hold more, the one holding most is cut (those that never delivered a message first).
 *    One key has at most `key_conns` connections: a newer one cuts the idlest of the others
 *    (ours, the DEALER we dialled it with, last).
 * All connections together hold at most `node_held`: beyond it the one holding most is cut.
 *
 * The bounds, between two checks (the node checks every GUARD_CHECK_MS while anything is
 * registered; what arrives between two checks comes on top): strangers hold at most
 * strangers x stranger_bytes; a key at most share plus key_conns x GUARD_IDLE_MAX; the node at
 * most node_held. A cut is shutdown(2) on the descriptor: libzmq sees the end of the stream,
 * drops the unfinished message and closes the connection; the guard counts each cut by reason.
 *
 * Non-goals: bandwidth limits; telling apart two strangers behind one address other than by how
 * idle they are. Linux only (TCP_INFO's tcpi_bytes_received, Linux 4.1).
 */
#ifndef RUMOR_NET_GUARD_H
#define RUMOR_NET_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GUARD_MAX 4096              /* connections watched at once */
#define GUARD_CHECK_MS 20           /* how often the node checks while any is registered */
#define GUARD_IDLE_RATE 256         /* bytes a second of commands (heartbeats) between messages */
#define GUARD_IDLE_MAX (1u << 20)   /* ... at most this much */
#define GUARD_APPROVALS 256         /* admissions (ZAP) remembered until a connection claims them */
#define GUARD_CLAIM_MIN 512         /* bytes a stranger must have sent to claim one: a CURVE
                                       greeting, HELLO and INITIATE are more (an idle socket or a
                                       half-open handshake claims nothing) */
#define GUARD_KEY_LEN 32
#define GUARD_SALT_LEN 16

typedef struct rumor_guard rumor_guard_t;

/* Why a connection was cut. */
typedef enum {
    GUARD_CUT_TABLE,          /* no room for one more connection at all (GUARD_MAX) */
    GUARD_CUT_EVICTED,        /* a stranger, the idlest, made room for a newer one */
    GUARD_CUT_LATE,           /* a stranger past handshake_ms with no admission to claim */
    GUARD_CUT_STRANGER_BYTES, /* a stranger past stranger_bytes with no admission to claim */
    GUARD_CUT_KEY_CONNS,      /* one of a key's connections beyond key_conns */
    GUARD_CUT_KEY_HELD,       /* a key's connections held more than share */
    GUARD_CUT_NODE_HELD,      /* all connections held more than node_held */
    GUARD_CUT_COUNT
} rumor_guard_cut_t;

typedef struct {
    uint64_t share;          /* bytes all connections of one key may make libzmq hold */
    uint64_t node_held;      /* ... all connections of the node */
    uint64_t stranger_bytes; /* bytes a stranger may send */
    uint64_t handshake_ms;   /* ... and how long it may stay one */
    int strangers;           /* strangers at once */
    int strangers_per_source;/* ... from one source */
    int key_conns;           /* connections of one key at once */
} rumor_guard_limits_t;

/* A guard; salt keys the hash of sources (random: nobody can aim addresses at one). NULL when
 * out of memory. */
rumor_guard_t *rumor_guard_new(const rumor_guard_limits_t *limits, const uint8_t salt[GUARD_SALT_LEN]);
void rumor_guard_destroy(rumor_guard_t **self_p);

/* A connection opened: accepted by our ROUTER (key NULL: a stranger, monitor
 * ZMQ_EVENT_ACCEPTED) or made by the DEALER we dialled key with (ZMQ_EVENT_CONNECTED). False
 * when it was cut at once (no room: GUARD_CUT_TABLE). A stranger may cut another (evicted). */
bool rumor_guard_open(rumor_guard_t *self, int fd, const uint8_t *key, uint64_t now_ms);
/* A connection closed (ZMQ_EVENT_DISCONNECTED or ZMQ_EVENT_CLOSED): forget it. */
void rumor_guard_close(rumor_guard_t *self, int fd);
/* The ZAP handler admitted key from ip (the ZAP request's address: an IPv4 or IPv6 literal):
 * a stranger from ip may claim it (see above). */
void rumor_guard_approved(rumor_guard_t *self, const uint8_t key[GUARD_KEY_LEN], const char *ip, uint64_t now_ms);
/* A whole message was taken from connection fd (its ZMQ_SRCFD; -1 is ignored) and key sent it
 * (its User-Id, or the key we dialled); inbound: it came in on our ROUTER. What libzmq has read
 * from it so far is accounted for, and the connection is key's member connection. Returns the
 * connection's serial (rumor_guard_serial), 0 when fd is not watched and cannot be. */
uint64_t rumor_guard_delivered(rumor_guard_t *self, int fd, const uint8_t key[GUARD_KEY_LEN], bool inbound,
                               uint64_t now_ms);
/* Which connection fd is (a number never given twice; 0 when fd is not watched): what
 * rumor_guard_cut asks for, so that a descriptor since reused is never cut by mistake. */
uint64_t rumor_guard_serial(const rumor_guard_t *self, int fd);
/* Shut connection fd down now if it is still the one serial named (a model stuck on a dead
 * link lets go of its buffer only when libzmq drops the connection); whether it did. Not
 * counted as a cut. */
bool rumor_guard_cut(rumor_guard_t *self, int fd, uint64_t serial);
/* Check every connection; cut what the limits say. Returns how many were cut. */
int rumor_guard_check(rumor_guard_t *self, uint64_t now_ms);

/* Connections registered now, strangers among them. */
int rumor_guard_count(const rumor_guard_t *self);
int rumor_guard_strangers(const rumor_guard_t *self);
/* The most one key's connections were seen holding (bytes), and all connections together. */
uint64_t rumor_guard_peak(const rumor_guard_t *self);
uint64_t rumor_guard_total_peak(const rumor_guard_t *self);
/* Connections cut for reason so far. */
uint64_t rumor_guard_cuts(const rumor_guard_t *self, rumor_guard_cut_t reason);
/* The reason's name, as `rumor status` shows it. */
const char *rumor_guard_cut_name(rumor_guard_cut_t reason);

#endif
