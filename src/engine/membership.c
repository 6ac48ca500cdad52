/* membership.c - SWIM failure detection over a bounded, gossiped view. See membership.h. */
#include "membership_impl.h"

#include <stdlib.h>

const cred_t memb_no_cred;

const char *rumor_memb_state_name(rumor_memb_state_t s)
{
    switch (s) {
    case RUMOR_MEMB_ALIVE: return "alive";
    case RUMOR_MEMB_SUSPECT: return "suspect";
    case RUMOR_MEMB_DEAD: return "dead";
    case RUMOR_MEMB_LEFT: return "left";
    }
    return "unknown";
}

/* ---- outbox ---- */

/* The outbox in a ring of cap (the same actions in order); false when out of memory. */
static bool resize_outbox(rumor_memb_t *m, int cap)
{
    pending_t *o = malloc((size_t)cap * sizeof *o);
    if (!o) return false;
    for (int i = 0; i < m->out_count; i++) o[i] = m->outbox[(m->out_head + i) % m->out_cap];
    free(m->outbox);
    m->outbox = o;
    m->out_cap = cap;
    m->out_head = 0;
    return true;
}

static pending_t *push(rumor_memb_t *m, rumor_memb_act_kind_t kind)
{
    if (m->out_count == m->out_cap &&
        (m->out_cap >= OUTBOX_CAP || !resize_outbox(m, m->out_cap * 2 < OUTBOX_CAP ? m->out_cap * 2 : OUTBOX_CAP))) {
        /* Full: the driver is not draining. Drop the oldest send, never a view change. */
        int victim = -1;
        for (int i = 0; i < m->out_count; i++) {
            int at = (m->out_head + i) % m->out_cap;
            if (m->outbox[at].kind == RUMOR_MEMB_ACT_SEND) {
                victim = i;
                break;
            }
        }
        if (victim < 0) return NULL; /* cannot happen: view changes are bounded by the view */
        for (int i = victim; i > 0; i--)
            m->outbox[(m->out_head + i) % m->out_cap] = m->outbox[(m->out_head + i - 1) % m->out_cap];
        m->out_head = (m->out_head + 1) % m->out_cap;
        m->out_count--;
        m->stats.dropped_actions++;
    }
    pending_t *p = &m->outbox[(m->out_head + m->out_count++) % m->out_cap];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    return p;
}

pending_t *memb_send_to(rumor_memb_t *m, const uint8_t *key, const char *addr, rumor_memb_kind_t kind)
{
    pending_t *p = push(m, RUMOR_MEMB_ACT_SEND);
    if (!p) return NULL;
    memcpy(p->key, key, RUMOR_KEY_LEN);
    copy_addr(p->addr, addr);
    p->msg_kind = kind;
    return p;
}

void memb_view_event(rumor_memb_t *m, rumor_memb_act_kind_t kind, const rumor_memb_member_t *e,
                       rumor_memb_state_t state)
{
    pending_t *p = push(m, kind);
    if (!p) return;
    memcpy(p->key, e->key, RUMOR_KEY_LEN);
    copy_addr(p->addr, e->addr);
    p->state = state;
}

/* ---- dissemination queue ---- */

/* Strict mode passes on nothing without a certificate: an update that lacks one takes the
 * certificate we hold for the member, or is not queued at all. */
void memb_disseminate(rumor_memb_t *m, const rumor_memb_update_t *u)
{
    const rumor_memb_update_t *src = u;
    rumor_memb_update_t with;
    if (u->cert_len == 0) {
        const int v = find_view(m, u->key), p = v < 0 ? find_passive(m, u->key) : -1;
        if (v >= 0 && cred_of(&m->view[v])->cert_len) {
            with = *u;
            set_cert(with.cert, &with.cert_len, cred_of(&m->view[v])->cert, cred_of(&m->view[v])->cert_len);
            src = &with;
        } else if (p >= 0 && m->passive[p].cert_len) {
            with = *u;
            set_cert(with.cert, &with.cert_len, m->passive[p].cert, m->passive[p].cert_len);
            src = &with;
        } else if (m->cfg.strict) {
            return;
        }
    }
    u = src;
    if (m->cfg.strict && !u->proven && !same_key(u->key, m->self_key)) return; /* (nothing unsigned goes on) */
    for (int i = 0; i < m->n_dq; i++)
        if (same_key(m->dq[i].u.key, u->key)) {
            m->dq[i].u = *u;
            m->dq[i].sent = 0;
            return;
        }
    int at = m->n_dq;
    if (m->n_dq == m->dq_cap) {
        /* Replace the most-spread update: it has done most of its work. */
        at = 0;
        for (int i = 1; i < m->n_dq; i++)
            if (m->dq[i].sent > m->dq[at].sent) at = i;
    } else {
        m->n_dq++;
    }
    m->dq[at].u = *u;
    m->dq[at].sent = 0;
}

static int retransmit_limit(const rumor_memb_t *m)
{
    int lg = 0;
    for (int n = m->n_view + 1; n > 0; n >>= 1) lg++;
    return m->cfg.retransmit_mult * lg;
}

