/* membership_impl.h - what membership.c and membership_claims.c share: the state machine's
 * types and small helpers. Not for other modules (membership.h is the interface). */
#ifndef RUMOR_MEMBERSHIP_IMPL_H
#define RUMOR_MEMBERSHIP_IMPL_H

#include "membership.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BOOTSTRAPS 16
#define OUTBOX_CAP 256 /* actions held at most */
#define OUTBOX_MIN 8   /* ... in a ring that grows to it when full and shrinks back when drained */
#define RELAY_CAP 32
#define FORGET_HOLD (4 * RUMOR_MEMB_BACKOFF_MAX) /* periods a forgotten member stays so, at least */
#define MUTE_PERIODS 60 /* strict: periods a member's claims are ignored once it lied too often */
#define MUTED_MAX 16    /* strict: members muted at once (the longest muted gives way) */
#define LIARS_MAX 32    /* strict: claimants counted at once (the longest since a count gives way) */

/* What a view member has beyond its state, which a simulator's members (no certificates, no
 * signed records) never have: held apart from the entry, allocated when there is something
 * to hold, so that a view of a thousand members is a thousand small entries. */
typedef struct {
    uint16_t cert_len; /* its certificate, passed on with every entry about it */
    uint8_t cert[RUMOR_MEMB_CERT_MAX];
    bool proven;       /* strict: proof is its signed record at (m.inc, m.boot, m.addr) */
    uint8_t proof[RUMOR_MEMB_PROOF_LEN];
    uint8_t claimant[RUMOR_KEY_LEN];
    uint64_t checked_ms; /* strict: our last ping to check a claim about it */
} cred_t;

typedef struct {
    rumor_memb_member_t m; /* (m.addr: the entry's own copy, from dup_addr) */
    uint64_t suspect_since;
    uint64_t addr_since; /* when its address last changed (on its own word) */
    cred_t *c;           /* NULL: nothing held (cred_of reads it as zeros) */
} entry_t;

/* A member known dead or gone, remembered for a while (tomb_ttl) so that stale `alive`
 * gossip at the same incarnation cannot bring it back. Forgetting it later is what lets two
 * halves of a healed partition accept each other again; a member wrongly brought back by
 * old gossip is simply probed and buried again. */
typedef struct {
    uint8_t key[RUMOR_KEY_LEN];
    uint32_t inc;
    rumor_memb_state_t state;
    uint64_t since, hold; /* forgotten at since + hold */
} tomb_t;

typedef struct {
    rumor_memb_update_t u;
    int sent;
} queued_t;

/* An outgoing action, compact: piggybacked updates and peer samples are chosen when the
 * driver takes it, so they are as fresh as possible and the outbox stays small. */
typedef struct {
    rumor_memb_act_kind_t kind;
    uint8_t key[RUMOR_KEY_LEN];
    char addr[RUMOR_MEMB_ADDR_LEN];
    rumor_memb_state_t state;
    rumor_memb_kind_t msg_kind;
    uint32_t seq, ack;
    bool has_target;
    uint8_t target[RUMOR_KEY_LEN];
    char target_addr[RUMOR_MEMB_ADDR_LEN];
    bool tell_tomb; /* peers: tell the recipient we hold it dead/left at tomb_inc */
    uint32_t tomb_inc;
    rumor_memb_state_t tomb_state;
} pending_t;

/* A ping we send on behalf of a ping-req, and whom to tell when it is answered. */
typedef struct {
    bool used;
    uint8_t requester[RUMOR_KEY_LEN];
    char requester_addr[RUMOR_MEMB_ADDR_LEN];
    uint32_t requester_seq, our_seq;
    uint8_t target[RUMOR_KEY_LEN];
    uint64_t deadline;
} relay_t;

struct rumor_memb {
    rumor_memb_config_t cfg;
    rumor_rng_t rng;
    uint8_t self_key[RUMOR_KEY_LEN];
    char self_addr[RUMOR_MEMB_ADDR_LEN];
    uint32_t inc;
    bool left;
    uint64_t self_boot;
    bool self_undialable; /* part of our record (rumor_memb_set_undialable) */
    uint16_t self_cert_len;
    uint8_t self_cert[RUMOR_MEMB_CERT_MAX];
    bool self_proven;  /* strict: self_proof is our record signed (cfg.sign) */
    uint8_t self_proof[RUMOR_MEMB_PROOF_LEN];
    uint64_t refuted_ms; /* strict: our last refutation */
    struct {
        uint8_t key[RUMOR_KEY_LEN];
        uint64_t until;
    } muted[MUTED_MAX];  /* strict: members whose claims are ignored until then */
    struct {
        uint8_t key[RUMOR_KEY_LEN];
        uint8_t lies;    /* its claims the members' own word disproved since `since` */
        uint64_t since;  /* (0: a free slot) */
    } liars[LIARS_MAX];  /* strict: kept apart from the view, as muted: a claimant in the
                            reservoir counts too, and leaving and coming back resets nothing */

