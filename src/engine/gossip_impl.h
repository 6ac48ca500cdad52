/*
 * gossip_impl.h - what the gossip engine's files share (gossip.c, gossip_life.c, gossip_in.c,
 * gossip_state.c, gossip_robust.c, gossip_secure.c, gossip_choco.c); not an interface:
 * gossip.h is.
 *
 * The engine is one round loop (gossip.c) and a mixing rule chosen at creation: how a round's
 * sends are made, how a neighbour's chunk joins the round's accumulator, and what the
 * accumulator becomes at the round's end. Plain weighted averaging lives in gossip.c; robust
 * mixing (clip, trim), secure mixing (masked sums) and compressed gossip (CHOCO) each in a
 * file of their own, behind the table of rules below. The engine's life (gossip_life.c),
 * chunks in (gossip_in.c) and its state (gossip_state.c) are files of their own too.
 * Functions one file lends another are gsp_*; the rest stay static.
 */
#ifndef RUMOR_GOSSIP_IMPL_H
#define RUMOR_GOSSIP_IMPL_H

#include "gossip.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SHARE_MAX_SGP 1048576.0 /* 2^20, the wire's limit on a weight */
#define SLOTS 4                 /* accumulators: the round in flight and the next three */
#define SGP_STALENESS 4         /* push-sum rounds in a row without input before a peer waits */
#define WEIGHT_MIN 0x1p-60      /* push-sum weights never sink below this (no 0/0) */
#define STRIKE_FAR 100.0        /* robust: a chunk this many radii away is a strike */
#define STRIKE_FAR_GUARD 10.0   /* guard's (and its start radius): honest neighbours came within 1.5 */
#define STRIKES_BAN 3           /* robust: strikes that ban a sender ... */
#define BAN_ROUNDS 50           /* ... for this many rounds */
#define STRIKE_TABLE 64         /* robust: senders with strikes remembered */
#define LATE_ROUNDS 8           /* rounds back a late model still teaches the deadline how late */
#define KF_EVERY 4              /* choco: rounds between two keyframes a neighbour asks for */
#define PLAUSIBLE_RMS RUMOR_GOSSIP_PLAUSIBLE_RMS
#define PLAUSIBLE_FLOOR RUMOR_GOSSIP_PLAUSIBLE_FLOOR
#define SGP_AHEAD RUMOR_GOSSIP_SGP_AHEAD
#define SENDER_ROUNDS RUMOR_GOSSIP_SENDER_ROUNDS

/* One sender's message in one round: which chunks came, and whether it went bad. */
typedef struct {
    uint8_t key[RUMOR_KEY_LEN];
    uint64_t round;  /* the message's round (sgp may see two rounds of one sender in a slot) */
    uint32_t got;
    bool bad;        /* a chunk was rejected: ignore the rest of this message */
    double *cd2;     /* robust: per chunk, squared distance to the centre (-1: not delivered) */
    float share;     /* robust: its weight in this round */
    bool struck;     /* robust: it got its strike for this message */
    int tidx;        /* trim, guard's holds: its copy in the slot's tbuf; -1: none */
    bool complete;
    uint64_t *bits;  /* chunk_count bits */
    uint64_t mix;    /* secure: the mix id of its chunks */
    bool mix_bad;    /* secure: its chunks disagreed on the mix id */
} sender_t;

/* An accumulator: the weighted sum of the snapshots of one round, per-chunk weight totals,
 * and who contributed. */
