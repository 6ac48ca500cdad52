/* virtual_churn.c - virtual mode's live set (virtual_impl.h): membership driven on the virtual
 * clock, kills and restarts from in-memory checkpoints, partitions, resync and round events. */
#include "virtual_impl.h"

// ---- the live set and churn ----

bool virt_running(const vpeer_t *p) { return p->state == P_COMPUTING || p->state == P_WAITING; }

/* A virtual peer's boot id (the run secure-mixing masks are bound to): from its key, so every
 * peer knows every other's, and a run replays exactly. Like the rest of virtual mode's
 * randomness it is seeded: virtual secure mixing shows the arithmetic, and protects nothing. */
uint64_t virt_vboot(const uint8_t key[RUMOR_KEY_LEN])
{
    return rumor_fnv1a(RUMOR_FNV_BASIS, key, RUMOR_KEY_LEN) | 1u;
}

/* The engine's view: the peer and the members of its membership view. */
void virt_view_set(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    int m = 0;
    p->vboots[m] = virt_vboot(p->key);
    p->vplaces[m] = s->replaying ? s->replay.places[i] : 0;
    memcpy(p->vkeys[m++], p->key, RUMOR_KEY_LEN);
    if (s->replaying) { /* the node's view, as it had it then, ranked as the nodes ranked it */
        const rview_t *v = p->rview >= 0 ? &s->replay.p[i].view[p->rview] : NULL;
        for (int k = 0; v && k < v->n; k++) {
            p->vboots[m] = virt_vboot(s->p[v->idx[k]].key);
            p->vplaces[m] = s->replay.places[v->idx[k]];
            memcpy(p->vkeys[m++], s->p[v->idx[k]].key, RUMOR_KEY_LEN);
        }
    }
    for (int k = 0; !s->replaying && k < rumor_memb_view_count(p->memb); k++) {
        p->vboots[m] = virt_vboot(rumor_memb_view_at(p->memb, k)->key);
        p->vplaces[m] = 0;
        memcpy(p->vkeys[m++], rumor_memb_view_at(p->memb, k)->key, RUMOR_KEY_LEN);
    }
    rumor_gossip_set_view_reach(p->g, (const uint8_t(*)[RUMOR_KEY_LEN])p->vkeys, p->vboots, NULL, p->vplaces,
                                (size_t)m, 0, p->vplaces[0]);
    if (p->trace && (m != p->view_peers || p->view_dirty))
        rumor_trace_view(p->trace, s->now_us, (const uint8_t(*)[RUMOR_KEY_LEN])p->vkeys, m);
    p->view_peers = m;
    p->view_dirty = false;
}

// ---- membership ----

static void addr_of(int i, char addr[RUMOR_MEMB_ADDR_LEN]) { snprintf(addr, RUMOR_MEMB_ADDR_LEN, "sim:%d", i); }


/* Peer i, restarted from its checkpoint, falls into step with the swarm as a resumed node does
 * (src/peer/peer.c, resync; the peer core decides, src/peer/core.h): it asks members of its view, one
 * after another and at most RUMOR_RESYNC_ASKS (one that is gone or cut off uses an ask), for
 * their latest snapshot. When two that are ahead of it confirm each other, it takes their mean,
 * at the lower of their rounds, and that round as its own; otherwise it keeps its checkpoint. */
