/* gossip_robust.c - robust mixing (gossip.h): a neighbour's chunk clipped to a radius around
 * this peer's own model (clip), or a coordinate-wise trimmed mean (trim); strikes and bans. */
#include "gossip_impl.h"

/* Robust mixing, in one pass: the squared distance of chunk v (any alignment) to the centre
 * c, and v's own sum of squares in *ss (in double: finite exactly when every value is, and
 * FLT_MAX's squares too). */
static double dist2(const void *v, const float *restrict c, size_t n, double *ss)
{
    const uint8_t *restrict p = v;
    double s = 0.0, q = 0.0;
    for (size_t b = 0; b < n; b += GSP_BLOCK) {
        const size_t e = n - b < GSP_BLOCK ? n : b + GSP_BLOCK;
        gsp_prefetch(v, b);
        gsp_prefetch(c, b);
#pragma omp simd reduction(+ : s, q)
        for (size_t i = b; i < e; i++) {
            float x;
            memcpy(&x, p + 4 * i, 4);
            const float d = x - c[i];
            s += (double)(d * d);
            q += (double)x * (double)x;
        }
    }
    *ss = q;
    return s;
}

/* acc += a (c + f (v - c) - ref): v pulled towards the centre c by f in [0, 1], accumulated
 * against ref (NULL: absolute). With ref = c it is acc_add's a f (v - c). */
static void acc_add_pulled(float *restrict acc, const void *v, const float *restrict c, const float *ref, size_t n,
                           float a, float f)
{
    if (ref == c) {
        acc_add(acc, v, c, n, a * f);
        return;
    }
    const uint8_t *restrict p = v;
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float x;
        memcpy(&x, p + 4 * i, 4);
        acc[i] += a * (c[i] - (ref ? ref[i] : 0.0f) + f * (x - c[i]));
    }
}

static strike_t *strike_find(rumor_gossip_t *g, const uint8_t key[RUMOR_KEY_LEN])
{
    for (int i = 0; i < g->n_strikes; i++)
        if (memcmp(g->strikes[i].key, key, RUMOR_KEY_LEN) == 0) return &g->strikes[i];
    return NULL;
}

/* A strike against a sender (at most one per message); enough of them ban it. */
static void strike(rumor_gossip_t *g, sender_t *e)
{
    if (e->struck) return;
    e->struck = true;
    strike_t *k = strike_find(g, e->key);
    if (!k) {
        if (g->n_strikes < STRIKE_TABLE) {
            k = &g->strikes[g->n_strikes++];
        } else { /* full: forget the one struck least recently */
            k = &g->strikes[0];
            for (int i = 1; i < STRIKE_TABLE; i++)
                if (g->strikes[i].last < k->last) k = &g->strikes[i];
        }
        memset(k, 0, sizeof *k);
        memcpy(k->key, e->key, RUMOR_KEY_LEN);
    }
    k->strikes++;
    k->last = g->round;
    g->st.strikes++;
    if (k->strikes >= STRIKES_BAN) {
        k->banned_until = g->round + BAN_ROUNDS;
        k->strikes = 0;
        g->st.bans++;
    }
}

double gsp_weighted_quantile(double *dist, double *wt, int n, double q)
{
    double total = 0.0;
    for (int i = 0; i < n; i++) { /* insertion by distance: a neighbourhood is small */
        total += wt[i];
        for (int j = i; j > 0 && dist[j - 1] > dist[j]; j--) {
            double t = dist[j];
            dist[j] = dist[j - 1], dist[j - 1] = t;
            t = wt[j];
            wt[j] = wt[j - 1], wt[j - 1] = t;
        }
    }
    if (n == 0 || !(total > 0.0)) return -1.0;
    const double want = q * total;
    double acc = 0.0;
    int k = 0;
    while (k < n - 1 && acc + wt[k] < want) acc += wt[k++];
    return dist[k];
}

/* The next round's radii, chunk by chunk: the weighted (1 - F) quantile of this round's
 * distances of the senders that delivered the chunk, for guard K times their weighted median
 * (a chunk nobody sent keeps its radius; guard's -1 until then: start_radius).
 * Per chunk, because layers differ in scale: one radius for the whole model spread evenly
 * over the chunks would clip honest neighbours in the chunks where models differ most. */
