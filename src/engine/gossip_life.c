/* gossip_life.c - the gossip engine's life (gossip_impl.h): algorithm specs (--algo, --robust),
 * the modes' checks, creation and destruction, and the view it is given. */
#include "gossip_impl.h"

#include <errno.h>
#include <stdio.h>

/* ---- algorithm specs ---- */

rumor_err_t rumor_algo_parse(rumor_algo_t *out, const char *spec, char err[RUMOR_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    out->local_steps = 1;
    out->outer_lr = 0.7;
    out->outer_momentum = 0.9;
    if (!spec) spec = "";
    if (strcmp(spec, "dpsgd") == 0) {
        out->kind = RUMOR_ALGO_DPSGD;
        return RUMOR_OK;
    }
    if (strcmp(spec, "sgp") == 0) {
        out->kind = RUMOR_ALGO_SGP;
        return RUMOR_OK;
    }
    if (strncmp(spec, "diloco:", 7) == 0) {
        const char *a = spec + 7;
        char *end;
        errno = 0;
        long h = (*a >= '0' && *a <= '9') ? strtol(a, &end, 10) : -1;
        if (h < 1 || h > 100000 || errno || *end)
            return rumor_fail(err, RUMOR_EINVAL, "--algo %s: diloco:H needs H in 1..100000 local steps", spec);
        out->kind = RUMOR_ALGO_DILOCO;
        out->local_steps = (int)h;
        return RUMOR_OK;
    }
    return rumor_fail(err, RUMOR_EINVAL, "unknown --algo '%s' (expected dpsgd, sgp or diloco:H)", spec);
}

void rumor_algo_format(char *buf, size_t len, const rumor_algo_t *a)
{
    switch (a->kind) {
    case RUMOR_ALGO_DPSGD: snprintf(buf, len, "dpsgd"); break;
    case RUMOR_ALGO_SGP: snprintf(buf, len, "sgp"); break;
    case RUMOR_ALGO_DILOCO: snprintf(buf, len, "diloco:%d", a->local_steps); break;
    }
}

static void set_guard(rumor_robust_t *rb)
{
    memset(rb, 0, sizeof *rb);
    rb->clip = true;
    rb->clip_fraction = 0.5;
    rb->guard = RUMOR_GOSSIP_GUARD;
}

rumor_err_t rumor_robust_parse(rumor_robust_t *out, const char *spec, char err[RUMOR_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec || strcmp(spec, "none") == 0) return RUMOR_OK;
    if (strcmp(spec, "auto") == 0) {
        out->automatic = true;
        return RUMOR_OK;
    }
    if (strcmp(spec, "guard") == 0 || strncmp(spec, "guard:", 6) == 0) {
        set_guard(out);
        if (spec[5] == ':') {
            char *end;
            errno = 0;
            const double k = strtod(spec + 6, &end);
            if (end == spec + 6 || *end || errno || !(k > 1.0 && k <= 1000.0))
                return rumor_fail(err, RUMOR_EINVAL, "--robust %s: guard:K needs a factor 1 < K <= 1000", spec);
            out->guard = k;
        }
        return RUMOR_OK;
    }
    if (strncmp(spec, "trim:", 5) == 0) {
        char *end;
        errno = 0;
        const long b = strtol(spec + 5, &end, 10);
        if (end == spec + 5 || *end || errno || b < 1 || b > RUMOR_GOSSIP_TRIM_MAX)
            return rumor_fail(err, RUMOR_EINVAL, "--robust %s: trim:B needs 1 <= B <= %d", spec, RUMOR_GOSSIP_TRIM_MAX);
        out->trim = (int)b;
        return RUMOR_OK;
    }
    if (strcmp(spec, "clip") == 0 || strncmp(spec, "clip:", 5) == 0) {
        out->clip = true;
        out->clip_fraction = 0.25;
        if (spec[4] == ':') {
            char *end;
            errno = 0;
            const double f = strtod(spec + 5, &end);
            if (end == spec + 5 || *end || errno || !(f > 0.0 && f < 1.0))
                return rumor_fail(err, RUMOR_EINVAL, "--robust %s: clip:F needs a fraction 0 < F < 1", spec);
            out->clip_fraction = f;
        }
        return RUMOR_OK;
    }
    return rumor_fail(err, RUMOR_EINVAL, "unknown --robust '%s' (expected auto, none, guard, guard:K, clip, clip:F or trim:B)", spec);
}

void rumor_robust_resolve(rumor_robust_t *rb, const rumor_algo_t *algo, bool secure_mix, const rumor_codec_t *codec,
                          bool state)
{
    if (!rb->automatic) return;
    if (algo->kind != RUMOR_ALGO_SGP && !secure_mix && !state) set_guard(rb);
    else memset(rb, 0, sizeof *rb);
}

const char *rumor_gossip_drop_name(rumor_gossip_drop_t d)
{
    static const char *names[RUMOR_GOSSIP_DROP_COUNT] = {"layout", "shape",   "weight", "nonfinite", "duplicate", "stale",
                                                         "ahead",  "senders", "banned", "mode",      "copy",
                                                         "implausible", "far"};
    return (unsigned)d < RUMOR_GOSSIP_DROP_COUNT ? names[d] : "?";
}

/* ---- life cycle ---- */

/* choco: a copy's base, FNV-1a 64 of its version 0 (the float32 bytes), never 0. */
uint64_t gsp_copy_hash(const float *x, size_t n)
{
    const uint64_t h = rumor_fnv1a(RUMOR_FNV_BASIS, x, n * sizeof *x);
    return h ? h : 1;
}

rumor_err_t rumor_gossip_check_modes(const rumor_algo_t *algo, const rumor_robust_t *robust, bool secure_mix,
                                     const rumor_codec_t *codec, double gamma, const char *state, char err[RUMOR_ERR_LEN])
{
    const bool robust_on = robust->clip || robust->trim;
    if (algo->overlap && algo->kind == RUMOR_ALGO_DILOCO && algo->local_steps < 2)
        return rumor_fail(err, RUMOR_EINVAL, "--overlap with diloco:%d: a phase of one step has nothing to overlap",
                          algo->local_steps);
    if (algo->overlap && algo->kind == RUMOR_ALGO_DILOCO &&
        (algo->overlap_steps < 1 || algo->overlap_steps >= algo->local_steps))
        return rumor_fail(err, RUMOR_EINVAL, "--overlap-steps %d: diloco:%d overlaps 1 to %d inner steps",
                          algo->overlap_steps, algo->local_steps, algo->local_steps - 1);
    if (state && (algo->kind != RUMOR_ALGO_DPSGD || rumor_codec_is_delta(codec->id)))
        return rumor_fail(err, RUMOR_EINVAL, "%s (optimizer state gossiped with the model) needs dpsgd, without --codec "
                                             "topk or int4", state);
    if (rumor_codec_is_delta(codec->id)) {
        const char *name = rumor_codec_name(codec->id);
        /* (guard bounds the differences of public copies it mixes, gossip_choco.c) */
        if (algo->kind == RUMOR_ALGO_SGP || (algo->kind == RUMOR_ALGO_DILOCO && codec->id == RUMOR_CODEC_TOPK) ||
            robust->trim || (robust->clip && !(robust->guard > 0.0)) || secure_mix)
            return rumor_fail(err, RUMOR_EINVAL,
                              "--codec %s (compressed gossip, CHOCO-SGD) needs dpsgd%s, without --robust clip or trim "
                              "(guard is fine) or --secure-mix",
                              name, codec->id == RUMOR_CODEC_INT4 ? " or diloco" : "");
        if (!(gamma >= 0.0 && gamma <= 1.0))
            return rumor_fail(err, RUMOR_EINVAL, "--consensus-step %g: expected 0 < gamma <= 1", gamma);
    }
    if (!secure_mix) return RUMOR_OK;
    if (algo->kind == RUMOR_ALGO_SGP)
        return rumor_fail(err, RUMOR_EINVAL, "--secure-mix needs dpsgd or diloco (push-sum sends its weight in the clear)");
    if (robust_on)
        return rumor_fail(err, RUMOR_EINVAL,
                          "--secure-mix and --robust exclude each other: masked models cannot be clipped or trimmed");
    if (codec->id != RUMOR_CODEC_F32)
        return rumor_fail(err, RUMOR_EINVAL, "--secure-mix sends its own fixed-point encoding: leave --codec at f32");
    return RUMOR_OK;
}

/* A place as the ranks read it: 0 is the key's first 8 bytes, big-endian (key order). */
static uint64_t place_or_key(uint64_t place, const uint8_t *key)
{
    if (place) return place;
    for (int i = 0; i < 8; i++) place = place << 8 | key[i];
    return place;
}

rumor_gossip_t *rumor_gossip_new(const rumor_gossip_config_t *cfg_in, rumor_topology_t *topo, const float *x0,
                                 char err[RUMOR_ERR_LEN])
{
    if (cfg_in->params == 0 || cfg_in->params > ((size_t)1 << 36)) {
        rumor_fail(err, RUMOR_EINVAL, "gossip: model of %zu parameters", cfg_in->params);
        return NULL;
    }
    rumor_gossip_config_t resolved = *cfg_in;
    const rumor_gossip_config_t *cfg = &resolved;
    rumor_robust_resolve(&resolved.robust, &cfg_in->algo, cfg_in->secure_mix, &cfg_in->choco, cfg_in->extra > 0);
    if (cfg->robust.clip && (cfg->algo.kind == RUMOR_ALGO_SGP || !(cfg->robust.clip_fraction > 0.0) ||
                             !(cfg->robust.clip_fraction < 1.0))) {
        rumor_fail(err, RUMOR_EINVAL, cfg->algo.kind == RUMOR_ALGO_SGP
                                          ? "--robust clip needs dpsgd or diloco (push-sum weights are not clipped)"
                                          : "--robust clip: the fraction must be in (0, 1)");
        return NULL;
    }
    if (cfg->robust.trim && cfg->algo.kind == RUMOR_ALGO_SGP) {
        rumor_fail(err, RUMOR_EINVAL, "--robust trim needs dpsgd or diloco (push-sum weights are not trimmed)");
        return NULL;
    }
    if (cfg->robust.trim && (double)cfg->params * 4.0 * RUMOR_GOSSIP_TRIM_SENDERS * SLOTS > 4294967296.0) {
        rumor_fail(err, RUMOR_EINVAL, "--robust trim holds %d copies of the model: %zu parameters is too many (use clip)",
                   RUMOR_GOSSIP_TRIM_SENDERS * SLOTS, cfg->params);
        return NULL;
    }
    const bool choco = cfg->choco.id != RUMOR_CODEC_F32;
    if (choco && !rumor_codec_is_delta(cfg->choco.id)) {
        rumor_fail(err, RUMOR_EINVAL, "compressed gossip needs the topk or int4 codec");
        return NULL;
    }
    if (rumor_gossip_check_modes(&cfg->algo, &cfg->robust, cfg->secure_mix, &cfg->choco, cfg->choco_gamma,
                                 cfg->extra ? "optimizer state" : NULL, err) != RUMOR_OK)
        return NULL;
    if (cfg->secure_mix && (cfg->chunk_params ? cfg->chunk_params : RUMOR_GOSSIP_CHUNK_DEFAULT) % 16 != 0) {
        rumor_fail(err, RUMOR_EINVAL, "--secure-mix needs chunks of a multiple of 16 parameters");
        return NULL;
    }
    if (choco && (double)cfg->params * 4.0 * (RUMOR_GOSSIP_CHOCO_PEERS + 4) > 4294967296.0) {
        rumor_fail(err, RUMOR_EINVAL, "--codec %s holds copies of %d neighbours' models: %zu parameters is too many",
                   rumor_codec_name(cfg->choco.id), RUMOR_GOSSIP_CHOCO_PEERS, cfg->params);
        return NULL;
    }
    rumor_gossip_t *g = calloc(1, sizeof *g);
    if (!g) goto nomem;
    g->cfg = *cfg;
    g->st.clipping = cfg->robust.clip;
    g->choco = choco;
    g->rule = choco ? &gsp_rule_choco : cfg->secure_mix ? &gsp_rule_secure : cfg->robust.trim ? &gsp_rule_trim
            : cfg->robust.clip ? &gsp_rule_clip : &gsp_rule_plain;
    if (choco && !(g->cfg.choco_gamma > 0.0))
        g->cfg.choco_gamma = cfg->choco.id == RUMOR_CODEC_INT4 ? RUMOR_GOSSIP_CHOCO_GAMMA_INT4 : RUMOR_GOSSIP_CHOCO_GAMMA;
    if (!g->cfg.round_timeout_ms) g->cfg.round_timeout_ms = 10000;
    if (!g->cfg.min_wait_ms) g->cfg.min_wait_ms = 100;
    if (!(g->cfg.deadline_k > 0)) g->cfg.deadline_k = 4.0;
    g->topo = topo;
    g->P = cfg->params;
    g->vec = g->P + cfg->extra; /* floats a round sends: the model (diloco: its inner result), any state */
    g->chunk_params = cfg->chunk_params ? cfg->chunk_params : RUMOR_GOSSIP_CHUNK_DEFAULT;
    g->chunks = rumor_chunks(g->vec, g->chunk_params);
    g->words = (g->chunks + 63) / 64;
    g->overlap = cfg->algo.kind == RUMOR_ALGO_SGP || (cfg->algo.overlap && cfg->algo.kind == RUMOR_ALGO_DPSGD);
    g->dol = cfg->algo.overlap && cfg->algo.kind == RUMOR_ALGO_DILOCO;
    g->wait_ms = g->cfg.round_timeout_ms;
    if (!(g->w = malloc(g->chunks * sizeof *g->w))) goto nomem;
    for (size_t c = 0; c < g->chunks; c++) g->w[c] = 1.0;
    for (int i = 0; i < 2; i++) {
        snap_t *sn = &g->snaps[i];
        sn->x = malloc(g->vec * sizeof *sn->x);
        sn->w = malloc(g->chunks * sizeof *sn->w);
        if (!sn->x || !sn->w) goto nomem;
    }
    for (int i = 0; i < SLOTS; i++) {
        slot_t *sl = &g->slots[i];
        sl->acc = calloc(g->vec, sizeof *sl->acc);
        sl->accw = calloc(g->chunks, sizeof *sl->accw);
        sl->bits = calloc((size_t)RUMOR_GOSSIP_MAX_SENDERS * g->words, sizeof *sl->bits);
        sl->expected = malloc(RUMOR_GOSSIP_MAX_SENDERS * sizeof *sl->expected);
        if (!sl->acc || !sl->accw || !sl->bits || !sl->expected) goto nomem;
        for (int k = 0; k < RUMOR_GOSSIP_MAX_SENDERS; k++) sl->senders[k].bits = sl->bits + (size_t)k * g->words;
        if (cfg->robust.trim && !(sl->tbuf = malloc((size_t)RUMOR_GOSSIP_TRIM_SENDERS * g->vec * sizeof *sl->tbuf)))
            goto nomem;
        if (cfg->robust.clip) {
            if (!(sl->cd2 = malloc((size_t)RUMOR_GOSSIP_MAX_SENDERS * g->chunks * sizeof *sl->cd2))) goto nomem;
            for (int k = 0; k < RUMOR_GOSSIP_MAX_SENDERS; k++) sl->senders[k].cd2 = sl->cd2 + (size_t)k * g->chunks;
        }
        if (cfg->secure_mix) {
            sl->macc = calloc(g->vec, sizeof *sl->macc);
            sl->mcount = calloc(g->chunks, sizeof *sl->mcount);
            sl->mshare = calloc(g->chunks, sizeof *sl->mshare);
            if (!sl->macc || !sl->mcount || !sl->mshare) goto nomem;
        }
    }
    if (choco && !gsp_choco_alloc(g, x0)) goto nomem;
    g->out_rank = malloc(RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->out_rank);
    g->out_share = malloc(RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->out_share);
    if (!g->out_rank || !g->out_share) goto nomem;
    if (cfg->secure_mix && !(g->chunk_ok = malloc(g->chunks * sizeof *g->chunk_ok))) goto nomem;
    if (cfg->robust.clip) {
        if (!(g->tau = malloc(g->chunks * sizeof *g->tau)) || !(g->moved = calloc(g->chunks, sizeof *g->moved)))
            goto nomem;
        /* guard starts from the peer's own scale (-1), clip from nothing (0) */
        for (size_t c = 0; c < g->chunks; c++) g->tau[c] = cfg->robust.guard > 0.0 ? -1.0 : 0.0;
        if (cfg->robust.guard > 0.0 && cfg->algo.kind == RUMOR_ALGO_DILOCO &&
            !(g->own_pg = calloc(g->chunks, sizeof *g->own_pg)))
            goto nomem;
    }
    if (!(g->own_rms = malloc(g->chunks * sizeof *g->own_rms))) goto nomem;
    if (cfg->algo.kind == RUMOR_ALGO_DILOCO) {
        g->theta = malloc(g->P * sizeof *g->theta);
        g->mom = calloc(g->P, sizeof *g->mom);
        if (!g->theta || !g->mom) goto nomem;
        memcpy(g->theta, x0, g->P * sizeof *g->theta);
        if (g->dol && !(g->sent = malloc(g->P * sizeof *g->sent))) goto nomem;
        if (g->sent) memcpy(g->sent, x0, g->P * sizeof *g->sent);
    }
    /* Snapshot 0 is the initial model, round 0: the reference of accumulators filled before
     * the first round, and what a joining peer gets if it pulls this early. */
    memcpy(g->snaps[0].x, g->theta ? g->theta : x0, g->P * sizeof *g->snaps[0].x);
    memset(g->snaps[0].x + g->P, 0, cfg->extra * sizeof *g->snaps[0].x); /* state starts at 0 */
    for (size_t c = 0; c < g->chunks; c++) g->snaps[0].w[c] = 1.0;
    g->cur_snap = 0;
    g->have_snap = true;
    gsp_own_scale(g);
    g->view = malloc(RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->view);
    g->ranked = malloc(RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->ranked);
    g->self_place = place_or_key(0, cfg->self);
    g->members = malloc(RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->members);
    g->member_boot = malloc(RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->member_boot);
    g->member_reach = malloc(RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->member_reach);
    g->pos_reach = malloc(RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->pos_reach);
    g->reach_grp = malloc(2 * RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->reach_grp);
    g->reach_key = malloc(RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->reach_key);
    g->reach_rank = malloc(2 * RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->reach_rank);
    g->tmp_keys = malloc(RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->tmp_keys);
    g->tmp_boot = malloc(RUMOR_GOSSIP_MAX_MEMBERS * sizeof *g->tmp_boot);
    g->out_cap = 2 * RUMOR_GOSSIP_MAX_MEMBERS;
    g->outbox = malloc(g->out_cap * sizeof *g->outbox);
    if (!g->view || !g->ranked || !g->members || !g->member_boot || !g->member_reach || !g->pos_reach || !g->reach_grp || !g->reach_key ||
        !g->reach_rank || !g->tmp_keys || !g->tmp_boot || !g->outbox)
        goto nomem;
    g->st.w = 1.0;
    return g;
nomem:
    rumor_gossip_destroy(&g);
    rumor_fail(err, RUMOR_ENOMEM, "out of memory for the gossip buffers of %zu parameters", cfg->params);
    return NULL;
}

void rumor_gossip_destroy(rumor_gossip_t **self_p)
{
    rumor_gossip_t *g = *self_p;
    if (!g) return;
    for (int i = 0; i < 2; i++) {
        free(g->snaps[i].x);
        free(g->snaps[i].w);
    }
    for (int i = 0; i < SLOTS; i++) {
        free(g->slots[i].acc);
        free(g->slots[i].accw);
        free(g->slots[i].bits);
        free(g->slots[i].expected);
        free(g->slots[i].cd2);
        free(g->slots[i].tbuf);
        free(g->slots[i].macc);
        free(g->slots[i].mcount);
        free(g->slots[i].mshare);
    }
    free(g->out_rank);
    free(g->out_share);
    free(g->chunk_ok);
    free(g->xhat);
    free(g->x0);
    for (int k = 0; k < 2; k++) {
        free(g->enc[k]);
        free(g->enc_off[k]);
    }
    for (int k = 0; g->copies && k < RUMOR_GOSSIP_CHOCO_PEERS; k++) {
        free(g->copies[k].x);
        free(g->copies[k].ver);
        free(g->copies[k].valid);
    }
    free(g->copies);
    free(g->pend);
    free(g->pend_bytes);
    free(g->tau);
    free(g->moved);
    free(g->own_pg);
    free(g->own_rms);
    free(g->w);
    free(g->theta);
    free(g->mom);
    free(g->sent);
    free(g->view);
    free(g->ranked);
    free(g->member_boot);
    free(g->member_reach);
    free(g->pos_reach);
    free(g->reach_grp);
    free(g->reach_key);
    free(g->reach_adj);
    free(g->reach_deg);
    free(g->reach_rank);
    free(g->tmp_keys);
    free(g->tmp_boot);
    free(g->members);
    free(g->outbox);
    free(g);
    *self_p = NULL;
}

int gsp_key_cmp(const void *a, const void *b) { return memcmp(a, b, RUMOR_KEY_LEN); }

void rumor_gossip_set_view(rumor_gossip_t *g, const uint8_t (*keys)[RUMOR_KEY_LEN], size_t count)
{
    rumor_gossip_set_view_boots(g, keys, NULL, count);
}

void rumor_gossip_set_view_boots(rumor_gossip_t *g, const uint8_t (*keys)[RUMOR_KEY_LEN],
                                 const uint64_t *boots, size_t count)
{
    rumor_gossip_set_view_reach(g, keys, boots, NULL, NULL, count, 0, 0);
}

void rumor_gossip_set_view_reach(rumor_gossip_t *g, const uint8_t (*keys)[RUMOR_KEY_LEN], const uint64_t *boots,
                                 const uint64_t *reach, const uint64_t *place, size_t count, uint64_t self_reach,
                                 uint64_t self_place)
{
    size_t n = 0;
    g->self_reach = self_reach;
    g->self_place = place_or_key(self_place, g->cfg.self);
    for (size_t i = 0; i < count && n < RUMOR_GOSSIP_MAX_MEMBERS - 1; i++)
        if (memcmp(keys[i], g->cfg.self, RUMOR_KEY_LEN) != 0) {
            memcpy(g->view[n].key, keys[i], RUMOR_KEY_LEN);
            g->view[n].reach = reach ? reach[i] : 0;
            g->view[n].place = place_or_key(place ? place[i] : 0, keys[i]);
            g->view[n++].boot = boots ? boots[i] : 0;
        }
    qsort(g->view, n, sizeof *g->view, gsp_key_cmp); /* the key leads the entry */
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || memcmp(g->view[u - 1].key, g->view[i].key, RUMOR_KEY_LEN) != 0) g->view[u++] = g->view[i];
    g->view_count = u;
    uint64_t h = rumor_fnv1a(UINT64_C(0xcbf29ce484222325), &self_reach, sizeof self_reach);
    h = rumor_fnv1a(h, &g->self_place, sizeof g->self_place);
    for (size_t i = 0; i < u; i++) {
        h = rumor_fnv1a(h, g->view[i].key, RUMOR_KEY_LEN);
        h = rumor_fnv1a(h, &g->view[i].boot, sizeof g->view[i].boot);
        h = rumor_fnv1a(h, &g->view[i].reach, sizeof g->view[i].reach);
        h = rumor_fnv1a(h, &g->view[i].place, sizeof g->view[i].place);
    }
    if (h != g->view_hash || g->view_gen == 0) g->view_gen++; /* (round_ready looks at the graph again) */
    g->view_hash = h;
}