static rumor_err_t resync(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    rumor_gossip_send_t got[RUMOR_RESYNC_ASKS];
    rumor_gossip_t *lent[RUMOR_RESYNC_ASKS];
    rumor_core_resync_t rs;
    rumor_core_resync_begin(&p->core, &rs, RUMOR_CORE_BEHIND, rumor_model_param_count(p->m));
    int n = 0;
    for (int v = 1, asks = 0; v < p->view_peers && rumor_core_resync_more(&rs, asks); v++, asks++) {
        const int j = virt_index_of(s, p->vkeys[v]);
        if (j < 0 || !virt_running(&s->p[j]) || virt_cut(s, i, j)) continue; /* no answer */
        lent[n] = s->p[j].g;
        rumor_gossip_lend(lent[n], &got[n]);
        if (rumor_core_resync_answer(&p->core, &rs, got[n].params, got[n].round, false) != RUMOR_CORE_TAKEN) {
            rumor_gossip_release(lent[n], &got[n], false);
            continue;
        }
        n++;
    }
    rumor_err_t rc = RUMOR_OK;
    const long k0 = p->core.k;
    uint64_t r;
    if (rumor_core_resync_end(&p->core, &rs, rumor_model_params(p->m), &r)) {
        rumor_trace_resync(p->trace, s->now_us, r, p->core.k);
        rumor_optim_anchor(p->o, rumor_model_params(p->m));
        if (p->core.k != k0) {
            s->at_round[k0]--;
            s->at_round[p->core.k]++;
            if (p->core.k > s->round_top) s->round_top = p->core.k;
            virt_round_min_advance(s);
        }
        rc = virt_model_line(s, i, "resync");
    }
    for (int k = 0; k < n; k++) rumor_gossip_release(lent[k], &got[k], false);
    return rc;
}

/* Whether joining peer i may train: its view holds every other peer, or has not grown for
 * JOIN_QUIET periods (peers that already left, or messages lost), or JOIN_WAIT has passed. */
static bool ready(const sim_t *s, int i)
{
    const vpeer_t *p = &s->p[i];
    const int have = rumor_memb_view_count(p->memb);
    const bool quiet = have > 0 && s->now_us >= p->view_changed_us + JOIN_QUIET * s->mcfg.period_ms * 1000ULL;
    return have >= p->want_view || quiet || s->now_us >= p->join_from_us + JOIN_WAIT_US;
}

static rumor_err_t start(sim_t *s, int i);

/* A joining peer trains once ready. With --tracking, the swarm's first peers start together,
 * once all are ready: a round-0 model sent to a peer still joining is dropped, and tracking
 * needs every round complete. */
static rumor_err_t maybe_start(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    if (p->state != P_JOINING || !ready(s, i)) return RUMOR_OK;
    if (!s->opt.tracking || p->core.k > 0) return start(s, i);
    for (int j = 0; j < s->n; j++)
        if (s->p[j].state == P_JOINING && s->p[j].core.k == 0 && !ready(s, j)) return RUMOR_OK;
    for (int j = 0; j < s->n; j++)
        if (s->p[j].state == P_JOINING && s->p[j].core.k == 0 && start(s, j) != RUMOR_OK) return s->rc;
    return RUMOR_OK;
}

static rumor_err_t start(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    virt_view_set(s, i);
    const rpeer_t *rp = s->replaying ? &s->replay.p[i] : NULL;
    if (rp && rp->resync_k >= 0 && p->core.k == 0) { /* the node joined a running swarm: at its round */
        rumor_gossip_adopt(p->g, rumor_model_params(p->m), rp->resync_round);
        s->at_round[0]--;
        s->at_round[rp->resync_k]++;
        p->core.k = rp->resync_k;
        if (p->core.k > s->round_top) s->round_top = p->core.k;
        virt_round_min_advance(s);
        rumor_trace_resync(p->trace, s->now_us, rp->resync_round, p->core.k);
        if (virt_model_line(s, i, "resync") != RUMOR_OK) return s->rc;
    }
    if (p->resumed) {
        p->resumed = false;
        if (resync(s, i) != RUMOR_OK) return s->rc;
    }
    return virt_schedule_phase(s, i);
}

static size_t pack_str(uint8_t *b, const char *str)
{
    const size_t l = strnlen(str, RUMOR_MEMB_ADDR_LEN - 1) + 1;
    if (b) memcpy(b, str, l - 1), b[l - 1] = 0;
    return l;
}

static size_t pack_upd(uint8_t *b, const rumor_memb_update_t *u)
{
    if (b) {
        memcpy(b, u->key, RUMOR_KEY_LEN);
        memcpy(b + RUMOR_KEY_LEN, &u->inc, 4);
        memcpy(b + RUMOR_KEY_LEN + 4, &u->state, sizeof u->state);
    }
    const size_t at = RUMOR_KEY_LEN + 4 + sizeof u->state;
    return at + pack_str(b ? b + at : NULL, u->addr);
}

