/*
 * guard.h - a bound on what one TCP connection can make libzmq hold for us.
 *
 * Why it exists: ZMQ_MAXMSGSIZE limits one frame, not the number of frames of a message, and
 * libzmq holds every frame of a message in memory until its last frame arrives (libzmq 4.3 has
 * no limit on frames per message, and the receive high-water mark counts only complete
 * messages). A peer whose key may connect (it knocked with a valid certificate) could
 * otherwise send one message of a thousand 2 MiB frames, or never send the last frame, and
 * make the node hold gigabytes.
 *
 * How: every connection of the node's sockets (accepted by the ROUTER, or made by a DEALER) is
 * registered here with its file descriptor, from the sockets' monitor events. For each one the
 * guard compares what the kernel says libzmq has read from it (TCP_INFO's bytes received less
 * the bytes still queued in the socket) with what the node has taken from libzmq (every
 * message's ZMQ_SRCFD names the connection it came from). Whatever libzmq has read and not yet
 * handed over is what it holds for that connection. Every time a message is handed over the
 * comparison starts again from what has been read by then, so the count covers only the bytes
 * read since the last whole message: an honest peer's next message, protocol commands such as
 * heartbeats (an allowance of GUARD_IDLE_RATE bytes a second, at most GUARD_IDLE_MAX), and
 * whatever a hostile one keeps in an unfinished message. A connection whose count passes the
 * limit is shut down (shutdown(2) on its descriptor: libzmq sees the end of the stream, drops
 * the unfinished message and closes the connection) and counted.
 *
 * The bound: at any check a connection holds at most `limit` + GUARD_IDLE_MAX bytes, plus what
 * it can send between two checks (the node checks every GUARD_CHECK_MS while anything is
 * registered). The node sets limit to what honest traffic needs: its receive high-water mark
 * of whole messages plus two messages in transit, each at most the protocol's largest message.
 * Connections are capped (GUARD_MAX): one more is shut down at once and counted.
 *
 * Non-goals: knowing who is behind a connection (the node does, from the message's User-Id),
 * bandwidth limits. Linux only (TCP_INFO's tcpi_bytes_received, Linux 4.1).
 */
#ifndef RUMOR_NET_GUARD_H
#define RUMOR_NET_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GUARD_MAX 1024              /* connections watched at once */
#define GUARD_CHECK_MS 20           /* how often the node checks while any is registered */
#define GUARD_IDLE_RATE 256         /* bytes a second of commands (heartbeats) between messages */
#define GUARD_IDLE_MAX (1u << 20)   /* ... at most this much */

typedef struct rumor_guard rumor_guard_t;

/* A guard that cuts a connection holding more than limit bytes; NULL when out of memory. */
rumor_guard_t *rumor_guard_new(uint64_t limit);
void rumor_guard_destroy(rumor_guard_t **self_p);

/* A connection opened (monitor ZMQ_EVENT_ACCEPTED or ZMQ_EVENT_CONNECTED): false when the
 * table is full, and the connection was shut down. */
bool rumor_guard_open(rumor_guard_t *self, int fd, uint64_t now_ms);
/* A connection closed (ZMQ_EVENT_DISCONNECTED or ZMQ_EVENT_CLOSED): forget it. */
void rumor_guard_close(rumor_guard_t *self, int fd);
/* A whole message was taken from the connection fd (its ZMQ_SRCFD; -1 is ignored): what libzmq
 * has read from it so far is accounted for. Returns the connection's serial (rumor_guard_serial),
 * 0 when fd is not watched. */
uint64_t rumor_guard_delivered(rumor_guard_t *self, int fd, uint64_t now_ms);
/* Which connection fd is (a number never given twice; 0 when fd is not watched): what
 * rumor_guard_cut asks for, so that a descriptor since reused is never cut by mistake. */
uint64_t rumor_guard_serial(const rumor_guard_t *self, int fd);
/* Shut connection fd down now if it is still the one serial named (a model stuck on a dead
 * link lets go of its buffer only when libzmq drops the connection); whether it did. */
bool rumor_guard_cut(rumor_guard_t *self, int fd, uint64_t serial);
/* Check every connection; shut down those over the limit. Returns how many were cut. */
int rumor_guard_check(rumor_guard_t *self, uint64_t now_ms);
/* Connections registered now. */
int rumor_guard_count(const rumor_guard_t *self);
/* The most any connection was seen holding (bytes), for `rumor status`. */
uint64_t rumor_guard_peak(const rumor_guard_t *self);

#endif