typedef struct {
    float *acc;       /* vec floats */
    double *accw;     /* chunk_count */
    uint64_t round;
    bool live;        /* holds something for `round` */
    uint64_t started; /* when this peer added its own snapshot (self_added) */
    int ref;          /* acc holds sum of a_j (v_j - ref): a snapshot index, or -1 for 0 */
    bool self_added;
    sender_t senders[RUMOR_GOSSIP_MAX_SENDERS];
    int n_senders;
    uint64_t *bits;   /* RUMOR_GOSSIP_MAX_SENDERS * words */
    double *cd2;      /* robust: RUMOR_GOSSIP_MAX_SENDERS * chunk_count distances */
    float *tbuf;      /* trim: RUMOR_GOSSIP_TRIM_SENDERS models, as they arrived; guard under
                         diloco: a first round's early chunks, held (gossip_robust.c) */
    int n_trim;
    /* dpsgd, diloco: the in-neighbours this round waits for (fixed at its start: secure
     * mixing's masks and choco's mix are theirs), and whether each still sends to us under
     * the graph of the view as it stands now (round_ready), as of view generation in_gen */
    uint8_t (*expected)[RUMOR_KEY_LEN];
    int n_expected;
    bool still[RUMOR_GOSSIP_MAX_SENDERS];
    uint64_t in_gen;
    /* secure mixing: masked words summed mod 2^32, senders and their shares per chunk */
    uint32_t *macc;   /* vec */
    uint32_t *mcount; /* chunk_count */
    double *mshare;   /* chunk_count */
    uint64_t mix;     /* this peer's mix id for the round (begin_round) */
} slot_t;

typedef struct {
    float *x;         /* vec floats */
    double *w;        /* chunk_count per-chunk weights sent with it */
    int refs;         /* sends not yet released */
} snap_t;

typedef struct {
    uint8_t peer[RUMOR_KEY_LEN];
    double share;
    uint64_t round;
    int snap;
    bool keyframe, need; /* choco */
    uint64_t ver;
    bool masked;
    uint64_t mix;
    rumor_secmix_edges_t edges;
} pending_t;

/* choco: a delta held until its round comes. */
typedef struct {
    int copy;
    uint64_t lin, round, ver;
    uint32_t chunk;
    int codec;
    size_t at, len;  /* its bytes in pend_bytes */
} pend_t;

/* choco: a neighbour's public copy as this peer holds it, and what this peer sent it. */
typedef struct {
    uint8_t key[RUMOR_KEY_LEN];
    bool used;
    bool heard;          /* it sent us a piece of its copy since the entry was made */
    int n_pend;          /* its deltas held for a later round (all later ones wait behind them) */
    size_t pend_len;     /* their bytes */
    uint64_t lin, base;  /* the lineage held */
    float *x;            /* vec */
    uint64_t *ver;       /* per chunk: deltas applied */
    uint64_t *valid;     /* per chunk bits: the chunk follows the sender's copy */
    size_t n_valid;
    float share;         /* the weight of its last message */
    uint64_t last;       /* the round it was last heard from or sent to */
    bool kf_wanted;      /* it lacks our copy: send it whole */
    uint64_t kf_round;   /* when it last got a keyframe it asked for (1 + round; 0: never) */
    uint64_t kf_sent;    /* 1 + the round of the last keyframe we sent it; 0: none */
    bool needs;          /* its last message said it lacks our copy: the edge sits out of the mix */
    bool sent_any;       /* sent_ver is meaningful */
    uint64_t sent_ver;   /* the version of our copy it got last */
} copy_t;

/* Robust mixing: a sender's strikes and ban. */
typedef struct {
    uint8_t key[RUMOR_KEY_LEN];
    int strikes;
    uint64_t banned_until; /* first round it is heard again; 0: not banned */
    uint64_t last;         /* round of its last strike (the least recent is forgotten first) */
} strike_t;

/* A member of the view: its key (first, so entries sort by key), its run's boot id, who can
 * dial it (its reach class) and its place (rumor_gossip_set_view_reach). */
typedef struct {
    uint8_t key[RUMOR_KEY_LEN];
    uint64_t boot;
    uint64_t reach;
    uint64_t place;
} view_entry_t;

/* The members of one nonzero reach class (arrange()). */
typedef struct {
    uint64_t cls;
    size_t size;
} reach_group_t;

/* A position or a member and its reach class (arrange()). */
typedef struct {
    uint64_t cls;
    size_t i;
} reach_rank_t;

typedef struct gsp_rule gsp_rule_t;