/* Fill up to max_piggyback least-sent updates; retire those sent often enough. */
static int take_piggyback(rumor_memb_t *m, rumor_memb_update_t *out)
{
    int n = 0, limit = retransmit_limit(m);
    while (n < m->cfg.max_piggyback) {
        int best = -1;
        for (int i = 0; i < m->n_dq; i++) {
            bool taken = false;
            for (int j = 0; j < n && !taken; j++) taken = same_key(out[j].key, m->dq[i].u.key);
            if (!taken && (best < 0 || m->dq[i].sent < m->dq[best].sent)) best = i;
        }
        if (best < 0) break;
        out[n++] = m->dq[best].u;
        m->dq[best].sent++;
    }
    for (int i = 0; i < m->n_dq;)
        if (m->dq[i].sent >= limit)
            m->dq[i] = m->dq[--m->n_dq];
        else
            i++;
    return n;
}

void memb_self_update(const rumor_memb_t *m, rumor_memb_update_t *u)
{
    memset(u, 0, sizeof *u);
    memcpy(u->key, m->self_key, RUMOR_KEY_LEN);
    copy_addr(u->addr, m->self_addr);
    u->inc = m->inc;
    u->state = RUMOR_MEMB_ALIVE;
    u->boot = m->self_boot;
    u->undialable = m->self_undialable;
    set_cert(u->cert, &u->cert_len, m->self_cert, m->self_cert_len);
    u->proven = m->self_proven;
    memcpy(u->proof, m->self_proof, RUMOR_MEMB_PROOF_LEN);
}

void memb_entry_update(const entry_t *e, rumor_memb_state_t st, rumor_memb_update_t *u)
{
    memset(u, 0, sizeof *u);
    memcpy(u->key, e->m.key, RUMOR_KEY_LEN);
    copy_addr(u->addr, e->m.addr);
    u->inc = e->m.inc;
    u->state = st;
    u->boot = e->m.boot;
    u->undialable = e->m.undialable;
    const cred_t *c = cred_of(e);
    set_cert(u->cert, &u->cert_len, c->cert, c->cert_len);
    u->proven = c->proven;
    memcpy(u->proof, c->proof, RUMOR_MEMB_PROOF_LEN);
}

/* ---- the view ---- */

void memb_add_tomb(rumor_memb_t *m, const uint8_t *key, uint32_t inc, rumor_memb_state_t st,
                     uint64_t now)
{
    int at = find_tomb(m, key);
    if (at < 0) {
        if (m->n_tombs < m->tomb_cap) {
            at = m->n_tombs++;
        } else {
            at = m->tomb_next; /* forget the oldest */
            m->tomb_next = (m->tomb_next + 1) % m->tomb_cap;
        }
    }
    memcpy(m->tombs[at].key, key, RUMOR_KEY_LEN);
    m->tombs[at].inc = inc;
    m->tombs[at].state = st;
    m->tombs[at].since = now;
    m->tombs[at].hold = m->tomb_ttl;
}

void memb_remove_tomb(rumor_memb_t *m, int t)
{
    m->tombs[t] = m->tombs[--m->n_tombs];
    if (m->tomb_next > m->n_tombs) m->tomb_next = 0;
}

/* Into the reservoir (u's key, address, incarnation, boot id and certificate, as alive). */
void memb_passive_add(rumor_memb_t *m, const rumor_memb_update_t *u)
{
    if (!u->addr[0] || m->cfg.passive_size == 0) return;
    int at = find_passive(m, u->key);
    if (at < 0) {
        if (m->n_passive < m->cfg.passive_size)
            at = m->n_passive++;
        else
            at = (int)rumor_rng_below(&m->rng, (uint64_t)m->n_passive);
        m->invited[at] = 0;
        m->tries[at] = 0;
    }
    m->passive[at] = *u;
    m->passive[at].state = RUMOR_MEMB_ALIVE;
}

void memb_passive_remove(rumor_memb_t *m, int i)
{
    m->n_passive--;
    m->passive[i] = m->passive[m->n_passive];
    m->invited[i] = m->invited[m->n_passive];
    m->tries[i] = m->tries[m->n_passive];
}

/* Say hello to reservoir member i, at most once a period: it enters the view when it
 * answers itself (the driver passes on only messages from peers whose certificate it
 * checked, and gossip about a key proves nothing of the kind). Strict mode budgets these
 * dials (membership.h): one member never dialled per period, a back-off per member, and one
 * that never answers is forgotten. */
