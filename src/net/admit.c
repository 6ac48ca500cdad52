/* admit.c - UDP sockets for admission datagrams, and `rumor ping`. */
#define _GNU_SOURCE /* struct in6_pktinfo */
#include "admit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Split "tcp://HOST:PORT" (IPv6 in brackets) into host and port text. */
static bool split_endpoint(const char *endpoint, char host[RUMOR_HOST_MAX + 1], char port[8])
{
    if (strncmp(endpoint, "tcp://", 6) != 0) return false;
    const char *h = endpoint + 6, *colon = strrchr(h, ':');
    if (!colon || colon == h || strlen(colon + 1) == 0 || strlen(colon + 1) > 5) return false;
    size_t hl = (size_t)(colon - h);
    if (h[0] == '[') {
        if (hl < 2 || h[hl - 1] != ']') return false;
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl > RUMOR_HOST_MAX) return false;
    memcpy(host, h, hl);
    host[hl] = 0;
    snprintf(port, 8, "%s", colon + 1);
    return true;
}

static bool is_wildcard(const char *host)
{
    return strcmp(host, "*") == 0 || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0;
}

int rumor_admit_listen(const char *endpoint, uint16_t port, char err[RUMOR_ERR_LEN])
{
    char host[RUMOR_HOST_MAX + 1], ignored[8], portstr[8];
    if (!split_endpoint(endpoint, host, ignored)) {
        rumor_fail(err, RUMOR_EINVAL, "%s: expected tcp://HOST:PORT", endpoint);
        return -1;
    }
    snprintf(portstr, sizeof portstr, "%u", (unsigned)port);
    const bool wild = is_wildcard(host);
    /* "*" listens on every address, IPv6 and IPv4 alike (as ZeroMQ does with ZMQ_IPV6). */
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
                             .ai_family = strcmp(host, "*") == 0 ? AF_INET6 : AF_UNSPEC};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(strcmp(host, "*") == 0 ? "::" : host, portstr, &hints, &ai);
    if (gai != 0 || !ai) {
        rumor_fail(err, RUMOR_EINVAL, "cannot listen on udp %s:%s: %s", host, portstr, gai_strerror(gai));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 && errno == EAFNOSUPPORT && strcmp(host, "*") == 0) {
        /* A host without IPv6: "*" is every IPv4 address, as ZeroMQ makes it. */
        freeaddrinfo(ai);
        ai = NULL;
        hints.ai_family = AF_INET;
        if ((gai = getaddrinfo("0.0.0.0", portstr, &hints, &ai)) != 0 || !ai) {
            rumor_fail(err, RUMOR_EINVAL, "cannot listen on udp *:%s: %s", portstr, gai_strerror(gai));
            return -1;
        }
        fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    }
    if (fd >= 0) {
        const int on = 1, off = 0;
        if (ai->ai_family == AF_INET6) (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
        if (wild) {
            /* Answer from the address the knock was sent to, and tell which that was. */
            if (ai->ai_family == AF_INET6) (void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof on);
            (void)setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof on);
        }
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            rumor_fail(err, RUMOR_EIO, "cannot listen on udp %s:%s (admission needs the UDP port of the same "
                                       "number as the TCP one): %s", host, portstr, strerror(errno));
            close(fd);
            fd = -1;
        }
    } else {
        rumor_fail(err, RUMOR_EIO, "udp socket: %s", strerror(errno));
    }
    freeaddrinfo(ai);
    return fd;
}

/* Keep one control message (the answer's source address) in from->ctl. */
static void keep_ctl(rumor_admit_from_t *from, int level, int type, const void *data, size_t size)
{
    struct msghdr out = {.msg_control = from->ctl, .msg_controllen = CMSG_SPACE(size)};
    struct cmsghdr *o = CMSG_FIRSTHDR(&out);
    o->cmsg_level = level;
    o->cmsg_type = type;
    o->cmsg_len = CMSG_LEN(size);
    memcpy(CMSG_DATA(o), data, size);
    from->ctl_len = CMSG_SPACE(size);
}

