/* guard.c - a bound on what one TCP connection can make libzmq hold (guard.h). */
#include "net/guard.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received (glibc's lacks it) */
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <stddef.h>
#include <sys/socket.h>

typedef struct {
    int fd;                 /* -1: free */
    uint64_t base;          /* bytes libzmq had read when the last whole message was taken */
    uint64_t since_ms;      /* when that was */
    struct sockaddr_storage ends[2]; /* both ends when opened: a descriptor that libzmq closed
                                        and the kernel gave to another socket is told apart */
    socklen_t ends_len[2];
    uint64_t serial;        /* which connection this is (rumor_guard_serial) */
} watch_t;

struct rumor_guard {
    uint64_t limit, peak, serials;
    int count;
    int top; /* entries at or past it are all free: scans stop there (every message is looked up) */
    watch_t w[GUARD_MAX];
};

/* Bytes libzmq has read from fd: received by TCP, less what still waits in the socket. */
static bool bytes_read(int fd, uint64_t *out)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return false;
    if (len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received) return false;
    int queued = 0;
    if (ioctl(fd, SIOCINQ, &queued) != 0 || queued < 0) queued = 0;
    *out = ti.tcpi_bytes_received > (uint64_t)queued ? ti.tcpi_bytes_received - (uint64_t)queued : 0;
    return true;
}

static watch_t *find(rumor_guard_t *g, int fd)
{
    for (int i = 0; i < g->top; i++)
        if (g->w[i].fd == fd) return &g->w[i];
    return fd < 0 && g->top < GUARD_MAX ? &g->w[g->top++] : NULL; /* a free entry: extend */
}

static void ends(int fd, struct sockaddr_storage e[2], socklen_t len[2])
{
    memset(e, 0, 2 * sizeof e[0]);
    len[0] = len[1] = sizeof e[0];
    if (getsockname(fd, (struct sockaddr *)&e[0], &len[0]) != 0) len[0] = 0;
    if (getpeername(fd, (struct sockaddr *)&e[1], &len[1]) != 0) len[1] = 0;
}

/* Whether fd is still the connection w was opened for (a socket closed without its event
 * reaching us, such as a DEALER closed with its monitor, leaves a stale entry). */
static bool same_connection(const watch_t *w)
{
    struct sockaddr_storage e[2];
    socklen_t len[2];
    ends(w->fd, e, len);
    return len[1] != 0 && len[0] == w->ends_len[0] && len[1] == w->ends_len[1] &&
           memcmp(&e[0], &w->ends[0], len[0]) == 0 && memcmp(&e[1], &w->ends[1], len[1]) == 0;
}

/* Shut the connection down, unless the descriptor now belongs to another connection. */
static void cut(watch_t *w)
{
    if (same_connection(w)) (void)shutdown(w->fd, SHUT_RDWR);
    w->fd = -1;
}

rumor_guard_t *rumor_guard_new(uint64_t limit)
{
    rumor_guard_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->limit = limit;
    for (int i = 0; i < GUARD_MAX; i++) g->w[i].fd = -1;
    return g;
}

void rumor_guard_destroy(rumor_guard_t **self_p)
{
    if (!self_p || !*self_p) return;
    free(*self_p);
    *self_p = NULL;
}

bool rumor_guard_open(rumor_guard_t *g, int fd, uint64_t now_ms)
{
    if (fd < 0) return true;
    watch_t *w = find(g, fd); /* a descriptor reused before its close event was read */
    if (!w) w = find(g, -1);
    watch_t tmp = {.fd = fd};
    if (!w) w = &tmp;
    else if (w->fd < 0) g->count++;
    w->fd = fd;
    ends(fd, w->ends, w->ends_len);
    w->base = 0;
    (void)bytes_read(fd, &w->base);
    w->since_ms = now_ms;
    w->serial = ++g->serials;
    if (w == &tmp) {
        cut(w); /* the table is full: no connection beyond it */
        return false;
    }
    return true;
}

void rumor_guard_close(rumor_guard_t *g, int fd)
{
    watch_t *w = fd >= 0 ? find(g, fd) : NULL;
    if (!w) return;
    w->fd = -1;
    g->count--;
}

uint64_t rumor_guard_delivered(rumor_guard_t *g, int fd, uint64_t now_ms)
{
    watch_t *w = fd >= 0 ? find(g, fd) : NULL;
    uint64_t got;
    if (!w) return 0;
    if (bytes_read(fd, &got)) {
        if (got > w->base) w->base = got;
        w->since_ms = now_ms;
    }
    return w->serial;
}

int rumor_guard_check(rumor_guard_t *g, uint64_t now_ms)
{
    int cuts = 0;
    for (int i = 0; i < g->top && g->count > 0; i++) {
        watch_t *w = &g->w[i];
        uint64_t got;
        if (w->fd < 0) continue;
        if (!same_connection(w) || !bytes_read(w->fd, &got)) {
            w->fd = -1; /* gone, and its close event lost */
            g->count--;
            continue;
        }
        const uint64_t held = got > w->base ? got - w->base : 0;
        uint64_t idle = (now_ms > w->since_ms ? now_ms - w->since_ms : 0) * GUARD_IDLE_RATE / 1000;
        if (idle > GUARD_IDLE_MAX) idle = GUARD_IDLE_MAX;
        if (held > g->peak) g->peak = held;
        if (held > g->limit + idle) {
            cut(w);
            g->count--;
            cuts++;
        }
    }
    return cuts;
}

uint64_t rumor_guard_serial(const rumor_guard_t *g, int fd)
{
    for (int i = 0; fd >= 0 && i < g->top; i++)
        if (g->w[i].fd == fd) return g->w[i].serial;
    return 0;
}

bool rumor_guard_cut(rumor_guard_t *g, int fd, uint64_t serial)
{
    for (int i = 0; fd >= 0 && serial && i < g->top; i++) {
        watch_t *w = &g->w[i];
        if (w->fd != fd || w->serial != serial) continue;
        const bool same = same_connection(w);
        cut(w);
        g->count--;
        return same;
    }
    return false;
}

int rumor_guard_count(const rumor_guard_t *g) { return g->count; }

uint64_t rumor_guard_peak(const rumor_guard_t *g) { return g->peak; }
