/* node_seen.c - where peers see us from (node_impl.h; PROTOCOL.md "Reachability"): the IPs of
 * members' connections and of what their acks say of ours, the site our hellos name, and
 * whether peers can dial us at all. */
#include "node_impl.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* ---- where peers see us from (PROTOCOL.md "Reachability": sites) ---- */

/* The IP in b (AF_INET: 4 bytes, AF_INET6: 16) in inet_ntop's form, IPv4 mapped into IPv6
 * written as IPv4; false (out untouched) when it does not fit. */
static bool ip_form(int family, const uint8_t *b, char out[RUMOR_PROTO_SEEN_MAX + 1])
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char t[INET6_ADDRSTRLEN];
    if (family == AF_INET6 && memcmp(b, mapped, sizeof mapped) == 0) family = AF_INET, b += 12;
    if (!inet_ntop(family, b, t, sizeof t) || strlen(t) > RUMOR_PROTO_SEEN_MAX) return false;
    memcpy(out, t, strlen(t) + 1);
    return true;
}

/* ip (an IP literal) in ip_form's form; false (out untouched) when it is not one. */
bool node_ip_text(const char *ip, char out[RUMOR_PROTO_SEEN_MAX + 1])
{
    uint8_t b[16];
    if (inet_pton(AF_INET, ip, b) == 1) return ip_form(AF_INET, b, out);
    return inet_pton(AF_INET6, ip, b) == 1 && ip_form(AF_INET6, b, out);
}

/* A site's name in hellos: a 64-bit hash (FNV-1a) of the address and of the smallest key on
 * the node's own segment, top bit clear, never 0 (so it cannot be taken for the class of a
 * member nobody can dial, rumor_node_reach). The key tells apart two LANs behind one
 * carrier-grade NAT: they share the address, but not their members. */
static uint64_t site_of(const char *ip, const uint8_t lan[RUMOR_KEY_LEN])
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const char *s = "rumor site v2:"; *s; s++) h = (h ^ (uint8_t)*s) * UINT64_C(0x100000001b3);
    for (; *ip; ip++) h = (h ^ (uint8_t)*ip) * UINT64_C(0x100000001b3);
    for (int i = 0; i < RUMOR_KEY_LEN; i++) h = (h ^ lan[i]) * UINT64_C(0x100000001b3);
    return (h & ~(UINT64_C(1) << 63)) | 1;
}

/* Whether ip (node_ip_text's form) is not globally routable: private, shared (carrier-grade NAT),
 * loopback or link-local IPv4; unique-local, link-local or loopback IPv6. A node there is
 * likely behind NAT, and its LAN's members dialling it say nothing of how others see it. */
static bool ip_private(const char *ip)
{
    uint8_t b[16];
    if (inet_pton(AF_INET, ip, b) == 1)
        return b[0] == 10 || b[0] == 127 || (b[0] == 172 && (b[1] & 0xf0) == 16) || (b[0] == 192 && b[1] == 168) ||
               (b[0] == 100 && (b[1] & 0xc0) == 64) || (b[0] == 169 && b[1] == 254);
    if (inet_pton(AF_INET6, ip, b) != 1) return false;
    static const uint8_t loop[16] = {[15] = 1};
    return (b[0] & 0xfe) == 0xfc || (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || memcmp(b, loop, 16) == 0;
}

/* The IP of the connection the message being handled came in on (ip_form's form); false when
 * it came otherwise (over our dial, through a relay). */
static bool rx_ip(const rumor_node_t *n, char out[RUMOR_PROTO_SEEN_MAX + 1])
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (n->rx_fd < 0 || getpeername(n->rx_fd, (struct sockaddr *)&sa, &len) != 0) return false;
    if (sa.ss_family == AF_INET)
        return ip_form(AF_INET, (const uint8_t *)&((const struct sockaddr_in *)&sa)->sin_addr, out);
    return sa.ss_family == AF_INET6 && ip_form(AF_INET6, ((const struct sockaddr_in6 *)&sa)->sin6_addr.s6_addr, out);
}

