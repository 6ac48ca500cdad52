/* gossip_choco.c - compressed gossip (gossip.h; CHOCO-SGD, Koloskova et al. 2019): public
 * copies moved by compressed deltas, keyframes, deltas held for their round. */
#include "gossip_impl.h"

static bool copy_valid(const rumor_gossip_t *g, const copy_t *e, size_t c)
{
    (void)g;
    return (e->valid[c / 64] >> (c % 64)) & 1u;
}

static void copy_set_valid(const rumor_gossip_t *g, copy_t *e, size_t c, bool v)
{
    (void)g;
    const uint64_t bit = UINT64_C(1) << (c % 64);
    const bool was = (e->valid[c / 64] & bit) != 0;
    if (v && !was) e->valid[c / 64] |= bit, e->n_valid++;
    if (!v && was) e->valid[c / 64] &= ~bit, e->n_valid--;
}

/* Hold lineage (lin, base) for e: valid at version 0 when its base is our initial model,
 * else nothing valid until keyframes come. */
static void copy_reset(rumor_gossip_t *g, copy_t *e, uint64_t lin, uint64_t base)
{
    e->lin = lin, e->base = base;
    memset(e->ver, 0, g->chunks * sizeof *e->ver);
    memset(e->valid, 0, g->words * sizeof *e->valid);
    e->n_valid = 0;
    if (base == g->x0_base) {
        memcpy(e->x, g->x0, g->vec * sizeof *e->x);
        for (size_t c = 0; c < g->chunks; c++) copy_set_valid(g, e, c, true);
    }
}

/* Compacting the held deltas: q goes to place *kept, its bytes down to *kept_len. */
static void pend_keep(rumor_gossip_t *g, pend_t q, size_t *kept, size_t *kept_len)
{
    memmove(g->pend_bytes + *kept_len, g->pend_bytes + q.at, q.len);
    q.at = *kept_len;
    *kept_len += q.len;
    g->pend[(*kept)++] = q;
}

/* Forget the held deltas of copy slot k (its peer is evicted). */
static void purge_pending(rumor_gossip_t *g, int k)
{
    size_t kept = 0, kept_len = 0;
    for (size_t i = 0; i < g->n_pend; i++) {
        pend_t q = g->pend[i];
        if (q.copy == k) continue;
        pend_keep(g, q, &kept, &kept_len);
    }
    g->n_pend = kept;
    g->pend_len = kept_len;
    g->copies[k].n_pend = 0;
    g->copies[k].pend_len = 0;
}

/* The entry of peer key; with create, a new one (evicting the one idle longest, when it has
 * been idle for 4 rounds or more). NULL when none. */
copy_t *gsp_copy_find(rumor_gossip_t *g, const uint8_t key[RUMOR_KEY_LEN], bool create)
{
    copy_t *idle = NULL;
    for (int k = 0; k < RUMOR_GOSSIP_CHOCO_PEERS; k++) {
        copy_t *e = &g->copies[k];
        if (e->used && memcmp(e->key, key, RUMOR_KEY_LEN) == 0) return e;
        if (!e->used) {
            if (!idle || idle->used) idle = e;
        } else if (e->last + 4 <= g->round && (!idle || (idle->used && e->last < idle->last))) {
            idle = e;
        }
    }
    if (!create || !idle) return NULL;
    copy_t *e = idle;
    if (e->used && e->n_pend > 0) purge_pending(g, (int)(e - g->copies));
    e->used = true;
    memcpy(e->key, key, RUMOR_KEY_LEN);
    e->lin = e->base = 0;
    e->heard = false;
    e->n_pend = 0;
    e->pend_len = 0;
    memset(e->valid, 0, g->words * sizeof *e->valid);
    e->n_valid = 0;
    e->kf_wanted = e->sent_any = e->needs = false;
    e->kf_round = e->kf_sent = 0;
    e->sent_ver = 0;
    e->share = 0.0f;
    e->last = g->round;
    return e;
}

/* The buffers of compressed gossip: this peer's public copy and its initial model, two rounds
 * of encoded deltas, the neighbours' copies and the deltas held for later rounds; false when
 * out of memory (rumor_gossip_destroy frees what was made). */