static void update_radius(rumor_gossip_t *g, const slot_t *s)
{
    double dist[RUMOR_GOSSIP_MAX_SENDERS], wt[RUMOR_GOSSIP_MAX_SENDERS];
    double r2 = 0.0;
    for (size_t c = 0; c < g->chunks; c++) {
        int n = 0;
        for (int i = 0; i < s->n_senders; i++) {
            const sender_t *e = &s->senders[i];
            if (e->bad || e->cd2[c] < 0.0) continue;
            dist[n] = sqrt(e->cd2[c]);
            wt[n++] = e->share;
        }
        const double d = gsp_weighted_quantile(dist, wt, n, 1.0 - g->cfg.robust.clip_fraction);
        if (d >= 0.0) g->tau[c] = g->cfg.robust.guard > 0.0 ? g->cfg.robust.guard * d : d;
        if (g->tau[c] > 0.0) r2 += g->tau[c] * g->tau[c];
    }
    g->st.clip_radius = sqrt(r2);
}


/* Trimmed mean: the accumulator gets, coordinate by coordinate, the mean of the peer's own
 * snapshot value and the neighbours' that arrived, without the B largest and B smallest (the
 * median when that would leave none), minus the snapshot: the delta form the mix expects. */
static void trimmed_mix(rumor_gossip_t *g, slot_t *s, const float *snap)
{
    const int B = g->cfg.robust.trim;
    for (size_t c = 0; c < g->chunks; c++) {
        const float *src[RUMOR_GOSSIP_TRIM_SENDERS + 1];
        int m = 0;
        src[m++] = snap;
        for (int k = 0; k < s->n_senders; k++) {
            const sender_t *e = &s->senders[k];
            if (e->tidx >= 0 && !e->bad && (e->bits[c / 64] & (UINT64_C(1) << (c % 64))))
                src[m++] = s->tbuf + (size_t)e->tidx * g->vec;
        }
        const size_t off = c * g->chunk_params, n = chunk_len(g, c);
        for (size_t i = off; i < off + n; i++) {
            float v[RUMOR_GOSSIP_TRIM_SENDERS + 1];
            for (int k = 0; k < m; k++) {
                float t = src[k][i];
                int j = k;
                for (; j > 0 && v[j - 1] > t; j--) v[j] = v[j - 1];
                v[j] = t;
            }
            double sum = 0.0;
            if (m > 2 * B) {
                for (int k = B; k < m - B; k++) sum += v[k];
                sum /= (double)(m - 2 * B);
            } else {
                sum = m % 2 ? v[m / 2] : 0.5 * ((double)v[m / 2 - 1] + v[m / 2]);
            }
            s->acc[i] = (float)(sum - (double)snap[i]);
        }
        s->accw[c] = 1.0;
    }
}

const strike_t *gsp_strike_find(rumor_gossip_t *g, const uint8_t key[RUMOR_KEY_LEN]) { return strike_find(g, key); }

/* A banned sender is not waited for. */
static bool clip_waits_for(rumor_gossip_t *g, const uint8_t key[RUMOR_KEY_LEN])
{
    const strike_t *b = strike_find(g, key);
    return !(b && b->banned_until > g->round);
}

/* guard's radius for a chunk before any round has measured it: GUARD_START times the norm of
 * our own (its RMS times sqrt(n)), plus the plausibility floor's share. Two models drawn at
 * random at one scale lie sqrt(2) norms apart, so honest starts are taken whole; an attacker's
 * first shot (-10 times its model lies 11 norms away) is not. */
static double start_radius(const rumor_gossip_t *g, size_t c, size_t n)
{
    return (RUMOR_GOSSIP_GUARD_START * g->own_rms[c] + PLAUSIBLE_FLOOR) * sqrt((double)n);
}

/* A chunk this far away is a strike. clip: STRIKE_FAR radii. guard: STRIKE_FAR_GUARD radii,
 * and beyond its start radius (GUARD_START norms of our own chunk) too: the radius measures
 * how far the neighbours of recent rounds lay, and a neighbour that was not among them (the
 * other half of a healed partition, a newcomer trained elsewhere) may lie many of them away,
 * an honest model still; a scaled model (-10 or 12 times its own) lies 11 norms out. */
static double far_bound(const rumor_gossip_t *g, size_t c, size_t n, double tc)
{
    if (g->cfg.robust.guard <= 0.0) return STRIKE_FAR * tc;
    return fmax(STRIKE_FAR_GUARD * tc, start_radius(g, c, n));
}