void memb_invite(rumor_memb_t *m, int i, uint64_t now)
{
    if (!m->cfg.strict) {
        if (m->invited[i] && now < m->invited[i] + m->cfg.period_ms) return;
    } else if (m->tries[i] == 0) {
        /* A token bucket (GCRA): RUMOR_MEMB_DIAL_BURST at once, then one a period. */
        const uint64_t T = m->cfg.period_ms;
        if (m->dial_tat > now + (RUMOR_MEMB_DIAL_BURST - 1) * T) return;
        m->dial_tat = (m->dial_tat > now ? m->dial_tat : now) + T;
    } else {
        const int shift = m->tries[i] - 1;
        uint64_t gap = (uint64_t)m->cfg.period_ms << shift;
        if (gap > (uint64_t)m->cfg.period_ms * RUMOR_MEMB_BACKOFF_MAX) gap = (uint64_t)m->cfg.period_ms * RUMOR_MEMB_BACKOFF_MAX;
        if (now < m->invited[i] + gap) return;
        if (m->tries[i] >= RUMOR_MEMB_MAX_INVITES) {
            /* Never answered: forgotten, and held dead at its incarnation for a while so
             * the same claim does not bring it back at once. */
            pending_t *d = push(m, RUMOR_MEMB_ACT_DOWN);
            if (d) {
                memcpy(d->key, m->passive[i].key, RUMOR_KEY_LEN);
                copy_addr(d->addr, m->passive[i].addr);
                d->state = RUMOR_MEMB_DEAD;
            }
            memb_add_tomb(m, m->passive[i].key, m->passive[i].inc, RUMOR_MEMB_DEAD, now);
            const int t = find_tomb(m, m->passive[i].key);
            if (t >= 0 && m->tombs[t].hold < FORGET_HOLD * (uint64_t)m->cfg.period_ms)
                m->tombs[t].hold = FORGET_HOLD * (uint64_t)m->cfg.period_ms;
            memb_passive_remove(m, i);
            m->stats.forgotten++;
            return;
        }
    }
    m->invited[i] = now ? now : 1;
    if (m->tries[i] < UINT8_MAX) m->tries[i]++;
    memb_send_to(m, m->passive[i].key, m->passive[i].addr, RUMOR_MEMB_HELLO);
}

/* Into the view if there is room (out of the reservoir), else into the reservoir; the new
 * view entry, or NULL. */
entry_t *memb_place(rumor_memb_t *m, const rumor_memb_update_t *u, uint64_t now)
{
    if (m->n_view >= m->cfg.view_size || !u->addr[0]) {
        memb_passive_add(m, u);
        return NULL;
    }
    char *addr = dup_addr(u->addr);
    if (!addr) return NULL; /* (out of memory: not taken, wherever it was) */
    const int p = find_passive(m, u->key);
    if (p >= 0) memb_passive_remove(m, p);
    entry_t *e = &m->view[m->n_view++];
    memset(e, 0, sizeof *e);
    memcpy(e->m.key, u->key, RUMOR_KEY_LEN);
    e->m.addr = addr;
    e->m.inc = u->inc;
    e->m.state = u->state;
    e->m.boot = u->boot;
    e->m.undialable = u->undialable;
    e->m.last_seen_ms = now;
    e->suspect_since = now;
    e->addr_since = now;
    if ((u->cert_len || u->proven) && cred_w(e)) {
        set_cert(e->c->cert, &e->c->cert_len, u->cert, u->cert_len);
        e->c->proven = u->proven;
        memcpy(e->c->proof, u->proof, RUMOR_MEMB_PROOF_LEN);
    }
    return e;
}

/* Into the view if there is room, else into the reservoir. */
void memb_admit(rumor_memb_t *m, const rumor_memb_update_t *u, uint64_t now)
{
    const entry_t *e = memb_place(m, u, now);
    if (e) memb_view_event(m, RUMOR_MEMB_ACT_UP, &e->m, u->state);
}

/* Remove view member i (dead, left); a reservoir member takes the place. */
void memb_drop_from_view(rumor_memb_t *m, int i, rumor_memb_state_t why, uint64_t now)
{
    entry_t gone = m->view[i];
    m->view[i] = m->view[--m->n_view];
    memb_view_event(m, RUMOR_MEMB_ACT_DOWN, &gone.m, why);
    memb_add_tomb(m, gone.m.key, gone.m.inc, why, now);
    if (m->probe.active && same_key(m->probe.target, gone.m.key)) m->probe.active = false;
    entry_free(&gone);
    if (m->n_passive > 0 && m->n_view < m->cfg.view_size)
        memb_invite(m, (int)rumor_rng_below(&m->rng, (uint64_t)m->n_passive), now);
}

/* ---- construction ---- */

rumor_memb_config_t rumor_memb_defaults(void)
{
    return (rumor_memb_config_t){
        .period_ms = 1000,
        .ping_timeout_ms = 300,
        .suspect_ms = 5000,
        .indirect_k = 3,
        .view_size = 64,
        .passive_size = 256,
        .exchange_size = 16,
        .exchange_ms = 5000,
        .rejoin_ms = 5000,
        .max_piggyback = 8,
        .retransmit_mult = 3,
        .seed = 1,
    };
}