ssize_t rumor_admit_recv(int fd, uint8_t *buf, size_t cap, rumor_admit_from_t *from)
{
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    struct msghdr mh = {.msg_name = &from->addr, .msg_namelen = sizeof from->addr, .msg_iov = &iov,
                        .msg_iovlen = 1, .msg_control = from->ctl, .msg_controllen = sizeof from->ctl};
    ssize_t len = recvmsg(fd, &mh, MSG_DONTWAIT);
    if (len < 0) return -1;
    if (mh.msg_flags & MSG_TRUNC) len = (ssize_t)cap + 1; /* longer than any datagram of ours */
    from->addr_len = mh.msg_namelen;
    /* Keep only the destination-address information, turned into the source of the answer. */
    from->ctl_len = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO && c->cmsg_len >= CMSG_LEN(sizeof(struct in_pktinfo))) {
            struct in_pktinfo pi;
            memcpy(&pi, CMSG_DATA(c), sizeof pi);
            pi.ipi_spec_dst = pi.ipi_addr;
            pi.ipi_ifindex = 0;
            keep_ctl(from, IPPROTO_IP, IP_PKTINFO, &pi, sizeof pi);
            break;
        }
        if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct in6_pktinfo))) {
            struct in6_pktinfo pi;
            memcpy(&pi, CMSG_DATA(c), sizeof pi);
            keep_ctl(from, IPPROTO_IPV6, IPV6_PKTINFO, &pi, sizeof pi);
            break;
        }
    }
    return len;
}

bool rumor_admit_ip16_addr(const struct sockaddr *sa, socklen_t len, uint8_t out[16])
{
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return true;
    }
    return false;
}

bool rumor_admit_ip16_text(const char *ip, uint8_t out[16])
{
    struct in_addr a4;
    if (inet_pton(AF_INET, ip, &a4) == 1) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &a4, 4);
        return true;
    }
    return inet_pton(AF_INET6, ip, out) == 1;
}

static bool is_v4(const uint8_t a[16])
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(a, mapped, 12) == 0;
}

bool rumor_admit_ip16_loopback(const uint8_t a[16])
{
    static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return (is_v4(a) && a[12] == 127) || memcmp(a, one, 16) == 0;
}

uint64_t rumor_admit_source(const uint8_t a[16], const uint8_t salt[16])
{
    uint8_t s[16];
    memcpy(s, a, 16);
    if (!is_v4(a)) memset(s + 8, 0, 8); /* IPv6: its /64 */
    return rumor_shorthash(salt, s, sizeof s);
}

uint64_t rumor_admit_source_of(const rumor_admit_from_t *from, const uint8_t salt[16])
{
    uint8_t a[16];
    if (!rumor_admit_ip16_addr((const struct sockaddr *)&from->addr, from->addr_len, a)) return 1;
    if (rumor_admit_ip16_loopback(a)) return 0;
    const uint64_t h = rumor_admit_source(a, salt);
    return h ? h : 1;
}

void rumor_admit_reply(int fd, const rumor_admit_from_t *to, const uint8_t *buf, size_t len)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr mh = {.msg_name = (void *)&to->addr, .msg_namelen = to->addr_len, .msg_iov = &iov,
                        .msg_iovlen = 1, .msg_control = to->ctl_len ? (void *)to->ctl : NULL,
                        .msg_controllen = to->ctl_len};
    (void)sendmsg(fd, &mh, MSG_DONTWAIT); /* a lost answer is a lost datagram: the knocker retries */
}