struct rumor_gossip {
    rumor_gossip_config_t cfg;
    const gsp_rule_t *rule;    /* how this engine mixes (gossip_impl.h) */
    rumor_topology_t *topo;
    size_t P, vec, chunk_params, chunks, words;
    bool overlap;
    bool closing;              /* the next gossip point is the run's last: it overlaps nothing */
    bool began;                /* the round in flight was begun at this gossip point */
    double *w;                 /* push-sum weight per chunk */
    float *theta, *mom;        /* diloco */
    bool dol;                  /* overlapped diloco */
    float *sent;               /* overlapped diloco: the inner result the round in flight sent, exactly */
    snap_t snaps[2];
    slot_t slots[SLOTS];
    uint64_t round;            /* the round in flight, or the next to start */
    bool inflight;
    int cur_snap;              /* the latest snapshot (the round in flight's, when one is) */
    bool have_snap;            /* cur_snap holds one */
    uint64_t ahead;            /* the round to skip to: the lowest seen beyond the window since the
                                  last finish, once two senders are that far (gsp_note_ahead); 0: none */
    uint64_t ahead_low;        /* ... the lowest seen, */
    uint8_t ahead_from[RUMOR_KEY_LEN]; /* ... from this sender, */
    bool ahead_two;            /* ... and whether another sender was beyond the window too */
    uint64_t forced;           /* rumor_gossip_adopt during a round: go on from here at its finish */
    /* view */
    view_entry_t *view;
    view_entry_t *ranked;          /* gather_members' scratch: the view and this peer by place */
    size_t view_count;
    uint64_t view_hash, view_gen;  /* what set_view_reach was last given, and how often it changed */
    uint8_t (*members)[RUMOR_KEY_LEN];
    uint64_t members_gen;          /* view_gen + 1 when members were last gathered (0: never), */
    size_t members_n, members_me;  /* ... their count and this peer's index */
    uint64_t *member_boot;         /* each member's run id as this peer knows it (0: unknown) */
    uint64_t self_reach;           /* this peer's reach class (0: anyone can dial it) */
    uint64_t self_place;           /* ... and its place (the graph's rank order; never 0) */
    uint64_t *member_reach;        /* ... each member's (placed by arrange()) */
    uint64_t *pos_reach;           /* the class arrange() gives each position, for ... */
    size_t reach_n, reach_m;       /* ... n members in these m classes (reach_key; m 0: none yet) */
    reach_group_t *reach_key;      /* ... in class order (the inputs pos_reach was dealt for) */
    uint8_t *reach_adj;            /* reach_positions' graph, n x n, and per position its degree, */
    uint32_t *reach_deg;           /* ... its edges to dealt positions, and to its own class's; */
    size_t reach_cap;              /* ... for up to this many members (kept: allocated once) */
    reach_group_t *reach_grp;      /* arrange()'s scratch: the nonzero classes, ... */
    reach_rank_t *reach_rank;      /* ... and the positions, then the members, by class */
    uint8_t (*tmp_keys)[RUMOR_KEY_LEN];
    uint64_t *tmp_boot;
    /* outbox */
    pending_t *outbox;
    size_t out_head, out_count, out_cap;
    /* adaptive deadline */
    double hist[RUMOR_GOSSIP_HISTORY];
    size_t hist_count, hist_next;
    double rounds_ms[RUMOR_GOSSIP_HISTORY]; /* our own work between gossip points (no waits) */
    size_t rounds_count, rounds_next;
    uint64_t last_done;        /* when the last gossip point ended */
    bool done_once, waiting;   /* waiting: this gossip point already had its first call */
    uint64_t wait_ms;          /* the current round's allowed wait */
    uint64_t snap_wanted;      /* since when a gossip point waits for the wire to give back the
                                  buffer of the next snapshot (0: it does not) */
    uint64_t began_at[LATE_ROUNDS], began_round[LATE_ROUNDS]; /* when recent rounds started (round % LATE_ROUNDS) */
    int quiet;                 /* rounds finished in a row with nothing received (sgp's staleness,
                                  the others' deadline: adaptive_wait) */
    /* robust mixing */
    double *tau;               /* clipping radius per chunk; before a round finished 0 (clip), -1 (guard) */
    double *moved;             /* per chunk, how far the latest snapshot lies from the one before */
    double *own_pg;            /* guard under diloco: per chunk, our latest pseudo-gradient's norm */
    /* plausibility: the RMS of the latest snapshot, per chunk (the receiver's own scale) */
    double *own_rms;
    strike_t strikes[STRIKE_TABLE];
    int n_strikes;
    /* secure mixing */
    uint32_t *out_rank;        /* a round's out-neighbours, copied from the topology */
    double *out_share;
    bool *chunk_ok;            /* chunk_count */
    /* compressed gossip (choco) */
    bool choco;
    float *xhat, *x0;          /* this peer's public copy; the initial model (copies of fresh peers start there) */
    uint8_t *enc[2];           /* each snapshot's delta, encoded */
    size_t *enc_off[2];
    uint64_t cver;             /* versions of xhat: deltas applied */
    uint64_t base, x0_base;    /* the hash of our copy's version 0; of the initial model */
    bool all_keyframes;        /* a delta was lost on our side: every neighbour gets a keyframe */
    copy_t *copies;            /* RUMOR_GOSSIP_CHOCO_PEERS */
    pend_t *pend;              /* deltas of later rounds, held */
    size_t n_pend, cap_pend;
    uint8_t *pend_bytes;
    size_t pend_len, cap_pend_bytes;
    rumor_gossip_stats_t st;
};