rumor_memb_t *rumor_memb_new(const rumor_memb_config_t *cfg, const uint8_t self_key[RUMOR_KEY_LEN],
                             const char *self_addr, uint32_t inc, char err[RUMOR_ERR_LEN])
{
    const rumor_memb_config_t *c = cfg;
    if (c->period_ms < 10 || c->ping_timeout_ms < 1 || c->ping_timeout_ms >= c->period_ms ||
        c->suspect_ms < c->period_ms || c->indirect_k < 0 || c->indirect_k > 16 || c->view_size < 1 ||
        c->view_size > 4096 || c->passive_size < 0 || c->passive_size > 65536 || c->exchange_size < 1 ||
        c->exchange_size > RUMOR_MEMB_MAX_PEERS || c->exchange_ms < c->period_ms || c->rejoin_ms < 10 ||
        c->max_piggyback < 0 || c->max_piggyback > RUMOR_MEMB_MAX_UPD || c->retransmit_mult < 1 ||
        c->retransmit_mult > 20) {
        rumor_fail(err, RUMOR_EINVAL, "membership configuration out of range");
        return NULL;
    }
    if (!self_addr || !*self_addr || strlen(self_addr) >= RUMOR_MEMB_ADDR_LEN) {
        rumor_fail(err, RUMOR_EINVAL, "membership needs the node's listen address");
        return NULL;
    }
    rumor_memb_t *m = calloc(1, sizeof *m);
    if (!m) goto nomem;
    m->cfg = *cfg;
    rumor_rng_init2(&m->rng, cfg->seed, 0x3e3b, 0);
    memcpy(m->self_key, self_key, RUMOR_KEY_LEN);
    copy_addr(m->self_addr, self_addr);
    m->inc = inc;
    m->tomb_cap = cfg->view_size + cfg->passive_size + 16;
    m->tomb_ttl = 4 * (uint64_t)cfg->suspect_ms > 10 * (uint64_t)cfg->period_ms ? 4 * (uint64_t)cfg->suspect_ms
                                                                                : 10 * (uint64_t)cfg->period_ms;
    m->dq_cap = 2 * cfg->view_size + 32;
    m->view = calloc((size_t)cfg->view_size, sizeof *m->view);
    m->passive = calloc((size_t)cfg->passive_size + 1, sizeof *m->passive);
    m->invited = calloc((size_t)cfg->passive_size + 1, sizeof *m->invited);
    m->tries = calloc((size_t)cfg->passive_size + 1, sizeof *m->tries);
    m->tombs = calloc((size_t)m->tomb_cap, sizeof *m->tombs);
    m->dq = calloc((size_t)m->dq_cap, sizeof *m->dq);
    m->order = calloc((size_t)cfg->view_size, sizeof *m->order);
    m->out_cap = OUTBOX_MIN;
    m->outbox = malloc((size_t)m->out_cap * sizeof *m->outbox);
    if (!m->view || !m->passive || !m->invited || !m->tries || !m->tombs || !m->dq || !m->order || !m->outbox)
        goto nomem;
    m->next_seq = 1;
    memb_sign_self(m);
    return m;
nomem:
    rumor_memb_destroy(&m);
    rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    return NULL;
}

void rumor_memb_set_identity(rumor_memb_t *m, const uint8_t *cert, size_t cert_len, uint64_t boot)
{
    m->self_boot = boot;
    m->self_cert_len = 0;
    set_cert(m->self_cert, &m->self_cert_len, cert, cert_len);
    memb_sign_self(m);
}

void rumor_memb_destroy(rumor_memb_t **self_p)
{
    if (!self_p || !*self_p) return;
    rumor_memb_t *m = *self_p;
    for (int i = 0; m->view && i < m->n_view; i++) entry_free(&m->view[i]);
    free(m->view);
    free(m->passive);
    free(m->invited);
    free(m->tries);
    free(m->tombs);
    free(m->dq);
    free(m->order);
    free(m->outbox);
    free(m);
    *self_p = NULL;
}

/* ---- events ---- */

static void start(rumor_memb_t *m, uint64_t now)
{
    if (m->started) return;
    m->started = true;
    m->started_at = now;
    /* Spread the first probe and exchange over a period so nodes started together do not
     * all probe in step. */
    m->next_probe_at = now + rumor_rng_below(&m->rng, m->cfg.period_ms);
    m->next_exchange_at = now + m->cfg.exchange_ms / 2 + rumor_rng_below(&m->rng, m->cfg.exchange_ms);
    m->next_rejoin_at = now + m->cfg.period_ms; /* see rumor_memb_tick: soon while alone */
}

void rumor_memb_join(rumor_memb_t *m, const uint8_t key[RUMOR_KEY_LEN], const char *addr, uint64_t now)
{
    if (m->left || same_key(key, m->self_key) || !addr || !*addr) return;
    start(m, now);
    int b = -1;
    for (int i = 0; i < m->n_boot; i++)
        if (same_key(m->boot[i].key, key)) b = i;
    if (b < 0 && m->n_boot < MAX_BOOTSTRAPS) b = m->n_boot++;
    if (b >= 0) {
        memcpy(m->boot[b].key, key, RUMOR_KEY_LEN);
        copy_addr(m->boot[b].addr, addr);
    }
    memb_send_to(m, key, addr, RUMOR_MEMB_HELLO);
}

void rumor_memb_add(rumor_memb_t *m, const uint8_t key[RUMOR_KEY_LEN], const char *addr, uint32_t inc, uint64_t now)
{
    if (m->left || same_key(key, m->self_key) || !addr || !*addr || strlen(addr) >= RUMOR_MEMB_ADDR_LEN ||
        find_view(m, key) >= 0)
        return;
    start(m, now);
    rumor_memb_update_t u;
    memset(&u, 0, sizeof u);
    memcpy(u.key, key, RUMOR_KEY_LEN);
    copy_addr(u.addr, addr);
    u.inc = inc;
    u.state = RUMOR_MEMB_ALIVE;
    (void)memb_place(m, &u, now);
}