/* Pack m into b (b NULL: only its size). */
static size_t memb_pack(uint8_t *b, const rumor_memb_msg_t *m)
{
    const mhead_t h = {.kind = m->kind, .seq = m->seq, .inc = m->inc, .ack = m->ack, .has_target = m->has_target,
                       .n_upd = m->n_upd, .n_peers = m->n_peers};
    size_t at = sizeof h;
    if (b) {
        memcpy(b, &h, sizeof h);
        memcpy(b + offsetof(mhead_t, target), m->target, RUMOR_KEY_LEN);
    }
    at += pack_str(b ? b + at : NULL, m->addr);
    at += pack_str(b ? b + at : NULL, m->target_addr);
    for (int k = 0; k < m->n_upd; k++) at += pack_upd(b ? b + at : NULL, &m->upd[k]);
    for (int k = 0; k < m->n_peers; k++) at += pack_upd(b ? b + at : NULL, &m->peers[k]);
    return at;
}

static size_t unpack_upd(rumor_memb_update_t *u, const uint8_t *b)
{
    memcpy(u->key, b, RUMOR_KEY_LEN);
    memcpy(&u->inc, b + RUMOR_KEY_LEN, 4);
    memcpy(&u->state, b + RUMOR_KEY_LEN + 4, sizeof u->state);
    const size_t at = RUMOR_KEY_LEN + 4 + sizeof u->state;
    const size_t l = strlen((const char *)b + at) + 1;
    memcpy(u->addr, b + at, l);
    return at + l;
}

static void memb_unpack(rumor_memb_msg_t *m, const uint8_t *b)
{
    mhead_t h;
    memcpy(&h, b, sizeof h);
    m->kind = h.kind, m->seq = h.seq, m->inc = h.inc, m->ack = h.ack, m->has_target = h.has_target;
    memcpy(m->target, h.target, RUMOR_KEY_LEN);
    m->n_upd = h.n_upd, m->n_peers = h.n_peers;
    size_t at = sizeof h, l = strlen((const char *)b + at) + 1;
    memcpy(m->addr, b + at, l);
    at += l;
    l = strlen((const char *)b + at) + 1;
    memcpy(m->target_addr, b + at, l);
    at += l;
    for (int k = 0; k < m->n_upd; k++) at += unpack_upd(&m->upd[k], b + at);
    for (int k = 0; k < m->n_peers; k++) at += unpack_upd(&m->peers[k], b + at);
}

/* Carry out what peer i's membership asks: messages onto the network, view changes noted. */
rumor_err_t virt_memb_drain(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    rumor_memb_action_t *a = s->act;
    while (rumor_memb_next_action(p->memb, a)) {
        if (a->kind != RUMOR_MEMB_ACT_SEND) {
            /* A peer waiting at its gossip point looks again: a neighbour that left is not
             * waited for (gossip.c, round_ready). */
            if (p->state == P_WAITING && !p->view_dirty && virt_heap_push(&s->q, s->now_us + 1, i, EV_RETRY, i, p->inc) != RUMOR_OK)
                return virt_fail(s, RUMOR_ENOMEM, "out of memory for events");
            p->view_dirty = true;
            p->view_changed_us = s->now_us;
            continue;
        }
        const int to = virt_index_of(s, a->key);
        if (to < 0) continue; /* cannot happen: members are peers of the simulation */
        if (s->p[to].state == P_FINISHED) continue; /* gone for good: it would drop it on arrival */
        int id;
        if (s->n_mm_free > 0) {
            id = s->mm_free[--s->n_mm_free];
        } else {
            if (s->n_mm == s->cap_mm) {
                const int cap = s->cap_mm ? 2 * s->cap_mm : 1024;
                mmsg_t **v = realloc(s->mm, (size_t)cap * sizeof *v);
                int *f = v ? realloc(s->mm_free, (size_t)cap * sizeof *f) : NULL;
                if (v) s->mm = v;
                if (!v || !f) return virt_fail(s, RUMOR_ENOMEM, "out of memory for membership messages");
                s->mm_free = f, s->cap_mm = cap;
            }
            s->mm[s->n_mm] = NULL;
            id = s->n_mm++;
        }
        mmsg_t *mm = malloc(sizeof *mm + memb_pack(NULL, &a->msg));
        if (!mm) return virt_fail(s, RUMOR_ENOMEM, "out of memory for membership messages");
        s->mm[id] = mm;
        mm->from = i, mm->to = to, mm->from_inc = p->inc;
        memb_pack(mm->data, &a->msg);
        if (virt_heap_push(&s->q, s->now_us + s->latency_us + 1, to, EV_MMSG, id, 0) != RUMOR_OK)
            return virt_fail(s, RUMOR_ENOMEM, "out of memory for events");
    }
    return maybe_start(s, i);
}

