/* gossip.c - the gossip engine's round loop (see gossip.h for the algorithms and the contract):
 * the deadline, rounds (accumulators, snapshots, the members placed on the graph, a round begun
 * and finished, the step), the outbox and plain mixing. Its life, chunks in and its state are in
 * gossip_life.c, gossip_in.c and gossip_state.c (gossip_impl.h). */
#include "gossip_impl.h"

/* ---- the deadline ---- */

void gsp_note_delay(rumor_gossip_t *g, double ms)
{
    g->hist[g->hist_next] = ms;
    g->hist_next = (g->hist_next + 1) % RUMOR_GOSSIP_HISTORY;
    if (g->hist_count < RUMOR_GOSSIP_HISTORY) g->hist_count++;
}

/* Late by more than a round: a peer whose deadline cut its neighbours' models runs ahead of
 * them, and their models then come rounds late; counted from the start of their round, they
 * teach its deadline to wait for them, and the peer stays in step. */
void gsp_note_late(rumor_gossip_t *g, uint64_t r, uint64_t now)
{
    const size_t k = (size_t)(r % LATE_ROUNDS);
    if (g->began_round[k] == r && g->began_at[k] && now > g->began_at[k])
        gsp_note_delay(g, (double)(now - g->began_at[k]));
}

/* The wait: the larger of median + k MAD and 1.5 times the 90th percentile of recent
 * arrival delays, plus min_wait. The percentile matters when delays are bimodal (neighbours
 * in step arrive at once, one a round behind arrives a round later): the median and MAD see
 * only the first mode and would cut the second every time. Late arrivals are in the history
 * too (see rumor_gossip_on_chunk), or a deadline that cut them would never learn. */
static uint64_t adaptive_wait(const rumor_gossip_t *g)
{
    if (g->hist_count < 4) return g->cfg.round_timeout_ms;
    double v[RUMOR_GOSSIP_HISTORY], d[RUMOR_GOSSIP_HISTORY];
    memcpy(v, g->hist, g->hist_count * sizeof *v);
    const double med = rumor_median(v, g->hist_count); /* sorts v */
    const double p90 = v[(g->hist_count * 9) / 10 < g->hist_count ? (g->hist_count * 9) / 10 : g->hist_count - 1];
    for (size_t i = 0; i < g->hist_count; i++) d[i] = fabs(g->hist[i] - med);
    const double mad = rumor_median(d, g->hist_count);
    double wait = med + g->cfg.deadline_k * mad;
    if (1.5 * p90 > wait) wait = 1.5 * p90;
    /* And at least twice our own work per round (local steps, not waits, or a dead peer's
     * waits would feed on themselves): a neighbour as fast as we are is never cut, so peers
     * stay in step, and only a dead or much slower one is left out. */
    if (g->rounds_count >= 4) {
        double r[RUMOR_GOSSIP_HISTORY];
        memcpy(r, g->rounds_ms, g->rounds_count * sizeof *r);
        const double own = 2.0 * rumor_median(r, g->rounds_count);
        if (own > wait) wait = own;
    }
    /* Rounds in a row that heard no one: the deadline may be what cuts them (a peer that ran
     * ahead of slower neighbours drops their models as stale, and their lateness no longer
     * reaches its history): twice as long a wait for each such round. */
    for (int q = 0; q < g->quiet && q < 16 && wait < (double)g->cfg.round_timeout_ms; q++) wait *= 2.0;
    wait += (double)g->cfg.min_wait_ms;
    if (wait > (double)g->cfg.round_timeout_ms) wait = (double)g->cfg.round_timeout_ms;
    return (uint64_t)wait;
}

/* ---- rounds ---- */

void gsp_slot_reset(rumor_gossip_t *g, slot_t *s)
{
    if (s->live || s->self_added) {
        memset(s->acc, 0, g->vec * sizeof *s->acc);
        memset(s->accw, 0, g->chunks * sizeof *s->accw);
        if (s->macc) {
            memset(s->macc, 0, g->vec * sizeof *s->macc);
            memset(s->mcount, 0, g->chunks * sizeof *s->mcount);
            memset(s->mshare, 0, g->chunks * sizeof *s->mshare);
        }
    }
    s->live = s->self_added = false;
    s->started = 0;
    s->n_senders = 0;
    s->n_expected = 0;
    s->n_trim = 0;
    if (!g->cfg.robust.trim) { /* guard's first-round holds (gossip_robust.c), not kept */
        free(s->tbuf);
        s->tbuf = NULL;
    }
}

/* The accumulator of `round`, or NULL. Slots are found by their round, not its parity: a
 * peer far behind parks a neighbour's model of a much later round in its free slot and jumps
 * there at its next gossip point. */
