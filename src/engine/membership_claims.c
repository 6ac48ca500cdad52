/* membership_claims.c - who may say what about a member (membership.h): claims second hand,
 * a member's own word, and in strict mode the signed records that bound both. */
#include "membership_impl.h"

static inline void refuse_claim(rumor_memb_t *m) { m->stats.refused_claims++; }

static void disproved(rumor_memb_t *m, const uint8_t *claimant, uint64_t now);

/* Apply what someone says about a member (a claim, second hand, or our own conclusion); true
 * when it changed our view of it. The rules are membership.h's "Who may say what". */
static bool apply_claim(rumor_memb_t *m, const rumor_memb_update_t *u, uint64_t now)
{
    if (u->state > RUMOR_MEMB_LEFT || u->cert_len > RUMOR_MEMB_CERT_MAX) {
        m->stats.dropped_input++;
        return false;
    }
    if (same_key(u->key, m->self_key)) {
        /* Refute: whoever suspects us, thinks us dead or gone, or holds an incarnation of
         * ours above our own hears a newer one. A claim far ahead of our own incarnation is
         * not something we could have said: it would only push ours towards the wrap. Strict:
         * entries about us come unchecked (we know our record), so only a claim at our own
         * incarnation is refuted, one above it; one above ours is not ours and moves nothing. */
        if (m->cfg.strict && u->inc != m->inc) {
            if (u->inc > m->inc) refuse_claim(m);
            return false;
        }
        const bool against = u->state != RUMOR_MEMB_ALIVE ? u->inc >= m->inc : u->inc > m->inc;
        if (against) {
            if (beyond(u->inc, m->inc) || u->inc >= UINT32_MAX - 1) {
                refuse_claim(m);
                return false;
            }
            /* Strict: one refutation a period (each is a signature, and a member repeating a
             * claim must not make us run through incarnations). */
            if (m->cfg.strict && m->refuted_ms && now < m->refuted_ms + m->cfg.period_ms) return false;
            m->refuted_ms = now ? now : 1;
            m->inc = u->inc + 1;
            memb_sign_self(m);
            m->stats.refutations++;
            rumor_memb_update_t me;
            memb_self_update(m, &me);
            memb_disseminate(m, &me);
        }
        return false;
    }
    const bool gone = u->state == RUMOR_MEMB_DEAD || u->state == RUMOR_MEMB_LEFT;
    int v = find_view(m, u->key);
    if (v >= 0) {
        entry_t *e = &m->view[v];
        if (beyond(u->inc, e->m.inc)) {
            refuse_claim(m);
            return false;
        }
        keep_entry_cert(m, e, u->cert, u->cert_len, false);
        if (!supersedes(u->inc, u->state, e->m.inc, e->m.state)) return false;
        if (u->boot && (!e->m.boot || u->inc > e->m.inc)) e->m.boot = u->boot;
        if (u->state == RUMOR_MEMB_SUSPECT && e->m.state != RUMOR_MEMB_SUSPECT) e->suspect_since = now;
        e->m.inc = u->inc;
        /* Passed on as we hold it: the claim's address is not the member's word. */
        rumor_memb_update_t out;
        memb_entry_update(e, u->state, &out);
        if (gone)
            memb_drop_from_view(m, v, u->state, now);
        else
            e->m.state = u->state;
        memb_disseminate(m, &out);
        return true;
    }
    int t = find_tomb(m, u->key);
    if (t >= 0) {
        if (beyond(u->inc, m->tombs[t].inc)) {
            refuse_claim(m);
            return false;
        }
        if (!supersedes(u->inc, u->state, m->tombs[t].inc, m->tombs[t].state)) return false;
        if (gone) {
            m->tombs[t].inc = u->inc;
            m->tombs[t].state = u->state;
            return false;
        }
        /* Back with a newer incarnation: a restart, or a partition healed. */
        memb_remove_tomb(m, t);
    }
    int p = find_passive(m, u->key);
    if (p >= 0 && beyond(u->inc, m->passive[p].inc)) {
        refuse_claim(m);
        return false;
    }
    if (p < 0 && t < 0 && u->inc > inc_ceiling(m, now)) {
        refuse_claim(m);
        return false;
    }
    if (gone) {
        if (p >= 0) memb_passive_remove(m, p);
        memb_add_tomb(m, u->key, u->inc, u->state, now);
        return false;
    }
    rumor_memb_update_t alive;
    if (p >= 0) {
        rumor_memb_update_t *q = &m->passive[p];
        keep_cert(m, q->cert, &q->cert_len, u->cert, u->cert_len, false);
        if (!supersedes(u->inc, u->state, q->inc, RUMOR_MEMB_ALIVE)) return false;
        if (u->boot && (!q->boot || u->inc > q->inc)) q->boot = u->boot;
        q->inc = u->inc; /* the address stays: a claim never moves a member */
        alive = *q;
    } else {
        if (!u->addr[0]) return false; /* nothing to reach it by */
        /* Heard of, not from: into the reservoir, with a hello if the view has room. */
        alive = *u;
        alive.state = RUMOR_MEMB_ALIVE;
        memb_passive_add(m, &alive);
        p = find_passive(m, u->key);
    }
    alive.state = RUMOR_MEMB_ALIVE;
    if (p >= 0 && m->n_view < m->cfg.view_size) memb_invite(m, p, now);
    memb_disseminate(m, &alive);
    return true;
}


