/*
 * admit.h - the UDP side of admission: where knocks are sent from and answered.
 *
 * A node knocks before it dials (PROTOCOL.md, "Admission"): one sealed datagram to the UDP
 * port of the same number as the peer's TCP port, answered by one sealed datagram. The
 * datagrams themselves are crypto.h's (rumor_admit_*); this module owns the sockets:
 *  - the node's listening socket, bound to the host and port its ROUTER listens on. Bound to
 *    a wildcard address, it answers from the address the knock was sent to (IP_PKTINFO /
 *    IPV6_PKTINFO), so a knocker behind a connected socket accepts the answer;
 *  - a connected socket per knock: the kernel filters answers by source and reports an ICMP
 *    port-unreachable as ECONNREFUSED, which tells "nothing listens there" from silence;
 *  - `rumor ping`: one blocking knock with retries, for a user asking "would it let me in?".
 */
#ifndef RUMOR_NET_ADMIT_H
#define RUMOR_NET_ADMIT_H

#include "crypto.h"
#include "base.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Where a datagram came from and to which of our addresses it was sent. */
typedef struct {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    _Alignas(size_t) char ctl[128]; /* control data: a dual-stack socket gets both pktinfos */
    size_t ctl_len;
} rumor_admit_from_t;

/* Bind the listening socket to endpoint's host (tcp://HOST:PORT; "*", 0.0.0.0, :: and [::]
 * are wildcards) and port. Returns a non-blocking fd, or -1 with err. */
int rumor_admit_listen(const char *endpoint, uint16_t port, char err[RUMOR_ERR_LEN]);
/* One datagram from the listening socket, non-blocking: its length, or -1 (none). */
ssize_t rumor_admit_recv(int fd, uint8_t *buf, size_t cap, rumor_admit_from_t *from);
/* An address as the 16 bytes of an IPv6 address (IPv4 as ::ffff:a.b.c.d), from a socket
 * address or an IP literal; false for anything else. */
bool rumor_admit_ip16_addr(const struct sockaddr *sa, socklen_t len, uint8_t out[16]);
bool rumor_admit_ip16_text(const char *ip, uint8_t out[16]);
/* Whether ip16 is a loopback address (127/8, ::1). */
bool rumor_admit_ip16_loopback(const uint8_t ip16[16]);
/* The source of ip16 for per-source limits: an IPv4 address, or an IPv6 /64 (what one host or
 * one customer of a provider usually has, so that walking a prefix gains nothing), under a
 * keyed hash (SipHash with salt, random per node: nobody can aim addresses at one bucket). */
uint64_t rumor_admit_source(const uint8_t ip16[16], const uint8_t salt[16]);
/* The source of a datagram's sender (rumor_admit_source); 0 for a loopback sender (this
 * machine's own processes, such as a simulated swarm: knocks from them are not limited). */
uint64_t rumor_admit_source_of(const rumor_admit_from_t *from, const uint8_t salt[16]);
/* Answer from the address the datagram was sent to. */
void rumor_admit_reply(int fd, const rumor_admit_from_t *to, const uint8_t *buf, size_t len);

/* A non-blocking UDP socket connected to endpoint (tcp://HOST:PORT: the same port, over
 * UDP; a name is resolved). -1 with err. */
int rumor_admit_connect(const char *endpoint, char err[RUMOR_ERR_LEN]);

/* `rumor ping`: knock at address (rumor://KEY@HOST:PORT) as the node of key_path/cert_path
 * and wait up to timeout_ms for the answer, retrying. On RUMOR_OK, *status says whether it
 * admits us (RUMOR_ADMIT_OK) or why not (a rumor_cert_reject_t), and when it admits us its
 * certificate, checked against the swarm's authority, is in *cert; *rtt_ms is the round trip of
 * the answered knock. Errors: files, address, RUMOR_ETIMEDOUT (no answer: says whether the
 * port refused), RUMOR_EAUTH (its key is another, or its certificate fails). */
rumor_err_t rumor_admit_ping(const char *key_path, const char *cert_path, const char *swarm, const char *address,
                             uint64_t timeout_ms, uint8_t *status, rumor_cert_t *cert, double *rtt_ms,
                             char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