bool gsp_choco_alloc(rumor_gossip_t *g, const float *x0)
{
    const size_t enc_max = g->chunks * rumor_codec_encoded_len(&g->cfg.choco, g->chunk_params);
    g->xhat = malloc(g->vec * sizeof *g->xhat);
    g->x0 = malloc(g->vec * sizeof *g->x0);
    g->copies = calloc(RUMOR_GOSSIP_CHOCO_PEERS, sizeof *g->copies);
    if (!g->xhat || !g->x0 || !g->copies) return false;
    for (int k = 0; k < 2; k++)
        if (!(g->enc[k] = malloc(enc_max)) || !(g->enc_off[k] = malloc((g->chunks + 1) * sizeof *g->enc_off[k])))
            return false;
    for (int k = 0; k < RUMOR_GOSSIP_CHOCO_PEERS; k++) {
        copy_t *e = &g->copies[k];
        e->x = malloc(g->vec * sizeof *e->x);
        e->ver = calloc(g->chunks, sizeof *e->ver);
        e->valid = calloc(g->words, sizeof *e->valid);
        if (!e->x || !e->ver || !e->valid) return false;
    }
    /* Every neighbour as far ahead as the window reaches (SLOTS - 1 rounds), at most 64 MiB
     * of deltas; beyond, a neighbour's held deltas are applied, in order, early. */
    g->cap_pend = (SLOTS - 1) * RUMOR_GOSSIP_CHOCO_PEERS * g->chunks;
    g->cap_pend_bytes = (SLOTS - 1) * RUMOR_GOSSIP_CHOCO_PEERS * enc_max;
    if (g->cap_pend_bytes > ((size_t)64 << 20)) g->cap_pend_bytes = (size_t)64 << 20;
    g->pend = malloc(g->cap_pend * sizeof *g->pend);
    g->pend_bytes = malloc(g->cap_pend_bytes);
    if (!g->pend || !g->pend_bytes) return false;
    memcpy(g->xhat, x0, g->P * sizeof *g->xhat);
    memcpy(g->x0, x0, g->P * sizeof *g->x0);
    g->x0_base = g->base = gsp_copy_hash(x0, g->P);
    return true;
}

/* Move xhat towards x by the compressed difference, chunk by chunk, into snapshot sb's delta.
 * A chunk that cannot be encoded (x not finite) leaves xhat ahead of what receivers will see
 * in that chunk: everyone then gets a keyframe. */
void gsp_choco_encode(rumor_gossip_t *g, const float *x, int sb)
{
    size_t at = 0;
    g->enc_off[sb][0] = 0;
    for (size_t c = 0; c < g->chunks; c++) {
        const size_t off = c * g->chunk_params, n = chunk_len(g, c);
        size_t len = 0;
        if (rumor_codec_encode_delta(&g->cfg.choco, x + off, g->xhat + off, n, g->enc[sb] + at, &len, NULL) !=
            RUMOR_OK) {
            g->all_keyframes = true;
            len = 0;
        }
        at += len;
        g->enc_off[sb][c + 1] = at;
    }
    g->cver++;
}

static void push_choco_send(rumor_gossip_t *g, const uint8_t key[RUMOR_KEY_LEN], double share, int sb)
{
    pending_t *p = gsp_push_send(g, key, share, sb);
    if (!p) return;
    copy_t *e = gsp_copy_find(g, key, true);
    p->ver = g->cver;
    /* A neighbour we never sent to holds our copy at version 0 only if we are a fresh start (it
     * starts its copy from its own initial model, which is ours). */
    const bool in_step = e && (e->sent_any ? e->sent_ver + 1 == g->cver
                                           : g->cver == 1 && g->base == g->x0_base && !g->cfg.choco_resumed);
    /* A request is granted once every KF_EVERY rounds: a neighbour that keeps asking (a broken
     * or hostile one) cannot make us send whole models round after round. */
    const bool asked = e && e->kf_wanted && (e->kf_round == 0 || e->kf_round + KF_EVERY <= g->round + 1);
    p->keyframe = !in_step || asked || g->all_keyframes;
    /* Asked only of a neighbour heard from: one not heard from yet may well be in step. */
    p->need = e && e->heard && e->n_valid < g->chunks;
    if (e) {
        e->sent_ver = g->cver;
        e->sent_any = true;
        e->last = g->round;
        if (asked) e->kf_round = g->round + 1;
        if (p->keyframe) e->kf_sent = g->round + 1;
        if (p->keyframe) e->kf_wanted = false;
    }
    if (p->keyframe) g->st.keyframes++;
}

/* The copy of expected sender k that mixes this round, or NULL. An edge whose other end lacks
 * our copy sits out on both ends, or only one end would move and the average would drift. */