/* A second-hand suspicion (strict) that the member's own word cleared: its claimant lied or
 * was wrong; one that keeps doing it is not listened to for a while. */
static void disproved(rumor_memb_t *m, const uint8_t *claimant, uint64_t now)
{
    m->stats.disproved++;
    const uint64_t window = MUTE_PERIODS * (uint64_t)m->cfg.period_ms;
    int l = 0;
    for (int i = 0; i < LIARS_MAX; i++) {
        if (m->liars[i].since && same_key(m->liars[i].key, claimant)) {
            l = i;
            break;
        }
        if (m->liars[i].since < m->liars[l].since) l = i;
    }
    if (!m->liars[l].since || !same_key(m->liars[l].key, claimant)) {
        memcpy(m->liars[l].key, claimant, RUMOR_KEY_LEN);
        m->liars[l].lies = 0, m->liars[l].since = now ? now : 1;
    }
    if (now >= m->liars[l].since + window) /* (an honest one's rare mistakes age out) */
        m->liars[l].lies = 0, m->liars[l].since = now ? now : 1;
    if (++m->liars[l].lies < RUMOR_MEMB_LIES_MAX) return;
    m->liars[l].lies = 0;
    /* Kept apart from the view entry, which a bye and a hello would make afresh. */
    int at = 0;
    for (int i = 0; i < MUTED_MAX; i++) {
        if (same_key(m->muted[i].key, claimant) || m->muted[i].until <= now) {
            at = i;
            break;
        }
        if (m->muted[i].until < m->muted[at].until) at = i;
    }
    memcpy(m->muted[at].key, claimant, RUMOR_KEY_LEN);
    m->muted[at].until = now + window;
    m->stats.muted++;
}

static bool is_muted(const rumor_memb_t *m, const uint8_t *key, uint64_t now)
{
    for (int i = 0; i < MUTED_MAX; i++)
        if (m->muted[i].until > now && same_key(m->muted[i].key, key)) return true;
    return false;
}

/* Whether a record (inc, boot, undialable, addr) signed at e's incarnation goes before the one
 * e holds: the greater of the two as bytes, a total order every peer applies alike, so that two
 * records of one incarnation (a member telling peers different things) end as one everywhere. */
static bool beats_record(const rumor_memb_update_t *held, uint64_t boot, bool undialable, const char *addr)
{
    if (!held->proven) return true;
    uint8_t a[RUMOR_MEMB_RECORD_MAX], b[RUMOR_MEMB_RECORD_MAX];
    const size_t la = rumor_memb_record(a, held->key, held->inc, held->boot, held->undialable, held->addr);
    const size_t lb = rumor_memb_record(b, held->key, held->inc, boot, undialable, addr);
    const int c = memcmp(b, a, la < lb ? la : lb);
    return c > 0 || (c == 0 && lb > la);
}