void memb_send_ping(rumor_memb_t *m, const uint8_t *key, const char *addr, uint32_t seq)
{
    pending_t *p = memb_send_to(m, key, addr, RUMOR_MEMB_PING);
    if (p) p->seq = seq;
    m->stats.pings_sent++;
}

static void handle_ack(rumor_memb_t *m, const uint8_t *from, const rumor_memb_msg_t *msg, uint64_t now)
{
    const uint8_t *about = msg->has_target ? msg->target : from;
    if (m->probe.active && msg->ack == m->probe.seq && same_key(about, m->probe.target)) {
        m->probe.active = false;
        m->stats.acks_received++;
        int v = find_view(m, about);
        if (v >= 0) {
            rumor_memb_member_t *e = &m->view[v].m;
            e->last_seen_ms = now;
            if (!msg->has_target) {
                uint32_t rtt = (uint32_t)(now - m->probe.started);
                e->rtt_ms = e->rtt_ms ? (7 * e->rtt_ms + rtt) / 8 : (rtt ? rtt : 1);
            }
        }
        return;
    }
    if (msg->has_target) return; /* a relayed ack for a probe we gave up on */
    for (int i = 0; i < RELAY_CAP; i++) {
        relay_t *r = &m->relays[i];
        if (r->used && r->our_seq == msg->ack && same_key(r->target, from)) {
            pending_t *p = memb_send_to(m, r->requester, r->requester_addr, RUMOR_MEMB_ACK);
            if (p) {
                p->ack = r->requester_seq;
                p->has_target = true;
                memcpy(p->target, from, RUMOR_KEY_LEN);
            }
            r->used = false;
            return;
        }
    }
}

