/* guard.c - a bound on what connections can make libzmq hold, and on who holds one (guard.h). */
#include "guard.h"

#include "admit.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received (glibc's lacks it) */
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <stddef.h>
#include <sys/socket.h>

enum { W_STRANGER, W_MEMBER };

typedef struct {
    int kind;               /* W_STRANGER, W_MEMBER */
    bool inbound;           /* accepted by our ROUTER (else: our DEALER's) */
    bool delivered;         /* a whole message came from it */
    int due;                /* a stranger past its limits: why (0: not; else 1 + the cut) */
    int group;              /* members: its key's entry in groups[] */
    uint64_t base;          /* bytes libzmq had read when the last whole message was taken */
    uint64_t since_ms;      /* when that was */
    uint64_t opened_ms;
    uint64_t first;         /* bytes libzmq had read when it opened */
    uint64_t read;          /* ... at the last look */
    uint64_t rx_ms;         /* when that count last grew (opened_ms: never) */
    uint64_t held;          /* what it held at the last look, less its allowance */
    uint64_t source;        /* its address, hashed (strangers' pools) */
    uint8_t ip[16];         /* its address (claims) */
    struct sockaddr_storage ends[2]; /* both ends when opened: a descriptor that libzmq closed
                                        and the kernel gave to another socket is told apart */
    socklen_t ends_len[2];
    uint64_t serial;        /* which connection this is (rumor_guard_serial) */
} watch_t;

/* The connections of one key. */
typedef struct {
    uint8_t key[GUARD_KEY_LEN];
    int conns;              /* 0: free */
    uint64_t held;          /* at the last check */
} group_t;

/* A ZAP admission not yet claimed by a connection. */
typedef struct {
    uint8_t ip[16];
    uint8_t key[GUARD_KEY_LEN];
    uint64_t ms;            /* 0: free, or claimed */
} approval_t;