/* A round as begin_round sees it: the members (ranked by key: members[me] is this peer), the
 * out-neighbours and their shares (g->out_rank, g->out_share), and the in-neighbours when the
 * topology gave them (has_in: a barrier round with someone to send to). */
typedef struct {
    size_t n, me, n_out, n_in;
    const uint32_t *in;
    bool has_in;
} gsp_round_t;

/* A mixing rule. */
struct gsp_rule {
    const char *name;
    /* Whether the round waits for in-neighbour key (NULL: every one). */
    bool (*waits_for)(rumor_gossip_t *g, const uint8_t key[RUMOR_KEY_LEN]);
    /* The round's sends, from snapshot sb; s is the round's accumulator, its expected senders
     * listed (the rule may change them). */
    void (*begin)(rumor_gossip_t *g, slot_t *s, const gsp_round_t *r, int sb);
    /* Chunk c of sender e (already past the checks every rule makes) into s: checked and
     * added, or false when dropped (counted). */
    bool (*add)(rumor_gossip_t *g, slot_t *s, sender_t *e, const rumor_gossip_chunk_t *c, const void *payload,
                size_t off, size_t n);
    /* The round's end, before the mix: the accumulator in its final delta form (NULL: as is). */
    void (*settle)(rumor_gossip_t *g, slot_t *s, const float *snap);
    /* After the mix (NULL: nothing). */
    void (*after)(rumor_gossip_t *g, const slot_t *s);
    /* Once this peer's own snapshot is in the round's accumulator (NULL: nothing): what the
     * rule held until then. */
    void (*self)(rumor_gossip_t *g, slot_t *s);
    /* A rule with state of its own (choco) takes every chunk itself, after the shape checks,
     * and mixes the round itself, returning the consensus distance squared (NULL: the above). */
    bool (*chunk)(rumor_gossip_t *g, const uint8_t peer[RUMOR_KEY_LEN], const rumor_gossip_chunk_t *c,
                  const void *payload, size_t len, size_t off, size_t n, uint64_t now);
    double (*mix)(rumor_gossip_t *g, slot_t *s, float *x);
};

/* The weighted q quantile of n distances (sorted in place with their weights): the first whose
 * cumulative weight reaches q of the total; -1 when there are none. */
double gsp_weighted_quantile(double *dist, double *wt, int n, double q);

extern const gsp_rule_t gsp_rule_plain, gsp_rule_clip, gsp_rule_trim, gsp_rule_secure, gsp_rule_choco;

static inline const float *ref_of(const rumor_gossip_t *g, const slot_t *s)
{
    return s->ref >= 0 ? g->snaps[s->ref].x : NULL;
}

/* Floats in chunk c. */
static inline size_t chunk_len(const rumor_gossip_t *g, size_t c)
{
    const size_t off = c * g->chunk_params;
    return g->vec - off < g->chunk_params ? g->vec - off : g->chunk_params;
}