/* The host of an address "tcp://HOST:PORT" (an IPv6 one without its brackets), cut to fit. */
void node_addr_host(const char *addr, char host[RUMOR_HOST_MAX + 3])
{
    const char *h = strncmp(addr, "tcp://", 6) == 0 ? addr + 6 : addr, *colon = strrchr(h, ':');
    const size_t hl = colon && colon > h ? (size_t)(colon - h) : 0;
    snprintf(host, RUMOR_HOST_MAX + 3, "%.*s", (int)(hl < RUMOR_HOST_MAX + 2 ? hl : RUMOR_HOST_MAX + 2), h);
    const size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') memmove(host, host + 1, n - 2), host[n - 2] = 0;
}

/* The IP of an address "tcp://IP:PORT" in ip_form's form; false when its host is no IP. */
static bool addr_ip(const char *addr, char out[RUMOR_PROTO_SEEN_MAX + 1])
{
    char host[RUMOR_HOST_MAX + 3];
    node_addr_host(addr, host);
    return node_ip_text(host, out);
}

/* A member's message on its own connection to us (a ping or its hello): where it came from.
 * A ping's source answers our next ack (`seen`); and a member whose connection comes from the
 * LAN IP it advertises reached us with no NAT between: it shares our segment (its key may
 * name our site, node_recount_seen). What the kernel says of a connection, no member can forge. */