/* The next membership tick of peer i: when its state machine next needs one, at least every
 * quarter period (its contract). */
static rumor_err_t memb_schedule(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    uint64_t ms = rumor_memb_next_deadline(p->memb, s->now_us / 1000);
    if (ms > s->mcfg.period_ms / 4) ms = s->mcfg.period_ms / 4;
    if (ms < 1) ms = 1;
    p->mtick_us = (s->now_us / 1000 + ms) * 1000;
    if (virt_heap_push(&s->q, p->mtick_us, i, EV_MTICK, i, p->inc) != RUMOR_OK)
        return virt_fail(s, RUMOR_ENOMEM, "out of memory for events");
    return RUMOR_OK;
}

/* A fresh membership for peer i (at start, and at a restart: a node that restarts remembers
 * nobody and comes back under a higher incarnation), joining through peer 0 at the start
 * and through the first peer still running at a restart. */
rumor_err_t virt_memb_start(sim_t *s, int i, uint32_t inc)
{
    vpeer_t *p = &s->p[i];
    char addr[RUMOR_MEMB_ADDR_LEN], err[RUMOR_ERR_LEN];
    rumor_memb_destroy(&p->memb);
    rumor_memb_config_t mc = s->mcfg;
    rumor_rng_t r;
    rumor_rng_init2(&r, s->c->seed, MEMB_STREAM + (uint64_t)i + 1, inc);
    mc.seed = rumor_rng_next(&r);
    addr_of(i, addr);
    if (!(p->memb = rumor_memb_new(&mc, p->key, addr, inc, err))) return virt_fail(s, rumor_last_error(), "%s", err);
    int boot = i == 0 ? (s->n > 1 ? 1 : -1) : 0;
    if (inc > 1) { /* a restart joins through a peer that runs, as `rumor sim` restarts a node */
        boot = -1;
        for (int j = 0; j < s->n && boot < 0; j++)
            if (j != i && s->p[j].state != P_DEAD && s->p[j].state != P_FINISHED) boot = j;
    }
    if (s->seeded && inc == 1) {
        for (int j = 0; j < s->n; j++) {
            addr_of(j, addr);
            rumor_memb_add(p->memb, s->p[j].key, addr, 1, s->now_us / 1000);
        }
    } else if (boot >= 0 && (i != 0 || inc > 1)) { /* peer 0 is the bootstrap: it joins only after a restart */
        addr_of(boot, addr);
        rumor_memb_join(p->memb, s->p[boot].key, addr, s->now_us / 1000);
    }
    p->view_dirty = true;
    if (virt_memb_drain(s, i) != RUMOR_OK) return s->rc;
    return memb_schedule(s, i);
}

rumor_err_t virt_memb_tick(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    p->mtick_us = 0;
    if (p->state == P_DEAD || p->state == P_FINISHED) return RUMOR_OK;
    rumor_memb_tick(p->memb, s->now_us / 1000);
    if (virt_memb_drain(s, i) != RUMOR_OK) return s->rc;
    return memb_schedule(s, i);
}

/* Whether a partition stands between peers a and b now (at the slowest live peer's round). */
bool virt_cut(const sim_t *s, int a, int b)
{
    for (int k = 0; k < s->c->n_parts; k++) {
        const rumor_sim_part_t *pt = &s->c->parts[k];
        if (s->round_top >= pt->from && s->round_top < pt->to && (a >= pt->lo && a < pt->hi) != (b >= pt->lo && b < pt->hi))
            return true;
    }
    return false;
}