void rumor_memb_recv(rumor_memb_t *m, const uint8_t from[RUMOR_KEY_LEN], const char *from_addr,
                     const rumor_memb_msg_t *msg, uint64_t now)
{
    if (m->left) return;
    if (same_key(from, m->self_key) || !from_addr || !from_addr[0] ||
        strlen(from_addr) >= RUMOR_MEMB_ADDR_LEN || msg->n_upd < 0 || msg->n_upd > RUMOR_MEMB_MAX_UPD ||
        msg->n_peers < 0 || msg->n_peers > RUMOR_MEMB_MAX_PEERS ||
        (msg->kind == RUMOR_MEMB_HELLO && strcmp(msg->addr, from_addr) != 0)) {
        m->stats.dropped_input++;
        return;
    }
    start(m, now);
    int v = find_view(m, from);
    if (v >= 0) m->view[v].m.last_seen_ms = now;

    if (msg->kind == RUMOR_MEMB_HELLO) {
        if (msg->cert_len > RUMOR_MEMB_CERT_MAX) {
            m->stats.dropped_input++;
            return;
        }
        /* Its own word: in, whatever we held. One we held dead at an incarnation it has not
         * refuted also learns that, so it refutes and the rest of the swarm hears it. */
        const int t = find_tomb(m, from);
        const bool tell = t >= 0 && m->tombs[t].inc >= msg->inc;
        const uint32_t tomb_inc = tell ? m->tombs[t].inc : 0;
        const rumor_memb_state_t tomb_state = tell ? m->tombs[t].state : RUMOR_MEMB_ALIVE;
        memb_spoke(m, from, msg->addr, msg->inc, msg->boot, msg->undialable, msg->cert, msg->cert_len,
                   msg->proven ? msg->proof : NULL, now);
        /* Whoever says hello learns who we know. */
        const int hv = find_view(m, from), hp = hv < 0 ? find_passive(m, from) : -1;
        const char *to = hv >= 0 ? m->view[hv].m.addr : hp >= 0 ? m->passive[hp].addr : msg->addr;
        pending_t *p = memb_send_to(m, from, to, RUMOR_MEMB_PEERS);
        if (p && tell) {
            p->tell_tomb = true;
            p->tomb_inc = tomb_inc;
            p->tomb_state = tomb_state;
        }
        return;
    }
    if (msg->kind == RUMOR_MEMB_BYE) {
        if (v >= 0) {
            rumor_memb_update_t u;
            memb_entry_update(&m->view[v], RUMOR_MEMB_LEFT, &u);
            memb_apply(m, NULL, &u, now); /* (its own word: it leaves) */
        }
        return;
    }
    const rumor_memb_update_t *list = msg->kind == RUMOR_MEMB_PEERS ? msg->peers : msg->upd;
    const int n = msg->kind == RUMOR_MEMB_PEERS ? msg->n_peers : msg->n_upd;
    const uint64_t dropped = m->stats.dropped_input;
    uint32_t own_inc = msg->kind == RUMOR_MEMB_PING ? msg->inc : 0;
    uint64_t own_boot = 0;
    const rumor_memb_update_t *own = NULL;
    for (int i = 0; i < n; i++) {
        /* Strict mode takes no entry without a certificate (the driver checked those given). */
        if (list[i].state > RUMOR_MEMB_LEFT || list[i].cert_len > RUMOR_MEMB_CERT_MAX ||
            (m->cfg.strict && list[i].cert_len == 0)) {
            m->stats.dropped_input++;
            continue;
        }
        if (same_key(list[i].key, from)) {
            /* What the sender says of itself is its own word, not a claim (a dead or
             * suspect word about itself means nothing). */
            if (list[i].state == RUMOR_MEMB_ALIVE && list[i].cert_len <= RUMOR_MEMB_CERT_MAX) {
                if (list[i].inc > own_inc) own_inc = list[i].inc;
                if (list[i].boot) own_boot = list[i].boot;
                /* (strict: its newest signed record, whole) */
                if (!m->cfg.strict || (list[i].proven && (!own || list[i].inc > own->inc))) own = &list[i];
            }
            continue;
        }
        memb_apply(m, from, &list[i], now);
    }
    /* Anything well-formed from a member (in the view, or answering our hello or a ping of
     * a neighbour's) is its word that it is alive. */
    if ((v >= 0 || m->stats.dropped_input == dropped) && m->cfg.strict && own)
        memb_spoke(m, from, own->addr, own->inc, own->boot, own->undialable, own->cert, own->cert_len, own->proof, now);
    else if (v >= 0 || m->stats.dropped_input == dropped)
        memb_spoke(m, from, from_addr, own_inc, own_boot, false, own ? own->cert : NULL, own ? own->cert_len : 0, NULL,
                   now);

    switch (msg->kind) {
    case RUMOR_MEMB_PING:
        {
            pending_t *p = memb_send_to(m, from, from_addr, RUMOR_MEMB_ACK);
            if (p) p->ack = msg->seq;
        }
        break;
    case RUMOR_MEMB_PING_REQ:
        if (!msg->has_target) {
            m->stats.dropped_input++;
            return;
        }
        if (same_key(msg->target, m->self_key)) {
            pending_t *p = memb_send_to(m, from, from_addr, RUMOR_MEMB_ACK);
            if (p) p->ack = msg->seq;
            break;
        }
        {
            /* Only members we know: a ping-req must not make us dial an address of the
             * requester's choosing. */
            int tv = find_view(m, msg->target);
            if (tv < 0) {
                m->stats.dropped_input++;
                return;
            }
            const char *taddr = m->view[tv].m.addr;
            int slot = -1;
            for (int i = 0; i < RELAY_CAP && slot < 0; i++)
                if (!m->relays[i].used || m->relays[i].deadline <= now) slot = i;
            if (slot < 0) return; /* too many relays in flight: the requester will cope */
            relay_t *r = &m->relays[slot];
            r->used = true;
            memcpy(r->requester, from, RUMOR_KEY_LEN);
            copy_addr(r->requester_addr, from_addr);
            r->requester_seq = msg->seq;
            r->our_seq = m->next_seq++;
            memcpy(r->target, msg->target, RUMOR_KEY_LEN);
            r->deadline = now + m->cfg.period_ms;
            memb_send_ping(m, msg->target, taddr, r->our_seq);
        }
        break;
    case RUMOR_MEMB_ACK: handle_ack(m, from, msg, now); break;
    default: break;
    }
}

static bool next_probe_target(rumor_memb_t *m, uint8_t *key)
{
    /* Shuffled round robin: every member is probed once per round, in random order. */
    for (int tries = 0; tries < 2; tries++) {
        while (m->order_pos < m->n_order) {
            const uint8_t *k = m->order[m->order_pos++];
            if (find_view(m, k) >= 0) {
                memcpy(key, k, RUMOR_KEY_LEN);
                return true;
            }
        }
        m->n_order = m->n_view;
        m->order_pos = 0;
        for (int i = 0; i < m->n_view; i++) memcpy(m->order[i], m->view[i].m.key, RUMOR_KEY_LEN);
        for (int i = m->n_order; i > 1; i--) {
            int j = (int)rumor_rng_below(&m->rng, (uint64_t)i);
            uint8_t t[RUMOR_KEY_LEN];
            memcpy(t, m->order[i - 1], RUMOR_KEY_LEN);
            memcpy(m->order[i - 1], m->order[j], RUMOR_KEY_LEN);
            memcpy(m->order[j], t, RUMOR_KEY_LEN);
        }
    }
    return false;
}