static copy_t *mixing_copy(rumor_gossip_t *g, const slot_t *s, int k)
{
    copy_t *e = gsp_copy_find(g, s->expected[k], false);
    return !e || e->n_valid == 0 || !(e->share > 0.0f) || e->needs ? NULL : e;
}

/* guard (the default with int4 and topk too): chunk c of copy k mixes f = min(1, tau_c / d)
 * of its difference d from our public copy, tau_c RUMOR_GOSSIP_GUARD times the weighted
 * median of this round's differences (every copy is in at the mix; one neighbour's weight
 * under half of the round's cannot set it). Into s->cd2: the factors, sender k's chunk c at
 * k * chunks + c. */
static void choco_guard(rumor_gossip_t *g, slot_t *s)
{
    const float *restrict xh = g->xhat;
    double dist[RUMOR_GOSSIP_MAX_SENDERS], wt[RUMOR_GOSSIP_MAX_SENDERS];
    for (size_t c = 0; c < g->chunks; c++) {
        const size_t off = c * g->chunk_params, n = chunk_len(g, c);
        int m = 0;
        for (int k = 0; k < s->n_expected; k++) {
            double *f = &s->cd2[(size_t)k * g->chunks + c];
            *f = -1.0; /* (not mixed) */
            const copy_t *e = mixing_copy(g, s, k);
            if (!e || !copy_valid(g, e, c)) continue;
            const float *restrict v = e->x + off;
            double q = 0.0;
#pragma omp simd reduction(+ : q)
            for (size_t i = 0; i < n; i++) q += (double)((v[i] - xh[off + i]) * (v[i] - xh[off + i]));
            *f = sqrt(q); /* (the distance, until the radius is known) */
            dist[m] = *f, wt[m++] = e->share;
        }
        const double med = gsp_weighted_quantile(dist, wt, m, 0.5);
        const double tau = med >= 0.0 ? g->cfg.robust.guard * med : 0.0;
        for (int k = 0; k < s->n_expected; k++) {
            double *f = &s->cd2[(size_t)k * g->chunks + c];
            if (*f > tau && *f > 0.0) {
                *f = tau / *f;
                g->st.chunks_clipped++;
            } else {
                *f = 1.0;
            }
        }
        if (c == 0) g->st.clip_radius = 0.0;
        g->st.clip_radius = sqrt(g->st.clip_radius * g->st.clip_radius + tau * tau);
    }
}

/* x += gamma sum_j w_j f_j (xhat_j - xhat) over the expected neighbours whose copies hold the
 * chunk (f_j: guard's factor, else 1; acc is the scratch for the sum); returns the squared
 * norm of the sum. */
static double choco_mix(rumor_gossip_t *g, slot_t *s, float *x)
{
    float *restrict d = s->acc;
    const float *restrict xh = g->xhat;
    int mixed = 0;
    const bool guard = g->cfg.robust.guard > 0.0;
    if (guard) choco_guard(g, s);
    memset(d, 0, g->vec * sizeof *d);
    for (int k = 0; k < s->n_expected; k++) {
        copy_t *e = mixing_copy(g, s, k);
        if (!e) continue;
        mixed++;
        for (size_t c = 0; c < g->chunks; c++) {
            if (!copy_valid(g, e, c)) continue;
            const size_t off = c * g->chunk_params, n = chunk_len(g, c);
            const float w = e->share * (guard ? (float)s->cd2[(size_t)k * g->chunks + c] : 1.0f);
            const float *restrict v = e->x + off;
#pragma omp simd
            for (size_t i = 0; i < n; i++) d[off + i] += w * (v[i] - xh[off + i]);
        }
    }
    const float gm = (float)g->cfg.choco_gamma;
    double cons = 0.0;
    if (g->cfg.algo.kind == RUMOR_ALGO_DILOCO) {
        /* The mixed inner result x + gamma d, as mix - s for the outer step (s: the snapshot). */
        const float *restrict sx = g->snaps[g->cur_snap].x;
#pragma omp simd reduction(+ : cons)
        for (size_t i = 0; i < g->vec; i++) {
            cons += (double)(d[i] * d[i]);
            d[i] = x[i] + gm * d[i] - sx[i];
        }
    } else {
#pragma omp simd reduction(+ : cons)
        for (size_t i = 0; i < g->vec; i++) {
            cons += (double)(d[i] * d[i]);
            x[i] += gm * d[i];
            d[i] = 0.0f;
        }
    }
    g->st.copies_mixed = (uint64_t)mixed;
    return cons;
}