/* A membership message reaches its receiver (unless lost, cut off, or either side is gone). */
rumor_err_t virt_memb_arrive(sim_t *s, int id)
{
    mmsg_t *mm = s->mm[id];
    s->mm[id] = NULL;
    s->mm_free[s->n_mm_free++] = id;
    const int from = mm->from;
    int to = mm->to;
    vpeer_t *pf = &s->p[from], *pt = &s->p[to];
    const bool lost = s->c->loss > 0 && rumor_rng_uniform(&s->mloss_rng) < s->c->loss;
    if (!lost && pf->inc == mm->from_inc && pt->state != P_DEAD && pt->state != P_FINISHED && !virt_cut(s, from, to))
        memb_unpack(s->mscratch, mm->data);
    else
        to = -1;
    free(mm);
    if (to < 0) return RUMOR_OK;
    char addr[RUMOR_MEMB_ADDR_LEN];
    addr_of(from, addr);
    rumor_memb_recv(pt->memb, pf->key, addr, s->mscratch, s->now_us / 1000);
    return virt_memb_drain(s, to);
}

void virt_round_min_advance(sim_t *s)
{
    while (s->round_min <= s->c->rounds && s->at_round[s->round_min] == 0) s->round_min++;
}

/* Peer i's round from round k on (its start, or a checkpoint's), with its engine of now. */
void virt_core_start(sim_t *s, int i, long k)
{
    rumor_core_init(&s->p[i].core, &s->core_c, s->p[i].g, k, (double)s->now_us / 1e6);
}

rumor_err_t virt_schedule_phase(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    const double slow = i == s->c->straggler && s->c->slowdown > 0 ? s->c->slowdown : 1.0;
    rumor_core_phase(&p->core, &p->ph); /* here: the phase may run on the other core */
    uint64_t dur = (uint64_t)llround((double)p->ph.count * (double)s->step_us * slow);
    if (!p->trace_started) {
        rumor_trace_start(p->trace, s->now_us);
        p->trace_started = true;
    }
    bool known = false;
    const uint64_t at = s->replaying ? virt_replay_phase_end(&s->replay, i, &known) : 0;
    if (known) dur = at > s->now_us ? at - s->now_us : 0; /* when the node's phase ended */
    p->state = P_COMPUTING;
    if (virt_heap_push(&s->q, s->now_us + (dur ? dur : 1), i, EV_PHASE, i, p->inc) != RUMOR_OK)
        return virt_fail(s, RUMOR_ENOMEM, "out of memory for events");
    virt_queue_phase(s, i);
    return RUMOR_OK;
}


/* Peer i's checkpoint, in memory: what its file would hold. */
rumor_err_t virt_ckpt_save(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    vckpt_t *ck = &p->ckpt;
    const size_t P = rumor_model_param_count(p->m), nc = rumor_gossip_chunk_count(p->g);
    const int ns = rumor_optim_state_count(p->o);
    const bool diloco = p->gc.algo.kind == RUMOR_ALGO_DILOCO;
    if (!ck->x) {
        ck->x = malloc(P * sizeof *ck->x);
        ck->w = malloc(nc * sizeof *ck->w);
        ck->opt = ns ? malloc((size_t)ns * P * sizeof *ck->opt) : NULL;
        ck->theta = diloco ? malloc(P * sizeof *ck->theta) : NULL;
        ck->mom = diloco ? malloc(P * sizeof *ck->mom) : NULL;
        if (!ck->x || !ck->w || (ns && !ck->opt) || (diloco && (!ck->theta || !ck->mom)))
            return virt_fail(s, RUMOR_ENOMEM, "out of memory for peer %d's checkpoint", i);
    }
    if (virt_metrics_settle(s, i) != RUMOR_OK) return s->rc; /* the round's line is in what it keeps */
    memcpy(ck->x, rumor_model_params(p->m), P * sizeof *ck->x);
    memcpy(ck->w, rumor_gossip_weights(p->g), nc * sizeof *ck->w);
    for (int k = 0; k < ns; k++) memcpy(ck->opt + (size_t)k * P, rumor_optim_state(p->o, k), P * sizeof *ck->opt);
    if (diloco) {
        memcpy(ck->theta, rumor_gossip_outer(p->g), P * sizeof *ck->theta);
        memcpy(ck->mom, rumor_gossip_momentum(p->g), P * sizeof *ck->mom);
    }
    ck->steps = rumor_optim_steps(p->o);
    ck->dp_steps = p->dp ? rumor_dp_steps(p->dp) : 0;
    ck->k = p->core.k;
    ck->round = rumor_gossip_round(p->g);
    ck->mbytes = p->mflushed + p->mlen;
    ck->has = true;
    return RUMOR_OK;
}