int rumor_admit_connect(const char *endpoint, char err[RUMOR_ERR_LEN])
{
    char host[RUMOR_HOST_MAX + 1], port[8];
    if (!split_endpoint(endpoint, host, port)) {
        rumor_fail(err, RUMOR_EINVAL, "%.300s: expected tcp://HOST:PORT", endpoint);
        return -1;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0 || !ai) {
        rumor_fail(err, RUMOR_EINVAL, "%s: %s", host, gai_strerror(gai));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        rumor_fail(err, RUMOR_EIO, "udp %s:%s: %s", host, port, strerror(errno));
        if (fd >= 0) close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

rumor_err_t rumor_admit_ping(const char *key_path, const char *cert_path, const char *swarm, const char *address,
                             uint64_t timeout_ms, uint8_t *status, rumor_cert_t *cert, double *rtt_ms,
                             char err[RUMOR_ERR_LEN])
{
    rumor_secret_key_t *key = NULL;
    uint8_t authority[RUMOR_KEY_LEN], own[RUMOR_CERT_MAX_LEN], dgram[RUMOR_ADMIT_MAX], nonce[RUMOR_ADMIT_NONCE_LEN];
    size_t own_len = 0;
    rumor_addr_t addr;
    int fd = -1;
    rumor_err_t rc = rumor_secret_key_load(&key, key_path, err);
    if (rc == RUMOR_OK) rc = rumor_cert_load(own, &own_len, cert_path, err);
    if (rc == RUMOR_OK) rc = rumor_public_key_load(authority, swarm, err);
    if (rc == RUMOR_OK) rc = rumor_addr_parse(&addr, address, err);
    if (rc == RUMOR_OK && (fd = rumor_admit_connect(addr.endpoint, err)) < 0) rc = RUMOR_EIO;
    if (rc != RUMOR_OK) goto out;
    const size_t len = rumor_admit_knock(dgram, key, addr.key, rumor_random_u64(), rumor_unix_ms(), own, own_len, nonce);
    const double start = rumor_now() * 1e3;
    double sent = start, gap = 250.0, next = start;
    bool refused = false, wrong = false;
    uint8_t real_key[RUMOR_KEY_LEN];
    rc = RUMOR_ETIMEDOUT;
    for (;;) {
        double now = rumor_now() * 1e3;
        if (now >= start + (double)timeout_ms) break;
        if (now >= next) {
            if (send(fd, dgram, len, 0) < 0 && errno == ECONNREFUSED) refused = true;
            sent = now;
            next = now + gap;
            gap = gap * 2 < 2000.0 ? gap * 2 : 2000.0;
        }
        double until = next < start + (double)timeout_ms ? next : start + (double)timeout_ms;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)(until - now) + 1) <= 0) continue;
        uint8_t buf[RUMOR_ADMIT_MAX + 1];
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k < 0) {
            if (errno == ECONNREFUSED) refused = true;
            continue;
        }
        rumor_admit_msg_t m;
        if (rumor_admit_open(&m, key, buf, (size_t)k) != RUMOR_OK || memcmp(m.nonce, nonce, sizeof nonce) != 0)
            continue; /* not an answer to this knock */
        if (m.kind == RUMOR_ADMIT_WRONG_KEY) {
            /* Not sealed, so only a diagnosis: the real answer may still come. */
            wrong = true;
            memcpy(real_key, m.from, RUMOR_KEY_LEN);
            continue;
        }
        if (m.kind != RUMOR_ADMIT_ANSWER || memcmp(m.from, addr.key, RUMOR_KEY_LEN) != 0) continue;
        *rtt_ms = rumor_now() * 1e3 - sent;
        *status = m.status;
        memset(cert, 0, sizeof *cert);
        rc = RUMOR_OK;
        if (m.status == RUMOR_ADMIT_OK) {
            rumor_cert_reject_t why;
            if (rumor_cert_verify(m.cert, m.cert_len, authority, addr.key, (uint64_t)time(NULL), cert, &why) != RUMOR_OK)
                rc = rumor_fail(err, RUMOR_EAUTH, "the node at %s:%u admits us, but its own certificate is refused: %s",
                                addr.host, (unsigned)addr.port, rumor_cert_reject_name(why));
        }
        goto out;
    }
    if (wrong) {
        char z[RUMOR_KEY_Z85_LEN + 1];
        rumor_key_to_z85(z, real_key);
        rc = rumor_fail(err, RUMOR_EAUTH, "the node at %s:%u has the key %s, not the one in the address",
                        addr.host, (unsigned)addr.port, z);
    } else if (refused)
        rc = rumor_fail(err, RUMOR_ETIMEDOUT, "nothing listens on udp %s:%u (connection refused): is a rumor node "
                        "running there?", addr.host, (unsigned)addr.port);
    else
        rc = rumor_fail(err, RUMOR_ETIMEDOUT, "no answer from udp %s:%u within %.1f s (wrong host, or a firewall "
                        "that drops UDP?)", addr.host, (unsigned)addr.port, (double)timeout_ms / 1000.0);
out:
    if (fd >= 0) close(fd);
    rumor_secret_key_destroy(&key);
    return rc;
}