void node_note_seen(rumor_node_t *n, conn_t *c, bool ping, uint64_t now)
{
    char ip[RUMOR_PROTO_SEEN_MAX + 1], adv[RUMOR_PROTO_SEEN_MAX + 1];
    if (!rx_ip(n, ip)) return;
    if (ping) {
        memcpy(c->seen, ip, sizeof ip);
        c->seen_fresh = true;
    }
    c->lan_ms = addr_ip(c->addr, adv) && ip_private(adv) && strcmp(ip, adv) == 0 ? now : 0;
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The address members see us at, from the acks of the members in our view: the one most of
 * them name that is not our advertised IP. A node whose advertised IP is private takes it when
 * any member names it (the members of its LAN name its own); a public node only when at least
 * two do, and more than name its own (one member cannot move it). A new one names our site in
 * every hello (members behind the same NAT share it: gossip graphs put them side by side); a
 * change of it means our address changed, and whether peers can dial us is found out anew.
 * The site also names our segment by its smallest key, ours or that of a member whose own
 * connection to us lately came from the LAN IP it advertises (node_note_seen): the members of a LAN
 * dial each other as they meet, so they find the same key from the start, and two LANs behind
 * one carrier-grade NAT find different ones. Once a period (housekeeping), so a member's
 * reports cannot make it work more. */
void node_recount_seen(rumor_node_t *n, uint64_t now)
{
    char was[RUMOR_PROTO_SEEN_MAX + 1];
    const char *self = n->self_ip, *rep[MAX_CONNS];
    const uint8_t *lan = rumor_secret_key_public(n->key);
    int k = 0, own = 0;
    const int nv = rumor_memb_view_count(n->memb);
    /* A member on our segment pings us at least once in its round of the view (membership
     * probes every member in turn): one not heard from there for four such rounds left it. */
    const uint64_t lan_fresh = 4 * (uint64_t)(nv + 1) * n->cfg.memb.period_ms;
    for (int i = 0; i < nv && k < (int)RUMOR_ARRAY_LEN(rep); i++) {
        const rumor_memb_member_t *e = rumor_memb_view_at(n->memb, i);
        const conn_t *c = e ? node_find_conn(n, e->key, false, now) : NULL;
        if (!c || !c->admitted) continue;
        if (c->lan_ms && now - c->lan_ms <= lan_fresh && memcmp(e->key, lan, RUMOR_KEY_LEN) < 0) lan = e->key;
        if (!c->seen_us[0]) continue;
        if (strcmp(c->seen_us, self) == 0) own++;
        else rep[k++] = c->seen_us;
    }
    qsort(rep, (size_t)k, sizeof *rep, str_cmp);
    const char *best = "";
    int best_k = 0;
    for (int i = 0, run = 1; i < k; i++, run++) {
        if (i + 1 < k && strcmp(rep[i], rep[i + 1]) == 0) continue;
        if (run > best_k) best = rep[i], best_k = run; /* (ties: the first in order) */
        run = 0;
    }
    if (!(best_k >= 1 && (ip_private(self) || (best_k >= 2 && best_k > own)))) best = "";
    const uint64_t site = best[0] ? site_of(best, lan) : 0;
    if (strcmp(best, n->seen_as) != 0) {
        memcpy(was, n->seen_as, sizeof was);
        snprintf(n->seen_as, sizeof n->seen_as, "%s", best);
        const bool log = ++n->seen_changes <= 10;
        if (was[0]) {
            if (log)
                rumor_log(RUMOR_LOG_INFO, "peers now see this node at %s (was %s): its address changed; finding out "
                          "again whether peers can dial it%s", best[0] ? best : self, was,
                          n->seen_changes == 10 ? " (further changes are only counted)" : "");
            n->last_pinged = 0;
            n->joined_at = now;
        } else if (log) {
            rumor_log(RUMOR_LOG_INFO, "peers see this node at %s, not at its address %s: it is behind NAT, and the "
                      "gossip graph puts it beside members it reaches directly", best, self);
        }
    } else if (site == n->site) {
        return; /* (else the same address, and who shares our segment changed) */
    }
    n->site = site;
    node_greet_all(n); /* (our hello names the site) */
}

/* An ack's word on where our pings came from: a member's may change once a period. */
void node_note_seen_us(rumor_node_t *n, conn_t *c, const char *seen, uint64_t now)
{
    char ip[RUMOR_PROTO_SEEN_MAX + 1];
    if (!node_ip_text(seen, ip) || strcmp(ip, c->seen_us) == 0) return;
    if (c->seen_us[0] && now - c->seen_us_ms < n->cfg.memb.period_ms) return;
    memcpy(c->seen_us, ip, sizeof ip);
    c->seen_us_ms = now;
}

/* Once in a swarm, peers probe us; if none has for a while, our advertised address is
 * probably not one they can dial (NAT, firewall, a private address): say so, stop offering to
 * relay, and tell every member in our hello (caps bits 2 and 4: gossip graphs keep members
 * that cannot be dialled apart). A peer that dials us later
 * proves the opposite. */
void node_check_reachable(rumor_node_t *n, uint64_t now)
{
    if (rumor_memb_view_count(n->memb) == 0) {
        n->joined_at = 0;
        return;
    }
    if (!n->joined_at) n->joined_at = now;
    /* Peers dial a member within a period of hearing of it; give them ten, at most 10 s. */
    uint64_t grace = 10 * (uint64_t)n->cfg.memb.period_ms;
    if (grace > 10000) grace = 10000;
    if (!n->warned_unreachable && !n->last_pinged && now - n->joined_at > grace) {
        n->warned_unreachable = true;
        rumor_log(RUMOR_LOG_WARN, "no peer has dialled this node at %s in %.0f s of membership: it cannot be "
                  "dialled (behind NAT or a firewall?), and works through its own connections to its peers; "
                  "give --advertise with an address they can dial, or open the port, to be reached directly",
                  n->self_addr, (double)grace / 1000.0);
        node_greet_all(n); /* (our hello says it now: caps bits 2 and 4) */
    }
    if (n->warned_unreachable && n->last_pinged) {
        n->warned_unreachable = false;
        rumor_log(RUMOR_LOG_INFO, "a peer dialled this node at %s: it is reachable", n->self_addr);
        node_greet_all(n);
    }
}