/* Restarted: back to the checkpoint, with a new engine (its old one stays until the sends it
 * lent are released) and the metrics cut back to the checkpoint's round. */
static rumor_err_t ckpt_restore(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    const vckpt_t *ck = &p->ckpt;
    const size_t P = rumor_model_param_count(p->m);
    char err[RUMOR_ERR_LEN];
    /* a line of its life before the kill still waiting for its evaluation goes where it
     * would have gone, and is cut with the rest after the checkpoint */
    if (virt_metrics_settle(s, i) != RUMOR_OK) return s->rc;
    rumor_gossip_t **og = realloc(p->old_g, (size_t)(p->n_old_g + 1) * sizeof *og);
    if (!og) return virt_fail(s, RUMOR_ENOMEM, "out of memory");
    p->old_g = og;
    p->old_g[p->n_old_g++] = p->g;
    p->g = NULL;
    float *x = rumor_model_params(p->m);
    memcpy(x, ck->x, P * sizeof *x);
    if (p->gc.lineage) p->gc.lineage = (p->gc.lineage * 0x9e3779b97f4a7c15ull + (uint64_t)++p->restarts) | 1;
    if (!(p->g = rumor_gossip_new(&p->gc, s->topo, x, err))) return virt_fail(s, rumor_last_error(), "%s", err);
    if (rumor_gossip_restore(p->g, ck->round, ck->w, rumor_gossip_chunk_count(p->g), err) != RUMOR_OK)
        return virt_fail(s, RUMOR_EINVAL, "peer %d: %s", i, err);
    if (ck->theta) {
        memcpy(rumor_gossip_outer(p->g), ck->theta, P * sizeof(float));
        memcpy(rumor_gossip_momentum(p->g), ck->mom, P * sizeof(float));
    }
    for (int k = 0; k < rumor_optim_state_count(p->o); k++)
        memcpy(rumor_optim_state(p->o, k), ck->opt + (size_t)k * P, P * sizeof(float));
    rumor_optim_set_steps(p->o, ck->steps);
    rumor_optim_anchor(p->o, x); /* qgm: motion counts from the restored model */
    if (p->dp) rumor_dp_restore(p->dp, ck->dp_steps);
    virt_core_start(s, i, ck->k);
    p->wait_done_us = 0;
    p->coded.set[0] = p->coded.set[1] = false;
    p->view_dirty = true;
    if (ck->mbytes >= p->mflushed) {
        p->mlen = ck->mbytes - p->mflushed;
    } else {
        char path[1100];
        virt_metrics_path(s, i, path, sizeof path);
        if (truncate(path, (off_t)ck->mbytes) != 0) return virt_fail(s, RUMOR_EIO, "%s: %s", path, strerror(errno));
        p->mflushed = ck->mbytes, p->mlen = 0;
    }
    return RUMOR_OK;
}

static void kill_peer(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    if (p->state == P_DEAD) return;
    if (p->state == P_COMPUTING) {
        /* The phase may be running on the other core already: let it finish, and count it
         * as done before the crash (the restarted peer goes on to gossip). */
        (void)virt_ensure_phase(s, i);
        p->state = P_WAITING;
        p->waits_from_us = s->now_us;
    }
    p->before_kill = p->state;
    s->n_finished -= p->state == P_FINISHED;
    p->state = P_DEAD;
    p->inc++;
    p->retry_ms = 0;
    s->alive[i] = false;
    s->n_alive--;
    s->at_round[p->core.k]--;
    virt_round_min_advance(s);
}