    entry_t *view;
    int n_view;
    rumor_memb_update_t *passive;
    uint64_t *invited;       /* per reservoir member: when we last said hello to it (0: never) */
    uint8_t *tries;          /* ... and how many hellos it left unanswered */
    uint64_t dial_tat;       /* strict: the dial budget's theoretical arrival time (GCRA) */
    int n_passive;
    tomb_t *tombs;
    int n_tombs, tomb_cap, tomb_next;
    uint64_t tomb_ttl;
    queued_t *dq;
    int n_dq, dq_cap;

    struct {
        bool active, indirect_sent;
        uint8_t target[RUMOR_KEY_LEN];
        uint32_t seq;
        uint64_t started;
    } probe;
    uint8_t (*order)[RUMOR_KEY_LEN];
    int n_order, order_pos;
    relay_t relays[RELAY_CAP];
    uint32_t next_seq;
    uint64_t next_probe_at, next_exchange_at, next_rejoin_at;
    bool started;
    uint64_t started_at;

    struct {
        uint8_t key[RUMOR_KEY_LEN];
        char addr[RUMOR_MEMB_ADDR_LEN];
    } boot[MAX_BOOTSTRAPS];
    int n_boot;

    pending_t *outbox; /* a ring of out_cap (OUTBOX_MIN..OUTBOX_CAP): a burst (a leave's byes
                          to the whole view) holds a large one only until the driver drains it,
                          which a simulator's thousand memberships would otherwise all keep */
    int out_head, out_count, out_cap;
    rumor_memb_stats_t stats;
};



static inline bool same_key(const uint8_t *a, const uint8_t *b) { return memcmp(a, b, RUMOR_KEY_LEN) == 0; }

static inline void copy_addr(char *dst, const char *src)
{
    snprintf(dst, RUMOR_MEMB_ADDR_LEN, "%s", src ? src : "");
}

/* dead and left are final at an incarnation; suspect outranks alive. */
static inline int state_rank(rumor_memb_state_t s) { return s == RUMOR_MEMB_ALIVE ? 0 : s == RUMOR_MEMB_SUSPECT ? 1 : 2; }

static inline bool supersedes(uint32_t inc, rumor_memb_state_t st, uint32_t cur_inc, rumor_memb_state_t cur_st)
{
    return inc > cur_inc || (inc == cur_inc && state_rank(st) > state_rank(cur_st));
}

/* A claim at inc is beyond the bounded step from the last incarnation held, ref. */
static inline bool beyond(uint32_t inc, uint32_t ref) { return inc > ref && inc - ref > RUMOR_MEMB_INC_STEP; }

/* The highest incarnation a claim about a member we hold nothing of may carry: incarnations
 * are drawn from a clock in seconds (membership.h), ours is one reading of it. */
static inline uint32_t inc_ceiling(const rumor_memb_t *m, uint64_t now)
{
    uint64_t c = (uint64_t)m->inc + (now > m->started_at ? (now - m->started_at) / 1000 : 0) + RUMOR_MEMB_INC_SLACK;
    return c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
}

static inline void set_cert(uint8_t *dst, uint16_t *dst_len, const uint8_t *cert, size_t len)
{
    if (!cert || len == 0 || len > RUMOR_MEMB_CERT_MAX) return;
    memcpy(dst, cert, len);
    *dst_len = (uint16_t)len;
}

/* Into *dst the certificate cert of a member, when none is held or cfg.cert_order puts it after
 * the one held (without cert_order: when own, the member's own word). */
static inline void keep_cert(const rumor_memb_t *m, uint8_t *dst, uint16_t *dst_len, const uint8_t *cert, size_t len,
                             bool own)
{
    if (!cert || len == 0 || len > RUMOR_MEMB_CERT_MAX) return;
    if (*dst_len == len && memcmp(dst, cert, len) == 0) return; /* (the usual case: the one held) */
    if (*dst_len && (m->cfg.cert_order ? m->cfg.cert_order(cert, len, dst, *dst_len) <= 0 : !own)) return;
    set_cert(dst, dst_len, cert, len);
}

extern const cred_t memb_no_cred;