/* Adopt the member's signed record (inc, boot, undialable, addr and the proof of them) into
 * view entry e, whole or not at all: a newer one, or at e's incarnation one that goes before
 * e's (beats_record), or (own: the member's own word) one of another run that says the same
 * of the graph (a node restarted within the second its incarnation counts signs its new boot
 * id at the old incarnation; only its own secure mixing depends on which is held); a new
 * address at most once a period (each is a dial; the record waits for the next time it
 * comes). True when taken. */
static bool take_record(rumor_memb_t *m, entry_t *e, uint32_t inc, uint64_t boot, bool undialable, const char *addr,
                        const uint8_t *proof, bool own, uint64_t now)
{
    const bool moves = strcmp(e->m.addr, addr) != 0;
    rumor_memb_update_t held;
    memb_entry_update(e, e->m.state, &held);
    const bool restarted = own && cred_of(e)->proven && boot != e->m.boot && undialable == e->m.undialable && !moves;
    if (inc < e->m.inc || (inc == e->m.inc && !restarted && !beats_record(&held, boot, undialable, addr)) ||
        (moves && now < e->addr_since + m->cfg.period_ms) || !cred_w(e))
        return false;
    if (moves && !entry_move_addr(e, addr, now)) return false;
    e->m.inc = inc;
    e->m.boot = boot;
    e->m.undialable = undialable;
    e->c->proven = true;
    memcpy(e->c->proof, proof, RUMOR_MEMB_PROOF_LEN);
    return true;
}

/* Strict: a claim from another member about a view member. Its record is believed (the member
 * signed it); what the sender says of its state is not evidence enough to evict: suspect or
 * dead makes it suspect here, we ping it to check, and its own word (any message from it)
 * clears it and counts against the claimant; silence until suspect_ms makes it dead here. */
static bool claim_about_view(rumor_memb_t *m, const uint8_t *from, int v, const rumor_memb_update_t *u, uint64_t now)
{
    entry_t *e = &m->view[v];
    keep_entry_cert(m, e, u->cert, u->cert_len, false); /* (checked by the driver) */
    if (u->inc < e->m.inc) return false; /* stale */
    const bool newer = take_record(m, e, u->inc, u->boot, u->undialable, u->addr, u->proof, false, now);
    if (u->state == RUMOR_MEMB_ALIVE) {
        if (!newer) return false;
        /* It signed a newer incarnation: alive, whatever we suspected. */
        if (e->m.state == RUMOR_MEMB_SUSPECT && e->m.doubted) disproved(m, cred_of(e)->claimant, now);
        e->m.state = RUMOR_MEMB_ALIVE;
        e->m.doubted = false;
        rumor_memb_update_t out;
        memb_entry_update(e, RUMOR_MEMB_ALIVE, &out);
        memb_disseminate(m, &out);
        return true;
    }
    if (is_muted(m, from, now)) {
        refuse_claim(m);
        return newer;
    }
    /* Heard from within the last period (an answer to our last check, say): alive, whatever
     * anyone says; a claim repeated right after our check cleared it must not start a
     * suspicion that no ping of ours would end. */
    if (now < e->m.last_seen_ms + m->cfg.period_ms) return newer;
    /* Dead by another's word while our own probe already found it silent: two views agree, and
     * it goes now (survivors that keep waiting for a dead member fall out of step). A liar
     * gains nothing here: a member that answers us is never suspect by our own probe. */
    if (e->m.state == RUMOR_MEMB_SUSPECT && !e->m.doubted && u->state != RUMOR_MEMB_SUSPECT) {
        rumor_memb_update_t dead;
        memb_entry_update(e, RUMOR_MEMB_DEAD, &dead);
        m->stats.deaths++;
        return apply_claim(m, &dead, now);
    }
    cred_t *c = cred_w(e);
    if (!c) return newer; /* (out of memory: the claim is not checked) */
    const bool starts = e->m.state == RUMOR_MEMB_ALIVE;
    if (starts) {
        e->m.state = RUMOR_MEMB_SUSPECT;
        e->m.doubted = true;
        memcpy(c->claimant, from, RUMOR_KEY_LEN);
    }
    if (now >= c->checked_ms + m->cfg.period_ms) {
        c->checked_ms = now;
        memb_send_ping(m, e->m.key, e->m.addr, m->next_seq++); /* its ack is its word */
    }
    /* Dead after suspect_ms of silence since the check that began the suspicion (a check
     * within the last period, after the member was last heard): never counted from a claim. */
    if (starts) e->suspect_since = c->checked_ms;
    return true;
}