void rumor_memb_tick(rumor_memb_t *m, uint64_t now)
{
    if (m->left) return;
    start(m, now);
    const rumor_memb_config_t *c = &m->cfg;

    /* The probe in flight: indirect pings after ping_timeout, suspicion after a period. */
    if (m->probe.active) {
        int v = find_view(m, m->probe.target);
        if (v < 0) {
            m->probe.active = false;
        } else if (now >= m->probe.started + c->period_ms) {
            m->probe.active = false;
            entry_t *e = &m->view[v];
            if (e->m.state == RUMOR_MEMB_ALIVE) {
                rumor_memb_update_t u;
                memb_entry_update(e, RUMOR_MEMB_SUSPECT, &u);
                m->stats.suspicions++;
                memb_apply(m, NULL, &u, now);
            }
        } else if (!m->probe.indirect_sent && now >= m->probe.started + c->ping_timeout_ms) {
            m->probe.indirect_sent = true;
            int asked = 0;
            for (int tries = 0; tries < 4 * c->indirect_k && asked < c->indirect_k && m->n_view > 1; tries++) {
                int i = (int)rumor_rng_below(&m->rng, (uint64_t)m->n_view);
                entry_t *h = &m->view[i];
                if (i == v || h->m.state != RUMOR_MEMB_ALIVE) continue;
                pending_t *p = memb_send_to(m, h->m.key, h->m.addr, RUMOR_MEMB_PING_REQ);
                if (!p) break;
                p->seq = m->probe.seq;
                p->has_target = true;
                memcpy(p->target, m->view[v].m.key, RUMOR_KEY_LEN);
                copy_addr(p->target_addr, m->view[v].m.addr);
                m->stats.ping_reqs_sent++;
                asked++;
            }
        }
    }

    /* Suspects that nobody cleared are dead. */
    for (int i = 0; i < m->n_view;) {
        entry_t *e = &m->view[i];
        if (e->m.state == RUMOR_MEMB_SUSPECT && now >= e->suspect_since + c->suspect_ms) {
            rumor_memb_update_t u;
            memb_entry_update(e, RUMOR_MEMB_DEAD, &u);
            m->stats.deaths++;
            memb_apply(m, NULL, &u, now); /* removes view[i]; look at the same index again */
            continue;
        }
        i++;
    }

    for (int i = 0; i < RELAY_CAP; i++)
        if (m->relays[i].used && m->relays[i].deadline <= now) m->relays[i].used = false;
    for (int t = 0; t < m->n_tombs;)
        if (now >= m->tombs[t].since + m->tombs[t].hold)
            memb_remove_tomb(m, t);
        else
            t++;

    if (now >= m->next_probe_at) {
        m->next_probe_at = now + c->period_ms;
        uint8_t key[RUMOR_KEY_LEN];
        if (!m->probe.active && next_probe_target(m, key)) {
            int v = find_view(m, key);
            m->probe.active = true;
            m->probe.indirect_sent = false;
            memcpy(m->probe.target, key, RUMOR_KEY_LEN);
            m->probe.seq = m->next_seq++;
            m->probe.started = now;
            memb_send_ping(m, key, m->view[v].m.addr, m->probe.seq);
        }
    }

    if (now >= m->next_exchange_at) {
        m->next_exchange_at = now + c->exchange_ms;
        if (m->n_view > 0) {
            entry_t *e = &m->view[rumor_rng_below(&m->rng, (uint64_t)m->n_view)];
            memb_send_to(m, e->m.key, e->m.addr, RUMOR_MEMB_PEERS);
        }
    }

    /* A view with room asks a reservoir member in (it enters when it answers). */
    if (m->n_view < c->view_size && m->n_passive > 0)
        memb_invite(m, (int)rumor_rng_below(&m->rng, (uint64_t)m->n_passive), now);

    if (now >= m->next_rejoin_at) {
        /* A node nobody has answered yet (its hello or the answer lost) tries again every
         * period; one cut off from a bootstrap only, every rejoin_ms. */
        m->next_rejoin_at = now + (m->n_view == 0 ? c->period_ms : c->rejoin_ms);
        for (int b = 0; b < m->n_boot; b++)
            if (find_view(m, m->boot[b].key) < 0) memb_send_to(m, m->boot[b].key, m->boot[b].addr, RUMOR_MEMB_HELLO);
    }
}

void rumor_memb_leave(rumor_memb_t *m, uint64_t now)
{
    (void)now;
    if (m->left) return;
    for (int i = 0; i < m->n_view; i++) memb_send_to(m, m->view[i].m.key, m->view[i].m.addr, RUMOR_MEMB_BYE);
    m->left = true;
}

/* ---- actions ---- */

/* A sample for PEERS: ourselves, then view members, then reservoir members, at random. */
static int sample_peers(rumor_memb_t *m, const uint8_t *to, rumor_memb_update_t *out)
{
    int n = 0, want = m->cfg.exchange_size;
    memb_self_update(m, &out[n]);
    if (!m->cfg.strict || (out[n].cert_len && out[n].proven)) n++;
    int total = m->n_view + m->n_passive;
    /* A partial Fisher-Yates over the concatenated index space picks without repeats. */
    int *idx = malloc((size_t)(total ? total : 1) * sizeof *idx);
    if (!idx) return n;
    for (int i = 0; i < total; i++) idx[i] = i;
    for (int i = 0; i < total && n < want; i++) {
        int j = i + (int)rumor_rng_below(&m->rng, (uint64_t)(total - i));
        int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
        int k = idx[i];
        if (k < m->n_view) {
            const entry_t *e = &m->view[k];
            if (same_key(e->m.key, to) || (m->cfg.strict && (!cred_of(e)->cert_len || !cred_of(e)->proven))) continue;
            memb_entry_update(e, e->m.state, &out[n++]);
        } else {
            const rumor_memb_update_t *u = &m->passive[k - m->n_view];
            if (same_key(u->key, to) || (m->cfg.strict && (!u->cert_len || !u->proven))) continue;
            out[n++] = *u;
        }
    }
    free(idx);
    return n;
}