/* e's credentials, to read. */
static inline const cred_t *cred_of(const entry_t *e) { return e->c ? e->c : &memb_no_cred; }

/* e's credentials, to write: NULL when out of memory (then nothing is held of it, and strict
 * mode passes nothing on about it). */
static inline cred_t *cred_w(entry_t *e)
{
    if (!e->c) e->c = calloc(1, sizeof *e->c);
    return e->c;
}

/* keep_cert into view entry e. */
static inline void keep_entry_cert(const rumor_memb_t *m, entry_t *e, const uint8_t *cert, size_t len, bool own)
{
    if (!cert || len == 0 || len > RUMOR_MEMB_CERT_MAX) return;
    cred_t *c = cred_w(e);
    if (c) keep_cert(m, c->cert, &c->cert_len, cert, len, own);
}

/* A view entry's own copy of addr (its first RUMOR_MEMB_ADDR_LEN - 1 bytes: a view holds
 * each address at its length, not at the longest an address may be); NULL when out of memory. */
static inline char *dup_addr(const char *addr)
{
    const size_t n = strnlen(addr ? addr : "", RUMOR_MEMB_ADDR_LEN - 1);
    char *s = malloc(n + 1);
    if (s) {
        if (n) memcpy(s, addr, n);
        s[n] = '\0';
    }
    return s;
}

/* Entry e moves to addr (its own copy; addr_since now): false, and nothing changed, when out
 * of memory. */
static inline bool entry_move_addr(entry_t *e, const char *addr, uint64_t now)
{
    char *s = dup_addr(addr);
    if (!s) return false;
    free((void *)e->m.addr);
    e->m.addr = s;
    e->addr_since = now;
    return true;
}

/* What entry e owns: its address and its credentials. */
static inline void entry_free(entry_t *e)
{
    free((void *)e->m.addr);
    free(e->c);
}

static inline int find_view(const rumor_memb_t *m, const uint8_t *key)
{
    for (int i = 0; i < m->n_view; i++)
        if (same_key(m->view[i].m.key, key)) return i;
    return -1;
}

static inline int find_passive(const rumor_memb_t *m, const uint8_t *key)
{
    for (int i = 0; i < m->n_passive; i++)
        if (same_key(m->passive[i].key, key)) return i;
    return -1;
}

static inline int find_tomb(const rumor_memb_t *m, const uint8_t *key)
{
    for (int i = 0; i < m->n_tombs; i++)
        if (same_key(m->tombs[i].key, key)) return i;
    return -1;
}


/* ---- shared between membership.c and membership_claims.c ---- */

pending_t *memb_send_to(rumor_memb_t *m, const uint8_t *key, const char *addr, rumor_memb_kind_t kind);
void memb_view_event(rumor_memb_t *m, rumor_memb_act_kind_t kind, const rumor_memb_member_t *e, rumor_memb_state_t state);
void memb_disseminate(rumor_memb_t *m, const rumor_memb_update_t *u);
void memb_self_update(const rumor_memb_t *m, rumor_memb_update_t *u);
void memb_entry_update(const entry_t *e, rumor_memb_state_t st, rumor_memb_update_t *u);
void memb_add_tomb(rumor_memb_t *m, const uint8_t *key, uint32_t inc, rumor_memb_state_t st, uint64_t now);
void memb_remove_tomb(rumor_memb_t *m, int t);
void memb_passive_add(rumor_memb_t *m, const rumor_memb_update_t *u);
void memb_passive_remove(rumor_memb_t *m, int i);
void memb_invite(rumor_memb_t *m, int i, uint64_t now);
entry_t *memb_place(rumor_memb_t *m, const rumor_memb_update_t *u, uint64_t now);
void memb_admit(rumor_memb_t *m, const rumor_memb_update_t *u, uint64_t now);
void memb_drop_from_view(rumor_memb_t *m, int i, rumor_memb_state_t why, uint64_t now);
void memb_send_ping(rumor_memb_t *m, const uint8_t *key, const char *addr, uint32_t seq);

/* membership_claims.c: what someone says about a member (from: the sender, NULL for our own
 * conclusions), true when it changed our view of it; the member's own word (proof: its
 * signed record, or NULL); our own record signed again (strict). */
bool memb_apply(rumor_memb_t *m, const uint8_t *from, const rumor_memb_update_t *u, uint64_t now);
void memb_spoke(rumor_memb_t *m, const uint8_t *key, const char *addr, uint32_t inc, uint64_t boot, bool undialable,
                const uint8_t *cert, size_t cert_len, const uint8_t *proof, uint64_t now);
void memb_sign_self(rumor_memb_t *m);

#endif
