/* gossip_secure.c - secure mixing (gossip.h, secmix.h): masked sends, sums mod 2^32 and
 * the unmasking of the chunks whose masks cancel. */
#include "gossip_impl.h"


/* Secure mixing: the id of the set of senders whose masks cancel at one receiver in one round
 * (FNV-1a 64 of the round, the receiver, and the senders' keys in rank order, each with the
 * run (boot id) this peer knows it in). Only peers that agree on it unmask together; it is an
 * agreement check, not a secret. Two senders that know each other's runs differently make
 * masks that do not cancel: their mix ids differ, so the receiver leaves those chunks unmixed
 * instead of adding noise. */
static uint64_t mix_id(const rumor_gossip_t *g, uint64_t round, uint32_t receiver, const uint32_t *in, size_t n_in)
{
    uint8_t r[8];
    for (int i = 0; i < 8; i++) r[i] = (uint8_t)(round >> (8 * i));
    uint64_t h = rumor_fnv1a(RUMOR_FNV_BASIS, r, sizeof r);
    h = rumor_fnv1a(h, g->members[receiver], RUMOR_KEY_LEN);
    for (size_t k = 0; k < n_in; k++) {
        h = rumor_fnv1a(h, g->members[in[k]], RUMOR_KEY_LEN);
        for (int i = 0; i < 8; i++) r[i] = (uint8_t)(g->member_boot[in[k]] >> (8 * i));
        h = rumor_fnv1a(h, r, sizeof r);
    }
    return h;
}

/* Secure mixing: the sends of a round, each with its mask edges. A receiver with fewer than
 * two senders gets nothing (it would unmask its one neighbour's model). */
static void push_masked_sends(rumor_gossip_t *g, size_t n, uint32_t me, size_t n_out, int sb)
{
    for (size_t k = 0; k < n_out; k++) {
        const uint32_t to = g->out_rank[k];
        const uint32_t *in = NULL; /* sorted by rank, i.e. by key (topology.h): the same ring at every sender */
        size_t n_in = 0;
        char terr[RUMOR_ERR_LEN];
        if (rumor_topology_in(g->topo, n, g->round, to, &in, &n_in, terr) != RUMOR_OK || n_in < 2 ||
            n_in > RUMOR_GOSSIP_MAX_SENDERS) {
            g->st.sends_unmasked++;
            continue;
        }
        size_t pos = n_in;
        for (size_t i = 0; i < n_in; i++)
            if (in[i] == me) pos = i;
        if (pos == n_in) { /* we do not send to it by its own list: views disagree, nothing to mask with */
            g->st.sends_unmasked++;
            continue;
        }
        const uint32_t next = in[(pos + 1) % n_in], prev = in[(pos + n_in - 1) % n_in];
        if (!g->cfg.boot || !g->member_boot[next] || !g->member_boot[prev]) {
            g->st.sends_unmasked++; /* a ring neighbour's run is not known yet: no mask to share */
            continue;
        }
        pending_t *p = gsp_push_send(g, g->members[to], g->out_share[k], sb);
        if (!p) continue;
        p->masked = true;
        p->mix = mix_id(g, g->round, to, in, n_in);
        rumor_secmix_edges_t *e = &p->edges;
        memcpy(e->receiver, g->members[to], RUMOR_KEY_LEN);
        e->round = g->round;
        memcpy(e->peer[0], g->members[next], RUMOR_KEY_LEN);
        e->peer_boot[0] = g->member_boot[next];
        e->count = 1;
        if (prev != next) {
            e->peer_boot[e->count] = g->member_boot[prev];
            memcpy(e->peer[e->count++], g->members[prev], RUMOR_KEY_LEN);
        }
    }
}

static bool is_expected(const slot_t *s, const uint8_t key[RUMOR_KEY_LEN])
{
    for (int i = 0; i < s->n_expected; i++)
        if (memcmp(s->expected[i], key, RUMOR_KEY_LEN) == 0) return true;
    return false;
}

