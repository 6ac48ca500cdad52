/* gossip_in.c - chunks in (gossip_impl.h): the checks a neighbour's chunk passes, the accumulator
 * of its round, and its sender's record, before the mixing rule adds it. */
#include "gossip_impl.h"

/* ---- input ---- */

bool gsp_drop(rumor_gossip_t *g, rumor_gossip_drop_t why)
{
    g->st.drops[why]++;
    return false;
}

/* The exponent of a float32 all ones means Inf or NaN; test the bits (no FP exceptions, any
 * alignment, vectorisable). */
bool gsp_all_finite(const uint8_t *p, size_t n)
{
    /* 16 independent lanes of all-ones masks: the compiler keeps them in registers and the
     * loop runs about twice as fast as one OR-reduction (measured on baseline x86-64). */
    uint32_t lane[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) {
            uint32_t u;
            memcpy(&u, p + 4 * (i + (size_t)j), 4);
            lane[j] |= (u & 0x7f800000u) == 0x7f800000u ? ~0u : 0u;
        }
    uint32_t bad = 0;
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, p + 4 * i, 4);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    for (int j = 0; j < 16; j++) bad |= lane[j];
    return bad == 0;
}

/* Neighbours further on than the window make a peer skip ahead (it fell behind), but never on
 * one member's word: a member that claims round 10^9 would otherwise take the peer there, and
 * the peer's models would take its neighbours after it. The skip goes to the lowest round seen
 * beyond the window once two senders are beyond it (both are at least there), in one round or,
 * the lone claim kept, in rounds after it (step), or from the one other member of a swarm of
 * two (nobody else could say otherwise). A peer alone ahead of laggards is not what it fixes:
 * such a peer hears their models rounds late, and its deadline learns to wait for them
 * (gsp_note_late, adaptive_wait), so that it never runs away from them. */
void gsp_note_ahead(rumor_gossip_t *g, const uint8_t peer[RUMOR_KEY_LEN], uint64_t r)
{
    const bool same = g->ahead_low && memcmp(peer, g->ahead_from, RUMOR_KEY_LEN) == 0;
    if (g->ahead_low && !same) g->ahead_two = true;
    if (g->ahead_low == 0 || r < g->ahead_low) {
        g->ahead_low = r;
        memcpy(g->ahead_from, peer, RUMOR_KEY_LEN);
    }
    g->ahead = g->ahead_two || g->view_count == 1 ? g->ahead_low : 0;
}

void gsp_clear_ahead(rumor_gossip_t *g)
{
    g->ahead = g->ahead_low = 0;
    g->ahead_two = false;
}

/* The accumulator a dpsgd or diloco chunk of round c->round from peer goes to, or NULL with
 * *why: a stale round (a late one of the round before teaches the deadline how late), one past
 * all rounds, or one ahead that is not the round to skip to (gsp_note_ahead). */
static slot_t *round_slot(rumor_gossip_t *g, const uint8_t *peer, const rumor_gossip_chunk_t *c, uint64_t now,
                          rumor_gossip_drop_t *why)
{
    if (c->round < g->round) {
        if (c->chunk + 1 == c->chunks) gsp_note_late(g, c->round, now); /* how late: the deadline learns */
        *why = RUMOR_GOSSIP_DROP_STALE;
        return NULL;
    }
    *why = RUMOR_GOSSIP_DROP_AHEAD;
    if (c->round > RUMOR_GOSSIP_ROUND_MAX) return NULL; /* no round number ever wraps */
    if (c->round < g->round + SLOTS) {
        *why = RUMOR_GOSSIP_DROP_STALE; /* (no free accumulator for it) */
        return gsp_slot_for(g, c->round);
    }
    gsp_note_ahead(g, peer, c->round);
    /* While a round is in flight its slot is taken; the other one holds the model of the
     * round we are about to jump to, evicting the next round's (we will skip it). */
    if (!g->inflight || c->round != g->ahead) return NULL;
    slot_t *s = gsp_slot_for(g, c->round);
    for (int i = 0; i < SLOTS && !s; i++) {
        slot_t *o = &g->slots[i];
        if (o->live && o->round != g->round) {
            gsp_slot_reset(g, o);
            s = gsp_slot_for(g, c->round);
        }
    }
    return s;
}

