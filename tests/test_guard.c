/* test_guard.c - the connection guard (src/net/guard.h) on real loopback TCP connections, with
 * the clock in the test's hands: which stranger makes room for a newer one, when a stranger is
 * cut or becomes a member, how many connections one key keeps, and which connection goes when
 * a key's share or the node's bound is passed. "libzmq has read" is played by the test reading
 * the accepted end. */
#include "check.h"
#include "admit.h"
#include "guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const uint8_t SALT[GUARD_SALT_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static int listener = -1;
static struct sockaddr_in listen_at;

/* A connection to the listener from 127.0.0.from: *srv the accepted end (what the guard
 * watches), *cli the stranger's. */
static bool connect_from(int from, int *srv, int *cli)
{
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)from)};
    *srv = *cli = -1;
    if ((*cli = socket(AF_INET, SOCK_STREAM, 0)) < 0 || bind(*cli, (struct sockaddr *)&me, sizeof me) != 0 ||
        connect(*cli, (struct sockaddr *)&listen_at, sizeof listen_at) != 0 ||
        (*srv = accept(listener, NULL, NULL)) < 0) {
        if (*cli >= 0) close(*cli);
        *cli = -1;
        return false;
    }
    return true;
}

/* The stranger sends n bytes, and "libzmq" reads them. */
static void send_read(int cli, int srv, size_t n)
{
    static char buf[1 << 16];
    memset(buf, 'x', sizeof buf);
    size_t sent = 0, got = 0;
    while (sent < n) {
        const size_t k = n - sent < sizeof buf ? n - sent : sizeof buf;
        const ssize_t w = send(cli, buf, k, 0);
        if (w <= 0) return;
        sent += (size_t)w;
        while (got < sent) {
            const ssize_t r = recv(srv, buf, sizeof buf, 0);
            if (r <= 0) return;
            got += (size_t)r;
        }
    }
}

/* Whether the guard shut srv down: the stranger's end reads the end of the stream. */
static bool was_cut(int cli)
{
    struct pollfd p = {.fd = cli, .events = POLLIN};
    if (poll(&p, 1, 50) <= 0) return false;
    char c;
    return recv(cli, &c, 1, MSG_DONTWAIT) == 0;
}

static rumor_guard_limits_t limits(void)
{
    return (rumor_guard_limits_t){.share = 64 << 10, .node_held = 1 << 20, .stranger_bytes = 4096, .handshake_ms = 5000,
                                  .strangers = 6, .strangers_per_source = 3, .key_conns = 2};
}

typedef struct {
    int srv, cli;
} conn_t;

static void close_all(conn_t *c, int n)
{
    for (int i = 0; i < n; i++) {
        if (c[i].srv >= 0) close(c[i].srv);
        if (c[i].cli >= 0) close(c[i].cli);
        c[i].srv = c[i].cli = -1;
    }
}

/* A full pool makes room by cutting the idlest: one that never sent a byte, the oldest first;
 * then the one whose last byte is oldest. One source fills its own pool only; the pool of all
 * strangers is bounded too; members are never cut to make room. */