/* Strict: a claim from another member about one outside our view: its newer signed record is
 * taken (a reservoir entry, or one back from a tomb when alive); what the sender says of its
 * state only matters for a member we hear alive (the reservoir's hellos find out the rest). */
static bool claim_about_other(rumor_memb_t *m, const rumor_memb_update_t *u, uint64_t now)
{
    const int t = find_tomb(m, u->key);
    int p = find_passive(m, u->key);
    if (t >= 0) {
        if (u->state != RUMOR_MEMB_ALIVE || u->inc <= m->tombs[t].inc) return false;
        memb_remove_tomb(m, t); /* it signed an incarnation after the one it died at */
    }
    if (p >= 0) {
        rumor_memb_update_t *q = &m->passive[p];
        keep_cert(m, q->cert, &q->cert_len, u->cert, u->cert_len, false);
        if (u->inc < q->inc || (u->inc == q->inc && !beats_record(q, u->boot, u->undialable, u->addr))) return false;
        const bool moved = strcmp(q->addr, u->addr) != 0;
        uint8_t cert[RUMOR_MEMB_CERT_MAX];
        const uint16_t cert_len = q->cert_len;
        memcpy(cert, q->cert, cert_len);
        *q = *u;
        q->cert_len = cert_len; /* (the one kept above) */
        memcpy(q->cert, cert, cert_len);
        q->state = RUMOR_MEMB_ALIVE;
        if (moved) m->tries[p] = 0, m->invited[p] = 0; /* (a new address is asked afresh, on the budget) */
    } else {
        if (u->state != RUMOR_MEMB_ALIVE || !u->addr[0]) return false;
        if (u->inc > inc_ceiling(m, now)) {
            refuse_claim(m);
            return false;
        }
        memb_passive_add(m, u);
        p = find_passive(m, u->key);
    }
    if (p < 0) return false;
    const rumor_memb_update_t alive = m->passive[p]; /* (before an invite may forget it) */
    if (m->n_view < m->cfg.view_size) memb_invite(m, p, now);
    memb_disseminate(m, &alive);
    return true;
}

bool memb_apply(rumor_memb_t *m, const uint8_t *from, const rumor_memb_update_t *u, uint64_t now)
{
    if (!m->cfg.strict || !from || same_key(u->key, m->self_key)) return apply_claim(m, u, now);
    if (u->state > RUMOR_MEMB_LEFT || u->cert_len > RUMOR_MEMB_CERT_MAX) {
        m->stats.dropped_input++;
        return false;
    }
    if (!u->proven) {
        refuse_claim(m); /* not the member's record: nothing of it is believed */
        return false;
    }
    const int v = find_view(m, u->key);
    return v >= 0 ? claim_about_view(m, from, v, u, now) : claim_about_other(m, u, now);
}

size_t rumor_memb_record(uint8_t out[RUMOR_MEMB_RECORD_MAX], const uint8_t key[RUMOR_KEY_LEN], uint32_t inc,
                         uint64_t boot, bool undialable, const char *addr)
{
    size_t n = 0;
    memcpy(out, "rumor-member-2\0\0", 16);
    n += 16;
    memcpy(out + n, key, RUMOR_KEY_LEN);
    n += RUMOR_KEY_LEN;
    for (int i = 3; i >= 0; i--) out[n++] = (uint8_t)(inc >> (8 * i));
    for (int i = 7; i >= 0; i--) out[n++] = (uint8_t)(boot >> (8 * i));
    out[n++] = undialable ? 1 : 0;
    size_t a = addr ? strlen(addr) : 0;
    if (a > RUMOR_MEMB_ADDR_LEN - 1) a = RUMOR_MEMB_ADDR_LEN - 1;
    out[n++] = (uint8_t)a;
    memcpy(out + n, addr, a);
    return n + a;
}

void memb_sign_self(rumor_memb_t *m)
{
    if (!m->cfg.sign) return;
    uint8_t rec[RUMOR_MEMB_RECORD_MAX];
    const size_t len = rumor_memb_record(rec, m->self_key, m->inc, m->self_boot, m->self_undialable, m->self_addr);
    m->cfg.sign(m->cfg.sign_arg, rec, len, m->self_proof);
    m->self_proven = true;
}