bool rumor_gossip_on_chunk(rumor_gossip_t *g, const uint8_t peer[RUMOR_KEY_LEN], const rumor_gossip_chunk_t *c,
                           const void *payload, size_t len, uint64_t now)
{
    if (c->layout != g->cfg.layout) return gsp_drop(g, RUMOR_GOSSIP_DROP_LAYOUT);
    if (c->chunks != g->chunks || c->chunk >= g->chunks) return gsp_drop(g, RUMOR_GOSSIP_DROP_SHAPE);
    const size_t off = (size_t)c->chunk * g->chunk_params;
    const size_t n = chunk_len(g, c->chunk);
    if (c->off != off || c->n != n || (!c->choco && len != n * sizeof(float))) return gsp_drop(g, RUMOR_GOSSIP_DROP_SHAPE);
    const bool sgp = g->cfg.algo.kind == RUMOR_ALGO_SGP;
    const double wmax = sgp ? gsp_weight_bound(g) : 1.0;
    if (!(c->w > 0.0) || !(c->w <= wmax)) return gsp_drop(g, RUMOR_GOSSIP_DROP_WEIGHT);
    if (c->masked != g->cfg.secure_mix || c->choco != g->choco) return gsp_drop(g, RUMOR_GOSSIP_DROP_MODE);
    if (g->rule->chunk) return g->rule->chunk(g, peer, c, payload, len, off, n, now);

    slot_t *s;
    if (sgp) {
        if (c->round > g->round + SGP_AHEAD) return gsp_drop(g, RUMOR_GOSSIP_DROP_AHEAD);
        s = gsp_slot_for(g, g->round); /* no barrier: everything goes into the round in flight */
    } else {
        rumor_gossip_drop_t why = RUMOR_GOSSIP_DROP_STALE;
        if (!(s = round_slot(g, peer, c, now, &why))) return gsp_drop(g, why);
    }
    if (!s) return gsp_drop(g, RUMOR_GOSSIP_DROP_STALE);
    sender_t *e = gsp_find_sender(s, peer, sgp ? c->round : s->round);
    if (!e) {
        /* sgp keeps a record per (sender, round): one sender holds at most SENDER_ROUNDS of a
         * slot's records, its oldest round's record is reused past that, so made-up rounds
         * cannot crowd others out. A record only guards against a chunk delivered twice, which
         * an honest sender never does: reusing it costs an honest sender nothing. */
        sender_t *oldest = NULL;
        int mine = 0;
        for (int i = 0; sgp && i < s->n_senders; i++) {
            sender_t *o = &s->senders[i];
            if (memcmp(o->key, peer, RUMOR_KEY_LEN) != 0) continue;
            mine++;
            if (!oldest || o->round < oldest->round) oldest = o;
        }
        if (mine >= SENDER_ROUNDS) {
            e = oldest;
        } else {
            if (s->n_senders == RUMOR_GOSSIP_MAX_SENDERS) return gsp_drop(g, RUMOR_GOSSIP_DROP_SENDERS);
            e = &s->senders[s->n_senders++];
        }
        memcpy(e->key, peer, RUMOR_KEY_LEN);
        e->round = sgp ? c->round : s->round;
        e->got = 0;
        e->bad = e->complete = e->struck = false;
        e->tidx = -1;
        e->share = 0.0f;
        e->mix = c->mix;
        e->mix_bad = false;
        if (e->cd2)
            for (size_t k = 0; k < g->chunks; k++) e->cd2[k] = -1.0;
        memset(e->bits, 0, g->words * sizeof *e->bits);
    }
    if (e->bad) return gsp_drop(g, RUMOR_GOSSIP_DROP_NONFINITE);
    const uint64_t bit = UINT64_C(1) << (c->chunk % 64);
    if (e->bits[c->chunk / 64] & bit) return gsp_drop(g, RUMOR_GOSSIP_DROP_DUPLICATE);
    if (!g->rule->add(g, s, e, c, payload, off, n)) return false;
    e->bits[c->chunk / 64] |= bit;
    g->st.chunks_in++;
    g->st.bytes_in += c->wire_bytes ? c->wire_bytes : len;
    if (++e->got == g->chunks) {
        e->complete = true;
        g->st.models_in++;
        if (g->cfg.algo.kind != RUMOR_ALGO_SGP && s->round == g->round)
            gsp_note_delay(g, s->self_added && now > s->started ? (double)(now - s->started) : 0.0);
    }
    return true;
}