static slot_t *slot_find(rumor_gossip_t *g, uint64_t round)
{
    for (int i = 0; i < SLOTS; i++)
        if (g->slots[i].live && g->slots[i].round == round) return &g->slots[i];
    return NULL;
}

/* The accumulator of `round`, claiming a free slot for it if needed; NULL when all hold
 * other rounds. */
slot_t *gsp_slot_for(rumor_gossip_t *g, uint64_t round)
{
    slot_t *s = slot_find(g, round);
    if (s) return s;
    for (int i = 0; i < SLOTS; i++)
        if (!g->slots[i].live) {
            s = &g->slots[i];
            s->live = true;
            s->round = round;
            s->ref = g->have_snap ? g->cur_snap : -1;
            return s;
        }
    return NULL;
}

/* Two members that cannot dial each other (behind different NATs) reach each other only
 * through a relay, which costs a third peer's bandwidth. Where some members cannot be dialled
 * by everyone (nonzero reach classes), each class takes positions that the graph joins least to
 * other classes: over the union of the graph's edges in its first rounds (up to 8: a period,
 * where it has one), the classes in order of size (largest first, then by value), each member
 * greedily to the free position with the fewest edges to positions of other classes, then the
 * most edges to its own class, then the lowest degree, then the lowest rank. The choice depends
 * only on the graph, n and the classes' sizes and values, so every peer that knows the same
 * members makes the same one; members of each class keep their rank order (gather_members). */
static bool reach_positions(rumor_gossip_t *g, size_t n, const reach_group_t *grp, size_t m)
{
    uint64_t period = 1;
    char terr[RUMOR_ERR_LEN];
    if (rumor_topology_period(g->topo, n, &period, terr) != RUMOR_OK || period == 0 || period > 8) period = 8;
    memset(g->pos_reach, 0, n * sizeof *g->pos_reach);
    if (n > g->reach_cap) { /* (grown once per larger swarm, never per round) */
        uint8_t *a = realloc(g->reach_adj, n * n);
        if (a) g->reach_adj = a;
        uint32_t *d = a ? realloc(g->reach_deg, 3 * n * sizeof *d) : NULL;
        if (d) g->reach_deg = d;
        if (!a || !d) { /* no memory: the rank order, as without any */
            rumor_log(RUMOR_LOG_WARN, "out of memory to place %zu members on the graph: rank order", n);
            return false;
        }
        g->reach_cap = n;
    }
    uint8_t *adj = g->reach_adj;
    uint32_t *deg = g->reach_deg, *hit = deg + n, *same = deg + 2 * n;
    memset(adj, 0, n * n);
    memset(deg, 0, 2 * n * sizeof *deg);
    for (uint64_t r = 0; r < period; r++)
        for (size_t i = 0; i < n; i++) {
            const uint32_t *out = NULL;
            size_t k = 0;
            if (rumor_topology_out(g->topo, n, r, i, &out, &k, terr) != RUMOR_OK) continue;
            for (size_t e = 0; e < k; e++) adj[i * n + out[e]] = adj[out[e] * n + i] = 1;
        }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) deg[i] += adj[i * n + j];
    for (size_t j = 0; j < m; j++) {
        memset(same, 0, n * sizeof *same);
        for (size_t c = 0; c < grp[j].size; c++) {
            size_t best = n;
            for (size_t i = 0; i < n; i++) {
                if (g->pos_reach[i]) continue;
                if (best == n) {
                    best = i;
                    continue;
                }
                const uint32_t ci = hit[i] - same[i], cb = hit[best] - same[best];
                if (ci < cb || (ci == cb && (same[i] > same[best] || (same[i] == same[best] && deg[i] < deg[best]))))
                    best = i;
            }
            g->pos_reach[best] = grp[j].cls;
            for (size_t k = 0; k < n; k++) hit[k] += adj[best * n + k], same[k] += adj[best * n + k];
        }
    }
    return true;
}

static int grp_by_class(const void *a, const void *b)
{
    const uint64_t x = ((const reach_group_t *)a)->cls, y = ((const reach_group_t *)b)->cls;
    return (x > y) - (x < y);
}

static int grp_by_size(const void *a, const void *b)
{
    const reach_group_t *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return (x->cls > y->cls) - (x->cls < y->cls);
}