static rumor_err_t restart_peer(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    if (p->state != P_DEAD) return RUMOR_OK;
    p->inc++;
    s->alive[i] = true;
    s->n_alive++;
    p->state = p->before_kill;
    s->n_finished += p->state == P_FINISHED;
    if (p->state != P_FINISHED && p->ckpt.has) {
        /* Back to its checkpoint; like a resumed node it trains once two members are in its
         * view (or its view has stopped growing), not alone on an empty one. */
        if (ckpt_restore(s, i) != RUMOR_OK) return s->rc;
        p->state = P_JOINING;
        p->join_from_us = s->now_us;
        p->want_view = s->n - 1 < 2 ? s->n - 1 : 2;
        p->resumed = !s->c->secure_mix; /* secure mixing lends no model in the clear */
    }
    s->at_round[p->core.k]++;
    if (p->core.k < s->round_min) s->round_min = p->core.k;
    if (p->state != P_FINISHED && virt_memb_start(s, i, rumor_memb_incarnation(p->memb) + 1) != RUMOR_OK) return s->rc;
    if (p->state == P_JOINING) return maybe_start(s, i);
    if (p->state == P_COMPUTING) return virt_schedule_phase(s, i); /* the phase cut by the kill, again */
    if (p->state == P_WAITING) return virt_try_gossip(s, i);
    return RUMOR_OK;
}

rumor_err_t virt_fire_churn(sim_t *s, int idx)
{
    const rumor_sim_event_t *e = &s->c->events[idx];
    const bool kill = e->kind == RUMOR_SIM_KILL;
    int *cand = malloc((size_t)s->n * sizeof *cand), nc = 0, take = 0;
    if (!cand) return virt_fail(s, RUMOR_ENOMEM, "out of memory");
    for (int i = 0; i < s->n; i++)
        if ((s->p[i].state == P_DEAD) != kill && (e->peer < 0 || e->peer == i)) cand[nc++] = i;
    if (e->peer >= 0) {
        take = nc;
    } else {
        take = (int)(((long)e->percent * s->n + 50) / 100);
        if (take < 1 && e->percent > 0) take = 1;
        if (take > nc) take = nc;
        /* The first `take` of a seeded partial shuffle, then in index order. */
        rumor_rng_t rng;
        rumor_rng_init2(&rng, s->c->seed, CHURN_STREAM, (uint64_t)idx);
        for (int k = 0; k < take; k++) {
            const int j = k + (int)rumor_rng_below(&rng, (uint64_t)(nc - k));
            const int t = cand[k];
            cand[k] = cand[j], cand[j] = t;
        }
        for (int k = 1; k < take; k++) /* insertion sort: take is small */
            for (int j = k; j > 0 && cand[j - 1] > cand[j]; j--) {
                const int t = cand[j];
                cand[j] = cand[j - 1], cand[j - 1] = t;
            }
    }
    if (!s->c->quiet && take > 0)
        rumor_log(RUMOR_LOG_INFO, "virtual t=%.3fs: %s %d peer%s (%d live)", (double)s->now_us / 1e6,
                  kill ? "killed" : "restarted", take, take == 1 ? "" : "s", s->n_alive + (kill ? -take : take));
    for (int k = 0; k < take && s->rc == RUMOR_OK; k++) {
        if (kill)
            kill_peer(s, cand[k]);
        else
            (void)restart_peer(s, cand[k]);
    }
    free(cand);
    return s->rc;
}

/* Churn at a round fires once the slowest live peer has done that many rounds. */
rumor_err_t virt_round_churn(sim_t *s)
{
    while (s->rc == RUMOR_OK && s->next_round_ev < s->n_round_ev && s->n_alive > 0) {
        const int idx = s->round_ev[s->next_round_ev];
        if (s->c->events[idx].at_round > s->round_min) break;
        s->next_round_ev++;
        (void)virt_fire_churn(s, idx);
    }
    return s->rc;
}