struct rumor_guard {
    rumor_guard_limits_t lim;
    uint8_t salt[GUARD_SALT_LEN];
    uint64_t peak, total_peak, serials;
    uint64_t cuts[GUARD_CUT_COUNT];
    int count, strangers;
    int top; /* entries at or past it are all free: scans stop there (every message is looked up) */
    int fds[GUARD_MAX]; /* -1: free; apart from w[] so that a lookup reads 16 KiB, not 1.5 MiB */
    watch_t w[GUARD_MAX];
    group_t groups[GUARD_MAX];
    int n_groups; /* groups at or past it are all free */
    approval_t approvals[GUARD_APPROVALS];
    int next_approval;
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

static int find(const rumor_guard_t *g, int fd)
{
    for (int i = 0; fd >= 0 && i < g->top; i++)
        if (g->fds[i] == fd) return i;
    return -1;
}

static int find_free(rumor_guard_t *g)
{
    for (int i = 0; i < g->top; i++)
        if (g->fds[i] < 0) return i;
    return g->top < GUARD_MAX ? g->top++ : -1;
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
static bool same_connection(const watch_t *w, int fd)
{
    struct sockaddr_storage e[2];
    socklen_t len[2];
    ends(fd, e, len);
    return len[1] != 0 && len[0] == w->ends_len[0] && len[1] == w->ends_len[1] &&
           memcmp(&e[0], &w->ends[0], len[0]) == 0 && memcmp(&e[1], &w->ends[1], len[1]) == 0;
}

/* A member's connection that came in and never delivered a message: it holds a claimed
 * admission, and may be a stranger that claimed another's (guard.h). */
static bool provisional(const watch_t *w) { return w->inbound && !w->delivered; }

/* ---- keys ---- */

static int group_of(rumor_guard_t *g, const uint8_t key[GUARD_KEY_LEN])
{
    int free_at = -1;
    for (int i = 0; i < g->n_groups; i++) {
        if (g->groups[i].conns == 0) {
            if (free_at < 0) free_at = i;
        } else if (memcmp(g->groups[i].key, key, GUARD_KEY_LEN) == 0) {
            return i;
        }
    }
    if (free_at < 0) free_at = g->n_groups++; /* (at most one group a connection: never past GUARD_MAX) */
    memcpy(g->groups[free_at].key, key, GUARD_KEY_LEN);
    g->groups[free_at].held = 0;
    return free_at;
}

static void leave_group(rumor_guard_t *g, watch_t *w)
{
    if (w->kind != W_MEMBER) return;
    group_t *k = &g->groups[w->group];
    if (--k->conns == 0)
        while (g->n_groups > 0 && g->groups[g->n_groups - 1].conns == 0) g->n_groups--;
}

/* Forget entry i (its connection is gone, or cut). */
static void forget(rumor_guard_t *g, int i)
{
    watch_t *w = &g->w[i];
    if (g->fds[i] < 0) return;
    leave_group(g, w);
    if (w->kind == W_STRANGER) g->strangers--;
    g->fds[i] = -1;
    g->count--;
    while (g->top > 0 && g->fds[g->top - 1] < 0) g->top--;
}

/* Shut entry i's connection down (unless the descriptor now belongs to another) and forget it. */
static void cut_at(rumor_guard_t *g, int i, rumor_guard_cut_t why)
{
    if (same_connection(&g->w[i], g->fds[i])) (void)shutdown(g->fds[i], SHUT_RDWR);
    forget(g, i);
    g->cuts[why]++;
}

/* Whether a should go before b when one of a key's connections must: provisional ones first,
 * then inbound ones (our own dial last), then the one whose last byte is oldest. */
static bool goes_first(const watch_t *a, const watch_t *b)
{
    if (provisional(a) != provisional(b)) return provisional(a);
    if (a->inbound != b->inbound) return a->inbound;
    return a->rx_ms < b->rx_ms;
}

/* Entry i joins key's connections; the key's idlest other one goes when it has too many. */
static void join_group(rumor_guard_t *g, int i, const uint8_t key[GUARD_KEY_LEN])
{
    watch_t *w = &g->w[i];
    const int k = group_of(g, key);
    if (w->kind == W_MEMBER && w->group == k) return;
    leave_group(g, w);
    if (w->kind == W_STRANGER) g->strangers--;
    w->kind = W_MEMBER;
    w->group = k;
    g->groups[k].conns++;
    while (g->groups[k].conns > g->lim.key_conns) {
        int victim = -1;
        for (int j = 0; j < g->top; j++) {
            const watch_t *v = &g->w[j];
            if (j == i || g->fds[j] < 0 || v->kind != W_MEMBER || v->group != k) continue;
            if (victim < 0 || goes_first(v, &g->w[victim])) victim = j;
        }
        if (victim < 0) break;
        cut_at(g, victim, GUARD_CUT_KEY_CONNS);
    }
}

/* ---- admissions ---- */

void rumor_guard_approved(rumor_guard_t *g, const uint8_t key[GUARD_KEY_LEN], const char *ip, uint64_t now)
{
    uint8_t ip16[16];
    if (!ip || !rumor_admit_ip16_text(ip, ip16)) return;
    approval_t *a = &g->approvals[g->next_approval];
    g->next_approval = (g->next_approval + 1) % GUARD_APPROVALS;
    memcpy(a->ip, ip16, 16);
    memcpy(a->key, key, GUARD_KEY_LEN);
    a->ms = now ? now : 1;
}

/* The oldest unclaimed admission from ip (of key, when not NULL) made within 2 handshake_ms:
 * its index, or -1. */
static int approval_for(const rumor_guard_t *g, const uint8_t ip[16], const uint8_t *key, uint64_t now)
{
    int best = -1;
    for (int i = 0; i < GUARD_APPROVALS; i++) {
        const approval_t *a = &g->approvals[i];
        if (!a->ms || now - a->ms > 2 * g->lim.handshake_ms || memcmp(a->ip, ip, 16) != 0) continue;
        if (key && memcmp(a->key, key, GUARD_KEY_LEN) != 0) continue;
        if (best < 0 || a->ms < g->approvals[best].ms) best = i;
    }
    return best;
}

/* ---- strangers ---- */

/* Whether a is idler than b: it never sent a byte and b did, else its last byte is older. */
static bool idler(const watch_t *a, const watch_t *b)
{
    const bool a_sent = a->read > a->first, b_sent = b->read > b->first;
    return a_sent != b_sent ? !a_sent : a->rx_ms < b->rx_ms;
}

/* Room for the stranger at entry i: the idlest of a full pool (its source's, or all) is cut. */
static void make_room(rumor_guard_t *g, int i)
{
    const uint64_t source = g->w[i].source;
    int same = 0, all = 0, idlest_same = -1, idlest = -1;
    for (int j = 0; j < g->top; j++) {
        const watch_t *v = &g->w[j];
        if (j == i || g->fds[j] < 0 || v->kind != W_STRANGER) continue;
        all++;
        if (idlest < 0 || idler(v, &g->w[idlest])) idlest = j;
        if (v->source != source) continue;
        same++;
        if (idlest_same < 0 || idler(v, &g->w[idlest_same])) idlest_same = j;
    }
    if (same >= g->lim.strangers_per_source && idlest_same >= 0) cut_at(g, idlest_same, GUARD_CUT_EVICTED);
    else if (all >= g->lim.strangers && idlest >= 0) cut_at(g, idlest, GUARD_CUT_EVICTED);
}

/* ---- the table ---- */

rumor_guard_t *rumor_guard_new(const rumor_guard_limits_t *lim, const uint8_t salt[GUARD_SALT_LEN])
{
    rumor_guard_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->lim = *lim;
    if (g->lim.key_conns < 1) g->lim.key_conns = 1;
    memcpy(g->salt, salt, GUARD_SALT_LEN);
    for (int i = 0; i < GUARD_MAX; i++) g->fds[i] = -1;
    return g;
}

void rumor_guard_destroy(rumor_guard_t **self_p)
{
    if (!self_p || !*self_p) return;
    free(*self_p);
    *self_p = NULL;
}

/* A new entry, a stranger, for fd (whatever was registered under fd before is gone: a
 * descriptor reused before its close event was read); -1 when the table is full. */
static int add(rumor_guard_t *g, int fd, bool inbound, uint64_t now)
{
    int i = find(g, fd);
    if (i >= 0) forget(g, i);
    if ((i = find_free(g)) < 0) return -1;
    watch_t *w = &g->w[i];
    memset(w, 0, sizeof *w);
    g->fds[i] = fd;
    g->count++;
    w->kind = W_STRANGER;
    g->strangers++;
    w->inbound = inbound;
    ends(fd, w->ends, w->ends_len);
    (void)bytes_read(fd, &w->base);
    w->first = w->read = w->base;
    w->since_ms = w->opened_ms = w->rx_ms = now;
    w->serial = ++g->serials;
    if (!rumor_admit_ip16_addr((const struct sockaddr *)&w->ends[1], w->ends_len[1], w->ip)) memset(w->ip, 0, 16);
    w->source = rumor_admit_source(w->ip, g->salt);
    return i;
}

bool rumor_guard_open(rumor_guard_t *g, int fd, const uint8_t *key, uint64_t now)
{
    if (fd < 0) return true;
    const int at = find(g, fd);
    /* The event of a connection already known (its first message came before its event). */
    if (at >= 0 && same_connection(&g->w[at], fd)) return true;
    const int i = add(g, fd, key == NULL, now);
    if (i < 0) {
        (void)shutdown(fd, SHUT_RDWR); /* the table is full: no connection beyond it */
        g->cuts[GUARD_CUT_TABLE]++;
        return false;
    }
    if (key) join_group(g, i, key);
    else make_room(g, i);
    return true;
}

void rumor_guard_close(rumor_guard_t *g, int fd)
{
    const int i = find(g, fd);
    if (i >= 0) forget(g, i);
}

uint64_t rumor_guard_delivered(rumor_guard_t *g, int fd, const uint8_t key[GUARD_KEY_LEN], bool inbound,
                               uint64_t now)
{
    if (fd < 0) return 0;
    int i = find(g, fd);
    if (i < 0 && (i = add(g, fd, inbound, now)) < 0) return 0; /* its opening event is still to come */
    watch_t *w = &g->w[i];
    uint64_t got;
    if (bytes_read(fd, &got)) {
        if (got > w->base) w->base = got;
        if (got > w->read) {
            w->read = got;
            w->rx_ms = now;
        }
        w->since_ms = now;
    }
    w->delivered = true;
    if (w->kind == W_MEMBER && memcmp(g->groups[w->group].key, key, GUARD_KEY_LEN) == 0) return w->serial;
    if (w->kind == W_STRANGER) {
        const int a = approval_for(g, w->ip, key, now);
        if (a >= 0) g->approvals[a].ms = 0; /* its own admission: claimed */
    }
    join_group(g, i, key);
    return w->serial;
}

uint64_t rumor_guard_serial(const rumor_guard_t *g, int fd)
{
    const int i = find(g, fd);
    return i >= 0 ? g->w[i].serial : 0;
}

bool rumor_guard_cut(rumor_guard_t *g, int fd, uint64_t serial)
{
    const int i = find(g, fd);
    if (i < 0 || !serial || g->w[i].serial != serial) return false;
    const bool same = same_connection(&g->w[i], fd);
    if (same) (void)shutdown(fd, SHUT_RDWR);
    forget(g, i);
    return same;
}

/* ---- the check ---- */

/* Entry i's counts, read again; false when its connection is gone (then forgotten). */
static bool look(rumor_guard_t *g, int i, uint64_t now)
{
    watch_t *w = &g->w[i];
    uint64_t got;
    if (!same_connection(w, g->fds[i]) || !bytes_read(g->fds[i], &got)) {
        forget(g, i); /* gone, and its close event lost */
        return false;
    }
    if (got > w->read) {
        w->read = got;
        w->rx_ms = now;
    }
    const uint64_t held = got > w->base ? got - w->base : 0;
    uint64_t idle = (now > w->since_ms ? now - w->since_ms : 0) * GUARD_IDLE_RATE / 1000;
    if (idle > GUARD_IDLE_MAX) idle = GUARD_IDLE_MAX;
    w->held = held > idle ? held - idle : 0;
    w->due = 0;
    if (w->kind == W_STRANGER) {
        if (w->read - w->first > g->lim.stranger_bytes) w->due = 1 + GUARD_CUT_STRANGER_BYTES;
        else if (now - w->opened_ms > g->lim.handshake_ms) w->due = 1 + GUARD_CUT_LATE;
    }
    return true;
}

/* A stranger past its bytes or its time: a member if an admission from its address waits to
 * be claimed (and it sent at least a handshake's bytes), else cut. */
static void stranger_due(rumor_guard_t *g, int i, uint64_t now)
{
    watch_t *w = &g->w[i];
    const int a = w->read - w->first >= GUARD_CLAIM_MIN ? approval_for(g, w->ip, NULL, now) : -1;
    if (a < 0) {
        cut_at(g, i, (rumor_guard_cut_t)(w->due - 1));
        return;
    }
    g->approvals[a].ms = 0;
    join_group(g, i, g->approvals[a].key);
}

/* The entry holding most, among the connections of group (all, when group < 0), provisional
 * ones first when provisional_first; -1 when none holds anything. */
static int largest(const rumor_guard_t *g, int group, bool provisional_first)
{
    int best = -1;
    for (int j = 0; j < g->top; j++) {
        const watch_t *v = &g->w[j];
        if (g->fds[j] < 0 || v->held == 0 || (group >= 0 && (v->kind != W_MEMBER || v->group != group))) continue;
        if (best < 0) {
            best = j;
            continue;
        }
        const watch_t *b = &g->w[best];
        if ((provisional_first && provisional(v) != provisional(b)) ? provisional(v) : v->held > b->held) best = j;
    }
    return best;
}

int rumor_guard_check(rumor_guard_t *g, uint64_t now)
{
    uint64_t before = 0;
    for (int i = 0; i < GUARD_CUT_COUNT; i++) before += g->cuts[i];
    for (int i = 0; i < g->top && g->count > 0; i++)
        if (g->fds[i] >= 0) (void)look(g, i, now);
    for (int i = 0; i < g->top; i++)
        if (g->fds[i] >= 0 && g->w[i].kind == W_STRANGER && g->w[i].due) stranger_due(g, i, now);
    /* What each key's connections hold, and all of them. */
    uint64_t total = 0;
    for (int k = 0; k < g->n_groups; k++) g->groups[k].held = 0;
    for (int i = 0; i < g->top; i++) {
        if (g->fds[i] < 0) continue;
        total += g->w[i].held;
        if (g->w[i].kind == W_MEMBER) g->groups[g->w[i].group].held += g->w[i].held;
    }
    if (total > g->total_peak) g->total_peak = total;
    for (int k = 0; k < g->n_groups; k++) {
        group_t *grp = &g->groups[k];
        if (grp->held > g->peak) g->peak = grp->held;
        while (grp->conns > 0 && grp->held > g->lim.share) {
            const int j = largest(g, k, true);
            if (j < 0) break;
            grp->held -= g->w[j].held;
            total -= g->w[j].held;
            cut_at(g, j, GUARD_CUT_KEY_HELD);
        }
    }
    while (total > g->lim.node_held) {
        const int j = largest(g, -1, false);
        if (j < 0) break;
        total -= g->w[j].held;
        cut_at(g, j, GUARD_CUT_NODE_HELD);
    }
    uint64_t after = 0;
    for (int i = 0; i < GUARD_CUT_COUNT; i++) after += g->cuts[i];
    return (int)(after - before);
}

int rumor_guard_count(const rumor_guard_t *g) { return g->count; }

int rumor_guard_strangers(const rumor_guard_t *g) { return g->strangers; }

uint64_t rumor_guard_peak(const rumor_guard_t *g) { return g->peak; }

uint64_t rumor_guard_total_peak(const rumor_guard_t *g) { return g->total_peak; }

uint64_t rumor_guard_cuts(const rumor_guard_t *g, rumor_guard_cut_t why)
{
    return why < GUARD_CUT_COUNT ? g->cuts[why] : 0;
}

const char *rumor_guard_cut_name(rumor_guard_cut_t why)
{
    switch (why) {
    case GUARD_CUT_TABLE: return "too-many-connections";
    case GUARD_CUT_EVICTED: return "stranger-evicted";
    case GUARD_CUT_LATE: return "handshake-late";
    case GUARD_CUT_STRANGER_BYTES: return "stranger-bytes";
    case GUARD_CUT_KEY_CONNS: return "member-connections";
    case GUARD_CUT_KEY_HELD: return "held-too-much";
    case GUARD_CUT_NODE_HELD: return "node-held-too-much";
    case GUARD_CUT_COUNT: break;
    }
    return "other";
}