static void test_strangers(void)
{
    rumor_guard_limits_t lim = limits();
    rumor_guard_t *g = rumor_guard_new(&lim, SALT);
    conn_t c[12];
    for (int i = 0; i < 12; i++) c[i].srv = c[i].cli = -1;
    uint64_t now = 1000;
    /* Three from 127.0.0.1: the first and third idle, the second talks. */
    for (int i = 0; i < 3; i++) {
        CHECK(connect_from(1, &c[i].srv, &c[i].cli));
        CHECK(rumor_guard_open(g, c[i].srv, NULL, now += 10));
    }
    send_read(c[1].cli, c[1].srv, 100);
    (void)rumor_guard_check(g, now += 10);
    CHECK(rumor_guard_strangers(g) == 3 && rumor_guard_cuts(g, GUARD_CUT_EVICTED) == 0);
    /* A fourth from the same source: the oldest idle one (0) goes. */
    CHECK(connect_from(1, &c[3].srv, &c[3].cli));
    CHECK(rumor_guard_open(g, c[3].srv, NULL, now += 10));
    CHECK(was_cut(c[0].cli) && !was_cut(c[1].cli) && !was_cut(c[2].cli));
    CHECK(rumor_guard_cuts(g, GUARD_CUT_EVICTED) == 1 && rumor_guard_strangers(g) == 3);
    /* A fifth: the other idle one (2) goes, older than the newcomer 3, though 1 is older still. */
    CHECK(connect_from(1, &c[4].srv, &c[4].cli));
    CHECK(rumor_guard_open(g, c[4].srv, NULL, now += 10));
    CHECK(was_cut(c[2].cli) && !was_cut(c[1].cli) && !was_cut(c[3].cli));
    /* 3 and 4 send later than 1 did: 1's last byte is now the oldest, and it goes next. */
    send_read(c[3].cli, c[3].srv, 10);
    send_read(c[4].cli, c[4].srv, 10);
    (void)rumor_guard_check(g, now += 10);
    CHECK(connect_from(1, &c[5].srv, &c[5].cli));
    CHECK(rumor_guard_open(g, c[5].srv, NULL, now += 10));
    CHECK(was_cut(c[1].cli) && !was_cut(c[3].cli) && !was_cut(c[4].cli));
    CHECK(rumor_guard_cuts(g, GUARD_CUT_EVICTED) == 3);
    /* Another source has a pool of its own: three from 127.0.0.2 cut nobody ... */
    for (int i = 6; i < 9; i++) {
        CHECK(connect_from(2, &c[i].srv, &c[i].cli));
        CHECK(rumor_guard_open(g, c[i].srv, NULL, now += 10));
    }
    CHECK(rumor_guard_cuts(g, GUARD_CUT_EVICTED) == 3 && rumor_guard_strangers(g) == 6);
    /* ... but all strangers together are bounded (6): one from a third source cuts the idlest
     * of all (5, idle since it came; 6, 7, 8 came later). */
    CHECK(connect_from(3, &c[9].srv, &c[9].cli));
    CHECK(rumor_guard_open(g, c[9].srv, NULL, now += 10));
    CHECK(was_cut(c[5].cli) && !was_cut(c[6].cli) && !was_cut(c[3].cli));
    CHECK(rumor_guard_cuts(g, GUARD_CUT_EVICTED) == 4 && rumor_guard_strangers(g) == 6);
    /* A member's connection is no stranger: it is never cut to make room. */
    const uint8_t key[GUARD_KEY_LEN] = {7};
    send_read(c[3].cli, c[3].srv, 10);
    CHECK(rumor_guard_delivered(g, c[3].srv, key, true, now += 10) != 0);
    CHECK(rumor_guard_strangers(g) == 5 && rumor_guard_count(g) == 6);
    for (int i = 10; i < 12; i++) {
        CHECK(connect_from(1, &c[i].srv, &c[i].cli));
        CHECK(rumor_guard_open(g, c[i].srv, NULL, now += 10));
    }
    CHECK(!was_cut(c[3].cli));
    CHECK(rumor_guard_strangers(g) <= 6);
    close_all(c, 12);
    rumor_guard_destroy(&g);
}

/* A stranger may send a handshake's bytes and take handshake_ms; past either it is cut, unless
 * the ZAP handler admitted a key from its address that no connection has claimed (and it sent
 * at least a handshake): then it is that key's. A claimed admission is claimed once. */
