/* gossip_state.c - the gossip engine's state (gossip_impl.h): the scale of this peer's own model
 * and what is plausible beside it, the mass, stats and weights, and a model restored or adopted. */
#include "gossip_impl.h"

/* ---- plausibility ---- */

/* The sum of squares of chunk v (n float32, any alignment): finite exactly when every value
 * is. Summed in float first (twice the lanes of double; it is compared against a bound 16
 * times away, so float's rounding does not matter); a sum that overflows float (a value
 * beyond about 1e19, or not finite) is redone in double, where FLT_MAX squared and summed
 * over a whole chunk stays finite. */
double gsp_sumsq(const void *v, size_t n)
{
    const uint8_t *restrict p = v;
    float f = 0.0f;
    for (size_t b = 0; b < n; b += GSP_BLOCK) {
        const size_t e = n - b < GSP_BLOCK ? n : b + GSP_BLOCK;
        gsp_prefetch(v, b);
#pragma omp simd reduction(+ : f)
        for (size_t i = b; i < e; i++) {
            float x;
            memcpy(&x, p + 4 * i, 4);
            f += x * x;
        }
    }
    if (isfinite(f)) return (double)f;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++) {
        float x;
        memcpy(&x, p + 4 * i, 4);
        s += (double)x * (double)x;
    }
    return s;
}

/* own_rms from the latest snapshot (one pass over the model). */
void gsp_own_scale(rumor_gossip_t *g)
{
    const float *x = g->snaps[g->cur_snap].x;
    for (size_t c = 0; c < g->chunks; c++) {
        const size_t n = chunk_len(g, c);
        g->own_rms[c] = sqrt(gsp_sumsq(x + c * g->chunk_params, n) / (double)n);
    }
}

/* dst = src (a new snapshot), and own_rms from it in the same pass; robust mixing also
 * measures, per chunk, how far it moved from the latest snapshot (clip_add). */
void gsp_snap_copy(rumor_gossip_t *g, float *restrict dst, const float *restrict src)
{
    const float *prev = g->have_snap ? g->snaps[g->cur_snap].x : NULL;
    if (g->moved && prev && prev != dst) {
        for (size_t c = 0; c < g->chunks; c++) {
            const size_t off = c * g->chunk_params, n = chunk_len(g, c);
            double s = 0.0, m = 0.0;
#pragma omp simd reduction(+ : s, m)
            for (size_t i = 0; i < n; i++) {
                const float v = src[off + i], d = v - prev[off + i];
                dst[off + i] = v;
                s += (double)v * (double)v;
                m += (double)(d * d);
            }
            g->own_rms[c] = sqrt(s / (double)n);
            g->moved[c] = sqrt(m);
        }
        return;
    }
    for (size_t c = 0; c < g->chunks; c++) {
        const size_t off = c * g->chunk_params, n = chunk_len(g, c);
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (size_t i = 0; i < n; i++) {
            const float v = src[off + i];
            dst[off + i] = v;
            s += (double)v * (double)v;
        }
        g->own_rms[c] = sqrt(s / (double)n);
    }
}

/* Whether n values of chunk c whose sum of squares is ss are of a scale this peer's own
 * parameters of that range make plausible: RMS <= PLAUSIBLE_RMS * RMS(own) + PLAUSIBLE_FLOOR
 * (false for a non-finite ss). */
bool gsp_plausible_ss(const rumor_gossip_t *g, size_t c, double ss, size_t n)
{
    const double bound = PLAUSIBLE_RMS * g->own_rms[c] + PLAUSIBLE_FLOOR;
    return ss <= bound * bound * (double)n;
}

/* sgp: the most weight one message, or this peer after a round, can plausibly hold. The
 * weights of a swarm sum to its member count: more than the members this peer knows of (twice
 * over, and some: views lag) is made up. Capping our own weight there too means a neighbour
 * that slips in weights just under the bound cannot inflate everyone's until honest messages
 * pass it. */
double gsp_weight_bound(const rumor_gossip_t *g)
{
    const double b = 2.0 * (double)(g->view_count + 1) + RUMOR_GOSSIP_SGP_WEIGHT_SLACK;
    return b < SHARE_MAX_SGP ? b : SHARE_MAX_SGP;
}

/* ---- state ---- */

void rumor_gossip_mass(const rumor_gossip_t *g, double *z, double *wt)
{
    for (int k = 0; k < SLOTS; k++) {
        const slot_t *s = &g->slots[k];
        if (!s->live && !s->self_added) continue;
        const float *ref = ref_of(g, s);
        for (size_t i = 0; i < g->vec; i++)
            z[i] += (double)s->acc[i] + (ref ? s->accw[i / g->chunk_params] * (double)ref[i] : 0.0);
        for (size_t c = 0; c < g->chunks; c++) wt[c] += s->accw[c];
    }
}