bool rumor_memb_next_action(rumor_memb_t *m, rumor_memb_action_t *out)
{
    if (m->out_count == 0) { /* drained (the driver's last call): small again */
        if (m->out_cap > OUTBOX_MIN) (void)resize_outbox(m, OUTBOX_MIN);
        return false;
    }
    const pending_t *p = &m->outbox[m->out_head];
    m->out_head = (m->out_head + 1) % m->out_cap;
    m->out_count--;
    memset(out, 0, sizeof *out);
    out->kind = p->kind;
    memcpy(out->key, p->key, RUMOR_KEY_LEN);
    copy_addr(out->addr, p->addr);
    out->state = p->state;
    if (p->kind != RUMOR_MEMB_ACT_SEND) return true;
    rumor_memb_msg_t *msg = &out->msg;
    msg->kind = p->msg_kind;
    msg->seq = p->seq;
    msg->ack = p->ack;
    msg->has_target = p->has_target;
    memcpy(msg->target, p->target, RUMOR_KEY_LEN);
    copy_addr(msg->target_addr, p->target_addr);
    switch (p->msg_kind) {
    case RUMOR_MEMB_HELLO:
        msg->inc = m->inc;
        copy_addr(msg->addr, m->self_addr);
        msg->boot = m->self_boot;
        msg->undialable = m->self_undialable;
        set_cert(msg->cert, &msg->cert_len, m->self_cert, m->self_cert_len);
        msg->proven = m->self_proven;
        memcpy(msg->proof, m->self_proof, RUMOR_MEMB_PROOF_LEN);
        break;
    case RUMOR_MEMB_PEERS:
        msg->n_peers = sample_peers(m, p->key, msg->peers);
        if (p->tell_tomb && msg->n_peers < RUMOR_MEMB_MAX_PEERS) {
            rumor_memb_update_t *u = &msg->peers[msg->n_peers++];
            memset(u, 0, sizeof *u);
            memcpy(u->key, p->key, RUMOR_KEY_LEN);
            copy_addr(u->addr, p->addr);
            u->inc = p->tomb_inc;
            u->state = p->tomb_state;
            const int v = find_view(m, p->key), q = v < 0 ? find_passive(m, p->key) : -1;
            if (v >= 0) set_cert(u->cert, &u->cert_len, cred_of(&m->view[v])->cert, cred_of(&m->view[v])->cert_len);
            if (q >= 0) set_cert(u->cert, &u->cert_len, m->passive[q].cert, m->passive[q].cert_len);
        }
        break;
    case RUMOR_MEMB_PING:
        msg->inc = m->inc;
        msg->n_upd = take_piggyback(m, msg->upd);
        break;
    case RUMOR_MEMB_PING_REQ:
    case RUMOR_MEMB_ACK: msg->n_upd = take_piggyback(m, msg->upd); break;
    case RUMOR_MEMB_BYE: break;
    }
    return true;
}

uint64_t rumor_memb_next_deadline(const rumor_memb_t *m, uint64_t now)
{
    if (m->left) return UINT64_MAX;
    uint64_t t = m->next_probe_at;
    if (m->next_exchange_at < t) t = m->next_exchange_at;
    if (m->next_rejoin_at < t) t = m->next_rejoin_at;
    if (m->probe.active) {
        uint64_t p = m->probe.indirect_sent ? m->probe.started + m->cfg.period_ms
                                            : m->probe.started + m->cfg.ping_timeout_ms;
        if (p < t) t = p;
    }
    for (int i = 0; i < m->n_view; i++)
        if (m->view[i].m.state == RUMOR_MEMB_SUSPECT && m->view[i].suspect_since + m->cfg.suspect_ms < t)
            t = m->view[i].suspect_since + m->cfg.suspect_ms;
    return t > now ? t - now : 0;
}

/* ---- the view ---- */

int rumor_memb_view_count(const rumor_memb_t *m) { return m->n_view; }
const rumor_memb_member_t *rumor_memb_view_at(const rumor_memb_t *m, int i)
{
    return i >= 0 && i < m->n_view ? &m->view[i].m : NULL;
}
int rumor_memb_passive_count(const rumor_memb_t *m) { return m->n_passive; }
const uint8_t *rumor_memb_proof(const rumor_memb_t *m) { return m->self_proven ? m->self_proof : NULL; }
bool rumor_memb_undialable(const rumor_memb_t *m) { return m->self_undialable; }

const uint8_t *rumor_memb_view_cert(const rumor_memb_t *m, int i, size_t *len)
{
    *len = 0;
    if (i < 0 || i >= m->n_view) return NULL;
    *len = cred_of(&m->view[i])->cert_len;
    return cred_of(&m->view[i])->cert;
}
uint32_t rumor_memb_incarnation(const rumor_memb_t *m) { return m->inc; }
rumor_memb_stats_t rumor_memb_stats(const rumor_memb_t *m) { return m->stats; }