void rumor_memb_set_undialable(rumor_memb_t *m, bool undialable)
{
    /* A new record is a new incarnation (beats_record): at the top of the range none is left, and
     * the flag stays as signed. */
    if (m->self_undialable == undialable || m->inc >= UINT32_MAX - 1) return;
    m->self_undialable = undialable;
    m->inc++;
    memb_sign_self(m);
    rumor_memb_update_t me;
    memb_self_update(m, &me);
    memb_disseminate(m, &me);
}

/* The member's own word (a message whose sender is the member): into the view alive if
 * there is room (else the reservoir), whatever tomb or claim we hold, at the higher of its
 * incarnation and the one we hold; its address, boot id (when given, nonzero) and
 * certificate (when given) replace ours. Strict: its incarnation, boot id and address are
 * its signed record's (proof), taken whole or not at all; a message without one says only
 * that it is alive. */
void memb_spoke(rumor_memb_t *m, const uint8_t *key, const char *addr, uint32_t inc, uint64_t boot, bool undialable,
                const uint8_t *cert, size_t cert_len, const uint8_t *proof, uint64_t now)
{
    const bool strict = m->cfg.strict;
    int v = find_view(m, key);
    if (v >= 0) {
        entry_t *e = &m->view[v];
        if (e->m.state == RUMOR_MEMB_SUSPECT && e->m.doubted) disproved(m, cred_of(e)->claimant, now);
        e->m.doubted = false;
        const uint32_t was = e->m.inc;
        bool changed = e->m.state != RUMOR_MEMB_ALIVE;
        if (strict) {
            if (proof) changed |= take_record(m, e, inc, boot, undialable, addr, proof, true, now);
        } else {
            if (inc > e->m.inc) e->m.inc = inc;
            /* Its own word, but at most one new address a period: each one is a dial, and a
             * member must not make us dial a stream of addresses of its choosing. */
            if (strcmp(e->m.addr, addr) != 0 && now >= e->addr_since + m->cfg.period_ms)
                (void)entry_move_addr(e, addr, now);
            if (boot) e->m.boot = boot;
        }
        changed |= e->m.inc > was;
        e->m.state = RUMOR_MEMB_ALIVE;
        e->m.last_seen_ms = now;
        keep_entry_cert(m, e, cert, cert_len, true);
        if (changed) {
            rumor_memb_update_t u;
            memb_entry_update(e, RUMOR_MEMB_ALIVE, &u);
            memb_disseminate(m, &u);
        }
        return;
    }
    rumor_memb_update_t u;
    memset(&u, 0, sizeof u);
    memcpy(u.key, key, RUMOR_KEY_LEN);
    copy_addr(u.addr, addr);
    u.state = RUMOR_MEMB_ALIVE;
    u.inc = inc;
    u.boot = boot;
    u.undialable = undialable;
    const int t = find_tomb(m, key), p = find_passive(m, key);
    if (strict) {
        /* The newest record we have of it, whole: its own (proof), or the reservoir's. */
        if (p >= 0 && (!proof || m->passive[p].inc > inc)) u = m->passive[p];
        else if (proof) u.proven = true, memcpy(u.proof, proof, RUMOR_MEMB_PROOF_LEN);
        else if (t >= 0) u.inc = m->tombs[t].inc, u.boot = 0; /* (unsigned: never passed on) */
        u.state = RUMOR_MEMB_ALIVE;
    } else {
        if (t >= 0 && m->tombs[t].inc > u.inc) u.inc = m->tombs[t].inc;
        if (p >= 0 && m->passive[p].inc > u.inc) u.inc = m->passive[p].inc;
        if (p >= 0 && !u.boot) u.boot = m->passive[p].boot;
    }
    set_cert(u.cert, &u.cert_len, cert, cert_len);
    if (p >= 0 && !u.cert_len) set_cert(u.cert, &u.cert_len, m->passive[p].cert, m->passive[p].cert_len);
    if (t >= 0) memb_remove_tomb(m, t);
    if (p >= 0) m->tries[find_passive(m, key)] = 0; /* it answered */
    memb_admit(m, &u, now);
    memb_disseminate(m, &u);
}