/* A chunk held for its first round's judgement (e->cd2 until then). */
#define HELD (-2.0)

/* guard under diloco clips pseudo-gradients: a neighbour's inner result against the outer
 * parameters every phase starts from, not against our own inner result, a phase's progress
 * away (clip keeps its own centre: its quantile radius around theta let a clean swarm
 * diverge, docs/decisions.md). */
static bool outer(const rumor_gossip_t *g)
{
    return g->cfg.robust.guard > 0.0 && g->cfg.algo.kind == RUMOR_ALGO_DILOCO;
}

static const float *centre_of(const rumor_gossip_t *g, const slot_t *s, size_t off)
{
    const float *ref = ref_of(g, s);
    return outer(g) ? g->theta + off : (ref ? ref : g->snaps[g->cur_snap].x) + off;
}

/* Chunk c of sender e (share a, squared distance d2 from the centre) into the round. A first
 * round under diloco (no radius yet, our own pseudo-gradient known: the start radius of 3 model
 * norms is far too loose for pseudo-gradients, and what one neighbour pushes through it the
 * outer momentum carries on) takes a chunk whole within RUMOR_GOSSIP_GUARD_FIRST times our
 * own pseudo-gradient's norm and leaves it out beyond (delivered, not mixed; counted `far`);
 * its distance counts for the next radius either way. Otherwise the chunk is clipped to the
 * radius. A chunk far beyond it is a strike. */
static void judge(rumor_gossip_t *g, slot_t *s, sender_t *e, size_t c, const void *payload, size_t off, size_t n,
                  float a, double d2)
{
    const float *ref = ref_of(g, s), *centre = centre_of(g, s, off);
    const double d = sqrt(d2);
    if (outer(g) && g->tau[c] < 0.0) {
        const double tc = RUMOR_GOSSIP_GUARD_FIRST * g->own_pg[c];
        e->cd2[c] = d2;
        e->share = a;
        if (d > far_bound(g, c, n, tc)) strike(g, e);
        if (d > tc) {
            g->st.drops[RUMOR_GOSSIP_DROP_FAR]++;
            return;
        }
        acc_add_pulled(s->acc + off, payload, centre, ref ? ref + off : NULL, n, a, 1.0f);
        s->accw[c] += (double)a;
        return;
    }
    /* A neighbour ahead of us is measured against our snapshot of a round before, which lies
     * about as far from the one to come as the latest moved from its own: by the triangle
     * inequality, a model within tau of our next snapshot is within tau + moved of this one.
     * So it gets that much more room, and its distance counts as d + moved for the next
     * radius (the most it can be from our next snapshot): a peer behind its neighbours would
     * otherwise measure them nearer than they are, and clip them once they come on time. An
     * attacker gains as much room as our own movement. */
    const double early = s->self_added ? 0.0 : g->moved[c];
    const double tc = (g->tau[c] >= 0.0 ? g->tau[c] : start_radius(g, c, n)) + early;
    float f = 1.0f;
    if (d > tc) {
        f = (float)(tc / d);
        g->st.chunks_clipped++;
    }
    if (tc > 0.0 && d > far_bound(g, c, n, tc)) strike(g, e);
    e->cd2[c] = (d + early) * (d + early);
    e->share = a;
    acc_add_pulled(s->acc + off, payload, centre, ref ? ref + off : NULL, n, a, f);
    s->accw[c] += (double)a;
}

/* A first round's chunk under diloco that came before our own inner result: held as it came
 * until that result is in (clip_self), as far as RUMOR_GOSSIP_HOLD_SENDERS models and
 * RUMOR_GOSSIP_HOLD_BYTES allow; one more sender's is left out (its distance still counts). */
static void hold(rumor_gossip_t *g, slot_t *s, sender_t *e, size_t c, const void *payload, size_t off, size_t n,
                 float a, double d2)
{
    e->share = a;
    if (e->tidx < 0) {
        const size_t fit = RUMOR_GOSSIP_HOLD_BYTES / (g->vec * sizeof(float));
        const int cap = fit < 1 ? 1 : fit < RUMOR_GOSSIP_HOLD_SENDERS ? (int)fit : RUMOR_GOSSIP_HOLD_SENDERS;
        if (!s->tbuf) s->tbuf = malloc((size_t)cap * g->vec * sizeof *s->tbuf);
        if (!s->tbuf || s->n_trim == cap) {
            e->cd2[c] = d2;
            g->st.drops[RUMOR_GOSSIP_DROP_FAR]++;
            return;
        }
        e->tidx = s->n_trim++;
    }
    memcpy(s->tbuf + (size_t)e->tidx * g->vec + off, payload, n * sizeof(float));
    e->cd2[c] = HELD;
}