/* Apply one chunk to copy e (a keyframe or a delta at version ver); false when dropped. */
static bool copy_apply(rumor_gossip_t *g, copy_t *e, size_t k, int codec, uint64_t ver, const void *payload, size_t len)
{
    const size_t off = k * g->chunk_params, n = chunk_len(g, k);
    if (codec == RUMOR_CODEC_F32) {
        if (copy_valid(g, e, k) && e->ver[k] >= ver) return gsp_drop(g, RUMOR_GOSSIP_DROP_DUPLICATE);
        const double ss = gsp_sumsq(payload, n); /* one read: finite exactly when every value is */
        if (!isfinite(ss)) return gsp_drop(g, RUMOR_GOSSIP_DROP_NONFINITE);
        if (!gsp_plausible_ss(g, k, ss, n)) return gsp_drop(g, RUMOR_GOSSIP_DROP_IMPLAUSIBLE);
        memcpy(e->x + off, payload, n * sizeof(float));
    } else {
        if (!copy_valid(g, e, k) || e->ver[k] + 1 != ver) {
            if (copy_valid(g, e, k) && e->ver[k] >= ver) return gsp_drop(g, RUMOR_GOSSIP_DROP_DUPLICATE);
            copy_set_valid(g, e, k, false);
            return gsp_drop(g, RUMOR_GOSSIP_DROP_COPY);
        }
        /* Validated whole before anything is added; a sum that overflows spoils the chunk. */
        const bool decoded =
            rumor_codec_decode_add((rumor_proto_codec_t)codec, payload, len, n, 1.0f, e->x + off, NULL) == RUMOR_OK;
        const double ss = decoded ? gsp_sumsq(e->x + off, n) : NAN;
        if (!isfinite(ss)) {
            copy_set_valid(g, e, k, false);
            return gsp_drop(g, RUMOR_GOSSIP_DROP_NONFINITE);
        }
        /* The copy a delta made must be as plausible as a keyframe would be; it cannot be
         * undone, so the chunk of the copy waits for a keyframe. */
        if (!gsp_plausible_ss(g, k, ss, n)) {
            copy_set_valid(g, e, k, false);
            return gsp_drop(g, RUMOR_GOSSIP_DROP_IMPLAUSIBLE);
        }
    }
    e->ver[k] = ver;
    copy_set_valid(g, e, k, true);
    return true;
}

/* A delta of a round after the one in flight waits for its round: the mix of round r must
 * see every copy at its round-r version on both ends of an edge, or the two ends use
 * different differences and the average drifts. false when the pool is full (it is then
 * applied at once: a small asymmetry for that round, nothing lost). */
static bool defer(rumor_gossip_t *g, copy_t *e, const rumor_gossip_chunk_t *c, const void *payload, size_t len)
{
    /* Each neighbour its share of the pool: one running far ahead cannot crowd out the rest. */
    const size_t quota = g->cap_pend / RUMOR_GOSSIP_CHOCO_PEERS, quota_len = g->cap_pend_bytes / RUMOR_GOSSIP_CHOCO_PEERS;
    if (g->n_pend == g->cap_pend || g->pend_len + len > g->cap_pend_bytes || (size_t)e->n_pend >= quota ||
        e->pend_len + len > quota_len)
        return false;
    e->n_pend++;
    e->pend_len += len;
    pend_t *q = &g->pend[g->n_pend++];
    q->copy = (int)(e - g->copies);
    q->lin = e->lin;
    q->round = c->round;
    q->ver = c->ver;
    q->chunk = c->chunk;
    q->codec = c->codec;
    q->at = g->pend_len;
    q->len = len;
    memcpy(g->pend_bytes + g->pend_len, payload, len);
    g->pend_len += len;
    return true;
}

/* Apply the held deltas whose round has come (rounds <= g->round), each sender's in arrival
 * order: the first one still waiting holds back the rest of that sender's. only >= 0: apply
 * all of copy slot `only`'s, whatever their round (its pool share is full), and no other. */
static void apply_deferred(rumor_gossip_t *g, int only)
{
    size_t kept = 0, kept_len = 0;
    bool blocked[RUMOR_GOSSIP_CHOCO_PEERS] = {false};
    for (size_t i = 0; i < g->n_pend; i++) {
        pend_t q = g->pend[i];
        copy_t *e = &g->copies[q.copy];
        const bool due = only >= 0 ? q.copy == only : q.round <= g->round && !blocked[q.copy];
        if (due) {
            if (e->n_pend > 0) e->n_pend--, e->pend_len -= q.len;
            if (e->used && e->lin == q.lin) (void)copy_apply(g, e, q.chunk, q.codec, q.ver, g->pend_bytes + q.at, q.len);
            continue;
        }
        blocked[q.copy] = true;
        pend_keep(g, q, &kept, &kept_len);
    }
    g->n_pend = kept;
    g->pend_len = kept_len;
}