static void test_stranger_limits(void)
{
    rumor_guard_limits_t lim = limits();
    rumor_guard_t *g = rumor_guard_new(&lim, SALT);
    conn_t c[6];
    for (int i = 0; i < 6; i++) {
        c[i].srv = c[i].cli = -1;
        CHECK(connect_from(1, &c[i].srv, &c[i].cli));
    }
    uint64_t now = 1000;
    const uint8_t key[GUARD_KEY_LEN] = {9};
    for (int i = 0; i < 3; i++) CHECK(rumor_guard_open(g, c[i].srv, NULL, now));
    /* 0 sends more than a handshake, with no admission to claim: cut. */
    send_read(c[0].cli, c[0].srv, lim.stranger_bytes + 1);
    (void)rumor_guard_check(g, now += 10);
    CHECK(was_cut(c[0].cli) && rumor_guard_cuts(g, GUARD_CUT_STRANGER_BYTES) == 1);
    /* 1 sends a handshake's bytes, 2 a few: both silent past the deadline, one admission from
     * their address: 1 claims it and stays, 2 (too few bytes to have shaken hands) is cut. */
    send_read(c[1].cli, c[1].srv, GUARD_CLAIM_MIN);
    send_read(c[2].cli, c[2].srv, 64);
    rumor_guard_approved(g, key, "127.0.0.1", now);
    (void)rumor_guard_check(g, now = 1000 + lim.handshake_ms);
    CHECK(!was_cut(c[1].cli) && !was_cut(c[2].cli)); /* not late yet */
    (void)rumor_guard_check(g, now += 1);
    CHECK(!was_cut(c[1].cli) && was_cut(c[2].cli));
    CHECK(rumor_guard_cuts(g, GUARD_CUT_LATE) == 1 && rumor_guard_strangers(g) == 0 && rumor_guard_count(g) == 1);
    /* 3 and 4 send past a handshake at once, with one admission (of another address: none of
     * theirs) and then one of theirs: the first to pass claims it, the other is cut. */
    for (int i = 3; i < 5; i++) CHECK(rumor_guard_open(g, c[i].srv, NULL, now));
    rumor_guard_approved(g, key, "::ffff:10.1.2.3", now);
    rumor_guard_approved(g, key, "::ffff:127.0.0.1", now); /* (libzmq writes IPv4 this way on a dual-stack socket) */
    send_read(c[3].cli, c[3].srv, lim.stranger_bytes + 100);
    send_read(c[4].cli, c[4].srv, lim.stranger_bytes + 100);
    (void)rumor_guard_check(g, now += 10);
    CHECK(!was_cut(c[3].cli) && was_cut(c[4].cli));
    CHECK(rumor_guard_cuts(g, GUARD_CUT_STRANGER_BYTES) == 2);
    /* An admission is good for 2 handshake_ms: 5, past the deadline long after, claims none. */
    CHECK(rumor_guard_open(g, c[5].srv, NULL, now));
    send_read(c[5].cli, c[5].srv, GUARD_CLAIM_MIN);
    rumor_guard_approved(g, key, "127.0.0.1", now);
    (void)rumor_guard_check(g, now += 2 * lim.handshake_ms + 10);
    CHECK(was_cut(c[5].cli));
    /* The two claims made key's connections: 1 and 3, at its cap of 2. */
    CHECK(rumor_guard_count(g) == 2 && rumor_guard_cuts(g, GUARD_CUT_KEY_CONNS) == 0);
    close_all(c, 6);
    rumor_guard_destroy(&g);
}

/* One key keeps key_conns connections: a newer one cuts one of the others, one that never
 * delivered a message first, then the one whose last byte is oldest, our own dial last. */
static void test_key_conns(void)
{
    rumor_guard_limits_t lim = limits();
    lim.key_conns = 3;
    rumor_guard_t *g = rumor_guard_new(&lim, SALT);
    const uint8_t k1[GUARD_KEY_LEN] = {1}, k2[GUARD_KEY_LEN] = {2};
    conn_t c[7];
    for (int i = 0; i < 7; i++) CHECK(connect_from(1, &c[i].srv, &c[i].cli));
    uint64_t now = 1000;
    /* 0: our dial to k1 (registered with its key); 1, 2: k1's connections to us, 2 last heard. */
    CHECK(rumor_guard_open(g, c[0].srv, k1, now));
    for (int i = 1; i < 3; i++) {
        CHECK(rumor_guard_open(g, c[i].srv, NULL, now));
        send_read(c[i].cli, c[i].srv, 40);
        CHECK(rumor_guard_delivered(g, c[i].srv, k1, true, now += 10) != 0);
    }
    /* k2's connection does not count against k1. */
    CHECK(rumor_guard_open(g, c[6].srv, NULL, now));
    CHECK(rumor_guard_delivered(g, c[6].srv, k2, true, now += 10) != 0);
    CHECK(rumor_guard_count(g) == 4 && rumor_guard_cuts(g, GUARD_CUT_KEY_CONNS) == 0);
    /* 3, k1's fourth: 1 goes (its last byte is older than 2's), never our dial (0). */
    CHECK(rumor_guard_open(g, c[3].srv, NULL, now));
    send_read(c[3].cli, c[3].srv, 40);
    CHECK(rumor_guard_delivered(g, c[3].srv, k1, true, now += 10) != 0);
    CHECK(was_cut(c[1].cli) && !was_cut(c[2].cli) && !was_cut(c[0].cli) && !was_cut(c[6].cli));
    /* 4 claims an admission of k1's (it never delivered) and 5 then delivers as k1: 4 goes
     * first, though 2 is idler. */
    CHECK(rumor_guard_open(g, c[4].srv, NULL, now));
    send_read(c[4].cli, c[4].srv, GUARD_CLAIM_MIN);
    rumor_guard_approved(g, k1, "127.0.0.1", now);
    (void)rumor_guard_check(g, now += lim.handshake_ms + 1);
    CHECK(!was_cut(c[4].cli) && was_cut(c[2].cli)); /* (4's claim made four: the idlest, 2, went) */
    CHECK(rumor_guard_open(g, c[5].srv, NULL, now));
    send_read(c[5].cli, c[5].srv, 40);
    CHECK(rumor_guard_delivered(g, c[5].srv, k1, true, now += 10) != 0);
    CHECK(was_cut(c[4].cli) && !was_cut(c[3].cli) && !was_cut(c[0].cli));
    CHECK(rumor_guard_cuts(g, GUARD_CUT_KEY_CONNS) == 3 && rumor_guard_count(g) == 4);
    close_all(c, 7);
    rumor_guard_destroy(&g);
}