/* A neighbour's chunk is read cold: it comes long after it was written (in a simulator, among
 * thousands of others). The pass that reads it first goes block by block and asks for the
 * lines GSP_AHEAD bytes past the block it sums (the hardware's prefetcher stops at each page):
 * 1,024 virtual peers of logreg run their loop 8% faster. */
#define GSP_BLOCK 256                    /* floats a block */
#define GSP_AHEAD (2 * GSP_BLOCK * 4)    /* bytes ahead */
static inline void gsp_prefetch(const void *v, size_t i)
{
    const uintptr_t p = (uintptr_t)v + 4 * i + GSP_AHEAD; /* past the end is fine: a prefetch never faults */
    for (size_t k = 0; k < GSP_BLOCK * 4; k += 64) __builtin_prefetch((const void *)(p + k));
}

/* The one accumulate every mixing path uses: acc += a (v - ref), or a v when ref is NULL.
 * v may be any alignment (a payload straight off the wire). Near consensus v - ref is small,
 * so float32 rounding stays far below the parameters' own precision and cannot drift the
 * average. */
static inline void acc_add(float *restrict acc, const void *v, const float *restrict ref, size_t n, float a)
{
    const uint8_t *restrict p = v;
    if (ref) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float x;
            memcpy(&x, p + 4 * i, 4);
            acc[i] += a * (x - ref[i]);
        }
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float x;
            memcpy(&x, p + 4 * i, 4);
            acc[i] += a * x;
        }
    }
}

/* gossip.c: the round loop */
void gsp_note_delay(rumor_gossip_t *g, double ms);
/* A message's last chunk of round r, before ours, came at now: how late, for the deadline. */
void gsp_note_late(rumor_gossip_t *g, uint64_t r, uint64_t now);
/* A chunk of round r, beyond the window, from peer: g->ahead becomes the lowest such round once
 * two senders are beyond the window (or the view holds one member only); gsp_clear_ahead. */
void gsp_note_ahead(rumor_gossip_t *g, const uint8_t peer[RUMOR_KEY_LEN], uint64_t r);
void gsp_clear_ahead(rumor_gossip_t *g);
void gsp_slot_reset(rumor_gossip_t *g, slot_t *s);
pending_t *gsp_push_send(rumor_gossip_t *g, const uint8_t key[RUMOR_KEY_LEN], double share, int snap);
slot_t *gsp_slot_for(rumor_gossip_t *g, uint64_t round);
void gsp_rebase(rumor_gossip_t *g, slot_t *s, int to);
sender_t *gsp_find_sender(slot_t *s, const uint8_t key[RUMOR_KEY_LEN], uint64_t round);
/* The plain rule's sends: the snapshot to every out-neighbour, with its share. */
void gsp_plain_begin(rumor_gossip_t *g, slot_t *s, const gsp_round_t *r, int sb);
/* gossip_life.c: specs, creation, the view */
uint64_t gsp_copy_hash(const float *x, size_t n);
int gsp_key_cmp(const void *a, const void *b);
/* gossip_in.c: chunks in */
bool gsp_drop(rumor_gossip_t *g, rumor_gossip_drop_t why);
bool gsp_all_finite(const uint8_t *p, size_t n);
/* gossip_state.c: plausibility, state */
double gsp_sumsq(const void *v, size_t n);
void gsp_own_scale(rumor_gossip_t *g);
void gsp_snap_copy(rumor_gossip_t *g, float *restrict dst, const float *restrict src);
bool gsp_plausible_ss(const rumor_gossip_t *g, size_t c, double ss, size_t n);
double gsp_weight_bound(const rumor_gossip_t *g);
/* gossip_choco.c */
bool gsp_choco_alloc(rumor_gossip_t *g, const float *x0);
void gsp_choco_encode(rumor_gossip_t *g, const float *x, int sb);
copy_t *gsp_copy_find(rumor_gossip_t *g, const uint8_t key[RUMOR_KEY_LEN], bool create);
/* gossip_robust.c */
const strike_t *gsp_strike_find(rumor_gossip_t *g, const uint8_t key[RUMOR_KEY_LEN]);

#endif