/* Our own snapshot is in: under diloco, our pseudo-gradient's norm per chunk while some chunk
 * has no radius yet, and the chunks held for it judged. */
static void clip_self(rumor_gossip_t *g, slot_t *s)
{
    if (!outer(g)) return;
    const float *x = g->snaps[g->cur_snap].x;
    for (size_t c = 0; c < g->chunks; c++) {
        if (g->tau[c] >= 0.0) continue;
        const size_t off = c * g->chunk_params;
        double ss;
        g->own_pg[c] = sqrt(dist2(x + off, g->theta + off, chunk_len(g, c), &ss));
    }
    for (int i = 0; i < s->n_senders && s->tbuf; i++) {
        sender_t *e = &s->senders[i];
        for (size_t c = 0; e->tidx >= 0 && c < g->chunks; c++) {
            if (e->cd2[c] != HELD) continue;
            const size_t off = c * g->chunk_params, n = chunk_len(g, c);
            const float *v = s->tbuf + (size_t)e->tidx * g->vec + off;
            double ss;
            judge(g, s, e, c, v, off, n, e->share, dist2(v, centre_of(g, s, off), n, &ss));
        }
        e->tidx = -1;
    }
    s->n_trim = 0;
    free(s->tbuf);
    s->tbuf = NULL;
}

/* Self-centred clipping against our own snapshot (the round's, or the latest). A chunk out of
 * all proportion to our own parameters is dropped first, as plain mixing drops it (its
 * distance would overflow, and where the sender is most of a round's neighbourhood the next
 * radius would be that distance), and struck, as one far beyond the radius is: a sender that
 * keeps sending them is banned, not waited for round after round. */
static bool clip_add(rumor_gossip_t *g, slot_t *s, sender_t *e, const rumor_gossip_chunk_t *c, const void *payload,
                     size_t off, size_t n)
{
    const strike_t *k = strike_find(g, e->key);
    if (k && k->banned_until > g->round) return gsp_drop(g, RUMOR_GOSSIP_DROP_BANNED);
    double ss;
    const double d2 = dist2(payload, centre_of(g, s, off), n, &ss);
    if (!isfinite(ss) || !gsp_plausible_ss(g, c->chunk, ss, n)) {
        e->bad = true;
        strike(g, e);
        return gsp_drop(g, isfinite(ss) ? RUMOR_GOSSIP_DROP_IMPLAUSIBLE : RUMOR_GOSSIP_DROP_NONFINITE);
    }
    if (outer(g) && g->tau[c->chunk] < 0.0 && !s->self_added) hold(g, s, e, c->chunk, payload, off, n, (float)c->w, d2);
    else judge(g, s, e, c->chunk, payload, off, n, (float)c->w, d2);
    return true;
}

/* Held as it came, for the trimmed mean at the round's end. */
static bool trim_add(rumor_gossip_t *g, slot_t *s, sender_t *e, const rumor_gossip_chunk_t *c, const void *payload,
                     size_t off, size_t n)
{
    if (!gsp_all_finite(payload, n)) {
        e->bad = true;
        return gsp_drop(g, RUMOR_GOSSIP_DROP_NONFINITE);
    }
    if (e->tidx < 0) {
        if (s->n_trim == RUMOR_GOSSIP_TRIM_SENDERS) return gsp_drop(g, RUMOR_GOSSIP_DROP_SENDERS);
        e->tidx = s->n_trim++;
    }
    memcpy(s->tbuf + (size_t)e->tidx * g->vec + off, payload, n * sizeof(float));
    s->accw[c->chunk] += (double)(float)c->w;
    return true;
}

const gsp_rule_t gsp_rule_clip = {
    .name = "clip", .waits_for = clip_waits_for, .begin = gsp_plain_begin, .add = clip_add, .after = update_radius,
    .self = clip_self,
};
const gsp_rule_t gsp_rule_trim = {
    .name = "trim", .begin = gsp_plain_begin, .add = trim_add, .settle = trimmed_mix,
};