/* Secure mixing: unmask the chunks whose masks cancel (every expected sender delivered it,
 * all with our mix id, nobody else did) into the delta form of acc: sum - shares * snap, with
 * the shares joining accw. Other chunks stay as they are: the peer's own snapshot alone. */
static void secure_unmask(rumor_gossip_t *g, slot_t *s, const float *snap)
{
    bool *ok = g->chunk_ok;
    for (size_t c = 0; c < g->chunks; c++) ok[c] = s->n_expected >= 2 && s->mcount[c] == (uint32_t)s->n_expected;
    for (int k = 0; k < s->n_senders; k++) {
        const sender_t *e = &s->senders[k];
        if (!e->mix_bad && e->mix == s->mix && is_expected(s, e->key)) continue;
        for (size_t c = 0; c < g->chunks; c++)
            if (e->bits[c / 64] & (UINT64_C(1) << (c % 64))) ok[c] = false;
    }
    for (size_t c = 0; c < g->chunks; c++) {
        const size_t off = c * g->chunk_params, n = chunk_len(g, c);
        if (!ok[c]) {
            if (s->n_expected > 0) g->st.chunks_unmixed++;
            continue;
        }
        const double sh = s->mshare[c];
        const uint32_t *restrict m = s->macc + off;
        const float *restrict sx = snap + off;
        float *restrict acc = s->acc + off;
        /* The neighbourhood's mean, sum / sh, must be plausible like any chunk (the encoding's
         * +-2048 bounds the sum, not its scale against ours); one sender cannot be told apart,
         * so the whole chunk sits out. */
        double ss = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double v = rumor_secmix_value(m[i]);
            ss += v * v;
        }
        if (!gsp_plausible_ss(g, c, ss / (sh * sh), n)) {
            g->st.chunks_unmixed++;
            g->st.drops[RUMOR_GOSSIP_DROP_IMPLAUSIBLE]++;
            continue;
        }
        for (size_t i = 0; i < n; i++) acc[i] = (float)(rumor_secmix_value(m[i]) - sh * (double)sx[i]);
        s->accw[c] += sh;
    }
    memset(s->macc, 0, g->vec * sizeof *s->macc);
    memset(s->mcount, 0, g->chunks * sizeof *s->mcount);
    memset(s->mshare, 0, g->chunks * sizeof *s->mshare);
}

/* The round's mix id, or none (fewer than two senders: nobody sends to us, and we mix
 * nothing), then the masked sends. */
static void secure_begin(rumor_gossip_t *g, slot_t *s, const gsp_round_t *r, int sb)
{
    if (r->has_in) {
        if (r->n_in >= 2 && r->n_in <= RUMOR_GOSSIP_MAX_SENDERS) {
            s->mix = mix_id(g, g->round, (uint32_t)r->me, r->in, r->n_in); /* in: sorted by rank */
        } else {
            s->n_expected = 0;
        }
    }
    push_masked_sends(g, r->n, (uint32_t)r->me, r->n_out, sb);
}

/* Words, not floats: summed mod 2^32 and read only once the round's masks cancel. A sum mod
 * 2^32 cannot be undone: a chunk that would spoil the round's (another set, or a sender not
 * expected) is refused before it is added. Rounds not begun yet cannot be checked so early; at
 * their end such a chunk leaves its chunk unmixed. The weight joins accw when the chunk is
 * unmasked. */
static bool secure_add(rumor_gossip_t *g, slot_t *s, sender_t *e, const rumor_gossip_chunk_t *c, const void *payload,
                       size_t off, size_t n)
{
    if (s->self_added && (c->mix != s->mix || !is_expected(s, e->key))) return gsp_drop(g, RUMOR_GOSSIP_DROP_MODE);
    rumor_secmix_add(s->macc + off, payload, n);
    s->mcount[c->chunk]++;
    s->mshare[c->chunk] += c->w;
    if (c->mix != e->mix) e->mix_bad = true;
    return true;
}

const gsp_rule_t gsp_rule_secure = {
    .name = "secure", .begin = secure_begin, .add = secure_add, .settle = secure_unmask,
};