/* All connections of one key share `share` bytes: when they hold more, the one holding most
 * goes (one that never delivered first); a lone connection of another key holding less is
 * untouched. All connections together hold at most node_held: the one holding most goes. */
static void test_shares(void)
{
    rumor_guard_limits_t lim = limits();
    lim.key_conns = 8;
    lim.stranger_bytes = 1 << 20;
    rumor_guard_t *g = rumor_guard_new(&lim, SALT);
    const uint8_t k1[GUARD_KEY_LEN] = {1}, k2[GUARD_KEY_LEN] = {2};
    conn_t c[6];
    uint64_t now = 1000;
    for (int i = 0; i < 6; i++) {
        CHECK(connect_from(1, &c[i].srv, &c[i].cli));
        CHECK(rumor_guard_open(g, c[i].srv, NULL, now));
        CHECK(rumor_guard_delivered(g, c[i].srv, i < 4 ? k1 : k2, true, now) != 0);
    }
    /* k1's four hold 20, 30, 10 and 4 KiB: 64 KiB is the share, 0..3 hold 64 KiB: kept. */
    const size_t held[4] = {20 << 10, 30 << 10, 10 << 10, 4 << 10};
    for (int i = 0; i < 4; i++) send_read(c[i].cli, c[i].srv, held[i]);
    (void)rumor_guard_check(g, now); /* (no allowance: no time has passed since each message) */
    CHECK(rumor_guard_cuts(g, GUARD_CUT_KEY_HELD) == 0 && rumor_guard_peak(g) == (64u << 10));
    /* One byte more: the largest (1) goes, and only it. */
    send_read(c[3].cli, c[3].srv, 1);
    (void)rumor_guard_check(g, now);
    CHECK(was_cut(c[1].cli) && !was_cut(c[0].cli) && !was_cut(c[2].cli) && !was_cut(c[3].cli));
    CHECK(rumor_guard_cuts(g, GUARD_CUT_KEY_HELD) == 1);
    /* A message taken from 0 accounts for what it held. */
    CHECK(rumor_guard_delivered(g, c[0].srv, k1, true, now) != 0);
    send_read(c[0].cli, c[0].srv, 40 << 10);
    (void)rumor_guard_check(g, now);
    CHECK(!was_cut(c[0].cli) && rumor_guard_cuts(g, GUARD_CUT_KEY_HELD) == 1);
    /* Time is an allowance for heartbeats: 10 s is 2560 bytes a connection. */
    send_read(c[2].cli, c[2].srv, 12 << 10); /* 0: 40, 2: 22, 3: 4 KiB + 1: 66 KiB + 1 */
    (void)rumor_guard_check(g, now + 10000);
    CHECK(rumor_guard_cuts(g, GUARD_CUT_KEY_HELD) == 1);
    /* k2's two hold 60 KiB each, each within the share, 120 KiB together: one goes. */
    send_read(c[4].cli, c[4].srv, 60 << 10);
    send_read(c[5].cli, c[5].srv, 60 << 10);
    (void)rumor_guard_check(g, now + 10000);
    CHECK(rumor_guard_cuts(g, GUARD_CUT_KEY_HELD) == 2);
    CHECK(!was_cut(c[0].cli) && !was_cut(c[2].cli) && rumor_guard_count(g) == 4);
    rumor_guard_destroy(&g);
    close_all(c, 6);
    /* The node's bound alone. */
    lim.share = 1 << 20;
    lim.node_held = 100 << 10;
    g = rumor_guard_new(&lim, SALT);
    for (int i = 0; i < 3; i++) {
        CHECK(connect_from(1, &c[i].srv, &c[i].cli));
        CHECK(rumor_guard_open(g, c[i].srv, NULL, now));
        CHECK(rumor_guard_delivered(g, c[i].srv, i == 0 ? k1 : k2, true, now) != 0);
    }
    send_read(c[0].cli, c[0].srv, 30 << 10);
    send_read(c[1].cli, c[1].srv, 50 << 10);
    send_read(c[2].cli, c[2].srv, 21 << 10);
    (void)rumor_guard_check(g, now);
    CHECK(was_cut(c[1].cli) && !was_cut(c[0].cli) && !was_cut(c[2].cli));
    CHECK(rumor_guard_cuts(g, GUARD_CUT_NODE_HELD) == 1 && rumor_guard_total_peak(g) == (101u << 10));
    close_all(c, 3);
    rumor_guard_destroy(&g);
}