static int rank_cmp(const void *a, const void *b)
{
    const reach_rank_t *x = a, *y = b;
    if (x->cls != y->cls) return x->cls < y->cls ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* n (class, index) pairs sorted by class, then index. */
static void rank_by_class(reach_rank_t *r, const uint64_t *cls, size_t n)
{
    for (size_t i = 0; i < n; i++) r[i] = (reach_rank_t){cls[i], i};
    qsort(r, n, sizeof *r, rank_cmp);
}

static void arrange(rumor_gossip_t *g, size_t n, size_t *me)
{
    reach_group_t *grp = g->reach_grp;
    size_t u = 0, m = 0;
    for (size_t i = 0; i < n; i++)
        if (g->member_reach[i]) grp[u++] = (reach_group_t){g->member_reach[i], 1};
    if (u == 0 || n < 3) return; /* (nothing to choose: the rank order) */
    qsort(grp, u, sizeof *grp, grp_by_class);
    for (size_t i = 0; i < u; i++) {
        if (m && grp[m - 1].cls == grp[i].cls) grp[m - 1].size++;
        else grp[m++] = grp[i];
    }
    if (m == 1 && u == n) return; /* (one class holds everyone: any order is as good) */
    /* The positions are dealt again whenever the classes or their sizes change (compared
     * whole: a member chooses its own site's value). */
    bool same_inputs = g->reach_m == m && g->reach_n == n;
    for (size_t j = 0; j < m && same_inputs; j++)
        same_inputs = g->reach_key[j].cls == grp[j].cls && g->reach_key[j].size == grp[j].size;
    if (!same_inputs) {
        reach_group_t *bysize = g->reach_grp + RUMOR_GOSSIP_MAX_MEMBERS;
        memcpy(bysize, grp, m * sizeof *grp);
        qsort(bysize, m, sizeof *bysize, grp_by_size);
        g->reach_m = 0;
        if (!reach_positions(g, n, bysize, m)) return;
        memcpy(g->reach_key, grp, m * sizeof *grp);
        g->reach_n = n, g->reach_m = m;
    }
    /* Positions and members, each sorted by class (then position, rank order): the k-th
     * position of a class gets the k-th member of that class. */
    reach_rank_t *pos = g->reach_rank, *mem = g->reach_rank + n;
    rank_by_class(pos, g->pos_reach, n);
    rank_by_class(mem, g->member_reach, n);
    for (size_t k = 0; k < n; k++)
        if (pos[k].cls != mem[k].cls) return; /* (cannot happen: the positions were dealt for these classes) */
    memcpy(g->tmp_keys, g->members, n * sizeof *g->members);
    memcpy(g->tmp_boot, g->member_boot, n * sizeof *g->member_boot);
    const size_t self = *me;
    for (size_t k = 0; k < n; k++) {
        const size_t to = pos[k].i, from = mem[k].i;
        memcpy(g->members[to], g->tmp_keys[from], RUMOR_KEY_LEN);
        g->member_boot[to] = g->tmp_boot[from];
        if (from == self) *me = to;
    }
    memcpy(g->member_reach, g->pos_reach, n * sizeof *g->member_reach);
}

/* The buffer for the next snapshot: never the latest one, which live accumulators use as
 * their reference (and the round in flight as s_r), and only once the wire is done with it. */
static int free_snap(const rumor_gossip_t *g)
{
    if (!g->have_snap) return 0;
    const int k = 1 - g->cur_snap;
    return g->snaps[k].refs == 0 ? k : -1;
}

/* free_snap for a gossip point: one that has to wait notes since when (rumor_gossip_snap_wanted;
 * the round it begins counts its deadline from then). */
static int take_snap(rumor_gossip_t *g, uint64_t now)
{
    const int sb = free_snap(g);
    if (sb < 0 && !g->snap_wanted) g->snap_wanted = now ? now : 1;
    return sb;
}

int rumor_gossip_snap_wanted(const rumor_gossip_t *g, uint64_t *deadline_ms)
{
    if (deadline_ms) *deadline_ms = g->wait_ms;
    return g->snap_wanted && g->have_snap && g->snaps[1 - g->cur_snap].refs > 0 ? 1 - g->cur_snap : -1;
}


/* Move a live accumulator to the reference `to` (a snapshot, or -1 for absolute sums):
 * acc += accw[c] (from - to). */
void gsp_rebase(rumor_gossip_t *g, slot_t *s, int to)
{
    const float *from = ref_of(g, s), *nx = to >= 0 ? g->snaps[to].x : NULL;
    for (size_t c = 0; c < g->chunks && (from || nx); c++) {
        if (s->accw[c] == 0.0) continue;
        const size_t off = c * g->chunk_params;
        const float a = (float)s->accw[c];
        if (nx) acc_add(s->acc + off, nx + off, from ? from + off : NULL, chunk_len(g, c), -a);
        else acc_add(s->acc + off, from + off, NULL, chunk_len(g, c), a);
    }
    s->ref = to;
}

sender_t *gsp_find_sender(slot_t *s, const uint8_t key[RUMOR_KEY_LEN], uint64_t round)
{
    for (int i = 0; i < s->n_senders; i++)
        if (s->senders[i].round == round && memcmp(s->senders[i].key, key, RUMOR_KEY_LEN) == 0)
            return &s->senders[i];
    return NULL;
}

static bool expected_done(const rumor_gossip_t *g, slot_t *s, const uint8_t key[RUMOR_KEY_LEN])
{
    (void)g;
    const sender_t *e = gsp_find_sender(s, key, s->round);
    return e && e->complete;
}

/* Add share * w[c] of snapshot x to an accumulator, chunk by chunk. The weight is the float
 * actually applied. For the accumulator's own reference (a peer's own share) that is weight
 * only: a (s - s) adds nothing. */
static void add_snapshot(rumor_gossip_t *g, slot_t *s, const float *x, const double *w, double share)
{
    const float *ref = ref_of(g, s);
    for (size_t c = 0; c < g->chunks; c++) {
        const float a = (float)(share * w[c]);
        const size_t off = c * g->chunk_params;
        if (x != ref) acc_add(s->acc + off, x + off, ref ? ref + off : NULL, chunk_len(g, c), a);
        s->accw[c] += (double)a;
    }
}

pending_t *gsp_push_send(rumor_gossip_t *g, const uint8_t key[RUMOR_KEY_LEN], double share, int snap)
{
    if (g->out_count == g->out_cap) return NULL; /* cannot happen: out_cap covers two rounds of every member */
    pending_t *p = &g->outbox[(g->out_head + g->out_count++) % g->out_cap];
    memset(p, 0, sizeof *p);
    memcpy(p->peer, key, RUMOR_KEY_LEN);
    p->share = share;
    p->round = g->round;
    p->snap = snap;
    g->snaps[snap].refs++;
    return p;
}


static int place_cmp(const void *a, const void *b)
{
    const view_entry_t *x = a, *y = b;
    if (x->place != y->place) return x->place < y->place ? -1 : 1;
    return memcmp(x->key, y->key, RUMOR_KEY_LEN);
}

/* The members: the view and this peer, numbered by place, then key; those that cannot be
 * dialled moved to where the graph joins them least to each other (arrange). Their count, and
 * ours in *me. They depend on the view alone: gathered again only when it changed (every
 * round sorted thousands of members in a large swarm). */
static size_t gather_members(rumor_gossip_t *g, size_t *me)
{
    if (g->members_gen == g->view_gen + 1) {
        *me = g->members_me;
        return g->members_n;
    }
    view_entry_t *r = g->ranked;
    size_t n = g->view_count;
    memcpy(r, g->view, n * sizeof *r);
    memcpy(r[n].key, g->cfg.self, RUMOR_KEY_LEN);
    r[n].boot = g->cfg.boot;
    r[n].reach = g->self_reach;
    r[n++].place = g->self_place;
    qsort(r, n, sizeof *r, place_cmp);
    for (size_t i = 0; i < n; i++) {
        if (memcmp(r[i].key, g->cfg.self, RUMOR_KEY_LEN) == 0) *me = i;
        memcpy(g->members[i], r[i].key, RUMOR_KEY_LEN);
        g->member_boot[i] = r[i].boot;
        g->member_reach[i] = r[i].reach;
    }
    arrange(g, n, me);
    g->members_gen = g->view_gen + 1, g->members_n = n, g->members_me = *me;
    return n;
}

/* Start round g->round from x: snapshot, own share, sends. */
static void begin_round(rumor_gossip_t *g, const float *x, int sb, uint64_t now)
{
    snap_t *sn = &g->snaps[sb];
    if (g->choco) {
        /* What travels is the public copy, moved towards x by this round's delta. */
        gsp_choco_encode(g, x, sb);
        gsp_snap_copy(g, sn->x, g->xhat);
    } else {
        gsp_snap_copy(g, sn->x, x); /* diloco too: the inner result is what travels */
    }
    memcpy(sn->w, g->w, g->chunks * sizeof *sn->w);
    /* Live accumulators (neighbours ahead of us) move to the new reference. */
    for (int k = 0; k < SLOTS && !g->choco; k++)
        if (g->slots[k].live && g->slots[k].ref != sb) gsp_rebase(g, &g->slots[k], sb);
    g->cur_snap = sb;
    g->have_snap = true; /* own_rms is this snapshot's (gsp_snap_copy) */

    size_t me = 0;
    const size_t n = gather_members(g, &me);
    slot_t *s = gsp_slot_for(g, g->round); /* never NULL: finishing freed every slot of an older round */
    double self_w = 1.0;
    const uint32_t *out = NULL, *in = NULL;
    const double *shares = NULL;
    size_t n_out = 0, n_in = 0;
    char terr[RUMOR_ERR_LEN];
    if (n > 1 && rumor_topology_row(g->topo, n, g->round, me, &self_w, &out, &shares, &n_out, terr) != RUMOR_OK) {
        self_w = 1.0, n_out = 0; /* the graph is not defined on this view: a round alone */
        g->st.rounds_alone++;
    }
    /* Copy before the next query overwrites the borrowed lists. */
    if (n_out) {
        memcpy(g->out_rank, out, n_out * sizeof *out);
        memcpy(g->out_share, shares, n_out * sizeof *shares);
    }
    const gsp_rule_t *rule = g->rule;
    int n_exp = 0;
    s->mix = 0;
    const bool has_in = g->cfg.algo.kind != RUMOR_ALGO_SGP && n_out > 0 &&
                        rumor_topology_in(g->topo, n, g->round, me, &in, &n_in, terr) == RUMOR_OK;
    for (size_t k = 0; has_in && k < n_in && n_exp < RUMOR_GOSSIP_MAX_SENDERS; k++)
        if (!rule->waits_for || rule->waits_for(g, g->members[in[k]]))
            memcpy(s->expected[n_exp++], g->members[in[k]], RUMOR_KEY_LEN);
    s->n_expected = n_exp;
    for (int i = 0; i < n_exp; i++) s->still[i] = true;
    s->in_gen = g->view_gen;
    rule->begin(g, s, &(gsp_round_t){.n = n, .me = me, .n_out = n_out, .n_in = n_in, .in = in, .has_in = has_in}, sb);
    g->st.last_out = (int)n_out;
    g->st.last_in = s->n_expected;
    if (g->choco) {
        s->ref = sb;
    } else {
        if (s->ref != sb) gsp_rebase(g, s, sb); /* fresh slot: nothing to move, only the reference */
        add_snapshot(g, s, sn->x, sn->w, self_w);
    }
    s->self_added = true;
    if (rule->self) rule->self(g, s);
    /* The round's clock started when its gossip point began to wait, for a snapshot buffer the
     * wire held (rumor_gossip_snap_wanted) if it had to: that wait is the round's too. */
    s->started = g->snap_wanted && g->snap_wanted < now ? g->snap_wanted : now;
    g->began_at[g->round % LATE_ROUNDS] = s->started, g->began_round[g->round % LATE_ROUNDS] = g->round;
    g->snap_wanted = 0;
    g->inflight = true;
    g->wait_ms = adaptive_wait(g);
}

/* Whether the sender key has sent a model of a round after slot s's (it has moved on): one held
 * for a later round, or the lowest seen beyond the window (gsp_note_ahead), even one not taken. */
static bool moved_on(rumor_gossip_t *g, const slot_t *s, const uint8_t key[RUMOR_KEY_LEN])
{
    if (g->ahead_low > s->round && memcmp(g->ahead_from, key, RUMOR_KEY_LEN) == 0) return true;
    for (int i = 0; i < SLOTS; i++) {
        slot_t *o = &g->slots[i];
        if (o->live && o->round > s->round && gsp_find_sender(o, key, o->round)) return true;
    }
    return false;
}

/* Whether key is in the view (sorted by key). */
static bool in_view(const rumor_gossip_t *g, const uint8_t key[RUMOR_KEY_LEN])
{
    return g->view_count && bsearch(key, g->view, g->view_count, sizeof *g->view, gsp_key_cmp) != NULL;
}

/* Whether each of slot s's expected senders still sends to us in its round under the graph
 * of the view as it stands now (s->still), looked at again when the view changed: one that
 * left the view (it finished, left, or was found dead) sends nothing more, and a member that
 * joined, left, or whose reach class became known moves others in the graph, so that some
 * send to another now. Such a sender is not waited for (what it sends still counts if it
 * comes). */
static void recheck_in(rumor_gossip_t *g, slot_t *s)
{
    if (s->in_gen == g->view_gen) return;
    s->in_gen = g->view_gen;
    size_t me = 0, n_in = 0;
    const size_t n = gather_members(g, &me);
    const uint32_t *in = NULL;
    char terr[RUMOR_ERR_LEN];
    /* (a graph not defined on this view says nothing of who sends: then only a sender that
     * left the view is not waited for) */
    const bool graph = n > 1 && rumor_topology_in(g->topo, n, s->round, me, &in, &n_in, terr) == RUMOR_OK;
    if (!graph) n_in = 0;
    for (int i = 0; i < s->n_expected; i++) {
        bool found = !graph && in_view(g, s->expected[i]);
        for (size_t k = 0; k < n_in && !found; k++)
            found = memcmp(g->members[in[k]], s->expected[i], RUMOR_KEY_LEN) == 0;
        s->still[i] = found;
    }
}

static bool round_ready(rumor_gossip_t *g, uint64_t now)
{
    if (g->cfg.algo.kind == RUMOR_ALGO_SGP) {
        /* No barrier, but bounded staleness (Assran et al.): a peer that has heard nothing
         * for SGP_STALENESS rounds waits for input, up to the round timeout. Otherwise one
         * that runs ahead of the others gives its weight away round after round and is left
         * with none. */
        if (g->quiet < SGP_STALENESS || g->st.last_out == 0) return true; /* alone: nobody to wait for */
        const slot_t *s = slot_find(g, g->round);
        return !s || s->n_senders > 0 || now >= s->started + g->cfg.round_timeout_ms;
    }
    if (g->ahead >= g->round + SLOTS) return true; /* the neighbours have moved on */
    slot_t *s = slot_find(g, g->round);
    if (!s || now >= s->started + g->wait_ms) return true;
    /* Not waited for: a neighbour the graph no longer joins to us (recheck_in), nor one whose
     * model of a later round came (a sender's messages arrive in order, so the rest of this
     * round's was lost). */
    recheck_in(g, s);
    for (int i = 0; i < s->n_expected; i++)
        if (s->still[i] && !expected_done(g, s, s->expected[i]) && !moved_on(g, s, s->expected[i])) return false;
    return true;
}


/* Mix round g->round into x and clear its accumulator. */
static void finish_round(rumor_gossip_t *g, float *x)
{
    slot_t *s = slot_find(g, g->round);
    recheck_in(g, s); /* (for `missing`: a round that timed out may not have looked) */
    const float *snap = g->snaps[g->cur_snap].x;
    if (g->rule->settle) g->rule->settle(g, s, snap);
    double cons = 0.0;
    const rumor_algo_kind_t kind = g->cfg.algo.kind;
    const double wcap = gsp_weight_bound(g);
    /* What this peer sent, exactly: where an overlapped diloco's round lands, x has moved on. */
    float *landing = g->dol && !g->began ? g->sent : NULL; /* overlapped diloco: where the round lands */
    if (g->rule->mix) cons = g->rule->mix(g, s, landing ? landing : x);
    for (size_t c = 0; c < g->chunks && !g->rule->mix; c++) {
        const size_t off = c * g->chunk_params, n = chunk_len(g, c);
        const double tw = s->accw[c];
        /* The inverse stays double: 1/tw rounded to float is off by up to 3e-8, always the
         * same way in a given round, and over hundreds of rounds that bias would move the
         * swarm's average (measured: 1e-5 after 200 rounds on a ring). */
        const double inv = 1.0 / tw;
        float *restrict acc = s->acc + off;
        double cs = 0.0;
        if (kind == RUMOR_ALGO_DILOCO) {
            /* Normalise in place: mix - s, read by the outer step below. */
#pragma omp simd reduction(+ : cs)
            for (size_t i = 0; i < n; i++) {
                acc[i] = (float)((double)acc[i] * inv);
                cs += (double)(acc[i] * acc[i]);
            }
        } else {
            /* x <- mix + (x - s) = x + (mix - s), and mix - s is what acc holds. The consensus
             * distance is the model's: optimizer state mixed after it does not count. */
            float *restrict xp = x + off;
            const size_t nm = off >= g->P ? 0 : g->P - off < n ? g->P - off : n;
#pragma omp simd reduction(+ : cs)
            for (size_t i = 0; i < nm; i++) {
                const float d = (float)((double)acc[i] * inv);
                cs += (double)(d * d);
                xp[i] += d;
                acc[i] = 0.0f;
            }
#pragma omp simd
            for (size_t i = nm; i < n; i++) {
                xp[i] += (float)((double)acc[i] * inv);
                acc[i] = 0.0f;
            }
            if (kind == RUMOR_ALGO_SGP) g->w[c] = tw > WEIGHT_MIN ? (tw < wcap ? tw : wcap) : WEIGHT_MIN;
        }
        cons += cs;
    }
    if (kind == RUMOR_ALGO_DILOCO) {
        const float lr = (float)g->cfg.algo.outer_lr, mu = (float)g->cfg.algo.outer_momentum;
        float *restrict th = g->theta, *restrict m = g->mom;
        const float *restrict dx = s->acc, *restrict sx = snap;
        /* Overlapped, where the round lands inside the next phase: that phase moves onto the
         * new theta with half of what it has done since it sent, theta' + KEEP (x - x_r) (those
         * steps started from the peer's own inner result, not the swarm's); the run's last
         * round ends on theta. */
        const float *restrict sent = landing;
#pragma omp simd
        for (size_t i = 0; i < g->P; i++) {
            /* The pseudo-gradient against the neighbourhood's mean inner result. */
            const float d = th[i] - (sx[i] + dx[i]);
            m[i] = mu * m[i] + d;
            const float t = th[i] - lr * (d + mu * m[i]);
            x[i] = sent ? t + RUMOR_GOSSIP_OVERLAP_KEEP * (x[i] - sent[i]) : t;
            th[i] = t;
        }
        memset(s->acc, 0, g->vec * sizeof *s->acc);
    }
    memset(s->accw, 0, g->chunks * sizeof *s->accw);
    int peers = 0, missing = 0;
    for (int i = 0; i < s->n_senders; i++) peers += s->senders[i].got > 0;
    g->quiet = peers > 0 ? 0 : g->quiet + 1;
    for (int i = 0; i < s->n_expected; i++) missing += s->still[i] && !expected_done(g, s, s->expected[i]);
    if (g->rule->after) g->rule->after(g, s);
    g->st.consensus = sqrt(cons);
    g->st.last_peers = peers;
    g->st.last_missing = missing;
    g->st.missing_total += (uint64_t)missing;
    s->live = s->self_added = false;
    s->n_senders = s->n_expected = 0;
    s->started = 0;
    g->inflight = false;
    g->st.round++;
    g->st.deadline_ms = g->cfg.algo.kind == RUMOR_ALGO_SGP ? g->cfg.round_timeout_ms : g->wait_ms;
    double ws = 0.0;
    for (size_t c = 0; c < g->chunks; c++) ws += g->w[c];
    g->st.w = ws / (double)g->chunks;

    /* Next round; skip ahead when the neighbours are further on. */
    uint64_t next = g->round + 1;
    if (g->ahead > next) next = g->ahead;
    if (g->forced > next) next = g->forced;
    /* A lone member's claim beyond the window is kept while it stays beyond it: the second
     * member that vouches for a far round may speak in a later round (after a partition heals,
     * a peer hears one member of the other half a round, a different one each time). */
    if (g->ahead || g->ahead_low < next + SLOTS) gsp_clear_ahead(g);
    g->forced = 0;
    for (int i = 0; i < SLOTS; i++)
        if (g->slots[i].live && (g->slots[i].round < next || g->slots[i].round >= next + SLOTS))
            gsp_slot_reset(g, &g->slots[i]); /* outside the new window: it would block a slot */
    g->round = next;
}

static rumor_gossip_status_t step(rumor_gossip_t *g, float *x, uint64_t now);

rumor_gossip_status_t rumor_gossip_step(rumor_gossip_t *g, float *x, uint64_t now)
{
    if (!g->waiting && g->done_once) { /* first call of this gossip point: our work since the last */
        g->rounds_ms[g->rounds_next] = now > g->last_done ? (double)(now - g->last_done) : 0.0;
        g->rounds_next = (g->rounds_next + 1) % RUMOR_GOSSIP_HISTORY;
        if (g->rounds_count < RUMOR_GOSSIP_HISTORY) g->rounds_count++;
    }
    const rumor_gossip_status_t st = step(g, x, now);
    g->waiting = st == RUMOR_GOSSIP_WAIT;
    if (st == RUMOR_GOSSIP_DONE) {
        g->done_once = true;
        g->last_done = now;
    }
    return st;
}

static rumor_gossip_status_t step(rumor_gossip_t *g, float *x, uint64_t now)
{
    if (g->dol && g->inflight && !g->began) { /* overlapped diloco: the round lands */
        if (!round_ready(g, now)) return RUMOR_GOSSIP_WAIT;
        finish_round(g, x);
        return RUMOR_GOSSIP_DONE;
    }
    if (g->dol && !g->closing) { /* ... or is sent, and the phase goes on */
        const int sb = take_snap(g, now);
        if (sb < 0) return RUMOR_GOSSIP_WAIT;
        memcpy(g->sent, x, g->P * sizeof *x);
        begin_round(g, x, sb, now);
        return RUMOR_GOSSIP_DONE;
    }
    if (g->overlap && !g->closing) {
        if (g->inflight && !round_ready(g, now)) return RUMOR_GOSSIP_WAIT;
        const int sb = take_snap(g, now);
        if (sb < 0) return RUMOR_GOSSIP_WAIT;
        if (g->inflight) finish_round(g, x);
        begin_round(g, x, sb, now);
        return RUMOR_GOSSIP_DONE;
    }
    /* The overlapped form's last gossip point finishes the round in flight first, then its own
     * round as the plain form does: the run ends on a mixed model. */
    if (g->inflight && !g->began) {
        if (!round_ready(g, now)) return RUMOR_GOSSIP_WAIT;
        finish_round(g, x);
    }
    if (!g->inflight) {
        const int sb = take_snap(g, now);
        if (sb < 0) return RUMOR_GOSSIP_WAIT;
        begin_round(g, x, sb, now);
        g->began = true;
    }
    if (!round_ready(g, now)) return RUMOR_GOSSIP_WAIT;
    finish_round(g, x);
    g->began = false;
    return RUMOR_GOSSIP_DONE;
}

void rumor_gossip_close(rumor_gossip_t *g) { g->closing = true; }
bool rumor_gossip_waiting(const rumor_gossip_t *g) { return g->waiting; }
bool rumor_gossip_merging(const rumor_gossip_t *g) { return g->dol && g->inflight && !g->began; }

uint64_t rumor_gossip_deadline(const rumor_gossip_t *g)
{
    if (!g->inflight) return UINT64_MAX;
    const slot_t *s = slot_find((rumor_gossip_t *)g, g->round);
    if (!s) return UINT64_MAX;
    if (g->cfg.algo.kind == RUMOR_ALGO_SGP) return s->started + g->cfg.round_timeout_ms;
    return s->started + g->wait_ms;
}

/* ---- outbox ---- */

bool rumor_gossip_next_send(rumor_gossip_t *g, rumor_gossip_send_t *out)
{
    if (g->out_count == 0) return false;
    const pending_t *p = &g->outbox[g->out_head];
    g->out_head = (g->out_head + 1) % g->out_cap;
    /* Drained: the next sends start at the front again, so the ring touches only as many
     * entries as one burst needs (8,192 of 208 bytes allocated; a virtual peer's ring came
     * round 1,000 entries in 100 rounds: 200 KB of its memory). */
    if (--g->out_count == 0) g->out_head = 0;
    memcpy(out->peer, p->peer, RUMOR_KEY_LEN);
    out->round = p->round;
    out->share = p->share;
    out->params = g->snaps[p->snap].x;
    out->w = g->snaps[p->snap].w;
    out->count = g->vec;
    out->chunk_params = g->chunk_params;
    out->layout = g->cfg.layout;
    out->snap = p->snap;
    out->pulled = false;
    out->masked = p->masked;
    out->mix = p->mix;
    out->edges = p->edges;
    out->choco = g->choco;
    if (g->choco) {
        out->codec = p->keyframe ? RUMOR_CODEC_F32 : (int)g->cfg.choco.id;
        out->enc = p->keyframe ? NULL : g->enc[p->snap];
        out->enc_off = p->keyframe ? NULL : g->enc_off[p->snap];
        out->ver = p->ver;
        out->lin = g->cfg.lineage;
        out->base = g->base;
        out->need = p->need;
    }
    g->st.sends++;
    return true;
}

void rumor_gossip_lend(rumor_gossip_t *g, rumor_gossip_send_t *out)
{
    memset(out, 0, sizeof *out);
    out->round = g->round;
    out->share = 1.0;
    out->params = g->snaps[g->cur_snap].x;
    out->w = NULL;
    out->count = g->P;
    out->chunk_params = g->chunk_params;
    out->layout = g->cfg.layout;
    out->snap = g->cur_snap;
    out->pulled = true;
    g->snaps[g->cur_snap].refs++;
}

void rumor_gossip_release(rumor_gossip_t *g, const rumor_gossip_send_t *s, bool sent)
{
    snap_t *sn = &g->snaps[s->snap];
    if (sn->refs > 0) sn->refs--;
    if (sent || s->pulled) return;
    g->st.sends_failed++;
    if (s->choco) { /* its copy of ours misses this version: the next send is whole */
        copy_t *e = gsp_copy_find(g, s->peer, false);
        if (e) e->sent_any = false;
    }
    /* Push-sum keeps the mass it could not give, whatever round we are in by now: the share
     * of that snapshot goes into the accumulator that is open now. */
    if (g->cfg.algo.kind != RUMOR_ALGO_SGP) return;
    slot_t *sl = gsp_slot_for(g, g->round);
    if (sl) add_snapshot(g, sl, sn->x, sn->w, s->share);
}

/* ---- plain mixing ---- */

void gsp_plain_begin(rumor_gossip_t *g, slot_t *s, const gsp_round_t *r, int sb)
{
    (void)s;
    for (size_t k = 0; k < r->n_out; k++) gsp_push_send(g, g->members[g->out_rank[k]], g->out_share[k], sb);
}

/* Plain mixing reads the chunk once before adding it: its sum of squares is finite exactly
 * when every value is (sumsq), and gives its scale. A chunk out of all proportion to our own
 * parameters counts as if it never came (robust mixing bounds every chunk its own way). */
static bool plain_add(rumor_gossip_t *g, slot_t *s, sender_t *e, const rumor_gossip_chunk_t *c, const void *payload,
                      size_t off, size_t n)
{
    const double ss = gsp_sumsq(payload, n);
    if (!isfinite(ss)) {
        e->bad = true;
        return gsp_drop(g, RUMOR_GOSSIP_DROP_NONFINITE);
    }
    if (!gsp_plausible_ss(g, c->chunk, ss, n)) return gsp_drop(g, RUMOR_GOSSIP_DROP_IMPLAUSIBLE);
    const float a = (float)c->w;
    const float *ref = ref_of(g, s);
    acc_add(s->acc + off, payload, ref ? ref + off : NULL, n, a);
    s->accw[c->chunk] += (double)a;
    return true;
}

const gsp_rule_t gsp_rule_plain = {.name = "plain", .begin = gsp_plain_begin, .add = plain_add};