/* A piece of a neighbour's public copy: applied to the copy (a delta of a later round when
 * that round comes), then counted for the round it belongs to (readiness, deadlines). */
static bool choco_chunk(rumor_gossip_t *g, const uint8_t peer[RUMOR_KEY_LEN], const rumor_gossip_chunk_t *c,
                        const void *payload, size_t len, size_t off, size_t n, uint64_t now)
{
    if (c->codec != RUMOR_CODEC_F32 && c->codec != (int)g->cfg.choco.id) return gsp_drop(g, RUMOR_GOSSIP_DROP_SHAPE);
    if (c->codec == RUMOR_CODEC_F32 && len != n * sizeof(float)) return gsp_drop(g, RUMOR_GOSSIP_DROP_SHAPE);
    copy_t *e = gsp_copy_find(g, peer, true);
    if (!e) return gsp_drop(g, RUMOR_GOSSIP_DROP_SENDERS);
    if (!e->heard || e->lin != c->lin || e->base != c->base) copy_reset(g, e, c->lin, c->base);
    e->heard = true;
    /* A request sent before our last keyframe can have reached it is already answered. */
    if (c->need && (e->kf_sent == 0 || c->round >= e->kf_sent)) e->kf_wanted = true;
    e->needs = c->need;
    e->last = g->round > e->last ? g->round : e->last;
    e->share = (float)c->w;
    bool ok = true;
    /* Held for its round while that is within the window; a delta further ahead (or one the
     * pool has no room for) is applied now, after this sender's held ones, in order. */
    const bool later = c->round > g->round && c->round < g->round + SLOTS;
    if (c->codec != RUMOR_CODEC_F32 && (later || e->n_pend > 0) && defer(g, e, c, payload, len)) {
        /* held */
    } else {
        if (e->n_pend > 0) apply_deferred(g, (int)(e - g->copies));
        ok = copy_apply(g, e, c->chunk, c->codec, c->ver, payload, len);
    }
    /* Delivered either way: a delta that found no copy to apply to is still this sender's
     * message for its round, and waiting longer for it would not bring another. */
    g->st.chunks_in++;
    g->st.bytes_in += c->wire_bytes ? c->wire_bytes : len;
    /* The round's bookkeeping: who delivered what, and how late. */
    slot_t *s = NULL;
    if (c->round < g->round) {
        if (c->chunk + 1 == c->chunks) gsp_note_late(g, c->round, now);
    } else if (c->round >= g->round + SLOTS) {
        if (c->round <= RUMOR_GOSSIP_ROUND_MAX) gsp_note_ahead(g, peer, c->round);
    } else {
        s = gsp_slot_for(g, c->round);
    }
    if (!s) return ok;
    sender_t *se = gsp_find_sender(s, peer, s->round);
    if (!se) {
        if (s->n_senders == RUMOR_GOSSIP_MAX_SENDERS) return ok;
        se = &s->senders[s->n_senders++];
        memcpy(se->key, peer, RUMOR_KEY_LEN);
        se->round = s->round;
        se->got = 0;
        se->bad = se->complete = se->struck = false;
        se->tidx = -1;
        memset(se->bits, 0, g->words * sizeof *se->bits);
    }
    const uint64_t bit = UINT64_C(1) << (c->chunk % 64);
    if (se->bits[c->chunk / 64] & bit) return ok;
    se->bits[c->chunk / 64] |= bit;
    if (++se->got == g->chunks) {
        se->complete = true;
        g->st.models_in++;
        if (s->round == g->round) gsp_note_delay(g, s->self_added && now > s->started ? (double)(now - s->started) : 0.0);
    }
    return ok;
}

static void choco_begin(rumor_gossip_t *g, slot_t *s, const gsp_round_t *r, int sb)
{
    (void)s;
    for (size_t k = 0; k < r->n_out; k++) push_choco_send(g, g->members[g->out_rank[k]], g->out_share[k], sb);
    g->all_keyframes = false;
}

static double choco_round(rumor_gossip_t *g, slot_t *s, float *x)
{
    apply_deferred(g, -1);
    return choco_mix(g, s, x);
}

const gsp_rule_t gsp_rule_choco = {
    .name = "choco", .begin = choco_begin, .chunk = choco_chunk, .mix = choco_round,
};