/* The guard cuts a connection by its serial only while the descriptor is still that
 * connection: one closed and reused for another is never cut by mistake. */
static void test_cut_by_serial(void)
{
    rumor_guard_limits_t lim = limits();
    rumor_guard_t *g = rumor_guard_new(&lim, SALT);
    conn_t a, b;
    CHECK(connect_from(1, &a.srv, &a.cli));
    CHECK(rumor_guard_open(g, a.srv, NULL, 1));
    const uint64_t s1 = rumor_guard_serial(g, a.srv);
    CHECK(s1 != 0 && rumor_guard_serial(g, a.cli) == 0); /* the other end is not watched */
    CHECK(!rumor_guard_cut(g, a.srv, s1 + 1));           /* another connection's name */
    CHECK(!was_cut(a.cli));
    /* a closes without the guard hearing of it, and its number goes to a new connection */
    const int number = a.srv;
    close(a.srv);
    close(a.cli);
    CHECK(connect_from(1, &b.srv, &b.cli));
    if (b.srv != number) { /* (the lowest free number is a's, unless another took it: then move it there) */
        CHECK(dup2(b.srv, number) == number);
        close(b.srv);
        b.srv = number;
    }
    CHECK(!rumor_guard_cut(g, b.srv, s1)); /* the old name: the new connection stays up */
    CHECK(!was_cut(b.cli));
    CHECK(rumor_guard_open(g, b.srv, NULL, 2));
    const uint64_t s2 = rumor_guard_serial(g, b.srv);
    CHECK(s2 > s1);
    CHECK(rumor_guard_cut(g, b.srv, s2)); /* its own name: shut down, the far end sees the end */
    CHECK(was_cut(b.cli));
    CHECK(rumor_guard_serial(g, b.srv) == 0 && rumor_guard_count(g) == 0);
    close_all(&b, 1);
    rumor_guard_destroy(&g);
}

/* Sources (strangers' pools, knocks): an IPv4 address, or an IPv6 /64, under a keyed hash;
 * knocks from loopback are not limited. */
static void test_sources(void)
{
    uint8_t a[16], b[16];
    const uint8_t other_salt[GUARD_SALT_LEN] = {99};
    CHECK(rumor_admit_ip16_text("192.0.2.7", a) && rumor_admit_ip16_text("::ffff:192.0.2.7", b) && memcmp(a, b, 16) == 0);
    const uint64_t v4 = rumor_admit_source(a, SALT);
    CHECK(rumor_admit_ip16_text("192.0.2.8", b) && rumor_admit_source(b, SALT) != v4); /* each IPv4 address */
    CHECK(rumor_admit_source(a, other_salt) != v4);                                     /* keyed */
    CHECK(rumor_admit_ip16_text("2001:db8:1:2::1", a) && rumor_admit_ip16_text("2001:db8:1:2:ffff:1:2:3", b));
    CHECK(rumor_admit_source(a, SALT) == rumor_admit_source(b, SALT));                  /* one /64 */
    CHECK(rumor_admit_ip16_text("2001:db8:1:3::1", b) && rumor_admit_source(a, SALT) != rumor_admit_source(b, SALT));
    CHECK(!rumor_admit_ip16_text("not an address", a) && !rumor_admit_ip16_text("10.0.0.256", a));
    rumor_admit_from_t from;
    memset(&from, 0, sizeof from);
    struct sockaddr_in *sin = (struct sockaddr_in *)&from.addr;
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(0x7f000005u);
    from.addr_len = sizeof *sin;
    CHECK(rumor_admit_source_of(&from, SALT) == 0); /* loopback */
    sin->sin_addr.s_addr = htonl(0xc0000207u);
    CHECK(rumor_admit_ip16_text("192.0.2.7", a) && rumor_admit_source_of(&from, SALT) == rumor_admit_source(a, SALT));
}

int main(void)
{
    listener = socket(AF_INET, SOCK_STREAM, 0);
    listen_at = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof listen_at;
    if (listener < 0 || bind(listener, (struct sockaddr *)&listen_at, sizeof listen_at) != 0 ||
        listen(listener, 64) != 0 || getsockname(listener, (struct sockaddr *)&listen_at, &len) != 0) {
        fprintf(stderr, "no loopback listener: %s\n", strerror(errno));
        return 1;
    }
    test_strangers();
    test_stranger_limits();
    test_key_conns();
    test_shares();
    test_cut_by_serial();
    test_sources();
    close(listener);
    return check_done();
}