void rumor_gossip_stats(const rumor_gossip_t *g, rumor_gossip_stats_t *st) { *st = g->st; }
uint64_t rumor_gossip_round(const rumor_gossip_t *g) { return g->round; }

long rumor_gossip_schedule_round(const rumor_gossip_t *g, long k)
{
    /* Rounds the swarm has done: the engine's round, and the one in flight (dpsgd, sgp). */
    const uint64_t swarm = g->round + (g->inflight ? 1 : 0), most = (uint64_t)k + RUMOR_SCHEDULE_AHEAD;
    return swarm <= (uint64_t)k ? k : (long)(swarm < most ? swarm : most);
}
size_t rumor_gossip_chunk_count(const rumor_gossip_t *g) { return g->chunks; }
const double *rumor_gossip_weights(const rumor_gossip_t *g) { return g->w; }
float *rumor_gossip_outer(rumor_gossip_t *g) { return g->theta; }
float *rumor_gossip_momentum(rumor_gossip_t *g) { return g->mom; }

rumor_err_t rumor_gossip_restore(rumor_gossip_t *g, uint64_t round, const double *w, size_t count,
                                 char err[RUMOR_ERR_LEN])
{
    if (g->inflight || g->st.round) return rumor_fail(err, RUMOR_EINVAL, "gossip: restore after the first round");
    if (count != g->chunks)
        return rumor_fail(err, RUMOR_ELAYOUT, "gossip: %zu push-sum weights for %zu chunks", count, g->chunks);
    for (size_t c = 0; c < count; c++)
        if (!(w[c] > 0.0) || !(w[c] <= SHARE_MAX_SGP))
            return rumor_fail(err, RUMOR_EINVAL, "gossip: push-sum weight %g out of range", w[c]);
    memcpy(g->w, w, count * sizeof *g->w);
    g->round = round;
    for (int i = 0; i < SLOTS; i++) gsp_slot_reset(g, &g->slots[i]);
    return RUMOR_OK;
}

bool rumor_gossip_plausible(const rumor_gossip_t *g, const float *x)
{
    for (size_t c = 0; c < g->chunks && c * g->chunk_params < g->P; c++) { /* the model's chunks */
        const size_t off = c * g->chunk_params, n = g->P - off < chunk_len(g, c) ? g->P - off : chunk_len(g, c);
        const double ss = gsp_sumsq(x + off, n);
        if (!isfinite(ss) || !gsp_plausible_ss(g, c, ss, n)) return false;
    }
    return true;
}

void rumor_gossip_adopt(rumor_gossip_t *g, const float *x, uint64_t round)
{
    snap_t *sn = &g->snaps[g->cur_snap];
    if (!g->inflight && sn->refs == 0) {
        /* The snapshot is the reference of what arrived before round one; what arrived is
         * kept (push-sum mass), moved to the new reference. */
        for (int k = 0; k < SLOTS; k++)
            if (g->slots[k].live && g->slots[k].ref == g->cur_snap) gsp_rebase(g, &g->slots[k], -1);
        memcpy(sn->x, x, g->P * sizeof *sn->x);
        for (int k = 0; k < SLOTS; k++)
            if (g->slots[k].live && g->slots[k].ref < 0) gsp_rebase(g, &g->slots[k], g->cur_snap);
    }
    if (g->theta) memcpy(g->theta, x, g->P * sizeof *g->theta);
    if (g->mom) memset(g->mom, 0, g->P * sizeof *g->mom);
    /* Overlapped diloco: a round in flight still lands, its outer step taken on the adopted
     * theta (the drivers adopt only between rounds, where none is). */
    if (g->sent) memcpy(g->sent, x, g->P * sizeof *g->sent);
    if (g->choco) { /* a public copy that starts from the adopted model: neighbours get keyframes */
        memcpy(g->xhat, x, g->P * sizeof *g->xhat);
        g->base = gsp_copy_hash(x, g->P);
        g->cver = 0;
    }
    for (size_t c = 0; c < g->chunks; c++) g->w[c] = 1.0; /* a newcomer brings its own unit of mass */
    gsp_own_scale(g);
    if (g->inflight) {
        /* The round in flight finishes first (it mixes little: the neighbours are ahead), and
         * the engine goes on from `round` at that finish. */
        g->forced = round;
        return;
    }
    g->round = round;
    gsp_clear_ahead(g);
    /* Accumulators of rounds before the new one are stale now (dpsgd, diloco); push-sum's
     * go into the first round. */
    for (int i = 0; i < SLOTS; i++) {
        slot_t *sl = &g->slots[i];
        if (!sl->live) continue;
        if (g->cfg.algo.kind == RUMOR_ALGO_SGP) sl->round = round; /* its only slot */
        else if (sl->round < round || sl->round >= round + SLOTS) gsp_slot_reset(g, sl);
    }
}
